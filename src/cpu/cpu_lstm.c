/* CPU LSTM over a whole sequence (Keras's formulation, gates i, f, c, o; see backend.h).
 * Forward: per step gates = bias + x_t·K + h_{t-1}·R, one GEMM against [K; R] stacked, then
 * the element-wise cell; or, where K is wide (fused_input), one GEMM x·K for every step at
 * once straight into `gates` and per step h_{t-1}·R added into that step's slice. Backward
 * walks the steps in reverse computing dgates (and dh_{t-1} = dgates·Rᵀ per step), written
 * in panels of 16 columns as it goes; drkernel, dkernel and dx are then one GEMM each over
 * all n·t rows with dgates as their packed B (h_prevᵀ·dgates, xᵀ·dgates) or their A
 * (dgates·Kᵀ), so that only h_prev and x are packed after the recurrence.
 * The sequences of a batch never meet in the recurrence, so they go through all t steps in
 * blocks of a few rows inside one parallel region, each block claimed by whichever thread is
 * free: no barrier per step, which on a busy machine would make every step wait for the most
 * descheduled thread, and a descheduled thread simply takes fewer blocks (docs/cpu.md).
 * dbias is summed per block inside the backward region, while dgates is still in cache.
 * The per-step GEMMs run on the kernels packed once per pass (cpu_panel.c), since OpenBLAS
 * would re-pack all of them for each thread's few rows at every step; on a frozen backend the
 * forward pass's packed [K; R] is kept from call to call (tfc_cpu_kept). */
#include "cpu/cpu_internal.h"

#include <omp.h>

#ifdef TFC_X86_SIMD
#include <immintrin.h>
#endif

/* Workspace layout (floats): dgates: every step's dz in panels of 16 gate columns,
 * [⌈4u/16⌉][n*t][16], rows step-major (row s n + i): the B of the weight gradients' GEMMs
 * and the A of dx's; hprev: h_prevᵀ [u, n*t] then xᵀ [in, n*t] in panels of 8 rows, columns
 * step-major (the weight gradients' A; h_prev is h one step back, 0 at the first); dxs: dx
 * [n*t, in] step-major; dh [n, u]; dc [n, u]; zero [u] (the h_0 = c_0 = 0 row); packed:
 * [K; R] [in + u, 4u] (or R alone) packed for the forward GEMMs, or Rᵀ [4u, u] then Kᵀ
 * [4u, in] for the backward ones; dz: per thread its block's dz rows [rows, 4u]; table
 * (with ids): [vocab, 4u], the table's rows times K in the forward pass, the sums of
 * dgates' rows by id in the backward one; dbias: a double [4u] per block of
 * sequences. */
typedef struct lstm_ws {
    float *dgates, *hprev, *dxs, *dh, *dc, *zero, *packed, *dz, *table;
    double *dbias;
} lstm_ws;

/* The batch's split (cpu_internal.h), by the recurrent GEMMs' multiply-adds */
static tfc_rnn_split split(const tfc_backend *be, const tfc_lstm_desc *d)
{
    return tfc_cpu_rnn_split(be, d->n, (int64_t)d->n * d->t * 4 * d->units * d->units);
}

/* Whether the forward pass multiplies x_t by K inside the recurrence, as rows of one GEMM
 * with h_{t-1}·R: it saves writing every step's x·K to `gates` and reading it back, but
 * streams K once per step and block, so only while [K; R] packed fits in LSTM_FUSE_BYTES
 * (about an L2 cache) and K is no bigger than R; past that, one OpenBLAS GEMM for all steps
 * reads K once. With ids, the same packed [K; R] and the same sums (below). */
#define LSTM_FUSE_BYTES ((size_t)2 << 20)

static int fused_input(const tfc_lstm_desc *d)
{
    return d->in <= d->units &&
           tfc_cpu_panels_floats(d->in + d->units, 4 * d->units) * sizeof(float) <=
               LSTM_FUSE_BYTES;
}

/* Whether a fused forward pass with blocks of at most `most` rows takes x·K out of the
 * recurrence: one panel GEMM over all steps first (gates = x·K, the sums the fused GEMM
 * starts with), then each step's GEMM continues them from gates (from_c) with h_{t-1}·R, as
 * the ids' table does: the same bits. A step of a few rows is bound by streaming [K; R] from
 * L2 (fortunes_classify's LSTM, one sequence: 128 KB a step; 1.15 us a step fused, 0.65
 * hoisted, this stop's Zen 4), where the GEMM over all steps reads K once per tile of
 * TFC_RNN_BLOCK_ROWS rows; from HOIST_MAX_ROWS rows a block a step reads K for enough rows. */
#define HOIST_MAX_ROWS 4

static int hoisted_input(const tfc_lstm_desc *d, int most)
{
    return d->vocab <= 0 && fused_input(d) && most <= HOIST_MAX_ROWS;
}

/* Table K's floats kept on a frozen backend at most (4 MB) */
#define TABLE_KEPT_MAX (1 << 20)
#define KEPT_TABLE (-1001)

/* Whether lstm_forward/backward take ids for this shape (tfc_backend.lstm_ids): where the
 * input is fused (the forward pass then gives the bits it gives without ids) and the
 * vocabulary has at most half as many rows as the largest batch (d->n) has tokens, so that
 * its products cost less than the tokens' did; or on a frozen backend (a predictor), which
 * keeps table K from call to call (tfc_cpu_kept) where it has at most TABLE_KEPT_MAX
 * floats: a step then reads a row of it where it read x_t's part of [K; R]
 * (fortunes_char_lstm's batch-1 call: 64 KB of K of the step's 320 KB). */
int tfc_cpu_lstm_ids(const tfc_backend *be, const tfc_lstm_desc *d)
{
    return d->vocab > 0 && fused_input(d) &&
           (2 * (int64_t)d->vocab <= (int64_t)d->n * d->t ||
            (be->frozen && (int64_t)d->vocab * 4 * d->units <= TABLE_KEPT_MAX));
}

