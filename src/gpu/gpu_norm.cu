/* Batch normalisation over rows (n*h*w) per channel (cols), with kernels of our own that
 * follow cpu_norm.c step for step: statistics in double through the deterministic column
 * sums of gpu_internal.cuh (mean first, then the variance over x - mean: no E[x^2] - E[x]^2
 * cancellation), per-channel coefficients in double, then one affine pass in float.
 * tfc_gpu_set_fast_norm (off by default until it has run on a GPU) takes the wider column
 * sums (gpu_colsum_fast: another summation order, so other last bits of the statistics),
 * applies the ReLU in the affine pass and indexes in 32 bits. */
#include <math.h>

#include "gpu/gpu_internal.cuh"

#define GRID_LOOP(i, n)                                                              \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);        \
         i += (int64_t)gridDim.x * blockDim.x)

/* y[r, c] = x[r, c] a[c] + b[c] */
static __global__ void affine_kernel(int64_t total, int cols, const float *x, const float *a,
                              const float *b, float *y)
{
    GRID_LOOP(i, total)
    {
        int c = (int)(i % cols);
        y[i] = x[i] * a[c] + b[c];
    }
}

static int affine(gpu_ctx *g, int64_t rows, int cols, const float *x, const float *a,
                  const float *b, float *y)
{
    const int64_t total = rows * cols;
    affine_kernel<<<gpu_blocks(g, total), GPU_THREADS, 0, g->stream>>>(total, cols, x, a, b, y);
    TFC_LAUNCH_CHECK(g, affine_kernel, 1);
    return 0;
}

/* tfc_gpu_set_fast_norm: y = act(x a[c] + b[c]) in one pass (act TFC_ACT_LINEAR or
 * TFC_ACT_RELU, as act_value computes it; the same products and sums as affine_kernel, so
 * the same bits), with 32-bit indices (total < 2^30) and the channel by a mask where cols
 * is a power of two. */
static __global__ void affine_act_kernel(int total, int cols, const float *x, const float *a,
                                         const float *b, int relu, float *y)
{
    const int mask = (cols & (cols - 1)) == 0 ? cols - 1 : -1;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        const int c = mask >= 0 ? i & mask : i % cols;
        const float v = x[i] * a[c] + b[c];
        y[i] = relu && v < 0.0f ? 0.0f : v;
    }
}

/* Whether the fast path applies: asked for, and indices fit in 32 bits with room for a
 * grid stride past the end. */
static int fast(const gpu_ctx *g, int64_t rows, int cols)
{
    return g->fast_norm && rows * cols < ((int64_t)1 << 30);
}

/* The column sums and their split count, wide under tfc_gpu_set_fast_norm. */
static int norm_splits(const gpu_ctx *g, int64_t rows, int cols)
{
    return fast(g, rows, cols) ? colsum_splits_fast(rows) : colsum_splits(rows);
}

template <int NV, typename F>
static int norm_colsum(gpu_ctx *g, int64_t rows, int cols, F f, double *partial)
{
    return fast(g, rows, cols) ? gpu_colsum_fast<NV>(g, rows, cols, f, partial)
                               : gpu_colsum<NV>(g, rows, cols, f, partial);
}

struct value_of {
    const float *x;
    int cols;
    __device__ void operator()(int64_t r, int c, double *v) const { v[0] = x[r * cols + c]; }
};

/* (x - mean)^2, in double */
struct sq_dev {
    const float *x;
    const double *mean;
    int cols;
    __device__ void operator()(int64_t r, int c, double *v) const
    {
        double dv = (double)x[r * cols + c] - mean[c];
        v[0] = dv * dv;
    }
};

/* mean[c] = sum / rows (double) */
static __global__ void mean_kernel(int cols, int splits, int64_t rows, const double *partial,
                            double *mean)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < cols) mean[c] = colsum_total(partial, 0, splits, cols, c) / (double)rows;
}

/* var = sq / rows (biased), invstd = 1 / sqrt(var + eps); saved statistics, moving
 * averages (momentum * moving + (1 - momentum) * batch, in float as on the CPU) and the
 * affine coefficients a = gamma invstd, b = beta - mean gamma invstd. */
