/* NumPy .npy files: reading (versions 1-3, every numeric dtype in either byte order, C
 * order only; Fortran order, object, string and structured arrays are clear errors), writing
 * (version 1.0, little-endian), and the npy source (features and labels sliced along axis 0;
 * the features may be several named inputs and the labels several named labels, one file
 * each).
 * The header is parsed as the small Python literal it is, with its length bounded. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "data/internal.h"

#define NPY_MAX_HEADER (1u << 20)
#define NPY_MAX_FILE_BYTES ((size_t)64 << 30)

typedef struct hdr_parser {
    const char *p, *end;
} hdr_parser;

static void skip_ws(hdr_parser *h)
{
    while (h->p < h->end && isspace((unsigned char)*h->p)) h->p++;
}

static int accept(hdr_parser *h, char c)
{
    skip_ws(h);
    if (h->p < h->end && *h->p == c) {
        h->p++;
        return 1;
    }
    return 0;
}

/* A quoted Python string into buf. */
static int read_string(hdr_parser *h, char *buf, size_t size)
{
    skip_ws(h);
    if (h->p >= h->end || (*h->p != '\'' && *h->p != '"')) return 0;
    char q = *h->p++;
    size_t n = 0;
    while (h->p < h->end && *h->p != q) {
        if (n + 1 < size) buf[n++] = *h->p;
        h->p++;
    }
    if (h->p >= h->end) return 0;
    h->p++;
    buf[n] = 0;
    return 1;
}

static int read_word(hdr_parser *h, char *buf, size_t size)
{
    skip_ws(h);
    size_t n = 0;
    while (h->p < h->end && (isalnum((unsigned char)*h->p) || *h->p == '_')) {
        if (n + 1 < size) buf[n++] = *h->p;
        h->p++;
    }
    buf[n] = 0;
    return n > 0;
}

static int parse_descr(const char *d, tfc_dtype *dt, int *swap, const char **why)
{
    char order = d[0], kind;
    const char *rest = d + 1;
    if (order != '<' && order != '>' && order != '|' && order != '=') {
        order = '=';
        rest = d;
    }
    kind = rest[0];
    char *endp;
    long size = strtol(rest + (kind ? 1 : 0), &endp, 10);
    if (!kind || *endp) {
        *why = "unrecognised dtype";
        return 0;
    }
    *swap = order == '>' && size > 1;
    *why = NULL;
    switch (kind) {
    case 'b': if (size == 1) { *dt = TFC_BOOL; return 1; } break;
    case 'i':
        if (size == 1) { *dt = TFC_I8; return 1; }
        if (size == 2) { *dt = TFC_I16; return 1; }
        if (size == 4) { *dt = TFC_I32; return 1; }
        if (size == 8) { *dt = TFC_I64; return 1; }
        break;
    case 'u':
        if (size == 1) { *dt = TFC_U8; return 1; }
        if (size == 2) { *dt = TFC_U16; return 1; }
        if (size == 4) { *dt = TFC_U32; return 1; }
        if (size == 8) { *dt = TFC_U64; return 1; }
        break;
    case 'f':
        if (size == 2) { *dt = TFC_F16; return 1; }
        if (size == 4) { *dt = TFC_F32; return 1; }
        if (size == 8) { *dt = TFC_F64; return 1; }
        break;
    case 'O': *why = "object arrays are not supported (they hold Python objects)"; return 0;
    case 'U':
    case 'S': *why = "string arrays are not supported"; return 0;
    case 'c': *why = "complex arrays are not supported"; return 0;
    case 'V': *why = "void/structured arrays are not supported"; return 0;
    case 'M':
    case 'm': *why = "datetime arrays are not supported"; return 0;
    default: break;
    }
    *why = "unsupported dtype";
    return 0;
}

