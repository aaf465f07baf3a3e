/* The trainer's step ops on the CPU (TFC_BACKEND_STEP_OPS): the gradient's sum of squares,
 * the clipping factor and the skip flag written to a tfc_step_state, and the optimizer
 * update reading them from there. Each is today's host-path computation with its result
 * stored instead of returned, so the two paths of the trainer give the same bits. */
#include <math.h>
#include <string.h>

#include "cpu/cpu_internal.h"

void tfc_cpu_grad_sumsq(tfc_backend *be, int64_t n, const float *x, tfc_step_state *st)
{
    st->sumsq = tfc_cpu_sumsq(be, n, x);
}

/* skip = !finite(loss) || !finite(sumsq); grad_scale = tfc_step_grad_scale(sumsq,
 * scale / S, clip), S float16's loss scale (1 otherwise) */
void tfc_cpu_step_scale(tfc_backend *be, const float *loss, double scale, double clip,
                        tfc_step_state *st)
{
    (void)be;
    st->skip = !isfinite(*loss) || !isfinite(st->sumsq);
    st->grad_scale = tfc_step_grad_scale(st->sumsq, scale / (double)st->loss_scale, clip);
}

/* x *= S: the host path's `scale` by S, the same bits */
void tfc_cpu_loss_scale_at(tfc_backend *be, int64_t n, const tfc_step_state *st, float *x)
{
    tfc_cpu_scale(be, n, st->loss_scale, x);
}

void tfc_cpu_optimizer_update_at(tfc_backend *be, const tfc_optim_desc *d,
                                 const tfc_step_state *st, int64_t n, float *params,
                                 const float *grads, float *slot0, float *slot1, float *slot2)
{
    if (st->skip) return;
    tfc_optim_desc at = *d;
    at.grad_scale = st->grad_scale;
    if (d->rates_at_state) {
        at.lr = st->lr, at.alpha = st->alpha, at.decay = st->decay;
        memcpy(at.coef, st->coef, sizeof at.coef);
    }
    tfc_cpu_optimizer_update(be, &at, n, params, grads, slot0, slot1, slot2);
}
