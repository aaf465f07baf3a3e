/* Safetensors reader and writer (see safetensors.h). The JSON header is parsed and printed
 * by jansson (duplicates rejected by the parser); this file only checks the format's rules
 * on the parsed tree: each tensor's dtype, shape and offsets, then that the tensors tile the
 * data section exactly (sorted by offset: no hole, no overlap, nothing after the last). */
#include "core/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; tfc reads it in place and needs a little-endian host"
#endif

struct tfc_st_file {
    char *owned;                   /* the data section read by tfc_st_open; NULL after parse */
    size_t data_size;
    int count;
    tfc_st_tensor *tensors;        /* header order */
    const tfc_st_tensor **by_name; /* sorted by name for tfc_st_find */
    int nmeta;
    char **meta_key, **meta_val;
};

/* ---- messages ---------------------------------------------------------------------------- */

/* A name from an untrusted header made safe to print: control bytes become '?', and long
 * names are cut (at a UTF-8 character boundary) with "...". */
static const char *shown(const char *s, char *out, size_t size)
{
    size_t n = 0, limit = size - 4;
    for (; *s && n < limit; s++) {
        unsigned char c = (unsigned char)*s;
        out[n++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    if (*s) {
        /* When the cut falls inside a UTF-8 sequence, drop its lead and continuation bytes. */
        if (((unsigned char)*s & 0xc0) == 0x80) {
            while (n > 0 && ((unsigned char)out[n - 1] & 0xc0) == 0x80) n--;
            if (n > 0 && (unsigned char)out[n - 1] >= 0xc0) n--;
        }
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = 0;
    return out;
}

/* A shape as the JSON header spells it: "[5, 6]", "[]" for a scalar. */
static const char *dims_str(const tfc_shape *s, char *out, size_t size)
{
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i <= s->ndim && used < size; i++) {
        int n = i == s->ndim ? snprintf(out + used, size - used, "]")
                             : snprintf(out + used, size - used, "%s%lld", i ? ", " : "[",
                                        (long long)s->dim[i]);
        used = n < 0 ? size : used + (size_t)n;
    }
    if (s->ndim == 0) snprintf(out, size, "[]");
    return out;
}

static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Every format error names the file; tensor errors start with "tensor 'NAME': ". */
#define FORMAT_ERROR(err, file, ...) \
    tfc_error_at((err), TFC_ERR_FORMAT, (file), 0, 0, NULL, NULL, __VA_ARGS__)
/* A file that is no safetensors file at all (a YAML or .npy given as weights): the user named
 * a file of the wrong kind, a usage error (SPEC §3, exit 2), not a damaged one. */
#define WRONG_KIND(err, file, ...) \
    tfc_error_at((err), TFC_ERR_USAGE, (file), 0, 0, NULL, NULL, __VA_ARGS__)

/* ---- reading ----------------------------------------------------------------------------- */

void tfc_st_close(tfc_st_file *f)
{
    if (!f) return;
    for (int i = 0; i < f->count; i++) free((char *)f->tensors[i].name);
    for (int i = 0; i < f->nmeta; i++) {
        free(f->meta_key[i]);
        free(f->meta_val[i]);
    }
    free(f->tensors);
    free(f->by_name);
    free(f->meta_key);
    free(f->meta_val);
    free(f->owned);
    free(f);
}

/* Reads shape or data_offsets entries: a JSON integer >= 0. */
static int get_nonneg(const json_t *v, int64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0) return 0;
    *out = (int64_t)json_integer_value(v);
    return 1;
}

static tfc_status parse_meta(tfc_st_file *f, const json_t *meta, const char *file,
                             tfc_error *err)
{
    char sk[128];
    if (json_is_null(meta)) return TFC_OK; /* the reference implementation accepts null */
    if (!json_is_object(meta))
        return FORMAT_ERROR(err, file, "__metadata__ must be an object of string values, found %s",
                            json_kind(meta));
    size_t n = json_object_size(meta);
    f->meta_key = calloc(n ? n : 1, sizeof *f->meta_key);
    f->meta_val = calloc(n ? n : 1, sizeof *f->meta_val);
    if (!f->meta_key || !f->meta_val)
        return tfc_error_set(err, TFC_ERR_NOMEM, "cannot allocate %zu metadata entries", n);
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)meta, key, val) {
        if (!json_is_string(val))
            return FORMAT_ERROR(err, file, "__metadata__ '%s': value must be a string, found %s",
                                shown(key, sk, sizeof sk), json_kind(val));
        f->meta_key[f->nmeta] = strdup(key);
        f->meta_val[f->nmeta] = strdup(json_string_value(val));
        f->nmeta++;
        if (!f->meta_key[f->nmeta - 1] || !f->meta_val[f->nmeta - 1])
            return tfc_error_set(err, TFC_ERR_NOMEM, "cannot copy the metadata");
    }
    return TFC_OK;
}

