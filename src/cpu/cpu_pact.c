/* CPU kernels of Keras's parametrised activation layers (core/backend.h, tfc_pact_desc):
 * ReLU with max_value, negative_slope or threshold, LeakyReLU, ELU with alpha, and PReLU
 * with its learned slopes. The forward passes follow keras.activations' order of operations
 * (relu: the negative part is max(threshold - x, 0), scaled and subtracted), so they round
 * as Keras does: tfc_pact and tfc_pact_grad (core/backend.h), which the GPU's kernels share.
 * Each element is independent and PReLU's slope gradient is summed per column in row order:
 * the results never depend on the thread count. */
#include <math.h>

#include "cpu/cpu_internal.h"

void tfc_cpu_pact_forward(tfc_backend *be, const tfc_pact_desc *d, int64_t n, const float *x,
                          float *y)
{
    const tfc_pact_desc k = *d;
    int nt = tfc_cpu_threads(be, n);
    TFC_CPU_FOR(n, nt, for (int64_t i = 0; i < n; i++) y[i] = tfc_pact(&k, x[i]););
}

void tfc_cpu_pact_backward(tfc_backend *be, const tfc_pact_desc *d, int64_t n, const float *x,
                           const float *dy, float *dx)
{
    const tfc_pact_desc k = *d;
    int nt = tfc_cpu_threads(be, n);
    TFC_CPU_FOR(n, nt,
                for (int64_t i = 0; i < n; i++) dx[i] += tfc_pact_grad(&k, x[i]) * dy[i];);
}

/* y = x > 0 ? x : alpha x, alpha broadcast over the rows */
void tfc_cpu_prelu_forward(tfc_backend *be, int64_t rows, int cols, const float *x,
                           const float *alpha, float *y)
{
    int nt = tfc_cpu_threads(be, rows * cols);
    TFC_CPU_FOR(rows, nt, for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        _Pragma("omp simd")
        for (int c = 0; c < cols; c++) yr[c] = xr[c] > 0.0f ? xr[c] : alpha[c] * xr[c];
    });
}

/* dx += (x > 0 ? 1 : alpha) dy over the rows; dalpha[c] += sum_r min(x, 0) dy, each column
 * summed in double in row order by the thread that owns it */
void tfc_cpu_prelu_backward(tfc_backend *be, int64_t rows, int cols, const float *x,
                            const float *alpha, const float *dy, float *dx, float *dalpha)
{
    int nt = tfc_cpu_threads(be, rows * cols);
    if (dx)
        TFC_CPU_FOR(rows, nt, for (int64_t r = 0; r < rows; r++) {
            const float *xr = x + r * cols, *dyr = dy + r * cols;
            float *dxr = dx + r * cols;
            _Pragma("omp simd")
            for (int c = 0; c < cols; c++) dxr[c] += (xr[c] > 0.0f ? 1.0f : alpha[c]) * dyr[c];
        });
    int ct = cols < nt ? cols : nt;
    TFC_CPU_FOR(cols, ct, for (int c = 0; c < cols; c++) {
        double s = 0.0;
        for (int64_t r = 0; r < rows; r++) {
            float v = x[r * cols + c];
            s += (double)((v < 0.0f ? v : 0.0f) * dy[r * cols + c]);
        }
        dalpha[c] += (float)s;
    });
}
