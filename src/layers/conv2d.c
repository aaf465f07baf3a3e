/* Conv2D (keras.layers.Conv2D): 2-D cross-correlation over NHWC images with TensorFlow's
 * valid/same padding (same pads the extra row and column after the image), strides,
 * dilation and groups.
 *   y[n, i, j, f] = sum_{u, v, c} x[n, i*sh + u*dh - pt, j*sw + v*dw - pl, c] K[u, v, c, f] + b[f]
 *   backward: dK += x (*) dy, db += sum dy, dx += dy (*)^T K (the backend's conv ops)
 * With groups g > 1 (Keras's groups) the channels and filters split into g equal runs, filter
 * f reading only the channels of run f / (filters / g): K is [kh, kw, c / g, filters], and the
 * backend's grouped_conv ops run it, the epilogue op by op (tfc_layer_grouped_forward). */
#include "layers/layer.h"

typedef struct conv_args {
    int filters, kernel_size[2], strides[2], padding, dilation_rate[2], groups, activation,
        use_bias;
    const tfc_node *kernel_initializer, *bias_initializer;
} conv_args;

static const tfc_field conv_fields[] = {
    {"filters", TFC_F_INT, offsetof(conv_args, filters), NULL, 1, 1 << 20, NULL,
     "output channels"},
    {"kernel_size", TFC_F_INT_PAIR, offsetof(conv_args, kernel_size), NULL, 1, 4096, NULL,
     "kernel height and width"},
    {"strides", TFC_F_INT_PAIR, offsetof(conv_args, strides), "1", 1, 4096, NULL, "stride"},
    {"padding", TFC_F_ENUM, offsetof(conv_args, padding), "valid", TFC_UNBOUNDED,
     tfc_padding_names, "valid or same"},
    {"dilation_rate", TFC_F_INT_PAIR, offsetof(conv_args, dilation_rate), "1", 1, 4096, NULL,
     "dilation"},
    {"groups", TFC_F_INT, offsetof(conv_args, groups), "1", 1, 1 << 20, NULL,
     "channel groups; channels and filters must divide by it"},
    TFC_ACTIVATION_FIELD(conv_args, activation),
    {"use_bias", TFC_F_BOOL, offsetof(conv_args, use_bias), "true", TFC_UNBOUNDED, NULL,
     "add a bias per filter"},
    {"kernel_initializer", TFC_F_NODE, offsetof(conv_args, kernel_initializer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "default glorot_uniform"},
    {"bias_initializer", TFC_F_NODE, offsetof(conv_args, bias_initializer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "default zeros"},
    TFC_IMAGE_DATA_FORMAT_FIELD,
    TFC_KERNEL_BIAS_KERAS_FIELDS,
    {NULL}};

static tfc_conv_desc conv_desc(const tfc_layer *l, int n)
{
    const conv_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    tfc_conv_desc d = {.n = n, .h = (int)in->dim[0], .w = (int)in->dim[1], .c = (int)in->dim[2],
                       .kh = a->kernel_size[0], .kw = a->kernel_size[1], .f = a->filters,
                       .sh = a->strides[0], .sw = a->strides[1],
                       .dh = a->dilation_rate[0], .dw = a->dilation_rate[1]};
    tfc_conv_axis(d.h, d.kh, d.sh, d.dh, a->padding == TFC_PADDING_SAME, &d.oh, &d.pad_top);
    tfc_conv_axis(d.w, d.kw, d.sw, d.dw, a->padding == TFC_PADDING_SAME, &d.ow, &d.pad_left);
    return d;
}

static tfc_status conv_build(tfc_layer *l, tfc_error *err)
{
    const conv_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    char buf[96];
    if (tfc_layer_need_image(l, err)) return TFC_ERR_CONFIG;
    if ((a->strides[0] > 1 || a->strides[1] > 1) &&
        (a->dilation_rate[0] > 1 || a->dilation_rate[1] > 1))
        return tfc_layer_error(err, l, "strides > 1 with dilation_rate > 1 is not supported "
                                       "(as in Keras)");
    if (tfc_layer_check_groups(l, a->groups, in->dim[2], a->filters, err)) return TFC_ERR_CONFIG;
    tfc_conv_desc d = conv_desc(l, 1);
    if (d.oh < 1 || d.ow < 1)
        return tfc_layer_error(err, l,
                               "input %s is smaller than the %dx%d kernel (dilation %dx%d) with "
                               "valid padding",
                               tfc_shape_str(in, buf, sizeof buf), d.kh, d.kw, d.dh, d.dw);
    l->out_shape = tfc_shape_make(3, (int64_t[]){d.oh, d.ow, d.f});
    l->act = (tfc_act)a->activation;
    tfc_init ki, bi;
    if (tfc_layer_init_arg(l, a->kernel_initializer, "kernel_initializer",
                           TFC_INIT_GLOROT_UNIFORM, &ki, err) ||
        tfc_layer_init_arg(l, a->bias_initializer, "bias_initializer", TFC_INIT_ZEROS, &bi, err))
        return TFC_ERR_CONFIG;
    tfc_layer_add_param(l, "kernel", 4, (int64_t[]){d.kh, d.kw, d.c / a->groups, d.f}, 1, ki);
    if (a->use_bias) tfc_layer_add_param(l, "bias", 1, (int64_t[]){d.f}, 1, bi);
    return TFC_OK;
}

static const char *const *conv_needs(const tfc_layer *l)
{
    return ((const conv_args *)l->args)->groups > 1 ? tfc_layer_grouped_ops : NULL;
}

static void conv_plan(tfc_layer *l, tfc_backend *be)
{
    tfc_conv_desc d = conv_desc(l, l->max_batch);
    const int grouped = ((const conv_args *)l->args)->groups > 1; /* the ops take none */
    l->workspace = grouped ? 0 : be->ops->conv_workspace(be, &d);
}

static void conv_forward_fused(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y,
                               const tfc_bn_params *bn, const float *residual, tfc_act act,
                               const tfc_pool_desc *pool, float *pooled)
{
    const conv_args *a = l->args;
    tfc_conv_desc d = conv_desc(l, ex->batch);
    const float *bias = a->use_bias ? l->params[1].data : NULL;
    if (a->groups > 1)
        tfc_layer_grouped_forward(ex->be, &d, a->groups, x[0], l->params[0].data, bias, bn,
                                  residual, act, y, pool, pooled);
    else
        ex->be->ops->conv_forward(ex->be, &d, x[0], l->params[0].data, bias, bn, residual, act,
                                  y, pool, pooled, ex->ws);
}

static void conv_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    conv_forward_fused(l, ex, x, y, NULL, NULL, TFC_ACT_LINEAR, NULL, NULL);
}

static void conv_forward_act(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    conv_forward_fused(l, ex, x, y, NULL, NULL, l->act, NULL, NULL);
}

static void conv_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                          const float *dy, float *const *dx)
{
    const conv_args *a = l->args;
    tfc_conv_desc d = conv_desc(l, ex->batch);
    const tfc_backend_ops *op = ex->be->ops;
    if (a->use_bias) op->bias_grad(ex->be, (int64_t)d.n * d.oh * d.ow, d.f, dy, l->params[1].grad);
    if (a->groups > 1) {
        tfc_layer_grouped_backward(ex->be, &d, a->groups, x[0], l->params[0].data, dy,
                                   l->params[0].grad, dx[0], ex->fresh & 1);
        return;
    }
    op->conv_backward_filter(ex->be, &d, x[0], dy, l->params[0].grad, ex->ws);
    if (dx[0])
        op->conv_backward_data(ex->be, &d, dy, l->params[0].data, dx[0], ex->fresh & 1, ex->ws);
}

const tfc_layer_ops tfc_conv2d_ops = {
    .type = "Conv2D", .schema = conv_fields, .args_size = sizeof(conv_args),
    .min_inputs = 1, .max_inputs = 1, .needs = conv_needs,
    .build = conv_build, .plan = conv_plan, .forward = conv_forward, .forward_act = conv_forward_act,
    .forward_fused = conv_forward_fused, .assigns_grads = 1,
    .backward = conv_backward,
};
