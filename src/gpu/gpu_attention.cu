/* Attention on the GPU (tfc_attn_desc, core/backend.h), flash-attention style as
 * cpu_attention.c, in float32 and with no T x T buffer: the forward pass runs a block per
 * (example, head, ROWS query rows), a warp per row, key and value tiles of TILE keys through
 * shared memory and an online softmax; it saves each row's lse. The backward pass, without
 * atomics: D_i = dout_i . o_i, then one kernel per key block for dk, dv (looping over query
 * tiles) and one per query block for dq (looping over key tiles), the probabilities
 * recomputed from lse. Tiles outside every row's causal mask or window are skipped. */
#include <math.h>

#include "gpu/gpu_internal.cuh"

#define ROWS 8  /* warps per block: its query rows (forward, dq) or keys (dk, dv) */
#define TILE 32 /* keys (forward, dq) or query rows (dk, dv) per shared tile: one per lane */
#define NC 8    /* columns of a row's result held per lane: key_dim, value_dim <= 32 NC */

#define FULL 0xffffffffu

/* Row i of head h in example b of a [n, t, heads, dim] tensor. */
static __device__ __forceinline__ int64_t at(const tfc_attn_desc &d, int b, int t, int i, int h,
                                             int dim)
{
    return (((int64_t)b * t + i) * d.heads + h) * (int64_t)dim;
}

/* Query row i of head h in example b among all of them: its lse and its dropout counter. */
static __device__ __forceinline__ int64_t row_of(const tfc_attn_desc &d, int b, int h, int i)
{
    return ((int64_t)b * d.heads + h) * d.tq + i;
}

/* Whether row i (its query mask aside) sees key j: a real key, not masked, causal j <= i,
 * within the window. */
static __device__ __forceinline__ bool sees(const tfc_attn_desc &d, int b, int i, int j)
{
    return j < d.tk && (!d.kmask || d.kmask[(int64_t)b * d.tk + j] != 0.f) &&
           (!d.causal || j <= i) && (d.window <= 0 || abs(i - j) < d.window);
}

/* z_ij: keep / (1 - rate), keep = (u >= rate), u the row's uniform number j (backend.h). */
static __device__ __forceinline__ float drop_scale(const tfc_attn_desc &d, int64_t row, int j)
{
    if (d.rate <= 0.f) return 1.f;
    const uint64_t tk4 = (uint64_t)((d.tk + 3) & ~3);
    const float u = tfc_rng_uniform(d.key, d.step, (uint64_t)row * tk4 + (uint64_t)j);
    return u >= d.rate ? 1.f / (1.f - d.rate) : 0.f;
}

/* Keys [*j0, *j1) that query rows [i0, i1) may see: all, or with causal j < i1, with a
 * window i0 - window < j < i1 - 1 + window. */
static __device__ __forceinline__ void key_range(const tfc_attn_desc &d, int i0, int i1, int *j0,
                                                 int *j1)
{
    *j0 = 0, *j1 = d.tk;
    if (d.causal) *j1 = min(*j1, i1);
    if (d.window > 0) *j1 = min(*j1, i1 - 1 + d.window), *j0 = max(0, i0 - d.window + 1);
}

/* Query rows [*i0, *i1) that may see a key of [j0, j1): the transpose of key_range. */
static __device__ __forceinline__ void row_range(const tfc_attn_desc &d, int j0, int j1, int *i0,
                                                 int *i1)
{
    *i0 = 0, *i1 = d.tq;
    if (d.causal) *i0 = max(*i0, j0);
    if (d.window > 0) *i0 = max(*i0, j0 - d.window + 1), *i1 = min(*i1, j1 - 1 + d.window);
}

/* rows [r0, r0 + ROWS) of head h in example b of x [n, t, heads, dim] into s (row stride
 * dim), zeros past t. */
static __device__ void stage_rows(const tfc_attn_desc &d, int b, int t, int h, int r0,
                                  const float *x, int dim, float *s)
{
    for (int e = threadIdx.x; e < ROWS * dim; e += blockDim.x) {
        const int r = e / dim, c = e % dim;
        s[e] = r0 + r < t ? x[at(d, b, t, r0 + r, h, dim) + c] : 0.f;
    }
}

