/* IDX files (MNIST's format), gzip-compressed or plain: a magic of two zero bytes, a type
 * byte and a rank byte, big-endian u32 dimensions, then big-endian data. A gzip file is
 * inflated whole (gunzip.c: its CRC-32 and length are checked, its buffer grows only as data
 * arrives) before the header is read. The idx source reads an images file and an optional
 * labels file into the array source. */
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "data/internal.h"

#define IDX_MAX_FILE_BYTES ((size_t)4 << 30)
#define IDX_MAX_DATA_BYTES ((int64_t)16 << 30)
#define IDX_MAX_INFLATED ((size_t)IDX_MAX_DATA_BYTES + 4 + 4 * TFC_MAX_DIMS)

static int idx_dtype(unsigned code, tfc_dtype *dt)
{
    switch (code) {
    case 0x08: *dt = TFC_U8; return 1;
    case 0x09: *dt = TFC_I8; return 1;
    case 0x0B: *dt = TFC_I16; return 1;
    case 0x0C: *dt = TFC_I32; return 1;
    case 0x0D: *dt = TFC_F32; return 1;
    case 0x0E: *dt = TFC_F64; return 1;
    default: return 0;
    }
}

/* Reads the header from the first bytes; returns the header length, 0 when more bytes are
 * needed, -1 on a bad header (err filled). */
static long parse_header(const unsigned char *b, size_t len, const char *name, tfc_dtype *dt,
                         tfc_shape *shape, tfc_error *err)
{
    if (len < 4) return 0;
    if (b[0] || b[1]) {
        tfc_error_set(err, TFC_ERR_DATA, "%s: not an IDX file (bad magic %02x %02x)", name, b[0],
                      b[1]);
        return -1;
    }
    if (!idx_dtype(b[2], dt)) {
        tfc_error_set(err, TFC_ERR_DATA, "%s: unknown IDX data type 0x%02x", name, b[2]);
        return -1;
    }
    int nd = b[3];
    if (nd < 1 || nd > TFC_MAX_DIMS) {
        tfc_error_set(err, TFC_ERR_DATA, "%s: IDX rank %d is outside [1, %d]", name, nd,
                      TFC_MAX_DIMS);
        return -1;
    }
    size_t hl = 4 + 4 * (size_t)nd;
    if (len < hl) return 0;
    shape->ndim = nd;
    for (int i = 0; i < nd; i++) {
        const unsigned char *d = b + 4 + 4 * i;
        shape->dim[i] = ((int64_t)d[0] << 24) | ((int64_t)d[1] << 16) | ((int64_t)d[2] << 8) | d[3];
    }
    return (long)hl;
}

