/* Attention on the CPU, flash-attention style (Dao et al., 2022): the scores are computed one
 * block of BK keys at a time for a chunk of up to BQ query rows, the block packed transposed
 * so that the chunk's scores are one small GEMM, with an online softmax (a running maximum
 * and sum that rescale what came before), so no more than one BQ x BK block of scores exists
 * per thread at once, and memory stays O(T). Every product (Q Kᵀ, P V, and backward's
 * dO Vᵀ, dS K, (P z)ᵀ dO, dSᵀ Q) is that small GEMM, tile_gemm, register-blocked four rows
 * by sixteen columns. Forward saves each row's log-sum-exp; backward (FlashAttention-2's)
 * recomputes each block of probabilities from it once, per key block and chunk of BQ query
 * rows, one task owning every row of an (example, head), so the results do not depend on the
 * thread count. Blocks outside a row's causal mask or window are skipped. */
#include "core/rng.h"
#include "cpu/cpu_internal.h"

#include <math.h>
#include <stdlib.h>

#define QG 512 /* query rows per forward task: each key block is packed once for them */
#define BQ 64  /* query rows per block of scores */
#define BK 64 /* keys per block of scores (a multiple of tile_gemm's 16 columns) */

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

static inline float dot(const float *a, const float *b, int n)
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

/* The keys [j0, j0 + n) of (b, h), n <= BK, packed transposed for the score GEMMs:
 * kt[c BK + j] = k_{j0+j}[c]; ok[j] = 1 where key j0 + j is real and not masked, else 0
 * (and kt's column zero), so the loops below run over whole blocks of BK. */
static void pack_keys(const tfc_attn_desc *d, int b, int h, int j0, int n, const float *k,
                      int dim, float *kt, int *ok)
{
    if (n < BK) memset(kt, 0, (size_t)dim * BK * 4);
    for (int j = 0; j < BK; j++)
        ok[j] = j < n && (!d->kmask || d->kmask[(size_t)b * (size_t)d->tk + (size_t)(j0 + j)]);
    for (int j = 0; j < n; j++) {
        const float *kj = k + at(d, b, d->tk, j0 + j, h, dim);
        for (int c = 0; c < dim; c++) kt[(size_t)c * BK + (size_t)j] = kj[c];
    }
}

/* Rows [r0, r0 + n) of head h in example b of x [n, t, heads, dim] packed at out, row r at
 * out + r DP(dim), the columns past dim zero (tile_gemm reads B's rows 16 at a time). */
#define DP(dim) (((dim) + 15) & ~15)
static void pack_rows(const tfc_attn_desc *d, int b, int t, int h, int r0, int n, const float *x,
                      int dim, float *out)
{
    for (int r = 0; r < n; r++) {
        float *o = out + (size_t)r * (size_t)DP(dim);
        memcpy(o, x + at(d, b, t, r0 + r, h, dim), (size_t)dim * 4);
        for (int c = dim; c < DP(dim); c++) o[c] = 0.f;
    }
}

/* C = beta C + A B for C [m, n] (row i at c + i ldc, its first n columns written; beta 0
 * does not read C), A [m, kk] (element (i, k) at a[i ai + k ak]: a packed block's rows or,
 * transposed, its columns) and B [kk, n] (row k at b + k ldb, readable up to n rounded up
 * to 16 columns): four rows of C by sixteen columns at a time, their sums held in eight
 * vectors (named arrays of 8, which the compiler keeps in registers) while B's rows stream
 * past and A's elements are broadcast. Each sum runs over k in order. */
TFC_CPU_VECTOR
static void tile_gemm(int m, int n, int kk, const float *a, size_t ai, size_t ak,
                      const float *b, size_t ldb, float beta, float *c, size_t ldc)
{
    for (int i0 = 0; i0 < m; i0 += 4) {
        const int mr = m - i0 < 4 ? m - i0 : 4;
        const float *a0 = a + (size_t)i0 * ai; /* rows past m repeat row i0, not stored */
        const float *a1 = mr > 1 ? a0 + ai : a0, *a2 = mr > 2 ? a0 + 2 * ai : a0;
        const float *a3 = mr > 3 ? a0 + 3 * ai : a0;
        for (int n0 = 0; n0 < n; n0 += 16) {
            float c00[8], c01[8], c10[8], c11[8], c20[8], c21[8], c30[8], c31[8];
#pragma omp simd
            for (int u = 0; u < 8; u++)
                c00[u] = c01[u] = c10[u] = c11[u] = c20[u] = c21[u] = c30[u] = c31[u] = 0.f;
            const float *bk = b + n0;
            for (int k = 0; k < kk; k++, bk += ldb) {
                const size_t o = (size_t)k * ak;
                const float x0 = a0[o], x1 = a1[o], x2 = a2[o], x3 = a3[o];
#pragma omp simd
                for (int u = 0; u < 8; u++) {
                    c00[u] += x0 * bk[u];
                    c01[u] += x0 * bk[8 + u];
                    c10[u] += x1 * bk[u];
                    c11[u] += x1 * bk[8 + u];
                    c20[u] += x2 * bk[u];
                    c21[u] += x2 * bk[8 + u];
                    c30[u] += x3 * bk[u];
                    c31[u] += x3 * bk[8 + u];
                }
            }
            float out[4][16];
#pragma omp simd
            for (int u = 0; u < 8; u++) {
                out[0][u] = c00[u], out[0][8 + u] = c01[u];
                out[1][u] = c10[u], out[1][8 + u] = c11[u];
                out[2][u] = c20[u], out[2][8 + u] = c21[u];
                out[3][u] = c30[u], out[3][8 + u] = c31[u];
            }
            const int nc = n - n0 < 16 ? n - n0 : 16;
            for (int r = 0; r < mr; r++) {
                float *cr = c + (size_t)(i0 + r) * ldc + (size_t)n0;
                if (nc < 16) {
                    for (int u = 0; u < nc; u++)
                        cr[u] = (beta == 0.f ? 0.f : beta * cr[u]) + out[r][u];
                } else if (beta == 0.f) {
#pragma omp simd
                    for (int u = 0; u < 16; u++) cr[u] = out[r][u];
                } else {
#pragma omp simd
                    for (int u = 0; u < 16; u++) cr[u] = beta * cr[u] + out[r][u];
                }
            }
        }
    }
}

