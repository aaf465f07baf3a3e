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
