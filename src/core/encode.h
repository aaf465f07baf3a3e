/* The preprocessing layers' encoding, one row at a time (tfc_encode_desc in core/backend.h):
 * shared by the CPU's encode_forward (cpu/cpu_encode.c) and the GPU's (gpu/gpu_encode.cu), so
 * both give the same values. The values are compared in double, where an int32 and a float
 * both convert exactly. */
#ifndef TFC_CORE_ENCODE_H
#define TFC_CORE_ENCODE_H

#include <math.h>
#include <stdint.h>

#include "core/backend.h"
#include "core/rng.h" /* TFC_HD */

/* FarmHash's Fingerprint64 (farmhashna::Hash64) of the n <= 16 bytes s: TensorFlow's
 * to_hash_bucket_fast of a string that short (a decimal int64 is at most 20 bytes: the
 * longer branch below is HashLen17to32). */
TFC_HD uint64_t tfc_encode_fetch(const unsigned char *s, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | s[i];
    return v;
}

TFC_HD uint64_t tfc_encode_rot(uint64_t v, int k) { return k ? v >> k | v << (64 - k) : v; }

TFC_HD uint64_t tfc_encode_len16(uint64_t u, uint64_t v, uint64_t mul)
{
    uint64_t a = (u ^ v) * mul;
    a ^= a >> 47;
    uint64_t b = (v ^ a) * mul;
    b ^= b >> 47;
    return b * mul;
}

TFC_HD uint64_t tfc_encode_farmhash(const unsigned char *s, int n)
{
    const uint64_t k0 = 0xc3a5c85c97cb3127ull, k1 = 0xb492b66fbe98f273ull,
                   k2 = 0x9ae16a3b2f90404full;
    if (n > 16) { /* HashLen17to32 */
        const uint64_t mul = k2 + (uint64_t)n * 2;
        const uint64_t a = tfc_encode_fetch(s, 8) * k1, b = tfc_encode_fetch(s + 8, 8);
        const uint64_t c = tfc_encode_fetch(s + n - 8, 8) * mul;
        const uint64_t d = tfc_encode_fetch(s + n - 16, 8) * k2;
        return tfc_encode_len16(tfc_encode_rot(a + b, 43) + tfc_encode_rot(c, 30) + d,
                                a + tfc_encode_rot(b + k2, 18) + c, mul);
    }
    if (n >= 8) {
        const uint64_t mul = k2 + (uint64_t)n * 2;
        const uint64_t a = tfc_encode_fetch(s, 8) + k2, b = tfc_encode_fetch(s + n - 8, 8);
        const uint64_t c = tfc_encode_rot(b, 37) * mul + a;
        const uint64_t d = (tfc_encode_rot(a, 25) + b) * mul;
        return tfc_encode_len16(c, d, mul);
    }
    if (n >= 4) {
        const uint64_t mul = k2 + (uint64_t)n * 2;
        const uint64_t a = tfc_encode_fetch(s, 4);
        return tfc_encode_len16((uint64_t)n + (a << 3), tfc_encode_fetch(s + n - 4, 4), mul);
    }
    if (n > 0) {
        const uint32_t y = (uint32_t)s[0] + ((uint32_t)s[n >> 1] << 8);
        const uint32_t z = (uint32_t)n + ((uint32_t)s[n - 1] << 2);
        const uint64_t v = (uint64_t)y * k2 ^ (uint64_t)z * k0;
        return (v ^ v >> 47) * k2;
    }
    return k2;
}

/* SipHash-2-4 of the n bytes s under key k: TensorFlow's to_hash_bucket_strong. */
#define TFC_SIPROUND                                                                          \
    do {                                                                                      \
        v0 += v1, v1 = tfc_encode_rot(v1, 51), v1 ^= v0, v0 = tfc_encode_rot(v0, 32);         \
        v2 += v3, v3 = tfc_encode_rot(v3, 48), v3 ^= v2;                                      \
        v0 += v3, v3 = tfc_encode_rot(v3, 43), v3 ^= v0;                                      \
        v2 += v1, v1 = tfc_encode_rot(v1, 47), v1 ^= v2, v2 = tfc_encode_rot(v2, 32);         \
    } while (0)
