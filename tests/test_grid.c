/* tfc-grid end to end ($TFC_BIN/tfc-grid and tfc-train, as `make test` builds them) on a tiny
 * synthetic solver (NumPy files this test writes, a 2-layer Dense model, a few dozen
 * iterations): grid expansion and its order, seeded random sampling within the ranges,
 * results.csv rows sorted by the test metric, skipping completed points on a re-run,
 * resuming after SIGTERM to the sweep and after kill -9 of a child (also with the snapshots
 * moved by snapshot.prefix), exit codes 0/2 (a --report folder that is not a sweep's: 2), and
 * the schedulers (asha, also on a grid too small for its rule to reach max_iter; median;
 * hyperband). */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "data/data.h"
#include "testutil.h"

static char out[1 << 16];


static void fixture(void)
{
    static int done;
    if (done++) return;
    tfc_test_write_split("train_x.npy", "train_y.npy", 512, 11);
    tfc_test_write_split("test_x.npy", "test_y.npy", 200, 12);
    tfc_test_write("tiny.yaml",
                   "model:\n"
                   "  name: tiny\n"
                   "  input: {shape: [16]}\n"
                   "  layers:\n"
                   "    - Dense: {name: hidden, units: 16, activation: relu}\n"
                   "    - Dense: {name: out, units: 4}\n"
                   "  metrics: [accuracy]\n"
                   "data:\n"
                   "  train:\n"
                   "    source: {type: npy, features: train_x.npy, labels: train_y.npy}\n"
                   "    pipeline:\n"
                   "      - shuffle: {buffer_size: 100}\n"
                   "      - repeat: {}\n"
                   "      - batch: {batch_size: 16}\n"
                   "  test:\n"
                   "    source: {type: npy, features: test_x.npy, labels: test_y.npy}\n"
                   "    pipeline:\n"
                   "      - batch: {batch_size: 50}\n"
                   "optimizer: {type: adam, learning_rate: 0.01}\n"
                   "max_iter: 40\n"
                   "test_interval: 20\n"
                   "display: 10\n"
                   "snapshot: {interval: 10, keep: 2}\n"
                   "seed: 7\n",
                   -1);
}

static void tool(char *buf, size_t size, const char *name)
{
    const char *bin = getenv("TFC_BIN");
    char cwd[2048] = "";
    if (!bin) bin = "bin";
    if (bin[0] != '/' && !getcwd(cwd, sizeof cwd)) cwd[0] = 0;
    snprintf(buf, size, "%s%s%s/%s", cwd, cwd[0] ? "/" : "", bin, name);
}

