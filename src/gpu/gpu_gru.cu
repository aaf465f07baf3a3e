/* GRU over a whole sequence on the GPU (Keras's formulation, gates z, r, h; backend.h),
 * structured as gpu_lstm.cu: one cuBLAS GEMM x·K for all steps into `gates` (rows 4u apart),
 * then per step a GEMM h_{s-1}·R (reset_before: h_{s-1}·R_zr, and (r h_{s-1})·R_h after the
 * gates) and a fused cell kernel; backward in reverse with fused cell-gradient kernels and
 * dh_{s-1} += gm_s·Rᵀ, then one GEMM per weight gradient and deterministic column sums. */
#include <math.h>

#include "gpu/gpu_internal.cuh"

#define GRID_LOOP(i, n)                                                              \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);        \
         i += (int64_t)gridDim.x * blockDim.x)

/* Workspace (floats, pieces 256-byte aligned): mr [n, 3u] (the forward's recurrent
 * products), gx and gm [n*t, 3u] (the pre-activations' gradients, input and recurrent side,
 * row i t + s for step s), hprev [n*t, u], dh [n, u], drh [n, u] (reset_before). */
typedef struct gru_ws {
    float *mr, *gx, *gm, *hprev, *dh, *drh;
} gru_ws;

static size_t piece(int64_t floats)
{
    return gpu_align((size_t)floats * sizeof(float));
}

size_t tfc_gpu_gru_workspace(tfc_backend *be, const tfc_gru_desc *d)
{
    const int64_t n = d->n, nt = n * d->t, u = d->units;
    return piece(n * 3 * u) + 2 * piece(nt * 3 * u) + piece(nt * u) + 2 * piece(n * u);
}

static gru_ws carve(const tfc_gru_desc *d, void *ws)
{
    const int64_t n = d->n, nt = n * d->t, u = d->units;
    char *b = (char *)ws;
    gru_ws w;
    w.mr = (float *)b;
    w.gx = (float *)(b += piece(n * 3 * u));
    w.gm = (float *)(b += piece(nt * 3 * u));
    w.hprev = (float *)(b += piece(nt * 3 * u));
    w.dh = (float *)(b += piece(nt * u));
    w.drh = (float *)(b + piece(n * u));
    return w;
}

static __device__ __forceinline__ float sigm(float v)
{
    return 1.0f / (1.0f + expf(-v));
}

/* reset_after, step s, every (sequence i, unit j); g = x·K's three parts, bx the input bias
 * (bias row 0), mr = h_{s-1}·R (absent at s = 0) plus b' (bias row 1):
 *   z = σ(g_z + bx_z + mr_z), r = σ(g_r + bx_r + mr_r), a = mr_h,
 *   hh = tanh(g_h + bx_h + r a),  h = z h_prev + (1 - z) hh
 * gates get z, r, hh, a; a masked step keeps h_prev (zero before the first step). */
static __global__ void cell_after_kernel(int n, int T, int u, int s, const float *bias,
                                         const float *mr, const float *mask, float *gates,
                                         float *hseq)
{
    GRID_LOOP(e, (int64_t)n * u)
    {
        const int64_t i = e / u;
        const int j = (int)(e % u);
        const int64_t row = i * T + s;
        float *g = gates + row * 4 * u;
        const float *m = mr + i * 3 * u;
        float bx[3] = {0.0f, 0.0f, 0.0f}, mv[3];
        for (int k = 0; k < 3; k++) {
            mv[k] = s > 0 ? m[k * u + j] : 0.0f;
            if (!bias) continue;
            bx[k] = bias[k * u + j];
            mv[k] = mv[k] + bias[(3 + k) * u + j];
        }
        const float hp = s > 0 ? hseq[(row - 1) * u + j] : 0.0f;
        const float z = sigm(g[j] + bx[0] + mv[0]);
        const float r = sigm(g[u + j] + bx[1] + mv[1]);
        const float a = mv[2];
        const float hh = tanhf(g[2 * u + j] + bx[2] + r * a);
        g[j] = z, g[u + j] = r, g[2 * u + j] = hh, g[3 * u + j] = a;
        const bool real = !mask || mask[row] != 0.0f;
        hseq[row * u + j] = real ? z * hp + (1.0f - z) * hh : hp;
    }
}

/* reset_before, step s, the gates: mr's first 2u columns = h_{s-1}·R_zr (absent at s = 0),
 *   z = σ(g_z + b_z + mr_z), r = σ(g_r + b_r + mr_r);  gates get z, r and r h_prev. */
