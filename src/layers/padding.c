/* ZeroPadding2D and Cropping2D (keras.layers): rows and columns of zeros added around each
 * image, or cut from its borders. Amounts are Keras's forms: an int (all four sides), a pair
 * [rows, columns] (each side of that axis), or [[top, bottom], [left, right]] (an axis may
 * also be a pair while the other is an int).
 *   ZeroPadding2D: y[i + top, j + left] = x[i, j], zeros elsewhere;  dx += dy's interior
 *   Cropping2D:    y[i, j] = x[i + top, j + left];                   dx's interior += dy
 * ZeroPadding1D and Cropping1D do the same to sequences (steps, channels), seen as images
 * one row high: steps added or cut before and after (an int n: n each, or [before, after];
 * Keras's defaults 1 and (1, 1)); Keras's 1-D layers do not support masking, so the mask
 * stops there. They land CPU-first (cpu_first) until make test-gpu has run them.
 * All are row copies between an image and the window of the larger one (the backend's
 * copy2d), so they run on every backend. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"

typedef struct border_args {
    const tfc_node *amount;
    int data_format;
} border_args;

static const tfc_field zero_padding_fields[] = {
    {"padding", TFC_F_NODE, offsetof(border_args, amount), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "int, [rows, columns] or [[top, bottom], [left, right]]; default 1"},
    TFC_DATA_FORMAT_FIELD(border_args, data_format),
    {NULL}};

static const tfc_field cropping_fields[] = {
    {"cropping", TFC_F_NODE, offsetof(border_args, amount), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "int, [rows, columns] or [[top, bottom], [left, right]]; default 0"},
    TFC_DATA_FORMAT_FIELD(border_args, data_format),
    {NULL}};

static const tfc_field zero_padding1d_fields[] = {
    {"padding", TFC_F_NODE, offsetof(border_args, amount), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "steps before and after: an int n (n each) or [before, after]; default 1"},
    TFC_DATA_FORMAT_FIELD(border_args, data_format),
    {NULL}};

static const tfc_field cropping1d_fields[] = {
    {"cropping", TFC_F_NODE, offsetof(border_args, amount), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "steps cut before and after: an int n (n each) or [before, after]; default [1, 1]"},
    {NULL}};

extern const tfc_layer_ops tfc_zero_padding2d_ops, tfc_zero_padding1d_ops;

/* Whether l adds zeros (a ZeroPadding) rather than cutting (a Cropping) */
static int pads(const tfc_layer *l)
{
    return l->ops == &tfc_zero_padding2d_ops || l->ops == &tfc_zero_padding1d_ops;
}

/* The layer's state: top, bottom, left, right. */
typedef struct border {
    int side[4];
} border;

/* One axis of the amount: an int n (n, n) or a pair [a, b]. */
static tfc_status axis_amount(const tfc_layer *l, const tfc_node *n, const char *path, int *out,
                              tfc_error *err)
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

/* Parses the amount (NULL: def on every side) into side[4]. */
static tfc_status parse_amount(const tfc_layer *l, const tfc_node *n, int def, int side[4],
                               tfc_error *err)
{
    char path[128];
    const char *arg = pads(l) ? "padding" : "cropping";
    snprintf(path, sizeof path, "layers[%d].%s.%s", l->index, l->ops->type, arg);
    if (!n) {
        for (int k = 0; k < 4; k++) side[k] = def;
        return TFC_OK;
    }
    if (n->kind == TFC_NODE_SCALAR) {
        if (axis_amount(l, n, path, side, err)) return TFC_ERR_CONFIG;
        side[2] = side[3] = side[0];
        return TFC_OK;
    }
    if (n->kind != TFC_NODE_SEQ || n->n != 2) {
        char found[64];
        tfc_node_describe(n, found, sizeof found);
        return tfc_node_error(err, TFC_ERR_CONFIG, n, path,
                              "expected an int, [rows, columns] or [[top, bottom], [left, "
                              "right]], found %s", found);
    }
    if (axis_amount(l, n->vals[0], path, side, err) ||
        axis_amount(l, n->vals[1], path, side + 2, err))
        return TFC_ERR_CONFIG;
    return TFC_OK;
}

static tfc_status border_build(tfc_layer *l, tfc_error *err)
{
    const border_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    const int pad = pads(l);
    char buf[96];
    if (tfc_layer_need_image(l, err)) return TFC_ERR_CONFIG;
    border *b = calloc(1, sizeof *b);
    if (!b) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    l->state = b;
    if (parse_amount(l, a->amount, pad, b->side, err)) return TFC_ERR_CONFIG;
    const int sign = pad ? 1 : -1;
    int64_t h = in->dim[0] + sign * (b->side[0] + b->side[1]);
    int64_t w = in->dim[1] + sign * (b->side[2] + b->side[3]);
    if (h < 1 || w < 1)
        return tfc_layer_error(err, l, "cropping [[%d, %d], [%d, %d]] leaves nothing of the input "
                               "%s", b->side[0], b->side[1], b->side[2], b->side[3],
                               tfc_shape_str(in, buf, sizeof buf));
    l->out_shape = tfc_shape_make(3, (int64_t[]){h, w, in->dim[2]});
    return TFC_OK;
}

