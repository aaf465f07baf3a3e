/* Attention on the CPU, flash-attention style (Dao et al., 2022): the scores of a row are
 * computed one block of BK keys at a time, with an online softmax (a running maximum and
 * sum that rescale what came before), so no more than one block of BK scores exists per
 * thread at once, and memory stays O(T). Forward saves each row's
 * log-sum-exp; backward recomputes the probabilities from it, in two passes that each own
 * what they write (dk and dv per key block, then dq per query block), so the results do not
 * depend on the thread count. Blocks outside a row's causal mask or window are skipped. */
#include "core/rng.h"
#include "cpu/cpu_internal.h"

#include <math.h>
#include <stdlib.h>

#define BQ 64 /* query rows per task */
#define BK 64 /* keys per block of scores (a multiple of 4: one Philox block per 4 keys) */

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

/* Whether row i of example b sees key j (the key mask, the causal rule, the window). */
static inline int sees(const tfc_attn_desc *d, int b, int i, int j)
{
    return (!d->kmask || d->kmask[(size_t)b * (size_t)d->tk + (size_t)j] != 0.f) &&
           (!d->causal || j <= i) && (d->window <= 0 || abs(i - j) < d->window);
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

/* s[j - j0] = scale q . k_j for the keys [j0, j1) row i of (b, h) sees, -inf for the others;
 * returns their maximum. */
static float scores(const tfc_attn_desc *d, int b, int h, int i, const float *q, const float *k,
                    int j0, int j1, float *s)
{
    float mx = -INFINITY;
    for (int j = j0; j < j1; j++) {
        float v = sees(d, b, i, j) ? d->scale * dot(q, k + at(d, b, d->tk, j, h, d->dk), d->dk)
                                   : -INFINITY;
        s[j - j0] = v;
        mx = v > mx ? v : mx;
    }
    return mx;
}

/* exp(s - m) for each of n scores, 0 for -inf ones (an unseen key). */
static void exps(int n, const float *s, float m, float *p)
{
#pragma omp simd
    for (int j = 0; j < n; j++)
        p[j] = tfc_cpu_select(s[j] > -INFINITY, tfc_cpu_expf(s[j] - m), 0.f);
}

/* Forward of query rows [i0, i1) of (b, h):
 *   m_i = max over blocks so far, l_i = sum exp(s_ij - m_i), o_i = sum exp(s_ij - m_i) z v_j
 * each new block rescaling the old sums by exp(m_old - m_new); then o_i /= l_i and
 * lse_i = m_i + log l_i. */
static void forward_rows(const tfc_attn_desc *d, int b, int h, int i0, int i1, const float *q,
                         const float *k, const float *v, float *o, float *lse)
{
    float m[BQ], l[BQ], s[BK], p[BK], z[BK];
    for (int i = i0; i < i1; i++) {
        m[i - i0] = -INFINITY, l[i - i0] = 0.f;
        memset(o + at(d, b, d->tq, i, h, d->dv), 0, (size_t)d->dv * 4);
    }
    int kbeg, kend;
    key_range(d, i0, i1, &kbeg, &kend);
    for (int j0 = kbeg; j0 < kend; j0 += BK) {
        const int j1 = j0 + BK < kend ? j0 + BK : kend;
        for (int i = i0; i < i1; i++) {
            if (d->qmask && d->qmask[(size_t)b * (size_t)d->tq + (size_t)i] == 0.f) continue;
            const size_t row = row_of(d, b, h, i);
            float mb = scores(d, b, h, i, q + at(d, b, d->tq, i, h, d->dk), k, j0, j1, s);
            if (mb == -INFINITY) continue;
            float *mi = &m[i - i0], *li = &l[i - i0];
            const float mnew = mb > *mi ? mb : *mi, alpha = expf(*mi - mnew);
            exps(j1 - j0, s, mnew, p);
            drop_scales(d, row, j0, j1, z);
            float sum = 0.f;
            for (int j = 0; j < j1 - j0; j++) sum += p[j];
            *li = *li * alpha + sum;
            *mi = mnew;
            float *oi = o + at(d, b, d->tq, i, h, d->dv);
#pragma omp simd
            for (int c = 0; c < d->dv; c++) oi[c] *= alpha;
            for (int j = j0; j < j1; j++) {
                const float w = p[j - j0] * z[j - j0];
                const float *vj = v + at(d, b, d->tk, j, h, d->dv);
#pragma omp simd
                for (int c = 0; c < d->dv; c++) oi[c] += w * vj[c];
            }
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
        forward_rows(d, r.b, r.h, r.r0, r.r1, q, k, v, o, lse);
    }
}

/* dp_ij - D_i and p_ij for the keys [j0, j1) of row i (lse L, D = dout_i . o_i):
 *   p = exp(s - L) (0 for unseen keys), dp = z (dout_i . v_j), ds = p (dp - D)
 * into p[] (times z: what multiplied v_j) and ds[]. */
static void row_grads(const tfc_attn_desc *d, int b, int h, int i, float L, float D,
                      const float *qi, const float *k, const float *v, const float *doi,
                      int j0, int j1, float *pz, float *ds)
{
    float s[BK], z[BK];
    const size_t row = row_of(d, b, h, i);
    scores(d, b, h, i, qi, k, j0, j1, s);
    exps(j1 - j0, s, L, pz);
    drop_scales(d, row, j0, j1, z);
    for (int j = j0; j < j1; j++) {
        const float dp = z[j - j0] * dot(doi, v + at(d, b, d->tk, j, h, d->dv), d->dv);
        ds[j - j0] = pz[j - j0] * (dp - D);
        pz[j - j0] *= z[j - j0];
    }
}

/* dk and dv of keys [j0, j1) of (b, h), over every query row in order:
 *   dv_j = sum_i p_ij z_ij dout_i,   dk_j = scale sum_i ds_ij q_i
 * (a row with the uniform mean: dv_j += dout_i / tk). */
static void backward_keys(const tfc_attn_desc *d, int b, int h, int j0, int j1, const float *q,
                          const float *k, const float *v, const float *o, const float *lse,
                          const float *dout, float *dk, float *dv)
{
    float pz[BK], ds[BK];
    for (int j = j0; j < j1; j++) {
        memset(dk + at(d, b, d->tk, j, h, d->dk), 0, (size_t)d->dk * 4);
        memset(dv + at(d, b, d->tk, j, h, d->dv), 0, (size_t)d->dv * 4);
    }
    for (int i = 0; i < d->tq; i++) {
        const float L = lse[row_of(d, b, h, i)];
        const float *doi = dout + at(d, b, d->tq, i, h, d->dv);
        if (L == INFINITY) continue;
        if (L == -INFINITY) {
            const float w = 1.f / (float)d->tk;
            for (int j = j0; j < j1; j++) {
                float *dvj = dv + at(d, b, d->tk, j, h, d->dv);
#pragma omp simd
                for (int c = 0; c < d->dv; c++) dvj[c] += w * doi[c];
            }
            continue;
        }
        if (!row_meets(d, i, j0, j1)) continue; /* the block lies outside row i's keys */
        const float *qi = q + at(d, b, d->tq, i, h, d->dk);
        const float D = dot(doi, o + at(d, b, d->tq, i, h, d->dv), d->dv);
        row_grads(d, b, h, i, L, D, qi, k, v, doi, j0, j1, pz, ds);
        for (int j = j0; j < j1; j++) {
            const float w = pz[j - j0], g = d->scale * ds[j - j0];
            float *dvj = dv + at(d, b, d->tk, j, h, d->dv);
            float *dkj = dk + at(d, b, d->tk, j, h, d->dk);
#pragma omp simd
            for (int c = 0; c < d->dv; c++) dvj[c] += w * doi[c];
#pragma omp simd
            for (int c = 0; c < d->dk; c++) dkj[c] += g * qi[c];
        }
    }
}

/* dq of query rows [i0, i1) of (b, h): dq_i = scale sum_j ds_ij k_j, key blocks in order. */
static void backward_queries(const tfc_attn_desc *d, int b, int h, int i0, int i1,
                             const float *q, const float *k, const float *v, const float *o,
                             const float *lse, const float *dout, float *dq)
{
    float pz[BK], ds[BK], D[BQ];
    for (int i = i0; i < i1; i++) {
        memset(dq + at(d, b, d->tq, i, h, d->dk), 0, (size_t)d->dk * 4);
        D[i - i0] = dot(dout + at(d, b, d->tq, i, h, d->dv), o + at(d, b, d->tq, i, h, d->dv),
                        d->dv);
    }
    int kbeg, kend;
    key_range(d, i0, i1, &kbeg, &kend);
    for (int j0 = kbeg; j0 < kend; j0 += BK) {
        const int j1 = j0 + BK < kend ? j0 + BK : kend;
        for (int i = i0; i < i1; i++) {
            const float L = lse[row_of(d, b, h, i)];
            if (isinf(L) || !row_meets(d, i, j0, j1)) continue;
            const float *qi = q + at(d, b, d->tq, i, h, d->dk);
            row_grads(d, b, h, i, L, D[i - i0], qi, k, v, dout + at(d, b, d->tq, i, h, d->dv),
                      j0, j1, pz, ds);
            float *dqi = dq + at(d, b, d->tq, i, h, d->dk);
            for (int j = j0; j < j1; j++) {
                const float g = d->scale * ds[j - j0];
                const float *kj = k + at(d, b, d->tk, j, h, d->dk);
#pragma omp simd
                for (int c = 0; c < d->dk; c++) dqi[c] += g * kj[c];
            }
        }
    }
}

void tfc_cpu_attention_backward(tfc_backend *be, const tfc_attn_desc *d, const float *q,
                                const float *k, const float *v, const float *o,
                                const float *lse, const float *dout, float *dq, float *dk,
                                float *dv)
{
    const int nkb = (d->tk + BK - 1) / BK, nqb = (d->tq + BQ - 1) / BQ;
    const int64_t ktasks = (int64_t)d->n * d->heads * nkb;
    const int64_t qtasks = (int64_t)d->n * d->heads * nqb;
    const int nt = tfc_cpu_threads(be, work(d));
#pragma omp parallel for TFC_CPU_STATIC(ktasks, nt)
    for (int64_t t = 0; t < ktasks; t++) {
        const task r = task_of(d, t, d->tk, BK);
        backward_keys(d, r.b, r.h, r.r0, r.r1, q, k, v, o, lse, dout, dk, dv);
    }
#pragma omp parallel for TFC_CPU_STATIC(qtasks, nt)
    for (int64_t t = 0; t < qtasks; t++) {
        const task r = task_of(d, t, d->tq, BQ);
        backward_queries(d, r.b, r.h, r.r0, r.r1, q, k, v, o, lse, dout, dq);
    }
}
