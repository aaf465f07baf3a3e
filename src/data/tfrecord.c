/* TFRecord files of tf.train.Example records: the tfrecord source and the writer behind
 * `tfc-data --output` (tensorflow/core/example/example.proto and feature.proto):
 *   Example  { Features features = 1; }
 *   Features { map<string, Feature> feature = 1; }      (entries: key = 1, value = 2)
 *   Feature  { oneof { BytesList bytes_list = 1; FloatList float_list = 2;
 *                      Int64List int64_list = 3; } }
 *   BytesList { repeated bytes value = 1; }   FloatList { repeated float value = 1; }
 *   Int64List { repeated int64 value = 1; }   (packed or not: both are read)
 * Opening a file walks its framing once and keeps each record's place (the index), checking
 * every length's CRC; a record's data CRC is checked when the record is read. Uncompressed
 * files are mapped, gzip files inflated into memory, so records are read in any order:
 * shuffling, parallel maps and exact resume work as for every source. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/fileio.h"
#include "core/protobuf.h"
#include "core/tfrecord.h"
#include "data/internal.h"

#define TFR_MAX_RECORD ((uint64_t)1 << 30)
#define TFR_MAX_INFLATED ((size_t)64 << 30)

static const char *const compression_names[] = {
    [TFR_COMPRESSION_NONE] = "none", [TFR_COMPRESSION_GZIP] = "gzip",
    [TFR_COMPRESSION_COUNT] = NULL};
static const char *const encoded_names[] = {
    [TFR_ENCODED_NONE] = "none", [TFR_ENCODED_PNG] = "png", [TFR_ENCODED_JPEG] = "jpeg",
    [TFR_ENCODED_COUNT] = NULL};
static const char *const kind_names[] = {"", "bytes_list", "float_list", "int64_list"};

/* ---- reading one Example ------------------------------------------------------------------ */

enum { KIND_BYTES = 1, KIND_FLOAT = 2, KIND_INT64 = 3 };

typedef struct found {
    int kind; /* KIND_*, 0: not found */
    const uint8_t *data;
    size_t len; /* the list message */
} found;

/* The Feature of each of `n` keys in the Example `rec` (the last entry wins, as in a map).
 * 0 on malformed protobuf. */
static int find_features(const uint8_t *rec, size_t len, const char *const *keys, int n,
                         found *out)
{
    memset(out, 0, (size_t)n * sizeof *out);
    tfc_pb_reader ex = tfc_pb_reader_of(rec, len);
    tfc_pb_field f, g, h;
    while (tfc_pb_next(&ex, &f)) {
        if (f.field != 1 || f.wire != TFC_PB_LEN) continue;
        tfc_pb_reader fs = tfc_pb_reader_of(f.data, f.len);
        while (tfc_pb_next(&fs, &g)) {
            if (g.field != 1 || g.wire != TFC_PB_LEN) continue;
            tfc_pb_reader entry = tfc_pb_reader_of(g.data, g.len);
            const uint8_t *key = NULL, *val = NULL;
            size_t klen = 0, vlen = 0;
            while (tfc_pb_next(&entry, &h)) {
                if (h.wire != TFC_PB_LEN) continue;
                if (h.field == 1) key = h.data, klen = h.len;
                else if (h.field == 2) val = h.data, vlen = h.len;
            }
            if (entry.bad) return 0;
            int which = -1;
            for (int k = 0; k < n && key; k++)
                if (strlen(keys[k]) == klen && !memcmp(keys[k], key, klen)) which = k;
            if (which < 0) continue;
            found fd = {0};
            tfc_pb_reader feat = tfc_pb_reader_of(val, vlen); /* an empty Feature: no kind */
            while (val && tfc_pb_next(&feat, &h))
                if (h.wire == TFC_PB_LEN && h.field >= KIND_BYTES && h.field <= KIND_INT64)
                    fd = (found){h.field, h.data, h.len};
            if (feat.bad) return 0;
            out[which] = fd;
        }
        if (fs.bad) return 0;
    }
    return !ex.bad;
}

/* The values of a FloatList or Int64List (packed and unpacked entries alike) into `dst`
 * (room for `cap`; NULL to count only). Returns the count, or -1 when malformed. */
