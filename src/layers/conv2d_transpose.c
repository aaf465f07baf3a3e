/* Conv2DTranspose (keras.layers.Conv2DTranspose): the transpose of a convolution, the
 * decoder's upsampling step. It is the data gradient of the convolution D that maps its
 * output (H, W, filters) back onto its input (h, w, c) with the same kernel, Keras's layout
 * [kh, kw, filters, c] being D's [kh, kw, in, out]:
 *   y = conv_backward_data_D(x, K) + b         dx += conv_D(dy, K),
 *   dK += conv_backward_filter_D(dy, x),       db += sum dy
 * Sizes and padding as Keras 3 on JAX (compute_conv_transpose_padding_args_for_jax): with
 * k = (kernel - 1) dilation + 1, the input dilated by the stride is padded by (lo, hi) and
 * correlated with the flipped kernel, so H = (h - 1) s + lo + hi - k + 2 and D's top padding
 * is k - 1 - lo. valid: lo = k - 1, hi = k - 1 + output_padding (default max(k, s) - k);
 * same: p = s + k - 2 (or k + k % 2 - 2 + output_padding), lo = min(ceil(p / 2), k - 1),
 * hi = p - lo.
 * Conv1DTranspose is the same over (steps, c) as a 1 x steps image: its kernel [k, filters, c]
 * is [1, k, filters, c] in the same memory. */
#include <stdio.h>
#include <stdlib.h>

#include "layers/layer.h"

/* The 1-D layer's kernel_size, strides and dilation_rate are lists of one (as Keras takes
 * them), which its build writes into the pairs as {1, v}: from there on both run as one. */
typedef struct transpose_args {
    int filters, kernel_size[2], strides[2], padding;
    const tfc_node *output_padding;
    int data_format, dilation_rate[2], activation, use_bias;
    const tfc_node *kernel_initializer, *bias_initializer;
    tfc_int_list kernel_size_1d, strides_1d, dilation_rate_1d;
} transpose_args;

/* Keras 3.15's arguments, kernel_size (help `kh`), strides and dilation_rate of field type
 * `kind` at members `k`, `s`, `d`; `op` output_padding's help. */
#define TRANSPOSE_FIELDS(kind, k, kh, s, d, op)                                                  \
    {{"filters", TFC_F_INT, offsetof(transpose_args, filters), NULL, 1, 1 << 20, NULL,           \
      "output channels"},                                                                        \
     {"kernel_size", kind, offsetof(transpose_args, k), NULL, 1, 4096, NULL, kh},                \
     {"strides", kind, offsetof(transpose_args, s), "1", 1, 4096, NULL, "stride"},               \
     {"padding", TFC_F_ENUM, offsetof(transpose_args, padding), "valid", TFC_UNBOUNDED,          \
      tfc_padding_names, "valid or same"},                                                       \
     {"output_padding", TFC_F_NODE, offsetof(transpose_args, output_padding), TFC_NO_DEFAULT,    \
      TFC_UNBOUNDED, NULL, op},                                                                  \
     TFC_DATA_FORMAT_FIELD(transpose_args, data_format),                                         \
     {"dilation_rate", kind, offsetof(transpose_args, d), "1", 1, 4096, NULL, "dilation"},       \
     TFC_ACTIVATION_FIELD(transpose_args, activation),                                           \
     {"use_bias", TFC_F_BOOL, offsetof(transpose_args, use_bias), "true", TFC_UNBOUNDED, NULL,   \
      "add a bias per filter"},                                                                  \
     {"kernel_initializer", TFC_F_NODE, offsetof(transpose_args, kernel_initializer),            \
      TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL, "default glorot_uniform"},                            \
     {"bias_initializer", TFC_F_NODE, offsetof(transpose_args, bias_initializer),                \
      TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL, "default zeros"},                                     \
     TFC_KERNEL_BIAS_KERAS_FIELDS,                                                               \
     {NULL}}

static const tfc_field transpose_fields[] =
    TRANSPOSE_FIELDS(TFC_F_INT_PAIR, kernel_size, "kernel height and width", strides,
                     dilation_rate, "int or [h, w], each below its stride; default none");
static const tfc_field transpose1d_fields[] =
    TRANSPOSE_FIELDS(TFC_F_INT_LIST, kernel_size_1d, "window length", strides_1d,
                     dilation_rate_1d, "int or a list of one, below the stride; default none");

