/* The training loop, as Caffe's Solver::Step: per iteration, iter_size batches are run
 * forward and backward with their gradients accumulated, the average is clipped to a
 * global norm and handed with the iteration's learning rate to the optimizer; then display
 * (the loss smoothed over average_loss iterations), test, snapshot and signal checks. A
 * non-finite loss or gradient stops the run naming the iteration and the first layer whose
 * output went non-finite. All randomness is keyed by (seed, step), and the state file holds
 * the rest, so a resumed run on the CPU repeats the uninterrupted one bit for bit. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fileio.h"
#include "data/data.h"
#include "device/device.h"
#include "solver/internal.h"

typedef struct run {
    tfc_solver *s;
    const tfc_solver_config *c;
    tfc_model *m;
    tfc_backend *be;
    tfc_pipeline *train, *test;
    tfc_optimizer opt;
    int bind_batch;                  /* examples the model is bound for (the train batch) */
    int stage_batch;                 /* largest batch of either split (staging buffers) */
    int64_t in_numel, label_numel;   /* per example */
    void *x, *y;                     /* host staging for one batch */
    char dir[4096];
    int dir_made;
    tfc_csv_log *csv;
    tfc_events *ev;
    FILE *con;
    int live;
    const char *names[TFC_MAX_METRICS];
    int nmetrics;
    int best_index;                  /* metric that ranks tests; -1: the loss */

    double t_start, elapsed0;        /* monotonic start; seconds of resumed runs */
    double t_loop;                   /* when the first iteration began */
    int64_t iter, iter0;             /* completed iterations; at start */
    double lr;
    int window;                      /* loss smoothing */
    double *losses;
    int64_t losses_seen;
    double disp[2 + TFC_MAX_METRICS]; /* since the last display: iterations, rows, metric sums */
    double rate_t, live_t;           /* speed measurement and live-line throttle */
    int64_t rate_i;
    double test_seconds;
    tfc_train_result *res;
    int64_t *snaps;                  /* iterations of this run's complete snapshots, oldest first */
    int nsnaps, snaps_cap;
    int64_t last_test, last_snap;
} run;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int stop_requested(const run *r)
{
    return r->s->opt.stop && *r->s->opt.stop;
}

/* ---- batches: pipeline elements → the model's input and labels -------------------------------- */

/* Converts n elements to float32 or int32 (`ints`). Integers must be integral and within
 * int32; returns the first bad index or -1. */
static int64_t convert(void *dst, int ints, const tfc_tensor *src, int64_t n)
{
    if (src->dtype == (ints ? TFC_I32 : TFC_F32)) {
        memcpy(dst, src->data, (size_t)n * 4);
        return -1;
    }
    for (int64_t i = 0; i < n; i++) {
        double v = tfc_value_get(src->data, src->dtype, i);
        if (ints) {
            if (!(v == floor(v)) || v < -2147483648.0 || v > 2147483647.0) return i;
            ((int32_t *)dst)[i] = (int32_t)v;
        } else {
            ((float *)dst)[i] = (float)v;
        }
    }
    return -1;
}

static int usable_dtype(tfc_dtype dt)
{
    return dt != TFC_F16 && dt != TFC_BF16 && (unsigned)dt < TFC_DTYPE_COUNT;
}

/* The batch_size of the last batch / padded_batch stage of a split, 0 when none. */
static int config_batch_size(const tfc_node *split)
{
    const tfc_node *pl = tfc_node_get(split, "pipeline");
    int bs = 0;
    for (int i = 0; pl && pl->kind == TFC_NODE_SEQ && i < pl->n; i++) {
        const tfc_node *item = pl->vals[i];
        if (item->kind != TFC_NODE_MAP || item->n != 1) continue;
        if (strcmp(item->keys[0]->str, "batch") && strcmp(item->keys[0]->str, "padded_batch"))
            continue;
        const tfc_node *v = tfc_node_get(item->vals[0], "batch_size");
        if (v && v->kind == TFC_NODE_SCALAR) bs = atoi(v->str);
    }
    return bs;
}

/* Checks a split's element spec against the model before any data is read. */
static tfc_status check_spec(run *r, tfc_pipeline *p, const tfc_node *split, const char *key,
                             tfc_error *err)
{
    const tfc_element_spec *es = tfc_pipeline_element_spec(p);
    const tfc_component_spec *f = &es->comp[TFC_COMP_FEATURES], *l = &es->comp[TFC_COMP_LABELS];
    const tfc_shape *in = tfc_model_input_shape(r->m);
    char want[96], got[160];
    tfc_shape_str(in, want, sizeof want);
    tfc_data_spec_str(f, got, sizeof got);
    int skip = es->batched ? 1 : 0;
    if (!usable_dtype(f->dtype))
        return tfc_node_error(err, TFC_ERR_CONFIG, split, key,
                              "yields features of dtype %s, which the model cannot take", got);
    if (tfc_model_input_dtype(r->m) == TFC_I32 && (f->dtype == TFC_F32 || f->dtype == TFC_F64))
        return tfc_node_error(err, TFC_ERR_CONFIG, split, key,
                              "yields %s features, but the model takes int32 token ids", got);
    if (f->shape.ndim >= 0) {
        int bad = f->shape.ndim - skip != in->ndim;
        for (int i = 0; !bad && i < in->ndim; i++)
            bad = f->shape.dim[i + skip] >= 0 && f->shape.dim[i + skip] != in->dim[i];
        if (bad) {
            tfc_node_error(err, TFC_ERR_CONFIG, split, key,
                           "yields features %s%s, but the model's input is %s per example", got,
                           es->batched ? " (batch first)" : "", want);
            tfc_error_hint(err, "match input.shape in the model, or add a reshape map "
                                "(- map: {op: reshape, shape: [...]})");
            return TFC_ERR_CONFIG;
        }
    }
    if (!l->present)
        return tfc_node_error(err, TFC_ERR_CONFIG, split, key,
                              "yields no labels, but the loss %s needs them",
                              tfc_loss_names[tfc_model_loss_kind(r->m)]);
    tfc_data_spec_str(l, got, sizeof got);
    if (!usable_dtype(l->dtype))
        return tfc_node_error(err, TFC_ERR_CONFIG, split, key, "yields labels %s", got);
    int64_t per = 1;
    int known = l->shape.ndim >= 0;
    for (int i = skip; known && i < l->shape.ndim; i++) {
        if (l->shape.dim[i] < 0) known = 0;
        else per *= l->shape.dim[i];
    }
    if (known && per != r->label_numel)
        return tfc_node_error(err, TFC_ERR_CONFIG, split, key,
                              "yields labels %s (%lld values per example), but the model's output "
                              "and loss %s need %lld per example",
                              got, (long long)per, tfc_loss_names[tfc_model_loss_kind(r->m)],
                              (long long)r->label_numel);
    return TFC_OK;
}

