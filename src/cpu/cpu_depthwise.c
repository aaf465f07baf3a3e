/* CPU depthwise convolution (DepthwiseConv2D), direct: each output channel k reads input
 * channel k / m alone, so a tap is an element-wise multiply-add over the channel axis, which
 * NHWC keeps contiguous; the loops over channels are plain C that the compiler vectorises.
 * Forward and the data gradient gather (each thread writes its own rows); the filter
 * gradient sums fixed shares of the rows into partials, added in share order. */
#include "cpu/cpu_internal.h"

/* The filter gradient's shares: at most this many, fixed by the shapes, not the threads. */
#define DW_SHARES 32

/* out[k] += x[k / m] * w[k] over the f = c m channels of one pixel and one tap. */
TFC_CPU_VECTOR
static void tap(int c, int m, const float *restrict x, const float *restrict w,
                float *restrict out)
{
    if (m == 1) {
#pragma omp simd
        for (int k = 0; k < c; k++) out[k] += x[k] * w[k];
        return;
    }
    for (int ci = 0; ci < c; ci++)
        for (int j = 0; j < m; j++) out[ci * m + j] += x[ci] * w[ci * m + j];
}

/* Input row (or column) of output row o at tap u, or -1 outside the image. */
static inline int source(int o, int u, int s, int dil, int pad, int size)
{
    int i = o * s + u * dil - pad;
    return i >= 0 && i < size ? i : -1;
}

/* y[n, i, j, k] = sum_{u, v} x[n, i sh + u dh - pt, j sw + v dw - pl, k / m] w[u, v, k]
 *                 + bias[k]; rows (n, i) in parallel. */
void tfc_cpu_depthwise_forward(tfc_backend *be, const tfc_conv_desc *d, const float *x,
                               const float *w, const float *bias, float *y)
{
    const int m = d->f / d->c;
    const int64_t rows = (int64_t)d->n * d->oh;
    int nt = tfc_cpu_threads(be, rows * d->ow * d->f * d->kh * d->kw);
#pragma omp parallel for TFC_CPU_STATIC(rows, nt)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t img = r / d->oh;
        const int oy = (int)(r % d->oh);
        const float *xi = x + img * d->h * d->w * d->c;
        for (int ox = 0; ox < d->ow; ox++) {
            float *out = y + (r * d->ow + ox) * d->f;
            for (int k = 0; k < d->f; k++) out[k] = bias ? bias[k] : 0.0f;
            for (int u = 0; u < d->kh; u++) {
                int iy = source(oy, u, d->sh, d->dh, d->pad_top, d->h);
                if (iy < 0) continue;
                for (int v = 0; v < d->kw; v++) {
                    int ix = source(ox, v, d->sw, d->dw, d->pad_left, d->w);
                    if (ix < 0) continue;
                    tap(d->c, m, xi + ((int64_t)iy * d->w + ix) * d->c,
                        w + (int64_t)(u * d->kw + v) * d->f, out);
                }
            }
        }
    }
}

/* The output row (or column) that reads input row i at tap u, or -1 when none does. */
static inline int reader(int i, int u, int s, int dil, int pad, int size)
{
    int t = i + pad - u * dil;
    if (t < 0 || t % s) return -1;
    t /= s;
    return t < size ? t : -1;
}

/* dx[n, iy, ix, ci] += sum over the (output pixel, tap) pairs that read it of
 * sum_j dy[n, oy, ox, ci m + j] w[u, v, ci m + j]; input rows (n, iy) in parallel, each
 * gathering from the output rows that read it. */
TFC_CPU_VECTOR
void tfc_cpu_depthwise_backward_data(tfc_backend *be, const tfc_conv_desc *d, const float *dy,
                                     const float *w, float *dx)
{
    const int m = d->f / d->c, c = d->c;
    const int64_t rows = (int64_t)d->n * d->h;
    int nt = tfc_cpu_threads(be, (int64_t)d->n * d->oh * d->ow * d->f * d->kh * d->kw);
#pragma omp parallel for TFC_CPU_STATIC(rows, nt)
    for (int64_t r = 0; r < rows; r++) {
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
                    const float *o = gy + ((int64_t)oy * d->ow + ox) * d->f;
                    const float *wt = w + (int64_t)(u * d->kw + v) * d->f;
                    if (m == 1) {
#pragma omp simd
                        for (int k = 0; k < c; k++) g[k] += o[k] * wt[k];
                    } else {
                        for (int ci = 0; ci < c; ci++) {
                            float s = 0.0f;
                            for (int j = 0; j < m; j++) s += o[ci * m + j] * wt[ci * m + j];
                            g[ci] += s;
                        }
                    }
                }
            }
        }
    }
}

/* Shares of the filter gradient for rows output rows (n oh): one per DW_SHARES-th. */
static int shares(int64_t rows)
{
    return rows < DW_SHARES ? (int)rows : DW_SHARES;
}

size_t tfc_cpu_depthwise_workspace(tfc_backend *be, const tfc_conv_desc *d)
{
    return (size_t)shares((int64_t)d->n * d->oh) * d->kh * d->kw * d->f * sizeof(float);
}

/* dw[u, v, k] += sum_{n, i, j} x[n, i sh + u dh - pt, j sw + v dw - pl, k / m] dy[n, i, j, k].
 * Share s of S sums output rows [R s / S, R (s + 1) / S) into its partial in ws; the
 * partials are then added in share order, so the bits depend on the shapes only. */
TFC_CPU_VECTOR
void tfc_cpu_depthwise_backward_filter(tfc_backend *be, const tfc_conv_desc *d, const float *x,
                                       const float *dy, float *dw, void *ws)
{
    const int m = d->f / d->c;
    const int64_t rows = (int64_t)d->n * d->oh, K = (int64_t)d->kh * d->kw * d->f;
    const int S = shares(rows);
    float *part = ws;
    int nt = tfc_cpu_threads(be, rows * d->ow * K);
    if (nt > S) nt = S;
#pragma omp parallel for TFC_CPU_STATIC(S, nt)
    for (int s = 0; s < S; s++) {
        float *p = part + s * K;
        memset(p, 0, (size_t)K * sizeof(float));
        for (int64_t r = rows * s / S; r < rows * (s + 1) / S; r++) {
            const int64_t img = r / d->oh;
            const int oy = (int)(r % d->oh);
            const float *xi = x + img * d->h * d->w * d->c;
            for (int ox = 0; ox < d->ow; ox++) {
                const float *g = dy + (r * d->ow + ox) * d->f;
                for (int u = 0; u < d->kh; u++) {
                    int iy = source(oy, u, d->sh, d->dh, d->pad_top, d->h);
                    if (iy < 0) continue;
                    for (int v = 0; v < d->kw; v++) {
                        int ix = source(ox, v, d->sw, d->dw, d->pad_left, d->w);
                        if (ix < 0) continue;
                        tap(d->c, m, xi + ((int64_t)iy * d->w + ix) * d->c, g,
                            p + (int64_t)(u * d->kw + v) * d->f);
                    }
                }
            }
        }
    }
    int nk = tfc_cpu_threads(be, K * S);
#pragma omp parallel for TFC_CPU_STATIC(K, nk)
    for (int64_t k = 0; k < K; k++) {
        float sum = 0.0f;
        for (int s = 0; s < S; s++) sum += part[s * K + k];
        dw[k] += sum;
    }
}
