/* UpSampling1D (keras.layers.UpSampling1D): each step of a sequence (steps, channels)
 * repeated `size` times (Keras's ops.repeat), as the nearest-neighbour upsample op of an image
 * one row high; backward, that op's gradient. No weights. Keras's layer does not support
 * masking: the mask stops here. Built on ops every backend has, it lands CPU-first
 * (cpu_first) until make test-gpu has run it. */
#include "layers/layer.h"


typedef struct upsampling1d_args {
    int size;
} upsampling1d_args;

static const tfc_field upsampling1d_fields[] = {
    {"size", TFC_F_INT, offsetof(upsampling1d_args, size), "2", 1, 4096, NULL,
     "how many times each step is repeated"},
    {NULL}};

static tfc_status upsampling1d_build(tfc_layer *l, tfc_error *err)
{
    const upsampling1d_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    char buf[96];
    if (l->in_dtype[0] != TFC_F32 || in->ndim != 2)
        return tfc_layer_error(err, l, "needs a float sequence of shape (steps, channels), got "
                                       "%s%s", tfc_shape_str(in, buf, sizeof buf),
                               l->in_dtype[0] != TFC_F32 ? " of token ids" : "");
    l->out_shape = tfc_shape_make(2, (int64_t[]){in->dim[0] * a->size, in->dim[1]});
    return TFC_OK;
}

/* a sequence as an image one row high, upsampled along its width */
static tfc_resize_desc upsampling1d_desc(const tfc_layer *l, int n)
{
    const upsampling1d_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    return (tfc_resize_desc){.n = n, .h = 1, .w = (int)in->dim[0], .c = (int)in->dim[1],
                             .sh = 1, .sw = a->size, .bilinear = 0};
}

static void upsampling1d_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    tfc_resize_desc d = upsampling1d_desc(l, ex->batch);
    ex->be->ops->upsample_forward(ex->be, &d, x[0], y);
}

static void upsampling1d_backward(tfc_layer *l, tfc_exec *ex, const void *const *x,
                                  const float *y, const float *dy, float *const *dx)
{
    tfc_resize_desc d = upsampling1d_desc(l, ex->batch);
    if (dx[0]) ex->be->ops->upsample_backward(ex->be, &d, dy, dx[0]);
}

const tfc_layer_ops tfc_up_sampling1d_ops = {
    .type = "UpSampling1D", .schema = upsampling1d_fields,
    .args_size = sizeof(upsampling1d_args), .min_inputs = 1, .max_inputs = 1, .cpu_first = 1,
    .build = upsampling1d_build, .forward = upsampling1d_forward,
    .backward = upsampling1d_backward,
};
