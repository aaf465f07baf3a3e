/* The map stage: a registered op or a user callback applied to every element. With
 * num_parallel_calls N > 1 a background thread runs an OpenMP team of N workers that claim
 * inputs in order (ids when the stages below are lazy, so reading and decoding happen on the
 * workers too), map them and park the results in a ring of in-flight slots; the consumer
 * takes slots in input order. There is no fork/join barrier per block, so a worker delayed
 * by a busy machine holds up only its own element. An error surfaces at the element that
 * caused it, after the elements before it. Randomness is keyed by (seed, stage, epoch,
 * element index), so the output never depends on N or on timing. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "data/internal.h"

#define SLOTS_PER_WORKER 8

/* Results are allocated by the workers and freed by the consumer. glibc then returns the
 * workers' freed heap tops to the system (above 128 KiB by default) and every new result
 * faults its pages in again, which cost more CPU than the decoding it parallelises. A
 * parallel map therefore lets freed memory up to this much stay for reuse, process-wide. */
#define TRIM_THRESHOLD (64 << 20)

enum { SLOT_FREE = 0, SLOT_CLAIMED, SLOT_READY };

typedef struct slot {
    elem x;
    tfc_status st;
    int state;
} slot;

typedef struct map_stage {
    stage base;
    const op_def *def;
    void *args;         /* owned op arguments */
    tfc_map_fn fn;
    void *user;
    int npc;
    uint64_t counter;   /* inputs taken this pass: the random index of id-less inputs */
    uint64_t epoch;     /* passes, for id-less inputs */
    /* num_parallel_calls > 1: slots [head, tail) are in flight, slot k at ring[k % cap] */
    slot *ring;
    int cap;
    uint64_t head, tail;
    int up_end;          /* upstream ended (or failed) at slot end_at */
    uint64_t end_at;
    tfc_status pull_st;  /* the failure of pulling slot end_at, if any */
    uint64_t fail_at;    /* the first slot that failed (UINT64_MAX: none) */
    tfc_error *fail_err; /* its error (pull or map) */
    int running, stop;
    int consumer_waiting, workers_waiting; /* wake-ups only when someone sleeps */
    pthread_t driver;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_ready;
} map_stage;

static tfc_status apply(map_stage *m, elem *x, uint64_t counter, tfc_error *err)
{
    tfc_map_ctx ctx;
    ctx.epoch = x->has_id ? x->id.epoch : m->epoch;
    ctx.index = x->has_id ? x->id.index : counter;
    ctx.key = tfc_elem_key(m->base.key, ctx.epoch, ctx.index);
    tfc_status st = m->def ? m->def->apply(m->args, &x->e, &ctx, err)
                           : m->fn(&x->e, &ctx, m->user, err);
    if (st == TFC_OK && !x->e.comp[TFC_COMP_FEATURES].data)
        st = tfc_error_set(err, TFC_ERR_INTERNAL, "map: the op left no features");
    if (st) {
        char where[600];
        tfc_pipeline_describe_elem(m->base.p, x, where, sizeof where);
        if (err && !strstr(err->msg, where)) tfc_error_prefix(err, "%s: ", where);
    }
    return st;
}

static tfc_status map_fetch(stage *s, elem_id id, elem *out, tfc_error *err)
{
    tfc_status st = tfc_up_fetch(s->up, id, out, err);
    if (!st) st = apply((map_stage *)s, out, 0, err);
    if (st) tfc_elem_free(out);
    return st;
}

static tfc_status map_next_id(stage *s, elem_id *id, int *end, tfc_error *err)
{
    return tfc_up_next_id(s->up, id, end, err);
}

/* ---- the parallel path -------------------------------------------------------------------- */

/* Records a failure of slot k if it is the first in input order. Called under mu. */
static void note_failure(map_stage *m, uint64_t k, const tfc_error *e)
{
    if (k >= m->fail_at) return;
    m->fail_at = k;
    *m->fail_err = *e;
}

