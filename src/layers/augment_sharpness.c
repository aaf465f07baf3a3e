/* keras.layers.RandomSharpness: in training each image is blended with its smoothing (Keras's
 * 3 x 3 kernel, 1/13 around 5/13, zero-padded) by its own factor f, drawn from the layer's
 * stream at (step, image) (core/augment_sharp.h), so a resumed run repeats it; at inference
 * y = x.
 *   y = clip(x + (1 - 2 f) (s - x), value_range)   (every image clipped)
 *   backward: dx += (1 - c) g + c K^T g,  c = 1 - 2 f, g = dy where the clip passes
 * Gradients accumulate into dx. A layer's seed, when set, is mixed into its stream as the
 * other augmentation layers' (layers/augment.h). */
#include "layers/augment.h"
#include "layers/layer.h"

typedef struct sharpness_args {
    int seed, data_format;
    tfc_float_list factor, value_range;
    float lo, hi; /* set by build: factor's range */
} sharpness_args;

static const tfc_field sharpness_fields[] = {
    {"factor", TFC_F_FLOAT_LIST, offsetof(sharpness_args, factor), NULL, TFC_UNBOUNDED, NULL,
     "in [0, 1]: 0 blurs, 0.5 keeps, 1 sharpens; drawn in [0, factor] (or a pair's range)"},
    {"value_range", TFC_F_FLOAT_LIST, offsetof(sharpness_args, value_range),
     TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "[low, high] the output is clipped to (none: [0, 255], Keras's default)"},
    TFC_DATA_FORMAT_FIELD(sharpness_args, data_format),
    {"seed", TFC_F_INT, offsetof(sharpness_args, seed), TFC_NO_DEFAULT, 0, 2147483647, NULL,
     "mixed into the run's seed for this layer's draws (none or 0: the run's alone)"},
    {NULL}};

/* factor: BaseImagePreprocessingLayer._set_factor's rule with bounds [0, 1]; value_range a
 * pair, sorted as Keras's _set_value_range */
static tfc_status sharpness_build(tfc_layer *l, tfc_error *err)
{
    sharpness_args *a = l->args;
    const tfc_factor_rule unit_rule = {0, 1, 0, 1};
    if (tfc_augment_factor_range(l, "factor", &a->factor, unit_rule, &a->lo, &a->hi, err))
        return TFC_ERR_CONFIG;
    tfc_float_list *v = &a->value_range;
    if (v->n == 0) *v = (tfc_float_list){.n = 2, .v = {0, 255}};
    if (v->n != 2)
        return tfc_layer_error(err, l, "value_range: expected a pair [low, high], found %d "
                               "value%s", v->n, v->n == 1 ? "" : "s");
    if (v->v[0] > v->v[1]) {
        const double t = v->v[0];
        v->v[0] = v->v[1], v->v[1] = t;
    }
    return tfc_augment_same_shape(l, err);
}

static tfc_sharpen_desc sharpen_desc(const tfc_layer *l, const tfc_exec *ex)
{
    const sharpness_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    return (tfc_sharpen_desc){.n = ex->batch, .h = (int)in->dim[0], .w = (int)in->dim[1],
                              .c = (int)in->dim[2], .lo = a->lo, .hi = a->hi,
                              .vlo = (float)a->value_range.v[0],
                              .vhi = (float)a->value_range.v[1],
                              .key = tfc_augment_key(l, a->seed), .step = ex->step};
}

static void sharpness_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    if (!ex->training) {
        ex->be->ops->copy(ex->be, y, x[0], (size_t)(ex->batch * tfc_layer_out_numel(l)) * 4);
        return;
    }
    tfc_sharpen_desc d = sharpen_desc(l, ex);
    ex->be->ops->sharpen_forward(ex->be, &d, x[0], y);
}

static void sharpness_backward(tfc_layer *l, tfc_exec *ex, const void *const *x,
                               const float *y, const float *dy, float *const *dx)
{
    if (!dx[0]) return;
    if (!ex->training) {
        ex->be->ops->axpy(ex->be, ex->batch * tfc_layer_out_numel(l), 1.f, dy, dx[0]);
        return;
    }
    tfc_sharpen_desc d = sharpen_desc(l, ex);
    ex->be->ops->sharpen_backward(ex->be, &d, x[0], dy, dx[0]);
}

static const char *const *sharpness_needs(const tfc_layer *l)
{
    static const char *const ops[] = {"sharpen_forward", "sharpen_backward", NULL};
    return ops;
}

const tfc_layer_ops tfc_random_sharpness_ops = {
    .type = "RandomSharpness", .schema = sharpness_fields, .args_size = sizeof(sharpness_args),
    .min_inputs = 1, .max_inputs = 1, .copies_at_inference = 1,
    .build = sharpness_build, .forward = sharpness_forward, .backward = sharpness_backward,
    .needs = sharpness_needs,
};
