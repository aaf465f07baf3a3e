/* Zip reader (see zip.h). Parsing walks the end records back to front (EOCD, then the zip64
 * locator and record when present), then the central directory, checking every local header
 * it points at; nothing is allocated before the entry count is bounded by the directory's
 * size. Reading inflates into exactly the declared size, plus a one-byte probe that catches
 * a stream going on past it. All arithmetic on untrusted offsets is done as "fits in what is
 * left" comparisons, which cannot overflow. */
#include "core/zip.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/fileio.h"

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOCATOR 0x07064b50u

#define LOCAL_SIZE 30     /* fixed part of a local file header */
#define CENTRAL_SIZE 46   /* fixed part of a central directory file header */
#define EOCD_SIZE 22      /* end of central directory record, without its comment */
#define EOCD64_SIZE 56    /* zip64 end record, without its extensible data */
#define LOCATOR_SIZE 20   /* zip64 end of central directory locator */
#define MAX_COMMENT 65535 /* so the EOCD starts in the last 65557 bytes */

#define FLAG_ENCRYPTED 0x0001u
#define FLAG_DESCRIPTOR 0x0008u /* CRC-32 and sizes follow the data, zero in the local header */
#define FLAG_STRONG 0x0040u     /* strong encryption */
#define ZIP64_EXTRA 0x0001u

#define ZCHUNK ((size_t)1 << 30) /* zlib counts in uInt */
/* Deflate expands at most 1032:1 (zlib's technical notes); an entry declaring more than its
 * compressed size allows is damaged, and refusing it bounds the allocation by the input. */
#define DEFLATE_MAX_RATIO 1032

typedef struct entry {
    char *name;
    uint64_t csize, usize; /* compressed and uncompressed sizes */
    uint64_t data;         /* offset of the entry's data in the buffer */
    uint32_t crc;
    unsigned method, flags;
} entry;

struct tfc_zip {
    const unsigned char *buf;
    size_t len;
    char *owned; /* the file read by tfc_zip_open */
    char *file;  /* the name errors give */
    int count;
    entry *e;       /* central-directory order */
    entry **sorted; /* by name, for tfc_zip_find */
};

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* ---- messages ---------------------------------------------------------------------------- */

/* `n` bytes of an untrusted name made safe to print: control bytes become '?', and long
 * names are cut with "...". */
static const char *shown(const char *s, size_t n, char *out, size_t size)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k + 4 >= size) {
            memcpy(out + k, "...", 3);
            k += 3;
            break;
        }
        unsigned char c = (unsigned char)s[i];
        out[k++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    out[k] = 0;
    return out;
}

#define FORMAT_ERROR(err, z, ...) \
    tfc_error_at((err), TFC_ERR_FORMAT, (z)->file, 0, 0, NULL, NULL, __VA_ARGS__)

/* ---- parsing ----------------------------------------------------------------------------- */

void tfc_zip_close(tfc_zip *z)
{
    if (!z) return;
    for (int i = 0; i < z->count; i++) free(z->e[i].name);
    free(z->e);
    free(z->sorted);
    free(z->owned);
    free(z->file);
    free(z);
}

/* Where the central directory is, from the end records. */
typedef struct dir_info {
    uint64_t count, size, offset;
    uint64_t end; /* where the record after the directory starts: nothing may pass it */
} dir_info;

/* The EOCD's offset, or -1: the record whose comment ends the buffer exactly, else the last
 * one that fits (some writers leave bytes after the comment). */
static long long find_eocd(const unsigned char *b, size_t len)
{
    if (len < EOCD_SIZE) return -1;
    size_t lo = len - EOCD_SIZE > MAX_COMMENT ? len - EOCD_SIZE - MAX_COMMENT : 0;
    long long fits = -1;
    for (size_t pos = len - EOCD_SIZE + 1; pos-- > lo;) {
        if (rd32(b + pos) != SIG_EOCD) continue;
        size_t clen = rd16(b + pos + 20);
        if (clen == len - pos - EOCD_SIZE) return (long long)pos;
        if (clen < len - pos - EOCD_SIZE && fits < 0) fits = (long long)pos;
    }
    return fits;
}

