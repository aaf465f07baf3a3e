/* Small GEMMs against a matrix packed once and used many times: the LSTM's kernels, one GEMM
 * per time step on each thread's few rows. OpenBLAS would copy (pack) all of B on every
 * call; here B is packed once per pass into panels of 16 columns, each [k, 16] contiguous,
 * and a micro-kernel takes rows of A 6 at a time into 12 AVX2 registers of 8 floats (the
 * 6x16 shape of OpenBLAS's own Haswell kernel), or with AVX-512 rows 8 at a time against two
 * panels in 16 registers of 16 floats. A is read in place and may be two matrices side by
 * side (the LSTM's input x_t and state h_{t-1} against its stacked [kernel; recurrent
 * kernel]); c may start from a bias row instead of its own values. Single-threaded: callers
 * run it inside their own parallel region. The kernel is chosen by the CPU at run time (both
 * FMA kernels give the same bits); elsewhere plain loops compute the same sums without fused
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

#ifdef TFC_X86_SIMD
/* Panel p of Sᵀ for a whole panel: packed row l is S's column l of the panel's 16 rows, one
 * gather a row (the 16 rows' lines stay in L1 across 16 rows l). */
__attribute__((target("avx512f"))) static void pack_trans16(int k, const float *s, int lds,
                                                            float *dst)
{
    const __m512i at = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5,
                                                           4, 3, 2, 1, 0),
                                          _mm512_set1_epi32(lds));
    for (int l = 0; l < k; l++)
        _mm512_storeu_ps(dst + (int64_t)l * PANEL, _mm512_i32gather_ps(at, s + l, 4));
}
#endif

void tfc_cpu_pack_panels_ld(int k, int n, const float *b, int ldb, int trans, float *packed,
                            int ldp)
{
    const int panels = (n + PANEL - 1) / PANEL;
#ifdef TFC_X86_SIMD
    /* a gather's 16 offsets are 32-bit */
    const int gather = trans && __builtin_cpu_supports("avx512f") &&
                       (int64_t)(PANEL - 1) * ldb <= INT32_MAX;
#endif
#pragma omp for schedule(static)
    for (int p = 0; p < panels; p++) {
        float *dst = packed + (size_t)p * ldp * PANEL;
        const int cols = n - p * PANEL < PANEL ? n - p * PANEL : PANEL;
#ifdef TFC_X86_SIMD
        if (gather && cols == PANEL) {
            pack_trans16(k, b + (int64_t)p * PANEL * ldb, ldb, dst);
            continue;
        }
#endif
        if (trans) /* row j of S is column j of B: read it whole, write it down the panel */
            for (int c = 0; c < PANEL; c++) {
                const float *src = b + (int64_t)(p * PANEL + c) * ldb;
                for (int l = 0; l < k; l++) dst[l * PANEL + c] = c < cols ? src[l] : 0.0f;
            }
        else if (cols == PANEL)
            for (int l = 0; l < k; l++) /* a constant size: one vector copy */
                memcpy(dst + (int64_t)l * PANEL, b + (int64_t)l * ldb + p * PANEL,
                       PANEL * sizeof(float));
        else
            for (int l = 0; l < k; l++) {
                const float *src = b + (int64_t)l * ldb + p * PANEL;
                for (int c = 0; c < PANEL; c++) dst[l * PANEL + c] = c < cols ? src[c] : 0.0f;
            }
    }
}

void tfc_cpu_pack_panels(int k, int n, const float *b, int ldb, int trans, float *packed)
{
    tfc_cpu_pack_panels_ld(k, n, b, ldb, trans, packed, k);
}

void tfc_cpu_pack_rows8_col(int m, const float *row, float *a, int lda)
{
    for (int r0 = 0; r0 < m; r0 += 8, a += lda) {
        if (m - r0 >= 8) {
            memcpy(a, row + r0, 8 * sizeof(float));
        } else {
            memcpy(a, row + r0, (size_t)(m - r0) * sizeof(float));
            memset(a + (m - r0), 0, (size_t)(8 - (m - r0)) * sizeof(float));
        }
    }
}

