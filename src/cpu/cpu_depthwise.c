/* CPU depthwise convolution (DepthwiseConv2D, SeparableConv2D's first step), direct: each
 * output channel k reads input channel k / m alone, so a tap is an element-wise multiply-add
 * over the channel axis, which NHWC keeps contiguous. The loops are plain C the compiler
 * vectorises (over channels; for m = 2, 3, 4 the m filters of a channel unrolled, so the
 * interleaved outputs vectorise too), compiled three times: for AVX-512, AVX2 and the
 * baseline, chosen at run time (dw_isa). No contraction into fused multiply-adds (ISO C), so
 * the three give the same bits. The forward of a depth multiplier of 1 on whole vectors of
 * channels (MobileNet's) takes an AVX2 kernel in intrinsics on AVX2 and AVX-512 machines
 * (forward_row_m1): a 3x3 kernel's rows 8 channels at a time, the 9 weights in registers and
 * 4 pixels summed side by side, other pixels and kernels one pixel at a time with its
 * channels in registers across the taps; the same operations in the same order per output,
 * so the same bits again. Forward and the data gradient gather (each thread writes its own
 * rows; forward applies its epilogue, BatchNormalization's map, a residual and the
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

/* The end of one output pixel's 8 channels from kj held in v: the normalisation's map, the
 * residual and ReLU or relu6, each a multiply or an add rounded as forward_row's loops and
 * act_forward round them (no fused multiply-adds), then the one store. */
DW_INLINE DW_AVX2 void finish_m1(__m256 v, int kj, const float *a, const float *b,
                                 const float *res, tfc_act act, float *out)
{
    const __m256 zero = _mm256_setzero_ps(), six = _mm256_set1_ps(6.0f);
    if (a) v = _mm256_add_ps(_mm256_mul_ps(v, _mm256_loadu_ps(a + kj)), _mm256_loadu_ps(b + kj));
    if (res) v = _mm256_add_ps(v, _mm256_loadu_ps(res + kj));
    if (act == TFC_ACT_RELU || act == TFC_ACT_RELU6) /* y < 0 ? 0 : y (NaN and -0 stay) */
        v = _mm256_andnot_ps(_mm256_cmp_ps(v, zero, _CMP_LT_OQ), v);
    if (act == TFC_ACT_RELU6) /* y > 6 ? 6 : y */
        v = _mm256_blendv_ps(v, six, _mm256_cmp_ps(v, six, _CMP_GT_OQ));
    _mm256_storeu_ps(out + kj, v);
}

/* NB blocks of 8 channels from k of one output pixel of depth multiplier 1, in registers:
 * bias (or 0) plus the taps' products in tap order, each product and each sum rounded on its
 * own as forward_row's loops round them, then finish_m1: the same bits. NB chains of adds
 * side by side hide the add's latency. */
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
#pragma GCC unroll 4
    for (int j = 0; j < NB; j++) finish_m1(s[j], k + 8 * j, a, b, res, act, out);
}

/* Output pixel ox of row oy on pixel_m1: its valid taps' pointers, then 32, 16 or 8 channels
 * at a time. */
DW_INLINE DW_AVX2 void edge_m1(const tfc_conv_desc *d, const float *xi, const float *w, int oy,
                               int ox, const float *bias, const float *a, const float *b,
                               const float *res, tfc_act act, float *out)
{
    const float *xp[64], *wp[64];
    const int C = d->c;
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
    int k = 0;
    for (; k + 32 <= C; k += 32) pixel_m1(4, k, nt, xp, wp, bias, a, b, res, act, out);
    for (; k + 16 <= C; k += 16) pixel_m1(2, k, nt, xp, wp, bias, a, b, res, act, out);
    for (; k < C; k += 8) pixel_m1(1, k, nt, xp, wp, bias, a, b, res, act, out);
}

/* Output pixels p to p + P - 1 of a row (counted from its first interior pixel, ox0) of a
 * 3-wide kernel whose valid column taps are v in [V0, V1) (an interior pixel's 0-3, the
 * edges' 1-3 and 0-2), 8 channels from k: the NU valid kernel rows' weights wv in registers,
 * xr[u] the input row u at ox0's tap 0, xs floats from pixel to pixel, xd from tap to tap, y
 * ox0's output (res its residual or NULL), C floats apart. Each pixel sums as pixel_m1 sums
 * it (bias or 0, then the valid taps in order: the same bits); the P pixels' chains side by
 * side hide the add's latency, and each weight serves P pixels. */
