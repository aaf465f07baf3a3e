/* The augmentation layers' transforms on the GPU (RandomFlip, RandomTranslation,
 * RandomRotation, RandomZoom, RandomContrast), NHWC, with the CPU's draws, matrices and taps
 * (core/augment.h, the very functions cpu_augment.c calls). The warp's transpose gathers:
 * each input cell finds the outputs that read it and adds their shares in the CPU's (pixel,
 * tap) order; contrast takes one block per (image, channel). No atomics: bits as the CPU's. */
#include <math.h>

#include "core/augment.h"
#include "gpu/gpu_internal.cuh"

#define GRID_LOOP(i, n)                                                              \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);        \
         i += (int64_t)gridDim.x * blockDim.x)

/* ---- warp ------------------------------------------------------------------------------ */

/* m[8 i .. 8 i + 8) = image i's matrix (tfc_warp_matrix) */
static __global__ void warp_matrix_kernel(tfc_warp_desc d, const uint64_t *step_off, float *m)
{
    if (step_off) d.step += *step_off; /* gpu_step_offset */
    GRID_LOOP(i, d.n) tfc_warp_matrix(&d, i, m + 8 * i);
}

/* y[i, oy, ox, ch] = sum_k wt[k] x[i, off[k], ch] (fill_value where off[k] < 0), in tap
 * order from 0, as the CPU: one thread per output element */
static __global__ void warp_forward_kernel(tfc_warp_desc d, const float *mats, const float *x,
                                           float *y)
{
    const int64_t total = (int64_t)d.n * d.h * d.w * d.c;
    GRID_LOOP(i, total)
    {
        const int ch = (int)(i % d.c);
        int64_t t = i / d.c;
        const int ox = (int)(t % d.w);
        t /= d.w;
        const int oy = (int)(t % d.h);
        const int64_t img = t / d.h;
        const tfc_warp_taps tp = tfc_warp_taps_at(&d, mats + 8 * img, oy, ox);
        const float *xi = x + img * d.h * d.w * d.c + ch;
        float acc = 0.0f;
#pragma unroll /* constant indices: the taps stay in registers */
        for (int j = 0; j < 4; j++)
            if (j < tp.n) acc += tp.wt[j] * (tp.off[j] < 0 ? d.fill_value : xi[tp.off[j] * d.c]);
        y[i] = acc;
    }
}

/* Runs of one axis's tap coordinates v in [vmin, vmax] that tfc_warp_place puts on cell i
 * (of n): lo[k] .. hi[k], k < count. More than WARP_RUNS runs: the whole [vmin, vmax]
 * (a superset, only slower). */
#define WARP_RUNS 8

struct runs {
    int count;
    int64_t lo[WARP_RUNS], hi[WARP_RUNS];
};

static __device__ void runs_add(runs *r, int64_t lo, int64_t hi, int64_t vmin, int64_t vmax)
{
    lo = lo < vmin ? vmin : lo;
    hi = hi > vmax ? vmax : hi;
    if (lo > hi || r->count < 0) return;
    if (r->count == WARP_RUNS) {
        r->count = -1;
        return;
    }
    r->lo[r->count] = lo, r->hi[r->count] = hi, r->count++;
}

/* The first k with base + k p >= vmin (p > 0). */
static __device__ int64_t first_at_least(int64_t base, int64_t p, int64_t vmin)
{
    const int64_t q = vmin - base;
    return q <= 0 ? -((-q) / p) : (q + p - 1) / p;
}

/* reflect: v = i + 2 k n or -1 - i + 2 k n; wrap: v = i + k n; nearest: i, and every v
 * before (i = 0) or after (i = n - 1) the image; constant: i alone */
static __device__ runs placed_on(int64_t i, int64_t n, tfc_fill_mode fill, int64_t vmin,
                                 int64_t vmax)
{
    runs r;
    r.count = 0;
    if (fill == TFC_FILL_NEAREST) {
        runs_add(&r, i == 0 ? vmin : i, i == n - 1 ? vmax : i, vmin, vmax);
    } else if (fill == TFC_FILL_REFLECT || fill == TFC_FILL_WRAP) {
        const int64_t p = fill == TFC_FILL_WRAP ? n : 2 * n;
        const int64_t bases[2] = {i, -1 - i};
        for (int b = 0; b < (fill == TFC_FILL_WRAP ? 1 : 2); b++)
            for (int64_t v = bases[b] + first_at_least(bases[b], p, vmin) * p; v <= vmax; v += p)
                runs_add(&r, v, v, vmin, vmax);
    } else {
        runs_add(&r, i, i, vmin, vmax);
    }
    if (r.count < 0) r.count = 1, r.lo[0] = vmin, r.hi[0] = vmax;
    return r;
}

