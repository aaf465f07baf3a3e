/* ONNX export: walks the model's layers in order and writes each as ONNX nodes of the default
 * domain, with its weights as initializers in ONNX's layouts (onnx/onnx.proto, opset 14+).
 * Tensors are tracked with their layout: Keras's channels-last, or NCHW after a Transpose
 * where a convolution, pooling or BatchNormalization needs it; a layer that depends on the
 * element order (Flatten, Reshape, Dense, softmax, Concatenate, the row normalisations) gets
 * channels-last back. */
#include "api/onnx.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/adaptive_pool.h"
#include "core/fileio.h"
#include "core/protobuf.h"
#include "core/stft.h"
#include "layers/rnn.h"

#ifndef TFC_VERSION
#define TFC_VERSION "dev"
#endif

/* onnx.proto field numbers and enums used here. */
enum {
    T_FLOAT = 1, T_BOOL = 9, T_INT32 = 6, T_INT64 = 7,           /* TensorProto.DataType */
    A_FLOAT = 1, A_INT = 2, A_STRING = 3, A_INTS = 7,            /* AttributeProto.type */
    A_FLOATS = 6, A_STRINGS = 8,
};

/* A tensor of the graph: its name, per-example shape in Keras order, and whether the graph
 * holds it as NCHW (a rank-3 per-example (H, W, C) tensor transposed to (C, H, W)). */
typedef struct tref {
    char name[96];
    tfc_shape shape;
    int nchw;
} tref;

typedef struct exporter {
    tfc_model *m;
    int opset;
    tfc_pb graph;
    int counter;
    tref *out;             /* per layer */
    tref in[TFC_MODEL_MAX_INPUTS]; /* the model's inputs: "input", or each one's name */
    int mask_input;        /* the input whose ids != 0 make the sequence mask */
    char mask[96];         /* bool [N, T]: ids != 0 of that input, once made */
    char lens[96];         /* int32 [N]: unmasked steps per example */
    /* the float initializers written so far, so that a second of the same dims and bytes
     * (the weights of a layer called again, §1) reads the first instead */
    struct written {
        char name[96];
        uint64_t hash;
        int64_t dims[TFC_MAX_DIMS + 1];
        int ndim;
        size_t bytes;
        float *data;
    } *written;
    int nwritten, cap_written;
    tfc_error *err;
    tfc_status st;
} exporter;

static void fresh(exporter *x, char *name, const char *hint)
{
    snprintf(name, 96, "%s_%d", hint, x->counter++);
}

/* ---- nodes and initializers --------------------------------------------------------------- */

static void attr_int(tfc_pb *n, const char *name, int64_t v)
{
    tfc_pb a = {0};
    tfc_pb_string(&a, 1, name);
    tfc_pb_int(&a, 3, v);
    tfc_pb_int(&a, 20, A_INT);
    tfc_pb_message(n, 5, &a);
    tfc_pb_free(&a);
}

static void attr_float(tfc_pb *n, const char *name, float v)
{
    tfc_pb a = {0};
    tfc_pb_string(&a, 1, name);
    tfc_pb_float(&a, 2, v);
    tfc_pb_int(&a, 20, A_FLOAT);
    tfc_pb_message(n, 5, &a);
    tfc_pb_free(&a);
}

static void attr_string(tfc_pb *n, const char *name, const char *v)
{
    tfc_pb a = {0};
    tfc_pb_string(&a, 1, name);
    tfc_pb_string(&a, 4, v);
    tfc_pb_int(&a, 20, A_STRING);
    tfc_pb_message(n, 5, &a);
    tfc_pb_free(&a);
}

static void attr_ints(tfc_pb *n, const char *name, const int64_t *v, int k)
{
    tfc_pb a = {0};
    tfc_pb_string(&a, 1, name);
    for (int i = 0; i < k; i++) tfc_pb_int(&a, 8, v[i]);
    tfc_pb_int(&a, 20, A_INTS);
    tfc_pb_message(n, 5, &a);
    tfc_pb_free(&a);
}

static void attr_floats(tfc_pb *n, const char *name, const float *v, int k)
{
    tfc_pb a = {0};
    tfc_pb_string(&a, 1, name);
    for (int i = 0; i < k; i++) tfc_pb_float(&a, 7, v[i]);
    tfc_pb_int(&a, 20, A_FLOATS);
    tfc_pb_message(n, 5, &a);
    tfc_pb_free(&a);
}

static void attr_strings(tfc_pb *n, const char *name, const char *const *v, int k)
{
    tfc_pb a = {0};
    tfc_pb_string(&a, 1, name);
    for (int i = 0; i < k; i++) tfc_pb_string(&a, 9, v[i]);
    tfc_pb_int(&a, 20, A_STRINGS);
    tfc_pb_message(n, 5, &a);
    tfc_pb_free(&a);
}

/* A node: op_type, inputs (NULL-terminated; "" for an omitted optional one), one output,
 * and attributes already encoded in *attrs (may be NULL). */
static void node(exporter *x, const char *op, const char *const *ins, const char *out,
                 tfc_pb *attrs)
{
    tfc_pb n = {0};
    for (int i = 0; ins[i]; i++) tfc_pb_string(&n, 1, ins[i]);
    tfc_pb_string(&n, 2, out);
    char name[128];
    snprintf(name, sizeof name, "%s_%d", op, x->counter++);
    tfc_pb_string(&n, 3, name);
    tfc_pb_string(&n, 4, op);
    if (attrs) {
        tfc_pb_raw(&n, attrs->data, attrs->len);
        if (attrs->failed) n.failed = 1;
        tfc_pb_free(attrs);
    }
    tfc_pb_message(&x->graph, 1, &n);
    tfc_pb_free(&n);
}

/* One-input, one-output node into a fresh name, written to out (which may be in). */
static void unary(exporter *x, const char *op, const char *in, char *out, tfc_pb *attrs)
{
    char src[96];
    snprintf(src, sizeof src, "%s", in);
    fresh(x, out, op);
    node(x, op, (const char *[]){src, NULL}, out, attrs);
}

/* y = Op(a, b) into a fresh name written to out */
static void binary(exporter *x, const char *op, const char *a, const char *b, char *out)
{
    char in[2][96];
    snprintf(in[0], sizeof in[0], "%s", a);
    snprintf(in[1], sizeof in[1], "%s", b);
    fresh(x, out, op);
    node(x, op, (const char *[]){in[0], in[1], NULL}, out, NULL);
}

static void initializer(exporter *x, const char *name, int dtype, const int64_t *dims, int ndim,
                        const void *data, size_t bytes)
{
    tfc_pb t = {0};
    for (int i = 0; i < ndim; i++) tfc_pb_int(&t, 1, dims[i]);
    tfc_pb_int(&t, 2, dtype);
    tfc_pb_string(&t, 8, name);
    tfc_pb_bytes(&t, 9, data, bytes); /* raw_data: little-endian, as this host */
    tfc_pb_message(&x->graph, 5, &t);
    tfc_pb_free(&t);
}

/* A float initializer of dims into `name`: the one written before with the same dims and
 * bytes (a layer called again writes its weights once), else a new one. */
static void init_f32(exporter *x, char *name, const char *hint, const int64_t *dims, int ndim,
                     const float *data)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= dims[i];
    const size_t bytes = (size_t)n * 4;
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the bytes and the dims */
    const unsigned char *b = (const unsigned char *)data;
    for (size_t i = 0; i < bytes; i++) h = (h ^ b[i]) * 1099511628211ull;
    for (int i = 0; i < ndim; i++) h = (h ^ (uint64_t)dims[i]) * 1099511628211ull;
    for (int k = 0; k < x->nwritten; k++) {
        const struct written *w = &x->written[k];
        if (w->hash == h && w->ndim == ndim && w->bytes == bytes &&
            (!ndim || !memcmp(w->dims, dims, (size_t)ndim * sizeof *dims)) &&
            (!bytes || !memcmp(w->data, data, bytes))) {
            snprintf(name, 96, "%s", w->name);
            return;
        }
    }
    fresh(x, name, hint);
    initializer(x, name, T_FLOAT, dims, ndim, data, bytes);
    if (ndim > TFC_MAX_DIMS + 1) return; /* kept only where it fits */
    if (x->nwritten == x->cap_written) {
        int cap = x->cap_written ? 2 * x->cap_written : 64;
        struct written *g = realloc(x->written, (size_t)cap * sizeof *g);
        if (!g) return; /* a later copy is written again */
        x->written = g;
        x->cap_written = cap;
    }
    struct written *w = &x->written[x->nwritten];
    if (!(w->data = malloc(bytes ? bytes : 1))) return;
    if (bytes) memcpy(w->data, data, bytes);
    snprintf(w->name, sizeof w->name, "%s", name);
    w->hash = h;
    if (ndim) memcpy(w->dims, dims, (size_t)ndim * sizeof *dims); /* dims NULL for a scalar */
    w->ndim = ndim;
    w->bytes = bytes;
    x->nwritten++;
}

static void init_i64(exporter *x, char *name, const char *hint, const int64_t *v, int n)
{
    fresh(x, name, hint);
    int64_t dims[1] = {n};
    initializer(x, name, T_INT64, dims, 1, v, (size_t)n * 8);
}

/* ---- layer arguments and weights ---------------------------------------------------------- */

/* A layer argument by its schema name (the struct the schema filled). */
static const void *arg(const tfc_layer *l, const char *name)
{
    for (const tfc_field *f = l->ops->schema; f && f->name; f++) {
        int stored = f->type != TFC_F_FIXED && f->type != TFC_F_REGULARIZER &&
                     f->type != TFC_F_CONSTRAINT;
        if (!strcmp(f->name, name) && stored) return (const char *)l->args + f->offset;
    }
    return NULL;
}

/* An integer argument, or the one integer of a list argument (Conv1D's kernel_size); def
 * when the layer has no such argument or the list is empty. */
static int arg_int(const tfc_layer *l, const char *name, int def)
{
    for (const tfc_field *f = l->ops->schema; f && f->name; f++)
        if (!strcmp(f->name, name) && f->type == TFC_F_INT_LIST) {
            const tfc_int_list *v = arg(l, name);
            return v->n ? v->v[0] : def;
        }
    const int *v = arg(l, name);
    return v ? *v : def;
}

/* A pair argument of a 2-D convolution (kernel_size, strides, dilation_rate) into v, or
 * the list of one of its 1-D twin as the pair of a 1 x steps image, {1, n}; {def, def} when
 * the layer has no such argument. */
static void arg_pair(const tfc_layer *l, const char *name, int def, int v[2])
{
    v[0] = v[1] = def;
    for (const tfc_field *f = l->ops->schema; f && f->name; f++)
        if (!strcmp(f->name, name) && f->type == TFC_F_INT_LIST) {
            v[0] = 1, v[1] = arg_int(l, name, def);
            return;
        }
    const int *p = arg(l, name);
    if (p) v[0] = p[0], v[1] = p[1];
}

/* A parameter's values (host, malloc'd), or NULL when the layer has none of that name. */
static float *param(exporter *x, const tfc_layer *l, const char *name, const tfc_param **out)
{
    for (int p = 0; p < l->nparams; p++)
        if (!strcmp(l->params[p].name, name)) {
            float *h = malloc((size_t)l->params[p].numel * 4 + 4);
            if (!h) {
                x->st = tfc_error_set(x->err, TFC_ERR_NOMEM, "out of memory");
                return NULL;
            }
            tfc_model_param_download(x->m, &l->params[p], h);
            if (out) *out = &l->params[p];
            return h;
        }
    return NULL;
}

/* Whether the layer has a parameter of that name. */
static int param_exists(const tfc_layer *l, const char *name)
{
    for (int p = 0; p < l->nparams; p++)
        if (!strcmp(l->params[p].name, name)) return 1;
    return 0;
}

static tfc_status unsupported(exporter *x, const tfc_layer *l, const char *why)
{
    x->st = tfc_error_set(x->err, TFC_ERR_USAGE, "layer '%s' (%s): %s", l->name, l->ops->type,
                          why);
    return x->st;
}

/* ---- layouts -------------------------------------------------------------------------- */

static tref to_layout(exporter *x, const tref *t, int nchw)
{
    if (t->nchw == nchw) return *t;
    tref r = *t;
    static const int64_t to_nchw[] = {0, 3, 1, 2}, to_nhwc[] = {0, 2, 3, 1};
    tfc_pb a = {0};
    attr_ints(&a, "perm", nchw ? to_nchw : to_nhwc, 4);
    unary(x, "Transpose", t->name, r.name, &a);
    r.nchw = nchw;
    return r;
}

static tref nhwc(exporter *x, const tref *t) { return to_layout(x, t, 0); }
static tref nchw(exporter *x, const tref *t) { return t->shape.ndim == 3 ? to_layout(x, t, 1) : *t; }

/* Reshape to [batch, dims...] (Keras order) with an int64 shape initializer. */
static tref reshape(exporter *x, const tref *t, const tfc_shape *to)
{
    int64_t dims[TFC_MAX_DIMS + 1] = {0};
    for (int i = 0; i < to->ndim; i++) dims[i + 1] = to->dim[i];
    char shape[96];
    init_i64(x, shape, "shape", dims, to->ndim + 1);
    tref r = {.shape = *to};
    fresh(x, r.name, "Reshape");
    node(x, "Reshape", (const char *[]){t->name, shape, NULL}, r.name, NULL);
    return r;
}

/* ---- activations -------------------------------------------------------------------------- */

static tref activation(exporter *x, const tfc_layer *l, tfc_act act, const tref *in)
{
    tref r = *in;
    tfc_pb a = {0};
    char t1[96], t2[96], c[96];
    switch (act) {
    case TFC_ACT_LINEAR: return r;
    case TFC_ACT_RELU: unary(x, "Relu", in->name, r.name, NULL); return r;
    case TFC_ACT_SIGMOID: unary(x, "Sigmoid", in->name, r.name, NULL); return r;
    case TFC_ACT_TANH: unary(x, "Tanh", in->name, r.name, NULL); return r;
    case TFC_ACT_SOFTMAX:
        r = nhwc(x, in);
        attr_int(&a, "axis", -1);
        unary(x, "Softmax", r.name, r.name, &a);
        return r;
    case TFC_ACT_ELU: unary(x, "Elu", in->name, r.name, NULL); return r;
    case TFC_ACT_SELU: unary(x, "Selu", in->name, r.name, NULL); return r;
    case TFC_ACT_LEAKY_RELU:
        attr_float(&a, "alpha", 0.2f);
        unary(x, "LeakyRelu", in->name, r.name, &a);
        return r;
    case TFC_ACT_SOFTPLUS: unary(x, "Softplus", in->name, r.name, NULL); return r;
    case TFC_ACT_SOFTSIGN: unary(x, "Softsign", in->name, r.name, NULL); return r;
    case TFC_ACT_EXPONENTIAL: unary(x, "Exp", in->name, r.name, NULL); return r;
    case TFC_ACT_HARD_SIGMOID: /* relu6(x + 3) / 6 = clip(x / 6 + 1/2, 0, 1) */
        attr_float(&a, "alpha", 1.0f / 6.0f);
        attr_float(&a, "beta", 0.5f);
        unary(x, "HardSigmoid", in->name, r.name, &a);
        return r;
    case TFC_ACT_SWISH: /* x sigmoid(x) */
        unary(x, "Sigmoid", in->name, t1, NULL);
        fresh(x, r.name, "Mul");
        node(x, "Mul", (const char *[]){in->name, t1, NULL}, r.name, NULL);
        return r;
    case TFC_ACT_GELU: { /* x (1 + erf(x / sqrt 2)) / 2, the exact form */
        float k = (float)M_SQRT1_2, half = 0.5f, one = 1.0f;
        init_f32(x, c, "rsqrt2", NULL, 0, &k);
        fresh(x, t1, "Mul");
        node(x, "Mul", (const char *[]){in->name, c, NULL}, t1, NULL);
        unary(x, "Erf", t1, t2, NULL);
        init_f32(x, c, "one", NULL, 0, &one);
        fresh(x, t1, "Add");
        node(x, "Add", (const char *[]){t2, c, NULL}, t1, NULL);
        fresh(x, t2, "Mul");
        node(x, "Mul", (const char *[]){in->name, t1, NULL}, t2, NULL);
        init_f32(x, c, "half", NULL, 0, &half);
        fresh(x, r.name, "Mul");
        node(x, "Mul", (const char *[]){t2, c, NULL}, r.name, NULL);
        return r;
    }
    case TFC_ACT_RELU6: { /* Clip(x, 0, 6) */
        float lo = 0.0f, hi = 6.0f;
        init_f32(x, t1, "zero", NULL, 0, &lo);
        init_f32(x, t2, "six", NULL, 0, &hi);
        fresh(x, r.name, "Clip");
        node(x, "Clip", (const char *[]){in->name, t1, t2, NULL}, r.name, NULL);
        return r;
    }
    case TFC_ACT_HARD_SILU: unary(x, "HardSwish", in->name, r.name, NULL); return r;
    case TFC_ACT_MISH: /* x tanh(softplus(x)) */
        unary(x, "Softplus", in->name, t1, NULL);
        unary(x, "Tanh", t1, t2, NULL);
        fresh(x, r.name, "Mul");
        node(x, "Mul", (const char *[]){in->name, t2, NULL}, r.name, NULL);
        return r;
    default: break;
    }
    unsupported(x, l, "this activation has no ONNX form here");
    return r;
}

/* Keras's parametrised activations (tfc_pact_desc), in keras.activations' order of
 * operations: Elu, LeakyRelu, or relu's pos (ThresholdedRelu with a threshold, else Relu),
 * clipped to max_value, minus negative_slope Relu(threshold - x). Element-wise, so in either
 * layout. */
static tref pact(exporter *x, const tfc_pact_desc *d, const tref *in)
{
    tref r = *in;
    tfc_pb a = {0};
    char pos[96], t1[96], t2[96], c[96];
    if (d->elu || (d->slope != 0 && d->threshold == 0 && isinf(d->max_value))) {
        attr_float(&a, "alpha", d->slope);
        unary(x, d->elu ? "Elu" : "LeakyRelu", in->name, r.name, &a);
        return r;
    }
    if (d->threshold != 0) {
        attr_float(&a, "alpha", d->threshold);
        unary(x, "ThresholdedRelu", in->name, pos, &a);
    } else {
        unary(x, "Relu", in->name, pos, NULL);
    }
    if (!isinf(d->max_value)) {
        float lo = 0.0f;
        init_f32(x, t1, "zero", NULL, 0, &lo);
        init_f32(x, t2, "max_value", NULL, 0, &d->max_value);
        fresh(x, c, "Clip");
        node(x, "Clip", (const char *[]){pos, t1, t2, NULL}, c, NULL);
        snprintf(pos, sizeof pos, "%s", c);
    }
    if (d->slope == 0) {
        snprintf(r.name, sizeof r.name, "%s", pos);
        return r;
    }
    init_f32(x, c, "threshold", NULL, 0, &d->threshold);
    fresh(x, t1, "Sub");
    node(x, "Sub", (const char *[]){c, in->name, NULL}, t1, NULL);
    unary(x, "Relu", t1, t2, NULL);
    init_f32(x, c, "negative_slope", NULL, 0, &d->slope);
    fresh(x, t1, "Mul");
    node(x, "Mul", (const char *[]){t2, c, NULL}, t1, NULL);
    fresh(x, r.name, "Sub");
    node(x, "Sub", (const char *[]){pos, t1, NULL}, r.name, NULL);
    return r;
}

/* ONNX's `op` of the input and l's weight `name`, broadcast against the channels-last input
 * (the batch axis before it): PReLU's PRelu with Keras's alpha as the slope, LayerScale's
 * Mul by gamma (Keras's x * gamma). */
static tref with_weight(exporter *x, const tfc_layer *l, const tref *in, const char *name,
                        const char *op)
{
    tref r = nhwc(x, in);
    const tfc_param *p = NULL;
    float *w = param(x, l, name, &p);
    if (!w) return r;
    char wn[96], src[96];
    init_f32(x, wn, name, p->shape.dim, p->shape.ndim, w);
    free(w);
    snprintf(src, sizeof src, "%s", r.name);
    fresh(x, r.name, op);
    node(x, op, (const char *[]){src, wn, NULL}, r.name, NULL);
    return r;
}

/* Rescaling: Mul by scale, then Add offset (none when 0), as Keras rounds it. */
static tref rescaling(exporter *x, const tfc_layer *l, const tref *in)
{
    tref r = *in;
    const double *scale = arg(l, "scale"), *offset = arg(l, "offset");
    float s = (float)*scale, o = (float)*offset;
    char c[96], t[96];
    init_f32(x, c, "scale", NULL, 0, &s);
    fresh(x, t, "Mul");
    node(x, "Mul", (const char *[]){in->name, c, NULL}, t, NULL);
    snprintf(r.name, sizeof r.name, "%s", t);
    if (o != 0) {
        init_f32(x, c, "offset", NULL, 0, &o);
        fresh(x, r.name, "Add");
        node(x, "Add", (const char *[]){t, c, NULL}, r.name, NULL);
    }
    return r;
}

