/* CPU element-wise ops: axpy, add, scale, bias add and gradient, strided 2-D copies, inverted
 * dropout on Philox, and the host reductions (sum of squares, non-finite count). Loops go
 * parallel only above TFC_CPU_PAR_MIN elements; reductions accumulate in double. The
 * element-wise loops have AVX2 clones (TFC_CPU_VECTOR): the same single roundings, so the
 * same bits, eight floats at a time where the baseline build takes four. */
#include "core/half.h"
#include "core/rng.h"
#include "cpu/cpu_internal.h"

#include <math.h>
#ifdef TFC_X86_SIMD
#include <immintrin.h>
#endif

/* Column blocks of a reduction over rows: each thread keeps one block of partial sums. */
#define COL_BLOCK 256

TFC_CPU_VECTOR
void tfc_cpu_axpy(tfc_backend *be, int64_t n, float alpha, const float *x, float *y)
{
    int nt = tfc_cpu_threads(be, n);
    TFC_CPU_FOR_SIMD(n, nt, for (int64_t i = 0; i < n; i++) y[i] += alpha * x[i];);
}

/* y = a + b, or its ReLU (as act_forward's: v < 0 ? 0 : v), in one pass */
TFC_CPU_VECTOR
void tfc_cpu_add(tfc_backend *be, int64_t n, const float *a, const float *b, tfc_act act,
                 float *y)
{
    TFC_ASSERT(act == TFC_ACT_LINEAR || act == TFC_ACT_RELU);
    int nt = tfc_cpu_threads(be, n);
    if (act == TFC_ACT_RELU) {
        TFC_CPU_FOR_SIMD(n, nt, for (int64_t i = 0; i < n; i++) {
            float v = a[i] + b[i];
            y[i] = v < 0.0f ? 0.0f : v;
        });
    } else {
        TFC_CPU_FOR_SIMD(n, nt, for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];);
    }
}

TFC_CPU_VECTOR
void tfc_cpu_scale(tfc_backend *be, int64_t n, float alpha, float *x)
{
    int nt = tfc_cpu_threads(be, n);
    TFC_CPU_FOR_SIMD(n, nt, for (int64_t i = 0; i < n; i++) x[i] *= alpha;);
}

/* y[r, c] += b[c] */
TFC_CPU_VECTOR
void tfc_cpu_bias_add(tfc_backend *be, int64_t rows, int cols, const float *b, float *y)
{
    int nt = tfc_cpu_threads(be, rows * cols);
    TFC_CPU_FOR(rows, nt, for (int64_t r = 0; r < rows; r++) {
        float *row = y + r * cols;
        _Pragma("omp simd")
        for (int c = 0; c < cols; c++) row[c] += b[c];
    });
}

/* One channel block of oneDNN's nChw16c layout: 16 lanes in registers, their masks, and 16
 * floats in memory at any alignment. */
typedef float vf __attribute__((vector_size(64)));
typedef int32_t vi __attribute__((vector_size(64)));
typedef float vmem __attribute__((vector_size(64), aligned(4), may_alias));

/* y[i, p, :] (NHWC) = act(((x + bias) a + b) + residual) from x in nChw16c (n images of
 * f / 16 planes of px pixels x 16 channels), each step rounded as bias_add,
 * bn_forward_infer's affine map, axpy with alpha 1 and act_forward's ReLU or relu6 round it
 * (bias, a with b, residual NULL and act linear: that step left out), on the calling
 * thread. */
