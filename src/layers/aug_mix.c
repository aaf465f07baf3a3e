/* keras.layers.AugMix (Hendrycks et al., 2020): in training, num_chains chains of up to
 * chain_depth operations each, mixed by Dirichlet weights and blended with the input by a
 * Beta weight, the same for the whole batch; at inference y = x (Keras's transform_images
 * with training false).
 *   y = clip(w x + (1 - w) sum_c m_c chain_c(x), value_range),
 *   chain_c = op[k_{c,D-1}] o ... o op[k_{c,0}],  D = chain_depth,
 *   k_{c,s} uniform in Keras's list plus "none" (the slot skipped), so a chain's length is
 *   random in [0, D]; m = G / sum G, G_c ~ Gamma(alpha); w ~ Beta(alpha, alpha).
 * Keras's list (its order, which the picks index): RandomShear, RandomTranslation,
 * RandomRotation, RandomPosterization, Solarization, AutoContrast, Equalization, and with
 * all_ops RandomBrightness, RandomColorDegeneration, RandomContrast, RandomSharpness. Each
 * operation is that tfc layer, built from factor as RandAugment builds it
 * (tfc_augment_policy_op), with its own draws per image from stream 1 + c D + s of this
 * layer (that of the layer at this place with `seed: 1 + c D + s`), so an operation picked
 * twice applies two transforms, as Keras's fresh seeds do. The picks come from this layer's
 * stream (pick c D + s), m and w from its stream 0 (core/rng_draw.h), all on the host.
 * Backward: dpre = dy where the clip passes it, dx += w dpre, and each chain's operations'
 * backwards chained from ((1 - w) m_c) dpre, their inputs recomputed from x (RandomPoster-
 * ization and Equalization pass none, as theirs). Gradients accumulate into dx. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/rng.h"
#include "core/rng_draw.h"
#include "layers/augment.h"
#include "layers/layer.h"

#define AM_NOPS 11
#define AM_NOPS_BASIC 7

/* Keras's AUGMENT_LAYERS_ALL, in its order, as tfc_augment_policy_op's numbers */
static const int am_policy_op[AM_NOPS] = {0, 1, 2, 7, 8, 9, 10, 3, 4, 5, 6};

typedef struct am_args {
    tfc_float_list value_range, factor;
    int num_chains, chain_depth, all_ops, interpolation, seed, data_format;
    double alpha;
} am_args;

static const char *const interpolation_names[] = {"nearest", "bilinear", NULL};

static const tfc_field am_fields[] = {
    {"value_range", TFC_F_FLOAT_LIST, offsetof(am_args, value_range), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "[low, high] of the input's values (none: [0, 255], Keras's default)"},
    {"num_chains", TFC_F_INT, offsetof(am_args, num_chains), "3", 0, TFC_AUG_MIX_MAX, NULL,
     "chains mixed, each with its Dirichlet weight"},
    {"chain_depth", TFC_F_INT, offsetof(am_args, chain_depth), "3", 0, TFC_AUG_MIX_MAX, NULL,
     "operation slots of a chain, each picked per batch or skipped"},
    {"factor", TFC_F_FLOAT_LIST, offsetof(am_args, factor), "0.3", TFC_UNBOUNDED, NULL,
     "the operations' strength in [0, 1]: a number f is [0, f], the range each one draws in"},
    {"alpha", TFC_F_FLOAT, offsetof(am_args, alpha), "1.0", TFC_UNBOUNDED, NULL,
     "> 0: the Dirichlet's (chain weights) and the Beta's (blend with the input) parameter"},
    {"all_ops", TFC_F_BOOL, offsetof(am_args, all_ops), "true", TFC_UNBOUNDED, NULL,
     "also the brightness, colour degeneration, contrast and sharpness"},
    {"interpolation", TFC_F_ENUM, offsetof(am_args, interpolation), "bilinear", TFC_UNBOUNDED,
     interpolation_names, "nearest or bilinear (the shear, translation and rotation)"},
    {"seed", TFC_F_INT, offsetof(am_args, seed), TFC_NO_DEFAULT, 0, 2147483647, NULL,
     "mixed into the run's seed for this layer's picks and draws (none or 0: the run's alone)"},
    TFC_DATA_FORMAT_FIELD(am_args, data_format),
    {NULL}};

/* The operations, built (their arguments theirs, allocated); draws fixed by a test. */
typedef struct am_state {
    tfc_layer op[AM_NOPS];
    int fixed;
    tfc_aug_mix_draws draws;
} am_state;

static void am_free(tfc_layer *l)
{
    am_state *st = l->state;
    if (!st) return;
    for (int j = 0; j < AM_NOPS; j++) free(st->op[j].args);
    free(st);
    l->state = NULL;
}

static int am_nops(const am_args *a)
{
    return a->all_ops ? AM_NOPS : AM_NOPS_BASIC;
}

