/* Conv1D (keras.layers.Conv1D): 1-D cross-correlation over (steps, channels) sequences with
 * valid, same (TensorFlow's: the extra step after) or causal padding ((k - 1) d zeros before
 * the sequence, none after: output t sees steps <= t s), strides, dilation and groups.
 *   y[n, t, f] = sum_{u, c in group(f)} x[n, t s + u d - p, c] K[u, c - c0(f), f] + b[f]
 *   backward: dK += x (*) dy, db += sum dy, dx += dy (*)^T K
 * A 1-D convolution is the backend's 2-D one over a 1 x steps image, exact for every padding
 * (conv_desc's explicit pad_left, the padding after the sequence implied by ow); groups > 1
 * take the grouped_conv ops, and at stride and dilation 1 the backend's conv1d ops where it
 * has them (the CPU's: no im2col, docs/cpu.md). */
#include "layers/layer.h"

/* `padding:` indices (api/onnx.c reads them too) */
enum { PAD_VALID, PAD_SAME, PAD_CAUSAL };
static const char *const padding_names[] = {"valid", "same", "causal", NULL};

/* kernel_size, strides and dilation_rate: an integer or a list of one, as Keras takes (and
 * writes in its configs: `kernel_size: [3]`) */
typedef struct conv1d_args {
    int filters, padding, data_format, groups, activation, use_bias;
    tfc_int_list kernel_size, strides, dilation_rate;
    const tfc_node *kernel_initializer, *bias_initializer;
} conv1d_args;

static const tfc_field conv1d_fields[] = {
    {"filters", TFC_F_INT, offsetof(conv1d_args, filters), NULL, 1, 1 << 20, NULL,
     "output channels"},
    {"kernel_size", TFC_F_INT_LIST, offsetof(conv1d_args, kernel_size), NULL, 1, 4096, NULL,
     "window length"},
    {"strides", TFC_F_INT_LIST, offsetof(conv1d_args, strides), "1", 1, 4096, NULL, "stride"},
    {"padding", TFC_F_ENUM, offsetof(conv1d_args, padding), "valid", TFC_UNBOUNDED,
     padding_names, "valid, same or causal"},
    {"data_format", TFC_F_ENUM, offsetof(conv1d_args, data_format), "channels_last",
     TFC_UNBOUNDED, tfc_data_format_names, "channels_last only"},
    {"dilation_rate", TFC_F_INT_LIST, offsetof(conv1d_args, dilation_rate), "1", 1, 4096,
     NULL, "dilation"},
    {"groups", TFC_F_INT, offsetof(conv1d_args, groups), "1", 1, 1 << 20, NULL,
     "channel groups; channels and filters must divide by it"},
    TFC_ACTIVATION_FIELD(conv1d_args, activation),
    {"use_bias", TFC_F_BOOL, offsetof(conv1d_args, use_bias), "true", TFC_UNBOUNDED, NULL,
     "add a bias per filter"},
    {"kernel_initializer", TFC_F_NODE, offsetof(conv1d_args, kernel_initializer),
     TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL, "default glorot_uniform"},
    {"bias_initializer", TFC_F_NODE, offsetof(conv1d_args, bias_initializer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "default zeros"},
    TFC_KERNEL_BIAS_KERAS_FIELDS,
    {NULL}};

/* The sequence as a 1 x steps image. */
static tfc_conv_desc conv1d_desc(const tfc_layer *l, int n)
{
    const conv1d_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    tfc_conv_desc d = {.n = n, .h = 1, .w = (int)in->dim[0], .c = (int)in->dim[1], .kh = 1,
                       .kw = a->kernel_size.v[0], .f = a->filters, .sh = 1,
                       .sw = a->strides.v[0], .dh = 1, .dw = a->dilation_rate.v[0], .oh = 1};
    if (a->padding == PAD_CAUSAL) {
        /* Keras pads (k - 1) d steps before, then convolves validly:
         * ow = (w + (k - 1) d - ((k - 1) d + 1)) / s + 1 = ceil(w / s) */
        d.pad_left = (d.kw - 1) * d.dw;
        d.ow = (d.w + d.sw - 1) / d.sw;
    } else {
        tfc_conv_axis(d.w, d.kw, d.sw, d.dw, a->padding == PAD_SAME, &d.ow, &d.pad_left);
    }
    return d;
}

static tfc_status conv1d_build(tfc_layer *l, tfc_error *err)
{
    const conv1d_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    char buf[96];
    if (tfc_layer_one_int(l, "kernel_size", &a->kernel_size, err) ||
        tfc_layer_one_int(l, "strides", &a->strides, err) ||
        tfc_layer_one_int(l, "dilation_rate", &a->dilation_rate, err))
        return TFC_ERR_CONFIG;
    if (tfc_layer_need_rank(l, 2, "an input of shape (steps, channels)", err))
        return TFC_ERR_CONFIG;
    if (a->strides.v[0] > 1 && a->dilation_rate.v[0] > 1)
        return tfc_layer_error(err, l, "strides > 1 is not supported with dilation_rate > 1 "
                                       "(strides %d, dilation_rate %d; as in Keras)",
                               a->strides.v[0], a->dilation_rate.v[0]);
    if (tfc_layer_check_groups(l, a->groups, in->dim[1], a->filters, err)) return TFC_ERR_CONFIG;
    tfc_conv_desc d = conv1d_desc(l, 1);
    if (d.ow < 1)
        return tfc_layer_error(err, l, "input %s is shorter than the kernel (%d, dilation %d) "
                               "with valid padding", tfc_shape_str(in, buf, sizeof buf),
                               d.kw, d.dw);
    l->out_shape = tfc_shape_make(2, (int64_t[]){d.ow, d.f});
    l->act = (tfc_act)a->activation;
    tfc_init ki, bi;
    if (tfc_layer_init_arg(l, a->kernel_initializer, "kernel_initializer",
                           TFC_INIT_GLOROT_UNIFORM, &ki, err) ||
        tfc_layer_init_arg(l, a->bias_initializer, "bias_initializer", TFC_INIT_ZEROS, &bi, err))
        return TFC_ERR_CONFIG;
    /* [k, c / groups, f]: the backend's [kh = 1, kw, c, f] in the same memory */
    tfc_layer_add_param(l, "kernel", 3, (int64_t[]){d.kw, d.c / a->groups, d.f}, 1, ki);
    if (a->use_bias) tfc_layer_add_param(l, "bias", 1, (int64_t[]){d.f}, 1, bi);
    return TFC_OK;
}

static const char *const *conv1d_needs(const tfc_layer *l)
{
    return ((const conv1d_args *)l->args)->groups > 1 ? tfc_layer_grouped_ops : NULL;
}

/* Whether be runs l's convolution through its conv1d ops (ungrouped, stride and dilation 1) */
static int conv1d_direct(const tfc_layer *l, const tfc_backend *be)
{
    const conv1d_args *a = l->args;
    return a->groups == 1 && a->strides.v[0] == 1 && a->dilation_rate.v[0] == 1 &&
           be->ops->conv1d_forward;
}

static void conv1d_plan(tfc_layer *l, tfc_backend *be)
{
    const conv1d_args *a = l->args;
    tfc_conv_desc d = conv1d_desc(l, l->max_batch);
    l->workspace = a->groups > 1 ? 0 : be->ops->conv_workspace(be, &d);
    if (conv1d_direct(l, be)) { /* conv_forward still takes a fused normalisation or pooling */
        const size_t direct = be->ops->conv1d_workspace(be, &d);
        if (direct > l->workspace) l->workspace = direct;
    }
}

/* y = act(bn(conv(x) + b) + residual), then pooled (conv_forward's contract). Groups > 1:
 * the grouped convolution, then the epilogue op by op. */
static void conv1d_forward_fused(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y,
                                 const tfc_bn_params *bn, const float *residual, tfc_act act,
                                 const tfc_pool_desc *pool, float *pooled)
{
    const conv1d_args *a = l->args;
    tfc_conv_desc d = conv1d_desc(l, ex->batch);
    tfc_backend *be = ex->be;
    const float *bias = a->use_bias ? l->params[1].data : NULL;
    if (conv1d_direct(l, be) && !bn && !residual && !pool) {
        be->ops->conv1d_forward(be, &d, x[0], l->params[0].data, bias, act == TFC_ACT_RELU, y,
                                ex->ws);
        if (act != TFC_ACT_LINEAR && act != TFC_ACT_RELU)
            be->ops->act_forward(be, act, (int64_t)d.n * d.ow * d.f, d.f, y, y);
        return;
    }
    if (a->groups == 1) {
        be->ops->conv_forward(be, &d, x[0], l->params[0].data, bias, bn, residual, act, y, pool,
                              pooled, ex->ws);
        return;
    }
    tfc_layer_grouped_forward(be, &d, a->groups, x[0], l->params[0].data, bias, bn, residual,
                              act, y, pool, pooled);
}

static void conv1d_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    conv1d_forward_fused(l, ex, x, y, NULL, NULL, TFC_ACT_LINEAR, NULL, NULL);
}

