/* Attention on the CPU, flash-attention style (Dao et al., 2022): the scores are computed one
 * block of BK keys at a time for a chunk of up to BQ query rows, the block packed transposed
 * so that the chunk's scores are one small GEMM, with an online softmax (a running maximum
 * and sum that rescale what came before), so no more than one BQ x BK block of scores exists
 * per thread at once, and memory stays O(T). Every product (Q Kᵀ, P V, and backward's
 * dO Vᵀ, dS K, (P z)ᵀ dO, dSᵀ Q) is that small GEMM, tile_gemm, register-blocked six rows
 * by sixteen columns (AVX2 with fused multiply-adds where the CPU has them). Forward saves
 * each row's log-sum-exp; backward (FlashAttention-2's) recomputes each block of
 * probabilities from it once, per key block and chunk of BQ query rows, one task owning
 * every row of an (example, head), so the results do not depend on the thread count. Blocks
 * outside a row's causal mask or window are skipped, and within a diagonal block the tiles
 * and terms that the mask leaves out. */
#include "core/rng.h"
#include "cpu/cpu_internal.h"

#include <math.h>
#include <stdlib.h>

#define QG 512 /* query rows per forward task: each key block is packed once for them */
#define BQ 64  /* query rows per block of scores */
#define BK 64 /* keys per block of scores (a multiple of tile_gemm's 16 columns) */

/* The row loops below, inlined into their callers' AVX2 clones (GCC may leave a helper
 * called twice out of line, and then it runs without AVX2). */
#define ROW_INLINE static inline __attribute__((always_inline))

/* Row i (of the tq) of head h in example b of a [n, t, heads, dim] tensor. */
static inline size_t at(const tfc_attn_desc *d, int b, int t, int i, int h, int dim)
{
    return (((size_t)b * (size_t)t + (size_t)i) * (size_t)d->heads + (size_t)h) * (size_t)dim;
}

/* Query row i of head h in example b among all of them: its lse and its dropout counter. */
static inline size_t row_of(const tfc_attn_desc *d, int b, int h, int i)
{
    return ((size_t)b * (size_t)d->heads + (size_t)h) * (size_t)d->tq + (size_t)i;
}

ROW_INLINE float dot(const float *a, const float *b, int n)
{
    float s = 0.f;
#pragma omp simd reduction(+ : s)
    for (int c = 0; c < n; c++) s += a[c] * b[c];
    return s;
}

/* Keys [*j0, *j1) that the query rows [i0, i1) may see: all, or with causal j < i1, with a
 * window j < i1 - 1 + window and j > i0 - window (*j0 rounded down to a block). */
static inline void key_range(const tfc_attn_desc *d, int i0, int i1, int *j0, int *j1)
{
    *j0 = 0, *j1 = d->tk;
    if (d->causal && i1 < *j1) *j1 = i1;
    if (d->window > 0) {
        if (i1 - 1 + d->window < *j1) *j1 = i1 - 1 + d->window;
        if (i0 - d->window + 1 > 0) *j0 = (i0 - d->window + 1) / BK * BK;
    }
}

/* Whether row i may see some key of [j0, j1) (the causal rule and the window). */
static inline int row_meets(const tfc_attn_desc *d, int i, int j0, int j1)
{
    return (!d->causal || i >= j0) &&
           (d->window <= 0 || (i > j0 - d->window && i < j1 - 1 + d->window));
}

/* z[j - j0] for keys [j0, j1) of row `row` (row_of): keep / (1 - rate), or 1
 * without dropout. j0 is a multiple of 4. */
static void drop_scales(const tfc_attn_desc *d, size_t row, int j0, int j1, float *z)
{
    if (d->rate <= 0.f) {
        for (int j = j0; j < j1; j++) z[j - j0] = 1.f;
        return;
    }
    const float inv = 1.f / (1.f - d->rate);
    const uint64_t base = (uint64_t)row * (uint64_t)((d->tk + 3) & ~3);
    for (int j = j0; j < j1; j += 4) {
        tfc_u32x4 r = tfc_philox(d->key, (base + (uint64_t)j) >> 2, d->step);
        for (int w = 0; w < 4 && j + w < j1; w++)
            z[j + w - j0] = tfc_u32_to_unit(r.v[w]) >= d->rate ? inv : 0.f;
    }
}

/* Rows [r0, r0 + n) of head h in example b of x [n, t, heads, dim] packed at out, row r at
 * out + r dim (a block product reads them contiguously; in place, heads x dim apart, was no
 * faster). */
static void pack_rows(const tfc_attn_desc *d, int b, int t, int h, int r0, int n, const float *x,
                      int dim, float *out)
{
    for (int r = 0; r < n; r++)
        memcpy(out + (size_t)r * (size_t)dim, x + at(d, b, t, r0 + r, h, dim), (size_t)dim * 4);
}

