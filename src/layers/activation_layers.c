/* Keras's activation layers (keras.layers.ReLU, LeakyReLU, ELU, Softmax and PReLU), each with
 * its constructor's arguments and defaults:
 *   ReLU(max_value=None, negative_slope=0.0, threshold=0.0)   keras.activations.relu
 *   LeakyReLU(negative_slope=0.3)                             keras.activations.leaky_relu
 *   ELU(alpha=1.0)                                            keras.activations.elu
 *   Softmax(axis=-1)                                          over the last axis
 *   PReLU(alpha_initializer=zeros, shared_axes=None)          y = x > 0 ? x : alpha x
 * Where the arguments give one of tfc's activations (ReLU(), ReLU(max_value: 6), ELU(),
 * LeakyReLU(negative_slope: 0.2), Softmax) the layer is that Activation layer (pure_act), so
 * the graph fuses it as it fuses Activation and every backend runs it. Other arguments run
 * the backends' pact ops (TFC_BACKEND_LAYER_OPS: the CPU's for now), as PReLU runs the prelu
 * ops; its alpha [input shape with the shared axes at 1] is the layer's one weight. */
#include <math.h>

#include "layers/layer.h"

typedef struct pact_args {
    const tfc_node *max_value;  /* ReLU: null (none) or a number >= 0 */
    double negative_slope;      /* ReLU, LeakyReLU */
    double threshold;           /* ReLU */
    const tfc_node *old_alpha;  /* LeakyReLU: Keras 2's name of negative_slope */
    double alpha;               /* ELU */
    tfc_pact_desc d;            /* set by build */
} pact_args;

static const tfc_field relu_fields[] = {
    {"max_value", TFC_F_NODE, offsetof(pact_args, max_value), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "the largest output (null: none; 6: relu6)"},
    {"negative_slope", TFC_F_FLOAT, offsetof(pact_args, negative_slope), "0.0", 0, HUGE_VAL,
     NULL, "the slope below the threshold"},
    {"threshold", TFC_F_FLOAT, offsetof(pact_args, threshold), "0.0", 0, HUGE_VAL, NULL,
     "the input below which the output is 0 (or slopes)"},
    {NULL}};

static const tfc_field leaky_relu_fields[] = {
    {"negative_slope", TFC_F_FLOAT, offsetof(pact_args, negative_slope), "0.3", 0, HUGE_VAL,
     NULL, "the slope below 0"},
    {"alpha", TFC_F_NODE, offsetof(pact_args, old_alpha), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "Keras 2's name of negative_slope (Keras 3 still takes it)"},
    {NULL}};

static const tfc_field elu_fields[] = {
    {"alpha", TFC_F_FLOAT, offsetof(pact_args, alpha), "1.0", TFC_UNBOUNDED, NULL,
     "the scale of the negative part, alpha (exp(x) - 1)"},
    {NULL}};

/* The argument's path in errors: layers[I].TYPE.ARG */
static void arg_path(const tfc_layer *l, const char *arg, char *path, size_t size)
{
    snprintf(path, size, "layers[%d].%s.%s", l->index, l->ops->type, arg);
}

/* Makes l the Activation layer of `act`, or a layer of its own running the pact ops on d. */
static void pact_choose(tfc_layer *l, const tfc_pact_desc *d)
{
    int act = -1;
    if (d->elu) {
        if (d->slope == 1.0f) act = TFC_ACT_ELU;
    } else if (d->threshold == 0.0f && d->slope == 0.0f) {
        act = isinf(d->max_value) ? TFC_ACT_RELU : d->max_value == 6.0f ? TFC_ACT_RELU6 : -1;
    } else if (d->threshold == 0.0f && isinf(d->max_value) && d->slope == 0.2f) {
        act = TFC_ACT_LEAKY_RELU;
    }
    l->out_shape = l->in_shape[0];
    l->pure_act = act >= 0;
    l->act = act >= 0 ? (tfc_act)act : TFC_ACT_LINEAR;
}

static tfc_status relu_build(tfc_layer *l, tfc_error *err)
{
    pact_args *a = l->args;
    char path[128];
    double max_value = HUGE_VAL;
    if (a->max_value && !tfc_node_is_null(a->max_value)) {
        arg_path(l, "max_value", path, sizeof path);
        if (tfc_node_double(a->max_value, path, &max_value, err)) return TFC_ERR_CONFIG;
        if (!(max_value >= 0))
            return tfc_node_error(err, TFC_ERR_CONFIG, a->max_value, path,
                                  "must be null or a number >= 0 (Keras's ReLU refuses a "
                                  "negative max_value)");
    }
    a->d = (tfc_pact_desc){.elu = 0, .slope = (float)a->negative_slope,
                           .max_value = (float)max_value, .threshold = (float)a->threshold};
    pact_choose(l, &a->d);
    return TFC_OK;
}

