/* ONNX export (SPEC §5d): tfc-export's file passes onnx.checker.check_model(full_check=True)
 * and onnxruntime's CPU outputs equal tfc-predict's (tests/onnx_check.py: within 1e-5
 * relative, plus 1e-6 of the output's largest magnitude) on every zoo model and on per-layer
 * fixtures with random weights: strided SAME convolutions (odd and even sizes, even kernels,
 * dilation), pooling (global max and average, keepdims), BatchNormalization (images,
 * sequences, vectors, volumes), masked LSTMs,
 * GRUs and Bidirectionals (around a StackedRNNCells too), LSTMs and GRUs with go_backwards
 * (masked and not), SimpleRNN
 * (ONNX's RNN, each activation it has; softmax refused), Conv1D (causal, dilated, strided,
 * grouped), DepthwiseConv1D, SeparableConv1D and Conv1DTranspose (as the 2-D nodes over a
 * 1 x steps image) and the 1-D poolings (the masked average after an Embedding),
 * MultiHeadAttention (causal, padded, windowed, cross), GroupQueryAttention (the same, with
 * its gate and one key/value head), Attention and AdditiveAttention
 * (padded, causal, concat, a key of its own), TokenAndPositionEmbedding in a
 * transformer block and PositionEmbedding, EinsumDense (Einsum; '...', a broadcast bias, after
 * a convolution), LayerScale, an Add/Concatenate/Reshape graph, every activation,
 * the augmentation layers (the identity), the numeric preprocessing layers
 * (Discretization, CategoryEncoding, IntegerLookup), the spectrograms (every
 * STFTSpectrogram mode, MelSpectrogram in decibels and power) and ConvLSTM1D/2D/3D unrolled;
 * a layer without an ONNX form is refused.
 * Skipped when python3 lacks onnx, onnxruntime or numpy. */
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
static int agree(const char *name, const char *model, const char *weights, int vocab,
                 double rtol)
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
             "%s %s %s %g", bin, model, weights, x, y, bin, model, weights, onnx, onnx, x, y, rtol);
    printf("\n  %s: ", name);
    fflush(stdout);
    int rc = system(cmd);
    if (rc) printf("  %s: FAILED\n", name);
    return rc == 0;
}

static void test_zoo(void)
{
    if (!ready()) return;
    static const char *const zoo[] = {"fashion_mlp",       "fashion_cnn",
                                      "fashion_cnn_bn",    "fashion_resnet",
                                      "fashion_mobilenet", "fortunes_classify",
                                      "fortunes_char_lstm", "fortunes_bigru",
                                      "fortunes_char_gru", "fortunes_gpt",
                                      "fortunes_encoder", "fortunes_conv_bigru",
                                      "fortunes_bag_of_bigrams"};
    static const int vocab[] = {0, 0, 0, 0, 0, 8000, 128, 8000, 128, 128, 8000, 8000, 0};
    /* onnx_check.py's RTOL (1e-5) but for fortunes_gpt: four trained pre-norm blocks, whose
     * logits (up to 12.7) the two runtimes' float32 summation orders move by up to 2.8e-5,
     * needing 1.6e-5 (Keras 3 on JAX differs from tfc by as much: make ref-zoo, 2.3e-5) */
    static const double rtol[] = {1e-5, 1e-5, 1e-5, 1e-5, 1e-5, 1e-5,
                                  1e-5, 1e-5, 1e-5, 3e-5, 1e-5, 1e-5, 1e-5};
    for (int z = 0; z < (int)(sizeof zoo / sizeof *zoo); z++) {
        char model[256], weights[256];
        snprintf(model, sizeof model, "model_zoo/%s/model.yaml", zoo[z]);
        snprintf(weights, sizeof weights, "model_zoo/%s/%s.safetensors", zoo[z], zoo[z]);
        CU_ASSERT(agree(zoo[z], model, weights, vocab[z], rtol[z]));
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
            const char *last = strrchr(l->params[p].name, '/'); /* TimeDistributed's */
            const char *base = last ? last + 1 : l->params[p].name;
            int var = !strcmp(base, "moving_variance") || !strcmp(base, "variance");
            for (int64_t k = 0; k < l->params[p].numel; k++)
                v[k] = (float)rand() / (float)RAND_MAX - 0.5f + (var ? 1.0f : 0.0f);
            tfc_model_param_upload(m, &l->params[p], v);
            free(v);
        }
    }
    CU_ASSERT_EQUAL(tfc_model_save_weights(m, weights, &e), TFC_OK);
    tfc_model_free(m);
    tfc_backend_free(be);
    CU_ASSERT(agree(name, model, weights, vocab, 1e-5));
}

/* tfc-export refuses the model of `yaml` (weights initialised, written as NAME.safetensors)
 * with an error holding `want`, and writes no NAME.onnx. */
static void export_refused(const char *name, const char *yaml, const char *want)
{
    char file[128], cmd[4096], model[1024], weights[1024], err[1024], onnx[1024];
    snprintf(file, sizeof file, "%s.yaml", name);
    snprintf(model, sizeof model, "%s", tfc_test_write(file, yaml, -1));
    snprintf(file, sizeof file, "%s.safetensors", name);
    snprintf(weights, sizeof weights, "%s", tfc_test_path(file));
    snprintf(file, sizeof file, "%s.err", name);
    snprintf(err, sizeof err, "%s", tfc_test_path(file));
    snprintf(file, sizeof file, "%s.onnx", name);
    snprintf(onnx, sizeof onnx, "%s", tfc_test_path(file));
    tfc_error e;
    tfc_error_clear(&e);
    tfc_model *m = tfc_model_load(model, &e);
    tfc_backend *be = tfc_backend_open("cpu", 1, &e);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, 1, &e), TFC_OK);
    CU_ASSERT_EQUAL(tfc_model_init_weights(m, 1, &e), TFC_OK);
    CU_ASSERT_EQUAL(tfc_model_save_weights(m, weights, &e), TFC_OK);
    tfc_model_free(m);
    tfc_backend_free(be);
    snprintf(cmd, sizeof cmd, "%s/tfc-export %s --weights %s --onnx %s 2>%s", bin, model, weights,
             onnx, err);
    CU_ASSERT_NOT_EQUAL(system(cmd), 0);
    char *text = tfc_test_read(err, NULL);
    CU_ASSERT_PTR_NOT_NULL(text && strstr(text, want));
    free(text);
    CU_ASSERT(access(onnx, F_OK) != 0);
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
    /* Conv2D's groups: ONNX's Conv with `group` */
    fixture("conv_groups",
            "input: {shape: [8, 7, 4]}\nlayers:\n"
            "  - Conv2D: {filters: 6, kernel_size: 3, groups: 2, padding: same, activation: relu}\n"
            "  - Conv2D: {filters: 6, kernel_size: [2, 3], groups: 3, strides: 2}\n"
            "  - Conv2D: {filters: 3, kernel_size: 1, groups: 3, use_bias: false}\n"
            "  - Flatten: {}\n", 0);
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
    /* no gamma (beta) variable: the export writes the constant ones (zeros) */
    fixture("bn_no_scale",
            "input: {shape: [6, 6, 3]}\nlayers:\n"
            "  - Conv2D: {filters: 4, kernel_size: 3}\n"
            "  - BatchNormalization: {scale: false}\n  - Activation: {activation: relu}\n"
            "  - Flatten: {}\n  - Dense: {units: 7}\n"
            "  - BatchNormalization: {center: false}\n"
            "  - BatchNormalization: {center: false, scale: false}\n", 0);
    /* more axes per example: after a Conv3D, on a sequence of images, on a vector */
    fixture("bn_volume",
            "input: {shape: [3, 4, 5, 2]}\nlayers:\n"
            "  - Conv3D: {filters: 3, kernel_size: 2, padding: same}\n"
            "  - BatchNormalization: {epsilon: 0.01}\n"
            "  - ConvLSTM2D: {filters: 2, kernel_size: 2, return_sequences: true}\n"
            "  - BatchNormalization: {center: false}\n"
            "  - Flatten: {}\n  - Dense: {units: 4}\n  - BatchNormalization: {}\n", 0);
}

/* LayerNormalization (opset 17's operator; axis lists, center or scale off; rms_scaling
 * composed) and RMSNormalization (composed), after a convolution (channels-last again) and
 * on sequences. */
