/* Permute (keras.layers.Permute(dims)): each example's axes reordered, the batch axis kept
 * first. dims is Keras's: a permutation of 1 .. rank counting from 1 (the batch axis is 0),
 * output axis i being input axis dims[i]:
 *   forward:  y = transpose(x, (0,) + dims)
 *   backward: dx += transpose(dy, (0,) + inverse(dims))   (= where dx's block starts here)
 * One backend op (permute) serves both, through the inverse permutation. Keras's layer does
 * not support masking: a sequence mask stops here, as there (Keras warns and drops it). */
#include "layers/layer.h"

_Static_assert(TFC_PERMUTE_AXES == TFC_MAX_DIMS, "tfc_permute_desc holds any shape");

typedef struct permute_args {
    tfc_int_list dims;
} permute_args;

static const tfc_field permute_fields[] = {
    {"dims", TFC_F_INT_LIST, offsetof(permute_args, dims), NULL, -(1 << 30), 1 << 30, NULL,
     "the input axes in their new order, counted from 1 (the batch axis stays first)"},
    {NULL}};

static tfc_status permute_build(tfc_layer *l, tfc_error *err)
{
    const permute_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    const int n = a->dims.n;
    char buf[96];
    int seen[TFC_LIST_MAX] = {0}, ok = n > 0;
    if (l->in_dtype[0] != TFC_F32)
        return tfc_layer_error(err, l, "takes float32 input, not token ids");
    for (int i = 0; i < n; i++) {
        const int v = a->dims.v[i];
        if (v < 1 || v > n || seen[v - 1]++) ok = 0;
    }
    if (!ok) {
        int at = snprintf(buf, sizeof buf, "[");
        for (int i = 0; i < n && at < (int)sizeof buf - 16; i++)
            at += snprintf(buf + at, sizeof buf - at, "%s%d", i ? ", " : "", a->dims.v[i]);
        snprintf(buf + at, sizeof buf - at, "]");
        return tfc_layer_error(err, l, "dims %s is not a permutation of 1 .. %d: Keras counts "
                               "the input's axes from 1 (the batch axis stays first)", buf,
                               n > 0 ? n : 1);
    }
    if (n != in->ndim)
        return tfc_layer_error(err, l, "dims has %d axes but the input %s has %d (without the "
                               "batch axis)", n, tfc_shape_str(in, buf, sizeof buf), in->ndim);
    l->out_shape.ndim = n;
    for (int i = 0; i < n; i++) l->out_shape.dim[i] = in->dim[a->dims.v[i] - 1];
    return TFC_OK;
}

/* The desc from x's shape `in` through dims, or back (inverse: from y's shape). */
static tfc_permute_desc permute_desc(const tfc_layer *l, int batch, int inverse)
{
    const permute_args *a = l->args;
    tfc_permute_desc d = {.n = batch, .ndim = a->dims.n};
    for (int i = 0; i < d.ndim; i++) {
        const int from = a->dims.v[i] - 1; /* output axis i is input axis `from` */
        if (inverse) d.perm[from] = i;
        else d.perm[i] = from;
        d.dim[i] = inverse ? l->out_shape.dim[i] : l->in_shape[0].dim[i];
    }
    return d;
}

static const char *const *permute_needs(const tfc_layer *l)
{
    (void)l;
    static const char *const needs[] = {"permute", NULL};
    return needs;
}

static void permute_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    tfc_permute_desc d = permute_desc(l, ex->batch, 0);
    ex->be->ops->permute(ex->be, &d, x[0], y, 0);
}

static void permute_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                             const float *dy, float *const *dx)
{
    (void)x, (void)y;
    if (!dx[0]) return;
    tfc_permute_desc d = permute_desc(l, ex->batch, 1);
    ex->be->ops->permute(ex->be, &d, dy, dx[0], !(ex->fresh & 1));
}

const tfc_layer_ops tfc_permute_ops = {
    .type = "Permute", .schema = permute_fields, .args_size = sizeof(permute_args),
    .min_inputs = 1, .max_inputs = 1, .assigns_grads = 1, .needs = permute_needs,
    .build = permute_build, .forward = permute_forward, .backward = permute_backward,
};
