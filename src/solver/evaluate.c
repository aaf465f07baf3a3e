/* Evaluation: one pass over the test split in inference mode, the loss and metrics averaged
 * over the rows each batch counted. The periodic tests of a training run use it, and so
 * does tfc-test through tfc_solver_evaluate, which also opens the device and reads the
 * weights. */
#include "solver/internal.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/device.h"

tfc_backend *tfc_solver_backend_open(const tfc_solver *s, tfc_error *err)
{
    const tfc_solver_config *c = &s->cfg;
    const char *device = s->opt.device ? s->opt.device : c->device;
    int threads = s->opt.threads;
    tfc_comm *comm = tfc_comm_world(err);
    if (!comm) return NULL;
    char local[32];
    tfc_backend *be = NULL;
    if (comm->local_size > 1) {
        /* Ranks sharing a machine: rank r takes gpu:<local rank>, round robin when there
         * are more ranks than GPUs (they share one through the mpi engine), or a share of
         * the cores. */
        int gpus = tfc_device_gpu_count();
        snprintf(local, sizeof local, "gpu:%d", gpus > 0 ? comm->local_rank % gpus : comm->local_rank);
        if (device && !strcmp(device, "gpu")) device = local;
        if (!device || !*device) {
            tfc_error quiet;
            tfc_error_clear(&quiet);
            be = tfc_backend_open(local, threads, &quiet);
            if (!be) device = "cpu";
        }
        if (threads <= 0) {
            long cores = sysconf(_SC_NPROCESSORS_ONLN);
            threads = cores / comm->local_size > 1 ? (int)(cores / comm->local_size) : 1;
        }
    }
    if (!be) be = tfc_backend_open(device, threads, err);
    if (!be) return NULL;
    /* bf16, float16: a GPU's TF32 products of their values are exact (10 fraction bits hold
     * bfloat16's 7 and float16's 10, 8 exponent bits float16's 5), so its tensor cores
     * compute what the contract says */
    tfc_device_options o = {c->deterministic, c->tf32 || c->precision != TFC_PRECISION_FLOAT32,
                            (size_t)(c->gpu_memory_limit * 1024.0 * 1024.0)};
    tfc_backend_configure(be, &o);
    return be;
}

int tfc_solver_stop_requested(const tfc_solver *s) { return s->opt.stop && *s->opt.stop; }

/* Runs the n examples staged in `f` through the model in slices of its bound batch (a test
 * batch may be larger: inference is per example, so only the summation order changes) and
 * adds their row-weighted loss and metrics to sums[0] and sums[1 + i], their counted
 * metrics' counts to counts[]. */
static tfc_status add_batch(tfc_feed *f, int n, uint64_t seed, double *sums, double *counts,
                            tfc_eval *out, tfc_confusion *cm, float *outputs, tfc_error *err)
{
    tfc_model *m = f->model;
    for (int at = 0; at < n; at += f->bind_batch) {
        int k = n - at < f->bind_batch ? n - at : f->bind_batch;
        tfc_batch_result br;
        const void *xs[TFC_MODEL_MAX_INPUTS];
        tfc_feed_inputs(f, at, xs);
        const void *ys[TFC_MODEL_MAX_OUTPUTS];
        tfc_feed_targets(f, at, ys);
        tfc_status s = tfc_model_forward_inputs(m, xs, k, 0, seed, 0, err);
        if (!s) s = tfc_model_loss_targets(m, ys, 0, &br, err);
        if (s) return s;
        if (outputs) {
            tfc_model_get_output(m, outputs);
            tfc_confusion_add(cm, outputs, ys[0],
                              tfc_model_loss_kind(m) == TFC_LOSS_SPARSE_CCE,
                              (int64_t)k * cm->rows);
        }
        sums[0] += br.loss * (double)br.count;
        for (int64_t j = 0; br.counts && j < tfc_model_ncounts(m); j++) counts[j] += br.counts[j];
        for (int i = 0; i < tfc_model_nmetrics(m); i++)
            sums[1 + i] += tfc_metric_summand(tfc_model_metric(m, i)->kind, br.metric[i]) *
                           (double)br.count;
        out->rows += br.count;
    }
    out->examples += n;
    return TFC_OK;
}