/* v clamped to [0, n] */
static __device__ int clamp_to(double v, int n)
{
    return v <= 0 ? 0 : v >= n ? n : (int)v;
}

/* Rows [*y0, *y1] and columns [*x0, *x1] of the outputs that may read input cell (iy, ix):
 * every output pixel has its taps within one of the coordinates placed on the cell, and
 * its source point within 1 of that tap; the box bounds the preimages (m inverted, in
 * double) of those squares, widened by a pixel against rounding, clipped to the image (a
 * perspective's matrix: the whole image).
 * Empty (y0 > y1) when nothing reads the cell. */
static __device__ void readers_box(const tfc_warp_desc &d, const float *m, int iy, int ix,
                                   int *y0, int *y1, int *x0, int *x1)
{
    /* the tap coordinates any output reaches, from the corners' source points */
    double symin = INFINITY, symax = -INFINITY, sxmin = INFINITY, sxmax = -INFINITY;
    for (int k = 0; k < 4; k++) {
        const float oy = (float)(k / 2 ? d.h - 1 : 0), ox = (float)(k % 2 ? d.w - 1 : 0);
        const double sx = oy * m[1] + ox * m[0] + m[2], sy = oy * m[4] + ox * m[3] + m[5];
        symin = fmin(symin, sy), symax = fmax(symax, sy);
        sxmin = fmin(sxmin, sx), sxmax = fmax(sxmax, sx);
    }
    const runs ry = placed_on(iy, d.h, d.fill, (int64_t)floor(symin) - 1,
                              (int64_t)ceil(symax) + 1);
    const runs rx = placed_on(ix, d.w, d.fill, (int64_t)floor(sxmin) - 1,
                              (int64_t)ceil(sxmax) + 1);
    *y0 = *x0 = 0, *y1 = d.h - 1, *x1 = d.w - 1;
    if (m[6] != 0 || m[7] != 0) return; /* a perspective: every output (only slower) */
    if (ry.count == 0 || rx.count == 0) {
        *y0 = 1, *y1 = 0;
        return;
    }
    const double det = (double)m[0] * m[4] - (double)m[1] * m[3];
    if (fabs(det) < 1e-12) return; /* not a transform the layers make: every output */
    double oymin = INFINITY, oymax = -INFINITY, oxmin = INFINITY, oxmax = -INFINITY;
    for (int a = 0; a < ry.count; a++)
        for (int b = 0; b < rx.count; b++)
            for (int k = 0; k < 4; k++) {
                const double sy = (double)(k / 2 ? ry.hi[a] + 1 : ry.lo[a] - 1) - m[5];
                const double sx = (double)(k % 2 ? rx.hi[b] + 1 : rx.lo[b] - 1) - m[2];
                const double ox = (m[4] * sx - m[1] * sy) / det;
                const double oy = (m[0] * sy - m[3] * sx) / det;
                oymin = fmin(oymin, oy), oymax = fmax(oymax, oy);
                oxmin = fmin(oxmin, ox), oxmax = fmax(oxmax, ox);
            }
    *y0 = clamp_to(floor(oymin) - 1, d.h), *y1 = clamp_to(ceil(oymax) + 2, d.h) - 1;
    *x0 = clamp_to(floor(oxmin) - 1, d.w), *x1 = clamp_to(ceil(oxmax) + 2, d.w) - 1;
}

/* dx[i, q, :] += wt dy[i, p, :] over the outputs p and taps of them that read q, in
 * ascending (p, tap) order as the CPU's scatter: one thread per input pixel, scanning the
 * box of possible readers row by row, each reader's channels in turn (so each channel's
 * sum has the CPU's order and the box is found once for all channels) */
