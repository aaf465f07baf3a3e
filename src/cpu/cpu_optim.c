/* The fused optimizer step on the CPU: one element-wise pass over the trainable parameter
 * arena per step, for every optimizer type (formulas in core/backend.h, tfc_optim_desc).
 * Each element is independent, so the result is the same for any number of threads; the
 * loops are split by type so that each vectorises without branches. Lamb, Adafactor and
 * Muon work over each variable (tfc_optim_var) as well: their sums are taken in PARTS fixed
 * parts of the variable, in double, added in order, so they too do not depend on threads
 * (Muon's matrix products are the backend's gemm). */
#include <math.h>
#include <stdlib.h>

#include "cpu/cpu_internal.h"

/* g = grad_scale * grad + l2 * w, clipped to [-clipvalue, clipvalue] where that is set,
 * then the decoupled decay w -= decay * w (AdamW). */
static inline float grad_and_decay(const tfc_optim_desc *d, float *w, float grad)
{
    float g = d->grad_scale * grad + d->l2 * *w;
    const float c = d->clipvalue;
    g = c > 0.0f ? fminf(fmaxf(g, -c), c) : g;
    *w -= d->decay * *w;
    return g;
}

#define PARTS 32

/* The first element of part k (0..PARTS) of n */
static inline int64_t part_at(int64_t n, int k)
{
    return n * k / PARTS;
}

/* The sum of PARTS partial sums, in order */
static double sum_parts(const double *s)
{
    double t = 0;
    for (int k = 0; k < PARTS; k++) t += s[k];
    return t;
}

/* Lamb's update direction u = (m / (1 - beta_1^t)) / (sqrt(v / (1 - beta_2^t)) + epsilon) */
static inline float lamb_u(const tfc_optim_desc *d, float m, float v)
{
    return (m / d->coef[0]) / (sqrtf(v / d->coef[1]) + d->epsilon);
}

/* One variable of n floats under lamb: the moments, then w -= (||w|| / ||u||) lr u */
static void lamb_var(tfc_backend *be, const tfc_optim_desc *d, int64_t n, float *w,
                     const float *grad, float *m, float *v)
{
    const float b1 = d->beta_1, b2 = d->beta_2;
    double ws[PARTS], us[PARTS];
    TFC_CPU_FOR(PARTS, tfc_cpu_threads(be, n), for (int k = 0; k < PARTS; k++) {
        double sw = 0, su = 0;
        for (int64_t i = part_at(n, k); i < part_at(n, k + 1); i++) {
            float g = grad_and_decay(d, &w[i], grad[i]);
            m[i] = m[i] + (g - m[i]) * (1.0f - b1);
            v[i] = v[i] + (g * g - v[i]) * (1.0f - b2);
            float u = lamb_u(d, m[i], v[i]);
            sw += (double)w[i] * w[i];
            su += (double)u * u;
        }
        ws[k] = sw;
        us[k] = su;
    });
    const float wn = (float)sqrt(sum_parts(ws)), un = (float)sqrt(sum_parts(us));
    const float step = (wn > 0.0f && un > 0.0f ? wn / un : 1.0f) * d->lr;
    TFC_CPU_FOR_SIMD(n, tfc_cpu_threads(be, n), for (int64_t i = 0; i < n; i++) {
        w[i] -= step * lamb_u(d, m[i], v[i]);
    });
}

/* The mean of R over the rows of matrix b of a folded variable (float, as Keras's mean) */
static float mean_r(const tfc_optim_var *x, const float *R, int64_t b)
{
    double s = 0;
    for (int64_t r = 0; r < x->rows; r++) s += R[b * x->rows + r];
    return (float)(s / (double)x->rows);
}

/* Column block width of adafactor's column means: a block's sums stay on the stack */
#define COL_BLOCK 64

