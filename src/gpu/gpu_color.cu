/* The colour augmentations on the GPU (RandomGrayscale, RandomInvert, Solarization,
 * RandomPosterization, RandomColorDegeneration, RandomSaturation, RandomHue), NHWC, with the
 * CPU's draws and per-pixel maps (core/color.h, the very functions cpu_color.c calls): a
 * thread per pixel. Not in the GPU's op table yet (TFC_BACKEND_LAYER_OPS; test_gpu_ops's
 * augment_color case puts them in). */
#include <math.h>

#include "core/color.h"
#include "gpu/gpu_internal.cuh"

/* dy NULL: out = the forward's y; else out (dx) += the gradient times dy */
static __global__ void color_kernel(tfc_color_desc d, const uint64_t *step_off, const float *x,
                                    const float *dy, float *out)
{
    if (step_off) d.step += *step_off; /* gpu_step_offset */
    const int64_t pixels = (int64_t)d.n * d.hw;
    for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < pixels;
         p += (int64_t)gridDim.x * blockDim.x) {
        const tfc_color_draw r = tfc_color_draw_at(&d, p / d.hw);
        const int64_t at = p * d.c;
        if (!dy) tfc_color_pixel(&d, r, x + at, out + at);
        else tfc_color_pixel_grad(&d, r, x + at, dy + at, out + at);
    }
}

static void color_launch(tfc_backend *be, const tfc_color_desc *d, const float *x,
                         const float *dy, float *out)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t pixels = (int64_t)d->n * d->hw;
    if (pixels <= 0 || d->c <= 0) return;
    color_kernel<<<gpu_blocks(g, pixels), GPU_THREADS, 0, g->stream>>>(*d, gpu_step_offset(g),
                                                                       x, dy, out);
    TFC_LAUNCH_CHECK(g, color_kernel);
}

void tfc_gpu_color_forward(tfc_backend *be, const tfc_color_desc *d, const float *x, float *y)
{
    color_launch(be, d, x, NULL, y);
}

void tfc_gpu_color_backward(tfc_backend *be, const tfc_color_desc *d, const float *x,
                            const float *dy, float *dx)
{
    if (d->kind == TFC_COLOR_POSTERIZE) return;
    color_launch(be, d, x, dy, dx);
}
