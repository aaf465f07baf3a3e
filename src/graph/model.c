/* Model files → layers: the top-level schema, the layer list (type, Keras default names,
 * inputs), shape inference through every layer, the loss/metric settings, and the queries
 * on that description. Every error points at the YAML; the whole file is checked before
 * anything is allocated on a device (graph.c binds and runs the model). */
#include "graph/metric_counts.h"
#include "graph/model_internal.h"
#include "graph/pipeline.h"
#include "layers/rnn.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const tfc_loss_names[TFC_LOSS_COUNT + 1] = {
    [TFC_LOSS_SPARSE_CCE] = "sparse_categorical_crossentropy",
    [TFC_LOSS_CCE] = "categorical_crossentropy",
    [TFC_LOSS_BCE] = "binary_crossentropy",
    [TFC_LOSS_MSE] = "mse",
    [TFC_LOSS_MAE] = "mae",
    [TFC_LOSS_HUBER] = "huber",
    [TFC_LOSS_LOG_COSH] = "log_cosh",
    [TFC_LOSS_MSLE] = "msle",
    [TFC_LOSS_MAPE] = "mape",
    [TFC_LOSS_POISSON] = "poisson",
    [TFC_LOSS_KLD] = "kl_divergence",
    [TFC_LOSS_HINGE] = "hinge",
    [TFC_LOSS_SQUARED_HINGE] = "squared_hinge",
    [TFC_LOSS_CATEGORICAL_HINGE] = "categorical_hinge",
    [TFC_LOSS_COSINE_SIMILARITY] = "cosine_similarity",
    [TFC_LOSS_COUNT] = NULL,
};

static const char *const metric_names[TFC_METRIC_COUNT + 1] = {
    [TFC_METRIC_ACCURACY] = "accuracy",
    [TFC_METRIC_TOP_K] = "top_k_accuracy",
    [TFC_METRIC_LOSS] = "loss",
    [TFC_METRIC_MAE] = "mae",
    [TFC_METRIC_MSE] = "mse",
    [TFC_METRIC_RMSE] = "root_mean_squared_error",
    [TFC_METRIC_COUNT] = NULL,
};

/* input.dtype: the names the schema accepts and the dtype each stands for, index by index
 * (Keras's int64 token ids, as TextVectorization gives them, are int32 ids in tfc). */
static const char *const dtype_choices[] = {"float32", "int32", "int64", NULL};
static const tfc_dtype dtype_values[] = {TFC_F32, TFC_I32, TFC_I32};

typedef struct model_args {
    const char *name;
    const tfc_node *input, *layers, *outputs, *metrics, *loss, *loss_weights;
} model_args;

static const tfc_field model_fields[] = {
    {"name", TFC_F_STRING, offsetof(model_args, name), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "model name (default: the file's stem)"},
    {"input", TFC_F_NODE, offsetof(model_args, input), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "{shape: [...], dtype: float32|int32, max_length}, or a first layer `- InputLayer: "
     "{shape: [...]}` (Keras's Sequential form)"},
    {"layers", TFC_F_NODE, offsetof(model_args, layers), NULL, TFC_UNBOUNDED, NULL,
     "the list of layers"},
    {"outputs", TFC_F_NODE, offsetof(model_args, outputs), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "the layers whose outputs the model gives, in order (Keras's Model(outputs=[...])): a "
     "layer name or a list of them (default: the last layer)"},
    {"loss", TFC_F_NODE, offsetof(model_args, loss), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "training loss: a name (default sparse_categorical_crossentropy) or {type, "
     "label_smoothing, class_weight}; several outputs: one for all, or one each ({main: mse, "
     "aux: ...} or a list in their order)"},
    {"loss_weights", TFC_F_NODE, offsetof(model_args, loss_weights), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "several outputs: each loss's weight in the model's loss ({main: 1, "
     "aux: 0.2} or a list; default 1)"},
    {"metrics", TFC_F_NODE, offsetof(model_args, metrics), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "accuracy, top_k_accuracy, loss; several outputs: a list each ({main: [mae], aux: "
     "[accuracy]} or a list of lists)"},
    {"optimizer", TFC_F_REFUSED, 0, TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "the optimizer is a key of the solver file, beside max_iter (optimizer: adam); of "
     "Keras's compile arguments the model holds loss and metrics"},
    {NULL}};

typedef struct input_args {
    tfc_int_list shape;
    int dtype;
    int max_length;
} input_args;

static const tfc_field input_fields[] = {
    {"shape", TFC_F_INT_LIST, offsetof(input_args, shape), NULL, 1, 1 << 30, NULL,
     "one example's shape, channels last; the first (time) axis may be null: any length"},
    {"dtype", TFC_F_ENUM, offsetof(input_args, dtype), "float32", TFC_UNBOUNDED, dtype_choices,
     "float32, or int32 for token ids (int64, Keras's, is read as int32)"},
    {"max_length", TFC_F_INT, offsetof(input_args, max_length), TFC_NO_DEFAULT, 1, 1 << 24,
     NULL, "with a null first axis: the longest sequence a batch may hold (memory is planned "
     "for it)"},
    {NULL}};

/* input.shape with a null first axis (`[null]`, `[~, F]`): a copy of the input mapping
 * whose first axis reads 1, for the schema, and *null_axis = 1; `input` itself otherwise.
 * A null on any other axis is an error. */
static tfc_status null_time_axis(tfc_model *m, const tfc_node *input, const tfc_node **out,
                                 int *null_axis, tfc_error *err)
{
    *out = input;
    *null_axis = 0;
    const tfc_node *shape = input && input->kind == TFC_NODE_MAP ? tfc_node_get(input, "shape")
                                                                 : NULL;
    if (!shape || shape->kind != TFC_NODE_SEQ) return TFC_OK;
    for (int i = 1; i < shape->n; i++)
        if (tfc_node_is_null(shape->vals[i]))
            return tfc_node_error(err, TFC_ERR_CONFIG, shape->vals[i], "input.shape",
                                  "only the first (time) axis may be null (any length)");
    if (shape->n == 0 || !tfc_node_is_null(shape->vals[0])) return TFC_OK;
    tfc_node *copy = tfc_node_copy(m->doc_scratch, input);
    tfc_node *seq = copy ? tfc_node_get(copy, "shape") : NULL;
    tfc_node *one = seq ? tfc_node_new_scalar(m->doc_scratch, shape->vals[0], "1", 0) : NULL;
    if (!one) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    seq->vals[0] = one;
    *out = copy;
    *null_axis = 1;
    return TFC_OK;
}

/* Whether an input (input 0's InputLayer name, or a further input's) is named `name`. */
static int input_named(const tfc_model *m, const char *name)
{
    for (int k = 0; k < m->ninputs; k++)
        if (!strcmp(name, k ? m->more[k - 1].name : m->input_name)) return 1;
    return 0;
}

static int name_taken(tfc_model *m, const char *name, int upto)
{
    for (int i = 0; i < upto; i++)
        if (strcmp(m->layers[i].name, name) == 0) return 1;
    return 0;
}

/* Keras's other names of tfc's metrics: `acc`, and the names that say which labels they
 * read, each allowed with the loss that reads those labels (tfc's accuracy follows the
 * loss, as Keras's `accuracy` string does). */
static const struct {
    const char *name;
    tfc_metric_kind kind;
    int loss; /* tfc_loss_kind, or -1: any */
} metric_aliases[] = {
    {"acc", TFC_METRIC_ACCURACY, -1},
    {"sparse_categorical_accuracy", TFC_METRIC_ACCURACY, TFC_LOSS_SPARSE_CCE},
    {"categorical_accuracy", TFC_METRIC_ACCURACY, TFC_LOSS_CCE},
    {"sparse_top_k_categorical_accuracy", TFC_METRIC_TOP_K, TFC_LOSS_SPARSE_CCE},
    {"top_k_categorical_accuracy", TFC_METRIC_TOP_K, TFC_LOSS_CCE},
    {"SparseCategoricalAccuracy", TFC_METRIC_ACCURACY, TFC_LOSS_SPARSE_CCE},
    {"CategoricalAccuracy", TFC_METRIC_ACCURACY, TFC_LOSS_CCE},
    {"SparseTopKCategoricalAccuracy", TFC_METRIC_TOP_K, TFC_LOSS_SPARSE_CCE},
    {"TopKCategoricalAccuracy", TFC_METRIC_TOP_K, TFC_LOSS_CCE},
    {"mean_absolute_error", TFC_METRIC_MAE, -1},
    {"mean_squared_error", TFC_METRIC_MSE, -1},
    {"RootMeanSquaredError", TFC_METRIC_RMSE, -1},
    {"MeanAbsoluteError", TFC_METRIC_MAE, -1},
    {"MeanSquaredError", TFC_METRIC_MSE, -1},
};

/* Keras's metrics that are a loss function's mean over the rows seen (MeanMetricWrapper):
 * each name keras.metrics.get takes, the loss op that computes it, and the name Keras's
 * instance reports (a metric with arguments is reported under it; one given by its name
 * alone, under that name, as Keras's history keys a string). */
static const struct {
    const char *name;
    tfc_loss_kind fn;
    const char *report;
} loss_metrics[] = {
    {"msle", TFC_LOSS_MSLE, "mean_squared_logarithmic_error"},
    {"mean_squared_logarithmic_error", TFC_LOSS_MSLE, "mean_squared_logarithmic_error"},
    {"MeanSquaredLogarithmicError", TFC_LOSS_MSLE, "mean_squared_logarithmic_error"},
    {"mape", TFC_LOSS_MAPE, "mean_absolute_percentage_error"},
    {"mean_absolute_percentage_error", TFC_LOSS_MAPE, "mean_absolute_percentage_error"},
    {"MeanAbsolutePercentageError", TFC_LOSS_MAPE, "mean_absolute_percentage_error"},
    {"log_cosh_error", TFC_LOSS_LOG_COSH, "logcosh"},
    {"LogCoshError", TFC_LOSS_LOG_COSH, "logcosh"},
    {"poisson", TFC_LOSS_POISSON, "poisson"},
    {"Poisson", TFC_LOSS_POISSON, "poisson"},
    {"kl_divergence", TFC_LOSS_KLD, "kl_divergence"},
    {"KLDivergence", TFC_LOSS_KLD, "kl_divergence"},
    {"hinge", TFC_LOSS_HINGE, "hinge"},
    {"Hinge", TFC_LOSS_HINGE, "hinge"},
    {"squared_hinge", TFC_LOSS_SQUARED_HINGE, "squared_hinge"},
    {"SquaredHinge", TFC_LOSS_SQUARED_HINGE, "squared_hinge"},
    {"categorical_hinge", TFC_LOSS_CATEGORICAL_HINGE, "categorical_hinge"},
    {"CategoricalHinge", TFC_LOSS_CATEGORICAL_HINGE, "categorical_hinge"},
    {"cosine_similarity", TFC_LOSS_COSINE_SIMILARITY, "cosine_similarity"},
    {"CosineSimilarity", TFC_LOSS_COSINE_SIMILARITY, "cosine_similarity"},
    {"binary_crossentropy", TFC_LOSS_BCE, "binary_crossentropy"},
    {"bce", TFC_LOSS_BCE, "binary_crossentropy"},
    {"BinaryCrossentropy", TFC_LOSS_BCE, "binary_crossentropy"},
    {"categorical_crossentropy", TFC_LOSS_CCE, "categorical_crossentropy"},
    {"CategoricalCrossentropy", TFC_LOSS_CCE, "categorical_crossentropy"},
    {"sparse_categorical_crossentropy", TFC_LOSS_SPARSE_CCE, "sparse_categorical_crossentropy"},
    {"SparseCategoricalCrossentropy", TFC_LOSS_SPARSE_CCE, "sparse_categorical_crossentropy"},
};

static int loss_metric(const char *name)
{
    for (size_t i = 0; i < sizeof loss_metrics / sizeof *loss_metrics; i++)
        if (!strcmp(name, loss_metrics[i].name)) return (int)i;
    return -1;
}

const char *tfc_metric_class_name(const char *cls)
{
    const int f = loss_metric(cls);
    return f >= 0 ? loss_metrics[f].report : tfc_counted_default_name(cls);
}

int tfc_metric_default_arg(const char *cls, const char *key, const tfc_node *v)
{
    const int f = loss_metric(cls);
    if (f < 0) return tfc_counted_default_arg(cls, key, v);
    if (!strcmp(key, "name"))
        return v->kind == TFC_NODE_SCALAR && !strcmp(v->str, loss_metrics[f].report);
    if (!strcmp(key, "dtype"))
        return tfc_node_is_null(v) || (v->kind == TFC_NODE_SCALAR && !strcmp(v->str, "float32"));
    if (tfc_node_is_null(v)) return !strcmp(key, "ignore_class");
    if (v->kind != TFC_NODE_SCALAR) return 0;
    if (!strcmp(key, "from_logits")) return !strcmp(v->str, "false");
    if (!strcmp(key, "label_smoothing")) return strtod(v->str, NULL) == 0;
    return !strcmp(key, "axis") && !strcmp(v->str, "-1");
}

int tfc_metric_lower_is_better(const tfc_metric *mt)
{
    const tfc_metric_kind k = mt->kind;
    if (k == TFC_METRIC_COUNTED) return tfc_counted_lower_is_better(mt->counted);
    if (k == TFC_METRIC_LOSS_FN) return mt->sign > 0; /* a loss, not cosine_similarity */
    return k == TFC_METRIC_LOSS || k == TFC_METRIC_MAE || k == TFC_METRIC_MSE ||
           k == TFC_METRIC_RMSE;
}

double tfc_metric_summand(tfc_metric_kind k, double v)
{
    return k == TFC_METRIC_RMSE ? v * v : v;
}

double tfc_metric_of_mean(tfc_metric_kind k, double mean)
{
    return k == TFC_METRIC_RMSE ? sqrt(mean) : mean;
}

int tfc_metric_known(const char *name)
{
    for (int k = 0; k < TFC_METRIC_COUNT; k++)
        if (metric_names[k] && !strcmp(name, metric_names[k])) return 1;
    for (size_t a = 0; a < sizeof metric_aliases / sizeof *metric_aliases; a++)
        if (!strcmp(name, metric_aliases[a].name)) return 1;
    return tfc_counted_default_name(name) != NULL || loss_metric(name) >= 0;
}

int tfc_metric_name_lower_is_better(const char *name)
{
    static const char *const lower[] = {"loss", "mae", "mse", "mean_absolute_error",
                                        "mean_squared_error", "root_mean_squared_error",
                                        "RootMeanSquaredError", "false_positives",
                                        "false_negatives", "FalsePositives",
                                        "FalseNegatives"};
    for (size_t i = 0; i < sizeof lower / sizeof *lower; i++)
        if (!strcmp(name, lower[i])) return 1;
    const int f = loss_metric(name);
    return f >= 0 && loss_metrics[f].fn != TFC_LOSS_COSINE_SIMILARITY;
}