/* Where the useful entries of a block product lie, row by row: for row r of C (in the
 * gemm's own numbering), the indices x (of C's columns, or of the sum's k) with
 * r + lo <= x <= r + hi. The causal rule and the window make the score blocks banded; the
 * entries outside the band are zero (products) or replaced by -inf (scores). */
typedef struct band {
    int lo, hi;
} band;

#define FAR (1 << 29) /* past any length: an unbanded side */
static const band ALL = {-FAR, FAR};

/* The band of keys j that query row i may see, as j - i in [lo, hi] (the causal rule and
 * the window), shifted by off (a block's numbering). */
static band seen_band(const tfc_attn_desc *d, int off)
{
    band s = {d->window > 0 ? 1 - d->window : -FAR,
              d->causal ? 0 : d->window > 0 ? d->window - 1 : FAR};
    return (band){s.lo + off, s.hi + off};
}

/* The same band seen from the keys: query rows i - j in [-hi, -lo], shifted by off. */
static band seers_band(const tfc_attn_desc *d, int off)
{
    const band s = seen_band(d, 0);
    return (band){-s.hi + off, -s.lo + off};
}

/* C [m, n] = A B, or C += A B (acc), for C's row i at c + i ldc (its first n columns
 * written), A [m, kk] (element (i, k) at a[i ai + k ak]: a block's rows or, transposed, its
 * columns) and B [kk, n] (row k at b + k ldb). cols: the columns of C each row needs (the
 * others may be left as they were); ks: where A's rows may be nonzero (the terms outside
 * are skipped). Each element's sum is one accumulator that starts from C (or zero) and runs
 * over k in ascending order, so its bits do not depend on the tiling or the thread count. */
typedef struct gemm {
    int m, n, kk, acc;
    const float *a, *b;
    size_t ai, ak, ldb;
    float *c;
    size_t ldc;
    band cols, ks;
} gemm;

/* Rows [i0, i0 + mr) by columns [n0, n0 + 16) (fewer past n) of g over k in [k0, k1). */
typedef void tile_fn(const gemm *g, int i0, int mr, int n0, int k0, int k1);

/* The baseline tile: a row at a time, up to sixteen sums in a vector or two. */
TFC_CPU_VECTOR
static void tile_plain(const gemm *g, int i0, int mr, int n0, int k0, int k1)
{
    const int nc = g->n - n0 < 16 ? g->n - n0 : 16;
    for (int r = i0; r < i0 + mr; r++) {
        float s[16], *cr = g->c + (size_t)r * g->ldc + (size_t)n0;
        const float *ar = g->a + (size_t)r * g->ai;
        for (int u = 0; u < nc; u++) s[u] = g->acc ? cr[u] : 0.f;
        for (int k = k0; k < k1; k++) {
            const float x = ar[(size_t)k * g->ak], *bk = g->b + (size_t)k * g->ldb + n0;
#pragma omp simd
            for (int u = 0; u < nc; u++) s[u] += x * bk[u];
        }
        memcpy(cr, s, (size_t)nc * 4);
    }
}

#ifdef TFC_X86_SIMD
#include <immintrin.h>

#define FMA_TARGET __attribute__((target("avx2,fma")))

/* The AVX2 tile of MR <= 6 rows, sixteen columns when FULL, else fewer (MR and FULL
 * constants once inlined): the 2 MR sums in ymm registers (12 of the 16 at six rows: enough
 * independent chains to hide the fused multiply-add's latency), B's row in two, A's element
 * broadcast in one; C loaded or zeroed before and stored after; past n, B and C are neither
 * read nor written (masked). */
