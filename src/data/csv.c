/* The CSV source: a header row (optional), cells separated by one delimiter character,
 * "quoted" cells with "" for a quote, feature and label columns chosen by name or index.
 * Every number is parsed strictly; a cell that is not one is an error at FILE:LINE:COL
 * naming the column (or, with on_error: skip, the row is counted and left out). A text
 * column instead gives each record's text as its features (for tokenize or
 * text_vectorization), and string labels are class names: the class is the name's place in
 * `classes:`, or among the column's distinct names sorted. Numeric feature columns may be
 * grouped into named inputs ({wide: [a, b], deep: [c]}), one float32 input each, and numeric
 * label columns named as labels ({price: p, kind: k}), one label each. */
#include <ctype.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "data/internal.h"

#define CSV_MAX_FILE_BYTES ((size_t)1 << 30)
#define CSV_MAX_COLUMNS 65536

typedef struct cell {
    const char *s;
    size_t len;
    int col;      /* 1-based column in the line where the cell starts */
    int line;
    int quoted;
} cell;

typedef struct csv_reader {
    const char *p, *end;
    char delim;
    int line;
    const char *line_start;
    cell *cells;
    int ncells, cap;
    char *unq;       /* unquoted copies of quoted cells */
    size_t unq_len, unq_cap;
} csv_reader;

/* Reads one row into r->cells; returns 0 at the end of the text, -1 on error (bad quoting
 * or too many columns: *why set), 1 otherwise. */
static int read_row(csv_reader *r, const char **why)
{
    r->ncells = 0;
    r->unq_len = 0;
    if (r->p >= r->end) return 0;
    for (;;) {
        if (r->ncells == r->cap) {
            if (r->cap >= CSV_MAX_COLUMNS) {
                *why = "too many columns";
                return -1;
            }
            int cap = r->cap ? r->cap * 2 : 64;
            cell *c = realloc(r->cells, (size_t)cap * sizeof *c);
            if (!c) {
                *why = "out of memory";
                return -1;
            }
            r->cells = c;
            r->cap = cap;
        }
        cell *c = &r->cells[r->ncells++];
        c->line = r->line;
        c->col = (int)(r->p - r->line_start) + 1;
        c->quoted = 0;
        if (r->p < r->end && *r->p == '"') {
            /* Quoted: copy into unq, undoubling quotes; newlines may appear inside. */
            c->quoted = 1;
            r->p++;
            size_t start = r->unq_len;
            for (;;) {
                if (r->p >= r->end) {
                    *why = "unterminated quoted cell";
                    return -1;
                }
                char ch = *r->p++;
                if (ch == '"') {
                    if (r->p < r->end && *r->p == '"') r->p++;
                    else break;
                }
                if (ch == '\n') {
                    r->line++;
                    r->line_start = r->p;
                }
                if (r->unq_len == r->unq_cap) {
                    size_t cap = r->unq_cap ? r->unq_cap * 2 : 256;
                    char *u = realloc(r->unq, cap);
                    if (!u) {
                        *why = "out of memory";
                        return -1;
                    }
                    r->unq = u;
                    r->unq_cap = cap;
                }
                r->unq[r->unq_len++] = ch;
            }
            c->s = (const char *)(uintptr_t)start; /* offset, fixed up below */
            c->len = r->unq_len - start;
        } else {
            const char *s = r->p;
            while (r->p < r->end && *r->p != r->delim && *r->p != '\n') r->p++;
            c->s = s;
            c->len = (size_t)(r->p - s);
            if (c->len && s[c->len - 1] == '\r' && (r->p >= r->end || *r->p == '\n')) c->len--;
        }
        if (r->p < r->end && *r->p == r->delim) {
            r->p++;
            continue;
        }
        if (r->p < r->end && *r->p == '\r') r->p++;
        if (r->p < r->end && *r->p != '\n') {
            *why = "text after a quoted cell";
            return -1;
        }
        if (r->p < r->end) r->p++;
        r->line++;
        r->line_start = r->p;
        break;
    }
    /* Quoted cells held offsets into unq, which may have moved (or, when all are empty,
     * never been allocated). */
    const char *base = r->unq ? r->unq : "";
    for (int i = 0; i < r->ncells; i++)
        if (r->cells[i].quoted) r->cells[i].s = base + (uintptr_t)r->cells[i].s;
    return 1;
}

static int row_blank(const csv_reader *r)
{
    return r->ncells == 1 && r->cells[0].len == 0 && !r->cells[0].quoted;
}

/* Parses a whole cell as a number (surrounding spaces allowed). */
static int parse_number(const cell *c, double *v)
{
    char buf[128];
    size_t a = 0, b = c->len;
    while (a < b && isspace((unsigned char)c->s[a])) a++;
    while (b > a && isspace((unsigned char)c->s[b - 1])) b--;
    if (a == b || b - a >= sizeof buf) return 0;
    memcpy(buf, c->s + a, b - a);
    buf[b - a] = 0;
    char *end;
    *v = strtod(buf, &end);
    /* Cells become float32: larger magnitudes are not representable. */
    return *end == 0 && !isnan(*v) && fabs(*v) <= FLT_MAX;
}

/* A column is given by a scalar: an index or a name. */
static tfc_status column_node(const tfc_node *n, const char *key, tfc_error *err)
{
    if (n->kind == TFC_NODE_SCALAR) return TFC_OK;
    return tfc_node_error(err, TFC_ERR_CONFIG, n, key, "expected a column name or index");
}

