/* tfc-import (tfc_keras_import) on Keras's own files: tests/ref/import/ holds eleven models a
 * Keras user builds and saves (tests/ref/keras_import.py), each with Keras's predictions and
 * its variables under tfc's names. Each archive must import to exactly those weights and the
 * model file must predict what Keras predicted; the same model saved as JSON with a
 * .weights.h5 and as a legacy .h5 must import to the same weights; the YAML must read as a
 * user would write it; and what tfc cannot express must be an error at the JSON's line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "tfc.h"
#include "data/data.h"
#include "util/testutil.h"

#define DIR "tests/ref/import/"

static const char *const cases[] = {"mlp",       "cnn",    "resnet",    "text",   "transformer",
                                    "recurrent", "misc",   "volume",    "attention",
                                    "nested",    "nested_seq", NULL};

/* tfc_keras_import of `src` (with `weights`) into the test folder as NAME.yaml and
 * NAME.safetensors; returns the status, err filled. */
static tfc_status import(const char *src, const char *weights, const char *name,
                         tfc_import_report *rep, tfc_error *err)
{
    char model[512], out[512];
    snprintf(model, sizeof model, "%s/%s.yaml", tfc_test_tmpdir(), name);
    snprintf(out, sizeof out, "%s/%s.safetensors", tfc_test_tmpdir(), name);
    tfc_error_clear(err);
    return tfc_keras_import(src, weights, NULL, model, out, rep, err);
}

/* Every tensor of `want` in `path`, bit for bit, and nothing else. */
static void expect_same_weights(const char *path, const char *want_path)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *got = tfc_st_open(path, &err), *want = tfc_st_open(want_path, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(got);
    CU_ASSERT_PTR_NOT_NULL_FATAL(want);
    CU_ASSERT_EQUAL(tfc_st_count(got), tfc_st_count(want));
    for (int i = 0; i < tfc_st_count(want); i++) {
        const tfc_st_tensor *w = tfc_st_tensor_at(want, i), *g = tfc_st_find(got, w->name);
        if (!g) printf("\n  %s: no %s\n", path, w->name);
        CU_ASSERT_PTR_NOT_NULL(g);
        if (!g) continue;
        CU_ASSERT(tfc_shape_equal(&g->shape, &w->shape));
        CU_ASSERT_EQUAL(g->dtype, TFC_F32);
        float *a = malloc((size_t)g->numel * 4 + 4), *b = malloc((size_t)w->numel * 4 + 4);
        tfc_st_tensor_to_f32(g, a);
        tfc_st_tensor_to_f32(w, b);
        int same = g->numel == w->numel && !memcmp(a, b, (size_t)w->numel * 4);
        if (!same) printf("\n  %s: %s differs\n", path, w->name);
        CU_ASSERT(same);
        free(a);
        free(b);
    }
    tfc_st_close(got);
    tfc_st_close(want);
}