/* Index of A's element (r, l) in a layout of cpu_internal.h's TFC_PANEL_* */
static inline int64_t a_index(int layout, int64_t lda, int64_t r, int64_t l)
{
    switch (layout) {
    case TFC_PANEL_ROWS8: return (r / 8) * lda + 8 * l + r % 8;
    case TFC_PANEL_COLS16: return (l / 16) * lda + 16 * r + l % 16;
    default: return r * lda + l;
    }
}

/* where c's sums start: c itself, or with set the init row (zeros without one) */
static inline float c_base(const tfc_panel_gemm *g, const float *cij, int j)
{
    return !g->set ? *cij : g->init ? g->init[j] : 0.0f;
}

static void gemm_plain(const tfc_panel_gemm *g)
{
    const int k1 = g->a1.k, k2 = g->a2.k;
    for (int j0 = 0; j0 < g->n; j0 += PANEL) {
        const float *panel = g->packed + (size_t)(j0 / PANEL) * PANEL * g->ldp;
        const int cols = g->n - j0 < PANEL ? g->n - j0 : PANEL;
        for (int i = 0; i < g->m; i++) {
            float acc[PANEL] = {0};
            float *ci = g->c + (int64_t)i * g->ldc + j0;
            for (int q = 0; g->from_c && q < cols; q++) acc[q] = ci[q];
            for (int l = 0; l < k1; l++) {
                const float v = g->a1.a[a_index(g->a1.layout, g->a1.lda, i, l)];
                for (int q = 0; q < PANEL; q++) acc[q] += v * panel[l * PANEL + q];
            }
            for (int l = 0; l < k2; l++) {
                const float v = g->a2.a[(int64_t)i * g->a2.lda + l];
                for (int q = 0; q < PANEL; q++) acc[q] += v * panel[(k1 + l) * PANEL + q];
            }
            for (int q = 0; q < cols; q++) ci[q] = c_base(g, ci + q, j0 + q) + acc[q];
        }
    }
}

#ifdef TFC_X86_SIMD
/* The tiles below see A's first k1 columns in g->a1, laid out as `lay` (a constant once
 * inlined), from row i, and the next k2 row-major at a2, already offset to row i; `init` is
 * offset to the tile's first column. */

