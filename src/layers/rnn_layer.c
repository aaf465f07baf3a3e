/* RNN (keras.layers.RNN) around a cell: LSTMCell, GRUCell or SimpleRNNCell (the LSTM, GRU and
 * SimpleRNN layers' step), or a StackedRNNCells of them, whose cells run one after another at
 * each step: cell k reads cell k-1's output h^{k-1}_t, the stack's output is the last cell's.
 * A cell here is the recurrent layer of its arguments (lstm.c, gru.c, simple_rnn.c, on the
 * same kernels) taking the RNN's return_sequences, go_backwards and unroll; a stack is those
 * layers one after another, every one but the last returning sequences, which is the same
 * thing: cell k's state at step t reads h^{k-1}_t alone, and under a mask every cell keeps its
 * state at a masked step. Going backwards, the first cell reverses the sequence (rnn.h) and
 * the others run forwards over its reversed order, under the reversed mask.
 * zero_output_for_mask: with a mask the output is 0 at each masked step (in the output's
 * order), the last output too when the last step is masked, as Keras's rnn():
 *   y[i, s] = m[i, s] h[i, s]   (return_sequences),   y[i] = m[i, T-1] h[i, T-1]   (else).
 * Keras's list of cells is a StackedRNNCells of them.
 * Weights: Keras 3's paths with the RNN's cell segment dropped, as the LSTM's (rnn/kernel for
 * rnn/lstm_cell/kernel); a stack's cells keep theirs, Keras's snake case of the cell's type
 * numbered within the stack (rnn/lstm_cell/kernel, rnn/lstm_cell_1/kernel, rnn/gru_cell/...),
 * where Keras's are rnn/stacked_rnn_cells/lstm_cell_N/kernel with N unique in the model. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/rng.h"
#include "layers/rnn.h"

#define MAX_CELLS 8

extern const tfc_layer_ops tfc_lstm_ops, tfc_gru_ops, tfc_simple_rnn_ops;

/* The cells: Keras's class, the layer that runs it, its snake case (weights in a stack) */
static const struct {
    const char *type;
    const tfc_layer_ops *ops;
    const char *snake;
} cells[] = {{"LSTMCell", &tfc_lstm_ops, "lstm_cell"},
             {"GRUCell", &tfc_gru_ops, "gru_cell"},
             {"SimpleRNNCell", &tfc_simple_rnn_ops, "simple_rnn_cell"}};

/* The layer's arguments that are the RNN's, not its cell's */
static const char *const rnn_own[] = {"return_sequences", "return_state", "go_backwards",
                                      "stateful",         "unroll",       "use_cudnn",
                                      "activity_regularizer", NULL};

static int cell_index(const char *type)
{
    for (int i = 0; i < (int)(sizeof cells / sizeof *cells); i++)
        if (!strcmp(cells[i].type, type)) return i;
    return -1;
}

int tfc_rnn_cell_schema(const char *type, tfc_field *out, int cap)
{
    const int c = cell_index(type);
    if (c < 0) return -1;
    int n = 0;
    for (const tfc_field *f = cells[c].ops->schema; f->name; f++) {
        int own = 0;
        for (const char *const *o = rnn_own; *o; o++) own |= !strcmp(*o, f->name);
        if (!own && n + 1 < cap) out[n++] = *f;
    }
    out[n] = (tfc_field){NULL};
    return n;
}

typedef struct rnn_layer_args {
    tfc_rnn_args rnn; /* the RNN's return_sequences, return_state, go_backwards, stateful and
                       * unroll (Bidirectional sets go_backwards here, as in an LSTM's) */
    const tfc_node *cell;
    int zero_output_for_mask;
} rnn_layer_args;

