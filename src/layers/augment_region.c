/* The region augmentation layers (keras.layers.RandomErasing): in training each image gets
 * its own random region, drawn from the layer's stream at (step, image) (core/
 * augment_region.h), so a resumed run repeats it; at inference y = x.
 *   RandomErasing:
 *     y = fill inside image i's rectangle when it is erased (probability p, p drawn in
 *         factor's range), x elsewhere; fill = clip(z value_range[1], value_range) per value
 *         (z standard normal) without fill_value, else clip(fill_value, value_range)
 *     backward: dx += dy outside the erased rectangles (the fill does not depend on x)
 * Gradients accumulate into dx. A layer's seed, when set, is mixed into its stream as the
 * other augmentation layers' (layers/augment.h). */
#include "layers/augment.h"
#include "layers/layer.h"

typedef struct region_args {
    int seed, data_format;
    tfc_float_list factor, scale, fill_value, value_range;
    /* set by build: factor's and scale's ranges */
    float plo, phi, slo, shi;
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

static void erasing_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    if (!ex->training) {
        ex->be->ops->copy(ex->be, y, x[0], (size_t)(ex->batch * tfc_layer_out_numel(l)) * 4);
        return;
    }
    tfc_erase_desc d = erase_desc(l, ex);
    ex->be->ops->erasing_forward(ex->be, &d, x[0], y);
}

static void erasing_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                             const float *dy, float *const *dx)
{
    if (!dx[0]) return;
    if (!ex->training) {
        ex->be->ops->axpy(ex->be, ex->batch * tfc_layer_out_numel(l), 1.f, dy, dx[0]);
        return;
    }
    tfc_erase_desc d = erase_desc(l, ex);
    ex->be->ops->erasing_backward(ex->be, &d, dy, dx[0]);
}

static const char *const *erasing_needs(const tfc_layer *l)
{
    static const char *const ops[] = {"erasing_forward", "erasing_backward", NULL};
    return ops;
}

const tfc_layer_ops tfc_random_erasing_ops = {
    .type = "RandomErasing", .schema = erasing_fields, .args_size = sizeof(region_args),
    .min_inputs = 1, .max_inputs = 1, .copies_at_inference = 1,
    .build = erasing_build, .forward = erasing_forward, .backward = erasing_backward,
    .needs = erasing_needs,
};
