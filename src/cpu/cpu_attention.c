/* Attention on the CPU, flash-attention style (Dao et al., 2022): the scores are computed one
 * block of BK keys at a time, the block packed transposed so that a query row times it is a
 * small GEMM vectorised over the keys, with an online softmax (a running maximum and sum that
 * rescale what came before), so no more than one block of BK scores exists per thread at
 * once, and memory stays O(T); P V and the gradients' sums over keys or rows run over packed
 * rows with their sums in vector registers. Forward saves each row's log-sum-exp; backward
 * (FlashAttention-2's) recomputes each block of probabilities from it once, per key block and
 * chunk of BQ query rows, one task owning every row of an (example, head), so the results do
 * not depend on the thread count. Blocks outside a row's causal mask or window are skipped. */
#include "core/rng.h"
#include "cpu/cpu_internal.h"

#include <math.h>
#include <stdlib.h>

#define BQ 64 /* query rows per task */
#define BK 64 /* keys per block of scores (a multiple of row_times_block's 32 keys) */

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

/* acc[j] = x . column j of a packed block (x [dim], pk [dim][BK]), vectorised over j: 32
 * columns at a time, their sums held in four vectors (named arrays of 8, which the compiler
 * keeps in registers) while x's elements stream past. */
TFC_CPU_VECTOR
static void row_times_block(int dim, const float *x, const float *pk, float *acc)
{
    for (int j0 = 0; j0 < BK; j0 += 32) {
        float a0[8], a1[8], a2[8], a3[8];
#pragma omp simd
        for (int u = 0; u < 8; u++) a0[u] = a1[u] = a2[u] = a3[u] = 0.f;
        for (int c = 0; c < dim; c++) {
            const float a = x[c];
            const float *pc = pk + (size_t)c * BK + j0;
#pragma omp simd
            for (int u = 0; u < 8; u++) {
                a0[u] += a * pc[u];
                a1[u] += a * pc[8 + u];
                a2[u] += a * pc[16 + u];
                a3[u] += a * pc[24 + u];
            }
        }
#pragma omp simd
        for (int u = 0; u < 8; u++) {
            acc[j0 + u] = a0[u];
            acc[j0 + 8 + u] = a1[u];
            acc[j0 + 16 + u] = a2[u];
            acc[j0 + 24 + u] = a3[u];
        }
    }
}

/* Rows [r0, r0 + n) of head h in example b of x [n, t, heads, dim] packed at out, row r at
 * out + r DP(dim), the columns past dim zero. */
#define DP(dim) (((dim) + 7) & ~7)
static void pack_rows(const tfc_attn_desc *d, int b, int t, int h, int r0, int n, const float *x,
                      int dim, float *out)
{
    for (int r = 0; r < n; r++) {
        float *o = out + (size_t)r * (size_t)DP(dim);
        memcpy(o, x + at(d, b, t, r0 + r, h, dim), (size_t)dim * 4);
        for (int c = dim; c < DP(dim); c++) o[c] = 0.f;
    }
}

/* y = beta y + sum_{r < n} w[r ws] x_r for y [dim] and the rows x_r of a pack_rows block
 * (row r at x + r DP(dim)): eight columns at a time, their sums held in vectors while the
 * rows stream past, four rows at once into four sums (independent chains of adds) that
 * are added at the end. */
static inline void combine_rows(int n, const float *w, int ws, const float *x, int dim,
                                float beta, float *y)
{
    const size_t dp = (size_t)DP(dim);
    for (int c0 = 0; c0 < dim; c0 += 8) {
        float a0[8], a1[8], a2[8], a3[8];
#pragma omp simd
        for (int c = 0; c < 8; c++) a0[c] = a1[c] = a2[c] = a3[c] = 0.f;
        const float *xr = x + c0;
        int r = 0;
        for (; r + 4 <= n; r += 4, xr += 4 * dp) {
            const float w0 = w[(size_t)r * (size_t)ws], w1 = w[(size_t)(r + 1) * (size_t)ws];
            const float w2 = w[(size_t)(r + 2) * (size_t)ws];
            const float w3 = w[(size_t)(r + 3) * (size_t)ws];
#pragma omp simd
            for (int c = 0; c < 8; c++) {
                a0[c] += w0 * xr[c];
                a1[c] += w1 * xr[dp + c];
                a2[c] += w2 * xr[2 * dp + c];
                a3[c] += w3 * xr[3 * dp + c];
            }
        }
        for (; r < n; r++, xr += dp) {
            const float wr = w[(size_t)r * (size_t)ws];
#pragma omp simd
            for (int c = 0; c < 8; c++) a0[c] += wr * xr[c];
        }
        const int m = dim - c0 < 8 ? dim - c0 : 8;
        for (int c = 0; c < m; c++)
            y[c0 + c] = beta * y[c0 + c] + ((a0[c] + a1[c]) + (a2[c] + a3[c]));
    }
}

