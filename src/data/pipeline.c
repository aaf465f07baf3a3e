/* The pipeline object: a source stage and the stages appended to it, iteration (next,
 * reset), the element spec, the check that a split yields at all, and saving/restoring the
 * exact position as a versioned blob:
 *   "TFCPIPE\0" | version | stage count | config hash | skipped | per stage: hash, length,
 *   payload (written by the stage's save) | checksum of everything before it. */
#include <stdlib.h>
#include <string.h>

#include "core/checksum.h"
#include "core/rng.h"
#include "data/internal.h"

#define STATE_MAGIC "TFCPIPE"
/* 2 saves the row ids of the batches it holds by value (tfc_wbuf_elem); version 1 blobs
 * (without them) still restore, their batches without row ids. 3 counts an element's
 * components before them (elements of several inputs have more); 1 and 2 had three. */
#define STATE_VERSION 3

static char *dup_or_null(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* ---- the source stage ------------------------------------------------------------------- */

typedef struct src_stage {
    stage base;
    int64_t pos;    /* next record */
    uint64_t epoch; /* times the source was restarted */
} src_stage;

static tfc_status src_next_id(stage *s, elem_id *id, int *end, tfc_error *err)
{
    src_stage *ss = (src_stage *)s;
    if (ss->pos >= s->p->src->count) {
        *end = 1;
        return TFC_OK;
    }
    id->epoch = ss->epoch;
    id->index = (uint64_t)ss->pos++;
    return TFC_OK;
}

static tfc_status src_fetch(stage *s, elem_id id, elem *out, tfc_error *err)
{
    source *src = s->p->src;
    memset(out, 0, sizeof *out);
    if (id.index >= (uint64_t)src->count)
        return tfc_error_set(err, TFC_ERR_FORMAT, "pipeline state: record %llu is beyond the "
                             "source's %lld records", (unsigned long long)id.index,
                             (long long)src->count);
    tfc_status st = src->ops->get(src, (int64_t)id.index, &out->e, err);
    if (st) {
        tfc_elem_free(out);
        return st;
    }
    out->id = id;
    out->has_id = 1;
    return TFC_OK;
}

/* With on_error: skip and a source that fails while reading, records that fail are
 * passed over, so this path is not lazy; they are counted (and the first named) in the
 * pipeline's first pass only: later epochs (repeat, the next test pass) meet them again. */
static tfc_status src_next(stage *s, elem *out, int *end, tfc_error *err)
{
    source *src = s->p->src;
    if (!src->skip_errors) return tfc_stage_next_lazy(s, out, end, err);
    if (s->p->count_epoch == UINT64_MAX) s->p->count_epoch = ((src_stage *)s)->epoch;
    tfc_error *local = malloc(sizeof *local);
    if (!local) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    for (;;) {
        elem_id id;
        tfc_status st = src_next_id(s, &id, end, err);
        if (st || *end) break;
        tfc_error_clear(local);
        st = src_fetch(s, id, out, local);
        if (st == TFC_OK) break;
        if (st != TFC_ERR_DATA) {
            if (err) *err = *local;
            free(local);
            return st;
        }
        if (id.epoch == s->p->count_epoch) {
            char where[200];
            src->ops->describe(src, (int64_t)id.index, where, sizeof where);
            tfc_source_name_skip(src, where);
            s->p->skipped_run++;
        }
    }
    free(local);
    return TFC_OK;
}

static void src_reset(stage *s)
{
    src_stage *ss = (src_stage *)s;
    ss->pos = 0;
    ss->epoch++;
}

static tfc_status src_save(stage *s, wbuf *w, tfc_error *err)
{
    src_stage *ss = (src_stage *)s;
    tfc_wbuf_u64(w, ss->epoch);
    tfc_wbuf_u64(w, (uint64_t)ss->pos);
    return TFC_OK;
}

static tfc_status src_restore(stage *s, rbuf *r, tfc_error *err)
{
    src_stage *ss = (src_stage *)s;
    uint64_t epoch = tfc_rbuf_u64(r), pos = tfc_rbuf_u64(r);
    if (r->bad || pos > (uint64_t)s->p->src->count)
        return tfc_error_set(err, TFC_ERR_FORMAT, "pipeline state: bad source position");
    ss->epoch = epoch;
    ss->pos = (int64_t)pos;
    return TFC_OK;
}

static void src_free(stage *s)
{
    free(s);
}

static const stage_ops src_ops = {
    .name = "source",
    .next = src_next,
    .next_id = src_next_id,
    .fetch = src_fetch,
    .reset = src_reset,
    .save = src_save,
    .restore = src_restore,
    .free = src_free,
};

static tfc_status source_stage_push(tfc_pipeline *p)
{
    src_stage *ss = calloc(1, sizeof *ss);
    if (!ss) return TFC_ERR_NOMEM;
    stage *s = &ss->base;
    s->ops = &src_ops;
    s->lazy = !(p->src->skip_errors && p->src->get_may_fail);
    if (!p->src->get_may_fail) p->src->skip_errors = 0; /* nothing can fail while reading */
    s->fetchable = 1;
    if (p->src->spec.ninputs < 1) p->src->spec.ninputs = 1;
    if (p->src->spec.nlabels < 1 && p->src->spec.comp[TFC_COMP_LABELS].present)
        p->src->spec.nlabels = 1;
    s->spec = p->src->spec;
    s->config_hash =
        tfc_data_hash_mix(tfc_data_hash_str(0, p->src->ops->type), (uint64_t)p->src->count);
    /* the inputs' names are part of the source (single-input hashes stay as they were) */
    for (int k = 0; p->src->spec.ninputs > 1 && k < p->src->spec.ninputs; k++)
        s->config_hash = tfc_data_hash_str(s->config_hash, p->src->spec.input_names[k]);
    for (int k = 0; p->src->spec.nlabels > 1 && k < p->src->spec.nlabels; k++)
        s->config_hash = tfc_data_hash_str(s->config_hash, p->src->spec.label_names[k]);
    tfc_pipeline_push(p, s);
    return TFC_OK;
}

/* ---- the pipeline ------------------------------------------------------------------------ */

tfc_status tfc_stage_next_lazy(stage *s, elem *out, int *end, tfc_error *err)
{
    elem_id id;
    *end = 0;
    tfc_status st = s->ops->next_id(s, &id, end, err);
    if (st || *end) return st;
    return s->ops->fetch(s, id, out, err);
}

tfc_status tfc_stage_pass_fetch(stage *s, elem_id id, elem *out, tfc_error *err)
{
    return tfc_up_fetch(s->up, id, out, err);
}

void tfc_pipeline_push(tfc_pipeline *p, stage *s)
{
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 8;
        stage **a = realloc(p->stages, (size_t)cap * sizeof *a);
        TFC_ASSERT(a != NULL);
        p->stages = a;
        p->cap = cap;
    }
    s->p = p;
    s->up = p->n ? p->stages[p->n - 1] : NULL;
    if (s->up && s->spec.ninputs < 1) { /* a user map's spec that does not say: the input's */
        s->spec.ninputs = s->up->spec.ninputs;
        memcpy(s->spec.input_names, s->up->spec.input_names, sizeof s->spec.input_names);
    }
    if (s->up && s->spec.nlabels < 1 && s->spec.comp[TFC_COMP_LABEL1].present) { /* likewise */
        s->spec.nlabels = s->up->spec.nlabels;
        memcpy(s->spec.label_names, s->up->spec.label_names, sizeof s->spec.label_names);
    }
    /* a map op that made the labels (autoencode, window) made one unnamed label */
    if (s->spec.nlabels < 1 && s->spec.comp[TFC_COMP_LABELS].present) s->spec.nlabels = 1;
    s->key = tfc_rng_key(tfc_rng_key(p->opt.seed, p->opt.stream), (uint64_t)(p->n - p->hidden));
    if (!s->label[0]) {
        if (p->n == 0) snprintf(s->label, sizeof s->label, "source (%s)",
                                p->src->kind ? p->src->kind : p->src->ops->type);
        else snprintf(s->label, sizeof s->label, "%s", s->ops->name);
    }
    p->stages[p->n++] = s;
}

