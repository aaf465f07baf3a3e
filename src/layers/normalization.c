/* Normalization (keras.layers.Normalization): a fixed standardisation of the input with a mean
 * and variance of the kept axes' shape (`axis`, Keras counting the batch axis as 0; default
 * the last; null: none kept, one mean and variance), broadcast over the others:
 *   y = (x - mean) / sqrt(variance + 1e-14)          invert: y = mean + x sqrt(variance + 1e-14)
 * Keras divides by max(sqrt(variance), 1e-7): the same at variance 0 and within float
 * rounding wherever sqrt(variance) is well above 1e-7 (the two differ by a factor up to
 * sqrt(2) only for standard deviations between 1e-7 and about 1e-4).
 *   backward: dx += dy / sqrt(variance + 1e-14)      invert: dx += dy sqrt(variance + 1e-14)
 * With `mean` and `variance` given (numbers or nested lists, broadcast to the kept shape by
 * NumPy's rules, aligned on the last axes) Keras's layer has no variables: here they are
 * constants (tfc_param.constant, filled by fill_param). Without them the layer has Keras's
 * non-trainable weights mean (zeros), variance (ones) and count (a scalar Keras keeps at 0;
 * float32 here, int64 in Keras's files, which load converted), set by the adapt pass
 * (solver/adapt.c) from its input over the training data: Chan's merge of each batch's
 * mean and sum of squared deviations, in double, the variance biased as Keras's.
 * The kept axes must be the last ones (a trailing block), so that every backend's
 * bn_forward_infer applies the statistics to rows of `cols` values, with constant ones and
 * zeros for its gamma and beta. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "layers/layer.h"

#define NORM_EPS 1e-14f /* added to the variance: sqrt(1e-14) is Keras's 1e-7 */

typedef struct norm_args {
    const tfc_node *axis, *mean, *variance;
    int invert;
} norm_args;

static const tfc_field norm_fields[] = {
    {"axis", TFC_F_NODE, offsetof(norm_args, axis), "-1", TFC_UNBOUNDED, NULL,
     "the kept axis or axes (Keras counts the batch axis as 0); null: none (scalars)"},
    {"mean", TFC_F_NODE, offsetof(norm_args, mean), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "a number or nested list, broadcast to the kept axes' shape (null: adapted)"},
    {"variance", TFC_F_NODE, offsetof(norm_args, variance), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "the same shape as mean"},
    {"invert", TFC_F_BOOL, offsetof(norm_args, invert), "false", TFC_UNBOUNDED, NULL,
     "y = mean + x sqrt(variance): undoes the normalisation"},
    {NULL}};

typedef struct norm_state {
    int64_t cols;       /* kept values: the statistics' count */
    int given;          /* mean and variance come from the arguments */
    float *gmean, *gvar; /* given: [cols] */
    int ones;           /* index of the constant ones; zeros follow it */
    double *mu, *m2;    /* adapting: [cols] running mean and sum of squared deviations */
    double *bm, *bq;    /* adapting: [cols] the same of one batch */
    int64_t seen;       /* values merged into each kept position */
} norm_state;

enum { MEAN, VAR };

static void norm_free_state(tfc_layer *l)
{
    norm_state *s = l->state;
    if (!s) return;
    free(s->gmean), free(s->gvar), free(s->mu), free(s->m2), free(s->bm), free(s->bq);
    free(s);
    l->state = NULL;
}

/* The shape of a number or rectangular nested list into dims (at most max axes). */
static int value_shape(const tfc_node *n, int64_t *dims, int max)
{
    int nd = 0;
    while (n->kind == TFC_NODE_SEQ) {
        if (nd == max || n->n == 0) return -1;
        dims[nd++] = n->n;
        n = n->vals[0];
    }
    return n->kind == TFC_NODE_SCALAR ? nd : -1;
}

/* The numbers of a nested list of shape dims[0..nd) in row-major order; 0 on success. */
static int value_read(const tfc_node *n, const int64_t *dims, int nd, double *out, int64_t *k)
{
    if (nd == 0) {
        if (n->kind != TFC_NODE_SCALAR || n->quoted) return -1;
        char *end;
        out[(*k)++] = strtod(n->str, &end);
        return *end || end == n->str ? -1 : 0;
    }
    if (n->kind != TFC_NODE_SEQ || n->n != dims[0]) return -1;
    for (int i = 0; i < n->n; i++)
        if (value_read(n->vals[i], dims + 1, nd - 1, out, k)) return -1;
    return 0;
}

/* A given mean or variance into [cols] floats: broadcast from its shape to the kept shape
 * `keep` (nk axes), aligned on the last axes, each of its axes 1 or the kept one's size. */
