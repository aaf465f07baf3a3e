/* Models of several outputs (`outputs:`, Keras's Model(inputs, [y1, y2]), SPEC §1): Keras's
 * own models (tests/ref/keras_multi_output.py: heads off a trunk, outputs inside what
 * inference fuses or aliases, an output that a later layer reads, two inputs) import and
 * predict what Keras predicted, through the C API, tfc-predict and ONNX; compiled with a loss
 * per output, loss_weights and metrics per output, they import with them, evaluate to
 * Keras's logs and train to Keras's train_on_batch weights; the gradients of weighted losses
 * on outputs that later layers read are checked numerically; the model file's and the
 * data's mistakes are errors naming them. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tfc.h"
#include "data/data.h"
#include "graph/model.h"
#include "gradcheck.h"
#include "kerassteps.h"
#include "testutil.h"

#define DIR "tests/ref/multi_output/"

/* Keras's cases: their inputs and outputs, in the model's order. */
static const struct {
    const char *name;
    int inputs, outputs;
    const char *in_names[2], *out_names[3];
} cases[] = {
    {"heads", 1, 2, {"x"}, {"main", "aux"}},
    {"cnn_heads", 1, 3, {"image"}, {"cls", "bn", "flat"}},
    {"two_tower", 2, 2, {"a", "c"}, {"joint", "final"}},
};
#define NCASES (int)(sizeof cases / sizeof *cases)

/* The largest |a - b| over n floats, relative to the largest |b|. */
static double rel_diff(const float *a, const float *b, int64_t n)
{
    double big = 0, worst = 0;
    for (int64_t i = 0; i < n; i++) big = fmax(big, fabs(b[i]));
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(a[i] - b[i]));
    return worst / fmax(big, 1e-30);
}

static void read_npy(const char *fmt, const char *name, int k, tfc_tensor *t)
{
    char path[256];
    snprintf(path, sizeof path, fmt, name, k);
    tfc_error e;
    tfc_error_clear(&e);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_read(path, t, &e), TFC_OK);
}

/* The C API reports every output's name and shape and runs Keras's models to each of
 * Keras's outputs, one example at a time to the same bits as the batch; the calls of one
 * output refuse them naming tfc_predictor_run_outputs, as do a wrong count and a NULL
 * buffer. */
