/* The run's text records: log.csv (one row per display or test event, flushed as written so
 * a killed run keeps every complete row) and summary.json (written atomically with
 * jansson: the one file a grid-search script reads). */
#include "solver/internal.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"

struct tfc_csv_log {
    FILE *f;
    int nmetrics;
    int64_t last_test; /* the last kept test row's iteration; -1: none */
    char path[4200];
};

/* Whether buf[0..len) is a whole row of the header's columns: an iteration, no NUL byte
 * (a crash can leave zeros where a row was being written), as many commas as the header. */
static int whole_row(const char *buf, size_t len, const char *header, int64_t *iter)
{
    int commas = 0, want = 0;
    for (const char *h = header; *h; h++) want += *h == ',';
    for (size_t i = 0; i < len; i++) {
        if (buf[i] == 0) return 0;
        commas += buf[i] == ',';
    }
    char *stop;
    long long it = strtoll(buf, &stop, 10);
    *iter = it;
    return commas == want && stop != buf && *stop == ',';
}

/* Keeps the header and the whole rows whose iteration is <= keep_upto; returns the kept
 * text (malloc'd) or NULL when the file is absent or has another header. *last_test: the
 * iteration of the last test row kept (-1: none). */
static char *kept_rows(const char *path, const char *header, int64_t keep_upto,
                       int64_t *last_test)
{
    char *buf = NULL;
    size_t len = 0;
    tfc_error quiet;
    tfc_error_clear(&quiet);
    if (tfc_file_read_all(path, (size_t)1 << 30, &buf, &len, &quiet)) return NULL;
    size_t hl = strlen(header);
    if (len < hl || memcmp(buf, header, hl) != 0) {
        free(buf);
        return NULL;
    }
    size_t out = hl;
    for (size_t at = hl; at < len;) {
        char *nl = memchr(buf + at, '\n', len - at);
        if (!nl) break; /* a torn last line */
        size_t end = (size_t)(nl - buf) + 1;
        int64_t it;
        if (whole_row(buf + at, end - at, header, &it) && it <= keep_upto) {
            const char *phase = (const char *)memchr(buf + at, ',', end - at) + 1;
            if (!strncmp(phase, "test,", 5)) *last_test = it;
            memmove(buf + out, buf + at, end - at);
            out += end - at;
        }
        at = end;
    }
    buf[out] = 0;
    return buf;
}

tfc_csv_log *tfc_csv_open(const char *path, const char *const *metric_names, int nmetrics,
                          int64_t keep_upto, tfc_error *err)
{
    char header[1024];
    size_t n = (size_t)snprintf(header, sizeof header, "iter,phase,loss");
    for (int i = 0; i < nmetrics && n < sizeof header; i++)
        n += (size_t)snprintf(header + n, sizeof header - n, ",%s", metric_names[i]);
    if (n < sizeof header) snprintf(header + n, sizeof header - n, ",lr,seconds\n");
    int64_t last_test = -1;
    char *old = keep_upto >= 0 ? kept_rows(path, header, keep_upto, &last_test) : NULL;
    tfc_csv_log *log = calloc(1, sizeof *log);
    if (!log) {
        free(old);
        tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        return NULL;
    }
    log->last_test = last_test;
    snprintf(log->path, sizeof log->path, "%s", path);
    log->nmetrics = nmetrics;
    log->f = fopen(path, "w");
    const char *text = old ? old : header;
    if (!log->f || fputs(text, log->f) < 0 || fflush(log->f) != 0) {
        tfc_error_set(err, TFC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        free(old);
        tfc_csv_close(log);
        return NULL;
    }
    free(old);
    return log;
}

/* %.9g keeps a float32 value exactly; NaN and Inf print as nan and inf. */
tfc_status tfc_csv_row(tfc_csv_log *log, int64_t iter, const char *phase, double loss,
                       const double *metrics, double lr, double seconds, tfc_error *err)
{
    fprintf(log->f, "%lld,%s,%.9g", (long long)iter, phase, loss);
    for (int i = 0; i < log->nmetrics; i++) fprintf(log->f, ",%.9g", metrics[i]);
    fprintf(log->f, ",%.9g,%.3f\n", lr, seconds);
    if (ferror(log->f) || fflush(log->f) != 0)
        return tfc_error_set(err, TFC_ERR_IO, "cannot write %s: %s", log->path, strerror(errno));
    return TFC_OK;
}

int64_t tfc_csv_last_test(const tfc_csv_log *log)
{
    return log ? log->last_test : -1;
}

int64_t tfc_csv_rows_after(const char *path, int64_t iter)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[1024];
    int64_t n = 0;
    while (fgets(line, sizeof line, f)) {
        char *stop;
        long long it = strtoll(line, &stop, 10);
        n += stop != line && *stop == ',' && it > iter;
    }
    fclose(f);
    return n;
}