/* Checks one header entry and fills `t` (all but `data`). `data_len` is the size of the data
 * section, which every tensor must fit in. */
static tfc_status parse_tensor(tfc_st_tensor *t, const char *name, const json_t *v,
                               uint64_t data_len, const char *file, tfc_error *err)
{
    char sn[128], sk[128], ds[160];
    shown(name, sn, sizeof sn);
    if (!*name) return FORMAT_ERROR(err, file, "a tensor has an empty name");
    if (!json_is_object(v))
        return FORMAT_ERROR(err, file,
                            "tensor '%s': expected an object with dtype, shape and data_offsets, "
                            "found %s", sn, json_kind(v));
    const char *key;
    json_t *field;
    json_object_foreach((json_t *)v, key, field) {
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
            return FORMAT_ERROR(err, file,
                                "tensor '%s': unexpected key '%s' (expected dtype, shape, "
                                "data_offsets)", sn, shown(key, sk, sizeof sk));
    }
    static const char *const required[] = {"dtype", "shape", "data_offsets"};
    for (int i = 0; i < 3; i++)
        if (!json_object_get(v, required[i]))
            return FORMAT_ERROR(err, file, "tensor '%s': missing '%s'", sn, required[i]);

    const json_t *jd = json_object_get(v, "dtype");
    int dt = json_is_string(jd) ? tfc_dtype_from_name(json_string_value(jd)) : -1;
    if (dt < 0) {
        const char *names[TFC_DTYPE_COUNT + 1];
        char known[160];
        for (int i = 0; i < TFC_DTYPE_COUNT; i++) names[i] = tfc_dtype_name((tfc_dtype)i);
        names[TFC_DTYPE_COUNT] = NULL;
        tfc_join_names(known, sizeof known, names);
        if (!json_is_string(jd))
            return FORMAT_ERROR(err, file, "tensor '%s': dtype must be a string, found %s", sn,
                                json_kind(jd));
        return FORMAT_ERROR(err, file, "tensor '%s': unknown or unsupported dtype '%s' (known: %s)",
                            sn, shown(json_string_value(jd), sk, sizeof sk), known);
    }
    t->dtype = (tfc_dtype)dt;

    const json_t *js = json_object_get(v, "shape");
    if (!json_is_array(js))
        return FORMAT_ERROR(err, file, "tensor '%s': shape must be an array of non-negative "
                            "integers, found %s", sn, json_kind(js));
    size_t ndim = json_array_size(js);
    if (ndim > TFC_MAX_DIMS)
        return FORMAT_ERROR(err, file, "tensor '%s': shape has %zu dimensions, tfc supports at "
                            "most %d", sn, ndim, TFC_MAX_DIMS);
    t->shape.ndim = (int)ndim;
    for (size_t i = 0; i < ndim; i++) {
        const json_t *d = json_array_get(js, i);
        if (!get_nonneg(d, &t->shape.dim[i])) {
            if (json_is_integer(d))
                return FORMAT_ERROR(err, file, "tensor '%s': shape[%zu] is %lld, expected a "
                                    "non-negative integer", sn, i,
                                    (long long)json_integer_value(d));
            return FORMAT_ERROR(err, file, "tensor '%s': shape[%zu] is %s, expected a "
                                "non-negative integer", sn, i, json_kind(d));
        }
    }
    /* numel and bytes in 64 bits, each step checked, before any comparison uses them. */
    t->numel = tfc_shape_numel(&t->shape);
    uint64_t esize = tfc_dtype_size(t->dtype);
    if (t->numel < 0 || (uint64_t)t->numel > UINT64_MAX / esize ||
        (uint64_t)t->numel * esize > (uint64_t)INT64_MAX)
        return FORMAT_ERROR(err, file, "tensor '%s': %s %s is too large: its size overflows "
                            "64 bits", sn, tfc_dtype_name(t->dtype),
                            dims_str(&t->shape, ds, sizeof ds));
    uint64_t need = (uint64_t)t->numel * esize;

    const json_t *jo = json_object_get(v, "data_offsets");
    int64_t begin, end;
    if (!json_is_array(jo) || json_array_size(jo) != 2 ||
        !get_nonneg(json_array_get(jo, 0), &begin) || !get_nonneg(json_array_get(jo, 1), &end))
        return FORMAT_ERROR(err, file, "tensor '%s': data_offsets must be [begin, end], two "
                            "non-negative integers", sn);
    if (begin > end)
        return FORMAT_ERROR(err, file, "tensor '%s': data_offsets [%lld, %lld] end before they "
                            "begin", sn, (long long)begin, (long long)end);
    if ((uint64_t)end > data_len)
        return FORMAT_ERROR(err, file, "tensor '%s': data_offsets [%lld, %lld] lie outside the "
                            "%llu-byte data section", sn, (long long)begin, (long long)end,
                            (unsigned long long)data_len);
    if ((uint64_t)(end - begin) != need)
        return FORMAT_ERROR(err, file, "tensor '%s': data_offsets [%lld, %lld] hold %lld bytes "
                            "but %s %s needs %llu", sn, (long long)begin, (long long)end,
                            (long long)(end - begin), tfc_dtype_name(t->dtype),
                            dims_str(&t->shape, ds, sizeof ds), (unsigned long long)need);
    t->offset = (size_t)begin; /* end <= data_len, which fits in size_t */
    t->nbytes = (size_t)need;
    return TFC_OK;
}