/* A waiting consumer is woken once the window is ready in order but for the inputs the
 * workers may still be mapping (or the window is full, or no more inputs will be claimed),
 * not for every element: it then takes them all in one go. Waking at half the window
 * instead cost 35% more context switches with 2 workers on 2 cores (6,700 against 4,300
 * voluntary ones for 30,000 images). Called under mu. */
static int consumer_should_wake(const map_stage *m)
{
    uint64_t ready = 0;
    while (m->head + ready < m->tail &&
           m->ring[(m->head + ready) % (uint64_t)m->cap].state == SLOT_READY)
        ready++;
    if (ready == 0) return 0;
    return ready + (uint64_t)m->npc >= (uint64_t)m->cap || m->up_end ||
           m->tail - m->head >= (uint64_t)m->cap;
}

/* One worker step, called with mu held: claims the next input and maps it (mu released
 * meanwhile). Returns 0 when there was nothing to claim. */
static int work_one(map_stage *m, tfc_error *local)
{
    stage *up = m->base.up;
    if (m->up_end || m->tail - m->head >= (uint64_t)m->cap) return 0;
    uint64_t k = m->tail;
    slot *s = &m->ring[k % (uint64_t)m->cap];
    memset(&s->x, 0, sizeof s->x);
    int end = 0, lazy = up->lazy;
    prof_frame f;
    tfc_prof_work_begin(&m->base, &f);
    /* A cheap reset: reporting fills every field of the first error. */
    local->code = TFC_OK;
    local->count = 0;
    local->text[0] = 0;
    /* Pulling from upstream is serial: it happens under the lock. */
    tfc_status st = lazy ? tfc_up_next_id(up, &s->x.id, &end, local)
                         : tfc_up_next(up, &s->x, &end, local);
    if (st || end) {
        tfc_elem_free(&s->x);
        m->up_end = 1;
        m->end_at = k;
        m->pull_st = st;
        if (st) note_failure(m, k, local);
        pthread_cond_broadcast(&m->cv_ready);
        pthread_cond_broadcast(&m->cv_work);
        tfc_prof_work_end(&m->base, &f, 1);
        return 1;
    }
    s->x.has_id |= lazy;
    s->state = SLOT_CLAIMED;
    uint64_t counter = m->counter++;
    m->tail++;
    pthread_mutex_unlock(&m->mu);
    if (lazy) {
        elem_id id = s->x.id;
        st = tfc_up_fetch(up, id, &s->x, local);
    }
    if (!st) st = apply(m, &s->x, counter, local);
    tfc_prof_work_end(&m->base, &f, st != TFC_OK);
    pthread_mutex_lock(&m->mu);
    s->st = st;
    s->state = SLOT_READY;
    if (st) note_failure(m, k, local);
    if (m->consumer_waiting && consumer_should_wake(m)) pthread_cond_signal(&m->cv_ready);
    return 1;
}

static void worker_loop(map_stage *m)
{
    tfc_error local;
    pthread_mutex_lock(&m->mu);
    while (!m->stop) {
        if (work_one(m, &local)) continue;
        m->workers_waiting++;
        pthread_cond_wait(&m->cv_work, &m->mu);
        m->workers_waiting--;
    }
    pthread_mutex_unlock(&m->mu);
}

/* The background thread: its OpenMP team is the map's workers until told to stop. */
static void *driver_main(void *arg)
{
    map_stage *m = arg;
#pragma omp parallel num_threads(m->npc)
    worker_loop(m);
    return NULL;
}

static void map_quiesce(stage *s)
{
    map_stage *m = (map_stage *)s;
    if (!m->running) return;
    pthread_mutex_lock(&m->mu);
    m->stop = 1;
    pthread_cond_broadcast(&m->cv_work);
    pthread_mutex_unlock(&m->mu);
    pthread_join(m->driver, NULL); /* workers finish the inputs they claimed first */
    m->running = 0;
    /* Under the lock, so the workers' last use of the stage visibly happens before. */
    pthread_mutex_lock(&m->mu);
    m->stop = 0;
    pthread_mutex_unlock(&m->mu);
}