static tfc_status read_given(tfc_layer *l, const char *arg, const tfc_node *n,
                             const int64_t *keep, int nk, float **out, tfc_error *err)
{
    int64_t dims[TFC_MAX_DIMS + 1];
    int nd = value_shape(n, dims, TFC_MAX_DIMS);
    if (nd < 0)
        return tfc_layer_error(err, l, "%s: a number or a rectangular nested list of numbers",
                               arg);
    if (nd > nk)
        return tfc_layer_error(err, l, "%s: %d axes, more than the %d kept (axis)", arg, nd, nk);
    int64_t count = 1, cols = 1;
    for (int i = 0; i < nd; i++) count *= dims[i];
    for (int i = 0; i < nk; i++) cols *= keep[i];
    double *v = malloc((size_t)count * sizeof *v);
    *out = malloc((size_t)cols * sizeof **out);
    int64_t k = 0;
    if (!v || !*out) {
        free(v);
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    if (value_read(n, dims, nd, v, &k)) {
        free(v);
        return tfc_layer_error(err, l, "%s: a number or a rectangular nested list of numbers",
                               arg);
    }
    for (int i = 0; i < nd; i++)
        if (dims[i] != 1 && dims[i] != keep[nk - nd + i]) {
            free(v);
            return tfc_layer_error(err, l, "%s: axis of size %lld does not broadcast to the "
                                   "kept axis of size %lld", arg, (long long)dims[i],
                                   (long long)keep[nk - nd + i]);
        }
    for (int64_t c = 0; c < cols; c++) { /* c's index in v: its kept coordinates, broadcast */
        int64_t rem = c, src = 0, stride = 1;
        for (int i = nk - 1; i >= 0; i--) {
            int64_t coord = rem % keep[i];
            rem /= keep[i];
            int j = i - (nk - nd);
            if (j >= 0) {
                src += (dims[j] == 1 ? 0 : coord) * stride;
                stride *= dims[j];
            }
        }
        (*out)[c] = (float)v[src];
    }
    free(v);
    return TFC_OK;
}

/* The kept axes from `axis` (absent: the last; null: none) as the trailing axes of the
 * per-example input from *first on. */
static tfc_status resolve_axis(tfc_layer *l, int *first, tfc_error *err)
{
    const int n = l->in_shape[0].ndim;
    const tfc_node *a = l->args_node ? tfc_node_get(l->args_node, "axis") : NULL;
    if (a && tfc_node_is_null(a)) {
        *first = n;
        return TFC_OK;
    }
    int ax[TFC_MAX_DIMS + 1], k = 0;
    const int count = !a ? 1 : a->kind == TFC_NODE_SEQ ? a->n : 1;
    if (count < 1 || count > n)
        return tfc_layer_error(err, l, "axis: give at most %d axes of the input", n);
    for (int i = 0; i < count; i++) {
        const tfc_node *v = !a ? NULL : a->kind == TFC_NODE_SEQ ? a->vals[i] : a;
        long x = -1;
        char *end = NULL;
        if (v) {
            if (v->kind != TFC_NODE_SCALAR || v->quoted) end = NULL;
            else x = strtol(v->str, &end, 10);
            if (!end || *end || end == v->str)
                return tfc_layer_error(err, l, "axis: an integer, a list of integers or null");
        }
        int p = x < 0 ? (int)x + n + 1 : (int)x;
        if (p < 0 || p > n)
            return tfc_layer_error(err, l, "axis %ld is out of range for an input of %d axes "
                                   "(with the batch axis)", x, n + 1);
        if (p == 0)
            return tfc_layer_error(err, l, "axis %ld is the batch axis: statistics per "
                                   "position in the batch are not supported", x);
        for (int j = 0; j < k; j++)
            if (ax[j] == p) return tfc_layer_error(err, l, "axis %ld is listed twice", x);
        ax[k++] = p;
    }
    int lo = n + 1;
    for (int i = 0; i < k; i++) lo = ax[i] < lo ? ax[i] : lo;
    if (lo + k - 1 != n)
        return tfc_layer_error(err, l, "axis: only the last axes (a trailing block) can be "
                               "kept; found %d axes from axis %d on", k, lo);
    *first = lo - 1;
    return TFC_OK;
}

static tfc_status norm_build(tfc_layer *l, tfc_error *err)
{
    const norm_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    if (l->in_dtype[0] != TFC_F32)
        return tfc_layer_error(err, l, "takes float32 input, not token ids");
    if (in->ndim < 1) return tfc_layer_error(err, l, "needs an input with at least one axis");
    const int given_mean = a->mean && !tfc_node_is_null(a->mean);
    const int given_var = a->variance && !tfc_node_is_null(a->variance);
    if (given_mean != given_var)
        return tfc_layer_error(err, l, "mean and variance: give both or neither (neither: "
                               "adapted to the training data)");
    int first = 0;
    if (resolve_axis(l, &first, err)) return TFC_ERR_CONFIG;
    norm_free_state(l);
    norm_state *s = calloc(1, sizeof *s);
    if (!s) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    l->state = s;
    const int nk = in->ndim - first;
    const int64_t *keep = in->dim + first;
    s->cols = 1;
    for (int i = 0; i < nk; i++) s->cols *= keep[i];
    s->given = given_mean;
    l->out_shape = *in;
    if (s->given) {
        int64_t dm[TFC_MAX_DIMS + 1], dv[TFC_MAX_DIMS + 1];
        int nm = value_shape(a->mean, dm, TFC_MAX_DIMS), nv = value_shape(a->variance, dv,
                                                                          TFC_MAX_DIMS);
        if (nm >= 0 && nv >= 0 && (nm != nv || memcmp(dm, dv, (size_t)nm * sizeof *dm)))
            return tfc_layer_error(err, l, "mean and variance must have the same shape");
        if (read_given(l, "mean", a->mean, keep, nk, &s->gmean, err) ||
            read_given(l, "variance", a->variance, keep, nk, &s->gvar, err))
            return err->code ? err->code : TFC_ERR_CONFIG;
        for (int64_t c = 0; c < s->cols; c++)
            if (!(s->gvar[c] >= 0) || !isfinite(s->gmean[c]) || !isfinite(s->gvar[c]))
                return tfc_layer_error(err, l, "variance must be finite and not negative, mean "
                                       "finite (value %lld: %g, %g)", (long long)c,
                                       s->gmean[c], s->gvar[c]);
        tfc_layer_add_param(l, "mean", 1, &s->cols, 0, tfc_init_make(TFC_INIT_ZEROS))->constant = 1;
        tfc_layer_add_param(l, "variance", 1, &s->cols, 0,
                            tfc_init_make(TFC_INIT_ONES))->constant = 1;
    } else { /* Keras's variables, in its shapes */
        tfc_layer_add_param(l, "mean", nk, keep, 0, tfc_init_make(TFC_INIT_ZEROS));
        tfc_layer_add_param(l, "variance", nk, keep, 0, tfc_init_make(TFC_INIT_ONES));
        tfc_layer_add_param(l, "count", 0, NULL, 0, tfc_init_make(TFC_INIT_ZEROS));
    }
    s->ones = l->nparams;
    tfc_layer_add_param(l, "ones", 1, &s->cols, 0, tfc_init_make(TFC_INIT_ONES))->constant = 1;
    tfc_layer_add_param(l, "zeros", 1, &s->cols, 0, tfc_init_make(TFC_INIT_ZEROS))->constant = 1;
    return TFC_OK;
}

static void norm_fill_param(const tfc_layer *l, int p, float *host)
{
    const norm_state *s = l->state;
    if (!s->given || (p != MEAN && p != VAR)) return;
    memcpy(host, p == MEAN ? s->gmean : s->gvar, (size_t)s->cols * sizeof *host);
}

/* [3 cols] floats: 1/sqrt(var + eps), its square, and sqrt(var + eps) */
static void norm_plan(tfc_layer *l, tfc_backend *be)
{
    (void)be;
    const norm_state *s = l->state;
    l->workspace = (size_t)(3 * s->cols) * sizeof(float);
}

/* ws[0, cols) = 1 / sqrt(var + eps), ws[cols, 2 cols) its square (invert's 1 / (var + eps)),
 * from bn_forward_infer on a row of ones. */
static void norm_factors(tfc_layer *l, tfc_exec *ex, float *ws)
{
    const norm_state *s = l->state;
    const tfc_param *p = l->params;
    const float *ones = p[s->ones].data, *zeros = p[s->ones + 1].data;
    const int c = (int)s->cols;
    ex->be->ops->bn_forward_infer(ex->be, 1, c, ones, ones, zeros, zeros, p[VAR].data, NORM_EPS,
                                  ws);
    ex->be->ops->mul(ex->be, 1, 1, c, ws, ws, 0, ws + c, 0);
}

static void norm_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const norm_args *a = l->args;
    const norm_state *s = l->state;
    const tfc_param *p = l->params;
    const float *ones = p[s->ones].data, *zeros = p[s->ones + 1].data;
    const int c = (int)s->cols;
    const int64_t rows = (int64_t)ex->batch * tfc_layer_out_numel(l) / c;
    if (!a->invert) {
        ex->be->ops->bn_forward_infer(ex->be, rows, c, x[0], ones, zeros, p[MEAN].data,
                                      p[VAR].data, NORM_EPS, y);
        return;
    }
    float *ws = ex->ws;
    norm_factors(l, ex, ws); /* y = x / sqrt(1 / (var + eps)) + mean */
    ex->be->ops->bn_forward_infer(ex->be, rows, c, x[0], ones, p[MEAN].data, zeros, ws + c, 0.f,
                                  y);
}