static inline __attribute__((always_inline)) FMA_TARGET void
tile_fma_rows(const gemm *g, int i0, const int MR, const int FULL, int n0, int k0, int k1)
{
    const int nc = g->n - n0;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nc), lane);
    const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nc - 8), lane);
    __m256 s[6][2];
    const float *ar[6];
    float *cr[6];
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++) {
        ar[r] = g->a + (size_t)(i0 + r) * g->ai;
        cr[r] = g->c + (size_t)(i0 + r) * g->ldc + (size_t)n0;
        if (!g->acc) {
            s[r][0] = s[r][1] = _mm256_setzero_ps();
        } else if (FULL) {
            s[r][0] = _mm256_loadu_ps(cr[r]), s[r][1] = _mm256_loadu_ps(cr[r] + 8);
        } else {
            s[r][0] = _mm256_maskload_ps(cr[r], m0), s[r][1] = _mm256_maskload_ps(cr[r] + 8, m1);
        }
    }
    const float *bk = g->b + (size_t)k0 * g->ldb + (size_t)n0;
    for (size_t o = (size_t)k0 * g->ak, e = (size_t)k1 * g->ak; o < e; o += g->ak) {
        const __m256 b0 = FULL ? _mm256_loadu_ps(bk) : _mm256_maskload_ps(bk, m0);
        const __m256 b1 = FULL ? _mm256_loadu_ps(bk + 8) : _mm256_maskload_ps(bk + 8, m1);
        bk += g->ldb;
#pragma GCC unroll 6
        for (int r = 0; r < MR; r++) {
            const __m256 x = _mm256_broadcast_ss(ar[r] + o);
            s[r][0] = _mm256_fmadd_ps(x, b0, s[r][0]);
            s[r][1] = _mm256_fmadd_ps(x, b1, s[r][1]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++) {
        if (FULL) {
            _mm256_storeu_ps(cr[r], s[r][0]), _mm256_storeu_ps(cr[r] + 8, s[r][1]);
        } else {
            _mm256_maskstore_ps(cr[r], m0, s[r][0]), _mm256_maskstore_ps(cr[r] + 8, m1, s[r][1]);
        }
    }
}

#define TILE_FMA(full)                                                                     \
    switch (mr) {                                                                          \
    case 6: tile_fma_rows(g, i0, 6, full, n0, k0, k1); break;                             \
    case 5: tile_fma_rows(g, i0, 5, full, n0, k0, k1); break;                             \
    case 4: tile_fma_rows(g, i0, 4, full, n0, k0, k1); break;                             \
    case 3: tile_fma_rows(g, i0, 3, full, n0, k0, k1); break;                             \
    case 2: tile_fma_rows(g, i0, 2, full, n0, k0, k1); break;                             \
    default: tile_fma_rows(g, i0, 1, full, n0, k0, k1); break;                            \
    }

FMA_TARGET static void tile_fma(const gemm *g, int i0, int mr, int n0, int k0, int k1)
{
    if (g->n - n0 >= 16) {
        TILE_FMA(1)
    } else {
        TILE_FMA(0)
    }
}

/* exp(x), eight at a time, as tfc_cpu_expf computes it (the same clamps, reduction,
 * polynomial and two-step scaling) with fused multiply-adds: within its accuracy, not its
 * bits. */
static inline __attribute__((always_inline)) FMA_TARGET __m256 exp_fma(__m256 x)
{
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(88.8f));
    const __m256 magic = _mm256_set1_ps(12582912.0f);
    const __m256 t = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), magic);
    const __m256 fn = _mm256_sub_ps(t, magic);
    const __m256i n = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_castps_si256(magic));
    __m256 r = _mm256_fnmadd_ps(fn, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(fn, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.0f));
    const __m256i n1 = _mm256_srai_epi32(n, 1), n2 = _mm256_sub_epi32(n, n1);
    const __m256i e = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, e), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, e), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

/* mask_scores below for c0 and c1 multiples of 8: the same products, and the maximum
 * without the scalar pass over eight lanes that GCC's reduction leaves. */
FMA_TARGET static float mask_scores_fma(const tfc_attn_desc *d, int i, int j0, const int *ok,
                                        int c0, int c1, float *s)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), zero = _mm256_setzero_si256();
    const __m256i at_i = _mm256_set1_epi32(i - j0), win = _mm256_set1_epi32(d->window);
    const __m256 scale = _mm256_set1_ps(d->scale), ninf = _mm256_set1_ps(-INFINITY);
    __m256 mx = ninf;
    for (int j = c0; j < c1; j += 8) {
        const __m256i jv = _mm256_add_epi32(_mm256_set1_epi32(j), lane);
        __m256i seen = _mm256_cmpgt_epi32(_mm256_loadu_si256((const __m256i *)(ok + j)), zero);
        if (d->causal) seen = _mm256_andnot_si256(_mm256_cmpgt_epi32(jv, at_i), seen);
        if (d->window > 0)
            seen = _mm256_and_si256(
                seen, _mm256_cmpgt_epi32(win, _mm256_abs_epi32(_mm256_sub_epi32(at_i, jv))));
        const __m256 x = _mm256_blendv_ps(ninf, _mm256_mul_ps(scale, _mm256_loadu_ps(s + j)),
                                          _mm256_castsi256_ps(seen));
        _mm256_storeu_ps(s + j, x);
        mx = _mm256_max_ps(x, mx);
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
}

/* exps below for c0 and c1 multiples of 8, the sum in eight lanes added pairwise last. */
FMA_TARGET static float exps_fma(float *s, float m, int c0, int c1)
{
    const __m256 mv = _mm256_set1_ps(m), ninf = _mm256_set1_ps(-INFINITY);
    __m256 sum = _mm256_setzero_ps();
    for (int j = c0; j < c1; j += 8) {
        const __m256 x = _mm256_loadu_ps(s + j);
        const __m256 e = _mm256_and_ps(_mm256_cmp_ps(x, ninf, _CMP_GT_OQ),
                                       exp_fma(_mm256_sub_ps(x, mv)));
        _mm256_storeu_ps(s + j, e);
        sum = _mm256_add_ps(sum, e);
    }
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}
#endif

