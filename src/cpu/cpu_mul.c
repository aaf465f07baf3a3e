/* CPU element-wise products (Multiply): y = a * b with b possibly one row broadcast over a
 * group's rows (a squeeze-and-excitation scale [1, 1, C] times an image [H, W, C]), and the
 * gradient of such a broadcast factor, summed over the rows of its group by one thread in
 * row order (no result depends on the thread count). */
#include "cpu/cpu_internal.h"

/* y[g, r, c] = a[g, r, c] * b[g, b_bcast ? 0 : r, c], or += with accumulate. */
TFC_CPU_VECTOR
void tfc_cpu_mul(tfc_backend *be, int64_t groups, int64_t rows, int cols, const float *a,
                 const float *b, int b_bcast, float *y, int accumulate)
{
    const int64_t n = groups * rows;
    int nt = tfc_cpu_threads(be, n * cols);
    TFC_CPU_FOR(n, nt, for (int64_t r = 0; r < n; r++) {
        const float *ar = a + r * cols;
        const float *br = b + (b_bcast ? r / rows : r) * cols;
        float *yr = y + r * cols;
        if (accumulate) {
            _Pragma("omp simd")
            for (int c = 0; c < cols; c++) yr[c] += ar[c] * br[c];
        } else {
            _Pragma("omp simd")
            for (int c = 0; c < cols; c++) yr[c] = ar[c] * br[c];
        }
    });
}

/* db[g, c] += sum_r a[g, r, c] b[g, r, c], the rows summed in order from zero. */
TFC_CPU_VECTOR
void tfc_cpu_mul_reduce(tfc_backend *be, int64_t groups, int64_t rows, int cols, const float *a,
                        const float *b, float *db)
{
    int nt = groups > 1 ? tfc_cpu_threads(be, groups * rows * cols) : 1;
#pragma omp parallel for TFC_CPU_STATIC(groups, nt)
    for (int64_t g = 0; g < groups; g++) {
        float *out = db + g * cols;
        for (int c0 = 0; c0 < cols; c0 += 256) {
            const int cb = cols - c0 < 256 ? cols - c0 : 256;
            float sum[256] = {0};
            for (int64_t r = 0; r < rows; r++) {
                const int64_t at = (g * rows + r) * cols + c0;
                const float *ar = a + at, *br = b + at;
#pragma omp simd
                for (int c = 0; c < cb; c++) sum[c] += ar[c] * br[c];
            }
            for (int c = 0; c < cb; c++) out[c0 + c] += sum[c];
        }
    }
}