/* The metric `item` names (*kind), by tfc's name or Keras's other one (*alias, else NULL);
 * an alias whose labels are not the loss's is an error naming both. */
static tfc_status metric_kind(const tfc_head *h, const tfc_node *item, const char *path,
                              int *kind, const char **alias, tfc_error *err)
{
    *alias = NULL;
    for (size_t a = 0; item->kind == TFC_NODE_SCALAR && a < sizeof metric_aliases /
                                                              sizeof *metric_aliases; a++) {
        if (strcmp(item->str, metric_aliases[a].name)) continue;
        const int want = metric_aliases[a].loss;
        if (want >= 0 && want != (int)h->loss)
            return tfc_node_error(err, TFC_ERR_CONFIG, item, path,
                                  "%s reads the labels of %s, but the loss is %s; write %s, "
                                  "which follows the loss",
                                  item->str, tfc_loss_names[want], tfc_loss_names[h->loss],
                                  metric_names[metric_aliases[a].kind]);
        *kind = (int)metric_aliases[a].kind;
        *alias = metric_aliases[a].name;
        return TFC_OK;
    }
    const char *name;
    int len, args;
    char bare[64];
    if (item->kind == TFC_NODE_SCALAR && tfc_python_name(item->str, &name, &len, &args) &&
        len < (int)sizeof bare) {
        snprintf(bare, sizeof bare, "%.*s", len, name);
        if (tfc_metric_known(bare))
            return args ? tfc_node_error(err, TFC_ERR_CONFIG, item, path, "\"%s\" is a Python "
                                         "call: write {%s: {...}}, the arguments by name",
                                         item->str, bare)
                        : tfc_node_error(err, TFC_ERR_CONFIG, item, path, "\"%s\" is Python: "
                                         "write %s", item->str, bare);
    }
    return tfc_node_enum(item, path, metric_names, kind, err);
}

/* A counted metric (Precision, {AUC: {curve: PR}}): its arguments, kept by the model. */
static tfc_status counted_metric(tfc_model *m, const tfc_node *item, const tfc_node *args,
                                 const char *path, tfc_error *err)
{
    tfc_counted *c = calloc(1, sizeof *c);
    if (!c) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    tfc_metric *mt = &m->metrics[m->nmetrics];
    if (tfc_counted_parse(c, item, args, path, mt->name, sizeof mt->name, err)) {
        tfc_counted_free(c);
        free(c);
        return TFC_ERR_CONFIG;
    }
    mt->kind = TFC_METRIC_COUNTED;
    mt->counted = c;
    mt->k = 1;
    mt->fn = -1;
    m->nmetrics++;
    return TFC_OK;
}

/* A loss function's mean as a metric (msle, {BinaryCrossentropy: {from_logits: true}}):
 * Keras's arguments of its metric class (a cross-entropy's from_logits; label_smoothing,
 * axis and ignore_class at their defaults only). */
static tfc_status loss_fn_metric(tfc_model *m, int f, const tfc_node *item, const tfc_node *args,
                                 const char *path, tfc_error *err)
{
    const tfc_loss_kind fn = loss_metrics[f].fn;
    struct { const char *name; const tfc_node *dtype; int from_logits; } a = {0};
    static const tfc_field ce_fields[] = {
        {"name", TFC_F_STRING, offsetof(__typeof__(a), name), TFC_NO_DEFAULT, TFC_UNBOUNDED,
         NULL, "the name the logs report it under"},
        TFC_FIXED_FIELD("dtype", "float32", "metrics are float32"),
        {"from_logits", TFC_F_BOOL, offsetof(__typeof__(a), from_logits), "false",
         TFC_UNBOUNDED, NULL, "the outputs are logits (checked against the last layer)"},
        TFC_FIXED_FIELD("label_smoothing", "0", "the loss's label_smoothing smooths the "
                        "targets of the loss; the metric reads the labels as they are"),
        TFC_FIXED_FIELD("axis", "-1", "the classes are the last axis"),
        TFC_FIXED_FIELD("ignore_class", TFC_NO_DEFAULT, "mask the steps to ignore instead"),
        {NULL}};
    static const tfc_field fields[] = {
        {"name", TFC_F_STRING, offsetof(__typeof__(a), name), TFC_NO_DEFAULT, TFC_UNBOUNDED,
         NULL, "the name the logs report it under"},
        TFC_FIXED_FIELD("dtype", "float32", "metrics are float32"),
        TFC_FIXED_FIELD("axis", "-1", "the outputs are the last axis"),
        {NULL}};
    const int ce = fn == TFC_LOSS_BCE || fn == TFC_LOSS_CCE || fn == TFC_LOSS_SPARSE_CCE;
    if (args && tfc_node_is_null(args)) args = NULL;
    if (tfc_schema_apply(ce ? ce_fields : fields, args, path, &a, err)) return TFC_ERR_CONFIG;
    tfc_metric *mt = &m->metrics[m->nmetrics++];
    mt->kind = TFC_METRIC_LOSS_FN;
    mt->k = 1;
    mt->fn = (int)fn;
    mt->fn_logits = a.from_logits;
    mt->sign = fn == TFC_LOSS_COSINE_SIMILARITY ? -1 : 1;
    snprintf(mt->name, sizeof mt->name, "%s",
             a.name ? a.name : args ? loss_metrics[f].report : item->str);
    return TFC_OK;
}

/* Head h's metrics (`at`: "metrics", or "metrics.NAME" of a model of several outputs): a
 * list of names or one-key mappings ({top_k_accuracy: {k: 3}}), appended to the model's. */
static tfc_status parse_metrics(tfc_model *m, tfc_head *h, const tfc_node *node, const char *at,
                                tfc_error *err)
{
    h->metric0 = m->nmetrics;
    if (!node || tfc_node_is_null(node)) return TFC_OK;
    if (node->kind != TFC_NODE_SEQ)
        return tfc_node_error(err, TFC_ERR_CONFIG, node, at,
                              "expected a list of metric names, found %s",
                              tfc_node_kind_name(node->kind));
    tfc_status status = TFC_OK;
    for (int i = 0; i < node->n; i++) {
        const tfc_node *item = node->vals[i], *args = NULL;
        char path[192];
        snprintf(path, sizeof path, "%s[%d]", at, i);
        const tfc_node *cls = item->kind == TFC_NODE_MAP ? tfc_node_get(item, "class_name")
                                                          : NULL;
        if (cls) { /* keras.metrics.serialize's {module, class_name, config, registered_name} */
            int bad = 0;
            for (int k = 0; k < item->n && !bad; k++) {
                const char *key = item->keys[k]->str;
                if (strcmp(key, "class_name") && strcmp(key, "config") && strcmp(key, "module") &&
                    strcmp(key, "registered_name")) {
                    char kpath[128];
                    snprintf(kpath, sizeof kpath, "%s.%s", path, key);
                    status = tfc_node_error(err, TFC_ERR_CONFIG, item->keys[k], kpath,
                                            "unknown key '%s' in a serialized metric (known "
                                            "keys: class_name, config, module, "
                                            "registered_name)", key);
                    bad = 1;
                }
            }
            if (bad) continue;
            args = tfc_node_get(item, "config");
            item = cls;
        } else if (item->kind == TFC_NODE_MAP && item->n == 1) {
            args = item->vals[0];
            item = item->keys[0];
        }
        if (m->nmetrics == TFC_MAX_METRICS) {
            status = tfc_node_error(err, TFC_ERR_CONFIG, item, path, "at most %d metrics%s",
                                    TFC_MAX_METRICS, m->noutputs > 1 ? " (with the outputs' "
                                    "losses, which the logs report as metrics)" : "");
            break;
        }
        if (item->kind == TFC_NODE_SCALAR && tfc_counted_default_name(item->str)) {
            if (counted_metric(m, item, args, path, err)) status = TFC_ERR_CONFIG;
            continue;
        }
        const int f = item->kind == TFC_NODE_SCALAR ? loss_metric(item->str) : -1;
        if (f >= 0) {
            if (loss_fn_metric(m, f, item, args, path, err)) status = TFC_ERR_CONFIG;
            continue;
        }
        int kind;
        const char *alias;
        if (metric_kind(h, item, path, &kind, &alias, err)) {
            status = TFC_ERR_CONFIG;
            continue;
        }
        tfc_metric *mt = &m->metrics[m->nmetrics++];
        mt->kind = (tfc_metric_kind)kind;
        mt->fn = kind == TFC_METRIC_MAE ? (int)TFC_LOSS_MAE
                 : kind == TFC_METRIC_MSE || kind == TFC_METRIC_RMSE ? (int)TFC_LOSS_MSE : -1;
        mt->sign = 1;
        snprintf(mt->name, sizeof mt->name, "%s", alias ? alias : metric_names[kind]);
        /* Keras's class arguments: a name (a class with arguments reports its default one,
         * as Keras's instance: CategoricalAccuracy's categorical_accuracy) and top-k's k */
        struct { int k; const char *name; } targs = {5, NULL};
        static const tfc_field k_fields[] = {
            {"k", TFC_F_INT, offsetof(__typeof__(targs), k), "5", 1, 1 << 20, NULL,
             "how many top outputs count"},
            {"name", TFC_F_STRING, offsetof(__typeof__(targs), name), TFC_NO_DEFAULT,
             TFC_UNBOUNDED, NULL, "the name the logs report it under"},
            TFC_FIXED_FIELD("dtype", "float32", "metrics are float32"),
            {NULL}};
        if (tfc_schema_apply(kind == TFC_METRIC_TOP_K ? k_fields : k_fields + 1, args, path,
                             &targs, err))
            status = TFC_ERR_CONFIG;
        mt->k = kind == TFC_METRIC_TOP_K ? targs.k : 1;
        if (targs.name) snprintf(mt->name, sizeof mt->name, "%s", targs.name);
        else if (args && alias && isupper((unsigned char)alias[0]))
            tfc_snake_case(alias, mt->name, sizeof mt->name);
    }
    h->nmetrics = m->nmetrics - h->metric0;
    return status;
}

/* Whether `key` is Keras's Layer argument input_shape or input_dim for a layer of `type`
 * (an Embedding's input_dim is its own: the vocabulary). */
static int is_input_shape_arg(const char *type, const char *key)
{
    if (!strcmp(key, "input_shape")) return 1;
    if (strcmp(key, "input_dim")) return 0;
    const tfc_layer_ops *ops = tfc_layer_lookup(type);
    for (const tfc_field *f = ops ? ops->schema : NULL; f && f->name; f++)
        if (!strcmp(f->name, "input_dim")) return 0;
    return 1;
}

/* Whether the layer type's schema has its own `dtype` (the preprocessing layers' output
 * type); the others take Keras's Layer argument, which parse_layer_item checks. */
static int has_own_dtype(const char *type)
{
    const tfc_layer_ops *ops = tfc_layer_lookup(type);
    for (const tfc_field *f = ops ? ops->schema : NULL; f && f->name; f++)
        if (!strcmp(f->name, "dtype")) return 1;
    return 0;
}

/* Keras's Layer argument `dtype` (its dtype policy): float32 (or null, the default policy)
 * is what tfc computes in; a 16-bit policy is the solver's `precision`; anything else is an
 * error naming it. */
static tfc_status layer_dtype(const tfc_node *v, const char *path, tfc_error *err)
{
    if (tfc_node_is_null(v) || (v->kind == TFC_NODE_SCALAR && !strcmp(v->str, "float32")))
        return TFC_OK;
    const char *s = v->kind == TFC_NODE_SCALAR ? v->str : "";
    if (strstr(s, "float16"))
        return tfc_node_error(err, TFC_ERR_CONFIG, v, path,
                              "%s: tfc's layers compute in float32 and the solver picks the "
                              "16-bit training: write precision: %s in the solver file (Keras's "
                              "mixed precision: float32 weights, 16-bit values between layers)",
                              s, strstr(s, "bfloat16") ? "bf16" : "float16");
    return tfc_node_error(err, TFC_ERR_CONFIG, v, path,
                          "%s: tfc's layers compute in float32 (dtype: float32, or leave it "
                          "out); the model input's dtype is input: {dtype: ...}",
                          v->kind == TFC_NODE_SCALAR ? s : "a dtype policy");
}

/* The parameter that `a`, written in place of a layer's or a cell's arguments, stands for:
 * Keras's first positional one, for a scalar (`- Dense: 64`) or, where that parameter takes
 * a list, for a sequence (`- MaxPooling2D: [2, 2]`, `- Reshape: [7, 7, 64]`); NULL: none
 * (test_keras_args holds each schema's first field to Keras's first parameter). */
static const char *positional(const char *type, const tfc_node *a)
{
    if (a->kind == TFC_NODE_MAP || tfc_node_is_null(a)) return NULL;
    const tfc_layer_ops *ops = tfc_layer_lookup(type);
    tfc_field cell[64];
    const tfc_field *f = ops ? ops->schema : tfc_rnn_cell_schema(type, cell, 64) > 0 ? cell : NULL;
    if (!f || !f->name) return NULL;
    if (a->kind == TFC_NODE_SCALAR) return f->name;
    return f->type == TFC_F_INT_PAIR || f->type == TFC_F_INT_LIST ||
                   f->type == TFC_F_FLOAT_LIST || f->type == TFC_F_NODE
               ? f->name
               : NULL;
}

/* The positional shorthand inside a wrapper, in place in `v` (a copy in the scratch document):
 * `layer: {Dense: 64}` (TimeDistributed, SpectralNormalization), `layer: {LSTM: 32}`
 * (Bidirectional), `cell: {GRUCell: 16}`, a list of cells, a StackedRNNCells' `cells`, and
 * so on down (Bidirectional: {layer: {RNN: {cell: ...}}}). A type it does not know is left as
 * written for the wrapper to report. */
static tfc_status expand_wrapped(tfc_doc *doc, tfc_node *v, int depth)
{
    if (depth > 8) return TFC_OK;
    if (v->kind == TFC_NODE_SEQ) {
        for (int i = 0; i < v->n; i++)
            if (expand_wrapped(doc, v->vals[i], depth + 1)) return TFC_ERR_NOMEM;
        return TFC_OK;
    }
    if (v->kind != TFC_NODE_MAP || v->n != 1) return TFC_OK;
    tfc_node *a = v->vals[0];
    const char *first = positional(v->keys[0]->str, a);
    if (first) {
        tfc_node *m = tfc_node_new_map(doc, a), *k = tfc_node_new_scalar(doc, a, first, 0);
        if (!m || !k) return TFC_ERR_NOMEM;
        tfc_node_map_set(m, k, a);
        v->vals[0] = m;
        return TFC_OK;
    }
    for (int i = 0; a->kind == TFC_NODE_MAP && i < a->n; i++)
        if (!strcmp(a->keys[i]->str, "layer") || !strcmp(a->keys[i]->str, "cell") ||
            !strcmp(a->keys[i]->str, "cells"))
            if (expand_wrapped(doc, a->vals[i], depth + 1)) return TFC_ERR_NOMEM;
    return TFC_OK;
}

