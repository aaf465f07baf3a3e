/* Models of several inputs (a functional model's InputLayers, SPEC §1): Keras's own
 * two- and three-input models (tests/ref/keras_multi_input.py) import and predict what Keras
 * predicted, through the C API and tfc-predict; the gradients reach every input and every
 * weight (numerically checked); the model file's mistakes are errors at their line; and
 * what is not in tfc yet (training such a model, a second input of variable length, masks
 * from two inputs) is refused naming it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tfc.h"
#include "data/data.h"
#include "gradcheck.h"
#include "testutil.h"

#define DIR "tests/ref/multi_input/"

/* Imports CASE.keras into the test folder as CASE.yaml and CASE.safetensors. */
static void import_case(const char *name)
{
    char src[256], model[512], out[512];
    snprintf(src, sizeof src, DIR "%s.keras", name);
    snprintf(model, sizeof model, "%s/%s.yaml", tfc_test_tmpdir(), name);
    snprintf(out, sizeof out, "%s/%s.safetensors", tfc_test_tmpdir(), name);
    tfc_import_report rep;
    tfc_error err;
    tfc_error_clear(&err);
    tfc_status st = tfc_keras_import(src, NULL, NULL, model, out, &rep, &err);
    if (st) printf("\n%s", err.text);
    CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
}

/* The largest |a - b| over n floats, relative to the largest |b|. */
static double rel_diff(const float *a, const float *b, int64_t n)
{
    double big = 0, worst = 0;
    for (int64_t i = 0; i < n; i++) big = fmax(big, fabs(b[i]));
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(a[i] - b[i]));
    return worst / fmax(big, 1e-30);
}

/* The C API runs Keras's models of two and three inputs (one a mask's token ids, one in
 * another order than its InputLayer was made) to Keras's predictions; the calls of one
 * input refuse them. */
