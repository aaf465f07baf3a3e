/* tfc-grid's runners (grid.h): every point to max_iter, or the points in stages under a
 * scheduler (--scheduler asha|hyperband|median; the bookkeeping is src/solver/asha.c): jobs
 * from it, each a tfc-train to its stage, the stage's test metric reported back, every
 * decision logged in DIR/<scheduler>.csv so that a re-run replays it. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grid.h"

void grid_run_all(grid *g, grid_pool *pl)
{
    int *pending = grid_xcalloc((size_t)g->npoints, sizeof *pending);
    int *fresh = grid_xcalloc((size_t)g->npoints, sizeof *fresh);
    int npending = 0, next = 0;
    for (int i = 0; i < g->npoints; i++) {
        grid_point *p = &g->points[i];
        if (grid_read_summary(g, p)) {
            /* The same point only if its resolved configuration is the same: an edited
             * solver or another common --set runs it again, from scratch. */
            char now[24];
            snprintf(now, sizeof now, "%016llx", (unsigned long long)p->config_hash);
            if (strcmp(p->run_hash, now) != 0) {
                printf("rerun  %s (its configuration changed since it ran)\n", p->name);
                fresh[i] = 1;
            } else if (!strcmp(p->status, "completed") || !strcmp(p->status, "diverged")) {
                printf("skip   %s (%s)\n", p->name, p->status);
                continue;
            }
        }
        pending[npending++] = i;
    }
    for (;;) {
        while (next < npending && pl->running < pl->jobs && !grid_stop_signal) {
            grid_point *p = &g->points[pending[next++]];
            char state[4600];
            if (grid_pool_start(pl, g, p, fresh[p - g->points], 0, state, sizeof state))
                continue;
            p->resumed = state[0] != 0;
            printf("%s %s%s%s\n", state[0] ? "resume" : "start ", p->name,
                   state[0] ? " from " : "", state[0] ? state : "");
            fflush(stdout);
        }
        int code, i = grid_pool_wait(pl, g, &code);
        if (i < 0) break;
        grid_point *p = &g->points[i];
        if (!grid_read_summary(g, p) || (code != 0 && !strcmp(p->status, "completed")))
            snprintf(p->status, sizeof p->status, "%s",
                     code == 130 || code == 143 ? "interrupted" : "failed");
        printf("%-6s %s (exit %d)\n", "done", p->name, code);
        fflush(stdout);
    }
    free(pending);
    free(fresh);
}

/* ---- the schedulers -------------------------------------------------------------------------- */

static int point_index(const grid *g, const char *name)
{
    for (int i = 0; i < g->npoints; i++)
        if (!strcmp(g->points[i].name, name)) return i;
    return -1;
}

/* The scheduler a sweep runs under: ASHA or median pruning behind one set of calls, their
 * rungs (asha) or evaluation steps (median) as `stage_iter[0..last]`, the last max_iter. */
typedef struct grid_scheduler {
    const char *name;          /* "asha" or "median": the log's name, DIR/<name>.csv */
    tfc_asha asha;
    tfc_pruner pruner;
    tfc_hyperband hb;
    int last;                  /* the index of the final stage (max_iter) */
    const int64_t *stage_iter;
    unsigned char *busy;
    char header[1024];         /* the log's first line: the settings */
} grid_scheduler;

static int sched_next(grid_scheduler *s, int *t, int *k)
{
    if (s->hb.ntrials) return tfc_hyperband_next(&s->hb, t, k);
    return s->pruner.ntrials ? tfc_pruner_next(&s->pruner, t, k) : tfc_asha_next(&s->asha, t, k);
}

static void sched_report(grid_scheduler *s, int t, int k, double v)
{
    if (s->hb.ntrials) tfc_hyperband_report(&s->hb, t, k, v);
    else if (s->pruner.ntrials) tfc_pruner_report(&s->pruner, t, k, v);
    else tfc_asha_report(&s->asha, t, k, v);
}

static void sched_replay_job(grid_scheduler *s, int t, int k)
{
    if (s->hb.ntrials) tfc_hyperband_replay_job(&s->hb, t, k);
    else if (s->pruner.ntrials) tfc_pruner_replay_job(&s->pruner, t, k);
    else tfc_asha_replay_job(&s->asha, t, k);
}

