/* The 16-bit floats of the trainer's `precision` (docs/solver.md, "Precision"): bfloat16, a
 * float's top 16 bits (sign, the 8 exponent bits, 7 of the 23 fraction bits), and IEEE
 * binary16 (float16: 5 exponent bits, 10 fraction bits, largest finite 65504, subnormals
 * down to 2^-24). tfc_bf16_round and tfc_f16_round give the float a store in that format
 * keeps, so a float buffer of such values holds exactly what a 16-bit buffer would (the
 * CPU's reference numerics). */
#ifndef TFC_CORE_HALF_H
#define TFC_CORE_HALF_H

#include <stdint.h>
#include <string.h>

/* x rounded to the nearest bfloat16, ties to even, as CUDA's __float2bfloat16_rn and the
 * AVX-512 and Arm conversion instructions: a finite x past the largest bfloat16 (about
 * 3.39e38) becomes an infinity, subnormals are kept, infinities stay, and a NaN stays a NaN
 * of its sign (made quiet, so dropping its low payload bits cannot make it an infinity). */
static inline float tfc_bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        u |= 0x00400000u;
    else
        u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}

/* x rounded to the nearest float16, ties to even, as F16C's vcvtps2ph and CUDA's
 * __float2half_rn: from 65520 on (halfway past 65504) an infinity; below 2^-14 a multiple of
 * 2^-24 (a subnormal, or zero), rounded by the float sum |x| + 0.5, whose unit in the last
 * place is 2^-24; a NaN stays a NaN of its sign, made quiet. Written so a loop of it
 * vectorises. */
static inline float tfc_f16_round(float x)
{
    uint32_t u, r;
    memcpy(&u, &x, 4);
    const uint32_t sign = u & 0x80000000u, a = u ^ sign;
    float f;
    memcpy(&f, &a, 4);
    const float sub = (f + 0.5f) - 0.5f; /* |x| to a multiple of 2^-24 */
    uint32_t s;
    memcpy(&s, &sub, 4);
    if (a > 0x7f800000u)
        r = (a | 0x00400000u) & ~0x1fffu;
    else if (a >= 0x477ff000u)
        r = 0x7f800000u;
    else if (a >= 0x38800000u)
        r = (a + 0xfffu + ((a >> 13) & 1u)) & ~0x1fffu;
    else
        r = s;
    r |= sign;
    memcpy(&x, &r, 4);
    return x;
}

#endif