static __global__ void cell_gates_kernel(int n, int T, int u, int s, const float *bias,
                                         const float *mr, float *gates, const float *hseq)
{
    GRID_LOOP(e, (int64_t)n * u)
    {
        const int64_t i = e / u;
        const int j = (int)(e % u);
        const int64_t row = i * T + s;
        float *g = gates + row * 4 * u;
        const float *m = mr + i * 3 * u;
        const float bz = bias ? bias[j] : 0.0f, br = bias ? bias[u + j] : 0.0f;
        const float mz = s > 0 ? m[j] : 0.0f, mrr = s > 0 ? m[u + j] : 0.0f;
        const float hp = s > 0 ? hseq[(row - 1) * u + j] : 0.0f;
        const float z = sigm(g[j] + bz + mz), r = sigm(g[u + j] + br + mrr);
        g[j] = z, g[u + j] = r, g[3 * u + j] = r * hp;
    }
}

/* reset_before, step s, the state: mr's last u columns = (r h_{s-1})·R_h (absent at s = 0),
 *   hh = tanh(g_h + b_h + mr_h),  h = z h_prev + (1 - z) hh  (masked: h_prev). */
static __global__ void cell_state_kernel(int n, int T, int u, int s, const float *bias,
                                         const float *mr, const float *mask, float *gates,
                                         float *hseq)
{
    GRID_LOOP(e, (int64_t)n * u)
    {
        const int64_t i = e / u;
        const int j = (int)(e % u);
        const int64_t row = i * T + s;
        float *g = gates + row * 4 * u;
        const float bh = bias ? bias[2 * u + j] : 0.0f;
        const float mh = s > 0 ? mr[i * 3 * u + 2 * u + j] : 0.0f;
        const float hp = s > 0 ? hseq[(row - 1) * u + j] : 0.0f;
        const float z = g[j];
        const float hh = tanhf(g[2 * u + j] + bh + mh);
        g[2 * u + j] = hh;
        const bool real = !mask || mask[row] != 0.0f;
        hseq[row * u + j] = real ? z * hp + (1.0f - z) * hh : hp;
    }
}

/* x [n, t, in], kernel [in, 3u], rkernel [u, 3u], bias [2, 3u] / [3u] / NULL, mask [n, t]
 * or NULL; y [n, t, u] (may be hseq) or [n, u]; hseq [n, t, u]; gates [n, t, 4u]. */
void tfc_gpu_gru_forward(tfc_backend *be, const tfc_gru_desc *d, const float *x,
                         const float *kernel, const float *rkernel, const float *bias,
                         const float *mask, float *y, float *hseq, float *gates, void *ws)
{
    gpu_ctx *g = gpu_of(be);
    const int n = d->n, T = d->t, u = d->units, G = 3 * u;
    if (n <= 0 || T <= 0 || u <= 0) return;
    gru_ws w = carve(d, ws);
    tfc_gpu_gemm(be, 0, 0, n * T, G, d->in, 1.0f, x, d->in, kernel, G, 0.0f, gates, 4 * u);
    const int blocks = gpu_blocks(g, (int64_t)n * u);
    for (int s = 0; s < T; s++) {
        const float *hp = hseq + (int64_t)(s > 0 ? s - 1 : 0) * u; /* h_{s-1}, s > 0 */
        if (d->reset_after) {
            if (s > 0) /* mr = h_{s-1}·R */
                tfc_gpu_gemm(be, 0, 0, n, G, u, 1.0f, hp, T * u, rkernel, G, 0.0f, w.mr, G);
            cell_after_kernel<<<blocks, GPU_THREADS, 0, g->stream>>>(n, T, u, s, bias, w.mr,
                                                                     mask, gates, hseq);
            TFC_LAUNCH_CHECK(g, cell_after_kernel);
            continue;
        }
        if (s > 0) /* mr_zr = h_{s-1}·R_zr */
            tfc_gpu_gemm(be, 0, 0, n, 2 * u, u, 1.0f, hp, T * u, rkernel, G, 0.0f, w.mr, G);
        cell_gates_kernel<<<blocks, GPU_THREADS, 0, g->stream>>>(n, T, u, s, bias, w.mr, gates,
                                                                 hseq);
        TFC_LAUNCH_CHECK(g, cell_gates_kernel);
        if (s > 0) /* mr_h = (r h_{s-1})·R_h */
            tfc_gpu_gemm(be, 0, 0, n, u, u, 1.0f, gates + (int64_t)s * 4 * u + 3 * u, T * 4 * u,
                         rkernel + 2 * u, G, 0.0f, w.mr + 2 * u, G);
        cell_state_kernel<<<blocks, GPU_THREADS, 0, g->stream>>>(n, T, u, s, bias, w.mr, mask,
                                                                 gates, hseq);
        TFC_LAUNCH_CHECK(g, cell_state_kernel);
    }
    tfc_gpu_rnn_output(be, n, T, u, d->return_sequences, hseq, y);
}