/* The first argument of a Python call `(args)` as YAML writes it (64; 'relu' as relu; a
 * tuple (2, 2) as [2, 2]) into out; 0 when it is passed by name or does not fit. */
static int python_first_arg(const char *call, char *out, size_t size)
{
    if (*call != '(') return 0;
    const char *a = call + 1, *e = a;
    for (int depth = 0; *e && (depth > 0 || (*e != ',' && *e != ')')); e++)
        depth += (*e == '(' || *e == '[') - (*e == ')' || *e == ']');
    while (a < e && isspace((unsigned char)*a)) a++;
    while (e > a && isspace((unsigned char)e[-1])) e--;
    if (e - a >= 2 && (*a == '\'' || *a == '"') && e[-1] == *a) a++, e--;
    if (a == e || (size_t)(e - a) >= size || memchr(a, '=', (size_t)(e - a))) return 0;
    for (size_t i = 0; a + i < e; i++)
        out[i] = a[i] == '(' ? '[' : a[i] == ')' ? ']' : a[i];
    out[e - a] = 0;
    return 1;
}

/* Splits a layer item `- Type: {args}` into its type and a mapping of arguments without
 * `name` and `inputs`, which the graph handles for every layer. A bare `- Flatten` is
 * `- Flatten: {}`. */
