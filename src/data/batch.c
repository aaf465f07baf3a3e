/* batch and padded_batch: stack batch_size consecutive elements along a new axis 0. batch
 * needs equal shapes; padded_batch pads every dimension of the features (and of sequence
 * labels) to the longest in the batch or to padded_shapes, with padding_values, and adds the
 * lengths component (each element's unpadded features dim 0) for masking; the further inputs
 * of an element of several are padded each to its own longest, with the features' padding
 * value (the lengths stay input 0's), and the further labels of an element of several each
 * to its own longest with the labels' padding value. The last, short batch is kept unless
 * drop_remainder.
 * bucket_by_sequence_length groups elements by that length into buckets, each
 * padded-batched on its own (tf.data's); it refuses elements of several inputs. */
#include <stdlib.h>
#include <string.h>

#include "data/internal.h"

typedef struct batch_args {
    int64_t batch_size;
    int drop_remainder;
    int padded;
    tfc_shape padded_shape; /* ndim 0: pad to the longest */
    double padding_value;
    double label_padding_value;
} batch_args;

typedef struct batch_stage {
    stage base;
    batch_args a;
    elem *items;
} batch_stage;

/* Copies `src` (shape ss) into the zero-offset corner of a padded slot of shape ps. */
static void copy_padded(char *dst, const tfc_shape *ps, const char *src, const tfc_shape *ss,
                        size_t es, int d)
{
    if (ss->ndim == 0) {
        memcpy(dst, src, es);
        return;
    }
    /* Inner block sizes of the padded and source layouts below dimension d. */
    int64_t pin = 1, sin = 1;
    for (int i = d + 1; i < ps->ndim; i++) {
        pin *= ps->dim[i];
        sin *= ss->dim[i];
    }
    if (d == ss->ndim - 1) {
        memcpy(dst, src, (size_t)ss->dim[d] * es);
        return;
    }
    for (int64_t k = 0; k < ss->dim[d]; k++)
        copy_padded(dst + (size_t)(k * pin) * es, ps, src + (size_t)(k * sin) * es, ss, es, d + 1);
}

/* What stacking needs: the arguments, the elements, the pipeline's key and the input spec
 * (its inputs' names) for messages. */
typedef struct stacking {
    const batch_args *a;
    elem *items;
    const char *key;
    const tfc_element_spec *spec;
} stacking;