static void conv1d_forward_act(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    conv1d_forward_fused(l, ex, x, y, NULL, NULL, l->act, NULL, NULL);
}

static void conv1d_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                            const float *dy, float *const *dx)
{
    const conv1d_args *a = l->args;
    tfc_conv_desc d = conv1d_desc(l, ex->batch);
    const tfc_backend_ops *op = ex->be->ops;
    if (a->use_bias) op->bias_grad(ex->be, (int64_t)d.n * d.ow, d.f, dy, l->params[1].grad);
    if (conv1d_direct(l, ex->be)) {
        op->conv1d_backward_filter(ex->be, &d, x[0], dy, l->params[0].grad, ex->ws);
        if (dx[0])
            op->conv1d_backward_data(ex->be, &d, dy, l->params[0].data, dx[0], ex->fresh & 1,
                                     ex->ws);
        return;
    }
    if (a->groups == 1) {
        op->conv_backward_filter(ex->be, &d, x[0], dy, l->params[0].grad, ex->ws);
        if (dx[0])
            op->conv_backward_data(ex->be, &d, dy, l->params[0].data, dx[0], ex->fresh & 1,
                                   ex->ws);
        return;
    }
    tfc_layer_grouped_backward(ex->be, &d, a->groups, x[0], l->params[0].data, dy,
                               l->params[0].grad, dx[0], ex->fresh & 1);
}

const tfc_layer_ops tfc_conv1d_ops = {
    .type = "Conv1D", .schema = conv1d_fields, .args_size = sizeof(conv1d_args),
    .min_inputs = 1, .max_inputs = 1, .needs = conv1d_needs,
    .build = conv1d_build, .plan = conv1d_plan, .forward = conv1d_forward,
    .forward_act = conv1d_forward_act, .forward_fused = conv1d_forward_fused,
    .assigns_grads = 1, .backward = conv1d_backward,
};
