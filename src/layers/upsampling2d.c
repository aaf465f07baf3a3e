/* UpSampling2D (keras.layers.UpSampling2D): each image enlarged by integer factors.
 *   nearest:  y[i, j] = x[i / sh, j / sw]   (Keras's ops.repeat along both axes)
 *   bilinear: y[i, j] interpolates x at ((i + 1/2) / sh - 1/2, (j + 1/2) / sw - 1/2), clamped
 *             to the image (Keras's ops.image.resize: half-pixel centres, no antialiasing
 *             when enlarging)
 *   backward: dx += what each input cell contributed to (the backend's upsample ops) */
#include "layers/layer.h"

typedef struct upsampling_args {
    int size[2], data_format, interpolation;
} upsampling_args;

static const char *const interpolation_names[] = {"nearest", "bilinear", NULL};

static const tfc_field upsampling_fields[] = {
    {"size", TFC_F_INT_PAIR, offsetof(upsampling_args, size), "2", 1, 4096, NULL,
     "factors for rows and columns"},
    TFC_DATA_FORMAT_FIELD(upsampling_args, data_format),
    {"interpolation", TFC_F_ENUM, offsetof(upsampling_args, interpolation), "nearest",
     TFC_UNBOUNDED, interpolation_names, "nearest or bilinear"},
    {NULL}};

static tfc_resize_desc upsampling_desc(const tfc_layer *l, int n)
{
    const upsampling_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    return (tfc_resize_desc){.n = n, .h = (int)in->dim[0], .w = (int)in->dim[1],
                             .c = (int)in->dim[2], .sh = a->size[0], .sw = a->size[1],
                             .bilinear = a->interpolation == 1};
}

static tfc_status upsampling_build(tfc_layer *l, tfc_error *err)
{
    const upsampling_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    if (tfc_layer_need_image(l, err)) return TFC_ERR_CONFIG;
    l->out_shape = tfc_shape_make(3, (int64_t[]){in->dim[0] * a->size[0],
                                                 in->dim[1] * a->size[1], in->dim[2]});
    return TFC_OK;
}

static void upsampling_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    tfc_resize_desc d = upsampling_desc(l, ex->batch);
    ex->be->ops->upsample_forward(ex->be, &d, x[0], y);
}

static void upsampling_backward(tfc_layer *l, tfc_exec *ex, const void *const *x,
                                const float *y, const float *dy, float *const *dx)
{
    tfc_resize_desc d = upsampling_desc(l, ex->batch);
    if (dx[0]) ex->be->ops->upsample_backward(ex->be, &d, dy, dx[0]);
}

static const char *const *upsampling_needs(const tfc_layer *l)
{
    static const char *const ops[] = {"upsample_forward", "upsample_backward", NULL};
    return ops;
}

const tfc_layer_ops tfc_up_sampling2d_ops = {
    .type = "UpSampling2D", .schema = upsampling_fields, .args_size = sizeof(upsampling_args),
    .min_inputs = 1, .max_inputs = 1,
    .build = upsampling_build, .forward = upsampling_forward, .backward = upsampling_backward,
    .needs = upsampling_needs,
};
