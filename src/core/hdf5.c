/* HDF5 reader (see hdf5.h), after the HDF5 File Format Specification version 3.0: II.A the
 * superblock (versions 0-3), III.A.1 version 1 B-trees (group nodes, type 0), III.B group
 * symbol table nodes, III.C symbol table entries, III.D local heaps, III.E global heap
 * collections, IV.A.1.a/b version 1 and 2 object headers, and of IV.A.2's messages: .b
 * dataspace, .c link info, .d datatype, .e/.f fill value, .g link, .i data layout, .m
 * attribute, .q continuation, .r symbol table, .v attribute info. Every read goes through a
 * cursor that cannot pass its end; every address is checked against the buffer; every
 * structure reached (object header, continuation block, B-tree node, symbol node) is
 * remembered so none is read twice; and a budget charges each byte read or allocated. */
#include "core/hdf5.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the HDF5 reader hands out little-endian data in place and needs a little-endian host"
#endif

#define UNDEF UINT64_MAX /* HDF5's undefined address: all bytes 0xff */

struct tfc_h5_file {
    void *bytes;                 /* the file read by tfc_h5_open; NULL after tfc_h5_parse */
    void *zeros;                 /* the data of unwritten datasets */
    tfc_h5_object *objs;
    int count, cap;
    const tfc_h5_object **by_path; /* sorted by path for tfc_h5_find */
    void **kept;                 /* everything else allocated: names, paths, attributes */
    size_t nkept, capkept;
};

/* ---- bounded reads ------------------------------------------------------------------------ */

/* A window on the buffer. A read past its end sets `bad` and returns zeros; the caller
 * checks `bad` once after reading a structure. */
typedef struct cursor {
    const uint8_t *p;
    size_t left;
    int bad;
} cursor;

static const uint8_t *take(cursor *c, uint64_t n)
{
    if (c->bad || n > c->left) {
        c->bad = 1;
        c->left = 0;
        return NULL;
    }
    const uint8_t *p = c->p;
    c->p += n;
    c->left -= (size_t)n;
    return p;
}

