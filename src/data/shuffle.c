/* shuffle: tf.data's buffer algorithm. Fill a buffer of buffer_size elements, emit a
 * uniformly drawn one and refill its place from upstream, so output i is drawn from the
 * first i + buffer_size inputs. Over a lazy upstream the buffer holds element ids only and
 * elements are made when they leave it. */
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "data/internal.h"

typedef struct shuffle_args {
    int64_t buffer_size;
    int64_t seed; /* < 0: the pipeline's seed */
    int reshuffle_each_iteration;
} shuffle_args;

typedef struct shuffle_stage {
    stage base;
    shuffle_args a;
    uint64_t key;
    int lazy_buf;     /* buffer of ids (upstream lazy) rather than of elements */
    elem_id *ids;
    elem *els;
    int64_t n, cap;
    uint64_t epoch;   /* iterations so far (advances only with reshuffle_each_iteration) */
    uint64_t draws;   /* draws in this iteration */
    int up_end;
} shuffle_stage;

static tfc_status shuffle_grow(shuffle_stage *sh, tfc_error *err)
{
    if (sh->n < sh->cap) return TFC_OK;
    int64_t cap = sh->cap ? sh->cap * 2 : 64;
    if (cap > sh->a.buffer_size) cap = sh->a.buffer_size;
    void *nb = sh->lazy_buf ? realloc(sh->ids, (size_t)cap * sizeof *sh->ids)
                            : realloc(sh->els, (size_t)cap * sizeof *sh->els);
    if (!nb)
        return tfc_error_set(err, TFC_ERR_NOMEM, "shuffle: cannot grow the buffer to %lld "
                             "elements; hint: lower buffer_size", (long long)cap);
    if (sh->lazy_buf) sh->ids = nb;
    else sh->els = nb;
    sh->cap = cap;
    return TFC_OK;
}

/* Tops the buffer up to buffer_size from upstream. */
static tfc_status shuffle_fill(shuffle_stage *sh, tfc_error *err)
{
    stage *up = sh->base.up;
    while (!sh->up_end && sh->n < sh->a.buffer_size) {
        tfc_status st = shuffle_grow(sh, err);
        if (st) return st;
        int end = 0;
        if (sh->lazy_buf) st = tfc_up_next_id(up, &sh->ids[sh->n], &end, err);
        else {
            memset(&sh->els[sh->n], 0, sizeof sh->els[0]);
            st = tfc_up_next(up, &sh->els[sh->n], &end, err);
        }
        if (st) return st;
        if (end) sh->up_end = 1;
        else sh->n++;
    }
    return TFC_OK;
}

/* Draws the slot to emit and closes the gap with the last element. */
static int64_t shuffle_pick(shuffle_stage *sh)
{
    return (int64_t)tfc_rng_below(sh->key, sh->epoch, sh->draws++, (uint64_t)sh->n);
}

static tfc_status shuffle_next_id(stage *s, elem_id *id, int *end, tfc_error *err)
{
    shuffle_stage *sh = (shuffle_stage *)s;
    tfc_status st = shuffle_fill(sh, err);
    if (st) return st;
    if (sh->n == 0) {
        *end = 1;
        return TFC_OK;
    }
    int64_t i = shuffle_pick(sh);
    *id = sh->ids[i];
    sh->ids[i] = sh->ids[--sh->n];
    return TFC_OK;
}

static tfc_status shuffle_next(stage *s, elem *out, int *end, tfc_error *err)
{
    shuffle_stage *sh = (shuffle_stage *)s;
    if (sh->lazy_buf) return tfc_stage_next_lazy(s, out, end, err);
    tfc_status st = shuffle_fill(sh, err);
    if (st) return st;
    if (sh->n == 0) {
        *end = 1;
        return TFC_OK;
    }
    int64_t i = shuffle_pick(sh);
    tfc_elem_move(out, &sh->els[i]);
    sh->els[i] = sh->els[--sh->n];
    return TFC_OK;
}

static void shuffle_clear(shuffle_stage *sh)
{
    if (!sh->lazy_buf)
        for (int64_t i = 0; i < sh->n; i++) tfc_elem_free(&sh->els[i]);
    sh->n = 0;
}

static void shuffle_reset(stage *s)
{
    shuffle_stage *sh = (shuffle_stage *)s;
    shuffle_clear(sh);
    sh->up_end = 0;
    sh->draws = 0;
    if (sh->a.reshuffle_each_iteration) sh->epoch++;
    s->up->ops->reset(s->up);
}

/* The buffer is saved in slot order, so the draws that follow a restore pick the same
 * elements; lazily buffered elements are ids by nature. */
static tfc_status shuffle_save(stage *s, wbuf *w, tfc_error *err)
{
    shuffle_stage *sh = (shuffle_stage *)s;
    tfc_wbuf_u64(w, sh->epoch);
    tfc_wbuf_u64(w, sh->draws);
    tfc_wbuf_u64(w, (uint64_t)sh->up_end);
    tfc_wbuf_u64(w, (uint64_t)sh->n);
    for (int64_t i = 0; i < sh->n; i++) {
        if (sh->lazy_buf) {
            tfc_wbuf_u64(w, sh->ids[i].epoch);
            tfc_wbuf_u64(w, sh->ids[i].index);
        } else {
            tfc_stage_save_elem(w, &sh->els[i], s->up);
        }
    }
    return TFC_OK;
}

