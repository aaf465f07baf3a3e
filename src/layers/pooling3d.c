/* MaxPooling3D, AveragePooling3D, GlobalMaxPooling3D and GlobalAveragePooling3D
 * (keras.layers) over (depth, height, width, channels) volumes.
 *   max:     y = max over the window (padding never wins); dx[argmax] += dy
 *   average: y = mean over the window's real cells (padding not counted, as TensorFlow);
 *            dx[cell] += dy / count
 *   global:  average or max over the whole volume: (D, H, W, C) -> (C), or (1, 1, 1, C) with
 *            keepdims
 * The windowed ones run on the backend's pool3d ops; the global ones on its 2-D pool ops over
 * the volume seen as a (D H) x W image, one window covering it all. */
#include <stdint.h>

#include "layers/layer.h"

/* pool_size and strides: an integer or a list of three, as Keras takes */
typedef struct pool3d_args {
    tfc_int_list pool_size, strides;
    int padding;
} pool3d_args;

/* Keras 3.15: MaxPooling3D's pool_size defaults to 2 (each axis), AveragePooling3D's is
 * required. */
#define POOL3D_FIELDS(size_default)                                                            \
    {{"pool_size", TFC_F_INT_LIST, offsetof(pool3d_args, pool_size), size_default, 1, 4096,   \
      NULL, "window depth, height and width"},                                                 \
     {"strides", TFC_F_INT_LIST, offsetof(pool3d_args, strides), TFC_NO_DEFAULT, 1, 4096,     \
      NULL, "default: pool_size"},                                                             \
     {"padding", TFC_F_ENUM, offsetof(pool3d_args, padding), "valid", TFC_UNBOUNDED,           \
      tfc_padding_names, "valid or same"},                                                     \
     TFC_FIXED_FIELD("data_format", "channels_last",                                          \
                     "tfc's volumes are (depth, height, width, channels)"),                    \
     {NULL}}

static const tfc_field max_pool3d_fields[] = POOL3D_FIELDS("2");
static const tfc_field average_pool3d_fields[] = POOL3D_FIELDS(NULL);

typedef struct global3d_args {
    int data_format, keepdims;
} global3d_args;

static const tfc_field global3d_fields[] = {
    TFC_DATA_FORMAT_FIELD(global3d_args, data_format),
    {"keepdims", TFC_F_BOOL, offsetof(global3d_args, keepdims), "false", TFC_UNBOUNDED, NULL,
     "keep the pooled axes as 1: (1, 1, 1, channels)"},
    {NULL}};

extern const tfc_layer_ops tfc_max_pooling3d_ops, tfc_global_max_pooling3d_ops;

static tfc_status need_volume(const tfc_layer *l, tfc_error *err)
{
    const tfc_shape *in = &l->in_shape[0];
    char buf[96];
    if (in->ndim != 4)
        return tfc_layer_error(err, l, "needs an input of shape (depth, height, width, "
                                       "channels), got %s", tfc_shape_str(in, buf, sizeof buf));
    if (in->dim[0] * in->dim[1] * in->dim[2] * in->dim[3] > INT32_MAX)
        return tfc_layer_error(err, l, "input %s is too large", tfc_shape_str(in, buf, sizeof buf));
    return TFC_OK;
}

/* ---- MaxPooling3D, AveragePooling3D --------------------------------------------------- */

/* The pooling of one example; its arguments are checked by build first. */
static tfc_pool3d_desc pool3d_desc(const tfc_layer *l, int n)
{
    const pool3d_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    tfc_pool3d_desc d = {.n = n, .c = (int)in->dim[3], .is_max = l->ops == &tfc_max_pooling3d_ops};
    for (int ax = 0; ax < 3; ax++) {
        const tfc_int_list *k = &a->pool_size, *s = &a->strides;
        d.in[ax] = (int)in->dim[ax];
        d.k[ax] = k->v[k->n == 1 ? 0 : ax];
        d.s[ax] = s->n == 0 ? d.k[ax] : s->v[s->n == 1 ? 0 : ax];
        tfc_conv_axis(d.in[ax], d.k[ax], d.s[ax], 1, a->padding == TFC_PADDING_SAME, &d.out[ax],
                      &d.pad[ax]);
    }
    return d;
}

static tfc_status pool3d_build(tfc_layer *l, tfc_error *err)
{
    const pool3d_args *a = l->args;
    char buf[96];
    int unused[3];
    if (tfc_layer_int3(l, "pool_size", &a->pool_size, 2, unused, err) ||
        tfc_layer_int3(l, "strides", &a->strides, 0, unused, err) || need_volume(l, err))
        return TFC_ERR_CONFIG;
    tfc_pool3d_desc d = pool3d_desc(l, 1);
    if (d.out[0] < 1 || d.out[1] < 1 || d.out[2] < 1)
        return tfc_layer_error(err, l, "input %s is smaller than the %dx%dx%d window with "
                               "valid padding", tfc_shape_str(&l->in_shape[0], buf, sizeof buf),
                               d.k[0], d.k[1], d.k[2]);
    l->out_shape = tfc_shape_make(4, (int64_t[]){d.out[0], d.out[1], d.out[2], d.c});
    /* Max pooling keeps the winners' indices (int32, stored in the float slot). */
    l->saved_floats = d.is_max ? tfc_shape_numel(&l->out_shape) : 0;
    return TFC_OK;
}

