/* CPU depthwise convolution (DepthwiseConv2D, SeparableConv2D's first step), direct: each
 * output channel k reads input channel k / m alone, so a tap is an element-wise multiply-add
 * over the channel axis, which NHWC keeps contiguous. The loops are plain C the compiler
 * vectorises (over channels; for m = 2, 3, 4 the m filters of a channel unrolled, so the
 * interleaved outputs vectorise too), compiled three times: for AVX-512, AVX2 and the
 * baseline, chosen at run time (dw_isa). No contraction into fused multiply-adds (ISO C), so
 * the three give the same bits. The forward of a depth multiplier of 1 on whole vectors of
 * channels (MobileNet's) takes an AVX2 kernel in intrinsics on AVX2 and AVX-512 machines
 * (forward_row_m1): each pixel's channels stay in registers across the taps, the same
 * operations in the same order, so the same bits again. Forward and the data gradient gather (each thread writes its
 * own rows; forward applies its epilogue, BatchNormalization's map, a residual and the
 * activation, to each row while it is in cache); the filter gradient sums fixed shares of the
 * rows into partials, added in share order. */
#include "cpu/cpu_internal.h"

/* The filter gradient's shares: at most this many, fixed by the shapes, not the threads. */
#define DW_SHARES 32

#define DW_INLINE static inline __attribute__((always_inline))

/* out[k] += x[k / M] * w[k] over the c M channels of one pixel and one tap (M a constant
 * where the caller's switch makes it one). */
DW_INLINE void tap_m(int c, int M, const float *restrict x, const float *restrict w,
                     float *restrict out)
{
#pragma omp simd
    for (int ci = 0; ci < c; ci++)
#pragma GCC unroll 4
        for (int j = 0; j < M; j++) out[ci * M + j] += x[ci] * w[ci * M + j];
}

DW_INLINE void tap(int c, int m, const float *restrict x, const float *restrict w,
                   float *restrict out)
{
    switch (m) {
    case 1: tap_m(c, 1, x, w, out); break;
    case 2: tap_m(c, 2, x, w, out); break;
    case 3: tap_m(c, 3, x, w, out); break;
    case 4: tap_m(c, 4, x, w, out); break;
    default: tap_m(c, m, x, w, out); break;
    }
}

/* g[ci] += sum_j o[ci M + j] w[ci M + j] (j in order) over c channels. */
DW_INLINE void tap_back_m(int c, int M, const float *restrict o, const float *restrict w,
                          float *restrict g)
{
#pragma omp simd
    for (int ci = 0; ci < c; ci++) {
        float s = 0.0f;
#pragma GCC unroll 4
        for (int j = 0; j < M; j++) s += o[ci * M + j] * w[ci * M + j];
        g[ci] += s;
    }
}

DW_INLINE void tap_back(int c, int m, const float *restrict o, const float *restrict w,
                        float *restrict g)
{
    switch (m) {
    case 1: { /* s = 0 + o w is o w exactly: the plain product */
#pragma omp simd
        for (int k = 0; k < c; k++) g[k] += o[k] * w[k];
        break;
    }
    case 2: tap_back_m(c, 2, o, w, g); break;
    case 3: tap_back_m(c, 3, o, w, g); break;
    case 4: tap_back_m(c, 4, o, w, g); break;
    default: tap_back_m(c, m, o, w, g); break;
    }
}

/* Input row (or column) of output row o at tap u, or -1 outside the image. */
DW_INLINE int source(int o, int u, int s, int dil, int pad, int size)
{
    int i = o * s + u * dil - pad;
    return i >= 0 && i < size ? i : -1;
}

/* The output row (or column) that reads input row i at tap u, or -1 when none does. */
DW_INLINE int reader(int i, int u, int s, int dil, int pad, int size)
{
    int t = i + pad - u * dil;
    if (t < 0 || t % s) return -1;
    t /= s;
    return t < size ? t : -1;
}

/* The taps of output pixel (oy, ox) of image xi. Forward (filter 0): out[k] += x[k / m]
 * w[u, v, k], a = w, b = the pixel's output; filter gradient (filter 1): dw[u, v, k] +=
 * x[k / m] dy[k], a = the pixel's dy, b = dw. */
