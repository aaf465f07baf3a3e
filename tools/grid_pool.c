/* tfc-grid's process pool (grid.h): job slots, each running one `tfc-train SOLVER --set ...
 * --out DIR/<point>` child with its share of the CPU threads and its entry of the device
 * list, output appended to the point's train.log; SIGTERM passed on to the children when the
 * sweep is stopped, so they snapshot. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "grid.h"

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

volatile sig_atomic_t grid_stop_signal;

void grid_pool_init(grid_pool *pl, const char *argv0, const char *device_list, int jobs,
                    int threads)
{
    memset(pl, 0, sizeof *pl);
    find_trainer(argv0, pl->trainer, sizeof pl->trainer);
    pl->device_list = device_list;
    pl->jobs = jobs;
    pl->threads = threads;
    pl->slots = grid_xcalloc((size_t)jobs, sizeof *pl->slots);
}

void grid_pool_free(grid_pool *pl)
{
    free(pl->slots);
    pl->slots = NULL;
}

/* The device of job slot `slot`: the slot-th entry of the comma list, cyclically. */
static void slot_device(const grid_pool *pl, int slot, char *out, size_t size)
{
    out[0] = 0;
    if (!pl->device_list) return;
    int n = 1;
    for (const char *c = pl->device_list; *c; c++) n += *c == ',';
    int want = slot % n, i = 0;
    const char *start = pl->device_list;
    for (const char *c = pl->device_list;; c++) {
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
static pid_t launch(const grid *g, const grid_pool *pl, grid_point *p, const char *state,
                    int slot, int64_t stop_at)
{
    int nsets;
    char **sets = grid_point_sets(g, p, &nsets);
    const char **argv = grid_xcalloc((size_t)(2 * nsets + 16), sizeof *argv);
    char threads[32], device[256], log[4600];
    int n = 0;
    argv[n++] = pl->trainer;
    argv[n++] = g->solver;
    for (int i = 0; i < nsets; i++) {
        argv[n++] = "--set";
        argv[n++] = sets[i];
    }
    argv[n++] = "--out";
    argv[n++] = p->dir;
    snprintf(threads, sizeof threads, "%d", pl->threads);
    argv[n++] = "--threads";
    argv[n++] = threads;
    slot_device(pl, slot, device, sizeof device);
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
        if (strchr(pl->trainer, '/')) execv(pl->trainer, (char *const *)argv);
        else execvp(pl->trainer, (char *const *)argv);
        fprintf(stderr, "tfc-grid: cannot run %s: %s\n", pl->trainer, strerror(errno));
        _exit(127);
    }
    free(argv);
    grid_free_sets(sets, nsets);
    return pid;
}

int grid_pool_start(grid_pool *pl, const grid *g, grid_point *p, int fresh, int64_t stop_at,
                    char *state, size_t size)
{
    int slot = 0;
    while (pl->slots[slot]) slot++;
    tfc_error err;
    tfc_error_clear(&err);
    state[0] = '\0';
    if (tfc_mkdir_p(p->dir, &err) ||
        (!fresh && tfc_snapshot_find_newest(p->dir, state, size, &err))) {
        fprintf(stderr, "tfc-grid: %s", err.text);
        snprintf(p->status, sizeof p->status, "failed");
        return -1;
    }
    p->pid = launch(g, pl, p, state, slot, stop_at);
    if (p->pid < 0) {
        fprintf(stderr, "tfc-grid: fork: %s\n", strerror(errno));
        snprintf(p->status, sizeof p->status, "failed");
        return -1;
    }
    p->slot = slot;
    pl->slots[slot] = 1;
    p->ran = 1;
    pl->running++;
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&t, NULL);
}

int grid_pool_wait(grid_pool *pl, grid *g, int *code)
{
    while (pl->running > 0) {
        if (grid_stop_signal && !pl->forwarded) {
            for (int i = 0; i < g->npoints; i++)
                if (g->points[i].slot >= 0) kill(g->points[i].pid, SIGTERM);
            pl->forwarded = 1;
        }
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0) {
            sleep_ms(50);
            continue;
        }
        for (int i = 0; i < g->npoints; i++) {
            grid_point *p = &g->points[i];
            if (p->slot < 0 || p->pid != pid) continue;
            pl->slots[p->slot] = 0;
            p->slot = -1;
            pl->running--;
            *code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            return i;
        }
    }
    return -1;
}
