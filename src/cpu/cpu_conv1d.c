/* CPU kernels of the 1-D sequence layers: Conv1D's grouped convolution (plain loops for the
 * general NHWC desc, the filters of a group innermost; one channel per group and filter runs
 * across the groups), its ungrouped one at stride and dilation 1 on packed GEMMs without
 * im2col, and GlobalAveragePooling1D's masked mean. Every output element is computed by one
 * thread in a fixed order, so results do not depend on the thread count. */
#include <omp.h>

#include "cpu/cpu_internal.h"

/* y[i, oy, ox, g fg + j] = sum_{u, v, ci} x[i, iy, ix, g cg + ci] w[u, v, ci, g fg + j]
 * with iy = oy sh - pt + u dh, ix = ox sw - pl + v dw inside the image. */
void tfc_cpu_grouped_conv_forward(tfc_backend *be, const tfc_conv_desc *d, int groups,
                                  const float *x, const float *w, float *y)
{
    const int cg = d->c / groups, fg = d->f / groups, f = d->f;
    const int64_t rows = (int64_t)d->n * d->oh * d->ow;
    const int nt = tfc_cpu_threads(be, rows * d->kh * d->kw * cg * f);
#pragma omp parallel for TFC_CPU_STATIC(rows, nt)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t i = r / ((int64_t)d->oh * d->ow);
        const int oy = (int)(r / d->ow % d->oh), ox = (int)(r % d->ow);
        float *yr = y + r * f;
        memset(yr, 0, (size_t)f * sizeof(float));
        for (int u = 0; u < d->kh; u++) {
            const int iy = oy * d->sh - d->pad_top + u * d->dh;
            if (iy < 0 || iy >= d->h) continue;
            for (int v = 0; v < d->kw; v++) {
                const int ix = ox * d->sw - d->pad_left + v * d->dw;
                if (ix < 0 || ix >= d->w) continue;
                const float *xp = x + ((i * d->h + iy) * d->w + ix) * d->c;
                const float *wp = w + ((int64_t)u * d->kw + v) * cg * f;
                if (cg == 1 && fg == 1) { /* depthwise: channel g feeds filter g alone */
#pragma omp simd
                    for (int g = 0; g < groups; g++) yr[g] += xp[g] * wp[g];
                    continue;
                }
                for (int g = 0; g < groups; g++)
                    for (int ci = 0; ci < cg; ci++) {
                        const float xv = xp[g * cg + ci];
                        const float *wr = wp + (int64_t)ci * f + g * fg;
                        float *yg = yr + g * fg;
#pragma omp simd
                        for (int j = 0; j < fg; j++) yg[j] += xv * wr[j];
                    }
            }
        }
    }
}

/* dx[i, iy, ix, g cg + ci] (+)= sum over the (oy, ox, u, v) with oy sh - pt + u dh = iy and
 * ox sw - pl + v dw = ix of sum_j dy[i, oy, ox, g fg + j] w[u, v, ci, g fg + j]: gathered
 * per input pixel, so each dx element has one writer. */
void tfc_cpu_grouped_conv_backward_data(tfc_backend *be, const tfc_conv_desc *d, int groups,
                                        const float *dy, const float *w, float *dx, int assign)
{
    const int cg = d->c / groups, fg = d->f / groups, f = d->f;
    const int64_t rows = (int64_t)d->n * d->h * d->w;
    const int nt = tfc_cpu_threads(be, rows * d->kh * d->kw * cg * f);
#pragma omp parallel for TFC_CPU_STATIC(rows, nt)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t i = r / ((int64_t)d->h * d->w);
        const int iy = (int)(r / d->w % d->h), ix = (int)(r % d->w);
        float *xr = dx + r * d->c;
        if (assign) memset(xr, 0, (size_t)d->c * sizeof(float));
        for (int u = 0; u < d->kh; u++) {
            const int ty = iy + d->pad_top - u * d->dh;
            if (ty < 0 || ty % d->sh || ty / d->sh >= d->oh) continue;
            for (int v = 0; v < d->kw; v++) {
                const int tx = ix + d->pad_left - v * d->dw;
                if (tx < 0 || tx % d->sw || tx / d->sw >= d->ow) continue;
                const float *dp = dy + ((i * d->oh + ty / d->sh) * d->ow + tx / d->sw) * f;
                const float *wp = w + ((int64_t)u * d->kw + v) * cg * f;
                if (cg == 1 && fg == 1) {
#pragma omp simd
                    for (int g = 0; g < groups; g++) xr[g] += dp[g] * wp[g];
                    continue;
                }
                for (int g = 0; g < groups; g++)
                    for (int ci = 0; ci < cg; ci++) {
                        const float *wr = wp + (int64_t)ci * f + g * fg, *dg = dp + g * fg;
                        float s = 0.0f;
#pragma omp simd reduction(+ : s)
                        for (int j = 0; j < fg; j++) s += dg[j] * wr[j];
                        xr[g * cg + ci] += s;
                    }
            }
        }
    }
}