/* mr (<= MR, a constant once inlined) rows of A times one panel, into c's cols columns. */
static inline __attribute__((always_inline, target("avx2,fma"))) void
tile_avx2(int mr, int lay, const tfc_panel_gemm *g, int i, const float *a2, const float *panel,
          const float *init, float *c, int cols)
{
    const int k1 = g->a1.k, k2 = g->a2.k, lda1 = g->a1.lda, lda2 = g->a2.lda, ldc = g->ldc;
    const float *pr[MR]; /* A1's (r, l) at pr[r] + the offset of l */
    __m256 acc[MR][2];
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++) {
        acc[r][0] = acc[r][1] = _mm256_setzero_ps();
        pr[r] = g->a1.a + a_index(lay, lda1, i + (r < mr ? r : 0), 0);
    }
    if (g->from_c) {
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
            float t[PANEL] = {0};
            memcpy(t, c + (int64_t)r * ldc, (size_t)cols * sizeof(float));
            acc[r][0] = _mm256_loadu_ps(t);
            acc[r][1] = _mm256_loadu_ps(t + 8);
        }
    }
    for (int l = 0; l < k1; l++) {
        const __m256 b0 = _mm256_loadu_ps(panel + l * PANEL);
        const __m256 b1 = _mm256_loadu_ps(panel + l * PANEL + 8);
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
            const int64_t o = lay == TFC_PANEL_ROWS    ? l
                              : lay == TFC_PANEL_ROWS8 ? 8 * (int64_t)l
                                                       : (int64_t)(l / 16) * lda1 + l % 16;
            const __m256 v = _mm256_broadcast_ss(pr[r] + o);
            acc[r][0] = _mm256_fmadd_ps(v, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(v, b1, acc[r][1]);
        }
    }
    panel += (size_t)k1 * PANEL;
    for (int l = 0; l < k2; l++) {
        const __m256 b0 = _mm256_loadu_ps(panel + l * PANEL);
        const __m256 b1 = _mm256_loadu_ps(panel + l * PANEL + 8);
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
            const __m256 v = _mm256_broadcast_ss(a2 + (int64_t)r * lda2 + l);
            acc[r][0] = _mm256_fmadd_ps(v, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(v, b1, acc[r][1]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
        float *cr = c + (int64_t)r * ldc;
        if (cols == PANEL) {
            const __m256 z = _mm256_setzero_ps();
            const __m256 c0 = !g->set ? _mm256_loadu_ps(cr) : init ? _mm256_loadu_ps(init) : z;
            const __m256 c1 = !g->set ? _mm256_loadu_ps(cr + 8)
                              : init  ? _mm256_loadu_ps(init + 8)
                                      : z;
            _mm256_storeu_ps(cr, _mm256_add_ps(c0, acc[r][0]));
            _mm256_storeu_ps(cr + 8, _mm256_add_ps(c1, acc[r][1]));
        } else {
            float t[PANEL];
            _mm256_storeu_ps(t, acc[r][0]);
            _mm256_storeu_ps(t + 8, acc[r][1]);
            for (int q = 0; q < cols; q++)
                cr[q] = (!g->set ? cr[q] : init ? init[q] : 0.0f) + t[q];
        }
    }
}

/* One row of A (g->m == 1: an LSTM step on one sequence) times WIDE adjacent full panels.
 * A tile of one row keeps two sums in flight, each a chain of fused multiply-adds that waits
 * on the one before (4 cycles on AVX2 machines): at batch 1 the LSTM's steps ran at that
 * latency (fortunes_classify, perf). Here 2 WIDE chains run side by side; each element's sum
 * is the same chain as tile_avx2's (from zero or c, k1 then k2 terms, then added to its base),
 * so the bits are the same. */
#define WIDE 4

static inline __attribute__((always_inline, target("avx2,fma"))) void
row_avx2(int lay, const tfc_panel_gemm *g, const float *panel, const float *init, float *c)
{
    const int k1 = g->a1.k, k2 = g->a2.k, lda1 = g->a1.lda;
    const size_t stride = (size_t)PANEL * g->ldp;
    const float *pr = g->a1.a, *a2 = g->a2.a;
    const __m256 z = _mm256_setzero_ps();
    __m256 acc[WIDE][2];
#pragma GCC unroll 4
    for (int p = 0; p < WIDE; p++) {
        acc[p][0] = g->from_c ? _mm256_loadu_ps(c + p * PANEL) : z;
        acc[p][1] = g->from_c ? _mm256_loadu_ps(c + p * PANEL + 8) : z;
    }
    for (int l = 0; l < k1; l++) {
        const int64_t o = lay == TFC_PANEL_ROWS    ? l
                          : lay == TFC_PANEL_ROWS8 ? 8 * (int64_t)l
                                                   : (int64_t)(l / 16) * lda1 + l % 16;
        const __m256 v = _mm256_broadcast_ss(pr + o);
#pragma GCC unroll 4
        for (int p = 0; p < WIDE; p++) {
            const float *b = panel + p * stride + (size_t)l * PANEL;
            acc[p][0] = _mm256_fmadd_ps(v, _mm256_loadu_ps(b), acc[p][0]);
            acc[p][1] = _mm256_fmadd_ps(v, _mm256_loadu_ps(b + 8), acc[p][1]);
        }
    }
    for (int l = 0; l < k2; l++) {
        const __m256 v = _mm256_broadcast_ss(a2 + l);
#pragma GCC unroll 4
        for (int p = 0; p < WIDE; p++) {
            const float *b = panel + p * stride + (size_t)(k1 + l) * PANEL;
            acc[p][0] = _mm256_fmadd_ps(v, _mm256_loadu_ps(b), acc[p][0]);
            acc[p][1] = _mm256_fmadd_ps(v, _mm256_loadu_ps(b + 8), acc[p][1]);
        }
    }
#pragma GCC unroll 4
    for (int p = 0; p < WIDE; p++) {
        float *cp = c + p * PANEL;
        const float *ip = init ? init + p * PANEL : NULL;
        const __m256 c0 = !g->set ? _mm256_loadu_ps(cp) : ip ? _mm256_loadu_ps(ip) : z;
        const __m256 c1 = !g->set ? _mm256_loadu_ps(cp + 8) : ip ? _mm256_loadu_ps(ip + 8) : z;
        _mm256_storeu_ps(cp, _mm256_add_ps(c0, acc[p][0]));
        _mm256_storeu_ps(cp + 8, _mm256_add_ps(c1, acc[p][1]));
    }
}

#define TILE2(mr)                                                                  \
    do {                                                                           \
        if (lay == TFC_PANEL_ROWS8) tile_avx2(mr, 1, g, i, ai2, panel, init, ci, cols); \
        else if (lay == TFC_PANEL_COLS16)                                          \
            tile_avx2(mr, 2, g, i, ai2, panel, init, ci, cols);                    \
        else tile_avx2(mr, 0, g, i, ai2, panel, init, ci, cols);                   \
    } while (0)

__attribute__((target("avx2,fma"))) static void gemm_avx2(const tfc_panel_gemm *gp)
{
    /* a copy whose address stays here: the stores to c cannot change it */
    const tfc_panel_gemm copy = *gp, *g = &copy;
    const int lay = g->a1.layout;
    int j0 = 0;
    for (; g->m == 1 && j0 + WIDE * PANEL <= g->n; j0 += WIDE * PANEL) {
        const float *panel = g->packed + (size_t)(j0 / PANEL) * PANEL * g->ldp;
        float *c = g->c + j0;
        const float *init = g->init ? g->init + j0 : NULL;
        if (lay == TFC_PANEL_ROWS8) row_avx2(1, g, panel, init, c);
        else if (lay == TFC_PANEL_COLS16) row_avx2(2, g, panel, init, c);
        else row_avx2(0, g, panel, init, c);
    }
    for (; j0 < g->n; j0 += PANEL) {
        const float *panel = g->packed + (size_t)(j0 / PANEL) * PANEL * g->ldp;
        const int cols = g->n - j0 < PANEL ? g->n - j0 : PANEL;
        const float *init = g->init ? g->init + j0 : NULL;
        for (int i = 0; i < g->m; i += MR) {
            const int rows = g->m - i < MR ? g->m - i : MR;
            const float *ai2 = g->a2.k ? g->a2.a + (int64_t)i * g->a2.lda : NULL;
            float *ci = g->c + (int64_t)i * g->ldc + j0;
            switch (rows) { /* constant row counts, so each tile keeps its sums in registers */
            case 6: TILE2(6); break;
            case 5: TILE2(5); break;
            case 4: TILE2(4); break;
            case 3: TILE2(3); break;
            case 2: TILE2(2); break;
            case 1: TILE2(1); break;
            default: break;
            }
        }
    }
}

/* AVX-512: mr (<= MR512) rows of A times np (1 or 2) adjacent panels, one 16-float register
 * per row and panel: 16 accumulators, two panel loads and eight broadcasts per l for 16
 * fused multiply-adds (the AVX2 tile does 12 for 8). Each element's sum is the same chain of
 * fused multiply-adds from zero as in tile_avx2, so the two kernels agree bit for bit.
 * `cols`: the columns of the last panel that exist. */
#define MR512 8

/* acc[r] += A's rows times k rows of np panels (from p0, the second stride further): row
 * r's element l at ar[r rs + l as]. Pointers step, no index is multiplied in the loop. */
static inline __attribute__((always_inline, target("avx512f"))) void
kloop_avx512(int mr, int np, __m512 acc[MR512][2], const float *p0, size_t stride,
             const float *ar, int64_t rs, int as, int k)
{
    const float *p1 = p0 + stride;
    for (int l = 0; l < k; l++, p0 += PANEL, p1 += PANEL, ar += as) {
        const __m512 b0 = _mm512_loadu_ps(p0);
        const __m512 b1 = np == 2 ? _mm512_loadu_ps(p1) : b0;
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            const __m512 v = _mm512_set1_ps(ar[r * rs]);
            acc[r][0] = _mm512_fmadd_ps(v, b0, acc[r][0]);
            if (np == 2) acc[r][1] = _mm512_fmadd_ps(v, b1, acc[r][1]);
        }
    }
}

