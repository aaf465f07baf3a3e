/* Checksums shared by every floor: FNV-1a 64 and CRC-32C (Castagnoli). */
#ifndef TFC_CORE_CHECKSUM_H
#define TFC_CORE_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a 64 over bytes, continuing from `h` (start with TFC_FNV_INIT). */
#define TFC_FNV_INIT 0xcbf29ce484222325ull
uint64_t tfc_fnv1a(uint64_t h, const void *data, size_t n);

/* CRC-32C (Castagnoli), continuing from `crc` (start with 0), and TFRecord's mask
 * ((crc >> 15 | crc << 17) + 0xa282ead8). */
uint32_t tfc_crc32c(uint32_t crc, const void *data, size_t n);
uint32_t tfc_crc32c_mask(uint32_t crc);

#endif
