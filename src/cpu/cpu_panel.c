/* Small GEMMs against a matrix packed once and used many times: the LSTM's recurrent kernel,
 * one GEMM per time step on each thread's few rows. OpenBLAS would copy (pack) all of the
 * kernel on every call; here it is packed once per pass into panels of 16 columns, each
 * [k, 16] contiguous, and a micro-kernel takes rows of A 6 at a time into 12 AVX2 registers
 * of 8 floats (the 6x16 shape of OpenBLAS's own Haswell kernel), or with AVX-512 rows 8 at a
 * time against two panels in 16 registers of 16 floats. Single-threaded: callers run it
 * inside their own parallel region. The kernel is chosen by the CPU at run time (both FMA
 * kernels give the same bits); elsewhere plain loops compute the same sums without fused
 * multiply-adds. */
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

/* AVX-512: mr (<= MR512) rows of a times np (1 or 2) adjacent panels, one 16-float register
 * per row and panel: 16 accumulators, two panel loads and eight broadcasts per l for 16
 * fused multiply-adds (the AVX2 tile does 12 for 8). Each element's sum is the same chain of
 * fused multiply-adds from zero as in tile_avx2, so the two kernels agree bit for bit.
 * `cols`: the columns of the last panel that exist. */
#define MR512 8
static inline __attribute__((always_inline, target("avx512f"))) void
tile_avx512(int mr, int np, int k, const float *a, int lda, const float *panel, size_t stride,
            float *c, int ldc, int cols)
{
    __m512 acc[MR512][2];
#pragma GCC unroll 8
    for (int r = 0; r < MR512; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    const float *panel1 = panel + stride;
    for (int l = 0; l < k; l++) {
        const __m512 b0 = _mm512_loadu_ps(panel + l * PANEL);
        const __m512 b1 = np == 2 ? _mm512_loadu_ps(panel1 + l * PANEL) : b0;
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            const __m512 v = _mm512_set1_ps(a[(int64_t)r * lda + l]);
            acc[r][0] = _mm512_fmadd_ps(v, b0, acc[r][0]);
            if (np == 2) acc[r][1] = _mm512_fmadd_ps(v, b1, acc[r][1]);
        }
    }
    const __mmask16 last = (__mmask16)((1u << cols) - 1);
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
        float *cr = c + (int64_t)r * ldc;
        for (int q = 0; q < np; q++) {
            const __mmask16 keep = q == np - 1 ? last : (__mmask16)0xffff;
            float *cq = cr + q * PANEL;
            _mm512_mask_storeu_ps(cq, keep,
                                  _mm512_add_ps(_mm512_maskz_loadu_ps(keep, cq), acc[r][q]));
        }
    }
}

/* mr rows, with np and mr constants once inlined */
#define TILE512(mr)                                                                    \
    do {                                                                               \
        if (np == 2) tile_avx512(mr, 2, k, ai, lda, panel, stride, ci, ldc, cols);     \
        else tile_avx512(mr, 1, k, ai, lda, panel, stride, ci, ldc, cols);             \
    } while (0)

__attribute__((target("avx512f"))) static void
gemm_panels_avx512(int m, int n, int k, const float *a, int lda, const float *packed,
                   float *c, int ldc)
{
    const size_t stride = (size_t)PANEL * k;
    for (int j0 = 0; j0 < n; j0 += 2 * PANEL) {
        const float *panel = packed + (size_t)(j0 / PANEL) * stride;
        const int np = n - j0 > PANEL ? 2 : 1;
        const int rest = n - j0 - (np - 1) * PANEL;
        const int cols = rest < PANEL ? rest : PANEL;
        int i = 0;
        for (; i + MR512 <= m; i += MR512) {
            const float *ai = a + (int64_t)i * lda;
            float *ci = c + (int64_t)i * ldc + j0;
            TILE512(MR512);
        }
        const float *ai = a + (int64_t)i * lda;
        float *ci = c + (int64_t)i * ldc + j0;
        switch (m - i) {
        case 7: TILE512(7); break;
        case 6: TILE512(6); break;
        case 5: TILE512(5); break;
        case 4: TILE512(4); break;
        case 3: TILE512(3); break;
        case 2: TILE512(2); break;
        case 1: TILE512(1); break;
        default: break;
        }
    }
}
#endif

/* 2: AVX-512, 1: AVX2 + FMA, 0: plain loops; what this CPU and OS can run */
static int panels_isa(void)
{
#ifdef TFC_X86_SIMD
    if (__builtin_cpu_supports("avx512f")) return 2;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 1;
#endif
    return 0;
}

int tfc_cpu_gemm_panels_isa(int isa, int m, int n, int k, const float *a, int lda,
                            const float *packed, float *c, int ldc)
{
    if (isa < 0) isa = panels_isa();
    if (isa > panels_isa()) return 0;
    if (m <= 0 || n <= 0 || k <= 0) return 1;
    switch (isa) {
#ifdef TFC_X86_SIMD
    case 2: gemm_panels_avx512(m, n, k, a, lda, packed, c, ldc); break;
    case 1: gemm_panels_avx2(m, n, k, a, lda, packed, c, ldc); break;
#endif
    default: gemm_panels_plain(m, n, k, a, lda, packed, c, ldc); break;
    }
    return 1;
}

void tfc_cpu_gemm_panels(int m, int n, int k, const float *a, int lda, const float *packed,
                         float *c, int ldc)
{
    tfc_cpu_gemm_panels_isa(-1, m, n, k, a, lda, packed, c, ldc);
}
