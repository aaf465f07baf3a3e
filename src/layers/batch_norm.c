/* BatchNormalization (keras.layers.BatchNormalization) over the last axis (channels).
 * Training: per-channel batch mean and (biased) variance over every other axis;
 *   y = gamma (x - mean) / sqrt(var + eps) + beta
 *   moving = momentum * moving + (1 - momentum) * batch statistic   (Keras 3's update)
 * Inference: the moving statistics instead. Keras's defaults: momentum 0.99, epsilon 1e-3.
 * Backward (training):
 *   dbeta += sum dy, dgamma += sum dy * xhat,
 *   dx += gamma * invstd / m * (m dy - sum dy - xhat sum(dy xhat))
 * Without scale (center) Keras's layer has no gamma (beta): here it is a constant of ones
 * (zeros; tfc_param.constant: in no weights file), so every backend's ops and the fused
 * epilogues run unchanged, and its gradient goes to the layer's workspace, unread.
 * Frozen (`trainable: false`) the layer runs in inference mode in training too, as Keras 3's
 * (`training and self.trainable`): the moving statistics normalize and stay as they are,
 * and backward is the inference forward's derivative, dx += gamma / sqrt(var + eps) dy. */
#include "layers/layer.h"

typedef struct bn_args {
    int axis, center, scale;
    double momentum, epsilon;
    const tfc_node *beta_initializer, *gamma_initializer, *moving_mean_initializer,
        *moving_variance_initializer;
} bn_args;

