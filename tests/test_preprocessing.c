/* CategoryEncoding, Discretization, IntegerLookup and Hashing (src/layers/encoding.c, the
 * backend's encode_forward in cpu/cpu_encode.c, the per-row math in core/encode.h): Keras 3
 * parity of outputs and of the gradients of
 * the layers after them (tests/ref/keras_preprocessing_numeric.py), the shapes Keras gives,
 * the argument errors, the run-time check of out-of-range token ids, the int32 indices
 * between layers (Embedding and CategoryEncoding read them, other layers refuse them),
 * two small models that train, the GPU's refusal (CPU-first) and the ONNX export's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/onnx.h"
#include "core/encode.h"
#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "data/data.h"
#include "graph/model.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "layers/layer.h"
#include "solver/solver.h"
#include "testutil.h"

static const char *const cases[] = {
    "ce_one_hot",     "ce_one_hot_seq", "ce_multi_hot",      "ce_count",
    "ce_float_count", "disc_int_embed", "disc_one_hot",      "disc_multi_hot",
    "disc_count",     "disc_ints",      "il_int_embed",      "il_oov2_multi_hot",
    "il_count_padded", "il_one_hot",    "il_then_ce",        "il_invert",
    "hash_int_embed", "hash_mask_one_hot", "hash_salt_count", "hash_salt2_multi_hot",
    NULL};

/* Keras 3 parity, exact: the encodings are small integers, so the outputs and gradients of
 * the Dense and Embedding after them are Keras's within float32 sums. */
static void test_keras_parity(void)
{
    static const tfc_keras_parity p = {.dir = "preprocessing", .tol = 1e-6, .grad_floor = 1e-3,
                                       .all_grads = 1};
    tfc_test_keras_cases(&p, cases);
}

/* Hashing's hash, value by value, against TensorFlow's buckets (Keras's Hashing runs
 * tf.strings.to_hash_bucket_fast, or _strong with a salt, on the values' decimal strings):
 * 2602 int32 values (every one from -300 to 299, 2000 drawn over the whole range, both ends)
 * and 306 float32 values up to 20 digits once cast to int64, into 16777213 buckets. */
static void test_hash_table(void)
{
    tfc_st_file *f = tfc_test_fixture("preprocessing", "hash_table");
    const tfc_st_tensor *xt = tfc_st_find(f, "x");
    CU_ASSERT_FATAL(xt && xt->dtype == TFC_I32);
    const int32_t *x = xt->data;
    int64_t n = xt->numel, nf = 0;
    float *fast = tfc_test_tensor_at(f, "", "fast", n);
    float *strong = tfc_test_tensor_at(f, "", "strong", n);
    float *xf = tfc_test_tensor(f, "xf", &nf), *fastf = tfc_test_tensor_at(f, "", "fastf", nf);
    CU_ASSERT_FATAL(n == 2602 && nf == 306);
    tfc_encode_desc d = {.map = TFC_ENCODE_HASH, .n = 16777213};
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += tfc_encode_index(&d, NULL, x[i]) != (int64_t)fast[i];
    d.salted = 1, d.key[0] = 133, d.key[1] = 7;
    for (int64_t i = 0; i < n; i++)
        bad += tfc_encode_index(&d, NULL, x[i]) != (int64_t)strong[i];
    d.salted = 0;
    for (int64_t i = 0; i < nf; i++) bad += tfc_encode_index(&d, NULL, xf[i]) != (int64_t)fastf[i];
    if (bad) fprintf(stderr, "\n%d hashes differ from TensorFlow's\n", bad);
    CU_ASSERT_EQUAL(bad, 0);
    free(fast), free(strong), free(xf), free(fastf);
    tfc_st_close(f);
}

/* The encodings themselves, value by value, on the CPU backend: Discretization's side at a
 * boundary, IntegerLookup's floormod OOV indices and invert, CategoryEncoding's count. */