extern const tfc_layer_ops tfc_conv1d_transpose_ops;

/* The layer's state: D for one image, and output_padding (-1: none). */
typedef struct transpose_state {
    tfc_conv_desc d;
    int output_padding[2];
} transpose_state;

/* One axis: D's input size (the output's) and top padding (layer.h). */
void tfc_layer_transpose_axis(int in, int k, int s, int dil, int same, int op, int *out,
                              int *pad)
{
    const int ke = (k - 1) * dil + 1;
    int lo, hi;
    if (!same) {
        lo = ke - 1;
        hi = ke - 1 + (op >= 0 ? op : (ke > s ? ke : s) - ke);
    } else {
        int p = op >= 0 ? ke + ke % 2 - 2 + op : s + ke - 2;
        lo = p / 2 + p % 2 < ke - 1 ? p / 2 + p % 2 : ke - 1;
        hi = p - lo;
    }
    *out = (in - 1) * s + lo + hi - ke + 2;
    *pad = ke - 1 - lo;
}

/* output_padding of a layer whose `r` leading axes are not its own (1: the 1-D layer, whose
 * height keeps none) */
static tfc_status parse_output_padding(const tfc_layer *l, int r, int op[2], tfc_error *err)
{
    const transpose_args *a = l->args;
    const tfc_node *n = a->output_padding;
    char path[128];
    snprintf(path, sizeof path, "layers[%d].%s.output_padding", l->index, l->ops->type);
    op[0] = op[1] = -1;
    if (!n || tfc_node_is_null(n)) return TFC_OK;
    const tfc_node *item[2] = {n, n};
    if (n->kind == TFC_NODE_SEQ && n->n == 2 - r) item[r] = n->vals[0], item[1] = n->vals[1 - r];
    else if (n->kind != TFC_NODE_SCALAR)
        return tfc_node_error(err, TFC_ERR_CONFIG, n, path,
                              r ? "expected an int or a list of one" :
                                  "expected an int or a pair [h, w]");
    for (int k = r; k < 2; k++) {
        long long v;
        if (tfc_node_int(item[k], path, 0, 4095, &v, err)) return TFC_ERR_CONFIG;
        if (v >= a->strides[k])
            return tfc_node_error(err, TFC_ERR_CONFIG, item[k], path,
                                  "output_padding %lld must be less than the stride %d (as in "
                                  "Keras)", v, a->strides[k]);
        op[k] = (int)v;
    }
    return TFC_OK;
}

static tfc_status transpose_build(tfc_layer *l, tfc_error *err)
{
    transpose_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    const int r = l->ops == &tfc_conv1d_transpose_ops; /* the axes the 1-D layer lacks */
    char buf[96];
    if (r ? tfc_layer_window1d(l, &a->kernel_size_1d, &a->strides_1d, &a->dilation_rate_1d,
                               a->kernel_size, a->strides, a->dilation_rate, err)
          : tfc_layer_need_image(l, err))
        return TFC_ERR_CONFIG;
    if ((a->strides[0] > 1 || a->strides[1] > 1) &&
        (a->dilation_rate[0] > 1 || a->dilation_rate[1] > 1))
        return tfc_layer_error(err, l, "strides > 1 with dilation_rate > 1 is not supported "
                                       "(as in Keras)");
    transpose_state *s = calloc(1, sizeof *s);
    if (!s) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    l->state = s;
    if (parse_output_padding(l, r, s->output_padding, err)) return TFC_ERR_CONFIG;
    tfc_conv_desc d = {.n = 1, .c = a->filters, .kh = a->kernel_size[0],
                       .kw = a->kernel_size[1], .f = (int)in->dim[2 - r], .sh = a->strides[0],
                       .sw = a->strides[1], .dh = a->dilation_rate[0],
                       .dw = a->dilation_rate[1], .oh = r ? 1 : (int)in->dim[0],
                       .ow = (int)in->dim[1 - r]};
    const int same = a->padding == TFC_PADDING_SAME;
    tfc_layer_transpose_axis(d.oh, d.kh, d.sh, d.dh, same, s->output_padding[0], &d.h,
                             &d.pad_top);
    tfc_layer_transpose_axis(d.ow, d.kw, d.sw, d.dw, same, s->output_padding[1], &d.w,
                             &d.pad_left);
    if (d.h < 1 || d.w < 1)
        return tfc_layer_error(err, l, "gives an empty output for the input %s",
                               tfc_shape_str(in, buf, sizeof buf));
    s->d = d;
    l->out_shape = tfc_shape_make(3 - r, (int64_t[]){d.h, d.w, d.c} + r);
    l->act = (tfc_act)a->activation;
    tfc_init ki, bi;
    if (tfc_layer_init_arg(l, a->kernel_initializer, "kernel_initializer",
                           TFC_INIT_GLOROT_UNIFORM, &ki, err) ||
        tfc_layer_init_arg(l, a->bias_initializer, "bias_initializer", TFC_INIT_ZEROS, &bi, err))
        return TFC_ERR_CONFIG;
    tfc_layer_add_param(l, "kernel", 4 - r, (int64_t[]){d.kh, d.kw, d.c, d.f} + r, 1, ki);
    if (a->use_bias) tfc_layer_add_param(l, "bias", 1, (int64_t[]){d.c}, 1, bi);
    return TFC_OK;
}

