/* GroupNormalization's kernels on the GPU, as cpu_groupnorm.c: a warp per unit (one example's
 * group of m = outer cg inner values), its statistics in one pass in double over x shifted by
 * the unit's first value; backward a warp per unit for dx and a warp per channel for dgamma
 * and dbeta, each a sum in double over a fixed split, so the results do not depend on the
 * run (their order is not the CPU's). Not in the GPU's op table yet
 * (TFC_BACKEND_LAYER_OPS): tfc_gpu_test_enable_layer_ops puts them in for `make test-gpu`'s
 * case against the CPU; until that has passed on a GPU, GroupNormalization is refused there. */
#include <math.h>

#include "gpu/gpu_internal.cuh"

/* Warps of GPU_THREADS-thread blocks over `n` items: w runs over this warp's items. */
#define GN_WARPS(w, n)                                                                          \
    for (int64_t w = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; w < (n);            \
         w += (int64_t)gridDim.x * (blockDim.x / 32))

/* Where value j (of m) of unit u lies in x, and its channel. */
__device__ __forceinline__ int64_t gn_at(const tfc_groupnorm_desc &d, int64_t u, int64_t j,
                                         int *c)
{
    const int64_t run = (int64_t)d.cg * d.inner, b = u / d.groups, o = j / run, r = j % run;
    const int g = (int)(u % d.groups);
    *c = g * d.cg + (int)(r / d.inner);
    return ((b * d.outer + o) * ((int64_t)d.groups * d.cg) + (int64_t)g * d.cg) * d.inner + r;
}

static __global__ void gn_forward_kernel(tfc_groupnorm_desc d, const float *x, const float *gamma,
                                         const float *beta, float *y, float *stats)
{
    const int lane = threadIdx.x % 32;
    const int64_t m = d.outer * d.cg * d.inner;
    int c;
    GN_WARPS(u, d.n * d.groups)
    {
        const double shift = x[gn_at(d, u, 0, &c)];
        double s = 0.0, s2 = 0.0;
        for (int64_t j = lane; j < m; j += 32) {
            const double v = (double)x[gn_at(d, u, j, &c)] - shift;
            s += v;
            s2 += v * v;
        }
        s = warp_sum(s), s2 = warp_sum(s2);
        const double md = s / (double)m;
        double var = s2 / (double)m - md * md;
        if (var < 0.0) var = 0.0;
        const float mu = (float)(shift + md), inv = (float)(1.0 / sqrt(var + (double)d.eps));
        if (stats && lane == 0) stats[2 * u] = mu, stats[2 * u + 1] = inv;
        for (int64_t j = lane; j < m; j += 32) {
            const int64_t at = gn_at(d, u, j, &c);
            const float sc = gamma ? gamma[c] * inv : inv, sh = beta ? beta[c] : 0.0f;
            y[at] = (x[at] - mu) * sc + sh;
        }
    }
}

void tfc_gpu_groupnorm_forward(tfc_backend *be, const tfc_groupnorm_desc *d, const float *x,
                               const float *gamma, const float *beta, float *y, float *stats)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t units = d->n * d->groups;
    if (units <= 0) return;
    gn_forward_kernel<<<gpu_blocks(g, units * 32), GPU_THREADS, 0, g->stream>>>(*d, x, gamma,
                                                                                beta, y, stats);
    TFC_LAUNCH_CHECK(g, gn_forward_kernel);
}

size_t tfc_gpu_groupnorm_workspace(tfc_backend *be, const tfc_groupnorm_desc *d)
{
    (void)be, (void)d;
    return 0;
}

/* Per unit: sum g and sum g u (g = dy gamma), then dx = invstd (g - mean g - u mean(g u)). */
static __global__ void gn_dx_kernel(tfc_groupnorm_desc d, const float *x, const float *dy,
                                    const float *gamma, const float *stats, float *dx, int assign)
{
    const int lane = threadIdx.x % 32;
    const int64_t m = d.outer * d.cg * d.inner;
    int c;
    GN_WARPS(u, d.n * d.groups)
    {
        const float mu = stats[2 * u], inv = stats[2 * u + 1];
        double sg = 0.0, sgu = 0.0;
        for (int64_t j = lane; j < m; j += 32) {
            const int64_t at = gn_at(d, u, j, &c);
            const float gv = gamma ? dy[at] * gamma[c] : dy[at];
            sg += gv;
            sgu += (double)gv * ((x[at] - mu) * inv);
        }
        sg = warp_sum(sg), sgu = warp_sum(sgu);
        const float mg = (float)(sg / (double)m), mgu = (float)(sgu / (double)m);
        for (int64_t j = lane; j < m; j += 32) {
            const int64_t at = gn_at(d, u, j, &c);
            const float gv = gamma ? dy[at] * gamma[c] : dy[at];
            const float v = inv * (gv - mg - (x[at] - mu) * inv * mgu);
            dx[at] = assign ? v : dx[at] + v;
        }
    }
}

/* Per channel c: dgamma[c] += sum dy u, dbeta[c] += sum dy over its n outer inner values. */
static __global__ void gn_param_kernel(tfc_groupnorm_desc d, const float *x, const float *dy,
                                       const float *stats, float *dgamma, float *dbeta)
{
    const int lane = threadIdx.x % 32, C = d.groups * d.cg;
    const int64_t per = d.n * d.outer * d.inner;
    GN_WARPS(c, C)
    {
        double sgu = 0.0, sb = 0.0;
        for (int64_t p = lane; p < per; p += 32) {
            const int64_t i = p % d.inner, bo = p / d.inner, b = bo / d.outer;
            const int64_t at = (bo * C + c) * d.inner + i, u = b * d.groups + c / d.cg;
            const float uu = (x[at] - stats[2 * u]) * stats[2 * u + 1];
            sgu += (double)dy[at] * uu;
            sb += dy[at];
        }
        sgu = warp_sum(sgu), sb = warp_sum(sb);
        if (lane == 0) {
            if (dgamma) dgamma[c] += (float)sgu;
            if (dbeta) dbeta[c] += (float)sb;
        }
    }
}

void tfc_gpu_groupnorm_backward(tfc_backend *be, const tfc_groupnorm_desc *d, const float *x,
                                const float *dy, const float *gamma, const float *stats,
                                float *dx, float *dgamma, float *dbeta, int assign, void *ws)
{
    (void)ws;
    gpu_ctx *g = gpu_of(be);
    const int64_t units = d->n * d->groups;
    if (units <= 0) return;
    if (dx) {
        gn_dx_kernel<<<gpu_blocks(g, units * 32), GPU_THREADS, 0, g->stream>>>(*d, x, dy, gamma,
                                                                               stats, dx, assign);
        TFC_LAUNCH_CHECK(g, gn_dx_kernel);
    }
    if (dgamma || dbeta) {
        const int64_t C = (int64_t)d->groups * d->cg;
        gn_param_kernel<<<gpu_blocks(g, C * 32), GPU_THREADS, 0, g->stream>>>(*d, x, dy, stats,
                                                                             dgamma, dbeta);
        TFC_LAUNCH_CHECK(g, gn_param_kernel);
    }
}