/* The model file and weights predict Keras's outputs for the case's inputs. */
static double worst_prediction(const char *name)
{
    char model[512], weights[512], xp[256], yp[256];
    snprintf(model, sizeof model, "%s/%s.yaml", tfc_test_tmpdir(), name);
    snprintf(weights, sizeof weights, "%s/%s.safetensors", tfc_test_tmpdir(), name);
    snprintf(xp, sizeof xp, DIR "%s.x.npy", name);
    snprintf(yp, sizeof yp, DIR "%s.y.npy", name);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_tensor x, y;
    CU_ASSERT_EQUAL_FATAL(tfc_npy_read(xp, &x, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_read(yp, &y, &err), TFC_OK);
    int n = (int)x.shape.dim[0];
    tfc_model *m = tfc_model_load(model, &err);
    tfc_backend *be = tfc_backend_open("cpu", 1, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, n, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_load_weights(m, weights, NULL, &err), TFC_OK);
    const tfc_dtype in = tfc_model_input_dtype(m);
    void *xin = x.data;
    int32_t *ids = NULL;
    if (in == TFC_I32 && x.dtype != TFC_I32) {
        int64_t k = tfc_shape_numel(&x.shape);
        ids = malloc((size_t)k * 4);
        tfc_values_convert(ids, TFC_I32, x.data, x.dtype, k);
        xin = ids;
    }
    CU_ASSERT_EQUAL_FATAL(tfc_model_forward(m, xin, n, 0, 0, 0, &err), TFC_OK);
    int64_t k = tfc_shape_numel(&y.shape);
    CU_ASSERT_FATAL(k > 0);
    float *out = malloc((size_t)(k > 0 ? k : 1) * 4);
    tfc_model_get_output(m, out);
    double big = 0, worst = 0;
    for (int64_t i = 0; i < k; i++) big = fmax(big, fabs(((float *)y.data)[i]));
    for (int64_t i = 0; i < k; i++) worst = fmax(worst, fabs(out[i] - ((float *)y.data)[i]));
    free(out);
    free(ids);
    free(x.data);
    free(y.data);
    tfc_model_free(m);
    tfc_backend_free(be);
    return worst / fmax(big, 1e-30);
}

static void test_archives(void)
{
    for (const char *const *c = cases; *c; c++) {
        char src[256], want[256], got[512];
        snprintf(src, sizeof src, DIR "%s.keras", *c);
        snprintf(want, sizeof want, DIR "%s.expect.safetensors", *c);
        snprintf(got, sizeof got, "%s/%s.safetensors", tfc_test_tmpdir(), *c);
        tfc_import_report rep;
        tfc_error err;
        tfc_status s = import(src, NULL, *c, &rep, &err);
        if (s) printf("\n  %s: %s", src, err.text);
        CU_ASSERT_EQUAL_FATAL(s, TFC_OK);
        CU_ASSERT_STRING_EQUAL(rep.source, "Keras 3.15.1");
        CU_ASSERT(rep.tensors > 0 && rep.layers > 0);
        expect_same_weights(got, want);
        double worst = worst_prediction(*c);
        printf("\n  %-12s %2d layers %3d tensors, outputs within %.2g of Keras's", *c,
               rep.layers, rep.tensors, worst);
        CU_ASSERT(worst < 1e-5);
    }
}

/* Genuine Keras 2 files (tf_keras 2.21's model.save("x.h5"), tests/ref/keras2_import.py): a
 * Sequential MLP with BatchNormalization, an Embedding + Bidirectional(LSTM) model and a
 * frozen functional model inside a functional one (read at its call 1) import (Keras 2's
 * config as Keras 3's legacy loader reads it: batch_input_shape, a list `axis`, Embedding's
 * input_length, the LSTM's implementation and time_major) and predict tf_keras's outputs. */
static void test_keras2(void)
{
    static const char *const k2[] = {"keras2_mlp", "keras2_bilstm", "keras2_nested", NULL};
    for (const char *const *c = k2; *c; c++) {
        char src[256];
        snprintf(src, sizeof src, DIR "%s.h5", *c);
        tfc_import_report rep;
        tfc_error err;
        tfc_status s = import(src, NULL, *c, &rep, &err);
        if (s) printf("\n  %s: %s", src, err.text);
        CU_ASSERT_EQUAL_FATAL(s, TFC_OK);
        CU_ASSERT_STRING_EQUAL(rep.source, "Keras 2.21.0");
        double worst = worst_prediction(*c);
        printf("\n  %-13s %2d layers %3d tensors, outputs within %.2g of tf_keras's", *c,
               rep.layers, rep.tensors, worst);
        CU_ASSERT(worst < 1e-5);
    }
}

/* The same model as JSON plus model.save_weights' file, and as Keras's legacy .h5. */
/* The config.json of mlp.keras (malloc'd, *len bytes). */
static void *mlp_config(size_t *len)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_zip *z = tfc_zip_open(DIR "mlp.keras", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(z);
    void *json = NULL;
    *len = 0;
    CU_ASSERT_EQUAL(tfc_zip_read(z, tfc_zip_find(z, "config.json"), 1 << 20, &json, len, &err),
                    TFC_OK);
    tfc_zip_close(z);
    return json;
}

static void test_other_forms(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    size_t len;
    void *json = mlp_config(&len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(json);
    const char *path = tfc_test_write("mlp_config.json", json, (long)len);
    free(json);
    tfc_import_report rep;
    char got[512];
    CU_ASSERT_EQUAL(import(path, DIR "mlp.weights.h5", "mlp_json", &rep, &err), TFC_OK);
    snprintf(got, sizeof got, "%s/mlp_json.safetensors", tfc_test_tmpdir());
    expect_same_weights(got, DIR "mlp.expect.safetensors");
    CU_ASSERT_EQUAL(import(DIR "mlp.h5", NULL, "mlp_h5", &rep, &err), TFC_OK);
    snprintf(got, sizeof got, "%s/mlp_h5.safetensors", tfc_test_tmpdir());
    expect_same_weights(got, DIR "mlp.expect.safetensors");
    /* a legacy .h5's StackedRNNCells: rnn/stacked_rnn_cells/lstm_cell/kernel is tfc's
     * rnn/lstm_cell/kernel, as in the .keras archive */
    tfc_status s = import(DIR "recurrent.h5", NULL, "recurrent_h5", &rep, &err);
    if (s) printf("\n  %s", err.text);
    CU_ASSERT_EQUAL(s, TFC_OK);
    snprintf(got, sizeof got, "%s/recurrent_h5.safetensors", tfc_test_tmpdir());
    expect_same_weights(got, DIR "recurrent.expect.safetensors");
    /* JSON alone: the model file, no weights */
    CU_ASSERT_EQUAL(import(path, NULL, "mlp_alone", &rep, &err), TFC_OK);
    CU_ASSERT_EQUAL(rep.tensors, 0);
    snprintf(got, sizeof got, "%s/mlp_alone.safetensors", tfc_test_tmpdir());
    FILE *f = fopen(got, "rb");
    CU_ASSERT_PTR_NULL(f);
    if (f) fclose(f);
    /* a weights file of another model: the first tensor that does not fit, named */
    CU_ASSERT_EQUAL(import(DIR "cnn.keras", DIR "mlp.weights.h5", "mixed", &rep, &err),
                    TFC_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "mlp.weights.h5"));
}

/* The model file reads as a user would write it: Keras's defaults and bookkeeping left
 * out, the graph's edges only where a layer does not read the one before it. */
static void test_yaml(void)
{
    tfc_import_report rep;
    tfc_error err;
    CU_ASSERT_EQUAL_FATAL(import(DIR "mlp.keras", NULL, "mlp_text", &rep, &err), TFC_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/mlp_text.yaml", tfc_test_tmpdir());
    char *text = tfc_test_read(path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "# Imported by tfc-import from mlp.keras (Keras 3.15.1)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "- Dense: {name: dense, units: 16, activation: relu}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "- BatchNormalization: {name: batch_normalization}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "loss: sparse_categorical_crossentropy"));
    CU_ASSERT_PTR_NULL(strstr(text, "dtype: {"));
    CU_ASSERT_PTR_NULL(strstr(text, "kernel_initializer"));
    CU_ASSERT_PTR_NULL(strstr(text, "trainable"));
    CU_ASSERT_PTR_NULL(strstr(text, "inputs:"));
    free(text);
    /* a functional graph: the merge names its inputs; the Embedding's mask operation
     * (not_equal) is gone, tfc's layers passing the mask on */
    CU_ASSERT_EQUAL_FATAL(import(DIR "resnet.keras", NULL, "resnet_text", &rep, &err), TFC_OK);
    snprintf(path, sizeof path, "%s/resnet_text.yaml", tfc_test_tmpdir());
    text = tfc_test_read(path, NULL);
    CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "inputs: ["));
    free(text);
    CU_ASSERT_EQUAL_FATAL(import(DIR "text.keras", NULL, "text_text", &rep, &err), TFC_OK);
    snprintf(path, sizeof path, "%s/text_text.yaml", tfc_test_tmpdir());
    text = tfc_test_read(path, NULL);
    CU_ASSERT_PTR_NULL(text && strstr(text, "not_equal"));
    CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "mask_zero: true"));
    CU_ASSERT_PTR_NULL(text && strstr(text, "backward_layer"));
    free(text);
    /* a frozen functional model inside a functional model, and inside it another: their
     * layers in place, frozen; a layer reading the inner model's input reads what the model
     * was called on; the training=False of the call noted (Keras 3's fit overrides it) */
    CU_ASSERT_EQUAL_FATAL(import(DIR "nested.keras", NULL, "nested_text", &rep, &err), TFC_OK);
    snprintf(path, sizeof path, "%s/nested_text.yaml", tfc_test_tmpdir());
    text = tfc_test_read(path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "- BatchNormalization: {name: batch_normalization, "
                                        "trainable: false}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "      inputs: [rescaling]\n  - Add:\n"
                                        "      name: add\n      trainable: false\n"
                                        "      inputs: [re_lu, conv2d_1]\n"
                                        "  - GlobalAveragePooling2D: {name: "
                                        "global_average_pooling2d}\n"));
    CU_ASSERT_PTR_NULL(strstr(text, "base"));
    CU_ASSERT_PTR_NULL(strstr(text, "block"));
    CU_ASSERT_PTR_NULL(strstr(text, "input_layer:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(rep.notes, "calls 'base' with training=False"));
    free(text);
}

#define LAYER(cls, cfg, inbound)                                                              \
    "{\"module\": \"keras.layers\", \"class_name\": \"" cls "\", \"config\": " cfg            \
    ", \"name\": \"x\", \"inbound_nodes\": " inbound "}"
#define INPUT LAYER("InputLayer", "{\"batch_shape\": [null, 4], \"name\": \"in\"}", "[]")
#define TENSOR(layer) \
    "{\"class_name\": \"__keras_tensor__\", \"config\": {\"keras_history\": [\"" layer "\", 0, 0]}}"
#define CALL(t) "[{\"args\": [" t "], \"kwargs\": {}}]"
#define MODEL(layers, in, out)                                                                \
    "{\"module\": \"keras.src.models.functional\", \"class_name\": \"Functional\",\n"        \
    "\"config\": {\"name\": \"m\", \"layers\": [" layers "],\n\"input_layers\": " in          \
    ", \"output_layers\": " out "}}"

/* A functional model called as a layer, its layers, one input and one output. */
#define NESTED(name, trainable, layers, in, out, inbound)                                     \
    "{\"module\": \"keras.src.models.functional\", \"class_name\": \"Functional\", "       \
    "\"config\": {\"name\": \"" name "\", \"trainable\": " trainable ", \"layers\": ["    \
    layers "], \"input_layers\": " in ", \"output_layers\": " out "}, \"inbound_nodes\": " \
    inbound "}"
#define BASE_IN LAYER("InputLayer", "{\"batch_shape\": [null, 4], \"name\": \"bin\"}", "[]")

#define OP(cls, name, args)                                                                \
    "{\"module\": \"keras.src.ops.numpy\", \"class_name\": \"" cls "\", \"config\": "          \
    "{\"name\": \"" name "\"}, \"inbound_nodes\": [{\"args\": [" args "], \"kwargs\": {}}]}"

/* Elementwise keras.ops operations (MobileNetV3's x + 3.0 and x * (1 / 6), a residual
 * x + y written with `+`) become the layers that compute them exactly. */
static void test_ops(void)
{
    const char *json = MODEL(INPUT ",\n" OP("Add", "add", TENSOR("in") ", 3.0") ",\n"
                             OP("Subtract", "sub", TENSOR("add") ", 1.5") ",\n"
                             OP("Subtract", "rsub", "2, " TENSOR("sub")) ",\n"
                             OP("Multiply", "mul", TENSOR("rsub") ", 0.16666666666666666") ",\n"
                             OP("Multiply", "square", TENSOR("mul") ", " TENSOR("mul")) ",\n"
                             OP("Add", "residual", TENSOR("square") ", " TENSOR("in")),
                             "[\"in\", 0, 0]", "[\"residual\", 0, 0]");
    const char *path = tfc_test_write("ops.json", json, (long)strlen(json));
    tfc_import_report rep;
    tfc_error err;
    tfc_status s = import(path, NULL, "ops", &rep, &err);
    if (s) printf("\n  %s", err.text);
    CU_ASSERT_EQUAL_FATAL(s, TFC_OK);
    char yaml[512];
    snprintf(yaml, sizeof yaml, "%s/ops.yaml", tfc_test_tmpdir());
    char *text = tfc_test_read(yaml, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "- Rescaling: {name: add, scale: 1, offset: 3.0}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "- Rescaling: {name: sub, scale: 1, offset: -1.5}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "- Rescaling: {name: rsub, scale: -1, offset: 2}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "- Rescaling: {name: mul, scale: 0.16666666666666666}"));
    CU_ASSERT_PTR_NOT_NULL(
        strstr(text, "- Multiply:\n      name: square\n      inputs: [mul, mul]"));
    CU_ASSERT_PTR_NOT_NULL(
        strstr(text, "- Add:\n      name: residual\n      inputs: [square, in]"));
    free(text);
    /* and it computes ((2 - (x + 3 - 1.5)) / 6)^2 + x */
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_load(yaml, &err);
    tfc_backend *be = tfc_backend_open("cpu", 1, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, 1, &err), TFC_OK);
    const float x[4] = {0, 1, -2, 0.5f};
    float y[4];
    CU_ASSERT_EQUAL_FATAL(tfc_model_forward(m, x, 1, 0, 0, 0, &err), TFC_OK);
    tfc_model_get_output(m, y);
    for (int i = 0; i < 4; i++) {
        float r = (2 - ((x[i] + 3.0f) - 1.5f)) * (float)(1.0 / 6), want = r * r + x[i];
        CU_ASSERT_DOUBLE_EQUAL(y[i], want, 1e-6);
    }
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* A legacy .h5's model_config (Keras 3's model.save("m.h5")) names no module: a layer whose
 * config has no `trainable` (Discretization: only its dtype; Pipeline: neither) is still a
 * layer, an operation's config (only its name) is still an operation, and a KerasHub layer
 * is named by its registered name (keras_hub>PositionEmbedding). */
#define LEGACY(cls, name, cfg, inbound)                                                       \
    "{\"class_name\": \"" cls "\", \"config\": {\"name\": \"" name "\"" cfg "}, \"name\": \"" \
    name "\", \"inbound_nodes\": " inbound "}"
static void test_legacy_config(void)
{
    const char *json = MODEL(
        LEGACY("InputLayer", "in", ", \"batch_shape\": [null, 5, 4], \"dtype\": \"float32\"", "[]")
        ",\n" LEGACY("keras_hub>PositionEmbedding", "pos", ", \"trainable\": true, \"dtype\": "
               "\"float32\", \"sequence_length\": 5", CALL(TENSOR("in"))) ",\n"
        LEGACY("Add", "sum", "", "[{\"args\": [" TENSOR("in") ", " TENSOR("pos")
               "], \"kwargs\": {}}]") ",\n"
        LEGACY("Discretization", "disc", ", \"bin_boundaries\": [0.0, 0.5], \"output_mode\": "
               "\"one_hot\", \"dtype\": \"float32\"", CALL(TENSOR("sum"))),
        "[\"in\", 0, 0]", "[\"disc\", 0, 0]");
    const char *path = tfc_test_write("legacy.json", json, (long)strlen(json));
    tfc_import_report rep;
    tfc_error err;
    tfc_status s = import(path, NULL, "legacy", &rep, &err);
    if (s) printf("\n  %s", err.text);
    CU_ASSERT_EQUAL_FATAL(s, TFC_OK);
    char yaml[512];
    snprintf(yaml, sizeof yaml, "%s/legacy.yaml", tfc_test_tmpdir());
    char *text = tfc_test_read(yaml, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "- Discretization:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "- PositionEmbedding:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "- Add:")); /* the operation x + y, as a layer */
    if (!strstr(text, "- Discretization:") || !strstr(text, "- PositionEmbedding:"))
        printf("\n%s", text);
    free(text);
    /* an operation whose config has a dtype (zeros_like) is still an operation */
    const char *op = MODEL(
        LEGACY("InputLayer", "in", ", \"batch_shape\": [null, 4], \"dtype\": \"float32\"", "[]")
        ",\n" LEGACY("ZerosLike", "zeros", ", \"dtype\": \"float32\"", CALL(TENSOR("in"))),
        "[\"in\", 0, 0]", "[\"zeros\", 0, 0]");
    path = tfc_test_write("legacy_op.json", op, (long)strlen(op));
    s = import(path, NULL, "legacy_op", &rep, &err);
    CU_ASSERT_EQUAL(s, TFC_ERR_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "'ZerosLike' is a keras.ops operation"));
}