static tfc_status read_zip64_end(const tfc_zip *z, size_t eocd, dir_info *d, tfc_error *err)
{
    const unsigned char *b = z->buf;
    const unsigned char *loc = b + eocd - LOCATOR_SIZE;
    uint32_t disk = rd32(loc + 4), ndisks = rd32(loc + 16);
    uint64_t off = rd64(loc + 8);
    size_t limit = eocd - LOCATOR_SIZE;
    if (disk != 0 || ndisks > 1)
        return FORMAT_ERROR(err, z, "the archive spans several disks (its zip64 end record "
                            "is on disk %u of %u); tfc reads single-file archives only", disk,
                            ndisks);
    if (off > limit || limit - off < EOCD64_SIZE)
        return FORMAT_ERROR(err, z, "the zip64 end record's offset %llu is outside the "
                            "archive (the locator is at %zu)", (unsigned long long)off, limit);
    const unsigned char *r = b + off;
    if (rd32(r) != SIG_EOCD64)
        return FORMAT_ERROR(err, z, "no zip64 end record at offset %llu, where the locator "
                            "points", (unsigned long long)off);
    uint64_t rsize = rd64(r + 4);
    if (rsize < EOCD64_SIZE - 12 || rsize > limit - off - 12)
        return FORMAT_ERROR(err, z, "the zip64 end record's size %llu does not fit before "
                            "its locator", (unsigned long long)rsize);
    if (rd32(r + 16) != 0 || rd32(r + 20) != 0 || rd64(r + 24) != rd64(r + 32))
        return FORMAT_ERROR(err, z, "the archive spans several disks; tfc reads single-file "
                            "archives only");
    d->count = rd64(r + 32);
    d->size = rd64(r + 40);
    d->offset = rd64(r + 48);
    d->end = off;
    return TFC_OK;
}

static tfc_status read_end(const tfc_zip *z, dir_info *d, tfc_error *err)
{
    const unsigned char *b = z->buf;
    long long pos = find_eocd(b, z->len);
    if (pos < 0) {
        if (z->len >= 4 && rd32(b) == SIG_LOCAL)
            return FORMAT_ERROR(err, z, "no end of central directory record: the archive is "
                                "cut short or damaged");
        return tfc_error_at(err, TFC_ERR_USAGE, z->file, 0, 0, NULL, NULL,
                            "not a zip archive (no end of central directory record)");
    }
    size_t eocd = (size_t)pos;
    const unsigned char *r = b + eocd;
    if (eocd >= LOCATOR_SIZE && rd32(r - LOCATOR_SIZE) == SIG_LOCATOR)
        return read_zip64_end(z, eocd, d, err);
    unsigned disk = rd16(r + 4), cd_disk = rd16(r + 6), n_disk = rd16(r + 8), n = rd16(r + 10);
    if (disk != 0 || cd_disk != 0 || n_disk != n)
        return FORMAT_ERROR(err, z, "the archive spans several disks; tfc reads single-file "
                            "archives only");
    d->count = n;
    d->size = rd32(r + 12);
    d->offset = rd32(r + 16);
    d->end = eocd;
    return TFC_OK;
}

/* Reads the zip64 extra field of `extra` (xlen bytes) into the fields that are 0xFFFFFFFF
 * (*usize, then *csize, then *offset when given), as APPNOTE 4.5.3 orders them. Returns 0
 * when a needed field is missing or the extra block is malformed; *why says which. */
