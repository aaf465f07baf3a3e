/* Losses and the accuracy count on the GPU, one warp per row, with the formulas and the
 * float/double promotions of cpu_loss.c (Keras 3 definitions: log-softmax and the stable
 * sigmoid form from logits; the 1e-7 clip from probabilities; BCE and the element-wise
 * losses average over a row's outputs, CCE sums; the categorical hinge and the cosine
 * similarity are one term a row). Row losses go to scratch in double and are added by the
 * deterministic reduction, so the loss is the same on every run. */
#include <math.h>

#include "gpu/gpu_internal.cuh"

#define CLIP_LO 1e-7f
#define CLIP_HI (1.0f - 1e-7f)

static __device__ __forceinline__ float clipf(float p)
{
    return p < CLIP_LO ? CLIP_LO : p > CLIP_HI ? CLIP_HI : p;
}

/* 1 where the clip passes the gradient (inside the range, ends included). */
static __device__ __forceinline__ float clip_pass(float p)
{
    return p >= CLIP_LO && p <= CLIP_HI ? 1.0f : 0.0f;
}

static __device__ __forceinline__ float row_max(int C, const float *x, int lane)
{
    float m = -INFINITY;
    for (int j = lane; j < C; j += 32) m = fmaxf(m, x[j]);
    return warp_max(m);
}

/* Sparse CCE of one row (lane's share of the work; the loss is returned to every lane).
 * Logits: loss = lse(x) - x_l, d = g (softmax - onehot_l). Probabilities: pc = clip(p),
 * loss = log(sum pc) - log(pc_l), d_j = g [p_j unclipped] / S - [j = l] g [p_l unclipped] / pc_l. */
static __device__ double sparse_cce(int C, const float *x, int l, int logits, float g, float *d,
                             int lane)
{
    if (logits) {
        const float m = row_max(C, x, lane);
        double sum = 0.0;
        for (int j = lane; j < C; j += 32) sum += expf(x[j] - m);
        sum = warp_sum(sum);
        if (d) {
            const float k = (float)(g / sum);
            for (int j = lane; j < C; j += 32) {
                float v = expf(x[j] - m) * k;
                d[j] = j == l ? v - g : v;
            }
        }
        return m + log(sum) - x[l];
    }
    double S = 0.0;
    for (int j = lane; j < C; j += 32) S += clipf(x[j]);
    S = warp_sum(S);
    const float pl = clipf(x[l]);
    if (d)
        for (int j = lane; j < C; j += 32) {
            float v = (float)(g * clip_pass(x[j]) / S);
            d[j] = j == l ? v - g * clip_pass(x[l]) / pl : v;
        }
    return log(S) - log(pl);
}

/* CCE against the distribution t. Logits: loss = lse(x) sum t - t·x, d = g (softmax sum t
 * - t). Probabilities: r = p / sum p, q = clip(r), loss = -sum t log q, with G_k = -t_k
 * [r_k unclipped] / q_k: d_j = g (G_j - sum_k G_k r_k) / S. */
static __device__ double dense_cce(int C, const float *x, const float *t, int logits, float g, float *d,
                            int lane)
{
    if (logits) {
        const float m = row_max(C, x, lane);
        double sum = 0.0, tsum = 0.0, tx = 0.0;
        for (int j = lane; j < C; j += 32) {
            sum += expf(x[j] - m);
            tsum += t[j];
            tx += (double)t[j] * x[j];
        }
        sum = warp_sum(sum);
        tsum = warp_sum(tsum);
        tx = warp_sum(tx);
        if (d) {
            const float k = (float)(g * tsum / sum);
            for (int j = lane; j < C; j += 32) d[j] = expf(x[j] - m) * k - g * t[j];
        }
        return (m + log(sum)) * tsum - tx;
    }
    double S = 0.0, loss = 0.0, gr = 0.0;
    for (int j = lane; j < C; j += 32) S += x[j];
    S = warp_sum(S);
    for (int j = lane; j < C; j += 32) {
        float r = (float)(x[j] / S);
        double q = clipf(r);
        loss -= t[j] * log(q);
        gr += -t[j] * clip_pass(r) / q * r;
    }
    loss = warp_sum(loss);
    gr = warp_sum(gr);
    if (d)
        for (int j = lane; j < C; j += 32) {
            float r = (float)(x[j] / S);
            double G = -t[j] * clip_pass(r) / (double)clipf(r);
            d[j] = (float)(g * (G - gr) / S);
        }
    return loss;
}

