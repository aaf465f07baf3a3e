/* Attention on the GPU (tfc_attn_desc, core/backend.h), flash-attention style as
 * cpu_attention.c, in float32 and with no T x T buffer. Two families of kernels:
 * - head sizes up to 64 (every zoo model): register-tiled kernels, a block of 256 threads
 *   per 64 query rows or keys, 64 x 64 products in 4 x 4 pieces per thread (below,
 *   "Register-tiled kernels");
 * - larger heads (up to 256): a warp per row. The forward pass runs a block per (example,
 *   head, ROWS query rows), key and value tiles of TILE keys through shared memory and an
 *   online softmax.
 * Both save each row's lse; the backward passes, without atomics: D_i = dout_i . o_i, then
 * one kernel per key block for dk, dv (looping over query tiles) and one per query block for
 * dq (looping over key tiles), the probabilities recomputed from lse. Tiles outside every
 * row's causal mask or window are skipped. */
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
    forward_kernel(tfc_attn_desc d, const uint64_t *step_off,
                   const float *q, const float *k, const float *v, float *o,
                   float *lse)
{
    if (step_off) d.step += *step_off; /* gpu_step_offset */
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
    dq_kernel(tfc_attn_desc d, const uint64_t *step_off,
              const float *q, const float *k, const float *v, const float *lse,
              const float *D, const float *dout, float *dq)
{
    if (step_off) d.step += *step_off; /* gpu_step_offset */
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
    dkv_kernel(tfc_attn_desc d, const uint64_t *step_off,
               const float *q, const float *k, const float *v, const float *lse,
               const float *D, const float *dout, float *dk, float *dv)
{
    if (step_off) d.step += *step_off; /* gpu_step_offset */
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

/* ---- Register-tiled kernels (key_dim and value_dim up to 64) ----------------------------
 * A block of 256 threads owns 64 query rows (forward, dq) or 64 keys (dk, dv) and walks
 * tiles of 64 keys or rows through shared memory. Thread (ty, tx) = (tid / 16, tid % 16)
 * holds a 4 x 4 piece of each 64 x 64 product: rows (or keys) 4 ty + r, and 4 tx + c of the
 * other side, summed from two float4 loads per step of the contraction out of transposed
 * copies ([dim][64], stride XLD); a row's 64 scores lie on the 16 lanes of one half warp,
 * reduced by shuffles. Its share of a [64, dim] result is rows 4 ty + r and columns
 * CW tx + u (CW = ceil(max(key_dim, value_dim) / 16)), summed over the 64 of the tile from
 * a [64][XLD] buffer of probabilities or score gradients and a row copy ([64][16 CW]).
 * Shared rows past the sequence are zeros, so padding only ever multiplies zeros; what is
 * unseen is chosen away (a score -inf, a probability 0), never multiplied. Fixed orders, no
 * atomics: the same bits on every run. */
#define TB 64       /* rows or keys per block and per tile */
#define XLD (TB + 4) /* stride of the transposed copies and the 64 x 64 buffers */

/* rows [r0, r0 + n) (n <= TB) of head h in example b of x [., t, heads, dim], transposed into
 * s[c * XLD + r]; zeros past n. */
static __device__ void stage_t(const tfc_attn_desc &d, int b, int t, int h, int r0, int n,
                               const float *x, int dim, float *s)
{
    for (int e = threadIdx.x; e < TB * dim; e += blockDim.x) {
        const int r = e / dim, c = e % dim;
        s[c * XLD + r] = r < n ? x[at(d, b, t, r0 + r, h, dim) + c] : 0.f;
    }
}

/* The same rows as they lie, s[r * ld + c] for c < ld (ld >= dim); zeros past n and dim. */
static __device__ void stage_r(const tfc_attn_desc &d, int b, int t, int h, int r0, int n,
                               const float *x, int dim, float *s, int ld)
{
    for (int e = threadIdx.x; e < TB * ld; e += blockDim.x) {
        const int r = e / ld, c = e % ld;
        s[e] = r < n && c < dim ? x[at(d, b, t, r0 + r, h, dim) + c] : 0.f;
    }
}

/* Whether key j0 + jj of a tile is real and not masked, into vis[jj]. */
static __device__ void stage_vis(const tfc_attn_desc &d, int b, int j0, int *vis)
{
    for (int jj = threadIdx.x; jj < TB; jj += blockDim.x) {
        const int j = j0 + jj;
        vis[jj] = j < d.tk && (!d.kmask || d.kmask[(int64_t)b * d.tk + j] != 0.f);
    }
}

/* Row i sees key j, given that the key is real and not masked. */
static __device__ __forceinline__ bool sees_at(const tfc_attn_desc &d, int i, int j)
{
    return (!d.causal || j <= i) && (d.window <= 0 || abs(i - j) < d.window);
}

/* acc[r][c] += sum over n of a[e * XLD + 4 ay + r] * bt[e * XLD + 4 bx + c]. */
static __device__ __forceinline__ void mm4x4(const float *a, int ay, const float *bt, int bx,
                                             int n, float acc[4][4])
{
#pragma unroll 4
    for (int e = 0; e < n; e++) {
        const float4 x = *(const float4 *)(a + e * XLD + 4 * ay);
        const float4 y = *(const float4 *)(bt + e * XLD + 4 * bx);
        const float xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < 4; c++) acc[r][c] = fmaf(xs[r], ys[c], acc[r][c]);
    }
}

/* acc[r][u] += sum over e < TB of p[(4 ty + r) * XLD + e] * rows[e * ld + CW tx + u]. */
template <int CW>
static __device__ __forceinline__ void mm4xcw(const float *p, int ty, const float *rows, int ld,
                                              int tx, float acc[4][CW])
{
#pragma unroll 2
    for (int e = 0; e < TB; e += 4) {
        float4 pr[4];
#pragma unroll
        for (int r = 0; r < 4; r++) pr[r] = *(const float4 *)(p + (4 * ty + r) * XLD + e);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float *vr = rows + (e + k) * ld + CW * tx;
            float vv[CW];
            if (CW == 4) {
                const float4 x = *(const float4 *)vr;
                vv[0] = x.x, vv[1] = x.y, vv[2 % CW] = x.z, vv[3 % CW] = x.w;
            } else if (CW == 2) {
                const float2 x = *(const float2 *)vr;
                vv[0] = x.x, vv[1 % CW] = x.y;
            } else {
#pragma unroll
                for (int u = 0; u < CW; u++) vv[u] = vr[u];
            }
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const float pk = k == 0 ? pr[r].x : k == 1 ? pr[r].y : k == 2 ? pr[r].z : pr[r].w;
#pragma unroll
                for (int u = 0; u < CW; u++) acc[r][u] = fmaf(pk, vv[u], acc[r][u]);
            }
        }
    }
}