static tfc_status parse_layer_item(tfc_model *m, int index, const tfc_node *item,
                                   const tfc_node **type_node, tfc_node **args,
                                   const tfc_node **name, const tfc_node **inputs,
                                   const tfc_node **trainable, tfc_error *err)
{
    char path[64];
    snprintf(path, sizeof path, "layers[%d]", index);
    if (item->kind == TFC_NODE_SCALAR && !item->quoted && *item->str) {
        *type_node = item;
        *name = *inputs = *trainable = NULL;
        *args = tfc_node_new_map(m->doc_scratch, item);
        return *args ? TFC_OK : tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    if (item->kind != TFC_NODE_MAP || item->n != 1)
        return tfc_node_error(err, TFC_ERR_CONFIG, item, path,
                              "expected a mapping with one key, the layer type "
                              "(e.g. `- Dense: {units: 10}`), found %s",
                              item->kind == TFC_NODE_MAP ? "several keys"
                                                         : tfc_node_kind_name(item->kind));
    *type_node = item->keys[0];
    const tfc_node *a = item->vals[0];
    *name = *inputs = *trainable = NULL;
    *args = tfc_node_new_map(m->doc_scratch, a);
    if (!*args) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    if (tfc_node_is_null(a)) return TFC_OK;
    /* the first argument alone, as Keras's first positional one: `- Dense: 64`,
     * `- Dropout: 0.5`, `- Activation: relu`, `- MaxPooling2D: [2, 2]` */
    const char *first = positional(item->keys[0]->str, a);
    if (first) {
        tfc_node *k = tfc_node_new_scalar(m->doc_scratch, a, first, 0);
        if (!k) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        tfc_node_map_set(*args, k, item->vals[0]);
        return TFC_OK;
    }
    if (a->kind != TFC_NODE_MAP && !tfc_layer_lookup(item->keys[0]->str))
        return TFC_OK; /* the unknown type is the error, reported with the others' */
    if (a->kind != TFC_NODE_MAP) {
        snprintf(path, sizeof path, "layers[%d].%s", index, item->keys[0]->str);
        return tfc_node_error(err, TFC_ERR_CONFIG, a, path,
                              "expected a mapping of arguments, found %s",
                              a->kind != TFC_NODE_SEQ ? "a scalar"
                              : "a sequence (a list stands for the first argument alone where "
                                "that takes a list, as MaxPooling2D's pool_size; Keras's other "
                                "positional arguments go by name: {units: 64, activation: "
                                "relu})");
    }
    for (int i = 0; i < a->n; i++) {
        if (strcmp(a->keys[i]->str, "name") == 0) *name = a->vals[i];
        else if (strcmp(a->keys[i]->str, "inputs") == 0) *inputs = a->vals[i];
        else if (strcmp(a->keys[i]->str, "trainable") == 0) *trainable = a->vals[i];
        else if (strcmp(a->keys[i]->str, "dtype") == 0 && !has_own_dtype(item->keys[0]->str)) {
            snprintf(path, sizeof path, "layers[%d].%s.dtype", index, item->keys[0]->str);
            if (layer_dtype(a->vals[i], path, err)) return TFC_ERR_CONFIG;
        }
        else if (index == 0 && m->input_from_layer &&
                 is_input_shape_arg(item->keys[0]->str, a->keys[i]->str))
            continue; /* the model's input (keras_input_layer) */
        else if (!strcmp(a->keys[i]->str, "layer") || !strcmp(a->keys[i]->str, "cell")) {
            tfc_node *v = tfc_node_copy(m->doc_scratch, a->vals[i]);
            if (!v || expand_wrapped(m->doc_scratch, v, 0))
                return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
            tfc_node_map_set(*args, a->keys[i], v);
        }
        else tfc_node_map_set(*args, a->keys[i], a->vals[i]);
    }
    return TFC_OK;
}

/* Resolves `inputs:` (a name or a list of names) to producer indices: a Pipeline's name is
 * its last layer; the layers inside a Pipeline have no name of their own there. */
static tfc_status resolve_inputs(tfc_model *m, const tfc_pipelines *ps, tfc_layer *l,
                                 const tfc_node *inputs, const char *path, tfc_error *err)
{
    enum { NOT_FOUND = -1 - TFC_MODEL_MAX_INPUTS };
    int n = inputs->kind == TFC_NODE_SEQ ? inputs->n : 1;
    if (inputs->kind == TFC_NODE_MAP || n == 0)
        return tfc_node_error(err, TFC_ERR_CONFIG, inputs, path,
                              "expected a layer name or a list of layer names");
    if (n > TFC_LAYER_MAX_INPUTS)
        return tfc_node_error(err, TFC_ERR_CONFIG, inputs, path, "at most %d inputs",
                              TFC_LAYER_MAX_INPUTS);
    for (int i = 0; i < n; i++) {
        const tfc_node *nm = inputs->kind == TFC_NODE_SEQ ? inputs->vals[i] : inputs;
        if (nm->kind != TFC_NODE_SCALAR)
            return tfc_node_error(err, TFC_ERR_CONFIG, nm, path, "expected a layer name");
        int found = NOT_FOUND;
        if (!strcmp(nm->str, "input") || (m->input_name[0] && !strcmp(nm->str, m->input_name)))
            found = -1;
        for (int k = 1; k < m->ninputs && found == NOT_FOUND; k++)
            if (!strcmp(nm->str, m->more[k - 1].name)) found = -1 - k;
        for (int j = 0; j < l->index && found == NOT_FOUND; j++)
            if (ps->owner[j] < 0 && strcmp(m->layers[j].name, nm->str) == 0) found = j;
        const int pipe = found == NOT_FOUND ? tfc_pipelines_find(ps, nm->str) : -1;
        if (pipe >= 0 && ps->p[pipe].last < l->index) found = ps->p[pipe].last;
        if (found == NOT_FOUND) {
            const char *names[2 * TFC_MAX_LAYERS + 3];
            int k = 0;
            names[k++] = "input";
            if (m->input_name[0]) names[k++] = m->input_name;
            for (int q = 1; q < m->ninputs; q++) names[k++] = m->more[q - 1].name;
            for (int j = 0; j < l->index; j++)
                if (ps->owner[j] < 0) names[k++] = m->layers[j].name;
            for (int p = 0; p < ps->n; p++)
                if (ps->p[p].last < l->index) names[k++] = ps->p[p].label;
            names[k] = NULL;
            const char *guess = tfc_did_you_mean(nm->str, names);
            int later = 0;
            for (int j = l->index; j < m->nlayers; j++)
                later |= strcmp(m->layers[j].name, nm->str) == 0;
            later |= pipe >= 0;
            return tfc_node_error(err, TFC_ERR_CONFIG, nm, path,
                                  "no earlier layer is named '%s'%s%s%s%s", nm->str,
                                  later ? " (a layer may only take inputs from layers above it)"
                                        : "",
                                  guess ? "; did you mean '" : "", guess ? guess : "",
                                  guess ? "'?" : "");
        }
        l->inputs[i] = found;
    }
    l->ninputs = n;
    return TFC_OK;
}

/* Each trainable weight's constraint (tfc_param.constraint): the argument named like its
 * regularizer (kernel_constraint for kernel_regularizer, ...), the layer's or its wrapper's
 * layer's (`inner`, as attach_regularizers), laid out on the weight's shape. As Keras, only
 * trainable weights are constrained. */
static tfc_status attach_constraints(tfc_layer *l, const tfc_node *inner, const char *at,
                                     tfc_error *err)
{
    for (int p = 0; p < l->nparams; p++) {
        tfc_param *pr = &l->params[p];
        memset(&pr->constraint, 0, sizeof pr->constraint);
        if (!pr->regularizer || !pr->trainable || pr->constant || !l->args_node) continue;
        const char *arg = tfc_constraint_arg(pr->regularizer);
        if (!arg) continue;
        const tfc_node *n = tfc_node_get(l->args_node, arg);
        char path[160];
        snprintf(path, sizeof path, "layers[%d].%s.%s", l->index, l->ops->type, arg);
        if (!n && inner) {
            n = tfc_node_get(inner->vals[0], arg);
            snprintf(path, sizeof path, "layers[%d].%s.%s.%s", l->index, l->ops->type, at, arg);
        }
        tfc_constraint c;
        if (tfc_constraint_parse(n, path, &c, err)) return TFC_ERR_CONFIG;
        if (tfc_constraint_layout(&c, &pr->shape, &pr->constraint)) {
            char dims[96] = "";
            for (int d = 0, o = 0; d < pr->shape.ndim && o < (int)sizeof dims - 24; d++)
                o += snprintf(dims + o, sizeof dims - (size_t)o, "%s%lld", d ? ", " : "",
                              (long long)pr->shape.dim[d]);
            return tfc_node_error(err, TFC_ERR_CONFIG, n, path,
                                  "axis: tfc takes a leading run of the axes of %s [%s] (0; "
                                  "[0, 1]) or a trailing one (-1; [-2, -1]), each in range "
                                  "once", pr->name, dims);
        }
    }
    return TFC_OK;
}

/* Each trainable weight's regularizer (tfc_param.regularizer names the argument): the layer's
 * argument, or a wrapper's layer's (Bidirectional's `layer: {LSTM: {...}}`: Keras's wrapper
 * regularizes both directions with its layer's regularizers), or an RNN's cell's. Moving
 * statistics and constants have none, as Keras regularizes trainable weights only. */
/* The wrapped layer or cell {TYPE: {...}} of a wrapper's arguments `args` (`layer`, or an
 * RNN's `cell`), its key path after the wrapper's appended to at; NULL: none */
static const tfc_node *wrapped(const tfc_node *args, char *at, size_t size)
{
    static const char *const keys[2] = {"layer", "cell"};
    for (int k = 0; k < 2; k++) {
        const tfc_node *n = args ? tfc_node_get(args, keys[k]) : NULL;
        if (!n || n->kind != TFC_NODE_MAP || n->n != 1 || n->vals[0]->kind != TFC_NODE_MAP)
            continue;
        size_t len = strlen(at);
        snprintf(at + len, size - len, "%s%s.%s", len ? "." : "", keys[k], n->keys[0]->str);
        return n;
    }
    return NULL;
}

static tfc_status attach_regularizers(tfc_layer *l, tfc_error *err)
{
    /* Bidirectional's layer, an RNN's cell, a Bidirectional's RNN's cell */
    char at[128] = "";
    const tfc_node *inner = wrapped(l->args_node, at, sizeof at);
    const tfc_node *cell = inner ? wrapped(inner->vals[0], at, sizeof at) : NULL;
    if (cell) inner = cell;
    for (int p = 0; p < l->nparams; p++) {
        tfc_param *pr = &l->params[p];
        pr->l1 = pr->l2 = 0;
        if (!pr->regularizer || !pr->trainable || pr->constant || !l->args_node) continue;
        const tfc_node *n = tfc_node_get(l->args_node, pr->regularizer);
        char path[160];
        snprintf(path, sizeof path, "layers[%d].%s.%s", l->index, l->ops->type,
                 pr->regularizer);
        if (!n && inner) {
            n = tfc_node_get(inner->vals[0], pr->regularizer);
            snprintf(path, sizeof path, "layers[%d].%s.%s.%s", l->index, l->ops->type, at,
                     pr->regularizer);
        }
        tfc_regularizer r;
        if (tfc_regularizer_parse(n, path, &r, err)) return TFC_ERR_CONFIG;
        pr->l1 = (float)r.l1;
        pr->l2 = (float)r.l2;
    }
    if (attach_constraints(l, inner, at, err)) return TFC_ERR_CONFIG;
    /* the penalty on the output: its argument where the schema takes one (the factors
     * ActivityRegularization's build set stand otherwise) */
    for (const tfc_field *f = l->ops->schema; f && f->name; f++) {
        if (strcmp(f->name, "activity_regularizer")) continue;
        char path[160];
        snprintf(path, sizeof path, "layers[%d].%s.activity_regularizer", l->index,
                 l->ops->type);
        tfc_regularizer r;
        const tfc_node *n = l->args_node ? tfc_node_get(l->args_node, f->name) : NULL;
        if (tfc_regularizer_parse(n, path, &r, err)) return TFC_ERR_CONFIG;
        l->activity_l1 = (float)r.l1;
        l->activity_l2 = (float)r.l2;
    }
    return TFC_OK;
}

/* A call of layer l->calls: its weights, built from that layer's arguments at this call's
 * input shapes, must have the shapes of the first call's, whose they then are (shared: no
 * regularizer or constraint of their own, Keras's layer penalizes and constrains its
 * weights once). Else an error at the call naming both input shapes. */
static tfc_status share_params(const tfc_model *m, tfc_layer *l, tfc_error *err)
{
    const tfc_layer *o = &m->layers[l->calls];
    for (int p = 0; p < l->nparams || p < o->nparams; p++) {
        if (p < l->nparams && p < o->nparams &&
            tfc_shape_equal(&l->params[p].shape, &o->params[p].shape))
            continue;
        char a[96], b[96], wa[96] = "none", wb[96] = "none";
        tfc_shape_str(&l->in_shape[0], a, sizeof a);
        tfc_shape_str(&o->in_shape[0], b, sizeof b);
        if (p < l->nparams) tfc_shape_str(&l->params[p].shape, wa, sizeof wa);
        if (p < o->nparams) tfc_shape_str(&o->params[p].shape, wb, sizeof wb);
        return tfc_layer_error(err, l, "a call of layer '%s' on input shape %s, which gives it "
                               "other weights than its first call on %s: %s %s, not %s",
                               o->name, a, b, (p < o->nparams ? o : l)->params[p].name, wa, wb);
    }
    for (int p = 0; p < l->nparams; p++) {
        tfc_param *pr = &l->params[p];
        pr->shared = 1;
        pr->l1 = pr->l2 = 0;
        memset(&pr->constraint, 0, sizeof pr->constraint);
    }
    return TFC_OK;
}

tfc_status tfc_model_derive_layer(tfc_model *m, tfc_layer *l, tfc_error *err)
{
    unsigned mask = 0;
    for (int j = 0; j < l->ninputs; j++) {
        int p = l->inputs[j];
        l->in_shape[j] = p < 0 ? *tfc_model_input_shape_at(m, -1 - p) : m->layers[p].out_shape;
        l->in_dtype[j] = p < 0 ? tfc_model_input_dtype_at(m, -1 - p) : m->layers[p].out_dtype;
        if (p >= 0 && m->layers[p].mask_out) mask |= 1u << j;
        if (p >= 0 && l->in_dtype[j] == TFC_I32 && !l->ops->reads_ints)
            return tfc_layer_error(err, l, "reads the int32 indices of layer '%s' (its "
                                   "output_mode int), which it cannot take: give that layer "
                                   "another output_mode or put an Embedding or a "
                                   "CategoryEncoding between", m->layers[p].name);
    }
    l->out_dtype = TFC_F32;
    l->out_id_limit = 0;
    l->mask_inputs = mask;
    l->mask_in = mask != 0;
    l->mask_out = mask && l->ops->keeps_mask;
    l->pure_act = l->ops->pure_act;
    l->joins_mask = 0;
    l->act = TFC_ACT_LINEAR;
    if (tfc_layer_channels_last(l, err) || l->ops->build(l, err)) return TFC_ERR_CONFIG;
    for (int p = 0; p < l->nparams && l->frozen; p++) { /* trainable: false */
        l->params[p].frozen = l->params[p].trainable;
        l->params[p].trainable = 0;
    }
    if (attach_regularizers(l, err)) return TFC_ERR_CONFIG;
    if (l->calls >= 0 && share_params(m, l, err)) return TFC_ERR_CONFIG;
    const tfc_layer *from = l->inputs[0] >= 0 ? &m->layers[l->inputs[0]] : NULL;
    if (from && l->id_limit && from->out_dtype == TFC_I32 && from->out_id_limit > l->id_limit)
        return tfc_layer_error(err, l, "takes indices up to %lld from layer '%s', beyond its "
                               "limit of %lld (input_dim or num_tokens)",
                               (long long)from->out_id_limit - 1, from->name,
                               (long long)l->id_limit);
    if (tfc_layer_out_numel(l) <= 0 || tfc_layer_out_numel(l) > (1ll << 31)) {
        char buf[96];
        return tfc_layer_error(err, l, "output shape %s is empty or too large",
                               tfc_shape_str(&l->out_shape, buf, sizeof buf));
    }
    return TFC_OK;
}

/* A model has one sequence mask made from its input, by the first layer that makes one
 * there (graph.c): token ids != 0 however many Embeddings read them, but a second Masking
 * (or an Embedding beside one) would silently get the first one's mask, so it is an error. */
static int makes_input_mask(const tfc_layer *l)
{
    return l->mask_out && !l->mask_in && l->ninputs > 0 && l->inputs[0] < 0;
}

/* A model of several inputs: each is read by some layer (Keras's functional model would
 * leave one out unconnected; here it is a mistake in `inputs:`). */
static tfc_status every_input_read(const tfc_model *m, tfc_error *err)
{
    for (int k = -m->ninputs; k < 0 && m->ninputs > 1; k++) {
        int read = 0;
        for (int i = 0; i < m->nlayers && !read; i++)
            for (int j = 0; j < m->layers[i].ninputs; j++) read |= m->layers[i].inputs[j] == k;
        char path[64];
        snprintf(path, sizeof path, "layers[%d].InputLayer", -1 - k);
        if (!read)
            return tfc_node_error(err, TFC_ERR_CONFIG, m->input_item[-1 - k], path, "input "
                                  "'%s' is read by no layer: name it in a layer's inputs:",
                                  tfc_model_input_name(m, -1 - k));
    }
    return TFC_OK;
}

static tfc_status one_input_mask(const tfc_model *m, tfc_error *err)
{
    int first = -1;
    for (int i = 0; i < m->nlayers; i++) {
        const tfc_layer *l = &m->layers[i];
        if (!makes_input_mask(l)) continue;
        if (first < 0) {
            first = i;
        } else if (l->inputs[0] != m->layers[first].inputs[0]) {
            return tfc_layer_error(err, l, "makes a sequence mask from input '%s', and layer "
                                   "'%s' one from input '%s': masks from two inputs are not "
                                   "in tfc yet (one input's mask per model)",
                                   tfc_model_input_name(m, -1 - l->inputs[0]),
                                   m->layers[first].name,
                                   tfc_model_input_name(m, -1 - m->layers[first].inputs[0]));
        } else if (l->ops->host_mask || m->layers[first].ops->host_mask) {
            return tfc_layer_error(err, l, "a second layer making the sequence mask from the "
                                           "model input (after layer '%s'): tfc makes one mask "
                                           "per model", m->layers[first].name);
        }
    }
    return TFC_OK;
}

/* Keras layers tfc leaves out on purpose: why, and what to write instead; NULL for others. */
static const char *left_out_because(const char *type)
{
    static const char *const why[][2] = {
        {"StringLookup", "its input is text and tfc's models take numbers: a CSV column of "
                         "names is the csv source's `string_lookup: {column: [terms]}` (Keras's "
                         "StringLookup one_hot) or, for labels, `label_dtype: string`; a whole "
                         "text is the text_vectorization map op (split: null) (docs/data.md)"},
        {"Lambda", "it runs Python code, which a model file cannot hold: write its computation "
                   "with tfc's layers (Activation, Rescaling, Reshape, Permute, Add, Multiply, "
                   "Dot, EinsumDense, ...)"},
        {"TFSMLayer", "it wraps a TensorFlow SavedModel: tfc runs its own layers only"},
        {"TorchModuleWrapper", "it wraps a PyTorch module: tfc runs its own layers only"},
        {"JaxLayer", "it wraps a JAX function: tfc runs its own layers only"},
        {"FlaxLayer", "it wraps a Flax module: tfc runs its own layers only"},
        {"MaxNumBoundingBoxes", "it pads bounding boxes, which tfc's pipeline does not carry"},
        {"ReversibleEmbedding", "its reverse call shares the embedding matrix with an output "
                                "projection, and tfc's model files do not call a layer twice: "
                                "use Embedding, and a Dense for the logits"},
    };
    for (size_t k = 0; k < sizeof why / sizeof *why; k++)
        if (!strcmp(type, why[k][0])) return why[k][1];
    return NULL;
}

/* Keras layers that tfc has as input-pipeline ops instead: the op a model file naming one
 * is pointed to and why, or NULL. */
static const char *pipeline_op_of(const char *type, const char **why)
{
    static const char *const mix = "it mixes the images and the labels of a batch, which tfc "
                                   "does in the input pipeline: add `- map: {op: %s}` to "
                                   "data.train.pipeline after `batch` and `one_hot`";
    static const char *const text = "its input is text, which tfc turns into ids or vectors "
                                    "in the input pipeline: add `- map: {op: %s}` right after "
                                    "the text source of data.train and data.test (the train "
                                    "split adapts the vocabulary, the test split loads it)";
    static const char *const pairs[][3] = {
        {"MixUp", "mix_up, alpha: 0.2", mix},
        {"CutMix", "cut_mix, factor: 1.0", mix},
        {"TextVectorization", "text_vectorization, max_tokens: 20000, output_sequence_length: "
                              "200", text}};
    for (size_t k = 0; k < sizeof pairs / sizeof *pairs; k++)
        if (!strcmp(type, pairs[k][0])) return *why = pairs[k][2], pairs[k][1];
    return NULL;
}

/* Item i, whose key is no layer type, as a call of an earlier layer (SPEC §1, `- enc:
 * {inputs: b}`): its arguments are the layer's, so the call takes `inputs` and `name` only. */
static tfc_status call_arguments(int i, const tfc_node *item, tfc_error *err)
{
    if (item->kind != TFC_NODE_MAP) return TFC_OK; /* `- enc` */
    const tfc_node *a = item->vals[0];
    char path[96];
    snprintf(path, sizeof path, "layers[%d].%s", i, item->keys[0]->str);
    if (tfc_node_is_null(a)) return TFC_OK;
    for (int k = 0; a->kind == TFC_NODE_MAP && k < a->n; k++)
        if (strcmp(a->keys[k]->str, "inputs") && strcmp(a->keys[k]->str, "name"))
            return tfc_node_error(err, TFC_ERR_CONFIG, a->keys[k], path,
                                  "a call of layer '%s' takes inputs and name only, not %s: "
                                  "its arguments are the layer's", item->keys[0]->str,
                                  a->keys[k]->str);
    if (a->kind != TFC_NODE_MAP)
        return tfc_node_error(err, TFC_ERR_CONFIG, a, path,
                              "a call of layer '%s' takes a mapping {inputs: ..., name: ...}",
                              item->keys[0]->str);
    return TFC_OK;
}

/* The error of item i's key that is neither a layer type nor an earlier layer's name: a
 * guess among both, else the known types. */
static tfc_status unknown_type(const tfc_model *m, const tfc_pipelines *ps, int i,
                               const tfc_node *key, const char *path, tfc_error *err)
{
    const char *const *types = tfc_layer_type_names();
    int n = 0;
    while (types[n]) n++;
    const char **names = malloc((size_t)(n + i + 1) * sizeof *names);
    if (!names) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    memcpy(names, types, (size_t)n * sizeof *names);
    for (int q = 0; q < i; q++)
        if (ps->owner[q] < 0 && m->layers[q].name[0]) names[n++] = m->layers[q].name;
    names[n] = NULL;
    const char *guess = tfc_did_you_mean(key->str, names);
    tfc_status st;
    if (guess) {
        st = tfc_node_error(err, TFC_ERR_CONFIG, key, path, "unknown layer type '%s'; did you "
                            "mean '%s'?", key->str, guess);
    } else {
        char known[1024];
        tfc_join_names(known, sizeof known, types);
        st = tfc_node_error(err, TFC_ERR_CONFIG, key, path, "unknown layer type '%s' (known: "
                            "%s)", key->str, known);
    }
    free(names);
    return st;
}

/* Item i, whose key is no layer type, calls the earlier layer of that name again: its ops
 * and its calls are that layer's (a call of a call calls the first), its name `name:` or
 * NAME_call_K for the layer's K-th call after the first. Errors: no such earlier layer (an
 * unknown type then, a guess among the types and the earlier layers' names), a Pipeline, a
 * layer inside one, a call inside one, a layer that writes its weights in forward, another
 * argument (call_arguments), a default name taken. */
static tfc_status resolve_call(tfc_model *m, const tfc_pipelines *ps, int i, const tfc_node *item,
                               int named, tfc_error *err)
{
    tfc_layer *l = &m->layers[i];
    const tfc_node *key = item->kind == TFC_NODE_MAP ? item->keys[0] : item;
    char path[64];
    snprintf(path, sizeof path, "layers[%d]", i);
    int j = i - 1;
    while (j >= 0 && strcmp(m->layers[j].name, key->str)) j--;
    if (j >= 0 && ps->owner[j] >= 0)
        return tfc_node_error(err, TFC_ERR_CONFIG, key, path, "layer '%s' is inside a "
                              "Pipeline, which calls it: tfc calls a layer again only outside "
                              "one", key->str);
    int pipeline = 0; /* named so, or by Keras's default (pipeline, pipeline_1, ...) */
    for (int p = 0; p < ps->n; p++)
        pipeline |= ps->p[p].name ? !strcmp(ps->p[p].name->str, key->str)
                                  : !strncmp(key->str, "pipeline", 8);
    if (j < 0 && pipeline)
        return tfc_node_error(err, TFC_ERR_CONFIG, key, path, "a call of the Pipeline '%s': "
                              "tfc does not call a Pipeline again yet; call its layers one by "
                              "one", key->str);
    if (j >= 0 && ps->owner[i] >= 0)
        return tfc_node_error(err, TFC_ERR_CONFIG, key, path, "a call of layer '%s' inside a "
                              "Pipeline: tfc calls a layer again only outside one", key->str);
    if (j < 0) {
        int later = 0;
        for (int q = i + 1; q < m->nlayers; q++) later |= !strcmp(m->layers[q].name, key->str);
        if (later)
            return tfc_node_error(err, TFC_ERR_CONFIG, key, path, "a call of layer '%s' before "
                                  "the layer: a layer is called again below the item that "
                                  "makes it", key->str);
        return unknown_type(m, ps, i, key, path, err);
    }
    const int owner = m->layers[j].calls >= 0 ? m->layers[j].calls : j;
    const tfc_layer *o = &m->layers[owner];
    if (!o->ops) return TFC_ERR_CONFIG; /* its own error is reported */
    if (call_arguments(i, item, err)) return TFC_ERR_CONFIG;
    if (o->ops->writes_params)
        return tfc_node_error(err, TFC_ERR_CONFIG, key, path, "a call of layer '%s': %s writes "
                              "its weights in its forward pass, which tfc does not share "
                              "between calls yet", key->str, o->ops->type);
    l->ops = o->ops;
    l->calls = owner;
    if (named) return TFC_OK;
    int k = 1;
    for (int q = owner + 1; q < i; q++) k += m->layers[q].calls == owner;
    snprintf(l->name, sizeof l->name, "%.100s_call_%d", o->name, k);
    for (int q = 0; q < m->nlayers; q++)
        if ((q != i && !strcmp(m->layers[q].name, l->name)) || input_named(m, l->name))
            return tfc_node_error(err, TFC_ERR_CONFIG, key, path, "the call's default name "
                                  "'%s' is another layer's: give the call a name:", l->name);
    return TFC_OK;
}

/* The layers of list, the model's with each Pipeline expanded (ps). */
static tfc_status build_layer_list(tfc_model *m, const tfc_node *list, tfc_pipelines *ps,
                                   tfc_error *err)
{
    m->layers = calloc((size_t)list->n, sizeof *m->layers);
    if (!m->layers) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    m->nlayers = list->n;
    tfc_status status = TFC_OK;
    const tfc_node *types[TFC_MAX_LAYERS], *names[TFC_MAX_LAYERS], *inputs[TFC_MAX_LAYERS],
        *trainable[TFC_MAX_LAYERS];
    tfc_node *args[TFC_MAX_LAYERS];
    int calls[TFC_MAX_LAYERS] = {0}; /* item i's key is no type: a call (resolve_call) */
    /* Pass 1: types and explicit names, so default names avoid every explicit one. */
    for (int i = 0; i < list->n; i++) {
        tfc_layer *l = &m->layers[i];
        l->index = i;
        l->calls = -1;
        l->node = list->vals[i];
        l->args_node = NULL;
        types[i] = NULL;
        if (parse_layer_item(m, i, list->vals[i], &types[i], &args[i], &names[i], &inputs[i],
                             &trainable[i], err)) {
            status = TFC_ERR_CONFIG;
            types[i] = NULL;
            continue;
        }
        l->ops = tfc_layer_lookup(types[i]->str);
        if (!l->ops && tfc_model_is_input_layer(list->vals[i])) {
            char path[64];
            snprintf(path, sizeof path, "layers[%d]", i);
            status = tfc_node_error(err, TFC_ERR_CONFIG, types[i], path,
                                    "%s gives the model's input: only as the first layer (a "
                                    "run of them first: the model's inputs), and only without "
                                    "`input:`", types[i]->str);
            types[i] = NULL;
            continue;
        }
        const char *why = NULL, *op = l->ops ? NULL : pipeline_op_of(types[i]->str, &why);
        if (op) {
            char path[64], reason[512];
            snprintf(path, sizeof path, "layers[%d]", i);
            snprintf(reason, sizeof reason, why, op);
            tfc_node_error(err, TFC_ERR_CONFIG, types[i], path, "%s is not a model layer in "
                           "tfc: %s (docs/data.md, Map ops)", types[i]->str, reason);
            status = TFC_ERR_CONFIG;
            types[i] = NULL;
            continue;
        }
        if (!l->ops && left_out_because(types[i]->str)) {
            char path[64];
            snprintf(path, sizeof path, "layers[%d]", i);
            tfc_node_error(err, TFC_ERR_CONFIG, types[i], path, "%s is not in tfc: %s",
                           types[i]->str, left_out_because(types[i]->str));
            status = TFC_ERR_CONFIG;
            types[i] = NULL;
            continue;
        }
        const char *pname;
        int plen, pargs;
        char bare[64];
        if (!l->ops && tfc_python_name(types[i]->str, &pname, &plen, &pargs) &&
            plen < (int)sizeof bare) { /* Dense(64, activation="relu"), keras.layers.Dense */
            snprintf(bare, sizeof bare, "%.*s", plen, pname);
            const tfc_layer_ops *ops = tfc_layer_lookup(bare);
            char path[64];
            snprintf(path, sizeof path, "layers[%d]", i);
            char first[64];
            if (ops && pargs && python_first_arg(pname + plen, first, sizeof first))
                tfc_node_error(err, TFC_ERR_CONFIG, types[i], path, "'%s' is a Python call: "
                               "write - %s: {...}, the arguments by name (the first may stand "
                               "alone: - %s: %s)", types[i]->str, bare, bare, first);
            else if (ops && pargs)
                tfc_node_error(err, TFC_ERR_CONFIG, types[i], path, "'%s' is a Python call: "
                               "write - %s: {...}, the arguments by name", types[i]->str, bare);
            else if (ops)
                tfc_node_error(err, TFC_ERR_CONFIG, types[i], path, "'%s' is Python: write %s "
                               "(the layer's name, without %s)", types[i]->str, bare,
                               strchr(types[i]->str, '(') ? "the call" : "a module");
            if (ops) {
                status = TFC_ERR_CONFIG;
                types[i] = NULL;
                continue;
            }
        }
        if (!l->ops) calls[i] = 1; /* a call of an earlier layer, or an unknown type */
        if (names[i]) {
            char path[96];
            snprintf(path, sizeof path, "layers[%d].%s.name", i, types[i]->str);
            if (names[i]->kind != TFC_NODE_SCALAR || !*names[i]->str ||
                strlen(names[i]->str) >= sizeof l->name || strchr(names[i]->str, '/')) {
                status = tfc_node_error(err, TFC_ERR_CONFIG, names[i], path,
                                        "expected a name of 1 to %zu characters without '/'",
                                        sizeof l->name - 1);
            } else if (name_taken(m, names[i]->str, i) || !strcmp(names[i]->str, "input") ||
                       input_named(m, names[i]->str)) {
                status = tfc_node_error(err, TFC_ERR_CONFIG, names[i], path,
                                        "the name '%s' is already used", names[i]->str);
            } else {
                snprintf(l->name, sizeof l->name, "%s", names[i]->str);
            }
        }
    }
    for (int i = 0; i < list->n; i++) {
        tfc_layer *l = &m->layers[i];
        if (!types[i] || l->name[0] || calls[i]) continue;
        char base[52]; /* room for contrast_limited_adaptive_histogram_equalization, and
                        * for base_<int> in l->name */
        /* the class's name, as Keras: MaxPool2D is max_pooling2d, GroupQueryAttention's
         * class GroupedQueryAttention grouped_query_attention */
        tfc_snake_case(l->ops->class_name ? l->ops->class_name : l->ops->type, base, sizeof base);
        for (int k = 0;; k++) {
            if (k == 0) snprintf(l->name, sizeof l->name, "%s", base);
            else snprintf(l->name, sizeof l->name, "%s_%d", base, k);
            int clash = 0;
            for (int j = 0; j < list->n; j++)
                if (j != i && strcmp(m->layers[j].name, l->name) == 0) clash = 1;
            if (!clash) break;
        }
    }
    for (int i = 0; i < list->n; i++)
        if (types[i] && calls[i] && resolve_call(m, ps, i, list->vals[i], names[i] != NULL,
                                                 err)) {
            status = TFC_ERR_CONFIG;
            types[i] = NULL;
            m->layers[i].ops = NULL;
        }
    if (ps->n && tfc_pipelines_name(ps, m, err)) status = TFC_ERR_CONFIG;
    /* Pass 2: arguments, inputs and shapes, layer by layer. A layer of an unknown type is
     * skipped, so the other layers' arguments are still checked in this run; shapes stop at
     * the first error (after it they would only echo it). */
    for (int i = 0; i < list->n; i++) {
        tfc_layer *l = &m->layers[i];
        if (!l->ops) continue;
        char path[96];
        snprintf(path, sizeof path, "layers[%d].%s", i, types[i]->str); /* as written */
        if (l->calls >= 0) { /* the arguments of the layer it calls, which has them */
            if (status) continue; /* that layer's errors would repeat at each call */
            args[i] = (tfc_node *)m->layers[l->calls].args_node;
            l->frozen = m->layers[l->calls].frozen;
        }
        l->args = calloc(1, l->ops->args_size ? l->ops->args_size : 1);
        if (!l->args) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        l->args_node = args[i];
        if (tfc_schema_apply(l->ops->schema, args[i], path, l->args, err)) {
            if (args[i] && (tfc_node_get(args[i], "input_shape") ||
                            (tfc_node_get(args[i], "input_dim") &&
                             is_input_shape_arg(types[i]->str, "input_dim"))))
                tfc_error_hint(err, "input_shape and input_dim give the model's input on the "
                                    "first layer only, as in Keras's Sequential (which "
                                    "ignores them elsewhere); here they would say nothing");
            /* Keras's dtype policies (dtype="mixed_bfloat16" on a layer) are a solver key */
            if (args[i] && tfc_node_get(args[i], "dtype"))
                tfc_error_hint(err, "a layer's dtype policy is the solver's `precision: "
                                    "float32|bf16|float16` in tfc, for the whole model "
                                    "(docs/solver.md, Precision)");
            status = TFC_ERR_CONFIG;
            continue;
        }
        if (trainable[i]) { /* Keras's Layer argument: false freezes the layer's weights */
            char tpath[112];
            int on = 1;
            snprintf(tpath, sizeof tpath, "%s.trainable", path);
            if (tfc_node_bool(trainable[i], tpath, &on, err)) {
                status = TFC_ERR_CONFIG;
                continue;
            }
            l->frozen = !on;
        }
        const int pipe = tfc_pipelines_outermost_at(ps, i);
        if (inputs[i] && ps->owner[i] >= 0) {
            tfc_node_error(err, TFC_ERR_CONFIG, inputs[i], path, "a layer inside a Pipeline "
                           "takes the output of the layer before it (Keras's Pipeline is a "
                           "sequence): give `inputs:` to the Pipeline");
            status = TFC_ERR_CONFIG;
            continue;
        }
        if (pipe >= 0 && ps->p[pipe].inputs) inputs[i] = ps->p[pipe].inputs;
        if (inputs[i]) {
            char ipath[112];
            snprintf(ipath, sizeof ipath, "%s.inputs", path);
            if (resolve_inputs(m, ps, l, inputs[i], ipath, err)) {
                status = TFC_ERR_CONFIG;
                continue;
            }
        } else if (i == 0 && m->ninputs > 1) {
            tfc_node_error(err, TFC_ERR_CONFIG, types[i], path, "the model has %d inputs: "
                           "name the ones this layer reads in inputs: [%s, ...]", m->ninputs,
                           tfc_model_input_name(m, 0));
            status = TFC_ERR_CONFIG;
            continue;
        } else {
            l->ninputs = 1;
            l->inputs[0] = i - 1;
        }
        if (l->ninputs < l->ops->min_inputs || l->ninputs > l->ops->max_inputs) {
            if (l->ops->min_inputs == l->ops->max_inputs)
                tfc_layer_error(err, l, "takes %d input%s, given %d", l->ops->min_inputs,
                                l->ops->min_inputs == 1 ? "" : "s", l->ninputs);
            else
                tfc_layer_error(err, l, "takes %d to %d inputs, given %d (list them in inputs:)",
                                l->ops->min_inputs, l->ops->max_inputs, l->ninputs);
            status = TFC_ERR_CONFIG;
            continue;
        }
        if (status) continue; /* shapes after an earlier error would only echo it */
        int bad = 0;
        for (int j = 0; j < l->ninputs; j++) {
            int p = l->inputs[j];
            if (p >= 0 && m->layers[p].out_shape.ndim == 0 && !m->layers[p].ops) bad = 1;
        }
        if (bad) continue;
        l->max_batch = 1;
        if (tfc_model_derive_layer(m, l, err)) status = TFC_ERR_CONFIG;
    }
    if (!status && m->layers[m->nlayers - 1].out_dtype == TFC_I32)
        return tfc_layer_error(err, &m->layers[m->nlayers - 1], "gives int32 indices "
                               "(output_mode int), which a model's output cannot be: give it "
                               "another output_mode or a layer after it (an Embedding)");
    return status ? status : every_input_read(m, err) ? TFC_ERR_CONFIG : one_input_mask(m, err);
}

/* A layer named in `outputs:`, or the Pipeline of that label (its last layer); -1: none. */
static int output_named(const tfc_model *m, const tfc_pipelines *ps, const char *name)
{
    for (int j = 0; j < m->nlayers; j++)
        if (ps->owner[j] < 0 && !strcmp(m->layers[j].name, name)) return j;
    const int pipe = tfc_pipelines_find(ps, name);
    return pipe >= 0 ? ps->p[pipe].last : -1;
}

/* `outputs:` (Keras's Model(outputs=[...])): the model's outputs in that order, each a
 * layer's, once; the last layer when not given. Then every layer is read by a later one or
 * is an output: a layer whose output goes nowhere is a mistake in `inputs:` (Keras's
 * functional model would leave it out). */
static tfc_status resolve_outputs(tfc_model *m, const tfc_pipelines *ps, const tfc_node *node,
                                  tfc_error *err)
{
    m->noutputs = 1;
    m->outputs[0] = m->nlayers - 1;
    if (node) {
        const int n = node->kind == TFC_NODE_SEQ ? node->n : 1;
        if (node->kind == TFC_NODE_MAP || n == 0)
            return tfc_node_error(err, TFC_ERR_CONFIG, node, "outputs",
                                  "expected a layer name or a list of layer names");
        if (n > TFC_MODEL_MAX_OUTPUTS)
            return tfc_node_error(err, TFC_ERR_CONFIG, node, "outputs",
                                  "a model gives at most %d outputs, found %d",
                                  TFC_MODEL_MAX_OUTPUTS, n);
        for (int k = 0; k < n; k++) {
            const tfc_node *nm = node->kind == TFC_NODE_SEQ ? node->vals[k] : node;
            char path[32];
            snprintf(path, sizeof path, node->kind == TFC_NODE_SEQ ? "outputs[%d]" : "outputs",
                     k);
            if (nm->kind != TFC_NODE_SCALAR)
                return tfc_node_error(err, TFC_ERR_CONFIG, nm, path, "expected a layer name");
            const int j = output_named(m, ps, nm->str);
            if (j < 0) {
                const char *names[TFC_MAX_LAYERS + 1];
                int c = 0;
                for (int q = 0; q < m->nlayers; q++)
                    if (ps->owner[q] < 0) names[c++] = m->layers[q].name;
                names[c] = NULL;
                const char *guess = tfc_did_you_mean(nm->str, names);
                return tfc_node_error(err, TFC_ERR_CONFIG, nm, path,
                                      "no layer is named '%s'%s%s%s%s", nm->str,
                                      input_named(m, nm->str) ? " (a model input is not an "
                                                                "output: give it a layer)"
                                                              : "",
                                      guess ? "; did you mean '" : "", guess ? guess : "",
                                      guess ? "'?" : "");
            }
            for (int q = 0; q < k; q++)
                if (m->outputs[q] == j)
                    return tfc_node_error(err, TFC_ERR_CONFIG, nm, path,
                                          "layer '%s' is already outputs[%d]", nm->str, q);
            m->outputs[k] = j;
        }
        m->noutputs = n;
    }
    for (int i = 0; i < m->nlayers; i++) {
        int read = tfc_model_is_output(m, i);
        for (int j = i + 1; j < m->nlayers && !read; j++)
            for (int q = 0; q < m->layers[j].ninputs; q++) read |= m->layers[j].inputs[q] == i;
        if (!read)
            return tfc_layer_error(err, &m->layers[i], "its output is read by no layer and is "
                                   "not among the model's outputs: name it in a later layer's "
                                   "inputs: or in outputs:");
    }
    return TFC_OK;
}

static tfc_status build_layers(tfc_model *m, const tfc_node *list, const tfc_node *outputs,
                               tfc_error *err)
{
    if (list->kind != TFC_NODE_SEQ || list->n == 0)
        return tfc_node_error(err, TFC_ERR_CONFIG, list, "layers",
                              "expected a non-empty list of layers, found %s",
                              list->kind == TFC_NODE_SEQ ? "an empty list"
                                                         : tfc_node_kind_name(list->kind));
    if (list->n > TFC_MAX_LAYERS)
        return tfc_node_error(err, TFC_ERR_CONFIG, list, "layers", "at most %d layers, found %d",
                              TFC_MAX_LAYERS, list->n);
    tfc_pipelines ps;
    tfc_status status = tfc_pipelines_expand(m->doc_scratch, list, &ps, err);
    if (!status) status = build_layer_list(m, ps.list, &ps, err);
    if (!status) status = resolve_outputs(m, &ps, outputs, err);
    tfc_pipelines_free(&ps);
    return status;
}

/* Output rows and classes for head h's loss: (classes) or (steps, classes); BCE and MSE
 * take any shape, flattened to rows of the last axis. */
static void set_classes(tfc_model *m, tfc_head *h)
{
    const tfc_layer *out = &m->layers[h->layer];
    h->classes = (int)out->out_shape.dim[out->out_shape.ndim - 1];
    h->label_rows = tfc_layer_out_numel(out) / h->classes;
}

/* "the last layer" of a model of one output, else "the output layer": where head h's
 * errors say its output comes from. */
static const char *head_layer_is(const tfc_model *m)
{
    return m->noutputs > 1 ? "the output layer" : "the last layer";
}

/* Head h's loss against its output: `at` the node errors point at (NULL: the head's entry,
 * else the output layer). */
static tfc_status check_loss(const tfc_model *m, const tfc_head *h, const tfc_node *at,
                             tfc_error *err)
{
    const tfc_layer *out = &m->layers[h->layer];
    const tfc_shape *s = &out->out_shape;
    char buf[96];
    if (h->loss == TFC_LOSS_SPARSE_CCE && h->classes < 2) {
        const tfc_node *where = at ? at : h->node ? h->node : out->node;
        return tfc_node_error(err, TFC_ERR_CONFIG, where, "loss",
                              "%s needs at least 2 output classes; %s '%s' gives %s",
                              tfc_loss_names[h->loss], head_layer_is(m), out->name,
                              tfc_shape_str(s, buf, sizeof buf));
    }
    if (tfc_loss_options_check(m, h, err)) return TFC_ERR_CONFIG;
    return TFC_OK;
}

/* A loss function's metric against the labels and the output: the labels it reads are
 * the loss's (class ids for sparse_categorical_crossentropy alone, float targets of the
 * output's shape for the others), and a cross-entropy's from_logits says what the output
 * holds: probabilities where its layer ends in softmax or sigmoid, else logits. */
static tfc_status loss_fn_check(const tfc_model *m, const tfc_head *h, const tfc_metric *mt,
                                const tfc_node *at, const char *path, tfc_error *err)
{
    const int act = m->layers[h->layer].act;
    const int logits = act != TFC_ACT_SOFTMAX && act != TFC_ACT_SIGMOID;
    const tfc_loss_kind fn = (tfc_loss_kind)mt->fn;
    const int sparse = h->loss == TFC_LOSS_SPARSE_CCE;
    const char *layer = m->noutputs > 1 ? "output layer" : "model's last layer";
    if (fn == TFC_LOSS_SPARSE_CCE && !sparse)
        return tfc_node_error(err, TFC_ERR_CONFIG, at, path,
                              "%s reads one class id per row, and %s's labels are float "
                              "targets of the output's shape: write categorical_crossentropy",
                              mt->name, tfc_loss_names[h->loss]);
    if (fn != TFC_LOSS_SPARSE_CCE && sparse)
        return tfc_node_error(err, TFC_ERR_CONFIG, at, path,
                              "%s compares the outputs with float targets of their shape, and "
                              "sparse_categorical_crossentropy reads one class id per row: "
                              "train with one-hot labels (a pipeline stage map: {op: one_hot, "
                              "depth: %d}) and categorical_crossentropy%s", mt->name,
                              h->classes,
                              fn == TFC_LOSS_CCE ? ", or write sparse_categorical_crossentropy"
                                                 : "");
    const int ce = fn == TFC_LOSS_BCE || fn == TFC_LOSS_CCE || fn == TFC_LOSS_SPARSE_CCE;
    if (ce && logits && !mt->fn_logits)
        return tfc_node_error(err, TFC_ERR_CONFIG, at, path,
                              "%s takes the outputs as probabilities, and the %s has no "
                              "softmax or sigmoid: write {%s: {from_logits: true}} for logits",
                              mt->name, layer, mt->name);
    if (ce && !logits && mt->fn_logits)
        return tfc_node_error(err, TFC_ERR_CONFIG, at, path,
                              "%s with from_logits: true takes the outputs as logits, and the "
                              "%s ends in its %s: they are probabilities", mt->name, layer,
                              act == TFC_ACT_SOFTMAX ? "softmax" : "sigmoid");
    return TFC_OK;
}

/* Head h's metrics against its output, once check_loss found its loss fits: one name each
 * over the model (the logs key them by it); a counted metric checked against the output and
 * the labels, its counts placed after *at in the model's; top_k_accuracy's k within the
 * classes. */
static tfc_status check_metrics(tfc_model *m, const tfc_head *h, int64_t *at, tfc_error *err)
{
    const tfc_node *list = h->metrics_node;
    const tfc_layer *out = &m->layers[h->layer];
    const int ce = h->loss == TFC_LOSS_SPARSE_CCE || h->loss == TFC_LOSS_CCE ||
                   h->loss == TFC_LOSS_BCE;
    const int logits = ce && out->act != TFC_ACT_SOFTMAX && out->act != TFC_ACT_SIGMOID;
    for (int q = 0; q < h->nmetrics; q++) {
        const int i = h->metric0 + q;
        tfc_metric *mt = &m->metrics[i];
        char path[192];
        snprintf(path, sizeof path, "%s[%d]", h->metrics_at, q);
        const tfc_node *item = list && list->kind == TFC_NODE_SEQ && q < list->n ? list->vals[q]
                                                                               : list;
        if (!strcmp(mt->name, "loss") && mt->kind != TFC_METRIC_LOSS)
            return tfc_node_error(err, TFC_ERR_CONFIG, item, path,
                                  "a metric named loss: the logs' loss is the model's loss "
                                  "(give this one another name)");
        for (int j = 0; j < i; j++)
            if (!strcmp(m->metrics[j].name, mt->name))
                return tfc_node_error(err, TFC_ERR_CONFIG, item, path,
                                      "a second metric named %s: the logs key metrics by name "
                                      "(give it another with name:)", mt->name);
        if (mt->fn >= 0 && loss_fn_check(m, h, mt, item, path, err)) return TFC_ERR_CONFIG;
        if (mt->kind == TFC_METRIC_TOP_K && mt->k > h->classes)
            return tfc_node_error(err, TFC_ERR_CONFIG, item, path,
                                  "top_k_accuracy with k = %d exceeds the %d output classes",
                                  mt->k, h->classes);
        if (mt->kind != TFC_METRIC_COUNTED) continue;
        if (tfc_counted_check(mt->counted, h->classes, h->label_rows,
                              h->loss == TFC_LOSS_SPARSE_CCE ? TFC_LABELS_SPARSE
                                                             : TFC_LABELS_DENSE,
                              logits, tfc_loss_names[h->loss], item, path, err))
            return TFC_ERR_CONFIG;
        mt->at = *at;
        *at += mt->counted->ncounts;
    }
    return TFC_OK;
}

tfc_status tfc_model_check_loss(const tfc_model *m, tfc_error *err)
{
    for (int k = 0; k < m->noutputs && m->loss_unusable; k++)
        if (check_loss(m, &m->heads[k], NULL, err)) return TFC_ERR_CONFIG;
    return TFC_OK;
}

/* Whether head h's layer's activation folds into its loss (softmax with a categorical
 * cross-entropy, sigmoid with binary cross-entropy), as Keras computes these from the
 * logits: where no later layer reads the output, whose gradient is then the loss's alone. */
static int fused_loss(const tfc_model *m, const tfc_head *h)
{
    const tfc_layer *out = &m->layers[h->layer];
    for (int j = h->layer + 1; j < m->nlayers; j++)
        for (int q = 0; q < m->layers[j].ninputs; q++)
            if (m->layers[j].inputs[q] == h->layer) return 0;
    if (out->act == TFC_ACT_SOFTMAX)
        return h->loss == TFC_LOSS_SPARSE_CCE || h->loss == TFC_LOSS_CCE;
    if (out->act == TFC_ACT_SIGMOID) return h->loss == TFC_LOSS_BCE;
    return 0;
}

/* Whether a `loss:` mapping is one loss's options ({type: ..., label_smoothing: ...}, or
 * Keras's serialized form) rather than a loss per output ({main: mse, aux: ...}). */
static int loss_options_map(const tfc_node *node)
{
    static const char *const serialized[] = {"class_name", "config", "module",
                                             "registered_name", NULL};
    for (int i = 0; i < node->n; i++) {
        int known = 0;
        for (const tfc_field *f = tfc_loss_fields(); f->name && !known; f++)
            known = !strcmp(node->keys[i]->str, f->name);
        for (int k = 0; serialized[k] && !known; k++)
            known = !strcmp(node->keys[i]->str, serialized[k]);
        if (!known) return 0;
    }
    return 1;
}

/* The output named by `key` (its index), or -1 with the error at `key` (`what`: its path)
 * naming the outputs. */
static int output_of_key(const tfc_model *m, const tfc_node *key, const char *what,
                         tfc_error *err)
{
    const char *names[TFC_MODEL_MAX_OUTPUTS + 1];
    for (int k = 0; k < m->noutputs; k++) {
        names[k] = m->layers[m->outputs[k]].name;
        if (!strcmp(key->str, names[k])) return k;
    }
    names[m->noutputs] = NULL;
    const char *guess = tfc_did_you_mean(key->str, names);
    tfc_node_error(err, TFC_ERR_CONFIG, key, what, "'%s' is not one of the model's outputs "
                   "(%s, %s%s)%s%s%s", key->str, names[0], names[1],
                   m->noutputs > 2 ? ", ..." : "", guess ? "; did you mean '" : "",
                   guess ? guess : "", guess ? "'?" : "");
    return -1;
}

/* A per-output value of `loss:`, `loss_weights:` or `metrics:` (`key`): a list in the
 * outputs' order or a mapping by output name; vals[k] gets output k's node (NULL: none
 * given), paths[k] its path. */
static tfc_status per_output(const tfc_model *m, const tfc_node *node, const char *key,
                             const tfc_node **vals, char (*paths)[160], tfc_error *err)
{
    for (int k = 0; k < m->noutputs; k++) {
        vals[k] = NULL;
        snprintf(paths[k], sizeof paths[k], "%s.%s", key, m->layers[m->outputs[k]].name);
    }
    if (node->kind == TFC_NODE_SEQ) {
        if (node->n != m->noutputs)
            return tfc_node_error(err, TFC_ERR_CONFIG, node, key, "a list of %d, and the "
                                  "model has %d outputs (%s, %s%s): one each, in their order, "
                                  "or a mapping by name", node->n, m->noutputs,
                                  m->layers[m->outputs[0]].name, m->layers[m->outputs[1]].name,
                                  m->noutputs > 2 ? ", ..." : "");
        for (int k = 0; k < m->noutputs; k++) {
            vals[k] = node->vals[k];
            snprintf(paths[k], sizeof paths[k], "%s[%d]", key, k);
        }
        return TFC_OK;
    }
    for (int i = 0; i < node->n; i++) {
        char path[160];
        snprintf(path, sizeof path, "%s.%s", key, node->keys[i]->str);
        const int k = output_of_key(m, node->keys[i], path, err);
        if (k < 0) return TFC_ERR_CONFIG;
        vals[k] = node->vals[i];
    }
    return TFC_OK;
}

/* A model of several outputs (Keras's compile(loss={...}, loss_weights={...},
 * metrics={...})): each head's loss (`loss:` one for all, or one each: a list or a mapping
 * by output, every output given one), its weight (`loss_weights:`, default 1) and its metrics
 * (`metrics:` a mapping by output or a list of lists). The logs report each head's loss as
 * OUTPUT_loss, first, then its metrics as OUTPUT_METRIC. */
static tfc_status read_heads(tfc_model *m, const model_args *a, tfc_error *err)
{
    const tfc_node *vals[TFC_MODEL_MAX_OUTPUTS];
    char paths[TFC_MODEL_MAX_OUTPUTS][160];
    const int K = m->noutputs;
    tfc_status status = TFC_OK;
    const int each = a->loss && (a->loss->kind == TFC_NODE_SEQ ||
                                 (a->loss->kind == TFC_NODE_MAP && !loss_options_map(a->loss)));
    if (each && per_output(m, a->loss, "loss", vals, paths, err)) return TFC_ERR_CONFIG;
    for (int k = 0; k < K; k++) {
        tfc_head *h = &m->heads[k];
        h->node = each ? vals[k] : a->loss;
        if (each && !vals[k])
            return tfc_node_error(err, TFC_ERR_CONFIG, a->loss, "loss", "output '%s' has no "
                                  "loss: give every output one (or one loss for all)",
                                  m->layers[m->outputs[k]].name);
        if (tfc_loss_options_read(h->node, &h->loss, &h->loss_opt, err)) status = TFC_ERR_CONFIG;
        else if (h->loss_opt.balanced)
            status = tfc_node_error(err, TFC_ERR_CONFIG, tfc_node_get(h->node, "class_weight"),
                                    "loss.class_weight", "balanced, with several outputs: not "
                                    "in tfc yet (give the weights)");
    }
    if (a->loss_weights && a->loss_weights->kind == TFC_NODE_SCALAR)
        return tfc_node_error(err, TFC_ERR_CONFIG, a->loss_weights, "loss_weights",
                              "expected one weight per output, a list or a mapping by name");
    if (a->loss_weights && per_output(m, a->loss_weights, "loss_weights", vals, paths, err))
        return TFC_ERR_CONFIG;
    for (int k = 0; k < K; k++) {
        double w = 1;
        if (a->loss_weights && vals[k] && tfc_node_double(vals[k], paths[k], &w, err))
            return TFC_ERR_CONFIG;
        if (!(w >= 0) || !isfinite(w))
            return tfc_node_error(err, TFC_ERR_CONFIG, vals[k], paths[k],
                                  "expected a finite weight >= 0, found %g", w);
        m->heads[k].weight = (float)w;
    }
    const tfc_node *ms = a->metrics;
    for (int i = 0; ms && ms->kind == TFC_NODE_SEQ && i < ms->n; i++) /* lists, not names */
        if (ms->vals[i]->kind != TFC_NODE_SEQ && !tfc_node_is_null(ms->vals[i]))
            return tfc_node_error(err, TFC_ERR_CONFIG, ms->vals[i], "metrics",
                                  "the model has %d outputs: give each its list of metrics, "
                                  "{%s: [...], %s: [...]} or a list of lists (Keras's "
                                  "compile(metrics={...}))", K, m->layers[m->outputs[0]].name,
                                  m->layers[m->outputs[1]].name);
    if (ms && ms->kind != TFC_NODE_SEQ && ms->kind != TFC_NODE_MAP)
        return tfc_node_error(err, TFC_ERR_CONFIG, ms, "metrics", "expected a list of metrics "
                              "per output, found %s", tfc_node_kind_name(ms->kind));
    if (ms && per_output(m, ms, "metrics", vals, paths, err)) return TFC_ERR_CONFIG;
    if (status) return status;
    for (int k = 0; k < K; k++) { /* the logs' OUTPUT_loss, first */
        tfc_metric *mt = &m->metrics[m->nmetrics++];
        mt->kind = TFC_METRIC_LOSS;
        mt->k = 1;
        mt->fn = -1;
        mt->sign = 1;
        const char *out = m->layers[m->outputs[k]].name;
        if (snprintf(mt->name, sizeof mt->name, "%s_loss", out) >= (int)sizeof mt->name)
            return tfc_layer_error(err, &m->layers[m->outputs[k]], "a name of %zu characters: "
                                   "the logs report its loss as NAME_loss, of at most %zu",
                                   strlen(out), sizeof mt->name - 1);
    }
    for (int k = 0; k < K; k++) {
        tfc_head *h = &m->heads[k];
        h->metrics_node = ms ? vals[k] : NULL;
        snprintf(h->metrics_at, sizeof h->metrics_at, "%s", paths[k]);
        if (parse_metrics(m, h, h->metrics_node, h->metrics_at, err)) return TFC_ERR_CONFIG;
        const char *out = m->layers[m->outputs[k]].name;
        for (int q = 0; q < h->nmetrics; q++) { /* OUTPUT_METRIC, as Keras reports it */
            tfc_metric *mt = &m->metrics[h->metric0 + q];
            char named[sizeof mt->name];
            if (snprintf(named, sizeof named, "%s_%s", out, mt->name) >= (int)sizeof named)
                return tfc_node_error(err, TFC_ERR_CONFIG, h->metrics_node, h->metrics_at,
                                      "%s_%s: a name of more than %zu characters (the logs "
                                      "report a metric as OUTPUT_METRIC)", out, mt->name,
                                      sizeof named - 1);
            memcpy(mt->name, named, sizeof named);
        }
    }
    return TFC_OK;
}

/* Parameter floats, all and trainable ones: the sizes of the arenas graph.c binds. */
static void count_params(tfc_model *m)
{
    m->param_count = m->trainable_count = m->frozen_count = m->weight_count = 0;
    for (int i = 0; i < m->nlayers; i++)
        for (int p = 0; p < m->layers[i].nparams; p++) {
            const tfc_param *pr = &m->layers[i].params[p];
            if (pr->shared) continue; /* counted once, at its first call */
            m->param_count += pr->numel;
            if (pr->trainable) m->trainable_count += pr->numel;
            if (pr->frozen) m->frozen_count += pr->numel;
            if (!pr->constant) m->weight_count += pr->numel;
        }
}

/* Keras's InputLayer and keras.Input, as a Sequential model's first layer gives the input
 * (model.get_config() writes it so: {batch_shape: [null, 28, 28, 1], dtype: float32, sparse:
 * false, ragged: false, name: input_layer, optional: false}). */
typedef struct input_layer_args {
    const tfc_node *shape, *batch_shape, *batch_size, *dtype, *max_length;
    const tfc_node *input_shape, *batch_input_shape; /* Keras 2's names, which Keras 3 takes */
    const char *name;
} input_layer_args;

static const tfc_field input_layer_fields[] = {
    {"shape", TFC_F_NODE, offsetof(input_layer_args, shape), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "one example's shape (input.shape)"},
    {"batch_shape", TFC_F_NODE, offsetof(input_layer_args, batch_shape), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "[null, ...]: the batch axis, then the example's shape"},
    {"batch_size", TFC_F_NODE, offsetof(input_layer_args, batch_size), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "null: the solver's batch_size sets it"},
    {"dtype", TFC_F_NODE, offsetof(input_layer_args, dtype), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "float32, or int32 for token ids (input.dtype)"},
    {"max_length", TFC_F_NODE, offsetof(input_layer_args, max_length), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "tfc's input.max_length, with a null time axis"},
    {"name", TFC_F_STRING, offsetof(input_layer_args, name), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "another name for `input` in the layers' inputs: (Keras's default input_layer)"},
    {"input_shape", TFC_F_NODE, offsetof(input_layer_args, input_shape), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "Keras 2's name of shape (Keras 3 takes it, deprecated)"},
    {"batch_input_shape", TFC_F_NODE, offsetof(input_layer_args, batch_input_shape),
     TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL, "Keras 2's name of batch_shape"},
    TFC_FIXED_FIELD("sparse", "false", "tfc's inputs are dense"),
    TFC_FIXED_FIELD("ragged", "false", "a null time axis takes sequences of any length"),
    TFC_FIXED_FIELD("optional", "false", "the model's one input is always given"),
    TFC_FIXED_FIELD("input_tensor", TFC_NO_DEFAULT, "a YAML model has no tensors"),
    TFC_FIXED_FIELD("tensor", TFC_NO_DEFAULT, "a YAML model has no tensors"),
    {NULL}};

int tfc_model_is_input_layer(const tfc_node *item)
{
    if (!item || item->kind != TFC_NODE_MAP || item->n != 1) return 0;
    const char *type = item->keys[0]->str;
    return !strcmp(type, "InputLayer") || !strcmp(type, "Input");
}

/* The key of the first layer's `input_shape:` or `input_dim:` (Keras's Layer arguments, which
 * a Sequential model takes for its input), or NULL. */
static const tfc_node *first_layer_input_shape(const tfc_node *first)
{
    if (!first || first->kind != TFC_NODE_MAP || first->n != 1 ||
        first->vals[0]->kind != TFC_NODE_MAP)
        return NULL;
    const tfc_node *a = first->vals[0];
    for (int i = 0; i < a->n; i++)
        if (is_input_shape_arg(first->keys[0]->str, a->keys[i]->str)) return a->keys[i];
    /* Keras 2's Embedding(input_dim, output_dim, input_length=T) first in a Sequential */
    for (int i = 0; i < a->n && !strcmp(first->keys[0]->str, "Embedding"); i++)
        if (!strcmp(a->keys[i]->str, "input_length")) return a->keys[i];
    return NULL;
}

/* The k-th InputLayer item (`- InputLayer: {...}`) as the equivalent `input:` mapping *out,
 * its name into name[128] (Keras's defaults: input_layer, input_layer_1, ...). */
static tfc_status input_layer_map(tfc_model *m, const tfc_node *item, int k, const char *path,
                                  const tfc_node **out, char *name, tfc_error *err)
{
    const tfc_node *type = item->keys[0], *args = item->vals[0];
    if (!tfc_node_is_null(args) && args->kind != TFC_NODE_MAP)
        return tfc_node_error(err, TFC_ERR_CONFIG, args, path, "expected a mapping of arguments");
    input_layer_args a;
    if (tfc_schema_apply(input_layer_fields, args, path, &a, err)) return TFC_ERR_CONFIG;
    char key[96];
    if (a.batch_size && !tfc_node_is_null(a.batch_size)) {
        snprintf(key, sizeof key, "%s.batch_size", path);
        return tfc_node_error(err, TFC_ERR_CONFIG, a.batch_size, key,
                              "the solver's batch_size sets the batch; write null or drop it");
    }
    /* Keras 2's input_shape and batch_input_shape: shape and batch_shape under other names */
    const struct { const tfc_node *old, **now; const char *name, *new_name; } renamed[] = {
        {a.input_shape, &a.shape, "input_shape", "shape"},
        {a.batch_input_shape, &a.batch_shape, "batch_input_shape", "batch_shape"}};
    for (int i = 0; i < 2; i++) {
        if (!renamed[i].old || tfc_node_is_null(renamed[i].old)) continue;
        if (*renamed[i].now && !tfc_node_is_null(*renamed[i].now)) {
            snprintf(key, sizeof key, "%s.%s", path, renamed[i].name);
            return tfc_node_error(err, TFC_ERR_CONFIG, renamed[i].old, key,
                                  "%s is Keras 2's name of %s, given too: keep one",
                                  renamed[i].name, renamed[i].new_name);
        }
        *renamed[i].now = renamed[i].old;
    }
    const int has_shape = a.shape && !tfc_node_is_null(a.shape);
    const int has_batch = a.batch_shape && !tfc_node_is_null(a.batch_shape);
    if (has_shape == has_batch)
        return tfc_node_error(err, TFC_ERR_CONFIG, has_shape ? a.batch_shape : type, path,
                              has_shape ? "takes shape or batch_shape, not both"
                                        : "needs the example's shape: shape: [28, 28, 1] (or "
                                          "batch_shape: [null, 28, 28, 1])");
    tfc_node *in = tfc_node_new_map(m->doc_scratch, args);
    if (!in) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    tfc_node *shape = tfc_node_copy(m->doc_scratch, has_shape ? a.shape : a.batch_shape);
    if (!shape) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    if (has_batch) {
        snprintf(key, sizeof key, "%s.batch_shape", path);
        if (shape->kind != TFC_NODE_SEQ || shape->n < 2)
            return tfc_node_error(err, TFC_ERR_CONFIG, a.batch_shape, key,
                                  "expected [null, ...]: the batch axis, then the example's "
                                  "shape");
        if (!tfc_node_is_null(shape->vals[0]))
            return tfc_node_error(err, TFC_ERR_CONFIG, shape->vals[0], key,
                                  "the batch axis must be null: the solver's batch_size sets "
                                  "it");
        memmove(shape->vals, shape->vals + 1, (size_t)(shape->n - 1) * sizeof *shape->vals);
        shape->n--;
    }
    const struct { const char *key; const tfc_node *val; } keys[] = {
        {"shape", shape}, {"dtype", a.dtype}, {"max_length", a.max_length}};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        if (!keys[i].val || tfc_node_is_null(keys[i].val)) continue;
        tfc_node *kn = tfc_node_new_scalar(m->doc_scratch, keys[i].val, keys[i].key, 0);
        if (!kn) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        tfc_node_map_set(in, kn, (tfc_node *)keys[i].val);
    }
    if (k) snprintf(name, 128, "input_layer_%d", k); /* Keras's defaults */
    else snprintf(name, 128, "input_layer");
    if (a.name) {
        snprintf(key, sizeof key, "%s.name", path);
        if (!*a.name || strlen(a.name) >= 128 || strchr(a.name, '/'))
            return tfc_node_error(err, TFC_ERR_CONFIG, tfc_node_get(args, "name"), key,
                                  "expected a name of 1 to 127 characters without '/'");
        snprintf(name, 128, "%s", a.name);
    }
    *out = in;
    return TFC_OK;
}