/* Normalization: Sub mean, then Div by sqrt(variance + 1e-14) (normalization.c), or invert:
 * Mul by it, then Add mean; the statistics as initializers of the kept (trailing) axes,
 * which broadcast over the batch and the others. */
static tref normalization(exporter *x, const tfc_layer *l, const tref *in)
{
    tref r = nhwc(x, in);
    const tfc_param *p = NULL;
    float *mean = param(x, l, "mean", &p), *var = mean ? param(x, l, "variance", NULL) : NULL;
    if (!var) {
        free(mean);
        return r;
    }
    const tfc_shape *s = &l->in_shape[0];
    int first = s->ndim;
    for (int64_t kept = 1; kept < p->numel && first > 0;) kept *= s->dim[--first];
    for (int64_t k = 0; k < p->numel; k++) var[k] = (float)sqrt((double)var[k] + 1e-14);
    const int *inv = arg(l, "invert");
    char m[96], d[96], src[96], t[96];
    init_f32(x, m, "mean", s->dim + first, s->ndim - first, mean);
    init_f32(x, d, "std", s->dim + first, s->ndim - first, var);
    free(mean), free(var);
    snprintf(src, sizeof src, "%s", r.name);
    fresh(x, t, *inv ? "Mul" : "Sub");
    node(x, *inv ? "Mul" : "Sub", (const char *[]){src, *inv ? d : m, NULL}, t, NULL);
    fresh(x, r.name, *inv ? "Add" : "Div");
    node(x, *inv ? "Add" : "Div", (const char *[]){t, *inv ? m : d, NULL}, r.name, NULL);
    return r;
}

/* Cast to a TensorProto dtype into a fresh name */
static void cast_to(exporter *x, const char *in, int dtype, char *out)
{
    tfc_pb a = {0};
    attr_int(&a, "to", dtype);
    unary(x, "Cast", in, out, &a);
}

/* ReduceSum or ReduceMax over one axis, not kept (ReduceSum's axes an input since opset 13,
 * ReduceMax's an attribute before opset 18) */
static void reduce_axis(exporter *x, const char *op, const char *in, int64_t axis, char *out)
{
    char src[96], ax[96];
    snprintf(src, sizeof src, "%s", in);
    tfc_pb a = {0};
    attr_int(&a, "keepdims", 0);
    if (!strcmp(op, "ReduceSum") || x->opset >= 18) {
        init_i64(x, ax, "axes", &axis, 1);
        fresh(x, out, op);
        node(x, op, (const char *[]){src, ax, NULL}, out, &a);
    } else {
        attr_ints(&a, "axes", &axis, 1);
        fresh(x, out, op);
        node(x, op, (const char *[]){src, NULL}, out, &a);
    }
}

/* An int64 scalar initializer */
static void init_i64_scalar(exporter *x, char *name, const char *hint, int64_t v)
{
    fresh(x, name, hint);
    initializer(x, name, T_INT64, NULL, 0, &v, 8);
}

/* The numeric preprocessing layers (layers/encoding.c; core/backend.h's tfc_encode_desc):
 * each value v to an int64 index k, then k encoded.
 *   INDEX (CategoryEncoding): k = Cast(v) (a float truncated toward zero, as Keras casts);
 *   BUCKET (Discretization): k = ReduceSum(v >= boundaries) over the boundaries;
 *   LOOKUP (IntegerLookup): k = the index of the key equal to v (Equal against the keys,
 *     the matches' indices summed), else oov + Mod(v, num_oov_indices) (fmod 0: floormod);
 *   INVERT (IntegerLookup's invert): k = Gather(values, v) for v in [0, n), else oov_token;
 * then int: k as int32 (float for invert's values); one_hot: Equal(k, 0 .. depth - 1) as
 * float, an index outside marking nothing (Keras's JAX backend; the staged input is checked
 * anyway), reshaped as the layer's output (a last axis of 1 replaced); multi_hot and count:
 * that one-hot's ReduceMax or ReduceSum over the values. Hashing's hash has no form. */
static tref encode(exporter *x, const tfc_layer *l, const tref *in)
{
    const tfc_encode_desc *d = tfc_layer_encode_desc(l);
    tref r = nhwc(x, in);
    if (!d || d->map == TFC_ENCODE_HASH) {
        unsupported(x, l, "its hash of each value's decimal digits (FarmHash, SipHash) has no "
                          "ONNX form");
        return r;
    }
    float *table = d->map == TFC_ENCODE_INDEX ? NULL : param(x, l, "table", NULL);
    if (d->map != TFC_ENCODE_INDEX && !table) {
        if (!x->st) unsupported(x, l, "its table is missing");
        return r;
    }
    char src[96], vf[96], vi[96], k[96], ax[96], t1[96], t2[96], t3[96], c[96], c2[96];
    snprintf(src, sizeof src, "%s", r.name);
    const int64_t last = -1, n = d->n;
    if (d->map == TFC_ENCODE_BUCKET || d->map == TFC_ENCODE_LOOKUP || d->mode != TFC_ENCODE_INT)
        init_i64(x, ax, "axes", &last, 1); /* Unsqueeze's */
    /* the values as floats (compared with boundaries and keys) and as int64 (indices) */
    const int by_value = d->map == TFC_ENCODE_BUCKET || d->map == TFC_ENCODE_LOOKUP;
    snprintf(vf, sizeof vf, "%s", src);
    if (d->ints && by_value) cast_to(x, src, T_FLOAT, vf);
    if (d->map != TFC_ENCODE_BUCKET) cast_to(x, src, T_INT64, vi);
    int64_t *ints = NULL;
    if (d->map == TFC_ENCODE_LOOKUP || d->map == TFC_ENCODE_INVERT) {
        ints = malloc((size_t)n * sizeof *ints);
        if (!ints) {
            free(table);
            x->st = tfc_error_set(x->err, TFC_ERR_NOMEM, "out of memory");
            return r;
        }
        for (int64_t i = 0; i < n; i++) /* LOOKUP: the indices after the keys */
            ints[i] = (int64_t)table[d->map == TFC_ENCODE_LOOKUP ? n + i : i];
    }
    switch (d->map) {
    case TFC_ENCODE_BUCKET:
        binary(x, "Unsqueeze", vf, ax, t1);
        init_f32(x, c, "boundaries", &n, 1, table);
        binary(x, "GreaterOrEqual", t1, c, t2);
        cast_to(x, t2, T_INT64, t3);
        reduce_axis(x, "ReduceSum", t3, -1, k);
        break;
    case TFC_ENCODE_LOOKUP: {
        char eq[96], found[96], cnt[96], oov[96];
        binary(x, "Unsqueeze", vf, ax, t1);
        init_f32(x, c, "keys", &n, 1, table);
        binary(x, "Equal", t1, c, t2);
        cast_to(x, t2, T_INT64, eq);
        init_i64(x, c2, "indices", ints, (int)n);
        binary(x, "Mul", eq, c2, t3);
        reduce_axis(x, "ReduceSum", t3, -1, found);
        reduce_axis(x, "ReduceSum", eq, -1, cnt);
        init_i64_scalar(x, c, "zero", 0);
        binary(x, "Greater", cnt, c, t1);
        init_i64_scalar(x, c2, "num_oov", d->noov);
        binary(x, "Mod", vi, c2, t2);
        init_i64_scalar(x, c, "oov", d->oov);
        binary(x, "Add", t2, c, oov);
        fresh(x, k, "Where");
        node(x, "Where", (const char *[]){t1, found, oov, NULL}, k, NULL);
        break;
    }
    case TFC_ENCODE_INVERT: {
        char valid[96], at[96];
        init_i64_scalar(x, c, "zero", 0);
        binary(x, "GreaterOrEqual", vi, c, t1);
        init_i64_scalar(x, c2, "size", n);
        binary(x, "Less", vi, c2, t2);
        binary(x, "And", t1, t2, valid);
        fresh(x, at, "Where");
        node(x, "Where", (const char *[]){valid, vi, c, NULL}, at, NULL);
        init_i64(x, c2, "values", ints, (int)n);
        tfc_pb a = {0};
        attr_int(&a, "axis", 0);
        fresh(x, t3, "Gather");
        node(x, "Gather", (const char *[]){c2, at, NULL}, t3, &a);
        init_i64_scalar(x, c, "oov_token", d->oov);
        fresh(x, k, "Where");
        node(x, "Where", (const char *[]){valid, t3, c, NULL}, k, NULL);
        break;
    }
    default: /* INDEX */
        snprintf(k, sizeof k, "%s", vi);
    }
    free(table);
    free(ints);
    if (d->mode == TFC_ENCODE_INT) {
        cast_to(x, k, d->out_ints ? T_INT32 : T_FLOAT, r.name);
        r.shape = l->out_shape;
        return r;
    }
    int64_t *range = malloc((size_t)d->depth * sizeof *range);
    if (!range) {
        x->st = tfc_error_set(x->err, TFC_ERR_NOMEM, "out of memory");
        return r;
    }
    for (int i = 0; i < d->depth; i++) range[i] = i;
    binary(x, "Unsqueeze", k, ax, t1);
    init_i64(x, c, "tokens", range, d->depth);
    free(range);
    binary(x, "Equal", t1, c, t2);
    tref hot = {.shape = l->out_shape};
    cast_to(x, t2, T_FLOAT, hot.name);
    if (d->mode == TFC_ENCODE_ONE_HOT) return reshape(x, &hot, &l->out_shape);
    /* multi_hot, count: over the example's values, axis 1 of [N, values, depth] */
    reduce_axis(x, d->mode == TFC_ENCODE_COUNT ? "ReduceSum" : "ReduceMax", hot.name, 1,
                r.name);
    r.shape = l->out_shape;
    return r;
}

/* A float32 scalar initializer */
static void init_f32_scalar(exporter *x, char *name, const char *hint, float v)
{
    init_f32(x, name, hint, NULL, 0, &v);
}

/* Axis 1's channels [lo, hi) of in */
static void slice_channels(exporter *x, const char *in, int64_t lo, int64_t hi, char *out)
{
    char src[96], a[96], b[96], c[96];
    const int64_t one = 1;
    snprintf(src, sizeof src, "%s", in);
    init_i64(x, a, "starts", &lo, 1);
    init_i64(x, b, "ends", &hi, 1);
    init_i64(x, c, "axes", &one, 1);
    fresh(x, out, "Slice");
    node(x, "Slice", (const char *[]){src, a, b, c, NULL}, out, NULL);
}

/* Transpose by perm (k axes) into a fresh name */
static void transpose(exporter *x, const char *in, const int64_t *perm, int k, char *out)
{
    tfc_pb a = {0};
    attr_ints(&a, "perm", perm, k);
    unary(x, "Transpose", in, out, &a);
}

/* Reshape to the dims given (-1: the rest) into a fresh name */
static void reshape_to(exporter *x, const char *in, const int64_t *dims, int k, char *out)
{
    char shape[96];
    init_i64(x, shape, "shape", dims, k);
    binary(x, "Reshape", in, shape, out);
}

/* atan2(y, x) from ONNX's Atan (which has no atan2): atan(y / x), plus pi (y >= 0) or minus
 * pi (y < 0) where x < 0, and 0 where both are 0 (atan2f's, for +0) */
static void atan2_of(exporter *x, const char *y, const char *xv, char *out)
{
    char q[96], at[96], zero[96], pi[96], npi[96], xneg[96], yneg[96], shift[96], moved[96];
    char turned[96], yz[96], xz[96], both[96];
    binary(x, "Div", y, xv, q);
    unary(x, "Atan", q, at, NULL);
    init_f32_scalar(x, zero, "zero", 0.0f);
    init_f32_scalar(x, pi, "pi", (float)M_PI);
    init_f32_scalar(x, npi, "minus_pi", (float)-M_PI);
    binary(x, "Less", xv, zero, xneg);
    binary(x, "Less", y, zero, yneg);
    fresh(x, shift, "Where");
    node(x, "Where", (const char *[]){yneg, npi, pi, NULL}, shift, NULL);
    binary(x, "Add", at, shift, moved);
    fresh(x, turned, "Where");
    node(x, "Where", (const char *[]){xneg, moved, at, NULL}, turned, NULL);
    binary(x, "Equal", y, zero, yz);
    binary(x, "Equal", xv, zero, xz);
    binary(x, "And", yz, xz, both);
    fresh(x, out, "Where");
    node(x, "Where", (const char *[]){both, zero, turned, NULL}, out, NULL);
}

/* STFTSpectrogram and MelSpectrogram (layers/spectrogram.c, core/stft.h): every channel's
 * signal a row [N c, 1, t], padded (zeros for same; MelSpectrogram's center mirrored by Pad's
 * reflect mode), framed and transformed by one Conv of stride step over the DFT kernels (the
 * real bins, then the imaginary ones, as output channels), then the mode's values; laid out
 * as the layer's output (channels last or first, expand_dims). MelSpectrogram: |X|^mag_exp
 * (Pow of the magnitude), MatMul by the transposed mel matrix and, in decibels, 10 log10 of
 * it clamped at min_power less ref_db, raised to the batch's maximum (ReduceMax over every
 * axis) less top_db. */
static tref spectrogram(exporter *x, const tfc_layer *l, const tref *in)
{
    tfc_stft_desc d;
    tfc_layer_stft_desc(l, 1, &d);
    tref r = nhwc(x, in);
    const int mel = d.mode == TFC_STFT_MEL;
    float *re_k = param(x, l, mel ? "stft_real" : "real_kernel", NULL);
    float *im_k = param(x, l, mel ? "stft_imag" : "imag_kernel", NULL);
    float *mel_h = mel ? param(x, l, "mel_matrix", NULL) : NULL;
    const int64_t bins = d.bins, K = (re_k ? bins : 0) + (im_k ? bins : 0);
    float *w = K && !x->st ? malloc((size_t)(K * d.frame) * sizeof *w) : NULL;
    if (!w || (mel && !mel_h)) {
        free(re_k), free(im_k), free(mel_h), free(w);
        if (!x->st) x->st = tfc_error_set(x->err, TFC_ERR_NOMEM, "out of memory");
        return r;
    }
    /* W [K, 1, frame]: kernel [frame, bins] (STFT's [frame, 1, bins]) transposed */
    for (int64_t k = 0; k < K; k++) {
        const float *src = k < bins && re_k ? re_k : im_k;
        const int64_t f = k < bins && re_k ? k : k - (re_k ? bins : 0);
        for (int u = 0; u < d.frame; u++) w[k * d.frame + u] = src[(int64_t)u * bins + f];
    }
    free(re_k), free(im_k);
    char src[96], t1[96], sig[96], c1[96], conv[96], re[96], im[96], p[96], v[96];
    snprintf(src, sizeof src, "%s", r.name);
    /* [N c, 1, t] */
    if (!d.channels_first) transpose(x, src, (const int64_t[]){0, 2, 1}, 3, t1);
    else snprintf(t1, sizeof t1, "%s", src);
    reshape_to(x, t1, (const int64_t[]){-1, 1, d.t}, 3, sig);
    const int64_t before = d.pad_left;
    const int64_t after = d.reflect ? d.pad_left : tfc_stft_padded(&d) - d.t - d.pad_left;
    if (before > 0 || after > 0) {
        const int64_t pads[6] = {0, 0, before, 0, 0, after > 0 ? after : 0};
        tfc_pb a = {0};
        if (d.reflect) attr_string(&a, "mode", "reflect");
        init_i64(x, c1, "pads", pads, 6);
        snprintf(t1, sizeof t1, "%s", sig);
        fresh(x, sig, "Pad");
        node(x, "Pad", (const char *[]){t1, c1, NULL}, sig, &a);
    }
    init_f32(x, c1, "dft", (const int64_t[]){K, 1, d.frame}, 3, w);
    free(w);
    tfc_pb a = {0};
    attr_ints(&a, "strides", (const int64_t[]){d.step}, 1);
    fresh(x, conv, "Conv");
    node(x, "Conv", (const char *[]){sig, c1, NULL}, conv, &a);
    /* the values [N c, F, frames] */
    if (K == 2 * bins && d.mode != TFC_STFT_STFT) {
        slice_channels(x, conv, 0, bins, re);
        slice_channels(x, conv, bins, 2 * bins, im);
    }
    if (d.mode == TFC_STFT_REAL || d.mode == TFC_STFT_IMAG || d.mode == TFC_STFT_STFT) {
        snprintf(v, sizeof v, "%s", conv);
    } else if (d.mode == TFC_STFT_ANGLE) {
        atan2_of(x, im, re, v);
    } else {
        char r2[96], i2[96];
        binary(x, "Mul", re, re, r2);
        binary(x, "Mul", im, im, i2);
        binary(x, "Add", r2, i2, p);
        char e[96], m1[96], s1[96];
        switch ((int)d.mode) {
        case TFC_STFT_PSD: { /* the bins between the first and last count twice */
            float *two = malloc((size_t)bins * sizeof *two);
            if (!two) {
                free(mel_h);
                x->st = tfc_error_set(x->err, TFC_ERR_NOMEM, "out of memory");
                return r;
            }
            for (int64_t k = 0; k < bins; k++) two[k] = k >= 1 && k <= bins - 2 ? 2.0f : 1.0f;
            init_f32(x, c1, "psd_scale", (const int64_t[]){bins, 1}, 2, two);
            free(two);
            binary(x, "Mul", p, c1, v);
            break;
        }
        case TFC_STFT_MAGNITUDE:
        case TFC_STFT_LOG:
            init_f32_scalar(x, e, "epsilon", TFC_STFT_EPSILON);
            binary(x, "Max", p, e, m1);
            unary(x, "Sqrt", m1, s1, NULL);
            if (d.mode == TFC_STFT_MAGNITUDE) {
                snprintf(v, sizeof v, "%s", s1);
            } else {
                binary(x, "Max", s1, e, m1);
                unary(x, "Log", m1, v, NULL);
            }
            break;
        default: { /* MEL */
            unary(x, "Sqrt", p, s1, NULL);
            init_f32_scalar(x, e, "mag_exp", d.mag_exp);
            binary(x, "Pow", s1, e, m1);
            float *mt = malloc((size_t)(bins * d.mels) * sizeof *mt);
            if (!mt) {
                free(mel_h);
                x->st = tfc_error_set(x->err, TFC_ERR_NOMEM, "out of memory");
                return r;
            }
            for (int64_t f = 0; f < bins; f++)
                for (int m = 0; m < d.mels; m++) mt[m * bins + f] = mel_h[f * d.mels + m];
            init_f32(x, c1, "mel", (const int64_t[]){d.mels, bins}, 2, mt);
            free(mt);
            binary(x, "MatMul", c1, m1, v); /* [N, mels, frames] */
            if (d.db) {
                char lg[96], db[96], mx[96], fl[96], k10[96], ref[96], top[96];
                init_f32_scalar(x, e, "min_power", d.min_power);
                binary(x, "Max", v, e, m1);
                unary(x, "Log", m1, lg, NULL);
                init_f32_scalar(x, k10, "ten_over_ln10", (float)(10.0 / M_LN10));
                binary(x, "Mul", lg, k10, s1);
                init_f32_scalar(x, ref, "ref_db", d.ref_db);
                binary(x, "Sub", s1, ref, db);
                tfc_pb ra = {0};
                attr_int(&ra, "keepdims", 0);
                unary(x, "ReduceMax", db, mx, &ra); /* every axis: the batch's maximum */
                init_f32_scalar(x, top, "top_db", d.top_db);
                binary(x, "Sub", mx, top, fl);
                binary(x, "Max", db, fl, v);
            }
        }
        }
    }
    free(mel_h);
    /* the layer's layout */
    const int64_t c = d.c, F = d.mode == TFC_STFT_STFT ? 2 * bins : bins, T = d.frames;
    const int expand = l->out_shape.ndim == 3;
    if (mel) {
        snprintf(r.name, sizeof r.name, "%s", v);
    } else {
        char v4[96], t4[96];
        reshape_to(x, v, (const int64_t[]){-1, c, F, T}, 4, v4);
        if (d.channels_first && !expand) {
            reshape_to(x, v4, (const int64_t[]){-1, c * F, T}, 3, r.name);
        } else if (d.channels_first) {
            transpose(x, v4, (const int64_t[]){0, 1, 3, 2}, 4, r.name);
        } else if (!expand) {
            transpose(x, v4, (const int64_t[]){0, 3, 1, 2}, 4, t4);
            reshape_to(x, t4, (const int64_t[]){-1, T, c * F}, 3, r.name);
        } else {
            transpose(x, v4, (const int64_t[]){0, 3, 2, 1}, 4, r.name);
        }
    }
    r.shape = l->out_shape;
    r.nchw = 0;
    return r;
}

/* ---- layers ------------------------------------------------------------------------------- */

/* TensorFlow's SAME/VALID padding of one axis as ONNX's pads before and after it: the odd
 * extra row or column goes after, as TensorFlow puts it (stride 2 on an even size pads only
 * after). */
static void tf_axis_pads(int size, int k, int s, int dil, int same, int64_t *before,
                         int64_t *after)
{
    int out, b;
    tfc_conv_axis(size, k, s, dil, same, &out, &b);
    int total = (out - 1) * s + (k - 1) * dil + 1 - size;
    if (!same || total < 0) total = 0;
    *before = b;
    *after = total - b;
}