stage *tfc_pipeline_top(const tfc_pipeline *p)
{
    return p->stages[p->n - 1];
}

tfc_pipeline *tfc_pipeline_new(source *src, const tfc_data_options *opt, tfc_error *err)
{
    tfc_pipeline *p = calloc(1, sizeof *p);
    if (!p) {
        tfc_source_free(src);
        tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        return NULL;
    }
    p->count_epoch = UINT64_MAX;
    if (opt) p->opt = *opt;
    p->key = dup_or_null(opt && opt->key ? opt->key : "data");
    p->base_dir = dup_or_null(opt ? opt->base_dir : NULL);
    p->run_dir = dup_or_null(opt ? opt->run_dir : NULL);
    p->opt.key = p->key;
    p->opt.base_dir = p->base_dir;
    p->opt.run_dir = p->run_dir;
    p->src = src;
    int every = opt ? opt->profile_every : 0;
    p->prof_on = every >= 0;
    p->prof_mask = 15;
    if (every > 0) {
        uint32_t m = 1;
        while (m < (uint32_t)every && m < (1u << 30)) m <<= 1;
        p->prof_mask = m - 1;
    }
    if (!p->key || source_stage_push(p) != TFC_OK) {
        tfc_pipeline_free(p);
        tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return p;
}

void tfc_pipeline_describe_elem(const tfc_pipeline *p, const elem *x, char *buf, size_t size)
{
    if (x->has_id && x->id.index < (uint64_t)p->src->count)
        p->src->ops->describe(p->src, (int64_t)x->id.index, buf, size);
    else
        snprintf(buf, size, "an element of %s", p->key);
}

int tfc_pipeline_describe_row(const tfc_pipeline *p, int comp, int64_t row, char *buf,
                              size_t size)
{
    const elem *x = &p->cur;
    const elem_id *id = x->rows && row >= 0 && row < x->nrows ? &x->rows[row]
                        : !x->rows && x->has_id && row == 0 ? &x->id
                                                            : NULL;
    const source *s = p->src;
    buf[0] = 0;
    if (!id || id->index >= (uint64_t)s->count) return 0;
    if (comp == TFC_COMP_LABELS && s->ops->describe_label)
        s->ops->describe_label(s, (int64_t)id->index, buf, size);
    else if (comp > TFC_COMP_LENGTHS && comp < TFC_COMP_COUNT && s->ops->describe_comp)
        s->ops->describe_comp(s, comp, (int64_t)id->index, buf, size);
    else
        s->ops->describe(s, (int64_t)id->index, buf, size);
    return 1;
}

void tfc_stage_save_elem(wbuf *w, const elem *x, const stage *from)
{
    int by_id = x->has_id && from->fetchable;
    tfc_wbuf_u64(w, (uint64_t)by_id);
    tfc_wbuf_elem(w, x, !by_id);
}

tfc_status tfc_stage_restore_elem(rbuf *r, stage *from, elem *x, tfc_error *err)
{
    int by_id = tfc_rbuf_u64(r) != 0;
    tfc_status st = tfc_rbuf_elem(r, x, !by_id, err);
    if (st || !by_id) return st;
    if (!from->fetchable)
        return tfc_error_set(err, TFC_ERR_FORMAT, "pipeline state: an element saved by id "
                             "cannot be re-made by this pipeline");
    elem_id id = x->id;
    return from->ops->fetch(from, id, x, err);
}

static void quiesce_all(tfc_pipeline *p)
{
    for (int i = p->n - 1; i >= 0; i--)
        if (p->stages[i]->ops->quiesce) p->stages[i]->ops->quiesce(p->stages[i]);
}

/* Quiesces and fills every stage, top down: a stage's fill reads from the stages below,
 * which are settled after it. */
static void settle_all(tfc_pipeline *p)
{
    for (int i = p->n - 1; i >= 0; i--) {
        stage *s = p->stages[i];
        if (s->ops->quiesce) s->ops->quiesce(s);
        if (s->ops->fill) s->ops->fill(s);
    }
}

void tfc_pipeline_free(tfc_pipeline *p)
{
    if (!p) return;
    quiesce_all(p);
    for (int i = p->n - 1; i >= 0; i--) p->stages[i]->ops->free(p->stages[i]);
    free(p->stages);
    tfc_elem_free(&p->cur);
    tfc_source_free(p->src);
    tfc_vocab_free(p->vocab);
    free(p->key);
    free(p->base_dir);
    free(p->run_dir);
    free(p);
}

tfc_status tfc_pipeline_next(tfc_pipeline *p, tfc_batch *out, tfc_error *err)
{
    memset(out, 0, sizeof *out);
    tfc_elem_free(&p->cur);
    if (p->failed)
        return tfc_error_set(err, TFC_ERR_INTERNAL, "%s: the pipeline failed earlier; reset or "
                             "restore it before reading on", p->key);
    stage *top = tfc_pipeline_top(p);
    int end = 0;
    tfc_status st = tfc_up_next(top, &p->cur, &end, err);
    if (st) {
        tfc_elem_free(&p->cur);
        p->failed = 1;
        return st;
    }
    if (end) {
        out->end = 1;
        return TFC_OK;
    }
    out->features = p->cur.e.comp[TFC_COMP_FEATURES];
    out->labels = p->cur.e.comp[TFC_COMP_LABELS];
    out->lengths = p->cur.e.comp[TFC_COMP_LENGTHS];
    out->ninputs = tfc_pipeline_inputs(p, NULL);
    for (int k = 0; k < out->ninputs; k++) out->inputs[k] = p->cur.e.comp[tfc_input_comp(k)];
    out->nlabels = tfc_pipeline_labels(p, NULL);
    for (int k = 0; k < out->nlabels; k++) out->label_at[k] = p->cur.e.comp[tfc_label_comp(k)];
    return TFC_OK;
}

const tfc_element_spec *tfc_pipeline_element_spec(const tfc_pipeline *p)
{
    return &tfc_pipeline_top(p)->spec;
}

int tfc_pipeline_inputs(const tfc_pipeline *p, const char **names)
{
    const tfc_element_spec *s = &tfc_pipeline_top(p)->spec;
    int n = s->ninputs < 1 ? 1 : s->ninputs;
    for (int k = 0; names && k < n; k++) names[k] = s->input_names[k];
    return n;
}

int tfc_pipeline_labels(const tfc_pipeline *p, const char **names)
{
    const tfc_element_spec *s = &tfc_pipeline_top(p)->spec;
    int n = !s->comp[TFC_COMP_LABELS].present ? 0 : s->nlabels < 1 ? 1 : s->nlabels;
    for (int k = 0; names && k < n; k++) names[k] = s->label_names[k];
    return n;
}

void tfc_pipeline_reset(tfc_pipeline *p)
{
    quiesce_all(p);
    tfc_elem_free(&p->cur);
    p->failed = 0;
    stage *top = tfc_pipeline_top(p);
    top->ops->reset(top);
}

/* FNV-1a over the blob: catches corruption, not tampering (the blob is still parsed as
 * untrusted input). */
static uint64_t checksum(const unsigned char *b, size_t n)
{
    return tfc_fnv1a(TFC_FNV_INIT, b, n);
}

/* The hash of the stages' configurations, as a blob of format `version` records it. */
static uint64_t config_hash(const tfc_pipeline *p, uint64_t version)
{
    uint64_t h = tfc_data_hash_mix(version, (uint64_t)p->n);
    for (int i = 0; i < p->n; i++) h = tfc_data_hash_mix(h, p->stages[i]->config_hash);
    return h;
}

tfc_status tfc_pipeline_save_state(tfc_pipeline *p, void **bytes, size_t *len, tfc_error *err)
{
    *bytes = NULL;
    *len = 0;
    if (p->failed)
        return tfc_error_set(err, TFC_ERR_INTERNAL, "%s: cannot save the state of a failed "
                             "pipeline", p->key);
    settle_all(p);
    wbuf w = {0};
    tfc_wbuf_bytes(&w, STATE_MAGIC, 8);
    tfc_wbuf_u64(&w, STATE_VERSION);
    tfc_wbuf_u64(&w, (uint64_t)p->n);
    tfc_wbuf_u64(&w, config_hash(p, STATE_VERSION));
    tfc_wbuf_u64(&w, (uint64_t)p->skipped_run);
    for (int i = 0; i < p->n; i++) {
        stage *s = p->stages[i];
        tfc_wbuf_u64(&w, s->config_hash);
        size_t at = w.len;
        tfc_wbuf_u64(&w, 0); /* payload length, patched below */
        tfc_status st = s->ops->save(s, &w, err);
        if (st) {
            free(w.p);
            return st;
        }
        if (w.oom) break;
        uint64_t n = w.len - at - 8;
        for (int b = 0; b < 8; b++) w.p[at + b] = (unsigned char)(n >> (8 * b));
    }
    if (!w.oom) tfc_wbuf_u64(&w, checksum(w.p, w.len));
    if (w.oom) {
        free(w.p);
        return tfc_error_set(err, TFC_ERR_NOMEM, "%s: out of memory saving the pipeline state",
                             p->key);
    }
    *bytes = w.p;
    *len = w.len;
    return TFC_OK;
}

tfc_status tfc_pipeline_restore_state(tfc_pipeline *p, const void *bytes, size_t len,
                                      tfc_error *err)
{
    tfc_pipeline_reset(p);
    rbuf r = {.p = bytes, .len = len};
    const char *magic = tfc_rbuf_bytes(&r, 8);
    if (!magic || memcmp(magic, STATE_MAGIC, 8))
        return tfc_error_set(err, TFC_ERR_FORMAT, "%s: not a pipeline state (bad magic)", p->key);
    rbuf tail = {.p = bytes, .len = len, .pos = len < 16 ? 0 : len - 8};
    if (len < 16 || tfc_rbuf_u64(&tail) != checksum(bytes, len - 8))
        return tfc_error_set(err, TFC_ERR_FORMAT, "%s: pipeline state is corrupt (checksum)",
                             p->key);
    r.len = len - 8;
    uint64_t version = tfc_rbuf_u64(&r), n = tfc_rbuf_u64(&r), hash = tfc_rbuf_u64(&r);
    uint64_t skipped = tfc_rbuf_u64(&r);
    if (r.bad || version < 1 || version > STATE_VERSION)
        return tfc_error_set(err, TFC_ERR_FORMAT, "%s: pipeline state version %llu, this "
                             "build reads 1 to %d", p->key, (unsigned long long)version,
                             STATE_VERSION);
    if (n != (uint64_t)p->n || hash != config_hash(p, version))
        return tfc_error_set(err, TFC_ERR_FORMAT, "%s: the pipeline state was saved by a "
                             "different pipeline configuration", p->key);
    tfc_status st = TFC_OK;
    for (int i = 0; i < p->n && st == TFC_OK; i++) {
        stage *s = p->stages[i];
        uint64_t h = tfc_rbuf_u64(&r), sl = tfc_rbuf_u64(&r);
        if (r.bad || h != s->config_hash || sl > r.len - r.pos) {
            st = tfc_error_set(err, TFC_ERR_FORMAT, "%s: pipeline state is corrupt at stage %d",
                               p->key, i);
            break;
        }
        rbuf sub = {.p = r.p + r.pos, .len = (size_t)sl, .version = version};
        st = s->ops->restore(s, &sub, err);
        if (st == TFC_OK && (sub.bad || sub.pos != sub.len))
            st = tfc_error_set(err, TFC_ERR_FORMAT, "%s: pipeline state of stage %d (%s) is "
                               "corrupt", p->key, i, s->ops->name);
        r.pos += (size_t)sl;
    }
    if (st == TFC_OK && r.pos != r.len)
        st = tfc_error_set(err, TFC_ERR_FORMAT, "%s: trailing bytes in pipeline state", p->key);
    if (st) {
        tfc_pipeline_reset(p);
        return st;
    }
    p->skipped_run = (int64_t)skipped;
    /* within the first pass its count goes on; past it, the count is complete */
    uint64_t epoch = ((src_stage *)p->stages[0])->epoch;
    p->count_epoch = epoch == 0 ? 0 : UINT64_MAX - 1;
    return TFC_OK;
}

/* The stage that left nothing (-1 when not known): the first whose element count (the
 * profiler's) is 0 while the one below it made some, else a take (of 0, which asks nothing
 * of the stages below it). */
static int drained_stage(const tfc_pipeline *p)
{
    tfc_stage_profile *prof = malloc((size_t)p->n * sizeof *prof);
    int at = -1;
    if (!prof) return -1;
    tfc_pipeline_profile(p, prof, p->n);
    for (int i = 1; i < p->n && at < 0; i++)
        if (prof[i].elements == 0 && prof[i - 1].elements > 0) at = i;
    for (int i = 1; i < p->n && at < 0; i++)
        if (!strcmp(p->stages[i]->ops->name, "take")) at = i;
    free(prof);
    return at;
}

/* 1 when a stage may leave out every element it is given (filter, take, skip, shard, a
 * batch dropping its remainder); sources refuse to open empty, and the other stages keep
 * at least one element of any. */
static int may_leave_none(const tfc_pipeline *p)
{
    static const char *const droppers[] = {"filter", "take", "skip", "shard"};
    for (int i = 1; i < p->n; i++) {
        const stage *s = p->stages[i];
        for (size_t k = 0; k < sizeof droppers / sizeof *droppers; k++)
            if (!strcmp(s->ops->name, droppers[k])) return 1;
        if (s->spec.batched && !s->up->spec.batched &&
            s->spec.comp[TFC_COMP_FEATURES].shape.dim[0] > 0)
            return 1;
    }
    return 0;
}

tfc_status tfc_pipeline_check_yields(tfc_pipeline *p, tfc_error *err)
{
    if (!may_leave_none(p)) return TFC_OK;
    void *state = NULL;
    size_t len = 0;
    tfc_status st = tfc_pipeline_save_state(p, &state, &len, err);
    if (st) return st;
    /* what the draw changes beyond the saved position: the skip bookkeeping of the first pass */
    uint64_t count_epoch = p->count_epoch;
    char names[sizeof p->src->skip_names];
    memcpy(names, p->src->skip_names, sizeof names);
    int nnames = p->src->nskip_names;
    tfc_batch b;
    st = tfc_pipeline_next(p, &b, err);
    int empty = !st && b.end, at = empty ? drained_stage(p) : -1;
    tfc_error quiet;
    tfc_error_clear(&quiet);
    tfc_status rs = tfc_pipeline_restore_state(p, state, len, &quiet);
    free(state);
    p->count_epoch = count_epoch;
    memcpy(p->src->skip_names, names, sizeof names);
    p->src->nskip_names = nnames;
    tfc_pipeline_profile_clear(p);
    if (st) return st;
    if (empty && at > 0)
        return tfc_error_set(err, TFC_ERR_DATA, "%s yields no elements: %s leaves none of the "
                             "source's %lld records", p->key, p->stages[at]->label,
                             (long long)p->src->count);
    if (empty)
        return tfc_error_set(err, TFC_ERR_DATA, "%s yields no elements (its stages leave none "
                             "of the source's %lld records)", p->key, (long long)p->src->count);
    if (rs) *err = quiet;
    return rs;
}

int64_t tfc_pipeline_skipped(const tfc_pipeline *p)
{
    return p->src->skipped + p->skipped_run;
}

const char *tfc_pipeline_skipped_names(const tfc_pipeline *p)
{
    return p->src->skip_names;
}

int tfc_pipeline_shard_count(const tfc_pipeline *p)
{
    return p->shard_count > 1 ? p->shard_count : 1;
}

int64_t tfc_pipeline_source_size(const tfc_pipeline *p)
{
    return p->src->count;
}

const char *const *tfc_pipeline_class_names(const tfc_pipeline *p, int *n)
{
    *n = p->src->nclasses;
    return (const char *const *)p->src->class_names;
}

tfc_status tfc_pipeline_label_counts(const tfc_pipeline *p, int classes, int64_t *counts,
                                     tfc_error *err)
{
    const source *s = p->src;
    memset(counts, 0, (size_t)classes * sizeof *counts);
    if (!s->ops->label || s->count == 0 || s->ops->label(s, 0) < 0)
        return tfc_error_set(err, TFC_ERR_CONFIG,
                             "its %s source has no single integer label per record to count",
                             s->ops->type);
    for (int64_t i = 0; i < s->count; i++) {
        int64_t c = s->ops->label(s, i);
        if (c >= 0 && c < classes) counts[c]++;
    }
    return TFC_OK;
}

/* Whether every record's label reaches the end of the pipeline as the source has it: the
 * stages keep every record (no filter, take, skip or shard) and the labels' dtype is still
 * the source's (a map that rewrote them, scale or one_hot, changes it). */
static int labels_pass_through(const tfc_pipeline *p)
{
    static const char *const keep[] = {"source", "shuffle", "repeat", "batch", "padded_batch",
                                       "bucket_by_sequence_length", "cache", "prefetch", "map",
                                       NULL};
    for (int i = 0; i < p->n; i++) {
        int k = 0;
        while (keep[k] && strcmp(keep[k], p->stages[i]->ops->name)) k++;
        if (!keep[k]) return 0;
    }
    const tfc_component_spec *top = &tfc_pipeline_top(p)->spec.comp[TFC_COMP_LABELS];
    return top->present && top->dtype == p->src->spec.comp[TFC_COMP_LABELS].dtype;
}

int tfc_pipeline_find_label_outside(const tfc_pipeline *p, int classes, int64_t *value,
                                    char *buf, size_t size)
{
    const source *s = p->src;
    const tfc_component_spec *l = &s->spec.comp[TFC_COMP_LABELS];
    if (!s->ops->label || !l->present || !tfc_dtype_is_int(l->dtype) || l->shape.ndim < 0 ||
        tfc_shape_numel(&l->shape) != 1 || !labels_pass_through(p))
        return 0;
    for (int64_t i = 0; i < s->count; i++) {
        int64_t c = s->ops->label(s, i);
        if (c >= 0 && c < classes) continue;
        *value = c;
        (s->ops->describe_label ? s->ops->describe_label : s->ops->describe)(s, i, buf, size);
        return 1;
    }
    return 0;
}

const tfc_vocab *tfc_pipeline_vocab(const tfc_pipeline *p)
{
    return p->vocab;
}