/* The instruction set of the block products, the transposes and the exps: 1 AVX2 with
 * fused multiply-adds, 0 the baseline; -1 the best this CPU runs, unless
 * tfc_cpu_attention_isa chose. */
static int attn_chosen = -1;

static int attn_best(void)
{
#ifdef TFC_X86_SIMD
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 1;
#endif
    return 0;
}

int tfc_cpu_attention_isa(int isa)
{
    if (isa > attn_best()) return 0;
    attn_chosen = isa;
    return 1;
}

#ifdef TFC_X86_SIMD
static int attn_isa(void)
{
    return attn_chosen >= 0 ? attn_chosen : attn_best();
}
#endif

/* kt[c BK + j] = x[j ld + c] for the rows j < n and columns c < dim of x. */
static void transpose_plain(const float *x, size_t ld, int n, int dim, float *kt)
{
    for (int j = 0; j < n; j++)
        for (int c = 0; c < dim; c++) kt[(size_t)c * BK + (size_t)j] = x[(size_t)j * ld + c];
}

#ifdef TFC_X86_SIMD
/* The same, eight rows by eight columns at a time in registers (unpack, shuffle, swap
 * halves), the edges as the plain loop. */
FMA_TARGET static void transpose_avx2(const float *x, size_t ld, int n, int dim, float *kt)
{
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        const float *xj = x + (size_t)j * ld;
        int c = 0;
        for (; c + 8 <= dim; c += 8) {
            __m256 r[8], t[8];
#pragma GCC unroll 8
            for (int u = 0; u < 8; u++) r[u] = _mm256_loadu_ps(xj + (size_t)u * ld + c);
#pragma GCC unroll 4
            for (int u = 0; u < 8; u += 2) {
                t[u] = _mm256_unpacklo_ps(r[u], r[u + 1]);
                t[u + 1] = _mm256_unpackhi_ps(r[u], r[u + 1]);
            }
#pragma GCC unroll 2
            for (int u = 0; u < 8; u += 4) {
                r[u] = _mm256_shuffle_ps(t[u], t[u + 2], 0x44);
                r[u + 1] = _mm256_shuffle_ps(t[u], t[u + 2], 0xee);
                r[u + 2] = _mm256_shuffle_ps(t[u + 1], t[u + 3], 0x44);
                r[u + 3] = _mm256_shuffle_ps(t[u + 1], t[u + 3], 0xee);
            }
#pragma GCC unroll 4
            for (int u = 0; u < 4; u++) {
                float *o = kt + (size_t)(c + u) * BK + (size_t)j;
                _mm256_storeu_ps(o, _mm256_permute2f128_ps(r[u], r[u + 4], 0x20));
                _mm256_storeu_ps(o + 4 * BK, _mm256_permute2f128_ps(r[u], r[u + 4], 0x31));
            }
        }
        for (; c < dim; c++)
            for (int u = 0; u < 8; u++) kt[(size_t)c * BK + (size_t)(j + u)] = xj[u * ld + c];
    }
    transpose_plain(x + (size_t)j * ld, ld, n - j, dim, kt + j);
}
#endif

static tile_fn *tile_kernel(void)
{
#ifdef TFC_X86_SIMD
    if (attn_isa() == 1) return tile_fma;
#endif
    return tile_plain;
}

/* The keys [j0, j0 + n) of (b, h), n <= BK, packed transposed for the score GEMMs:
 * kt[c BK + j] = k_{j0+j}[c]; ok[j] = 1 where key j0 + j is real and not masked, else 0
 * (and kt's column zero), so the loops below run over whole blocks of BK. */
static void pack_keys(const tfc_attn_desc *d, int b, int h, int j0, int n, const float *k,
                      int dim, float *kt, int *ok)
{
    if (n < BK) memset(kt, 0, (size_t)dim * BK * 4);
    for (int j = 0; j < BK; j++)
        ok[j] = j < n && (!d->kmask || d->kmask[(size_t)b * (size_t)d->tk + (size_t)(j0 + j)]);
    const float *x = k + at(d, b, d->tk, j0, h, dim);
    const size_t ld = (size_t)d->heads * (size_t)dim;
#ifdef TFC_X86_SIMD
    if (attn_isa() == 1) {
        transpose_avx2(x, ld, n, dim, kt);
        return;
    }
#endif
    transpose_plain(x, ld, n, dim, kt);
}

/* g as tiles of six rows by sixteen columns: a tile whose rows need none of its columns
 * (g->cols) is skipped (not written); the sum of a tile runs over the k its rows may need
 * (g->ks), and is zero when there are none. */
