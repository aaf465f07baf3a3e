/* SpectralNormalization (keras.layers.SpectralNormalization): a wrapper that, in training,
 * divides its inner layer's kernel W, seen as a matrix [rows, cols] with cols its last axis,
 * by an estimate of its largest singular value, then runs the inner layer; at inference it
 * runs the inner layer alone. The estimate is power_iterations steps from the stored
 * vector_u [1, cols] (Keras's normalize: x times min(rsqrt(sum x^2), 1e7)):
 *     v = normalize(u W^T),  u = normalize(v W),  sigma = v W u^T,  W <- W / sigma
 * and vector_u keeps the last u; a kernel all zeros is left as it is (u too). As Keras on the
 * TensorFlow backend, W is ASSIGNED (the stored kernel is the normalized one) and the
 * gradient reaches it as the plain inner layer's does; Keras on JAX drops the assignment of
 * a trainable variable in its stateless call, so there the gradient flows through W / sigma
 * to the raw kernel (docs/layers.md). Weights <name>/<inner>/kernel, ..., <name>/vector_u
 * (not trainable, truncated normal of stddev 0.02): Keras 3's paths. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"

typedef struct sn_args {
    const tfc_node *layer;
    int power_iterations;
} sn_args;

static const tfc_field sn_fields[] = {
    {"layer", TFC_F_NODE, offsetof(sn_args, layer), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "the layer whose kernel is normalized: {Dense: {...}}, {Conv2D: {...}}, ..."},
    {"power_iterations", TFC_F_INT, offsetof(sn_args, power_iterations), "1", 1, 1 << 20,
     NULL, "power iteration steps per training call"},
    {NULL}};

/* The layers of tfc whose Keras class has a `kernel` attribute, which Keras's
 * SpectralNormalization requires (or `embeddings`: Embedding, refused in build), the others
 * refused, naming them. */
static const char *const wrappable[] = {
    "Dense", "EinsumDense", "Conv1D", "Conv2D", "Conv3D", "Conv1DTranspose", "Conv2DTranspose",
    "Conv3DTranspose", "DepthwiseConv1D", "DepthwiseConv2D", NULL};

static int listed(const char *type)
{
    for (const char *const *n = wrappable; *n; n++)
        if (!strcmp(*n, type)) return 1;
    return 0;
}

typedef struct sn_state {
    tfc_layer in;          /* the inner layer; its parameters are this layer's */
    tfc_inner_args ia;     /* the inner layer's arguments without `name` */
    int kernel;            /* index of the normalized weight among the parameters */
    int64_t rows, cols;    /* W as a matrix */
} sn_state;

static void sn_free(tfc_layer *l)
{
    sn_state *st = l->state;
    if (!st) return;
    if (st->in.ops && st->in.ops->free_state) st->in.ops->free_state(&st->in);
    free(st->in.args);
    tfc_inner_args_free(&st->ia);
    free(st);
    l->state = NULL;
}

extern const tfc_layer_ops tfc_spectral_normalization_ops;

static tfc_status sn_build(tfc_layer *l, tfc_error *err)
{
    const sn_args *a = l->args;
    const tfc_node *n = a->layer;
    if (!n || n->kind != TFC_NODE_MAP || n->n != 1 ||
        n->vals[0]->kind == TFC_NODE_SEQ)
        return tfc_layer_error(err, l, "layer: expected one layer with its arguments, "
                                       "{Dense: {units: 4}}, {Conv2D: {...}}, ...");
    const char *type = n->keys[0]->str;
    const tfc_layer_ops *ops = tfc_layer_lookup(type);
    if (ops && !strcmp(ops->type, "Embedding"))
        return tfc_layer_error(err, l, "layer: Embedding is not supported: Keras's "
                                       "SpectralNormalization casts its output to the input's "
                                       "dtype, which for an Embedding is its int32 ids");
    if (!ops || !listed(ops->type))
        return tfc_layer_error(err, l, "layer: %s has no kernel nor embeddings for "
                                       "SpectralNormalization to normalize (Dense, EinsumDense, "
                                       "the convolutions and their transposes, "
                                       "DepthwiseConv1D/2D)", type);
    sn_free(l);
    sn_state *st = calloc(1, sizeof *st);
    if (!st) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    l->state = st;
    tfc_layer *d = &st->in;
    if (tfc_layer_parse_inner(l, ops, n->vals[0], &st->ia, d,
                              "(Keras penalises the inner layer's output); put an "
                              "ActivityRegularization layer after it", err))
        return TFC_ERR_CONFIG;
    d->ops = ops;
    d->index = l->index;
    d->node = l->node;
    d->ninputs = 1;
    d->inputs[0] = l->inputs[0];
    d->in_shape[0] = l->in_shape[0];
    d->in_dtype[0] = l->in_dtype[0];
    d->pure_act = ops->pure_act;
    d->act = TFC_ACT_LINEAR;
    d->max_batch = 1;
    if (tfc_layer_channels_last(d, err) || ops->build(d, err)) return TFC_ERR_CONFIG;
    if (d->mask_out)
        return tfc_layer_error(err, l, "layer: %s making a mask inside SpectralNormalization "
                                       "is not supported (mask_zero: false)", ops->type);
    l->out_shape = d->out_shape;
    /* the activation, elementwise or over the last axis, is the graph's around this layer */
    l->act = d->act;
    l->pure_act = 0;
    l->id_limit = d->id_limit;
    st->kernel = -1;
    for (int p = 0; p < d->nparams; p++) {
        const tfc_param *ip = &d->params[p];
        if (st->kernel < 0 && !strcmp(ip->name, "kernel")) st->kernel = p;
        char pname[sizeof ip->name];
        int len = snprintf(pname, sizeof pname, "%s/%s", d->name, ip->name);
        if (len >= (int)sizeof pname)
            return tfc_layer_error(err, l, "layer.%s.name: '%s/%s' is longer than %d "
                                           "characters", ops->type, d->name, ip->name,
                                   (int)sizeof pname - 1);
        tfc_param *q = tfc_layer_add_param(l, pname, ip->shape.ndim, ip->shape.dim,
                                           ip->trainable, ip->init);
        q->constant = ip->constant;
        q->regularizer = ip->regularizer;
    }
    TFC_ASSERT(st->kernel >= 0);
    const tfc_shape *ks = &d->params[st->kernel].shape;
    st->cols = ks->dim[ks->ndim - 1];
    st->rows = tfc_shape_numel(ks) / st->cols;
    tfc_init ui = {.kind = TFC_INIT_TRUNCATED_NORMAL, .a = 0.0, .b = 0.02};
    tfc_layer_add_param(l, "vector_u", 2, (int64_t[]){1, st->cols}, 0, ui);
    l->fixed_floats = d->fixed_floats;
    l->saved_floats = d->saved_floats;
    return TFC_OK;
}

