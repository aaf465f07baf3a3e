/* Counted metrics (metric_counts.h): Keras 3's Precision, Recall, TruePositives ...
 * FalseNegatives, AUC, the four *At* metrics, F1Score/FBetaScore, the IoU family, R2Score,
 * BinaryAccuracy and the two correlations, read
 * from a model file's `metrics:`, checked against the model's output, counted per batch and
 * evaluated from the summed counts. */
#include "graph/metric_counts.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/schema.h"

#define KERAS_EPSILON 1e-7       /* keras.backend.epsilon() */
#define NEG_INF_FILTER -1e10f    /* metrics_utils.NEG_INF: what top_k leaves the others */

enum { CURVE_ROC, CURVE_PR, CURVE_PRGAIN };
enum { SUM_INTERPOLATION, SUM_MINORING, SUM_MAJORING };
enum { AVG_MICRO, AVG_MACRO, AVG_WEIGHTED };

/* The classes: Keras's name, its snake_case one (what keras.metrics.get also takes), the
 * default name an instance reports under, and the argument the *At* metrics require. */
static const struct {
    const char *cls, *snake, *report;
    tfc_counted_kind kind;
    const char *required;  /* the argument without a default, or NULL */
} metric_classes[] = {
    {"Precision", "precision", "precision", TFC_CM_PRECISION, NULL},
    {"Recall", "recall", "recall", TFC_CM_RECALL, NULL},
    {"TruePositives", "true_positives", "true_positives", TFC_CM_TRUE_POSITIVES, NULL},
    {"FalsePositives", "false_positives", "false_positives", TFC_CM_FALSE_POSITIVES, NULL},
    {"TrueNegatives", "true_negatives", "true_negatives", TFC_CM_TRUE_NEGATIVES, NULL},
    {"FalseNegatives", "false_negatives", "false_negatives", TFC_CM_FALSE_NEGATIVES, NULL},
    {"AUC", "auc", "auc", TFC_CM_AUC, NULL},
    {"PrecisionAtRecall", "precision_at_recall", "precision_at_recall",
     TFC_CM_PRECISION_AT_RECALL, "recall"},
    {"RecallAtPrecision", "recall_at_precision", "recall_at_precision",
     TFC_CM_RECALL_AT_PRECISION, "precision"},
    {"SensitivityAtSpecificity", "sensitivity_at_specificity", "sensitivity_at_specificity",
     TFC_CM_SENSITIVITY_AT_SPECIFICITY, "specificity"},
    {"SpecificityAtSensitivity", "specificity_at_sensitivity", "specificity_at_sensitivity",
     TFC_CM_SPECIFICITY_AT_SENSITIVITY, "sensitivity"},
    {"F1Score", "f1_score", "f1_score", TFC_CM_FBETA, "average"},
    {"FBetaScore", "f_beta_score", "fbeta_score", TFC_CM_FBETA, "average"},
    {"IoU", "io_u", "io_u", TFC_CM_IOU, "num_classes"},
    {"MeanIoU", "mean_io_u", "mean_io_u", TFC_CM_IOU, "num_classes"},
    {"OneHotIoU", "one_hot_io_u", "one_hot_io_u", TFC_CM_IOU, "num_classes"},
    {"OneHotMeanIoU", "one_hot_mean_io_u", "one_hot_mean_io_u", TFC_CM_IOU, "num_classes"},
    {"BinaryIoU", "binary_io_u", "binary_io_u", TFC_CM_IOU, NULL},
    {"R2Score", "r2_score", "r2_score", TFC_CM_R2, NULL},
    {"BinaryAccuracy", "binary_accuracy", "binary_accuracy", TFC_CM_BINARY_ACCURACY, NULL},
    {"PearsonCorrelation", "pearson_correlation", "pearson_correlation", TFC_CM_CORRELATION,
     NULL},
    {"ConcordanceCorrelation", "concordance_correlation", "concordance_correlation",
     TFC_CM_CORRELATION, NULL},
};
#define NCLASSES (int)(sizeof metric_classes / sizeof *metric_classes)

static int find_class(const char *name)
{
    for (int i = 0; i < NCLASSES; i++)
        if (!strcmp(name, metric_classes[i].cls) || !strcmp(name, metric_classes[i].snake))
            return i;
    return -1;
}

const char *tfc_counted_default_name(const char *name)
{
    int i = find_class(name);
    return i < 0 ? NULL : metric_classes[i].report;
}

/* ---- arguments ------------------------------------------------------------------------------ */

typedef struct margs {
    const tfc_node *thresholds, *top_k, *class_id, *dtype, *num_labels, *label_weights;
    const tfc_node *average, *threshold, *target_ids, *ignore_class, *aggregation;
    const char *name;
    int num_thresholds, curve, summation, multi_label, from_logits;
    int num_classes, sparse_y_true, sparse_y_pred, num_regressors;
    double value, beta;
} margs;

static const char *const curve_choices[] = {"ROC", "PR", "PRGAIN", "roc", "pr", "prgain", NULL};
static const char *const summation_choices[] = {"interpolation", "minoring", "majoring",
                                                "Interpolation", "Minoring", "Majoring", NULL};

#define F_NAME {"name", TFC_F_STRING, offsetof(margs, name), TFC_NO_DEFAULT, TFC_UNBOUNDED, \
                NULL, "the name the logs report it under"}
#define F_DTYPE {"dtype", TFC_F_NODE, offsetof(margs, dtype), TFC_NO_DEFAULT, TFC_UNBOUNDED, \
                 NULL, "the counts' type; tfc sums them in float64"}
#define F_THRESHOLDS(help) {"thresholds", TFC_F_NODE, offsetof(margs, thresholds), \
                            TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL, help}
#define F_CLASS_ID {"class_id", TFC_F_NODE, offsetof(margs, class_id), TFC_NO_DEFAULT, \
                    TFC_UNBOUNDED, NULL, "the one output (class) counted"}
#define F_NUM_THRESHOLDS(lo) {"num_thresholds", TFC_F_INT, offsetof(margs, num_thresholds), \
                              "200", lo, 1 << 20, NULL, "thresholds evenly spaced over [0, 1]"}
#define F_VALUE(key) {key, TFC_F_FLOAT, offsetof(margs, value), NULL, 0, 1, NULL, \
                      "the constraint's value, in [0, 1]"}
#define F_AVERAGE {"average", TFC_F_NODE, offsetof(margs, average), TFC_NO_DEFAULT, \
                   TFC_UNBOUNDED, NULL, "micro, macro or weighted (null: one value per class)"}
#define F_THRESHOLD {"threshold", TFC_F_NODE, offsetof(margs, threshold), TFC_NO_DEFAULT, \
                     TFC_UNBOUNDED, NULL, "outputs above it are positive (null: each row's " \
                     "largest)"}
#define F_NUM_CLASSES {"num_classes", TFC_F_INT, offsetof(margs, num_classes), NULL, 1, \
                       1 << 16, NULL, "the classes of the confusion matrix"}