static void test_encodings(void)
{
    static const struct {
        const char *input, *layer;
        int ints, int_out;
        double x[6];
        float y[24];
        int ny;
    } c[] = {
        {"[6]", "Discretization: {bin_boundaries: [0.0, 1.0, 2.0]}", 0, 1,
         {-1, 0, 0.5, 1, 2, 3}, {0, 1, 1, 2, 3, 3}, 6},
        {"[6]", "IntegerLookup: {vocabulary: [12, 7, 30], num_oov_indices: 2}", 1, 1,
         {12, 7, 30, 5, -5, 4}, {2, 3, 4, 1, 1, 0}, 6},
        {"[6]", "IntegerLookup: {vocabulary: [12, 7, 30], invert: true, oov_token: -9}", 1, 0,
         {0, 1, 2, 3, 4, -1}, {-9, 12, 7, 30, -9, -9}, 6},
        {"[6]", "CategoryEncoding: {num_tokens: 4, output_mode: count}", 1, 0,
         {3, 3, 0, 1, 3, 0}, {2, 1, 0, 3}, 4},
        {"[6]", "Discretization: {bin_boundaries: [0.0, 1.0], output_mode: multi_hot}", 0, 0,
         {-1, -2, 5, 5, 0.5, -0.5}, {1, 1, 1}, 3},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml, "input: {shape: %s%s}\nlayers:\n  - %s\n%s", c[i].input,
                 c[i].ints ? ", dtype: int32" : "", c[i].layer,
                 c[i].int_out ? "  - Embedding: {input_dim: 64, output_dim: 1}\n" : "");
        tfc_model *m = tfc_test_model(yaml);
        TFC_ASSERT(m != NULL);
        tfc_backend *be = tfc_cpu_backend_create(1);
        tfc_error err;
        tfc_error_clear(&err);
        TFC_ASSERT(tfc_model_bind(m, be, 1, &err) == TFC_OK);
        TFC_ASSERT(tfc_model_init_weights(m, 1, &err) == TFC_OK);
        int32_t xi[6];
        float xf[6];
        for (int k = 0; k < 6; k++) xi[k] = (int32_t)c[i].x[k], xf[k] = (float)c[i].x[k];
        tfc_layer *l = tfc_model_layer(m, 0);
        CU_ASSERT_EQUAL(tfc_layer_out_numel(l), c[i].ny);
        CU_ASSERT_EQUAL(l->out_dtype, c[i].int_out ? TFC_I32 : TFC_F32);
        /* the layer alone, on the bound CPU backend (host memory) */
        tfc_exec ex = {.be = be, .batch = 1};
        const void *x[1] = {c[i].ints ? (const void *)xi : (const void *)xf};
        float y[24];
        l->ops->forward(l, &ex, x, y);
        for (int k = 0; k < c[i].ny; k++) {
            float got = c[i].int_out ? (float)((const int32_t *)y)[k] : y[k];
            if (got != c[i].y[k]) {
                fprintf(stderr, "\n%s: y[%d] %g, want %g\n", c[i].layer, k, got, c[i].y[k]);
                CU_FAIL("encoding");
                break;
            }
        }
        tfc_model_free(m);
        tfc_backend_free(be);
    }
}

/* Keras's output shapes: one_hot appends num_tokens (in place of a last axis of 1);
 * multi_hot and count give (num_tokens); int keeps the input's shape. */
static void test_shapes(void)
{
    static const struct {
        const char *input, *layer;
        int ndim;
        int64_t dim[3];
    } c[] = {
        {"[1]", "CategoryEncoding: {num_tokens: 5, output_mode: one_hot}", 1, {5}},
        {"[3]", "CategoryEncoding: {num_tokens: 5, output_mode: one_hot}", 2, {3, 5}},
        {"[3, 2]", "CategoryEncoding: {num_tokens: 5, output_mode: one_hot}", 3, {3, 2, 5}},
        {"[4]", "CategoryEncoding: {num_tokens: 7}", 1, {7}},
        {"[4]", "CategoryEncoding: {num_tokens: 7, output_mode: count}", 1, {7}},
        {"[4]", "Discretization: {bin_boundaries: [1.0, 2.0], output_mode: one_hot}", 2, {4, 3}},
        {"[4]", "IntegerLookup: {vocabulary: [1, 2, 3], max_tokens: 10, pad_to_max_tokens: true,"
                " output_mode: multi_hot}", 1, {10}},
        {"[2, 3]", "IntegerLookup: {vocabulary: [1, 2, 3], invert: true}", 2, {2, 3}},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml, "input: {shape: %s, dtype: int32}\nlayers:\n  - %s\n",
                 c[i].input, c[i].layer);
        tfc_model *m = tfc_test_model(yaml);
        TFC_ASSERT(m != NULL);
        const tfc_layer *l = tfc_model_layer(m, 0);
        CU_ASSERT_EQUAL(l->out_shape.ndim, c[i].ndim);
        for (int k = 0; k < c[i].ndim; k++) CU_ASSERT_EQUAL(l->out_shape.dim[k], c[i].dim[k]);
        CU_ASSERT_EQUAL(tfc_layer_weight_count(l), 0);
        tfc_model_free(m);
    }
}

