/* CustomScaleLayer (keras.applications.inception_resnet_v2.CustomScaleLayer(scale)),
 * Inception-ResNet's residual join: the first input plus the second times a constant,
 *   y = x_1 + x_2 scale,   Keras's `inputs[0] + inputs[1] * self.scale`,
 * two inputs of equal shapes, no weights. Backward: dx_1 += dy, dx_2 += scale dy. On copy
 * and axpy, CPU-first until `make test-gpu` has run it. Keras's layer does not support
 * masking: the mask stops here, as Keras drops it. */
#include "layers/layer.h"

typedef struct custom_scale_args {
    double scale;
} custom_scale_args;

static const tfc_field custom_scale_fields[] = {
    {"scale", TFC_F_FLOAT, offsetof(custom_scale_args, scale), NULL, -1e30, 1e30, NULL,
     "the second input's factor (Inception-ResNet's 0.17, 0.1 and 0.2)"},
    {NULL}};

static tfc_status custom_scale_build(tfc_layer *l, tfc_error *err)
{
    char b1[96], b2[96];
    for (int i = 0; i < 2; i++)
        if (l->in_dtype[i] != TFC_F32)
            return tfc_layer_error(err, l, "takes float32 inputs, not token ids");
    if (!tfc_shape_equal(&l->in_shape[1], &l->in_shape[0]))
        return tfc_layer_error(err, l, "inputs must have equal shapes: input 0 is %s, input 1 "
                               "is %s", tfc_shape_str(&l->in_shape[0], b1, sizeof b1),
                               tfc_shape_str(&l->in_shape[1], b2, sizeof b2));
    l->out_shape = l->in_shape[0];
    return TFC_OK;
}

static void custom_scale_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const custom_scale_args *a = l->args;
    const int64_t n = (int64_t)ex->batch * tfc_layer_out_numel(l);
    ex->be->ops->copy(ex->be, y, x[0], (size_t)n * sizeof(float));
    ex->be->ops->axpy(ex->be, n, (float)a->scale, x[1], y);
}

static void custom_scale_backward(tfc_layer *l, tfc_exec *ex, const void *const *x,
                                  const float *y, const float *dy, float *const *dx)
{
    (void)x, (void)y;
    const custom_scale_args *a = l->args;
    const int64_t n = (int64_t)ex->batch * tfc_layer_out_numel(l);
    if (dx[0]) ex->be->ops->axpy(ex->be, n, 1.f, dy, dx[0]);
    if (dx[1]) ex->be->ops->axpy(ex->be, n, (float)a->scale, dy, dx[1]);
}

const tfc_layer_ops tfc_custom_scale_ops = {
    .type = "CustomScaleLayer", .schema = custom_scale_fields,
    .args_size = sizeof(custom_scale_args), .min_inputs = 2, .max_inputs = 2, .cpu_first = 1,
    .build = custom_scale_build, .forward = custom_scale_forward,
    .backward = custom_scale_backward,
};