static int by_offset(const void *a, const void *b)
{
    const tfc_st_tensor *x = *(const tfc_st_tensor *const *)a, *y = *(const tfc_st_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return x < y ? -1 : x > y; /* header order breaks ties: deterministic messages */
}

static int by_name(const void *a, const void *b)
{
    return strcmp((*(const tfc_st_tensor *const *)a)->name, (*(const tfc_st_tensor *const *)b)->name);
}

/* The tensors, sorted by offset, must tile [0, data_len) exactly. Fills f->by_name. */
static tfc_status check_layout(tfc_st_file *f, uint64_t data_len, const char *file,
                               tfc_error *err)
{
    char sa[128], sb[128];
    size_t n = (size_t)f->count;
    f->by_name = malloc((n ? n : 1) * sizeof *f->by_name);
    if (!f->by_name) return tfc_error_set(err, TFC_ERR_NOMEM, "cannot allocate %zu tensors", n);
    for (size_t i = 0; i < n; i++) f->by_name[i] = &f->tensors[i];
    qsort(f->by_name, n, sizeof *f->by_name, by_offset);
    uint64_t covered = 0;
    const tfc_st_tensor *prev = NULL;
    for (size_t i = 0; i < n; i++) {
        const tfc_st_tensor *t = f->by_name[i];
        if (t->offset > covered)
            return FORMAT_ERROR(err, file, "bytes [%llu, %llu) of the data section belong to no "
                                "tensor (a hole before tensor '%s')", (unsigned long long)covered,
                                (unsigned long long)t->offset, shown(t->name, sa, sizeof sa));
        if (t->offset < covered)
            return FORMAT_ERROR(err, file, "tensors '%s' [%zu, %zu] and '%s' [%zu, %zu] overlap",
                                shown(prev->name, sa, sizeof sa), prev->offset,
                                prev->offset + prev->nbytes, shown(t->name, sb, sizeof sb),
                                t->offset, t->offset + t->nbytes);
        covered = t->offset + t->nbytes;
        prev = t;
    }
    if (covered != data_len) {
        if (prev)
            return FORMAT_ERROR(err, file, "%llu trailing bytes after the last tensor '%s': the "
                                "tensors cover %llu of the %llu bytes after the header",
                                (unsigned long long)(data_len - covered),
                                shown(prev->name, sa, sizeof sa), (unsigned long long)covered,
                                (unsigned long long)data_len);
        return FORMAT_ERROR(err, file, "%llu trailing bytes after a header that lists no tensor",
                            (unsigned long long)data_len);
    }
    qsort(f->by_name, n, sizeof *f->by_name, by_name);
    f->data_size = (size_t)data_len;
    return TFC_OK;
}

/* Parses and checks the JSON header (hlen bytes at hdr) for a data section of data_len
 * bytes. The returned file has every field but the tensors' data pointers. */
static tfc_st_file *parse_header(const char *hdr, size_t hlen, uint64_t data_len,
                                 const char *file, tfc_error *err)
{
    /* The reference implementation's rule; it also makes jansson's result an object. */
    if (hlen == 0 || hdr[0] != '{') {
        WRONG_KIND(err, file, "the header is not a JSON object: it does not start with '{' "
                   "(not a safetensors file?)");
        return NULL;
    }
    /* jansson's tree costs a small multiple of the header's size, which check_prefix has
     * bounded by the file's real size and TFC_ST_MAX_HEADER. */
    json_error_t jerr;
    json_t *root = json_loadb(hdr, hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        char text[sizeof jerr.text + 8];
        shown(jerr.text, text, sizeof text);
        if (json_error_code(&jerr) == json_error_duplicate_key)
            FORMAT_ERROR(err, file, "the header repeats a name (near byte %d): %s",
                         8 + jerr.position, text);
        else
            FORMAT_ERROR(err, file, "the header is not valid JSON (near byte %d): %s",
                         8 + jerr.position, text);
        return NULL;
    }
    tfc_st_file *f = calloc(1, sizeof *f);
    if (!f) {
        json_decref(root);
        tfc_error_set(err, TFC_ERR_NOMEM, "cannot allocate a safetensors file");
        return NULL;
    }
    tfc_status st = TFC_OK;
    size_t n = json_object_size(root);
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    if (!f->tensors) {
        st = tfc_error_set(err, TFC_ERR_NOMEM, "cannot allocate %zu tensors", n);
        goto done;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            st = parse_meta(f, val, file, err);
        } else {
            tfc_st_tensor *t = &f->tensors[f->count];
            st = parse_tensor(t, key, val, data_len, file, err);
            if (st == TFC_OK) {
                t->name = strdup(key);
                if (!t->name) st = tfc_error_set(err, TFC_ERR_NOMEM, "cannot copy a tensor name");
                else f->count++;
            }
        }
        if (st != TFC_OK) goto done;
    }
    st = check_layout(f, data_len, file, err);
done:
    json_decref(root);
    if (st != TFC_OK) {
        tfc_st_close(f);
        return NULL;
    }
    return f;
}

