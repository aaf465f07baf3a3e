/* The element-wise and ordering stages: filter, shuffle, repeat, take, skip and cache, with
 * tf.data's documented semantics. Shuffle is tf.data's buffer algorithm: fill a buffer of
 * buffer_size elements, emit a uniformly drawn one and refill its place from upstream, so
 * output i is drawn from the first i + buffer_size inputs. Over a lazy upstream the buffer
 * holds element ids only and elements are made when they leave it. */
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "data/internal.h"

/* ---- filter ------------------------------------------------------------------------------ */

typedef struct filter_stage {
    stage base;
    tfc_filter_fn fn;
    void *user; /* owned copy of the built-in predicate's arguments, or the caller's pointer */
    int owns_user;
} filter_stage;

static tfc_status filter_next(stage *s, elem *out, int *end, tfc_error *err)
{
    filter_stage *f = (filter_stage *)s;
    for (;;) {
        tfc_status st = s->up->ops->next(s->up, out, end, err);
        if (st || *end) return st;
        if (f->fn(&out->e, f->user)) return TFC_OK;
        tfc_elem_free(out);
    }
}

static void pass_reset(stage *s)
{
    s->up->ops->reset(s->up);
}

static tfc_status nothing_save(stage *s, wbuf *w, tfc_error *err)
{
    return TFC_OK;
}

static tfc_status nothing_restore(stage *s, rbuf *r, tfc_error *err)
{
    return TFC_OK;
}

static void filter_free(stage *s)
{
    filter_stage *f = (filter_stage *)s;
    if (f->owns_user) free(f->user);
    free(s);
}

static const stage_ops filter_ops = {
    .name = "filter",
    .next = filter_next,
    .fetch = tfc_stage_pass_fetch,
    .reset = pass_reset,
    .save = nothing_save,
    .restore = nothing_restore,
    .free = filter_free,
};

/* Appends a filter with `fn`; `args` (args_size bytes), when given, is copied and passed as
 * fn's user pointer instead of `user`. `hash` identifies the arguments in saved state. */
static tfc_status filter_push(tfc_pipeline *p, tfc_filter_fn fn, void *user, const void *args,
                              size_t args_size, uint64_t hash, tfc_error *err)
{
    filter_stage *f = calloc(1, sizeof *f);
    if (!f) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    f->fn = fn;
    f->user = user;
    if (args) {
        f->user = malloc(args_size);
        if (!f->user) {
            free(f);
            return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        }
        memcpy(f->user, args, args_size);
        f->owns_user = 1;
    }
    stage *s = &f->base, *up = tfc_pipeline_top(p);
    s->ops = &filter_ops;
    s->fetchable = up->fetchable;
    s->spec = up->spec;
    s->config_hash = tfc_data_hash_mix(tfc_data_hash_str(0, "filter"), hash);
    tfc_pipeline_push(p, s);
    return TFC_OK;
}

/* The built-in predicate of `- filter: {...}`. */
typedef struct filter_cfg {
    int min_length, max_length;
    tfc_int_list labels;
} filter_cfg;

static int filter_pred(const tfc_element *e, void *user)
{
    const filter_cfg *c = user;
    const tfc_tensor *f = &e->comp[TFC_COMP_FEATURES];
    int64_t len = f->shape.ndim ? f->shape.dim[0] : 1;
    if (len < c->min_length) return 0;
    if (c->max_length > 0 && len > c->max_length) return 0;
    if (c->labels.n) {
        const tfc_tensor *l = &e->comp[TFC_COMP_LABELS];
        if (!l->data || tfc_shape_numel(&l->shape) != 1) return 0;
        double v = tfc_value_get(l->data, l->dtype, 0);
        for (int i = 0; i < c->labels.n; i++)
            if (v == c->labels.v[i]) return 1;
        return 0;
    }
    return 1;
}

static const tfc_field filter_fields[] = {
    {"min_length", TFC_F_INT, offsetof(filter_cfg, min_length), "0", 0, 1 << 30, NULL,
     "keep elements whose features have at least this many rows (axis 0)"},
    {"max_length", TFC_F_INT, offsetof(filter_cfg, max_length), "0", 0, 1 << 30, NULL,
     "keep elements with at most this many rows (0: no limit)"},
    {"labels", TFC_F_INT_LIST, offsetof(filter_cfg, labels), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "keep elements whose (scalar) label is one of these"},
    {NULL},
};