/* The model's input given as Keras's Sequential models give it, by a first layer
 * `- InputLayer: {...}` (or `- Input:`): *input becomes the equivalent `input:` mapping and
 * *layers the rest of the list (model.layers in Keras has no InputLayer either). Both forms
 * at once, or neither, is an error. A leading run of InputLayers is a functional model's
 * several inputs: the first is *input, the k-th more[k - 1] (m->ninputs of them). */
static tfc_status keras_input_layer(tfc_model *m, const tfc_node *root, const tfc_node **input,
                                    const tfc_node **more, const tfc_node **layers,
                                    char ipath[64], tfc_error *err)
{
    const tfc_node *list = *layers;
    const tfc_node *first = list && list->kind == TFC_NODE_SEQ && list->n ? list->vals[0] : NULL;
    if (!tfc_model_is_input_layer(first)) {
        const tfc_node *given = first_layer_input_shape(first), *dim = NULL;
        if (given && *input && !strcmp(given->str, "input_length"))
            return TFC_OK; /* the Embedding checks it against the input */
        if (given && *input) {
            m->input_from_layer = 1; /* the one error for it */
            snprintf(ipath, 64, "layers[0].%s.%s", first->keys[0]->str, given->str);
            return tfc_node_error(err, TFC_ERR_CONFIG, given, ipath,
                                  "gives the input that `input:` (line %d) gives already; keep "
                                  "one", (*input)->line);
        }
        if (*input) return TFC_OK;
        if (!given)
            return tfc_node_error(err, TFC_ERR_CONFIG, root, "input",
                                  "missing: the model's input, `input: {shape: [28, 28, 1]}`, "
                                  "or a first layer `- InputLayer: {shape: [28, 28, 1]}` as "
                                  "Keras's Sequential models write it");
        /* Keras's Sequential: the first layer's input_shape (or input_dim: [input_dim]) is
         * the input, float32, or int32 token ids into an Embedding (which casts them so) */
        snprintf(ipath, 64, "layers[0].%s.%s", first->keys[0]->str, given->str);
        tfc_node *in = tfc_node_new_map(m->doc_scratch, given);
        tfc_node *k = tfc_node_new_scalar(m->doc_scratch, given, "shape", 0);
        if (!in || !k) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        dim = tfc_node_get(first->vals[0], given->str);
        if ((!strcmp(given->str, "input_dim") || !strcmp(given->str, "input_length")) &&
            dim->kind != TFC_NODE_SCALAR)
            return tfc_node_error(err, TFC_ERR_CONFIG, dim, ipath, "expected an integer: %s",
                                  given->str[6] == 'd' ? "the features of a flat input"
                                                       : "the steps of the token ids");
        tfc_node_map_set(in, k, (tfc_node *)dim);
        if (!strcmp(first->keys[0]->str, "Embedding")) {
            tfc_node *dk = tfc_node_new_scalar(m->doc_scratch, given, "dtype", 0);
            tfc_node *dv = tfc_node_new_scalar(m->doc_scratch, given, "int32", 0);
            if (!dk || !dv) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
            tfc_node_map_set(in, dk, dv);
        }
        m->input_from_layer = 1;
        *input = in;
        return TFC_OK;
    }
    /* a functional model's InputLayers: the leading run of them, one per input */
    int n = 1;
    while (n < list->n && tfc_model_is_input_layer(list->vals[n])) n++;
    tfc_node *rest = tfc_node_copy(m->doc_scratch, list); /* a list of the file's own items */
    if (!rest) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    for (int i = n; i < list->n; i++) rest->vals[i - n] = list->vals[i];
    rest->n -= n;
    *layers = rest; /* the other layers' errors are reported whatever this one's are */
    snprintf(ipath, 64, "layers[0].%s", first->keys[0]->str); /* for the input's errors */
    if (*input)
        return tfc_node_error(err, TFC_ERR_CONFIG, first->keys[0], ipath,
                              "gives the input that `input:` (line %d) gives already; keep one",
                              (*input)->line);
    if (n > TFC_MODEL_MAX_INPUTS)
        return tfc_node_error(err, TFC_ERR_CONFIG, list->vals[TFC_MODEL_MAX_INPUTS]->keys[0],
                              "layers", "a model takes at most %d inputs", TFC_MODEL_MAX_INPUTS);
    m->ninputs = n;
    for (int k = 0; k < n; k++) {
        char path[64];
        snprintf(path, sizeof path, "layers[%d].%s", k, list->vals[k]->keys[0]->str);
        char *name = k ? m->more[k - 1].name : m->input_name;
        m->input_item[k] = list->vals[k]->keys[0];
        tfc_status st = input_layer_map(m, list->vals[k], k, path, k ? &more[k - 1] : input,
                                        name, err);
        if (st) return st;
        for (int j = 0; j < k; j++) {
            const char *other = j ? m->more[j - 1].name : m->input_name;
            if (strcmp(name, other)) continue;
            const tfc_node *at = tfc_node_get(list->vals[k]->vals[0], "name");
            return tfc_node_error(err, TFC_ERR_CONFIG, at ? at : list->vals[k]->keys[0], path,
                                  "the name '%s' is input %d's already: each input needs its "
                                  "own", name, j);
        }
    }
    return TFC_OK;
}