/* The ranks' confusion matrices summed (counts below 2^53 are exact in doubles). */
static tfc_status reduce_confusion(tfc_comm *c, tfc_confusion *cm, tfc_error *err)
{
    size_t n = (size_t)cm->classes * (size_t)cm->classes;
    double *v = malloc(n * sizeof *v);
    if (!v) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) v[i] = (double)cm->counts[i];
    tfc_status st = c->ops->allreduce(c, v, (int64_t)n, 1, 1, err);
    for (size_t i = 0; !st && i < n; i++) cm->counts[i] = (int64_t)v[i];
    free(v);
    return st;
}

/* The pass's sums (over the ranks of a data-parallel run) into its result. */
static tfc_status finish(tfc_feed *f, double *sums, double *counts, tfc_eval *out,
                         tfc_confusion *cm, int stopped, tfc_error *err)
{
    out->skipped = tfc_pipeline_skipped(f->test);
    snprintf(out->skipped_names, sizeof out->skipped_names, "%s",
             tfc_pipeline_skipped_names(f->test));
    if (stopped) return TFC_OK;
    const int64_t ncounts = tfc_model_ncounts(f->model);
    if (f->nranks > 1) {
        /* Exact over ranks: the row-weighted sums and the counts, not means of means. */
        int nm = tfc_model_nmetrics(f->model);
        sums[1 + nm] = (double)out->rows;
        sums[2 + nm] = (double)out->examples;
        tfc_comm *c = tfc_comm_world(err);
        tfc_status st = c ? c->ops->allreduce(c, sums, 3 + nm, 1, 1, err) : err->code;
        if (!st && ncounts) st = c->ops->allreduce(c, counts, ncounts, 1, 1, err);
        if (!st && cm && cm->classes) st = reduce_confusion(c, cm, err);
        if (st) return st;
        out->rows = (int64_t)sums[1 + nm];
        out->examples = (int64_t)sums[2 + nm];
    }
    if (out->rows > 0) {
        out->loss = sums[0] / (double)out->rows;
        for (int i = 0; i < tfc_model_nmetrics(f->model); i++)
            out->metric[i] = tfc_model_metric(f->model, i)->kind == TFC_METRIC_COUNTED
                                 ? tfc_model_counted_value(f->model, i, counts)
                                 : tfc_metric_of_mean(tfc_model_metric(f->model, i)->kind,
                                                      sums[1 + i] / (double)out->rows);
    }
    return TFC_OK;
}

tfc_status tfc_evaluate(tfc_feed *f, const tfc_solver *s, tfc_eval *out, tfc_confusion *cm,
                        int *stopped, tfc_error *err)
{
    double sums[3 + TFC_MAX_METRICS] = {0}; /* loss, metrics, then rows and examples */
    memset(out, 0, sizeof *out);
    *stopped = 0;
    tfc_pipeline_reset(f->test);
    float *outputs = NULL;
    const int64_t ncounts = tfc_model_ncounts(f->model);
    double *counts = calloc((size_t)(ncounts ? ncounts : 1), sizeof *counts);
    if (!counts) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    if (cm && cm->classes) {
        tfc_confusion_reset(cm);
        outputs = malloc((size_t)f->bind_batch * (size_t)cm->rows * (size_t)cm->classes *
                         sizeof *outputs);
        if (!outputs) {
            free(counts);
            return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        }
    }
    for (;;) {
        /* Ranks of a data-parallel run finish the pass together (the sums below are
         * collective); the loop then stops them all at one iteration. */
        if (f->nranks <= 1 && tfc_solver_stop_requested(s)) {
            *stopped = 1;
            if (cm) tfc_confusion_reset(cm); /* a partial matrix is no result */
            break;
        }
        int n, more;
        tfc_status st = tfc_feed_test_batch(f, &n, &more, err);
        if (!st && !more) break;
        if (!st && n > 0)
            st = add_batch(f, n, (uint64_t)s->cfg.seed, sums, counts, out, cm, outputs, err);
        if (st) {
            free(outputs);
            free(counts);
            return st;
        }
    }
    free(outputs);
    tfc_status st = finish(f, sums, counts, out, cm, *stopped, err);
    free(counts);
    return st;
}