/* dh of sequence i at step s: the running gradient plus this step's output gradient (dy at
 * s with return_sequences, else dy at the last step only). */
static __device__ __forceinline__ float take_dy(int T, int u, int s, int return_sequences,
                                                const float *dy, const float *dh, int64_t e,
                                                int64_t row, int j)
{
    if (return_sequences) return dh[e] + dy[row * u + j];
    return s == T - 1 ? dh[e] + dy[e] : dh[e];
}

/* reset_after, step s in reverse, with d = dh and dhh = d (1 - z):
 *   ah = dhh (1 - hh^2),  az = d (h_prev - hh) z (1 - z),  ar = ah a r (1 - r),
 *   gx = (az, ar, ah),  gm = (az, ar, ah r),  dh_prev = d z (+ gm·Rᵀ, the caller's GEMM).
 * A masked step passes dh through and has zero gx and gm. */
static __global__ void back_after_kernel(int n, int T, int u, int s, int return_sequences,
                                         const float *dy, const float *gates, const float *hseq,
                                         const float *mask, float *dh, float *gx, float *gm)
{
    GRID_LOOP(e, (int64_t)n * u)
    {
        const int64_t i = e / u;
        const int j = (int)(e % u);
        const int64_t row = i * T + s;
        const float d = take_dy(T, u, s, return_sequences, dy, dh, e, row, j);
        float *x3 = gx + row * 3 * u, *m3 = gm + row * 3 * u;
        if (mask && mask[row] == 0.0f) {
            x3[j] = x3[u + j] = x3[2 * u + j] = 0.0f;
            m3[j] = m3[u + j] = m3[2 * u + j] = 0.0f;
            dh[e] = d;
            continue;
        }
        const float *g = gates + row * 4 * u;
        const float z = g[j], r = g[u + j], hh = g[2 * u + j], a = g[3 * u + j];
        const float hp = s > 0 ? hseq[(row - 1) * u + j] : 0.0f;
        const float ah = d * (1.0f - z) * (1.0f - hh * hh);
        const float az = d * (hp - hh) * z * (1.0f - z), ar = ah * a * r * (1.0f - r);
        x3[j] = m3[j] = az;
        x3[u + j] = m3[u + j] = ar;
        x3[2 * u + j] = ah;
        m3[2 * u + j] = ah * r;
        dh[e] = d * z;
    }
}

/* reset_before, step s in reverse, first half: dh takes this step's dy, and gx's h part
 *   ah = dh (1 - z)(1 - hh^2)  (0 when masked). */
static __global__ void back_state_kernel(int n, int T, int u, int s, int return_sequences,
                                         const float *dy, const float *gates, const float *mask,
                                         float *dh, float *gx)
{
    GRID_LOOP(e, (int64_t)n * u)
    {
        const int64_t i = e / u;
        const int j = (int)(e % u);
        const int64_t row = i * T + s;
        const float d = take_dy(T, u, s, return_sequences, dy, dh, e, row, j);
        const float *g = gates + row * 4 * u;
        const bool real = !mask || mask[row] != 0.0f;
        const float z = g[j], hh = g[2 * u + j];
        gx[row * 3 * u + 2 * u + j] = real ? d * (1.0f - z) * (1.0f - hh * hh) : 0.0f;
        dh[e] = d;
    }
}

/* reset_before, second half, with drh = ah·R_hᵀ (the gradient of r h_prev):
 *   az = dh (h_prev - hh) z (1 - z),  ar = drh h_prev r (1 - r),  gx = gm = (az, ar, .),
 *   gm_h = 0,  dh_prev = dh z + drh r (+ gm·R_zrᵀ, the caller's GEMM). Masked: dh passes,
 *   gx's z, r and all of gm are zero. */
