/* RepeatVector (keras.layers.RepeatVector(n)): a vector of features repeated n times,
 * (features) -> (n, features), as Keras's ops.repeat along a new axis 1.
 *   forward:  y[r, f] = x[f], one strided copy of the batch per repetition
 *   backward: dx[f] += sum_r dy[r, f], the repetitions added in order
 * The mask stops here (Keras's layer has no mask support). Built on copy2d, which every
 * backend has; it lands CPU-first (cpu_first) until make test-gpu has run it. */
#include "layers/layer.h"

typedef struct repeat_args {
    int n;
} repeat_args;

static const tfc_field repeat_fields[] = {
    {"n", TFC_F_INT, offsetof(repeat_args, n), NULL, 1, 1 << 20, NULL,
     "repetition factor: (features) -> (n, features)"},
    {NULL}};

static tfc_status repeat_build(tfc_layer *l, tfc_error *err)
{
    const repeat_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    if (in->ndim != 1)
        return tfc_layer_error(err, l, "takes a vector of features per example (Keras's 2-D "
                               "input), not %d axes: Flatten first", in->ndim);
    l->out_shape = tfc_shape_make(2, (int64_t[]){a->n, in->dim[0]});
    return TFC_OK;
}

static void repeat_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const repeat_args *a = l->args;
    const int f = (int)l->in_shape[0].dim[0];
    for (int r = 0; r < a->n; r++)
        ex->be->ops->copy2d(ex->be, ex->batch, f, x[0], f, y + (size_t)r * f, a->n * f, 0);
}

static void repeat_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                            const float *dy, float *const *dx)
{
    const repeat_args *a = l->args;
    const int f = (int)l->in_shape[0].dim[0];
    if (!dx[0]) return;
    /* where dx's block starts here (ex->fresh), the first repetition is written */
    for (int r = 0; r < a->n; r++)
        ex->be->ops->copy2d(ex->be, ex->batch, f, dy + (size_t)r * f, a->n * f, dx[0], f,
                            r > 0 || !(ex->fresh & 1));
}

const tfc_layer_ops tfc_repeat_vector_ops = {
    .type = "RepeatVector", .schema = repeat_fields, .args_size = sizeof(repeat_args),
    .min_inputs = 1, .max_inputs = 1, .assigns_grads = 1, .cpu_first = 1,
    .build = repeat_build, .forward = repeat_forward, .backward = repeat_backward,
};