TFC_VECTOR512
void tfc_cpu_epilogue_16c(int64_t n, int64_t px, int f, const float *x, const float *bias,
                          const float *a, const float *b, const float *residual, tfc_act act,
                          float *y)
{
    TFC_ASSERT(act == TFC_ACT_LINEAR || act == TFC_ACT_RELU || act == TFC_ACT_RELU6);
    const int relu = act != TFC_ACT_LINEAR, six = act == TFC_ACT_RELU6;
    const vf sixes = (vf){0} + 6.0f;
    const int blocks = f / 16;
    for (int64_t i = 0; i < n; i++)
        for (int64_t p = 0; p < px; p++) {
            const int64_t o = (i * px + p) * f;
            for (int k = 0; k < blocks; k++) {
                vf v = *(const vmem *)(x + ((i * blocks + k) * px + p) * 16);
                if (bias) v += *(const vmem *)(bias + 16 * k);
                if (a) {
                    v *= *(const vmem *)(a + 16 * k);
                    v += *(const vmem *)(b + 16 * k);
                }
                if (residual) v += *(const vmem *)(residual + o + 16 * k);
                if (relu) v = (vf)((vi)v & ~(vi)(v < 0.0f)); /* NaN and -0 stay */
                if (six) { /* v > 6 ? 6 : v, as act_forward's relu6 (NaN stays) */
                    const vi over = (vi)(v > sixes);
                    v = (vf)(((vi)v & ~over) | ((vi)sixes & over));
                }
                *(vmem *)(y + o + 16 * k) = v;
            }
        }
}

/* The epilogue's steps, inlined into its AVX2 clone (a helper left out of line, as GCC may
 * leave one called twice, runs the baseline's vectors). */
#define ELEM_INLINE static inline __attribute__((always_inline))

/* y[j] += x[j] */
ELEM_INLINE void elem_add(int n, const float *x, float *y)
{
#pragma omp simd
    for (int j = 0; j < n; j++) y[j] += x[j];
}

/* y[j] = y[j] a[j] + b[j] */
ELEM_INLINE void elem_affine(int n, const float *a, const float *b, float *y)
{
#pragma omp simd
    for (int j = 0; j < n; j++) y[j] = y[j] * a[j] + b[j];
}

/* y[j] = y[j] < 0 ? 0 : y[j] */
ELEM_INLINE void elem_relu(int n, float *y)
{
#pragma omp simd
    for (int j = 0; j < n; j++) y[j] = y[j] < 0.0f ? 0.0f : y[j];
}

/* y[j] = y[j] < 0 ? 0 : y[j] > 6 ? 6 : y[j], act_forward's relu6 */
ELEM_INLINE void elem_relu6(int n, float *y)
{
#pragma omp simd
    for (int j = 0; j < n; j++) y[j] = y[j] < 0.0f ? 0.0f : y[j] > 6.0f ? 6.0f : y[j];
}

/* Eight floats of a row at any alignment, and their masks. */
typedef float v8 __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef float v8mem __attribute__((vector_size(32), aligned(4), may_alias));

/* The epilogue's steps on whole rows of f channels, f a multiple of 8, eight channels at a
 * time in a register: one load and one store per vector where the loops above load and store
 * it once per step (fashion_mobilenet's 16- to 64-channel rows at batch 1 spent more in
 * those loops' set-up and memory traffic than in the arithmetic). Each step is the loops'
 * single rounding: the same bits. BIAS, BN, RES and ACT are constants where the caller's
 * switch makes them so. */
ELEM_INLINE void epilogue_rows8(int64_t r0, int64_t r1, int f, const float *bias, const float *a,
                                const float *b, const float *residual, int BIAS, int BN,
                                int RES, tfc_act ACT, float *y)
{
    const v8 six = (v8){0} + 6.0f;
    for (int64_t r = r0; r < r1; r++) {
        float *yr = y + r * f;
        const float *rr = RES ? residual + r * f : NULL;
        for (int k = 0; k < f; k += 8) {
            v8 v = *(const v8mem *)(yr + k);
            if (BIAS) v += *(const v8mem *)(bias + k);
            if (BN) {
                v *= *(const v8mem *)(a + k);
                v += *(const v8mem *)(b + k);
            }
            if (RES) v += *(const v8mem *)(rr + k);
            if (ACT != TFC_ACT_LINEAR) v = (v8)((v8i)v & ~(v8i)(v < 0.0f)); /* NaN, -0 stay */
            if (ACT == TFC_ACT_RELU6) { /* v > 6 ? 6 : v (NaN stays) */
                const v8i over = (v8i)(v > six);
                v = (v8)(((v8i)v & ~over) | ((v8i)six & over));
            }
            *(v8mem *)(yr + k) = v;
        }
    }
}