/* rows [j0, j0 + n) (n <= TILE) of head h in example b of x [n, t, heads, dim] into s, row
 * stride ld (dim + 1 where lanes read a column each: no bank conflicts). */
static __device__ void stage_tile(const tfc_attn_desc &d, int b, int t, int h, int j0, int n,
                                  const float *x, int dim, float *s, int ld)
{
    for (int e = threadIdx.x; e < n * dim; e += blockDim.x) {
        const int j = e / dim, c = e % dim;
        s[j * ld + c] = x[at(d, b, t, j0 + j, h, dim) + c];
    }
}

static __device__ __forceinline__ float dot(const float *a, const float *b, int n)
{
    float s = 0.f;
    for (int c = 0; c < n; c++) s += a[c] * b[c];
    return s;
}

/* The block's (example, head, first row or key) from a flat block index over tiles of
 * ROWS of `steps`. */
static __device__ __forceinline__ void block_of(const tfc_attn_desc &d, int steps, int *b, int *h,
                                                int *r0)
{
    const int nb = (steps + ROWS - 1) / ROWS;
    const int64_t bh = blockIdx.x / nb;
    *r0 = (int)(blockIdx.x % nb) * ROWS;
    *b = (int)(bh / d.heads), *h = (int)(bh % d.heads);
}

/* Forward: warp w of the block owns query row i = r0 + w, lane c its output columns
 * c + 32 t. Per key tile, lane j scores key j0 + j:
 *   s_j = scale q_i . k_j (-inf unseen),  m' = max(m, max_j s_j),  a = exp(m - m')
 *   p_j = exp(s_j - m'),  l = a l + sum_j p_j,  o = a o + sum_j p_j z_ij v_j
 * then o /= l, lse = m + log l; a row that sees no key takes the mean of every v_j
 * (uniform; lse -inf) or 0 (lse +inf). */
static __global__ void __launch_bounds__(ROWS * 32)
    forward_kernel(tfc_attn_desc d, const float *q, const float *k, const float *v, float *o,
                   float *lse)
{
    extern __shared__ float sh[];
    const int kld = d.dk + 1;
    float *ks = sh, *vs = ks + TILE * kld, *qs = vs + TILE * d.dv;
    int b, h, r0;
    block_of(d, d.tq, &b, &h, &r0);
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, i = r0 + w;
    const bool live = i < d.tq && (!d.qmask || d.qmask[(int64_t)b * d.tq + i] != 0.f);
    const int64_t row = row_of(d, b, h, min(i, d.tq - 1));
    stage_rows(d, b, d.tq, h, r0, q, d.dk, qs);
    float acc[NC];
#pragma unroll
    for (int t = 0; t < NC; t++) acc[t] = 0.f;
    float m = -INFINITY, l = 0.f;
    int jb, je;
    key_range(d, r0, min(r0 + ROWS, d.tq), &jb, &je);
    for (int j0 = jb; j0 < je; j0 += TILE) {
        const int nj = min(TILE, je - j0), j = j0 + lane;
        __syncthreads(); /* the previous tile is consumed */
        stage_tile(d, b, d.tk, h, j0, nj, k, d.dk, ks, kld);
        stage_tile(d, b, d.tk, h, j0, nj, v, d.dv, vs, d.dv);
        __syncthreads();
        float s = -INFINITY;
        if (live && lane < nj && sees(d, b, i, j))
            s = d.scale * dot(qs + w * d.dk, ks + lane * kld, d.dk);
        const float mt = warp_max(s);
        if (mt == -INFINITY) continue; /* the warp's row sees no key here */
        const float mn = fmaxf(m, mt), a = expf(m - mn);
        const float p = s > -INFINITY ? expf(s - mn) : 0.f;
        l = l * a + warp_sum(p);
        m = mn;
        const float pz = p != 0.f ? p * drop_scale(d, row, j) : 0.f;
#pragma unroll
        for (int t = 0; t < NC; t++) acc[t] *= a;
        for (int jj = 0; jj < nj; jj++) {
            const float pj = __shfl_sync(FULL, pz, jj);
            const float *vj = vs + jj * d.dv;
#pragma unroll
            for (int t = 0; t < NC; t++)
                if (lane + 32 * t < d.dv) acc[t] += pj * vj[lane + 32 * t];
        }
    }
    if (i >= d.tq) return;
    float *oi = o + at(d, b, d.tq, i, h, d.dv);
    if (l > 0.f) {
        const float inv = 1.f / l;
#pragma unroll
        for (int t = 0; t < NC; t++)
            if (lane + 32 * t < d.dv) oi[lane + 32 * t] = acc[t] * inv;
        if (lane == 0) lse[row] = m + logf(l);
    } else if (d.uniform) { /* no key seen: the mean of every v_j, as Keras */
        const float inv = 1.f / (float)d.tk;
        for (int c = lane; c < d.dv; c += 32) {
            float s = 0.f;
            for (int j = 0; j < d.tk; j++) s += v[at(d, b, d.tk, j, h, d.dv) + c];
            oi[c] = s * inv;
        }
        if (lane == 0) lse[row] = -INFINITY;
    } else {
        for (int c = lane; c < d.dv; c += 32) oi[c] = 0.f;
        if (lane == 0) lse[row] = INFINITY;
    }
}

