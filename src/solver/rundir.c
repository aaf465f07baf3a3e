/* The run directory (SPEC §4): which folder (--out, the run of a resumed state, or a new
 * runs/<model>-<stamp>), the files a run writes when it starts (config.yaml,
 * vocabulary.txt, log.csv, the TensorBoard event file), their rows as it goes, and
 * summary.json at the end. A run holds its folder's lock (DIR/.lock) for its life: one
 * folder, one writer. */
#include "solver/internal.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fileio.h"

/* runs/<model>-<YYYYmmdd-HHMMSS>, or with -2, -3, ... when taken. */
static void default_dir(tfc_rundir *d)
{
    const char *model = tfc_model_name(d->s->model);
    char stamp[32];
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    snprintf(d->path, sizeof d->path, "runs/%s-%s", model, stamp);
    struct stat st;
    for (int k = 2; stat(d->path, &st) == 0 && k < 1000; k++)
        snprintf(d->path, sizeof d->path, "runs/%s-%s-%d", model, stamp, k);
}

/* The run directory of a resumed state named DIR/<prefix>_iter_<N>.state; 0 when the state
 * is not named as this solver's snapshots are. */
static int dir_of_state(tfc_rundir *d, const char *state)
{
    const char *dir_end;
    if (tfc_snapshot_parse(state, d->s->cfg.snapshot_prefix, &dir_end) < 0) return 0;
    if (dir_end) snprintf(d->path, sizeof d->path, "%.*s", (int)(dir_end - state), state);
    else snprintf(d->path, sizeof d->path, ".");
    return 1;
}

void tfc_rundir_choose(tfc_rundir *d, const tfc_solver *s)
{
    d->s = s;
    if (s->opt.out_dir) snprintf(d->path, sizeof d->path, "%s", s->opt.out_dir);
    else if (!s->opt.resume || !dir_of_state(d, s->opt.resume)) default_dir(d);
}

/* config.yaml; its text stays in *text (malloc'd) for the event file. */
static tfc_status write_config(const tfc_rundir *d, char **text, tfc_error *err)
{
    char path[4200];
    size_t len = 0;
    *text = NULL;
    FILE *f = open_memstream(text, &len);
    if (!f) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    fprintf(f, "# resolved by tfc-train from %s\n", d->s->path);
    tfc_node_emit(f, d->s->root);
    fclose(f);
    snprintf(path, sizeof path, "%s/config.yaml", d->path);
    const void *chunks[1] = {*text};
    return tfc_file_write_atomic(path, chunks, &len, 1, err);
}

/* What the event file holds besides scalars: the resolved config as text (a code block,
 * as the text plugin renders markdown), the model's graph, and the hparams plugin's session
 * start with the run's --set keys and values. */
static tfc_status write_run_events(tfc_rundir *d, const char *config, int64_t step,
                                   tfc_error *err)
{
    size_t n = strlen(config);
    char *md = malloc(n + 16);
    if (!md) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    snprintf(md, n + 16, "```\n%s```\n", config);
    tfc_status s = tfc_events_text(d->ev, step, "config", md, err);
    free(md);
    if (!s) s = tfc_events_graph(d->ev, d->s->model, err);
    int nsets = d->s->opt.sets ? d->s->opt.nsets : 0;
    char **keys = calloc((size_t)nsets + 1, sizeof *keys);
    const char **vals = calloc((size_t)nsets + 1, sizeof *vals);
    if (!keys || !vals) s = s ? s : tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    int n_ok = 0;
    for (int i = 0; i < nsets && !s; i++) {
        const char *kv = d->s->opt.sets[i], *eq = strchr(kv, '=');
        if (!eq) continue;
        if (!(keys[n_ok] = strndup(kv, (size_t)(eq - kv)))) {
            s = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
            break;
        }
        vals[n_ok++] = eq + 1;
    }
    if (!s) s = tfc_events_hparams_start(d->ev, (const char *const *)keys, vals, n_ok, err);
    for (int i = 0; keys && i < n_ok; i++) free(keys[i]);
    free(keys);
    free(vals);
    return s;
}

/* The model's metric names, for the log's header and summary.json; returns how many. */
static int metric_names(const tfc_model *m, const char *names[TFC_MAX_METRICS])
{
    int n = tfc_model_nmetrics(m);
    for (int i = 0; i < n; i++) names[i] = tfc_model_metric(m, i)->name;
    return n;
}

