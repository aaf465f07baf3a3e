/* prefetch: a background thread keeps up to buffer_size elements ready while the consumer
 * works. The thread starts on the first read and is stopped (joined) before a reset, a state
 * save or restore, so the stages below are never touched by two threads; its buffer is then
 * filled to buffer_size and saved, so a state depends on the position alone. Errors from the
 * thread reach the consumer in element order. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "data/internal.h"

typedef struct prefetch_stage {
    stage base;
    int cap;
    elem *ring;
    int head, count;
    pthread_t thread;
    int running, stop;
    int up_end;            /* upstream reported its end (after the buffered elements) */
    tfc_status st;         /* upstream failed (after the buffered elements) */
    tfc_error *terr;       /* the thread's error */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} prefetch_stage;

static void *producer(void *arg)
{
    prefetch_stage *f = arg;
    stage *up = f->base.up;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (!f->stop && f->count == f->cap) pthread_cond_wait(&f->cv, &f->mu);
        if (f->stop) break;
        pthread_mutex_unlock(&f->mu);
        elem x = {0};
        int end = 0;
        tfc_error_clear(f->terr);
        tfc_status st = tfc_up_next(up, &x, &end, f->terr);
        pthread_mutex_lock(&f->mu);
        if (st || end) {
            f->st = st;
            f->up_end = 1;
            pthread_cond_broadcast(&f->cv);
            break;
        }
        f->ring[(f->head + f->count) % f->cap] = x;
        f->count++;
        pthread_cond_broadcast(&f->cv);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

static void prefetch_quiesce(stage *s)
{
    prefetch_stage *f = (prefetch_stage *)s;
    if (!f->running) return;
    pthread_mutex_lock(&f->mu);
    f->stop = 1;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->thread, NULL);
    f->running = 0;
    f->stop = 0;
}

static tfc_status prefetch_next(stage *s, elem *out, int *end, tfc_error *err)
{
    prefetch_stage *f = (prefetch_stage *)s;
    if (!f->running && !f->up_end && f->count < f->cap) {
        if (pthread_create(&f->thread, NULL, producer, f) == 0) {
            f->running = 1;
        } else if (f->count == 0) {
            /* No thread to be had: read synchronously rather than fail. */
            return tfc_up_next(s->up, out, end, err);
        }
    }
    pthread_mutex_lock(&f->mu);
    uint64_t blocked = tfc_prof_block_begin();
    while (f->count == 0 && !f->up_end && f->running) pthread_cond_wait(&f->cv, &f->mu);
    tfc_prof_block_end(blocked);
    tfc_status st = TFC_OK;
    if (f->count > 0) {
        tfc_elem_move(out, &f->ring[f->head]);
        f->head = (f->head + 1) % f->cap;
        f->count--;
        pthread_cond_broadcast(&f->cv);
    } else if (f->st) {
        st = f->st;
        if (err) *err = *f->terr;
    } else {
        *end = 1;
    }
    pthread_mutex_unlock(&f->mu);
    return st;
}

static void prefetch_clear(prefetch_stage *f)
{
    for (int i = 0; i < f->count; i++) tfc_elem_free(&f->ring[(f->head + i) % f->cap]);
    f->head = f->count = 0;
    f->up_end = 0;
    f->st = TFC_OK;
}

static void prefetch_reset(stage *s)
{
    prefetch_stage *f = (prefetch_stage *)s;
    prefetch_quiesce(s);
    prefetch_clear(f);
    s->up->ops->reset(s->up);
}

/* The producer's loop run here, with the thread stopped, until the buffer is full. */
static void prefetch_fill(stage *s)
{
    prefetch_stage *f = (prefetch_stage *)s;
    while (!f->up_end && f->count < f->cap) {
        elem x = {0};
        int end = 0;
        tfc_error_clear(f->terr);
        tfc_status st = tfc_up_next(s->up, &x, &end, f->terr);
        if (st || end) {
            f->st = st;
            f->up_end = 1;
            break;
        }
        f->ring[(f->head + f->count) % f->cap] = x;
        f->count++;
    }
}