static inline __attribute__((always_inline, target("avx512f"))) void
tile_avx512(int mr, int np, int lay, const tfc_panel_gemm *g, const float *a1, const float *a2,
            const float *panel, size_t stride, const float *init, float *c, int cols)
{
    const int k1 = g->a1.k, k2 = g->a2.k, lda1 = g->a1.lda, ldc = g->ldc;
    __m512 acc[MR512][2];
#pragma GCC unroll 8
    for (int r = 0; r < MR512; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    const __mmask16 last = (__mmask16)((1u << cols) - 1);
    if (g->from_c) {
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++)
            for (int q = 0; q < np; q++)
                acc[r][q] = _mm512_maskz_loadu_ps(q == np - 1 ? last : (__mmask16)0xffff,
                                                  c + (int64_t)r * ldc + q * PANEL);
    }
    if (lay == TFC_PANEL_ROWS)
        kloop_avx512(mr, np, acc, panel, stride, a1, lda1, 1, k1);
    else if (lay == TFC_PANEL_ROWS8)
        kloop_avx512(mr, np, acc, panel, stride, a1, 1, 8, k1);
    else /* COLS16: the rows' 16 columns of each panel of A, then the next panel */
        for (int l0 = 0; l0 < k1; l0 += 16)
            kloop_avx512(mr, np, acc, panel + (size_t)l0 * PANEL, stride,
                         a1 + (int64_t)(l0 / 16) * lda1, 16, 1, k1 - l0 < 16 ? k1 - l0 : 16);
    kloop_avx512(mr, np, acc, panel + (size_t)k1 * PANEL, stride, a2, g->a2.lda, 1, k2);
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
        float *cr = c + (int64_t)r * ldc;
        for (int q = 0; q < np; q++) {
            const __mmask16 keep = q == np - 1 ? last : (__mmask16)0xffff;
            float *cq = cr + q * PANEL;
            const __m512 base = !g->set ? _mm512_maskz_loadu_ps(keep, cq)
                                : init  ? _mm512_maskz_loadu_ps(keep, init + q * PANEL)
                                        : _mm512_setzero_ps();
            _mm512_mask_storeu_ps(cq, keep, _mm512_add_ps(base, acc[r][q]));
        }
    }
}