static const tfc_field rnn_layer_fields[] = {
    {"cell", TFC_F_NODE, offsetof(rnn_layer_args, cell), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "{LSTMCell: {...}}, {GRUCell: {...}}, {SimpleRNNCell: {...}}, {StackedRNNCells: "
     "{cells: [...]}} or a list of cells (a StackedRNNCells of them)"},
    {"return_sequences", TFC_F_BOOL, offsetof(rnn_layer_args, rnn.return_sequences), "false",
     TFC_UNBOUNDED, NULL, "output every step, not only the last"},
    {"return_state", TFC_F_BOOL, offsetof(rnn_layer_args, rnn.return_state), "false",
     TFC_UNBOUNDED, NULL, "false only (a layer has one output)"},
    {"go_backwards", TFC_F_BOOL, offsetof(rnn_layer_args, rnn.go_backwards), "false",
     TFC_UNBOUNDED, NULL, "run over the reversed sequence (output in that order)"},
    {"stateful", TFC_F_BOOL, offsetof(rnn_layer_args, rnn.stateful), "false", TFC_UNBOUNDED,
     NULL, "false only (not supported)"},
    {"unroll", TFC_F_BOOL, offsetof(rnn_layer_args, rnn.unroll), "false", TFC_UNBOUNDED, NULL,
     "accepted; the same results either way"},
    {"zero_output_for_mask", TFC_F_BOOL, offsetof(rnn_layer_args, zero_output_for_mask),
     "false", TFC_UNBOUNDED, NULL, "0 at masked steps, not the previous output"},
    TFC_ACTIVITY_REGULARIZER_FIELD,
    {NULL}};

typedef struct rnn_state {
    int ncells;
    tfc_layer cell[MAX_CELLS]; /* built from the cells' arguments; parameters this layer's */
    int rev;                   /* keeps the mask reversed (going backwards under a mask) */
    int zero;                  /* zero_output_for_mask under a mask */
    const char *needs[40];
} rnn_state;

static void rnn_layer_free(tfc_layer *l)
{
    rnn_state *st = l->state;
    if (!st) return;
    for (int k = 0; k < st->ncells; k++) {
        if (st->cell[k].ops && st->cell[k].ops->free_state)
            st->cell[k].ops->free_state(&st->cell[k]);
        free(st->cell[k].args);
    }
    free(st);
    l->state = NULL;
}

/* Cell k's output per example */
static int64_t out_floats(const tfc_layer *c)
{
    return tfc_shape_numel(&c->out_shape);
}

static void add_need(rnn_state *st, const char *op)
{
    int n = 0;
    for (; st->needs[n]; n++)
        if (!strcmp(st->needs[n], op)) return;
    TFC_ASSERT(n + 1 < (int)(sizeof st->needs / sizeof *st->needs));
    st->needs[n] = op;
}

/* Builds cell k of type `type` from its arguments `args` at `path`, reading `in`. */
static tfc_status build_cell(tfc_layer *l, int k, int last, const tfc_node *type_node,
                             const tfc_node *args, const char *path, const tfc_shape *in,
                             tfc_error *err)
{
    const rnn_layer_args *a = l->args;
    rnn_state *st = l->state;
    const int c = cell_index(type_node->str);
    if (c < 0)
        return tfc_node_error(err, TFC_ERR_CONFIG, type_node, path,
                              "%s is not a recurrent cell (LSTMCell, GRUCell, SimpleRNNCell; a "
                              "StackedRNNCells of them as the RNN's cell)", type_node->str);
    if (!args || args->kind != TFC_NODE_MAP)
        return tfc_node_error(err, TFC_ERR_CONFIG, args ? args : type_node, path,
                              "expected the cell's arguments, {units: 32, ...}");
    tfc_field schema[64];
    tfc_rnn_cell_schema(cells[c].type, schema, 64);
    tfc_layer *d = &st->cell[k];
    d->ops = cells[c].ops;
    d->index = l->index;
    d->node = args; /* SimpleRNN reads its `activation: null` here */
    snprintf(d->name, sizeof d->name, "%s", l->name);
    d->args = calloc(1, d->ops->args_size);
    if (!d->args) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    st->ncells = k + 1;
    if (tfc_schema_apply(schema, args, path, d->args, err)) return TFC_ERR_CONFIG;
    tfc_rnn_args *r = d->args; /* LSTM's, GRU's and SimpleRNN's arguments start with it */
    r->return_sequences = last ? a->rnn.return_sequences : 1;
    r->go_backwards = k == 0 ? a->rnn.go_backwards : 0;
    r->unroll = a->rnn.unroll;
    d->ninputs = 1;
    d->in_shape[0] = *in;
    d->in_dtype[0] = TFC_F32;
    d->mask_in = l->mask_in;
    d->max_batch = 1;
    return d->ops->build(d, err);
}

