/* SimpleRNN on the GPU (core/backend.h, tfc_simple_rnn_desc), as cpu_simple_rnn.c but from
 * the GPU's own ops: x·K + b for every step in one GEMM, then per step pre_s += h_{s-1}·R
 * (cuBLAS on rows strided by t u), the step's rows copied out, act_forward on them and a
 * kernel that writes h_s (a masked row keeps h_{s-1}). Backward per step in reverse:
 * act_backward of dh into the step's ga, which a kernel keeps for the real rows (their dh
 * then 0) and zeroes for the masked ones (their dh passed on), then dh += ga_s·Rᵀ; the
 * weight gradients, dx and dbias after, over all n t rows. Not in the GPU's op table yet
 * (TFC_BACKEND_LAYER_OPS): tfc_gpu_test_enable_layer_ops puts it in for `make test-gpu`'s
 * case against the CPU; until that has passed on a GPU, SimpleRNN is refused there. */
#include "gpu/gpu_internal.cuh"

#define GRID_LOOP(i, n)                                                              \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);        \
         i += (int64_t)gridDim.x * blockDim.x)

/* Workspace (floats, each part padded to 64): ga [n t, u], h_prev [n t, u], dh, a, h and g
 * [n, u] each (a step's pre-activations, outputs and their gradient, contiguous). */
static size_t padded(int64_t floats)
{
    return (size_t)(floats + 63) / 64 * 64;
}

size_t tfc_gpu_simple_rnn_workspace(tfc_backend *be, const tfc_simple_rnn_desc *d)
{
    (void)be;
    const int64_t nt = (int64_t)d->n * d->t, u = d->units;
    return (2 * padded(nt * u) + 4 * padded((int64_t)d->n * u)) * sizeof(float);
}

/* h[i, s] = m ? a[i] : h[i, s - 1] (0 at s 0) */
static __global__ void step_kernel(int n, int T, int u, int s, const float *mask, const float *a,
                                   float *hseq)
{
    GRID_LOOP(e, (int64_t)n * u)
    {
        const int64_t i = e / u, j = e % u, row = i * T + s;
        const float prev = s > 0 ? hseq[(row - 1) * u + j] : 0.0f;
        hseq[row * u + j] = !mask || mask[row] != 0.0f ? a[e] : prev;
    }
}

/* ga[i, s] = m ? g[i] : 0; dh[i] = m ? 0 : dh[i] */
static __global__ void back_kernel(int n, int T, int u, int s, const float *mask, const float *g,
                                   float *ga, float *dh)
{
    GRID_LOOP(e, (int64_t)n * u)
    {
        const int64_t i = e / u, j = e % u, row = i * T + s;
        const int real = !mask || mask[row] != 0.0f;
        ga[row * u + j] = real ? g[e] : 0.0f;
        if (real) dh[e] = 0.0f;
    }
}

void tfc_gpu_simple_rnn_forward(tfc_backend *be, const tfc_simple_rnn_desc *d, const float *x,
                                const float *kernel, const float *rkernel, const float *bias,
                                const float *mask, float *y, float *hseq, float *pre, void *ws)
{
    gpu_ctx *g = gpu_of(be);
    const int n = d->n, T = d->t, u = d->units;
    if (n <= 0 || T <= 0 || u <= 0) return;
    const int64_t nt = (int64_t)n * T;
    float *a = (float *)ws + 2 * padded(nt * u) + padded((int64_t)n * u);
    tfc_gpu_gemm(be, 0, 0, (int)nt, u, d->in, 1.0f, x, d->in, kernel, u, 0.0f, pre, u);
    if (bias) tfc_gpu_bias_add(be, nt, u, bias, pre);
    for (int s = 0; s < T; s++) {
        if (s > 0)
            tfc_gpu_gemm(be, 0, 0, n, u, u, 1.0f, hseq + (int64_t)(s - 1) * u, T * u, rkernel,
                         u, 1.0f, pre + (int64_t)s * u, T * u);
        tfc_gpu_copy2d(be, n, u, pre + (int64_t)s * u, T * u, a, u, 0);
        tfc_gpu_act_forward(be, d->act, (int64_t)n * u, u, a, a);
        step_kernel<<<gpu_blocks(g, (int64_t)n * u), GPU_THREADS, 0, g->stream>>>(n, T, u, s,
                                                                                 mask, a, hseq);
        TFC_LAUNCH_CHECK(g, step_kernel);
    }
    tfc_gpu_rnn_output(be, n, T, u, d->return_sequences, hseq, y);
}

void tfc_gpu_simple_rnn_backward(tfc_backend *be, const tfc_simple_rnn_desc *d, const float *x,
                                 const float *kernel, const float *rkernel, const float *mask,
                                 const float *hseq, const float *pre, const float *dy,
                                 float *dx, float *dkernel, float *drkernel, float *dbias,
                                 void *ws)
{
    gpu_ctx *g = gpu_of(be);
    const int n = d->n, T = d->t, u = d->units;
    if (n <= 0 || T <= 0 || u <= 0) return;
    const int64_t nt = (int64_t)n * T, nu = (int64_t)n * u;
    float *ga = (float *)ws, *hp = ga + padded(nt * u), *dh = hp + padded(nt * u);
    float *a = dh + padded(nu), *h = a + padded(nu), *gr = h + padded(nu);
    TFC_CUDA_TRY(g, cudaMemsetAsync(dh, 0, (size_t)nu * sizeof(float), g->stream));
    for (int s = T - 1; s >= 0; s--) {
        if (d->return_sequences)
            tfc_gpu_copy2d(be, n, u, dy + (int64_t)s * u, T * u, dh, u, 1);
        else if (s == T - 1)
            tfc_gpu_axpy(be, nu, 1.0f, dy, dh);
        tfc_gpu_copy2d(be, n, u, pre + (int64_t)s * u, T * u, a, u, 0);
        tfc_gpu_copy2d(be, n, u, hseq + (int64_t)s * u, T * u, h, u, 0);
        tfc_gpu_act_backward(be, d->act, nu, u, a, h, dh, gr, 1);
        back_kernel<<<gpu_blocks(g, nu), GPU_THREADS, 0, g->stream>>>(n, T, u, s, mask, gr, ga,
                                                                     dh);
        TFC_LAUNCH_CHECK(g, back_kernel);
        if (s > 0)
            tfc_gpu_gemm(be, 0, 1, n, u, u, 1.0f, ga + (int64_t)s * u, T * u, rkernel, u, 1.0f,
                         dh, u);
    }
    tfc_gpu_rnn_shift(be, n, T, u, hseq, hp);
    tfc_gpu_gemm(be, 1, 0, d->in, u, (int)nt, 1.0f, x, d->in, ga, u, 1.0f, dkernel, u);
    tfc_gpu_gemm(be, 1, 0, u, u, (int)nt, 1.0f, hp, u, ga, u, 1.0f, drkernel, u);
    if (dx) tfc_gpu_gemm(be, 0, 1, (int)nt, d->in, u, 1.0f, ga, u, kernel, u, 1.0f, dx, d->in);
    if (dbias) tfc_gpu_bias_grad(be, nt, u, ga, dbias);
}