static void expect_error(const char *input, const char *layers, const char *what)
{
    char yaml[768];
    snprintf(yaml, sizeof yaml, "input: {shape: %s}\nlayers:\n%s", input, layers);
    tfc_error err = tfc_test_model_error(yaml);
    if (!strstr(err.text, what)) fprintf(stderr, "\n%s: %s\n", layers, err.text);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, what));
}

static void test_argument_errors(void)
{
    expect_error("[4], dtype: int32", "  - CategoryEncoding: {num_tokens: 4, sparse: true}\n",
                 "CategoryEncoding.sparse");
    expect_error("[4], dtype: int32", "  - CategoryEncoding: {}\n", "num_tokens must be set");
    expect_error("[4], dtype: int32", "  - CategoryEncoding: {num_tokens: 4, output_mode: int}\n",
                 "CategoryEncoding.output_mode");
    expect_error("[4, 2], dtype: int32", "  - CategoryEncoding: {num_tokens: 4}\n",
                 "maximum supported output rank is 2");
    expect_error("[4]", "  - Discretization: {num_bins: 4}\n", "give bin_boundaries");
    expect_error("[4]", "  - Discretization: {}\n", "bin_boundaries are required");
    expect_error("[4]", "  - Discretization: {bin_boundaries: [1.0, 0.0], output_mode: count}\n",
                 "sorted ascending");
    expect_error("[4]", "  - Discretization: {bin_boundaries: [1.0], sparse: true, "
                 "output_mode: count}\n", "Discretization.sparse");
    expect_error("[4], dtype: int32", "  - IntegerLookup: {vocabulary: [1, 2], mask_token: 0, "
                 "output_mode: count}\n", "mask_token");
    expect_error("[4], dtype: int32", "  - IntegerLookup: {output_mode: count}\n",
                 "vocabulary is required");
    expect_error("[4], dtype: int32", "  - IntegerLookup: {vocabulary: [1, 2, 1], "
                 "output_mode: count}\n", "1 is listed twice");
    expect_error("[4], dtype: int32", "  - IntegerLookup: {vocabulary: [1, 2.5], "
                 "output_mode: count}\n", "IntegerLookup.vocabulary");
    expect_error("[4], dtype: int32", "  - IntegerLookup: {vocabulary: [1, 2], "
                 "output_mode: tf_idf}\n", "tf_idf");
    expect_error("[4], dtype: int32", "  - IntegerLookup: {vocabulary: [1, 2], max_tokens: 2, "
                 "output_mode: count}\n", "larger than max_tokens");
    expect_error("[4], dtype: int32", "  - IntegerLookup: {vocabulary: [1, 2], oov_method: x, "
                 "output_mode: count}\n", "IntegerLookup.oov_method");
    expect_error("[4], dtype: int32", "  - Hashing: {num_bins: 4, salt: [1, 2, 3], "
                 "output_mode: count}\n", "Hashing.salt");
    expect_error("[4], dtype: int32", "  - Hashing: {num_bins: 4, salt: -1, "
                 "output_mode: count}\n", "Hashing.salt");
    expect_error("[4], dtype: int32", "  - Hashing: {output_mode: count}\n", "num_bins");
    expect_error("[4], dtype: int32", "  - Hashing: {num_bins: 4, mask_value: a, "
                 "output_mode: count}\n", "Hashing.mask_value");
    expect_error("[4], dtype: int32", "  - Hashing: {num_bins: 4, sparse: true, "
                 "output_mode: count}\n", "Hashing.sparse");
    /* int32 indices: the model's output cannot be them, a Dense cannot read them, an
     * Embedding must cover them, mask_zero needs the model input */
    expect_error("[4], dtype: int32", "  - IntegerLookup: {vocabulary: [1, 2]}\n",
                 "gives int32 indices");
    expect_error("[4], dtype: int32", "  - IntegerLookup: {name: v, vocabulary: [1, 2]}\n"
                 "  - Dense: {units: 2}\n", "reads the int32 indices of layer 'v'");
    expect_error("[4], dtype: int32", "  - IntegerLookup: {name: v, vocabulary: [1, 2, 3]}\n"
                 "  - Embedding: {input_dim: 3, output_dim: 2}\n  - Flatten: {}\n",
                 "takes indices up to 3 from layer 'v'");
    expect_error("[4], dtype: int32", "  - IntegerLookup: {vocabulary: [1, 2]}\n"
                 "  - CategoryEncoding: {num_tokens: 2}\n", "takes indices up to 2");
    expect_error("[4], dtype: int32", "  - IntegerLookup: {vocabulary: [1, 2]}\n"
                 "  - Embedding: {input_dim: 3, output_dim: 2, mask_zero: true}\n"
                 "  - Flatten: {}\n", "mask_zero needs the model input");
    /* the error points at the argument */
    tfc_error err = tfc_test_model_error("input: {shape: [4]}\nlayers:\n"
                                         "  - Discretization: {bin_boundaries: [0.0],\n"
                                         "      output_mode: sum}\n");
    CU_ASSERT_EQUAL(err.line, 4);
    CU_ASSERT_STRING_EQUAL(err.key, "layers[0].Discretization.output_mode");
}