/* A trial that cannot go on (early stopping ended it below max_iter): never given a job
 * again. */
static void sched_finish(grid_scheduler *s, int t, int k)
{
    if (s->hb.ntrials) {
        /* it reported at k: not owed more, so left out of later stages (want = have) */
        (void)k;
    } else if (s->pruner.ntrials) {
        if (!s->pruner.done[t]) s->pruner.done[t] = 1, s->pruner.ncompleted++;
    } else if (k < s->last) {
        tfc_asha_replay_job(&s->asha, t, k + 1);
    }
}

void grid_sched_reason(const grid *g, const grid_point *p, char *out, size_t size)
{
    const grid_scheduler *s = g->sched;
    int t = (int)(p - g->points);
    if (!strcmp(p->status, "completed")) snprintf(out, size, "reached max_iter");
    else if (strcmp(p->status, "paused"))
        snprintf(out, size, "%s", p->status[0] ? p->status : "not started");
    else if (s->hb.ntrials && s->hb.bracket[t] < 0)
        snprintf(out, size, "in no bracket (more points than the brackets take)");
    else if (s->hb.ntrials)
        snprintf(out, size, "not in the top 1/%ld of stage %d in bracket %d", g->schedule->eta,
                 p->top_rung, s->hb.bracket[t]);
    else if (s->pruner.ntrials && s->pruner.done[t] == 2)
        snprintf(out, size, "pruned at step %d: below the median", p->top_rung);
    else if (!s->pruner.ntrials)
        snprintf(out, size, "not in the top 1/%ld of rung %d", g->schedule->eta, p->top_rung);
    else
        snprintf(out, size, "unfinished");
}

void grid_sched_free(grid *g)
{
    grid_scheduler *s = g->sched;
    if (!s) return;
    tfc_asha_free(&s->asha);
    tfc_pruner_free(&s->pruner);
    tfc_hyperband_free(&s->hb);
    free(s);
    g->sched = NULL;
}

/* DIR/<scheduler>.csv: the header naming the settings, then one line per decision —
 * `job,POINT,STAGE` when a point is given a job and `result,POINT,STAGE,VALUE` when it
 * reports — so a re-run replays the same decisions. A log of other settings is refused.
 * Returns the open log (append), or NULL with a message. */
static FILE *sched_log_open(const grid *g, grid_scheduler *s, const char *dir, int *owed)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.csv", dir, s->name);
    FILE *in = fopen(path, "r");
    if (in) {
        char line[1024];
        size_t hl = strlen(s->header);
        if (!fgets(line, sizeof line, in) || strncmp(line, s->header, hl) ||
            (line[hl] != '\n' && line[hl] != 0)) {
            fprintf(stderr, "tfc-grid: %s holds another sweep's decisions (its first line is not\n"
                            "  %s); choose another --out\n", path, s->header);
            fclose(in);
            return NULL;
        }
        while (fgets(line, sizeof line, in)) {
            char kind[16], name[256];
            int k;
            double value;
            int n = sscanf(line, "%15[^,],%255[^,],%d,%lf", kind, name, &k, &value);
            int t = n >= 3 ? point_index(g, name) : -1;
            if (t < 0 || k < 0 || k > s->last) continue; /* a torn last line */
            if (!strcmp(kind, "job")) {
                sched_replay_job(s, t, k);
                owed[t] = k;
            } else if (!strcmp(kind, "result") && n == 4) {
                sched_report(s, t, k, value);
                if (k > g->points[t].top_rung) g->points[t].top_rung = k;
                if (owed[t] == k) owed[t] = -1;
            }
        }
        fclose(in);
        return fopen(path, "a");
    }
    FILE *out = fopen(path, "w");
    if (!out) fprintf(stderr, "tfc-grid: cannot write %s: %s\n", path, strerror(errno));
    else fprintf(out, "%s\n", s->header);
    return out;
}

/* "WHAT 1, 3, 9 and 27" (no newline): the stages a scheduler pauses at. */
static void print_stages(const char *what, const grid_scheduler *s)
{
    printf("%s", what);
    for (int k = 0; k <= s->last; k++)
        printf("%s %lld", k == s->last ? " and" : k ? "," : "", (long long)s->stage_iter[k]);
}