static void tile_gemm(const gemm *g)
{
    tile_fn *tile = tile_kernel();
    for (int i0 = 0; i0 < g->m; i0 += 6) {
        const int mr = g->m - i0 < 6 ? g->m - i0 : 6, last = i0 + mr - 1;
        const int k0 = i0 + g->ks.lo > 0 ? i0 + g->ks.lo : 0;
        const int k1 = last + g->ks.hi + 1 < g->kk ? last + g->ks.hi + 1 : g->kk;
        for (int n0 = 0; n0 < g->n; n0 += 16) {
            const int nc = g->n - n0 < 16 ? g->n - n0 : 16;
            if (n0 > last + g->cols.hi || n0 + nc - 1 < i0 + g->cols.lo) continue;
            if (k0 < k1)
                tile(g, i0, mr, n0, k0, k1);
            else if (!g->acc)
                for (int r = i0; r <= last; r++)
                    memset(g->c + (size_t)r * g->ldc + (size_t)n0, 0, (size_t)nc * 4);
        }
    }
}

/* The columns [*c0, *c1) of the key block of nj keys at j0 that row i may see (seen_band),
 * widened to multiples of 8 within [0, BK): the scores outside are never looked at. */
ROW_INLINE void row_cols(const tfc_attn_desc *d, int i, int j0, int nj, int *c0, int *c1)
{
    const band s = seen_band(d, i - j0);
    const int n8 = (nj + 7) & ~7;
    *c0 = s.lo > 0 ? (s.lo < BK ? s.lo : BK) & ~7 : 0;
    *c1 = s.hi < n8 - 1 ? (s.hi + 8) & ~7 : n8;
    *c0 = *c0 < *c1 ? *c0 : *c1;
}

/* The columns of scores a block of nj keys needs: whole tiles of 16. */
static inline int block_cols(int nj)
{
    return (nj + 15) & ~15;
}

/* s[j] = scale s[j] (a row's q . k_{j0+j}) for j in [c0, c1) the keys row i sees (ok, the
 * causal rule, the window), -inf for the others; returns the maximum. */
ROW_INLINE float mask_scores(const tfc_attn_desc *d, int i, int j0, const int *ok, int c0,
                                int c1, float *s)
{
#ifdef TFC_X86_SIMD
    if (attn_isa() == 1) return mask_scores_fma(d, i, j0, ok, c0, c1, s);
#endif
    const int causal = d->causal, win = d->window;
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int j = c0; j < c1; j++) {
        const int jj = j0 + j;
        const int seen = ok[j] & (!causal | (jj <= i)) & ((win <= 0) | (abs(i - jj) < win));
        s[j] = tfc_cpu_select(seen, d->scale * s[j], -INFINITY);
        mx = s[j] > mx ? s[j] : mx;
    }
    return mx;
}

/* x[j] = 0 for j in [0, BK) outside [c0, c1) (loops: memset's call costs more here). */
ROW_INLINE void zero_outside(float *x, int c0, int c1)
{
    for (int j = 0; j < c0; j++) x[j] = 0.f;
#pragma omp simd
    for (int j = c1; j < BK; j++) x[j] = 0.f;
}

/* s[j] = exp(s[j] - m) for j in [c0, c1) (multiples of 8), 0 for -inf ones (an unseen
 * key), and 0 outside; returns their sum. */
ROW_INLINE float exps(float *s, float m, int c0, int c1)
{
    float sum = 0.f;
    zero_outside(s, c0, c1);
#ifdef TFC_X86_SIMD
    if (attn_isa() == 1) return exps_fma(s, m, c0, c1);
#endif
#pragma omp simd reduction(+ : sum)
    for (int j = c0; j < c1; j++) {
        s[j] = tfc_cpu_select(s[j] > -INFINITY, tfc_cpu_expf(s[j] - m), 0.f);
        sum += s[j];
    }
    return sum;
}

/* The rows [*r0, *r1) of [i0, i1) from the first to the last that may see a key of
 * [j0, j1) (row_meets); *r0 >= *r1 when none does. */
static void meeting_rows(const tfc_attn_desc *d, int i0, int i1, int j0, int j1, int *r0,
                         int *r1)
{
    *r0 = i1, *r1 = i0;
    for (int i = i0; i < i1; i++)
        if (row_meets(d, i, j0, j1)) {
            *r0 = *r0 == i1 ? i : *r0;
            *r1 = i + 1;
        }
}

/* Scratch of one forward task: a packed key block (kᵀ) and value block (rows), and one block
 * of scores (then probabilities) of a chunk of BQ rows. */
typedef struct fwd_scratch {
    float *kt, *vp;
    float s[BQ][BK];
} fwd_scratch;

/* Forward of query rows [i0, i1) of (b, h) (at most QG), one packed key block at a time, in
 * chunks of BQ rows: a chunk's scores as one tile_gemm (q read in place), then per row (the
 * columns of the block it may see)
 *   m_i = max over blocks so far, l_i = sum exp(s_ij - m_i), o_i = sum exp(s_ij - m_i) z v_j
 * each new block rescaling the old o_i and l_i by exp(m_old - m_new), the block's P V added
 * by another tile_gemm; then o_i /= l_i and lse_i = m_i + log l_i. */