static tfc_status leaky_relu_build(tfc_layer *l, tfc_error *err)
{
    pact_args *a = l->args;
    double slope = a->negative_slope;
    if (a->old_alpha && !tfc_node_is_null(a->old_alpha)) { /* Keras: alpha wins */
        char path[128];
        arg_path(l, "alpha", path, sizeof path);
        if (tfc_node_double(a->old_alpha, path, &slope, err)) return TFC_ERR_CONFIG;
        if (!(slope >= 0))
            return tfc_node_error(err, TFC_ERR_CONFIG, a->old_alpha, path,
                                  "must be a number >= 0 (the negative slope)");
    }
    a->d = (tfc_pact_desc){.elu = 0, .slope = (float)slope, .max_value = INFINITY,
                           .threshold = 0.0f};
    pact_choose(l, &a->d);
    return TFC_OK;
}

static tfc_status elu_build(tfc_layer *l, tfc_error *err)
{
    pact_args *a = l->args;
    (void)err;
    a->d = (tfc_pact_desc){.elu = 1, .slope = (float)a->alpha, .max_value = INFINITY,
                           .threshold = 0.0f};
    pact_choose(l, &a->d);
    return TFC_OK;
}

static int64_t batch_numel(const tfc_layer *l, const tfc_exec *ex)
{
    return (int64_t)ex->batch * tfc_layer_out_numel(l);
}

/* As the Activation layer where pure_act (the graph applies l->act), else the pact op.
 * Softmax, always pure_act, shares these (its args are never read). */
static void pact_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const pact_args *a = l->args;
    if (l->pure_act)
        ex->be->ops->copy(ex->be, y, x[0], (size_t)batch_numel(l, ex) * 4);
    else
        ex->be->ops->pact_forward(ex->be, &a->d, batch_numel(l, ex), x[0], y);
}

static void pact_forward_act(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const pact_args *a = l->args;
    const int cols = (int)l->out_shape.dim[l->out_shape.ndim - 1];
    if (l->pure_act)
        ex->be->ops->act_forward(ex->be, l->act, batch_numel(l, ex), cols, x[0], y);
    else
        ex->be->ops->pact_forward(ex->be, &a->d, batch_numel(l, ex), x[0], y);
}

/* With pure_act the graph takes the activation's derivative itself and calls this only
 * where the loss took it (a softmax folded into the cross-entropy): dy passes through, as in
 * the Activation layer. */
static void pact_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                          const float *dy, float *const *dx)
{
    const pact_args *a = l->args;
    if (!dx[0]) return;
    if (l->pure_act)
        ex->be->ops->axpy(ex->be, batch_numel(l, ex), 1.f, dy, dx[0]);
    else
        ex->be->ops->pact_backward(ex->be, &a->d, batch_numel(l, ex), x[0], dy, dx[0]);
}

static const char *const *pact_needs(const tfc_layer *l)
{
    static const char *const ops[] = {"pact_forward", "pact_backward", NULL};
    return l->pure_act ? NULL : ops;
}

#define PACT_LAYER(name_, type_, fields_, build_)                                              \
    const tfc_layer_ops name_ = {                                                              \
        .type = type_, .schema = fields_, .args_size = sizeof(pact_args), .min_inputs = 1,     \
        .max_inputs = 1, .keeps_mask = 1, .pure_act = 1, .needs = pact_needs,                  \
        .build = build_, .forward = pact_forward, .forward_act = pact_forward_act,             \
        .backward = pact_backward,                                                             \
    }

PACT_LAYER(tfc_relu_ops, "ReLU", relu_fields, relu_build);
PACT_LAYER(tfc_leaky_relu_ops, "LeakyReLU", leaky_relu_fields, leaky_relu_build);
PACT_LAYER(tfc_elu_ops, "ELU", elu_fields, elu_build);

int tfc_layer_pact(const tfc_layer *l, tfc_pact_desc *d)
{
    int mine = l->ops == &tfc_relu_ops || l->ops == &tfc_leaky_relu_ops || l->ops == &tfc_elu_ops;
    if (!mine || l->pure_act) return 0;
    *d = ((const pact_args *)l->args)->d;
    return 1;
}

/* ---- Softmax: the Activation layer of softmax, over the last axis ---------------------- */

typedef struct softmax_args {
    int axis;
} softmax_args;

static const tfc_field softmax_fields[] = {
    {"axis", TFC_F_INT, offsetof(softmax_args, axis), "-1", -64, 64, NULL,
     "the axis normalised: the last (-1, or its index counting the batch axis as 0)"},
    {NULL}};