/* Groups per iteration of the filter gradient. */
#define GROUP_RUN 16

/* dw[u, v, ci, g fg + j] += sum_{i, oy, ox} x[i, iy, ix, g cg + ci] dy[i, oy, ox, g fg + j]:
 * one (u, v, run of GROUP_RUN groups) per iteration, whose cg x fg blocks of dw stay in
 * cache while it walks the batch; each element sums over the batch in order. */
void tfc_cpu_grouped_conv_backward_filter(tfc_backend *be, const tfc_conv_desc *d, int groups,
                                          const float *x, const float *dy, float *dw)
{
    const int cg = d->c / groups, fg = d->f / groups, f = d->f;
    const int nrun = (groups + GROUP_RUN - 1) / GROUP_RUN;
    const int64_t runs = (int64_t)d->kh * d->kw * nrun;
    const int nt = tfc_cpu_threads(be, (int64_t)d->kh * d->kw * cg * f * d->n * d->oh * d->ow);
#pragma omp parallel for TFC_CPU_STATIC(runs, nt)
    for (int64_t k = 0; k < runs; k++) {
        const int g0 = (int)(k % nrun) * GROUP_RUN;
        const int g1 = g0 + GROUP_RUN < groups ? g0 + GROUP_RUN : groups;
        const int v = (int)(k / nrun % d->kw), u = (int)(k / nrun / d->kw);
        float *dwp = dw + ((int64_t)u * d->kw + v) * cg * f;
        for (int64_t i = 0; i < d->n; i++)
            for (int oy = 0; oy < d->oh; oy++) {
                const int iy = oy * d->sh - d->pad_top + u * d->dh;
                if (iy < 0 || iy >= d->h) continue;
                for (int ox = 0; ox < d->ow; ox++) {
                    const int ix = ox * d->sw - d->pad_left + v * d->dw;
                    if (ix < 0 || ix >= d->w) continue;
                    const float *xp = x + ((i * d->h + iy) * d->w + ix) * d->c;
                    const float *dp = dy + ((i * d->oh + oy) * d->ow + ox) * f;
                    if (cg == 1 && fg == 1) {
#pragma omp simd
                        for (int g = g0; g < g1; g++) dwp[g] += xp[g] * dp[g];
                        continue;
                    }
                    for (int g = g0; g < g1; g++)
                        for (int ci = 0; ci < cg; ci++) {
                            const float xv = xp[g * cg + ci];
                            const float *dg = dp + g * fg;
                            float *dwr = dwp + (int64_t)ci * f + g * fg;
#pragma omp simd
                            for (int j = 0; j < fg; j++) dwr[j] += xv * dg[j];
                        }
                }
            }
    }
}

/* ---- the ungrouped convolution at stride and dilation 1 (conv1d_*) ----------------------
 * Output step t of a sequence reads input steps t - pl .. t - pl + k - 1: in a copy of the
 * sequence with pl zero steps before it (and zeros after), k consecutive rows, that is k c
 * consecutive floats. So the copy, read in place as A with rows c floats apart, is the
 * im2col matrix [ow, k c] without building it: forward is one packed GEMM per sequence
 *   y = A · W[k c, f] + bias
 * and the data gradient the same over dy, padded with k - 1 - pl zero steps before it,
 * against the taps reversed and transposed:
 *   dx[s] = sum_j dy'[s + j] Wᵀ[k - 1 - j]      (dy'[r] = dy[r - (k - 1 - pl)], 0 outside)
 * The filter gradient runs over the whole batch, every sequence padded to L = ow + k - 1
 * steps, dy to L steps too (zeros after its ow): tap u is one GEMM
 *   dW[u] += XP[rows u .. u + M)ᵀ · DYP[rows 0 .. M),  M = (n - 1) L + ow
 * whose products across two sequences meet a zero row of DYP. */

/* Steps of the forward's (and the filter gradient's) padded copy of a sequence. */
static int padded_steps(const tfc_conv_desc *d)
{
    return d->ow + d->kw - 1;
}