/* The same epilogue on NHWC y in place, rows of f channels: each step rounds as its separate
 * op does (bias_add, bn_forward_infer's map, axpy of 1, act_forward's ReLU or relu6), in one pass over
 * y instead of one per op. Rows of whole vectors take epilogue_rows8, specialised by a switch
 * on which steps apply (per row: a predicted branch) (one loop testing them compiled to scalar code once, 27% of
 * fashion_cnn_bn's batch-1 samples); other rows run each step as its own loop while the row
 * is in cache. */
TFC_CPU_VECTOR
void tfc_cpu_epilogue(tfc_backend *be, int64_t rows, int f, const float *bias, const float *a,
                      const float *b, const float *residual, tfc_act act, float *y)
{
    TFC_ASSERT(act == TFC_ACT_LINEAR || act == TFC_ACT_RELU || act == TFC_ACT_RELU6);
    const int nt = tfc_cpu_threads(be, rows * f);
    if (f % 8 == 0) {
        const int steps = (bias ? 1 : 0) | (a ? 2 : 0) | (residual ? 4 : 0);
#define EPI_ROW(S, ACT)                                                                    \
    epilogue_rows8(r, r + 1, f, bias, a, b, residual, (S) & 1, (S) & 2, (S) & 4, ACT, y)
#define EPI_STEPS(S)                                                                       \
    case S:                                                                                \
        if (act == TFC_ACT_LINEAR) EPI_ROW(S, TFC_ACT_LINEAR);                             \
        else if (act == TFC_ACT_RELU) EPI_ROW(S, TFC_ACT_RELU);                            \
        else EPI_ROW(S, TFC_ACT_RELU6);                                                    \
        break;
        TFC_CPU_FOR(rows, nt, for (int64_t r = 0; r < rows; r++) {
            switch (steps) {
                EPI_STEPS(0) EPI_STEPS(1) EPI_STEPS(2) EPI_STEPS(3)
                EPI_STEPS(4) EPI_STEPS(5) EPI_STEPS(6) EPI_STEPS(7)
            }
        });
#undef EPI_STEPS
#undef EPI_ROW
        return;
    }
    TFC_CPU_FOR(rows, nt, for (int64_t r = 0; r < rows; r++) {
        float *yr = y + r * f;
        if (bias) elem_add(f, bias, yr);
        if (a) elem_affine(f, a, b, yr);
        if (residual) elem_add(f, residual + r * f, yr);
        if (act == TFC_ACT_RELU) elem_relu(f, yr);
        if (act == TFC_ACT_RELU6) elem_relu6(f, yr);
    });
}

/* db[c] += sum_r dy[r, c], in double: a float running sum over 10^5 rows loses digits. Each
 * thread adds its rows eight at a time in registers before touching its column sums, so the
 * sums are loaded and stored once per eight rows rather than per row (fortunes_gpt's
 * 4096-row gradients were load- and store-bound: 2.4% of its step; 0.8% now, perf). */