static tfc_status parallel_next(map_stage *m, elem *out, int *end, tfc_error *err)
{
    if (!m->running && !m->up_end && pthread_create(&m->driver, NULL, driver_main, m) == 0)
        m->running = 1;
    tfc_status st = TFC_OK;
    tfc_error *local = m->running ? NULL : malloc(sizeof *local);
    pthread_mutex_lock(&m->mu);
    for (;;) {
        slot *s = &m->ring[m->head % (uint64_t)m->cap];
        if (m->head < m->tail && s->state == SLOT_READY) {
            if (s->st) {
                st = s->st;
                if (err) *err = *m->fail_err;
                break;
            }
            tfc_elem_move(out, &s->x);
            s->state = SLOT_FREE;
            m->head++;
            if (m->workers_waiting) pthread_cond_broadcast(&m->cv_work);
            break;
        }
        if (m->up_end && m->head == m->end_at) {
            if (m->pull_st) {
                st = m->pull_st;
                if (err) *err = *m->fail_err;
            } else {
                *end = 1;
            }
            break;
        }
        /* Without a thread to be had, the consumer works itself. */
        if (!m->running && local) work_one(m, local);
        else if (!m->running) st = tfc_error_set(err, TFC_ERR_NOMEM, "map: out of memory");
        else {
            m->consumer_waiting = 1;
            uint64_t blocked = tfc_prof_block_begin();
            pthread_cond_wait(&m->cv_ready, &m->mu);
            tfc_prof_block_end(blocked);
            m->consumer_waiting = 0;
        }
        if (st) break;
    }
    pthread_mutex_unlock(&m->mu);
    free(local);
    return st;
}

static void clear_ring(map_stage *m)
{
    for (uint64_t k = m->head; k < m->tail; k++) {
        slot *s = &m->ring[k % (uint64_t)m->cap];
        tfc_elem_free(&s->x);
        s->state = SLOT_FREE;
    }
    m->head = m->tail = 0;
    m->up_end = 0;
    m->end_at = 0;
    m->pull_st = TFC_OK;
    m->fail_at = UINT64_MAX;
}

/* ---- the stage ---------------------------------------------------------------------------- */

static tfc_status map_next(stage *s, elem *out, int *end, tfc_error *err)
{
    map_stage *m = (map_stage *)s;
    if (m->npc > 1) return parallel_next(m, out, end, err);
    tfc_status st = tfc_up_next(s->up, out, end, err);
    if (st || *end) return st;
    st = apply(m, out, m->counter++, err);
    if (st) tfc_elem_free(out);
    return st;
}

static void map_reset(stage *s)
{
    map_stage *m = (map_stage *)s;
    map_quiesce(s);
    if (m->ring) clear_ring(m);
    m->counter = 0;
    m->epoch++;
    s->up->ops->reset(s->up);
}

/* The workers' loop run here, with the driver stopped, until the window is full. */
static void map_fill(stage *s)
{
    map_stage *m = (map_stage *)s;
    if (!m->ring) return;
    tfc_error local;
    pthread_mutex_lock(&m->mu);
    while (m->fail_at == UINT64_MAX && work_one(m, &local)) {}
    pthread_mutex_unlock(&m->mu);
}

/* In-flight results are saved as the map's own output (by id when re-makeable), up to the
 * first failure; the pipeline is quiesced, so every claimed slot is ready. */
static tfc_status map_save(stage *s, wbuf *w, tfc_error *err)
{
    map_stage *m = (map_stage *)s;
    map_quiesce(s);
    uint64_t n = 0;
    while (m->ring && m->head + n < m->tail && m->head + n < m->fail_at) n++;
    /* A failure ahead is not a position: the resumed run reads on from upstream. */
    int up_end = m->up_end && !m->pull_st && m->head + n == m->end_at;
    tfc_wbuf_u64(w, m->counter - (m->tail - m->head - n));
    tfc_wbuf_u64(w, m->epoch);
    tfc_wbuf_u64(w, (uint64_t)up_end);
    tfc_wbuf_u64(w, n);
    for (uint64_t i = 0; i < n; i++)
        tfc_stage_save_elem(w, &m->ring[(m->head + i) % (uint64_t)m->cap].x, s);
    return TFC_OK;
}

