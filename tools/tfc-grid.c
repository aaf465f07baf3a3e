/* tfc-grid: hyperparameter sweeps (SPEC §3). Every point of a grid (the cartesian product of
 * --grid KEY=v1,v2,...) or of a seeded random sample (--random N with --range KEY=lo:hi or
 * KEY=log:lo:hi) runs as its own `tfc-train SOLVER --set KEY=VALUE... --out DIR/<point>`
 * child, --jobs at a time with the CPU threads divided between them. Running it again skips
 * completed points and resumes interrupted ones from their newest snapshot. DIR/results.csv
 * lists every point sorted by its best test metric (read from each summary.json). With
 * --scheduler asha, points train in rungs (tfc-train --stop-at) and only the best of each rung
 * go on (solver/asha.h); its decisions are logged in DIR/asha.csv, which a re-run replays.
 * A sweep holds DIR's lock while it runs (a second tfc-grid on DIR is refused); each
 * tfc-train holds its point's. This file is the command line; the plan, the process pool, the
 * runners and the results are tools/grid_*.c (tools/grid.h). */
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "grid.h"
#include "tfc.h"

/* The sweep the command line describes: --grid and --range add keys to it as they come. */
static grid sweep;

/* The rest of the command line, as the option table fills it. */
static const char *set_v[4096], *solver_v[1];
static struct {
    cli_list sets, solver;
    long random, seed, jobs, threads;
    const char *out, *device, *report;
    int dry_run;
    grid_schedule sched;
} args = {.sets = CLI_LIST_OF(set_v), .solver = CLI_LIST_OF(solver_v), .seed = 1, .jobs = 1,
          .sched = {.eta = 3, .startup = 5}};

static const cli_option options[] = {
    {"grid", 0, CLI_CALL, &sweep, "KEY=v1,v2", .call = grid_add_values,
     .help = "values of one key (YAML; commas inside [] or {} do not split);\n"
             "the points are the cartesian product of all --grid options"},
    {"random", 0, CLI_INT, &args.random, "N", .min = 1, .max = GRID_MAX_POINTS,
     .help = "instead, N points drawn with --seed: each --range key\n"
             "uniform in [lo, hi] (integers when both bounds are integers),\n"
             "log-uniform with log:lo:hi; each --grid key one of its values"},
    {"range", 0, CLI_CALL, &sweep, "KEY=lo:hi", .call = grid_add_range,
     .help = "a key drawn by --random: KEY=lo:hi or KEY=log:lo:hi"},
    {"seed", 0, CLI_INT, &args.seed, "S", .min = 0, .max = LONG_MAX,
     .help = "the seed of the --random draws (default 1)"},
    {"set", 0, CLI_LIST, &args.sets, "KEY=VALUE", .help = "an override every point gets"},
    {"jobs", 0, CLI_INT, &args.jobs, "N", .min = 1, .max = 256,
     .help = "points run in parallel (default 1); the CPU threads are divided\n"
             "between them"},
    {"threads", 0, CLI_INT, &args.threads, "N", .min = 1, .max = 4096,
     .help = "CPU threads of the whole sweep (default: all cores)"},
    {"out", 0, CLI_STRING, &args.out, "DIR",
     .help = "the sweep's folder (default grid/<solver name>)"},
    {"device", 0, CLI_STRING, &args.device, "D[,D...]",
     .help = "passed to tfc-train; a list gpu:0,gpu:1 gives each job its own"},
    {"scheduler", 0, CLI_STRING, &args.sched.name, "asha|hyperband|median",
     .help = "asha: successive halving (Li et al. 2020): points train to the first\n"
             "rung, the best 1/eta of each rung go on (max_iter·eta^-k down to min-iter);\n"
             "hyperband (Li et al. 2018): brackets of successive halving from\n"
             "max_iter·eta^-s, s = floor(log_eta(max_iter/min-iter))..0;\n"
             "median: Optuna's MedianPruner: a point stops at a test whose best\n"
             "value so far is worse than the completed points' median there"},
    {"warmup", 0, CLI_INT, &args.sched.warmup, "N", .min = 0, .max = 1000000,
     .help = "median: tests of a point before it can be stopped (default 0)"},
    {"startup", 0, CLI_INT, &args.sched.startup, "N", .min = 0, .max = 1000000,
     .help = "median: completed points before any is stopped (default 5)"},
    {"min-iter", 0, CLI_INT, &args.sched.min_iter, "R", .min = 1, .max = LONG_MAX,
     .help = "asha, hyperband: the smallest stage (default max_iter / eta^3, at least 1)"},
    {"eta", 0, CLI_INT, &args.sched.eta, "E", .min = 2, .max = 1000,
     .help = "asha, hyperband: the stage ratio and the kept fraction 1/E (default 3)"},
    {"metric", 0, CLI_STRING, &args.sched.metric, "M",
     .help = "asha: the test metric ranking a rung, e.g. accuracy or test/loss\n"
             "(default the model's first metric, as results.csv)"},
    {"mode", 0, CLI_STRING, &args.sched.mode, "max|min",
     .help = "asha: whether higher is better (default: min for loss, else max)"},
    {"report", 0, CLI_STRING, &args.report, "DIR", .flags = CLI_STANDALONE,
     .help = "only write DIR/report.html from a sweep's folder (every sweep writes\n"
             "one): the results table, sortable, and every trial's test curve"},
    {"dry-run", 0, CLI_FLAG, &args.dry_run, NULL,
     .help = "print the points and their overrides, run nothing"},
    {NULL},
};

