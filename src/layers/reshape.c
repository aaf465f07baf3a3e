/* Flatten and Reshape (keras.layers): the same elements in another shape. Row-major (NHWC)
 * order, as Keras's channels_last Flatten, so Dense weights move between the two unchanged.
 *   y = x (copied), dx += dy */
#include "layers/layer.h"

typedef struct reshape_args {
    tfc_int_list target_shape;
} reshape_args;

static const tfc_field flatten_fields[] = {TFC_IMAGE_DATA_FORMAT_FIELD, {NULL}};

static const tfc_field reshape_fields[] = {
    {"target_shape", TFC_F_INT_LIST, offsetof(reshape_args, target_shape), NULL, -1, 1 << 30,
     NULL, "the new shape per example; one axis may be -1"},
    {NULL}};

static tfc_status flatten_build(tfc_layer *l, tfc_error *err)
{
    l->out_shape = tfc_shape_make(1, (int64_t[]){tfc_shape_numel(&l->in_shape[0])});
    return TFC_OK;
}

static tfc_status reshape_build(tfc_layer *l, tfc_error *err)
{
    const reshape_args *a = l->args;
    int64_t in = tfc_shape_numel(&l->in_shape[0]), known = 1;
    int unknown = -1;
    char b1[96], b2[96];
    if (a->target_shape.n == 0 || a->target_shape.n >= TFC_MAX_DIMS)
        return tfc_layer_error(err, l, "target_shape needs 1 to %d axes", TFC_MAX_DIMS - 1);
    l->out_shape.ndim = a->target_shape.n;
    for (int i = 0; i < a->target_shape.n; i++) {
        int v = a->target_shape.v[i];
        if (v == -1) {
            if (unknown >= 0) return tfc_layer_error(err, l, "target_shape has more than one -1");
            unknown = i;
        } else if (v == 0) {
            return tfc_layer_error(err, l, "target_shape axis %d is 0", i);
        } else {
            known *= v;
        }
        l->out_shape.dim[i] = v;
    }
    if (unknown >= 0 && known > 0 && in % known == 0) l->out_shape.dim[unknown] = in / known;
    if (tfc_shape_numel(&l->out_shape) != in)
        return tfc_layer_error(err, l, "cannot reshape %s (%lld elements) to %s",
                               tfc_shape_str(&l->in_shape[0], b1, sizeof b1), (long long)in,
                               tfc_shape_str(&l->out_shape, b2, sizeof b2));
    return TFC_OK;
}

static void copy_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    ex->be->ops->copy(ex->be, y, x[0], (size_t)ex->batch * (size_t)tfc_layer_out_numel(l) * 4);
}

/* dx += dy, or a copy where dx's block starts here (no zeroing pass before it) */
static void copy_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                          const float *dy, float *const *dx)
{
    if (!dx[0]) return;
    const int64_t n = (int64_t)ex->batch * tfc_layer_out_numel(l);
    if (ex->fresh & 1) ex->be->ops->copy(ex->be, dx[0], dy, (size_t)n * 4);
    else ex->be->ops->axpy(ex->be, n, 1.f, dy, dx[0]);
}

const tfc_layer_ops tfc_flatten_ops = {
    .type = "Flatten", .schema = flatten_fields, .args_size = 0,
    .min_inputs = 1, .max_inputs = 1, .copies_at_inference = 1,
    .build = flatten_build, .forward = copy_forward, .backward = copy_backward,
    .assigns_grads = 1,
};

const tfc_layer_ops tfc_reshape_ops = {
    .type = "Reshape", .schema = reshape_fields, .args_size = sizeof(reshape_args),
    .min_inputs = 1, .max_inputs = 1, .copies_at_inference = 1,
    .build = reshape_build, .forward = copy_forward, .backward = copy_backward,
    .assigns_grads = 1,
};
