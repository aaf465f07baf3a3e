/* The fused optimizer step on the GPU: one kernel reads and writes each parameter, gradient
 * and slot float once per step (formulas in core/backend.h, tfc_optim_desc; the same
 * expressions as cpu_optim.c). Element-wise and compiled with --fmad=false, so every
 * product and sum rounds as on the CPU: given the same gradients, the updated weights are
 * the CPU's bit for bit (sqrtf and division are IEEE-rounded in both). Also the trainer's
 * step ops (TFC_BACKEND_STEP_OPS): the gradient norm, clipping factor and skip flag kept in
 * a device tfc_step_state that the same kernel reads, so a step needs no host round trip. */
#include <math.h>

#include "gpu/gpu_internal.cuh"

/* g = grad_scale * grad + l2 * w, clipped to [-clipvalue, clipvalue] where that is set,
 * then the decoupled decay w -= decay * w (AdamW). */
static __device__ __forceinline__ float grad_and_decay(const tfc_optim_desc &d, float grad_scale,
                                                       float &w, float grad)
{
    float g = grad_scale * grad + d.l2 * w;
    g = d.clipvalue > 0.0f ? fminf(fmaxf(g, -d.clipvalue), d.clipvalue) : g;
    w -= d.decay * w;
    return g;
}

/* One update of every element; st (device, or NULL: d.grad_scale) gives grad_scale, and
 * with d.rates_at_state lr, alpha and decay; while st->skip is set nothing is read or
 * written. */
static __global__ void optim_kernel(tfc_optim_desc d, const tfc_step_state *st, int64_t n,
                                    float *params, const float *grads, float *slot0,
                                    float *slot1, float *slot2)
{
    if (st && st->skip) return;
    const float grad_scale = st ? st->grad_scale : d.grad_scale;
    if (st && d.rates_at_state) {
        d.lr = st->lr, d.alpha = st->alpha, d.decay = st->decay;
        for (int k = 0; k < TFC_OPTIM_COEFS; k++) d.coef[k] = st->coef[k];
    }
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float w = params[i];
        const float g = grad_and_decay(d, grad_scale, w, grads[i]);
        switch (d.type) {
        case TFC_OPTIMIZER_SGD:
            if (d.momentum == 0.0f) {
                w -= d.lr * g;
            } else {
                float v = d.momentum * slot0[i] - d.lr * g; /* v = momentum v - lr g */
                slot0[i] = v;
                w += d.nesterov ? d.momentum * v - d.lr * g : v;
            }
            break;
        case TFC_OPTIMIZER_ADAM:
        case TFC_OPTIMIZER_ADAMW: { /* AdamW: Adam's rule after grad_and_decay's decay */
            float m = slot0[i] + (g - slot0[i]) * (1.0f - d.beta_1);
            float v = slot1[i] + (g * g - slot1[i]) * (1.0f - d.beta_2);
            slot0[i] = m;
            slot1[i] = v;
            if (d.amsgrad) {
                v = fmaxf(slot2[i], v);
                slot2[i] = v;
            }
            w -= m * d.alpha / (sqrtf(v) + d.epsilon);
            break;
        }
        case TFC_OPTIMIZER_RMSPROP: {
            float v = d.rho * slot0[i] + (1.0f - d.rho) * (g * g);
            slot0[i] = v;
            float den = v + d.epsilon;
            if (d.centered) {
                float a = d.rho * slot2[i] + (1.0f - d.rho) * g;
                slot2[i] = a;
                den = v - a * a + d.epsilon;
            }
            float inc = d.lr * g / sqrtf(den);
            if (d.momentum > 0.0f) {
                inc = d.momentum * slot1[i] + inc;
                slot1[i] = inc;
            }
            w -= inc;
            break;
        }
        case TFC_OPTIMIZER_ADAGRAD: {
            float acc = slot0[i] + g * g;
            slot0[i] = acc;
            w -= d.lr * g / sqrtf(acc + d.epsilon);
            break;
        }
        case TFC_OPTIMIZER_NADAM: {
            float m = slot0[i] + (g - slot0[i]) * (1.0f - d.beta_1);
            float v = slot1[i] + (g * g - slot1[i]) * (1.0f - d.beta_2);
            slot0[i] = m;
            slot1[i] = v;
            float mh = d.coef[0] * m / d.coef[1] + d.coef[2] * g / d.coef[3];
            w -= mh * d.lr / (sqrtf(v / d.coef[4]) + d.epsilon);
            break;
        }
        case TFC_OPTIMIZER_ADAMAX: {
            float m = slot0[i] + (g - slot0[i]) * (1.0f - d.beta_1);
            float u = fmaxf(d.beta_2 * slot1[i], fabsf(g));
            slot0[i] = m;
            slot1[i] = u;
            w -= d.lr * m / (d.coef[0] * (u + d.epsilon));
            break;
        }
        case TFC_OPTIMIZER_LION: {
            float c = slot0[i] * d.beta_1 + g * (1.0f - d.beta_1);
            w -= d.lr * (float)((c > 0.0f) - (c < 0.0f)); /* sign, 0 at 0 */
            slot0[i] = slot0[i] * d.beta_2 + g * (1.0f - d.beta_2);
            break;
        }
        case TFC_OPTIMIZER_ADADELTA: {
            float a = d.rho * slot0[i] + (1.0f - d.rho) * (g * g);
            slot0[i] = a;
            float delta = -(sqrtf(slot1[i] + d.epsilon) * g / sqrtf(a + d.epsilon));
            slot1[i] = d.rho * slot1[i] + (1.0f - d.rho) * (delta * delta);
            w += d.lr * delta;
            break;
        }
        case TFC_OPTIMIZER_FTRL: {
            const float p = -d.lr_power; /* 0.5: sqrtf, as the CPU */
            float acc = slot0[i], acc_new = acc + g * g;
            float pn = p == 0.5f ? sqrtf(acc_new) : powf(acc_new, p);
            float po = p == 0.5f ? sqrtf(acc) : powf(acc, p);
            float z = slot1[i] + ((g + d.l2_shrinkage * w) - (pn - po) / d.lr * w);
            float zc = fminf(fmaxf(z, -d.l1), d.l1);
            slot0[i] = acc_new;
            slot1[i] = z;
            w = (zc - z) / (pn / d.lr + d.coef[0]);
            break;
        }
        case TFC_OPTIMIZER_SCHEDULE_FREE_ADAMW: {
            /* z starts as w before the decay (Keras builds momentum as a copy of w) */
            float z = d.coef[3] != 0.0f ? params[i] : slot0[i];
            float v = slot1[i] + (g * g - slot1[i]) * (1.0f - d.beta_2);
            slot1[i] = v;
            float z_new = z - d.coef[0] * g / (sqrtf(v / d.coef[1]) + d.epsilon);
            slot0[i] = z_new;
            float x = (w - (1.0f - d.beta_1) * z) / d.beta_1;
            x = (1.0f - d.coef[2]) * x + d.coef[2] * z_new;
            w = (1.0f - d.beta_1) * z_new + d.beta_1 * x;
            break;
        }
        default: break;
        }
        params[i] = w;
    }
}