DW_INLINE DW_AVX2 void group_m1(const int P, const int NU, const int V0, const int V1,
                                const __m256 wv[3][3], const float *const *xr, int p,
                                int64_t xs, int64_t xd, int k, const float *bias,
                                const float *a, const float *b, const float *res, tfc_act act,
                                float *y, int C)
{
    const float *xq[3];
    for (int u = 0; u < NU; u++) xq[u] = xr[u] + (p * xs + V0 * xd);
    res = res ? res + (int64_t)p * C : NULL;
    y += (int64_t)p * C;
    __m256 s[4];
    const __m256 s0 = bias ? _mm256_loadu_ps(bias + k) : _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int i = 0; i < P; i++) s[i] = s0;
#pragma GCC unroll 3
    for (int u = 0; u < NU; u++)
#pragma GCC unroll 3
        for (int v = V0; v < V1; v++)
#pragma GCC unroll 4
            for (int i = 0; i < P; i++) {
                const __m256 xv = _mm256_loadu_ps(xq[u] + i * xs + (v - V0) * xd + k);
                s[i] = _mm256_add_ps(s[i], _mm256_mul_ps(xv, wv[u][v]));
            }
#pragma GCC unroll 4
    for (int i = 0; i < P; i++)
        finish_m1(s[i], k, a, b, res ? res + (int64_t)i * C : NULL, act, y + (int64_t)i * C);
}

/* The row's output pixels from ox0 - L to ox1 + R on group_m1, ox0 to ox1 = ox0 + n
 * interior, a left edge pixel with taps 1-3 where L, a right one with taps 0-2 where R: 8
 * channels at a time, outer, the block's weights loaded once, then the pixels (the interior
 * 4 at a time, then the 1-3 left). xr[u]: the valid input rows at ox0's tap 0; y, res: ox0's
 * output and residual (or NULL). SW: the stride where it is 1 or 2 without dilation, a
 * constant, else 0 (sw and dw at run time): with constants the tap offsets are multiples of
 * C, few enough for the general registers, where the run-time ones' 12 were reloaded from
 * the stack (about 10% slower on the 2-core VM). */
DW_INLINE DW_AVX2 void row_m1(const int NU, const int SW, const float *const *xr,
                              const float *const *wr, int L, int n, int R, int sw, int dw,
                              const float *bias, const float *a, const float *b,
                              const float *res, tfc_act act, float *y, int C)
{
    const int64_t xs = (int64_t)(SW ? SW : sw) * C, xd = (int64_t)(SW ? 1 : dw) * C;
    for (int k = 0; k < C; k += 8) {
        __m256 wv[3][3];
#pragma GCC unroll 3
        for (int u = 0; u < NU; u++)
#pragma GCC unroll 3
            for (int v = 0; v < 3; v++) wv[u][v] = _mm256_loadu_ps(wr[u] + v * C + k);
        if (L) group_m1(1, NU, 1, 3, wv, xr, -1, xs, xd, k, bias, a, b, res, act, y, C);
        int p = 0;
        for (; p + 4 <= n; p += 4)
            group_m1(4, NU, 0, 3, wv, xr, p, xs, xd, k, bias, a, b, res, act, y, C);
        switch (n - p) {
        case 3: group_m1(3, NU, 0, 3, wv, xr, p, xs, xd, k, bias, a, b, res, act, y, C); break;
        case 2: group_m1(2, NU, 0, 3, wv, xr, p, xs, xd, k, bias, a, b, res, act, y, C); break;
        case 1: group_m1(1, NU, 0, 3, wv, xr, p, xs, xd, k, bias, a, b, res, act, y, C); break;
        }
        if (R) group_m1(1, NU, 0, 2, wv, xr, n, xs, xd, k, bias, a, b, res, act, y, C);
    }
}