/* Both spatial axes as ONNX pads [top, left, bottom, right]. */
static void tf_pads(const tfc_shape *in, const int *k, const int *s, const int *d, int same,
                    int64_t pads[4])
{
    for (int ax = 0; ax < 2; ax++)
        tf_axis_pads((int)in->dim[ax], k[ax], s[ax], d ? d[ax] : 1, same, &pads[ax],
                     &pads[ax + 2]);
}

/* An ONNX Conv on NCHW `xin` into `out` (named here): l's kernel `kname`, Keras's
 * (KH, KW, Cin / groups, Cout) as ONNX's (Cout, Cin / groups, KH, KW) with `group` = groups,
 * or with `depthwise` (KH, KW, C, M) as (C M, 1, KH, KW) in C groups, each group one input
 * channel and M outputs (a 1-D layer's kernel (KW, ...) as KH = 1); the bias `bname` (NULL or
 * absent: none). */
static void conv_node(exporter *x, const tfc_layer *l, const char *xin, const char *kname,
                      const char *bname, int depthwise, int groups, const int s[2],
                      const int d[2], const int64_t pads[4], char *out)
{
    const tfc_param *kp;
    float *kern = param(x, l, kname, &kp), *bias = bname ? param(x, l, bname, NULL) : NULL;
    if (!kern) {
        free(bias);
        return;
    }
    const int r = 4 - kp->shape.ndim; /* the axes a 1-D kernel lacks */
    int64_t KH = r ? 1 : kp->shape.dim[0], KW = kp->shape.dim[1 - r], CI = kp->shape.dim[2 - r],
            CO = kp->shape.dim[3 - r], group = groups;
    if (depthwise) group = CI, CO *= CI, CI = 1;
    float *w = malloc((size_t)kp->numel * 4);
    for (int64_t a = 0; w && a < KH; a++)
        for (int64_t b = 0; b < KW; b++)
            for (int64_t i = 0; i < CI; i++)
                for (int64_t o = 0; o < CO; o++)
                    w[((o * CI + i) * KH + a) * KW + b] = kern[((a * KW + b) * CI + i) * CO + o];
    char wn[96], bn[96] = "";
    int64_t wd[4] = {CO, CI, KH, KW};
    if (w) init_f32(x, wn, "W", wd, 4, w);
    if (bias) init_f32(x, bn, "B", &CO, 1, bias);
    free(w);
    free(kern);
    free(bias);
    if (!w) {
        x->st = tfc_error_set(x->err, TFC_ERR_NOMEM, "out of memory");
        return;
    }
    tfc_pb a = {0};
    int64_t ks[2] = {KH, KW}, st[2] = {s[0], s[1]}, dl[2] = {d[0], d[1]};
    attr_ints(&a, "kernel_shape", ks, 2);
    attr_ints(&a, "strides", st, 2);
    attr_ints(&a, "dilations", dl, 2);
    attr_ints(&a, "pads", pads, 4);
    if (group > 1) attr_int(&a, "group", group);
    fresh(x, out, "Conv");
    node(x, "Conv", (const char *[]){xin, wn, bn[0] ? bn : NULL, NULL}, out, &a);
}

/* Conv2D, or DepthwiseConv2D as a Conv of `group` = its input channels. */
static tref conv2d(exporter *x, const tfc_layer *l, const tref *in, int depthwise)
{
    int k[2], s[2], d[2];
    arg_pair(l, "kernel_size", 1, k), arg_pair(l, "strides", 1, s);
    arg_pair(l, "dilation_rate", 1, d);
    int same = arg_int(l, "padding", TFC_PADDING_VALID) == TFC_PADDING_SAME;
    tref xin = nchw(x, in), r = {.shape = l->out_shape, .nchw = 1};
    int64_t pads[4];
    tf_pads(&in->shape, k, s, d, same, pads);
    const int groups = depthwise ? 1 : arg_int(l, "groups", 1);
    conv_node(x, l, xin.name, "kernel", "bias", depthwise, groups, s, d, pads, r.name);
    return r;
}

/* SeparableConv2D: its depthwise step as a grouped Conv (no bias), then a 1x1 Conv with the
 * bias. */
static tref separable(exporter *x, const tfc_layer *l, const tref *in)
{
    int k[2], s[2], d[2];
    arg_pair(l, "kernel_size", 1, k), arg_pair(l, "strides", 1, s);
    arg_pair(l, "dilation_rate", 1, d);
    int same = arg_int(l, "padding", TFC_PADDING_VALID) == TFC_PADDING_SAME;
    const int one[2] = {1, 1};
    int64_t pads[4], none[4] = {0};
    tref xin = nchw(x, in), r = {.shape = l->out_shape, .nchw = 1};
    char z[96] = "";
    tf_pads(&in->shape, k, s, d, same, pads);
    conv_node(x, l, xin.name, "depthwise_kernel", NULL, 1, 1, s, d, pads, z);
    if (z[0]) conv_node(x, l, z, "pointwise_kernel", "bias", 0, 1, one, one, none, r.name);
    return r;
}

static tref pool(exporter *x, const tfc_layer *l, const tref *in, int max)
{
    const int *ps = arg(l, "pool_size"), *sa = arg(l, "strides");
    int s[2] = {sa[0] ? sa[0] : ps[0], sa[1] ? sa[1] : ps[1]};
    int same = arg_int(l, "padding", TFC_PADDING_VALID) == TFC_PADDING_SAME;
    tref xin = nchw(x, in), r = {.shape = l->out_shape, .nchw = 1};
    tfc_pb a = {0};
    int64_t ks[2] = {ps[0], ps[1]}, st[2] = {s[0], s[1]}, pads[4];
    tf_pads(&in->shape, ps, s, NULL, same, pads);
    attr_ints(&a, "kernel_shape", ks, 2);
    attr_ints(&a, "strides", st, 2);
    attr_ints(&a, "pads", pads, 4);
    /* TensorFlow's SAME average leaves the padding out of the count */
    if (!max) attr_int(&a, "count_include_pad", 0);
    unary(x, max ? "MaxPool" : "AveragePool", xin.name, r.name, &a);
    return r;
}

/* Conv2DTranspose as ConvTranspose on NCHW: Keras's kernel (KH, KW, F, C) is ONNX's
 * (C, F, KH, KW); the pads are those of the layer's convolution D, and rows past the last a
 * kernel tap reaches (a kernel smaller than the stride) are output_padding. */
static tref conv_transpose(exporter *x, const tfc_layer *l, const tref *in)
{
    const tfc_conv_desc d = tfc_layer_transposed_conv(l);
    const tfc_param *kp;
    float *kern = param(x, l, "kernel", &kp), *bias = param(x, l, "bias", NULL);
    tref xin = nchw(x, in), r = {.shape = l->out_shape, .nchw = 1};
    float *w = kern ? malloc((size_t)kp->numel * 4) : NULL;
    if (!w) {
        free(kern), free(bias);
        if (kern) x->st = tfc_error_set(x->err, TFC_ERR_NOMEM, "out of memory");
        return r;
    }
    const int64_t F = d.c, C = d.f;
    for (int64_t a = 0; a < d.kh; a++)
        for (int64_t b = 0; b < d.kw; b++)
            for (int64_t f = 0; f < F; f++)
                for (int64_t c = 0; c < C; c++)
                    w[((c * F + f) * d.kh + a) * d.kw + b] = kern[((a * d.kw + b) * F + f) * C + c];
    char wn[96], bn[96] = "";
    const int64_t wd[4] = {C, F, d.kh, d.kw};
    init_f32(x, wn, "W", wd, 4, w);
    if (bias) init_f32(x, bn, "B", &F, 1, bias);
    free(w), free(kern), free(bias);
    /* ONNX's size: s (n - 1) + output_padding + k - pad_begin - pad_end */
    const int64_t end[2] = {(int64_t)(d.oh - 1) * d.sh + (d.kh - 1) * d.dh + 1 - d.pad_top - d.h,
                            (int64_t)(d.ow - 1) * d.sw + (d.kw - 1) * d.dw + 1 - d.pad_left - d.w};
    const int64_t pads[4] = {d.pad_top, d.pad_left, end[0] > 0 ? end[0] : 0,
                             end[1] > 0 ? end[1] : 0};
    const int64_t extra[2] = {end[0] < 0 ? -end[0] : 0, end[1] < 0 ? -end[1] : 0};
    const int64_t ks[2] = {d.kh, d.kw}, st[2] = {d.sh, d.sw}, dl[2] = {d.dh, d.dw};
    tfc_pb a = {0};
    attr_ints(&a, "kernel_shape", ks, 2);
    attr_ints(&a, "strides", st, 2);
    attr_ints(&a, "dilations", dl, 2);
    attr_ints(&a, "pads", pads, 4);
    attr_ints(&a, "output_padding", extra, 2);
    fresh(x, r.name, "ConvTranspose");
    node(x, "ConvTranspose", (const char *[]){xin.name, wn, bn[0] ? bn : NULL, NULL}, r.name, &a);
    return r;
}

/* Conv1DTranspose, SeparableConv1D and DepthwiseConv1D as their 2-D twins' nodes over the
 * (steps, c) sequence reshaped to a (1, steps, c) image, reshaped back after. */
static tref conv1d_as_image(exporter *x, const tfc_layer *l, const tref *in)
{
    const tfc_shape *o = &l->out_shape;
    tfc_shape img = tfc_shape_make(3, (int64_t[]){1, in->shape.dim[0], in->shape.dim[1]});
    tref t = reshape(x, in, &img), r;
    if (!strcmp(l->ops->type, "SeparableConv1D")) r = separable(x, l, &t);
    else if (!strcmp(l->ops->type, "DepthwiseConv1D")) r = conv2d(x, l, &t, 1);
    else r = conv_transpose(x, l, &t);
    r.shape = tfc_shape_make(3, (int64_t[]){1, o->dim[0], o->dim[1]});
    r = nhwc(x, &r);
    return reshape(x, &r, o);
}

/* UpSampling2D as Resize on NCHW: nearest reads cell floor(o / s) (asymmetric, floor);
 * bilinear takes half-pixel centres. */
static tref upsample(exporter *x, const tfc_layer *l, const tref *in)
{
    const int *size = arg(l, "size");
    const int bilinear = arg_int(l, "interpolation", 0) == 1;
    tref xin = nchw(x, in), r = {.shape = l->out_shape, .nchw = 1};
    const float scales[4] = {1, 1, (float)size[0], (float)size[1]};
    const int64_t four = 4;
    char sc[96];
    init_f32(x, sc, "scales", &four, 1, scales);
    tfc_pb a = {0};
    attr_string(&a, "mode", bilinear ? "linear" : "nearest");
    attr_string(&a, "coordinate_transformation_mode", bilinear ? "half_pixel" : "asymmetric");
    if (!bilinear) attr_string(&a, "nearest_mode", "floor");
    fresh(x, r.name, "Resize");
    node(x, "Resize", (const char *[]){xin.name, "", sc, NULL}, r.name, &a);
    return r;
}

/* Resizing, CenterCrop and RandomCrop (at inference) on NCHW: the view as Slice (a window)
 * or Pad of fill_value (a border), then, where the sizes differ, Resize to (height, width)
 * with half-pixel centres: linear (the edge cell alone outside the centres, as jax's
 * renormalised weights), or nearest rounding half up, which reads floor((o + 1/2) m / n) as
 * jax. The sizes are the input's Shape's first two with (height, width) (the batch is
 * dynamic). */
static tref crop_resize(exporter *x, const tfc_layer *l, const tref *in)
{
    const tfc_crop_resize_desc d = tfc_layer_crop_resize(l);
    tref t = nchw(x, in), r = {.shape = l->out_shape, .nchw = 1};
    char a[96], b[96], c[96], v[96];
    if (d.top < 0 || d.left < 0 || d.vh < d.h || d.vw < d.w) {
        const int64_t starts[2] = {-d.top, -d.left},
                      ends[2] = {(int64_t)d.vh - d.top, (int64_t)d.vw - d.left},
                      axes[2] = {2, 3};
        init_i64(x, a, "starts", starts, 2);
        init_i64(x, b, "ends", ends, 2);
        init_i64(x, c, "axes", axes, 2);
        fresh(x, v, "Slice");
        node(x, "Slice", (const char *[]){t.name, a, b, c, NULL}, v, NULL);
        snprintf(t.name, sizeof t.name, "%s", v);
    } else if (d.top > 0 || d.left > 0) {
        const int64_t pads[8] = {0, 0, d.top, d.left, 0, 0, (int64_t)d.vh - d.h - d.top,
                                 (int64_t)d.vw - d.w - d.left};
        init_i64(x, a, "pads", pads, 8);
        init_f32(x, b, "fill_value", NULL, 0, &d.fill_value);
        fresh(x, v, "Pad");
        node(x, "Pad", (const char *[]){t.name, a, b, NULL}, v, NULL);
        snprintf(t.name, sizeof t.name, "%s", v);
    }
    t.shape = l->out_shape;
    if (d.vh == d.oh && d.vw == d.ow) return t;
    char shape[96], nc[96], sizes[96];
    const int64_t zero = 0, two = 2, hw[2] = {d.oh, d.ow};
    unary(x, "Shape", t.name, shape, NULL);
    init_i64(x, a, "starts", &zero, 1);
    init_i64(x, b, "ends", &two, 1);
    fresh(x, nc, "Slice");
    node(x, "Slice", (const char *[]){shape, a, b, NULL}, nc, NULL);
    init_i64(x, c, "hw", hw, 2);
    tfc_pb at = {0};
    attr_int(&at, "axis", 0);
    fresh(x, sizes, "Concat");
    node(x, "Concat", (const char *[]){nc, c, NULL}, sizes, &at);
    tfc_pb ra = {0};
    attr_string(&ra, "mode", d.nearest ? "nearest" : "linear");
    attr_string(&ra, "coordinate_transformation_mode", "half_pixel");
    if (d.nearest) attr_string(&ra, "nearest_mode", "round_prefer_ceil");
    fresh(x, r.name, "Resize");
    node(x, "Resize", (const char *[]){t.name, "", "", sizes, NULL}, r.name, &ra);
    return r;
}

/* Multiply as Mul nodes in the layout of its first full input; a channel vector becomes
 * (C, 1, 1) there for NCHW, (1, ..., 1, C) otherwise, and broadcasts. */
static tref multiply(exporter *x, const tfc_layer *l)
{
    const tref *src[TFC_LAYER_MAX_INPUTS];
    int full = -1;
    for (int i = 0; i < l->ninputs; i++) {
        src[i] = l->inputs[i] < 0 ? &x->in[-1 - l->inputs[i]] : &x->out[l->inputs[i]];
        if (full < 0 && tfc_shape_equal(&l->in_shape[i], &l->out_shape)) full = i;
    }
    const int as_nchw = src[full]->nchw;
    tref acc = *src[full];
    for (int i = 0; i < l->ninputs; i++) {
        if (i == full) continue;
        tref t;
        if (tfc_shape_equal(&l->in_shape[i], &l->out_shape)) {
            t = to_layout(x, src[i], as_nchw);
        } else {
            tfc_shape v = l->out_shape;
            const int nd = v.ndim;
            const int64_t c = v.dim[nd - 1];
            for (int k = 0; k < nd; k++) v.dim[k] = 1;
            v.dim[as_nchw ? 0 : nd - 1] = c;
            t = reshape(x, src[i], &v);
        }
        tref r = {.shape = l->out_shape, .nchw = as_nchw};
        fresh(x, r.name, "Mul");
        node(x, "Mul", (const char *[]){acc.name, t.name, NULL}, r.name, NULL);
        acc = r;
    }
    return acc;
}

/* ZeroPadding2D as Pad (zeros), Cropping2D as Slice, on NCHW. */
static tref border(exporter *x, const tfc_layer *l, const tref *in, int pad)
{
    int s[4];
    tfc_layer_border(l, s);
    tref xin = nchw(x, in), r = {.shape = l->out_shape, .nchw = 1};
    char a[96], b[96], c[96];
    if (pad) {
        const int64_t pads[8] = {0, 0, s[0], s[2], 0, 0, s[1], s[3]};
        init_i64(x, a, "pads", pads, 8);
        fresh(x, r.name, "Pad");
        node(x, "Pad", (const char *[]){xin.name, a, NULL}, r.name, NULL);
        return r;
    }
    const int64_t starts[2] = {s[0], s[2]},
                  ends[2] = {in->shape.dim[0] - s[1], in->shape.dim[1] - s[3]}, axes[2] = {2, 3};
    init_i64(x, a, "starts", starts, 2);
    init_i64(x, b, "ends", ends, 2);
    init_i64(x, c, "axes", axes, 2);
    fresh(x, r.name, "Slice");
    node(x, "Slice", (const char *[]){xin.name, a, b, c, NULL}, r.name, NULL);
    return r;
}

/* ZeroPadding1D (Pad) and Cropping1D (Slice) on a [N, T, C] sequence, along T */
static tref border1d(exporter *x, const tfc_layer *l, const tref *in, int pad)
{
    int side[4], s[2];
    tfc_layer_border(l, side); /* a sequence's: left and right */
    s[0] = side[2], s[1] = side[3];
    tref r = {.shape = l->out_shape};
    char a[96], b[96], c[96];
    if (pad) {
        const int64_t pads[6] = {0, s[0], 0, 0, s[1], 0};
        init_i64(x, a, "pads", pads, 6);
        fresh(x, r.name, "Pad");
        node(x, "Pad", (const char *[]){in->name, a, NULL}, r.name, NULL);
        return r;
    }
    const int64_t starts[1] = {s[0]}, ends[1] = {in->shape.dim[0] - s[1]}, axes[1] = {1};
    init_i64(x, a, "starts", starts, 1);
    init_i64(x, b, "ends", ends, 1);
    init_i64(x, c, "axes", axes, 1);
    fresh(x, r.name, "Slice");
    node(x, "Slice", (const char *[]){in->name, a, b, c, NULL}, r.name, NULL);
    return r;
}

/* UpSampling1D: each step repeated (Keras's ops.repeat): [N, T, C] as [N, T, 1, C], expanded
 * to [N, T, size, C], then [N, T size, C] */
static tref upsample1d(exporter *x, const tfc_layer *l, const tref *in)
{
    const int64_t t = in->shape.dim[0], c = in->shape.dim[1];
    const int64_t size = l->out_shape.dim[0] / t;
    const tfc_shape s4 = tfc_shape_make(3, (int64_t[]){t, 1, c});
    tref r = reshape(x, in, &s4);
    char e[96], out[96];
    const int64_t to[4] = {1, t, size, c};
    init_i64(x, e, "shape", to, 4);
    fresh(x, out, "Expand");
    node(x, "Expand", (const char *[]){r.name, e, NULL}, out, NULL);
    snprintf(r.name, sizeof r.name, "%s", out);
    r.shape = tfc_shape_make(3, (int64_t[]){t, size, c});
    return reshape(x, &r, &l->out_shape);
}

/* ZeroPadding3D (Pad) and Cropping3D (Slice) on a [N, D, H, W, C] volume, along D, H, W */
static tref border3d(exporter *x, const tfc_layer *l, const tref *in, int pad)
{
    int s[6];
    tfc_layer_border3d(l, s);
    tref r = {.shape = l->out_shape};
    char a[96], b[96], c[96];
    if (pad) {
        const int64_t pads[10] = {0, s[0], s[2], s[4], 0, 0, s[1], s[3], s[5], 0};
        init_i64(x, a, "pads", pads, 10);
        fresh(x, r.name, "Pad");
        node(x, "Pad", (const char *[]){in->name, a, NULL}, r.name, NULL);
        return r;
    }
    int64_t starts[3], ends[3];
    const int64_t axes[3] = {1, 2, 3};
    for (int k = 0; k < 3; k++) starts[k] = s[2 * k], ends[k] = in->shape.dim[k] - s[2 * k + 1];
    init_i64(x, a, "starts", starts, 3);
    init_i64(x, b, "ends", ends, 3);
    init_i64(x, c, "axes", axes, 3);
    fresh(x, r.name, "Slice");
    node(x, "Slice", (const char *[]){in->name, a, b, c, NULL}, r.name, NULL);
    return r;
}

/* UpSampling3D: every cell repeated (Keras's ops.repeat): [N, D, H, W, C] as
 * [N, D, 1, H, 1, W, 1, C], expanded to [N, D, sd, H, sh, W, sw, C], then
 * [N, D sd, H sh, W sw, C] */
static tref upsample3d(exporter *x, const tfc_layer *l, const tref *in)
{
    const tfc_shape *s = &in->shape;
    int64_t f[3];
    for (int k = 0; k < 3; k++) f[k] = l->out_shape.dim[k] / s->dim[k];
    const tfc_shape s7 = tfc_shape_make(7, (int64_t[]){s->dim[0], 1, s->dim[1], 1, s->dim[2],
                                                       1, s->dim[3]});
    tref r = reshape(x, in, &s7);
    char e[96], out[96];
    const int64_t to[8] = {1, s->dim[0], f[0], s->dim[1], f[1], s->dim[2], f[2], s->dim[3]};
    init_i64(x, e, "shape", to, 8);
    fresh(x, out, "Expand");
    node(x, "Expand", (const char *[]){r.name, e, NULL}, out, NULL);
    snprintf(r.name, sizeof r.name, "%s", out);
    r.shape = tfc_shape_make(7, (int64_t[]){s->dim[0], f[0], s->dim[1], f[1], s->dim[2], f[2],
                                            s->dim[3]});
    return reshape(x, &r, &l->out_shape);
}

