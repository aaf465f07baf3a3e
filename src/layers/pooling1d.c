/* MaxPooling1D, AveragePooling1D, GlobalMaxPooling1D and GlobalAveragePooling1D
 * (keras.layers) over (steps, channels) sequences, as the backend's 2-D pooling of a
 * 1 x steps image (exact: pool_desc's pad_left and ow carry TensorFlow's same padding).
 *   max:     y[t, c] = max over the window (padding never wins); dx[argmax] += dy
 *   average: y[t, c] = mean over the window's real steps (padding not counted)
 *   global:  the max or mean over all steps: (T, C) -> (C), or (1, C) with keepdims
 * Under a sequence mask (Embedding's mask_zero), GlobalAveragePooling1D averages the
 * unmasked steps only, y[c] = sum_t m[t] x[t, c] / sum_t m[t] (masked_mean ops), as Keras;
 * the other three ignore the mask, as Keras 3 does (it drops it with a warning). None of
 * them passes the mask on. */
#include "layers/layer.h"

/* pool_size and strides: an integer or a list of one, as Keras takes them; strides empty
 * (absent or null): pool_size */
typedef struct pool1d_args {
    tfc_int_list pool_size, strides;
    int padding, data_format;
} pool1d_args;

/* Keras 3.15: MaxPooling1D's pool_size defaults to 2, AveragePooling1D's is required. */
#define POOL1D_FIELDS(size_default)                                                              \
    {{"pool_size", TFC_F_INT_LIST, offsetof(pool1d_args, pool_size), size_default, 1, 4096,     \
      NULL, "window length"},                                                                    \
     {"strides", TFC_F_INT_LIST, offsetof(pool1d_args, strides), TFC_NO_DEFAULT, 1, 4096, NULL,  \
      "default: pool_size"},                                                                     \
     {"padding", TFC_F_ENUM, offsetof(pool1d_args, padding), "valid", TFC_UNBOUNDED,             \
      tfc_padding_names, "valid or same"},                                                       \
     {"data_format", TFC_F_ENUM, offsetof(pool1d_args, data_format), "channels_last",            \
      TFC_UNBOUNDED, tfc_data_format_names, "channels_last only"},                               \
     {NULL}}

static const tfc_field max_pool1d_fields[] = POOL1D_FIELDS("2");
static const tfc_field average_pool1d_fields[] = POOL1D_FIELDS(NULL);

typedef struct global1d_args {
    int data_format, keepdims;
} global1d_args;

static const tfc_field global1d_fields[] = {
    {"data_format", TFC_F_ENUM, offsetof(global1d_args, data_format), "channels_last",
     TFC_UNBOUNDED, tfc_data_format_names, "channels_last only"},
    {"keepdims", TFC_F_BOOL, offsetof(global1d_args, keepdims), "false", TFC_UNBOUNDED, NULL,
     "output (1, channels) instead of (channels)"},
    {NULL}};

extern const tfc_layer_ops tfc_max_pooling1d_ops, tfc_global_max_pooling1d_ops,
    tfc_global_average_pooling1d_ops;

static int is_global(const tfc_layer *l)
{
    return l->ops == &tfc_global_max_pooling1d_ops || l->ops == &tfc_global_average_pooling1d_ops;
}

/* The masked mean replaces the pooling: GlobalAveragePooling1D under a mask. */
static int masked_mean(const tfc_layer *l)
{
    return l->ops == &tfc_global_average_pooling1d_ops && l->mask_in;
}

static tfc_pool_desc pool1d_desc(const tfc_layer *l, int n)
{
    const tfc_shape *in = &l->in_shape[0];
    tfc_pool_desc d = {.n = n, .h = 1, .w = (int)in->dim[0], .c = (int)in->dim[1], .kh = 1,
                       .sh = 1, .oh = 1,
                       .is_max = l->ops == &tfc_max_pooling1d_ops ||
                                 l->ops == &tfc_global_max_pooling1d_ops};
    if (is_global(l)) {
        d.kw = d.sw = d.w;
        d.ow = 1;
        return d;
    }
    const pool1d_args *a = l->args;
    d.kw = a->pool_size.v[0];
    d.sw = a->strides.n ? a->strides.v[0] : d.kw;
    tfc_conv_axis(d.w, d.kw, d.sw, 1, a->padding == TFC_PADDING_SAME, &d.ow, &d.pad_left);
    return d;
}

