/* TFRecord framing, shared by the TensorBoard event files (solver/events.c) and the tfrecord
 * source and writer (data/tfrecord.c). A record is
 *   uint64 length, uint32 masked CRC-32C of those 8 bytes, the data, uint32 masked CRC-32C
 *   of the data
 * all little-endian (tensorflow/core/lib/io/record_writer.cc). */
#ifndef TFC_CORE_TFRECORD_H
#define TFC_CORE_TFRECORD_H

#include <stddef.h>
#include <stdint.h>

#define TFC_TFRECORD_HEADER 12
#define TFC_TFRECORD_FOOTER 4

/* The 12 header bytes of a record of `len` data bytes. */
void tfc_tfrecord_header(uint8_t out[TFC_TFRECORD_HEADER], uint64_t len);
/* The 4 footer bytes of `data`. */
void tfc_tfrecord_footer(uint8_t out[TFC_TFRECORD_FOOTER], const void *data, size_t len);
/* The data length a header announces: 1, or 0 when its CRC does not match. */
int tfc_tfrecord_read_header(const uint8_t in[TFC_TFRECORD_HEADER], uint64_t *len);
/* 1 when `footer` holds the masked CRC of the data. */
int tfc_tfrecord_check_footer(const void *data, size_t len,
                              const uint8_t footer[TFC_TFRECORD_FOOTER]);

#endif
