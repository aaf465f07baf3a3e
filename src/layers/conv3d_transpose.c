/* Conv3DTranspose (keras.layers.Conv3DTranspose): the transpose of a 3-D convolution over
 * (depth, height, width, channels) volumes, Conv2DTranspose's rule (conv2d_transpose.c) on
 * three axes. It is the data gradient of the convolution D that maps its output (D', H', W',
 * filters) back onto its input (d, h, w, c) with the same kernel, Keras's layout
 * [kd, kh, kw, filters, c] being D's [kd, kh, kw, in, out] (tfc_conv3d_desc with D.c =
 * filters, D.f = c), so the backend's conv3d ops run all of it:
 *   y = conv3d_backward_D(dy := x, K) (data) + b     dx += conv3d_forward_D(dy, K),
 *   dK += conv3d_backward_D(x := dy, dy := x) (filter),  db += sum dy
 * Sizes and padding per axis as Keras 3 on JAX (tfc_layer_transpose_axis): with k = (kernel -
 * 1) dilation + 1, the output is (n - 1) s + lo + hi - k + 2 and D's padding before the
 * volume is k - 1 - lo, output_padding entering hi. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "layers/layer.h"

/* kernel_size, strides and dilation_rate: an integer or a list of three, as Keras takes */
typedef struct transpose3d_args {
    int filters, padding, activation, use_bias;
    tfc_int_list kernel_size, strides, dilation_rate;
    const tfc_node *output_padding, *kernel_initializer, *bias_initializer;
} transpose3d_args;

static const tfc_field transpose3d_fields[] = {
    {"filters", TFC_F_INT, offsetof(transpose3d_args, filters), NULL, 1, 1 << 20, NULL,
     "output channels"},
    {"kernel_size", TFC_F_INT_LIST, offsetof(transpose3d_args, kernel_size), NULL, 1, 4096, NULL,
     "window depth, height and width"},
    {"strides", TFC_F_INT_LIST, offsetof(transpose3d_args, strides), "1", 1, 4096, NULL,
     "stride"},
    {"padding", TFC_F_ENUM, offsetof(transpose3d_args, padding), "valid", TFC_UNBOUNDED,
     tfc_padding_names, "valid or same"},
    {"output_padding", TFC_F_NODE, offsetof(transpose3d_args, output_padding), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "int or [d, h, w], each below its stride; default none"},
    TFC_FIXED_FIELD("data_format", "channels_last",
                    "tfc's volumes are (depth, height, width, channels)"),
    {"dilation_rate", TFC_F_INT_LIST, offsetof(transpose3d_args, dilation_rate), "1", 1, 4096,
     NULL, "dilation"},
    TFC_ACTIVATION_FIELD(transpose3d_args, activation),
    {"use_bias", TFC_F_BOOL, offsetof(transpose3d_args, use_bias), "true", TFC_UNBOUNDED, NULL,
     "add a bias per filter"},
    {"kernel_initializer", TFC_F_NODE, offsetof(transpose3d_args, kernel_initializer),
     TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL, "default glorot_uniform"},
    {"bias_initializer", TFC_F_NODE, offsetof(transpose3d_args, bias_initializer),
     TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL, "default zeros"},
    TFC_KERNEL_BIAS_KERAS_FIELDS,
    {NULL}};

/* The built layer: D for one volume (desc.n set per call). */
typedef struct transpose3d_state {
    tfc_conv3d_desc d;
} transpose3d_state;

/* output_padding into op[3] (-1 each: none): null, an integer or a list of three, each below
 * its stride s[] (Keras's check). */
static tfc_status parse_output_padding(const tfc_layer *l, const int s[3], int op[3],
                                       tfc_error *err)
{
    const tfc_node *n = ((const transpose3d_args *)l->args)->output_padding;
    char path[128];
    snprintf(path, sizeof path, "layers[%d].%s.output_padding", l->index, l->ops->type);
    op[0] = op[1] = op[2] = -1;
    if (!n || tfc_node_is_null(n)) return TFC_OK;
    const tfc_node *item[3] = {n, n, n};
    if (n->kind == TFC_NODE_SEQ && n->n == 3)
        item[0] = n->vals[0], item[1] = n->vals[1], item[2] = n->vals[2];
    else if (n->kind != TFC_NODE_SCALAR)
        return tfc_node_error(err, TFC_ERR_CONFIG, n, path,
                              "expected an int or a list of 3 [d, h, w]");
    for (int a = 0; a < 3; a++) {
        long long v;
        if (tfc_node_int(item[a], path, 0, 4095, &v, err)) return TFC_ERR_CONFIG;
        if (v >= s[a])
            return tfc_node_error(err, TFC_ERR_CONFIG, item[a], path,
                                  "output_padding %lld must be less than the stride %d (as in "
                                  "Keras)", v, s[a]);
        op[a] = (int)v;
    }
    return TFC_OK;
}

