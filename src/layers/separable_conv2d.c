/* SeparableConv2D and SeparableConv1D (keras.layers): a depthwise convolution (each input channel
 * through its own depth_multiplier filters, strides, dilation, valid/same padding) then a 1x1
 * convolution mixing its c m channels into `filters`, as Keras's separable_conv:
 *   z[n, i, j, k] = sum_{u, v} x[n, i sh + u dh - pt, j sw + v dw - pl, k / m]
 *                              D[u, v, k / m, k % m]                 D [kh, kw, c, m]
 *   y[n, i, j, f] = sum_k z[n, i, j, k] P[0, 0, k, f] + b[f]         P [1, 1, c m, filters]
 *   backward: db += sum dy, dP += z^T dy, dz = dy P^T, dD += x (*) dz per channel,
 *   dx += dz (*)^T D
 * z is kept from forward (saved); dz lives in the workspace.
 * SeparableConv1D is the same over (steps, c) as a 1 x steps image: its kernels [k, c, m] and
 * [1, c m, filters] are [1, k, c, m] and [1, 1, c m, filters] in the same memory. */
#include "layers/layer.h"

/* The 1-D layer's kernel_size, strides and dilation_rate are lists of one (as Keras takes
 * them), which its build writes into the pairs as {1, v}: from there on both run as one. */
typedef struct separable_args {
    int filters, kernel_size[2], strides[2], padding, data_format, dilation_rate[2];
    int depth_multiplier, activation, use_bias;
    const tfc_node *depthwise_initializer, *pointwise_initializer, *bias_initializer;
    tfc_int_list kernel_size_1d, strides_1d, dilation_rate_1d;
} separable_args;

/* Keras 3.15's arguments, kernel_size (help `kh`), strides and dilation_rate of field type
 * `kind` at members `k`, `s`, `d`. */
#define SEPARABLE_FIELDS(kind, k, kh, s, d)                                                      \
    {{"filters", TFC_F_INT, offsetof(separable_args, filters), NULL, 1, 1 << 20, NULL,           \
      "output channels of the pointwise convolution"},                                           \
     {"kernel_size", kind, offsetof(separable_args, k), NULL, 1, 4096, NULL, kh},                \
     {"strides", kind, offsetof(separable_args, s), "1", 1, 4096, NULL,                          \
      "stride of the depthwise convolution"},                                                    \
     {"padding", TFC_F_ENUM, offsetof(separable_args, padding), "valid", TFC_UNBOUNDED,          \
      tfc_padding_names, "valid or same"},                                                       \
     TFC_DATA_FORMAT_FIELD(separable_args, data_format),                                         \
     {"dilation_rate", kind, offsetof(separable_args, d), "1", 1, 4096, NULL,                    \
      "dilation of the depthwise convolution"},                                                  \
     {"depth_multiplier", TFC_F_INT, offsetof(separable_args, depth_multiplier), "1", 1, 4096,   \
      NULL, "depthwise filters per input channel"},                                              \
     TFC_ACTIVATION_FIELD(separable_args, activation),                                           \
     {"use_bias", TFC_F_BOOL, offsetof(separable_args, use_bias), "true", TFC_UNBOUNDED, NULL,   \
      "add a bias per filter"},                                                                  \
     {"depthwise_initializer", TFC_F_NODE, offsetof(separable_args, depthwise_initializer),      \
      TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL, "default glorot_uniform"},                            \
     {"pointwise_initializer", TFC_F_NODE, offsetof(separable_args, pointwise_initializer),      \
      TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL, "default glorot_uniform"},                            \
     {"bias_initializer", TFC_F_NODE, offsetof(separable_args, bias_initializer),                \
      TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL, "default zeros"},                                     \
     TFC_REGULARIZER_FIELD("depthwise_regularizer"),                                             \
     TFC_REGULARIZER_FIELD("pointwise_regularizer"), TFC_REGULARIZER_FIELD("bias_regularizer"),  \
     TFC_ACTIVITY_REGULARIZER_FIELD, TFC_CONSTRAINT_FIELD("depthwise_constraint"),               \
     TFC_CONSTRAINT_FIELD("pointwise_constraint"), TFC_CONSTRAINT_FIELD("bias_constraint"),      \
     {NULL}}

static const tfc_field separable_fields[] =
    SEPARABLE_FIELDS(TFC_F_INT_PAIR, kernel_size, "depthwise kernel height and width", strides,
                     dilation_rate);
static const tfc_field separable1d_fields[] =
    SEPARABLE_FIELDS(TFC_F_INT_LIST, kernel_size_1d, "depthwise window length", strides_1d,
                     dilation_rate_1d);

extern const tfc_layer_ops tfc_separable_conv1d_ops;

/* The depthwise step of a batch of n: f = c m channels of z. */
static tfc_conv_desc separable_desc(const tfc_layer *l, int n)
{
    const separable_args *a = l->args;
    return tfc_layer_depthwise_desc(&l->in_shape[0], a->kernel_size, a->strides,
                                    a->dilation_rate, a->padding == TFC_PADDING_SAME,
                                    a->depth_multiplier, n);
}

/* Bytes of dz for the bound batch, rounded to 64: the depthwise step's workspace follows. */
static size_t dz_bytes(const tfc_layer *l)
{
    tfc_conv_desc d = separable_desc(l, l->max_batch);
    return ((size_t)d.n * d.oh * d.ow * d.f * sizeof(float) + 63) & ~(size_t)63;
}