static tfc_status map_restore(stage *s, rbuf *r, tfc_error *err)
{
    map_stage *m = (map_stage *)s;
    map_quiesce(s);
    if (m->ring) clear_ring(m);
    m->counter = tfc_rbuf_u64(r);
    m->epoch = tfc_rbuf_u64(r);
    int up_end = tfc_rbuf_u64(r) != 0;
    uint64_t n = tfc_rbuf_u64(r);
    if (r->bad || n > (uint64_t)m->cap)
        return tfc_error_set(err, TFC_ERR_FORMAT, "pipeline state: bad map buffer");
    for (uint64_t i = 0; i < n; i++) {
        slot *sl = &m->ring[i];
        tfc_status st = tfc_stage_restore_elem(r, s, &sl->x, err);
        if (st) return st;
        sl->st = TFC_OK;
        sl->state = SLOT_READY;
        m->tail = i + 1;
    }
    if (up_end) {
        m->up_end = 1;
        m->end_at = n;
    }
    return TFC_OK;
}

static void map_free(stage *s)
{
    map_stage *m = (map_stage *)s;
    map_quiesce(s);
    if (m->ring) clear_ring(m);
    if (m->def && m->def->fini) m->def->fini(m->args);
    if (m->ring) {
        pthread_mutex_destroy(&m->mu);
        pthread_cond_destroy(&m->cv_work);
        pthread_cond_destroy(&m->cv_ready);
    }
    free(m->args);
    free(m->ring);
    free(m->fail_err);
    free(m);
}

static const stage_ops map_ops = {
    .name = "map",
    .next = map_next,
    .next_id = map_next_id,
    .fetch = map_fetch,
    .reset = map_reset,
    .quiesce = map_quiesce,
    .fill = map_fill,
    .save = map_save,
    .restore = map_restore,
    .free = map_free,
};

/* Appends a map stage running `def` with `args` (a malloc'd struct of def->args_size the
 * stage takes ownership of, already init'ed) or a user callback. */
static tfc_status map_stage_push(tfc_pipeline *p, const op_def *def, void *args, tfc_map_fn fn,
                                 void *user, const tfc_element_spec *out_spec, int npc,
                                 uint64_t hash, tfc_error *err)
{
    map_stage *m = calloc(1, sizeof *m);
    npc = npc < 1 ? 1 : npc;
    if (m && npc > 1) {
        m->cap = npc * SLOTS_PER_WORKER;
        m->ring = calloc((size_t)m->cap, sizeof *m->ring);
        m->fail_err = malloc(sizeof *m->fail_err);
    }
    if (!m || (npc > 1 && (!m->ring || !m->fail_err))) {
        if (m) {
            free(m->ring);
            free(m->fail_err);
            free(m);
        }
        if (def && def->fini) def->fini(args);
        free(args);
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    if (m->ring) {
        pthread_mutex_init(&m->mu, NULL);
        pthread_cond_init(&m->cv_work, NULL);
        pthread_cond_init(&m->cv_ready, NULL);
        m->fail_at = UINT64_MAX;
#ifdef __GLIBC__
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD);
#endif
    }
    stage *s = &m->base, *up = tfc_pipeline_top(p);
    m->def = def;
    m->args = args;
    m->fn = fn;
    m->user = user;
    m->npc = npc;
    s->ops = &map_ops;
    /* A parallel map drives its own workers, so stages above see it as eager; a serial
     * map stays lazy when its input is, and runs on the workers of a parallel map above. */
    s->lazy = up->lazy && npc == 1;
    s->fetchable = up->fetchable;
    s->spec = out_spec ? *out_spec : up->spec;
    s->config_hash = tfc_data_hash_mix(tfc_data_hash_str(0, def ? def->name : "map_fn"), hash);
    s->threads = npc;
    snprintf(s->label, sizeof s->label, "map %s", def ? def->name : "(callback)");
    tfc_pipeline_push(p, s);
    return TFC_OK;
}

