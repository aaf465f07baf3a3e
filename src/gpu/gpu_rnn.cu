/* What the recurrent layers share around their kernels on the GPU, as cpu_rnn.c: their
 * output and shifted states (gpu_lstm.cu, gpu_gru.cu), the input of a layer that goes
 * backwards or drops inputs out (one Philox mask per sequence, drawn with core/rng.h's very
 * function, so the bits match the CPU's) and Bidirectional's merge of its two directions.
 * One thread per element, each writing its own output: no races, the CPU's bits
 * (built with --fmad=false). */
#include "gpu/gpu_internal.cuh"

#define GRID_LOOP(i, n)                                                              \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);        \
         i += (int64_t)gridDim.x * blockDim.x)

/* hprev[i, s] = h[i, s - 1], 0 at s = 0 */
static __global__ void shift_kernel(int n, int T, int u, const float *hseq, float *hprev)
{
    GRID_LOOP(e, (int64_t)n * T * u)
    {
        const int64_t row = e / u;
        const int s = (int)(row % T);
        hprev[e] = s > 0 ? hseq[e - u] : 0.0f;
    }
}

void tfc_gpu_rnn_shift(tfc_backend *be, int n, int t, int u, const float *hseq, float *hprev)
{
    gpu_ctx *g = gpu_of(be);
    shift_kernel<<<gpu_blocks(g, (int64_t)n * t * u), GPU_THREADS, 0, g->stream>>>(n, t, u, hseq,
                                                                                 hprev);
    TFC_LAUNCH_CHECK(g, shift_kernel);
}

void tfc_gpu_rnn_output(tfc_backend *be, int n, int t, int u, int return_sequences,
                        const float *hseq, float *y)
{
    gpu_ctx *g = gpu_of(be);
    if (!return_sequences) {
        tfc_gpu_copy2d(be, n, u, hseq + (int64_t)(t - 1) * u, t * u, y, u, 0);
        return;
    }
    if (y != hseq)
        TFC_CUDA_TRY(g, cudaMemcpyAsync(y, hseq, (size_t)n * t * u * sizeof(float),
                                        cudaMemcpyDeviceToDevice, g->stream));
}

/* keep[i, c] = (u >= rate) / (1 - rate), u = uniform(key, step, i f + c); 1 at rate 0 */
static __device__ __forceinline__ float keep_of(int f, int64_t i, int c, float rate,
                                                float scale, uint64_t key, uint64_t step)
{
    if (rate <= 0.0f) return 1.0f;
    return tfc_rng_uniform(key, step, (uint64_t)i * f + c) >= rate ? scale : 0.0f;
}

/* Element e = (i, s, c) of `out`, s' = reverse ? t - 1 - s : s:
 *   forth:  out[i, s, c] = in[i, s', c] keep[i, c]
 *   back:   out[i, s, c] += in[i, s', c] keep[i, c]  (dx at s from dy at s') */
static __global__ void reorder_kernel(int n, int t, int f, int reverse, float rate, float scale,
                                      uint64_t key, uint64_t step, const uint64_t *step_off,
                                      const float *in, float *out, int accumulate)
{
    if (step_off) step += *step_off; /* gpu_step_offset */
    GRID_LOOP(e, (int64_t)n * t * f)
    {
        const int64_t row = e / f;
        const int c = (int)(e % f);
        const int64_t i = row / t;
        const int s = (int)(row % t);
        const int64_t src = (i * t + (reverse ? t - 1 - s : s)) * f + c;
        const float v = in[src] * keep_of(f, i, c, rate, scale, key, step);
        out[e] = accumulate ? out[e] + v : v;
    }
}

static void reorder(tfc_backend *be, int n, int t, int f, int reverse, float rate,
                    uint64_t key, uint64_t step, const float *in, float *out, int accumulate)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t total = (int64_t)n * t * f;
    if (total <= 0) return;
    const float scale = 1.0f / (1.0f - rate);
    reorder_kernel<<<gpu_blocks(g, total), GPU_THREADS, 0, g->stream>>>(
        n, t, f, reverse, rate, scale, key, step, gpu_step_offset(g), in, out, accumulate);
    TFC_LAUNCH_CHECK(g, reorder_kernel);
}

