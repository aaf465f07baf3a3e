/* CPU adaptive max and average pooling (AdaptiveMaxPooling1D/2D/3D,
 * AdaptiveAveragePooling1D/2D/3D; tfc_adaptive_pool_desc in core/backend.h, its bins in
 * core/adaptive_pool.h), NDHWC, channels the contiguous inner loop. A bin's cells are walked
 * w outermost, then h, then d, and a later cell replaces the max only when strictly larger:
 * the winner on ties is the cell of the lowest w, then h, then d, where JAX's gradient of
 * Keras's axis-by-axis max (d, then h, then w) sends it. Max pooling records each winner's
 * flat index within its example's volume, and backward routes dy there. Examples are
 * independent: one thread owns an example, and its dx sums arrive in output order. */
#include <string.h>

#include "core/adaptive_pool.h"
#include "cpu/cpu_internal.h"

static int64_t volume_in(const tfc_adaptive_pool_desc *d)
{
    return (int64_t)d->in[0] * d->in[1] * d->in[2] * d->c;
}

static int64_t volume_out(const tfc_adaptive_pool_desc *d)
{
    return (int64_t)d->out[0] * d->out[1] * d->out[2] * d->c;
}

/* Output position p's bin [lo[a], hi[a]) along each axis a. */
static void bins(const tfc_adaptive_pool_desc *d, int64_t p, int lo[3], int hi[3])
{
    const int o[3] = {(int)(p / ((int64_t)d->out[1] * d->out[2])),
                      (int)(p / d->out[2] % d->out[1]), (int)(p % d->out[2])};
    for (int a = 0; a < 3; a++) tfc_adaptive_bin(o[a], d->in[a], d->out[a], &lo[a], &hi[a]);
}

/* One example: y [out, c] from x [in, c]. Max: the bin's first cell seeds y and argmax, a
 * later cell replaces them where strictly larger. Average: the sum over the bin's cells in
 * the same order, over their count. */
static void pool_example(const tfc_adaptive_pool_desc *d, const float *x, float *y,
                         int32_t *argmax)
{
    const int c = d->c;
    const int64_t P = (int64_t)d->out[0] * d->out[1] * d->out[2];
    for (int64_t p = 0; p < P; p++) {
        int lo[3], hi[3];
        bins(d, p, lo, hi);
        float *yp = y + p * c;
        int32_t *ap = argmax ? argmax + p * c : NULL;
        int first = 1;
        for (int i2 = lo[2]; i2 < hi[2]; i2++)
            for (int i1 = lo[1]; i1 < hi[1]; i1++)
                for (int i0 = lo[0]; i0 < hi[0]; i0++) {
                    const int64_t at = (((int64_t)i0 * d->in[1] + i1) * d->in[2] + i2) * c;
                    const float *xp = x + at;
                    if (first) {
                        for (int j = 0; j < c; j++) yp[j] = xp[j];
                        for (int j = 0; ap && j < c; j++) ap[j] = (int32_t)(at + j);
                    } else if (!d->is_max) {
                        for (int j = 0; j < c; j++) yp[j] += xp[j];
                    } else if (ap) { /* masks, not branches (cpu_pool.c's max_pixel) */
                        const int32_t base = (int32_t)at;
#pragma omp simd
                        for (int j = 0; j < c; j++) {
                            const int32_t win = -(int32_t)(xp[j] > yp[j]); /* all ones: wins */
                            yp[j] = win ? xp[j] : yp[j];
                            ap[j] = ((base + j) & win) | (ap[j] & ~win);
                        }
                    } else {
                        for (int j = 0; j < c; j++) yp[j] = xp[j] > yp[j] ? xp[j] : yp[j];
                    }
                    first = 0;
                }
        if (!d->is_max) {
            const float count = (float)((hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]));
            for (int j = 0; j < c; j++) yp[j] /= count;
        }
    }
}

/* The cells a pass reads: each output value's bin, at most (in / out + 2) per axis. */
static int64_t work_of(const tfc_adaptive_pool_desc *d)
{
    int64_t w = volume_out(d);
    for (int a = 0; a < 3; a++) w *= d->in[a] / d->out[a] + 2;
    return w;
}

void tfc_cpu_adaptive_pool_forward(tfc_backend *be, const tfc_adaptive_pool_desc *d,
                                   const float *x, float *y, int32_t *argmax)
{
    const int64_t vin = volume_in(d), vout = volume_out(d);
    const int nt = d->n > 1 ? tfc_cpu_threads(be, d->n * work_of(d)) : 1;
#pragma omp parallel for TFC_CPU_STATIC(d->n, nt)
    for (int64_t b = 0; b < d->n; b++)
        pool_example(d, x + b * vin, y + b * vout, argmax ? argmax + b * vout : NULL);
}

/* One example's dx [in, c] += its bins' share of dy [out, c], in output order: max, dy to
 * the winner; average, dy / count to every cell of the bin. */
static void unpool_example(const tfc_adaptive_pool_desc *d, const float *dy,
                           const int32_t *argmax, float *dx)
{
    const int c = d->c;
    const int64_t P = (int64_t)d->out[0] * d->out[1] * d->out[2];
    if (d->is_max) {
        for (int64_t o = 0; o < P * c; o++) dx[argmax[o]] += dy[o];
        return;
    }
    for (int64_t p = 0; p < P; p++) {
        int lo[3], hi[3];
        bins(d, p, lo, hi);
        const float count = (float)((hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]));
        const float *g = dy + p * c;
        for (int i2 = lo[2]; i2 < hi[2]; i2++)
            for (int i1 = lo[1]; i1 < hi[1]; i1++)
                for (int i0 = lo[0]; i0 < hi[0]; i0++) {
                    float *to = dx + (((int64_t)i0 * d->in[1] + i1) * d->in[2] + i2) * c;
                    for (int j = 0; j < c; j++) to[j] += g[j] / count;
                }
    }
}

void tfc_cpu_adaptive_pool_backward(tfc_backend *be, const tfc_adaptive_pool_desc *d,
                                    const float *dy, const int32_t *argmax, float *dx,
                                    int assign)
{
    const int64_t vin = volume_in(d), vout = volume_out(d);
    const int nt = d->n > 1 ? tfc_cpu_threads(be, d->n * work_of(d)) : 1;
#pragma omp parallel for TFC_CPU_STATIC(d->n, nt)
    for (int64_t b = 0; b < d->n; b++) {
        float *g = dx + b * vin;
        if (assign) memset(g, 0, (size_t)vin * sizeof(float));
        unpool_example(d, dy + b * vout, d->is_max ? argmax + b * vout : NULL, g);
    }
}
