/* GPU kernels of the noise layers (core/backend.h, tfc_noise_desc), as cpu_noise.c: one
 * thread per element, its draw (g cols + c) from tfc_noise_affine, the CPU's own function
 * (built with --fmad=false, so m x + b rounds twice as the CPU's loop does).
 * Not in the GPU's op table yet (TFC_BACKEND_LAYER_OPS): tfc_gpu_test_enable_layer_ops puts
 * them in for `make test-gpu`'s noise case against the CPU; until that has passed on a GPU
 * the layers that need them are refused there. */
#include "gpu/gpu_internal.cuh"

static __global__ void noise_kernel(tfc_noise_desc d, const float *in, float *out, int mode)
{
    const int64_t n = d.groups * d.rows * d.cols, plane = d.rows * d.cols;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float b;
        const float m = tfc_noise_affine(&d, (uint64_t)(i / plane * d.cols + i % d.cols), &b);
        if (mode == 0) out[i] = m * in[i] + b;
        else if (mode == 1) out[i] += m * in[i];
        else out[i] = m * in[i];
    }
}

static void noise_launch(tfc_backend *be, const tfc_noise_desc *d, const float *in, float *out,
                         int mode)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t n = d->groups * d->rows * d->cols;
    if (n <= 0) return;
    noise_kernel<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>(*d, in, out, mode);
    TFC_LAUNCH_CHECK(g, noise_kernel);
}

void tfc_gpu_noise_forward(tfc_backend *be, const tfc_noise_desc *d, const float *x, float *y)
{
    noise_launch(be, d, x, y, 0);
}

void tfc_gpu_noise_backward(tfc_backend *be, const tfc_noise_desc *d, const float *dy,
                            float *dx, int assign)
{
    noise_launch(be, d, dy, dx, assign ? 2 : 1);
}