static void test_predictor(void)
{
    for (int c = 0; c < NCASES; c++) {
        tfc_ks_import(DIR, cases[c].name);
        char model[512], weights[512], err[512] = "";
        snprintf(model, sizeof model, "%s/%s.yaml", tfc_test_tmpdir(), cases[c].name);
        snprintf(weights, sizeof weights, "%s/%s.safetensors", tfc_test_tmpdir(), cases[c].name);
        tfc_predictor *p = tfc_predictor_open(model, weights, "cpu", err, sizeof err);
        if (!p) printf("\n%s\n", err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        CU_ASSERT_EQUAL(tfc_predictor_inputs(p), cases[c].inputs);
        CU_ASSERT_EQUAL_FATAL(tfc_predictor_outputs(p), cases[c].outputs);
        tfc_tensor x[2], y[3];
        const void *xs[2];
        float *out[3], *one[3];
        int64_t per[3];
        for (int k = 0; k < cases[c].inputs; k++) {
            read_npy(DIR "%s.x%d.npy", cases[c].name, k, &x[k]);
            xs[k] = x[k].data;
        }
        const int64_t n = x[0].shape.dim[0];
        for (int k = 0; k < cases[c].outputs; k++) {
            read_npy(DIR "%s.y%d.npy", cases[c].name, k, &y[k]);
            int64_t dims[8];
            const char *dtype, *name;
            CU_ASSERT_EQUAL(tfc_predictor_output(p, k, dims, &dtype, &name), y[k].shape.ndim - 1);
            CU_ASSERT_STRING_EQUAL(name, cases[c].out_names[k]);
            CU_ASSERT_STRING_EQUAL(dtype, "float32");
            for (int d = 1; d < y[k].shape.ndim; d++)
                CU_ASSERT_EQUAL(dims[d - 1], y[k].shape.dim[d]);
            per[k] = tfc_shape_numel(&y[k].shape) / n;
            out[k] = calloc((size_t)(n * per[k]), 4);
            one[k] = calloc((size_t)(n * per[k]), 4);
        }
        /* tfc_predictor_shape's output is output 0 */
        int64_t dims[8];
        CU_ASSERT_EQUAL(tfc_predictor_shape(p, 1, dims, NULL), y[0].shape.ndim - 1);
        CU_ASSERT_EQUAL(dims[0], y[0].shape.dim[1]);
        CU_ASSERT_EQUAL(tfc_predictor_run_outputs(p, xs, cases[c].inputs, n, 0, out,
                                                  cases[c].outputs, err, sizeof err), 0);
        for (int k = 0; k < cases[c].outputs; k++) {
            double d = rel_diff(out[k], y[k].data, n * per[k]);
            if (d > 1e-5)
                printf("\n  %s.%s: %g from Keras\n", cases[c].name, cases[c].out_names[k], d);
            CU_ASSERT(d <= 1e-5);
        }
        for (int64_t i = 0; i < n; i++) {
            const void *xi[2];
            float *yi[3];
            for (int q = 0; q < cases[c].inputs; q++)
                xi[q] = (const char *)xs[q] + i * (tfc_shape_numel(&x[q].shape) / n) * 4;
            for (int k = 0; k < cases[c].outputs; k++) yi[k] = one[k] + i * per[k];
            CU_ASSERT_EQUAL(tfc_predictor_run_outputs(p, xi, cases[c].inputs, 1, 0, yi,
                                                      cases[c].outputs, err, sizeof err), 0);
        }
        for (int k = 0; k < cases[c].outputs; k++)
            CU_ASSERT(rel_diff(one[k], out[k], n * per[k]) <= 1e-6);
        /* the calls of one output, a wrong count, a NULL buffer */
        CU_ASSERT_EQUAL(tfc_predictor_run_inputs(p, xs, cases[c].inputs, n, 0, out[0], err,
                                                 sizeof err), -1);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "tfc_predictor_run_outputs"));
        if (cases[c].inputs == 1) {
            CU_ASSERT_EQUAL(tfc_predictor_run(p, xs[0], n, out[0], err, sizeof err), -1);
            CU_ASSERT_PTR_NOT_NULL(strstr(err, "tfc_predictor_run_outputs"));
        }
        CU_ASSERT_EQUAL(tfc_predictor_run_outputs(p, xs, cases[c].inputs, n, 0, out, 1, err,
                                                  sizeof err), -1);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "given 1 buffer"));
        float *keep = out[1];
        out[1] = NULL;
        CU_ASSERT_EQUAL(tfc_predictor_run_outputs(p, xs, cases[c].inputs, n, 0, out,
                                                  cases[c].outputs, err, sizeof err), -1);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, cases[c].out_names[1]));
        out[1] = keep;
        CU_ASSERT_EQUAL(tfc_predictor_output(p, cases[c].outputs, dims, NULL, NULL), -1);
        CU_ASSERT_EQUAL(tfc_predictor_output(p, -1, dims, NULL, NULL), -1);
        for (int k = 0; k < cases[c].outputs; k++) free(out[k]), free(one[k]), free(y[k].data);
        for (int q = 0; q < cases[c].inputs; q++) free(x[q].data);
        tfc_predictor_close(p);
    }
    /* a model of one output has one */
    CU_ASSERT_EQUAL(tfc_predictor_outputs(NULL), -1);
}

/* tfc-predict writes each output as Y.NAME.npy, Keras's predictions; images, text and the
 * map ops do not apply to a model of several outputs yet, and say so. */
