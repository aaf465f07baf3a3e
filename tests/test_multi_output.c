/* Models of several outputs (`outputs:`, Keras's Model(inputs, [y1, y2]), SPEC §1): Keras's
 * own models (tests/ref/keras_multi_output.py: heads off a trunk, outputs inside what
 * inference fuses or aliases, an output that a later layer reads, two inputs) import and
 * predict what Keras predicted, through the C API, tfc-predict and ONNX; the model file's
 * mistakes are errors naming them. */
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
        {"outputs: [a, b]\nloss: mse\n", "7:7: error: loss: the model has 2 outputs ('a', 'b')"},
        {"outputs: [a, b]\nmetrics: [mae]\n", "7:10: error: metrics: the model has 2 outputs"},
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
    /* without loss:, training refuses it at the last layer, naming what it can do */
    tfc_error e;
    tfc_error_clear(&e);
    snprintf(yaml, sizeof yaml, "%soutputs: [a, b]\n", head);
    tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), "m.yaml", &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(tfc_model_noutputs(m), 2);
    CU_ASSERT_STRING_EQUAL(tfc_model_output_name(m, 1), "b");
    CU_ASSERT_EQUAL(tfc_model_check_loss(m, &e), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.text, "layer 'b': is one of the model's 2 outputs"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.text, "tfc_predictor_run_outputs"));
    tfc_model_free(m);
}

TFC_TEST_MAIN("multi_output", {"predictor", test_predictor}, {"predict_tool", test_predict_tool},
              {"onnx", test_onnx}, {"errors", test_errors})