static tfc_status stack(const stacking *b, int n, int comp, elem *out, tfc_error *err)
{
    const tfc_tensor *first = &b->items[0].e.comp[comp];
    tfc_shape slot = first->shape;
    int pad = b->a->padded && comp != TFC_COMP_LENGTHS && first->shape.ndim > 0;
    for (int i = 1; i < n; i++) {
        const tfc_tensor *t = &b->items[i].e.comp[comp];
        char s1[160], s2[160];
        if (!t->data || t->dtype != first->dtype || t->shape.ndim != first->shape.ndim) {
            tfc_shape_str(&first->shape, s1, sizeof s1);
            tfc_shape_str(&t->shape, s2, sizeof s2);
            return tfc_error_set(err, TFC_ERR_DATA, "%s: element %d of a batch has %s %s %s, "
                                 "the first has %s %s", b->key, i,
                                 tfc_data_spec_component_name(b->spec, comp),
                                 t->data ? tfc_data_dtype_name(t->dtype) : "(none)", s2,
                                 tfc_data_dtype_name(first->dtype), s1);
        }
        for (int d = 0; d < slot.ndim; d++) {
            if (t->shape.dim[d] == slot.dim[d]) continue;
            if (!pad) {
                tfc_shape_str(&first->shape, s1, sizeof s1);
                tfc_shape_str(&t->shape, s2, sizeof s2);
                tfc_error_set(err, TFC_ERR_DATA, "%s: batch: element %d has %s of shape %s but "
                              "the first has %s", b->key, i,
                              tfc_data_spec_component_name(b->spec, comp), s2, s1);
                tfc_error_hint(err, "use padded_batch for variable shapes, or map ops resize / "
                               "pad / truncate (text_vectorization: output_sequence_length)");
                return TFC_ERR_DATA;
            }
            if (t->shape.dim[d] > slot.dim[d]) slot.dim[d] = t->shape.dim[d];
        }
    }
    if (pad && comp == TFC_COMP_FEATURES && b->a->padded_shape.ndim > 0) {
        for (int d = 0; d < slot.ndim && d < b->a->padded_shape.ndim; d++) {
            int64_t want = b->a->padded_shape.dim[d];
            if (want < 0) continue;
            if (slot.dim[d] > want)
                return tfc_error_set(err, TFC_ERR_DATA, "%s: padded_batch: an element has %lld "
                                     "in dimension %d, more than padded_shapes[%d] = %lld; hint: "
                                     "truncate first", b->key, (long long)slot.dim[d], d,
                                     d, (long long)want);
            slot.dim[d] = want;
        }
    }
    tfc_shape bs = {.ndim = slot.ndim + 1};
    if (bs.ndim > TFC_MAX_DIMS)
        return tfc_error_set(err, TFC_ERR_DATA, "%s: batch: elements of rank %d cannot be "
                             "batched (at most %d dimensions)", b->key, slot.ndim,
                             TFC_MAX_DIMS);
    bs.dim[0] = n;
    for (int d = 0; d < slot.ndim; d++) bs.dim[d + 1] = slot.dim[d];
    char *dst = pad ? tfc_element_alloc(&out->e, comp, first->dtype, &bs)
                    : tfc_elem_alloc_uninit(&out->e, comp, first->dtype, &bs);
    if (!dst)
        return tfc_error_set(err, TFC_ERR_NOMEM, "%s: cannot allocate a batch of %d elements",
                             b->key, n);
    size_t es = tfc_dtype_size(first->dtype);
    size_t slot_n = (size_t)tfc_shape_numel(&slot);
    if (!pad) {
        for (int i = 0; i < n; i++)
            memcpy(dst + (size_t)i * slot_n * es, b->items[i].e.comp[comp].data, slot_n * es);
        return TFC_OK;
    }
    double pv = tfc_data_label_of(comp) >= 0 ? b->a->label_padding_value : b->a->padding_value;
    if (pv != 0) {
        int64_t total = (int64_t)slot_n * n;
        for (int64_t i = 0; i < total; i++) tfc_value_set(dst, first->dtype, i, pv);
    }
    for (int i = 0; i < n; i++) {
        const tfc_tensor *t = &b->items[i].e.comp[comp];
        if (tfc_shape_numel(&t->shape) == 0) continue;
        copy_padded(dst + (size_t)i * slot_n * es, &slot, t->data, &t->shape, es, 0);
    }
    return TFC_OK;
}

/* The batch of items[0..n) into out: every component stacked (padded when a->padded), the
 * lengths component after padding, and the rows' ids when every item has one. */
static tfc_status make_batch(const stacking *b, int n, elem *out, tfc_error *err)
{
    tfc_status st = TFC_OK;
    int ids = 1;
    free(out->rows);
    out->rows = NULL;
    out->nrows = 0;
    for (int i = 0; i < n; i++) ids &= b->items[i].has_id;
    if (ids && (out->rows = malloc((size_t)n * sizeof *out->rows))) {
        for (int i = 0; i < n; i++) out->rows[i] = b->items[i].id;
        out->nrows = n;
    }
    for (int c = 0; c < TFC_COMP_COUNT && !st; c++)
        if (b->items[0].e.comp[c].data) st = stack(b, n, c, out, err);
    if (!st && b->a->padded) {
        tfc_shape ls = {.ndim = 1, .dim = {n}};
        int32_t *len = tfc_element_alloc(&out->e, TFC_COMP_LENGTHS, TFC_I32, &ls);
        if (!len) st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        for (int i = 0; len && i < n; i++) {
            const tfc_shape *fs = &b->items[i].e.comp[TFC_COMP_FEATURES].shape;
            len[i] = fs->ndim ? (int32_t)fs->dim[0] : 1;
        }
    }
    if (st) tfc_elem_free(out);
    return st;
}

