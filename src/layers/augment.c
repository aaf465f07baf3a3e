/* The augmentation layers (keras.layers.RandomFlip, RandomTranslation, RandomRotation,
 * RandomZoom, RandomShear, RandomPerspective, RandomContrast, RandomBrightness): in training
 * each image gets its own random transform, drawn from the layer's stream at (step, image)
 * (core/augment.h), so a resumed run repeats it; at inference y = x.
 *   RandomFlip, RandomTranslation, RandomRotation, RandomZoom, RandomShear:
 *     y[oy, ox] = x read at (sx, sy) = M (ox, oy, 1)   (M per image, nearest or bilinear,
 *                                                       outside cells placed by fill_mode)
 *   RandomPerspective: the same with the point M (ox, oy, 1) divided by its third
 *     coordinate (a homography, core/augment.h), outside cells fill_value
 *     backward: dx += M^T dy, the transpose of that linear map (fill_value is constant)
 *   RandomContrast:
 *     y = clip((x - m) f + m, value_range),  m the mean of each channel over the image
 *     backward: dx += f g + (1 - f) mean(g),  g = dy where the clip passes, else 0
 *   RandomBrightness:
 *     y = clip(x + b, value_range),  b = u (high - low) per image, u in factor's range
 *     backward: dx += dy where the clip passes
 * Gradients accumulate into dx. A layer's seed, when set, is mixed into its stream as
 * Dropout's: the same seed and run seed give the same transforms. */
#include "layers/augment.h"
#include "layers/layer.h"
#include "core/rng.h"

typedef struct augment_args {
    int mode, fill_mode, interpolation, seed, data_format;
    tfc_float_list height_factor, width_factor, factor, value_range, x_factor, y_factor;
    double fill_value, scale;
    /* set by build: the transform (kind; contrast for RandomContrast) and the ranges drawn
     * from (the descs' lo, hi) */
    tfc_warp_kind kind;
    int contrast, brightness;
    float lo[2], hi[2];
} augment_args;

static const char *const flip_mode_names[] = {"horizontal", "vertical",
                                              "horizontal_and_vertical", NULL};
static const char *const fill_mode_names[] = {"reflect", "wrap", "constant", "nearest", NULL};
static const char *const interpolation_names[] = {"nearest", "bilinear", NULL};

#define SEED_FIELD                                                                              \
    {"seed", TFC_F_INT, offsetof(augment_args, seed), TFC_NO_DEFAULT, 0, 2147483647, NULL,      \
     "mixed into the run's seed for this layer's transforms (none or 0: the run's alone)"}
#define WARP_FIELDS                                                                             \
    {"fill_mode", TFC_F_ENUM, offsetof(augment_args, fill_mode), "reflect", TFC_UNBOUNDED,      \
     fill_mode_names, "reflect, wrap, constant or nearest"},                                    \
    {"interpolation", TFC_F_ENUM, offsetof(augment_args, interpolation), "bilinear",            \
     TFC_UNBOUNDED, interpolation_names, "nearest or bilinear"},                                \
    SEED_FIELD,                                                                                 \
    {"fill_value", TFC_F_FLOAT, offsetof(augment_args, fill_value), "0", TFC_UNBOUNDED, NULL,   \
     "the value outside the image with fill_mode constant"},                                    \
    TFC_DATA_FORMAT_FIELD(augment_args, data_format)
#define FACTOR_FIELD(name, member, def, help)                                                   \
    {name, TFC_F_FLOAT_LIST, offsetof(augment_args, member), def, TFC_UNBOUNDED, NULL, help}

static const tfc_field flip_fields[] = {
    {"mode", TFC_F_ENUM, offsetof(augment_args, mode), "horizontal_and_vertical",
     TFC_UNBOUNDED, flip_mode_names, "horizontal, vertical or horizontal_and_vertical"},
    SEED_FIELD, TFC_DATA_FORMAT_FIELD(augment_args, data_format), {NULL}};
static const tfc_field translation_fields[] = {
    FACTOR_FIELD("height_factor", height_factor, NULL, "shift down by a fraction of the height"),
    FACTOR_FIELD("width_factor", width_factor, NULL, "shift right by a fraction of the width"),
    WARP_FIELDS, {NULL}};