static tfc_status transpose3d_build(tfc_layer *l, tfc_error *err)
{
    const transpose3d_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    char buf[96];
    int op[3];
    tfc_conv3d_desc d = {.n = 1, .c = a->filters, .groups = 1};
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
    if (parse_output_padding(l, d.s, op, err)) return TFC_ERR_CONFIG;
    if (in->dim[3] > (1 << 24) || in->dim[0] * in->dim[1] * in->dim[2] * in->dim[3] > INT32_MAX)
        return tfc_layer_error(err, l, "input %s is too large", tfc_shape_str(in, buf, sizeof buf));
    d.f = (int)in->dim[3];
    int64_t numel = d.c;
    for (int ax = 0; ax < 3; ax++) {
        d.out[ax] = (int)in->dim[ax];
        tfc_layer_transpose_axis(d.out[ax], d.k[ax], d.s[ax], d.dil[ax],
                                 a->padding == TFC_PADDING_SAME, op[ax], &d.in[ax], &d.pad[ax]);
        if (d.in[ax] < 1)
            return tfc_layer_error(err, l, "gives an empty output for the input %s",
                                   tfc_shape_str(in, buf, sizeof buf));
        numel *= d.in[ax];
    }
    if (numel > INT32_MAX)
        return tfc_layer_error(err, l, "output for the input %s is too large",
                               tfc_shape_str(in, buf, sizeof buf));
    transpose3d_state *s = calloc(1, sizeof *s);
    if (!s) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    s->d = d;
    l->state = s;
    l->out_shape = tfc_shape_make(4, (int64_t[]){d.in[0], d.in[1], d.in[2], d.c});
    l->act = (tfc_act)a->activation;
    tfc_init ki, bi;
    if (tfc_layer_init_arg(l, a->kernel_initializer, "kernel_initializer",
                           TFC_INIT_GLOROT_UNIFORM, &ki, err) ||
        tfc_layer_init_arg(l, a->bias_initializer, "bias_initializer", TFC_INIT_ZEROS, &bi, err))
        return TFC_ERR_CONFIG;
    tfc_layer_add_param(l, "kernel", 5, (int64_t[]){d.k[0], d.k[1], d.k[2], d.c, d.f}, 1, ki);
    if (a->use_bias) tfc_layer_add_param(l, "bias", 1, (int64_t[]){d.c}, 1, bi);
    return TFC_OK;
}

static tfc_conv3d_desc transpose3d_desc(const tfc_layer *l, int n)
{
    tfc_conv3d_desc d = ((const transpose3d_state *)l->state)->d;
    d.n = n;
    return d;
}

tfc_conv3d_desc tfc_layer_transposed_conv3d(const tfc_layer *l)
{
    return transpose3d_desc(l, 1);
}

static const char *const *transpose3d_needs(const tfc_layer *l)
{
    (void)l;
    static const char *const needs[] = {"conv3d_workspace", "conv3d_forward", "conv3d_backward",
                                        NULL};
    return needs;
}

/* D's scratch, then (backward, when dx is added to) room for dx's addend. */
static size_t conv_part(const tfc_layer *l, tfc_backend *be, int n)
{
    tfc_conv3d_desc d = transpose3d_desc(l, n);
    return (be->ops->conv3d_workspace(be, &d) + 63) & ~(size_t)63;
}

static void transpose3d_plan(tfc_layer *l, tfc_backend *be)
{
    l->workspace = conv_part(l, be, l->max_batch) +
                   (size_t)l->max_batch * (size_t)tfc_shape_numel(&l->in_shape[0]) * 4;
}

static void transpose3d_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const transpose3d_args *a = l->args;
    tfc_conv3d_desc d = transpose3d_desc(l, ex->batch);
    const tfc_backend_ops *op = ex->be->ops;
    op->conv3d_backward(ex->be, &d, NULL, l->params[0].data, x[0], y, NULL, 1, ex->ws);
    if (a->use_bias)
        op->bias_add(ex->be, (int64_t)d.n * d.in[0] * d.in[1] * d.in[2], d.c,
                     l->params[1].data, y);
}

static void transpose3d_backward(tfc_layer *l, tfc_exec *ex, const void *const *x,
                                 const float *y, const float *dy, float *const *dx)
{
    (void)y;
    const transpose3d_args *a = l->args;
    tfc_conv3d_desc d = transpose3d_desc(l, ex->batch);
    const tfc_backend_ops *op = ex->be->ops;
    if (a->use_bias)
        op->bias_grad(ex->be, (int64_t)d.n * d.in[0] * d.in[1] * d.in[2], d.c, dy,
                      l->params[1].grad);
    op->conv3d_backward(ex->be, &d, dy, l->params[0].data, x[0], NULL, l->params[0].grad, 0,
                        ex->ws);
    if (!dx[0]) return;
    /* conv3d_forward overwrites: straight into dx where its block starts here, else into
     * scratch past D's, then added */
    float *t = ex->fresh & 1 ? dx[0]
                             : (float *)((char *)ex->ws + conv_part(l, ex->be, l->max_batch));
    op->conv3d_forward(ex->be, &d, dy, l->params[0].data, NULL, t, ex->ws);
    if (t != dx[0])
        op->axpy(ex->be, (int64_t)ex->batch * tfc_shape_numel(&l->in_shape[0]), 1.f, t, dx[0]);
}

static void transpose3d_free(tfc_layer *l)
{
    free(l->state);
    l->state = NULL;
}

const tfc_layer_ops tfc_conv3d_transpose_ops = {
    .type = "Conv3DTranspose", .schema = transpose3d_fields,
    .args_size = sizeof(transpose3d_args), .min_inputs = 1, .max_inputs = 1,
    .assigns_grads = 1, .cpu_first = 1, .needs = transpose3d_needs,
    .build = transpose3d_build, .plan = transpose3d_plan, .forward = transpose3d_forward,
    .backward = transpose3d_backward, .free_state = transpose3d_free,
};