static const tfc_field bn_fields[] = {
    {"axis", TFC_F_INT, offsetof(bn_args, axis), "-1", TFC_UNBOUNDED, NULL,
     "the channel axis; only the last (-1) is supported"},
    {"momentum", TFC_F_FLOAT, offsetof(bn_args, momentum), "0.99", 0, 1, NULL,
     "moving-average momentum"},
    {"epsilon", TFC_F_FLOAT, offsetof(bn_args, epsilon), "0.001", 1e-12, 1, NULL,
     "added to the variance"},
    {"center", TFC_F_BOOL, offsetof(bn_args, center), "true", TFC_UNBOUNDED, NULL,
     "add the offset beta (false: no beta variable)"},
    {"scale", TFC_F_BOOL, offsetof(bn_args, scale), "true", TFC_UNBOUNDED, NULL,
     "multiply by gamma (false: no gamma variable)"},
    {"beta_initializer", TFC_F_NODE, offsetof(bn_args, beta_initializer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "default zeros"},
    {"gamma_initializer", TFC_F_NODE, offsetof(bn_args, gamma_initializer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "default ones"},
    {"moving_mean_initializer", TFC_F_NODE, offsetof(bn_args, moving_mean_initializer),
     TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL, "default zeros"},
    {"moving_variance_initializer", TFC_F_NODE, offsetof(bn_args, moving_variance_initializer),
     TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL, "default ones"},
    TFC_REGULARIZER_FIELD("beta_regularizer"), TFC_REGULARIZER_FIELD("gamma_regularizer"),
    TFC_CONSTRAINT_FIELD("beta_constraint"), TFC_CONSTRAINT_FIELD("gamma_constraint"),
    TFC_FIXED_FIELD("renorm", "false", "tfc has no batch renormalization"),
    TFC_FIXED_FIELD("renorm_clipping", TFC_NO_DEFAULT, "tfc has no batch renormalization"),
    TFC_FIXED_FIELD("renorm_momentum", "0.99", "tfc has no batch renormalization"),
    TFC_FIXED_FIELD("synchronized", "false", "a data-parallel run's ranks keep their own "
                    "batch statistics (docs/distributed.md)"),
    {NULL}};

enum { GAMMA, BETA, MOVING_MEAN, MOVING_VAR };

static tfc_status bn_build(tfc_layer *l, tfc_error *err)
{
    const bn_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    if (in->ndim < 1) return tfc_layer_error(err, l, "needs an input with a channel axis");
    if (a->axis != -1 && a->axis != in->ndim)
        return tfc_layer_error(err, l, "axis %d: only the last axis (-1, channels last) is "
                               "supported", a->axis);
    int64_t c = in->dim[in->ndim - 1];
    l->out_shape = *in;
    tfc_init gi, bi, mi, vi;
    if (tfc_layer_init_arg(l, a->gamma_initializer, "gamma_initializer", TFC_INIT_ONES, &gi, err) ||
        tfc_layer_init_arg(l, a->beta_initializer, "beta_initializer", TFC_INIT_ZEROS, &bi, err) ||
        tfc_layer_init_arg(l, a->moving_mean_initializer, "moving_mean_initializer",
                           TFC_INIT_ZEROS, &mi, err) ||
        tfc_layer_init_arg(l, a->moving_variance_initializer, "moving_variance_initializer",
                           TFC_INIT_ONES, &vi, err))
        return TFC_ERR_CONFIG;
    /* gamma and beta stay at GAMMA and BETA; without scale (center) a constant 1 (0) */
    tfc_param *g = tfc_layer_add_param(l, "gamma", 1, &c, a->scale,
                                       a->scale ? gi : tfc_init_make(TFC_INIT_ONES));
    tfc_param *b = tfc_layer_add_param(l, "beta", 1, &c, a->center,
                                       a->center ? bi : tfc_init_make(TFC_INIT_ZEROS));
    g->constant = !a->scale;
    b->constant = !a->center;
    tfc_layer_add_param(l, "moving_mean", 1, &c, 0, mi);
    tfc_layer_add_param(l, "moving_variance", 1, &c, 0, vi);
    l->fixed_floats = 2 * c; /* the batch's mean and 1/std, kept for backward */
    return TFC_OK;
}

/* Without scale or center: the workspace takes the constant's gradient (2 channels' floats).
 * Frozen: c zeros (the mean and offset of dy's scaling), then room for dx to add. */
static int64_t zeros_floats(int64_t c) { return (c + 63) / 64 * 64; }

static void bn_plan(tfc_layer *l, tfc_backend *be)
{
    (void)be;
    const bn_args *a = l->args;
    const int64_t c = l->out_shape.dim[l->out_shape.ndim - 1];
    l->workspace = a->scale && a->center ? 0 : (size_t)(2 * c) * sizeof(float);
    if (l->frozen)
        l->workspace = (size_t)(zeros_floats(c) + l->max_batch * tfc_layer_out_numel(l)) *
                       sizeof(float);
}

static void bn_run(tfc_layer *l, tfc_exec *ex, const void *const *x, tfc_act act, float *y)
{
    const bn_args *a = l->args;
    int c = (int)l->out_shape.dim[l->out_shape.ndim - 1];
    int64_t rows = (int64_t)ex->batch * tfc_layer_out_numel(l) / c;
    tfc_param *p = l->params;
    if (ex->training && !l->frozen)
        ex->be->ops->bn_forward_train(ex->be, rows, c, x[0], p[GAMMA].data, p[BETA].data,
                                      (float)a->epsilon, (float)a->momentum, p[MOVING_MEAN].data,
                                      p[MOVING_VAR].data, y, l->saved, l->saved + c, act);
    else
        ex->be->ops->bn_forward_infer(ex->be, rows, c, x[0], p[GAMMA].data, p[BETA].data,
                                      p[MOVING_MEAN].data, p[MOVING_VAR].data, (float)a->epsilon,
                                      y);
}

static void bn_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    bn_run(l, ex, x, TFC_ACT_LINEAR, y);
}

/* training, with the ReLU after it (graph.c); backward reads x, never y */
static void bn_forward_relu(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    TFC_ASSERT(ex->training);
    bn_run(l, ex, x, TFC_ACT_RELU, y);
}

static void bn_params(const tfc_layer *l, tfc_bn_params *out)
{
    const bn_args *a = l->args;
    const tfc_param *p = l->params;
    *out = (tfc_bn_params){p[GAMMA].data, p[BETA].data, p[MOVING_MEAN].data, p[MOVING_VAR].data,
                           (float)a->epsilon};
}

/* Frozen: the inference forward's derivative, that forward run on dy with a zero mean and
 * offset: dx (+)= dy a, a = gamma / sqrt(var + eps) as the forward rounds it. */
static void bn_backward_frozen(tfc_layer *l, tfc_exec *ex, int64_t rows, int c, const float *dy,
                               float *dx)
{
    const bn_args *a = l->args;
    tfc_backend *be = ex->be;
    const tfc_param *p = l->params;
    if (!dx) return;
    float *zeros = ex->ws, *into = ex->fresh & 1 ? dx : zeros + zeros_floats(c);
    be->ops->zero(be, zeros, (size_t)c * sizeof(float));
    be->ops->bn_forward_infer(be, rows, c, dy, p[GAMMA].data, zeros, zeros, p[MOVING_VAR].data,
                              (float)a->epsilon, into);
    if (into != dx) be->ops->axpy(be, rows * c, 1.f, into, dx);
}

/* Backward follows a training-mode forward (the solver never back-propagates an inference
 * pass), so the saved batch statistics are current. */
static void bn_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                        const float *dy, float *const *dx)
{
    TFC_ASSERT(ex->training);
    int c = (int)l->out_shape.dim[l->out_shape.ndim - 1];
    int64_t rows = (int64_t)ex->batch * tfc_layer_out_numel(l) / c;
    if (l->frozen) {
        bn_backward_frozen(l, ex, rows, c, dy, dx[0]);
        return;
    }
    tfc_param *p = l->params;
    float *unread = ex->ws; /* [2 c]: a constant's gradient (bn_plan) */
    float *dgamma = p[GAMMA].grad ? p[GAMMA].grad : unread;
    float *dbeta = p[BETA].grad ? p[BETA].grad : unread + c;
    ex->be->ops->bn_backward(ex->be, rows, c, x[0], dy, p[GAMMA].data, l->saved, l->saved + c,
                             dx[0], dgamma, dbeta, ex->fresh & 1);
}

const tfc_layer_ops tfc_batch_normalization_ops = {
    .type = "BatchNormalization", .schema = bn_fields, .args_size = sizeof(bn_args),
    .min_inputs = 1, .max_inputs = 1, .keeps_mask = 1,
    .build = bn_build, .plan = bn_plan, .forward = bn_forward, .forward_relu = bn_forward_relu,
    .backward = bn_backward, .bn_params = bn_params, .assigns_grads = 1,
};
