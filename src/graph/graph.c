/* The bound model: memory planned once per (backend, max batch), weights filled from their
 * initializers, then forward, loss and backward passes that allocate nothing. Outputs,
 * pre-activations and saved buffers are kept from forward to backward; activation gradients
 * live only from the backward step of a layer's last consumer to the layer's own, so layers
 * whose gradient lifetimes do not overlap share memory (plan_grads). */
#include "graph/metric_counts.h"
#include "graph/model_internal.h"

#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

#define ALIGN 256 /* cudaMalloc's alignment: every buffer suits cuBLAS and cuDNN */

static size_t align_up(size_t n) { return (n + ALIGN - 1) & ~(size_t)(ALIGN - 1); }

void tfc_model_unbind(tfc_model *m)
{
    if (!m->be) return;
    m->be->ops->free(m->be, m->arena);
    m->be->ops->free(m->be, m->params);
    m->be->ops->free(m->be, m->grads);
    m->be->ops->free(m->be, m->copies);
    for (int i = 0; m->bound && i < m->nlayers; i++) free(m->bound[i].host_mask);
    free(m->bound);
    free(m->host_mask);
    for (int k = 0; k < m->noutputs; k++) {
        tfc_head *h = &m->heads[k];
        free(h->host_target);
        free(h->host_weight);
        free(h->count_labels);
        free(h->count_weight);
        free(h->count_out);
        h->count_labels = h->count_weight = h->count_out = NULL;
        h->host_target = h->host_weight = NULL;
        h->target = h->row_weight = h->scalars = NULL;
        h->labels = NULL;
    }
    free(m->counts);
    m->counts = NULL;
    for (int i = 0; i < m->nlayers; i++) {
        tfc_layer *l = &m->layers[i];
        l->saved = NULL;
        l->mask = NULL;
        for (int p = 0; p < l->nparams; p++) l->params[p].data = l->params[p].grad = NULL;
    }
    m->arena = m->params = m->grads = m->copies = NULL;
    m->bound = NULL;
    m->host_mask = NULL;
    m->scalars = NULL;
    m->be = NULL;
}

static void *alloc_or_report(tfc_backend *be, size_t bytes, const char *what, int batch,
                             tfc_error *err)
{
    void *p = be->ops->alloc(be, bytes ? bytes : ALIGN);
    int per_batch = !strcmp(what, "activations"); /* parameters do not grow with the batch */
    if (!p && per_batch) {
        tfc_error_set(err, TFC_ERR_NOMEM, "cannot allocate %.1f MiB of %s for batch_size %d on %s",
                      (double)bytes / (1 << 20), what, batch, be->ops->name);
        tfc_error_hint(err, "lower batch_size");
    } else if (!p) {
        tfc_error_set(err, TFC_ERR_NOMEM, "cannot allocate %.1f MiB of %s on %s",
                      (double)bytes / (1 << 20), what, be->ops->name);
        tfc_error_hint(err, "the %s do not depend on batch_size: a smaller model (fewer units, "
                            "filters or layers) needs less", what);
    }
    return p;
}

/* The sequence length of the mask: the first axis of the masking layer's input (an
 * Embedding's tokens, Masking's steps). */
static int64_t mask_steps(const tfc_model *m)
{
    return m->mask_layer >= 0 ? m->layers[m->mask_layer].in_shape[0].dim[0] : 0;
}

/* The mask that layer i's output carries (it has mask_out), on the device or (host) its host
 * copy: the one it makes by joining its inputs' masks, else its first masked input's, else
 * (the masking Embedding) the model's; *steps gets its length. */
static float *carried_mask(const tfc_model *m, int i, int host, int64_t *steps)
{
    const tfc_layer *l = &m->layers[i];
    if (l->joins_mask) {
        *steps = l->out_shape.dim[0];
        return host ? m->bound[i].host_mask : m->bound[i].mask;
    }
    for (int j = 0; j < l->ninputs; j++)
        if (l->mask_inputs >> j & 1) return carried_mask(m, l->inputs[j], host, steps);
    *steps = mask_steps(m);
    return host ? m->host_mask : m->mask;
}

/* The masks of the layers that join their inputs' (Concatenate along the steps), made on
 * the host from the model's mask of this batch, in layer order, and uploaded. */
static void join_masks(tfc_model *m, int batch)
{
    for (int i = 0; i < m->nlayers; i++) {
        const tfc_layer *l = &m->layers[i];
        tfc_bound *b = &m->bound[i];
        if (!l->joins_mask) continue;
        const int64_t t = l->out_shape.dim[0];
        for (int64_t n = 0, at = 0; n < batch; n++)
            for (int j = 0; j < l->ninputs; j++) {
                const int64_t tj = l->in_shape[j].dim[0];
                int64_t steps;
                const float *src = l->mask_inputs >> j & 1
                                       ? carried_mask(m, l->inputs[j], 1, &steps) + n * tj
                                       : NULL;
                for (int64_t s = 0; s < tj; s++) b->host_mask[at++] = src ? src[s] : 1.f;
            }
        m->be->ops->upload(m->be, b->mask, b->host_mask, (size_t)batch * (size_t)t * 4);
    }
}

/* n buffers of bytes[k], each in use over the steps [first[k], last[k]]: offsets in off[]
 * such that buffers in use at a common step never overlap (largest first, each at the
 * lowest offset clear of those placed); returns the region's size, SIZE_MAX without
 * memory. */
static size_t pack(int n, const size_t *bytes, const int *first, const int *last, size_t *off)
{
    int *order = malloc((size_t)(n + 1) * sizeof *order);
    if (!order) return SIZE_MAX;
    for (int k = 0; k < n; k++) order[k] = k;
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && bytes[order[b]] > bytes[order[b - 1]]; b--) {
            int t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    size_t total = 0;
    for (int a = 0; a < n; a++) {
        int p = order[a];
        size_t at = 0;
        for (int moved = 1; moved;) {
            moved = 0;
            for (int b = 0; b < a; b++) {
                int q = order[b];
                if (first[p] <= last[q] && first[q] <= last[p] && at < off[q] + bytes[q] &&
                    off[q] < at + bytes[p]) {
                    at = align_up(off[q] + bytes[q]);
                    moved = 1;
                }
            }
        }
        off[p] = at;
        if (at + bytes[p] > total) total = at + bytes[p];
    }
    free(order);
    return align_up(total);
}

/* Whether layer l's gradient block has a dz half: the gradient before its activation */
static int has_dz(const tfc_layer *l)
{
    return l->act != TFC_ACT_LINEAR && !l->pure_act;
}

/* Places each layer's gradient block [dy | dz] (sizes in b->grad_bytes) at an offset in
 * one region and sets b->zero_at; returns the region's size (offsets in off[]).
 * Backward runs layers n-1 .. 0; call the loss time 0 and layer i's backward step n - i.
 * Layer p's gradient is first written (accumulated into) at the step of its last consumer
 * c (p itself when nothing consumes it) and last read at its own: it lives over
 * [n - c, n - p], and is zeroed when that starts. An output's lives from the loss, which
 * zeroes and writes it (its zero_at stays p: its consumers add to what the loss wrote). */
static size_t plan_grads(tfc_model *m, size_t *off)
{
    const int n = m->nlayers;
    int *first = calloc((size_t)n * 2 + 1, sizeof *first), *last = first ? first + n : NULL;
    size_t *bytes = calloc((size_t)n + 1, sizeof *bytes);
    if (!first || !bytes) {
        free(first), free(bytes);
        return SIZE_MAX;
    }
    for (int p = 0; p < n; p++) m->bound[p].zero_at = p;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < m->layers[i].ninputs; j++) {
            int p = m->layers[i].inputs[j];
            if (p >= 0 && i > m->bound[p].zero_at && !tfc_model_is_output(m, p))
                m->bound[p].zero_at = i;
        }
    for (int p = 0; p < n; p++) {
        first[p] = tfc_model_is_output(m, p) ? 0 : n - m->bound[p].zero_at;
        last[p] = n - p;
        bytes[p] = m->bound[p].grad_bytes;
    }
    size_t total = pack(n, bytes, first, last, off);
    free(first), free(bytes);
    return total;
}

/* The activation arena's layout for batches of up to max_batch: offsets from its start,
 * y[4 i ..] layer i's output, pre-activation, saved buffer and gradient block; `plan` the
 * sizes. Needs m->bound (the gradient blocks' lifetimes) and runs each layer's plan (its
 * workspace); allocates only the host array y. */
typedef struct layout {
    size_t x, dx, mask, scalars, ws, grads;
    size_t labels[TFC_MODEL_MAX_OUTPUTS], target[TFC_MODEL_MAX_OUTPUTS], /* per head */
        weight[TFC_MODEL_MAX_OUTPUTS];
    size_t xk[TFC_MODEL_MAX_INPUTS], dxk[TFC_MODEL_MAX_INPUTS]; /* inputs 1..: x and dx */
    size_t *y;
    tfc_memory_plan plan;
} layout;

static tfc_status plan_inference(tfc_model *m, size_t o, layout *L, tfc_error *err);

/* A parameter bound with a gradient (and, in bf16 or float16, a 16-bit copy): a trainable
 * one, or a frozen one, whose layer's backward may still write its gradient */
static int graded(const tfc_param *p) { return p->trainable || p->frozen; }

/* Which layers' backward passes run (tfc_bound.no_backward; tfc_model_backward_plan). The
 * gradient of an input whose backward does not run is NULL to its consumers, as the model
 * input's is when no input gradient is wanted: nothing computes it. */
static void plan_backward(tfc_model *m)
{
    int *runs = malloc((size_t)m->nlayers * sizeof *runs);
    if (runs) tfc_model_backward_plan(m, m->want_input_grad, runs);
    for (int i = 0; i < m->nlayers; i++) m->bound[i].no_backward = runs && !runs[i];
    free(runs);
}

/* The model's scalars (tfc_model.scalars): the loss and one per metric; with several
 * heads, then each head's loss and its metrics. */
static int scalar_count(const tfc_model *m)
{
    int n = 1 + m->nmetrics;
    for (int k = 0; k < m->noutputs && m->noutputs > 1; k++) n += 1 + m->heads[k].nmetrics;
    return n;
}