/* Whether the source reads a text column (its features are that column's text). */
static int tcol_given(const csv_args *a)
{
    return a->text_column && !tfc_node_is_null(a->text_column);
}

/* Resolves a column given by a node (integer index, negative from the end, or header
 * name) against the header; -1 with a config error when it does not exist. */
static int resolve_column(const tfc_node *n, const char *key, char **names, int ncols,
                          tfc_error *err)
{
    if (column_node(n, key, err)) return -1;
    char *end;
    long v = strtol(n->str, &end, 10);
    if (!n->quoted && *n->str && !*end) {
        if (v < 0) v += ncols;
        if (v < 0 || v >= ncols) {
            tfc_node_error(err, TFC_ERR_CONFIG, n, key, "column %s is out of range (the file "
                           "has %d columns)", n->str, ncols);
            return -1;
        }
        return (int)v;
    }
    for (int i = 0; names && i < ncols; i++)
        if (!strcmp(names[i], n->str)) return i;
    if (!names) {
        tfc_node_error(err, TFC_ERR_CONFIG, n, key, "column '%s' given by name, but the file has "
                       "no header (header: false)", n->str);
        return -1;
    }
    const char *guess = tfc_did_you_mean(n->str, (const char *const *)names);
    char list[1024];
    tfc_join_names(list, sizeof list, (const char *const *)names);
    if (guess)
        tfc_node_error(err, TFC_ERR_CONFIG, n, key, "no column '%s'; did you mean '%s'?",
                       n->str, guess);
    else
        tfc_node_error(err, TFC_ERR_CONFIG, n, key, "no column '%s' (columns: %s)", n->str, list);
    return -1;
}

typedef struct grow {
    void *p;
    size_t len, cap; /* bytes */
} grow;

static int grow_push(grow *g, const void *v, size_t n)
{
    if (n == 0) return 0; /* an empty text cell */
    if (g->len + n > g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 4096;
        while (cap < g->len + n) cap *= 2;
        void *p = realloc(g->p, cap);
        if (!p) return -1;
        g->p = p;
        g->cap = cap;
    }
    memcpy((char *)g->p + g->len, v, n);
    g->len += n;
    return 0;
}

/* ---- text features: a record's text column as bytes ------------------------------------ */

typedef struct csv_text_source {
    source base;
    char *buf;       /* every record's text, back to back */
    int64_t *off;    /* n + 1 offsets into buf */
    void *labels;    /* n int32 or float32, or NULL */
    int32_t *line;   /* the record's first line */
    char *name;
} csv_text_source;

static tfc_status csv_text_get(source *s, int64_t i, tfc_element *e, tfc_error *err)
{
    csv_text_source *t = (csv_text_source *)s;
    tfc_shape sh = {.ndim = 1, .dim = {t->off[i + 1] - t->off[i]}};
    void *d = tfc_element_alloc(e, TFC_COMP_FEATURES, TFC_U8, &sh);
    if (!d) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    memcpy(d, t->buf + t->off[i], (size_t)sh.dim[0]);
    if (t->labels) {
        tfc_shape ls = {0};
        tfc_dtype dt = s->spec.comp[TFC_COMP_LABELS].dtype;
        void *l = tfc_element_alloc(e, TFC_COMP_LABELS, dt, &ls);
        if (!l) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        memcpy(l, (const char *)t->labels + 4 * i, 4);
    }
    return TFC_OK;
}

static void csv_text_describe(const source *s, int64_t i, char *buf, size_t size)
{
    const csv_text_source *t = (const csv_text_source *)s;
    snprintf(buf, size, "%s:%d", t->name, t->line[i]);
}

static int64_t csv_text_label(const source *s, int64_t i)
{
    const csv_text_source *t = (const csv_text_source *)s;
    return t->labels && s->spec.comp[TFC_COMP_LABELS].dtype == TFC_I32
               ? ((const int32_t *)t->labels)[i] : -1;
}

static void csv_text_free(source *s)
{
    csv_text_source *t = (csv_text_source *)s;
    free(t->buf);
    free(t->off);
    free(t->labels);
    free(t->line);
    free(t->name);
    free(t);
}

static const source_ops csv_text_ops = {
    .type = "csv",
    .get = csv_text_get,
    .describe = csv_text_describe,
    .label = csv_text_label,
    .free = csv_text_free,
};

/* ---- string labels ------------------------------------------------------------------------ */

typedef struct name_ref {
    const char *s;
    size_t len;
    int32_t id;
} name_ref;

