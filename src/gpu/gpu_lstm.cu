/* LSTM over a whole sequence on the GPU (Keras's formulation, gates i, f, c, o; backend.h),
 * structured as cpu_lstm.c: one cuBLAS GEMM x·K for all steps, then per step a GEMM h·R into
 * that step's slice (rows strided by t·4u) and a fused cell kernel; backward in reverse with
 * a fused cell-gradient kernel and dh = dgates·Rᵀ, then one GEMM or column sum per weight
 * gradient over all n·t rows. */
#include <math.h>

#include "gpu/gpu_internal.cuh"

#define GRID_LOOP(i, n)                                                              \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);        \
         i += (int64_t)gridDim.x * blockDim.x)

/* Workspace (floats, pieces 256-byte aligned): dgates [n*t, 4u], hprev [n*t, u], dh [n, u],
 * dc [n, u]. */
typedef struct lstm_ws {
    float *dgates, *hprev, *dh, *dc;
} lstm_ws;

static size_t piece(int64_t floats)
{
    return gpu_align((size_t)floats * sizeof(float));
}

size_t tfc_gpu_lstm_workspace(tfc_backend *be, const tfc_lstm_desc *d)
{
    const int64_t nt = (int64_t)d->n * d->t, u = d->units;
    return piece(nt * 4 * u) + piece(nt * u) + 2 * piece((int64_t)d->n * u);
}

static lstm_ws carve(const tfc_lstm_desc *d, void *ws)
{
    const int64_t nt = (int64_t)d->n * d->t, u = d->units;
    char *b = (char *)ws;
    lstm_ws w;
    w.dgates = (float *)b;
    w.hprev = (float *)(b + piece(nt * 4 * u));
    w.dh = (float *)(b + piece(nt * 4 * u) + piece(nt * u));
    w.dc = (float *)(b + piece(nt * 4 * u) + piece(nt * u) + piece((int64_t)d->n * u));
    return w;
}

static __device__ __forceinline__ float sigm(float v)
{
    return 1.0f / (1.0f + expf(-v));
}

/* Step s for every (sequence i, unit j): pre-activations in gates, activations i, f, g, o
 * out; c = f c_prev + i g, h = o tanh(c); a masked step keeps c_prev and h_prev (zero
 * before the first step). */
static __global__ void cell_forward_kernel(int n, int T, int u, int s, float *gates, float *hseq,
                                    float *cseq, const float *mask)
{
    GRID_LOOP(e, (int64_t)n * u)
    {
        const int64_t i = e / u;
        const int j = (int)(e % u);
        const int64_t row = i * T + s;
        float *z = gates + row * 4 * u;
        const float hp = s > 0 ? hseq[(row - 1) * u + j] : 0.0f;
        const float cp = s > 0 ? cseq[(row - 1) * u + j] : 0.0f;
        const float ig = sigm(z[j]), fg = sigm(z[u + j]);
        const float gg = tanhf(z[2 * u + j]), og = sigm(z[3 * u + j]);
        z[j] = ig;
        z[u + j] = fg;
        z[2 * u + j] = gg;
        z[3 * u + j] = og;
        const float cn = fg * cp + ig * gg;
        const float hn = og * tanhf(cn);
        const bool real = !mask || mask[row] != 0.0f;
        cseq[row * u + j] = real ? cn : cp;
        hseq[row * u + j] = real ? hn : hp;
    }
}

/* Step s in reverse. dh first takes this step's output gradient (dy at s with
 * return_sequences, else dy at the last step only). With tc = tanh(c):
 *   do = dh tc,  dc += dh o (1 - tc^2),  di = dc g,  dg = dc i,  df = dc c_prev,
 *   dc_prev = dc f,  through the activations dz = (di i(1-i), df f(1-f), dg (1-g^2),
 *   do o(1-o)); dh is consumed (zeroed). A masked step passes dh and dc through and has
 *   zero dgates. */
static __global__ void cell_backward_kernel(int n, int T, int u, int s, int return_sequences,
                                     const float *dy, const float *gates, const float *cseq,
                                     const float *mask, float *dh, float *dc, float *dgates)
{
    GRID_LOOP(e, (int64_t)n * u)
    {
        const int64_t i = e / u;
        const int j = (int)(e % u);
        const int64_t row = i * T + s;
        float h = dh[e];
        if (return_sequences)
            h = h + dy[row * u + j];
        else if (s == T - 1)
            h = h + dy[e];
        float *dz = dgates + row * 4 * u;
        if (mask && mask[row] == 0.0f) {
            dz[j] = dz[u + j] = dz[2 * u + j] = dz[3 * u + j] = 0.0f;
            dh[e] = h;
            continue;
        }
        const float *g = gates + row * 4 * u;
        const float ig = g[j], fg = g[u + j], gg = g[2 * u + j], og = g[3 * u + j];
        const float cp = s > 0 ? cseq[(row - 1) * u + j] : 0.0f;
        const float tc = tanhf(cseq[row * u + j]);
        const float dog = h * tc;
        const float dcj = dc[e] + h * og * (1.0f - tc * tc);
        dz[j] = dcj * gg * ig * (1.0f - ig);
        dz[u + j] = dcj * cp * fg * (1.0f - fg);
        dz[2 * u + j] = dcj * ig * (1.0f - gg * gg);
        dz[3 * u + j] = dog * og * (1.0f - og);
        dc[e] = dcj * fg;
        dh[e] = 0.0f;
    }
}