/* Runs tfc-grid with `args` (shell words) in the scratch folder; output in `out`. */
static int grid(const char *args)
{
    char exe[2048], cmd[8192];
    fixture();
    tool(exe, sizeof exe, "tfc-grid");
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s 2>&1", tfc_test_tmpdir(), exe, args);
    FILE *p = popen(cmd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int count_lines(const char *s, const char *prefix)
{
    int n = 0;
    for (const char *l = s; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        n += !strncmp(l, prefix, strlen(prefix));
    return n;
}

static void test_expansion(void)
{
    int rc = grid("tiny.yaml --grid optimizer.learning_rate=0.1,0.01,0.001 "
                  "--grid model.layers.0.Dense.units=4,16 --dry-run");
    CU_ASSERT_EQUAL(rc, 0);
    /* the cartesian product, the last key fastest, named by the keys' last components */
    const char *want =
        "learning_rate=0.1_units=4  --set optimizer.learning_rate=0.1  --set model.layers.0.Dense.units=4\n"
        "learning_rate=0.1_units=16  --set optimizer.learning_rate=0.1  --set model.layers.0.Dense.units=16\n"
        "learning_rate=0.01_units=4  --set optimizer.learning_rate=0.01  --set model.layers.0.Dense.units=4\n"
        "learning_rate=0.01_units=16  --set optimizer.learning_rate=0.01  --set model.layers.0.Dense.units=16\n"
        "learning_rate=0.001_units=4  --set optimizer.learning_rate=0.001  --set model.layers.0.Dense.units=4\n"
        "learning_rate=0.001_units=16  --set optimizer.learning_rate=0.001  --set model.layers.0.Dense.units=16\n";
    CU_ASSERT_STRING_EQUAL(out, want);
    /* commas inside a flow value do not split it */
    CU_ASSERT_EQUAL(grid("tiny.yaml --grid 'lr_policy={type: step, step_size: 10},fixed' --dry-run"), 0);
    CU_ASSERT_EQUAL(count_lines(out, "lr_policy="), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--set lr_policy={type: step, step_size: 10}\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--set lr_policy=fixed\n"));
}

static void test_usage_errors(void)
{
    CU_ASSERT_EQUAL(grid("--help"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: tfc-grid"));
    CU_ASSERT_EQUAL(grid("--version"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "tfc-grid (tfc) "));
    CU_ASSERT_EQUAL(grid("tiny.yaml"), 2);
    CU_ASSERT_EQUAL(grid("tiny.yaml --range optimizer.learning_rate=0:1"), 2);
    CU_ASSERT_EQUAL(grid("tiny.yaml --random 3 --range optimizer.learning_rate=log:0:1"), 2);
    CU_ASSERT_EQUAL(grid("tiny.yaml --grid optimizer.learning_rate=1 --grid optimizer.learning_rate=2"), 2);
    CU_ASSERT_EQUAL(grid("tiny.yaml --grid x --jobs 0"), 2);
    /* a folder named to --report that is missing or not a sweep's (issue 43 item 14's rule) */
    CU_ASSERT_EQUAL(grid("--report no_such_sweep"), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "not a sweep's folder?"));
    CU_ASSERT_EQUAL(grid("--report tiny.yaml"), 2);
    /* a bad key is reported with its did-you-mean before anything runs or is written */
    CU_ASSERT_EQUAL(grid("tiny.yaml --grid optimizer.learing_rate=0.1,0.2 --out bad"), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "did you mean 'learning_rate'"));
    struct stat st;
    CU_ASSERT_NOT_EQUAL(stat(tfc_test_path("bad"), &st), 0);
}

static void test_random_seeded(void)
{
    const char *args = "tiny.yaml --random 6 --range optimizer.learning_rate=log:0.001:0.1 "
                       "--range model.layers.0.Dense.units=4:32 --grid seed=1,2 --dry-run";
    char cmd[1024], first[8192];
    snprintf(cmd, sizeof cmd, "%s --seed 3", args);
    CU_ASSERT_EQUAL(grid(cmd), 0);
    snprintf(first, sizeof first, "%s", out);
    CU_ASSERT_EQUAL(count_lines(first, "learning_rate="), 6);
    CU_ASSERT_EQUAL(grid(cmd), 0);
    CU_ASSERT_STRING_EQUAL(out, first); /* same seed, same points */
    snprintf(cmd, sizeof cmd, "%s --seed 4", args);
    CU_ASSERT_EQUAL(grid(cmd), 0);
    CU_ASSERT_STRING_NOT_EQUAL(out, first);
    /* every draw in range: the rate log-uniform in [0.001, 0.1], units an integer in [4, 32] */
    int n = 0;
    double lo_seen = 1, hi_seen = 0;
    for (const char *l = first; *l; l = strchr(l, '\n') + 1) {
        double lr;
        int units, seed;
        char tail;
        CU_ASSERT_EQUAL_FATAL(sscanf(strstr(l, "--set optimizer.learning_rate="),
                                     "--set optimizer.learning_rate=%lf", &lr), 1);
        CU_ASSERT_EQUAL(sscanf(strstr(l, "--set model.layers.0.Dense.units="),
                               "--set model.layers.0.Dense.units=%d%c", &units, &tail), 2);
        CU_ASSERT_EQUAL(tail, ' ');
        CU_ASSERT_EQUAL(sscanf(strstr(l, "--set seed="), "--set seed=%d", &seed), 1);
        CU_ASSERT(lr >= 0.001 && lr <= 0.1);
        CU_ASSERT(units >= 4 && units <= 32);
        CU_ASSERT(seed == 1 || seed == 2);
        lo_seen = fmin(lo_seen, lr);
        hi_seen = fmax(hi_seen, lr);
        n++;
    }
    CU_ASSERT_EQUAL(n, 6);
    CU_ASSERT(hi_seen > lo_seen);
}

/* results.csv's rows as lines; returns the count of data rows. */
static int read_rows(const char *dir, char rows[][512], int max)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s/results.csv", tfc_test_tmpdir(), dir);
    char *t = tfc_test_read(path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    int n = -1;
    for (char *l = strtok(t, "\n"); l && n < max; l = strtok(NULL, "\n")) {
        if (n >= 0) snprintf(rows[n], 512, "%s", l);
        else CU_ASSERT_STRING_EQUAL(l, "optimizer.learning_rate,model.layers.0.Dense.units,"
                                       "test_accuracy,best_accuracy,best_iter,iterations,"
                                       "wall_seconds,status,run_dir");
        n++;
    }
    free(t);
    return n;
}

static void test_run_results_and_skip(void)
{
    int rc = grid("tiny.yaml --grid optimizer.learning_rate=0.1,0.001 "
                  "--grid model.layers.0.Dense.units=4,16 --jobs 2 --threads 2 --out sweep");
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(count_lines(out, "start "), 4);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "2 at a time, 1 thread each"));
    char rows[8][512];
    CU_ASSERT_EQUAL_FATAL(read_rows("sweep", rows, 8), 4);
    double prev = 2;
    for (int i = 0; i < 4; i++) {
        double lr, final, best;
        int units, it, iters;
        CU_ASSERT_EQUAL_FATAL(sscanf(rows[i], "%lf,%d,%lf,%lf,%d,%d,", &lr, &units, &final, &best,
                                     &it, &iters), 6);
        CU_ASSERT(best <= prev); /* sorted by the best test accuracy, descending */
        CU_ASSERT(best >= final);
        CU_ASSERT(it > 0 && it <= 40);
        CU_ASSERT_EQUAL(iters, 40);
        CU_ASSERT_PTR_NOT_NULL(strstr(rows[i], ",completed,"));
        prev = best;
        /* the row names its run folder, which has the run's files */
        char path[2048];
        struct stat st;
        snprintf(path, sizeof path, "%s/final.safetensors", strrchr(rows[i], ',') + 1);
        CU_ASSERT_EQUAL(stat(path, &st), 0);
    }
    /* the fast rate learns more in 40 iterations: it heads the table */
    CU_ASSERT_EQUAL(strncmp(rows[0], "0.1,", 4), 0);
    CU_ASSERT_EQUAL(strncmp(rows[3], "0.001,", 6), 0);
    /* again: every point is skipped, the table is the same */
    rc = grid("tiny.yaml --grid optimizer.learning_rate=0.1,0.001 "
              "--grid model.layers.0.Dense.units=4,16 --jobs 2 --out sweep");
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(count_lines(out, "skip "), 4);
    CU_ASSERT_EQUAL(count_lines(out, "start "), 0);
    char again[8][512];
    CU_ASSERT_EQUAL(read_rows("sweep", again, 8), 4);
    for (int i = 0; i < 4; i++) CU_ASSERT_STRING_EQUAL(again[i], rows[i]);
    /* a changed common --set changes every point: each runs again, from scratch (its
     * iterations are the new max_iter's), and no result of the old sweep stays */
    rc = grid("tiny.yaml --grid optimizer.learning_rate=0.1,0.001 "
              "--grid model.layers.0.Dense.units=4,16 --jobs 2 --out sweep --set max_iter=30");
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT_EQUAL(count_lines(out, "rerun "), 4);
    CU_ASSERT_EQUAL(count_lines(out, "skip "), 0);
    CU_ASSERT_EQUAL(read_rows("sweep", again, 8), 4);
    for (int i = 0; i < 4; i++) {
        double lr, final, best;
        int units, it, iters;
        CU_ASSERT_EQUAL_FATAL(sscanf(again[i], "%lf,%d,%lf,%lf,%d,%d,", &lr, &units, &final,
                                     &best, &it, &iters), 6);
        CU_ASSERT_EQUAL(iters, 30);
    }
}

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&t, NULL);
}