static tfc_status batch_next(stage *s, elem *out, int *end, tfc_error *err)
{
    batch_stage *b = (batch_stage *)s;
    int n = 0;
    tfc_status st = TFC_OK;
    while (n < b->a.batch_size) {
        int e = 0;
        memset(&b->items[n], 0, sizeof b->items[n]);
        st = tfc_up_next(s->up, &b->items[n], &e, err);
        if (st) goto done;
        if (e) break;
        n++;
    }
    if (n == 0 || (b->a.drop_remainder && n < b->a.batch_size)) {
        *end = 1;
        goto done;
    }
    st = make_batch(&(stacking){&b->a, b->items, s->p->key, &s->up->spec}, n, out, err);
done:
    for (int i = 0; i < n; i++) tfc_elem_free(&b->items[i]);
    return st;
}

static void batch_reset(stage *s)
{
    s->up->ops->reset(s->up);
}

static tfc_status batch_save(stage *s, wbuf *w, tfc_error *err)
{
    return TFC_OK;
}

static tfc_status batch_restore(stage *s, rbuf *r, tfc_error *err)
{
    return TFC_OK;
}

static void batch_free(stage *s)
{
    batch_stage *b = (batch_stage *)s;
    free(b->items);
    free(b);
}

static const stage_ops batch_ops = {
    .name = "batch",
    .next = batch_next,
    .reset = batch_reset,
    .save = batch_save,
    .restore = batch_restore,
    .free = batch_free,
};

/* Appends a batch stage; config errors point at (at, key) when `at` is given (a solver
 * file), else they name the stage (the C API). */
static tfc_status batch_push(tfc_pipeline *p, const batch_args *a, const tfc_node *at,
                             const char *key, tfc_error *err)
{
    const char *name = a->padded ? "padded_batch" : "batch";
    if (a->batch_size < 1 || a->batch_size > (1 << 24)) {
        if (at)
            return tfc_node_error(err, TFC_ERR_CONFIG, at, key, "batch_size must be in [1, %d], "
                                  "found %lld", 1 << 24, (long long)a->batch_size);
        return tfc_error_set(err, TFC_ERR_CONFIG, "%s: batch_size must be in [1, %d], found %lld",
                             name, 1 << 24, (long long)a->batch_size);
    }
    stage *up = tfc_pipeline_top(p);
    for (int c = 0; c < TFC_COMP_COUNT; c++) {
        const tfc_component_spec *cs = &up->spec.comp[c];
        if (cs->present && cs->shape.ndim >= TFC_MAX_DIMS) {
            char msg[200];
            snprintf(msg, sizeof msg, "%s: %s of rank %d cannot get a batch axis (at most %d "
                     "dimensions)", name, tfc_data_spec_component_name(&up->spec, c),
                     cs->shape.ndim, TFC_MAX_DIMS);
            return at ? tfc_node_error(err, TFC_ERR_CONFIG, at, key, "%s", msg)
                      : tfc_error_set(err, TFC_ERR_CONFIG, "%s", msg);
        }
    }
    if (a->padded && up->spec.comp[TFC_COMP_LENGTHS].present) {
        const char *msg = "padded_batch: the elements already have lengths (padded twice)";
        return at ? tfc_node_error(err, TFC_ERR_CONFIG, at, key, "%s", msg)
                  : tfc_error_set(err, TFC_ERR_CONFIG, "%s", msg);
    }
    const tfc_component_spec *fs = &up->spec.comp[TFC_COMP_FEATURES];
    if (a->padded && a->padded_shape.ndim > 0 && fs->shape.ndim >= 0 &&
        a->padded_shape.ndim != fs->shape.ndim) {
        char msg[300], sh[160];
        snprintf(msg, sizeof msg, "padded_shapes has %d dimensions but the features are %s",
                 a->padded_shape.ndim, tfc_shape_str(&fs->shape, sh, sizeof sh));
        return at ? tfc_node_error(err, TFC_ERR_CONFIG, at, key, "%s", msg)
                  : tfc_error_set(err, TFC_ERR_CONFIG, "%s", msg);
    }
    batch_stage *b = calloc(1, sizeof *b);
    if (b) b->items = calloc((size_t)a->batch_size, sizeof *b->items);
    if (!b || !b->items) {
        free(b);
        return tfc_error_set(err, TFC_ERR_NOMEM, "%s: cannot allocate %lld slots", name,
                             (long long)a->batch_size);
    }
    b->a = *a;
    stage *s = &b->base;
    s->ops = &batch_ops;
    s->spec = up->spec;
    s->spec.batched = 1;
    for (int c = 0; c < TFC_COMP_COUNT; c++) {
        tfc_component_spec *cs = &s->spec.comp[c];
        if (!cs->present || cs->shape.ndim < 0) continue;
        int pad = a->padded && cs->shape.ndim > 0;
        for (int d = cs->shape.ndim; d > 0; d--) cs->shape.dim[d] = cs->shape.dim[d - 1];
        cs->shape.ndim++;
        cs->shape.dim[0] = a->drop_remainder ? a->batch_size : -1;
        /* padded_shapes fixes padded dimensions; the others stay as the input's (the
         * longest of equal lengths is that length; unknown stays unknown). */
        for (int d = 1; pad && d < cs->shape.ndim; d++) {
            int64_t want = c == TFC_COMP_FEATURES && d - 1 < a->padded_shape.ndim
                               ? a->padded_shape.dim[d - 1] : -1;
            if (want >= 0) cs->shape.dim[d] = want;
        }
    }
    if (a->padded)
        s->spec.comp[TFC_COMP_LENGTHS] = (tfc_component_spec){
            1, TFC_I32, {.ndim = 1, .dim = {a->drop_remainder ? a->batch_size : -1}}};
    uint64_t h = tfc_data_hash_mix(tfc_data_hash_str(0, name), (uint64_t)a->batch_size);
    s->config_hash = tfc_data_hash_mix(h, (uint64_t)a->drop_remainder);
    tfc_pipeline_push(p, s);
    return TFC_OK;
}