/* Whether `name` is one of the fixed-name files tfc-train writes in a run directory. */
static int fixed_run_file(const char *name)
{
    static const char *const names[] = {"config.yaml", "log.csv", "summary.json",
                                        "vocabulary.txt", "final.safetensors",
                                        "best.safetensors"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(name, names[i])) return 1;
    return 0;
}

/* Whether `name`, an entry of a run directory, is a file tfc-train writes there. */
static int run_file(const char *name, const char *snapshot_top)
{
    return fixed_run_file(name) || !strncmp(name, "events.out.tfevents.", 20) ||
           !strcmp(name, snapshot_top) ||
           (!strchr(snapshot_top, '/') && !strncmp(name, snapshot_top, strlen(snapshot_top)));
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* Counts (and with `clear`, removes) the files of an earlier run in d->path: those listed
 * above and the snapshots under the snapshot prefix's first folder (or named by the prefix
 * when it has none). Anything else in the folder is left alone. */
static int earlier_run(const tfc_rundir *d, int clear)
{
    char top[512];
    snprintf(top, sizeof top, "%s", d->s->cfg.snapshot_prefix);
    char *slash = strchr(top, '/');
    if (slash) *slash = '\0';
    DIR *dir = opendir(d->path);
    if (!dir) return 0;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(dir)))
        if (run_file(e->d_name, top)) {
            found++;
            if (clear) {
                char p[PATH_MAX];
                snprintf(p, sizeof p, "%s/%s", d->path, e->d_name);
                nftw(p, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
            }
        }
    closedir(dir);
    return found;
}

/* Removes the temporaries of the run's own files (".<name>.tmp-XXXXXX" of config.yaml,
 * summary.json, final/best weights...) that a kill left during their atomic write; only
 * while the lock is held, so never another live run's. Snapshot temporaries are
 * snapshot.c's. */
static void remove_stale_temps(const tfc_rundir *d)
{
    DIR *dir = opendir(d->path);
    for (struct dirent *e; dir && (e = readdir(dir));) {
        const char *tmp = strstr(e->d_name, ".tmp-");
        char name[256];
        if (e->d_name[0] != '.' || !tmp || strlen(tmp) != 11 ||
            (size_t)(tmp - e->d_name) >= sizeof name)
            continue;
        snprintf(name, sizeof name, "%.*s", (int)(tmp - e->d_name - 1), e->d_name + 1);
        if (!fixed_run_file(name)) continue;
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", d->path, e->d_name);
        unlink(p);
    }
    if (dir) closedir(dir);
}

/* A resume into the folder of a finished run (it has final.safetensors) from a snapshot
 * before that run's end would replace its results: refused naming them, unless --overwrite.
 * (Resuming its last snapshot continues it, with a larger max_iter.) */
static tfc_status resume_over_results(const tfc_rundir *d, int64_t at, tfc_error *err)
{
    char final[PATH_MAX], best[PATH_MAX], log[PATH_MAX], summary[PATH_MAX];
    snprintf(final, sizeof final, "%s/final.safetensors", d->path);
    snprintf(best, sizeof best, "%s/best.safetensors", d->path);
    snprintf(log, sizeof log, "%s/log.csv", d->path);
    snprintf(summary, sizeof summary, "%s/summary.json", d->path);
    struct stat st;
    if (d->s->opt.overwrite || stat(final, &st) != 0 || !S_ISREG(st.st_mode)) return TFC_OK;
    int64_t rows = tfc_csv_rows_after(log, at), end = tfc_summary_iterations(summary);
    if (rows == 0 && end <= at) return TFC_OK;
    tfc_error_set(err, TFC_ERR_USAGE,
                  "%s holds a run finished at iteration %lld; resuming iteration %lld there "
                  "would replace its final.safetensors%s, summary.json and the %lld row(s) of "
                  "log.csv after iteration %lld",
                  d->path, (long long)(end > at ? end : at), (long long)at,
                  stat(best, &st) == 0 ? ", best.safetensors" : "", (long long)rows,
                  (long long)at);
    tfc_error_hint(err, "resume into a new run directory with --out DIR, or add --overwrite to "
                        "replace that run's results");
    return TFC_ERR_USAGE;
}

/* A folder that holds an earlier run is refused (its event files and snapshots would mix
 * with this run's), unless this run resumes a snapshot inside it (and the run there has
 * not finished, or --overwrite) or --overwrite clears it. */
