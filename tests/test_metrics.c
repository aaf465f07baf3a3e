/* The counted metrics (graph/metric_counts.h; SPEC §1, Metrics): Precision, Recall, the
 * four counts, AUC, the *At* metrics, F1Score/FBetaScore and the IoU family.
 *   keras_values  each metric's value after one batch and after three, against Keras 3's
 *                 update_state/result on the same arrays (tests/ref/keras_metrics.py wrote
 *                 tests/ref/metrics/cases.json): thresholds, top_k, class_id, soft labels,
 *                 the four AUC curves and summations, evenly spaced thresholds or not,
 *                 multi_label with label weights, logits, masked rows of a sequence;
 *   names         the names the logs report, as Keras's history keys them;
 *   model_errors  what tfc refuses and why (labels the metric cannot read, Keras's
 *                 one-value-per-class defaults, logits, duplicates, unknown arguments);
 *   batch_sizes   a trained binary classifier's test metrics are ratios of counts over the
 *                 whole split: the same bits whatever the test batch size;
 *   resume        the display's counts are in the snapshot: a run paused and resumed between
 *                 two displays logs the same train metrics as the run that never paused;
 *   loss_functions  Keras's metrics that are a loss function's mean (msle, poisson,
 *                 cosine_similarity, the cross-entropies, ...) on a model's output, against
 *                 Keras's on the same output (tests/ref/metrics/loss_functions.json). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "data/data.h"
#include "graph/metric_counts.h"
#include "graph/model.h"
#include "solver/solver.h"
#include "testutil.h"

/* A metric item (YAML) parsed and checked as a model file's metrics[0] would be. */
static tfc_status counted_of(const char *spec, tfc_counted *c, int classes, int64_t steps,
                             tfc_counted_labels labels, int logits, char *name, size_t size,
                             tfc_doc **doc, tfc_error *err)
{
    *doc = tfc_doc_load_string(spec, strlen(spec), "m.yaml", err);
    if (!*doc) return err->code;
    const tfc_node *item = tfc_doc_root(*doc), *args = NULL;
    if (item->kind == TFC_NODE_MAP && item->n == 1) {
        args = item->vals[0];
        item = item->keys[0];
    }
    tfc_status s = tfc_counted_parse(c, item, args, "metrics[0]", name, size, err);
    if (!s)
        s = tfc_counted_check(c, classes, steps, labels, logits, "the loss", item, "metrics[0]",
                              err);
    return s;
}

static void *array_of(json_t *a, int ints)
{
    size_t n = json_array_size(a);
    float *f = ints ? NULL : malloc((n ? n : 1) * sizeof *f);
    int32_t *i = ints ? malloc((n ? n : 1) * sizeof *i) : NULL;
    for (size_t k = 0; k < n; k++) {
        double v = json_number_value(json_array_get(a, k));
        if (ints) i[k] = (int32_t)v;
        else f[k] = (float)v;
    }
    return ints ? (void *)i : (void *)f;
}

static int close_to(double got, double want)
{
    return fabs(got - want) <= 2e-6 * fmax(1.0, fabs(want));
}