TFC_HD uint64_t tfc_encode_siphash(const uint64_t k[2], const unsigned char *s, int n)
{
    uint64_t v0 = k[0] ^ 0x736f6d6570736575ull, v1 = k[1] ^ 0x646f72616e646f6dull;
    uint64_t v2 = k[0] ^ 0x6c7967656e657261ull, v3 = k[1] ^ 0x7465646279746573ull;
    const int end = n - n % 8;
    for (int i = 0; i < end; i += 8) {
        const uint64_t m = tfc_encode_fetch(s + i, 8);
        v3 ^= m;
        TFC_SIPROUND;
        TFC_SIPROUND;
        v0 ^= m;
    }
    const uint64_t b = (uint64_t)(n & 0xff) << 56 | tfc_encode_fetch(s + end, n - end);
    v3 ^= b;
    TFC_SIPROUND;
    TFC_SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    for (int r = 0; r < 4; r++) TFC_SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}
#undef TFC_SIPROUND

/* Keras's Hashing of v (HASH in tfc_encode_desc). */
TFC_HD int64_t tfc_encode_hash(const tfc_encode_desc *d, double v)
{
    int bins = d->n;
    if (d->masked && bins > 1) {
        if (v == d->mask_value) return 0;
        bins--;
    }
    /* tf.as_string of the value cast to int64 (a float truncated toward zero) */
    const int64_t i = v != v                         ? 0
                      : v >= 9223372036854775807.0   ? INT64_MAX /* 2^63 and beyond */
                      : v < -9223372036854775808.0   ? INT64_MIN
                                                     : (int64_t)v;
    unsigned char digits[24], s[24];
    uint64_t u = i < 0 ? 0 - (uint64_t)i : (uint64_t)i;
    int nd = 0, n = 0;
    do {
        digits[nd++] = (unsigned char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (i < 0) s[n++] = '-';
    while (nd) s[n++] = digits[--nd];
    const uint64_t h = d->salted ? tfc_encode_siphash(d->key, s, n) : tfc_encode_farmhash(s, n);
    return (int64_t)(h % (uint64_t)bins) + (bins < d->n);
}

/* TensorFlow's FingerprintCat64 (tensorflow/core/platform/fingerprint.h): fp2 folded into
 * fp1, each ShiftMix(v) = v ^ v >> 47. */
TFC_HD uint64_t tfc_encode_fingerprint_cat(uint64_t fp1, uint64_t fp2)
{
    const uint64_t mul = 0xc6a4a7935bd1e995ull;
    uint64_t r = fp1 ^ mul, m = fp2 * mul;
    r ^= (m ^ m >> 47) * mul;
    r *= mul;
    r = (r ^ r >> 47) * mul;
    return r ^ r >> 47;
}

#define TFC_ENCODE_MAX_CROSS 8 /* HashedCrossing's inputs at most (TFC_LAYER_MAX_INPUTS) */

/* Keras's HashedCrossing of the k int32 values x[i][at] into n bins: TensorFlow's
 * sparse_cross_hashed (HashCrosser), which folds each int64 value itself (an integer
 * feature is its own hash; only strings go through Fingerprint64) into the default hash
 * key 0xDECAFCAFFE by FingerprintCat64, the unsigned result modulo n. */
TFC_HD int64_t tfc_encode_cross(int n, int k, const int32_t *const *x, int64_t at)
{
    uint64_t h = 0xDECAFCAFFEull; /* SPARSE_CROSS_DEFAULT_HASH_KEY */
    for (int i = 0; i < k; i++) h = tfc_encode_fingerprint_cat(h, (uint64_t)(int64_t)x[i][at]);
    return (int64_t)(h % (uint64_t)n);
}

/* The index of value v: see tfc_encode_desc. */
TFC_HD int64_t tfc_encode_index(const tfc_encode_desc *d, const float *table, double v)
{
    switch (d->map) {
    case TFC_ENCODE_INDEX:
        return v >= -9e18 && v <= 9e18 ? (int64_t)v : -1; /* NaN: -1 too */
    case TFC_ENCODE_BUCKET: {
        if (v != v) return d->n; /* NaN: the last bin, as Keras's */
        int lo = 0, hi = d->n;   /* the first boundary above v */
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if ((double)table[mid] <= v) lo = mid + 1;
            else hi = mid;
        }
        return lo;
    }
    case TFC_ENCODE_LOOKUP: {
        int lo = 0, hi = d->n - 1;
        while (lo <= hi) {
            int mid = lo + (hi - lo) / 2;
            if ((double)table[mid] == v) return (int64_t)table[d->n + mid];
            if ((double)table[mid] < v) lo = mid + 1;
            else hi = mid - 1;
        }
        if (d->noov < 1 || v != v) return d->oov;
        double m = v - (double)d->noov * floor(v / (double)d->noov); /* floormod */
        return d->oov + (int64_t)m;
    }
    case TFC_ENCODE_INVERT:
        return v >= 0 && v < d->n ? (int64_t)table[(int64_t)v] : d->oov;
    case TFC_ENCODE_HASH:
        return tfc_encode_hash(d, v);
    }
    return -1;
}

/* Values of one output row: width for INT, width depth for ONE_HOT, depth otherwise. */
TFC_HD int64_t tfc_encode_row(const tfc_encode_desc *d)
{
    return d->mode == TFC_ENCODE_INT       ? d->width
           : d->mode == TFC_ENCODE_ONE_HOT ? (int64_t)d->width * d->depth
                                           : d->depth;
}

/* Index k of value j into its output row yr (zeroed before), by d->mode. */
TFC_HD void tfc_encode_put(const tfc_encode_desc *d, int j, int64_t k, float *yr)
{
    if (d->mode == TFC_ENCODE_INT) {
        if (d->out_ints) ((int32_t *)yr)[j] = (int32_t)k;
        else yr[j] = (float)k;
        return;
    }
    if (k < 0 || k >= d->depth) return;
    if (d->mode == TFC_ENCODE_ONE_HOT) yr[(int64_t)j * d->depth + k] = 1.f;
    else if (d->mode == TFC_ENCODE_MULTI_HOT) yr[k] = 1.f;
    else yr[k] += 1.f;
}

/* Row r of the output into yr (tfc_encode_row(d) values, overwritten). */
TFC_HD void tfc_encode_one(const tfc_encode_desc *d, int64_t r, const void *x,
                           const float *table, const float *scale, float *yr)
{
    const int64_t per = tfc_encode_row(d);
    for (int64_t k = 0; k < per; k++) yr[k] = 0.f;
    for (int j = 0; j < d->width; j++) {
        const int64_t at = r * d->width + j;
        const double v = d->ints ? (double)((const int32_t *)x)[at]
                                 : (double)((const float *)x)[at];
        tfc_encode_put(d, j, tfc_encode_index(d, table, v), yr);
    }
    if (scale && (d->mode == TFC_ENCODE_MULTI_HOT || d->mode == TFC_ENCODE_COUNT))
        for (int k = 0; k < d->depth; k++) yr[k] *= scale[k];
}

/* Row r of HashedCrossing's output (hash_cross_forward) into yr, overwritten. */
TFC_HD void tfc_encode_cross_one(const tfc_encode_desc *d, int64_t r, int k,
                                 const int32_t *const *x, float *yr)
{
    const int64_t per = tfc_encode_row(d);
    for (int64_t i = 0; i < per; i++) yr[i] = 0.f;
    for (int j = 0; j < d->width; j++)
        tfc_encode_put(d, j, tfc_encode_cross(d->n, k, x, r * d->width + j), yr);
}

#endif