/* ---- the stages of a solver file and of the C API ----------------------------------------- */

typedef struct batch_cfg {
    int batch_size, drop_remainder;
    tfc_int_list padded_shapes;
    tfc_float_list padding_values;
} batch_cfg;

static const tfc_field batch_fields[] = {
    {"batch_size", TFC_F_INT, offsetof(batch_cfg, batch_size), NULL, 1, 1 << 24, NULL,
     "elements per batch"},
    {"drop_remainder", TFC_F_BOOL, offsetof(batch_cfg, drop_remainder), "false", TFC_UNBOUNDED,
     NULL, "drop the last, short batch"},
    {NULL},
};
static const tfc_field padded_batch_fields[] = {
    {"batch_size", TFC_F_INT, offsetof(batch_cfg, batch_size), NULL, 1, 1 << 24, NULL,
     "elements per batch"},
    {"padded_shapes", TFC_F_INT_LIST, offsetof(batch_cfg, padded_shapes), TFC_NO_DEFAULT, -1,
     1 << 30, NULL, "shape of padded features (-1 or absent: the longest in the batch)"},
    {"padding_values", TFC_F_FLOAT_LIST, offsetof(batch_cfg, padding_values), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "padding value of the features, or [features, labels] (default 0)"},
    {"drop_remainder", TFC_F_BOOL, offsetof(batch_cfg, drop_remainder), "false", TFC_UNBOUNDED,
     NULL, "drop the last, short batch"},
    {NULL},
};

static tfc_status padded_batch_check(const stage_plan *pl, tfc_error *err)
{
    const batch_cfg *c = pl->args;
    tfc_status st = TFC_OK;
    if (c->padded_shapes.n > TFC_MAX_DIMS)
        st = tfc_node_error(err, TFC_ERR_CONFIG, pl->at, pl->key, "padded_shapes: at most %d "
                            "dimensions", TFC_MAX_DIMS);
    if (c->padding_values.n > 2)
        st = tfc_node_error(err, TFC_ERR_CONFIG, pl->at, pl->key, "padding_values: one value, or "
                            "[features, labels]");
    return st;
}

