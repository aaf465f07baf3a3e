/* EinsumDense (keras.layers.EinsumDense(equation, output_shape, bias_axes)): a Dense whose
 * axes an einsum equation names, as Keras's:
 *   y = act(einsum(equation, x, K) + b)      b broadcast over the output's trailing axes
 * ("abc,cde->abde" projects each step to heads x dims; "abde,deg->abg" back). The equation is
 * parsed and planned in einsum_spec.c into the letters' roles: batch-like B, contracted C,
 * kernel-free N, shared S and summed R (the input's alone); per example the input is laid
 * out (B, S, C, R), the kernel (S, C, N) (or (S, N, C), read transposed) and the output
 * (B, S, N), permuted where the equation has them otherwise; R joins the contracted letters,
 * the kernel repeated along it (copy2d). Then for each s < |S| one GEMM over the batch's rows:
 *   forward:  Y_s = X_s K_s                                     (rows, N) = (rows, C)(C, N)
 *   backward: dX_s = dY_s K_s^T,  dK_s = X_s^T dY_s,  db = dY summed over what it broadcasts
 * The kernel and the bias keep Keras's shapes and variable names (the bias with 1 on the axes
 * it broadcasts over), the kernel's glorot/he/lecun fans Keras's (input_axes: the contracted
 * axes, output_axes: the others). The permutes of the input and the kernel are recomputed in
 * backward. Gradients: dx and the parameters' written where they start here (assigns_grads,
 * assigns_param_grads), else added. The mask stops here, as Keras's layer has none. Built on
 * gemm, bias_add, bias_grad, copy2d and permute: CPU-first until make test-gpu has run it. */
#include <stdlib.h>
#include <string.h>

#include "layers/einsum_spec.h"
#include "layers/layer.h"

typedef struct einsum_args {
    const char *equation, *bias_axes;
    const tfc_node *output_shape;
    int activation;
    const tfc_node *kernel_initializer, *bias_initializer;
} einsum_args;