static __global__ void warp_backward_kernel(tfc_warp_desc d, const float *mats,
                                            const float *dy, float *dx)
{
    const int64_t total = (int64_t)d.n * d.h * d.w;
    GRID_LOOP(i, total)
    {
        const int ix = (int)(i % d.w);
        const int64_t t = i / d.w;
        const int iy = (int)(t % d.h);
        const int64_t img = t / d.h;
        const float *m = mats + 8 * img;
        const int64_t self = (int64_t)iy * d.w + ix;
        const float *g = dy + img * d.h * d.w * d.c;
        float *o = dx + i * d.c;
        int y0, y1, x0, x1;
        readers_box(d, m, iy, ix, &y0, &y1, &x0, &x1);
        for (int oy = y0; oy <= y1; oy++)
            for (int ox = x0; ox <= x1; ox++) {
                const tfc_warp_taps tp = tfc_warp_taps_at(&d, m, oy, ox);
                const float *src = g + ((int64_t)oy * d.w + ox) * d.c;
#pragma unroll
                for (int j = 0; j < 4; j++)
                    if (j < tp.n && tp.off[j] == self)
                        for (int ch = 0; ch < d.c; ch++) o[ch] += tp.wt[j] * src[ch];
            }
    }
}

/* The images' matrices in the ctx's scratch; NULL with the error recorded. */
static float *warp_matrices(gpu_ctx *g, const tfc_warp_desc *d)
{
    float *m = (float *)tfc_gpu_scratch(g, (size_t)d->n * 8 * sizeof(float));
    if (!m) return NULL;
    warp_matrix_kernel<<<gpu_blocks(g, d->n), GPU_THREADS, 0, g->stream>>>(
        *d, gpu_step_offset(g), m);
    TFC_LAUNCH_CHECK(g, warp_matrix_kernel, NULL);
    return m;
}

void tfc_gpu_warp_forward(tfc_backend *be, const tfc_warp_desc *d, const float *x, float *y)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t total = (int64_t)d->n * d->h * d->w * d->c;
    if (total <= 0) return;
    const float *m = warp_matrices(g, d);
    if (!m) return;
    warp_forward_kernel<<<gpu_blocks(g, total), GPU_THREADS, 0, g->stream>>>(*d, m, x, y);
    TFC_LAUNCH_CHECK(g, warp_forward_kernel);
}

void tfc_gpu_warp_backward(tfc_backend *be, const tfc_warp_desc *d, const float *dy, float *dx)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t total = (int64_t)d->n * d->h * d->w * d->c;
    if (total <= 0) return;
    const float *m = warp_matrices(g, d);
    if (!m) return;
    const int64_t pixels = total / d->c;
    warp_backward_kernel<<<gpu_blocks(g, pixels), GPU_THREADS, 0, g->stream>>>(*d, m, dy, dx);
    TFC_LAUNCH_CHECK(g, warp_backward_kernel);
}

/* ---- contrast -------------------------------------------------------------------------- */

/* Sum over the block (GPU_THREADS threads) in a fixed tree order; every thread gets it. */
static __device__ double contrast_block_sum(double v, double *sh)
{
    v = warp_sum(v);
    const int lane = threadIdx.x % 32, wid = threadIdx.x / 32;
    __syncthreads(); /* sh free from a previous call */
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    double s = 0.0;
    for (int k = 0; k < GPU_THREADS / 32; k++) s += sh[k];
    return s;
}

/* Block q = (image, channel): its factor f and mean m (in double, rounded once as the
 * CPU's); x's cells of the pair are base + p c, p < hw. */
static __device__ float channel_mean(const tfc_contrast_desc &d, const float *x, int64_t base,
                                     double *sh)
{
    double s = 0.0;
    for (int64_t p = threadIdx.x; p < d.hw; p += blockDim.x) s += x[base + p * d.c];
    return (float)(contrast_block_sum(s, sh) / (double)d.hw);
}

/* y = clip((x - m) f + m, vlo, vhi): one block per (image, channel) */
static __global__ void contrast_forward_kernel(tfc_contrast_desc d, const uint64_t *step_off,
                                               const float *x, float *y)
{
    if (step_off) d.step += *step_off; /* gpu_step_offset */
    __shared__ double sh[GPU_THREADS / 32];
    const int64_t q = blockIdx.x, img = q / d.c, base = img * d.hw * d.c + q % d.c;
    const float f = tfc_contrast_factor(&d, img), m = channel_mean(d, x, base, sh);
    for (int64_t p = threadIdx.x; p < d.hw; p += blockDim.x) {
        const float z = (x[base + p * d.c] - m) * f + m;
        y[base + p * d.c] = fminf(fmaxf(z, d.vlo), d.vhi);
    }
}