static void swap_bytes(void *data, size_t es, int64_t n)
{
    unsigned char *p = data;
    if (es == 1) return;
    for (int64_t i = 0; i < n; i++, p += es)
        for (size_t a = 0, b = es - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

/* Parses plain IDX bytes. With allow_truncated, a short file keeps its complete records and
 * *missing gets how many are absent. */
static tfc_status idx_parse_plain(const unsigned char *b, size_t len, const char *name,
                                  int allow_truncated, tfc_tensor *t, int64_t *missing,
                                  tfc_error *err)
{
    memset(t, 0, sizeof *t);
    *missing = 0;
    tfc_dtype dt;
    tfc_shape sh = {0};
    long hl = parse_header(b, len, name, &dt, &sh, err);
    if (hl < 0) return TFC_ERR_DATA;
    if (hl == 0)
        return tfc_error_set(err, TFC_ERR_DATA, "%s: truncated IDX header (%zu bytes)", name, len);
    int64_t bytes = tfc_data_bytes_checked(dt, &sh, IDX_MAX_DATA_BYTES);
    if (bytes < 0)
        return tfc_error_set(err, TFC_ERR_DATA, "%s: IDX dimensions are too large", name);
    size_t have = len - (size_t)hl;
    if ((uint64_t)bytes > have) {
        int64_t per = sh.dim[0] ? bytes / sh.dim[0] : 0;
        int64_t complete = per ? (int64_t)have / per : 0;
        if (!allow_truncated)
            return tfc_error_set(err, TFC_ERR_DATA, "%s: truncated: the header announces %lld "
                                 "records (%lld bytes of data) but the data ends in record %lld "
                                 "(%zu bytes)", name, (long long)sh.dim[0], (long long)bytes,
                                 (long long)complete, have);
        *missing = sh.dim[0] - complete;
        sh.dim[0] = complete;
        bytes = complete * per;
    }
    void *d = malloc((size_t)bytes + 1);
    if (!d) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory reading %s", name);
    memcpy(d, b + hl, (size_t)bytes);
    swap_bytes(d, tfc_dtype_size(dt), bytes / (int64_t)tfc_dtype_size(dt));
    t->dtype = dt;
    t->shape = sh;
    t->data = d;
    t->device = -1;
    return TFC_OK;
}

static tfc_status idx_parse(const void *buf, size_t len, const char *name, int allow_truncated,
                            tfc_tensor *t, int64_t *missing, tfc_error *err)
{
    const unsigned char *b = buf;
    if (tfc_is_gzip(b, len)) {
        unsigned char *plain;
        size_t plen;
        tfc_status st = tfc_gunzip(b, len, name, IDX_MAX_INFLATED, &plain, &plen, err);
        if (st) return st;
        st = idx_parse_plain(plain, plen, name, allow_truncated, t, missing, err);
        free(plain);
        return st;
    }
    return idx_parse_plain(b, len, name, allow_truncated, t, missing, err);
}

tfc_status tfc_idx_parse(const void *buf, size_t len, const char *name, tfc_tensor *t,
                         tfc_error *err)
{
    int64_t missing;
    return idx_parse(buf, len, name, 0, t, &missing, err);
}

static tfc_status idx_load(const char *path, int allow_truncated, tfc_tensor *t,
                           int64_t *missing, tfc_error *err)
{
    char *buf;
    size_t len;
    tfc_status st = tfc_file_read_all(path, IDX_MAX_FILE_BYTES, &buf, &len, err);
    if (st) return st;
    st = idx_parse(buf, len, path, allow_truncated, t, missing, err);
    free(buf);
    return st;
}

/* Opens the images file (a->features) and the labels file. */
static tfc_status load_idx(source **out, const file_pair_args *a, tfc_error *err)
{
    *out = NULL;
    tfc_tensor img, lab = {0};
    int skip = a->on_error == ON_ERROR_SKIP;
    int64_t miss_i = 0, miss_l = 0;
    tfc_status st = idx_load(a->features, skip, &img, &miss_i, err);
    if (st) return st;
    if (a->labels) {
        st = idx_load(a->labels, skip, &lab, &miss_l, err);
        if (st) {
            free(img.data);
            return st;
        }
        if (!tfc_dtype_is_int(lab.dtype)) {
            free(img.data);
            free(lab.data);
            return tfc_error_set(err, TFC_ERR_DATA, "%s: labels must be integers, found %s",
                                 a->labels, tfc_data_dtype_name(lab.dtype));
        }
        /* Labels become int32 class indices. */
        int64_t n = tfc_shape_numel(&lab.shape);
        int32_t *l32 = malloc((size_t)n * 4 + 1);
        if (!l32) {
            free(img.data);
            free(lab.data);
            return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory reading %s", a->labels);
        }
        tfc_values_convert(l32, TFC_I32, lab.data, lab.dtype, n);
        free(lab.data);
        lab.data = l32;
        lab.dtype = TFC_I32;
    }
    /* With on_error: skip, a truncated file keeps its complete records and both files keep
     * the records they have in common; the rest count as skipped. */
    int64_t skipped = miss_i;
    if (skip && a->labels) {
        int64_t ni = img.shape.dim[0], nl = lab.shape.dim[0], n0 = ni < nl ? ni : nl;
        int64_t announced = ni + miss_i > nl + miss_l ? ni + miss_i : nl + miss_l;
        if (miss_i || miss_l) {
            img.shape.dim[0] = lab.shape.dim[0] = n0;
            skipped = announced - n0;
        }
    }
    /* (N, rows, cols) grey images get a channel axis: (rows, cols, 1), channels last. */
    tfc_shape rec = {.ndim = -1};
    if (img.shape.ndim == 3) {
        rec.ndim = 3;
        rec.dim[0] = img.shape.dim[1];
        rec.dim[1] = img.shape.dim[2];
        rec.dim[2] = 1;
    }
    st = tfc_source_array(out, "idx", &img, a->labels ? &lab : NULL, &rec, a->features,
                          a->labels, a->num_classes, a->on_error, err);
    if (st) return st;
    if (skipped) tfc_source_name_skip(*out, miss_i ? a->features : a->labels);
    (*out)->skipped += skipped;
    return TFC_OK;
}

/* ---- the source ------------------------------------------------------------------------ */

static const tfc_field idx_fields[] = {
    SOURCE_TYPE_FIELD(file_pair_args),
    {"images", TFC_F_STRING, offsetof(file_pair_args, features), NULL, TFC_UNBOUNDED, NULL,
     "IDX file of the examples (gzip or plain); (N, rows, cols) gives (rows, cols, 1)"},
    {"labels", TFC_F_STRING, offsetof(file_pair_args, labels), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "IDX file of integer labels (N,), yielded as int32"},
    SOURCE_NUM_CLASSES_FIELD(file_pair_args),
    SOURCE_ON_ERROR_FIELD(file_pair_args),
    {NULL},
};

static tfc_status idx_open(const void *args, const tfc_data_options *opt, const char *key,
                           source **out, tfc_error *err)
{
    return tfc_source_open_pair(args, opt, load_idx, out, err);
}

const source_def tfc_source_idx = {
    .name = "idx",
    .help = "MNIST IDX files",
    .fields = idx_fields,
    .args_size = sizeof(file_pair_args),
    .open = idx_open,
};

tfc_pipeline *tfc_pipeline_from_idx(const char *images, const char *labels,
                                    const tfc_data_options *opt, tfc_error *err)
{
    file_pair_args a = {.type = "idx", .features = images, .labels = labels,
                        .num_classes = opt ? opt->num_classes : 0};
    source *src;
    if (load_idx(&src, &a, err)) return NULL;
    return tfc_pipeline_new(src, opt, err);
}