/* Writes `json` and imports it: the status, and the error's text checked for `want`. */
static void expect_refused(const char *json, tfc_status code, const char *want)
{
    const char *path = tfc_test_write("refused.json", json, (long)strlen(json));
    tfc_import_report rep;
    tfc_error err;
    tfc_status s = import(path, NULL, "refused", &rep, &err);
    if (s != code || !strstr(err.text, want))
        printf("\n  want %d '%s', got %d: %s", code, want, s, err.text);
    CU_ASSERT_EQUAL(s, code);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, want));
}

static void test_refused(void)
{
    /* a custom layer, at the JSON's line and column */
    expect_refused(MODEL(INPUT ",\n{\"module\": \"my_layers\", \"class_name\": \"Mine\", "
                         "\"config\": {\"name\": \"mine\"}, \"registered_name\": \"Custom>Mine\", "
                         "\"inbound_nodes\": " CALL(TENSOR("in")) "}",
                         "[\"in\", 0, 0]", "[\"mine\", 0, 0]"),
                   TFC_ERR_USAGE,
                   "refused.json:3:1: error: class_name: 'Mine' is not a Keras layer");
    /* a layer called twice (a shared layer, SPEC §1), the second time with a call argument */
    expect_refused(MODEL(INPUT ",\n" LAYER("Dense", "{\"name\": \"d\", \"units\": 4}",
                                           "[{\"args\": [" TENSOR("in") "], \"kwargs\": {}}, "
                                           "{\"args\": [" TENSOR("in") "], \"kwargs\": "
                                           "{\"use_causal_mask\": true}}]"),
                         "[\"in\", 0, 0]", "[\"d\", 0, 0]"),
                   TFC_ERR_USAGE, "call 1 of layer 'd' has the call argument use_causal_mask");
    /* ... and without a name (fuzz_keras_config found it passing NULL on) */
    expect_refused(MODEL(INPUT ",\n" LAYER("Dense", "{\"units\": 4}",
                                           "[{\"args\": [" TENSOR("in") "], \"kwargs\": {}}, "
                                           "{\"args\": [" TENSOR("in") "], \"kwargs\": {}}]"),
                         "[\"in\", 0, 0]", "[\"d\", 0, 0]"),
                   TFC_ERR_USAGE, "config: a layer called 2 times has no name");
    /* outputs as a dict (several outputs are a list, `outputs:`, test_multi_output.c), and
     * an output that is a layer's second tensor */
    expect_refused(MODEL(INPUT ",\n" LAYER("Dense", "{\"name\": \"d\", \"units\": 4}",
                                           CALL(TENSOR("in"))),
                         "[\"in\", 0, 0]", "{\"y\": [\"d\", 0, 0], \"z\": [\"in\", 0, 0]}"),
                   TFC_ERR_USAGE, "the model's outputs are a dict: tfc's models list their outputs");
    expect_refused(MODEL(INPUT ",\n" LAYER("Dense", "{\"name\": \"d\", \"units\": 4}",
                                           CALL(TENSOR("in"))),
                         "[\"in\", 0, 0]", "[[\"d\", 0, 0], [\"d\", 0, 1]]"),
                   TFC_ERR_USAGE, "output 1 is tensor 1 of layer 'd': tfc's layers have one "
                                  "output");
    /* an operation in the graph that no layer of tfc's computes */
    expect_refused(MODEL(INPUT ",\n{\"module\": \"keras.src.ops.numpy\", \"class_name\": "
                         "\"Exp\", \"config\": {\"name\": \"exp\"}, \"inbound_nodes\": "
                         CALL(TENSOR("in")) "}",
                         "[\"in\", 0, 0]", "[\"exp\", 0, 0]"),
                   TFC_ERR_USAGE, "'Exp' is a keras.ops operation");
    /* a call argument tfc has no use for */
    expect_refused(MODEL(INPUT ",\n" LAYER("Dense", "{\"name\": \"d\", \"units\": 4}",
                                           "[{\"args\": [" TENSOR("in") "], \"kwargs\": "
                                           "{\"attention_mask\": " TENSOR("in") "}}]"),
                         "[\"in\", 0, 0]", "[\"d\", 0, 0]"),
                   TFC_ERR_USAGE, "is called with attention_mask");
    /* a backward layer of its own */
    expect_refused(MODEL(INPUT ",\n" LAYER("Bidirectional", "{\"name\": \"b\", \"layer\": "
                         "{\"class_name\": \"LSTM\", \"config\": {\"units\": 2}}, "
                         "\"backward_layer\": {\"class_name\": \"GRU\", \"config\": "
                         "{\"units\": 2, \"go_backwards\": true}}}", CALL(TENSOR("in"))),
                         "[\"in\", 0, 0]", "[\"b\", 0, 0]"),
                   TFC_ERR_USAGE, "a backward layer of its own is not supported");
    /* what tfc's layer cannot take: its own error at model.yaml's line; the file stays */
    expect_refused(MODEL(INPUT ",\n" LAYER("Dense", "{\"name\": \"d\", \"units\": 4, "
                                           "\"lora_rank\": 2}", CALL(TENSOR("in"))),
                         "[\"in\", 0, 0]", "[\"d\", 0, 0]"),
                   TFC_ERR_CONFIG, "refused.yaml:");
    char path[512];
    snprintf(path, sizeof path, "%s/refused.yaml", tfc_test_tmpdir());
    char *text = tfc_test_read(path, NULL);
    CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "lora_rank: 2"));
    free(text);
    /* a functional model inside: called twice (a Siamese network's shared tower), on two
     * tensors, of two inputs; a layer inside named as one outside; inside a Sequential
     * inside the model */
    expect_refused(MODEL(INPUT ",\n" NESTED("tower", "true", BASE_IN ",\n" LAYER("Dense",
                         "{\"name\": \"bd\", \"units\": 4}", CALL(TENSOR("bin"))),
                         "[\"bin\", 0, 0]", "[\"bd\", 0, 0]", "[{\"args\": [" TENSOR("in")
                         "], \"kwargs\": {}}, {\"args\": [" TENSOR("in") "], \"kwargs\": {}}]"),
                         "[\"in\", 0, 0]", "[\"tower\", 0, 0]"),
                   TFC_ERR_USAGE, "model 'tower' is called 2 times (a shared model)");
    expect_refused(MODEL(INPUT ",\n" LAYER("Dense", "{\"name\": \"d\", \"units\": 4}",
                                           CALL(TENSOR("in"))) ",\n"
                         NESTED("two", "true", BASE_IN ",\n" LAYER("Dense",
                         "{\"name\": \"bd\", \"units\": 4}", CALL(TENSOR("bin"))),
                         "[\"bin\", 0, 0]", "[\"bd\", 0, 0]", "[{\"args\": [[" TENSOR("in")
                         ", " TENSOR("d") "]], \"kwargs\": {}}]"),
                         "[\"in\", 0, 0]", "[\"two\", 0, 0]"),
                   TFC_ERR_USAGE, "model 'two' is called on 2 tensors");
    expect_refused(MODEL(INPUT ",\n" NESTED("pair", "true", BASE_IN ",\n" LAYER("Dense",
                         "{\"name\": \"bd\", \"units\": 4}", CALL(TENSOR("bin"))),
                         "[[\"bin\", 0, 0], [\"bd\", 0, 0]]", "[\"bd\", 0, 0]",
                         CALL(TENSOR("in"))), "[\"in\", 0, 0]", "[\"pair\", 0, 0]"),
                   TFC_ERR_USAGE, "tfc's models have one input; this one has 2");
    expect_refused(MODEL(INPUT ",\n" NESTED("base", "true", BASE_IN ",\n" LAYER("Dense",
                         "{\"name\": \"d\", \"units\": 4}", CALL(TENSOR("bin"))),
                         "[\"bin\", 0, 0]", "[\"d\", 0, 0]", CALL(TENSOR("in"))) ",\n"
                         LAYER("Dense", "{\"name\": \"d\", \"units\": 2}",
                               CALL(TENSOR("base"))),
                         "[\"in\", 0, 0]", "[\"d\", 0, 0]"),
                   TFC_ERR_USAGE, "two layers are named 'd' (a functional model's layers are "
                                  "written in place");
    expect_refused(MODEL(INPUT ",\n" LAYER("Sequential", "{\"name\": \"s\", \"layers\": ["
                         NESTED("base", "true", BASE_IN, "[\"bin\", 0, 0]",
                                "[\"bin\", 0, 0]", "[]") "]}", CALL(TENSOR("in"))),
                         "[\"in\", 0, 0]", "[\"s\", 0, 0]"),
                   TFC_ERR_USAGE, "a functional model inside a Sequential inside the model");
    /* a subclassed model; not JSON at all */
    expect_refused("{\"class_name\": \"MyModel\", \"config\": {}}", TFC_ERR_USAGE,
                   "tfc imports Sequential and functional models");
    expect_refused("[1, 2", TFC_ERR_CONFIG, "refused.json:");
}

