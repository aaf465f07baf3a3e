/* TimeDistributed (keras.layers.TimeDistributed): the inner layer applied to every step of
 * its input's first axis, with the same weights: input (T, ...), the inner layer's input
 * (...), output (T, inner output). The steps of a batch lie one after another in memory, so
 * the inner layer runs once over a batch of batch * T examples (no copies), with its saved
 * buffers and workspace planned for max_batch * T. Keras calls the inner layer step by step,
 * so a BatchNormalization in training takes each step's batch statistics apart (and updates
 * its moving statistics T times, in step order): there the steps are transposed into a
 * [T, batch, ...] scratch and the inner layer runs T times over a batch each. The output
 * keeps the input's mask (Keras's supports_masking), which the inner layer does not see:
 * a layer whose Keras call takes the mask (BatchNormalization, Softmax,
 * GlobalAveragePooling1D) is refused under one. Weights <name>/<inner>/kernel, ...: Keras
 * 3's paths, <inner> the inner layer's `name:` or Keras's snake case of its type. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"

typedef struct td_args {
    const tfc_node *layer;
} td_args;

static const tfc_field td_fields[] = {
    {"layer", TFC_F_NODE, offsetof(td_args, layer), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "the layer applied to every step: {Dense: {...}}, {Conv2D: {...}}, ..."},
    {NULL}};

/* The layers that run per step as Keras's do; the others (recurrent, attention, merge,
 * masking, augmentation, wrappers) are refused naming them. */
static const char *const wrappable[] = {
    "Dense", "EinsumDense", "Embedding",
    "Conv1D", "Conv2D", "Conv3D", "DepthwiseConv1D", "DepthwiseConv2D", "SeparableConv1D",
    "SeparableConv2D", "Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose",
    "MaxPooling1D", "AveragePooling1D", "MaxPooling2D", "AveragePooling2D", "MaxPooling3D",
    "AveragePooling3D", "GlobalMaxPooling1D", "GlobalAveragePooling1D", "GlobalMaxPooling2D",
    "GlobalAveragePooling2D", "GlobalMaxPooling3D", "GlobalAveragePooling3D",
    "AdaptiveMaxPooling1D", "AdaptiveAveragePooling1D", "AdaptiveMaxPooling2D",
    "AdaptiveAveragePooling2D", "AdaptiveMaxPooling3D", "AdaptiveAveragePooling3D",
    "Flatten", "Reshape", "Permute", "RepeatVector", "Identity",
    "Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "GaussianNoise",
    "GaussianDropout", "AlphaDropout",
    "Activation", "ReLU", "LeakyReLU", "ELU", "Softmax", "PReLU",
    "BatchNormalization", "LayerNormalization", "RMSNormalization", "GroupNormalization",
    "UnitNormalization",
    "ZeroPadding1D", "ZeroPadding2D", "ZeroPadding3D", "Cropping1D", "Cropping2D",
    "Cropping3D", "UpSampling1D", "UpSampling2D", "UpSampling3D", "Rescaling", "Resizing",
    "CenterCrop", NULL};

/* Keras's call of these takes the mask, which TimeDistributed hands each step's slice of */
static const char *const mask_readers[] = {"BatchNormalization", "Softmax",
                                           "GlobalAveragePooling1D", NULL};

static int listed(const char *const *names, const char *type)
{
    for (; *names; names++)
        if (!strcmp(*names, type)) return 1;
    return 0;
}

typedef struct td_state {
    tfc_layer in;          /* the inner layer; its parameters are this layer's */
    tfc_inner_args ia;     /* the inner layer's arguments without `name` */
    int steps;             /* T */
    int per_step;          /* BatchNormalization: in training, each step's batch apart */
    int64_t in_numel, out_numel; /* the inner layer's, per example */
} td_state;

static void td_free(tfc_layer *l)
{
    td_state *st = l->state;
    if (!st) return;
    if (st->in.ops && st->in.ops->free_state) st->in.ops->free_state(&st->in);
    free(st->in.args);
    tfc_inner_args_free(&st->ia);
    free(st);
    l->state = NULL;
}

extern const tfc_layer_ops tfc_time_distributed_ops, tfc_time_distributed_cpu_first_ops;

