/* The recurrent layers' shared arguments and their input preparation (rnn.h): going
 * backwards and input dropout run through the backend's rnn_input ops around the LSTM's or
 * GRU's kernel, the prepared input and reversed mask kept for the backward pass. */
#include "layers/rnn.h"

#include "core/rng.h"

const char *const tfc_rnn_use_cudnn_names[] = {"auto", "false", NULL};

/* Whether the YAML sets argument `key` to null: l->node is {TYPE: {...}}, or the arguments
 * themselves (a Bidirectional's direction, an RNN's cell) */
static int null_arg(const tfc_layer *l, const char *key)
{
    const tfc_node *own = l->node ? tfc_node_get(l->node, l->ops->type) : NULL;
    if (!own) own = l->node;
    const tfc_node *n = own && own->kind == TFC_NODE_MAP ? tfc_node_get(own, key) : NULL;
    return n && tfc_node_is_null(n);
}

tfc_status tfc_rnn_build(tfc_layer *l, tfc_rnn_args *a, tfc_error *err)
{
    const tfc_shape *in = &l->in_shape[0];
    if (null_arg(l, "activation")) a->activation = TFC_ACT_LINEAR;
    if (a->gate_masks && null_arg(l, "recurrent_activation"))
        a->recurrent_activation = TFC_ACT_LINEAR;
    if (a->gate_masks && (a->activation == TFC_ACT_SOFTMAX ||
                          a->recurrent_activation == TFC_ACT_SOFTMAX))
        return tfc_layer_error(err, l, "%s softmax is not supported (an activation of each "
                               "unit alone is)", a->activation == TFC_ACT_SOFTMAX
                                                     ? "activation" : "recurrent_activation");
    if (tfc_layer_need_rank(l, 2, "a sequence input of shape (steps, features)", err))
        return TFC_ERR_CONFIG;
    if (a->return_state)
        return tfc_layer_error(err, l, "return_state: not supported (a layer has one output)");
    if (a->stateful) return tfc_layer_error(err, l, "stateful: not supported");
    int64_t t = in->dim[0], u = a->units;
    l->out_shape = a->return_sequences ? tfc_shape_make(2, (int64_t[]){t, u})
                                       : tfc_shape_make(1, (int64_t[]){u});
    l->mask_out = l->mask_in && a->return_sequences;
    return TFC_OK;
}

tfc_status tfc_rnn_initializers(const tfc_layer *l, const tfc_rnn_args *a, tfc_init *kernel,
                                tfc_init *recurrent, tfc_init *bias, tfc_error *err)
{
    if (tfc_layer_init_arg(l, a->kernel_initializer, "kernel_initializer",
                           TFC_INIT_GLOROT_UNIFORM, kernel, err) ||
        tfc_layer_init_arg(l, a->recurrent_initializer, "recurrent_initializer",
                           TFC_INIT_ORTHOGONAL, recurrent, err) ||
        tfc_layer_init_arg(l, a->bias_initializer, "bias_initializer", TFC_INIT_ZEROS, bias, err))
        return TFC_ERR_CONFIG;
    return TFC_OK;
}

/* Whether the kernel reads a prepared input, not x itself */
static int prepared(const tfc_rnn_args *a, int training)
{
    return a->go_backwards || (training && a->dropout > 0);
}

static int64_t steps(const tfc_layer *l)
{
    return l->in_shape[0].dim[0];
}

static int64_t features(const tfc_layer *l)
{
    return l->in_shape[0].dim[1];
}

int64_t tfc_rnn_saved_floats(const tfc_layer *l, const tfc_rnn_args *a)
{
    if (!a->go_backwards && a->dropout <= 0) return 0;
    return steps(l) * features(l) + (a->go_backwards && l->mask_in ? steps(l) : 0);
}

/* The kernel's workspace rounded up to 64 bytes */
static size_t aligned(size_t bytes)
{
    return (bytes + 63) & ~(size_t)63;
}

size_t tfc_rnn_workspace(const tfc_layer *l, const tfc_rnn_args *a, size_t kernel_ws)
{
    if (!a->go_backwards && a->dropout <= 0) return kernel_ws;
    return aligned(kernel_ws) + (size_t)l->max_batch * steps(l) * features(l) * sizeof(float);
}

/* Whether a training pass drops out inside the stepped cell: recurrent dropout, or an LSTM's
 * or GRU's input dropout with a mask per gate (Keras 3's implementation 1, which its
 * recurrent_dropout forces) */
static int gate_dropout(const tfc_rnn_args *a)
{
    return a->recurrent_dropout > 0 || (a->gate_masks && a->implementation == 1 && a->dropout > 0);
}

int tfc_rnn_needs_index(const tfc_rnn_args *a)
{
    return (a->go_backwards || a->dropout > 0 ? 1 : 0) |
           (gate_dropout(a) || tfc_rnn_any_acts(a) ? 2 : 0);
}

const char *const *tfc_rnn_needs(const tfc_rnn_args *a)
{
    static const char *const lists[4][6] = {
        {NULL},
        {TFC_RNN_INPUT_OPS, NULL},
        {TFC_RNN_DROPOUT_OPS, NULL},
        {TFC_RNN_INPUT_OPS, TFC_RNN_DROPOUT_OPS, NULL}};
    return lists[tfc_rnn_needs_index(a)];
}