/* D[row] = dout_i . o_i, a warp per row: row (b h + h) tq + i (lse's layout) of o and dout
 * [n, tq, heads, dv]. */
static __global__ void rowdot_kernel(int64_t rows, int heads, int tq, int dv, const float *dout,
                                     const float *o, float *D)
{
    const int lane = threadIdx.x % 32;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
    for (int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; r < rows;
         r += warps) {
        const int64_t bh = r / tq, b = bh / heads, h = bh % heads, i = r % tq;
        const int64_t off = ((b * tq + i) * heads + h) * dv;
        float s = 0.f;
        for (int c = lane; c < dv; c += 32) s += dout[off + c] * o[off + c];
        s = warp_sum(s);
        if (lane == 0) D[r] = s;
    }
}

/* dq: warp w owns query row i = r0 + w, lane c its columns c + 32 t. Per key tile, lane j
 * recomputes p_ij = exp(scale q_i . k_j - lse_i) and
 *   ds_ij = scale p_ij (z_ij dout_i . v_j - D_i),   dq_i = sum_j ds_ij k_j
 * (zero for a row that sees no key). D is [n, heads, tq] (rowdot_kernel's, with lse's
 * layout). */
static __global__ void __launch_bounds__(ROWS * 32)
    dq_kernel(tfc_attn_desc d, const float *q, const float *k, const float *v, const float *lse,
              const float *D, const float *dout, float *dq)
{
    extern __shared__ float sh[];
    const int kld = d.dk + 1, vld = d.dv + 1;
    float *ks = sh, *vs = ks + TILE * kld, *qs = vs + TILE * vld, *dos = qs + ROWS * d.dk;
    int b, h, r0;
    block_of(d, d.tq, &b, &h, &r0);
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, i = r0 + w;
    const int64_t row = row_of(d, b, h, min(i, d.tq - 1));
    const float L = i < d.tq ? lse[row] : INFINITY;
    const bool live = isfinite(L);
    const float Di = live ? D[row] : 0.f;
    stage_rows(d, b, d.tq, h, r0, q, d.dk, qs);
    stage_rows(d, b, d.tq, h, r0, dout, d.dv, dos);
    float acc[NC];
#pragma unroll
    for (int t = 0; t < NC; t++) acc[t] = 0.f;
    int jb, je;
    key_range(d, r0, min(r0 + ROWS, d.tq), &jb, &je);
    for (int j0 = jb; j0 < je; j0 += TILE) {
        const int nj = min(TILE, je - j0), j = j0 + lane;
        __syncthreads(); /* the previous tile is consumed */
        stage_tile(d, b, d.tk, h, j0, nj, k, d.dk, ks, kld);
        stage_tile(d, b, d.tk, h, j0, nj, v, d.dv, vs, vld);
        __syncthreads();
        float ds = 0.f;
        if (live && lane < nj && sees(d, b, i, j)) {
            const float p = expf(d.scale * dot(qs + w * d.dk, ks + lane * kld, d.dk) - L);
            const float dp = dot(dos + w * d.dv, vs + lane * vld, d.dv);
            ds = d.scale * p * (drop_scale(d, row, j) * dp - Di);
        }
        if (!__any_sync(FULL, ds != 0.f)) continue;
        for (int jj = 0; jj < nj; jj++) {
            const float g = __shfl_sync(FULL, ds, jj);
            const float *kj = ks + jj * kld;
#pragma unroll
            for (int t = 0; t < NC; t++)
                if (lane + 32 * t < d.dk) acc[t] += g * kj[lane + 32 * t];
        }
    }
    if (i >= d.tq) return;
    float *dqi = dq + at(d, b, d.tq, i, h, d.dk);
#pragma unroll
    for (int t = 0; t < NC; t++)
        if (lane + 32 * t < d.dk) dqi[lane + 32 * t] = acc[t];
}