static void attach_data(tfc_st_file *f, const char *data)
{
    for (int i = 0; i < f->count; i++) f->tensors[i].data = data + f->tensors[i].offset;
}

static uint64_t read_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* Checks the 8-byte length prefix of a file of `size` bytes; returns the header length or
 * reports an error and returns UINT64_MAX. */
static uint64_t check_prefix(const unsigned char *prefix, uint64_t size, const char *file,
                             tfc_error *err)
{
    if (size < 8) {
        FORMAT_ERROR(err, file, "the file is %llu bytes, too short for the 8-byte header length "
                     "(not a safetensors file?)", (unsigned long long)size);
        return UINT64_MAX;
    }
    uint64_t hlen = read_le64(prefix);
    if (hlen > TFC_ST_MAX_HEADER) {
        WRONG_KIND(err, file, "the header length %llu is more than the %u-byte limit "
                   "(not a safetensors file?)", (unsigned long long)hlen, TFC_ST_MAX_HEADER);
        return UINT64_MAX;
    }
    if (hlen > size - 8) {
        FORMAT_ERROR(err, file, "the header length %llu is more than the %llu bytes that follow "
                     "it (truncated file?)", (unsigned long long)hlen,
                     (unsigned long long)(size - 8));
        return UINT64_MAX;
    }
    return hlen;
}

