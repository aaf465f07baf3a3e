/* GroupQueryAttention (keras.layers.GroupQueryAttention, class GroupedQueryAttention) over
 * sequences: query [Tq, d], value [Tk, d] (the query's features), key [Tk, dk_in] (key
 * defaults to value, value to query). Hq = num_query_heads, Hkv = num_key_value_heads,
 * R = Hq / Hkv, h = head_dim:
 *   Q = query Wq + bq   [Tq, Hq, h]        K = key Wk + bk   [Tk, Hkv, h]
 *   V = value Wv + bv   [Tk, Hkv, h]       K', V' = K, V with each head repeated R times
 *                                          (query head u reads key/value head u / R)
 *   O_u = softmax(Q_u K'_u^T / sqrt(h), masked) V'_u      (MultiHeadAttention's attention op)
 *   G = sigmoid(query Wg + bg)  [Tq, Hq, h]   (use_gate; else G = 1)
 *   y = (O * G) Wo + bo   [Tq, d]
 * Backward: dOG = dy Wo^T; dO = dOG G; dG = dOG O; the attention op gives dQ, dK', dV';
 * dK, dV sum dK', dV' over each head's R copies; then, per projection P of input x:
 * dW += x^T dP, db += sum dP, dx += dP W^T (gradients accumulate). Built from the ops
 * MultiHeadAttention uses (gemm, copy2d for the repeat, mul and sigmoid for the gate): no
 * kernel of its own. */
#include "layers/layer.h"

typedef struct gqa_args {
    int head_dim, num_query_heads, num_key_value_heads, use_bias, use_gate, use_causal_mask;
    int sliding_window, seed;
    double dropout;
    const tfc_node *flash_attention, *kernel_initializer, *bias_initializer;
} gqa_args;

