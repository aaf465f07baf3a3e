/* How many threads run the CPU backend's parallel regions now (docs/cpu.md, "A team that
 * shrinks on a busy machine").
 *
 * Each region splits its work by the backend's thread count, so its results never depend on
 * how many threads run it; this file decides that number. On a quiet machine it is the
 * backend's count. When the process's threads wait for a CPU (another process, or more
 * threads than cores: Linux counts each thread's time runnable but not running in
 * /proc/self/task/TID/schedstat), a thread descheduled in the middle of its share holds up
 * the region's end, and libgomp's spinning waiters take time from it: beside one busy core
 * resnet20's two-thread step took 2.3-3.1x its quiet time, against 1.8x on one thread (the
 * lone thread moves to the free core). But not every model loses: mnist_cnn's chunks,
 * claimed as threads finish, ran 1.6x its quiet time on two threads and 1.9-2.4x on one.
 * So the two are raced. When two windows of WINDOW_NS in a row saw the process's threads
 * waiting BUSY thread-equivalents or more, a duel starts: the regions run on that many
 * threads fewer (at least one) for DUEL_NS, then on every thread for as many regions (the
 * same slice of the training steps), and the team that started regions faster (the full one
 * by 5%) runs for HOLD_MIN_NS, twice as long after each duel it wins again (up to
 * HOLD_MAX_NS). A duel whose full turn finds the machine quiet ends them.
 *
 * The state is the process's (one libgomp pool serves every backend). It costs a read of the
 * monotonic clock and an atomic add per region, and every WINDOW_NS a read of each thread's
 * schedstat (tens of microseconds). TFC_CPU_ADAPT=0 in the environment keeps every region on
 * the backend's count; so does a system without /proc/self/task. A thread may also cap its
 * own regions (tfc_cpu_team_cap: a predictor's pass on one thread, beside another's). */
#include <fcntl.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cpu/cpu_internal.h"

#define WINDOW_NS (40 * 1000000LL)
#define DUEL_NS (400 * 1000000LL)
#define HOLD_MIN_NS (1000 * 1000000LL)
#define HOLD_MAX_NS (8000 * 1000000LL)
/* thread-equivalents waiting for a CPU from which the machine counts as busy */
#define BUSY 0.25

enum { QUIET, DUEL_FULL, DUEL_CUT, HOLD };

static struct monitor {
    pthread_mutex_t lock;
    pthread_once_t once;
    int off;                /* TFC_CPU_ADAPT=0, or no schedstat */
    _Atomic int forced;     /* tfc_cpu_team_force; 0: adapt */
    _Atomic int cut;        /* threads taken off every team (each keeps one) */
    _Atomic long long next; /* the clock at which the window ends */
    _Atomic long long regions, turn_end; /* regions started; the full turn ends at turn_end */
    long long t0, wait0;    /* the window's start, and the threads' waits summed then */
    int busy_windows;       /* windows in a row that saw a busy machine, when quiet */
    int state, more, last;  /* more: the cut a duel tries; last: whether the cut won the last */
    long long turn_t0, turn_r0, turn_wait0; /* the turn's start: time, regions, waits */
    double cut_rate;        /* regions per nanosecond in the cut's turn */
    long long cut_done;     /* regions in it */
    long long hold, until;  /* the winner runs until `until` */
} mon = {.lock = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT, .turn_end = -1};

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The second number in text (schedstat: time on a CPU, time waiting for one, slices), or -1. */
static long long second_field(const char *text)
{
    const char *c = text;
    for (int field = 0; field < 2; field++) {
        while (*c == ' ') c++;
        if (*c < '0' || *c > '9') return -1;
        long long v = 0;
        for (; *c >= '0' && *c <= '9'; c++) v = v * 10 + (*c - '0');
        if (field == 1) return v;
    }
    return -1;
}