/* Starts tfc-grid in the background (output to `log`); returns its pid. */
static pid_t spawn_grid(const char *const *args, const char *log)
{
    char exe[2048];
    fixture();
    tool(exe, sizeof exe, "tfc-grid");
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (chdir(tfc_test_tmpdir()) != 0) _exit(127);
        if (!freopen(log, "w", stdout) || dup2(1, 2) < 0) _exit(127);
        const char *argv[32];
        int n = 0;
        argv[n++] = exe;
        for (int i = 0; args[i] && n < 31; i++) argv[n++] = args[i];
        argv[n] = NULL;
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* Waits (up to ~20 s) until the point's folder holds a snapshot state file. */
static int wait_snapshot(const char *dir)
{
    for (int i = 0; i < 2000; i++) {
        DIR *d = opendir(dir);
        int found = 0;
        for (struct dirent *e; d && (e = readdir(d));)
            found |= strstr(e->d_name, ".state") != NULL && strstr(e->d_name, ".tmp") == NULL;
        if (d) closedir(d);
        if (found) return 1;
        sleep_ms(10);
    }
    return 0;
}

/* The pid of a child of `parent` (from /proc/<pid>/stat), or -1. */
static pid_t child_of(pid_t parent)
{
    DIR *d = opendir("/proc");
    pid_t found = -1;
    for (struct dirent *e; d && found < 0 && (e = readdir(d));) {
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        char *close = strrchr(buf, ')');
        int ppid;
        char state;
        if (close && sscanf(close + 1, " %c %d", &state, &ppid) == 2 && ppid == parent)
            found = (pid_t)atoi(e->d_name);
    }
    if (d) closedir(d);
    return found;
}

static int wait_code(pid_t pid)
{
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
}

static long summary_iterations(const char *dir, char *status, size_t size)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s/summary.json", tfc_test_tmpdir(), dir);
    char *t = tfc_test_read(path, NULL);
    long it = -1;
    status[0] = 0;
    if (t) {
        char *p = strstr(t, "\"iterations\": ");
        if (p) it = atol(p + 14);
        p = strstr(t, "\"status\": \"");
        if (p) snprintf(status, size, "%.*s", (int)strcspn(p + 11, "\""), p + 11);
    }
    free(t);
    return it;
}