TFC_CPU_VECTOR
void tfc_cpu_bias_grad(tfc_backend *be, int64_t rows, int cols, const float *dy, float *db)
{
    for (int c0 = 0; c0 < cols; c0 += COL_BLOCK) {
        int cb = cols - c0 < COL_BLOCK ? cols - c0 : COL_BLOCK;
        double part[TFC_REDUCE_THREADS][COL_BLOCK];
        const int nt = tfc_cpu_reduce_threads(be, rows * cb), T = nt;
#pragma omp parallel num_threads(tfc_cpu_team(nt))
        TFC_CPU_SHARES(t, nt)
        {
            double *sums = part[t];
            for (int c = 0; c < cb; c++) sums[c] = 0.0;
            const int64_t r1 = rows * (t + 1) / T;
            int64_t r = rows * t / T;
            for (; r + 8 <= r1; r += 8) {
                const float *p0 = dy + r * cols + c0, *p1 = p0 + cols, *p2 = p1 + cols;
                const float *p3 = p2 + cols, *p4 = p3 + cols, *p5 = p4 + cols;
                const float *p6 = p5 + cols, *p7 = p6 + cols;
#pragma omp simd
                for (int c = 0; c < cb; c++)
                    sums[c] += (((double)p0[c] + p1[c]) + ((double)p2[c] + p3[c])) +
                               (((double)p4[c] + p5[c]) + ((double)p6[c] + p7[c]));
            }
            for (; r < r1; r++) {
                const float *row = dy + r * cols + c0;
#pragma omp simd
                for (int c = 0; c < cb; c++) sums[c] += row[c];
            }
        }
        for (int t = 1; t < nt; t++)
            for (int c = 0; c < cb; c++) part[0][c] += part[t][c];
        for (int c = 0; c < cb; c++) db[c0 + c] += (float)part[0][c];
    }
}

/* dst[r*dst_ld + c] (= or +=) src[r*src_ld + c] */
void tfc_cpu_copy2d(tfc_backend *be, int64_t rows, int cols, const float *src, int src_ld,
                    float *dst, int dst_ld, int accumulate)
{
    int nt = tfc_cpu_threads(be, rows * cols);
    TFC_CPU_FOR(rows, nt, for (int64_t r = 0; r < rows; r++) {
        const float *s = src + r * src_ld;
        float *d = dst + r * dst_ld;
        if (accumulate) {
            _Pragma("omp simd")
            for (int c = 0; c < cols; c++) d[c] += s[c];
        } else {
            memcpy(d, s, (size_t)cols * sizeof(float));
        }
    });
}

/* Philox4x32-10 blocks per batch of the dropout loop. */
#define PHILOX_BATCH 64

/* One round of tfc_philox (core/rng.h), spelled out so that ten of them unroll inside a
 * SIMD loop over counters; the dropout test checks the mask against tfc_rng_uniform. */
#define PHILOX_ROUND()                                                                     \
    do {                                                                                   \
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;         \
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1; \
        c1 = (uint32_t)p1;                                                                 \
        c3 = (uint32_t)p0;                                                                 \
        c0 = n0;                                                                           \
        c2 = n2;                                                                           \
        k0 += 0x9E3779B9u;                                                                 \
        k1 += 0xBB67AE85u;                                                                 \
    } while (0)

/* r[4 j + lane] = lane of tfc_philox(key, first + j, step), j < PHILOX_BATCH. */
static inline __attribute__((always_inline)) void philox_batch(uint64_t key, uint64_t first, uint64_t step, uint32_t *r)
{
#pragma omp simd
    for (int j = 0; j < PHILOX_BATCH; j++) {
        uint64_t ctr = first + (uint64_t)j;
        uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32);
        uint32_t c2 = (uint32_t)step, c3 = (uint32_t)(step >> 32);
        uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
        PHILOX_ROUND();
        PHILOX_ROUND();
        PHILOX_ROUND();
        PHILOX_ROUND();
        PHILOX_ROUND();
        PHILOX_ROUND();
        PHILOX_ROUND();
        PHILOX_ROUND();
        PHILOX_ROUND();
        PHILOX_ROUND();
        r[4 * j] = c0;
        r[4 * j + 1] = c1;
        r[4 * j + 2] = c2;
        r[4 * j + 3] = c3;
    }
}

#ifdef TFC_X86_SIMD
/* 32x32 -> 64-bit products of each lane of a with m (m's value in every lane): the high
 * halves returned, the low halves in *lo (vpmuludq takes even lanes; odd ones moved down) */