static void test_keras_values(void)
{
    json_error_t jerr;
    json_t *root = json_load_file("tests/ref/metrics/cases.json", 0, &jerr);
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    json_t *cases = json_object_get(root, "cases");
    CU_ASSERT_FATAL(json_array_size(cases) >= 53);
    for (size_t k = 0; k < json_array_size(cases); k++) {
        json_t *cs = json_array_get(cases, k);
        const char *spec = json_string_value(json_object_get(cs, "spec"));
        const int sparse = !strcmp(json_string_value(json_object_get(cs, "labels")), "sparse");
        const int classes = (int)json_integer_value(json_object_get(cs, "classes"));
        const int64_t steps = json_integer_value(json_object_get(cs, "steps"));
        tfc_counted c;
        tfc_doc *doc = NULL;
        tfc_error err;
        tfc_error_clear(&err);
        char name[48];
        tfc_status s = counted_of(spec, &c, classes, steps,
                                  sparse ? TFC_LABELS_SPARSE : TFC_LABELS_DENSE, 0, name,
                                  sizeof name, &doc, &err);
        CU_ASSERT_EQUAL(s, TFC_OK);
        if (s) {
            printf("\n  %s: %s", spec, err.msg);
            tfc_doc_free(doc);
            continue;
        }
        double *counts = calloc((size_t)c.ncounts, sizeof *counts);
        json_t *batches = json_object_get(cs, "batches");
        for (size_t b = 0; b < json_array_size(batches); b++) {
            json_t *bt = json_array_get(batches, b);
            float *pred = array_of(json_object_get(bt, "pred"), 0);
            void *lab = array_of(json_object_get(bt, "true"), sparse);
            json_t *jw = json_object_get(bt, "weight");
            float *w = jw ? array_of(jw, 0) : NULL;
            const int64_t rows = (int64_t)json_array_size(json_object_get(bt, "pred")) / classes;
            tfc_counted_add(&c, pred, lab, w, rows, counts);
            if (b == 0) {
                double first = json_number_value(json_object_get(cs, "first"));
                double got = tfc_counted_value(&c, counts);
                CU_ASSERT(close_to(got, first));
                if (!close_to(got, first))
                    printf("\n  %s after one batch: %.8f, Keras %.8f", spec, got, first);
            }
            free(pred), free(lab), free(w);
        }
        double want = json_number_value(json_object_get(cs, "value"));
        double got = tfc_counted_value(&c, counts);
        CU_ASSERT(close_to(got, want));
        if (!close_to(got, want)) printf("\n  %s: %.8f, Keras %.8f", spec, got, want);
        free(counts);
        tfc_counted_free(&c);
        tfc_doc_free(doc);
    }
    json_decref(root);
}

/* The model file around a metrics list: 6 features, `units` outputs with `act`, the loss. */
static tfc_model *model_with(const char *metrics, int units, const char *act, const char *loss,
                             tfc_error *err)
{
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "name: m\ninput: {shape: [6]}\nlayers:\n  - Dense: {units: %d, activation: %s}\n"
             "loss: %s\nmetrics: %s\n", units, act, loss, metrics);
    tfc_error_clear(err);
    return tfc_model_from_string(yaml, strlen(yaml), "m.yaml", err);
}

static void test_names(void)
{
    static const struct { const char *metrics, *names[4]; } cases[] = {
        {"[precision, Recall, AUC, auc_1]", {NULL}}, /* auc_1 is no metric */
        {"[precision, Recall, AUC]", {"precision", "Recall", "AUC"}},
        {"[{AUC: {curve: PR}}, {AUC: {name: roc}}, {FBetaScore: {average: micro}}]",
         {"auc", "roc", "fbeta_score"}},
        {"[{F1Score: {average: macro, name: f1}}, true_positives, {BinaryIoU: {}}]",
         {"f1", "true_positives", "binary_io_u"}},
        {"[PearsonCorrelation, {ConcordanceCorrelation: {}}, {PearsonCorrelation: {name: r}}]",
         {"PearsonCorrelation", "concordance_correlation", "r"}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        tfc_error err;
        tfc_model *m = model_with(cases[k].metrics, 3, "sigmoid", "binary_crossentropy", &err);
        if (!cases[k].names[0]) {
            CU_ASSERT_PTR_NULL(m);
            CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "auc_1"));
            tfc_model_free(m);
            continue;
        }
        if (!m) printf("\n  %s", err.text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        for (int i = 0; i < 3; i++) {
            CU_ASSERT_STRING_EQUAL(tfc_model_metric(m, i)->name, cases[k].names[i]);
            CU_ASSERT_EQUAL(tfc_model_metric(m, i)->kind, TFC_METRIC_COUNTED);
        }
        CU_ASSERT(tfc_model_ncounts(m) > 0);
        tfc_model_free(m);
    }
    /* keras.metrics.serialize's form, as Keras 3.15 writes it (dtype float32 included) */
    {
        tfc_error err;
        tfc_model *m = model_with(
            "[{module: keras.metrics, class_name: AUC, config: {name: auc, dtype: float32, "
            "num_thresholds: 200, curve: PR, summation_method: interpolation, multi_label: "
            "false, num_labels: null, label_weights: null, from_logits: false}, "
            "registered_name: null}, {module: keras.metrics, class_name: Precision, config: "
            "{name: prec, dtype: float32, thresholds: 0.6, top_k: null, class_id: null}, "
            "registered_name: null}, {class_name: BinaryAccuracy, config: {name: "
            "binary_accuracy, dtype: float32}}]", 3, "sigmoid", "binary_crossentropy", &err);
        if (!m) printf("\n  %s", err.text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        CU_ASSERT_STRING_EQUAL(tfc_model_metric(m, 0)->name, "auc");
        CU_ASSERT_STRING_EQUAL(tfc_model_metric(m, 1)->name, "prec");
        CU_ASSERT_STRING_EQUAL(tfc_model_metric(m, 2)->name, "binary_accuracy");
        CU_ASSERT_EQUAL(tfc_model_metric(m, 1)->kind, TFC_METRIC_COUNTED);
        tfc_model_free(m);
        m = model_with("[{class_name: AUC, config: {curve: PR}, modul: x}]", 3, "sigmoid",
                       "binary_crossentropy", &err);
        CU_ASSERT_PTR_NULL(m);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "metrics[0].modul: unknown key 'modul' in a "
                                                "serialized metric"));
    }
    /* lower is better for the error counts only; by name too, for a run's summary */
    tfc_error err;
    tfc_model *m = model_with("[FalseNegatives, TruePositives, {FalsePositives: {}}]", 1,
                              "sigmoid", "binary_crossentropy", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT(tfc_metric_lower_is_better(tfc_model_metric(m, 0)));
    CU_ASSERT(!tfc_metric_lower_is_better(tfc_model_metric(m, 1)));
    CU_ASSERT(tfc_metric_lower_is_better(tfc_model_metric(m, 2)));
    CU_ASSERT(tfc_metric_name_lower_is_better("false_positives"));
    CU_ASSERT(!tfc_metric_name_lower_is_better("auc"));
    CU_ASSERT(!tfc_metric_name_lower_is_better("pearson_correlation"));
    CU_ASSERT(tfc_metric_known("MeanIoU") && tfc_metric_known("precision_at_recall"));
    tfc_model_free(m);
}