static void test_predictor(void)
{
    static const struct { const char *name; int inputs; const char *names[3]; } cases[] = {
        {"wide_deep", 2, {"title", "stats"}}, {"pair", 3, {"b", "a", "c"}}};
    for (int c = 0; c < 2; c++) {
        import_case(cases[c].name);
        char model[512], weights[512], path[256], err[512] = "";
        snprintf(model, sizeof model, "%s/%s.yaml", tfc_test_tmpdir(), cases[c].name);
        snprintf(weights, sizeof weights, "%s/%s.safetensors", tfc_test_tmpdir(), cases[c].name);
        tfc_predictor *p = tfc_predictor_open(model, weights, "cpu", err, sizeof err);
        if (!p) printf("\n%s\n", err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        CU_ASSERT_EQUAL(tfc_predictor_inputs(p), cases[c].inputs);
        tfc_tensor x[3], y;
        tfc_error e;
        tfc_error_clear(&e);
        const void *xs[3];
        for (int k = 0; k < cases[c].inputs; k++) {
            snprintf(path, sizeof path, DIR "%s.x%d.npy", cases[c].name, k);
            CU_ASSERT_EQUAL_FATAL(tfc_npy_read(path, &x[k], &e), TFC_OK);
            xs[k] = x[k].data;
            int64_t dims[8];
            const char *dtype, *name;
            CU_ASSERT_EQUAL(tfc_predictor_input(p, k, dims, &dtype, &name), x[k].shape.ndim - 1);
            CU_ASSERT_STRING_EQUAL(name, cases[c].names[k]);
            CU_ASSERT_STRING_EQUAL(dtype, x[k].dtype == TFC_I32 ? "int32" : "float32");
            for (int d = 1; d < x[k].shape.ndim; d++)
                CU_ASSERT_EQUAL(dims[d - 1], x[k].shape.dim[d]);
        }
        snprintf(path, sizeof path, DIR "%s.y.npy", cases[c].name);
        CU_ASSERT_EQUAL_FATAL(tfc_npy_read(path, &y, &e), TFC_OK);
        const int64_t n = x[0].shape.dim[0], k = tfc_shape_numel(&y.shape);
        float *out = calloc((size_t)k, 4);
        CU_ASSERT_EQUAL(tfc_predictor_run_inputs(p, xs, cases[c].inputs, n, 0, out, err,
                                                 sizeof err), 0);
        double d = rel_diff(out, y.data, k);
        if (d > 1e-5) printf("\n  %s: %g from Keras\n", cases[c].name, d);
        CU_ASSERT(d <= 1e-5);
        /* one example at a time: the same bits as the whole batch */
        float *one = calloc((size_t)k, 4);
        for (int64_t i = 0; i < n; i++) {
            const void *xi[3];
            for (int q = 0; q < cases[c].inputs; q++)
                xi[q] = (const char *)xs[q] + i * (tfc_shape_numel(&x[q].shape) / n) * 4;
            CU_ASSERT_EQUAL(tfc_predictor_run_inputs(p, xi, cases[c].inputs, 1, 0,
                                                     one + i * (k / n), err, sizeof err), 0);
        }
        CU_ASSERT(rel_diff(one, out, k) <= 1e-6);
        /* the calls of one input, and a wrong count, say what to call */
        CU_ASSERT_EQUAL(tfc_predictor_run(p, xs[0], n, out, err, sizeof err), -1);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "tfc_predictor_run_inputs"));
        CU_ASSERT_EQUAL(tfc_predictor_run_inputs(p, xs, 1, n, 0, out, err, sizeof err), -1);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "given 1"));
        xs[1] = NULL;
        CU_ASSERT_EQUAL(tfc_predictor_run_inputs(p, xs, cases[c].inputs, n, 0, out, err,
                                                 sizeof err), -1);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, cases[c].names[1]));
        CU_ASSERT_EQUAL(tfc_predictor_input(p, cases[c].inputs, (int64_t[8]){0}, NULL, NULL), -1);
        free(out);
        free(one);
        for (int q = 0; q < cases[c].inputs; q++) free(x[q].data);
        free(y.data);
        tfc_predictor_close(p);
    }
}

/* tfc-predict takes one .npy array per input, by name (any order) or in the inputs' order,
 * and writes Keras's predictions; a wrong count, an unknown or repeated name and arrays of
 * different lengths are errors naming them. */
