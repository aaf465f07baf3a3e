/* ONNX export (SPEC §5d): tfc-export's file passes onnx.checker.check_model(full_check=True)
 * and onnxruntime's CPU outputs equal tfc-predict's (tests/onnx_check.py: within 1e-5
 * relative, plus 1e-6 of the output's largest magnitude) on every zoo model and on per-layer
 * fixtures with random weights: strided SAME convolutions (odd and even sizes, even kernels,
 * dilation), pooling, BatchNormalization, masked LSTMs, an Add/Concatenate/Reshape graph and
 * every activation, GRUs and Bidirectionals. Skipped when python3 lacks onnx, onnxruntime or
 * numpy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tfc.h"
#include "testutil.h"

static const char *bin; /* the tools' folder (tfc_test_bin) */

static int ready(void)
{
    return (bin = tfc_test_bin("tfc-export")) && tfc_test_python_has("onnx, onnxruntime, numpy");
}

/* n random examples for the model: floats in [0, 1), or token ids in [1, vocab) with example
 * i right-padded by 3 i zeros. */
static void write_inputs(tfc_model *m, int n, int vocab, const char *path)
{
    const tfc_shape *in = tfc_model_input_shape(m);
    int64_t per = tfc_shape_numel(in);
    int ids = tfc_model_input_dtype(m) == TFC_I32;
    void *x = malloc((size_t)(n * per) * 4);
    srand(5);
    for (int64_t e = 0; e < n; e++)
        for (int64_t k = 0; k < per; k++) {
            if (ids) ((int32_t *)x)[e * per + k] = k < per - 3 * e ? 1 + rand() % (vocab - 1) : 0;
            else ((float *)x)[e * per + k] = (float)rand() / ((float)RAND_MAX + 1.0f);
        }
    tfc_tensor t = {ids ? TFC_I32 : TFC_F32, {in->ndim + 1, {n}}, x, -1};
    for (int i = 0; i < in->ndim; i++) t.shape.dim[i + 1] = in->dim[i];
    tfc_error e;
    tfc_error_clear(&e);
    CU_ASSERT_EQUAL(tfc_npy_write(path, &t, &e), TFC_OK);
    free(x);
}

/* tfc-predict and tfc-export on the same inputs, then onnx_check.py; 1 when they agree. */
static int agree(const char *name, const char *model, const char *weights, int vocab)
{
    tfc_error e;
    tfc_error_clear(&e);
    tfc_model *m = tfc_model_load(model, &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    const char *x = tfc_test_path("x.npy");
    write_inputs(m, 6, vocab, x);
    tfc_model_free(m);
    char cmd[8192], onnx[1024], y[1024];
    snprintf(onnx, sizeof onnx, "%s", tfc_test_path("m.onnx"));
    snprintf(y, sizeof y, "%s", tfc_test_path("y.npy"));
    snprintf(cmd, sizeof cmd, "%s/tfc-predict %s --weights %s --input %s --output %s --device cpu "
             ">/dev/null && %s/tfc-export %s --weights %s --onnx %s && python3 tests/onnx_check.py "
             "%s %s %s", bin, model, weights, x, y, bin, model, weights, onnx, onnx, x, y);
    printf("\n  %s: ", name);
    fflush(stdout);
    int rc = system(cmd);
    if (rc) printf("  %s: FAILED\n", name);
    return rc == 0;
}

static void test_zoo(void)
{
    if (!ready()) return;
    static const char *const zoo[] = {"fashion_mlp", "fashion_cnn", "fashion_cnn_bn",
                                      "fashion_resnet", "fortunes_classify",
                                      "fortunes_char_lstm"};
    static const int vocab[] = {0, 0, 0, 0, 8000, 128};
    for (int z = 0; z < 6; z++) {
        char model[256], weights[256];
        snprintf(model, sizeof model, "model_zoo/%s/model.yaml", zoo[z]);
        snprintf(weights, sizeof weights, "model_zoo/%s/%s.safetensors", zoo[z], zoo[z]);
        CU_ASSERT(agree(zoo[z], model, weights, vocab[z]));
    }
}

/* A fixture model with random weights (moving variances in [0.5, 1.5), the rest in
 * [-0.5, 0.5)), written next to it. */
static void fixture(const char *name, const char *yaml, int vocab)
{
    char file[128], wfile[128], model[1024], weights[1024];
    snprintf(file, sizeof file, "%s.yaml", name);
    snprintf(wfile, sizeof wfile, "%s.safetensors", name);
    snprintf(model, sizeof model, "%s", tfc_test_write(file, yaml, -1));
    snprintf(weights, sizeof weights, "%s", tfc_test_path(wfile));
    tfc_error e;
    tfc_error_clear(&e);
    tfc_model *m = tfc_model_load(model, &e);
    if (!m) printf("\n%s", e.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    tfc_backend *be = tfc_backend_open("cpu", 1, &e);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, 1, &e), TFC_OK);
    srand(11);
    for (int i = 0; i < tfc_model_nlayers(m); i++) {
        tfc_layer *l = tfc_model_layer(m, i);
        for (int p = 0; p < l->nparams; p++) {
            float *v = malloc((size_t)l->params[p].numel * 4);
            int var = !strcmp(l->params[p].name, "moving_variance");
            for (int64_t k = 0; k < l->params[p].numel; k++)
                v[k] = (float)rand() / (float)RAND_MAX - 0.5f + (var ? 1.0f : 0.0f);
            tfc_model_param_upload(m, &l->params[p], v);
            free(v);
        }
    }
    CU_ASSERT_EQUAL(tfc_model_save_weights(m, weights, &e), TFC_OK);
    tfc_model_free(m);
    tfc_backend_free(be);
    CU_ASSERT(agree(name, model, weights, vocab));
}

