/* RandomElasticTransform on the GPU (tfc_elastic_desc), NHWC, with the CPU's draws, field and
 * taps (core/elastic.h, the very functions cpu_elastic.c calls): the forward one thread per
 * pixel, its field value summed in place (k x k normals: slow for large kernels); the
 * transpose one thread per (image, channel), walking the pixels in the CPU's order, so its
 * bits are the CPU's without atomics (and slow: a first kernel). The distortion factor (alpha,
 * sigma, k) is drawn on the host by the layer, so a captured graph keeps its capture's; the
 * per-image draws follow the replay's step. Not in the GPU's op table yet
 * (TFC_BACKEND_LAYER_OPS; held out, docs/gpu.md). */
#include <math.h>

#include "core/elastic.h"
#include "gpu/gpu_internal.cuh"

#define GRID_LOOP(i, n)                                                              \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);        \
         i += (int64_t)gridDim.x * blockDim.x)

static __global__ void elastic_forward_kernel(tfc_elastic_desc d, const uint64_t *step_off,
                                              const float *x, float *y)
{
    if (step_off) d.step += *step_off; /* gpu_step_offset */
    const int64_t hw = (int64_t)d.h * d.w, c = d.c;
    const float norm = tfc_elastic_tap_sum(&d);
    GRID_LOOP(q, d.n * hw)
    {
        const int64_t i = q / hw, p = q % hw;
        const float *xi = x + i * hw * c;
        float *o = y + q * c;
        if (!tfc_elastic_moved(&d, i)) {
            for (int64_t k = 0; k < c; k++) o[k] = tfc_elastic_clip(&d, xi[p * c + k]);
            continue;
        }
        const int oy = (int)(p / d.w), ox = (int)(p % d.w);
        const tfc_warp_taps t = tfc_elastic_taps(&d, tfc_elastic_field_at(&d, i, oy, ox, norm),
                                                 oy, ox);
        for (int64_t k = 0; k < c; k++) {
            float v = 0.0f;
            for (int j = 0; j < t.n; j++)
                v += t.wt[j] * (t.off[j] < 0 ? d.fill_value : xi[t.off[j] * c + k]);
            o[k] = tfc_elastic_clip(&d, v);
        }
    }
}

static __global__ void elastic_backward_kernel(tfc_elastic_desc d, const uint64_t *step_off,
                                               const float *x, const float *dy, float *dx)
{
    if (step_off) d.step += *step_off; /* gpu_step_offset */
    const int64_t hw = (int64_t)d.h * d.w, c = d.c;
    const float norm = tfc_elastic_tap_sum(&d);
    GRID_LOOP(q, (int64_t)d.n * c)
    {
        const int64_t i = q / c, k = q % c;
        const float *xi = x + i * hw * c + k, *gi = dy + i * hw * c + k;
        float *di = dx + i * hw * c + k;
        const int moved = tfc_elastic_moved(&d, i);
        for (int64_t p = 0; p < hw; p++) {
            if (!moved) {
                if (tfc_elastic_passes(&d, xi[p * c])) di[p * c] += gi[p * c];
                continue;
            }
            const int oy = (int)(p / d.w), ox = (int)(p % d.w);
            const tfc_warp_taps t = tfc_elastic_taps(
                &d, tfc_elastic_field_at(&d, i, oy, ox, norm), oy, ox);
            float v = 0.0f;
            for (int j = 0; j < t.n; j++)
                v += t.wt[j] * (t.off[j] < 0 ? d.fill_value : xi[t.off[j] * c]);
            if (!tfc_elastic_passes(&d, v)) continue;
            for (int j = 0; j < t.n; j++)
                if (t.off[j] >= 0) di[t.off[j] * c] += t.wt[j] * gi[p * c];
        }
    }
}

void tfc_gpu_elastic_forward(tfc_backend *be, const tfc_elastic_desc *d, const float *x,
                             float *y)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t pixels = (int64_t)d->n * d->h * d->w;
    if (pixels <= 0) return;
    elastic_forward_kernel<<<gpu_blocks(g, pixels), GPU_THREADS, 0, g->stream>>>(
        *d, gpu_step_offset(g), x, y);
    TFC_LAUNCH_CHECK(g, elastic_forward_kernel);
}

void tfc_gpu_elastic_backward(tfc_backend *be, const tfc_elastic_desc *d, const float *x,
                              const float *dy, float *dx)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t planes = (int64_t)d->n * d->c;
    if (planes <= 0) return;
    elastic_backward_kernel<<<gpu_blocks(g, planes), GPU_THREADS, 0, g->stream>>>(
        *d, gpu_step_offset(g), x, dy, dx);
    TFC_LAUNCH_CHECK(g, elastic_backward_kernel);
}