static int64_t list_values(const found *fd, double *dst, int64_t cap)
{
    tfc_pb_reader r = tfc_pb_reader_of(fd->data, fd->len);
    tfc_pb_field f;
    int64_t n = 0;
    while (tfc_pb_next(&r, &f)) {
        if (f.field != 1) continue;
        if (fd->kind == KIND_FLOAT && f.wire == TFC_PB_LEN) {
            if (f.len % 4) return -1;
            for (size_t k = 0; k < f.len; k += 4, n++) {
                if (!dst || n >= cap) continue;
                uint32_t u = (uint32_t)f.data[k] | (uint32_t)f.data[k + 1] << 8 |
                             (uint32_t)f.data[k + 2] << 16 | (uint32_t)f.data[k + 3] << 24;
                float v;
                memcpy(&v, &u, 4);
                dst[n] = v;
            }
        } else if (fd->kind == KIND_FLOAT && f.wire == TFC_PB_FIXED32) {
            if (dst && n < cap) {
                uint32_t u = (uint32_t)f.v;
                float v;
                memcpy(&v, &u, 4);
                dst[n] = v;
            }
            n++;
        } else if (fd->kind == KIND_INT64 && f.wire == TFC_PB_LEN) {
            tfc_pb_reader p = tfc_pb_reader_of(f.data, f.len);
            uint64_t v;
            while (p.p < p.end) {
                if (!tfc_pb_read_varint(&p, &v)) return -1;
                if (dst && n < cap) dst[n] = (double)(int64_t)v;
                n++;
            }
        } else if (fd->kind == KIND_INT64 && f.wire == TFC_PB_VARINT) {
            if (dst && n < cap) dst[n] = (double)(int64_t)f.v;
            n++;
        } else {
            return -1;
        }
    }
    return r.bad ? -1 : n;
}

/* The single value of a BytesList: 1, or 0 when it holds another number of values. */
static int single_bytes(const found *fd, const uint8_t **data, size_t *len, int64_t *count)
{
    tfc_pb_reader r = tfc_pb_reader_of(fd->data, fd->len);
    tfc_pb_field f;
    *count = 0;
    while (tfc_pb_next(&r, &f))
        if (f.field == 1 && f.wire == TFC_PB_LEN) {
            *data = f.data;
            *len = f.len;
            ++*count;
        }
    return !r.bad && *count == 1;
}

/* ---- the source ----------------------------------------------------------------------------- */

typedef struct tfr_record {
    uint64_t offset; /* of the data in its file's bytes */
    uint32_t len, file;
} tfr_record;

typedef struct tfr_file {
    char *path;
    uint8_t *bytes;
    size_t size;
    int mapped;
    int64_t first; /* index of its first record */
} tfr_file;

typedef struct tfr_source {
    source base;
    tfr_feature feat, lab;
    char *keys[2]; /* owned copies of feat.key and lab.key */
    int has_labels, num_classes;
    tfr_file *files;
    int nfiles;
    tfr_record *rec;
    int64_t n, cap;
    tfc_image_pool *pool;
    tfc_image_limits lim;
} tfr_source;

static void tfr_describe(const source *s, int64_t i, char *buf, size_t size)
{
    const tfr_source *t = (const tfr_source *)s;
    const tfr_file *f = &t->files[t->rec[i].file];
    snprintf(buf, size, "%s record %lld", f->path, (long long)(i - f->first));
}

static tfc_status rec_error(const tfr_source *t, int64_t i, tfc_error *err, const char *fmt,
                            const char *a, const char *b)
{
    char where[4400], what[512];
    tfr_describe(&t->base, i, where, sizeof where);
    snprintf(what, sizeof what, fmt, a, b);
    return tfc_error_set(err, TFC_ERR_DATA, "%s: %s", where, what);
}