/* The next batch of `p` into r->x / r->y; *batch = 0 at the end of the data. */
static tfc_status next_batch(run *r, tfc_pipeline *p, const char *key, int *batch, tfc_error *err)
{
    tfc_batch b;
    *batch = 0;
    tfc_status s = tfc_pipeline_next(p, &b, err);
    if (s || b.end) return s;
    int batched = tfc_pipeline_element_spec(p)->batched;
    int64_t n = batched && b.features.shape.ndim > 0 ? b.features.shape.dim[0] : 1;
    int64_t fnum = tfc_shape_numel(&b.features.shape), lnum = tfc_shape_numel(&b.labels.shape);
    char fs[96], want[96];
    if (n < 1 || n > r->stage_batch)
        return tfc_error_set(err, TFC_ERR_DATA,
                             "%s: a batch of %lld examples, larger than the %d its configuration "
                             "announced",
                             key, (long long)n, r->stage_batch);
    if (fnum != n * r->in_numel) {
        tfc_shape_str(&b.features.shape, fs, sizeof fs);
        tfc_shape_str(tfc_model_input_shape(r->m), want, sizeof want);
        return tfc_error_set(err, TFC_ERR_DATA,
                             "%s: a batch of features %s does not fit the model's input %s per "
                             "example",
                             key, fs, want);
    }
    if (!b.labels.data || lnum != n * r->label_numel) {
        tfc_shape_str(&b.labels.shape, fs, sizeof fs);
        return tfc_error_set(err, TFC_ERR_DATA,
                             "%s: a batch of labels %s, but the model needs %lld values per "
                             "example",
                             key, b.labels.data ? fs : "(none)", (long long)r->label_numel);
    }
    int64_t bad = convert(r->x, tfc_model_input_dtype(r->m) == TFC_I32, &b.features, fnum);
    if (bad >= 0)
        return tfc_error_set(err, TFC_ERR_DATA,
                             "%s: example %lld of a batch: feature value %g is not an int32 "
                             "token id",
                             key, (long long)(bad / r->in_numel), tfc_value_get(b.features.data, b.features.dtype, bad));
    bad = convert(r->y, tfc_model_loss_kind(r->m) == TFC_LOSS_SPARSE_CCE, &b.labels, lnum);
    if (bad >= 0)
        return tfc_error_set(err, TFC_ERR_DATA,
                             "%s: example %lld of a batch: label %g is not a class index", key,
                             (long long)(bad / r->label_numel), tfc_value_get(b.labels.data, b.labels.dtype, bad));
    *batch = (int)n;
    return TFC_OK;
}

/* ---- evaluation ----------------------------------------------------------------------------- */

/* One pass over the test split. *stopped is set when a stop request cut it short. */
static tfc_status evaluate(run *r, tfc_eval *out, int *stopped, tfc_error *err)
{
    memset(out, 0, sizeof *out);
    *stopped = 0;
    tfc_pipeline_reset(r->test);
    double loss = 0, metric[TFC_MAX_METRICS] = {0};
    for (;;) {
        if (stop_requested(r)) {
            *stopped = 1;
            return TFC_OK;
        }
        int n;
        tfc_status s = next_batch(r, r->test, "data.test", &n, err);
        if (!s && n == 0) break;
        if (s) return s;
        /* A test batch larger than the bound batch runs in slices (inference is per
         * example, so only the summation order changes). */
        for (int at = 0; at < n; at += r->bind_batch) {
            int k = n - at < r->bind_batch ? n - at : r->bind_batch;
            tfc_batch_result br;
            s = tfc_model_forward(r->m, (char *)r->x + (size_t)at * (size_t)r->in_numel * 4, k, 0,
                                  (uint64_t)r->c->seed, 0, err);
            if (!s)
                s = tfc_model_loss(r->m, (char *)r->y + (size_t)at * (size_t)r->label_numel * 4,
                                   0, &br, err);
            if (s) return s;
            loss += br.loss * (double)br.count;
            for (int i = 0; i < r->nmetrics; i++) metric[i] += br.metric[i] * (double)br.count;
            out->rows += br.count;
        }
        out->examples += n;
    }
    if (out->rows > 0) {
        out->loss = loss / (double)out->rows;
        for (int i = 0; i < r->nmetrics; i++) out->metric[i] = metric[i] / (double)out->rows;
    }
    return TFC_OK;
}

void tfc_solver_format_eval(tfc_solver *s, const tfc_eval *e, char *buf, size_t size)
{
    tfc_model *m = s->model;
    size_t n = (size_t)snprintf(buf, size, "loss %.4f", e->loss);
    /* A sequence model's cross-entropy per step, in bits (bits per character). */
    if (tfc_model_label_rows(m) > 1 && tfc_model_loss_kind(m) == TFC_LOSS_SPARSE_CCE && n < size)
        n += (size_t)snprintf(buf + n, size - n, " (%.4f bits/step)", e->loss / log(2.0));
    for (int i = 0; i < tfc_model_nmetrics(m) && n < size; i++)
        if (tfc_model_metric(m, i)->kind != TFC_METRIC_LOSS)
            n += (size_t)snprintf(buf + n, size - n, "  %s %.4f", tfc_model_metric(m, i)->name,
                                  e->metric[i]);
}