static const tfc_field gqa_fields[] = {
    {"head_dim", TFC_F_INT, offsetof(gqa_args, head_dim), NULL, 1, 1 << 16, NULL,
     "size of each attention head"},
    {"num_query_heads", TFC_F_INT, offsetof(gqa_args, num_query_heads), NULL, 1, 4096, NULL,
     "query heads"},
    {"num_key_value_heads", TFC_F_INT, offsetof(gqa_args, num_key_value_heads), NULL, 1, 4096,
     NULL, "key and value heads, each shared by num_query_heads / num_key_value_heads query "
     "heads"},
    {"dropout", TFC_F_FLOAT, offsetof(gqa_args, dropout), "0", 0, 0.999999, NULL,
     "dropout on the attention probabilities, in [0, 1)"},
    {"use_bias", TFC_F_BOOL, offsetof(gqa_args, use_bias), "true", TFC_UNBOUNDED, NULL,
     "bias vectors in the projections"},
    {"sliding_window", TFC_F_INT, offsetof(gqa_args, sliding_window), TFC_NO_DEFAULT, 1,
     1 << 30, NULL, "query i sees keys j with |i - j| < sliding_window (default: all)"},
    {"flash_attention", TFC_F_NODE, offsetof(gqa_args, flash_attention), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "null, true or false: tfc's attention is always blockwise"},
    {"kernel_initializer", TFC_F_NODE, offsetof(gqa_args, kernel_initializer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "default glorot_uniform"},
    {"bias_initializer", TFC_F_NODE, offsetof(gqa_args, bias_initializer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "default zeros"},
    TFC_REGULARIZER_FIELD("kernel_regularizer"),
    TFC_REGULARIZER_FIELD("bias_regularizer"),
    TFC_FIXED_FIELD("activity_regularizer", TFC_NO_DEFAULT,
                    "Keras applies it to each projection's output too; tfc has no form of that"),
    TFC_CONSTRAINT_FIELD("kernel_constraint"),
    TFC_CONSTRAINT_FIELD("bias_constraint"),
    {"use_gate", TFC_F_BOOL, offsetof(gqa_args, use_gate), "false", TFC_UNBOUNDED, NULL,
     "gate the attention output by sigmoid(query Wg + bg)"},
    {"seed", TFC_F_INT, offsetof(gqa_args, seed), "0", 0, 2147483647, NULL,
     "mixed into the run's seed for the dropout masks"},
    {"use_causal_mask", TFC_F_BOOL, offsetof(gqa_args, use_causal_mask), "false",
     TFC_UNBOUNDED, NULL, "query i sees keys j <= i (Keras: a call argument)"},
    {NULL}};

enum { PQ, PK, PG, PV, PO }; /* the projections, in Keras's variable order (PG: use_gate) */

/* The sizes the passes use, from the built layer. */
typedef struct gqa_dims {
    int tq, tk, d, dkin, hq, hkv, hd, rep, gate;
    int vi, ki; /* the inputs value and key come from */
} gqa_dims;

static gqa_dims dims_of(const tfc_layer *l)
{
    const gqa_args *a = l->args;
    gqa_dims m;
    m.vi = l->ninputs > 1 ? 1 : 0;
    m.ki = l->ninputs > 2 ? 2 : m.vi;
    m.tq = (int)l->in_shape[0].dim[0], m.d = (int)l->in_shape[0].dim[1];
    m.tk = (int)l->in_shape[m.vi].dim[0], m.dkin = (int)l->in_shape[m.ki].dim[1];
    m.hq = a->num_query_heads, m.hkv = a->num_key_value_heads, m.hd = a->head_dim;
    m.rep = m.hq / m.hkv, m.gate = a->use_gate;
    return m;
}

static tfc_param *kernel(tfc_layer *l, int p)
{
    const gqa_args *a = l->args;
    int slot = p - (p > PG && !a->use_gate);
    return &l->params[a->use_bias ? 2 * slot : slot];
}

static tfc_param *bias(tfc_layer *l, int p)
{
    const gqa_args *a = l->args;
    return a->use_bias ? kernel(l, p) + 1 : NULL;
}

static tfc_status gqa_build(tfc_layer *l, tfc_error *err)
{
    const gqa_args *a = l->args;
    if (tfc_attention_inputs_check(l, err)) return TFC_ERR_CONFIG;
    if (a->num_query_heads % a->num_key_value_heads)
        return tfc_layer_error(err, l, "num_query_heads (%d) must be divisible by "
                                       "num_key_value_heads (%d)",
                               a->num_query_heads, a->num_key_value_heads);
    gqa_dims m = dims_of(l);
    if (l->in_shape[m.vi].dim[1] != m.d)
        return tfc_layer_error(err, l, "query has %d features and value %lld: Keras's "
                                       "GroupQueryAttention needs them equal", m.d,
                               (long long)l->in_shape[m.vi].dim[1]);
    l->out_shape = l->in_shape[0];
    if (tfc_attention_heads_check(l, a->flash_attention, a->dropout, err))
        return TFC_ERR_CONFIG;
    tfc_init ki, bi;
    if (tfc_layer_init_arg(l, a->kernel_initializer, "kernel_initializer",
                           TFC_INIT_GLOROT_UNIFORM, &ki, err) ||
        tfc_layer_init_arg(l, a->bias_initializer, "bias_initializer", TFC_INIT_ZEROS, &bi, err))
        return TFC_ERR_CONFIG;
    static const char *const names[5] = {"query", "key", "gate", "value", "attention_output"};
    for (int p = PQ; p <= PV; p++) {
        if (p == PG && !m.gate) continue;
        const int64_t in = p == PK ? m.dkin : m.d, heads = p == PK || p == PV ? m.hkv : m.hq;
        char name[40];
        snprintf(name, sizeof name, "%s/kernel", names[p]);
        tfc_layer_add_param(l, name, 3, (int64_t[]){in, heads, m.hd}, 1, ki);
        snprintf(name, sizeof name, "%s/bias", names[p]);
        if (a->use_bias) tfc_layer_add_param(l, name, 2, (int64_t[]){heads, m.hd}, 1, bi);
    }
    tfc_layer_add_param(l, "attention_output/kernel", 3, (int64_t[]){m.hq, m.hd, m.d}, 1, ki);
    if (a->use_bias) tfc_layer_add_param(l, "attention_output/bias", 1, (int64_t[]){m.d}, 1, bi);
    /* Q, K', V', O (and G) at Hq heads, and the log-sum-exp of each (head, query row) */
    l->saved_floats = (int64_t)m.hq * ((int64_t)m.tq * ((2 + m.gate) * m.hd + 1) +
                                       (int64_t)m.tk * 2 * m.hd);
    return TFC_OK;
}

/* Scratch, in floats of the largest batch: forward's K or V before the repeat (Hkv heads),
 * O G before the output projection (use_gate); backward's dOG (then dO), dQ, dK', dV', dK or
 * dV summed over the copies, dG and O G. None of backward's on a backend bound for
 * inference only (frozen). */
static void gqa_plan(tfc_layer *l, tfc_backend *be)
{
    gqa_dims m = dims_of(l);
    const size_t B = (size_t)l->max_batch, nq = B * (size_t)m.tq * m.hq * m.hd;
    const size_t nk = B * (size_t)m.tk * m.hq * m.hd, nkv = B * (size_t)m.tk * m.hkv * m.hd;
    size_t fwd = m.rep > 1 ? nkv : 0;
    if (m.gate && nq > fwd) fwd = nq;
    const size_t bwd = 2 * nq + 2 * nk + (m.rep > 1 ? nkv : 0) + (m.gate ? 2 * nq : 0);
    l->workspace = 4 * (be->frozen ? fwd : bwd); /* bwd >= fwd */
}

static const char *const *gqa_needs(const tfc_layer *l)
{
    (void)l;
    static const char *const ops[] = {"attention_forward", "attention_backward", NULL};
    return ops;
}

/* The saved buffers (batch-major, strides of max_batch): Q, K', V', O, lse, G. */
typedef struct gqa_saved {
    float *q, *k, *v, *o, *lse, *g;
} gqa_saved;

static gqa_saved saved_parts(const tfc_layer *l, const gqa_dims *m)
{
    const size_t B = (size_t)l->max_batch, w = (size_t)m->hq * m->hd;
    gqa_saved s;
    s.q = l->saved;
    s.k = s.q + B * (size_t)m->tq * w;
    s.v = s.k + B * (size_t)m->tk * w;
    s.o = s.v + B * (size_t)m->tk * w;
    s.lse = s.o + B * (size_t)m->tq * w;
    s.g = s.lse + B * (size_t)m->tq * m->hq;
    return s;
}

static tfc_attn_desc attn_desc(const tfc_layer *l, const tfc_exec *ex, const gqa_dims *m)
{
    const gqa_args *a = l->args;
    return tfc_attention_desc(l, ex, m->hq, m->hd, m->hd, a->use_causal_mask,
                              a->sliding_window, a->dropout, a->seed);
}

/* The key or value projection at Hq heads: x W + b at Hkv heads into kv (scratch), then each
 * head copied to its rep places of out [rows, Hkv, rep, h]; with rep 1 straight into out. */
static void project_repeated(tfc_exec *ex, const gqa_dims *m, int64_t rows, int in,
                             const void *x, const tfc_param *w, const tfc_param *b, float *kv,
                             float *out)
{
    const int width = m->hkv * m->hd;
    if (m->rep == 1) {
        tfc_proj(ex, rows, in, x, w, b, width, out);
        return;
    }
    tfc_proj(ex, rows, in, x, w, b, width, kv);
    for (int r = 0; r < m->rep; r++)
        ex->be->ops->copy2d(ex->be, rows * m->hkv, m->hd, kv, m->hd, out + (size_t)r * m->hd,
                            m->rep * m->hd, 0);
}

static void gqa_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    gqa_dims m = dims_of(l);
    gqa_saved s = saved_parts(l, &m);
    const tfc_backend_ops *op = ex->be->ops;
    const int64_t rq = (int64_t)ex->batch * m.tq, rk = (int64_t)ex->batch * m.tk;
    const int qw = m.hq * m.hd;
    float *ws = ex->ws;
    tfc_proj(ex, rq, m.d, x[0], kernel(l, PQ), bias(l, PQ), qw, s.q);
    project_repeated(ex, &m, rk, m.dkin, x[m.ki], kernel(l, PK), bias(l, PK), ws, s.k);
    project_repeated(ex, &m, rk, m.d, x[m.vi], kernel(l, PV), bias(l, PV), ws, s.v);
    tfc_attn_desc d = attn_desc(l, ex, &m);
    op->attention_forward(ex->be, &d, s.q, s.k, s.v, s.o, s.lse);
    const float *og = s.o;
    if (m.gate) { /* G = sigmoid(query Wg + bg), kept; O G into the scratch */
        tfc_proj(ex, rq, m.d, x[0], kernel(l, PG), bias(l, PG), qw, s.g);
        op->act_forward(ex->be, TFC_ACT_SIGMOID, rq * qw, qw, s.g, s.g);
        op->mul(ex->be, 1, rq, qw, s.o, s.g, 0, ws, 0);
        og = ws;
    }
    tfc_proj(ex, rq, qw, og, kernel(l, PO), bias(l, PO), m.d, y);
}

/* The key's or value's projection backward from drep [rows, Hq, h] (its R copies of each
 * head): summed into sum [rows, Hkv, h] first (rep > 1). */
static void project_repeated_backward(tfc_exec *ex, const gqa_dims *m, int64_t rows, int in,
                                      const void *x, tfc_param *w, tfc_param *b,
                                      const float *drep, float *sum, float *dx)
{
    if (m->rep > 1) {
        for (int r = 0; r < m->rep; r++)
            ex->be->ops->copy2d(ex->be, rows * m->hkv, m->hd, drep + (size_t)r * m->hd,
                                m->rep * m->hd, sum, m->hd, r > 0);
        drep = sum;
    }
    tfc_proj_backward(ex, rows, in, x, w, b, m->hkv * m->hd, drep, dx);
}

static void gqa_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                         const float *dy, float *const *dx)
{
    (void)y;
    gqa_dims m = dims_of(l);
    gqa_saved s = saved_parts(l, &m);
    const tfc_backend_ops *op = ex->be->ops;
    const int64_t rq = (int64_t)ex->batch * m.tq, rk = (int64_t)ex->batch * m.tk;
    const int qw = m.hq * m.hd;
    float *d_o = ex->ws, *dq = d_o + rq * qw, *dk = dq + rq * qw, *dv = dk + rk * qw;
    float *sum = dv + rk * qw, *dg = sum + (m.rep > 1 ? rk * m.hkv * m.hd : 0), *og = dg + rq * qw;
    tfc_param *wo = kernel(l, PO);
    op->gemm(ex->be, 0, 1, (int)rq, qw, m.d, 1.f, dy, m.d, wo->data, m.d, 0.f, d_o, qw);
    if (m.gate) {
        op->mul(ex->be, 1, rq, qw, s.o, s.g, 0, og, 0);
        tfc_proj_backward(ex, rq, qw, og, wo, bias(l, PO), m.d, dy, NULL);
        op->mul(ex->be, 1, rq, qw, d_o, s.o, 0, dg, 0);                  /* dG = dOG O */
        /* sigmoid's derivative G (1 - G) reads only its output, G: it stands for x too */
        op->act_backward(ex->be, TFC_ACT_SIGMOID, rq * qw, qw, s.g, s.g, dg, og, 1);
        tfc_proj_backward(ex, rq, m.d, x[0], kernel(l, PG), bias(l, PG), qw, og, dx[0]);
        op->mul(ex->be, 1, rq, qw, d_o, s.g, 0, d_o, 0);                 /* dO = dOG G */
    } else {
        tfc_proj_backward(ex, rq, qw, s.o, wo, bias(l, PO), m.d, dy, NULL);
    }
    tfc_attn_desc d = attn_desc(l, ex, &m);
    op->attention_backward(ex->be, &d, s.q, s.k, s.v, s.o, s.lse, d_o, dq, dk, dv);
    tfc_proj_backward(ex, rq, m.d, x[0], kernel(l, PQ), bias(l, PQ), qw, dq, dx[0]);
    project_repeated_backward(ex, &m, rk, m.dkin, x[m.ki], kernel(l, PK), bias(l, PK), dk, sum,
                              dx[m.ki]);
    project_repeated_backward(ex, &m, rk, m.d, x[m.vi], kernel(l, PV), bias(l, PV), dv, sum,
                              dx[m.vi]);
}

const tfc_layer_ops tfc_group_query_attention_ops = {
    .type = "GroupQueryAttention", .class_name = "GroupedQueryAttention",
    .schema = gqa_fields, .args_size = sizeof(gqa_args), .min_inputs = 1, .max_inputs = 3,
    .needs = gqa_needs, .cpu_first = 1,
    .build = gqa_build, .plan = gqa_plan, .forward = gqa_forward, .backward = gqa_backward,
};