static const tfc_field rotation_fields[] = {
    FACTOR_FIELD("factor", factor, NULL, "angle as a fraction of a full turn, counter-clockwise"),
    WARP_FIELDS, {NULL}};
static const tfc_field zoom_fields[] = {
    FACTOR_FIELD("height_factor", height_factor, NULL, "scale of the rows read, minus 1"),
    FACTOR_FIELD("width_factor", width_factor, TFC_NO_DEFAULT,
                 "scale of the columns read, minus 1 (none: height_factor's draw)"),
    WARP_FIELDS, {NULL}};
static const tfc_field shear_fields[] = {
    FACTOR_FIELD("x_factor", x_factor, "0", "columns shifted by this fraction of the row index"),
    FACTOR_FIELD("y_factor", y_factor, "0", "rows shifted by this fraction of the column index"),
    WARP_FIELDS, {NULL}};
static const tfc_field perspective_fields[] = {
    FACTOR_FIELD("factor", factor, "1", "the probability is drawn in [0, factor] (or a pair's)"),
    {"scale", TFC_F_FLOAT, offsetof(augment_args, scale), "1", 0, 1, NULL,
     "in [0, 1]: each corner moves by up to scale / 2 of its coordinates"},
    {"interpolation", TFC_F_ENUM, offsetof(augment_args, interpolation), "bilinear",
     TFC_UNBOUNDED, interpolation_names, "nearest or bilinear"},
    {"fill_value", TFC_F_FLOAT, offsetof(augment_args, fill_value), "0", TFC_UNBOUNDED, NULL,
     "the value outside the image"},
    SEED_FIELD, TFC_DATA_FORMAT_FIELD(augment_args, data_format), {NULL}};
static const tfc_field contrast_fields[] = {
    FACTOR_FIELD("factor", factor, NULL, "the contrast factor lies in [1 - lower, 1 + upper]"),
    FACTOR_FIELD("value_range", value_range, TFC_NO_DEFAULT,
                 "[low, high] the output is clipped to (none: [0, 255], Keras's default)"),
    SEED_FIELD, TFC_DATA_FORMAT_FIELD(augment_args, data_format), {NULL}};
static const tfc_field brightness_fields[] = {
    FACTOR_FIELD("factor", factor, NULL, "the delta as a fraction of value_range's width"),
    FACTOR_FIELD("value_range", value_range, TFC_NO_DEFAULT,
                 "[low, high] the output is clipped to (none: [0, 255], Keras's default)"),
    SEED_FIELD, {NULL}};

/* Keras's check of a factor argument and the range [lo, hi] it gives. Every number must
 * lie in [bound_lo, bound_hi] (bound_lo excluded with strict: RandomZoom's (-1, 1]); with
 * base_rule (RandomRotation, RandomContrast: BaseImagePreprocessingLayer._set_factor) a pair
 * needs only f[0] <= bound_hi and f[1] >= bound_lo. A number f gives [max(-|f|, bound_lo),
 * |f|], a pair its two values sorted. (layers/augment.h) */
tfc_status tfc_augment_factor_range(const tfc_layer *l, const char *arg,
                                    const tfc_float_list *f, tfc_factor_rule r, float *lo,
                                    float *hi, tfc_error *err)
{
    if (f->n != 1 && f->n != 2)
        return tfc_layer_error(err, l, "%s: expected a number or a pair [lower, upper], found "
                               "%d values", arg, f->n);
    if (r.base_rule && f->n == 2) {
        if (f->v[0] > r.bound_hi || f->v[1] < r.bound_lo)
            return tfc_layer_error(err, l, "%s: a pair [lower, upper] needs lower <= %g and "
                                   "upper >= %g", arg, r.bound_hi, r.bound_lo);
    } else {
        for (int i = 0; i < f->n; i++)
            if (f->v[i] > r.bound_hi || (r.strict ? f->v[i] <= r.bound_lo : f->v[i] < r.bound_lo))
                return tfc_layer_error(err, l, "%s: %g is outside %c%g, %g]", arg, f->v[i],
                                       r.strict ? '(' : '[', r.bound_lo, r.bound_hi);
    }
    if (f->n == 1) {
        const double a = fabs(f->v[0]);
        *lo = (float)(-a > r.bound_lo ? -a : r.bound_lo), *hi = (float)a;
    } else {
        *lo = (float)fmin(f->v[0], f->v[1]), *hi = (float)fmax(f->v[0], f->v[1]);
    }
    return TFC_OK;
}