static void test_resume_after_sigterm(void)
{
    /* SIGTERM to the sweep reaches the running point, which snapshots; the sweep exits 143
     * and a re-run resumes the point from that snapshot to the end. */
    const char *args[] = {"tiny.yaml", "--grid", "max_iter=2000", "--set", "display=500",
                          "--out", "resume1", NULL};
    pid_t pid = spawn_grid(args, tfc_test_path("resume1.log"));
    char snaps[1024], status[64];
    snprintf(snaps, sizeof snaps, "%s/resume1/max_iter=2000/snapshots", tfc_test_tmpdir());
    CU_ASSERT_FATAL(wait_snapshot(snaps));
    kill(pid, SIGTERM);
    CU_ASSERT_EQUAL(wait_code(pid), 143);
    long it = summary_iterations("resume1/max_iter=2000", status, sizeof status);
    CU_ASSERT_STRING_EQUAL(status, "interrupted");
    CU_ASSERT(it > 0 && it < 2000);
    char *csv = tfc_test_read(tfc_test_path("resume1/results.csv"), NULL);
    CU_ASSERT(csv && strstr(csv, ",interrupted,"));
    free(csv);

    CU_ASSERT_EQUAL(grid("tiny.yaml --grid max_iter=2000 --set display=500 --out resume1"), 0);
    CU_ASSERT_EQUAL(count_lines(out, "resume max_iter=2000 from "), 1);
    CU_ASSERT_EQUAL(summary_iterations("resume1/max_iter=2000", status, sizeof status), 2000);
    CU_ASSERT_STRING_EQUAL(status, "completed");
}

