/* CPU 3-D convolution (Conv3D; tfc_conv3d_desc in core/backend.h) as im2col and GEMM, one
 * example and one channel group at a time: the example's windows are copied into the rows of
 * col [P, K] (P = out[0] out[1] out[2] positions, K = k[0] k[1] k[2] cg values each, in the
 * kernel's order: depth, height, width, channel), so that with the group's kernel W_g
 * [K, fg] (rows of f floats in Keras's layout) and Y_g, dY_g its P x fg columns of y, dy:
 *   forward  Y_g = col W_g (+ bias),  dW_g += colᵀ dY_g,  dcol = dY_g W_gᵀ, then dx += dcol
 * scattered back over the windows (col2im). The weight gradient adds example by example in
 * order, and col2im walks the windows in order, so the sums' order is fixed by the shape. */
#include <string.h>

#include "cpu/cpu_internal.h"

/* Positions of one example's output and values of one of its windows in one group. */
static int64_t positions(const tfc_conv3d_desc *d)
{
    return (int64_t)d->out[0] * d->out[1] * d->out[2];
}

static int64_t window_len(const tfc_conv3d_desc *d)
{
    return (int64_t)d->k[0] * d->k[1] * d->k[2] * (d->c / d->groups);
}

size_t tfc_cpu_conv3d_workspace(tfc_backend *be, const tfc_conv3d_desc *d)
{
    (void)be;
    return (size_t)(positions(d) * window_len(d)) * sizeof(float);
}

/* The input position of output o's kernel tap u along axis a (may lie outside, in the
 * padding). */
static int tap(const tfc_conv3d_desc *d, int a, int o, int u)
{
    return o * d->s[a] + u * d->dil[a] - d->pad[a];
}

/* col [P, K] = the windows of group g of one example's volume x [in, c]; padding reads 0. */
static void im2col(tfc_backend *be, const tfc_conv3d_desc *d, const float *x, int g, float *col)
{
    const int cg = d->c / d->groups;
    const int64_t P = positions(d), K = window_len(d);
    const int nt = tfc_cpu_threads(be, P * K);
#pragma omp parallel for TFC_CPU_STATIC(P, nt)
    for (int64_t p = 0; p < P; p++) {
        const int o0 = (int)(p / ((int64_t)d->out[1] * d->out[2]));
        const int o1 = (int)(p / d->out[2] % d->out[1]), o2 = (int)(p % d->out[2]);
        float *row = col + p * K;
        for (int u0 = 0; u0 < d->k[0]; u0++) {
            const int i0 = tap(d, 0, o0, u0);
            for (int u1 = 0; u1 < d->k[1]; u1++) {
                const int i1 = tap(d, 1, o1, u1);
                for (int u2 = 0; u2 < d->k[2]; u2++, row += cg) {
                    const int i2 = tap(d, 2, o2, u2);
                    if (i0 < 0 || i0 >= d->in[0] || i1 < 0 || i1 >= d->in[1] || i2 < 0 ||
                        i2 >= d->in[2]) {
                        memset(row, 0, (size_t)cg * sizeof(float));
                        continue;
                    }
                    const int64_t at = (((int64_t)i0 * d->in[1] + i1) * d->in[2] + i2) * d->c;
                    memcpy(row, x + at + (int64_t)g * cg, (size_t)cg * sizeof(float));
                }
            }
        }
    }
}

/* dx [in, c] (one example) += col [P, K] scattered back over group g's windows, position by
 * position and tap by tap in order (windows overlap: one thread). */
static void col2im(const tfc_conv3d_desc *d, const float *col, int g, float *dx)
{
    const int cg = d->c / d->groups;
    const int64_t P = positions(d);
    for (int64_t p = 0; p < P; p++) {
        const int o0 = (int)(p / ((int64_t)d->out[1] * d->out[2]));
        const int o1 = (int)(p / d->out[2] % d->out[1]), o2 = (int)(p % d->out[2]);
        const float *row = col + p * window_len(d);
        for (int u0 = 0; u0 < d->k[0]; u0++) {
            const int i0 = tap(d, 0, o0, u0);
            for (int u1 = 0; u1 < d->k[1]; u1++) {
                const int i1 = tap(d, 1, o1, u1);
                for (int u2 = 0; u2 < d->k[2]; u2++, row += cg) {
                    const int i2 = tap(d, 2, o2, u2);
                    if (i0 < 0 || i0 >= d->in[0] || i1 < 0 || i1 >= d->in[1] || i2 < 0 ||
                        i2 >= d->in[2])
                        continue;
                    float *to = dx + (((int64_t)i0 * d->in[1] + i1) * d->in[2] + i2) * d->c +
                                (int64_t)g * cg;
                    for (int i = 0; i < cg; i++) to[i] += row[i];
                }
            }
        }
    }
}

void tfc_cpu_conv3d_forward(tfc_backend *be, const tfc_conv3d_desc *d, const float *x,
                            const float *w, const float *bias, float *y, void *ws)
{
    const int fg = d->f / d->groups;
    const int64_t P = positions(d), K = window_len(d);
    const int64_t in_len = (int64_t)d->in[0] * d->in[1] * d->in[2] * d->c;
    float *col = ws;
    for (int b = 0; b < d->n; b++) {
        float *yb = y + (int64_t)b * P * d->f;
        for (int g = 0; g < d->groups; g++) {
            im2col(be, d, x + b * in_len, g, col);
            tfc_cpu_gemm(be, 0, 0, (int)P, fg, (int)K, 1.0f, col, (int)K, w + (int64_t)g * fg,
                         d->f, 0.0f, yb + (int64_t)g * fg, d->f);
        }
        if (bias)
            for (int64_t p = 0; p < P; p++)
                for (int j = 0; j < d->f; j++) yb[p * d->f + j] += bias[j];
    }
}

void tfc_cpu_conv3d_backward(tfc_backend *be, const tfc_conv3d_desc *d, const float *x,
                             const float *w, const float *dy, float *dx, float *dw, int assign,
                             void *ws)
{
    const int fg = d->f / d->groups;
    const int64_t P = positions(d), K = window_len(d);
    const int64_t in_len = (int64_t)d->in[0] * d->in[1] * d->in[2] * d->c;
    float *col = ws;
    if (dx && assign) memset(dx, 0, (size_t)(d->n * in_len) * sizeof(float));
    for (int b = 0; b < d->n; b++) {
        const float *dyb = dy + (int64_t)b * P * d->f;
        for (int g = 0; g < d->groups; g++) {
            if (dw) {
                im2col(be, d, x + b * in_len, g, col);
                tfc_cpu_gemm(be, 1, 0, (int)K, fg, (int)P, 1.0f, col, (int)K,
                             dyb + (int64_t)g * fg, d->f, 1.0f, dw + (int64_t)g * fg, d->f);
            }
            if (dx) {
                tfc_cpu_gemm(be, 0, 1, (int)P, (int)K, fg, 1.0f, dyb + (int64_t)g * fg, d->f,
                             w + (int64_t)g * fg, d->f, 0.0f, col, (int)K);
                col2im(d, col, g, dx + b * in_len);
            }
        }
    }
}
