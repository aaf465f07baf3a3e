/* The stages that pass elements through: filter, repeat, take, skip and shard, with tf.data's
 * documented semantics, each with its definition for solver files and its C appender
 * (shuffle.c, cache.c, batch.c, prefetch.c and map.c hold the others). */
#include <stdlib.h>
#include <string.h>

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
        tfc_status st = tfc_up_next(s->up, out, end, err);
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
    const tfc_element_spec *in = &tfc_pipeline_top(p)->spec;
    if ((c->min_length || c->max_length) && in->ninputs > 1) {
        char inputs[600];
        return tfc_node_error(err, TFC_ERR_CONFIG, pl->at, pl->key, "filter by length: the "
                              "elements have %d inputs (%s), of lengths of their own (filter by "
                              "labels works; pad or truncate the inputs instead)", in->ninputs,
                              tfc_data_inputs_str(in, inputs, sizeof inputs));
    }
    if (c->labels.n && in->nlabels > 1) {
        char labels[600];
        return tfc_node_error(err, TFC_ERR_CONFIG, pl->at, pl->key, "filter by labels keeps "
                              "elements by the value of one label; these have %d labels (%s)",
                              in->nlabels, tfc_data_labels_str(in, labels, sizeof labels));
    }
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

/* The next element (out) or, for a lazy consumer, the next id (id): exactly one is non-NULL. */
static tfc_status pull(stage *up, elem *out, elem_id *id, int *end, tfc_error *err)
{
    return id ? tfc_up_next_id(up, id, end, err) : tfc_up_next(up, out, end, err);
}

static tfc_status repeat_step(stage *s, elem *out, elem_id *id, int *end, tfc_error *err)
{
    repeat_stage *r = (repeat_stage *)s;
    if (r->count >= 0 && r->done >= r->count) {
        *end = 1;
        return TFC_OK;
    }
    for (;;) {
        *end = 0;
        tfc_status st = pull(s->up, out, id, end, err);
        if (st) return st;
        if (!*end) {
            r->got = 1;
            return TFC_OK;
        }
        if (repeat_after_end(r)) return TFC_OK;
    }
}

static tfc_status repeat_next(stage *s, elem *out, int *end, tfc_error *err)
{
    return repeat_step(s, out, NULL, end, err);
}

