/* The pipeline profiler's clock, its slow path, and the report: per stage the elements it
 * handed out, its own work (busy) and the time its consumer waited in it, estimated from
 * the timed calls (internal.h says how calls are timed), and the slowest stage with what to
 * try. tf.data's counterparts are the TF Profiler's input-pipeline analyser and the
 * tf.data service's stats; here the numbers come from the running pipeline itself. */
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "data/internal.h"

_Thread_local prof_thread tfc_prof_tl;

uint64_t tfc_prof_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void add(_Atomic uint64_t *c, uint64_t v)
{
    atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

static uint64_t get(const _Atomic uint64_t *c)
{
    return atomic_load_explicit((_Atomic uint64_t *)c, memory_order_relaxed);
}

void tfc_prof_leave_slow(stage *s, int acct, prof_frame *f, int shared, int miss)
{
    prof_thread *t = &tfc_prof_tl;
    prof_acct *a = &s->prof[acct];
    if (f->timed) {
        uint64_t d = tfc_prof_ns() - f->t0, child = t->child_ns;
        t->child_ns = f->saved_child + d;
        add(&a->timed, 1);
        add(&a->incl_ns, d);
        add(&a->self_ns, d > child ? d - child : 0);
    }
    if (s->p->prof_on) {
        if (shared) {
            add(&a->calls, 1);
        } else {
            _Atomic uint64_t *c = &a->calls;
            atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                                  memory_order_relaxed);
        }
        if (miss) add(&a->misses, 1);
    }
    if (--t->depth == 0) t->sampling = 0;
}

/* An account's totals, estimated: the timed sums scaled by calls / timed calls. */
static double est(const prof_acct *a, int incl)
{
    uint64_t timed = get(&a->timed);
    if (!timed) return 0;
    double ns = (double)get(incl ? &a->incl_ns : &a->self_ns);
    return 1e-9 * ns * (double)get(&a->calls) / (double)timed;
}

static int64_t handed_out(const prof_acct *a)
{
    uint64_t c = get(&a->calls), m = get(&a->misses);
    return c > m ? (int64_t)(c - m) : 0;
}

int tfc_pipeline_profile(const tfc_pipeline *p, tfc_stage_profile *out, int cap)
{
    /* The threads a stage's fetches run on: those of the nearest parallel map above it
     * that fetches through lazy stages down to it. */
    int fetch_threads = 1;
    for (int i = p->n - 1; i >= 0; i--) {
        const stage *s = p->stages[i];
        if (i < cap) {
            tfc_stage_profile *o = &out[i];
            memset(o, 0, sizeof *o);
            snprintf(o->name, sizeof o->name, "%s", s->label[0] ? s->label : s->ops->name);
            const prof_acct *a = s->prof;
            /* elements made: by fetch where ids pass through it, else by next */
            o->elements = handed_out(&a[PROF_FETCH]);
            if (!o->elements) o->elements = handed_out(&a[PROF_NEXT]);
            int work = s->threads > 1 ? s->threads : 1;
            double next = est(&a[PROF_NEXT], 0), fetch = est(&a[PROF_FETCH], 0),
                   mine = est(&a[PROF_WORK], 0);
            o->busy_s = next + fetch + mine;
            o->path_s = next + fetch / fetch_threads + mine / work;
            o->waited_s = est(&a[PROF_NEXT], 1) + est(&a[PROF_FETCH], 1);
            o->threads = fetch > next && fetch_threads > work ? fetch_threads : work;
        }
        if (s->threads > 1 && s->up && s->up->lazy) fetch_threads = s->threads;
        else if (!s->lazy) fetch_threads = 1;
    }
    return p->n;
}

void tfc_pipeline_profile_clear(tfc_pipeline *p)
{
    for (int i = 0; i < p->n; i++)
        for (int k = 0; k < PROF_NACCT; k++) {
            prof_acct *a = &p->stages[i]->prof[k];
            atomic_store_explicit(&a->calls, 0, memory_order_relaxed);
            atomic_store_explicit(&a->misses, 0, memory_order_relaxed);
            atomic_store_explicit(&a->timed, 0, memory_order_relaxed);
            atomic_store_explicit(&a->self_ns, 0, memory_order_relaxed);
            atomic_store_explicit(&a->incl_ns, 0, memory_order_relaxed);
        }
}

static int is(const stage *s, const char *name)
{
    return !strcmp(s->ops->name, name);
}

/* Sources that hold their records in memory (arrays, windows of a table): caching them
 * gains nothing. */
static int in_memory(const source *src)
{
    return !strcmp(src->ops->type, "array") || !strcmp(src->ops->type, "timeseries");
}

/* A prefetch does no work of its own: its consumer's time in it is the hand-over and, while
 * the trainer's threads fill the cores, waits for one (wall time). It counts in no share and
 * is never the slowest, so the trainer's end-of-run advice and tfc-data --profile's, one
 * computation, give one answer (issue 43: the trainer blamed the final prefetch). */
static int is_handoff(const stage *s)
{
    return is(s, "prefetch");
}

