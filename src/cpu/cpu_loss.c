/* CPU losses and the accuracy count, as Keras 3 defines them (keras.losses, TensorFlow
 * backend): cross-entropies from logits through log-softmax / the stable sigmoid form,
 * from probabilities with the Keras clip to [1e-7, 1 - 1e-7] and normalisation; BCE and
 * the element-wise losses average over the classes of a row, CCE sums; the categorical
 * hinge and the cosine similarity are one term a row. Row sums accumulate in double. */
#include "cpu/cpu_internal.h"

/* Keras's backend.epsilon() and its clip range, as float32 values. */
#define CLIP_LO 1e-7f
#define CLIP_HI (1.0f - 1e-7f)

static float clipf(float p)
{
    return p < CLIP_LO ? CLIP_LO : p > CLIP_HI ? CLIP_HI : p;
}

/* 1 where clip passes the gradient (inside the range, ends included, as tf.clip_by_value). */
static float clip_pass(float p)
{
    return p >= CLIP_LO && p <= CLIP_HI ? 1.0f : 0.0f;
}

/* Row maximum: subtracted before exp so that exp cannot overflow. */
static inline float row_max(int C, const float *x)
{
    float m = x[0];
#pragma omp simd reduction(max : m)
    for (int j = 1; j < C; j++) m = x[j] > m ? x[j] : m;
    return m;
}

/* sum_j exp(x_j - m), also stored in e when it is given. */
static inline double sum_exp(int C, const float *x, float m, float *e)
{
    double sum = 0.0;
    if (e) {
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < C; j++) {
            e[j] = tfc_cpu_expf(x[j] - m);
            sum += e[j];
        }
    } else {
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < C; j++) sum += tfc_cpu_expf(x[j] - m);
    }
    return sum;
}

/* Sparse CCE of one row; dx (g = scale * weight) when d is set. Logits: loss = lse(x) - x_l,
 * dx = g (softmax - onehot_l). Probabilities (as Keras: clip, log, then softmax CE, i.e.
 * pc = clip(p), loss = -log(pc_l / sum pc)): dx_j = g [p_j unclipped] (1/S - [j=l]/pc_l). */
TFC_CPU_VECTOR
static double sparse_cce(int C, const float *x, int l, int logits, float g, float *d)
{
    if (logits) {
        float m = row_max(C, x);
        double sum = sum_exp(C, x, m, d); /* softmax numerators land in dx */
        if (d) {
            float k = (float)(g / sum);
#pragma omp simd
            for (int j = 0; j < C; j++) d[j] *= k;
            d[l] -= g;
        }
        return m + log(sum) - x[l];
    }
    double S = 0.0;
    for (int j = 0; j < C; j++) S += clipf(x[j]);
    float pl = clipf(x[l]);
    if (d) {
        for (int j = 0; j < C; j++) d[j] = (float)(g * clip_pass(x[j]) / S);
        d[l] -= g * clip_pass(x[l]) / pl;
    }
    return log(S) - log(pl);
}

/* CCE of one row against the distribution t. Logits: loss = lse(x) sum t - t·x, dx =
 * g (softmax sum t - t). Probabilities (Keras: r = p / sum p, q = clip(r), loss =
 * -sum t log q): with G_k = -t_k [r_k unclipped] / q_k, dx_j = g (G_j - sum_k G_k r_k) / S. */
TFC_CPU_VECTOR
static double dense_cce(int C, const float *x, const float *t, int logits, float g, float *d)
{
    double tsum = 0.0, tx = 0.0;
    if (logits) {
        float m = row_max(C, x);
        double sum = sum_exp(C, x, m, d);
        for (int j = 0; j < C; j++) {
            tsum += t[j];
            tx += (double)t[j] * x[j];
        }
        if (d) {
            float k = (float)(g * tsum / sum);
            for (int j = 0; j < C; j++) d[j] = d[j] * k - g * t[j];
        }
        return (m + log(sum)) * tsum - tx;
    }
    double S = 0.0, loss = 0.0, gr = 0.0;
    for (int j = 0; j < C; j++) S += x[j];
    for (int j = 0; j < C; j++) {
        float r = (float)(x[j] / S);
        double q = clipf(r);
        loss -= t[j] * log(q);
        gr += -t[j] * clip_pass(r) / q * r;
    }
    if (d)
        for (int j = 0; j < C; j++) {
            float r = (float)(x[j] / S);
            double G = -t[j] * clip_pass(r) / (double)clipf(r);
            d[j] = (float)(g * (G - gr) / S);
        }
    return loss;
}