TFC_CPU_VECTOR
static void forward_rows(const tfc_attn_desc *d, int b, int h, int i0, int i1, const float *q,
                         const float *k, const float *v, float *o, float *lse, fwd_scratch *w)
{
    float m[QG], l[QG], z[BK];
    int ok[BK];
    const size_t qs = (size_t)d->heads * (size_t)d->dk, os = (size_t)d->heads * (size_t)d->dv;
    for (int i = i0; i < i1; i++) {
        m[i - i0] = -INFINITY, l[i - i0] = 0.f;
        memset(o + at(d, b, d->tq, i, h, d->dv), 0, (size_t)d->dv * 4);
    }
    int kbeg, kend;
    key_range(d, i0, i1, &kbeg, &kend);
    for (int j0 = kbeg; j0 < kend; j0 += BK) {
        const int nj = j0 + BK < kend ? BK : kend - j0;
        int g0, g1;
        meeting_rows(d, i0, i1, j0, j0 + nj, &g0, &g1);
        if (g0 >= g1) continue;
        pack_keys(d, b, h, j0, nj, k, d->dk, w->kt, ok);
        pack_rows(d, b, d->tk, h, j0, nj, v, d->dv, w->vp);
        for (int c0 = i0; c0 < i1; c0 += BQ) {
            int r0, r1;
            meeting_rows(d, c0, c0 + BQ < i1 ? c0 + BQ : i1, j0, j0 + nj, &r0, &r1);
            if (r0 >= r1) continue;
            const band seen = seen_band(d, r0 - j0);
            tile_gemm(&(gemm){.m = r1 - r0, .n = block_cols(nj), .kk = d->dk,
                              .a = q + at(d, b, d->tq, r0, h, d->dk), .ai = qs, .ak = 1,
                              .b = w->kt, .ldb = BK, .c = w->s[0], .ldc = BK, .cols = seen,
                              .ks = ALL});
            for (int i = r0; i < r1; i++) {
                float *p = w->s[i - r0];
                int s0, s1;
                row_cols(d, i, j0, nj, &s0, &s1);
                const int off = d->qmask && d->qmask[(size_t)b * (size_t)d->tq + (size_t)i] == 0.f;
                const float mb = off || !row_meets(d, i, j0, j0 + nj)
                                     ? -INFINITY
                                     : mask_scores(d, i, j0, ok, s0, s1, p);
                if (mb == -INFINITY) { /* no key of the block: nothing added */
                    memset(p, 0, BK * 4);
                    continue;
                }
                float *mi = &m[i - i0], *li = &l[i - i0], *oi = o + at(d, b, d->tq, i, h, d->dv);
                const float mnew = mb > *mi ? mb : *mi, alpha = expf(*mi - mnew);
                *li = *li * alpha + exps(p, mnew, s0, s1);
                *mi = mnew;
                if (d->rate > 0.f) {
                    drop_scales(d, row_of(d, b, h, i), j0, j0 + nj, z);
                    for (int j = 0; j < nj; j++) p[j] *= z[j];
                }
#pragma omp simd
                for (int c = 0; c < d->dv; c++) oi[c] *= alpha;
            }
            tile_gemm(&(gemm){.m = r1 - r0, .n = d->dv, .kk = nj, .acc = 1, .a = w->s[0],
                              .ai = BK, .ak = 1, .b = w->vp, .ldb = d->dv,
                              .c = o + at(d, b, d->tq, r0, h, d->dv), .ldc = os, .cols = ALL,
                              .ks = seen});
        }
    }
    for (int i = i0; i < i1; i++) {
        float *oi = o + at(d, b, d->tq, i, h, d->dv);
        float *L = &lse[row_of(d, b, h, i)];
        const float li = l[i - i0];
        if (li > 0.f) {
            const float inv = 1.f / li;
#pragma omp simd
            for (int c = 0; c < d->dv; c++) oi[c] *= inv;
            *L = m[i - i0] + logf(li);
        } else if (d->uniform) { /* no key seen: the mean of every v_j, as Keras */
            for (int j = 0; j < d->tk; j++) {
                const float *vj = v + at(d, b, d->tk, j, h, d->dv);
#pragma omp simd
                for (int c = 0; c < d->dv; c++) oi[c] += vj[c];
            }
            const float inv = 1.f / (float)d->tk;
#pragma omp simd
            for (int c = 0; c < d->dv; c++) oi[c] *= inv;
            *L = -INFINITY;
        } else {
            *L = INFINITY;
        }
    }
}

/* Task t of a pass over (example, head, block of `size` of the t steps): its example b, head
 * h and steps [r0, r1). */
typedef struct task {
    int b, h, r0, r1;
} task;

static task task_of(const tfc_attn_desc *d, int64_t t, int steps, int size)
{
    const int nb = (steps + size - 1) / size;
    task k = {(int)(t / ((int64_t)d->heads * nb)), (int)(t / nb % d->heads), (int)(t % nb) * size,
              0};
    k.r1 = k.r0 + size < steps ? k.r0 + size : steps;
    return k;
}