static int read_zip64_extra(const unsigned char *extra, size_t xlen, uint64_t *usize,
                            uint64_t *csize, uint64_t *offset, const char **why)
{
    int need = (*usize == 0xffffffffu) + (*csize == 0xffffffffu) +
               (offset && *offset == 0xffffffffu);
    size_t k = 0;
    while (k < xlen) {
        if (xlen - k < 4) {
            *why = "its extra field ends inside a block header";
            return 0;
        }
        unsigned id = rd16(extra + k), size = rd16(extra + k + 2);
        k += 4;
        if (size > xlen - k) {
            *why = "an extra field block runs past the extra field";
            return 0;
        }
        if (id == ZIP64_EXTRA && need > 0) {
            if (size < 8u * (unsigned)need) {
                *why = "its zip64 extra field is too short for the sizes it must hold";
                return 0;
            }
            const unsigned char *p = extra + k;
            if (*usize == 0xffffffffu) *usize = rd64(p), p += 8;
            if (*csize == 0xffffffffu) *csize = rd64(p), p += 8;
            if (offset && *offset == 0xffffffffu) *offset = rd64(p);
            need = 0;
        }
        k += size;
    }
    if (need > 0) {
        *why = "a size or offset is 0xFFFFFFFF but there is no zip64 extra field";
        return 0;
    }
    return 1;
}

/* Checks entry `e`'s local header at `lho` against it and sets e->data. `end` is where the
 * central directory starts: the header and the data must end before it. */
static tfc_status check_local(const tfc_zip *z, entry *e, uint64_t lho, uint64_t end,
                              tfc_error *err)
{
    char sn[160];
    const char *nm = shown(e->name, strlen(e->name), sn, sizeof sn);
    if (lho > end || end - lho < LOCAL_SIZE)
        return FORMAT_ERROR(err, z, "entry '%s': its local header offset %llu is not before "
                            "the central directory (at %llu)", nm, (unsigned long long)lho,
                            (unsigned long long)end);
    const unsigned char *h = z->buf + lho;
    if (rd32(h) != SIG_LOCAL)
        return FORMAT_ERROR(err, z, "entry '%s': no local file header at offset %llu", nm,
                            (unsigned long long)lho);
    size_t nlen = rd16(h + 26), xlen = rd16(h + 28);
    uint64_t room = end - lho - LOCAL_SIZE;
    if (nlen + xlen > room)
        return FORMAT_ERROR(err, z, "entry '%s': its local header runs into the central "
                            "directory", nm);
    const char *lname = (const char *)h + LOCAL_SIZE;
    if (nlen != strlen(e->name) || memcmp(lname, e->name, nlen) != 0) {
        char sl[160];
        return FORMAT_ERROR(err, z, "entry '%s': its local header names it '%s'", nm,
                            shown(lname, nlen, sl, sizeof sl));
    }
    unsigned method = rd16(h + 8), flags = rd16(h + 6);
    if (method != e->method)
        return FORMAT_ERROR(err, z, "entry '%s': its local header says compression method %u, "
                            "the central directory %u", nm, method, e->method);
    if ((flags & FLAG_ENCRYPTED) != (e->flags & FLAG_ENCRYPTED))
        return FORMAT_ERROR(err, z, "entry '%s': its local header and the central directory "
                            "disagree on whether it is encrypted", nm);
    if (!(flags & FLAG_DESCRIPTOR)) {
        uint32_t crc = rd32(h + 14);
        uint64_t csize = rd32(h + 18), usize = rd32(h + 22);
        const char *why = NULL;
        if (!read_zip64_extra(h + LOCAL_SIZE + nlen, xlen, &usize, &csize, NULL, &why))
            return FORMAT_ERROR(err, z, "entry '%s': local header: %s", nm, why);
        if (crc != e->crc || csize != e->csize || usize != e->usize)
            return FORMAT_ERROR(err, z, "entry '%s': its local header says CRC-32 %08x, %llu "
                                "bytes compressed, %llu uncompressed; the central directory "
                                "%08x, %llu, %llu", nm, (unsigned)crc,
                                (unsigned long long)csize, (unsigned long long)usize,
                                (unsigned)e->crc, (unsigned long long)e->csize,
                                (unsigned long long)e->usize);
    }
    room -= nlen + xlen;
    if (e->csize > room)
        return FORMAT_ERROR(err, z, "entry '%s': its %llu bytes of data run past the start of "
                            "the central directory", nm, (unsigned long long)e->csize);
    e->data = lho + LOCAL_SIZE + nlen + xlen;
    return TFC_OK;
}