static void test_normalizations(void)
{
    if (!ready()) return;
    fixture("norm",
            "input: {shape: [6, 6, 3]}\nlayers:\n  - Conv2D: {filters: 4, kernel_size: 3}\n"
            "  - LayerNormalization: {}\n  - Reshape: {target_shape: [4, 16]}\n"
            "  - LayerNormalization: {axis: [1, 2], epsilon: 0.01}\n"
            "  - LayerNormalization: {center: false}\n"
            "  - LayerNormalization: {scale: false, epsilon: 0.1}\n"
            "  - LayerNormalization: {center: false, scale: false}\n"
            "  - RMSNormalization: {}\n  - RMSNormalization: {axis: [-2, -1]}\n"
            "  - Dense: {units: 16}\n  - LayerNormalization: {rms_scaling: true, epsilon: 0.05}\n"
            "  - LayerNormalization: {rms_scaling: true, axis: [1, 2]}\n"
            "  - Dense: {units: 5}\n", 0);
    /* opset 21 (ReduceMean's axes an input) agrees too, and opset 23 (IR 11) with its
     * RMSNormalization operator; opset 16 has no LayerNormalization */
    char cmd[4096], model[1024], weights[1024], onnx[1024];
    snprintf(model, sizeof model, "%s", tfc_test_path("norm.yaml"));
    snprintf(weights, sizeof weights, "%s", tfc_test_path("norm.safetensors"));
    for (int opset = 21, rms = 0; opset <= 23; opset += 2, rms = 2) {
        snprintf(onnx, sizeof onnx, "%s", tfc_test_path("norm_opset.onnx"));
        snprintf(cmd, sizeof cmd, "%s/tfc-export %s --weights %s --onnx %s --opset %d && "
                 "python3 tests/onnx_check.py %s %s %s && python3 -c \"import onnx; "
                 "m = onnx.load('%s'); assert m.ir_version == %d; assert sum(n.op_type == "
                 "'RMSNormalization' for n in m.graph.node) == %d\"", bin, model, weights, onnx,
                 opset, onnx, tfc_test_path("x.npy"), tfc_test_path("y.npy"), onnx,
                 opset == 23 ? 11 : 10, rms);
        CU_ASSERT_EQUAL(system(cmd), 0);
    }
    snprintf(cmd, sizeof cmd, "%s/tfc-export %s --weights %s --onnx %s --opset 16 2>&1 | "
             "grep -q \"(LayerNormalization): the ONNX LayerNormalization operator needs "
             "opset 17\"",
             bin, model, weights, tfc_test_path("norm16.onnx"));
    CU_ASSERT_EQUAL(system(cmd), 0);
}

/* GroupNormalization (composed: Reshape, ReduceMean, Sqrt, Div) on images after a
 * convolution (channels-last again), one group per channel, center and scale off, on
 * sequences and on a channel axis other than the last; at opset 14 (ReduceMean's axes an
 * attribute) and 21 (an input). */
static void test_group_norm(void)
{
    if (!ready()) return;
    fixture("group_norm",
            "input: {shape: [6, 5, 3]}\nlayers:\n"
            "  - GroupNormalization: {groups: -1, epsilon: 0.01}\n"
            "  - Conv2D: {filters: 8, kernel_size: 3, padding: same}\n"
            "  - GroupNormalization: {groups: 2}\n  - GroupNormalization: {groups: 3, axis: 1}\n"
            "  - GroupNormalization: {groups: 8, center: false}\n"
            "  - GroupNormalization: {groups: 1, scale: false, axis: -2}\n"
            "  - Reshape: {target_shape: [30, 8]}\n"
            "  - GroupNormalization: {groups: 4, center: false, scale: false}\n"
            "  - Dense: {units: 5}\n", 0);
    char cmd[4096], model[1024], weights[1024], onnx[1024];
    snprintf(model, sizeof model, "%s", tfc_test_path("group_norm.yaml"));
    snprintf(weights, sizeof weights, "%s", tfc_test_path("group_norm.safetensors"));
    for (int opset = 14; opset <= 21; opset += 7) {
        snprintf(onnx, sizeof onnx, "%s", tfc_test_path("group_norm_opset.onnx"));
        snprintf(cmd, sizeof cmd, "%s/tfc-export %s --weights %s --onnx %s --opset %d && "
                 "python3 tests/onnx_check.py %s %s %s", bin, model, weights, onnx, opset, onnx,
                 tfc_test_path("x.npy"), tfc_test_path("y.npy"));
        CU_ASSERT_EQUAL(system(cmd), 0);
    }
}

/* Permute as Transpose (after a convolution, whose NCHW output goes back to Keras's order
 * first, and before one) and UnitNormalization as ReduceSumSquare, Sqrt, Reciprocal, Min and
 * Mul over one axis, a middle one and two; at opset 14 (ReduceSumSquare's axes an attribute)
 * and 21 (an input). */