tfc_st_file *tfc_st_parse(const void *buf, size_t len, const char *name, tfc_error *err)
{
    const char *p = buf;
    if (!name) name = "<memory>";
    uint64_t hlen = check_prefix((const unsigned char *)p, len, name, err);
    if (hlen == UINT64_MAX) return NULL;
    tfc_st_file *f = parse_header(p + 8, (size_t)hlen, len - 8 - hlen, name, err);
    if (f) attach_data(f, p + 8 + hlen);
    return f;
}

static int pread_full(int fd, void *buf, size_t n, off_t off)
{
    char *p = buf;
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t got = pread(fd, p, chunk, off);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return -1;
        if (got == 0) {
            errno = 0; /* end of file: the file shrank while being read */
            return -1;
        }
        p += got;
        off += got;
        n -= (size_t)got;
    }
    return 0;
}

static tfc_st_file *open_fail(int fd, void *mem, const char *path, const char *what, int e,
                              tfc_error *err)
{
    free(mem);
    close(fd);
    tfc_error_at(err, tfc_open_status(e), path, 0, 0, NULL, NULL, "%s: %s", what,
                 e ? strerror(e) : "unexpected end of file (was it changed while being read?)");
    return NULL;
}

tfc_st_file *tfc_st_open(const char *path, tfc_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        tfc_error_at(err, tfc_open_status(errno), path, 0, 0, NULL, NULL, "cannot open: %s",
                     strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) return open_fail(fd, NULL, path, "cannot stat", errno, err);
    if (S_ISDIR(st.st_mode)) {
        open_fail(fd, NULL, path, "cannot read", EISDIR, err);
        tfc_error_hint(err, "give a .safetensors file, such as a run's final.safetensors, "
                            "best.safetensors or snapshots/NAME_iter_N.safetensors");
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) return open_fail(fd, NULL, path, "cannot read", EINVAL, err);
    uint64_t size = (uint64_t)st.st_size;
    unsigned char prefix[8] = {0};
    if (size >= 8 && pread_full(fd, prefix, 8, 0) != 0)
        return open_fail(fd, NULL, path, "cannot read the header length", errno, err);
    uint64_t hlen = check_prefix(prefix, size, path, err);
    if (hlen == UINT64_MAX) {
        close(fd);
        return NULL;
    }
    /* The header (bounded above) first: the data section is read only for a valid header,
     * whose tensors then account for every byte of it. */
    char *hdr = malloc(hlen ? hlen : 1);
    if (!hdr) {
        close(fd);
        tfc_error_at(err, TFC_ERR_NOMEM, path, 0, 0, NULL, NULL,
                     "cannot allocate %llu bytes for the header", (unsigned long long)hlen);
        return NULL;
    }
    if (pread_full(fd, hdr, (size_t)hlen, 8) != 0)
        return open_fail(fd, hdr, path, "cannot read the header", errno, err);
    uint64_t data_len = size - 8 - hlen;
    tfc_st_file *f = parse_header(hdr, (size_t)hlen, data_len, path, err);
    free(hdr);
    if (!f) {
        close(fd);
        return NULL;
    }
    if (data_len > SIZE_MAX - 1 || !(f->owned = malloc(data_len ? (size_t)data_len : 1))) {
        tfc_st_close(f);
        close(fd);
        tfc_error_at(err, TFC_ERR_NOMEM, path, 0, 0, NULL, NULL,
                     "cannot allocate %llu bytes for its tensors", (unsigned long long)data_len);
        return NULL;
    }
    if (pread_full(fd, f->owned, (size_t)data_len, (off_t)(8 + hlen)) != 0) {
        int e = errno;
        tfc_st_close(f);
        return open_fail(fd, NULL, path, "cannot read the tensor data", e, err);
    }
    close(fd);
    attach_data(f, f->owned);
    return f;
}

int tfc_st_count(const tfc_st_file *f)
{
    return f->count;
}

const tfc_st_tensor *tfc_st_tensor_at(const tfc_st_file *f, int i)
{
    return i >= 0 && i < f->count ? &f->tensors[i] : NULL;
}