static const tfc_factor_rule shift_rule = {-1, 1, 0, 0}, zoom_rule = {-1, 1, 1, 0},
                         turn_rule = {-1, 1, 0, 1}, contrast_rule = {0, 1, 0, 1},
                         shear_rule = {0, 1, 0, 0};

tfc_status tfc_augment_same_shape(tfc_layer *l, tfc_error *err)
{
    if (tfc_layer_need_image(l, err)) return TFC_ERR_CONFIG;
    l->out_shape = l->in_shape[0];
    return TFC_OK;
}

static tfc_status flip_build(tfc_layer *l, tfc_error *err)
{
    augment_args *a = l->args;
    a->kind = TFC_WARP_FLIP;
    return tfc_augment_same_shape(l, err);
}

static tfc_status translation_build(tfc_layer *l, tfc_error *err)
{
    augment_args *a = l->args;
    a->kind = TFC_WARP_TRANSLATE;
    if (tfc_augment_factor_range(l, "height_factor", &a->height_factor, shift_rule, &a->lo[0],
                                 &a->hi[0], err) ||
        tfc_augment_factor_range(l, "width_factor", &a->width_factor, shift_rule, &a->lo[1],
                                 &a->hi[1], err))
        return TFC_ERR_CONFIG;
    return tfc_augment_same_shape(l, err);
}

/* the angle in degrees: Keras draws factor * 360 */
static tfc_status rotation_build(tfc_layer *l, tfc_error *err)
{
    augment_args *a = l->args;
    a->kind = TFC_WARP_ROTATE;
    if (tfc_augment_factor_range(l, "factor", &a->factor, turn_rule, &a->lo[0], &a->hi[0], err))
        return TFC_ERR_CONFIG;
    a->lo[0] *= 360.0f, a->hi[0] *= 360.0f;
    return tfc_augment_same_shape(l, err);
}

/* the scales drawn: 1 + the factor's range */
static tfc_status zoom_build(tfc_layer *l, tfc_error *err)
{
    augment_args *a = l->args;
    a->kind = TFC_WARP_ZOOM;
    if (tfc_augment_factor_range(l, "height_factor", &a->height_factor, zoom_rule, &a->lo[0],
                                 &a->hi[0], err))
        return TFC_ERR_CONFIG;
    if (a->width_factor.n &&
        tfc_augment_factor_range(l, "width_factor", &a->width_factor, zoom_rule, &a->lo[1],
                                 &a->hi[1], err))
        return TFC_ERR_CONFIG;
    for (int k = 0; k < 2; k++) a->lo[k] += 1.0f, a->hi[k] += 1.0f;
    return tfc_augment_same_shape(l, err);
}

/* RandomShear's ranges: every number in [0, 1], a number f giving [-f, f] (Keras's own
 * _set_factor_with_name; the sign is drawn again per image, u0 > 1/2 negating both) */
static tfc_status shear_build(tfc_layer *l, tfc_error *err)
{
    augment_args *a = l->args;
    a->kind = TFC_WARP_SHEAR;
    if (tfc_augment_factor_range(l, "y_factor", &a->y_factor, shear_rule, &a->lo[0], &a->hi[0],
                                 err) ||
        tfc_augment_factor_range(l, "x_factor", &a->x_factor, shear_rule, &a->lo[1], &a->hi[1],
                                 err))
        return TFC_ERR_CONFIG;
    if (a->y_factor.n == 1) a->lo[0] = -a->hi[0];
    if (a->x_factor.n == 1) a->lo[1] = -a->hi[1];
    return tfc_augment_same_shape(l, err);
}

/* RandomPerspective: the probability's range from factor (BaseImagePreprocessingLayer's rule,
 * bounds [0, 1]), the corner factors' [-scale / 2, scale / 2]; always constant fill */
