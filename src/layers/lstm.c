/* LSTM (keras.layers.LSTM) over a sequence (T, in), gates in Keras's order i, f, c, o:
 *   z_t = x_t K + h_{t-1} R + b,  i, f, o = sigmoid(z_i, z_f, z_o),  g = tanh(z_c)
 *   c_t = f c_{t-1} + i g,  h_t = o tanh(c_t)
 * Output: h_T (units), or every h_t (T, units) with return_sequences. Under a mask from an
 * Embedding with mask_zero, masked steps keep the previous state. The recurrence itself is
 * the backend's lstm_forward/backward, so the GPU can run it as one fused kernel. Fed by an
 * Embedding alone, on a backend with lstm_ids, the graph hands it the Embedding's ids and
 * table (takes_ids): x_t K is then a row of table K, computed once per pass for the whole
 * vocabulary, and the table's gradient comes from dgates summed by id (docs/cpu.md). */
#include "layers/layer.h"

static const char *const tanh_only[] = {"tanh", NULL};
static const char *const sigmoid_only[] = {"sigmoid", NULL};

typedef struct lstm_args {
    int units, activation, recurrent_activation, use_bias, return_sequences, unit_forget_bias;
    const tfc_node *kernel_initializer, *recurrent_initializer, *bias_initializer;
} lstm_args;

static const tfc_field lstm_fields[] = {
    {"units", TFC_F_INT, offsetof(lstm_args, units), NULL, 1, 1 << 16, NULL, "state size"},
    {"activation", TFC_F_ENUM, offsetof(lstm_args, activation), "tanh", TFC_UNBOUNDED,
     tanh_only, "cell activation (tanh only)"},
    {"recurrent_activation", TFC_F_ENUM, offsetof(lstm_args, recurrent_activation), "sigmoid",
     TFC_UNBOUNDED, sigmoid_only, "gate activation (sigmoid only)"},
    {"use_bias", TFC_F_BOOL, offsetof(lstm_args, use_bias), "true", TFC_UNBOUNDED, NULL,
     "add a bias"},
    {"return_sequences", TFC_F_BOOL, offsetof(lstm_args, return_sequences), "false",
     TFC_UNBOUNDED, NULL, "output every step, not only the last"},
    {"unit_forget_bias", TFC_F_BOOL, offsetof(lstm_args, unit_forget_bias), "true",
     TFC_UNBOUNDED, NULL, "start the forget gate's bias at 1"},
    {"kernel_initializer", TFC_F_NODE, offsetof(lstm_args, kernel_initializer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "default glorot_uniform"},
    {"recurrent_initializer", TFC_F_NODE, offsetof(lstm_args, recurrent_initializer),
     TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL, "default orthogonal"},
    {"bias_initializer", TFC_F_NODE, offsetof(lstm_args, bias_initializer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "default zeros (forget gate 1 with unit_forget_bias)"},
    {NULL}};

static tfc_lstm_desc lstm_desc(const tfc_layer *l, int n)
{
    const lstm_args *a = l->args;
    tfc_lstm_desc d = {.n = n, .t = (int)l->in_shape[0].dim[0], .in = (int)l->in_shape[0].dim[1],
                       .units = a->units, .return_sequences = a->return_sequences,
                       .vocab = (int)l->ids_vocab};
    return d;
}

static tfc_status lstm_build(tfc_layer *l, tfc_error *err)
{
    const lstm_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    char buf[96];
    if (in->ndim != 2)
        return tfc_layer_error(err, l, "needs a sequence input of shape (steps, features), got %s",
                               tfc_shape_str(in, buf, sizeof buf));
    int64_t t = in->dim[0], u = a->units;
    l->out_shape = a->return_sequences ? tfc_shape_make(2, (int64_t[]){t, u})
                                       : tfc_shape_make(1, (int64_t[]){u});
    l->mask_out = l->mask_in && a->return_sequences;
    l->saved_floats = t * 6 * u; /* h and c per step, and the four gates */
    tfc_init ki, ri, bi;
    if (tfc_layer_init_arg(l, a->kernel_initializer, "kernel_initializer",
                           TFC_INIT_GLOROT_UNIFORM, &ki, err) ||
        tfc_layer_init_arg(l, a->recurrent_initializer, "recurrent_initializer",
                           TFC_INIT_ORTHOGONAL, &ri, err) ||
        tfc_layer_init_arg(l, a->bias_initializer, "bias_initializer", TFC_INIT_ZEROS, &bi, err))
        return TFC_ERR_CONFIG;
    if (a->unit_forget_bias && !a->bias_initializer) bi = tfc_init_make(TFC_INIT_LSTM_BIAS);
    tfc_layer_add_param(l, "kernel", 2, (int64_t[]){in->dim[1], 4 * u}, 1, ki);
    tfc_layer_add_param(l, "recurrent_kernel", 2, (int64_t[]){u, 4 * u}, 1, ri);
    if (a->use_bias) tfc_layer_add_param(l, "bias", 1, (int64_t[]){4 * u}, 1, bi);
    return TFC_OK;
}

static int lstm_takes_ids(const tfc_layer *l, const tfc_backend *be, int64_t vocab,
                          int max_batch)
{
    tfc_lstm_desc d = lstm_desc(l, max_batch);
    d.vocab = vocab > INT32_MAX ? 0 : (int)vocab;
    return be->lstm_ids && d.vocab > 0 && be->lstm_ids(&d);
}

static void lstm_plan(tfc_layer *l, tfc_backend *be)
{
    tfc_lstm_desc d = lstm_desc(l, l->max_batch);
    l->workspace = be->ops->lstm_workspace(be, &d);
}

/* Saved layout per batch: hseq [n, t, u], cseq [n, t, u], gates [n, t, 4u]. */
static void saved_parts(const tfc_layer *l, const tfc_lstm_desc *d, float **h, float **c,
                        float **g)
{
    size_t hu = (size_t)l->max_batch * (size_t)d->t * (size_t)d->units;
    *h = l->saved;
    *c = l->saved + hu;
    *g = l->saved + 2 * hu;
}

static void lstm_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const lstm_args *a = l->args;
    tfc_lstm_desc d = lstm_desc(l, ex->batch);
    float *h, *c, *g;
    saved_parts(l, &d, &h, &c, &g);
    const float *in = x[0];
    if (d.vocab) d.ids = ex->ids, in = ex->ids_table->data;
    ex->be->ops->lstm_forward(ex->be, &d, in, l->params[0].data, l->params[1].data,
                              a->use_bias ? l->params[2].data : NULL, l->mask, y, h, c, g, ex->ws);
}

static void lstm_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                          const float *dy, float *const *dx)
{
    const lstm_args *a = l->args;
    tfc_lstm_desc d = lstm_desc(l, ex->batch);
    float *h, *c, *g;
    saved_parts(l, &d, &h, &c, &g);
    const float *in = x[0];
    float *din = dx[0];
    if (d.vocab) d.ids = ex->ids, in = ex->ids_table->data, din = ex->ids_table->grad;
    ex->be->ops->lstm_backward(ex->be, &d, in, l->params[0].data, l->params[1].data, l->mask,
                               h, c, g, dy, din, l->params[0].grad, l->params[1].grad,
                               a->use_bias ? l->params[2].grad : NULL, ex->ws);
}

const tfc_layer_ops tfc_lstm_ops = {
    .type = "LSTM", .schema = lstm_fields, .args_size = sizeof(lstm_args),
    .min_inputs = 1, .max_inputs = 1, .takes_ids = lstm_takes_ids,
    .build = lstm_build, .plan = lstm_plan, .forward = lstm_forward, .backward = lstm_backward,
};