static void test_model_errors(void)
{
    static const struct {
        const char *metrics;
        int units;
        const char *act, *loss, *want1, *want2;
    } cases[] = {
        {"[Precision]", 4, "softmax", "sparse_categorical_crossentropy", "metrics[0]",
         "one-hot labels"},
        {"[accuracy, {OneHotMeanIoU: {num_classes: 4}}]", 4, "softmax",
         "sparse_categorical_crossentropy", "metrics[1]", "MeanIoU"},
        {"[F1Score]", 4, "softmax", "categorical_crossentropy", "F1Score needs average",
         "one value per class"},
        {"[{F1Score: {average: null}}]", 4, "softmax", "categorical_crossentropy",
         "average: null", "micro, macro or weighted"},
        {"[{F1Score: {average: macro}}]", 1, "sigmoid", "binary_crossentropy",
         "every row is then positive", "threshold: 0.5"},
        {"[MeanIoU]", 4, "softmax", "sparse_categorical_crossentropy", "needs num_classes",
         "{MeanIoU: {num_classes: ...}}"},
        {"[{MeanIoU: {num_classes: 4}}]", 4, "softmax", "sparse_categorical_crossentropy",
         "sparse_y_pred: false", "argmax"},
        {"[{IoU: {num_classes: 3, target_class_ids: [0, 3], sparse_y_pred: false}}]", 3,
         "softmax", "sparse_categorical_crossentropy", "target class id 3", "[0, 3)"},
        {"[AUC]", 1, "linear", "{type: binary_crossentropy, from_logits: true}",
         "holds logits", "from_logits: true"},
        {"[Precision]", 1, "linear", "{type: binary_crossentropy, from_logits: true}",
         "holds logits", "thresholds on the logits"},
        {"[{Precision: {thresholds: [0.3, 0.6]}}]", 1, "sigmoid", "binary_crossentropy",
         "2 thresholds", "give one threshold"},
        {"[{Precision: {top_k: 2, class_id: 5}}]", 4, "sigmoid", "binary_crossentropy",
         "class_id 5", "4 outputs"},
        {"[{Recall: {colour: red}}]", 1, "sigmoid", "binary_crossentropy", "colour",
         "metrics[0]"},
        {"[{AUC: {curve: DET}}]", 1, "sigmoid", "binary_crossentropy", "DET", "curve"},
        {"[{AUC: {num_labels: 3}}]", 3, "sigmoid", "binary_crossentropy", "num_labels",
         "multi_label"},
        {"[{AUC: {multi_label: true, label_weights: [1, 2]}}]", 3, "sigmoid",
         "binary_crossentropy", "2 label_weights", "3 outputs"},
        {"[{PrecisionAtRecall: {recall: 1.5}}]", 1, "sigmoid", "binary_crossentropy",
         "recall", "1.5"},
        {"[PrecisionAtRecall]", 1, "sigmoid", "binary_crossentropy", "needs recall", NULL},
        {"[precision, {Precision: {}}]", 1, "sigmoid", "binary_crossentropy",
         "a second metric named precision", "name:"},
        {"[{AUC: {dtype: float16}}]", 1, "sigmoid", "binary_crossentropy", "dtype",
         "float16"},
        {"[{AUC: {name: loss}}]", 1, "sigmoid", "binary_crossentropy", "a metric named loss",
         "another name"},
        {"[pearson_correlation]", 1, "linear", "mse", "one output a row", "R2Score"},
        {"[{ConcordanceCorrelation: {axis: 0}}]", 3, "linear", "mse", "axis", "-1"},
        {"[PearsonCorrelation]", 4, "softmax", "sparse_categorical_crossentropy",
         "metrics[0]", "one-hot labels"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        tfc_error err;
        tfc_model *m = model_with(cases[k].metrics, cases[k].units, cases[k].act,
                                  cases[k].loss, &err);
        CU_ASSERT_PTR_NULL(m);
        const int ok = !m && strstr(err.text, cases[k].want1) &&
                       (!cases[k].want2 || strstr(err.text, cases[k].want2));
        CU_ASSERT(ok);
        if (!ok) printf("\n  %s: %s", cases[k].metrics, m ? "(loaded)" : err.text);
        tfc_model_free(m);
    }
    /* what loads: the same metrics where they fit */
    tfc_error err;
    tfc_model *m = model_with("[{AUC: {from_logits: true}}, {Precision: {thresholds: 0.0}}]", 1,
                              "linear", "{type: binary_crossentropy, from_logits: true}", &err);
    CU_ASSERT_PTR_NOT_NULL(m);
    if (!m) printf("\n  %s", err.text);
    tfc_model_free(m);
}

/* A binary task: 6 features uniform in [-1, 1], the label whether a fixed linear map of
 * them is positive (float32 [n, 1]). */
static void write_binary(const char *xname, const char *yname, int n, unsigned seed)
{
    float *x = malloc(sizeof(float) * (size_t)n * 6), *y = malloc(sizeof(float) * (size_t)n);
    static const float w[6] = {0.9f, -0.6f, 0.4f, 0.0f, -0.8f, 0.3f};
    unsigned s = seed;
    for (int i = 0; i < n; i++) {
        float z = 0.1f;
        for (int j = 0; j < 6; j++) {
            s = s * 1103515245u + 12345u;
            x[i * 6 + j] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
            z += w[j] * x[i * 6 + j];
        }
        y[i] = z > 0;
    }
    tfc_error err;
    tfc_tensor tx = {TFC_F32, {.ndim = 2, .dim = {n, 6}}, x, -1};
    tfc_tensor ty = {TFC_F32, {.ndim = 2, .dim = {n, 1}}, y, -1};
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path(xname), &tx, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path(yname), &ty, &err), TFC_OK);
    free(x), free(y);
}