static tfc_status plan_layout(tfc_model *m, tfc_backend *be, int max_batch, int inference,
                              layout *L, tfc_error *err)
{
    memset(L, 0, sizeof *L);
    if (max_batch < 1) return tfc_error_set(err, TFC_ERR_USAGE, "batch size must be positive");
    tfc_memory_plan *P = &L->plan;
    P->max_batch = max_batch;
    /* with bf16 or float16, the trainable and frozen parameters' 16-bit copies too (floats
     * on the CPU) */
    const int64_t graded = m->trainable_count + m->frozen_count;
    P->params = (size_t)(m->param_count + (m->precision ? graded : 0)) * 4;
    P->grads = (size_t)graded * 4;
    size_t B = (size_t)max_batch, in_bytes = B * (size_t)tfc_shape_numel(&m->input_shape) * 4;
    m->mask_layer = -1;
    for (int i = 0; i < m->nlayers && m->mask_layer < 0; i++)
        if (m->layers[i].mask_out && !m->layers[i].mask_in && m->layers[i].inputs[0] < 0)
            m->mask_layer = i;
    m->mask_input = m->mask_layer >= 0 ? -1 - m->layers[m->mask_layer].inputs[0] : 0;
    size_t o = 0;
    L->x = o; o = align_up(o + in_bytes);
    for (int k = 1; k < m->ninputs; k++) {
        L->xk[k] = o;
        o = align_up(o + B * (size_t)tfc_shape_numel(&m->more[k - 1].shape) * 4);
    }
    if (m->mask_layer >= 0) { L->mask = o; o = align_up(o + B * (size_t)mask_steps(m) * 4); }
    for (int i = 0; i < m->nlayers; i++)
        if (m->layers[i].joins_mask) {
            m->bound[i].mask_at = o;
            o = align_up(o + B * (size_t)m->layers[i].out_shape.dim[0] * 4);
        }
    for (int k = 0; k < m->noutputs; k++) { /* each head's labels, targets, row weights */
        const tfc_head *h = &m->heads[k];
        size_t rows = B * (size_t)h->label_rows;
        size_t label_elems = rows * (h->loss == TFC_LOSS_SPARSE_CCE ? 1 : (size_t)h->classes);
        L->labels[k] = o; o = align_up(o + label_elems * 4);
        if (h->loss_opt.label_smoothing > 0) {
            L->target[k] = o;
            o = align_up(o + rows * (size_t)h->classes * 4);
        }
        if (h->loss_opt.class_weight) { L->weight[k] = o; o = align_up(o + rows * 4); }
    }
    L->scalars = o; o = align_up(o + (size_t)scalar_count(m) * 4);
    P->io = o;
    if (!(L->y = calloc((size_t)m->nlayers * 4 + 1, sizeof *L->y)))
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    m->ws_bytes = 0;
    for (int i = 0; i < m->nlayers; i++) {
        tfc_layer *l = &m->layers[i];
        l->max_batch = max_batch;
        l->workspace = 0;
        if (l->ops->plan) l->ops->plan(l, be);
        if (l->workspace > m->ws_bytes) m->ws_bytes = l->workspace;
    }
    if (inference) return plan_inference(m, o, L, err);
    for (int i = 0; i < m->nlayers; i++) {
        tfc_layer *l = &m->layers[i];
        size_t bytes = B * (size_t)tfc_layer_out_numel(l) * 4, was = o;
        L->y[4 * i] = o; o = align_up(o + bytes);
        if (l->act != TFC_ACT_LINEAR) { L->y[4 * i + 1] = o; o = align_up(o + bytes); }
        P->outputs += o - was;
        was = o;
        L->y[4 * i + 2] = o; o = align_up(o + (B * (size_t)l->saved_floats + (size_t)l->fixed_floats) * 4);
        P->saved += o - was;
    }
    L->ws = o; o = align_up(o + m->ws_bytes);
    P->workspace = o - L->ws;
    if (m->input_dtype == TFC_F32) { L->dx = o; o = align_up(o + in_bytes); P->io += o - L->dx; }
    for (int k = 1; k < m->ninputs; k++) {
        if (m->more[k - 1].dtype != TFC_F32) continue;
        L->dxk[k] = o;
        o = align_up(o + B * (size_t)tfc_shape_numel(&m->more[k - 1].shape) * 4);
        P->io += o - L->dxk[k];
    }
    for (int i = 0; i < m->nlayers; i++) {
        tfc_layer *l = &m->layers[i];
        size_t bytes = align_up(B * (size_t)tfc_layer_out_numel(l) * 4);
        /* dz follows dy; an Activation layer's derivative goes straight into its input's
         * gradient (tfc_model_layer_backward): no dz */
        m->bound[i].grad_bytes = has_dz(l) ? 2 * bytes : bytes;
    }
    size_t *g_off = calloc((size_t)m->nlayers + 1, sizeof *g_off);
    size_t g_bytes = g_off ? plan_grads(m, g_off) : SIZE_MAX;
    if (g_bytes == SIZE_MAX) {
        free(L->y), free(g_off);
        L->y = NULL;
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    L->grads = o;
    for (int i = 0; i < m->nlayers; i++) L->y[4 * i + 3] = L->grads + g_off[i];
    free(g_off);
    o = align_up(o + g_bytes);
    P->activation_grads = o - L->grads;
    P->arena = o;
    return TFC_OK;
}

static void plan_chains(tfc_model *m, const tfc_backend *be, int max_batch);
static tfc_status check_kernels(const tfc_model *m, const tfc_backend *be, tfc_error *err);
static void penalties(tfc_model *m, int loss, int grads);
static void activity_penalties(tfc_model *m, int layer);

tfc_status tfc_model_plan_memory(tfc_model *m, tfc_backend *be, int max_batch,
                                 tfc_memory_plan *out, tfc_error *err)
{
    memset(out, 0, sizeof *out);
    if (m->be)
        return tfc_error_set(err, TFC_ERR_USAGE, "model '%s' is bound: plan before binding",
                             m->name);
    if (m->max_length && tfc_model_set_length(m, m->max_length, err)) return err->code;
    /* the layers' plans ask the backend's workspace ops, which a backend may lack */
    tfc_status st = check_kernels(m, be, err);
    if (st) return st;
    if (!(m->bound = calloc((size_t)m->nlayers + 1, sizeof *m->bound)))
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    plan_chains(m, be, max_batch); /* the layers' workspaces depend on it */
    layout L;
    tfc_status s = plan_layout(m, be, max_batch, 0, &L, err);
    free(L.y);
    free(m->bound);
    m->bound = NULL;
    if (!s) *out = L.plan;
    return s;
}

const tfc_memory_plan *tfc_model_memory(const tfc_model *m) { return m->be ? &m->mem : NULL; }

/* The one layer that reads layer i's output (i itself: none or several, or i is one of the
 * model's outputs). */
static int sole_consumer(const tfc_model *m, int i)
{
    int who = i, uses = 0;
    for (int j = i + 1; j < m->nlayers; j++)
        for (int k = 0; k < m->layers[j].ninputs; k++)
            if (m->layers[j].inputs[k] == i) who = j, uses++;
    return uses == 1 && !tfc_model_is_output(m, i) ? who : i;
}

/* Whether some chain ends at layer k (its output is written, by the chain's start). */
static int is_chain_end(const tfc_model *m, int k)
{
    for (int i = 0; i < k; i++)
        if (m->bound[i].chain_end == k) return 1;
    return 0;
}

/* Inference chains (tfc_bound): a layer with forward_fused and a linear activation, then
 * the BatchNormalization that alone reads it, then a two-input Add that alone reads what
 * came before and whose other input is computed before the chain starts (a ResNet's
 * shortcut), then an Activation layer that alone reads what came before, then a pooling
 * layer that alone reads what came before, each optional (conv -> BN -> ReLU,
 * conv -> BN -> Add -> ReLU, conv -> ReLU -> MaxPooling2D, ...); a layer with an
 * activation of its own takes only the pooling layer. The last layer's activation stays
 * its own when the loss reads its pre-activation. TFC_FUSE=0 in the environment at bind
 * time plans none. */
static void plan_chains(tfc_model *m, const tfc_backend *be, int max_batch)
{
    for (int i = 0; i < m->nlayers; i++) {
        tfc_bound *b = &m->bound[i];
        b->chain_end = i, b->chain_bn = b->chain_res = b->chain_pool = -1, b->skip = 0;
        b->chain_act = TFC_ACT_LINEAR;
        b->relu_into = -1, b->relu_done = 0;
        b->relu_pool = b->pool_relu_of = -1;
        b->ids_from = b->ids_into = -1;
        m->layers[i].ids_vocab = 0;
    }
    m->activity = 0;
    for (int i = 0; i < m->nlayers; i++)
        m->activity |= m->layers[i].activity_l1 != 0 || m->layers[i].activity_l2 != 0;
    const char *e = getenv("TFC_FUSE"); /* 0: every layer on its own (docs/cpu.md) */
    if (e && !strcmp(e, "0")) return;
    /* bf16 and float16 round every layer's output (round_outputs): a chain would skip some */
    if (m->precision) return;
    /* an activity regularizer reads its layer's output, which a chain or a folded ReLU
     * would leave unwritten */
    if (m->activity) return;
    /* Training and inference: an Embedding whose output only an LSTM reads hands the LSTM
     * its ids and table where the backend's LSTM takes them for this shape (on the CPU: a
     * vocabulary at most half the batch's tokens, or a frozen backend, which keeps the
     * table, cpu_lstm.c): x_t K is then a row of
     * table K, one product per id instead of per token, with the same bits; in training
     * the table's gradient is dgates summed by id times Kᵀ, whose sums come in another
     * order than the Embedding's (last bits differ). */
    for (int i = 0; i < m->nlayers; i++) {
        const tfc_layer *l = &m->layers[i];
        int j = sole_consumer(m, i);
        if (!l->ops->looks_up || l->inputs[0] >= 0 || j == i || !m->layers[j].ops->takes_ids ||
            m->layers[j].ninputs != 1 ||
            !m->layers[j].ops->takes_ids(&m->layers[j], be, l->id_limit, max_batch))
            continue;
        m->bound[i].ids_into = j;
        m->bound[j].ids_from = i;
        m->layers[j].ids_vocab = l->id_limit;
    }
    /* Training: a BatchNormalization or Add (forward_relu) whose output only a ReLU
     * Activation layer reads writes that layer's output itself, in the same pass. The
     * ReLU's backward takes its derivative from its own output; neither layer's backward
     * reads the output left unwritten. */
    for (int i = 0; i < m->nlayers; i++) {
        const tfc_layer *l = &m->layers[i];
        int j = sole_consumer(m, i);
        /* (a frozen BatchNormalization runs its inference forward, which takes no ReLU) */
        if (!l->ops->forward_relu || l->act != TFC_ACT_LINEAR || j == i || l->frozen) continue;
        const tfc_layer *r = &m->layers[j];
        if (!r->pure_act || r->act != TFC_ACT_RELU || r->mask_in ||
            tfc_model_fused_at(m, j))
            continue;
        m->bound[i].relu_into = j;
        m->bound[j].relu_done = 1;
    }
    /* Training: a layer whose own ReLU it applies in its forward (forward_act, so z is never
     * written) and whose output only a pooling layer reads: the pooling's backward takes
     * the ReLU's derivative of each image while it is in cache, instead of the layer's
     * act_backward reading dy and writing dz over the whole output (conv -> MaxPooling2D). */
    for (int i = 0; i < m->nlayers; i++) {
        const tfc_layer *l = &m->layers[i];
        int j = sole_consumer(m, i);
        if (j == i || l->act != TFC_ACT_RELU || !l->ops->forward_act || l->pure_act ||
            m->bound[i].relu_into >= 0 || !m->layers[j].ops->pool_params || m->layers[j].mask_in)
            continue;
        m->bound[i].relu_pool = j;
        m->bound[j].pool_relu_of = i;
    }
    for (int i = 0; i < m->nlayers; i++) {
        const tfc_layer *l = &m->layers[i];
        if (!l->ops->forward_fused || m->bound[i].skip) continue;
        int end = i, bn = -1, res = -1, add = -1, actl = -1, pool = -1, j = sole_consumer(m, i);
        tfc_act act = l->act;
        if (l->act == TFC_ACT_LINEAR) {
            if (j != i && m->layers[j].ops->bn_params && m->layers[j].act == TFC_ACT_LINEAR &&
                !m->layers[j].mask_in) {
                bn = end = j;
                j = sole_consumer(m, end);
            }
            if (j != end && m->layers[j].ops->sums_inputs && m->layers[j].ninputs == 2 &&
                m->layers[j].act == TFC_ACT_LINEAR && !m->layers[j].mask_in) {
                int r = m->layers[j].inputs[m->layers[j].inputs[0] == end];
                /* computed before step i: an earlier layer that runs (or ends a chain) */
                int ready = r >= 0 && r < i && (!m->bound[r].skip || is_chain_end(m, r));
                if (ready) {
                    res = r;
                    add = end = j;
                    j = sole_consumer(m, end);
                }
            }
            if (j != end && m->layers[j].pure_act && !m->layers[j].mask_in &&
                !tfc_model_fused_at(m, j)) {
                act = m->layers[j].act;
                actl = end = j;
                j = sole_consumer(m, end);
            }
        }
        if (j != end && m->layers[j].ops->pool_params && m->layers[j].act == TFC_ACT_LINEAR &&
            !m->layers[j].mask_in)
            pool = end = j;
        if (end == i) continue;
        m->bound[i].chain_end = end, m->bound[i].chain_bn = bn, m->bound[i].chain_res = res;
        m->bound[i].chain_act = act, m->bound[i].chain_pool = pool;
        const int applied[] = {bn, add, actl, pool};
        for (size_t k = 0; k < sizeof applied / sizeof *applied; k++)
            if (applied[k] >= 0) m->bound[applied[k]].skip = 1;
    }
}

/* The inference layout (tfc_model_bind_inference), from offset o on: each layer's output
 * kept from the step that writes it (a chain's first layer, for the chain's end) to its
 * last reader's (the model's outputs to the end), its pre-activation and saved buffer for
 * its own step only (the last layer's pre-activation, which the loss may read, to the
 * end); buffers whose steps do not meet share memory. A layer that only copies its input
 * at inference (Flatten, Dropout) gets its input's buffer, whose life extends to the
 * copy's last reader. No gradients. */
static tfc_status plan_inference(tfc_model *m, size_t o, layout *L, tfc_error *err)
{
    const int n = m->nlayers, nb = 3 * n;
    tfc_memory_plan *P = &L->plan;
    const size_t B = (size_t)P->max_batch;
    size_t *bytes = calloc((size_t)nb + 1, 2 * sizeof(size_t));
    int *first = calloc((size_t)nb + 1, 2 * sizeof(int));
    if (!bytes || !first) {
        free(bytes), free(first);
        free(L->y);
        L->y = NULL;
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    size_t *off = bytes + nb;
    int *last = first + nb;
    for (int k = 0; k < n; k++) {
        const tfc_layer *l = &m->layers[k];
        const tfc_bound *b = &m->bound[k];
        int use = k;
        for (int j = k + 1; j < n; j++)
            for (int q = 0; q < m->layers[j].ninputs; q++)
                if (m->layers[j].inputs[q] == k) use = j;
        if (tfc_model_is_output(m, k)) use = n;
        size_t out = align_up(B * (size_t)tfc_layer_out_numel(l) * 4);
        /* inside a chain: never written; a chain's start writes its own output only as a
         * pooling's scratch (or not at all), within its step */
        bytes[3 * k] = b->skip || (b->chain_end != k && b->chain_pool < 0) ? 0 : out;
        first[3 * k] = k, last[3 * k] = b->chain_end != k ? k : use;
        bytes[3 * k + 1] = l->act != TFC_ACT_LINEAR ? out : 0;
        first[3 * k + 1] = k, last[3 * k + 1] = k == n - 1 ? n : k;
        bytes[3 * k + 2] = align_up((B * (size_t)l->saved_floats + (size_t)l->fixed_floats) * 4);
        first[3 * k + 2] = k, last[3 * k + 2] = k;
    }
    for (int k = 0; k < n; k++) /* a chain's end: from its start to its own last reader */
        if (m->bound[k].chain_end != k) {
            int e = m->bound[k].chain_end;
            bytes[3 * e] = align_up(B * (size_t)tfc_layer_out_numel(&m->layers[e]) * 4);
            first[3 * e] = k;
        }
    int *alias = malloc((size_t)(n + 1) * sizeof *alias); /* whose buffer y_k is */
    if (!alias) {
        free(bytes), free(first);
        free(L->y);
        L->y = NULL;
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    for (int k = 0; k < n; k++) {
        const tfc_layer *l = &m->layers[k];
        int p = l->inputs[0];
        alias[k] = k;
        if (!l->ops->copies_at_inference || l->act != TFC_ACT_LINEAR || l->ninputs != 1 ||
            p < 0 || m->bound[k].skip)
            continue;
        alias[k] = alias[p];
        bytes[3 * k] = 0;
        if (last[3 * k] > last[3 * alias[k]]) last[3 * alias[k]] = last[3 * k];
    }
    size_t region = pack(nb, bytes, first, last, off);
    if (region == SIZE_MAX) {
        free(bytes), free(first);
        free(L->y);
        L->y = NULL;
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    for (int k = 0; k < nb; k++)
        L->y[k / 3 * 4 + k % 3] = o + off[k];
    for (int k = 0; k < n; k++) L->y[4 * k] = L->y[4 * alias[k]];
    free(bytes), free(first), free(alias);
    P->outputs = region;
    o += region;
    L->ws = o; o = align_up(o + m->ws_bytes);
    P->workspace = o - L->ws;
    P->arena = o;
    return TFC_OK;
}

/* A layer whose kernels the backend lacks (tfc_layer_ops.needs: a layer that has landed on
 * the CPU first), or whose activation it lacks (tfc_backend.acts), refuses the model on it,
 * naming the layer and the op or activation. */
static tfc_status check_kernels(const tfc_model *m, const tfc_backend *be, tfc_error *err)
{
    for (int i = 0; i < m->nlayers; i++) {
        const tfc_layer *l = &m->layers[i];
        if (l->ops->writes_params && m->precision)
            return tfc_layer_error(err, l, "precision %s is not supported yet (the training "
                                           "forward writes the kernel, which the layer reads "
                                           "as a 16-bit copy of the float32 weights); use "
                                           "float32", tfc_precision_names[m->precision]);
        for (int p = 0; p < l->nparams; p++) {
            const tfc_param *pr = &l->params[p];
            if (!pr->l1 && !pr->l2) continue;
            if (!tfc_backend_has(be->ops, "penalty"))
                return tfc_layer_error(err, l,
                                       "the %s backend has no kernel for %s yet (op 'penalty'); "
                                       "run this model with --device cpu",
                                       be->ops->name, pr->regularizer);
            if (m->precision == TFC_PRECISION_FLOAT16)
                return tfc_layer_error(err, l,
                                       "%s with precision float16 is not supported yet (the "
                                       "penalty's gradient would miss the loss scale); use "
                                       "bf16 or float32", pr->regularizer);
        }
        for (int p = 0; p < l->nparams; p++) {
            const tfc_param *pr = &l->params[p];
            const char *arg = tfc_constraint_arg(pr->regularizer); /* where it came from */
            if (pr->constraint.kind && pr->trainable && !tfc_backend_has(be->ops, "constrain"))
                return tfc_layer_error(err, l,
                                       "the %s backend has no kernel for %s yet (op "
                                       "'constrain'); run this model with --device cpu",
                                       be->ops->name, arg ? arg : "a weight's constraint");
        }
        if ((l->activity_l1 || l->activity_l2) && !tfc_backend_has(be->ops, "penalty"))
            return tfc_layer_error(err, l,
                                   "the %s backend has no kernel for activity_regularizer yet "
                                   "(op 'penalty'); run this model with --device cpu",
                                   be->ops->name);
        if ((l->activity_l1 || l->activity_l2) && m->precision == TFC_PRECISION_FLOAT16)
            return tfc_layer_error(err, l,
                                   "activity_regularizer with precision float16 is not "
                                   "supported yet (the penalty's gradient would miss the loss "
                                   "scale); use bf16 or float32");
        if (!(be->acts >> l->act & 1))
            return tfc_layer_error(err, l,
                                   "the %s backend has no kernel for the activation '%s' yet; "
                                   "run this model with --device cpu",
                                   be->ops->name, tfc_act_names[l->act]);
        if (l->ops->cpu_first && be->device >= 0)
            return tfc_layer_error(err, l,
                                   "%s has not run on the %s backend under make test-gpu yet; "
                                   "run this model with --device cpu",
                                   l->ops->type, be->ops->name);
        const char *const *ops = l->ops->needs ? l->ops->needs(l) : NULL;
        for (const char *const *op = ops; op && *op; op++)
            if (!tfc_backend_has(be->ops, *op))
                return tfc_layer_error(err, l,
                                       "the %s backend has no kernel for %s yet (op '%s'); "
                                       "run this model with --device cpu",
                                       be->ops->name, l->ops->type, *op);
    }
    return TFC_OK;
}

static tfc_status bind(tfc_model *m, tfc_backend *be, int max_batch, int inference,
                       tfc_error *err)
{
    tfc_model_unbind(m);
    if (max_batch < 1) return tfc_error_set(err, TFC_ERR_USAGE, "batch size must be positive");
    /* memory for the longest sequences (varlen.c) */
    if (m->max_length && tfc_model_set_length(m, m->max_length, err)) return err->code;
    tfc_status st = check_kernels(m, be, err);
    if (st) return st;
    for (int k = 0; k < m->noutputs && !inference; k++)
        if (!(be->losses >> m->heads[k].loss & 1))
            return tfc_error_set(err, TFC_ERR_CONFIG,
                                 "the %s backend has no kernel for the loss '%s' yet; run this "
                                 "model with --device cpu", be->ops->name,
                                 tfc_loss_names[m->heads[k].loss]);
    for (int i = 0; i < m->nmetrics && !inference; i++)
        if (m->metrics[i].fn >= 0 && !(be->losses >> m->metrics[i].fn & 1))
            return tfc_error_set(err, TFC_ERR_CONFIG,
                                 "the %s backend has no kernel for the metric '%s' yet; run this "
                                 "model with --device cpu", be->ops->name, m->metrics[i].name);
    m->regularized = 0;
    for (int i = 0; i < m->nlayers; i++)
        for (int p = 0; p < m->layers[i].nparams; p++)
            m->regularized |= m->layers[i].params[p].l1 != 0 || m->layers[i].params[p].l2 != 0;
    if (!tfc_precision_available(be, m->precision))
        return tfc_error_set(err, TFC_ERR_CONFIG,
                             "precision: %s is not available on %s yet (docs/gpu.md, Status); "
                             "float32 is",
                             tfc_precision_names[m->precision], be->ops->name);
    /* the trainable parameters' gradients, then the frozen ones' (written by their layers'
     * backward passes where those run, read by nothing) */
    int64_t ngrad = m->trainable_count + m->frozen_count, nall = m->param_count;
    m->params = alloc_or_report(be, (size_t)nall * 4, "parameters", max_batch, err);
    m->grads = alloc_or_report(be, (size_t)ngrad * 4, "gradients", max_batch, err);
    m->copies = m->precision ? alloc_or_report(be, (size_t)ngrad * 4, "parameters", max_batch, err)
                             : NULL;
    m->bound = calloc((size_t)m->nlayers + 1, sizeof *m->bound);
    m->be = be;
    if (!m->params || !m->grads || (m->precision && !m->copies) || !m->bound) {
        tfc_model_unbind(m);
        return err && err->count ? err->code : tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    /* Parameters: trainable ones first, in layer order (the optimizer's range), then the
     * frozen ones, then the rest; gradients for the first two. With bf16 or float16 the
     * layers read the copies of the first two, at the same offsets (master() finds the
     * floats). */
    int64_t off = 0, goff = 0;
    for (int pass = 0; pass < 3; pass++)
        for (int i = 0; i < m->nlayers; i++)
            for (int p = 0; p < m->layers[i].nparams; p++) {
                tfc_param *pr = &m->layers[i].params[p];
                if ((pass == 0 && !pr->trainable) || (pass == 1 && !pr->frozen) ||
                    (pass == 2 && graded(pr)) || pr->shared)
                    continue;
                pr->data = (m->copies && graded(pr) ? m->copies : m->params) + off;
                off += pr->numel;
                if (graded(pr)) {
                    pr->grad = m->grads + goff;
                    goff += pr->numel;
                }
            }
    /* A layer called again: its calls' weights are its own (tfc_param.shared). */
    for (int i = 0; i < m->nlayers; i++)
        for (int p = 0; m->layers[i].calls >= 0 && p < m->layers[i].nparams; p++) {
            const tfc_param *o = &m->layers[m->layers[i].calls].params[p];
            m->layers[i].params[p].data = o->data;
            m->layers[i].params[p].grad = o->grad;
        }
    /* The constants hold their values from here on, whatever initialises or loads the
     * weights (a weights file has none of them). */
    for (int i = 0; i < m->nlayers && !st; i++)
        for (int p = 0; p < m->layers[i].nparams && !st; p++) {
            tfc_param *pr = &m->layers[i].params[p];
            if (!pr->constant || pr->shared) continue;
            float *host = malloc((size_t)pr->numel * 4 + 1);
            st = host ? tfc_init_fill(&pr->init, &pr->shape, 0, host, err)
                      : tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
            if (!st && m->layers[i].ops->fill_param)
                m->layers[i].ops->fill_param(&m->layers[i], p, host);
            if (!st) be->ops->upload(be, pr->data, host, (size_t)pr->numel * 4);
            free(host);
        }
    if (st) {
        tfc_model_unbind(m);
        return st;
    }

    /* Activations: plan offsets, then one allocation. */
    m->inference_only = inference;
    be->frozen = inference;
    plan_chains(m, be, max_batch);
    layout L;
    st = plan_layout(m, be, max_batch, inference, &L, err);
    if (st) {
        tfc_model_unbind(m);
        return st;
    }
    size_t B = (size_t)max_batch;
    m->arena = alloc_or_report(be, L.plan.arena, "activations", max_batch, err);
    m->host_mask = m->mask_layer >= 0 ? malloc(B * (size_t)mask_steps(m) * 4) : NULL;
    int short_of = 0; /* a host buffer that could not be had */
    for (int k = 0; k < m->noutputs; k++) {
        tfc_head *h = &m->heads[k];
        const size_t loss_rows = B * (size_t)h->label_rows;
        const int smooth = h->loss_opt.label_smoothing > 0, weighted = !!h->loss_opt.class_weight;
        h->host_target = smooth ? malloc(loss_rows * (size_t)h->classes * 4) : NULL;
        h->host_weight = weighted ? malloc(loss_rows * 4) : NULL;
        short_of |= (smooth && !h->host_target) || (weighted && !h->host_weight);
        int counted = 0;
        for (int i = 0; i < h->nmetrics; i++)
            counted |= m->metrics[h->metric0 + i].kind == TFC_METRIC_COUNTED;
        if (counted) { /* counted metrics: the host's copies of a batch */
            const size_t label_cols = h->loss == TFC_LOSS_SPARSE_CCE ? 1 : (size_t)h->classes;
            h->count_labels = malloc(loss_rows * label_cols * 4);
            h->count_weight = malloc(loss_rows * 4);
            h->count_out = malloc(loss_rows * (size_t)h->classes * 4);
            short_of |= !h->count_labels || !h->count_weight || !h->count_out;
        }
    }
    if (m->ncounts) m->counts = malloc((size_t)m->ncounts * sizeof *m->counts);
    if (!m->arena || (m->mask_layer >= 0 && !m->host_mask) || short_of ||
        (m->ncounts && !m->counts)) {
        free(L.y);
        tfc_model_unbind(m);
        return err && err->count ? err->code : tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    char *base = m->arena;
    m->x = base + L.x;
    m->dx = m->input_dtype == TFC_F32 && !inference ? (float *)(base + L.dx) : NULL;
    m->xs[0] = m->x;
    m->dxs[0] = m->dx;
    for (int k = 1; k < m->ninputs; k++) {
        m->xs[k] = base + L.xk[k];
        m->dxs[k] = m->more[k - 1].dtype == TFC_F32 && !inference ? (float *)(base + L.dxk[k])
                                                                   : NULL;
    }
    m->mask = m->mask_layer >= 0 ? (float *)(base + L.mask) : NULL;
    m->scalars = (float *)(base + L.scalars);
    for (int k = 0, at = 1 + m->nmetrics; k < m->noutputs; k++) {
        tfc_head *h = &m->heads[k];
        h->labels = base + L.labels[k];
        h->target = h->loss_opt.label_smoothing > 0 ? (float *)(base + L.target[k]) : NULL;
        h->row_weight = h->loss_opt.class_weight ? (float *)(base + L.weight[k]) : NULL;
        /* one head: the model's scalars; several: each its own after the model's */
        h->scalars = m->noutputs > 1 ? m->scalars + at : m->scalars;
        at += 1 + h->nmetrics;
    }
    m->ws = base + L.ws;
    for (int i = 0; i < m->nlayers; i++) {
        tfc_layer *l = &m->layers[i];
        tfc_bound *b = &m->bound[i];
        b->y = (float *)(base + L.y[4 * i]);
        b->z = l->act != TFC_ACT_LINEAR ? (float *)(base + L.y[4 * i + 1]) : b->y;
        if (inference) {
            b->dy = b->dz = NULL;
        } else {
            b->dy = (float *)(base + L.y[4 * i + 3]);
            b->dz = has_dz(l) ? (float *)(base + L.y[4 * i + 3] + b->grad_bytes / 2) : b->dy;
        }
        l->saved = l->saved_floats || l->fixed_floats ? (float *)(base + L.y[4 * i + 2]) : NULL;
        if (l->joins_mask) {
            b->mask = (float *)(base + b->mask_at);
            b->host_mask = malloc(B * (size_t)l->out_shape.dim[0] * 4);
            if (!b->host_mask) {
                free(L.y);
                tfc_model_unbind(m);
                return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
            }
        }
    }
    for (int i = 0; i < m->nlayers; i++) { /* each masked layer reads its input's mask */
        tfc_layer *l = &m->layers[i];
        l->mask = NULL;
        for (int j = 0; j < l->ninputs && !l->mask; j++) {
            int64_t steps;
            if (l->mask_inputs >> j & 1) l->mask = carried_mask(m, l->inputs[j], 0, &steps);
        }
    }
    free(L.y);
    m->max_batch = max_batch;
    m->mem = L.plan;
    be->ops->zero(be, m->arena, L.plan.arena);
    be->ops->zero(be, m->grads, (size_t)ngrad * 4);
    m->ex.be = be;
    m->ex.ws = m->ws;
    plan_backward(m);
    return TFC_OK;
}

tfc_status tfc_model_bind(tfc_model *m, tfc_backend *be, int max_batch, tfc_error *err)
{
    return bind(m, be, max_batch, 0, err);
}

tfc_status tfc_model_bind_inference(tfc_model *m, tfc_backend *be, int max_batch,
                                    tfc_error *err)
{
    return bind(m, be, max_batch, 1, err);
}

const char *const tfc_precision_names[] = {"float32", "bf16", "float16", NULL};

void tfc_model_set_precision(tfc_model *m, tfc_precision p)
{
    TFC_ASSERT(!m->be);
    m->precision = p;
}

tfc_precision tfc_model_precision(const tfc_model *m) { return m->precision; }

int tfc_precision_available(const tfc_backend *be, tfc_precision p)
{
    return p == TFC_PRECISION_BF16      ? be->ops->round_bf16 != NULL
           : p == TFC_PRECISION_FLOAT16 ? be->ops->round_f16 && be->ops->loss_scale_at
                                        : 1;
}

void tfc_model_set_loss_scale(tfc_model *m, float s) { m->loss_scale = s; }
void tfc_model_set_loss_scale_at(tfc_model *m, const tfc_step_state *st) { m->loss_scale_at = st; }

/* y = x rounded to the model's 16-bit format (n floats; y == x allowed) */
static void round_to(tfc_model *m, int64_t n, const float *x, float *y)
{
    if (m->precision == TFC_PRECISION_BF16) m->be->ops->round_bf16(m->be, n, x, y);
    else m->be->ops->round_f16(m->be, n, x, y);
}

float *tfc_model_params(tfc_model *m) { return m->params; }
static void settle_grads(tfc_model *m, int i);

float *tfc_model_grads(tfc_model *m)
{
    if (m->bound)
        for (int i = 0; i < m->nlayers; i++) settle_grads(m, i);
    return m->grads;
}
float *tfc_model_input_grad(tfc_model *m) { return m->dx; }
float *tfc_model_input_grad_at(tfc_model *m, int k) { return m->dxs[k]; }
void tfc_model_want_input_grad(tfc_model *m, int on)
{
    m->want_input_grad = on;
    if (m->bound) plan_backward(m);
}

/* The float32 values of a bound parameter: with bf16 or float16 a trainable one's data is
 * its rounded copy, which each forward pass rounds from these (tfc_model_forward_launch). */
static float *master(const tfc_model *m, const tfc_param *p)
{
    return m->copies && graded(p) ? m->params + (p->data - m->copies) : p->data;
}

tfc_status tfc_model_init_weights(tfc_model *m, uint64_t seed, tfc_error *err)
{
    TFC_ASSERT(m->be);
    for (int i = 0; i < m->nlayers; i++)
        for (int p = 0; p < m->layers[i].nparams; p++) {
            tfc_param *pr = &m->layers[i].params[p];
            if (pr->shared) continue; /* initialised once, at its first call */
            float *host = malloc((size_t)pr->numel * 4 + 1);
            if (!host) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
            const uint64_t key = tfc_rng_key(seed, (uint64_t)i * 16 + (uint64_t)p);
            tfc_status s = tfc_init_fill(&pr->init, &pr->shape, tfc_init_key(&pr->init, key),
                                         host, err);
            if (s == TFC_OK && m->layers[i].ops->fill_param)
                m->layers[i].ops->fill_param(&m->layers[i], p, host);
            if (s == TFC_OK) m->be->ops->upload(m->be, master(m, pr), host, (size_t)pr->numel * 4);
            free(host);
            if (s) return s;
        }
    return TFC_OK;
}

void tfc_model_param_download(tfc_model *m, const tfc_param *p, float *host)
{
    m->be->ops->download(m->be, host, master(m, p), (size_t)p->numel * 4);
}

void tfc_model_grad_download(tfc_model *m, const tfc_param *p, float *host)
{
    tfc_model_grads(m); /* settles gradients still unset since tfc_model_zero_grad */
    m->be->ops->download(m->be, host, p->grad, (size_t)p->numel * 4);
}

void tfc_model_param_upload(tfc_model *m, tfc_param *p, const float *host)
{
    m->be->ops->upload(m->be, master(m, p), host, (size_t)p->numel * 4);
}

/* Input k's token ids must index every Embedding that reads them. */
static tfc_status check_ids(tfc_model *m, int k, const int32_t *ids, int batch, tfc_error *err)
{
    int64_t per = tfc_shape_numel(tfc_model_input_shape_at(m, k));
    for (int i = 0; i < m->nlayers; i++) {
        const tfc_layer *l = &m->layers[i];
        if (!l->id_limit || l->inputs[0] != -1 - k) continue;
        for (int64_t e = 0; e < (int64_t)batch * per; e++)
            if (ids[e] < 0 || ids[e] >= l->id_limit)
                return tfc_error_set(err, TFC_ERR_DATA,
                                     "example %lld of the batch: token id %d at position %lld is "
                                     "outside [0, %lld), the %s of layer '%s'",
                                     (long long)(e / per), ids[e], (long long)(e % per),
                                     (long long)l->id_limit,
                                     l->ops->looks_up ? "input_dim" : "num_tokens", l->name);
    }
    return TFC_OK;
}

static void gather_inputs(tfc_model *m, const tfc_layer *l, const void **xs, float **dxs)
{
    for (int j = 0; j < l->ninputs; j++) {
        int p = l->inputs[j];
        xs[j] = p < 0 ? m->xs[-1 - p] : m->bound[p].y;
        if (dxs)
            dxs[j] = p < 0 ? (m->want_input_grad ? m->dxs[-1 - p] : NULL)
                           : m->bound[p].no_backward ? NULL : m->bound[p].dy;
    }
}

void tfc_model_layer_forward(tfc_model *m, int i)
{
    tfc_layer *l = &m->layers[i];
    tfc_bound *b = &m->bound[i];
    const void *xs[TFC_LAYER_MAX_INPUTS];
    if (!m->ex.training && b->skip) return; /* an earlier layer's chain computed it */
    if (m->ex.training && b->relu_done) { /* the layer before wrote this ReLU's output */
        b->z_unset = 1;
        return;
    }
    gather_inputs(m, l, xs, NULL);
    m->ex.ids = b->ids_from >= 0 ? m->xs[-1 - m->layers[b->ids_from].inputs[0]] : NULL;
    m->ex.ids_table = b->ids_from >= 0 ? &m->layers[b->ids_from].params[0] : NULL;
    if (m->ex.training && b->relu_into >= 0) {
        l->ops->forward_relu(l, &m->ex, xs, m->bound[b->relu_into].y);
        b->z_unset = 0;
        return;
    }
    if (!m->ex.training && b->chain_end != i) {
        tfc_bn_params bn;
        if (b->chain_bn >= 0) m->layers[b->chain_bn].ops->bn_params(&m->layers[b->chain_bn], &bn);
        const float *res = b->chain_res >= 0 ? m->bound[b->chain_res].y : NULL;
        float *end = m->bound[b->chain_end].y;
        if (b->chain_pool >= 0) { /* this layer's own output: the pooling's scratch */
            const tfc_layer *p = &m->layers[b->chain_pool];
            tfc_pool_desc pd = p->ops->pool_params(p, m->ex.batch);
            l->ops->forward_fused(l, &m->ex, xs, b->y, b->chain_bn >= 0 ? &bn : NULL, res,
                                  b->chain_act, &pd, end);
        } else {
            l->ops->forward_fused(l, &m->ex, xs, end, b->chain_bn >= 0 ? &bn : NULL, res,
                                  b->chain_act, NULL, NULL);
        }
        b->z_unset = 0;
        return;
    }
    /* The layer applies its activation itself (in one pass where the backend can): at
     * inference any activation, unless the loss reads the pre-activation (the last layer's
     * softmax/sigmoid folded into it); in training ReLU alone, whose derivative backward
     * reads from the output as exactly as from the pre-activation (y > 0 where z > 0; a
     * NaN is neither), so no layer ever needs z. */
    b->z_unset = l->act != TFC_ACT_LINEAR && l->ops->forward_act &&
                 (!m->ex.training || l->act == TFC_ACT_RELU) &&
                 !tfc_model_fused_at(m, i);
    if (b->z_unset) {
        l->ops->forward_act(l, &m->ex, xs, b->y);
        return;
    }
    l->ops->forward(l, &m->ex, xs, b->z);
    if (l->act != TFC_ACT_LINEAR) {
        int cols = (int)l->out_shape.dim[l->out_shape.ndim - 1];
        m->be->ops->act_forward(m->be, l->act, (int64_t)m->ex.batch * tfc_layer_out_numel(l),
                                cols, b->z, b->y);
    }
}

tfc_status tfc_model_stage_inputs(tfc_model *m, const void *const *xs, int batch, int training,
                                  uint64_t seed, uint64_t step, tfc_error *err)
{
    TFC_ASSERT(m->be);
    if (batch < 1 || batch > m->max_batch)
        return tfc_error_set(err, TFC_ERR_USAGE, "batch of %d examples, bound for 1 to %d", batch,
                             m->max_batch);
    for (int k = 0; k < m->ninputs; k++) {
        if (tfc_model_input_dtype_at(m, k) != TFC_I32) continue;
        tfc_status s = check_ids(m, k, xs[k], batch, err);
        if (s) return s;
    }
    if (training && m->inference_only)
        return tfc_error_set(err, TFC_ERR_USAGE, "model '%s' is bound for inference only",
                             m->name);
    m->ex.batch = batch;
    m->ex.training = training;
    m->ex.seed = seed;
    m->ex.step = step;
    for (int k = 0; k < m->ninputs; k++) {
        int64_t n = (int64_t)batch * tfc_shape_numel(tfc_model_input_shape_at(m, k));
        m->be->ops->upload(m->be, m->xs[k], xs[k], (size_t)n * 4);
        if (m->precision && tfc_model_input_dtype_at(m, k) == TFC_F32)
            round_to(m, n, m->xs[k], m->xs[k]);
    }
    if (m->mask_layer >= 0) {
        const tfc_layer *ml = &m->layers[m->mask_layer];
        const void *x = xs[m->mask_input];
        const int32_t *ids = x;
        int64_t n = (int64_t)batch * mask_steps(m);
        if (ml->ops->host_mask)
            ml->ops->host_mask(ml, x, n, m->host_mask);
        else /* mask_zero: id 0 is padding (Keras's Embedding). */
            for (int64_t k = 0; k < n; k++) m->host_mask[k] = ids[k] != 0 ? 1.f : 0.f;
        m->be->ops->upload(m->be, m->mask, m->host_mask, (size_t)n * 4);
        join_masks(m, batch);
    }
    return TFC_OK;
}

tfc_status tfc_model_stage_input(tfc_model *m, const void *x, int batch, int training,
                                 uint64_t seed, uint64_t step, tfc_error *err)
{
    if (m->ninputs > 1)
        return tfc_error_set(err, TFC_ERR_USAGE, "model '%s' takes %d inputs (%s, %s%s): "
                             "give each its batch", m->name, m->ninputs,
                             tfc_model_input_name(m, 0), tfc_model_input_name(m, 1),
                             m->ninputs > 2 ? ", ..." : "");
    return tfc_model_stage_inputs(m, &x, batch, training, seed, step, err);
}

/* bf16 and float16 (docs/solver.md, "Precision"): what a layer hands on holds 16-bit
 * values, its output and the pre-activation it keeps for backward (plan_chains builds no
 * chains then, so every layer writes its own). */
static void round_outputs(tfc_model *m, int i)
{
    const tfc_bound *b = &m->bound[i];
    if (m->layers[i].out_dtype == TFC_I32) return; /* indices, not values */
    int64_t n = (int64_t)m->ex.batch * tfc_layer_out_numel(&m->layers[i]);
    round_to(m, n, b->y, b->y);
    if (b->z != b->y && !b->z_unset) round_to(m, n, b->z, b->z);
}

void tfc_model_forward_launch(tfc_model *m)
{
    m->be->inference_pass = !m->ex.training;
    /* bf16, float16: the layers read the weights rounded from their float32 values as they
     * are now (after an update, a load, an average swapped in: whatever wrote
     * tfc_model_params) */
    if (m->copies) round_to(m, m->trainable_count + m->frozen_count, m->params, m->copies);
    for (int i = 0; i < m->nlayers; i++) {
        m->layers[i].rng_key = tfc_rng_key(m->ex.seed, 0x100000u + (uint64_t)i);
        tfc_model_layer_forward(m, i);
        if (m->precision) round_outputs(m, i);
    }
    m->be->inference_pass = 0;
}

tfc_status tfc_model_forward(tfc_model *m, const void *x, int batch, int training,
                             uint64_t seed, uint64_t step, tfc_error *err)
{
    tfc_status s = tfc_model_stage_input(m, x, batch, training, seed, step, err);
    if (!s) tfc_model_forward_launch(m);
    return s;
}

tfc_status tfc_model_forward_inputs(tfc_model *m, const void *const *xs, int batch,
                                    int training, uint64_t seed, uint64_t step, tfc_error *err)
{
    tfc_status s = tfc_model_stage_inputs(m, xs, batch, training, seed, step, err);
    if (!s) tfc_model_forward_launch(m);
    return s;
}

/* ---- adapting a layer to its input (solver/adapt.c) ------------------------------------------ */

int tfc_model_layer_adapts(const tfc_model *m, int i)
{
    const tfc_layer *l = &m->layers[i];
    if (!l->ops->adapt_begin || !l->ops->adapt_batch || !l->ops->adapt_end) return 0;
    if (l->calls >= 0) return 0; /* adapted once, on its first call's input */
    for (int p = 0; p < l->nparams; p++)
        if (!l->params[p].constant) return 1;
    return 0;
}

tfc_status tfc_model_adapt_begin(tfc_model *m, int i, tfc_error *err)
{
    TFC_ASSERT(tfc_model_layer_adapts(m, i));
    return m->layers[i].ops->adapt_begin(&m->layers[i], err);
}

tfc_status tfc_model_adapt_batch(tfc_model *m, int i, const void *const *xs, int batch,
                                 tfc_error *err)
{
    tfc_layer *l = &m->layers[i];
    tfc_status s = tfc_model_stage_inputs(m, xs, batch, 0, 0, 0, err);
    if (s) return s;
    m->be->inference_pass = 1;
    for (int j = 0; j < i; j++) {
        m->layers[j].rng_key = tfc_rng_key(0, 0x100000u + (uint64_t)j);
        tfc_model_layer_forward(m, j);
        if (m->precision) round_outputs(m, j);
    }
    m->be->inference_pass = 0;
    const void *in[TFC_LAYER_MAX_INPUTS];
    gather_inputs(m, l, in, NULL);
    const size_t n = (size_t)batch * (size_t)tfc_shape_numel(&l->in_shape[0]);
    float *host = malloc(n * sizeof *host);
    if (!host) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    m->be->ops->download(m->be, host, in[0], n * sizeof *host);
    l->ops->adapt_batch(l, host, batch);
    free(host);
    return TFC_OK;
}

tfc_status tfc_model_adapt_end(tfc_model *m, int i, tfc_error *err)
{
    tfc_layer *l = &m->layers[i];
    float *host[TFC_LAYER_MAX_PARAMS] = {0};
    tfc_status s = TFC_OK;
    for (int p = 0; p < l->nparams && !s; p++) {
        host[p] = malloc((size_t)l->params[p].numel * sizeof(float));
        if (!host[p]) s = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        else tfc_model_param_download(m, &l->params[p], host[p]);
    }
    if (!s) {
        l->ops->adapt_end(l, host);
        for (int p = 0; p < l->nparams; p++) tfc_model_param_upload(m, &l->params[p], host[p]);
    }
    for (int p = 0; p < l->nparams; p++) free(host[p]);
    return s;
}

/* Head h's labels (host, as the loss takes them) staged: checked, uploaded, and its loss
 * call set up (tfc_head.loss_call). */
static tfc_status stage_head(tfc_model *m, tfc_head *h, const void *labels, tfc_error *err)
{
    tfc_backend *be = m->be;
    const tfc_layer *out = &m->layers[h->layer];
    int batch = m->ex.batch;
    int64_t rows = (int64_t)batch * h->label_rows;
    if (h->loss == TFC_LOSS_SPARSE_CCE) {
        const int32_t *lab = labels;
        for (int64_t r = 0; r < rows; r++)
            if (lab[r] < 0 || lab[r] >= h->classes)
                return tfc_error_set(err, TFC_ERR_DATA,
                                     "example %lld of the batch: label %d is outside [0, %d), the "
                                     "classes of layer '%s'",
                                     (long long)(r / h->label_rows), lab[r], h->classes,
                                     out->name);
    }
    const size_t label_bytes =
        (size_t)rows * 4 * (h->loss == TFC_LOSS_SPARSE_CCE ? 1 : (size_t)h->classes);
    be->ops->upload(be, h->labels, labels, label_bytes);
    /* Sequence outputs that carry the mask count only real steps (Keras). */
    tfc_loss_call *c = &h->loss_call;
    const float *host_weight = NULL;
    int64_t counted = rows, steps = 0;
    const float *carried = out->mask_out && m->mask ? carried_mask(m, h->layer, 0, &steps)
                                                    : NULL;
    c->weight = NULL;
    if (carried && h->label_rows == steps) {
        c->weight = carried;
        host_weight = carried_mask(m, h->layer, 1, &steps);
        counted = 0;
        for (int64_t r = 0; r < rows; r++) counted += host_weight[r] != 0;
    }
    c->scale = counted ? 1.0f / (float)counted : 0.f;
    if (h->count_labels) { /* what tfc_model_loss_result counts */
        memcpy(h->count_labels, labels, label_bytes);
        h->count_weighted = host_weight != NULL;
        if (host_weight) memcpy(h->count_weight, host_weight, (size_t)rows * 4);
        h->count_rows = rows;
    }
    /* loss options: smoothed targets (a sparse label becomes a categorical target) and,
     * after a training-mode forward only (Keras's fit(class_weight); evaluation is
     * unweighted), the rows' class weights; the mean still divides by the counted rows.
     * Metrics keep the plain labels and the 0/1 mask. */
    c->kind = h->loss;
    c->target = h->labels;
    c->loss_weight = c->weight;
    int weighted = m->ex.training && h->row_weight;
    if (h->target || weighted) {
        tfc_loss_targets(h, labels, rows, host_weight, h->host_target,
                         weighted ? h->host_weight : NULL);
        if (h->target) {
            be->ops->upload(be, h->target, h->host_target, (size_t)rows * (size_t)h->classes * 4);
            c->target = h->target;
            if (c->kind == TFC_LOSS_SPARSE_CCE) c->kind = TFC_LOSS_CCE;
        }
        if (weighted) {
            be->ops->upload(be, h->row_weight, h->host_weight, (size_t)rows * 4);
            c->loss_weight = h->row_weight;
        }
    }
    h->loss_counted = counted;
    return TFC_OK;
}

tfc_status tfc_model_stage_targets(tfc_model *m, const void *const *labels, tfc_error *err)
{
    if (tfc_model_check_loss(m, err)) return TFC_ERR_CONFIG;
    for (int k = 0; k < m->noutputs; k++) {
        tfc_status s = stage_head(m, &m->heads[k], labels[k], err);
        if (s) {
            if (m->noutputs > 1)
                tfc_error_prefix(err, "output '%s': ", m->layers[m->outputs[k]].name);
            return s;
        }
    }
    return TFC_OK;
}

tfc_status tfc_model_stage_labels(tfc_model *m, const void *labels, tfc_error *err)
{
    const void *one[1] = {labels};
    if (m->noutputs > 1)
        return tfc_error_set(err, TFC_ERR_USAGE, "model '%s' has %d outputs: stage the labels "
                             "of each (tfc_model_stage_targets)", m->name, m->noutputs);
    return tfc_model_stage_targets(m, one, err);
}

/* Head h's loss, metrics and, with want_grad, its gradient into its layer's, as staged. */
static void head_loss(tfc_model *m, tfc_head *h, int want_grad)
{
    tfc_backend *be = m->be;
    const tfc_layer *out = &m->layers[h->layer];
    const tfc_bound *b = &m->bound[h->layer];
    const tfc_loss_call *c = &h->loss_call;
    int64_t rows = (int64_t)m->ex.batch * h->label_rows;
    const float *x = h->fused ? b->z : b->y;
    int from_logits = h->fused || !(out->act == TFC_ACT_SOFTMAX || out->act == TFC_ACT_SIGMOID);
    float *dx = NULL;
    if (want_grad) { /* the block the loss and the output's consumers accumulate into */
        be->ops->zero(be, b->dy, b->grad_bytes);
        dx = h->fused ? b->dz : b->dy;
    }
    be->ops->zero(be, h->scalars, (size_t)(1 + h->nmetrics) * 4);
    be->ops->loss(be, c->kind, from_logits, (float)h->loss_opt.delta, rows, h->classes, x,
                  c->target, c->loss_weight, c->scale, h->scalars, dx);
    const int64_t ndx = (int64_t)m->ex.batch * tfc_layer_out_numel(out);
    if (dx && h->weight != 1.0f) /* loss_weights: the model's loss is the weighted sum */
        be->ops->scale(be, ndx, h->weight, dx);
    if (dx && m->loss_scale_at) /* the loss scale (float16): the gradient alone */
        be->ops->loss_scale_at(be, ndx, m->loss_scale_at, dx);
    else if (dx && m->loss_scale != 1.0f)
        be->ops->scale(be, ndx, m->loss_scale, dx);
    for (int i = 0; i < h->nmetrics; i++) {
        const tfc_metric *mt = &m->metrics[h->metric0 + i];
        const tfc_metric_kind k = mt->kind;
        if (mt->fn >= 0) /* the rows' sum of a loss function, on the output as Keras's metric
                          * sees it (a fused softmax's probabilities, not its logits) */
            be->ops->loss(be, (tfc_loss_kind)mt->fn, mt->fn_logits, 1.0f, rows, h->classes, b->y,
                          h->labels, c->weight, 1.0f, h->scalars + 1 + i, NULL);
        else if (k != TFC_METRIC_LOSS && k != TFC_METRIC_COUNTED)
            be->ops->accuracy(be, h->loss, from_logits, rows, h->classes, mt->k, x, h->labels,
                              c->weight, h->scalars + 1 + i);
    }
}

void tfc_model_loss_compute(tfc_model *m, int want_grad)
{
    tfc_backend *be = m->be;
    for (int k = 0; k < m->ninputs && want_grad && m->want_input_grad; k++)
        if (m->dxs[k]) /* the input's consumers accumulate into it; else nothing writes it */
            be->ops->zero(be, m->dxs[k], (size_t)m->max_batch *
                          (size_t)tfc_shape_numel(tfc_model_input_shape_at(m, k)) * 4);
    if (m->noutputs > 1) be->ops->zero(be, m->scalars, (size_t)(1 + m->nmetrics) * 4);
    for (int k = 0; k < m->noutputs; k++) {
        head_loss(m, &m->heads[k], want_grad);
        if (m->noutputs > 1) /* the model's loss: the heads' weighted sum */
            be->ops->axpy(be, 1, m->heads[k].weight, m->heads[k].scalars, m->scalars);
    }
    if (m->regularized) penalties(m, 1, 0); /* in every loss, as Keras's compute_loss */
    if (m->activity) activity_penalties(m, -1);
}

tfc_status tfc_model_loss_launch_targets(tfc_model *m, const void *const *labels, int want_grad,
                                         tfc_error *err)
{
    tfc_status s = tfc_model_stage_targets(m, labels, err);
    if (!s) tfc_model_loss_compute(m, want_grad);
    return s;
}

tfc_status tfc_model_loss_launch(tfc_model *m, const void *labels, int want_grad, tfc_error *err)
{
    tfc_status s = tfc_model_stage_labels(m, labels, err);
    if (!s) tfc_model_loss_compute(m, want_grad);
    return s;
}

/* Head h's metrics into out->metric (at their places in the model's), from its scalars s
 * (its loss, then its metrics) and its outputs read back for the counted ones. */
static void head_result(tfc_model *m, tfc_head *h, const float *s, tfc_batch_result *out)
{
    const int64_t counted = h->loss_counted;
    if (h->count_labels) { /* the counted metrics, from the outputs read back */
        const tfc_layer *l = &m->layers[h->layer];
        m->be->ops->download(m->be, h->count_out, m->bound[h->layer].y,
                             (size_t)m->ex.batch * (size_t)tfc_layer_out_numel(l) * 4);
    }
    for (int q = 0; q < h->nmetrics; q++) {
        const int i = h->metric0 + q;
        const tfc_metric *mt = &m->metrics[i];
        if (mt->kind == TFC_METRIC_COUNTED) {
            tfc_counted_add(mt->counted, h->count_out, h->count_labels,
                            h->count_weighted ? h->count_weight : NULL, h->count_rows,
                            m->counts + mt->at);
            out->metric[i] = tfc_counted_value(mt->counted, m->counts + mt->at);
        } else {
            out->metric[i] = mt->kind == TFC_METRIC_LOSS ? s[0]
                             : counted ? mt->sign * tfc_metric_of_mean(mt->kind, s[1 + q] /
                                                                                 (double)counted)
                                       : 0;
        }
    }
}

void tfc_model_loss_result(tfc_model *m, tfc_batch_result *out)
{
    float s[1 + TFC_MAX_METRICS + TFC_MODEL_MAX_OUTPUTS * (1 + TFC_MAX_METRICS)];
    m->be->ops->download(m->be, s, m->scalars, (size_t)scalar_count(m) * 4);
    out->loss = s[0];
    /* the rows a batch's means are over: one output's counted rows; several outputs', the
     * batch's examples (Keras weighs a batch's loss by its size) */
    out->count = m->noutputs > 1 ? m->ex.batch : m->heads[0].loss_counted;
    out->counts = NULL;
    if (m->ncounts) {
        memset(m->counts, 0, (size_t)m->ncounts * sizeof *m->counts);
        out->counts = m->counts;
    }
    if (m->noutputs == 1) {
        head_result(m, &m->heads[0], s, out);
        return;
    }
    for (int k = 0; k < m->noutputs; k++) {
        const tfc_head *h = &m->heads[k];
        const float *hs = s + (h->scalars - m->scalars);
        out->metric[k] = hs[0]; /* OUTPUT_loss */
        head_result(m, &m->heads[k], hs, out);
    }
}

const float *tfc_model_loss_scalar(const tfc_model *m) { return m->scalars; }

int64_t tfc_model_loss_rows(const tfc_model *m)
{
    if (m->noutputs == 1) return m->heads[0].loss_counted;
    uint64_t key = 0; /* every head's rows: its scale is a by-value argument too */
    for (int k = 0; k < m->noutputs; k++)
        key = key * 1000003u + (uint64_t)m->heads[k].loss_counted;
    return (int64_t)(key >> 1);
}

tfc_status tfc_model_loss(tfc_model *m, const void *labels, int want_grad,
                          tfc_batch_result *out, tfc_error *err)
{
    tfc_status s = tfc_model_loss_launch(m, labels, want_grad, err);
    if (!s) tfc_model_loss_result(m, out);
    return s;
}

tfc_status tfc_model_loss_targets(tfc_model *m, const void *const *labels, int want_grad,
                                  tfc_batch_result *out, tfc_error *err)
{
    tfc_status s = tfc_model_loss_launch_targets(m, labels, want_grad, err);
    if (!s) tfc_model_loss_result(m, out);
    return s;
}

/* On the CPU lazily: each layer's parameter gradients are zeroed, or written instead of
 * added to by a layer with assigns_param_grads, at its next backward step (grads_unset);
 * whatever reads them before (tfc_model_grads) zeroes those still unset. A GEMM that writes
 * the gradient with beta 0 at the end of the step costs less than a pass over all of them at
 * its start (mnist_mlp: 2.7 MB) and a GEMM adding to them after the forward pass has evicted
 * them. On a GPU one zero of the arena at once: a launch per layer would cost more than the
 * bytes. */
void tfc_model_zero_grad(tfc_model *m)
{
    if (m->be->device >= 0) {
        m->be->ops->zero(m->be, m->grads, (size_t)(m->trainable_count + m->frozen_count) * 4);
        return;
    }
    for (int i = 0; i < m->nlayers; i++) m->bound[i].grads_unset = 1;
}

/* The trainable parameters' gradients of layer i: one block (bind puts them side by side) */
static float *layer_grads(tfc_model *m, int i, size_t *bytes)
{
    const tfc_layer *l = &m->layers[i];
    float *first = NULL;
    int64_t n = 0;
    for (int p = 0; p < l->nparams; p++)
        if (l->params[p].grad) {
            if (!first) first = l->params[p].grad;
            n += l->params[p].numel;
        }
    *bytes = (size_t)n * 4;
    return first;
}

/* The layer whose gradients' state (grads_unset) is layer i's: the one it calls again, whose
 * gradients are its own, or itself */
static int grads_of(const tfc_model *m, int i)
{
    return m->layers[i].calls >= 0 ? m->layers[i].calls : i;
}

/* Zeroes layer i's parameter gradients if they are still unset (before a backward that adds
 * to them, or a read): every call of a layer adds to the one gradient */
static void settle_grads(tfc_model *m, int i)
{
    i = grads_of(m, i);
    if (!m->bound[i].grads_unset) return;
    m->bound[i].grads_unset = 0;
    size_t bytes;
    float *g = layer_grads(m, i, &bytes);
    if (g) m->be->ops->zero(m->be, g, bytes);
}

void tfc_model_layer_backward(tfc_model *m, int i)
{
    tfc_layer *l = &m->layers[i];
    tfc_bound *b = &m->bound[i];
    if (b->no_backward) return; /* its gradients would reach nothing that reads them */
    /* bf16, float16: the gradient of the layer's output, complete now (its consumers come
     * after it), holds 16-bit values; the loss writes the last layer's dz when it folds its
     * softmax */
    if (m->precision) {
        float *g = tfc_model_fused_at(m, i) ? b->dz : b->dy;
        round_to(m, (int64_t)m->ex.batch * tfc_layer_out_numel(l), g, g);
    }
    /* a ReLU folded into the Add before it: the Add's backward takes its derivative */
    if (b->relu_done && m->layers[l->inputs[0]].ops->sums_inputs) return;
    if (b->ids_into >= 0) return; /* the layer it feeds added this one's table gradient */
    /* gradient blocks whose lifetime starts here (plan_grads): this layer's inputs when it is
     * their last consumer, and its own when nothing consumes it. Zeroed, unless this layer
     * writes the first gradient of such an input instead of adding it (bit j of `fresh`):
     * an Add by a copy of dy, an Activation layer's act_backward, a layer with
     * assigns_grads (Conv2D, BatchNormalization, Dense, Dropout, the poolings, Flatten,
     * Reshape) in its backward. The input's dz half, if any, its own act_backward writes. */
    unsigned fresh = 0;
    /* the activation's derivative, unless the loss took it (the last layer's, folded) or the
     * pooling after it did (relu_pool: then dy holds what dz would) */
    const int act_grad = l->act != TFC_ACT_LINEAR && !tfc_model_fused_at(m, i) &&
                         b->relu_pool < 0;
    for (int j = 0; j < l->ninputs; j++) {
        int p = l->inputs[j];
        if (p < 0 || m->bound[p].zero_at != i || m->bound[p].ids_into == i ||
            m->bound[p].no_backward)
            continue;
        int repeated = 0;
        for (int q = 0; q < j; q++) repeated |= l->inputs[q] == p;
        if (repeated) continue; /* zeroed, or copied into, at its first occurrence */
        tfc_bound *in = &m->bound[p];
        if (l->ops->sums_inputs || l->ops->assigns_grads || (l->pure_act && act_grad)) {
            fresh |= 1u << j;
        } else {
            m->be->ops->zero(m->be, in->dy, in->grad_bytes);
        }
    }
    if (b->zero_at == i && !tfc_model_is_output(m, i)) /* an output's: the loss's */
        m->be->ops->zero(m->be, b->dy, b->grad_bytes);
    if (l->activity_l1 || l->activity_l2) activity_penalties(m, i);
    const void *xs[TFC_LAYER_MAX_INPUTS];
    float *dxs[TFC_LAYER_MAX_INPUTS];
    gather_inputs(m, l, xs, dxs);
    if (act_grad) {
        int cols = (int)l->out_shape.dim[l->out_shape.ndim - 1];
        /* an Activation layer's own backward would only add dz into dx: the derivative
         * goes into dx at once (added, or written where dx's block starts here), one pass
         * over memory less; a layer's own dz only its activation writes */
        float *into = l->pure_act ? dxs[0] : b->dz;
        int assign = l->pure_act ? (int)(fresh & 1) : 1;
        if (into)
            m->be->ops->act_backward(m->be, l->act, (int64_t)m->ex.batch * tfc_layer_out_numel(l),
                                     cols, b->z_unset ? b->y : b->z, b->y, b->dy, into, assign);
        if (l->pure_act) return;
    }
    if (l->ops->sums_inputs) { /* Add: dx[j] += dy, or = dy where the block starts here */
        size_t bytes = (size_t)m->ex.batch * (size_t)tfc_layer_out_numel(l) * 4;
        const tfc_bound *r = b->relu_into >= 0 ? &m->bound[b->relu_into] : NULL;
        for (int j = 0; j < l->ninputs; j++) {
            if (!dxs[j]) continue;
            if (r) /* with the ReLU folded into it: its derivative, from its output, into each */
                m->be->ops->act_backward(m->be, TFC_ACT_RELU, (int64_t)(bytes / 4),
                                         (int)l->out_shape.dim[l->out_shape.ndim - 1], r->y, r->y,
                                         r->dy, dxs[j], (int)((fresh >> j) & 1));
            else if (fresh & (1u << j)) m->be->ops->copy(m->be, dxs[j], b->dz, bytes);
            else m->be->ops->axpy(m->be, (int64_t)(bytes / 4), 1.f, b->dz, dxs[j]);
        }
        return;
    }
    m->ex.fresh = fresh;
    tfc_bound *g = &m->bound[grads_of(m, i)]; /* a call's gradients are its layer's */
    m->ex.params_fresh = g->grads_unset && l->ops->assigns_param_grads;
    m->ex.relu_x = b->pool_relu_of >= 0 ? m->bound[b->pool_relu_of].y : NULL;
    m->ex.ids = b->ids_from >= 0 ? m->xs[-1 - m->layers[b->ids_from].inputs[0]] : NULL;
    m->ex.ids_table = b->ids_from >= 0 ? &m->layers[b->ids_from].params[0] : NULL;
    if (b->ids_from >= 0) settle_grads(m, b->ids_from); /* the table's gradient adds */
    if (m->ex.params_fresh) g->grads_unset = 0;
    else settle_grads(m, i);
    l->ops->backward(l, &m->ex, xs, b->z, b->relu_pool >= 0 ? b->dy : b->dz, dxs);
    m->ex.fresh = 0;
    m->ex.params_fresh = 0;
    m->ex.relu_x = NULL;
}

/* The float32 weights a regularizer reads: the master weights, where reduced precision
 * binds the layers to 16-bit copies of them (Keras regularizes the variable) */
static const float *master_weights(const tfc_model *m, const tfc_param *pr)
{
    return m->copies && graded(pr) ? m->params + (pr->data - m->copies) : pr->data;
}

/* The weight regularizers (tfc_param.l1, l2): their penalties into the loss scalar (loss)
 * or their gradients into the weights' (grads). */
static void penalties(tfc_model *m, int loss, int grads)
{
    for (int i = 0; i < m->nlayers; i++)
        for (int p = 0; p < m->layers[i].nparams; p++) {
            const tfc_param *pr = &m->layers[i].params[p];
            if ((!pr->l1 && !pr->l2) || !pr->trainable || (grads && !pr->grad)) continue;
            if (grads) settle_grads(m, i);
            m->be->ops->penalty(m->be, pr->numel, pr->l1, pr->l2, master_weights(m, pr),
                                loss ? m->scalars : NULL, grads ? pr->grad : NULL);
        }
}

/* The activity regularizers (tfc_layer.activity_l1, l2, Keras 3's: l1 sum |y| + l2 sum y^2
 * of the layer's output y over the batch size): with layer -1 every one's penalty into the
 * loss scalar; else that layer's gradient into its output's, complete now (its consumers'
 * backward passes done), before its own backward reads it. The last layer's softmax folded
 * into the loss (fused_loss) has no dy to read: there the gradient goes through the
 * activation's derivative into dz, which the loss wrote. */
static void activity_penalties(tfc_model *m, int layer)
{
    tfc_backend *be = m->be;
    const float per = 1.0f / (float)m->ex.batch;
    for (int i = layer < 0 ? 0 : layer; i < (layer < 0 ? m->nlayers : layer + 1); i++) {
        const tfc_layer *l = &m->layers[i];
        const tfc_bound *b = &m->bound[i];
        if (!l->activity_l1 && !l->activity_l2) continue;
        const int64_t n = (int64_t)m->ex.batch * tfc_layer_out_numel(l);
        const float l1 = l->activity_l1 * per, l2 = l->activity_l2 * per;
        if (layer < 0) {
            be->ops->penalty(be, n, l1, l2, b->y, m->scalars, NULL);
            continue;
        }
        be->ops->penalty(be, n, l1, l2, b->y, NULL, b->dy);
        if (m->precision) round_to(m, n, b->dy, b->dy);
        if (tfc_model_fused_at(m, i)) {
            be->ops->act_backward(be, l->act, n, (int)l->out_shape.dim[l->out_shape.ndim - 1],
                                  b->z, b->y, b->dy, b->dz, 0);
            if (m->precision) round_to(m, n, b->dz, b->dz);
        }
    }
}

/* Every layer's backward, then the regularizers' gradients (after the layers, which write
 * or add to their weights' gradients in their own ways: an Embedding's table gradient is
 * added by the layer it feeds) */
void tfc_model_backward(tfc_model *m)
{
    for (int i = m->nlayers - 1; i >= 0; i--) tfc_model_layer_backward(m, i);
    if (m->regularized) penalties(m, 0, 1);
}

int tfc_model_constrain(tfc_model *m)
{
    int count = 0;
    for (int i = 0; i < m->nlayers; i++)
        for (int p = 0; p < m->layers[i].nparams; p++) {
            tfc_param *pr = &m->layers[i].params[p];
            if (!pr->constraint.kind || !pr->trainable || !pr->numel) continue;
            m->be->ops->constrain(m->be, &pr->constraint, (float *)master_weights(m, pr));
            count++;
        }
    return count;
}

void tfc_model_get_output(tfc_model *m, float *host)
{
    const tfc_layer *last = &m->layers[m->nlayers - 1];
    m->be->ops->download(m->be, host, m->bound[m->nlayers - 1].y,
                         (size_t)m->ex.batch * (size_t)tfc_layer_out_numel(last) * 4);
}

void tfc_model_get_output_at(tfc_model *m, int k, float *host)
{
    const int i = m->outputs[k];
    m->be->ops->download(m->be, host, m->bound[i].y,
                         (size_t)m->ex.batch * (size_t)tfc_layer_out_numel(&m->layers[i]) * 4);
}

int tfc_model_first_nonfinite(tfc_model *m)
{
    for (int i = 0; i < m->nlayers; i++) {
        int64_t n = (int64_t)m->ex.batch * tfc_layer_out_numel(&m->layers[i]);
        if (m->ex.training && m->bound[i].relu_into >= 0) continue; /* output not written */
        if (m->be->ops->count_nonfinite(m->be, n, m->bound[i].y)) return i;
    }
    return -1;
}
