/* keras.layers.RandomElasticTransform: in training each image, with probability p (p drawn
 * in factor's range), is warped by a smooth random displacement field (core/elastic.h,
 * tfc_elastic_desc in core/backend.h); then every image, warped or not, is clipped to
 * value_range; at inference y = x.
 *   the batch's distortion factor s is drawn once in scale's range; alpha = max(h, w) 0.1 s,
 *   sigma = min(h, w) 0.05 s; image i's field f = the (int(6 sigma) | 1)-tap Gaussian blur
 *   (sigma, zero-padded) of sigma z, z standard normals per pixel; output pixel (oy, ox)
 *   reads (ox + alpha f, oy + alpha f): one field for both axes, as Keras's JAX backend
 *   draws dx and dy from the same key; nearest or bilinear, fill_mode outside
 *     y = clip(moved ? warp(x) : x, value_range[0], value_range[1])
 *   factor or scale with upper bound 0: Keras draws nothing and y = x (no clip)
 *   backward: dx += warp^T g (or g unmoved), g = dy where the clip passes (the field does not
 *   depend on x; fill_value is a constant)
 * Gradients accumulate into dx. A layer's seed, when set, is mixed into its stream as the
 * other augmentation layers' (layers/augment.h). */
#include "core/elastic.h"
#include "layers/augment.h"
#include "layers/layer.h"

typedef struct elastic_args {
    int interpolation, fill_mode, seed, data_format;
    tfc_float_list factor, scale, value_range;
    double fill_value;
    /* set by build: factor's and scale's ranges */
    float plo, phi, slo, shi;
} elastic_args;

/* in tfc_fill_mode's order */
static const char *const fill_mode_names[] = {"reflect", "wrap", "constant", "nearest",
                                              "mirror", NULL};
static const char *const interpolation_names[] = {"nearest", "bilinear", NULL};

#define LIST_FIELD(name, member, def, help)                                                     \
    {name, TFC_F_FLOAT_LIST, offsetof(elastic_args, member), def, TFC_UNBOUNDED, NULL, help}

static const tfc_field elastic_fields[] = {
    LIST_FIELD("factor", factor, "1", "the warp probability is drawn in [0, factor]"),
    LIST_FIELD("scale", scale, "1", "the distortion factor is drawn in [0, scale] (or a pair's)"),
    {"interpolation", TFC_F_ENUM, offsetof(elastic_args, interpolation), "bilinear",
     TFC_UNBOUNDED, interpolation_names, "nearest or bilinear"},
    {"fill_mode", TFC_F_ENUM, offsetof(elastic_args, fill_mode), "reflect", TFC_UNBOUNDED,
     fill_mode_names, "reflect, wrap, constant, nearest or mirror"},
    {"fill_value", TFC_F_FLOAT, offsetof(elastic_args, fill_value), "0", TFC_UNBOUNDED, NULL,
     "the value outside the image with fill_mode constant"},
    LIST_FIELD("value_range", value_range, TFC_NO_DEFAULT,
               "[low, high] the output is clipped to (none: [0, 255], Keras's default)"),
    {"seed", TFC_F_INT, offsetof(elastic_args, seed), TFC_NO_DEFAULT, 0, 2147483647, NULL,
     "mixed into the run's seed for this layer's draws (none or 0: the run's alone)"},
    TFC_DATA_FORMAT_FIELD(elastic_args, data_format), {NULL}};

/* factor and scale: BaseImagePreprocessingLayer._set_factor's rule with bounds [0, 1]
 * (scale's _set_factor_by_name is the same); value_range a pair, kept in its order */
static tfc_status elastic_build(tfc_layer *l, tfc_error *err)
{
    elastic_args *a = l->args;
    const tfc_factor_rule unit_rule = {0, 1, 0, 1};
    if (tfc_augment_factor_range(l, "factor", &a->factor, unit_rule, &a->plo, &a->phi, err) ||
        tfc_augment_factor_range(l, "scale", &a->scale, unit_rule, &a->slo, &a->shi, err))
        return TFC_ERR_CONFIG;
    if (a->value_range.n == 0) a->value_range = (tfc_float_list){.n = 2, .v = {0, 255}};
    if (a->value_range.n != 2)
        return tfc_layer_error(err, l, "value_range: expected a pair [low, high], found %d "
                               "value%s", a->value_range.n, a->value_range.n == 1 ? "" : "s");
    return tfc_augment_same_shape(l, err);
}

/* Keras returns no transformation (y = x, unclipped) at inference and when factor's or
 * scale's upper bound is 0 */
static int elastic_identity(const tfc_layer *l, const tfc_exec *ex)
{
    const elastic_args *a = l->args;
    return !ex->training || a->phi == 0.0f || a->shi == 0.0f;
}

static tfc_elastic_desc elastic_desc(const tfc_layer *l, const tfc_exec *ex)
{
    const elastic_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    tfc_elastic_desc d = {.n = ex->batch, .h = (int)in->dim[0], .w = (int)in->dim[1],
                          .c = (int)in->dim[2], .plo = a->plo, .phi = a->phi,
                          .fill = (tfc_fill_mode)a->fill_mode, .bilinear = a->interpolation == 1,
                          .fill_value = (float)a->fill_value,
                          .vlo = (float)a->value_range.v[0], .vhi = (float)a->value_range.v[1],
                          .key = tfc_augment_key(l, a->seed), .step = ex->step};
    const float s = tfc_elastic_scale(d.key, d.step, a->slo, a->shi);
    tfc_elastic_params(d.h, d.w, s, &d.alpha, &d.sigma, &d.k);
    return d;
}

static void elastic_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    if (elastic_identity(l, ex)) {
        ex->be->ops->copy(ex->be, y, x[0], (size_t)(ex->batch * tfc_layer_out_numel(l)) * 4);
        return;
    }
    tfc_elastic_desc d = elastic_desc(l, ex);
    ex->be->ops->elastic_forward(ex->be, &d, x[0], y);
}

static void elastic_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                             const float *dy, float *const *dx)
{
    (void)y;
    if (!dx[0]) return;
    if (elastic_identity(l, ex)) {
        ex->be->ops->axpy(ex->be, ex->batch * tfc_layer_out_numel(l), 1.f, dy, dx[0]);
        return;
    }
    tfc_elastic_desc d = elastic_desc(l, ex);
    ex->be->ops->elastic_backward(ex->be, &d, x[0], dy, dx[0]);
}

static const char *const *elastic_needs(const tfc_layer *l)
{
    (void)l;
    static const char *const ops[] = {"elastic_forward", "elastic_backward", NULL};
    return ops;
}

const tfc_layer_ops tfc_random_elastic_transform_ops = {
    .type = "RandomElasticTransform", .schema = elastic_fields,
    .args_size = sizeof(elastic_args), .min_inputs = 1, .max_inputs = 1,
    .copies_at_inference = 1, .cpu_first = 1, .build = elastic_build,
    .host_choices = 1, /* the batch's distortion factor is drawn on the host each step */
    .forward = elastic_forward, .backward = elastic_backward, .needs = elastic_needs,
};
