/* LayerScale (keras.applications.convnext.LayerScale(init_values, projection_dim), ConvNeXt's,
 * from "Going deeper with Image Transformers"): each channel of the last axis times a learned
 * factor,
 *   y[..., c] = x[..., c] gamma[c],   gamma [projection_dim] starting at init_values,
 * the product Keras's `x * self.gamma` takes. Backward: dx += dy gamma, dgamma[c] += sum of
 * x dy over every other axis and the batch (mul_reduce, in row order). The backend's
 * Multiply ops (mul with a broadcast factor, mul_reduce); CPU-first until `make test-gpu` has
 * run it. The mask passes on (an elementwise layer). */
#include "layers/layer.h"

typedef struct scale_args {
    double init_values;
    int projection_dim;
} scale_args;

static const tfc_field scale_fields[] = {
    {"init_values", TFC_F_FLOAT, offsetof(scale_args, init_values), NULL, -1e30, 1e30, NULL,
     "every factor's initial value (ConvNeXt's 1e-6)"},
    {"projection_dim", TFC_F_INT, offsetof(scale_args, projection_dim), NULL, 1, 1 << 24, NULL,
     "the factors: the input's channels (last axis)"},
    {NULL}};

static tfc_status scale_build(tfc_layer *l, tfc_error *err)
{
    const scale_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    char buf[96];
    if (l->in_dtype[0] != TFC_F32)
        return tfc_layer_error(err, l, "takes float32 input, not token ids");
    if (in->ndim < 1 || in->dim[in->ndim - 1] != a->projection_dim)
        return tfc_layer_error(err, l, "projection_dim %d must be the input's channels, its "
                               "last axis: the input is %s", a->projection_dim,
                               tfc_shape_str(in, buf, sizeof buf));
    l->out_shape = *in;
    tfc_init init = tfc_init_make(TFC_INIT_CONSTANT);
    init.a = a->init_values;
    tfc_layer_add_param(l, "gamma", 1, (int64_t[]){a->projection_dim}, 1, init);
    return TFC_OK;
}

static const char *const *scale_needs(const tfc_layer *l)
{
    (void)l;
    static const char *const ops[] = {"mul", "mul_reduce", NULL};
    return ops;
}

static int64_t rows_of(const tfc_layer *l, int batch)
{
    const scale_args *a = l->args;
    return (int64_t)batch * tfc_layer_out_numel(l) / a->projection_dim;
}

static void scale_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const scale_args *a = l->args;
    ex->be->ops->mul(ex->be, 1, rows_of(l, ex->batch), a->projection_dim, x[0],
                     l->params[0].data, 1, y, 0);
}

static void scale_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                           const float *dy, float *const *dx)
{
    (void)y;
    const scale_args *a = l->args;
    const int64_t rows = rows_of(l, ex->batch);
    tfc_param *g = &l->params[0];
    if (g->grad) ex->be->ops->mul_reduce(ex->be, 1, rows, a->projection_dim, x[0], dy, g->grad);
    if (dx[0])
        ex->be->ops->mul(ex->be, 1, rows, a->projection_dim, dy, g->data, 1, dx[0],
                         !(ex->fresh & 1));
}

const tfc_layer_ops tfc_layer_scale_ops = {
    .type = "LayerScale", .schema = scale_fields, .args_size = sizeof(scale_args),
    .min_inputs = 1, .max_inputs = 1, .keeps_mask = 1, .assigns_grads = 1, .cpu_first = 1,
    .needs = scale_needs, .build = scale_build, .forward = scale_forward,
    .backward = scale_backward,
};
