/* Small GEMMs against a matrix packed once and used many times: the LSTM's recurrent kernel,
 * one GEMM per time step on each thread's few rows. OpenBLAS would copy (pack) all of the
 * kernel on every call; here it is packed once per pass into panels of 16 columns, each
 * [k, 16] contiguous, and a micro-kernel takes rows of A 6 at a time into 12 AVX2 registers
 * of 8 floats (the 6x16 shape of OpenBLAS's own Haswell kernel). Single-threaded: callers
 * run it inside their own parallel region. The FMA kernel is chosen by the CPU at run time;
 * elsewhere plain loops compute the same sums without fused multiply-adds. */
#include "cpu/cpu_internal.h"

#ifdef TFC_X86_SIMD
#include <immintrin.h>
#endif

#define PANEL 16
#define MR 6

size_t tfc_cpu_panels_floats(int k, int n)
{
    return (size_t)((n + PANEL - 1) / PANEL) * PANEL * (size_t)(k > 0 ? k : 0);
}

/* packed[p][l][c] = B[l, 16p + c], 0 past column n. B is [k, n] (row l at b + l ldb), or
 * with trans B = Sᵀ for S [n, k] stored at b with row stride ldb. */
void tfc_cpu_pack_panels(int k, int n, const float *b, int ldb, int trans, float *packed)
{
    for (int p = 0; p * PANEL < n; p++)
        for (int l = 0; l < k; l++) {
            float *dst = packed + ((size_t)p * k + l) * PANEL;
            for (int c = 0; c < PANEL; c++) {
                int j = p * PANEL + c;
                dst[c] = j >= n ? 0.0f : trans ? b[(int64_t)j * ldb + l] : b[(int64_t)l * ldb + j];
            }
        }
}

/* c[m, n] += a[m, k] · B, B packed by tfc_cpu_pack_panels: each element's products are
 * summed from l = 0 up in one accumulator, then added to c. */
static void gemm_panels_plain(int m, int n, int k, const float *a, int lda, const float *packed,
                              float *c, int ldc)
{
    for (int j0 = 0; j0 < n; j0 += PANEL) {
        const float *panel = packed + (size_t)(j0 / PANEL) * PANEL * k;
        const int cols = n - j0 < PANEL ? n - j0 : PANEL;
        for (int i = 0; i < m; i++) {
            const float *ai = a + (int64_t)i * lda;
            float acc[PANEL] = {0};
            for (int l = 0; l < k; l++)
                for (int q = 0; q < PANEL; q++) acc[q] += ai[l] * panel[l * PANEL + q];
            float *ci = c + (int64_t)i * ldc + j0;
            for (int q = 0; q < cols; q++) ci[q] += acc[q];
        }
    }
}

#ifdef TFC_X86_SIMD
/* mr (<= MR, a constant once inlined) rows of a times one panel, added into c's cols
 * columns. */
static inline __attribute__((always_inline, target("avx2,fma"))) void
tile_avx2(int mr, int k, const float *a, int lda, const float *panel, float *c, int ldc,
          int cols)
{
    __m256 acc[MR][2];
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int l = 0; l < k; l++) {
        const __m256 b0 = _mm256_loadu_ps(panel + l * PANEL);
        const __m256 b1 = _mm256_loadu_ps(panel + l * PANEL + 8);
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
            const __m256 v = _mm256_broadcast_ss(a + (int64_t)r * lda + l);
            acc[r][0] = _mm256_fmadd_ps(v, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(v, b1, acc[r][1]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
        float *cr = c + (int64_t)r * ldc;
        if (cols == PANEL) {
            _mm256_storeu_ps(cr, _mm256_add_ps(_mm256_loadu_ps(cr), acc[r][0]));
            _mm256_storeu_ps(cr + 8, _mm256_add_ps(_mm256_loadu_ps(cr + 8), acc[r][1]));
        } else {
            float t[PANEL];
            _mm256_storeu_ps(t, acc[r][0]);
            _mm256_storeu_ps(t + 8, acc[r][1]);
            for (int q = 0; q < cols; q++) cr[q] += t[q];
        }
    }
}

__attribute__((target("avx2,fma"))) static void
gemm_panels_avx2(int m, int n, int k, const float *a, int lda, const float *packed, float *c,
                 int ldc)
{
    for (int j0 = 0; j0 < n; j0 += PANEL) {
        const float *panel = packed + (size_t)(j0 / PANEL) * PANEL * k;
        const int cols = n - j0 < PANEL ? n - j0 : PANEL;
        float *cj = c + j0;
        int i = 0;
        for (; i + MR <= m; i += MR)
            tile_avx2(MR, k, a + (int64_t)i * lda, lda, panel, cj + (int64_t)i * ldc, ldc, cols);
        const float *ai = a + (int64_t)i * lda;
        float *ci = cj + (int64_t)i * ldc;
        switch (m - i) { /* constant row counts, so each tile keeps its sums in registers */
        case 5: tile_avx2(5, k, ai, lda, panel, ci, ldc, cols); break;
        case 4: tile_avx2(4, k, ai, lda, panel, ci, ldc, cols); break;
        case 3: tile_avx2(3, k, ai, lda, panel, ci, ldc, cols); break;
        case 2: tile_avx2(2, k, ai, lda, panel, ci, ldc, cols); break;
        case 1: tile_avx2(1, k, ai, lda, panel, ci, ldc, cols); break;
        default: break;
        }
    }
}
#endif

void tfc_cpu_gemm_panels(int m, int n, int k, const float *a, int lda, const float *packed,
                         float *c, int ldc)
{
    if (m <= 0 || n <= 0 || k <= 0) return;
#ifdef TFC_X86_SIMD
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        gemm_panels_avx2(m, n, k, a, lda, packed, c, ldc);
        return;
    }
#endif
    gemm_panels_plain(m, n, k, a, lda, packed, c, ldc);
}