__attribute__((target("avx512f"))) static inline __m512i mulhilo16(__m512i a, __m512i m,
                                                                   __m512i *lo)
{
    /* word shuffles rather than 64-bit shifts: they issue beside the multiplies */
    __m512i even = _mm512_mul_epu32(a, m);
    __m512i odd = _mm512_mul_epu32(_mm512_shuffle_epi32(a, _MM_PERM_DDBB), m);
    *lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_shuffle_epi32(odd, _MM_PERM_CCAA));
    return _mm512_mask_blend_epi32(0xAAAA, _mm512_shuffle_epi32(even, _MM_PERM_DDBB), odd);
}

/* Philox blocks first .. first + 15 (tfc_philox(key, first + j, step)) in element order:
 * r[q] lane e is element 16 q + e, lane e % 4 of block 4 q + e / 4. Sixteen blocks run side
 * by side, one per lane (word w of block j in lane j of c[w]), then a 4x4 transpose of
 * 32-bit words inside 128-bit lanes and one of 128-bit lanes puts them in element order. */
__attribute__((target("avx512f"))) static inline void philox16(uint64_t key, uint64_t first,
                                                               uint64_t step, __m512i r[4])
{
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i m0 = _mm512_set1_epi32((int)0xD2511F53u), m1 = _mm512_set1_epi32((int)0xCD9E8D57u);
    __m512i lo = _mm512_set1_epi32((int)(uint32_t)first);
    __m512i c0 = _mm512_add_epi32(lo, iota);
    /* the counter's high word, plus the carry where first + j passes 2^32 */
    __m512i c1 = _mm512_mask_add_epi32(_mm512_set1_epi32((int)(uint32_t)(first >> 32)),
                                       _mm512_cmplt_epu32_mask(c0, lo),
                                       _mm512_set1_epi32((int)(uint32_t)(first >> 32)),
                                       _mm512_set1_epi32(1));
    __m512i c2 = _mm512_set1_epi32((int)(uint32_t)step);
    __m512i c3 = _mm512_set1_epi32((int)(uint32_t)(step >> 32));
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int round = 0; round < 10; round++) {
        __m512i lo0, lo1;
        __m512i hi0 = mulhilo16(c0, m0, &lo0), hi1 = mulhilo16(c2, m1, &lo1);
        /* 0x96: a ^ b ^ c */
        c0 = _mm512_ternarylogic_epi32(hi1, c1, _mm512_set1_epi32((int)k0), 0x96);
        c2 = _mm512_ternarylogic_epi32(hi0, c3, _mm512_set1_epi32((int)k1), 0x96);
        c1 = lo1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    __m512i a = _mm512_unpacklo_epi32(c0, c1), b = _mm512_unpackhi_epi32(c0, c1);
    __m512i c = _mm512_unpacklo_epi32(c2, c3), d = _mm512_unpackhi_epi32(c2, c3);
    /* 128-bit lane L of e, f, g, h: whole blocks 4 L, 4 L + 1, 4 L + 2, 4 L + 3 */
    __m512i e = _mm512_unpacklo_epi64(a, c), f = _mm512_unpackhi_epi64(a, c);
    __m512i g = _mm512_unpacklo_epi64(b, d), h = _mm512_unpackhi_epi64(b, d);
    __m512i t0 = _mm512_shuffle_i32x4(e, f, 0x44), t1 = _mm512_shuffle_i32x4(g, h, 0x44);
    __m512i t2 = _mm512_shuffle_i32x4(e, f, 0xEE), t3 = _mm512_shuffle_i32x4(g, h, 0xEE);
    r[0] = _mm512_shuffle_i32x4(t0, t1, 0x88);
    r[1] = _mm512_shuffle_i32x4(t0, t1, 0xDD);
    r[2] = _mm512_shuffle_i32x4(t2, t3, 0x88);
    r[3] = _mm512_shuffle_i32x4(t2, t3, 0xDD);
}

__attribute__((target("avx512f"))) static void philox16_store(uint64_t key, uint64_t first,
                                                               uint64_t step, uint32_t r[64])
{
    __m512i v[4];
    philox16(key, first, step, v);
    for (int q = 0; q < 4; q++) _mm512_storeu_si512(r + 16 * q, v[q]);
}

