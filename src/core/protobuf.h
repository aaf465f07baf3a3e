/* Protocol-buffer encoding (the wire format only, no schema): a growable buffer that fields
 * are appended to, nested messages encoded into buffers of their own and appended as
 * length-delimited fields. Used by the TensorBoard event writer (solver/events.c) and the ONNX
 * exporter (api/onnx.c). Repeated scalars are written one key per element (unpacked), which
 * every parser accepts. */
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

#endif