static void test_predict_tool(void)
{
    const char *bin = tfc_test_bin("tfc-predict");
    if (!bin) return;
    char cwd[1024];
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
    for (int c = 0; c < NCASES; c++) {
        tfc_ks_import(DIR, cases[c].name);
        char cmd[4096], in[2048] = "";
        for (int k = 0, at = 0; k < cases[c].inputs; k++)
            at += snprintf(in + at, sizeof in - (size_t)at, " %s/" DIR "%s.x%d.npy", cwd,
                           cases[c].name, k);
        snprintf(cmd, sizeof cmd, "%s/tfc-predict %s/%s.yaml --weights %s/%s.safetensors "
                 "--input%s --output %s/%s_y.npy", bin, tfc_test_tmpdir(), cases[c].name,
                 tfc_test_tmpdir(), cases[c].name, in, tfc_test_tmpdir(), cases[c].name);
        tfc_test_sh_expect(0, cmd, NULL, NULL);
        for (int k = 0; k < cases[c].outputs; k++) {
            tfc_tensor y, got;
            tfc_error e;
            tfc_error_clear(&e);
            read_npy(DIR "%s.y%d.npy", cases[c].name, k, &y);
            char out[1024];
            snprintf(out, sizeof out, "%s/%s_y.%s.npy", tfc_test_tmpdir(), cases[c].name,
                     cases[c].out_names[k]);
            CU_ASSERT_EQUAL_FATAL(tfc_npy_read(out, &got, &e), TFC_OK);
            CU_ASSERT(tfc_shape_equal(&got.shape, &y.shape));
            CU_ASSERT(rel_diff(got.data, y.data, tfc_shape_numel(&y.shape)) <= 1e-5);
            free(got.data), free(y.data);
        }
    }
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s/tfc-predict %s/heads.yaml --weights %s/heads.safetensors "
             "--input %s/" DIR "heads.x0.npy --output %s/h.npy --map rescaling", bin,
             tfc_test_tmpdir(), tfc_test_tmpdir(), cwd, tfc_test_tmpdir());
    tfc_test_sh_expect(2, cmd, "a model of several outputs takes .npy arrays as they are", NULL);
    snprintf(cmd, sizeof cmd, "%s/tfc-predict %s/cnn_heads.yaml --weights "
             "%s/cnn_heads.safetensors --input a.png b.png", bin, tfc_test_tmpdir(),
             tfc_test_tmpdir());
    tfc_test_sh_expect(2, cmd, "a model of several outputs takes one .npy array", NULL);
}

/* tfc-export writes one ONNX graph output per model output, named as its layer, each of
 * which onnxruntime runs to Keras's predictions (within onnx_check.py's 1e-5); a model of
 * one input keeps the input "input". */
static void test_onnx(void)
{
    const char *bin = tfc_test_bin("tfc-export");
    if (!bin || !tfc_test_python_has("onnx, onnxruntime, numpy")) return;
    char cwd[1024];
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
    for (int c = 0; c < NCASES; c++) {
        tfc_ks_import(DIR, cases[c].name);
        char cmd[4096], feeds[2048] = "", want[2048] = "";
        for (int k = 0, at = 0; k < cases[c].inputs; k++)
            at += snprintf(feeds + at, sizeof feeds - (size_t)at, "%s%s%s%s/" DIR "%s.x%d.npy",
                           k ? "," : "", cases[c].inputs > 1 ? cases[c].in_names[k] : "",
                           cases[c].inputs > 1 ? "=" : "", cwd, cases[c].name, k);
        for (int k = 0, at = 0; k < cases[c].outputs; k++)
            at += snprintf(want + at, sizeof want - (size_t)at, "%s%s=%s/" DIR "%s.y%d.npy",
                           k ? "," : "", cases[c].out_names[k], cwd, cases[c].name, k);
        snprintf(cmd, sizeof cmd, "%s/tfc-export %s/%s.yaml --weights %s/%s.safetensors --onnx "
                 "%s/%s.onnx && python3 %s/tests/onnx_check.py %s/%s.onnx %s %s", bin,
                 tfc_test_tmpdir(), cases[c].name, tfc_test_tmpdir(), cases[c].name,
                 tfc_test_tmpdir(), cases[c].name, cwd, tfc_test_tmpdir(), cases[c].name, feeds,
                 want);
        tfc_test_sh_expect(0, cmd, ": ok", NULL);
    }
}