static int64_t packed_floats(const tfc_lstm_desc *d)
{
    const int u = d->units, G = 4 * u;
    size_t f = tfc_cpu_panels_floats(d->in + u, G);
    size_t b = tfc_cpu_panels_floats(G, u) + tfc_cpu_panels_floats(G, d->in);
    return (int64_t)(f > b ? f : b);
}

/* Floats of each workspace piece but dbias, in carve's order */
#define WS_PIECES 9

static void ws_floats(const tfc_backend *be, const tfc_lstm_desc *d, int64_t f[WS_PIECES])
{
    const int64_t nt = (int64_t)d->n * d->t, u = d->units;
    const int ids = d->vocab > 0; /* then no xᵀ panels and no dx rows */
    f[0] = (int64_t)tfc_cpu_panels_floats((int)nt, 4 * (int)u);
    f[1] = (int64_t)((u + 7) / 8 + (ids ? 0 : (d->in + 7) / 8)) * 8 * nt;
    f[2] = ids ? 0 : nt * d->in;
    f[3] = f[4] = (int64_t)d->n * u;
    f[5] = u;
    f[6] = packed_floats(d);
    f[7] = (int64_t)split(be, d).threads * split(be, d).most * 4 * u;
    f[8] = ids ? (int64_t)d->vocab * 4 * u : 0;
}

static lstm_ws carve(const tfc_backend *be, const tfc_lstm_desc *d, void *ws)
{
    int64_t f[WS_PIECES];
    ws_floats(be, d, f);
    float *p[WS_PIECES + 1];
    p[0] = ws;
    for (int i = 1; i <= WS_PIECES; i++) p[i] = p[i - 1] + tfc_cpu_padded(f[i - 1]);
    lstm_ws w = {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], (double *)p[9]};
    return w;
}

size_t tfc_cpu_lstm_workspace(tfc_backend *be, const tfc_lstm_desc *d)
{
    int64_t f[WS_PIECES];
    ws_floats(be, d, f);
    size_t floats = 0;
    for (int i = 0; i < WS_PIECES; i++) floats += tfc_cpu_padded(f[i]);
    return floats * sizeof(float) + (size_t)split(be, d).blocks * 4 * d->units * sizeof(double);
}

/* One step of one sequence, units [j0, j1) of u. z [4u]: pre-activations in, activations
 * i, f, g, o out.
 *   c = f c_prev + i g,  h = o tanh(c);  a masked step (m == 0) keeps c_prev and h_prev.
 * Each unit's arithmetic is its own (no contraction: -std=c11), so any range gives it the
 * same bits.
 * This and cell_backward are the cells where the CPU has no AVX-512 (cell_forward16 and
 * cell_backward16 below where it has). */
TFC_VECTOR
static void cell_forward(int u, int j0, int j1, float *z, const float *hp, const float *cp,
                         float m, float *h, float *c)
{
#pragma omp simd
    for (int j = j0; j < j1; j++) {
        float ig = tfc_cpu_sigmoidf(z[j]);
        float fg = tfc_cpu_sigmoidf(z[u + j]);
        float gg = tfc_cpu_tanhf(z[2 * u + j]);
        float og = tfc_cpu_sigmoidf(z[3 * u + j]);
        z[j] = ig;
        z[u + j] = fg;
        z[2 * u + j] = gg;
        z[3 * u + j] = og;
        float cn = fg * cp[j] + ig * gg;
        float hn = og * tfc_cpu_tanhf(cn);
        c[j] = tfc_cpu_select(m != 0.0f, cn, cp[j]);
        h[j] = tfc_cpu_select(m != 0.0f, hn, hp[j]);
    }
}

#ifdef TFC_X86_SIMD
/* The cells again in AVX-512 intrinsics, 16 units a vector: the same formulas as
 * tfc_cpu_expf, tfc_cpu_sigmoidf and tfc_cpu_tanhf, but with fused multiply-adds, the
 * exponent applied by vscalefps, and every division a reciprocal estimate refined by one
 * Newton step (within an ulp or two of the quotient). GCC's vector code for the loops above
 * keeps a multiply and an add apart (ISO C: no contraction) and divides five times a unit,
 * at ten cycles a vector: these run the forward cell in well under half their time. */
#define AVX512 __attribute__((target("avx512f")))

static inline AVX512 __m512 exp16(__m512 x)
{
    x = _mm512_min_ps(_mm512_set1_ps(88.8f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
    const __m512 magic = _mm512_set1_ps(12582912.0f);
    __m512 fn = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), magic),
                              magic);
    __m512 r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(fn, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, fn);
}

/* 1 / d for d >= 1 (inf gives 0) */
static inline AVX512 __m512 recip16(__m512 d)
{
    __m512 r = _mm512_rcp14_ps(d);
    __m512 e = _mm512_fnmadd_ps(d, r, _mm512_set1_ps(1.0f));
    __mmask16 finite = _mm512_cmp_ps_mask(d, _mm512_set1_ps(INFINITY), _CMP_LT_OQ);
    return _mm512_mask_fmadd_ps(r, finite, e, r);
}

static inline AVX512 __m512 sigmoid16(__m512 x)
{
    return recip16(_mm512_add_ps(_mm512_set1_ps(1.0f), exp16(_mm512_sub_ps(_mm512_setzero_ps(),
                                                                        x))));
}

static inline AVX512 __m512 tanh16(__m512 x)
{
    const __m512i sign = _mm512_set1_epi32(INT32_MIN); /* the float sign bit */
    __m512 a = _mm512_castsi512_ps(_mm512_andnot_si512(sign, _mm512_castps_si512(x)));
    __m512 s = _mm512_mul_ps(x, x);
    __m512 p = _mm512_set1_ps(-5.70498872745e-3f);
    p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(2.06390887954e-2f));
    p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(-5.37397155531e-2f));
    p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(1.33314422036e-1f));
    p = _mm512_fmadd_ps(p, s, _mm512_set1_ps(-3.33332819422e-1f));
    __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(p, s), x, x);
    __m512 q = recip16(_mm512_add_ps(exp16(_mm512_add_ps(a, a)), _mm512_set1_ps(1.0f)));
    __m512 big = _mm512_fnmadd_ps(_mm512_set1_ps(2.0f), q, _mm512_set1_ps(1.0f));
    big = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(big),
                                              _mm512_and_si512(sign, _mm512_castps_si512(x))));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, _mm512_set1_ps(0.625f), _CMP_LT_OQ),
                                big, small);
}