/* One variable under adafactor (formulas in core/backend.h). R, C and V are the variable's
 * parts of the three slots; a rank-1 variable keeps u in R for the second pass (R is 0
 * after it, as Keras's placeholder), a folded one keeps g, then u, in V (v after it).
 * A folded variable's u = g / (sqrt(R[row] / mean(R)) sqrt(C[col])): the square root of
 * v taken factor by factor. Keras takes the root of the product, which underflows to 0
 * where a weight's row and column had no gradient yet (R and C near epsilon_1 = 1e-30),
 * and its 0 / 0 then makes the whole variable NaN; the factors' roots do not underflow
 * (optax's way), so such a weight's u is 0. Elsewhere the two differ by a rounding. */
static void adafactor_var(tfc_backend *be, const tfc_optim_desc *d, const tfc_optim_var *x,
                          float *w, const float *grad, float *R, float *C, float *V)
{
    const int64_t n = x->numel;
    const int nt = tfc_cpu_threads(be, n);
    const float b = d->coef[1], e1 = d->epsilon;
    const int folded = x->rows > 0;
    double ws[PARTS], us[PARTS];
    /* g (and, unfolded, v and u), the decay, and the sum of w^2 */
    TFC_CPU_FOR(PARTS, nt, for (int k = 0; k < PARTS; k++) {
        double sw = 0, su = 0;
        for (int64_t i = part_at(n, k); i < part_at(n, k + 1); i++) {
            float g = grad_and_decay(d, &w[i], grad[i]);
            sw += (double)w[i] * w[i];
            if (folded) {
                V[i] = g;
                continue;
            }
            V[i] = b * V[i] + (1.0f - b) * (g * g + e1);
            float u = g / sqrtf(V[i]);
            R[i] = u;
            su += (double)u * u;
        }
        ws[k] = sw;
        us[k] = su;
    });
    const int64_t cols = x->cols, mats = folded ? n / (x->rows * cols) : 0;
    const int64_t rows = mats * x->rows; /* every row of every matrix */
    if (folded) {
        /* R: each row's mean of G over its columns */
        TFC_CPU_FOR(rows, nt, for (int64_t r = 0; r < rows; r++) {
            const float *gr = V + r * cols;
            double s = 0;
            for (int64_t j = 0; j < cols; j++) s += gr[j] * gr[j] + e1;
            R[r] = b * R[r] + (1.0f - b) * (float)(s / (double)cols);
        });
        /* C: each column's mean of G over its rows, a block of columns at a time */
        const int64_t nblk = (cols + COL_BLOCK - 1) / COL_BLOCK;
        TFC_CPU_FOR(mats * nblk, nt, for (int64_t q = 0; q < mats * nblk; q++) {
            const int64_t m = q / nblk, j0 = q % nblk * COL_BLOCK;
            const int64_t w_ = cols - j0 < COL_BLOCK ? cols - j0 : COL_BLOCK;
            double acc[COL_BLOCK] = {0};
            for (int64_t r = 0; r < x->rows; r++) {
                const float *gr = V + (m * x->rows + r) * cols + j0;
                for (int64_t j = 0; j < w_; j++) acc[j] += gr[j] * gr[j] + e1;
            }
            for (int64_t j = 0; j < w_; j++) {
                float *c = &C[m * cols + j0 + j];
                *c = b * *c + (1.0f - b) * (float)(acc[j] / (double)x->rows);
            }
        });
        /* u over the rows, in PARTS parts of them */
        TFC_CPU_FOR(PARTS, nt, for (int k = 0; k < PARTS; k++) {
            double su = 0;
            int64_t at = -1;
            float mean = 0;
            for (int64_t r = part_at(rows, k); r < part_at(rows, k + 1); r++) {
                if (r / x->rows != at) at = r / x->rows, mean = mean_r(x, R, at);
                const float rs = sqrtf(R[r] / mean), *c = C + at * cols;
                float *vr = V + r * cols;
                for (int64_t j = 0; j < cols; j++) {
                    float u = vr[j] / (rs * sqrtf(c[j]));
                    vr[j] = u;
                    su += (double)u * u;
                }
            }
            us[k] = su;
        });
    }
    const float rms_w = (float)sqrt(sum_parts(ws) / (double)n);
    const float rms_u = (float)sqrt(sum_parts(us) / (double)n);
    const float alpha = fmaxf(d->epsilon_2, rms_w) * d->coef[0];
    const float den = fmaxf(1.0f, rms_u / d->clip_threshold);
    if (!folded) {
        TFC_CPU_FOR_SIMD(n, nt, for (int64_t i = 0; i < n; i++) {
            w[i] -= alpha * (R[i] / den);
            R[i] = 0.0f;
        });
        return;
    }
    /* the update, and v = R[row] / mean(R) C[col] into V (Keras's velocity) */
    TFC_CPU_FOR(PARTS, nt, for (int k = 0; k < PARTS; k++) {
        int64_t at = -1;
        float mean = 0;
        for (int64_t r = part_at(rows, k); r < part_at(rows, k + 1); r++) {
            if (r / x->rows != at) at = r / x->rows, mean = mean_r(x, R, at);
            const float rm = R[r] / mean, *c = C + at * cols;
            float *vr = V + r * cols, *wr = w + r * cols;
            for (int64_t j = 0; j < cols; j++) {
                wr[j] -= alpha * (vr[j] / den);
                vr[j] = rm * c[j];
            }
        }
    });
}

