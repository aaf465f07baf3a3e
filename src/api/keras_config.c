/* Keras's model configuration into tfc's model file (SPEC §3 tfc-import), the first half of
 * keras_import.c's work. Keras's configuration (config.json of a `.keras` archive,
 * `model.to_json()`, the `model_config` attribute of a Keras 2 `.h5`) is JSON, which tfc's
 * YAML reader parses with positions, so every complaint points at FILE:LINE:COL of the JSON.
 * It becomes tfc's model file with little change, because a tfc layer's YAML is its Keras
 * constructor: each layer `{Type: its config}` without what is Keras's bookkeeping (the
 * dtype policy, `trainable: true`, names tfc gives itself, arguments at their defaults),
 * serialized initializers and the like shortened to their class name when their config is
 * all defaults, a functional model's call edges as `inputs:`, the compiled loss and metrics
 * as `loss:` and `metrics:`. No compute code: the fuzz build links it. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/keras_config.h"
#include "graph/model.h"
#include "layers/layer.h"

/* ---- the conversion's state -------------------------------------------------------------- */

#define MAX_ALIASES 256

typedef struct conv {
    tfc_doc *out;           /* the model file's tree */
    tfc_error *err;
    tfc_import_report *rep;
    int keras2;             /* a Keras 2 config: no `module` keys, `batch_input_shape` */
    const char *masks[256]; /* functional graphs: the operations that compute the mask of an
                               Embedding or a Masking layer, which tfc propagates itself */
    int nmasks;
    /* functional models inside the model, written as their layers in place: a reference to
     * a nested model's name reads its output layer, one to its InputLayer (while its layers
     * are written) what the model is called on */
    const char *alias_from[MAX_ALIASES], *alias_to[MAX_ALIASES];
    int naliases;
    int frozen;             /* inside a nested model with trainable: false */
    int depth;              /* nested models around the layers being written */
    struct claimed { const char *name; int nested; } *names; /* every layer's name written
                               so far (each once in a model), and whether from a nested one */
    int nnames, cap_names;
    /* a functional model's several inputs (input_layers, in order): their InputLayers are
     * written first, in that order (tfc's model starts with them) */
    const char *inputs[TFC_MODEL_MAX_INPUTS];
    tfc_node *input_items[TFC_MODEL_MAX_INPUTS];
    int ninputs;
    /* its several outputs (output_layers, in order): [name, node index] each */
    const tfc_node *outputs[TFC_MODEL_MAX_OUTPUTS][2];
    int noutputs;
    /* a shared layer's further calls (its inbound nodes 1, 2, ...), each written as
     * `- NAME: {inputs: [...], name: NAME_call_K}` once what it reads is (flush_calls) */
    struct pending_call { const tfc_node *l; const char *name; int k; } calls[MAX_ALIASES];
    int ncalls;
} conv;

/* What a functional call's reference to `name` reads (the conv comment). */
static const char *resolve(const conv *c, const char *name)
{
    for (int hop = 0; name && hop < MAX_ALIASES; hop++) {
        int i = c->naliases - 1;
        while (i >= 0 && strcmp(c->alias_from[i], name)) i--;
        if (i < 0) break;
        name = c->alias_to[i];
    }
    return name;
}

static int is_mask_node(const conv *c, const char *name)
{
    for (int i = 0; name && i < c->nmasks; i++)
        if (!strcmp(c->masks[i], name)) return 1;
    return 0;
}