static void norm_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                          const float *dy, float *const *dx)
{
    (void)x, (void)y;
    const norm_args *a = l->args;
    const norm_state *s = l->state;
    if (!dx[0]) return;
    const tfc_param *p = l->params;
    const float *ones = p[s->ones].data, *zeros = p[s->ones + 1].data;
    const int c = (int)s->cols;
    const int64_t rows = (int64_t)ex->batch * tfc_layer_out_numel(l) / c;
    float *ws = ex->ws, *factor = ws;
    norm_factors(l, ex, ws);
    if (a->invert) { /* sqrt(var + eps) = 1 / sqrt(its inverse) */
        factor = ws + 2 * c;
        ex->be->ops->bn_forward_infer(ex->be, 1, c, ones, ones, zeros, zeros, ws + c, 0.f, factor);
    }
    ex->be->ops->mul(ex->be, 1, rows, c, dy, factor, 1, dx[0], 1);
}

/* ---- adapt ------------------------------------------------------------------------------ */

static tfc_status norm_adapt_begin(tfc_layer *l, tfc_error *err)
{
    norm_state *s = l->state;
    free(s->mu), free(s->m2), free(s->bm), free(s->bq);
    s->mu = calloc((size_t)s->cols, sizeof *s->mu);
    s->m2 = calloc((size_t)s->cols, sizeof *s->m2);
    s->bm = malloc((size_t)s->cols * sizeof *s->bm);
    s->bq = malloc((size_t)s->cols * sizeof *s->bq);
    s->seen = 0;
    if (!s->mu || !s->m2 || !s->bm || !s->bq)
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    return TFC_OK;
}