/* x [n, t, in], kernel [in, 4u], rkernel [u, 4u], bias [4u] or NULL, mask [n, t] or NULL;
 * y [n, t, u] (may be hseq) or [n, u]; hseq, cseq [n, t, u]; gates [n, t, 4u]. */
void tfc_gpu_lstm_forward(tfc_backend *be, const tfc_lstm_desc *d, const float *x,
                          const float *kernel, const float *rkernel, const float *bias,
                          const float *mask, float *y, float *hseq, float *cseq, float *gates,
                          void *ws)
{
    gpu_ctx *g = gpu_of(be);
    const int n = d->n, T = d->t, u = d->units, G = 4 * u;
    if (n <= 0 || T <= 0 || u <= 0) return;
    tfc_gpu_gemm(be, 0, 0, n * T, G, d->in, 1.0f, x, d->in, kernel, G, 0.0f, gates, G);
    if (bias) tfc_gpu_bias_add(be, (int64_t)n * T, G, bias, gates);
    const int blocks = gpu_blocks(g, (int64_t)n * u);
    for (int s = 0; s < T; s++) {
        if (s > 0)
            tfc_gpu_gemm(be, 0, 0, n, G, u, 1.0f, hseq + (int64_t)(s - 1) * u, T * u, rkernel, G,
                         1.0f, gates + (int64_t)s * G, T * G);
        cell_forward_kernel<<<blocks, GPU_THREADS, 0, g->stream>>>(n, T, u, s, gates, hseq, cseq,
                                                                   mask);
        TFC_LAUNCH_CHECK(g, cell_forward_kernel);
    }
    tfc_gpu_rnn_output(be, n, T, u, d->return_sequences, hseq, y);
}

/* dy [n, t, u] or [n, u]; dx [n, t, in] (NULL: no input gradient), dkernel, drkernel, dbias
 * (NULL without bias) accumulate. */
void tfc_gpu_lstm_backward(tfc_backend *be, const tfc_lstm_desc *d, const float *x,
                           const float *kernel, const float *rkernel, const float *mask,
                           const float *hseq, const float *cseq, const float *gates,
                           const float *dy, float *dx, float *dkernel, float *drkernel,
                           float *dbias, void *ws)
{
    gpu_ctx *g = gpu_of(be);
    const int n = d->n, T = d->t, u = d->units, G = 4 * u;
    if (n <= 0 || T <= 0 || u <= 0) return;
    lstm_ws w = carve(d, ws);
    TFC_CUDA_TRY(g, cudaMemsetAsync(w.dh, 0, (size_t)n * u * sizeof(float), g->stream));
    TFC_CUDA_TRY(g, cudaMemsetAsync(w.dc, 0, (size_t)n * u * sizeof(float), g->stream));
    const int blocks = gpu_blocks(g, (int64_t)n * u);
    for (int s = T - 1; s >= 0; s--) {
        cell_backward_kernel<<<blocks, GPU_THREADS, 0, g->stream>>>(
            n, T, u, s, d->return_sequences, dy, gates, cseq, mask, w.dh, w.dc, w.dgates);
        TFC_LAUNCH_CHECK(g, cell_backward_kernel);
        /* dh_{s-1} += dz_s · Rᵀ */
        if (s > 0)
            tfc_gpu_gemm(be, 0, 1, n, u, G, 1.0f, w.dgates + (int64_t)s * G, T * G, rkernel, G,
                         1.0f, w.dh, u);
    }
    tfc_gpu_rnn_shift(be, n, T, u, hseq, w.hprev);
    tfc_gpu_gemm(be, 1, 0, u, G, n * T, 1.0f, w.hprev, u, w.dgates, G, 1.0f, drkernel, G);
    tfc_gpu_gemm(be, 1, 0, d->in, G, n * T, 1.0f, x, d->in, w.dgates, G, 1.0f, dkernel, G);
    if (dx)
        tfc_gpu_gemm(be, 0, 1, n * T, d->in, G, 1.0f, w.dgates, G, kernel, G, 1.0f, dx, d->in);
    if (dbias) tfc_gpu_bias_grad(be, (int64_t)n * T, G, w.dgates, dbias);
}
