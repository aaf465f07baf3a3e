/* Progress of a run on the console: a plain line at each display (iteration, the loss
 * smoothed over the last `window` iterations, the metrics averaged since the last display,
 * learning rate, speed, ETA), a live line redrawn in place between them on a terminal, and
 * the clock: wall time including resumed runs, and speed without the time spent testing. */
#include "solver/internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/timing.h"

tfc_status tfc_progress_init(tfc_progress *p, const tfc_solver *s, tfc_error *err)
{
    const tfc_solver_config *c = &s->cfg;
    FILE *con = s->opt.console;
    *p = (tfc_progress){.s = s, .con = con, .t_start = tfc_now()};
    p->live = con && (s->opt.live > 0 || (s->opt.live < 0 && isatty(fileno(con))));
    p->window = c->average_loss > 0 ? c->average_loss : c->display > 0 ? c->display : 1;
    p->losses = calloc((size_t)p->window, sizeof *p->losses);
    p->ncounts = tfc_model_ncounts(s->model);
    p->counts = calloc((size_t)(p->ncounts ? p->ncounts : 1), sizeof *p->counts);
    return p->losses && p->counts ? TFC_OK : tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
}

/* Flushes the console; after a failed write (the reader of a pipe gone) it is dropped. */
static void flush(tfc_progress *p)
{
    if (fflush(p->con) != 0 || ferror(p->con)) p->con = NULL;
}

void tfc_progress_say(tfc_progress *p, const char *fmt, ...)
{
    FILE *con = p->con;
    if (!con) return;
    if (p->live) fputs("\r\033[K", con);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(con, fmt, ap);
    va_end(ap);
    flush(p);
}

void tfc_progress_batch(tfc_progress *p, const tfc_batch_result *br)
{
    p->disp[1] += (double)br->count;
    for (int i = 0; i < tfc_model_nmetrics(p->s->model); i++)
        p->disp[2 + i] += tfc_metric_summand(tfc_model_metric(p->s->model, i)->kind,
                                             br->metric[i]) * (double)br->count;
    for (int64_t k = 0; br->counts && k < p->ncounts; k++) p->counts[k] += br->counts[k];
}

void tfc_progress_iteration(tfc_progress *p, double loss)
{
    p->disp[0] += 1;
    p->losses[p->losses_seen % p->window] = loss;
    p->losses_seen++;
}

int64_t tfc_progress_pending(const tfc_progress *p) { return (int64_t)p->disp[0]; }

static double smoothed_loss(const tfc_progress *p)
{
    int64_t n = p->losses_seen < p->window ? p->losses_seen : p->window;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += p->losses[i];
    return n ? sum / (double)n : 0;
}

void tfc_progress_train_result(const tfc_progress *p, tfc_eval *e)
{
    const tfc_model *m = p->s->model;
    e->loss = smoothed_loss(p);
    memset(e->metric, 0, sizeof e->metric);
    for (int i = 0; i < tfc_model_nmetrics(m); i++) {
        if (!strcmp(tfc_model_metric(m, i)->name, "loss")) e->metric[i] = e->loss;
        else if (tfc_model_metric(m, i)->kind == TFC_METRIC_COUNTED)
            e->metric[i] = tfc_model_counted_value(m, i, p->counts);
        else if (p->disp[1] > 0)
            e->metric[i] = tfc_metric_of_mean(tfc_model_metric(m, i)->kind,
                                              p->disp[2 + i] / p->disp[1]);
    }
}

