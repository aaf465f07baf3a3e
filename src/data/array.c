/* The array source: features (N, ...) and optional labels (N, ...) held in memory and
 * sliced along axis 0, like tf.data's from_tensor_slices. The tensors, IDX and NPY sources
 * are this source over arrays they loaded. Records whose labels are out of range are an
 * error, or dropped (on_error: skip) through a row map. Further named inputs and labels
 * (N, ...) ride along, sliced by the same rows. */
#include <stdlib.h>
#include <string.h>

#include "data/internal.h"

typedef struct array_source {
    source base;
    tfc_tensor f, l;       /* owned data */
    tfc_shape rec_f;       /* shape of one features record */
    tfc_shape rec_l;       /* shape of one labels record */
    size_t fbytes, lbytes; /* bytes of one record */
    int64_t *rows;         /* record -> row when records were dropped, else NULL */
    char *fname, *lname;
    /* the arrays riding along, by component (inputs 1.. and labels 1..; the features and
     * label 0 are f and l): owned data, a record's shape and bytes, file */
    tfc_tensor x[TFC_COMP_COUNT];
    tfc_shape rec_x[TFC_COMP_COUNT];
    size_t xbytes[TFC_COMP_COUNT];
    char *xname[TFC_COMP_COUNT];
} array_source;

/* Copies row `row` of `t` (records of `bytes` bytes, shape rec) into component c of e. */
static tfc_status copy_row(tfc_element *e, int c, const tfc_tensor *t, const tfc_shape *rec,
                           size_t bytes, int64_t row, const char *name, tfc_error *err)
{
    void *d = tfc_elem_alloc_uninit(e, c, t->dtype, rec);
    if (!d) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory reading %s", name);
    memcpy(d, (char *)t->data + (size_t)row * bytes, bytes);
    return TFC_OK;
}

static tfc_status array_get(source *s, int64_t i, tfc_element *e, tfc_error *err)
{
    array_source *a = (array_source *)s;
    int64_t row = a->rows ? a->rows[i] : i;
    tfc_status st = copy_row(e, TFC_COMP_FEATURES, &a->f, &a->rec_f, a->fbytes, row, a->fname,
                             err);
    for (int c = 0; !st && c < TFC_COMP_COUNT; c++)
        if (a->x[c].data)
            st = copy_row(e, c, &a->x[c], &a->rec_x[c], a->xbytes[c], row, a->xname[c], err);
    if (!st && a->l.data)
        st = copy_row(e, TFC_COMP_LABELS, &a->l, &a->rec_l, a->lbytes, row, a->lname, err);
    return st;
}

/* "FILE record N": record i's row in `file`, one of the source's files. */
static void describe_in(const source *s, const char *file, int64_t i, char *buf, size_t size)
{
    const array_source *a = (const array_source *)s;
    int64_t row = a->rows && i < s->count ? a->rows[i] : i;
    snprintf(buf, size, "%s record %lld", file, (long long)row);
}

static void array_describe(const source *s, int64_t i, char *buf, size_t size)
{
    describe_in(s, ((const array_source *)s)->fname, i, buf, size);
}

static void array_describe_label(const source *s, int64_t i, char *buf, size_t size)
{
    describe_in(s, ((const array_source *)s)->lname, i, buf, size);
}

static void array_describe_comp(const source *s, int comp, int64_t i, char *buf, size_t size)
{
    const array_source *a = (const array_source *)s;
    int mine = comp >= 0 && comp < TFC_COMP_COUNT && a->xname[comp]; /* one riding along */
    describe_in(s, mine ? a->xname[comp] : a->fname, i, buf, size);
}

static int64_t array_label(const source *s, int64_t i)
{
    const array_source *a = (const array_source *)s;
    if (!a->l.data || tfc_shape_numel(&a->rec_l) != 1 || !tfc_dtype_is_int(a->l.dtype)) return -1;
    return (int64_t)tfc_value_get(a->l.data, a->l.dtype, a->rows ? a->rows[i] : i);
}

static void array_free(source *s)
{
    array_source *a = (array_source *)s;
    free(a->f.data);
    free(a->l.data);
    free(a->rows);
    free(a->fname);
    free(a->lname);
    for (int c = 0; c < TFC_COMP_COUNT; c++) {
        free(a->x[c].data);
        free(a->xname[c]);
    }
    free(a);
}

static const source_ops array_ops = {
    .type = "array",
    .get = array_get,
    .describe = array_describe,
    .describe_label = array_describe_label,
    .describe_comp = array_describe_comp,
    .label = array_label,
    .free = array_free,
};

