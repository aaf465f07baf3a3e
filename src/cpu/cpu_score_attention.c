/* CPU Attention and AdditiveAttention (Keras's Luong and Bahdanau layers; core/backend.h,
 * tfc_score_attn_desc and its TFC_HD pieces). The [tq, tv] scores of an example are held
 * whole. Forward, one query row at a time: the scores s_ij, Keras's -1e9 on the masked ones,
 * the softmax p (kept), o_i = sum_j p_ij z_ij v_j, zero on a masked query row.
 * Backward in three passes, each element written by one thread in an order fixed by the
 * shape (the bits do not depend on the thread count):
 *   rows (b, i):  do_i = dout_i (0 on a masked row), dp_ij = z_ij do_i . v_j,
 *                 ds_ij = p_ij (dp_ij - sum_j p_ij dp_ij),  dq_i += sum_j ds_ij ds_ij/dq_i
 *   keys (b, j):  dv_j += sum_i p_ij z_ij do_i,  dk_j += sum_i ds_ij ds_ij/dk_j
 *   weights:      dscale, dcw += sums over (b, i, j) in double, in that order. */
#include "cpu/cpu_internal.h"

void tfc_cpu_score_attention_forward(tfc_backend *be, const tfc_score_attn_desc *d,
                                     const float *q, const float *k, const float *v,
                                     const float *scale, const float *cw, float *o, float *p)
{
    const int64_t rows = (int64_t)d->n * d->tq;
    const int tv = d->tv, dim = d->dim, dv = d->dv;
    const int nt = tfc_cpu_threads(be, rows * tv * (dim + dv));
    TFC_CPU_FOR(rows, nt, for (int64_t r = 0; r < rows; r++) {
        const int b = (int)(r / d->tq), i = (int)(r % d->tq);
        const float *kb = k + (int64_t)b * tv * dim, *vb = v + (int64_t)b * tv * dv;
        float *pr = p + r * tv, *orow = o + r * dv;
        float top = -INFINITY, sum = 0;
        for (int j = 0; j < tv; j++) {
            const float s = tfc_score_attn_score(d, q + r * dim, kb + (int64_t)j * dim, scale, cw);
            pr[j] = tfc_score_attn_masked(d, b, i, j) ? s - 1.0e9f : s;
            top = pr[j] > top ? pr[j] : top;
        }
        for (int j = 0; j < tv; j++) sum += pr[j] = expf(pr[j] - top);
        for (int j = 0; j < tv; j++) pr[j] /= sum;
        for (int c = 0; c < dv; c++) orow[c] = 0;
        if (tfc_score_attn_real(d, r))
            for (int j = 0; j < tv; j++) {
                const float w = pr[j] * tfc_score_attn_keep(d, r, j);
                for (int c = 0; c < dv; c++) orow[c] += w * vb[(int64_t)j * dv + c];
            }
    });
}

void tfc_cpu_score_attention_backward(tfc_backend *be, const tfc_score_attn_desc *d,
                                      const float *q, const float *k, const float *v,
                                      const float *scale, const float *cw, const float *p,
                                      const float *dout, float *ds, float *dq, float *dk,
                                      float *dv, float *dscale, float *dcw)
{
    const int64_t rows = (int64_t)d->n * d->tq, keys = (int64_t)d->n * d->tv;
    const int tq = d->tq, tv = d->tv, dim = d->dim, dvw = d->dv;
    const int nt = tfc_cpu_threads(be, rows * tv * (dim + dvw));
    TFC_CPU_FOR(rows, nt, for (int64_t r = 0; r < rows; r++) {
        const int b = (int)(r / tq);
        const float *kb = k + (int64_t)b * tv * dim, *vb = v + (int64_t)b * tv * dvw;
        const float *pr = p + r * tv, *dor = dout + r * dvw;
        float *dsr = ds + r * tv, dot = 0;
        const int real = tfc_score_attn_real(d, r);
        for (int j = 0; j < tv; j++) {
            float g = 0;
            if (real)
                for (int c = 0; c < dvw; c++) g += dor[c] * vb[(int64_t)j * dvw + c];
            dsr[j] = g * tfc_score_attn_keep(d, r, j);
            dot += pr[j] * dsr[j];
        }
        for (int j = 0; j < tv; j++) dsr[j] = pr[j] * (dsr[j] - dot);
        if (dq)
            for (int j = 0; j < tv; j++)
                tfc_score_attn_grad(d, dsr[j], q + r * dim, kb + (int64_t)j * dim, scale, cw,
                                    kb + (int64_t)j * dim, dq + r * dim);
    });
    const int kt = tfc_cpu_threads(be, keys * tq * (dim + dvw));
    TFC_CPU_FOR(keys, kt, for (int64_t kr = 0; kr < keys; kr++) {
        const int b = (int)(kr / tv), j = (int)(kr % tv);
        const float *kj = k + kr * dim;
        for (int i = 0; i < tq; i++) {
            const int64_t r = (int64_t)b * tq + i;
            if (dv && tfc_score_attn_real(d, r)) {
                const float w = p[r * tv + j] * tfc_score_attn_keep(d, r, j);
                for (int c = 0; c < dvw; c++) dv[kr * dvw + c] += w * dout[r * dvw + c];
            }
            if (dk)
                tfc_score_attn_grad(d, ds[r * tv + j], q + r * dim, kj, scale, cw, q + r * dim,
                                    dk + kr * dim);
        }
    });
    if (!dscale && !dcw) return;
    /* the weights' gradients: sums over every (b, i, j) in double */
    const int sn = d->mode == TFC_SCORE_ADDITIVE ? dim : 1;
    double cw_sum = 0;
    for (int c = 0; c < sn; c++) {
        const double sc = tfc_score_attn_weight_sum(d, c, q, k, scale, cw, ds, &cw_sum);
        if (dscale) dscale[c] += (float)sc;
    }
    if (dcw) dcw[0] += (float)cw_sum;
}