/* A float32 input into an Embedding (keras.io's transformer example: Keras casts the floats
 * to ids) is tfc's int32 input; into an Embedding and a Dense it stays float32, the
 * Embedding's error. */
static void test_input_ids(void)
{
    const char *ids = MODEL(INPUT ",\n" LAYER("Embedding", "{\"name\": \"e\", \"input_dim\": "
                            "10, \"output_dim\": 3}", CALL(TENSOR("in"))),
                            "[\"in\", 0, 0]", "[\"e\", 0, 0]");
    const char *path = tfc_test_write("ids.json", ids, (long)strlen(ids));
    tfc_import_report rep;
    tfc_error err;
    CU_ASSERT_EQUAL(import(path, NULL, "ids", &rep, &err), TFC_OK);
    char yaml[512];
    snprintf(yaml, sizeof yaml, "%s/ids.yaml", tfc_test_tmpdir());
    char *text = tfc_test_read(yaml, NULL);
    CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "batch_shape: [null, 4]\n      dtype: int32"));
    CU_ASSERT_PTR_NOT_NULL(strstr(rep.notes, "the model's input is float32 in Keras"));
    free(text);
    expect_refused(MODEL(INPUT ",\n" LAYER("Embedding", "{\"name\": \"e\", \"input_dim\": "
                         "10, \"output_dim\": 3}", CALL(TENSOR("in"))) ",\n"
                         LAYER("Dense", "{\"name\": \"d\", \"units\": 3}", CALL(TENSOR("in")))
                         ",\n" LAYER("Add", "{\"name\": \"a\"}", "[{\"args\": [["
                         TENSOR("e") ", " TENSOR("d") "]], \"kwargs\": {}}]"),
                         "[\"in\", 0, 0]", "[\"a\", 0, 0]"),
                   TFC_ERR_CONFIG, "reads token ids");
}