/* The buffers, each an image per example: the chains' sum (the clip's gradient in backward),
 * the blend before the clip, a chain's output, two gradients, then the inputs of a chain's
 * operations after its first. */
enum { BUF_ACC, BUF_PRE, BUF_OUT, BUF_G0, BUF_G1, BUF_STAGE };

static tfc_status am_build(tfc_layer *l, tfc_error *err)
{
    am_args *a = l->args;
    double lo, hi;
    if (tfc_augment_policy_check(l, &a->factor, &a->value_range, a->all_ops, &lo, &hi,
                                 err))
        return TFC_ERR_CONFIG;
    if (!(a->alpha > 0))
        return tfc_layer_error(err, l, "alpha: must be positive (the Dirichlet's and the "
                               "Beta's parameter), got %g", a->alpha);
    am_free(l);
    am_state *st = calloc(1, sizeof *st);
    if (!st) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    l->state = st;
    for (int k = 0; k < am_nops(a); k++)
        if (tfc_augment_policy_op(l, am_policy_op[k], lo, hi, &a->value_range,
                                  a->interpolation, &st->op[k], err))
            return TFC_ERR_CONFIG;
    l->saved_floats = (int64_t)(BUF_STAGE + (a->chain_depth > 1 ? a->chain_depth - 1 : 0)) *
                      tfc_shape_numel(&l->out_shape);
    return TFC_OK;
}

void tfc_aug_mix_draw(const tfc_layer *l, uint64_t step, tfc_aug_mix_draws *d)
{
    const am_args *a = l->args;
    const uint64_t key = tfc_augment_key(l, a->seed);
    const int n = am_nops(a), depth = a->chain_depth;
    memset(d, 0, sizeof *d);
    for (int c = 0; c < a->num_chains; c++)
        for (int s = 0; s < depth; s++) {
            const int k = (int)tfc_rng_below(key, step, (uint64_t)(c * depth + s),
                                             (uint64_t)n + 1);
            d->pick[c][s] = k == n ? -1 : k;
        }
    /* the Dirichlet's weights from the Gammas' logs (no underflow for a small alpha) */
    tfc_draw_stream ws = {tfc_rng_key(key, 0), step, 0};
    double lg[TFC_AUG_MIX_MAX], top = -HUGE_VAL, sum = 0;
    for (int c = 0; c < a->num_chains; c++) {
        lg[c] = tfc_draw_log_gamma(&ws, a->alpha);
        top = fmax(top, lg[c]);
    }
    for (int c = 0; c < a->num_chains; c++) sum += exp(lg[c] - top);
    for (int c = 0; c < a->num_chains; c++) d->chain_weight[c] = (float)(exp(lg[c] - top) / sum);
    d->weight = (float)tfc_draw_beta(&ws, a->alpha);
}

void tfc_aug_mix_fix_draws(const tfc_layer *l, const tfc_aug_mix_draws *d)
{
    am_state *st = l->state;
    st->fixed = d != NULL;
    if (d) st->draws = *d;
}

static void draws_at(const tfc_layer *l, uint64_t step, tfc_aug_mix_draws *d)
{
    const am_state *st = l->state;
    if (st->fixed) *d = st->draws;
    else tfc_aug_mix_draw(l, step, d);
}

/* Chain c's operations, in order, each with its slot's stream; returns how many. */
static int chain_ops(tfc_layer *l, const tfc_aug_mix_draws *d, int c, tfc_layer **op,
                     uint64_t *keys)
{
    const am_args *a = l->args;
    int n = 0;
    for (int s = 0; s < a->chain_depth; s++) {
        if (d->pick[c][s] < 0) continue;
        keys[n] = tfc_rng_key(tfc_augment_key(l, a->seed),
                              1 + (uint64_t)c * (uint64_t)a->chain_depth + (uint64_t)s);
        op[n++] = &((am_state *)l->state)->op[d->pick[c][s]];
    }
    return n;
}

static float *am_buf(const tfc_layer *l, int k)
{
    return l->saved + (int64_t)k * l->max_batch * tfc_shape_numel(&l->out_shape);
}

/* Runs chain c's n operations on x: the input of operation t > 0 in stage buffer t - 1, the
 * output in BUF_OUT; returns the chain's output (x itself when n is 0). */
static const float *chain_forward(tfc_layer *l, tfc_exec *ex, tfc_layer *const *op,
                                  const uint64_t *keys, int n, const float *x)
{
    const void *in = x;
    for (int t = 0; t < n; t++) {
        float *out = am_buf(l, t == n - 1 ? BUF_OUT : BUF_STAGE + t);
        op[t]->rng_key = keys[t];
        op[t]->max_batch = l->max_batch;
        op[t]->ops->forward(op[t], ex, &in, out);
        in = out;
    }
    return in;
}