static void batch_plan(const stage_plan *pl, tfc_data_plan *out)
{
    out->batch_size = ((const batch_cfg *)pl->args)->batch_size;
    out->batched = 1;
}

static tfc_status push_cfg(tfc_pipeline *p, const stage_plan *pl, int padded, tfc_error *err)
{
    const batch_cfg *c = pl->args;
    batch_args a = {.batch_size = c->batch_size, .drop_remainder = c->drop_remainder,
                    .padded = padded};
    a.padded_shape.ndim = c->padded_shapes.n; /* at most TFC_MAX_DIMS: checked when planned */
    for (int i = 0; i < c->padded_shapes.n && i < TFC_MAX_DIMS; i++)
        a.padded_shape.dim[i] = c->padded_shapes.v[i];
    a.padding_value = c->padding_values.n ? c->padding_values.v[0] : 0;
    a.label_padding_value = c->padding_values.n > 1 ? c->padding_values.v[1] : 0;
    return batch_push(p, &a, pl->at, pl->key, err);
}

static tfc_status batch_push_planned(tfc_pipeline *p, stage_plan *pl, tfc_error *err)
{
    return push_cfg(p, pl, 0, err);
}

static tfc_status padded_batch_push_planned(tfc_pipeline *p, stage_plan *pl, tfc_error *err)
{
    return push_cfg(p, pl, 1, err);
}

extern const stage_def tfc_stage_batch, tfc_stage_padded_batch;

int *tfc_stage_plan_batch_size(stage_plan *pl)
{
    if (pl->def != &tfc_stage_batch && pl->def != &tfc_stage_padded_batch) return NULL;
    return &((batch_cfg *)pl->args)->batch_size;
}

const stage_def tfc_stage_batch = {
    .name = "batch",
    .help = "stacks consecutive elements",
    .fields = batch_fields,
    .args_size = sizeof(batch_cfg),
    .plan = batch_plan,
    .push = batch_push_planned,
};

const stage_def tfc_stage_padded_batch = {
    .name = "padded_batch",
    .help = "stacks variable-length elements, padding them; adds lengths",
    .fields = padded_batch_fields,
    .args_size = sizeof(batch_cfg),
    .check = padded_batch_check,
    .plan = batch_plan,
    .push = padded_batch_push_planned,
};

tfc_status tfc_pipeline_batch(tfc_pipeline *p, int64_t batch_size, int drop_remainder,
                              tfc_error *err)
{
    batch_args a = {.batch_size = batch_size, .drop_remainder = drop_remainder != 0};
    return batch_push(p, &a, NULL, "batch", err);
}

tfc_status tfc_pipeline_padded_batch(tfc_pipeline *p, int64_t batch_size,
                                     const tfc_shape *padded_shape, double padding_value,
                                     int drop_remainder, tfc_error *err)
{
    batch_args a = {.batch_size = batch_size, .drop_remainder = drop_remainder != 0, .padded = 1,
                    .padding_value = padding_value};
    if (padded_shape) a.padded_shape = *padded_shape;
    return batch_push(p, &a, NULL, "padded_batch", err);
}

/* ---- bucket_by_sequence_length ------------------------------------------------------------ */

#define MAX_BUCKETS (TFC_LIST_MAX + 1)

/* tf.data's bucket_by_sequence_length with element_length_func the features' dimension 0:
 * bucket i holds the lengths in [boundaries[i-1], boundaries[i]) (the first from 0, the
 * last without end); a bucket that reaches batch_sizes[i] elements is emitted as a padded
 * batch; at the end of the input the partial buckets follow in bucket order (none with
 * drop_remainder), as group_by_window flushes its windows. */
typedef struct bucket_stage {
    stage base;
    batch_args a; /* padded; padded_shape per bucket when pad_to_bucket_boundary */
    int nb, pad_to_boundary;
    int64_t boundaries[MAX_BUCKETS], sizes[MAX_BUCKETS];
    elem *items[MAX_BUCKETS];
    int count[MAX_BUCKETS];
    int flushing; /* the input ended: partial buckets are being emitted */
} bucket_stage;