static tfc_status softmax_build(tfc_layer *l, tfc_error *err)
{
    const softmax_args *a = l->args;
    const int last = l->in_shape[0].ndim; /* counting the batch axis */
    if (a->axis != -1 && a->axis != last)
        return tfc_layer_error(err, l, "axis %d: tfc's Softmax normalises the last axis only "
                                       "(-1 or %d here)", a->axis, last);
    if (l->mask_in)
        return tfc_layer_error(err, l, "takes a masked sequence: Keras's Softmax would apply "
                                       "the mask [batch, steps] along its last axis; put the "
                                       "softmax in the layer before it (activation: softmax)");
    l->out_shape = l->in_shape[0];
    l->act = TFC_ACT_SOFTMAX;
    return TFC_OK;
}

const tfc_layer_ops tfc_softmax_ops = {
    .type = "Softmax", .schema = softmax_fields, .args_size = sizeof(softmax_args),
    .min_inputs = 1, .max_inputs = 1, .keeps_mask = 1, .pure_act = 1,
    .build = softmax_build, .forward = pact_forward, .forward_act = pact_forward_act,
    .backward = pact_backward,
};

/* ---- PReLU ------------------------------------------------------------------------------ */

typedef struct prelu_args {
    const tfc_node *alpha_initializer;
    tfc_int_list shared_axes;
    int64_t rows, cols; /* set by build: per example, rows of alpha's broadcast and its size */
} prelu_args;

static const tfc_field prelu_fields[] = {
    {"alpha_initializer", TFC_F_NODE, offsetof(prelu_args, alpha_initializer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "default zeros (Keras writes Zeros)"},
    TFC_REGULARIZER_FIELD("alpha_regularizer"),
    TFC_CONSTRAINT_FIELD("alpha_constraint"),
    {"shared_axes", TFC_F_INT_LIST, offsetof(prelu_args, shared_axes), TFC_NO_DEFAULT, 1, 16,
     NULL, "axes (1: the first after the batch) along which alpha is shared: a leading run "
           "such as [1, 2] for images"},
    {NULL}};

static tfc_status prelu_build(tfc_layer *l, tfc_error *err)
{
    prelu_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    if (l->in_dtype[0] != TFC_F32)
        return tfc_layer_error(err, l, "takes float32 input, not token ids");
    int shared[TFC_MAX_DIMS + 1] = {0}, k = 0;
    for (int i = 0; i < a->shared_axes.n; i++) {
        int ax = a->shared_axes.v[i];
        if (ax > in->ndim)
            return tfc_layer_error(err, l, "shared_axes: axis %d is beyond the input's %d axes "
                                           "(1 is the first after the batch)", ax, in->ndim);
        shared[ax] = 1;
    }
    while (k < in->ndim && shared[k + 1]) k++;
    for (int ax = k + 1; ax <= in->ndim; ax++)
        if (shared[ax])
            return tfc_layer_error(err, l, "shared_axes: tfc shares alpha along a leading run of "
                                           "axes (1, 2, ...), and axis %d follows an unshared "
                                           "axis %d", ax, k + 1);
    int64_t dims[TFC_MAX_DIMS];
    a->rows = 1, a->cols = 1;
    for (int i = 0; i < in->ndim; i++) {
        dims[i] = i < k ? 1 : in->dim[i];
        *(i < k ? &a->rows : &a->cols) *= in->dim[i];
    }
    tfc_init init;
    if (tfc_layer_init_arg(l, a->alpha_initializer, "alpha_initializer", TFC_INIT_ZEROS, &init,
                           err))
        return TFC_ERR_CONFIG;
    tfc_layer_add_param(l, "alpha", in->ndim, dims, 1, init);
    l->out_shape = *in;
    return TFC_OK;
}

static void prelu_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const prelu_args *a = l->args;
    ex->be->ops->prelu_forward(ex->be, ex->batch * a->rows, (int)a->cols, x[0],
                               l->params[0].data, y);
}

static void prelu_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                           const float *dy, float *const *dx)
{
    const prelu_args *a = l->args;
    ex->be->ops->prelu_backward(ex->be, ex->batch * a->rows, (int)a->cols, x[0],
                                l->params[0].data, dy, dx[0], l->params[0].grad);
}

static const char *const *prelu_needs(const tfc_layer *l)
{
    static const char *const ops[] = {"prelu_forward", "prelu_backward", NULL};
    return ops;
}

const tfc_layer_ops tfc_prelu_ops = {
    .type = "PReLU", .schema = prelu_fields, .args_size = sizeof(prelu_args),
    .min_inputs = 1, .max_inputs = 1, .keeps_mask = 1, .needs = prelu_needs,
    .build = prelu_build, .forward = prelu_forward, .backward = prelu_backward,
};
