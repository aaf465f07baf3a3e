/* Windows of a time series: `timeseries:` on the csv and npy sources. The table (N, ...) is
 * read once by its source and kept; record i is the window of sequence_length rows starting
 * at row start_index + i * sequence_stride, sampling_rate rows apart, copied out when asked
 * for (random access, so shuffle, cache and saved state work as on any source), and its
 * target is the labels row target_offset rows after the window's first. The windows and their
 * count are Keras's timeseries_dataset_from_array's with data the table and
 * targets=labels[target_offset:]; its batch_size, shuffle and seed are the pipeline's own
 * stages. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/internal.h"

static const tfc_field ts_fields[] = {
    {"sequence_length", TFC_F_INT, offsetof(ts_args, sequence_length), NULL, 1, INT_MAX, NULL,
     "rows in a window (the features' first axis)"},
    {"sequence_stride", TFC_F_INT, offsetof(ts_args, sequence_stride), "1", 1, INT_MAX, NULL,
     "rows between the first rows of successive windows"},
    {"sampling_rate", TFC_F_INT, offsetof(ts_args, sampling_rate), "1", 1, INT_MAX, NULL,
     "rows between successive steps of a window"},
    {"start_index", TFC_F_INT, offsetof(ts_args, start_index), TFC_NO_DEFAULT, 0, INT_MAX, NULL,
     "the first row windows may use (null: 0)"},
    {"end_index", TFC_F_INT, offsetof(ts_args, end_index), TFC_NO_DEFAULT, 1, INT_MAX, NULL,
     "windows use rows before this one (null: every row to the end)"},
    {"target_offset", TFC_F_INT, offsetof(ts_args, target_offset), "0", 0, INT_MAX, NULL,
     "a window starting at row r has the labels of row r + target_offset (Keras's "
     "targets=labels[target_offset:])"},
    {"targets", TFC_F_REFUSED, 0, TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "the targets are the source's labels (csv: label_column, npy: labels), taken "
     "target_offset rows after each window's first row: Keras's targets=labels[d:] is "
     "target_offset: d"},
    {"batch_size", TFC_F_REFUSED, 0, TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "windows are batched by the pipeline: add `- batch: {batch_size: 128}` to `pipeline:` "
     "(Keras's batch_size)"},
    {"shuffle", TFC_F_REFUSED, 0, TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "windows are shuffled by the pipeline: add `- shuffle: {buffer_size: N}` to `pipeline:` "
     "before `batch` (Keras's shuffle=True; the solver's seed keys it)"},
    {"seed", TFC_F_REFUSED, 0, TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "the pipeline's randomness is keyed by the solver's `seed` (a shuffle stage draws from "
     "it)"},
    {NULL},
};

tfc_status tfc_timeseries_check(const tfc_node *n, const char *key, ts_args *ts, tfc_error *err)
{
    memset(ts, 0, sizeof *ts);
    if (!n || tfc_node_is_null(n)) return TFC_OK;
    char k[352];
    snprintf(k, sizeof k, "%s.timeseries", key);
    if (n->kind != TFC_NODE_MAP)
        return tfc_node_error(err, TFC_ERR_CONFIG, n, k, "expected a mapping like "
                              "{sequence_length: 120, sampling_rate: 6, target_offset: 864}");
    tfc_status st = tfc_schema_apply(ts_fields, n, k, ts, err);
    ts->at = n;
    if (!st && ts->end_index && ts->end_index <= ts->start_index) {
        snprintf(k, sizeof k, "%s.timeseries.end_index", key);
        st = tfc_node_error(err, TFC_ERR_CONFIG, tfc_node_get(n, "end_index"), k, "end_index %d "
                            "must be above start_index %d", ts->end_index, ts->start_index);
    }
    if (st) ts->sequence_length = 0;
    return st;
}

typedef struct ts_source {
    source base;
    tfc_tensor f, l;          /* the table and the labels (owned) */
    size_t fbytes, lbytes;    /* one row's bytes */
    int64_t start, stride, rate, length, offset;
    char *fname, *lname;
} ts_source;

static tfc_status ts_get(source *s, int64_t i, tfc_element *e, tfc_error *err)
{
    ts_source *t = (ts_source *)s;
    int64_t r = t->start + i * t->stride;
    char *d = tfc_elem_alloc_uninit(e, TFC_COMP_FEATURES, t->f.dtype,
                                    &s->spec.comp[TFC_COMP_FEATURES].shape);
    if (!d) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory reading %s", t->fname);
    const char *src = (const char *)t->f.data;
    for (int64_t k = 0; k < t->length; k++)
        memcpy(d + (size_t)k * t->fbytes, src + (size_t)(r + k * t->rate) * t->fbytes, t->fbytes);
    if (t->l.data) {
        char *l = tfc_elem_alloc_uninit(e, TFC_COMP_LABELS, t->l.dtype,
                                        &s->spec.comp[TFC_COMP_LABELS].shape);
        if (!l) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory reading %s", t->lname);
        memcpy(l, (const char *)t->l.data + (size_t)(r + t->offset) * t->lbytes, t->lbytes);
    }
    return TFC_OK;
}