static tfc_status filter_push_planned(tfc_pipeline *p, stage_plan *pl, tfc_error *err)
{
    const filter_cfg *c = pl->args;
    uint64_t h = tfc_data_hash_mix(tfc_data_hash_mix((uint64_t)c->min_length,
                                                     (uint64_t)c->max_length),
                                   (uint64_t)c->labels.n);
    if (c->labels.n && !tfc_pipeline_top(p)->spec.comp[TFC_COMP_LABELS].present)
        return tfc_node_error(err, TFC_ERR_CONFIG, pl->at, pl->key, "filter by labels, but the "
                              "elements have no labels");
    return filter_push(p, filter_pred, NULL, c, sizeof *c, h, err);
}

const stage_def tfc_stage_filter = {
    .name = "filter",
    .help = "keeps the elements that pass",
    .fields = filter_fields,
    .args_size = sizeof(filter_cfg),
    .push = filter_push_planned,
};

tfc_status tfc_pipeline_filter(tfc_pipeline *p, tfc_filter_fn fn, void *user, tfc_error *err)
{
    if (!fn) return tfc_error_set(err, TFC_ERR_CONFIG, "filter: the callback is NULL");
    return filter_push(p, fn, user, NULL, 0, 0, err);
}

/* ---- shuffle ------------------------------------------------------------------------------ */

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
        if (sh->lazy_buf) st = up->ops->next_id(up, &sh->ids[sh->n], &end, err);
        else {
            memset(&sh->els[sh->n], 0, sizeof sh->els[0]);
            st = up->ops->next(up, &sh->els[sh->n], &end, err);
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

/* ---- repeat -------------------------------------------------------------------------------- */

typedef struct repeat_stage {
    stage base;
    int64_t count; /* < 0: forever */
    int64_t done;  /* completed passes */
    int got;       /* the current pass yielded something */
} repeat_stage;

/* Shared by next and next_id: on the end of a pass, restarts upstream unless done. An
 * empty pass ends the repeat, so `repeat` over an empty data set terminates. */
static int repeat_after_end(repeat_stage *r)
{
    r->done++;
    if ((r->count >= 0 && r->done >= r->count) || !r->got) return 1;
    r->got = 0;
    r->base.up->ops->reset(r->base.up);
    return 0;
}

static tfc_status repeat_next(stage *s, elem *out, int *end, tfc_error *err)
{
    repeat_stage *r = (repeat_stage *)s;
    if (r->count >= 0 && r->done >= r->count) {
        *end = 1;
        return TFC_OK;
    }
    for (;;) {
        *end = 0;
        tfc_status st = s->up->ops->next(s->up, out, end, err);
        if (st) return st;
        if (!*end) {
            r->got = 1;
            return TFC_OK;
        }
        if (repeat_after_end(r)) return TFC_OK;
    }
}

static tfc_status repeat_next_id(stage *s, elem_id *id, int *end, tfc_error *err)
{
    repeat_stage *r = (repeat_stage *)s;
    if (r->count >= 0 && r->done >= r->count) {
        *end = 1;
        return TFC_OK;
    }
    for (;;) {
        *end = 0;
        tfc_status st = s->up->ops->next_id(s->up, id, end, err);
        if (st) return st;
        if (!*end) {
            r->got = 1;
            return TFC_OK;
        }
        if (repeat_after_end(r)) return TFC_OK;
    }
}

static void repeat_reset(stage *s)
{
    repeat_stage *r = (repeat_stage *)s;
    r->done = 0;
    r->got = 0;
    s->up->ops->reset(s->up);
}

static tfc_status repeat_save(stage *s, wbuf *w, tfc_error *err)
{
    repeat_stage *r = (repeat_stage *)s;
    tfc_wbuf_u64(w, (uint64_t)r->done);
    tfc_wbuf_u64(w, (uint64_t)r->got);
    return TFC_OK;
}

static tfc_status repeat_restore(stage *s, rbuf *r, tfc_error *err)
{
    repeat_stage *rp = (repeat_stage *)s;
    rp->done = (int64_t)tfc_rbuf_u64(r);
    rp->got = tfc_rbuf_u64(r) != 0;
    return r->bad || rp->done < 0
               ? tfc_error_set(err, TFC_ERR_FORMAT, "pipeline state: bad repeat counter")
               : TFC_OK;
}

static void plain_free(stage *s)
{
    free(s);
}

static const stage_ops repeat_ops = {
    .name = "repeat",
    .next = repeat_next,
    .next_id = repeat_next_id,
    .fetch = tfc_stage_pass_fetch,
    .reset = repeat_reset,
    .save = repeat_save,
    .restore = repeat_restore,
    .free = plain_free,
};

static tfc_status repeat_push(tfc_pipeline *p, int64_t count, tfc_error *err)
{
    repeat_stage *r = calloc(1, sizeof *r);
    if (!r) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    stage *s = &r->base, *up = tfc_pipeline_top(p);
    r->count = count < 0 ? -1 : count;
    s->ops = &repeat_ops;
    s->lazy = up->lazy;
    s->fetchable = up->fetchable;
    s->spec = up->spec;
    s->config_hash = tfc_data_hash_mix(tfc_data_hash_str(0, "repeat"), (uint64_t)r->count);
    tfc_pipeline_push(p, s);
    return TFC_OK;
}

/* The arguments of repeat, take and skip. */
typedef struct count_cfg {
    int count;
} count_cfg;

static const tfc_field repeat_fields[] = {
    {"count", TFC_F_INT, offsetof(count_cfg, count), "-1", -1, 2147483647, NULL,
     "passes; -1 repeats forever"},
    {NULL},
};

static tfc_status repeat_push_planned(tfc_pipeline *p, stage_plan *pl, tfc_error *err)
{
    return repeat_push(p, ((const count_cfg *)pl->args)->count, err);
}

const stage_def tfc_stage_repeat = {
    .name = "repeat",
    .help = "passes over the data again",
    .fields = repeat_fields,
    .args_size = sizeof(count_cfg),
    .push = repeat_push_planned,
};

tfc_status tfc_pipeline_repeat(tfc_pipeline *p, int64_t count, tfc_error *err)
{
    return repeat_push(p, count, err);
}

/* ---- take and skip --------------------------------------------------------------------------- */

typedef struct take_stage {
    stage base;
    int64_t count; /* take: < 0 means all; skip: elements to drop */
    int skip;
    int64_t seen;  /* take: handed out; skip: dropped so far */
} take_stage;

static tfc_status take_next(stage *s, elem *out, int *end, tfc_error *err)
{
    take_stage *t = (take_stage *)s;
    if (t->skip) {
        while (t->seen < t->count) {
            elem tmp = {0};
            tfc_status st = s->up->lazy ? s->up->ops->next_id(s->up, &tmp.id, end, err)
                                        : s->up->ops->next(s->up, &tmp, end, err);
            tfc_elem_free(&tmp);
            if (st || *end) return st;
            t->seen++;
        }
        return s->up->ops->next(s->up, out, end, err);
    }
    if (t->count >= 0 && t->seen >= t->count) {
        *end = 1;
        return TFC_OK;
    }
    tfc_status st = s->up->ops->next(s->up, out, end, err);
    if (!st && !*end) t->seen++;
    return st;
}

static tfc_status take_next_id(stage *s, elem_id *id, int *end, tfc_error *err)
{
    take_stage *t = (take_stage *)s;
    if (t->skip) {
        while (t->seen < t->count) {
            tfc_status st = s->up->ops->next_id(s->up, id, end, err);
            if (st || *end) return st;
            t->seen++;
        }
        return s->up->ops->next_id(s->up, id, end, err);
    }
    if (t->count >= 0 && t->seen >= t->count) {
        *end = 1;
        return TFC_OK;
    }
    tfc_status st = s->up->ops->next_id(s->up, id, end, err);
    if (!st && !*end) t->seen++;
    return st;
}

static void take_reset(stage *s)
{
    ((take_stage *)s)->seen = 0;
    s->up->ops->reset(s->up);
}

static tfc_status take_save(stage *s, wbuf *w, tfc_error *err)
{
    tfc_wbuf_u64(w, (uint64_t)((take_stage *)s)->seen);
    return TFC_OK;
}

static tfc_status take_restore(stage *s, rbuf *r, tfc_error *err)
{
    take_stage *t = (take_stage *)s;
    t->seen = (int64_t)tfc_rbuf_u64(r);
    return r->bad || t->seen < 0
               ? tfc_error_set(err, TFC_ERR_FORMAT, "pipeline state: bad take/skip counter")
               : TFC_OK;
}

static const stage_ops take_ops = {
    .name = "take",
    .next = take_next,
    .next_id = take_next_id,
    .fetch = tfc_stage_pass_fetch,
    .reset = take_reset,
    .save = take_save,
    .restore = take_restore,
    .free = plain_free,
};

static const stage_ops skip_ops = {
    .name = "skip",
    .next = take_next,
    .next_id = take_next_id,
    .fetch = tfc_stage_pass_fetch,
    .reset = take_reset,
    .save = take_save,
    .restore = take_restore,
    .free = plain_free,
};

static tfc_status take_push(tfc_pipeline *p, int64_t count, int skip, tfc_error *err)
{
    take_stage *t = calloc(1, sizeof *t);
    if (!t) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    stage *s = &t->base, *up = tfc_pipeline_top(p);
    t->count = count < 0 ? (skip ? 0 : -1) : count;
    t->skip = skip;
    s->ops = skip ? &skip_ops : &take_ops;
    s->lazy = up->lazy;
    s->fetchable = up->fetchable;
    s->spec = up->spec;
    s->config_hash = tfc_data_hash_mix(tfc_data_hash_str(0, s->ops->name), (uint64_t)t->count);
    tfc_pipeline_push(p, s);
    return TFC_OK;
}

static const tfc_field take_fields[] = {
    {"count", TFC_F_INT, offsetof(count_cfg, count), NULL, -1, 2147483647, NULL,
     "elements to keep (-1: all)"},
    {NULL},
};
static const tfc_field skip_fields[] = {
    {"count", TFC_F_INT, offsetof(count_cfg, count), NULL, 0, 2147483647, NULL,
     "elements to drop at the start of each pass"},
    {NULL},
};

static tfc_status take_push_planned(tfc_pipeline *p, stage_plan *pl, tfc_error *err)
{
    return take_push(p, ((const count_cfg *)pl->args)->count, 0, err);
}

static tfc_status skip_push_planned(tfc_pipeline *p, stage_plan *pl, tfc_error *err)
{
    return take_push(p, ((const count_cfg *)pl->args)->count, 1, err);
}

const stage_def tfc_stage_take = {
    .name = "take",
    .help = "the first count elements",
    .fields = take_fields,
    .args_size = sizeof(count_cfg),
    .push = take_push_planned,
};

const stage_def tfc_stage_skip = {
    .name = "skip",
    .help = "all but the first count elements",
    .fields = skip_fields,
    .args_size = sizeof(count_cfg),
    .push = skip_push_planned,
};

tfc_status tfc_pipeline_take(tfc_pipeline *p, int64_t count, tfc_error *err)
{
    return take_push(p, count, 0, err);
}

tfc_status tfc_pipeline_skip(tfc_pipeline *p, int64_t count, tfc_error *err)
{
    return take_push(p, count, 1, err);
}

/* ---- cache -------------------------------------------------------------------------------- */

/* The first full pass stores every element in memory; later passes replay the store and
 * never touch upstream again (randomness before a cache is frozen, as in tf.data). A pass
 * broken off before the end discards the partial store. */
typedef struct cache_stage {
    stage base;
    elem *items;
    int64_t n, cap;
    int complete;
    int64_t pos; /* next item to replay */
} cache_stage;

static void cache_clear(cache_stage *c)
{
    for (int64_t i = 0; i < c->n; i++) tfc_elem_free(&c->items[i]);
    c->n = 0;
}

static tfc_status cache_store(cache_stage *c, const elem *x, tfc_error *err)
{
    if (c->n == c->cap) {
        int64_t cap = c->cap ? c->cap * 2 : 256;
        elem *a = realloc(c->items, (size_t)cap * sizeof *a);
        if (!a) return tfc_error_set(err, TFC_ERR_NOMEM, "cache: out of memory after %lld "
                                     "elements", (long long)c->n);
        c->items = a;
        c->cap = cap;
    }
    tfc_status st = tfc_elem_copy(&c->items[c->n], x, err);
    if (!st) c->n++;
    return st;
}

static tfc_status cache_next(stage *s, elem *out, int *end, tfc_error *err)
{
    cache_stage *c = (cache_stage *)s;
    if (c->complete) {
        if (c->pos >= c->n) {
            *end = 1;
            return TFC_OK;
        }
        return tfc_elem_copy(out, &c->items[c->pos++], err);
    }
    tfc_status st = s->up->ops->next(s->up, out, end, err);
    if (st) return st;
    if (*end) {
        c->complete = 1;
        c->pos = c->n;
        return TFC_OK;
    }
    st = cache_store(c, out, err);
    if (st) tfc_elem_free(out);
    return st;
}

static void cache_reset(stage *s)
{
    cache_stage *c = (cache_stage *)s;
    c->pos = 0;
    if (c->complete) return;
    cache_clear(c);
    s->up->ops->reset(s->up);
}

static tfc_status cache_save(stage *s, wbuf *w, tfc_error *err)
{
    cache_stage *c = (cache_stage *)s;
    tfc_wbuf_u64(w, (uint64_t)c->complete);
    tfc_wbuf_u64(w, (uint64_t)c->pos);
    tfc_wbuf_u64(w, (uint64_t)c->n);
    for (int64_t i = 0; i < c->n; i++) tfc_stage_save_elem(w, &c->items[i], s->up);
    return TFC_OK;
}

static tfc_status cache_restore(stage *s, rbuf *r, tfc_error *err)
{
    cache_stage *c = (cache_stage *)s;
    cache_clear(c);
    c->complete = tfc_rbuf_u64(r) != 0;
    uint64_t pos = tfc_rbuf_u64(r), n = tfc_rbuf_u64(r);
    if (r->bad || pos > n || n > (r->len - r->pos) / 32)
        return tfc_error_set(err, TFC_ERR_FORMAT, "pipeline state: bad cache");
    for (uint64_t i = 0; i < n; i++) {
        elem x;
        tfc_status st = tfc_stage_restore_elem(r, s->up, &x, err);
        if (!st) st = cache_store(c, &x, err);
        tfc_elem_free(&x);
        if (st) return st;
    }
    c->pos = (int64_t)pos;
    return TFC_OK;
}

static void cache_free(stage *s)
{
    cache_stage *c = (cache_stage *)s;
    cache_clear(c);
    free(c->items);
    free(c);
}

static const stage_ops cache_ops = {
    .name = "cache",
    .next = cache_next,
    .fetch = tfc_stage_pass_fetch,
    .reset = cache_reset,
    .save = cache_save,
    .restore = cache_restore,
    .free = cache_free,
};

static tfc_status cache_push(tfc_pipeline *p, tfc_error *err)
{
    cache_stage *c = calloc(1, sizeof *c);
    if (!c) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    stage *s = &c->base, *up = tfc_pipeline_top(p);
    s->ops = &cache_ops;
    s->fetchable = up->fetchable;
    s->spec = up->spec;
    s->config_hash = tfc_data_hash_str(0, "cache");
    tfc_pipeline_push(p, s);
    return TFC_OK;
}

static const tfc_field cache_fields[] = {{NULL}};

static tfc_status cache_push_planned(tfc_pipeline *p, stage_plan *pl, tfc_error *err)
{
    return cache_push(p, err);
}

const stage_def tfc_stage_cache = {
    .name = "cache",
    .help = "keeps the first pass in memory",
    .fields = cache_fields,
    .push = cache_push_planned,
};

tfc_status tfc_pipeline_cache(tfc_pipeline *p, tfc_error *err)
{
    return cache_push(p, err);
}
