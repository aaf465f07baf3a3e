/* Model files: valid ones load with Keras's shapes, names and parameter counts; malformed
 * ones fail with the exact FILE:LINE:COL, key path and message (SPEC §6). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/model.h"
#include "core/schema.h"
#include "gradcheck.h"
#include "testutil.h"

static tfc_model *load(const char *yaml, tfc_error *err)
{
    tfc_error_clear(err);
    tfc_doc *doc = tfc_doc_load_string(yaml, strlen(yaml), "bad.yaml", err);
    if (!doc) return NULL;
    tfc_model *m = tfc_model_from_node(tfc_doc_root(doc), "bad", err);
    if (m) tfc_model_free(m);
    tfc_doc_free(doc);
    return m;
}

static const char *MNIST_CNN =
    "name: fashion_cnn\n"
    "input: {shape: [28, 28, 1]}\n"
    "layers:\n"
    "  - Conv2D: {filters: 32, kernel_size: 3, activation: relu}\n"
    "  - Conv2D: {name: conv2, filters: 64, kernel_size: 3, activation: relu}\n"
    "  - MaxPooling2D: {pool_size: 2}\n"
    "  - Dropout: {rate: 0.25}\n"
    "  - Flatten: {}\n"
    "  - Dense: {units: 128, activation: relu}\n"
    "  - Dropout: {rate: 0.5}\n"
    "  - Dense: {units: 10}\n"
    "loss: sparse_categorical_crossentropy\n"
    "metrics: [accuracy, {top_k_accuracy: {k: 3}}]\n";

static void test_valid_cnn(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_doc *doc = tfc_doc_load_string(MNIST_CNN, strlen(MNIST_CNN), "cnn.yaml", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    tfc_model *m = tfc_model_from_node(tfc_doc_root(doc), "cnn", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_STRING_EQUAL(tfc_model_name(m), "fashion_cnn");
    CU_ASSERT_EQUAL(tfc_model_nlayers(m), 8);
    /* Keras's mnist_cnn: 1,199,882 parameters. */
    CU_ASSERT_EQUAL(tfc_model_param_count(m), 1199882);
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 0)->name, "conv2d");
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 1)->name, "conv2");
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 3)->name, "dropout");
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 6)->name, "dropout_1");
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 7)->name, "dense_1");
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 2)->name, "max_pooling2d");
    CU_ASSERT_EQUAL(tfc_model_layer(m, 1)->out_shape.dim[0], 24);
    CU_ASSERT_EQUAL(tfc_model_layer(m, 4)->out_shape.dim[0], 9216);
    CU_ASSERT_EQUAL(tfc_model_classes(m), 10);
    CU_ASSERT_EQUAL(tfc_model_nmetrics(m), 2);
    CU_ASSERT_EQUAL(tfc_model_metric(m, 1)->k, 3);
    tfc_model_free(m);
    tfc_doc_free(doc);
}

static void test_same_padding_shapes(void)
{
    const char *y = "input: {shape: [10, 9, 3]}\n"
                    "layers:\n"
                    "  - Conv2D: {filters: 4, kernel_size: [2, 4], strides: 2, padding: same}\n"
                    "  - Conv2D: {filters: 4, kernel_size: 3, dilation_rate: 2}\n"
                    "  - GlobalAveragePooling2D: {}\n"
                    "  - Dense: {units: 2, activation: softmax}\n";
    tfc_error err;
    tfc_error_clear(&err);
    tfc_doc *doc = tfc_doc_load_string(y, strlen(y), "s.yaml", &err);
    tfc_model *m = doc ? tfc_model_from_node(tfc_doc_root(doc), "s", &err) : NULL;
    if (!m) fputs(err.text, stderr);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    /* same: ceil(10/2) = 5, ceil(9/2) = 5; then valid, dilated kernel spans 5: 1x1 */
    CU_ASSERT_EQUAL(tfc_model_layer(m, 0)->out_shape.dim[0], 5);
    CU_ASSERT_EQUAL(tfc_model_layer(m, 0)->out_shape.dim[1], 5);
    CU_ASSERT_EQUAL(tfc_model_layer(m, 1)->out_shape.dim[0], 1);
    CU_ASSERT_EQUAL(tfc_model_layer(m, 1)->out_shape.dim[1], 1);
    CU_ASSERT_EQUAL(tfc_model_layer(m, 2)->out_shape.dim[0], 4);
    tfc_model_free(m);
    tfc_doc_free(doc);
}

/* Keras's Sequential form of the input, a first layer `- InputLayer:` (model.get_config()'s
 * batch_shape, dtype, sparse, ragged, name) or `- Input:`, and bare `- Flatten` items, load as
 * `input:` does: the same layers, shapes and parameters; the InputLayer's name stands for
 * `input` in inputs:, and a null time axis takes max_length as input: does. */
static void test_sequential_input(void)
{
    static const char *const forms[] = {
        "layers:\n  - InputLayer: {batch_shape: [null, 6, 2], dtype: float32, sparse: false,"
        " ragged: false, name: pixels, optional: false}\n",
        "layers:\n  - Input: {shape: [6, 2], name: pixels}\n",
        "layers:\n  - InputLayer: {shape: [6, 2], name: pixels}\n"};
    for (size_t f = 0; f < sizeof forms / sizeof *forms; f++) {
        char y[512];
        snprintf(y, sizeof y, "%s  - Flatten\n  - Dense: {name: a, units: 3}\n"
                 "  - Flatten: {inputs: pixels}\n  - Concatenate: {inputs: [a, flatten_1]}\n"
                 "  - Dense: {units: 2}\n", forms[f]);
        tfc_error err;
        tfc_error_clear(&err);
        tfc_doc *doc = tfc_doc_load_string(y, strlen(y), "seq.yaml", &err);
        tfc_model *m = doc ? tfc_model_from_node(tfc_doc_root(doc), "seq", &err) : NULL;
        if (!m) fprintf(stderr, "\nform %zu: %s\n", f, err.text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        CU_ASSERT_EQUAL(tfc_model_nlayers(m), 5); /* Keras's model.layers: no InputLayer */
        CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 0)->name, "flatten");
        CU_ASSERT_EQUAL(tfc_model_input_shape(m)->ndim, 2);
        CU_ASSERT_EQUAL(tfc_model_input_shape(m)->dim[0], 6);
        CU_ASSERT_EQUAL(tfc_model_layer(m, 2)->inputs[0], -1); /* pixels: the input */
        CU_ASSERT_EQUAL(tfc_model_layer(m, 3)->out_shape.dim[0], 15);
        CU_ASSERT_EQUAL(tfc_model_param_count(m), 12 * 3 + 3 + 15 * 2 + 2);
        tfc_model_free(m);
        tfc_doc_free(doc);
    }
    const char *y = "layers:\n  - InputLayer: {batch_shape: [null, null, 3], max_length: 9}\n"
                    "  - LSTM: {units: 4}\n";
    tfc_error err;
    tfc_error_clear(&err);
    tfc_doc *doc = tfc_doc_load_string(y, strlen(y), "seq.yaml", &err);
    tfc_model *m = doc ? tfc_model_from_node(tfc_doc_root(doc), "seq", &err) : NULL;
    if (!m) fprintf(stderr, "\nvarlen: %s\n", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(tfc_model_max_length(m), 9);
    tfc_model_free(m);
    tfc_doc_free(doc);
}

