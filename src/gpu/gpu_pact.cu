/* GPU kernels of Keras's parametrised activation layers (core/backend.h, tfc_pact_desc, and
 * PReLU), as cpu_pact.c: element-wise, one thread per element, with the CPU's own functions
 * (tfc_pact, tfc_pact_grad; built with --fmad=false, so each product rounds as on the CPU);
 * PReLU's alpha gradient is a column sum in double through the deterministic gpu_colsum
 * (fixed splits added in order), so it does not depend on the run, though its order is not
 * the CPU's. Not in the GPU's op table yet (TFC_BACKEND_LAYER_OPS):
 * tfc_gpu_test_enable_layer_ops puts them in for `make test-gpu`'s case against the CPU;
 * until that has passed on a GPU the layers that need them are refused there. */
#include <math.h>

#include "gpu/gpu_internal.cuh"

#define PACT_LOOP(i, n)                                                              \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);        \
         i += (int64_t)gridDim.x * blockDim.x)

static __global__ void pact_forward_kernel(tfc_pact_desc d, int64_t n, const float *x, float *y)
{
    PACT_LOOP(i, n) y[i] = tfc_pact(&d, x[i]);
}

static __global__ void pact_backward_kernel(tfc_pact_desc d, int64_t n, const float *x,
                                            const float *dy, float *dx)
{
    PACT_LOOP(i, n) dx[i] += tfc_pact_grad(&d, x[i]) * dy[i];
}

void tfc_gpu_pact_forward(tfc_backend *be, const tfc_pact_desc *d, int64_t n, const float *x,
                          float *y)
{
    gpu_ctx *g = gpu_of(be);
    if (n <= 0) return;
    pact_forward_kernel<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>(*d, n, x, y);
    TFC_LAUNCH_CHECK(g, pact_forward_kernel);
}

void tfc_gpu_pact_backward(tfc_backend *be, const tfc_pact_desc *d, int64_t n, const float *x,
                           const float *dy, float *dx)
{
    gpu_ctx *g = gpu_of(be);
    if (n <= 0) return;
    pact_backward_kernel<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>(*d, n, x, dy, dx);
    TFC_LAUNCH_CHECK(g, pact_backward_kernel);
}

static __global__ void prelu_forward_kernel(int64_t rows, int cols, const float *x,
                                            const float *alpha, float *y)
{
    PACT_LOOP(i, rows * cols)
    {
        const float v = x[i];
        y[i] = v > 0.0f ? v : alpha[i % cols] * v;
    }
}

static __global__ void prelu_dx_kernel(int64_t rows, int cols, const float *x,
                                       const float *alpha, const float *dy, float *dx)
{
    PACT_LOOP(i, rows * cols) dx[i] += (x[i] > 0.0f ? 1.0f : alpha[i % cols]) * dy[i];
}

/* min(x, 0) dy at (r, c), rounded to float as the CPU rounds it before its double sum */
struct prelu_alpha_term {
    const float *x, *dy;
    int cols;
    __device__ void operator()(int64_t r, int c, double *v) const
    {
        const float xv = x[r * cols + c];
        v[0] = (double)((xv < 0.0f ? xv : 0.0f) * dy[r * cols + c]);
    }
};

static __global__ void prelu_alpha_finish(int cols, int splits, const double *partial,
                                          float *dalpha)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < cols) dalpha[c] += (float)colsum_total(partial, 0, splits, cols, c);
}

void tfc_gpu_prelu_forward(tfc_backend *be, int64_t rows, int cols, const float *x,
                           const float *alpha, float *y)
{
    gpu_ctx *g = gpu_of(be);
    if (rows <= 0 || cols <= 0) return;
    prelu_forward_kernel<<<gpu_blocks(g, rows * cols), GPU_THREADS, 0, g->stream>>>(rows, cols,
                                                                                    x, alpha, y);
    TFC_LAUNCH_CHECK(g, prelu_forward_kernel);
}

void tfc_gpu_prelu_backward(tfc_backend *be, int64_t rows, int cols, const float *x,
                            const float *alpha, const float *dy, float *dx, float *dalpha)
{
    gpu_ctx *g = gpu_of(be);
    if (rows <= 0 || cols <= 0) return;
    if (dx) {
        prelu_dx_kernel<<<gpu_blocks(g, rows * cols), GPU_THREADS, 0, g->stream>>>(
            rows, cols, x, alpha, dy, dx);
        TFC_LAUNCH_CHECK(g, prelu_dx_kernel);
    }
    const int splits = colsum_splits(rows);
    double *partial = (double *)tfc_gpu_scratch(g, (size_t)splits * cols * sizeof(double));
    if (!partial) return;
    if (gpu_colsum<1>(g, rows, cols, prelu_alpha_term{x, dy, cols}, partial)) return;
    prelu_alpha_finish<<<(cols + 255) / 256, 256, 0, g->stream>>>(cols, splits, partial, dalpha);
    TFC_LAUNCH_CHECK(g, prelu_alpha_finish);
}