static void ts_describe(const source *s, int64_t i, char *buf, size_t size)
{
    const ts_source *t = (const ts_source *)s;
    long long r = (long long)(t->start + i * t->stride);
    long long last = r + (long long)((t->length - 1) * t->rate);
    if (t->rate == 1)
        snprintf(buf, size, "%s window %lld (records %lld-%lld)", t->fname, (long long)i, r, last);
    else
        snprintf(buf, size, "%s window %lld (records %lld-%lld, every %lld)", t->fname,
                 (long long)i, r, last, (long long)t->rate);
}

static void ts_describe_label(const source *s, int64_t i, char *buf, size_t size)
{
    const ts_source *t = (const ts_source *)s;
    snprintf(buf, size, "%s record %lld", t->lname, (long long)(t->start + i * t->stride +
                                                                t->offset));
}

static int64_t ts_label(const source *s, int64_t i)
{
    const ts_source *t = (const ts_source *)s;
    if (!t->l.data || t->lbytes != tfc_dtype_size(t->l.dtype) || !tfc_dtype_is_int(t->l.dtype))
        return -1;
    double v = tfc_value_get(t->l.data, t->l.dtype, t->start + i * t->stride + t->offset);
    return v >= 0x1p62 ? INT64_MAX : (int64_t)v; /* uint64 labels past int64's range */
}

static void ts_free(source *s)
{
    ts_source *t = (ts_source *)s;
    free(t->f.data);
    free(t->l.data);
    free(t->fname);
    free(t->lname);
    free(t);
}

static const source_ops ts_ops = {
    .type = "timeseries",
    .get = ts_get,
    .describe = ts_describe,
    .describe_label = ts_describe_label,
    .label = ts_label,
    .free = ts_free,
};