/* dk, dv: warp w owns key j = j0 + w, lane c its columns c + 32 t. Per tile of query rows
 * (those that may see the block's keys, and any with the uniform mean), lane r recomputes
 * row i = i0 + r's p_ij and ds_ij as dq_kernel does, and
 *   dv_j = sum_i p_ij z_ij dout_i,   dk_j = sum_i ds_ij q_i
 * where a row with the uniform mean (lse -inf) has p z = 1 / tk and ds = 0 for every key. */
static __global__ void __launch_bounds__(ROWS * 32)
    dkv_kernel(tfc_attn_desc d, const float *q, const float *k, const float *v, const float *lse,
               const float *D, const float *dout, float *dk, float *dv)
{
    extern __shared__ float sh[];
    const int qld = d.dk + 1, dld = d.dv + 1;
    float *qs = sh, *dos = qs + TILE * qld, *kw = dos + TILE * dld, *vw = kw + ROWS * d.dk;
    float *ls = vw + ROWS * d.dv, *Ds = ls + TILE;
    int b, h, j0;
    block_of(d, d.tk, &b, &h, &j0);
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32, j = j0 + w;
    stage_rows(d, b, d.tk, h, j0, k, d.dk, kw);
    stage_rows(d, b, d.tk, h, j0, v, d.dv, vw);
    float ak[NC], av[NC];
#pragma unroll
    for (int t = 0; t < NC; t++) ak[t] = av[t] = 0.f;
    int ib, ie;
    row_range(d, j0, min(j0 + ROWS, d.tk), &ib, &ie);
    for (int i0 = 0; i0 < d.tq; i0 += TILE) {
        const int ni = min(TILE, d.tq - i0), i = i0 + lane;
        __syncthreads(); /* the previous tile is consumed */
        const int64_t row = row_of(d, b, h, min(i, d.tq - 1));
        if (threadIdx.x < TILE) {
            ls[lane] = lane < ni ? lse[row] : INFINITY;
            Ds[lane] = lane < ni ? D[row] : 0.f;
        }
        const int uniform = __syncthreads_or(threadIdx.x < ni && lse[row] == -INFINITY);
        if (!uniform && (i0 >= ie || i0 + ni <= ib)) continue; /* no row meets the keys */
        stage_tile(d, b, d.tq, h, i0, ni, q, d.dk, qs, qld);
        stage_tile(d, b, d.tq, h, i0, ni, dout, d.dv, dos, dld);
        __syncthreads();
        const float L = ls[lane];
        float pz = 0.f, ds = 0.f;
        if (j < d.tk && L == -INFINITY) {
            pz = 1.f / (float)d.tk;
        } else if (L != INFINITY && sees(d, b, i, j)) { /* lanes past ni have L = inf */
            const float p = expf(d.scale * dot(qs + lane * qld, kw + w * d.dk, d.dk) - L);
            const float dp = dot(dos + lane * dld, vw + w * d.dv, d.dv);
            const float z = drop_scale(d, row, j);
            ds = d.scale * p * (z * dp - Ds[lane]);
            pz = p * z;
        }
        if (!__any_sync(FULL, pz != 0.f || ds != 0.f)) continue;
        for (int r = 0; r < ni; r++) {
            const float pr = __shfl_sync(FULL, pz, r), gr = __shfl_sync(FULL, ds, r);
            const float *qr = qs + r * qld, *dor = dos + r * dld;
#pragma unroll
            for (int t = 0; t < NC; t++) {
                const int c = lane + 32 * t;
                if (c < d.dv) av[t] += pr * dor[c];
                if (c < d.dk) ak[t] += gr * qr[c];
            }
        }
    }
    if (j >= d.tk) return;
    float *dkj = dk + at(d, b, d.tk, j, h, d.dk), *dvj = dv + at(d, b, d.tk, j, h, d.dv);
#pragma unroll
    for (int t = 0; t < NC; t++) {
        if (lane + 32 * t < d.dk) dkj[lane + 32 * t] = ak[t];
        if (lane + 32 * t < d.dv) dvj[lane + 32 * t] = av[t];
    }
}