/* ---- console ------------------------------------------------------------------------------ */

static void fmt_duration(double sec, char *buf, size_t size)
{
    long t = sec > 0 && sec < 1e9 ? (long)(sec + 0.5) : 0;
    if (t >= 3600) snprintf(buf, size, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(buf, size, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, size, "%lds", t);
}

static double smoothed_loss(const run *r)
{
    int64_t n = r->losses_seen < r->window ? r->losses_seen : r->window;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += r->losses[i];
    return n ? sum / (double)n : 0;
}

static double rate(const run *r)
{
    double t = now() - r->rate_t;
    return t > 0 && r->iter > r->rate_i ? (double)(r->iter - r->rate_i) / t : 0;
}

/* One progress line: iteration, smoothed loss, metrics, lr, speed, ETA. */
static void progress_line(run *r, char *buf, size_t size, const double *metrics)
{
    char eta[32];
    double ips = rate(r);
    fmt_duration(ips > 0 ? (double)(r->c->max_iter - r->iter) / ips : 0, eta, sizeof eta);
    int w = snprintf(NULL, 0, "%d", r->c->max_iter);
    size_t n = (size_t)snprintf(buf, size, "iter %*lld/%d  loss %.4f", w, (long long)r->iter,
                                r->c->max_iter, smoothed_loss(r));
    for (int i = 0; metrics && i < r->nmetrics && n < size; i++)
        if (strcmp(r->names[i], "loss"))
            n += (size_t)snprintf(buf + n, size - n, "  %s %.4f", r->names[i], metrics[i]);
    if (n < size)
        snprintf(buf + n, size - n, "  lr %.3g  %.1f it/s  ETA %s", r->lr, ips, eta);
}

static void say(run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(run *r, const char *fmt, ...)
{
    if (!r->con) return;
    if (r->live) fputs("\r\033[K", r->con);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(r->con, fmt, ap);
    va_end(ap);
    fflush(r->con);
}

static void live_update(run *r)
{
    if (!r->con || !r->live) return;
    double t = now();
    if (t - r->live_t < 0.1 && r->iter != r->c->max_iter) return;
    r->live_t = t;
    char line[512];
    progress_line(r, line, sizeof line, NULL);
    fprintf(r->con, "\r\033[K%s", line);
    fflush(r->con);
}

static double elapsed(const run *r) { return r->elapsed0 + now() - r->t_start; }

static tfc_status display(run *r, tfc_error *err)
{
    double metrics[TFC_MAX_METRICS] = {0};
    for (int i = 0; i < r->nmetrics; i++)
        metrics[i] = r->disp[1] > 0 ? r->disp[2 + i] / r->disp[1] : 0;
    double loss = smoothed_loss(r);
    for (int i = 0; i < r->nmetrics; i++)
        if (!strcmp(r->names[i], "loss")) metrics[i] = loss;
    char line[512];
    progress_line(r, line, sizeof line, metrics);
    say(r, "%s\n", line);
    r->res->have_train = 1;
    r->res->train.loss = loss;
    memcpy(r->res->train.metric, metrics, sizeof metrics);
    memset(r->disp, 0, sizeof r->disp);
    r->rate_t = now();
    r->rate_i = r->iter;
    tfc_status s = tfc_csv_row(r->csv, r->iter, "train", loss, metrics, r->lr, elapsed(r), err);
    char tag[64];
    if (!s) s = tfc_events_scalar(r->ev, r->iter, "train/loss", loss, err);
    for (int i = 0; i < r->nmetrics && !s; i++) {
        if (!strcmp(r->names[i], "loss")) continue;
        snprintf(tag, sizeof tag, "train/%s", r->names[i]);
        s = tfc_events_scalar(r->ev, r->iter, tag, metrics[i], err);
    }
    if (!s) s = tfc_events_scalar(r->ev, r->iter, "lr", r->lr, err);
    return s;
}

/* ---- snapshots ------------------------------------------------------------------------------ */

static void snapshot_paths(const run *r, int64_t iter, char *weights, char *state, size_t size)
{
    snprintf(weights, size, "%s/%s_iter_%lld.safetensors", r->dir, r->c->snapshot_prefix,
             (long long)iter);
    snprintf(state, size, "%s/%s_iter_%lld.state", r->dir, r->c->snapshot_prefix, (long long)iter);
}

static tfc_snapshot_id snapshot_id(const run *r)
{
    tfc_snapshot_id id = {tfc_model_name(r->m), tfc_optimizer_names[r->c->optimizer.type],
                          r->s->config_hash, r->s->model_hash};
    return id;
}

static int remember_snapshot(run *r, int64_t iter)
{
    for (int i = 0; i < r->nsnaps; i++)
        if (r->snaps[i] == iter) return 1;
    if (r->nsnaps == r->snaps_cap) {
        int cap = r->snaps_cap ? 2 * r->snaps_cap : 16;
        int64_t *p = realloc(r->snaps, sizeof *p * (size_t)cap);
        if (!p) return 0;
        r->snaps = p;
        r->snaps_cap = cap;
    }
    r->snaps[r->nsnaps++] = iter;
    return 1;
}

/* Writes the snapshot of the current iteration, then deletes the oldest beyond `keep`: a
 * snapshot is removed only after its successor is durable (state file first, so there is
 * never a state without its weights). */
static tfc_status snapshot(run *r, tfc_error *err)
{
    char weights[4700], state[4700];
    snapshot_paths(r, r->iter, weights, state, sizeof weights);
    tfc_snapshot_extra x = {0};
    x.iteration = r->iter;
    x.elapsed = elapsed(r);
    x.have_best = r->res->have_best;
    x.best_value = r->res->best_value;
    x.best_iteration = r->res->best_iteration;
    x.window = r->window;
    x.losses = r->losses;
    x.losses_seen = r->losses_seen;
    memcpy(x.display, r->disp, sizeof x.display);
    tfc_error *inner = malloc(sizeof *inner);
    if (!inner) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    tfc_error_clear(inner);
    tfc_status s = tfc_pipeline_save_state(r->train, &x.pipeline, &x.pipeline_len, inner);
    if (!s) {
        tfc_snapshot_id id = snapshot_id(r);
        s = tfc_snapshot_write(r->m, &r->opt, &id, &x, weights, state, inner);
    }
    free(x.pipeline);
    if (s) {
        tfc_error_set(err, s, "writing the snapshot of iteration %lld: %s%s%s", (long long)r->iter,
                      inner->file, inner->file[0] ? ": " : "", inner->msg);
        if (r->res->last_snapshot[0])
            tfc_error_hint(err, "the previous snapshot %s is intact", r->res->last_snapshot);
        free(inner);
        return s;
    }
    free(inner);
    snprintf(r->res->last_snapshot, sizeof r->res->last_snapshot, "%s", state);
    r->last_snap = r->iter;
    say(r, "snapshot %s\n", state);
    if (!remember_snapshot(r, r->iter)) return TFC_OK;
    while (r->c->snapshot_keep > 0 && r->nsnaps > r->c->snapshot_keep) {
        char ow[4700], os[4700];
        snapshot_paths(r, r->snaps[0], ow, os, sizeof ow);
        unlink(os);
        unlink(ow);
        memmove(r->snaps, r->snaps + 1, sizeof *r->snaps * (size_t)(r->nsnaps - 1));
        r->nsnaps--;
    }
    return TFC_OK;
}

/* The folder and base name of the snapshot prefix: DIR/snapshots and "fashion_cnn". */
static void prefix_parts(const run *r, char *dir, size_t size, const char **base)
{
    snprintf(dir, size, "%s/%s", r->dir, r->c->snapshot_prefix);
    char *slash = strrchr(dir, '/');
    *slash = 0;
    *base = r->c->snapshot_prefix + (slash - dir) - strlen(r->dir);
}

/* Temporary files of snapshot writes that a kill interrupted (".<base>_iter_N.*.tmp-XXXXXX",
 * tfc_file_write_atomic's names) are removed when a run starts in the folder. */
static void remove_stale_temps(const run *r)
{
    char dir[4700];
    const char *base;
    prefix_parts(r, dir, sizeof dir, &base);
    size_t bl = strlen(base);
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        const char *nm = e->d_name;
        if (nm[0] != '.' || strncmp(nm + 1, base, bl) || strncmp(nm + 1 + bl, "_iter_", 6) ||
            !strstr(nm, ".tmp-"))
            continue;
        char path[5000];
        snprintf(path, sizeof path, "%s/%s", dir, nm);
        unlink(path);
    }
    closedir(d);
}

/* On resume: this run's earlier complete snapshots (iteration <= the resumed one) join the
 * rotation, oldest first. */
static void adopt_snapshots(run *r)
{
    char dir[4700];
    const char *base;
    prefix_parts(r, dir, sizeof dir, &base);
    size_t bl = strlen(base);
    DIR *d = opendir(dir);
    if (!d) return;
    int64_t found[4096];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 4096;) {
        const char *nm = e->d_name;
        if (strncmp(nm, base, bl) || strncmp(nm + bl, "_iter_", 6)) continue;
        char *end;
        long long it = strtoll(nm + bl + 6, &end, 10);
        if (end == nm + bl + 6 || strcmp(end, ".state") || it > r->iter) continue;
        found[n++] = it;
    }
    closedir(d);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && found[j - 1] > found[j]; j--) {
            int64_t t = found[j];
            found[j] = found[j - 1];
            found[j - 1] = t;
        }
    for (int i = 0; i < n; i++) remember_snapshot(r, found[i]);
}

