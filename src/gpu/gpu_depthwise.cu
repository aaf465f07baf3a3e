/* DepthwiseConv2D's kernels (SeparableConv2D's first step) on the GPU, direct, NHWC, output
 * channel k reading input channel k / m alone (m the depth multiplier). Forward: one thread
 * per output cell; the data gradient gathers, one thread per input cell over the outputs whose
 * windows hold it; channels are the fastest index throughout, so a warp reads neighbouring
 * floats. The filter gradient sums fixed shares of the output rows into partials (a block per
 * run of 32 channels, tap and share), then adds the shares in order: no atomics, the same bits
 * on every run, in any mode. */
#include "gpu/gpu_internal.cuh"

#define GRID_LOOP(i, n)                                                              \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);        \
         i += (int64_t)gridDim.x * blockDim.x)

/* The filter gradient's block: 32 channels by 8 lanes of rows; its shares of the rows: at
 * most DW_SHARES, fewer for fewer rows, a function of the shape alone. */
#define DW_TX 32
#define DW_TY 8
#define DW_SHARES 64

static int dw_shares(int64_t rows)
{
    return rows < DW_SHARES ? (int)rows : DW_SHARES;
}

size_t tfc_gpu_depthwise_workspace(tfc_backend *be, const tfc_conv_desc *d)
{
    const int64_t rows = (int64_t)d->n * d->oh;
    if (rows <= 0 || d->ow <= 0) return 0;
    return (size_t)dw_shares(rows) * d->kh * d->kw * d->f * sizeof(float);
}

/* y[n, i, j, k] = sum_{u, v} x[n, i sh + u dh - pt, j sw + v dw - pl, k / m] w[u, v, k]
 *                 (+ bias[k]), taps outside the image skipped */
static __global__ void depthwise_fwd(tfc_conv_desc d, const float *x, const float *w,
                                     const float *bias, float *y)
{
    const int m = d.f / d.c;
    GRID_LOOP(e, (int64_t)d.n * d.oh * d.ow * d.f)
    {
        const int k = (int)(e % d.f);
        int64_t t = e / d.f;
        const int j = (int)(t % d.ow);
        t /= d.ow;
        const int i = (int)(t % d.oh);
        const float *xi = x + t / d.oh * d.h * d.w * d.c + k / m;
        float acc = 0.0f;
        for (int u = 0; u < d.kh; u++) {
            const int iy = i * d.sh + u * d.dh - d.pad_top;
            if (iy < 0 || iy >= d.h) continue;
            for (int v = 0; v < d.kw; v++) {
                const int ix = j * d.sw + v * d.dw - d.pad_left;
                if (ix < 0 || ix >= d.w) continue;
                acc += xi[((int64_t)iy * d.w + ix) * d.c] * w[((int64_t)u * d.kw + v) * d.f + k];
            }
        }
        y[e] = bias ? acc + bias[k] : acc;
    }
}

/* dx[n, yy, xx, ch] += sum_{u, v, q < m} dy[n, i, j, ch m + q] w[u, v, ch m + q] over the
 * taps with yy = i sh + u dh - pt and xx = j sw + v dw - pl for an output (i, j) */
static __global__ void depthwise_data(tfc_conv_desc d, const float *dy, const float *w,
                                      float *dx)
{
    const int m = d.f / d.c;
    GRID_LOOP(e, (int64_t)d.n * d.h * d.w * d.c)
    {
        const int ch = (int)(e % d.c);
        int64_t t = e / d.c;
        const int xx = (int)(t % d.w);
        t /= d.w;
        const int yy = (int)(t % d.h);
        const float *g = dy + t / d.h * d.oh * d.ow * d.f + (int64_t)ch * m;
        const float *wc = w + (int64_t)ch * m;
        float acc = 0.0f;
        for (int u = 0; u < d.kh; u++) {
            const int sy = yy + d.pad_top - u * d.dh;
            if (sy < 0 || sy % d.sh != 0 || sy / d.sh >= d.oh) continue;
            for (int v = 0; v < d.kw; v++) {
                const int sx = xx + d.pad_left - v * d.dw;
                if (sx < 0 || sx % d.sw != 0 || sx / d.sw >= d.ow) continue;
                const float *o = g + ((int64_t)(sy / d.sh) * d.ow + sx / d.sw) * d.f;
                const float *wt = wc + ((int64_t)u * d.kw + v) * d.f;
                for (int q = 0; q < m; q++) acc += o[q] * wt[q];
            }
        }
        dx[e] += acc;
    }
}

