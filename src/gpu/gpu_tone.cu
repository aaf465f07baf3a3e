/* AutoContrast, Equalization and CLAHE on the GPU (tfc_tone_desc), NHWC, with the CPU's
 * per-value maps (core/tone.h, the very functions cpu_tone.c calls): AutoContrast a block per
 * (image, channel), its extremes and gradient sums reduced in shared memory; Equalization a
 * block per channel over the batch, its histogram and lookup table in shared memory (bins at
 * most TFC_TONE_MAX_BINS, 32 KiB); CLAHE a thread per (image, channel). Not in the GPU's op table yet (TFC_BACKEND_LAYER_OPS;
 * test_gpu_ops's augment_tone case puts them in). */
#include <math.h>

#include "core/tone.h"
#include "gpu/gpu_internal.cuh"

/* the block's reduction of v[threadIdx.x] (op 0 sum, 1 min, 2 max; NaN propagates through
 * min and max), left in v[0] */
static __device__ void block_reduce(double *v, int op)
{
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        __syncthreads();
        if (threadIdx.x < s) {
            const double a = v[threadIdx.x], b = v[threadIdx.x + s];
            v[threadIdx.x] = op == 0 ? a + b
                             : a != a || b != b ? NAN
                             : op == 1 ? (a < b ? a : b)
                                       : (a > b ? a : b);
        }
    }
    __syncthreads();
}

/* dy NULL: out = y; else out (dx) += the gradient times dy (as cpu_tone.c's
 * autocontrast_grad) */
static __global__ void autocontrast_kernel(tfc_tone_desc d, const float *x, const float *dy,
                                           float *out)
{
    __shared__ double red[GPU_THREADS];
    const int64_t c = d.c, hwc = (int64_t)d.hw * c, q = blockIdx.x;
    const int64_t base = (q / c) * hwc + q % c;
    x += base, out += base;
    double l = INFINITY, h = -INFINITY;
    for (int64_t p = threadIdx.x; p < d.hw; p += blockDim.x) {
        const float z = tfc_tone_range(&d, x[p * c], 0);
        l = z != z || l != l ? NAN : z < l ? z : l;
        h = z != z || h != h ? NAN : z > h ? z : h;
    }
    red[threadIdx.x] = l;
    block_reduce(red, 1);
    const float lo = (float)red[0];
    __syncthreads();
    red[threadIdx.x] = h;
    block_reduce(red, 2);
    const float hi = (float)red[0];
    __syncthreads();
    if (!dy) {
        for (int64_t p = threadIdx.x; p < d.hw; p += blockDim.x)
            out[p * c] = tfc_autocontrast_value(&d, x[p * c], lo, hi);
        return;
    }
    dy += base;
    if (!(hi > lo)) {
        for (int64_t p = threadIdx.x; p < d.hw; p += blockDim.x) out[p * c] += dy[p * c];
        return;
    }
    const float a = tfc_tone_range(&d, 1.0f, 0) - tfc_tone_range(&d, 0.0f, 0);
    const float b = tfc_tone_range(&d, 1.0f, 1) - tfc_tone_range(&d, 0.0f, 1);
    const float s = 255.0f / (hi - lo);
    double sums[4] = {0, 0, 0, 0}; /* A, B, ties at lo, at hi */
    for (int64_t p = threadIdx.x; p < d.hw; p += blockDim.x) {
        const float z = tfc_tone_range(&d, x[p * c], 0), t = (z - lo) / (hi - lo);
        const double g = (double)dy[p * c] * b;
        sums[0] += g * (t - 1.0f), sums[1] += g * t;
        sums[2] += z == lo, sums[3] += z == hi;
    }
    for (int k = 0; k < 4; k++) {
        red[threadIdx.x] = sums[k];
        block_reduce(red, 0);
        sums[k] = red[0];
        __syncthreads();
    }
    for (int64_t p = threadIdx.x; p < d.hw; p += blockDim.x) {
        const float z = tfc_tone_range(&d, x[p * c], 0);
        double g = (double)dy[p * c] * b;
        if (z == lo) g += sums[0] / sums[2];
        if (z == hi) g -= sums[1] / sums[3];
        out[p * c] += (float)(g * s * a);
    }
}

