/* Models of several inputs (a functional model's InputLayers, SPEC §1): Keras's own
 * two- and three-input models (tests/ref/keras_multi_input.py) import and predict what Keras
 * predicted, through the C API and tfc-predict; the gradients reach every input and every
 * weight (numerically checked); tfc-train trains them from named npy inputs as Keras's
 * train_on_batch does; the model file's and the data's mistakes are errors naming them; and
 * what is not in tfc yet (a second input of variable length, masks from two inputs) is
 * refused naming it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tfc.h"
#include "data/data.h"
#include "solver/solver.h"
#include "gradcheck.h"
#include "kerassteps.h"
#include "testutil.h"

#define DIR "tests/ref/multi_input/"

/* Imports CASE.keras into the test folder as CASE.yaml and CASE.safetensors. */
static void import_case(const char *name) { tfc_ks_import(DIR, name); }

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

/* The solver training imported CASE from its npy inputs by name (`order` lists them as the
 * source gives them, each led by its file's digit), SGD at the fixture's lr for its steps,
 * a batch of the fixture's 5 examples. */
static const char *train_solver(const char *name, const char *const *order, int n,
                                const tfc_st_file *f, const char *extra)
{
    static char text[4096];
    char cwd[1024], feats[2048] = "";
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
    for (int k = 0, at = 0; k < n; k++) /* in the order given: matched by name */
        at += snprintf(feats + at, sizeof feats - (size_t)at, "%s%s: %s/" DIR "%s.x%c.npy",
                       k ? ", " : "", order[k] + 1, cwd, name, order[k][0]);
    snprintf(text, sizeof text,
             "model: %s/%s.yaml\n"
             "data:\n  train:\n    source: {type: npy, features: {%s}, labels: %s/" DIR
             "%s.labels.npy}\n    pipeline: [repeat, {batch: 5}]\n"
             "optimizer: {type: sgd, learning_rate: %s}\nlr_policy: fixed\nmax_iter: %s\n"
             "test_interval: 0\ndisplay: 0\nseed: 3\n%s",
             tfc_test_tmpdir(), name, feats, cwd, name, tfc_st_meta(f, "lr"),
             tfc_st_meta(f, "steps"), extra ? extra : "");
    return text;
}

/* tfc-train trains Keras's models of several inputs from an npy source of named inputs (in
 * another order than the model's) as Keras's train_on_batch does from the same weights on
 * fit's dict of inputs: every weight after 3 SGD steps within 1e-5 of Keras's (3e-8 here),
 * through a masked average and a masked LSTM; a run stopped and resumed from its snapshot
 * ends with the same bits. */
