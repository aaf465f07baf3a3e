/* Dropout (keras.layers.Dropout): inverted dropout while training, identity at inference.
 *   training: y = x * keep / (1 - rate), keep ~ Bernoulli(1 - rate) drawn from Philox at
 *             (layer key, step, element), so backward regenerates the same mask
 *   backward: dx += dy * keep / (1 - rate)  (dx += dy at inference); = where dx starts here */
#include "layers/layer.h"
#include "core/rng.h"

typedef struct dropout_args {
    double rate;
    int seed;
} dropout_args;

static const tfc_field dropout_fields[] = {
    {"rate", TFC_F_FLOAT, offsetof(dropout_args, rate), NULL, 0, 0.999999, NULL,
     "fraction of inputs to drop, in [0, 1)"},
    {"seed", TFC_F_INT, offsetof(dropout_args, seed), "0", 0, 2147483647, NULL,
     "mixed into the run's seed for this layer's masks"},
    TFC_FIXED_FIELD("noise_shape", TFC_NO_DEFAULT,
                    "tfc's Dropout draws one mask value per element; leave this argument out"),
    {NULL}};

static tfc_status dropout_build(tfc_layer *l, tfc_error *err)
{
    l->out_shape = l->in_shape[0];
    return TFC_OK;
}

static uint64_t key_of(const tfc_layer *l)
{
    const dropout_args *a = l->args;
    return a->seed ? tfc_rng_key(l->rng_key, (uint64_t)a->seed) : l->rng_key;
}

static void dropout_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const dropout_args *a = l->args;
    int64_t n = (int64_t)ex->batch * tfc_layer_out_numel(l);
    if (ex->training && a->rate > 0)
        ex->be->ops->dropout_forward(ex->be, n, (float)a->rate, key_of(l), ex->step, x[0], y);
    else
        ex->be->ops->copy(ex->be, y, x[0], (size_t)n * 4);
}

static void dropout_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                             const float *dy, float *const *dx)
{
    const dropout_args *a = l->args;
    int64_t n = (int64_t)ex->batch * tfc_layer_out_numel(l);
    if (!dx[0]) return;
    /* where dx's block starts here (ex->fresh), written rather than added: the forward op
     * on dy, or a copy */
    const int fresh = ex->fresh & 1;
    if (ex->training && a->rate > 0) {
        if (fresh)
            ex->be->ops->dropout_forward(ex->be, n, (float)a->rate, key_of(l), ex->step, dy, dx[0]);
        else
            ex->be->ops->dropout_backward(ex->be, n, (float)a->rate, key_of(l), ex->step, dy,
                                          dx[0]);
    } else if (fresh) {
        ex->be->ops->copy(ex->be, dx[0], dy, (size_t)n * 4);
    } else {
        ex->be->ops->axpy(ex->be, n, 1.f, dy, dx[0]);
    }
}

const tfc_layer_ops tfc_dropout_ops = {
    .type = "Dropout", .schema = dropout_fields, .args_size = sizeof(dropout_args),
    .min_inputs = 1, .max_inputs = 1, .keeps_mask = 1, .copies_at_inference = 1,
    .assigns_grads = 1,
    .build = dropout_build, .forward = dropout_forward, .backward = dropout_backward,
};