/* kill -9 of a child mid-run: no summary, the sweep reports it and exits 1; a re-run
 * resumes from the newest complete snapshot, found in `snapshots` (the point's folder
 * relative), with `set` (when not NULL) as one more --set. */
static void kill_and_resume(const char *name, const char *set, const char *snapshots)
{
    const char *args[] = {"tiny.yaml", "--grid", "max_iter=2000", "--set", "display=500",
                          "--out", name, set ? "--set" : NULL, set, NULL};
    char logname[256], snaps[1024], status[64], point[512], again[1024], from[1100];
    snprintf(logname, sizeof logname, "%s.log", name);
    pid_t pid = spawn_grid(args, tfc_test_path(logname));
    snprintf(point, sizeof point, "%s/max_iter=2000", name);
    snprintf(snaps, sizeof snaps, "%s/%s/%s", tfc_test_tmpdir(), point, snapshots);
    CU_ASSERT_FATAL(wait_snapshot(snaps));
    pid_t child = child_of(pid);
    CU_ASSERT_FATAL(child > 0);
    kill(child, SIGKILL);
    CU_ASSERT_EQUAL(wait_code(pid), 1);
    char *log = tfc_test_read(tfc_test_path(logname), NULL);
    CU_ASSERT(log && strstr(log, "(exit 137)"));
    free(log);

    snprintf(again, sizeof again, "tiny.yaml --grid max_iter=2000 --set display=500 --out %s%s%s",
             name, set ? " --set " : "", set ? set : "");
    CU_ASSERT_EQUAL(grid(again), 0);
    CU_ASSERT_EQUAL(count_lines(out, "resume max_iter=2000 from "), 1);
    snprintf(from, sizeof from, "from %s/", snaps);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, from));
    if (!strstr(out, from)) printf("\n%s", out);
    CU_ASSERT_EQUAL(summary_iterations(point, status, sizeof status), 2000);
    CU_ASSERT_STRING_EQUAL(status, "completed");
}

static void test_resume_after_kill(void) { kill_and_resume("resume2", NULL, "snapshots"); }

/* The same with the snapshots moved by snapshot.prefix: the re-run finds them where the
 * point's config.yaml says. */
static void test_resume_after_kill_prefix(void)
{
    kill_and_resume("resume3", "snapshot.prefix=ckpt/tiny", "ckpt");
}

/* Before any test ran (here: no data.test at all) results.csv already names the model's
 * ranking metric (test_accuracy, best_accuracy), not a fallback to the loss (issue 19
 * item 10): read_rows checks the header. */
static void test_header_before_any_test(void)
{
    int rc = grid("tiny.yaml --grid optimizer.learning_rate=0.1 --grid model.layers.0.Dense.units=4 "
                  "--set data.test=null --set test_interval=0 --set max_iter=5 "
                  "--set snapshot.interval=0 --threads 1 "
                  "--out notest");
    CU_ASSERT_EQUAL(rc, 0);
    char rows[2][512];
    CU_ASSERT_EQUAL(read_rows("notest", rows, 2), 1);
}

/* --scheduler asha over 9 points, rungs 10, 30 and 90: decisions logged in asha.csv, the
 * results' stop_iter and reason columns, fewer iterations than the full grid; a trial
 * promoted twice (paused at 10 and 30, resumed each time) ends with the bytes of the same
 * point trained straight to 90; a re-run replays the log and starts nothing. */
#define ASHA_BASE                                                                            \
    "tiny.yaml --grid optimizer.learning_rate=0.0003,0.003,0.03 "                            \
    "--grid model.layers.0.Dense.units=4,8,16 --set test_interval=0 "                        \
    "--set snapshot.interval=0 --scheduler asha --threads 1"