static tfc_status td_build(tfc_layer *l, tfc_error *err)
{
    const td_args *a = l->args;
    const tfc_node *n = a->layer;
    if (!n || n->kind != TFC_NODE_MAP || n->n != 1 ||
        n->vals[0]->kind == TFC_NODE_SEQ)
        return tfc_layer_error(err, l, "layer: expected one layer with its arguments, "
                                       "{Dense: {units: 4}}, {Conv2D: {...}}, ...");
    const char *type = n->keys[0]->str;
    const tfc_layer_ops *ops = tfc_layer_lookup(type);
    if (!ops || !listed(wrappable, ops->type))
        return tfc_layer_error(err, l, "layer: %s cannot be wrapped by TimeDistributed (a "
                                       "layer of one input that runs on each step alone: "
                                       "Dense, the convolutions, poolings, normalizations, "
                                       "...; docs/layers.md)", type);
    if (l->mask_in && listed(mask_readers, ops->type))
        return tfc_layer_error(err, l, "layer: %s under a mask is not supported (Keras hands "
                                       "it each step's slice of the mask); remove the mask or "
                                       "the layer", ops->type);
    const tfc_shape *xs = &l->in_shape[0];
    char buf[96];
    if (xs->ndim < 2)
        return tfc_layer_error(err, l, "needs an input of shape (steps, ...) with at least "
                                       "one axis after the steps, got %s",
                               tfc_shape_str(xs, buf, sizeof buf));
    td_free(l);
    td_state *st = calloc(1, sizeof *st);
    if (!st) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    l->state = st;
    tfc_layer *d = &st->in;
    if (tfc_layer_parse_inner(l, ops, n->vals[0], &st->ia, d,
                              "(Keras calls the inner layer without it, so it adds nothing); "
                              "put an ActivityRegularization layer after the TimeDistributed",
                              err))
        return TFC_ERR_CONFIG;
    d->ops = ops;
    d->index = l->index;
    d->node = l->node;
    d->ninputs = 1;
    d->inputs[0] = l->inputs[0];
    d->in_shape[0] = tfc_shape_make(xs->ndim - 1, xs->dim + 1);
    d->in_dtype[0] = l->in_dtype[0];
    d->pure_act = ops->pure_act;
    d->act = TFC_ACT_LINEAR;
    d->max_batch = 1;
    if (tfc_layer_channels_last(d, err) || ops->build(d, err)) return TFC_ERR_CONFIG;
    if (d->mask_out)
        return tfc_layer_error(err, l, "layer: %s making a mask inside TimeDistributed is not "
                                       "supported (mask_zero: false)", ops->type);
    if (d->out_shape.ndim + 1 > TFC_MAX_DIMS)
        return tfc_layer_error(err, l, "the output would have more than %d axes",
                               TFC_MAX_DIMS);
    st->steps = (int)xs->dim[0];
    st->per_step = !strcmp(ops->type, "BatchNormalization");
    st->in_numel = tfc_shape_numel(&d->in_shape[0]);
    st->out_numel = tfc_shape_numel(&d->out_shape);
    l->out_shape.ndim = d->out_shape.ndim + 1;
    l->out_shape.dim[0] = st->steps;
    for (int i = 0; i < d->out_shape.ndim; i++) l->out_shape.dim[i + 1] = d->out_shape.dim[i];
    /* the activation, elementwise or over the last axis, is the graph's around this layer */
    l->act = d->act;
    l->pure_act = 0;
    l->id_limit = d->id_limit;
    for (int p = 0; p < d->nparams; p++) {
        const tfc_param *ip = &d->params[p];
        char pname[sizeof ip->name];
        int len = snprintf(pname, sizeof pname, "%s/%s", d->name, ip->name);
        if (len >= (int)sizeof pname)
            return tfc_layer_error(err, l, "layer.%s.name: '%s/%s' is longer than %d "
                                           "characters", ops->type, d->name, ip->name,
                                   (int)sizeof pname - 1);
        tfc_param *q = tfc_layer_add_param(l, pname, ip->shape.ndim, ip->shape.dim,
                                           ip->trainable, ip->init);
        q->constant = ip->constant;
        q->regularizer = ip->regularizer;
    }
    /* per step (BatchNormalization): T sets of the inner layer's saved buffers, the fixed
     * part (its batch statistics) counted per example too, so that nothing is fixed that
     * changes with T (a null time axis re-derives this layer at each batch's length) */
    l->fixed_floats = st->per_step ? 0 : d->fixed_floats;
    l->saved_floats = (int64_t)st->steps * (d->saved_floats + (st->per_step ? d->fixed_floats : 0));
    /* an inner layer still CPU-first makes this one so (graph.c refuses it on the GPU) */
    l->ops = ops->cpu_first ? &tfc_time_distributed_cpu_first_ops : &tfc_time_distributed_ops;
    return TFC_OK;
}

static const char *const *td_needs(const tfc_layer *l)
{
    const td_state *st = l->state;
    return st->in.ops->needs ? st->in.ops->needs(&st->in) : NULL;
}

/* Bytes of n floats, 64-byte aligned */
static size_t bytes_of(int64_t n) { return ((size_t)n * sizeof(float) + 63) & ~(size_t)63; }

/* Per step: the transposed input and its gradient, the transposed output or its gradient */
static size_t step_bytes(const tfc_layer *l)
{
    const td_state *st = l->state;
    if (!st->per_step) return 0;
    const int64_t rows = (int64_t)l->max_batch * st->steps;
    return 2 * bytes_of(rows * st->in_numel) + bytes_of(rows * st->out_numel);
}

static void td_plan(tfc_layer *l, tfc_backend *be)
{
    td_state *st = l->state;
    st->in.max_batch = l->max_batch * st->steps;
    st->in.workspace = 0;
    if (st->in.ops->plan) st->in.ops->plan(&st->in, be);
    l->workspace = step_bytes(l) + st->in.workspace;
}

/* Points the inner layer at this layer's parameters and at the saved buffers of step t
 * (per step) or of the whole batch */
