/* Shared layers (SPEC §1: an item keyed by an earlier layer's name calls that layer again,
 * Keras's one layer object called on several tensors): Keras's own Siamese model and shared
 * Embedding + LSTM encoder (tests/ref/keras_shared_layers.py) import (each layer's further
 * calls as calls, its weights once) and predict what Keras predicted, and tfc-train trains
 * them to Keras's train_on_batch weights; the gradients of the shared weights, the sum of
 * every call's, against central differences (Dense, BatchNormalization, Conv1D, Embedding
 * into an LSTM); the weights counted, initialised and saved once; and the call's mistakes,
 * each an error at its line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tfc.h"
#include "core/safetensors.h"
#include "data/data.h"
#include "graph/model.h"
#include "gradcheck.h"
#include "kerassteps.h"
#include "testutil.h"

#define DIR "tests/ref/shared_layers/"

/* Imports CASE.keras into the test folder as CASE.yaml and CASE.safetensors. */
static void import_case(const char *name) { tfc_ks_import(DIR, name); }

static const char *const keras_cases[2] = {"siamese", "encoder"};

/* Keras's models import with each layer's weights once (siamese: the tower's two Dense
 * layers and the head, 6 variables; encoder: the Embedding, the LSTM's three and the head's
 * two) and predict Keras's predictions through the C API. */
