/* The colour augmentation layers (keras.layers.RandomGrayscale, RandomInvert, Solarization,
 * RandomPosterization, RandomColorDegeneration, RandomSaturation, RandomHue): in training
 * each image gets its own draw from the layer's stream at (step, image) (core/color.h), so a
 * resumed run repeats it; at inference y = x. Per pixel of channels (r, g, b), luma =
 * 0.2989 r + 0.5870 g + 0.1140 b:
 *   RandomGrayscale:         with probability factor every channel becomes the luma
 *                            (one channel: kept); backward: dx_k += w_k sum(dy) or dy
 *   RandomInvert:            p drawn in factor's range, then with probability p
 *                            y = value_range[1] - x; backward: dx -= dy where inverted
 *   Solarization:            z = clip(x in [0, 255] + a, 0, 255), y = z < t ? z : 255 - z,
 *                            back in value_range; backward: +-dy where the clip passes
 *   RandomPosterization:     z = x in [0, 255] cast to a byte, its low 8 - bits bits cleared,
 *                            back in value_range; backward: none (the cast has no gradient)
 *   RandomColorDegeneration: y = clip(x + f (luma - x), value_range), f drawn in factor's
 *                            range; backward: dx_k += (1 - f) g_k + f w_k sum(g), g = dy
 *                            where the clip passes
 *   RandomSaturation:        in HSV s = clip(s u / (1 - u + 1e-7), value_range), u drawn
 *                            in factor's range; backward through Keras's HSV maps
 *   RandomHue:               x to [0, 1], in HSV h + (+-f / 2) wrapped, back to RGB clipped
 *                            to [0, 1] and to value_range; backward likewise
 * Gradients accumulate into dx. A layer's seed, when set, is mixed into its stream as the
 * other augmentation layers' (layers/augment.h). */
#include <math.h>

#include "core/rng.h"
#include "layers/augment.h"
#include "layers/layer.h"

typedef struct color_args {
    int seed, data_format;
    double probability; /* RandomGrayscale's factor */
    tfc_float_list factor, addition_factor, threshold_factor, value_range;
    /* set by build: the kind and the ranges drawn from (the desc's lo, hi) */
    tfc_color_kind kind;
    float lo[2], hi[2];
} color_args;

#define SEED_FIELD                                                                              \
    {"seed", TFC_F_INT, offsetof(color_args, seed), TFC_NO_DEFAULT, 0, 2147483647, NULL,        \
     "mixed into the run's seed for this layer's draws (none or 0: the run's alone)"}
#define LIST_FIELD(name, member, def, help)                                                     \
    {name, TFC_F_FLOAT_LIST, offsetof(color_args, member), def, TFC_UNBOUNDED, NULL, help}
#define VALUE_RANGE_FIELD                                                                       \
    LIST_FIELD("value_range", value_range, TFC_NO_DEFAULT,                                      \
               "[low, high] of the input's values (none: [0, 255], Keras's default)")

static const tfc_field grayscale_fields[] = {
    {"factor", TFC_F_FLOAT, offsetof(color_args, probability), "0.5", 0, 1, NULL,
     "the probability that an image is turned to grayscale"},
    TFC_DATA_FORMAT_FIELD(color_args, data_format), SEED_FIELD, {NULL}};
static const tfc_field invert_fields[] = {
    LIST_FIELD("factor", factor, "1.0",
               "the range the inversion's probability is drawn from (a number f: [0, f])"),
    VALUE_RANGE_FIELD, SEED_FIELD, TFC_DATA_FORMAT_FIELD(color_args, data_format), {NULL}};
static const tfc_field solarization_fields[] = {
    LIST_FIELD("addition_factor", addition_factor, "0.0",
               "the range of the value added, as a fraction of 255 (a number f: [0, f])"),
    LIST_FIELD("threshold_factor", threshold_factor, "0.0",
               "the range of the threshold, as a fraction of 255 (a number f: [0, f])"),
    VALUE_RANGE_FIELD, SEED_FIELD, {NULL}};
static const tfc_field posterization_fields[] = {
    LIST_FIELD("factor", factor, NULL, "the bits kept per channel, in [1, 8]"),
    VALUE_RANGE_FIELD, TFC_DATA_FORMAT_FIELD(color_args, data_format), SEED_FIELD, {NULL}};
static const tfc_field saturation_fields[] = {
    LIST_FIELD("factor", factor, NULL, "the saturation's factor u / (1 - u), u in this range"),
    VALUE_RANGE_FIELD, TFC_DATA_FORMAT_FIELD(color_args, data_format), SEED_FIELD, {NULL}};