static tfc_status check_reuse(const tfc_rundir *d, int64_t resumed_at, tfc_error *err)
{
    const tfc_solver *s = d->s;
    if (resumed_at >= 0) {
        const char *dir_end;
        char own[PATH_MAX], state_dir[PATH_MAX], a[PATH_MAX], b[PATH_MAX];
        if (tfc_snapshot_parse(s->opt.resume, s->cfg.snapshot_prefix, &dir_end) >= 0) {
            if (dir_end) snprintf(state_dir, sizeof state_dir, "%.*s", (int)(dir_end - s->opt.resume), s->opt.resume);
            else snprintf(state_dir, sizeof state_dir, ".");
            snprintf(own, sizeof own, "%s", d->path);
            if (realpath(own, a) && realpath(state_dir, b) && !strcmp(a, b))
                return resume_over_results(d, resumed_at, err);
        }
    }
    if (!earlier_run(d, 0)) return TFC_OK;
    if (s->opt.overwrite) {
        earlier_run(d, 1);
        return TFC_OK;
    }
    tfc_error_set(err, TFC_ERR_USAGE,
                  "%s holds an earlier run (config.yaml, logs, event files or snapshots); a new "
                  "run there would mix with it",
                  d->path);
    tfc_error_hint(err, "choose another --out, resume one of its snapshots with --resume, or "
                        "add --overwrite to clear that run's files first");
    return TFC_ERR_USAGE;
}

tfc_status tfc_rundir_open(tfc_rundir *d, const tfc_vocab *vocab, int64_t resumed_at,
                           tfc_error *err)
{
    char path[4200];
    tfc_status s = tfc_mkdir_p(d->path, err);
    if (s) return s;
    s = tfc_dir_lock(d->path, &d->lock_fd, err);
    if (s == TFC_ERR_USAGE)
        tfc_error_hint(err, "one run directory has one writer%s: wait for that run to end, "
                       "stop it (tfc-ctl %s stop), or choose another --out",
                       d->s->opt.overwrite ? " (--overwrite never clears a live run)" : "",
                       d->path);
    if (s) return s;
    d->locked = 1;
    s = check_reuse(d, resumed_at, err);
    if (s) return s;
    remove_stale_temps(d);
    d->made = 1;
    char *config = NULL;
    s = write_config(d, &config, err);
    if (!s && vocab) {
        snprintf(path, sizeof path, "%s/vocabulary.txt", d->path);
        s = tfc_vocab_save(vocab, path, err);
    }
    const char *names[TFC_MAX_METRICS];
    int n = metric_names(d->s->model, names);
    /* log.csv, summary.json and final.safetensors describe one run state: the summary and
     * final weights of the state left go before the log is cut back to the resumed one;
     * the run writes its own when it ends (files: a folder in their place is not theirs). */
    static const char *const ended[] = {"summary.json", "final.safetensors"};
    for (int i = 0; i < 2 && !s && resumed_at >= 0; i++) {
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", d->path, ended[i]);
        if (lstat(path, &st) == 0 && !S_ISDIR(st.st_mode) && unlink(path) != 0)
            s = tfc_error_set(err, TFC_ERR_IO, "cannot remove %s: %s", path, strerror(errno));
    }
    snprintf(path, sizeof path, "%s/log.csv", d->path);
    if (!s && !(d->csv = tfc_csv_open(path, names, n, resumed_at, err))) s = err->code;
    /* TensorBoard drops every older point at or after a SessionLog START's step: START at
     * N + 1 keeps the points of iteration N, as log.csv keeps its rows <= N. */
    int64_t purge_from = resumed_at >= 0 ? resumed_at + 1 : -1;
    if (!s && !(d->ev = tfc_events_open(d->path, purge_from, err))) s = err->code;
    if (!s) s = write_run_events(d, config, resumed_at > 0 ? resumed_at : 0, err);
    free(config);
    return s;
}

tfc_status tfc_rundir_histograms(tfc_rundir *d, int64_t iter, double grad_scale,
                                 tfc_error *err)
{
    if (!d->made) return TFC_OK;
    tfc_model *m = d->s->model;
    int64_t most = 0;
    for (int i = 0; i < tfc_model_nlayers(m); i++) {
        const tfc_layer *l = tfc_model_layer(m, i);
        for (int p = 0; p < l->nparams; p++)
            if (l->params[p].numel > most) most = l->params[p].numel;
    }
    float *host = malloc((size_t)(most ? most : 1) * sizeof *host);
    if (!host) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    tfc_status s = TFC_OK;
    for (int i = 0; i < tfc_model_nlayers(m) && !s; i++) {
        tfc_layer *l = tfc_model_layer(m, i);
        for (int p = 0; p < l->nparams && !s; p++) {
            tfc_param *pa = &l->params[p];
            if (pa->constant || pa->shared) continue; /* a call's weights: its layer's */
            char tag[208];
            snprintf(tag, sizeof tag, "weights/%s/%s", l->name, pa->name);
            tfc_model_param_download(m, pa, host);
            s = tfc_events_histogram(d->ev, iter, tag, host, pa->numel, err);
            if (s || !pa->trainable) continue; /* a frozen one's is never read */
            snprintf(tag, sizeof tag, "gradients/%s/%s", l->name, pa->name);
            tfc_model_grad_download(m, pa, host);
            for (int64_t k = 0; k < pa->numel; k++) host[k] = (float)(host[k] * grad_scale);
            s = tfc_events_histogram(d->ev, iter, tag, host, pa->numel, err);
        }
    }
    free(host);
    return s;
}