/* RepeatVector: [N, F] as [N, 1, F], expanded to [N, n, F] */
static tref repeat_vector(exporter *x, const tfc_layer *l, const tref *in)
{
    const int64_t n = l->out_shape.dim[0], f = l->out_shape.dim[1];
    const tfc_shape s2 = tfc_shape_make(2, (int64_t[]){1, f});
    tref r = reshape(x, in, &s2);
    char e[96], out[96];
    const int64_t to[3] = {1, n, f};
    init_i64(x, e, "shape", to, 3);
    fresh(x, out, "Expand");
    node(x, "Expand", (const char *[]){r.name, e, NULL}, out, NULL);
    snprintf(r.name, sizeof r.name, "%s", out);
    r.shape = l->out_shape;
    return r;
}

/* Permute: Transpose with perm (0, dims...) (Keras's 1-based dims: the batch axis stays) */
static tref permute(exporter *x, const tfc_layer *l, const tref *in)
{
    const tfc_int_list *dims = arg(l, "dims");
    int64_t perm[TFC_MAX_DIMS + 1] = {0};
    for (int i = 0; i < dims->n; i++) perm[i + 1] = dims->v[i];
    tref t = nhwc(x, in), r = {.shape = l->out_shape};
    tfc_pb a = {0};
    attr_ints(&a, "perm", perm, dims->n + 1);
    unary(x, "Transpose", t.name, r.name, &a);
    return r;
}

/* t x Min(Reciprocal(Sqrt(ReduceSumSquare(t))), inv_max) over the k axes (Keras 3's
 * ops.normalize of order 2, keepdims; the axes an attribute before opset 18, an input after),
 * into a fresh tensor of t's shape and layout */
static tref l2_scaled(exporter *x, const tref *t, const int64_t *axes, int k, float inv_max)
{
    tref r = *t;
    char ca[96], s[96], inv[96], lim[96], m[96];
    tfc_pb a = {0};
    attr_int(&a, "keepdims", 1);
    fresh(x, s, "ReduceSumSquare");
    if (x->opset >= 18) {
        init_i64(x, ca, "axes", axes, k);
        node(x, "ReduceSumSquare", (const char *[]){t->name, ca, NULL}, s, &a);
    } else {
        attr_ints(&a, "axes", axes, k);
        node(x, "ReduceSumSquare", (const char *[]){t->name, NULL}, s, &a);
    }
    unary(x, "Sqrt", s, s, NULL);
    unary(x, "Reciprocal", s, inv, NULL);
    init_f32(x, lim, "inv_eps", NULL, 0, &inv_max);
    fresh(x, m, "Min");
    node(x, "Min", (const char *[]){inv, lim, NULL}, m, NULL);
    fresh(x, r.name, "Mul");
    node(x, "Mul", (const char *[]){t->name, m, NULL}, r.name, NULL);
    return r;
}

/* UnitNormalization as Keras 3 computes it: x Min(Reciprocal(Sqrt(ReduceSumSquare(x))),
 * 1e12) over the axes */
static tref unit_norm(exporter *x, const tfc_layer *l, const tref *in)
{
    const tfc_int_list *axis = arg(l, "axis");
    const int n = in->shape.ndim;
    int64_t axes[TFC_LIST_MAX];
    for (int i = 0; i < axis->n; i++) axes[i] = axis->v[i] < 0 ? axis->v[i] + n + 1 : axis->v[i];
    tref t = nhwc(x, in);
    tref r = l2_scaled(x, &t, axes, axis->n, 1e12f);
    r.shape = l->out_shape;
    return r;
}

/* Dot: each input in Keras's order, l2-scaled along its axis with normalize (clamped at
 * 1 / keras.config.epsilon(), 1e7), its axis moved last (the first input) or first (the
 * second) by Transpose where it is not there already, each Reshaped to (batch, M, K) and
 * (batch, K, N), MatMul, then Reshaped to the output's shape */
static tref dot(exporter *x, const tfc_layer *l)
{
    const int *axes = arg(l, "axes"), *normalize = arg(l, "normalize");
    int64_t mk[2] = {1, 1};
    tref t[2];
    for (int i = 0; i < 2; i++) {
        const tref *src = l->inputs[i] < 0 ? &x->in[-1 - l->inputs[i]] : &x->out[l->inputs[i]];
        const tfc_shape *s = &l->in_shape[i];
        const int rank = s->ndim + 1, ax = axes[i] < 0 ? axes[i] + rank : axes[i];
        t[i] = nhwc(x, src);
        if (*normalize) {
            const int64_t a = ax;
            t[i] = l2_scaled(x, &t[i], &a, 1, 1e7f);
        }
        int64_t perm[TFC_MAX_DIMS + 1] = {0};
        int k = 1, moved = 0;
        if (i == 1) perm[k++] = ax;
        for (int d = 1; d < rank; d++)
            if (d != ax) perm[k++] = d;
        if (i == 0) perm[k++] = ax;
        for (int d = 0; d < rank; d++) moved |= perm[d] != d;
        if (moved) {
            tfc_pb a = {0};
            attr_ints(&a, "perm", perm, rank);
            unary(x, "Transpose", t[i].name, t[i].name, &a);
        }
        mk[i] = tfc_shape_numel(s) / s->dim[ax - 1];
    }
    const int64_t kd = tfc_shape_numel(&l->in_shape[0]) / mk[0];
    const tfc_shape a3 = tfc_shape_make(2, (int64_t[]){mk[0], kd});
    const tfc_shape b3 = tfc_shape_make(2, (int64_t[]){kd, mk[1]});
    tref a = reshape(x, &t[0], &a3), b = reshape(x, &t[1], &b3);
    tref r = {.shape = tfc_shape_make(2, (int64_t[]){mk[0], mk[1]})};
    fresh(x, r.name, "MatMul");
    node(x, "MatMul", (const char *[]){a.name, b.name, NULL}, r.name, NULL);
    return reshape(x, &r, &l->out_shape);
}

static tref batch_norm(exporter *x, const tfc_layer *l, const tref *in)
{
    static const char *const names[4] = {"gamma", "beta", "moving_mean", "moving_variance"};
    char pn[4][96];
    int64_t c = in->shape.dim[in->shape.ndim - 1];
    tref r = {.shape = l->out_shape};
    for (int i = 0; i < 4; i++) {
        float *v = param(x, l, names[i], NULL);
        if (!v) return r;
        init_f32(x, pn[i], names[i], &c, 1, v);
        free(v);
    }
    /* ONNX normalizes axis 1: channels of an image in NCHW; a sequence (T, C) or a tensor
     * of more axes (a volume, a sequence of images) is transposed to [N, C, ...] and back */
    tref xin = nchw(x, in);
    const int nd = in->shape.ndim, moved = nd == 2 || nd > 3;
    int64_t to[TFC_MAX_DIMS + 1] = {0, nd}, back[TFC_MAX_DIMS + 1] = {0};
    for (int i = 1; i < nd; i++) to[i + 1] = i, back[i] = i + 1;
    back[nd] = 1;
    tfc_pb a = {0};
    if (moved) {
        attr_ints(&a, "perm", to, nd + 1);
        unary(x, "Transpose", in->name, xin.name, &a);
    }
    attr_float(&a, "epsilon", (float)*(const double *)arg(l, "epsilon"));
    r.nchw = xin.nchw;
    fresh(x, r.name, "BatchNormalization");
    node(x, "BatchNormalization", (const char *[]){xin.name, pn[0], pn[1], pn[2], pn[3], NULL},
         r.name, &a);
    if (moved) {
        attr_ints(&a, "perm", back, nd + 1);
        unary(x, "Transpose", r.name, r.name, &a);
    }
    return r;
}

/* ReduceMean over the k trailing axes, kept (axes an attribute before opset 18, an input
 * since). */
static void mean_rows(exporter *x, const char *in, int k, char *out)
{
    int64_t axes[TFC_MAX_DIMS];
    for (int i = 0; i < k; i++) axes[i] = i - k;
    char c[96];
    tfc_pb a = {0};
    attr_int(&a, "keepdims", 1);
    fresh(x, out, "ReduceMean");
    if (x->opset >= 18) {
        init_i64(x, c, "axes", axes, k);
        node(x, "ReduceMean", (const char *[]){in, c, NULL}, out, &a);
    } else {
        attr_ints(&a, "axes", axes, k);
        node(x, "ReduceMean", (const char *[]){in, NULL}, out, &a);
    }
}

/* AutoContrast (layers/augment_tone.c) as Keras computes it, on the channels-last image:
 * z = x in [0, 255] (from value_range, unless that is [0, 255]), lo, hi = ReduceMin,
 * ReduceMax of z over the rows and columns, r = z * (255 / (hi - lo)) + -lo * that,
 * y = Clip(r, 0, 255) back in value_range, and x itself where r is NaN (a constant
 * channel: Keras's "don't process NaN channels"). */
static tref auto_contrast(exporter *x, const tfc_layer *l, const tref *in)
{
    tref r = nhwc(x, in);
    const tfc_float_list *vr = arg(l, "value_range");
    const float vlo = vr->n ? (float)fmin(vr->v[0], vr->v[1]) : 0.0f;
    const float vhi = vr->n ? (float)fmax(vr->v[0], vr->v[1]) : 255.0f;
    const int ranged = !(vlo == 0.0f && vhi == 255.0f);
    const float zero = 0.0f, full = 255.0f, width = vhi - vlo;
    char src[96], z[96], t[96], u[96], c0[96], c255[96], cw[96], clo[96];
    char lo[96], hi[96], scale[96], offset[96], nan[96];
    snprintf(src, sizeof src, "%s", r.name);
    init_f32(x, c0, "zero", NULL, 0, &zero);
    init_f32(x, c255, "full", NULL, 0, &full);
    snprintf(z, sizeof z, "%s", src);
    if (ranged) {
        init_f32(x, cw, "width", NULL, 0, &width);
        init_f32(x, clo, "low", NULL, 0, &vlo);
        binary(x, "Sub", src, clo, t);
        binary(x, "Div", t, cw, u);
        binary(x, "Mul", u, c255, z);
    }
    const int64_t axes[2] = {1, 2};
    for (int k = 0; k < 2; k++) {
        const char *op = k ? "ReduceMax" : "ReduceMin";
        char *out = k ? hi : lo, ax[96];
        tfc_pb a = {0};
        attr_int(&a, "keepdims", 1);
        fresh(x, out, op);
        if (x->opset >= 18) {
            init_i64(x, ax, "axes", axes, 2);
            node(x, op, (const char *[]){z, ax, NULL}, out, &a);
        } else {
            attr_ints(&a, "axes", axes, 2);
            node(x, op, (const char *[]){z, NULL}, out, &a);
        }
    }
    binary(x, "Sub", hi, lo, t);
    binary(x, "Div", c255, t, scale);
    unary(x, "Neg", lo, t, NULL);
    binary(x, "Mul", t, scale, offset);
    binary(x, "Mul", z, scale, t);
    binary(x, "Add", t, offset, u);
    unary(x, "IsNaN", u, nan, NULL);
    fresh(x, t, "Clip");
    node(x, "Clip", (const char *[]){u, c0, c255, NULL}, t, NULL);
    if (ranged) {
        binary(x, "Div", t, c255, u);
        binary(x, "Mul", u, cw, t);
        binary(x, "Add", t, clo, u);
        snprintf(t, sizeof t, "%s", u);
    }
    fresh(x, r.name, "Where");
    node(x, "Where", (const char *[]){nan, src, t, NULL}, r.name, NULL);
    return r;
}

/* LayerNormalization as opset 17's LayerNormalization (axis -k: the k trailing axes; a
 * Scale of ones without `scale`), RMSNormalization as opset 23's RMSNormalization (the same
 * axis); before opset 23 RMSNormalization, and LayerNormalization's rms_scaling always,
 * composed: x / sqrt(ReduceMean(d d) + eps) * scale, d = x (RMS) or x - ReduceMean(x)
 * (rms_scaling: the variance, no centring, no beta). All channels-last; gamma, beta and
 * scale span the normalised axes. */
static tref row_norm(exporter *x, const tfc_layer *l, const tref *in, int rms)
{
    const int k = ((const tfc_int_list *)arg(l, "axis"))->n;
    const float eps = (float)*(const double *)arg(l, "epsilon");
    const int var = !rms && arg_int(l, "rms_scaling", 0);
    const int composed = var || (rms && x->opset < 23);
    tref r = {.shape = l->out_shape};
    if (!composed && x->opset < 17) {
        unsupported(x, l, "the ONNX LayerNormalization operator needs opset 17 or later");
        return r;
    }
    const int64_t *dims = in->shape.dim + in->shape.ndim - k;
    int64_t numel = 1;
    for (int i = 0; i < k; i++) numel *= dims[i];
    const char *gname = rms ? "scale" : "gamma";
    const int has_gamma = param_exists(l, gname);
    float *gamma = has_gamma ? param(x, l, gname, NULL) : malloc((size_t)numel * 4);
    float *beta = rms || var ? NULL : param(x, l, "beta", NULL);
    if (!gamma || x->st) {
        if (!x->st) x->st = tfc_error_set(x->err, TFC_ERR_NOMEM, "out of memory");
        free(gamma), free(beta);
        return r;
    }
    for (int64_t i = 0; !has_gamma && i < numel; i++) gamma[i] = 1.0f;
    char gn[96], bn[96], t1[96], t2[96], c[96];
    init_f32(x, gn, gname, dims, k, gamma);
    if (beta) init_f32(x, bn, "beta", dims, k, beta);
    free(gamma), free(beta);
    tref xin = nhwc(x, in);
    if (!composed) {
        const char *op = rms ? "RMSNormalization" : "LayerNormalization";
        tfc_pb a = {0};
        attr_int(&a, "axis", -k);
        attr_float(&a, "epsilon", eps);
        fresh(x, r.name, op);
        node(x, op, (const char *[]){xin.name, gn, beta ? bn : NULL, NULL}, r.name, &a);
        return r;
    }
    char d[96];
    snprintf(d, sizeof d, "%s", xin.name);
    if (var) {
        mean_rows(x, xin.name, k, t2);
        fresh(x, d, "Sub");
        node(x, "Sub", (const char *[]){xin.name, t2, NULL}, d, NULL);
    }
    fresh(x, t1, "Mul");
    node(x, "Mul", (const char *[]){d, d, NULL}, t1, NULL);
    mean_rows(x, t1, k, t2);
    init_f32(x, c, "eps", NULL, 0, &eps);
    fresh(x, t1, "Add");
    node(x, "Add", (const char *[]){t2, c, NULL}, t1, NULL);
    unary(x, "Sqrt", t1, t2, NULL);
    fresh(x, t1, "Div");
    node(x, "Div", (const char *[]){xin.name, t2, NULL}, t1, NULL);
    fresh(x, r.name, "Mul");
    node(x, "Mul", (const char *[]){t1, gn, NULL}, r.name, NULL);
    return r;
}

/* GroupNormalization composed (any opset; ONNX's GroupNormalization operator takes channels
 * at axis 1 only, and per-group scales before opset 21): x in Keras's order reshaped to
 * [batch, outer, groups, cg, inner] around the channel axis, d = x - ReduceMean(x) over axes
 * 1, 3, 4 (each example's group), d / sqrt(ReduceMean(d d) + eps) reshaped back, times
 * gamma and plus beta, each of shape [C, 1, ...] (the axes after the channel axis). */
static tref group_norm(exporter *x, const tfc_layer *l, const tref *in)
{
    const int n = in->shape.ndim, axis = *(const int *)arg(l, "axis");
    const int ax = axis < 0 ? axis + n + 1 : axis; /* 1-based, as Keras (build checked it) */
    const int groups0 = *(const int *)arg(l, "groups");
    const float eps = (float)*(const double *)arg(l, "epsilon");
    const int64_t c = in->shape.dim[ax - 1], groups = groups0 == -1 ? c : groups0;
    tfc_shape g5 = {.ndim = 4, .dim = {1, groups, c / groups, 1}};
    for (int i = 0; i < ax - 1; i++) g5.dim[0] *= in->shape.dim[i];
    for (int i = ax; i < n; i++) g5.dim[3] *= in->shape.dim[i];
    tref r = {.shape = l->out_shape};
    float *gamma = param(x, l, "gamma", NULL), *beta = param(x, l, "beta", NULL);
    const int has_gamma = gamma != NULL, has_beta = beta != NULL;
    if (x->st) {
        free(gamma), free(beta);
        return r;
    }
    int64_t wdims[TFC_MAX_DIMS] = {c};
    for (int i = 1; i <= n - ax; i++) wdims[i] = 1;
    char gn[96], bn[96], mean[96], d[96], t1[96], t2[96], ce[96], ca[96];
    if (gamma) init_f32(x, gn, "gamma", wdims, n - ax + 1, gamma);
    if (beta) init_f32(x, bn, "beta", wdims, n - ax + 1, beta);
    free(gamma), free(beta);
    tref xin = nhwc(x, in);
    tref x5 = reshape(x, &xin, &g5);
    static const int64_t axes[3] = {1, 3, 4};
    if (x->opset >= 18) init_i64(x, ca, "axes", axes, 3);
    for (int k = 0; k < 2; k++) { /* the mean of x, then of d d */
        const char *src = k ? t1 : x5.name;
        char *out = k ? t2 : mean;
        tfc_pb a = {0};
        attr_int(&a, "keepdims", 1);
        fresh(x, out, "ReduceMean");
        if (x->opset >= 18) {
            node(x, "ReduceMean", (const char *[]){src, ca, NULL}, out, &a);
        } else {
            attr_ints(&a, "axes", axes, 3);
            node(x, "ReduceMean", (const char *[]){src, NULL}, out, &a);
        }
        if (!k) {
            fresh(x, d, "Sub");
            node(x, "Sub", (const char *[]){x5.name, mean, NULL}, d, NULL);
            fresh(x, t1, "Mul");
            node(x, "Mul", (const char *[]){d, d, NULL}, t1, NULL);
        }
    }
    init_f32(x, ce, "eps", NULL, 0, &eps);
    fresh(x, t1, "Add");
    node(x, "Add", (const char *[]){t2, ce, NULL}, t1, NULL);
    unary(x, "Sqrt", t1, t2, NULL);
    tref u = {.shape = g5};
    fresh(x, u.name, "Div");
    node(x, "Div", (const char *[]){d, t2, NULL}, u.name, NULL);
    r = reshape(x, &u, &l->out_shape);
    if (has_gamma) {
        fresh(x, t1, "Mul");
        node(x, "Mul", (const char *[]){r.name, gn, NULL}, t1, NULL);
        snprintf(r.name, sizeof r.name, "%s", t1);
    }
    if (has_beta) {
        fresh(x, t1, "Add");
        node(x, "Add", (const char *[]){r.name, bn, NULL}, t1, NULL);
        snprintf(r.name, sizeof r.name, "%s", t1);
    }
    return r;
}

static tref dense(exporter *x, const tfc_layer *l, const tref *in)
{
    const tfc_param *kp;
    float *kern = param(x, l, "kernel", &kp), *bias = param(x, l, "bias", NULL);
    tref xin = nhwc(x, in), r = {.shape = l->out_shape};
    if (!kern) {
        free(bias);
        return r;
    }
    char wn[96], bn[96] = "";
    init_f32(x, wn, "W", kp->shape.dim, 2, kern);
    if (bias) init_f32(x, bn, "B", &kp->shape.dim[1], 1, bias);
    free(kern);
    free(bias);
    if (in->shape.ndim == 1) {
        fresh(x, r.name, "Gemm");
        node(x, "Gemm", (const char *[]){xin.name, wn, bn[0] ? bn : NULL, NULL}, r.name, NULL);
        return r;
    }
    fresh(x, r.name, "MatMul");
    node(x, "MatMul", (const char *[]){xin.name, wn, NULL}, r.name, NULL);
    if (bn[0]) {
        char mm[96];
        snprintf(mm, sizeof mm, "%s", r.name);
        fresh(x, r.name, "Add");
        node(x, "Add", (const char *[]){mm, bn, NULL}, r.name, NULL);
    }
    return r;
}

/* EinsumDense: Einsum (opset 12) with the layer's equation (ONNX reads Keras's, '...'
 * included) on the input and the kernel in Keras's layout, then Add of the bias in Keras's
 * shape, which broadcasts against the output's trailing axes as Keras's ops.add does */