static tfc_status prefetch_save(stage *s, wbuf *w, tfc_error *err)
{
    prefetch_stage *f = (prefetch_stage *)s;
    prefetch_quiesce(s);
    /* A failure waiting behind the buffer is not a position: save the buffer and let the
     * resumed run meet the failure again. */
    tfc_wbuf_u64(w, (uint64_t)(f->up_end && !f->st));
    tfc_wbuf_u64(w, (uint64_t)f->count);
    for (int i = 0; i < f->count; i++)
        tfc_stage_save_elem(w, &f->ring[(f->head + i) % f->cap], s->up);
    return TFC_OK;
}

static tfc_status prefetch_restore(stage *s, rbuf *r, tfc_error *err)
{
    prefetch_stage *f = (prefetch_stage *)s;
    prefetch_quiesce(s);
    prefetch_clear(f);
    int up_end = tfc_rbuf_u64(r) != 0;
    uint64_t n = tfc_rbuf_u64(r);
    if (r->bad || n > (uint64_t)f->cap)
        return tfc_error_set(err, TFC_ERR_FORMAT, "pipeline state: bad prefetch buffer");
    for (uint64_t i = 0; i < n; i++) {
        tfc_status st = tfc_stage_restore_elem(r, s->up, &f->ring[i], err);
        if (st) return st;
        f->count = (int)i + 1;
    }
    f->up_end = up_end;
    return TFC_OK;
}

static void prefetch_free(stage *s)
{
    prefetch_stage *f = (prefetch_stage *)s;
    prefetch_quiesce(s);
    prefetch_clear(f);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f->ring);
    free(f->terr);
    free(f);
}

static const stage_ops prefetch_ops = {
    .name = "prefetch",
    .next = prefetch_next,
    .fetch = tfc_stage_pass_fetch,
    .reset = prefetch_reset,
    .quiesce = prefetch_quiesce,
    .fill = prefetch_fill,
    .save = prefetch_save,
    .restore = prefetch_restore,
    .free = prefetch_free,
};

static tfc_status prefetch_push(tfc_pipeline *p, int buffer_size, tfc_error *err)
{
    if (buffer_size < 1 || buffer_size > 4096)
        return tfc_error_set(err, TFC_ERR_CONFIG, "prefetch: buffer_size must be in [1, 4096], "
                             "found %d", buffer_size);
    prefetch_stage *f = calloc(1, sizeof *f);
    if (!f) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    f->ring = calloc((size_t)buffer_size, sizeof *f->ring);
    f->terr = malloc(sizeof *f->terr);
    if (!f->ring || !f->terr) {
        free(f->ring);
        free(f->terr);
        free(f);
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    f->cap = buffer_size;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    stage *s = &f->base, *up = tfc_pipeline_top(p);
    s->ops = &prefetch_ops;
    s->fetchable = up->fetchable;
    s->spec = up->spec;
    s->config_hash = tfc_data_hash_mix(tfc_data_hash_str(0, "prefetch"), (uint64_t)buffer_size);
    tfc_pipeline_push(p, s);
    return TFC_OK;
}

typedef struct prefetch_cfg {
    int buffer_size;
} prefetch_cfg;

static const tfc_field prefetch_fields[] = {
    {"buffer_size", TFC_F_INT, offsetof(prefetch_cfg, buffer_size), "2", 1, 4096, NULL,
     "elements prepared ahead by a background thread"},
    {NULL},
};

static tfc_status prefetch_push_planned(tfc_pipeline *p, stage_plan *pl, tfc_error *err)
{
    return prefetch_push(p, ((const prefetch_cfg *)pl->args)->buffer_size, err);
}

const stage_def tfc_stage_prefetch = {
    .name = "prefetch",
    .help = "prepares elements in the background",
    .fields = prefetch_fields,
    .args_size = sizeof(prefetch_cfg),
    .push = prefetch_push_planned,
};

tfc_status tfc_pipeline_prefetch(tfc_pipeline *p, int buffer_size, tfc_error *err)
{
    return prefetch_push(p, buffer_size, err);
}
