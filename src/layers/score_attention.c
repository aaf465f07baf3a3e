/* Attention (keras.layers.Attention, Luong's) and AdditiveAttention (Bahdanau's) over
 * sequences: inputs [query, value] or [query, value, key], query [Tq, dim], value [Tv, dv],
 * key [Tv, dim] (the key defaults to the value). For query row i and key j:
 *   Attention, score_mode dot:     s_ij = c q_i . k_j
 *   Attention, score_mode concat:  s_ij = w sum_d tanh(c (q_id + k_jd))
 *   AdditiveAttention:             s_ij = sum_d c_d tanh(q_id + k_jd)
 * with the learned scale c (a scalar `scale`, or AdditiveAttention's [dim] vector; 1 without
 * use_scale) and w the scalar `concat_score_weight`. Keys masked by the value's sequence mask,
 * or with use_causal_mask j > i, get s_ij - 1e9; p_i = softmax(s_i), y_i = sum_j p_ij z_ij v_j
 * (z: dropout in training), and y_i = 0 on a row the query's mask marks padding. The output
 * keeps the query's mask (Keras's compute_mask). The backend's score_attention ops do the
 * work; the layer keeps p (Tq Tv floats per example) for backward. */
#include "layers/layer.h"

#include "core/rng.h"

typedef struct satt_args {
    int use_scale, score_mode, use_causal_mask, seed, return_attention_scores;
    double dropout;
} satt_args;

static const char *const score_mode_names[] = {"dot", "concat", NULL};

#define SATT_CALL_FIELDS(type)                                                                  \
    {"use_causal_mask", TFC_F_BOOL, offsetof(satt_args, use_causal_mask), "false",              \
     TFC_UNBOUNDED, NULL, "query i sees keys j <= i (Keras: a call argument)"},                 \
        TFC_FIXED_FIELD("return_attention_scores", "false",                                     \
                        type "'s second output (a call argument in Keras) is not supported")

static const tfc_field attention_fields[] = {
    {"use_scale", TFC_F_BOOL, offsetof(satt_args, use_scale), "false", TFC_UNBOUNDED, NULL,
     "a learned scalar `scale` on the scores"},
    {"score_mode", TFC_F_ENUM, offsetof(satt_args, score_mode), "dot", TFC_UNBOUNDED,
     score_mode_names, "dot or concat"},
    {"dropout", TFC_F_FLOAT, offsetof(satt_args, dropout), "0", 0, 0.999999, NULL,
     "dropout on the attention weights, in [0, 1)"},
    {"seed", TFC_F_INT, offsetof(satt_args, seed), TFC_NO_DEFAULT, 0, 2147483647, NULL,
     "mixed into the run's seed for the dropout masks (none or 0: the run's alone)"},
    SATT_CALL_FIELDS("Attention"),
    {NULL}};

static const tfc_field additive_fields[] = {
    {"use_scale", TFC_F_BOOL, offsetof(satt_args, use_scale), "true", TFC_UNBOUNDED, NULL,
     "a learned [dim] vector `scale` on the tanh terms"},
    {"dropout", TFC_F_FLOAT, offsetof(satt_args, dropout), "0", 0, 0.999999, NULL,
     "dropout on the attention weights, in [0, 1)"},
    SATT_CALL_FIELDS("AdditiveAttention"),
    {NULL}};

static int is_additive(const tfc_layer *l)
{
    return l->ops->schema == additive_fields;
}

static int mode_of(const tfc_layer *l)
{
    const satt_args *a = l->args;
    return is_additive(l) ? TFC_SCORE_ADDITIVE
                          : a->score_mode ? TFC_SCORE_CONCAT : TFC_SCORE_DOT;
}

/* the input the key comes from */
static int key_input(const tfc_layer *l)
{
    return l->ninputs > 2 ? 2 : 1;
}

