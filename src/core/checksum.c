/* Checksums: FNV-1a 64 (configuration hashes) and CRC-32C with TFRecord's mask (state
 * files, event files, records). */
#include "core/checksum.h"

uint64_t tfc_fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Table-driven CRC-32C, reflected polynomial 0x82F63B78; the table is computed at compile
 * time by the macros below so nothing is initialised at run time. */
#define C1(c) (((c) >> 1) ^ (0x82F63B78u & (0u - ((c) & 1u))))
#define C8(c) C1(C1(C1(C1(C1(C1(C1(C1(c))))))))
#define R4(n) C8(n##u), C8(n##u + 1u), C8(n##u + 2u), C8(n##u + 3u)
#define R16(n) R4(n), R4(n + 4), R4(n + 8), R4(n + 12)
static const uint32_t crc_table[256] = {
    R16(0),   R16(16),  R16(32),  R16(48),  R16(64),  R16(80),  R16(96),  R16(112),
    R16(128), R16(144), R16(160), R16(176), R16(192), R16(208), R16(224), R16(240)};

uint32_t tfc_crc32c(uint32_t crc, const void *data, size_t n)
{
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

uint32_t tfc_crc32c_mask(uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