/* BCE, the mean over the row's outputs. Logits: max(x, 0) - x z + log(1 + exp(-|x|)),
 * d = sigmoid(x) - z. Probabilities: -(z log pc + (1 - z) log(1 - pc)), pc = clip(p). */
static __device__ double bce(int C, const float *x, const float *z, int logits, float g, float *d,
                      int lane)
{
    double loss = 0.0;
    const float gc = g / (float)C;
    for (int j = lane; j < C; j += 32) {
        double v = x[j], t = z[j];
        if (logits) {
            loss += (v > 0 ? v : 0) - v * t + log1p(exp(-fabs(v)));
            if (d) d[j] = gc * (float)(1.0 / (1.0 + exp(-v)) - t);
        } else {
            double pc = clipf(x[j]);
            loss -= t * log(pc) + (1.0 - t) * log(1.0 - pc);
            if (d) d[j] = gc * clip_pass(x[j]) * (float)((1.0 - t) / (1.0 - pc) - t / pc);
        }
    }
    return warp_sum(loss) / C;
}

/* MSE: mean_j (x_j - t_j)^2, d_j = 2 (x_j - t_j) / C. */
static __device__ double mse(int C, const float *x, const float *t, float g, float *d, int lane)
{
    double loss = 0.0;
    for (int j = lane; j < C; j += 32) {
        double e = (double)x[j] - t[j];
        loss += e * e;
        if (d) d[j] = (float)(2.0 * g * e / C);
    }
    return warp_sum(loss) / C;
}

/* The element-wise losses but MSE: tfc_elementwise_term (core/backend.h), the CPU's
 * function, summed over the row and divided by tfc_loss_row_divisor. */
static __device__ double elementwise(int kind, int C, const float *x, const float *t,
                                     double delta, float g, float *d, int lane)
{
    const int n = tfc_loss_row_divisor((tfc_loss_kind)kind, C);
    double loss = 0.0;
    for (int j = lane; j < C; j += 32) {
        double dj, l = tfc_elementwise_term((tfc_loss_kind)kind, x[j], t[j], delta, &dj);
        loss += l;
        if (d) d[j] = (float)(g * dj / n);
    }
    return warp_sum(loss) / n;
}

/* Categorical hinge of one row, as cpu_loss.c: h = max(max_j (1 - t_j) x_j - t.x + 1, 0);
 * the max's gradient shared among the positions that attain it. */
static __device__ double categorical_hinge(int C, const float *x, const float *t, float g,
                                           float *d, int lane)
{
    double pos = 0.0;
    float neg = -INFINITY;
    for (int j = lane; j < C; j += 32) {
        pos += (double)t[j] * x[j];
        neg = fmaxf(neg, (1.0f - t[j]) * x[j]);
    }
    pos = warp_sum(pos);
    neg = warp_max(neg);
    int ties = 0;
    for (int j = lane; j < C; j += 32) ties += (1.0f - t[j]) * x[j] == neg;
    ties = warp_sum(ties);
    const double h = neg - pos + 1.0;
    if (d)
        for (int j = lane; j < C; j += 32)
            d[j] = h > 0.0 ? (float)(g * ((1.0f - t[j]) * x[j] == neg ? (1.0 - t[j]) / ties - t[j]
                                                                      : -t[j]))
                           : 0.0f;
    return h > 0.0 ? h : 0.0;
}

/* Cosine similarity of one row, as cpu_loss.c: -ry rx t.x with the rows' factors
 * min(1 / |row|, 1e7); the bound, where it holds, passes no gradient. */
