/* Add, Subtract, Average, Concatenate, Multiply, Maximum and Minimum (keras.layers), the merge
 * layers that make residual, multi-branch and gated graphs; list their producers in `inputs:`.
 *   Add:         y = x_1 + ... + x_k (equal shapes);            dx_i += dy; masked only if
 *                every input is (Keras: an input without a mask drops it)
 *   Concatenate: y = [x_1, ..., x_k] along `axis` (other axes equal; counted as Keras counts
 *                it, the batch axis 0); dx_i += its slice of dy;
 *                under a sequence mask, along the steps (axis 1 of sequences) the output's
 *                mask is the inputs' masks joined, ones for an input without one; along
 *                another axis the output is masked only if every input is (Keras: a step
 *                is valid if it is in any input, an unmasked one making every step valid)
 *   Subtract:    y = x_1 - x_2 (two inputs of equal shapes);     dx_1 += dy, dx_2 -= dy
 *   Average:     y = (x_1 + ... + x_k) / k, the sum in order, then scaled; dx_i += dy / k
 *                (both: the mask as Add's; built on copy, axpy, add and scale, CPU-first)
 *   Multiply:    y = x_1 * ... * x_k element-wise;  dx_i += dy * prod_{j != i} x_j, summed
 *                over the broadcast axes for an input of one channel vector (1, ..., 1, C)
 *                broadcast over the others (squeeze-and-excitation's scale)
 *   Maximum, Minimum: y = op(...op(op(x_1, x_2), x_3)..., x_k) element-wise (equal shapes, as
 *                Keras folds them); dx_i += w_i dy, w_i the weight x_i has in y: each step of
 *                the fold gives it to the input strictly beyond the other and half to each at
 *                a tie (jnp.maximum's gradient, Keras on JAX; TensorFlow's gives a tie to the
 *                first: equal branches with different weights differ). The output's mask as
 *                Add's; under a mask a padding step follows Keras's Merge (core/backend.h,
 *                tfc_extremum_desc): y = x_1 there where every input carries the mask.
 *                On the new extremum op pair (cpu_extremum.c, gpu_extremum.cu).
 * Concatenation along an example's axis a (Keras's a + 1) is a strided 2-D copy:
 * rows = batch * prod(dims before a),
 * each input contributing prod(dims from a) columns. */
#include "layers/layer.h"

typedef struct concat_args {
    int axis;
} concat_args;

static const tfc_field add_fields[] = {{NULL}};
static const tfc_field concat_fields[] = {
    {"axis", TFC_F_INT, offsetof(concat_args, axis), "-1", TFC_UNBOUNDED, NULL,
     "the axis to join along, counted as Keras counts it (the batch axis is 0; -1 = last)"},
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
    /* Keras (Merge.compute_mask): no mask when any input has none, else their union, here
     * the model's one sequence mask */
    l->mask_out = l->mask_inputs == (1u << l->ninputs) - 1;
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

static void subtract_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    int64_t n = (int64_t)ex->batch * tfc_layer_out_numel(l);
    ex->be->ops->copy(ex->be, y, x[0], (size_t)n * 4);
    ex->be->ops->axpy(ex->be, n, -1.f, x[1], y); /* y + (-x_2): the difference, one rounding */
}

static void subtract_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                              const float *dy, float *const *dx)
{
    int64_t n = (int64_t)ex->batch * tfc_layer_out_numel(l);
    for (int i = 0; i < 2; i++)
        if (dx[i]) ex->be->ops->axpy(ex->be, n, i ? -1.f : 1.f, dy, dx[i]);
}

/* Keras's Average adds in order, then divides by k; here a product by 1/k, the same value
 * for k = 2 and 4 and within half an ulp of it otherwise */
static void average_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    int64_t n = (int64_t)ex->batch * tfc_layer_out_numel(l);
    add_run(l, ex, x, TFC_ACT_LINEAR, y);
    ex->be->ops->scale(ex->be, n, 1.0f / (float)l->ninputs, y);
}

static void average_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                             const float *dy, float *const *dx)
{
    int64_t n = (int64_t)ex->batch * tfc_layer_out_numel(l);
    for (int i = 0; i < l->ninputs; i++)
        if (dx[i]) ex->be->ops->axpy(ex->be, n, 1.0f / (float)l->ninputs, dy, dx[i]);
}