/* v[r] reduced over the 16 lanes of a half warp (one row's 64 keys). */
static __device__ __forceinline__ float half_max(float v)
{
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL, v, o));
    return v;
}
static __device__ __forceinline__ float half_sum(float v)
{
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    return v;
}

/* The block's (example, head, first row or key) over blocks of TB of `steps`, and its split
 * (the blocks of one row or key block are `split` neighbours). */
static __device__ __forceinline__ void tile_of(const tfc_attn_desc &d, int steps, int split,
                                               int *b, int *h, int *r0, int *s)
{
    const int nb = (steps + TB - 1) / TB;
    const int64_t blk = blockIdx.x / split, bh = blk / nb;
    *s = (int)(blockIdx.x % split);
    *r0 = (int)(blk % nb) * TB;
    *b = (int)(bh / d.heads), *h = (int)(bh % d.heads);
}

/* [*lo, *hi) narrowed to split s's share: the tiles [s ctiles, (s + 1) ctiles) of TB. */
static __device__ __forceinline__ void split_range(int split, int s, int ctiles, int *lo, int *hi)
{
    if (split > 1)
        *lo = max(*lo, s * ctiles * TB), *hi = min(*hi, (s + 1) * ctiles * TB);
}

/* Shared floats of each tiled kernel (the host's launch and the kernels agree on these). */
static __host__ __device__ __forceinline__ int tiled_ld(int cw) { return 16 * cw; }
static __host__ __device__ __forceinline__ size_t fwd_floats(int dk, int dv, int cw)
{
    return (size_t)XLD * (2 * dk + TB) + (size_t)TB * tiled_ld(cw) + TB;
}
static __host__ __device__ __forceinline__ size_t dq_floats(int dk, int dv, int cw)
{
    return (size_t)XLD * (2 * dk + 2 * dv + TB) + (size_t)TB * tiled_ld(cw) + TB;
}
static __host__ __device__ __forceinline__ size_t dkv_floats(int dk, int dv, int cw)
{
    return (size_t)XLD * (2 * dk + 2 * dv + TB) + 2 * (size_t)TB * tiled_ld(cw) + 2 * TB;
}

/* Forward, as forward_kernel's online softmax, a block per 64 query rows: per key tile
 * S = scale Q K^T (4 x 4 per thread), each row's maximum and sum over its half warp, the
 * running output rescaled and P Z V added from the shared P. */