static void test_predict_tool(void)
{
    const char *bin = tfc_test_bin("tfc-predict");
    if (!bin) return;
    import_case("wide_deep");
    char cmd[4096], cwd[1024], m[1024];
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
    snprintf(m, sizeof m, "%s/tfc-predict %s/wide_deep.yaml --weights %s/wide_deep.safetensors",
             bin, tfc_test_tmpdir(), tfc_test_tmpdir());
    const char *forms[2] = {"stats=%s/" DIR "wide_deep.x1.npy title=%s/" DIR "wide_deep.x0.npy",
                            "%s/" DIR "wide_deep.x0.npy %s/" DIR "wide_deep.x1.npy"};
    tfc_tensor y;
    tfc_error e;
    tfc_error_clear(&e);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_read(DIR "wide_deep.y.npy", &y, &e), TFC_OK);
    for (int f = 0; f < 2; f++) {
        char in[2048];
        snprintf(in, sizeof in, forms[f], cwd, cwd);
        snprintf(cmd, sizeof cmd, "%s --input %s --output %s/wd_y%d.npy", m, in,
                 tfc_test_tmpdir(), f);
        tfc_test_sh_expect(0, cmd, NULL, NULL);
        char out[1024];
        snprintf(out, sizeof out, "%s/wd_y%d.npy", tfc_test_tmpdir(), f);
        tfc_tensor got;
        CU_ASSERT_EQUAL_FATAL(tfc_npy_read(out, &got, &e), TFC_OK);
        CU_ASSERT(tfc_shape_equal(&got.shape, &y.shape));
        CU_ASSERT(rel_diff(got.data, y.data, tfc_shape_numel(&y.shape)) <= 1e-5);
        free(got.data);
    }
    free(y.data);
    snprintf(cmd, sizeof cmd, "%s --input %s/" DIR "wide_deep.x0.npy --output %s/no.npy", m, cwd,
             tfc_test_tmpdir());
    tfc_test_sh_expect(2, cmd, "the model takes 2 inputs (title, stats)", "(1 given)");
    snprintf(cmd, sizeof cmd, "%s --input titel=%s/" DIR "wide_deep.x0.npy stats=%s/" DIR
             "wide_deep.x1.npy --output %s/no.npy", m, cwd, cwd, tfc_test_tmpdir());
    tfc_test_sh_expect(2, cmd, "the model has no input 'titel'", NULL);
    snprintf(cmd, sizeof cmd, "%s --input stats=%s/" DIR "wide_deep.x1.npy stats=%s/" DIR
             "wide_deep.x1.npy --output %s/no.npy", m, cwd, cwd, tfc_test_tmpdir());
    tfc_test_sh_expect(2, cmd, "input 'stats' is given twice", NULL);
    /* 5 examples of one input, 2 of the other */
    float two[6] = {1, 2, 3, 4, 5, 6};
    tfc_tensor t = {.dtype = TFC_F32, .shape = {2, {2, 3}}, .data = two};
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("wd_two.npy"), &t, &e), TFC_OK);
    snprintf(cmd, sizeof cmd, "%s --input %s/" DIR "wide_deep.x0.npy %s --output %s/no.npy", m,
             cwd, tfc_test_path("wd_two.npy"), tfc_test_tmpdir());
    tfc_test_sh_expect(1, cmd, "wd_two.npy: 2 examples", "every input needs as many");
    /* an array of another shape names the input and its shape */
    snprintf(cmd, sizeof cmd, "%s --input stats=%s/" DIR "wide_deep.x0.npy title=%s/" DIR
             "wide_deep.x1.npy --output %s/no.npy", m, cwd, cwd, tfc_test_tmpdir());
    tfc_test_sh_expect(1, cmd, "does not hold examples of input 'title''s shape (6,)", NULL);
}

/* tfc-export writes Keras's models of several inputs as ONNX graphs of as many inputs, named
 * as the model's, which onnxruntime runs to Keras's predictions (within onnx_check.py's
 * 1e-5). */
static void test_onnx(void)
{
    const char *bin = tfc_test_bin("tfc-export");
    if (!bin || !tfc_test_python_has("onnx, onnxruntime, numpy")) return;
    static const struct { const char *name, *inputs[3]; } cases[] = {
        {"wide_deep", {"title", "stats", NULL}}, {"pair", {"b", "a", "c"}}};
    char cwd[1024];
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
    for (int c = 0; c < 2; c++) {
        import_case(cases[c].name);
        char cmd[4096], feeds[2048] = "";
        for (int k = 0, at = 0; k < 3 && cases[c].inputs[k]; k++)
            at += snprintf(feeds + at, sizeof feeds - (size_t)at, "%s%s=%s/" DIR "%s.x%d.npy",
                           k ? "," : "", cases[c].inputs[k], cwd, cases[c].name, k);
        snprintf(cmd, sizeof cmd, "%s/tfc-export %s/%s.yaml --weights %s/%s.safetensors --onnx "
                 "%s/%s.onnx && python3 %s/tests/onnx_check.py %s/%s.onnx %s %s/" DIR "%s.y.npy",
                 bin, tfc_test_tmpdir(), cases[c].name, tfc_test_tmpdir(), cases[c].name,
                 tfc_test_tmpdir(), cases[c].name, cwd, tfc_test_tmpdir(), cases[c].name, feeds,
                 cwd, cases[c].name);
        tfc_test_sh_expect(0, cmd, ": ok", NULL);
    }
}