/* the lanes of units j.. that exist */
static inline AVX512 __mmask16 lanes(int u, int j)
{
    return u - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (u - j)) - 1);
}

AVX512 static void cell_forward16(int u, int j0, int j1, float *z, const float *hp,
                                  const float *cp, float m, float *h, float *c)
{
    for (int j = j0; j < j1; j += 16) {
        const __mmask16 k = lanes(j1, j);
        __m512 ig = sigmoid16(_mm512_maskz_loadu_ps(k, z + j));
        __m512 fg = sigmoid16(_mm512_maskz_loadu_ps(k, z + u + j));
        __m512 gg = tanh16(_mm512_maskz_loadu_ps(k, z + 2 * u + j));
        __m512 og = sigmoid16(_mm512_maskz_loadu_ps(k, z + 3 * u + j));
        _mm512_mask_storeu_ps(z + j, k, ig);
        _mm512_mask_storeu_ps(z + u + j, k, fg);
        _mm512_mask_storeu_ps(z + 2 * u + j, k, gg);
        _mm512_mask_storeu_ps(z + 3 * u + j, k, og);
        __m512 cpj = _mm512_maskz_loadu_ps(k, cp + j);
        __m512 cn = _mm512_fmadd_ps(fg, cpj, _mm512_mul_ps(ig, gg));
        if (m != 0.0f) {
            _mm512_mask_storeu_ps(c + j, k, cn);
            _mm512_mask_storeu_ps(h + j, k, _mm512_mul_ps(og, tanh16(cn)));
        } else {
            _mm512_mask_storeu_ps(c + j, k, cpj);
            _mm512_mask_storeu_ps(h + j, k, _mm512_maskz_loadu_ps(k, hp + j));
        }
    }
}

/* db[j..] += the 16 (or k's) floats of v, in double */
static inline AVX512 void sum16(__mmask16 k, __m512 v, double *db)
{
    __m256 lo = _mm512_castps512_ps256(v);
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    const __mmask8 klo = (__mmask8)k, khi = (__mmask8)(k >> 8);
    _mm512_mask_storeu_pd(db, klo, _mm512_add_pd(_mm512_maskz_loadu_pd(klo, db),
                                                 _mm512_cvtps_pd(lo)));
    _mm512_mask_storeu_pd(db + 8, khi, _mm512_add_pd(_mm512_maskz_loadu_pd(khi, db + 8),
                                                     _mm512_cvtps_pd(hi)));
}

AVX512 static void cell_backward16(int u, const float *g, const float *c, const float *cp,
                                   float m, float *dh, float *dc, float *dz, int64_t panels,
                                   double *db)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int j = 0; j < u; j += 16) {
        const __mmask16 k = lanes(u, j);
        float *o[4];
        for (int q = 0; q < 4; q++)
            o[q] = panels ? dz + (int64_t)((q * u + j) / 16) * panels : dz + q * u + j;
        if (m == 0.0f) {
            for (int q = 0; q < 4; q++) _mm512_mask_storeu_ps(o[q], k, _mm512_setzero_ps());
            continue;
        }
        __m512 ig = _mm512_maskz_loadu_ps(k, g + j), fg = _mm512_maskz_loadu_ps(k, g + u + j);
        __m512 gg = _mm512_maskz_loadu_ps(k, g + 2 * u + j);
        __m512 og = _mm512_maskz_loadu_ps(k, g + 3 * u + j);
        __m512 dhj = _mm512_maskz_loadu_ps(k, dh + j);
        __m512 tc = tanh16(_mm512_maskz_loadu_ps(k, c + j));
        __m512 dog = _mm512_mul_ps(dhj, tc);
        __m512 dcj = _mm512_fmadd_ps(_mm512_mul_ps(dhj, og), _mm512_fnmadd_ps(tc, tc, one),
                                     _mm512_maskz_loadu_ps(k, dc + j));
        __m512 v[4];
        v[0] = _mm512_mul_ps(_mm512_mul_ps(dcj, gg), _mm512_fnmadd_ps(ig, ig, ig));
        v[1] = _mm512_mul_ps(_mm512_mul_ps(dcj, _mm512_maskz_loadu_ps(k, cp + j)),
                             _mm512_fnmadd_ps(fg, fg, fg));
        v[2] = _mm512_mul_ps(_mm512_mul_ps(dcj, ig), _mm512_fnmadd_ps(gg, gg, one));
        v[3] = _mm512_mul_ps(dog, _mm512_fnmadd_ps(og, og, og));
        for (int q = 0; q < 4; q++) {
            _mm512_mask_storeu_ps(o[q], k, v[q]);
            if (db) sum16(k, v[q], db + q * u + j);
        }
        _mm512_mask_storeu_ps(dc + j, k, _mm512_mul_ps(dcj, fg));
        _mm512_mask_storeu_ps(dh + j, k, _mm512_setzero_ps());
    }
}
#endif

/* The cells' kernel: 2 the AVX-512 intrinsics, 0 the loops above; -1 the best this CPU runs,
 * unless tfc_cpu_lstm_cells_isa chose */
static int cells_chosen = -1;

static int cells_best(void)
{
#ifdef TFC_X86_SIMD
    if (__builtin_cpu_supports("avx512f")) return 2;
#endif
    return 0;
}

int tfc_cpu_lstm_cells_isa(int isa)
{
    if (isa > cells_best() || isa == 1) return 0;
    cells_chosen = isa;
    return 1;
}

static int cells_isa(void)
{
    return cells_chosen >= 0 ? cells_chosen : cells_best();
}