DW_INLINE void pixel_taps(const tfc_conv_desc *d, const float *xi, int oy, int ox,
                          const float *a, float *b, int filter)
{
    const int m = d->f / d->c;
    for (int u = 0; u < d->kh; u++) {
        int iy = source(oy, u, d->sh, d->dh, d->pad_top, d->h);
        if (iy < 0) continue;
        for (int v = 0; v < d->kw; v++) {
            int ix = source(ox, v, d->sw, d->dw, d->pad_left, d->w);
            if (ix < 0) continue;
            const float *xp = xi + ((int64_t)iy * d->w + ix) * d->c;
            const int64_t t = (int64_t)(u * d->kw + v) * d->f;
            if (filter) tap(d->c, m, xp, a, b + t);
            else tap(d->c, m, xp, a + t, b);
        }
    }
}

/* One output pixel's epilogue while it is in cache, each step rounded as its own op rounds
 * it: out = out a + b (bn_forward_infer's map; a NULL: none), then out += res (axpy of 1;
 * res NULL: none). */
DW_INLINE void pixel_epilogue(int f, const float *restrict a, const float *restrict b,
                              const float *restrict res, float *restrict out)
{
    if (a) {
#pragma omp simd
        for (int k = 0; k < f; k++) out[k] = out[k] * a[k] + b[k];
    }
    if (res) {
#pragma omp simd
        for (int k = 0; k < f; k++) out[k] += res[k];
    }
}

/* Forward of output row r = (n, oy): y[n, oy, j, k] = bias[k] + the taps, then each pixel's
 * epilogue (a, b: the normalisation's map, NULL: none; residual: of y's shape, NULL: none). */
DW_INLINE void forward_row(const tfc_conv_desc *d, int64_t r, const float *x, const float *w,
                           const float *bias, const float *a, const float *b,
                           const float *residual, float *y)
{
    const float *xi = x + r / d->oh * d->h * d->w * d->c;
    for (int ox = 0; ox < d->ow; ox++) {
        const int64_t o = (r * d->ow + ox) * d->f;
        float *out = y + o;
        if (bias) memcpy(out, bias, (size_t)d->f * sizeof(float));
        else memset(out, 0, (size_t)d->f * sizeof(float));
        pixel_taps(d, xi, (int)(r % d->oh), ox, w, out, 0);
        pixel_epilogue(d->f, a, b, residual ? residual + o : NULL, out);
    }
}

/* Data gradient of input row r = (n, iy), gathered from the output rows that read it. */
DW_INLINE void data_row(const tfc_conv_desc *d, int64_t r, const float *dy, const float *w,
                        float *dx)
{
    const int m = d->f / d->c, c = d->c;
    const int64_t img = r / d->h;
    const int iy = (int)(r % d->h);
    const float *gy = dy + img * d->oh * d->ow * d->f;
    for (int ix = 0; ix < d->w; ix++) {
        float *g = dx + (r * d->w + ix) * c;
        for (int u = 0; u < d->kh; u++) {
            int oy = reader(iy, u, d->sh, d->dh, d->pad_top, d->oh);
            if (oy < 0) continue;
            for (int v = 0; v < d->kw; v++) {
                int ox = reader(ix, v, d->sw, d->dw, d->pad_left, d->ow);
                if (ox < 0) continue;
                tap_back(c, m, gy + ((int64_t)oy * d->ow + ox) * d->f,
                         w + (int64_t)(u * d->kw + v) * d->f, g);
            }
        }
    }
}

/* Filter gradient of output rows [r0, r1) into p [kh, kw, f] (zeroed here). */
DW_INLINE void filter_rows(const tfc_conv_desc *d, int64_t r0, int64_t r1, const float *x,
                           const float *dy, float *p)
{
    memset(p, 0, (size_t)d->kh * d->kw * d->f * sizeof(float));
    for (int64_t r = r0; r < r1; r++) {
        const float *xi = x + r / d->oh * d->h * d->w * d->c;
        for (int ox = 0; ox < d->ow; ox++)
            pixel_taps(d, xi, (int)(r % d->oh), ox, dy + (r * d->ow + ox) * d->f, p, 1);
    }
}