int tfc_cpu_philox16(uint64_t key, uint64_t first, uint64_t step, uint32_t r[64])
{
    if (!__builtin_cpu_supports("avx512f")) return 0;
    philox16_store(key, first, step, r);
    return 1;
}

/* Elements [64 b0, min(64 b1, n)) of the dropout below: 64 elements (16 Philox blocks) at a
 * time. keep_i = u_i >= rate with u_i = (r_i >> 8) 2^-24 is r_i >= thresh, thresh =
 * ceil(rate 2^24) 2^8, exactly; the kept element is in * scale (then added), as the plain
 * loop computes it. */
__attribute__((target("avx512f"))) static void dropout_avx512(
    int64_t b0, int64_t b1, int64_t n, uint32_t thresh, float scale, uint64_t key, uint64_t step,
    const float *in, float *out, int accumulate)
{
    const __m512i th = _mm512_set1_epi32((int)thresh);
    const __m512 sc = _mm512_set1_ps(scale);
    for (int64_t bt = b0; bt < b1; bt++) {
        __m512i r[4];
        philox16(key, (uint64_t)bt * 16, step, r);
        for (int q = 0; q < 4; q++) {
            int64_t i0 = bt * 64 + 16 * q;
            if (i0 >= n) break;
            __mmask16 in_range = n - i0 >= 16 ? (__mmask16)0xFFFF
                                               : (__mmask16)((1u << (n - i0)) - 1);
            __mmask16 keep = _mm512_cmpge_epu32_mask(r[q], th);
            __m512 v = _mm512_maskz_mul_ps(keep, _mm512_maskz_loadu_ps(in_range, in + i0), sc);
            if (accumulate) v = _mm512_add_ps(_mm512_maskz_loadu_ps(in_range, out + i0), v);
            _mm512_mask_storeu_ps(out + i0, in_range, v);
        }
    }
}
#else
int tfc_cpu_philox16(uint64_t key, uint64_t first, uint64_t step, uint32_t r[64])
{
    return 0;
}
#endif

/* Inverted dropout over n elements: out[i] (= or +=) in[i] * keep_i / (1 - rate), keep_i =
 * (u_i >= rate), u_i = tfc_rng_uniform(key, step, i): lane i % 4 of Philox block i / 4,
 * generated PHILOX_BATCH blocks (4 * PHILOX_BATCH elements) at a time, or with AVX-512 by
 * dropout_avx512 (the same bits). Philox's ten rounds make it compute-bound: it goes
 * parallel at an eighth of the element-wise threshold. isa: as tfc_cpu_dropout_isa's. */
TFC_VECTOR512
static void dropout(const tfc_backend *be, int isa, int64_t n, float rate, uint64_t key,
                    uint64_t step, const float *in, float *out, int accumulate)
{
    if (rate <= 0.0f) {
        if (accumulate)
            tfc_cpu_axpy((tfc_backend *)be, n, 1.0f, in, out);
        else if (in != out)
            memmove(out, in, (size_t)n * sizeof(float));
        return;
    }
    /* rate >= 1 drops everything; 1 / (1 - rate) would be inf and 0 * inf NaN. */
    const float scale = rate >= 1.0f ? 0.0f : 1.0f / (1.0f - rate);
    int nt = tfc_cpu_threads(be, n * 8);
#ifdef TFC_X86_SIMD
    if (isa == 2 && rate < 1.0f) {
        /* rate 2^24 is exact in float; below 1 it is at most 2^24 - 1 */
        const uint32_t thresh = (uint32_t)ceilf(rate * 16777216.0f) << 8;
        const int64_t batches = (n + 63) / 64;
#pragma omp parallel num_threads(tfc_cpu_team(nt))
        TFC_CPU_SHARES(t, nt)
        {
            dropout_avx512(batches * t / nt, batches * (t + 1) / nt, n, thresh, scale, key, step,
                           in, out, accumulate);
        }
        return;
    }
#endif
    const int64_t per = 4 * PHILOX_BATCH, batches = (n + per - 1) / per;
#pragma omp parallel for TFC_CPU_STATIC(batches, nt)
    for (int64_t bt = 0; bt < batches; bt++) {
        uint32_t r[4 * PHILOX_BATCH];
        philox_batch(key, (uint64_t)bt * PHILOX_BATCH, step, r);
        const int64_t i0 = bt * per;
        const int m = n - i0 < per ? (int)(n - i0) : (int)per;
        const float *src = in + i0;
        float *dst = out + i0;
        if (accumulate) {
#pragma omp simd
            for (int i = 0; i < m; i++)
                dst[i] += tfc_cpu_select(tfc_u32_to_unit(r[i]) >= rate, src[i] * scale, 0.0f);
        } else {
#pragma omp simd
            for (int i = 0; i < m; i++)
                dst[i] = tfc_cpu_select(tfc_u32_to_unit(r[i]) >= rate, src[i] * scale, 0.0f);
        }
    }
}

