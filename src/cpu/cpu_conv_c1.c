/* Convolutions of one input channel (an image model's first layer: Fashion-MNIST's 28x28x1
 * images) for inference passes, direct, on CPUs with AVX2 and FMA (issue 44). oneDNN's
 * kernels block channels by 16: on one channel its brgconv took 12.5 us for
 * fashion_cnn_bn's 28x28x1 -> 32 3x3 layer at batch 1 on a Zen 4 (226k multiply-adds, 18 a
 * nanosecond; 10-14% of the model's call). Here the filters of a block of output pixels sit
 * in registers, eight to a vector, across the kernel's taps: per tap and pixel one broadcast
 * of the input and one fused multiply-add per vector of the tap's weights (HWIO [kh, kw, 1,
 * f]: f contiguous), and the epilogue (bias, BatchNormalization's map, residual, ReLU or
 * relu6) in registers before the store, each step rounded as its own op. Every output sums
 * its taps inside the image in one order, row u then column v of the kernel, so the bits do
 * not depend on the blocking, the batch or the thread count. Taken for inference passes
 * only, as Winograd's kernels are (cpu_winograd.c): a model bound for training predicts what
 * one bound for inference does; and for a few images (fewer than twice the threads: a
 * server's requests), where oneDNN's call costs more than its sums: on a pass of many it
 * was the faster (fashion_cnn_bn at batch 1000, two threads: 24,100 images/s against 22,600
 * with this kernel) -- unless a max pooling whose windows tile the output follows (the
 * MaxPooling2D after fashion_cnn_bn's first layer): then each thread computes the output
 * rows under one pooled row into a band on its stack, in L1, and pools them from there, so
 * the full output (25.7 MB at a pass of 256 images) is never written and read back:
 * fashion_cnn_bn at batch 1000 10,950 -> 12,850 images/s on one thread, about 21,000 ->
 * 23,000-25,000 on two, batch 1 on two 0.070 -> 0.066 ms (the 2-vCPU Zen 4, interleaved
 * rounds). On this stop's Zen 4 its sums are oneDNN's to the bit. */
#include <math.h>

#include "cpu/cpu_internal.h"

/* Filters at most (the normalisation's a and b are computed on the stack). */
#define C1_MAX_FILTERS 256
/* Floats of a thread's band of output rows under one row of a fused pooling (on its stack) */
#define C1_BAND 8192

/* What one call reads and writes. */
typedef struct c1call {
    const tfc_conv_desc *d;
    const float *x, *w, *bias, *a, *b, *residual;
    tfc_act act;
    float *y;
} c1call;

#ifdef TFC_X86_SIMD
#include <immintrin.h>

#define FMA_TARGET __attribute__((target("avx2,fma")))
#define INLINE static inline __attribute__((always_inline))

/* The epilogue on eight channels from k (res: the residual's row, or NULL). */
INLINE FMA_TARGET __m256 finish(const c1call *c, __m256 v, int k, const float *res)
{
    return tfc_cpu_finish8(v, k, c->bias, c->a, c->b, res, c->act);
}

/* One output row's inputs: for each kernel row inside the image (nu of them), where its
 * input row starts for output column 0 (before the left padding) and its weights
 * [kw, f]; the row's outputs and residual. */
typedef struct c1row {
    const float *x[16], *w[16];
    int nu;
    float *y;
    const float *res;
} c1row;

/* P pixels from ox of row r, filters [k0, k0 + 8 NV): the taps of the kernel columns
 * [v0, v1) (inside the image for each of the P pixels) of every kernel row of r, summed in
 * registers, then finished and stored. */
INLINE FMA_TARGET void pixels(const c1call *c, const c1row *r, int ox, int v0, int v1, int k0,
                              const int P, const int NV)
{
    const int f = c->d->f, sw = c->d->sw, dw = c->d->dw;
    __m256 acc[4][4];
#pragma GCC unroll 4
    for (int p = 0; p < P; p++)
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) acc[p][j] = _mm256_setzero_ps();
    for (int q = 0; q < r->nu; q++) {
        const float *xr = r->x[q] + (int64_t)ox * sw, *wr = r->w[q] + k0;
        for (int v = v0; v < v1; v++) {
            __m256 wv[4];
#pragma GCC unroll 4
            for (int j = 0; j < NV; j++) wv[j] = _mm256_loadu_ps(wr + (int64_t)v * f + 8 * j);
#pragma GCC unroll 4
            for (int p = 0; p < P; p++) {
                const __m256 xb = _mm256_broadcast_ss(xr + p * sw + v * dw);
#pragma GCC unroll 4
                for (int j = 0; j < NV; j++) acc[p][j] = _mm256_fmadd_ps(xb, wv[j], acc[p][j]);
            }
        }
    }