/* s[j] = scale s[j] (a row's q . k_{j0+j}) for the keys row i sees (ok, the causal rule, the
 * window), -inf for the others; returns the maximum. */
static inline float mask_scores(const tfc_attn_desc *d, int i, int j0, const int *ok, float *s)
{
    const int causal = d->causal, win = d->window;
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < BK; j++) {
        const int jj = j0 + j;
        const int seen = ok[j] & (!causal | (jj <= i)) & ((win <= 0) | (abs(i - jj) < win));
        s[j] = tfc_cpu_select(seen, d->scale * s[j], -INFINITY);
        mx = s[j] > mx ? s[j] : mx;
    }
    return mx;
}

/* s[j] = exp(s[j] - m) for the BK scores of a block, 0 for -inf ones (an unseen key). */
static inline void exps(float *s, float m)
{
#pragma omp simd
    for (int j = 0; j < BK; j++)
        s[j] = tfc_cpu_select(s[j] > -INFINITY, tfc_cpu_expf(s[j] - m), 0.f);
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
 * chunks of BQ rows: a chunk's scores as one tile_gemm (q read in place), then per row
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
            tile_gemm(r1 - r0, BK, d->dk, q + at(d, b, d->tq, r0, h, d->dk), qs, 1, w->kt, BK,
                      0.f, w->s[0], BK);
            for (int i = r0; i < r1; i++) {
                float *p = w->s[i - r0];
                const int off = d->qmask && d->qmask[(size_t)b * (size_t)d->tq + (size_t)i] == 0.f;
                const float mb = off || !row_meets(d, i, j0, j0 + nj)
                                     ? -INFINITY
                                     : mask_scores(d, i, j0, ok, p);
                if (mb == -INFINITY) { /* no key of the block: nothing added */
                    memset(p, 0, BK * 4);
                    continue;
                }
                float *mi = &m[i - i0], *li = &l[i - i0], *oi = o + at(d, b, d->tq, i, h, d->dv);
                const float mnew = mb > *mi ? mb : *mi, alpha = expf(*mi - mnew);
                exps(p, mnew);
                float sum = 0.f;
#pragma omp simd reduction(+ : sum)
                for (int j = 0; j < BK; j++) sum += p[j];
                *li = *li * alpha + sum;
                *mi = mnew;
                if (d->rate > 0.f) {
                    drop_scales(d, row_of(d, b, h, i), j0, j0 + nj, z);
                    for (int j = 0; j < nj; j++) p[j] *= z[j];
                }
#pragma omp simd
                for (int c = 0; c < d->dv; c++) oi[c] *= alpha;
            }
            tile_gemm(r1 - r0, d->dv, nj, w->s[0], BK, 1, w->vp, DP(d->dv), 1.f,
                      o + at(d, b, d->tq, r0, h, d->dv), os);
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
#pragma omp parallel for TFC_CPU_STATIC(tasks, nt)
    for (int64_t t = 0; t < tasks; t++) {
        const task r = task_of(d, t, d->tq, QG);
        /* the packed blocks (stack arrays: no allocation) */
        float kt[(size_t)d->dk * BK], vp[(size_t)BK * DP(d->dv)];
        fwd_scratch w;
        w.kt = kt, w.vp = vp;
        forward_rows(d, r.b, r.h, r.r0, r.r1, q, k, v, o, lse, &w);
    }
}

/* Scratch of one backward task: a packed key block (kᵀ for the scores, rows for dq), the
 * value block (vᵀ), a chunk of BQ query rows (q, dout), and the chunk's q kᵀ then p z in
 * pz, its dout vᵀ then scale ds in g. */