static const char binary_solver[] =
    "model:\n  name: bin\n  input: {shape: [6]}\n  layers:\n"
    "    - Dense: {units: 16, activation: relu}\n"
    "    - Dense: {units: 1, activation: sigmoid}\n"
    "  loss: binary_crossentropy\n"
    "  metrics: [accuracy, AUC, Precision, Recall, {AUC: {curve: PR, name: pr_auc}},\n"
    "            {F1Score: {average: micro, threshold: 0.5}}, FalseNegatives,\n"
    "            {BinaryIoU: {}}]\n"
    "data:\n  train:\n    source: {type: npy, features: bx.npy, labels: by.npy}\n"
    "    pipeline: [{shuffle: {buffer_size: 512}}, {repeat: {}}, {batch: {batch_size: 32}}]\n"
    "  test:\n    source: {type: npy, features: bvx.npy, labels: bvy.npy}\n"
    "    pipeline: [{batch: {batch_size: %d}}]\n"
    "optimizer: {type: adam, learning_rate: 0.01}\nmax_iter: %d\ntest_interval: %d\n"
    "display: 20\nsnapshot: {interval: %d}\nseed: 2\n";

static void test_batch_sizes(void)
{
    write_binary("bx.npy", "by.npy", 512, 7);
    write_binary("bvx.npy", "bvy.npy", 300, 8);
    tfc_train_result res[2];
    static const int batches[2] = {64, 23};
    for (int k = 0; k < 2; k++) {
        char yaml[2048];
        snprintf(yaml, sizeof yaml, binary_solver, batches[k], 120, 120, 0);
        tfc_error err;
        tfc_error_clear(&err);
        char out[32];
        snprintf(out, sizeof out, "bin%d", k);
        CU_ASSERT_EQUAL_FATAL(tfc_test_train_result(yaml, "bin.yaml", out, &res[k], &err),
                              TFC_OK);
    }
    /* metric 1 on: counted, the same bits over batches of 64 and of 23 */
    for (int i = 1; i < 8; i++) {
        CU_ASSERT_EQUAL(res[0].test.metric[i], res[1].test.metric[i]);
        if (res[0].test.metric[i] != res[1].test.metric[i])
            printf("\n  metric %d: %.17g against %.17g", i, res[0].test.metric[i],
                   res[1].test.metric[i]);
    }
    printf("\n  accuracy %.4f auc %.4f precision %.4f recall %.4f pr_auc %.4f f1 %.4f fn %.0f "
           "iou %.4f", res[0].test.metric[0], res[0].test.metric[1], res[0].test.metric[2],
           res[0].test.metric[3], res[0].test.metric[4], res[0].test.metric[5],
           res[0].test.metric[6], res[0].test.metric[7]);
    CU_ASSERT(res[0].test.metric[0] > 0.9 && res[0].test.metric[1] > 0.95);
    CU_ASSERT(res[0].test.metric[2] > 0.8 && res[0].test.metric[3] > 0.8);
    /* the false negatives are a count of the 300 test examples, and fit the recall */
    const double fn = res[0].test.metric[6];
    CU_ASSERT(fn == floor(fn) && fn >= 0 && fn < 60);
    /* F1 (micro, one output) is the harmonic mean of precision and recall, up to Keras's
     * epsilons */
    const double p = res[0].test.metric[2], r = res[0].test.metric[3];
    CU_ASSERT(fabs(res[0].test.metric[5] - 2 * p * r / (p + r)) < 1e-5);
}

