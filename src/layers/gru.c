/* GRU (keras.layers.GRU) over a sequence (T, in), gates in Keras's order z, r, h:
 *   z = sigmoid(x_t K_z + h_{t-1} R_z + b_z),  r = sigmoid(x_t K_r + h_{t-1} R_r + b_r)
 *   hh = tanh(x_t K_h + b_h + r (h_{t-1} R_h + b'_h))   (reset_after, Keras's default)
 *   hh = tanh(x_t K_h + b_h + (r h_{t-1}) R_h)          (reset_after: false)
 *   h_t = z h_{t-1} + (1 - z) hh
 * (sigmoid: recurrent_activation; tanh: activation. Other activations than these two run
 * the backend's stepped rnn_dropout ops in every pass, rnn.h's tfc_rnn_any_acts.)
 * Output: h_T (units), or every h_t (T, units) with return_sequences. Under a mask from an
 * Embedding with mask_zero, masked steps keep the previous state. go_backwards and dropout
 * as every recurrent layer (rnn.h). The recurrence is the backend's gru_forward/backward. */
#include "layers/rnn.h"

typedef struct gru_args {
    tfc_rnn_args rnn;
    int reset_after;
} gru_args;

static const tfc_field gru_fields[] = {
    TFC_RNN_FIELDS(gru_args),
    {"bias_initializer", TFC_F_NODE, offsetof(gru_args, rnn.bias_initializer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "default zeros"},
    {"reset_after", TFC_F_BOOL, offsetof(gru_args, reset_after), "true", TFC_UNBOUNDED, NULL,
     "apply the reset gate after R_h (bias [2, 3 units]) or before it (bias [3 units])"},
    {NULL}};

static tfc_gru_desc gru_desc(const tfc_layer *l, int n)
{
    const gru_args *a = l->args;
    tfc_gru_desc d = {.n = n, .t = (int)l->in_shape[0].dim[0], .in = (int)l->in_shape[0].dim[1],
                      .units = a->rnn.units, .return_sequences = a->rnn.return_sequences,
                      .reset_after = a->reset_after};
    return d;
}

/* Floats per example of the kernel's saved part: h and the four rows of gates per step (and
 * the three gates' sums, tfc_rnn_any_acts) */
static int64_t kernel_saved(const tfc_layer *l)
{
    const gru_args *a = l->args;
    const int64_t u = a->rnn.units;
    return l->in_shape[0].dim[0] * (u + tfc_rnn_state_floats(&a->rnn, 3, 4 * u));
}

static tfc_status gru_build(tfc_layer *l, tfc_error *err)
{
    gru_args *a = l->args;
    a->rnn.gate_masks = 1;
    if (tfc_rnn_build(l, &a->rnn, err)) return TFC_ERR_CONFIG;
    const int64_t in = l->in_shape[0].dim[1], u = a->rnn.units;
    l->saved_floats = kernel_saved(l) + tfc_rnn_saved_floats(l, &a->rnn);
    tfc_init ki, ri, bi;
    if (tfc_rnn_initializers(l, &a->rnn, &ki, &ri, &bi, err)) return TFC_ERR_CONFIG;
    tfc_layer_add_param(l, "kernel", 2, (int64_t[]){in, 3 * u}, 1, ki);
    tfc_layer_add_param(l, "recurrent_kernel", 2, (int64_t[]){u, 3 * u}, 1, ri);
    if (a->rnn.use_bias) {
        if (a->reset_after) tfc_layer_add_param(l, "bias", 2, (int64_t[]){2, 3 * u}, 1, bi);
        else tfc_layer_add_param(l, "bias", 1, (int64_t[]){3 * u}, 1, bi);
    }
    return TFC_OK;
}

static const char *const *gru_needs(const tfc_layer *l)
{
#define GRU_OPS "gru_workspace", "gru_forward", "gru_backward"
    static const char *const lists[4][9] = {
        {GRU_OPS, NULL},
        {GRU_OPS, TFC_RNN_INPUT_OPS, NULL},
        {GRU_OPS, TFC_RNN_DROPOUT_OPS, NULL},
        {GRU_OPS, TFC_RNN_INPUT_OPS, TFC_RNN_DROPOUT_OPS, NULL}};
#undef GRU_OPS
    const gru_args *a = l->args;
    return lists[tfc_rnn_needs_index(&a->rnn)];
}

static size_t kernel_ws(const tfc_layer *l, tfc_backend *be)
{
    const gru_args *a = l->args;
    tfc_gru_desc d = gru_desc(l, l->max_batch);
    return tfc_rnn_kernel_ws(l, &a->rnn, be, TFC_RNN_CELL_GRU, a->reset_after,
                             be->ops->gru_workspace(be, &d));
}

static void gru_plan(tfc_layer *l, tfc_backend *be)
{
    const gru_args *a = l->args;
    l->workspace = tfc_rnn_workspace(l, &a->rnn, kernel_ws(l, be));
}

/* Saved layout per batch: hseq [n, t, u], gates [n, t, 4u or 7u], then the input's
 * (rnn.h). */
static void saved_parts(const tfc_layer *l, float **h, float **g, float **extra)
{
    const gru_args *a = l->args;
    const int64_t hu = (int64_t)l->max_batch * l->in_shape[0].dim[0] * a->rnn.units;
    *h = l->saved;
    *g = l->saved + hu;
    *extra = l->saved + (int64_t)l->max_batch * kernel_saved(l);
}

static void gru_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const gru_args *a = l->args;
    tfc_gru_desc d = gru_desc(l, ex->batch);
    float *h, *g, *extra;
    saved_parts(l, &h, &g, &extra);
    const float *mask;
    const float *in = tfc_rnn_forward_input(l, &a->rnn, ex, x[0], extra, &mask);
    if (tfc_rnn_stepped(&a->rnn, ex)) { /* the four gate rows: the same floats */
        tfc_rnn_dropout_desc dd =
            tfc_rnn_dropout_desc_of(l, &a->rnn, ex, TFC_RNN_CELL_GRU, a->reset_after);
        ex->be->ops->rnn_dropout_forward(ex->be, &dd, in, l->params[0].data, l->params[1].data,
                                         a->rnn.use_bias ? l->params[2].data : NULL, mask, y,
                                         h, g, ex->ws);
        return;
    }
    ex->be->ops->gru_forward(ex->be, &d, in, l->params[0].data, l->params[1].data,
                             a->rnn.use_bias ? l->params[2].data : NULL, mask, y, h, g, ex->ws);
}