static void test_strided_same_conv_and_pooling(void)
{
    if (!ready()) return;
    fixture("conv_pool",
            "input: {shape: [11, 10, 3]}\nlayers:\n"
            "  - Conv2D: {filters: 4, kernel_size: 3, strides: 2, padding: same, activation: relu}\n"
            "  - Conv2D: {filters: 5, kernel_size: [4, 2], strides: [2, 1], padding: same}\n"
            "  - Conv2D: {filters: 3, kernel_size: 3, dilation_rate: 2, padding: same, activation: tanh}\n"
            "  - MaxPooling2D: {pool_size: 3, strides: 2, padding: same}\n"
            "  - AveragePooling2D: {pool_size: 2, padding: same}\n"
            "  - Conv2D: {filters: 2, kernel_size: 1}\n"
            "  - Flatten: {}\n  - Dense: {units: 6, activation: softmax}\n", 0);
    fixture("valid_pool",
            "input: {shape: [9, 9, 2]}\nlayers:\n"
            "  - Conv2D: {filters: 3, kernel_size: 2, strides: 2}\n"
            "  - AveragePooling2D: {pool_size: 2, strides: 1}\n"
            "  - MaxPooling2D: {pool_size: 2}\n  - GlobalAveragePooling2D: {}\n", 0);
}

static void test_batch_norm(void)
{
    if (!ready()) return;
    fixture("bn",
            "input: {shape: [6, 6, 3]}\nlayers:\n"
            "  - Conv2D: {filters: 4, kernel_size: 3, use_bias: false}\n"
            "  - BatchNormalization: {epsilon: 0.01}\n  - Activation: {activation: relu}\n"
            "  - Dense: {units: 5}\n  - Reshape: {target_shape: [16, 5]}\n"
            "  - BatchNormalization: {}\n  - Flatten: {}\n  - Dense: {units: 7}\n"
            "  - BatchNormalization: {}\n", 0);
}

static void test_masked_lstm(void)
{
    if (!ready()) return;
    fixture("lstm",
            "input: {shape: [12], dtype: int32}\nlayers:\n"
            "  - Embedding: {input_dim: 30, output_dim: 6, mask_zero: true}\n"
            "  - LSTM: {units: 5, return_sequences: true}\n  - Dropout: {rate: 0.5}\n"
            "  - LSTM: {units: 4}\n  - Dense: {units: 3, activation: softmax}\n", 30);
    fixture("lstm_seq",
            "input: {shape: [10], dtype: int32}\nlayers:\n"
            "  - Embedding: {input_dim: 20, output_dim: 4, mask_zero: true}\n"
            "  - LSTM: {units: 6, return_sequences: true, use_bias: false}\n"
            "  - Dense: {units: 20}\n", 20);
    fixture("lstm_nomask",
            "input: {shape: [7, 3]}\nlayers:\n  - LSTM: {units: 4, return_sequences: true}\n"
            "  - LSTM: {units: 2}\n", 0);
}

/* GRU (both reset_after, masked, return_sequences) and Bidirectional in each merge mode,
 * masked and not: ONNX's GRU with linear_before_reset, and bidirectional nodes */
static void test_gru_bidirectional(void)
{
    if (!ready()) return;
    fixture("gru",
            "input: {shape: [12], dtype: int32}\nlayers:\n"
            "  - Embedding: {input_dim: 30, output_dim: 6, mask_zero: true}\n"
            "  - GRU: {units: 5, return_sequences: true}\n"
            "  - GRU: {units: 4, reset_after: false}\n  - Dense: {units: 3}\n", 30);
    fixture("gru_nomask",
            "input: {shape: [7, 3]}\nlayers:\n"
            "  - GRU: {units: 4, return_sequences: true, reset_after: false, use_bias: false}\n"
            "  - GRU: {units: 2, use_bias: false}\n", 0);
    fixture("bidir_masked",
            "input: {shape: [12], dtype: int32}\nlayers:\n"
            "  - Embedding: {input_dim: 30, output_dim: 4, mask_zero: true}\n"
            "  - Bidirectional: {layer: {LSTM: {units: 3, return_sequences: true}}}\n"
            "  - Bidirectional: {name: b2, layer: {GRU: {units: 3, return_sequences: true}},"
            " merge_mode: sum}\n"
            "  - Bidirectional: {name: b3, layer: {GRU: {units: 2, reset_after: false}},"
            " merge_mode: mul}\n", 30);
    fixture("bidir_nomask",
            "input: {shape: [6, 3]}\nlayers:\n"
            "  - Bidirectional: {layer: {GRU: {units: 3, return_sequences: true}},"
            " merge_mode: ave}\n"
            "  - Bidirectional: {name: b2, layer: {LSTM: {units: 2}}}\n", 0);
}