#define ASHA_ARGS ASHA_BASE " --set max_iter=90 --min-iter 10"
static void test_asha_sweep(void)
{
    CU_ASSERT_EQUAL_FATAL(grid(ASHA_ARGS " --out asha"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "asha: rungs at 10, 30 and 90 iterations"));
    const char *spent = strstr(out, "asha: ");
    spent = spent ? strstr(spent + 1, "asha: ") : NULL;
    CU_ASSERT_FATAL(spent != NULL);
    long iters = atol(spent + 6);
    CU_ASSERT(iters >= 9 * 10 && iters < 9 * 90);
    char *csv = tfc_test_read(tfc_test_path("asha/results.csv"), NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(csv);
    CU_ASSERT(strstr(csv, ",status,stop_iter,reason,run_dir\n") != NULL);
    CU_ASSERT(strstr(csv, ",completed,90,reached max_iter,") != NULL);
    CU_ASSERT(strstr(csv, ",paused,10,not in the top 1/3 of rung 0,") != NULL);
    /* the first row (the best) completed: its lr and units, then the same point unpaused */
    const char *row = strchr(csv, '\n') + 1;
    char lr[32], units[32], run_dir[1024];
    CU_ASSERT_FATAL(sscanf(row, "%31[^,],%31[^,],", lr, units) == 2);
    const char *eol = strchr(row, '\n'), *comma = eol;
    while (comma > row && comma[-1] != ',') comma--;
    snprintf(run_dir, sizeof run_dir, "%.*s", (int)(eol - comma), comma);
    char log[1100], cmd[4096], a[1100], b[1024], exe[2048];
    snprintf(log, sizeof log, "%s/train.log", run_dir);
    char *train_log = tfc_test_read(log, NULL);
    CU_ASSERT(train_log && strstr(train_log, "paused at iteration 10") &&
              strstr(train_log, "paused at iteration 30"));
    free(train_log);
    tool(exe, sizeof exe, "tfc-train");
    snprintf(cmd, sizeof cmd,
             "cd '%s' && '%s' tiny.yaml --set optimizer.learning_rate=%s --set "
             "model.layers.0.Dense.units=%s --set max_iter=90 --set test_interval=0 --set "
             "snapshot.interval=0 --threads 1 --quiet --out straight >/dev/null 2>&1",
             tfc_test_tmpdir(), exe, lr, units);
    CU_ASSERT_EQUAL(system(cmd), 0);
    snprintf(a, sizeof a, "%s/final.safetensors", run_dir);
    snprintf(b, sizeof b, "%s/straight/final.safetensors", tfc_test_tmpdir());
    size_t la = 0, lb = 0;
    char *fa = tfc_test_read(a, &la), *fb = tfc_test_read(b, &lb);
    CU_ASSERT(fa && fb && la == lb && !memcmp(fa, fb, la));
    free(fa);
    free(fb);
    free(csv);
    /* the log replays: nothing left to start or promote */
    char *before = tfc_test_read(tfc_test_path("asha/asha.csv"), NULL);
    CU_ASSERT_EQUAL(grid(ASHA_ARGS " --out asha"), 0);
    CU_ASSERT_EQUAL(count_lines(out, "start"), 0);
    CU_ASSERT_EQUAL(count_lines(out, "promote"), 0);
    char *after = tfc_test_read(tfc_test_path("asha/asha.csv"), NULL);
    CU_ASSERT(before && after && !strcmp(before, after));
    free(before);
    free(after);
    /* report.html: every trial's row and curve, its rung marks, nothing outside the file
     * (tests/report_check.py parses it); --report alone writes it again */
    CU_ASSERT_EQUAL(grid("--report asha"), 0);
    char check[4096], here[2048];
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(here, sizeof here));
    snprintf(check, sizeof check, "python3 '%s/tests/report_check.py' '%s/asha'", here,
             tfc_test_tmpdir());
    CU_ASSERT_EQUAL(system(check), 0);
    /* another setting on the same folder is refused */
    CU_ASSERT_EQUAL(grid(ASHA_ARGS " --eta 2 --out asha"), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "holds another sweep's decisions"));
}