/* Keras's input_shape (or input_dim) on a Sequential model's first layer gives the input:
 * the same model as with `input:`; into an Embedding (whose input_dim is its own) token ids,
 * as Keras 2's Embedding input_length does; given with `input:`, or on another layer (where
 * Keras ignores it), an error (input_length: checked against the steps). Keras's Layer
 * argument dtype. */
static void test_input_shape_arg(void)
{
    static const char *const forms[] = {
        "layers:\n  - Dense: {units: 3, input_shape: [6, 2]}\n  - Flatten\n"
        "  - Dense: {units: 2}\n",
        "layers:\n  - Dense: {units: 3, input_dim: 2}\n  - Dense: {units: 2}\n",
        "layers:\n  - Embedding: {input_dim: 20, output_dim: 3, input_shape: [6]}\n"
        "  - Flatten\n  - Dense: {units: 2}\n",
        /* Keras 2's Embedding(20, 3, input_length=6) first in a Sequential */
        "layers:\n  - Embedding: {input_dim: 20, output_dim: 3, input_length: 6}\n"
        "  - Flatten\n  - Dense: {units: 2}\n"};
    const int64_t params[] = {2 * 3 + 3 + 18 * 2 + 2, 2 * 3 + 3 + 3 * 2 + 2,
                              20 * 3 + 18 * 2 + 2, 20 * 3 + 18 * 2 + 2};
    for (int f = 0; f < 4; f++) {
        tfc_error err;
        tfc_error_clear(&err);
        tfc_doc *doc = tfc_doc_load_string(forms[f], strlen(forms[f]), "is.yaml", &err);
        tfc_model *m = doc ? tfc_model_from_node(tfc_doc_root(doc), "is", &err) : NULL;
        if (!m) fprintf(stderr, "\nform %d: %s\n", f, err.text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        CU_ASSERT_EQUAL(tfc_model_input_shape(m)->ndim, f == 1 ? 1 : f == 0 ? 2 : 1);
        CU_ASSERT_EQUAL(tfc_model_input_shape(m)->dim[0], f == 1 ? 2 : 6);
        CU_ASSERT_EQUAL(tfc_model_input_dtype(m), f >= 2 ? TFC_I32 : TFC_F32);
        CU_ASSERT_EQUAL(tfc_model_param_count(m), params[f]);
        tfc_model_free(m);
        tfc_doc_free(doc);
    }
    tfc_test_expect_model_error("input: {shape: [4]}\nlayers:\n  - Dense: {units: 3, "
                                "input_shape: [4]}\n",
                                "t.yaml:3:23: error: layers[0].Dense.input_shape: gives the "
                                "input that `input:` (line 1) gives already");
    tfc_test_expect_model_error("layers:\n  - Dense: {units: 3, input_dim: 4}\n  - Dense: "
                                "{units: 2, input_shape: [3]}\n",
                                "model's input on the first layer only");
    tfc_test_expect_model_error("layers:\n  - Dense: {units: 3, input_dim: [4, 2]}\n",
                                "layers[0].Dense.input_dim: expected an integer");
    /* input_length beside input: (or on a later Embedding) is checked against the steps */
    tfc_test_expect_model_error("input: {shape: [8], dtype: int32}\nlayers:\n"
                                "  - Embedding: {input_dim: 9, output_dim: 2, input_length: 6}\n",
                                "input_length 6 is not the input's (8,)");
    tfc_test_expect_model_error("layers:\n  - Embedding: {input_dim: 9, output_dim: 2, "
                                "input_length: [6]}\n",
                                "layers[0].Embedding.input_length: expected an integer");
    tfc_model *m = tfc_test_model("input: {shape: [8], dtype: int32}\nlayers:\n"
                                  "  - Embedding: {input_dim: 9, output_dim: 2, input_length: 8}\n"
                                  "  - Flatten\n");
    CU_ASSERT_PTR_NOT_NULL(m);
    tfc_model_free(m);
    /* Keras's Layer argument dtype: float32 (or null) is tfc's; a 16-bit policy is the
     * solver's precision; another type an error naming it */
    m = tfc_test_model("input: {shape: [4]}\nlayers:\n  - Dense: {units: 3, dtype: float32}\n"
                       "  - Dense: {units: 2, dtype: null}\n");
    CU_ASSERT_PTR_NOT_NULL(m);
    tfc_model_free(m);
    tfc_test_expect_model_error("input: {shape: [4]}\nlayers:\n  - Dense: {units: 3, dtype: "
                                "mixed_bfloat16}\n",
                                "layers[0].Dense.dtype: mixed_bfloat16: tfc's layers compute in "
                                "float32 and the solver picks the 16-bit training: write "
                                "precision: bf16");
    tfc_test_expect_model_error("input: {shape: [4]}\nlayers:\n  - Dense: {units: 3, dtype: "
                                "float64}\n",
                                "layers[0].Dense.dtype: float64: tfc's layers compute in float32");
}

/* A scalar item is the layer's first argument, Keras's first positional one: `- Dense: 64`
 * is `- Dense: {units: 64}`; the other required arguments are still required. Keras 2's
 * InputLayer input_shape and batch_input_shape (which Keras 3 takes) are shape and
 * batch_shape. */
static void test_positional_argument(void)
{
    static const char *const forms[] = {
        "input: {shape: [8, 8, 1]}\nlayers:\n  - Conv2D: {filters: 4, kernel_size: 3}\n"
        "  - MaxPooling2D: {pool_size: 2}\n  - Flatten\n  - Dense: {units: 16}\n"
        "  - Dropout: {rate: 0.5}\n  - Activation: {activation: relu}\n"
        "  - Dense: {units: 3}\n",
        "layers:\n  - InputLayer: {input_shape: [8, 8, 1]}\n"
        "  - Conv2D: {filters: 4, kernel_size: 3}\n  - MaxPooling2D: 2\n  - Flatten\n"
        "  - Dense: 16\n  - Dropout: 0.5\n  - Activation: relu\n  - Dense: 3\n",
        "layers:\n  - InputLayer: {batch_input_shape: [null, 8, 8, 1]}\n"
        "  - Conv2D: {filters: 4, kernel_size: 3}\n  - MaxPool2D: 2\n  - Flatten\n"
        "  - Dense: 16\n  - Dropout: 0.5\n  - Activation: \"relu\"\n  - Dense: 3\n"};
    for (int f = 0; f < 3; f++) {
        tfc_model *m = tfc_test_model(forms[f]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        CU_ASSERT_EQUAL(tfc_model_param_count(m), 4 * 9 + 4 + 36 * 16 + 16 + 16 * 3 + 3);
        CU_ASSERT_EQUAL(tfc_model_nlayers(m), 7);
        CU_ASSERT_EQUAL(tfc_model_input_shape(m)->ndim, 3);
        const tfc_layer *act = tfc_model_layer(m, 5);
        CU_ASSERT_EQUAL(act->act, TFC_ACT_RELU);
        tfc_model_free(m);
    }
    tfc_test_expect_model_error("input: {shape: [8, 8, 1]}\nlayers:\n  - Conv2D: 8\n",
                                "t.yaml:3:13: error: layers[0].Conv2D.kernel_size: missing "
                                "required key 'kernel_size'");
    tfc_test_expect_model_error("input: {shape: [4]}\nlayers:\n  - Dense: two\n",
                                "layers[0].Dense.units: expected an integer");
    tfc_test_expect_model_error("layers:\n  - Input: {input_shape: [4], shape: [4]}\n",
                                "layers[0].Input.input_shape: input_shape is Keras 2's name of "
                                "shape, given too");
    /* a list is the first argument where that takes one: MaxPooling2D((2, 2)),
     * ZeroPadding2D(((1, 1), (2, 2))), Reshape((13, 26, 32)), Permute((2, 1, 3)) */
    static const char *const lists[] = {
        "input: {shape: [28, 28, 1]}\nlayers:\n  - Conv2D: {filters: 2, kernel_size: 3}\n"
        "  - MaxPooling2D: {pool_size: [2, 2]}\n"
        "  - ZeroPadding2D: {padding: [[1, 1], [2, 2]]}\n"
        "  - Cropping2D: {cropping: [[1, 1], [2, 2]]}\n  - UpSampling2D: {size: [2, 1]}\n"
        "  - Reshape: {target_shape: [13, 26, 2]}\n  - Permute: {dims: [2, 1, 3]}\n"
        "  - TimeDistributed: {layer: {MaxPooling1D: {pool_size: [2]}}}\n",
        "input: {shape: [28, 28, 1]}\nlayers:\n  - Conv2D: {filters: 2, kernel_size: 3}\n"
        "  - MaxPooling2D: [2, 2]\n  - ZeroPadding2D: [[1, 1], [2, 2]]\n"
        "  - Cropping2D: [[1, 1], [2, 2]]\n  - UpSampling2D: [2, 1]\n"
        "  - Reshape: [13, 26, 2]\n  - Permute: [2, 1, 3]\n"
        "  - TimeDistributed: {layer: {MaxPooling1D: [2]}}\n"};
    for (int f = 0; f < 2; f++) {
        tfc_model *m = tfc_test_model(lists[f]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        const tfc_shape *s1 = &tfc_model_layer(m, 2)->out_shape,
                        *s4 = &tfc_model_layer(m, 4)->out_shape,
                        *s7 = &tfc_model_layer(m, 7)->out_shape;
        CU_ASSERT(s1->dim[0] == 15 && s1->dim[1] == 17);
        CU_ASSERT(s4->dim[0] == 26 && s4->dim[1] == 13);
        CU_ASSERT(s7->ndim == 3 && s7->dim[0] == 26 && s7->dim[1] == 6 && s7->dim[2] == 2);
        tfc_model_free(m);
    }
    tfc_test_expect_model_error("input: {shape: [4]}\nlayers:\n  - Dense: [64, relu]\n",
                                "t.yaml:3:12: error: layers[0].Dense: expected a mapping of "
                                "arguments, found a sequence (a list stands for the first "
                                "argument alone where that takes a list");
}

/* The shorthand holds inside wrappers too: a wrapped layer's or a cell's scalar is its first
 * argument, down through Bidirectional's RNN's cells; the model equals the one written out. */
static void test_positional_wrapped(void)
{
    static const char *const forms[] = {
        "input: {shape: [5, 3]}\nlayers:\n"
        "  - TimeDistributed: {layer: {Dense: {units: 4}}}\n"
        "  - Bidirectional: {layer: {LSTM: {units: 4}}}\n  - RepeatVector: {n: 3}\n"
        "  - RNN: {cell: [{GRUCell: {units: 5}}, {LSTMCell: {units: 6}}], "
        "return_sequences: true}\n"
        "  - Bidirectional: {layer: {RNN: {cell: {SimpleRNNCell: {units: 2}}, "
        "return_sequences: true}}}\n"
        "  - RNN: {cell: {StackedRNNCells: {cells: [{GRUCell: {units: 5}}]}}}\n"
        "  - SpectralNormalization: {layer: {Dense: {units: 2}}}\n",
        "input: {shape: [5, 3]}\nlayers:\n"
        "  - TimeDistributed: {layer: {Dense: 4}}\n"
        "  - Bidirectional: {layer: {LSTM: 4}}\n  - RepeatVector: 3\n"
        "  - RNN: {cell: [{GRUCell: 5}, {LSTMCell: 6}], return_sequences: true}\n"
        "  - Bidirectional: {layer: {RNN: {cell: {SimpleRNNCell: 2}, "
        "return_sequences: true}}}\n"
        "  - RNN: {cell: {StackedRNNCells: {cells: [{GRUCell: 5}]}}}\n"
        "  - SpectralNormalization: {layer: {Dense: 2}}\n"};
    int64_t params[2];
    for (int f = 0; f < 2; f++) {
        tfc_model *m = tfc_test_model(forms[f]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        params[f] = tfc_model_param_count(m);
        CU_ASSERT_EQUAL(tfc_model_nlayers(m), 7);
        CU_ASSERT_EQUAL(tfc_model_layer(m, 6)->out_shape.dim[0], 2);
        tfc_model_free(m);
    }
    CU_ASSERT_EQUAL(params[0], params[1]);
    CU_ASSERT_EQUAL(params[1], 16 + 2 * 4 * 4 * (4 + 4 + 1) + 3 * 5 * (8 + 5 + 2) +
                                   4 * 6 * (5 + 6 + 1) + 2 * 2 * (6 + 2 + 1) +
                                   3 * 5 * (4 + 5 + 2) + 5 * 2 + 2 + 2 /* and u */);
    tfc_test_expect_model_error("input: {shape: [5, 3]}\nlayers:\n"
                                "  - TimeDistributed: {layer: {Dense: relu}}\n",
                                "t.yaml:3:38: error: layers[0].TimeDistributed.layer.Dense.units: "
                                "expected an integer");
    tfc_test_expect_model_error("input: {shape: [5, 3]}\nlayers:\n"
                                "  - TimeDistributed: {layer: {Dens: 3}}\n",
                                "layer: Dens cannot be wrapped by TimeDistributed");
    tfc_test_expect_model_error("input: {shape: [5, 3]}\nlayers:\n"
                                "  - TimeDistributed: {layer: {Identity: 3}}\n",
                                "layer.Identity: expected a mapping of its arguments, found a "
                                "scalar");
    tfc_test_expect_model_error("input: {shape: [5, 3]}\nlayers:\n"
                                "  - RNN: {cell: {GRUCell: -2}}\n",
                                "units: expected an integer in [1");
}

/* Keras's other names for a class (keras.layers.MaxPool2D is MaxPooling2D) are the same
 * layer: the class's type, Keras's default name from the class (max_pooling2d), the same
 * shapes and parameters as the model written with the class names. */
static void test_keras_aliases(void)
{
    static const char *const forms[] = {
        "input: {shape: [8, 8, 3]}\nlayers:\n  - Convolution2D: {filters: 4, kernel_size: 3}\n"
        "  - MaxPool2D: {pool_size: 2}\n  - AvgPool2D: {pool_size: 1}\n"
        "  - SeparableConvolution2D: {filters: 2, kernel_size: 1}\n"
        "  - Convolution2DTranspose: {filters: 2, kernel_size: 2}\n  - GlobalAvgPool2D\n"
        "  - Dense: {units: 2}\n",
        "input: {shape: [8, 8, 3]}\nlayers:\n  - Conv2D: {filters: 4, kernel_size: 3}\n"
        "  - MaxPooling2D: {pool_size: 2}\n  - AveragePooling2D: {pool_size: 1}\n"
        "  - SeparableConv2D: {filters: 2, kernel_size: 1}\n"
        "  - Conv2DTranspose: {filters: 2, kernel_size: 2}\n  - GlobalAveragePooling2D\n"
        "  - Dense: {units: 2}\n"};
    static const char *const types[] = {"Conv2D", "MaxPooling2D", "AveragePooling2D",
                                        "SeparableConv2D", "Conv2DTranspose",
                                        "GlobalAveragePooling2D", "Dense"};
    static const char *const names[] = {"conv2d", "max_pooling2d", "average_pooling2d",
                                        "separable_conv2d", "conv2d_transpose",
                                        "global_average_pooling2d", "dense"};
    int64_t params[2] = {0, 0};
    for (int f = 0; f < 2; f++) {
        tfc_error err;
        tfc_error_clear(&err);
        tfc_doc *doc = tfc_doc_load_string(forms[f], strlen(forms[f]), "alias.yaml", &err);
        tfc_model *m = doc ? tfc_model_from_node(tfc_doc_root(doc), "alias", &err) : NULL;
        if (!m) fprintf(stderr, "\nform %d: %s\n", f, err.text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        CU_ASSERT_EQUAL_FATAL(tfc_model_nlayers(m), 7);
        for (int i = 0; i < 7; i++) {
            CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, i)->ops->type, types[i]);
            CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, i)->name, names[i]);
        }
        CU_ASSERT_EQUAL(tfc_model_layer(m, 4)->out_shape.dim[0], 4);
        params[f] = tfc_model_param_count(m);
        tfc_model_free(m);
        tfc_doc_free(doc);
    }
    CU_ASSERT_EQUAL(params[0], params[1]);
    CU_ASSERT_EQUAL(params[0], (27 * 4 + 4) + (4 + 4 * 2 + 2) + (2 * 4 * 2 + 2) + (2 * 2 + 2));
    /* Every 1-D and 3-D alias resolves too, to the class Keras gives it. */
    static const char *const pairs[][2] = {
        {"AvgPool1D", "AveragePooling1D"}, {"AvgPool3D", "AveragePooling3D"},
        {"MaxPool1D", "MaxPooling1D"}, {"MaxPool3D", "MaxPooling3D"},
        {"GlobalAvgPool1D", "GlobalAveragePooling1D"}, {"GlobalAvgPool3D", "GlobalAveragePooling3D"},
        {"GlobalMaxPool1D", "GlobalMaxPooling1D"}, {"GlobalMaxPool2D", "GlobalMaxPooling2D"},
        {"GlobalMaxPool3D", "GlobalMaxPooling3D"}, {"Convolution1D", "Conv1D"},
        {"Convolution3D", "Conv3D"}, {"Convolution1DTranspose", "Conv1DTranspose"},
        {"SeparableConvolution1D", "SeparableConv1D"},
        {"Convolution3DTranspose", "Conv3DTranspose"}};
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        const tfc_layer_ops *ops = tfc_layer_lookup(pairs[i][0]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ops);
        CU_ASSERT_STRING_EQUAL(ops->type, pairs[i][1]);
    }
    CU_ASSERT_PTR_NULL(tfc_layer_lookup("MaxPool4D"));
}