template <int CW>
static __global__ void __launch_bounds__(256)
    fwd_tiled(tfc_attn_desc d, const uint64_t *step_off,
              const float *q, const float *k, const float *v, float *o,
              float *lse, int split, int ctiles, float *ws)
{
    if (step_off) d.step += *step_off; /* gpu_step_offset */
    extern __shared__ __align__(16) float tsh[];
    const int ld = tiled_ld(CW);
    float *qt = tsh, *kt = qt + XLD * d.dk, *ps = kt + XLD * d.dk, *vs = ps + XLD * TB;
    int *vis = (int *)(vs + TB * ld);
    int b, h, i0, sp;
    tile_of(d, d.tq, split, &b, &h, &i0, &sp);
    const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
    stage_t(d, b, d.tq, h, i0, min(TB, d.tq - i0), q, d.dk, qt);
    bool live[4];
    int64_t row[4];
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int i = i0 + 4 * ty + r;
        live[r] = i < d.tq && (!d.qmask || d.qmask[(int64_t)b * d.tq + i] != 0.f);
        row[r] = row_of(d, b, h, min(i, d.tq - 1));
    }
    float acc[4][CW], m[4], l[4];
#pragma unroll
    for (int r = 0; r < 4; r++) {
        m[r] = -INFINITY, l[r] = 0.f;
#pragma unroll
        for (int u = 0; u < CW; u++) acc[r][u] = 0.f;
    }
    int jb, je;
    key_range(d, i0, min(i0 + TB, d.tq), &jb, &je);
    split_range(split, sp, ctiles, &jb, &je);
    for (int j0 = jb; j0 < je; j0 += TB) {
        const int nj = min(TB, je - j0);
        __syncthreads(); /* the previous tile is consumed */
        stage_t(d, b, d.tk, h, j0, nj, k, d.dk, kt);
        stage_r(d, b, d.tk, h, j0, nj, v, d.dv, vs, ld);
        stage_vis(d, b, j0, vis);
        __syncthreads();
        float s[4][4] = {};
        mm4x4(qt, ty, kt, tx, d.dk, s);
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int i = i0 + 4 * ty + r;
            float mt = -INFINITY;
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int jj = 4 * tx + c;
                const bool seen = live[r] && jj < nj && vis[jj] && sees_at(d, i, j0 + jj);
                s[r][c] = seen ? d.scale * s[r][c] : -INFINITY;
                mt = fmaxf(mt, s[r][c]);
            }
            mt = half_max(mt);
            const float mn = fmaxf(m[r], mt);
            const float a = mn == -INFINITY ? 1.f : expf(m[r] - mn);
            float sum = 0.f, pz[4];
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const float p = s[r][c] > -INFINITY ? expf(s[r][c] - mn) : 0.f;
                sum += p;
                pz[c] = p != 0.f ? p * drop_scale(d, row[r], j0 + 4 * tx + c) : 0.f;
            }
            l[r] = l[r] * a + half_sum(sum);
            m[r] = mn;
#pragma unroll
            for (int u = 0; u < CW; u++) acc[r][u] *= a;
            *(float4 *)(ps + (4 * ty + r) * XLD + 4 * tx) = make_float4(pz[0], pz[1], pz[2], pz[3]);
        }
        __syncthreads();
        mm4xcw<CW>(ps, ty, vs, ld, tx, acc);
    }
    if (split > 1) { /* this share's maximum, sum and unscaled output, for fwd_combine */
        const int64_t rows = (int64_t)d.n * d.heads * d.tq;
#pragma unroll
        for (int r = 0; r < 4; r++) {
            if (i0 + 4 * ty + r >= d.tq) continue;
            const int64_t at_s = sp * rows + row[r];
            float *wo = ws + 2 * split * rows + at_s * d.dv;
#pragma unroll
            for (int u = 0; u < CW; u++)
                if (CW * tx + u < d.dv) wo[CW * tx + u] = acc[r][u];
            if (tx == 0) ws[at_s] = m[r], ws[split * rows + at_s] = l[r];
        }
        return;
    }
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int i = i0 + 4 * ty + r;
        if (i >= d.tq) continue; /* not break: the loop stays unrolled */
        float *oi = o + at(d, b, d.tq, i, h, d.dv);
        float out[CW], L;
        if (l[r] > 0.f) {
            const float inv = 1.f / l[r];
#pragma unroll
            for (int u = 0; u < CW; u++) out[u] = acc[r][u] * inv;
            L = m[r] + logf(l[r]);
        } else if (d.uniform) { /* no key seen: the mean of every v_j, as Keras */
            const float inv = 1.f / (float)d.tk;
#pragma unroll
            for (int u = 0; u < CW; u++) {
                const int c = CW * tx + u;
                float sum = 0.f;
                if (c < d.dv)
                    for (int j = 0; j < d.tk; j++) sum += v[at(d, b, d.tk, j, h, d.dv) + c];
                out[u] = sum * inv;
            }
            L = -INFINITY;
        } else {
#pragma unroll
            for (int u = 0; u < CW; u++) out[u] = 0.f;
            L = INFINITY;
        }
