/* The adapt pass: Keras's `layer.adapt(data)` for the layers that take statistics of their
 * input (Normalization), run by tfc-train before a fresh run's first iteration. Each such
 * layer, in model order, gets one pass of the train split of its own (the training
 * pipeline's position and random streams are untouched): the layers before it run forward in
 * inference mode on the batches, and it sees its input. So a layer adapted after another
 * one sees that one adapted, and a Normalization after trainable layers sees their
 * initial weights. A resumed run takes the statistics from its snapshot; a run from
 * --weights keeps those of a layer whose weights the file holds. */
#include <stdio.h>
#include <string.h>

#include "core/safetensors.h"
#include "solver/internal.h"

/* Whether the weights file holds every weight (not constant) of layer l. */
static int weights_hold(const tfc_st_file *f, const tfc_layer *l)
{
    for (int p = 0; f && p < l->nparams; p++) {
        char name[192];
        snprintf(name, sizeof name, "%s/%s", l->name, l->params[p].name);
        if (!l->params[p].constant && !tfc_st_find(f, name)) return 0;
    }
    return f != NULL;
}

/* One pass for layer i: the train split's batches until it ends. */
static tfc_status adapt_layer(tfc_feed *f, const tfc_solver *s, int i, int64_t *seen,
                              tfc_error *err)
{
    tfc_model *m = s->model;
    tfc_doc *doc = NULL;
    tfc_pipeline *p = tfc_feed_train_pass(f, s, &doc, err);
    tfc_status st = p ? tfc_model_adapt_begin(m, i, err) : err->code;
    *seen = 0;
    while (!st) {
        int n = 0;
        st = tfc_feed_pass_batch(f, p, &n, err);
        if (st || n == 0) break;
        /* in pieces the model is bound for (a data-parallel run binds a rank's share) */
        for (int lo = 0; lo < n && !st; lo += f->bind_batch) {
            int k = n - lo < f->bind_batch ? n - lo : f->bind_batch;
            const void *xs[TFC_MODEL_MAX_INPUTS];
            tfc_feed_inputs(f, lo, xs);
            st = tfc_model_adapt_batch(m, i, xs, k, err);
        }
        *seen += n;
    }
    if (!st) st = tfc_model_adapt_end(m, i, err);
    tfc_pipeline_free(p);
    tfc_doc_free(doc);
    return st;
}

tfc_status tfc_adapt_run(tfc_feed *f, const tfc_solver *s, const char *weights,
                         tfc_progress *prog, tfc_error *err)
{
    tfc_model *m = s->model;
    tfc_st_file *wf = NULL;
    tfc_status st = TFC_OK;
    for (int i = 0; i < tfc_model_nlayers(m) && !st; i++) {
        const tfc_layer *l = tfc_model_layer(m, i);
        if (!tfc_model_layer_adapts(m, i)) continue;
        if (weights && !wf) { /* loaded already: a file that opens */
            tfc_error quiet;
            tfc_error_clear(&quiet);
            wf = tfc_st_open(weights, &quiet);
        }
        if (weights_hold(wf, l)) {
            tfc_progress_say(prog, "adapt: %s keeps its statistics from %s\n", l->name, weights);
            continue;
        }
        int64_t seen = 0;
        st = adapt_layer(f, s, i, &seen, err);
        if (st) tfc_error_prefix(err, "adapting %s to data.train: ", l->name);
        else
            tfc_progress_say(prog, "adapt: %s took its statistics from %lld examples of "
                             "data.train\n", l->name, (long long)seen);
    }
    if (wf) tfc_st_close(wf);
    return st;
}
