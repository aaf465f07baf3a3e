/* The fused optimizer step on the CPU: one element-wise pass over the trainable parameter
 * arena per step, for every optimizer type (formulas in core/backend.h, tfc_optim_desc).
 * Each element is independent, so the result is the same for any number of threads; the
 * loops are split by type so that each vectorises without branches. */
#include <math.h>

#include "cpu/cpu_internal.h"

/* g = grad_scale * grad + l2 * w, then the decoupled decay w -= decay * w (AdamW). */
static inline float grad_and_decay(const tfc_optim_desc *d, float *w, float grad)
{
    float g = d->grad_scale * grad + d->l2 * *w;
    *w -= d->decay * *w;
    return g;
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
    case TFC_OPTIMIZER_COUNT: TFC_ASSERT(!"unknown optimizer type"); break;
    }
}