#pragma unroll
        for (int u = 0; u < CW; u++)
            if (CW * tx + u < d.dv) oi[CW * tx + u] = out[u];
        if (tx == 0) lse[row[r]] = L;
    }
}

/* dq, a block per 64 query rows: per key tile S = Q K^T and dP = dO V^T (4 x 4 per
 * thread), dS = scale P (Z dP - D) into shared, dq += dS K. Rows with lse +-inf: zero. */
template <int CW>
static __global__ void __launch_bounds__(256)
    dq_tiled(tfc_attn_desc d, const uint64_t *step_off,
             const float *q, const float *k, const float *v, const float *lse,
             const float *D, const float *dout, float *dq, int split, int ctiles, float *ws)
{
    if (step_off) d.step += *step_off; /* gpu_step_offset */
    extern __shared__ __align__(16) float tsh[];
    const int ld = tiled_ld(CW);
    float *qt = tsh, *dot_ = qt + XLD * d.dk, *kt = dot_ + XLD * d.dv, *vt = kt + XLD * d.dk;
    float *dss = vt + XLD * d.dv, *ks = dss + XLD * TB;
    int *vis = (int *)(ks + TB * ld);
    int b, h, i0, sp;
    tile_of(d, d.tq, split, &b, &h, &i0, &sp);
    const int ty = threadIdx.x / 16, tx = threadIdx.x % 16, ni = min(TB, d.tq - i0);
    stage_t(d, b, d.tq, h, i0, ni, q, d.dk, qt);
    stage_t(d, b, d.tq, h, i0, ni, dout, d.dv, dot_);
    float L[4], Di[4];
    bool live[4];
    int64_t row[4];
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int i = i0 + 4 * ty + r;
        row[r] = row_of(d, b, h, min(i, d.tq - 1));
        L[r] = i < d.tq ? lse[row[r]] : INFINITY;
        live[r] = isfinite(L[r]);
        Di[r] = live[r] ? D[row[r]] : 0.f;
    }
    float acc[4][CW];
#pragma unroll
    for (int r = 0; r < 4; r++)
#pragma unroll
        for (int u = 0; u < CW; u++) acc[r][u] = 0.f;
    int jb, je;
    key_range(d, i0, i0 + ni, &jb, &je);
    split_range(split, sp, ctiles, &jb, &je);
    for (int j0 = jb; j0 < je; j0 += TB) {
        const int nj = min(TB, je - j0);
        __syncthreads(); /* the previous tile is consumed */
        stage_t(d, b, d.tk, h, j0, nj, k, d.dk, kt);
        stage_t(d, b, d.tk, h, j0, nj, v, d.dv, vt);
        stage_r(d, b, d.tk, h, j0, nj, k, d.dk, ks, ld);
        stage_vis(d, b, j0, vis);
        __syncthreads();
        float s[4][4] = {}, dp[4][4] = {};
        mm4x4(qt, ty, kt, tx, d.dk, s);
        mm4x4(dot_, ty, vt, tx, d.dv, dp);
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int i = i0 + 4 * ty + r;
            float g[4];
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int jj = 4 * tx + c, j = j0 + jj;
                g[c] = 0.f;
                if (live[r] && jj < nj && vis[jj] && sees_at(d, i, j)) {
                    const float p = expf(d.scale * s[r][c] - L[r]);
                    g[c] = d.scale * p * (drop_scale(d, row[r], j) * dp[r][c] - Di[r]);
                }
            }
            *(float4 *)(dss + (4 * ty + r) * XLD + 4 * tx) = make_float4(g[0], g[1], g[2], g[3]);
        }
        __syncthreads();
        mm4xcw<CW>(dss, ty, ks, ld, tx, acc);
    }
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int i = i0 + 4 * ty + r;
        if (i >= d.tq) continue;
        float *dqi = split > 1 ? ws + (sp * (int64_t)d.n * d.heads * d.tq + row[r]) * d.dk
                               : dq + at(d, b, d.tq, i, h, d.dk);
#pragma unroll
        for (int u = 0; u < CW; u++)
            if (CW * tx + u < d.dk) dqi[CW * tx + u] = acc[r][u];
    }
}