static void test_train_keras(void)
{
    static const struct { const char *name; const char *order[3]; int n; } cases[] = {
        {"wide_deep", {"1stats", "0title"}, 2}, {"pair", {"2c", "0b", "1a"}, 3}};
    for (int c = 0; c < 2; c++) {
        import_case(cases[c].name);
        char path[256], weights[1024], run[64];
        snprintf(path, sizeof path, DIR "%s.after.safetensors", cases[c].name);
        snprintf(weights, sizeof weights, "%s/%s.safetensors", tfc_test_tmpdir(), cases[c].name);
        snprintf(run, sizeof run, "mi_%s", cases[c].name);
        tfc_error err;
        tfc_error_clear(&err);
        tfc_st_file *f = tfc_st_open(path, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        const char *solver = train_solver(cases[c].name, cases[c].order, cases[c].n, f, NULL);
        CU_ASSERT_EQUAL_FATAL(tfc_ks_train("mi_solver.yaml", solver, weights, run, 1, NULL, 0,
                                           0, &err), TFC_OK);
        int compared = 0;
        double worst = tfc_ks_worst(f, run, &compared);
        if (worst > 1e-5) printf("\n  %s: %g from Keras\n", cases[c].name, worst);
        CU_ASSERT(worst <= 1e-5);
        CU_ASSERT_EQUAL(compared, tfc_st_count(f));
        /* the steps moved the weights: the comparison can fail */
        tfc_st_file *w0 = tfc_st_open(weights, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(w0);
        double moved = 0;
        for (int i = 0; i < tfc_st_count(w0); i++) {
            const tfc_st_tensor *t = tfc_st_tensor_at(w0, i);
            char after[300];
            snprintf(after, sizeof after, "after/%s", t->name);
            const tfc_st_tensor *a = tfc_st_find(f, after);
            CU_ASSERT_PTR_NOT_NULL_FATAL(a);
            float *x = malloc((size_t)t->numel * 4), *y = malloc((size_t)t->numel * 4);
            tfc_st_tensor_to_f32(t, x);
            tfc_st_tensor_to_f32(a, y);
            for (int64_t j = 0; j < t->numel; j++) moved = fmax(moved, fabs(x[j] - y[j]));
            free(x), free(y);
        }
        CU_ASSERT(moved > 1e-3);
        tfc_st_close(w0);
        if (c == 1) /* resumed from iteration 2 (the pipeline's state holds 3 inputs) */
            tfc_ks_expect_resume_exact("mi_resume.yaml",
                                       train_solver(cases[c].name, cases[c].order, cases[c].n,
                                                    f, "snapshot: {interval: 2, keep: 0}\n"),
                                       "mi_resume", "functional", 2);
        tfc_st_close(f);
    }
}

/* End to end: a model whose class needs both of its inputs (the argmax of a linear map of
 * 16 features, 8 in each input: either half alone leaves it to chance) learns it from a
 * split of named inputs, its test split read with the inputs in the other order; tfc-test
 * evaluates the weights to the same accuracy. */
static void test_learns(void)
{
    const char *bin = tfc_test_bin("tfc-test");
    if (!bin) return;
    enum { N = 512 };
    tfc_test_write_split("ml_x.npy", "ml_y.npy", N, 11);
    tfc_tensor x;
    tfc_error e;
    tfc_error_clear(&e);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_read(tfc_test_path("ml_x.npy"), &x, &e), TFC_OK);
    float *lo = malloc(N * 8 * 4), *hi = malloc(N * 8 * 4);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < 8; j++) {
            lo[i * 8 + j] = ((float *)x.data)[i * 16 + j];
            hi[i * 8 + j] = ((float *)x.data)[i * 16 + 8 + j];
        }
    tfc_tensor a = {.dtype = TFC_F32, .shape = {2, {N, 8}}, .data = lo};
    tfc_tensor b = {.dtype = TFC_F32, .shape = {2, {N, 8}}, .data = hi};
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("ml_lo.npy"), &a, &e), TFC_OK);
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("ml_hi.npy"), &b, &e), TFC_OK);
    free(lo), free(hi), free(x.data);
    const char *solver =
        "model:\n  name: halves\n  layers:\n"
        "    - InputLayer: {name: lo, shape: [8]}\n    - InputLayer: {name: hi, shape: [8]}\n"
        "    - Dense: {units: 16, activation: relu, inputs: lo}\n"
        "    - Dense: {units: 16, activation: relu, inputs: hi}\n"
        "    - Concatenate: {inputs: [dense, dense_1]}\n    - Dense: 4\n"
        "  metrics: [accuracy]\n"
        "data:\n  train:\n    source: {type: npy, features: {lo: ml_lo.npy, hi: ml_hi.npy}, "
        "labels: ml_y.npy}\n    pipeline: [{shuffle: 512}, repeat, {batch: 32}]\n"
        "  test:\n    source: {type: npy, features: {hi: ml_hi.npy, lo: ml_lo.npy}, "
        "labels: ml_y.npy}\n    pipeline: [{batch: 128}]\n"
        "optimizer: {type: adam, learning_rate: 0.01}\nmax_iter: 400\ntest_interval: 400\n"
        "display: 0\nseed: 5\n";
    tfc_train_result res;
    CU_ASSERT_EQUAL_FATAL(tfc_test_train_result(solver, "ml_solver.yaml", "ml_run", &res, &e),
                          TFC_OK);
    CU_ASSERT_FATAL(res.have_test);
    if (res.test.metric[0] < 0.9) printf("\n  test accuracy %g\n", res.test.metric[0]);
    CU_ASSERT(res.test.metric[0] >= 0.9);
    CU_ASSERT_EQUAL(res.test.examples, N);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd %s && %s/tfc-test ml_solver.yaml --weights %s/final.safetensors",
             tfc_test_tmpdir(), bin, res.run_dir);
    char acc[64];
    snprintf(acc, sizeof acc, "accuracy %.4f", res.test.metric[0]);
    tfc_test_sh_expect(0, cmd, acc, NULL);
}