static int dropout_best_isa(void)
{
#ifdef TFC_X86_SIMD
    if (__builtin_cpu_supports("avx512f")) return 2;
#endif
    return 0;
}

int tfc_cpu_dropout_isa(tfc_backend *be, int isa, int64_t n, float rate, uint64_t key,
                        uint64_t step, const float *in, float *out, int accumulate)
{
    if (isa < 0) isa = dropout_best_isa();
    if (isa > dropout_best_isa() || isa == 1) return 0;
    dropout(be, isa, n, rate, key, step, in, out, accumulate);
    return 1;
}

void tfc_cpu_dropout_forward(tfc_backend *be, int64_t n, float rate, uint64_t key,
                             uint64_t step, const float *x, float *y)
{
    dropout(be, dropout_best_isa(), n, rate, key, step, x, y, 0);
}

/* dx += dy * keep / (1 - rate), the same mask regenerated from (key, step). */
void tfc_cpu_dropout_backward(tfc_backend *be, int64_t n, float rate, uint64_t key,
                              uint64_t step, const float *dy, float *dx)
{
    dropout(be, dropout_best_isa(), n, rate, key, step, dy, dx, 1);
}

double tfc_cpu_sumsq(tfc_backend *be, int64_t n, const float *x)
{
    double part[TFC_REDUCE_THREADS];
    const int nt = tfc_cpu_reduce_threads(be, n), T = nt;
#pragma omp parallel num_threads(tfc_cpu_team(nt))
    TFC_CPU_SHARES(t, nt)
    {
        double s = 0.0;
#pragma omp simd reduction(+ : s)
        for (int64_t i = n * t / T; i < n * (t + 1) / T; i++) s += (double)x[i] * x[i];
        part[t] = s;
    }
    double s = 0.0;
    for (int t = 0; t < nt; t++) s += part[t];
    return s;
}

/* core/half.h's roundings, which the compiler vectorises. */
void tfc_cpu_round_bf16(tfc_backend *be, int64_t n, const float *x, float *y)
{
    int nt = tfc_cpu_threads(be, n);
#pragma omp parallel for simd TFC_CPU_STATIC(n, nt)
    for (int64_t i = 0; i < n; i++) y[i] = tfc_bf16_round(x[i]);
}

void tfc_cpu_round_f16(tfc_backend *be, int64_t n, const float *x, float *y)
{
    int nt = tfc_cpu_threads(be, n);
#pragma omp parallel for simd TFC_CPU_STATIC(n, nt)
    for (int64_t i = 0; i < n; i++) y[i] = tfc_f16_round(x[i]);
}

/* NaN and +-Inf are exactly the floats whose exponent bits are all ones. */
int64_t tfc_cpu_count_nonfinite(tfc_backend *be, int64_t n, const float *x)
{
    int64_t count = 0;
    int nt = tfc_cpu_threads(be, n);
#pragma omp parallel for simd TFC_CPU_STATIC(n, nt) reduction(+ : count)
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i], 4);
        count += (bits & 0x7f800000u) == 0x7f800000u;
    }
    return count;
}