#define F_TARGETS(def) {"target_class_ids", TFC_F_NODE, offsetof(margs, target_ids), def, \
                        TFC_UNBOUNDED, NULL, "the classes whose IoU is averaged (BinaryIoU: " \
                        "[0, 1])"}
#define F_IGNORE {"ignore_class", TFC_F_NODE, offsetof(margs, ignore_class), TFC_NO_DEFAULT, \
                  TFC_UNBOUNDED, NULL, "a label value that counts nowhere"}
#define F_SPARSE_TRUE {"sparse_y_true", TFC_F_BOOL, offsetof(margs, sparse_y_true), "true", \
                       TFC_UNBOUNDED, NULL, "labels are class ids (false: one-hot)"}
#define F_SPARSE_PRED(def) {"sparse_y_pred", TFC_F_BOOL, offsetof(margs, sparse_y_pred), def, \
                            TFC_UNBOUNDED, NULL, "outputs are class ids (false: scores, " \
                            "argmaxed)"}
#define F_AXIS TFC_FIXED_FIELD("axis", "-1", "the classes are the last axis")

static const tfc_field precision_fields[] = {
    F_THRESHOLDS("a prediction above it is positive (0.5; a list of one)"),
    {"top_k", TFC_F_NODE, offsetof(margs, top_k), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "only each row's k largest outputs can be positive"},
    F_CLASS_ID, F_NAME, F_DTYPE, {NULL}};
static const tfc_field count_fields[] = {
    F_THRESHOLDS("a prediction above it is positive (0.5; a list of one)"), F_NAME, F_DTYPE,
    {NULL}};
static const tfc_field auc_fields[] = {
    F_NUM_THRESHOLDS(2),
    {"curve", TFC_F_ENUM, offsetof(margs, curve), "ROC", TFC_UNBOUNDED, curve_choices,
     "ROC, PR (precision-recall) or PRGAIN"},
    {"summation_method", TFC_F_ENUM, offsetof(margs, summation), "interpolation",
     TFC_UNBOUNDED, summation_choices, "interpolation, minoring or majoring"},
    F_NAME, F_DTYPE,
    F_THRESHOLDS("the thresholds in (0, 1) instead of num_thresholds' (0 and 1 are added)"),
    {"multi_label", TFC_F_BOOL, offsetof(margs, multi_label), "false", TFC_UNBOUNDED, NULL,
     "one curve per output, averaged (false: every output one more point)"},
    {"num_labels", TFC_F_NODE, offsetof(margs, num_labels), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "multi_label's outputs (the model's, when given)"},
    {"label_weights", TFC_F_NODE, offsetof(margs, label_weights), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "a weight per output"},
    {"from_logits", TFC_F_BOOL, offsetof(margs, from_logits), "false", TFC_UNBOUNDED, NULL,
     "the outputs are logits: a sigmoid makes them probabilities first"},
    {NULL}};
#define AT_FIELDS(key) {F_VALUE(key), F_NUM_THRESHOLDS(1), F_CLASS_ID, F_NAME, F_DTYPE, {NULL}}
static const tfc_field at_recall_fields[] = AT_FIELDS("recall");
static const tfc_field at_precision_fields[] = AT_FIELDS("precision");
static const tfc_field at_specificity_fields[] = AT_FIELDS("specificity");
static const tfc_field at_sensitivity_fields[] = AT_FIELDS("sensitivity");
static const tfc_field f1_fields[] = {F_AVERAGE, F_THRESHOLD, F_NAME, F_DTYPE, {NULL}};
static const tfc_field fbeta_fields[] = {
    F_AVERAGE,
    {"beta", TFC_F_FLOAT, offsetof(margs, beta), "1.0", TFC_UNBOUNDED, NULL,
     "recall counts beta times as much as precision (> 0)"},
    F_THRESHOLD, F_NAME, F_DTYPE, {NULL}};
static const tfc_field iou_fields[] = {
    F_NUM_CLASSES, F_TARGETS(NULL), F_NAME, F_DTYPE, F_IGNORE, F_SPARSE_TRUE,
    F_SPARSE_PRED("true"), F_AXIS, {NULL}};
static const tfc_field mean_iou_fields[] = {
    F_NUM_CLASSES, F_NAME, F_DTYPE, F_IGNORE, F_SPARSE_TRUE, F_SPARSE_PRED("true"), F_AXIS,
    {NULL}};
static const tfc_field one_hot_iou_fields[] = {
    F_NUM_CLASSES, F_TARGETS(NULL), F_NAME, F_DTYPE, F_IGNORE, F_SPARSE_PRED("false"), F_AXIS,
    {NULL}};
static const tfc_field one_hot_mean_iou_fields[] = {
    F_NUM_CLASSES, F_NAME, F_DTYPE, F_IGNORE, F_SPARSE_PRED("false"), F_AXIS, {NULL}};
static const tfc_field binary_iou_fields[] = {
    F_TARGETS(TFC_NO_DEFAULT),
    {"threshold", TFC_F_NODE, offsetof(margs, threshold), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "outputs at or above it are class 1 (0.5)"},
    F_NAME, F_DTYPE, {NULL}};

static const tfc_field r2_fields[] = {
    {"class_aggregation", TFC_F_NODE, offsetof(margs, aggregation), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "uniform_average (the default) or variance_weighted_average"},
    {"num_regressors", TFC_F_INT, offsetof(margs, num_regressors), "0", 0, 1 << 30, NULL,
     "independent variables: the adjusted R2 where above 0"},
    F_NAME, F_DTYPE, {NULL}};

static const tfc_field binary_accuracy_fields[] = {
    F_NAME, F_DTYPE,
    {"threshold", TFC_F_NODE, offsetof(margs, threshold), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "outputs above it are 1 (0.5; 0 where the output holds logits)"},
    {NULL}};

static const tfc_field correlation_fields[] = {
    F_NAME, F_DTYPE, TFC_FIXED_FIELD("axis", "-1", "each row's outputs are correlated"), {NULL}};

static const tfc_field *fields_of(const char *cls)
{
    static const struct { const char *cls; const tfc_field *f; } t[] = {
        {"Precision", precision_fields}, {"Recall", precision_fields},
        {"AUC", auc_fields}, {"PrecisionAtRecall", at_recall_fields},
        {"RecallAtPrecision", at_precision_fields},
        {"SensitivityAtSpecificity", at_specificity_fields},
        {"SpecificityAtSensitivity", at_sensitivity_fields},
        {"F1Score", f1_fields}, {"FBetaScore", fbeta_fields}, {"IoU", iou_fields},
        {"MeanIoU", mean_iou_fields}, {"OneHotIoU", one_hot_iou_fields},
        {"OneHotMeanIoU", one_hot_mean_iou_fields}, {"BinaryIoU", binary_iou_fields},
        {"R2Score", r2_fields}, {"BinaryAccuracy", binary_accuracy_fields},
        {"PearsonCorrelation", correlation_fields},
        {"ConcordanceCorrelation", correlation_fields}};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        if (!strcmp(cls, t[i].cls)) return t[i].f;
    return count_fields; /* TruePositives ... FalseNegatives */
}

