/* Keras's 1-D reshaping layers on sequences (steps, channels): ZeroPadding1D, Cropping1D
 * and UpSampling1D (keras.layers), the pieces of 1-D U-Nets and of WaveNet-like stacks.
 *   ZeroPadding1D(padding=1):   `a` zero steps before, `b` after (an int n: n and n)
 *   Cropping1D(cropping=(1, 1)): `a` steps cut before, `b` after
 *   UpSampling1D(size=2):        each step repeated `size` times (Keras's ops.repeat)
 * Each example's steps are contiguous, so padding and cropping are one strided copy of the
 * whole batch (copy2d: a row per example), and upsampling is the nearest-neighbour upsample
 * op of an image one row high. Backward: the same copies into dx, added; the upsample op's
 * gradient. No weights. Keras's layers do not support masking: a masked input's mask stops
 * here, as at the other reshaping layers. Built on ops every backend has, they land
 * CPU-first (cpu_first) until make test-gpu has run them. */
#include <string.h>

#include "layers/layer.h"

typedef struct border1d_args {
    const tfc_node *amount; /* padding or cropping */
    int data_format;
    int side[2];            /* set by build: before, after */
} border1d_args;

static const tfc_field zero_padding1d_fields[] = {
    {"padding", TFC_F_NODE, offsetof(border1d_args, amount), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "zero steps before and after: an int n (n each), or [before, after]; default 1"},
    TFC_DATA_FORMAT_FIELD(border1d_args, data_format),
    {NULL}};

static const tfc_field cropping1d_fields[] = {
    {"cropping", TFC_F_NODE, offsetof(border1d_args, amount), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "steps cut before and after: an int n (n each), or [before, after]; default "
           "[1, 1]"},
    {NULL}};

/* The input must be a sequence (steps, channels). */
static tfc_status need_sequence(const tfc_layer *l, tfc_error *err)
{
    char buf[96];
    if (l->in_dtype[0] != TFC_F32 || l->in_shape[0].ndim != 2)
        return tfc_layer_error(err, l, "needs a float sequence of shape (steps, channels), got "
                                       "%s%s", tfc_shape_str(&l->in_shape[0], buf, sizeof buf),
                               l->in_dtype[0] != TFC_F32 ? " of token ids" : "");
    return TFC_OK;
}

static tfc_status border1d_build(tfc_layer *l, tfc_error *err)
{
    border1d_args *a = l->args;
    const int pad = !strcmp(l->ops->type, "ZeroPadding1D");
    const char *arg = pad ? "padding" : "cropping";
    if (need_sequence(l, err)) return TFC_ERR_CONFIG;
    char path[128];
    snprintf(path, sizeof path, "layers[%d].%s.%s", l->index, l->ops->type, arg);
    const tfc_node *n = a->amount;
    long long v[2] = {1, 1};
    if (n && !tfc_node_is_null(n)) {
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
    }
    a->side[0] = (int)v[0], a->side[1] = (int)v[1];
    const tfc_shape *in = &l->in_shape[0];
    const int64_t steps = in->dim[0] + (pad ? 1 : -1) * (v[0] + v[1]);
    if (steps < 1)
        return tfc_layer_error(err, l, "cropping [%lld, %lld] leaves no step of the %lld",
                               v[0], v[1], (long long)in->dim[0]);
    l->out_shape = tfc_shape_make(2, (int64_t[]){steps, in->dim[1]});
    l->mask_out = 0;
    return TFC_OK;
}

/* Between each example of the shorter tensor (the padding's input, the cropping's output)
 * and its window `before` steps into the longer one: into the window with `in`, out of it
 * without; dst += src with accumulate. */
