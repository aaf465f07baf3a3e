/* Helpers every layer uses: parameters, positioned errors, TensorFlow's padding rules. */
#include "layers/layer.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const tfc_padding_names[TFC_PADDING_COUNT + 1] = {
    [TFC_PADDING_VALID] = "valid", [TFC_PADDING_SAME] = "same", [TFC_PADDING_COUNT] = NULL};

const char *const tfc_data_format_names[3] = {"channels_last", "channels_first", NULL};

/* Keras's arguments for a weight of each name (the last segment of a path such as
 * forward_lstm/kernel or query/kernel): its regularizer's and its constraint's */
static const struct {
    const char *weight, *regularizer, *constraint;
} keras_args[] = {
    {"kernel", "kernel_regularizer", "kernel_constraint"},
    {"recurrent_kernel", "recurrent_regularizer", "recurrent_constraint"},
    {"bias", "bias_regularizer", "bias_constraint"},
    {"embeddings", "embeddings_regularizer", "embeddings_constraint"},
    {"depthwise_kernel", "depthwise_regularizer", "depthwise_constraint"},
    {"pointwise_kernel", "pointwise_regularizer", "pointwise_constraint"},
    {"gamma", "gamma_regularizer", "gamma_constraint"},
    {"beta", "beta_regularizer", "beta_constraint"},
    {"alpha", "alpha_regularizer", "alpha_constraint"}};

const char *tfc_constraint_arg(const char *regularizer)
{
    for (size_t i = 0; regularizer && i < sizeof keras_args / sizeof *keras_args; i++)
        if (!strcmp(regularizer, keras_args[i].regularizer)) return keras_args[i].constraint;
    return NULL;
}