/* Sets up --scheduler asha|hyperband|median for the points: 0, or 2 on bad usage. */
static int sched_init(grid *g, grid_scheduler *s, const char *metric, int higher)
{
    const grid_schedule *o = g->schedule;
    memset(s, 0, sizeof *s);
    int64_t max_iter = g->points[0].max_iter;
    tfc_error err;
    tfc_error_clear(&err);
    int used = 0;
    int64_t min_iter = o->min_iter; /* asha, hyperband: max_iter / eta^3 by default */
    if (!min_iter) {
        double m = (double)max_iter;
        for (int k = 0; k < 3; k++) m /= (double)o->eta;
        min_iter = m < 1 ? 1 : (int64_t)m;
    }
    if (!strcmp(o->name, "asha")) {
        s->name = "asha";
        if (tfc_asha_init(&s->asha, g->npoints, min_iter, max_iter, (double)o->eta, higher,
                          &err)) {
            fprintf(stderr, "tfc-grid: %s", err.text);
            return 2;
        }
        s->last = s->asha.nrungs;
        s->stage_iter = s->asha.rung_iter;
        s->busy = s->asha.busy;
        used = snprintf(s->header, sizeof s->header, "# asha points=%d rungs=", g->npoints);
        print_stages("asha: rungs at", s);
        printf(" iterations; the best 1/%ld of a rung goes on, by test %s (%s)\n", o->eta,
               metric, higher ? "max" : "min");
    } else if (!strcmp(o->name, "hyperband")) {
        s->name = "hyperband";
        if (tfc_hyperband_init(&s->hb, g->npoints, min_iter, max_iter, (double)o->eta, higher,
                               &err)) {
            fprintf(stderr, "tfc-grid: %s", err.text);
            return 2;
        }
        s->last = s->hb.smax;
        s->stage_iter = s->hb.stage_iter;
        s->busy = s->hb.busy;
        used = snprintf(s->header, sizeof s->header, "# hyperband points=%d stages=", g->npoints);
        print_stages("hyperband: stages at", s);
        printf(" iterations; %d brackets of", s->hb.nbrackets);
        for (int b = 0; b < s->hb.nbrackets; b++) printf("%s %d", b ? "," : "", s->hb.count[b]);
        printf(" points; by test %s (%s)\n", metric, higher ? "max" : "min");
    } else {
        s->name = "median";
        if (tfc_pruner_init(&s->pruner, g->npoints, g->points[0].test_interval, max_iter,
                            (int)o->warmup, (int)o->startup, higher, &err)) {
            fprintf(stderr, "tfc-grid: %s", err.text);
            return 2;
        }
        s->last = s->pruner.nsteps - 1;
        s->stage_iter = s->pruner.step_iter;
        s->busy = s->pruner.busy;
        used = snprintf(s->header, sizeof s->header, "# median points=%d steps=", g->npoints);
        printf("median: a test every %lld iterations to %lld; after %ld completed trials and %ld "
               "warm-up evaluations a trial whose best test %s is worse than the completed "
               "trials' median there stops\n",
               (long long)g->points[0].test_interval, (long long)max_iter, o->startup,
               o->warmup, metric);
    }
    for (int k = 0; k <= s->last && used < (int)sizeof s->header - 64; k++)
        used += snprintf(s->header + used, sizeof s->header - (size_t)used, "%s%lld",
                         k ? ":" : "", (long long)s->stage_iter[k]);
    if (s->pruner.ntrials)
        snprintf(s->header + used, sizeof s->header - (size_t)used,
                 " warmup=%ld startup=%ld metric=%s mode=%s", o->warmup, o->startup, metric,
                 higher ? "max" : "min");
    else if (s->hb.ntrials)
        snprintf(s->header + used, sizeof s->header - (size_t)used, " eta=%ld metric=%s mode=%s",
                 o->eta, metric, higher ? "max" : "min");
    else
        snprintf(s->header + used, sizeof s->header - (size_t)used, " eta=%ld metric=%s mode=%s",
                 o->eta, metric, higher ? "max" : "min");
    return 0;
}