static tref einsum_dense(exporter *x, const tfc_layer *l, const tref *in)
{
    const tfc_param *kp, *bp = NULL;
    float *kern = param(x, l, "kernel", &kp), *bias = param(x, l, "bias", &bp);
    tref xin = nhwc(x, in), r = {.shape = l->out_shape};
    if (!kern) {
        free(bias);
        return r;
    }
    char wn[96], bn[96];
    init_f32(x, wn, "W", kp->shape.dim, kp->shape.ndim, kern);
    if (bias) init_f32(x, bn, "B", bp->shape.dim, bp->shape.ndim, bias);
    free(kern);
    free(bias);
    tfc_pb a = {0};
    attr_string(&a, "equation", *(const char *const *)arg(l, "equation"));
    fresh(x, r.name, "Einsum");
    node(x, "Einsum", (const char *[]){xin.name, wn, NULL}, r.name, &a);
    if (bp) {
        char e[96];
        snprintf(e, sizeof e, "%s", r.name);
        fresh(x, r.name, "Add");
        node(x, "Add", (const char *[]){e, bn, NULL}, r.name, NULL);
    }
    return r;
}

/* bool [N, T] mask (ids != 0) and int32 [N] lengths of the model input, made once. */
static void sequence_mask(exporter *x)
{
    if (x->mask[0]) return;
    int32_t zero = 0;
    char z[96], eq[96], cast[96], axes[96];
    fresh(x, z, "zero");
    initializer(x, z, T_INT32, NULL, 0, &zero, 4);
    fresh(x, eq, "Equal");
    node(x, "Equal", (const char *[]){x->in[x->mask_input].name, z, NULL}, eq, NULL);
    unary(x, "Not", eq, x->mask, NULL);
    tfc_pb a = {0};
    attr_int(&a, "to", T_INT32);
    unary(x, "Cast", x->mask, cast, &a);
    int64_t one = 1;
    init_i64(x, axes, "axes", &one, 1);
    attr_int(&a, "keepdims", 0);
    fresh(x, x->lens, "ReduceSum");
    node(x, "ReduceSum", (const char *[]){cast, axes, NULL}, x->lens, &a);
}

/* ---- sequences: a (T, C) tensor stays channels-last between layers; the 1-D convolution and
 * poolings, which ONNX runs on [N, C, T], transpose around their node ---------------------- */

/* [N, T, C] <-> [N, C, T] */
static tref swap_tc(exporter *x, const tref *t)
{
    static const int64_t perm[3] = {0, 2, 1};
    tref r = *t;
    tfc_pb a = {0};
    attr_ints(&a, "perm", perm, 3);
    unary(x, "Transpose", t->name, r.name, &a);
    return r;
}

/* Conv1D as a 1-D Conv (with group), its padding as ONNX pads [before, after]: causal
 * (k - 1) d before and none after, same and valid as TensorFlow. */
static tref conv1d(exporter *x, const tfc_layer *l, const tref *in)
{
    tref r = {.shape = l->out_shape};
    const tfc_param *kp;
    float *kern = param(x, l, "kernel", &kp), *bias = param(x, l, "bias", NULL);
    if (!kern) {
        free(bias);
        return r;
    }
    /* Keras (k, Cin / groups, Cout) -> ONNX (Cout, Cin / groups, k) */
    int64_t K = kp->shape.dim[0], CI = kp->shape.dim[1], CO = kp->shape.dim[2];
    float *w = malloc((size_t)kp->numel * 4);
    for (int64_t u = 0; w && u < K; u++)
        for (int64_t i = 0; i < CI; i++)
            for (int64_t o = 0; o < CO; o++) w[(o * CI + i) * K + u] = kern[(u * CI + i) * CO + o];
    char wn[96], bn[96] = "";
    int64_t wd[3] = {CO, CI, K};
    const int have_w = w != NULL;
    if (have_w) init_f32(x, wn, "W", wd, 3, w);
    if (bias) init_f32(x, bn, "B", &CO, 1, bias);
    free(w), free(kern), free(bias);
    if (!have_w) {
        x->st = tfc_error_set(x->err, TFC_ERR_NOMEM, "out of memory");
        return r;
    }
    int s = arg_int(l, "strides", 1), d = arg_int(l, "dilation_rate", 1);
    int padding = arg_int(l, "padding", 0); /* 0 valid, 1 same, 2 causal (conv1d.c) */
    int64_t pads[2] = {(K - 1) * d, 0}, ks = K, st = s, dl = d;
    if (padding != 2)
        tf_axis_pads((int)in->shape.dim[0], (int)K, s, d, padding == 1, &pads[0], &pads[1]);
    tfc_pb a = {0};
    attr_ints(&a, "kernel_shape", &ks, 1);
    attr_ints(&a, "strides", &st, 1);
    attr_ints(&a, "dilations", &dl, 1);
    attr_ints(&a, "pads", pads, 2);
    attr_int(&a, "group", arg_int(l, "groups", 1));
    tref t = swap_tc(x, in), c = r;
    fresh(x, c.name, "Conv");
    node(x, "Conv", (const char *[]){t.name, wn, bn[0] ? bn : NULL, NULL}, c.name, &a);
    return swap_tc(x, &c);
}

/* A 3-D layer's list argument (Conv3D's strides, ...) as three integers: one integer for
 * all three, def for an empty list or none (the layer has validated the count). */
static void arg_int3(const tfc_layer *l, const char *name, int def, int v[3])
{
    const tfc_int_list *p = arg(l, name);
    for (int a = 0; a < 3; a++) v[a] = !p || !p->n ? def : p->v[p->n == 1 ? 0 : a];
}

/* [N, D, H, W, C] <-> [N, C, D, H, W] (the 5-D tensors of the 3-D layers, kept channels last
 * between layers). */
static tref volume_layout(exporter *x, const tref *t, int to_cfirst)
{
    static const int64_t first[5] = {0, 4, 1, 2, 3}, last[5] = {0, 2, 3, 4, 1};
    tref r = *t;
    tfc_pb a = {0};
    attr_ints(&a, "perm", to_cfirst ? first : last, 5);
    unary(x, "Transpose", t->name, r.name, &a);
    return r;
}

/* TensorFlow's padding of a 3-D window (k, s, dilation d per axis) on the volume of shape in
 * as ONNX pads [before x3, after x3]. */
static void tf_pads3(const tfc_shape *in, const int k[3], const int s[3], const int d[3],
                     int same, int64_t pads[6])
{
    for (int a = 0; a < 3; a++)
        tf_axis_pads((int)in->dim[a], k[a], s[a], d[a], same, &pads[a], &pads[a + 3]);
}

/* Conv3D as a 3-D Conv (with group) on [N, C, D, H, W]: Keras's kernel (KD, KH, KW, Cin /
 * groups, Cout) as ONNX's (Cout, Cin / groups, KD, KH, KW). */
static tref conv3d(exporter *x, const tfc_layer *l, const tref *in)
{
    tref r = {.shape = l->out_shape};
    const tfc_param *kp;
    float *kern = param(x, l, "kernel", &kp), *bias = param(x, l, "bias", NULL);
    if (!kern) {
        free(bias);
        return r;
    }
    const int64_t *kd = kp->shape.dim, R = kd[0] * kd[1] * kd[2], CI = kd[3], CO = kd[4];
    float *w = malloc((size_t)kp->numel * 4);
    for (int64_t u = 0; w && u < R; u++)
        for (int64_t i = 0; i < CI; i++)
            for (int64_t o = 0; o < CO; o++) w[(o * CI + i) * R + u] = kern[(u * CI + i) * CO + o];
    char wn[96], bn[96] = "";
    int64_t wd[5] = {CO, CI, kd[0], kd[1], kd[2]};
    const int have_w = w != NULL;
    if (have_w) init_f32(x, wn, "W", wd, 5, w);
    if (bias) init_f32(x, bn, "B", &CO, 1, bias);
    free(w), free(kern), free(bias);
    if (!have_w) {
        x->st = tfc_error_set(x->err, TFC_ERR_NOMEM, "out of memory");
        return r;
    }
    int k[3] = {(int)kd[0], (int)kd[1], (int)kd[2]}, s[3], d[3];
    arg_int3(l, "strides", 1, s), arg_int3(l, "dilation_rate", 1, d);
    int64_t pads[6], ks[3] = {k[0], k[1], k[2]}, st[3] = {s[0], s[1], s[2]},
                     dl[3] = {d[0], d[1], d[2]};
    tf_pads3(&in->shape, k, s, d, arg_int(l, "padding", TFC_PADDING_VALID) == TFC_PADDING_SAME,
             pads);
    tfc_pb a = {0};
    attr_ints(&a, "kernel_shape", ks, 3);
    attr_ints(&a, "strides", st, 3);
    attr_ints(&a, "dilations", dl, 3);
    attr_ints(&a, "pads", pads, 6);
    attr_int(&a, "group", arg_int(l, "groups", 1));
    tref t = volume_layout(x, in, 1), c = r;
    fresh(x, c.name, "Conv");
    node(x, "Conv", (const char *[]){t.name, wn, bn[0] ? bn : NULL, NULL}, c.name, &a);
    return volume_layout(x, &c, 0);
}

/* A ConvLSTM's kernel `name`, Keras's (window..., cin, 4F), as ONNX's Conv weight (4F, cin,
 * window...) of `rank` spatial axes, its initializer's name into wn; 0 when it failed. */
static int conv_lstm_weight(exporter *x, const tfc_layer *l, const char *name, int rank,
                            char *wn)
{
    const tfc_param *kp;
    float *kern = param(x, l, name, &kp);
    if (!kern) return 0;
    const int nd = kp->shape.ndim;
    const int64_t CI = kp->shape.dim[nd - 2], CO = kp->shape.dim[nd - 1],
                  R = kp->numel / (CI * CO);
    float *w = malloc((size_t)kp->numel * 4);
    if (!w) {
        free(kern);
        x->st = tfc_error_set(x->err, TFC_ERR_NOMEM, "out of memory");
        return 0;
    }
    for (int64_t u = 0; u < R; u++)
        for (int64_t i = 0; i < CI; i++)
            for (int64_t o = 0; o < CO; o++) w[(o * CI + i) * R + u] = kern[(u * CI + i) * CO + o];
    int64_t wd[5] = {CO, CI};
    for (int a = 0; a < rank; a++) wd[2 + a] = kp->shape.dim[a];
    init_f32(x, wn, "W", wd, rank + 2, w);
    free(w), free(kern);
    return 1;
}

/* An ONNX Conv of `rank` spatial axes: window k, strides s, dilation d and pads (before
 * then after) the last `rank` of the (depth, height, width) triples; the bias bn or none. */
static void conv_lstm_conv(exporter *x, const char *in, const char *wn, const char *bn,
                           int rank, const int k[3], const int s[3], const int d[3],
                           const int64_t pads[6], char *out)
{
    int64_t ks[3], st[3], dl[3], pd[6];
    for (int a = 0; a < rank; a++) {
        ks[a] = k[3 - rank + a], st[a] = s[3 - rank + a], dl[a] = d[3 - rank + a];
        pd[a] = pads[3 - rank + a], pd[rank + a] = pads[6 - rank + a];
    }
    tfc_pb a = {0};
    attr_ints(&a, "kernel_shape", ks, rank);
    attr_ints(&a, "strides", st, rank);
    attr_ints(&a, "dilations", dl, rank);
    attr_ints(&a, "pads", pd, 2 * rank);
    char src[96];
    snprintf(src, sizeof src, "%s", in);
    fresh(x, out, "Conv");
    node(x, "Conv", (const char *[]){src, wn, bn && bn[0] ? bn : NULL, NULL}, out, &a);
}

/* ConvLSTM1D, ConvLSTM2D and ConvLSTM3D unrolled over their T steps (ONNX has no
 * convolutional LSTM): the input [N, T, S..., C] laid out [T N, C, S...] and its convolution
 * (with the bias) taken for every step at once, then at each step (in reverse order going
 * backwards) that step's Gather plus the recurrent Conv of h (same padding, stride 1; none
 * at the first step, whose state is zero), the four gates sliced off the channels in Keras's
 * order i, f, c, o, and c = f c + i act(g) (i act(g) at the first), h = o act(c). The last h,
 * or every h in the order computed (return_sequences; Keras's go_backwards returns them so),
 * back to channels last. */
static tref conv_lstm(exporter *x, const tfc_layer *l, const tref *given)
{
    tref r = {.shape = l->out_shape}, xin = nhwc(x, given), *in = &xin;
    tfc_conv_lstm_desc d;
    tfc_layer_conv_lstm_desc(l, &d);
    const int rank = d.rank;
    const int64_t T = in->shape.dim[0], C = in->shape.dim[rank + 1], F = d.filters;
    int64_t sp[3] = {1, 1, 1}, osp[3] = {1, 1, 1}; /* (depth, height, width) in and out */
    for (int a = 0; a < rank; a++) sp[3 - rank + a] = in->shape.dim[1 + a];
    int64_t ipads[6], rpads[6];
    const int one[3] = {1, 1, 1};
    for (int a = 0; a < 3; a++) {
        int o, b;
        tfc_conv_axis((int)sp[a], d.k[a], d.s[a], d.dil[a], d.same, &o, &b);
        osp[a] = o;
        tf_axis_pads((int)sp[a], d.k[a], d.s[a], d.dil[a], d.same, &ipads[a], &ipads[a + 3]);
    }
    for (int a = 0; a < 3; a++)
        tf_axis_pads((int)osp[a], d.k[a], 1, 1, 1, &rpads[a], &rpads[a + 3]);
    char wk[96], wr[96], bn[96] = "";
    if (!conv_lstm_weight(x, l, "kernel", rank, wk) ||
        !conv_lstm_weight(x, l, "recurrent_kernel", rank, wr))
        return r;
    float *bias = d.use_bias ? param(x, l, "bias", NULL) : NULL;
    if (bias) {
        const int64_t G = 4 * F;
        init_f32(x, bn, "B", &G, 1, bias);
        free(bias);
    }
    if (x->st) return r;
    /* [N, T, S..., C] -> [T, N, C, S...] -> [T N, C, S...] */
    int64_t perm[6] = {1, 0, rank + 2};
    for (int a = 0; a < rank; a++) perm[3 + a] = 2 + a;
    tfc_pb a = {0};
    attr_ints(&a, "perm", perm, rank + 3);
    char t[96], shp[96], xs[96], z[96];
    unary(x, "Transpose", in->name, t, &a);
    int64_t dims[6] = {-1, C};
    for (int k = 0; k < rank; k++) dims[2 + k] = sp[3 - rank + k];
    init_i64(x, shp, "shape", dims, rank + 2);
    fresh(x, xs, "Reshape");
    node(x, "Reshape", (const char *[]){t, shp, NULL}, xs, NULL);
    conv_lstm_conv(x, xs, wk, bn, rank, d.k, d.s, d.dil, ipads, z);
    /* [T N, 4F, O...] -> [T, N, 4F, O...] */
    int64_t zd[6] = {T, -1, 4 * F};
    for (int k = 0; k < rank; k++) zd[3 + k] = osp[3 - rank + k];
    init_i64(x, shp, "shape", zd, rank + 3);
    char zs[96], h[96] = "", c[96] = "";
    char(*hs)[96] = d.return_sequences ? calloc((size_t)T, sizeof *hs) : NULL;
    const char **ins = d.return_sequences ? calloc((size_t)T + 1, sizeof *ins) : NULL;
    if (d.return_sequences && (!hs || !ins)) {
        free(hs), free(ins);
        x->st = tfc_error_set(x->err, TFC_ERR_NOMEM, "out of memory");
        return r;
    }
    fresh(x, zs, "Reshape");
    node(x, "Reshape", (const char *[]){z, shp, NULL}, zs, NULL);
    char axis1[96], gate_at[5][96];
    const int64_t ax1 = 1;
    init_i64(x, axis1, "axes", &ax1, 1);
    for (int g = 0; g <= 4; g++) {
        const int64_t at = g * F;
        init_i64(x, gate_at[g], "gate", &at, 1);
    }
    for (int64_t step = 0; step < T && !x->st; step++) {
        char idx[96], zt[96], gate[4][96];
        init_i64_scalar(x, idx, "step", d.go_backwards ? T - 1 - step : step);
        tfc_pb ga = {0};
        attr_int(&ga, "axis", 0);
        fresh(x, zt, "Gather");
        node(x, "Gather", (const char *[]){zs, idx, NULL}, zt, &ga);
        if (step) {
            char rz[96];
            conv_lstm_conv(x, h, wr, NULL, rank, d.k, one, one, rpads, rz);
            binary(x, "Add", zt, rz, zt);
        }
        for (int g = 0; g < 4; g++) {
            if (step == 0 && g == 1) continue; /* f multiplies the zero state */
            fresh(x, gate[g], "Slice");
            node(x, "Slice", (const char *[]){zt, gate_at[g], gate_at[g + 1], axis1, NULL},
                 gate[g], NULL);
            tref gt = {.shape = {1, {F}}};
            snprintf(gt.name, sizeof gt.name, "%s", gate[g]);
            gt = activation(x, l, g == 2 ? (tfc_act)d.act : (tfc_act)d.ract, &gt);
            snprintf(gate[g], sizeof gate[g], "%s", gt.name);
        }
        char ig[96], ct[96];
        binary(x, "Mul", gate[0], gate[2], ig);
        if (step) {
            char fc[96];
            binary(x, "Mul", gate[1], c, fc);
            binary(x, "Add", fc, ig, ct);
        } else {
            snprintf(ct, sizeof ct, "%s", ig);
        }
        snprintf(c, sizeof c, "%s", ct);
        tref cact = {.shape = {1, {F}}};
        snprintf(cact.name, sizeof cact.name, "%s", c);
        cact = activation(x, l, (tfc_act)d.act, &cact);
        binary(x, "Mul", gate[3], cact.name, h);
        if (hs) snprintf(hs[step], sizeof hs[step], "%s", h);
    }
    if (x->st) {
        free(hs), free(ins);
        return r;
    }
    /* channels last: [N, F, O...] -> [N, O..., F]; every step's h joined [N, T F, O...] ->
     * [N, T, F, O...] -> [N, T, O..., F] */
    int64_t back[6] = {0};
    const int seq = d.return_sequences, nd = rank + 2 + seq;
    if (seq) back[1] = 1;
    for (int k = 0; k < rank; k++) back[1 + seq + k] = 2 + seq + k;
    back[nd - 1] = 1 + seq;
    char last[96];
    snprintf(last, sizeof last, "%s", h);
    if (seq) {
        for (int64_t k = 0; k < T; k++) ins[k] = hs[k];
        tfc_pb ca = {0};
        attr_int(&ca, "axis", 1);
        char cat[96];
        fresh(x, cat, "Concat");
        node(x, "Concat", ins, cat, &ca);
        int64_t sd[6] = {0, T, F};
        for (int k = 0; k < rank; k++) sd[3 + k] = osp[3 - rank + k];
        init_i64(x, shp, "shape", sd, rank + 3);
        fresh(x, last, "Reshape");
        node(x, "Reshape", (const char *[]){cat, shp, NULL}, last, NULL);
    }
    free(hs), free(ins);
    tfc_pb ta = {0};
    attr_ints(&ta, "perm", back, nd);
    unary(x, "Transpose", last, r.name, &ta);
    return r;
}

/* Conv3DTranspose as a 3-D ConvTranspose on [N, C, D, H, W]: Keras's kernel (KD, KH, KW, F,
 * C) is ONNX's (C, F, KD, KH, KW); the pads are those of the layer's convolution D, and
 * planes past the last a kernel tap reaches are output_padding (Conv2DTranspose's rule). */
static tref conv3d_transpose(exporter *x, const tfc_layer *l, const tref *in)
{
    const tfc_conv3d_desc d = tfc_layer_transposed_conv3d(l);
    tref r = {.shape = l->out_shape};
    const tfc_param *kp;
    float *kern = param(x, l, "kernel", &kp), *bias = param(x, l, "bias", NULL);
    float *w = kern ? malloc((size_t)kp->numel * 4) : NULL;
    if (!w) {
        free(kern), free(bias);
        if (kern) x->st = tfc_error_set(x->err, TFC_ERR_NOMEM, "out of memory");
        return r;
    }
    const int64_t R = (int64_t)d.k[0] * d.k[1] * d.k[2], F = d.c, C = d.f;
    for (int64_t u = 0; u < R; u++)
        for (int64_t f = 0; f < F; f++)
            for (int64_t c = 0; c < C; c++) w[(c * F + f) * R + u] = kern[(u * F + f) * C + c];
    char wn[96], bn[96] = "";
    const int64_t wd[5] = {C, F, d.k[0], d.k[1], d.k[2]};
    init_f32(x, wn, "W", wd, 5, w);
    if (bias) init_f32(x, bn, "B", &F, 1, bias);
    free(w), free(kern), free(bias);
    /* ONNX's size: s (n - 1) + output_padding + k - pad_begin - pad_end */
    int64_t pads[6], extra[3], ks[3], st[3], dl[3];
    for (int a = 0; a < 3; a++) {
        const int64_t end = (int64_t)(d.out[a] - 1) * d.s[a] + (int64_t)(d.k[a] - 1) * d.dil[a] +
                            1 - d.pad[a] - d.in[a];
        pads[a] = d.pad[a], pads[a + 3] = end > 0 ? end : 0, extra[a] = end < 0 ? -end : 0;
        ks[a] = d.k[a], st[a] = d.s[a], dl[a] = d.dil[a];
    }
    tfc_pb a = {0};
    attr_ints(&a, "kernel_shape", ks, 3);
    attr_ints(&a, "strides", st, 3);
    attr_ints(&a, "dilations", dl, 3);
    attr_ints(&a, "pads", pads, 6);
    attr_ints(&a, "output_padding", extra, 3);
    tref t = volume_layout(x, in, 1), c = r;
    fresh(x, c.name, "ConvTranspose");
    node(x, "ConvTranspose", (const char *[]){t.name, wn, bn[0] ? bn : NULL, NULL}, c.name, &a);
    return volume_layout(x, &c, 0);
}

