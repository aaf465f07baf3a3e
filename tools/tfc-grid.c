/* tfc-grid: hyperparameter sweeps (SPEC §3). Every point of a grid (the cartesian product of
 * --grid KEY=v1,v2,...) or of a seeded random sample (--random N with --range KEY=lo:hi or
 * KEY=log:lo:hi) runs as its own `tfc-train SOLVER --set KEY=VALUE... --out DIR/<point>`
 * child, --jobs at a time with the CPU threads divided between them. Running it again skips
 * completed points and resumes interrupted ones from their newest snapshot. DIR/results.csv
 * lists every point sorted by its best test metric (read from each summary.json). With
 * --scheduler asha, points train in rungs (tfc-train --stop-at) and only the best of each rung
 * go on (solver/asha.h); its decisions are logged in DIR/asha.csv, which a re-run replays.
 * A sweep holds DIR's lock while it runs (a second tfc-grid on DIR is refused); each
 * tfc-train holds its point's. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "tfc.h"

#define MAX_KEYS 32
#define MAX_VALUES 1024
#define MAX_POINTS 100000

typedef struct key {
    const char *name;   /* dotted path */
    char short_name[128];
    char **values;      /* --grid values */
    int nvalues;
    int is_range, log, integer;
    double lo, hi;
} key;

typedef struct point {
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
} point;

typedef struct grid {
    const char *solver;
    key keys[MAX_KEYS];
    int nkeys;
    point *points;
    int npoints;
    const char **sets;
    int nsets;
    char metric[128];
    int lower_is_better;
    int asha;              /* --scheduler asha|median */
    struct scheduler *sched;
} grid;

/* The sweep the command line describes: --grid and --range add keys to it as they come. */
static grid sweep;
static const char *add_grid(void *ctx, const char *arg);
static const char *add_range(void *ctx, const char *arg);

/* The rest of the command line, as the option table fills it. */
static const char *set_v[4096], *solver_v[1];
static struct {
    cli_list sets, solver;
    long random, seed, jobs, threads, min_iter, eta, warmup, startup;
    const char *out, *device, *scheduler, *metric, *mode, *report;
    int dry_run;
} args = {.sets = CLI_LIST_OF(set_v), .solver = CLI_LIST_OF(solver_v), .seed = 1, .jobs = 1,
          .eta = 3, .startup = 5};

static const cli_option options[] = {
    {"grid", 0, CLI_CALL, &sweep, "KEY=v1,v2", .call = add_grid,
     .help = "values of one key (YAML; commas inside [] or {} do not split);\n"
             "the points are the cartesian product of all --grid options"},
    {"random", 0, CLI_INT, &args.random, "N", .min = 1, .max = MAX_POINTS,
     .help = "instead, N points drawn with --seed: each --range key\n"
             "uniform in [lo, hi] (integers when both bounds are integers),\n"
             "log-uniform with log:lo:hi; each --grid key one of its values"},
    {"range", 0, CLI_CALL, &sweep, "KEY=lo:hi", .call = add_range,
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
    {"scheduler", 0, CLI_STRING, &args.scheduler, "asha|hyperband|median",
     .help = "asha: successive halving (Li et al. 2020): points train to the first\n"
             "rung, the best 1/eta of each rung go on (max_iter·eta^-k down to min-iter);\n"
             "hyperband (Li et al. 2018): brackets of successive halving from\n"
             "max_iter·eta^-s, s = floor(log_eta(max_iter/min-iter))..0;\n"
             "median: Optuna's MedianPruner: a point stops at a test whose best\n"
             "value so far is worse than the completed points' median there"},
    {"warmup", 0, CLI_INT, &args.warmup, "N", .min = 0, .max = 1000000,
     .help = "median: tests of a point before it can be stopped (default 0)"},
    {"startup", 0, CLI_INT, &args.startup, "N", .min = 0, .max = 1000000,
     .help = "median: completed points before any is stopped (default 5)"},
    {"min-iter", 0, CLI_INT, &args.min_iter, "R", .min = 1, .max = LONG_MAX,
     .help = "asha, hyperband: the smallest stage (default max_iter / eta^3, at least 1)"},
    {"eta", 0, CLI_INT, &args.eta, "E", .min = 2, .max = 1000,
     .help = "asha, hyperband: the stage ratio and the kept fraction 1/E (default 3)"},
    {"metric", 0, CLI_STRING, &args.metric, "M",
     .help = "asha: the test metric ranking a rung, e.g. accuracy or test/loss\n"
             "(default the model's first metric, as results.csv)"},
    {"mode", 0, CLI_STRING, &args.mode, "max|min",
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
    .exit_status = "0 every point completed, 1 a point failed or diverged, 2 bad usage or\n"
                   "configuration (or DIR in use by another tfc-grid), 130/143 stopped by\n"
                   "SIGINT/SIGTERM (the running points snapshot)",
    .operand_list = &args.solver,
};

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fputs("tfc-grid: out of memory\n", stderr);
        exit(1);
    }
    return p;
}

static char *xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p) {
        fputs("tfc-grid: out of memory\n", stderr);
        exit(1);
    }
    return p;
}

/* An integer literal (optional sign, digits only)? */
static int is_integer(const char *s)
{
    if (*s == '-' || *s == '+') s++;
    if (!*s) return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return 0;
    return 1;
}

/* "KEY=REST": KEY non-empty; returns REST or NULL. */
static const char *split_key(const char *arg, char *keybuf, size_t size)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || (size_t)(eq - arg) >= size) return NULL;
    memcpy(keybuf, arg, (size_t)(eq - arg));
    keybuf[eq - arg] = 0;
    return eq + 1;
}

static key *find_or_add_key(grid *g, const char *name)
{
    for (int i = 0; i < g->nkeys; i++)
        if (!strcmp(g->keys[i].name, name)) return NULL; /* duplicate */
    if (g->nkeys == MAX_KEYS) return NULL;
    key *k = &g->keys[g->nkeys++];
    k->name = xstrdup(name);
    return k;
}

/* --grid KEY=v1,v2,...: commas split at bracket depth 0, so YAML flow values like [3, 3]
 * stay whole. Returns an error message or NULL. */
static const char *add_grid(void *ctx, const char *arg)
{
    grid *g = ctx;
    char name[512];
    const char *rest = split_key(arg, name, sizeof name);
    if (!rest) return "expected KEY=v1,v2,...";
    key *k = find_or_add_key(g, name);
    if (!k) return "the key is given twice (or more than 32 keys)";
    k->values = xcalloc(MAX_VALUES, sizeof *k->values);
    int depth = 0;
    const char *start = rest;
    for (const char *p = rest;; p++) {
        if (*p == '[' || *p == '{') depth++;
        if ((*p == ']' || *p == '}') && depth > 0) depth--;
        if (*p == 0 || (*p == ',' && depth == 0)) {
            if (k->nvalues == MAX_VALUES) return "more than 1024 values";
            size_t len = (size_t)(p - start);
            char *v = xcalloc(len + 1, 1);
            memcpy(v, start, len);
            /* trim spaces after commas: "0.1, 0.01" */
            char *t = v;
            while (*t == ' ') t++;
            memmove(v, t, strlen(t) + 1);
            k->values[k->nvalues++] = v;
            if (!*p) break;
            start = p + 1;
        }
    }
    return NULL;
}