static tfc_status build_stack(tfc_layer *l, const tfc_node *list, const tfc_node *n,
                              const char *path, tfc_error *err);

/* The cells of `cell`: one, or a StackedRNNCells's list (or Keras's list of cells) */
static tfc_status build_cells(tfc_layer *l, tfc_error *err)
{
    const rnn_layer_args *a = l->args;
    const tfc_node *n = a->cell;
    char path[160];
    snprintf(path, sizeof path, "layers[%d].RNN.cell", l->index);
    if (n && n->kind == TFC_NODE_SEQ) /* Keras's list of cells: a StackedRNNCells of them */
        return build_stack(l, n, n, path, err);
    if (!n || n->kind != TFC_NODE_MAP || n->n != 1)
        return n ? tfc_node_error(err, TFC_ERR_CONFIG, n, path, "expected one cell, {LSTMCell: "
                                  "{units: 32}}, {GRUCell: ...}, {SimpleRNNCell: ...} or "
                                  "{StackedRNNCells: {cells: [...]}}")
                 : tfc_layer_error(err, l, "cell: required ({LSTMCell: {units: 32}}, ...)");
    const tfc_node *type = n->keys[0], *args = n->vals[0];
    if (strcmp(type->str, "StackedRNNCells")) {
        snprintf(path + strlen(path), sizeof path - strlen(path), ".%s", type->str);
        return build_cell(l, 0, 1, type, args, path, &l->in_shape[0], err);
    }
    strcat(path, ".StackedRNNCells");
    for (int i = 0; args && args->kind == TFC_NODE_MAP && i < args->n; i++)
        if (strcmp(args->keys[i]->str, "cells"))
            return tfc_node_error(err, TFC_ERR_CONFIG, args->keys[i], path,
                                  "unknown key '%s' (StackedRNNCells takes cells)",
                                  args->keys[i]->str);
    char at[160];
    snprintf(at, sizeof at, "%s.cells", path);
    return build_stack(l, tfc_node_get(args, "cells"), n, at, err);
}

/* A stack's cells, the list `list` (n: where to point without one) at `path` */
static tfc_status build_stack(tfc_layer *l, const tfc_node *list, const tfc_node *n,
                              const char *path, tfc_error *err)
{
    rnn_state *st = l->state;
    if (!list || list->kind != TFC_NODE_SEQ || list->n < 1 || list->n > MAX_CELLS)
        return tfc_node_error(err, TFC_ERR_CONFIG, list ? list : n, path,
                              "expected a list of 1 to %d cells, [{LSTMCell: {units: 32}}, "
                              "{GRUCell: {units: 16}}]", MAX_CELLS);
    tfc_shape in = l->in_shape[0];
    for (int k = 0; k < list->n; k++) {
        const tfc_node *e = list->vals[k];
        char at[200];
        snprintf(at, sizeof at, "%s[%d]", path, k);
        if (e->kind != TFC_NODE_MAP || e->n != 1)
            return tfc_node_error(err, TFC_ERR_CONFIG, e, at, "expected one cell, {LSTMCell: "
                                  "{units: 32}}, {GRUCell: ...} or {SimpleRNNCell: ...}");
        snprintf(at + strlen(at), sizeof at - strlen(at), ".%s", e->keys[0]->str);
        /* a weight's regularizer or constraint lives in the RNN's cell (graph/model.c), which
         * a stack's list is not */
        static const char *const per_weight[] = {
            "kernel_regularizer", "recurrent_regularizer", "bias_regularizer",
            "kernel_constraint", "recurrent_constraint", "bias_constraint", NULL};
        for (const char *const *w = per_weight; *w; w++) {
            const tfc_node *v = tfc_node_get(e->vals[0], *w);
            if (v && !tfc_node_is_null(v))
                return tfc_node_error(err, TFC_ERR_CONFIG, v, at, "%s: not supported in a "
                                      "StackedRNNCells (an RNN's single cell takes it)", *w);
        }
        if (build_cell(l, k, k == list->n - 1, e->keys[0], e->vals[0], at, &in, err))
            return TFC_ERR_CONFIG;
        in = st->cell[k].out_shape;
    }
    return TFC_OK;
}

