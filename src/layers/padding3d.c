/* ZeroPadding3D and Cropping3D (keras.layers): zeros added around each volume (depth, height,
 * width, channels), or cut from its borders, along its three spatial axes. Amounts are
 * Keras's forms: an int (every side of every axis), three ints [d, h, w] (both sides of each
 * axis), or three pairs [[front, back], [top, bottom], [left, right]] (an axis may be an int
 * among pairs); Keras's default 1 on every side for both.
 *   ZeroPadding3D: y[d + front, i + top, j + left] = x[d, i, j], zeros elsewhere;
 *                  dx += dy's interior
 *   Cropping3D:    y[d, i, j] = x[d + front, i + top, j + left];  dx's interior += dy
 * Each depth slice of the smaller volume is a block of rows of (width x channels) floats
 * inside the larger one's slice: one copy2d per example and slice, which every backend has.
 * Keras's layers do not support masking: the mask stops here. CPU-first (cpu_first) until
 * make test-gpu has run them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"

typedef struct border3d_args {
    const tfc_node *amount;
    int data_format;
} border3d_args;

static const tfc_field zero_padding3d_fields[] = {
    {"padding", TFC_F_NODE, offsetof(border3d_args, amount), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "int, [depth, height, width] or [[front, back], [top, bottom], [left, right]]; "
     "default 1"},
    TFC_DATA_FORMAT_FIELD(border3d_args, data_format),
    {NULL}};

static const tfc_field cropping3d_fields[] = {
    {"cropping", TFC_F_NODE, offsetof(border3d_args, amount), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "int, [depth, height, width] or [[front, back], [top, bottom], [left, right]]; "
     "default 1"},
    TFC_DATA_FORMAT_FIELD(border3d_args, data_format),
    {NULL}};

extern const tfc_layer_ops tfc_zero_padding3d_ops;

/* The layer's state: front, back, top, bottom, left, right. */
typedef struct border3d {
    int side[6];
} border3d;

static int pads3d(const tfc_layer *l) { return l->ops == &tfc_zero_padding3d_ops; }

/* One axis of the amount: an int n (n, n) or a pair [a, b], each in [0, 2^20]. */
static tfc_status axis_amount3d(const tfc_node *n, const char *path, int *out, tfc_error *err)
{
    long long v[2];
    if (n->kind == TFC_NODE_SCALAR) {
        if (tfc_node_int(n, path, 0, 1 << 20, &v[0], err)) return TFC_ERR_CONFIG;
        v[1] = v[0];
    } else if (n->kind == TFC_NODE_SEQ && n->n == 2) {
        for (int k = 0; k < 2; k++)
            if (tfc_node_int(n->vals[k], path, 0, 1 << 20, &v[k], err)) return TFC_ERR_CONFIG;
    } else {
        char found[64];
        tfc_node_describe(n, found, sizeof found);
        return tfc_node_error(err, TFC_ERR_CONFIG, n, path,
                              "expected an int or a pair [before, after], found %s", found);
    }
    out[0] = (int)v[0], out[1] = (int)v[1];
    return TFC_OK;
}

/* Parses the amount (NULL or null: 1 on every side, Keras's default) into side[6]. */
static tfc_status parse_amount3d(const tfc_layer *l, const tfc_node *n, int side[6],
                                 tfc_error *err)
{
    char path[128];
    snprintf(path, sizeof path, "layers[%d].%s.%s", l->index, l->ops->type,
             pads3d(l) ? "padding" : "cropping");
    if (!n || tfc_node_is_null(n)) {
        for (int k = 0; k < 6; k++) side[k] = 1;
        return TFC_OK;
    }
    if (n->kind == TFC_NODE_SCALAR) {
        if (axis_amount3d(n, path, side, err)) return TFC_ERR_CONFIG;
        for (int k = 2; k < 6; k++) side[k] = side[0];
        return TFC_OK;
    }
    if (n->kind != TFC_NODE_SEQ || n->n != 3) {
        char found[64];
        tfc_node_describe(n, found, sizeof found);
        return tfc_node_error(err, TFC_ERR_CONFIG, n, path,
                              "expected an int, [depth, height, width] or [[front, back], "
                              "[top, bottom], [left, right]], found %s", found);
    }
    for (int k = 0; k < 3; k++)
        if (axis_amount3d(n->vals[k], path, side + 2 * k, err)) return TFC_ERR_CONFIG;
    return TFC_OK;
}

