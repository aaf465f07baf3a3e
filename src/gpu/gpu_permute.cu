/* Permute's and UnitNormalization's kernels on the GPU, as cpu_permute.c and cpu_l2norm.c:
 * permute a thread per output float (writes coalesced, reads gathered through the input
 * strides of the output's axes); l2norm a warp per row where the reduced axis is the last
 * (inner 1: its sums in double over the warp's split), else a thread per (outer, inner)
 * column summing in double in the CPU's order (neighbouring threads read neighbouring
 * floats). Not in the GPU's op table yet (TFC_BACKEND_LAYER_OPS): tfc_gpu_test_enable_
 * layer_ops puts them in for `make test-gpu`'s permute_l2norm case against the CPU; until
 * that has passed on a GPU, Permute and UnitNormalization are refused there. */
#include <math.h>

#include "gpu/gpu_internal.cuh"

/* The permutation with the batch axis as axis 0: output sizes and, per output axis, its
 * stride in the input. */
typedef struct perm_view {
    int k;
    int64_t od[TFC_PERMUTE_AXES + 1], is[TFC_PERMUTE_AXES + 1];
} perm_view;

static __global__ void permute_kernel(perm_view v, int64_t total, const float *x, float *y,
                                      int add)
{
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < total;
         o += (int64_t)gridDim.x * blockDim.x) {
        int64_t u = o, at = 0;
        for (int i = v.k - 1; i >= 0; i--) {
            at += u % v.od[i] * v.is[i];
            u /= v.od[i];
        }
        y[o] = add ? y[o] + x[at] : x[at];
    }
}

void tfc_gpu_permute(tfc_backend *be, const tfc_permute_desc *d, const float *x, float *y,
                     int add)
{
    gpu_ctx *g = gpu_of(be);
    perm_view v;
    int64_t st[TFC_PERMUTE_AXES + 1], total = d->n;
    v.k = d->ndim + 1;
    st[d->ndim] = 1;
    for (int i = d->ndim - 1; i >= 0; i--) st[i] = st[i + 1] * d->dim[i];
    v.od[0] = d->n, v.is[0] = st[0]; /* st[j + 1]: example axis j's stride */
    for (int i = 0; i < d->ndim; i++) {
        v.od[i + 1] = d->dim[d->perm[i]], v.is[i + 1] = st[d->perm[i] + 1];
        total *= d->dim[i];
    }
    if (total <= 0) return;
    permute_kernel<<<gpu_blocks(g, total), GPU_THREADS, 0, g->stream>>>(v, total, x, y, add);
    TFC_LAUNCH_CHECK(g, permute_kernel);
}

/* min(rsqrt(s), inv_max) in float, as scale_of in cpu_l2norm.c */
__device__ __forceinline__ float l2_scale(double s, float inv_max, int *clamped)
{
    const float r = (float)(1.0 / sqrt(s));
    *clamped = r >= inv_max;
    return *clamped ? inv_max : r;
}

/* Warps of GPU_THREADS-thread blocks over `n` rows: w runs over this warp's rows. */
#define L2_WARPS(w, n)                                                                          \
    for (int64_t w = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; w < (n);            \
         w += (int64_t)gridDim.x * (blockDim.x / 32))

static __global__ void l2_rows_kernel(tfc_l2norm_desc d, const float *x, const float *dy,
                                      float *out, int backward, int assign)
{
    const int lane = threadIdx.x % 32;
    L2_WARPS(row, d.outer)
    {
        const float *xr = x + row * d.red, *gr = backward ? dy + row * d.red : NULL;
        double s = 0.0, gx = 0.0;
        for (int64_t j = lane; j < d.red; j += 32) {
            s += (double)xr[j] * xr[j];
            if (backward) gx += (double)gr[j] * xr[j];
        }
        s = warp_sum(s);
        if (backward) gx = warp_sum(gx);
        int clamped;
        const float r = l2_scale(s, d.inv_max, &clamped);
        const float k = clamped ? 0.0f : (float)((double)r * r * gx);
        float *o = out + row * d.red;
        for (int64_t j = lane; j < d.red; j += 32) {
            if (!backward) o[j] = xr[j] * r;
            else if (assign) o[j] = r * (gr[j] - xr[j] * k);
            else o[j] += r * (gr[j] - xr[j] * k);
        }
    }
}

static __global__ void l2_cols_kernel(tfc_l2norm_desc d, const float *x, const float *dy,
                                      float *out, int backward, int assign)
{
    const int64_t cols = d.outer * d.inner;
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < cols;
         c += (int64_t)gridDim.x * blockDim.x) {
        const int64_t at = c / d.inner * d.red * d.inner + c % d.inner;
        double s = 0.0, gx = 0.0;
        for (int64_t j = 0; j < d.red; j++) {
            const float v = x[at + j * d.inner];
            s += (double)v * v;
            if (backward) gx += (double)dy[at + j * d.inner] * v;
        }
        int clamped;
        const float r = l2_scale(s, d.inv_max, &clamped);
        const float k = clamped ? 0.0f : (float)((double)r * r * gx);
        for (int64_t j = 0; j < d.red; j++) {
            const int64_t i = at + j * d.inner;
            if (!backward) out[i] = x[i] * r;
            else if (assign) out[i] = r * (dy[i] - x[i] * k);
            else out[i] += r * (dy[i] - x[i] * k);
        }
    }
}

static void l2_launch(tfc_backend *be, const tfc_l2norm_desc *d, const float *x,
                      const float *dy, float *out, int backward, int assign)
{
    gpu_ctx *g = gpu_of(be);
    if (d->outer * d->red * d->inner <= 0) return;
    if (d->inner == 1) {
        l2_rows_kernel<<<gpu_blocks(g, d->outer * 32), GPU_THREADS, 0, g->stream>>>(
            *d, x, dy, out, backward, assign);
        TFC_LAUNCH_CHECK(g, l2_rows_kernel);
    } else {
        l2_cols_kernel<<<gpu_blocks(g, d->outer * d->inner), GPU_THREADS, 0, g->stream>>>(
            *d, x, dy, out, backward, assign);
        TFC_LAUNCH_CHECK(g, l2_cols_kernel);
    }
}

void tfc_gpu_l2norm_forward(tfc_backend *be, const tfc_l2norm_desc *d, const float *x,
                            float *y)
{
    l2_launch(be, d, x, NULL, y, 0, 0);
}

void tfc_gpu_l2norm_backward(tfc_backend *be, const tfc_l2norm_desc *d, const float *x,
                             const float *dy, float *dx, int assign)
{
    l2_launch(be, d, x, dy, dx, 1, assign);
}