/* row_m1 for the nu (1-3) valid kernel rows. */
DW_INLINE DW_AVX2 void rows_m1(const int SW, int nu, const float *const *xr,
                               const float *const *wr, int L, int n, int R, int sw, int dw,
                               const float *bias, const float *a, const float *b,
                               const float *res, tfc_act act, float *y, int C)
{
    switch (nu) {
    case 3: row_m1(3, SW, xr, wr, L, n, R, sw, dw, bias, a, b, res, act, y, C); break;
    case 2: row_m1(2, SW, xr, wr, L, n, R, sw, dw, bias, a, b, res, act, y, C); break;
    case 1: row_m1(1, SW, xr, wr, L, n, R, sw, dw, bias, a, b, res, act, y, C); break;
    }
}

/* forward_row for a depth multiplier of 1 and channels a multiple of 8 on AVX2, with the
 * activation (ReLU or relu6; else linear) applied as act_forward would after it: each
 * pixel's channels in registers across its taps, where forward_row's loops load and store
 * the pixel's outputs once per tap (fashion_mobilenet's 16- to 192-channel layers at batch
 * 1 spent more in that and in the loops' set-up than in the products). A 3x3 kernel's row
 * takes row_m1, which holds a block's 9 weights in registers across the row and sums 4
 * interior pixels side by side (pixel_m1 alone loaded 2 vectors per product, and at 16
 * channels its 2 chains waited on the add's latency), and the edge pixels of a 'same'
 * padding of 1; other edges and other kernels take edge_m1. */
DW_AVX2 static void forward_row_m1(const tfc_conv_desc *d, int64_t r, const float *x,
                                   const float *w, const float *bias, const float *a,
                                   const float *b, const float *residual, tfc_act act,
                                   float *y)
{
    const float *xi = x + r / d->oh * d->h * d->w * d->c;
    const int oy = (int)(r % d->oh), C = d->c;
    const int64_t o = r * d->ow * C;
    /* a 3x3 kernel's valid rows; the interior columns [ox0, ox1): ox sw - pl >= 0 and
     * ox sw - pl + 2 dw < w (none without a valid row: edge_m1 writes bias and epilogue);
     * the edge pixels row_m1 takes: column 0 with taps 1-3 (L), column ox1 with taps 0-2
     * (R), where those are all the edge pixels on their side */
    const float *xr[3], *wr[3];
    int nu = 0, ox0 = d->ow, ox1 = d->ow, L = 0, R = 0;
    for (int u = 0; u < 3 && d->kh == 3 && d->kw == 3; u++) {
        const int iy = source(oy, u, d->sh, d->dh, d->pad_top, d->h);
        if (iy < 0) continue;
        xr[nu] = xi + (int64_t)iy * d->w * C;
        wr[nu++] = w + (int64_t)u * 3 * C;
    }
    if (nu) {
        const int last = d->w - 1 - 2 * d->dw + d->pad_left;
        ox0 = (d->pad_left + d->sw - 1) / d->sw;
        ox1 = last < 0 ? 0 : last / d->sw + 1;
        if (ox1 > d->ow) ox1 = d->ow;
        if (ox0 > ox1) ox0 = ox1 = d->ow;
        L = ox0 == 1 && ox1 > 1 && d->pad_left == d->dw;
        R = ox1 == d->ow - 1 && ox0 < ox1 && (int64_t)ox1 * d->sw - d->pad_left + d->dw < d->w;
    }
    for (int ox = 0; ox < d->ow; ox++) {
        if (ox == ox0 - L) ox = ox1 + R;
        if (ox == d->ow) break;
        edge_m1(d, xi, w, oy, ox, bias, a, b, residual ? residual + o + (int64_t)ox * C : NULL,
                act, y + o + (int64_t)ox * C);
    }
    if (ox0 == ox1) return;
    for (int u = 0; u < nu; u++) xr[u] += ((int64_t)ox0 * d->sw - d->pad_left) * C;
    const int64_t oi = o + (int64_t)ox0 * C;
    const float *res = residual ? residual + oi : NULL;
    const int n = ox1 - ox0, sw = d->sw, dw = d->dw;
    float *yi = y + oi;
    if (sw == 1 && dw == 1) rows_m1(1, nu, xr, wr, L, n, R, 1, 1, bias, a, b, res, act, yi, C);
    else if (sw == 2 && dw == 1) rows_m1(2, nu, xr, wr, L, n, R, 2, 1, bias, a, b, res, act, yi, C);
    else rows_m1(0, nu, xr, wr, L, n, R, sw, dw, bias, a, b, res, act, yi, C);
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