/* part[s, u, v, k] = sum over share s's output rows (img, i) and every column j of
 *   x[img, i sh + u dh - pt, j sw + v dw - pl, k / m] dy[img, i, j, k]
 * Block (run of 32 channels, tap u kw + v, share s); lane ty takes every 8th row of the
 * share, and lane 0 adds the 8 lanes' sums in lane order. */
static __global__ void depthwise_filter_part(tfc_conv_desc d, int shares, const float *x,
                                             const float *dy, float *part)
{
    __shared__ float sum[DW_TY][DW_TX];
    const int m = d.f / d.c;
    const int k = blockIdx.x * DW_TX + threadIdx.x;
    const int tap = blockIdx.y, u = tap / d.kw, v = tap % d.kw;
    const int64_t rows = (int64_t)d.n * d.oh;
    const int64_t r0 = rows * blockIdx.z / shares, r1 = rows * (blockIdx.z + 1) / shares;
    float acc = 0.0f;
    if (k < d.f)
        for (int64_t r = r0 + threadIdx.y; r < r1; r += DW_TY) {
            const int64_t img = r / d.oh;
            const int iy = (int)(r % d.oh) * d.sh + u * d.dh - d.pad_top;
            if (iy < 0 || iy >= d.h) continue;
            const float *xr = x + (img * d.h + iy) * d.w * d.c + k / m;
            const float *g = dy + r * d.ow * d.f + k;
            for (int j = 0; j < d.ow; j++) {
                const int ix = j * d.sw + v * d.dw - d.pad_left;
                if (ix >= 0 && ix < d.w) acc += xr[(int64_t)ix * d.c] * g[(int64_t)j * d.f];
            }
        }
    sum[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && k < d.f) {
        float s = 0.0f;
        for (int q = 0; q < DW_TY; q++) s += sum[q][threadIdx.x];
        part[((int64_t)blockIdx.z * d.kh * d.kw + tap) * d.f + k] = s;
    }
}

/* dw[q] += sum_s part[s, q], the shares in order */
static __global__ void depthwise_filter_sum(int64_t K, int shares, const float *part,
                                            float *dw)
{
    GRID_LOOP(q, K)
    {
        float s = 0.0f;
        for (int j = 0; j < shares; j++) s += part[j * K + q];
        dw[q] += s;
    }
}

/* y = act(bn(depthwise(x, w) + bias) + residual): the bias in the kernel, the rest as their
 * own kernels after it, as tfc_gpu_conv_forward's epilogue (ws unused). */
void tfc_gpu_depthwise_forward(tfc_backend *be, const tfc_conv_desc *d, const float *x,
                               const float *w, const float *bias, const tfc_bn_params *bn,
                               const float *residual, tfc_act act, float *y, void *ws)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t rows = (int64_t)d->n * d->oh * d->ow, n = rows * d->f;
    if (n <= 0) return;
    depthwise_fwd<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>(*d, x, w, bias, y);
    TFC_LAUNCH_CHECK(g, depthwise_fwd);
    if (bn)
        tfc_gpu_bn_forward_infer(be, rows, d->f, y, bn->gamma, bn->beta, bn->mean, bn->var,
                                 bn->eps, y);
    if (residual) tfc_gpu_axpy(be, n, 1.0f, residual, y);
    if (act != TFC_ACT_LINEAR) tfc_gpu_act_forward(be, act, n, d->f, y, y);
}

void tfc_gpu_depthwise_backward_data(tfc_backend *be, const tfc_conv_desc *d, const float *dy,
                                     const float *w, float *dx)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t n = (int64_t)d->n * d->h * d->w * d->c;
    if (n <= 0 || d->oh <= 0 || d->ow <= 0) return;
    depthwise_data<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>(*d, dy, w, dx);
    TFC_LAUNCH_CHECK(g, depthwise_data);
}

void tfc_gpu_depthwise_backward_filter(tfc_backend *be, const tfc_conv_desc *d, const float *x,
                                       const float *dy, float *dw, void *ws)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t rows = (int64_t)d->n * d->oh, K = (int64_t)d->kh * d->kw * d->f;
    if (rows <= 0 || d->ow <= 0 || K <= 0) return;
    const int shares = dw_shares(rows);
    float *part = (float *)ws;
    dim3 grid((unsigned)((d->f + DW_TX - 1) / DW_TX), (unsigned)(d->kh * d->kw),
              (unsigned)shares);
    depthwise_filter_part<<<grid, dim3(DW_TX, DW_TY), 0, g->stream>>>(*d, shares, x, dy, part);
    TFC_LAUNCH_CHECK(g, depthwise_filter_part);
    depthwise_filter_sum<<<gpu_blocks(g, K), GPU_THREADS, 0, g->stream>>>(K, shares, part, dw);
    TFC_LAUNCH_CHECK(g, depthwise_filter_sum);
}
