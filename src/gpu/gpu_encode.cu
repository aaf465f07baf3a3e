/* The preprocessing layers' encoding on the GPU (tfc_encode_desc in core/backend.h, the
 * per-row math in core/encode.h, shared with cpu_encode.c): a thread per row. Held out
 * (docs/gpu.md): CategoryEncoding, Discretization, IntegerLookup, Hashing and HashedCrossing
 * are CPU-first until make test-gpu has run them. */
#include "core/encode.h"
#include "gpu/gpu_internal.cuh"

static __global__ void encode_kernel(tfc_encode_desc d, const void *x, const float *table,
                                     const float *scale, float *y)
{
    const int64_t per = tfc_encode_row(&d);
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < d.rows;
         r += (int64_t)gridDim.x * blockDim.x)
        tfc_encode_one(&d, r, x, table, scale, y + r * per);
}

void tfc_gpu_encode_forward(tfc_backend *be, const tfc_encode_desc *d, const void *x,
                            const float *table, const float *scale, float *y)
{
    gpu_ctx *g = gpu_of(be);
    if (d->rows <= 0) return;
    encode_kernel<<<gpu_blocks(g, d->rows), GPU_THREADS, 0, g->stream>>>(*d, x, table, scale,
                                                                          y);
    TFC_LAUNCH_CHECK(g, encode_kernel);
}

/* HashedCrossing's inputs, by value: at most TFC_ENCODE_MAX_CROSS of them. */
typedef struct cross_inputs {
    const int32_t *x[TFC_ENCODE_MAX_CROSS];
} cross_inputs;

static __global__ void cross_kernel(tfc_encode_desc d, int k, cross_inputs in, float *y)
{
    const int64_t per = tfc_encode_row(&d);
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < d.rows;
         r += (int64_t)gridDim.x * blockDim.x)
        tfc_encode_cross_one(&d, r, k, in.x, y + r * per);
}

void tfc_gpu_hash_cross_forward(tfc_backend *be, const tfc_encode_desc *d, int k,
                                const int32_t *const *x, float *y)
{
    gpu_ctx *g = gpu_of(be);
    if (d->rows <= 0) return;
    cross_inputs in = {};
    for (int i = 0; i < k && i < TFC_ENCODE_MAX_CROSS; i++) in.x[i] = x[i];
    cross_kernel<<<gpu_blocks(g, d->rows), GPU_THREADS, 0, g->stream>>>(*d, k, in, y);
    TFC_LAUNCH_CHECK(g, cross_kernel);
}
