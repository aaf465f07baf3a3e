/* CPU max and average 3-D pooling (MaxPooling3D, AveragePooling3D; tfc_pool3d_desc in
 * core/backend.h), NDHWC, as cpu_pool.c's 2-D pooling: each window clipped to the volume, so
 * padded cells never win a max and never count in an average (TensorFlow's SAME); channels
 * the contiguous inner loop; max pooling records each winner's flat index within its
 * example's volume, and backward routes dy there. Examples are independent: one thread owns
 * an example, and its dx sums arrive in window order. */
#include <string.h>

#include "cpu/cpu_internal.h"

/* The window of output position o (per axis), clipped to the volume: [lo[a], hi[a]). */
static void clip3(const tfc_pool3d_desc *d, const int o[3], int lo[3], int hi[3])
{
    for (int a = 0; a < 3; a++) {
        lo[a] = o[a] * d->s[a] - d->pad[a];
        hi[a] = lo[a] + d->k[a];
        if (lo[a] < 0) lo[a] = 0;
        if (hi[a] > d->in[a]) hi[a] = d->in[a];
    }
}

static int64_t volume_in(const tfc_pool3d_desc *d)
{
    return (int64_t)d->in[0] * d->in[1] * d->in[2] * d->c;
}

static int64_t volume_out(const tfc_pool3d_desc *d)
{
    return (int64_t)d->out[0] * d->out[1] * d->out[2] * d->c;
}

/* Output position p's (o0, o1, o2). */
static void position(const tfc_pool3d_desc *d, int64_t p, int o[3])
{
    o[0] = (int)(p / ((int64_t)d->out[1] * d->out[2]));
    o[1] = (int)(p / d->out[2] % d->out[1]);
    o[2] = (int)(p % d->out[2]);
}

/* One example: y [out, c] from x [in, c]. Max: the window's first cell seeds y and argmax,
 * later cells replace them only when strictly larger (the first maximum wins ties); a window
 * with no cell inside (padding >= window) gives 0 and argmax -1. Average: the sum over the
 * window's cells in order, over their count. */
static void pool_example(const tfc_pool3d_desc *d, const float *x, float *y, int32_t *argmax)
{
    const int c = d->c;
    const int64_t P = (int64_t)d->out[0] * d->out[1] * d->out[2];
    for (int64_t p = 0; p < P; p++) {
        int o[3], lo[3], hi[3];
        position(d, p, o);
        clip3(d, o, lo, hi);
        float *yp = y + p * c;
        int32_t *ap = argmax ? argmax + p * c : NULL;
        int first = 1;
        int64_t count = 0;
        for (int i0 = lo[0]; i0 < hi[0]; i0++)
            for (int i1 = lo[1]; i1 < hi[1]; i1++)
                for (int i2 = lo[2]; i2 < hi[2]; i2++, count++) {
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
        if (first) { /* no cell inside */
            for (int j = 0; j < c; j++) {
                yp[j] = 0.0f;
                if (ap) ap[j] = -1;
            }
        } else if (!d->is_max) {
            for (int j = 0; j < c; j++) yp[j] /= (float)count;
        }
    }
}

void tfc_cpu_pool3d_forward(tfc_backend *be, const tfc_pool3d_desc *d, const float *x, float *y,
                            int32_t *argmax)
{
    const int64_t vin = volume_in(d), vout = volume_out(d);
    const int64_t work = vout * d->k[0] * d->k[1] * d->k[2];
    const int nt = d->n > 1 ? tfc_cpu_threads(be, d->n * work) : 1;
#pragma omp parallel for TFC_CPU_STATIC(d->n, nt)
    for (int64_t b = 0; b < d->n; b++)
        pool_example(d, x + b * vin, y + b * vout, argmax ? argmax + b * vout : NULL);
}

/* One example's dx [in, c] += its windows' share of dy [out, c]: max, dy to the winner;
 * average, dy / count to every cell of the window. */
static void unpool_example(const tfc_pool3d_desc *d, const float *dy, const int32_t *argmax,
                           float *dx)
{
    const int c = d->c;
    const int64_t P = (int64_t)d->out[0] * d->out[1] * d->out[2];
    if (d->is_max) {
        for (int64_t o = 0; o < P * c; o++)
            if (argmax[o] >= 0) dx[argmax[o]] += dy[o];
        return;
    }
    for (int64_t p = 0; p < P; p++) {
        int o[3], lo[3], hi[3];
        position(d, p, o);
        clip3(d, o, lo, hi);
        const int64_t count = (int64_t)(hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
        if (count <= 0) continue;
        const float *g = dy + p * c;
        for (int i0 = lo[0]; i0 < hi[0]; i0++)
            for (int i1 = lo[1]; i1 < hi[1]; i1++)
                for (int i2 = lo[2]; i2 < hi[2]; i2++) {
                    float *to = dx + (((int64_t)i0 * d->in[1] + i1) * d->in[2] + i2) * c;
                    for (int j = 0; j < c; j++) to[j] += g[j] / (float)count;
                }
    }
}

void tfc_cpu_pool3d_backward(tfc_backend *be, const tfc_pool3d_desc *d, const float *dy,
                             const int32_t *argmax, float *dx, int assign)
{
    const int64_t vin = volume_in(d), vout = volume_out(d);
    const int64_t work = vout * d->k[0] * d->k[1] * d->k[2];
    const int nt = d->n > 1 ? tfc_cpu_threads(be, d->n * work) : 1;
#pragma omp parallel for TFC_CPU_STATIC(d->n, nt)
    for (int64_t b = 0; b < d->n; b++) {
        float *g = dx + b * vin;
        if (assign) memset(g, 0, (size_t)vin * sizeof(float));
        unpool_example(d, dy + b * vout, d->is_max ? argmax + b * vout : NULL, g);
    }
}