/* keras.applications' own layers: ConvNeXt's LayerScale (module keras.src.applications.
 * convnext) is tfc's; another class of that module is no Keras layer. */
static void test_applications_layer(void)
{
#define APP_LAYER(cls, cfg)                                                                   \
    "{\"module\": \"keras.src.applications.convnext\", \"class_name\": \"" cls "\", "       \
    "\"config\": " cfg ", \"registered_name\": \"" cls "\", \"inbound_nodes\": "            \
    CALL(TENSOR("in")) "}"
    const char *json = MODEL(INPUT ",\n" APP_LAYER("LayerScale", "{\"name\": \"ls\", "
                             "\"init_values\": 1e-06, \"projection_dim\": 4}"),
                             "[\"in\", 0, 0]", "[\"ls\", 0, 0]");
    const char *path = tfc_test_write("app.json", json, (long)strlen(json));
    tfc_import_report rep;
    tfc_error err;
    CU_ASSERT_EQUAL(import(path, NULL, "app", &rep, &err), TFC_OK);
    char yaml[512];
    snprintf(yaml, sizeof yaml, "%s/app.yaml", tfc_test_tmpdir());
    char *text = tfc_test_read(yaml, NULL);
    CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "- LayerScale: {name: ls, init_values: 1e-06, "
                                                "projection_dim: 4}"));
    free(text);
    expect_refused(MODEL(INPUT ",\n" APP_LAYER("StochasticDepth", "{\"name\": \"sd\", "
                         "\"drop_path_rate\": 0.1}"), "[\"in\", 0, 0]", "[\"sd\", 0, 0]"),
                   TFC_ERR_USAGE, "'StochasticDepth' is not a Keras layer");