/* dw[k] += ((part_0[k] + part_1[k]) + ...) + part_{S-1}[k] for k in [k0, k1), summed in
 * part_0 (the order of a running sum from 0). */
DW_INLINE void sum_shares(int64_t k0, int64_t k1, int S, int64_t K, float *part, float *dw)
{
    for (int s = 1; s < S; s++) {
        const float *q = part + s * K;
#pragma omp simd
        for (int64_t k = k0; k < k1; k++) part[k] += q[k];
    }
#pragma omp simd
    for (int64_t k = k0; k < k1; k++) dw[k] += part[k];
}

/* The row functions above compiled for each instruction set: NAME_isa[2] AVX-512, [1] AVX2,
 * [0] the baseline (the only one off x86-64). */
#ifdef TFC_X86_SIMD
#define DW_COMPILE(name, params, args)                                                       \
    __attribute__((target("avx512f"))) static void name##_avx512 params { name args; }       \
    __attribute__((target("avx2"))) static void name##_avx2 params { name args; }            \
    static void name##_base params { name args; }                                            \
    static void(*const name##_isa[3]) params = {name##_base, name##_avx2, name##_avx512};
#else
#define DW_COMPILE(name, params, args)                                                       \
    static void name##_base params { name args; }                                            \
    static void(*const name##_isa[3]) params = {name##_base, name##_base, name##_base};
#endif

DW_COMPILE(forward_row, (const tfc_conv_desc *d, int64_t r, const float *x, const float *w,
                         const float *bias, const float *a, const float *b,
                         const float *residual, float *y), (d, r, x, w, bias, a, b, residual, y))
DW_COMPILE(data_row, (const tfc_conv_desc *d, int64_t r, const float *dy, const float *w,
                      float *dx), (d, r, dy, w, dx))
DW_COMPILE(filter_rows, (const tfc_conv_desc *d, int64_t r0, int64_t r1, const float *x,
                         const float *dy, float *p), (d, r0, r1, x, dy, p))
DW_COMPILE(sum_shares, (int64_t k0, int64_t k1, int S, int64_t K, float *part, float *dw),
           (k0, k1, S, K, part, dw))

/* The instruction set of the loops: 2 AVX-512, 1 AVX2, 0 the baseline; -1 the best this CPU
 * runs, unless tfc_cpu_depthwise_isa chose */
static int dw_chosen = -1;

static int dw_best(void)
{
#ifdef TFC_X86_SIMD
    if (__builtin_cpu_supports("avx512f")) return 2;
    if (__builtin_cpu_supports("avx2")) return 1;
#endif
    return 0;
}

int tfc_cpu_depthwise_isa(int isa)
{
    if (isa > dw_best()) return 0;
    dw_chosen = isa;
    return 1;
}

static int dw_isa(void)
{
    return dw_chosen >= 0 ? dw_chosen : dw_best();
}

#ifdef TFC_X86_SIMD
#include <immintrin.h>

#define DW_AVX2 __attribute__((target("avx2")))

/* NB blocks of 8 channels from k of one output pixel of depth multiplier 1, in registers:
 * bias (or 0) plus the taps' products in tap order, then the normalisation's map, the residual
 * and ReLU or relu6, each a multiply or an add rounded as forward_row's loops and
 * act_forward round them (no fused multiply-adds): the same bits. NB chains of adds side by
 * side hide the add's latency. */
DW_INLINE DW_AVX2 void pixel_m1(const int NB, int k, int ntaps, const float *const *xp,
                                const float *const *wp, const float *bias, const float *a,
                                const float *b, const float *res, tfc_act act, float *out)
{
    __m256 s[4];
#pragma GCC unroll 4
    for (int j = 0; j < NB; j++)
        s[j] = bias ? _mm256_loadu_ps(bias + k + 8 * j) : _mm256_setzero_ps();
    for (int t = 0; t < ntaps; t++)
#pragma GCC unroll 4
        for (int j = 0; j < NB; j++)
            s[j] = _mm256_add_ps(s[j], _mm256_mul_ps(_mm256_loadu_ps(xp[t] + k + 8 * j),
                                                     _mm256_loadu_ps(wp[t] + k + 8 * j)));
    const __m256 zero = _mm256_setzero_ps(), six = _mm256_set1_ps(6.0f);
#pragma GCC unroll 4
    for (int j = 0; j < NB; j++) {
        const int kj = k + 8 * j;
        __m256 v = s[j];
        if (a) v = _mm256_add_ps(_mm256_mul_ps(v, _mm256_loadu_ps(a + kj)), _mm256_loadu_ps(b + kj));
        if (res) v = _mm256_add_ps(v, _mm256_loadu_ps(res + kj));
        if (act == TFC_ACT_RELU || act == TFC_ACT_RELU6) /* y < 0 ? 0 : y (NaN and -0 stay) */
            v = _mm256_andnot_ps(_mm256_cmp_ps(v, zero, _CMP_LT_OQ), v);
        if (act == TFC_ACT_RELU6) /* y > 6 ? 6 : y */
            v = _mm256_blendv_ps(v, six, _mm256_cmp_ps(v, six, _CMP_GT_OQ));
        _mm256_storeu_ps(out + kj, v);
    }
}

/* forward_row for a depth multiplier of 1 and channels a multiple of 8 on AVX2, with the
 * activation (ReLU or relu6; else linear) applied as act_forward would after it: each
 * pixel's channels in registers across its taps, where forward_row's loops load and store
 * the pixel's outputs once per tap (fashion_mobilenet's 16- to 192-channel layers at batch
 * 1 spent more in that and in the loops' set-up than in the products). */
DW_AVX2 static void forward_row_m1(const tfc_conv_desc *d, int64_t r, const float *x,
                                   const float *w, const float *bias, const float *a,
                                   const float *b, const float *residual, tfc_act act,
                                   float *y)
{
    const float *xi = x + r / d->oh * d->h * d->w * d->c;
    const int oy = (int)(r % d->oh), C = d->c;
    const float *xp[64], *wp[64];
    for (int ox = 0; ox < d->ow; ox++) {
        int nt = 0;
        for (int u = 0; u < d->kh; u++) {
            const int iy = source(oy, u, d->sh, d->dh, d->pad_top, d->h);
            if (iy < 0) continue;
            for (int v = 0; v < d->kw; v++) {
                const int ix = source(ox, v, d->sw, d->dw, d->pad_left, d->w);
                if (ix < 0) continue;
                xp[nt] = xi + ((int64_t)iy * d->w + ix) * C;
                wp[nt++] = w + (int64_t)(u * d->kw + v) * C;
            }
        }
        const int64_t o = (r * d->ow + ox) * C;
        const float *res = residual ? residual + o : NULL;
        int k = 0;
        for (; k + 32 <= C; k += 32) pixel_m1(4, k, nt, xp, wp, bias, a, b, res, act, y + o);
        for (; k + 16 <= C; k += 16) pixel_m1(2, k, nt, xp, wp, bias, a, b, res, act, y + o);
        for (; k < C; k += 8) pixel_m1(1, k, nt, xp, wp, bias, a, b, res, act, y + o);
    }
}
#endif

/* y[n, i, j, k] = act(bn(sum_{u, v} x[n, i sh + u dh - pt, j sw + v dw - pl, k / m] w[u, v, k]
 *                        + bias[k]) + residual[n, i, j, k]);
 * rows (n, i) in parallel, each finished (normalised, added to, activated) while in cache. */
void tfc_cpu_depthwise_forward(tfc_backend *be, const tfc_conv_desc *d, const float *x,
                               const float *w, const float *bias, const tfc_bn_params *bn,
                               const float *residual, tfc_act act, float *y, void *ws)
{
    const int64_t rows = (int64_t)d->n * d->oh, row = (int64_t)d->ow * d->f;
    const int nt = tfc_cpu_threads(be, rows * row * d->kh * d->kw);
    float *a = NULL, *b = NULL;
    if (bn) { /* a and b as bn_forward_infer computes them */
        a = ws, b = a + d->f;
        for (int k = 0; k < d->f; k++) {
            double s = bn->gamma[k] / sqrt((double)bn->var[k] + (double)bn->eps);
            a[k] = (float)s;
            b[k] = (float)(bn->beta[k] - bn->mean[k] * s);
        }
    }
    void (*const fwd)(const tfc_conv_desc *, int64_t, const float *, const float *,
                      const float *, const float *, const float *, const float *, float *) =
        forward_row_isa[dw_isa()];
#ifdef TFC_X86_SIMD
    /* the AVX2 pixel kernel where it applies (any instruction set from AVX2 up: the same
     * bits as the loops) */
    if (dw_isa() >= 1 && d->f == d->c && d->c % 8 == 0 && d->kh * d->kw <= 64) {
        const tfc_act fused = act == TFC_ACT_RELU || act == TFC_ACT_RELU6 ? act : TFC_ACT_LINEAR;
        TFC_CPU_FOR(rows, nt, for (int64_t r = 0; r < rows; r++) {
            forward_row_m1(d, r, x, w, bias, a, b, residual, fused, y);
            if (act != fused)
                tfc_cpu_act_forward_serial(act, row, d->f, y + r * row, y + r * row);
        });
        return;
    }
#endif
    TFC_CPU_FOR(rows, nt, for (int64_t r = 0; r < rows; r++) {
        fwd(d, r, x, w, bias, a, b, residual, y);
        if (act != TFC_ACT_LINEAR)
            tfc_cpu_act_forward_serial(act, row, d->f, y + r * row, y + r * row);
    });
}

/* dx[n, iy, ix, ci] += sum over the (output pixel, tap) pairs that read it of
 * sum_j dy[n, oy, ox, ci m + j] w[u, v, ci m + j]; input rows (n, iy) in parallel, each
 * gathering from the output rows that read it. */
void tfc_cpu_depthwise_backward_data(tfc_backend *be, const tfc_conv_desc *d, const float *dy,
                                     const float *w, float *dx)
{
    const int64_t rows = (int64_t)d->n * d->h;
    const int nt = tfc_cpu_threads(be, (int64_t)d->n * d->oh * d->ow * d->f * d->kh * d->kw);
    void (*const row)(const tfc_conv_desc *, int64_t, const float *, const float *, float *) =
        data_row_isa[dw_isa()];
#pragma omp parallel for TFC_CPU_STATIC(rows, nt)
    for (int64_t r = 0; r < rows; r++) row(d, r, dy, w, dx);
}

/* The filter gradient's shares for `rows` output rows (n oh): DW_SHARES, fewer for fewer
 * rows; a function of the shape alone. */
static int shares(int64_t rows)
{
    return rows < DW_SHARES ? (int)rows : DW_SHARES;
}

/* The filter gradient's partials, or forward's normalisation map (2 f floats) if more. */
size_t tfc_cpu_depthwise_workspace(tfc_backend *be, const tfc_conv_desc *d)
{
    const int64_t parts = (int64_t)shares((int64_t)d->n * d->oh) * d->kh * d->kw;
    return (size_t)(parts > 2 ? parts : 2) * d->f * sizeof(float);
}

/* dw[u, v, k] += sum_{n, i, j} x[n, i sh + u dh - pt, j sw + v dw - pl, k / m] dy[n, i, j, k].
 * Share s of S sums output rows [R s / S, R (s + 1) / S) into its partial in ws; the
 * partials are then added in share order, so the bits depend on the shapes only. */
void tfc_cpu_depthwise_backward_filter(tfc_backend *be, const tfc_conv_desc *d, const float *x,
                                       const float *dy, float *dw, void *ws)
{
    const int64_t rows = (int64_t)d->n * d->oh, K = (int64_t)d->kh * d->kw * d->f;
    const int S = shares(rows), isa = dw_isa();
    float *part = ws;
    int nt = tfc_cpu_threads(be, rows * d->ow * K);
    if (nt > S) nt = S;
#pragma omp parallel for TFC_CPU_STATIC(S, nt)
    for (int s = 0; s < S; s++)
        filter_rows_isa[isa](d, rows * s / S, rows * (s + 1) / S, x, dy, part + s * K);
    /* chunks of 256 weights, each summed over the shares by one thread */
    const int64_t chunks = (K + 255) / 256;
    const int nk = tfc_cpu_threads(be, K * S);
#pragma omp parallel for TFC_CPU_STATIC(chunks, nk)
    for (int64_t q = 0; q < chunks; q++)
        sum_shares_isa[isa](q * 256, q * 256 + 256 < K ? q * 256 + 256 : K, S, K, part, dw);
}
