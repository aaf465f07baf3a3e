/* The `loss:` of a model file: a loss name, or {type, label_smoothing, class_weight} with
 * Keras's meanings. label_smoothing replaces the target t by t (1 - s) + s / classes
 * (categorical; a sparse label is first made one-hot, as Keras users do with
 * CategoricalCrossentropy(label_smoothing)) or t (1 - s) + s / 2 (binary). class_weight
 * multiplies each training row's loss by the weight of its class (the label; the argmax
 * of a one-hot target), as Keras's fit(class_weight=...) turns into sample weights; the
 * batch mean still divides by the number of rows (Keras's sum_over_batch_size).
 * `class_weight: balanced` is scikit-learn's compute_class_weight("balanced"), the weights
 * Keras's guide computes by hand: n_records / (classes * count_c), from the training
 * source's label counts (tfc_model_balance_classes, by the trainer before binding). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/model_internal.h"

/* The names `loss:` takes: tfc_loss_names in kind order, then Keras's long names and
 * aliases (keras.losses.get's: mean_squared_error, kld, MSE, ...) and Keras's class names
 * (keras.losses.SparseCategoricalCrossentropy, ...), each with its kind in choice_kind. */
static const char *const loss_choices[] = {
    "sparse_categorical_crossentropy", "categorical_crossentropy", "binary_crossentropy",
    "mse", "mae", "huber", "log_cosh", "msle", "mape", "poisson", "kl_divergence", "hinge",
    "squared_hinge", "categorical_hinge", "cosine_similarity", "mean_squared_error",
    "mean_absolute_error",
    "mean_squared_logarithmic_error", "mean_absolute_percentage_error", "kld", "MSE", "MAE",
    "MSLE", "MAPE", "KLD", "SparseCategoricalCrossentropy", "CategoricalCrossentropy",
    "BinaryCrossentropy", "MeanSquaredError", "MeanAbsoluteError", "Huber", "LogCosh",
    "MeanSquaredLogarithmicError", "MeanAbsolutePercentageError", "Poisson", "KLDivergence",
    "Hinge", "SquaredHinge", "CategoricalHinge", "CosineSimilarity", NULL};
static const tfc_loss_kind choice_kind[] = {
    TFC_LOSS_SPARSE_CCE, TFC_LOSS_CCE, TFC_LOSS_BCE, TFC_LOSS_MSE, TFC_LOSS_MAE, TFC_LOSS_HUBER,
    TFC_LOSS_LOG_COSH, TFC_LOSS_MSLE, TFC_LOSS_MAPE, TFC_LOSS_POISSON, TFC_LOSS_KLD,
    TFC_LOSS_HINGE, TFC_LOSS_SQUARED_HINGE, TFC_LOSS_CATEGORICAL_HINGE,
    TFC_LOSS_COSINE_SIMILARITY, TFC_LOSS_MSE, TFC_LOSS_MAE, TFC_LOSS_MSLE,
    TFC_LOSS_MAPE, TFC_LOSS_KLD, TFC_LOSS_MSE, TFC_LOSS_MAE, TFC_LOSS_MSLE, TFC_LOSS_MAPE,
    TFC_LOSS_KLD, TFC_LOSS_SPARSE_CCE, TFC_LOSS_CCE, TFC_LOSS_BCE, TFC_LOSS_MSE, TFC_LOSS_MAE,
    TFC_LOSS_HUBER, TFC_LOSS_LOG_COSH, TFC_LOSS_MSLE, TFC_LOSS_MAPE, TFC_LOSS_POISSON,
    TFC_LOSS_KLD, TFC_LOSS_HINGE, TFC_LOSS_SQUARED_HINGE, TFC_LOSS_CATEGORICAL_HINGE,
    TFC_LOSS_COSINE_SIMILARITY};
_Static_assert(sizeof choice_kind / sizeof *choice_kind ==
                   sizeof loss_choices / sizeof *loss_choices - 1,
               "a kind for every loss name");

static tfc_loss_kind loss_kind(int choice) { return choice_kind[choice]; }