/* The batch's own mean and squared deviations per kept position (two passes, in double),
 * merged into the running ones by Chan et al.'s rule:
 *   n = na + nb,  d = mb - ma,  m = ma + d nb / n,  M2 = M2a + M2b + d^2 na nb / n */
static void norm_adapt_batch(tfc_layer *l, const float *x, int batch)
{
    norm_state *s = l->state;
    const int64_t c = s->cols, rows = (int64_t)batch * tfc_layer_out_numel(l) / c;
    if (!s->mu || rows < 1) return;
    double *bm = s->bm, *bq = s->bq;
    memset(bm, 0, (size_t)c * sizeof *bm);
    memset(bq, 0, (size_t)c * sizeof *bq);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < c; k++) bm[k] += x[r * c + k];
    for (int64_t k = 0; k < c; k++) bm[k] /= (double)rows;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < c; k++) {
            double d = x[r * c + k] - bm[k];
            bq[k] += d * d;
        }
    const double na = (double)s->seen, nb = (double)rows, n = na + nb;
    for (int64_t k = 0; k < c; k++) {
        double d = bm[k] - s->mu[k];
        s->mu[k] += d * nb / n;
        s->m2[k] += bq[k] + d * d * na * nb / n;
    }
    s->seen += rows;
}

static void norm_adapt_end(tfc_layer *l, float *const *host)
{
    norm_state *s = l->state;
    for (int64_t k = 0; s->mu && s->seen && k < s->cols; k++) { /* no data: as they are */
        host[MEAN][k] = (float)s->mu[k];
        host[VAR][k] = (float)(s->m2[k] / (double)s->seen);
    }
    free(s->mu), free(s->m2), free(s->bm), free(s->bq);
    s->mu = s->m2 = s->bm = s->bq = NULL;
}

const tfc_layer_ops tfc_normalization_ops = {
    .type = "Normalization", .schema = norm_fields, .args_size = sizeof(norm_args),
    .min_inputs = 1, .max_inputs = 1, .keeps_mask = 1, .cpu_first = 1,
    .build = norm_build, .plan = norm_plan, .forward = norm_forward, .backward = norm_backward,
    .free_state = norm_free_state, .fill_param = norm_fill_param,
    .adapt_begin = norm_adapt_begin, .adapt_batch = norm_adapt_batch,
    .adapt_end = norm_adapt_end,
};