static void window1d(const tfc_layer *l, tfc_exec *ex, const float *src, float *dst, int in,
                     int accumulate)
{
    const border1d_args *a = l->args;
    const int pad = !strcmp(l->ops->type, "ZeroPadding1D");
    const tfc_shape *big = pad ? &l->out_shape : &l->in_shape[0];
    const tfc_shape *small = pad ? &l->in_shape[0] : &l->out_shape;
    const int bn = (int)tfc_shape_numel(big), sn = (int)tfc_shape_numel(small);
    const int64_t at = (int64_t)a->side[0] * small->dim[1];
    if (in)
        ex->be->ops->copy2d(ex->be, ex->batch, sn, src, sn, dst + at, bn, accumulate);
    else
        ex->be->ops->copy2d(ex->be, ex->batch, sn, src + at, bn, dst, sn, accumulate);
}

static void padding1d_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    ex->be->ops->zero(ex->be, y, (size_t)ex->batch * (size_t)tfc_layer_out_numel(l) * 4);
    window1d(l, ex, x[0], y, 1, 0);
}

static void padding1d_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                               const float *dy, float *const *dx)
{
    if (dx[0]) window1d(l, ex, dy, dx[0], 0, 1);
}

static void cropping1d_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    window1d(l, ex, x[0], y, 0, 0);
}

static void cropping1d_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                                const float *dy, float *const *dx)
{
    if (dx[0]) window1d(l, ex, dy, dx[0], 1, 1);
}

void tfc_layer_border1d(const tfc_layer *l, int side[2])
{
    const border1d_args *a = l->args;
    side[0] = a->side[0], side[1] = a->side[1];
}

const tfc_layer_ops tfc_zero_padding1d_ops = {
    .type = "ZeroPadding1D", .schema = zero_padding1d_fields,
    .args_size = sizeof(border1d_args), .min_inputs = 1, .max_inputs = 1, .cpu_first = 1,
    .build = border1d_build, .forward = padding1d_forward, .backward = padding1d_backward,
};

const tfc_layer_ops tfc_cropping1d_ops = {
    .type = "Cropping1D", .schema = cropping1d_fields, .args_size = sizeof(border1d_args),
    .min_inputs = 1, .max_inputs = 1, .cpu_first = 1,
    .build = border1d_build, .forward = cropping1d_forward, .backward = cropping1d_backward,
};

/* ---- UpSampling1D ------------------------------------------------------------------------- */

typedef struct upsampling1d_args {
    int size;
} upsampling1d_args;

static const tfc_field upsampling1d_fields[] = {
    {"size", TFC_F_INT, offsetof(upsampling1d_args, size), "2", 1, 4096, NULL,
     "how many times each step is repeated"},
    {NULL}};

static tfc_status upsampling1d_build(tfc_layer *l, tfc_error *err)
{
    const upsampling1d_args *a = l->args;
    if (need_sequence(l, err)) return TFC_ERR_CONFIG;
    const tfc_shape *in = &l->in_shape[0];
    l->out_shape = tfc_shape_make(2, (int64_t[]){in->dim[0] * a->size, in->dim[1]});
    l->mask_out = 0;
    return TFC_OK;
}

/* a sequence as an image one row high, upsampled along its width */
static tfc_resize_desc upsampling1d_desc(const tfc_layer *l, int n)
{
    const upsampling1d_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    return (tfc_resize_desc){.n = n, .h = 1, .w = (int)in->dim[0], .c = (int)in->dim[1],
                             .sh = 1, .sw = a->size, .bilinear = 0};
}

static void upsampling1d_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    tfc_resize_desc d = upsampling1d_desc(l, ex->batch);
    ex->be->ops->upsample_forward(ex->be, &d, x[0], y);
}

static void upsampling1d_backward(tfc_layer *l, tfc_exec *ex, const void *const *x,
                                  const float *y, const float *dy, float *const *dx)
{
    tfc_resize_desc d = upsampling1d_desc(l, ex->batch);
    if (dx[0]) ex->be->ops->upsample_backward(ex->be, &d, dy, dx[0]);
}

const tfc_layer_ops tfc_up_sampling1d_ops = {
    .type = "UpSampling1D", .schema = upsampling1d_fields,
    .args_size = sizeof(upsampling1d_args), .min_inputs = 1, .max_inputs = 1, .cpu_first = 1,
    .build = upsampling1d_build, .forward = upsampling1d_forward,
    .backward = upsampling1d_backward,
};