typedef struct grad_scratch {
    float *kt, *vt, *kp, *qp, *dop;
    float pz[BQ][BK], g[BQ][BK];
} grad_scratch;

/* Rows [i0, i1) of (b, h) against the packed key block [j0, j0 + nj), in place in w: from
 * q . k_j in pz and dout_i . v_j in g, each row's probabilities from its lse, pz = p z and
 * g = scale ds (zero rows for a row outside the block or unseen; 1/tk each for a row with
 * the uniform mean). */
TFC_CPU_VECTOR
static void block_grads(const tfc_attn_desc *d, int b, int h, int i0, int i1, int j0, int nj,
                        const int *ok, const float *o, const float *lse, grad_scratch *w)
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
        mask_scores(d, i, j0, ok, pz); /* keys past nj are unseen: p 0 there */
        exps(pz, L);
        const float *doi = w->dop + (size_t)(i - i0) * (size_t)DP(d->dv);
        const float D = dot(doi, o + at(d, b, d->tq, i, h, d->dv), d->dv);
        if (d->rate <= 0.f) { /* z = 1 */
#pragma omp simd
            for (int j = 0; j < BK; j++) g[j] = d->scale * pz[j] * (g[j] - D);
            continue;
        }
        drop_scales(d, row_of(d, b, h, i), j0, j0 + nj, z);
        for (int j = nj; j < BK; j++) z[j] = 0.f;
#pragma omp simd
        for (int j = 0; j < BK; j++) {
            g[j] = d->scale * pz[j] * (z[j] * g[j] - D);
            pz[j] *= z[j];
        }
    }
}

/* The gradients of (b, h), FlashAttention-2's backward: per key block, per chunk of BQ query
 * rows, the probabilities once (block_grads: p = exp(s - L), dp = z (dout_i . v_j),
 * ds = p (dp - D_i), D_i = dout_i . o_i), then
 *   dq_i += scale sum_j ds k_j,  dv_j += sum_i p z dout_i,  dk_j += scale sum_i ds q_i
 * as tile_gemms over the chunk. One task owns every row of (b, h), so dq's sums run in the
 * same order with any thread count. */
TFC_CPU_VECTOR
static void backward_head(const tfc_attn_desc *d, int b, int h, const float *q, const float *k,
                          const float *v, const float *o, const float *lse, const float *dout,
                          float *dq, float *dk, float *dv, grad_scratch *w)
{
    int ok[BK], all[BK];
    const size_t qs = (size_t)d->heads * (size_t)d->dk, vs = (size_t)d->heads * (size_t)d->dv;
    for (int i = 0; i < d->tq; i++)
        memset(dq + at(d, b, d->tq, i, h, d->dk), 0, (size_t)d->dk * 4);
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
            int i0 = c1, i1 = c0;
            for (int i = c0; i < c1; i++) {
                const float L = lse[row_of(d, b, h, i)];
                if (L == -INFINITY || (L != INFINITY && row_meets(d, i, j0, j0 + nj))) {
                    i0 = i0 == c1 ? i : i0;
                    i1 = i + 1;
                }
            }
            if (i0 >= i1) continue;
            const int nr = i1 - i0;
            pack_rows(d, b, d->tq, h, i0, nr, q, d->dk, w->qp);
            pack_rows(d, b, d->tq, h, i0, nr, dout, d->dv, w->dop);
            tile_gemm(nr, BK, d->dk, w->qp, DP(d->dk), 1, w->kt, BK, 0.f, w->pz[0], BK);
            tile_gemm(nr, BK, d->dv, w->dop, DP(d->dv), 1, w->vt, BK, 0.f, w->g[0], BK);
            block_grads(d, b, h, i0, i1, j0, nj, ok, o, lse, w);
            tile_gemm(nr, d->dk, nj, w->g[0], BK, 1, w->kp, DP(d->dk), 1.f,
                      dq + at(d, b, d->tq, i0, h, d->dk), qs);
            tile_gemm(nj, d->dv, nr, w->pz[0], 1, BK, w->dop, DP(d->dv), 1.f,
                      dv + at(d, b, d->tk, j0, h, d->dv), vs);
            tile_gemm(nj, d->dk, nr, w->g[0], 1, BK, w->qp, DP(d->dk), 1.f,
                      dk + at(d, b, d->tk, j0, h, d->dk), qs);
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
        /* stack arrays: no allocation */
        float kt[(size_t)d->dk * BK], vt[(size_t)d->dv * BK], kp[(size_t)BK * DP(d->dk)];
        float qp[(size_t)BQ * DP(d->dk)], dop[(size_t)BQ * DP(d->dv)];
        grad_scratch w = {.kt = kt, .vt = vt, .kp = kp, .qp = qp, .dop = dop};
        backward_head(d, (int)(t / d->heads), (int)(t % d->heads), q, k, v, o, lse, dout, dq,
                      dk, dv, &w);
    }
}