static void test_permute_unit_norm(void)
{
    if (!ready()) return;
    fixture("permute_unit",
            "input: {shape: [6, 5, 3]}\nlayers:\n"
            "  - Conv2D: {filters: 4, kernel_size: 3, padding: same}\n"
            "  - Permute: {dims: [2, 1, 3]}\n  - Conv2D: {filters: 3, kernel_size: 3}\n"
            "  - UnitNormalization: {axis: [1, 2]}\n  - Permute: {dims: [3, 1, 2]}\n"
            "  - UnitNormalization: {}\n  - UnitNormalization: {axis: 2}\n"
            "  - Flatten: {}\n  - Dense: {units: 5}\n", 0);
    char cmd[4096], model[1024], weights[1024], onnx[1024];
    snprintf(model, sizeof model, "%s", tfc_test_path("permute_unit.yaml"));
    snprintf(weights, sizeof weights, "%s", tfc_test_path("permute_unit.safetensors"));
    for (int opset = 14; opset <= 21; opset += 7) {
        snprintf(onnx, sizeof onnx, "%s", tfc_test_path("permute_unit_opset.onnx"));
        snprintf(cmd, sizeof cmd, "%s/tfc-export %s --weights %s --onnx %s --opset %d && "
                 "python3 tests/onnx_check.py %s %s %s", bin, model, weights, onnx, opset, onnx,
                 tfc_test_path("x.npy"), tfc_test_path("y.npy"));
        CU_ASSERT_EQUAL(system(cmd), 0);
    }
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

/* TimeDistributed: the steps folded into the batch around the inner layer's nodes (its
 * activation after), images, token ids, under a mask */
static void test_time_distributed(void)
{
    if (!ready()) return;
    fixture("td_video",
            "input: {shape: [3, 6, 6, 2]}\nlayers:\n"
            "  - TimeDistributed: {layer: {Conv2D: {filters: 4, kernel_size: 3, "
            "activation: relu}}}\n"
            "  - TimeDistributed: {layer: {BatchNormalization: {}}}\n"
            "  - TimeDistributed: {layer: {MaxPooling2D: {pool_size: 2}}}\n"
            "  - TimeDistributed: {layer: {Flatten: {}}}\n"
            "  - LSTM: {units: 4}\n  - Dense: {units: 3, activation: softmax}\n", 0);
    fixture("td_ids",
            "input: {shape: [5, 4], dtype: int32}\nlayers:\n"
            "  - TimeDistributed: {layer: {Embedding: {input_dim: 10, output_dim: 3}}}\n"
            "  - TimeDistributed: {layer: {Conv1D: {filters: 2, kernel_size: 2}}}\n"
            "  - TimeDistributed: {layer: {GlobalMaxPooling1D: {}}}\n"
            "  - TimeDistributed: {layer: {Dense: {units: 2, activation: softmax}}}\n", 10);
    fixture("td_volume",
            "input: {shape: [3, 3, 4, 4, 2]}\nlayers:\n"
            "  - TimeDistributed: {layer: {Conv3D: {filters: 3, kernel_size: 2}}}\n"
            "  - TimeDistributed: {layer: {Conv3DTranspose: {filters: 2, kernel_size: 2}}}\n"
            "  - TimeDistributed: {layer: {AveragePooling3D: {pool_size: 2}}}\n"
            "  - TimeDistributed: {layer: {UpSampling3D: {size: 2}}}\n"
            "  - TimeDistributed: {layer: {ZeroPadding3D: {padding: 1}}}\n"
            "  - TimeDistributed: {layer: {GlobalMaxPooling3D: {}}}\n", 0);
    fixture("td_assorted",
            "input: {shape: [3, 6, 4]}\nlayers:\n"
            "  - TimeDistributed: {layer: {EinsumDense: {equation: 'abc,cd->abd', "
            "output_shape: [6, 5], bias_axes: d}}}\n"
            "  - TimeDistributed: {layer: {SeparableConv1D: {filters: 4, kernel_size: 3, "
            "padding: same}}}\n"
            "  - TimeDistributed: {layer: {DepthwiseConv1D: {kernel_size: 3}}}\n"
            "  - TimeDistributed: {layer: {Conv1DTranspose: {filters: 3, kernel_size: 2, "
            "strides: 2}}}\n"
            "  - TimeDistributed: {layer: {UnitNormalization: {}}}\n"
            "  - TimeDistributed: {layer: {Permute: {dims: [2, 1]}}}\n"
            "  - TimeDistributed: {layer: {Flatten: {}}}\n"
            "  - TimeDistributed: {layer: {RepeatVector: {n: 2}}}\n"
            "  - TimeDistributed: {layer: {Dense: {units: 2}}}\n", 0);
    fixture("td_frames",
            "input: {shape: [2, 6, 5, 2]}\nlayers:\n"
            "  - TimeDistributed: {layer: {Resizing: {height: 4, width: 4}}}\n"
            "  - TimeDistributed: {layer: {CenterCrop: {height: 3, width: 3}}}\n"
            "  - TimeDistributed: {layer: {Flatten: {}}}\n", 0);
    fixture("td_masked",
            "input: {shape: [8], dtype: int32}\nlayers:\n"
            "  - Embedding: {input_dim: 12, output_dim: 4, mask_zero: true}\n"
            "  - TimeDistributed: {layer: {Dense: {units: 5, activation: tanh}}}\n"
            "  - TimeDistributed: {layer: {LayerNormalization: {}}}\n"
            "  - LSTM: {units: 3}\n  - Dense: {units: 2}\n", 12);
}

/* SpectralNormalization: the inner layer's nodes with the stored kernel (the inference
 * pass), vector_u in no node */
static void test_spectral_normalization(void)
{
    if (!ready()) return;
    fixture("sn_image",
            "input: {shape: [6, 6, 2]}\nlayers:\n"
            "  - SpectralNormalization: {layer: {Conv2D: {filters: 4, kernel_size: 3, "
            "activation: relu}}}\n"
            "  - SpectralNormalization: {layer: {Conv2DTranspose: {filters: 2, kernel_size: 2, "
            "strides: 2}}}\n"
            "  - SpectralNormalization: {layer: {DepthwiseConv2D: {kernel_size: 3}}}\n"
            "  - Flatten: {}\n"
            "  - SpectralNormalization: {power_iterations: 2, layer: {Dense: {units: 3, "
            "activation: softmax}}}\n", 0);
    fixture("sn_sequence",
            "input: {shape: [7, 3]}\nlayers:\n"
            "  - SpectralNormalization: {layer: {Conv1D: {filters: 4, kernel_size: 2, "
            "activation: tanh}}}\n"
            "  - SpectralNormalization: {layer: {EinsumDense: {equation: \"btc,cd->btd\", "
            "output_shape: [null, 2]}}}\n", 0);
}

/* MultiHeadAttention: causal and padded self-attention (a fully padded example: rows that
 * see no key), with dropout (those rows zeroed), and cross-attention with value_dim, no
 * bias and a key of its own. */
static void test_attention(void)
{
    if (!ready()) return;
    fixture("mha_masked",
            "input: {shape: [12], dtype: int32}\nlayers:\n"
            "  - Embedding: {input_dim: 30, output_dim: 8, mask_zero: true}\n"
            "  - MultiHeadAttention: {num_heads: 2, key_dim: 4, use_causal_mask: true}\n"
            "  - MultiHeadAttention: {num_heads: 3, key_dim: 2, dropout: 0.3,"
            " sliding_window: 4}\n"
            "  - Dense: {units: 3, activation: softmax}\n", 30);
    fixture("mha_cross",
            "input: {shape: [6, 8]}\nlayers:\n"
            "  - Reshape: {name: kv, target_shape: [3, 16]}\n  - Dense: {name: k, units: 5}\n"
            "  - MultiHeadAttention: {inputs: [input, kv, k], num_heads: 2, key_dim: 4,"
            " value_dim: 3, use_bias: false, output_shape: 7}\n", 0);
    /* GroupQueryAttention: padded causal self-attention with the gate (4 query heads over
     * 2), then dropout (rows that see no key zeroed) and a window with one key/value head;
     * cross-attention without biases, a key of its own */
    fixture("gqa_masked",
            "input: {shape: [12], dtype: int32}\nlayers:\n"
            "  - Embedding: {input_dim: 30, output_dim: 8, mask_zero: true}\n"
            "  - GroupQueryAttention: {head_dim: 3, num_query_heads: 4, num_key_value_heads: 2,"
            " use_gate: true, use_causal_mask: true}\n"
            "  - GroupQueryAttention: {head_dim: 2, num_query_heads: 3, num_key_value_heads: 1,"
            " dropout: 0.3, sliding_window: 4}\n"
            "  - Dense: {units: 3, activation: softmax}\n", 30);
    fixture("gqa_cross",
            "input: {shape: [6, 8]}\nlayers:\n"
            "  - Reshape: {name: kv, target_shape: [3, 16]}\n  - Dense: {name: v, units: 8}\n"
            "  - Dense: {name: k, units: 5, inputs: [kv]}\n"
            "  - GroupQueryAttention: {inputs: [input, v, k], head_dim: 4, num_query_heads: 4,"
            " num_key_value_heads: 2, use_bias: false, use_gate: true}\n", 0);
}

/* Attention and AdditiveAttention: dot with a scale and concat over padded ids (a fully
 * padded example: its rows zeroed, its keys all hidden) with a causal mask; a key apart from
 * the value, across lengths; AdditiveAttention with and without its scale. */
static void test_score_attention(void)
{
    if (!ready()) return;
    fixture("luong_masked",
            "input: {shape: [12], dtype: int32}\nlayers:\n"
            "  - Embedding: {name: e, input_dim: 30, output_dim: 8, mask_zero: true}\n"
            "  - Attention: {name: a1, inputs: [e, e], use_scale: true}\n"
            "  - Attention: {name: a2, inputs: [a1, e], score_mode: concat, use_scale: true,"
            " use_causal_mask: true, dropout: 0.2}\n"
            "  - AdditiveAttention: {inputs: [a2, e]}\n"
            "  - Flatten: {}\n"
            "  - Dense: {units: 3, activation: softmax}\n", 30);
    fixture("luong_cross",
            "input: {shape: [6, 8]}\nlayers:\n"
            "  - Reshape: {name: kv, target_shape: [3, 16]}\n  - Dense: {name: k, units: 8}\n"
            "  - Attention: {name: a, inputs: [input, kv, k]}\n"
            "  - AdditiveAttention: {inputs: [input, kv, k], use_scale: false,"
            " use_causal_mask: true}\n"
            "  - Add: {inputs: [a, additive_attention]}\n"
            "  - Attention: {inputs: [add, kv], score_mode: concat}\n", 0);
}

/* The transformer block: TokenAndPositionEmbedding (mask_zero, fewer steps than its
 * sequence_length: the first rows of the positions) into pre-norm causal attention over the
 * padded ids, a gelu feed-forward and the residual Adds; PositionEmbedding added to an
 * Embedding's vectors, on a rank-3 input too. */
static void test_position_embeddings(void)
{
    if (!ready()) return;
    fixture("gpt_block",
            "input: {shape: [10], dtype: int32}\nlayers:\n"
            "  - TokenAndPositionEmbedding: {name: embed, vocabulary_size: 30,"
            " sequence_length: 16, embedding_dim: 8, mask_zero: true}\n"
            "  - LayerNormalization: {name: n1}\n"
            "  - MultiHeadAttention: {name: att, num_heads: 2, key_dim: 4,"
            " use_causal_mask: true}\n"
            "  - Add: {name: a1, inputs: [embed, att]}\n  - LayerNormalization: {name: n2}\n"
            "  - Dense: {name: ff1, units: 16, activation: gelu}\n"
            "  - Dense: {name: ff2, units: 8}\n"
            "  - Add: {name: a2, inputs: [a1, ff2]}\n  - RMSNormalization: {}\n"
            "  - Dense: {units: 30}\n", 30);
    fixture("position",
            "input: {shape: [9], dtype: int32}\nlayers:\n"
            "  - Embedding: {name: e, input_dim: 20, output_dim: 6}\n"
            "  - PositionEmbedding: {name: p, sequence_length: 12}\n"
            "  - Add: {name: s, inputs: [e, p]}\n  - Reshape: {name: r, target_shape: [3, 3, 6]}\n"
            "  - PositionEmbedding: {name: q, sequence_length: 3}\n"
            "  - Add: {inputs: [r, q]}\n  - Flatten: {}\n", 20);
}

static void test_conv1d_pooling1d(void)
{
    if (!ready()) return;
    fixture("conv1d",
            "input: {shape: [13, 4]}\nlayers:\n"
            "  - Conv1D: {filters: 6, kernel_size: 3, dilation_rate: 2, padding: causal,"
            " activation: relu}\n"
            "  - Conv1D: {filters: 4, kernel_size: 2, strides: 2, padding: causal, groups: 2}\n"
            "  - Conv1D: {filters: 6, kernel_size: 4, strides: 2, padding: same, groups: 2}\n"
            "  - Conv1D: {filters: 3, kernel_size: 2, use_bias: false, activation: tanh}\n"
            "  - Flatten: {}\n  - Dense: {units: 3}\n", 0);
    fixture("pooling1d",
            "input: {shape: [12, 3]}\nlayers:\n"
            "  - Conv1D: {filters: 4, kernel_size: 3, padding: same}\n"
            "  - MaxPooling1D: {pool_size: 3, strides: 2, padding: same}\n"
            "  - AveragePooling1D: {pool_size: 2, padding: same}\n"
            "  - AveragePooling1D: {name: v, pool_size: 2, strides: 1}\n"
            "  - GlobalMaxPooling1D: {name: g, keepdims: true}\n"
            "  - GlobalAveragePooling1D: {name: h, inputs: v}\n"
            "  - Flatten: {inputs: g}\n  - Concatenate: {inputs: [flatten, h]}\n", 0);
    /* the masked average after an Embedding (example i padded by 3 i zeros), and Conv1D
     * dropping the mask */
    fixture("embedding_conv1d",
            "input: {shape: [16], dtype: int32}\nlayers:\n"
            "  - Embedding: {input_dim: 30, output_dim: 5, mask_zero: true}\n"
            "  - Dense: {units: 4, activation: tanh}\n"
            "  - GlobalAveragePooling1D: {}\n"
            "  - Conv1D: {name: c, filters: 3, kernel_size: 3, padding: causal,"
            " inputs: embedding}\n"
            "  - GlobalAveragePooling1D: {name: h, keepdims: true}\n  - Flatten: {}\n"
            "  - Concatenate: {inputs: [global_average_pooling1d, flatten]}\n", 30);
    /* DepthwiseConv1D, SeparableConv1D and Conv1DTranspose as their 2-D twins' nodes over a
     * 1 x steps image: strides with dilation, depth_multiplier, same and valid padding,
     * output_padding, a kernel below the stride, no bias */
    fixture("conv1d_variants",
            "input: {shape: [13, 3]}\nlayers:\n"
            "  - DepthwiseConv1D: {kernel_size: 3, strides: 2, dilation_rate: 2, padding: same,"
            " depth_multiplier: 2, activation: tanh}\n"
            "  - SeparableConv1D: {filters: 4, kernel_size: 3, strides: 2, padding: same,"
            " depth_multiplier: 2, activation: relu6}\n"
            "  - SeparableConv1D: {filters: 3, kernel_size: 2, dilation_rate: 2, use_bias: false}\n"
            "  - Conv1DTranspose: {filters: 3, kernel_size: 3, strides: 2}\n"
            "  - Conv1DTranspose: {filters: 2, kernel_size: 2, strides: 3, padding: same,"
            " output_padding: 1, activation: tanh}\n"
            "  - Conv1DTranspose: {filters: 2, kernel_size: 1, strides: 2}\n"
            "  - DepthwiseConv1D: {kernel_size: 2, use_bias: false}\n"
            "  - Flatten: {}\n", 0);
}

/* Conv3D as a 3-D Conv on [N, C, D, H, W]: valid and same (the extra plane after) padding,
 * strides of three sizes, dilation, groups, no bias, a fused activation; the 3-D poolings
 * as MaxPool, AveragePool and the global pools; Conv3DTranspose as ConvTranspose. */
static void test_conv3d(void)
{
    if (!ready()) return;
    fixture("conv3d",
            "input: {shape: [5, 6, 5, 4]}\nlayers:\n"
            "  - Conv3D: {filters: 6, kernel_size: [2, 3, 2], strides: [1, 2, 3], padding: same,"
            " groups: 2, activation: relu}\n"
            "  - Conv3D: {filters: 4, kernel_size: 2, dilation_rate: [2, 1, 1], padding: same,"
            " use_bias: false}\n"
            "  - Conv3D: {filters: 3, kernel_size: [2, 2, 1], activation: tanh}\n"
            "  - Flatten: {}\n  - Dense: {units: 3}\n", 0);    /* the 3-D poolings: max with overlapping windows and same padding, average with same
     * padding (the padding out of the count), the global ones with and without keepdims */
    fixture("pooling3d",
            "input: {shape: [6, 7, 5, 3]}\nlayers:\n"
            "  - Conv3D: {filters: 4, kernel_size: 2, padding: same}\n"
            "  - MaxPooling3D: {pool_size: [2, 3, 2], strides: [1, 2, 1], padding: same}\n"
            "  - AveragePooling3D: {pool_size: [2, 2, 3], padding: same}\n"
            "  - GlobalMaxPooling3D: {name: g, keepdims: true}\n"
            "  - GlobalAveragePooling3D: {name: h, inputs: average_pooling3d}\n"
            "  - Flatten: {inputs: g}\n  - Concatenate: {inputs: [flatten, h]}\n", 0);
    /* Conv3DTranspose as a 3-D ConvTranspose: valid at unequal strides (a kernel below its
     * stride: planes as output_padding), same with output_padding and no bias, dilation
     * with same padding and an activation */
    fixture("conv3d_transpose",
            "input: {shape: [2, 3, 2, 3]}\nlayers:\n"
            "  - Conv3DTranspose: {filters: 4, kernel_size: [2, 3, 1], strides: [1, 2, 3]}\n"
            "  - Conv3DTranspose: {filters: 3, kernel_size: 3, strides: [2, 1, 2], "
            "padding: same, output_padding: [1, 0, 0], use_bias: false}\n"
            "  - Conv3DTranspose: {filters: 2, kernel_size: 2, dilation_rate: [1, 2, 2], "
            "padding: same, activation: tanh}\n"
            "  - Flatten: {}\n  - Dense: {units: 3}\n", 0);
}

/* The adaptive poolings on images, sequences and volumes after a convolution: every axis
 * a multiple of the output's (MaxPool, AveragePool), and not (a Slice, ReduceMax or
 * ReduceMean a bin, then Concat, an axis already at its size left alone; outputs larger
 * than inputs), at opset 17 (the reductions' axes an attribute) and 21 (an input); a layer
 * needing too many Slices is refused. */
static void test_adaptive_pooling(void)
{
    if (!ready()) return;
    static const char *const names[2] = {"adaptive_even", "adaptive_uneven"};
    static const char *const sizes[2][6] = {
        {"[3, 2]", "[2, 4]", "12", "6", "[3, 2, 1]", "[2, 2, 2]"},
        {"[4, 5]", "[9, 3]", "7", "50", "[4, 3, 3]", "[5, 4, 1]"}};
    for (int u = 0; u < 2; u++) {
        char yaml[2048];
        snprintf(yaml, sizeof yaml,
                 "input: {shape: [6, 8, 2]}\nlayers:\n"
                 "  - Conv2D: {name: c, filters: 3, kernel_size: 3, padding: same}\n"
                 "  - AdaptiveMaxPooling2D: {name: m2, output_size: %s}\n"
                 "  - AdaptiveAveragePooling2D: {name: a2, output_size: %s, inputs: c}\n"
                 "  - Reshape: {name: s, target_shape: [48, 3], inputs: c}\n"
                 "  - AdaptiveAveragePooling1D: {name: a1, output_size: %s}\n"
                 "  - AdaptiveMaxPooling1D: {name: m1, output_size: %s, inputs: s}\n"
                 "  - Reshape: {name: v, target_shape: [6, 4, 2, 3], inputs: c}\n"
                 "  - AdaptiveMaxPooling3D: {name: m3, output_size: %s}\n"
                 "  - AdaptiveAveragePooling3D: {name: a3, output_size: %s, inputs: v}\n"
                 "  - Flatten: {name: f1, inputs: m2}\n  - Flatten: {name: f2, inputs: a2}\n"
                 "  - Flatten: {name: f3, inputs: a1}\n  - Flatten: {name: f4, inputs: m1}\n"
                 "  - Flatten: {name: f5, inputs: m3}\n  - Flatten: {name: f6, inputs: a3}\n"
                 "  - Concatenate: {inputs: [f1, f2, f3, f4, f5, f6]}\n",
                 sizes[u][0], sizes[u][1], sizes[u][2], sizes[u][3], sizes[u][4], sizes[u][5]);
        fixture(names[u], yaml, 0);
        char cmd[4096], model[1024], weights[1024], onnx[1024], file[64];
        snprintf(file, sizeof file, "%s.yaml", names[u]);
        snprintf(model, sizeof model, "%s", tfc_test_path(file));
        snprintf(file, sizeof file, "%s.safetensors", names[u]);
        snprintf(weights, sizeof weights, "%s", tfc_test_path(file));
        snprintf(onnx, sizeof onnx, "%s", tfc_test_path("adaptive21.onnx"));
        /* the nodes each form takes: pools where even, slices where not */
        snprintf(cmd, sizeof cmd, "%s/tfc-export %s --weights %s --onnx %s --opset 21 && "
                 "python3 tests/onnx_check.py %s %s %s && python3 -c \"import onnx; "
                 "ops = [n.op_type for n in onnx.load('%s').graph.node]; "
                 "assert ops.count('MaxPool') + ops.count('AveragePool') == %d, ops; "
                 "assert (ops.count('Slice') > 0) == %d, ops\"", bin, model, weights, onnx, onnx,
                 tfc_test_path("x.npy"), tfc_test_path("y.npy"), onnx, u ? 0 : 6, u);
        CU_ASSERT_EQUAL(system(cmd), 0);
    }
    export_refused("adaptive_big", "input: {shape: [5000, 1]}\nlayers:\n"
                   "  - AdaptiveMaxPooling1D: {name: big, output_size: 4999}\n",
                   "layer 'big' (AdaptiveMaxPooling1D): bins of unequal sizes take a Slice per "
                   "output cell, 4999 here (at most 4096)");
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

/* SimpleRNN as ONNX's RNN with its activation (masked, go_backwards, in a Bidirectional, each
 * activation ONNX's RNN has); one it lacks (softmax) is refused naming the layer. */
static void test_simple_rnn(void)
{
    if (!ready()) return;
    fixture("simple_rnn_masked",
            "input: {shape: [12], dtype: int32}\nlayers:\n"
            "  - Embedding: {input_dim: 30, output_dim: 5, mask_zero: true}\n"
            "  - SimpleRNN: {units: 4, return_sequences: true}\n"
            "  - SimpleRNN: {name: r, units: 3, return_sequences: true, go_backwards: true,"
            " activation: relu}\n"
            "  - Bidirectional: {layer: {SimpleRNN: {units: 3, return_sequences: true,"
            " activation: elu}}, merge_mode: sum}\n"
            "  - Bidirectional: {name: b2, layer: {SimpleRNN: {units: 2, activation: sigmoid}}}\n"
            "  - SimpleRNN: {name: l, units: 2, go_backwards: true, inputs: r}\n"
            "  - Concatenate: {inputs: [b2, l]}\n", 30);
    fixture("simple_rnn_activations",
            "input: {shape: [7, 3]}\nlayers:\n"
            "  - SimpleRNN: {units: 4, return_sequences: true, activation: leaky_relu}\n"
            "  - SimpleRNN: {units: 4, return_sequences: true, activation: hard_sigmoid,"
            " use_bias: false}\n"
            "  - SimpleRNN: {units: 3, return_sequences: true, activation: null}\n"
            "  - SimpleRNN: {units: 3, return_sequences: true, activation: softsign}\n"
            "  - Bidirectional: {layer: {SimpleRNN: {units: 2, activation: softplus}}}\n", 0);
    export_refused("srnn", "input: {shape: [4, 3]}\nlayers:\n"
                   "  - SimpleRNN: {name: sm, units: 2, activation: softmax}\n",
                   "layer 'sm' (SimpleRNN): activation softmax");
}

/* LSTMs and GRUs with other activations than tanh and sigmoid: ONNX's activations list (an
 * LSTM's f, g, h; a GRU's f, g) with the alphas and betas of those that take them (masked,
 * going backwards, both GRU forms, in a Bidirectional); one ONNX lacks is refused naming the
 * layer and the argument. */
static void test_recurrent_activations(void)
{
    if (!ready()) return;
    fixture("recurrent_activations",
            "input: {shape: [12], dtype: int32}\nlayers:\n"
            "  - Embedding: {input_dim: 30, output_dim: 5, mask_zero: true}\n"
            "  - LSTM: {units: 4, return_sequences: true, activation: relu}\n"
            "  - LSTM: {units: 3, return_sequences: true, go_backwards: true,"
            " activation: elu, recurrent_activation: hard_sigmoid}\n"
            "  - GRU: {units: 3, return_sequences: true, activation: leaky_relu,"
            " recurrent_activation: hard_sigmoid}\n"
            "  - GRU: {units: 3, return_sequences: true, reset_after: false, activation: null,"
            " recurrent_activation: softsign}\n"
            "  - Bidirectional: {layer: {LSTM: {units: 2, activation: softplus,"
            " recurrent_activation: hard_sigmoid}}, merge_mode: sum}\n", 30);
    export_refused("lstm_gelu", "input: {shape: [4, 3]}\nlayers:\n"
                   "  - LSTM: {name: lg, units: 2, recurrent_activation: gelu}\n",
                   "layer 'lg' (LSTM): recurrent_activation gelu");
}

/* RNN with a cell: its layer's node (masked, going backwards, in a Bidirectional), a
 * StackedRNNCells as a node per cell; a stack going backwards under a mask,
 * zero_output_for_mask under one and a Bidirectional around a stack are refused naming the
 * layer. */
static void test_rnn_cell(void)
{
    if (!ready()) return;
    fixture("rnn_cell_masked",
            "input: {shape: [12], dtype: int32}\nlayers:\n"
            "  - Embedding: {input_dim: 30, output_dim: 5, mask_zero: true}\n"
            "  - RNN: {cell: {StackedRNNCells: {cells: [{LSTMCell: {units: 4}}, {GRUCell: "
            "{units: 3}}, {SimpleRNNCell: {units: 3, activation: relu}}]}},"
            " return_sequences: true}\n"
            "  - RNN: {name: r2, cell: {GRUCell: {units: 3}}, return_sequences: true,"
            " go_backwards: true}\n"
            "  - Bidirectional: {layer: {RNN: {cell: {LSTMCell: {units: 2}}}}}\n", 30);
    fixture("rnn_cell_nomask",
            "input: {shape: [7, 3]}\nlayers:\n"
            "  - RNN: {cell: {StackedRNNCells: {cells: [{GRUCell: {units: 4, reset_after:"
            " false}}, {LSTMCell: {units: 3}}]}}, go_backwards: true, return_sequences: true,"
            " zero_output_for_mask: true}\n"
            "  - Bidirectional: {layer: {RNN: {cell: {SimpleRNNCell: {units: 2}},"
            " return_sequences: true}}, merge_mode: sum}\n"
            "  - RNN: {name: last, cell: {LSTMCell: {units: 2}}}\n", 0);
    /* a Bidirectional around a StackedRNNCells, unmasked: each direction its stack */
    fixture("bidirectional_stack",
            "input: {shape: [6, 3]}\nlayers:\n"
            "  - Bidirectional: {layer: {RNN: {cell: [GRUCell: 4, LSTMCell: 3],"
            " return_sequences: true}}}\n"
            "  - Bidirectional: {layer: {RNN: {cell: [SimpleRNNCell: 3, GRUCell: 2],"
            " return_sequences: true}}, merge_mode: ave}\n"
            "  - Bidirectional: {layer: {RNN: {cell: {StackedRNNCells: {cells: [LSTMCell: 2,"
            " LSTMCell: 2]}}}}, merge_mode: mul}\n", 0);
    static const char *const refused[][2] = {
        {"  - RNN: {name: st, cell: {StackedRNNCells: {cells: [{GRUCell: {units: 2}},"
         " {GRUCell: {units: 2}}]}}, go_backwards: true}\n",
         "layer 'st' (RNN): a StackedRNNCells going backwards under a mask"},
        {"  - RNN: {name: z, cell: {GRUCell: {units: 2}}, zero_output_for_mask: true}\n",
         "layer 'z' (RNN): zero_output_for_mask under a mask"},
        {"  - Bidirectional: {name: bs, layer: {RNN: {cell: {StackedRNNCells: {cells: "
         "[{GRUCell: {units: 2}}, {GRUCell: {units: 2}}]}}}}}\n",
         "layer 'bs' (Bidirectional): a Bidirectional around a StackedRNNCells under a mask"}};
    for (int k = 0; k < 3; k++) {
        char yaml[1024];
        snprintf(yaml, sizeof yaml, "input: {shape: [6], dtype: int32}\nlayers:\n"
                 "  - Embedding: {input_dim: 30, output_dim: 3, mask_zero: true}\n%s",
                 refused[k][0]);
        export_refused("rnn_cell_refused", yaml, refused[k][1]);
    }
}

/* go_backwards: ONNX's reverse direction, its outputs' steps reversed back into Keras's
 * order; masked (the padded steps first, at the zero state) and not, every step and the
 * last. */
static void test_go_backwards(void)
{
    if (!ready()) return;
    fixture("backwards_masked",
            "input: {shape: [12], dtype: int32}\nlayers:\n"
            "  - Embedding: {input_dim: 30, output_dim: 5, mask_zero: true}\n"
            "  - LSTM: {units: 4, return_sequences: true, go_backwards: true}\n"
            "  - GRU: {name: g, units: 3, return_sequences: true, go_backwards: true}\n"
            "  - GRU: {units: 3, go_backwards: true, reset_after: false}\n"
            "  - LSTM: {name: l2, units: 2, go_backwards: true, inputs: g}\n"
            "  - Concatenate: {inputs: [gru, l2]}\n", 30);
    fixture("backwards_nomask",
            "input: {shape: [7, 3]}\nlayers:\n"
            "  - GRU: {units: 4, return_sequences: true, go_backwards: true}\n"
            "  - LSTM: {units: 3, return_sequences: true, go_backwards: true}\n"
            "  - LSTM: {units: 2, go_backwards: true}\n", 0);
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
            "  - Concatenate: {name: c2, axis: 1, inputs: [c, c]}\n"
            "  - Flatten: {}\n  - Dense: {units: 8}\n  - Reshape: {target_shape: [2, 4]}\n"
            "  - Dense: {units: 3}\n", 0);
}

/* Pipelines (expanded into their layers, named under theirs: pipeline/in/dense_1/kernel) */
static void test_pipeline(void)
{
    if (!ready()) return;
    fixture("pipeline",
            "input: {shape: [5]}\nlayers:\n"
            "  - Pipeline: {layers: [{Dense: {units: 4}}, {Pipeline: {name: in, layers: "
            "[BatchNormalization, {Dense: {units: 3}}]}}]}\n"
            "  - Dense: {units: 2, inputs: pipeline}\n", 0);
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
            "  - Dense: {units: 8, activation: relu6}\n  - Dense: {units: 8, activation: hard_silu}\n"
            "  - Dense: {units: 8, activation: mish}\n"
            "  - Activation: {activation: tanh}\n", 0);
    /* Keras's activation layers: ReLU's threshold, clip and slope composed, LeakyRelu, Elu,
     * the ones that are tfc activations, PRelu (per channel in NCHW images, and per element),
     * Rescaling's Mul and Add, a Softmax layer last */
    fixture("activation_layers",
            "input: {shape: [8]}\nlayers:\n"
            "  - Rescaling: {scale: 4.0, offset: -2.0}\n  - Dense: {units: 8}\n"
            "  - ReLU: {max_value: 1.5, negative_slope: 0.1, threshold: 0.25}\n"
            "  - Dense: {units: 8}\n  - ReLU: {threshold: 0.5}\n"
            "  - Dense: {units: 8}\n  - ReLU: {max_value: 2.0}\n"
            "  - Dense: {units: 8}\n  - ReLU: {negative_slope: 0.05, max_value: 1.0}\n"
            "  - Dense: {units: 8}\n  - LeakyReLU: {}\n  - Dense: {units: 8}\n  - ELU: {alpha: 0.7}\n"
            "  - Dense: {units: 8}\n  - ReLU: {max_value: 6}\n  - Dense: {units: 8}\n  - ELU: {}\n"
            "  - Dense: {units: 8}\n  - PReLU: {}\n  - Dense: {units: 5}\n  - Softmax: {}\n", 0);
    fixture("sequence1d",
            "input: {shape: [9, 4]}\nlayers:\n  - ZeroPadding1D: {padding: [1, 2]}\n"
            "  - Conv1D: {filters: 3, kernel_size: 3, activation: tanh}\n"
            "  - UpSampling1D: {size: 3}\n  - Cropping1D: {cropping: [2, 4]}\n", 0);
    fixture("subtract_average",
            "input: {shape: [6]}\nlayers:\n  - Dense: {name: a, units: 5, activation: tanh}\n"
            "  - Dense: {name: b, units: 5, inputs: input}\n"
            "  - Subtract: {name: d, inputs: [a, b]}\n  - Dense: {name: c, units: 5, inputs: input}\n"
            "  - Average: {inputs: [d, b, c]}\n", 0);
    /* Maximum and Minimum (Max, Min) of vectors, and of images (NCHW in the graph) */
    fixture("maximum_minimum",
            "input: {shape: [6]}\nlayers:\n  - Dense: {name: a, units: 5, activation: relu}\n"
            "  - Dense: {name: b, units: 5, inputs: input}\n"
            "  - Dense: {name: c, units: 5, inputs: input}\n"
            "  - Maximum: {name: m, inputs: [a, b, c]}\n  - Minimum: {inputs: [m, b, a]}\n", 0);
    fixture("maximum_minimum_image",
            "input: {shape: [5, 6, 3]}\nlayers:\n"
            "  - Conv2D: {name: a, filters: 4, kernel_size: 3, padding: same}\n"
            "  - Conv2D: {name: b, filters: 4, kernel_size: 3, padding: same, inputs: input}\n"
            "  - Maximum: {name: m, inputs: [a, b]}\n  - Conv2D: {name: c, filters: 4, "
            "kernel_size: 1}\n  - Minimum: {inputs: [c, a]}\n  - Flatten: {}\n", 0);
    /* ZeroPadding3D (Pad), Cropping3D (Slice) and UpSampling3D (Expand between Reshapes) on
     * volumes, around a Dense */
    fixture("volume",
            "input: {shape: [2, 3, 2, 2]}\nlayers:\n"
            "  - ZeroPadding3D: {padding: [[1, 0], 1, [0, 2]]}\n"
            "  - Dense: {units: 3, activation: tanh}\n"
            "  - Cropping3D: {cropping: [[0, 1], [2, 1], 1]}\n"
            "  - UpSampling3D: {size: [2, 1, 3]}\n  - UpSampling3D: {}\n"
            "  - Cropping3D: {}\n", 0);
    /* Dot: MatMul of vectors, sequences (each operand transposed or not), normalize (its
     * clamp at 1e7), and a convolution's output (NCHW in the graph) over a middle axis */
    fixture("dot",
            "input: {shape: [5, 3]}\nlayers:\n  - Dense: {name: q, units: 4}\n"
            "  - Dense: {name: v, units: 5, inputs: input}\n"
            "  - Dot: {name: s, axes: 2, inputs: [q, q]}\n"
            "  - Dot: {name: g, axes: [1, 1], normalize: true, inputs: [q, v]}\n"
            "  - Dot: {name: h, axes: [1, -1], inputs: [q, v]}\n"
            "  - Flatten: {name: f, inputs: input}\n  - Dense: {name: w, units: 4}\n"
            "  - Dot: {name: u, axes: [1, 2], normalize: true, inputs: [w, q]}\n"
            "  - Dot: {name: c, axes: 1, inputs: [w, w]}\n"
            "  - Flatten: {name: fs, inputs: s}\n  - Flatten: {name: fg, inputs: g}\n"
            "  - Flatten: {name: fh, inputs: h}\n"
            "  - Concatenate: {inputs: [fs, fg, fh, u, c]}\n", 0);
    fixture("dot_image",
            "input: {shape: [4, 5, 3]}\nlayers:\n"
            "  - Conv2D: {name: a, filters: 3, kernel_size: 3, padding: same}\n"
            "  - Dot: {name: m, axes: 2, inputs: [a, input]}\n"
            "  - Dot: {name: n, axes: [3, 3], normalize: true, inputs: [input, a]}\n"
            "  - Flatten: {name: fm, inputs: m}\n  - Flatten: {name: fn, inputs: n}\n"
            "  - Concatenate: {inputs: [fm, fn]}\n", 0);
    /* EinsumDense: Einsum and Add of the bias in Keras's shape (broadcast on the heads only,
     * (2, 1)); the MHA projections, '...' in front and at the end, a shared letter, and a
     * convolution's output (NCHW in the graph) */
    fixture("einsum_dense",
            "input: {shape: [4, 5]}\nlayers:\n"
            "  - EinsumDense: {equation: \"abc,cde->abde\", output_shape: [null, 2, 3], "
            "bias_axes: d}\n"
            "  - EinsumDense: {equation: \"abde,deg->abg\", output_shape: [null, 5], "
            "bias_axes: g, activation: tanh}\n"
            "  - EinsumDense: {equation: \"...b,bc->...c\", output_shape: 3, bias_axes: c}\n"
            "  - EinsumDense: {equation: \"ab...,bc->ac...\", output_shape: 2, bias_axes: c}\n"
            "  - EinsumDense: {equation: \"abc,bcd->abd\", output_shape: [2, 3]}\n"
            "  - EinsumDense: {equation: \"abc,cd->ad\", output_shape: 4, bias_axes: d}\n", 0);
    fixture("einsum_dense_image",
            "input: {shape: [4, 5, 3]}\nlayers:\n"
            "  - Conv2D: {filters: 3, kernel_size: 3, padding: same}\n"
            "  - EinsumDense: {equation: \"abcd,de->abce\", output_shape: [null, null, 4], "
            "bias_axes: ce}\n", 0);
    /* Normalization: Sub and Div, or Mul and Add (invert), adapted weights and given
     * constants, per feature, over two kept axes, scalars; after a convolution (NCHW) */
    fixture("normalization",
            "input: {shape: [3, 4]}\nlayers:\n  - Normalization: {}\n  - Dense: {units: 4}\n"
            "  - Normalization: {axis: null, mean: 0.5, variance: 2.0}\n"
            "  - Normalization: {axis: [1, 2], invert: true}\n"
            "  - Normalization: {mean: [1, 2, 3, 4], variance: [0.5, 1, 2, 0]}\n"
            "  - Flatten: {}\n  - Dense: {units: 3}\n", 0);
    fixture("normalization_image",
            "input: {shape: [5, 6, 3]}\nlayers:\n  - Normalization: {axis: null}\n"
            "  - Conv2D: {filters: 4, kernel_size: 3}\n  - Normalization: {}\n"
            "  - Conv2D: {filters: 2, kernel_size: 3}\n", 0);
    fixture("prelu_image",
            "input: {shape: [5, 6, 3]}\nlayers:\n"
            "  - Rescaling: {scale: 2.0}\n"
            "  - Conv2D: {filters: 4, kernel_size: 3, padding: same}\n"
            "  - PReLU: {shared_axes: [1, 2]}\n  - Conv2D: {filters: 3, kernel_size: 3}\n"
            "  - PReLU: {}\n  - ReLU: {}\n  - GlobalAveragePooling2D: {}\n", 0);
    fixture("layer_scale",
            "input: {shape: [5, 6, 3]}\nlayers:\n"
            "  - LayerScale: {init_values: 0.5, projection_dim: 3}\n"
            "  - Conv2D: {filters: 4, kernel_size: 3, padding: same}\n"
            "  - LayerScale: {init_values: 1.0e-6, projection_dim: 4}\n"
            "  - GlobalAveragePooling2D: {}\n  - Dense: {units: 5}\n"
            "  - LayerScale: {init_values: 2.0, projection_dim: 5}\n", 0);
    /* CustomScaleLayer: an image (channels last) joined with its convolution's branch (NCHW),
     * then two Dense branches */
    fixture("custom_scale",
            "input: {shape: [5, 6, 3]}\nlayers:\n"
            "  - Conv2D: {name: b, filters: 3, kernel_size: 3, padding: same}\n"
            "  - CustomScaleLayer: {scale: 0.17, inputs: [input, b]}\n"
            "  - Conv2D: {name: c, filters: 4, kernel_size: 1}\n"
            "  - CustomScaleLayer: {scale: -1.5, inputs: [c, c]}\n"
            "  - GlobalAveragePooling2D: {name: g}\n  - Dense: {name: d, units: 5}\n"
            "  - Dense: {name: e, units: 5, inputs: g}\n"
            "  - CustomScaleLayer: {scale: 0.2, inputs: [d, e]}\n", 0);
}