static tfc_status satt_build(tfc_layer *l, tfc_error *err)
{
    const satt_args *a = l->args;
    if (tfc_attention_inputs_check(l, err)) return TFC_ERR_CONFIG;
    const tfc_shape *q = &l->in_shape[0], *v = &l->in_shape[1], *k = &l->in_shape[key_input(l)];
    if (k->dim[1] != q->dim[1])
        return tfc_layer_error(err, l, "query has %lld features and %s %lld: they must match",
                               (long long)q->dim[1], l->ninputs > 2 ? "key" : "value",
                               (long long)k->dim[1]);
    /* Keras: the value's mask hides keys, the query's zeroes rows and is the output's; a
     * key's own mask is not read */
    if ((l->mask_inputs & 3u) == 3u && q->dim[0] != v->dim[0])
        return tfc_layer_error(err, l, "query (%lld steps) and value (%lld steps) carry the one "
                                       "sequence mask but differ in length",
                               (long long)q->dim[0], (long long)v->dim[0]);
    l->out_shape = tfc_shape_make(2, (int64_t[]){q->dim[0], v->dim[1]});
    l->mask_out = (l->mask_inputs & 1u) != 0;
    if (is_additive(l)) {
        if (a->use_scale)
            tfc_layer_add_param(l, "scale", 1, (int64_t[]){q->dim[1]}, 1,
                                tfc_init_make(TFC_INIT_GLOROT_UNIFORM));
    } else {
        if (a->use_scale) tfc_layer_add_param(l, "scale", 0, NULL, 1,
                                              tfc_init_make(TFC_INIT_ONES));
        if (a->score_mode)
            tfc_layer_add_param(l, "concat_score_weight", 0, NULL, 1,
                                tfc_init_make(TFC_INIT_ONES));
    }
    l->saved_floats = q->dim[0] * v->dim[0]; /* p */
    return TFC_OK;
}

/* Backward's scratch: ds [batch, Tq, Tv]; none on a backend bound for inference only */
static void satt_plan(tfc_layer *l, tfc_backend *be)
{
    l->workspace = be->frozen ? 0 : (size_t)l->max_batch * (size_t)l->saved_floats * 4;
}

static const char *const *satt_needs(const tfc_layer *l)
{
    (void)l;
    static const char *const ops[] = {"score_attention_forward", "score_attention_backward",
                                      NULL};
    return ops;
}

static tfc_score_attn_desc satt_desc(const tfc_layer *l, const tfc_exec *ex)
{
    const satt_args *a = l->args;
    tfc_score_attn_desc d = {.n = ex->batch, .tq = (int)l->in_shape[0].dim[0],
                             .tv = (int)l->in_shape[1].dim[0],
                             .dim = (int)l->in_shape[0].dim[1],
                             .dv = (int)l->in_shape[1].dim[1], .mode = mode_of(l),
                             .causal = a->use_causal_mask};
    d.qmask = (l->mask_inputs & 1u) ? l->mask : NULL;
    d.kmask = (l->mask_inputs & 2u) ? l->mask : NULL;
    if (ex->training && a->dropout > 0) {
        d.rate = (float)a->dropout;
        d.key = !is_additive(l) && a->seed ? tfc_rng_key(l->rng_key, (uint64_t)a->seed)
                                           : l->rng_key;
        d.step = ex->step;
    }
    return d;
}

/* The scale and concat_score_weight parameters, NULL where the layer has none */
static tfc_param *scale_param(tfc_layer *l)
{
    const satt_args *a = l->args;
    return a->use_scale ? &l->params[0] : NULL;
}

static tfc_param *cw_param(tfc_layer *l)
{
    return mode_of(l) == TFC_SCORE_CONCAT ? &l->params[l->nparams - 1] : NULL;
}

static void satt_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    tfc_score_attn_desc d = satt_desc(l, ex);
    tfc_param *sp = scale_param(l), *cp = cw_param(l);
    ex->be->ops->score_attention_forward(ex->be, &d, x[0], x[key_input(l)], x[1],
                                         sp ? sp->data : NULL, cp ? cp->data : NULL, y,
                                         l->saved);
}

static void satt_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                          const float *dy, float *const *dx)
{
    (void)y;
    tfc_score_attn_desc d = satt_desc(l, ex);
    tfc_param *sp = scale_param(l), *cp = cw_param(l);
    ex->be->ops->score_attention_backward(ex->be, &d, x[0], x[key_input(l)], x[1],
                                          sp ? sp->data : NULL, cp ? cp->data : NULL, l->saved,
                                          dy, ex->ws, dx[0], dx[key_input(l)], dx[1],
                                          sp ? sp->grad : NULL, cp ? cp->grad : NULL);
}

const tfc_layer_ops tfc_attention_ops = {
    .type = "Attention", .schema = attention_fields, .args_size = sizeof(satt_args),
    .min_inputs = 2, .max_inputs = 3, .needs = satt_needs, .cpu_first = 1,
    .build = satt_build, .plan = satt_plan, .forward = satt_forward, .backward = satt_backward,
};

const tfc_layer_ops tfc_additive_attention_ops = {
    .type = "AdditiveAttention", .schema = additive_fields, .args_size = sizeof(satt_args),
    .min_inputs = 2, .max_inputs = 3, .needs = satt_needs, .cpu_first = 1,
    .build = satt_build, .plan = satt_plan, .forward = satt_forward, .backward = satt_backward,
};