/* MaxPooling3D / AveragePooling3D as MaxPool / AveragePool over [N, C, D, H, W] (the average
 * without the padding in its count, as TensorFlow). */
static tref pool3d(exporter *x, const tfc_layer *l, const tref *in, int max)
{
    int k[3], s[3];
    const int one[3] = {1, 1, 1};
    arg_int3(l, "pool_size", 2, k);
    arg_int3(l, "strides", 0, s);
    for (int a = 0; a < 3; a++)
        if (!s[a]) s[a] = k[a];
    int64_t pads[6], ks[3] = {k[0], k[1], k[2]}, st[3] = {s[0], s[1], s[2]};
    tf_pads3(&in->shape, k, s, one, arg_int(l, "padding", TFC_PADDING_VALID) == TFC_PADDING_SAME,
             pads);
    tfc_pb a = {0};
    attr_ints(&a, "kernel_shape", ks, 3);
    attr_ints(&a, "strides", st, 3);
    attr_ints(&a, "pads", pads, 6);
    if (!max) attr_int(&a, "count_include_pad", 0);
    tref t = volume_layout(x, in, 1);
    unary(x, max ? "MaxPool" : "AveragePool", t.name, t.name, &a);
    return volume_layout(x, &t, 0);
}

/* MaxPooling1D / AveragePooling1D as MaxPool / AveragePool over [N, C, T]. */
static tref pool1d(exporter *x, const tfc_layer *l, const tref *in, int max)
{
    int k = arg_int(l, "pool_size", 2), s = arg_int(l, "strides", 0);
    if (!s) s = k;
    int64_t pads[2], ks = k, st = s;
    tf_axis_pads((int)in->shape.dim[0], k, s, 1,
                 arg_int(l, "padding", TFC_PADDING_VALID) == TFC_PADDING_SAME, &pads[0],
                 &pads[1]);
    tfc_pb a = {0};
    attr_ints(&a, "kernel_shape", &ks, 1);
    attr_ints(&a, "strides", &st, 1);
    attr_ints(&a, "pads", pads, 2);
    /* TensorFlow's SAME average leaves the padding out of the count */
    if (!max) attr_int(&a, "count_include_pad", 0);
    tref t = swap_tc(x, in);
    unary(x, max ? "MaxPool" : "AveragePool", t.name, t.name, &a);
    return swap_tc(x, &t);
}

/* The most Slice nodes an adaptive pooling's export may take (one per output cell of each
 * axis it pools unevenly). */
#define ADAPTIVE_ONNX_SLICES 4096

/* AdaptiveMaxPooling1D/2D/3D, AdaptiveAveragePooling1D/2D/3D. Every axis a multiple of its
 * output's: MaxPool / AveragePool with kernel = strides = L / n, channels first. Otherwise
 * axis by axis on the channels-last tensor (a bin's max or mean is its axes' in turn, the
 * bins of an axis all of one size in a box): each output cell's bin a Slice, its ReduceMax /
 * ReduceMean over the axis (kept), the cells Concat'ed (the axes an attribute before opset
 * 18, an input since). */
static tref adaptive_pool(exporter *x, const tfc_layer *l, const tref *in, int max)
{
    const int k = l->in_shape[0].ndim - 1;
    int64_t size[3], out[3];
    int even = 1, slices = 0;
    for (int a = 0; a < k; a++) {
        size[a] = l->in_shape[0].dim[a], out[a] = l->out_shape.dim[a];
        even &= size[a] % out[a] == 0;
        slices += size[a] == out[a] ? 0 : (int)out[a];
    }
    if (even) {
        tfc_pb at = {0};
        int64_t ks[3] = {1, 1, 1};
        for (int a = 0; a < k; a++) ks[a] = size[a] / out[a];
        attr_ints(&at, "kernel_shape", ks, k);
        attr_ints(&at, "strides", ks, k);
        tref t = k == 1 ? swap_tc(x, in) : k == 2 ? nchw(x, in) : volume_layout(x, in, 1);
        unary(x, max ? "MaxPool" : "AveragePool", t.name, t.name, &at);
        return k == 1 ? swap_tc(x, &t) : k == 2 ? t : volume_layout(x, &t, 0);
    }
    if (slices > ADAPTIVE_ONNX_SLICES) {
        char why[160];
        snprintf(why, sizeof why, "bins of unequal sizes take a Slice per output cell, %d "
                 "here (at most %d)", slices, ADAPTIVE_ONNX_SLICES);
        unsupported(x, l, why);
        return *in;
    }
    const char *reduce = max ? "ReduceMax" : "ReduceMean";
    tref t = k == 2 ? nhwc(x, in) : *in;
    for (int a = 0; a < k && !x->st; a++) {
        if (size[a] == out[a]) continue;
        const int64_t axis = a + 1;
        char (*part)[96] = malloc(sizeof *part * (size_t)out[a]);
        const char **ins = malloc(sizeof *ins * (size_t)(out[a] + 1));
        if (!part || !ins) {
            free(part), free(ins);
            x->st = tfc_error_set(x->err, TFC_ERR_NOMEM, "out of memory");
            return t;
        }
        char axes[96];
        init_i64(x, axes, "axes", &axis, 1);
        for (int o = 0; o < out[a]; o++) {
            int lo, hi;
            tfc_adaptive_bin(o, (int)size[a], (int)out[a], &lo, &hi);
            const int64_t starts = lo, ends = hi;
            char sa[96], ea[96], bin[96];
            init_i64(x, sa, "starts", &starts, 1);
            init_i64(x, ea, "ends", &ends, 1);
            fresh(x, bin, "Slice");
            node(x, "Slice", (const char *[]){t.name, sa, ea, axes, NULL}, bin, NULL);
            tfc_pb ra = {0};
            attr_int(&ra, "keepdims", 1);
            fresh(x, part[o], reduce);
            if (x->opset >= 18) {
                node(x, reduce, (const char *[]){bin, axes, NULL}, part[o], &ra);
            } else {
                attr_ints(&ra, "axes", &axis, 1);
                node(x, reduce, (const char *[]){bin, NULL}, part[o], &ra);
            }
            ins[o] = part[o];
        }
        ins[out[a]] = NULL;
        tfc_pb ca = {0};
        attr_int(&ca, "axis", axis);
        fresh(x, t.name, "Concat");
        node(x, "Concat", ins, t.name, &ca);
        free(part), free(ins);
    }
    return t;
}

/* GlobalMaxPooling1D, GlobalAveragePooling1D: the global pool of [N, C, T]; under the
 * Embedding's mask the average of the unmasked steps, sum(x m) / sum(m) over T (0 / 0 = NaN
 * for a sequence without one, as Keras and tfc). */
static tref global_pool1d(exporter *x, const tfc_layer *l, const tref *in, int max)
{
    tref t;
    if (max || !l->mask_in) {
        t = swap_tc(x, in);
        unary(x, max ? "GlobalMaxPool" : "GlobalAveragePool", t.name, t.name, NULL);
        return reshape(x, &t, &l->out_shape);
    }
    sequence_mask(x);
    int64_t T = in->shape.dim[0], one = 1;
    tref mask = {.shape = {1, {T}}}, sum = {.shape = {1, {in->shape.dim[1]}}};
    tfc_pb a = {0};
    attr_int(&a, "to", T_FLOAT);
    unary(x, "Cast", x->mask, mask.name, &a);
    tref m3 = reshape(x, &mask, &(tfc_shape){2, {T, 1}});
    char prod[96], axes[96], count[96];
    fresh(x, prod, "Mul");
    node(x, "Mul", (const char *[]){in->name, m3.name, NULL}, prod, NULL);
    init_i64(x, axes, "axes", &one, 1);
    attr_int(&a, "keepdims", 0);
    fresh(x, sum.name, "ReduceSum");
    node(x, "ReduceSum", (const char *[]){prod, axes, NULL}, sum.name, &a);
    attr_int(&a, "keepdims", 0);
    fresh(x, count, "ReduceSum");
    node(x, "ReduceSum", (const char *[]){m3.name, axes, NULL}, count, &a);
    t = sum;
    fresh(x, t.name, "Div");
    node(x, "Div", (const char *[]){sum.name, count, NULL}, t.name, NULL);
    return reshape(x, &t, &l->out_shape);
}

/* Keras's gates (blocks of u along the last axis of a (rows, ng u) matrix) to ONNX's (blocks
 * of u rows of an (ng u, rows) matrix), transposed: block g of ONNX's is Keras's from[g]. */
static void onnx_gates(const float *k, int64_t rows, int64_t u, int ng, const int *from, float *w)
{
    for (int g = 0; g < ng; g++)
        for (int64_t j = 0; j < u; j++)
            for (int64_t r = 0; r < rows; r++)
                w[(g * u + j) * rows + r] = k[r * ng * u + from[g] * u + j];
}

/* A recurrent layer (an LSTM, GRU or SimpleRNN, or a Bidirectional's direction, whose
 * weights are named prefix + kernel, ...) as ONNX wants it */
typedef struct rnn_form {
    int lstm, gates;  /* 4 for the LSTM (Keras i, f, c, o to ONNX i, o, f, c), 3 for the GRU,
                       * 1 for SimpleRNN (ONNX's RNN) */
    int reset_after;  /* GRU: linear_before_reset */
    int64_t F, u;
    int act;          /* its activation (a tfc_act) */
    int ract;         /* the LSTM's and GRU's recurrent_activation */
} rnn_form;

/* The activations of the recurrent nodes (SimpleRNN's, the LSTM's and GRU's) as ONNX names
 * them, with the alpha and beta they take (0: none): Keras's leaky_relu has slope 0.2, its
 * hard_sigmoid is relu6(x + 3) / 6 = max(0, min(1, x / 6 + 1 / 2)), linear is Affine(1, 0).
 * The others have no ONNX form (NULL). */
static const char *onnx_rnn_act(int act, int *nab, float ab[2])
{
    *nab = 0;
    switch (act) {
    case TFC_ACT_TANH: return "Tanh";
    case TFC_ACT_RELU: return "Relu";
    case TFC_ACT_SIGMOID: return "Sigmoid";
    case TFC_ACT_SOFTSIGN: return "Softsign";
    case TFC_ACT_SOFTPLUS: return "Softplus";
    case TFC_ACT_ELU: *nab = 1, ab[0] = 1.0f; return "Elu";
    case TFC_ACT_LEAKY_RELU: *nab = 1, ab[0] = 0.2f; return "LeakyRelu";
    case TFC_ACT_HARD_SIGMOID: *nab = 2, ab[0] = 1.0f / 6.0f, ab[1] = 0.5f; return "HardSigmoid";
    case TFC_ACT_LINEAR: *nab = 2, ab[0] = 1.0f, ab[1] = 0.0f; return "Affine";
    default: return NULL;
    }
}

/* One direction's W [G, F], R [G, u] and B [Wb; Rb] (2G) in ONNX's order: the LSTM's bias
 * goes to Wb (Rb zero), the GRU's [2, 3u] rows to Wb and Rb, its [3u] to Wb. */
static void rnn_weights(exporter *x, const tfc_layer *l, const char *prefix, const rnn_form *f,
                        float *w, float *r, float *b)
{
    static const int lstm_from[4] = {0, 3, 1, 2}, gru_from[3] = {0, 1, 2}; /* SimpleRNN: 0 */
    const int *from = f->lstm ? lstm_from : gru_from;
    char kn[64], rn[64], bn[64];
    snprintf(kn, sizeof kn, "%skernel", prefix);
    snprintf(rn, sizeof rn, "%srecurrent_kernel", prefix);
    snprintf(bn, sizeof bn, "%sbias", prefix);
    const tfc_param *bp = NULL;
    float *k = param(x, l, kn, NULL), *rk = param(x, l, rn, NULL), *bias = param(x, l, bn, &bp);
    if (k && rk) {
        onnx_gates(k, f->F, f->u, f->gates, from, w);
        onnx_gates(rk, f->u, f->u, f->gates, from, r);
    }
    if (bias && f->lstm) onnx_gates(bias, 1, f->u, 4, from, b);
    if (bias && !f->lstm) memcpy(b, bias, (size_t)bp->numel * 4); /* [Wb] or [Wb; Rb] */
    free(k), free(rk), free(bias);
}

/* The ONNX LSTM, GRU or RNN node over in [N, T, F], one direction per prefix (D = 1 or 2, then
 * `bidirectional`); returns Y as [N, T, D, u] in *y and Y_h as [N, D, u] in *yh (the
 * per-example shapes of both are left for the caller to set). */
static void rnn_node(exporter *x, const tfc_layer *l, const tref *in, const rnn_form *f, int D,
                     const char *const *prefix, tref *y, tref *yh)
{
    const int64_t G = f->gates * f->u, F = f->F, u = f->u;
    float *w = calloc((size_t)(D * G * F), 4), *rw = calloc((size_t)(D * G * u), 4),
          *bb = calloc((size_t)(D * 2 * G), 4);
    char wn[96], rn[96], bn[96];
    if (w && rw && bb) {
        for (int d = 0; d < D; d++)
            rnn_weights(x, l, prefix[d], f, w + d * G * F, rw + d * G * u, bb + d * 2 * G);
        int64_t wd[3] = {D, G, F}, rd[3] = {D, G, u}, bd[2] = {D, 2 * G};
        init_f32(x, wn, "W", wd, 3, w);
        init_f32(x, rn, "R", rd, 3, rw);
        init_f32(x, bn, "B", bd, 2, bb);
    } else if (!x->st) {
        x->st = tfc_error_set(x->err, TFC_ERR_NOMEM, "out of memory");
    }
    free(w), free(rw), free(bb);
    if (x->st) return;
    if (l->mask_in) sequence_mask(x);
    /* layout 0 (onnxruntime has no other): X [T, N, F], Y [T, D, N, u], Y_h [D, N, u] */
    tfc_pb a = {0}, n = {0};
    static const int64_t swap01[3] = {1, 0, 2}, ntu[4] = {2, 0, 1, 3};
    char xt[96], yo[96], yho[96], name[128];
    attr_ints(&a, "perm", swap01, 3);
    unary(x, "Transpose", in->name, xt, &a);
    attr_int(&a, "hidden_size", u);
    if (D == 2) attr_string(&a, "direction", "bidirectional");
    else if (arg_int(l, "go_backwards", 0)) attr_string(&a, "direction", "reverse");
    if (f->gates == 3) attr_int(&a, "linear_before_reset", f->reset_after);
    if (f->gates == 1 || f->act != TFC_ACT_TANH || f->ract != TFC_ACT_SIGMOID) {
        /* each direction's: the RNN's f, the GRU's f (gates) and g, the LSTM's f, g and h
         * (the output's: Keras's activation again); an alpha or beta for each that takes
         * one, in that order */
        const int per = f->gates == 1 ? 1 : f->lstm ? 3 : 2;
        const char *acts[6];
        float alpha[6], beta[6];
        int na = 0, nb = 0;
        for (int d = 0; d < D; d++)
            for (int k = 0; k < per; k++) {
                int nab;
                float ab[2];
                acts[d * per + k] = onnx_rnn_act(f->gates > 1 && k == 0 ? f->ract : f->act,
                                                 &nab, ab);
                if (nab > 0) alpha[na++] = ab[0];
                if (nab > 1) beta[nb++] = ab[1];
            }
        attr_strings(&a, "activations", acts, D * per);
        if (na > 0) attr_floats(&a, "activation_alpha", alpha, na);
        if (nb > 0) attr_floats(&a, "activation_beta", beta, nb);
    }
    fresh(x, yo, "Y");
    fresh(x, yho, "Y_h");
    const char *ins[5] = {xt, wn, rn, bn, l->mask_in ? x->lens : NULL};
    for (int i = 0; i < 5 && ins[i]; i++) tfc_pb_string(&n, 1, ins[i]);
    tfc_pb_string(&n, 2, yo);
    tfc_pb_string(&n, 2, yho);
    const char *op = f->lstm ? "LSTM" : f->gates == 3 ? "GRU" : "RNN";
    snprintf(name, sizeof name, "%s_%d", op, x->counter++);
    tfc_pb_string(&n, 3, name);
    tfc_pb_string(&n, 4, op);
    tfc_pb_raw(&n, a.data, a.len);
    tfc_pb_free(&a);
    tfc_pb_message(&x->graph, 1, &n);
    tfc_pb_free(&n);
    attr_ints(&a, "perm", ntu, 4);
    unary(x, "Transpose", yo, y->name, &a); /* [N, T, D, u] */
    attr_ints(&a, "perm", swap01, 3);
    unary(x, "Transpose", yho, yh->name, &a); /* [N, D, u] */
}

/* The form of an LSTM, GRU or SimpleRNN layer l over in; an activation that ONNX's
 * recurrent nodes lack is refused (x->st set). */
static rnn_form form_of(exporter *x, const tfc_layer *l, const tref *in)
{
    int lstm = !strcmp(l->ops->type, "LSTM"), simple = !strcmp(l->ops->type, "SimpleRNN");
    rnn_form f = {lstm, lstm ? 4 : simple ? 1 : 3,
                  lstm || simple ? 0 : arg_int(l, "reset_after", 1), in->shape.dim[1], 0, 0,
                  TFC_ACT_SIGMOID};
    f.u = l->params[1].shape.dim[0];
    f.act = arg_int(l, "activation", TFC_ACT_TANH);
    if (!simple) f.ract = arg_int(l, "recurrent_activation", TFC_ACT_SIGMOID);
    const char *const keys[2] = {"activation", "recurrent_activation"};
    const int acts[2] = {f.act, f.ract};
    for (int k = 0; k < 2; k++) {
        int nab;
        float ab[2];
        if (onnx_rnn_act(acts[k], &nab, ab)) continue;
        char why[200];
        snprintf(why, sizeof why, "%s %s: ONNX's %s has no such activation (tanh, relu, "
                 "sigmoid, softsign, softplus, elu, leaky_relu, hard_sigmoid, linear)", keys[k],
                 tfc_act_names[acts[k]], simple ? "RNN" : l->ops->type);
        unsupported(x, l, why);
        break;
    }
    return f;
}

/* The steps of a [N, T, ...] tensor in reverse order: Slice with step -1 along axis 1. */
static tref reverse_steps(exporter *x, const tref *t)
{
    const int64_t start = -1, end = INT64_MIN, axis = 1, step = -1;
    char s[96], e[96], a[96], k[96];
    init_i64(x, s, "starts", &start, 1);
    init_i64(x, e, "ends", &end, 1);
    init_i64(x, a, "axes", &axis, 1);
    init_i64(x, k, "steps", &step, 1);
    tref r = *t;
    fresh(x, r.name, "Slice");
    node(x, "Slice", (const char *[]){t->name, s, e, a, k, NULL}, r.name, NULL);
    return r;
}

/* An LSTM, GRU or SimpleRNN: one ONNX node, forward, or `reverse` for go_backwards. Keras's
 * go_backwards runs over the reversed padded sequence and returns its outputs in that order:
 * for right-padded sequences the padded steps come first and keep the zero state, so its
 * outputs are ONNX reverse's Y (zeros past sequence_lens) with the steps reversed, and its
 * last output is Y_h. */
static tref recurrent(exporter *x, const tfc_layer *l, const tref *in)
{
    tref r = {.shape = l->out_shape};
    const int backwards = *(const int *)arg(l, "go_backwards");
    const rnn_form f = form_of(x, l, in);
    if (x->st) return r;
    const int64_t T = in->shape.dim[0], u = f.u;
    tref ty = {.shape = {2, {T, u}}}, th = {.shape = {1, {u}}};
    static const char *const own[1] = {""};
    rnn_node(x, l, in, &f, 1, own, &ty, &th);
    if (x->st) return r;
    if (!*(const int *)arg(l, "return_sequences")) return reshape(x, &th, &th.shape);
    r = reshape(x, &ty, &ty.shape);
    if (backwards) return reverse_steps(x, &r);
    if (!l->mask_in) return r;
    /* Keras repeats the last output over masked steps; right-padded, that is Y_h from the
     * first masked step on. */
    tfc_shape ms = {2, {T, 1}};
    tref mask = {.shape = {1, {T}}};
    snprintf(mask.name, sizeof mask.name, "%s", x->mask);
    tref m3 = reshape(x, &mask, &ms);
    char out[96];
    fresh(x, out, "Where");
    node(x, "Where", (const char *[]){m3.name, r.name, th.name, NULL}, out, NULL);
    snprintf(r.name, sizeof r.name, "%s", out);
    return r;
}

/* RNN: its cell's layer's node (one cell), or a stack's nodes one after another, each cell
 * with its weights (this layer's, in order). A stack going backwards under a mask (its later
 * cells run forwards over the reversed padded sequence, where ONNX's sequence_lens counts
 * from the front) and zero_output_for_mask under a mask have no such form. */