/* The train row of log.csv at `iter`, without its last column (seconds). */
static void train_row(const char *dir, int iter, char *out, size_t size)
{
    char path[1024], want[32];
    snprintf(path, sizeof path, "%s/log.csv", dir);
    snprintf(want, sizeof want, "\n%d,train,", iter);
    char *log = tfc_test_read(path, NULL);
    char *row = log ? strstr(log, want) : NULL;
    out[0] = 0;
    if (row) {
        char *end = strchr(row + 1, '\n');
        if (end) *end = 0;
        char *last = strrchr(row, ',');
        if (last) *last = 0;
        snprintf(out, size, "%s", row + 1);
    }
    free(log);
}

static void test_resume(void)
{
    const char *bin = tfc_test_bin("tfc-train");
    if (!bin) return;
    write_binary("bx.npy", "by.npy", 512, 7);
    write_binary("bvx.npy", "bvy.npy", 300, 8);
    char yaml[2048];
    snprintf(yaml, sizeof yaml, binary_solver, 100, 60, 0, 1000);
    tfc_test_write("resume.yaml", yaml, -1);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s/tfc-train resume.yaml --threads 1 --quiet --out whole", bin);
    tfc_test_sh_expect(0, cmd, NULL, NULL);
    snprintf(cmd, sizeof cmd, "%s/tfc-train resume.yaml --threads 1 --quiet --out paused "
             "--stop-at 30 && %s/tfc-train resume.yaml --threads 1 --quiet --out paused "
             "--resume paused/snapshots/bin_iter_30.state", bin, bin);
    tfc_test_sh_expect(0, cmd, NULL, NULL);
    /* the rows after the pause at 30: 40 sums iterations 21 to 40 across it */
    for (int iter = 40; iter <= 60; iter += 20) {
        char a[1024], b[1024];
        train_row(tfc_test_path("whole"), iter, a, sizeof a);
        train_row(tfc_test_path("paused"), iter, b, sizeof b);
        CU_ASSERT(a[0] && !strcmp(a, b));
        if (strcmp(a, b)) printf("\n  whole:  %s\n  paused: %s", a, b);
    }
}

