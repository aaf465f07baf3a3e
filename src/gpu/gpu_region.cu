/* GPU kernels of the region augmentation layers (RandomErasing, RandomGaussianBlur), NHWC,
 * with core/augment_region.h's draws. Not in the GPU's op table yet (TFC_BACKEND_LAYER_OPS):
 * tfc_gpu_test_enable_layer_ops puts them in for make test-gpu's augment_region case. */
#include <math.h>

#include "core/augment_region.h"
#include "gpu/gpu_internal.cuh"

/* A thread per float: forward (dy NULL) out = the fill inside the erased rectangle, x
 * elsewhere; backward out += dy outside it. The image's draws are recomputed per thread
 * (a few Philox blocks, cheaper than a pass to store them). */
static __global__ void erasing_kernel(tfc_erase_desc d, const uint64_t *step_off,
                                      const float *x, const float *dy, float *out)
{
    if (step_off) d.step += *step_off; /* gpu_step_offset */
    const int64_t per = (int64_t)d.h * d.w * d.c, total = d.n * per;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t q = k % per;
        const int ch = (int)(q % d.c), ox = (int)(q / d.c % d.w), oy = (int)(q / d.c / d.w);
        float box[4];
        const int in = tfc_erase_box(&d, k / per, box) && tfc_erase_inside(box, oy, ox);
        if (!dy) out[k] = in ? tfc_erase_fill(&d, k, ch) : x[k];
        else if (!in) out[k] += dy[k];
    }
}

static void erasing_launch(tfc_backend *be, const tfc_erase_desc *d, const float *x,
                           const float *dy, float *out)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t total = (int64_t)d->n * d->h * d->w * d->c;
    if (total <= 0) return;
    erasing_kernel<<<gpu_blocks(g, total), GPU_THREADS, 0, g->stream>>>(
        *d, gpu_step_offset(g), x, dy, out);
    TFC_LAUNCH_CHECK(g, erasing_kernel);
}

void tfc_gpu_erasing_forward(tfc_backend *be, const tfc_erase_desc *d, const float *x, float *y)
{
    erasing_launch(be, d, x, NULL, y);
}

void tfc_gpu_erasing_backward(tfc_backend *be, const tfc_erase_desc *d, const float *dy,
                              float *dx)
{
    erasing_launch(be, d, NULL, dy, dx);
}

/* RandomGaussianBlur: a thread per float. Forward: y = clip(blur or x). Backward: each
 * input value gathers wy wx g from the outputs whose window holds it (g = dy where that
 * output's clip passes, recomputed there), in the window's order. The weights once per
 * thread (at most 2 x 63 exp). */
static __global__ void blur_kernel(tfc_blur_desc d, const uint64_t *step_off, const float *x,
                                   const float *dy, float *out)
{
    if (step_off) d.step += *step_off; /* gpu_step_offset */
    float wx[TFC_BLUR_MAX_KERNEL], wy[TFC_BLUR_MAX_KERNEL];
    tfc_blur_weights(&d, wx, wy);
    const int64_t per = (int64_t)d.h * d.w * d.c, total = d.n * per;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = k / per, q = k % per;
        const int ch = (int)(q % d.c), px = (int)(q / d.c % d.w), py = (int)(q / d.c / d.w);
        const float *xi = x + i * per;
        const int blurred = tfc_blur_applies(&d, i);
        if (!dy) {
            const float z = blurred ? tfc_blur_at(&d, xi, wx, wy, py, px, ch) : xi[q];
            out[k] = fminf(fmaxf(z, d.vlo), d.vhi);
            continue;
        }
        const float *gi = dy + i * per;
        if (!blurred) {
            if (xi[q] >= d.vlo && xi[q] <= d.vhi) out[k] += gi[q];
            continue;
        }
        float acc = out[k]; /* added in the CPU's order: ascending outputs */
        for (int a = d.kh - 1; a >= 0; a--) {
            const int oy = py - a + d.kh / 2;
            if (oy < 0 || oy >= d.h) continue;
            for (int b = d.kw - 1; b >= 0; b--) {
                const int ox = px - b + d.kw / 2;
                if (ox < 0 || ox >= d.w) continue;
                const float z = tfc_blur_at(&d, xi, wx, wy, oy, ox, ch);
                if (z >= d.vlo && z <= d.vhi)
                    acc += wy[a] * wx[b] * gi[((int64_t)oy * d.w + ox) * d.c + ch];
            }
        }
        out[k] = acc;
    }
}

static void blur_launch(tfc_backend *be, const tfc_blur_desc *d, const float *x,
                        const float *dy, float *out)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t total = (int64_t)d->n * d->h * d->w * d->c;
    if (total <= 0) return;
    blur_kernel<<<gpu_blocks(g, total), GPU_THREADS, 0, g->stream>>>(*d, gpu_step_offset(g), x,
                                                                     dy, out);
    TFC_LAUNCH_CHECK(g, blur_kernel);
}

void tfc_gpu_blur_forward(tfc_backend *be, const tfc_blur_desc *d, const float *x, float *y)
{
    blur_launch(be, d, x, NULL, y);
}

void tfc_gpu_blur_backward(tfc_backend *be, const tfc_blur_desc *d, const float *x,
                           const float *dy, float *dx)
{
    blur_launch(be, d, x, dy, dx);
}