/* s[j] = scale q . k_{j0+j} (a row times a packed block, vectorised over the keys) for the
 * keys row i sees (ok, the causal rule, the window), -inf for the others; returns the
 * maximum. */
static inline float scores(const tfc_attn_desc *d, int i, int j0, const float *q,
                           const float *kt, const int *ok, float *s)
{
    float acc[BK];
    row_times_block(d->dk, q, kt, acc);
    const int causal = d->causal, win = d->window;
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < BK; j++) {
        const int jj = j0 + j;
        const int seen = ok[j] & (!causal | (jj <= i)) & ((win <= 0) | (abs(i - jj) < win));
        s[j] = tfc_cpu_select(seen, d->scale * acc[j], -INFINITY);
        mx = s[j] > mx ? s[j] : mx;
    }
    return mx;
}

/* exp(s - m) for the BK scores of a block, 0 for -inf ones (an unseen key). */
static inline void exps(const float *s, float m, float *p)
{
#pragma omp simd
    for (int j = 0; j < BK; j++)
        p[j] = tfc_cpu_select(s[j] > -INFINITY, tfc_cpu_expf(s[j] - m), 0.f);
}

/* Forward of query rows [i0, i1) of (b, h), one packed key block at a time:
 *   m_i = max over blocks so far, l_i = sum exp(s_ij - m_i), o_i = sum exp(s_ij - m_i) z v_j
 * each new block rescaling the old sums by exp(m_old - m_new); then o_i /= l_i and
 * lse_i = m_i + log l_i. */
