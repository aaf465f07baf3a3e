/* The region augmentation layers (keras.layers.RandomErasing, RandomGaussianBlur): in
 * training each image gets its own random region or blur, drawn from the layer's stream at
 * (step, image) (core/augment_region.h), so a resumed run repeats it; at inference y = x.
 *   RandomErasing:
 *     y = fill inside image i's rectangle when it is erased (probability p, p drawn in
 *         factor's range), x elsewhere; fill = clip(z value_range[1], value_range) per value
 *         (z standard normal) without fill_value, else clip(fill_value, value_range)
 *     backward: dx += dy outside the erased rectangles (the fill does not depend on x)
 *   RandomGaussianBlur:
 *     y = clip(blurred ? G * x : x, value_range), image i blurred with probability p (p drawn
 *         in factor's range), G the kernel_size Gaussian of sigmas drawn once per batch,
 *         zero-padded (Keras's gaussian_blur; every image is clipped, blurred or not)
 *     backward: dx += G^T g (or g unblurred), g = dy where the clip passes
 * Gradients accumulate into dx. A layer's seed, when set, is mixed into its stream as the
 * other augmentation layers' (layers/augment.h). */
#include "layers/augment.h"
#include "layers/layer.h"

typedef struct region_args {
    int seed, data_format;
    tfc_float_list factor, scale, fill_value, value_range, sigma;
    tfc_int_list kernel_size;
    /* set by build: factor's and scale's (sigma's) ranges, the kernel's width and height */
    float plo, phi, slo, shi;
    int kw, kh;
} region_args;

#define SEED_FIELD                                                                              \
    {"seed", TFC_F_INT, offsetof(region_args, seed), TFC_NO_DEFAULT, 0, 2147483647, NULL,       \
     "mixed into the run's seed for this layer's draws (none or 0: the run's alone)"}
#define LIST_FIELD(name, member, def, help)                                                     \
    {name, TFC_F_FLOAT_LIST, offsetof(region_args, member), def, TFC_UNBOUNDED, NULL, help}

static const tfc_field erasing_fields[] = {
    LIST_FIELD("factor", factor, "1", "the erase probability is drawn in [0, factor]"),
    LIST_FIELD("scale", scale, TFC_NO_DEFAULT,
               "[lower, upper] each side's squared fraction is drawn in (none: [0.02, 0.33])"),
    LIST_FIELD("fill_value", fill_value, TFC_NO_DEFAULT,
               "a number or 3 per channel (none: normal noise times value_range's upper)"),
    LIST_FIELD("value_range", value_range, TFC_NO_DEFAULT,
               "[low, high] the fill is clipped to (none: [0, 255], Keras's default)"),
    SEED_FIELD, TFC_DATA_FORMAT_FIELD(region_args, data_format), {NULL}};

static const tfc_field blur_fields[] = {
    LIST_FIELD("factor", factor, "1", "the blur probability is drawn in [0, factor]"),
    {"kernel_size", TFC_F_INT_LIST, offsetof(region_args, kernel_size), "3", TFC_UNBOUNDED,
     NULL, "odd: one for both axes, or [width, height] (Keras's order)"},
    LIST_FIELD("sigma", sigma, "1", "the sigmas are drawn in [0, sigma] (or a pair's range)"),
    LIST_FIELD("value_range", value_range, TFC_NO_DEFAULT,
               "[low, high] the output is clipped to (none: [0, 255], Keras's default)"),
    TFC_DATA_FORMAT_FIELD(region_args, data_format), SEED_FIELD, {NULL}};

/* BaseImagePreprocessingLayer._set_factor's rule with bounds [0, 1]: a number f gives
 * [0, f], a pair is sorted and needs lower <= 1, upper >= 0 */
static const tfc_factor_rule unit_rule = {0, 1, 0, 1};

static tfc_status value_range_pair(tfc_layer *l, tfc_float_list *v, tfc_error *err)
{
    if (v->n == 0) *v = (tfc_float_list){.n = 2, .v = {0, 255}};
    if (v->n != 2)
        return tfc_layer_error(err, l, "value_range: expected a pair [low, high], found %d "
                               "value%s", v->n, v->n == 1 ? "" : "s");
    return TFC_OK;
}

static tfc_status erasing_build(tfc_layer *l, tfc_error *err)
{
    region_args *a = l->args;
    if (a->scale.n == 0) a->scale = (tfc_float_list){.n = 2, .v = {0.02, 0.33}};
    if (tfc_augment_factor_range(l, "factor", &a->factor, unit_rule, &a->plo, &a->phi, err) ||
        tfc_augment_factor_range(l, "scale", &a->scale, unit_rule, &a->slo, &a->shi, err) ||
        value_range_pair(l, &a->value_range, err))
        return TFC_ERR_CONFIG;
    if (a->fill_value.n != 0 && a->fill_value.n != 1 && a->fill_value.n != 3)
        return tfc_layer_error(err, l, "fill_value: expected a number or a list of three "
                               "numbers, found %d values", a->fill_value.n);
    if (tfc_augment_same_shape(l, err)) return TFC_ERR_CONFIG;
    if (a->fill_value.n == 3 && l->in_shape[0].dim[2] != 3)
        return tfc_layer_error(err, l, "fill_value: three values need 3 channels, the input "
                               "has %lld", (long long)l->in_shape[0].dim[2]);
    return TFC_OK;
}