/* --range KEY=lo:hi or KEY=log:lo:hi. */
static const char *add_range(void *ctx, const char *arg)
{
    grid *g = ctx;
    char name[512], lo[128], hi[128];
    const char *rest = split_key(arg, name, sizeof name);
    if (!rest) return "expected KEY=lo:hi or KEY=log:lo:hi";
    int log = 0;
    if (!strncmp(rest, "log:", 4)) {
        log = 1;
        rest += 4;
    }
    const char *colon = strchr(rest, ':');
    if (!colon || (size_t)(colon - rest) >= sizeof lo || strlen(colon + 1) >= sizeof hi)
        return "expected KEY=lo:hi or KEY=log:lo:hi";
    memcpy(lo, rest, (size_t)(colon - rest));
    lo[colon - rest] = 0;
    snprintf(hi, sizeof hi, "%s", colon + 1);
    char *e1, *e2;
    double a = strtod(lo, &e1), b = strtod(hi, &e2);
    if (!*lo || !*hi || *e1 || *e2 || !isfinite(a) || !isfinite(b))
        return "the bounds must be numbers";
    if (a > b) return "lo must not exceed hi";
    if (log && a <= 0) return "a log range needs positive bounds";
    key *k = find_or_add_key(g, name);
    if (!k) return "the key is given twice (or more than 32 keys)";
    k->is_range = 1;
    k->log = log;
    k->integer = is_integer(lo) && is_integer(hi);
    k->lo = a;
    k->hi = b;
    return NULL;
}

/* The last path component that is not an index: optimizer.learning_rate -> learning_rate,
 * model.layers.6.Dropout.rate -> rate. */
static void short_names(grid *g)
{
    for (int i = 0; i < g->nkeys; i++) {
        key *k = &g->keys[i];
        char buf[512];
        snprintf(buf, sizeof buf, "%s", k->name);
        const char *best = buf;
        for (char *tok = strtok(buf, ".[]"); tok; tok = strtok(NULL, ".[]"))
            if (!is_integer(tok)) best = tok;
        snprintf(k->short_name, sizeof k->short_name, "%s", best);
    }
    for (int i = 0; i < g->nkeys; i++) {
        int dup = 0;
        for (int j = 0; j < g->nkeys; j++)
            if (i != j && !strcmp(g->keys[i].short_name, g->keys[j].short_name)) dup = 1;
        if (dup) snprintf(g->keys[i].short_name, sizeof g->keys[i].short_name, "%s", g->keys[i].name);
    }
}

/* The point's folder name: short=value pairs joined by '_', characters outside
 * [A-Za-z0-9._+=-] replaced by '-'; a hash when that would be too long. */
static void point_name(const grid *g, point *p)
{
    char buf[2048];
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < g->nkeys && n < sizeof buf; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s=%s", i ? "_" : "",
                              g->keys[i].short_name, p->vals[i]);
    for (char *c = buf; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              strchr("._+=-", *c)))
            *c = '-';
    if (n == 0) snprintf(buf, sizeof buf, "default");
    if (strlen(buf) < 180) {
        snprintf(p->name, sizeof p->name, "%s", buf);
        return;
    }
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
    for (const char *c = buf; *c; c++) h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
    snprintf(p->name, sizeof p->name, "point-%016llx", (unsigned long long)h);
}

static int name_taken(const grid *g, const char *name)
{
    for (int i = 0; i < g->npoints; i++)
        if (!strcmp(g->points[i].name, name)) return 1;
    return 0;
}

/* A uniform double in [0, 1) with 53 random bits: draw (point, key, attempt). */
static double unit53(uint64_t rkey, uint64_t pt, uint64_t k, uint64_t attempt)
{
    tfc_u32x4 r = tfc_philox(rkey, k, pt | (attempt << 40));
    uint64_t x = ((uint64_t)r.v[0] << 21) ^ r.v[1];
    return (double)(x & ((1ull << 53) - 1)) / 9007199254740992.0;
}

static char *format_draw(const key *k, double u)
{
    char buf[64];
    if (k->log) {
        double v = exp(log(k->lo) + u * (log(k->hi) - log(k->lo)));
        if (k->integer) snprintf(buf, sizeof buf, "%lld", (long long)llround(v));
        else snprintf(buf, sizeof buf, "%.4g", v);
    } else if (k->integer) {
        double span = k->hi - k->lo + 1;
        long long v = (long long)k->lo + (long long)floor(u * span);
        if (v > (long long)k->hi) v = (long long)k->hi;
        snprintf(buf, sizeof buf, "%lld", v);
    } else {
        snprintf(buf, sizeof buf, "%.4g", k->lo + u * (k->hi - k->lo));
    }
    return xstrdup(buf);
}

/* The points: the cartesian product (the last key varies fastest), or `nrandom` seeded
 * draws (a draw that repeats an earlier point is drawn again, up to 100 times). */
static const char *expand(grid *g, long nrandom, uint64_t seed)
{
    long total = 1;
    if (nrandom > 0) {
        total = nrandom;
    } else {
        for (int i = 0; i < g->nkeys; i++) {
            total *= g->keys[i].nvalues;
            if (total > MAX_POINTS) return "the grid has more than 100000 points";
        }
    }
    g->points = xcalloc((size_t)total, sizeof *g->points);
    uint64_t rkey = tfc_rng_key(seed, 0x67726964); /* "grid" */
    for (long pi = 0; pi < total; pi++) {
        point *p = &g->points[g->npoints];
        p->vals = xcalloc((size_t)g->nkeys, sizeof *p->vals);
        p->slot = -1;
        int placed = 0;
        for (uint64_t attempt = 0; attempt < (nrandom > 0 ? 100u : 1u) && !placed; attempt++) {
            long rem = pi;
            for (int i = g->nkeys - 1; i >= 0; i--) {
                key *k = &g->keys[i];
                free(p->vals[i]);
                if (nrandom > 0) {
                    double u = unit53(rkey, (uint64_t)pi, (uint64_t)i, attempt);
                    p->vals[i] = k->is_range ? format_draw(k, u)
                                             : xstrdup(k->values[(int)(u * k->nvalues) % k->nvalues]);
                } else {
                    p->vals[i] = xstrdup(k->values[rem % k->nvalues]);
                    rem /= k->nvalues;
                }
            }
            point_name(g, p);
            placed = !name_taken(g, p->name);
        }
        if (!placed) {
            for (int i = 0; i < g->nkeys; i++) free(p->vals[i]);
            free(p->vals);
            memset(p, 0, sizeof *p);
            if (nrandom > 0) continue;
            return "two points of the grid have the same folder name (a value is repeated?)";
        }
        g->npoints++;
    }
    return NULL;
}

