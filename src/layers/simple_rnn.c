/* SimpleRNN (keras.layers.SimpleRNN) over a sequence (T, in):
 *   h_t = activation(x_t K + h_{t-1} R + b)
 * activation any of tfc's (default tanh; Keras's None, null here, is linear). Output: h_T
 * (units), or every h_t (T, units) with return_sequences. Under a mask, masked steps keep the
 * previous state; go_backwards and dropout as every recurrent layer (rnn.h). The recurrence
 * is the backend's simple_rnn_forward/backward, a CPU kernel so far (cpu_first). */
#include "layers/rnn.h"

typedef struct simple_rnn_args {
    tfc_rnn_args rnn; /* rnn.activation: a tfc_act */
} simple_rnn_args;

static const tfc_field simple_rnn_fields[] = {
    TFC_RNN_UNITS_FIELD(simple_rnn_args),
    {"activation", TFC_F_ENUM, offsetof(simple_rnn_args, rnn.activation), "tanh",
     TFC_UNBOUNDED, tfc_act_names, "the state's activation (null: linear)"},
    TFC_RNN_COMMON_FIELDS(simple_rnn_args),
    {"bias_initializer", TFC_F_NODE, offsetof(simple_rnn_args, rnn.bias_initializer),
     TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL, "default zeros"},
    {NULL}};

static tfc_simple_rnn_desc simple_rnn_desc(const tfc_layer *l, int n)
{
    const simple_rnn_args *a = l->args;
    tfc_simple_rnn_desc d = {.n = n, .t = (int)l->in_shape[0].dim[0],
                             .in = (int)l->in_shape[0].dim[1], .units = a->rnn.units,
                             .return_sequences = a->rnn.return_sequences,
                             .act = (tfc_act)a->rnn.activation};
    return d;
}

static tfc_status simple_rnn_build(tfc_layer *l, tfc_error *err)
{
    simple_rnn_args *a = l->args;
    if (tfc_rnn_build(l, &a->rnn, err)) return TFC_ERR_CONFIG;
    const int64_t t = l->in_shape[0].dim[0], in = l->in_shape[0].dim[1], u = a->rnn.units;
    /* h and the pre-activation per step; then the input's (rnn.h) */
    l->saved_floats = 2 * t * u + tfc_rnn_saved_floats(l, &a->rnn);
    tfc_init ki, ri, bi;
    if (tfc_rnn_initializers(l, &a->rnn, &ki, &ri, &bi, err)) return TFC_ERR_CONFIG;
    tfc_layer_add_param(l, "kernel", 2, (int64_t[]){in, u}, 1, ki);
    tfc_layer_add_param(l, "recurrent_kernel", 2, (int64_t[]){u, u}, 1, ri);
    if (a->rnn.use_bias) tfc_layer_add_param(l, "bias", 1, (int64_t[]){u}, 1, bi);
    return TFC_OK;
}

static const char *const *simple_rnn_needs(const tfc_layer *l)
{
#define SIMPLE_OPS "simple_rnn_workspace", "simple_rnn_forward", "simple_rnn_backward"
    static const char *const lists[4][9] = {
        {SIMPLE_OPS, NULL},
        {SIMPLE_OPS, TFC_RNN_INPUT_OPS, NULL},
        {SIMPLE_OPS, TFC_RNN_DROPOUT_OPS, NULL},
        {SIMPLE_OPS, TFC_RNN_INPUT_OPS, TFC_RNN_DROPOUT_OPS, NULL}};
#undef SIMPLE_OPS
    const simple_rnn_args *a = l->args;
    return lists[tfc_rnn_needs_index(&a->rnn)];
}

static size_t kernel_ws(const tfc_layer *l, tfc_backend *be)
{
    const simple_rnn_args *a = l->args;
    tfc_simple_rnn_desc d = simple_rnn_desc(l, l->max_batch);
    return tfc_rnn_kernel_ws(l, &a->rnn, be, TFC_RNN_CELL_SIMPLE, 0,
                             be->ops->simple_rnn_workspace(be, &d));
}