static tfc_status bucket_emit(bucket_stage *b, int k, elem *out, tfc_error *err)
{
    batch_args a = b->a;
    if (b->pad_to_boundary && k < b->nb - 1) {
        const tfc_shape *fs = &b->items[k][0].e.comp[TFC_COMP_FEATURES].shape;
        a.padded_shape.ndim = fs->ndim;
        for (int d = 0; d < fs->ndim; d++) a.padded_shape.dim[d] = -1;
        a.padded_shape.dim[0] = b->boundaries[k] - 1;
    }
    int n = b->count[k];
    b->count[k] = 0;
    stacking sk = {&a, b->items[k], b->base.p->key, &b->base.up->spec};
    tfc_status st = make_batch(&sk, n, out, err);
    for (int i = 0; i < n; i++) tfc_elem_free(&b->items[k][i]);
    return st;
}

static tfc_status bucket_next(stage *s, elem *out, int *end, tfc_error *err)
{
    bucket_stage *b = (bucket_stage *)s;
    while (!b->flushing) {
        elem x = {0};
        int e = 0;
        tfc_status st = tfc_up_next(s->up, &x, &e, err);
        if (st) return st;
        if (e) {
            b->flushing = 1;
            break;
        }
        const tfc_shape *fs = &x.e.comp[TFC_COMP_FEATURES].shape;
        int64_t len = fs->ndim ? fs->dim[0] : 1;
        int k = 0;
        while (k < b->nb - 1 && len >= b->boundaries[k]) k++;
        if (b->pad_to_boundary && k == b->nb - 1) {
            char where[512];
            tfc_pipeline_describe_elem(s->p, &x, where, sizeof where);
            tfc_elem_free(&x);
            return tfc_error_set(err, TFC_ERR_DATA, "%s: bucket_by_sequence_length: %s has length "
                                 "%lld, not below the last boundary %lld (pad_to_bucket_boundary "
                                 "needs every length below it)", s->p->key, where, (long long)len,
                                 (long long)b->boundaries[b->nb - 2]);
        }
        tfc_elem_move(&b->items[k][b->count[k]++], &x);
        if (b->count[k] == b->sizes[k]) return bucket_emit(b, k, out, err);
    }
    for (int k = 0; k < b->nb; k++)
        if (b->count[k] > 0 && !b->a.drop_remainder) return bucket_emit(b, k, out, err);
    for (int k = 0; k < b->nb; k++) { /* drop_remainder: the partial buckets are dropped */
        for (int i = 0; i < b->count[k]; i++) tfc_elem_free(&b->items[k][i]);
        b->count[k] = 0;
    }
    *end = 1;
    return TFC_OK;
}

static void bucket_clear(bucket_stage *b)
{
    for (int k = 0; k < b->nb; k++) {
        for (int i = 0; i < b->count[k]; i++) tfc_elem_free(&b->items[k][i]);
        b->count[k] = 0;
    }
    b->flushing = 0;
}

static void bucket_reset(stage *s)
{
    bucket_clear((bucket_stage *)s);
    s->up->ops->reset(s->up);
}

/* The buffered elements (by id where the stage below can re-make them) and the flushing
 * flag: a restored pipeline emits exactly the batches the saved one would have. */
static tfc_status bucket_save(stage *s, wbuf *w, tfc_error *err)
{
    bucket_stage *b = (bucket_stage *)s;
    tfc_wbuf_u64(w, (uint64_t)b->flushing);
    for (int k = 0; k < b->nb; k++) {
        tfc_wbuf_u64(w, (uint64_t)b->count[k]);
        for (int i = 0; i < b->count[k]; i++) tfc_stage_save_elem(w, &b->items[k][i], s->up);
    }
    return TFC_OK;
}

