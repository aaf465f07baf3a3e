/* The identity layers:
 *   Identity (keras.layers.Identity())                     y = x
 *   ActivityRegularization (keras.layers.ActivityRegularization(l1=0.0, l2=0.0))
 *                                                          y = x, and the output's penalty
 *       l1 sum |y| + l2 sum y^2 over the batch size joins every loss (the graph's activity
 *       regularizers, as any layer's activity_regularizer; its gradient is added to dy
 *       before this layer's backward passes dy on)
 * Both keep the mask and are free at inference (copies_at_inference). Identity runs on ops
 * every backend has; it lands CPU-first (cpu_first) until make test-gpu has run it. */
#include <math.h>

#include "layers/layer.h"

typedef struct activity_args {
    double l1, l2;
} activity_args;

static const tfc_field activity_fields[] = {
    {"l1", TFC_F_FLOAT, offsetof(activity_args, l1), "0.0", 0, HUGE_VAL, NULL,
     "factor of the output's L1 penalty"},
    {"l2", TFC_F_FLOAT, offsetof(activity_args, l2), "0.0", 0, HUGE_VAL, NULL,
     "factor of the output's L2 penalty"},
    {NULL}};

static const tfc_field identity_fields[] = {{NULL}};

static tfc_status identity_build(tfc_layer *l, tfc_error *err)
{
    l->out_shape = l->in_shape[0];
    return TFC_OK;
}

static tfc_status activity_build(tfc_layer *l, tfc_error *err)
{
    const activity_args *a = l->args;
    l->out_shape = l->in_shape[0];
    l->activity_l1 = (float)a->l1;
    l->activity_l2 = (float)a->l2;
    return TFC_OK;
}

static void identity_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    ex->be->ops->copy(ex->be, y, x[0], (size_t)ex->batch * (size_t)tfc_layer_out_numel(l) * 4);
}

static void identity_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                              const float *dy, float *const *dx)
{
    const int64_t n = (int64_t)ex->batch * tfc_layer_out_numel(l);
    if (!dx[0]) return;
    if (ex->fresh & 1) /* dx's block starts here: written */
        ex->be->ops->copy(ex->be, dx[0], dy, (size_t)n * 4);
    else
        ex->be->ops->axpy(ex->be, n, 1.f, dy, dx[0]);
}

#define IDENTITY_OPS                                                                          \
    .min_inputs = 1, .max_inputs = 1, .keeps_mask = 1, .copies_at_inference = 1,               \
    .assigns_grads = 1, .forward = identity_forward, .backward = identity_backward

const tfc_layer_ops tfc_identity_ops = {
    .type = "Identity", .schema = identity_fields, .build = identity_build, .cpu_first = 1,
    IDENTITY_OPS,
};

const tfc_layer_ops tfc_activity_regularization_ops = {
    .type = "ActivityRegularization", .schema = activity_fields,
    .args_size = sizeof(activity_args), .build = activity_build, IDENTITY_OPS,
};