static tref rnn_layer(exporter *x, const tfc_layer *l, const tref *in)
{
    int n;
    tfc_rnn_layer_cell(l, 0, &n);
    tref r = *in;
    if (l->mask_in && arg_int(l, "zero_output_for_mask", 0)) {
        unsupported(x, l, "zero_output_for_mask under a mask has no ONNX form here");
        return r;
    }
    if (l->mask_in && n > 1 && arg_int(l, "go_backwards", 0)) {
        unsupported(x, l, "a StackedRNNCells going backwards under a mask has no ONNX form "
                          "here (ONNX's sequence_lens counts from the front)");
        return r;
    }
    for (int k = 0, p0 = 0; k < n && !x->st; k++) {
        tfc_layer c = *tfc_rnn_layer_cell(l, k, NULL);
        for (int p = 0; p < c.nparams; p++, p0++) {
            c.params[p].data = l->params[p0].data;
            c.params[p].grad = l->params[p0].grad;
        }
        r = recurrent(x, &c, &r);
    }
    return r;
}

/* Bidirectional around a StackedRNNCells, without a mask: each direction its RNN's nodes
 * (rnn_layer: the backward one's first cell going backwards, its outputs in that order), the
 * backward outputs' steps put back in order (Keras flips them with return_sequences), then
 * merged as Keras merges: concat on the last axis, sum, mul or ave. Under a mask the
 * backward stack's later cells would run over the reversed padded sequence, which ONNX's
 * sequence_lens cannot say (as a StackedRNNCells going backwards). */
static tref bidirectional_stack(exporter *x, const tfc_layer *l, const tfc_layer *const inner[2],
                                const tref *in)
{
    tref r = {.shape = l->out_shape}, y[2];
    if (l->mask_in) {
        unsupported(x, l, "a Bidirectional around a StackedRNNCells under a mask has no ONNX "
                          "form here (ONNX's sequence_lens counts from the front)");
        return r;
    }
    for (int k = 0, p0 = 0; k < 2 && !x->st; k++) {
        tfc_layer d = *inner[k]; /* its weights are this layer's, forward's then backward's */
        for (int p = 0; p < d.nparams; p++, p0++) {
            d.params[p].data = l->params[p0].data;
            d.params[p].grad = l->params[p0].grad;
        }
        y[k] = rnn_layer(x, &d, in);
    }
    if (x->st) return r;
    const int seqs = l->out_shape.ndim == 2;
    if (seqs) y[1] = reverse_steps(x, &y[1]);
    const int mode = arg_int(l, "merge_mode", 0);
    static const char *const ops[4] = {"Concat", "Add", "Mul", "Add"};
    tfc_pb a = {0};
    if (mode == 0) attr_int(&a, "axis", -1);
    fresh(x, r.name, ops[mode]);
    node(x, ops[mode], (const char *[]){y[0].name, y[1].name, NULL}, r.name, mode ? NULL : &a);
    if (mode == 3) { /* ave */
        char half[96], sum[96];
        float h = 0.5f;
        fresh(x, half, "half");
        initializer(x, half, T_FLOAT, NULL, 0, &h, 4);
        snprintf(sum, sizeof sum, "%s", r.name);
        fresh(x, r.name, "Mul");
        node(x, "Mul", (const char *[]){sum, half, NULL}, r.name, NULL);
    }
    return r;
}

/* Bidirectional: one bidirectional node (ONNX's reverse direction runs over each sequence's
 * sequence_lens steps, Keras's over the reversed padded sequence: the same for right-padded
 * sequences, and both give zeros past the length), its two directions then merged: concat
 * side by side, the others through Gather on the direction axis. */
static tref bidirectional(exporter *x, const tfc_layer *l, const tref *in)
{
    tref r = {.shape = l->out_shape};
    const tfc_layer *inner[2] = {tfc_bidirectional_direction(l, 0),
                                 tfc_bidirectional_direction(l, 1)};
    const tfc_layer *form_layer = inner[0];
    if (!strcmp(inner[0]->ops->type, "RNN")) { /* its cell's layer; weights forward_rnn/... */
        int n;
        form_layer = tfc_rnn_layer_cell(inner[0], 0, &n);
        if (n > 1) return bidirectional_stack(x, l, inner, in);
    }
    rnn_form f = form_of(x, form_layer, in);
    if (x->st) return r;
    const int64_t T = in->shape.dim[0], u = f.u;
    char pf[2][48];
    snprintf(pf[0], sizeof pf[0], "%s/", inner[0]->name);
    snprintf(pf[1], sizeof pf[1], "%s/", inner[1]->name);
    const char *const prefix[2] = {pf[0], pf[1]};
    tref ty = {.shape = {3, {T, 2, u}}}, th = {.shape = {2, {2, u}}};
    rnn_node(x, l, in, &f, 2, prefix, &ty, &th);
    if (x->st) return r;
    const int seqs = l->out_shape.ndim == 2;
    tref both = seqs ? ty : th;
    const int mode = arg_int(l, "merge_mode", 0);
    if (mode == 0) return reshape(x, &both, &l->out_shape); /* concat */
    char part[2][96], idx[2][96], out[96];
    for (int d = 0; d < 2; d++) {
        int64_t i = d, dims[1] = {0};
        fresh(x, idx[d], "dir");
        initializer(x, idx[d], T_INT64, dims, 0, &i, 8);
        tfc_pb a = {0};
        attr_int(&a, "axis", seqs ? 2 : 1);
        fresh(x, part[d], "Gather");
        node(x, "Gather", (const char *[]){both.name, idx[d], NULL}, part[d], &a);
    }
    static const char *const ops[4] = {"", "Add", "Mul", "Add"};
    fresh(x, out, ops[mode]);
    node(x, ops[mode], (const char *[]){part[0], part[1], NULL}, out, NULL);
    if (mode == 3) { /* ave */
        char half[96], sum[96];
        float h = 0.5f;
        fresh(x, half, "half");
        initializer(x, half, T_FLOAT, NULL, 0, &h, 4);
        snprintf(sum, sizeof sum, "%s", out);
        fresh(x, out, "Mul");
        node(x, "Mul", (const char *[]){sum, half, NULL}, out, NULL);
    }
    snprintf(r.name, sizeof r.name, "%s", out);
    return r;
}

/* Embedding (and the token half of TokenAndPositionEmbedding): Gather of the rows of the
 * table `table` at the ids. */
static tref embedding(exporter *x, const tfc_layer *l, const char *table, const tref *in)
{
    const tfc_param *p;
    float *e = param(x, l, table, &p);
    tref r = {.shape = l->out_shape};
    if (!e) return r;
    char en[96];
    init_f32(x, en, "embeddings", p->shape.dim, 2, e);
    free(e);
    fresh(x, r.name, "Gather");
    tfc_pb a = {0};
    attr_int(&a, "axis", 0);
    node(x, "Gather", (const char *[]){en, in->name, NULL}, r.name, &a);
    return r;
}

/* The first T rows of the position table `name` ([sequence_length, d]) as an initializer
 * [T, d] named in rows: the positions of an input of T steps. */
static void position_rows(exporter *x, const tfc_layer *l, const char *name, int64_t T,
                          char *rows)
{
    const tfc_param *p;
    float *e = param(x, l, name, &p);
    if (!e) return;
    int64_t dims[2] = {T, p->shape.dim[1]};
    init_f32(x, rows, "positions", dims, 2, e);
    free(e);
}

/* PositionEmbedding: the rows of its T steps Expanded to the input's shape [N, ..., T, d]
 * (the input gives only its shape). */
static tref position_embedding(exporter *x, const tfc_layer *l, const tref *in)
{
    tref t = nhwc(x, in), r = {.shape = l->out_shape};
    char rows[96], shape[96];
    position_rows(x, l, "embeddings", in->shape.dim[in->shape.ndim - 2], rows);
    if (x->st) return r;
    unary(x, "Shape", t.name, shape, NULL);
    fresh(x, r.name, "Expand");
    node(x, "Expand", (const char *[]){rows, shape, NULL}, r.name, NULL);
    return r;
}

/* TokenAndPositionEmbedding: Gather of the token table plus the rows of the input's T
 * positions (broadcast over the batch). Its mask_zero mask is the model input's (ids != 0),
 * made where a layer downstream needs it. */
static tref token_and_position(exporter *x, const tfc_layer *l, const tref *in)
{
    tref ids = embedding(x, l, "token_embedding/embeddings", in), r = ids;
    char rows[96];
    position_rows(x, l, "position_embedding/embeddings", in->shape.dim[0], rows);
    if (x->st) return r;
    fresh(x, r.name, "Add");
    node(x, "Add", (const char *[]){ids.name, rows, NULL}, r.name, NULL);
    return r;
}

/* Each of the H heads of w [rows, H, width] repeated rep times in place of it, as Keras's
 * ops.repeat on the head axis (GroupQueryAttention's key and value heads): a malloc'd
 * [rows, H rep, width], w freed; w itself when rep is 1 (or NULL on failure). */
