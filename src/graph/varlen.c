/* Variable-length sequences: a model whose input.shape has a null first axis is built,
 * planned and bound at input.max_length; a batch of length t <= max_length re-derives every
 * layer's shapes at t (each layer's build again, its parameters kept), and runs in the
 * buffers bound at max_length, which hold [batch, t, ...] since no layer's output, saved
 * buffer or workspace grows as t shrinks (checked here). The sequence mask follows: it is
 * [batch, t] of the masking Embedding's input. */
#include "graph/model_internal.h"

#include <stdlib.h>
#include <string.h>

int64_t tfc_model_max_length(const tfc_model *m) { return m->max_length; }

/* The same parameters, by name and shape, as `was` had: else an error naming the layer. */
static tfc_status same_params(const tfc_model *m, const tfc_layer *was, const tfc_layer *l,
                              tfc_error *err)
{
    for (int p = 0; p < was->nparams || p < l->nparams; p++) {
        const tfc_param *a = p < was->nparams ? &was->params[p] : NULL;
        const tfc_param *b = p < l->nparams ? &l->params[p] : NULL;
        if (a && b && !strcmp(a->name, b->name) && tfc_shape_equal(&a->shape, &b->shape))
            continue;
        char s1[96] = "none", s2[96] = "none", in[96];
        if (a) tfc_shape_str(&a->shape, s1, sizeof s1);
        if (b) tfc_shape_str(&b->shape, s2, sizeof s2);
        tfc_shape_str(&was->in_shape[0], in, sizeof in);
        tfc_layer_error(err, l,
                        "its parameter %s is %s at max_length %lld but %s at length %lld: its "
                        "input %s changes with the sequence length, so input.shape cannot have "
                        "a null axis",
                        (a ? a : b)->name, s1, (long long)m->max_length, s2,
                        (long long)m->input_shape.dim[0], in);
        tfc_error_hint(err, "reduce the time axis before it (GlobalMaxPooling1D, "
                            "GlobalAveragePooling1D, an LSTM or GRU without return_sequences) "
                            "instead of Flatten, or give input.shape a fixed length");
        return TFC_ERR_CONFIG;
    }
    return TFC_OK;
}

/* Re-builds layer l at its producers' current shapes. Its parameters (bound pointers
 * included) and the graph's fields stay as they were; its state is rebuilt. On error the
 * layer is left for another rebuild. */
static tfc_status rebuild(tfc_model *m, tfc_layer *l, int *params_changed, tfc_error *err)
{
    tfc_layer was = *l;
    if (l->ops->free_state) l->ops->free_state(l);
    l->state = NULL;
    l->nparams = 0;
    tfc_status st = tfc_model_derive_layer(m, l, err);
    if (!st && (st = same_params(m, &was, l, err))) *params_changed = 1;
    memcpy(l->params, was.params, sizeof l->params);
    l->nparams = was.nparams;
    l->max_batch = was.max_batch;
    l->saved = was.saved;
    l->mask = was.mask;
    l->ids_vocab = was.ids_vocab;
    l->rng_key = was.rng_key;
    l->workspace = was.workspace;
    if (st) return st;
    const int64_t *cap = &m->caps[2 * l->index];
    if (tfc_layer_out_numel(l) > cap[0] || l->saved_floats > cap[1] ||
        l->fixed_floats != was.fixed_floats)
        return tfc_layer_error(err, l, "its buffers at length %lld outgrow those planned at "
                                       "max_length %lld",
                               (long long)m->input_shape.dim[0], (long long)m->max_length);
    if (m->be && l->ops->plan) {
        l->workspace = 0;
        l->ops->plan(l, m->be);
        if (l->workspace > m->ws_bytes)
            return tfc_layer_error(err, l, "its workspace at length %lld outgrows the one planned "
                                           "at max_length %lld",
                                   (long long)m->input_shape.dim[0], (long long)m->max_length);
    }
    return TFC_OK;
}

/* Every layer at input length t, in order; *params_changed set when a layer's parameters
 * differ there. */
static tfc_status derive_all(tfc_model *m, int64_t t, int *params_changed, tfc_error *err)
{
    m->input_shape.dim[0] = t;
    *params_changed = 0;
    for (int i = 0; i < m->nlayers; i++) {
        tfc_status st = rebuild(m, &m->layers[i], params_changed, err);
        if (st) return st;
    }
    for (int k = 0; k < m->noutputs; k++) {
        tfc_head *h = &m->heads[k];
        h->label_rows = tfc_layer_out_numel(&m->layers[h->layer]) / h->classes;
    }
    return TFC_OK;
}

tfc_status tfc_model_check_varlen(tfc_model *m, tfc_error *err)
{
    m->caps = malloc((size_t)m->nlayers * 2 * sizeof *m->caps);
    if (!m->caps) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    for (int i = 0; i < m->nlayers; i++) {
        m->caps[2 * i] = tfc_layer_out_numel(&m->layers[i]);
        m->caps[2 * i + 1] = m->layers[i].saved_floats;
    }
    if (m->max_length < 2) return TFC_OK;
    /* One step shorter: a layer whose parameters follow the length shows it there. A layer
     * that cannot build that short (a Conv1D as long as max_length) is left to the batches,
     * which name it if they come that short. */
    tfc_error probe;
    tfc_error_clear(&probe);
    int changed;
    tfc_status st = TFC_OK;
    if (derive_all(m, m->max_length - 1, &changed, &probe) && changed) {
        tfc_error_clear(&probe);
        TFC_ASSERT(derive_all(m, m->max_length, &changed, &probe) == TFC_OK);
        derive_all(m, m->max_length - 1, &changed, err); /* the same error, reported */
        st = TFC_ERR_CONFIG;
    }
    tfc_error_clear(&probe);
    TFC_ASSERT(derive_all(m, m->max_length, &changed, &probe) == TFC_OK);
    return st;
}

tfc_status tfc_model_set_length(tfc_model *m, int64_t t, tfc_error *err)
{
    const int64_t now = m->input_shape.dim[0];
    if (t == now) return TFC_OK;
    if (!m->max_length)
        return tfc_error_set(err, TFC_ERR_DATA,
                             "a batch of sequences of length %lld, but model '%s' takes %lld "
                             "steps (input.shape)",
                             (long long)t, m->name, (long long)now);
    if (t < 1 || t > m->max_length)
        return tfc_error_set(err, TFC_ERR_DATA,
                             "a batch of sequences of length %lld, but model '%s' takes 1 to "
                             "%lld steps (input.max_length)",
                             (long long)t, m->name, (long long)m->max_length);
    int changed;
    tfc_status st = derive_all(m, t, &changed, err);
    if (st) {
        tfc_error back;
        tfc_error_clear(&back);
        TFC_ASSERT(derive_all(m, now, &changed, &back) == TFC_OK);
        return TFC_ERR_DATA;
    }
    return TFC_OK;
}