static tfc_status shuffle_restore(stage *s, rbuf *r, tfc_error *err)
{
    shuffle_stage *sh = (shuffle_stage *)s;
    shuffle_clear(sh);
    sh->epoch = tfc_rbuf_u64(r);
    sh->draws = tfc_rbuf_u64(r);
    sh->up_end = tfc_rbuf_u64(r) != 0;
    uint64_t n = tfc_rbuf_u64(r);
    /* Each saved entry takes at least 16 bytes: bound n by the blob before allocating. */
    if (r->bad || n > (uint64_t)sh->a.buffer_size || n > (r->len - r->pos) / 16)
        return tfc_error_set(err, TFC_ERR_FORMAT, "pipeline state: bad shuffle buffer");
    for (uint64_t i = 0; i < n; i++) {
        tfc_status st = shuffle_grow(sh, err);
        if (st) return st;
        if (sh->lazy_buf) {
            sh->ids[i].epoch = tfc_rbuf_u64(r);
            sh->ids[i].index = tfc_rbuf_u64(r);
            if (r->bad || sh->ids[i].index >= (uint64_t)s->p->src->count)
                return tfc_error_set(err, TFC_ERR_FORMAT, "pipeline state: bad shuffle buffer");
        } else {
            st = tfc_stage_restore_elem(r, s->up, &sh->els[i], err);
            if (st) return st;
        }
        sh->n = (int64_t)i + 1;
    }
    return TFC_OK;
}

static void shuffle_free(stage *s)
{
    shuffle_stage *sh = (shuffle_stage *)s;
    shuffle_clear(sh);
    free(sh->ids);
    free(sh->els);
    free(sh);
}

static const stage_ops shuffle_ops = {
    .name = "shuffle",
    .next = shuffle_next,
    .next_id = shuffle_next_id,
    .fetch = tfc_stage_pass_fetch,
    .reset = shuffle_reset,
    .save = shuffle_save,
    .restore = shuffle_restore,
    .free = shuffle_free,
};

static tfc_status shuffle_push(tfc_pipeline *p, const shuffle_args *a, tfc_error *err)
{
    if (a->buffer_size < 1)
        return tfc_error_set(err, TFC_ERR_CONFIG, "shuffle: buffer_size must be >= 1, found %lld",
                             (long long)a->buffer_size);
    shuffle_stage *sh = calloc(1, sizeof *sh);
    if (!sh) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    stage *s = &sh->base, *up = tfc_pipeline_top(p);
    sh->a = *a;
    sh->lazy_buf = up->lazy;
    s->ops = &shuffle_ops;
    s->lazy = up->lazy;
    s->fetchable = up->fetchable;
    s->spec = up->spec;
    uint64_t h = tfc_data_hash_mix(tfc_data_hash_str(0, "shuffle"), (uint64_t)a->buffer_size);
    s->config_hash = tfc_data_hash_mix(h, (uint64_t)a->seed);
    tfc_pipeline_push(p, s);
    /* An explicit seed makes the order independent of the global seed, as in tf.data. */
    sh->key = a->seed >= 0 ? tfc_rng_key((uint64_t)a->seed, 0x5348554646ull) : s->key;
    return TFC_OK;
}

typedef struct shuffle_cfg {
    int buffer_size, seed, reshuffle_each_iteration;
} shuffle_cfg;

static const tfc_field shuffle_fields[] = {
    {"buffer_size", TFC_F_INT, offsetof(shuffle_cfg, buffer_size), NULL, 1, 1 << 30, NULL,
     "elements to draw from (the data set size for a full shuffle)"},
    {"seed", TFC_F_INT, offsetof(shuffle_cfg, seed), "-1", -1, 2147483647, NULL,
     "-1: derived from the solver's seed"},
    {"reshuffle_each_iteration", TFC_F_BOOL, offsetof(shuffle_cfg, reshuffle_each_iteration),
     "true", TFC_UNBOUNDED, NULL, "a new order every pass"},
    {NULL},
};

static tfc_status shuffle_push_planned(tfc_pipeline *p, stage_plan *pl, tfc_error *err)
{
    const shuffle_cfg *c = pl->args;
    shuffle_args a = {c->buffer_size, c->seed, c->reshuffle_each_iteration};
    return shuffle_push(p, &a, err);
}

const stage_def tfc_stage_shuffle = {
    .name = "shuffle",
    .help = "tf.data's buffered shuffle",
    .fields = shuffle_fields,
    .args_size = sizeof(shuffle_cfg),
    .push = shuffle_push_planned,
};

tfc_status tfc_pipeline_shuffle(tfc_pipeline *p, int64_t buffer_size, int64_t seed,
                                int reshuffle_each_iteration, tfc_error *err)
{
    shuffle_args a = {buffer_size, seed < 0 ? -1 : seed, reshuffle_each_iteration != 0};
    return shuffle_push(p, &a, err);
}