/* x [n, t, in] (with ids: the table [vocab, in]), kernel [in, 4u], rkernel [u, 4u], bias
 * [4u] or NULL (no bias), mask [n, t] or NULL; y [n, t, u] (may be hseq itself) or [n, u];
 * hseq, cseq [n, t, u]; gates [n, t, 4u].
 * With ids (tfc_cpu_lstm_ids), table K is one small GEMM (vocab rows, not n t) on the
 * packed [K; R], and each step's GEMM continues the sums from the rows of it that the step's
 * ids pick (from_c): the same products in the same order as x_t's own, so the same bits.
 * A frozen backend keeps the table (tfc_cpu_kept, for the Embedding's table and K): it is
 * made on the first call and after a write to either, not on every call. */
/* What a forward pass's blocks of sequences read and write. */
typedef struct lstm_fwd {
    const tfc_lstm_desc *d;
    const float *x, *bias, *mask, *packed;
    const int32_t *ids;
    float *hseq, *cseq, *gates;
    lstm_ws w;
    int fuse, hoist, ki, isa;
} lstm_fwd;

/* Rows [v0, v0 + TFC_RNN_BLOCK_ROWS) of table K (with ids): each row's sums over x_t's part
 * as the fused GEMM starts them. */
static void forward_table(const lstm_fwd *f, int v0)
{
    const tfc_lstm_desc *d = f->d;
    const int G = 4 * d->units, in = d->in;
    tfc_panel_gemm g = {.m = d->vocab - v0 < TFC_RNN_BLOCK_ROWS ? d->vocab - v0
                                                             : TFC_RNN_BLOCK_ROWS,
                        .n = G, .packed = f->packed, .ldp = in + d->units, .set = 1,
                        .c = f->w.table + (int64_t)v0 * G, .ldc = G,
                        .a1 = {.a = f->x + (int64_t)v0 * in, .lda = in, .k = in}};
    tfc_cpu_panel_gemm(&g);
}

/* Hoisted input (hoisted_input): gates = x·K for the rows [r0, r1) of the batch at every
 * step, columns [c0, c1) (whole panels). */
static void hoist_rows(const lstm_fwd *f, int r0, int r1, int c0, int c1)
{
    const tfc_lstm_desc *d = f->d;
    const int T = d->t, G = 4 * d->units, in = d->in;
    tfc_panel_gemm g = {.m = (r1 - r0) * T, .n = c1 - c0,
                        .packed = f->packed + (size_t)(c0 / 16) * 16 * (size_t)(f->ki + d->units),
                        .ldp = f->ki + d->units, .set = 1,
                        .c = f->gates + (int64_t)r0 * T * G + c0, .ldc = G,
                        .a1 = {.a = f->x + (int64_t)r0 * T * in, .lda = in, .k = in}};
    tfc_cpu_panel_gemm(&g);
}

/* Block b of nb: its sequences through all t steps. */
static void forward_block(const lstm_fwd *f, int b, int nb)
{
    const tfc_lstm_desc *d = f->d;
    const int n = d->n, T = d->t, u = d->units, G = 4 * u, in = d->in, ki = f->ki;
    const float *x = f->x, *bias = f->bias, *mask = f->mask;
    float *hseq = f->hseq, *cseq = f->cseq, *gates = f->gates;
    int r0, r1;
    tfc_cpu_block_rows(n, b, nb, &r0, &r1);
    if (f->hoist && r1 > r0) hoist_rows(f, r0, r1, 0, G);
    for (int s = 0; s < T && r1 > r0; s++) {
        /* a step that masks every sequence of the block (the padding after the longest)
         * keeps each one's c and h, as the cell does, without its GEMM and activations (its
         * gates stay unwritten: the backward cell does not read a masked step's) */
        if (mask && tfc_cpu_rnn_block_masked(mask, T, r0, r1, s)) {
            for (int i = r0; i < r1; i++) {
                const int64_t row = (int64_t)i * T + s;
                memcpy(hseq + row * u, s > 0 ? hseq + (row - 1) * u : f->w.zero,
                       (size_t)u * sizeof(float));
                memcpy(cseq + row * u, s > 0 ? cseq + (row - 1) * u : f->w.zero,
                       (size_t)u * sizeof(float));
            }
            continue;
        }
        /* fused: gates_s = bias + x_s · K + h_{s-1} · R; else gates_s += h_{s-1} · R */
        const int64_t first = (int64_t)r0 * T + s;
        const tfc_panel_a h = {.a = s > 0 ? hseq + (first - 1) * u : NULL, .lda = T * u,
                               .k = s > 0 ? u : 0};
        tfc_panel_gemm g = {.m = r1 - r0, .n = G, .packed = f->packed, .ldp = ki + u,
                            .c = gates + first * G, .ldc = T * G, .reverse = s & 1};
        if (f->ids) { /* gates_s = bias + (the ids' rows of table K + h_{s-1} · R) */
            for (int i = r0; i < r1; i++) {
                const int64_t row = (int64_t)i * T + s;
                memcpy(gates + row * G, f->w.table + (int64_t)f->ids[row] * G,
                       (size_t)G * sizeof(float));
            }
            g.packed = f->packed + (size_t)in * 16; /* R's rows of [K; R] */
            g.a1 = h, g.set = g.from_c = 1, g.init = bias;
        } else if (f->hoist) { /* gates_s = bias + (x_s · K in gates + h_{s-1} · R) */
            g.packed = f->packed + (size_t)in * 16;
            g.a1 = h, g.set = g.from_c = 1, g.init = bias;
        } else if (f->fuse) {
            g.a1 = (tfc_panel_a){.a = x + first * in, .lda = T * in, .k = in};
            g.a2 = h, g.set = 1, g.init = bias;
        } else {
            g.a1 = h;
        }
        if (f->fuse || s > 0) tfc_cpu_panel_gemm(&g);
        for (int i = r0; i < r1; i++) {
            int64_t row = (int64_t)i * T + s;
            const float *hp = s > 0 ? hseq + (row - 1) * u : f->w.zero;
            const float *cp = s > 0 ? cseq + (row - 1) * u : f->w.zero;
            float m = mask ? mask[row] : 1.0f;
#ifdef TFC_X86_SIMD
            if (f->isa == 2) {
                cell_forward16(u, 0, u, gates + row * G, hp, cp, m, hseq + row * u,
                               cseq + row * u);
                continue;
            }
#endif
            cell_forward(u, 0, u, gates + row * G, hp, cp, m, hseq + row * u, cseq + row * u);
        }
    }
}

