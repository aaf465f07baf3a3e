/* keras.layers.RandAugment: in training, num_ops operations picked per batch, uniformly with
 * replacement among Keras 3's eleven (in its order: RandomShear, RandomTranslation,
 * RandomRotation, RandomBrightness, RandomColorDegeneration, RandomContrast, RandomSharpness,
 * RandomPosterization, Solarization, AutoContrast, Equalization), applied one after another
 * to the whole batch; at inference y = x (Keras's transform_images with training false).
 *   y = op[k_{n-1}](... op[k_0](x)),  k_s = pick s of (step), uniform in [0, 11)
 * Each operation is that tfc layer itself (layers/augment*.c), built as Keras's RandAugment
 * builds it from factor = [lo, hi] (a number f: [0, f]):
 *   RandomShear            x_factor = y_factor = [lo, hi], interpolation
 *   RandomTranslation      height_factor = width_factor = [lo, hi], interpolation
 *   RandomRotation         factor = [lo, hi], interpolation
 *   RandomBrightness, RandomColorDegeneration, RandomContrast, RandomSharpness
 *                          factor = [lo, hi], value_range
 *   RandomPosterization    factor = max(1, int(8 hi)), value_range
 *   Solarization           addition_factor = threshold_factor = [lo, hi], value_range
 *   AutoContrast, Equalization   value_range
 * each with its own draws (per image, from stream j + 1 of this layer's: the stream of that
 * layer at this layer's place with `seed: j + 1`), so an operation picked twice applies the
 * same transform twice, as Keras's. Backward: the chosen layers' backwards chained (RandomPost-
 * erization and Equalization pass none, as theirs), through the stage inputs kept from
 * forward. Gradients accumulate into dx. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/rng.h"
#include "layers/augment.h"
#include "layers/layer.h"

#define RA_NOPS TFC_POLICY_NOPS
#define RA_MAX_NUM_OPS 64

extern const tfc_layer_ops tfc_random_shear_ops, tfc_random_translation_ops,
    tfc_random_rotation_ops, tfc_random_brightness_ops, tfc_random_color_degeneration_ops,
    tfc_random_contrast_ops, tfc_random_sharpness_ops, tfc_random_posterization_ops,
    tfc_solarization_ops, tfc_auto_contrast_ops, tfc_equalization_ops;

/* Keras's _AUGMENT_LAYERS, in its order (the picks index it) */
static const tfc_layer_ops *const ra_ops[RA_NOPS] = {
    &tfc_random_shear_ops,       &tfc_random_translation_ops,
    &tfc_random_rotation_ops,    &tfc_random_brightness_ops,
    &tfc_random_color_degeneration_ops, &tfc_random_contrast_ops,
    &tfc_random_sharpness_ops,   &tfc_random_posterization_ops,
    &tfc_solarization_ops,       &tfc_auto_contrast_ops,
    &tfc_equalization_ops};

typedef struct ra_args {
    tfc_float_list value_range, factor;
    int num_ops, interpolation, seed, data_format;
} ra_args;

static const char *const interpolation_names[] = {"nearest", "bilinear", NULL};

static const tfc_field ra_fields[] = {
    {"value_range", TFC_F_FLOAT_LIST, offsetof(ra_args, value_range), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "[low, high] of the input's values (none: [0, 255], Keras's default)"},
    {"num_ops", TFC_F_INT, offsetof(ra_args, num_ops), "2", 0, RA_MAX_NUM_OPS, NULL,
     "operations applied one after another, picked per batch with replacement"},
    {"factor", TFC_F_FLOAT_LIST, offsetof(ra_args, factor), "0.5", TFC_UNBOUNDED, NULL,
     "the operations' strength in [0, 1]: a number f is [0, f], the range each one draws in"},
    {"interpolation", TFC_F_ENUM, offsetof(ra_args, interpolation), "bilinear", TFC_UNBOUNDED,
     interpolation_names, "nearest or bilinear (the shear, translation and rotation)"},
    {"seed", TFC_F_INT, offsetof(ra_args, seed), TFC_NO_DEFAULT, 0, 2147483647, NULL,
     "mixed into the run's seed for this layer's picks and draws (none or 0: the run's alone)"},
    TFC_DATA_FORMAT_FIELD(ra_args, data_format),
    {NULL}};

/* The eleven layers, built; their arguments are theirs (allocated). */
typedef struct ra_state {
    tfc_layer op[RA_NOPS];
} ra_state;

static void ra_free(tfc_layer *l)
{
    ra_state *st = l->state;
    if (!st) return;
    for (int j = 0; j < RA_NOPS; j++) free(st->op[j].args);
    free(st);
    l->state = NULL;
}

/* Operation j's arguments as Keras's RandAugment and AugMix give them, as YAML flow mapping
 * text. */
