/* Dot (keras.layers.Dot(axes, normalize=False)): the dot product of two inputs along one axis
 * of each, example by example, as Keras's batch_dot. axes is one axis for both or a pair
 * (Keras counts the batch axis as 0, which may not be one; a negative axis counts from each
 * input's end). With x (P, K, Q) around its axis and y (R, K, S) around its own:
 *   y[p, q, r, s] = sum_k x[p, k, q] y[r, k, s]
 * the output's axes x's other axes, then y's; (1) when none is left (Keras's (batch, 1)).
 * normalize: x and y first l2-normalised along their axes, as Keras's
 * numerical_utils.normalize: x min(rsqrt(sum x^2), 1 / eps) with eps = keras.config.epsilon()
 * = 1e-7 (UnitNormalization's l2norm ops, with another clamp).
 * Per example that is one gemm, C (PQ, RS) = A (PQ, K) B (K, RS):
 *   forward:  C = A B            backward: dA = dC B^T,  dB = A^T dC
 * where A is x itself (Q = 1), x^T (P = 1: a transpose flag) or x permuted to (P, Q, K) in
 * the workspace, and B likewise y (P = 1), y^T (S = 1) or y permuted to (K, R, S); the
 * normalised inputs and the permutes are recomputed in backward, their gradients taken back
 * through the permute and l2norm ops. Gradients are added. The mask stops here (Keras's Dot
 * computes none). Built on gemm and, where the axes or normalize need them, the permute and
 * l2norm ops; CPU-first until make test-gpu has run it. */
#include <stdlib.h>

#include "layers/layer.h"

/* 1 / keras.config.epsilon(): Dot's normalize passes no epsilon to ops.normalize, which then
 * takes the backend's 1e-7 (UnitNormalization passes 1e-12) */
#define DOT_INV_EPS 1e7f

typedef struct dot_args {
    int axes[2];
    int normalize;
} dot_args;

static const tfc_field dot_fields[] = {
    {"axes", TFC_F_INT_PAIR, offsetof(dot_args, axes), NULL, TFC_UNBOUNDED, NULL,
     "the axis of both inputs, or one for each, to take the dot product along (Keras counts "
     "the batch axis as 0; negative counts from the end)"},
    {"normalize", TFC_F_BOOL, offsetof(dot_args, normalize), "false", TFC_UNBOUNDED, NULL,
     "l2-normalise each input along its axis first (the cosine similarity)"},
    {NULL}};

/* One input as a matrix of the gemm: (outer, k, inner) around its axis; permuted in the
 * workspace when both outer and inner exceed 1, else read in place, transposed or not. */
typedef struct dot_side {
    int64_t outer, k, inner, numel; /* per example */
    int permute, trans;
    size_t norm_at, perm_at, grad_at, back_at; /* floats per example into the workspace */
} dot_side;

typedef struct dot_state {
    dot_side s[2];
    size_t ws_floats; /* per example */
} dot_state;

