/* LayerNormalization and RMSNormalization (keras.layers): each example normalised on its own
 * over the trailing axes `axis` names (flattened to rows of `cols` values), as Keras 3:
 *   LayerNormalization  y = (x - mean) / sqrt(var + eps) gamma + beta      (eps 1e-3)
 *                       rms_scaling (deprecated in Keras): y = x / sqrt(var + eps) gamma
 *   RMSNormalization    y = x / sqrt(mean(x^2) + eps) scale                (eps 1e-6)
 * with mean and the biased var over the row; gamma, beta, scale span the normalised axes.
 * Backward (the backend's layernorm_backward, core/backend.h): dx from the row's statistics,
 * dgamma += sum dy u, dbeta += sum dy over every row. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"

typedef struct norm_args {
    tfc_int_list axis;
    double epsilon;
    int center, scale, rms_scaling;
    const tfc_node *beta_initializer, *gamma_initializer;
} norm_args;

#define AXIS_FIELD                                                                           \
    {"axis", TFC_F_INT_LIST, offsetof(norm_args, axis), "-1", -TFC_MAX_DIMS, TFC_MAX_DIMS,   \
     NULL, "the axis or trailing axes to normalise over (Keras counts the batch axis as 0)"}

static const tfc_field ln_fields[] = {
    AXIS_FIELD,
    {"epsilon", TFC_F_FLOAT, offsetof(norm_args, epsilon), "0.001", 0, 1, NULL,
     "added to the variance"},
    {"center", TFC_F_BOOL, offsetof(norm_args, center), "true", TFC_UNBOUNDED, NULL,
     "add the offset beta"},
    {"scale", TFC_F_BOOL, offsetof(norm_args, scale), "true", TFC_UNBOUNDED, NULL,
     "multiply by gamma"},
    {"rms_scaling", TFC_F_BOOL, offsetof(norm_args, rms_scaling), "false", TFC_UNBOUNDED, NULL,
     "deprecated in Keras: x / sqrt(var + eps) gamma, no centring, no beta"},
    {"beta_initializer", TFC_F_NODE, offsetof(norm_args, beta_initializer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "default zeros"},
    {"gamma_initializer", TFC_F_NODE, offsetof(norm_args, gamma_initializer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "default ones"},
    TFC_REGULARIZER_FIELD("beta_regularizer"), TFC_REGULARIZER_FIELD("gamma_regularizer"),
    TFC_CONSTRAINT_FIELD("beta_constraint"), TFC_CONSTRAINT_FIELD("gamma_constraint"),
    {NULL}};

static const tfc_field rms_fields[] = {
    AXIS_FIELD,
    {"epsilon", TFC_F_FLOAT, offsetof(norm_args, epsilon), "1e-6", 0, 1, NULL,
     "added to the mean square"},
    {NULL}};

/* The built layer: the rows' width, its parameters' indices (-1: none), the flavour. */
typedef struct norm_state {
    int cols, gamma, beta;
    int center_stats, center;
} norm_state;

/* Resolves `axis` against the per-example input: Keras counts the batch axis as 0 and takes
 * the axes sorted; tfc normalises trailing axes only (the last k of the input's). Sets
 * *first to the first normalised axis of in_shape. */
static tfc_status resolve_axes(tfc_layer *l, const tfc_int_list *axis, int *first,
                               tfc_error *err)
{
    const int n = l->in_shape[0].ndim;
    int ax[TFC_LIST_MAX], k = axis->n;
    if (n < 1) return tfc_layer_error(err, l, "needs an input with a feature axis");
    if (k < 1) return tfc_layer_error(err, l, "axis: give at least one axis");
    for (int i = 0; i < k; i++) {
        int a = axis->v[i] < 0 ? axis->v[i] + n + 1 : axis->v[i];
        if (a < 0 || a > n)
            return tfc_layer_error(err, l, "axis %d is out of range for an input of %d axes "
                                   "(with the batch axis)", axis->v[i], n + 1);
        if (a == 0)
            return tfc_layer_error(err, l, "axis %d is the batch axis: examples are "
                                   "normalised one by one", axis->v[i]);
        ax[i] = a;
    }
    for (int i = 1; i < k; i++) /* Keras sorts the values as given */
        for (int j = i; j > 0 && axis->v[j] < axis->v[j - 1]; j--) {
            int t = ax[j];
            ax[j] = ax[j - 1], ax[j - 1] = t;
        }
    for (int i = 0; i < k; i++)
        if (ax[i] != n - k + 1 + i)
            return tfc_layer_error(err, l, "axis: only trailing axes are supported, listed "
                                   "all negative or all positive (here %d..%d or %d..-1)",
                                   n - k + 1, n, -k);
    *first = n - k;
    return TFC_OK;
}