/* One feature of record i as a tensor of the declared dtype and shape. */
static tfc_status feature_tensor(const tfr_source *t, int64_t i, const tfr_feature *ft,
                                 const found *fd, tfc_element *e, int comp, tfc_error *err)
{
    if (!fd->kind) return rec_error(t, i, err, "no feature '%s'%s", ft->key, "");
    tfc_dtype dt = (tfc_dtype)ft->dtype;
    tfc_shape shape = {.ndim = ft->shape.n};
    int64_t fixed = 1; /* product of the known dimensions */
    int var = -1;
    for (int d = 0; d < ft->shape.n; d++) {
        shape.dim[d] = ft->shape.v[d];
        if (shape.dim[d] < 0) var = d;
        else fixed *= shape.dim[d];
    }
    if (ft->encoded != TFR_ENCODED_NONE) {
        const uint8_t *b;
        size_t blen;
        int64_t count;
        if (fd->kind != KIND_BYTES || !single_bytes(fd, &b, &blen, &count))
            return rec_error(t, i, err, "feature '%s' must hold one encoded image (a bytes_list "
                             "of one value)%s", ft->key, "");
        int png = tfc_image_is_png(b, blen), jpeg = tfc_image_is_jpeg(b, blen);
        if ((ft->encoded == TFR_ENCODED_PNG && !png) || (ft->encoded == TFR_ENCODED_JPEG && !jpeg))
            return rec_error(t, i, err, "feature '%s' is not a %s image", ft->key,
                             encoded_names[ft->encoded]);
        char name[4400];
        tfr_describe(&t->base, i, name, sizeof name);
        tfc_tensor img;
        int channels = ft->shape.n == 3 && ft->shape.v[2] > 0 ? ft->shape.v[2] : 0;
        tfc_status st = tfc_image_decode_with(t->pool, b, blen, name, channels, &t->lim, &img, err);
        if (st) return st;
        for (int d = 0; d < 3; d++)
            if (ft->shape.v[d] >= 0 && img.shape.dim[d] != ft->shape.v[d]) {
                char want[128], got[128];
                tfc_shape_str(&shape, want, sizeof want);
                tfc_shape_str(&img.shape, got, sizeof got);
                free(img.data);
                return rec_error(t, i, err, "image of shape %s where %s was declared", got, want);
            }
        free(e->comp[comp].data);
        e->comp[comp] = img;
        return TFC_OK;
    }
    int64_t count;
    const uint8_t *raw = NULL;
    size_t rawlen = 0;
    size_t esize = tfc_dtype_size(dt);
    if (fd->kind == KIND_BYTES) { /* the bytes of one value, as tf.io.decode_raw reads them */
        if (!single_bytes(fd, &raw, &rawlen, &count))
            return rec_error(t, i, err, "feature '%s' must hold one value (a bytes_list of "
                             "one string of raw %s values)", ft->key, tfc_data_dtype_names[dt]);
        if (rawlen % esize)
            return rec_error(t, i, err, "feature '%s': its bytes are not a whole number of %s "
                             "values", ft->key, tfc_data_dtype_names[dt]);
        count = (int64_t)(rawlen / esize);
    } else {
        count = list_values(fd, NULL, 0);
        if (count < 0) return rec_error(t, i, err, "feature '%s': malformed %s", ft->key,
                                        kind_names[fd->kind]);
    }
    if (var >= 0) {
        if (fixed == 0 ? count != 0 : count % fixed)
            return rec_error(t, i, err, "feature '%s': its values do not fill the declared "
                             "shape%s", ft->key, "");
        shape.dim[var] = fixed ? count / fixed : 0;
    } else if (count != fixed) {
        char msg[160];
        snprintf(msg, sizeof msg, "feature '%%s' holds %lld values where its shape needs %lld%%s",
                 (long long)count, (long long)fixed);
        return rec_error(t, i, err, msg, ft->key, "");
    }
    void *dst = tfc_elem_alloc_uninit(e, comp, dt, &shape);
    if (!dst && count) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    if (raw) {
        memcpy(dst, raw, rawlen); /* little-endian, as written by tobytes() on every host TF runs */
        return TFC_OK;
    }
    double *vals = malloc((size_t)(count ? count : 1) * sizeof *vals);
    if (!vals) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    list_values(fd, vals, count);
    tfc_values_convert(dst, dt, vals, TFC_F64, count);
    free(vals);
    return TFC_OK;
}