/* mr rows, with np, the layout and mr constants once inlined */
#define TILE512L(mr, l)                                                                   \
    do {                                                                                  \
        if (np == 2) tile_avx512(mr, 2, l, g, ai1, ai2, panel, stride, init, ci, cols);   \
        else tile_avx512(mr, 1, l, g, ai1, ai2, panel, stride, init, ci, cols);           \
    } while (0)
#define TILE512(mr)                                                                       \
    do {                                                                                  \
        if (lay == TFC_PANEL_ROWS8) TILE512L(mr, TFC_PANEL_ROWS8);                        \
        else if (lay == TFC_PANEL_COLS16) TILE512L(mr, TFC_PANEL_COLS16);                 \
        else TILE512L(mr, TFC_PANEL_ROWS);                                                \
    } while (0)

/* One row of A (a batch of one: a recurrence's step) against ROW512 whole panels at once:
 * the sums of tile_avx512 (one chain of fused multiply-adds per element, the same bits), but
 * ROW512 chains in flight where a one-row tile has two, which left a step waiting on the
 * multiply-adds' latency. */
#define ROW512 4

static inline __attribute__((always_inline, target("avx512f"))) void
row_avx512(const tfc_panel_gemm *g, const float *panel, size_t stride, const float *init, float *c)
{
    const int k1 = g->a1.k, k2 = g->a2.k;
    __m512 acc[ROW512];
#pragma GCC unroll 4
    for (int q = 0; q < ROW512; q++)
        acc[q] = g->from_c ? _mm512_loadu_ps(c + q * PANEL) : _mm512_setzero_ps();
    const float *a = g->a1.a, *p = panel;
    for (int l = 0; l < k1; l++, p += PANEL) {
        const __m512 v = _mm512_set1_ps(a[l]);
#pragma GCC unroll 4
        for (int q = 0; q < ROW512; q++)
            acc[q] = _mm512_fmadd_ps(v, _mm512_loadu_ps(p + q * stride), acc[q]);
    }
    a = g->a2.a;
    for (int l = 0; l < k2; l++, p += PANEL) {
        const __m512 v = _mm512_set1_ps(a[l]);
#pragma GCC unroll 4
        for (int q = 0; q < ROW512; q++)
            acc[q] = _mm512_fmadd_ps(v, _mm512_loadu_ps(p + q * stride), acc[q]);
    }
#pragma GCC unroll 4
    for (int q = 0; q < ROW512; q++) {
        const __m512 base = !g->set ? _mm512_loadu_ps(c + q * PANEL)
                            : init  ? _mm512_loadu_ps(init + q * PANEL)
                                    : _mm512_setzero_ps();
        _mm512_storeu_ps(c + q * PANEL, _mm512_add_ps(base, acc[q]));
    }
}

