/* Whole-file gzip inflation for the sources that read compressed files (idx, tfrecord): every
 * member's CRC-32 and length (ISIZE) are checked by zlib when its trailer is read, and the
 * stream must end exactly: a file cut before a trailer, or followed by bytes that are not
 * another gzip member, is corrupt. The buffer starts at the size the trailer announces (when
 * deflate could produce it from this many bytes) and grows only as data actually arrives. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data/internal.h"

/* Deflate expands at most 1032:1; a trailer announcing more is not used as a size hint. */
#define GZ_MAX_RATIO 1032
#define GZ_CHUNK ((size_t)1 << 30) /* zlib counts in uInt */

int tfc_is_gzip(const void *buf, size_t len)
{
    const unsigned char *b = buf;
    return len >= 2 && b[0] == 0x1f && b[1] == 0x8b;
}

/* The first buffer size: the last member's ISIZE when plausible, else 64 KiB. */
static size_t first_capacity(const unsigned char *in, size_t inlen, size_t max_out)
{
    size_t cap = (size_t)1 << 16;
    if (inlen >= 18) {
        const unsigned char *t = in + inlen - 4;
        size_t isize = (size_t)t[0] | (size_t)t[1] << 8 | (size_t)t[2] << 16 |
                       (size_t)t[3] << 24;
        if (isize > 0 && isize / GZ_MAX_RATIO <= inlen) cap = isize;
    }
    return cap < max_out ? cap : max_out;
}

tfc_status tfc_gunzip(const void *in, size_t inlen, const char *name, size_t max_out,
                      unsigned char **out, size_t *outlen, tfc_error *err)
{
    const unsigned char *src = in;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
        return tfc_error_set(err, TFC_ERR_NOMEM, "%s: cannot start zlib", name);
    size_t cap = first_capacity(src, inlen, max_out), len = 0, fed = 0;
    unsigned char *buf = malloc(cap);
    tfc_status st = buf ? TFC_OK : tfc_error_set(err, TFC_ERR_NOMEM, "out of memory "
                                                 "inflating %s", name);
    while (!st) {
        if (z.avail_in == 0 && fed < inlen) {
            size_t chunk = inlen - fed > GZ_CHUNK ? GZ_CHUNK : inlen - fed;
            z.next_in = (unsigned char *)src + fed;
            z.avail_in = (uInt)chunk;
            fed += chunk;
        }
        if (len == cap) {
            if (cap >= max_out) {
                st = tfc_error_set(err, TFC_ERR_DATA, "%s: inflates to more than %zu bytes",
                                   name, max_out);
                break;
            }
            size_t ncap = cap > max_out / 2 ? max_out : cap * 2;
            unsigned char *nb = realloc(buf, ncap);
            if (!nb) {
                st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory inflating %s", name);
                break;
            }
            buf = nb;
            cap = ncap;
        }
        size_t room = cap - len > GZ_CHUNK ? GZ_CHUNK : cap - len;
        z.next_out = buf + len;
        z.avail_out = (uInt)room;
        int r = inflate(&z, Z_NO_FLUSH);
        len += room - z.avail_out;
        if (r == Z_STREAM_END) {
            size_t rest = z.avail_in + (inlen - fed);
            const unsigned char *next = z.avail_in ? z.next_in : src + fed;
            if (rest == 0) break;
            if (tfc_is_gzip(next, rest)) { /* another member (`cat a.gz b.gz`) */
                inflateReset(&z);
                continue;
            }
            st = tfc_error_set(err, TFC_ERR_DATA, "%s: corrupt gzip file: %zu bytes of "
                               "trailing garbage after the compressed data", name, rest);
        } else if (r == Z_BUF_ERROR && z.avail_in == 0 && fed >= inlen && z.avail_out) {
            st = tfc_error_set(err, TFC_ERR_DATA, "%s: corrupt gzip file: truncated (the "
                               "data ends before the gzip trailer, after %zu inflated bytes)",
                               name, len);
        } else if (r != Z_OK && r != Z_BUF_ERROR) {
            st = tfc_error_set(err, TFC_ERR_DATA, "%s: corrupt gzip file (%s)", name,
                               z.msg ? z.msg : "inflate failed");
        }
    }
    inflateEnd(&z);
    if (st) {
        free(buf);
        return st;
    }
    *out = buf;
    *outlen = len;
    return TFC_OK;
}
