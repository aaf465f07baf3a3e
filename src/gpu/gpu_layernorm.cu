/* The transformer block's row-wise kernels on the GPU, as their CPU twins: LayerNormalization
 * and RMSNormalization (cpu_layernorm.c: a warp per row, its statistics in one pass in double
 * over x shifted by the row's first value, the backward fused per row, dgamma and dbeta
 * through the deterministic column sums of gpu_internal.cuh), Multiply (cpu_mul.c: the
 * broadcast factor's gradient summed in row order) and Masking (cpu_masking.c). */
#include <math.h>

#include "gpu/gpu_internal.cuh"

/* Warps of GPU_THREADS-thread blocks over `rows` rows: r runs over this warp's rows. */
#define WARP_ROWS(r, rows)                                                                      \
    for (int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; r < (rows);         \
         r += (int64_t)gridDim.x * (blockDim.x / 32))

/* ---- LayerNormalization, RMSNormalization ----------------------------------------------- */

/* Per row: mu = mean(x) where center_stats (else 0), invstd = 1 / sqrt(var + eps) from sums
 * in double over x - x[0] (x without center_stats), c = center ? mu : 0,
 *   y = (x - c) invstd gamma + beta,   stats[r] = (mu, invstd) */
static __global__ void ln_forward_kernel(tfc_layernorm_desc d, const float *x, const float *gamma,
                                         const float *beta, float *y, float *stats)
{
    const int lane = threadIdx.x % 32, cols = d.cols;
    WARP_ROWS(r, d.rows)
    {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        const double shift = d.center_stats ? xr[0] : 0.0;
        double s = 0.0, s2 = 0.0;
        for (int j = lane; j < cols; j += 32) {
            const double v = (double)xr[j] - shift;
            s += v;
            s2 += v * v;
        }
        s = warp_sum(s), s2 = warp_sum(s2);
        const double md = s / cols;
        double var = d.center_stats ? s2 / cols - md * md : s2 / cols;
        if (var < 0.0) var = 0.0;
        const float mu = d.center_stats ? (float)(shift + md) : 0.0f;
        const float inv = (float)(1.0 / sqrt(var + (double)d.eps));
        if (stats && lane == 0) stats[2 * r] = mu, stats[2 * r + 1] = inv;
        const float c = d.center ? mu : 0.0f;
        for (int j = lane; j < cols; j += 32) {
            const float u = (xr[j] - c) * inv;
            yr[j] = (gamma ? u * gamma[j] : u) + (beta ? beta[j] : 0.0f);
        }
    }
}

void tfc_gpu_layernorm_forward(tfc_backend *be, const tfc_layernorm_desc *d, const float *x,
                               const float *gamma, const float *beta, float *y, float *stats)
{
    gpu_ctx *g = gpu_of(be);
    if (d->rows <= 0 || d->cols <= 0) return;
    ln_forward_kernel<<<gpu_blocks(g, d->rows * 32), GPU_THREADS, 0, g->stream>>>(*d, x, gamma,
                                                                                  beta, y, stats);
    TFC_LAUNCH_CHECK(g, ln_forward_kernel);
}

/* Per row, with g = dy gamma, u = (x - c) invstd, v = (x - mu) invstd:
 *   dx = invstd (g - [center] sum g / cols - v sum(g u) / cols)   (+= unless assign)
 * the two sums in double over the warp. */
static __global__ void ln_dx_kernel(tfc_layernorm_desc d, const float *x, const float *dy,
                                    const float *gamma, const float *stats, float *dx, int assign)
{
    const int lane = threadIdx.x % 32, cols = d.cols;
    WARP_ROWS(r, d.rows)
    {
        const float *xr = x + r * cols, *gr = dy + r * cols;
        float *dr = dx + r * cols;
        const float mu = stats[2 * r], inv = stats[2 * r + 1];
        const float c = d.center ? mu : 0.0f;
        double sg = 0.0, sgu = 0.0;
        for (int j = lane; j < cols; j += 32) {
            const float g = gamma ? gr[j] * gamma[j] : gr[j];
            sg += g;
            sgu += (double)g * ((xr[j] - c) * inv);
        }
        sg = warp_sum(sg), sgu = warp_sum(sgu);
        const float mg = d.center ? (float)(sg / cols) : 0.0f, mgu = (float)(sgu / cols);
        for (int j = lane; j < cols; j += 32) {
            const float g = gamma ? gr[j] * gamma[j] : gr[j];
            const float v = inv * (g - mg - (xr[j] - mu) * inv * mgu);
            dr[j] = assign ? v : dr[j] + v;
        }
    }
}

/* The two column sums of the backward: dy u (dgamma's) and dy (dbeta's) at (r, j). */
struct ln_param_grads {
    const float *x, *dy, *stats;
    int cols, center;
    __device__ void operator()(int64_t r, int j, double *v) const
    {
        const float c = center ? stats[2 * r] : 0.0f;
        const float u = (x[r * cols + j] - c) * stats[2 * r + 1];
        const float g = dy[r * cols + j];
        v[0] = (double)g * u;
        v[1] = g;
    }
};

/* dgamma[j] += sum of the splits' dy u, dbeta[j] += theirs of dy, in split order. */
static __global__ void ln_params_kernel(int cols, int splits, const double *partial,
                                        float *dgamma, float *dbeta)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    if (dgamma) dgamma[j] += (float)colsum_total(partial, 0, splits, cols, j);
    if (dbeta) dbeta[j] += (float)colsum_total(partial, 1, splits, cols, j);
}

/* Workspace: the column sums' partials, two quantities per split and column, in double. */
size_t tfc_gpu_layernorm_workspace(tfc_backend *be, const tfc_layernorm_desc *d)
{
    (void)be;
    return gpu_align((size_t)2 * colsum_splits(d->rows) * (size_t)d->cols * sizeof(double));
}