/* A token id outside [0, num_tokens) in an int32 model input is an error when the batch is
 * staged, naming the value, its place and the layer. */
static void test_out_of_range_ids(void)
{
    tfc_model *m = tfc_test_model("input: {shape: [3], dtype: int32}\nlayers:\n"
                                  "  - CategoryEncoding: {name: c, num_tokens: 4}\n");
    TFC_ASSERT(m != NULL);
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(tfc_model_bind(m, be, 2, &err) == TFC_OK);
    const int32_t ok[6] = {0, 1, 3, 2, 2, 0}, bad[6] = {0, 1, 3, 2, 4, 0}, neg[6] = {-1};
    CU_ASSERT_EQUAL(tfc_model_forward(m, ok, 2, 0, 0, 0, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_model_forward(m, bad, 2, 0, 0, 0, &err), TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "token id 4 at position 1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "the num_tokens of layer 'c'"));
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_forward(m, neg, 2, 0, 0, 0, &err), TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "token id -1"));
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* The int32 features of a categorical set [n, 3] (values from `pool`, 8 of them) and its
 * labels, written as cat_x.npy / cat_y.npy: label(x) for each row. */
static void write_categorical(int n, const int32_t *pool, int (*label)(const int32_t *x))
{
    int32_t *x = malloc((size_t)n * 3 * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    TFC_ASSERT(x && y);
    uint64_t s = 12345;
    for (int i = 0; i < n * 3; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = pool[(s >> 33) % 8];
    }
    for (int i = 0; i < n; i++) y[i] = label(x + 3 * i);
    tfc_tensor tx = {TFC_I32, {.ndim = 2, .dim = {n, 3}}, x, -1};
    tfc_tensor ty = {TFC_I32, {.ndim = 1, .dim = {n}}, y, -1};
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("cat_x.npy"), &tx, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("cat_y.npy"), &ty, &err), TFC_OK);
    free(x), free(y);
}

static int count_ones(const int32_t *x) { return (x[0] == 1) + (x[1] == 1) + (x[2] == 1); }

static int first_class(const int32_t *x)
{
    switch (x[0]) {
    case 12: return 1;
    case 7: return 2;
    case 30: return 3;
    default: return 0; /* -5, 0 and the values out of the vocabulary */
    }
}

/* Trains `model` (the layers' YAML lines) on cat_x.npy / cat_y.npy; returns the final
 * accuracy on the training set. */
static double train_accuracy(const char *name, const char *layers)
{
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "model:\n  name: %s\n  input: {shape: [3], dtype: int32}\n  layers:\n%s"
             "  loss: sparse_categorical_crossentropy\n  metrics: [accuracy]\n"
             "data:\n  train:\n    source: {type: npy, features: cat_x.npy, labels: cat_y.npy}\n"
             "    pipeline: [{shuffle: {buffer_size: 100}}, {repeat: {}}, "
             "{batch: {batch_size: 32}}]\n"
             "  test:\n    source: {type: npy, features: cat_x.npy, labels: cat_y.npy}\n"
             "    pipeline: [{batch: {batch_size: 64}}]\n"
             "optimizer: {type: adam, learning_rate: 0.05}\n"
             "max_iter: 300\ntest_interval: 300\ndisplay: 100\nseed: 3\n",
             name, layers);
    tfc_error err;
    tfc_train_result res;
    char file[64];
    snprintf(file, sizeof file, "%s.yaml", name);
    tfc_status st = tfc_test_train_result(yaml, file, name, &res, &err);
    if (st) fprintf(stderr, "\n%s", err.text);
    CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
    CU_ASSERT_FATAL(res.have_test);
    printf("\n  %s: test loss %.4f, accuracy %.4f", name, res.test.loss, res.test.metric[0]);
    return res.test.metric[0];
}

