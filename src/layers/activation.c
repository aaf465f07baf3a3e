/* Activation (keras.layers.Activation): y = act(x). The layer itself is the identity; its
 * activation is applied by the graph like any layer's fused `activation:`, so a final
 * Activation(softmax) folds into the cross-entropy exactly as a Dense(softmax) does. */
#include "layers/layer.h"

typedef struct activation_args {
    int activation;
} activation_args;

static const tfc_field activation_fields[] = {
    {"activation", TFC_F_ENUM, offsetof(activation_args, activation), NULL, TFC_UNBOUNDED,
     tfc_act_names, "the activation"},
    {NULL}};

static tfc_status activation_build(tfc_layer *l, tfc_error *err)
{
    const activation_args *a = l->args;
    l->out_shape = l->in_shape[0];
    l->act = (tfc_act)a->activation;
    return TFC_OK;
}

static void activation_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    ex->be->ops->copy(ex->be, y, x[0], (size_t)ex->batch * (size_t)tfc_layer_out_numel(l) * 4);
}

/* y = act(x) in one pass, where forward and the graph's activation take two (a copy
 * first): at inference, and in training for ReLU (graph.c) */
static void activation_forward_act(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const int cols = (int)l->out_shape.dim[l->out_shape.ndim - 1];
    ex->be->ops->act_forward(ex->be, l->act, (int64_t)ex->batch * tfc_layer_out_numel(l), cols,
                             x[0], y);
}

static void activation_backward(tfc_layer *l, tfc_exec *ex, const void *const *x,
                                const float *y, const float *dy, float *const *dx)
{
    if (dx[0]) ex->be->ops->axpy(ex->be, (int64_t)ex->batch * tfc_layer_out_numel(l), 1.f, dy, dx[0]);
}

const tfc_layer_ops tfc_activation_ops = {
    .type = "Activation", .schema = activation_fields, .args_size = sizeof(activation_args),
    .min_inputs = 1, .max_inputs = 1, .keeps_mask = 1, .pure_act = 1,
    .build = activation_build, .forward = activation_forward,
    .forward_act = activation_forward_act, .backward = activation_backward,
};