#undef APP_LAYER
    /* Inception-ResNet's CustomScaleLayer, called on a list of two tensors (the input and a
     * Dense branch of it) */
    const char *join =
        MODEL(INPUT ",\n" LAYER("Dense", "{\"name\": \"b\", \"units\": 4}", CALL(TENSOR("in")))
              ",\n{\"module\": \"keras.src.applications.inception_resnet_v2\", \"class_name\": "
              "\"CustomScaleLayer\", \"config\": {\"name\": \"s\", \"scale\": 0.17}, "
              "\"registered_name\": \"CustomScaleLayer\", \"inbound_nodes\": "
              "[{\"args\": [[" TENSOR("in") ", " TENSOR("b") "]], \"kwargs\": {}}]}",
              "[\"in\", 0, 0]", "[\"s\", 0, 0]");
    path = tfc_test_write("join.json", join, (long)strlen(join));
    CU_ASSERT_EQUAL(import(path, NULL, "join", &rep, &err), TFC_OK);
    if (err.count) printf("\n%s", err.text);
    snprintf(yaml, sizeof yaml, "%s/join.yaml", tfc_test_tmpdir());
    text = tfc_test_read(yaml, NULL);
    CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "  - CustomScaleLayer:\n      name: s\n"
                                                "      scale: 0.17\n      inputs: [in, b]\n"));
    free(text);
}