/* Muon's AdamW rule for a variable without `matrix`: Adam with alpha = coef0 and the
 * decoupled decay coef1 (adam_weight_decay lr) in place of d->decay */
static void muon_adamw_var(tfc_backend *be, const tfc_optim_desc *d, int64_t n, float *w,
                           const float *grad, float *m, float *v)
{
    const float b1 = d->beta_1, b2 = d->beta_2, eps = d->epsilon, alpha = d->coef[0];
    const float decay = d->coef[1];
    TFC_CPU_FOR_SIMD(n, tfc_cpu_threads(be, n), for (int64_t i = 0; i < n; i++) {
        float g = d->grad_scale * grad[i] + d->l2 * w[i];
        g = d->clipvalue > 0.0f ? fminf(fmaxf(g, -d->clipvalue), d->clipvalue) : g;
        w[i] -= decay * w[i];
        m[i] = m[i] + (g - m[i]) * (1.0f - b1);
        v[i] = v[i] + (g * g - v[i]) * (1.0f - b2);
        w[i] -= m[i] * alpha / (sqrtf(v[i]) + eps);
    });
}

/* Muon's rule for a rank-2 variable (rows x cols): the momentum, then its Newton-Schulz
 * orthogonalisation on a host workspace of numel + 2 min(rows, cols)^2 + numel floats */