typedef struct bad_case {
    const char *yaml;
    int line, col;
    const char *key;     /* expected key path, "" for none */
    const char *message; /* a substring of the message */
} bad_case;

#define HDR "input: {shape: [28, 28, 1]}\nlayers:\n"
#define SEQ "input: {shape: [20], dtype: int32}\nlayers:\n"

static const bad_case bad_cases[] = {
    {"", 1, 1, "", "empty file"},
    {"- a\n- b\n", 1, 1, "", "a model file is a mapping"},
    {"input: {shape: [28]}\nlayers: []\n", 2, 9, "layers", "non-empty list of layers"},
    {"input: {shape: [4]}\n", 1, 1, "layers", "missing required key 'layers'"},
    {"inputs: {shape: [4]}\nlayers: [{Dense: {units: 2}}]\n", 1, 1, "inputs",
     "unknown key 'inputs'; did you mean 'input'?"},
    {HDR "  - Conv2d: {filters: 3, kernel_size: 3}\n", 3, 5, "layers[0]",
     "unknown layer type 'Conv2d'; did you mean 'Conv2D'?"},
    {HDR "  - Conv2D: {filtres: 3, kernel_size: 3}\n", 3, 14, "layers[0].Conv2D.filtres",
     "unknown key 'filtres'; did you mean 'filters'?"},
    {HDR "  - Conv2D: {filters: 3, kernel_size: 3x3}\n", 3, 39, "layers[0].Conv2D.kernel_size",
     "expected a positive integer or a pair, found \"3x3\""},
    {HDR "  - Flatten: {}\n  - Dense: {units: -1}\n", 4, 20, "layers[1].Dense.units",
     "expected an integer in [1, 16777216], found \"-1\""},
    {HDR "  - Flatten: {}\n  - Dense: {units: 3, activation: rleu}\n", 4, 35,
     "layers[1].Dense.activation", "unknown value \"rleu\"; did you mean \"relu\"?"},
    {HDR "  - Conv2D: {filters: 3, kernel_size: 3, padding: full}\n", 3, 51,
     "layers[0].Conv2D.padding", "unknown value \"full\" (one of: valid, same)"},
    {HDR "  - Flatten: {}\n  - Dense: {units: 3, use_bias: maybe}\n", 4, 33,
     "layers[1].Dense.use_bias", "expected true or false, found \"maybe\""},
    {HDR "  - Dropout: {rate: 1.5}\n", 3, 21, "layers[0].Dropout.rate",
     "expected a number in [0, 0.999999], found \"1.5\""},
    /* Keras 3.15 requires AveragePooling's pool_size (MaxPooling's defaults to 2) */
    {HDR "  - AveragePooling2D: {padding: same}\n", 3, 23, "layers[0].AveragePooling2D.pool_size",
     "missing required key 'pool_size'"},
    /* an alias's errors say the type as written */
    {HDR "  - AvgPool2D: {padding: same}\n", 3, 16, "layers[0].AvgPool2D.pool_size",
     "missing required key 'pool_size'"},
    {SEQ "  - Embedding: {input_dim: 9, output_dim: 4}\n  - AveragePooling1D: {strides: 1}\n", 4,
     23, "layers[1].AveragePooling1D.pool_size", "missing required key 'pool_size'"},
    {"input: \x01\x02\n", 1, 8, "", "invalid YAML: control characters are not allowed"},
    {"input: {shape: [28\n", 2, 1, "", "invalid YAML"},
    {"input: {shape: [4]}\ninput: {shape: [5]}\n", 2, 1, "", "duplicate key 'input' (first at line 1)"},
    {"a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
     "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
     "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
     "g: [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]\n", 6, 8, "", "alias bomb"},
    {"input: *nothing\n", 1, 8, "", "alias *nothing refers to no complete anchor"},
    {"a: &x [1, *x]\n", 1, 11, "", "refers to no complete anchor (undefined, or a cycle)"},
    {"input: {shape: [28]}\nlayers:\n  - Conv2D: {filters: 3, kernel_size: 3}\n", 3, 5,
     "layers[0].Conv2D", "layer 'conv2d': needs an input of shape (height, width, channels), got (28,)"},
    {HDR "  - Dense: {units: 1}\nloss: sparse_categorical_crossentropy\n", 4, 7, "loss",
     "needs at least 2 output classes; the last layer 'dense' gives (28, 28, 1)"},
    {HDR "  - Conv2D: {name: a, filters: 3, kernel_size: 3}\n"
         "  - Conv2D: {name: b, filters: 4, kernel_size: 3, inputs: input}\n"
         "  - Add: {inputs: [a, b]}\n", 5, 5, "layers[2].Add",
     "layer 'add': inputs must have equal shapes: input 0 is (26, 26, 3), input 1 is (26, 26, 4)"},
    {HDR "  - Flatten: {}\n  - Dense: {units: 3, inputs: [flaten]}\n", 4, 32,
     "layers[1].Dense.inputs", "no earlier layer is named 'flaten'; did you mean 'flatten'?"},
    {HDR "  - Flatten: {inputs: [out]}\n  - Dense: {name: out, units: 3}\n", 3, 24,
     "layers[0].Flatten.inputs", "a layer may only take inputs from layers above it"},
    {HDR "  - Flatten: {name: x}\n  - Dense: {name: x, units: 3}\n", 4, 19,
     "layers[1].Dense.name", "the name 'x' is already used"},
    {"input: {shape: [5]}\nlayers:\n  - Embedding: {input_dim: 9, output_dim: 2}\n", 3, 5,
     "layers[0].Embedding", "reads token ids"},
    {HDR "  - Flatten: {}\noptimizer: adam\n", 4, 12, "optimizer",
     "the optimizer is a key of the solver file, beside max_iter"},
    {HDR "  - [Dense]\n", 3, 5, "layers[0]", "expected a mapping with one key, the layer type"},
    {HDR "  - Dense\n", 3, 5, "layers[0].Dense.units", "missing required key 'units'"},
    {"layers: [{Dense: {units: 2}}]\n", 1, 1, "input",
     "missing: the model's input, `input: {shape: [28, 28, 1]}`, or a first layer "
     "`- InputLayer: {shape: [28, 28, 1]}`"},
    {HDR "  - InputLayer: {shape: [4]}\n  - Dense: {units: 2}\n", 3, 5, "layers[0].InputLayer",
     "gives the input that `input:` (line 1) gives already; keep one"},
    {HDR "  - Flatten: {}\n  - Input: {shape: [4]}\n", 4, 5, "layers[1]",
     "Input gives the model's input: only as the first layer"},
    {"layers:\n  - InputLayer: {batch_shape: [32, 4]}\n  - Dense: {units: 2}\n", 2, 32,
     "layers[0].InputLayer.batch_shape", "the batch axis must be null"},
    {"layers:\n  - InputLayer: {shape: [4], batch_size: 8}\n  - Dense: {units: 2}\n", 2, 42,
     "layers[0].InputLayer.batch_size", "the solver's batch_size sets the batch"},
    {"layers:\n  - InputLayer: {shape: [4], sparse: true}\n  - Dense: {units: 2}\n", 2, 38,
     "layers[0].InputLayer.sparse", "only false (Keras's default) is accepted"},
    {"layers:\n  - InputLayer: {name: x}\n  - Dense: {units: 2}\n", 2, 5,
     "layers[0].InputLayer", "needs the example's shape"},
    {"layers:\n  - Input: {shape: [4], batch_shape: [null, 4]}\n  - Dense: {units: 2}\n", 2,
     38, "layers[0].Input", "takes shape or batch_shape, not both"},
    {"layers:\n  - InputLayer: {shape: [4], dtype: float64}\n  - Dense: {units: 2}\n", 2, 37,
     "layers[0].InputLayer.dtype", "unknown value \"float64\""},
    {"layers:\n  - InputLayer: {shape: [4], name: x}\n  - Dense: {name: x, units: 2}\n", 3, 19,
     "layers[0].Dense.name", "the name 'x' is already used"},
    {"layers:\n  - InputLayer: {shape: [4]}\n  - Dense: {units: 2, inputs: input_layr}\n", 3,
     31, "layers[0].Dense.inputs", "no earlier layer is named 'input_layr'; did you mean "
     "'input_layer'?"},
    {HDR "  - Dense: [10]\n", 3, 12, "layers[0].Dense", "expected a mapping of arguments, found a sequence"},
    {"input: {shape: [28, 0]}\nlayers: [{Flatten: {}}]\n", 1, 21, "input.shape[1]",
     "expected an integer in [1, 1073741824], found \"0\""},
    {"input: {shape: [4], dtype: float64}\nlayers: [{Dense: {units: 2}}]\n", 1, 28,
     "input.dtype", "unknown value \"float64\""},
    {"input: {shape: [4]}\nlayers: [{Dense: {units: 2}}]\nloss: crossentropy\n", 3, 7, "loss",
     "unknown value \"crossentropy\""},
    {"input: {shape: [4]}\nlayers: [{Dense: {units: 2}}]\nmetrics: [acuracy]\n", 3, 11,
     "metrics[0]", "unknown value \"acuracy\"; did you mean \"accuracy\"?"},
    {"input: {shape: [4]}\nlayers: [{Dense: {units: 2}}]\nmetrics: [{top_k_accuracy: {k: 5}}]\n",
     3, 11, "metrics[0]", "top_k_accuracy with k = 5 exceeds the 2 output classes"},
    {HDR "  - Reshape: {target_shape: [5, -1]}\n", 3, 5, "layers[0].Reshape",
     "cannot reshape (28, 28, 1) (784 elements) to (5, -1)"},
    {HDR "  - MaxPooling2D: {pool_size: 30}\n", 3, 5, "layers[0].MaxPooling2D",
     "input (28, 28, 1) is smaller than the 30x30 window"},
    {SEQ "  - Embedding: {input_dim: 50, output_dim: 8}\n  - LSTM: {units: 4, activation: relux}\n",
     4, 34, "layers[1].LSTM.activation", "unknown value \"relux\"; did you mean \"relu\"?"},
    {HDR "  - Concatenate: {inputs: [input, input], axis: 4}\n", 3, 5, "layers[0].Concatenate",
     "axis 4 is outside the inputs' axes: the batch axis 0 and an example's 1 to 3"},
    {HDR "  - Concatenate: {inputs: [input, input], axis: 0}\n", 3, 5, "layers[0].Concatenate",
     "axis 0 is the batch axis, which cannot be joined"},
    {HDR "  - Conv2D: {filters: 2, kernel_size: 29}\n", 3, 5, "layers[0].Conv2D",
     "input (28, 28, 1) is smaller than the 29x29 kernel"},
    {HDR "  - Conv2D: {filters: 2, kernel_size: 3, kernel_initializer: glorot_uniformm}\n", 3,
     62, "layers[0].Conv2D.kernel_initializer",
     "unknown value \"glorot_uniformm\"; did you mean \"glorot_uniform\"?"},
    {"a: 1\n---\nb: 2\n", 2, 1, "", "more than one YAML document"},
    {"input: {shape: [4]}\nlayers: [{Dense: {units: 2}}]\nmetrics: accuracy\n", 3, 10,
     "metrics", "expected a list of metric names"},
    {HDR "  - Conv2D: {filters: 2, kernel_size: 3, strides: 2, dilation_rate: 2}\n", 3, 5,
     "layers[0].Conv2D", "strides > 1 with dilation_rate > 1 is not supported"},
    {HDR "  - Dense: {units: \"10\"}\n", 3, 20, "layers[0].Dense.units",
     "found the string \"10\""},
    {HDR "  - Flatten: {}\n  - Dense: {units: 3, name: a/b}\n", 4, 29, "layers[1].Dense.name",
     "without '/'"},
    {HDR "  - Add: {}\n", 3, 5, "layers[0].Add", "takes 2 to 8 inputs, given 1"},
    {"input: {shape: [4]}\nlayers: [{Dense: {units: 2, kernel_initializer: {type: random_uniform, "
     "minval: 1, maxval: 0}}}]\n", 2, 49, "layers[0].Dense.kernel_initializer",
     "minval 1 exceeds maxval 0"},
    /* Python's spellings, copied from Keras code: what YAML writes instead */
    {HDR "  - Flatten\n  - Dense: {units: 3, kernel_initializer: HeNormal()}\n", 4, 43,
     "layers[1].Dense.kernel_initializer",
     "\"HeNormal()\" is Python; write he_normal (tfc's name, without the call)"},
    {HDR "  - Flatten\n  - Dense: {units: 3, kernel_regularizer: keras.regularizers.L2(0.01)}\n",
     4, 43, "layers[1].Dense.kernel_regularizer",
     "is a Python call: write l2, and the arguments by name in a mapping where this key takes "
     "one, {type: l2, ...}"},
    {HDR "  - Flatten\n  - Dense: {units: 3, activation: tf.nn.relu}\n", 4, 35,
     "layers[1].Dense.activation", "\"tf.nn.relu\" is Python; write relu (tfc's name, without "
     "a module)"},
    {HDR "  - Flatten\n  - Dense: {units: 3, activation: LeakyReLU(0.2)}\n", 4, 35,
     "layers[1].Dense.activation", "an activation here is its name alone (leaky_relu, at "
     "Keras's defaults); one with arguments is a layer of its own after this one, "
     "- LeakyReLU: {...}"},
    {"input: {shape: [4]}\nlayers: [{Dense: {units: 2}}]\nloss: "
     "SparseCategoricalCrossentropy(from_logits=True)\n", 3, 7, "loss",
     "is a Python call: write sparse_categorical_crossentropy, and the arguments by name"},
    {"input: {shape: [4]}\nlayers: [{Dense: {units: 2}}]\nmetrics: "
     "[\"keras.metrics.SparseCategoricalAccuracy()\"]\n", 3, 11, "metrics[0]",
     "is Python: write SparseCategoricalAccuracy"},
    {"input: {shape: [4]}\nlayers: [{Dense: {units: 2}}]\nmetrics: [\"Precision(top_k=2)\"]\n",
     3, 11, "metrics[0]", "is a Python call: write {Precision: {...}}, the arguments by name"},
    {HDR "  - Dense(64, activation=\"relu\")\n", 3, 5, "layers[0]",
     "'Dense(64, activation=\"relu\")' is a Python call: write - Dense: {...}, the arguments by "
     "name (the first may stand alone: - Dense: 64)"},
    {HDR "  - layers.MaxPooling2D((2, 2))\n", 3, 5, "layers[0]",
     "(the first may stand alone: - MaxPooling2D: [2, 2])"},
    {HDR "  - Dropout(rate=0.5)\n", 3, 5, "layers[0]",
     "'Dropout(rate=0.5)' is a Python call: write - Dropout: {...}, the arguments by name"},
    {HDR "  - keras.layers.Flatten: 3\n", 3, 5, "layers[0]",
     "'keras.layers.Flatten' is Python: write Flatten (the layer's name, without a module)"},
    {HDR "  - Flaten: 3\n", 3, 5, "layers[0]",
     "unknown layer type 'Flaten'; did you mean 'Flatten'?"},
    /* the tuple's commas split it: "(28", then keys 28 and "1)"; the first and last noted */
    {"input: {shape: (28, 28, 1)}\nlayers: [Flatten]\n", 1, 16, "input.shape[0]",
     "unknown key '28' (a Python tuple? YAML writes a list in brackets, [28, 28, 1])"},
    {"input: {shape: [4]}\nlayers:\n  - Dense: {units: 3, bias_initializer: None}\n", 3, 41,
     "layers[0].Dense.bias_initializer", "unknown value \"None\" (Python's None: YAML writes "
     "null, or ~)"},
    {"input: {shape: [None, 4], max_length: 5}\nlayers: [Flatten]\n", 1, 17, "input.shape[0]",
     "found \"None\" (Python's None: YAML writes null, or ~)"},
    {HDR "  - Flatten\n  - Dense: {units: 3, activation: Foo(1)}\n", 4, 35,
     "layers[1].Dense.activation", "unknown value \"Foo(1)\" (one of:"},
};

