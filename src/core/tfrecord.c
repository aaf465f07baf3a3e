/* TFRecord framing (core/tfrecord.h). */
#include "core/tfrecord.h"

#include "core/checksum.h"

static void put_le(uint8_t *b, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) b[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *b, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)b[i] << (8 * i);
    return v;
}

void tfc_tfrecord_header(uint8_t out[TFC_TFRECORD_HEADER], uint64_t len)
{
    put_le(out, len, 8);
    put_le(out + 8, tfc_crc32c_mask(tfc_crc32c(0, out, 8)), 4);
}

void tfc_tfrecord_footer(uint8_t out[TFC_TFRECORD_FOOTER], const void *data, size_t len)
{
    put_le(out, tfc_crc32c_mask(tfc_crc32c(0, data, len)), 4);
}

int tfc_tfrecord_read_header(const uint8_t in[TFC_TFRECORD_HEADER], uint64_t *len)
{
    *len = get_le(in, 8);
    return get_le(in + 8, 4) == tfc_crc32c_mask(tfc_crc32c(0, in, 8));
}

int tfc_tfrecord_check_footer(const void *data, size_t len,
                              const uint8_t footer[TFC_TFRECORD_FOOTER])
{
    return get_le(footer, 4) == tfc_crc32c_mask(tfc_crc32c(0, data, len));
}
