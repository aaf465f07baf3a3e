/* GPU kernels of RandomSharpness (layers/augment_sharpness.c), NHWC, with
 * core/augment_sharp.h's draws and sums (the very functions cpu_sharpness.c calls): a thread
 * per value, the backward gathering, so the bits are the CPU's. Not in the GPU's op table yet
 * (TFC_BACKEND_LAYER_OPS): tfc_gpu_test_enable_layer_ops puts them in for make test-gpu's
 * augment_sharpness case. */
#include <math.h>

#include "core/augment_sharp.h"
#include "gpu/gpu_internal.cuh"

/* Forward (dy NULL): out = clip(blend). Backward: out += the blend's transpose of dy. */
static __global__ void sharpen_kernel(tfc_sharpen_desc d, const uint64_t *step_off,
                                      const float *x, const float *dy, float *out)
{
    if (step_off) d.step += *step_off; /* gpu_step_offset */
    const int64_t per = (int64_t)d.h * d.w * d.c, total = d.n * per;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = k / per, q = k % per;
        const int ch = (int)(q % d.c), px = (int)(q / d.c % d.w), py = (int)(q / d.c / d.w);
        const float c = tfc_sharpen_blend(&d, i);
        if (!dy)
            out[k] = fminf(fmaxf(tfc_sharpen_at(&d, x + i * per, c, py, px, ch), d.vlo), d.vhi);
        else
            out[k] += tfc_sharpen_grad_at(&d, x + i * per, dy + i * per, c, py, px, ch);
    }
}

static void sharpen_launch(tfc_backend *be, const tfc_sharpen_desc *d, const float *x,
                           const float *dy, float *out)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t total = (int64_t)d->n * d->h * d->w * d->c;
    if (total <= 0) return;
    sharpen_kernel<<<gpu_blocks(g, total), GPU_THREADS, 0, g->stream>>>(
        *d, gpu_step_offset(g), x, dy, out);
    TFC_LAUNCH_CHECK(g, sharpen_kernel);
}

void tfc_gpu_sharpen_forward(tfc_backend *be, const tfc_sharpen_desc *d, const float *x,
                             float *y)
{
    sharpen_launch(be, d, x, NULL, y);
}

void tfc_gpu_sharpen_backward(tfc_backend *be, const tfc_sharpen_desc *d, const float *x,
                              const float *dy, float *dx)
{
    sharpen_launch(be, d, x, dy, dx);
}