/* dst [len, c] = `front` zero rows, then rows of src [rows, c] (as many as fit), then zeros */
static void pad_rows(int front, int rows, int len, int c, const float *src, float *dst)
{
    if (rows > len - front) rows = len - front;
    memset(dst, 0, (size_t)front * c * sizeof(float));
    memcpy(dst + (int64_t)front * c, src, (size_t)rows * c * sizeof(float));
    memset(dst + (int64_t)(front + rows) * c, 0, (size_t)(len - front - rows) * c * sizeof(float));
}

size_t tfc_cpu_conv1d_workspace(tfc_backend *be, const tfc_conv_desc *d)
{
    const int k = d->kw, lf = padded_steps(d), ld = d->w + k - 1;
    const size_t fwd = tfc_cpu_panels_floats(k * d->c, d->f) +
                       (size_t)be->threads * tfc_cpu_padded((int64_t)lf * d->c);
    const size_t data = tfc_cpu_panels_floats(k * d->f, d->c) +
                        (size_t)be->threads * tfc_cpu_padded((int64_t)ld * d->f);
    const size_t filter = tfc_cpu_padded((int64_t)d->n * lf * d->c) +
                          tfc_cpu_padded((int64_t)d->n * lf * d->f);
    size_t most = fwd > data ? fwd : data;
    most = most > filter ? most : filter;
    return most * sizeof(float);
}

/* y[i, t, :] = bias + sum_{u, ci} x[i, t - pl + u, ci] w[u, ci, :], then max(y, 0) with relu:
 * sequences split among the threads, each through its padded copy. */
void tfc_cpu_conv1d_forward(tfc_backend *be, const tfc_conv_desc *d, const float *x,
                            const float *w, const float *bias, int relu, float *y, void *ws)
{
    const int k = d->kw, c = d->c, f = d->f, ow = d->ow, len = padded_steps(d);
    float *packed = ws, *pads = packed + tfc_cpu_panels_floats(k * c, f);
    const int64_t per_pad = (int64_t)tfc_cpu_padded((int64_t)len * c);
    tfc_cpu_pack_panels(k * c, f, w, f, 0, packed);
    const int n = d->n, nt = tfc_cpu_threads(be, (int64_t)n * ow * k * c * f);
#pragma omp parallel for TFC_CPU_STATIC(n, nt)
    for (int i = 0; i < n; i++) {
        float *pad = pads + omp_get_thread_num() * per_pad, *yi = y + (int64_t)i * ow * f;
        pad_rows(d->pad_left, d->w, len, c, x + (int64_t)i * d->w * c, pad);
        tfc_panel_gemm g = {.m = ow, .n = f, .a1 = {pad, c, k * c, TFC_PANEL_ROWS},
                            .packed = packed, .ldp = k * c, .set = 1, .init = bias, .c = yi,
                            .ldc = f};
        tfc_cpu_panel_gemm(&g);
        if (!relu) continue;
#pragma omp simd
        for (int64_t j = 0; j < (int64_t)ow * f; j++) yi[j] = yi[j] < 0.0f ? 0.0f : yi[j];
    }
}

/* dx[i, s, :] (+)= sum_{j, fo} dy'[i, s + j, fo] w[k - 1 - j, :, fo] */
void tfc_cpu_conv1d_backward_data(tfc_backend *be, const tfc_conv_desc *d, const float *dy,
                                  const float *w, float *dx, int assign, void *ws)
{
    const int k = d->kw, c = d->c, f = d->f, t = d->w, len = t + k - 1;
    float *packed = ws, *pads = packed + tfc_cpu_panels_floats(k * f, c);
    const int64_t per_pad = (int64_t)tfc_cpu_padded((int64_t)len * f);
    /* rows j f .. j f + f - 1: tap k - 1 - j transposed, [f, c] */
    for (int j = 0; j < k; j++)
        tfc_cpu_pack_panels_ld(f, c, w + (int64_t)(k - 1 - j) * c * f, f, 1, packed + 16 * j * f,
                               k * f);
    const int n = d->n, nt = tfc_cpu_threads(be, (int64_t)n * t * k * c * f);
#pragma omp parallel for TFC_CPU_STATIC(n, nt)
    for (int i = 0; i < n; i++) {
        float *pad = pads + omp_get_thread_num() * per_pad;
        pad_rows(k - 1 - d->pad_left, d->ow, len, f, dy + (int64_t)i * d->ow * f, pad);
        tfc_panel_gemm g = {.m = t, .n = c, .a1 = {pad, f, k * f, TFC_PANEL_ROWS},
                            .packed = packed, .ldp = k * f, .set = assign,
                            .c = dx + (int64_t)i * t * c, .ldc = c};
        tfc_cpu_panel_gemm(&g);
    }
}