/* The vision layers' export (GlobalMaxPooling2D and keepdims, DepthwiseConv2D,
 * SeparableConv2D, ZeroPadding2D, Cropping2D, Conv2DTranspose, UpSampling2D, Multiply,
 * Resizing, CenterCrop, RandomCrop); a
 * layer with no ONNX form here is refused naming the layer and its type, writing nothing. */
static void test_vision_layers(void)
{
    if (!ready()) return;
    fixture("global_pools",
            "input: {shape: [5, 6, 3]}\nlayers:\n"
            "  - Conv2D: {name: c, filters: 4, kernel_size: 3, activation: relu6}\n"
            "  - GlobalMaxPooling2D: {keepdims: true}\n"
            "  - GlobalAveragePooling2D: {name: a, keepdims: true, inputs: c}\n"
            "  - Add: {inputs: [global_max_pooling2d, a]}\n  - Flatten: {}\n"
            "  - GlobalMaxPooling2D: {name: m2, inputs: c}\n"
            "  - Concatenate: {inputs: [flatten, m2]}\n", 0);
    /* DepthwiseConv2D as a grouped Conv (strides with dilation, depth_multiplier), padding
     * as Pad and cropping as Slice in every form */
    fixture("depthwise_pad_crop",
            "input: {shape: [9, 8, 3]}\nlayers:\n"
            "  - ZeroPadding2D: {padding: [[1, 2], [0, 3]]}\n"
            "  - DepthwiseConv2D: {kernel_size: 3, strides: 2, padding: same, depth_multiplier: 2, "
            "activation: relu6}\n"
            "  - DepthwiseConv2D: {kernel_size: [2, 3], strides: [1, 2], dilation_rate: [2, 1], "
            "use_bias: false}\n"
            "  - Cropping2D: {cropping: [[1, 0], 0]}\n"
            "  - ZeroPadding2D: {}\n  - Cropping2D: {cropping: [1, [0, 2]]}\n"
            "  - Flatten: {}\n", 0);
    /* SeparableConv2D as a grouped Conv then a 1x1 Conv: strides with same padding and
     * depth_multiplier 2, then dilation, valid padding and no bias */
    fixture("separable",
            "input: {shape: [9, 8, 3]}\nlayers:\n"
            "  - SeparableConv2D: {filters: 4, kernel_size: 3, strides: 2, padding: same, "
            "depth_multiplier: 2, activation: relu6}\n"
            "  - SeparableConv2D: {filters: 3, kernel_size: [2, 3], dilation_rate: [2, 1], "
            "depth_multiplier: 3, use_bias: false}\n"
            "  - Flatten: {}\n", 0);
    /* a decoder: Conv2DTranspose (valid, same with output_padding, a kernel below the
     * stride), UpSampling2D both ways (odd factors), squeeze-and-excitation's Multiply with
     * a (1, 1, C) scale and a (C) one */
    fixture("decoder",
            "input: {shape: [4, 3, 2]}\nlayers:\n"
            "  - Conv2DTranspose: {name: t1, filters: 3, kernel_size: 3, strides: 2}\n"
            "  - Conv2DTranspose: {filters: 2, kernel_size: [2, 3], strides: [3, 2], padding: same, "
            "output_padding: [1, 0], activation: mish}\n"
            "  - Conv2DTranspose: {filters: 2, kernel_size: 1, strides: 2}\n"
            "  - UpSampling2D: {size: [1, 3], interpolation: bilinear}\n"
            "  - UpSampling2D: {name: u, size: [3, 1]}\n"
            "  - GlobalAveragePooling2D: {keepdims: true}\n"
            "  - Dense: {name: s, units: 2, activation: hard_sigmoid}\n"
            "  - GlobalMaxPooling2D: {inputs: u}\n  - Dense: {name: v, units: 2}\n"
            "  - Multiply: {inputs: [s, u, v]}\n"
            "  - Conv2D: {filters: 2, kernel_size: 3, strides: 4}\n  - Flatten: {}\n", 0);
    /* Resizing (bilinear up one axis and down the other, a pad of fill_value, nearest, an
     * aspect-ratio crop), CenterCrop's window, RandomCrop at inference (resized) */
    fixture("crop_resize",
            "input: {shape: [7, 9, 2]}\nlayers:\n"
            "  - Resizing: {height: 10, width: 6}\n"
            "  - Conv2D: {filters: 3, kernel_size: 3, padding: same}\n"
            "  - Resizing: {height: 8, width: 8, pad_to_aspect_ratio: true, fill_value: 0.5}\n"
            "  - Resizing: {height: 5, width: 11, interpolation: nearest}\n"
            "  - CenterCrop: {height: 3, width: 7}\n"
            "  - RandomCrop: {height: 6, width: 4}\n"
            "  - Resizing: {height: 3, width: 2, crop_to_aspect_ratio: true}\n"
            "  - Flatten: {}\n", 0);
    /* CLAHE, active at inference: its tiles' tables have no ONNX form here */
    export_refused("eq", "input: {shape: [6, 5, 3]}\nlayers:\n"
                   "  - ContrastLimitedAdaptiveHistogramEqualization: {name: eq}\n"
                   "  - Flatten: {}\n",
                   "layer 'eq' (ContrastLimitedAdaptiveHistogramEqualization): no ONNX form "
                   "for this layer type");
}