/* Cell k's weights under this layer: their own names (one cell), or <cell>/<name> (a stack,
 * <cell> the snake case of its type, _1, _2, ... after the first of a type) */
static tfc_status add_params(tfc_layer *l, int stacked, tfc_error *err)
{
    rnn_state *st = l->state;
    int total = 0;
    for (int k = 0; k < st->ncells; k++) total += st->cell[k].nparams;
    if (total > TFC_LAYER_MAX_PARAMS)
        return tfc_layer_error(err, l, "cell: %d weights, more than a layer holds (%d)", total,
                               TFC_LAYER_MAX_PARAMS);
    for (int k = 0; k < st->ncells; k++) {
        tfc_layer *d = &st->cell[k];
        const char *snake = NULL;
        int seen = 0;
        for (int c = 0; c < (int)(sizeof cells / sizeof *cells); c++)
            if (cells[c].ops == d->ops) snake = cells[c].snake;
        for (int j = 0; j < k; j++) seen += st->cell[j].ops == d->ops;
        if (!stacked) snprintf(d->name, sizeof d->name, "%s", l->name);
        else if (seen) snprintf(d->name, sizeof d->name, "%s_%d", snake, seen);
        else snprintf(d->name, sizeof d->name, "%s", snake);
        for (int p = 0; p < d->nparams; p++) {
            char name[sizeof d->params[p].name];
            int len = stacked ? snprintf(name, sizeof name, "%s/%s", d->name, d->params[p].name)
                              : snprintf(name, sizeof name, "%s", d->params[p].name);
            if (len >= (int)sizeof name)
                return tfc_layer_error(err, l, "weight name '%s/%s' too long", d->name,
                                       d->params[p].name);
            tfc_layer_add_param(l, name, d->params[p].shape.ndim, d->params[p].shape.dim, 1,
                                d->params[p].init);
        }
    }
    return TFC_OK;
}

