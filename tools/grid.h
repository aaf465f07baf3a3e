/* tfc-grid's parts (not part of libtfc; the Makefile links tools/grid_*.c into tfc-grid only):
 * the sweep's plan (grid_plan.c: keys, points, their --set strings), the process pool that
 * runs tfc-train children (grid_pool.c), the runners, plain or under a scheduler
 * (grid_run.c; the schedulers' bookkeeping is src/solver/asha.c), and results.csv,
 * summary.json and report.html (grid_report.c). tools/tfc-grid.c is the command line. */
#ifndef TFC_TOOLS_GRID_H
#define TFC_TOOLS_GRID_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tfc.h"

#define GRID_MAX_KEYS 32
#define GRID_MAX_VALUES 1024
#define GRID_MAX_POINTS 100000

/* One varied key: --grid values, or a --random range. */
typedef struct grid_key {
    const char *name;   /* dotted path */
    char short_name[128];
    char **values;      /* --grid values */
    int nvalues;
    int is_range, log, integer;
    double lo, hi;
} grid_key;

typedef struct grid_point {
    char **vals;        /* one per key */
    char name[256];
    char dir[4400];
    pid_t pid;
    int slot;           /* job slot while running, -1 otherwise */
    int ran, resumed;
    uint64_t config_hash;  /* of the point's resolved configuration now (validate) */
    int64_t max_iter;      /* its solver's (validate) */
    int64_t test_interval;
    int has_test;          /* its solver has data.test */
    int target;            /* asha: the rung its current job trains to, -1: none */
    int top_rung;          /* asha: the highest rung it reached, -1: none */
    /* from summary.json */
    char status[32];
    char run_hash[24];  /* the configuration hash it ran with ("" when not recorded) */
    int have_final, have_best;
    double final_value, best_value, wall;
    long long best_iter, iterations;
} grid_point;

/* --scheduler and its settings, as the command line gives them. */
typedef struct grid_schedule {
    const char *name;   /* asha, hyperband or median; NULL: every point runs to max_iter */
    long min_iter, eta, warmup, startup;
    const char *metric, *mode;
} grid_schedule;

struct grid_scheduler;

typedef struct grid {
    const char *solver;
    grid_key keys[GRID_MAX_KEYS];
    int nkeys;
    grid_point *points;
    int npoints;
    const char **sets;
    int nsets;
    char metric[128];
    int lower_is_better;
    int asha;              /* --scheduler asha|hyperband|median */
    const grid_schedule *schedule;
    struct grid_scheduler *sched; /* while a scheduled sweep runs and writes its results */
} grid;

/* Set by SIGINT/SIGTERM (tfc-grid.c's handler): the runners start nothing more and pass
 * SIGTERM to the running children. */
extern volatile sig_atomic_t grid_stop_signal;

/* ---- grid_plan.c: the points ------------------------------------------------------------ */

/* calloc and strdup that end the program (exit 1, "out of memory") when memory is out. */
void *grid_xcalloc(size_t n, size_t size);
char *grid_xstrdup(const char *s);

/* --grid KEY=v1,v2,... and --range KEY=lo:hi|log:lo:hi as cli.h's CLI_CALL (ctx: the grid):
 * NULL, or the message of a malformed argument. */
const char *grid_add_values(void *ctx, const char *arg);
const char *grid_add_range(void *ctx, const char *arg);

/* The keys' short names (the last path component that is not an index, the whole path where
 * two would be equal), then the points: the cartesian product, or `nrandom` seeded draws when
 * nrandom > 0. NULL, or what is wrong with the grid. */
void grid_short_names(grid *g);
const char *grid_expand(grid *g, long nrandom, uint64_t seed);

/* The point's --set strings: the common ones, then KEY=VALUE per key (*n of them); free with
 * grid_free_sets. */
char **grid_point_sets(const grid *g, const grid_point *p, int *n);
void grid_free_sets(char **s, int n);

/* Frees the keys and the points (not the grid itself). */
void grid_free(grid *g);

/* ---- grid_pool.c: the tfc-train children ------------------------------------------------- */

/* Job slots: at most `jobs` children, each with `threads` CPU threads and the slot's entry of
 * the device list. */
typedef struct grid_pool {
    char trainer[4200];     /* tfc-train beside tfc-grid, else from PATH */
    const char *device_list;
    int threads;            /* per job */
    int jobs;
    int running;
    unsigned char *slots;   /* [jobs]: taken */
    int forwarded;          /* SIGTERM passed on to the children */
} grid_pool;

void grid_pool_init(grid_pool *pl, const char *argv0, const char *device_list, int jobs,
                    int threads);
void grid_pool_free(grid_pool *pl);

/* Starts tfc-train for the point in a free slot (the caller checks pl->running < pl->jobs):
 * its folder made, resumed from its newest snapshot unless `fresh`, paused after iteration
 * `stop_at` when > 0; output appended to DIR/<point>/train.log. The snapshot resumed goes to
 * `state` ("" when none). 0, or -1 with the message printed and the point's status "failed". */
int grid_pool_start(grid_pool *pl, const grid *g, grid_point *p, int fresh, int64_t stop_at,
                    char *state, size_t size);

/* Waits for a child to end (passing SIGTERM to all of them once a stop signal came): the
 * index of its point with its exit code (128 + signal when killed), its slot free again; -1
 * when none runs. */
int grid_pool_wait(grid_pool *pl, grid *g, int *code);

/* ---- grid_run.c: the runners ------------------------------------------------------------- */

/* Every point not completed yet, pl->jobs at a time (a point whose configuration changed since
 * it ran starts over). */
void grid_run_all(grid *g, grid_pool *pl);

/* The points trained in stages under g->schedule (grid_run.c's scheduler, kept in g->sched
 * for grid_write_results until grid_sched_free). 0, or 2 on bad usage (said so). */
int grid_run_scheduled(grid *g, grid_pool *pl, const char *dir);

/* Why a trial of a scheduled sweep ended where it did, for results.csv. */
void grid_sched_reason(const grid *g, const grid_point *p, char *out, size_t size);
void grid_sched_free(grid *g);

/* ---- grid_report.c: what the points wrote, and the sweep's tables ---------------------- */

/* Reads DIR/summary.json into the point; 0 when absent or unreadable. Learns the metric's
 * name from "best" the first time one is seen. */
int grid_read_summary(grid *g, grid_point *p);

/* The value of `metric` in the point's summary.json final test (NAN when absent). */
double grid_summary_metric(const grid_point *p, const char *metric);

/* DIR/results.csv (atomically), the same table printed aligned: 1, or 0 (said so). */
int grid_write_results(grid *g, const char *dir);

/* DIR/report.html from DIR/results.csv and the trials' logs: 0, or the exit status (said
 * so): 2 when DIR is not a sweep's folder (no results.csv), 1 when the file cannot be
 * written. */
int grid_write_report(const char *dir);

#endif
