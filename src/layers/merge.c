/* Add and Concatenate (keras.layers), the merge layers that make residual and multi-branch
 * graphs; list their producers in `inputs:`.
 *   Add:         y = x_1 + ... + x_k (equal shapes);            dx_i += dy
 *   Concatenate: y = [x_1, ..., x_k] along `axis` (other axes equal); dx_i += its slice of dy
 * Concatenation along axis a is a strided 2-D copy: rows = batch * prod(dims before a),
 * each input contributing prod(dims from a) columns. */
#include "layers/layer.h"

typedef struct concat_args {
    int axis;
} concat_args;

static const tfc_field add_fields[] = {{NULL}};
static const tfc_field concat_fields[] = {
    {"axis", TFC_F_INT, offsetof(concat_args, axis), "-1", TFC_UNBOUNDED, NULL,
     "the axis to join along (of one example; -1 = last)"},
    {NULL}};

static tfc_status add_build(tfc_layer *l, tfc_error *err)
{
    char b1[96], b2[96];
    for (int i = 1; i < l->ninputs; i++)
        if (!tfc_shape_equal(&l->in_shape[i], &l->in_shape[0]))
            return tfc_layer_error(err, l, "inputs must have equal shapes: input 0 is %s, input %d "
                                   "is %s", tfc_shape_str(&l->in_shape[0], b1, sizeof b1), i,
                                   tfc_shape_str(&l->in_shape[i], b2, sizeof b2));
    l->out_shape = l->in_shape[0];
    return TFC_OK;
}

/* y = act(x[0] + x[1] + ...): the first two in one pass, each further one added */
static void add_run(tfc_layer *l, tfc_exec *ex, const void *const *x, tfc_act act, float *y)
{
    int64_t n = (int64_t)ex->batch * tfc_layer_out_numel(l);
    const int last = l->ninputs - 1;
    ex->be->ops->add(ex->be, n, x[0], x[1], last == 1 ? act : TFC_ACT_LINEAR, y);
    for (int i = 2; i <= last; i++) {
        if (i < last || act == TFC_ACT_LINEAR) ex->be->ops->axpy(ex->be, n, 1.f, x[i], y);
        else ex->be->ops->add(ex->be, n, y, x[i], act, y);
    }
}

static void add_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    add_run(l, ex, x, TFC_ACT_LINEAR, y);
}

/* training, with the ReLU after it (graph.c); backward reads neither x nor y */
static void add_forward_relu(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    add_run(l, ex, x, TFC_ACT_RELU, y);
}

static void add_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                         const float *dy, float *const *dx)
{
    int64_t n = (int64_t)ex->batch * tfc_layer_out_numel(l);
    for (int i = 0; i < l->ninputs; i++)
        if (dx[i]) ex->be->ops->axpy(ex->be, n, 1.f, dy, dx[i]);
}

static int concat_axis(const tfc_layer *l)
{
    const concat_args *a = l->args;
    return a->axis < 0 ? l->in_shape[0].ndim + a->axis : a->axis;
}

static tfc_status concat_build(tfc_layer *l, tfc_error *err)
{
    const concat_args *a = l->args;
    int nd = l->in_shape[0].ndim, ax = concat_axis(l);
    char b1[96], b2[96];
    if (ax < 0 || ax >= nd)
        return tfc_layer_error(err, l, "axis %d is outside the %d axes of one example (the batch "
                               "axis cannot be joined)", a->axis, nd);
    l->out_shape = l->in_shape[0];
    for (int i = 1; i < l->ninputs; i++) {
        const tfc_shape *s = &l->in_shape[i];
        int ok = s->ndim == nd;
        for (int d = 0; ok && d < nd; d++) ok = d == ax || s->dim[d] == l->in_shape[0].dim[d];
        if (!ok)
            return tfc_layer_error(err, l, "inputs must match except on axis %d: input 0 is %s, "
                                   "input %d is %s", a->axis,
                                   tfc_shape_str(&l->in_shape[0], b1, sizeof b1), i,
                                   tfc_shape_str(s, b2, sizeof b2));
        l->out_shape.dim[ax] += s->dim[ax];
    }
    return TFC_OK;
}

/* rows of the 2-D view and each input's columns. */
static int64_t concat_rows(const tfc_layer *l, int batch)
{
    int64_t rows = batch;
    for (int d = 0; d < concat_axis(l); d++) rows *= l->in_shape[0].dim[d];
    return rows;
}

static int concat_cols(const tfc_shape *s, int ax)
{
    int64_t c = 1;
    for (int d = ax; d < s->ndim; d++) c *= s->dim[d];
    return (int)c;
}

static void concat_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    int ax = concat_axis(l), total = concat_cols(&l->out_shape, ax), off = 0;
    int64_t rows = concat_rows(l, ex->batch);
    for (int i = 0; i < l->ninputs; i++) {
        int cols = concat_cols(&l->in_shape[i], ax);
        ex->be->ops->copy2d(ex->be, rows, cols, x[i], cols, y + off, total, 0);
        off += cols;
    }
}

static void concat_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                            const float *dy, float *const *dx)
{
    int ax = concat_axis(l), total = concat_cols(&l->out_shape, ax), off = 0;
    int64_t rows = concat_rows(l, ex->batch);
    for (int i = 0; i < l->ninputs; i++) {
        int cols = concat_cols(&l->in_shape[i], ax);
        if (dx[i]) ex->be->ops->copy2d(ex->be, rows, cols, dy + off, total, dx[i], cols, 1);
        off += cols;
    }
}

const tfc_layer_ops tfc_add_ops = {
    .type = "Add", .schema = add_fields, .args_size = 0,
    .min_inputs = 2, .max_inputs = TFC_LAYER_MAX_INPUTS, .keeps_mask = 1, .sums_inputs = 1,
    .build = add_build, .forward = add_forward, .forward_relu = add_forward_relu,
    .backward = add_backward,
};

const tfc_layer_ops tfc_concatenate_ops = {
    .type = "Concatenate", .schema = concat_fields, .args_size = sizeof(concat_args),
    .min_inputs = 2, .max_inputs = TFC_LAYER_MAX_INPUTS, .keeps_mask = 1,
    .build = concat_build, .forward = concat_forward, .backward = concat_backward,
};