static __global__ void train_stats_kernel(int cols, int splits, int64_t rows, const double *partial,
                                   const double *mean, const float *gamma, const float *beta,
                                   float eps, float momentum, float *moving_mean,
                                   float *moving_var, float *save_mean, float *save_invstd,
                                   float *a, float *b)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    double var = colsum_total(partial, 0, splits, cols, c) / (double)rows;
    double invstd = 1.0 / sqrt(var + (double)eps);
    save_mean[c] = (float)mean[c];
    save_invstd[c] = (float)invstd;
    moving_mean[c] = momentum * moving_mean[c] + (1.0f - momentum) * (float)mean[c];
    moving_var[c] = momentum * moving_var[c] + (1.0f - momentum) * (float)var;
    a[c] = (float)(gamma[c] * invstd);
    b[c] = (float)(beta[c] - mean[c] * gamma[c] * invstd);
}

/* Scratch: partial sums, then mean [cols] double, then a, b [cols] float. */
void tfc_gpu_bn_forward_train(tfc_backend *be, int64_t rows, int cols, const float *x,
                              const float *gamma, const float *beta, float eps, float momentum,
                              float *moving_mean, float *moving_var, float *y, float *save_mean,
                              float *save_invstd, tfc_act act)
{
    gpu_ctx *g = gpu_of(be);
    if (rows <= 0 || cols <= 0) return;
    const int splits = norm_splits(g, rows, cols);
    const size_t part = gpu_align((size_t)splits * cols * sizeof(double));
    const size_t means = gpu_align((size_t)cols * sizeof(double));
    const size_t coef = gpu_align((size_t)cols * sizeof(float));
    char *s = (char *)tfc_gpu_scratch(g, part + means + 2 * coef);
    if (!s) return;
    double *partial = (double *)s, *mean = (double *)(s + part);
    float *a = (float *)(s + part + means), *b = (float *)(s + part + means + coef);
    const int cb = (cols + 255) / 256;
    if (norm_colsum<1>(g, rows, cols, value_of{x, cols}, partial)) return;
    mean_kernel<<<cb, 256, 0, g->stream>>>(cols, splits, rows, partial, mean);
    TFC_LAUNCH_CHECK(g, mean_kernel);
    if (norm_colsum<1>(g, rows, cols, sq_dev{x, mean, cols}, partial)) return;
    train_stats_kernel<<<cb, 256, 0, g->stream>>>(cols, splits, rows, partial, mean, gamma, beta,
                                                  eps, momentum, moving_mean, moving_var,
                                                  save_mean, save_invstd, a, b);
    TFC_LAUNCH_CHECK(g, train_stats_kernel);
    if (fast(g, rows, cols) && (act == TFC_ACT_LINEAR || act == TFC_ACT_RELU)) {
        const int total = (int)(rows * cols);
        affine_act_kernel<<<gpu_blocks(g, total), GPU_THREADS, 0, g->stream>>>(
            total, cols, x, a, b, act == TFC_ACT_RELU, y);
        TFC_LAUNCH_CHECK(g, affine_act_kernel);
        return;
    }
    affine(g, rows, cols, x, a, b, y);
    if (act != TFC_ACT_LINEAR) tfc_gpu_act_forward(be, act, rows * cols, cols, y, y);
}

/* a = gamma / sqrt(moving_var + eps), b = beta - moving_mean a (in double) */
static __global__ void infer_coef_kernel(int cols, const float *gamma, const float *beta,
                                  const float *moving_mean, const float *moving_var, float eps,
                                  float *a, float *b)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    double s = gamma[c] / sqrt((double)moving_var[c] + (double)eps);
    a[c] = (float)s;
    b[c] = (float)(beta[c] - moving_mean[c] * s);
}

void tfc_gpu_bn_forward_infer(tfc_backend *be, int64_t rows, int cols, const float *x,
                              const float *gamma, const float *beta, const float *moving_mean,
                              const float *moving_var, float eps, float *y)
{
    gpu_ctx *g = gpu_of(be);
    if (rows <= 0 || cols <= 0) return;
    const size_t coef = gpu_align((size_t)cols * sizeof(float));
    char *s = (char *)tfc_gpu_scratch(g, 2 * coef);
    if (!s) return;
    float *a = (float *)s, *b = (float *)(s + coef);
    infer_coef_kernel<<<(cols + 255) / 256, 256, 0, g->stream>>>(cols, gamma, beta, moving_mean,
                                                                 moving_var, eps, a, b);
    TFC_LAUNCH_CHECK(g, infer_coef_kernel);
    affine(g, rows, cols, x, a, b, y);
}

/* Per element: dy, and dy * xhat with xhat = (x - mean) invstd rounded to float first, as
 * the CPU forms it. */
struct dy_and_dyxhat {
    const float *x, *dy, *mean, *invstd;
    int cols;
    __device__ void operator()(int64_t r, int c, double *v) const
    {
        const int64_t i = r * cols + c;
        float xhat = (x[i] - mean[c]) * invstd[c];
        v[0] = dy[i];
        v[1] = (double)dy[i] * xhat;
    }
};