static tfc_status separable_build(tfc_layer *l, tfc_error *err)
{
    separable_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    const int r = l->ops == &tfc_separable_conv1d_ops; /* the axes the 1-D layer lacks */
    char buf[96];
    if (r ? tfc_layer_window1d(l, &a->kernel_size_1d, &a->strides_1d, &a->dilation_rate_1d,
                               a->kernel_size, a->strides, a->dilation_rate, err)
          : tfc_layer_need_image(l, err))
        return TFC_ERR_CONFIG;
    if (in->dim[in->ndim - 1] * a->depth_multiplier > 1 << 24)
        return tfc_layer_error(err, l, "%lld channels times depth_multiplier %d is too many",
                               (long long)in->dim[in->ndim - 1], a->depth_multiplier);
    tfc_conv_desc d = separable_desc(l, 1);
    if (d.oh < 1 || d.ow < 1)
        return tfc_layer_error(err, l,
                               "input %s is smaller than the %dx%d kernel (dilation %dx%d) with "
                               "valid padding",
                               tfc_shape_str(in, buf, sizeof buf), d.kh, d.kw, d.dh, d.dw);
    l->out_shape = tfc_shape_make(3 - r, (int64_t[]){d.oh, d.ow, a->filters} + r);
    l->act = (tfc_act)a->activation;
    l->saved_floats = (int64_t)d.oh * d.ow * d.f;
    tfc_init di, pi, bi;
    if (tfc_layer_init_arg(l, a->depthwise_initializer, "depthwise_initializer",
                           TFC_INIT_GLOROT_UNIFORM, &di, err) ||
        tfc_layer_init_arg(l, a->pointwise_initializer, "pointwise_initializer",
                           TFC_INIT_GLOROT_UNIFORM, &pi, err) ||
        tfc_layer_init_arg(l, a->bias_initializer, "bias_initializer", TFC_INIT_ZEROS, &bi, err))
        return TFC_ERR_CONFIG;
    tfc_layer_add_param(l, "depthwise_kernel", 4 - r,
                        (int64_t[]){d.kh, d.kw, d.c, a->depth_multiplier} + r, 1, di);
    tfc_layer_add_param(l, "pointwise_kernel", 4 - r, (int64_t[]){1, 1, d.f, a->filters} + r, 1,
                        pi);
    if (a->use_bias) tfc_layer_add_param(l, "bias", 1, (int64_t[]){a->filters}, 1, bi);
    return TFC_OK;
}

static void separable_plan(tfc_layer *l, tfc_backend *be)
{
    tfc_conv_desc d = separable_desc(l, l->max_batch);
    l->workspace = dz_bytes(l) + be->ops->depthwise_workspace(be, &d);
}

static void separable_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const separable_args *a = l->args;
    tfc_conv_desc d = separable_desc(l, ex->batch);
    const tfc_backend_ops *op = ex->be->ops;
    const int rows = d.n * d.oh * d.ow;
    op->depthwise_forward(ex->be, &d, x[0], l->params[0].data, NULL, NULL, NULL,
                          TFC_ACT_LINEAR, l->saved, NULL);
    op->gemm(ex->be, 0, 0, rows, a->filters, d.f, 1.f, l->saved, d.f, l->params[1].data,
             a->filters, 0.f, y, a->filters);
    if (a->use_bias) op->bias_add(ex->be, rows, a->filters, l->params[2].data, y);
}

static void separable_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                               const float *dy, float *const *dx)
{
    const separable_args *a = l->args;
    tfc_conv_desc d = separable_desc(l, ex->batch);
    const tfc_backend_ops *op = ex->be->ops;
    const int rows = d.n * d.oh * d.ow;
    float *dz = ex->ws;
    void *dw_ws = (char *)ex->ws + dz_bytes(l);
    if (a->use_bias) op->bias_grad(ex->be, rows, a->filters, dy, l->params[2].grad);
    op->gemm(ex->be, 1, 0, d.f, a->filters, rows, 1.f, l->saved, d.f, dy, a->filters, 1.f,
             l->params[1].grad, a->filters);
    op->gemm(ex->be, 0, 1, rows, d.f, a->filters, 1.f, dy, a->filters, l->params[1].data,
             a->filters, 0.f, dz, d.f);
    op->depthwise_backward_filter(ex->be, &d, x[0], dz, l->params[0].grad, dw_ws);
    if (dx[0]) op->depthwise_backward_data(ex->be, &d, dz, l->params[0].data, dx[0]);
}

static const char *const *separable_needs(const tfc_layer *l)
{
    return tfc_layer_depthwise_ops;
}

const tfc_layer_ops tfc_separable_conv2d_ops = {
    .type = "SeparableConv2D", .schema = separable_fields, .args_size = sizeof(separable_args),
    .min_inputs = 1, .max_inputs = 1,
    .build = separable_build, .plan = separable_plan, .forward = separable_forward,
    .backward = separable_backward, .needs = separable_needs,
};

const tfc_layer_ops tfc_separable_conv1d_ops = {
    .type = "SeparableConv1D", .schema = separable1d_fields, .args_size = sizeof(separable_args),
    .min_inputs = 1, .max_inputs = 1, .cpu_first = 1,
    .build = separable_build, .plan = separable_plan, .forward = separable_forward,
    .backward = separable_backward, .needs = separable_needs,
};