static void test_bad_models(void)
{
    int n = (int)(sizeof bad_cases / sizeof *bad_cases);
    CU_ASSERT(n >= 30);
    for (int i = 0; i < n; i++) {
        const bad_case *c = &bad_cases[i];
        tfc_error err;
        tfc_model *m = load(c->yaml, &err);
        char expect_prefix[128];
        if (c->line)
            snprintf(expect_prefix, sizeof expect_prefix, "bad.yaml:%d:%d: error: %s%s", c->line,
                     c->col, c->key, *c->key ? ": " : "");
        else
            snprintf(expect_prefix, sizeof expect_prefix, "bad.yaml: error: %s%s", c->key,
                     *c->key ? ": " : "");
        int ok = !m && err.code == TFC_ERR_CONFIG && tfc_exit_code(err.code) == 2 &&
                 strncmp(err.text, expect_prefix, strlen(expect_prefix)) == 0 &&
                 strstr(err.msg, c->message) != NULL;
        if (!ok)
            fprintf(stderr, "\ncase %d: expected '%s...%s'\n  got (code %d, message '%s'): %s\n",
                    i, expect_prefix, c->message, err.code, err.msg, err.text);
        CU_ASSERT(ok);
    }
}

/* A layer given an input of the wrong rank: the hint names the reshape a Keras user most
 * likely meant, as input.shape for a layer reading the model input, else as a Reshape. */
