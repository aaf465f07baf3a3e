/* LSTM (keras.layers.LSTM) over a sequence (T, in), gates in Keras's order i, f, c, o:
 *   z_t = x_t K + h_{t-1} R + b,  i, f, o = sigmoid(z_i, z_f, z_o),  g = tanh(z_c)
 *   c_t = f c_{t-1} + i g,  h_t = o tanh(c_t)
 * (sigmoid: recurrent_activation; tanh: activation. Other activations than these two run
 * the backend's stepped rnn_dropout ops in every pass, rnn.h's tfc_rnn_any_acts.)
 * Output: h_T (units), or every h_t (T, units) with return_sequences. Under a mask from an
 * Embedding with mask_zero, masked steps keep the previous state; go_backwards and dropout
 * as every recurrent layer (rnn.h). The recurrence itself is
 * the backend's lstm_forward/backward, so the GPU can run it as one fused kernel. Fed by an
 * Embedding alone, on a backend with lstm_ids, the graph hands it the Embedding's ids and
 * table (takes_ids): x_t K is then a row of table K, computed once per pass for the whole
 * vocabulary (a predictor's CPU backend keeps it between calls), and the table's gradient comes from dgates summed by id (docs/cpu.md). */
#include "layers/rnn.h"

typedef struct lstm_args {
    tfc_rnn_args rnn;
    int unit_forget_bias;
} lstm_args;

static const tfc_field lstm_fields[] = {
    TFC_RNN_FIELDS(lstm_args),
    {"unit_forget_bias", TFC_F_BOOL, offsetof(lstm_args, unit_forget_bias), "true",
     TFC_UNBOUNDED, NULL, "start the forget gate's bias at 1"},
    {"bias_initializer", TFC_F_NODE, offsetof(lstm_args, rnn.bias_initializer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "default zeros (forget gate 1 with unit_forget_bias)"},
    {NULL}};

static tfc_lstm_desc lstm_desc(const tfc_layer *l, int n)
{
    const lstm_args *a = l->args;
    tfc_lstm_desc d = {.n = n, .t = (int)l->in_shape[0].dim[0], .in = (int)l->in_shape[0].dim[1],
                       .units = a->rnn.units, .return_sequences = a->rnn.return_sequences,
                       .vocab = (int)l->ids_vocab};
    return d;
}

static tfc_status lstm_build(tfc_layer *l, tfc_error *err)
{
    lstm_args *a = l->args;
    a->rnn.gate_masks = 1;
    if (tfc_rnn_build(l, &a->rnn, err)) return TFC_ERR_CONFIG;
    const int64_t t = l->in_shape[0].dim[0], in = l->in_shape[0].dim[1], u = a->rnn.units;
    /* h and c per step, and the four gates (and their sums, tfc_rnn_any_acts); then the
     * input's (rnn.h) */
    l->saved_floats = t * (u + tfc_rnn_state_floats(&a->rnn, 4, 5 * u)) +
                      tfc_rnn_saved_floats(l, &a->rnn);
    tfc_init ki, ri, bi;
    if (tfc_rnn_initializers(l, &a->rnn, &ki, &ri, &bi, err)) return TFC_ERR_CONFIG;
    if (a->unit_forget_bias && !a->rnn.bias_initializer) bi = tfc_init_make(TFC_INIT_LSTM_BIAS);
    tfc_layer_add_param(l, "kernel", 2, (int64_t[]){in, 4 * u}, 1, ki);
    tfc_layer_add_param(l, "recurrent_kernel", 2, (int64_t[]){u, 4 * u}, 1, ri);
    if (a->rnn.use_bias) tfc_layer_add_param(l, "bias", 1, (int64_t[]){4 * u}, 1, bi);
    return TFC_OK;
}

/* With ids only where the kernel reads the Embedding's output as it is */
static int lstm_takes_ids(const tfc_layer *l, const tfc_backend *be, int64_t vocab,
                          int max_batch)
{
    const lstm_args *a = l->args;
    tfc_lstm_desc d = lstm_desc(l, max_batch);
    d.vocab = vocab > INT32_MAX ? 0 : (int)vocab;
    return !*tfc_rnn_needs(&a->rnn) && be->lstm_ids && d.vocab > 0 && be->lstm_ids(be, &d);
}

static const char *const *lstm_needs(const tfc_layer *l)
{
    const lstm_args *a = l->args;
    return tfc_rnn_needs(&a->rnn);
}

static size_t kernel_ws(const tfc_layer *l, tfc_backend *be)
{
    const lstm_args *a = l->args;
    tfc_lstm_desc d = lstm_desc(l, l->max_batch);
    return tfc_rnn_kernel_ws(l, &a->rnn, be, TFC_RNN_CELL_LSTM, 0,
                             be->ops->lstm_workspace(be, &d));
}

static void lstm_plan(tfc_layer *l, tfc_backend *be)
{
    const lstm_args *a = l->args;
    l->workspace = tfc_rnn_workspace(l, &a->rnn, kernel_ws(l, be));
}

/* Saved layout per batch: hseq [n, t, u], cseq [n, t, u], gates [n, t, 4u], then the
 * input's (rnn.h); the stepped ops' state [n, t, 5u or 9u] (c then the gates) from c. */
static void saved_parts(const tfc_layer *l, const tfc_lstm_desc *d, float **h, float **c,
                        float **g, float **extra)
{
    const lstm_args *a = l->args;
    size_t nt = (size_t)l->max_batch * (size_t)d->t, hu = nt * (size_t)d->units;
    *h = l->saved;
    *c = l->saved + hu;
    *g = l->saved + 2 * hu;
    *extra = l->saved + hu + nt * (size_t)tfc_rnn_state_floats(&a->rnn, 4, 5 * d->units);
}

static void lstm_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const lstm_args *a = l->args;
    tfc_lstm_desc d = lstm_desc(l, ex->batch);
    float *h, *c, *g, *extra;
    saved_parts(l, &d, &h, &c, &g, &extra);
    const float *mask;
    const float *in = tfc_rnn_forward_input(l, &a->rnn, ex, x[0], extra, &mask);
    if (tfc_rnn_stepped(&a->rnn, ex)) { /* c then the gates: the same floats */
        tfc_rnn_dropout_desc dd = tfc_rnn_dropout_desc_of(l, &a->rnn, ex, TFC_RNN_CELL_LSTM, 0);
        ex->be->ops->rnn_dropout_forward(ex->be, &dd, in, l->params[0].data, l->params[1].data,
                                         a->rnn.use_bias ? l->params[2].data : NULL, mask, y,
                                         h, c, ex->ws);
        return;
    }
    if (d.vocab) d.ids = ex->ids, in = ex->ids_table->data;
    ex->be->ops->lstm_forward(ex->be, &d, in, l->params[0].data, l->params[1].data,
                              a->rnn.use_bias ? l->params[2].data : NULL, mask, y, h, c, g,
                              ex->ws);
}