/* A model of three inputs (two float, one read twice) written by hand: the gradients of
 * every weight and of both float inputs against central differences. */
static void test_gradients(void)
{
    tfc_model *m = tfc_test_model(
        "layers:\n"
        "  - InputLayer: {name: a, shape: [3]}\n"
        "  - InputLayer: {name: b, shape: [2, 4]}\n"
        "  - InputLayer: {name: c, shape: [4]}\n"
        "  - Dense: {units: 4, activation: tanh, inputs: a}\n"
        "  - Flatten: {inputs: b}\n"
        "  - Dense: {units: 4}\n"
        "  - Multiply: {inputs: [dense, c]}\n"
        "  - Add: {inputs: [dense_1, multiply, c]}\n"
        "  - Concatenate: {inputs: [add, a]}\n"
        "  - Dense: {units: 3}\n"
        "loss: sparse_categorical_crossentropy\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(tfc_model_ninputs(m), 3);
    CU_ASSERT_STRING_EQUAL(tfc_model_input_name(m, 1), "b");
    enum { B = 3 };
    float a[B * 3], b[B * 8], c[B * 4];
    tfc_test_fill(a, B * 3, -1, 1, 1);
    tfc_test_fill(b, B * 8, -1, 1, 2);
    tfc_test_fill(c, B * 4, -1, 1, 3);
    int32_t labels[B] = {0, 2, 1};
    const void *xs[3] = {a, b, c};
    gradcheck_result r = tfc_gradcheck_inputs(m, B, xs, labels, 64, 5, 1.0);
    if (r.max_err > TFC_GRADCHECK_BOUND) printf("\n  %s\n", r.worst);
    CU_ASSERT(r.max_err <= TFC_GRADCHECK_BOUND);
    CU_ASSERT(r.checked >= 3 * 4 + 4 + 8 * 4 + 4 + 7 * 3 + 3 + B * 3 + B * 8 + B * 4);
    CU_ASSERT_EQUAL(r.null_dx_diff, 0);
    /* the staging of one input refuses the model, naming its inputs */
    tfc_error err;
    tfc_error_clear(&err);
    tfc_backend *be = tfc_backend_open("cpu", 1, &err);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, B, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_model_forward(m, a, B, 0, 0, 0, &err), TFC_ERR_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "takes 3 inputs (a, b, ...)"));
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* The model file's mistakes with several inputs, each an error at its line. */
static void test_errors(void)
{
    static const struct { const char *yaml, *want; } cases[] = {
        {"layers:\n  - InputLayer: {name: a, shape: [3]}\n  - InputLayer: {name: b, shape: [3]}\n"
         "  - Dense: 2\n",
         "4:5: error: layers[0].Dense: the model has 2 inputs: name the ones this layer reads "
         "in inputs: [a, ...]"},
        {"layers:\n  - InputLayer: {name: a, shape: [3]}\n  - InputLayer: {name: b, shape: [3]}\n"
         "  - Dense: {units: 2, inputs: a}\n",
         "3:5: error: layers[1].InputLayer: input 'b' is read by no layer"},
        {"layers:\n  - InputLayer: {name: a, shape: [3]}\n  - InputLayer: {name: a, shape: [2]}\n"
         "  - Dense: {units: 2, inputs: a}\n",
         "layers[1].InputLayer: the name 'a' is input 0's already"},
        {"layers:\n  - InputLayer: {shape: [3]}\n  - InputLayer: {shape: [2]}\n"
         "  - Dense: {units: 2, inputs: input_layer}\n",
         "input 'input_layer_1' is read by no layer"},
        {"layers:\n  - InputLayer: {name: a, shape: [3]}\n  - InputLayer: {name: b, shape: [3]}\n"
         "  - Dense: {units: 2, inputs: [a], name: b}\n",
         "layers[0].Dense.name: the name 'b' is already used"},
        {"layers:\n  - InputLayer: {name: a, shape: [3]}\n"
         "  - InputLayer: {name: b, shape: [null, 3], max_length: 5}\n"
         "  - Dense: {units: 2, inputs: [a]}\n",
         "3:35: error: layers[1].InputLayer: input 1 of variable length"},
        {"layers:\n  - InputLayer: {name: a, shape: [4], dtype: int32}\n"
         "  - InputLayer: {name: b, shape: [4], dtype: int32}\n"
         "  - Embedding: {input_dim: 5, output_dim: 2, mask_zero: true, inputs: a}\n"
         "  - Embedding: {input_dim: 5, output_dim: 2, mask_zero: true, inputs: b}\n"
         "  - Concatenate: {inputs: [embedding, embedding_1]}\n  - GlobalAveragePooling1D\n",
         "layer 'embedding_1'"},
        {"input: {shape: [3]}\nlayers:\n  - InputLayer: {name: a, shape: [3]}\n"
         "  - InputLayer: {name: b, shape: [3]}\n  - Dense: {units: 2, inputs: [a, b]}\n",
         "gives the input that `input:` (line 1) gives already"},
        {"layers:\n  - InputLayer: {name: a, shape: [3]}\n  - InputLayer: {name: b, shape: [3]}\n"
         "  - Add: {inputs: [a, bb]}\n",
         "no earlier layer is named 'bb'; did you mean 'b'?"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        tfc_test_expect_model_error(cases[i].yaml, cases[i].want);
    /* masks from two inputs: named both */
    tfc_error e = tfc_test_model_error(cases[6].yaml);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.text, "masks from two inputs are not in tfc yet"));
}