TFC_CPU_VECTOR
static void forward_rows(const tfc_attn_desc *d, int b, int h, int i0, int i1, const float *q,
                         const float *k, const float *v, float *o, float *lse, float *kt,
                         float *vp)
{
    float m[BQ], l[BQ], s[BK], p[BK], z[BK];
    int ok[BK];
    for (int i = i0; i < i1; i++) {
        m[i - i0] = -INFINITY, l[i - i0] = 0.f;
        memset(o + at(d, b, d->tq, i, h, d->dv), 0, (size_t)d->dv * 4);
    }
    int kbeg, kend;
    key_range(d, i0, i1, &kbeg, &kend);
    for (int j0 = kbeg; j0 < kend; j0 += BK) {
        const int nj = j0 + BK < kend ? BK : kend - j0;
        pack_keys(d, b, h, j0, nj, k, d->dk, kt, ok);
        pack_rows(d, b, d->tk, h, j0, nj, v, d->dv, vp);
        for (int i = i0; i < i1; i++) {
            if (d->qmask && d->qmask[(size_t)b * (size_t)d->tq + (size_t)i] == 0.f) continue;
            if (!row_meets(d, i, j0, j0 + nj)) continue;
            float mb = scores(d, i, j0, q + at(d, b, d->tq, i, h, d->dk), kt, ok, s);
            if (mb == -INFINITY) continue;
            float *mi = &m[i - i0], *li = &l[i - i0];
            const float mnew = mb > *mi ? mb : *mi, alpha = expf(*mi - mnew);
            exps(s, mnew, p);
            float sum = 0.f;
#pragma omp simd reduction(+ : sum)
            for (int j = 0; j < BK; j++) sum += p[j];
            *li = *li * alpha + sum;
            *mi = mnew;
            if (d->rate > 0.f) {
                drop_scales(d, row_of(d, b, h, i), j0, j0 + nj, z);
                for (int j = 0; j < nj; j++) p[j] *= z[j];
            }
            combine_rows(nj, p, 1, vp, d->dv, alpha, o + at(d, b, d->tq, i, h, d->dv));
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
    const int nqb = (d->tq + BQ - 1) / BQ;
    const int64_t tasks = (int64_t)d->n * d->heads * nqb;
    const int nt = tfc_cpu_threads(be, work(d));
#pragma omp parallel for TFC_CPU_STATIC(tasks, nt)
    for (int64_t t = 0; t < tasks; t++) {
        const task r = task_of(d, t, d->tq, BQ);
        /* one packed key and value block (stack arrays: no allocation) */
        float kt[(size_t)d->dk * BK], vp[(size_t)BK * DP(d->dv)];
        forward_rows(d, r.b, r.h, r.r0, r.r1, q, k, v, o, lse, kt, vp);
    }
}

/* Scratch of one backward task: a packed key block (kᵀ for the scores, rows for dq), the
 * value block (vᵀ), a chunk of BQ query rows (q, dout) and their p z and scale ds. */
typedef struct grad_scratch {
    float *kt, *vt, *kp, *qp, *dop;
    float pz[BQ][BK], g[BQ][BK];
} grad_scratch;

/* Rows [i0, i1) of (b, h) against the packed key block [j0, j0 + nj) (in w): each row's
 * probabilities from its lse, pz = p z and g = scale ds into w->pz, w->g (zero rows for a
 * row outside the block or unseen; 1/tk each for a row with the uniform mean), and
 *   dq_i += scale sum_j ds_ij k_j. */
TFC_CPU_VECTOR
static void block_grads(const tfc_attn_desc *d, int b, int h, int i0, int i1, int j0, int nj,
                        const int *ok, const float *o, const float *lse, float *dq,
                        grad_scratch *w)
{
    float s[BK], z[BK], dp[BK];
    for (int i = i0; i < i1; i++) {
        float *pz = w->pz[i - i0], *g = w->g[i - i0];
        const float L = lse[row_of(d, b, h, i)];
        for (int j = 0; j < BK; j++) pz[j] = g[j] = 0.f;
        if (L == INFINITY) continue;
        if (L == -INFINITY) {
            for (int j = 0; j < nj; j++) pz[j] = 1.f / (float)d->tk;
            continue;
        }
        if (!row_meets(d, i, j0, j0 + nj)) continue; /* outside row i's keys */
        const float *qi = w->qp + (size_t)(i - i0) * (size_t)DP(d->dk);
        const float *doi = w->dop + (size_t)(i - i0) * (size_t)DP(d->dv);
        scores(d, i, j0, qi, w->kt, ok, s);
        exps(s, L, pz);
        row_times_block(d->dv, doi, w->vt, dp); /* dout_i . v_j */
        drop_scales(d, row_of(d, b, h, i), j0, j0 + nj, z);
        for (int j = nj; j < BK; j++) z[j] = 0.f;
        const float D = dot(doi, o + at(d, b, d->tq, i, h, d->dv), d->dv);
#pragma omp simd
        for (int j = 0; j < BK; j++) {
            g[j] = d->scale * pz[j] * (z[j] * dp[j] - D);
            pz[j] *= z[j];
        }
        combine_rows(nj, g, 1, w->kp, d->dk, 1.f, dq + at(d, b, d->tq, i, h, d->dk));
    }
}

/* The gradients of (b, h), FlashAttention-2's backward: per key block, per chunk of BQ query
 * rows, the probabilities once (block_grads: p = exp(s - L), dp = z (dout_i . v_j),
 * ds = p (dp - D_i), D_i = dout_i . o_i, and dq), then
 *   dv_j += sum_i p z dout_i,  dk_j += scale sum_i ds q_i
 * as small GEMMs over the chunk. One task owns every row of (b, h), so dq's sums run in the
 * same order with any thread count. */
TFC_CPU_VECTOR
static void backward_head(const tfc_attn_desc *d, int b, int h, const float *q, const float *k,
                          const float *v, const float *o, const float *lse, const float *dout,
                          float *dq, float *dk, float *dv, grad_scratch *w)
{
    int ok[BK], all[BK];
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
            pack_rows(d, b, d->tq, h, i0, i1 - i0, q, d->dk, w->qp);
            pack_rows(d, b, d->tq, h, i0, i1 - i0, dout, d->dv, w->dop);
            block_grads(d, b, h, i0, i1, j0, nj, ok, o, lse, dq, w);
            for (int j = 0; j < nj; j++) {
                combine_rows(i1 - i0, &w->pz[0][j], BK, w->dop, d->dv, 1.f,
                             dv + at(d, b, d->tk, j0 + j, h, d->dv));
                combine_rows(i1 - i0, &w->g[0][j], BK, w->qp, d->dk, 1.f,
                             dk + at(d, b, d->tk, j0 + j, h, d->dk));
            }
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