/* A split whose inputs do not match the model's, by count, name or shape, is an error
 * naming both sides; so is a value that is not finite, naming the input. */
static void test_train_errors(void)
{
    tfc_test_write_split("mi_x.npy", "mi_y.npy", 32, 3);
    const char *model = "model:\n  name: mi\n  layers:\n"
                        "    - InputLayer: {name: a, shape: [16]}\n"
                        "    - InputLayer: {name: b, shape: [16]}\n"
                        "    - Add: {inputs: [a, b]}\n    - Dense: 4\n";
    static const struct { const char *features, *want; } cases[] = {
        {"mi_x.npy", "yields one input (its features); model 'mi' takes 2 (a, b): give the "
                     "source one array per input by name"},
        {"{a: mi_x.npy, c: mi_x.npy}", "yields the inputs a, c, none named 'b', an input of "
                                       "model 'mi' (a, b)"},
        {"{a: mi_x.npy, b: mi_x.npy, c: mi_x.npy}", "yields an input 'c' that model 'mi' does "
                                                    "not take (its inputs: a, b)"},
        {"{a: mi_x.npy, b: mi_w.npy}", "yields input 'b' float32 (-1, 2) (batch first), but "
                                       "the model's input 'b' is (16,) per example"},
    };
    float w[32 * 2];
    for (int i = 0; i < 64; i++) w[i] = (float)i;
    tfc_tensor t = {.dtype = TFC_F32, .shape = {2, {32, 2}}, .data = w};
    tfc_error e;
    tfc_error_clear(&e);
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("mi_w.npy"), &t, &e), TFC_OK);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char solver[2048];
        snprintf(solver, sizeof solver, "%sdata:\n  train:\n    source: {type: npy, features: "
                 "%s, labels: mi_y.npy}\n    pipeline: [repeat, {batch: 8}]\n"
                 "optimizer: sgd\nmax_iter: 2\n", model, cases[i].features);
        tfc_error_clear(&e);
        CU_ASSERT_EQUAL(tfc_test_train(solver, "mi_solver.yaml", "mi_run", &e), TFC_ERR_CONFIG);
        if (!strstr(e.text, cases[i].want)) printf("\n  want '%s' in:\n%s", cases[i].want, e.text);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.text, cases[i].want));
    }
    /* a value that is not finite names its input, and the record in its own file */
    float bad[32 * 16];
    for (int i = 0; i < 32 * 16; i++) bad[i] = 0.5f;
    bad[3 * 16 + 2] = NAN;
    tfc_tensor bt = {.dtype = TFC_F32, .shape = {2, {32, 16}}, .data = bad};
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("mi_nan.npy"), &bt, &e), TFC_OK);
    char solver[2048];
    snprintf(solver, sizeof solver, "%sdata:\n  train:\n    source: {type: npy, features: "
             "{a: mi_x.npy, b: mi_nan.npy}, labels: mi_y.npy}\n    pipeline: [{batch: 8}]\n"
             "optimizer: sgd\nmax_iter: 2\n", model);
    tfc_error_clear(&e);
    CU_ASSERT_EQUAL(tfc_test_train(solver, "mi_solver.yaml", "mi_nan_run", &e), TFC_ERR_DATA);
    if (!strstr(e.text, "mi_nan.npy record 3: b value nan is not finite"))
        printf("\n%s", e.text);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.text, "mi_nan.npy record 3: b value nan is not finite"));
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
              {"train_keras", test_train_keras}, {"learns", test_learns},
              {"train_errors", test_train_errors}, {"tools", test_tools})
