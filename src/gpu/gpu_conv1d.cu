/* Conv1D's kernels and the masked GlobalAveragePooling1D on the GPU. The convolutions go
 * through gpu_conv.cu's cuDNN path: a Conv1D is a 2-D convolution of height 1 (Keras's
 * [k, c / groups, f] kernel is [1, k, c / groups, f]), groups by cudnnSetConvolutionGroupCount.
 * The masked mean is a kernel of ours: one block per sequence, the kept steps counted by the
 * block, each thread's channels summed in step order (the CPU's order and bits). */
#include "gpu/gpu_internal.cuh"

/* ---- grouped convolution: no workspace argument, so the ctx's scratch serves -------------- */

void tfc_gpu_grouped_conv_forward(tfc_backend *be, const tfc_conv_desc *d, int groups,
                                  const float *x, const float *w, float *y)
{
    void *ws = tfc_gpu_conv_run_scratch(gpu_of(be), d);
    if (ws) tfc_gpu_conv_run_forward(be, d, groups, x, w, y, ws);
}

void tfc_gpu_grouped_conv_backward_data(tfc_backend *be, const tfc_conv_desc *d, int groups,
                                        const float *dy, const float *w, float *dx, int assign)
{
    void *ws = tfc_gpu_conv_run_scratch(gpu_of(be), d);
    if (ws) tfc_gpu_conv_run_data(be, d, groups, dy, w, dx, assign, ws);
}

void tfc_gpu_grouped_conv_backward_filter(tfc_backend *be, const tfc_conv_desc *d, int groups,
                                          const float *x, const float *dy, float *dw)
{
    void *ws = tfc_gpu_conv_run_scratch(gpu_of(be), d);
    if (ws) tfc_gpu_conv_run_filter(be, d, groups, x, dy, dw, ws);
}

/* ---- Conv1D at stride and dilation 1: the convolution ops with h = kh = 1 ------------------ */

size_t tfc_gpu_conv1d_workspace(tfc_backend *be, const tfc_conv_desc *d)
{
    return tfc_gpu_conv_run_workspace(d);
}

/* y = relu(conv(x, w) + bias): conv_forward's epilogue kernels */
void tfc_gpu_conv1d_forward(tfc_backend *be, const tfc_conv_desc *d, const float *x,
                            const float *w, const float *bias, int relu, float *y, void *ws)
{
    tfc_gpu_conv_forward(be, d, x, w, bias, NULL, NULL, relu ? TFC_ACT_RELU : TFC_ACT_LINEAR, y,
                         NULL, NULL, ws);
}

void tfc_gpu_conv1d_backward_data(tfc_backend *be, const tfc_conv_desc *d, const float *dy,
                                  const float *w, float *dx, int assign, void *ws)
{
    tfc_gpu_conv_run_data(be, d, 1, dy, w, dx, assign, ws);
}

void tfc_gpu_conv1d_backward_filter(tfc_backend *be, const tfc_conv_desc *d, const float *x,
                                    const float *dy, float *dw, void *ws)
{
    tfc_gpu_conv_run_filter(be, d, 1, x, dy, dw, ws);
}

/* ---- the mean over the unmasked steps ------------------------------------------------------ */

/* Threads of a masked-mean block: the channels rounded up to a warp, at most GPU_THREADS. */
static int mean_threads(int64_t per_block)
{
    return per_block >= GPU_THREADS ? GPU_THREADS : (int)((per_block + 31) / 32 * 32);
}

/* sum_s [m[s] != 0] over the t steps of one sequence, by the whole block (a multiple of 32
 * threads, at most GPU_THREADS); every thread gets the total. */
static __device__ int kept_steps(int t, const float *m)
{
    __shared__ int part[GPU_THREADS / 32];
    int k = 0;
    for (int s = threadIdx.x; s < t; s += blockDim.x) k += m[s] != 0.0f;
    k = warp_sum(k);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = k;
    __syncthreads();
    int total = 0;
    for (int j = 0; j < (int)(blockDim.x >> 5); j++) total += part[j];
    return total;
}

/* y[i, ch] = sum_s mask[i, s] x[i, s, ch] / sum_s mask[i, s]: block i, the kept steps added
 * in step order, then divided by their count (0/0 = NaN for a sequence without one). */
static __global__ void masked_mean_fwd(int t, int c, const float *x, const float *mask,
                                       float *y)
{
    const int64_t i = blockIdx.x;
    const float *m = mask + i * t;
    const float count = (float)kept_steps(t, m);
    for (int ch = threadIdx.x; ch < c; ch += blockDim.x) {
        float acc = 0.0f;
        for (int s = 0; s < t; s++)
            if (m[s] != 0.0f) acc += x[(i * t + s) * c + ch];
        y[i * c + ch] = acc / count;
    }
}

/* dx[i, s, ch] (+)= mask[i, s] dy[i, ch] / sum_s mask[i, s]: block i over its t c cells;
 * a masked step is left alone, or zeroed with assign. */
static __global__ void masked_mean_bwd(int t, int c, const float *dy, const float *mask,
                                       float *dx, int assign)
{
    const int64_t i = blockIdx.x;
    const float *m = mask + i * t;
    const float count = (float)kept_steps(t, m);
    float *dxi = dx + i * t * c;
    for (int64_t e = threadIdx.x; e < (int64_t)t * c; e += blockDim.x) {
        const int s = (int)(e / c), ch = (int)(e % c);
        if (m[s] == 0.0f) {
            if (assign) dxi[e] = 0.0f;
            continue;
        }
        dxi[e] = (assign ? 0.0f : dxi[e]) + dy[i * c + ch] / count;
    }
}

void tfc_gpu_masked_mean_forward(tfc_backend *be, int n, int t, int c, const float *x,
                                 const float *mask, float *y)
{
    gpu_ctx *g = gpu_of(be);
    if (n <= 0 || c <= 0) return;
    masked_mean_fwd<<<n, mean_threads(c), 0, g->stream>>>(t, c, x, mask, y);
    TFC_LAUNCH_CHECK(g, masked_mean_fwd);
}

void tfc_gpu_masked_mean_backward(tfc_backend *be, int n, int t, int c, const float *dy,
                                  const float *mask, float *dx, int assign)
{
    gpu_ctx *g = gpu_of(be);
    if (n <= 0 || t <= 0 || c <= 0) return;
    masked_mean_bwd<<<n, mean_threads((int64_t)t * c), 0, g->stream>>>(t, c, dy, mask, dx,
                                                                       assign);
    TFC_LAUNCH_CHECK(g, masked_mean_bwd);
}