/* The shared build: out = in; the weights' shape (the normalised axes) into *ws. */
static tfc_status norm_build_common(tfc_layer *l, const norm_args *a, tfc_shape *ws,
                                    tfc_error *err)
{
    int first = 0;
    if (resolve_axes(l, &a->axis, &first, err)) return TFC_ERR_CONFIG;
    norm_state *s = calloc(1, sizeof *s);
    if (!s) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    l->state = s;
    const tfc_shape *in = &l->in_shape[0];
    l->out_shape = *in;
    ws->ndim = in->ndim - first;
    int64_t cols = 1;
    for (int i = first; i < in->ndim; i++) ws->dim[i - first] = in->dim[i], cols *= in->dim[i];
    if (cols > (1 << 30)) return tfc_layer_error(err, l, "normalised axes are too large");
    s->cols = (int)cols;
    s->gamma = s->beta = -1;
    l->saved_floats = 2 * (tfc_shape_numel(in) / cols); /* mu and invstd per row */
    return TFC_OK;
}

static tfc_status ln_build(tfc_layer *l, tfc_error *err)
{
    const norm_args *a = l->args;
    tfc_shape ws;
    if (norm_build_common(l, a, &ws, err)) return TFC_ERR_CONFIG;
    norm_state *s = l->state;
    tfc_init gi, bi;
    if (tfc_layer_init_arg(l, a->gamma_initializer, "gamma_initializer", TFC_INIT_ONES, &gi,
                           err) ||
        tfc_layer_init_arg(l, a->beta_initializer, "beta_initializer", TFC_INIT_ZEROS, &bi, err))
        return TFC_ERR_CONFIG;
    /* Keras: gamma with scale or rms_scaling, beta with center unless rms_scaling */
    if (a->scale || a->rms_scaling) {
        s->gamma = l->nparams;
        tfc_layer_add_param(l, "gamma", ws.ndim, ws.dim, 1, gi);
    }
    if (a->center && !a->rms_scaling) {
        s->beta = l->nparams;
        tfc_layer_add_param(l, "beta", ws.ndim, ws.dim, 1, bi);
    }
    s->center_stats = 1;
    s->center = !a->rms_scaling;
    return TFC_OK;
}

static tfc_status rms_build(tfc_layer *l, tfc_error *err)
{
    tfc_shape ws;
    if (norm_build_common(l, l->args, &ws, err)) return TFC_ERR_CONFIG;
    norm_state *s = l->state;
    s->gamma = l->nparams;
    tfc_layer_add_param(l, "scale", ws.ndim, ws.dim, 1, tfc_init_make(TFC_INIT_ONES));
    return TFC_OK;
}

static tfc_layernorm_desc norm_desc(const tfc_layer *l, int batch)
{
    const norm_state *s = l->state;
    const norm_args *a = l->args;
    return (tfc_layernorm_desc){.rows = (int64_t)batch * (tfc_layer_out_numel(l) / s->cols),
                                .cols = s->cols, .center_stats = s->center_stats,
                                .center = s->center, .eps = (float)a->epsilon};
}

static const char *const *norm_needs(const tfc_layer *l)
{
    (void)l;
    static const char *const needs[] = {"layernorm_forward", "layernorm_workspace",
                                        "layernorm_backward", NULL};
    return needs;
}

static void norm_plan(tfc_layer *l, tfc_backend *be)
{
    tfc_layernorm_desc d = norm_desc(l, l->max_batch);
    l->workspace = be->ops->layernorm_workspace ? be->ops->layernorm_workspace(be, &d) : 0;
}

static float *param_data(tfc_layer *l, int i) { return i >= 0 ? l->params[i].data : NULL; }
static float *param_grad(tfc_layer *l, int i) { return i >= 0 ? l->params[i].grad : NULL; }

static void norm_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const norm_state *s = l->state;
    tfc_layernorm_desc d = norm_desc(l, ex->batch);
    ex->be->ops->layernorm_forward(ex->be, &d, x[0], param_data(l, s->gamma),
                                   param_data(l, s->beta), y, ex->training ? l->saved : NULL);
}

/* Backward follows a training forward, whose statistics are in l->saved. dx is written
 * where its block starts here (ex->fresh). */
static void norm_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                          const float *dy, float *const *dx)
{
    (void)y;
    const norm_state *s = l->state;
    tfc_layernorm_desc d = norm_desc(l, ex->batch);
    ex->be->ops->layernorm_backward(ex->be, &d, x[0], dy, param_data(l, s->gamma), l->saved,
                                    dx[0], param_grad(l, s->gamma), param_grad(l, s->beta),
                                    ex->fresh & 1, ex->ws);
}

static void norm_free(tfc_layer *l) { free(l->state); }

const tfc_layer_ops tfc_layer_normalization_ops = {
    .type = "LayerNormalization", .schema = ln_fields, .args_size = sizeof(norm_args),
    .min_inputs = 1, .max_inputs = 1, .keeps_mask = 1, .assigns_grads = 1,
    .needs = norm_needs, .build = ln_build, .plan = norm_plan, .forward = norm_forward,
    .backward = norm_backward, .free_state = norm_free,
};

/* Keras 3's RMSNormalization does not support masking: a mask stops at it (Keras warns). */
const tfc_layer_ops tfc_rms_normalization_ops = {
    .type = "RMSNormalization", .schema = rms_fields, .args_size = sizeof(norm_args),
    .min_inputs = 1, .max_inputs = 1, .assigns_grads = 1,
    .needs = norm_needs, .build = rms_build, .plan = norm_plan, .forward = norm_forward,
    .backward = norm_backward, .free_state = norm_free,
};