/* channel blockIdx.x over the batch; dy NULL: out = y, else out (dx) += the gradient */
static __global__ void equalize_kernel(tfc_tone_desc d, const float *x, const float *dy,
                                       float *out)
{
    __shared__ int hist[TFC_TONE_MAX_BINS];
    __shared__ float lut[TFC_TONE_MAX_BINS];
    __shared__ int kept;
    const int ch = blockIdx.x;
    const float s1 = tfc_equalize_scale(&d, 1), o1 = tfc_equalize_offset(&d, 1);
    const float s2 = tfc_equalize_scale(&d, 0), o2 = tfc_equalize_offset(&d, 0);
    const int64_t count = (int64_t)d.n * d.hw;
    for (int k = threadIdx.x; k < d.bins; k += blockDim.x) hist[k] = 0;
    __syncthreads();
    for (int64_t p = threadIdx.x; p < count; p += blockDim.x)
        atomicAdd(&hist[tfc_equalize_bin(d.bins, x[p * d.c + ch] * s1 + o1, 0)], 1);
    __syncthreads();
    if (threadIdx.x == 0) kept = tfc_equalize_lut(d.bins, hist, lut) <= 1;
    __syncthreads();
    for (int64_t p = threadIdx.x; p < count; p += blockDim.x) {
        const int64_t at = p * d.c + ch;
        const float z = x[at] * s1 + o1;
        if (dy) {
            if (kept) out[at] += dy[at] * s2 * s1;
        } else {
            out[at] = (kept ? z : lut[tfc_equalize_bin(d.bins, z, 1)]) * s2 + o2;
        }
    }
}

/* CLAHE: one thread per (image, channel) plane running the CPU's tfc_clahe_plane, its tiles'
 * tables in the scratch (a first kernel: a block per tile would spread the work) */
static __global__ void clahe_kernel(tfc_tone_desc d, const float *x, float *y, float *tables)
{
    const int64_t planes = (int64_t)d.n * d.c, hwc = (int64_t)d.hw * d.c;
    for (int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; q < planes;
         q += (int64_t)gridDim.x * blockDim.x) {
        const int64_t base = (q / d.c) * hwc + q % d.c;
        tfc_clahe_plane(&d, x + base, y + base,
                        tables + q * (int64_t)d.grid_h * d.grid_w * 256);
    }
}

static void tone_launch(tfc_backend *be, const tfc_tone_desc *d, const float *x,
                        const float *dy, float *out)
{
    gpu_ctx *g = gpu_of(be);
    if ((int64_t)d->n * d->hw <= 0 || d->c <= 0) return;
    if (d->kind == TFC_TONE_CLAHE) {
        if (dy) return; /* the int32 bins carry no gradient */
        const int64_t planes = (int64_t)d->n * d->c;
        float *tables = (float *)tfc_gpu_scratch(
            g, (size_t)planes * d->grid_h * d->grid_w * 256 * sizeof(float));
        if (!tables) return;
        clahe_kernel<<<gpu_blocks(g, planes), GPU_THREADS, 0, g->stream>>>(*d, x, out, tables);
        TFC_LAUNCH_CHECK(g, clahe_kernel);
        return;
    }
    if (d->kind == TFC_TONE_EQUALIZE) {
        equalize_kernel<<<d->c, GPU_THREADS, 0, g->stream>>>(*d, x, dy, out);
        TFC_LAUNCH_CHECK(g, equalize_kernel);
    } else {
        autocontrast_kernel<<<(unsigned)((int64_t)d->n * d->c), GPU_THREADS, 0, g->stream>>>(
            *d, x, dy, out);
        TFC_LAUNCH_CHECK(g, autocontrast_kernel);
    }
}

void tfc_gpu_tone_forward(tfc_backend *be, const tfc_tone_desc *d, const float *x, float *y)
{
    tone_launch(be, d, x, NULL, y);
}

void tfc_gpu_tone_backward(tfc_backend *be, const tfc_tone_desc *d, const float *x,
                           const float *dy, float *dx)
{
    tone_launch(be, d, x, dy, dx);
}