/* kernel_size: an odd number, or a pair of odd numbers [width, height] (Keras's
 * _set_kernel_size, gaussian_blur's (size[0] for the columns, size[1] for the rows)) */
static tfc_status blur_build(tfc_layer *l, tfc_error *err)
{
    region_args *a = l->args;
    if (tfc_augment_factor_range(l, "factor", &a->factor, unit_rule, &a->plo, &a->phi, err) ||
        tfc_augment_factor_range(l, "sigma", &a->sigma, unit_rule, &a->slo, &a->shi, err) ||
        value_range_pair(l, &a->value_range, err))
        return TFC_ERR_CONFIG;
    const tfc_int_list *k = &a->kernel_size;
    if (k->n != 1 && k->n != 2)
        return tfc_layer_error(err, l, "kernel_size: expected a number or a pair [width, "
                               "height], found %d values", k->n);
    a->kw = (int)k->v[0], a->kh = (int)k->v[k->n - 1];
    if (a->kw % 2 == 0 || a->kh % 2 == 0 || a->kw < 1 || a->kh < 1 ||
        a->kw > TFC_BLUR_MAX_KERNEL || a->kh > TFC_BLUR_MAX_KERNEL)
        return tfc_layer_error(err, l, "kernel_size must be odd numbers in [1, %d], found "
                               "[%d, %d]", TFC_BLUR_MAX_KERNEL, a->kw, a->kh);
    return tfc_augment_same_shape(l, err);
}

static tfc_blur_desc blur_desc(const tfc_layer *l, const tfc_exec *ex)
{
    const region_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    return (tfc_blur_desc){.n = ex->batch, .h = (int)in->dim[0], .w = (int)in->dim[1],
                           .c = (int)in->dim[2], .kh = a->kh, .kw = a->kw, .plo = a->plo,
                           .phi = a->phi, .slo = a->slo, .shi = a->shi,
                           .vlo = (float)a->value_range.v[0],
                           .vhi = (float)a->value_range.v[1],
                           .key = tfc_augment_key(l, a->seed), .step = ex->step};
}

static tfc_erase_desc erase_desc(const tfc_layer *l, const tfc_exec *ex)
{
    const region_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    tfc_erase_desc d = {.n = ex->batch, .h = (int)in->dim[0], .w = (int)in->dim[1],
                        .c = (int)in->dim[2], .plo = a->plo, .phi = a->phi, .slo = a->slo,
                        .shi = a->shi, .noise = a->fill_value.n == 0,
                        .vlo = (float)a->value_range.v[0], .vhi = (float)a->value_range.v[1],
                        .key = tfc_augment_key(l, a->seed), .step = ex->step};
    for (int k = 0; k < 3 && a->fill_value.n; k++)
        d.fill[k] = (float)a->fill_value.v[a->fill_value.n == 3 ? k : 0];
    return d;
}

/* which layer: its build function */
static int is_blur(const tfc_layer *l)
{
    return l->ops->build == blur_build;
}

static void region_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    if (!ex->training) {
        ex->be->ops->copy(ex->be, y, x[0], (size_t)(ex->batch * tfc_layer_out_numel(l)) * 4);
    } else if (is_blur(l)) {
        tfc_blur_desc d = blur_desc(l, ex);
        ex->be->ops->blur_forward(ex->be, &d, x[0], y);
    } else {
        tfc_erase_desc d = erase_desc(l, ex);
        ex->be->ops->erasing_forward(ex->be, &d, x[0], y);
    }
}

static void region_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                            const float *dy, float *const *dx)
{
    if (!dx[0]) return;
    if (!ex->training) {
        ex->be->ops->axpy(ex->be, ex->batch * tfc_layer_out_numel(l), 1.f, dy, dx[0]);
    } else if (is_blur(l)) {
        tfc_blur_desc d = blur_desc(l, ex);
        ex->be->ops->blur_backward(ex->be, &d, x[0], dy, dx[0]);
    } else {
        tfc_erase_desc d = erase_desc(l, ex);
        ex->be->ops->erasing_backward(ex->be, &d, dy, dx[0]);
    }
}

static const char *const *erasing_needs(const tfc_layer *l)
{
    static const char *const ops[] = {"erasing_forward", "erasing_backward", NULL};
    return ops;
}

static const char *const *blur_needs(const tfc_layer *l)
{
    static const char *const ops[] = {"blur_forward", "blur_backward", NULL};
    return ops;
}

#define REGION_OPS(var, name, fields, build_fn, needs_fn)                                      \
    const tfc_layer_ops var = {                                                                 \
        .type = name, .schema = fields, .args_size = sizeof(region_args),                       \
        .min_inputs = 1, .max_inputs = 1, .copies_at_inference = 1,                             \
        .build = build_fn, .forward = region_forward, .backward = region_backward,              \
        .needs = needs_fn,                                                                      \
    }

REGION_OPS(tfc_random_erasing_ops, "RandomErasing", erasing_fields, erasing_build,
           erasing_needs);
REGION_OPS(tfc_random_gaussian_blur_ops, "RandomGaussianBlur", blur_fields, blur_build,
           blur_needs);