/* dbeta += sum dy, dgamma += sum dy xhat; k = gamma invstd, mdy = mean(dy), mdyx =
 * mean(dy xhat) for the dx pass. */
static __global__ void bwd_stats_kernel(int cols, int splits, int64_t rows, const double *partial,
                                 const float *gamma, const float *invstd, float *dgamma,
                                 float *dbeta, float *k, float *mdy, float *mdyx)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    double sdy = colsum_total(partial, 0, splits, cols, c);
    double sdyx = colsum_total(partial, 1, splits, cols, c);
    dbeta[c] += (float)sdy;
    dgamma[c] += (float)sdyx;
    k[c] = gamma[c] * invstd[c];
    mdy[c] = (float)(sdy / (double)rows);
    mdyx[c] = (float)(sdyx / (double)rows);
}

/* dx += k (dy - mdy - xhat mdyx), or = with assign */
static __global__ void bwd_dx_kernel(int64_t total, int cols, const float *x, const float *dy,
                              const float *mean, const float *invstd, const float *k,
                              const float *mdy, const float *mdyx, float *dx, int assign)
{
    GRID_LOOP(i, total)
    {
        int c = (int)(i % cols);
        float xhat = (x[i] - mean[c]) * invstd[c];
        const float g = k[c] * (dy[i] - mdy[c] - xhat * mdyx[c]);
        dx[i] = assign ? g : dx[i] + g;
    }
}

/* bwd_dx_kernel with 32-bit indices (tfc_gpu_set_fast_norm): the same arithmetic. */
static __global__ void bwd_dx_fast_kernel(int total, int cols, const float *x, const float *dy,
                                          const float *mean, const float *invstd,
                                          const float *k, const float *mdy, const float *mdyx,
                                          float *dx, int assign)
{
    const int mask = (cols & (cols - 1)) == 0 ? cols - 1 : -1;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        const int c = mask >= 0 ? i & mask : i % cols;
        float xhat = (x[i] - mean[c]) * invstd[c];
        const float g = k[c] * (dy[i] - mdy[c] - xhat * mdyx[c]);
        dx[i] = assign ? g : dx[i] + g;
    }
}

/* With xhat = (x - mean) invstd and N = rows:
 *   dbeta += sum dy,  dgamma += sum dy xhat,
 *   dx += gamma invstd (dy - mean(dy) - xhat mean(dy xhat)). */
void tfc_gpu_bn_backward(tfc_backend *be, int64_t rows, int cols, const float *x,
                         const float *dy, const float *gamma, const float *save_mean,
                         const float *save_invstd, float *dx, float *dgamma, float *dbeta,
                         int assign)
{
    gpu_ctx *g = gpu_of(be);
    if (rows <= 0 || cols <= 0) return;
    const int splits = norm_splits(g, rows, cols);
    const size_t part = gpu_align((size_t)2 * splits * cols * sizeof(double));
    const size_t coef = gpu_align((size_t)cols * sizeof(float));
    char *s = (char *)tfc_gpu_scratch(g, part + 3 * coef);
    if (!s) return;
    double *partial = (double *)s;
    float *k = (float *)(s + part), *mdy = (float *)(s + part + coef),
          *mdyx = (float *)(s + part + 2 * coef);
    if (norm_colsum<2>(g, rows, cols, dy_and_dyxhat{x, dy, save_mean, save_invstd, cols},
                       partial))
        return;
    bwd_stats_kernel<<<(cols + 255) / 256, 256, 0, g->stream>>>(
        cols, splits, rows, partial, gamma, save_invstd, dgamma, dbeta, k, mdy, mdyx);
    TFC_LAUNCH_CHECK(g, bwd_stats_kernel);
    const int64_t total = rows * cols;
    if (fast(g, rows, cols)) {
        bwd_dx_fast_kernel<<<gpu_blocks(g, total), GPU_THREADS, 0, g->stream>>>(
            (int)total, cols, x, dy, save_mean, save_invstd, k, mdy, mdyx, dx, assign);
        TFC_LAUNCH_CHECK(g, bwd_dx_fast_kernel);
        return;
    }
    bwd_dx_kernel<<<gpu_blocks(g, total), GPU_THREADS, 0, g->stream>>>(
        total, cols, x, dy, save_mean, save_invstd, k, mdy, mdyx, dx, assign);
    TFC_LAUNCH_CHECK(g, bwd_dx_kernel);
}