/* Nanoseconds the process's threads have spent runnable but not running, summed; -1 when
 * the system does not say. No allocation (tfc_predictor_run makes none, SPEC §5c): the
 * directory is read with getdents64 into a buffer on the stack, not opendir. */
static long long waited_ns(void)
{
    const int dir = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return -1;
    long long sum = 0;
    int found = 0;
    char ents[4096] __attribute__((aligned(8)));
    for (long n; (n = syscall(SYS_getdents64, dir, ents, sizeof ents)) > 0;) {
        /* struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, char name[] */
        for (long off = 0; off + 19 < n;) {
            unsigned short reclen;
            memcpy(&reclen, ents + off + 16, sizeof reclen);
            const char *name = ents + off + 19;
            off += reclen ? reclen : n;
            const size_t len = strnlen(name, 32);
            if (name[0] < '0' || name[0] > '9' || len >= 32) continue;
            char path[48], buf[96];
            memcpy(path, name, len);
            memcpy(path + len, "/schedstat", sizeof "/schedstat");
            const int fd = openat(dir, path, O_RDONLY | O_CLOEXEC);
            if (fd < 0) continue; /* the thread ended */
            const ssize_t got = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (got <= 0) continue;
            buf[got] = 0;
            const long long wait = second_field(buf);
            if (wait < 0) continue;
            sum += wait;
            found = 1;
        }
    }
    close(dir);
    return found ? sum : -1;
}

static void init(void)
{
    const char *v = getenv("TFC_CPU_ADAPT");
    mon.off = (v && strcmp(v, "0") == 0) || waited_ns() < 0;
}

/* Threads to cut when `busy` thread-equivalents wait: one, or as many as wait. */
static int more_of(double busy)
{
    return busy < 1.5 ? 1 : (int)(busy + 0.5);
}

static void turn(long long now, long long regions, long long wait, int state, int cut)
{
    mon.state = state;
    mon.turn_t0 = now, mon.turn_r0 = regions, mon.turn_wait0 = wait;
    atomic_store_explicit(&mon.cut, cut, memory_order_relaxed);
}

/* At a window's end or a turn's (mon.lock held): the cut for what follows, from the clock,
 * the process's threads' waits summed (-1: unknown) and the regions started. */
static void look(long long now, long long wait, long long regions)
{
    if (now >= atomic_load_explicit(&mon.next, memory_order_relaxed))
        atomic_store_explicit(&mon.next, now + WINDOW_NS, memory_order_relaxed);
    if (wait < 0) return;
    const long long span = now - mon.t0, waited = wait - mon.wait0;
    const int first = mon.t0 == 0;
    mon.t0 = now, mon.wait0 = wait;
    /* a sum of waits falls when a thread ends (its wait leaves the sum): no verdict then */
    const double busy = first || span <= 0 || waited < 0 ? -1 : (double)waited / span;
    const long long elapsed = now - mon.turn_t0, done = regions - mon.turn_r0;
    switch (mon.state) {
    case QUIET:
        if (busy < BUSY) {
            mon.busy_windows = 0;
            return;
        }
        if (++mon.busy_windows < 2) return;
        mon.busy_windows = 0;
        mon.more = more_of(busy);
        turn(now, regions, wait, DUEL_CUT, mon.more);
        return;
    case DUEL_CUT: /* the cut's turn comes first: on a busy machine it is the safe one */
        if (elapsed < DUEL_NS) return;
        mon.cut_rate = (double)done / elapsed, mon.cut_done = done;
        /* the full team's turn: as many regions (the same slice of the steps) */
        atomic_store(&mon.turn_end, regions + done);
        turn(now, regions, wait, DUEL_FULL, 0);
        return;
    case DUEL_FULL: {
        /* over when it has run as many regions, or taken long enough to have lost */
        if (regions < atomic_load(&mon.turn_end) &&
            elapsed * 1.05 * mon.cut_rate < (double)mon.cut_done)
            return;
        atomic_store(&mon.turn_end, -1);
        const long long w = wait - mon.turn_wait0;
        const double b = w < 0 ? BUSY : (double)w / elapsed;
        if (b < BUSY) { /* quiet again */
            turn(now, regions, wait, QUIET, 0);
            mon.last = 0, mon.hold = 0;
            return;
        }
        mon.more = more_of(b);
        /* the cut stays unless every thread went 5% faster */
        const int cut = (double)done / elapsed <= 1.05 * mon.cut_rate;
        mon.hold = cut != mon.last || !mon.hold ? HOLD_MIN_NS
                   : mon.hold * 2 > HOLD_MAX_NS ? HOLD_MAX_NS
                                                : mon.hold * 2;
        mon.last = cut, mon.until = now + mon.hold;
        turn(now, regions, wait, HOLD, cut ? mon.more : 0);
        return;
    }
    default: /* HOLD */
        if (now >= mon.until) turn(now, regions, wait, DUEL_CUT, mon.more);
    }
}