static void op_args_text(int j, double lo, double hi, const tfc_float_list *value_range,
                         int interpolation, char *buf, size_t size)
{
    const char *interp = interpolation_names[interpolation];
    char vr[96], pair[96];
    snprintf(vr, sizeof vr, "value_range: [%.17g, %.17g]", value_range->v[0],
             value_range->v[1]);
    snprintf(pair, sizeof pair, "[%.17g, %.17g]", lo, hi);
    switch (j) {
    case 0: snprintf(buf, size, "{x_factor: %s, y_factor: %s, interpolation: %s}", pair, pair,
                     interp); break;
    case 1: snprintf(buf, size, "{height_factor: %s, width_factor: %s, interpolation: %s}",
                     pair, pair, interp); break;
    case 2: snprintf(buf, size, "{factor: %s, interpolation: %s}", pair, interp); break;
    case 7: {
        /* Keras: max(1, int(8 * self.factor[1])), in double as Python */
        const int bits = (int)(8.0 * hi);
        snprintf(buf, size, "{factor: %d, %s}", bits < 1 ? 1 : bits, vr);
        break;
    }
    case 8: snprintf(buf, size, "{addition_factor: %s, threshold_factor: %s, %s}", pair, pair,
                     vr); break;
    case 9: case 10: snprintf(buf, size, "{%s}", vr); break;
    default: snprintf(buf, size, "{factor: %s, %s}", pair, vr); break;
    }
}

tfc_status tfc_augment_policy_op(tfc_layer *l, int j, double lo, double hi,
                                 const tfc_float_list *value_range, int interpolation,
                                 tfc_layer *d, tfc_error *err)
{
    const tfc_layer_ops *ops = ra_ops[j];
    char text[512], path[128];
    op_args_text(j, lo, hi, value_range, interpolation, text, sizeof text);
    snprintf(path, sizeof path, "layers[%d].%s.%s", l->index, l->ops->type, ops->type);
    memset(d, 0, sizeof *d);
    d->args = calloc(1, ops->args_size);
    if (!d->args) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    tfc_doc *doc = tfc_doc_load_string(text, strlen(text), path, err);
    if (!doc) return TFC_ERR_CONFIG;
    tfc_status st = tfc_schema_apply(ops->schema, tfc_doc_root(doc), path, d->args, err);
    tfc_doc_free(doc); /* the arguments hold no node */
    if (st) return st;
    d->ops = ops;
    memcpy(d->name, l->name, sizeof d->name);
    d->index = l->index;
    d->node = l->node;
    d->ninputs = 1;
    d->inputs[0] = l->inputs[0];
    d->in_shape[0] = l->in_shape[0];
    d->in_dtype[0] = l->in_dtype[0];
    d->act = TFC_ACT_LINEAR;
    d->max_batch = 1;
    if (ops->build(d, err)) return TFC_ERR_CONFIG;
    /* each runs on its input and output alone: nothing kept, no scratch */
    TFC_ASSERT(d->saved_floats == 0 && d->fixed_floats == 0 && d->nparams == 0 && !ops->plan);
    return TFC_OK;
}

/* factor: Keras's check (_FACTOR_BOUNDS (0, 1)) as RandomShear, the first layer it is handed
 * to, makes it: each number in [0, 1]; value_range a pair of distinct numbers (AutoContrast's
 * check); 3 channels or 1 where RandomColorDegeneration is among the operations (its luma). */
tfc_status tfc_augment_policy_check(tfc_layer *l, const tfc_float_list *factor,
                                    tfc_float_list *value_range, int luma, double *lo,
                                    double *hi, tfc_error *err)
{
    float flo, fhi;
    const tfc_factor_rule unit_rule = {0, 1, 0, 0};
    if (tfc_augment_factor_range(l, "factor", factor, unit_rule, &flo, &fhi, err))
        return TFC_ERR_CONFIG;
    /* the range in double, as Keras hands it on (a number f: [0, f]) */
    *lo = factor->n == 1 ? 0.0 : fmin(factor->v[0], factor->v[1]);
    *hi = factor->n == 1 ? factor->v[0] : fmax(factor->v[0], factor->v[1]);
    if (value_range->n == 0) *value_range = (tfc_float_list){.n = 2, .v = {0, 255}};
    if (value_range->n != 2)
        return tfc_layer_error(err, l, "value_range: expected a pair [low, high], found %d "
                               "value%s", value_range->n, value_range->n == 1 ? "" : "s");
    if (value_range->v[0] == value_range->v[1])
        return tfc_layer_error(err, l, "value_range: low and high must differ, got [%g, %g]",
                               value_range->v[0], value_range->v[1]);
    if (tfc_augment_same_shape(l, err)) return TFC_ERR_CONFIG;
    const long long c = (long long)l->in_shape[0].dim[2];
    if (luma && c != 1 && c != 3)
        return tfc_layer_error(err, l, "needs 3 channels (RGB) or 1 (grayscale), as "
                               "RandomColorDegeneration's luma, got %lld", c);
    return TFC_OK;
}