static void bind_inner(tfc_layer *l, int t)
{
    td_state *st = l->state;
    tfc_layer *d = &st->in;
    const int64_t stride = d->fixed_floats + (int64_t)l->max_batch * d->saved_floats;
    d->saved = l->saved ? l->saved + t * stride : NULL;
    d->mask = NULL;
    d->rng_key = l->rng_key;
    for (int p = 0; p < d->nparams; p++) {
        d->params[p].data = l->params[p].data;
        d->params[p].grad = l->params[p].grad;
    }
}

/* The inner layer's exec over `batch` examples, its workspace past the per-step scratch */
static tfc_exec inner_exec(const tfc_layer *l, const tfc_exec *ex, int batch)
{
    tfc_exec sub = *ex;
    sub.batch = batch;
    sub.ws = (char *)ex->ws + step_bytes(l);
    sub.fresh = 0;
    sub.params_fresh = 0;
    sub.relu_x = NULL;
    sub.ids = NULL;
    sub.ids_table = NULL;
    return sub;
}

/* dst[t, b, :] (=, or += with acc) src[b, t, :] (to_steps), or the reverse, for f floats */
static void transpose(tfc_backend *be, int n, int steps, int64_t f, const float *src,
                      float *dst, int to_steps, int acc)
{
    for (int t = 0; t < steps; t++) {
        if (to_steps)
            be->ops->copy2d(be, n, (int)f, src + t * f, (int)(steps * f), dst + t * n * f,
                            (int)f, acc);
        else
            be->ops->copy2d(be, n, (int)f, src + t * n * f, (int)f, dst + t * f,
                            (int)(steps * f), acc);
    }
}

static void td_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    td_state *st = l->state;
    tfc_layer *d = &st->in;
    const int T = st->steps, n = ex->batch;
    if (!st->per_step || !ex->training) {
        bind_inner(l, 0);
        tfc_exec sub = inner_exec(l, ex, n * T);
        d->ops->forward(d, &sub, x, y);
        return;
    }
    const int64_t fi = st->in_numel, fo = st->out_numel;
    const int64_t rows = (int64_t)l->max_batch * T;
    float *xt = ex->ws, *yt = (float *)((char *)ex->ws + 2 * bytes_of(rows * fi));
    transpose(ex->be, n, T, fi, x[0], xt, 1, 0);
    tfc_exec sub = inner_exec(l, ex, n);
    for (int t = 0; t < T; t++) {
        bind_inner(l, t);
        const void *xi[1] = {xt + t * n * fi};
        d->ops->forward(d, &sub, xi, yt + t * n * fo);
    }
    transpose(ex->be, n, T, fo, yt, y, 0, 0);
}

static void td_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                        const float *dy, float *const *dx)
{
    td_state *st = l->state;
    tfc_layer *d = &st->in;
    const int T = st->steps, n = ex->batch;
    if (!st->per_step) {
        bind_inner(l, 0);
        tfc_exec sub = inner_exec(l, ex, n * T);
        d->ops->backward(d, &sub, x, y, dy, dx);
        return;
    }
    /* BatchNormalization in training: each step's batch, as forward ran it */
    const int64_t fi = st->in_numel, fo = st->out_numel;
    const int64_t rows = (int64_t)l->max_batch * T;
    float *xt = ex->ws, *dxt = (float *)((char *)ex->ws + bytes_of(rows * fi));
    float *dyt = (float *)((char *)ex->ws + 2 * bytes_of(rows * fi));
    transpose(ex->be, n, T, fi, x[0], xt, 1, 0);
    transpose(ex->be, n, T, fo, dy, dyt, 1, 0);
    if (dx[0]) ex->be->ops->zero(ex->be, dxt, (size_t)n * T * fi * sizeof(float));
    tfc_exec sub = inner_exec(l, ex, n);
    for (int t = 0; t < T; t++) {
        bind_inner(l, t);
        const void *xi[1] = {xt + t * n * fi};
        float *dxi[1] = {dx[0] ? dxt + t * n * fi : NULL};
        d->ops->backward(d, &sub, xi, NULL, dyt + t * n * fo, dxi);
    }
    if (dx[0]) transpose(ex->be, n, T, fi, dxt, dx[0], 0, 1);
}

const tfc_layer *tfc_time_distributed_inner(const tfc_layer *l)
{
    const td_state *st = l->state;
    return &st->in;
}

#define TD_OPS(sym, first)                                                                   \
    const tfc_layer_ops sym = {                                                              \
        .type = "TimeDistributed", .schema = td_fields, .args_size = sizeof(td_args),        \
        .min_inputs = 1, .max_inputs = 1, .keeps_mask = 1, .cpu_first = first,               \
        .needs = td_needs, .build = td_build, .plan = td_plan, .forward = td_forward,        \
        .backward = td_backward, .free_state = td_free,                                      \
    }
/* CPU-first itself until make test-gpu's train_time_distributed has run it on a GPU (then
 * 0: the wrapper runs where its inner layer runs) */
TD_OPS(tfc_time_distributed_ops, 1);
/* the same for an inner layer that is CPU-first (build switches to it) */
TD_OPS(tfc_time_distributed_cpu_first_ops, 1);