/* A sequence's: an image one row high, padded or cut at the left and right only */
static tfc_status border1d_build(tfc_layer *l, tfc_error *err)
{
    const border_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    const int pad = pads(l);
    char buf[96], path[128];
    if (l->in_dtype[0] != TFC_F32 || in->ndim != 2)
        return tfc_layer_error(err, l, "needs a float sequence of shape (steps, channels), got "
                                       "%s%s", tfc_shape_str(in, buf, sizeof buf),
                               l->in_dtype[0] != TFC_F32 ? " of token ids" : "");
    border *b = calloc(1, sizeof *b);
    if (!b) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    l->state = b;
    snprintf(path, sizeof path, "layers[%d].%s.%s", l->index, l->ops->type,
             pad ? "padding" : "cropping");
    b->side[2] = b->side[3] = 1; /* Keras's defaults: 1, (1, 1) */
    if (a->amount && !tfc_node_is_null(a->amount) &&
        axis_amount(l, a->amount, path, b->side + 2, err))
        return TFC_ERR_CONFIG;
    int64_t steps = in->dim[0] + (pad ? 1 : -1) * (b->side[2] + b->side[3]);
    if (steps < 1)
        return tfc_layer_error(err, l, "cropping [%d, %d] leaves no step of the %lld",
                               b->side[2], b->side[3], (long long)in->dim[0]);
    l->out_shape = tfc_shape_make(2, (int64_t[]){steps, in->dim[1]});
    return TFC_OK;
}

void tfc_layer_border(const tfc_layer *l, int side[4])
{
    memcpy(side, ((const border *)l->state)->side, sizeof(int[4]));
}

static void border_free(tfc_layer *l)
{
    free(l->state);
    l->state = NULL;
}

/* Copies between each image of the smaller tensor (the padding's input, the cropping's
 * output) and its window at (top, left) in the larger one: into the window with `in`, out of
 * it without; dst += src with accumulate. */
static void window_copy(const tfc_layer *l, tfc_exec *ex, const float *src, float *dst, int in,
                        int accumulate)
{
    const border *b = l->state;
    const int pad = pads(l);
    const tfc_shape *big = pad ? &l->out_shape : &l->in_shape[0];
    const tfc_shape *small = pad ? &l->in_shape[0] : &l->out_shape;
    const int seq = small->ndim == 2; /* (steps, channels): one row of steps */
    const int64_t rows = seq ? 1 : small->dim[0];
    const int c = (int)small->dim[seq ? 1 : 2];
    const int bw = (int)big->dim[seq ? 0 : 1] * c, sw = (int)small->dim[seq ? 0 : 1] * c;
    const int64_t big_img = tfc_shape_numel(big), small_img = tfc_shape_numel(small);
    const int64_t at = ((int64_t)b->side[0] * (seq ? 0 : big->dim[1]) + b->side[2]) * c;
    if (seq) { /* every example's row in one copy */
        if (in)
            ex->be->ops->copy2d(ex->be, ex->batch, sw, src, sw, dst + at, bw, accumulate);
        else
            ex->be->ops->copy2d(ex->be, ex->batch, sw, src + at, bw, dst, sw, accumulate);
        return;
    }
    for (int i = 0; i < ex->batch; i++) {
        if (in)
            ex->be->ops->copy2d(ex->be, rows, sw, src + i * small_img, sw,
                                dst + i * big_img + at, bw, accumulate);
        else
            ex->be->ops->copy2d(ex->be, rows, sw, src + i * big_img + at, bw,
                                dst + i * small_img, sw, accumulate);
    }
}

static void padding_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    ex->be->ops->zero(ex->be, y, (size_t)ex->batch * (size_t)tfc_layer_out_numel(l) * 4);
    window_copy(l, ex, x[0], y, 1, 0);
}

static void padding_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                             const float *dy, float *const *dx)
{
    if (dx[0]) window_copy(l, ex, dy, dx[0], 0, 1);
}

static void cropping_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    window_copy(l, ex, x[0], y, 0, 0);
}

static void cropping_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                              const float *dy, float *const *dx)
{
    if (dx[0]) window_copy(l, ex, dy, dx[0], 1, 1);
}

const tfc_layer_ops tfc_zero_padding2d_ops = {
    .type = "ZeroPadding2D", .schema = zero_padding_fields, .args_size = sizeof(border_args),
    .min_inputs = 1, .max_inputs = 1,
    .build = border_build, .forward = padding_forward, .backward = padding_backward,
    .free_state = border_free,
};

const tfc_layer_ops tfc_cropping2d_ops = {
    .type = "Cropping2D", .schema = cropping_fields, .args_size = sizeof(border_args),
    .min_inputs = 1, .max_inputs = 1,
    .build = border_build, .forward = cropping_forward, .backward = cropping_backward,
    .free_state = border_free,
};

const tfc_layer_ops tfc_zero_padding1d_ops = {
    .type = "ZeroPadding1D", .schema = zero_padding1d_fields, .args_size = sizeof(border_args),
    .min_inputs = 1, .max_inputs = 1, .cpu_first = 1,
    .build = border1d_build, .forward = padding_forward, .backward = padding_backward,
    .free_state = border_free,
};

const tfc_layer_ops tfc_cropping1d_ops = {
    .type = "Cropping1D", .schema = cropping1d_fields, .args_size = sizeof(border_args),
    .min_inputs = 1, .max_inputs = 1, .cpu_first = 1,
    .build = border1d_build, .forward = cropping_forward, .backward = cropping_backward,
    .free_state = border_free,
};