static void muon_matrix_var(tfc_backend *be, const tfc_optim_desc *d, const tfc_optim_var *x,
                            float *w, const float *grad, float *m)
{
    const int64_t n = x->numel;
    const int rows = (int)x->rows, cols = (int)x->cols, tr = rows > cols;
    const int r = tr ? cols : rows, c = tr ? rows : cols; /* X is r x c, r <= c */
    const float mu = d->momentum;
    const int nesterov = d->nesterov;
    float *ws = malloc(sizeof(float) * (size_t)(2 * n + 2 * (int64_t)r * r));
    TFC_ASSERT(ws);
    float *o = ws, *X = ws + n, *A = X + n, *B = A + (int64_t)r * r;
    double part[PARTS];
    TFC_CPU_FOR(PARTS, tfc_cpu_threads(be, n), for (int k = 0; k < PARTS; k++) {
        double s = 0;
        for (int64_t i = part_at(n, k); i < part_at(n, k + 1); i++) {
            float g = grad_and_decay(d, &w[i], grad[i]);
            m[i] = m[i] + (g + m[i] * (mu - 1.0f));
            o[i] = nesterov ? g + mu * m[i] : m[i];
            s += (double)o[i] * o[i];
        }
        part[k] = s;
    });
    const float den = (float)sqrt(sum_parts(part)) + 1e-7f;
    for (int i = 0; i < rows; i++) /* X = o / (||o|| + 1e-7), as r x c */
        for (int j = 0; j < cols; j++)
            X[tr ? (int64_t)j * rows + i : (int64_t)i * cols + j] = o[(int64_t)i * cols + j] / den;
    for (int step = 0; step < d->ns_steps; step++) {
        /* A = X X^T;  B = b A + (c A) A;  X = a X + B X */
        be->ops->gemm(be, 0, 1, r, r, c, 1.0f, X, c, X, c, 0.0f, A, r);
        be->ops->gemm(be, 0, 0, r, r, r, d->ns_c, A, r, A, r, 0.0f, B, r);
        for (int64_t i = 0; i < (int64_t)r * r; i++) B[i] += d->ns_b * A[i];
        be->ops->gemm(be, 0, 0, r, c, r, 1.0f, B, r, X, c, 0.0f, o, c);
        for (int64_t i = 0; i < n; i++) X[i] = d->ns_a * X[i] + o[i];
    }
    /* w -= ((lr X) sqrt(max(rows, cols))) rms_rate, Keras's lr_adjust (rms_rate 0: none) */
    const float root = sqrtf((float)(rows > cols ? rows : cols)), rate = d->rms_rate;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            float u = d->lr * X[tr ? (int64_t)j * rows + i : (int64_t)i * cols + j];
            if (rate != 0.0f) u = u * root * rate;
            w[(int64_t)i * cols + j] -= u;
        }
    free(ws);
}

/* Lamb, Adafactor and Muon: each variable in turn (the whole arena as one without a table) */
static void update_per_variable(tfc_backend *be, const tfc_optim_desc *d, int64_t n, float *w,
                                const float *grad, float *s0, float *s1, float *s2)
{
    const tfc_optim_var whole = {0, n, 0, 0, 0};
    const tfc_optim_var *vars = d->vars ? d->vars : &whole;
    for (int k = 0; k < (d->vars ? d->nvars : 1); k++) {
        const tfc_optim_var *x = &vars[k];
        const int64_t o = x->offset;
        if (d->type == TFC_OPTIMIZER_LAMB)
            lamb_var(be, d, x->numel, w + o, grad + o, s0 + o, s1 + o);
        else if (d->type == TFC_OPTIMIZER_MUON && x->matrix)
            muon_matrix_var(be, d, x, w + o, grad + o, s0 + o);
        else if (d->type == TFC_OPTIMIZER_MUON)
            muon_adamw_var(be, d, x->numel, w + o, grad + o, s0 + o, s1 + o);
        else
            adafactor_var(be, d, x, w + o, grad + o, s0 + o, s1 + o, s2 + o);
    }
}