/* Dynamic shared memory of a kernel: its bytes, the 48 KiB default raised where needed. */
template <typename K> static int smem(gpu_ctx *g, K kernel, size_t floats, size_t *bytes)
{
    *bytes = floats * sizeof(float);
    if (*bytes > 48 * 1024)
        TFC_CUDA_TRY(g,
                     cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          (int)*bytes),
                     1);
    return 0;
}

/* The head sizes the kernels hold in registers (NC columns per lane). */
static int dims_fit(gpu_ctx *g, const tfc_attn_desc *d)
{
    if (d->dk <= 32 * NC && d->dv <= 32 * NC) return 0;
    return tfc_gpu_fail(g, "attention", "key_dim and value_dim above 256 have no GPU kernel",
                        __FILE__, __LINE__);
}

/* Blocks of ROWS query rows or keys over every (example, head). */
static unsigned blocks(const tfc_attn_desc *d, int steps)
{
    return (unsigned)((int64_t)d->n * d->heads * ((steps + ROWS - 1) / ROWS));
}

void tfc_gpu_attention_forward(tfc_backend *be, const tfc_attn_desc *d, const float *q,
                               const float *k, const float *v, float *o, float *lse)
{
    gpu_ctx *g = gpu_of(be);
    if ((int64_t)d->n * d->heads * d->tq == 0 || dims_fit(g, d)) return;
    size_t bytes;
    if (smem(g, forward_kernel,
             (size_t)TILE * (d->dk + 1) + (size_t)TILE * d->dv + (size_t)ROWS * d->dk, &bytes))
        return;
    forward_kernel<<<blocks(d, d->tq), ROWS * 32, bytes, g->stream>>>(*d, q, k, v, o, lse);
    TFC_LAUNCH_CHECK(g, forward_kernel);
}

/* Scratch: D [n, heads, tq]. */
void tfc_gpu_attention_backward(tfc_backend *be, const tfc_attn_desc *d, const float *q,
                                const float *k, const float *v, const float *o,
                                const float *lse, const float *dout, float *dq, float *dk,
                                float *dv)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t rows = (int64_t)d->n * d->heads * d->tq;
    if (rows == 0 || d->tk == 0 || dims_fit(g, d)) return;
    float *D = (float *)tfc_gpu_scratch(g, (size_t)rows * sizeof(float));
    if (!D) return;
    rowdot_kernel<<<gpu_blocks(g, rows * 32), GPU_THREADS, 0, g->stream>>>(rows, d->heads, d->tq,
                                                                           d->dv, dout, o, D);
    TFC_LAUNCH_CHECK(g, rowdot_kernel);
    size_t bytes;
    if (smem(g, dq_kernel,
             (size_t)TILE * (d->dk + d->dv + 2) + (size_t)ROWS * (d->dk + d->dv), &bytes))
        return;
    dq_kernel<<<blocks(d, d->tq), ROWS * 32, bytes, g->stream>>>(*d, q, k, v, lse, D, dout, dq);
    TFC_LAUNCH_CHECK(g, dq_kernel);
    if (smem(g, dkv_kernel,
             (size_t)TILE * (d->dk + d->dv + 4) + (size_t)ROWS * (d->dk + d->dv), &bytes))
        return;
    dkv_kernel<<<blocks(d, d->tk), ROWS * 32, bytes, g->stream>>>(*d, q, k, v, lse, D, dout, dk,
                                                                  dv);
    TFC_LAUNCH_CHECK(g, dkv_kernel);
}