/* Work of a pass, for the thread count: about tq tk (dk + dv) per head. */
static int64_t work(const tfc_attn_desc *d)
{
    return (int64_t)d->n * d->heads * d->tq * d->tk * (d->dk + d->dv);
}

void tfc_cpu_attention_forward(tfc_backend *be, const tfc_attn_desc *d, const float *q,
                               const float *k, const float *v, float *o, float *lse)
{
    const int nqb = (d->tq + QG - 1) / QG;
    const int64_t tasks = (int64_t)d->n * d->heads * nqb;
    const int nt = tfc_cpu_threads(be, work(d));
    TFC_CPU_FOR(tasks, nt, for (int64_t t = 0; t < tasks; t++) {
        const task r = task_of(d, t, d->tq, QG);
        /* the packed blocks (stack arrays: no allocation) */
        float kt[(size_t)d->dk * BK], vp[(size_t)BK * d->dv];
        fwd_scratch w;
        w.kt = kt, w.vp = vp;
        forward_rows(d, r.b, r.h, r.r0, r.r1, q, k, v, o, lse, &w);
    });
}

/* Scratch of one backward task: a packed key block (kᵀ) and value block (vᵀ), D_i of every
 * row (dout_i . o_i), and a chunk of BQ rows' q kᵀ then p z in pz, dout vᵀ then scale ds in
 * g. */
typedef struct grad_scratch {
    float *kt, *vt, *kp, *qp, *dop, *D;
    float pz[BQ][BK], g[BQ][BK];
} grad_scratch;

/* Rows [i0, i1) of (b, h) against the packed key block [j0, j0 + nj), in place in w: from
 * q . k_j in pz and dout_i . v_j in g, each row's probabilities from its lse, pz = p z and
 * g = scale ds (zero rows for a row outside the block or unseen, and zero past the columns a
 * row may see; 1/tk each for a row with the uniform mean). */
TFC_CPU_VECTOR
static void block_grads(const tfc_attn_desc *d, int b, int h, int i0, int i1, int j0, int nj,
                        const int *ok, const float *lse, grad_scratch *w)
{
    float z[BK];
    for (int i = i0; i < i1; i++) {
        float *pz = w->pz[i - i0], *g = w->g[i - i0];
        const float L = lse[row_of(d, b, h, i)];
        if (L == INFINITY || (L != -INFINITY && !row_meets(d, i, j0, j0 + nj))) {
            memset(pz, 0, BK * 4), memset(g, 0, BK * 4);
            continue;
        }
        if (L == -INFINITY) {
            for (int j = 0; j < BK; j++) pz[j] = j < nj ? 1.f / (float)d->tk : 0.f, g[j] = 0.f;
            continue;
        }
        int c0, c1;
        row_cols(d, i, j0, nj, &c0, &c1);
        mask_scores(d, i, j0, ok, c0, c1, pz); /* keys past nj are unseen: p 0 there */
        exps(pz, L, c0, c1);
        const float D = w->D[i];
        zero_outside(g, c0, c1);
        if (d->rate <= 0.f) { /* z = 1 */
#pragma omp simd
            for (int j = c0; j < c1; j++) g[j] = d->scale * pz[j] * (g[j] - D);
            continue;
        }
        drop_scales(d, row_of(d, b, h, i), j0, j0 + nj, z);
        for (int j = nj; j < BK; j++) z[j] = 0.f;
#pragma omp simd
        for (int j = c0; j < c1; j++) {
            g[j] = d->scale * pz[j] * (z[j] * g[j] - D);
            pz[j] *= z[j];
        }
    }
}

/* The gradients of (b, h), FlashAttention-2's backward: per key block, per chunk of BQ query
 * rows, the probabilities once (block_grads: p = exp(s - L), dp = z (dout_i . v_j),
 * ds = p (dp - D_i), D_i = dout_i . o_i), then
 *   dq_i += scale sum_j ds k_j,  dv_j += sum_i p z dout_i,  dk_j += scale sum_i ds q_i
 * as tile_gemms over the chunk (k's block and the chunk's q and dout packed as rows; D_i
 * once per row, first). One task owns every row of (b, h), so dq's sums run in the same
 * order with any thread count. */