/* Issue 43 item 13: asha on a 3x2 grid with rungs 10, 30 and 90, the better learning rates
 * first, so that ASHA's own rule sends two points to rung 30 and none on (floor(2/3) = 0).
 * The sweep still ends with one point trained to max_iter (the best at rung 30, with its
 * final weights), says how many the scheduler paused, and exits 0; results.csv is sorted by
 * best_accuracy, every paused point's rung result counting there. */
static void test_asha_small_grid(void)
{
    CU_ASSERT_EQUAL_FATAL(grid("tiny.yaml --grid optimizer.learning_rate=0.03,0.003,0.0003 "
                               "--grid model.layers.0.Dense.units=16,8 --set max_iter=90 "
                               "--set test_interval=0 --set snapshot.interval=0 --scheduler asha "
                               "--min-iter 10 --threads 1 --out asha_small"),
                          0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "; 1 completed, 5 paused by asha, 0 failed or diverged, "
                                       "0 unfinished\n"));
    char *csv = tfc_test_read(tfc_test_path("asha_small/results.csv"), NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(csv);
    double prev = 2;
    int rows = 0, at30 = 0;
    for (const char *l = strchr(csv, '\n') + 1; *l; l = strchr(l, '\n') + 1, rows++) {
        double lr, final, best;
        int units, best_iter, iters;
        char status[32];
        CU_ASSERT_FATAL(sscanf(l, "%lf,%d,%lf,%lf,%d,%d,%*[^,],%31[^,],", &lr, &units, &final,
                               &best, &best_iter, &iters, status) == 7);
        CU_ASSERT(best <= prev); /* sorted, higher accuracy first */
        prev = best;
        CU_ASSERT(best >= final); /* the rung's test counts in best_ */
        CU_ASSERT_STRING_EQUAL(status, rows ? "paused" : "completed");
        at30 += iters == 30;
        if (rows == 0) {
            CU_ASSERT_EQUAL(iters, 90);
            char path[2048];
            snprintf(path, sizeof path, "%s/asha_small/learning_rate=%g_units=%d/final.safetensors",
                     tfc_test_tmpdir(), lr, units);
            CU_ASSERT_EQUAL(access(path, F_OK), 0);
        }
    }
    CU_ASSERT_EQUAL(rows, 6);
    CU_ASSERT_EQUAL(at30, 1); /* the case walked: two at rung 30, one of them sent on */
    free(csv);
}

/* SIGTERM to an asha sweep, then the same command again: the decisions (asha.csv) and the
 * results equal those of the sweep that was never interrupted. */
static void test_asha_interrupted(void)
{
    CU_ASSERT_EQUAL_FATAL(grid(ASHA_BASE " --set max_iter=900 --min-iter 100 --out asha_whole"), 0);
    const char *args[] = {"tiny.yaml", "--grid", "optimizer.learning_rate=0.0003,0.003,0.03",
                          "--grid", "model.layers.0.Dense.units=4,8,16", "--set",
                          "test_interval=0", "--set", "snapshot.interval=0", "--scheduler",
                          "asha", "--threads", "1", "--set", "max_iter=900", "--min-iter", "100",
                          "--out", "asha_cut", NULL};
    pid_t pid = spawn_grid(args, tfc_test_path("asha_cut.log"));
    /* once a few decisions are logged */
    for (int i = 0; i < 3000; i++) {
        char *t = tfc_test_read(tfc_test_path("asha_cut/asha.csv"), NULL);
        int lines = t ? count_lines(t, "") : 0;
        free(t);
        if (lines >= 8) break;
        sleep_ms(5);
    }
    kill(pid, SIGTERM);
    int code = wait_code(pid);
    CU_ASSERT(code == 143 || code == 0);
    CU_ASSERT_EQUAL(grid(ASHA_BASE " --set max_iter=900 --min-iter 100 --out asha_cut"), 0);
    char *whole = tfc_test_read(tfc_test_path("asha_whole/asha.csv"), NULL);
    char *cut = tfc_test_read(tfc_test_path("asha_cut/asha.csv"), NULL);
    CU_ASSERT_FATAL(whole && cut);
    if (strcmp(whole, cut)) printf("\nuninterrupted:\n%s\ninterrupted:\n%s", whole, cut);
    CU_ASSERT_STRING_EQUAL(whole, cut);
    free(whole);
    free(cut);
}