/* The checks, then the eleven layers. */
static tfc_status ra_build(tfc_layer *l, tfc_error *err)
{
    ra_args *a = l->args;
    double lo, hi;
    if (tfc_augment_policy_check(l, &a->factor, &a->value_range, 1, &lo, &hi, err))
        return TFC_ERR_CONFIG;
    ra_free(l);
    ra_state *st = calloc(1, sizeof *st);
    if (!st) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    l->state = st;
    for (int j = 0; j < RA_NOPS; j++)
        if (tfc_augment_policy_op(l, j, lo, hi, &a->value_range, a->interpolation, &st->op[j],
                                  err))
            return TFC_ERR_CONFIG;
    /* the inputs of the operations after the first, and one or two gradient buffers */
    const int64_t numel = tfc_shape_numel(&l->out_shape);
    l->saved_floats = a->num_ops > 1 ? (a->num_ops - 1 + (a->num_ops > 2 ? 2 : 1)) * numel : 0;
    return TFC_OK;
}

/* The layer's stream: its seed, when set, mixed into the run's (as the other augmentation
 * layers'); pick s is tfc_rng_below(key, step, s, 11), operation j draws from stream j + 1. */
int tfc_rand_augment_pick(const tfc_layer *l, uint64_t step, int s)
{
    const ra_args *a = l->args;
    return (int)tfc_rng_below(tfc_augment_key(l, a->seed), step, (uint64_t)s, RA_NOPS);
}

static tfc_layer *op_at(tfc_layer *l, uint64_t step, int s)
{
    const ra_args *a = l->args;
    ra_state *st = l->state;
    const int j = tfc_rand_augment_pick(l, step, s);
    tfc_layer *d = &st->op[j];
    d->rng_key = tfc_rng_key(tfc_augment_key(l, a->seed), (uint64_t)j + 1);
    d->max_batch = l->max_batch;
    return d;
}

/* operation s's input (s >= 1) and the gradient buffers (s = num_ops, num_ops + 1) */
static float *ra_buf(const tfc_layer *l, int s)
{
    return l->saved + (int64_t)(s - 1) * l->max_batch * tfc_shape_numel(&l->out_shape);
}

static void ra_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const ra_args *a = l->args;
    if (!ex->training || a->num_ops == 0) {
        ex->be->ops->copy(ex->be, y, x[0], (size_t)(ex->batch * tfc_layer_out_numel(l)) * 4);
        return;
    }
    const void *in = x[0];
    for (int s = 0; s < a->num_ops; s++) {
        float *out = s == a->num_ops - 1 ? y : ra_buf(l, s + 1);
        tfc_layer *d = op_at(l, ex->step, s);
        d->ops->forward(d, ex, &in, out);
        in = out;
    }
}

static void ra_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                        const float *dy, float *const *dx)
{
    const ra_args *a = l->args;
    if (!dx[0]) return;
    const int64_t n = ex->batch * tfc_layer_out_numel(l);
    if (!ex->training || a->num_ops == 0) {
        ex->be->ops->axpy(ex->be, n, 1.f, dy, dx[0]);
        return;
    }
    const float *g = dy;
    for (int s = a->num_ops - 1; s >= 0; s--) {
        float *out = dx[0];
        if (s > 0) { /* the gradient of operation s's input, in the buffer g does not use */
            out = ra_buf(l, a->num_ops + (a->num_ops - 1 - s) % 2);
            ex->be->ops->zero(ex->be, out, (size_t)n * 4);
        }
        const void *in = s == 0 ? x[0] : (const void *)ra_buf(l, s);
        const float *o = s == a->num_ops - 1 ? y : ra_buf(l, s + 1);
        tfc_layer *d = op_at(l, ex->step, s);
        float *const dd[1] = {out};
        d->ops->backward(d, ex, &in, o, g, dd);
        g = out;
    }
}

const char *const *tfc_augment_policy_needs(const tfc_layer *l)
{
    (void)l;
    static const char *const ops[] = {
        "warp_forward",   "warp_backward",   "brightness_forward", "brightness_backward",
        "contrast_forward", "contrast_backward", "color_forward", "color_backward",
        "sharpen_forward", "sharpen_backward", "tone_forward",   "tone_backward",
        NULL};
    return ops;
}

const tfc_layer_ops tfc_rand_augment_ops = {
    .type = "RandAugment", .schema = ra_fields, .args_size = sizeof(ra_args),
    .min_inputs = 1, .max_inputs = 1, .copies_at_inference = 1, .cpu_first = 1,
    .host_choices = 1, .build = ra_build, .forward = ra_forward, .backward = ra_backward,
    .needs = tfc_augment_policy_needs, .free_state = ra_free,
};