static void gru_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                         const float *dy, float *const *dx)
{
    const gru_args *a = l->args;
    tfc_gru_desc d = gru_desc(l, ex->batch);
    float *h, *g, *extra;
    saved_parts(l, &h, &g, &extra);
    float *din = tfc_rnn_dx(l, &a->rnn, ex, kernel_ws(l, ex->be), dx[0]);
    if (tfc_rnn_stepped(&a->rnn, ex)) {
        tfc_rnn_dropout_desc dd =
            tfc_rnn_dropout_desc_of(l, &a->rnn, ex, TFC_RNN_CELL_GRU, a->reset_after);
        ex->be->ops->rnn_dropout_backward(
            ex->be, &dd, tfc_rnn_input(l, &a->rnn, ex, x[0], extra), l->params[0].data,
            l->params[1].data, tfc_rnn_mask(l, &a->rnn, extra), h, g, dy, din,
            l->params[0].grad, l->params[1].grad, a->rnn.use_bias ? l->params[2].grad : NULL,
            ex->ws);
        tfc_rnn_input_done(l, &a->rnn, ex, din, dx[0]);
        return;
    }
    ex->be->ops->gru_backward(ex->be, &d, tfc_rnn_input(l, &a->rnn, ex, x[0], extra),
                              l->params[0].data, l->params[1].data,
                              tfc_rnn_mask(l, &a->rnn, extra), h, g, dy, din, l->params[0].grad,
                              l->params[1].grad, a->rnn.use_bias ? l->params[2].grad : NULL,
                              ex->ws);
    tfc_rnn_input_done(l, &a->rnn, ex, din, dx[0]);
}

const tfc_layer_ops tfc_gru_ops = {
    .type = "GRU", .schema = gru_fields, .args_size = sizeof(gru_args),
    .min_inputs = 1, .max_inputs = 1, .needs = gru_needs,
    .build = gru_build, .plan = gru_plan, .forward = gru_forward, .backward = gru_backward,
};