/* ConvLSTM1D, ConvLSTM2D and ConvLSTM3D unrolled over their steps: strided same padding
 * (odd and even sizes, an even kernel), dilation, the last output and every step's, going
 * backwards (its outputs in that order), other activations (relu, hard_sigmoid), no bias,
 * stacked, after a Conv2D (its NCHW output laid back) and after a TimeDistributed
 * convolution; dropout is the identity at inference. */
static void test_conv_lstm(void)
{
    if (!ready()) {
        tfc_test_skip("python3 lacks onnx, onnxruntime or numpy");
        return;
    }
    fixture("conv_lstm2d",
            "input: {shape: [4, 7, 6, 3]}\nlayers:\n"
            "  - ConvLSTM2D: {filters: 4, kernel_size: [3, 2], strides: 2, padding: same, "
            "return_sequences: true, dropout: 0.3, recurrent_dropout: 0.2}\n"
            "  - ConvLSTM2D: {filters: 3, kernel_size: 2, go_backwards: true, "
            "return_sequences: true, activation: relu, recurrent_activation: hard_sigmoid}\n"
            "  - ConvLSTM2D: {filters: 2, kernel_size: 1, use_bias: false, go_backwards: true}\n"
            "  - Flatten: {}\n  - Dense: {units: 3}\n", 0);
    fixture("conv_lstm1d",
            "input: {shape: [5, 9, 2]}\nlayers:\n"
            "  - Conv2D: {filters: 3, kernel_size: 2, padding: same}\n"
            "  - ConvLSTM1D: {filters: 3, kernel_size: 3, dilation_rate: 2, "
            "return_sequences: true}\n"
            "  - ConvLSTM1D: {filters: 2, kernel_size: 2, strides: 2, padding: same, "
            "go_backwards: true}\n"
            "  - Flatten: {}\n", 0);
    fixture("conv_lstm3d",
            "input: {shape: [3, 4, 5, 4, 2]}\nlayers:\n"
            "  - TimeDistributed: {layer: {Conv3D: {filters: 2, kernel_size: 1}}}\n"
            "  - ConvLSTM3D: {filters: 2, kernel_size: [2, 3, 2], padding: same, "
            "return_sequences: true, go_backwards: true}\n"
            "  - ConvLSTM3D: {filters: 3, kernel_size: 2, strides: [1, 2, 1]}\n"
            "  - Flatten: {}\n", 0);
}