const tfc_st_tensor *tfc_st_find(const tfc_st_file *f, const char *name)
{
    tfc_st_tensor key = {.name = name};
    const tfc_st_tensor *pk = &key;
    const tfc_st_tensor **hit = bsearch(&pk, f->by_name, (size_t)f->count, sizeof *f->by_name, by_name);
    return hit ? *hit : NULL;
}

const char *tfc_st_meta(const tfc_st_file *f, const char *key)
{
    for (int i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta_key[i], key) == 0) return f->meta_val[i];
    return NULL;
}

int tfc_st_meta_count(const tfc_st_file *f)
{
    return f->nmeta;
}

void tfc_st_meta_at(const tfc_st_file *f, int i, const char **key, const char **value)
{
    int ok = i >= 0 && i < f->nmeta;
    if (key) *key = ok ? f->meta_key[i] : NULL;
    if (value) *value = ok ? f->meta_val[i] : NULL;
}

size_t tfc_st_data_size(const tfc_st_file *f)
{
    return f->data_size;
}

void tfc_st_tensor_to_f32(const tfc_st_tensor *t, float *dst)
{
    const unsigned char *p = t->data;
    size_t n = (size_t)t->numel, es = tfc_dtype_size(t->dtype);
    /* memcpy of each element: data may be unaligned. */
#define CONVERT(type)                                   \
    for (size_t i = 0; i < n; i++) {                    \
        type v_;                                        \
        memcpy(&v_, p + i * es, sizeof v_);             \
        dst[i] = (float)v_;                             \
    }                                                   \
    break
    switch (t->dtype) {
    case TFC_F32: memcpy(dst, p, n * 4); break;
    case TFC_F64: CONVERT(double);
    case TFC_I8: CONVERT(int8_t);
    case TFC_U8: CONVERT(uint8_t);
    case TFC_I16: CONVERT(int16_t);
    case TFC_U16: CONVERT(uint16_t);
    case TFC_I32: CONVERT(int32_t);
    case TFC_U32: CONVERT(uint32_t);
    case TFC_I64: CONVERT(int64_t);
    case TFC_U64: CONVERT(uint64_t);
    case TFC_BOOL:
        for (size_t i = 0; i < n; i++) dst[i] = p[i] ? 1.0f : 0.0f;
        break;
    case TFC_F16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = tfc_half_to_float(h);
        }
        break;
    case TFC_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = tfc_bf16_to_float(h);
        }
        break;
    default: TFC_ASSERT(!"unknown dtype");
    }
#undef CONVERT
}

/* ---- writing ----------------------------------------------------------------------------- */

typedef struct wtensor {
    char *name;
    tfc_dtype dtype;
    tfc_shape shape;
    const void *data;
    size_t nbytes;
} wtensor;

struct tfc_st_writer {
    wtensor *t;
    int n, cap;
    char **mkey, **mval;
    int nmeta, mcap;
    uint64_t total; /* bytes of data so far */
};

tfc_st_writer *tfc_st_writer_create(void)
{
    return calloc(1, sizeof(tfc_st_writer));
}

void tfc_st_writer_free(tfc_st_writer *w)
{
    if (!w) return;
    for (int i = 0; i < w->n; i++) free(w->t[i].name);
    for (int i = 0; i < w->nmeta; i++) {
        free(w->mkey[i]);
        free(w->mval[i]);
    }
    free(w->t);
    free(w->mkey);
    free(w->mval);
    free(w);
}

static int valid_utf8(const char *s)
{
    json_t *j = json_string(s); /* jansson validates UTF-8 and refuses what it cannot print */
    if (!j) return 0;
    json_decref(j);
    return 1;
}