/* Inputs 1 .. ninputs - 1 (keras_input_layer's `more`): their shapes and dtypes, fixed. */
static tfc_status more_inputs(tfc_model *m, const tfc_node *const *more, tfc_error *err)
{
    for (int k = 1; k < m->ninputs; k++) {
        if (!more[k - 1]) continue; /* its InputLayer's error is reported */
        char path[64];
        snprintf(path, sizeof path, "layers[%d].InputLayer", k);
        const tfc_node *shape = tfc_node_get(more[k - 1], "shape");
        const tfc_node *max = tfc_node_get(more[k - 1], "max_length");
        for (int i = 0; shape && shape->kind == TFC_NODE_SEQ && i < shape->n; i++)
            if (tfc_node_is_null(shape->vals[i]) || (max && !tfc_node_is_null(max)))
                return tfc_node_error(err, TFC_ERR_CONFIG, shape->vals[i], path,
                                      "input %d of variable length: the inputs after the "
                                      "first have a fixed shape so far (only the first "
                                      "input's time axis may be null)", k);
        input_args in;
        if (tfc_schema_apply(input_fields, more[k - 1], path, &in, err)) return TFC_ERR_CONFIG;
        if (in.shape.n > TFC_MAX_DIMS - 1)
            return tfc_node_error(err, TFC_ERR_CONFIG, shape, path, "at most %d dimensions",
                                  TFC_MAX_DIMS - 1);
        tfc_shape *s = &m->more[k - 1].shape;
        s->ndim = in.shape.n;
        for (int i = 0; i < in.shape.n; i++) s->dim[i] = in.shape.v[i];
        m->more[k - 1].dtype = dtype_values[in.dtype];
        if (tfc_shape_numel(s) > (1ll << 30))
            return tfc_node_error(err, TFC_ERR_CONFIG, shape, path,
                                  "an example of more than 2^30 elements");
    }
    return TFC_OK;
}

