/* The run directory (SPEC §4): which folder (--out, the run of a resumed state, or a new
 * runs/<model>-<stamp>), the files a run writes when it starts (config.yaml,
 * vocabulary.txt, log.csv, the TensorBoard event file), their rows as it goes, and
 * summary.json at the end. */
#include "solver/internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

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

static tfc_status write_config(const tfc_rundir *d, tfc_error *err)
{
    char *text = NULL, path[4200];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    fprintf(f, "# resolved by tfc-train from %s\n", d->s->path);
    tfc_node_emit(f, d->s->root);
    fclose(f);
    snprintf(path, sizeof path, "%s/config.yaml", d->path);
    const void *chunks[1] = {text};
    tfc_status s = tfc_file_write_atomic(path, chunks, &len, 1, err);
    free(text);
    return s;
}

/* The model's metric names, for the log's header and summary.json; returns how many. */
static int metric_names(const tfc_model *m, const char *names[TFC_MAX_METRICS])
{
    int n = tfc_model_nmetrics(m);
    for (int i = 0; i < n; i++) names[i] = tfc_model_metric(m, i)->name;
    return n;
}

tfc_status tfc_rundir_open(tfc_rundir *d, const tfc_vocab *vocab, int64_t resumed_at,
                           tfc_error *err)
{
    char path[4200];
    tfc_status s = tfc_mkdir_p(d->path, err);
    if (s) return s;
    d->made = 1;
    s = write_config(d, err);
    if (!s && vocab) {
        snprintf(path, sizeof path, "%s/vocabulary.txt", d->path);
        s = tfc_vocab_save(vocab, path, err);
    }
    if (s) return s;
    const char *names[TFC_MAX_METRICS];
    int n = metric_names(d->s->model, names);
    snprintf(path, sizeof path, "%s/log.csv", d->path);
    d->csv = tfc_csv_open(path, names, n, resumed_at, err);
    if (!d->csv) return err->code;
    d->ev = tfc_events_open(d->path, resumed_at, err);
    return d->ev ? TFC_OK : err->code;
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

tfc_status tfc_rundir_summary(const tfc_rundir *d, const tfc_train_result *res,
                              const char *best_metric, const char *error, tfc_error *err)
{
    if (!d->made) return TFC_OK;
    char path[4200];
    const char *names[TFC_MAX_METRICS];
    int n = metric_names(d->s->model, names);
    snprintf(path, sizeof path, "%s/summary.json", d->path);
    return tfc_summary_write(path, res, names, n, best_metric, error, err);
}

void tfc_rundir_close(tfc_rundir *d)
{
    tfc_csv_close(d->csv);
    tfc_events_close(d->ev);
}
