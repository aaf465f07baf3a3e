/* CPU kernels of Keras's parametrised activation layers (core/backend.h, tfc_pact_desc):
 * ReLU with max_value, negative_slope or threshold, LeakyReLU, ELU with alpha, and PReLU
 * with its learned slopes. The forward passes follow keras.activations' order of operations
 * (relu: the negative part is max(threshold - x, 0), scaled and subtracted), so they round
 * as Keras does. Each element is independent and PReLU's slope gradient is summed per column
 * in row order: the results never depend on the thread count. */
#include <math.h>

#include "cpu/cpu_internal.h"

static float pact(const tfc_pact_desc *d, float v)
{
    if (d->elu) return v > 0.0f ? v : d->slope * expm1f(v);
    if (d->slope != 0.0f && d->threshold == 0.0f && isinf(d->max_value))
        return v >= 0.0f ? v : d->slope * v; /* leaky_relu */
    float pos = d->threshold != 0.0f ? (v > d->threshold ? v : 0.0f) : (v > 0.0f ? v : 0.0f);
    if (pos > d->max_value) pos = d->max_value;
    if (d->slope == 0.0f) return pos;
    float neg = d->threshold - v;
    return pos - d->slope * (neg > 0.0f ? neg : 0.0f);
}

/* f'(v): what Keras's gradient of the same formula gives away from its kinks */
static float pact_grad(const tfc_pact_desc *d, float v)
{
    if (d->elu) return v > 0.0f ? 1.0f : d->slope * expf(v);
    if (d->slope != 0.0f && d->threshold == 0.0f && isinf(d->max_value))
        return v >= 0.0f ? 1.0f : d->slope;
    if (v > d->threshold) return v < d->max_value ? 1.0f : 0.0f;
    return d->slope;
}

void tfc_cpu_pact_forward(tfc_backend *be, const tfc_pact_desc *d, int64_t n, const float *x,
                          float *y)
{
    const tfc_pact_desc k = *d;
    int nt = tfc_cpu_threads(be, n);
    TFC_CPU_FOR(n, nt, for (int64_t i = 0; i < n; i++) y[i] = pact(&k, x[i]););
}

void tfc_cpu_pact_backward(tfc_backend *be, const tfc_pact_desc *d, int64_t n, const float *x,
                           const float *dy, float *dx)
{
    const tfc_pact_desc k = *d;
    int nt = tfc_cpu_threads(be, n);
    TFC_CPU_FOR(n, nt, for (int64_t i = 0; i < n; i++) dx[i] += pact_grad(&k, x[i]) * dy[i];);
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
