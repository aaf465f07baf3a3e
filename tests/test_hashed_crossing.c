/* HashedCrossing (src/layers/hashed_crossing.c, the backend's hash_cross_forward in
 * cpu/cpu_encode.c, the hash in core/encode.h): Keras 3's bins, value by value, for two and
 * three inputs over the whole int32 range (tests/ref/keras_hashed_crossing.py, which runs
 * Keras's layer and so TensorFlow's sparse_cross_hashed), Keras's one_hot output through a
 * model, int32 bin ids into an Embedding, the argument and input errors, the GPU's refusal
 * (CPU-first) and the ONNX export's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/onnx.h"
#include "core/encode.h"
#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "graph/model.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "layers/layer.h"
#include "testutil.h"

/* Bins of (a, b) and (a, b, c) into 16777213 and of (a, b) into 7, against Keras's: exact. */
static void test_keras_table(void)
{
    tfc_st_file *f = tfc_test_fixture("preprocessing", "cross_table");
    const tfc_st_tensor *t[6];
    static const char *const names[] = {"a", "b", "c", "bins2", "bins3", "small2"};
    for (int i = 0; i < 6; i++) {
        t[i] = tfc_st_find(f, names[i]);
        CU_ASSERT_FATAL(t[i] && t[i]->dtype == TFC_I32 && t[i]->numel == t[0]->numel);
    }
    const int32_t *x[3] = {t[0]->data, t[1]->data, t[2]->data};
    const int32_t *want2 = t[3]->data, *want3 = t[4]->data, *want7 = t[5]->data;
    const int64_t n = t[0]->numel;
    CU_ASSERT(n > 4000);
    int64_t worst = 0;
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t got[3] = {tfc_encode_cross(16777213, 2, x, i),
                                tfc_encode_cross(16777213, 3, x, i), tfc_encode_cross(7, 2, x, i)};
        const int64_t want[3] = {want2[i], want3[i], want7[i]};
        for (int k = 0; k < 3; k++) {
            const int64_t d = llabs(got[k] - want[k]);
            bad += d != 0;
            if (d > worst) worst = d;
        }
    }
    if (bad) fprintf(stderr, "\n%d of %lld bins differ from Keras's (max |diff| %lld)\n", bad,
                     (long long)(3 * n), (long long)worst);
    CU_ASSERT_EQUAL(bad, 0);
    tfc_st_close(f);
}

/* A model's HashedCrossing of its input with itself (2 and 3 times) in one_hot mode, run on
 * the CPU backend, against Keras's output. */
static void test_keras_one_hot(void)
{
    tfc_st_file *f = tfc_test_fixture("preprocessing", "cross_table");
    const tfc_st_tensor *xt = tfc_st_find(f, "x");
    CU_ASSERT_FATAL(xt && xt->dtype == TFC_I32 && xt->numel == 64);
    for (int k = 2; k <= 3; k++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [1], dtype: int32}\nlayers:\n"
                 "  - HashedCrossing: {num_bins: 5, output_mode: one_hot, inputs: [input, "
                 "input%s]}\n  - Dense: {units: 2}\n", k == 3 ? ", input" : "");
        float *want = tfc_test_tensor_at(f, "", k == 2 ? "one_hot2" : "one_hot3", 64 * 5);
        tfc_model *m = tfc_test_model(yaml);
        TFC_ASSERT(m != NULL);
        tfc_backend *be = tfc_cpu_backend_create(1);
        tfc_error err;
        tfc_error_clear(&err);
        TFC_ASSERT(tfc_model_bind(m, be, 64, &err) == TFC_OK);
        tfc_layer *l = tfc_model_layer(m, 0);
        CU_ASSERT_EQUAL(l->out_dtype, TFC_F32);
        CU_ASSERT_EQUAL(tfc_layer_out_numel(l), 5);
        tfc_exec ex = {.be = be, .batch = 64};
        const void *x[3] = {xt->data, xt->data, xt->data};
        float y[64 * 5];
        l->ops->forward(l, &ex, x, y);
        double worst = 0;
        CU_ASSERT_EQUAL(tfc_test_mismatches(y, want, 64 * 5, &worst), 0);
        CU_ASSERT(worst == 0);
        free(want);
        tfc_model_free(m);
        tfc_backend_free(be);
    }
    tfc_st_close(f);
}