static tfc_status rnn_layer_build(tfc_layer *l, tfc_error *err)
{
    const rnn_layer_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    if (tfc_layer_need_rank(l, 2, "a sequence input of shape (steps, features)", err))
        return TFC_ERR_CONFIG;
    if (a->rnn.return_state)
        return tfc_layer_error(err, l, "return_state: not supported (a layer has one output)");
    if (a->rnn.stateful) return tfc_layer_error(err, l, "stateful: not supported");
    rnn_layer_free(l);
    l->state = calloc(1, sizeof(rnn_state));
    if (!l->state) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    rnn_state *st = l->state;
    if (build_cells(l, err)) return TFC_ERR_CONFIG;
    const int stacked = a->cell->kind == TFC_NODE_SEQ ||
                        !strcmp(a->cell->keys[0]->str, "StackedRNNCells");
    if (add_params(l, stacked, err)) return TFC_ERR_CONFIG;
    const tfc_layer *last = &st->cell[st->ncells - 1];
    l->out_shape = last->out_shape;
    l->mask_out = last->mask_out;
    st->zero = a->zero_output_for_mask && l->mask_in;
    st->rev = a->rnn.go_backwards && l->mask_in && (st->ncells > 1 || st->zero);
    /* the cells' saved buffers, the outputs of all but the last, the reversed mask */
    const int64_t t = in->dim[0];
    l->saved_floats = st->rev ? t : 0;
    for (int k = 0; k < st->ncells; k++)
        l->saved_floats += st->cell[k].saved_floats +
                           (k + 1 < st->ncells ? out_floats(&st->cell[k]) : 0);
    for (int k = 0; k < st->ncells; k++) {
        const tfc_layer *d = &st->cell[k];
        const char *const *need = d->ops->needs ? d->ops->needs(d) : NULL;
        for (; need && *need; need++) add_need(st, *need);
    }
    if (st->rev) add_need(st, "rnn_input_forward");
    return TFC_OK;
}

static const char *const *rnn_layer_needs(const tfc_layer *l)
{
    const rnn_state *st = l->state;
    return st->needs;
}

static size_t aligned(size_t bytes)
{
    return (bytes + 63) & ~(size_t)63;
}

/* Bytes of cell k's output for the largest batch */
static size_t out_bytes(const tfc_layer *l, int k)
{
    const rnn_state *st = l->state;
    return aligned((size_t)l->max_batch * (size_t)out_floats(&st->cell[k]) * sizeof(float));
}

/* Workspace: the last step's mask and the masked output gradient (zero), the gradients of
 * the cells' outputs but the last's, then the cells' own workspace */
static size_t cells_offset(const tfc_layer *l)
{
    const rnn_state *st = l->state;
    size_t at = st->zero ? aligned((size_t)l->max_batch * sizeof(float)) +
                               out_bytes(l, st->ncells - 1) : 0;
    for (int k = 0; k + 1 < st->ncells; k++) at += out_bytes(l, k);
    return at;
}

static void rnn_layer_plan(tfc_layer *l, tfc_backend *be)
{
    rnn_state *st = l->state;
    size_t most = 0;
    for (int k = 0; k < st->ncells; k++) {
        st->cell[k].max_batch = l->max_batch;
        st->cell[k].ops->plan(&st->cell[k], be);
        if (st->cell[k].workspace > most) most = st->cell[k].workspace;
    }
    l->workspace = cells_offset(l) + most;
}

/* Points the cells at this layer's parameters, saved buffers, mask and random stream; h[k]:
 * cell k's output (all but the last's, in the saved buffers); *rev: the reversed mask. */
static void bind_cells(tfc_layer *l, float **h, float **rev)
{
    rnn_state *st = l->state;
    float *at = l->saved;
    *rev = st->rev ? at : NULL;
    at += st->rev ? (int64_t)l->max_batch * l->in_shape[0].dim[0] : 0;
    for (int k = 0, p0 = 0; k < st->ncells; k++) {
        tfc_layer *d = &st->cell[k];
        d->saved = at;
        at += (int64_t)l->max_batch * d->saved_floats;
        h[k] = at;
        if (k + 1 < st->ncells) at += (int64_t)l->max_batch * out_floats(d);
        d->mask = k > 0 && *rev ? *rev : l->mask;
        d->rng_key = k ? tfc_rng_key(l->rng_key, (uint64_t)k) : l->rng_key;
        for (int p = 0; p < d->nparams; p++, p0++) {
            d->params[p].data = l->params[p0].data;
            d->params[p].grad = l->params[p0].grad;
        }
    }
}

/* The cells' exec: this one's, with the workspace past this layer's own part */
static tfc_exec cells_exec(const tfc_layer *l, const tfc_exec *ex)
{
    tfc_exec sub = *ex;
    sub.ws = (char *)ex->ws + cells_offset(l);
    return sub;
}