/* ---- the step ------------------------------------------------------------------------------- */

static tfc_status diverged(run *r, double loss, tfc_error *err)
{
    int li = tfc_model_first_nonfinite(r->m);
    if (li >= 0) {
        tfc_layer *l = tfc_model_layer(r->m, li);
        tfc_error_set(err, TFC_ERR_NUMERIC,
                      "iteration %lld: the loss is %g; the first layer whose output is not "
                      "finite is '%s' (layers[%d], %s)",
                      (long long)r->iter + 1, loss, l->name, li, l->ops->type);
    } else {
        tfc_error_set(err, TFC_ERR_NUMERIC,
                      "iteration %lld: the loss is %g, while every layer's output is finite "
                      "(the loss itself overflowed)",
                      (long long)r->iter + 1, loss);
    }
    tfc_error_hint(err, "lower optimizer.learning_rate, or set clip_gradients");
    return TFC_ERR_NUMERIC;
}

/* The first trainable parameter whose gradient is not finite, for the message. */
static tfc_status bad_gradient(run *r, tfc_error *err)
{
    for (int i = 0; i < tfc_model_nlayers(r->m); i++) {
        tfc_layer *l = tfc_model_layer(r->m, i);
        for (int p = 0; p < l->nparams; p++)
            if (l->params[p].trainable &&
                r->be->ops->count_nonfinite(r->be, l->params[p].numel, l->params[p].grad)) {
                tfc_error_set(err, TFC_ERR_NUMERIC,
                              "iteration %lld: the gradient of %s/%s is not finite (the loss "
                              "was finite)",
                              (long long)r->iter + 1, l->name, l->params[p].name);
                tfc_error_hint(err, "lower optimizer.learning_rate, or set clip_gradients");
                return TFC_ERR_NUMERIC;
            }
    }
    return tfc_error_set(err, TFC_ERR_NUMERIC, "iteration %lld: the gradient norm is not finite",
                         (long long)r->iter + 1);
}