static const tfc_field einsum_fields[] = {
    {"equation", TFC_F_STRING, offsetof(einsum_args, equation), NULL, TFC_UNBOUNDED, NULL,
     "\"INPUT,KERNEL->OUTPUT\": \"abc,cd->abd\", \"...b,bc->...c\" (the batch first)"},
    {"output_shape", TFC_F_NODE, offsetof(einsum_args, output_shape), NULL, TFC_UNBOUNDED, NULL,
     "the output's sizes but the batch's and those of '...': an integer or a list (null: "
     "the input's)"},
    TFC_ACTIVATION_FIELD(einsum_args, activation),
    {"bias_axes", TFC_F_STRING, offsetof(einsum_args, bias_axes), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "the output's letters the bias has (null: no bias)"},
    {"kernel_initializer", TFC_F_NODE, offsetof(einsum_args, kernel_initializer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "default glorot_uniform"},
    {"bias_initializer", TFC_F_NODE, offsetof(einsum_args, bias_initializer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "default zeros"},
    TFC_KERNEL_BIAS_KERAS_FIELDS,
    TFC_FIXED_FIELD("lora_rank", TFC_NO_DEFAULT, "tfc has no LoRA; leave this argument out"),
    TFC_FIXED_FIELD("lora_alpha", TFC_NO_DEFAULT, "tfc has no LoRA; leave this argument out"),
    TFC_FIXED_FIELD("gptq_unpacked_column_size", TFC_NO_DEFAULT,
                    "tfc has no GPTQ quantization; leave this argument out"),
    TFC_FIXED_FIELD("quantization_config", TFC_NO_DEFAULT,
                    "tfc has no quantization; leave this argument out"),
    {NULL}};

/* The plan and where its scratch lies (floats from the workspace's start). */
typedef struct einsum_state {
    tfc_einsum_plan p;
    int64_t in_numel, out_numel, ker_numel;
    size_t xc_at, dxc_at, yc_at, kc_at, dkc_at, kx_at, dkx_at, be_at, bt_at, bq_at;
} einsum_state;

/* An error of argument `arg` at its YAML (the character `at` of a string argument, the item
 * `at` of output_shape; at < 0: the argument), or at the layer when the argument is absent. */
static tfc_status arg_error(const tfc_layer *l, const char *arg, int at, const char *msg,
                            tfc_error *err)
{
    const tfc_node *n = l->args_node ? tfc_node_get(l->args_node, arg) : NULL;
    char key[128];
    snprintf(key, sizeof key, "layers[%d].%s.%s", l->index, l->ops->type, arg);
    if (!n) return tfc_layer_error(err, l, "%s: %s", arg, msg);
    tfc_node where = *n;
    if (at >= 0 && n->kind == TFC_NODE_SCALAR) where.col += at + (n->quoted ? 1 : 0);
    else if (at >= 0 && n->kind == TFC_NODE_SEQ && at < n->n) where = *n->vals[at];
    const einsum_args *a = l->args;
    if (!strcmp(arg, "equation"))
        return tfc_node_error(err, TFC_ERR_CONFIG, &where, key, "layer '%s': equation \"%s\": "
                              "%s", l->name, a->equation, msg);
    return tfc_node_error(err, TFC_ERR_CONFIG, &where, key, "layer '%s': %s: %s", l->name, arg,
                          msg);
}

/* output_shape: an integer or a list of integers and nulls (-1). */
static tfc_status read_output_shape(const tfc_layer *l, int64_t *v, int *n, tfc_error *err)
{
    const einsum_args *a = l->args;
    const tfc_node *node = a->output_shape;
    char path[128];
    snprintf(path, sizeof path, "layers[%d].%s.output_shape", l->index, l->ops->type);
    const int seq = node->kind == TFC_NODE_SEQ;
    *n = seq ? node->n : 1;
    if (seq && node->n > TFC_EINSUM_AXES)
        return arg_error(l, "output_shape", -1, "has more sizes than an output has axes", err);
    for (int i = 0; i < *n; i++) {
        const tfc_node *item = seq ? node->vals[i] : node;
        long long x;
        if (seq && tfc_node_is_null(item)) {
            v[i] = -1;
            continue;
        }
        if (tfc_node_int(item, path, 1, 1 << 30, &x, err)) return TFC_ERR_CONFIG;
        v[i] = x;
    }
    return TFC_OK;
}

static const char *const arg_names[] = {"equation", "output_shape", "bias_axes", "equation"};

static tfc_status einsum_build(tfc_layer *l, tfc_error *err)
{
    const einsum_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    char buf[96], msg[420];
    if (l->in_dtype[0] != TFC_F32)
        return tfc_layer_error(err, l, "takes float32 input, not token ids");
    tfc_einsum_spec spec;
    tfc_einsum_error e;
    int64_t partial[TFC_EINSUM_AXES];
    int np;
    if (tfc_einsum_parse(a->equation, &spec, &e))
        return arg_error(l, "equation", e.at, e.msg, err);
    if (read_output_shape(l, partial, &np, err)) return TFC_ERR_CONFIG;
    einsum_state *st = calloc(1, sizeof *st);
    if (!st) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    l->state = st;
    tfc_einsum_plan *p = &st->p;
    if (tfc_einsum_plan_make(&spec, in->ndim, in->dim, partial, np, a->bias_axes, p, &e)) {
        if (e.arg == TFC_EINSUM_INPUT) {
            snprintf(msg, sizeof msg, "%s; the input is %s", e.msg,
                     tfc_shape_str(in, buf, sizeof buf));
            return arg_error(l, "equation", -1, msg, err);
        }
        return arg_error(l, arg_names[e.arg], e.at, e.msg, err);
    }
    if (p->rank_out > TFC_MAX_DIMS || p->rank_ker > TFC_MAX_DIMS)
        return arg_error(l, "equation", -1, p->rank_out > TFC_MAX_DIMS ? "the output would "
                         "have more axes than tfc's 8" : "the kernel has more axes than tfc's 8",
                         err);
    l->out_shape = tfc_shape_make(p->rank_out, p->out_dim);
    l->act = (tfc_act)a->activation;
    tfc_init ki, bi;
    if (tfc_layer_init_arg(l, a->kernel_initializer, "kernel_initializer",
                           TFC_INIT_GLOROT_UNIFORM, &ki, err) ||
        tfc_layer_init_arg(l, a->bias_initializer, "bias_initializer", TFC_INIT_ZEROS, &bi, err))
        return TFC_ERR_CONFIG;
    /* Keras's input_axes and output_axes (whatever the initializer: summary.c reads fan_in) */
    ki.fan_in = (double)p->fan_in;
    ki.fan_out = (double)p->fan_out;
    tfc_layer_add_param(l, "kernel", p->rank_ker, p->ker_dim, 1, ki);
    if (p->rank_bias) tfc_layer_add_param(l, "bias", p->rank_bias, p->bias_dim, 1, bi);
    st->in_numel = tfc_shape_numel(in);
    st->out_numel = tfc_shape_numel(&l->out_shape);
    st->ker_numel = l->params[0].numel;
    return TFC_OK;
}

/* The workspace: the permuted input and its gradient, the output before its permute (and
 * its gradient after), the permuted kernel and its gradient, the kernel repeated along the
 * summed axes and its gradient, the bias broadcast and two blocks for its gradient. */
static void einsum_plan(tfc_layer *l, tfc_backend *be)
{
    (void)be;
    einsum_state *st = l->state;
    const tfc_einsum_plan *p = &st->p;
    const size_t b = (size_t)l->max_batch, blk = p->bias_expand ? (size_t)p->bias_block : 0;
    size_t at = 0;
    st->xc_at = at, at += p->x_permuted ? b * (size_t)st->in_numel : 0;
    st->dxc_at = at, at += p->x_permuted ? b * (size_t)st->in_numel : 0;
    st->yc_at = at, at += p->y_permuted ? b * (size_t)st->out_numel : 0;
    st->kc_at = at, at += p->k_permuted ? (size_t)st->ker_numel : 0;
    st->dkc_at = at, at += p->k_permuted ? (size_t)st->ker_numel : 0;
    st->kx_at = at, at += p->reduce > 1 ? (size_t)(st->ker_numel * p->reduce) : 0;
    st->dkx_at = at, at += p->reduce > 1 ? (size_t)(st->ker_numel * p->reduce) : 0;
    st->be_at = at, at += blk;
    st->bt_at = at, at += blk;
    st->bq_at = at, at += blk;
    l->workspace = at * 4;
}

static const char *const *einsum_needs(const tfc_layer *l)
{
    static const char *const perm[] = {"permute", NULL}, *const none[] = {NULL};
    const tfc_einsum_plan *p = &((const einsum_state *)l->state)->p;
    return p->x_permuted || p->y_permuted || p->k_permuted || p->bias_expand ? perm : none;
}

/* A permute desc of n examples of `dim` (ndim axes) by perm, or back (from the permuted
 * shape, by the inverse). */
static tfc_permute_desc desc(int64_t n, int ndim, const int64_t *dim, const int *perm, int back)
{
    tfc_permute_desc d = {.n = n, .ndim = ndim};
    for (int i = 0; i < ndim; i++) {
        if (back) d.perm[perm[i]] = i, d.dim[i] = dim[perm[i]];
        else d.perm[i] = perm[i], d.dim[i] = dim[i];
    }
    return d;
}

/* The kernel (S, C, N) (or (S, N, C)) as copy2d's rows and columns for its repetition along
 * the summed axes R into (S, C, R, N) (or (S, N, C, R)): copy r of a row lands at r cols in a
 * row of reduce cols. */
static void repeat_rows(const tfc_einsum_plan *p, int64_t *rows, int *cols)
{
    *cols = p->k_trans ? 1 : (int)p->n;
    *rows = p->shared * p->k * (p->k_trans ? p->n : 1);
}

/* The input and the kernel in the GEMMs' layouts: themselves, or permuted (and the kernel
 * repeated along the summed axes) into scratch. */
static void operands(const tfc_layer *l, tfc_exec *ex, const float *x, const float **X,
                     const float **K)
{
    const einsum_state *st = l->state;
    const tfc_einsum_plan *p = &st->p;
    float *ws = ex->ws;
    *X = x;
    *K = l->params[0].data;
    if (p->x_permuted) {
        tfc_permute_desc d = desc(ex->batch, p->rank_in, p->in_dim, p->x_perm, 0);
        ex->be->ops->permute(ex->be, &d, x, ws + st->xc_at, 0);
        *X = ws + st->xc_at;
    }
    if (p->k_permuted) {
        tfc_permute_desc d = desc(1, p->rank_ker, p->ker_dim, p->k_perm, 0);
        ex->be->ops->permute(ex->be, &d, *K, ws + st->kc_at, 0);
        *K = ws + st->kc_at;
    }
    if (p->reduce > 1) {
        int64_t rows;
        int cols;
        repeat_rows(p, &rows, &cols);
        for (int64_t r = 0; r < p->reduce; r++)
            ex->be->ops->copy2d(ex->be, rows, cols, *K, cols, ws + st->kx_at + r * cols,
                                (int)p->reduce * cols, 0);
        *K = ws + st->kx_at;
    }
}

static void einsum_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const einsum_state *st = l->state;
    const tfc_einsum_plan *p = &st->p;
    const tfc_backend_ops *op = ex->be->ops;
    float *ws = ex->ws;
    const float *X, *K;
    operands(l, ex, x[0], &X, &K);
    float *Y = p->y_permuted ? ws + st->yc_at : y;
    const int m = (int)(ex->batch * p->rows_per), k = (int)(p->k * p->reduce), n = (int)p->n;
    const int s = (int)p->shared, ldb = p->k_trans ? k : n;
    for (int i = 0; i < s; i++) {
        const float *Ks = K + (size_t)i * k * n;
        if (s == 1 && !p->k_permuted && p->reduce == 1) /* the kernel: the weights' gemm */
            op->gemm_weights(ex->be, 0, p->k_trans, m, n, k, 1.f, X, k, Ks, ldb, 0.f, Y, n);
        else
            op->gemm(ex->be, 0, p->k_trans, m, n, k, 1.f, X + (size_t)i * k, s * k, Ks, ldb,
                     0.f, Y + (size_t)i * n, s * n);
    }
    if (p->y_permuted) {
        tfc_permute_desc d = desc(ex->batch, p->rank_out, p->y_canon_dim, p->y_perm, 0);
        op->permute(ex->be, &d, Y, y, 0);
    }
    if (!p->rank_bias) return;
    const int64_t rows = ex->batch * (st->out_numel / p->bias_block);
    const float *bias = l->params[1].data;
    if (p->bias_expand) { /* (Q, P): the bias Q times, then permuted into the output's order */
        float *q = ws + st->bq_at;
        op->zero(ex->be, q, (size_t)p->bias_block * 4);
        op->bias_add(ex->be, p->bias_q, (int)p->bias_p, bias, q);
        tfc_permute_desc d = desc(1, p->bias_ndim, p->bias_src_dim, p->bias_perm, 0);
        op->permute(ex->be, &d, q, ws + st->be_at, 0);
        bias = ws + st->be_at;
    }
    op->bias_add(ex->be, rows, (int)p->bias_block, bias, y);
}

static void einsum_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                            const float *dy, float *const *dx)
{
    (void)y;
    const einsum_state *st = l->state;
    const tfc_einsum_plan *p = &st->p;
    const tfc_backend_ops *op = ex->be->ops;
    float *ws = ex->ws;
    const float *X, *K, *dY = dy;
    operands(l, ex, x[0], &X, &K);
    if (p->y_permuted) {
        tfc_permute_desc d = desc(ex->batch, p->rank_out, p->y_canon_dim, p->y_perm, 1);
        op->permute(ex->be, &d, dy, ws + st->yc_at, 0);
        dY = ws + st->yc_at;
    }
    const int m = (int)(ex->batch * p->rows_per), k = (int)(p->k * p->reduce), n = (int)p->n;
    const int s = (int)p->shared, ldb = p->k_trans ? k : n, tb = p->k_trans;
    if (dx[0]) { /* dX_s = dY_s K_s^T, written where dx starts here */
        float *dX = p->x_permuted ? ws + st->dxc_at : dx[0];
        const float beta = p->x_permuted || (ex->fresh & 1) ? 0.f : 1.f;
        for (int i = 0; i < s; i++)
            op->gemm(ex->be, 0, !tb, m, k, n, 1.f, dY + (size_t)i * n, s * n,
                     K + (size_t)i * k * n, ldb, beta, dX + (size_t)i * k, s * k);
        if (p->x_permuted) {
            tfc_permute_desc d = desc(ex->batch, p->rank_in, p->in_dim, p->x_perm, 1);
            op->permute(ex->be, &d, dX, dx[0], !(ex->fresh & 1));
        }
    }
    /* dK_s = X_s^T dY_s (with k_trans, its transpose dY_s^T X_s); repeated along the summed
     * axes, the repetitions' gradients added back into one */
    float *dKc = p->k_permuted ? ws + st->dkc_at : l->params[0].grad;
    float *dK = p->reduce > 1 ? ws + st->dkx_at : dKc;
    const float beta = p->k_permuted || p->reduce > 1 || ex->params_fresh ? 0.f : 1.f;
    for (int i = 0; i < s; i++) {
        const float *Xs = X + (size_t)i * k, *dYs = dY + (size_t)i * n;
        float *dKs = dK + (size_t)i * k * n;
        if (!tb) op->gemm(ex->be, 1, 0, k, n, m, 1.f, Xs, s * k, dYs, s * n, beta, dKs, n);
        else op->gemm(ex->be, 1, 0, n, k, m, 1.f, dYs, s * n, Xs, s * k, beta, dKs, k);
    }
    if (p->reduce > 1) {
        int64_t rows;
        int cols;
        repeat_rows(p, &rows, &cols);
        for (int64_t r = 0; r < p->reduce; r++)
            op->copy2d(ex->be, rows, cols, dK + r * cols, (int)p->reduce * cols, dKc, cols,
                       r > 0 || (!p->k_permuted && !ex->params_fresh));
    }
    if (p->k_permuted) {
        tfc_permute_desc d = desc(1, p->rank_ker, p->ker_dim, p->k_perm, 1);
        op->permute(ex->be, &d, dKc, l->params[0].grad, !ex->params_fresh);
    }
    if (!p->rank_bias) return;
    /* db: dy summed over the rows; where it broadcasts, over its (Q, P) reading too */
    const int64_t rows = ex->batch * (st->out_numel / p->bias_block);
    float *db = l->params[1].grad;
    if (ex->params_fresh) op->zero(ex->be, db, (size_t)l->params[1].numel * 4);
    if (!p->bias_expand) {
        op->bias_grad(ex->be, rows, (int)p->bias_block, dy, db);
        return;
    }
    float *t = ws + st->bt_at, *q = ws + st->bq_at;
    op->zero(ex->be, t, (size_t)p->bias_block * 4);
    op->bias_grad(ex->be, rows, (int)p->bias_block, dy, t);
    tfc_permute_desc d = desc(1, p->bias_ndim, p->bias_src_dim, p->bias_perm, 1);
    op->permute(ex->be, &d, t, q, 0);
    op->bias_grad(ex->be, p->bias_q, (int)p->bias_p, q, db);
}

static void einsum_free(tfc_layer *l) { free(l->state); }

const tfc_layer_ops tfc_einsum_dense_ops = {
    .type = "EinsumDense", .schema = einsum_fields, .args_size = sizeof(einsum_args),
    .min_inputs = 1, .max_inputs = 1, .assigns_grads = 1, .assigns_param_grads = 1,
    .cpu_first = 1, .needs = einsum_needs,
    .build = einsum_build, .plan = einsum_plan, .forward = einsum_forward,
    .backward = einsum_backward, .free_state = einsum_free,
};