tfc_status tfc_solver_evaluate(tfc_solver *s, const char *weights, tfc_eval *out, tfc_error *err)
{
    return tfc_solver_evaluate_classes(s, weights, out, NULL, err);
}

tfc_status tfc_solver_evaluate_classes(tfc_solver *s, const char *weights, tfc_eval *out,
                                       tfc_confusion *cm, tfc_error *err)
{
    if (cm) memset(cm, 0, sizeof *cm);
    if (!s->cfg.test)
        return tfc_error_set(err, TFC_ERR_CONFIG, "%s has no data.test split to evaluate",
                             s->path);
    tfc_feed f = {0};
    tfc_backend *be = tfc_solver_backend_open(s, err);
    tfc_status st = be ? tfc_feed_for_evaluation(&f, s, be, weights, err) : err->code;
    if (!st) st = tfc_model_load_weights(s->model, weights, NULL, err);
    const tfc_vocab *vocab = st ? NULL : tfc_pipeline_vocab(f.test);
    char hash[17] = "";
    if (vocab) tfc_vocab_hash(vocab, hash);
    /* the test split's vocabulary (beside the weights, or rebuilt from data.train) */
    if (vocab) st = tfc_model_check_vocabulary(s->model, hash, "data.test's vocabulary", weights,
                                               err);
    int stopped = 0;
    if (!st && cm) st = tfc_confusion_init(cm, s->model, f.test, err);
    if (!st) st = tfc_evaluate(&f, s, out, cm, &stopped, err);
    if (!st) st = tfc_backend_status(be, err);
    tfc_feed_free(&f);
    if (be) tfc_backend_free(be);
    return st;
}

void tfc_format_skipped(const char *key, int64_t n, const char *names, char *buf, size_t size)
{
    buf[0] = 0;
    if (n > 0)
        snprintf(buf, size, "%s: %lld bad record%s left out (on_error: skip), first: %s", key,
                 (long long)n, n == 1 ? "" : "s", names);
}

void tfc_solver_format_eval(tfc_solver *s, const tfc_eval *e, char *buf, size_t size)
{
    tfc_model *m = s->model;
    size_t n = (size_t)snprintf(buf, size, "loss %.4f", e->loss);
    /* A sequence model's cross-entropy per step, in bits (bits per character); not an
     * image's per pixel. */
    if (tfc_model_noutputs(m) == 1 && tfc_model_label_rows(m) > 1 &&
        tfc_model_output_shape(m)->ndim == 2 && tfc_model_loss_kind(m) == TFC_LOSS_SPARSE_CCE &&
        n < size)
        n += (size_t)snprintf(buf + n, size - n, " (%.4f bits/step)", e->loss / log(2.0));
    /* every metric but the loss again (`metrics: [loss]`); the outputs' losses (main_loss) */
    for (int i = 0; i < tfc_model_nmetrics(m) && n < size; i++)
        if (strcmp(tfc_model_metric(m, i)->name, "loss"))
            n += (size_t)snprintf(buf + n, size - n, "  %s %.4f", tfc_model_metric(m, i)->name,
                                  e->metric[i]);
}

char *tfc_solver_eval_json(tfc_solver *s, const tfc_eval *e, const tfc_confusion *cm)
{
    const char *names[TFC_MAX_METRICS];
    int n = tfc_model_nmetrics(s->model);
    for (int i = 0; i < n; i++) names[i] = tfc_model_metric(s->model, i)->name;
    json_t *o = tfc_eval_json(e, names, n);
    json_object_set_new(o, "examples", json_integer(e->examples));
    if (cm && cm->classes) json_object_update_new(o, tfc_confusion_json(cm));
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    json_decref(o);
    return text;
}