/* BCE of one row, the mean over its C outputs. Logits (stable for any x):
 * l = max(x, 0) - x z + log(1 + exp(-|x|)), dl/dx = sigmoid(x) - z. Probabilities:
 * pc = clip(p), l = -(z log pc + (1 - z) log(1 - pc)), dl/dp = [unclipped] ((1-z)/(1-pc) - z/pc). */
static double bce(int C, const float *x, const float *z, int logits, float g, float *d)
{
    double loss = 0.0;
    float gc = g / (float)C;
    for (int j = 0; j < C; j++) {
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
    return loss / C;
}

/* MSE of one row: mean_j (x_j - t_j)^2, dl/dx_j = 2 (x_j - t_j) / C. */
static double mse(int C, const float *x, const float *t, float g, float *d)
{
    double loss = 0.0;
    for (int j = 0; j < C; j++) {
        double e = (double)x[j] - t[j];
        loss += e * e;
        if (d) d[j] = (float)(2.0 * g * e / C);
    }
    return loss / C;
}

/* The element-wise losses but MSE (MAE, Huber, log-cosh, MSLE, MAPE, Poisson, KL divergence,
 * hinge, squared hinge) of one row, as Keras 3 computes them: the sum over the row of
 * tfc_elementwise_term (core/backend.h, which the GPU's kernel shares) divided by
 * tfc_loss_row_divisor (the mean; KL divergence's sum). */
static double elementwise(tfc_loss_kind kind, int C, const float *x, const float *t,
                          double delta, float g, float *d)
{
    const int n = tfc_loss_row_divisor(kind, C);
    double loss = 0.0;
    for (int j = 0; j < C; j++) {
        double dj, l = tfc_elementwise_term(kind, x[j], t[j], delta, &dj);
        loss += l;
        if (d) d[j] = (float)(g * dj / n);
    }
    return loss / n;
}

/* Categorical hinge of one row (Keras 3): h = max(neg - pos + 1, 0) with pos = t.x and
 * neg = max_j (1 - t_j) x_j. Where h > 0, dh/dx_j = (1 - t_j) [j attains the max] / ties
 * - t_j: the max's gradient is shared equally among the positions that attain it, as JAX's
 * and TensorFlow's reduce_max share it. */
static double categorical_hinge(int C, const float *x, const float *t, float g, float *d)
{
    double pos = 0.0;
    float neg = (1.0f - t[0]) * x[0];
    for (int j = 0; j < C; j++) {
        pos += (double)t[j] * x[j];
        const float v = (1.0f - t[j]) * x[j];
        neg = v > neg ? v : neg;
    }
    int ties = 0;
    for (int j = 0; j < C; j++) ties += (1.0f - t[j]) * x[j] == neg;
    const double h = neg - pos + 1.0;
    if (d)
        for (int j = 0; j < C; j++)
            d[j] = h > 0.0 ? (float)(g * ((1.0f - t[j]) * x[j] == neg ? (1.0 - t[j]) / ties - t[j]
                                                                      : -t[j]))
                           : 0.0f;
    return h > 0.0 ? h : 0.0;
}

/* Keras's l2 normalisation factor of a row whose squares sum to s: min(1 / sqrt(s), 1e7)
 * (rsqrt, then the minimum with 1 / epsilon); *free = 0 where the bound holds it, so the
 * factor passes no gradient. */
static double inv_norm(double s, int *free)
{
    const double r = 1.0 / sqrt(s);
    *free = r < 1e7;
    return *free ? r : 1e7;
}

/* Cosine similarity of one row (Keras 3): -sum_j tn_j xn_j, tn = t ry and xn = x rx with
 * inv_norm's factors; dl/dx_j = -ry rx (t_j - [rx free] rx^2 (t.x) x_j). */
static double cosine_similarity(int C, const float *x, const float *t, float g, float *d)
{
    double sx = 0.0, st = 0.0, tx = 0.0;
    for (int j = 0; j < C; j++) {
        sx += (double)x[j] * x[j];
        st += (double)t[j] * t[j];
        tx += (double)t[j] * x[j];
    }
    int xfree, tfree;
    const double rx = inv_norm(sx, &xfree), ry = inv_norm(st, &tfree);
    if (d)
        for (int j = 0; j < C; j++)
            d[j] = (float)(-g * ry * rx * (t[j] - (xfree ? rx * rx * tx * x[j] : 0.0)));
    return -ry * rx * tx;
}

/* *loss_out = scale sum_r w_r loss_r; dx (overwritten) = scale w_r dloss_r/dx. A row of
 * weight 0 contributes nothing and gets dx = 0, whatever its values; so does a sparse
 * label outside [0, classes) (the pipeline reports those with their record). */
void tfc_cpu_loss(tfc_backend *be, tfc_loss_kind kind, int from_logits, float delta,
                  int64_t rows, int classes, const float *x, const void *labels,
                  const float *row_weight, float scale, float *loss_out, float *dx)
{
    const int C = classes;
    double part[TFC_REDUCE_THREADS];
    const int nt = tfc_cpu_reduce_threads(be, rows * C * 4), T = nt;
#pragma omp parallel num_threads(tfc_cpu_team(nt))
    TFC_CPU_SHARES(tid, nt)
    {
        double total = 0.0;
        for (int64_t r = rows * tid / T; r < rows * (tid + 1) / T; r++) {
            const float *xr = x + r * C;
            float *d = dx ? dx + r * C : NULL;
            float w = row_weight ? row_weight[r] : 1.0f;
            int sparse_label = kind == TFC_LOSS_SPARSE_CCE ? ((const int32_t *)labels)[r] : 0;
            if (w == 0.0f || sparse_label < 0 || sparse_label >= C) {
                if (d) memset(d, 0, (size_t)C * sizeof(float));
                continue;
            }
            const float *t = (const float *)labels + r * C;
            float g = scale * w;
            double l = 0.0;
            switch (kind) {
            case TFC_LOSS_SPARSE_CCE: l = sparse_cce(C, xr, sparse_label, from_logits, g, d); break;
            case TFC_LOSS_CCE: l = dense_cce(C, xr, t, from_logits, g, d); break;
            case TFC_LOSS_BCE: l = bce(C, xr, t, from_logits, g, d); break;
            case TFC_LOSS_MSE: l = mse(C, xr, t, g, d); break;
            case TFC_LOSS_CATEGORICAL_HINGE: l = categorical_hinge(C, xr, t, g, d); break;
            case TFC_LOSS_COSINE_SIMILARITY: l = cosine_similarity(C, xr, t, g, d); break;
            default: l = elementwise(kind, C, xr, t, delta, g, d); break;
            }
            total += w * l;
        }
        part[tid] = total;
    }
    double total = 0.0;
    for (int t = 0; t < nt; t++) total += part[t];
    *loss_out = (float)(scale * total);
}

/* First index of the largest label value (a one-hot's class). */
static int argmax_row(int C, const float *t)
{
    int best = 0;
    for (int j = 1; j < C; j++)
        if (t[j] > t[best]) best = j;
    return best;
}

/* *count_out += sum_r w_r [label of r among the top k of x_r]; a tie with the label's
 * score counts as ranking above it, and a NaN score is never right. */
void tfc_cpu_accuracy(tfc_backend *be, tfc_loss_kind kind, int from_logits, int64_t rows,
                      int classes, int k, const float *x, const void *labels,
                      const float *row_weight, float *count_out)
{
    const int C = classes;
    const int sparse = kind == TFC_LOSS_SPARSE_CCE;
    double part[TFC_REDUCE_THREADS];
    const int nt = tfc_cpu_reduce_threads(be, rows * C);
#pragma omp parallel num_threads(tfc_cpu_team(nt)) /* fixed shares, added in order */
    TFC_CPU_SHARES(t, nt)
    {
        double count = 0.0;
        for (int64_t r = rows * t / nt; r < rows * (t + 1) / nt; r++) {
            float w = row_weight ? row_weight[r] : 1.0f;
            if (w == 0.0f) continue;
            const float *xr = x + r * C;
            int right;
            if (C == 1) {
                float label = sparse ? (float)((const int32_t *)labels)[r]
                                     : ((const float *)labels)[r];
                int pred = xr[0] >= (from_logits ? 0.0f : 0.5f);
                right = !isnan(xr[0]) && pred == (label >= 0.5f);
            } else {
                int l = sparse ? ((const int32_t *)labels)[r]
                               : argmax_row(C, (const float *)labels + r * C);
                right = 0;
                if (l >= 0 && l < C && !isnan(xr[l])) {
                    int above = 0;
                    for (int j = 0; j < C; j++) above += j != l && xr[j] >= xr[l];
                    right = above < k;
                }
            }
            count += (double)w * right;
        }
        part[t] = count;
    }
    double count = 0.0;
    for (int t = 0; t < nt; t++) count += part[t];
    *count_out += (float)count;
}