tfc_model *tfc_model_from_node(const tfc_node *root, const char *name, tfc_error *err)
{
    if (!root || root->kind != TFC_NODE_MAP) {
        char found[64];
        tfc_node_describe(root, found, sizeof found);
        tfc_node_error(err, TFC_ERR_CONFIG, root, NULL,
                       "a model file is a mapping with input, layers, loss and metrics; found %s",
                       found);
        return NULL;
    }
    tfc_model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->loss_scale = 1.0f;
    m->doc_scratch = tfc_doc_load_string("{}", 2, "<scratch>", err);
    model_args a = {0};
    tfc_status status = tfc_schema_apply(model_fields, root, "", &a, err);
    if (!m->doc_scratch) status = TFC_ERR_NOMEM;
    char ipath[64] = "input";
    const tfc_node *more[TFC_MODEL_MAX_INPUTS - 1] = {0};
    m->ninputs = 1;
    /* A bad top-level key does not hide the errors of the input, metrics and layers: every
     * independent part is checked, so one run reports them all. */
    if ((status == TFC_OK || status == TFC_ERR_CONFIG) && a.layers && m->doc_scratch &&
        keras_input_layer(m, root, &a.input, more, &a.layers, ipath, err))
        status = TFC_ERR_CONFIG;
    if (more_inputs(m, more, err)) status = TFC_ERR_CONFIG;
    if (status == TFC_OK || (status == TFC_ERR_CONFIG && a.input && a.layers)) {
        snprintf(m->name, sizeof m->name, "%s", a.name ? a.name : name ? name : "model");
        /* one output: its loss and metrics read at once (their errors with the layers'); of
         * several, once the outputs are known (read_heads) */
        const int several = a.outputs && a.outputs->kind == TFC_NODE_SEQ && a.outputs->n > 1;
        m->heads[0].weight = 1;
        m->heads[0].node = a.loss;
        m->heads[0].metrics_node = a.metrics;
        snprintf(m->heads[0].metrics_at, sizeof m->heads[0].metrics_at, "metrics");
        if (!several && tfc_loss_options_read(a.loss, &m->heads[0].loss, &m->heads[0].loss_opt,
                                              err))
            status = TFC_ERR_CONFIG;
        if (!several && a.loss_weights)
            status = tfc_node_error(err, TFC_ERR_CONFIG, a.loss_weights, "loss_weights",
                                    "weighs the losses of a model of several outputs (`outputs:"
                                    " [main, aux]`); this one has one");
        input_args in;
        const tfc_node *input;
        int null_axis;
        if (null_time_axis(m, a.input, &input, &null_axis, err) ||
            tfc_schema_apply(input_fields, input, ipath, &in, err)) {
            status = TFC_ERR_CONFIG;
        } else if (null_axis != (in.max_length > 0)) {
            const tfc_node *at = tfc_node_get(a.input, null_axis ? "shape" : "max_length");
            status = tfc_node_error(err, TFC_ERR_CONFIG, at,
                                    null_axis ? "input.shape" : "input.max_length",
                                    null_axis ? "a null time axis needs input.max_length, the "
                                                "longest sequence a batch may hold (a solver "
                                                "takes it from its splits' truncate or pad map, "
                                                "padded_shapes or pad_to_bucket_boundary)"
                                              : "max_length goes with a null first axis in "
                                                "input.shape ([null] or [null, features])");
        } else if (in.shape.n > TFC_MAX_DIMS - 1) {
            status = tfc_node_error(err, TFC_ERR_CONFIG, a.input, "input.shape",
                                    "at most %d dimensions", TFC_MAX_DIMS - 1);
        } else {
            m->input_shape.ndim = in.shape.n;
            for (int i = 0; i < in.shape.n; i++) m->input_shape.dim[i] = in.shape.v[i];
            if (null_axis) m->input_shape.dim[0] = m->max_length = in.max_length;
            m->input_dtype = dtype_values[in.dtype];
            if (tfc_shape_numel(&m->input_shape) > (1ll << 30))
                status = tfc_node_error(err, TFC_ERR_CONFIG, a.input, "input.shape",
                                        "an example of more than 2^30 elements");
        }
        if (!several && parse_metrics(m, &m->heads[0], a.metrics, "metrics", err))
            status = TFC_ERR_CONFIG;
        if (build_layers(m, a.layers, a.outputs, err)) status = TFC_ERR_CONFIG;
        if (status == TFC_OK && m->noutputs > 1) status = read_heads(m, &a, err);
        /* A model file without `loss:` may be meant for inference only: its default loss is
         * checked where it is used (tfc_model_check_loss: training, evaluation, tfc-time). */
        for (int k = 0; status == TFC_OK && k < m->noutputs; k++) {
            m->heads[k].layer = m->outputs[k];
            set_classes(m, &m->heads[k]);
        }
        if (status == TFC_OK && m->max_length) status = tfc_model_check_varlen(m, err);
        for (int k = 0; status == TFC_OK && k < m->noutputs; k++) {
            if (a.loss) status = check_loss(m, &m->heads[k], NULL, err);
            else m->loss_unusable |= check_loss(m, &m->heads[k], NULL, NULL) != TFC_OK;
        }
        int64_t counts = 0;
        for (int k = 0; status == TFC_OK && !m->loss_unusable && k < m->noutputs; k++)
            status = check_metrics(m, &m->heads[k], &counts, err);
        m->ncounts = counts;
        tfc_error_sort(err);
    }
    if (status) {
        tfc_model_free(m);
        return NULL;
    }
    for (int k = 0; k < m->noutputs; k++) m->heads[k].fused = fused_loss(m, &m->heads[k]);
    count_params(m);
    return m;
}