int grid_run_scheduled(grid *g, grid_pool *pl, const char *dir)
{
    const grid_schedule *o = g->schedule;
    const char *metric = o->metric ? o->metric : g->metric;
    if (!strncmp(metric, "test/", 5)) metric += 5;
    int higher = o->mode ? !strcmp(o->mode, "max") : !tfc_metric_name_lower_is_better(metric);
    grid_scheduler *s = grid_xcalloc(1, sizeof *s);
    g->sched = s;
    int rc = sched_init(g, s, metric, higher);
    if (rc) return rc;
    int *owed = grid_xcalloc((size_t)g->npoints, sizeof *owed);
    for (int i = 0; i < g->npoints; i++) {
        owed[i] = -1;
        g->points[i].target = -1;
        g->points[i].top_rung = -1;
    }
    FILE *log = sched_log_open(g, s, dir, owed);
    if (!log) {
        free(owed);
        return 2;
    }
    for (;;) {
        while (pl->running < pl->jobs && !grid_stop_signal) {
            int t = -1, k = -1;
            for (int i = 0; i < g->npoints && t < 0; i++) /* jobs owed from an earlier run */
                if (owed[i] >= 0 && g->points[i].target < 0) t = i, k = owed[i];
            if (t >= 0) {
                s->busy[t] = 1;
            } else if (sched_next(s, &t, &k)) {
                fprintf(log, "job,%s,%d\n", g->points[t].name, k);
                fflush(log);
            } else {
                break;
            }
            grid_point *p = &g->points[t];
            char state[4600];
            int fresh = k == 0 && owed[t] < 0;
            owed[t] = -1;
            int64_t until = k < s->last ? s->stage_iter[k] : 0;
            if (grid_pool_start(pl, g, p, fresh, until, state, sizeof state)) {
                sched_report(s, t, k, NAN);
                continue;
            }
            p->target = k;
            printf("%s %s to %lld%s\n", k == 0 && !state[0] ? "start " : k ? "promote" : "resume",
                   p->name, (long long)s->stage_iter[k], k == s->last ? " (the end)" : "");
            fflush(stdout);
        }
        int code, i = grid_pool_wait(pl, g, &code);
        if (i < 0) break;
        grid_point *p = &g->points[i];
        int k = p->target;
        p->target = -1;
        int read = grid_read_summary(g, p);
        int reached = read && code == 0 &&
                      (!strcmp(p->status, "paused") || !strcmp(p->status, "completed") ||
                       !strcmp(p->status, "stopped_early"));
        if (reached) {
            double v = grid_summary_metric(p, metric);
            sched_report(s, i, k, v);
            if (k > p->top_rung) p->top_rung = k;
            if (!strcmp(p->status, "stopped_early")) sched_finish(s, i, k);
            fprintf(log, "result,%s,%d,%.17g\n", p->name, k, v);
            fflush(log);
            printf("%-7s %s at %lld: %s %.6g\n", "stage", p->name, (long long)p->iterations,
                   metric, v);
        } else if (grid_stop_signal && (code == 130 || code == 143)) {
            s->busy[i] = 0; /* owed: the re-run restarts this job */
            snprintf(p->status, sizeof p->status, "interrupted");
            printf("%-7s %s (exit %d)\n", "stopped", p->name, code);
        } else {
            if (!read || strcmp(p->status, "diverged"))
                snprintf(p->status, sizeof p->status, "failed");
            sched_report(s, i, k, NAN); /* ranks last, or pruned; not run again */
            fprintf(log, "result,%s,%d,nan\n", p->name, k);
            fflush(log);
            printf("%-7s %s (exit %d, %s)\n", "done", p->name, code, p->status);
        }
        fflush(stdout);
    }
    fclose(log);
    /* the cost: iterations trained against every point run to max_iter */
    long long spent = 0;
    for (int i = 0; i < g->npoints; i++) {
        grid_read_summary(g, &g->points[i]);
        spent += g->points[i].iterations;
    }
    long long full = (long long)g->npoints * (long long)g->points[0].max_iter;
    printf("%s: %lld iterations trained, %.1f%% of the %lld the full sweep would train\n", s->name,
           spent, full ? 100.0 * (double)spent / (double)full : 0.0, full);
    free(owed);
    return 0;
}