/* Training a model of several inputs is refused at the data split, naming the inputs. */
static void test_train_refused(void)
{
    tfc_test_write_split("mi_x.npy", "mi_y.npy", 32, 3);
    tfc_error e;
    tfc_error_clear(&e);
    const char *solver =
        "model:\n  name: mi\n  layers:\n"
        "    - InputLayer: {name: a, shape: [16]}\n    - InputLayer: {name: b, shape: [16]}\n"
        "    - Add: {inputs: [a, b]}\n    - Dense: 4\n"
        "data:\n  train:\n    source: {type: npy, features: mi_x.npy, labels: mi_y.npy}\n"
        "    pipeline: [repeat, {batch: 8}]\n"
        "optimizer: sgd\nmax_iter: 2\n";
    CU_ASSERT_EQUAL(tfc_test_train(solver, "mi_solver.yaml", "mi_run", &e), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.text, "model 'mi' takes 2 inputs (a, b): training"));
}

/* tfc-draw and tfc-summary show a model of several inputs. */
static void test_tools(void)
{
    const char *yaml = "layers:\n  - InputLayer: {name: a, shape: [3]}\n"
                       "  - InputLayer: {name: b, shape: [2], dtype: int32}\n"
                       "  - Embedding: {input_dim: 4, output_dim: 3, inputs: b}\n"
                       "  - GlobalAveragePooling1D\n"
                       "  - Add: {inputs: [a, global_average_pooling1d]}\n";
    const char *bin = tfc_test_bin("tfc-draw");
    if (!bin || !tfc_test_bin("tfc-summary")) return;
    const char *path = tfc_test_write("mi_tools.yaml", yaml, (long)strlen(yaml));
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s/tfc-draw %s", bin, path);
    tfc_test_sh_expect(0, cmd, "\"b\" [label=\"{b|(2,) int32}\"", "\"a\" -> \"add\"");
    snprintf(cmd, sizeof cmd, "%s/tfc-summary %s", bin, path);
    tfc_test_sh_expect(0, cmd, "Total params: 12", NULL);
}

TFC_TEST_MAIN("multi_input", {"predictor", test_predictor}, {"predict_tool", test_predict_tool},
              {"onnx", test_onnx},
              {"gradients", test_gradients}, {"errors", test_errors},
              {"train_refused", test_train_refused}, {"tools", test_tools})