/* --set strings of a point: the common ones, then KEY=VALUE per key. malloc'd array. */
static char **point_sets(const grid *g, const point *p, int *n)
{
    char **s = xcalloc((size_t)(g->nsets + g->nkeys + 1), sizeof *s);
    int k = 0;
    for (int i = 0; i < g->nsets; i++) s[k++] = xstrdup(g->sets[i]);
    for (int i = 0; i < g->nkeys; i++) {
        size_t len = strlen(g->keys[i].name) + strlen(p->vals[i]) + 2;
        s[k] = xcalloc(len, 1);
        snprintf(s[k++], len, "%s=%s", g->keys[i].name, p->vals[i]);
    }
    *n = k;
    return s;
}

static void free_sets(char **s, int n)
{
    for (int i = 0; i < n; i++) free(s[i]);
    free(s);
}

/* ---- summary.json ------------------------------------------------------------------------ */

/* Reads DIR/summary.json into the point; returns 0 when absent or unreadable. Learns the
 * metric's name from "best" the first time one is seen. */
static int read_summary(grid *g, point *p)
{
    char path[4600];
    snprintf(path, sizeof path, "%s/summary.json", p->dir);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!json_is_object(root)) {
        json_decref(root);
        return 0;
    }
    const char *st = json_string_value(json_object_get(root, "status"));
    snprintf(p->status, sizeof p->status, "%s", st ? st : "unknown");
    const char *h = json_string_value(json_object_get(root, "config_hash"));
    snprintf(p->run_hash, sizeof p->run_hash, "%s", h ? h : "");
    json_t *best = json_object_get(root, "best");
    const char *metric = json_string_value(json_object_get(best, "metric"));
    if (metric && !g->metric[0]) {
        snprintf(g->metric, sizeof g->metric, "%s", metric);
        g->lower_is_better = !strcmp(metric, "loss");
    }
    p->have_best = 0;
    if (metric && !strcmp(metric, g->metric) && json_is_number(json_object_get(best, "value"))) {
        p->have_best = 1;
        p->best_value = json_number_value(json_object_get(best, "value"));
        p->best_iter = (long long)json_integer_value(json_object_get(best, "iteration"));
    }
    json_t *test = json_object_get(json_object_get(root, "final"), "test");
    json_t *fv = json_object_get(test, g->metric[0] ? g->metric : "loss");
    p->have_final = json_is_number(fv);
    p->final_value = p->have_final ? json_number_value(fv) : 0;
    p->wall = json_number_value(json_object_get(root, "wall_seconds"));
    p->iterations = (long long)json_integer_value(json_object_get(root, "iterations"));
    json_decref(root);
    return 1;
}

/* ---- running ----------------------------------------------------------------------------- */

/* tfc-train beside this program (/proc/self/exe, else argv[0]'s folder), else from PATH. */
static void find_trainer(const char *argv0, char *out, size_t size)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = 0;
            snprintf(out, size, "%s/tfc-train", self);
            if (access(out, X_OK) == 0) return;
        }
    }
    const char *slash = strrchr(argv0, '/');
    if (slash) {
        snprintf(out, size, "%.*s/tfc-train", (int)(slash - argv0), argv0);
        if (access(out, X_OK) == 0) return;
    }
    snprintf(out, size, "tfc-train");
}

typedef struct runner {
    const char *trainer;
    const char *device_list;
    int threads;        /* per job */
    int jobs;
} runner;

/* The device of job slot `slot`: the slot-th entry of the comma list, cyclically. */
static void slot_device(const runner *r, int slot, char *out, size_t size)
{
    out[0] = 0;
    if (!r->device_list) return;
    int n = 1;
    for (const char *c = r->device_list; *c; c++) n += *c == ',';
    int want = slot % n, i = 0;
    const char *start = r->device_list;
    for (const char *c = r->device_list;; c++) {
        if (*c == ',' || !*c) {
            if (i == want) {
                snprintf(out, size, "%.*s", (int)(c - start), start);
                return;
            }
            i++;
            start = c + 1;
        }
        if (!*c) return;
    }
}

/* Starts tfc-train for the point (resuming from `state` when not empty; pausing after
 * iteration `stop_at` when > 0); output is appended to DIR/<point>/train.log. Returns the
 * pid, or -1. */
static pid_t launch(const grid *g, const runner *r, point *p, const char *state, int slot,
                    int64_t stop_at)
{
    int nsets;
    char **sets = point_sets(g, p, &nsets);
    const char **argv = xcalloc((size_t)(2 * nsets + 16), sizeof *argv);
    char threads[32], device[256], log[4600];
    int n = 0;
    argv[n++] = r->trainer;
    argv[n++] = g->solver;
    for (int i = 0; i < nsets; i++) {
        argv[n++] = "--set";
        argv[n++] = sets[i];
    }
    argv[n++] = "--out";
    argv[n++] = p->dir;
    snprintf(threads, sizeof threads, "%d", r->threads);
    argv[n++] = "--threads";
    argv[n++] = threads;
    slot_device(r, slot, device, sizeof device);
    if (device[0]) {
        argv[n++] = "--device";
        argv[n++] = device;
    }
    char stop[32];
    if (stop_at > 0) {
        snprintf(stop, sizeof stop, "%lld", (long long)stop_at);
        argv[n++] = "--stop-at";
        argv[n++] = stop;
    }
    if (state[0]) {
        argv[n++] = "--resume";
        argv[n++] = state;
    } else {
        argv[n++] = "--overwrite"; /* a point killed before its first snapshot starts over */
    }
    argv[n] = NULL;
    snprintf(log, sizeof log, "%s/train.log", p->dir);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        setenv("OMP_NUM_THREADS", threads, 1);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        if (strchr(r->trainer, '/')) execv(r->trainer, (char *const *)argv);
        else execvp(r->trainer, (char *const *)argv);
        fprintf(stderr, "tfc-grid: cannot run %s: %s\n", r->trainer, strerror(errno));
        _exit(127);
    }
    free(argv);
    free_sets(sets, nsets);
    return pid;
}

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&t, NULL);
}

/* Runs the pending points, r->jobs at a time; on SIGINT/SIGTERM passes SIGTERM to the
 * running children (they snapshot) and waits for them. */