int tfc_loss_is_regression(tfc_loss_kind k) { return k >= TFC_LOSS_MSE; }

typedef struct loss_args {
    int type;
    double label_smoothing, delta;
    const tfc_node *class_weight, *from_logits;
    const char *name;
} loss_args;

static const tfc_field loss_fields[] = {
    {"type", TFC_F_ENUM, offsetof(loss_args, type), "sparse_categorical_crossentropy",
     TFC_UNBOUNDED, loss_choices, "the loss (mean_squared_error is mse)"},
    {"from_logits", TFC_F_NODE, offsetof(loss_args, from_logits), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL,
     "a cross-entropy's: checked against the last layer (true: it has no softmax or "
     "sigmoid); tfc infers it from that layer when absent"},
    TFC_FIXED_FIELD("reduction", "sum_over_batch_size", "tfc's losses are the mean over the "
                    "batch (and the unmasked steps)"),
    TFC_FIXED_FIELD("axis", "-1", "tfc's losses run over the last axis"),
    TFC_FIXED_FIELD("ignore_class", TFC_NO_DEFAULT, "mask the steps to ignore instead (an "
                    "Embedding's mask_zero, Masking)"),
    TFC_FIXED_FIELD("dtype", TFC_NO_DEFAULT, "the solver's precision key sets the model's "
                    "(the loss is float32)"),
    {"name", TFC_F_STRING, offsetof(loss_args, name), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "Keras's name of the loss object, which its config records; the logs call the total "
     "`loss` in Keras's fit and in tfc alike, so it changes nothing"},
    {"label_smoothing", TFC_F_FLOAT, offsetof(loss_args, label_smoothing), "0.0", 0, 1, NULL,
     "targets become t (1 - s) + s / classes (binary: + s / 2); cross-entropies only"},
    {"class_weight", TFC_F_NODE, offsetof(loss_args, class_weight), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL,
     "one weight per class multiplying its rows' training loss, or balanced (n / (classes "
     "count_c) from the training source's labels)"},
    {"delta", TFC_F_FLOAT, offsetof(loss_args, delta), "1.0", TFC_UNBOUNDED, NULL,
     "huber's: where the loss turns from quadratic to linear"},
    {NULL}};

const tfc_field *tfc_loss_fields(void) { return loss_fields; }