static const tfc_field hue_fields[] = {
    LIST_FIELD("factor", factor, NULL, "the hue's shift, in half turns (a number f: [0, f])"),
    VALUE_RANGE_FIELD, TFC_DATA_FORMAT_FIELD(color_args, data_format), SEED_FIELD, {NULL}};
static const tfc_field degeneration_fields[] = {
    LIST_FIELD("factor", factor, NULL, "the blend towards the luma (a number f: [-f, f])"),
    VALUE_RANGE_FIELD, TFC_DATA_FORMAT_FIELD(color_args, data_format), SEED_FIELD, {NULL}};

/* value_range: a pair, [0, 255] when absent, sorted where Keras sorts it */
static tfc_status value_range(const tfc_layer *l, color_args *a, int sort, tfc_error *err)
{
    if (a->value_range.n == 0) a->value_range = (tfc_float_list){.n = 2, .v = {0, 255}};
    if (a->value_range.n != 2)
        return tfc_layer_error(err, l, "value_range: expected a pair [low, high], found %d "
                               "value%s", a->value_range.n, a->value_range.n == 1 ? "" : "s");
    if (sort && a->value_range.v[0] > a->value_range.v[1]) {
        const double t = a->value_range.v[0];
        a->value_range.v[0] = a->value_range.v[1], a->value_range.v[1] = t;
    }
    return TFC_OK;
}

/* The image check, and the RGB (or single channel) image rgb_to_grayscale takes (rgb 1), or
 * the RGB image rgb_to_hsv takes (rgb 2). */
static tfc_status image(tfc_layer *l, int rgb, tfc_error *err)
{
    if (tfc_augment_same_shape(l, err)) return TFC_ERR_CONFIG;
    const long long c = (long long)l->in_shape[0].dim[2];
    if (rgb == 1 && c != 1 && c != 3)
        return tfc_layer_error(err, l, "needs 3 channels (RGB) or 1 (grayscale), got %lld", c);
    if (rgb == 2 && c != 3)
        return tfc_layer_error(err, l, "needs 3 channels (RGB, for HSV), got %lld", c);
    return TFC_OK;
}

static tfc_status grayscale_build(tfc_layer *l, tfc_error *err)
{
    color_args *a = l->args;
    a->kind = TFC_COLOR_GRAYSCALE;
    a->lo[0] = a->hi[0] = (float)a->probability;
    return image(l, 1, err);
}

/* the probability drawn as BaseImagePreprocessingLayer._set_factor with bounds [0, 1] */
static tfc_status invert_build(tfc_layer *l, tfc_error *err)
{
    color_args *a = l->args;
    a->kind = TFC_COLOR_INVERT;
    const tfc_factor_rule rule = {0, 1, 0, 1};
    if (tfc_augment_factor_range(l, "factor", &a->factor, rule, &a->lo[0], &a->hi[0], err) ||
        value_range(l, a, 0, err))
        return TFC_ERR_CONFIG;
    return image(l, 0, err);
}

/* Solarization._set_factor: each number in [0, 1], a number f [0, f]; the draws are Keras's
 * uniform(lower, upper * 255), the lower bound not scaled */
static tfc_status solarization_build(tfc_layer *l, tfc_error *err)
{
    color_args *a = l->args;
    a->kind = TFC_COLOR_SOLARIZE;
    const tfc_factor_rule rule = {0, 1, 0, 0};
    if (tfc_augment_factor_range(l, "addition_factor", &a->addition_factor, rule, &a->lo[0],
                                 &a->hi[0], err) ||
        tfc_augment_factor_range(l, "threshold_factor", &a->threshold_factor, rule, &a->lo[1],
                                 &a->hi[1], err) ||
        value_range(l, a, 1, err))
        return TFC_ERR_CONFIG;
    a->hi[0] *= 255.0f, a->hi[1] *= 255.0f;
    return image(l, 0, err);
}

/* the bits: BaseImagePreprocessingLayer._set_factor with bounds [1, 8] (a number f: [1, f]),
 * whole numbers (jax.random.randint's bounds) */
static tfc_status posterization_build(tfc_layer *l, tfc_error *err)
{
    color_args *a = l->args;
    a->kind = TFC_COLOR_POSTERIZE;
    const tfc_factor_rule rule = {1, 8, 0, 1};
    for (int k = 0; k < a->factor.n; k++)
        if (a->factor.v[k] != floor(a->factor.v[k]))
            return tfc_layer_error(err, l, "factor: %g is not a whole number of bits",
                                   a->factor.v[k]);
    if (tfc_augment_factor_range(l, "factor", &a->factor, rule, &a->lo[0], &a->hi[0], err) ||
        value_range(l, a, 1, err))
        return TFC_ERR_CONFIG;
    if (a->lo[0] < 1 || a->hi[0] > 8)
        return tfc_layer_error(err, l, "factor: the bits [%g, %g] must lie in [1, 8]",
                               (double)a->lo[0], (double)a->hi[0]);
    return image(l, 0, err);
}

