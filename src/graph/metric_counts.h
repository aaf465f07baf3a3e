/* Counted metrics: Keras 3's metrics whose value is a ratio of counts summed over every
 * batch seen (Precision, Recall, AUC, F1Score, MeanIoU, ..., and the regression's R2Score),
 * not a mean of the batches' values (a mean over rows too: the correlations' sum and rows). Each keeps a vector of counts (its "state", Keras's
 * variables): a batch adds its own, the sums of batches and of ranks add, and the value is
 * computed from the sums once (SPEC §1, Metrics). The counts are taken on the host, from the model's
 * output and the batch's labels as the loss reads them, so every backend has them.
 *
 * The arithmetic follows keras/src/metrics (confusion_metrics.py, f_score_metrics.py,
 * iou_metrics.py, regression_metrics.py's R2Score, correlation_metrics.py and
 * metrics_utils.update_confusion_matrix_variables): which element is a
 * positive, the bucket each prediction falls in when the thresholds are evenly spaced,
 * Keras's epsilons in the quotients. No compute kernel: the fuzz build links it. */
#ifndef TFC_GRAPH_METRIC_COUNTS_H
#define TFC_GRAPH_METRIC_COUNTS_H

#include <stdint.h>

#include "core/config.h"
#include "core/error.h"

typedef enum tfc_counted_kind {
    TFC_CM_PRECISION = 0,
    TFC_CM_RECALL,
    TFC_CM_TRUE_POSITIVES,
    TFC_CM_FALSE_POSITIVES,
    TFC_CM_TRUE_NEGATIVES,
    TFC_CM_FALSE_NEGATIVES,
    TFC_CM_AUC,
    TFC_CM_PRECISION_AT_RECALL,
    TFC_CM_RECALL_AT_PRECISION,
    TFC_CM_SENSITIVITY_AT_SPECIFICITY,
    TFC_CM_SPECIFICITY_AT_SENSITIVITY,
    TFC_CM_FBETA,   /* FBetaScore and F1Score */
    TFC_CM_IOU,     /* IoU, MeanIoU, OneHotIoU, OneHotMeanIoU, BinaryIoU */
    TFC_CM_R2,      /* R2Score */
    TFC_CM_BINARY_ACCURACY, /* BinaryAccuracy: every output thresholded, the share right */
    TFC_CM_CORRELATION, /* PearsonCorrelation, ConcordanceCorrelation: each row's, averaged */
} tfc_counted_kind;

/* What a batch's labels are, as the loss reads them. */
typedef enum tfc_counted_labels {
    TFC_LABELS_DENSE = 0, /* float, the output's shape: binary, one-hot or regression targets */
    TFC_LABELS_SPARSE,    /* int32 class ids, one per row */
} tfc_counted_labels;

typedef struct tfc_counted {
    tfc_counted_kind kind;
    char cls[32];         /* the Keras class: Precision, MeanIoU, ... */
    /* confusion counts at thresholds (Precision ... SpecificityAtSensitivity, AUC) */
    int nthresholds;
    float *thresholds;    /* [nthresholds], ascending for AUC */
    int thresholds_given; /* Precision's ... FalseNegatives': `thresholds:` written */
    int even;             /* evenly spaced over [0, 1] (Keras's optimized path: buckets) */
    int epsilon;          /* ... with AUC's first and last moved out by 1e-7 */
    int top_k;            /* 0: none */
    int class_id;         /* -1: none */
    int curve;            /* AUC: 0 ROC, 1 PR */
    int summation;        /* AUC: 0 interpolation, 1 minoring, 2 majoring */
    int multi_label;      /* AUC: one curve per output, their (weighted) mean */
    int from_logits;      /* AUC: the outputs go through a sigmoid first */
    float *label_weights; /* AUC: [classes] or NULL */
    int nlabel_weights;
    double value;         /* the *At* metrics' constraint; FBetaScore's beta */
    /* FBetaScore */
    int average;          /* 0 micro, 1 macro, 2 weighted */
    int have_threshold;
    double threshold;     /* FBetaScore's (else each row's largest output), BinaryIoU's,
                           * BinaryAccuracy's (0.5; 0 on logits unless given) */
    /* IoU */
    int num_classes;
    int *target_ids;      /* [ntargets] */
    int ntargets;
    int have_ignore;
    int ignore_class;
    int sparse_y_true, sparse_y_pred, binary; /* BinaryIoU: outputs >= threshold are 1 */
    /* R2Score */
    int variance_weighted; /* class_aggregation variance_weighted_average (else uniform) */
    int num_regressors;
    /* PearsonCorrelation (0) or ConcordanceCorrelation (1) */
    int concordance;
    /* set by tfc_counted_check */
    int classes;          /* the model's outputs per row */
    int labels;           /* tfc_counted_labels */
    int64_t ncounts;      /* the state's length */
} tfc_counted;

/* Whether `name` is a counted metric's class or its snake_case name (Precision, precision,
 * MeanIoU, mean_io_u), and its default reported name (Keras's: precision, mean_io_u,
 * fbeta_score for FBetaScore); NULL when it is not one. */
const char *tfc_counted_default_name(const char *name);

/* Whether the argument `key` of the metric class `cls` (Keras's config of it: AUC's
 * num_thresholds 200) holds its default, so that an imported model file can leave it out:
 * null where Keras's default is None, name the class's default name, dtype float32 or
 * int32. */
int tfc_counted_default_arg(const char *cls, const char *key, const tfc_node *v);

/* Reads the metric `item` (a name) with its arguments `args` (a mapping, or NULL: all
 * defaults) into *c (zeroed first); `path` names it in errors (metrics[2]). *name gets the
 * name to report: `name:` when given, else the name as written when `args` is NULL (as
 * Keras's history keys a metric given by a string), else the class's default. A metric
 * that needs arguments (MeanIoU's num_classes) and has none is an error saying how to
 * write them. */
tfc_status tfc_counted_parse(tfc_counted *c, const tfc_node *item, const tfc_node *args,
                             const char *path, char *name, size_t name_size, tfc_error *err);

/* Checks *c against the model's output and labels, once their shapes are known: `classes`
 * outputs per row (the last axis), `label_rows` rows an example (1: rank 2; more: a
 * sequence or an image of rows), `labels` how the loss reads them, and whether the output
 * holds logits (a cross-entropy from_logits, the last layer without its softmax or
 * sigmoid). Sets the state's length. Errors name `at` and `path`. */
tfc_status tfc_counted_check(tfc_counted *c, int classes, int64_t label_rows,
                             tfc_counted_labels labels, int logits, const char *loss_name,
                             const tfc_node *at, const char *path, tfc_error *err);

/* Adds one batch's counts into `counts` (c->ncounts): `out` [rows, classes] the outputs,
 * `labels` [rows] int32 ids or [rows, classes] floats, `weight` [rows] (0: a masked step
 * that counts nowhere) or NULL. */
void tfc_counted_add(const tfc_counted *c, const float *out, const void *labels,
                     const float *weight, int64_t rows, double *counts);

/* The metric's value from counts summed over batches. */
double tfc_counted_value(const tfc_counted *c, const double *counts);

/* Whether a lower value is better: the counts of errors (FalsePositives, FalseNegatives). */
int tfc_counted_lower_is_better(const tfc_counted *c);

void tfc_counted_free(tfc_counted *c);

#endif