/* Few sequences (one block, its rows too few to share) on several threads: each step's gate
 * columns are shared instead. Share t of nt takes units [j0, j1), whole panels of 16, and
 * computes their four gates' columns and their cells; the team meets at a barrier after each
 * step (the next one reads all of h). A product's sum is the same chain in any column range,
 * and a cell is per unit, so the bits are the one block's (cpu_ops.lstm, predictor.raced_bits).
 * Only where a step has COLS_MIN_MACS multiply-adds or more: fortunes_char_lstm's batch-1
 * step (128 units, 32 inputs: 81,920) took about 3.6 us on one thread of this stop's Zen 4,
 * where a barrier costs a few tenths of one. */
#define COLS_MIN_MACS 16384

static int column_shares(const tfc_backend *be, const tfc_lstm_desc *d, const tfc_rnn_split *sp)
{
    const int u = d->units, nt = be->threads;
    if (sp->blocks != 1 || nt < 2 || u % 16 || u / 16 < nt) return 1;
    const int64_t k = (fused_input(d) ? d->in : 0) + u;
    return (int64_t)d->n * k * 4 * u >= COLS_MIN_MACS ? nt : 1;
}

/* The steps of all n sequences on the units of shares tid, tid + team, ... of nt (a team
 * of `team`; one: no barrier). */
static void forward_cols(const lstm_fwd *f, int tid, int team, int nt)
{
    const tfc_lstm_desc *d = f->d;
    const int n = d->n, T = d->t, u = d->units, G = 4 * u, in = d->in, ki = f->ki;
    const int panels = u / 16;
    const float *x = f->x, *mask = f->mask;
    float *hseq = f->hseq, *cseq = f->cseq, *gates = f->gates;
    if (f->hoist) /* each share's own columns: read by no other thread */
        for (int t = tid; t < nt; t += team) {
            const int j0 = 16 * (panels * t / nt), j1 = 16 * (panels * (t + 1) / nt);
            for (int q = 0; q < 4 && j1 > j0; q++) hoist_rows(f, 0, n, q * u + j0, q * u + j1);
        }
    for (int s = 0; s < T; s++) {
        const int masked = mask && tfc_cpu_rnn_block_masked(mask, T, 0, n, s);
        for (int t = tid; t < nt; t += team) {
            const int j0 = 16 * (panels * t / nt), j1 = 16 * (panels * (t + 1) / nt);
            if (j1 == j0) continue;
            if (masked) { /* as forward_block: c and h kept */
                for (int i = 0; i < n; i++) {
                    const int64_t row = (int64_t)i * T + s;
                    memcpy(hseq + row * u + j0, s > 0 ? hseq + (row - 1) * u + j0 : f->w.zero,
                           (size_t)(j1 - j0) * sizeof(float));
                    memcpy(cseq + row * u + j0, s > 0 ? cseq + (row - 1) * u + j0 : f->w.zero,
                           (size_t)(j1 - j0) * sizeof(float));
                }
                continue;
            }
            const int64_t first = s;
            const tfc_panel_a h = {.a = s > 0 ? hseq + (first - 1) * u : NULL, .lda = T * u,
                                   .k = s > 0 ? u : 0};
            for (int q = 0; q < 4; q++) { /* gate q's columns of the share */
                const int c0 = q * u + j0;
                tfc_panel_gemm g = {.m = n, .n = j1 - j0, .ldp = ki + u,
                                    .c = gates + first * G + c0, .ldc = T * G,
                                    .reverse = s & 1};
                const float *packed = f->packed;
                if (f->ids) {
                    for (int i = 0; i < n; i++) {
                        const int64_t row = (int64_t)i * T + s;
                        memcpy(gates + row * G + c0, f->w.table + (int64_t)f->ids[row] * G + c0,
                               (size_t)(j1 - j0) * sizeof(float));
                    }
                    packed += (size_t)in * 16;
                    g.a1 = h, g.set = g.from_c = 1, g.init = f->bias ? f->bias + c0 : NULL;
                } else if (f->hoist) {
                    packed += (size_t)in * 16;
                    g.a1 = h, g.set = g.from_c = 1, g.init = f->bias ? f->bias + c0 : NULL;
                } else if (f->fuse) {
                    g.a1 = (tfc_panel_a){.a = x + first * in, .lda = T * in, .k = in};
                    g.a2 = h, g.set = 1, g.init = f->bias ? f->bias + c0 : NULL;
                } else {
                    g.a1 = h;
                }
                g.packed = packed + (size_t)(c0 / 16) * 16 * g.ldp;
                if (f->fuse || s > 0) tfc_cpu_panel_gemm(&g);
            }
            for (int i = 0; i < n; i++) {
                const int64_t row = (int64_t)i * T + s;
                const float *hp = s > 0 ? hseq + (row - 1) * u : f->w.zero;
                const float *cp = s > 0 ? cseq + (row - 1) * u : f->w.zero;
                const float m = mask ? mask[row] : 1.0f;
                float *z = gates + row * G;
#ifdef TFC_X86_SIMD
                if (f->isa == 2) {
                    cell_forward16(u, j0, j1, z, hp, cp, m, hseq + row * u, cseq + row * u);
                    continue;
                }
#endif
                cell_forward(u, j0, j1, z, hp, cp, m, hseq + row * u, cseq + row * u);
            }
        }
        if (team > 1) {
#pragma omp barrier
        }
    }
}

