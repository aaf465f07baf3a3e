/* Protocol buffers, the wire format only (no schema). Encoding: a growable buffer that fields
 * are appended to, nested messages encoded into buffers of their own and appended as
 * length-delimited fields; used by the TensorBoard event writer (solver/events.c), the ONNX
 * exporter (api/onnx.c) and the TFRecord writer (data/tfrecord.c). Repeated scalars are
 * written one key per element (unpacked), which every parser accepts. Decoding: a cursor over
 * untrusted bytes that hands out one field at a time (data/tfrecord.c reads tf.train.Example
 * with it); every length is checked against what remains. */
#ifndef TFC_CORE_PROTOBUF_H
#define TFC_CORE_PROTOBUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct tfc_pb {
    uint8_t *data; /* malloc'd; NULL while empty */
    size_t len, cap;
    int failed;    /* an allocation failed: the contents are incomplete */
} tfc_pb;

/* Wire types. */
enum { TFC_PB_VARINT = 0, TFC_PB_FIXED64 = 1, TFC_PB_LEN = 2, TFC_PB_FIXED32 = 5 };

void tfc_pb_free(tfc_pb *b);
void tfc_pb_raw(tfc_pb *b, const void *data, size_t len);
void tfc_pb_varint(tfc_pb *b, uint64_t v);
void tfc_pb_key(tfc_pb *b, int field, int wire);
/* Fields: int32/int64/uint64/enum/bool (varint; negative values as 10-byte two's
 * complement, as protobuf encodes int64), float (fixed32), double (fixed64), bytes and
 * strings, and a nested message (its encoding in `msg`). */
void tfc_pb_int(tfc_pb *b, int field, int64_t v);
void tfc_pb_float(tfc_pb *b, int field, float v);
void tfc_pb_double(tfc_pb *b, int field, double v);
void tfc_pb_bytes(tfc_pb *b, int field, const void *data, size_t len);
void tfc_pb_string(tfc_pb *b, int field, const char *s);
void tfc_pb_message(tfc_pb *b, int field, const tfc_pb *msg);

/* ---- decoding ---------------------------------------------------------------------------- */

typedef struct tfc_pb_reader {
    const uint8_t *p, *end;
    int bad; /* a malformed field was met: the reader stops */
} tfc_pb_reader;

typedef struct tfc_pb_field {
    int field, wire;
    uint64_t v;          /* VARINT, FIXED64, FIXED32 */
    const uint8_t *data; /* LEN: the bytes (inside the reader's buffer) */
    size_t len;
} tfc_pb_field;

/* A reader over len bytes at data (NULL with len 0: an empty message). */
static inline tfc_pb_reader tfc_pb_reader_of(const void *data, size_t len)
{
    const uint8_t *p = data ? (const uint8_t *)data : (const uint8_t *)"";
    return (tfc_pb_reader){p, p + len, 0};
}

/* The next field into *f: 1, or 0 at the end of the buffer or (with r->bad set) at a
 * malformed one: a varint over 10 bytes, a length past the end, a group or unknown wire
 * type, field number 0. */
int tfc_pb_next(tfc_pb_reader *r, tfc_pb_field *f);
/* One varint from the cursor (packed repeated fields): 1, or 0 with r->bad set. */
int tfc_pb_read_varint(tfc_pb_reader *r, uint64_t *v);

#endif
