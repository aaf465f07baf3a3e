/* Pointwise convolutions (1x1 kernel, stride 1, no padding: MobileNet's expansions and
 * projections) for inference passes, direct, on CPUs with AVX2 and FMA (issue 44). Such a
 * convolution is a product [pixels, c] x [c, f] with c as small as 16: oneDNN's brgconv ran
 * it at 60-85% of the FMA peak on a Zen 4 and left relu6 (and a few images'
 * BatchNormalization) to a pass of tfc's own over the output after it (cpu_dnnl.c, `later`),
 * which streamed up to 200 KB through L2 again. Here a tile of pixels by up to 64 filters
 * sits in registers across the input channels (per channel one broadcast of each pixel's
 * input and one fused multiply-add per vector of the channel's weights, HWIO [c, f]: f
 * contiguous) and the epilogue (bias, BatchNormalization's map, residual, ReLU or relu6)
 * runs in registers before the one store, each step rounded as its own op. Every output sums
 * its channels in order from 0, so the bits do not depend on the tiling, the batch, the
 * thread count or the instruction set (and on this stop's Zen 4 they are brgconv's). The
 * pixels are one flat run (a 1x1 kernel of stride 1 maps pixel i to pixel i): the threads
 * take fixed shares of it, each in blocks of 48 pixels whose inputs stay in L1 while each
 * group of filters walks them. AVX-512 hosts take vectors of 16 filters and 32 registers
 * (the same sums), others vectors of 8 and 16 registers.
 *
 * Measured on the 2-vCPU Zen 4 VM (AVX-512), one thread, BatchNormalization and relu6, against
 * oneDNN's kernel and tfc's pass after it: 28x28x16 -> 64 21.8 -> 20.3 us, 14x14x96 -> 24
 * 12.5 -> 9.9, 7x7x192 -> 48 9.6 -> 8.8; fashion_mobilenet through the predictor, batch 1
 * p50 0.145 -> 0.138 ms on one thread and 0.115 -> 0.099 on two, batch 32 and 1000 on two
 * threads 10-15% more images a second, on one even (docs/cpu.md). Inference passes only, as
 * Winograd's kernels are (cpu_winograd.c): a model bound for training predicts what one
 * bound for inference does. */
#include <math.h>

#include "cpu/cpu_internal.h"

/* Filters and input channels at most (a and b of the normalisation on the stack). */
#define PW_MAX_FILTERS 512
#define PW_MAX_CHANNELS 1024
/* Pixels per block: a block's inputs (at most 48 x c floats) stay in L1 across its groups of
 * filters. */
#define PW_BLOCK 48

typedef struct pwcall {
    int64_t pixels;
    int c, f;
    const float *x, *w, *bias, *a, *b, *residual;
    tfc_act act;
    float *y;
} pwcall;

#ifdef TFC_X86_SIMD
#include <immintrin.h>

#define INLINE static inline __attribute__((always_inline))
#define FMA_TARGET __attribute__((target("avx2,fma")))
#define WIDE_TARGET __attribute__((target("avx2,fma,avx512f,avx512vl")))

/* P pixels from p0, NV vectors of 8 filters from k0: sum over the channels in order, finish,
 * store. */
INLINE FMA_TARGET void tile8(const pwcall *pc, int64_t p0, int k0, const int P, const int NV)
{
    const int c = pc->c, f = pc->f;
    const float *x = pc->x + p0 * c, *w = pc->w + k0;
    __m256 acc[12][4];
#pragma GCC unroll 12
    for (int p = 0; p < P; p++)
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) acc[p][j] = _mm256_setzero_ps();
    for (int ci = 0; ci < c; ci++) {
        __m256 wv[4];
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) wv[j] = _mm256_loadu_ps(w + (int64_t)ci * f + 8 * j);
#pragma GCC unroll 12
        for (int p = 0; p < P; p++) {
            const __m256 xb = _mm256_broadcast_ss(x + (int64_t)p * c + ci);
#pragma GCC unroll 4
            for (int j = 0; j < NV; j++) acc[p][j] = _mm256_fmadd_ps(xb, wv[j], acc[p][j]);
        }
    }
#pragma GCC unroll 12
    for (int p = 0; p < P; p++) {
        const int64_t o = (p0 + p) * f;
        const float *res = pc->residual ? pc->residual + o : NULL;
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++)
            _mm256_storeu_ps(pc->y + o + k0 + 8 * j,
                             tfc_cpu_finish8(acc[p][j], k0 + 8 * j, pc->bias, pc->a, pc->b, res,
                                             pc->act));
    }
}

