/* Bidirectional (keras.layers.Bidirectional) around an LSTM, a GRU, a SimpleRNN or an RNN of
 * cells (rnn_layer.c): the inner layer twice, forward_<inner> over the sequence and
 * backward_<inner> with go_backwards, joined by merge_mode:  y_t = merge(a_t, b_{T-1-t})
 * (concat [a | b], sum, mul, ave), the backward output re-reversed with return_sequences,
 * else the two last outputs. Under a mask each
 * direction keeps its state over masked steps; the backward one reverses the whole padded
 * sequence with its mask, as Keras does, so with right padding it runs over each sequence's
 * valid steps in reverse; and with return_sequences both outputs are zero at masked steps
 * (Bidirectional sets its layers' zero_output_for_mask). Weights
 * <name>/forward_<inner>/kernel, <name>/backward_<inner>/recurrent_kernel, ... (Keras 3's
 * paths without the cell's segment); <inner> is lstm, gru, simple_rnn or rnn (Keras's snake
 * case of the type). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "layers/rnn.h"

static const char *const merge_names[] = {"concat", "sum", "mul", "ave", NULL};

typedef struct bidir_args {
    const tfc_node *layer, *backward_layer;
    int merge_mode;
} bidir_args;

static const tfc_field bidir_fields[] = {
    {"layer", TFC_F_NODE, offsetof(bidir_args, layer), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "the recurrent layer: {LSTM: {...}}, {GRU: {...}}, {SimpleRNN: {...}} or {RNN: {...}}"},
    {"merge_mode", TFC_F_ENUM, offsetof(bidir_args, merge_mode), "concat", TFC_UNBOUNDED,
     merge_names, "how the two directions' outputs join"},
    {"backward_layer", TFC_F_NODE, offsetof(bidir_args, backward_layer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "not supported: the backward layer is the inner one's copy"},
    TFC_FIXED_FIELD("weights", TFC_NO_DEFAULT, "initial weights come from --weights FILE "
                    "(tfc-train) or the inner layer's initializers"),
    {NULL}};

/* The two directions: layers of their own, built from the inner YAML, whose parameters,
 * saved buffers and mask are this layer's (bound before each pass). */
typedef struct bidir_state {
    tfc_layer dir[2];
    int64_t out_numel; /* one direction's output per example */
    const char *needs[48]; /* an RNN's: both directions' and the merge's */
} bidir_state;

static void bidir_free(tfc_layer *l)
{
    bidir_state *st = l->state;
    if (!st) return;
    for (int k = 0; k < 2; k++) {
        if (st->dir[k].ops && st->dir[k].ops->free_state) st->dir[k].ops->free_state(&st->dir[k]);
        free(st->dir[k].args);
    }
    free(st);
    l->state = NULL;
}

/* Builds direction k (1: backwards) of inner type `ops` from its arguments `node`. */
static tfc_status build_dir(tfc_layer *l, const tfc_layer_ops *ops, const tfc_node *node,
                            int k, tfc_error *err)
{
    bidir_state *st = l->state;
    tfc_layer *d = &st->dir[k];
    char path[128], base[16];
    snprintf(path, sizeof path, "layers[%d].Bidirectional.layer.%s", l->index, ops->type);
    tfc_snake_case(ops->type, base, sizeof base); /* SimpleRNN: simple_rnn */
    d->ops = ops;
    snprintf(d->name, sizeof d->name, "%s_%s", k ? "backward" : "forward", base);
    d->index = l->index;
    d->node = node;
    d->args = calloc(1, ops->args_size);
    if (!d->args) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    if (tfc_schema_apply(ops->schema, node, path, d->args, err)) return TFC_ERR_CONFIG;
    /* Keras penalises each direction's output apart, before the merge: not supported */
    const tfc_node *act_reg = tfc_node_get(node, "activity_regularizer");
    if (act_reg && !tfc_node_is_null(act_reg))
        return tfc_node_error(err, TFC_ERR_CONFIG, act_reg, path,
                              "activity_regularizer inside Bidirectional is not supported (Keras "
                              "penalises each direction's output); put an "
                              "ActivityRegularization layer after the Bidirectional instead");
    tfc_rnn_args *a = d->args; /* LSTM's, GRU's and SimpleRNN's arguments start with it */
    if (a->go_backwards)
        return tfc_layer_error(err, l, "layer.%s.go_backwards: must be false (the backward "
                                       "direction goes backwards)", ops->type);
    a->go_backwards = k;
    d->ninputs = 1;
    d->in_shape[0] = l->in_shape[0];
    d->in_dtype[0] = l->in_dtype[0];
    d->mask_in = l->mask_in;
    d->max_batch = 1;
    if (ops->build(d, err)) return TFC_ERR_CONFIG;
    if (2 * d->nparams > TFC_LAYER_MAX_PARAMS)
        return tfc_layer_error(err, l, "layer: %d weights a direction, more than a layer holds "
                               "(%d in all)", d->nparams, TFC_LAYER_MAX_PARAMS);
    for (int p = 0; p < d->nparams; p++) {
        char name[sizeof d->params[p].name];
        int len = snprintf(name, sizeof name, "%s/%s", d->name, d->params[p].name);
        TFC_ASSERT(len < (int)sizeof name);
        tfc_layer_add_param(l, name, d->params[p].shape.ndim, d->params[p].shape.dim, 1,
                            d->params[p].init);
    }
    return TFC_OK;
}