static tfc_status pool1d_build(tfc_layer *l, tfc_error *err)
{
    const tfc_shape *in = &l->in_shape[0];
    char buf[96];
    const pool1d_args *a = is_global(l) ? NULL : l->args;
    if (a && (tfc_layer_one_int(l, "pool_size", &a->pool_size, err) ||
              (a->strides.n && tfc_layer_one_int(l, "strides", &a->strides, err))))
        return TFC_ERR_CONFIG;
    if (tfc_layer_need_rank(l, 2, "an input of shape (steps, channels)", err))
        return TFC_ERR_CONFIG;
    tfc_pool_desc d = pool1d_desc(l, 1);
    if (d.ow < 1)
        return tfc_layer_error(err, l, "input %s is shorter than the window (%d) with valid "
                               "padding", tfc_shape_str(in, buf, sizeof buf), d.kw);
    if (!is_global(l))
        l->out_shape = tfc_shape_make(2, (int64_t[]){d.ow, d.c});
    else if (((const global1d_args *)l->args)->keepdims)
        l->out_shape = tfc_shape_make(2, (int64_t[]){1, d.c});
    else
        l->out_shape = tfc_shape_make(1, (int64_t[]){d.c});
    /* Max pooling keeps the winners' indices (int32, stored in the float slot). */
    l->saved_floats = d.is_max ? (int64_t)d.ow * d.c : 0;
    return TFC_OK;
}

static const char *const *pool1d_needs(const tfc_layer *l)
{
    static const char *const masked[] = {"masked_mean_forward", "masked_mean_backward", NULL};
    return masked_mean(l) ? masked : NULL;
}

static void pool1d_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    tfc_pool_desc d = pool1d_desc(l, ex->batch);
    if (masked_mean(l)) {
        ex->be->ops->masked_mean_forward(ex->be, d.n, d.w, d.c, x[0], l->mask, y);
        return;
    }
    /* the winners are kept for backward only */
    ex->be->ops->pool_forward(ex->be, &d, x[0], y,
                              d.is_max && ex->training ? (int32_t *)l->saved : NULL);
}

static void pool1d_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                            const float *dy, float *const *dx)
{
    tfc_pool_desc d = pool1d_desc(l, ex->batch);
    if (!dx[0]) return;
    if (masked_mean(l))
        ex->be->ops->masked_mean_backward(ex->be, d.n, d.w, d.c, dy, l->mask, dx[0],
                                          ex->fresh & 1);
    else
        ex->be->ops->pool_backward(ex->be, &d, dy, d.is_max ? (const int32_t *)l->saved : NULL,
                                   dx[0], ex->fresh & 1, ex->relu_x);
}

#define POOL1D_OPS(name, type_name, fields, args)                                           \
    const tfc_layer_ops name = {                                                             \
        .type = type_name, .schema = fields, .args_size = sizeof(args),                      \
        .min_inputs = 1, .max_inputs = 1, .needs = pool1d_needs,                             \
        .build = pool1d_build, .forward = pool1d_forward, .backward = pool1d_backward,       \
        .assigns_grads = 1, .pool_params = pool1d_desc,                                      \
    }

POOL1D_OPS(tfc_max_pooling1d_ops, "MaxPooling1D", max_pool1d_fields, pool1d_args);
POOL1D_OPS(tfc_average_pooling1d_ops, "AveragePooling1D", average_pool1d_fields,
           pool1d_args);
POOL1D_OPS(tfc_global_max_pooling1d_ops, "GlobalMaxPooling1D", global1d_fields, global1d_args);
POOL1D_OPS(tfc_global_average_pooling1d_ops, "GlobalAveragePooling1D", global1d_fields,
           global1d_args);
