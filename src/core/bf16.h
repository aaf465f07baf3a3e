/* bfloat16 as the trainer's `precision: bf16` stores it: a float's top 16 bits (sign, the
 * 8 exponent bits, 7 of the 23 fraction bits). tfc_bf16_round gives the float a bfloat16
 * store keeps, so a float buffer of such values holds exactly what a bfloat16 buffer would
 * (the CPU's reference numerics, docs/solver.md "Precision"). */
#ifndef TFC_CORE_BF16_H
#define TFC_CORE_BF16_H

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

#endif