tfc_status tfc_loss_options_read(const tfc_node *node, tfc_loss_kind *kind,
                                 tfc_loss_options *o, tfc_error *err)
{
    memset(o, 0, sizeof *o);
    o->from_logits = -1;
    o->delta = 1.0;
    *kind = TFC_LOSS_SPARSE_CCE;
    if (!node || tfc_node_is_null(node)) return TFC_OK;
    int type = 0;
    if (node->kind == TFC_NODE_SCALAR) {
        if (tfc_node_enum(node, "loss", loss_choices, &type, err)) return TFC_ERR_CONFIG;
        *kind = loss_kind(type);
        return TFC_OK;
    }
    if (node->kind != TFC_NODE_MAP)
        return tfc_node_error(err, TFC_ERR_CONFIG, node, "loss",
                              "expected a loss name or a mapping such as {type: "
                              "sparse_categorical_crossentropy, label_smoothing: 0.1}");
    loss_args a;
    const char *apath = "loss"; /* the arguments' */
    if (tfc_node_get(node, "class_name")) { /* Keras's serialized form */
        tfc_keras_form f; /* keras.losses.serialize's */
        if (tfc_schema_apply(tfc_keras_form_fields, node, "loss", &f, err)) return TFC_ERR_CONFIG;
        int choice;
        if (tfc_node_enum(f.class_name, "loss.class_name", loss_choices, &choice, err))
            return TFC_ERR_CONFIG;
        node = f.config; /* its arguments, but the type */
        apath = "loss.config";
        if (tfc_schema_apply(loss_fields + 1, node, apath, &a, err)) return TFC_ERR_CONFIG;
        a.type = choice;
    } else if (tfc_schema_apply(loss_fields, node, "loss", &a, err)) {
        return TFC_ERR_CONFIG;
    }
    *kind = loss_kind(a.type);
    o->from_logits_node = a.from_logits;
    if (a.from_logits && !tfc_node_is_null(a.from_logits)) {
        char fpath[64];
        snprintf(fpath, sizeof fpath, "%s.from_logits", apath);
        if (tfc_node_bool(a.from_logits, fpath, &o->from_logits, err)) return TFC_ERR_CONFIG;
        if (tfc_loss_is_regression(*kind))
            return tfc_node_error(err, TFC_ERR_CONFIG, a.from_logits, fpath,
                                  "is a cross-entropy's argument; %s takes none",
                                  tfc_loss_names[*kind]);
    }
    o->label_smoothing = a.label_smoothing;
    o->node = node;
    if (o->label_smoothing > 0 && tfc_loss_is_regression(*kind))
        return tfc_node_error(err, TFC_ERR_CONFIG, tfc_node_get(node, "label_smoothing"),
                              "loss.label_smoothing", "smooths the targets of a cross-entropy; "
                              "%s takes none", tfc_loss_names[*kind]);
    const tfc_node *delta = tfc_node_get(node, "delta");
    if (delta && !tfc_node_is_null(delta) && *kind != TFC_LOSS_HUBER)
        return tfc_node_error(err, TFC_ERR_CONFIG, delta, "loss.delta",
                              "is huber's argument; %s takes none", tfc_loss_names[*kind]);
    if (!(a.delta > 0) || !isfinite(a.delta))
        return tfc_node_error(err, TFC_ERR_CONFIG, delta, "loss.delta",
                              "expected a finite threshold > 0, found %g", a.delta);
    o->delta = a.delta;
    const tfc_node *cw = a.class_weight;
    if (!cw || tfc_node_is_null(cw)) return TFC_OK;
    if (*kind != TFC_LOSS_SPARSE_CCE && *kind != TFC_LOSS_CCE)
        return tfc_node_error(err, TFC_ERR_CONFIG, cw, "loss.class_weight",
                              "weighs the rows of a categorical cross-entropy by their class; "
                              "%s has no class per row", tfc_loss_names[*kind]);
    if (cw->kind == TFC_NODE_SCALAR && !strcmp(cw->str, "balanced")) {
        o->balanced = 1;
        return TFC_OK;
    }
    if (cw->kind != TFC_NODE_SEQ || cw->n == 0)
        return tfc_node_error(err, TFC_ERR_CONFIG, cw, "loss.class_weight",
                              "expected a list of one weight per class, such as [1, 2.5, 1], "
                              "or balanced");
    o->class_weight = malloc((size_t)cw->n * sizeof *o->class_weight);
    if (!o->class_weight) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    o->nclass_weight = cw->n;
    for (int i = 0; i < cw->n; i++) {
        char path[64];
        snprintf(path, sizeof path, "loss.class_weight[%d]", i);
        double v;
        if (tfc_node_double(cw->vals[i], path, &v, err)) return TFC_ERR_CONFIG;
        if (!(v >= 0) || !isfinite(v))
            return tfc_node_error(err, TFC_ERR_CONFIG, cw->vals[i], path,
                                  "expected a finite weight >= 0, found %g", v);
        o->class_weight[i] = v;
    }
    return TFC_OK;
}