static tfc_status perspective_build(tfc_layer *l, tfc_error *err)
{
    augment_args *a = l->args;
    const tfc_factor_rule unit_rule = {0, 1, 0, 1};
    a->kind = TFC_WARP_PERSPECTIVE;
    a->fill_mode = TFC_FILL_CONSTANT;
    if (tfc_augment_factor_range(l, "factor", &a->factor, unit_rule, &a->lo[0], &a->hi[0], err))
        return TFC_ERR_CONFIG;
    a->lo[1] = (float)(-0.5 * a->scale), a->hi[1] = (float)(0.5 * a->scale);
    return tfc_augment_same_shape(l, err);
}

/* the factor drawn in [1 - lower, 1 + upper] (a single number f: [1, 1 + f], as Keras 3
 * computes it, its lower bound max(-f, 0)) */
static tfc_status contrast_build(tfc_layer *l, tfc_error *err)
{
    augment_args *a = l->args;
    a->contrast = 1;
    if (tfc_augment_factor_range(l, "factor", &a->factor, contrast_rule, &a->lo[0], &a->hi[0], err))
        return TFC_ERR_CONFIG;
    if (a->value_range.n == 0)
        a->value_range = (tfc_float_list){.n = 2, .v = {0, 255}};
    if (a->value_range.n != 2)
        return tfc_layer_error(err, l, "value_range: expected a pair [low, high], found %d "
                               "value%s", a->value_range.n, a->value_range.n == 1 ? "" : "s");
    a->lo[0] = 1.0f - a->lo[0], a->hi[0] = 1.0f + a->hi[0];
    return tfc_augment_same_shape(l, err);
}

/* the delta drawn in [lower, upper] (a number f: [-f, f]) times value_range's width, which
 * Keras sorts */
static tfc_status brightness_build(tfc_layer *l, tfc_error *err)
{
    augment_args *a = l->args;
    a->brightness = 1;
    if (tfc_augment_factor_range(l, "factor", &a->factor, turn_rule, &a->lo[0], &a->hi[0], err))
        return TFC_ERR_CONFIG;
    if (a->value_range.n == 0)
        a->value_range = (tfc_float_list){.n = 2, .v = {0, 255}};
    if (a->value_range.n != 2)
        return tfc_layer_error(err, l, "value_range: expected a pair [low, high], found %d "
                               "value%s", a->value_range.n, a->value_range.n == 1 ? "" : "s");
    if (a->value_range.v[0] > a->value_range.v[1]) {
        const double t = a->value_range.v[0];
        a->value_range.v[0] = a->value_range.v[1], a->value_range.v[1] = t;
    }
    return tfc_augment_same_shape(l, err);
}

uint64_t tfc_augment_key(const tfc_layer *l, int seed)
{
    return seed ? tfc_rng_key(l->rng_key, (uint64_t)seed) : l->rng_key;
}

static tfc_warp_desc warp_desc(const tfc_layer *l, const tfc_exec *ex)
{
    const augment_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    return (tfc_warp_desc){.n = ex->batch, .h = (int)in->dim[0], .w = (int)in->dim[1],
                           .c = (int)in->dim[2], .kind = a->kind, .lo = {a->lo[0], a->lo[1]},
                           .hi = {a->hi[0], a->hi[1]}, .same_zoom = a->width_factor.n == 0,
                           .flip_rows = a->mode != 0, .flip_cols = a->mode != 1,
                           .fill = (tfc_fill_mode)a->fill_mode,
                           .bilinear = a->kind != TFC_WARP_FLIP && a->interpolation == 1,
                           .fill_value = (float)a->fill_value, .key = tfc_augment_key(l, a->seed),
                           .step = ex->step};
}

static tfc_contrast_desc contrast_desc(const tfc_layer *l, const tfc_exec *ex)
{
    const augment_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    return (tfc_contrast_desc){.n = ex->batch, .hw = (int)(in->dim[0] * in->dim[1]),
                               .c = (int)in->dim[2], .lo = a->lo[0], .hi = a->hi[0],
                               .vlo = (float)a->value_range.v[0],
                               .vhi = (float)a->value_range.v[1],
                               .key = tfc_augment_key(l, a->seed), .step = ex->step};
}

