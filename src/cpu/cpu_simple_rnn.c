/* CPU SimpleRNN over a whole sequence (Keras's SimpleRNNCell; see backend.h):
 *   a_t = x_t K + h_{t-1} R + b,   h_t = act(a_t).
 * Forward: x·K + b for every step at once into `pre`, then per step pre_s += h_{s-1}·R (one
 * GEMM over the batch's rows, strided by t u) and each unmasked row's activation. Backward
 * walks the steps in reverse: ga_s = act'(a_s) dh (0 at a masked step, whose dh passes on
 * unchanged), dh_{s-1} = ga_s·Rᵀ; then dkernel += xᵀ·ga, drkernel += h_prevᵀ·ga, dx += ga·Kᵀ
 * as GEMMs over all n t rows, and dbias the columns of ga summed in double in row order.
 * Each element is written by one thread, in an order fixed by the shape; the GEMMs' bits
 * repeat for a given thread count (tfc_cpu_gemm's, as a Dense layer's). */
#include "cpu/cpu_internal.h"

/* Workspace (floats): ga [n t, u]; h_prev [n t, u] (hseq one step back, zeros at step 0);
 * dh [n, u]; then dbias's sums, double [u]. */
size_t tfc_cpu_simple_rnn_workspace(tfc_backend *be, const tfc_simple_rnn_desc *d)
{
    (void)be;
    const int64_t nt = (int64_t)d->n * d->t, u = d->units;
    return (size_t)(2 * tfc_cpu_padded(nt * u) + tfc_cpu_padded((int64_t)d->n * u)) *
               sizeof(float) +
           (size_t)u * sizeof(double);
}

/* Whether row (i, s) is a real step */
static int real(const float *mask, int64_t row)
{
    return !mask || mask[row] != 0.0f;
}

void tfc_cpu_simple_rnn_forward(tfc_backend *be, const tfc_simple_rnn_desc *d, const float *x,
                                const float *kernel, const float *rkernel, const float *bias,
                                const float *mask, float *y, float *hseq, float *pre, void *ws)
{
    (void)ws;
    const int n = d->n, T = d->t, u = d->units;
    if (n <= 0 || T <= 0 || u <= 0) return;
    const int64_t nt = (int64_t)n * T;
    tfc_cpu_gemm(be, 0, 0, (int)nt, u, d->in, 1.0f, x, d->in, kernel, u, 0.0f, pre, u);
    if (bias) tfc_cpu_bias_add(be, nt, u, bias, pre);
    const int threads = tfc_cpu_threads(be, (int64_t)n * u);
    for (int s = 0; s < T; s++) {
        if (s > 0) /* pre_s += h_{s-1}·R */
            tfc_cpu_gemm(be, 0, 0, n, u, u, 1.0f, hseq + (int64_t)(s - 1) * u, T * u, rkernel,
                         u, 1.0f, pre + (int64_t)s * u, T * u);
        TFC_CPU_FOR(n, threads, for (int i = 0; i < n; i++) {
            const int64_t row = (int64_t)i * T + s;
            float *h = hseq + row * u;
            if (real(mask, row)) tfc_cpu_act_forward_serial(d->act, u, u, pre + row * u, h);
            else if (s > 0) memcpy(h, h - u, (size_t)u * sizeof(float));
            else memset(h, 0, (size_t)u * sizeof(float));
        });
    }
    tfc_cpu_rnn_output(n, T, u, d->return_sequences, hseq, y);
}

void tfc_cpu_simple_rnn_backward(tfc_backend *be, const tfc_simple_rnn_desc *d, const float *x,
                                 const float *kernel, const float *rkernel, const float *mask,
                                 const float *hseq, const float *pre, const float *dy,
                                 float *dx, float *dkernel, float *drkernel, float *dbias,
                                 void *ws)
{
    const int n = d->n, T = d->t, u = d->units;
    if (n <= 0 || T <= 0 || u <= 0) return;
    const int64_t nt = (int64_t)n * T;
    float *ga = ws, *hp = ga + tfc_cpu_padded(nt * u), *dh = hp + tfc_cpu_padded(nt * u);
    double *db = (double *)(dh + tfc_cpu_padded((int64_t)n * u));
    memset(dh, 0, (size_t)n * u * sizeof(float));
    for (int s = T - 1; s >= 0; s--) {
        /* one sequence at a time: act_backward picks its own threads from its size */
        for (int i = 0; i < n; i++) {
            const int64_t row = (int64_t)i * T + s;
            float *dhi = dh + (int64_t)i * u, *g = ga + row * u;
            tfc_cpu_rnn_add_dy(n, T, u, d->return_sequences, i, s, dy, dhi);
            if (!real(mask, row)) {
                memset(g, 0, (size_t)u * sizeof(float));
                continue;
            }
            tfc_cpu_act_backward(be, d->act, u, u, pre + row * u, hseq + row * u, dhi, g, 1);
            memset(dhi, 0, (size_t)u * sizeof(float));
        }
        if (s > 0) /* dh_{s-1} += ga_s·Rᵀ */
            tfc_cpu_gemm(be, 0, 1, n, u, u, 1.0f, ga + (int64_t)s * u, T * u, rkernel, u, 1.0f,
                         dh, u);
    }
    for (int i = 0; i < n; i++) {
        const int64_t row = (int64_t)i * T;
        memset(hp + row * u, 0, (size_t)u * sizeof(float));
        if (T > 1)
            memcpy(hp + (row + 1) * u, hseq + row * u, (size_t)(T - 1) * u * sizeof(float));
    }
    tfc_cpu_gemm(be, 1, 0, d->in, u, (int)nt, 1.0f, x, d->in, ga, u, 1.0f, dkernel, u);
    tfc_cpu_gemm(be, 1, 0, u, u, (int)nt, 1.0f, hp, u, ga, u, 1.0f, drkernel, u);
    if (dx) tfc_cpu_gemm(be, 0, 1, (int)nt, d->in, u, 1.0f, ga, u, kernel, u, 1.0f, dx, d->in);
    if (dbias) {
        memset(db, 0, (size_t)u * sizeof(double));
        for (int64_t r = 0; r < nt; r++) tfc_cpu_sum_row(u, ga + r * u, db);
        tfc_cpu_block_sums(1, u, u, db, dbias);
    }
}
