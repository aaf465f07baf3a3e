/* MaxPooling2D, AveragePooling2D, GlobalAveragePooling2D and GlobalMaxPooling2D
 * (keras.layers) over NHWC.
 *   max:     y = max over the window (padding never wins); dx[argmax] += dy
 *   average: y = mean over the window's real cells (padding not counted, as TensorFlow);
 *            dx[cell] += dy / count
 *   global:  average or max over the whole image: (H, W, C) -> (C), or (1, 1, C) with
 *            keepdims */
#include "layers/layer.h"

typedef struct pool_args {
    int pool_size[2], strides[2], padding;
} pool_args;

/* Keras 3.15: MaxPooling2D's pool_size defaults to 2, AveragePooling2D's is required. */
#define POOL_FIELDS(size_default)                                                                \
    {{"pool_size", TFC_F_INT_PAIR, offsetof(pool_args, pool_size), size_default, 1, 4096, NULL, \
      "window height and width"},                                                                \
     {"strides", TFC_F_INT_PAIR, offsetof(pool_args, strides), TFC_NO_DEFAULT, 1, 4096, NULL,    \
      "default: pool_size"},                                                                     \
     {"padding", TFC_F_ENUM, offsetof(pool_args, padding), "valid", TFC_UNBOUNDED,               \
      tfc_padding_names, "valid or same"},                                                       \
     TFC_IMAGE_DATA_FORMAT_FIELD,                                                                \
     {NULL}}

static const tfc_field max_pool_fields[] = POOL_FIELDS("2");
static const tfc_field average_pool_fields[] = POOL_FIELDS(NULL);

typedef struct global_args {
    int data_format, keepdims;
} global_args;

static const tfc_field global_fields[] = {
    TFC_DATA_FORMAT_FIELD(global_args, data_format),
    {"keepdims", TFC_F_BOOL, offsetof(global_args, keepdims), "false", TFC_UNBOUNDED, NULL,
     "keep the pooled axes as 1: (1, 1, channels)"},
    {NULL}};

extern const tfc_layer_ops tfc_max_pooling2d_ops, tfc_global_average_pooling2d_ops,
    tfc_global_max_pooling2d_ops;

static int is_global(const tfc_layer *l)
{
    return l->ops == &tfc_global_average_pooling2d_ops || l->ops == &tfc_global_max_pooling2d_ops;
}

static tfc_pool_desc pool_desc(const tfc_layer *l, int n)
{
    const tfc_shape *in = &l->in_shape[0];
    tfc_pool_desc d = {.n = n, .h = (int)in->dim[0], .w = (int)in->dim[1], .c = (int)in->dim[2]};
    if (is_global(l)) {
        d.kh = d.sh = d.h;
        d.kw = d.sw = d.w;
        d.oh = d.ow = 1;
        d.is_max = l->ops == &tfc_global_max_pooling2d_ops;
        return d;
    }
    const pool_args *a = l->args;
    d.kh = a->pool_size[0];
    d.kw = a->pool_size[1];
    d.sh = a->strides[0] ? a->strides[0] : d.kh;
    d.sw = a->strides[1] ? a->strides[1] : d.kw;
    d.is_max = l->ops == &tfc_max_pooling2d_ops;
    tfc_conv_axis(d.h, d.kh, d.sh, 1, a->padding == TFC_PADDING_SAME, &d.oh, &d.pad_top);
    tfc_conv_axis(d.w, d.kw, d.sw, 1, a->padding == TFC_PADDING_SAME, &d.ow, &d.pad_left);
    return d;
}

static tfc_status pool_build(tfc_layer *l, tfc_error *err)
{
    const tfc_shape *in = &l->in_shape[0];
    char buf[96];
    if (tfc_layer_need_image(l, err)) return TFC_ERR_CONFIG;
    tfc_pool_desc d = pool_desc(l, 1);
    if (d.oh < 1 || d.ow < 1)
        return tfc_layer_error(err, l, "input %s is smaller than the %dx%d window with valid "
                               "padding", tfc_shape_str(in, buf, sizeof buf), d.kh, d.kw);
    if (is_global(l) && ((const global_args *)l->args)->keepdims)
        l->out_shape = tfc_shape_make(3, (int64_t[]){1, 1, d.c});
    else if (is_global(l))
        l->out_shape = tfc_shape_make(1, (int64_t[]){d.c});
    else
        l->out_shape = tfc_shape_make(3, (int64_t[]){d.oh, d.ow, d.c});
    /* Max pooling keeps the winners' indices (int32, stored in the float slot). */
    l->saved_floats = d.is_max ? (int64_t)d.oh * d.ow * d.c : 0;
    return TFC_OK;
}

static void pool_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    tfc_pool_desc d = pool_desc(l, ex->batch);
    /* the winners are kept for backward only */
    ex->be->ops->pool_forward(ex->be, &d, x[0], y,
                              d.is_max && ex->training ? (int32_t *)l->saved : NULL);
}

static void pool_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                          const float *dy, float *const *dx)
{
    tfc_pool_desc d = pool_desc(l, ex->batch);
    if (dx[0])
        ex->be->ops->pool_backward(ex->be, &d, dy, d.is_max ? (const int32_t *)l->saved : NULL,
                                   dx[0], ex->fresh & 1, ex->relu_x);
}

const tfc_layer_ops tfc_max_pooling2d_ops = {
    .type = "MaxPooling2D", .schema = max_pool_fields, .args_size = sizeof(pool_args),
    .min_inputs = 1, .max_inputs = 1,
    .build = pool_build, .forward = pool_forward, .backward = pool_backward,
    .assigns_grads = 1,
    .pool_params = pool_desc,
};

const tfc_layer_ops tfc_average_pooling2d_ops = {
    .type = "AveragePooling2D", .schema = average_pool_fields, .args_size = sizeof(pool_args),
    .min_inputs = 1, .max_inputs = 1,
    .build = pool_build, .forward = pool_forward, .backward = pool_backward,
    .assigns_grads = 1,
    .pool_params = pool_desc,
};

const tfc_layer_ops tfc_global_average_pooling2d_ops = {
    .type = "GlobalAveragePooling2D", .schema = global_fields, .args_size = sizeof(global_args),
    .min_inputs = 1, .max_inputs = 1,
    .build = pool_build, .forward = pool_forward, .backward = pool_backward,
    .assigns_grads = 1,
    .pool_params = pool_desc,
};

const tfc_layer_ops tfc_global_max_pooling2d_ops = {
    .type = "GlobalMaxPooling2D", .schema = global_fields, .args_size = sizeof(global_args),
    .min_inputs = 1, .max_inputs = 1,
    .build = pool_build, .forward = pool_forward, .backward = pool_backward,
    .assigns_grads = 1,
    .pool_params = pool_desc,
};