static tfc_status train_step(run *r, tfc_error *err)
{
    const tfc_solver_config *c = r->c;
    tfc_model_zero_grad(r->m);
    double loss = 0;
    for (int k = 0; k < c->iter_size; k++) {
        int n;
        tfc_status s = next_batch(r, r->train, "data.train", &n, err);
        if (!s && n == 0) {
            /* The train split is read again when it ends, as repeat would. */
            tfc_pipeline_reset(r->train);
            s = next_batch(r, r->train, "data.train", &n, err);
            if (!s && n == 0)
                return tfc_error_set(err, TFC_ERR_DATA, "data.train yields no elements");
        }
        uint64_t step = (uint64_t)r->iter * (uint64_t)c->iter_size + (uint64_t)k;
        tfc_batch_result br;
        if (!s) s = tfc_model_forward(r->m, r->x, n, 1, (uint64_t)c->seed, step, err);
        if (!s) s = tfc_model_loss(r->m, r->y, 1, &br, err);
        if (s) return s;
        if (!isfinite(br.loss)) return diverged(r, br.loss, err);
        tfc_model_backward(r->m);
        loss += br.loss;
        r->disp[1] += (double)br.count;
        for (int i = 0; i < r->nmetrics; i++) r->disp[2 + i] += br.metric[i] * (double)br.count;
    }
    r->disp[0] += 1;
    /* The average gradient; global-norm clipping on it, as Keras's global_clipnorm:
     * g *= clip / max(norm, clip). */
    int64_t ntrain = tfc_model_trainable_count(r->m);
    float *grads = tfc_model_grads(r->m);
    double scale = 1.0 / c->iter_size;
    double sumsq = r->be->ops->sumsq(r->be, ntrain, grads);
    if (!isfinite(sumsq)) return bad_gradient(r, err);
    double norm = sqrt(sumsq) * scale;
    if (c->clip_gradients > 0 && norm > c->clip_gradients) scale *= c->clip_gradients / norm;
    r->lr = tfc_lr_at(&c->lr_policy, c->optimizer.learning_rate, r->iter, c->max_iter);
    tfc_optimizer_step(&r->opt, r->iter, r->lr, scale, c->weight_decay, tfc_model_params(r->m),
                       grads);
    /* a failed asynchronous GPU op (launch, cuBLAS, cuDNN) is reported at this step */
    tfc_status ds = tfc_backend_status(r->be, err);
    if (ds) return ds;
    r->losses[r->losses_seen % r->window] = loss / c->iter_size;
    r->losses_seen++;
    r->iter++;
    return TFC_OK;
}

/* ---- testing and the best weights ------------------------------------------------------------ */

static tfc_status run_test(run *r, int *stopped, tfc_error *err)
{
    double t0 = now();
    tfc_eval e;
    tfc_status s = evaluate(r, &e, stopped, err);
    if (!s) s = tfc_backend_status(r->be, err);
    r->test_seconds += now() - t0;
    r->rate_t += now() - t0; /* testing does not count against the training speed */
    if (s || *stopped) return s;
    r->last_test = r->iter;
    r->res->have_test = 1;
    r->res->test = e;
    double value = r->best_index >= 0 ? e.metric[r->best_index] : e.loss;
    int better = !r->res->have_best ||
                 (r->best_index >= 0 ? value > r->res->best_value : value < r->res->best_value);
    char line[512];
    tfc_solver_format_eval(r->s, &e, line, sizeof line);
    if (better && isfinite(value)) {
        r->res->have_best = 1;
        r->res->best_value = value;
        r->res->best_iteration = r->iter;
        char best[4200];
        snprintf(best, sizeof best, "%s/best.safetensors", r->dir);
        s = tfc_model_save_weights(r->m, best, err);
        if (s) return s;
    }
    say(r, "test %lld: %s  (best %s %.4f at %lld)\n", (long long)r->iter, line,
        r->best_index >= 0 ? r->names[r->best_index] : "loss", r->res->best_value,
        (long long)r->res->best_iteration);
    s = tfc_csv_row(r->csv, r->iter, "test", e.loss, e.metric, r->lr, elapsed(r), err);
    char tag[64];
    if (!s) s = tfc_events_scalar(r->ev, r->iter, "test/loss", e.loss, err);
    for (int i = 0; i < r->nmetrics && !s; i++) {
        if (!strcmp(r->names[i], "loss")) continue;
        snprintf(tag, sizeof tag, "test/%s", r->names[i]);
        s = tfc_events_scalar(r->ev, r->iter, tag, e.metric[i], err);
    }
    return s;
}

/* ---- setting up ---------------------------------------------------------------------------------- */

/* Pipelines of both splits; the test split uses the train split's vocabulary. */
static tfc_status build_pipelines(run *r, tfc_error *err)
{
    const tfc_solver_config *c = r->c;
    int sparse = tfc_model_loss_kind(r->m) == TFC_LOSS_SPARSE_CCE;
    tfc_data_options o = {0};
    o.key = "data.train";
    o.base_dir = c->base_dir;
    o.seed = (uint64_t)c->seed;
    o.stream = 0;
    o.num_classes = sparse ? tfc_model_classes(r->m) : 0;
    r->train = tfc_pipeline_from_config(c->train, &o, err);
    if (!r->train) return err->code ? err->code : TFC_ERR_DATA;
    if (c->test) {
        o.key = "data.test";
        o.stream = 1;
        o.vocab = tfc_pipeline_vocab(r->train);
        r->test = tfc_pipeline_from_config(c->test, &o, err);
        if (!r->test) return err->code ? err->code : TFC_ERR_DATA;
    }
    return TFC_OK;
}

/* Sizes the batches from the splits, checks their specs, binds and allocates. The model is
 * bound for the train batch (test batches run in slices of it), or for evaluation alone
 * (eval_only) for the test batch up to 256 examples, so memory and start-up do not grow
 * with a large test batch. */