/* tfc_cpu_finish8 on 16 channels: the same ops, so the same bits. */
INLINE WIDE_TARGET __m512 finish16(const pwcall *pc, __m512 v, int k, const float *res)
{
    if (pc->bias) v = _mm512_add_ps(v, _mm512_loadu_ps(pc->bias + k));
    if (pc->a)
        v = _mm512_add_ps(_mm512_mul_ps(v, _mm512_loadu_ps(pc->a + k)),
                          _mm512_loadu_ps(pc->b + k));
    if (res) v = _mm512_add_ps(v, _mm512_loadu_ps(res + k));
    if (pc->act != TFC_ACT_LINEAR) { /* y < 0 ? 0 : y, then y > 6 ? 6 : y (NaN and -0 stay) */
        const __m512 zero = _mm512_setzero_ps(), six = _mm512_set1_ps(6.0f);
        v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), zero);
        if (pc->act == TFC_ACT_RELU6)
            v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, six, _CMP_GT_OQ), six);
    }
    return v;
}

/* tile8 on vectors of 16 filters (AVX-512: 32 registers; each output's sum in the same
 * order, so the same bits). */
INLINE WIDE_TARGET void tile16(const pwcall *pc, int64_t p0, int k0, const int P, const int NV)
{
    const int c = pc->c, f = pc->f;
    const float *x = pc->x + p0 * c, *w = pc->w + k0;
    __m512 acc[12][4];
#pragma GCC unroll 12
    for (int p = 0; p < P; p++)
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) acc[p][j] = _mm512_setzero_ps();
    for (int ci = 0; ci < c; ci++) {
        __m512 wv[4];
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) wv[j] = _mm512_loadu_ps(w + (int64_t)ci * f + 16 * j);
#pragma GCC unroll 12
        for (int p = 0; p < P; p++) {
            const __m512 xb = _mm512_set1_ps(x[(int64_t)p * c + ci]);
#pragma GCC unroll 4
            for (int j = 0; j < NV; j++) acc[p][j] = _mm512_fmadd_ps(xb, wv[j], acc[p][j]);
        }
    }
#pragma GCC unroll 12
    for (int p = 0; p < P; p++) {
        const int64_t o = (p0 + p) * f;
        const float *res = pc->residual ? pc->residual + o : NULL;
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++)
            _mm512_storeu_ps(pc->y + o + k0 + 16 * j, finish16(pc, acc[p][j], k0 + 16 * j, res));
    }
}

/* Pixels [p0, p1) with NV vectors (W floats each) of filters from k0, P at a time, the rest
 * in one smaller tile. */
#define PW_RUN(name, TILE, TARGET)                                                           \
    INLINE TARGET void name(const pwcall *pc, int64_t p0, int64_t p1, int k0, const int P,   \
                            const int NV)                                                    \
    {                                                                                        \
        int64_t p = p0;                                                                      \
        for (; p + P <= p1; p += P) TILE(pc, p, k0, P, NV);                                  \
        switch (p1 - p) {                                                                    \
        case 11: TILE(pc, p, k0, 11, NV); break;                                             \
        case 10: TILE(pc, p, k0, 10, NV); break;                                             \
        case 9: TILE(pc, p, k0, 9, NV); break;                                               \
        case 8: TILE(pc, p, k0, 8, NV); break;                                               \
        case 7: TILE(pc, p, k0, 7, NV); break;                                               \
        case 6: TILE(pc, p, k0, 6, NV); break;                                               \
        case 5: TILE(pc, p, k0, 5, NV); break;                                               \
        case 4: TILE(pc, p, k0, 4, NV); break;                                               \
        case 3: TILE(pc, p, k0, 3, NV); break;                                               \
        case 2: TILE(pc, p, k0, 2, NV); break;                                               \
        case 1: TILE(pc, p, k0, 1, NV); break;                                               \
        }                                                                                    \
    }
PW_RUN(run8, tile8, FMA_TARGET)
PW_RUN(run8w, tile8, WIDE_TARGET)
PW_RUN(run16, tile16, WIDE_TARGET)

/* Block [p0, p1) of the pixels, 16 registers: tiles of 6 pixels by 16 filters (15
 * registers), the last 8 filters 6 by 8. Tiles of 3 by 32 needed 17 and spilled: over
 * fashion_mobilenet's 8 shapes of pointwise layer 89.8 us against 74 for these, and 77 for
 * oneDNN's AVX2 kernels and tfc's pass after them (ONEDNN_MAX_CPU_ISA=AVX2 on the Zen 4, one
 * thread). */
FMA_TARGET static void block_avx2(const pwcall *pc, int64_t p0, int64_t p1)
{
    int k0 = 0;
    for (; k0 + 16 <= pc->f; k0 += 16) run8(pc, p0, p1, k0, 6, 2);
    if (k0 < pc->f) run8(pc, p0, p1, k0, 6, 1);
}