static void test_rank_hints(void)
{
    static const struct {
        const char *yaml, *hint;
    } cases[] = {
        {"input: {shape: [28, 28]}\nlayers:\n  - Conv2D: {filters: 3, kernel_size: 3}\n",
         "hint: as one channel, (28, 28, 1): give the model input: {shape: [28, 28, 1]}, or "
         "put - Reshape: {target_shape: [28, 28, 1]} before this layer\n"},
        {"input: {shape: [784]}\nlayers:\n  - Dense: {units: 8}\n"
         "  - MaxPooling2D: {pool_size: 2}\n",
         "got (8,)\n"},
        {"input: {shape: [784]}\nlayers:\n  - Conv2D: {filters: 3, kernel_size: 3}\n",
         "hint: as a flattened square image of one channel, (28, 28, 1)"},
        {"input: {shape: [3072]}\nlayers:\n  - Conv2D: {filters: 3, kernel_size: 3}\n",
         "hint: as a flattened square image of three channels, (32, 32, 3)"},
        {"input: {shape: [40]}\nlayers:\n  - LSTM: {units: 4}\n",
         "hint: as steps of one feature, (40, 1): give the model input: {shape: [40, 1]}, or put "
         "- Reshape: {target_shape: [40, 1]} before this layer (token ids go through an "
         "Embedding first"},
        {HDR "  - Conv2D: {filters: 3, kernel_size: 3}\n  - GRU: {units: 4}\n",
         "hint: as each row a step, (26, 78): put - Reshape: {target_shape: [26, 78]} before "
         "this layer\n"},
        {"input: {shape: [40]}\nlayers:\n  - Conv1D: {filters: 3, kernel_size: 3}\n",
         "hint: as steps of one feature, (40, 1)"},
        {"input: {shape: [50]}\nlayers:\n  - Conv2D: {filters: 3, kernel_size: 3}\n",
         "got (50,)\n"},
        /* not square: a sequence is as likely, and the 1-D twin takes it */
        {"input: {shape: [30, 3]}\nlayers:\n  - Conv2D: {filters: 3, kernel_size: 3}\n",
         "hint: as one channel, (30, 3, 1): give the model input: {shape: [30, 3, 1]}, or put - "
         "Reshape: {target_shape: [30, 3, "
         "1]} before this layer; or, if each of the 30 rows is a step of 3 features, Conv1D "
         "takes the sequence as it is\n"},
        {"input: {shape: [30, 3]}\nlayers:\n  - Dense: {units: 8}\n  - MaxPooling2D: {}\n",
         "hint: as one channel, (30, 8, 1): put - Reshape: {target_shape: [30, 8, 1]} before "
         "this layer; or, if each of the 30 "
         "rows is a step of 8 features, MaxPooling1D takes the sequence as it is\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tfc_error err;
        tfc_model *m = load(cases[i].yaml, &err);
        const int ok = !m && strstr(err.text, cases[i].hint) &&
                       (strstr(cases[i].hint, "hint:") || !strstr(err.text, "hint:"));
        if (!ok) fprintf(stderr, "\ncase %zu: expected '%s' in:\n%s\n", i, cases[i].hint, err.text);
        CU_ASSERT(ok);
        tfc_model_free(m);
    }
}

/* libyaml's problems come with a hint in a config's terms. */
static void test_yaml_hints(void)
{
    static const struct {
        const char *yaml, *hint;
    } cases[] = {
        {HDR "  - Dense: {units: 10 activation: relu}\n",
         "hint: the entries of a {...} mapping are separated by commas"},
        {"input: {shape: [28, 28, 1}\n", "hint: the items of a [...] list are separated by"},
        {"input: {shape: [5]}\nloss: sparse: x\n", "hint: a ':' where no key may start"},
        {"input: {shape: [5]}\n loss: mse\n", "hint: this line lines up with no key"},
        {"name: t\n input: {shape: [5]}\n", "hint: a ':' where no key may start"},
        {HDR "  - Flatten\n  Dense: {units: 3}\n", "hint: a line of a list begins with '- '"},
        {HDR "- Flatten: {}\n  - Dense: {units: 3}\n", "hint: this line lines up with no key"},
        {HDR "\t- Flatten: {}\n", "hint: YAML indents with spaces: a tab is not allowed here"},
        {HDR "  - Dense: {units: 3, activation: \"relu}\n",
         "hint: the quote at line 3, column 35 is never closed"},
        {"input: {shape: [5]}\nlayers\n  - Flatten: {}\n", "hint: a key is followed by ': '"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tfc_error err;
        tfc_model *m = load(cases[i].yaml, &err);
        const int ok = !m && strstr(err.text, "invalid YAML") && strstr(err.text, cases[i].hint);
        if (!ok) fprintf(stderr, "\ncase %zu: expected '%s' in:\n%s\n", i, cases[i].hint, err.text);
        CU_ASSERT(ok);
    }
}

static void test_errors_collected(void)
{
    tfc_error err;
    load(HDR "  - Conv2D: {filtres: 3, kernel_size: 3}\n  - Dense: {unit: 3}\n", &err);
    /* Both typos, each once: the missing key they stand for is not reported again. */
    CU_ASSERT_EQUAL(err.count, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "did you mean 'units'"));
    /* The caret line follows the message. */
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "\n    - Conv2D: {filtres: 3, kernel_size: 3}\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "\n               ^\n"));
    /* Layers after a broken input still get checked, against a shape of no axes: found by
     * fuzz_model (BatchNormalization read the axis before the first). */
    tfc_model *m = load("input: {sh: [3]}\nlayers:\n  - BatchNormalization: {}\n"
                        "  - Dense: {units: 2}\n", &err);
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_EQUAL(err.code, TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "bad.yaml:3:5: error: layers[0].BatchNormalization: "
                                            "layer 'batch_normalization': needs an input with a "
                                            "channel axis"));
}