/* The numeric preprocessing layers: Discretization's buckets (int into an Embedding, one_hot,
 * count), CategoryEncoding over padded token ids (multi_hot, count, one_hot), IntegerLookup
 * (in-vocabulary values and two OOV indices into an Embedding, multi_hot, invert back to
 * values); Hashing is refused. */
static void test_preprocessing(void)
{
    if (!ready()) {
        tfc_test_skip("python3 lacks onnx, onnxruntime or numpy");
        return;
    }
    fixture("discretization",
            "input: {shape: [6]}\nlayers:\n"
            "  - Discretization: {name: b, bin_boundaries: [0.2, 0.5, 0.8]}\n"
            "  - Embedding: {input_dim: 4, output_dim: 3}\n  - Flatten: {name: f}\n"
            "  - Discretization: {name: h, bin_boundaries: [0.1, 0.3, 0.6],"
            " output_mode: one_hot, inputs: input}\n  - Flatten: {name: g}\n"
            "  - Discretization: {name: c, bin_boundaries: [0.25, 0.5, 0.75],"
            " output_mode: count, inputs: input}\n"
            "  - Concatenate: {inputs: [f, g, c]}\n  - Dense: {units: 3}\n", 0);
    fixture("category_encoding",
            "input: {shape: [8], dtype: int32}\nlayers:\n"
            "  - CategoryEncoding: {name: m, num_tokens: 12}\n"
            "  - CategoryEncoding: {name: c, num_tokens: 12, output_mode: count,"
            " inputs: input}\n"
            "  - CategoryEncoding: {name: o, num_tokens: 12, output_mode: one_hot,"
            " inputs: input}\n  - Flatten: {name: f}\n"
            "  - Concatenate: {inputs: [m, c, f]}\n  - Dense: {units: 4}\n", 12);
    fixture("integer_lookup",
            "input: {shape: [8], dtype: int32}\nlayers:\n"
            "  - IntegerLookup: {name: l, vocabulary: [7, 3, 11, 1, 5], num_oov_indices: 2}\n"
            "  - Embedding: {input_dim: 7, output_dim: 3}\n  - Flatten: {name: f}\n"
            "  - IntegerLookup: {name: m, vocabulary: [2, 4, 6, 8], output_mode: multi_hot,"
            " inputs: input}\n"
            "  - IntegerLookup: {name: v, vocabulary: [30, 10, 20, 40, 50, 60, 70, 80, 90],"
            " invert: true, inputs: input}\n"
            "  - Concatenate: {inputs: [f, m, v]}\n  - Dense: {units: 3}\n", 12);
    export_refused("hash", "input: {shape: [4], dtype: int32}\nlayers:\n"
                   "  - Hashing: {name: hs, num_bins: 8, output_mode: one_hot}\n"
                   "  - Flatten: {}\n",
                   "layer 'hs' (Hashing): its hash of each value's decimal digits");
}