/* Reads the central directory entry at `*pos` (advanced past it) into `e`. */
static tfc_status read_central(tfc_zip *z, const dir_info *d, uint64_t *pos, int index,
                               entry *e, tfc_error *err)
{
    uint64_t left = d->offset + d->size - *pos;
    const unsigned char *h = z->buf + *pos;
    if (left < CENTRAL_SIZE || rd32(h) != SIG_CENTRAL)
        return FORMAT_ERROR(err, z, "central directory entry %d of %llu: %s", index + 1,
                            (unsigned long long)d->count,
                            left < CENTRAL_SIZE ? "the directory ends inside it"
                                                : "bad signature");
    size_t nlen = rd16(h + 28), xlen = rd16(h + 30), clen = rd16(h + 32);
    if (nlen + xlen + clen > left - CENTRAL_SIZE)
        return FORMAT_ERROR(err, z, "central directory entry %d of %llu: its name, extra "
                            "field and comment run past the directory", index + 1,
                            (unsigned long long)d->count);
    const char *name = (const char *)h + CENTRAL_SIZE;
    char sn[160];
    const char *nm = shown(name, nlen, sn, sizeof sn);
    if (memchr(name, 0, nlen))
        return FORMAT_ERROR(err, z, "entry '%s': its name holds a NUL byte", nm);
    e->name = malloc(nlen + 1);
    if (!e->name) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory reading %s", z->file);
    memcpy(e->name, name, nlen);
    e->name[nlen] = 0;
    e->flags = rd16(h + 8);
    e->method = rd16(h + 10);
    e->crc = rd32(h + 16);
    e->csize = rd32(h + 20);
    e->usize = rd32(h + 24);
    uint64_t lho = rd32(h + 42);
    if (rd16(h + 34) != 0 && rd16(h + 34) != 0xffffu)
        return FORMAT_ERROR(err, z, "entry '%s': it starts on disk %u; tfc reads single-file "
                            "archives only", nm, rd16(h + 34) + 1u);
    const char *why = NULL;
    if (!read_zip64_extra(h + CENTRAL_SIZE + nlen, xlen, &e->usize, &e->csize, &lho, &why))
        return FORMAT_ERROR(err, z, "entry '%s': central directory: %s", nm, why);
    *pos += CENTRAL_SIZE + nlen + xlen + clen;
    return check_local(z, e, lho, d->offset, err);
}

static int by_name(const void *a, const void *b)
{
    return strcmp((*(entry *const *)a)->name, (*(entry *const *)b)->name);
}

tfc_zip *tfc_zip_parse(const void *buf, size_t len, const char *name, tfc_error *err)
{
    tfc_zip *z = calloc(1, sizeof *z);
    if (z) z->file = strdup(name ? name : "");
    if (!z || !z->file) {
        tfc_error_set(err, TFC_ERR_NOMEM, "out of memory reading %s", name ? name : "");
        tfc_zip_close(z);
        return NULL;
    }
    z->buf = buf;
    z->len = len;
    dir_info d = {0, 0, 0, 0};
    if (read_end(z, &d, err)) goto fail;
    if (d.offset > d.end || d.size > d.end - d.offset) {
        FORMAT_ERROR(err, z, "the central directory (%llu bytes at offset %llu) is not inside "
                     "the archive, before its end record (at %llu)", (unsigned long long)d.size,
                     (unsigned long long)d.offset, (unsigned long long)d.end);
        goto fail;
    }
    /* Each entry takes at least CENTRAL_SIZE bytes: this bounds the allocation below. */
    if (d.count > d.size / CENTRAL_SIZE || d.count > INT32_MAX) {
        FORMAT_ERROR(err, z, "%llu entries cannot fit in a central directory of %llu bytes",
                     (unsigned long long)d.count, (unsigned long long)d.size);
        goto fail;
    }
    size_t n = (size_t)d.count;
    z->e = calloc(n ? n : 1, sizeof *z->e);
    z->sorted = malloc((n ? n : 1) * sizeof *z->sorted);
    if (!z->e || !z->sorted) {
        tfc_error_set(err, TFC_ERR_NOMEM, "cannot allocate %zu zip entries of %s", n, z->file);
        goto fail;
    }
    uint64_t pos = d.offset;
    for (size_t i = 0; i < n; i++) {
        z->count = (int)i + 1; /* so close frees the name read so far */
        if (read_central(z, &d, &pos, (int)i, &z->e[i], err)) goto fail;
        z->sorted[i] = &z->e[i];
    }
    qsort(z->sorted, n, sizeof *z->sorted, by_name);
    for (size_t i = 1; i < n; i++)
        if (strcmp(z->sorted[i - 1]->name, z->sorted[i]->name) == 0) {
            char sn[160];
            const char *s = z->sorted[i]->name;
            FORMAT_ERROR(err, z, "entry '%s' appears twice", shown(s, strlen(s), sn, sizeof sn));
            goto fail;
        }
    return z;

fail:
    tfc_zip_close(z);
    return NULL;
}