tfc_status tfc_st_writer_add(tfc_st_writer *w, const char *name, tfc_dtype dtype,
                             const tfc_shape *shape, const void *data, tfc_error *err)
{
    char sn[128], ds[160];
    if (!name || !*name)
        return tfc_error_set(err, TFC_ERR_INTERNAL, "safetensors: a tensor needs a non-empty name");
    shown(name, sn, sizeof sn);
    if (strcmp(name, "__metadata__") == 0 || !valid_utf8(name))
        return tfc_error_set(err, TFC_ERR_INTERNAL, "safetensors: '%s' cannot name a tensor", sn);
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return tfc_error_set(err, TFC_ERR_INTERNAL, "safetensors: tensor '%s' added twice", sn);
    if ((unsigned)dtype >= TFC_DTYPE_COUNT)
        return tfc_error_set(err, TFC_ERR_INTERNAL, "safetensors: tensor '%s': bad dtype %d", sn,
                             (int)dtype);
    if (shape->ndim < 0 || shape->ndim > TFC_MAX_DIMS)
        return tfc_error_set(err, TFC_ERR_INTERNAL, "safetensors: tensor '%s': bad rank %d", sn,
                             shape->ndim);
    int64_t numel = tfc_shape_numel(shape);
    uint64_t es = tfc_dtype_size(dtype);
    if (numel < 0 || (uint64_t)numel > (uint64_t)INT64_MAX / es ||
        (uint64_t)numel * es > (uint64_t)INT64_MAX - w->total || (uint64_t)numel * es > SIZE_MAX)
        return tfc_error_set(err, TFC_ERR_INTERNAL, "safetensors: tensor '%s': bad or too large "
                             "shape %s", sn, dims_str(shape, ds, sizeof ds));
    size_t nbytes = (size_t)((uint64_t)numel * es);
    if (nbytes && !data)
        return tfc_error_set(err, TFC_ERR_INTERNAL, "safetensors: tensor '%s' has no data", sn);
    if (w->n == w->cap) {
        int ncap = w->cap ? 2 * w->cap : 16;
        wtensor *g = realloc(w->t, (size_t)ncap * sizeof *g);
        if (!g) return tfc_error_set(err, TFC_ERR_NOMEM, "safetensors: cannot grow the writer");
        w->t = g;
        w->cap = ncap;
    }
    char *copy = strdup(name);
    if (!copy) return tfc_error_set(err, TFC_ERR_NOMEM, "safetensors: cannot copy a name");
    w->t[w->n++] = (wtensor){copy, dtype, *shape, data, nbytes};
    w->total += nbytes;
    return TFC_OK;
}

tfc_status tfc_st_writer_set_meta(tfc_st_writer *w, const char *key, const char *value,
                                  tfc_error *err)
{
    if (!key || !value || !valid_utf8(key) || !valid_utf8(value))
        return tfc_error_set(err, TFC_ERR_INTERNAL, "safetensors: metadata must be UTF-8 strings");
    char *v = strdup(value);
    if (!v) return tfc_error_set(err, TFC_ERR_NOMEM, "safetensors: cannot copy metadata");
    for (int i = 0; i < w->nmeta; i++) {
        if (strcmp(w->mkey[i], key) == 0) {
            free(w->mval[i]);
            w->mval[i] = v;
            return TFC_OK;
        }
    }
    if (w->nmeta == w->mcap) {
        int ncap = w->mcap ? 2 * w->mcap : 8;
        char **k = realloc(w->mkey, (size_t)ncap * sizeof *k);
        if (k) w->mkey = k;
        char **vv = k ? realloc(w->mval, (size_t)ncap * sizeof *vv) : NULL;
        if (vv) w->mval = vv;
        if (!k || !vv) {
            free(v);
            return tfc_error_set(err, TFC_ERR_NOMEM, "safetensors: cannot grow the metadata");
        }
        w->mcap = ncap;
    }
    char *k = strdup(key);
    if (!k) {
        free(v);
        return tfc_error_set(err, TFC_ERR_NOMEM, "safetensors: cannot copy metadata");
    }
    w->mkey[w->nmeta] = k;
    w->mval[w->nmeta++] = v;
    return TFC_OK;
}

/* Builds the length prefix and the padded JSON header: *hdr (malloc'd) holds *hlen bytes,
 * 8 + a multiple of 8. */