int tfc_counted_default_arg(const char *cls, const char *key, const tfc_node *v)
{
    int k = find_class(cls);
    if (k < 0 || !v) return 0;
    if (!strcmp(key, "name"))
        return v->kind == TFC_NODE_SCALAR && !strcmp(v->str, metric_classes[k].report);
    if (!strcmp(key, "dtype"))
        return tfc_node_is_null(v) || (v->kind == TFC_NODE_SCALAR &&
                                       (!strcmp(v->str, "float32") || !strcmp(v->str, "int32")));
    for (const tfc_field *f = fields_of(metric_classes[k].cls); f->name; f++) {
        if (strcmp(f->name, key)) continue;
        if (!f->def || !strcmp(f->def, TFC_NO_DEFAULT)) return tfc_node_is_null(v);
        if (v->kind != TFC_NODE_SCALAR) return 0;
        char *e1, *e2;
        double a = strtod(v->str, &e1), b = strtod(f->def, &e2);
        if (*v->str && !*e1 && *f->def && !*e2) return a == b;
        return !strcmp(v->str, f->def);
    }
    return 0;
}

/* A number or a list of numbers (`scalar_ok`: a bare number is a list of one) into a new
 * array of *n floats. */
static tfc_status read_floats(const tfc_node *node, const char *path, int scalar_ok, float **out,
                              int *n, tfc_error *err)
{
    int count = node->kind == TFC_NODE_SEQ ? node->n : 1;
    if (node->kind == TFC_NODE_MAP || (node->kind == TFC_NODE_SCALAR && !scalar_ok) ||
        count == 0)
        return tfc_node_error(err, TFC_ERR_CONFIG, node, path, "expected %s of numbers",
                              scalar_ok ? "a number or a list" : "a list");
    float *v = malloc((size_t)count * sizeof *v);
    if (!v) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    for (int i = 0; i < count; i++) {
        double d;
        const tfc_node *x = node->kind == TFC_NODE_SEQ ? node->vals[i] : node;
        if (tfc_node_double(x, path, &d, err)) {
            free(v);
            return TFC_ERR_CONFIG;
        }
        if (!(fabs(d) <= FLT_MAX)) {
            free(v);
            return tfc_node_error(err, TFC_ERR_CONFIG, x, path, "%s is not a float32 number",
                                  x->str);
        }
        v[i] = (float)d;
    }
    *out = v;
    *n = count;
    return TFC_OK;
}

/* An optional integer (null: *out stays) in [lo, hi]. */
static tfc_status opt_int(const tfc_node *node, const char *path, long long lo, long long hi,
                          int *out, tfc_error *err)
{
    if (!node || tfc_node_is_null(node)) return TFC_OK;
    long long v;
    if (tfc_node_int(node, path, lo, hi, &v, err)) return TFC_ERR_CONFIG;
    *out = (int)v;
    return TFC_OK;
}

/* Precision's and the counts' `thresholds`: one value (Keras's list gives one value per
 * threshold, and a tfc metric is one number). */
static tfc_status one_threshold(tfc_counted *c, const margs *a, const char *path, float def,
                                tfc_error *err)
{
    char p[96];
    snprintf(p, sizeof p, "%s.thresholds", path);
    c->nthresholds = 1;
    c->thresholds_given = a->thresholds && !tfc_node_is_null(a->thresholds);
    if (!c->thresholds_given) {
        c->thresholds = malloc(sizeof *c->thresholds);
        if (!c->thresholds) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        c->thresholds[0] = def;
        return TFC_OK;
    }
    if (read_floats(a->thresholds, p, 1, &c->thresholds, &c->nthresholds, err))
        return TFC_ERR_CONFIG;
    if (c->nthresholds != 1)
        return tfc_node_error(err, TFC_ERR_CONFIG, a->thresholds, p,
                              "%d thresholds give %d values, and a metric in tfc's logs is "
                              "one number: give one threshold (a metric per threshold)",
                              c->nthresholds, c->nthresholds);
    return TFC_OK;
}

/* Keras's is_evenly_distributed_thresholds: 3 or more, i / (n - 1) within 1e-7. */
static int evenly_spaced(const double *t, int n)
{
    if (n < 3) return 0;
    for (int i = 0; i < n; i++)
        if (fabs(t[i] - (double)(float)((float)i / (float)(n - 1))) >
            KERAS_EPSILON + 1e-5 * fabs((double)i / (n - 1)))
            return 0;
    return 1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* AUC's thresholds: [-1e-7, then num_thresholds' inner ones or the given ones sorted,
 * 1 + 1e-7]. */