static tfc_status bucket_restore(stage *s, rbuf *r, tfc_error *err)
{
    bucket_stage *b = (bucket_stage *)s;
    bucket_clear(b);
    b->flushing = tfc_rbuf_u64(r) != 0;
    for (int k = 0; k < b->nb; k++) {
        uint64_t n = tfc_rbuf_u64(r);
        if (r->bad || n >= (uint64_t)b->sizes[k])
            return tfc_error_set(err, TFC_ERR_FORMAT, "%s: bucket_by_sequence_length: saved "
                                 "state does not fit bucket %d", s->p->key, k);
        for (uint64_t i = 0; i < n; i++) {
            tfc_status st = tfc_stage_restore_elem(r, s->up, &b->items[k][i], err);
            if (st) return st;
            b->count[k] = (int)i + 1;
        }
    }
    return TFC_OK;
}

static void bucket_free(stage *s)
{
    bucket_stage *b = (bucket_stage *)s;
    bucket_clear(b);
    for (int k = 0; k < b->nb; k++) free(b->items[k]);
    free(b);
}

static const stage_ops bucket_ops = {
    .name = "bucket_by_sequence_length",
    .next = bucket_next,
    .reset = bucket_reset,
    .save = bucket_save,
    .restore = bucket_restore,
    .free = bucket_free,
};

typedef struct bucket_cfg {
    tfc_int_list boundaries, batch_sizes;
    int pad_to_bucket_boundary, drop_remainder;
    tfc_float_list padding_values;
} bucket_cfg;

static const tfc_field bucket_fields[] = {
    {"boundaries", TFC_F_INT_LIST, offsetof(bucket_cfg, boundaries), NULL, 1, 1 << 30, NULL,
     "increasing upper length boundaries of the buckets (bucket_boundaries)"},
    {"batch_sizes", TFC_F_INT_LIST, offsetof(bucket_cfg, batch_sizes), NULL, 1, 1 << 24, NULL,
     "one batch size per bucket: len(boundaries) + 1 (bucket_batch_sizes)"},
    {"pad_to_bucket_boundary", TFC_F_BOOL, offsetof(bucket_cfg, pad_to_bucket_boundary),
     "false", TFC_UNBOUNDED, NULL, "pad to the bucket's boundary - 1 instead of its longest "
     "element (every length must then lie below the last boundary)"},
    {"padding_values", TFC_F_FLOAT_LIST, offsetof(bucket_cfg, padding_values), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "padding value of the features, or [features, labels] (default 0)"},
    {"drop_remainder", TFC_F_BOOL, offsetof(bucket_cfg, drop_remainder), "false",
     TFC_UNBOUNDED, NULL, "drop each bucket's last, short batch"},
    {NULL},
};

static tfc_status bucket_check(const stage_plan *pl, tfc_error *err)
{
    const bucket_cfg *c = pl->args;
    if (c->boundaries.n >= TFC_LIST_MAX)
        return tfc_node_error(err, TFC_ERR_CONFIG, pl->at, pl->key, "boundaries: at most %d",
                              TFC_LIST_MAX - 1);
    for (int i = 1; i < c->boundaries.n; i++)
        if (c->boundaries.v[i] <= c->boundaries.v[i - 1])
            return tfc_node_error(err, TFC_ERR_CONFIG, pl->at, pl->key, "boundaries must "
                                  "increase: %d follows %d", c->boundaries.v[i],
                                  c->boundaries.v[i - 1]);
    if (c->batch_sizes.n != c->boundaries.n + 1)
        return tfc_node_error(err, TFC_ERR_CONFIG, pl->at, pl->key, "batch_sizes needs %d "
                              "values (one per bucket: len(boundaries) + 1), found %d",
                              c->boundaries.n + 1, c->batch_sizes.n);
    if (c->padding_values.n > 2)
        return tfc_node_error(err, TFC_ERR_CONFIG, pl->at, pl->key, "padding_values: one value, "
                              "or [features, labels]");
    return TFC_OK;
}

static void bucket_plan(const stage_plan *pl, tfc_data_plan *out)
{
    const bucket_cfg *c = pl->args;
    int64_t most = 0;
    for (int i = 0; i < c->batch_sizes.n; i++)
        if (c->batch_sizes.v[i] > most) most = c->batch_sizes.v[i];
    out->batch_size = most; /* the model is bound for the largest */
    out->batched = 1;
}