#pragma GCC unroll 4
    for (int p = 0; p < P; p++) {
        const int64_t o = (int64_t)(ox + p) * f;
        const float *res = r->res ? r->res + o : NULL;
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++)
            _mm256_storeu_ps(r->y + o + k0 + 8 * j, finish(c, acc[p][j], k0 + 8 * j, res));
    }
}

/* The kernel columns [*v0, *v1) inside the image for output column ox. */
static void columns(const tfc_conv_desc *d, int ox, int *v0, int *v1)
{
    const int ix0 = ox * d->sw - d->pad_left;
    *v0 = 0, *v1 = d->kw;
    while (*v0 < d->kw && ix0 + *v0 * d->dw < 0) (*v0)++;
    while (*v1 > *v0 && ix0 + (*v1 - 1) * d->dw >= d->w) (*v1)--;
}

/* Output pixels [ox0, ox1) of row r, interior (every kernel column inside the image), P at a
 * time, with NV vectors of filters from k0; a kernel 3 wide takes its columns as a constant
 * (the loop over them unrolled). */
INLINE FMA_TARGET void interior(const c1call *c, const c1row *r, int ox0, int ox1, int k0,
                                const int P, const int NV)
{
    const int kw = c->d->kw;
    int ox = ox0;
    if (kw == 3)
        for (; ox + P <= ox1; ox += P) pixels(c, r, ox, 0, 3, k0, P, NV);
    for (; ox + P <= ox1; ox += P) pixels(c, r, ox, 0, kw, k0, P, NV);
    for (; ox < ox1; ox++) pixels(c, r, ox, 0, kw, k0, 1, NV);
}

/* Output row r (image r / oh, row r % oh): its edge pixels one at a time, its interior P at a
 * time, for each group of up to 4 vectors of filters (P 3 with 4 vectors, else 4: at most 12
 * accumulators of the 16 registers). */
FMA_TARGET static void c1_row(const c1call *c, int64_t r, float *out)
{
    const tfc_conv_desc *d = c->d;
    const int oy = (int)(r % d->oh);
    const float *img = c->x + r / d->oh * d->h * d->w;
    c1row row = {.nu = 0, .y = out,
                 .res = c->residual ? c->residual + r * d->ow * d->f : NULL};
    for (int u = 0; u < d->kh; u++) {
        const int iy = oy * d->sh - d->pad_top + u * d->dh;
        if (iy < 0 || iy >= d->h) continue;
        row.x[row.nu] = img + (int64_t)iy * d->w - d->pad_left;
        row.w[row.nu++] = c->w + (int64_t)u * d->kw * d->f;
    }
    /* the interior columns [in0, in1) */
    int in0 = 0, in1 = d->ow, v0, v1;
    while (in0 < d->ow && (columns(d, in0, &v0, &v1), v0 > 0 || v1 < d->kw)) in0++;
    while (in1 > in0 && (columns(d, in1 - 1, &v0, &v1), v0 > 0 || v1 < d->kw)) in1--;
    for (int k0 = 0; k0 < d->f; k0 += 32) {
        const int nv = d->f - k0 >= 32 ? 4 : (d->f - k0) / 8;
        for (int ox = 0; ox < d->ow; ox++) {
            if (ox == in0) {
                switch (nv) {
                case 4: interior(c, &row, in0, in1, k0, 3, 4); break;
                case 3: interior(c, &row, in0, in1, k0, 4, 3); break;
                case 2: interior(c, &row, in0, in1, k0, 4, 2); break;
                default: interior(c, &row, in0, in1, k0, 4, 1); break;
                }
                ox = in1 - 1;
                continue;
            }
            columns(d, ox, &v0, &v1);
            switch (nv) {
            case 4: pixels(c, &row, ox, v0, v1, k0, 1, 4); break;
            case 3: pixels(c, &row, ox, v0, v1, k0, 1, 3); break;
            case 2: pixels(c, &row, ox, v0, v1, k0, 1, 2); break;
            default: pixels(c, &row, ox, v0, v1, k0, 1, 1); break;
            }
        }
    }
}