static __global__ void back_gates_kernel(int n, int T, int u, int s, const float *gates,
                                         const float *hseq, const float *mask,
                                         const float *drh, float *dh, float *gx, float *gm)
{
    GRID_LOOP(e, (int64_t)n * u)
    {
        const int64_t i = e / u;
        const int j = (int)(e % u);
        const int64_t row = i * T + s;
        float *x3 = gx + row * 3 * u, *m3 = gm + row * 3 * u;
        m3[2 * u + j] = 0.0f;
        if (mask && mask[row] == 0.0f) {
            x3[j] = x3[u + j] = m3[j] = m3[u + j] = 0.0f;
            continue;
        }
        const float *g = gates + row * 4 * u;
        const float z = g[j], r = g[u + j], hh = g[2 * u + j], d = dh[e], q = drh[e];
        const float hp = s > 0 ? hseq[(row - 1) * u + j] : 0.0f;
        const float az = d * (hp - hh) * z * (1.0f - z), ar = q * hp * r * (1.0f - r);
        x3[j] = m3[j] = az;
        x3[u + j] = m3[u + j] = ar;
        dh[e] = d * z + q * r;
    }
}

/* dy [n, t, u] or [n, u]; dx [n, t, in] (NULL: no input gradient), dkernel, drkernel,
 * dbias (NULL without bias) accumulate. */
void tfc_gpu_gru_backward(tfc_backend *be, const tfc_gru_desc *d, const float *x,
                          const float *kernel, const float *rkernel, const float *mask,
                          const float *hseq, const float *gates, const float *dy, float *dx,
                          float *dkernel, float *drkernel, float *dbias, void *ws)
{
    gpu_ctx *g = gpu_of(be);
    const int n = d->n, T = d->t, u = d->units, G = 3 * u, ra = d->reset_after;
    if (n <= 0 || T <= 0 || u <= 0) return;
    const int64_t NT = (int64_t)n * T;
    gru_ws w = carve(d, ws);
    TFC_CUDA_TRY(g, cudaMemsetAsync(w.dh, 0, (size_t)n * u * sizeof(float), g->stream));
    const int blocks = gpu_blocks(g, (int64_t)n * u);
    const int rs = d->return_sequences;
    for (int s = T - 1; s >= 0; s--) {
        float *gm_s = w.gm + (int64_t)s * G;
        if (ra) {
            back_after_kernel<<<blocks, GPU_THREADS, 0, g->stream>>>(
                n, T, u, s, rs, dy, gates, hseq, mask, w.dh, w.gx, w.gm);
            TFC_LAUNCH_CHECK(g, back_after_kernel);
        } else {
            back_state_kernel<<<blocks, GPU_THREADS, 0, g->stream>>>(n, T, u, s, rs, dy, gates,
                                                                     mask, w.dh, w.gx);
            TFC_LAUNCH_CHECK(g, back_state_kernel);
            /* drh = ah·R_hᵀ */
            tfc_gpu_gemm(be, 0, 1, n, u, u, 1.0f, w.gx + (int64_t)s * G + 2 * u, T * G,
                         rkernel + 2 * u, G, 0.0f, w.drh, u);
            back_gates_kernel<<<blocks, GPU_THREADS, 0, g->stream>>>(
                n, T, u, s, gates, hseq, mask, w.drh, w.dh, w.gx, w.gm);
            TFC_LAUNCH_CHECK(g, back_gates_kernel);
        }
        /* dh_{s-1} += gm_s·Rᵀ (reset_before: its z, r part·R_zrᵀ) */
        if (s > 0)
            tfc_gpu_gemm(be, 0, 1, n, u, ra ? G : 2 * u, 1.0f, gm_s, T * G, rkernel, G, 1.0f,
                         w.dh, u);
    }
    tfc_gpu_rnn_shift(be, n, T, u, hseq, w.hprev);
    /* drkernel += h_prevᵀ·gm (reset_before: R_zr's columns; R_h's += (r h_prev)ᵀ·gx_h),
     * dkernel += xᵀ·gx, dx += gx·Kᵀ */
    tfc_gpu_gemm(be, 1, 0, u, ra ? G : 2 * u, (int)NT, 1.0f, w.hprev, u, w.gm, G, 1.0f,
                 drkernel, G);
    if (!ra)
        tfc_gpu_gemm(be, 1, 0, u, u, (int)NT, 1.0f, gates + 3 * u, 4 * u, w.gx + 2 * u, G, 1.0f,
                     drkernel + 2 * u, G);
    tfc_gpu_gemm(be, 1, 0, d->in, G, (int)NT, 1.0f, x, d->in, w.gx, G, 1.0f, dkernel, G);
    if (dx) tfc_gpu_gemm(be, 0, 1, (int)NT, d->in, G, 1.0f, w.gx, G, kernel, G, 1.0f, dx, d->in);
    if (!dbias) return;
    /* [input; recurrent] with reset_after, else the input side alone */
    tfc_gpu_bias_grad(be, NT, G, w.gx, dbias);
    if (ra) tfc_gpu_bias_grad(be, NT, G, w.gm, dbias + G);
}