static tfc_status bidir_build(tfc_layer *l, tfc_error *err)
{
    const bidir_args *a = l->args;
    if (a->backward_layer)
        return tfc_layer_error(err, l, "backward_layer: not supported (the backward direction "
                                       "is a copy of `layer` going backwards)");
    const tfc_node *own = l->node ? tfc_node_get(l->node, "Bidirectional") : NULL;
    const tfc_node *mm = own && own->kind == TFC_NODE_MAP ? tfc_node_get(own, "merge_mode") : NULL;
    if (mm && tfc_node_is_null(mm)) /* Keras's None: the two outputs, a list */
        return tfc_layer_error(err, l, "merge_mode: null (two outputs) is not supported; use "
                                       "concat, sum, mul or ave");
    const tfc_node *n = a->layer;
    if (!n || n->kind != TFC_NODE_MAP || n->n != 1)
        return tfc_layer_error(err, l, "layer: expected one recurrent layer, {LSTM: {...}}, "
                                       "{GRU: {...}} or {SimpleRNN: {...}}");
    const tfc_layer_ops *ops = tfc_layer_lookup(n->keys[0]->str);
    if (!ops || (strcmp(ops->type, "LSTM") && strcmp(ops->type, "GRU") &&
                 strcmp(ops->type, "SimpleRNN") && strcmp(ops->type, "RNN")))
        return tfc_layer_error(err, l, "layer: %s cannot be wrapped (LSTM, GRU, SimpleRNN or "
                               "RNN)", n->keys[0]->str);
    extern const tfc_layer_ops tfc_bidirectional_ops, tfc_bidirectional_cpu_first_ops;
    l->ops = ops->cpu_first ? &tfc_bidirectional_cpu_first_ops : &tfc_bidirectional_ops;
    bidir_free(l);
    l->state = calloc(1, sizeof(bidir_state));
    if (!l->state) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    bidir_state *st = l->state;
    for (int k = 0; k < 2; k++)
        if (build_dir(l, ops, n->vals[0], k, err)) return TFC_ERR_CONFIG;
    tfc_shape out = st->dir[0].out_shape;
    st->out_numel = tfc_shape_numel(&out);
    if (a->merge_mode == TFC_MERGE_CONCAT) out.dim[out.ndim - 1] *= 2;
    l->out_shape = out;
    l->mask_out = st->dir[0].mask_out;
    l->saved_floats = st->dir[0].saved_floats + st->dir[1].saved_floats + 2 * st->out_numel;
    int nn = 0;
    st->needs[nn++] = "bidir_forward";
    st->needs[nn++] = "bidir_backward";
    for (int k = 0; k < 2 && ops->needs; k++)
        for (const char *const *need = ops->needs(&st->dir[k]); need && *need; need++) {
            int seen = 0;
            for (int j = 0; j < nn; j++) seen |= !strcmp(st->needs[j], *need);
            TFC_ASSERT(nn + 1 < (int)(sizeof st->needs / sizeof *st->needs));
            if (!seen) st->needs[nn++] = *need;
        }
    return TFC_OK;
}

static const char *const *bidir_needs(const tfc_layer *l)
{
    static const char *const lstm[] = {"bidir_forward", "bidir_backward", "rnn_input_forward",
                                       "rnn_input_backward", NULL};
    static const char *const gru[] = {"bidir_forward",     "bidir_backward",
                                      "rnn_input_forward", "rnn_input_backward",
                                      "gru_workspace",     "gru_forward",
                                      "gru_backward",      NULL};
    static const char *const simple[] = {"bidir_forward",        "bidir_backward",
                                         "rnn_input_forward",    "rnn_input_backward",
                                         "simple_rnn_workspace", "simple_rnn_forward",
                                         "simple_rnn_backward",  NULL};
    const bidir_state *st = l->state;
    if (!strcmp(st->dir[0].ops->type, "RNN")) return st->needs;
    if (!strcmp(st->dir[0].ops->type, "SimpleRNN")) return simple;
    return strcmp(st->dir[0].ops->type, "GRU") ? lstm : gru;
}