/* A model file tfc cannot build is written and kept; the user edits it and imports the
 * weights into the edited file (`model`). */
static void test_edited(void)
{
    /* Keras's variable-length input: tfc needs the longest sequence */
    const char *json =
        "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"v\", \"layers\": [\n"
        "{\"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": [null, null],"
        " \"dtype\": \"int32\", \"name\": \"ids\"}},\n"
        "{\"class_name\": \"Embedding\", \"config\": {\"name\": \"embedding\", "
        "\"input_dim\": 20, \"output_dim\": 4, \"mask_zero\": true}},\n"
        "{\"class_name\": \"GRU\", \"config\": {\"name\": \"gru\", \"units\": 3}}]}}";
    const char *path = tfc_test_write("varlen.json", json, (long)strlen(json));
    tfc_import_report rep;
    tfc_error err;
    CU_ASSERT_EQUAL(import(path, NULL, "varlen", &rep, &err), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "varlen.yaml:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "max_length"));
    char yaml[512];
    snprintf(yaml, sizeof yaml, "%s/varlen.yaml", tfc_test_tmpdir());
    char *text = tfc_test_read(yaml, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    const char *at = strstr(text, "batch_shape: [null, null]");
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    char edited[4096];
    snprintf(edited, sizeof edited, "%.*smax_length: 12\n      %s", (int)(at - text), text, at);
    free(text);
    const char *fixed = tfc_test_write("varlen_fixed.yaml", edited, (long)strlen(edited));
    char out[512];
    snprintf(out, sizeof out, "%s/varlen_fixed.safetensors", tfc_test_tmpdir());
    tfc_error_clear(&err);
    tfc_status s = tfc_keras_import(path, NULL, fixed, NULL, out, &rep, &err);
    if (s) printf("\n  %s", err.text);
    CU_ASSERT_EQUAL(s, TFC_OK);
    CU_ASSERT_EQUAL(rep.tensors, 0);
    /* weights into a given model file: the same tensors as the conversion's own */
    CU_ASSERT_EQUAL_FATAL(import(DIR "mlp.keras", NULL, "mlp_given", &rep, &err), TFC_OK);
    snprintf(yaml, sizeof yaml, "%s/mlp_given.yaml", tfc_test_tmpdir());
    snprintf(out, sizeof out, "%s/mlp_given2.safetensors", tfc_test_tmpdir());
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_keras_import(DIR "mlp.keras", NULL, yaml, NULL, out, &rep, &err), TFC_OK);
    expect_same_weights(out, DIR "mlp.expect.safetensors");
    /* ...and into one whose layers differ: the tensor that has no weight, named */
    const char *other = "layers:\n  - InputLayer: {batch_shape: [null, 8]}\n"
                        "  - Dense: {name: dense, units: 16}\n"
                        "  - Dense: {name: dense_1, units: 3}\n";
    const char *op = tfc_test_write("other.yaml", other, (long)strlen(other));
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_keras_import(DIR "mlp.keras", NULL, op, NULL, out, &rep, &err),
                    TFC_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "batch_normalization"));
}

/* The tool: its default folder, its refusal to overwrite, its summary line. */
static void test_tool(void)
{
    char cmd[1024];
    const char *bin = tfc_test_bin("tfc-import");
    if (!bin) return;
    char cwd[512];
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
    snprintf(cmd, sizeof cmd, "cd %s && %s/tfc-import %s/" DIR "text.keras", tfc_test_tmpdir(),
             bin, cwd);
    tfc_test_sh_expect(0, cmd, "Keras 3.15.1 \"", "text/weights.safetensors");
    tfc_test_sh_expect(2, cmd, "already holds model.yaml", "--overwrite");
    snprintf(cmd, sizeof cmd, "cd %s && %s/tfc-import %s/" DIR "text.keras --model text/model.yaml "
             "--out text", tfc_test_tmpdir(), bin, cwd);
    tfc_test_sh_expect(2, cmd, "already holds weights.safetensors", NULL);
    snprintf(cmd, sizeof cmd, "cd %s && %s/tfc-import %s/" DIR "text.keras --overwrite --out t2",
             tfc_test_tmpdir(), bin, cwd);
    tfc_test_sh_expect(0, cmd, "t2/model.yaml", "parameters)");
    snprintf(cmd, sizeof cmd, "%s/tfc-import --help", bin);
    tfc_test_sh_expect(0, cmd, "MODEL.keras|MODEL.json|MODEL.h5", "--weights");
    snprintf(cmd, sizeof cmd, "%s/tfc-import /nonexistent.keras --out %s/none", bin,
             tfc_test_tmpdir());
    tfc_test_sh_expect(2, cmd, "/nonexistent.keras", NULL);
}

/* A model compiled with Keras's metric objects (the serialized ones of its compile_config,
 * as Keras 3 writes them: counted metrics, loss functions' means) imports with each
 * metric's arguments off Keras's defaults, under the names Keras gave them. */
