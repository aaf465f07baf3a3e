/* Attention and AdditiveAttention on the GPU (core/backend.h, tfc_score_attn_desc), as
 * cpu_score_attention.c and from the same TFC_HD pieces: one thread per query row for the
 * forward and for backward's ds and dq, one per key row for dk and dv, and one per weight
 * element for dscale and dcw (sums in double, tfc_score_attn_weight_sum as on the CPU).
 * A plain first version. Not in the GPU's op table yet (TFC_BACKEND_LAYER_OPS): until a
 * `make test-gpu` case has passed on a GPU, Attention and AdditiveAttention are refused
 * there. */
#include "gpu/gpu_internal.cuh"

#define GRID_LOOP(i, n)                                                              \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);        \
         i += (int64_t)gridDim.x * blockDim.x)

static __global__ void forward_kernel(tfc_score_attn_desc d, const uint64_t *step_off,
                                      const float *q, const float *k, const float *v,
                                      const float *scale, const float *cw, float *o, float *p)
{
    if (step_off) d.step += *step_off; /* gpu_step_offset */
    const int tv = d.tv, dim = d.dim, dv = d.dv;
    GRID_LOOP(r, (int64_t)d.n * d.tq)
    {
        const int b = (int)(r / d.tq), i = (int)(r % d.tq);
        const float *kb = k + (int64_t)b * tv * dim, *vb = v + (int64_t)b * tv * dv;
        float *pr = p + r * tv, *orow = o + r * dv;
        float top = -INFINITY, sum = 0;
        for (int j = 0; j < tv; j++) {
            const float s = tfc_score_attn_score(&d, q + r * dim, kb + (int64_t)j * dim, scale,
                                                 cw);
            pr[j] = tfc_score_attn_masked(&d, b, i, j) ? s - 1.0e9f : s;
            top = pr[j] > top ? pr[j] : top;
        }
        for (int j = 0; j < tv; j++) sum += pr[j] = expf(pr[j] - top);
        for (int j = 0; j < tv; j++) pr[j] /= sum;
        for (int c = 0; c < dv; c++) orow[c] = 0;
        if (tfc_score_attn_real(&d, r))
            for (int j = 0; j < tv; j++) {
                const float w = pr[j] * tfc_score_attn_keep(&d, r, j);
                for (int c = 0; c < dv; c++) orow[c] += w * vb[(int64_t)j * dv + c];
            }
    }
}

static __global__ void rows_kernel(tfc_score_attn_desc d, const uint64_t *step_off,
                                   const float *q, const float *k, const float *v,
                                   const float *scale, const float *cw, const float *p,
                                   const float *dout, float *ds, float *dq)
{
    if (step_off) d.step += *step_off;
    const int tv = d.tv, dim = d.dim, dvw = d.dv;
    GRID_LOOP(r, (int64_t)d.n * d.tq)
    {
        const int b = (int)(r / d.tq);
        const float *kb = k + (int64_t)b * tv * dim, *vb = v + (int64_t)b * tv * dvw;
        const float *pr = p + r * tv, *dor = dout + r * dvw;
        float *dsr = ds + r * tv, dot = 0;
        const int real = tfc_score_attn_real(&d, r);
        for (int j = 0; j < tv; j++) {
            float g = 0;
            if (real)
                for (int c = 0; c < dvw; c++) g += dor[c] * vb[(int64_t)j * dvw + c];
            dsr[j] = g * tfc_score_attn_keep(&d, r, j);
            dot += pr[j] * dsr[j];
        }
        for (int j = 0; j < tv; j++) dsr[j] = pr[j] * (dsr[j] - dot);
        if (dq)
            for (int j = 0; j < tv; j++)
                tfc_score_attn_grad(&d, dsr[j], q + r * dim, kb + (int64_t)j * dim, scale, cw,
                                    kb + (int64_t)j * dim, dq + r * dim);
    }
}

