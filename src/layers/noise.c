/* Keras's regularization layers that perturb their input while training and are the
 * identity at inference (copies_at_inference):
 *   Dropout(rate, noise_shape, seed)           y = x keep / (1 - rate), keep ~ Bernoulli(1 - rate)
 *   SpatialDropout1D/2D/3D(rate, seed)          the same, one keep per example and channel
 *   AlphaDropout(rate, noise_shape, seed)       y = a (keep x + (1 - keep) alpha') + b, SELU's
 *                                               alpha' = -alpha scale (keeps mean and variance)
 *   GaussianNoise(stddev, seed)                 y = x + stddev z, z ~ N(0, 1)
 *   GaussianDropout(rate, seed)                 y = x (1 + sqrt(rate / (1 - rate)) z)
 * Each draw comes from Philox at (layer key, step, index), so backward regenerates it:
 * dx += m dy, m the factor of x. A noise_shape with 1s (Keras's broadcast mask: [null, 1, C]
 * for one mask per sequence and channel) makes the axes there share their draws; those axes
 * must be adjacent, which covers every SpatialDropout and the masks a user writes. Dropout
 * without one runs the backend's dropout ops; the others the noise ops (TFC_BACKEND_LAYER_OPS,
 * CPU-first, so `--device gpu` refuses them naming the layer). */
#include <math.h>
#include <string.h>

#include "layers/layer.h"
#include "core/rng.h"

typedef struct noise_args {
    double rate;                   /* the dropouts' fraction; GaussianNoise's stddev */
    int seed, data_format;
    const tfc_node *noise_shape;   /* Dropout, AlphaDropout: null or [null | 1 | size, ...] */
    /* set by build: the kind, and the split of a batch into [groups, rows, cols] where the
     * rows share their draws: groups = batch lead (or 1 with the batch axis shared, rows
     * then batch run), rows = run, cols = after */
    tfc_noise_kind kind;
    float stddev, a, shift, dropped;
    int batch_shared;
    int64_t lead, run, after;
} noise_args;

#define NOISE_RATE(hint) \
    {"rate", TFC_F_FLOAT, offsetof(noise_args, rate), NULL, 0, 0.999999, NULL, hint}
#define NOISE_SEED                                                                             \
    {"seed", TFC_F_INT, offsetof(noise_args, seed), "0", 0, 2147483647, NULL,                  \
     "mixed into the run's seed for this layer's draws"}
#define NOISE_SHAPE                                                                            \
    {"noise_shape", TFC_F_NODE, offsetof(noise_args, noise_shape), TFC_NO_DEFAULT,             \
     TFC_UNBOUNDED, NULL, "null, or the mask's shape with the batch axis: [null, 1, 64]"}

static const tfc_field dropout_fields[] = {
    NOISE_RATE("fraction of inputs to drop, in [0, 1)"), NOISE_SEED, NOISE_SHAPE, {NULL}};
static const tfc_field spatial1d_fields[] = {
    NOISE_RATE("fraction of channels to drop, in [0, 1)"), NOISE_SEED, {NULL}};
static const tfc_field spatial_fields[] = {
    NOISE_RATE("fraction of channels to drop, in [0, 1)"),
    TFC_DATA_FORMAT_FIELD(noise_args, data_format), NOISE_SEED, {NULL}};
static const tfc_field gaussian_noise_fields[] = {
    {"stddev", TFC_F_FLOAT, offsetof(noise_args, rate), NULL, 0, 1, NULL,
     "standard deviation of the noise added, in [0, 1] (Keras's range)"},
    NOISE_SEED, {NULL}};
static const tfc_field gaussian_dropout_fields[] = {
    NOISE_RATE("drop probability, in [0, 1): the noise's stddev is sqrt(rate / (1 - rate))"),
    NOISE_SEED, {NULL}};

/* The split for per-axis flags shared[0..ndim] (0: the batch axis; 1: the axis shares its
 * draws), in_shape's axes of size 1 going with either side. */
static tfc_status noise_split(tfc_layer *l, const int *shared, tfc_error *err)
{
    noise_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    const int nd = in->ndim;
    int first = -1, last = -1;
    for (int i = 0; i <= nd; i++)
        if (shared[i] && (i == 0 || in->dim[i - 1] > 1)) {
            if (first < 0) first = i;
            last = i;
        }
    for (int i = first + 1; i < last; i++)
        if (!shared[i] && in->dim[i - 1] > 1)
            return tfc_layer_error(err, l,
                                   "noise_shape: the axes of size 1 (shared draws) must be "
                                   "adjacent; axis %d between them is not", i);
    a->batch_shared = first == 0;
    a->lead = a->run = a->after = 1;
    for (int i = 1; i <= nd; i++) {
        int64_t d = in->dim[i - 1];
        if (first < 0 || i > last) a->after *= d;
        else if (i < first) a->lead *= d;
        else a->run *= d;
    }
    return TFC_OK;
}