/* the factor: BaseImagePreprocessingLayer._set_factor with its bounds [-1, 1] */
static tfc_status degeneration_build(tfc_layer *l, tfc_error *err)
{
    color_args *a = l->args;
    a->kind = TFC_COLOR_DEGENERATE;
    const tfc_factor_rule rule = {-1, 1, 0, 1};
    if (tfc_augment_factor_range(l, "factor", &a->factor, rule, &a->lo[0], &a->hi[0], err) ||
        value_range(l, a, 1, err))
        return TFC_ERR_CONFIG;
    return image(l, 1, err);
}

/* the factor: BaseImagePreprocessingLayer._set_factor with its bounds [-1, 1] (a number f:
 * [-f, f], though Keras's docstring says [0, f]) */
static tfc_status saturation_build(tfc_layer *l, tfc_error *err)
{
    color_args *a = l->args;
    a->kind = TFC_COLOR_SATURATE;
    const tfc_factor_rule rule = {-1, 1, 0, 1};
    if (tfc_augment_factor_range(l, "factor", &a->factor, rule, &a->lo[0], &a->hi[0], err) ||
        value_range(l, a, 1, err))
        return TFC_ERR_CONFIG;
    return image(l, 2, err);
}

/* the factor: BaseImagePreprocessingLayer._set_factor with bounds [0, 1] (a number f:
 * [0, f]); value_range as given */
static tfc_status hue_build(tfc_layer *l, tfc_error *err)
{
    color_args *a = l->args;
    a->kind = TFC_COLOR_HUE;
    const tfc_factor_rule rule = {0, 1, 0, 1};
    if (tfc_augment_factor_range(l, "factor", &a->factor, rule, &a->lo[0], &a->hi[0], err) ||
        value_range(l, a, 0, err))
        return TFC_ERR_CONFIG;
    return image(l, 2, err);
}

static tfc_color_desc color_desc(const tfc_layer *l, const tfc_exec *ex)
{
    const color_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    const int range = a->kind != TFC_COLOR_GRAYSCALE;
    return (tfc_color_desc){.n = ex->batch, .hw = (int)(in->dim[0] * in->dim[1]),
                            .c = (int)in->dim[2], .kind = a->kind,
                            .lo = {a->lo[0], a->lo[1]}, .hi = {a->hi[0], a->hi[1]},
                            .vlo = range ? (float)a->value_range.v[0] : 0,
                            .vhi = range ? (float)a->value_range.v[1] : 255,
                            .key = tfc_augment_key(l, a->seed), .step = ex->step};
}

static void color_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    if (!ex->training) {
        ex->be->ops->copy(ex->be, y, x[0], (size_t)(ex->batch * tfc_layer_out_numel(l)) * 4);
        return;
    }
    tfc_color_desc d = color_desc(l, ex);
    ex->be->ops->color_forward(ex->be, &d, x[0], y);
}

static void color_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                           const float *dy, float *const *dx)
{
    (void)y;
    if (!dx[0]) return;
    if (!ex->training) {
        ex->be->ops->axpy(ex->be, ex->batch * tfc_layer_out_numel(l), 1.f, dy, dx[0]);
        return;
    }
    tfc_color_desc d = color_desc(l, ex);
    ex->be->ops->color_backward(ex->be, &d, x[0], dy, dx[0]);
}

static const char *const *color_needs(const tfc_layer *l)
{
    (void)l;
    static const char *const ops[] = {"color_forward", "color_backward", NULL};
    return ops;
}

#define COLOR_OPS(var, name, fields, build_fn)                                                  \
    const tfc_layer_ops var = {                                                                 \
        .type = name, .schema = fields, .args_size = sizeof(color_args), .min_inputs = 1,      \
        .max_inputs = 1, .copies_at_inference = 1, .build = build_fn,                           \
        .forward = color_forward, .backward = color_backward, .needs = color_needs,            \
    }

COLOR_OPS(tfc_random_grayscale_ops, "RandomGrayscale", grayscale_fields, grayscale_build);
COLOR_OPS(tfc_random_invert_ops, "RandomInvert", invert_fields, invert_build);
COLOR_OPS(tfc_solarization_ops, "Solarization", solarization_fields, solarization_build);
COLOR_OPS(tfc_random_posterization_ops, "RandomPosterization", posterization_fields,
          posterization_build);