static __global__ void keys_kernel(tfc_score_attn_desc d, const uint64_t *step_off,
                                   const float *q, const float *k, const float *scale,
                                   const float *cw, const float *p, const float *dout,
                                   const float *ds, float *dk, float *dv)
{
    if (step_off) d.step += *step_off;
    const int tq = d.tq, tv = d.tv, dim = d.dim, dvw = d.dv;
    GRID_LOOP(kr, (int64_t)d.n * tv)
    {
        const int b = (int)(kr / tv), j = (int)(kr % tv);
        const float *kj = k + kr * dim;
        for (int i = 0; i < tq; i++) {
            const int64_t r = (int64_t)b * tq + i;
            if (dv && tfc_score_attn_real(&d, r)) {
                const float w = p[r * tv + j] * tfc_score_attn_keep(&d, r, j);
                for (int c = 0; c < dvw; c++) dv[kr * dvw + c] += w * dout[r * dvw + c];
            }
            if (dk)
                tfc_score_attn_grad(&d, ds[r * tv + j], q + r * dim, kj, scale, cw, q + r * dim,
                                    dk + kr * dim);
        }
    }
}

/* thread c: dscale[c] (and, thread 0 of concat, dcw) += sums over (b, i, j) */
static __global__ void weights_kernel(tfc_score_attn_desc d, const float *q, const float *k,
                                      const float *scale, const float *cw, const float *ds,
                                      float *dscale, float *dcw)
{
    const int sn = d.mode == TFC_SCORE_ADDITIVE ? d.dim : 1;
    GRID_LOOP(c, sn)
    {
        double cw_sum = 0;
        const double sc = tfc_score_attn_weight_sum(&d, (int)c, q, k, scale, cw, ds, &cw_sum);
        if (dscale) dscale[c] += (float)sc;
        if (dcw && c == 0) dcw[0] += (float)cw_sum;
    }
}

void tfc_gpu_score_attention_forward(tfc_backend *be, const tfc_score_attn_desc *d,
                                     const float *q, const float *k, const float *v,
                                     const float *scale, const float *cw, float *o, float *p)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t rows = (int64_t)d->n * d->tq;
    if (rows <= 0 || d->tv <= 0) return;
    forward_kernel<<<gpu_blocks(g, rows), GPU_THREADS, 0, g->stream>>>(
        *d, gpu_step_offset(g), q, k, v, scale, cw, o, p);
    TFC_LAUNCH_CHECK(g, forward_kernel);
}

void tfc_gpu_score_attention_backward(tfc_backend *be, const tfc_score_attn_desc *d,
                                      const float *q, const float *k, const float *v,
                                      const float *scale, const float *cw, const float *p,
                                      const float *dout, float *ds, float *dq, float *dk,
                                      float *dv, float *dscale, float *dcw)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t rows = (int64_t)d->n * d->tq, keys = (int64_t)d->n * d->tv;
    if (rows <= 0 || keys <= 0) return;
    rows_kernel<<<gpu_blocks(g, rows), GPU_THREADS, 0, g->stream>>>(
        *d, gpu_step_offset(g), q, k, v, scale, cw, p, dout, ds, dq);
    TFC_LAUNCH_CHECK(g, rows_kernel);
    keys_kernel<<<gpu_blocks(g, keys), GPU_THREADS, 0, g->stream>>>(
        *d, gpu_step_offset(g), q, k, scale, cw, p, dout, ds, dk, dv);
    TFC_LAUNCH_CHECK(g, keys_kernel);
    if (!dscale && !dcw) return;
    const int sn = d->mode == TFC_SCORE_ADDITIVE ? d->dim : 1;
    weights_kernel<<<gpu_blocks(g, sn), GPU_THREADS, 0, g->stream>>>(*d, q, k, scale, cw, ds,
                                                                      dscale, dcw);
    TFC_LAUNCH_CHECK(g, weights_kernel);
}