/* dk, dv, a block per 64 keys: per tile of query rows (those that may see the block's keys,
 * and any tile holding a row with the uniform mean) S^T = K Q^T and dP^T = V dO^T (4 x 4
 * per thread: keys 4 ty + r, rows 4 tx + c), then dv += (P Z)^T dO and dk += dS^T Q through
 * one shared buffer. A row with the uniform mean (lse -inf) has p z = 1 / tk and ds = 0 for
 * every key; a row with lse +inf adds nothing. */
template <int CW>
static __global__ void __launch_bounds__(256)
    dkv_tiled(tfc_attn_desc d, const uint64_t *step_off,
              const float *q, const float *k, const float *v, const float *lse,
              const float *D, const float *dout, float *dk, float *dv, int split, int ctiles,
              float *ws)
{
    if (step_off) d.step += *step_off; /* gpu_step_offset */
    extern __shared__ __align__(16) float tsh[];
    const int ld = tiled_ld(CW);
    float *kt = tsh, *vt = kt + XLD * d.dk, *qt = vt + XLD * d.dv, *dot_ = qt + XLD * d.dk;
    float *buf = dot_ + XLD * d.dv, *qs = buf + XLD * TB, *dos = qs + TB * ld;
    float *ls = dos + TB * ld, *ds_ = ls + TB;
    int b, h, j0, sp;
    tile_of(d, d.tk, split, &b, &h, &j0, &sp);
    const int ty = threadIdx.x / 16, tx = threadIdx.x % 16, nj = min(TB, d.tk - j0);
    stage_t(d, b, d.tk, h, j0, nj, k, d.dk, kt);
    stage_t(d, b, d.tk, h, j0, nj, v, d.dv, vt);
    bool kvis[4];
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int j = j0 + 4 * ty + r;
        kvis[r] = j < d.tk && (!d.kmask || d.kmask[(int64_t)b * d.tk + j] != 0.f);
    }
    float ak[4][CW], av[4][CW];
#pragma unroll
    for (int r = 0; r < 4; r++)
#pragma unroll
        for (int u = 0; u < CW; u++) ak[r][u] = av[r][u] = 0.f;
    int ib, ie;
    row_range(d, j0, j0 + nj, &ib, &ie);
    const float mean = 1.f / (float)d.tk;
    int rb = 0, re = d.tq;
    split_range(split, sp, ctiles, &rb, &re);
    for (int i0 = rb; i0 < re; i0 += TB) {
        const int ni = min(TB, d.tq - i0);
        __syncthreads(); /* the previous tile is consumed */
        int uni = 0;
        for (int e = threadIdx.x; e < TB; e += blockDim.x) {
            const float L = e < ni ? lse[row_of(d, b, h, i0 + e)] : INFINITY;
            ls[e] = L;
            ds_[e] = e < ni && isfinite(L) ? D[row_of(d, b, h, i0 + e)] : 0.f;
            uni |= L == -INFINITY;
        }
        const int uniform = __syncthreads_or(uni);
        if (!uniform && (i0 >= ie || i0 + ni <= ib)) continue; /* no row meets the keys */
        stage_t(d, b, d.tq, h, i0, ni, q, d.dk, qt);
        stage_t(d, b, d.tq, h, i0, ni, dout, d.dv, dot_);
        stage_r(d, b, d.tq, h, i0, ni, q, d.dk, qs, ld);
        stage_r(d, b, d.tq, h, i0, ni, dout, d.dv, dos, ld);
        __syncthreads();
        float s[4][4] = {}, dp[4][4] = {};
        mm4x4(kt, ty, qt, tx, d.dk, s);
        mm4x4(vt, ty, dot_, tx, d.dv, dp);
        float g[4][4];
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int j = j0 + 4 * ty + r;
            float pz[4];
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int e = 4 * tx + c, i = i0 + e;
                const float L = ls[e];
                pz[c] = 0.f, g[r][c] = 0.f;
                if (j < d.tk && L == -INFINITY) {
                    pz[c] = mean;
                } else if (L != INFINITY && kvis[r] && sees_at(d, i, j)) {
                    const float p = expf(d.scale * s[r][c] - L);
                    const float z = drop_scale(d, row_of(d, b, h, i), j);
                    g[r][c] = d.scale * p * (z * dp[r][c] - ds_[e]);
                    pz[c] = p * z;
                }
            }
            *(float4 *)(buf + (4 * ty + r) * XLD + 4 * tx) = make_float4(pz[0], pz[1], pz[2], pz[3]);
        }
        __syncthreads();
        mm4xcw<CW>(buf, ty, dos, ld, tx, av);
        __syncthreads(); /* the probabilities are consumed */