static void test_keras_predict(void)
{
    static const int nweights[2] = {6, 6};
    for (int c = 0; c < 2; c++) {
        import_case(keras_cases[c]);
        char model[512], weights[512], path[256], err[512] = "";
        snprintf(model, sizeof model, "%s/%s.yaml", tfc_test_tmpdir(), keras_cases[c]);
        snprintf(weights, sizeof weights, "%s/%s.safetensors", tfc_test_tmpdir(), keras_cases[c]);
        tfc_error e;
        tfc_error_clear(&e);
        tfc_st_file *w = tfc_st_open(weights, &e);
        CU_ASSERT_PTR_NOT_NULL_FATAL(w);
        CU_ASSERT_EQUAL(tfc_st_count(w), nweights[c]);
        tfc_st_close(w);
        tfc_predictor *p = tfc_predictor_open(model, weights, "cpu", err, sizeof err);
        if (!p) printf("\n%s\n", err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        CU_ASSERT_EQUAL_FATAL(tfc_predictor_inputs(p), 2);
        tfc_tensor x[2], y;
        const void *xs[2];
        for (int k = 0; k < 2; k++) {
            snprintf(path, sizeof path, DIR "%s.x%d.npy", keras_cases[c], k);
            CU_ASSERT_EQUAL_FATAL(tfc_npy_read(path, &x[k], &e), TFC_OK);
            xs[k] = x[k].data;
        }
        snprintf(path, sizeof path, DIR "%s.y.npy", keras_cases[c]);
        CU_ASSERT_EQUAL_FATAL(tfc_npy_read(path, &y, &e), TFC_OK);
        const int64_t n = x[0].shape.dim[0], k = tfc_shape_numel(&y.shape);
        float *out = calloc((size_t)(k > 0 ? k : 1), 4);
        CU_ASSERT_EQUAL(tfc_predictor_run_inputs(p, xs, 2, n, 0, out, err, sizeof err), 0);
        const float *want = y.data;
        double big = 0, worst = 0;
        for (int64_t i = 0; i < k; i++) big = fmax(big, fabs(want[i]));
        for (int64_t i = 0; i < k; i++) worst = fmax(worst, fabs(out[i] - want[i]));
        if (worst > 1e-5 * big) printf("\n  %s: %g from Keras\n", keras_cases[c], worst / big);
        CU_ASSERT(worst <= 1e-5 * big);
        free(out);
        for (int q = 0; q < 2; q++) free(x[q].data);
        free(y.data);
        tfc_predictor_close(p);
    }
}

/* The solver training imported Keras case c from its npy inputs by name, SGD at the
 * fixture's lr for its steps (`extra`: further keys, which may override them). */
static const char *train_solver(int c, const tfc_st_file *f, const char *extra)
{
    static const char *const names[2][2] = {{"a", "b"}, {"q", "d"}};
    static char text[4096];
    char cwd[1024];
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
    const char *k = keras_cases[c];
    snprintf(text, sizeof text,
             "model: %s/%s.yaml\n"
             "data:\n  train:\n    source: {type: npy, features: {%s: %s/" DIR "%s.x0.npy, "
             "%s: %s/" DIR "%s.x1.npy}, labels: %s/" DIR "%s.labels.npy}\n"
             "    pipeline: [repeat, {batch: 5}]\n"
             "lr_policy: fixed\ntest_interval: 0\ndisplay: 0\nseed: 3\n%s",
             tfc_test_tmpdir(), k, names[c][0], cwd, k, names[c][1], cwd, k, cwd, k,
             extra);
    return text;
}

/* tfc-train trains them from npy inputs by name as Keras's train_on_batch does from the same
 * weights: every variable after 3 SGD steps within 1e-5 of Keras's, each compared once; a
 * run with Adam (one set of slots per shared weight) stopped and resumed from its snapshot
 * ends with the same bits. */
static void test_train_keras(void)
{
    for (int c = 0; c < 2; c++) {
        import_case(keras_cases[c]);
        char path[256], weights[1024], run[64], sgd[256];
        snprintf(path, sizeof path, DIR "%s.after.safetensors", keras_cases[c]);
        snprintf(weights, sizeof weights, "%s/%s.safetensors", tfc_test_tmpdir(),
                 keras_cases[c]);
        snprintf(run, sizeof run, "sl_%s", keras_cases[c]);
        tfc_error err;
        tfc_error_clear(&err);
        tfc_st_file *f = tfc_st_open(path, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        snprintf(sgd, sizeof sgd, "optimizer: {type: sgd, learning_rate: %s}\nmax_iter: %s\n",
                 tfc_st_meta(f, "lr"), tfc_st_meta(f, "steps"));
        CU_ASSERT_EQUAL_FATAL(tfc_ks_train("sl_solver.yaml", train_solver(c, f, sgd), weights,
                                           run, 1, NULL, 0, 0, &err), TFC_OK);
        int compared = 0;
        double worst = tfc_ks_worst(f, run, &compared);
        if (worst > 1e-5) printf("\n  %s: %g from Keras\n", keras_cases[c], worst);
        CU_ASSERT(worst <= 1e-5);
        CU_ASSERT_EQUAL(compared, tfc_st_count(f));
        tfc_ks_expect_resume_exact("sl_resume.yaml",
                                   train_solver(c, f, "optimizer: {type: adam, learning_rate: "
                                                "0.01}\nmax_iter: 4\nsnapshot: {interval: 2, "
                                                "keep: 0}\n"),
                                   c ? "sl_resume_encoder" : "sl_resume_siamese",
                                   "functional", 2);
        tfc_st_close(f);
    }
}

/* A Siamese model: one Dense tower (and a BatchNormalization) on both inputs. */
static const char *const siamese =
    "layers:\n"
    "  - InputLayer: {name: a, shape: [4]}\n"
    "  - InputLayer: {name: b, shape: [4]}\n"
    "  - Dense: {name: enc, units: 5, activation: tanh, inputs: a}\n"
    "  - Dense: {name: enc2, units: 3}\n"
    "  - enc: {inputs: b}\n"
    "  - enc2\n"
    "  - Subtract: {inputs: [enc2, enc2_call_1]}\n"
    "  - Multiply: {inputs: [enc2, enc2_call_1]}\n"
    "  - BatchNormalization: {name: bn, inputs: subtract}\n"
    "  - bn: {inputs: multiply, name: bn_b}\n"
    "  - Concatenate: {inputs: [bn, bn_b]}\n"
    "  - Dense: 3\n"
    "loss: sparse_categorical_crossentropy\n";

/* The gradients of the Siamese model's weights and of both inputs; the model's weights are
 * the first calls' alone (counted, saved once), the calls named and of 0 weights. */
static void test_gradients(void)
{
    tfc_model *m = tfc_test_model(siamese);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 2)->name, "enc_call_1");
    CU_ASSERT_EQUAL(tfc_model_layer(m, 2)->calls, 0);
    CU_ASSERT_EQUAL(tfc_model_layer(m, 3)->calls, 1);
    CU_ASSERT_EQUAL(tfc_layer_weight_count(tfc_model_layer(m, 2)), 0);
    CU_ASSERT_EQUAL(tfc_layer_weight_count(tfc_model_layer(m, 7)), 0);
    /* enc 4*5+5, enc2 5*3+3, bn 4*3 (2*3 trainable), the head 6*3+3 */
    CU_ASSERT_EQUAL(tfc_model_param_count(m), 25 + 18 + 12 + 21);
    CU_ASSERT_EQUAL(tfc_model_trainable_count(m), 25 + 18 + 6 + 21);
    enum { B = 4 };
    float a[B * 4], b[B * 4];
    tfc_test_fill(a, B * 4, -1, 1, 1);
    tfc_test_fill(b, B * 4, -1, 1, 2);
    int32_t labels[B] = {0, 2, 1, 1};
    const void *xs[2] = {a, b};
    gradcheck_result r = tfc_gradcheck_inputs(m, B, xs, labels, 64, 5, 1.0);
    if (r.max_err > TFC_GRADCHECK_BOUND) printf("\n  %s: %g\n", r.worst, r.max_err);
    CU_ASSERT(r.max_err <= TFC_GRADCHECK_BOUND);
    CU_ASSERT(r.checked >= 25 + 18 + 6 + 21 + 2 * B * 4);
    CU_ASSERT_EQUAL(r.null_dx_diff, 0);
    /* the weights file holds each weight once, under its layer's name */
    char path[512];
    snprintf(path, sizeof path, "%s/siamese.safetensors", tfc_test_tmpdir());
    tfc_error err;
    tfc_error_clear(&err);
    tfc_backend *be = tfc_backend_open("cpu", 1, &err);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, B, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_init_weights(m, 1, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_save_weights(m, path, &err), TFC_OK);
    tfc_st_file *f = tfc_st_open(path, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(tfc_st_count(f), 2 + 2 + 4 + 2);
    CU_ASSERT_PTR_NOT_NULL(tfc_st_find(f, "enc/kernel"));
    CU_ASSERT_PTR_NULL(tfc_st_find(f, "enc_call_1/kernel"));
    CU_ASSERT_PTR_NULL(tfc_st_find(f, "bn_b/moving_mean"));
    tfc_st_close(f);
    CU_ASSERT_EQUAL(tfc_model_load_weights(m, path, NULL, &err), TFC_OK);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* A call computes with its layer's weights: the two calls of a tower on equal inputs give
 * equal outputs (their difference 0), on other inputs not. */
static void test_same_weights(void)
{
    tfc_model *m = tfc_test_model("layers:\n"
                                  "  - InputLayer: {name: a, shape: [4]}\n"
                                  "  - InputLayer: {name: b, shape: [4]}\n"
                                  "  - Dense: {name: enc, units: 3, activation: tanh, inputs: a}\n"
                                  "  - enc: {inputs: b}\n"
                                  "  - Subtract: {inputs: [enc, enc_call_1]}\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_backend *be = tfc_backend_open("cpu", 1, &err);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind_inference(m, be, 2, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_init_weights(m, 3, &err), TFC_OK);
    float a[8], b[8], y[6];
    tfc_test_fill(a, 8, -1, 1, 1);
    memcpy(b, a, sizeof b);
    b[4] += 0.5f;
    const void *xs[2] = {a, b};
    CU_ASSERT_EQUAL_FATAL(tfc_model_forward_inputs(m, xs, 2, 0, 0, 0, &err), TFC_OK);
    tfc_model_get_output(m, y);
    for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(y[i], 0.0f);
    CU_ASSERT(fabsf(y[3]) + fabsf(y[4]) + fabsf(y[5]) > 1e-3f);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* A shared Embedding (whose table the LSTM after each call reads in place of its output) and
 * a shared LSTM, Conv1D and pooling on two token inputs. */
static void test_gradients_sequences(void)
{
    tfc_model *m = tfc_test_model(
        "layers:\n"
        "  - InputLayer: {name: a, shape: [5], dtype: int32}\n"
        "  - InputLayer: {name: b, shape: [5], dtype: int32}\n"
        "  - Embedding: {name: emb, input_dim: 7, output_dim: 3, inputs: a}\n"
        "  - LSTM: {name: rnn, units: 4}\n"
        "  - emb: {inputs: b}\n"
        "  - rnn\n"
        "  - emb: {inputs: b, name: emb_b}\n"
        "  - Conv1D: {name: conv, filters: 2, kernel_size: 2, activation: relu}\n"
        "  - emb: {inputs: a}\n"
        "  - conv\n"
        "  - Flatten: {inputs: conv}\n"
        "  - Flatten: {inputs: conv_call_1}\n"
        "  - Concatenate: {inputs: [rnn, rnn_call_1, flatten, flatten_1]}\n"
        "  - Dense: 3\n"
        "loss: sparse_categorical_crossentropy\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 6)->name, "emb_call_3"); /* Keras's node 3 */
    CU_ASSERT_EQUAL(tfc_model_param_count(m),
                    7 * 3 + (3 * 16 + 4 * 16 + 16) + (2 * 3 * 2 + 2) + (4 + 4 + 8 + 8) * 3 + 3);
    enum { B = 3 };
    int32_t a[B * 5] = {1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5, 6, 0, 1};
    int32_t b[B * 5] = {6, 5, 4, 3, 2, 1, 0, 6, 5, 4, 3, 2, 2, 1, 3};
    int32_t labels[B] = {0, 2, 1};
    const void *xs[2] = {a, b};
    gradcheck_result r = tfc_gradcheck_inputs(m, B, xs, labels, 64, 7, 1.0);
    if (r.max_err > TFC_GRADCHECK_BOUND) printf("\n  %s: %g\n", r.worst, r.max_err);
    CU_ASSERT(r.max_err <= TFC_GRADCHECK_BOUND);
    CU_ASSERT(r.checked >= 21 + 128 + 14 + 75);
    tfc_model_free(m);
}

/* The calls' mistakes, each an error at the call's line. */
static void test_errors(void)
{
#define TWO "layers:\n  - InputLayer: {name: a, shape: [4]}\n" \
            "  - InputLayer: {name: b, shape: [5]}\n"
    static const struct { const char *yaml, *want; } cases[] = {
        {TWO "  - Dense: {name: enc, units: 2, inputs: a}\n  - enc: {inputs: b, units: 3}\n"
             "  - Add: {inputs: [enc, enc_call_1]}\n",
         "5:22: error: layers[1].enc: a call of layer 'enc' takes inputs and name only, not "
         "units"},
        {TWO "  - Dense: {name: enc, units: 2, inputs: a}\n  - enc: {inputs: b}\n"
             "  - Add: {inputs: [enc, enc_call_1]}\n",
         "5:5: error: layers[1].Dense: layer 'enc_call_1': a call of layer 'enc' on input "
         "shape (5,), which gives it other weights than its first call on (4,): kernel (5, 2), "
         "not (4, 2)"},
        {TWO "  - enc: {inputs: b}\n  - Dense: {name: enc, units: 2, inputs: a}\n"
             "  - Add: {inputs: [enc, enc_call_1]}\n",
         "4:5: error: layers[0]: a call of layer 'enc' before the layer"},
        {TWO "  - Dense: {name: enc, units: 2, inputs: a}\n  - enk: {inputs: b}\n",
         "5:5: error: layers[1]: unknown layer type 'enk'; did you mean 'enc'?"},
        {TWO "  - Dense: {name: enc, units: 2, inputs: a}\n"
             "  - enc: {inputs: b, trainable: false}\n",
         "a call of layer 'enc' takes inputs and name only, not trainable"},
        {TWO "  - Dense: {name: enc, units: 2, inputs: a}\n  - enc: {inputs: b, name: enc}\n",
         "5:28: error: layers[1].enc.name: the name 'enc' is already used"},
        {TWO "  - Dense: {units: 2, inputs: a}\n  - Dense: {units: 2, inputs: b, "
             "name: dense_call_1}\n  - dense: {inputs: a}\n",
         "6:5: error: layers[2]: the call's default name 'dense_call_1' is another layer's"},
        {TWO "  - SpectralNormalization: {name: sn, layer: {Dense: 2}, inputs: a}\n"
             "  - sn: {inputs: a}\n  - Add: {inputs: [sn, sn_call_1, b]}\n",
         "5:5: error: layers[1]: a call of layer 'sn': SpectralNormalization writes its "
         "weights"},
        {TWO "  - Pipeline: {name: tower, layers: [Dense: 2], inputs: a}\n"
             "  - tower: {inputs: a}\n",
         "a call of the Pipeline 'tower': tfc does not call a Pipeline again yet"},
        {TWO "  - Dense: {name: enc, units: 2, inputs: a}\n  - enc: 4\n",
         "a call of layer 'enc' takes a mapping {inputs: ..., name: ...}"},
    };
#undef TWO
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        tfc_test_expect_model_error(cases[i].yaml, cases[i].want);
    /* a layer named as a type is that type: Dense here makes a new Dense */
    tfc_model *m = tfc_test_model("layers:\n  - InputLayer: {name: a, shape: [4]}\n"
                                  "  - Dense: {name: Dense, units: 2, inputs: a}\n"
                                  "  - Dense: 3\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(tfc_model_layer(m, 1)->calls, -1);
    CU_ASSERT_EQUAL(tfc_model_param_count(m), 4 * 2 + 2 + 2 * 3 + 3);
    tfc_model_free(m);
}

/* tfc-export writes Keras's shared-layer models (a Siamese tower, a shared Embedding and
 * LSTM) as ONNX graphs that onnxruntime runs to Keras's predictions (within
 * onnx_check.py's 1e-5), the weights of a layer called twice written once. */
static void test_onnx(void)
{
    const char *bin = tfc_test_bin("tfc-export");
    if (!bin || !tfc_test_python_has("onnx, onnxruntime, numpy")) return;
    static const char *const inputs[2][2] = {{"a", "b"}, {"q", "d"}};
    char cwd[1024];
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
    for (int c = 0; c < 2; c++) {
        import_case(keras_cases[c]);
        const char *n = keras_cases[c], *t = tfc_test_tmpdir();
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "%s/tfc-export %s/%s.yaml --weights %s/%s.safetensors --onnx "
                 "%s/%s.onnx && python3 %s/tests/onnx_check.py %s/%s.onnx %s=%s/" DIR
                 "%s.x0.npy,%s=%s/" DIR "%s.x1.npy %s/" DIR "%s.y.npy", bin, t, n, t, n, t, n,
                 cwd, t, n, inputs[c][0], cwd, n, inputs[c][1], cwd, n, cwd, n);
        tfc_test_sh_expect(0, cmd, ": ok", NULL);
    }
    /* the Siamese tower's weights once, though it is called twice: the graph's float
     * initializers are the model's 72 parameters */
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "python3 -c \"import onnx, math; g = onnx.load('%s/siamese.onnx')"
             ".graph; print('floats', sum(math.prod(i.dims) for i in g.initializer if "
             "i.data_type == 1))\"", tfc_test_tmpdir());
    tfc_test_sh_expect(0, cmd, "floats 72\n", NULL);
}

TFC_TEST_MAIN("shared_layers", {"keras_predict", test_keras_predict},
              {"train_keras", test_train_keras}, {"gradients", test_gradients}, {"same_weights", test_same_weights},
              {"gradients_sequences", test_gradients_sequences}, {"errors", test_errors},
              {"onnx", test_onnx})