tfc_zip *tfc_zip_open(const char *path, tfc_error *err)
{
    char *buf;
    size_t len;
    if (tfc_file_read_all(path, SIZE_MAX, &buf, &len, err)) return NULL;
    tfc_zip *z = tfc_zip_parse(buf, len, path, err);
    if (!z) {
        free(buf);
        return NULL;
    }
    z->owned = buf;
    return z;
}

int tfc_zip_count(const tfc_zip *z) { return z->count; }

const char *tfc_zip_name_at(const tfc_zip *z, int i)
{
    TFC_ASSERT(i >= 0 && i < z->count);
    return z->e[i].name;
}

int tfc_zip_find(const tfc_zip *z, const char *entry_name)
{
    int lo = 0, hi = z->count;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(z->sorted[mid]->name, entry_name);
        if (c == 0) return (int)(z->sorted[mid] - z->e);
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* ---- reading ----------------------------------------------------------------------------- */

static const char *method_name(unsigned m)
{
    switch (m) {
    case 1: return " (shrink)";
    case 6: return " (implode)";
    case 9: return " (deflate64)";
    case 12: return " (bzip2)";
    case 14: return " (LZMA)";
    case 93: return " (Zstandard)";
    case 95: return " (xz)";
    case 99: return " (AES encryption)";
    default: return "";
    }
}

/* Inflates e's raw deflate data into out (exactly e->usize bytes). */
static tfc_status inflate_entry(const tfc_zip *z, const entry *e, unsigned char *out,
                                const char *nm, tfc_error *err)
{
    z_stream s;
    memset(&s, 0, sizeof s);
    if (inflateInit2(&s, -MAX_WBITS) != Z_OK)
        return tfc_error_set(err, TFC_ERR_NOMEM, "%s: cannot start zlib", z->file);
    const unsigned char *in = z->buf + e->data;
    uint64_t in_left = e->csize, out_left = e->usize, done = 0;
    unsigned char probe; /* past the declared size: any byte inflated here is one too many */
    int probing = 0;
    tfc_status st = TFC_OK;
    for (;;) {
        if (s.avail_in == 0 && in_left > 0) {
            size_t k = in_left > ZCHUNK ? ZCHUNK : (size_t)in_left;
            s.next_in = (unsigned char *)in;
            s.avail_in = (uInt)k;
            in += k;
            in_left -= k;
        }
        if (s.avail_out == 0 && !probing) {
            if (out_left > 0) {
                size_t k = out_left > ZCHUNK ? ZCHUNK : (size_t)out_left;
                s.next_out = out + done;
                s.avail_out = (uInt)k;
                out_left -= k;
                done += k;
            } else {
                s.next_out = &probe;
                s.avail_out = 1;
                probing = 1;
            }
        }
        int r = inflate(&s, Z_NO_FLUSH);
        if (probing && s.avail_out == 0) {
            st = FORMAT_ERROR(err, z, "entry '%s': inflates past its declared size of %llu "
                              "bytes", nm, (unsigned long long)e->usize);
            break;
        }
        uint64_t got = probing ? done : done - s.avail_out;
        if (r == Z_STREAM_END) {
            if (got != e->usize)
                st = FORMAT_ERROR(err, z, "entry '%s': inflates to %llu bytes, its declared "
                                  "size is %llu", nm, (unsigned long long)got,
                                  (unsigned long long)e->usize);
            break;
        }
        if (r == Z_OK || (r == Z_BUF_ERROR && s.avail_in == 0 && in_left > 0)) continue;
        if (r == Z_MEM_ERROR)
            st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory inflating '%s' of %s", nm,
                               z->file);
        else if (r == Z_BUF_ERROR && s.avail_in == 0)
            st = FORMAT_ERROR(err, z, "entry '%s': its deflate data ends early, after %llu of "
                              "%llu bytes", nm, (unsigned long long)got,
                              (unsigned long long)e->usize);
        else
            st = FORMAT_ERROR(err, z, "entry '%s': damaged deflate data (%s)", nm,
                              s.msg ? s.msg : "inflate failed");
        break;
    }
    inflateEnd(&s);
    return st;
}