static tfc_conv_desc transpose_desc(const tfc_layer *l, int n)
{
    tfc_conv_desc d = ((const transpose_state *)l->state)->d;
    d.n = n;
    return d;
}

tfc_conv_desc tfc_layer_transposed_conv(const tfc_layer *l)
{
    return transpose_desc(l, 1);
}

/* The convolution's scratch, then (backward, when dx is added to) room for dx's addend. */
static size_t conv_part(const tfc_layer *l, tfc_backend *be, int n)
{
    tfc_conv_desc d = transpose_desc(l, n);
    return (be->ops->conv_workspace(be, &d) + 63) & ~(size_t)63;
}

static void transpose_plan(tfc_layer *l, tfc_backend *be)
{
    l->workspace = conv_part(l, be, l->max_batch) +
                   (size_t)l->max_batch * (size_t)tfc_shape_numel(&l->in_shape[0]) * 4;
}

static void transpose_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const transpose_args *a = l->args;
    tfc_conv_desc d = transpose_desc(l, ex->batch);
    ex->be->ops->conv_backward_data(ex->be, &d, x[0], l->params[0].data, y, 1, ex->ws);
    if (a->use_bias)
        ex->be->ops->bias_add(ex->be, (int64_t)d.n * d.h * d.w, d.c, l->params[1].data, y);
}

static void transpose_backward(tfc_layer *l, tfc_exec *ex, const void *const *x,
                               const float *y, const float *dy, float *const *dx)
{
    const transpose_args *a = l->args;
    tfc_conv_desc d = transpose_desc(l, ex->batch);
    const tfc_backend_ops *op = ex->be->ops;
    if (a->use_bias) op->bias_grad(ex->be, (int64_t)d.n * d.h * d.w, d.c, dy, l->params[1].grad);
    op->conv_backward_filter(ex->be, &d, dy, x[0], l->params[0].grad, ex->ws);
    if (!dx[0]) return;
    /* conv_forward overwrites: straight into dx where its block starts here, else into
     * scratch past the convolution's, then added */
    float *t = ex->fresh & 1 ? dx[0]
                             : (float *)((char *)ex->ws + conv_part(l, ex->be, l->max_batch));
    op->conv_forward(ex->be, &d, dy, l->params[0].data, NULL, NULL, NULL, TFC_ACT_LINEAR, t, NULL,
                     NULL, ex->ws);
    if (t != dx[0])
        op->axpy(ex->be, (int64_t)ex->batch * tfc_shape_numel(&l->in_shape[0]), 1.f, t, dx[0]);
}

static void transpose_free(tfc_layer *l)
{
    free(l->state);
    l->state = NULL;
}

const tfc_layer_ops tfc_conv2d_transpose_ops = {
    .type = "Conv2DTranspose", .schema = transpose_fields, .args_size = sizeof(transpose_args),
    .min_inputs = 1, .max_inputs = 1, .assigns_grads = 1,
    .build = transpose_build, .plan = transpose_plan, .forward = transpose_forward,
    .backward = transpose_backward, .free_state = transpose_free,
};

const tfc_layer_ops tfc_conv1d_transpose_ops = {
    .type = "Conv1DTranspose", .schema = transpose1d_fields, .args_size = sizeof(transpose_args),
    .min_inputs = 1, .max_inputs = 1, .assigns_grads = 1, .cpu_first = 1,
    .build = transpose_build, .plan = transpose_plan, .forward = transpose_forward,
    .backward = transpose_backward, .free_state = transpose_free,
};
