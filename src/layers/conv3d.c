/* Conv3D (keras.layers.Conv3D): 3-D cross-correlation over (depth, height, width, channels)
 * volumes with TensorFlow's valid/same padding (same pads the extra plane after), strides,
 * dilation and groups (channels and filters split into g equal runs, filter j reading the
 * channels of run j / (filters / g)).
 *   y[n, o, j] = sum_{u, c in group(j)} x[n, o s + u d - pad, c] K[u, c - c0(j), j] + b[j]
 *   backward: dK += x (*) dy, db += sum dy, dx += dy (*)^T K
 * (o, u, s, d, pad per axis: depth, height, width). K is Keras's [kd, kh, kw, c / g, f]; the
 * backend's conv3d ops (core/backend.h) run it, the bias included; the activation follows. */
#include <stdint.h>
#include <stdlib.h>

#include "layers/layer.h"

/* kernel_size, strides and dilation_rate: an integer or a list of three, as Keras takes */
typedef struct conv3d_args {
    int filters, padding, groups, activation, use_bias;
    tfc_int_list kernel_size, strides, dilation_rate;
    const tfc_node *kernel_initializer, *bias_initializer;
} conv3d_args;

static const tfc_field conv3d_fields[] = {
    {"filters", TFC_F_INT, offsetof(conv3d_args, filters), NULL, 1, 1 << 20, NULL,
     "output channels"},
    {"kernel_size", TFC_F_INT_LIST, offsetof(conv3d_args, kernel_size), NULL, 1, 4096, NULL,
     "window depth, height and width"},
    {"strides", TFC_F_INT_LIST, offsetof(conv3d_args, strides), "1", 1, 4096, NULL, "stride"},
    {"padding", TFC_F_ENUM, offsetof(conv3d_args, padding), "valid", TFC_UNBOUNDED,
     tfc_padding_names, "valid or same"},
    TFC_FIXED_FIELD("data_format", "channels_last",
                    "tfc's volumes are (depth, height, width, channels)"),
    {"dilation_rate", TFC_F_INT_LIST, offsetof(conv3d_args, dilation_rate), "1", 1, 4096,
     NULL, "dilation"},
    {"groups", TFC_F_INT, offsetof(conv3d_args, groups), "1", 1, 1 << 20, NULL,
     "channel groups; channels and filters must divide by it"},
    TFC_ACTIVATION_FIELD(conv3d_args, activation),
    {"use_bias", TFC_F_BOOL, offsetof(conv3d_args, use_bias), "true", TFC_UNBOUNDED, NULL,
     "add a bias per filter"},
    {"kernel_initializer", TFC_F_NODE, offsetof(conv3d_args, kernel_initializer),
     TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL, "default glorot_uniform"},
    {"bias_initializer", TFC_F_NODE, offsetof(conv3d_args, bias_initializer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "default zeros"},
    TFC_KERNEL_BIAS_KERAS_FIELDS,
    {NULL}};

/* The built layer: the convolution of one example (desc.n set per call). */
typedef struct conv3d_state {
    tfc_conv3d_desc desc;
} conv3d_state;

static tfc_conv3d_desc conv3d_desc(const tfc_layer *l, int n)
{
    tfc_conv3d_desc d = ((const conv3d_state *)l->state)->desc;
    d.n = n;
    return d;
}

static tfc_status conv3d_build(tfc_layer *l, tfc_error *err)
{
    const conv3d_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    char buf[96];
    tfc_conv3d_desc d = {.n = 1, .f = a->filters, .groups = a->groups};
    if (tfc_layer_int3(l, "kernel_size", &a->kernel_size, 1, d.k, err) ||
        tfc_layer_int3(l, "strides", &a->strides, 1, d.s, err) ||
        tfc_layer_int3(l, "dilation_rate", &a->dilation_rate, 1, d.dil, err))
        return TFC_ERR_CONFIG;
    if (in->ndim != 4)
        return tfc_layer_error(err, l, "needs an input of shape (depth, height, width, "
                                       "channels), got %s", tfc_shape_str(in, buf, sizeof buf));
    if ((d.s[0] > 1 || d.s[1] > 1 || d.s[2] > 1) && (d.dil[0] > 1 || d.dil[1] > 1 || d.dil[2] > 1))
        return tfc_layer_error(err, l, "strides > 1 with dilation_rate > 1 is not supported "
                                       "(as in Keras)");
    if (in->dim[3] > (1 << 24) || in->dim[0] * in->dim[1] * in->dim[2] * in->dim[3] > INT32_MAX)
        return tfc_layer_error(err, l, "input %s is too large", tfc_shape_str(in, buf, sizeof buf));
    if (tfc_layer_check_groups(l, a->groups, in->dim[3], a->filters, err)) return TFC_ERR_CONFIG;
    d.c = (int)in->dim[3];
    for (int ax = 0; ax < 3; ax++) {
        d.in[ax] = (int)in->dim[ax];
        tfc_conv_axis(d.in[ax], d.k[ax], d.s[ax], d.dil[ax], a->padding == TFC_PADDING_SAME,
                      &d.out[ax], &d.pad[ax]);
        if (d.out[ax] < 1)
            return tfc_layer_error(err, l, "input %s is smaller than the %dx%dx%d kernel "
                                   "(dilation %dx%dx%d) with valid padding",
                                   tfc_shape_str(in, buf, sizeof buf), d.k[0], d.k[1], d.k[2],
                                   d.dil[0], d.dil[1], d.dil[2]);
    }
    conv3d_state *s = calloc(1, sizeof *s);
    if (!s) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    s->desc = d;
    l->state = s;
    l->out_shape = tfc_shape_make(4, (int64_t[]){d.out[0], d.out[1], d.out[2], d.f});
    l->act = (tfc_act)a->activation;
    tfc_init ki, bi;
    if (tfc_layer_init_arg(l, a->kernel_initializer, "kernel_initializer",
                           TFC_INIT_GLOROT_UNIFORM, &ki, err) ||
        tfc_layer_init_arg(l, a->bias_initializer, "bias_initializer", TFC_INIT_ZEROS, &bi, err))
        return TFC_ERR_CONFIG;
    tfc_layer_add_param(l, "kernel", 5, (int64_t[]){d.k[0], d.k[1], d.k[2], d.c / d.groups, d.f},
                        1, ki);
    if (a->use_bias) tfc_layer_add_param(l, "bias", 1, (int64_t[]){d.f}, 1, bi);
    return TFC_OK;
}

static const char *const *conv3d_needs(const tfc_layer *l)
{
    (void)l;
    static const char *const needs[] = {"conv3d_workspace", "conv3d_forward", "conv3d_backward",
                                        NULL};
    return needs;
}

static void conv3d_plan(tfc_layer *l, tfc_backend *be)
{
    tfc_conv3d_desc d = conv3d_desc(l, l->max_batch);
    l->workspace = be->ops->conv3d_workspace(be, &d);
}

static void conv3d_run(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y, tfc_act act)
{
    const conv3d_args *a = l->args;
    tfc_conv3d_desc d = conv3d_desc(l, ex->batch);
    ex->be->ops->conv3d_forward(ex->be, &d, x[0], l->params[0].data,
                                a->use_bias ? l->params[1].data : NULL, y, ex->ws);
    if (act != TFC_ACT_LINEAR)
        ex->be->ops->act_forward(ex->be, act, tfc_layer_out_numel(l) * d.n, d.f, y, y);
}

static void conv3d_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    conv3d_run(l, ex, x, y, TFC_ACT_LINEAR);
}

static void conv3d_forward_act(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    conv3d_run(l, ex, x, y, l->act);
}

static void conv3d_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                            const float *dy, float *const *dx)
{
    (void)y;
    const conv3d_args *a = l->args;
    tfc_conv3d_desc d = conv3d_desc(l, ex->batch);
    const tfc_backend_ops *op = ex->be->ops;
    if (a->use_bias)
        op->bias_grad(ex->be, (int64_t)d.n * d.out[0] * d.out[1] * d.out[2], d.f, dy,
                      l->params[1].grad);
    op->conv3d_backward(ex->be, &d, x[0], l->params[0].data, dy, dx[0], l->params[0].grad,
                        ex->fresh & 1, ex->ws);
}

static void conv3d_free(tfc_layer *l) { free(l->state); }

const tfc_layer_ops tfc_conv3d_ops = {
    .type = "Conv3D", .schema = conv3d_fields, .args_size = sizeof(conv3d_args),
    .min_inputs = 1, .max_inputs = 1, .needs = conv3d_needs,
    .build = conv3d_build, .plan = conv3d_plan, .forward = conv3d_forward,
    .forward_act = conv3d_forward_act, .assigns_grads = 1, .backward = conv3d_backward,
    .free_state = conv3d_free,
};