/* STFTSpectrogram in every mode (log, magnitude, psd, real, imag, angle, stft), valid and
 * same padding, channels last and first, expand_dims, one and two channels; MelSpectrogram
 * in decibels (the batch's maximum less top_db) and as power, hamming and no window. */
static void test_spectrograms(void)
{
    if (!ready()) {
        tfc_test_skip("python3 lacks onnx, onnxruntime or numpy");
        return;
    }
    static const char *const stft[] = {
        "{frame_length: 32, frame_step: 12, fft_length: 64}",
        "{mode: magnitude, frame_length: 24, frame_step: 10, padding: same, expand_dims: true}",
        "{mode: psd, frame_length: 16, fft_length: 32, data_format: channels_first}",
        "{mode: real, frame_length: 20, frame_step: 7, window: hamming, periodic: true}",
        "{mode: imag, frame_length: 20, scaling: spectrum, data_format: channels_first, "
        "expand_dims: true}",
        "{mode: angle, frame_length: 16, frame_step: 8, window: null}",
        "{mode: stft, frame_length: 16, frame_step: 9, padding: same, scaling: null}"};
    for (size_t i = 0; i < sizeof stft / sizeof *stft; i++) {
        char yaml[512], name[32];
        snprintf(yaml, sizeof yaml, "input: {shape: [%s]}\nlayers:\n"
                 "  - STFTSpectrogram: %s\n", i == 2 || i == 4 ? "2, 90" : i % 2 ? "90, 2"
                 : "100, 1", stft[i]);
        snprintf(name, sizeof name, "stft_%zu", i);
        fixture(name, yaml, 0);
    }
    fixture("stft_dense", "input: {shape: [120, 1]}\nlayers:\n"
            "  - STFTSpectrogram: {frame_length: 32, frame_step: 16}\n  - Flatten: {}\n"
            "  - Dense: {units: 3}\n", 0);
    fixture("mel_db", "input: {shape: [400]}\nlayers:\n"
            "  - MelSpectrogram: {fft_length: 64, sequence_stride: 16, num_mel_bins: 12,"
            " sampling_rate: 8000}\n", 0);
    fixture("mel_power", "input: {shape: [300]}\nlayers:\n"
            "  - MelSpectrogram: {fft_length: 32, sequence_stride: 10, sequence_length: 24,"
            " num_mel_bins: 8, sampling_rate: 4000, power_to_db: false, mag_exp: 1.0,"
            " window: hamming, min_freq: 100.0, max_freq: 1500.0}\n", 0);
    fixture("mel_top_db", "input: {shape: [256]}\nlayers:\n"
            "  - MelSpectrogram: {fft_length: 32, sequence_stride: 8, num_mel_bins: 10,"
            " sampling_rate: 8000, top_db: 20.0, ref_power: 0.01, window: null}\n"
            "  - Flatten: {}\n  - Dense: {units: 4}\n", 0);
}