static tfc_status border3d_build(tfc_layer *l, tfc_error *err)
{
    const border3d_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    char buf[96];
    if (l->in_dtype[0] != TFC_F32 || in->ndim != 4)
        return tfc_layer_error(err, l, "needs a float volume of shape (depth, height, width, "
                               "channels), got %s%s", tfc_shape_str(in, buf, sizeof buf),
                               l->in_dtype[0] != TFC_F32 ? " of token ids" : "");
    border3d *b = calloc(1, sizeof *b);
    if (!b) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    l->state = b;
    if (parse_amount3d(l, a->amount, b->side, err)) return TFC_ERR_CONFIG;
    const int sign = pads3d(l) ? 1 : -1;
    int64_t out[4] = {0, 0, 0, in->dim[3]};
    for (int k = 0; k < 3; k++) {
        out[k] = in->dim[k] + sign * (b->side[2 * k] + b->side[2 * k + 1]);
        if (out[k] < 1)
            return tfc_layer_error(err, l, "cropping [[%d, %d], [%d, %d], [%d, %d]] leaves "
                                   "nothing of the input %s", b->side[0], b->side[1],
                                   b->side[2], b->side[3], b->side[4], b->side[5],
                                   tfc_shape_str(in, buf, sizeof buf));
    }
    l->out_shape = tfc_shape_make(4, out);
    return TFC_OK;
}

void tfc_layer_border3d(const tfc_layer *l, int side[6])
{
    memcpy(side, ((const border3d *)l->state)->side, sizeof(int[6]));
}

static void border3d_free(tfc_layer *l)
{
    free(l->state);
    l->state = NULL;
}

/* Copies between each depth slice of the smaller volume (the padding's input, the cropping's
 * output) and its window at (front, top, left) in the larger one: into the window with `in`,
 * out of it without; dst += src with accumulate. */
static void window_copy3d(const tfc_layer *l, tfc_exec *ex, const float *src, float *dst,
                          int in, int accumulate)
{
    const border3d *b = l->state;
    const int pad = pads3d(l);
    const tfc_shape *big = pad ? &l->out_shape : &l->in_shape[0];
    const tfc_shape *small = pad ? &l->in_shape[0] : &l->out_shape;
    const int64_t c = small->dim[3], rows = small->dim[1];
    const int bw = (int)(big->dim[2] * c), sw = (int)(small->dim[2] * c);
    const int64_t big_slice = big->dim[1] * bw, small_slice = rows * sw;
    const int64_t at = (int64_t)b->side[2] * bw + b->side[4] * c; /* in a big slice */
    for (int i = 0; i < ex->batch; i++)
        for (int64_t d = 0; d < small->dim[0]; d++) {
            const int64_t s_off = (i * small->dim[0] + d) * small_slice;
            const int64_t b_off = (i * big->dim[0] + d + b->side[0]) * big_slice + at;
            if (in)
                ex->be->ops->copy2d(ex->be, rows, sw, src + s_off, sw, dst + b_off, bw,
                                    accumulate);
            else
                ex->be->ops->copy2d(ex->be, rows, sw, src + b_off, bw, dst + s_off, sw,
                                    accumulate);
        }
}

static void padding3d_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    ex->be->ops->zero(ex->be, y, (size_t)ex->batch * (size_t)tfc_layer_out_numel(l) * 4);
    window_copy3d(l, ex, x[0], y, 1, 0);
}

static void padding3d_backward(tfc_layer *l, tfc_exec *ex, const void *const *x,
                               const float *y, const float *dy, float *const *dx)
{
    if (dx[0]) window_copy3d(l, ex, dy, dx[0], 0, 1);
}

static void cropping3d_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    window_copy3d(l, ex, x[0], y, 0, 0);
}

static void cropping3d_backward(tfc_layer *l, tfc_exec *ex, const void *const *x,
                                const float *y, const float *dy, float *const *dx)
{
    if (dx[0]) window_copy3d(l, ex, dy, dx[0], 1, 1);
}

const tfc_layer_ops tfc_zero_padding3d_ops = {
    .type = "ZeroPadding3D", .schema = zero_padding3d_fields,
    .args_size = sizeof(border3d_args), .min_inputs = 1, .max_inputs = 1, .cpu_first = 1,
    .build = border3d_build, .forward = padding3d_forward, .backward = padding3d_backward,
    .free_state = border3d_free,
};

const tfc_layer_ops tfc_cropping3d_ops = {
    .type = "Cropping3D", .schema = cropping3d_fields, .args_size = sizeof(border3d_args),
    .min_inputs = 1, .max_inputs = 1, .cpu_first = 1,
    .build = border3d_build, .forward = cropping3d_forward, .backward = cropping3d_backward,
    .free_state = border3d_free,
};