/* Dropout's and AlphaDropout's noise_shape: null, or one entry per axis with the batch's
 * first, each null or the axis's size (a draw per element) or 1 (shared). */
static tfc_status noise_shape_flags(tfc_layer *l, int *shared, tfc_error *err)
{
    const noise_args *a = l->args;
    const tfc_node *n = a->noise_shape;
    const tfc_shape *in = &l->in_shape[0];
    char path[128];
    snprintf(path, sizeof path, "layers[%d].%s.noise_shape", l->index, l->ops->type);
    memset(shared, 0, sizeof(int) * (TFC_MAX_DIMS + 1));
    if (!n || tfc_node_is_null(n)) return TFC_OK;
    if (n->kind != TFC_NODE_SEQ || n->n != in->ndim + 1)
        return tfc_node_error(err, TFC_ERR_CONFIG, n, path,
                              "must be null or a list of %d entries, the batch axis's first "
                              "(the input has %d axes besides it)", in->ndim + 1, in->ndim);
    for (int i = 0; i <= in->ndim; i++) {
        const tfc_node *v = n->vals[i];
        long long d;
        if (tfc_node_is_null(v)) continue;
        if (tfc_node_int(v, path, 1, INT64_MAX, &d, err)) return TFC_ERR_CONFIG;
        if (d == 1) {
            shared[i] = 1;
        } else if (i == 0) {
            return tfc_node_error(err, TFC_ERR_CONFIG, v, path,
                                  "the batch axis's entry must be null (a draw per example) "
                                  "or 1 (shared by the batch), not %lld", d);
        } else if (d != in->dim[i - 1]) {
            return tfc_node_error(err, TFC_ERR_CONFIG, v, path,
                                  "entry %d is %lld, but that axis has %lld: write null, "
                                  "the size, or 1", i, d, (long long)in->dim[i - 1]);
        }
    }
    return TFC_OK;
}

static tfc_status noise_finish(tfc_layer *l, const int *shared, tfc_error *err)
{
    l->out_shape = l->in_shape[0];
    return noise_split(l, shared, err);
}

static tfc_status dropout_build(tfc_layer *l, tfc_error *err)
{
    noise_args *a = l->args;
    int shared[TFC_MAX_DIMS + 1];
    a->kind = TFC_NOISE_DROPOUT;
    if (noise_shape_flags(l, shared, err)) return TFC_ERR_CONFIG;
    return noise_finish(l, shared, err);
}

/* SpatialDropout1D/2D/3D: inputs of nd axes besides the batch's (steps | rows, cols |
 * dim1, dim2, dim3, then channels), every axis but the batch's and the channels' shared */
static tfc_status spatial_build(tfc_layer *l, int nd, const char *axes, tfc_error *err)
{
    noise_args *a = l->args;
    int shared[TFC_MAX_DIMS + 1] = {0};
    if (l->in_shape[0].ndim != nd)
        return tfc_layer_error(err, l, "takes inputs of %d axes besides the batch's (%s), "
                               "not %d", nd, axes, l->in_shape[0].ndim);
    for (int i = 1; i < nd; i++) shared[i] = 1;
    a->kind = TFC_NOISE_DROPOUT;
    return noise_finish(l, shared, err);
}

static tfc_status spatial1d_build(tfc_layer *l, tfc_error *err)
{
    return spatial_build(l, 2, "steps, channels", err);
}

static tfc_status spatial2d_build(tfc_layer *l, tfc_error *err)
{
    return spatial_build(l, 3, "rows, cols, channels", err);
}

static tfc_status spatial3d_build(tfc_layer *l, tfc_error *err)
{
    return spatial_build(l, 4, "dim1, dim2, dim3, channels", err);
}

static tfc_status alpha_dropout_build(tfc_layer *l, tfc_error *err)
{
    noise_args *a = l->args;
    int shared[TFC_MAX_DIMS + 1];
    /* Keras's constants and affine correction, in double as Python computes them; the
     * dropped value a alpha' + b as Keras's float32 ops round it */
    const double alpha = 1.6732632423543772848170429916717;
    const double scale = 1.0507009873554804934193349852946;
    const double alpha_p = -alpha * scale, r = a->rate;
    const double ka = pow((1 - r) * (1 + r * alpha_p * alpha_p), -0.5);
    a->kind = TFC_NOISE_ALPHA;
    a->a = (float)ka;
    a->shift = (float)(-ka * alpha_p * r);
    volatile float prod = a->a * (float)alpha_p;
    a->dropped = prod + a->shift;
    if (noise_shape_flags(l, shared, err)) return TFC_ERR_CONFIG;
    return noise_finish(l, shared, err);
}

static tfc_status gaussian_noise_build(tfc_layer *l, tfc_error *err)
{
    noise_args *a = l->args;
    int shared[TFC_MAX_DIMS + 1] = {0};
    a->kind = TFC_NOISE_GAUSSIAN;
    a->stddev = (float)a->rate;
    return noise_finish(l, shared, err);
}