tfc_status tfc_rundir_log(tfc_rundir *d, const char *phase, int64_t iter, const tfc_eval *e,
                          double lr, double seconds, tfc_error *err)
{
    if (!d->made) return TFC_OK; /* a rank other than 0 of a data-parallel run */
    const tfc_model *m = d->s->model;
    char tag[64];
    tfc_status s = tfc_csv_row(d->csv, iter, phase, e->loss, e->metric, lr, seconds, err);
    snprintf(tag, sizeof tag, "%s/loss", phase);
    if (!s) s = tfc_events_scalar(d->ev, iter, tag, e->loss, err);
    for (int i = 0; i < tfc_model_nmetrics(m) && !s; i++) {
        const char *name = tfc_model_metric(m, i)->name;
        if (!strcmp(name, "loss")) continue;
        snprintf(tag, sizeof tag, "%s/%s", phase, name);
        s = tfc_events_scalar(d->ev, iter, tag, e->metric[i], err);
    }
    if (!s && !strcmp(phase, "train")) s = tfc_events_scalar(d->ev, iter, "lr", lr, err);
    return s;
}

tfc_status tfc_rundir_images(tfc_rundir *d, int64_t iter, const float *x, int n,
                             const tfc_shape *shape, tfc_error *err)
{
    if (!d->made || shape->ndim != 3) return TFC_OK;
    int64_t h = shape->dim[0], w = shape->dim[1], c = shape->dim[2];
    if ((c != 1 && c != 3 && c != 4) || h < 1 || w < 1 || h > 4096 || w > 4096) return TFC_OK;
    size_t px = (size_t)(h * w * c);
    uint8_t *u8 = malloc(px);
    if (!u8) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    tfc_status s = TFC_OK;
    for (int i = 0; i < n && i < 3 && !s; i++) {
        const float *v = x + (size_t)i * px;
        float lo = v[0], hi = v[0];
        for (size_t k = 1; k < px; k++) {
            if (v[k] < lo) lo = v[k];
            if (v[k] > hi) hi = v[k];
        }
        float scale = hi > lo ? 255.0f / (hi - lo) : 0.0f;
        for (size_t k = 0; k < px; k++) u8[k] = (uint8_t)((v[k] - lo) * scale + 0.5f);
        void *png;
        size_t len;
        s = tfc_image_encode_png(u8, (int)w, (int)h, (int)c, &png, &len, err);
        if (s) break;
        char tag[32];
        snprintf(tag, sizeof tag, "inputs/%d", i);
        s = tfc_events_image(d->ev, iter, tag, png, len, (int)h, (int)w, (int)c, err);
        free(png);
    }
    free(u8);
    return s;
}

tfc_status tfc_rundir_summary(const tfc_rundir *d, const tfc_train_result *res,
                              const char *best_metric, const char *error, tfc_error *err)
{
    if (!d->made) return TFC_OK;
    char path[4200];
    const char *names[TFC_MAX_METRICS];
    int n = metric_names(d->s->model, names);
    snprintf(path, sizeof path, "%s/summary.json", d->path);
    tfc_status s = tfc_summary_write(path, res, names, n, best_metric, error, err);
    /* the hparams session's end: success, failure, or still running (paused/interrupted,
     * to be resumed) */
    int status = res->status == TFC_RUN_COMPLETED || res->status == TFC_RUN_STOPPED_EARLY ? 1
                 : res->status == TFC_RUN_DIVERGED || res->status == TFC_RUN_FAILED       ? 2
                                                                                          : 3;
    if (!s && d->ev) s = tfc_events_hparams_end(d->ev, status, err);
    return s;
}

void tfc_rundir_close(tfc_rundir *d)
{
    tfc_csv_close(d->csv);
    tfc_events_close(d->ev);
    if (d->locked) close(d->lock_fd);
    d->locked = 0;
}