static tfc_status auc_thresholds(tfc_counted *c, const margs *a, const char *path,
                                 tfc_error *err)
{
    char p[96];
    snprintf(p, sizeof p, "%s.thresholds", path);
    int inner = a->num_thresholds - 2;
    float *given = NULL;
    if (a->thresholds && !tfc_node_is_null(a->thresholds)) {
        if (read_floats(a->thresholds, p, 0, &given, &inner, err)) return TFC_ERR_CONFIG;
    }
    double *t = malloc((size_t)(inner + 2) * sizeof *t);
    c->thresholds = malloc((size_t)(inner + 2) * sizeof *c->thresholds);
    if (!t || !c->thresholds) {
        free(t);
        free(given);
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    t[0] = 0.0;
    for (int i = 0; i < inner; i++)
        t[1 + i] = given ? (double)given[i] : (double)(i + 1) / (double)(a->num_thresholds - 1);
    t[inner + 1] = 1.0;
    if (given) qsort(t + 1, (size_t)inner, sizeof *t, cmp_double);
    c->nthresholds = inner + 2;
    c->even = given ? evenly_spaced(t, inner + 2) : 1;
    c->epsilon = 1;
    for (int i = 0; i < c->nthresholds; i++) c->thresholds[i] = (float)t[i];
    c->thresholds[0] = (float)(0.0 - KERAS_EPSILON);
    c->thresholds[inner + 1] = (float)(1.0 + KERAS_EPSILON);
    free(t);
    free(given);
    return TFC_OK;
}

/* The *At* metrics' thresholds: [0.5] for one, else [0, i / (n - 1) ..., 1], evenly. */
static tfc_status at_thresholds(tfc_counted *c, int n, tfc_error *err)
{
    c->thresholds = malloc((size_t)n * sizeof *c->thresholds);
    if (!c->thresholds) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    c->nthresholds = n;
    if (n == 1) {
        c->thresholds[0] = 0.5f;
        return TFC_OK;
    }
    for (int i = 0; i < n; i++) c->thresholds[i] = (float)((double)i / (double)(n - 1));
    c->even = 1;
    return TFC_OK;
}

static tfc_status parse_args(tfc_counted *c, const margs *a, const tfc_node *at, const char *path,
                             tfc_error *err)
{
    char p[96];
    if (a->dtype && !tfc_node_is_null(a->dtype)) {
        static const char *const ok[] = {"float32", "float64", "int", "int32", "int64", NULL};
        int k;
        snprintf(p, sizeof p, "%s.dtype", path);
        if (tfc_node_enum(a->dtype, p, ok, &k, err)) return TFC_ERR_CONFIG;
    }
    switch (c->kind) {
    case TFC_CM_CORRELATION:
        c->concordance = !strcmp(c->cls, "ConcordanceCorrelation");
        return TFC_OK;
    case TFC_CM_PRECISION:
    case TFC_CM_RECALL:
        snprintf(p, sizeof p, "%s.top_k", path);
        if (opt_int(a->top_k, p, 1, 1 << 20, &c->top_k, err)) return TFC_ERR_CONFIG;
        snprintf(p, sizeof p, "%s.class_id", path);
        if (opt_int(a->class_id, p, 0, 1 << 20, &c->class_id, err)) return TFC_ERR_CONFIG;
        return one_threshold(c, a, path, c->top_k ? NEG_INF_FILTER : 0.5f, err);
    case TFC_CM_TRUE_POSITIVES:
    case TFC_CM_FALSE_POSITIVES:
    case TFC_CM_TRUE_NEGATIVES:
    case TFC_CM_FALSE_NEGATIVES:
        return one_threshold(c, a, path, 0.5f, err);
    case TFC_CM_AUC:
        c->curve = a->curve % 3;
        c->summation = a->summation % 3;
        c->multi_label = a->multi_label;
        c->from_logits = a->from_logits;
        if (a->num_labels && !tfc_node_is_null(a->num_labels)) {
            int n = 0;
            snprintf(p, sizeof p, "%s.num_labels", path);
            if (opt_int(a->num_labels, p, 1, 1 << 20, &n, err)) return TFC_ERR_CONFIG;
            if (!c->multi_label)
                return tfc_node_error(err, TFC_ERR_CONFIG, a->num_labels, p,
                                      "num_labels is for multi_label: true only (Keras's "
                                      "error too)");
            c->num_classes = n; /* checked against the outputs */
        }
        if (a->label_weights && !tfc_node_is_null(a->label_weights)) {
            snprintf(p, sizeof p, "%s.label_weights", path);
            if (read_floats(a->label_weights, p, 0, &c->label_weights, &c->nlabel_weights, err))
                return TFC_ERR_CONFIG;
            for (int i = 0; i < c->nlabel_weights; i++)
                if (!(c->label_weights[i] >= 0))
                    return tfc_node_error(err, TFC_ERR_CONFIG, a->label_weights, p,
                                          "label weights are >= 0; item %d is %g", i,
                                          (double)c->label_weights[i]);
        }
        return auc_thresholds(c, a, path, err);
    case TFC_CM_PRECISION_AT_RECALL:
    case TFC_CM_RECALL_AT_PRECISION:
    case TFC_CM_SENSITIVITY_AT_SPECIFICITY:
    case TFC_CM_SPECIFICITY_AT_SENSITIVITY:
        c->value = a->value;
        snprintf(p, sizeof p, "%s.class_id", path);
        if (opt_int(a->class_id, p, 0, 1 << 20, &c->class_id, err)) return TFC_ERR_CONFIG;
        return at_thresholds(c, a->num_thresholds, err);
    case TFC_CM_FBETA: {
        static const char *const averages[] = {"micro", "macro", "weighted", NULL};
        snprintf(p, sizeof p, "%s.average", path);
        if (!a->average || tfc_node_is_null(a->average))
            return tfc_node_error(err, TFC_ERR_CONFIG, a->average ? a->average : at, p,
                                  "average: null (Keras's default) gives one value per class, "
                                  "and a metric in tfc's logs is one number: write average: "
                                  "micro, macro or weighted");
        if (tfc_node_enum(a->average, p, averages, &c->average, err)) return TFC_ERR_CONFIG;
        c->value = !strcmp(c->cls, "FBetaScore") ? a->beta : 1.0;
        if (!(c->value > 0)) {
            snprintf(p, sizeof p, "%s.beta", path);
            return tfc_node_error(err, TFC_ERR_CONFIG, tfc_node_get(at, "beta"), p,
                                  "beta must be > 0, found %g", c->value);
        }
        if (a->threshold && !tfc_node_is_null(a->threshold)) {
            snprintf(p, sizeof p, "%s.threshold", path);
            if (tfc_node_double(a->threshold, p, &c->threshold, err)) return TFC_ERR_CONFIG;
            if (!(c->threshold > 0 && c->threshold <= 1))
                return tfc_node_error(err, TFC_ERR_CONFIG, a->threshold, p,
                                      "the threshold is in (0, 1], found %g", c->threshold);
            c->have_threshold = 1;
        }
        return TFC_OK;
    }
    case TFC_CM_BINARY_ACCURACY:
        c->threshold = 0.5;
        if (a->threshold && !tfc_node_is_null(a->threshold)) {
            snprintf(p, sizeof p, "%s.threshold", path);
            if (tfc_node_double(a->threshold, p, &c->threshold, err)) return TFC_ERR_CONFIG;
            if (!(fabs(c->threshold) <= FLT_MAX))
                return tfc_node_error(err, TFC_ERR_CONFIG, a->threshold, p,
                                      "the threshold is not a float32 number");
            c->have_threshold = 1;
        }
        return TFC_OK;
    case TFC_CM_R2: {
        static const char *const aggregations[] = {"uniform_average",
                                                   "variance_weighted_average", NULL};
        snprintf(p, sizeof p, "%s.class_aggregation", path);
        c->num_regressors = a->num_regressors;
        const tfc_node *given = tfc_node_get(at, "class_aggregation");
        if (given && tfc_node_is_null(given))
            return tfc_node_error(err, TFC_ERR_CONFIG, given, p,
                                  "class_aggregation: null gives one value per output, and a "
                                  "metric in tfc's logs is one number: write uniform_average "
                                  "or variance_weighted_average");
        if (!a->aggregation) return TFC_OK; /* Keras's default: uniform_average */
        return tfc_node_enum(a->aggregation, p, aggregations, &c->variance_weighted, err);
    }
    case TFC_CM_IOU: {
        c->binary = !strcmp(c->cls, "BinaryIoU");
        c->num_classes = c->binary ? 2 : a->num_classes;
        c->sparse_y_true = !strncmp(c->cls, "OneHot", 6) ? 0 : c->binary ? 1 : a->sparse_y_true;
        c->sparse_y_pred = c->binary ? 1 : a->sparse_y_pred;
        if (c->binary) {
            c->threshold = 0.5;
            snprintf(p, sizeof p, "%s.threshold", path);
            if (a->threshold && !tfc_node_is_null(a->threshold) &&
                tfc_node_double(a->threshold, p, &c->threshold, err))
                return TFC_ERR_CONFIG;
            if (!(fabs(c->threshold) <= FLT_MAX))
                return tfc_node_error(err, TFC_ERR_CONFIG, a->threshold, p,
                                      "the threshold is not a float32 number");
        }
        snprintf(p, sizeof p, "%s.ignore_class", path);
        if (a->ignore_class && !tfc_node_is_null(a->ignore_class)) {
            if (opt_int(a->ignore_class, p, -(1 << 30), 1 << 30, &c->ignore_class, err))
                return TFC_ERR_CONFIG;
            c->have_ignore = 1;
        }
        int mean = strstr(c->cls, "Mean") != NULL;
        c->ntargets = mean ? c->num_classes : 0;
        if (!mean) {
            snprintf(p, sizeof p, "%s.target_class_ids", path);
            const tfc_node *t = a->target_ids;
            if (!t && c->binary) { /* Keras's default (0, 1) */
                c->ntargets = 2;
                c->target_ids = malloc(2 * sizeof *c->target_ids);
                if (!c->target_ids) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
                c->target_ids[0] = 0, c->target_ids[1] = 1;
                return TFC_OK;
            }
            if (!t)
                return tfc_node_error(err, TFC_ERR_CONFIG, at, p,
                                      "%s needs target_class_ids: the classes it averages",
                                      c->cls);
            float *ids;
            if (read_floats(t, p, 0, &ids, &c->ntargets, err)) return TFC_ERR_CONFIG;
            c->target_ids = malloc((size_t)c->ntargets * sizeof *c->target_ids);
            for (int i = 0; c->target_ids && i < c->ntargets; i++) {
                const double id = ids[i];
                if (!(id >= 0 && id < c->num_classes) || id != floor(id)) {
                    free(ids);
                    return tfc_node_error(err, TFC_ERR_CONFIG, t, p,
                                          "target class id %g is outside [0, %d)", id,
                                          c->num_classes);
                }
                c->target_ids[i] = (int)id;
            }
            free(ids);
        } else {
            c->target_ids = malloc((size_t)c->ntargets * sizeof *c->target_ids);
            for (int i = 0; c->target_ids && i < c->ntargets; i++) c->target_ids[i] = i;
        }
        if (!c->target_ids) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        return TFC_OK;
    }
    }
    return TFC_OK;
}

tfc_status tfc_counted_parse(tfc_counted *c, const tfc_node *item, const tfc_node *args,
                             const char *path, char *name, size_t name_size, tfc_error *err)
{
    memset(c, 0, sizeof *c);
    c->class_id = -1;
    int k = item->kind == TFC_NODE_SCALAR ? find_class(item->str) : -1;
    if (k < 0)
        return tfc_node_error(err, TFC_ERR_CONFIG, item, path, "not a counted metric");
    c->kind = metric_classes[k].kind;
    snprintf(c->cls, sizeof c->cls, "%s", metric_classes[k].cls);
    if (args && tfc_node_is_null(args)) args = NULL;
    if (args && args->kind != TFC_NODE_MAP)
        return tfc_node_error(err, TFC_ERR_CONFIG, args, path,
                              "expected the arguments of %s as a mapping", c->cls);
    if (!args && metric_classes[k].required)
        return tfc_node_error(err, TFC_ERR_CONFIG, item, path,
                              "%s needs %s: write {%s: {%s: ...}}%s", c->cls,
                              metric_classes[k].required, item->str, metric_classes[k].required,
                              c->kind == TFC_CM_FBETA ? " (micro, macro or weighted: Keras's "
                              "default, null, gives one value per class)" : "");
    margs a = {0};
    if (tfc_schema_apply(fields_of(c->cls), args, path, &a, err)) return TFC_ERR_CONFIG;
    snprintf(name, name_size, "%s",
             a.name ? a.name : args ? metric_classes[k].report : item->str);
    return parse_args(c, &a, args ? args : item, path, err);
}

/* ---- checks against the model ------------------------------------------------------------- */

static int uses_thresholds(const tfc_counted *c)
{
    return c->kind <= TFC_CM_SPECIFICITY_AT_SENSITIVITY;
}

tfc_status tfc_counted_check(tfc_counted *c, int classes, int64_t label_rows,
                             tfc_counted_labels labels, int logits, const char *loss_name,
                             const tfc_node *at, const char *path, tfc_error *err)
{
    c->classes = classes;
    c->labels = labels;
    const int dense_needed = uses_thresholds(c) || c->kind == TFC_CM_FBETA ||
                             c->kind == TFC_CM_R2 || c->kind == TFC_CM_BINARY_ACCURACY ||
                             c->kind == TFC_CM_CORRELATION ||
                             (c->kind == TFC_CM_IOU && (!c->sparse_y_true || c->binary));
    if (dense_needed && labels == TFC_LABELS_SPARSE)
        return tfc_node_error(err, TFC_ERR_CONFIG, at, path,
                              "%s compares each output with a target of its own, and %s reads "
                              "one class id per row (Keras's fit fails on the shapes): train "
                              "with categorical_crossentropy on one-hot labels (a pipeline "
                              "stage map: {op: one_hot, depth: %d})%s", c->cls, loss_name,
                              classes,
                              c->kind == TFC_CM_IOU ? ", or use MeanIoU" : "");
    if (c->class_id >= classes)
        return tfc_node_error(err, TFC_ERR_CONFIG, at, path,
                              "class_id %d is outside the %d outputs", c->class_id, classes);
    if (c->top_k > classes)
        return tfc_node_error(err, TFC_ERR_CONFIG, at, path,
                              "top_k %d exceeds the %d outputs", c->top_k, classes);
    if ((c->kind == TFC_CM_FBETA || c->kind == TFC_CM_R2 || c->multi_label) && label_rows != 1)
        return tfc_node_error(err, TFC_ERR_CONFIG, at, path,
                              "%s%s takes outputs of rank 2 (batch, outputs), as Keras's; this "
                              "model's output has %lld rows an example", c->cls,
                              c->multi_label ? " with multi_label" : "", (long long)label_rows);
    if (c->multi_label) {
        if (c->num_classes && c->num_classes != classes)
            return tfc_node_error(err, TFC_ERR_CONFIG, at, path,
                                  "num_labels %d is not the model's %d outputs",
                                  c->num_classes, classes);
        c->num_classes = classes;
    }
    if (c->label_weights && c->nlabel_weights != classes)
        return tfc_node_error(err, TFC_ERR_CONFIG, at, path,
                              "%d label_weights for %d outputs", c->nlabel_weights, classes);
    if (c->kind == TFC_CM_IOU && !c->binary) {
        if (c->sparse_y_pred && classes != 1)
            return tfc_node_error(err, TFC_ERR_CONFIG, at, path,
                                  "sparse_y_pred: true reads class ids from the output, and it "
                                  "holds %d scores a row: write sparse_y_pred: false (the "
                                  "argmax is the class)", classes);
        if (c->sparse_y_true && labels == TFC_LABELS_DENSE && classes != 1)
            return tfc_node_error(err, TFC_ERR_CONFIG, at, path,
                                  "sparse_y_true: true reads class ids, and %s's labels are %d "
                                  "values a row: write sparse_y_true: false, or OneHot%s",
                                  loss_name, classes, c->cls);
    }
    if (c->kind == TFC_CM_FBETA && !c->have_threshold && classes == 1)
        return tfc_node_error(err, TFC_ERR_CONFIG, at, path,
                              "%s without a threshold takes each row's largest output as its "
                              "prediction, and with one output every row is then positive "
                              "(Keras computes that too): give threshold: 0.5", c->cls);
    if (c->kind == TFC_CM_CORRELATION && classes == 1)
        return tfc_node_error(err, TFC_ERR_CONFIG, at, path,
                              "%s correlates the outputs of each row (the last axis) with its "
                              "targets, and this model has one output a row: each row's "
                              "value is 0/0 (Keras reports %s): use R2Score, or mae",
                              c->cls, c->concordance ? "0" : "nan");
    const int probabilities = uses_thresholds(c) || c->binary ||
                              (c->kind == TFC_CM_FBETA && c->have_threshold);
    if (logits && probabilities && !c->from_logits &&
        !(c->kind != TFC_CM_AUC && c->thresholds_given) && !(c->nthresholds == 1 && c->top_k))
        return tfc_node_error(err, TFC_ERR_CONFIG, at, path,
                              "%s thresholds probabilities, and the model's output holds logits "
                              "(%s from_logits, the last layer without its sigmoid or "
                              "softmax): %s", c->cls, loss_name,
                              c->kind == TFC_CM_AUC ? "write from_logits: true"
                              : "end the model in its activation, or give thresholds on the "
                                "logits' scale (0 is a probability of 0.5)");
    if (uses_thresholds(c)) {
        const int64_t L = c->multi_label ? classes : 1;
        c->ncounts = 2 * (int64_t)c->nthresholds * L + 2 * L;
    } else if (c->kind == TFC_CM_FBETA) {
        c->ncounts = 4 * (int64_t)classes;
    } else if (c->kind == TFC_CM_R2) {
        c->ncounts = 4 * (int64_t)classes + 1;
    } else if (c->kind == TFC_CM_CORRELATION) {
        c->ncounts = 2;
    } else if (c->kind == TFC_CM_BINARY_ACCURACY) {
        if (logits && !c->have_threshold) c->threshold = 0.0; /* a probability of 0.5 */
        c->ncounts = 2;
    } else {
        c->ncounts = (int64_t)c->num_classes * c->num_classes;
    }
    return TFC_OK;
}

/* ---- counting ------------------------------------------------------------------------------ */

typedef struct ranked { float v; int i; } ranked;

static int cmp_ranked(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->v != y->v) return x->v < y->v ? 1 : -1;
    return x->i - y->i;
}