const tfc_layer_ops tfc_subtract_ops = {
    .type = "Subtract", .schema = add_fields, .args_size = 0, .min_inputs = 2,
    .max_inputs = 2, .keeps_mask = 1, .cpu_first = 1, .build = add_build,
    .forward = subtract_forward, .backward = subtract_backward,
};

const tfc_layer_ops tfc_average_ops = {
    .type = "Average", .schema = add_fields, .args_size = 0, .min_inputs = 2,
    .max_inputs = TFC_LAYER_MAX_INPUTS, .keeps_mask = 1, .cpu_first = 1, .build = add_build,
    .forward = average_forward, .backward = average_backward,
};

/* The joined axis of one example: Keras's `axis` counts the batch axis as 0. */
static int concat_axis(const tfc_layer *l)
{
    const concat_args *a = l->args;
    return a->axis < 0 ? l->in_shape[0].ndim + a->axis : a->axis - 1;
}

static tfc_status concat_build(tfc_layer *l, tfc_error *err)
{
    const concat_args *a = l->args;
    int nd = l->in_shape[0].ndim, ax = concat_axis(l);
    char b1[96], b2[96];
    if (a->axis == 0)
        return tfc_layer_error(err, l, "axis 0 is the batch axis, which cannot be joined: an "
                               "example's axes are 1 to %d (-1 the last), as Keras counts them",
                               nd);
    if (ax < 0 || ax >= nd)
        return tfc_layer_error(err, l, "axis %d is outside the inputs' axes: the batch axis 0 "
                               "and an example's 1 to %d (-%d to -1 from the last), as Keras "
                               "counts them", a->axis, nd, nd);
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
    /* Keras: along the steps of sequences the masks are joined too (ones for an input
     * without one); along another axis a step is valid if any input's is (ones for an input
     * without one): masked only if every input is, and then by the one mask they carry */
    l->joins_mask = l->mask_in && ax == 0 && nd >= 2;
    if (!l->joins_mask) l->mask_out = l->mask_inputs == (1u << l->ninputs) - 1;
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

/* Multiply: the output's shape is that of its first input of the most elements; every input
 * has it ("full") or is one channel vector (C), (1, C), (1, 1, C), ... (Keras broadcasts
 * lower ranks by adding axes of 1 after the batch axis). */
static const tfc_shape *mul_shape(const tfc_layer *l)
{
    int f = 0;
    for (int i = 1; i < l->ninputs; i++)
        if (tfc_shape_numel(&l->in_shape[i]) > tfc_shape_numel(&l->in_shape[f])) f = i;
    return &l->in_shape[f];
}

static int mul_full(const tfc_layer *l, int i)
{
    return tfc_shape_equal(&l->in_shape[i], &l->out_shape);
}

static tfc_status mul_build(tfc_layer *l, tfc_error *err)
{
    char b1[96], b2[96];
    if (l->mask_in)
        return tfc_layer_error(err, l, "masked inputs are not supported (Keras multiplies "
                               "masked steps by 1)");
    l->out_shape = *mul_shape(l);
    const int64_t c = l->out_shape.dim[l->out_shape.ndim - 1];
    for (int i = 0; i < l->ninputs; i++) {
        const tfc_shape *s = &l->in_shape[i];
        int vec = s->ndim <= l->out_shape.ndim && s->dim[s->ndim - 1] == c &&
                  tfc_shape_numel(s) == c;
        if (!mul_full(l, i) && !vec)
            return tfc_layer_error(err, l, "input %d is %s: each input must have the shape %s or "
                                   "be one channel vector (1, ..., 1, %lld) broadcast over it", i,
                                   tfc_shape_str(s, b1, sizeof b1),
                                   tfc_shape_str(&l->out_shape, b2, sizeof b2), (long long)c);
    }
    return TFC_OK;
}

static void mul_plan(tfc_layer *l, tfc_backend *be)
{
    l->workspace = l->ninputs > 2 ? (size_t)l->max_batch * (size_t)tfc_layer_out_numel(l) * 4 : 0;
}

/* The output as groups (examples) of rows of C channels. */
static void mul_dims(const tfc_layer *l, int64_t *rows, int *cols)
{
    *cols = (int)l->out_shape.dim[l->out_shape.ndim - 1];
    *rows = tfc_layer_out_numel(l) / *cols;
}

static void mul_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    int64_t rows;
    int cols;
    mul_dims(l, &rows, &cols);
    int f = 0;
    while (!mul_full(l, f)) f++;
    const float *a = x[f];
    for (int i = 0; i < l->ninputs; i++) {
        if (i == f) continue;
        ex->be->ops->mul(ex->be, ex->batch, rows, cols, a, x[i], !mul_full(l, i), y, 0);
        a = y;
    }
}