/* out = in times the mask in the output's order: at every step, or the last step's (copied
 * into the workspace's first floats) */
static void zero_masked(const tfc_layer *l, tfc_exec *ex, const float *mask, const float *in,
                        float *out)
{
    const int64_t t = l->in_shape[0].dim[0];
    const int u = (int)l->out_shape.dim[l->out_shape.ndim - 1];
    if (l->out_shape.ndim == 2) {
        ex->be->ops->mul(ex->be, ex->batch * t, u, 1, in, mask, 1, out, 0);
        return;
    }
    float *col = ex->ws;
    ex->be->ops->copy2d(ex->be, ex->batch, 1, mask + t - 1, (int)t, col, 1, 0);
    ex->be->ops->mul(ex->be, ex->batch, u, 1, in, col, 1, out, 0);
}

static void rnn_layer_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const rnn_layer_args *a = l->args;
    rnn_state *st = l->state;
    float *h[MAX_CELLS], *rev;
    bind_cells(l, h, &rev);
    const int t = (int)l->in_shape[0].dim[0];
    if (rev) ex->be->ops->rnn_input_forward(ex->be, ex->batch, t, 1, 1, 0.0f, 0, 0, l->mask, rev);
    tfc_exec sub = cells_exec(l, ex);
    for (int k = 0; k < st->ncells; k++) {
        tfc_layer *d = &st->cell[k];
        const void *in[1] = {k ? (const void *)h[k - 1] : x[0]};
        d->ops->forward(d, &sub, in, k + 1 < st->ncells ? h[k] : y);
    }
    if (st->zero) zero_masked(l, ex, a->rnn.go_backwards ? rev : l->mask, y, y);
}

static void rnn_layer_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                               const float *dy, float *const *dx)
{
    const rnn_layer_args *a = l->args;
    rnn_state *st = l->state;
    float *h[MAX_CELLS], *rev;
    bind_cells(l, h, &rev);
    char *ws = ex->ws;
    const int n = st->ncells;
    if (st->zero) {
        ws += aligned((size_t)l->max_batch * sizeof(float));
        float *dym = (float *)ws;
        zero_masked(l, ex, a->rnn.go_backwards ? rev : l->mask, dy, dym);
        dy = dym;
        ws += out_bytes(l, n - 1);
    }
    float *dh[MAX_CELLS];
    for (int k = 0; k + 1 < n; k++) {
        dh[k] = (float *)ws;
        ws += out_bytes(l, k);
    }
    tfc_exec sub = cells_exec(l, ex);
    for (int k = n - 1; k >= 0; k--) {
        tfc_layer *d = &st->cell[k];
        float *din = k ? dh[k - 1] : dx[0];
        if (k)
            ex->be->ops->zero(ex->be, din,
                              (size_t)ex->batch * out_floats(&st->cell[k - 1]) * sizeof(float));
        const void *in[1] = {k ? (const void *)h[k - 1] : x[0]};
        d->ops->backward(d, &sub, in, k + 1 < n ? h[k] : y, k + 1 < n ? dh[k] : dy,
                         (float *const[]){din});
    }
}

const tfc_layer *tfc_rnn_layer_cell(const tfc_layer *l, int k, int *ncells)
{
    const rnn_state *st = l->state;
    if (ncells) *ncells = st->ncells;
    return &st->cell[k];
}

const tfc_layer_ops tfc_rnn_layer_ops = {
    .type = "RNN", .schema = rnn_layer_fields, .args_size = sizeof(rnn_layer_args),
    .min_inputs = 1, .max_inputs = 1, .cpu_first = 1, .needs = rnn_layer_needs,
    .build = rnn_layer_build, .plan = rnn_layer_plan, .forward = rnn_layer_forward,
    .backward = rnn_layer_backward, .free_state = rnn_layer_free,
};