/* The model file's mistakes with outputs, each an error at its line. */
static void test_errors(void)
{
    static const char head[] = "layers:\n  - InputLayer: {name: x, shape: [3]}\n"
                               "  - Dense: {name: h, units: 4}\n"
                               "  - Dense: {name: a, units: 2}\n"
                               "  - Dense: {name: b, units: 2, inputs: h}\n";
    static const struct { const char *tail, *want; } errs[] = {
        {"outputs: [a, bb]\n",
         "6:14: error: outputs[1]: no layer is named 'bb'; did you mean 'b'?"},
        {"outputs: [a, x]\n", "no layer is named 'x' (a model input is not an output"},
        {"outputs: [b, a, b]\n", "6:17: error: outputs[2]: layer 'b' is already outputs[0]"},
        {"outputs: b\n", "4:5: error: layers[1].Dense: layer 'a': its output is read by no layer "
                         "and is not among the model's outputs"},
        {"outputs: {a: a}\n", "outputs: expected a layer name or a list of layer names"},
        {"outputs: []\n", "outputs: expected a layer name or a list of layer names"},
        {"outputs: [a, [b]]\n", "outputs[1]: expected a layer name"},
        {"", "layer 'a': its output is read by no layer"},
    };
    for (size_t i = 0; i < sizeof errs / sizeof *errs; i++) {
        char yaml[1024];
        snprintf(yaml, sizeof yaml, "%s%s", head, errs[i].tail);
        tfc_test_expect_model_error(yaml, errs[i].want);
    }
    /* at most TFC_MODEL_MAX_OUTPUTS */
    char yaml[4096];
    int at = snprintf(yaml, sizeof yaml, "layers:\n  - InputLayer: {name: x, shape: [3]}\n");
    for (int k = 0; k < 9; k++)
        at += snprintf(yaml + at, sizeof yaml - (size_t)at,
                       "  - Dense: {name: d%d, units: 2, inputs: x}\n", k);
    at += snprintf(yaml + at, sizeof yaml - (size_t)at,
                   "outputs: [d0, d1, d2, d3, d4, d5, d6, d7, d8]\n");
    tfc_test_expect_model_error(yaml, "outputs: a model gives at most 8 outputs, found 9");
    /* the reported names: each output's loss, then its metrics */
    tfc_error e;
    tfc_error_clear(&e);
    snprintf(yaml, sizeof yaml, "%soutputs: [b, a]\nloss: mse\nmetrics: {a: [mae], b: "
             "[{mse: {name: err}}]}\n", head);
    tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), "m.yaml", &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(tfc_model_noutputs(m), 2);
    CU_ASSERT_STRING_EQUAL(tfc_model_output_name(m, 1), "a");
    static const char *const names[] = {"b_loss", "a_loss", "b_err", "a_mae"};
    CU_ASSERT_EQUAL_FATAL(tfc_model_nmetrics(m), 4);
    for (int i = 0; i < 4; i++) CU_ASSERT_STRING_EQUAL(tfc_model_metric(m, i)->name, names[i]);
    tfc_model_free(m);
}

/* The labels of case c's output k as its loss takes them (int32 class ids, float32
 * targets). */
static void read_targets(int c, tfc_tensor *t)
{
    for (int k = 0; k < cases[c].outputs; k++) read_npy(DIR "%s.t%d.npy", cases[c].name, k, &t[k]);
}

/* tfc-import writes the compile arguments of Keras's compiled models (a loss each by name or
 * in a list, loss_weights, metrics per output), and the model evaluates the saved weights to
 * Keras's model.evaluate: the loss (the weighted sum), each output's loss and its metrics,
 * by the names Keras's logs give them. */
static void test_evaluate_keras(void)
{
    for (int c = 0; c < NCASES; c++) {
        char name[64], path[512];
        snprintf(name, sizeof name, "%s.compiled", cases[c].name);
        tfc_ks_import(DIR, name);
        snprintf(path, sizeof path, "%s/%s.yaml", tfc_test_tmpdir(), name);
        tfc_error e;
        tfc_error_clear(&e);
        tfc_model *m = tfc_model_load(path, &e);
        if (!m) printf("\n%s", e.text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        tfc_backend *be = tfc_cpu_backend_create(1);
        snprintf(path, sizeof path, "%s/%s.safetensors", tfc_test_tmpdir(), name);
        CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, 5, &e), TFC_OK);
        CU_ASSERT_EQUAL_FATAL(tfc_model_load_weights(m, path, NULL, &e), TFC_OK);
        tfc_tensor x[2], t[3];
        const void *xs[2], *ts[3];
        for (int k = 0; k < cases[c].inputs; k++) {
            read_npy(DIR "%s.x%d.npy", cases[c].name, k, &x[k]);
            xs[k] = x[k].data;
        }
        read_targets(c, t);
        for (int k = 0; k < cases[c].outputs; k++) ts[k] = t[k].data;
        tfc_batch_result br;
        CU_ASSERT_EQUAL_FATAL(tfc_model_forward_inputs(m, xs, 5, 0, 0, 0, &e), TFC_OK);
        if (tfc_model_loss_targets(m, ts, 0, &br, &e)) printf("\n%s", e.text);
        snprintf(path, sizeof path, DIR "%s.after.safetensors", cases[c].name);
        tfc_st_file *f = tfc_st_open(path, &e);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        json_error_t je;
        json_t *logs = json_loads(tfc_st_meta(f, "evaluate"), 0, &je);
        CU_ASSERT_PTR_NOT_NULL_FATAL(logs);
        /* every value Keras logs, by its name: the loss, then tfc's metrics */
        CU_ASSERT_EQUAL(json_object_size(logs), 1 + (size_t)tfc_model_nmetrics(m));
        double want = json_real_value(json_object_get(logs, "loss"));
        if (fabs(br.loss - want) > 1e-5 * fmax(1, fabs(want)))
            printf("\n  %s loss %.7g, Keras %.7g\n", cases[c].name, br.loss, want);
        CU_ASSERT(fabs(br.loss - want) <= 1e-5 * fmax(1, fabs(want)));
        for (int i = 0; i < tfc_model_nmetrics(m); i++) {
            const char *mn = tfc_model_metric(m, i)->name;
            json_t *v = json_object_get(logs, mn);
            if (!v) printf("\n  %s: Keras logs no %s\n", cases[c].name, mn);
            CU_ASSERT_PTR_NOT_NULL_FATAL(v);
            want = json_real_value(v);
            if (fabs(br.metric[i] - want) > 1e-5 * fmax(1, fabs(want)))
                printf("\n  %s %s %.7g, Keras %.7g\n", cases[c].name, mn, br.metric[i], want);
            CU_ASSERT(fabs(br.metric[i] - want) <= 1e-5 * fmax(1, fabs(want)));
        }
        CU_ASSERT_STRING_EQUAL(tfc_model_metric(m, 0)->name,
                               c == 1 ? "cls_loss" : c == 0 ? "main_loss" : "joint_loss");
        json_decref(logs);
        tfc_st_close(f);
        for (int k = 0; k < cases[c].inputs; k++) free(x[k].data);
        for (int k = 0; k < cases[c].outputs; k++) free(t[k].data);
        tfc_model_free(m);
        tfc_backend_free(be);
    }
}