/* The augmentation layers export as nothing (the identity at inference), between layers
 * and at the input. */
static void test_augmentation(void)
{
    if (!ready()) return;
    fixture("augmentation",
            "input: {shape: [6, 5, 2]}\nlayers:\n"
            "  - RandomFlip: {}\n  - RandomTranslation: {height_factor: 0.2, width_factor: 0.1}\n"
            "  - Conv2D: {filters: 3, kernel_size: 3}\n"
            "  - RandomRotation: {factor: 0.1}\n  - RandomZoom: {height_factor: 0.2}\n"
            "  - RandomContrast: {factor: 0.3}\n  - RandomShear: {x_factor: 0.2}\n"
            "  - RandomErasing: {}\n  - RandomGaussianBlur: {}\n"
            "  - RandomElasticTransform: {fill_mode: mirror}\n  - Flatten: {}\n", 0);
    /* the colour augmentations (layers/augment_color.c) likewise */
    fixture("augment_color",
            "input: {shape: [6, 5, 3]}\nlayers:\n"
            "  - RandomGrayscale: {}\n  - RandomInvert: {}\n"
            "  - Conv2D: {filters: 3, kernel_size: 3}\n"
            "  - Solarization: {addition_factor: 0.2}\n  - RandomPosterization: {factor: 4}\n"
            "  - RandomColorDegeneration: {factor: 0.3}\n  - RandomSaturation: {factor: 0.4}\n"
            "  - RandomHue: {factor: 0.2}\n"
            "  - RandomColorJitter: {brightness_factor: 0.1, hue_factor: 0.1}\n"
            "  - Flatten: {}\n", 0);
    /* AutoContrast (ReduceMin, ReduceMax and the stretch, layers/augment_tone.c) at the
     * input, in [0, 255], and after a convolution in a value_range; Equalization (the
     * identity at inference) between them */
    fixture("tone",
            "input: {shape: [6, 5, 3]}\nlayers:\n"
            "  - AutoContrast: {}\n  - Conv2D: {filters: 3, kernel_size: 3}\n"
            "  - Equalization: {bins: 64}\n"
            "  - AutoContrast: {value_range: [1, -2]}\n  - Flatten: {}\n", 0);
    /* RandomPerspective and RandomSharpness likewise */
    fixture("augment_persp",
            "input: {shape: [6, 5, 3]}\nlayers:\n"
            "  - RandomPerspective: {}\n  - Conv2D: {filters: 3, kernel_size: 3}\n"
            "  - RandomSharpness: {factor: 0.7}\n  - RandomPerspective: {scale: 0.3}\n"
            "  - Flatten: {}\n", 0);
    /* RandAugment (layers/rand_augment.c) likewise, at the input and after a convolution */
    fixture("rand_augment",
            "input: {shape: [6, 5, 3]}\nlayers:\n"
            "  - RandAugment: {}\n  - Conv2D: {filters: 3, kernel_size: 3}\n"
            "  - RandAugment: {num_ops: 3, value_range: [-2, 2]}\n  - Flatten: {}\n", 0);
    /* AugMix (layers/aug_mix.c) likewise */
    fixture("aug_mix",
            "input: {shape: [6, 5, 3]}\nlayers:\n"
            "  - AugMix: {}\n  - Conv2D: {filters: 3, kernel_size: 3}\n"
            "  - AugMix: {num_chains: 2, value_range: [-2, 2]}\n  - Flatten: {}\n", 0);
    /* RepeatVector (an Expand) and Identity (removed): an LSTM autoencoder */
    fixture("repeat",
            "input: {shape: [5, 3]}\nlayers:\n  - LSTM: {units: 4}\n"
            "  - RepeatVector: {n: 5}\n  - Identity: {}\n"
            "  - LSTM: {units: 4, return_sequences: true}\n  - Dense: {units: 3}\n", 0);
    /* the noise layers and ActivityRegularization: the identity at inference, so removed */
    fixture("noise",
            "input: {shape: [6, 5, 2]}\nlayers:\n"
            "  - GaussianNoise: {stddev: 0.2}\n  - Conv2D: {filters: 3, kernel_size: 3}\n"
            "  - SpatialDropout2D: {rate: 0.3}\n  - Reshape: {target_shape: [12, 3]}\n"
            "  - SpatialDropout1D: {rate: 0.3}\n"
            "  - Dropout: {rate: 0.3, noise_shape: [null, 1, null]}\n  - Flatten: {}\n"
            "  - Dense: {units: 4, activation: selu}\n  - AlphaDropout: {rate: 0.1}\n"
            "  - GaussianDropout: {rate: 0.2}\n  - ActivityRegularization: {l2: 0.1}\n", 0);
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
    CU_ASSERT_EQUAL(WEXITSTATUS(system(cmd)), 2); /* weights of another model: a usage error */
    CU_ASSERT(access(tfc_test_path("no.onnx"), F_OK) != 0);
    /* tfc-zoo export --onnx adds NAME.onnx beside the copied files */
    snprintf(cmd, sizeof cmd, "TFC_ZOO=model_zoo %s/tfc-zoo export fashion_cnn %s --onnx >/dev/null && "
             "python3 -c \"import onnx; onnx.checker.check_model(onnx.load('%s/fashion_cnn.onnx'), "
             "full_check=True)\" && test -f %s/fashion_cnn.safetensors", bin,
             tfc_test_path("zoo_out"), tfc_test_path("zoo_out"), tfc_test_path("zoo_out"));
    CU_ASSERT_EQUAL(system(cmd), 0);
}

TFC_TEST_MAIN("onnx", {"zoo", test_zoo}, {"vision_layers", test_vision_layers},
              {"preprocessing", test_preprocessing}, {"spectrograms", test_spectrograms},
              {"conv_lstm", test_conv_lstm},
              {"adaptive_pooling", test_adaptive_pooling},
              {"strided_same_conv_and_pooling", test_strided_same_conv_and_pooling},
              {"batch_norm", test_batch_norm}, {"masked_lstm", test_masked_lstm},
              {"attention", test_attention},
              {"score_attention", test_score_attention},
              {"position_embeddings", test_position_embeddings},
              {"rnn_cell", test_rnn_cell},
              {"go_backwards", test_go_backwards},
              {"conv1d_pooling1d", test_conv1d_pooling1d}, {"conv3d", test_conv3d},
              {"normalizations", test_normalizations}, {"group_norm", test_group_norm},
              {"permute_unit_norm", test_permute_unit_norm},
              {"gru_bidirectional", test_gru_bidirectional}, {"simple_rnn", test_simple_rnn},
              {"recurrent_activations", test_recurrent_activations},
              {"add_concatenate", test_add_concatenate}, {"activations", test_activations},
              {"augmentation", test_augmentation}, {"options", test_options},
              {"time_distributed", test_time_distributed},
              {"spectral_normalization", test_spectral_normalization},
              {"pipeline", test_pipeline})