static __device__ double cosine_similarity(int C, const float *x, const float *t, float g,
                                           float *d, int lane)
{
    double sx = 0.0, st = 0.0, tx = 0.0;
    for (int j = lane; j < C; j += 32) {
        sx += (double)x[j] * x[j];
        st += (double)t[j] * t[j];
        tx += (double)t[j] * x[j];
    }
    sx = warp_sum(sx), st = warp_sum(st), tx = warp_sum(tx);
    const double rx0 = 1.0 / sqrt(sx), ry0 = 1.0 / sqrt(st);
    const int xfree = rx0 < 1e7;
    const double rx = xfree ? rx0 : 1e7, ry = ry0 < 1e7 ? ry0 : 1e7;
    if (d)
        for (int j = lane; j < C; j += 32)
            d[j] = (float)(-g * ry * rx * (t[j] - (xfree ? rx * rx * tx * x[j] : 0.0)));
    return -ry * rx * tx;
}

/* rowloss[r] = w_r loss_r; dx (overwritten) = scale w_r dloss_r/dx. A row of weight 0, or
 * a sparse label outside [0, classes), contributes nothing and gets dx = 0. */
static __global__ void loss_kernel(int kind, int logits, float delta, int64_t rows, int C,
                                   const float *x, const void *labels, const float *row_weight,
                                   float scale, double *rowloss, float *dx)
{
    const int lane = threadIdx.x & 31;
    const int64_t nw = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5; r < rows; r += nw) {
        const float *xr = x + r * C;
        float *d = dx ? dx + r * C : NULL;
        const float w = row_weight ? row_weight[r] : 1.0f;
        const int sl = kind == TFC_LOSS_SPARSE_CCE ? ((const int32_t *)labels)[r] : 0;
        if (w == 0.0f || sl < 0 || sl >= C) {
            if (d)
                for (int j = lane; j < C; j += 32) d[j] = 0.0f;
            if (lane == 0) rowloss[r] = 0.0;
            continue;
        }
        const float *t = (const float *)labels + r * C;
        const float g = scale * w;
        double l;
        switch (kind) {
        case TFC_LOSS_SPARSE_CCE: l = sparse_cce(C, xr, sl, logits, g, d, lane); break;
        case TFC_LOSS_CCE: l = dense_cce(C, xr, t, logits, g, d, lane); break;
        case TFC_LOSS_BCE: l = bce(C, xr, t, logits, g, d, lane); break;
        case TFC_LOSS_MSE: l = mse(C, xr, t, g, d, lane); break;
        case TFC_LOSS_CATEGORICAL_HINGE: l = categorical_hinge(C, xr, t, g, d, lane); break;
        case TFC_LOSS_COSINE_SIMILARITY: l = cosine_similarity(C, xr, t, g, d, lane); break;
        default: l = elementwise(kind, C, xr, t, delta, g, d, lane); break;
        }
        if (lane == 0) rowloss[r] = w * l;
    }
}

/* out[0] = (float)(scale * total[0]) */
static __global__ void loss_finish(const double *total, float scale, float *out)
{
    out[0] = (float)(scale * total[0]);
}

/* count[0] += (float)total[0] */
static __global__ void count_finish(const double *total, float *count)
{
    count[0] += (float)total[0];
}

/* Scratch for one row reduction: per-row values, partial sums, the total. */
typedef struct row_scratch {
    double *rows, *partials, *total;
} row_scratch;

static int row_scratch_get(gpu_ctx *g, int64_t rows, row_scratch *s)
{
    const size_t a = gpu_align((size_t)rows * sizeof(double));
    const size_t b = gpu_align((size_t)tfc_gpu_reduce_blocks(rows) * sizeof(double));
    char *p = (char *)tfc_gpu_scratch(g, a + b + sizeof(double));
    if (!p) return 1;
    s->rows = (double *)p;
    s->partials = (double *)(p + a);
    s->total = (double *)(p + a + b);
    return 0;
}