/* The solver training case c from its npy inputs and named labels (the dict Keras's fit
 * takes), SGD at the fixture's lr for its steps, a batch of the fixture's 5 examples. */
static const char *train_solver(int c, const tfc_st_file *f, const char *extra)
{
    static char text[4096];
    char cwd[1024], feats[1024] = "", labels[1024] = "";
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
    if (cases[c].inputs == 1)
        snprintf(feats, sizeof feats, "%s/" DIR "%s.x0.npy", cwd, cases[c].name);
    else
        for (int k = 0, at = 0; k < cases[c].inputs; k++)
            at += snprintf(feats + at, sizeof feats - (size_t)at, "%s%s%s: %s/" DIR "%s.x%d.npy%s",
                           k ? ", " : "{", cases[c].in_names[k], "", cwd, cases[c].name, k,
                           k == cases[c].inputs - 1 ? "}" : "");
    for (int k = cases[c].outputs - 1, at = 0; k >= 0; k--) /* by name, in another order */
        at += snprintf(labels + at, sizeof labels - (size_t)at, "%s%s: %s/" DIR "%s.t%d.npy%s",
                       k == cases[c].outputs - 1 ? "{" : ", ", cases[c].out_names[k], cwd,
                       cases[c].name, k, k ? "" : "}");
    snprintf(text, sizeof text,
             "model: %s/%s.compiled.yaml\n"
             "data:\n  train:\n    source: {type: npy, features: %s, labels: %s}\n"
             "    pipeline: [repeat, {batch: 5}]\n"
             "optimizer: {type: sgd, learning_rate: %s}\nlr_policy: fixed\nmax_iter: %s\n"
             "test_interval: 0\ndisplay: 0\nseed: 3\n%s",
             tfc_test_tmpdir(), cases[c].name, feats, labels, tfc_st_meta(f, "lr"),
             tfc_st_meta(f, "steps"), extra ? extra : "");
    return text;
}

/* tfc-train trains Keras's compiled models of several outputs from named labels as Keras's
 * train_on_batch does from the same weights: every weight after 3 SGD steps within 1e-5 of
 * Keras's, through weighted losses on outputs that later layers read (the BatchNormalization
 * and Flatten of cnn_heads, two_tower's joint) and a sigmoid folded into its binary
 * cross-entropy; the step's host path gives the device-side one's bits, and a run stopped and
 * resumed from its snapshot ends with the same bits. */