static const cli_tool tool = {
    .name = "tfc-grid",
    .operands = "SOLVER.yaml",
    .forms = "SOLVER.yaml --grid KEY=v1,v2,... [--grid ...] [options]\n"
             "SOLVER.yaml --random N --range KEY=lo:hi [--range ...] [--grid ...] [options]",
    .about = "Runs every point of a hyperparameter grid as its own `tfc-train SOLVER\n"
             "--set KEY=VALUE ... --out DIR/<point>` and writes DIR/results.csv sorted by the\n"
             "test metric.",
    .options = options,
    .notes = "Running again skips points whose summary.json says completed (and diverged\n"
             "ones: delete their folder to retry) and resumes the others from their newest\n"
             "snapshot; a point whose resolved configuration changed since it ran (an edited\n"
             "solver, another common --set) runs again from scratch.",
    .exit_status = "0 every point completed (with --scheduler: ended where the scheduler\n"
                   "left it, one at least at max_iter), 1 a point failed or diverged (or none\n"
                   "reached max_iter), 2 bad usage or configuration (or DIR in use by another\n"
                   "tfc-grid, or --report DIR missing or not a sweep's folder), 130/143\n"
                   "stopped by SIGINT/SIGTERM (the running points snapshot)",
    .operand_list = &args.solver,
};

static void on_signal(int sig)
{
    grid_stop_signal = sig;
}


/* ---- main ------------------------------------------------------------------------------- */

/* Loads the solver once per point with its overrides, so a bad key or value stops the
 * sweep (exit 2) before anything runs. */
static int validate(grid *g)
{
    int ok = 1;
    for (int i = 0; i < g->npoints && ok; i++) {
        int nsets;
        char **sets = grid_point_sets(g, &g->points[i], &nsets);
        tfc_solver_options opt = {0};
        opt.sets = (const char *const *)sets;
        opt.nsets = nsets;
        tfc_error err;
        tfc_error_clear(&err);
        tfc_solver *s = tfc_solver_load(g->solver, &opt, &err);
        if (!s) {
            fprintf(stderr, "tfc-grid: point %s:\n%s", g->points[i].name, err.text);
            ok = 0;
        } else {
            g->points[i].config_hash = tfc_solver_config_hash(s);
            g->points[i].max_iter = tfc_solver_get_config(s)->max_iter;
            g->points[i].test_interval = tfc_solver_get_config(s)->test_interval;
            g->points[i].has_test = tfc_solver_get_config(s)->test != NULL;
            /* The ranking metric is known before any test ran: results.csv's columns do not
             * change once the first summary appears. */
            if (i == 0) {
                const char *m = tfc_ranking_metric_name(tfc_solver_model(s));
                snprintf(g->metric, sizeof g->metric, "%s", m);
                g->lower_is_better = tfc_metric_name_lower_is_better(m);
            }
        }
        tfc_solver_free(s);
        grid_free_sets(sets, nsets);
    }
    return ok;
}

/* A scheduled sweep's usage: --mode, and points with one max_iter and test_interval and a
 * test to rank them by. 0, or 2 (said so). */
static int check_schedule(const grid *g)
{
    const char *mode = args.sched.mode;
    if (mode && strcmp(mode, "max") && strcmp(mode, "min"))
        return cli_error(&tool, "--mode %s: expected max or min", mode);
    for (int i = 0; i < g->npoints; i++) {
        if (g->points[i].max_iter != g->points[0].max_iter ||
            g->points[i].test_interval != g->points[0].test_interval)
            return cli_error(&tool, "--scheduler: the points' max_iter or test_interval differ "
                             "(%s and %s); its stages need one", g->points[0].name,
                             g->points[i].name);
        if (!g->points[i].has_test)
            return cli_error(&tool, "--scheduler ranks trials by their test metric: the solver "
                                    "needs data.test");
    }
    return 0;
}

static int grid_main(grid *g, int argc, char **argv);

/* Everything is freed on every way out, so the sanitizer build (make DEBUG=1 test) sees no
 * leak: LeakSanitizer's exit status would replace the documented 0 and 2. */
int main(int argc, char **argv)
{
    int rc = grid_main(&sweep, argc, argv);
    grid_free(&sweep);
    return rc;
}