static uint32_t crc_of(const unsigned char *p, uint64_t n)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    while (n > 0) {
        size_t k = n > ZCHUNK ? ZCHUNK : (size_t)n;
        crc = crc32(crc, p, (uInt)k);
        p += k;
        n -= k;
    }
    return (uint32_t)crc;
}

tfc_status tfc_zip_read(const tfc_zip *z, int i, size_t max_size, void **data, size_t *len,
                        tfc_error *err)
{
    *data = NULL;
    *len = 0;
    TFC_ASSERT(i >= 0 && i < z->count);
    const entry *e = &z->e[i];
    char sn[160];
    const char *nm = shown(e->name, strlen(e->name), sn, sizeof sn);
    if (e->flags & (FLAG_ENCRYPTED | FLAG_STRONG) || e->method == 99)
        return FORMAT_ERROR(err, z, "entry '%s' is encrypted; tfc reads unencrypted archives "
                            "only", nm);
    if (e->method != 0 && e->method != 8)
        return FORMAT_ERROR(err, z, "entry '%s' uses compression method %u%s; tfc reads stored "
                            "(0) and deflated (8) entries only", nm, e->method,
                            method_name(e->method));
    if (e->method == 8 && e->usize / DEFLATE_MAX_RATIO > e->csize)
        return FORMAT_ERROR(err, z, "entry '%s' declares %llu bytes uncompressed, more than "
                            "its %llu bytes of deflate data can hold", nm,
                            (unsigned long long)e->usize, (unsigned long long)e->csize);
    if (e->usize > max_size)
        return tfc_error_at(err, TFC_ERR_DATA, z->file, 0, 0, NULL, NULL,
                            "entry '%s' is %llu bytes uncompressed, more than the limit of %zu "
                            "bytes", nm, (unsigned long long)e->usize, max_size);
    if (e->method == 0 && e->csize != e->usize)
        return FORMAT_ERROR(err, z, "entry '%s' is stored, but its sizes differ (%llu bytes "
                            "compressed, %llu uncompressed)", nm, (unsigned long long)e->csize,
                            (unsigned long long)e->usize);
    if (e->usize >= SIZE_MAX)
        return tfc_error_set(err, TFC_ERR_NOMEM, "cannot allocate %llu bytes for '%s'",
                             (unsigned long long)e->usize, nm);
    unsigned char *out = malloc((size_t)e->usize + 1);
    if (!out)
        return tfc_error_set(err, TFC_ERR_NOMEM, "cannot allocate %llu bytes for '%s' of %s",
                             (unsigned long long)e->usize, nm, z->file);
    tfc_status st = TFC_OK;
    if (e->method == 0) memcpy(out, z->buf + e->data, (size_t)e->usize);
    else st = inflate_entry(z, e, out, nm, err);
    if (!st) {
        uint32_t crc = crc_of(out, e->usize);
        if (crc != e->crc)
            st = FORMAT_ERROR(err, z, "entry '%s': its data's CRC-32 is %08x, the archive says "
                              "%08x", nm, (unsigned)crc, (unsigned)e->crc);
    }
    if (st) {
        free(out);
        return st;
    }
    out[e->usize] = 0;
    *data = out;
    *len = (size_t)e->usize;
    return TFC_OK;
}