static void test_train_keras(void)
{
    for (int c = 0; c < NCASES; c++) {
        char name[64], path[256], weights[1024], run[64];
        snprintf(name, sizeof name, "%s.compiled", cases[c].name);
        tfc_ks_import(DIR, name);
        snprintf(path, sizeof path, DIR "%s.after.safetensors", cases[c].name);
        snprintf(weights, sizeof weights, "%s/%s.safetensors", tfc_test_tmpdir(), name);
        snprintf(run, sizeof run, "mo_%s", cases[c].name);
        tfc_error err;
        tfc_error_clear(&err);
        tfc_st_file *f = tfc_st_open(path, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        const char *solver = train_solver(c, f, NULL);
        if (tfc_ks_train("mo_solver.yaml", solver, weights, run, 1, NULL, 0, 0, &err))
            printf("\n%s", err.text);
        int compared = 0;
        double worst = tfc_ks_worst(f, run, &compared);
        printf("\n  %-10s %d weights after %s steps within %.2g of Keras's", cases[c].name,
               compared, tfc_st_meta(f, "steps"), worst);
        CU_ASSERT(worst <= 1e-5);
        CU_ASSERT_EQUAL(compared, tfc_st_count(f));
        if (c == 1) { /* the step's host path: the same bits as the device-side one */
            tfc_error_clear(&err);
            CU_ASSERT_EQUAL(tfc_ks_train("mo_solver.yaml", solver, weights, "mo_host", 1, NULL, 0,
                                         1, &err), TFC_OK);
            int64_t na = 0, nb = 0;
            float *a = tfc_ks_final_weights(run, &na), *b = tfc_ks_final_weights("mo_host", &nb);
            CU_ASSERT_FATAL(a && b && na == nb);
            CU_ASSERT(!memcmp(a, b, (size_t)na * 4));
            free(a), free(b);
        }
        if (c == 2) /* resumed from iteration 2 */
            tfc_ks_expect_resume_exact("mo_resume.yaml",
                                       train_solver(c, f, "snapshot: {interval: 2, keep: 0}\n"),
                                       "mo_resume", "functional", 2);
        tfc_st_close(f);
    }
}

/* A model of three outputs written by hand (an output that two later layers read, a
 * softmax head, a sigmoid folded into its loss), weighted 1, 0.5 and 0.25 with label
 * smoothing on one: every weight's and the input's gradient against central differences. */
static void test_gradients(void)
{
    tfc_model *m = tfc_test_model(
        "layers:\n  - InputLayer: {name: x, shape: [6]}\n"
        "  - Dense: {name: h, units: 5, activation: tanh}\n"
        "  - Dense: {name: aux, units: 3, activation: softmax}\n"
        "  - Dense: {name: j, units: 4, inputs: h}\n"
        "  - Dense: {name: g, units: 3, activation: tanh}\n"
        "  - Concatenate: {inputs: [g, j]}\n"
        "  - Dense: {name: final, units: 2, activation: sigmoid}\n"
        "outputs: [final, j, aux]\n"
        "loss: {final: binary_crossentropy, j: mse, aux: {type: "
        "sparse_categorical_crossentropy, label_smoothing: 0.1}}\n"
        "loss_weights: [1, 0.5, 0.25]\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    enum { B = 4 };
    float x[B * 6], yf[B * 2], yj[B * 4];
    int32_t ya[B] = {0, 2, 1, 2};
    tfc_test_fill(x, B * 6, -1, 1, 3);
    tfc_test_fill(yj, B * 4, -1, 1, 4);
    for (int i = 0; i < B * 2; i++) yf[i] = (float)(i % 3 == 0);
    const void *xs[1] = {x}, *ys[3] = {yf, yj, ya};
    gradcheck_result r = tfc_gradcheck_targets(m, B, xs, ys, 64, 5, 1.0);
    if (r.max_err > TFC_GRADCHECK_BOUND) printf("\n  %g at %s\n", r.max_err, r.worst);
    CU_ASSERT(r.max_err <= TFC_GRADCHECK_BOUND);
    CU_ASSERT(r.checked > 50);
    tfc_model_free(m);
}

/* Training a model of several outputs: the data's mistakes name the outputs and the labels;
 * the model file's loss, loss_weights and metrics per output, errors at their lines. */
static void test_train_errors(void)
{
    static const char head[] = "layers:\n  - InputLayer: {name: x, shape: [3]}\n"
                               "  - Dense: {name: h, units: 4}\n"
                               "  - Dense: {name: a, units: 2}\n"
                               "  - Dense: {name: b, units: 3, inputs: h}\n"
                               "outputs: [a, b]\n";
    static const struct { const char *tail, *want; } errs[] = {
        {"loss: {a: mse, c: mse}\n", "loss.c: 'c' is not one of the model's outputs (a, b)"},
        {"loss: {a: mse}\n", "loss: output 'b' has no loss"},
        {"loss: [mse]\n", "loss: a list of 1, and the model has 2 outputs (a, b)"},
        {"loss: [mse, msee]\n", "loss"},
        {"loss: mse\nloss_weights: 0.5\n", "loss_weights: expected one weight per output"},
        {"loss: mse\nloss_weights: {a: -1}\n", "loss_weights.a: expected a finite weight >= 0"},
        {"loss: mse\nloss_weights: {b: 1, aa: 2}\n", "did you mean 'a'?"},
        {"loss: mse\nmetrics: [mae]\n", "metrics: the model has 2 outputs: give each its list"},
        {"loss: mse\nmetrics: {a: [mae], b: [mae, mae]}\n",
         "metrics.b[1]: a second metric named b_mae"},
        {"loss: {a: mse, b: sparse_categorical_crossentropy}\nmetrics: {b: [mae]}\n",
         "metrics.b[0]: b_mae compares the outputs with float targets"},
        {"loss: mse\nmetrics: {a: [mae, mse, accuracy, mape], b: [mae, mse, accuracy]}\n",
         "at most 8 metrics (with the outputs' losses"},
    };
    for (size_t i = 0; i < sizeof errs / sizeof *errs; i++) {
        char yaml[1024];
        snprintf(yaml, sizeof yaml, "%s%s", head, errs[i].tail);
        tfc_test_expect_model_error(yaml, errs[i].want);
    }
    /* one output: loss_weights is refused, naming what it is for */
    tfc_test_expect_model_error("layers:\n  - InputLayer: {shape: [3]}\n  - Dense: 2\n"
                                "loss: mse\nloss_weights: [2]\n",
                                "loss_weights: weighs the losses of a model of several outputs");
    /* the data: labels by output name */
    tfc_tensor t = {.dtype = TFC_F32, .shape = {2, {8, 3}}};
    float v[8 * 3];
    tfc_test_fill(v, 8 * 3, 0, 1, 9);
    t.data = v;
    tfc_error e;
    tfc_error_clear(&e);
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("mo_x.npy"), &t, &e), TFC_OK);
    t.shape.dim[1] = 2;
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("mo_a.npy"), &t, &e), TFC_OK);
    t.shape.dim[1] = 3;
    v[4 * 3 + 1] = NAN;
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("mo_b.npy"), &t, &e), TFC_OK);
    static const struct { const char *labels, *want; } data[] = {
        {"mo_a.npy", "yields one label array; model 'm' gives 2 outputs (a, b): give the "
                     "source one label array per output by name"},
        {"{a: mo_a.npy, c: mo_b.npy}", "yields the labels a, c, none named 'b'"},
        {"{a: mo_a.npy, b: mo_b.npy, c: mo_b.npy}", "yields a label 'c' that no output"},
        {"{a: mo_b.npy, b: mo_a.npy}", "yields labels 'a' float32 (-1, 3) (3 values per "
                                       "example), but the model's output and loss mse need 2"},
        {"{a: mo_a.npy, b: mo_b.npy}", "data.train: labels 'b': "},
    };
    for (size_t i = 0; i < sizeof data / sizeof *data; i++) {
        char solver[2048];
        snprintf(solver, sizeof solver, "model:\n  name: m\n  layers:\n"
                 "    - InputLayer: {name: x, shape: [3]}\n"
                 "    - Dense: {name: h, units: 4}\n    - Dense: {name: a, units: 2}\n"
                 "    - Dense: {name: b, units: 3, inputs: h}\n  outputs: [a, b]\n"
                 "  loss: mse\n"
                 "data:\n  train:\n    source: {type: npy, features: mo_x.npy, labels: %s}\n"
                 "    pipeline: [{batch: 8}]\noptimizer: sgd\nmax_iter: 2\n", data[i].labels);
        tfc_error_clear(&e);
        CU_ASSERT_NOT_EQUAL(tfc_test_train(solver, "mo_solver.yaml", "mo_err_run", &e), TFC_OK);
        if (!strstr(e.text, data[i].want)) printf("\n  want '%s' in:\n%s", data[i].want, e.text);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.text, data[i].want));
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(e.text, "mo_b.npy record 4: label value nan is not finite"));
    /* a model of one output refuses a split of several labels */
    tfc_error_clear(&e);
    CU_ASSERT_NOT_EQUAL(tfc_test_train("model:\n  layers:\n    - InputLayer: {shape: [3]}\n"
                                       "    - Dense: {units: 2}\n  loss: mse\n"
                                       "data:\n  train:\n    source: {type: npy, features: "
                                       "mo_x.npy, labels: {a: mo_a.npy, b: mo_b.npy}}\n"
                                       "    pipeline: [{batch: 8}]\noptimizer: sgd\n"
                                       "max_iter: 2\n", "mo_one.yaml", "mo_one_run", &e),
                        TFC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.text, "yields 2 labels (a, b); this model gives one output"));
}