static int by_name(const void *a, const void *b)
{
    const name_ref *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* The id of label text s in the sorted table (n entries), or -1. */
static int32_t find_name(const name_ref *t, int n, const char *s, size_t len)
{
    name_ref key = {s, len, 0};
    const name_ref *f = bsearch(&key, t, (size_t)n, sizeof *t, by_name);
    return f ? f->id : -1;
}

/* A feature column given as StringLookup's one_hot of its vocabulary: 1 + n values, [UNK]
 * (any other text) first, then the vocabulary's terms in their order. */
typedef struct column_lookup {
    name_ref *terms; /* sorted; id = 1 + the term's place */
    int n;
} column_lookup;

/* The `string_lookup:` mapping resolved against the feature columns into look[] (one per
 * feature column, n = 0 for numbers); the row width into *width. */
static tfc_status resolve_lookups(const csv_args *a, char **names, int ncols, const int *fcols,
                                  int nf, column_lookup *look, int *width, tfc_error *err)
{
    const tfc_node *m = a->string_lookup;
    char key[400];
    snprintf(key, sizeof key, "%s.string_lookup", a->key ? a->key : "csv");
    *width = nf;
    for (int k = 0; m && k < m->n; k++) {
        int c = resolve_column(m->keys[k], key, names, ncols, err), i = 0;
        if (c < 0) return TFC_ERR_CONFIG;
        while (i < nf && fcols[i] != c) i++;
        if (i == nf)
            return tfc_node_error(err, TFC_ERR_CONFIG, m->keys[k], key, "column '%s' is not a "
                                  "feature column", m->keys[k]->str);
        const tfc_node *v = m->vals[k];
        int skip = v->n > 0 && !strcmp(v->vals[0]->str, "[UNK]"); /* Keras's special token */
        look[i].n = v->n - skip;
        look[i].terms = malloc((size_t)(look[i].n ? look[i].n : 1) * sizeof *look[i].terms);
        if (!look[i].terms) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        for (int t = 0; t < look[i].n; t++) {
            const char *term = v->vals[t + skip]->str;
            look[i].terms[t] = (name_ref){term, strlen(term), t + 1};
        }
        qsort(look[i].terms, (size_t)look[i].n, sizeof *look[i].terms, by_name);
        for (int t = 1; t < look[i].n; t++)
            if (!by_name(&look[i].terms[t - 1], &look[i].terms[t]))
                return tfc_node_error(err, TFC_ERR_CONFIG, v, key, "'%s' is in the vocabulary "
                                      "twice (Keras wants unique terms)", look[i].terms[t].s);
        *width += look[i].n;
    }
    return TFC_OK;
}

/* Splits the table f (rows of every feature column, one-hot ones expanded) into nin inputs
 * of incols[k] columns each, in order: f keeps input 0's, more[k - 1] gets input k's (all
 * float32 (rows, width)). Nonzero when out of memory (f unchanged). */
static int split_inputs(tfc_tensor *f, int nin, const int *incols, const column_lookup *look,
                        tfc_tensor *more)
{
    int64_t rows = f->shape.dim[0], width = f->shape.dim[1], w[TFC_MAX_INPUTS];
    float *part[TFC_MAX_INPUTS] = {NULL};
    for (int k = 0, i = 0; k < nin; k++) {
        w[k] = 0;
        for (int j = 0; j < incols[k]; j++, i++) w[k] += look[i].terms ? look[i].n + 1 : 1;
        part[k] = malloc((size_t)(rows * w[k]) * sizeof(float) + 1);
        if (!part[k]) {
            for (int j = 0; j < k; j++) free(part[j]);
            return 1;
        }
    }
    const float *src = f->data;
    for (int64_t r = 0; r < rows; r++)
        for (int k = 0, o = 0; k < nin; o += (int)w[k], k++)
            memcpy(part[k] + r * w[k], src + r * width + o, (size_t)w[k] * sizeof(float));
    free(f->data);
    for (int k = 0; k < nin; k++) {
        tfc_tensor t = {TFC_F32, {.ndim = 2, .dim = {rows, w[k]}}, part[k], -1};
        if (k) more[k - 1] = t;
        else *f = t;
    }
    return 0;
}

/* Row r's label text in the string-label buffers. */
/* Cell c as a number label: a class index (class_labels; in [0, num_classes) when that is
 * > 0) or a float target, into *lv; NULL, or what is wrong written into msg. */
static const char *number_label(const cell *c, int class_labels, int num_classes, double *lv,
                                char *msg, size_t size)
{
    if (!parse_number(c, lv))
        snprintf(msg, size, "label is not a number: \"%.*s\"%s", (int)(c->len > 60 ? 60 : c->len),
                 c->s, class_labels ? " (class names: label_dtype: string)" : "");
    else if (class_labels && (*lv != floor(*lv) || fabs(*lv) > 2147483647.0))
        snprintf(msg, size, "label %g is not an integer class index (regression targets: "
                 "label_dtype: float32)", *lv);
    else if (class_labels && num_classes > 0 && (*lv < 0 || *lv >= num_classes))
        snprintf(msg, size, "label %g is out of range [0, %d)", *lv, num_classes);
    else
        return NULL;
    return msg;
}

#define LABEL_TEXT(r) ((const char *)lstr.p + ((const int64_t *)loff.p)[r])
#define LABEL_LEN(r) ((size_t)(((const int64_t *)loff.p)[(r) + 1] - ((const int64_t *)loff.p)[r]))

tfc_status tfc_source_csv_mem(source **out, const csv_args *a, const char *text, size_t len,
                              const char *name, tfc_error *err)
{
    *out = NULL;
    csv_reader r = {.p = text, .end = text + len, .delim = a->delimiter ? a->delimiter[0] : ',',
                    .line = 1, .line_start = text};
    char **names = NULL;
    int *fcols = NULL, ncols = -1, nf = 0, lcol = -1, tcol = -1, nclasses = 0;
    grow feats = {0}, labs = {0}, texts = {0}, toff = {0}, lines = {0}, lstr = {0}, loff = {0};
    /* labels: their count and columns (a mapping names several: lcols[0] is lcol), and the
     * values of labels 1.. */
    int nl = 0, lcols[TFC_MAX_LABELS];
    grow lmore[TFC_MAX_LABELS - 1] = {{0}};
    name_ref *table = NULL; /* string labels: `classes:` sorted, or the distinct labels */
    column_lookup *look = NULL;
    int width = 0; /* features per row, one-hot columns expanded */
    int nin = 1, incols[TFC_MAX_INPUTS] = {0}; /* inputs, and each one's columns (a mapping) */
    float *row = NULL;
    int64_t nrows = 0, skipped = 0, zero = 0;
    char where[TFC_SKIP_NAMES][300]; /* the first skipped rows, FILE:LINE */
    tfc_status st = TFC_OK;
    const char *why = NULL;
    int class_labels = a->label_dtype != CSV_LABEL_FLOAT32; /* else float32 targets */
    int strings = a->label_dtype == CSV_LABEL_STRING;
    char kf[352], kl[352], kt[352];
    snprintf(kf, sizeof kf, "%s.feature_columns", a->key ? a->key : "csv");
    snprintf(kl, sizeof kl, "%s.label_column", a->key ? a->key : "csv");
    snprintf(kt, sizeof kt, "%s.text_column", a->key ? a->key : "csv");
    if (a->ts.sequence_length && (tcol_given(a) || a->on_error == ON_ERROR_SKIP)) {
        st = tfc_error_set(err, TFC_ERR_CONFIG, "%s: timeseries: windows need every row of "
                           "numbers (no text_column, no on_error: skip)", name);
        goto done;
    }
    if (memchr(text, 0, len)) {
        st = tfc_error_set(err, TFC_ERR_DATA, "%s: binary file (holds NUL bytes), not CSV", name);
        goto done;
    }
    if (strings && a->classes) { /* `classes:` is the labels' order */
        nclasses = a->classes->n;
        if (!(table = malloc((size_t)nclasses * sizeof *table))) goto nomem;
        for (int i = 0; i < nclasses; i++)
            table[i] = (name_ref){a->classes->vals[i]->str, strlen(a->classes->vals[i]->str), i};
        qsort(table, (size_t)nclasses, sizeof *table, by_name);
        for (int i = 1; i < nclasses; i++)
            if (!by_name(&table[i - 1], &table[i])) {
                st = tfc_node_error(err, TFC_ERR_CONFIG, a->classes, a->key ? a->key : "csv",
                                    "classes: '%s' is named twice", table[i].s);
                goto done;
            }
    }
    /* The first non-blank row fixes the column count (and names, with a header). */
    int rr;
    while ((rr = read_row(&r, &why)) == 1 && row_blank(&r)) {
    }
    if (rr <= 0) {
        if (rr < 0) st = tfc_error_at(err, TFC_ERR_DATA, name, r.line, 1, NULL, NULL, "%s", why);
        else st = tfc_error_set(err, TFC_ERR_DATA, "%s: no rows", name);
        goto done;
    }
    ncols = r.ncells;
    if (a->header) {
        names = calloc((size_t)ncols + 1, sizeof *names);
        if (!names) goto nomem;
        for (int i = 0; i < ncols; i++) {
            names[i] = malloc(r.cells[i].len + 1);
            if (!names[i]) goto nomem;
            memcpy(names[i], r.cells[i].s, r.cells[i].len);
            names[i][r.cells[i].len] = 0;
        }
    }
    if (a->label_column && !tfc_node_is_null(a->label_column)) {
        const tfc_node *lc = a->label_column;
        nl = lc->kind == TFC_NODE_MAP ? lc->n : 1;
        if (nl < 1 || nl > TFC_MAX_LABELS) {
            st = tfc_node_error(err, TFC_ERR_CONFIG, lc, kl, "%d labels: give 1 to %d", nl,
                                TFC_MAX_LABELS);
            goto done;
        }
        for (int k = 0; k < nl; k++)
            if ((lcols[k] = resolve_column(lc->kind == TFC_NODE_MAP ? lc->vals[k] : lc, kl, names,
                                           ncols, err)) < 0) {
                st = TFC_ERR_CONFIG;
                goto done;
            }
        lcol = lcols[0];
    }
    /* (csv_check says so at the keys; the fuzzers and C callers come here unchecked) */
    if (nl > 1 && (strings || tcol_given(a) || a->ts.sequence_length)) {
        st = tfc_error_set(err, TFC_ERR_CONFIG, "%s: several label columns are numbers of "
                           "records of numbers (not label_dtype: string, text_column or "
                           "timeseries)", name);
        goto done;
    }
    if (a->text_column && !tfc_node_is_null(a->text_column)) {
        tcol = resolve_column(a->text_column, kt, names, ncols, err);
        if (tcol < 0 || tcol == lcol) {
            if (tcol >= 0)
                tfc_node_error(err, TFC_ERR_CONFIG, a->text_column, kt, "the text column is "
                               "the label column");
            st = TFC_ERR_CONFIG;
            goto done;
        }
        if (grow_push(&toff, &zero, sizeof zero)) goto nomem;
    }
    if (strings && lcol >= 0 && grow_push(&loff, &zero, sizeof zero)) goto nomem;
    fcols = malloc((size_t)ncols * sizeof *fcols + sizeof *fcols);
    if (!fcols) goto nomem;
    if (tcol >= 0) {
        /* the text column alone */
    } else if (a->feature_columns && !tfc_node_is_null(a->feature_columns)) {
        /* a list of columns, or {input name: columns} (one input each, in order) */
        const tfc_node *fc = a->feature_columns;
        int map = fc->kind == TFC_NODE_MAP, n = 0;
        nin = map ? fc->n : 1;
        for (int k = 0; k < nin; k++) {
            const tfc_node *cols = map ? fc->vals[k] : fc;
            incols[k] = cols->kind == TFC_NODE_SEQ ? cols->n : 1;
            n += incols[k];
        }
        if (n > ncols) {
            st = tfc_node_error(err, TFC_ERR_CONFIG, fc, kf, "%d columns named, the file has %d",
                                n, ncols);
            goto done;
        }
        for (int k = 0; k < nin; k++)
            for (int i = 0; i < incols[k]; i++) {
                const tfc_node *cols = map ? fc->vals[k] : fc;
                const tfc_node *item = cols->kind == TFC_NODE_SEQ ? cols->vals[i] : cols;
                int c = resolve_column(item, kf, names, ncols, err);
                if (c < 0) {
                    st = TFC_ERR_CONFIG;
                    goto done;
                }
                fcols[nf++] = c;
            }
    } else {
        for (int i = 0; i < ncols; i++) {
            int label = 0;
            for (int k = 0; k < nl; k++) label |= i == lcols[k];
            if (!label) fcols[nf++] = i;
        }
    }
    if (nin > 1 && a->ts.sequence_length) {
        st = tfc_error_set(err, TFC_ERR_CONFIG, "%s: timeseries: windows are of one table: give "
                           "feature_columns a list", name);
        goto done;
    }
    if (nf == 0 && tcol < 0) {
        st = tfc_error_set(err, TFC_ERR_CONFIG, "%s: no feature columns", name);
        goto done;
    }
    if (!(look = calloc((size_t)nf + 1, sizeof *look))) goto nomem;
    if ((st = resolve_lookups(a, names, ncols, fcols, nf, look, &width, err))) goto done;
    row = malloc((size_t)width * sizeof *row + sizeof *row);
    if (!row) goto nomem;
    if (a->header) rr = read_row(&r, &why);
    for (; rr != 0; rr = read_row(&r, &why)) {
        if (rr < 0) {
            st = tfc_error_at(err, TFC_ERR_DATA, name, r.line, 1, NULL, NULL, "%s", why);
            goto done;
        }
        if (row_blank(&r)) continue;
        const char *bad = NULL;
        const cell *bc = &r.cells[0];
        char msg[400];
        if (r.ncells != ncols) {
            snprintf(msg, sizeof msg, "a row of %d cells, expected %d", r.ncells, ncols);
            bad = msg;
        }
        for (int i = 0, o = 0; !bad && i < nf; i++) {
            double v;
            const cell *c = &r.cells[fcols[i]];
            if (look[i].terms) { /* StringLookup's one_hot: [UNK], then the vocabulary */
                int32_t id = find_name(look[i].terms, look[i].n, c->s, c->len);
                memset(row + o, 0, (size_t)(look[i].n + 1) * sizeof *row);
                row[o + (id < 0 ? 0 : id)] = 1.0f;
                o += look[i].n + 1;
                continue;
            }
            if (!parse_number(c, &v)) {
                char colname[96];
                if (names) snprintf(colname, sizeof colname, "'%.80s'", names[fcols[i]]);
                else snprintf(colname, sizeof colname, "%d", fcols[i]);
                snprintf(msg, sizeof msg, "not a number: \"%.*s\" (column %s%s)",
                         (int)(c->len > 60 ? 60 : c->len), c->s, colname,
                         nrows || !names ? "" : "; a column of names: string_lookup");
                bad = msg;
                bc = c;
            }
            row[o++] = (float)v;
        }
        double lv[TFC_MAX_LABELS] = {0};
        int32_t li = 0;
        if (!bad && lcol >= 0 && strings) {
            const cell *c = &r.cells[lcol];
            li = table ? find_name(table, nclasses, c->s, c->len) : 0;
            if (li < 0) {
                bc = c;
                snprintf(msg, sizeof msg, "label \"%.*s\" is not one of `classes:`",
                         (int)(c->len > 60 ? 60 : c->len), c->s);
                bad = msg;
            }
        } else {
            /* num_classes is label 0's: the solver knows one output's classes */
            for (int k = 0; !bad && k < nl; k++) {
                bc = &r.cells[lcols[k]];
                bad = number_label(bc, class_labels, k ? 0 : a->num_classes, &lv[k], msg,
                                   sizeof msg);
            }
        }
        if (bad) {
            if (a->on_error == ON_ERROR_SKIP) {
                if (skipped < TFC_SKIP_NAMES)
                    snprintf(where[skipped], sizeof where[0], "%s:%d", name, bc->line);
                skipped++;
                continue;
            }
            st = tfc_error_at(err, TFC_ERR_DATA, name, bc->line, bc->col, NULL, NULL, "%s", bad);
            goto done;
        }
        if (tcol >= 0) {
            const cell *c = &r.cells[tcol];
            int64_t end = (int64_t)(texts.len + c->len);
            int32_t line = r.cells[0].line;
            if (grow_push(&texts, c->s, c->len) || grow_push(&toff, &end, sizeof end) ||
                grow_push(&lines, &line, sizeof line))
                goto nomem;
        } else if (grow_push(&feats, row, (size_t)width * sizeof *row)) {
            goto nomem;
        }
        if (lcol >= 0 && strings && !table) { /* ids once every distinct label is known */
            const cell *c = &r.cells[lcol];
            int64_t end = (int64_t)(lstr.len + c->len);
            if (grow_push(&lstr, c->s, c->len) || grow_push(&loff, &end, sizeof end)) goto nomem;
        }
        for (int k = 0; k < nl; k++) {
            if (!strings) li = class_labels ? (int32_t)lv[k] : 0;
            float lf = class_labels ? 0 : (float)lv[k];
            if (grow_push(k ? &lmore[k - 1] : &labs, class_labels ? (void *)&li : (void *)&lf, 4))
                goto nomem;
        }
        nrows++;
    }
    if (strings && lcol >= 0 && !table) {
        /* The distinct labels in byte order are the classes (like Keras's
         * text_dataset_from_directory with its sorted folder names). */
        if (!(table = malloc((size_t)(nrows ? nrows : 1) * sizeof *table))) goto nomem;
        if (!lstr.p && !(lstr.p = malloc(1))) goto nomem; /* every name empty */
        for (int64_t i = 0; i < nrows; i++) table[i] = (name_ref){LABEL_TEXT(i), LABEL_LEN(i), 0};
        qsort(table, (size_t)nrows, sizeof *table, by_name);
        int64_t n = 0;
        for (int64_t i = 0; i < nrows; i++)
            if (!n || by_name(&table[n - 1], &table[i])) table[n++] = table[i];
        if (n > 1 << 20) {
            st = tfc_error_set(err, TFC_ERR_DATA, "%s: %lld distinct labels: too many classes",
                               name, (long long)n);
            goto done;
        }
        nclasses = (int)n;
        for (int i = 0; i < nclasses; i++) table[i].id = i;
        if (a->num_classes > 0 && nclasses > a->num_classes) {
            st = tfc_error_set(err, TFC_ERR_DATA, "%s: %d distinct labels in column %d, but the "
                               "model has %d classes", name, nclasses, lcol, a->num_classes);
            goto done;
        }
        for (int64_t i = 0; i < nrows; i++)
            ((int32_t *)labs.p)[i] = find_name(table, nclasses, LABEL_TEXT(i), LABEL_LEN(i));
    }
    if (tcol >= 0) {
        csv_text_source *t = calloc(1, sizeof *t);
        if (!t || !(t->name = strdup(name))) {
            free(t);
            goto nomem;
        }
        t->base.ops = &csv_text_ops;
        t->base.count = nrows;
        t->base.spec.comp[TFC_COMP_FEATURES] = (tfc_component_spec){1, TFC_U8, {1, {-1}}};
        if (lcol >= 0)
            t->base.spec.comp[TFC_COMP_LABELS] =
                (tfc_component_spec){1, class_labels ? TFC_I32 : TFC_F32, {0, {0}}};
        t->buf = texts.p ? texts.p : malloc(1);
        t->off = toff.p;
        t->labels = labs.p;
        t->line = lines.p ? lines.p : malloc(4);
        texts.p = toff.p = labs.p = lines.p = NULL;
        t->base.skipped = skipped;
        *out = &t->base;
        if (!t->buf || !t->line) {
            tfc_source_free(*out);
            *out = NULL;
            goto nomem;
        }
    } else {
        tfc_tensor f = {TFC_F32, {.ndim = 2, .dim = {nrows, width}}, feats.p, -1};
        tfc_tensor l = {class_labels ? TFC_I32 : TFC_F32, {.ndim = 1, .dim = {nrows}}, labs.p, -1};
        if (!f.data && !(f.data = malloc(1))) goto nomem;
        if (lcol >= 0 && !l.data && !(l.data = malloc(1))) goto nomem;
        feats.p = labs.p = NULL;
        tfc_tensor more[TFC_MAX_INPUTS - 1] = {{0}}, lt[TFC_MAX_LABELS - 1] = {{0}};
        for (int k = 1; k < nl; k++) {
            lt[k - 1] = (tfc_tensor){l.dtype, {.ndim = 1, .dim = {nrows}}, lmore[k - 1].p, -1};
            lmore[k - 1].p = NULL;
        }
        if (nin > 1 && split_inputs(&f, nin, incols, look, more)) {
            for (int k = 1; k < nl; k++) free(lt[k - 1].data);
            free(f.data);
            free(l.data);
            goto nomem;
        }
        if (a->ts.sequence_length)
            st = tfc_source_timeseries(out, "csv", &f, lcol >= 0 ? &l : NULL, &a->ts, name, name,
                                       0, a->key, err);
        else
            st = tfc_source_array(out, "csv", &f, lcol >= 0 ? &l : NULL, NULL, name, name, 0,
                                  ON_ERROR_FAIL, err);
        /* the inputs' and labels' names (those of the mappings), their file this one */
        enum { NAMED = TFC_MAX_INPUTS + TFC_MAX_LABELS };
        const char *files[NAMED], *named[NAMED];
        int label_map = nl && a->label_column->kind == TFC_NODE_MAP;
        for (int k = 0; k < nin + nl; k++) {
            const tfc_node *m = k < nin ? a->feature_columns : a->label_column;
            named[k] = m && m->kind == TFC_NODE_MAP ? m->keys[k < nin ? k : k - nin]->str : "";
            files[k] = name;
        }
        if (!st && nin > 1) st = tfc_source_array_inputs(*out, nin, named, more, files, err);
        if (!st && label_map) st = tfc_source_array_labels(*out, nl, named + nin, lt, files, err);
        if (st && *out) {
            tfc_source_free(*out);
            *out = NULL;
        }
        /* those not taken */
        for (int k = 1; k < nin; k++) free(more[k - 1].data);
        for (int k = 1; k < nl; k++) free(lt[k - 1].data);
        if (!st) (*out)->skipped = skipped;
    }
    for (int64_t i = 0; !st && i < skipped && i < TFC_SKIP_NAMES; i++)
        tfc_source_name_skip(*out, where[i]);
    if (!st && !strings && a->classes) { /* `classes:` names integer labels */
        const char **cn = malloc((size_t)a->classes->n * sizeof *cn);
        for (int i = 0; cn && i < a->classes->n; i++) cn[i] = a->classes->vals[i]->str;
        st = cn ? tfc_source_set_classes(*out, cn, a->classes->n, err)
                : tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        free(cn);
        if (st) {
            tfc_source_free(*out);
            *out = NULL;
        }
    }
    if (!st && strings && lcol >= 0) { /* the class names, in id order */
        const char **cn = malloc((size_t)(nclasses ? nclasses : 1) * sizeof *cn);
        char **owned = calloc((size_t)(nclasses ? nclasses : 1), sizeof *owned);
        for (int i = 0; cn && owned && i < nclasses; i++)
            if ((owned[i] = strndup(table[i].s, table[i].len))) cn[table[i].id] = owned[i];
            else nclasses = -1;
        st = !cn || !owned || nclasses < 0
                 ? tfc_error_set(err, TFC_ERR_NOMEM, "out of memory")
                 : tfc_source_set_classes(*out, cn, nclasses, err);
        for (int i = 0; owned && i < nclasses; i++) free(owned[i]);
        free(owned);
        free(cn);
        if (st) {
            tfc_source_free(*out);
            *out = NULL;
        }
    }
    goto done;
nomem:
    st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory reading %s", name);
done:
    for (int i = 0; names && i < ncols; i++) free(names[i]);
    free(names);
    free(fcols);
    free(row);
    free(table);
    for (int i = 0; look && i < nf; i++) free(look[i].terms);
    free(look);
    free(feats.p);
    free(labs.p);
    for (int k = 0; k < TFC_MAX_LABELS - 1; k++) free(lmore[k].p);
    free(texts.p);
    free(toff.p);
    free(lines.p);
    free(lstr.p);
    free(loff.p);
    free(r.cells);
    free(r.unq);
    return st;
}

/* ---- the source ------------------------------------------------------------------------ */

static const char *const label_dtype_choices[] = {
    [CSV_LABEL_INT32] = "int32", [CSV_LABEL_FLOAT32] = "float32", [CSV_LABEL_STRING] = "string",
    [CSV_LABEL_COUNT] = NULL};

static const tfc_field csv_fields[] = {
    SOURCE_TYPE_FIELD(csv_args),
    {"file", TFC_F_STRING, offsetof(csv_args, file), NULL, TFC_UNBOUNDED, NULL, "the CSV file"},
    {"header", TFC_F_BOOL, offsetof(csv_args, header), "true", TFC_UNBOUNDED, NULL,
     "the first row names the columns"},
    {"delimiter", TFC_F_STRING, offsetof(csv_args, delimiter), ",", TFC_UNBOUNDED, NULL,
     "one character between cells"},
    {"label_column", TFC_F_NODE, offsetof(csv_args, label_column), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL,
     "column name or 0-based index of the label (-1: the last); none: no labels; or {label "
     "name: column}: one number label per name (a model of several outputs)"},
    {"feature_columns", TFC_F_NODE, offsetof(csv_args, feature_columns), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "list of column names or indices (default: every other column), or "
     "{input name: [columns]}: one float32 input per name (a model of several inputs)"},
    {"text_column", TFC_F_NODE, offsetof(csv_args, text_column), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "column name or index: the features are its text (bytes), not numbers"},
    {"string_lookup", TFC_F_NODE, offsetof(csv_args, string_lookup), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "{column: [term, ...]}: feature columns of names, each as Keras's "
     "StringLookup(vocabulary, output_mode='one_hot'): [UNK] first, then the terms"},
    {"label_dtype", TFC_F_ENUM, offsetof(csv_args, label_dtype), "int32", TFC_UNBOUNDED,
     label_dtype_choices, "class indices (int32), regression targets (float32) or class names "
     "(string: in `classes:` order, else sorted)"},
    {"timeseries", TFC_F_NODE, offsetof(csv_args, timeseries), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "{sequence_length, sequence_stride, sampling_rate, start_index, end_index, "
     "target_offset}: records are windows of rows (Keras's timeseries_dataset_from_array)"},
    SOURCE_NUM_CLASSES_FIELD(csv_args),
    SOURCE_ON_ERROR_FIELD(csv_args),
    {NULL},
};

/* The delimiter, and columns given as scalars (which ones exist, the file tells). */
static tfc_status csv_check(void *args, const tfc_node *at, const char *key, tfc_error *err)
{
    csv_args *a = args;
    tfc_status st = TFC_OK;
    if (strlen(a->delimiter) != 1)
        st = tfc_node_error(err, TFC_ERR_CONFIG, tfc_node_get(at, "delimiter"), key,
                            "delimiter must be one character, found \"%s\"", a->delimiter);
    char ckey[352];
    const tfc_node *lc = a->label_column;
    if (lc && !tfc_node_is_null(lc) && lc->kind == TFC_NODE_MAP) {
        /* {label name: column}: one number label per name (a model of several outputs) */
        snprintf(ckey, sizeof ckey, "%s.label_column", key);
        const tfc_node *fc = a->feature_columns;
        if (tfc_data_check_labels(lc, fc && !tfc_node_is_null(fc) ? fc : NULL, ckey, err))
            st = TFC_ERR_CONFIG;
        for (int k = 0; k < lc->n; k++) {
            char kk[420];
            snprintf(kk, sizeof kk, "%s.%s", ckey, lc->keys[k]->str);
            if (column_node(lc->vals[k], kk, err)) st = TFC_ERR_CONFIG;
        }
        const char *other = a->label_dtype == CSV_LABEL_STRING ? "label_dtype: string names "
                                                                 "the classes of one column"
                            : tcol_given(a) ? "text_column's records take one label"
                            : a->timeseries && !tfc_node_is_null(a->timeseries)
                                ? "timeseries: the targets are rows of one column"
                                : NULL;
        if (other)
            st = tfc_node_error(err, TFC_ERR_CONFIG, lc, ckey, "%s: give label_column one "
                                "column", other);
    } else if (lc && !tfc_node_is_null(lc)) {
        snprintf(ckey, sizeof ckey, "%s.label_column", key);
        if (column_node(lc, ckey, err)) st = TFC_ERR_CONFIG;
    }
    if (a->text_column && !tfc_node_is_null(a->text_column)) {
        snprintf(ckey, sizeof ckey, "%s.text_column", key);
        if (column_node(a->text_column, ckey, err)) st = TFC_ERR_CONFIG;
        if (a->feature_columns && !tfc_node_is_null(a->feature_columns))
            st = tfc_node_error(err, TFC_ERR_CONFIG, a->feature_columns, key, "give "
                                "text_column or feature_columns, not both");
    }
    const tfc_node *sl = a->string_lookup;
    if (sl && !tfc_node_is_null(sl)) {
        snprintf(ckey, sizeof ckey, "%s.string_lookup", key);
        if (sl->kind != TFC_NODE_MAP || sl->n == 0)
            st = tfc_node_error(err, TFC_ERR_CONFIG, sl, ckey, "expected a mapping {column: "
                                "[term, ...]}");
        for (int i = 0; sl->kind == TFC_NODE_MAP && i < sl->n; i++) {
            const tfc_node *v = sl->vals[i];
            int ok = v->kind == TFC_NODE_SEQ && v->n > 0;
            for (int t = 0; ok && t < v->n; t++) ok = v->vals[t]->kind == TFC_NODE_SCALAR;
            if (!ok)
                st = tfc_node_error(err, TFC_ERR_CONFIG, v, ckey, "column '%s': expected a "
                                    "non-empty list of terms", sl->keys[i]->str);
        }
        if (a->text_column && !tfc_node_is_null(a->text_column))
            st = tfc_node_error(err, TFC_ERR_CONFIG, sl, ckey, "goes with numeric features, "
                                "not text_column");
    }
    const tfc_node *fc = a->feature_columns;
    if (fc && !tfc_node_is_null(fc)) {
        snprintf(ckey, sizeof ckey, "%s.feature_columns", key);
        if (fc->kind == TFC_NODE_MAP && tfc_data_check_inputs(fc, ckey, err)) st = TFC_ERR_CONFIG;
        for (int k = 0; k < (fc->kind == TFC_NODE_MAP ? fc->n : 1); k++) {
            const tfc_node *cols = fc->kind == TFC_NODE_MAP ? fc->vals[k] : fc;
            for (int i = 0; i < (cols->kind == TFC_NODE_SEQ ? cols->n : 1); i++)
                if (column_node(cols->kind == TFC_NODE_SEQ ? cols->vals[i] : cols, ckey, err))
                    st = TFC_ERR_CONFIG;
        }
        if (fc->kind == TFC_NODE_MAP && a->timeseries && !tfc_node_is_null(a->timeseries))
            st = tfc_node_error(err, TFC_ERR_CONFIG, fc, ckey, "timeseries: windows are of one "
                                "table: give feature_columns a list");
    }
    if (tfc_timeseries_check(a->timeseries, key, &a->ts, err)) st = TFC_ERR_CONFIG;
    snprintf(ckey, sizeof ckey, "%s.timeseries", key);
    if (a->ts.sequence_length && (tcol_given(a) || a->on_error == ON_ERROR_SKIP))
        st = tfc_node_error(err, TFC_ERR_CONFIG, a->timeseries, ckey, "timeseries: windows need "
                            "every row, of numbers: %s", tcol_given(a) ? "give feature_columns, "
                            "not text_column" : "on_error: skip would join the rows around a "
                            "bad one (fix the file)");
    if (a->ts.target_offset && (!a->label_column || tfc_node_is_null(a->label_column))) {
        snprintf(ckey, sizeof ckey, "%s.timeseries.target_offset", key);
        st = tfc_node_error(err, TFC_ERR_CONFIG, tfc_node_get(a->timeseries, "target_offset"),
                            ckey, "target_offset without targets: give label_column, the "
                            "column the targets are read from");
    }
    return st;
}

static tfc_status csv_open(const void *args, const tfc_data_options *opt, const char *key,
                           source **out, tfc_error *err)
{
    csv_args a = *(const csv_args *)args;
    char *file, *text;
    size_t len;
    *out = NULL;
    tfc_status st = tfc_data_resolve(opt, &a.file, &file, err);
    if (!st) st = tfc_file_read_all(a.file, CSV_MAX_FILE_BYTES, &text, &len, err);
    if (!st) {
        if (opt && opt->num_classes) a.num_classes = opt->num_classes;
        a.key = key;
        st = tfc_source_csv_mem(out, &a, text, len, a.file, err);
        free(text);
    }
    free(file);
    return st;
}

const source_def tfc_source_csv = {
    .name = "csv",
    .help = "a CSV file of numbers (or of text and class names)",
    .fields = csv_fields,
    .args_size = sizeof(csv_args),
    .check = csv_check,
    .open = csv_open,
    .classes_offset = offsetof(csv_args, classes),
};