static tfc_status prepare(run *r, int eval_only, tfc_error *err)
{
    const tfc_solver_config *c = r->c;
    r->in_numel = tfc_shape_numel(tfc_model_input_shape(r->m));
    r->label_numel = tfc_model_label_rows(r->m) *
                     (tfc_model_loss_kind(r->m) == TFC_LOSS_SPARSE_CCE ? 1 : tfc_model_classes(r->m));
    tfc_status s = check_spec(r, r->train, c->train, "data.train", err);
    if (!s && r->test) s = check_spec(r, r->test, c->test, "data.test", err);
    if (s) return s;
    int sizes[2] = {1, 1};
    for (int k = 0; k < 2; k++) {
        tfc_pipeline *p = k ? r->test : r->train;
        if (!p) continue;
        const tfc_element_spec *es = tfc_pipeline_element_spec(p);
        int bs = 1;
        if (es->batched) {
            bs = es->comp[TFC_COMP_FEATURES].shape.ndim > 0 &&
                         es->comp[TFC_COMP_FEATURES].shape.dim[0] > 0
                     ? (int)es->comp[TFC_COMP_FEATURES].shape.dim[0]
                     : config_batch_size(k ? c->test : c->train);
            if (bs < 1)
                return tfc_node_error(err, TFC_ERR_CONFIG, k ? c->test : c->train,
                                      k ? "data.test" : "data.train",
                                      "cannot tell the batch size of this pipeline");
        }
        sizes[k] = bs;
    }
    r->stage_batch = sizes[0] > sizes[1] ? sizes[0] : sizes[1];
    r->bind_batch = eval_only ? (sizes[1] < 256 ? sizes[1] : 256) : sizes[0];
    s = tfc_model_bind(r->m, r->be, r->bind_batch, err);
    if (s) return s;
    r->x = malloc((size_t)r->stage_batch * (size_t)r->in_numel * 4);
    r->y = malloc((size_t)r->stage_batch * (size_t)r->label_numel * 4);
    if (!r->x || !r->y) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    return TFC_OK;
}

/* runs/<model>-<YYYYmmdd-HHMMSS>, or with -2, -3, ... when taken. */
static void default_dir(run *r)
{
    char stamp[32];
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    snprintf(r->dir, sizeof r->dir, "runs/%s-%s", tfc_model_name(r->m), stamp);
    struct stat st;
    for (int k = 2; stat(r->dir, &st) == 0 && k < 1000; k++)
        snprintf(r->dir, sizeof r->dir, "runs/%s-%s-%d", tfc_model_name(r->m), stamp, k);
}

/* The run directory of a resumed state: STATE is DIR/<prefix>_iter_<N>.state. */
static int dir_of_state(run *r, const char *state)
{
    char suffix[700];
    snprintf(suffix, sizeof suffix, "/%s_iter_", r->c->snapshot_prefix);
    const char *at = NULL, *num;
    for (const char *p = strstr(state, suffix); p; p = strstr(p + 1, suffix)) at = p;
    if (at) num = at + strlen(suffix);
    else if (!strncmp(state, suffix + 1, strlen(suffix) - 1)) num = state + strlen(suffix) - 1;
    else return 0; /* not named as this solver's snapshots are */
    char *end;
    if (strtoll(num, &end, 10) < 0 || end == num || strcmp(end, ".state")) return 0;
    if (at) snprintf(r->dir, sizeof r->dir, "%.*s", (int)(at - state), state);
    else snprintf(r->dir, sizeof r->dir, ".");
    return 1;
}

static tfc_status write_config(run *r, tfc_error *err)
{
    char *text = NULL, path[4200];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    fprintf(f, "# resolved by tfc-train from %s\n", r->s->path);
    tfc_node_emit(f, r->s->root);
    fclose(f);
    snprintf(path, sizeof path, "%s/config.yaml", r->dir);
    const void *chunks[1] = {text};
    tfc_status s = tfc_file_write_atomic(path, chunks, &len, 1, err);
    free(text);
    return s;
}

static tfc_status open_run_dir(run *r, int resumed, tfc_error *err)
{
    char path[4800];
    tfc_status s = tfc_mkdir_p(r->dir, err);
    snprintf(path, sizeof path, "%s/%s", r->dir, r->c->snapshot_prefix);
    *strrchr(path, '/') = 0;
    if (!s) s = tfc_mkdir_p(path, err);
    if (s) return s;
    r->dir_made = 1;
    s = write_config(r, err);
    const tfc_vocab *v = tfc_pipeline_vocab(r->train);
    if (!s && v) {
        snprintf(path, sizeof path, "%s/vocabulary.txt", r->dir);
        s = tfc_vocab_save(v, path, err);
    }
    if (s) return s;
    snprintf(path, sizeof path, "%s/log.csv", r->dir);
    r->csv = tfc_csv_open(path, r->names, r->nmetrics, resumed ? r->iter : -1, err);
    if (!r->csv) return err->code;
    r->ev = tfc_events_open(r->dir, resumed ? r->iter : -1, err);
    return r->ev ? TFC_OK : err->code;
}

static void free_run(run *r)
{
    tfc_csv_close(r->csv);
    tfc_events_close(r->ev);
    if (r->opt.be) tfc_optimizer_release(&r->opt);
    tfc_pipeline_free(r->train);
    tfc_pipeline_free(r->test);
    if (r->m) tfc_model_unbind(r->m);
    if (r->be) tfc_backend_free(r->be);
    free(r->x);
    free(r->y);
    free(r->losses);
    free(r->snaps);
}

static void configure_device(tfc_backend *be, const tfc_solver_config *c)
{
    tfc_device_options o = {c->deterministic, c->tf32,
                            (size_t)(c->gpu_memory_limit * 1024.0 * 1024.0)};
    tfc_backend_configure(be, &o);
}