/* A configuration error at the mapping's key `name` (the mapping when it is absent). */
static tfc_status ts_error(const ts_args *ts, const char *key, const char *name,
                           tfc_error *err, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static tfc_status ts_error(const ts_args *ts, const char *key, const char *name,
                           tfc_error *err, const char *fmt, ...)
{
    char msg[600], k[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const tfc_node *n = tfc_node_get(ts->at, name);
    snprintf(k, sizeof k, "%s.timeseries%s%s", key ? key : "source", n ? "." : "", n ? name : "");
    return tfc_node_error(err, TFC_ERR_CONFIG, n ? n : ts->at, k, "%s", msg);
}

/* The window count of Keras's timeseries_dataset_from_array, checking its arguments against
 * the table's n rows and the m labels rows (m < 0: no labels); -1 after an error. Keras counts
 * min(end - start - (T - 1) * rate, m - offset) window starts, which, when start_index > 0
 * runs past its targets (tf.gather then fails): the target row must exist, so the bound here
 * is m - offset - start, the same wherever Keras's windows all have targets. */
static int64_t ts_count(const ts_args *ts, int64_t n, int64_t m, const char *key,
                        tfc_error *err)
{
    int64_t start = ts->start_index, end = ts->end_index ? ts->end_index : n;
    if (start >= n) {
        ts_error(ts, key, "start_index", err, "start_index %lld is not below the table's %lld "
                 "rows", (long long)start, (long long)n);
        return -1;
    }
    if (ts->end_index && end >= n) {
        ts_error(ts, key, "end_index", err, "end_index %lld is not below the table's %lld rows "
                 "(leave it out to use every row)", (long long)end, (long long)n);
        return -1;
    }
    if (ts->sampling_rate >= n || ts->sequence_stride >= n) {
        const char *name = ts->sampling_rate >= n ? "sampling_rate" : "sequence_stride";
        ts_error(ts, key, name, err, "%s %d is not below the table's %lld rows", name,
                 ts->sampling_rate >= n ? ts->sampling_rate : ts->sequence_stride, (long long)n);
        return -1;
    }
    if (m >= 0 && ts->target_offset >= m) {
        ts_error(ts, key, "target_offset", err, "target_offset %d is not below the labels' %lld "
                 "rows", ts->target_offset, (long long)m);
        return -1;
    }
    int64_t span = (int64_t)(ts->sequence_length - 1) * ts->sampling_rate;
    int64_t avail = end - start - span;
    if (avail <= 0) {
        ts_error(ts, key, "sequence_length", err, "a window of sequence_length %d, sampling_rate "
                 "%d spans %lld rows, but rows [%lld, %lld) are only %lld", ts->sequence_length,
                 ts->sampling_rate, (long long)span + 1, (long long)start, (long long)end,
                 (long long)(end - start));
        return -1;
    }
    if (m >= 0 && m - ts->target_offset - start < avail) avail = m - ts->target_offset - start;
    if (avail <= 0) {
        ts_error(ts, key, "target_offset", err, "no window has a target: the first starts at row "
                 "%lld, and target_offset %d puts its target past the labels' %lld rows",
                 (long long)start, ts->target_offset, (long long)m);
        return -1;
    }
    return (avail - 1) / ts->sequence_stride + 1;
}

static tfc_shape tail_shape(const tfc_shape *s, int64_t first)
{
    tfc_shape r = {.ndim = s->ndim - (first < 0)};
    int at = 0;
    if (first >= 0) r.dim[at++] = first;
    for (int i = 1; i < s->ndim; i++) r.dim[at++] = s->dim[i];
    return r;
}

tfc_status tfc_source_timeseries(source **out, const char *type, tfc_tensor *table,
                                 tfc_tensor *labels, const ts_args *ts, const char *fname,
                                 const char *lname, int num_classes, const char *key,
                                 tfc_error *err)
{
    *out = NULL;
    ts_source *t = calloc(1, sizeof *t);
    if (t) {
        t->f = *table;
        if (labels) t->l = *labels;
        t->fname = strdup(fname ? fname : type);
        t->lname = strdup(lname ? lname : fname ? fname : type);
    }
    table->data = NULL;
    if (labels) labels->data = NULL;
    if (!t || !t->fname || !t->lname) {
        if (t) ts_free(&t->base);
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    t->base.ops = &ts_ops;
    t->base.kind = type;
    tfc_status st = TFC_OK;
    if (t->f.shape.ndim < 1 || (t->l.data && t->l.shape.ndim < 1)) {
        st = tfc_error_set(err, TFC_ERR_DATA, "%s: a time series needs a first axis of rows, "
                           "found a scalar", t->f.shape.ndim < 1 ? t->fname : t->lname);
        goto fail;
    }
    int64_t n = t->f.shape.dim[0], m = t->l.data ? t->l.shape.dim[0] : -1;
    int64_t count = ts_count(ts, n, m, key, err);
    if (count < 0) {
        st = TFC_ERR_CONFIG;
        goto fail;
    }
    t->start = ts->start_index;
    t->stride = ts->sequence_stride;
    t->rate = ts->sampling_rate;
    t->length = ts->sequence_length;
    t->offset = ts->target_offset;
    t->base.count = count;
    tfc_shape rec = tail_shape(&t->f.shape, -1);
    t->fbytes = (size_t)tfc_shape_numel(&rec) * tfc_dtype_size(t->f.dtype);
    tfc_shape win = tail_shape(&t->f.shape, t->length);
    if (tfc_data_bytes_checked(t->f.dtype, &win, (int64_t)1 << 40) < 0) {
        st = ts_error(ts, key, "sequence_length", err, "a window of %lld rows is too large",
                      (long long)t->length);
        goto fail;
    }
    t->base.spec.comp[TFC_COMP_FEATURES] = (tfc_component_spec){1, t->f.dtype, win};
    if (t->l.data) {
        tfc_shape lrec = tail_shape(&t->l.shape, -1);
        t->lbytes = (size_t)tfc_shape_numel(&lrec) * tfc_dtype_size(t->l.dtype);
        t->base.spec.comp[TFC_COMP_LABELS] = (tfc_component_spec){1, t->l.dtype, lrec};
        int64_t per = (int64_t)(t->lbytes / tfc_dtype_size(t->l.dtype));
        int check = num_classes > 0 && tfc_dtype_is_int(t->l.dtype) && per > 0;
        for (int64_t i = 0; check && i < count; i++) {
            int64_t r = t->start + i * t->stride + t->offset;
            for (int64_t k = 0; k < per; k++) {
                double v = tfc_value_get(t->l.data, t->l.dtype, r * per + k);
                if (v < 0 || v >= num_classes) {
                    st = tfc_error_set(err, TFC_ERR_DATA, "%s record %lld: label %.0f is out of "
                                       "range [0, %d)", t->lname, (long long)r, v, num_classes);
                    goto fail;
                }
            }
        }
    }
    *out = &t->base;
    return TFC_OK;
fail:
    ts_free(&t->base);
    return st;
}
