/* Rescaling (keras.layers.Rescaling): y = x scale + offset, rounded as Keras rounds it (the
 * product, then the sum), with scale and offset numbers. It is part of the model, so
 * tfc-predict and the predictor apply it too: the usual first layer of an image model fed
 * bytes in [0, 255] (Rescaling(scale: 1/255) or, for [-1, 1], scale: 1/127.5, offset: -1).
 *   backward: dx += scale dy
 * offset is added from a constant [channels] of the layer (tfc_param.constant: in no weights
 * file, as Keras's layer has no variable), so it runs on ops every backend has. */
#include "layers/layer.h"

typedef struct rescaling_args {
    double scale, offset;
} rescaling_args;

static const tfc_field rescaling_fields[] = {
    {"scale", TFC_F_FLOAT, offsetof(rescaling_args, scale), NULL, TFC_UNBOUNDED, NULL,
     "the factor (a number: 0.00392156862745098 is 1/255)"},
    {"offset", TFC_F_FLOAT, offsetof(rescaling_args, offset), "0.0", TFC_UNBOUNDED, NULL,
     "added after the scaling"},
    {NULL}};

static tfc_status rescaling_build(tfc_layer *l, tfc_error *err)
{
    const rescaling_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    if (l->in_dtype[0] != TFC_F32)
        return tfc_layer_error(err, l, "takes float32 input, not token ids");
    if (in->ndim < 1)
        return tfc_layer_error(err, l, "needs an input with at least one axis");
    l->out_shape = *in;
    if (a->offset != 0) {
        tfc_init init = tfc_init_make(TFC_INIT_CONSTANT);
        init.a = (float)a->offset;
        int64_t c = in->dim[in->ndim - 1];
        tfc_param *p = tfc_layer_add_param(l, "offset", 1, &c, 0, init);
        p->constant = 1;
    }
    return TFC_OK;
}

static void rescaling_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const rescaling_args *a = l->args;
    const int64_t n = (int64_t)ex->batch * tfc_layer_out_numel(l);
    const int cols = (int)l->out_shape.dim[l->out_shape.ndim - 1];
    tfc_backend *be = ex->be;
    if (y != x[0]) be->ops->copy(be, y, x[0], (size_t)n * 4);
    be->ops->scale(be, n, (float)a->scale, y);
    if (l->nparams) be->ops->bias_add(be, n / cols, cols, l->params[0].data, y);
}

static void rescaling_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                               const float *dy, float *const *dx)
{
    const rescaling_args *a = l->args;
    if (dx[0])
        ex->be->ops->axpy(ex->be, (int64_t)ex->batch * tfc_layer_out_numel(l), (float)a->scale, dy,
                          dx[0]);
}

const tfc_layer_ops tfc_rescaling_ops = {
    .type = "Rescaling", .schema = rescaling_fields, .args_size = sizeof(rescaling_args),
    .min_inputs = 1, .max_inputs = 1, .keeps_mask = 1, .cpu_first = 1,
    .build = rescaling_build, .forward = rescaling_forward, .backward = rescaling_backward,
};