/* End to end: a model of two outputs learns both of its tasks at once from named labels
 * (a class of four, the argmax of a linear map of 16 features, and a regression on the
 * first four features' sum): test accuracy at least 0.9 and mean absolute error under
 * 0.15 (labels spread over about [-3, 3]); tfc-test reports every output's loss and metric
 * under its Keras name, in its text and in --json. */
static void test_learns(void)
{
    const char *bin = tfc_test_bin("tfc-test");
    if (!bin) return;
    enum { N = 512 };
    tfc_test_write_split("ml_x.npy", "ml_y.npy", N, 13);
    tfc_tensor x;
    tfc_error e;
    tfc_error_clear(&e);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_read(tfc_test_path("ml_x.npy"), &x, &e), TFC_OK);
    float *r = malloc(N * 4);
    for (int i = 0; i < N; i++) {
        const float *xi = (const float *)x.data + i * 16;
        r[i] = 1.5f * (xi[0] + xi[1] + xi[2] + xi[3]);
    }
    tfc_tensor rt = {.dtype = TFC_F32, .shape = {2, {N, 1}}, .data = r};
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("ml_r.npy"), &rt, &e), TFC_OK);
    free(r), free(x.data);
    const char *solver =
        "model:\n  name: tasks\n  layers:\n"
        "    - InputLayer: {name: x, shape: [16]}\n"
        "    - Dense: {name: trunk, units: 32, activation: relu}\n"
        "    - Dense: {name: cls, units: 4, activation: softmax}\n"
        "    - Dense: {name: reg, units: 1, inputs: trunk}\n"
        "  outputs: [cls, reg]\n"
        "  loss: {cls: sparse_categorical_crossentropy, reg: mse}\n"
        "  loss_weights: [1, 0.5]\n"
        "  metrics: {cls: [accuracy], reg: [mae]}\n"
        "data:\n  train:\n    source: {type: npy, features: ml_x.npy, labels: {cls: ml_y.npy, "
        "reg: ml_r.npy}}\n    pipeline: [{shuffle: 512}, repeat, {batch: 32}]\n"
        "  test:\n    source: {type: npy, features: ml_x.npy, labels: {reg: ml_r.npy, "
        "cls: ml_y.npy}}\n    pipeline: [{batch: 128}]\n"
        "optimizer: {type: adam, learning_rate: 0.01}\nmax_iter: 600\ntest_interval: 600\n"
        "display: 0\nseed: 5\n";
    tfc_train_result res;
    CU_ASSERT_EQUAL_FATAL(tfc_test_train_result(solver, "ml_solver.yaml", "ml_run", &res, &e),
                          TFC_OK);
    CU_ASSERT_FATAL(res.have_test);
    /* cls_loss, reg_loss, cls_accuracy, reg_mae */
    printf("\n  test cls_accuracy %.4f, reg_mae %.4f", res.test.metric[2], res.test.metric[3]);
    CU_ASSERT(res.test.metric[2] >= 0.9);
    CU_ASSERT(res.test.metric[3] < 0.15);
    CU_ASSERT_DOUBLE_EQUAL(res.test.loss, res.test.metric[0] + 0.5 * res.test.metric[1], 1e-5);
    char cmd[4096], want[128];
    snprintf(cmd, sizeof cmd, "cd %s && %s/tfc-test ml_solver.yaml --weights %s/final.safetensors",
             tfc_test_tmpdir(), bin, res.run_dir);
    snprintf(want, sizeof want, "cls_accuracy %.4f  reg_mae %.4f", res.test.metric[2],
             res.test.metric[3]);
    tfc_test_sh_expect(0, cmd, want, "reg_loss");
    snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), " --json");
    tfc_test_sh_expect(0, cmd, "\"reg_mae\":", "\"cls_loss\":");
}

TFC_TEST_MAIN("multi_output", {"predictor", test_predictor}, {"predict_tool", test_predict_tool},
              {"onnx", test_onnx}, {"errors", test_errors},
              {"evaluate_keras", test_evaluate_keras}, {"train_keras", test_train_keras},
              {"gradients", test_gradients}, {"train_errors", test_train_errors},
              {"learns", test_learns})