/* State of the threshold metrics, L labels (1 unless multi_label) and T thresholds:
 * tp[L][T], fp[L][T], then pos[L], neg[L] (the weighted positives and negatives seen).
 * With evenly spaced thresholds tp and fp hold the buckets' counts instead (Keras's
 * optimized path), which tfc_counted_value sums from the top. */
static void count_thresholds(const tfc_counted *c, const float *out, const float *lab,
                             const float *weight, int64_t rows, double *counts)
{
    const int C = c->classes, T = c->nthresholds;
    const int64_t L = c->multi_label ? C : 1;
    double *tp = counts, *fp = counts + L * T, *pos = counts + 2 * L * T, *neg = pos + L;
    float *buf = malloc((size_t)C * sizeof *buf);
    ranked *rank = c->top_k ? malloc((size_t)C * sizeof *rank) : NULL;
    if (!buf || (c->top_k && !rank)) {
        free(buf);
        free(rank);
        return;
    }
    for (int64_t r = 0; r < rows; r++) {
        const double w = weight ? weight[r] : 1.0;
        if (w == 0) continue;
        const float *o = out + r * C;
        const float *t = lab + r * C;
        for (int j = 0; j < C; j++) buf[j] = c->from_logits ? 1.0f / (1.0f + expf(-o[j])) : o[j];
        if (c->top_k) { /* the k largest (the lower index first among equals) stay */
            for (int j = 0; j < C; j++) rank[j] = (ranked){buf[j], j};
            qsort(rank, (size_t)C, sizeof *rank, cmp_ranked);
            for (int j = c->top_k; j < C; j++) buf[rank[j].i] = NEG_INF_FILTER;
        }
        const int j0 = c->class_id >= 0 ? c->class_id : 0;
        const int j1 = c->class_id >= 0 ? c->class_id + 1 : C;
        for (int j = j0; j < j1; j++) {
            const int64_t l = c->multi_label ? j : 0;
            const int positive = t[j] != 0;
            float p = buf[j];
            /* flattened, AUC's label weights weigh each output's points (multi_label: the
             * curves' mean) */
            const double we = c->label_weights && !c->multi_label ? w * c->label_weights[j] : w;
            (positive ? pos : neg)[l] += we;
            if (p != p) continue; /* NaN: above no threshold */
            double *dst = (positive ? tp : fp) + l * T;
            if (c->even) {
                p = p < 0 ? 0 : p > 1 ? 1 : p;
                int b = (int)ceilf(p * (float)(T - 1)) - 1;
                if (c->epsilon && b < 0) b = 0;
                if (b >= 0) dst[b] += we;
            } else {
                for (int k = 0; k < T; k++)
                    if (p > c->thresholds[k]) dst[k] += we;
            }
        }
    }
    free(buf);
    free(rank);
}

