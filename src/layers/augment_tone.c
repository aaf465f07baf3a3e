/* The tone layers (keras.layers.AutoContrast, Equalization): deterministic per-channel maps
 * of an image's values (core/tone.h, tfc_tone_desc in core/backend.h).
 *   AutoContrast (training and inference, as Keras's):
 *     y = clip((x - lo) / (hi - lo), 0, 1) (value_range's width) + value_range's low,
 *         lo, hi the minimum and maximum of each image's channel (computed in [0, 255],
 *         as Keras does); a constant channel is kept
 *     backward: through lo and hi too (ties share them); a constant channel passes dy
 *   Equalization (training only: Keras's transform_images returns the images unchanged
 *   when training is false, so y = x at inference, whatever its docstring says):
 *     each channel over the whole batch (Keras takes the histogram of images[..., ch]),
 *     in [0, 255], its bins-bin histogram equalized through a rounded lookup table, back
 *     in value_range; a channel of at most one non-zero bin is kept
 *     backward: none (the table is read at integer indices), dy where the channel is kept
 * Gradients accumulate into dx. Neither draws anything, so neither takes a seed. */
#include "layers/augment.h"
#include "layers/layer.h"

typedef struct tone_args {
    tfc_float_list value_range;
    int bins, data_format;
    float vlo, vhi; /* set by build: value_range sorted, as Keras sorts it */
} tone_args;

#define VALUE_RANGE_FIELD                                                                       \
    {"value_range", TFC_F_FLOAT_LIST, offsetof(tone_args, value_range), TFC_NO_DEFAULT,       \
     TFC_UNBOUNDED, NULL, "[low, high] of the input's values (none: [0, 255], Keras's default)"}

static const tfc_field autocontrast_fields[] = {
    VALUE_RANGE_FIELD, TFC_DATA_FORMAT_FIELD(tone_args, data_format), {NULL}};
static const tfc_field equalization_fields[] = {
    VALUE_RANGE_FIELD,
    {"bins", TFC_F_INT, offsetof(tone_args, bins), "256", 1, TFC_TONE_MAX_BINS, NULL,
     "the histogram's bins over [0, 255]"},
    TFC_DATA_FORMAT_FIELD(tone_args, data_format), {NULL}};

/* value_range: a pair of distinct numbers (Keras's _set_value_range; equal ones would
 * divide by zero), sorted */
static tfc_status tone_build(tfc_layer *l, tfc_error *err)
{
    tone_args *a = l->args;
    if (a->value_range.n == 0) a->value_range = (tfc_float_list){.n = 2, .v = {0, 255}};
    if (a->value_range.n != 2)
        return tfc_layer_error(err, l, "value_range: expected a pair [low, high], found %d "
                               "value%s", a->value_range.n, a->value_range.n == 1 ? "" : "s");
    a->vlo = (float)fmin(a->value_range.v[0], a->value_range.v[1]);
    a->vhi = (float)fmax(a->value_range.v[0], a->value_range.v[1]);
    if (!(a->vhi > a->vlo))
        return tfc_layer_error(err, l, "value_range: low and high must differ, got [%g, %g]",
                               a->value_range.v[0], a->value_range.v[1]);
    return tfc_augment_same_shape(l, err);
}

static int is_equalization(const tfc_layer *l)
{
    return l->ops->type[0] == 'E';
}

static tfc_tone_desc tone_desc(const tfc_layer *l, const tfc_exec *ex)
{
    const tone_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    const int eq = is_equalization(l);
    return (tfc_tone_desc){.n = ex->batch, .hw = (int)(in->dim[0] * in->dim[1]),
                           .c = (int)in->dim[2],
                           .kind = eq ? TFC_TONE_EQUALIZE : TFC_TONE_AUTOCONTRAST,
                           .bins = eq ? a->bins : 0, .vlo = a->vlo, .vhi = a->vhi};
}

static void tone_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    if (!ex->training && is_equalization(l)) {
        ex->be->ops->copy(ex->be, y, x[0], (size_t)(ex->batch * tfc_layer_out_numel(l)) * 4);
        return;
    }
    tfc_tone_desc d = tone_desc(l, ex);
    ex->be->ops->tone_forward(ex->be, &d, x[0], y);
}

static void tone_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                          const float *dy, float *const *dx)
{
    (void)y;
    if (!dx[0]) return;
    if (!ex->training && is_equalization(l)) {
        ex->be->ops->axpy(ex->be, ex->batch * tfc_layer_out_numel(l), 1.f, dy, dx[0]);
        return;
    }
    tfc_tone_desc d = tone_desc(l, ex);
    ex->be->ops->tone_backward(ex->be, &d, x[0], dy, dx[0]);
}

static const char *const *tone_needs(const tfc_layer *l)
{
    (void)l;
    static const char *const ops[] = {"tone_forward", "tone_backward", NULL};
    return ops;
}

const tfc_layer_ops tfc_auto_contrast_ops = {
    .type = "AutoContrast", .schema = autocontrast_fields, .args_size = sizeof(tone_args),
    .min_inputs = 1, .max_inputs = 1, .build = tone_build, .forward = tone_forward,
    .backward = tone_backward, .needs = tone_needs,
};
const tfc_layer_ops tfc_equalization_ops = {
    .type = "Equalization", .schema = equalization_fields, .args_size = sizeof(tone_args),
    .min_inputs = 1, .max_inputs = 1, .copies_at_inference = 1, .build = tone_build,
    .forward = tone_forward, .backward = tone_backward, .needs = tone_needs,
};