static void fmt_duration(double sec, char *buf, size_t size)
{
    long t = sec > 0 && sec < 1e9 ? (long)(sec + 0.5) : 0;
    if (t >= 3600) snprintf(buf, size, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(buf, size, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, size, "%lds", t);
}

static double rate(const tfc_progress *p, int64_t iter)
{
    double t = tfc_now() - p->rate_t;
    return t > 0 && iter > p->rate_i ? (double)(iter - p->rate_i) / t : 0;
}

/* One progress line: iteration, smoothed loss, metrics (none for a live line), lr, speed,
 * ETA. */
static void progress_line(const tfc_progress *p, int64_t iter, double lr, const tfc_eval *e,
                          char *buf, size_t size)
{
    const tfc_model *m = p->s->model;
    int max_iter = p->s->cfg.max_iter;
    char eta[32];
    double ips = rate(p, iter);
    fmt_duration(ips > 0 ? (double)(max_iter - iter) / ips : 0, eta, sizeof eta);
    int w = snprintf(NULL, 0, "%d", max_iter);
    size_t n = (size_t)snprintf(buf, size, "iter %*lld/%d  loss %.4f", w, (long long)iter,
                                max_iter, smoothed_loss(p));
    for (int i = 0; e && i < tfc_model_nmetrics(m) && n < size; i++)
        if (strcmp(tfc_model_metric(m, i)->name, "loss"))
            n += (size_t)snprintf(buf + n, size - n, "  %s %.4f", tfc_model_metric(m, i)->name,
                                  e->metric[i]);
    if (n < size) n += (size_t)snprintf(buf + n, size - n, "  lr %.3g  %.1f it/s  ETA %s", lr, ips, eta);
    /* the share of the time the steps waited for their batches, from 5% on (docs/data.md) */
    double t = tfc_now() - p->rate_t;
    if (t > 0 && p->input_wait >= 0.05 * t && n < size)
        snprintf(buf + n, size - n, "  input-bound %.0f%%", 100 * p->input_wait / t);
}

void tfc_progress_display(tfc_progress *p, int64_t iter, double lr, tfc_eval *e)
{
    char line[512];
    tfc_progress_train_result(p, e);
    progress_line(p, iter, lr, e, line, sizeof line);
    tfc_progress_say(p, "%s\n", line);
    memset(p->disp, 0, sizeof p->disp);
    memset(p->counts, 0, (size_t)p->ncounts * sizeof *p->counts);
    p->rate_t = tfc_now();
    p->rate_i = iter;
    p->input_wait = 0;
}

void tfc_progress_live(tfc_progress *p, int64_t iter, double lr)
{
    FILE *con = p->con;
    if (!con || !p->live) return;
    double t = tfc_now();
    if (t - p->live_t < 0.1 && iter != p->s->cfg.max_iter) return;
    p->live_t = t;
    char line[512];
    progress_line(p, iter, lr, NULL, line, sizeof line);
    fprintf(con, "\r\033[K%s", line);
    flush(p);
}

void tfc_progress_end(tfc_progress *p)
{
    FILE *con = p->con;
    if (!con || !p->live) return;
    fputs("\r\033[K", con);
    flush(p);
}

double tfc_progress_elapsed(const tfc_progress *p) { return p->elapsed0 + tfc_now() - p->t_start; }

void tfc_progress_loop_start(tfc_progress *p, int64_t iter)
{
    p->t_loop = p->rate_t = tfc_now();
    p->iter0 = p->rate_i = iter;
    p->input_wait = 0;
}

void tfc_progress_exclude(tfc_progress *p, double seconds)
{
    p->excluded += seconds;
    p->rate_t += seconds;
}

double tfc_progress_speed(const tfc_progress *p, int64_t iter)
{
    double own = p->t_loop > 0 ? tfc_now() - p->t_loop - p->excluded : 0;
    return own > 0 ? (double)(iter - p->iter0) / own : 0;
}

void tfc_progress_save(const tfc_progress *p, tfc_snapshot_extra *x)
{
    x->elapsed = tfc_progress_elapsed(p);
    x->window = p->window;
    x->losses = p->losses;
    x->losses_seen = p->losses_seen;
    memcpy(x->display, p->disp, sizeof x->display);
    x->counts = p->counts;
    x->ncounts = p->ncounts;
}

void tfc_progress_restore(tfc_progress *p, const tfc_snapshot_extra *x)
{
    memcpy(p->losses, x->losses, sizeof *p->losses * (size_t)p->window);
    p->losses_seen = x->losses_seen;
    p->elapsed0 = x->elapsed;
    memcpy(p->disp, x->display, sizeof p->disp);
}

void tfc_progress_free(tfc_progress *p)
{
    free(p->losses);
    free(p->counts);
}