/* Bytes of one direction's output for the largest batch, 64-byte aligned */
static size_t out_bytes(const tfc_layer *l)
{
    const bidir_state *st = l->state;
    return ((size_t)l->max_batch * st->out_numel * sizeof(float) + 63) & ~(size_t)63;
}

static void bidir_plan(tfc_layer *l, tfc_backend *be)
{
    bidir_state *st = l->state;
    size_t most = 0;
    for (int k = 0; k < 2; k++) {
        st->dir[k].max_batch = l->max_batch;
        st->dir[k].ops->plan(&st->dir[k], be);
        if (st->dir[k].workspace > most) most = st->dir[k].workspace;
    }
    /* the directions' output gradients, then the directions' own workspace */
    l->workspace = 2 * out_bytes(l) + most;
}

/* Points the directions at this layer's parameters, saved buffers, mask and random stream;
 * a, b: their outputs (in the saved buffers, read by the backward pass). */
static void bind_dirs(tfc_layer *l, float **a, float **b)
{
    bidir_state *st = l->state;
    float *at = l->saved;
    for (int k = 0, p0 = 0; k < 2; k++) {
        tfc_layer *d = &st->dir[k];
        d->saved = at;
        at += (int64_t)l->max_batch * d->saved_floats;
        d->mask = l->mask;
        d->rng_key = tfc_rng_key(l->rng_key, (uint64_t)k + 1);
        for (int p = 0; p < d->nparams; p++, p0++) {
            d->params[p].data = l->params[p0].data;
            d->params[p].grad = l->params[p0].grad;
        }
    }
    *a = at;
    *b = at + (int64_t)l->max_batch * st->out_numel;
}

/* The directions' exec: this one's, with the workspace past the output gradients */
static tfc_exec dir_exec(const tfc_layer *l, const tfc_exec *ex)
{
    tfc_exec sub = *ex;
    sub.ws = (char *)ex->ws + 2 * out_bytes(l);
    return sub;
}

/* The merge's steps and mask: every step with return_sequences, else the last outputs */
static int merge_steps(const tfc_layer *l)
{
    return l->out_shape.ndim == 2 ? (int)l->out_shape.dim[0] : 1;
}

static void bidir_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const bidir_args *args = l->args;
    bidir_state *st = l->state;
    float *a, *b;
    bind_dirs(l, &a, &b);
    tfc_exec sub = dir_exec(l, ex);
    st->dir[0].ops->forward(&st->dir[0], &sub, x, a);
    st->dir[1].ops->forward(&st->dir[1], &sub, x, b);
    const int t = merge_steps(l);
    ex->be->ops->bidir_forward(ex->be, ex->batch, t, (int)(st->out_numel / t),
                               (tfc_merge_mode)args->merge_mode, t > 1 ? l->mask : NULL, a, b, y);
}

static void bidir_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                           const float *dy, float *const *dx)
{
    const bidir_args *args = l->args;
    bidir_state *st = l->state;
    float *a, *b;
    bind_dirs(l, &a, &b);
    float *da = ex->ws, *db = (float *)((char *)ex->ws + out_bytes(l));
    const int t = merge_steps(l);
    ex->be->ops->bidir_backward(ex->be, ex->batch, t, (int)(st->out_numel / t),
                                (tfc_merge_mode)args->merge_mode, t > 1 ? l->mask : NULL, a, b,
                                dy, da, db);
    tfc_exec sub = dir_exec(l, ex);
    st->dir[0].ops->backward(&st->dir[0], &sub, x, a, da, dx);
    st->dir[1].ops->backward(&st->dir[1], &sub, x, b, db, dx);
}

const tfc_layer *tfc_bidirectional_direction(const tfc_layer *l, int k)
{
    const bidir_state *st = l->state;
    return &st->dir[k];
}

#define BIDIR_OPS(sym, first)                                                                \
    const tfc_layer_ops sym = {                                                              \
        .type = "Bidirectional", .schema = bidir_fields, .args_size = sizeof(bidir_args),    \
        .min_inputs = 1, .max_inputs = 1, .cpu_first = first, .needs = bidir_needs,          \
        .build = bidir_build, .plan = bidir_plan, .forward = bidir_forward,                  \
        .backward = bidir_backward, .free_state = bidir_free,                                \
    }
BIDIR_OPS(tfc_bidirectional_ops, 0);
/* the same around an inner layer that is CPU-first (an RNN; build switches to it) */
BIDIR_OPS(tfc_bidirectional_cpu_first_ops, 1);