static tfc_status dot_build(tfc_layer *l, tfc_error *err)
{
    const dot_args *a = l->args;
    char b0[96], b1[96];
    int ax[2];
    for (int i = 0; i < 2; i++) {
        const int rank = l->in_shape[i].ndim + 1; /* with the batch axis */
        if (l->in_dtype[i] != TFC_F32)
            return tfc_layer_error(err, l, "input %d: takes float32 input, not token ids", i);
        ax[i] = a->axes[i] < 0 ? a->axes[i] + rank : a->axes[i];
        if (ax[i] < 0 || ax[i] >= rank)
            return tfc_layer_error(err, l, "axes: axis %d is out of range for input %d of %d "
                                   "axes (with the batch axis)", a->axes[i], i, rank);
        if (ax[i] == 0)
            return tfc_layer_error(err, l, "axes: axis %d of input %d is the batch axis: the "
                                   "dot product is taken example by example", a->axes[i], i);
    }
    const tfc_shape *x = &l->in_shape[0], *y = &l->in_shape[1];
    if (x->dim[ax[0] - 1] != y->dim[ax[1] - 1])
        return tfc_layer_error(err, l, "axes: input 0 %s has %lld along axis %d but input 1 %s "
                               "has %lld along axis %d: the dot axes must match",
                               tfc_shape_str(x, b0, sizeof b0), (long long)x->dim[ax[0] - 1],
                               ax[0], tfc_shape_str(y, b1, sizeof b1),
                               (long long)y->dim[ax[1] - 1], ax[1]);
    if (x->ndim + y->ndim - 2 > TFC_MAX_DIMS)
        return tfc_layer_error(err, l, "the output would have %d axes, more than %d",
                               x->ndim + y->ndim - 2, TFC_MAX_DIMS);
    dot_state *st = calloc(1, sizeof *st);
    if (!st) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    l->state = st;
    tfc_shape out = {.ndim = 0};
    for (int i = 0; i < 2; i++) {
        const tfc_shape *in = &l->in_shape[i];
        dot_side *s = &st->s[i];
        s->outer = s->inner = 1;
        for (int d = 0; d < in->ndim; d++) {
            if (d == ax[i] - 1) continue;
            *(d < ax[i] - 1 ? &s->outer : &s->inner) *= in->dim[d];
            out.dim[out.ndim++] = in->dim[d];
        }
        s->k = in->dim[ax[i] - 1];
        s->numel = tfc_shape_numel(in);
        s->permute = s->outer > 1 && s->inner > 1;
        /* x is A (M, K): transposed when its axis comes first; y is B (K, N): transposed
         * when its axis comes last */
        s->trans = !s->permute && (i == 0 ? s->outer == 1 && s->inner > 1 : s->inner == 1 &&
                                   s->outer > 1);
        /* the workspace: normalised input, permuted input, the gradient of the gemm's
         * operand, that gradient permuted back (when both normalise and permute) */
        size_t at = st->ws_floats;
        const size_t n = (size_t)s->numel;
        if (a->normalize) s->norm_at = at, at += n;
        if (s->permute) s->perm_at = at, at += n;
        if (a->normalize || s->permute) s->grad_at = at, at += n;
        if (a->normalize && s->permute) s->back_at = at, at += n;
        st->ws_floats = at;
    }
    if (out.ndim == 0) out.dim[out.ndim++] = 1; /* Keras: (batch, 1) */
    l->out_shape = out;
    return TFC_OK;
}

static void dot_plan(tfc_layer *l, tfc_backend *be)
{
    (void)be;
    const dot_state *st = l->state;
    l->workspace = (size_t)l->max_batch * st->ws_floats * 4;
}

static const char *const *dot_needs(const tfc_layer *l)
{
    static const char *const both[] = {"permute", "l2norm_forward", "l2norm_backward", NULL};
    static const char *const norm[] = {"l2norm_forward", "l2norm_backward", NULL};
    static const char *const perm[] = {"permute", NULL}, *const none[] = {NULL};
    const dot_args *a = l->args;
    const dot_state *st = l->state;
    const int permutes = st->s[0].permute || st->s[1].permute;
    return a->normalize ? (permutes ? both : norm) : (permutes ? perm : none);
}

static tfc_l2norm_desc side_norm(const dot_side *s, int batch)
{
    return (tfc_l2norm_desc){.outer = batch * s->outer, .red = s->k, .inner = s->inner,
                             .inv_max = DOT_INV_EPS};
}

/* x (outer, k, inner) to (outer, inner, k) for side 0, y to (k, outer, inner) for side 1;
 * back: the inverse, from the permuted shape (both swaps are their own inverse). */
static tfc_permute_desc side_perm(const dot_side *s, int side, int batch, int back)
{
    tfc_permute_desc d = {.n = batch, .ndim = 3};
    const int64_t fwd[3] = {s->outer, s->k, s->inner};
    const int p[2][3] = {{0, 2, 1}, {1, 0, 2}};
    for (int i = 0; i < 3; i++) {
        d.perm[i] = p[side][i];
        d.dim[i] = back ? fwd[p[side][i]] : fwd[i];
    }
    return d;
}

/* The gemm operand of side i for the batch: x itself, or normalised and/or permuted into the
 * workspace. */
static const float *side_operand(const tfc_layer *l, tfc_exec *ex, int i, const float *x)
{
    const dot_args *a = l->args;
    const dot_side *s = &((const dot_state *)l->state)->s[i];
    float *ws = ex->ws;
    const size_t b = (size_t)ex->batch;
    if (a->normalize) {
        tfc_l2norm_desc d = side_norm(s, ex->batch);
        ex->be->ops->l2norm_forward(ex->be, &d, x, ws + b * s->norm_at);
        x = ws + b * s->norm_at;
    }
    if (s->permute) {
        tfc_permute_desc d = side_perm(s, i, ex->batch, 0);
        ex->be->ops->permute(ex->be, &d, x, ws + b * s->perm_at, 0);
        x = ws + b * s->perm_at;
    }
    return x;
}

/* Per example: M = x's outer inner, N = y's, K the dot axis; lda, ldb the stored rows'
 * lengths. */
typedef struct dot_dims {
    int m, n, k, lda, ldb, ta, tb;
} dot_dims;

