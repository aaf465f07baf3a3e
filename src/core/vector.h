/* TFC_VECTOR marks a function with hot SIMD loops for an AVX2 clone picked at load time, so
 * one portable binary still runs 8-wide where the CPU can; TFC_VECTOR512 adds an AVX-512
 * clone (16-wide) for loops that measurably gain from it. ISO C (-std=c11) keeps every
 * multiply and add apart (no contraction into fused multiply-adds), so the clones of an
 * element-wise loop give the same bits; kernels that want fused multiply-adds or reciprocal
 * estimates write them in intrinsics (TFC_X86_SIMD below; the LSTM cells). GCC only, and not
 * under the sanitizers, whose start-up runs after ifunc resolution. */
#ifndef TFC_CORE_VECTOR_H
#define TFC_CORE_VECTOR_H

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    !defined(__SANITIZE_ADDRESS__)
#define TFC_VECTOR __attribute__((target_clones("avx2", "default")))
#define TFC_VECTOR512 __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TFC_VECTOR
#define TFC_VECTOR512
#endif

/* TFC_X86_SIMD: x86-64 intrinsics in functions marked __attribute__((target("..."))), called
 * after a run-time check (__builtin_cpu_supports), for the loops compilers do not vectorise
 * well on their own (GCC 12 widens bytes to floats with scalar conversions). */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define TFC_X86_SIMD 1
#endif

#endif