/* ---- the whole run ---------------------------------------------------------------------------- */

static tfc_status start(run *r, tfc_error *err)
{
    tfc_solver *s = r->s;
    const tfc_solver_config *c = r->c;
    const char *device = s->opt.device ? s->opt.device : c->device;
    r->be = tfc_backend_open(device, s->opt.threads, err);
    if (!r->be) return err->code;
    configure_device(r->be, c);
    tfc_status st = tfc_backend_check(r->be->ops, err);
    if (!st) st = build_pipelines(r, err);
    if (!st) st = prepare(r, 0, err);
    if (!st) st = tfc_optimizer_init(&r->opt, &c->optimizer, r->be, tfc_model_trainable_count(r->m),
                                     err);
    if (!st) st = tfc_model_init_weights(r->m, (uint64_t)c->seed, err);
    if (st) return st;
    r->window = c->average_loss > 0 ? c->average_loss : c->display > 0 ? c->display : 1;
    if (s->opt.out_dir) snprintf(r->dir, sizeof r->dir, "%s", s->opt.out_dir);
    else if (!s->opt.resume || !dir_of_state(r, s->opt.resume)) default_dir(r);

    if (s->opt.resume) {
        tfc_snapshot_extra x = {0};
        x.window = r->window;
        int differs = 0;
        tfc_snapshot_id id = snapshot_id(r);
        st = tfc_snapshot_read(r->m, &r->opt, &id, s->opt.resume, &x, &differs, err);
        if (!st) st = tfc_pipeline_restore_state(r->train, x.pipeline, x.pipeline_len, err);
        free(x.pipeline);
        if (st) {
            free(x.losses);
            tfc_error_prefix(err, "cannot resume: ");
            return st;
        }
        r->losses = x.losses;
        r->iter = x.iteration;
        r->losses_seen = x.losses_seen;
        r->elapsed0 = x.elapsed;
        memcpy(r->disp, x.display, sizeof r->disp);
        r->res->have_best = x.have_best;
        r->res->best_value = x.best_value;
        r->res->best_iteration = x.best_iteration;
        if (r->iter > c->max_iter)
            return tfc_error_set(err, TFC_ERR_USAGE,
                                 "%s is at iteration %lld, beyond max_iter %d", s->opt.resume,
                                 (long long)r->iter, c->max_iter);
        snprintf(r->res->last_snapshot, sizeof r->res->last_snapshot, "%s", s->opt.resume);
        r->last_snap = r->iter;
        say(r, "resuming from %s at iteration %lld\n", s->opt.resume, (long long)r->iter);
        if (differs)
            say(r, "note: the configuration differs from the snapshot's; continuing (the run "
                   "repeats an uninterrupted one exactly only with the same configuration)\n");
    } else {
        r->losses = calloc((size_t)r->window, sizeof *r->losses);
        if (!r->losses) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        if (s->opt.weights) {
            tfc_weights_report rep;
            st = tfc_model_load_weights(r->m, s->opt.weights, &rep, err);
            if (st) return st;
            say(r, "weights from %s: %d matched, %d new, %d skipped for shape, %d unused\n%s",
                s->opt.weights, rep.matched, rep.missing, rep.mismatched, rep.unused,
                rep.text ? rep.text : "");
            free(rep.text);
        }
    }
    r->iter0 = r->iter;
    r->last_test = -1;
    if (!s->opt.resume) r->last_snap = -1;
    st = open_run_dir(r, s->opt.resume != NULL, err);
    if (!st) remove_stale_temps(r);
    if (!st && s->opt.resume) adopt_snapshots(r);
    return st;
}

static tfc_status loop(run *r, tfc_error *err)
{
    const tfc_solver_config *c = r->c;
    tfc_status st = TFC_OK;
    r->t_loop = r->rate_t = now();
    r->rate_i = r->iter;
    r->lr = tfc_lr_at(&c->lr_policy, c->optimizer.learning_rate, r->iter, c->max_iter);
    while (r->iter < c->max_iter) {
        if (stop_requested(r)) break;
        st = train_step(r, err);
        if (st) return st;
        if (c->display > 0 && r->iter % c->display == 0) st = display(r, err);
        else live_update(r);
        int stopped = 0;
        if (!st && r->test && c->test_interval > 0 && r->iter % c->test_interval == 0 &&
            r->iter < c->max_iter)
            st = run_test(r, &stopped, err);
        if (!st && c->snapshot_interval > 0 && r->iter % c->snapshot_interval == 0 &&
            r->iter < c->max_iter)
            st = snapshot(r, err);
        if (st) return st;
    }
    return TFC_OK;
}

static tfc_status finish_run(run *r, tfc_error *err)
{
    const tfc_solver_config *c = r->c;
    tfc_status st = TFC_OK;
    int stopped = stop_requested(r);
    if (!stopped && r->test && r->last_test != r->iter) st = run_test(r, &stopped, err);
    if (st) return st;
    if (r->disp[0] > 0 && (c->display == 0 || r->iter % c->display != 0)) {
        /* The train result of the last stretch, as a display would show it. */
        if (c->display == 0) {
            double loss = smoothed_loss(r);
            r->res->have_train = 1;
            r->res->train.loss = loss;
            for (int i = 0; i < r->nmetrics; i++)
                r->res->train.metric[i] = !strcmp(r->names[i], "loss") ? loss
                                          : r->disp[1] > 0 ? r->disp[2 + i] / r->disp[1] : 0;
        } else if (!stopped) {
            st = display(r, err);
        }
    }
    if (!st && r->last_snap != r->iter) st = snapshot(r, err);
    if (!st && !stopped) {
        char final[4200];
        snprintf(final, sizeof final, "%s/final.safetensors", r->dir);
        st = tfc_model_save_weights(r->m, final, err);
    }
    r->res->status = stopped ? TFC_RUN_INTERRUPTED : TFC_RUN_COMPLETED;
    return st;
}