COLOR_OPS(tfc_random_saturation_ops, "RandomSaturation", saturation_fields, saturation_build);
COLOR_OPS(tfc_random_hue_ops, "RandomHue", hue_fields, hue_build);
COLOR_OPS(tfc_random_color_degeneration_ops, "RandomColorDegeneration", degeneration_fields,
          degeneration_build);

/* ---- RandomColorJitter ----------------------------------------------------------------- */

/* RandomColorJitter: RandomBrightness, RandomContrast, RandomSaturation and RandomHue, each
 * whose factor is given, in that order, as Keras 3 composes them (each with value_range);
 * each its own stream (the layer's, stage s + 1 mixed in). In training the inputs of the
 * stages after the first are kept in l->saved for backward, with two buffers of gradients
 * between the stages. */
typedef struct jitter_args {
    tfc_float_list value_range, brightness_factor, contrast_factor, saturation_factor,
        hue_factor;
    int seed, data_format;
    /* set by build: the stages (0 brightness, 1 contrast, 2 saturation, 3 hue) and their
     * ranges drawn from, value_range sorted (brightness, saturation) and as given */
    int nstage, stage[4];
    float lo[4], hi[4], sorted[2];
} jitter_args;

#define JITTER_FACTOR(name, member, help)                                                       \
    {name, TFC_F_FLOAT_LIST, offsetof(jitter_args, member), TFC_NO_DEFAULT, TFC_UNBOUNDED,      \
     NULL, help}
static const tfc_field jitter_fields[] = {
    {"value_range", TFC_F_FLOAT_LIST, offsetof(jitter_args, value_range), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "[low, high] of the input's values (none: [0, 255], Keras's default)"},
    JITTER_FACTOR("brightness_factor", brightness_factor, "RandomBrightness's factor (none: no "
                  "brightness stage)"),
    JITTER_FACTOR("contrast_factor", contrast_factor, "RandomContrast's factor (none: no "
                  "contrast stage)"),
    JITTER_FACTOR("saturation_factor", saturation_factor, "RandomSaturation's factor (none: no "
                  "saturation stage)"),
    JITTER_FACTOR("hue_factor", hue_factor, "RandomHue's factor (none: no hue stage)"),
    {"seed", TFC_F_INT, offsetof(jitter_args, seed), TFC_NO_DEFAULT, 0, 2147483647, NULL,
     "mixed into the run's seed for this layer's draws (none or 0: the run's alone)"},
    TFC_DATA_FORMAT_FIELD(jitter_args, data_format), {NULL}};

/* each stage's factor checked as its layer checks it (layers/augment.c, above) */
static tfc_status jitter_build(tfc_layer *l, tfc_error *err)
{
    jitter_args *a = l->args;
    static const char *const names[4] = {"brightness_factor", "contrast_factor",
                                         "saturation_factor", "hue_factor"};
    const tfc_factor_rule rules[4] = {{-1, 1, 0, 1}, {0, 1, 0, 1}, {-1, 1, 0, 1}, {0, 1, 0, 1}};
    const tfc_float_list *f[4] = {&a->brightness_factor, &a->contrast_factor,
                                  &a->saturation_factor, &a->hue_factor};
    if (a->value_range.n == 0) a->value_range = (tfc_float_list){.n = 2, .v = {0, 255}};
    if (a->value_range.n != 2)
        return tfc_layer_error(err, l, "value_range: expected a pair [low, high], found %d "
                               "value%s", a->value_range.n, a->value_range.n == 1 ? "" : "s");
    a->sorted[0] = (float)fmin(a->value_range.v[0], a->value_range.v[1]);
    a->sorted[1] = (float)fmax(a->value_range.v[0], a->value_range.v[1]);
    a->nstage = 0;
    for (int k = 0; k < 4; k++) {
        if (f[k]->n == 0) continue;
        const int j = a->nstage++;
        a->stage[j] = k;
        if (tfc_augment_factor_range(l, names[k], f[k], rules[k], &a->lo[j], &a->hi[j], err))
            return TFC_ERR_CONFIG;
        if (k == 1) a->lo[j] = 1.0f - a->lo[j], a->hi[j] = 1.0f + a->hi[j]; /* contrast */
    }
    const int hsv = a->saturation_factor.n || a->hue_factor.n;
    if (image(l, hsv ? 2 : 0, err)) return TFC_ERR_CONFIG;
    l->saved_floats = a->nstage > 1 ? (a->nstage + 1) * tfc_shape_numel(&l->out_shape) : 0;
    return TFC_OK;
}