static dot_dims dims_of(const dot_state *st)
{
    const dot_side *x = &st->s[0], *y = &st->s[1];
    dot_dims g = {.m = (int)(x->outer * x->inner), .n = (int)(y->outer * y->inner),
                  .k = (int)x->k, .ta = x->trans, .tb = y->trans};
    g.lda = g.ta ? g.m : g.k;
    g.ldb = g.tb ? g.k : g.n;
    return g;
}

static void dot_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const dot_state *st = l->state;
    const dot_dims g = dims_of(st);
    const float *A = side_operand(l, ex, 0, x[0]), *B = side_operand(l, ex, 1, x[1]);
    const size_t sa = (size_t)g.m * g.k, sb = (size_t)g.k * g.n, sc = (size_t)g.m * g.n;
    for (int b = 0; b < ex->batch; b++)
        ex->be->ops->gemm(ex->be, g.ta, g.tb, g.m, g.n, g.k, 1.f, A + b * sa, g.lda,
                          B + b * sb, g.ldb, 0.f, y + b * sc, g.n);
}

/* The gradient of side i's operand (in the workspace, or dx itself when x is the operand)
 * taken back through the permute and the normalisation into dx. */
static void side_grad_back(const tfc_layer *l, tfc_exec *ex, int i, const float *x,
                           float *dx)
{
    const dot_args *a = l->args;
    const dot_side *s = &((const dot_state *)l->state)->s[i];
    float *ws = ex->ws;
    const size_t b = (size_t)ex->batch;
    const float *g = ws + b * s->grad_at;
    if (s->permute) {
        tfc_permute_desc d = side_perm(s, i, ex->batch, 1);
        float *to = a->normalize ? ws + b * s->back_at : dx;
        ex->be->ops->permute(ex->be, &d, g, to, !a->normalize);
        g = to;
    }
    if (a->normalize) {
        tfc_l2norm_desc d = side_norm(s, ex->batch);
        ex->be->ops->l2norm_backward(ex->be, &d, x, g, dx, 0);
    }
}

/* dA = dC B^T (stored transposed: B dC^T), dB = A^T dC (stored transposed: dC^T A), per
 * example; added into dx where the operand is x itself, else written to the workspace and
 * taken back. */
static void dot_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                         const float *dy, float *const *dx)
{
    (void)y;
    const dot_args *a = l->args;
    const dot_state *st = l->state;
    const dot_dims g = dims_of(st);
    const tfc_backend_ops *op = ex->be->ops;
    const float *A = side_operand(l, ex, 0, x[0]), *B = side_operand(l, ex, 1, x[1]);
    const size_t sa = (size_t)g.m * g.k, sb = (size_t)g.k * g.n, sc = (size_t)g.m * g.n;
    float *ws = ex->ws;
    for (int i = 0; i < 2; i++) {
        if (!dx[i]) continue;
        const dot_side *s = &st->s[i];
        const int direct = !a->normalize && !s->permute;
        float *d = direct ? dx[i] : ws + (size_t)ex->batch * s->grad_at;
        const float beta = direct ? 1.f : 0.f;
        for (int b = 0; b < ex->batch; b++) {
            const float *dc = dy + b * sc, *ab = A + b * sa, *bb = B + b * sb;
            if (i == 0 && !g.ta)
                op->gemm(ex->be, 0, !g.tb, g.m, g.k, g.n, 1.f, dc, g.n, bb, g.ldb, beta,
                         d + b * sa, g.k);
            else if (i == 0)
                op->gemm(ex->be, g.tb, 1, g.k, g.m, g.n, 1.f, bb, g.ldb, dc, g.n, beta,
                         d + b * sa, g.m);
            else if (!g.tb)
                op->gemm(ex->be, !g.ta, 0, g.k, g.n, g.m, 1.f, ab, g.lda, dc, g.n, beta,
                         d + b * sb, g.n);
            else
                op->gemm(ex->be, 1, g.ta, g.n, g.k, g.m, 1.f, dc, g.n, ab, g.lda, beta,
                         d + b * sb, g.k);
        }
        if (!direct) side_grad_back(l, ex, i, x[i], dx[i]);
    }
}

static void dot_free(tfc_layer *l) { free(l->state); }

const tfc_layer_ops tfc_dot_ops = {
    .type = "Dot", .schema = dot_fields, .args_size = sizeof(dot_args),
    .min_inputs = 2, .max_inputs = 2, .cpu_first = 1, .needs = dot_needs,
    .build = dot_build, .plan = dot_plan, .forward = dot_forward, .backward = dot_backward,
    .free_state = dot_free,
};