/* The clip to value_range: RandomBrightness's op with a zero delta. */
static tfc_contrast_desc clip_desc(const tfc_layer *l, const tfc_exec *ex)
{
    const am_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    return (tfc_contrast_desc){.n = ex->batch, .hw = (int)(in->dim[0] * in->dim[1]),
                               .c = (int)in->dim[2], .lo = 0, .hi = 0,
                               .vlo = (float)a->value_range.v[0],
                               .vhi = (float)a->value_range.v[1], .step = ex->step};
}

/* acc = sum_c m_c chain_c(x) (in Keras's order, from zero), pre = w x + (1 - w) acc,
 * y = clip(pre) */
static void am_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const am_args *a = l->args;
    const tfc_backend_ops *B = ex->be->ops;
    const int64_t n = ex->batch * tfc_layer_out_numel(l);
    if (!ex->training) {
        B->copy(ex->be, y, x[0], (size_t)n * 4);
        return;
    }
    tfc_aug_mix_draws d;
    draws_at(l, ex->step, &d);
    float *acc = am_buf(l, BUF_ACC), *pre = am_buf(l, BUF_PRE);
    B->zero(ex->be, acc, (size_t)n * 4);
    for (int c = 0; c < a->num_chains; c++) {
        tfc_layer *op[TFC_AUG_MIX_MAX];
        uint64_t keys[TFC_AUG_MIX_MAX];
        const int k = chain_ops(l, &d, c, op, keys);
        B->axpy(ex->be, n, d.chain_weight[c], chain_forward(l, ex, op, keys, k, x[0]), acc);
    }
    B->copy(ex->be, pre, x[0], (size_t)n * 4);
    B->scale(ex->be, n, d.weight, pre);
    B->axpy(ex->be, n, 1.0f - d.weight, acc, pre);
    const tfc_contrast_desc cd = clip_desc(l, ex);
    B->brightness_forward(ex->be, &cd, pre, y);
}

/* dpre = dy where the clip passes it (in BUF_ACC); dx += w dpre; each chain's operations
 * backward from ((1 - w) m_c) dpre, through their inputs recomputed */
static void am_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                        const float *dy, float *const *dx)
{
    const am_args *a = l->args;
    const tfc_backend_ops *B = ex->be->ops;
    (void)y;
    if (!dx[0]) return;
    const int64_t n = ex->batch * tfc_layer_out_numel(l);
    if (!ex->training) {
        B->axpy(ex->be, n, 1.f, dy, dx[0]);
        return;
    }
    tfc_aug_mix_draws d;
    draws_at(l, ex->step, &d);
    float *dpre = am_buf(l, BUF_ACC);
    B->zero(ex->be, dpre, (size_t)n * 4);
    const tfc_contrast_desc cd = clip_desc(l, ex);
    B->brightness_backward(ex->be, &cd, am_buf(l, BUF_PRE), dy, dpre);
    B->axpy(ex->be, n, d.weight, dpre, dx[0]);
    const float rest = 1.0f - d.weight;
    for (int c = 0; c < a->num_chains; c++) {
        tfc_layer *op[TFC_AUG_MIX_MAX];
        uint64_t keys[TFC_AUG_MIX_MAX];
        const int k = chain_ops(l, &d, c, op, keys);
        const float mc = rest * d.chain_weight[c];
        if (k == 0) {
            B->axpy(ex->be, n, mc, dpre, dx[0]);
            continue;
        }
        chain_forward(l, ex, op, keys, k, x[0]);
        float *g = am_buf(l, BUF_G0);
        B->copy(ex->be, g, dpre, (size_t)n * 4);
        B->scale(ex->be, n, mc, g);
        for (int t = k - 1; t >= 0; t--) {
            float *out = dx[0];
            if (t > 0) { /* operation t's input gradient, in the buffer g does not use */
                out = am_buf(l, g == am_buf(l, BUF_G0) ? BUF_G1 : BUF_G0);
                B->zero(ex->be, out, (size_t)n * 4);
            }
            const void *in = t == 0 ? x[0] : (const void *)am_buf(l, BUF_STAGE + t - 1);
            const float *o = am_buf(l, t == k - 1 ? BUF_OUT : BUF_STAGE + t);
            float *const dd[1] = {out};
            op[t]->rng_key = keys[t];
            op[t]->max_batch = l->max_batch;
            op[t]->ops->backward(op[t], ex, &in, o, g, dd);
            g = out;
        }
    }
}

const tfc_layer_ops tfc_aug_mix_ops = {
    .type = "AugMix", .schema = am_fields, .args_size = sizeof(am_args),
    .min_inputs = 1, .max_inputs = 1, .copies_at_inference = 1, .cpu_first = 1,
    .host_choices = 1, .build = am_build, .forward = am_forward, .backward = am_backward,
    .needs = tfc_augment_policy_needs, .free_state = am_free,
};