/* Filters per GEMM of the filter gradient. */
#define FILTER_RUN 64

/* dw[u, :, :] += sum_{i, t} x[i, t - pl + u, :]ᵀ dy[i, t, :] */
void tfc_cpu_conv1d_backward_filter(tfc_backend *be, const tfc_conv_desc *d, const float *x,
                                    const float *dy, float *dw, void *ws)
{
    const int k = d->kw, c = d->c, f = d->f, ow = d->ow, len = padded_steps(d), n = d->n;
    float *xp = ws, *dyp = xp + tfc_cpu_padded((int64_t)n * len * c);
    const int nt = tfc_cpu_threads(be, (int64_t)n * len * (c + f));
#pragma omp parallel for TFC_CPU_STATIC(n, nt)
    for (int i = 0; i < n; i++) {
        pad_rows(d->pad_left, d->w, len, c, x + (int64_t)i * d->w * c,
                 xp + (int64_t)i * len * c);
        pad_rows(0, ow, len, f, dy + (int64_t)i * ow * f, dyp + (int64_t)i * len * f);
    }
    /* (tap, run of FILTER_RUN filters) per single-threaded GEMM, claimed as threads finish:
     * the split never depends on the thread count, nor then do the sums */
    const int rows = (n - 1) * len + ow, runs = (f + FILTER_RUN - 1) / FILTER_RUN;
    const int units = k * runs, ut = tfc_cpu_threads(be, (int64_t)rows * k * c * f);
#pragma omp parallel for num_threads(tfc_cpu_team(ut)) schedule(dynamic, 1)
    for (int q = 0; q < units; q++) {
        const int u = q / runs, j0 = q % runs * FILTER_RUN;
        const int cols = f - j0 < FILTER_RUN ? f - j0 : FILTER_RUN;
        tfc_cpu_gemm(be, 1, 0, c, cols, rows, 1.0f, xp + (int64_t)u * c, c, dyp + j0, f, 1.0f,
                     dw + (int64_t)u * c * f + j0, f);
    }
}

/* Steps of sequence i that the mask keeps. */
static float kept_steps(int t, const float *mask_i)
{
    float count = 0.0f;
    for (int s = 0; s < t; s++) count += mask_i[s] != 0.0f;
    return count;
}

/* y[i, ch] = sum_s mask[i, s] x[i, s, ch] / sum_s mask[i, s]: the sum of the kept steps in
 * step order, divided (not multiplied by a reciprocal) by their count, as Keras. */
void tfc_cpu_masked_mean_forward(tfc_backend *be, int n, int t, int c, const float *x,
                                 const float *mask, float *y)
{
    const int nt = tfc_cpu_threads(be, (int64_t)n * t * c);
    TFC_CPU_FOR(n, nt, for (int i = 0; i < n; i++) {
        float *yi = y + (int64_t)i * c;
        memset(yi, 0, (size_t)c * sizeof(float));
        for (int s = 0; s < t; s++) {
            if (mask[(int64_t)i * t + s] == 0.0f) continue;
            const float *xs = x + ((int64_t)i * t + s) * c;
            _Pragma("omp simd")
            for (int ch = 0; ch < c; ch++) yi[ch] += xs[ch];
        }
        const float count = kept_steps(t, mask + (int64_t)i * t);
        for (int ch = 0; ch < c; ch++) yi[ch] /= count;
    });
}

/* dx[i, s, ch] (+)= mask[i, s] dy[i, ch] / sum_s mask[i, s]. */
void tfc_cpu_masked_mean_backward(tfc_backend *be, int n, int t, int c, const float *dy,
                                  const float *mask, float *dx, int assign)
{
    const int nt = tfc_cpu_threads(be, (int64_t)n * t * c);
#pragma omp parallel for TFC_CPU_STATIC(n, nt)
    for (int i = 0; i < n; i++) {
        const float count = kept_steps(t, mask + (int64_t)i * t);
        const float *dyi = dy + (int64_t)i * c;
        for (int s = 0; s < t; s++) {
            float *dxs = dx + ((int64_t)i * t + s) * c;
            if (mask[(int64_t)i * t + s] == 0.0f) {
                if (assign) memset(dxs, 0, (size_t)c * sizeof(float));
                continue;
            }
#pragma omp simd
            for (int ch = 0; ch < c; ch++) dxs[ch] = (assign ? 0.0f : dxs[ch]) + dyi[ch] / count;
        }
    }
}