/* Input -> CategoryEncoding(count) -> Dense learns how many 1s an example holds; Input ->
 * IntegerLookup -> Embedding -> Flatten -> Dense learns the class of its first value. */
static void test_trains(void)
{
    static const int32_t small[8] = {0, 1, 2, 3, 1, 5, 6, 1};
    write_categorical(512, small, count_ones);
    CU_ASSERT(train_accuracy("ce", "    - CategoryEncoding: {num_tokens: 8, output_mode: count}\n"
                                   "    - Dense: {units: 4, activation: softmax}\n") >= 0.99);
    static const int32_t vocab[8] = {12, 7, 30, -5, 0, 3, 12, 99};
    write_categorical(512, vocab, first_class);
    CU_ASSERT(train_accuracy("il", "    - IntegerLookup: {vocabulary: [12, 7, 30, -5, 0]}\n"
                                   "    - Embedding: {input_dim: 6, output_dim: 4}\n"
                                   "    - Flatten: {}\n"
                                   "    - Dense: {units: 4, activation: softmax}\n") >= 0.99);
}

/* CPU-first: a device backend refuses each layer at bind, naming it. */
static void test_cpu_first(void)
{
    tfc_test_expect_cpu_first("input: {shape: [3], dtype: int32}\nlayers:\n"
                              "  - CategoryEncoding: {name: c, num_tokens: 4}\n",
                              "c", "CategoryEncoding");
    tfc_test_expect_cpu_first("input: {shape: [3]}\nlayers:\n"
                              "  - Discretization: {name: b, bin_boundaries: [0.0], "
                              "output_mode: count}\n", "b", "Discretization");
    tfc_test_expect_cpu_first("input: {shape: [3], dtype: int32}\nlayers:\n"
                              "  - IntegerLookup: {name: v, vocabulary: [4], "
                              "output_mode: multi_hot}\n", "v", "IntegerLookup");
    tfc_test_expect_cpu_first("input: {shape: [3], dtype: int32}\nlayers:\n"
                              "  - Hashing: {name: h, num_bins: 4, output_mode: count}\n", "h",
                              "Hashing");
}

/* The export: CategoryEncoding, Discretization and IntegerLookup write a file (test_onnx
 * checks its values against onnxruntime); Hashing has no ONNX form: the export fails naming
 * the layer, writing nothing. */
static void test_onnx_export(void)
{
    static const char *const yamls[] = {
        "input: {shape: [3], dtype: int32}\nlayers:\n"
        "  - CategoryEncoding: {name: s, num_tokens: 4}\n",
        "input: {shape: [3]}\nlayers:\n"
        "  - Discretization: {name: s, bin_boundaries: [0.0], output_mode: count}\n",
        "input: {shape: [3], dtype: int32}\nlayers:\n"
        "  - IntegerLookup: {name: s, vocabulary: [4], output_mode: count}\n",
        "input: {shape: [3], dtype: int32}\nlayers:\n"
        "  - Hashing: {name: s, num_bins: 4, output_mode: count}\n"};
    tfc_backend *be = tfc_cpu_backend_create(1);
    for (int i = 0; i < 4; i++) {
        tfc_model *m = tfc_test_model(yamls[i]);
        tfc_error err;
        tfc_error_clear(&err);
        TFC_ASSERT(m && tfc_model_bind_inference(m, be, 2, &err) == TFC_OK);
        const char *path = tfc_test_path("prep.onnx");
        remove(path);
        tfc_onnx_options o = {.opset = 17};
        const tfc_status st = tfc_onnx_export(m, &o, path, &err);
        FILE *f = fopen(path, "rb");
        if (i < 3) {
            if (st) fprintf(stderr, "\n%s\n", err.msg);
            CU_ASSERT_EQUAL(st, TFC_OK);
            CU_ASSERT_PTR_NOT_NULL(f);
        } else {
            CU_ASSERT_EQUAL(st, TFC_ERR_USAGE);
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 's' (Hashing)"));
            CU_ASSERT_PTR_NULL(f);
        }
        if (f) fclose(f);
        tfc_model_free(m);
    }
    tfc_backend_free(be);
}

TFC_TEST_MAIN("preprocessing", {"keras_parity", test_keras_parity},
              {"hash_table", test_hash_table}, {"encodings", test_encodings},
              {"shapes", test_shapes},
              {"argument_errors", test_argument_errors},
              {"out_of_range_ids", test_out_of_range_ids}, {"trains", test_trains},
              {"cpu_first", test_cpu_first}, {"onnx_export", test_onnx_export})