tfc_status tfc_loss_options_check(const tfc_model *m, const tfc_head *h, tfc_error *err)
{
    const tfc_loss_options *o = &h->loss_opt;
    /* from_logits, where given, must say what the output layer gives (Keras would otherwise
     * take probabilities for logits, or the reverse, and train on a wrong loss) */
    const tfc_layer *last = &m->layers[h->layer];
    const char *is = m->noutputs > 1 ? "the output layer" : "the last layer";
    const int probs = last->act == TFC_ACT_SOFTMAX || last->act == TFC_ACT_SIGMOID;
    if (o->from_logits == 1 && probs)
        return tfc_node_error(err, TFC_ERR_CONFIG, o->from_logits_node, "loss.from_logits",
                              "true, but %s '%s' ends in %s: its outputs are "
                              "probabilities. Drop the activation (tfc then computes the loss "
                              "from the logits) or write from_logits: false",
                              is, last->name, tfc_act_names[last->act]);
    if (o->from_logits == 0 && !probs)
        return tfc_node_error(err, TFC_ERR_CONFIG, o->from_logits_node, "loss.from_logits",
                              "false, but %s '%s' ends in no softmax or sigmoid: "
                              "its outputs are logits. Give it activation: %s, or write "
                              "from_logits: true", is, last->name,
                              h->loss == TFC_LOSS_BCE ? "sigmoid" : "softmax");
    if (o->class_weight && o->nclass_weight != h->classes)
        return tfc_node_error(err, TFC_ERR_CONFIG, tfc_node_get(o->node, "class_weight"),
                              "loss.class_weight",
                              "has %d weights for the %d classes of %s '%s'",
                              o->nclass_weight, h->classes, is, last->name);
    return TFC_OK;
}

int tfc_model_class_weight_balanced(const tfc_model *m)
{
    return m->heads[0].loss_opt.balanced;
}

tfc_status tfc_model_balance_classes(tfc_model *m, const int64_t *counts, tfc_error *err)
{
    tfc_loss_options *o = &m->heads[0].loss_opt;
    int C = m->heads[0].classes;
    int64_t n = 0;
    for (int c = 0; c < C; c++) n += counts[c];
    if (n == 0)
        return tfc_node_error(err, TFC_ERR_CONFIG, tfc_node_get(o->node, "class_weight"),
                              "loss.class_weight",
                              "balanced: no training record has a label in [0, %d)", C);
    double *w = malloc((size_t)C * sizeof *w);
    if (!w) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    /* a class without records weighs no training row: 1 keeps it neutral */
    for (int c = 0; c < C; c++) w[c] = counts[c] ? (double)n / ((double)C * (double)counts[c]) : 1.0;
    free(o->class_weight);
    o->class_weight = w;
    o->nclass_weight = C;
    return TFC_OK;
}

const double *tfc_model_class_weight(const tfc_model *m, int *n)
{
    const tfc_loss_options *o = &m->heads[0].loss_opt;
    *n = o->class_weight ? o->nclass_weight : 0;
    return o->class_weight;
}

void tfc_loss_options_free(tfc_loss_options *o)
{
    free(o->class_weight);
    o->class_weight = NULL;
}

/* The class of a row: its sparse label, or the first largest entry of a dense target. */
static int row_class(tfc_loss_kind kind, const void *labels, int64_t r, int classes)
{
    if (kind == TFC_LOSS_SPARSE_CCE) return ((const int32_t *)labels)[r];
    const float *t = (const float *)labels + r * classes;
    int best = 0;
    for (int c = 1; c < classes; c++)
        if (t[c] > t[best]) best = c;
    return best;
}

void tfc_loss_targets(const tfc_head *h, const void *labels, int64_t rows, const float *mask,
                      float *target, float *weight)
{
    const tfc_loss_options *o = &h->loss_opt;
    int C = h->classes;
    double s = o->label_smoothing;
    if (target) {
        /* Binary targets move toward 1/2, categorical ones toward 1/classes (Keras). */
        double floor_ = h->loss == TFC_LOSS_BCE ? 0.5 * s : s / C;
        for (int64_t r = 0; r < rows; r++)
            for (int c = 0; c < C; c++) {
                double t = h->loss == TFC_LOSS_SPARSE_CCE
                               ? (((const int32_t *)labels)[r] == c ? 1.0 : 0.0)
                               : ((const float *)labels)[r * C + c];
                target[r * C + c] = (float)(t * (1.0 - s) + floor_);
            }
    }
    if (weight)
        for (int64_t r = 0; r < rows; r++) {
            int c = row_class(h->loss, labels, r, C);
            double w = c >= 0 && c < C ? o->class_weight[c] : 0.0;
            weight[r] = (float)(mask ? mask[r] * w : w);
        }
}