/* F-beta: per class tp, fp, fn and the labels' sum (weighted's weights). */
static void count_fbeta(const tfc_counted *c, const float *out, const float *lab, int64_t rows,
                        double *counts)
{
    const int C = c->classes;
    double *tp = counts, *fp = counts + C, *fn = counts + 2 * C, *sum = counts + 3 * C;
    for (int64_t r = 0; r < rows; r++) {
        const float *o = out + r * C, *t = lab + r * C;
        float top = o[0];
        for (int j = 1; j < C; j++) top = o[j] > top ? o[j] : top;
        for (int j = 0; j < C; j++) {
            const float pred = c->have_threshold ? o[j] > (float)c->threshold
                                                 : o[j] >= top && fabsf(o[j]) > 1e-9f;
            tp[j] += (double)(pred * t[j]);
            fp[j] += (double)(pred * (1 - t[j]));
            fn[j] += (double)((1 - pred) * t[j]);
            sum[j] += (double)t[j];
        }
    }
}

/* A float label or output as a class id, truncated as Keras's cast to int32 does; -1 (no
 * class) for what int32 cannot hold, NaN included. */
static long long class_of(float v)
{
    return v > -2147483648.0f && v < 2147483648.0f ? (long long)v : -1;
}

static int argmax(const float *v, int n)
{
    int k = 0;
    for (int j = 1; j < n; j++)
        if (v[j] > v[k]) k = j;
    return k;
}