static char *dupstr(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static tfc_shape tail_shape(const tfc_shape *s)
{
    tfc_shape r = {.ndim = s->ndim - 1};
    for (int i = 1; i < s->ndim; i++) r.dim[i - 1] = s->dim[i];
    return r;
}

tfc_status tfc_source_array(source **out, const char *type, tfc_tensor *features,
                            tfc_tensor *labels, const tfc_shape *record_shape,
                            const char *fname, const char *lname, int num_classes, int on_error,
                            tfc_error *err)
{
    *out = NULL;
    array_source *a = calloc(1, sizeof *a);
    if (!a) {
        free(features->data);
        if (labels) free(labels->data);
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    a->base.ops = &array_ops;
    a->f = *features;
    features->data = NULL;
    if (labels) {
        a->l = *labels;
        labels->data = NULL;
    }
    a->fname = dupstr(fname ? fname : type);
    a->lname = dupstr(lname ? lname : a->fname ? a->fname : type);
    source *s = &a->base;
    tfc_status st = TFC_OK;
    if (!a->fname || !a->lname) {
        st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (a->f.shape.ndim < 1) {
        st = tfc_error_set(err, TFC_ERR_DATA, "%s: expected an array with a first axis to "
                           "slice, found a scalar", a->fname);
        goto fail;
    }
    int64_t n = a->f.shape.dim[0];
    a->rec_f = tail_shape(&a->f.shape);
    if (record_shape && record_shape->ndim >= 0) {
        if (tfc_shape_numel(record_shape) != tfc_shape_numel(&a->rec_f)) {
            st = tfc_error_set(err, TFC_ERR_INTERNAL, "%s: record shape mismatch", a->fname);
            goto fail;
        }
        a->rec_f = *record_shape;
    }
    a->fbytes = (size_t)tfc_shape_numel(&a->rec_f) * tfc_dtype_size(a->f.dtype);
    if (a->fbytes == 0 && n > 0) {
        /* Empty records carry nothing, and their count is not bounded by the file size. */
        st = tfc_error_set(err, TFC_ERR_DATA, "%s: the records are empty (a dimension is 0)",
                           a->fname);
        goto fail;
    }
    if (a->l.data) {
        if (a->l.shape.ndim < 1 || a->l.shape.dim[0] != n) {
            st = tfc_error_set(err, TFC_ERR_DATA, "%s has %lld records but %s has %lld",
                               a->fname, (long long)n, a->lname,
                               (long long)(a->l.shape.ndim ? a->l.shape.dim[0] : 0));
            goto fail;
        }
        a->rec_l = tail_shape(&a->l.shape);
        a->lbytes = (size_t)tfc_shape_numel(&a->rec_l) * tfc_dtype_size(a->l.dtype);
    }
    s->count = n;
    /* Labels are checked once here, so a bad one is reported before training starts. */
    if (a->l.data && num_classes > 0 && tfc_dtype_is_int(a->l.dtype)) {
        int64_t kept = 0;
        for (int64_t i = 0; i < n; i++) {
            tfc_tensor row = {.dtype = a->l.dtype, .shape = a->rec_l,
                              .data = (char *)a->l.data + (size_t)i * a->lbytes};
            int64_t bad;
            if (tfc_data_labels_in_range(&row, num_classes, &bad)) {
                if (a->rows) a->rows[kept] = i;
                kept++;
                continue;
            }
            if (on_error != ON_ERROR_SKIP) {
                st = tfc_error_set(err, TFC_ERR_DATA, "%s record %lld: label %lld is out of "
                                   "range [0, %d)", a->lname, (long long)i, (long long)bad,
                                   num_classes);
                goto fail;
            }
            if (!a->rows) {
                a->rows = malloc((size_t)(n ? n : 1) * sizeof *a->rows);
                if (!a->rows) {
                    st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
                    goto fail;
                }
                for (int64_t j = 0; j < kept; j++) a->rows[j] = j;
            }
            char where[300];
            snprintf(where, sizeof where, "%s record %lld", a->lname, (long long)i);
            tfc_source_name_skip(s, where);
            s->skipped++;
        }
        s->count = kept;
    }
    if (s->count == 0) { /* before anything is made of a run whose data is missing */
        st = tfc_error_set(err, TFC_ERR_DATA, "%s: no records (%s)", a->fname,
                           s->skipped            ? "every label is out of range"
                           : !strcmp(type, "csv") ? "a header and no rows"
                                                  : "its first axis is 0");
        goto fail;
    }
    s->kind = type;
    s->spec.comp[TFC_COMP_FEATURES] = (tfc_component_spec){1, a->f.dtype, a->rec_f};
    if (a->l.data) s->spec.comp[TFC_COMP_LABELS] = (tfc_component_spec){1, a->l.dtype, a->rec_l};
    *out = s;
    return TFC_OK;
fail:
    array_free(s);
    return st;
}

/* Makes more[k - 1] (read from files[k - 1]) ride along as component comp(k) of `what`
 * k = names[k], for k in [1, n): the tensors taken whatever happens, their rows checked
 * against the features'. */
static tfc_status ride_along(array_source *a, int (*comp)(int), const char *what, int n,
                             const char *const *names, tfc_tensor *more,
                             const char *const *files, tfc_error *err)
{
    source *s = &a->base;
    tfc_status st = TFC_OK;
    int64_t rows = a->f.shape.dim[0];
    for (int k = 1; k < n; k++) { /* taken, whatever happens */
        int c = comp(k);
        a->x[c] = more[k - 1];
        more[k - 1].data = NULL;
        if (!(a->xname[c] = dupstr(files[k - 1])) && !st)
            st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    for (int k = 1; k < n && !st; k++) {
        int c = comp(k);
        const tfc_tensor *t = &a->x[c];
        const char *f = a->xname[c];
        if (t->shape.ndim < 1 || t->shape.dim[0] != rows)
            return tfc_error_set(err, TFC_ERR_DATA, "%s has %lld records but %s (%s %s) has "
                                 "%lld", a->fname, (long long)rows, f, what, names[k],
                                 (long long)(t->shape.ndim ? t->shape.dim[0] : 0));
        a->rec_x[c] = tail_shape(&t->shape);
        a->xbytes[c] = (size_t)tfc_shape_numel(&a->rec_x[c]) * tfc_dtype_size(t->dtype);
        if (a->xbytes[c] == 0)
            return tfc_error_set(err, TFC_ERR_DATA, "%s: the records are empty (a dimension "
                                 "is 0)", f);
        s->spec.comp[c] = (tfc_component_spec){1, t->dtype, a->rec_x[c]};
    }
    return st;
}

tfc_status tfc_source_array_inputs(source *s, int n, const char *const *names, tfc_tensor *more,
                                   const char *const *files, tfc_error *err)
{
    tfc_status st = ride_along((array_source *)s, tfc_input_comp, "input", n, names, more, files,
                               err);
    if (st) return st;
    s->spec.ninputs = n;
    for (int k = 0; k < n; k++)
        snprintf(s->spec.input_names[k], sizeof s->spec.input_names[k], "%s", names[k]);
    return TFC_OK;
}

tfc_status tfc_source_array_labels(source *s, int n, const char *const *names, tfc_tensor *more,
                                   const char *const *files, tfc_error *err)
{
    array_source *a = (array_source *)s;
    tfc_status st = ride_along(a, tfc_label_comp, "label", n, names, more, files, err);
    if (st) return st;
    if (!a->l.data) /* the caller gives label 0 to tfc_source_array */
        return tfc_error_set(err, TFC_ERR_INTERNAL, "%s: labels without label 0", a->fname);
    s->spec.nlabels = n;
    for (int k = 0; k < n; k++)
        snprintf(s->spec.label_names[k], sizeof s->spec.label_names[k], "%s", names[k]);
    return TFC_OK;
}

/* from_tensor_slices: copies the caller's tensors. */
static tfc_status source_tensors(source **out, const tfc_tensor *f, const tfc_tensor *l,
                                 tfc_error *err)
{
    *out = NULL;
    tfc_tensor t[2] = {{0}};
    const tfc_tensor *in[2] = {f, l};
    for (int k = 0; k < 2; k++) {
        if (!in[k] || (k == 1 && !in[k]->data)) continue;
        int64_t bytes = tfc_data_bytes_checked(in[k]->dtype, &in[k]->shape, INT64_MAX / 2);
        if (bytes < 0 || (!in[k]->data && bytes > 0)) {
            free(t[0].data);
            return tfc_error_set(err, TFC_ERR_CONFIG, "from_tensors: bad %s tensor",
                                 k ? "labels" : "features");
        }
        t[k] = *in[k];
        t[k].data = malloc((size_t)bytes + 1);
        if (!t[k].data) {
            free(t[0].data);
            return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        }
        if (bytes) memcpy(t[k].data, in[k]->data, (size_t)bytes);
    }
    if (!f) return tfc_error_set(err, TFC_ERR_CONFIG, "from_tensors: features are required");
    return tfc_source_array(out, "tensors", &t[0], t[1].data ? &t[1] : NULL, NULL, "tensors",
                            "tensors", 0, ON_ERROR_FAIL, err);
}

tfc_status tfc_source_open_pair(const file_pair_args *args, const tfc_data_options *opt,
                                file_pair_load load, source **out, tfc_error *err)
{
    file_pair_args a = *args;
    char *features, *labels = NULL;
    tfc_status st = tfc_data_resolve(opt, &a.features, &features, err);
    if (!st) st = tfc_data_resolve(opt, &a.labels, &labels, err);
    if (opt && opt->num_classes) a.num_classes = opt->num_classes;
    if (!st) st = load(out, &a, err);
    free(features);
    free(labels);
    return st;
}

tfc_pipeline *tfc_pipeline_from_tensors(const tfc_tensor *features, const tfc_tensor *labels,
                                        const tfc_data_options *opt, tfc_error *err)
{
    source *src;
    if (source_tensors(&src, features, labels, err)) return NULL;
    return tfc_pipeline_new(src, opt, err);
}