/* dx_i += dy * prod_{j != i} x_j: the product of dy with all other inputs but one, x_s (a
 * full one where there is one), in the workspace (dy itself for two inputs), then times x_s
 * into dx_i, or for a broadcast x_i summed over each example's rows. */
static void mul_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                         const float *dy, float *const *dx)
{
    int64_t rows;
    int cols;
    mul_dims(l, &rows, &cols);
    const tfc_backend_ops *op = ex->be->ops;
    for (int i = 0; i < l->ninputs; i++) {
        if (!dx[i]) continue;
        int s = -1;
        for (int j = 0; j < l->ninputs; j++)
            if (j != i && (s < 0 || (!mul_full(l, s) && mul_full(l, j)))) s = j;
        const float *p = dy;
        for (int j = 0; j < l->ninputs; j++) {
            if (j == i || j == s) continue;
            op->mul(ex->be, ex->batch, rows, cols, p, x[j], !mul_full(l, j), ex->ws, 0);
            p = ex->ws;
        }
        if (mul_full(l, i))
            op->mul(ex->be, ex->batch, rows, cols, p, x[s], !mul_full(l, s), dx[i], 1);
        else
            op->mul_reduce(ex->be, ex->batch, rows, cols, p, x[s], dx[i]);
    }
}

static const char *const *mul_needs(const tfc_layer *l)
{
    static const char *const ops[] = {"mul", "mul_reduce", NULL};
    return ops;
}

const tfc_layer_ops tfc_multiply_ops = {
    .type = "Multiply", .schema = add_fields, .args_size = 0,
    .min_inputs = 2, .max_inputs = TFC_LAYER_MAX_INPUTS,
    .build = mul_build, .plan = mul_plan, .forward = mul_forward, .backward = mul_backward,
    .needs = mul_needs,
};

/* Maximum, Minimum: the extremum ops over rows of the mask's steps (one row per example
 * without a mask). */
static tfc_extremum_desc extremum_desc(const tfc_layer *l, int batch)
{
    const int64_t steps = l->mask ? l->out_shape.dim[0] : 1;
    return (tfc_extremum_desc){.rows = batch * steps,
                               .cols = (int)(tfc_layer_out_numel(l) / steps),
                               .k = l->ninputs, .minimum = l->ops->type[1] == 'i',
                               .masked = l->mask ? l->mask_inputs : 0u};
}

static void extremum_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    tfc_extremum_desc d = extremum_desc(l, ex->batch);
    ex->be->ops->extremum_forward(ex->be, &d, (const float *const *)x, l->mask, y);
}

static void extremum_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                              const float *dy, float *const *dx)
{
    tfc_extremum_desc d = extremum_desc(l, ex->batch);
    ex->be->ops->extremum_backward(ex->be, &d, (const float *const *)x, l->mask, dy, dx);
}

static const char *const *extremum_needs(const tfc_layer *l)
{
    static const char *const ops[] = {"extremum_forward", "extremum_backward", NULL};
    return ops;
}

const tfc_layer_ops tfc_maximum_ops = {
    .type = "Maximum", .schema = add_fields, .args_size = 0, .min_inputs = 2,
    .max_inputs = TFC_LAYER_MAX_INPUTS, .keeps_mask = 1, .build = add_build,
    .forward = extremum_forward, .backward = extremum_backward, .needs = extremum_needs,
};

const tfc_layer_ops tfc_minimum_ops = {
    .type = "Minimum", .schema = add_fields, .args_size = 0, .min_inputs = 2,
    .max_inputs = TFC_LAYER_MAX_INPUTS, .keeps_mask = 1, .build = add_build,
    .forward = extremum_forward, .backward = extremum_backward, .needs = extremum_needs,
};
