/* MultiHeadAttention (keras.layers.MultiHeadAttention) over sequences: query [Tq, dq],
 * value [Tk, dv_in], key [Tk, dk_in] (key defaults to value, value to query: self-attention).
 *   Q = query Wq + bq   [Tq, H, key_dim]       K = key Wk + bk   [Tk, H, key_dim]
 *   V = value Wv + bv   [Tk, H, value_dim]
 *   O_h = softmax(Q_h K_h^T / sqrt(key_dim), masked) V_h      (the backend's attention op)
 *   y = O Wo + bo       [Tq, d_out]
 * Backward: dO = dy Wo^T; the attention op gives dQ, dK, dV; then, per projection P of input
 * x: dW += x^T dP, db += sum dP, dx += dP W^T. The scores are never stored: the layer keeps
 * Q, K, V, O and each row's log-sum-exp, O(T) per head. */
#include "layers/layer.h"

typedef struct mha_args {
    int num_heads, key_dim, value_dim, use_bias, use_causal_mask, sliding_window, seed;
    double dropout;
    tfc_int_list output_shape, attention_axes;
    const tfc_node *flash_attention, *kernel_initializer, *bias_initializer;
} mha_args;

static const tfc_field mha_fields[] = {
    {"num_heads", TFC_F_INT, offsetof(mha_args, num_heads), NULL, 1, 4096, NULL,
     "attention heads"},
    {"key_dim", TFC_F_INT, offsetof(mha_args, key_dim), NULL, 1, 1 << 16, NULL,
     "size of each head for query and key"},
    {"value_dim", TFC_F_INT, offsetof(mha_args, value_dim), TFC_NO_DEFAULT, 1, 1 << 16, NULL,
     "size of each head for value (default key_dim)"},
    {"dropout", TFC_F_FLOAT, offsetof(mha_args, dropout), "0", 0, 0.999999, NULL,
     "dropout on the attention probabilities, in [0, 1)"},
    {"use_bias", TFC_F_BOOL, offsetof(mha_args, use_bias), "true", TFC_UNBOUNDED, NULL,
     "bias vectors in the four projections"},
    {"output_shape", TFC_F_INT_LIST, offsetof(mha_args, output_shape), TFC_NO_DEFAULT, 1,
     1 << 24, NULL, "output features (default: the query's last axis)"},
    {"attention_axes", TFC_F_INT_LIST, offsetof(mha_args, attention_axes), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "only the default (the time axis, 1)"},
    {"use_causal_mask", TFC_F_BOOL, offsetof(mha_args, use_causal_mask), "false",
     TFC_UNBOUNDED, NULL, "query i sees keys j <= i (Keras: a call argument)"},
    {"sliding_window", TFC_F_INT, offsetof(mha_args, sliding_window), TFC_NO_DEFAULT, 1,
     1 << 30, NULL, "query i sees keys j with |i - j| < sliding_window (default: all)"},
    {"flash_attention", TFC_F_NODE, offsetof(mha_args, flash_attention), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "null, true or false: tfc's attention is always blockwise"},
    {"seed", TFC_F_INT, offsetof(mha_args, seed), "0", 0, 2147483647, NULL,
     "mixed into the run's seed for the dropout masks"},
    {"kernel_initializer", TFC_F_NODE, offsetof(mha_args, kernel_initializer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "default glorot_uniform"},
    {"bias_initializer", TFC_F_NODE, offsetof(mha_args, bias_initializer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "default zeros"},
    TFC_REGULARIZER_FIELD("kernel_regularizer"), TFC_REGULARIZER_FIELD("bias_regularizer"),
    /* Keras passes it to the query, key, value and output projections (EinsumDense layers),
     * each adding its penalty; the layer's output alone would be a quarter of it */
    TFC_FIXED_FIELD("activity_regularizer", TFC_NO_DEFAULT,
                    "Keras penalises the query, key and value projections' outputs as well "
                    "as the layer's, which tfc has no form of yet; put an "
                    "ActivityRegularization layer after it for the output's"),
    TFC_CONSTRAINT_FIELD("kernel_constraint"), TFC_CONSTRAINT_FIELD("bias_constraint"),
    TFC_FIXED_FIELD("use_gate", "false", "tfc's MultiHeadAttention has no gate"),
    {NULL}};

enum { PQ, PK, PV, PO }; /* the four projections, in Keras's variable order */

/* The sizes the passes use, from the built layer. */
typedef struct mha_dims {
    int tq, tk, dq, dkin, dvin, heads, kd, vd, dout;
    int vi, ki; /* the inputs value and key come from */
} mha_dims;

static mha_dims dims_of(const tfc_layer *l)
{
    const mha_args *a = l->args;
    mha_dims m;
    m.vi = l->ninputs > 1 ? 1 : 0;
    m.ki = l->ninputs > 2 ? 2 : m.vi;
    m.tq = (int)l->in_shape[0].dim[0], m.dq = (int)l->in_shape[0].dim[1];
    m.tk = (int)l->in_shape[m.vi].dim[0], m.dvin = (int)l->in_shape[m.vi].dim[1];
    m.dkin = (int)l->in_shape[m.ki].dim[1];
    m.heads = a->num_heads, m.kd = a->key_dim, m.vd = a->value_dim ? a->value_dim : a->key_dim;
    m.dout = (int)l->out_shape.dim[1];
    return m;
}

static tfc_param *kernel(tfc_layer *l, int p)
{
    const mha_args *a = l->args;
    return &l->params[a->use_bias ? 2 * p : p];
}

static tfc_param *bias(tfc_layer *l, int p)
{
    const mha_args *a = l->args;
    return a->use_bias ? &l->params[2 * p + 1] : NULL;
}

static tfc_status mha_build(tfc_layer *l, tfc_error *err)
{
    const mha_args *a = l->args;
    if (tfc_attention_inputs_check(l, err)) return TFC_ERR_CONFIG;
    if (a->attention_axes.n && (a->attention_axes.n != 1 || a->attention_axes.v[0] != 1))
        return tfc_layer_error(err, l, "attention_axes: only the default (the time axis, [1]) "
                                       "is supported");
    if (a->output_shape.n > 1)
        return tfc_layer_error(err, l, "output_shape: only one axis (features) is supported, "
                                       "given %d", a->output_shape.n);
    int64_t tq = l->in_shape[0].dim[0], dq = l->in_shape[0].dim[1];
    int64_t dout = a->output_shape.n ? a->output_shape.v[0] : dq;
    l->out_shape = tfc_shape_make(2, (int64_t[]){tq, dout});
    if (tfc_attention_heads_check(l, a->flash_attention, a->dropout, err))
        return TFC_ERR_CONFIG;
    mha_dims m = dims_of(l);
    tfc_init ki, bi;
    if (tfc_layer_init_arg(l, a->kernel_initializer, "kernel_initializer",
                           TFC_INIT_GLOROT_UNIFORM, &ki, err) ||
        tfc_layer_init_arg(l, a->bias_initializer, "bias_initializer", TFC_INIT_ZEROS, &bi, err))
        return TFC_ERR_CONFIG;
    const int64_t in[3] = {m.dq, m.dkin, m.dvin}, width[3] = {m.kd, m.kd, m.vd};
    static const char *const names[4][2] = {{"query/kernel", "query/bias"},
                                            {"key/kernel", "key/bias"},
                                            {"value/kernel", "value/bias"},
                                            {"attention_output/kernel",
                                             "attention_output/bias"}};
    for (int p = PQ; p <= PV; p++) {
        tfc_layer_add_param(l, names[p][0], 3, (int64_t[]){in[p], m.heads, width[p]}, 1, ki);
        if (a->use_bias)
            tfc_layer_add_param(l, names[p][1], 2, (int64_t[]){m.heads, width[p]}, 1, bi);
    }
    tfc_layer_add_param(l, names[PO][0], 3, (int64_t[]){m.heads, m.vd, dout}, 1, ki);
    if (a->use_bias) tfc_layer_add_param(l, names[PO][1], 1, (int64_t[]){dout}, 1, bi);
    /* Q, K, V, O and the log-sum-exp of each (head, query row) */
    l->saved_floats = (int64_t)m.heads * ((int64_t)m.tq * (m.kd + m.vd + 1) +
                                          (int64_t)m.tk * (m.kd + m.vd));
    return TFC_OK;
}

/* Backward's scratch: dO, dQ, dK, dV of the batch; none on a backend bound for inference
 * only (frozen): forward keeps Q, K, V, O and the log-sum-exp in the saved buffer. */
static void mha_plan(tfc_layer *l, tfc_backend *be)
{
    mha_dims m = dims_of(l);
    l->workspace = be->frozen ? 0
                              : (size_t)l->max_batch * (size_t)m.heads * (size_t)(m.tq + m.tk) *
                                    (size_t)(m.kd + m.vd) * 4;
}

static const char *const *mha_needs(const tfc_layer *l)
{
    (void)l;
    static const char *const ops[] = {"attention_forward", "attention_backward", NULL};
    return ops;
}

/* The saved buffers (batch-major, strides of max_batch): Q, K, V, O, lse. */
typedef struct mha_saved {
    float *q, *k, *v, *o, *lse;
} mha_saved;

static mha_saved saved_parts(const tfc_layer *l, const mha_dims *m)
{
    const size_t B = (size_t)l->max_batch, H = (size_t)m->heads;
    mha_saved s;
    s.q = l->saved;
    s.k = s.q + B * (size_t)m->tq * H * (size_t)m->kd;
    s.v = s.k + B * (size_t)m->tk * H * (size_t)m->kd;
    s.o = s.v + B * (size_t)m->tk * H * (size_t)m->vd;
    s.lse = s.o + B * (size_t)m->tq * H * (size_t)m->vd;
    return s;
}

static tfc_attn_desc attn_desc(const tfc_layer *l, const tfc_exec *ex, const mha_dims *m)
{
    const mha_args *a = l->args;
    return tfc_attention_desc(l, ex, m->heads, m->kd, m->vd, a->use_causal_mask,
                              a->sliding_window, a->dropout, a->seed);
}

static void mha_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    mha_dims m = dims_of(l);
    mha_saved s = saved_parts(l, &m);
    const int64_t rq = (int64_t)ex->batch * m.tq, rk = (int64_t)ex->batch * m.tk;
    const int qw = m.heads * m.kd, vw = m.heads * m.vd;
    tfc_proj(ex, rq, m.dq, x[0], kernel(l, PQ), bias(l, PQ), qw, s.q);
    tfc_proj(ex, rk, m.dkin, x[m.ki], kernel(l, PK), bias(l, PK), qw, s.k);
    tfc_proj(ex, rk, m.dvin, x[m.vi], kernel(l, PV), bias(l, PV), vw, s.v);
    tfc_attn_desc d = attn_desc(l, ex, &m);
    ex->be->ops->attention_forward(ex->be, &d, s.q, s.k, s.v, s.o, s.lse);
    tfc_proj(ex, rq, vw, s.o, kernel(l, PO), bias(l, PO), m.dout, y);
}

static void mha_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                         const float *dy, float *const *dx)
{
    (void)y;
    mha_dims m = dims_of(l);
    mha_saved s = saved_parts(l, &m);
    const int64_t rq = (int64_t)ex->batch * m.tq, rk = (int64_t)ex->batch * m.tk;
    const int qw = m.heads * m.kd, vw = m.heads * m.vd;
    float *d_o = ex->ws, *dq = d_o + rq * vw, *dk = dq + rq * qw, *dv = dk + rk * qw;
    tfc_param *wo = kernel(l, PO);
    ex->be->ops->gemm(ex->be, 0, 1, (int)rq, vw, m.dout, 1.f, dy, m.dout, wo->data, m.dout, 0.f,
                      d_o, vw);
    tfc_proj_backward(ex, rq, vw, s.o, wo, bias(l, PO), m.dout, dy, NULL);
    tfc_attn_desc d = attn_desc(l, ex, &m);
    ex->be->ops->attention_backward(ex->be, &d, s.q, s.k, s.v, s.o, s.lse, d_o, dq, dk, dv);
    tfc_proj_backward(ex, rq, m.dq, x[0], kernel(l, PQ), bias(l, PQ), qw, dq, dx[0]);
    tfc_proj_backward(ex, rk, m.dkin, x[m.ki], kernel(l, PK), bias(l, PK), qw, dk, dx[m.ki]);
    tfc_proj_backward(ex, rk, m.dvin, x[m.vi], kernel(l, PV), bias(l, PV), vw, dv, dx[m.vi]);
}

const tfc_layer_ops tfc_multi_head_attention_ops = {
    .type = "MultiHeadAttention", .schema = mha_fields, .args_size = sizeof(mha_args),
    .min_inputs = 1, .max_inputs = 3, .needs = mha_needs,
    .build = mha_build, .plan = mha_plan, .forward = mha_forward, .backward = mha_backward,
};