/* IoU: the confusion matrix, row the true class, column the predicted. */
static void count_iou(const tfc_counted *c, const float *out, const void *labels,
                      const float *weight, int64_t rows, double *counts)
{
    const int C = c->classes, N = c->num_classes;
    const int64_t n = c->binary ? rows * C : rows; /* BinaryIoU: every output */
    for (int64_t e = 0; e < n; e++) {
        const int64_t r = c->binary ? e / C : e;
        const double w = weight ? weight[r] : 1.0;
        if (w == 0) continue;
        long long t, p;
        if (c->binary) {
            t = class_of(((const float *)labels)[e]);
            p = out[e] >= (float)c->threshold;
        } else {
            t = c->labels == TFC_LABELS_SPARSE ? ((const int32_t *)labels)[r]
                : c->sparse_y_true ? class_of(((const float *)labels)[r])
                                   : argmax((const float *)labels + r * C, C);
            p = c->sparse_y_pred ? class_of(out[r]) : argmax(out + r * C, C);
        }
        if (t < 0 || t >= N || p < 0 || p >= N || (c->have_ignore && t == c->ignore_class))
            continue;
        counts[t * N + p] += w;
    }
}

/* R2: per output the labels' sum, their squares' sum, the squared residuals' sum and the
 * rows; then every value seen (Keras's num_samples, for the adjusted score). */
static void count_r2(const tfc_counted *c, const float *out, const float *lab, int64_t rows,
                     double *counts)
{
    const int C = c->classes;
    double *sum = counts, *sq = counts + C, *res = counts + 2 * C, *n = counts + 3 * C;
    for (int64_t r = 0; r < rows; r++)
        for (int j = 0; j < C; j++) {
            const double t = lab[r * C + j], e = t - out[r * C + j];
            sum[j] += t;
            sq[j] += t * t;
            res[j] += e * e;
            n[j] += 1;
        }
    counts[4 * C] += (double)rows * C;
}

/* Binary accuracy: the outputs whose thresholded value equals the label, and the outputs. */
static void count_binary_accuracy(const tfc_counted *c, const float *out, const float *lab,
                                  const float *weight, int64_t rows, double *counts)
{
    const int C = c->classes;
    const float thr = (float)c->threshold;
    for (int64_t r = 0; r < rows; r++) {
        const double w = weight ? weight[r] : 1.0;
        if (w == 0) continue;
        double right = 0;
        for (int j = 0; j < C; j++) right += (float)(out[r * C + j] > thr) == lab[r * C + j];
        counts[0] += w * right;
        counts[1] += w * C;
    }
}

/* Keras's pearson_correlation and concordance_correlation of each row (its C outputs and
 * targets; population moments), their weighted sum and the weights. Pearson's is
 * cov / (sd_t sd_p), NaN where a row's targets or outputs are all equal, as Keras's;
 * concordance's is 2 cov / (var_t + var_p + (mean_t - mean_p)^2 + epsilon). Keras writes
 * that covariance as mean((t - mean_p)(p - mean_p)), which is the same number: the
 * outputs' deviations sum to zero. */
static void count_correlation(const tfc_counted *c, const float *out, const float *lab,
                              const float *weight, int64_t rows, double *counts)
{
    const int C = c->classes;
    for (int64_t r = 0; r < rows; r++) {
        const double w = weight ? weight[r] : 1.0;
        if (w == 0) continue;
        const float *o = out + r * C, *t = lab + r * C;
        double mt = 0, mp = 0;
        for (int j = 0; j < C; j++) mt += t[j], mp += o[j];
        mt /= C, mp /= C;
        double cov = 0, vt = 0, vp = 0;
        for (int j = 0; j < C; j++) {
            const double dt = t[j] - mt, dp = o[j] - mp;
            cov += dt * dp, vt += dt * dt, vp += dp * dp;
        }
        cov /= C, vt /= C, vp /= C;
        const double v = c->concordance
                             ? 2 * cov / (vt + vp + (mt - mp) * (mt - mp) + KERAS_EPSILON)
                             : cov / (sqrt(vt) * sqrt(vp));
        counts[0] += w * v;
        counts[1] += w;
    }
}

void tfc_counted_add(const tfc_counted *c, const float *out, const void *labels,
                     const float *weight, int64_t rows, double *counts)
{
    if (c->kind == TFC_CM_CORRELATION) {
        count_correlation(c, out, labels, weight, rows, counts);
        return;
    }
    if (c->kind == TFC_CM_BINARY_ACCURACY) {
        count_binary_accuracy(c, out, labels, weight, rows, counts);
        return;
    }
    if (uses_thresholds(c)) count_thresholds(c, out, labels, weight, rows, counts);
    else if (c->kind == TFC_CM_FBETA) count_fbeta(c, out, labels, rows, counts);
    else if (c->kind == TFC_CM_R2) count_r2(c, out, labels, rows, counts);
    else count_iou(c, out, labels, weight, rows, counts);
}

/* ---- values -------------------------------------------------------------------------------- */

static double div_no_nan(double a, double b) { return b == 0 ? 0 : a / b; }

/* One label's curve (T thresholds): tp, fp, tn, fn at each. */
static double auc_of(const tfc_counted *c, const double *tp, const double *fp, const double *tn,
                     const double *fn)
{
    const int T = c->nthresholds;
    double area = 0;
    if (c->curve == CURVE_PR && c->summation == SUM_INTERPOLATION) { /* interpolate_pr_auc */
        for (int i = 0; i + 1 < T; i++) {
            const double dtp = tp[i] - tp[i + 1];
            const double p0 = tp[i] + fp[i], p1 = tp[i + 1] + fp[i + 1], dp = p0 - p1;
            const double slope = div_no_nan(dtp, dp > 0 ? dp : 0);
            const double intercept = tp[i + 1] - slope * p1;
            const double ratio = p0 > 0 && p1 > 0 ? div_no_nan(p0, p1 > 0 ? p1 : 0) : 1.0;
            const double den = tp[i + 1] + fn[i + 1];
            area += div_no_nan(slope * (dtp + intercept * log(ratio)), den > 0 ? den : 0);
        }
        return area;
    }
    double x0 = 0, y0 = 0;
    for (int i = 0; i < T; i++) {
        double x, y;
        const double recall = div_no_nan(tp[i], tp[i] + fn[i]);
        if (c->curve == CURVE_ROC) {
            x = div_no_nan(fp[i], fp[i] + tn[i]);
            y = recall;
        } else if (c->curve == CURVE_PR) {
            x = recall;
            y = div_no_nan(tp[i], tp[i] + fp[i]);
        } else { /* PRGAIN */
            const double s = div_no_nan(tp[i] + fn[i], tn[i] + fp[i]);
            double rg = 1.0 - s * div_no_nan(fn[i], tp[i]);
            double pg = 1.0 - s * div_no_nan(fp[i], tp[i]);
            if (tp[i] == 0) rg = 0, pg = 1;
            x = rg > 0 ? rg : 0;
            y = pg;
        }
        if (i > 0) {
            const double h = c->summation == SUM_INTERPOLATION ? (y0 + y) / 2
                             : c->summation == SUM_MINORING ? (y0 < y ? y0 : y)
                                                            : (y0 > y ? y0 : y);
            area += (x0 - x) * h;
        }
        x0 = x, y0 = y;
    }
    return area;
}