/* The new user's five mistakes (issue 19 item 7) come out in one report, top to bottom: a bad
 * loss or metric no longer hides the layers' errors, nor an unknown layer type the other
 * layers' arguments. */
static void test_all_mistakes_at_once(void)
{
    tfc_error err;
    tfc_model *m = load("input: {shape: [28, 28, 1]}\n"
                        "layers:\n"
                        "  - Conv2d: {filters: 8, kernel_size: 3}\n"
                        "  - Dense: {unit: 10, activation: rellu}\n"
                        "loss: sparse_categorical_crossentropyy\n"
                        "metrics: [acuracy]\n",
                        &err);
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_EQUAL(err.count, 5);
    static const char *const order[] = {"bad.yaml:3:5: error: layers[0]: unknown layer type 'Conv2d'",
                                        "bad.yaml:4:13: error: layers[1].Dense.unit",
                                        "bad.yaml:4:35: error: layers[1].Dense.activation",
                                        "bad.yaml:5:7: error: loss: unknown value",
                                        "bad.yaml:6:11: error: metrics[0]: unknown value"};
    const char *at = err.text;
    for (int i = 0; i < 5; i++) {
        const char *found = strstr(at, order[i]);
        CU_ASSERT_PTR_NOT_NULL(found);
        if (!found) {
            printf("\nmissing or out of order: %s\n%s", order[i], err.text);
            break;
        }
        at = found + 1;
    }
}