tfc_status tfc_npy_parse(const void *buf, size_t len, const char *name, tfc_tensor *t,
                         tfc_error *err)
{
    const unsigned char *b = buf;
    memset(t, 0, sizeof *t);
    if (len < 10 || memcmp(b, "\x93NUMPY", 6))
        return tfc_error_set(err, TFC_ERR_DATA, "%s: not a .npy file (bad magic)", name);
    int major = b[6];
    size_t hl, off;
    if (major == 1) {
        hl = (size_t)b[8] | (size_t)b[9] << 8;
        off = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12) return tfc_error_set(err, TFC_ERR_DATA, "%s: truncated .npy header", name);
        hl = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        off = 12;
    } else {
        return tfc_error_set(err, TFC_ERR_DATA, "%s: unsupported .npy version %d.%d", name, major,
                             b[7]);
    }
    if (hl > NPY_MAX_HEADER || hl > len - off)
        return tfc_error_set(err, TFC_ERR_DATA, "%s: truncated .npy header (%zu bytes announced, "
                             "%zu present)", name, hl, len - off);
    hdr_parser h = {(const char *)b + off, (const char *)b + off + hl};
    char descr[64] = "", key[64], word[16];
    int have_descr = 0, have_shape = 0, fortran = 0;
    tfc_shape shape = {0};
    if (!accept(&h, '{')) goto bad;
    while (!accept(&h, '}')) {
        if (!read_string(&h, key, sizeof key) || !accept(&h, ':')) goto bad;
        if (!strcmp(key, "descr")) {
            skip_ws(&h);
            if (h.p < h.end && *h.p == '[')
                return tfc_error_set(err, TFC_ERR_DATA, "%s: structured arrays (a list descr) "
                                     "are not supported", name);
            if (!read_string(&h, descr, sizeof descr)) goto bad;
            have_descr = 1;
        } else if (!strcmp(key, "fortran_order")) {
            if (!read_word(&h, word, sizeof word)) goto bad;
            if (!strcmp(word, "True")) fortran = 1;
            else if (strcmp(word, "False")) goto bad;
        } else if (!strcmp(key, "shape")) {
            if (!accept(&h, '(')) goto bad;
            while (!accept(&h, ')')) {
                if (!read_word(&h, word, sizeof word)) goto bad;
                char *endp;
                long long v = strtoll(word, &endp, 10);
                if (*endp || v < 0) goto bad;
                if (shape.ndim >= TFC_MAX_DIMS)
                    return tfc_error_set(err, TFC_ERR_DATA, "%s: more than %d dimensions", name,
                                         TFC_MAX_DIMS);
                shape.dim[shape.ndim++] = v;
                if (!accept(&h, ',')) {
                    if (!accept(&h, ')')) goto bad;
                    break;
                }
            }
            have_shape = 1;
        } else {
            goto bad;
        }
        if (!accept(&h, ',')) {
            if (!accept(&h, '}')) goto bad;
            break;
        }
    }
    if (!have_descr || !have_shape) goto bad;
    if (fortran)
        return tfc_error_set(err, TFC_ERR_DATA, "%s: Fortran-order arrays are not supported; "
                             "save with np.save(f, np.ascontiguousarray(a))", name);
    tfc_dtype dt;
    int swap;
    const char *why;
    if (!parse_descr(descr, &dt, &swap, &why))
        return tfc_error_set(err, TFC_ERR_DATA, "%s: dtype '%s': %s", name, descr, why);
    size_t data_off = off + hl;
    int64_t bytes = tfc_data_bytes_checked(dt, &shape, (int64_t)(len - data_off));
    if (bytes < 0) {
        char sh[128];
        return tfc_error_set(err, TFC_ERR_DATA, "%s: truncated: shape %s of %s needs more than "
                             "the %zu bytes of data present", name,
                             tfc_shape_str(&shape, sh, sizeof sh), descr, len - data_off);
    }
    void *d = malloc((size_t)bytes + 1);
    if (!d) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory reading %s", name);
    memcpy(d, b + data_off, (size_t)bytes);
    if (swap) {
        size_t es = tfc_dtype_size(dt);
        unsigned char *p = d;
        for (int64_t i = 0; i < bytes; i += (int64_t)es)
            for (size_t x = 0, y = es - 1; x < y; x++, y--) {
                unsigned char tmp = p[i + x];
                p[i + x] = p[i + y];
                p[i + y] = tmp;
            }
    }
    t->dtype = dt;
    t->shape = shape;
    t->data = d;
    t->device = -1;
    return TFC_OK;