static void test_loss_functions(void)
{
    json_error_t jerr;
    json_t *root = json_load_file("tests/ref/metrics/loss_functions.json", 0, &jerr);
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    json_t *models = json_object_get(root, "models");
    CU_ASSERT_FATAL(json_array_size(models) >= 7);
    tfc_backend *be = tfc_cpu_backend_create(1);
    for (size_t k = 0; k < json_array_size(models); k++) {
        json_t *c = json_array_get(models, k);
        const char *yaml = json_string_value(json_object_get(c, "model"));
        const int sparse = !strcmp(json_string_value(json_object_get(c, "labels")), "sparse");
        tfc_error err;
        tfc_error_clear(&err);
        tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), "m.yaml", &err);
        if (!m) printf("\n  %s%s", yaml, err.text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        json_t *jx = json_object_get(c, "x");
        const int classes = (int)json_integer_value(json_object_get(c, "classes"));
        const int rows = (int)json_array_size(jx) / classes;
        float *x = array_of(jx, 0);
        void *t = array_of(json_object_get(c, "true"), sparse);
        tfc_batch_result r;
        CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, rows, &err), TFC_OK);
        CU_ASSERT_EQUAL(tfc_model_forward(m, x, rows, 0, 0, 0, &err), TFC_OK);
        CU_ASSERT_EQUAL(tfc_model_loss(m, t, 0, &r, &err), TFC_OK);
        json_t *names = json_object_get(c, "names"), *values = json_object_get(c, "values");
        CU_ASSERT_EQUAL(tfc_model_nmetrics(m), (int)json_array_size(names));
        for (int i = 0; i < tfc_model_nmetrics(m); i++) {
            const char *name = json_string_value(json_array_get(names, (size_t)i));
            const double want = json_number_value(json_array_get(values, (size_t)i));
            CU_ASSERT_STRING_EQUAL(tfc_model_metric(m, i)->name, name);
            const int ok = fabs(r.metric[i] - want) <= 2e-6 * fmax(1.0, fabs(want));
            CU_ASSERT(ok);
            if (!ok) printf("\n  %s: %.8f, Keras %.8f", name, r.metric[i], want);
        }
        free(x), free(t);
        tfc_model_free(m);
    }
    tfc_backend_free(be);
    json_decref(root);
    /* the labels a metric reads, and what the output holds */
    static const struct { const char *metrics, *act, *loss, *want; } bad[] = {
        {"[sparse_categorical_crossentropy]", "softmax", "categorical_crossentropy",
         "write categorical_crossentropy"},
        {"[categorical_crossentropy]", "softmax", "sparse_categorical_crossentropy",
         "or write sparse_categorical_crossentropy"},
        {"[msle]", "softmax", "sparse_categorical_crossentropy", "one_hot, depth: 4"},
        {"[binary_crossentropy]", "linear", "{type: binary_crossentropy, from_logits: true}",
         "{binary_crossentropy: {from_logits: true}}"},
        {"[{BinaryCrossentropy: {from_logits: true}}]", "sigmoid", "binary_crossentropy",
         "they are probabilities"},
        {"[{BinaryCrossentropy: {label_smoothing: 0.1}}]", "sigmoid", "binary_crossentropy",
         "label_smoothing"},
        {"[{R2Score: {class_aggregation: null}}]", "linear", "mse", "one value per output"},
        {"[R2Score]", "softmax", "sparse_categorical_crossentropy", "one class id per row"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        tfc_error err;
        tfc_model *m = model_with(bad[k].metrics, 4, bad[k].act, bad[k].loss, &err);
        CU_ASSERT_PTR_NULL(m);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, bad[k].want));
        if (m || !strstr(err.text, bad[k].want))
            printf("\n  %s: %s", bad[k].metrics, m ? "(loaded)" : err.text);
        tfc_model_free(m);
    }
    /* cosine similarity is better higher, the losses lower */
    tfc_error err;
    tfc_model *m = model_with("[cosine_similarity, msle]", 4, "linear", "mse", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT(!tfc_metric_lower_is_better(tfc_model_metric(m, 0)));
    CU_ASSERT(tfc_metric_lower_is_better(tfc_model_metric(m, 1)));
    CU_ASSERT(!tfc_metric_name_lower_is_better("cosine_similarity"));
    CU_ASSERT(tfc_metric_name_lower_is_better("msle"));
    tfc_model_free(m);
}

TFC_TEST_MAIN("metrics", {"keras_values", test_keras_values}, {"names", test_names},
              {"model_errors", test_model_errors}, {"batch_sizes", test_batch_sizes},
              {"resume", test_resume}, {"loss_functions", test_loss_functions})