static void augment_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const augment_args *a = l->args;
    if (!ex->training) {
        ex->be->ops->copy(ex->be, y, x[0], (size_t)(ex->batch * tfc_layer_out_numel(l)) * 4);
    } else if (a->brightness) {
        tfc_contrast_desc d = contrast_desc(l, ex);
        ex->be->ops->brightness_forward(ex->be, &d, x[0], y);
    } else if (a->contrast) {
        tfc_contrast_desc d = contrast_desc(l, ex);
        ex->be->ops->contrast_forward(ex->be, &d, x[0], y);
    } else {
        tfc_warp_desc d = warp_desc(l, ex);
        ex->be->ops->warp_forward(ex->be, &d, x[0], y);
    }
}

static void augment_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                             const float *dy, float *const *dx)
{
    const augment_args *a = l->args;
    if (!dx[0]) return;
    if (!ex->training) {
        ex->be->ops->axpy(ex->be, ex->batch * tfc_layer_out_numel(l), 1.f, dy, dx[0]);
    } else if (a->brightness) {
        tfc_contrast_desc d = contrast_desc(l, ex);
        ex->be->ops->brightness_backward(ex->be, &d, x[0], dy, dx[0]);
    } else if (a->contrast) {
        tfc_contrast_desc d = contrast_desc(l, ex);
        ex->be->ops->contrast_backward(ex->be, &d, x[0], dy, dx[0]);
    } else {
        tfc_warp_desc d = warp_desc(l, ex);
        ex->be->ops->warp_backward(ex->be, &d, dy, dx[0]);
    }
}

static const char *const *warp_needs(const tfc_layer *l)
{
    static const char *const ops[] = {"warp_forward", "warp_backward", NULL};
    return ops;
}

static const char *const *contrast_needs(const tfc_layer *l)
{
    static const char *const ops[] = {"contrast_forward", "contrast_backward", NULL};
    return ops;
}

static const char *const *brightness_needs(const tfc_layer *l)
{
    static const char *const ops[] = {"brightness_forward", "brightness_backward", NULL};
    return ops;
}

#define AUGMENT_OPS(var, name, fields, build_fn, needs_fn)                                     \
    const tfc_layer_ops var = {                                                                 \
        .type = name, .schema = fields, .args_size = sizeof(augment_args),                      \
        .min_inputs = 1, .max_inputs = 1, .copies_at_inference = 1,                             \
        .build = build_fn, .forward = augment_forward, .backward = augment_backward,            \
        .needs = needs_fn,                                                                      \
    }

AUGMENT_OPS(tfc_random_flip_ops, "RandomFlip", flip_fields, flip_build, warp_needs);
AUGMENT_OPS(tfc_random_translation_ops, "RandomTranslation", translation_fields,
            translation_build, warp_needs);
AUGMENT_OPS(tfc_random_rotation_ops, "RandomRotation", rotation_fields, rotation_build,
            warp_needs);
AUGMENT_OPS(tfc_random_zoom_ops, "RandomZoom", zoom_fields, zoom_build, warp_needs);
/* on the warp ops the GPU has, but not yet run there under make test-gpu */
const tfc_layer_ops tfc_random_shear_ops = {
    .type = "RandomShear", .schema = shear_fields, .args_size = sizeof(augment_args),
    .min_inputs = 1, .max_inputs = 1, .copies_at_inference = 1, .cpu_first = 1,
    .build = shear_build, .forward = augment_forward, .backward = augment_backward,
    .needs = warp_needs,
};
const tfc_layer_ops tfc_random_perspective_ops = {
    .type = "RandomPerspective", .schema = perspective_fields, .args_size = sizeof(augment_args),
    .min_inputs = 1, .max_inputs = 1, .copies_at_inference = 1, .cpu_first = 1,
    .build = perspective_build, .forward = augment_forward, .backward = augment_backward,
    .needs = warp_needs,
};
AUGMENT_OPS(tfc_random_contrast_ops, "RandomContrast", contrast_fields, contrast_build,
            contrast_needs);
AUGMENT_OPS(tfc_random_brightness_ops, "RandomBrightness", brightness_fields, brightness_build,
            brightness_needs);