bad:
    return tfc_error_set(err, TFC_ERR_DATA, "%s: malformed .npy header", name);
}

tfc_status tfc_npy_read(const char *path, tfc_tensor *t, tfc_error *err)
{
    char *buf;
    size_t len;
    memset(t, 0, sizeof *t);
    tfc_status st = tfc_file_read_all(path, NPY_MAX_FILE_BYTES, &buf, &len, err);
    if (st) return st;
    st = tfc_npy_parse(buf, len, path, t, err);
    free(buf);
    return st;
}

static const char *npy_descr(tfc_dtype dt)
{
    switch (dt) {
    case TFC_F32: return "<f4";
    case TFC_F64: return "<f8";
    case TFC_F16: return "<f2";
    case TFC_I8: return "|i1";
    case TFC_U8: return "|u1";
    case TFC_I16: return "<i2";
    case TFC_U16: return "<u2";
    case TFC_I32: return "<i4";
    case TFC_U32: return "<u4";
    case TFC_I64: return "<i8";
    case TFC_U64: return "<u8";
    case TFC_BOOL: return "|b1";
    default: return NULL;
    }
}

tfc_status tfc_npy_write(const char *path, const tfc_tensor *t, tfc_error *err)
{
    const char *descr = npy_descr(t->dtype);
    if (!descr)
        return tfc_error_set(err, TFC_ERR_DATA, "%s: %s has no .npy dtype", path,
                             tfc_data_dtype_name(t->dtype));
    char shape[256], hdr[512];
    size_t used = 0;
    shape[0] = 0;
    for (int i = 0; i < t->shape.ndim; i++)
        used += (size_t)snprintf(shape + used, sizeof shape - used, "%lld,%s",
                                 (long long)t->shape.dim[i], i + 1 < t->shape.ndim ? " " : "");
    if (t->shape.ndim > 1) shape[used - 1] = 0; /* "(2, 3)" rather than "(2, 3,)" */
    int n = snprintf(hdr + 10, sizeof hdr - 10,
                     "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape);
    /* Pad with spaces so the data starts at a multiple of 64, then a newline. */
    size_t total = 10 + (size_t)n + 1;
    size_t padded = (total + 63) / 64 * 64;
    memset(hdr + 10 + n, ' ', padded - total);
    hdr[padded - 1] = '\n';
    size_t hl = padded - 10;
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    hdr[8] = (char)(hl & 0xff);
    hdr[9] = (char)(hl >> 8);
    const void *chunks[2] = {hdr, t->data};
    size_t sizes[2] = {padded, tfc_data_tensor_bytes(t)};
    FILE *f = fopen(path, "wb");
    if (!f) return tfc_error_set(err, TFC_ERR_IO, "cannot write %s: %m", path);
    int ok = 1;
    for (int i = 0; i < 2; i++)
        if (sizes[i] && fwrite(chunks[i], 1, sizes[i], f) != sizes[i]) ok = 0;
    if (fclose(f) != 0) ok = 0;
    if (!ok) return tfc_error_set(err, TFC_ERR_IO, "cannot write %s: %m", path);
    return TFC_OK;
}

/* ---- the source ------------------------------------------------------------------------ */


static tfc_status load_npy(source **out, const file_pair_args *a, tfc_error *err)
{
    *out = NULL;
    tfc_tensor f, l = {0}, more[TFC_MAX_INPUTS - 1] = {{0}}, lmore[TFC_MAX_LABELS - 1] = {{0}};
    tfc_status st = tfc_npy_read(a->features, &f, err);
    if (st) return st;
    if (a->labels) st = tfc_npy_read(a->labels, &l, err);
    for (int k = 1; !st && k < a->ninputs; k++)
        st = tfc_npy_read(a->input_files[k], &more[k - 1], err);
    for (int k = 1; !st && k < a->nlabels; k++)
        st = tfc_npy_read(a->label_files[k], &lmore[k - 1], err);
    if (st) {
        free(f.data);
        free(l.data);
        for (int k = 1; k < a->ninputs; k++) free(more[k - 1].data);
        for (int k = 1; k < a->nlabels; k++) free(lmore[k - 1].data);
        return st;
    }
    if (a->ts.sequence_length)
        return tfc_source_timeseries(out, "npy", &f, a->labels ? &l : NULL, &a->ts,
                                     a->features, a->labels, a->num_classes, a->key, err);
    st = tfc_source_array(out, "npy", &f, a->labels ? &l : NULL, NULL, a->features, a->labels,
                          a->num_classes, a->on_error, err);
    if (!st && a->ninputs)
        st = tfc_source_array_inputs(*out, a->ninputs, a->input_names, more, a->input_files + 1,
                                     err);
    if (!st && a->nlabels)
        st = tfc_source_array_labels(*out, a->nlabels, a->label_names, lmore, a->label_files + 1,
                                     err);
    /* those not taken */
    for (int k = 1; k < a->ninputs; k++) free(more[k - 1].data);
    for (int k = 1; k < a->nlabels; k++) free(lmore[k - 1].data);
    if (st && *out) {
        tfc_source_free(*out);
        *out = NULL;
    }
    return st;
}

static const tfc_field npy_fields[] = {
    SOURCE_TYPE_FIELD(file_pair_args),
    {"features", TFC_F_NODE, offsetof(file_pair_args, features_node), NULL, TFC_UNBOUNDED, NULL,
     ".npy array (N, ...) sliced along axis 0, or {input name: .npy file, ...}: one input per "
     "name (a model of several inputs), every file of N rows"},
    {"labels", TFC_F_NODE, offsetof(file_pair_args, labels_node), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, ".npy array (N, ...) of labels, or {label name: .npy file, ...}: one label per name "
     "(a model of several outputs), every file of N rows"},
    {"timeseries", TFC_F_NODE, offsetof(file_pair_args, timeseries), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "{sequence_length, sequence_stride, sampling_rate, start_index, "
     "end_index, target_offset}: records are windows of the features' rows, their targets "
     "rows of labels (Keras's timeseries_dataset_from_array)"},
    SOURCE_NUM_CLASSES_FIELD(file_pair_args),
    SOURCE_ON_ERROR_FIELD(file_pair_args),
    {NULL},
};

/* `features:` (labels 0) or `labels:` (labels 1): a file, or {name: file}, one per input or
 * label, into the file (features: input 0's; labels: label 0's) and for a mapping the names
 * and files (without timeseries:, whose windows and targets are rows of one table). */
static tfc_status npy_files(file_pair_args *a, const char *key, int labels, tfc_error *err)
{
    const tfc_node *n = labels ? a->labels_node : a->features_node;
    const char *field = labels ? "labels" : "features", *what = labels ? "label" : "input";
    const char **file = labels ? &a->labels : &a->features;
    const char **names = labels ? a->label_names : a->input_names;
    const char **files = labels ? a->label_files : a->input_files;
    char k[352];
    snprintf(k, sizeof k, "%s.%s", key, field);
    if (!n) return TFC_OK; /* features: the field table reported it; labels: none */
    if (n->kind == TFC_NODE_SCALAR) {
        *file = n->str;
        return TFC_OK;
    }
    if (n->kind != TFC_NODE_MAP)
        return tfc_node_error(err, TFC_ERR_CONFIG, n, k, "expected a .npy file or a mapping "
                              "{%s name: .npy file}, found %s", what, tfc_node_kind_name(n->kind));
    tfc_status st = labels ? tfc_data_check_labels(n, a->features_node, k, err)
                           : tfc_data_check_inputs(n, k, err);
    for (int i = 0; i < n->n && i < (labels ? TFC_MAX_LABELS : TFC_MAX_INPUTS); i++) {
        char ki[420];
        snprintf(ki, sizeof ki, "%s.%s", k, n->keys[i]->str);
        if (n->vals[i]->kind != TFC_NODE_SCALAR)
            st = tfc_node_error(err, TFC_ERR_CONFIG, n->vals[i], ki, "expected a .npy file, "
                                "found %s", tfc_node_kind_name(n->vals[i]->kind));
        names[i] = n->keys[i]->str;
        files[i] = n->vals[i]->str;
    }
    if (st) return st;
    *(labels ? &a->nlabels : &a->ninputs) = n->n;
    *file = files[0];
    if (a->timeseries)
        return tfc_node_error(err, TFC_ERR_CONFIG, n, k, "timeseries: %s are of one table: give "
                              "%s one .npy file", labels ? "the targets' rows" : "windows", field);
    return TFC_OK;
}

/* `features:`, `labels:` and `timeseries:` (without on_error: skip, which would leave rows
 * out of the series). */
static tfc_status npy_check(void *args, const tfc_node *at, const char *key, tfc_error *err)
{
    file_pair_args *a = args;
    tfc_status st = tfc_timeseries_check(a->timeseries, key, &a->ts, err);
    if (npy_files(a, key, 0, err)) st = TFC_ERR_CONFIG;
    if (npy_files(a, key, 1, err)) st = TFC_ERR_CONFIG;
    char k[352];
    snprintf(k, sizeof k, "%s.on_error", key);
    if (a->ts.sequence_length && a->on_error == ON_ERROR_SKIP)
        st = tfc_node_error(err, TFC_ERR_CONFIG, tfc_node_get(at, "on_error"), k,
                            "timeseries: windows need every row: on_error: skip would leave out "
                            "the rows whose labels are out of range");
    snprintf(k, sizeof k, "%s.timeseries.target_offset", key);
    if (a->ts.sequence_length && a->ts.target_offset && !a->labels)
        st = tfc_node_error(err, TFC_ERR_CONFIG, tfc_node_get(a->timeseries, "target_offset"),
                            k, "timeseries: target_offset without labels (give `labels:`, the "
                            "targets' .npy file)");
    return st;
}

static tfc_status npy_open(const void *args, const tfc_data_options *opt, const char *key,
                           source **out, tfc_error *err)
{
    file_pair_args a = *(const file_pair_args *)args;
    a.key = key;
    char *owned[TFC_MAX_INPUTS] = {NULL}, *lowned[TFC_MAX_LABELS] = {NULL};
    tfc_status st = TFC_OK;
    for (int k = 1; k < a.ninputs && !st; k++)
        st = tfc_data_resolve(opt, &a.input_files[k], &owned[k], err);
    for (int k = 1; k < a.nlabels && !st; k++)
        st = tfc_data_resolve(opt, &a.label_files[k], &lowned[k], err);
    if (!st) st = tfc_source_open_pair(&a, opt, load_npy, out, err);
    for (int k = 1; k < a.ninputs; k++) free(owned[k]);
    for (int k = 1; k < a.nlabels; k++) free(lowned[k]);
    return st;
}

const source_def tfc_source_npy = {
    .name = "npy",
    .help = "NumPy .npy arrays",
    .fields = npy_fields,
    .args_size = sizeof(file_pair_args),
    .check = npy_check,
    .open = npy_open,
};

tfc_pipeline *tfc_pipeline_from_npy(const char *features, const char *labels,
                                    const tfc_data_options *opt, tfc_error *err)
{
    file_pair_args a = {.type = "npy", .features = features, .labels = labels,
                        .num_classes = opt ? opt->num_classes : 0};
    source *src;
    if (load_npy(&src, &a, err)) return NULL;
    return tfc_pipeline_new(src, opt, err);
}