/* With g = dy where vlo <= z <= vhi (else 0): dx += f g + (1 - f) mean(g) */
static __global__ void contrast_backward_kernel(tfc_contrast_desc d, const uint64_t *step_off,
                                                const float *x, const float *dy, float *dx)
{
    if (step_off) d.step += *step_off; /* gpu_step_offset */
    __shared__ double sh[GPU_THREADS / 32];
    const int64_t q = blockIdx.x, img = q / d.c, base = img * d.hw * d.c + q % d.c;
    const float f = tfc_contrast_factor(&d, img), m = channel_mean(d, x, base, sh);
    double gs = 0.0;
    for (int64_t p = threadIdx.x; p < d.hw; p += blockDim.x) {
        const float z = (x[base + p * d.c] - m) * f + m;
        if (z >= d.vlo && z <= d.vhi) gs += dy[base + p * d.c];
    }
    gs = contrast_block_sum(gs, sh);
    const float shared = (float)((1.0 - f) * gs / (double)d.hw);
    for (int64_t p = threadIdx.x; p < d.hw; p += blockDim.x) {
        const float z = (x[base + p * d.c] - m) * f + m;
        const float g = z >= d.vlo && z <= d.vhi ? dy[base + p * d.c] : 0.0f;
        dx[base + p * d.c] += f * g + shared;
    }
}

void tfc_gpu_contrast_forward(tfc_backend *be, const tfc_contrast_desc *d, const float *x,
                              float *y)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t pairs = (int64_t)d->n * d->c;
    if (pairs <= 0 || d->hw <= 0) return;
    contrast_forward_kernel<<<(unsigned)pairs, GPU_THREADS, 0, g->stream>>>(
        *d, gpu_step_offset(g), x, y);
    TFC_LAUNCH_CHECK(g, contrast_forward_kernel);
}

void tfc_gpu_contrast_backward(tfc_backend *be, const tfc_contrast_desc *d, const float *x,
                               const float *dy, float *dx)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t pairs = (int64_t)d->n * d->c;
    if (pairs <= 0 || d->hw <= 0) return;
    contrast_backward_kernel<<<(unsigned)pairs, GPU_THREADS, 0, g->stream>>>(
        *d, gpu_step_offset(g), x, dy, dx);
    TFC_LAUNCH_CHECK(g, contrast_backward_kernel);
}

/* RandomBrightness (not in the GPU's op table yet: TFC_BACKEND_LAYER_OPS; make test-gpu's
 * augment_brightness case puts it in): y = clip(x + b, vlo, vhi), a thread per float; the
 * backward adds dy where the clip passes. */
static __global__ void brightness_kernel(tfc_contrast_desc d, const uint64_t *step_off,
                                         const float *x, const float *dy, float *out)
{
    if (step_off) d.step += *step_off; /* gpu_step_offset */
    const int64_t per = (int64_t)d.hw * d.c, total = d.n * per;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        const float z = x[k] + tfc_brightness_delta(&d, k / per);
        if (!dy) out[k] = fminf(fmaxf(z, d.vlo), d.vhi);
        else if (z >= d.vlo && z <= d.vhi) out[k] += dy[k];
    }
}

static void brightness_launch(tfc_backend *be, const tfc_contrast_desc *d, const float *x,
                              const float *dy, float *out)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t total = (int64_t)d->n * d->hw * d->c;
    if (total <= 0) return;
    brightness_kernel<<<gpu_blocks(g, total), GPU_THREADS, 0, g->stream>>>(
        *d, gpu_step_offset(g), x, dy, out);
    TFC_LAUNCH_CHECK(g, brightness_kernel);
}

void tfc_gpu_brightness_forward(tfc_backend *be, const tfc_contrast_desc *d, const float *x,
                                float *y)
{
    brightness_launch(be, d, x, NULL, y);
}

void tfc_gpu_brightness_backward(tfc_backend *be, const tfc_contrast_desc *d, const float *x,
                                 const float *dy, float *dx)
{
    brightness_launch(be, d, x, dy, dx);
}