static float *repeat_heads(exporter *x, float *w, int64_t rows, int64_t H, int64_t width,
                           int64_t rep)
{
    if (!w || rep == 1) return w;
    float *r = malloc((size_t)(rows * H * rep * width) * 4);
    if (!r) {
        free(w);
        x->st = tfc_error_set(x->err, TFC_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < rows * H; i++)
        for (int64_t c = 0; c < rep; c++)
            memcpy(r + (i * rep + c) * width, w + i * width, (size_t)width * 4);
    free(w);
    return r;
}

/* One projection of MultiHeadAttention or GroupQueryAttention (`var`/kernel [d, H, w] and its
 * bias, each head repeated rep times): x W + b as MatMul (+ Add), heads split: [N, T, H rep,
 * w], then transposed by perm. */
static tref attention_heads(exporter *x, const tfc_layer *l, const tref *in, const char *var,
                            const int64_t *perm, int64_t rep)
{
    char kname[48], bname[48], wn[96], bn[96];
    snprintf(kname, sizeof kname, "%s/kernel", var);
    snprintf(bname, sizeof bname, "%s/bias", var);
    const tfc_param *kp = NULL;
    float *k = param(x, l, kname, &kp), *b = param(x, l, bname, NULL);
    tref t = {.shape = in->shape};
    if (k) {
        k = repeat_heads(x, k, kp->shape.dim[0], kp->shape.dim[1], kp->shape.dim[2], rep);
        b = repeat_heads(x, b, 1, kp->shape.dim[1], kp->shape.dim[2], rep);
    }
    if (!k) {
        free(b);
        return t;
    }
    int64_t H = kp->shape.dim[1] * rep, w = kp->shape.dim[2];
    int64_t dims[2] = {kp->shape.dim[0], H * w};
    init_f32(x, wn, "W", dims, 2, k);
    fresh(x, t.name, "MatMul");
    node(x, "MatMul", (const char *[]){in->name, wn, NULL}, t.name, NULL);
    if (b) {
        char mm[96];
        snprintf(mm, sizeof mm, "%s", t.name);
        init_f32(x, bn, "B", &dims[1], 1, b);
        fresh(x, t.name, "Add");
        node(x, "Add", (const char *[]){mm, bn, NULL}, t.name, NULL);
    }
    free(k), free(b);
    tfc_shape split = {3, {in->shape.dim[0], H, w}};
    tref r = reshape(x, &t, &split);
    tfc_pb a = {0};
    attr_ints(&a, "perm", perm, 4);
    unary(x, "Transpose", r.name, r.name, &a);
    return r;
}

/* bool [1 or N, 1, tq, tk]: which keys each query row sees (the causal mask and the sliding
 * window as one constant, the model input's padding mask on the query rows and on the keys);
 * an empty name: every key. */
static void attention_seen(exporter *x, const tfc_layer *l, int64_t tq, int64_t tk, int vi,
                           int ki, char *seen)
{
    seen[0] = 0;
    const int causal = *(const int *)arg(l, "use_causal_mask");
    const int64_t w = *(const int *)arg(l, "sliding_window");
    if (causal || w > 0) {
        unsigned char *c = malloc((size_t)(tq * tk) + 1);
        if (!c) {
            x->st = tfc_error_set(x->err, TFC_ERR_NOMEM, "out of memory");
            return;
        }
        for (int64_t i = 0; i < tq; i++)
            for (int64_t j = 0; j < tk; j++)
                c[i * tk + j] = (!causal || j <= i) && (w <= 0 || llabs(i - j) < w);
        int64_t dims[4] = {1, 1, tq, tk};
        fresh(x, seen, "band");
        initializer(x, seen, T_BOOL, dims, 4, c, (size_t)(tq * tk));
        free(c);
    }
    const int64_t qdims[] = {0, 1, tq, 1}, kdims[] = {0, 1, 1, tk};
    for (int side = 0; side < 2; side++) {
        unsigned bits = side ? (1u << vi | 1u << ki) : 1u;
        if (!(l->mask_inputs & bits)) continue;
        sequence_mask(x);
        char shape[96], m[96];
        init_i64(x, shape, "shape", side ? kdims : qdims, 4);
        fresh(x, m, "Reshape");
        node(x, "Reshape", (const char *[]){x->mask, shape, NULL}, m, NULL);
        if (!seen[0]) {
            snprintf(seen, 96, "%s", m);
            continue;
        }
        char both[96];
        fresh(x, both, "And");
        node(x, "And", (const char *[]){seen, m, NULL}, both, NULL);
        snprintf(seen, 96, "%s", both);
    }
}

/* MultiHeadAttention, Keras's unfused form: Q, K, V projected and split into heads
 * [N, H, T, w] (K as [N, H, kd, Tk]), scores Q K / sqrt(kd), unseen keys (attention_seen)
 * given one large negative score, Softmax over the keys, times V, heads merged, output
 * projection. A row that sees no key then averages every value, as Keras with dropout 0;
 * with dropout > 0 its probabilities are zeroed, as Keras's softmax path does.
 * GroupQueryAttention is the same with its key and value heads repeated for the query heads
 * that share them (their kernels and biases repeated) and, with use_gate, the merged heads
 * times Sigmoid(query Wg + bg) before the output projection. */
static tref attention(exporter *x, const tfc_layer *l)
{
    const int vi = l->ninputs > 1, ki = l->ninputs > 2 ? 2 : vi;
    const tref *src[3];
    for (int i = 0; i < 3 && i < l->ninputs; i++)
        src[i] = l->inputs[i] < 0 ? &x->in[-1 - l->inputs[i]] : &x->out[l->inputs[i]];
    const int64_t tq = src[0]->shape.dim[0], tk = src[vi]->shape.dim[0];
    static const int64_t bhtw[] = {0, 2, 1, 3}, bhwt[] = {0, 2, 3, 1};
    const int *hq = arg(l, "num_query_heads"), *hkv = arg(l, "num_key_value_heads");
    const int64_t rep = hq ? *hq / *hkv : 1;
    tref q = attention_heads(x, l, src[0], "query", bhtw, 1);
    tref k = attention_heads(x, l, src[ki], "key", bhwt, rep);
    tref v = attention_heads(x, l, src[vi], "value", bhtw, rep);
    tref r = {.shape = l->out_shape};
    if (x->st) return r;
    const tfc_param *wq = &l->params[0];
    float scale = (float)(1.0 / sqrt((double)wq->shape.dim[2])), big = -1e9f, zero = 0.f;
    char s[96], c[96], seen[96], t[96];
    fresh(x, t, "MatMul");
    node(x, "MatMul", (const char *[]){q.name, k.name, NULL}, t, NULL);
    init_f32(x, c, "scale", NULL, 0, &scale);
    fresh(x, s, "Mul");
    node(x, "Mul", (const char *[]){t, c, NULL}, s, NULL);
    attention_seen(x, l, tq, tk, vi, ki, seen);
    if (seen[0]) {
        init_f32(x, c, "masked", NULL, 0, &big);
        fresh(x, t, "Where");
        node(x, "Where", (const char *[]){seen, s, c, NULL}, t, NULL);
        snprintf(s, sizeof s, "%s", t);
    }
    tfc_pb a = {0};
    attr_int(&a, "axis", -1);
    unary(x, "Softmax", s, s, &a);
    if (seen[0] && *(const double *)arg(l, "dropout") > 0) {
        init_f32(x, c, "zero", NULL, 0, &zero);
        fresh(x, t, "Where");
        node(x, "Where", (const char *[]){seen, s, c, NULL}, t, NULL);
        snprintf(s, sizeof s, "%s", t);
    }
    tref o = {.shape = {0}};
    fresh(x, o.name, "MatMul");
    node(x, "MatMul", (const char *[]){s, v.name, NULL}, o.name, NULL);
    attr_ints(&a, "perm", bhtw, 4);
    unary(x, "Transpose", o.name, o.name, &a);
    const tfc_param *wo = NULL;
    for (int p = 0; p < l->nparams; p++)
        if (!strcmp(l->params[p].name, "attention_output/kernel")) wo = &l->params[p];
    tfc_shape merged = {2, {tq, wo->shape.dim[0] * wo->shape.dim[1]}};
    o = reshape(x, &o, &merged);
    if (param_exists(l, "gate/kernel")) { /* o * sigmoid(query Wg + bg), heads merged */
        char wg[96], bg[96], g[96];
        float *gk = param(x, l, "gate/kernel", NULL), *gb = param(x, l, "gate/bias", NULL);
        int64_t gdims[2] = {src[0]->shape.dim[1], merged.dim[1]};
        if (gk) init_f32(x, wg, "W", gdims, 2, gk);
        if (gb) init_f32(x, bg, "B", &gdims[1], 1, gb);
        free(gk), free(gb);
        if (x->st) return r;
        binary(x, "MatMul", src[0]->name, wg, g);
        if (gb) binary(x, "Add", g, bg, g);
        unary(x, "Sigmoid", g, g, NULL);
        binary(x, "Mul", o.name, g, o.name);
    }
    float *kern = param(x, l, "attention_output/kernel", NULL);
    float *bias = param(x, l, "attention_output/bias", NULL);
    char wn[96], bn[96] = "";
    int64_t dims[2] = {merged.dim[1], wo->shape.dim[2]};
    if (kern) init_f32(x, wn, "W", dims, 2, kern);
    if (bias) init_f32(x, bn, "B", &dims[1], 1, bias);
    free(kern), free(bias);
    if (x->st) return r;
    fresh(x, r.name, "MatMul");
    node(x, "MatMul", (const char *[]){o.name, wn, NULL}, r.name, NULL);
    if (bn[0]) {
        snprintf(t, sizeof t, "%s", r.name);
        fresh(x, r.name, "Add");
        node(x, "Add", (const char *[]){t, bn, NULL}, r.name, NULL);
    }
    return r;
}

/* A scalar or vector parameter of Attention or AdditiveAttention as an initializer (name[0]
 * 0: the layer has none) */
static void score_weight(exporter *x, const tfc_layer *l, const char *pname, char *name)
{
    const tfc_param *p = NULL;
    float *w = param(x, l, pname, &p);
    name[0] = 0;
    if (w) init_f32(x, name, pname, p->shape.dim, p->shape.ndim, w);
    free(w);
}

/* Attention (dot: MatMul of the query and the transposed key; concat) and AdditiveAttention:
 * the tanh scores from Unsqueeze'd query [N, Tq, 1, d] plus key [N, 1, Tv, d], ReduceSum
 * over d; the scale and concat_score_weight as Mul. Keys hidden by the causal mask or the
 * value's padding mask take s - 1e9 through Where, Softmax, MatMul with the value, and the
 * query's padded rows zeroed by Where, as Keras 3.15. */
static tref score_attention(exporter *x, const tfc_layer *l)
{
    const tref *src[3];
    for (int i = 0; i < 3 && i < l->ninputs; i++)
        src[i] = l->inputs[i] < 0 ? &x->in[-1 - l->inputs[i]] : &x->out[l->inputs[i]];
    const tref *q = src[0], *v = src[1], *k = src[l->ninputs > 2 ? 2 : 1];
    const int64_t tq = q->shape.dim[0], tv = v->shape.dim[0];
    const int *mode = arg(l, "score_mode"), causal = *(const int *)arg(l, "use_causal_mask");
    const int additive = !mode, concat = mode && *mode;
    tref r = {.shape = l->out_shape};
    char s[96], t[96], c[96], scale[96], cw[96];
    score_weight(x, l, "scale", scale);
    score_weight(x, l, "concat_score_weight", cw);
    if (x->st) return r;
    if (!additive && !concat) {
        tfc_pb a = {0};
        attr_ints(&a, "perm", (const int64_t[]){0, 2, 1}, 3);
        unary(x, "Transpose", k->name, t, &a);
        binary(x, "MatMul", q->name, t, s);
        if (scale[0]) binary(x, "Mul", s, scale, s);
    } else {
        char ax[96], qe[96], ke[96];
        init_i64(x, ax, "axes", (const int64_t[]){2}, 1);
        binary(x, "Unsqueeze", q->name, ax, qe);
        init_i64(x, ax, "axes", (const int64_t[]){1}, 1);
        binary(x, "Unsqueeze", k->name, ax, ke);
        binary(x, "Add", qe, ke, s);
        if (concat && scale[0]) binary(x, "Mul", s, scale, s);
        unary(x, "Tanh", s, s, NULL);
        if (additive && scale[0]) binary(x, "Mul", s, scale, s);
        tfc_pb a = {0};
        attr_int(&a, "keepdims", 0);
        init_i64(x, ax, "axes", (const int64_t[]){-1}, 1);
        snprintf(t, sizeof t, "%s", s);
        fresh(x, s, "ReduceSum");
        node(x, "ReduceSum", (const char *[]){t, ax, NULL}, s, &a);
        if (concat) binary(x, "Mul", s, cw, s);
    }
    char seen[96] = "";
    if (causal) {
        unsigned char *m = malloc((size_t)(tq * tv) + 1);
        if (!m) {
            x->st = tfc_error_set(x->err, TFC_ERR_NOMEM, "out of memory");
            return r;
        }
        for (int64_t i = 0; i < tq; i++)
            for (int64_t j = 0; j < tv; j++) m[i * tv + j] = j <= i;
        fresh(x, seen, "causal");
        initializer(x, seen, T_BOOL, (const int64_t[]){1, tq, tv}, 3, m, (size_t)(tq * tv));
        free(m);
    }
    if (l->mask_inputs & 2u) {
        char shape[96], km[96];
        sequence_mask(x);
        init_i64(x, shape, "shape", (const int64_t[]){0, 1, tv}, 3);
        fresh(x, km, "Reshape");
        node(x, "Reshape", (const char *[]){x->mask, shape, NULL}, km, NULL);
        if (seen[0]) binary(x, "And", seen, km, seen);
        else snprintf(seen, sizeof seen, "%s", km);
    }
    if (seen[0]) {
        const float big = 1e9f;
        char sub[96], w[96];
        init_f32(x, c, "bias", NULL, 0, &big);
        binary(x, "Sub", s, c, sub);
        fresh(x, w, "Where");
        node(x, "Where", (const char *[]){seen, s, sub, NULL}, w, NULL);
        snprintf(s, sizeof s, "%s", w);
    }
    tfc_pb a = {0};
    attr_int(&a, "axis", -1);
    unary(x, "Softmax", s, s, &a);
    binary(x, "MatMul", s, v->name, r.name);
    if (l->mask_inputs & 1u) {
        const float zero = 0.f;
        char shape[96], qm[96], o[96];
        sequence_mask(x);
        init_i64(x, shape, "shape", (const int64_t[]){0, tq, 1}, 3);
        fresh(x, qm, "Reshape");
        node(x, "Reshape", (const char *[]){x->mask, shape, NULL}, qm, NULL);
        init_f32(x, c, "zero", NULL, 0, &zero);
        snprintf(o, sizeof o, "%s", r.name);
        fresh(x, r.name, "Where");
        node(x, "Where", (const char *[]){qm, o, c, NULL}, r.name, NULL);
    }
    return r;
}

/* Add (every input in the first one's layout) or Concatenate (channels-last, Keras's axis,
 * which counts the batch axis as ONNX's does). */
/* Add (Sum), Concatenate (Concat), Subtract (Sub), Average (Sum, then Div by k as Keras),
 * Maximum (Max), Minimum (Min): Max and Min fold their inputs as Keras does; CustomScaleLayer
 * (Mul of the second by scale, then Add) */
static tref merge(exporter *x, const tfc_layer *l, int concat)
{
    const char *ins[TFC_LAYER_MAX_INPUTS + 1] = {NULL};
    tref t[TFC_LAYER_MAX_INPUTS];
    int first_nchw = 0;
    for (int i = 0; i < l->ninputs; i++) {
        tref *src = l->inputs[i] < 0 ? &x->in[-1 - l->inputs[i]] : &x->out[l->inputs[i]];
        if (i == 0) first_nchw = src->nchw && !concat;
        t[i] = to_layout(x, src, first_nchw);
        ins[i] = t[i].name;
    }
    tref r = {.shape = l->out_shape, .nchw = first_nchw};
    if (!strcmp(l->ops->type, "CustomScaleLayer")) { /* x_1 + x_2 scale, as Keras's order */
        const float s = (float)*(const double *)arg(l, "scale");
        char c[96], prod[sizeof r.name];
        init_f32(x, c, "scale", NULL, 0, &s);
        fresh(x, prod, "Mul");
        node(x, "Mul", (const char *[]){ins[1], c, NULL}, prod, NULL);
        fresh(x, r.name, "Add");
        node(x, "Add", (const char *[]){ins[0], prod, NULL}, r.name, NULL);
        return r;
    }
    tfc_pb a = {0};
    if (concat) {
        int ax = arg_int(l, "axis", -1);
        attr_int(&a, "axis", ax);
    }
    const int sub = !strcmp(l->ops->type, "Subtract"), avg = !strcmp(l->ops->type, "Average");
    const char *op = concat                              ? "Concat"
                     : sub                               ? "Sub"
                     : !strcmp(l->ops->type, "Maximum") ? "Max"
                     : !strcmp(l->ops->type, "Minimum") ? "Min"
                                                         : "Sum";
    fresh(x, r.name, op);
    node(x, op, ins, r.name, concat ? &a : NULL);
    if (avg) {
        float k = (float)l->ninputs;
        char c[96], sum[96];
        init_f32(x, c, "count", NULL, 0, &k);
        snprintf(sum, sizeof sum, "%s", r.name);
        fresh(x, r.name, "Div");
        node(x, "Div", (const char *[]){sum, c, NULL}, r.name, NULL);
    }
    return r;
}

/* Reshape to [-1, dims...] (Keras order): the batch axis folded with, or unfolded from, the
 * steps of a TimeDistributed. */
static tref reshape_rows(exporter *x, const tref *t, const tfc_shape *to)
{
    int64_t dims[TFC_MAX_DIMS + 1] = {-1};
    for (int i = 0; i < to->ndim; i++) dims[i + 1] = to->dim[i];
    char shape[96];
    init_i64(x, shape, "shape", dims, to->ndim + 1);
    tref r = {.shape = *to};
    fresh(x, r.name, "Reshape");
    node(x, "Reshape", (const char *[]){t->name, shape, NULL}, r.name, NULL);
    return r;
}

static tref layer_on(exporter *x, const tfc_layer *l, const tref *in);

/* TimeDistributed: [N, T, ...] reshaped to [N T, ...], the inner layer's nodes (its weights
 * this layer's, its activation this layer's, applied after), reshaped back to [N, T, ...]. */
static tref time_distributed(exporter *x, const tfc_layer *l, const tref *in)
{
    tfc_layer c = *tfc_time_distributed_inner(l);
    for (int p = 0; p < c.nparams; p++) {
        c.params[p].data = l->params[p].data;
        c.params[p].grad = l->params[p].grad;
    }
    c.act = TFC_ACT_LINEAR;
    tref t = nhwc(x, in), folded = reshape_rows(x, &t, &c.in_shape[0]);
    if (x->st) return folded;
    tref r = layer_on(x, &c, &folded);
    if (x->st) return r;
    t = nhwc(x, &r);
    return reshape_rows(x, &t, &l->out_shape);
}

/* SpectralNormalization: the inner layer's nodes, as at inference (its weights this layer's
 * first ones, vector_u left out, its activation this layer's, applied after) */
static tref spectral_normalization(exporter *x, const tfc_layer *l, const tref *in)
{
    tfc_layer c = *tfc_spectral_normalization_inner(l);
    for (int p = 0; p < c.nparams; p++) {
        c.params[p].data = l->params[p].data;
        c.params[p].grad = l->params[p].grad;
    }
    c.act = TFC_ACT_LINEAR;
    return layer_on(x, &c, in);
}

static tref layer(exporter *x, const tfc_layer *l)
{
    return layer_on(x, l, l->inputs[0] < 0 ? &x->in[-1 - l->inputs[0]] : &x->out[l->inputs[0]]);
}

static tref layer_on(exporter *x, const tfc_layer *l, const tref *in)
{
    const char *type = l->ops->type;
    tref r = *in, t;
    tfc_pb a = {0};
    tfc_pact_desc pd;
    if (!strcmp(type, "Conv2D") || !strcmp(type, "DepthwiseConv2D")) {
        r = conv2d(x, l, in, type[0] == 'D');
    } else if (!strcmp(type, "SeparableConv2D")) {
        r = separable(x, l, in);
    } else if (!strcmp(type, "Conv2DTranspose")) {
        r = conv_transpose(x, l, in);
    } else if (!strcmp(type, "Conv1DTranspose") || !strcmp(type, "SeparableConv1D") ||
               !strcmp(type, "DepthwiseConv1D")) {
        r = conv1d_as_image(x, l, in);
    } else if (!strcmp(type, "ZeroPadding1D") || !strcmp(type, "Cropping1D")) {
        r = border1d(x, l, in, type[0] == 'Z');
    } else if (!strcmp(type, "UpSampling1D")) {
        r = upsample1d(x, l, in);
    } else if (!strcmp(type, "ZeroPadding3D") || !strcmp(type, "Cropping3D")) {
        r = border3d(x, l, in, type[0] == 'Z');
    } else if (!strcmp(type, "UpSampling3D")) {
        r = upsample3d(x, l, in);
    } else if (!strcmp(type, "RepeatVector")) {
        r = repeat_vector(x, l, in);
    } else if (!strcmp(type, "Permute")) {
        r = permute(x, l, in);
    } else if (!strcmp(type, "UnitNormalization")) {
        r = unit_norm(x, l, in);
    } else if (!strcmp(type, "UpSampling2D")) {
        r = upsample(x, l, in);
    } else if (!strcmp(type, "Resizing") || !strcmp(type, "CenterCrop") ||
               !strcmp(type, "RandomCrop")) {
        r = crop_resize(x, l, in);
    } else if (!strcmp(type, "Multiply")) {
        r = multiply(x, l);
    } else if (!strcmp(type, "ZeroPadding2D") || !strcmp(type, "Cropping2D")) {
        r = border(x, l, in, type[0] == 'Z');
    } else if (!strcmp(type, "MaxPooling2D") || !strcmp(type, "AveragePooling2D")) {
        r = pool(x, l, in, type[0] == 'M');
    } else if (!strcmp(type, "GlobalAveragePooling2D") || !strcmp(type, "GlobalMaxPooling2D")) {
        t = nchw(x, in);
        unary(x, type[6] == 'A' ? "GlobalAveragePool" : "GlobalMaxPool", t.name, t.name, NULL);
        r = reshape(x, &t, &l->out_shape);
    } else if (!strcmp(type, "Conv1D")) {
        r = conv1d(x, l, in);
    } else if (!strcmp(type, "Conv3D")) {
        r = conv3d(x, l, in);
    } else if (!strcmp(type, "Conv3DTranspose")) {
        r = conv3d_transpose(x, l, in);
    } else if (!strncmp(type, "ConvLSTM", 8)) {
        r = conv_lstm(x, l, in);
    } else if (!strcmp(type, "MaxPooling3D") || !strcmp(type, "AveragePooling3D")) {
        r = pool3d(x, l, in, type[0] == 'M');
    } else if (!strcmp(type, "GlobalAveragePooling3D") || !strcmp(type, "GlobalMaxPooling3D")) {
        t = volume_layout(x, in, 1);
        unary(x, type[6] == 'A' ? "GlobalAveragePool" : "GlobalMaxPool", t.name, t.name, NULL);
        r = reshape(x, &t, &l->out_shape);
    } else if (!strcmp(type, "MaxPooling1D") || !strcmp(type, "AveragePooling1D")) {
        r = pool1d(x, l, in, type[0] == 'M');
    } else if (!strcmp(type, "GlobalMaxPooling1D") || !strcmp(type, "GlobalAveragePooling1D")) {
        r = global_pool1d(x, l, in, type[6] == 'M');
    } else if (!strncmp(type, "Adaptive", 8)) {
        r = adaptive_pool(x, l, in, type[8] == 'M');
    } else if (!strcmp(type, "BatchNormalization")) {
        r = batch_norm(x, l, in);
    } else if (!strcmp(type, "Dense")) {
        r = dense(x, l, in);
    } else if (!strcmp(type, "EinsumDense")) {
        r = einsum_dense(x, l, in);
    } else if (!strcmp(type, "LayerNormalization") || !strcmp(type, "RMSNormalization")) {
        r = row_norm(x, l, in, type[0] == 'R');
    } else if (!strcmp(type, "GroupNormalization")) {
        r = group_norm(x, l, in);
    } else if (!strcmp(type, "LSTM") || !strcmp(type, "GRU") || !strcmp(type, "SimpleRNN")) {
        r = recurrent(x, l, in);
    } else if (!strcmp(type, "RNN")) {
        r = rnn_layer(x, l, in);
    } else if (!strcmp(type, "Bidirectional")) {
        r = bidirectional(x, l, in);
    } else if (!strcmp(type, "TimeDistributed")) {
        r = time_distributed(x, l, in);
    } else if (!strcmp(type, "SpectralNormalization")) {
        r = spectral_normalization(x, l, in);
    } else if (!strcmp(type, "Embedding")) {
        r = embedding(x, l, "embeddings", in);
    } else if (!strcmp(type, "TokenAndPositionEmbedding")) {
        r = token_and_position(x, l, in);
    } else if (!strcmp(type, "PositionEmbedding")) {
        r = position_embedding(x, l, in);
    } else if (tfc_layer_pact(l, &pd)) {
        r = pact(x, &pd, in);
    } else if (!strcmp(type, "PReLU")) {
        r = with_weight(x, l, in, "alpha", "PRelu");
    } else if (!strcmp(type, "Rescaling")) {
        r = rescaling(x, l, in);
    } else if (!strcmp(type, "LayerScale")) {
        r = with_weight(x, l, in, "gamma", "Mul");
    } else if (!strcmp(type, "Normalization")) {
        r = normalization(x, l, in);
    } else if (!strcmp(type, "AutoContrast")) {
        r = auto_contrast(x, l, in);
    } else if (tfc_layer_encode_desc(l)) {
        r = encode(x, l, in);
    } else if (!strcmp(type, "STFTSpectrogram") || !strcmp(type, "MelSpectrogram")) {
        r = spectrogram(x, l, in);
    } else if (strstr(type, "Dropout") || !strcmp(type, "GaussianNoise") || l->pure_act ||
               !strcmp(type, "ActivityRegularization") || !strcmp(type, "Identity") ||
               !strncmp(type, "Random", 6) || !strcmp(type, "Solarization") ||
               !strcmp(type, "Equalization") || !strcmp(type, "RandAugment") ||
               !strcmp(type, "AugMix")) {
        /* inference: the dropouts, GaussianNoise, ActivityRegularization, Identity and the
         * augmentation layers (RandomFlip, ..., Equalization, RandAugment, AugMix) are
         * the identity; Activation (and ReLU, Softmax, ... as one) is its fused activation
         * alone */
    } else if (!strcmp(type, "Flatten")) {
        t = nhwc(x, in);
        attr_int(&a, "axis", 1);
        unary(x, "Flatten", t.name, r.name, &a);
        r.nchw = 0;
        r.shape = l->out_shape;
    } else if (!strcmp(type, "Reshape")) {
        t = nhwc(x, in);
        r = reshape(x, &t, &l->out_shape);
    } else if (l->joins_mask) {
        unsupported(x, l, "the masks joined along the steps have no ONNX form yet");
    } else if ((!strcmp(type, "Maximum") || !strcmp(type, "Minimum")) && l->mask_in) {
        unsupported(x, l, "masked inputs (Keras's values on the padding steps) have no ONNX "
                          "form yet");
    } else if (!strcmp(type, "Add") || !strcmp(type, "Concatenate") ||
               !strcmp(type, "Subtract") || !strcmp(type, "Average") ||
               !strcmp(type, "Maximum") || !strcmp(type, "Minimum") ||
               !strcmp(type, "CustomScaleLayer")) {
        r = merge(x, l, !strcmp(type, "Concatenate"));
    } else if (!strcmp(type, "Dot")) {
        r = dot(x, l);
    } else if (!strcmp(type, "MultiHeadAttention") || !strcmp(type, "GroupQueryAttention")) {
        r = attention(x, l);
    } else if (!strcmp(type, "Attention") || !strcmp(type, "AdditiveAttention")) {
        r = score_attention(x, l);
    } else {
        unsupported(x, l, "no ONNX form for this layer type");
    }
    r.shape = l->out_shape;
    return x->st ? r : activation(x, l, l->act, &r);
}

/* ---- the model ---------------------------------------------------------------------------- */

static void value_info(tfc_pb *g, int field, const char *name, int dtype, int64_t batch,
                       const tfc_shape *s)
{
    tfc_pb shape = {0}, tt = {0}, type = {0}, vi = {0}, dim = {0};
    if (batch > 0) tfc_pb_int(&dim, 1, batch);
    else tfc_pb_string(&dim, 2, "N");
    tfc_pb_message(&shape, 1, &dim);
    for (int i = 0; i < s->ndim; i++) {
        tfc_pb_free(&dim);
        tfc_pb_int(&dim, 1, s->dim[i]);
        tfc_pb_message(&shape, 1, &dim);
    }
    tfc_pb_int(&tt, 1, dtype);
    tfc_pb_message(&tt, 2, &shape);
    tfc_pb_message(&type, 1, &tt);
    tfc_pb_string(&vi, 1, name);
    tfc_pb_message(&vi, 2, &type);
    tfc_pb_message(g, field, &vi);
    tfc_pb_free(&shape), tfc_pb_free(&tt), tfc_pb_free(&type), tfc_pb_free(&vi);
    tfc_pb_free(&dim);
}

/* The IR version of an opset's ONNX release (onnx/docs/Versioning.md). */
static int ir_version(int opset)
{
    return opset <= 18 ? 8 : opset <= 20 ? 9 : opset <= 22 ? 10 : 11;
}

tfc_status tfc_onnx_export(tfc_model *m, const tfc_onnx_options *o, const char *path,
                           tfc_error *err)
{
    int opset = o && o->opset ? o->opset : TFC_ONNX_OPSET_DEFAULT;
    int64_t batch = o ? o->batch : 0;
    if (opset < TFC_ONNX_OPSET_MIN || opset > TFC_ONNX_OPSET_MAX)
        return tfc_error_set(err, TFC_ERR_USAGE, "opset %d: this exporter writes opsets %d to %d",
                             opset, TFC_ONNX_OPSET_MIN, TFC_ONNX_OPSET_MAX);
    int n = tfc_model_nlayers(m);
    exporter x = {.m = m, .opset = opset, .err = err};
    x.out = calloc((size_t)n, sizeof *x.out);
    if (!x.out) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    const int ni = tfc_model_ninputs(m);
    for (int k = 0; k < ni; k++) { /* "input", as always, for a model of one */
        snprintf(x.in[k].name, sizeof x.in[k].name, "%s",
                 ni > 1 ? tfc_model_input_name(m, k) : "input");
        x.in[k].shape = *tfc_model_input_shape_at(m, k);
    }
    for (int i = n - 1; i >= 0; i--) { /* as the graph's mask_layer, the first */
        const tfc_layer *l = tfc_model_layer(m, i);
        if (l->mask_out && !l->mask_in && l->ninputs && l->inputs[0] < 0)
            x.mask_input = -1 - l->inputs[0];
    }
    tfc_pb_string(&x.graph, 2, tfc_model_name(m));
    for (int i = 0; i < n && !x.st; i++) x.out[i] = layer(&x, tfc_model_layer(m, i));
    /* "output", as always, for a model of one; several are named as their layers */
    const int no = tfc_model_noutputs(m);
    for (int k = 0; k < no && !x.st; k++) {
        tref out = nhwc(&x, &x.out[tfc_model_output_layer(m, k)]);
        node(&x, "Identity", (const char *[]){out.name, NULL},
             no > 1 ? tfc_model_output_name(m, k) : "output", NULL);
    }
    if (!x.st) {
        for (int k = 0; k < ni; k++)
            value_info(&x.graph, 11, x.in[k].name,
                       tfc_model_input_dtype_at(m, k) == TFC_I32 ? T_INT32 : T_FLOAT, batch,
                       tfc_model_input_shape_at(m, k));
        for (int k = 0; k < no; k++)
            value_info(&x.graph, 12, no > 1 ? tfc_model_output_name(m, k) : "output", T_FLOAT,
                       batch, tfc_model_output_shape_at(m, k));
    }
    tfc_pb model = {0}, ops = {0};
    if (!x.st) {
        tfc_pb_int(&model, 1, ir_version(opset));
        tfc_pb_string(&model, 2, "tfc");
        tfc_pb_string(&model, 3, TFC_VERSION);
        tfc_pb_message(&model, 7, &x.graph);
        tfc_pb_string(&ops, 1, "");
        tfc_pb_int(&ops, 2, opset);
        tfc_pb_message(&model, 8, &ops);
        if (model.failed) x.st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    if (!x.st) {
        const void *chunks[1] = {model.data};
        size_t sizes[1] = {model.len};
        x.st = tfc_file_write_atomic(path, chunks, sizes, 1, err);
    }
    tfc_pb_free(&model), tfc_pb_free(&ops), tfc_pb_free(&x.graph);
    free(x.out);
    for (int k = 0; k < x.nwritten; k++) free(x.written[k].data);
    free(x.written);
    return x.st;
}