static void note(tfc_import_report *rep, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note(tfc_import_report *rep, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    size_t len = strlen(rep->notes), n = strlen(line);
    if (strstr(rep->notes, line) || len + n + 2 > sizeof rep->notes) return;
    memcpy(rep->notes + len, line, n);
    memcpy(rep->notes + len + n, "\n", 2);
}

/* A string scalar's text, or NULL when `key` is absent or not a scalar. */
static const char *sval(const tfc_node *map, const char *key)
{
    const tfc_node *v = tfc_node_get(map, key);
    return v && v->kind == TFC_NODE_SCALAR ? v->str : NULL;
}

const char *tfc_keras_str(const tfc_node *map, const char *key)
{
    return sval(map, key);
}

/* The text of item i of a sequence when it is a scalar, else "" (hostile input may put a
 * mapping where Keras writes a number). */
static const char *item_text(const tfc_node *seq, int i)
{
    const tfc_node *v = seq->vals[i];
    return v->kind == TFC_NODE_SCALAR ? v->str : "";
}

static int is_null(const tfc_node *v)
{
    return !v || (v->kind == TFC_NODE_SCALAR && !v->quoted &&
                  (!strcmp(v->str, "null") || !strcmp(v->str, "~") || !v->str[0]));
}

static int is_true(const tfc_node *v)
{
    return v && v->kind == TFC_NODE_SCALAR && !v->quoted && !strcmp(v->str, "true");
}

static tfc_node *scalar(conv *c, const char *text, int quoted)
{
    return tfc_node_new_scalar(c->out, NULL, text, quoted);
}

static void put(conv *c, tfc_node *map, const char *key, tfc_node *val)
{
    tfc_node_map_set(map, scalar(c, key, 0), val);
}

static tfc_node *new_seq(conv *c)
{
    tfc_doc *d = tfc_doc_load_string("[]", 2, "import", NULL);
    tfc_node *s = tfc_node_copy(c->out, tfc_doc_root(d));
    tfc_doc_free(d);
    return s;
}

/* Keras's serialized object: {module, class_name, config, registered_name}, or Keras 2's
 * {class_name, config}. */
static int is_serialized(const tfc_node *v)
{
    return v && v->kind == TFC_NODE_MAP && sval(v, "class_name") && tfc_node_get(v, "config");
}

/* ---- values: initializers, regularizers, constraints, losses ------------------------------ */

static tfc_status convert_layer(conv *c, const tfc_node *ser, int role, tfc_node **out);

/* A serialized non-layer object: its class name alone when its config is empty or all null
 * (GlorotUniform(seed=None)), else {class_name, config}. A DTypePolicy is its name. */
static tfc_node *convert_object(conv *c, const tfc_node *v)
{
    const tfc_node *cfg = tfc_node_get(v, "config");
    const char *cls = sval(v, "class_name");
    if ((!strcmp(cls, "DTypePolicy") || !strcmp(cls, "FloatDTypePolicy")) && sval(cfg, "name"))
        return tfc_node_copy(c->out, tfc_node_get(cfg, "name"));
    int plain = cfg->kind == TFC_NODE_MAP;
    for (int i = 0; plain && i < cfg->n; i++)
        plain = is_null(cfg->vals[i]) || !strcmp(cfg->keys[i]->str, "seed");
    const tfc_node *seed = tfc_node_get(cfg, "seed");
    if (seed && !is_null(seed)) /* an initializer's: the weights come from Keras's file */
        note(c->rep, "initializer seeds are left out: the imported weights are Keras's, and "
             "a fresh run draws from the solver's seed");
    if (plain) return scalar(c, cls, 0);
    tfc_node *m = tfc_node_new_map(c->out, NULL), *copy = tfc_node_new_map(c->out, NULL);
    put(c, m, "class_name", scalar(c, cls, 0));
    for (int i = 0; cfg->kind == TFC_NODE_MAP && i < cfg->n; i++)
        if (strcmp(cfg->keys[i]->str, "seed") || is_null(cfg->vals[i]))
            tfc_node_map_set(copy, tfc_node_copy(c->out, cfg->keys[i]),
                             tfc_node_copy(c->out, cfg->vals[i]));
    put(c, m, "config", cfg->kind == TFC_NODE_MAP ? copy : tfc_node_copy(c->out, cfg));
    return m;
}

static tfc_node *convert_value(conv *c, const tfc_node *v)
{
    if (is_serialized(v)) return convert_object(c, v);
    if (v->kind == TFC_NODE_SCALAR) return tfc_node_copy(c->out, v);
    tfc_node *o = v->kind == TFC_NODE_MAP ? tfc_node_new_map(c->out, NULL) : new_seq(c);
    for (int i = 0; i < v->n; i++) {
        tfc_node *x = convert_value(c, v->vals[i]);
        if (v->kind == TFC_NODE_MAP) tfc_node_map_set(o, tfc_node_copy(c->out, v->keys[i]), x);
        else tfc_node_seq_push(o, x);
    }
    return o;
}

/* Keras's class names that tfc's YAML spells as Keras exports them. */
const char *tfc_keras_type(const char *cls)
{
    if (!strcmp(cls, "GroupedQueryAttention")) return "GroupQueryAttention";
    return cls;
}

/* Whether tfc's layer `type` has the argument `key`. */
static int schema_has(const char *type, const char *key)
{
    const tfc_layer_ops *ops = tfc_layer_lookup(tfc_keras_type(type));
    for (const tfc_field *x = ops ? ops->schema : NULL; x && x->name; x++)
        if (!strcmp(x->name, key)) return 1;
    return 0;
}

/* Keras's bookkeeping beyond a layer's constructor arguments, where tfc's layer has no such
 * argument, at the value that changes nothing: Layer's activity_regularizer (None), RNN's
 * unroll, stateful, return_state and zero_output_for_mask (False), the base preprocessing
 * layer's data_format (channels_last, which is tfc's), and a lookup's vocabulary_size (its
 * vocabulary's length). */
static int is_bookkeeping(const char *type, const char *key, const tfc_node *v)
{
    if (schema_has(type, key)) return 0;
    if (!strcmp(key, "activity_regularizer")) return is_null(v);
    if (!strcmp(key, "unroll") || !strcmp(key, "stateful") || !strcmp(key, "return_state") ||
        !strcmp(key, "zero_output_for_mask"))
        return v->kind == TFC_NODE_SCALAR && !strcmp(v->str, "false");
    if (!strcmp(key, "data_format"))
        return is_null(v) || (v->kind == TFC_NODE_SCALAR && !strcmp(v->str, "channels_last"));
    return !strcmp(key, "vocabulary_size") &&
           (!strcmp(type, "IntegerLookup") || !strcmp(type, "StringLookup"));
}

/* ---- arguments at their defaults ------------------------------------------------------------ */

/* Keras's default initializer of an argument, where every Keras layer that has the argument
 * agrees (Embedding's embeddings_initializer does not: it is left alone). */
static const char *default_initializer(const char *key)
{
    static const char *const table[][2] = {
        {"kernel_initializer", "GlorotUniform"}, {"bias_initializer", "Zeros"},
        {"depthwise_initializer", "GlorotUniform"}, {"pointwise_initializer", "GlorotUniform"},
        {"gamma_initializer", "Ones"}, {"beta_initializer", "Zeros"},
        {"moving_mean_initializer", "Zeros"}, {"moving_variance_initializer", "Ones"},
        {"alpha_initializer", "Zeros"}};
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (!strcmp(table[i][0], key)) return table[i][1];
    return NULL;
}

/* Whether scalar `v` is the default's text `d`: numbers by value, the rest by text. */
static int same_scalar(const tfc_node *v, const char *d)
{
    if (v->kind != TFC_NODE_SCALAR) return 0;
    if (!strcmp(v->str, d)) return 1;
    if (v->quoted) return 0;
    char *e1, *e2;
    double a = strtod(v->str, &e1), b = strtod(d, &e2);
    return e1 != v->str && !*e1 && e2 != d && !*e2 && a == b;
}

/* Whether `v` is the field's default text `def` (YAML): a scalar, a list of scalars, or a
 * list each of whose items is the default number (kernel_size [3, 3] for 3). */
static int is_default_value(const tfc_node *v, const char *def)
{
    if (v->kind == TFC_NODE_SCALAR) return same_scalar(v, def);
    if (v->kind != TFC_NODE_SEQ || !v->n) return 0;
    tfc_doc *d = tfc_doc_load_string(def, strlen(def), "default", NULL);
    const tfc_node *dn = d ? tfc_doc_root(d) : NULL;
    int same = dn != NULL;
    if (same && dn->kind == TFC_NODE_SCALAR) {
        for (int i = 0; same && i < v->n; i++) same = same_scalar(v->vals[i], dn->str);
    } else if (same) {
        same = dn->kind == TFC_NODE_SEQ && dn->n == v->n;
        for (int i = 0; same && i < v->n; i++)
            same = dn->vals[i]->kind == TFC_NODE_SCALAR && same_scalar(v->vals[i],
                                                                     dn->vals[i]->str);
    }
    tfc_doc_free(d);
    return same;
}

/* Whether argument `key` of layer `type`, converted to `v`, says what leaving it out says in
 * tfc (its schema's default, which is Keras's), so the model file need not repeat it. */
static int is_default(const char *type, const char *key, const tfc_node *v)
{
    const char *init = default_initializer(key);
    if (init && v->kind == TFC_NODE_SCALAR && !strcmp(v->str, init)) return 1;
    if (!strcmp(key, "recurrent_initializer") && is_serialized(v) &&
        !strcmp(sval(v, "class_name"), "Orthogonal")) { /* Orthogonal(gain=1, seed=None) */
        const tfc_node *cfg = tfc_node_get(v, "config"), *gain = tfc_node_get(cfg, "gain");
        return is_null(tfc_node_get(cfg, "seed")) && (!gain || same_scalar(gain, "1"));
    }
    if (!strcmp(key, "seed") && is_null(v)) return 1; /* Keras's None; tfc's runs are seeded */
    if (!strcmp(key, "embeddings_initializer") && is_serialized(v) &&
        !strcmp(sval(v, "class_name"), "RandomUniform")) { /* Embedding's "uniform" */
        const tfc_node *cfg = tfc_node_get(v, "config");
        const tfc_node *lo = tfc_node_get(cfg, "minval"), *hi = tfc_node_get(cfg, "maxval");
        return is_null(tfc_node_get(cfg, "seed")) && lo && hi && same_scalar(lo, "-0.05") &&
               same_scalar(hi, "0.05");
    }
    if (!strcmp(type, "InputLayer"))
        return (!strcmp(key, "sparse") || !strcmp(key, "ragged") || !strcmp(key, "optional")) &&
               v->kind == TFC_NODE_SCALAR && !strcmp(v->str, "false");
    static const char *const cells[][2] = {
        {"LSTMCell", "LSTM"}, {"GRUCell", "GRU"}, {"SimpleRNNCell", "SimpleRNN"}};
    for (size_t i = 0; i < sizeof cells / sizeof *cells; i++)
        if (!strcmp(type, cells[i][0])) type = cells[i][1];
    const tfc_layer_ops *ops = tfc_layer_lookup(tfc_keras_type(type));
    const tfc_field *f = NULL;
    for (const tfc_field *x = ops ? ops->schema : NULL; x && x->name && !f; x++)
        if (!strcmp(x->name, key)) f = x;
    if (!f || !f->def || f->type == TFC_F_REFUSED) return 0;
    if (!strcmp(f->def, TFC_NO_DEFAULT)) return is_null(v);
    return !is_null(v) && is_default_value(v, f->def);
}

/* ---- layers -------------------------------------------------------------------------------- */

/* Where a layer's config sits, which decides what of Keras's bookkeeping goes. */
enum {
    ROLE_TOP,     /* a layer of the model: its name stays (tfc's weights are named by it) */
    ROLE_WRAPPED, /* inside TimeDistributed, SpectralNormalization or a Pipeline: as a top one */
    ROLE_BIDI,    /* Bidirectional's layer: tfc names it forward_<type> itself */
    ROLE_CELL,    /* an RNN's cell: tfc drops its segment or names it by type itself */
};

/* Bidirectional's backward_layer, as get_config writes it: a copy of `layer` going
 * backwards, which is what tfc builds; anything else it cannot express. */
static tfc_status check_backward(conv *c, const tfc_node *layer, const tfc_node *back)
{
    const tfc_node *fc = tfc_node_get(layer, "config"), *bc = tfc_node_get(back, "config");
    int same = is_serialized(back) && is_serialized(layer) &&
               !strcmp(sval(back, "class_name"), sval(layer, "class_name"));
    for (int i = 0; same && bc->kind == TFC_NODE_MAP && i < bc->n; i++) {
        const char *k = bc->keys[i]->str;
        if (!strcmp(k, "name") || !strcmp(k, "go_backwards")) continue;
        const tfc_node *a = tfc_node_get(fc, k), *b = bc->vals[i];
        if (b->kind == TFC_NODE_SCALAR && (!a || a->kind != TFC_NODE_SCALAR ||
                                           strcmp(a->str, b->str)))
            same = 0;
    }
    if (same) return TFC_OK;
    return tfc_node_error(c->err, TFC_ERR_USAGE, back, "backward_layer",
                          "a backward layer of its own is not supported: tfc's backward "
                          "direction is a copy of `layer` going backwards");
}

/* A list of serialized layers under `key` of args, each in `role`: StackedRNNCells' cells,
 * a Pipeline's (or an inner Sequential's) layers, an InputLayer left out. */
static tfc_status convert_list(conv *c, const tfc_node *list, const char *key, int role,
                               tfc_node *args)
{
    if (list->kind != TFC_NODE_SEQ)
        return tfc_node_error(c->err, TFC_ERR_USAGE, list, key, "expected a list of layers");
    tfc_node *seq = new_seq(c);
    for (int i = 0; i < list->n; i++) {
        const char *cls = sval(list->vals[i], "class_name");
        if (cls && !strcmp(cls, "InputLayer")) continue;
        tfc_node *x;
        tfc_status s = convert_layer(c, list->vals[i], role, &x);
        if (s) return s;
        tfc_node_seq_push(seq, x);
    }
    put(c, args, key, seq);
    return TFC_OK;
}

/* Keras 2's arguments Keras 3's legacy loader drops (saving_utils.model_from_config):
 * Embedding's input_length, the recurrent layers' implementation and time_major. */
static int is_keras2_only(const char *type, const char *key)
{
    if (!strcmp(type, "Embedding")) return !strcmp(key, "input_length");
    return (!strcmp(key, "implementation") || !strcmp(key, "time_major")) &&
           (!strcmp(type, "LSTM") || !strcmp(type, "GRU") || !strcmp(type, "SimpleRNN") ||
            !strcmp(type, "LSTMCell") || !strcmp(type, "GRUCell") ||
            !strcmp(type, "SimpleRNNCell"));
}

/* The arguments of one layer from its config. */
static tfc_status convert_args(conv *c, const char *type, const tfc_node *cfg, int role,
                               tfc_node *args)
{
    int bidi = !strcmp(type, "Bidirectional");
    for (int i = 0; i < cfg->n; i++) {
        const char *k = cfg->keys[i]->str;
        const tfc_node *v = cfg->vals[i];
        tfc_node *x = NULL;
        tfc_status s = TFC_OK;
        if (!strcmp(k, "dtype")) {
            const char *policy = is_serialized(v) ? sval(tfc_node_get(v, "config"), "name")
                                 : v->kind == TFC_NODE_SCALAR ? v->str : NULL;
            if (!strcmp(type, "InputLayer")) {
                if (policy) put(c, args, k, scalar(c, policy, 0));
            } else if (policy && strcmp(policy, "float32")) {
                note(c->rep, "the model computed in Keras's dtype policy %s: tfc sets the "
                     "precision in the solver (precision: float16 or bfloat16)", policy);
            }
            continue;
        }
        if (!strcmp(k, "trainable") && is_true(v)) continue;
        if (!strcmp(k, "name") && (role == ROLE_BIDI || role == ROLE_CELL)) continue;
        /* Bidirectional sets zero_output_for_mask on its layers, as tfc's does */
        if (role == ROLE_BIDI && !strcmp(k, "zero_output_for_mask")) continue;
        if (is_bookkeeping(type, k, v)) continue;
        if (!strcmp(k, "build_input_shape") && !strcmp(type, "Sequential")) continue;
        if (c->keras2 && is_keras2_only(type, k)) continue;
        if (c->keras2 && !strcmp(k, "batch_input_shape") && strcmp(type, "InputLayer"))
            continue; /* the model's input, read by convert_model */
        if (c->keras2 && !strcmp(k, "axis") && v->kind == TFC_NODE_SEQ && v->n == 1) {
            put(c, args, k, tfc_node_copy(c->out, v->vals[0])); /* Keras 2's [3] is 3 */
            continue;
        }
        if (!strcmp(type, "Normalization") && !strcmp(k, "axis") && v->kind == TFC_NODE_SEQ &&
            !v->n) { /* Keras writes axis=None as () */
            put(c, args, k, scalar(c, "null", 0));
            continue;
        }
        if (!strcmp(type, "RandomShear") && (!strcmp(k, "x_factor") || !strcmp(k, "y_factor")) &&
            v->kind == TFC_NODE_SEQ && v->n == 2 && item_text(v, 0)[0] == '-' &&
            !strcmp(item_text(v, 0) + 1, item_text(v, 1))) {
            /* Keras writes RandomShear(f)'s range (-f, f), which its own constructor
             * refuses; tfc reads f as Keras's constructor does */
            put(c, args, k, tfc_node_copy(c->out, v->vals[1]));
            continue;
        }
        if ((!strcmp(k, "batch_input_shape") || !strcmp(k, "batch_shape")) &&
            !strcmp(type, "InputLayer") && v->kind == TFC_NODE_SEQ && v->n) {
            /* any batch size: a model built by calling it on a batch records that batch's */
            tfc_node *shape = tfc_node_copy(c->out, v);
            shape->vals[0] = scalar(c, "null", 0);
            put(c, args, "batch_shape", shape);
            continue;
        }
        if (bidi && !strcmp(k, "backward_layer")) {
            if (is_null(v)) continue;
            s = check_backward(c, tfc_node_get(cfg, "layer"), v);
        } else if (!strcmp(k, "layer") && is_serialized(v)) {
            s = convert_layer(c, v, bidi ? ROLE_BIDI : ROLE_WRAPPED, &x);
        } else if (!strcmp(k, "cell") && is_serialized(v)) {
            s = convert_layer(c, v, ROLE_CELL, &x);
        } else if (!strcmp(k, "cells") && !strcmp(type, "StackedRNNCells")) {
            s = convert_list(c, v, k, ROLE_CELL, args);
        } else if (!strcmp(k, "layers") && (!strcmp(type, "Pipeline") ||
                                            !strcmp(type, "Sequential"))) {
            s = convert_list(c, v, k, ROLE_WRAPPED, args);
        } else {
            x = convert_value(c, v);
        }
        if (s) return s;
        if (x && !is_default(type, k, x)) put(c, args, k, x);
    }
    return TFC_OK;
}

/* One serialized layer into `{Type: {args}}`. A Sequential inside the model is tfc's
 * Pipeline (Keras saves both the same way); a functional model here is refused (one among
 * the model's layers is written in place by convert_layers, not here). */
static tfc_status convert_layer(conv *c, const tfc_node *ser, int role, tfc_node **out)
{
    if (!is_serialized(ser))
        return tfc_node_error(c->err, TFC_ERR_USAGE, ser, NULL,
                              "expected a serialized layer {class_name, config}");
    const char *cls = sval(ser, "class_name"), *module = sval(ser, "module");
    const char *registered = sval(ser, "registered_name");
    const tfc_node *cfg = tfc_node_get(ser, "config");
    if (!module && cls && !strncmp(cls, "keras_hub>", 10)) /* a legacy .h5: the registered name */
        cls += 10;
    if (cfg->kind != TFC_NODE_MAP)
        return tfc_node_error(c->err, TFC_ERR_USAGE, cfg, "config", "expected a mapping");
    /* keras.applications' own layers where tfc has them (ConvNeXt's LayerScale) */
    int keras = !module || !strncmp(module, "keras.layers", 12) ||
                !strncmp(module, "keras_hub", 9) || !strcmp(module, "keras") ||
                !strncmp(module, "keras.src.models", 16) ||
                (!strncmp(module, "keras.src.applications.", 23) && cls &&
                 tfc_layer_lookup(tfc_keras_type(cls)));
    if (registered && !is_null(tfc_node_get(ser, "registered_name")) &&
        strncmp(registered, "keras_hub>", 10) && strcmp(registered, cls) &&
        strcmp(registered, "Functional"))
        keras = 0;
    if (module && !strncmp(module, "keras.src.ops", 13))
        return tfc_node_error(c->err, TFC_ERR_USAGE, ser, "class_name",
                              "'%s' is a keras.ops operation called on tensors in the graph: "
                              "tfc's graphs hold layers (a layer that does it, or a Lambda's "
                              "work, has to be one of tfc's)", cls);
    if (!keras)
        return tfc_node_error(c->err, TFC_ERR_USAGE, ser, "class_name",
                              "'%s' is not a Keras layer (module %s, registered as %s): tfc "
                              "has no custom layers", cls, module ? module : "?",
                              registered ? registered : "?");
    if (!strcmp(cls, "Functional") || !strcmp(cls, "Model"))
        return tfc_node_error(c->err, TFC_ERR_USAGE, ser, "class_name",
                              "a functional model inside a Sequential inside the model, or "
                              "inside a wrapper, is not supported (one among the model's "
                              "layers is written in place, a Sequential one as a Pipeline)");
    const char *type = !strcmp(cls, "Sequential") ? "Pipeline" : tfc_keras_type(cls);
    tfc_node *args = tfc_node_new_map(c->out, NULL);
    tfc_status s = convert_args(c, cls, cfg, role, args);
    if (s) return s;
    for (int i = 1; i < args->n; i++) { /* the name first, as Keras's configs mostly have it */
        if (strcmp(args->keys[i]->str, "name")) continue;
        tfc_node *k = args->keys[i], *v = args->vals[i];
        memmove(args->keys + 1, args->keys, (size_t)i * sizeof *args->keys);
        memmove(args->vals + 1, args->vals, (size_t)i * sizeof *args->vals);
        args->keys[0] = k;
        args->vals[0] = v;
    }
    *out = tfc_node_new_map(c->out, NULL);
    put(c, *out, type, args);
    return TFC_OK;
}

/* ---- the model: Sequential or functional ---------------------------------------------------- */

/* ---- the mask operations of a functional graph ---------------------------------------------- */

/* Keras 3 records the masks of a functional graph as operations: an Embedding's mask_zero as
 * not_equal(ids, 0), a Masking layer's as not_equal(x, mask_value) then any(axis=-1), and a
 * Concatenate's join of masks as expand_dims, zeros_like, ones_like, logical_or,
 * concatenate and any; later layers take the result as their `mask` call argument. tfc's
 * layers make and pass those masks themselves, so the operations go: each one whose output
 * only masks or feeds another such operation, in a graph with a layer that makes masks
 * (Embedding with mask_zero, Masking, TokenAndPositionEmbedding). Any other operation stays
 * and is refused as such. */

#define MAX_REFS 4096

typedef struct graph_refs {
    const tfc_node *layers;
    int n;                     /* refs */
    int consumer[MAX_REFS];    /* layer index */
    const char *producer[MAX_REFS];
    unsigned char via_mask[MAX_REFS];
} graph_refs;

/* A keras.ops operation in the graph. The config in a legacy .h5 has no module: there an
 * operation is what lacks the `trainable` every layer's config has but InputLayer's (an
 * operation's config is its name and its arguments). */
static int is_op(const tfc_node *l)
{
    const char *module = sval(l, "module"), *cls = sval(l, "class_name");
    const tfc_node *cfg = tfc_node_get(l, "config");
    if (module) return !strncmp(module, "keras.src.ops", 13);
    /* a legacy .h5 names no module: an operation's config has no `trainable`, a layer's
     * mostly does; Discretization's has only its dtype (as do the operations ZerosLike,
     * OnesLike and ConvertToTensor, which are no layer of tfc's), Pipeline's neither */
    if (!cls || !strcmp(cls, "InputLayer") || !strcmp(cls, "Pipeline") ||
        !strcmp(cls, "Sequential") || !cfg || cfg->kind != TFC_NODE_MAP ||
        tfc_node_get(cfg, "trainable"))
        return 0;
    return !(tfc_node_get(cfg, "dtype") && tfc_layer_lookup(tfc_keras_type(cls)));
}

static void collect_refs(graph_refs *g, int consumer, const tfc_node *v, int via_mask)
{
    if (v->kind == TFC_NODE_SCALAR) return;
    if (v->kind == TFC_NODE_MAP) {
        const char *cls = sval(v, "class_name");
        const tfc_node *h = tfc_node_get(tfc_node_get(v, "config"), "keras_history");
        if (cls && !strcmp(cls, "__keras_tensor__") && h && h->kind == TFC_NODE_SEQ && h->n &&
            h->vals[0]->kind == TFC_NODE_SCALAR) {
            if (g->n < MAX_REFS) {
                g->consumer[g->n] = consumer;
                g->producer[g->n] = h->vals[0]->str;
                g->via_mask[g->n++] = (unsigned char)via_mask;
            }
            return;
        }
        for (int i = 0; i < v->n; i++)
            collect_refs(g, consumer, v->vals[i], via_mask || !strcmp(v->keys[i]->str, "mask"));
        return;
    }
    for (int i = 0; i < v->n; i++) collect_refs(g, consumer, v->vals[i], via_mask);
}

static int layer_index(const tfc_node *layers, const char *name)
{
    for (int i = 0; i < layers->n; i++) {
        const char *n = sval(tfc_node_get(layers->vals[i], "config"), "name");
        if (n && !strcmp(n, name)) return i;
    }
    return -1;
}

/* Whether layer i computes a mask tfc's layers pass on themselves. */
static int is_mask_source(const tfc_node *l)
{
    const char *cls = sval(l, "class_name");
    const tfc_node *cfg = tfc_node_get(l, "config");
    if (!cls) return 0;
    if (!strncmp(cls, "keras_hub>", 10)) cls += 10; /* a legacy .h5's registered name */
    if (!strcmp(cls, "Masking")) return 1;
    return (!strcmp(cls, "Embedding") || !strcmp(cls, "TokenAndPositionEmbedding")) &&
           is_true(tfc_node_get(cfg, "mask_zero"));
}

static void find_mask_ops(conv *c, const tfc_node *layers)
{
    int n = layers->n;
    if (n > 4096) return;
    graph_refs *g = calloc(1, sizeof *g);
    unsigned char *mask = calloc((size_t)n + 1, 1);
    if (!g || !mask) goto done;
    for (int i = 0; i < n; i++) {
        mask[i] = (unsigned char)is_op(layers->vals[i]);
        const tfc_node *nodes = tfc_node_get(layers->vals[i], "inbound_nodes");
        if (nodes && nodes->kind != TFC_NODE_SCALAR) collect_refs(g, i, nodes, 0);
    }
    for (int changed = 1; changed;) { /* an operation whose output is data is no mask's */
        changed = 0;
        for (int r = 0; r < g->n; r++) {
            int p = layer_index(layers, g->producer[r]), k = g->consumer[r];
            if (p < 0 || !mask[p] || g->via_mask[r] || mask[k]) continue;
            mask[p] = 0;
            changed = 1;
        }
    }
    int sourced = 0; /* and only where a layer makes masks (Keras's masks start there) */
    for (int i = 0; i < n; i++) sourced |= is_mask_source(layers->vals[i]);
    for (int i = 0; i < n && c->nmasks < 256; i++) {
        const char *name = sval(tfc_node_get(layers->vals[i], "config"), "name");
        if (sourced && mask[i] && name) c->masks[c->nmasks++] = name;
    }
done:
    free(g);
    free(mask);
}

/* Whether `name` is a functional model inside the model, written in place: Keras 2 numbers
 * its call in the model 1 (its call 0 made it), and it is called once (read_call). */
static int is_nested_model(const conv *c, const char *name)
{
    for (int i = 0; i < c->naliases; i++)
        if (!strcmp(c->alias_from[i], name)) return resolve(c, name) != name;
    return 0;
}

/* A reference to a layer by name as tfc's model file reads it. */
static tfc_node *ref_node(conv *c, const tfc_node *name)
{
    const char *to = resolve(c, name->str);
    return to == name->str ? tfc_node_copy(c->out, name) : scalar(c, to, name->quoted);
}

/* A reference to call `node` (Keras's node index) of the layer `name`: its first call is the
 * layer, a further call K its call's output NAME_call_K (flush_calls); Keras 2 numbers a
 * nested model's call in the model 1 (its call 0 made it). */
static tfc_node *call_ref(conv *c, const tfc_node *name, const char *node)
{
    if (!strcmp(node, "0") || is_nested_model(c, name->str)) return ref_node(c, name);
    char call[300];
    snprintf(call, sizeof call, "%s_call_%s", name->str, node);
    return scalar(c, call, name->quoted);
}

/* The producing layers of a functional call's tensors, in order: Keras 3's
 * {class_name: __keras_tensor__, config: {keras_history: [layer, node, index]}} anywhere in
 * args, and Keras 2's [layer, node, index, kwargs] lists. */
static tfc_status collect_inputs(conv *c, const tfc_node *v, const char *layer, tfc_node *names)
{
    if (v->kind == TFC_NODE_MAP) {
        const char *cls = sval(v, "class_name");
        if (!cls || strcmp(cls, "__keras_tensor__")) {
            for (int i = 0; i < v->n; i++) {
                tfc_status s = collect_inputs(c, v->vals[i], layer, names);
                if (s) return s;
            }
            return TFC_OK;
        }
        const tfc_node *h = tfc_node_get(tfc_node_get(v, "config"), "keras_history");
        if (!h || h->kind != TFC_NODE_SEQ || h->n != 3 || h->vals[0]->kind != TFC_NODE_SCALAR)
            return tfc_node_error(c->err, TFC_ERR_USAGE, v, "keras_history",
                                  "expected [layer, node index, tensor index]");
        if (strcmp(item_text(h, 2), "0"))
            return tfc_node_error(c->err, TFC_ERR_USAGE, h, "keras_history",
                                  "layer '%s' reads output %s of call %s of '%s': tfc's layers "
                                  "have one output", layer, item_text(h, 2), item_text(h, 1),
                                  item_text(h, 0));
        if (is_mask_node(c, h->vals[0]->str))
            return tfc_node_error(c->err, TFC_ERR_USAGE, h, "keras_history",
                                  "layer '%s' reads the mask '%s' as data: tfc passes masks "
                                  "from layer to layer itself", layer, h->vals[0]->str);
        tfc_node_seq_push(names, call_ref(c, h->vals[0], item_text(h, 1)));
        return TFC_OK;
    }
    if (v->kind != TFC_NODE_SEQ) return TFC_OK;
    /* Keras 2: [name, node, tensor, {kwargs}] */
    if (c->keras2 && v->n >= 3 && v->vals[0]->kind == TFC_NODE_SCALAR && v->vals[0]->quoted) {
        if (strcmp(item_text(v, 2), "0"))
            return tfc_node_error(c->err, TFC_ERR_USAGE, v, NULL,
                                  "layer '%s' reads output %s of call %s of '%s': tfc's layers "
                                  "have one output", layer, item_text(v, 2), item_text(v, 1),
                                  item_text(v, 0));
        tfc_node_seq_push(names, call_ref(c, v->vals[0], item_text(v, 1)));
        return TFC_OK;
    }
    for (int i = 0; i < v->n; i++) {
        tfc_status s = collect_inputs(c, v->vals[i], layer, names);
        if (s) return s;
    }
    return TFC_OK;
}

/* Call arguments tfc writes as layer arguments (SPEC §1: use_causal_mask), and the call
 * arguments that change nothing when they are null or false. */
static tfc_status convert_call_kwargs(conv *c, const tfc_node *kw, const char *layer,
                                      tfc_node *args, tfc_node *names)
{
    static const char *const tensors[] = {"query", "value", "key", "inputs", NULL};
    for (int t = 0; tensors[t]; t++) {
        const tfc_node *v = tfc_node_get(kw, tensors[t]);
        if (v && !is_null(v)) {
            tfc_status s = collect_inputs(c, v, layer, names);
            if (s) return s;
        }
    }
    for (int i = 0; i < kw->n; i++) {
        const char *k = kw->keys[i]->str;
        const tfc_node *v = kw->vals[i];
        int tensor = 0;
        for (int t = 0; tensors[t]; t++) tensor |= !strcmp(k, tensors[t]);
        /* Keras records the training flag of the call that built the graph; a call of the
         * model passes its own to every layer */
        if (tensor || !strcmp(k, "training")) continue;
        if (!strcmp(k, "use_causal_mask")) {
            if (is_true(v)) put(c, args, k, scalar(c, "true", 0));
            continue;
        }
        if (is_null(v) || (v->kind == TFC_NODE_SCALAR && !strcmp(v->str, "false"))) continue;
        if (!strcmp(k, "mask")) { /* an Embedding's mask, which tfc's layers pass on too */
            const tfc_node *h = tfc_node_get(tfc_node_get(v, "config"), "keras_history");
            if (h && h->kind == TFC_NODE_SEQ && h->n == 3 && is_mask_node(c, item_text(h, 0)))
                continue;
        }
        return tfc_node_error(c->err, TFC_ERR_USAGE, v, k,
                              "layer '%s' is called with %s: tfc's layers take no such call "
                              "argument", layer, k);
    }
    return TFC_OK;
}

/* The one input or output of a functional model: ["name", 0, 0] or [["name", 0, 0]]. */
static const char *endpoint(conv *c, const tfc_node *cfg, const char *key)
{
    const tfc_node *v = tfc_node_get(cfg, key);
    if (v && v->kind == TFC_NODE_SEQ && v->n == 1 && v->vals[0]->kind == TFC_NODE_SEQ)
        v = v->vals[0];
    if (v && v->kind == TFC_NODE_SEQ && v->n == 3 && v->vals[0]->kind == TFC_NODE_SCALAR)
        return v->vals[0]->str;
    tfc_node_error(c->err, TFC_ERR_USAGE, v ? v : cfg, key,
                   "tfc's models have one %s; this one has %d", !strcmp(key, "input_layers")
                   ? "input" : "output", v && v->kind == TFC_NODE_SEQ ? v->n : 0);
    return NULL;
}

/* A functional model's inputs, input_layers [["name", 0, 0], ...] (or one ["name", 0, 0]),
 * into c->inputs; the first one's name, or NULL with the error set. */
static const char *input_endpoints(conv *c, const tfc_node *cfg)
{
    const tfc_node *v = tfc_node_get(cfg, "input_layers");
    if (v && v->kind == TFC_NODE_SEQ && v->n > 1 && v->n <= TFC_MODEL_MAX_INPUTS &&
        v->vals[0]->kind == TFC_NODE_SEQ) {
        for (int i = 0; i < v->n; i++) {
            const tfc_node *e = v->vals[i];
            if (e->kind != TFC_NODE_SEQ || e->n != 3 || e->vals[0]->kind != TFC_NODE_SCALAR) {
                tfc_node_error(c->err, TFC_ERR_USAGE, e, "input_layers",
                               "expected [\"name\", 0, 0]");
                return NULL;
            }
            c->inputs[i] = e->vals[0]->str;
        }
        c->ninputs = v->n;
        return c->inputs[0];
    }
    if (v && v->kind == TFC_NODE_SEQ && v->n > TFC_MODEL_MAX_INPUTS) {
        tfc_node_error(c->err, TFC_ERR_USAGE, v, "input_layers", "tfc's models have at most %d "
                       "inputs; this one has %d", TFC_MODEL_MAX_INPUTS, v->n);
        return NULL;
    }
    return endpoint(c, cfg, "input_layers");
}

/* A functional model's outputs, output_layers [["name", 0, 0], ...] of two or more, into
 * c->outputs; 1 with the error set for a malformed list, else 0 (one output: endpoint). */
static int output_endpoints(conv *c, const tfc_node *cfg)
{
    const tfc_node *v = tfc_node_get(cfg, "output_layers");
    if (v && v->kind == TFC_NODE_MAP) {
        tfc_node_error(c->err, TFC_ERR_USAGE, v, "output_layers", "the model's outputs are a "
                       "dict: tfc's models list their outputs (Model(outputs=[...]))");
        return 1;
    }
    if (!v || v->kind != TFC_NODE_SEQ || v->n < 2 || v->vals[0]->kind != TFC_NODE_SEQ)
        return 0;
    if (v->n > TFC_MODEL_MAX_OUTPUTS) {
        tfc_node_error(c->err, TFC_ERR_USAGE, v, "output_layers", "tfc's models have at most "
                       "%d outputs; this one has %d", TFC_MODEL_MAX_OUTPUTS, v->n);
        return 1;
    }
    for (int i = 0; i < v->n; i++) {
        const tfc_node *e = v->vals[i];
        if (e->kind != TFC_NODE_SEQ || e->n != 3 || e->vals[0]->kind != TFC_NODE_SCALAR ||
            e->vals[1]->kind != TFC_NODE_SCALAR || e->vals[2]->kind != TFC_NODE_SCALAR) {
            tfc_node_error(c->err, TFC_ERR_USAGE, e, "output_layers",
                           "expected [\"name\", 0, 0]");
            return 1;
        }
        if (strcmp(e->vals[2]->str, "0")) {
            tfc_node_error(c->err, TFC_ERR_USAGE, e, "output_layers", "output %d is tensor %s of "
                           "layer '%s': tfc's layers have one output", i, e->vals[2]->str,
                           e->vals[0]->str);
            return 1;
        }
        c->outputs[i][0] = e->vals[0];
        c->outputs[i][1] = e->vals[1];
    }
    c->noutputs = v->n;
    return 0;
}

/* Whether `v` is a functional call's tensor argument. */
static int is_tensor(const tfc_node *v)
{
    const char *cls = sval(v, "class_name");
    return cls && !strcmp(cls, "__keras_tensor__");
}

/* Whether `v` is a plain number: its text, else NULL. */
static const char *number_text(const tfc_node *v)
{
    if (v->kind != TFC_NODE_SCALAR || v->quoted || !v->str[0]) return NULL;
    char *end;
    strtod(v->str, &end);
    return *end ? NULL : v->str;
}

/* An elementwise keras.ops operation as the layer that computes it exactly: of a tensor and
 * a number (x + 3.0 and x * (1 / 6), MobileNetV3's hard sigmoid) a Rescaling, of two
 * tensors an Add, Subtract or Multiply layer. Anything else is refused as an operation. */
static tfc_status convert_op(conv *c, const tfc_node *l, tfc_node **out)
{
    const char *cls = sval(l, "class_name"), *name = sval(tfc_node_get(l, "config"), "name");
    if (!cls) /* an operation's module without its class (a broken file) */
        return tfc_node_error(c->err, TFC_ERR_USAGE, l, "class_name",
                              "missing: a keras.ops operation names its class");
    const tfc_node *nodes = tfc_node_get(l, "inbound_nodes");
    const tfc_node *node = nodes && nodes->kind == TFC_NODE_SEQ && nodes->n == 1
                               ? nodes->vals[0] : NULL;
    const tfc_node *a = node ? tfc_node_get(node, "args") : NULL;
    const tfc_node *kw = node ? tfc_node_get(node, "kwargs") : NULL;
    int add = !strcmp(cls, "Add"), sub = !strcmp(cls, "Subtract"), mul = !strcmp(cls, "Multiply");
    if (name && (add || sub || mul) && a && a->kind == TFC_NODE_SEQ && a->n == 2 &&
        (!kw || kw->kind != TFC_NODE_MAP || !kw->n)) {
        int t0 = is_tensor(a->vals[0]), t1 = is_tensor(a->vals[1]);
        const char *n = !t0 ? number_text(a->vals[0]) : !t1 ? number_text(a->vals[1]) : NULL;
        tfc_node *args = tfc_node_new_map(c->out, NULL);
        put(c, args, "name", scalar(c, name, 0));
        *out = tfc_node_new_map(c->out, NULL);
        if (t0 && t1) {
            put(c, *out, add ? "Add" : sub ? "Subtract" : "Multiply", args);
            return TFC_OK;
        }
        if ((t0 || t1) && n) {
            char neg[64];
            snprintf(neg, sizeof neg, "%s%s", n[0] == '-' ? "" : "-", n + (n[0] == '-'));
            /* x + n; x - n; n - x = -x + n; x * n */
            put(c, args, "scale", scalar(c, mul ? n : sub && t1 ? "-1" : "1", 0));
            if (!mul) put(c, args, "offset", scalar(c, sub && t0 ? neg : n, 0));
            put(c, *out, "Rescaling", args);
            return TFC_OK;
        }
    }
    return tfc_node_error(c->err, TFC_ERR_USAGE, l, "class_name",
                          "'%s' is a keras.ops operation called on tensors in the graph: "
                          "tfc's graphs hold layers (of the operations, elementwise add, "
                          "subtract and multiply of two tensors or of a tensor and a number "
                          "become layers)", cls);
}

/* Call k of layer `l` in a functional graph: the layers it reads into `names` (as
 * references resolve), the call arguments tfc writes as layer arguments into `args`. A model
 * inside, or a layer inside one, is called once. */
static tfc_status read_call(conv *c, const tfc_node *l, const char *name, int k, tfc_node *args,
                           tfc_node *names, const tfc_node **call)
{
    tfc_status s = TFC_OK;
    const tfc_node *nodes = tfc_node_get(l, "inbound_nodes");
    const char *what = sval(l, "class_name") && (!strcmp(sval(l, "class_name"), "Functional") ||
                                                 !strcmp(sval(l, "class_name"), "Model"))
                           ? "model" : "layer";
    if (!nodes || nodes->kind != TFC_NODE_SEQ || nodes->n == 0)
        return tfc_node_error(c->err, TFC_ERR_USAGE, l, "inbound_nodes",
                              "%s '%s' is never called", what, name);
    if (nodes->n > 1 && (*what == 'm' || c->depth))
        return tfc_node_error(c->err, TFC_ERR_USAGE, nodes->vals[1], "inbound_nodes",
                              "%s '%s' is called %d times (a shared %s%s): tfc calls %s "
                              "once", what, name, nodes->n, what,
                              *what == 'm' ? "" : " inside a model", *what == 'm'
                              ? "a model inside" : "the layers of a model inside");
    if (k >= nodes->n)
        return tfc_node_error(c->err, TFC_ERR_USAGE, l, "inbound_nodes",
                              "%s '%s' has no call %d", what, name, k);
    const tfc_node *node = nodes->vals[k];
    *call = node;
    if (node->kind == TFC_NODE_MAP) {
        const tfc_node *a = tfc_node_get(node, "args"), *kw = tfc_node_get(node, "kwargs");
        if (a) s = collect_inputs(c, a, name, names);
        if (!s && kw && kw->kind == TFC_NODE_MAP)
            s = convert_call_kwargs(c, kw, name, args, names);
    } else {
        s = collect_inputs(c, node, name, names);
        for (int i = 0; !s && i < node->n; i++) {  /* Keras 2's kwargs, each input's 4th */
            const tfc_node *e = node->vals[i];
            if (e->kind == TFC_NODE_SEQ && e->n == 4 && e->vals[3]->kind == TFC_NODE_MAP)
                s = convert_call_kwargs(c, e->vals[3], name, args, names);
        }
    }
    if (s) return s;
    if (names->n == 0)
        return tfc_node_error(c->err, TFC_ERR_USAGE, node, "inbound_nodes",
                              "%s '%s' reads no tensor", what, name);
    return TFC_OK;
}

/* One layer of a functional model, its call's inputs as `inputs:` unless it reads just the
 * layer before it. */
static tfc_status convert_graph_layer(conv *c, const tfc_node *l, const char *prev,
                                      tfc_node **out)
{
    tfc_status s = is_op(l) ? convert_op(c, l, out) : convert_layer(c, l, ROLE_TOP, out);
    if (s) return s;
    tfc_node *args = (*out)->vals[0];
    const char *name = sval(tfc_node_get(l, "config"), "name");
    tfc_node *names = new_seq(c);
    const tfc_node *call;
    s = read_call(c, l, name ? name : "?", 0, args, names, &call);
    if (s) return s;
    if (!(names->n == 1 && prev && !strcmp(names->vals[0]->str, prev)))
        put(c, args, "inputs", names);
    const tfc_node *nodes = tfc_node_get(l, "inbound_nodes");
    for (int k = 1; k < nodes->n; k++) { /* a shared layer's further calls */
        if (!name) /* its calls are items keyed by its name */
            return tfc_node_error(c->err, TFC_ERR_USAGE, tfc_node_get(l, "config"), "config",
                                  "a layer called %d times has no name", nodes->n);
        if (c->ncalls == MAX_ALIASES)
            return tfc_node_error(c->err, TFC_ERR_USAGE, nodes->vals[k], "inbound_nodes",
                                  "more than %d calls of shared layers", MAX_ALIASES);
        c->calls[c->ncalls++] = (struct pending_call){l, name, k};
    }
    return TFC_OK;
}

/* A serialized Keras loss as tfc's `{type, from_logits, label_smoothing}` (or its name
 * alone) when the rest of its config is Keras's defaults; NULL to keep Keras's form. */
static tfc_node *convert_loss(conv *c, const tfc_node *loss)
{
    const tfc_node *cfg = tfc_node_get(loss, "config");
    const char *name = sval(cfg, "name");
    if (!name || cfg->kind != TFC_NODE_MAP) return NULL;
    tfc_node *m = tfc_node_new_map(c->out, NULL);
    put(c, m, "type", scalar(c, name, 0));
    for (int i = 0; i < cfg->n; i++) {
        const char *k = cfg->keys[i]->str;
        const tfc_node *v = cfg->vals[i];
        if (!strcmp(k, "name") || is_null(v)) continue;
        if (!strcmp(k, "reduction") && same_scalar(v, "sum_over_batch_size")) continue;
        if (!strcmp(k, "axis") && same_scalar(v, "-1")) continue;
        if ((!strcmp(k, "label_smoothing") && same_scalar(v, "0")) ||
            (!strcmp(k, "from_logits") && same_scalar(v, "false")))
            continue;
        if (strcmp(k, "from_logits") && strcmp(k, "label_smoothing")) return NULL;
        put(c, m, k, tfc_node_copy(c->out, v));
    }
    return m->n == 1 ? scalar(c, name, 0) : m;
}

/* One loss of compile_config (a name, a serialized loss or a function): its form in the
 * model file, or NULL (not one loss). */
static tfc_node *one_loss(conv *c, const tfc_node *loss)
{
    if (is_serialized(loss) && !strcmp(sval(loss, "class_name"), "function") &&
        sval(loss, "config")) /* loss=keras.losses.binary_crossentropy: its name */
        loss = tfc_node_get(loss, "config");
    tfc_node *short_form = is_serialized(loss) ? convert_loss(c, loss) : NULL;
    if (short_form) return short_form;
    if (loss->kind == TFC_NODE_SCALAR || is_serialized(loss)) return convert_value(c, loss);
    return NULL;
}

/* Whether a loss of compile_config takes logits (from_logits: true). */
static int loss_from_logits(const tfc_node *loss)
{
    return is_serialized(loss) &&
           is_true(tfc_node_get(tfc_node_get(loss, "config"), "from_logits"));
}

/* A list of compile_config's metrics as `metrics:` takes them (those tfc lacks noted). */
static tfc_node *metric_list(conv *c, const tfc_node *metrics, int loss_logits)
{
    tfc_node *seq = new_seq(c);
    for (int i = 0; i < metrics->n; i++) {
        const tfc_node *m = metrics->vals[i];
        if (is_serialized(m) && tfc_metric_class_name(sval(m, "class_name"))) {
            /* a metric class with the arguments not at Keras's defaults: {AUC: {curve:
             * PR}}, or the name it reports alone (precision) */
            const char *cls = sval(m, "class_name");
            const tfc_node *cfg = tfc_node_get(m, "config");
            tfc_node *args = tfc_node_new_map(c->out, NULL);
            for (int k = 0; cfg->kind == TFC_NODE_MAP && k < cfg->n; k++)
                if (!tfc_metric_default_arg(cls, cfg->keys[k]->str, cfg->vals[k]))
                    put(c, args, cfg->keys[k]->str, convert_value(c, cfg->vals[k]));
            if (loss_logits && !strcmp(cls, "BinaryAccuracy"))
                note(c->rep, "BinaryAccuracy thresholds the logits of a from_logits loss at "
                     "its threshold, as Keras's (0.5: a probability of 0.62); without "
                     "threshold: tfc's binary_accuracy reads logits at 0");
            const char *plain = tfc_metric_class_name(cls); /* precision */
            tfc_node *item = tfc_node_new_map(c->out, NULL);
            put(c, item, cls, args);
            tfc_node_seq_push(seq, args->n || !tfc_metric_class_name(plain)
                                       ? item : scalar(c, plain, 0));
            continue;
        }
        const char *name = m->kind == TFC_NODE_SCALAR ? m->str : NULL;
        char snake[96] = "";
        if (is_serialized(m)) { /* its name, else its class's */
            name = sval(tfc_node_get(m, "config"), "name");
            tfc_snake_case(sval(m, "class_name"), snake, sizeof snake);
            if (!name || !tfc_metric_known(name)) name = snake;
        }
        if (name && tfc_metric_known(name))
            tfc_node_seq_push(seq, scalar(c, name, 0));
        else
            note(c->rep, "the metric %s is not tfc's: left out of metrics:",
                 name ? name : "(unnamed)");
    }
    return seq;
}

/* A per-output value of a model of several outputs' compile_config (a mapping by output
 * name, keys resolved to tfc's names, or a list in the outputs' order), each value through
 * `each` (NULL: copied) with *bad set where one does not convert. */
static tfc_node *per_output_value(conv *c, const tfc_node *v, const tfc_node *loss,
                                  tfc_node *(*each)(conv *, const tfc_node *, const tfc_node *),
                                  int *bad)
{
    const int map = v->kind == TFC_NODE_MAP;
    tfc_node *out = map ? tfc_node_new_map(c->out, NULL) : new_seq(c);
    for (int i = 0; i < v->n; i++) {
        const tfc_node *l = !loss ? NULL : map ? tfc_node_get(loss, v->keys[i]->str)
                                  : loss->kind == TFC_NODE_SEQ && i < loss->n ? loss->vals[i]
                                                                             : NULL;
        tfc_node *x = each ? each(c, v->vals[i], l) : tfc_node_copy(c->out, v->vals[i]);
        if (!x) {
            *bad = 1;
            continue;
        }
        if (map) put(c, out, resolve(c, v->keys[i]->str), x);
        else tfc_node_seq_push(out, x);
    }
    return out;
}

static tfc_node *each_loss(conv *c, const tfc_node *v, const tfc_node *unused)
{
    (void)unused;
    return one_loss(c, v);
}

static tfc_node *each_metrics(conv *c, const tfc_node *v, const tfc_node *loss)
{
    if (v->kind != TFC_NODE_SEQ) return NULL;
    return metric_list(c, v, loss && loss_from_logits(loss));
}

static tfc_status convert_compile(conv *c, const tfc_node *compile, tfc_node *root)
{
    const tfc_node *loss = tfc_node_get(compile, "loss");
    const tfc_node *metrics = tfc_node_get(compile, "metrics");
    const tfc_node *weights = tfc_node_get(compile, "loss_weights");
    if (c->noutputs) { /* several outputs: a loss, weight and metric list each */
        const int each = loss && (loss->kind == TFC_NODE_SEQ ||
                                  (loss->kind == TFC_NODE_MAP && !is_serialized(loss)));
        int bad = 0;
        if (loss && !is_null(loss)) {
            tfc_node *v = each ? per_output_value(c, loss, NULL, each_loss, &bad)
                               : one_loss(c, loss);
            if (v && !bad) put(c, root, "loss", v);
            else note(c->rep, "a loss tfc does not read: no loss: written");
        }
        if (weights && (weights->kind == TFC_NODE_SEQ || weights->kind == TFC_NODE_MAP))
            put(c, root, "loss_weights", per_output_value(c, weights, NULL, NULL, &bad));
        bad = 0;
        if (metrics && (metrics->kind == TFC_NODE_MAP || metrics->kind == TFC_NODE_SEQ)) {
            tfc_node *v = per_output_value(c, metrics, each ? loss : NULL, each_metrics, &bad);
            if (!bad && v->n) put(c, root, "metrics", v);
            else if (bad) note(c->rep, "metrics not given per output: no metrics: written");
        }
    } else {
        if (loss && !is_null(loss)) {
            tfc_node *v = one_loss(c, loss);
            if (v) put(c, root, "loss", v);
            else note(c->rep, "the model was compiled with several losses; tfc's model file "
                      "has one: no loss: written");
        }
        if (metrics && metrics->kind == TFC_NODE_SEQ && metrics->n) {
            tfc_node *seq = metric_list(c, metrics, loss_from_logits(loss));
            if (seq->n) put(c, root, "metrics", seq);
        }
    }
    const tfc_node *opt = tfc_node_get(compile, "optimizer");
    if (is_serialized(opt))
        note(c->rep, "compiled with the optimizer %s: a solver file's optimizer: takes Keras's "
             "arguments (docs/solver.md)", sval(opt, "class_name"));
    return TFC_OK;
}

/* ---- the layers of a model, a functional one inside in place ------------------------------- */

static tfc_status convert_layers(conv *c, const tfc_node *layers, int functional,
                                 const char *feed, tfc_node *seq, const char **prev,
                                 const char **last);

static int is_model_class(const char *cls)
{
    return cls && (!strcmp(cls, "Functional") || !strcmp(cls, "Model"));
}

/* Whether a layer reads token ids (an Embedding's kind), which Keras casts to int32. */
static int reads_ids(const tfc_node *l)
{
    const char *cls = sval(l, "class_name");
    if (cls && !strncmp(cls, "keras_hub>", 10)) cls += 10;
    return cls && (!strcmp(cls, "Embedding") || !strcmp(cls, "TokenAndPositionEmbedding"));
}

/* Whether the model's input `name` goes only to layers that read token ids: in a functional
 * graph every layer that reads it, in a Sequential the first. keras.io's transformer example
 * declares `keras.Input(shape=(maxlen,))`, float32, and its Embedding casts the floats to int32
 * ids; tfc's Embedding takes the model's int32 input. */
static int input_feeds_ids(const tfc_node *layers, int functional, const char *name)
{
    if (!functional) {
        for (int i = 0; i < layers->n; i++) {
            const char *cls = sval(layers->vals[i], "class_name");
            if (!cls || strcmp(cls, "InputLayer")) return reads_ids(layers->vals[i]);
        }
        return 0;
    }
    graph_refs *g = calloc(1, sizeof *g);
    if (!g || !name) {
        free(g);
        return 0;
    }
    for (int i = 0; i < layers->n && i < MAX_REFS; i++) {
        const tfc_node *nodes = tfc_node_get(layers->vals[i], "inbound_nodes");
        if (nodes && nodes->kind != TFC_NODE_SCALAR) collect_refs(g, i, nodes, 0);
    }
    int ids = 0, other = 0;
    for (int r = 0; r < g->n; r++) {
        if (strcmp(g->producer[r], name)) continue;
        if (reads_ids(layers->vals[g->consumer[r]])) ids = 1;
        else other = 1;
    }
    free(g);
    return ids && !other;
}

/* Records a layer's name, which must be the only one of its name in the model file. */
static tfc_status claim_name(conv *c, const tfc_node *l, const char *name)
{
    for (int i = 0; name && i < c->nnames; i++)
        if (!strcmp(c->names[i].name, name))
            return tfc_node_error(c->err, TFC_ERR_USAGE, l, "name", "two layers are named "
                                  "'%s'%s: rename one in Keras", name,
                                  c->depth || c->names[i].nested
                                  ? " (a functional model's layers are written in place among "
                                    "the model's)" : "");
    if (!name) return TFC_OK;
    if (c->nnames == c->cap_names) {
        int cap = c->cap_names ? 2 * c->cap_names : 256;
        struct claimed *n = realloc(c->names, (size_t)cap * sizeof *n);
        if (!n) return tfc_error_set(c->err, TFC_ERR_NOMEM, "out of memory");
        c->names = n;
        c->cap_names = cap;
    }
    c->names[c->nnames++] = (struct claimed){name, c->depth > 0};
    return TFC_OK;
}

/* Whether a layer of that name is written (claimed) already. */
static int claimed(const conv *c, const char *name)
{
    for (int i = 0; i < c->nnames; i++)
        if (!strcmp(c->names[i].name, name)) return 1;
    return 0;
}

/* Writes each pending further call of a shared layer whose inputs are written, as
 * `- NAME: {inputs: [...], name: NAME_call_K}` (SPEC §1), until none is ready; *prev becomes
 * the last one written. A call with call arguments is an error naming it. */
static tfc_status flush_calls(conv *c, tfc_node *seq, const char **prev)
{
    for (int again = 1; again;) {
        again = 0;
        for (int i = 0; i < c->ncalls; i++) {
            const struct pending_call p = c->calls[i];
            tfc_node *names = new_seq(c), *args = tfc_node_new_map(c->out, NULL);
            const tfc_node *call;
            tfc_status s = read_call(c, p.l, p.name, p.k, args, names, &call);
            if (s) return s;
            if (args->n)
                return tfc_node_error(c->err, TFC_ERR_USAGE, call, "inbound_nodes",
                                      "call %d of layer '%s' has the call argument %s: a "
                                      "further call of a layer takes its inputs only in tfc",
                                      p.k, p.name, args->keys[0]->str);
            int ready = 1;
            for (int j = 0; j < names->n; j++) ready &= claimed(c, names->vals[j]->str);
            if (!ready) continue;
            char text[300];
            snprintf(text, sizeof text, "%s_call_%d", p.name, p.k);
            tfc_node *nm = scalar(c, text, 0), *a = tfc_node_new_map(c->out, NULL),
                     *x = tfc_node_new_map(c->out, NULL);
            put(c, a, "inputs", names);
            put(c, a, "name", nm);
            put(c, x, p.name, a);
            s = claim_name(c, p.l, nm->str);
            if (s) return s;
            tfc_node_seq_push(seq, x);
            *prev = nm->str;
            c->calls[i--] = c->calls[--c->ncalls];
            again = 1;
        }
    }
    return TFC_OK;
}

/* A functional model among the model's layers (keras.io's transfer learning: a frozen
 * application called on the input): its layers in place, its InputLayer read as `feed` (what
 * it is called on), and a reference to it later as one to its output layer. Keras 3's
 * Functional.call passes its own training flag to every operation, so the `training=False`
 * of such a call changes nothing in fit, in Keras as in tfc; `trainable: false` on the model
 * freezes each of its layers (Keras's setter sets theirs). */
static tfc_status inline_model(conv *c, const tfc_node *l, const char *feed, tfc_node *seq,
                               const char **prev, const char **last)
{
    const tfc_node *cfg = tfc_node_get(l, "config");
    const char *name = sval(cfg, "name");
    const tfc_node *layers = tfc_node_get(cfg, "layers");
    if (!name || cfg->kind != TFC_NODE_MAP)
        return tfc_node_error(c->err, TFC_ERR_USAGE, cfg, "config", "expected a functional "
                              "model's config {name, layers, input_layers, output_layers}");
    if (!layers || layers->kind != TFC_NODE_SEQ)
        return tfc_node_error(c->err, TFC_ERR_USAGE, cfg, "layers", "expected a list");
    if (c->depth >= 16)
        return tfc_node_error(c->err, TFC_ERR_USAGE, l, "class_name",
                              "models nested more than 16 deep");
    const char *in = endpoint(c, cfg, "input_layers"), *out = endpoint(c, cfg, "output_layers");
    if (!in || !out) return c->err->code;
    if (c->naliases + 2 > MAX_ALIASES)
        return tfc_node_error(c->err, TFC_ERR_USAGE, l, "class_name",
                              "more than %d functional models inside the model",
                              MAX_ALIASES / 2);
    const tfc_node *t = tfc_node_get(cfg, "trainable");
    const int frozen = t && !is_null(t) && !is_true(t);
    const int saved = c->naliases;
    c->alias_from[c->naliases] = in;
    c->alias_to[c->naliases++] = feed;
    c->frozen += frozen;
    c->depth++;
    find_mask_ops(c, layers);
    const char *inner_last = NULL;
    tfc_status s = convert_layers(c, layers, 1, in, seq, prev, &inner_last);
    const char *output = resolve(c, out);
    c->frozen -= frozen;
    c->depth--;
    c->naliases = saved; /* the names inside mean nothing outside */
    if (s) return s;
    c->alias_from[c->naliases] = name;
    c->alias_to[c->naliases++] = output;
    *last = output;
    return TFC_OK;
}

/* The layers of a model into `seq`, `prev` the last one written (NULL: none yet), `last` what
 * the model's last layer stands for (a nested model's output layer). `feed`: in a functional
 * model inside, the name of its InputLayer (read as what the model is called on), which is
 * not written; NULL at the top, whose InputLayer is. */
static tfc_status convert_layers(conv *c, const tfc_node *layers, int functional,
                                 const char *feed, tfc_node *seq, const char **prev,
                                 const char **last)
{
    const char *want = NULL; /* a Sequential's: the nested model's output its next layer reads */
    if (functional && !feed) find_mask_ops(c, layers);
    for (int i = 0; i < layers->n; i++) {
        const tfc_node *l = layers->vals[i];
        const char *lc = sval(l, "class_name");
        const char *name = sval(tfc_node_get(l, "config"), "name");
        tfc_node *x;
        tfc_status s;
        if (functional && is_mask_node(c, name)) continue;
        if (lc && !strcmp(lc, "InputLayer")) {
            if (feed && name && !strcmp(name, feed)) continue;
            int at = -1; /* its place among several inputs */
            for (int k = 0; k < c->ninputs && !feed; k++)
                if (name && !strcmp(name, c->inputs[k])) at = k;
            if ((i || feed) && at < 0)
                return tfc_node_error(c->err, TFC_ERR_USAGE, l, "class_name", "a second input%s",
                                      feed ? " of a model inside: tfc's models inside have one"
                                           : ", not among the model's input_layers");
            s = convert_layer(c, l, ROLE_TOP, &x);
            const tfc_node *dt = s ? NULL : tfc_node_get(x->vals[0], "dtype");
            const int floats = !dt || (dt->kind == TFC_NODE_SCALAR && !strcmp(dt->str,
                                                                             "float32"));
            if (!s && floats && input_feeds_ids(layers, functional, name)) {
                put(c, x->vals[0], "dtype", scalar(c, "int32", 0));
                note(c->rep, "the model's input is float32 in Keras, whose Embedding casts it "
                     "to int32 token ids: tfc's input is int32 (dtype: int32), the data's "
                     "values read as ids");
            }
            if (!s && at >= 0) { /* written first (convert_model); what follows names it */
                s = claim_name(c, l, name);
                if (s) return s;
                c->input_items[at] = x;
                *prev = NULL;
                continue;
            }
        } else if (is_model_class(lc) && tfc_node_get(l, "config") &&
                   tfc_node_get(tfc_node_get(l, "config"), "layers")) {
            /* what it is called on: its call's one tensor, or a Sequential's layer before */
            const char *on = *prev ? *prev : "input";
            if (functional) {
                tfc_node *names = new_seq(c), *scratch = tfc_node_new_map(c->out, NULL);
                const tfc_node *call;
                s = read_call(c, l, name ? name : "?", 0, scratch, names, &call);
                if (s) return s;
                if (names->n != 1 || scratch->n)
                    return tfc_node_error(c->err, TFC_ERR_USAGE, call, "inbound_nodes",
                                          "model '%s' is called on %d tensors%s: tfc's models "
                                          "have one input", name ? name : "?", names->n,
                                          scratch->n ? " with call arguments" : "");
                on = names->vals[0]->str;
                const tfc_node *kw = call->kind == TFC_NODE_MAP ? tfc_node_get(call, "kwargs")
                                                                : NULL;
                const tfc_node *tr = kw && kw->kind == TFC_NODE_MAP
                                         ? tfc_node_get(kw, "training") : NULL;
                if (tr && !is_null(tr) && !is_true(tr))
                    note(c->rep, "the model calls '%s' with training=False, which Keras 3's fit "
                         "overrides with its own flag (Functional.call passes it to every "
                         "layer), as tfc does: a BatchNormalization inside runs in inference "
                         "mode in training when it has trainable: false", name ? name : "?");
            } else if (want) {
                on = want;
            }
            s = inline_model(c, l, on, seq, prev, &want);
            if (s) return s;
            if (!functional && *prev && !strcmp(want, *prev)) want = NULL;
            continue;
        } else if (functional) {
            s = convert_graph_layer(c, l, *prev, &x);
        } else {
            s = convert_layer(c, l, ROLE_TOP, &x);
            if (!s && want) { /* after a nested model whose output is not its last layer */
                tfc_node *names = new_seq(c);
                tfc_node_seq_push(names, scalar(c, want, 1));
                put(c, x->vals[0], "inputs", names);
            }
            want = NULL;
        }
        if (!s) s = claim_name(c, l, name);
        if (s) return s;
        if (c->frozen && !(lc && !strcmp(lc, "InputLayer")) &&
            !tfc_node_get(x->vals[0], "trainable"))
            put(c, x->vals[0], "trainable", scalar(c, "false", 0));
        *prev = name;
        tfc_node_seq_push(seq, x);
        if (!(lc && !strcmp(lc, "InputLayer"))) c->rep->layers++;
        if (functional && c->ncalls && (s = flush_calls(c, seq, prev))) return s;
    }
    if (functional && c->ncalls && !c->depth) {
        const struct pending_call *p = &c->calls[0];
        return tfc_node_error(c->err, TFC_ERR_USAGE, tfc_node_get(p->l, "inbound_nodes"),
                              "inbound_nodes", "call %d of layer '%s' reads a tensor that no "
                              "layer of the model makes", p->k, p->name);
    }
    *last = want ? want : *prev;
    return TFC_OK;
}

/* The whole configuration into the model file's root mapping. */
static tfc_status convert_model(conv *c, const tfc_node *top, tfc_node *root)
{
    if (!is_serialized(top))
        return tfc_node_error(c->err, TFC_ERR_USAGE, top, NULL,
                              "expected a Keras model's configuration {class_name, config}");
    const char *cls = sval(top, "class_name");
    const tfc_node *cfg = tfc_node_get(top, "config");
    c->keras2 = !tfc_node_get(top, "module");
    int functional = !strcmp(cls, "Functional") || !strcmp(cls, "Model");
    if (!functional && strcmp(cls, "Sequential"))
        return tfc_node_error(c->err, TFC_ERR_USAGE, top, "class_name",
                              "'%s': tfc imports Sequential and functional models (a "
                              "subclassed model's code is not in its file)", cls);
    const char *name = sval(cfg, "name");
    snprintf(c->rep->model, sizeof c->rep->model, "%s", name ? name : "model");
    put(c, root, "name", scalar(c, c->rep->model, 0));
    const tfc_node *layers = tfc_node_get(cfg, "layers");
    if (!layers || layers->kind != TFC_NODE_SEQ)
        return tfc_node_error(c->err, TFC_ERR_USAGE, cfg, "layers", "expected a list");
    const char *input = functional ? input_endpoints(c, cfg) : NULL;
    if (functional && output_endpoints(c, cfg)) return c->err->code;
    const char *output = functional && !c->noutputs ? endpoint(c, cfg, "output_layers") : NULL;
    if (functional && (!input || (!output && !c->noutputs))) return c->err->code;
    tfc_node *seq = new_seq(c);
    const char *prev = NULL, *last = NULL;
    tfc_status s = convert_layers(c, layers, functional, NULL, seq, &prev, &last);
    if (s) return s;
    if (c->ninputs > 1) { /* the InputLayers first, in input_layers' order */
        tfc_node *all = new_seq(c);
        for (int k = 0; k < c->ninputs; k++) {
            if (!c->input_items[k])
                return tfc_node_error(c->err, TFC_ERR_USAGE, tfc_node_get(cfg, "input_layers"),
                                      "input_layers", "no InputLayer is named '%s'",
                                      c->inputs[k]);
            tfc_node_seq_push(all, c->input_items[k]);
        }
        for (int i = 0; i < seq->n; i++) tfc_node_seq_push(all, seq->vals[i]);
        seq = all;
    }
    if (c->noutputs) { /* `outputs:`, the last layer among them (nothing else reads it) */
        tfc_node *outs = new_seq(c);
        int last_found = 0;
        for (int k = 0; k < c->noutputs; k++) {
            tfc_node *ref = call_ref(c, c->outputs[k][0], c->outputs[k][1]->str);
            last_found |= prev && !strcmp(ref->str, prev);
            tfc_node_seq_push(outs, ref);
        }
        if (!last_found)
            return tfc_node_error(c->err, TFC_ERR_USAGE, tfc_node_get(cfg, "output_layers"),
                                  "output_layers", "the last layer ('%s') is none of the "
                                  "model's outputs: tfc's model ends at one of them",
                                  prev ? prev : "");
        put(c, root, "layers", seq);
        put(c, root, "outputs", outs);
        const tfc_node *compile = tfc_node_get(top, "compile_config");
        if (compile && compile->kind == TFC_NODE_MAP) convert_compile(c, compile, root);
        return TFC_OK;
    }
    if (functional) output = resolve(c, output);
    if ((functional && (!prev || strcmp(prev, output))) ||
        (!functional && last && prev && strcmp(last, prev)))
        return tfc_node_error(c->err, TFC_ERR_USAGE, tfc_node_get(cfg, functional
                                                                  ? "output_layers" : "layers"),
                              functional ? "output_layers" : "layers",
                              "the output '%s' is not the last layer ('%s'): tfc's model ends "
                              "at its output", functional ? output : last, prev ? prev : "");
    const char *first = layers->n ? sval(layers->vals[0], "class_name") : NULL;
    if (!first || strcmp(first, "InputLayer")) {
        /* a Sequential built without keras.Input: its build_config has the shape */
        const tfc_node *shape = tfc_node_get(tfc_node_get(top, "build_config"), "input_shape");
        if (!shape) shape = tfc_node_get(cfg, "build_input_shape");
        if (!shape && layers->n) /* Keras 2: the first layer's batch_input_shape */
            shape = tfc_node_get(tfc_node_get(layers->vals[0], "config"), "batch_input_shape");
        if (!shape || shape->kind != TFC_NODE_SEQ || shape->n < 2)
            return tfc_node_error(c->err, TFC_ERR_USAGE, cfg, "layers",
                                  "the model has no InputLayer and was never built: its "
                                  "input shape is unknown");
        tfc_node *in = tfc_node_new_map(c->out, NULL), *dims = new_seq(c);
        for (int i = 1; i < shape->n; i++)
            tfc_node_seq_push(dims, tfc_node_copy(c->out, shape->vals[i]));
        put(c, in, "shape", dims);
        if (input_feeds_ids(layers, 0, NULL)) put(c, in, "dtype", scalar(c, "int32", 0));
        put(c, root, "input", in);
    }
    put(c, root, "layers", seq);
    const tfc_node *compile = tfc_node_get(top, "compile_config");
    if (compile && compile->kind == TFC_NODE_MAP) convert_compile(c, compile, root);
    return TFC_OK;
}

/* The model file's text: a comment saying where it came from, then the tree. */
static tfc_status emit_model(const tfc_node *root, const char *path,
                             const tfc_import_report *rep, char **text, size_t *len,
                             tfc_error *err)
{
    FILE *f = open_memstream(text, len);
    if (!f) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    const char *base = strrchr(path, '/');
    fprintf(f, "# Imported by tfc-import from %s%s%s%s.\n", base ? base + 1 : path,
            rep->source[0] ? " (" : "", rep->source, rep->source[0] ? ")" : "");
    tfc_node_emit(f, root);
    return fclose(f) ? tfc_error_set(err, TFC_ERR_NOMEM, "out of memory") : TFC_OK;
}

tfc_status tfc_keras_convert(const tfc_node *config, const char *from, tfc_import_report *rep,
                             char **yaml, size_t *len, tfc_error *err)
{
    tfc_doc *out = tfc_doc_load_string("{}", 2, "model.yaml", err);
    if (!out) return err->code;
    conv c = {.out = out, .err = err, .rep = rep};
    tfc_node *root = tfc_doc_root(out);
    tfc_status s = convert_model(&c, config, root);
    if (!s) s = emit_model(root, from, rep, yaml, len, err);
    free(c.names);
    tfc_doc_free(out);
    return s;
}