TFC_CPU_VECTOR
static void backward_head(const tfc_attn_desc *d, int b, int h, const float *q, const float *k,
                          const float *v, const float *o, const float *lse, const float *dout,
                          float *dq, float *dk, float *dv, grad_scratch *w)
{
    int ok[BK], all[BK];
    const size_t qs = (size_t)d->heads * (size_t)d->dk, vs = (size_t)d->heads * (size_t)d->dv;
    for (int i = 0; i < d->tq; i++) {
        memset(dq + at(d, b, d->tq, i, h, d->dk), 0, (size_t)d->dk * 4);
        w->D[i] = dot(dout + at(d, b, d->tq, i, h, d->dv), o + at(d, b, d->tq, i, h, d->dv),
                      d->dv);
    }
    for (int j0 = 0; j0 < d->tk; j0 += BK) {
        const int nj = j0 + BK < d->tk ? BK : d->tk - j0;
        pack_keys(d, b, h, j0, nj, k, d->dk, w->kt, ok);
        pack_keys(d, b, h, j0, nj, v, d->dv, w->vt, all);
        pack_rows(d, b, d->tk, h, j0, nj, k, d->dk, w->kp);
        for (int j = j0; j < j0 + nj; j++) {
            memset(dk + at(d, b, d->tk, j, h, d->dk), 0, (size_t)d->dk * 4);
            memset(dv + at(d, b, d->tk, j, h, d->dv), 0, (size_t)d->dv * 4);
        }
        for (int c0 = 0; c0 < d->tq; c0 += BQ) {
            /* the rows [i0, i1) of the chunk that meet the block or take the uniform mean */
            const int c1 = c0 + BQ < d->tq ? c0 + BQ : d->tq;
            int i0 = c1, i1 = c0, uniform = 0;
            for (int i = c0; i < c1; i++) {
                const float L = lse[row_of(d, b, h, i)];
                if (L == -INFINITY || (L != INFINITY && row_meets(d, i, j0, j0 + nj))) {
                    i0 = i0 == c1 ? i : i0;
                    i1 = i + 1;
                    uniform |= L == -INFINITY;
                }
            }
            if (i0 >= i1) continue;
            const int nr = i1 - i0;
            pack_rows(d, b, d->tq, h, i0, nr, q, d->dk, w->qp);
            pack_rows(d, b, d->tq, h, i0, nr, dout, d->dv, w->dop);
            /* the bands of the causal rule and the window; the rows with the uniform mean
             * have p z past them */
            const band seen = seen_band(d, i0 - j0), seers = seers_band(d, j0 - i0);
            tile_gemm(&(gemm){.m = nr, .n = block_cols(nj), .kk = d->dk, .a = w->qp, .ai = d->dk, .ak = 1,
                              .b = w->kt, .ldb = BK, .c = w->pz[0], .ldc = BK, .cols = seen,
                              .ks = ALL});
            tile_gemm(&(gemm){.m = nr, .n = block_cols(nj), .kk = d->dv, .a = w->dop, .ai = d->dv, .ak = 1,
                              .b = w->vt, .ldb = BK, .c = w->g[0], .ldc = BK, .cols = seen,
                              .ks = ALL});
            block_grads(d, b, h, i0, i1, j0, nj, ok, lse, w);
            tile_gemm(&(gemm){.m = nr, .n = d->dk, .kk = nj, .acc = 1, .a = w->g[0], .ai = BK,
                              .ak = 1, .b = w->kp, .ldb = d->dk,
                              .c = dq + at(d, b, d->tq, i0, h, d->dk), .ldc = qs, .cols = ALL,
                              .ks = seen});
            tile_gemm(&(gemm){.m = nj, .n = d->dv, .kk = nr, .acc = 1, .a = w->pz[0], .ai = 1,
                              .ak = BK, .b = w->dop, .ldb = d->dv,
                              .c = dv + at(d, b, d->tk, j0, h, d->dv), .ldc = vs, .cols = ALL,
                              .ks = uniform ? ALL : seers});
            tile_gemm(&(gemm){.m = nj, .n = d->dk, .kk = nr, .acc = 1, .a = w->g[0], .ai = 1,
                              .ak = BK, .b = w->qp, .ldb = d->dk,
                              .c = dk + at(d, b, d->tk, j0, h, d->dk), .ldc = qs, .cols = ALL,
                              .ks = seers});
        }
    }
}

void tfc_cpu_attention_backward(tfc_backend *be, const tfc_attn_desc *d, const float *q,
                                const float *k, const float *v, const float *o,
                                const float *lse, const float *dout, float *dq, float *dk,
                                float *dv)
{
    const int64_t tasks = (int64_t)d->n * d->heads;
    const int nt = tfc_cpu_threads(be, work(d));
#pragma omp parallel for TFC_CPU_STATIC(tasks, nt)
    for (int64_t t = 0; t < tasks; t++) {
        /* stack arrays: no allocation (D: 4 bytes a row, at least one: a VLA may not be
         * empty) */
        float kt[(size_t)d->dk * BK], vt[(size_t)d->dv * BK], kp[(size_t)BK * d->dk];
        float qp[(size_t)BQ * d->dk], dop[(size_t)BQ * d->dv], D[d->tq > 0 ? d->tq : 1];
        grad_scratch w = {.kt = kt, .vt = vt, .kp = kp, .qp = qp, .dop = dop, .D = D};
        backward_head(d, (int)(t / d->heads), (int)(t % d->heads), q, k, v, o, lse, dout, dq,
                      dk, dv, &w);
    }
}