void tfc_cpu_lstm_forward(tfc_backend *be, const tfc_lstm_desc *d, const float *x,
                          const float *kernel, const float *rkernel, const float *bias,
                          const float *mask, float *y, float *hseq, float *cseq, float *gates,
                          void *ws)
{
    const int n = d->n, T = d->t, u = d->units, G = 4 * u, in = d->in;
    if (n <= 0 || T <= 0 || u <= 0) return;
    lstm_ws w = carve(be, d, ws);
    memset(w.zero, 0, (size_t)u * sizeof(float));
    const int32_t *ids = d->vocab > 0 ? d->ids : NULL;
    TFC_ASSERT(!ids || fused_input(d));
    const int fuse = fused_input(d), ki = fuse ? in : 0; /* x's rows in the packed [K; R] */
    if (!fuse) {
        tfc_cpu_gemm(be, 0, 0, n * T, G, in, 1.0f, x, in, kernel, G, 0.0f, gates, G);
        if (bias) tfc_cpu_bias_add(be, (int64_t)n * T, G, bias, gates);
    }
    const tfc_rnn_split sp = split(be, d);
    int vocab = ids ? d->vocab : 0; /* the table's rows to make now */
    if (ids) {
        const float *const tsrc[2] = {x, kernel};
        const size_t tbytes[2] = {(size_t)d->vocab * in * sizeof(float),
                                  (size_t)in * G * sizeof(float)};
        int tfresh;
        float *table = (int64_t)d->vocab * G <= TABLE_KEPT_MAX
                           ? tfc_cpu_kept(be, tsrc, tbytes, KEPT_TABLE, (size_t)d->vocab * G,
                                          &tfresh)
                           : NULL;
        if (table) w.table = table, vocab = tfresh ? vocab : 0;
    }
    const int nb = sp.blocks;
    /* [K; R] (or R) packed: kept on a frozen backend, packed there only when it is fresh;
     * else into the workspace, R only where a step reads it */
    const float *const src[2] = {fuse ? kernel : NULL, rkernel};
    const size_t bytes[2] = {fuse ? (size_t)in * G * sizeof(float) : 0,
                             (size_t)u * G * sizeof(float)};
    int fresh;
    float *packed = tfc_cpu_kept(be, src, bytes, ki, tfc_cpu_panels_floats(ki + u, G), &fresh);
    const int pack_k = fuse && fresh, pack_r = packed ? fresh : T > 1;
    if (!packed) packed = w.packed;
    const lstm_fwd f = {d,    x,    bias,  mask, packed,
                        ids,  hseq, cseq,  gates, w,
                        fuse, hoisted_input(d, sp.most), ki, cells_isa()};
    /* the team of the column shares (cols > 1), or of the blocks */
    const int cols = column_shares(be, d, &sp), team = tfc_cpu_team(cols > 1 ? cols : sp.threads);
    if (team == 1) { /* no OpenMP region: a one-thread one ends in a futex call */
        if (pack_k) tfc_cpu_pack_panels_ld(in, G, kernel, G, 0, packed, in + u);
        if (pack_r) tfc_cpu_pack_panels_ld(u, G, rkernel, G, 0, packed + (size_t)ki * 16, ki + u);
        for (int v0 = 0; v0 < vocab; v0 += TFC_RNN_BLOCK_ROWS) forward_table(&f, v0);
        /* the column shares on one thread (the team cut to one) would run each gate's
         * columns apart: the one block gives their bits, its GEMMs whole */
        for (int b = 0; b < nb; b++) forward_block(&f, b, nb);
    } else {
#pragma omp parallel num_threads(team)
        {
            /* the team packs the kernels (each thread some panels) before any block starts */
            if (pack_k) tfc_cpu_pack_panels_ld(in, G, kernel, G, 0, packed, in + u);
            if (pack_r)
                tfc_cpu_pack_panels_ld(u, G, rkernel, G, 0, packed + (size_t)ki * 16, ki + u);
#pragma omp for schedule(static)
            for (int v0 = 0; v0 < vocab; v0 += TFC_RNN_BLOCK_ROWS) forward_table(&f, v0);
            if (cols > 1) {
                forward_cols(&f, omp_get_thread_num(), omp_get_num_threads(), cols);
            } else {
#pragma omp for schedule(dynamic, 1)
                for (int b = 0; b < nb; b++) forward_block(&f, b, nb);
            }
        }
    }
    tfc_cpu_rnn_output(n, T, u, d->return_sequences, hseq, y);
}

/* One step of one sequence, in reverse. With tc = tanh(c):
 *   do = dh tc,  dc += dh o (1 - tc^2),  di = dc g,  dg = dc i,  df = dc c_prev,
 *   dc_prev = dc f,  and through the activations dz = (di i(1-i), df f(1-f), dg (1-g^2),
 *   do o(1-o)). dh is consumed (zeroed; the caller adds dgates·Rᵀ for the step before).
 * dz's gate column e goes to dz[e], or with panels (u a multiple of 16) to dgates' panel of
 * 16 columns, dz[(e / 16) panels + e % 16]; db (NULL: none) adds dz.
 * A masked step passes dh and dc through untouched and has zero dgates. */
TFC_VECTOR
static void cell_backward(int u, const float *g, const float *c, const float *cp, float m,
                          float *dh, float *dc, float *dz, int64_t panels, double *db)
{
    for (int j0 = 0; j0 < u; j0 += 16) {
        const int q = u - j0 < 16 ? u - j0 : 16;
        float *o[4];
        for (int k = 0; k < 4; k++)
            o[k] = panels ? dz + (int64_t)((k * u + j0) / 16) * panels : dz + k * u + j0;
        if (m == 0.0f) {
            for (int k = 0; k < 4; k++) memset(o[k], 0, (size_t)q * sizeof(float));
            continue;
        }
        float *o0 = o[0], *o1 = o[1], *o2 = o[2], *o3 = o[3];
#pragma omp simd
        for (int jj = 0; jj < q; jj++) {
            const int j = j0 + jj;
            float ig = g[j], fg = g[u + j], gg = g[2 * u + j], og = g[3 * u + j];
            float tc = tfc_cpu_tanhf(c[j]);
            float dog = dh[j] * tc;
            float dcj = dc[j] + dh[j] * og * (1.0f - tc * tc);
            float di = dcj * gg * ig * (1.0f - ig), df = dcj * cp[j] * fg * (1.0f - fg);
            float dg = dcj * ig * (1.0f - gg * gg), dO = dog * og * (1.0f - og);
            o0[jj] = di, o1[jj] = df, o2[jj] = dg, o3[jj] = dO;
            dc[j] = dcj * fg;
            dh[j] = 0.0f;
        }
        for (int k = 0; db && k < 4; k++) tfc_cpu_sum_row(q, o[k], db + k * u + j0);
    }
}

