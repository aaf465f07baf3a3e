/* The tone layers (keras.layers.AutoContrast, Equalization,
 * ContrastLimitedAdaptiveHistogramEqualization): deterministic per-channel maps of an
 * image's values (core/tone.h, tfc_tone_desc in core/backend.h).
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
 *   ContrastLimitedAdaptiveHistogramEqualization (CLAHE; training and inference, as Keras's):
 *     each image's channel, in [0, 255], padded symmetrically to a whole grid of
 *     tile_grid_size tiles; each tile's 256-bin histogram (of the values' int32 casts)
 *     clipped at clip_limit (tile area) / 256 with the excess spread over every bin (no
 *     clipping when clip_limit <= 0), its running sum scaled to [0, 255] as a table; each
 *     value the bilinear blend of the tables of the four tiles nearest its pixel, back in
 *     value_range (as given: Keras does not sort it)
 *     backward: none (Keras's gradient is zero: every path runs through the int32 cast)
 * Gradients accumulate into dx. Neither draws anything, so neither takes a seed. */
#include "layers/augment.h"
#include "layers/layer.h"

typedef struct tone_args {
    tfc_float_list value_range;
    int bins, data_format;
    tfc_int_list tile_grid_size; /* CLAHE */
    double clip_limit;           /* CLAHE */
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
static const tfc_field clahe_fields[] = {
    VALUE_RANGE_FIELD,
    {"clip_limit", TFC_F_FLOAT, offsetof(tone_args, clip_limit), "4", TFC_UNBOUNDED, NULL,
     "each bin of a tile's histogram held to clip_limit (tile area) / 256 (<= 0: no limit)"},
    {"tile_grid_size", TFC_F_INT_LIST, offsetof(tone_args, tile_grid_size), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "[rows, columns] of tiles (none: [8, 8], Keras's default)"},
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

static int is_clahe(const tfc_layer *l)
{
    return l->ops->type[0] == 'C';
}

/* CLAHE: value_range as tone_build checks it but kept in its order (Keras maps it as given);
 * tile_grid_size a pair of positive numbers, each at most the image's side times 16 (more
 * tiles than that are only padding) */
static tfc_status clahe_build(tfc_layer *l, tfc_error *err)
{
    tone_args *a = l->args;
    tfc_status st = tone_build(l, err);
    if (st) return st;
    a->vlo = (float)a->value_range.v[0], a->vhi = (float)a->value_range.v[1];
    if (a->tile_grid_size.n == 0) a->tile_grid_size = (tfc_int_list){.n = 2, .v = {8, 8}};
    if (a->tile_grid_size.n != 2)
        return tfc_layer_error(err, l, "tile_grid_size: expected a pair [rows, columns], "
                               "found %d value%s", a->tile_grid_size.n,
                               a->tile_grid_size.n == 1 ? "" : "s");
    for (int k = 0; k < 2; k++) {
        const int64_t side = l->in_shape[0].dim[k];
        if (a->tile_grid_size.v[k] < 1 || a->tile_grid_size.v[k] > 16 * side)
            return tfc_layer_error(err, l, "tile_grid_size: %d is outside [1, %lld] (the "
                                   "image's %s times 16)", a->tile_grid_size.v[k],
                                   (long long)(16 * side), k ? "width" : "height");
    }
    return TFC_OK;
}

static tfc_tone_desc tone_desc(const tfc_layer *l, const tfc_exec *ex)
{
    const tone_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    const int eq = is_equalization(l), clahe = is_clahe(l);
    return (tfc_tone_desc){.n = ex->batch, .hw = (int)(in->dim[0] * in->dim[1]),
                           .c = (int)in->dim[2],
                           .kind = clahe ? TFC_TONE_CLAHE
                                   : eq ? TFC_TONE_EQUALIZE : TFC_TONE_AUTOCONTRAST,
                           .bins = eq ? a->bins : 0, .vlo = a->vlo, .vhi = a->vhi,
                           .h = (int)in->dim[0], .w = (int)in->dim[1],
                           .grid_h = clahe ? a->tile_grid_size.v[0] : 0,
                           .grid_w = clahe ? a->tile_grid_size.v[1] : 0,
                           .clip_limit = (float)a->clip_limit};
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
/* on the tone ops (gpu_tone.cu's CLAHE kernel compiled, not yet run under make test-gpu) */
const tfc_layer_ops tfc_clahe_ops = {
    .type = "ContrastLimitedAdaptiveHistogramEqualization", .schema = clahe_fields,
    .args_size = sizeof(tone_args), .min_inputs = 1, .max_inputs = 1, .cpu_first = 1,
    .build = clahe_build, .forward = tone_forward, .backward = tone_backward,
    .needs = tone_needs,
};