/* The data of record i, its CRC checked. */
static tfc_status record_data(const tfr_source *t, int64_t i, const uint8_t **data,
                              tfc_error *err)
{
    const tfr_record *r = &t->rec[i];
    const uint8_t *d = t->files[r->file].bytes + r->offset;
    if (!tfc_tfrecord_check_footer(d, r->len, d + r->len))
        return rec_error(t, i, err, "data CRC mismatch (the record is corrupted)%s%s", "", "");
    *data = d;
    return TFC_OK;
}

static tfc_status tfr_get(source *s, int64_t i, tfc_element *e, tfc_error *err)
{
    const tfr_source *t = (const tfr_source *)s;
    const uint8_t *d = NULL;
    tfc_status st = record_data(t, i, &d, err);
    if (st) return st;
    const char *keys[2] = {t->feat.key, t->lab.key};
    found fd[2];
    if (!find_features(d, t->rec[i].len, keys, t->has_labels ? 2 : 1, fd))
        return rec_error(t, i, err, "not a tf.train.Example (malformed protobuf)%s%s", "", "");
    st = feature_tensor(t, i, &t->feat, &fd[0], e, TFC_COMP_FEATURES, err);
    if (!st && t->has_labels) st = feature_tensor(t, i, &t->lab, &fd[1], e, TFC_COMP_LABELS, err);
    int64_t bad;
    if (!st && !tfc_data_labels_in_range(&e->comp[TFC_COMP_LABELS], t->num_classes, &bad)) {
        char msg[160];
        snprintf(msg, sizeof msg, "label %lld outside [0, %d) (num_classes)%%s%%s",
                 (long long)bad, t->num_classes);
        st = rec_error(t, i, err, msg, "", "");
    }
    return st;
}

static int64_t tfr_label(const source *s, int64_t i)
{
    const tfr_source *t = (const tfr_source *)s;
    const tfr_record *r = &t->rec[i];
    const char *keys[1] = {t->lab.key};
    found fd;
    double v;
    if (!find_features(t->files[r->file].bytes + r->offset, r->len, keys, 1, &fd) ||
        fd.kind != KIND_INT64 || list_values(&fd, &v, 1) != 1)
        return -1;
    return v >= 0 && v < 2147483648.0 ? (int64_t)v : -1;
}

static void tfr_free(source *s)
{
    tfr_source *t = (tfr_source *)s;
    for (int f = 0; f < t->nfiles; f++) {
        if (t->files[f].mapped) munmap(t->files[f].bytes, t->files[f].size);
        else free(t->files[f].bytes);
        free(t->files[f].path);
    }
    free(t->files);
    free(t->rec);
    free(t->keys[0]);
    free(t->keys[1]);
    tfc_image_pool_free(t->pool);
    free(t);
}

static const source_ops tfr_ops = {
    .type = "tfrecord",
    .get = tfr_get,
    .describe = tfr_describe,
    .free = tfr_free,
};

static const source_ops tfr_ops_labelled = {
    .type = "tfrecord",
    .get = tfr_get,
    .describe = tfr_describe,
    .label = tfr_label,
    .free = tfr_free,
};

/* The framing of file f into the index. A broken frame cannot be stepped over (the next
 * record's place is unknown): with on_error skip the rest of the file is left out and
 * counted as one skipped record, else it is an error. */
