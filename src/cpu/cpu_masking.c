/* CPU Masking (keras.layers.Masking): a step (a row of the last axis) whose every value
 * equals the mask value is padding, zeroed on the way forward and stopping the gradient on
 * the way back. Each row is independent: the results never depend on the thread count. */
#include "cpu/cpu_internal.h"

/* Whether row x[0, cols) is a real step: some value differs from `value` (NaN always does). */
static int real_step(const float *x, int cols, float value)
{
    int real = 0;
    for (int c = 0; c < cols; c++) real |= x[c] != value;
    return real;
}

/* y[r, :] = real(x[r, :]) ? x[r, :] : 0 */
void tfc_cpu_masking_forward(tfc_backend *be, int64_t rows, int cols, float value,
                             const float *x, float *y)
{
    int nt = tfc_cpu_threads(be, rows * cols);
    TFC_CPU_FOR(rows, nt, for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        if (real_step(xr, cols, value))
            memcpy(yr, xr, (size_t)cols * sizeof *yr);
        else
            memset(yr, 0, (size_t)cols * sizeof *yr);
    });
}

/* dx[r, :] += real(x[r, :]) ? dy[r, :] : 0 */
void tfc_cpu_masking_backward(tfc_backend *be, int64_t rows, int cols, float value,
                              const float *x, const float *dy, float *dx)
{
    int nt = tfc_cpu_threads(be, rows * cols);
#pragma omp parallel for TFC_CPU_STATIC(rows, nt)
    for (int64_t r = 0; r < rows; r++) {
        if (!real_step(x + r * cols, cols, value)) continue;
        const float *dyr = dy + r * cols;
        float *dxr = dx + r * cols;
#pragma omp simd
        for (int c = 0; c < cols; c++) dxr[c] += dyr[c];
    }
}