void tfc_gpu_rnn_input_forward(tfc_backend *be, int n, int t, int f, int reverse, float rate,
                               uint64_t key, uint64_t step, const float *x, float *y)
{
    reorder(be, n, t, f, reverse, rate, key, step, x, y, 0);
}

/* dx[i, s', :] += dy[i, s, :] keep: the reversal is its own inverse */
void tfc_gpu_rnn_input_backward(tfc_backend *be, int n, int t, int f, int reverse, float rate,
                                uint64_t key, uint64_t step, const float *dy, float *dx)
{
    reorder(be, n, t, f, reverse, rate, key, step, dy, dx, 1);
}

/* y[i, s] = merge(m a[i, s], m b[i, t - 1 - s]), m = mask[i, s] (1 without a mask); one
 * thread per (i, s, j) */
static __global__ void bidir_forward_kernel(int n, int t, int u, tfc_merge_mode mode,
                                            const float *mask, const float *a, const float *b,
                                            float *y)
{
    GRID_LOOP(e, (int64_t)n * t * u)
    {
        const int64_t row = e / u;
        const int j = (int)(e % u);
        const int64_t i = row / t;
        const int s = (int)(row % t);
        const float m = mask ? mask[row] : 1.0f;
        const float p = m * a[e], q = m * b[(i * t + (t - 1 - s)) * u + j];
        switch (mode) {
        case TFC_MERGE_CONCAT:
            y[row * 2 * u + j] = p;
            y[row * 2 * u + u + j] = q;
            break;
        case TFC_MERGE_SUM: y[e] = p + q; break;
        case TFC_MERGE_MUL: y[e] = p * q; break;
        case TFC_MERGE_AVE: y[e] = (p + q) * 0.5f; break;
        }
    }
}

/* da[i, s] = m dmerge/dp, db[i, t - 1 - s] = m dmerge/dq (p = m a, q = m b) */
static __global__ void bidir_backward_kernel(int n, int t, int u, tfc_merge_mode mode,
                                             const float *mask, const float *a, const float *b,
                                             const float *dy, float *da, float *db)
{
    GRID_LOOP(e, (int64_t)n * t * u)
    {
        const int64_t row = e / u;
        const int j = (int)(e % u);
        const int64_t i = row / t;
        const int s = (int)(row % t);
        const int64_t rb = (i * t + (t - 1 - s)) * u + j;
        const float m = mask ? mask[row] : 1.0f;
        const float *g = dy + row * (mode == TFC_MERGE_CONCAT ? 2 * u : u);
        float gp = g[j], gq = g[j];
        if (mode == TFC_MERGE_CONCAT)
            gq = g[u + j];
        else if (mode == TFC_MERGE_MUL)
            gp = g[j] * m * b[rb], gq = g[j] * m * a[e];
        else if (mode == TFC_MERGE_AVE)
            gp = gq = 0.5f * g[j];
        da[e] = m * gp;
        db[rb] = m * gq;
    }
}

void tfc_gpu_bidir_forward(tfc_backend *be, int n, int t, int u, tfc_merge_mode mode,
                           const float *mask, const float *a, const float *b, float *y)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t total = (int64_t)n * t * u;
    if (total <= 0) return;
    bidir_forward_kernel<<<gpu_blocks(g, total), GPU_THREADS, 0, g->stream>>>(n, t, u, mode,
                                                                              mask, a, b, y);
    TFC_LAUNCH_CHECK(g, bidir_forward_kernel);
}

void tfc_gpu_bidir_backward(tfc_backend *be, int n, int t, int u, tfc_merge_mode mode,
                            const float *mask, const float *a, const float *b, const float *dy,
                            float *da, float *db)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t total = (int64_t)n * t * u;
    if (total <= 0) return;
    bidir_backward_kernel<<<gpu_blocks(g, total), GPU_THREADS, 0, g->stream>>>(
        n, t, u, mode, mask, a, b, dy, da, db);
    TFC_LAUNCH_CHECK(g, bidir_backward_kernel);
}