static tfc_status bucket_push(tfc_pipeline *p, stage_plan *pl, tfc_error *err)
{
    const bucket_cfg *c = pl->args;
    stage *up = tfc_pipeline_top(p);
    const tfc_component_spec *fs = &up->spec.comp[TFC_COMP_FEATURES];
    if (up->spec.ninputs > 1) {
        char inputs[600];
        return tfc_node_error(err, TFC_ERR_CONFIG, pl->at, pl->key, "bucket_by_sequence_length "
                              "buckets by one length; the elements have %d inputs (%s), of "
                              "lengths of their own (use padded_batch)", up->spec.ninputs,
                              tfc_data_inputs_str(&up->spec, inputs, sizeof inputs));
    }
    if (up->spec.comp[TFC_COMP_LENGTHS].present || up->spec.batched)
        return tfc_node_error(err, TFC_ERR_CONFIG, pl->at, pl->key, "bucket_by_sequence_length "
                              "batches single elements: put it in place of batch/padded_batch");
    if (fs->shape.ndim == 0 || fs->shape.ndim >= TFC_MAX_DIMS)
        return tfc_node_error(err, TFC_ERR_CONFIG, pl->at, pl->key, "bucket_by_sequence_length "
                              "needs sequences (features of rank 1 to %d)", TFC_MAX_DIMS - 1);
    bucket_stage *b = calloc(1, sizeof *b);
    if (!b) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    b->nb = c->batch_sizes.n;
    b->pad_to_boundary = c->pad_to_bucket_boundary;
    b->a = (batch_args){.padded = 1, .drop_remainder = c->drop_remainder,
                        .padding_value = c->padding_values.n ? c->padding_values.v[0] : 0,
                        .label_padding_value = c->padding_values.n > 1 ? c->padding_values.v[1] : 0};
    uint64_t h = tfc_data_hash_str(0, "bucket_by_sequence_length");
    for (int k = 0; k < b->nb; k++) {
        b->sizes[k] = c->batch_sizes.v[k];
        if (k < b->nb - 1) b->boundaries[k] = c->boundaries.v[k];
        h = tfc_data_hash_mix(tfc_data_hash_mix(h, (uint64_t)b->sizes[k]),
                              k < b->nb - 1 ? (uint64_t)b->boundaries[k] : 0);
        if (!(b->items[k] = calloc((size_t)b->sizes[k], sizeof *b->items[k]))) {
            bucket_free(&b->base);
            return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        }
    }
    stage *s = &b->base;
    s->ops = &bucket_ops;
    s->spec = up->spec;
    s->spec.batched = 1;
    for (int comp = 0; comp < TFC_COMP_COUNT; comp++) {
        tfc_component_spec *cs = &s->spec.comp[comp];
        if (!cs->present || cs->shape.ndim < 0) continue;
        for (int d = cs->shape.ndim; d > 0; d--) cs->shape.dim[d] = cs->shape.dim[d - 1];
        cs->shape.ndim++;
        cs->shape.dim[0] = -1;
        if (comp == TFC_COMP_FEATURES) cs->shape.dim[1] = -1; /* varies from bucket to bucket */
    }
    s->spec.comp[TFC_COMP_LENGTHS] = (tfc_component_spec){1, TFC_I32, {.ndim = 1, .dim = {-1}}};
    s->config_hash = tfc_data_hash_mix(h, (uint64_t)(c->drop_remainder * 2 + b->pad_to_boundary));
    tfc_pipeline_push(p, s);
    return TFC_OK;
}

const stage_def tfc_stage_bucket_by_sequence_length = {
    .name = "bucket_by_sequence_length",
    .help = "batches variable-length elements by length, each bucket padded on its own; adds "
            "lengths",
    .fields = bucket_fields,
    .args_size = sizeof(bucket_cfg),
    .check = bucket_check,
    .plan = bucket_plan,
    .push = bucket_push,
};