tfc_status tfc_solver_train(tfc_solver *s, tfc_train_result *res, tfc_error *err)
{
    run r = {0};
    memset(res, 0, sizeof *res);
    r.s = s;
    r.c = &s->cfg;
    r.m = s->model;
    r.res = res;
    r.con = s->opt.console;
    r.live = r.con && (s->opt.live > 0 || (s->opt.live < 0 && isatty(fileno(r.con))));
    r.nmetrics = tfc_model_nmetrics(r.m);
    r.best_index = -1;
    for (int i = 0; i < r.nmetrics; i++) {
        r.names[i] = tfc_model_metric(r.m, i)->name;
        if (r.best_index < 0 && tfc_model_metric(r.m, i)->kind != TFC_METRIC_LOSS) r.best_index = i;
    }
    r.t_start = now();
    tfc_status st = start(&r, err);
    if (!st) {
        say(&r, "%s: %lld parameters (%lld trainable) on %s, batch %d; run directory %s\n",
            tfc_model_name(r.m), (long long)tfc_model_param_count(r.m),
            (long long)tfc_model_trainable_count(r.m), r.be->ops->name, r.bind_batch, r.dir);
        st = loop(&r, err);
        if (!st) st = finish_run(&r, err);
    }
    if (r.live && r.con) {
        fputs("\r\033[K", r.con);
        fflush(r.con);
    }
    res->iterations = r.iter;
    res->wall_seconds = elapsed(&r);
    double own = r.t_loop > 0 ? now() - r.t_loop - r.test_seconds : 0;
    res->iterations_per_second = own > 0 ? (double)(r.iter - r.iter0) / own : 0;
    snprintf(res->run_dir, sizeof res->run_dir, "%s", r.dir);
    if (st) res->status = st == TFC_ERR_NUMERIC ? TFC_RUN_DIVERGED : TFC_RUN_FAILED;
    if (r.dir_made) {
        char path[4200];
        snprintf(path, sizeof path, "%s/summary.json", r.dir);
        tfc_error quiet;
        tfc_error_clear(&quiet);
        tfc_summary_write(path, res, r.names, r.nmetrics,
                          r.best_index >= 0 ? r.names[r.best_index] : "loss",
                          st ? err->msg : NULL, st ? &quiet : err);
        if (!st && quiet.count) st = quiet.code;
    }
    free_run(&r);
    return st;
}

/* ---- tfc-test ---------------------------------------------------------------------------------- */

/* Whether a split's configuration tokenizes text (then it needs the training vocabulary). */
static int mentions_tokenizer(const tfc_node *n)
{
    if (!n) return 0;
    if (n->kind == TFC_NODE_SCALAR) return !strcmp(n->str, "tokenize");
    for (int i = 0; i < n->n; i++)
        if ((n->keys && !strcmp(n->keys[i]->str, "tokenizer")) || mentions_tokenizer(n->vals[i]))
            return 1;
    return 0;
}

/* The vocabulary.txt of the run a weights file belongs to: beside it or up to two folders
 * above (snapshots/ sits inside the run directory). */
static int find_vocabulary(const char *weights, char *dir, size_t size)
{
    snprintf(dir, size, "%s", weights);
    for (int up = 0; up < 3; up++) {
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        else snprintf(dir, size, ".");
        char probe[4200];
        struct stat st;
        snprintf(probe, sizeof probe, "%s/vocabulary.txt", dir);
        if (stat(probe, &st) == 0) return 1;
        if (!slash) return 0;
    }
    return 0;
}

tfc_status tfc_solver_evaluate(tfc_solver *s, const char *weights, tfc_eval *out, tfc_error *err)
{
    run r = {0};
    r.s = s;
    r.c = &s->cfg;
    r.m = s->model;
    r.nmetrics = tfc_model_nmetrics(r.m);
    if (!r.c->test)
        return tfc_error_set(err, TFC_ERR_CONFIG, "%s has no data.test split to evaluate",
                             s->path);
    const char *device = s->opt.device ? s->opt.device : r.c->device;
    r.be = tfc_backend_open(device, s->opt.threads, err);
    if (r.be) configure_device(r.be, r.c);
    tfc_status st = r.be ? tfc_backend_check(r.be->ops, err) : err->code;
    tfc_data_options o = {0};
    char vdir[4200];
    o.key = "data.test";
    o.base_dir = r.c->base_dir;
    o.seed = (uint64_t)r.c->seed;
    o.stream = 1;
    o.num_classes = tfc_model_loss_kind(r.m) == TFC_LOSS_SPARSE_CCE ? tfc_model_classes(r.m) : 0;
    if (!st && mentions_tokenizer(r.c->test)) {
        if (find_vocabulary(weights, vdir, sizeof vdir)) {
            o.run_dir = vdir;
            o.load_vocabulary = 1;
        } else {
            /* No run folder: rebuild the vocabulary from the training split. */
            tfc_data_options t = o;
            t.key = "data.train";
            t.stream = 0;
            r.train = tfc_pipeline_from_config(r.c->train, &t, err);
            if (!r.train) st = err->code;
            else o.vocab = tfc_pipeline_vocab(r.train);
        }
    }
    if (!st) {
        r.test = tfc_pipeline_from_config(r.c->test, &o, err);
        if (!r.test) st = err->code;
    }
    if (!st) {
        /* prepare() sizes and checks both splits; only the test split matters here. */
        tfc_pipeline *train = r.train;
        r.train = r.test;
        tfc_solver_config c = *r.c;
        c.train = c.test;
        r.c = &c;
        st = prepare(&r, 1, err);
        r.c = &s->cfg;
        r.train = train;
    }
    if (!st) st = tfc_model_load_weights(r.m, weights, NULL, err);
    int stopped = 0;
    if (!st) st = evaluate(&r, out, &stopped, err);
    if (!st) st = tfc_backend_status(r.be, err);
    free_run(&r);
    return st;
}