/* Pooled row q (image q / oh, row q % oh of the pooling's output) of a max pooling whose
 * windows tile the convolution's output (kh = sh, kw = sw, no padding): the kh output rows
 * under it into band (kh x ow x f floats, in L1), then each window's maximum as max_pixel
 * takes it (the first cell, then every cell in row order replacing it where strictly
 * larger: a NaN never wins), into pooled. */
FMA_TARGET static void c1_pooled_row(const c1call *c, const tfc_pool_desc *pd, int64_t q,
                                     float *band, float *pooled)
{
    const tfc_conv_desc *d = c->d;
    const int64_t img = q / pd->oh, oy = q % pd->oh, line = (int64_t)d->ow * d->f;
    for (int u = 0; u < pd->kh; u++) c1_row(c, img * d->oh + oy * pd->sh + u, band + u * line);
    float *out = pooled + q * pd->ow * d->f;
    for (int ox = 0; ox < pd->ow; ox++)
        for (int k = 0; k < d->f; k += 8) {
            const float *cell = band + (int64_t)ox * pd->sw * d->f + k;
            __m256 m = _mm256_loadu_ps(cell);
            for (int u = 0; u < pd->kh; u++)
                for (int v = 0; v < pd->kw; v++) {
                    const __m256 x = _mm256_loadu_ps(cell + u * line + (int64_t)v * d->f);
                    m = _mm256_blendv_ps(m, x, _mm256_cmp_ps(x, m, _CMP_GT_OQ));
                }
            _mm256_storeu_ps(out + (int64_t)ox * d->f + k, m);
        }
}
#endif

int tfc_cpu_conv_c1_forward(tfc_backend *be, const tfc_conv_desc *d, const float *x,
                            const float *w, const float *bias, const tfc_bn_params *bn,
                            const float *residual, tfc_act act, float *y,
                            const tfc_pool_desc *pool, float *pooled)
{
#ifdef TFC_X86_SIMD
    const int fuse = pool && pool->is_max && pool->kh == pool->sh && pool->kw == pool->sw &&
                     !pool->pad_top && !pool->pad_left && pool->oh * pool->sh <= d->oh &&
                     pool->ow * pool->sw <= d->ow && pool->c == d->f &&
                     (int64_t)pool->kh * d->ow * d->f <= C1_BAND;
    if (!be->inference_pass || d->c != 1 || d->f % 8 || d->f > C1_MAX_FILTERS || d->kh > 16 ||
        d->n <= 0 || (d->n >= 2 * be->threads && !fuse) || d->oh <= 0 || d->ow <= 0 ||
        !(act == TFC_ACT_LINEAR || act == TFC_ACT_RELU || act == TFC_ACT_RELU6) ||
        !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
        return 0;
    float ab[2 * C1_MAX_FILTERS];
    if (bn) /* a and b as bn_forward_infer computes them */
        for (int k = 0; k < d->f; k++) {
            const double a = bn->gamma[k] / sqrt((double)bn->var[k] + (double)bn->eps);
            ab[k] = (float)a;
            ab[C1_MAX_FILTERS + k] = (float)(bn->beta[k] - bn->mean[k] * a);
        }
    const c1call c = {d, x, w, bias, bn ? ab : NULL, bn ? ab + C1_MAX_FILTERS : NULL, residual,
                      act, y};
    const int64_t rows = (int64_t)d->n * d->oh;
    const int nt = tfc_cpu_threads(be, rows * d->ow * d->f * d->kh * d->kw);
    if (fuse) {
        const int64_t prows = (int64_t)d->n * pool->oh;
        TFC_CPU_FOR(prows, nt, for (int64_t q = 0; q < prows; q++) {
            float band[C1_BAND];
            c1_pooled_row(&c, pool, q, band, pooled);
        });
        return 2;
    }
    TFC_CPU_FOR(rows, nt, for (int64_t r = 0; r < rows; r++) c1_row(&c, r, y + r * d->ow * d->f););
    return 1;
#else
    return 0;
#endif
}