static tfc_status index_file(tfr_source *t, int f, int skip, tfc_error *err)
{
    tfr_file *file = &t->files[f];
    file->first = t->n;
    size_t pos = 0;
    while (pos < file->size) {
        size_t left = file->size - pos;
        uint64_t len = 0;
        const char *why = NULL;
        if (left < TFC_TFRECORD_HEADER) why = "truncated record header";
        else if (!tfc_tfrecord_read_header(file->bytes + pos, &len))
            why = "corrupted length (CRC mismatch): not a TFRecord file, or compressed (set "
                  "compression)";
        else if (len > TFR_MAX_RECORD) why = "record longer than 1 GiB";
        else if (len + TFC_TFRECORD_HEADER + TFC_TFRECORD_FOOTER > left) why = "truncated record";
        if (why) {
            if (skip) {
                char where[300];
                snprintf(where, sizeof where, "%s record %lld", file->path,
                         (long long)(t->n - file->first));
                tfc_source_name_skip(&t->base, where);
                t->base.skipped++;
                return TFC_OK;
            }
            return tfc_error_set(err, TFC_ERR_DATA, "%s record %lld (byte %zu): %s", file->path,
                                 (long long)(t->n - file->first), pos, why);
        }
        if (t->n == t->cap) {
            int64_t cap = t->cap ? 2 * t->cap : 1024;
            tfr_record *r = realloc(t->rec, (size_t)cap * sizeof *r);
            if (!r) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
            t->rec = r;
            t->cap = cap;
        }
        t->rec[t->n++] = (tfr_record){pos + TFC_TFRECORD_HEADER, (uint32_t)len, (uint32_t)f};
        pos += TFC_TFRECORD_HEADER + len + TFC_TFRECORD_FOOTER;
    }
    return TFC_OK;
}

/* The bytes of a file: mapped; with gzip compression a gzip file is inflated (its CRC-32 and
 * length checked) and a plain one kept as it is, as zlib's gzread passes it through. */
static tfc_status load_file(tfr_file *file, int compression, tfc_error *err)
{
    int fd = open(file->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tfc_error_set(err, tfc_open_status(errno), "cannot open %s: %s",
                                     file->path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        close(fd);
        return tfc_error_set(err, TFC_ERR_USAGE, "%s: not a regular file", file->path);
    }
    file->size = (size_t)sb.st_size;
    if (file->size) {
        void *m = mmap(NULL, file->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            close(fd);
            return tfc_error_set(err, TFC_ERR_IO, "cannot map %s: %s", file->path,
                                 strerror(errno));
        }
        file->bytes = m;
        file->mapped = 1;
    }
    close(fd);
    if (compression != TFR_COMPRESSION_GZIP || !tfc_is_gzip(file->bytes, file->size))
        return TFC_OK;
    unsigned char *plain;
    size_t plen;
    tfc_status st = tfc_gunzip(file->bytes, file->size, file->path, TFR_MAX_INFLATED, &plain,
                               &plen, err);
    munmap(file->bytes, file->size);
    file->bytes = st ? NULL : plain;
    file->size = st ? 0 : plen;
    file->mapped = 0;
    return st;
}

static tfc_component_spec spec_of(const tfr_feature *ft)
{
    tfc_component_spec c = {1, (tfc_dtype)ft->dtype, {.ndim = ft->shape.n}};
    for (int d = 0; d < ft->shape.n; d++) c.shape.dim[d] = ft->shape.v[d];
    return c;
}

/* A source over the files (or, with `mem`, over one buffer named paths[0]). */
static tfc_status tfr_new(source **out, const tfrecord_args *a, char **paths, int npaths,
                          const void *mem, size_t memlen, int num_classes, tfc_error *err)
{
    *out = NULL;
    tfr_source *t = calloc(1, sizeof *t);
    if (!t) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    t->base.ops = &tfr_ops;
    t->base.get_may_fail = 1;
    t->base.skip_errors = a->on_error == ON_ERROR_SKIP;
    t->feat = a->feat;
    t->lab = a->lab;
    t->has_labels = a->has_labels;
    /* the keys point into the configuration, which is freed once the pipeline is built */
    t->feat.key = t->keys[0] = strdup(a->feat.key);
    t->lab.key = t->keys[1] = strdup(a->has_labels ? a->lab.key : "");
    t->num_classes = t->has_labels && tfc_dtype_is_int((tfc_dtype)a->lab.dtype) ? num_classes : 0;
    t->lim = (tfc_image_limits){.max_side = 16384, .max_pixels = (int64_t)1 << 28};
    t->files = calloc((size_t)npaths, sizeof *t->files);
    tfc_status st = t->files && t->keys[0] && t->keys[1]
                        ? TFC_OK : tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    if (!st && a->feat.encoded != TFR_ENCODED_NONE && !(t->pool = tfc_image_pool_new()))
        st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    for (int f = 0; f < npaths && !st; f++) {
        tfr_file *file = &t->files[f];
        t->nfiles = f + 1;
        if (!(file->path = strdup(paths[f]))) {
            st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        } else if (mem) {
            file->bytes = malloc(memlen ? memlen : 1);
            if (!file->bytes) st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
            else if (memlen) memcpy(file->bytes, mem, memlen);
            file->size = memlen;
        } else {
            st = load_file(file, a->compression, err);
        }
        if (!st) st = index_file(t, f, t->base.skip_errors, err);
    }
    if (!st && t->n == 0)
        st = tfc_error_set(err, TFC_ERR_DATA, "%s%s: no records", paths[0],
                           npaths > 1 ? " and the other files" : "");
    /* integer scalar labels can be read alone (stratified splits, class weights) */
    if (t->has_labels && t->lab.shape.n == 0 && tfc_dtype_is_int((tfc_dtype)t->lab.dtype))
        t->base.ops = &tfr_ops_labelled;
    if (st) {
        tfc_source_free(&t->base);
        return st;
    }
    t->base.count = t->n;
    t->base.spec.comp[TFC_COMP_FEATURES] = spec_of(&t->feat);
    if (t->has_labels) t->base.spec.comp[TFC_COMP_LABELS] = spec_of(&t->lab);
    *out = &t->base;
    return TFC_OK;
}

tfc_status tfc_source_tfrecord_mem(source **out, const tfrecord_args *a, const void *data,
                                   size_t len, const char *name, tfc_error *err)
{
    char *paths[1] = {(char *)name};
    return tfr_new(out, a, paths, 1, data ? data : "", len, a->num_classes, err);
}

/* ---- the writer ------------------------------------------------------------------------------ */

struct tfc_tfrecord_writer {
    gzFile gz; /* "wbT" (no compression) or "wb" (gzip): one code path */
    char *path;
    int failed;
};

tfc_tfrecord_writer *tfc_tfrecord_writer_open(const char *path, int gzip, tfc_error *err)
{
    tfc_tfrecord_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        return NULL;
    }
    errno = 0;
    w->gz = gzopen(path, gzip ? "wb" : "wbT");
    if (!w->gz) {
        tfc_error_set(err, TFC_ERR_IO, "cannot create %s: %s", path,
                      errno ? strerror(errno) : "out of memory");
        free(w->path);
        free(w);
        return NULL;
    }
    return w;
}