/* Top-level `x-` and `.` keys hold anchors and are not checked; nested ones are. */
static void test_anchor_keys(void)
{
    tfc_error err;
    tfc_model *m = load("x-conv: &conv {kernel_size: 3, activation: relu, padding: same}\n"
                        ".dense: &d {activation: relu}\n"
                        "input: {shape: [8, 8, 1]}\nlayers:\n"
                        "  - Conv2D: {<<: *conv, filters: 4}\n  - Flatten: {}\n"
                        "  - Dense: {<<: *d, units: 3}\n",
                        &err);
    CU_ASSERT_PTR_NOT_NULL(m); /* load() frees it: only whether it loaded */
    m = load("input: {shape: [4]}\nlayers:\n  - Dense: {units: 3, x-note: 1}\n", &err);
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "layers[0].Dense.x-note: unknown key"));
}

/* tfc_error_sort: files in the order they first appear, then line and column; reports
 * without a position last, hints staying with their report. */
static void test_error_sort(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_error_at(&err, TFC_ERR_CONFIG, "s.yaml", 20, 1, NULL, "optimiser", "unknown key");
    tfc_error_hint(&err, "did you mean optimizer");
    tfc_error_set(&err, TFC_ERR_CONFIG, "no position");
    tfc_error_at(&err, TFC_ERR_CONFIG, "m.yaml", 3, 5, NULL, NULL, "model");
    tfc_error_at(&err, TFC_ERR_CONFIG, "s.yaml", 10, 9, NULL, NULL, "stage");
    tfc_error_at(&err, TFC_ERR_CONFIG, "m.yaml", 1, 2, NULL, NULL, "first");
    tfc_error_sort(&err);
    CU_ASSERT_STRING_EQUAL(err.text, "s.yaml:10:9: error: stage\n"
                                     "s.yaml:20:1: error: optimiser: unknown key\n"
                                     "  hint: did you mean optimizer\n"
                                     "m.yaml:1:2: error: first\n"
                                     "m.yaml:3:5: error: model\n"
                                     "error: no position\n");
    CU_ASSERT_STRING_EQUAL(err.file, "s.yaml"); /* the first reported stays described */
    CU_ASSERT_EQUAL(err.line, 20);
}

