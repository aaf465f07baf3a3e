/* CPU Maximum and Minimum (tfc_extremum_desc in core/backend.h): each element runs the fold
 * of tfc_extremum_at, shared with the GPU, so both give the same bits and weights. Elements
 * are independent: the results never depend on the thread count. */
#include "cpu/cpu_internal.h"

/* y[r, c] = the fold of x_0 .. x_{k-1} at (r, c) */
void tfc_cpu_extremum_forward(tfc_backend *be, const tfc_extremum_desc *d,
                              const float *const *x, const float *mask, float *y)
{
    int nt = tfc_cpu_threads(be, d->rows * d->cols * d->k);
#pragma omp parallel for TFC_CPU_STATIC(d->rows, nt)
    for (int64_t r = 0; r < d->rows; r++) {
        const int padded = mask && mask[r] == 0.f;
        for (int64_t e = r * d->cols; e < (r + 1) * d->cols; e++)
            y[e] = tfc_extremum_at(d, x, padded, e, NULL);
    }
}

/* dx_i[r, c] += w_i dy[r, c], w_i input i's weight in the fold at (r, c) */
void tfc_cpu_extremum_backward(tfc_backend *be, const tfc_extremum_desc *d,
                               const float *const *x, const float *mask, const float *dy,
                               float *const *dx)
{
    int nt = tfc_cpu_threads(be, d->rows * d->cols * d->k);
#pragma omp parallel for TFC_CPU_STATIC(d->rows, nt)
    for (int64_t r = 0; r < d->rows; r++) {
        const int padded = mask && mask[r] == 0.f;
        float w[8];
        for (int64_t e = r * d->cols; e < (r + 1) * d->cols; e++) {
            tfc_extremum_at(d, x, padded, e, w);
            for (int i = 0; i < d->k; i++)
                if (dx[i]) dx[i][e] += w[i] * dy[e];
        }
    }
}