int64_t tfc_summary_iterations(const char *path)
{
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    json_t *n = j ? json_object_get(j, "iterations") : NULL;
    int64_t iterations = json_is_integer(n) ? (int64_t)json_integer_value(n) : -1;
    json_decref(j);
    return iterations;
}

void tfc_csv_close(tfc_csv_log *log)
{
    if (!log) return;
    if (log->f) fclose(log->f);
    free(log);
}

/* A JSON number, or null for NaN/Inf (JSON has no spelling for them). */
static json_t *number(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

void *tfc_eval_json(const tfc_eval *e, const char *const *names, int n)
{
    json_t *o = json_object();
    json_object_set_new(o, "loss", number(e->loss));
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], "loss") != 0) json_object_set_new(o, names[i], number(e->metric[i]));
    return o;
}

tfc_status tfc_summary_write(const char *path, const tfc_train_result *res,
                             const char *const *metric_names, int nmetrics,
                             const char *best_metric, const char *error, tfc_error *err)
{
    json_t *root = json_object();
    json_object_set_new(root, "status", json_string(tfc_run_status_names[res->status]));
    json_object_set_new(root, "iterations", json_integer(res->iterations));
    json_object_set_new(root, "wall_seconds", number(res->wall_seconds));
    json_object_set_new(root, "iterations_per_second", number(res->iterations_per_second));
    char hash[24];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)res->config_hash);
    json_object_set_new(root, "config_hash", json_string(hash));
    json_object_set_new(root, "ranks", json_integer(res->ranks));
    json_object_set_new(root, "rank_batch", json_integer(res->rank_batch));
    json_object_set_new(root, "global_batch", json_integer((json_int_t)res->rank_batch * res->ranks));
    json_t *final = json_object();
    if (res->have_train)
        json_object_set_new(final, "train", tfc_eval_json(&res->train, metric_names, nmetrics));
    if (res->have_test) {
        json_t *test = tfc_eval_json(&res->test, metric_names, nmetrics);
        tfc_class_stats all = {0};
        if (res->confusion && res->confusion->classes) tfc_confusion_macro(res->confusion, &all);
        if (all.support > 0) json_object_update_new(test, tfc_confusion_json(res->confusion));
        json_object_set_new(final, "test", test);
    }
    json_object_set_new(root, "final", final);
    if (res->have_best) {
        json_t *best = json_object();
        json_object_set_new(best, "metric", json_string(best_metric));
        json_object_set_new(best, "value", number(res->best_value));
        json_object_set_new(best, "iteration", json_integer(res->best_iteration));
        json_object_set_new(root, "best", best);
    }
    if (res->rollbacks > 0) json_object_set_new(root, "rollbacks", json_integer(res->rollbacks));
    if (res->loss_scale > 0) { /* precision float16 */
        json_t *ls = json_object();
        json_object_set_new(ls, "scale", json_real(res->loss_scale));
        json_object_set_new(ls, "overflows", json_integer(res->loss_scale_overflows));
        json_object_set_new(root, "loss_scale", ls);
    }
    int64_t skipped_test = res->have_test ? res->test.skipped : 0;
    if (res->skipped_train > 0 || skipped_test > 0) { /* on_error: skip left records out */
        json_t *sk = json_object();
        json_object_set_new(sk, "train", json_integer(res->skipped_train));
        json_object_set_new(sk, "test", json_integer(skipped_test));
        json_object_set_new(root, "skipped", sk);
    }
    if (res->input_slowest[0]) {
        json_t *in = json_object();
        json_object_set_new(in, "bound", number(res->input_bound));
        json_object_set_new(in, "slowest", json_string(res->input_slowest));
        json_object_set_new(root, "input", in);
    }
    if (res->status == TFC_RUN_STOPPED_EARLY) {
        json_t *es = json_object();
        json_object_set_new(es, "iteration", json_integer(res->stopped_iteration));
        json_object_set_new(es, "reason", json_string(res->stop_reason));
        json_object_set_new(root, "early_stopping", es);
    }
    if (res->last_snapshot[0])
        json_object_set_new(root, "last_snapshot", json_string(res->last_snapshot));
    if (error) json_object_set_new(root, "error", json_string(error));
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    json_decref(root);
    if (!text) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory writing %s", path);
    size_t len = strlen(text);
    const void *chunks[2] = {text, "\n"};
    size_t sizes[2] = {len, 1};
    tfc_status s = tfc_file_write_atomic(path, chunks, sizes, 2, err);
    free(text);
    return s;
}
