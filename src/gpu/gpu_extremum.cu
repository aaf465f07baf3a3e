/* Maximum's and Minimum's kernels on the GPU (tfc_extremum_desc): a thread per element running
 * tfc_extremum_at, the CPU's own fold (core/backend.h), so both give the same bits. The k
 * input pointers travel by value in a struct. Not in the GPU's op table yet
 * (TFC_BACKEND_LAYER_OPS): tfc_gpu_test_enable_layer_ops puts them in for `make test-gpu`'s
 * case against the CPU; until that has passed on a GPU, Maximum and Minimum are refused there. */
#include "gpu/gpu_internal.cuh"

typedef struct ext_ptrs {
    const float *x[8];
    float *dx[8];
} ext_ptrs;

static __global__ void ext_forward_kernel(tfc_extremum_desc d, ext_ptrs p, const float *mask,
                                          float *y)
{
    const int64_t n = d.rows * d.cols;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int padded = mask && mask[e / d.cols] == 0.f;
        y[e] = tfc_extremum_at(&d, p.x, padded, e, NULL);
    }
}

static __global__ void ext_backward_kernel(tfc_extremum_desc d, ext_ptrs p, const float *mask,
                                           const float *dy)
{
    const int64_t n = d.rows * d.cols;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int padded = mask && mask[e / d.cols] == 0.f;
        float w[8];
        tfc_extremum_at(&d, p.x, padded, e, w);
        for (int i = 0; i < d.k; i++)
            if (p.dx[i]) p.dx[i][e] += w[i] * dy[e];
    }
}

void tfc_gpu_extremum_forward(tfc_backend *be, const tfc_extremum_desc *d,
                              const float *const *x, const float *mask, float *y)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t n = d->rows * d->cols;
    if (n <= 0) return;
    ext_ptrs p = {};
    for (int i = 0; i < d->k; i++) p.x[i] = x[i];
    ext_forward_kernel<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>(*d, p, mask, y);
    TFC_LAUNCH_CHECK(g, ext_forward_kernel);
}

void tfc_gpu_extremum_backward(tfc_backend *be, const tfc_extremum_desc *d,
                               const float *const *x, const float *mask, const float *dy,
                               float *const *dx)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t n = d->rows * d->cols;
    if (n <= 0) return;
    ext_ptrs p = {};
    for (int i = 0; i < d->k; i++) p.x[i] = x[i], p.dx[i] = dx[i];
    ext_backward_kernel<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>(*d, p, mask, dy);
    TFC_LAUNCH_CHECK(g, ext_backward_kernel);
}