/* dz [r1 - r0, g], sequences r0..r1-1 at step s, into dgates' panels of 16 columns, rows
 * step-major (row s n + i): contiguous there. */
static void dz_to_panels(int g, int64_t nt, int n, int s, int r0, int r1, const float *dz,
                         float *dgates)
{
    for (int p = 0; p * 16 < g; p++) {
        const int cols = g - p * 16 < 16 ? g - p * 16 : 16;
        float *dst = dgates + ((size_t)p * nt + (int64_t)s * n + r0) * 16;
        for (int i = 0; i < r1 - r0; i++, dst += 16) {
            const float *src = dz + (int64_t)i * g + p * 16;
            if (cols == 16) {
                memcpy(dst, src, 16 * sizeof(float)); /* a constant size: inlined */
            } else {
                memcpy(dst, src, (size_t)cols * sizeof(float));
                memset(dst + cols, 0, (size_t)(16 - cols) * sizeof(float));
            }
        }
    }
}

/* table[ids of rows l0.. l0+k-1, 0..cols) += those rows of dgates, its panels of 16 columns
 * from `panels` (NT rows apart); row l is step l / n of sequence l % n. Rows in order: the
 * same sums at any thread count. */
TFC_VECTOR
static void sum_by_id(const tfc_lstm_desc *d, const int32_t *ids, int cols, const float *panels,
                      int64_t NT, int64_t l0, int k, float *table)
{
    const int G = 4 * d->units;
    for (int p = 0; p * 16 < cols; p++) {
        const int w = cols - p * 16 < 16 ? cols - p * 16 : 16;
        const float *from = panels + (size_t)p * NT * 16;
        for (int64_t l = l0; l < l0 + k; l++) {
            float *to = table + (int64_t)ids[(l % d->n) * d->t + l / d->n] * G + p * 16;
            const float *src = from + (l - l0) * 16;
#pragma omp simd
            for (int c = 0; c < w; c++) to[c] += src[c];
        }
    }
}

/* After the recurrence: the weight gradients over LSTM_WG_ROWS rows of dgates at a time
 * (their panel rows in L1, the activations they meet in L2), on column groups of
 * LSTM_WG_COLS that the threads take in turn; dx over LSTM_DX_ROWS rows and LSTM_DX_DEPTH
 * gate columns at a time (Kᵀ's rows in L1). Each element's sum is the same at any thread
 * count. */
#define LSTM_WG_ROWS 256
#define LSTM_WG_COLS 128
#define LSTM_DX_ROWS 64
#define LSTM_DX_DEPTH 256 /* a multiple of 16 */

/* dy [n, t, u] or [n, u]; dx [n, t, in] (with ids: the table's gradient [vocab, in]; NULL
 * when the input needs no gradient), dkernel, drkernel, dbias (NULL without bias)
 * accumulate. With ids, dgates' rows are summed by id into a [vocab, 4u] table D while the
 * weight gradients read them, and then dkernel += tableᵀ D and dx += D Kᵀ: vocab rows
 * instead of n t each. */