#pragma unroll
        for (int r = 0; r < 4; r++)
            *(float4 *)(buf + (4 * ty + r) * XLD + 4 * tx) =
                make_float4(g[r][0], g[r][1], g[r][2], g[r][3]);
        __syncthreads();
        mm4xcw<CW>(buf, ty, qs, ld, tx, ak);
    }
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int j = j0 + 4 * ty + r;
        if (j >= d.tk) continue;
        float *dkj, *dvj;
        if (split > 1) { /* this share of the rows, for sum_splits */
            const int64_t keys = (int64_t)d.n * d.heads * d.tk;
            const int64_t at_s = sp * keys + ((int64_t)b * d.heads + h) * d.tk + j;
            dkj = ws + at_s * d.dk, dvj = ws + split * keys * d.dk + at_s * d.dv;
        } else {
            dkj = dk + at(d, b, d.tk, j, h, d.dk), dvj = dv + at(d, b, d.tk, j, h, d.dv);
        }
#pragma unroll
        for (int u = 0; u < CW; u++) {
            if (CW * tx + u < d.dk) dkj[CW * tx + u] = ak[r][u];
            if (CW * tx + u < d.dv) dvj[CW * tx + u] = av[r][u];
        }
    }
}

/* The forward pass's splits met: per row M = max_s m_s, L = sum_s l_s exp(m_s - M),
 * o = sum_s acc_s exp(m_s - M) / L, lse = M + log L (a thread per output element, the
 * splits in order); a row no split saw a key in gets the unsplit kernel's uniform mean or
 * zeros. ws: m [split][rows], l [split][rows], acc [split][rows][dv], rows in lse's order. */
static __global__ void fwd_combine(tfc_attn_desc d, int split, const float *ws, const float *v,
                                   float *o, float *lse)
{
    const int64_t rows = (int64_t)d.n * d.heads * d.tq;
    const float *wm = ws, *wl = ws + split * rows, *wo = ws + 2 * split * rows;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < rows * d.dv;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t row = e / d.dv, bh = row / d.tq;
        const int c = (int)(e % d.dv), i = (int)(row % d.tq);
        const int b = (int)(bh / d.heads), h = (int)(bh % d.heads);
        float M = -INFINITY, L = 0.f, acc = 0.f;
        for (int s = 0; s < split; s++) M = fmaxf(M, wm[s * rows + row]);
        for (int s = 0; M > -INFINITY && s < split; s++) {
            const float ms = wm[s * rows + row];
            if (ms == -INFINITY) continue; /* a share that saw no key: l = 0, acc = 0 */
            const float a = expf(ms - M);
            L += wl[s * rows + row] * a;
            acc += wo[(s * rows + row) * d.dv + c] * a;
        }
        float out, lv;
        if (L > 0.f) {
            out = acc * (1.f / L), lv = M + logf(L);
        } else if (d.uniform) { /* no key seen: the mean of every v_j, as Keras */
            float sum = 0.f;
            for (int j = 0; j < d.tk; j++) sum += v[at(d, b, d.tk, j, h, d.dv) + c];
            out = sum * (1.f / (float)d.tk), lv = -INFINITY;
        } else {
            out = 0.f, lv = INFINITY;
        }
        o[at(d, b, d.tq, i, h, d.dv) + c] = out;
        if (c == 0) lse[row] = lv;
    }
}

/* dst [n, t, heads, dim] = the sum of the splits' shares ws [split][n heads t][dim], in
 * order (dq over key splits; dk, dv over row splits). */
static __global__ void sum_splits(tfc_attn_desc d, int split, int t, int dim, const float *ws,
                                  float *dst)
{
    const int64_t rows = (int64_t)d.n * d.heads * t;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < rows * dim;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t row = e / dim, bh = row / t;
        const int c = (int)(e % dim), i = (int)(row % t);
        float sum = 0.f;
        for (int s = 0; s < split; s++) sum += ws[(s * rows + row) * dim + c];
        dst[at(d, (int)(bh / d.heads), t, i, (int)(bh % d.heads), dim) + c] = sum;
    }
}

/* Splits of a tiled kernel's walk: where its blocks (one per 64 rows or keys of every
 * example and head) number under 8 per SM, the walk over `tiles` tiles (keys for the
 * forward pass and dq, query rows for dk, dv) is cut into shares of *ctiles tiles, a block
 * each, met afterwards (fwd_combine, sum_splits) so the longest chain of tiles a block walks
 * shortens: a causal T = 2048 at batch 2 and 4 heads has 256 blocks, whose last walked 32
 * tiles alone. The count depends on the shape and the SM count only: the same bits on every
 * run of a device. no_split (tests: tfc_gpu_set_attention_no_split) keeps one share. */