/* The columns [j, n) of g in tiles of one or two panels. */
__attribute__((target("avx512f"))) static void tiles_avx512(const tfc_panel_gemm *g, int j);

__attribute__((target("avx512f"))) static void gemm_avx512(const tfc_panel_gemm *gp)
{
    /* a copy whose address stays here: the stores to c cannot change it */
    const tfc_panel_gemm copy = *gp, *g = &copy;
    const size_t stride = (size_t)PANEL * g->ldp;
    if (g->m > 1 || g->a1.layout != TFC_PANEL_ROWS) {
        tiles_avx512(g, 0);
        return;
    }
    /* one row: groups of ROW512 panels, then the columns left over in tiles (reversed: the
     * other way round) */
    const int groups = g->n / (ROW512 * PANEL), rest = groups * ROW512 * PANEL;
    if (g->reverse) tiles_avx512(g, rest);
    for (int e = 0; e < groups; e++) {
        const int j0 = (g->reverse ? groups - 1 - e : e) * ROW512 * PANEL;
        row_avx512(g, g->packed + (size_t)(j0 / PANEL) * stride, stride,
                   g->init ? g->init + j0 : NULL, g->c + j0);
    }
    if (!g->reverse) tiles_avx512(g, rest);
}

__attribute__((target("avx512f"))) static void tiles_avx512(const tfc_panel_gemm *g, int j)
{
    const int lay = g->a1.layout;
    const size_t stride = (size_t)PANEL * g->ldp;
    for (int j0 = j; j0 < g->n; j0 += 2 * PANEL) {
        const float *panel = g->packed + (size_t)(j0 / PANEL) * stride;
        const int np = g->n - j0 > PANEL ? 2 : 1;
        const int rest = g->n - j0 - (np - 1) * PANEL;
        const int cols = rest < PANEL ? rest : PANEL;
        const float *init = g->init ? g->init + j0 : NULL;
        for (int i = 0; i < g->m; i += MR512) {
            const int rows = g->m - i < MR512 ? g->m - i : MR512;
            /* i is a multiple of 8: the first row of an ROWS8 panel */
            const float *ai1 = g->a1.a + a_index(lay, g->a1.lda, i, 0);
            const float *ai2 = g->a2.k ? g->a2.a + (int64_t)i * g->a2.lda : NULL;
            float *ci = g->c + (int64_t)i * g->ldc + j0;
            switch (rows) {
            case 8: TILE512(8); break;
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

int tfc_cpu_panel_gemm_isa(int isa, const tfc_panel_gemm *g)
{
    if (isa < 0) isa = panels_isa();
    if (isa > panels_isa()) return 0;
    if (g->m <= 0 || g->n <= 0) return 1;
    switch (isa) {
#ifdef TFC_X86_SIMD
    case 2: gemm_avx512(g); break;
    case 1: gemm_avx2(g); break;
#endif
    default: gemm_plain(g); break;
    }
    return 1;
}

void tfc_cpu_panel_gemm(const tfc_panel_gemm *g)
{
    tfc_cpu_panel_gemm_isa(-1, g);
}