void tfc_cpu_lstm_backward(tfc_backend *be, const tfc_lstm_desc *d, const float *x,
                           const float *kernel, const float *rkernel, const float *mask,
                           const float *hseq, const float *cseq, const float *gates,
                           const float *dy, float *dx, float *dkernel, float *drkernel,
                           float *dbias, void *ws)
{
    const int n = d->n, T = d->t, u = d->units, G = 4 * u, in = d->in;
    if (n <= 0 || T <= 0 || u <= 0) return;
    const int64_t NT = (int64_t)n * T;
    lstm_ws w = carve(be, d, ws);
    const int32_t *ids = d->vocab > 0 ? d->ids : NULL;
    memset(w.zero, 0, (size_t)u * sizeof(float));
    if (ids) memset(w.table, 0, (size_t)d->vocab * G * sizeof(float));
    memset(w.dh, 0, (size_t)n * u * sizeof(float));
    memset(w.dc, 0, (size_t)n * u * sizeof(float));
    float *packed_rt = w.packed, *packed_kt = w.packed + tfc_cpu_panels_floats(G, u);
    const tfc_rnn_split sp = split(be, d);
    const int nt = sp.threads, nb = sp.blocks, most = sp.most;
    const int isa = cells_isa();
    /* with whole panels of units, the cell writes dz into dgates' panels itself; else into
     * its thread's rows of dz, copied there after each step */
    const int direct = u % 16 == 0;
#pragma omp parallel num_threads(tfc_cpu_team(nt))
    {
        float *dz = w.dz + (int64_t)omp_get_thread_num() * most * G;
        /* the team packs Rᵀ (and Kᵀ, which waits for dx's GEMMs after the recurrence) */
        if (T > 1) tfc_cpu_pack_panels(G, u, rkernel, G, 1, packed_rt);
        if (dx && !ids) tfc_cpu_pack_panels(G, in, kernel, G, 1, packed_kt);
#pragma omp for schedule(dynamic, 1)
        for (int b = 0; b < nb; b++) {
            int r0, r1;
            tfc_cpu_block_rows(n, b, nb, &r0, &r1);
            double *db = w.dbias + (int64_t)b * G;
            if (dbias) memset(db, 0, (size_t)G * sizeof(double));
            for (int s = T - 1; s >= 0 && r1 > r0; s--) {
                for (int i = r0; i < r1; i++) {
                    int64_t row = (int64_t)i * T + s;
                    float *dh = w.dh + (int64_t)i * u, *dzi = dz + (int64_t)(i - r0) * G;
                    tfc_cpu_rnn_add_dy(n, T, u, d->return_sequences, i, s, dy, dh);
                    const float *cp = s > 0 ? cseq + (row - 1) * u : w.zero;
                    float m = mask ? mask[row] : 1.0f;
                    float *dci = w.dc + (int64_t)i * u;
                    float *to = direct ? w.dgates + ((int64_t)s * n + i) * 16 : dzi;
#ifdef TFC_X86_SIMD
                    if (isa == 2) {
                        cell_backward16(u, gates + row * G, cseq + row * u, cp, m, dh, dci,
                                        to, direct ? NT * 16 : 0, dbias ? db : NULL);
                        continue;
                    }
#endif
                    cell_backward(u, gates + row * G, cseq + row * u, cp, m, dh, dci, to,
                                  direct ? NT * 16 : 0, dbias ? db : NULL);
                }
                /* this step's dz: rows s n + r0.. of dgates' panels, or rows of dz */
                tfc_panel_a a = {.a = dz, .lda = G, .k = G};
                if (direct)
                    a = (tfc_panel_a){.a = w.dgates + ((int64_t)s * n + r0) * 16,
                                      .lda = (int)(NT * 16), .k = G, .layout = TFC_PANEL_COLS16};
                else
                    dz_to_panels(G, NT, n, s, r0, r1, dz, w.dgates);
                if (s > 0) { /* dh_{s-1} += dz_s · Rᵀ */
                    tfc_panel_gemm g = {.m = r1 - r0, .n = u, .packed = packed_rt, .ldp = G,
                                        .a1 = a, .c = w.dh + (int64_t)r0 * u, .ldc = u};
                    tfc_cpu_panel_gemm(&g);
                }
            }
        }
    }
    /* drkernel += h_prevᵀ · dgates and dkernel += xᵀ · dgates, dx += dgates · Kᵀ, all over
     * the n t rows in dgates' (step-major) order */
    const int lda8 = (int)(8 * NT), groups = (G + LSTM_WG_COLS - 1) / LSTM_WG_COLS;
    const int chunks = (int)((NT + LSTM_DX_ROWS - 1) / LSTM_DX_ROWS);
    float *hprev = w.hprev, *xt = w.hprev + (int64_t)((u + 7) / 8) * lda8;
    int wt = be->threads;
    if (NT * G * (u + in) < TFC_RNN_PAR_MIN_MACS) wt = 1;
#pragma omp parallel num_threads(tfc_cpu_team(wt))
    {
#pragma omp for schedule(static)
        for (int s = 0; s < T; s++)
            for (int i = 0; i < n; i++) {
                const int64_t l = (int64_t)s * n + i, row = (int64_t)i * T + s;
                tfc_cpu_pack_rows8_col(u, s > 0 ? hseq + (row - 1) * u : w.zero,
                                       hprev + l * 8, lda8);
                if (!ids) tfc_cpu_pack_rows8_col(in, x + row * in, xt + l * 8, lda8);
            }
#pragma omp for schedule(dynamic, 1) nowait
        for (int q = 0; q < groups; q++) {
            const int j0 = q * LSTM_WG_COLS;
            const int cols = G - j0 < LSTM_WG_COLS ? G - j0 : LSTM_WG_COLS;
            for (int64_t l0 = 0; l0 < NT; l0 += LSTM_WG_ROWS) {
                const int k = NT - l0 < LSTM_WG_ROWS ? (int)(NT - l0) : LSTM_WG_ROWS;
                tfc_panel_gemm g = {
                    .m = u, .n = cols, .packed = w.dgates + ((size_t)(j0 / 16) * NT + l0) * 16,
                    .ldp = (int)NT, .c = drkernel + j0, .ldc = G,
                    .a1 = {.a = hprev + l0 * 8, .lda = lda8, .k = k, .layout = TFC_PANEL_ROWS8}};
                tfc_cpu_panel_gemm(&g);
                if (ids) {
                    sum_by_id(d, ids, cols, w.dgates + ((size_t)(j0 / 16) * NT + l0) * 16, NT,
                              l0, k, w.table + j0);
                    continue;
                }
                g.m = in, g.c = dkernel + j0;
                g.a1.a = xt + l0 * 8;
                tfc_cpu_panel_gemm(&g);
            }
        }
#pragma omp for schedule(dynamic, 1)
        for (int q = 0; q < (dx && !ids ? chunks : 0); q++) {
            const int64_t l0 = (int64_t)q * LSTM_DX_ROWS;
            const int rows = NT - l0 < LSTM_DX_ROWS ? (int)(NT - l0) : LSTM_DX_ROWS;
            float *out = w.dxs + l0 * in;
            for (int k0 = 0; k0 < G; k0 += LSTM_DX_DEPTH) {
                tfc_panel_gemm g = {
                    .m = rows, .n = in, .packed = packed_kt + (size_t)k0 * 16, .ldp = G,
                    .set = k0 == 0, .c = out, .ldc = in,
                    .a1 = {.a = w.dgates + (int64_t)(k0 / 16) * NT * 16 + l0 * 16,
                           .lda = (int)(16 * NT),
                           .k = G - k0 < LSTM_DX_DEPTH ? G - k0 : LSTM_DX_DEPTH,
                           .layout = TFC_PANEL_COLS16}};
                tfc_cpu_panel_gemm(&g);
            }
            for (int r = 0; r < rows; r++) { /* row s n + i of dxs is dx's row i t + s */
                const int64_t l = l0 + r;
                float *to = dx + ((l % n) * T + l / n) * in;
                const float *from = out + (int64_t)r * in;
#pragma omp simd
                for (int c = 0; c < in; c++) to[c] += from[c];
            }
        }
    }
    if (ids) { /* the table's gradient and K's, through the sums by id */
        tfc_cpu_gemm(be, 1, 0, in, G, d->vocab, 1.0f, x, in, w.table, G, 1.0f, dkernel, G);
        if (dx) tfc_cpu_gemm(be, 0, 1, d->vocab, in, G, 1.0f, w.table, G, kernel, G, 1.0f, dx, in);
    }
    if (dbias) tfc_cpu_block_sums(nb, G, G, w.dbias, dbias);
}