static void simple_rnn_plan(tfc_layer *l, tfc_backend *be)
{
    const simple_rnn_args *a = l->args;
    l->workspace = tfc_rnn_workspace(l, &a->rnn, kernel_ws(l, be));
}

/* Saved layout per batch: hseq [n, t, u], pre [n, t, u], then the input's (rnn.h). */
static void saved_parts(const tfc_layer *l, float **h, float **pre, float **extra)
{
    const simple_rnn_args *a = l->args;
    const int64_t hu = (int64_t)l->max_batch * l->in_shape[0].dim[0] * a->rnn.units;
    *h = l->saved;
    *pre = l->saved + hu;
    *extra = l->saved + 2 * hu;
}

static void simple_rnn_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const simple_rnn_args *a = l->args;
    tfc_simple_rnn_desc d = simple_rnn_desc(l, ex->batch);
    float *h, *pre, *extra;
    saved_parts(l, &h, &pre, &extra);
    const float *mask;
    const float *in = tfc_rnn_forward_input(l, &a->rnn, ex, x[0], extra, &mask);
    if (tfc_rnn_recurrent(&a->rnn, ex)) { /* the pre-activations: the same floats */
        tfc_rnn_dropout_desc dd =
            tfc_rnn_dropout_desc_of(l, &a->rnn, ex, TFC_RNN_CELL_SIMPLE, 0);
        ex->be->ops->rnn_dropout_forward(ex->be, &dd, in, l->params[0].data, l->params[1].data,
                                         a->rnn.use_bias ? l->params[2].data : NULL, mask, y,
                                         h, pre, ex->ws);
        return;
    }
    ex->be->ops->simple_rnn_forward(ex->be, &d, in, l->params[0].data, l->params[1].data,
                                    a->rnn.use_bias ? l->params[2].data : NULL, mask, y, h, pre,
                                    ex->ws);
}

static void simple_rnn_backward(tfc_layer *l, tfc_exec *ex, const void *const *x,
                                const float *y, const float *dy, float *const *dx)
{
    (void)y;
    const simple_rnn_args *a = l->args;
    tfc_simple_rnn_desc d = simple_rnn_desc(l, ex->batch);
    float *h, *pre, *extra;
    saved_parts(l, &h, &pre, &extra);
    float *din = tfc_rnn_dx(l, &a->rnn, ex, kernel_ws(l, ex->be), dx[0]);
    if (tfc_rnn_recurrent(&a->rnn, ex)) {
        tfc_rnn_dropout_desc dd =
            tfc_rnn_dropout_desc_of(l, &a->rnn, ex, TFC_RNN_CELL_SIMPLE, 0);
        ex->be->ops->rnn_dropout_backward(
            ex->be, &dd, tfc_rnn_input(l, &a->rnn, ex, x[0], extra), l->params[0].data,
            l->params[1].data, tfc_rnn_mask(l, &a->rnn, extra), h, pre, dy, din,
            l->params[0].grad, l->params[1].grad, a->rnn.use_bias ? l->params[2].grad : NULL,
            ex->ws);
        tfc_rnn_input_done(l, &a->rnn, ex, din, dx[0]);
        return;
    }
    ex->be->ops->simple_rnn_backward(
        ex->be, &d, tfc_rnn_input(l, &a->rnn, ex, x[0], extra), l->params[0].data,
        l->params[1].data, tfc_rnn_mask(l, &a->rnn, extra), h, pre, dy, din, l->params[0].grad,
        l->params[1].grad, a->rnn.use_bias ? l->params[2].grad : NULL, ex->ws);
    tfc_rnn_input_done(l, &a->rnn, ex, din, dx[0]);
}

const tfc_layer_ops tfc_simple_rnn_ops = {
    .type = "SimpleRNN", .schema = simple_rnn_fields, .args_size = sizeof(simple_rnn_args),
    .min_inputs = 1, .max_inputs = 1, .cpu_first = 1, .needs = simple_rnn_needs,
    .build = simple_rnn_build, .plan = simple_rnn_plan, .forward = simple_rnn_forward,
    .backward = simple_rnn_backward,
};