/* output_mode int: int32 bin ids of the input's shape, read by an Embedding of num_bins. */
static void test_int_ids(void)
{
    tfc_model *m = tfc_test_model("input: {shape: [1], dtype: int32}\nlayers:\n"
                                  "  - Hashing: {name: h, num_bins: 50, inputs: input}\n"
                                  "  - HashedCrossing: {name: c, num_bins: 11, "
                                  "inputs: [input, h]}\n"
                                  "  - Embedding: {input_dim: 11, output_dim: 2}\n"
                                  "  - Flatten: {}\n");
    TFC_ASSERT(m != NULL);
    tfc_layer *l = tfc_model_layer(m, 1);
    CU_ASSERT_EQUAL(l->out_dtype, TFC_I32);
    CU_ASSERT_EQUAL(l->out_id_limit, 11);
    CU_ASSERT_EQUAL(l->out_shape.ndim, 1);
    CU_ASSERT_EQUAL(l->out_shape.dim[0], 1);
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(tfc_model_bind(m, be, 4, &err) == TFC_OK);
    const int32_t a[4] = {-2147483647 - 1, -1, 0, 2147483647}, b[4] = {7, 7, -9, 123456789};
    const int32_t *x[2] = {a, b};
    int32_t y[4];
    tfc_exec ex = {.be = be, .batch = 4};
    l->ops->forward(l, &ex, (const void *const *)x, (float *)y);
    for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(y[i], tfc_encode_cross(11, 2, x, i));
    /* the whole model runs: the Embedding reads the ids */
    TFC_ASSERT(tfc_model_init_weights(m, 1, &err) == TFC_OK);
    CU_ASSERT_EQUAL(tfc_model_forward(m, a, 4, 0, 1, 0, &err), TFC_OK);
    tfc_model_free(m);
    tfc_backend_free(be);
}

static void expect_error(const char *input, const char *layers, const char *what)
{
    char yaml[768];
    snprintf(yaml, sizeof yaml, "input: {shape: %s}\nlayers:\n%s  - Dense: {units: 2}\n", input,
             layers);
    tfc_error err = tfc_test_model_error(yaml);
    if (!strstr(err.text, what)) fprintf(stderr, "\n%s: %s\n", layers, err.text);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, what));
}

static void test_errors(void)
{
    const char *i32 = "[1], dtype: int32";
    expect_error(i32, "  - HashedCrossing: {num_bins: 4, output_mode: one_hot, sparse: true, "
                 "inputs: [input, input]}\n", "HashedCrossing.sparse");
    expect_error(i32, "  - HashedCrossing: {num_bins: 4, output_mode: multi_hot, "
                 "inputs: [input, input]}\n", "HashedCrossing.output_mode");
    expect_error(i32, "  - HashedCrossing: {output_mode: one_hot, inputs: [input, input]}\n",
                 "num_bins");
    expect_error(i32, "  - HashedCrossing: {num_bins: 4, output_mode: one_hot, "
                 "dtype: float32, inputs: [input, input]}\n", "HashedCrossing.dtype");
    expect_error(i32, "  - HashedCrossing: {num_bins: 4, output_mode: one_hot}\n", "input");
    expect_error("[2], dtype: int32", "  - HashedCrossing: {num_bins: 4, output_mode: one_hot, "
                 "inputs: [input, input]}\n", "one value per example");
    expect_error("[1]", "  - HashedCrossing: {num_bins: 4, output_mode: one_hot, "
                 "inputs: [input, input]}\n", "integer dtype");
    /* the error points at the argument, FILE:LINE:COL */
    tfc_error err = tfc_test_model_error("input: {shape: [1], dtype: int32}\nlayers:\n"
                                         "  - HashedCrossing: {inputs: [input, input],\n"
                                         "      num_bins: 0, output_mode: one_hot}\n"
                                         "  - Dense: {units: 2}\n");
    CU_ASSERT_EQUAL(err.line, 4);
    CU_ASSERT_STRING_EQUAL(err.key, "layers[0].HashedCrossing.num_bins");
}

/* CPU-first: a device backend refuses it at bind, naming it. */
static void test_cpu_first(void)
{
    tfc_test_expect_cpu_first("input: {shape: [1], dtype: int32}\nlayers:\n"
                              "  - HashedCrossing: {name: x, num_bins: 4, output_mode: one_hot, "
                              "inputs: [input, input]}\n", "x", "HashedCrossing");
}

/* No ONNX form: the export fails naming the layer, writing nothing. */
static void test_onnx_refused(void)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *m = tfc_test_model("input: {shape: [1], dtype: int32}\nlayers:\n"
                                  "  - HashedCrossing: {name: s, num_bins: 4, "
                                  "output_mode: one_hot, inputs: [input, input]}\n");
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(m && tfc_model_bind_inference(m, be, 2, &err) == TFC_OK);
    const char *path = tfc_test_path("cross.onnx");
    remove(path);
    tfc_onnx_options o = {.opset = 17};
    CU_ASSERT_EQUAL(tfc_onnx_export(m, &o, path, &err), TFC_ERR_USAGE);
    if (!strstr(err.msg, "(HashedCrossing)")) fprintf(stderr, "\n%s\n", err.msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 's'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "(HashedCrossing)"));
    FILE *f = fopen(path, "rb");
    CU_ASSERT_PTR_NULL(f);
    if (f) fclose(f);
    tfc_model_free(m);
    tfc_backend_free(be);
}

TFC_TEST_MAIN("hashed_crossing", {"keras_table", test_keras_table},
              {"keras_one_hot", test_keras_one_hot}, {"int_ids", test_int_ids},
              {"errors", test_errors}, {"cpu_first", test_cpu_first},
              {"onnx_refused", test_onnx_refused})
