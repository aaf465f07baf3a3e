/* UnitNormalization (keras.layers.UnitNormalization(axis=-1)): each example L2-normalised
 * over the axes `axis` names (an integer or a list; Keras counts the batch axis as 0), as
 * Keras 3's ops.normalize(order=2, epsilon=1e-12) computes it:
 *   y = x min(rsqrt(sum x^2), 1 / eps)                        eps = 1e-12
 * (not x / max(norm, eps): the same away from the clamp, but Keras takes the rsqrt form for
 * order 2). Backward, where rsqrt won the min: dx += r (dy - x r^2 sum(dy x)), r the scale;
 * where the clamp holds (sum x^2 <= 1e-24, an all-zero slice): dx += 1e12 dy, as JAX's
 * gradient of the min (at an exact tie JAX splits it in halves; here the clamp side wins).
 * A new op pair (l2norm_*): the row normalisation (layernorm_* without centring) takes a
 * mean and adds eps, x / sqrt(mean x^2 + eps), which is neither the sum nor the clamp, and
 * composing the sum, rsqrt, min and product from elementwise ops would take four passes and
 * a buffer per step. The axes must be consecutive (a middle block is fine: [outer, red,
 * inner]); the mask passes on (Keras's layer supports masking), padded steps normalised. */
#include <stdlib.h>

#include "layers/layer.h"

#define UNIT_NORM_INV_EPS 1e12f /* 1 / Keras's epsilon 1e-12 */

typedef struct unit_args {
    tfc_int_list axis;
} unit_args;

static const tfc_field unit_fields[] = {
    {"axis", TFC_F_INT_LIST, offsetof(unit_args, axis), "-1", -TFC_MAX_DIMS, TFC_MAX_DIMS,
     NULL, "the axis or consecutive axes to normalise over (Keras counts the batch axis as 0)"},
    {NULL}};

typedef struct unit_state {
    int64_t outer, red, inner; /* per example */
} unit_state;

static tfc_status unit_build(tfc_layer *l, tfc_error *err)
{
    const unit_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    const int n = in->ndim;
    int lo = n + 1, hi = -1, used[TFC_MAX_DIMS + 1] = {0};
    if (l->in_dtype[0] != TFC_F32)
        return tfc_layer_error(err, l, "takes float32 input, not token ids");
    if (a->axis.n < 1) return tfc_layer_error(err, l, "axis: give at least one axis");
    for (int i = 0; i < a->axis.n; i++) {
        const int ax = a->axis.v[i] < 0 ? a->axis.v[i] + n + 1 : a->axis.v[i];
        if (ax < 0 || ax > n)
            return tfc_layer_error(err, l, "axis %d is out of range for an input of %d axes "
                                   "(with the batch axis)", a->axis.v[i], n + 1);
        if (ax == 0)
            return tfc_layer_error(err, l, "axis %d is the batch axis: examples are "
                                   "normalised one by one", a->axis.v[i]);
        if (used[ax]++) return tfc_layer_error(err, l, "axis %d is listed twice", a->axis.v[i]);
        lo = ax < lo ? ax : lo, hi = ax > hi ? ax : hi;
    }
    if (hi - lo + 1 != a->axis.n)
        return tfc_layer_error(err, l, "axis: the axes must be consecutive (found %d axes "
                               "between axis %d and %d)", a->axis.n, lo, hi);
    unit_state *s = calloc(1, sizeof *s);
    if (!s) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    l->state = s;
    s->outer = s->red = s->inner = 1;
    for (int i = 0; i < n; i++) {
        const int ax = i + 1;
        int64_t *into = ax < lo ? &s->outer : ax > hi ? &s->inner : &s->red;
        *into *= in->dim[i];
    }
    l->out_shape = *in;
    return TFC_OK;
}

static tfc_l2norm_desc unit_desc(const tfc_layer *l, int batch)
{
    const unit_state *s = l->state;
    return (tfc_l2norm_desc){.outer = batch * s->outer, .red = s->red, .inner = s->inner,
                             .inv_max = UNIT_NORM_INV_EPS};
}

static const char *const *unit_needs(const tfc_layer *l)
{
    (void)l;
    static const char *const needs[] = {"l2norm_forward", "l2norm_backward", NULL};
    return needs;
}

static void unit_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    tfc_l2norm_desc d = unit_desc(l, ex->batch);
    ex->be->ops->l2norm_forward(ex->be, &d, x[0], y);
}

/* From x alone (the op recomputes the scale); dx written where its block starts here. */
static void unit_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                          const float *dy, float *const *dx)
{
    (void)y;
    if (!dx[0]) return;
    tfc_l2norm_desc d = unit_desc(l, ex->batch);
    ex->be->ops->l2norm_backward(ex->be, &d, x[0], dy, dx[0], ex->fresh & 1);
}

static void unit_free(tfc_layer *l) { free(l->state); }

const tfc_layer_ops tfc_unit_normalization_ops = {
    .type = "UnitNormalization", .schema = unit_fields, .args_size = sizeof(unit_args),
    .min_inputs = 1, .max_inputs = 1, .keeps_mask = 1, .assigns_grads = 1,
    .needs = unit_needs, .build = unit_build, .forward = unit_forward,
    .backward = unit_backward, .free_state = unit_free,
};
