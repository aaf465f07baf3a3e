/* cache: the first full pass stores every element in memory; later passes replay the store
 * and never touch upstream again (randomness before a cache is frozen, as in tf.data). A
 * pass broken off before the end discards the partial store. */
#include <stdlib.h>
#include <string.h>

#include "data/internal.h"

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
    tfc_status st = tfc_up_next(s->up, out, end, err);
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
