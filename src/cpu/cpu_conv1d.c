/* CPU kernels of the 1-D sequence layers that the other ops do not cover: the grouped
 * convolution of Conv1D (written for the general NHWC desc; Conv1D passes h = kh = 1) and
 * the masked mean of GlobalAveragePooling1D. Plain loops, the filters (or channels) of a
 * group innermost and contiguous; one channel per group and filter (depthwise) runs across
 * the groups instead. Every output element is computed by one thread in a fixed order, so
 * results do not depend on the thread count. */
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
#pragma omp parallel for TFC_CPU_STATIC(n, nt)
    for (int i = 0; i < n; i++) {
        float *yi = y + (int64_t)i * c;
        memset(yi, 0, (size_t)c * sizeof(float));
        for (int s = 0; s < t; s++) {
            if (mask[(int64_t)i * t + s] == 0.0f) continue;
            const float *xs = x + ((int64_t)i * t + s) * c;
#pragma omp simd
            for (int ch = 0; ch < c; ch++) yi[ch] += xs[ch];
        }
        const float count = kept_steps(t, mask + (int64_t)i * t);
        for (int ch = 0; ch < c; ch++) yi[ch] /= count;
    }
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