/* tfc_cpu_team_cap's, for the regions the calling thread starts; 0: none */
static _Thread_local int cap;

void tfc_cpu_team_cap(int team)
{
    cap = team > 0 ? team : 0;
}

int tfc_cpu_team(int nt)
{
    /* a region inside another runs on its thread, as libgomp runs a nested one (one level
     * of active regions) when the outer team has several threads */
    if (nt <= 1 || omp_get_level() > 0 || cap == 1) return 1;
    if (cap && cap < nt) nt = cap; /* the split stays the caller's: only the team shrinks */
    pthread_once(&mon.once, init);
    const int forced = atomic_load_explicit(&mon.forced, memory_order_relaxed);
    if (forced > 0) return forced < nt ? forced : nt;
    if (mon.off) return nt;
    const long long now = now_ns();
    const long long r = atomic_fetch_add_explicit(&mon.regions, 1, memory_order_relaxed) + 1;
    const long long end = atomic_load_explicit(&mon.turn_end, memory_order_relaxed);
    if ((now >= atomic_load_explicit(&mon.next, memory_order_relaxed) ||
         (end >= 0 && r >= end)) &&
        pthread_mutex_trylock(&mon.lock) == 0) {
        look(now, waited_ns(), atomic_load(&mon.regions));
        pthread_mutex_unlock(&mon.lock);
    }
    const int team = nt - atomic_load_explicit(&mon.cut, memory_order_relaxed);
    return team < 1 ? 1 : team;
}

void tfc_cpu_team_force(int team)
{
    atomic_store_explicit(&mon.forced, team > 0 ? team : 0, memory_order_relaxed);
}

static _Atomic long long lone_calls;

void tfc_cpu_team_note_lone(void)
{
    atomic_fetch_add_explicit(&lone_calls, 1, memory_order_relaxed);
}

long long tfc_cpu_team_lone_calls(void)
{
    return atomic_load_explicit(&lone_calls, memory_order_relaxed);
}

void tfc_cpu_team_look_soon(void)
{
    atomic_store_explicit(&mon.next, 0, memory_order_relaxed);
}

int tfc_cpu_team_feed(long long now, long long wait, long long regions)
{
    pthread_mutex_lock(&mon.lock);
    if (now < 0) { /* start again: every field from `cut` on */
        memset((char *)&mon + offsetof(struct monitor, cut), 0,
               sizeof mon - offsetof(struct monitor, cut));
        atomic_store(&mon.turn_end, -1);
        pthread_mutex_unlock(&mon.lock);
        return 0;
    }
    atomic_store(&mon.regions, regions);
    if (now >= atomic_load(&mon.next) || (atomic_load(&mon.turn_end) >= 0 &&
                                          regions >= atomic_load(&mon.turn_end)))
        look(now, wait, regions);
    const int cut = atomic_load(&mon.cut);
    pthread_mutex_unlock(&mon.lock);
    return cut;
}