/* An n-byte little-endian unsigned integer (n <= 8). */
static uint64_t get(cursor *c, int n)
{
    const uint8_t *p = take(c, (uint64_t)n);
    uint64_t v = 0;
    for (int i = n - 1; p && i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* The next n bytes as a cursor of their own. */
static cursor sub(cursor *c, uint64_t n)
{
    const uint8_t *p = take(c, n);
    return (cursor){p, p ? (size_t)n : 0, p == NULL};
}

/* ---- the reader's state ------------------------------------------------------------------- */

/* Addresses of the structures already read: open addressing, key 0 is an empty slot. */
typedef struct addr_set {
    uint64_t *slot;
    size_t cap, n;
} addr_set;

/* An object of a global heap collection. */
typedef struct heap_obj {
    uint64_t index;
    const uint8_t *p;
    uint64_t n;
} heap_obj;

typedef struct reader {
    const uint8_t *buf;
    size_t len;
    const char *name;  /* the file, in errors */
    tfc_error *err;
    tfc_h5_file *f;
    uint64_t base;     /* absolute offset that addresses are relative to */
    int so, sl;        /* sizes of offsets and lengths (2, 4 or 8 bytes) */
    uint64_t budget;   /* bytes left to read or allocate */
    addr_set seen;
    uint64_t heap_addr; /* the global heap collection listed in objects (UNDEF: none) */
    heap_obj *objects;
    size_t nobjects, capobjects;
    const char *path;  /* the object being read, in errors; NULL before the root */
    int failed;
} reader;

/* ---- errors ------------------------------------------------------------------------------- */

/* A name from the file made safe to print: control bytes become '?', long ones are cut. */
static const char *shown(const char *s, char *out, size_t size)
{
    size_t n = 0;
    for (; *s && n + 4 < size; s++) {
        unsigned char c = (unsigned char)*s;
        out[n++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    if (*s) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = 0;
    return out;
}

/* Records a format error about the current object; returns -1. Only the first counts. */
static int fail(reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(reader *r, const char *fmt, ...)
{
    if (r->failed) return -1;
    r->failed = 1;
    char msg[700], where[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!r->path)
        tfc_error_at(r->err, TFC_ERR_FORMAT, r->name, 0, 0, NULL, NULL, "%s", msg);
    else
        tfc_error_at(r->err, TFC_ERR_FORMAT, r->name, 0, 0, NULL, NULL, "'%s': %s",
                     r->path[0] ? shown(r->path, where, sizeof where) : "/", msg);
    return -1;
}

static int nomem(reader *r, size_t n)
{
    if (r->failed) return -1;
    r->failed = 1;
    tfc_error_at(r->err, TFC_ERR_NOMEM, r->name, 0, 0, NULL, NULL,
                 "cannot allocate %zu bytes while reading the file", n);
    return -1;
}

/* Charges n bytes of reading or allocation to the budget (16 x the file + 1 MiB): only
 * structures that overlap or repeat can exhaust it. */
static int spend(reader *r, uint64_t n)
{
    if (n <= r->budget) {
        r->budget -= n;
        return 0;
    }
    return fail(r, "reading the file costs more than 16 times its size: its structures "
                   "overlap or repeat");
}

/* A malloc'd block freed with the file, charged to the budget. */
static void *keep(reader *r, size_t n)
{
    if (spend(r, n + 16) < 0) return NULL;
    tfc_h5_file *f = r->f;
    if (f->nkept == f->capkept) {
        size_t cap = f->capkept ? 2 * f->capkept : 64;
        void **k = realloc(f->kept, cap * sizeof *k);
        if (!k) return nomem(r, cap * sizeof *k), NULL;
        f->kept = k;
        f->capkept = cap;
    }
    void *p = malloc(n ? n : 1);
    if (!p) return nomem(r, n), NULL;
    f->kept[f->nkept++] = p;
    return p;
}

/* Grows a vector of `size`-byte items to hold one more; returns 0, or -1 with the error. */
static int grow(reader *r, void **items, size_t *cap, size_t n, size_t size)
{
    if (n < *cap) return 0;
    size_t ncap = *cap ? 2 * *cap : 8;
    if (spend(r, (ncap - *cap) * size) < 0) return -1;
    void *p = realloc(*items, ncap * size);
    if (!p) return nomem(r, ncap * size);
    *items = p;
    *cap = ncap;
    return 0;
}

/* ---- addresses ---------------------------------------------------------------------------- */

static uint64_t get_addr(reader *r, cursor *c)
{
    uint64_t v = get(c, r->so);
    return r->so < 8 && v == (UINT64_C(1) << (8 * r->so)) - 1 ? UNDEF : v;
}

static uint64_t get_len(reader *r, cursor *c) { return get(c, r->sl); }

/* A cursor from address `addr` (relative to the base) to the end of the file, after
 * checking that `need` bytes are there; `what` names the structure in errors. Sets *abs to
 * the absolute offset when abs is not NULL. */
static int locate(reader *r, uint64_t addr, uint64_t need, const char *what, cursor *c,
                  uint64_t *abs)
{
    if (addr == UNDEF) return fail(r, "%s: undefined address", what);
    if (addr > r->len - r->base || need > r->len - r->base - addr)
        return fail(r, "%s: address %llu (+%llu bytes) is past the end of the file (%zu bytes)",
                    what, (unsigned long long)addr, (unsigned long long)need, r->len);
    size_t at = (size_t)(r->base + addr);
    *c = (cursor){r->buf + at, r->len - at, 0};
    if (abs) *abs = at;
    return 0;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    return x ^ x >> 33;
}

/* Remembers absolute offset `at` (the start of `what`); a structure reached twice is an
 * error (a cycle, or one object linked from two places). */
static int mark(reader *r, uint64_t at, const char *what)
{
    addr_set *s = &r->seen;
    if (2 * (s->n + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        if (spend(r, cap * sizeof(uint64_t)) < 0) return -1;
        uint64_t *slot = calloc(cap, sizeof *slot);
        if (!slot) return nomem(r, cap * sizeof *slot);
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->slot[i]) continue;
            size_t j = mix(s->slot[i]) & (cap - 1);
            while (slot[j]) j = (j + 1) & (cap - 1);
            slot[j] = s->slot[i];
        }
        free(s->slot);
        s->slot = slot;
        s->cap = cap;
    }
    uint64_t key = at + 1;
    size_t j = mix(key) & (s->cap - 1);
    for (; s->slot[j]; j = (j + 1) & (s->cap - 1))
        if (s->slot[j] == key)
            return fail(r, "%s at byte %llu is reached twice (a cycle, or an object linked "
                           "from two places, which is not supported)",
                        what, (unsigned long long)at);
    s->slot[j] = key;
    s->n++;
    return 0;
}

static int signature(cursor *c, const char *sig)
{
    const uint8_t *p = take(c, 4);
    return p && memcmp(p, sig, 4) == 0;
}

/* ---- datatypes and dataspaces (IV.A.2.d, IV.A.2.b) ---------------------------------------- */

enum { K_NUMBER, K_FIXED_STRING, K_VLEN_STRING, K_OTHER };

typedef struct dtype_info {
    int kind;
    tfc_dtype dtype;  /* K_NUMBER */
    uint64_t size;    /* bytes of one element in the file */
    int space_padded; /* K_FIXED_STRING */
    char what[64];    /* K_OTHER: what it is, for errors */
} dtype_info;

static const char *const CLASS_NAMES[] = {"integer", "float", "time", "string", "bitfield",
                                          "opaque", "compound", "reference", "enum",
                                          "variable-length", "array"};

static void integer_type(dtype_info *t, unsigned bits, cursor *c)
{
    unsigned offset = (unsigned)get(c, 2), precision = (unsigned)get(c, 2);
    static const tfc_dtype S[] = {TFC_I8, TFC_I16, TFC_I32, TFC_I64};
    static const tfc_dtype U[] = {TFC_U8, TFC_U16, TFC_U32, TFC_U64};
    int lg = t->size == 1 ? 0 : t->size == 2 ? 1 : t->size == 4 ? 2 : t->size == 8 ? 3 : -1;
    if (bits & 1)
        snprintf(t->what, sizeof t->what, "big-endian integer");
    else if (lg < 0 || offset != 0 || precision != 8 * t->size)
        snprintf(t->what, sizeof t->what, "%u-bit integer in %llu bytes", precision,
                 (unsigned long long)t->size);
    else {
        t->kind = K_NUMBER;
        t->dtype = bits & 8 ? S[lg] : U[lg];
    }
}

static void float_type(dtype_info *t, unsigned bits, cursor *c)
{
    unsigned offset = (unsigned)get(c, 2), precision = (unsigned)get(c, 2);
    unsigned exp_at = (unsigned)get(c, 1), exp_bits = (unsigned)get(c, 1);
    unsigned man_at = (unsigned)get(c, 1), man_bits = (unsigned)get(c, 1);
    unsigned sign_at = bits >> 8 & 0xff;
    int layout = offset == 0 && precision == 8 * t->size && man_at == 0 &&
                 exp_at == man_bits && sign_at == precision - 1;
    if (bits & 0x41) {
        snprintf(t->what, sizeof t->what, "%s float", bits & 0x40 ? "VAX-order" : "big-endian");
        return;
    }
    t->kind = K_NUMBER;
    if (layout && t->size == 2 && exp_bits == 5 && man_bits == 10) t->dtype = TFC_F16;
    else if (layout && t->size == 2 && exp_bits == 8 && man_bits == 7) t->dtype = TFC_BF16;
    else if (layout && t->size == 4 && exp_bits == 8 && man_bits == 23) t->dtype = TFC_F32;
    else if (layout && t->size == 8 && exp_bits == 11 && man_bits == 52) t->dtype = TFC_F64;
    else {
        t->kind = K_OTHER;
        snprintf(t->what, sizeof t->what, "non-IEEE %llu-byte float",
                 (unsigned long long)t->size);
    }
}

/* Classifies a datatype message; -1 (with the error) only when it is truncated. */
static int parse_type(reader *r, cursor c, dtype_info *t, const char *what)
{
    memset(t, 0, sizeof *t);
    t->kind = K_OTHER;
    unsigned cv = (unsigned)get(&c, 1), bits = (unsigned)get(&c, 3);
    unsigned cls = cv & 0xf;
    t->size = get(&c, 4);
    snprintf(t->what, sizeof t->what, "%s", cls < 11 ? CLASS_NAMES[cls] : "unknown class");
    if (cls == 0) integer_type(t, bits, &c);
    else if (cls == 1) float_type(t, bits, &c);
    else if (cls == 3 && t->size > 0) {
        t->kind = K_FIXED_STRING;
        t->space_padded = (bits & 0xf) == 2;
    } else if (cls == 9 && (bits & 0xf) == 1) {
        t->kind = K_VLEN_STRING;
        t->size = 4 + (uint64_t)r->so + 4; /* length, global heap collection, index */
        snprintf(t->what, sizeof t->what, "variable-length string");
    } else if (cls == 3)
        snprintf(t->what, sizeof t->what, "empty string");
    if (c.bad) return fail(r, "%s: the datatype message is truncated", what);
    return 0;
}

typedef struct space {
    int rank, null;
    uint64_t dim[TFC_MAX_DIMS];
} space;

static int parse_space(reader *r, cursor c, space *s, const char *what)
{
    memset(s, 0, sizeof *s);
    int version = (int)get(&c, 1), rank = (int)get(&c, 1), flags = (int)get(&c, 1);
    if (version == 1) take(&c, 5);
    else if (version == 2) s->null = get(&c, 1) == 2;
    else if (!c.bad) return fail(r, "%s: dataspace version %d is not supported", what, version);
    if (rank > TFC_MAX_DIMS)
        return fail(r, "%s: dataspace rank %d exceeds %d", what, rank, TFC_MAX_DIMS);
    s->rank = rank;
    for (int i = 0; i < rank; i++) s->dim[i] = get_len(r, &c);
    if (flags & 1)
        for (int i = 0; i < rank; i++) get_len(r, &c);
    if (c.bad) return fail(r, "%s: the dataspace message is truncated", what);
    return 0;
}

/* Elements of `s`, each of `size` bytes, that must fit in `limit` bytes (and every
 * dimension too, so that consumers' products cannot overflow). */
static int count_elements(reader *r, const space *s, uint64_t size, uint64_t limit,
                          const char *what, uint64_t *numel)
{
    uint64_t n = s->null ? 0 : 1;
    for (int i = 0; i < s->rank; i++) {
        if (s->dim[i] > limit)
            return fail(r, "%s: dimension %d is %llu, more than the %llu bytes it could hold",
                        what, i, (unsigned long long)s->dim[i], (unsigned long long)limit);
        n = s->dim[i] && n > UINT64_MAX / s->dim[i] ? UINT64_MAX : n * s->dim[i];
    }
    if (size && n > limit / size)
        return fail(r, "%s: %llu elements of %llu bytes need more than the %llu bytes there",
                    what, (unsigned long long)n, (unsigned long long)size,
                    (unsigned long long)limit);
    *numel = n;
    return 0;
}

/* ---- an object header's messages --------------------------------------------------------- */

typedef struct member {
    const char *name; /* in the file: not NUL-terminated */
    size_t len;
    uint64_t addr;
} member;

/* What an object header says, message by message. */
typedef struct header {
    int stab;                     /* symbol table message */
    uint64_t btree, heap;
    int new_group;                /* link info, group info or link messages */
    member *links;
    size_t nlinks, caplinks;
    int layout;                   /* a layout message: 1 + its class */
    uint64_t data_addr, data_size;
    const uint8_t *compact;
    cursor type, space;           /* the dataset's messages (type.p NULL when absent) */
    int shared_type, fill_nonzero;
    tfc_h5_attr *attrs;
    size_t nattrs, capattrs;
    struct block { uint64_t addr, len; } *cont; /* continuation blocks, in order found */
    size_t ncont, capcont;
} header;

static int continuation(reader *r, header *h, cursor c)
{
    uint64_t addr = get_addr(r, &c), len = get_len(r, &c);
    if (c.bad) return fail(r, "object header: the continuation message is truncated");
    if (h->ncont == TFC_H5_MAX_CONTINUATIONS)
        return fail(r, "object header: more than %d continuation blocks",
                    TFC_H5_MAX_CONTINUATIONS);
    if (grow(r, (void **)&h->cont, &h->capcont, h->ncont, sizeof *h->cont) < 0) return -1;
    h->cont[h->ncont++] = (struct block){addr, len};
    return 0;
}

static int layout(reader *r, header *h, cursor c)
{
    int version = (int)get(&c, 1), cls = (int)get(&c, 1);
    if (!c.bad && (version < 3 || version > 4))
        return fail(r, "layout: version %d is not supported", version);
    if (cls == 0) {
        h->data_size = get(&c, 2);
        h->compact = take(&c, h->data_size);
    } else if (cls == 1) {
        h->data_addr = get_addr(r, &c);
        h->data_size = get_len(r, &c);
    } else if (cls == 2)
        return fail(r, "layout: chunked storage is not supported");
    else if (!c.bad)
        return fail(r, "layout: %s storage is not supported", cls == 3 ? "virtual" : "unknown");
    if (c.bad) return fail(r, "layout: the message is truncated");
    h->layout = 1 + cls;
    return 0;
}

static int nonzero(const uint8_t *p, uint64_t n)
{
    for (uint64_t i = 0; p && i < n; i++)
        if (p[i]) return 1;
    return 0;
}

/* Fill value messages (old 0x0004, new 0x0005): only whether the value is not zero. */
static void fill_value(header *h, int type, cursor c)
{
    int defined = 1;
    if (type == 0x0005) {
        int version = (int)get(&c, 1);
        if (version == 3) defined = (get(&c, 1) & 0x20) != 0;
        else defined = (take(&c, 2), get(&c, 1) != 0);
    }
    if (!defined || c.left < 4) return;
    uint64_t n = get(&c, 4);
    h->fill_nonzero |= nonzero(take(&c, n), n);
}

/* A link message: hard links become members; soft and external links are skipped. */
static int link_message(reader *r, header *h, cursor c)
{
    int version = (int)get(&c, 1), flags = (int)get(&c, 1);
    if (!c.bad && version != 1) return fail(r, "link: version %d is not supported", version);
    int type = flags & 8 ? (int)get(&c, 1) : 0;
    if (flags & 4) take(&c, 8);
    if (flags & 0x10) take(&c, 1);
    uint64_t n = get(&c, 1 << (flags & 3));
    const char *name = (const char *)take(&c, n);
    uint64_t addr = type == 0 ? get_addr(r, &c) : 0;
    if (c.bad) return fail(r, "link: the message is truncated");
    h->new_group = 1;
    if (type != 0) return 0;
    if (grow(r, (void **)&h->links, &h->caplinks, h->nlinks, sizeof *h->links) < 0) return -1;
    h->links[h->nlinks++] = (member){name, (size_t)n, addr};
    return 0;
}

/* Link info (0x0002) and attribute info (0x0015): dense storage is refused. */
static int info_message(reader *r, header *h, int type, cursor c)
{
    get(&c, 1);
    int flags = (int)get(&c, 1);
    if (flags & 1) take(&c, type == 0x0002 ? 8 : 2);
    uint64_t heap = get_addr(r, &c);
    if (c.bad) return fail(r, "%s info: the message is truncated",
                           type == 0x0002 ? "link" : "attribute");
    if (type == 0x0002) h->new_group = 1;
    if (heap != UNDEF)
        return fail(r, "%s", type == 0x0002
                                 ? "group: dense link storage (a fractal heap) is not supported"
                                 : "dense attribute storage (a fractal heap) is not supported");
    return 0;
}

/* ---- attributes (IV.A.2.m) and the global heap (III.E) ------------------------------------ */

static int by_index(const void *a, const void *b)
{
    const heap_obj *x = a, *y = b;
    return (x->index > y->index) - (x->index < y->index);
}

/* Lists the objects of the global heap collection at `addr` in r->objects, sorted by
 * index. Strings of one attribute lie in one collection or in consecutive ones, so keeping
 * the last collection read reads each once; a file that alternates pays for it. */
static int heap_collection(reader *r, uint64_t addr)
{
    cursor c;
    r->heap_addr = UNDEF;
    r->nobjects = 0;
    if (locate(r, addr, 8, "global heap collection", &c, NULL) < 0) return -1;
    cursor h = c;
    int ok = signature(&h, "GCOL") && get(&h, 1) == 1;
    take(&h, 3);
    uint64_t total = get_len(r, &h);
    if (!ok || h.bad) return fail(r, "global heap collection at %llu: bad header",
                                  (unsigned long long)addr);
    cursor all = sub(&c, total);
    if (all.bad) return fail(r, "global heap collection at %llu: its %llu bytes run past the "
                                "end of the file", (unsigned long long)addr,
                             (unsigned long long)total);
    take(&all, 8 + (uint64_t)r->sl);
    while (all.left >= 8 + (size_t)r->sl) {
        uint64_t index = get(&all, 2);
        take(&all, 6); /* reference count, reserved */
        uint64_t n = get_len(r, &all);
        const uint8_t *p = take(&all, n);
        if (index == 0 || !p) break; /* the free space, last */
        take(&all, (8 - n % 8) % 8 < all.left ? (8 - n % 8) % 8 : all.left); /* padding */
        if (grow(r, (void **)&r->objects, &r->capobjects, r->nobjects, sizeof *r->objects) < 0)
            return -1;
        r->objects[r->nobjects++] = (heap_obj){index, p, n};
    }
    if (spend(r, 16 * r->nobjects) < 0) return -1;
    if (r->nobjects > 1) qsort(r->objects, r->nobjects, sizeof *r->objects, by_index);
    r->heap_addr = addr;
    return 0;
}

/* Object `index` of the global heap collection at `addr`: its bytes and size. */
static int heap_object(reader *r, uint64_t addr, uint64_t index, const uint8_t **data,
                       uint64_t *size)
{
    if (addr != r->heap_addr && heap_collection(r, addr) < 0) return -1;
    heap_obj key = {index, NULL, 0};
    const heap_obj *o =
        r->nobjects ? bsearch(&key, r->objects, r->nobjects, sizeof key, by_index) : NULL;
    if (!o)
        return fail(r, "global heap collection at %llu has no object %llu",
                    (unsigned long long)addr, (unsigned long long)index);
    *data = o->p;
    *size = o->n;
    return 0;
}

/* A string kept with the file: n bytes, cut at the first NUL (and trailing spaces). */
static const char *keep_string(reader *r, const uint8_t *p, size_t n, int strip_spaces)
{
    const uint8_t *z = n ? memchr(p, 0, n) : NULL;
    if (z) n = (size_t)(z - p);
    while (strip_spaces && n > 0 && p[n - 1] == ' ') n--;
    char *s = keep(r, n + 1);
    if (!s) return NULL;
    if (n) memcpy(s, p, n);
    s[n] = 0;
    return s;
}

static int attr_strings(reader *r, tfc_h5_attr *a, const dtype_info *t, uint64_t n, cursor d)
{
    const char **s = keep(r, (size_t)n * sizeof *s);
    if (!s) return -1;
    for (uint64_t i = 0; i < n; i++) {
        if (t->kind == K_FIXED_STRING)
            s[i] = keep_string(r, take(&d, t->size), (size_t)t->size, t->space_padded);
        else {
            uint64_t len = get(&d, 4), addr = get_addr(r, &d), index = get(&d, 4);
            const uint8_t *p = NULL;
            uint64_t size = 0;
            if (len && heap_object(r, addr, index, &p, &size) < 0) return -1;
            char sn[100];
            if (len > size)
                return fail(r, "attribute '%s': string %llu holds %llu bytes but its heap "
                               "object only %llu", shown(a->name, sn, sizeof sn),
                            (unsigned long long)i, (unsigned long long)len,
                            (unsigned long long)size);
            s[i] = keep_string(r, p, (size_t)len, 0);
        }
        if (!s[i]) return -1;
    }
    a->strings = s;
    a->n_strings = (int)n;
    return 0;
}

/* An attribute message, versions 1 (parts padded to 8 bytes), 2 and 3. */
static int attribute(reader *r, header *h, cursor c)
{
    int version = (int)get(&c, 1), flags = (int)get(&c, 1);
    uint64_t name_size = get(&c, 2), type_size = get(&c, 2), space_size = get(&c, 2);
    if (!c.bad && (version < 1 || version > 3))
        return fail(r, "attribute: version %d is not supported", version);
    if (version == 3) get(&c, 1);
    uint64_t pad = version == 1 ? 7 : 0;
    const uint8_t *name = take(&c, (name_size + pad) & ~pad);
    cursor tc = sub(&c, (type_size + pad) & ~pad), sc = sub(&c, (space_size + pad) & ~pad);
    if (c.bad || name_size == 0) return fail(r, "attribute: the message is truncated");
    if (grow(r, (void **)&h->attrs, &h->capattrs, h->nattrs, sizeof *h->attrs) < 0) return -1;
    tfc_h5_attr *a = &h->attrs[h->nattrs];
    *a = (tfc_h5_attr){keep_string(r, name, (size_t)name_size, 0), 0, NULL};
    if (!a->name) return -1;
    h->nattrs++;
    if (version > 1 && (flags & 3)) return 0; /* a shared datatype or dataspace */
    char what[160], sn[100];
    snprintf(what, sizeof what, "attribute '%s'", shown(a->name, sn, sizeof sn));
    dtype_info t;
    space s;
    uint64_t n;
    if (parse_type(r, tc, &t, what) < 0) return -1;
    if (t.kind != K_FIXED_STRING && t.kind != K_VLEN_STRING) return 0; /* listed, not read */
    if (parse_space(r, sc, &s, what) < 0 || count_elements(r, &s, t.size, c.left, what, &n) < 0)
        return -1;
    return attr_strings(r, a, &t, n, c);
}

/* ---- object headers (IV.A.1) -------------------------------------------------------------- */

static int message(reader *r, header *h, int type, int flags, cursor body)
{
    if (spend(r, body.left + 8) < 0) return -1;
    switch (type) {
    case 0x0001: h->space = body; return 0;
    case 0x0003:
        h->type = body;
        h->shared_type = (flags & 2) != 0;
        return 0;
    case 0x0002:
    case 0x0015: return info_message(r, h, type, body);
    case 0x0004:
    case 0x0005: fill_value(h, type, body); return 0;
    case 0x0006: return link_message(r, h, body);
    case 0x0008: return layout(r, h, body);
    case 0x000A: h->new_group = 1; return 0;
    case 0x000C: return attribute(r, h, body);
    case 0x0010: return continuation(r, h, body);
    case 0x0011:
        h->stab = 1;
        h->btree = get_addr(r, &body);
        h->heap = get_addr(r, &body);
        return body.bad ? fail(r, "symbol table: the message is truncated") : 0;
    default: return 0; /* modification times, filters, comments, ...: not needed */
    }
}

/* The messages of one block: version 1 (8-byte prefix) or version 2 (4, or 6 bytes with
 * creation order); a tail shorter than a prefix is a gap. */
static int messages(reader *r, header *h, cursor c, int version, int corder)
{
    size_t prefix = version == 1 ? 8 : corder ? 6 : 4;
    while (c.left >= prefix) {
        int type = (int)get(&c, version == 1 ? 2 : 1);
        uint64_t size = get(&c, 2);
        int flags = (int)get(&c, 1);
        take(&c, prefix - (version == 1 ? 5 : 4));
        cursor body = sub(&c, size);
        if (body.bad)
            return fail(r, "object header: message type %d (%llu bytes) runs past its block",
                        type, (unsigned long long)size);
        if (message(r, h, type, flags, body) < 0) return -1;
    }
    return 0;
}

/* Continuation block i: version 1 holds messages only, version 2 "OCHK", messages and a
 * checksum. */
static int continuation_block(reader *r, header *h, size_t i, int version, int corder)
{
    cursor c;
    uint64_t at, len = h->cont[i].len;
    if (locate(r, h->cont[i].addr, len, "continuation block", &c, &at) < 0 ||
        mark(r, at, "continuation block") < 0)
        return -1;
    c = sub(&c, len);
    if (version == 2) {
        if (!signature(&c, "OCHK") || c.left < 4)
            return fail(r, "object header: continuation block at %llu has no OCHK signature",
                        (unsigned long long)h->cont[i].addr);
        c.left -= 4;
    }
    return messages(r, h, c, version, corder);
}

static int read_header(reader *r, uint64_t addr, header *h)
{
    cursor c;
    uint64_t at;
    if (locate(r, addr, 16, "object header", &c, &at) < 0 || mark(r, at, "object header") < 0)
        return -1;
    int version = 1, corder = 0;
    cursor block;
    if (memcmp(c.p, "OHDR", 4) == 0) {
        take(&c, 4);
        version = (int)get(&c, 1);
        int flags = (int)get(&c, 1);
        if (version != 2) return fail(r, "object header: OHDR version %d is not supported",
                                      version);
        corder = (flags & 4) != 0;
        take(&c, (flags & 0x20 ? 16 : 0) + (flags & 0x10 ? 4 : 0));
        block = sub(&c, get(&c, 1 << (flags & 3)));
        take(&c, 4); /* checksum */
    } else {
        int v = (int)get(&c, 1);
        if (v != 1) return fail(r, "object header: version %d is not supported", v);
        take(&c, 7);
        uint64_t size = get(&c, 4);
        take(&c, 4);
        block = sub(&c, size);
    }
    if (c.bad) return fail(r, "object header at %llu runs past the end of the file",
                           (unsigned long long)addr);
    if (messages(r, h, block, version, corder) < 0) return -1;
    for (size_t i = 0; i < h->ncont; i++)
        if (continuation_block(r, h, i, version, corder) < 0) return -1;
    return 0;
}

/* ---- groups: symbol tables (III.A.1, III.B, III.D) ---------------------------------------- */

typedef struct members {
    member *m;
    size_t n, cap;
    const uint8_t *names; /* the local heap's data segment */
    uint64_t names_size;
} members;

static int symbol_node(reader *r, uint64_t addr, members *ms)
{
    cursor c;
    uint64_t at;
    if (locate(r, addr, 8, "symbol table node", &c, &at) < 0 ||
        mark(r, at, "symbol table node") < 0)
        return -1;
    int ok = signature(&c, "SNOD") && get(&c, 1) == 1;
    take(&c, 1);
    uint64_t n = get(&c, 2);
    if (!ok) return fail(r, "symbol table node at %llu: bad signature or version",
                         (unsigned long long)addr);
    for (uint64_t i = 0; i < n && !c.bad; i++) {
        uint64_t name = get_addr(r, &c), object = get_addr(r, &c), cache = get(&c, 4);
        take(&c, 20); /* reserved, scratch pad */
        if (c.bad || spend(r, 40) < 0) break;
        if (cache == 2) continue; /* a soft link: its value is in the scratch pad */
        const uint8_t *s = name < ms->names_size ? ms->names + name : NULL;
        const uint8_t *z = s ? memchr(s, 0, (size_t)(ms->names_size - name)) : NULL;
        if (!z) return fail(r, "symbol table node at %llu: name offset %llu is outside the "
                               "local heap", (unsigned long long)addr,
                            (unsigned long long)name);
        if (grow(r, (void **)&ms->m, &ms->cap, ms->n, sizeof *ms->m) < 0) return -1;
        ms->m[ms->n++] = (member){(const char *)s, (size_t)(z - s), object};
    }
    if (c.bad) return fail(r, "symbol table node at %llu: truncated", (unsigned long long)addr);
    return r->failed ? -1 : 0;
}

/* A v1 B-tree group node and its subtree; `level` is the level its parent expects (-1 for
 * the root). Levels strictly decrease, and every node is marked, so the walk ends. */
static int btree(reader *r, uint64_t addr, int level, members *ms)
{
    cursor c;
    uint64_t at;
    if (locate(r, addr, 8, "B-tree node", &c, &at) < 0 || mark(r, at, "B-tree node") < 0)
        return -1;
    int ok = signature(&c, "TREE"), type = (int)get(&c, 1), lvl = (int)get(&c, 1);
    uint64_t n = get(&c, 2);
    get_addr(r, &c);
    get_addr(r, &c);
    if (!ok || c.bad) return fail(r, "B-tree node at %llu: bad signature or truncated",
                                  (unsigned long long)addr);
    if (type != 0) return fail(r, "B-tree node at %llu: type %d is not a group node",
                               (unsigned long long)addr, type);
    if (level >= 0 && lvl != level)
        return fail(r, "B-tree node at %llu: level %d where its parent expects %d",
                    (unsigned long long)addr, lvl, level);
    if (spend(r, n * (uint64_t)(r->so + r->sl)) < 0) return -1;
    for (uint64_t i = 0; i < n; i++) {
        get_len(r, &c); /* key: the heap offset of the greatest name on the left */
        uint64_t child = get_addr(r, &c);
        if (c.bad) return fail(r, "B-tree node at %llu: truncated", (unsigned long long)addr);
        if ((lvl > 0 ? btree(r, child, lvl - 1, ms) : symbol_node(r, child, ms)) < 0)
            return -1;
    }
    return 0;
}

static int symbol_table(reader *r, const header *h, members *ms)
{
    cursor c;
    if (locate(r, h->heap, 8, "local heap", &c, NULL) < 0) return -1;
    int ok = signature(&c, "HEAP") && get(&c, 1) == 0;
    take(&c, 3);
    uint64_t size = get_len(r, &c);
    get_len(r, &c);
    uint64_t data = get_addr(r, &c);
    if (!ok || c.bad) return fail(r, "local heap: bad signature, version or truncated");
    if (locate(r, data, size, "local heap data", &c, NULL) < 0) return -1;
    ms->names = c.p;
    ms->names_size = size;
    return btree(r, h->btree, -1, ms);
}

/* ---- objects ------------------------------------------------------------------------------ */

static int by_name(const void *a, const void *b)
{
    const member *x = a, *y = b;
    int d = memcmp(x->name, y->name, x->len < y->len ? x->len : y->len);
    return d ? d : (x->len > y->len) - (x->len < y->len);
}

/* A new object at the end of the list, its index in *i. */
static int add_object(reader *r, const char *path, const header *h, int *i)
{
    tfc_h5_file *f = r->f;
    if (f->count >= TFC_H5_MAX_OBJECTS)
        return fail(r, "more than %d objects", TFC_H5_MAX_OBJECTS);
    size_t cap = (size_t)f->cap;
    if (grow(r, (void **)&f->objs, &cap, (size_t)f->count, sizeof *f->objs) < 0) return -1;
    f->cap = (int)cap;
    tfc_h5_object *o = &f->objs[f->count];
    memset(o, 0, sizeof *o);
    o->path = path;
    o->n_attrs = (int)h->nattrs;
    if (h->nattrs) {
        tfc_h5_attr *a = keep(r, h->nattrs * sizeof *a);
        if (!a) return -1;
        memcpy(a, h->attrs, h->nattrs * sizeof *a);
        o->attrs = a;
    }
    *i = f->count++;
    return 0;
}

/* Type, shape and data of the dataset that object i is. */
static int dataset(reader *r, const header *h, tfc_h5_object *o)
{
    dtype_info t;
    space s;
    uint64_t n;
    if (!h->type.p || !h->space.p) return fail(r, "dataset without a datatype or dataspace");
    if (h->shared_type) return fail(r, "datatype: committed (shared) datatypes are not supported");
    if (parse_type(r, h->type, &t, "datatype") < 0 || parse_space(r, h->space, &s, "dataspace") < 0)
        return -1;
    if (t.kind != K_NUMBER) return fail(r, "datatype: %s data is not supported", t.what);
    if (s.null) return fail(r, "dataspace: a null dataspace (h5py.Empty) is not supported");
    if (count_elements(r, &s, t.size, r->len, "dataspace", &n) < 0) return -1;
    o->is_dataset = 1;
    o->dtype = t.dtype;
    o->shape.ndim = s.rank;
    for (int i = 0; i < s.rank; i++) o->shape.dim[i] = (int64_t)s.dim[i];
    o->numel = (int64_t)n;
    o->nbytes = (size_t)(n * t.size);
    if (h->data_size < o->nbytes)
        return fail(r, "layout: the data holds %llu bytes but %s %s needs %zu",
                    (unsigned long long)h->data_size, tfc_dtype_name(o->dtype),
                    s.rank ? "array" : "scalar", o->nbytes);
    if (o->nbytes == 0) return 0;
    if (h->layout == 1) {
        o->data = h->compact;
        return 0;
    }
    if (h->data_addr == UNDEF) {
        /* never written: the fill value, which must be zero (the data is set after parse) */
        if (h->fill_nonzero) return fail(r, "layout: an unwritten dataset with a non-zero fill "
                                            "value is not supported");
        return 0;
    }
    cursor c;
    if (locate(r, h->data_addr, o->nbytes, "data", &c, NULL) < 0) return -1;
    o->data = c.p;
    return 0;
}

static int visit(reader *r, uint64_t addr, const char *path, int depth);

/* The members of group `path`, sorted by name, each visited. */
static int group_members(reader *r, const header *h, const char *path, int depth)
{
    members ms = {0};
    int rc = 0;
    if (h->stab) rc = symbol_table(r, h, &ms);
    else if (h->nlinks) {
        ms.m = malloc(h->nlinks * sizeof *ms.m);
        if (!ms.m) rc = nomem(r, h->nlinks * sizeof *ms.m);
        else memcpy(ms.m, h->links, h->nlinks * sizeof *ms.m);
        ms.n = h->nlinks;
    }
    if (ms.n > 1) qsort(ms.m, ms.n, sizeof *ms.m, by_name);
    size_t plen = strlen(path);
    for (size_t i = 0; rc == 0 && i < ms.n; i++) {
        const member *m = &ms.m[i];
        if (m->len == 0 || memchr(m->name, '/', m->len) || memchr(m->name, 0, m->len))
            rc = fail(r, "a member's name is empty or holds '/' or NUL");
        else if (i > 0 && by_name(m, m - 1) == 0) {
            char name[100], sn[100];
            snprintf(name, sizeof name, "%.*s", (int)(m->len < 99 ? m->len : 99), m->name);
            rc = fail(r, "two members are called '%s'", shown(name, sn, sizeof sn));
        }
        if (rc) break;
        char *child = keep(r, plen + m->len + 2);
        if (!child) rc = -1;
        else {
            snprintf(child, plen + m->len + 2, "%s%s%.*s", path, plen ? "/" : "", (int)m->len,
                     m->name);
            rc = visit(r, m->addr, child, depth + 1);
            r->path = path;
        }
    }
    free(ms.m);
    return rc;
}

/* Reads the object header at `addr`, adds the object, then (a group) its members. */
static int visit(reader *r, uint64_t addr, const char *path, int depth)
{
    r->path = path;
    if (depth > TFC_H5_MAX_DEPTH) return fail(r, "groups nest deeper than %d", TFC_H5_MAX_DEPTH);
    header h = {0};
    int i = 0, rc = read_header(r, addr, &h);
    int group = h.stab || h.new_group;
    if (rc == 0) rc = add_object(r, path, &h, &i);
    if (rc == 0 && group) rc = group_members(r, &h, path, depth);
    else if (rc == 0 && h.layout) rc = dataset(r, &h, &r->f->objs[i]);
    else if (rc == 0)
        rc = fail(r, h.type.p ? "committed (named) datatypes are not supported"
                              : "the object header holds neither a group nor a dataset");
    free(h.links);
    free(h.attrs);
    free(h.cont);
    return rc;
}

/* ---- the superblock (II.A) ---------------------------------------------------------------- */

static int superblock(reader *r, size_t at, uint64_t *root)
{
    cursor c = {r->buf + at + 8, r->len - at - 8, 0};
    int version = (int)get(&c, 1);
    if (version <= 1) {
        take(&c, 4);
        r->so = (int)get(&c, 1);
        r->sl = (int)get(&c, 1);
        take(&c, 1 + 2 + 2 + 4 + (version == 1 ? 4 : 0));
    } else if (version <= 3) {
        r->so = (int)get(&c, 1);
        r->sl = (int)get(&c, 1);
        take(&c, 1);
    } else
        return fail(r, "superblock version %d is not supported", version);
    if (c.bad) return fail(r, "the superblock is truncated");
    for (int i = 0; i < 2; i++) {
        int s = i ? r->sl : r->so;
        if (s != 2 && s != 4 && s != 8)
            return fail(r, "superblock: size of %s %d is not 2, 4 or 8",
                        i ? "lengths" : "offsets", s);
    }
    uint64_t base = get_addr(r, &c), eof;
    if (version <= 1) {
        get_addr(r, &c);
        eof = get_addr(r, &c);
        get_addr(r, &c);
        get_addr(r, &c); /* the root's symbol table entry: link name offset, then header */
        *root = get_addr(r, &c);
        take(&c, 24);
    } else {
        get_addr(r, &c);
        eof = get_addr(r, &c);
        *root = get_addr(r, &c);
        take(&c, 4);
    }
    if (c.bad) return fail(r, "the superblock is truncated");
    /* As libhdf5 does, addresses count from the signature whatever the base address says
     * (a file copied behind a user block), and the end-of-file address moves with it. It
     * is absolute (libhdf5 compares it with the file's size), user block included. */
    r->base = at;
    if (eof != UNDEF) eof = eof - base + at;
    if (eof == UNDEF || eof > r->len)
        return fail(r, "truncated: the superblock puts the end of the file at byte %llu but "
                       "the file has %zu bytes", (unsigned long long)eof, r->len);
    return 0;
}

/* The superblock's offset: 0, 512, 1024, 2048, ... (after a user block), or -1. */
static int64_t find_signature(const uint8_t *buf, size_t len)
{
    static const uint8_t SIG[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    for (size_t at = 0; at <= len && len - at >= 8; at = at ? 2 * at : 512)
        if (memcmp(buf + at, SIG, 8) == 0) return (int64_t)at;
    return -1;
}

/* ---- the public calls --------------------------------------------------------------------- */

static int by_path(const void *a, const void *b)
{
    return strcmp((*(const tfc_h5_object *const *)a)->path,
                  (*(const tfc_h5_object *const *)b)->path);
}

/* The index for tfc_h5_find, and the zeros of unwritten datasets. */
static int finish(reader *r)
{
    tfc_h5_file *f = r->f;
    size_t zeros = 0;
    for (int i = 0; i < f->count; i++)
        if (f->objs[i].nbytes && !f->objs[i].data && f->objs[i].nbytes > zeros)
            zeros = f->objs[i].nbytes;
    if (zeros) {
        f->zeros = calloc(1, zeros);
        if (!f->zeros) return nomem(r, zeros);
        for (int i = 0; i < f->count; i++)
            if (f->objs[i].nbytes && !f->objs[i].data) f->objs[i].data = f->zeros;
    }
    f->by_path = malloc((size_t)f->count * sizeof *f->by_path);
    if (!f->by_path) return nomem(r, (size_t)f->count * sizeof *f->by_path);
    for (int i = 0; i < f->count; i++) f->by_path[i] = &f->objs[i];
    qsort(f->by_path, (size_t)f->count, sizeof *f->by_path, by_path);
    return 0;
}

tfc_h5_file *tfc_h5_parse(const void *buf, size_t len, const char *name, tfc_error *err)
{
    int64_t at = find_signature(buf, len);
    if (at < 0) {
        tfc_error_at(err, TFC_ERR_USAGE, name, 0, 0, NULL, NULL,
                     "not an HDF5 file (no HDF5 signature at byte 0, 512, 1024, ...)");
        return NULL;
    }
    tfc_h5_file *f = calloc(1, sizeof *f);
    if (!f) {
        tfc_error_at(err, TFC_ERR_NOMEM, name, 0, 0, NULL, NULL, "cannot allocate a file");
        return NULL;
    }
    reader r = {.buf = buf, .len = len, .name = name, .err = err, .f = f, .heap_addr = UNDEF};
    r.budget = len > (UINT64_MAX >> 5) ? UINT64_MAX : 16 * (uint64_t)len + (1u << 20);
    uint64_t root = UNDEF;
    int rc = superblock(&r, (size_t)at, &root);
    if (rc == 0) rc = visit(&r, root, "", 0);
    if (rc == 0) rc = finish(&r);
    free(r.seen.slot);
    free(r.objects);
    if (rc == 0) return f;
    tfc_h5_close(f);
    return NULL;
}

tfc_h5_file *tfc_h5_open(const char *path, tfc_error *err)
{
    char *buf;
    size_t len;
    if (tfc_file_read_all(path, SIZE_MAX / 2, &buf, &len, err) != TFC_OK) return NULL;
    tfc_h5_file *f = tfc_h5_parse(buf, len, path, err);
    if (!f) free(buf);
    else f->bytes = buf;
    return f;
}

void tfc_h5_close(tfc_h5_file *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->nkept; i++) free(f->kept[i]);
    free(f->kept);
    free(f->objs);
    free(f->by_path);
    free(f->zeros);
    free(f->bytes);
    free(f);
}

int tfc_h5_count(const tfc_h5_file *f) { return f->count; }

const tfc_h5_object *tfc_h5_object_at(const tfc_h5_file *f, int i)
{
    TFC_ASSERT(i >= 0 && i < f->count);
    return &f->objs[i];
}

const tfc_h5_object *tfc_h5_find(const tfc_h5_file *f, const char *path)
{
    tfc_h5_object key = {.path = path};
    const tfc_h5_object *k = &key;
    const tfc_h5_object **hit =
        bsearch(&k, f->by_path, (size_t)f->count, sizeof *f->by_path, by_path);
    return hit ? *hit : NULL;
}

const tfc_h5_attr *tfc_h5_attr_find(const tfc_h5_object *o, const char *name)
{
    for (int i = 0; i < o->n_attrs; i++)
        if (strcmp(o->attrs[i].name, name) == 0) return &o->attrs[i];
    return NULL;
}