/* The block on AVX-512: vectors of 16 filters, at most 24 accumulators of the 32 registers;
 * the last 8, 16 or 24 filters on vectors of 8. */
WIDE_TARGET static void block_avx512(const pwcall *pc, int64_t p0, int64_t p1)
{
    int k0 = 0;
    for (; k0 + 64 <= pc->f; k0 += 64) run16(pc, p0, p1, k0, 6, 4);
    if (pc->f - k0 >= 48) run16(pc, p0, p1, k0, 8, 3), k0 += 48;
    if (pc->f - k0 >= 32) run16(pc, p0, p1, k0, 12, 2), k0 += 32;
    switch ((pc->f - k0) / 8) {
    case 3: run8w(pc, p0, p1, k0, 8, 3); break;
    case 2: run8w(pc, p0, p1, k0, 12, 2); break;
    case 1: run8w(pc, p0, p1, k0, 12, 1); break;
    }
}

/* Share t of nt: pixels [pixels t / nt, pixels (t + 1) / nt), the cuts rounded to multiples
 * of 24 (of every tile's pixels), in blocks of PW_BLOCK. */
static void share(const pwcall *pc, int t, int nt, int wide)
{
    const int64_t n = pc->pixels, s0 = t ? (n * t / nt + 12) / 24 * 24 : 0,
                  s1 = t + 1 < nt ? (n * (t + 1) / nt + 12) / 24 * 24 : n;
    for (int64_t p0 = s0; p0 < s1; p0 += PW_BLOCK) {
        const int64_t p1 = p0 + PW_BLOCK < s1 ? p0 + PW_BLOCK : s1;
        if (wide) block_avx512(pc, p0, p1);
        else block_avx2(pc, p0, p1);
    }
}
#endif

/* The tiles: 2 AVX-512's, 1 AVX2's; -1 the best this CPU runs, unless tfc_cpu_conv_1x1_isa
 * chose. */
static int pw_chosen = -1;

int tfc_cpu_conv_1x1_isa(int isa)
{
#ifdef TFC_X86_SIMD
    if (isa == 2 && !(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")))
        return 0;
    pw_chosen = isa;
    return 1;
#else
    return isa < 0;
#endif
}

int tfc_cpu_conv_1x1_forward(tfc_backend *be, const tfc_conv_desc *d, const float *x,
                             const float *w, const float *bias, const tfc_bn_params *bn,
                             const float *residual, tfc_act act, float *y)
{
#ifdef TFC_X86_SIMD
    if (!be->inference_pass || d->kh != 1 || d->kw != 1 || d->sh != 1 || d->sw != 1 ||
        d->pad_top || d->pad_left || d->oh != d->h || d->ow != d->w || d->f % 8 ||
        d->f > PW_MAX_FILTERS || d->c < 1 || d->c > PW_MAX_CHANNELS || d->n <= 0 ||
        d->h <= 0 || d->w <= 0 ||
        !(act == TFC_ACT_LINEAR || act == TFC_ACT_RELU || act == TFC_ACT_RELU6) ||
        !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
        return 0;
    float ab[2 * PW_MAX_FILTERS];
    if (bn) /* a and b as bn_forward_infer computes them */
        for (int k = 0; k < d->f; k++) {
            const double a = bn->gamma[k] / sqrt((double)bn->var[k] + (double)bn->eps);
            ab[k] = (float)a;
            ab[PW_MAX_FILTERS + k] = (float)(bn->beta[k] - bn->mean[k] * a);
        }
    const pwcall pc = {(int64_t)d->n * d->h * d->w, d->c, d->f, x, w, bias,
                       bn ? ab : NULL, bn ? ab + PW_MAX_FILTERS : NULL, residual, act, y};
    const int nt = tfc_cpu_threads(be, pc.pixels * d->c * d->f);
    const int wide = pw_chosen >= 0 ? pw_chosen == 2
                                    : __builtin_cpu_supports("avx512f") &&
                                          __builtin_cpu_supports("avx512vl");
    const int team = nt > 1 ? tfc_cpu_team(nt) : 1;
    if (team == 1) /* (no OpenMP region: see TFC_CPU_FOR) */
        for (int t = 0; t < nt; t++) share(&pc, t, nt, wide);
    else {
#pragma omp parallel num_threads(team)
        TFC_CPU_SHARES(t, nt) share(&pc, t, nt, wide);
    }
    return 1;
#else
    (void)be, (void)d, (void)x, (void)w, (void)bias, (void)bn, (void)residual, (void)act,
        (void)y;
    return 0;
#endif
}