static __host__ __device__ int split_of(int sm_count, int64_t blocks, int tiles, int no_split,
                                        int *ctiles)
{
    const int64_t target = 8 * (int64_t)sm_count;
    int64_t s = 1;
    if (!no_split && blocks < target && tiles > 1)
        s = (target + blocks - 1) / blocks < tiles ? (target + blocks - 1) / blocks : tiles;
    *ctiles = (int)((tiles + s - 1) / s);
    return (tiles + *ctiles - 1) / *ctiles;
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

/* CW of the tiled kernels for these head sizes, 0 where they exceed 64 (the warp-per-row
 * kernels above then run), or where the device's shared memory per block cannot hold them
 * (dk = dv = 64 take 120 KB: Turing's 64 KB cannot). */
static int tiled_cw(const gpu_ctx *g, const tfc_attn_desc *d)
{
    const int m = d->dk > d->dv ? d->dk : d->dv, cw = (m + 15) / 16;
    const size_t most = dkv_floats(d->dk, d->dv, cw) * sizeof(float); /* the largest */
    return m <= TB && most <= g->smem_optin ? cw : 0;
}

template <int CW>
static void fwd_launch(gpu_ctx *g, const tfc_attn_desc *d, const float *q, const float *k,
                       const float *v, float *o, float *lse)
{
    size_t bytes;
    if (smem(g, fwd_tiled<CW>, fwd_floats(d->dk, d->dv, CW), &bytes)) return;
    const int64_t blocks = (int64_t)d->n * d->heads * ((d->tq + TB - 1) / TB);
    const int64_t rows = (int64_t)d->n * d->heads * d->tq;
    int ctiles;
    const int split = split_of(g->sm_count, blocks, (d->tk + TB - 1) / TB,
                               g->attention_no_split, &ctiles);
    float *ws = NULL;
    if (split > 1 &&
        !(ws = (float *)tfc_gpu_scratch(g, (size_t)split * rows * (d->dv + 2) * sizeof(float))))
        return;
    fwd_tiled<CW><<<(unsigned)(blocks * split), 256, bytes, g->stream>>>(
        *d, gpu_step_offset(g), q, k, v, o, lse, split, ctiles, ws);
    TFC_LAUNCH_CHECK(g, fwd_tiled);
    if (split == 1) return;
    fwd_combine<<<gpu_blocks(g, rows * d->dv), GPU_THREADS, 0, g->stream>>>(*d, split, ws, v, o,
                                                                            lse);
    TFC_LAUNCH_CHECK(g, fwd_combine);
}

/* D [rows] first in the scratch, then dq's shares, then dk's and dv's. */
template <int CW>
static void bwd_launch(gpu_ctx *g, const tfc_attn_desc *d, const float *q, const float *k,
                       const float *v, const float *o, const float *lse, const float *dout,
                       float *dq, float *dk, float *dv)
{
    const int64_t rows = (int64_t)d->n * d->heads * d->tq;
    const int64_t keys = (int64_t)d->n * d->heads * d->tk;
    const int64_t qblocks = (int64_t)d->n * d->heads * ((d->tq + TB - 1) / TB);
    const int64_t kblocks = (int64_t)d->n * d->heads * ((d->tk + TB - 1) / TB);
    int qc, kc;
    const int qs =
        split_of(g->sm_count, qblocks, (d->tk + TB - 1) / TB, g->attention_no_split, &qc);
    const int ks =
        split_of(g->sm_count, kblocks, (d->tq + TB - 1) / TB, g->attention_no_split, &kc);
    const size_t wq = qs > 1 ? (size_t)qs * rows * d->dk : 0;
    const size_t wk = ks > 1 ? (size_t)ks * keys * (d->dk + d->dv) : 0;
    float *D = (float *)tfc_gpu_scratch(g, ((size_t)rows + wq + wk) * sizeof(float));
    if (!D) return;
    float *wsq = D + rows, *wsk = wsq + wq;
    rowdot_kernel<<<gpu_blocks(g, rows * 32), GPU_THREADS, 0, g->stream>>>(rows, d->heads, d->tq,
                                                                           d->dv, dout, o, D);
    TFC_LAUNCH_CHECK(g, rowdot_kernel);
    size_t bytes;
    if (smem(g, dq_tiled<CW>, dq_floats(d->dk, d->dv, CW), &bytes)) return;
    dq_tiled<CW><<<(unsigned)(qblocks * qs), 256, bytes, g->stream>>>(
        *d, gpu_step_offset(g), q, k, v, lse, D, dout, dq, qs, qc, wsq);
    TFC_LAUNCH_CHECK(g, dq_tiled);
    if (qs > 1) {
        sum_splits<<<gpu_blocks(g, rows * d->dk), GPU_THREADS, 0, g->stream>>>(*d, qs, d->tq,
                                                                               d->dk, wsq, dq);
        TFC_LAUNCH_CHECK(g, sum_splits);
    }
    if (smem(g, dkv_tiled<CW>, dkv_floats(d->dk, d->dv, CW), &bytes)) return;
    dkv_tiled<CW><<<(unsigned)(kblocks * ks), 256, bytes, g->stream>>>(
        *d, gpu_step_offset(g), q, k, v, lse, D, dout, dk, dv, ks, kc, wsk);
    TFC_LAUNCH_CHECK(g, dkv_tiled);
    if (ks > 1) {
        sum_splits<<<gpu_blocks(g, keys * d->dk), GPU_THREADS, 0, g->stream>>>(*d, ks, d->tk,
                                                                               d->dk, wsk, dk);
        TFC_LAUNCH_CHECK(g, sum_splits);
        sum_splits<<<gpu_blocks(g, keys * d->dv), GPU_THREADS, 0, g->stream>>>(
            *d, ks, d->tk, d->dv, wsk + (size_t)ks * keys * d->dk, dv);
        TFC_LAUNCH_CHECK(g, sum_splits);
    }
}

void tfc_gpu_attention_forward(tfc_backend *be, const tfc_attn_desc *d, const float *q,
                               const float *k, const float *v, float *o, float *lse)
{
    gpu_ctx *g = gpu_of(be);
    if ((int64_t)d->n * d->heads * d->tq == 0 || dims_fit(g, d)) return;
    switch (tiled_cw(g, d)) {
    case 1: fwd_launch<1>(g, d, q, k, v, o, lse); return;
    case 2: fwd_launch<2>(g, d, q, k, v, o, lse); return;
    case 3: fwd_launch<3>(g, d, q, k, v, o, lse); return;
    case 4: fwd_launch<4>(g, d, q, k, v, o, lse); return;
    }
    size_t bytes;
    if (smem(g, forward_kernel,
             (size_t)TILE * (d->dk + 1) + (size_t)TILE * d->dv + (size_t)ROWS * d->dk, &bytes))
        return;
    forward_kernel<<<blocks(d, d->tq), ROWS * 32, bytes, g->stream>>>(
        *d, gpu_step_offset(g), q, k, v, o, lse);
    TFC_LAUNCH_CHECK(g, forward_kernel);
}

/* Scratch: D [n, heads, tq], and the tiled kernels' shares where they split. */
void tfc_gpu_attention_backward(tfc_backend *be, const tfc_attn_desc *d, const float *q,
                                const float *k, const float *v, const float *o,
                                const float *lse, const float *dout, float *dq, float *dk,
                                float *dv)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t rows = (int64_t)d->n * d->heads * d->tq;
    if (rows == 0 || d->tk == 0 || dims_fit(g, d)) return;
    switch (tiled_cw(g, d)) {
    case 1: bwd_launch<1>(g, d, q, k, v, o, lse, dout, dq, dk, dv); return;
    case 2: bwd_launch<2>(g, d, q, k, v, o, lse, dout, dq, dk, dv); return;
    case 3: bwd_launch<3>(g, d, q, k, v, o, lse, dout, dq, dk, dv); return;
    case 4: bwd_launch<4>(g, d, q, k, v, o, lse, dout, dq, dk, dv); return;
    }
    float *D = (float *)tfc_gpu_scratch(g, (size_t)rows * sizeof(float));
    if (!D) return;
    rowdot_kernel<<<gpu_blocks(g, rows * 32), GPU_THREADS, 0, g->stream>>>(rows, d->heads, d->tq,
                                                                           d->dv, dout, o, D);
    TFC_LAUNCH_CHECK(g, rowdot_kernel);
    size_t bytes;
    if (smem(g, dq_kernel,
             (size_t)TILE * (d->dk + d->dv + 2) + (size_t)ROWS * (d->dk + d->dv), &bytes))
        return;
    dq_kernel<<<blocks(d, d->tq), ROWS * 32, bytes, g->stream>>>(
        *d, gpu_step_offset(g), q, k, v, lse, D, dout, dq);
    TFC_LAUNCH_CHECK(g, dq_kernel);
    if (smem(g, dkv_kernel,
             (size_t)TILE * (d->dk + d->dv + 4) + (size_t)ROWS * (d->dk + d->dv), &bytes))
        return;
    dkv_kernel<<<blocks(d, d->tk), ROWS * 32, bytes, g->stream>>>(
        *d, gpu_step_offset(g), q, k, v, lse, D, dout, dk, dv);
    TFC_LAUNCH_CHECK(g, dkv_kernel);
}