static tfc_model *from_doc(tfc_doc *doc, const char *path, tfc_error *err)
{
    if (!doc) return NULL;
    char stem[128];
    const char *base = strrchr(path, '/');
    snprintf(stem, sizeof stem, "%s", base ? base + 1 : path);
    char *dot = strrchr(stem, '.');
    if (dot && dot != stem) *dot = 0;
    tfc_model *m = tfc_model_from_node(tfc_doc_root(doc), stem, err);
    if (!m) {
        tfc_doc_free(doc);
        return NULL;
    }
    m->doc = doc;
    return m;
}

tfc_model *tfc_model_load(const char *path, tfc_error *err)
{
    return from_doc(tfc_doc_load_file(path, err), path, err);
}

tfc_model *tfc_model_from_string(const char *yaml, size_t len, const char *file,
                                 tfc_error *err)
{
    return from_doc(tfc_doc_load_string(yaml, len, file, err), file, err);
}

void tfc_model_free(tfc_model *m)
{
    if (!m) return;
    tfc_model_unbind(m);
    for (int i = 0; i < m->nlayers; i++) {
        tfc_layer *l = &m->layers[i];
        if (l->ops && l->ops->free_state) l->ops->free_state(l);
        free(l->args);
    }
    free(m->layers);
    free(m->caps);
    for (int i = 0; i < m->nmetrics; i++) {
        if (m->metrics[i].counted) tfc_counted_free(m->metrics[i].counted);
        free(m->metrics[i].counted);
    }
    tfc_model_set_class_names(m, NULL, 0, NULL);
    for (int k = 0; k < TFC_MODEL_MAX_OUTPUTS; k++) tfc_loss_options_free(&m->heads[k].loss_opt);
    tfc_doc_free(m->doc_scratch);
    tfc_doc_free(m->doc);
    if (m->release) m->release(m->held);
    free(m);
}

void tfc_model_hold(tfc_model *m, void (*release)(void *), void *what)
{
    m->release = release;
    m->held = what;
}

const char *tfc_model_name(const tfc_model *m) { return m->name; }
int tfc_model_nlayers(const tfc_model *m) { return m->nlayers; }
tfc_layer *tfc_model_layer(tfc_model *m, int i) { return &m->layers[i]; }
const tfc_shape *tfc_model_input_shape(const tfc_model *m) { return &m->input_shape; }
tfc_dtype tfc_model_input_dtype(const tfc_model *m) { return m->input_dtype; }
int tfc_model_ninputs(const tfc_model *m) { return m->ninputs; }
const tfc_shape *tfc_model_input_shape_at(const tfc_model *m, int k)
{
    return k ? &m->more[k - 1].shape : &m->input_shape;
}
tfc_dtype tfc_model_input_dtype_at(const tfc_model *m, int k)
{
    return k ? m->more[k - 1].dtype : m->input_dtype;
}
const char *tfc_model_input_name(const tfc_model *m, int k)
{
    return k ? m->more[k - 1].name : m->input_name[0] ? m->input_name : "input";
}
const tfc_shape *tfc_model_output_shape(const tfc_model *m)
{
    return &m->layers[m->nlayers - 1].out_shape;
}
int tfc_model_noutputs(const tfc_model *m) { return m->noutputs; }
int tfc_model_output_layer(const tfc_model *m, int k) { return m->outputs[k]; }
const tfc_shape *tfc_model_output_shape_at(const tfc_model *m, int k)
{
    return &m->layers[m->outputs[k]].out_shape;
}
const char *tfc_model_output_name(const tfc_model *m, int k)
{
    return m->layers[m->outputs[k]].name;
}
tfc_loss_kind tfc_model_loss_kind(const tfc_model *m) { return m->heads[0].loss; }
int tfc_model_nmetrics(const tfc_model *m) { return m->nmetrics; }
const tfc_metric *tfc_model_metric(const tfc_model *m, int i) { return &m->metrics[i]; }
int64_t tfc_model_ncounts(const tfc_model *m) { return m->ncounts; }

double tfc_model_counted_value(const tfc_model *m, int i, const double *counts)
{
    const tfc_metric *mt = &m->metrics[i];
    return tfc_counted_value(mt->counted, counts + mt->at);
}
int tfc_model_classes(const tfc_model *m) { return m->heads[0].classes; }
int64_t tfc_model_label_rows(const tfc_model *m) { return m->heads[0].label_rows; }
tfc_loss_kind tfc_model_loss_kind_at(const tfc_model *m, int k) { return m->heads[k].loss; }
int tfc_model_classes_at(const tfc_model *m, int k) { return m->heads[k].classes; }
int64_t tfc_model_label_rows_at(const tfc_model *m, int k) { return m->heads[k].label_rows; }

int64_t tfc_model_param_count(const tfc_model *m) { return m->param_count; }
int64_t tfc_model_trainable_count(const tfc_model *m) { return m->trainable_count; }

int tfc_model_optim_vars(const tfc_model *m, tfc_optim_var *out,
                         char (*paths)[TFC_OPTIM_PATH])
{
    int n = 0;
    int64_t off = 0;
    for (int i = 0; i < m->nlayers; i++)
        for (int p = 0; p < m->layers[i].nparams; p++) {
            const tfc_param *pr = &m->layers[i].params[p];
            if (!pr->trainable || pr->shared) continue;
            if (out) {
                const tfc_shape *s = &pr->shape;
                const int folded = s->ndim >= 2;
                out[n] = (tfc_optim_var){off, pr->numel, folded ? s->dim[s->ndim - 2] : 0,
                                         folded ? s->dim[s->ndim - 1] : 0, s->ndim == 2};
            }
            if (paths)
                snprintf(paths[n], TFC_OPTIM_PATH, "%s/%s", m->layers[i].name, pr->name);
            off += pr->numel;
            n++;
        }
    return n;
}

void tfc_model_backward_plan(const tfc_model *m, int input_grad, int *runs)
{
    for (int i = 0; i < m->nlayers; i++) {
        const tfc_layer *l = &m->layers[i];
        runs[i] = 0;
        for (int p = 0; p < l->nparams; p++) runs[i] |= l->params[p].trainable;
        for (int j = 0; j < l->ninputs; j++) /* inputs come before a layer */
            runs[i] |= l->inputs[j] < 0 ? input_grad : runs[l->inputs[j]];
    }
}
int64_t tfc_model_weight_count(const tfc_model *m) { return m->weight_count; }