static void run_all(grid *g, const runner *r)
{
    int *pending = xcalloc((size_t)g->npoints, sizeof *pending);
    int npending = 0, running = 0, next = 0, forwarded = 0;
    int *slots = xcalloc((size_t)r->jobs, sizeof *slots);
    int *fresh = xcalloc((size_t)g->npoints, sizeof *fresh);
    for (int i = 0; i < g->npoints; i++) {
        point *p = &g->points[i];
        if (read_summary(g, p)) {
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
    while ((next < npending && !stop_signal) || running > 0) {
        while (next < npending && running < r->jobs && !stop_signal) {
            point *p = &g->points[pending[next++]];
            int slot = 0;
            while (slots[slot]) slot++;
            char state[4600];
            tfc_error err;
            tfc_error_clear(&err);
            state[0] = '\0';
            if (tfc_mkdir_p(p->dir, &err) ||
                (!fresh[p - g->points] &&
                 tfc_snapshot_find_newest(p->dir, state, sizeof state, &err))) {
                fprintf(stderr, "tfc-grid: %s", err.text);
                snprintf(p->status, sizeof p->status, "failed");
                continue;
            }
            p->pid = launch(g, r, p, state, slot, 0);
            if (p->pid < 0) {
                fprintf(stderr, "tfc-grid: fork: %s\n", strerror(errno));
                snprintf(p->status, sizeof p->status, "failed");
                continue;
            }
            p->slot = slot;
            slots[slot] = 1;
            p->ran = 1;
            p->resumed = state[0] != 0;
            running++;
            printf("%s %s%s%s\n", state[0] ? "resume" : "start ", p->name,
                   state[0] ? " from " : "", state[0] ? state : "");
            fflush(stdout);
        }
        if (stop_signal && !forwarded) {
            for (int i = 0; i < g->npoints; i++)
                if (g->points[i].slot >= 0) kill(g->points[i].pid, SIGTERM);
            forwarded = 1;
        }
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0) {
            sleep_ms(50);
            continue;
        }
        for (int i = 0; i < g->npoints; i++) {
            point *p = &g->points[i];
            if (p->slot < 0 || p->pid != pid) continue;
            slots[p->slot] = 0;
            p->slot = -1;
            running--;
            int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            if (!read_summary(g, p) || (code != 0 && !strcmp(p->status, "completed")))
                snprintf(p->status, sizeof p->status, "%s",
                         code == 130 || code == 143 ? "interrupted" : "failed");
            printf("%-6s %s (exit %d)\n", "done", p->name, code);
            fflush(stdout);
        }
    }
    free(pending);
    free(fresh);
    free(slots);
}

/* ---- asha ---------------------------------------------------------------------------------- */

/* The value of `metric` in the point's summary.json final test (NAN when absent). */
static double summary_metric(const point *p, const char *metric)
{
    char path[4600];
    snprintf(path, sizeof path, "%s/summary.json", p->dir);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    json_t *v = json_object_get(json_object_get(json_object_get(root, "final"), "test"), metric);
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    json_decref(root);
    return x;
}

static int point_index(const grid *g, const char *name)
{
    for (int i = 0; i < g->npoints; i++)
        if (!strcmp(g->points[i].name, name)) return i;
    return -1;
}

/* The scheduler a sweep runs under: ASHA or median pruning behind one set of calls, their
 * rungs (asha) or evaluation steps (median) as `stage_iter[0..last]`, the last max_iter. */
typedef struct scheduler {
    const char *name;          /* "asha" or "median": the log's name, DIR/<name>.csv */
    tfc_asha asha;
    tfc_pruner pruner;
    tfc_hyperband hb;
    int last;                  /* the index of the final stage (max_iter) */
    const int64_t *stage_iter;
    unsigned char *busy;
    char header[1024];         /* the log's first line: the settings */
} scheduler;

static int sched_next(scheduler *s, int *t, int *k)
{
    if (s->hb.ntrials) return tfc_hyperband_next(&s->hb, t, k);
    return s->pruner.ntrials ? tfc_pruner_next(&s->pruner, t, k) : tfc_asha_next(&s->asha, t, k);
}

static void sched_report(scheduler *s, int t, int k, double v)
{
    if (s->hb.ntrials) tfc_hyperband_report(&s->hb, t, k, v);
    else if (s->pruner.ntrials) tfc_pruner_report(&s->pruner, t, k, v);
    else tfc_asha_report(&s->asha, t, k, v);
}

static void sched_replay_job(scheduler *s, int t, int k)
{
    if (s->hb.ntrials) tfc_hyperband_replay_job(&s->hb, t, k);
    else if (s->pruner.ntrials) tfc_pruner_replay_job(&s->pruner, t, k);
    else tfc_asha_replay_job(&s->asha, t, k);
}

/* A trial that cannot go on (early stopping ended it below max_iter): never given a job
 * again. */
static void sched_finish(scheduler *s, int t, int k)
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

/* Why a trial ended where it did, for results.csv. */
static void sched_reason(const scheduler *s, const point *p, int t, char *out, size_t size)
{
    if (!strcmp(p->status, "completed")) snprintf(out, size, "reached max_iter");
    else if (strcmp(p->status, "paused")) snprintf(out, size, "%s", p->status[0] ? p->status : "not started");
    else if (s->hb.ntrials && s->hb.bracket[t] < 0)
        snprintf(out, size, "in no bracket (more points than the brackets take)");
    else if (s->hb.ntrials)
        snprintf(out, size, "not in the top 1/%ld of stage %d in bracket %d", args.eta,
                 p->top_rung, s->hb.bracket[t]);
    else if (s->pruner.ntrials && s->pruner.done[t] == 2)
        snprintf(out, size, "pruned at step %d: below the median", p->top_rung);
    else if (!s->pruner.ntrials)
        snprintf(out, size, "not in the top 1/%ld of rung %d", args.eta, p->top_rung);
    else
        snprintf(out, size, "unfinished");
}

static void sched_free(scheduler *s)
{
    tfc_asha_free(&s->asha);
    tfc_pruner_free(&s->pruner);
    tfc_hyperband_free(&s->hb);
}

/* DIR/<scheduler>.csv: the header naming the settings, then one line per decision —
 * `job,POINT,STAGE` when a point is given a job and `result,POINT,STAGE,VALUE` when it
 * reports — so a re-run replays the same decisions. A log of other settings is refused.
 * Returns the open log (append), or NULL with a message. */
static FILE *sched_log_open(const grid *g, scheduler *s, const char *dir, int *owed)
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
static void print_stages(const char *what, const scheduler *s)
{
    printf("%s", what);
    for (int k = 0; k <= s->last; k++)
        printf("%s %lld", k == s->last ? " and" : k ? "," : "", (long long)s->stage_iter[k]);
}

/* Sets up --scheduler asha|hyperband|median for the points: 0, or 2 on bad usage. */
static int sched_init(grid *g, scheduler *s, const char *metric, int higher)
{
    memset(s, 0, sizeof *s);
    int64_t max_iter = g->points[0].max_iter;
    tfc_error err;
    tfc_error_clear(&err);
    int used = 0;
    int64_t min_iter = args.min_iter; /* asha, hyperband: max_iter / eta^3 by default */
    if (!min_iter) {
        double m = (double)max_iter;
        for (int k = 0; k < 3; k++) m /= (double)args.eta;
        min_iter = m < 1 ? 1 : (int64_t)m;
    }
    if (!strcmp(args.scheduler, "asha")) {
        s->name = "asha";
        if (tfc_asha_init(&s->asha, g->npoints, min_iter, max_iter, (double)args.eta, higher,
                          &err)) {
            fprintf(stderr, "tfc-grid: %s", err.text);
            return 2;
        }
        s->last = s->asha.nrungs;
        s->stage_iter = s->asha.rung_iter;
        s->busy = s->asha.busy;
        used = snprintf(s->header, sizeof s->header, "# asha points=%d rungs=", g->npoints);
        print_stages("asha: rungs at", s);
        printf(" iterations; the best 1/%ld of a rung goes on, by test %s (%s)\n", args.eta,
               metric, higher ? "max" : "min");
    } else if (!strcmp(args.scheduler, "hyperband")) {
        s->name = "hyperband";
        if (tfc_hyperband_init(&s->hb, g->npoints, min_iter, max_iter, (double)args.eta, higher,
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
                            (int)args.warmup, (int)args.startup, higher, &err)) {
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
               (long long)g->points[0].test_interval, (long long)max_iter, args.startup,
               args.warmup, metric);
    }
    for (int k = 0; k <= s->last && used < (int)sizeof s->header - 64; k++)
        used += snprintf(s->header + used, sizeof s->header - (size_t)used, "%s%lld",
                         k ? ":" : "", (long long)s->stage_iter[k]);
    if (s->pruner.ntrials)
        snprintf(s->header + used, sizeof s->header - (size_t)used,
                 " warmup=%ld startup=%ld metric=%s mode=%s", args.warmup, args.startup, metric,
                 higher ? "max" : "min");
    else if (s->hb.ntrials)
        snprintf(s->header + used, sizeof s->header - (size_t)used, " eta=%ld metric=%s mode=%s",
                 args.eta, metric, higher ? "max" : "min");
    else
        snprintf(s->header + used, sizeof s->header - (size_t)used, " eta=%ld metric=%s mode=%s",
                 args.eta, metric, higher ? "max" : "min");
    return 0;
}

/* Points trained in stages under the scheduler: jobs from it, each a tfc-train to its stage
 * (--stop-at below max_iter), resumed from the point's newest snapshot when it goes on; the
 * metric of the test there (summary.json) reported back. Returns 0, or 2 on bad usage. */
static int run_scheduled(grid *g, const runner *r, const char *dir, scheduler *s)
{
    const char *metric = args.metric ? args.metric : g->metric;
    if (!strncmp(metric, "test/", 5)) metric += 5;
    if (args.mode && strcmp(args.mode, "max") && strcmp(args.mode, "min"))
        return cli_error(&tool, "--mode %s: expected max or min", args.mode);
    int higher = args.mode ? !strcmp(args.mode, "max") : strcmp(metric, "loss") != 0;
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
    int rc = sched_init(g, s, metric, higher);
    if (rc) return rc;
    int *owed = xcalloc((size_t)g->npoints, sizeof *owed);
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
    int *slots = xcalloc((size_t)r->jobs, sizeof *slots);
    int running = 0, forwarded = 0;
    tfc_error err;
    for (;;) {
        while (running < r->jobs && !stop_signal) {
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
            point *p = &g->points[t];
            int slot = 0;
            while (slots[slot]) slot++;
            char state[4600] = "";
            tfc_error_clear(&err);
            int fresh = k == 0 && owed[t] < 0;
            owed[t] = -1;
            if (tfc_mkdir_p(p->dir, &err) ||
                (!fresh && tfc_snapshot_find_newest(p->dir, state, sizeof state, &err))) {
                fprintf(stderr, "tfc-grid: %s", err.text);
                snprintf(p->status, sizeof p->status, "failed");
                sched_report(s, t, k, NAN);
                continue;
            }
            int64_t until = k < s->last ? s->stage_iter[k] : 0;
            p->pid = launch(g, r, p, state, slot, until);
            if (p->pid < 0) {
                fprintf(stderr, "tfc-grid: fork: %s\n", strerror(errno));
                snprintf(p->status, sizeof p->status, "failed");
                sched_report(s, t, k, NAN);
                continue;
            }
            p->slot = slot;
            p->target = k;
            slots[slot] = 1;
            p->ran = 1;
            running++;
            printf("%s %s to %lld%s\n", k == 0 && !state[0] ? "start " : k ? "promote" : "resume",
                   p->name, (long long)s->stage_iter[k], k == s->last ? " (the end)" : "");
            fflush(stdout);
        }
        if (running == 0) break;
        if (stop_signal && !forwarded) {
            for (int i = 0; i < g->npoints; i++)
                if (g->points[i].slot >= 0) kill(g->points[i].pid, SIGTERM);
            forwarded = 1;
        }
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0) {
            sleep_ms(50);
            continue;
        }
        for (int i = 0; i < g->npoints; i++) {
            point *p = &g->points[i];
            if (p->slot < 0 || p->pid != pid) continue;
            slots[p->slot] = 0;
            p->slot = -1;
            running--;
            int k = p->target;
            p->target = -1;
            int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            int read = read_summary(g, p);
            int reached = read && code == 0 &&
                          (!strcmp(p->status, "paused") || !strcmp(p->status, "completed") ||
                           !strcmp(p->status, "stopped_early"));
            if (reached) {
                double v = summary_metric(p, metric);
                sched_report(s, i, k, v);
                if (k > p->top_rung) p->top_rung = k;
                if (!strcmp(p->status, "stopped_early")) sched_finish(s, i, k);
                fprintf(log, "result,%s,%d,%.17g\n", p->name, k, v);
                fflush(log);
                printf("%-7s %s at %lld: %s %.6g\n", "stage", p->name, (long long)p->iterations,
                       metric, v);
            } else if (stop_signal && (code == 130 || code == 143)) {
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
    }
    fclose(log);
    /* the cost: iterations trained against every point run to max_iter */
    long long spent = 0;
    for (int i = 0; i < g->npoints; i++) {
        read_summary(g, &g->points[i]);
        spent += g->points[i].iterations;
    }
    long long full = (long long)g->npoints * (long long)g->points[0].max_iter;
    printf("%s: %lld iterations trained, %.1f%% of the %lld the full sweep would train\n", s->name,
           spent, full ? 100.0 * (double)spent / (double)full : 0.0, full);
    free(slots);
    free(owed);
    return 0;
}

/* ---- results ----------------------------------------------------------------------------- */

static const grid *sort_grid;

static int by_metric(const void *a, const void *b)
{
    const point *p = *(point *const *)a, *q = *(point *const *)b;
    if (p->have_best != q->have_best) return q->have_best - p->have_best;
    if (p->have_best && p->best_value != q->best_value) {
        int lt = p->best_value < q->best_value;
        return sort_grid->lower_is_better ? (lt ? -1 : 1) : (lt ? 1 : -1);
    }
    return p < q ? -1 : p > q;
}

/* A CSV field: quoted when it holds a comma, quote or newline. */
static void csv_field(FILE *f, const char *s, int last)
{
    if (strpbrk(s, ",\"\n")) {
        fputc('"', f);
        for (; *s; s++) {
            if (*s == '"') fputc('"', f);
            fputc(*s, f);
        }
        fputc('"', f);
    } else {
        fputs(s, f);
    }
    fputc(last ? '\n' : ',', f);
}

#define NFIXED 7

/* The row's cells (strings into `cells`, each of `width` bytes). */
static void row_cells(const grid *g, const point *p, char (*cells)[4600])
{
    int c = 0;
    for (int i = 0; i < g->nkeys; i++) snprintf(cells[c++], 4600, "%s", p->vals[i]);
    if (p->have_final) snprintf(cells[c++], 4600, "%.6g", p->final_value);
    else cells[c++][0] = 0;
    if (p->have_best) {
        snprintf(cells[c++], 4600, "%.6g", p->best_value);
        snprintf(cells[c++], 4600, "%lld", p->best_iter);
    } else {
        cells[c++][0] = 0;
        cells[c++][0] = 0;
    }
    snprintf(cells[c++], 4600, "%lld", p->iterations);
    snprintf(cells[c++], 4600, "%.1f", p->wall);
    snprintf(cells[c++], 4600, "%s", p->status[0] ? p->status : "pending");
    if (g->sched) { /* where the scheduler left it, and why */
        snprintf(cells[c++], 4600, "%lld", p->iterations);
        sched_reason(g->sched, p, (int)(p - g->points), cells[c++], 4600);
    }
    snprintf(cells[c++], 4600, "%s", p->dir);
}

/* Writes DIR/results.csv (atomically) and prints the same table aligned. */
static int write_results(grid *g, const char *dir)
{
    point **order = xcalloc((size_t)g->npoints, sizeof *order);
    for (int i = 0; i < g->npoints; i++) {
        read_summary(g, &g->points[i]);
        order[i] = &g->points[i];
    }
    for (int i = 0; i < g->npoints; i++) read_summary(g, &g->points[i]); /* metric now known */
    sort_grid = g;
    qsort(order, (size_t)g->npoints, sizeof *order, by_metric);
    const char *m = g->metric[0] ? g->metric : "loss";
    int ncols = g->nkeys + NFIXED + (g->sched ? 2 : 0);
    char (*head)[4600] = xcalloc((size_t)ncols, sizeof *head);
    for (int i = 0; i < g->nkeys; i++) snprintf(head[i], 4600, "%s", g->keys[i].name);
    snprintf(head[g->nkeys], 4600, "test_%s", m);
    snprintf(head[g->nkeys + 1], 4600, "best_%s", m);
    snprintf(head[g->nkeys + 2], 4600, "best_iter");
    snprintf(head[g->nkeys + 3], 4600, "iterations");
    snprintf(head[g->nkeys + 4], 4600, "wall_seconds");
    snprintf(head[g->nkeys + 5], 4600, "status");
    int last = g->nkeys + 6;
    if (g->sched) {
        snprintf(head[last++], 4600, "stop_iter");
        snprintf(head[last++], 4600, "reason");
    }
    snprintf(head[last], 4600, "run_dir");

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return 0;
    char (*cells)[4600] = xcalloc((size_t)ncols, sizeof *cells);
    int *width = xcalloc((size_t)ncols, sizeof *width);
    for (int c = 0; c < ncols; c++) {
        csv_field(f, head[c], c == ncols - 1);
        width[c] = (int)strlen(head[c]);
    }
    for (int i = 0; i < g->npoints; i++) {
        row_cells(g, order[i], cells);
        for (int c = 0; c < ncols; c++) {
            csv_field(f, cells[c], c == ncols - 1);
            if ((int)strlen(cells[c]) > width[c]) width[c] = (int)strlen(cells[c]);
        }
    }
    fclose(f);
    char path[4200];
    snprintf(path, sizeof path, "%s/results.csv", dir);
    const void *chunks[1] = {text};
    tfc_error err;
    tfc_error_clear(&err);
    int ok = tfc_file_write_atomic(path, chunks, &len, 1, &err) == TFC_OK;
    if (!ok) fprintf(stderr, "tfc-grid: %s", err.text);
    free(text);

    printf("\n");
    for (int c = 0; c < ncols; c++)
        printf("%-*s%s", c == ncols - 1 ? 0 : width[c], head[c], c == ncols - 1 ? "\n" : "  ");
    for (int i = 0; i < g->npoints; i++) {
        row_cells(g, order[i], cells);
        for (int c = 0; c < ncols; c++)
            printf("%-*s%s", c == ncols - 1 ? 0 : width[c], cells[c], c == ncols - 1 ? "\n" : "  ");
    }
    if (ok) printf("results: %s\n", path);
    free(cells);
    free(width);
    free(head);
    free(order);
    return ok;
}

/* ---- report.html ---------------------------------------------------------------------------- */

/* Splits one CSV line (results.csv's quoting: fields with , " or newline quoted, "" inside)
 * into at most `max` fields written into `buf`; returns the count. */
static int csv_split(const char *line, char **fields, int max, char *buf, size_t size)
{
    int n = 0;
    size_t o = 0;
    const char *c = line;
    while (n < max && o < size) {
        fields[n++] = buf + o;
        int quoted = *c == '"';
        if (quoted) c++;
        for (; *c && o + 1 < size; c++) {
            if (quoted && *c == '"' && c[1] == '"') buf[o++] = *c++;
            else if (quoted && *c == '"') quoted = 0;
            else if (!quoted && (*c == ',' || *c == '\n')) break;
            else buf[o++] = *c;
        }
        buf[o++] = 0;
        if (*c != ',') break;
        c++;
    }
    return n;
}

/* Text into HTML (&, <, >, " escaped). */
static void html_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '&') fputs("&amp;", f);
        else if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

typedef struct curve {
    char name[256];
    double *x, *y;
    int n;
    double mark_x[TFC_ASHA_MAX_RUNGS + 1]; /* asha: where it was paused (rungs it reported) */
    int nmarks;
} curve;

/* The test rows of RUN/log.csv: (iteration, `metric`). */
static void read_curve(const char *run_dir, const char *metric, curve *c)
{
    char path[4600], line[4096];
    snprintf(path, sizeof path, "%s/log.csv", run_dir);
    FILE *f = fopen(path, "r");
    if (!f) return;
    int col = -1, cap = 0;
    char *fields[64], buf[4096];
    if (fgets(line, sizeof line, f)) {
        int n = csv_split(line, fields, 64, buf, sizeof buf);
        for (int i = 0; i < n; i++)
            if (!strcmp(fields[i], metric)) col = i;
    }
    while (col >= 0 && fgets(line, sizeof line, f)) {
        int n = csv_split(line, fields, 64, buf, sizeof buf);
        if (n <= col || strcmp(fields[1], "test")) continue;
        if (c->n == cap) {
            cap = cap ? 2 * cap : 16;
            c->x = realloc(c->x, (size_t)cap * sizeof *c->x);
            c->y = realloc(c->y, (size_t)cap * sizeof *c->y);
            if (!c->x || !c->y) break;
        }
        c->x[c->n] = atof(fields[0]);
        c->y[c->n++] = atof(fields[col]);
    }
    fclose(f);
}

/* DIR/report.html: one static file (no server, no external script, style or font): the
 * results table of DIR/results.csv, sortable by clicking a column, and an SVG of every trial's
 * test metric against iterations from its log.csv, with the rungs where successive halving
 * paused it (DIR/asha.csv) marked. Returns 1 on success. */
static int write_report(const char *dir)
{
    char path[4200], line[16384], buf[16384];
    snprintf(path, sizeof path, "%s/results.csv", dir);
    FILE *in = fopen(path, "r");
    if (!in) {
        fprintf(stderr, "tfc-grid: %s: %s (not a sweep's folder?)\n", path, strerror(errno));
        return 0;
    }
    char *head[64], hbuf[4096];
    int ncols = fgets(line, sizeof line, in) ? csv_split(line, head, 64, hbuf, sizeof hbuf) : 0;
    int run_col = -1, metric_col = -1;
    for (int i = 0; i < ncols; i++) {
        if (!strcmp(head[i], "run_dir")) run_col = i;
        if (!strncmp(head[i], "test_", 5) && metric_col < 0) metric_col = i;
    }
    const char *metric = metric_col >= 0 ? head[metric_col] + 5 : "loss";
    char **rows = NULL;
    int nrows = 0;
    while (fgets(line, sizeof line, in)) {
        rows = realloc(rows, (size_t)(nrows + 1) * sizeof *rows);
        if (!rows) break;
        rows[nrows++] = xstrdup(line);
    }
    fclose(in);
    curve *cv = xcalloc((size_t)(nrows ? nrows : 1), sizeof *cv);
    double xmax = 1, ymin = INFINITY, ymax = -INFINITY;
    for (int r = 0; r < nrows; r++) {
        char *fields[64];
        int n = csv_split(rows[r], fields, 64, buf, sizeof buf);
        if (run_col < 0 || n <= run_col) continue;
        const char *base = strrchr(fields[run_col], '/');
        snprintf(cv[r].name, sizeof cv[r].name, "%s", base ? base + 1 : fields[run_col]);
        read_curve(fields[run_col], metric, &cv[r]);
        for (int i = 0; i < cv[r].n; i++) {
            if (cv[r].x[i] > xmax) xmax = cv[r].x[i];
            if (cv[r].y[i] < ymin) ymin = cv[r].y[i];
            if (cv[r].y[i] > ymax) ymax = cv[r].y[i];
        }
    }
    /* the scheduler's pauses: result lines, at the stage's iteration (the header lists them) */
    snprintf(path, sizeof path, "%s/asha.csv", dir);
    FILE *log = fopen(path, "r");
    for (int i = 0; !log && i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s.csv", dir, i ? "hyperband" : "median");
        log = fopen(path, "r");
    }
    double rung_iter[TFC_ASHA_MAX_RUNGS + 1];
    int nr = 0;
    while (log && fgets(line, sizeof line, log)) {
        const char *rg = strstr(line, " rungs=");
        if (!rg) rg = strstr(line, " steps=");
        if (!rg) rg = strstr(line, " stages="), rg = rg ? rg + 1 : NULL; /* one longer */
        if (line[0] == '#' && rg) {
            for (const char *c = rg + 7; *c && *c != ' ' && nr <= TFC_ASHA_MAX_RUNGS;) {
                rung_iter[nr++] = atof(c);
                c += strcspn(c, ": ");
                if (*c == ':') c++;
            }
            continue;
        }
        char name[256];
        int k;
        double v;
        if (sscanf(line, "result,%255[^,],%d,%lf", name, &k, &v) != 3 || k < 0 || k >= nr)
            continue;
        for (int r = 0; r < nrows; r++) {
            curve *c = &cv[r];
            if (strcmp(c->name, name) || c->nmarks > TFC_ASHA_MAX_RUNGS) continue;
            c->mark_x[c->nmarks++] = rung_iter[k];
            int have = 0; /* the rung's test, when log.csv has no row there (a pause logs none) */
            for (int i = 0; i < c->n; i++) have |= c->x[i] == rung_iter[k];
            if (have || !isfinite(v)) continue;
            double *x = realloc(c->x, (size_t)(c->n + 1) * sizeof *x);
            double *y = x ? realloc(c->y, (size_t)(c->n + 1) * sizeof *y) : NULL;
            if (x) c->x = x;
            if (!y) continue;
            c->y = y;
            int at = c->n++;
            while (at > 0 && c->x[at - 1] > rung_iter[k]) { /* kept in iteration order */
                c->x[at] = c->x[at - 1];
                c->y[at] = c->y[at - 1];
                at--;
            }
            c->x[at] = rung_iter[k];
            c->y[at] = v;
            if (rung_iter[k] > xmax) xmax = rung_iter[k];
            if (v < ymin) ymin = v;
            if (v > ymax) ymax = v;
        }
    }
    if (log) fclose(log);
    if (!(ymax > ymin)) {
        ymin = isfinite(ymin) ? ymin - 0.5 : 0;
        ymax = ymin + 1;
    }

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return 0;
    fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>tfc-grid: ", f);
    html_text(f, dir);
    fputs("</title>\n<style>body{font-family:sans-serif;margin:1em}table{border-collapse:"
          "collapse;font-size:13px}th,td{border:1px solid #ccc;padding:2px 6px}th{cursor:"
          "pointer;background:#eee}svg{border:1px solid #ccc}polyline{fill:none;stroke-width:"
          "1.5}polyline:hover{stroke-width:4}</style></head><body>\n<h1>", f);
    html_text(f, dir);
    const double W = 760, H = 380, L = 60, B = 40, T = 10, R = 10;
    fprintf(f, "</h1>\n<h2>test %s against iterations</h2>\n<svg id=\"curves\" width=\"%g\" "
               "height=\"%g\" viewBox=\"0 0 %g %g\">\n", metric, W, H, W, H);
    fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#000\"/>"
               "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#000\"/>\n",
            L, H - B, W - R, H - B, L, T, L, H - B);
    fprintf(f, "<text x=\"%g\" y=\"%g\" font-size=\"12\">0</text><text x=\"%g\" y=\"%g\" "
               "font-size=\"12\" text-anchor=\"end\">%.0f</text>\n",
            L, H - B + 15, W - R, H - B + 15, xmax);
    fprintf(f, "<text x=\"%g\" y=\"%g\" font-size=\"12\" text-anchor=\"end\">%.4g</text><text "
               "x=\"%g\" y=\"%g\" font-size=\"12\" text-anchor=\"end\">%.4g</text>\n",
            L - 4, H - B, ymin, L - 4, T + 10, ymax);
    for (int r = 0; r < nrows; r++) {
        if (!cv[r].n) continue;
        double hue = 360.0 * r / (nrows ? nrows : 1);
        fprintf(f, "<polyline stroke=\"hsl(%.0f,70%%,45%%)\" points=\"", hue);
        for (int i = 0; i < cv[r].n; i++)
            fprintf(f, "%s%.1f,%.1f", i ? " " : "", L + (W - L - R) * cv[r].x[i] / xmax,
                    H - B - (H - B - T) * (cv[r].y[i] - ymin) / (ymax - ymin));
        fputs("\"><title>", f);
        html_text(f, cv[r].name);
        fputs("</title></polyline>\n", f);
        for (int m = 0; m < cv[r].nmarks; m++) /* a pause: the curve's point at the rung */
            for (int i = 0; i < cv[r].n; i++)
                if (cv[r].x[i] == cv[r].mark_x[m])
                    fprintf(f, "<circle class=\"rung\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"hsl("
                               "%.0f,70%%,45%%)\"/>\n",
                            L + (W - L - R) * cv[r].x[i] / xmax,
                            H - B - (H - B - T) * (cv[r].y[i] - ymin) / (ymax - ymin), hue);
    }
    fputs("</svg>\n<p>Circles: a stage where the scheduler paused the trial (asha.csv, "
          "hyperband.csv or median.csv); hover a curve for its trial.</p>\n", f);
    fprintf(f, "<h2>%d trials</h2>\n<p>Click a column to sort.</p>\n<table id=\"results\">"
               "<thead><tr>", nrows);
    for (int i = 0; i < ncols; i++) {
        fputs("<th>", f);
        html_text(f, head[i]);
        fputs("</th>", f);
    }
    fputs("</tr></thead><tbody>\n", f);
    for (int r = 0; r < nrows; r++) {
        char *fields[64];
        int n = csv_split(rows[r], fields, 64, buf, sizeof buf);
        fputs("<tr>", f);
        for (int i = 0; i < n; i++) {
            fputs("<td>", f);
            html_text(f, fields[i]);
            fputs("</td>", f);
        }
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
    fputs("<script>\n"
          "document.querySelectorAll('#results th').forEach(function(th, col) {\n"
          "  th.onclick = function() {\n"
          "    var body = document.querySelector('#results tbody');\n"
          "    var rows = Array.prototype.slice.call(body.rows);\n"
          "    var up = th.dataset.up !== '1'; th.dataset.up = up ? '1' : '0';\n"
          "    rows.sort(function(a, b) {\n"
          "      var x = a.cells[col].textContent, y = b.cells[col].textContent;\n"
          "      var nx = parseFloat(x), ny = parseFloat(y);\n"
          "      var d = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);\n"
          "      return up ? d : -d; });\n"
          "    rows.forEach(function(r) { body.appendChild(r); }); }; });\n"
          "</script>\n</body></html>\n", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/report.html", dir);
    const void *chunks[1] = {text};
    tfc_error err;
    tfc_error_clear(&err);
    int ok = tfc_file_write_atomic(path, chunks, &len, 1, &err) == TFC_OK;
    if (!ok) fprintf(stderr, "tfc-grid: %s", err.text);
    else printf("report: %s\n", path);
    free(text);
    for (int r = 0; r < nrows; r++) {
        free(rows[r]);
        free(cv[r].x);
        free(cv[r].y);
    }
    free(rows);
    free(cv);
    return ok;
}

/* ---- main ------------------------------------------------------------------------------- */

/* Loads the solver once per point with its overrides, so a bad key or value stops the
 * sweep (exit 2) before anything runs. */
static int validate(grid *g)
{
    int ok = 1;
    for (int i = 0; i < g->npoints && ok; i++) {
        int nsets;
        char **sets = point_sets(g, &g->points[i], &nsets);
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
                g->lower_is_better = !strcmp(m, "loss");
            }
        }
        tfc_solver_free(s);
        free_sets(sets, nsets);
    }
    return ok;
}

static void grid_free(grid *g)
{
    for (int i = 0; i < g->nkeys; i++) {
        key *k = &g->keys[i];
        for (int v = 0; v < k->nvalues; v++) free(k->values[v]);
        free(k->values);
        free((void *)k->name);
    }
    for (int i = 0; i < g->npoints; i++) {
        for (int k = 0; k < g->nkeys; k++) free(g->points[i].vals[k]);
        free(g->points[i].vals);
    }
    free(g->points);
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
    if (args.report) return write_report(args.report) ? 0 : 1;
    g->solver = args.solver.v[0];
    g->sets = args.sets.v;
    g->nsets = args.sets.n;
    int nranges = 0;
    for (int i = 0; i < g->nkeys; i++) nranges += g->keys[i].is_range;
    if (g->nkeys == 0)
        return cli_error(&tool, "nothing to vary: give --grid or --random with --range");
    if (nranges && !args.random) return cli_error(&tool, "--range needs --random N");
    if (args.scheduler && strcmp(args.scheduler, "asha") && strcmp(args.scheduler, "median") &&
        strcmp(args.scheduler, "hyperband"))
        return cli_error(&tool, "--scheduler %s: expected asha, hyperband or median",
                         args.scheduler);
    g->asha = args.scheduler != NULL;
    if (!g->asha && (args.min_iter || args.metric || args.mode))
        return cli_error(&tool, "--min-iter, --metric and --mode go with --scheduler");

    short_names(g);
    const char *msg = expand(g, args.random, (uint64_t)args.seed);
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
            for (int k = 0; k < g->nkeys; k++) printf("  --set %s=%s", g->keys[k].name, g->points[i].vals[k]);
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
    runner r;
    char trainer[4200];
    find_trainer(argv[0], trainer, sizeof trainer);
    long ncpu = args.threads > 0 ? args.threads : sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1) ncpu = 1;
    r.trainer = trainer;
    r.device_list = args.device;
    r.jobs = (int)args.jobs;
    r.threads = (int)(ncpu / args.jobs > 0 ? ncpu / args.jobs : 1);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    printf("tfc-grid: %d point%s, %d at a time, %d thread%s each, into %s\n", g->npoints,
           g->npoints == 1 ? "" : "s", r.jobs, r.threads, r.threads == 1 ? "" : "s", dir);
    double t0 = tfc_now();
    scheduler sched;
    memset(&sched, 0, sizeof sched);
    if (g->asha) {
        g->sched = &sched;
        int code = run_scheduled(g, &r, dir, &sched);
        if (code) {
            sched_free(&sched);
            return code;
        }
    } else {
        run_all(g, &r);
    }
    int ok = write_results(g, dir);
    if (ok) ok = write_report(dir);
    sched_free(&sched);
    g->sched = NULL;
    int failed = 0, unfinished = 0;
    for (int i = 0; i < g->npoints; i++) {
        const char *st = g->points[i].status;
        if (!strcmp(st, "failed") || !strcmp(st, "diverged")) failed++;
        else if (strcmp(st, "completed") != 0 && !(g->asha && (!strcmp(st, "paused") ||
                                                               !strcmp(st, "stopped_early"))))
            unfinished++;
    }
    printf("tfc-grid: %.1f s; %d failed or diverged, %d unfinished\n", tfc_now() - t0, failed,
           unfinished);
    if (stop_signal) return 128 + (int)stop_signal;
    return failed || unfinished || !ok ? 1 : 0;
}