static const char *const *sn_needs(const tfc_layer *l)
{
    const sn_state *st = l->state;
    return st->in.ops->needs ? st->in.ops->needs(&st->in) : NULL;
}

/* Bytes of n floats, 64-byte aligned */
static size_t bytes_of(int64_t n) { return ((size_t)n * sizeof(float) + 63) & ~(size_t)63; }

/* v [rows] and t = v W [cols], before the inner layer's workspace */
static size_t own_bytes(const sn_state *st) { return bytes_of(st->rows) + bytes_of(st->cols); }

static void sn_plan(tfc_layer *l, tfc_backend *be)
{
    sn_state *st = l->state;
    st->in.max_batch = l->max_batch;
    st->in.workspace = 0;
    if (st->in.ops->plan) st->in.ops->plan(&st->in, be);
    l->workspace = own_bytes(st) + st->in.workspace;
}

/* The inner layer bound to this layer's parameters and saved buffers, and its exec: the
 * workspace past this layer's own */
static tfc_exec bind_inner(tfc_layer *l, const tfc_exec *ex)
{
    sn_state *st = l->state;
    tfc_layer *d = &st->in;
    d->saved = l->saved;
    d->mask = NULL;
    d->rng_key = l->rng_key;
    for (int p = 0; p < d->nparams; p++) {
        d->params[p].data = l->params[p].data;
        d->params[p].grad = l->params[p].grad;
    }
    tfc_exec sub = *ex;
    sub.ws = (char *)ex->ws + own_bytes(st);
    sub.fresh = 0;
    sub.params_fresh = 0;
    sub.relu_x = NULL;
    sub.ids = NULL;
    sub.ids_table = NULL;
    return sub;
}

/* min(rsqrt(ss), 1 / epsilon): keras.ops.normalize's factor, epsilon 1e-7 */
static double inv_norm(double ss) { return ss > 1e-14 ? 1.0 / sqrt(ss) : 1e7; }

/* The power iteration and W <- W / sigma, in place, with u updated (the formula above) */
static void normalize_kernel(sn_state *st, tfc_backend *be, int iters, float *w, float *u,
                             void *ws)
{
    const int rows = (int)st->rows, cols = (int)st->cols;
    if (be->ops->sumsq(be, st->rows * st->cols, w) == 0.0) return; /* Keras's all(W == 0) */
    float *v = ws, *t = (float *)((char *)ws + bytes_of(st->rows));
    double ss = 0.0, inv = 0.0;
    for (int i = 0; i < iters; i++) {
        /* v [1, rows] = normalize(u [1, cols] W^T) */
        be->ops->gemm(be, 0, 1, 1, rows, cols, 1.0f, u, cols, w, cols, 0.0f, v, rows);
        be->ops->scale(be, rows, (float)inv_norm(be->ops->sumsq(be, rows, v)), v);
        /* t [1, cols] = v W; u = normalize(t) */
        be->ops->gemm(be, 0, 0, 1, cols, rows, 1.0f, v, rows, w, cols, 0.0f, t, cols);
        ss = be->ops->sumsq(be, cols, t);
        inv = inv_norm(ss);
        be->ops->copy(be, u, t, (size_t)cols * sizeof(float));
        be->ops->scale(be, cols, (float)inv, u);
    }
    /* sigma = v W u^T = t . t inv */
    be->ops->scale(be, st->rows * st->cols, (float)(1.0 / (ss * inv)), w);
}

static void sn_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    sn_state *st = l->state;
    const sn_args *a = l->args;
    tfc_exec sub = bind_inner(l, ex);
    if (ex->training)
        normalize_kernel(st, ex->be, a->power_iterations, l->params[st->kernel].data,
                         l->params[l->nparams - 1].data, ex->ws);
    st->in.ops->forward(&st->in, &sub, x, y);
}

static void sn_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                        const float *dy, float *const *dx)
{
    sn_state *st = l->state;
    tfc_exec sub = bind_inner(l, ex);
    st->in.ops->backward(&st->in, &sub, x, y, dy, dx);
}

const tfc_layer *tfc_spectral_normalization_inner(const tfc_layer *l)
{
    const sn_state *st = l->state;
    return &st->in;
}

/* CPU-first until make test-gpu's train_spectral_normalization has run it on a GPU */
const tfc_layer_ops tfc_spectral_normalization_ops = {
    .type = "SpectralNormalization", .schema = sn_fields, .args_size = sizeof(sn_args),
    .min_inputs = 1, .max_inputs = 1, .cpu_first = 1, .writes_params = 1, .needs = sn_needs,
    .build = sn_build, .plan = sn_plan, .forward = sn_forward, .backward = sn_backward,
    .free_state = sn_free,
};