static double thresholds_value(const tfc_counted *c, const double *counts)
{
    const int T = c->nthresholds;
    const int64_t L = c->multi_label ? c->classes : 1;
    const double *pos = counts + 2 * L * T, *neg = pos + L;
    double *v = malloc((size_t)(4 * T) * sizeof *v);
    if (!v) return NAN;
    double *tp = v, *fp = v + T, *tn = v + 2 * T, *fn = v + 3 * T;
    double result = 0, weights = 0;
    for (int64_t l = 0; l < L; l++) {
        const double *ctp = counts + l * T, *cfp = counts + L * T + l * T;
        double stp = 0, sfp = 0;
        for (int k = T - 1; k >= 0; k--) { /* buckets: the sums from the top */
            stp = c->even ? stp + ctp[k] : ctp[k];
            sfp = c->even ? sfp + cfp[k] : cfp[k];
            tp[k] = stp, fp[k] = sfp;
            tn[k] = neg[l] - sfp, fn[k] = pos[l] - stp;
        }
        double value = 0;
        switch (c->kind) {
        case TFC_CM_PRECISION: value = div_no_nan(tp[0], tp[0] + fp[0]); break;
        case TFC_CM_RECALL: value = div_no_nan(tp[0], tp[0] + fn[0]); break;
        case TFC_CM_TRUE_POSITIVES: value = tp[0]; break;
        case TFC_CM_FALSE_POSITIVES: value = fp[0]; break;
        case TFC_CM_TRUE_NEGATIVES: value = tn[0]; break;
        case TFC_CM_FALSE_NEGATIVES: value = fn[0]; break;
        case TFC_CM_AUC: value = auc_of(c, tp, fp, tn, fn); break;
        default: /* the largest dependent value where the constraint holds (0 if none);
                  * the ratios in float32, as Keras compares them with the constraint (4/5
                  * meets a recall of 0.8 there, and not in double) */
            for (int k = 0; k < T; k++) {
                const float rec = (float)div_no_nan(tp[k], tp[k] + fn[k]);
                const float prec = (float)div_no_nan(tp[k], tp[k] + fp[k]);
                const float spec = (float)div_no_nan(tn[k], tn[k] + fp[k]);
                float constrained, dependent;
                if (c->kind == TFC_CM_PRECISION_AT_RECALL) constrained = rec, dependent = prec;
                else if (c->kind == TFC_CM_RECALL_AT_PRECISION) constrained = prec, dependent = rec;
                else if (c->kind == TFC_CM_SENSITIVITY_AT_SPECIFICITY)
                    constrained = spec, dependent = rec;
                else constrained = rec, dependent = spec;
                if (constrained >= (float)c->value && dependent > value) value = dependent;
            }
        }
        const double w = c->label_weights && c->multi_label ? c->label_weights[l] : 1.0;
        result += w * value;
        weights += w;
    }
    free(v);
    if (!c->multi_label) return result;
    return c->label_weights ? div_no_nan(result, weights) : result / (double)L;
}

static double fbeta_value(const tfc_counted *c, const double *counts)
{
    const int C = c->classes;
    const double *tp = counts, *fp = counts + C, *fn = counts + 2 * C, *sum = counts + 3 * C;
    const double b2 = c->value * c->value, eps = KERAS_EPSILON;
    double total = 0, f_sum = 0, weighted = 0;
    for (int j = 0; j < C; j++) total += sum[j];
    if (c->average == AVG_MICRO) {
        double TP = 0, FP = 0, FN = 0;
        for (int j = 0; j < C; j++) TP += tp[j], FP += fp[j], FN += fn[j];
        const double p = TP / (TP + FP + eps), r = TP / (TP + FN + eps);
        return p * r / (b2 * p + r + eps) * (1 + b2);
    }
    for (int j = 0; j < C; j++) {
        const double p = tp[j] / (tp[j] + fp[j] + eps), r = tp[j] / (tp[j] + fn[j] + eps);
        const double f = p * r / (b2 * p + r + eps) * (1 + b2);
        f_sum += f;
        weighted += f * sum[j] / (total + eps);
    }
    return c->average == AVG_WEIGHTED ? weighted : f_sum / C;
}

static double iou_value(const tfc_counted *c, const double *cm)
{
    const int N = c->num_classes;
    double sum = 0, valid = 0;
    for (int i = 0; i < c->ntargets; i++) {
        const int k = c->target_ids[i];
        double row = 0, col = 0;
        for (int j = 0; j < N; j++) row += cm[k * N + j], col += cm[j * N + k];
        const double den = row + col - cm[k * N + k];
        if (den > 1e-9) {
            valid += 1;
            sum += cm[k * N + k] / (den + KERAS_EPSILON);
        }
    }
    return sum / (valid + KERAS_EPSILON);
}

/* Keras's R2Score.result: 1 - residuals / total per output (0 where that is infinite),
 * their mean or variance-weighted mean, adjusted for num_regressors where Keras does. */
static double r2_value(const tfc_counted *c, const double *counts)
{
    const int C = c->classes;
    const double *sum = counts, *sq = counts + C, *res = counts + 2 * C, *n = counts + 3 * C;
    double mean_score = 0, weighted = 0, weights = 0;
    for (int j = 0; j < C; j++) {
        const double total = sq[j] - sum[j] * (sum[j] / n[j]);
        double score = 1.0 - res[j] / total;
        if (isinf(score)) score = 0;
        mean_score += score / C;
        weighted += total * score;
        weights += total;
    }
    double r2 = c->variance_weighted ? weighted / weights : mean_score;
    const double samples = counts[4 * C], p = c->num_regressors;
    if (p != 0 && p < samples - 1) r2 = 1.0 - (1.0 - r2) * (samples - 1.0) / (samples - p - 1.0);
    return r2;
}

double tfc_counted_value(const tfc_counted *c, const double *counts)
{
    if (uses_thresholds(c)) return thresholds_value(c, counts);
    if (c->kind == TFC_CM_FBETA) return fbeta_value(c, counts);
    if (c->kind == TFC_CM_R2) return r2_value(c, counts);
    if (c->kind == TFC_CM_BINARY_ACCURACY || c->kind == TFC_CM_CORRELATION)
        return div_no_nan(counts[0], counts[1]);
    return iou_value(c, counts);
}

int tfc_counted_lower_is_better(const tfc_counted *c)
{
    return c->kind == TFC_CM_FALSE_POSITIVES || c->kind == TFC_CM_FALSE_NEGATIVES;
}

void tfc_counted_free(tfc_counted *c)
{
    free(c->thresholds);
    free(c->label_weights);
    free(c->target_ids);
    c->thresholds = c->label_weights = NULL;
    c->target_ids = NULL;
}