static tfc_status repeat_next_id(stage *s, elem_id *id, int *end, tfc_error *err)
{
    return repeat_step(s, NULL, id, end, err);
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

extern const stage_def tfc_stage_repeat;

static const tfc_field repeat_fields[] = {
    {"count", TFC_F_INT, offsetof(count_cfg, count), "-1", -1, 2147483647, NULL,
     "passes; -1 repeats forever"},
    {NULL},
};

static tfc_status repeat_push_planned(tfc_pipeline *p, stage_plan *pl, tfc_error *err)
{
    return repeat_push(p, ((const count_cfg *)pl->args)->count, err);
}

int tfc_stage_plan_repeats_forever(const stage_plan *pl)
{
    return pl->def == &tfc_stage_repeat && ((const count_cfg *)pl->args)->count < 0;
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

/* ---- take, skip and shard --------------------------------------------------------------------- */

typedef struct take_stage {
    stage base;
    int64_t count; /* take: < 0 means all; skip: elements to drop */
    int skip;
    int64_t num_shards, index, block; /* shard: num_shards > 0 */
    int64_t seen;  /* take: handed out; skip: dropped so far; shard: pulled in this pass */
} take_stage;

/* Pulls the next element from below and drops it (as an id when the stage below is lazy, so
 * nothing is read or decoded for it). */
static tfc_status drop_one(stage *s, elem_id *id, int *end, tfc_error *err)
{
    elem tmp = {0};
    elem_id *drop_id = id ? id : s->up->lazy ? &tmp.id : NULL;
    tfc_status st = pull(s->up, drop_id ? NULL : &tmp, drop_id, end, err);
    tfc_elem_free(&tmp);
    return st;
}

/* A shard keeps positions i with (i / block) % num_shards == index. */
static int shard_keeps(const take_stage *t, int64_t i)
{
    return i / t->block % t->num_shards == t->index;
}

/* Skip drops its first `count` elements, then passes the rest; take passes `count` elements,
 * then ends; shard (tf.data's Dataset.shard, or in blocks for data-parallel ranks) passes
 * the positions it keeps and drops the others. Dropped elements are never materialised. */
static tfc_status take_step(stage *s, elem *out, elem_id *id, int *end, tfc_error *err)
{
    take_stage *t = (take_stage *)s;
    if (t->num_shards) {
        for (; !shard_keeps(t, t->seen); t->seen++) {
            tfc_status st = drop_one(s, id, end, err);
            if (st || *end) return st;
        }
        tfc_status st = pull(s->up, out, id, end, err);
        if (!st && !*end) t->seen++;
        return st;
    }
    if (t->skip) {
        for (; t->seen < t->count; t->seen++) {
            tfc_status st = drop_one(s, id, end, err);
            if (st || *end) return st;
        }
        return pull(s->up, out, id, end, err);
    }
    if (t->count >= 0 && t->seen >= t->count) {
        *end = 1;
        return TFC_OK;
    }
    tfc_status st = pull(s->up, out, id, end, err);
    if (!st && !*end) t->seen++;
    return st;
}

static tfc_status take_next(stage *s, elem *out, int *end, tfc_error *err)
{
    return take_step(s, out, NULL, end, err);
}

static tfc_status take_next_id(stage *s, elem_id *id, int *end, tfc_error *err)
{
    return take_step(s, NULL, id, end, err);
}

static void take_reset(stage *s)
{
    ((take_stage *)s)->seen = 0;
    s->up->ops->reset(s->up);
}

static tfc_status take_save(stage *s, wbuf *w, tfc_error *err)
{
    (void)err;
    tfc_wbuf_u64(w, (uint64_t)((take_stage *)s)->seen);
    return TFC_OK;
}

static tfc_status take_restore(stage *s, rbuf *r, tfc_error *err)
{
    take_stage *t = (take_stage *)s;
    t->seen = (int64_t)tfc_rbuf_u64(r);
    return r->bad || t->seen < 0
               ? tfc_error_set(err, TFC_ERR_FORMAT, "pipeline state: bad %s counter",
                               s->ops->name)
               : TFC_OK;
}

#define TAKE_OPS(NAME)                                                                        \
    {.name = NAME,                                                                            \
     .next = take_next,                                                                       \
     .next_id = take_next_id,                                                                 \
     .fetch = tfc_stage_pass_fetch,                                                           \
     .reset = take_reset,                                                                     \
     .save = take_save,                                                                       \
     .restore = take_restore,                                                                 \
     .free = plain_free}
static const stage_ops take_ops = TAKE_OPS("take"), skip_ops = TAKE_OPS("skip"),
                       shard_ops = TAKE_OPS("shard");

/* Appends a take, skip or shard stage of `t` (taken), its ops and hash set here. */
static tfc_status take_append(tfc_pipeline *p, take_stage *t, const stage_ops *ops,
                              uint64_t config_hash)
{
    stage *s = &t->base, *up = tfc_pipeline_top(p);
    s->ops = ops;
    s->lazy = up->lazy;
    s->fetchable = up->fetchable;
    s->spec = up->spec;
    s->config_hash = config_hash;
    tfc_pipeline_push(p, s);
    return TFC_OK;
}

static tfc_status take_push(tfc_pipeline *p, int64_t count, int skip, tfc_error *err)
{
    take_stage *t = calloc(1, sizeof *t);
    if (!t) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    t->count = count < 0 ? (skip ? 0 : -1) : count;
    t->skip = skip;
    const stage_ops *ops = skip ? &skip_ops : &take_ops;
    return take_append(p, t, ops,
                       tfc_data_hash_mix(tfc_data_hash_str(0, ops->name), (uint64_t)t->count));
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

tfc_status tfc_pipeline_shard_blocks(tfc_pipeline *p, int64_t num_shards, int64_t index,
                                     int64_t block, tfc_error *err)
{
    if (num_shards < 1 || index < 0 || index >= num_shards || block < 1)
        return tfc_error_set(err, TFC_ERR_CONFIG,
                             "shard: index %lld is not in [0, num_shards = %lld)",
                             (long long)index, (long long)num_shards);
    take_stage *t = calloc(1, sizeof *t);
    if (!t) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    t->num_shards = num_shards;
    t->index = index;
    t->block = block;
    uint64_t h = tfc_data_hash_mix(tfc_data_hash_str(0, "shard"), (uint64_t)num_shards);
    return take_append(p, t, &shard_ops,
                       tfc_data_hash_mix(tfc_data_hash_mix(h, (uint64_t)index), (uint64_t)block));
}

tfc_status tfc_pipeline_shard(tfc_pipeline *p, int64_t num_shards, int64_t index, tfc_error *err)
{
    return tfc_pipeline_shard_blocks(p, num_shards, index, 1, err);
}

typedef struct shard_cfg {
    int num_shards, index;
} shard_cfg;

static const tfc_field shard_fields[] = {
    {"num_shards", TFC_F_INT, offsetof(shard_cfg, num_shards), NULL, 1, 2147483647, NULL,
     "how many shards the elements are dealt into"},
    {"index", TFC_F_INT, offsetof(shard_cfg, index), NULL, 0, 2147483646, NULL,
     "this pipeline's shard, in [0, num_shards)"},
    {NULL},
};

static tfc_status shard_check(const stage_plan *pl, tfc_error *err)
{
    const shard_cfg *a = pl->args;
    if (a->index < a->num_shards) return TFC_OK;
    const tfc_node *at = pl->node ? tfc_node_get(pl->node, "index") : NULL;
    char key[400];
    snprintf(key, sizeof key, "%s.index", pl->key);
    return tfc_node_error(err, TFC_ERR_CONFIG, at ? at : pl->at, key,
                          "expected an index below num_shards = %d, found %d", a->num_shards,
                          a->index);
}

static tfc_status shard_push_planned(tfc_pipeline *p, stage_plan *pl, tfc_error *err)
{
    const shard_cfg *a = pl->args;
    return tfc_pipeline_shard(p, a->num_shards, a->index, err);
}

const stage_def tfc_stage_shard = {
    .name = "shard",
    .help = "every num_shards-th element, starting at index (tf.data's shard)",
    .fields = shard_fields,
    .args_size = sizeof(shard_cfg),
    .check = shard_check,
    .push = shard_push_planned,
};