void tfc_cpu_optimizer_update(tfc_backend *be, const tfc_optim_desc *d, int64_t n, float *params,
                              const float *grads, float *slot0, float *slot1, float *slot2)
{
    int nt = tfc_cpu_threads(be, n);
    const float lr = d->lr;
    switch (d->type) {
    case TFC_OPTIMIZER_SGD:
        if (d->momentum == 0.0f) {
#pragma omp parallel for simd TFC_CPU_STATIC(n, nt)
            for (int64_t i = 0; i < n; i++) {
                float g = grad_and_decay(d, &params[i], grads[i]);
                params[i] -= lr * g;
            }
        } else {
            const float mu = d->momentum;
            const int nesterov = d->nesterov;
#pragma omp parallel for simd TFC_CPU_STATIC(n, nt)
            for (int64_t i = 0; i < n; i++) {
                float g = grad_and_decay(d, &params[i], grads[i]);
                float v = mu * slot0[i] - lr * g; /* v = momentum v - lr g */
                slot0[i] = v;
                params[i] += nesterov ? mu * v - lr * g : v;
            }
        }
        break;
    case TFC_OPTIMIZER_ADAM:
    case TFC_OPTIMIZER_ADAMW: { /* AdamW: Adam's rule after grad_and_decay's decay */
        const float b1 = d->beta_1, b2 = d->beta_2, eps = d->epsilon, alpha = d->alpha;
        const int ams = d->amsgrad;
#pragma omp parallel for simd TFC_CPU_STATIC(n, nt)
        for (int64_t i = 0; i < n; i++) {
            float g = grad_and_decay(d, &params[i], grads[i]);
            float m = slot0[i] + (g - slot0[i]) * (1.0f - b1);
            float v = slot1[i] + (g * g - slot1[i]) * (1.0f - b2);
            slot0[i] = m;
            slot1[i] = v;
            if (ams) {
                v = fmaxf(slot2[i], v);
                slot2[i] = v;
            }
            params[i] -= m * alpha / (sqrtf(v) + eps);
        }
        break;
    }
    case TFC_OPTIMIZER_RMSPROP: {
        const float rho = d->rho, mu = d->momentum, eps = d->epsilon;
        const int centered = d->centered, use_mom = d->momentum > 0.0f;
#pragma omp parallel for simd TFC_CPU_STATIC(n, nt)
        for (int64_t i = 0; i < n; i++) {
            float g = grad_and_decay(d, &params[i], grads[i]);
            float v = rho * slot0[i] + (1.0f - rho) * (g * g);
            slot0[i] = v;
            float den = v + eps;
            if (centered) {
                float a = rho * slot2[i] + (1.0f - rho) * g;
                slot2[i] = a;
                den = v - a * a + eps;
            }
            float inc = lr * g / sqrtf(den);
            if (use_mom) {
                inc = mu * slot1[i] + inc;
                slot1[i] = inc;
            }
            params[i] -= inc;
        }
        break;
    }
    case TFC_OPTIMIZER_ADAGRAD: {
        const float eps = d->epsilon;
#pragma omp parallel for simd TFC_CPU_STATIC(n, nt)
        for (int64_t i = 0; i < n; i++) {
            float g = grad_and_decay(d, &params[i], grads[i]);
            float acc = slot0[i] + g * g;
            slot0[i] = acc;
            params[i] -= lr * g / sqrtf(acc + eps);
        }
        break;
    }
    case TFC_OPTIMIZER_NADAM: {
        const float b1 = d->beta_1, b2 = d->beta_2, eps = d->epsilon;
        const float u1 = d->coef[0], d1 = d->coef[1], c2 = d->coef[2], d2 = d->coef[3],
                    d3 = d->coef[4];
#pragma omp parallel for simd TFC_CPU_STATIC(n, nt)
        for (int64_t i = 0; i < n; i++) {
            float g = grad_and_decay(d, &params[i], grads[i]);
            float m = slot0[i] + (g - slot0[i]) * (1.0f - b1);
            float v = slot1[i] + (g * g - slot1[i]) * (1.0f - b2);
            slot0[i] = m;
            slot1[i] = v;
            float mh = u1 * m / d1 + c2 * g / d2;
            params[i] -= mh * lr / (sqrtf(v / d3) + eps);
        }
        break;
    }
    case TFC_OPTIMIZER_ADAMAX: {
        const float b1 = d->beta_1, b2 = d->beta_2, eps = d->epsilon, c = d->coef[0];
#pragma omp parallel for simd TFC_CPU_STATIC(n, nt)
        for (int64_t i = 0; i < n; i++) {
            float g = grad_and_decay(d, &params[i], grads[i]);
            float m = slot0[i] + (g - slot0[i]) * (1.0f - b1);
            float u = fmaxf(b2 * slot1[i], fabsf(g));
            slot0[i] = m;
            slot1[i] = u;
            params[i] -= lr * m / (c * (u + eps));
        }
        break;
    }
    case TFC_OPTIMIZER_LION: {
        const float b1 = d->beta_1, b2 = d->beta_2;
#pragma omp parallel for simd TFC_CPU_STATIC(n, nt)
        for (int64_t i = 0; i < n; i++) {
            float g = grad_and_decay(d, &params[i], grads[i]);
            float c = slot0[i] * b1 + g * (1.0f - b1);
            params[i] -= lr * (float)((c > 0.0f) - (c < 0.0f)); /* sign, 0 at 0 */
            slot0[i] = slot0[i] * b2 + g * (1.0f - b2);
        }
        break;
    }
    case TFC_OPTIMIZER_ADADELTA: {
        const float rho = d->rho, eps = d->epsilon;
#pragma omp parallel for simd TFC_CPU_STATIC(n, nt)
        for (int64_t i = 0; i < n; i++) {
            float g = grad_and_decay(d, &params[i], grads[i]);
            float a = rho * slot0[i] + (1.0f - rho) * (g * g);
            slot0[i] = a;
            float delta = -(sqrtf(slot1[i] + eps) * g / sqrtf(a + eps));
            slot1[i] = rho * slot1[i] + (1.0f - rho) * (delta * delta);
            params[i] += lr * delta;
        }
        break;
    }
    case TFC_OPTIMIZER_FTRL: {
        /* Keras's default power 0.5 as sqrtf (vectorised; the same value as powf's,
         * which is correctly rounded here too in all but rare cases) */
        const float p = -d->lr_power, l1 = d->l1, shrink = d->l2_shrinkage, q = d->coef[0];
        const int root = p == 0.5f;
#pragma omp parallel for simd TFC_CPU_STATIC(n, nt)
        for (int64_t i = 0; i < n; i++) {
            float w = params[i];
            float g = grad_and_decay(d, &w, grads[i]);
            float acc = slot0[i], acc_new = acc + g * g;
            float pn = root ? sqrtf(acc_new) : powf(acc_new, p);
            float po = root ? sqrtf(acc) : powf(acc, p);
            float z = slot1[i] + ((g + shrink * w) - (pn - po) / lr * w);
            float zc = fminf(fmaxf(z, -l1), l1);
            slot0[i] = acc_new;
            slot1[i] = z;
            params[i] = (zc - z) / (pn / lr + q);
        }
        break;
    }
    case TFC_OPTIMIZER_SCHEDULE_FREE_ADAMW: {
        const float b1 = d->beta_1, b2 = d->beta_2, eps = d->epsilon, lr_t = d->coef[0],
                    bc2 = d->coef[1], wt = d->coef[2];
        const int first = d->coef[3] != 0.0f;
#pragma omp parallel for simd TFC_CPU_STATIC(n, nt)
        for (int64_t i = 0; i < n; i++) {
            float z = first ? params[i] : slot0[i]; /* Keras's momentum starts as w */
            float g = grad_and_decay(d, &params[i], grads[i]);
            float v = slot1[i] + (g * g - slot1[i]) * (1.0f - b2);
            slot1[i] = v;
            float z_new = z - lr_t * g / (sqrtf(v / bc2) + eps);
            slot0[i] = z_new;
            float x = (params[i] - (1.0f - b1) * z) / b1;
            x = (1.0f - wt) * x + wt * z_new;
            params[i] = (1.0f - b1) * z_new + b1 * x;
        }
        break;
    }
    case TFC_OPTIMIZER_LAMB:
    case TFC_OPTIMIZER_ADAFACTOR:
    case TFC_OPTIMIZER_MUON:
        update_per_variable(be, d, n, params, grads, slot0, slot1, slot2);
        break;
    case TFC_OPTIMIZER_COUNT: TFC_ASSERT(!"unknown optimizer type"); break;
    }
}