/* Stage j forward (dy NULL: out = its y for in) or backward (out += its gradient for dy). */
static void jitter_stage(const tfc_layer *l, const tfc_exec *ex, int j, const float *in,
                         const float *dy, float *out)
{
    const jitter_args *a = l->args;
    const tfc_shape *sh = &l->in_shape[0];
    const uint64_t key = tfc_rng_key(tfc_augment_key(l, a->seed), (uint64_t)j + 1);
    const int hw = (int)(sh->dim[0] * sh->dim[1]), c = (int)sh->dim[2], k = a->stage[j];
    tfc_backend *be = ex->be;
    if (k <= 1) {
        const int sort = k == 0; /* RandomBrightness sorts value_range, RandomContrast not */
        const tfc_contrast_desc d = {
            .n = ex->batch, .hw = hw, .c = c, .lo = a->lo[j], .hi = a->hi[j],
            .vlo = sort ? a->sorted[0] : (float)a->value_range.v[0],
            .vhi = sort ? a->sorted[1] : (float)a->value_range.v[1], .key = key,
            .step = ex->step};
        if (k == 0 && !dy) be->ops->brightness_forward(be, &d, in, out);
        else if (k == 0) be->ops->brightness_backward(be, &d, in, dy, out);
        else if (!dy) be->ops->contrast_forward(be, &d, in, out);
        else be->ops->contrast_backward(be, &d, in, dy, out);
    } else {
        const int sort = k == 2; /* RandomSaturation sorts value_range, RandomHue not */
        const tfc_color_desc d = {
            .n = ex->batch, .hw = hw, .c = c,
            .kind = k == 2 ? TFC_COLOR_SATURATE : TFC_COLOR_HUE, .lo = {a->lo[j], 0},
            .hi = {a->hi[j], 0}, .vlo = sort ? a->sorted[0] : (float)a->value_range.v[0],
            .vhi = sort ? a->sorted[1] : (float)a->value_range.v[1], .key = key,
            .step = ex->step};
        if (!dy) be->ops->color_forward(be, &d, in, out);
        else be->ops->color_backward(be, &d, in, dy, out);
    }
}

/* stage j's input (j >= 1) and the two gradient buffers (j = nstage, nstage + 1) */
static float *jitter_buf(const tfc_layer *l, int j)
{
    return l->saved + (int64_t)(j - 1) * l->max_batch * tfc_shape_numel(&l->out_shape);
}

static void jitter_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const jitter_args *a = l->args;
    const size_t bytes = (size_t)(ex->batch * tfc_layer_out_numel(l)) * 4;
    if (!ex->training || a->nstage == 0) {
        ex->be->ops->copy(ex->be, y, x[0], bytes);
        return;
    }
    const float *in = x[0];
    for (int j = 0; j < a->nstage; j++) {
        float *out = j == a->nstage - 1 ? y : jitter_buf(l, j + 1);
        jitter_stage(l, ex, j, in, NULL, out);
        in = out;
    }
}

static void jitter_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                            const float *dy, float *const *dx)
{
    (void)y;
    const jitter_args *a = l->args;
    if (!dx[0]) return;
    const int64_t n = ex->batch * tfc_layer_out_numel(l);
    if (!ex->training || a->nstage == 0) {
        ex->be->ops->axpy(ex->be, n, 1.f, dy, dx[0]);
        return;
    }
    const float *g = dy;
    for (int j = a->nstage - 1; j >= 0; j--) {
        float *out = dx[0];
        if (j > 0) { /* the gradient of stage j's input, in the buffer g does not use */
            out = jitter_buf(l, a->nstage + (a->nstage - 1 - j) % 2);
            ex->be->ops->zero(ex->be, out, (size_t)n * 4);
        }
        jitter_stage(l, ex, j, j == 0 ? x[0] : jitter_buf(l, j), g, out);
        g = out;
    }
}

static const char *const *jitter_needs(const tfc_layer *l)
{
    (void)l;
    static const char *const ops[] = {"brightness_forward", "brightness_backward",
                                      "contrast_forward",   "contrast_backward",
                                      "color_forward",      "color_backward",
                                      NULL};
    return ops;
}

const tfc_layer_ops tfc_random_color_jitter_ops = {
    .type = "RandomColorJitter", .schema = jitter_fields, .args_size = sizeof(jitter_args),
    .min_inputs = 1, .max_inputs = 1, .copies_at_inference = 1, .build = jitter_build,
    .forward = jitter_forward, .backward = jitter_backward, .needs = jitter_needs,
};