void tfc_gpu_loss(tfc_backend *be, tfc_loss_kind kind, int from_logits, float delta,
                  int64_t rows, int classes, const float *x, const void *labels,
                  const float *row_weight, float scale, float *loss_out, float *dx)
{
    gpu_ctx *g = gpu_of(be);
    if (rows <= 0 || classes <= 0) {
        TFC_CUDA_TRY(g, cudaMemsetAsync(loss_out, 0, sizeof(float), g->stream));
        return;
    }
    row_scratch s;
    if (row_scratch_get(g, rows, &s)) return;
    loss_kernel<<<gpu_blocks(g, rows * 32), GPU_THREADS, 0, g->stream>>>(
        (int)kind, from_logits, delta, rows, classes, x, labels, row_weight, scale, s.rows, dx);
    TFC_LAUNCH_CHECK(g, loss_kernel);
    if (tfc_gpu_sum_f64(g, s.rows, rows, s.partials, s.total)) return;
    loss_finish<<<1, 1, 0, g->stream>>>(s.total, scale, loss_out);
    TFC_LAUNCH_CHECK(g, loss_finish);
}

/* First index of the largest label value (a one-hot's class): each lane keeps its own
 * first maximum, then lanes combine preferring the larger value, then the lower index. */
static __device__ int argmax_row(int C, const float *t, int lane)
{
    float best = -INFINITY;
    int at = C;
    for (int j = lane; j < C; j += 32)
        if (at == C || t[j] > best) {
            best = t[j];
            at = j;
        }
    for (int o = 16; o > 0; o >>= 1) {
        float ob = __shfl_xor_sync(0xffffffffu, best, o);
        int oa = __shfl_xor_sync(0xffffffffu, at, o);
        if (oa < C && (at == C || ob > best || (ob == best && oa < at))) {
            best = ob;
            at = oa;
        }
    }
    return at;
}

/* rowval[r] = w_r [label of r among the top k of x_r]; a tie with the label's score ranks
 * above it, a NaN score is never right. Binary (C == 1): (x >= threshold) == (label >= 0.5). */
static __global__ void accuracy_kernel(int sparse, int logits, int64_t rows, int C, int k,
                                const float *x, const void *labels, const float *row_weight,
                                double *rowval)
{
    const int lane = threadIdx.x & 31;
    const int64_t nw = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5; r < rows; r += nw) {
        const float w = row_weight ? row_weight[r] : 1.0f;
        const float *xr = x + r * C;
        int right = 0;
        if (w != 0.0f) {
            if (C == 1) {
                float label = sparse ? (float)((const int32_t *)labels)[r]
                                     : ((const float *)labels)[r];
                int pred = xr[0] >= (logits ? 0.0f : 0.5f);
                right = !isnan(xr[0]) && pred == (label >= 0.5f);
            } else {
                int l = sparse ? ((const int32_t *)labels)[r]
                               : argmax_row(C, (const float *)labels + r * C, lane);
                if (l >= 0 && l < C && !isnan(xr[l])) {
                    int above = 0;
                    for (int j = lane; j < C; j += 32) above += j != l && xr[j] >= xr[l];
                    right = warp_sum(above) < k;
                }
            }
        }
        if (lane == 0) rowval[r] = (double)w * right;
    }
}

void tfc_gpu_accuracy(tfc_backend *be, tfc_loss_kind kind, int from_logits, int64_t rows,
                      int classes, int k, const float *x, const void *labels,
                      const float *row_weight, float *count_out)
{
    gpu_ctx *g = gpu_of(be);
    if (rows <= 0 || classes <= 0) return;
    row_scratch s;
    if (row_scratch_get(g, rows, &s)) return;
    accuracy_kernel<<<gpu_blocks(g, rows * 32), GPU_THREADS, 0, g->stream>>>(
        kind == TFC_LOSS_SPARSE_CCE, from_logits, rows, classes, k, x, labels, row_weight, s.rows);
    TFC_LAUNCH_CHECK(g, accuracy_kernel);
    if (tfc_gpu_sum_f64(g, s.rows, rows, s.partials, s.total)) return;
    count_finish<<<1, 1, 0, g->stream>>>(s.total, count_out);
    TFC_LAUNCH_CHECK(g, count_finish);
}