static void test_add_concatenate(void)
{
    if (!ready()) return;
    fixture("graph",
            "input: {shape: [6, 6, 2]}\nlayers:\n"
            "  - Conv2D: {name: a, filters: 3, kernel_size: 3, padding: same}\n"
            "  - Conv2D: {name: b, filters: 3, kernel_size: 1, inputs: input}\n"
            "  - Add: {name: s, inputs: [a, b]}\n"
            "  - Concatenate: {name: c, inputs: [s, input]}\n"
            "  - Concatenate: {name: c2, axis: 0, inputs: [c, c]}\n"
            "  - Flatten: {}\n  - Dense: {units: 8}\n  - Reshape: {target_shape: [2, 4]}\n"
            "  - Dense: {units: 3}\n", 0);
}

static void test_activations(void)
{
    if (!ready()) return;
    fixture("acts",
            "input: {shape: [8]}\nlayers:\n"
            "  - Dense: {units: 8, activation: elu}\n  - Dense: {units: 8, activation: selu}\n"
            "  - Dense: {units: 8, activation: gelu}\n  - Dense: {units: 8, activation: leaky_relu}\n"
            "  - Dense: {units: 8, activation: softplus}\n  - Dense: {units: 8, activation: softsign}\n"
            "  - Dense: {units: 8, activation: swish}\n  - Dense: {units: 8, activation: hard_sigmoid}\n"
            "  - Dense: {units: 8, activation: exponential}\n  - Dense: {units: 8, activation: sigmoid}\n"
            "  - Activation: {activation: tanh}\n", 0);
}

/* Options and refusals: --batch fixes the shapes, a bad opset or batch is a usage error, a
 * weights file of another model writes nothing; tfc-zoo export --onnx. */
static void test_options(void)
{
    if (!ready()) return;
    char cmd[4096];
    const char *m = "model_zoo/fashion_mlp/model.yaml", *w = "model_zoo/fashion_mlp/fashion_mlp.safetensors";
    snprintf(cmd, sizeof cmd, "%s/tfc-export %s --weights %s --onnx %s --batch 4 --opset 21 && "
             "python3 -c \"import onnx; m = onnx.load('%s'); onnx.checker.check_model(m, full_check=True); "
             "d = m.graph.input[0].type.tensor_type.shape.dim; assert d[0].dim_value == 4, d; "
             "assert m.opset_import[0].version == 21 and m.ir_version == 10\"",
             bin, m, w, tfc_test_path("b4.onnx"), tfc_test_path("b4.onnx"));
    CU_ASSERT_EQUAL(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/tfc-export %s --weights %s --onnx x.onnx --opset 9 2>/dev/null",
             bin, m, w);
    CU_ASSERT_EQUAL(WEXITSTATUS(system(cmd)), 2);
    snprintf(cmd, sizeof cmd, "%s/tfc-export %s --weights %s --onnx x.onnx --batch 0 2>/dev/null",
             bin, m, w);
    CU_ASSERT_EQUAL(WEXITSTATUS(system(cmd)), 2);
    snprintf(cmd, sizeof cmd, "%s/tfc-export %s --weights model_zoo/fashion_cnn/fashion_cnn.safetensors "
             "--onnx %s 2>/dev/null", bin, m, tfc_test_path("no.onnx"));
    CU_ASSERT_EQUAL(WEXITSTATUS(system(cmd)), 1);
    CU_ASSERT(access(tfc_test_path("no.onnx"), F_OK) != 0);
    /* tfc-zoo export --onnx adds NAME.onnx beside the copied files */
    snprintf(cmd, sizeof cmd, "TFC_ZOO=model_zoo %s/tfc-zoo export fashion_cnn %s --onnx >/dev/null && "
             "python3 -c \"import onnx; onnx.checker.check_model(onnx.load('%s/fashion_cnn.onnx'), "
             "full_check=True)\" && test -f %s/fashion_cnn.safetensors", bin,
             tfc_test_path("zoo_out"), tfc_test_path("zoo_out"), tfc_test_path("zoo_out"));
    CU_ASSERT_EQUAL(system(cmd), 0);
}

TFC_TEST_MAIN("onnx", {"zoo", test_zoo},
              {"strided_same_conv_and_pooling", test_strided_same_conv_and_pooling},
              {"batch_norm", test_batch_norm}, {"masked_lstm", test_masked_lstm},
              {"gru_bidirectional", test_gru_bidirectional},
              {"add_concatenate", test_add_concatenate}, {"activations", test_activations},
              {"options", test_options})