static tfc_status build_header(const tfc_st_writer *w, char **hdr, size_t *hlen, tfc_error *err)
{
    json_t *root = json_object();
    int ok = root != NULL;
    if (ok && w->nmeta) {
        json_t *meta = json_object();
        ok = meta && json_object_set_new(root, "__metadata__", meta) == 0;
        for (int i = 0; ok && i < w->nmeta; i++)
            ok = json_object_set_new(meta, w->mkey[i], json_string(w->mval[i])) == 0;
    }
    uint64_t off = 0;
    for (int i = 0; ok && i < w->n; i++) {
        const wtensor *t = &w->t[i];
        json_t *shape = json_array(), *obj = json_object();
        ok = shape && obj;
        for (int d = 0; ok && d < t->shape.ndim; d++)
            ok = json_array_append_new(shape, json_integer((json_int_t)t->shape.dim[d])) == 0;
        /* Field order as the reference implementation writes it. */
        ok = ok && json_object_set_new(obj, "dtype", json_string(tfc_dtype_name(t->dtype))) == 0;
        ok = ok && json_object_set(obj, "shape", shape) == 0;
        ok = ok && json_object_set_new(obj, "data_offsets",
                                       json_pack("[II]", (json_int_t)off,
                                                 (json_int_t)(off + t->nbytes))) == 0;
        ok = ok && json_object_set(root, t->name, obj) == 0;
        json_decref(shape);
        json_decref(obj);
        off += t->nbytes;
    }
    char *text = ok ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    if (!text) return tfc_error_set(err, TFC_ERR_NOMEM, "safetensors: cannot build the header");
    size_t len = strlen(text), padded = (len + 7) & ~(size_t)7;
    if (padded > TFC_ST_MAX_HEADER) {
        free(text);
        return tfc_error_set(err, TFC_ERR_INTERNAL, "safetensors: header of %zu bytes is more "
                             "than the %u-byte limit", padded, TFC_ST_MAX_HEADER);
    }
    char *out = malloc(8 + padded);
    if (!out) {
        free(text);
        return tfc_error_set(err, TFC_ERR_NOMEM, "safetensors: cannot build the header");
    }
    for (int i = 0; i < 8; i++) out[i] = (char)((uint64_t)padded >> (8 * i) & 0xff);
    memcpy(out + 8, text, len);
    memset(out + 8 + len, ' ', padded - len); /* the reference pads with spaces */
    free(text);
    *hdr = out;
    *hlen = 8 + padded;
    return TFC_OK;
}

tfc_status tfc_st_writer_save(const tfc_st_writer *w, const char *path, tfc_error *err)
{
    char *hdr;
    size_t hlen;
    tfc_status st = build_header(w, &hdr, &hlen, err);
    if (st != TFC_OK) return st;
    const void **chunks = malloc((size_t)(w->n + 1) * sizeof *chunks);
    size_t *sizes = malloc((size_t)(w->n + 1) * sizeof *sizes);
    if (!chunks || !sizes) {
        free(chunks);
        free(sizes);
        free(hdr);
        return tfc_error_set(err, TFC_ERR_NOMEM, "safetensors: cannot allocate %d chunks", w->n);
    }
    chunks[0] = hdr;
    sizes[0] = hlen;
    for (int i = 0; i < w->n; i++) {
        chunks[i + 1] = w->t[i].data;
        sizes[i + 1] = w->t[i].nbytes;
    }
    st = tfc_file_write_atomic(path, chunks, sizes, w->n + 1, err);
    free(chunks);
    free(sizes);
    free(hdr);
    return st;
}

tfc_status tfc_st_writer_to_buffer(const tfc_st_writer *w, void **buf, size_t *len,
                                   tfc_error *err)
{
    char *hdr;
    size_t hlen;
    *buf = NULL;
    *len = 0;
    tfc_status st = build_header(w, &hdr, &hlen, err);
    if (st != TFC_OK) return st;
    if (w->total > SIZE_MAX - hlen) {
        free(hdr);
        return tfc_error_set(err, TFC_ERR_NOMEM, "safetensors: file too large for memory");
    }
    char *out = malloc(hlen + (size_t)w->total);
    if (!out) {
        free(hdr);
        return tfc_error_set(err, TFC_ERR_NOMEM, "safetensors: cannot allocate %llu bytes",
                             (unsigned long long)(hlen + w->total));
    }
    memcpy(out, hdr, hlen);
    size_t at = hlen;
    for (int i = 0; i < w->n; i++) {
        if (w->t[i].nbytes) memcpy(out + at, w->t[i].data, w->t[i].nbytes);
        at += w->t[i].nbytes;
    }
    free(hdr);
    *buf = out;
    *len = at;
    return TFC_OK;
}