static tfc_status gaussian_dropout_build(tfc_layer *l, tfc_error *err)
{
    noise_args *a = l->args;
    int shared[TFC_MAX_DIMS + 1] = {0};
    a->kind = TFC_NOISE_GAUSSIAN_MUL;
    a->stddev = (float)sqrt(a->rate / (1.0 - a->rate));
    return noise_finish(l, shared, err);
}

/* Dropout with a draw per element: the backend's dropout ops */
static int plain_dropout(const noise_args *a)
{
    return a->kind == TFC_NOISE_DROPOUT && !a->batch_shared && a->run == 1;
}

static tfc_noise_desc noise_desc(const tfc_layer *l, const tfc_exec *ex)
{
    const noise_args *a = l->args;
    tfc_noise_desc d = {.kind = a->kind, .rate = (float)a->rate, .stddev = a->stddev,
                        .a = a->a, .shift = a->shift, .dropped = a->dropped,
                        .key = a->seed ? tfc_rng_key(l->rng_key, (uint64_t)a->seed)
                                       : l->rng_key,
                        .step = ex->step};
    d.groups = a->batch_shared ? 1 : ex->batch * a->lead;
    d.rows = a->batch_shared ? ex->batch * a->run : a->run;
    d.cols = a->after;
    return d;
}

/* whether the layer changes its input in this pass */
static int noise_active(const tfc_layer *l, const tfc_exec *ex)
{
    const noise_args *a = l->args;
    return ex->training && a->rate > 0;
}

static void noise_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const noise_args *a = l->args;
    const int64_t n = (int64_t)ex->batch * tfc_layer_out_numel(l);
    tfc_noise_desc d = noise_desc(l, ex);
    if (!noise_active(l, ex))
        ex->be->ops->copy(ex->be, y, x[0], (size_t)n * 4);
    else if (plain_dropout(a))
        ex->be->ops->dropout_forward(ex->be, n, d.rate, d.key, d.step, x[0], y);
    else
        ex->be->ops->noise_forward(ex->be, &d, x[0], y);
}

static void noise_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                           const float *dy, float *const *dx)
{
    const noise_args *a = l->args;
    const int64_t n = (int64_t)ex->batch * tfc_layer_out_numel(l);
    tfc_noise_desc d = noise_desc(l, ex);
    if (!dx[0]) return;
    /* where dx's block starts here (ex->fresh), written rather than added */
    const int fresh = ex->fresh & 1;
    if (!noise_active(l, ex)) {
        if (fresh)
            ex->be->ops->copy(ex->be, dx[0], dy, (size_t)n * 4);
        else
            ex->be->ops->axpy(ex->be, n, 1.f, dy, dx[0]);
    } else if (plain_dropout(a)) {
        if (fresh)
            ex->be->ops->dropout_forward(ex->be, n, d.rate, d.key, d.step, dy, dx[0]);
        else
            ex->be->ops->dropout_backward(ex->be, n, d.rate, d.key, d.step, dy, dx[0]);
    } else {
        ex->be->ops->noise_backward(ex->be, &d, dy, dx[0], fresh);
    }
}

static const char *const *noise_needs(const tfc_layer *l)
{
    static const char *const ops[] = {"noise_forward", "noise_backward", NULL};
    return plain_dropout(l->args) ? NULL : ops;
}

#define NOISE_OPS(name, fields, build_fn)                                                      \
    .type = name, .schema = fields, .args_size = sizeof(noise_args), .min_inputs = 1,          \
    .max_inputs = 1, .keeps_mask = 1, .copies_at_inference = 1, .assigns_grads = 1,           \
    .build = build_fn, .forward = noise_forward, .backward = noise_backward,                   \
    .needs = noise_needs

const tfc_layer_ops tfc_dropout_ops = {NOISE_OPS("Dropout", dropout_fields, dropout_build)};
const tfc_layer_ops tfc_spatial_dropout1d_ops = {
    NOISE_OPS("SpatialDropout1D", spatial1d_fields, spatial1d_build)};
const tfc_layer_ops tfc_spatial_dropout2d_ops = {
    NOISE_OPS("SpatialDropout2D", spatial_fields, spatial2d_build)};
const tfc_layer_ops tfc_spatial_dropout3d_ops = {
    NOISE_OPS("SpatialDropout3D", spatial_fields, spatial3d_build)};
const tfc_layer_ops tfc_alpha_dropout_ops = {
    NOISE_OPS("AlphaDropout", dropout_fields, alpha_dropout_build)};
const tfc_layer_ops tfc_gaussian_noise_ops = {
    NOISE_OPS("GaussianNoise", gaussian_noise_fields, gaussian_noise_build)};
const tfc_layer_ops tfc_gaussian_dropout_ops = {
    NOISE_OPS("GaussianDropout", gaussian_dropout_fields, gaussian_dropout_build)};
