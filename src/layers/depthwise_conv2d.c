/* DepthwiseConv2D and DepthwiseConv1D (keras.layers): each input channel convolved with its
 * own depth_multiplier filters, TensorFlow's valid/same padding, strides and dilation (both at
 * once, as Keras's JAX backend allows). Output channel k = c_in m + j reads channel c_in:
 *   y[n, i, j, k] = sum_{u, v} x[n, i sh + u dh - pt, j sw + v dw - pl, k / m]
 *                             K[u, v, k / m, k % m] + b[k]          K [kh, kw, c, m], b [c m]
 *   backward: dK += x (*) dy per channel, db += sum dy, dx += dy (*)^T K (the backend's
 *   depthwise ops; all accumulate)
 * DepthwiseConv1D is the same over (steps, c) as a 1 x steps image: its kernel [k, c, m] is
 * [1, k, c, m] in the same memory. */
#include "layers/layer.h"

/* The 1-D layer's kernel_size, strides and dilation_rate are lists of one (as Keras takes
 * them), which its build writes into the pairs as {1, v}: from there on both run as one. */
typedef struct depthwise_args {
    int kernel_size[2], strides[2], padding, depth_multiplier, data_format, dilation_rate[2];
    int activation, use_bias;
    const tfc_node *depthwise_initializer, *bias_initializer;
    tfc_int_list kernel_size_1d, strides_1d, dilation_rate_1d;
} depthwise_args;

/* Keras 3.15's arguments, kernel_size (help `kh`), strides and dilation_rate of field type
 * `kind` at members `k`, `s`, `d`. */
#define DEPTHWISE_FIELDS(kind, k, kh, s, d)                                                      \
    {{"kernel_size", kind, offsetof(depthwise_args, k), NULL, 1, 4096, NULL, kh},                \
     {"strides", kind, offsetof(depthwise_args, s), "1", 1, 4096, NULL, "stride"},               \
     {"padding", TFC_F_ENUM, offsetof(depthwise_args, padding), "valid", TFC_UNBOUNDED,          \
      tfc_padding_names, "valid or same"},                                                       \
     {"depth_multiplier", TFC_F_INT, offsetof(depthwise_args, depth_multiplier), "1", 1, 4096,   \
      NULL, "filters per input channel"},                                                        \
     TFC_DATA_FORMAT_FIELD(depthwise_args, data_format),                                         \
     {"dilation_rate", kind, offsetof(depthwise_args, d), "1", 1, 4096, NULL, "dilation"},       \
     TFC_ACTIVATION_FIELD(depthwise_args, activation),                                           \
     {"use_bias", TFC_F_BOOL, offsetof(depthwise_args, use_bias), "true", TFC_UNBOUNDED, NULL,   \
      "add a bias per output channel"},                                                          \
     {"depthwise_initializer", TFC_F_NODE, offsetof(depthwise_args, depthwise_initializer),      \
      TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL, "default glorot_uniform"},                            \
     {"bias_initializer", TFC_F_NODE, offsetof(depthwise_args, bias_initializer),                \
      TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL, "default zeros"},                                     \
     TFC_REGULARIZER_FIELD("depthwise_regularizer"), TFC_REGULARIZER_FIELD("bias_regularizer"),  \
     TFC_ACTIVITY_REGULARIZER_FIELD, TFC_CONSTRAINT_FIELD("depthwise_constraint"),               \
     TFC_CONSTRAINT_FIELD("bias_constraint"),                                                    \
     {NULL}}

static const tfc_field depthwise_fields[] =
    DEPTHWISE_FIELDS(TFC_F_INT_PAIR, kernel_size, "kernel height and width", strides,
                     dilation_rate);
static const tfc_field depthwise1d_fields[] =
    DEPTHWISE_FIELDS(TFC_F_INT_LIST, kernel_size_1d, "window length", strides_1d,
                     dilation_rate_1d);

extern const tfc_layer_ops tfc_depthwise_conv1d_ops;

tfc_conv_desc tfc_layer_depthwise_desc(const tfc_shape *in, const int k[2], const int s[2],
                                       const int d[2], int same, int m, int n)
{
    const int r = in->ndim == 2; /* a sequence: a 1 x steps image */
    tfc_conv_desc c = {.n = n, .h = r ? 1 : (int)in->dim[0], .w = (int)in->dim[1 - r],
                       .c = (int)in->dim[2 - r], .kh = k[0], .kw = k[1],
                       .f = (int)in->dim[2 - r] * m, .sh = s[0], .sw = s[1], .dh = d[0],
                       .dw = d[1]};
    tfc_conv_axis(c.h, c.kh, c.sh, c.dh, same, &c.oh, &c.pad_top);
    tfc_conv_axis(c.w, c.kw, c.sw, c.dw, same, &c.ow, &c.pad_left);
    return c;
}

const char *const tfc_layer_depthwise_ops[] = {"depthwise_workspace", "depthwise_forward",
                                               "depthwise_backward_data",
                                               "depthwise_backward_filter", NULL};

static tfc_conv_desc depthwise_desc(const tfc_layer *l, int n)
{
    const depthwise_args *a = l->args;
    return tfc_layer_depthwise_desc(&l->in_shape[0], a->kernel_size, a->strides,
                                    a->dilation_rate, a->padding == TFC_PADDING_SAME,
                                    a->depth_multiplier, n);
}