static void launch_optim(gpu_ctx *g, const tfc_optim_desc *d, const tfc_step_state *st,
                         int64_t n, float *params, const float *grads, float *slot0,
                         float *slot1, float *slot2)
{
    if (n <= 0) return;
    TFC_ASSERT(d->type >= 0 && d->type < TFC_OPTIMIZER_COUNT);
    optim_kernel<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>(*d, st, n, params, grads,
                                                                  slot0, slot1, slot2);
    TFC_LAUNCH_CHECK(g, optim_kernel);
}

void tfc_gpu_optimizer_update(tfc_backend *be, const tfc_optim_desc *d, int64_t n,
                              float *params, const float *grads, float *slot0, float *slot1,
                              float *slot2)
{
    launch_optim(gpu_of(be), d, NULL, n, params, grads, slot0, slot1, slot2);
}

/* ---- the trainer's step ops (TFC_BACKEND_STEP_OPS) ------------------------------------------ */

void tfc_gpu_grad_sumsq(tfc_backend *be, int64_t n, const float *x, tfc_step_state *st)
{
    tfc_gpu_sumsq_to(gpu_of(be), n, x, &st->sumsq);
}

/* One thread: skip = !finite(*loss) || !finite(sumsq); grad_scale =
 * tfc_step_grad_scale(sumsq, scale / S, clip), the host's function compiled for the device
 * (S float16's loss scale, 1 otherwise; the division in double, IEEE-rounded as the host's). */
static __global__ void step_scale_kernel(const float *loss, double scale, double clip,
                                         tfc_step_state *st)
{
    const double sumsq = st->sumsq;
    st->skip = !isfinite(*loss) || !isfinite(sumsq);
    st->grad_scale = tfc_step_grad_scale(sumsq, scale / (double)st->loss_scale, clip);
}

void tfc_gpu_step_scale(tfc_backend *be, const float *loss, double scale, double clip,
                        tfc_step_state *st)
{
    gpu_ctx *g = gpu_of(be);
    step_scale_kernel<<<1, 1, 0, g->stream>>>(loss, scale, clip, st);
    TFC_LAUNCH_CHECK(g, step_scale_kernel);
}

void tfc_gpu_optimizer_update_at(tfc_backend *be, const tfc_optim_desc *d,
                                 const tfc_step_state *st, int64_t n, float *params,
                                 const float *grads, float *slot0, float *slot1, float *slot2)
{
    launch_optim(gpu_of(be), d, st, n, params, grads, slot0, slot1, slot2);
}