static void test_metrics(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    size_t len;
    void *json = mlp_config(&len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(json);
    json_t *root = json_loadb(json, len, 0, NULL);
    free(json);
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    static const char metrics[] =
        "[\"accuracy\", {\"module\": \"keras.metrics\", \"class_name\": \"AUC\", \"config\": "
        "{\"name\": \"pr\", \"dtype\": \"float32\", \"num_thresholds\": 200, \"curve\": \"PR\", "
        "\"summation_method\": \"interpolation\", \"multi_label\": false, \"num_labels\": null, "
        "\"label_weights\": null, \"from_logits\": false}, \"registered_name\": null}, "
        "\"recall\", {\"module\": \"keras.metrics\", \"class_name\": \"OneHotMeanIoU\", "
        "\"config\": {\"num_classes\": 3, \"name\": \"one_hot_mean_io_u\", \"dtype\": \"int32\", "
        "\"ignore_class\": null, \"sparse_y_pred\": false, \"axis\": -1}, "
        "\"registered_name\": null}, {\"module\": \"keras.metrics\", \"class_name\": "
        "\"F1Score\", \"config\": {\"name\": \"f1_score\", \"dtype\": \"float32\", "
        "\"average\": \"macro\", \"threshold\": null}, \"registered_name\": null}, "
        "{\"module\": \"keras.metrics\", \"class_name\": \"Precision\", \"config\": "
        "{\"name\": \"precision\", \"dtype\": \"float32\", \"thresholds\": [0.3], "
        "\"top_k\": null, \"class_id\": null}, \"registered_name\": null}, {\"module\": "
        "\"keras.metrics\", \"class_name\": \"CategoricalCrossentropy\", \"config\": {\"name\": "
        "\"cce\", \"dtype\": \"float32\", \"from_logits\": false, \"label_smoothing\": 0, "
        "\"axis\": -1}, \"registered_name\": null}, {\"module\": \"keras.metrics\", "
        "\"class_name\": \"KLDivergence\", \"config\": {\"name\": \"kl_divergence\", "
        "\"dtype\": \"float32\"}, \"registered_name\": null}]";
    json_t *compile = json_object();
    json_object_set_new(compile, "loss", json_string("categorical_crossentropy"));
    json_object_set_new(compile, "metrics", json_loads(metrics, 0, NULL));
    json_object_set_new(root, "compile_config", compile);
    char *text = json_dumps(root, JSON_INDENT(1));
    json_decref(root);
    const char *path = tfc_test_write("mlp_metrics.json", text, -1);
    free(text);
    tfc_import_report rep;
    tfc_status s = import(path, NULL, "mlp_metrics", &rep, &err);
    if (s) printf("\n  %s", err.text);
    CU_ASSERT_EQUAL_FATAL(s, TFC_OK);
    char yaml[512];
    snprintf(yaml, sizeof yaml, "%s/mlp_metrics.yaml", tfc_test_tmpdir());
    char *written = tfc_test_read(yaml, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(written);
    CU_ASSERT_PTR_NOT_NULL(strstr(written, "AUC"));
    CU_ASSERT_PTR_NOT_NULL(strstr(written, "curve: PR"));
    CU_ASSERT_PTR_NOT_NULL(strstr(written, "CategoricalCrossentropy: {name: cce}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(written, "- kl_divergence"));
    CU_ASSERT_PTR_NULL(strstr(written, "is not tfc's"));
    free(written);
    CU_ASSERT_PTR_NULL(strstr(rep.notes, "BinaryAccuracy"));
    tfc_model *m = tfc_model_load(yaml, &err);
    if (!m) printf("\n  %s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    static const char *const names[] = {"accuracy", "pr", "recall", "one_hot_mean_io_u",
                                        "f1_score", "precision", "cce", "kl_divergence"};
    CU_ASSERT_EQUAL(tfc_model_nmetrics(m), 8);
    for (int i = 0; i < 8 && i < tfc_model_nmetrics(m); i++)
        CU_ASSERT_STRING_EQUAL(tfc_model_metric(m, i)->name, names[i]);
    tfc_model_free(m);
    /* BinaryAccuracy beside a from_logits loss (the last Dense made linear) keeps Keras's
     * threshold on the logits, with a note saying what that means */
    json = mlp_config(&len);
    root = json_loadb(json, len, 0, NULL);
    free(json);
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    json_t *layers = json_object_get(json_object_get(root, "config"), "layers");
    json_t *last = json_object_get(json_array_get(layers, json_array_size(layers) - 1), "config");
    CU_ASSERT_PTR_NOT_NULL_FATAL(last);
    json_object_set_new(last, "activation", json_string("linear"));
    static const char logits[] =
        "{\"loss\": {\"module\": \"keras.losses\", \"class_name\": \"BinaryCrossentropy\", "
        "\"config\": {\"from_logits\": true}, \"registered_name\": null}, \"metrics\": "
        "[{\"module\": \"keras.metrics\", \"class_name\": \"BinaryAccuracy\", \"config\": "
        "{\"name\": \"acc\", \"dtype\": \"float32\", \"threshold\": 0.5}, "
        "\"registered_name\": null}]}";
    json_object_set_new(root, "compile_config", json_loads(logits, 0, NULL));
    text = json_dumps(root, JSON_INDENT(1));
    json_decref(root);
    path = tfc_test_write("mlp_logits.json", text, -1);
    free(text);
    s = import(path, NULL, "mlp_logits", &rep, &err);
    if (s) printf("\n  %s", err.text);
    CU_ASSERT_EQUAL(s, TFC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(rep.notes, "BinaryAccuracy thresholds the logits"));
    snprintf(yaml, sizeof yaml, "%s/mlp_logits.yaml", tfc_test_tmpdir());
    m = tfc_model_load(yaml, &err);
    CU_ASSERT_PTR_NOT_NULL(m);
    if (m) CU_ASSERT_STRING_EQUAL(tfc_model_metric(m, 0)->name, "acc");
    tfc_model_free(m);
}

TFC_TEST_MAIN("import", {"archives", test_archives}, {"other_forms", test_other_forms},
              {"keras2", test_keras2}, {"legacy_config", test_legacy_config},
              {"yaml", test_yaml}, {"refused", test_refused},
              {"input_ids", test_input_ids}, {"applications_layer", test_applications_layer},
              {"ops", test_ops},
              {"edited", test_edited}, {"metrics", test_metrics},
              {"tool", test_tool})