void tfc_gpu_layernorm_backward(tfc_backend *be, const tfc_layernorm_desc *d, const float *x,
                                const float *dy, const float *gamma, const float *stats,
                                float *dx, float *dgamma, float *dbeta, int assign, void *ws)
{
    gpu_ctx *g = gpu_of(be);
    if (d->rows <= 0 || d->cols <= 0) return;
    if (dx) {
        ln_dx_kernel<<<gpu_blocks(g, d->rows * 32), GPU_THREADS, 0, g->stream>>>(
            *d, x, dy, gamma, stats, dx, assign);
        TFC_LAUNCH_CHECK(g, ln_dx_kernel);
    }
    if (!dgamma && !dbeta) return;
    double *partial = (double *)ws;
    if (gpu_colsum<2>(g, d->rows, d->cols, ln_param_grads{x, dy, stats, d->cols, d->center},
                      partial))
        return;
    ln_params_kernel<<<(d->cols + 255) / 256, 256, 0, g->stream>>>(
        d->cols, colsum_splits(d->rows), partial, dgamma, dbeta);
    TFC_LAUNCH_CHECK(g, ln_params_kernel);
}

/* ---- Multiply --------------------------------------------------------------------------- */

/* y[g, r, c] = a[g, r, c] b[g, b_bcast ? 0 : r, c], or += with accumulate. */
static __global__ void mul_kernel(int64_t total, int64_t rows, int cols, const float *a,
                                  const float *b, int b_bcast, float *y, int accumulate)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t be = b_bcast ? e / ((int64_t)rows * cols) * cols + e % cols : e;
        const float p = a[e] * b[be];
        y[e] = accumulate ? y[e] + p : p;
    }
}

void tfc_gpu_mul(tfc_backend *be, int64_t groups, int64_t rows, int cols, const float *a,
                 const float *b, int b_bcast, float *y, int accumulate)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t total = groups * rows * cols;
    if (total <= 0) return;
    mul_kernel<<<gpu_blocks(g, total), GPU_THREADS, 0, g->stream>>>(total, rows, cols, a, b,
                                                                    b_bcast, y, accumulate);
    TFC_LAUNCH_CHECK(g, mul_kernel);
}

/* db[g, c] += sum_r a[g, r, c] b[g, r, c]: a thread per (g, c), the rows in order from zero
 * in float, as the CPU (neighbouring threads read neighbouring columns). */
static __global__ void mul_reduce_kernel(int64_t groups, int64_t rows, int cols, const float *a,
                                         const float *b, float *db)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < groups * cols;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t gi = e / cols, c = e % cols;
        float s = 0.0f;
        for (int64_t r = 0; r < rows; r++) {
            const int64_t at = (gi * rows + r) * cols + c;
            s += a[at] * b[at];
        }
        db[e] += s;
    }
}

void tfc_gpu_mul_reduce(tfc_backend *be, int64_t groups, int64_t rows, int cols, const float *a,
                        const float *b, float *db)
{
    gpu_ctx *g = gpu_of(be);
    if (groups * cols <= 0) return;
    mul_reduce_kernel<<<gpu_blocks(g, groups * cols), GPU_THREADS, 0, g->stream>>>(groups, rows,
                                                                                   cols, a, b, db);
    TFC_LAUNCH_CHECK(g, mul_reduce_kernel);
}

/* ---- Masking ---------------------------------------------------------------------------- */

/* Whether row xr is a real step (some value differs from `value`; NaN always does), over
 * the warp. */
static __device__ __forceinline__ bool real_step(const float *xr, int cols, float value)
{
    bool real = false;
    for (int j = threadIdx.x % 32; j < cols; j += 32) real |= xr[j] != value;
    return __any_sync(0xffffffffu, real);
}

/* y[r, :] = real(x[r, :]) ? x[r, :] : 0, a warp per row */
static __global__ void masking_forward_kernel(int64_t rows, int cols, float value, const float *x,
                                              float *y)
{
    WARP_ROWS(r, rows)
    {
        const float *xr = x + r * cols;
        const bool real = real_step(xr, cols, value);
        for (int j = threadIdx.x % 32; j < cols; j += 32) y[r * cols + j] = real ? xr[j] : 0.0f;
    }
}

/* dx[r, :] += real(x[r, :]) ? dy[r, :] : 0, a warp per row */
static __global__ void masking_backward_kernel(int64_t rows, int cols, float value,
                                               const float *x, const float *dy, float *dx)
{
    WARP_ROWS(r, rows)
    {
        if (!real_step(x + r * cols, cols, value)) continue;
        for (int j = threadIdx.x % 32; j < cols; j += 32) dx[r * cols + j] += dy[r * cols + j];
    }
}

void tfc_gpu_masking_forward(tfc_backend *be, int64_t rows, int cols, float value,
                             const float *x, float *y)
{
    gpu_ctx *g = gpu_of(be);
    if (rows <= 0 || cols <= 0) return;
    masking_forward_kernel<<<gpu_blocks(g, rows * 32), GPU_THREADS, 0, g->stream>>>(rows, cols,
                                                                                    value, x, y);
    TFC_LAUNCH_CHECK(g, masking_forward_kernel);
}

void tfc_gpu_masking_backward(tfc_backend *be, int64_t rows, int cols, float value,
                              const float *x, const float *dy, float *dx)
{
    gpu_ctx *g = gpu_of(be);
    if (rows <= 0 || cols <= 0) return;
    masking_backward_kernel<<<gpu_blocks(g, rows * 32), GPU_THREADS, 0, g->stream>>>(
        rows, cols, value, x, dy, dx);
    TFC_LAUNCH_CHECK(g, masking_backward_kernel);
}
