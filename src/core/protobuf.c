/* Protocol-buffer wire encoding into a growable buffer, and decoding with a bounded cursor
 * (core/protobuf.h). */
#include "core/protobuf.h"

#include <stdlib.h>
#include <string.h>

void tfc_pb_free(tfc_pb *b)
{
    free(b->data);
    *b = (tfc_pb){0};
}

void tfc_pb_raw(tfc_pb *b, const void *data, size_t len)
{
    if (b->failed) return;
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + len) cap *= 2;
        uint8_t *d = realloc(b->data, cap);
        if (!d) {
            b->failed = 1;
            return;
        }
        b->data = d;
        b->cap = cap;
    }
    if (len) memcpy(b->data + b->len, data, len);
    b->len += len;
}

void tfc_pb_varint(tfc_pb *b, uint64_t v)
{
    uint8_t buf[10];
    size_t n = 0;
    while (v >= 0x80) {
        buf[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    buf[n++] = (uint8_t)v;
    tfc_pb_raw(b, buf, n);
}

void tfc_pb_key(tfc_pb *b, int field, int wire)
{
    tfc_pb_varint(b, (uint64_t)field << 3 | (uint64_t)wire);
}

static void put_le(tfc_pb *b, uint64_t v, int bytes)
{
    uint8_t buf[8];
    for (int i = 0; i < bytes; i++) buf[i] = (uint8_t)(v >> (8 * i));
    tfc_pb_raw(b, buf, (size_t)bytes);
}

void tfc_pb_int(tfc_pb *b, int field, int64_t v)
{
    tfc_pb_key(b, field, TFC_PB_VARINT);
    tfc_pb_varint(b, (uint64_t)v);
}

void tfc_pb_float(tfc_pb *b, int field, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    tfc_pb_key(b, field, TFC_PB_FIXED32);
    put_le(b, u, 4);
}

void tfc_pb_double(tfc_pb *b, int field, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    tfc_pb_key(b, field, TFC_PB_FIXED64);
    put_le(b, u, 8);
}

void tfc_pb_bytes(tfc_pb *b, int field, const void *data, size_t len)
{
    tfc_pb_key(b, field, TFC_PB_LEN);
    tfc_pb_varint(b, len);
    tfc_pb_raw(b, data, len);
}

void tfc_pb_string(tfc_pb *b, int field, const char *s)
{
    tfc_pb_bytes(b, field, s, strlen(s));
}

void tfc_pb_message(tfc_pb *b, int field, const tfc_pb *msg)
{
    if (msg->failed) b->failed = 1;
    tfc_pb_bytes(b, field, msg->data, msg->len);
}

/* ---- decoding ------------------------------------------------------------------------------ */

int tfc_pb_read_varint(tfc_pb_reader *r, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (r->p >= r->end) break;
        uint8_t b = *r->p++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 1;
        }
    }
    r->bad = 1;
    return 0;
}

static int read_le(tfc_pb_reader *r, int bytes, uint64_t *v)
{
    if (r->end - r->p < bytes) {
        r->bad = 1;
        return 0;
    }
    uint64_t x = 0;
    for (int i = 0; i < bytes; i++) x |= (uint64_t)r->p[i] << (8 * i);
    r->p += bytes;
    *v = x;
    return 1;
}

int tfc_pb_next(tfc_pb_reader *r, tfc_pb_field *f)
{
    if (r->bad || r->p >= r->end) return 0;
    uint64_t key;
    if (!tfc_pb_read_varint(r, &key)) return 0;
    if (key >> 3 == 0 || key >> 3 > 0x1fffffff) {
        r->bad = 1;
        return 0;
    }
    *f = (tfc_pb_field){.field = (int)(key >> 3), .wire = (int)(key & 7)};
    switch (f->wire) {
    case TFC_PB_VARINT: return tfc_pb_read_varint(r, &f->v);
    case TFC_PB_FIXED64: return read_le(r, 8, &f->v);
    case TFC_PB_FIXED32: return read_le(r, 4, &f->v);
    case TFC_PB_LEN: {
        uint64_t n;
        if (!tfc_pb_read_varint(r, &n)) return 0;
        if (n > (uint64_t)(r->end - r->p)) {
            r->bad = 1;
            return 0;
        }
        f->data = r->p;
        f->len = (size_t)n;
        r->p += n;
        return 1;
    }
    default: /* groups (3, 4) are deprecated and never in the messages read here */
        r->bad = 1;
        return 0;
    }
}
