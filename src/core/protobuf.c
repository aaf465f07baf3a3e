/* Protocol-buffer wire encoding into a growable buffer (core/protobuf.h). */
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