static const char *const *pool3d_needs(const tfc_layer *l)
{
    (void)l;
    static const char *const needs[] = {"pool3d_forward", "pool3d_backward", NULL};
    return needs;
}

static void pool3d_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    tfc_pool3d_desc d = pool3d_desc(l, ex->batch);
    /* the winners are kept for backward only */
    ex->be->ops->pool3d_forward(ex->be, &d, x[0], y,
                                d.is_max && ex->training ? (int32_t *)l->saved : NULL);
}

static void pool3d_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                            const float *dy, float *const *dx)
{
    (void)x, (void)y;
    tfc_pool3d_desc d = pool3d_desc(l, ex->batch);
    if (dx[0])
        ex->be->ops->pool3d_backward(ex->be, &d, dy, d.is_max ? (const int32_t *)l->saved : NULL,
                                     dx[0], ex->fresh & 1);
}

const tfc_layer_ops tfc_max_pooling3d_ops = {
    .type = "MaxPooling3D", .schema = max_pool3d_fields, .args_size = sizeof(pool3d_args),
    .min_inputs = 1, .max_inputs = 1, .needs = pool3d_needs,
    .build = pool3d_build, .forward = pool3d_forward, .backward = pool3d_backward,
    .assigns_grads = 1,
};

const tfc_layer_ops tfc_average_pooling3d_ops = {
    .type = "AveragePooling3D", .schema = average_pool3d_fields,
    .args_size = sizeof(pool3d_args), .min_inputs = 1, .max_inputs = 1, .needs = pool3d_needs,
    .build = pool3d_build, .forward = pool3d_forward, .backward = pool3d_backward,
    .assigns_grads = 1,
};

/* ---- GlobalMaxPooling3D, GlobalAveragePooling3D ------------------------------------------ */

/* The volume as a (D H) x W image under one window (the 2-D pool ops' global pooling). */
static tfc_pool_desc global3d_desc(const tfc_layer *l, int n)
{
    const tfc_shape *in = &l->in_shape[0];
    tfc_pool_desc d = {.n = n, .h = (int)(in->dim[0] * in->dim[1]), .w = (int)in->dim[2],
                       .c = (int)in->dim[3], .oh = 1, .ow = 1,
                       .is_max = l->ops == &tfc_global_max_pooling3d_ops};
    d.kh = d.sh = d.h;
    d.kw = d.sw = d.w;
    return d;
}

static tfc_status global3d_build(tfc_layer *l, tfc_error *err)
{
    if (need_volume(l, err)) return TFC_ERR_CONFIG;
    const int64_t c = l->in_shape[0].dim[3];
    if (((const global3d_args *)l->args)->keepdims)
        l->out_shape = tfc_shape_make(4, (int64_t[]){1, 1, 1, c});
    else
        l->out_shape = tfc_shape_make(1, (int64_t[]){c});
    l->saved_floats = l->ops == &tfc_global_max_pooling3d_ops ? c : 0; /* the winners */
    return TFC_OK;
}

static void global3d_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    tfc_pool_desc d = global3d_desc(l, ex->batch);
    ex->be->ops->pool_forward(ex->be, &d, x[0], y,
                              d.is_max && ex->training ? (int32_t *)l->saved : NULL);
}

static void global3d_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                              const float *dy, float *const *dx)
{
    (void)x, (void)y;
    tfc_pool_desc d = global3d_desc(l, ex->batch);
    if (dx[0])
        ex->be->ops->pool_backward(ex->be, &d, dy, d.is_max ? (const int32_t *)l->saved : NULL,
                                   dx[0], ex->fresh & 1, NULL);
}

/* On ops every backend has; cpu_first until they have run under `make test-gpu`. */
const tfc_layer_ops tfc_global_max_pooling3d_ops = {
    .type = "GlobalMaxPooling3D", .schema = global3d_fields,
    .args_size = sizeof(global3d_args), .min_inputs = 1, .max_inputs = 1, .cpu_first = 1,
    .build = global3d_build, .forward = global3d_forward, .backward = global3d_backward,
    .assigns_grads = 1,
};

const tfc_layer_ops tfc_global_average_pooling3d_ops = {
    .type = "GlobalAveragePooling3D", .schema = global3d_fields,
    .args_size = sizeof(global3d_args), .min_inputs = 1, .max_inputs = 1, .cpu_first = 1,
    .build = global3d_build, .forward = global3d_forward, .backward = global3d_backward,
    .assigns_grads = 1,
};