/* The pipeline's work on its path: every stage's but the hand-overs'. */
static double work_total(const tfc_pipeline *p, const tfc_stage_profile *st, int n)
{
    double total = 0;
    for (int i = 0; i < n; i++)
        if (!is_handoff(p->stages[i])) total += st[i].path_s;
    return total;
}

int tfc_pipeline_profile_advice(const tfc_pipeline *p, char *buf, size_t size)
{
    tfc_stage_profile st[64];
    int n = tfc_pipeline_profile(p, st, 64);
    if (n > 64) n = 64;
    double total = work_total(p, st, n);
    int worst = -1;
    for (int i = 0; i < n; i++)
        if (!is_handoff(p->stages[i]) && st[i].path_s > 0 &&
            (worst < 0 || st[i].path_s > st[worst].path_s))
            worst = i;
    if (worst < 0 || total <= 0) {
        snprintf(buf, size, "nothing was timed yet");
        return -1;
    }
    const stage *s = p->stages[worst];
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    /* The last map above the slowest stage reached through lazy stages only (ids pass
     * through them): given num_parallel_calls, its workers run the maps before it and the
     * reads too. */
    int last = worst;
    for (int j = worst + 1; j < p->n && p->stages[j - 1]->lazy; j++) {
        if (!is(p->stages[j], "map")) continue;
        last = j;
        if (p->stages[j]->threads > 1) break;
    }
    char what[400];
    int par = st[worst].threads; /* threads its work runs on already */
    const char *lm = p->stages[last]->label;
    int mapped = is(s, "map") || last > worst; /* a map can take it onto workers */
    if (mapped && par <= 1 && last == worst)
        snprintf(what, sizeof what, "try num_parallel_calls: %ld on it (its results keep their "
                 "order)", cores);
    else if (mapped && par <= 1)
        snprintf(what, sizeof what, "give %s, the last map of its chain, num_parallel_calls: "
                 "%ld (the chain's maps and the reads then run on its workers, in order)", lm,
                 cores);
    else if (mapped && par < cores)
        snprintf(what, sizeof what, "raise num_parallel_calls of %s (%d now, %ld cores)", lm,
                 par, cores);
    else if (mapped)
        snprintf(what, sizeof what, "its work runs on every core already: cache after it what "
                 "does not change from epoch to epoch (no random op), or make it cheaper");
    else if (worst == 0 && !in_memory(p->src))
        snprintf(what, sizeof what, "add cache after the source when its records fit in "
                 "memory (they are read again every epoch), or read them on a parallel map");
    else if (worst == 0)
        snprintf(what, sizeof what, "the records are in memory already: the copies per "
                 "element are the cost");
    else if (is(s, "shuffle"))
        snprintf(what, sizeof what, "shuffle before the maps that decode (it then buffers "
                 "record ids, not decoded elements), or a smaller buffer_size");
    else if (is(s, "batch") || is(s, "padded_batch") || is(s, "bucket_by_sequence_length"))
        snprintf(what, sizeof what, "batching copies every element once: a smaller element "
                 "dtype (cast before batching) is what lowers it");
    else
        snprintf(what, sizeof what, "it is the largest share; cache what does not change "
                 "before it, or prefetch after it");
    int has_prefetch = is(tfc_pipeline_top(p), "prefetch");
    /* threads that run at once: the consumer, each prefetch's and each parallel map's */
    long threads = 1;
    for (int i = 0; i < p->n; i++)
        threads += is(p->stages[i], "prefetch") +
                   (p->stages[i]->threads > 1 ? p->stages[i]->threads : 0);
    char crowd[160] = "";
    if (threads > cores)
        snprintf(crowd, sizeof crowd, "; %ld threads share %ld cores, so the times include "
                 "waits for a core", threads, cores);
    snprintf(buf, size, "%s does %.0f%% of the pipeline's work: %s%s%s", st[worst].name,
             100 * st[worst].path_s / total, what,
             has_prefetch ? "" : "; end the pipeline with prefetch so batches are prepared "
                                 "while the model trains", crowd);
    return worst;
}

void tfc_pipeline_profile_print(const tfc_pipeline *p, double wall_s, FILE *f)
{
    tfc_stage_profile st[64];
    int n = tfc_pipeline_profile(p, st, 64);
    if (n > 64) n = 64;
    double total = work_total(p, st, n);
    fprintf(f, "%-36s %10s %11s %9s %9s %7s %6s %9s\n", "stage", "elements", "elements/s",
            "busy s", "us/elem", "threads", "share", "waited s");
    for (int i = 0; i < n; i++) {
        const tfc_stage_profile *s = &st[i];
        char share[16] = "     -"; /* a hand-over has none */
        if (!is_handoff(p->stages[i]))
            snprintf(share, sizeof share, "%5.0f%%", total > 0 ? 100 * s->path_s / total : 0);
        fprintf(f, "%-36s %10lld %11.0f %9.3f %9.2f %7d %s %9.3f\n", s->name,
                (long long)s->elements, wall_s > 0 ? (double)s->elements / wall_s : 0,
                s->busy_s, s->elements ? 1e6 * s->busy_s / (double)s->elements : 0,
                s->threads, share, s->waited_s);
    }
    char advice[800];
    tfc_pipeline_profile_advice(p, advice, sizeof advice);
    fprintf(f, "slowest: %s\n", advice);
}
