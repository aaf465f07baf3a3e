/* GroupNormalization (keras.layers.GroupNormalization), as Keras 3: the C channels of the
 * axis `axis` names split into `groups` contiguous groups of C / groups (groups -1: one per
 * channel, instance normalisation), and each example's group normalised over its values at
 * every position of the other axes:
 *   y = (x - mean) / sqrt(var + eps) gamma[c] + beta[c]          (eps 1e-3)
 * with mean and the biased var over the group; gamma, beta per channel, shape (C,). The same
 * in training and at inference (no moving statistics). Backward (the backend's
 * groupnorm_backward, core/backend.h): dx from the group's statistics, dgamma += sum dy u,
 * dbeta += sum dy. */
#include <stdlib.h>

#include "layers/layer.h"

typedef struct gn_args {
    int groups, axis;
    double epsilon;
    int center, scale;
    const tfc_node *beta_initializer, *gamma_initializer;
} gn_args;

static const tfc_field gn_fields[] = {
    {"groups", TFC_F_INT, offsetof(gn_args, groups), "32", -1, 1 << 24, NULL,
     "groups of channels, a divisor of the channel count; -1: one per channel"},
    {"axis", TFC_F_INT, offsetof(gn_args, axis), "-1", -TFC_MAX_DIMS, TFC_MAX_DIMS, NULL,
     "the channel axis (Keras counts the batch axis as 0)"},
    {"epsilon", TFC_F_FLOAT, offsetof(gn_args, epsilon), "0.001", 0, 1, NULL,
     "added to the variance"},
    {"center", TFC_F_BOOL, offsetof(gn_args, center), "true", TFC_UNBOUNDED, NULL,
     "add the offset beta (false: no beta variable)"},
    {"scale", TFC_F_BOOL, offsetof(gn_args, scale), "true", TFC_UNBOUNDED, NULL,
     "multiply by gamma (false: no gamma variable)"},
    {"beta_initializer", TFC_F_NODE, offsetof(gn_args, beta_initializer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "default zeros"},
    {"gamma_initializer", TFC_F_NODE, offsetof(gn_args, gamma_initializer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "default ones"},
    TFC_REGULARIZER_FIELD("beta_regularizer"), TFC_REGULARIZER_FIELD("gamma_regularizer"),
    TFC_CONSTRAINT_FIELD("beta_constraint"), TFC_CONSTRAINT_FIELD("gamma_constraint"),
    {NULL}};

/* The built layer: the per-example shape as the op sees it, its parameters' indices
 * (-1: none). */
typedef struct gn_state {
    int64_t outer, inner;
    int groups, cg;
    int gamma, beta;
} gn_state;

static tfc_status gn_build(tfc_layer *l, tfc_error *err)
{
    const gn_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    const int n = in->ndim;
    if (n < 1) return tfc_layer_error(err, l, "needs an input with a channel axis");
    if (a->groups == 0)
        return tfc_layer_error(err, l, "groups 0: give a positive number of groups, or -1 "
                               "for one group per channel");
    const int ax = a->axis < 0 ? a->axis + n + 1 : a->axis;
    if (ax < 0 || ax > n)
        return tfc_layer_error(err, l, "axis %d is out of range for an input of %d axes (with "
                               "the batch axis)", a->axis, n + 1);
    if (ax == 0)
        return tfc_layer_error(err, l, "axis %d is the batch axis: give the channel axis",
                               a->axis);
    const int64_t c = in->dim[ax - 1];
    const int64_t groups = a->groups == -1 ? c : a->groups;
    if (groups > c)
        return tfc_layer_error(err, l, "groups %lld is more than the %lld channels of axis %d",
                               (long long)groups, (long long)c, a->axis);
    if (c % groups)
        return tfc_layer_error(err, l, "groups %lld does not divide the %lld channels of axis "
                               "%d", (long long)groups, (long long)c, a->axis);
    if (c > (1 << 24)) return tfc_layer_error(err, l, "too many channels (%lld)", (long long)c);
    gn_state *s = calloc(1, sizeof *s);
    if (!s) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    l->state = s;
    s->outer = s->inner = 1;
    for (int i = 0; i < ax - 1; i++) s->outer *= in->dim[i];
    for (int i = ax; i < n; i++) s->inner *= in->dim[i];
    s->groups = (int)groups;
    s->cg = (int)(c / groups);
    s->gamma = s->beta = -1;
    l->out_shape = *in;
    tfc_init gi, bi;
    if (tfc_layer_init_arg(l, a->gamma_initializer, "gamma_initializer", TFC_INIT_ONES, &gi,
                           err) ||
        tfc_layer_init_arg(l, a->beta_initializer, "beta_initializer", TFC_INIT_ZEROS, &bi, err))
        return TFC_ERR_CONFIG;
    if (a->scale) {
        s->gamma = l->nparams;
        tfc_layer_add_param(l, "gamma", 1, &c, 1, gi);
    }
    if (a->center) {
        s->beta = l->nparams;
        tfc_layer_add_param(l, "beta", 1, &c, 1, bi);
    }
    l->saved_floats = 2 * groups; /* mu and invstd per group */
    return TFC_OK;
}

static tfc_groupnorm_desc gn_desc(const tfc_layer *l, int batch)
{
    const gn_state *s = l->state;
    const gn_args *a = l->args;
    return (tfc_groupnorm_desc){.n = batch, .outer = s->outer, .inner = s->inner,
                                .groups = s->groups, .cg = s->cg, .eps = (float)a->epsilon};
}

static const char *const *gn_needs(const tfc_layer *l)
{
    (void)l;
    static const char *const needs[] = {"groupnorm_forward", "groupnorm_workspace",
                                        "groupnorm_backward", NULL};
    return needs;
}

static void gn_plan(tfc_layer *l, tfc_backend *be)
{
    tfc_groupnorm_desc d = gn_desc(l, l->max_batch);
    l->workspace = be->ops->groupnorm_workspace ? be->ops->groupnorm_workspace(be, &d) : 0;
}

static float *param_data(tfc_layer *l, int i) { return i >= 0 ? l->params[i].data : NULL; }
static float *param_grad(tfc_layer *l, int i) { return i >= 0 ? l->params[i].grad : NULL; }

static void gn_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const gn_state *s = l->state;
    tfc_groupnorm_desc d = gn_desc(l, ex->batch);
    ex->be->ops->groupnorm_forward(ex->be, &d, x[0], param_data(l, s->gamma),
                                   param_data(l, s->beta), y, ex->training ? l->saved : NULL);
}

/* Backward follows a training forward, whose statistics are in l->saved. dx is written
 * where its block starts here (ex->fresh). */
static void gn_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                        const float *dy, float *const *dx)
{
    (void)y;
    const gn_state *s = l->state;
    tfc_groupnorm_desc d = gn_desc(l, ex->batch);
    ex->be->ops->groupnorm_backward(ex->be, &d, x[0], dy, param_data(l, s->gamma), l->saved,
                                    dx[0], param_grad(l, s->gamma), param_grad(l, s->beta),
                                    ex->fresh & 1, ex->ws);
}

static void gn_free(tfc_layer *l) { free(l->state); }

/* Keras's layer supports masking: the mask passes on, and padded steps count in the
 * statistics as in Keras. */
const tfc_layer_ops tfc_group_normalization_ops = {
    .type = "GroupNormalization", .schema = gn_fields, .args_size = sizeof(gn_args),
    .min_inputs = 1, .max_inputs = 1, .keeps_mask = 1, .assigns_grads = 1, .cpu_first = 1,
    .needs = gn_needs, .build = gn_build, .plan = gn_plan, .forward = gn_forward,
    .backward = gn_backward, .free_state = gn_free,
};
