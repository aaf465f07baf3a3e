/* Embedding lookups on the GPU: gather rows of a table by id (ids range-checked by the
 * caller), and the gradient's scatter-add. Repeated ids make the scatter a reduction:
 * by default atomicAdd (fast; float sums in arrival order, so the last bits vary run to
 * run), in deterministic mode one thread per column walks the ids in order, which is the
 * CPU's order and its bits. */
#include "gpu/gpu_internal.cuh"

#define GRID_LOOP(i, n)                                                              \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);        \
         i += (int64_t)gridDim.x * blockDim.x)

/* y[i, j] = table[ids[i], j] */
static __global__ void gather_kernel(int64_t n, int dim, const int32_t *ids, const float *table,
                              float *y)
{
    GRID_LOOP(e, n * dim)
    {
        int64_t i = e / dim;
        int j = (int)(e % dim);
        y[e] = table[(int64_t)ids[i] * dim + j];
    }
}

/* dtable[ids[i], j] += dy[i, j], atomically */
static __global__ void scatter_atomic_kernel(int64_t n, int dim, const int32_t *ids, const float *dy,
                                      float *dtable)
{
    GRID_LOOP(e, n * dim)
    {
        int64_t i = e / dim;
        int j = (int)(e % dim);
        atomicAdd(&dtable[(int64_t)ids[i] * dim + j], dy[e]);
    }
}

/* Column j: for i in order, dtable[ids[i], j] += dy[i, j]. */
static __global__ void scatter_ordered_kernel(int64_t n, int dim, const int32_t *ids, const float *dy,
                                       float *dtable)
{
    GRID_LOOP(j, (int64_t)dim)
    for (int64_t i = 0; i < n; i++) dtable[(int64_t)ids[i] * dim + j] += dy[i * dim + j];
}

void tfc_gpu_gather(tfc_backend *be, int64_t n, int dim, const int32_t *ids, const float *table,
                    float *y)
{
    gpu_ctx *g = gpu_of(be);
    if (n <= 0 || dim <= 0) return;
    gather_kernel<<<gpu_blocks(g, n * dim), GPU_THREADS, 0, g->stream>>>(n, dim, ids, table, y);
    TFC_LAUNCH_CHECK(g, gather_kernel);
}

void tfc_gpu_scatter_add(tfc_backend *be, int64_t n, int dim, const int32_t *ids,
                         const float *dy, float *dtable)
{
    gpu_ctx *g = gpu_of(be);
    if (n <= 0 || dim <= 0) return;
    if (g->deterministic) {
        scatter_ordered_kernel<<<(dim + 63) / 64, 64, 0, g->stream>>>(n, dim, ids, dy, dtable);
        TFC_LAUNCH_CHECK(g, scatter_ordered_kernel);
        return;
    }
    scatter_atomic_kernel<<<gpu_blocks(g, n * dim), GPU_THREADS, 0, g->stream>>>(n, dim, ids, dy,
                                                                                 dtable);
    TFC_LAUNCH_CHECK(g, scatter_atomic_kernel);
}