static void lstm_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                          const float *dy, float *const *dx)
{
    const lstm_args *a = l->args;
    tfc_lstm_desc d = lstm_desc(l, ex->batch);
    float *h, *c, *g, *extra;
    saved_parts(l, &d, &h, &c, &g, &extra);
    const float *in = tfc_rnn_input(l, &a->rnn, ex, x[0], extra);
    float *din = tfc_rnn_dx(l, &a->rnn, ex, kernel_ws(l, ex->be), dx[0]);
    if (tfc_rnn_stepped(&a->rnn, ex)) {
        tfc_rnn_dropout_desc dd = tfc_rnn_dropout_desc_of(l, &a->rnn, ex, TFC_RNN_CELL_LSTM, 0);
        ex->be->ops->rnn_dropout_backward(ex->be, &dd, in, l->params[0].data, l->params[1].data,
                                          tfc_rnn_mask(l, &a->rnn, extra), h, c, dy, din,
                                          l->params[0].grad, l->params[1].grad,
                                          a->rnn.use_bias ? l->params[2].grad : NULL, ex->ws);
        tfc_rnn_input_done(l, &a->rnn, ex, din, dx[0]);
        return;
    }
    if (d.vocab) d.ids = ex->ids, in = ex->ids_table->data, din = ex->ids_table->grad;
    ex->be->ops->lstm_backward(ex->be, &d, in, l->params[0].data, l->params[1].data,
                               tfc_rnn_mask(l, &a->rnn, extra), h, c, g, dy, din,
                               l->params[0].grad, l->params[1].grad,
                               a->rnn.use_bias ? l->params[2].grad : NULL, ex->ws);
    if (!d.vocab) tfc_rnn_input_done(l, &a->rnn, ex, din, dx[0]);
}

const tfc_layer_ops tfc_lstm_ops = {
    .type = "LSTM", .schema = lstm_fields, .args_size = sizeof(lstm_args),
    .min_inputs = 1, .max_inputs = 1, .takes_ids = lstm_takes_ids, .needs = lstm_needs,
    .build = lstm_build, .plan = lstm_plan, .forward = lstm_forward, .backward = lstm_backward,
};
