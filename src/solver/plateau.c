/* The `plateau` lr_policy: Keras's ReduceLROnPlateau.on_epoch_end stepped at each test
 * evaluation (factor, patience, min_delta, cooldown, min_lr; Keras's absolute threshold, or
 * PyTorch's relative one with threshold_mode: rel). The rate it holds is the policy's base
 * rate; warm-up multiplies it as for every policy (lr_policy.c). */
#include "solver/monitor.h"

const char *const tfc_threshold_mode_names[] = {"rel", "abs", NULL};

/* abs (Keras): value -/+ min_delta beats best; rel (PyTorch): value beats best * (1 -/+ d). */
static int improves(const tfc_plateau *p, const tfc_plateau_state *st, double value)
{
    if (!st->have_best) return 1;
    double d = p->min_delta < 0 ? -p->min_delta : p->min_delta;
    if (p->threshold_mode == TFC_THRESHOLD_REL)
        return p->monitor.higher ? value > st->best * (1 + d) : value < st->best * (1 - d);
    return p->monitor.higher ? value - d > st->best : value + d < st->best;
}

int tfc_plateau_step(const tfc_plateau *p, tfc_plateau_state *st, double value)
{
    if (st->cooldown_counter > 0) {
        st->cooldown_counter--;
        st->wait = 0;
    }
    if (improves(p, st, value)) {
        st->have_best = 1;
        st->best = value;
        st->wait = 0;
        return 0;
    }
    /* Keras tests in_cooldown() again, after the decrement above. */
    if (st->cooldown_counter > 0) return 0;
    if (++st->wait < p->patience) return 0;
    /* Keras compares its float32 rate with float32(min_lr); a rate at the floor stays (and
     * wait keeps counting, as there). In double, a rate set to min_lr would still exceed
     * float32(min_lr) and be "reduced" to itself at every patience. */
    if (!((float)st->lr > (float)p->min_lr)) return 0;
    double lr = st->lr * p->factor;
    st->lr = lr > p->min_lr ? lr : p->min_lr;
    st->cooldown_counter = p->cooldown;
    st->wait = 0;
    return 1;
}