/* --scheduler median (Optuna's MedianPruner) with --startup 2: the first two points complete,
 * the third (a learning rate 1000 times smaller) is below their median at its first test
 * and stops there; median.csv logs it and a re-run starts nothing; the report marks it. */
static void test_median_sweep(void)
{
    const char *args = "tiny.yaml --grid optimizer.learning_rate=0.01,0.02,0.00001 --set "
                       "max_iter=40 --set test_interval=10 --set snapshot.interval=0 "
                       "--scheduler median --startup 2 --threads 1 --out median";
    CU_ASSERT_EQUAL_FATAL(grid(args), 0);
    char *csv = tfc_test_read(tfc_test_path("median/results.csv"), NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(csv);
    const char *slow = strstr(csv, "\n0.00001,");
    CU_ASSERT(slow && strstr(slow, ",paused,10,pruned at step 0: below the median,") ==
                          strstr(slow + 1, ",paused,"));
    int completed = 0;
    for (const char *c = csv; (c = strstr(c, ",completed,40,reached max_iter,")); c++) completed++;
    CU_ASSERT_EQUAL(completed, 2);
    free(csv);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "median: 90 iterations trained, 75.0% of the 120"));
    CU_ASSERT_EQUAL(grid(args), 0);
    CU_ASSERT_EQUAL(count_lines(out, "start"), 0);
    char check[4096], here[2048];
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(here, sizeof here));
    snprintf(check, sizeof check, "python3 '%s/tests/report_check.py' '%s/median'", here,
             tfc_test_tmpdir());
    CU_ASSERT_EQUAL(system(check), 0);
}

/* --scheduler hyperband over 17 random points with stages 10, 30 and 90 (R = 9, eta 3): three
 * brackets of 9, 5 and 3 points, 5 of them reaching the end (1 + 1 + 3) and
 * 9·10 + 3·20 + 60 + 5·30 + 60 + 3·90 = 690 iterations trained (asha.hyperband has the
 * decisions by hand); the report marks every stage result. */
static void test_hyperband_sweep(void)
{
    CU_ASSERT_EQUAL_FATAL(grid("tiny.yaml --random 17 --range optimizer.learning_rate=log:1e-4:0.1 "
                               "--set max_iter=90 --set test_interval=0 --set snapshot.interval=0 "
                               "--scheduler hyperband --min-iter 10 --threads 1 --out hb"),
                          0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "hyperband: stages at 10, 30 and 90 iterations; 3 brackets "
                                       "of 9, 5, 3 points"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "hyperband: 690 iterations trained, 45.1% of the 1530"));
    char *csv = tfc_test_read(tfc_test_path("hb/results.csv"), NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(csv);
    int completed = 0;
    for (const char *c = csv; (c = strstr(c, ",completed,90,reached max_iter,")); c++) completed++;
    CU_ASSERT_EQUAL(completed, 5);
    free(csv);
    char check[4096], here[2048];
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(here, sizeof here));
    snprintf(check, sizeof check, "python3 '%s/tests/report_check.py' '%s/hb'", here,
             tfc_test_tmpdir());
    CU_ASSERT_EQUAL(system(check), 0);
}

TFC_TEST_MAIN("grid", {"expansion", test_expansion}, {"usage_errors", test_usage_errors},
              {"random_seeded", test_random_seeded},
              {"run_results_and_skip", test_run_results_and_skip},
              {"header_before_any_test", test_header_before_any_test},
              {"resume_after_sigterm", test_resume_after_sigterm},
              {"resume_after_kill", test_resume_after_kill},
              {"resume_after_kill_prefix", test_resume_after_kill_prefix},
              {"asha_sweep", test_asha_sweep}, {"asha_small_grid", test_asha_small_grid},
              {"asha_interrupted", test_asha_interrupted},
              {"median_sweep", test_median_sweep}, {"hyperband_sweep", test_hyperband_sweep})