tfc_param *tfc_layer_add_param(tfc_layer *l, const char *name, int ndim, const int64_t *dims,
                               int trainable, tfc_init init)
{
    TFC_ASSERT(l->nparams < TFC_LAYER_MAX_PARAMS);
    tfc_param *p = &l->params[l->nparams++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->shape = tfc_shape_make(ndim, dims);
    p->trainable = trainable;
    p->init = init;
    p->numel = tfc_shape_numel(&p->shape);
    const char *last = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
    for (size_t i = 0; i < sizeof keras_args / sizeof *keras_args; i++)
        if (!strcmp(last, keras_args[i].weight)) p->regularizer = keras_args[i].regularizer;
    return p;
}

tfc_status tfc_layer_error(tfc_error *err, const tfc_layer *l, const char *fmt, ...)
{
    char msg[900], key[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(key, sizeof key, "layers[%d].%s", l->index, l->ops ? l->ops->type : "?");
    return tfc_node_error(err, TFC_ERR_CONFIG, l->node, key, "layer '%s': %s", l->name, msg);
}

void tfc_snake_case(const char *type, char *out, size_t size)
{
    size_t n = 0;
    for (size_t i = 0; type[i] && n + 2 < size; i++) {
        const char c = type[i];
        /* "(.)([A-Z][a-z]+)" and "([a-z])([A-Z])" both put '_' before such an uppercase */
        if (i > 0 && isupper((unsigned char)c) &&
            (islower((unsigned char)type[i + 1]) || islower((unsigned char)type[i - 1])))
            out[n++] = '_';
        out[n++] = (char)tolower((unsigned char)c);
    }
    out[n] = 0;
}

tfc_status tfc_layer_parse_inner(const tfc_layer *l, const tfc_layer_ops *ops,
                                 const tfc_node *inner, tfc_inner_args *ia, tfc_layer *d,
                                 const char *act_reg_msg, tfc_error *err)
{
    const tfc_node *name_node = NULL;
    if (inner->kind != TFC_NODE_MAP && !tfc_node_is_null(inner))
        return tfc_layer_error(err, l, "layer.%s: expected a mapping of its arguments, found %s",
                               ops->type, tfc_node_kind_name(inner->kind));
    ia->args = *inner;
    ia->args.kind = TFC_NODE_MAP;
    ia->args.n = 0;
    const int cap = inner->kind == TFC_NODE_MAP ? inner->n : 0;
    ia->keys = calloc((size_t)cap + 1, sizeof *ia->keys);
    ia->vals = calloc((size_t)cap + 1, sizeof *ia->vals);
    d->args = calloc(1, ops->args_size ? ops->args_size : 1);
    if (!ia->keys || !ia->vals || !d->args)
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    for (int i = 0; i < cap; i++) {
        if (!strcmp(inner->keys[i]->str, "name")) {
            name_node = inner->vals[i];
            continue;
        }
        ia->keys[ia->args.n] = inner->keys[i];
        ia->vals[ia->args.n++] = inner->vals[i];
    }
    ia->args.keys = ia->keys;
    ia->args.vals = ia->vals;
    ia->args.cap = ia->args.n;
    char path[128];
    snprintf(path, sizeof path, "layers[%d].%s.layer.%s", l->index, l->ops->type, ops->type);
    if (tfc_schema_apply(ops->schema, &ia->args, path, d->args, err)) return TFC_ERR_CONFIG;
    const tfc_node *act_reg = tfc_node_get(&ia->args, "activity_regularizer");
    if (act_reg && !tfc_node_is_null(act_reg))
        return tfc_node_error(err, TFC_ERR_CONFIG, act_reg, path,
                              "activity_regularizer inside %s is not supported %s",
                              l->ops->type, act_reg_msg);
    if (!name_node) {
        tfc_snake_case(ops->type, d->name, sizeof d->name);
        return TFC_OK;
    }
    if (name_node->kind != TFC_NODE_SCALAR || !name_node->str[0] || strchr(name_node->str, '/'))
        return tfc_layer_error(err, l, "layer.%s.name: expected a name without '/'", ops->type);
    snprintf(d->name, sizeof d->name, "%s", name_node->str);
    return TFC_OK;
}

void tfc_inner_args_free(tfc_inner_args *ia)
{
    free(ia->keys);
    free(ia->vals);
    ia->keys = ia->vals = NULL;
}

tfc_status tfc_attention_inputs_check(const tfc_layer *l, tfc_error *err)
{
    char buf[96];
    static const char *const role[] = {"query", "value", "key"};
    for (int j = 0; j < l->ninputs; j++)
        if (l->in_shape[j].ndim != 2 || l->in_dtype[j] != TFC_F32)
            return tfc_layer_error(err, l, "needs a sequence %s of shape (steps, features), got %s",
                                   role[j], tfc_shape_str(&l->in_shape[j], buf, sizeof buf));
    if (l->ninputs > 2 && l->in_shape[2].dim[0] != l->in_shape[1].dim[0])
        return tfc_layer_error(err, l, "key has %lld steps and value %lld: they must match",
                               (long long)l->in_shape[2].dim[0], (long long)l->in_shape[1].dim[0]);
    return TFC_OK;
}

void tfc_conv_axis(int in, int k, int s, int d, int same, int *out, int *pad_before)
{
    int eff = (k - 1) * d + 1;
    if (same) {
        *out = (in + s - 1) / s;
        int total = (*out - 1) * s + eff - in;
        if (total < 0) total = 0;
        *pad_before = total / 2;
    } else {
        *out = in >= eff ? (in - eff) / s + 1 : 0;
        *pad_before = 0;
    }
}

/* The shape a Keras user most likely meant when a layer wanting `want` dimensions gets `in`:
 * an image without its channel axis or flattened, a vector as steps of one feature, an image's
 * rows as steps. 0 when there is no such guess. */
static int meant_shape(const tfc_shape *in, int want, int64_t out[3], const char **why,
                       const char **note)
{
    const int64_t *d = in->dim;
    *note = "";
    if (want == 3 && in->ndim == 2) {
        out[0] = d[0], out[1] = d[1], out[2] = 1, *why = "one channel";
        return 3;
    }
    if (want == 3 && in->ndim == 1)
        for (int64_t c = 1; c <= 3; c += 2) {
            int64_t s = (int64_t)(sqrt((double)(d[0] / c)) + 0.5);
            if (s > 1 && s * s * c == d[0]) {
                out[0] = out[1] = s, out[2] = c;
                *why = c == 1 ? "a flattened square image of one channel"
                              : "a flattened square image of three channels";
                return 3;
            }
        }
    if (want == 2 && in->ndim == 1) {
        out[0] = d[0], out[1] = 1;
        *why = "steps of one feature";
        *note = " (token ids go through an Embedding first, which gives (steps, output_dim))";
        return 2;
    }
    if (want == 2 && in->ndim == 3) {
        out[0] = d[0], out[1] = d[1] * d[2], *why = "each row a step";
        return 2;
    }
    return 0;
}

tfc_status tfc_layer_need_rank(const tfc_layer *l, int ndim, const char *what, tfc_error *err)
{
    const tfc_shape *in = &l->in_shape[0];
    char buf[96];
    if (in->ndim == ndim) return TFC_OK;
    tfc_status st = tfc_layer_error(err, l, "needs %s, got %s", what,
                                    tfc_shape_str(in, buf, sizeof buf));
    int64_t out[3];
    const char *why, *note;
    const int n = meant_shape(in, ndim, out, &why, &note);
    if (!n) return st;
    char list[64];
    int len = 0;
    for (int i = 0; i < n; i++)
        len += snprintf(list + len, sizeof list - len, "%s%lld", i ? ", " : "",
                        (long long)out[i]);
    /* (steps, features) not square before an image layer: more likely a sequence, which
     * the layer's 1-D twin takes as it is (Conv2D's Conv1D, MaxPooling2D's MaxPooling1D) */
    char seq[160] = "", twin[48];
    const char *type = l->ops->type, *two = strstr(type, "2D");
    snprintf(twin, sizeof twin, "%.*s1D%s", two ? (int)(two - type) : 0, type, two ? two + 2 : "");
    if (ndim == 3 && in->ndim == 2 && in->dim[0] != in->dim[1] && two && tfc_layer_lookup(twin))
        snprintf(seq, sizeof seq, "; or, if each of the %lld rows is a step of %lld features, "
                 "%s takes the sequence as it is", (long long)in->dim[0],
                 (long long)in->dim[1], twin);
    if (l->ninputs > 0 && l->inputs[0] == -1)
        tfc_error_hint(err, "as %s, (%s): give the model input: {shape: [%s]}, or put - Reshape: "
                       "{target_shape: [%s]} before this layer%s%s", why, list, list, list, note,
                       seq);
    else
        tfc_error_hint(err, "as %s, (%s): put - Reshape: {target_shape: [%s]} before this "
                       "layer%s%s", why, list, list, note, seq);
    return st;
}

tfc_status tfc_layer_need_image(const tfc_layer *l, tfc_error *err)
{
    return tfc_layer_need_rank(l, 3, "an input of shape (height, width, channels)", err);
}

tfc_status tfc_layer_init_arg(const tfc_layer *l, const tfc_node *node, const char *arg,
                              tfc_init_kind def, tfc_init *out, tfc_error *err)
{
    char path[128];
    snprintf(path, sizeof path, "layers[%d].%s.%s", l->index, l->ops->type, arg);
    return tfc_init_parse(node, path, tfc_init_make(def), out, err);
}

const char *const tfc_layer_grouped_ops[] = {"grouped_conv_forward", "grouped_conv_backward_data",
                                             "grouped_conv_backward_filter", NULL};

void tfc_layer_grouped_forward(tfc_backend *be, const tfc_conv_desc *d, int groups,
                               const float *x, const float *w, const float *bias,
                               const tfc_bn_params *bn, const float *residual, tfc_act act,
                               float *y, const tfc_pool_desc *pool, float *pooled)
{
    const int64_t rows = (int64_t)d->n * d->oh * d->ow;
    be->ops->grouped_conv_forward(be, d, groups, x, w, y);
    if (bias) be->ops->bias_add(be, rows, d->f, bias, y);
    if (bn)
        be->ops->bn_forward_infer(be, rows, d->f, y, bn->gamma, bn->beta, bn->mean, bn->var,
                                  bn->eps, y);
    if (residual) be->ops->axpy(be, rows * d->f, 1.0f, residual, y);
    if (act != TFC_ACT_LINEAR) be->ops->act_forward(be, act, rows * d->f, d->f, y, y);
    if (pool) be->ops->pool_forward(be, pool, y, pooled, NULL);
}

void tfc_layer_grouped_backward(tfc_backend *be, const tfc_conv_desc *d, int groups,
                                const float *x, const float *w, const float *dy, float *dw,
                                float *dx, int assign)
{
    be->ops->grouped_conv_backward_filter(be, d, groups, x, dy, dw);
    if (dx) be->ops->grouped_conv_backward_data(be, d, groups, dy, w, dx, assign);
}

tfc_status tfc_layer_check_groups(const tfc_layer *l, int groups, int64_t channels,
                                  int filters, tfc_error *err)
{
    if (filters % groups)
        return tfc_layer_error(err, l, "filters (%d) must be divisible by groups (%d)", filters,
                               groups);
    if (channels % groups)
        return tfc_layer_error(err, l, "the input's %lld channels must be divisible by groups "
                               "(%d)", (long long)channels, groups);
    return TFC_OK;
}

int64_t tfc_layer_weight_count(const tfc_layer *l)
{
    int64_t n = 0;
    for (int p = 0; p < l->nparams; p++)
        n += l->params[p].constant || l->params[p].shared ? 0 : l->params[p].numel;
    return n;
}

tfc_status tfc_layer_channels_last(const tfc_layer *l, tfc_error *err)
{
    for (const tfc_field *f = l->ops->schema; f && f->name; f++) {
        if (f->choices != tfc_data_format_names) continue;
        int data_format = *(const int *)((const char *)l->args + f->offset);
        if (data_format != 0)
            return tfc_layer_error(err, l, "data_format: %s is not supported (only "
                                           "channels_last: images are (height, width, "
                                           "channels), sequences (steps, channels))",
                                   tfc_data_format_names[data_format]);
    }
    return TFC_OK;
}

tfc_status tfc_layer_one_int(const tfc_layer *l, const char *arg, const tfc_int_list *v,
                             tfc_error *err)
{
    if (v->n == 1) return TFC_OK;
    return tfc_layer_error(err, l, "%s: expected an integer or a list of one (a 1-D window), "
                                   "found %d values", arg, v->n);
}

tfc_status tfc_layer_int3(const tfc_layer *l, const char *arg, const tfc_int_list *v, int def,
                          int out[3], tfc_error *err)
{
    if (v->n > 1 && v->n != 3)
        return tfc_layer_error(err, l, "%s: expected an integer or a list of 3 (a 3-D window), "
                                       "found %d values", arg, v->n);
    for (int a = 0; a < 3; a++) out[a] = v->n == 0 ? def : v->v[v->n == 1 ? 0 : a];
    return TFC_OK;
}

tfc_status tfc_layer_window1d(const tfc_layer *l, const tfc_int_list *k, const tfc_int_list *s,
                              const tfc_int_list *d, int k2[2], int s2[2], int d2[2],
                              tfc_error *err)
{
    if (tfc_layer_one_int(l, "kernel_size", k, err) || tfc_layer_one_int(l, "strides", s, err) ||
        tfc_layer_one_int(l, "dilation_rate", d, err))
        return TFC_ERR_CONFIG;
    if (tfc_layer_need_rank(l, 2, "an input of shape (steps, channels)", err))
        return TFC_ERR_CONFIG;
    k2[0] = s2[0] = d2[0] = 1;
    k2[1] = k->v[0], s2[1] = s->v[0], d2[1] = d->v[0];
    return TFC_OK;
}

int64_t tfc_layer_out_numel(const tfc_layer *l) { return tfc_shape_numel(&l->out_shape); }
