/* Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel random numbers:
 * as easy as 1, 2, 3", SC'11). A draw depends only on a 64-bit key and a 128-bit counter,
 * so initial weights, dropout masks and shuffles are functions of (seed, consumer, step,
 * index): identical on CPU and GPU, and nothing but the counters needs saving to resume.
 * Everything here is header-only so CUDA kernels can use it unchanged. */
#ifndef TFC_CORE_RNG_H
#define TFC_CORE_RNG_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define TFC_HD __host__ __device__ __forceinline__
#else
#define TFC_HD static inline
#endif

typedef struct tfc_u32x4 { uint32_t v[4]; } tfc_u32x4;

TFC_HD uint32_t tfc_mulhilo32(uint32_t a, uint32_t b, uint32_t *hi)
{
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

/* Philox4x32 with 10 rounds. counter = (c0, c1, c2, c3), key = (k0, k1). */
TFC_HD tfc_u32x4 tfc_philox(uint64_t key, uint64_t ctr_lo, uint64_t ctr_hi)
{
    uint32_t c0 = (uint32_t)ctr_lo, c1 = (uint32_t)(ctr_lo >> 32);
    uint32_t c2 = (uint32_t)ctr_hi, c3 = (uint32_t)(ctr_hi >> 32);
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = tfc_mulhilo32(0xD2511F53u, c0, &hi0);
        uint32_t lo1 = tfc_mulhilo32(0xCD9E8D57u, c2, &hi1);
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    tfc_u32x4 out = {{c0, c1, c2, c3}};
    return out;
}

/* Mixes a seed and a stream id (layer index, stage index, ...) into a key
 * (splitmix64 finaliser), so streams of one seed are unrelated. */
TFC_HD uint64_t tfc_rng_key(uint64_t seed, uint64_t stream)
{
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + stream + 0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform float in [0, 1) from 24 random bits. */
TFC_HD float tfc_u32_to_unit(uint32_t x)
{
    return (float)(x >> 8) * (1.0f / 16777216.0f);
}

/* The i-th uniform of the stream (key, step): element i uses lane i % 4 of block i / 4. */
TFC_HD float tfc_rng_uniform(uint64_t key, uint64_t step, uint64_t i)
{
    tfc_u32x4 r = tfc_philox(key, i >> 2, step);
    return tfc_u32_to_unit(r.v[i & 3]);
}

/* The i-th standard normal of the stream (key, step), by Box-Muller on one Philox block. */
TFC_HD double tfc_rng_normal(uint64_t key, uint64_t step, uint64_t i)
{
    tfc_u32x4 r = tfc_philox(key, i, step ^ 0x5DEECE66Dull);
    double u1 = ((double)r.v[0] + ((double)r.v[1] * 4294967296.0) + 1.0) / 18446744073709551617.0;
    double u2 = ((double)r.v[2] + ((double)r.v[3] * 4294967296.0)) / 18446744073709551616.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* A uniform integer in [0, n) for the i-th draw of (key, step), unbiased by rejection over
 * successive lanes. n > 0. */
TFC_HD uint64_t tfc_rng_below(uint64_t key, uint64_t step, uint64_t i, uint64_t n)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    for (uint64_t j = 0;; j++) {
        tfc_u32x4 r = tfc_philox(key, i, step + (j << 48));
        uint64_t x = ((uint64_t)r.v[0] << 32) | r.v[1];
        if (x < limit) return x % n;
        x = ((uint64_t)r.v[2] << 32) | r.v[3];
        if (x < limit) return x % n;
    }
}

#endif