static tfc_status depthwise_build(tfc_layer *l, tfc_error *err)
{
    depthwise_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    const int r = l->ops == &tfc_depthwise_conv1d_ops; /* the axes the 1-D layer lacks */
    char buf[96];
    if (r ? tfc_layer_window1d(l, &a->kernel_size_1d, &a->strides_1d, &a->dilation_rate_1d,
                               a->kernel_size, a->strides, a->dilation_rate, err)
          : tfc_layer_need_image(l, err))
        return TFC_ERR_CONFIG;
    if (in->dim[in->ndim - 1] * a->depth_multiplier > 1 << 24)
        return tfc_layer_error(err, l, "%lld channels times depth_multiplier %d is too many",
                               (long long)in->dim[in->ndim - 1], a->depth_multiplier);
    tfc_conv_desc d = depthwise_desc(l, 1);
    if (d.oh < 1 || d.ow < 1)
        return tfc_layer_error(err, l,
                               "input %s is smaller than the %dx%d kernel (dilation %dx%d) with "
                               "valid padding",
                               tfc_shape_str(in, buf, sizeof buf), d.kh, d.kw, d.dh, d.dw);
    l->out_shape = tfc_shape_make(3 - r, (int64_t[]){d.oh, d.ow, d.f} + r);
    l->act = (tfc_act)a->activation;
    tfc_init ki, bi;
    if (tfc_layer_init_arg(l, a->depthwise_initializer, "depthwise_initializer",
                           TFC_INIT_GLOROT_UNIFORM, &ki, err) ||
        tfc_layer_init_arg(l, a->bias_initializer, "bias_initializer", TFC_INIT_ZEROS, &bi, err))
        return TFC_ERR_CONFIG;
    tfc_layer_add_param(l, "kernel", 4 - r, (int64_t[]){d.kh, d.kw, d.c, a->depth_multiplier} + r,
                        1, ki)->regularizer = "depthwise_regularizer"; /* Keras's name for it */
    if (a->use_bias) tfc_layer_add_param(l, "bias", 1, (int64_t[]){d.f}, 1, bi);
    return TFC_OK;
}

static void depthwise_plan(tfc_layer *l, tfc_backend *be)
{
    tfc_conv_desc d = depthwise_desc(l, l->max_batch);
    l->workspace = be->ops->depthwise_workspace(be, &d);
}

/* y = act(bn(depthwise(x) + b) + residual) in the backend's one op (its epilogue), then
 * pooled = pool(y) on its own (forward_fused's contract). */
static void depthwise_forward_fused(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y,
                                    const tfc_bn_params *bn, const float *residual, tfc_act act,
                                    const tfc_pool_desc *pool, float *pooled)
{
    const depthwise_args *a = l->args;
    tfc_conv_desc d = depthwise_desc(l, ex->batch);
    ex->be->ops->depthwise_forward(ex->be, &d, x[0], l->params[0].data,
                                   a->use_bias ? l->params[1].data : NULL, bn, residual, act, y,
                                   ex->ws);
    if (pool) ex->be->ops->pool_forward(ex->be, pool, y, pooled, NULL);
}

static void depthwise_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    depthwise_forward_fused(l, ex, x, y, NULL, NULL, TFC_ACT_LINEAR, NULL, NULL);
}

static void depthwise_forward_act(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    depthwise_forward_fused(l, ex, x, y, NULL, NULL, l->act, NULL, NULL);
}

static void depthwise_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                               const float *dy, float *const *dx)
{
    const depthwise_args *a = l->args;
    tfc_conv_desc d = depthwise_desc(l, ex->batch);
    const tfc_backend_ops *op = ex->be->ops;
    if (a->use_bias) op->bias_grad(ex->be, (int64_t)d.n * d.oh * d.ow, d.f, dy, l->params[1].grad);
    op->depthwise_backward_filter(ex->be, &d, x[0], dy, l->params[0].grad, ex->ws);
    if (dx[0]) op->depthwise_backward_data(ex->be, &d, dy, l->params[0].data, dx[0]);
}

static const char *const *depthwise_needs(const tfc_layer *l)
{
    return tfc_layer_depthwise_ops;
}

const tfc_layer_ops tfc_depthwise_conv2d_ops = {
    .type = "DepthwiseConv2D", .schema = depthwise_fields, .args_size = sizeof(depthwise_args),
    .min_inputs = 1, .max_inputs = 1,
    .build = depthwise_build, .plan = depthwise_plan, .forward = depthwise_forward,
    .forward_act = depthwise_forward_act, .forward_fused = depthwise_forward_fused,
    .backward = depthwise_backward, .needs = depthwise_needs,
};

const tfc_layer_ops tfc_depthwise_conv1d_ops = {
    .type = "DepthwiseConv1D", .schema = depthwise1d_fields, .args_size = sizeof(depthwise_args),
    .min_inputs = 1, .max_inputs = 1, .cpu_first = 1,
    .build = depthwise_build, .plan = depthwise_plan, .forward = depthwise_forward,
    .forward_act = depthwise_forward_act, .forward_fused = depthwise_forward_fused,
    .backward = depthwise_backward, .needs = depthwise_needs,
};