static void test_deep_nesting(void)
{
    char buf[400];
    int n = 0;
    for (int i = 0; i < 100; i++) buf[n++] = '[';
    for (int i = 0; i < 100; i++) buf[n++] = ']';
    buf[n] = 0;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_PTR_NULL(tfc_doc_load_string(buf, (size_t)n, "deep.yaml", &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "nesting deeper than 64 levels"));
}

/* YAML merge keys: explicit keys win over merged ones, earlier merged mappings over later
 * ones, a quoted "<<" is an ordinary key, and a model can share layer arguments. */
static void test_merge_keys(void)
{
    const char *text = "a: &a {x: 1, y: 2}\n"
                       "b: &b {y: 3, z: 4}\n"
                       "c: {<<: [*a, *b], x: 5, w: 6}\n"
                       "d: {\"<<\": 7}\n";
    tfc_error err;
    tfc_error_clear(&err);
    tfc_doc *doc = tfc_doc_load_string(text, strlen(text), "merge.yaml", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    const tfc_node *c = tfc_node_get(tfc_doc_root(doc), "c");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL(c->n, 4);
    const char *want[][2] = {{"x", "5"}, {"w", "6"}, {"y", "2"}, {"z", "4"}};
    for (int i = 0; i < 4; i++) {
        const tfc_node *v = tfc_node_get(c, want[i][0]);
        CU_ASSERT(v && v->kind == TFC_NODE_SCALAR && strcmp(v->str, want[i][1]) == 0);
    }
    CU_ASSERT_PTR_NULL(tfc_node_get(c, "<<"));
    const tfc_node *d = tfc_node_get(tfc_doc_root(doc), "d");
    CU_ASSERT(d && tfc_node_get(d, "<<") != NULL);
    tfc_doc_free(doc);
    /* a model whose second convolution takes the first one's arguments */
    const char *model = "input: {shape: [8, 8, 1]}\nlayers:\n"
                        "  - Conv2D: &c {filters: 4, kernel_size: 3, padding: same, activation: relu}\n"
                        "  - Conv2D: {<<: *c, filters: 6}\n"
                        "loss: mse\n";
    tfc_model *m = tfc_model_from_string(model, strlen(model), "merge_model.yaml", &err);
    if (!m) printf("\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    const tfc_shape *out = tfc_model_output_shape(m);
    CU_ASSERT(out->ndim == 3 && out->dim[0] == 8 && out->dim[1] == 8 && out->dim[2] == 6);
    tfc_model_free(m);
    /* a merge of something that is not a mapping */
    tfc_error_clear(&err);
    const char *bad = "a: [1]\nb: {<<: 3}\n";
    doc = tfc_doc_load_string(bad, strlen(bad), "bad_merge.yaml", &err);
    CU_ASSERT_PTR_NULL(doc);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "bad_merge.yaml:2:9: error: the merge key '<<' takes "
                                            "a mapping or a list of mappings"));
    if (!strstr(err.text, "bad_merge.yaml:2:9")) printf("\n%s", err.text);
}

static void test_emit_round_trip(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_doc *doc = tfc_doc_load_string(MNIST_CNN, strlen(MNIST_CNN), "cnn.yaml", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    tfc_node_emit(f, tfc_doc_root(doc));
    fclose(f);
    tfc_doc *again = tfc_doc_load_string(text, len, "emitted.yaml", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(again);
    char *text2 = NULL;
    size_t len2 = 0;
    f = open_memstream(&text2, &len2);
    tfc_node_emit(f, tfc_doc_root(again));
    fclose(f);
    CU_ASSERT_STRING_EQUAL(text, text2);
    tfc_model *m = tfc_model_from_node(tfc_doc_root(again), "x", &err);
    CU_ASSERT_PTR_NOT_NULL(m);
    CU_ASSERT_EQUAL(m ? tfc_model_param_count(m) : 0, 1199882);
    tfc_model_free(m);
    /* Strings that look like numbers keep their quotes. */
    const char *q = "a: \"10\"\nb: 'x: y'\nc: [1, 2]\n";
    tfc_doc *qd = tfc_doc_load_string(q, strlen(q), "q.yaml", &err);
    char *t3 = NULL;
    size_t l3 = 0;
    f = open_memstream(&t3, &l3);
    tfc_node_emit(f, tfc_doc_root(qd));
    fclose(f);
    CU_ASSERT_STRING_EQUAL(t3, "a: \"10\"\nb: \"x: y\"\nc: [1, 2]\n");
    free(text);
    free(text2);
    free(t3);
    tfc_doc_free(qd);
    tfc_doc_free(doc);
    tfc_doc_free(again);
}

static void test_did_you_mean(void)
{
    static const char *const names[] = {"filters", "kernel_size", "strides", NULL};
    CU_ASSERT_STRING_EQUAL(tfc_did_you_mean("filtres", names), "filters");
    CU_ASSERT_STRING_EQUAL(tfc_did_you_mean("kernelsize", names), "kernel_size");
    CU_ASSERT_PTR_NULL(tfc_did_you_mean("banana", names));
}

static void test_load_file_errors(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_PTR_NULL(tfc_model_load("/nonexistent/model.yaml", &err));
    CU_ASSERT_EQUAL(err.code, TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "/nonexistent/model.yaml: error: cannot open"));
    const char *path = tfc_test_write("stem_name.yaml", "input: {shape: [3]}\nlayers: [{Dense: {units: 2}}]\n", -1);
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_load(path, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_STRING_EQUAL(tfc_model_name(m), "stem_name");
    tfc_model_free(m);
    /* Binary input: a NUL byte. */
    path = tfc_test_write("binary.yaml", "input:\0\1\2", 9);
    tfc_error_clear(&err);
    CU_ASSERT_PTR_NULL(tfc_model_load(path, &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "binary.yaml: error: not a text file (NUL byte at offset 6)"));
}

TFC_TEST_MAIN("model_config", {"positional_argument", test_positional_argument},
              {"positional_wrapped", test_positional_wrapped},
              {"valid_cnn", test_valid_cnn},
              {"same_padding_shapes", test_same_padding_shapes}, {"bad_models", test_bad_models},
              {"rank_hints", test_rank_hints},
              {"yaml_hints", test_yaml_hints},
              {"errors_collected", test_errors_collected},
              {"all_mistakes_at_once", test_all_mistakes_at_once}, {"error_sort", test_error_sort},
              {"anchor_keys", test_anchor_keys}, {"deep_nesting", test_deep_nesting},
              {"emit_round_trip", test_emit_round_trip}, {"did_you_mean", test_did_you_mean},
              {"load_file_errors", test_load_file_errors}, {"merge_keys", test_merge_keys},
              {"sequential_input", test_sequential_input},
              {"keras_aliases", test_keras_aliases}, {"input_shape_arg", test_input_shape_arg})