static int grid_main(grid *g, int argc, char **argv)
{
    int rc = cli_parse(&tool, argc, argv);
    if (rc >= 0) return rc;
    if (args.report) return grid_write_report(args.report);
    g->solver = args.solver.v[0];
    g->sets = args.sets.v;
    g->nsets = args.sets.n;
    int nranges = 0;
    for (int i = 0; i < g->nkeys; i++) nranges += g->keys[i].is_range;
    if (g->nkeys == 0)
        return cli_error(&tool, "nothing to vary: give --grid or --random with --range");
    if (nranges && !args.random) return cli_error(&tool, "--range needs --random N");
    const grid_schedule *o = &args.sched;
    if (o->name && strcmp(o->name, "asha") && strcmp(o->name, "median") &&
        strcmp(o->name, "hyperband"))
        return cli_error(&tool, "--scheduler %s: expected asha, hyperband or median", o->name);
    g->asha = o->name != NULL;
    g->schedule = o;
    if (!g->asha && (o->min_iter || o->metric || o->mode))
        return cli_error(&tool, "--min-iter, --metric and --mode go with --scheduler");

    grid_short_names(g);
    const char *msg = grid_expand(g, args.random, (uint64_t)args.seed);
    if (msg) return cli_error(&tool, "%s", msg);

    char dir[4096];
    if (args.out) {
        snprintf(dir, sizeof dir, "%s", args.out);
    } else {
        const char *base = strrchr(g->solver, '/');
        base = base ? base + 1 : g->solver;
        size_t len = strcspn(base, ".");
        snprintf(dir, sizeof dir, "grid/%.*s", (int)len, base);
    }
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/') dir[--dl] = 0;

    if (args.dry_run) {
        for (int i = 0; i < g->npoints; i++) {
            printf("%s", g->points[i].name);
            for (int k = 0; k < g->nkeys; k++)
                printf("  --set %s=%s", g->keys[k].name, g->points[i].vals[k]);
            printf("\n");
        }
        return 0;
    }
    if (!validate(g)) return 2;

    tfc_error err;
    tfc_error_clear(&err);
    if (tfc_mkdir_p(dir, &err)) {
        fprintf(stderr, "tfc-grid: %s", err.text);
        return 1;
    }
    /* one sweep folder, one tfc-grid (each point's tfc-train locks the point's folder) */
    int lock_fd;
    if (tfc_dir_lock(dir, &lock_fd, &err)) {
        fprintf(stderr, "tfc-grid: %s", err.text);
        return tfc_exit_code(err.code);
    }
    /* absolute, so results.csv's run_dir column works from anywhere */
    char real[PATH_MAX];
    if (realpath(dir, real)) snprintf(dir, sizeof dir, "%s", real);
    for (int i = 0; i < g->npoints; i++)
        snprintf(g->points[i].dir, sizeof g->points[i].dir, "%s/%s", dir, g->points[i].name);
    long ncpu = args.threads > 0 ? args.threads : sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1) ncpu = 1;
    grid_pool pool;
    grid_pool_init(&pool, argv[0], args.device, (int)args.jobs,
                   (int)(ncpu / args.jobs > 0 ? ncpu / args.jobs : 1));

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    printf("tfc-grid: %d point%s, %d at a time, %d thread%s each, into %s\n", g->npoints,
           g->npoints == 1 ? "" : "s", pool.jobs, pool.threads, pool.threads == 1 ? "" : "s",
           dir);
    double t0 = tfc_now();
    if (g->asha) {
        int code = check_schedule(g);
        if (!code) code = grid_run_scheduled(g, &pool, dir);
        if (code) {
            grid_sched_free(g);
            grid_pool_free(&pool);
            return code;
        }
    } else {
        grid_run_all(g, &pool);
    }
    grid_pool_free(&pool);
    int ok = grid_write_results(g, dir);
    if (ok) ok = grid_write_report(dir) == 0;
    grid_sched_free(g);
    int ended = 0, paused = 0, failed = 0, unfinished = 0;
    for (int i = 0; i < g->npoints; i++) {
        const char *st = g->points[i].status;
        if (!strcmp(st, "completed") || (g->asha && !strcmp(st, "stopped_early"))) ended++;
        else if (g->asha && !strcmp(st, "paused")) paused++;
        else if (!strcmp(st, "failed") || !strcmp(st, "diverged")) failed++;
        else unfinished++;
    }
    printf("tfc-grid: %.1f s; %d completed", tfc_now() - t0, ended);
    if (g->asha) printf(", %d paused by %s", paused, o->name);
    printf(", %d failed or diverged, %d unfinished\n", failed, unfinished);
    if (grid_stop_signal) return 128 + (int)grid_stop_signal;
    if (g->asha && !ended) { /* a scheduled sweep ends with a point trained to max_iter */
        fflush(stdout);
        fprintf(stderr, "tfc-grid: no point reached max_iter (%lld): %d failed or diverged on "
                        "the way; results.csv's reason column says where each stopped\n",
                (long long)g->points[0].max_iter, failed);
        return 1;
    }
    return failed || unfinished || !ok ? 1 : 0;
}