static uint64_t key_of(const tfc_layer *l, const tfc_rnn_args *a)
{
    return a->seed ? tfc_rng_key(l->rng_key, (uint64_t)a->seed) : l->rng_key;
}

/* The dropout rate of this pass's input preparation (0 at inference, and where the cell
 * drops its input per gate itself) */
static float rate_of(const tfc_rnn_args *a, const tfc_exec *ex)
{
    if (a->gate_masks && tfc_rnn_recurrent(a, ex)) return 0.0f;
    return ex->training ? (float)a->dropout : 0.0f;
}

int tfc_rnn_recurrent(const tfc_rnn_args *a, const tfc_exec *ex)
{
    return ex->training && gate_dropout(a);
}

int tfc_rnn_any_acts(const tfc_rnn_args *a)
{
    return a->gate_masks &&
           (a->activation != TFC_ACT_TANH || a->recurrent_activation != TFC_ACT_SIGMOID);
}

int tfc_rnn_stepped(const tfc_rnn_args *a, const tfc_exec *ex)
{
    return tfc_rnn_recurrent(a, ex) || tfc_rnn_any_acts(a);
}

int64_t tfc_rnn_state_floats(const tfc_rnn_args *a, int gates, int64_t fused)
{
    return fused + (tfc_rnn_any_acts(a) ? gates * (int64_t)a->units : 0);
}

tfc_rnn_dropout_desc tfc_rnn_dropout_desc_of(const tfc_layer *l, const tfc_rnn_args *a,
                                             const tfc_exec *ex, tfc_rnn_cell cell,
                                             int reset_after)
{
    const int drop = !ex || tfc_rnn_recurrent(a, ex);
    tfc_rnn_dropout_desc d = {
        .cell = cell, .n = ex ? ex->batch : l->max_batch, .t = (int)steps(l),
        .in = (int)features(l), .units = a->units, .return_sequences = a->return_sequences,
        .reset_after = reset_after, .act = (tfc_act)a->activation,
        .recurrent_act = a->gate_masks ? (tfc_act)a->recurrent_activation : TFC_ACT_SIGMOID,
        .rate = drop && a->gate_masks ? (float)a->dropout : 0.0f,
        .recurrent_rate = drop ? (float)a->recurrent_dropout : 0.0f, .key = key_of(l, a),
        .step = ex ? ex->step : 0};
    return d;
}

size_t tfc_rnn_kernel_ws(const tfc_layer *l, const tfc_rnn_args *a, tfc_backend *be,
                         tfc_rnn_cell cell, int reset_after, size_t own)
{
    if ((!gate_dropout(a) && !tfc_rnn_any_acts(a)) || !be->ops->rnn_dropout_workspace)
        return own;
    tfc_rnn_dropout_desc d = tfc_rnn_dropout_desc_of(l, a, NULL, cell, reset_after);
    size_t ws = be->ops->rnn_dropout_workspace(be, &d);
    return ws > own ? ws : own;
}


const float *tfc_rnn_input(const tfc_layer *l, const tfc_rnn_args *a, const tfc_exec *ex,
                           const float *x, float *extra)
{
    return prepared(a, ex->training) ? extra : x;
}

const float *tfc_rnn_mask(const tfc_layer *l, const tfc_rnn_args *a, float *extra)
{
    if (!a->go_backwards || !l->mask) return l->mask;
    return extra + (int64_t)l->max_batch * steps(l) * features(l);
}

const float *tfc_rnn_forward_input(tfc_layer *l, const tfc_rnn_args *a, tfc_exec *ex,
                                   const float *x, float *extra, const float **mask)
{
    const int n = ex->batch, t = (int)steps(l), f = (int)features(l);
    if (prepared(a, ex->training))
        ex->be->ops->rnn_input_forward(ex->be, n, t, f, a->go_backwards, rate_of(a, ex),
                                       key_of(l, a), ex->step, x, extra);
    *mask = tfc_rnn_mask(l, a, extra);
    if (*mask != l->mask) /* reversed with the sequence */
        ex->be->ops->rnn_input_forward(ex->be, n, t, 1, 1, 0.0f, 0, 0, l->mask, (float *)*mask);
    return tfc_rnn_input(l, a, ex, x, extra);
}

float *tfc_rnn_dx(const tfc_layer *l, const tfc_rnn_args *a, tfc_exec *ex, size_t kernel_ws,
                  float *dx)
{
    if (!dx || !prepared(a, ex->training)) return dx;
    float *dxp = (float *)((char *)ex->ws + aligned(kernel_ws));
    ex->be->ops->zero(ex->be, dxp, (size_t)ex->batch * steps(l) * features(l) * sizeof(float));
    return dxp;
}

void tfc_rnn_input_done(const tfc_layer *l, const tfc_rnn_args *a, tfc_exec *ex, float *dxp,
                        float *dx)
{
    if (dxp == dx) return;
    ex->be->ops->rnn_input_backward(ex->be, ex->batch, (int)steps(l), (int)features(l),
                                    a->go_backwards, rate_of(a, ex), key_of(l, a), ex->step, dxp,
                                    dx);
}