tfc_status tfc_pipeline_map(tfc_pipeline *p, tfc_map_fn fn, void *user,
                            const tfc_element_spec *out_spec, int num_parallel_calls,
                            tfc_error *err)
{
    if (!fn) return tfc_error_set(err, TFC_ERR_CONFIG, "map: the callback is NULL");
    if (num_parallel_calls < 1 || num_parallel_calls > 256)
        return tfc_error_set(err, TFC_ERR_CONFIG, "map: num_parallel_calls must be in [1, 256], "
                             "found %d", num_parallel_calls);
    return map_stage_push(p, NULL, NULL, fn, user, out_spec, num_parallel_calls, 0, err);
}

/* ---- the stage of a solver file: `- map: {op: NAME, ...}` --------------------------------- */

static void map_plan(const stage_plan *pl, tfc_data_plan *out)
{
    if (pl->op->plan) pl->op->plan(pl->args, out);
}

/* Initialises the op against the element spec, then appends the stage with its args. */
static tfc_status map_push_planned(tfc_pipeline *p, stage_plan *pl, tfc_error *err)
{
    op_build b = {pl->at, pl->key, err, &p->opt, p->src, &p->vocab};
    stage *top = tfc_pipeline_top(p);
    tfc_element_spec out = top->spec;
    /* An op on elements of several inputs must be told which (component:); the others work
     * on the features as one input, or pair them with the labels. */
    int named = 0;
    for (const tfc_field *f = pl->op->fields; f->name && !named; f++)
        named = !strcmp(f->name, "component");
    tfc_status st = TFC_OK;
    if (top->spec.ninputs > 1 && !named) {
        char inputs[600];
        st = tfc_node_error(err, TFC_ERR_CONFIG, pl->at, pl->key, "%s works on elements of one "
                            "input; these have %d (%s) (scale, cast, reshape, one_hot, pad and "
                            "truncate take component: NAME)", pl->op->name, top->spec.ninputs,
                            tfc_data_inputs_str(&top->spec, inputs, sizeof inputs));
    }
    if (!st && top->spec.nlabels > 1 && pl->op->one_label) {
        char labels[600];
        st = tfc_node_error(err, TFC_ERR_CONFIG, pl->at, pl->key, "%s works on elements of one "
                            "label; these have %d (%s)", pl->op->name, top->spec.nlabels,
                            tfc_data_labels_str(&top->spec, labels, sizeof labels));
    }
    if (!st) st = pl->op->init(pl->args, &b, &top->spec, &out, err);
    if (st) {
        if (pl->op->fini) pl->op->fini(pl->args);
        return st;
    }
    map_common *mc = pl->args;
    mc->op = pl->op->name; /* the YAML text may not outlive the pipeline */
    int npc = mc->num_parallel_calls;
    void *args = pl->args;
    pl->args = NULL;
    uint64_t h = tfc_data_hash_mix(tfc_data_hash_str(0, pl->op->name), (uint64_t)npc);
    return map_stage_push(p, pl->op, args, NULL, NULL, &out, npc, h, err);
}

static const tfc_field map_fields[] = {
    {"op", TFC_F_STRING, 0, NULL, TFC_UNBOUNDED, NULL, "the map op (see the op list)"},
    {"num_parallel_calls", TFC_F_INT, 0, "1", 1, 256, NULL, "elements mapped in parallel"},
    {NULL},
};

const stage_def tfc_stage_map = {
    .name = "map",
    .help = "applies a named op to every element",
    .fields = map_fields,
    .runs_op = 1,
    .plan = map_plan,
    .push = map_push_planned,
};