/* One tensor as a Feature message. */
static void encode_feature(tfc_pb *feat, const tfc_tensor *t)
{
    int64_t n = t->data ? tfc_shape_numel(&t->shape) : 0;
    tfc_pb list = {0};
    if (t->dtype == TFC_U8 || t->dtype == TFC_I8) {
        tfc_pb_bytes(&list, 1, t->data ? t->data : "", (size_t)n);
        tfc_pb_message(feat, KIND_BYTES, &list);
    } else if (tfc_dtype_is_int(t->dtype) || t->dtype == TFC_BOOL) {
        tfc_pb packed = {0}; /* packed, as TensorFlow writes repeated scalars */
        for (int64_t i = 0; i < n; i++)
            tfc_pb_varint(&packed, (uint64_t)(int64_t)tfc_value_get(t->data, t->dtype, i));
        tfc_pb_message(&list, 1, &packed);
        tfc_pb_free(&packed);
        tfc_pb_message(feat, KIND_INT64, &list);
    } else {
        tfc_pb packed = {0};
        for (int64_t i = 0; i < n; i++) {
            float v = (float)tfc_value_get(t->data, t->dtype, i);
            uint32_t u;
            memcpy(&u, &v, 4);
            uint8_t le[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
            tfc_pb_raw(&packed, le, 4);
        }
        tfc_pb_message(&list, 1, &packed);
        tfc_pb_free(&packed);
        tfc_pb_message(feat, KIND_FLOAT, &list);
    }
    tfc_pb_free(&list);
}

tfc_status tfc_tfrecord_write(tfc_tfrecord_writer *w, int n, const char *const *keys,
                              const tfc_tensor *values, tfc_error *err)
{
    tfc_pb features = {0}, example = {0};
    for (int i = 0; i < n; i++) {
        tfc_pb entry = {0}, feat = {0};
        encode_feature(&feat, &values[i]);
        tfc_pb_string(&entry, 1, keys[i]);
        tfc_pb_message(&entry, 2, &feat);
        tfc_pb_message(&features, 1, &entry);
        tfc_pb_free(&entry);
        tfc_pb_free(&feat);
    }
    tfc_pb_message(&example, 1, &features);
    tfc_pb_free(&features);
    if (example.failed) {
        tfc_pb_free(&example);
        return tfc_error_set(err, TFC_ERR_NOMEM, "%s: out of memory", w->path);
    }
    uint8_t head[TFC_TFRECORD_HEADER], foot[TFC_TFRECORD_FOOTER];
    tfc_tfrecord_header(head, example.len);
    tfc_tfrecord_footer(foot, example.data, example.len);
    int ok = gzwrite(w->gz, head, sizeof head) == (int)sizeof head &&
             gzwrite(w->gz, example.data, (unsigned)example.len) == (int)example.len &&
             gzwrite(w->gz, foot, sizeof foot) == (int)sizeof foot;
    tfc_pb_free(&example);
    if (!ok) {
        int zerr;
        w->failed = 1;
        return tfc_error_set(err, TFC_ERR_IO, "cannot write %s: %s", w->path,
                             gzerror(w->gz, &zerr));
    }
    return TFC_OK;
}

tfc_status tfc_tfrecord_writer_close(tfc_tfrecord_writer *w, tfc_error *err)
{
    if (!w) return TFC_OK;
    errno = 0;
    int r = gzclose(w->gz);
    tfc_status st = TFC_OK;
    if (r != Z_OK && !w->failed)
        st = tfc_error_set(err, TFC_ERR_IO, "cannot write %s: %s", w->path,
                           errno ? strerror(errno) : "write failed");
    free(w->path);
    free(w);
    return st;
}

/* ---- the configuration -------------------------------------------------------------------- */

static const tfc_field feature_fields[] = {
    {"key", TFC_F_STRING, offsetof(tfr_feature, key), NULL, TFC_UNBOUNDED, NULL,
     "the feature's name in each tf.train.Example"},
    {"dtype", TFC_F_ENUM, offsetof(tfr_feature, dtype), "float32", TFC_UNBOUNDED,
     tfc_data_dtype_names, "the component's dtype: a float_list or int64_list is converted "
     "to it, a bytes_list holds its raw little-endian values (tf.io.decode_raw)"},
    {"shape", TFC_F_INT_LIST, offsetof(tfr_feature, shape), NULL, -1, 1e9, NULL,
     "the shape of one element ([] for a scalar); one dimension may be -1 (variable)"},
    {"encoded", TFC_F_ENUM, offsetof(tfr_feature, encoded), "none", TFC_UNBOUNDED,
     encoded_names, "png or jpeg: the bytes_list holds one encoded image, decoded to uint8 "
     "[height, width, channels] (-1: any)"},
    {NULL},
};

static const tfc_field label_fields[] = {
    {"key", TFC_F_STRING, offsetof(tfr_feature, key), NULL, TFC_UNBOUNDED, NULL,
     "the label's name in each tf.train.Example"},
    {"dtype", TFC_F_ENUM, offsetof(tfr_feature, dtype), "int32", TFC_UNBOUNDED,
     tfc_data_dtype_names, "the labels' dtype (an int64_list converts to int32 class ids)"},
    {"shape", TFC_F_INT_LIST, offsetof(tfr_feature, shape), TFC_NO_DEFAULT, -1, 1e9, NULL,
     "the shape of one label ([]: a scalar)"},
    {NULL},
};

static const tfc_field tfrecord_fields[] = {
    SOURCE_TYPE_FIELD(tfrecord_args),
    {"files", TFC_F_NODE, offsetof(tfrecord_args, files), NULL, TFC_UNBOUNDED, NULL,
     "a path or list of paths; glob patterns are expanded (sorted)"},
    {"compression", TFC_F_ENUM, offsetof(tfrecord_args, compression), "none", TFC_UNBOUNDED,
     compression_names, "none or gzip (TFRecordOptions' compression_type GZIP)"},
    {"features", TFC_F_NODE, offsetof(tfrecord_args, features), NULL, TFC_UNBOUNDED, NULL,
     "{key, dtype, shape, encoded}: the feature read as the element's features"},
    {"labels", TFC_F_NODE, offsetof(tfrecord_args, labels), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "{key, dtype, shape}: the feature read as its labels (absent: none)"},
    SOURCE_NUM_CLASSES_FIELD(tfrecord_args),
    SOURCE_ON_ERROR_FIELD(tfrecord_args),
    {NULL},
};

static tfc_status check_feature(const tfc_field *fields, const tfc_node *n, const char *key,
                                tfr_feature *ft, int image_ok, tfc_error *err)
{
    if (n->kind != TFC_NODE_MAP)
        return tfc_node_error(err, TFC_ERR_CONFIG, n, key, "expected a mapping {key, dtype, "
                              "shape}");
    if (tfc_schema_apply(fields, n, key, ft, err)) return TFC_ERR_CONFIG;
    int var = 0;
    for (int d = 0; d < ft->shape.n; d++) var += ft->shape.v[d] < 0;
    if (!image_ok || ft->encoded == TFR_ENCODED_NONE) {
        if (var > 1)
            return tfc_node_error(err, TFC_ERR_CONFIG, n, key, "shape: at most one dimension "
                                  "may be -1");
        if (ft->dtype == TFC_BOOL || ft->dtype == TFC_F16 || ft->dtype == TFC_BF16)
            return tfc_node_error(err, TFC_ERR_CONFIG, n, key, "dtype %s cannot be read from "
                                  "a record", tfc_data_dtype_names[ft->dtype]);
        return TFC_OK;
    }
    if (ft->shape.n != 3 || ft->dtype != TFC_U8 || ft->shape.v[2] == 0 || ft->shape.v[2] > 4)
        return tfc_node_error(err, TFC_ERR_CONFIG, n, key, "an encoded image is uint8 of shape "
                              "[height, width, channels] (channels 1-4; -1: any)");
    return TFC_OK;
}

static tfc_status tfrecord_check(void *args, const tfc_node *at, const char *key,
                                 tfc_error *err)
{
    tfrecord_args *a = args;
    char k[352];
    snprintf(k, sizeof k, "%s.files", key);
    tfc_status st = tfc_data_check_files(a->files, k, err);
    snprintf(k, sizeof k, "%s.features", key);
    if (check_feature(feature_fields, a->features, k, &a->feat, 1, err)) st = TFC_ERR_CONFIG;
    a->has_labels = a->labels && !tfc_node_is_null(a->labels);
    snprintf(k, sizeof k, "%s.labels", key);
    if (a->has_labels && check_feature(label_fields, a->labels, k, &a->lab, 0, err))
        st = TFC_ERR_CONFIG;
    if (!st && a->has_labels && !strcmp(a->feat.key, a->lab.key))
        st = tfc_node_error(err, TFC_ERR_CONFIG, a->labels, k, "features and labels both read "
                            "'%s'", a->lab.key);
    return st;
}

static tfc_status tfrecord_open(const void *args, const tfc_data_options *opt, const char *key,
                                source **out, tfc_error *err)
{
    const tfrecord_args *a = args;
    tfc_path_list pl = {0};
    char fkey[352];
    snprintf(fkey, sizeof fkey, "%s.files", key);
    *out = NULL;
    tfc_status st = tfc_data_expand_files(a->files, NULL, opt, fkey, &pl, err);
    int classes = opt && opt->num_classes > 0 ? opt->num_classes : a->num_classes;
    if (!st) st = tfr_new(out, a, pl.v, pl.n, NULL, 0, classes, err);
    tfc_path_list_free(&pl);
    return st;
}

const source_def tfc_source_tfrecord = {
    .name = "tfrecord",
    .help = "tf.train.Example records of TFRecord files (TensorFlow's own format)",
    .fields = tfrecord_fields,
    .args_size = sizeof(tfrecord_args),
    .check = tfrecord_check,
    .open = tfrecord_open,
};
