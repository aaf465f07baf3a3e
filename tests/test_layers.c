/* Every layer: gradients against central differences (inputs and parameters, through
 * small models that also cover each loss, masking, BatchNormalization in training mode,
 * strided/same-padded convolutions and Add/Concatenate graphs), and forward values against
 * independent loops written here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "graph/model.h"
#include "graph/model_internal.h"
#include "gradcheck.h"
#include "testutil.h"

typedef struct gc_case {
    const char *name;
    const char *yaml;
    int batch;
} gc_case;

#define IMG "input: {shape: [5, 6, 2]}\nlayers:\n"
#define SEQ "input: {shape: [6], dtype: int32}\nlayers:\n"
#define SEQ1 "input: {shape: [9, 4]}\nlayers:\n"

static const gc_case cases[] = {
    {"dense_relu", "input: {shape: [7]}\nlayers:\n  - Dense: {units: 5, activation: relu}\n"
                   "  - Dense: {units: 3}\n", 4},
    {"dense_sequence", "input: {shape: [4, 3]}\nlayers:\n  - Dense: {units: 5, activation: tanh}\n"
                       "  - Dense: {units: 3, use_bias: false}\n", 3},
    {"activations", "input: {shape: [6]}\nlayers:\n  - Dense: {units: 6, activation: sigmoid}\n"
                    "  - Dense: {units: 6, activation: elu}\n  - Dense: {units: 6, activation: selu}\n"
                    "  - Dense: {units: 6, activation: gelu}\n  - Dense: {units: 6, activation: softplus}\n"
                    "  - Dense: {units: 6, activation: softsign}\n  - Dense: {units: 6, activation: swish}\n"
                    "  - Dense: {units: 6, activation: leaky_relu}\n"
                    "  - Dense: {units: 6, activation: hard_sigmoid}\n"
                    "  - Dense: {units: 6, activation: exponential}\n"
                    "  - Activation: {activation: tanh}\n  - Dense: {units: 3}\n", 3},
    {"softmax_fused", "input: {shape: [5]}\nlayers:\n  - Dense: {units: 4, activation: softmax}\n", 4},
    {"activation_softmax_last", "input: {shape: [5]}\nlayers:\n  - Dense: {units: 4}\n"
                                "  - Activation: {activation: softmax}\n", 4},
    /* gradient blocks shared by two readers: d1's by an Activation, a BatchNormalization
     * and, later, a Dense (whose backward runs first); c1's by a convolution and, later, an
     * Add. None of the first may overwrite what the later reader left there. */
    {"shared_gradients", "input: {shape: [5]}\nlayers:\n  - Dense: {name: d1, units: 6}\n"
                         "  - Activation: {name: t, activation: tanh, inputs: d1}\n"
                         "  - BatchNormalization: {name: b, inputs: d1}\n"
                         "  - Dense: {name: d2, units: 6, inputs: d1}\n"
                         "  - Add: {inputs: [t, b, d2]}\n  - Dense: {units: 3}\n", 6},
    /* d1's block shared by a Dense and two Dropouts: q (the last reader, whose backward
     * runs first) writes it, p and d2 must add to what q left */
    {"shared_dense_dropout", "input: {shape: [6]}\nlayers:\n"
                             "  - Dense: {name: d1, units: 6, activation: tanh}\n"
                             "  - Dense: {name: d2, units: 5, inputs: d1}\n"
                             "  - Dropout: {name: p, rate: 0.3, inputs: d1}\n"
                             "  - Dense: {name: d3, units: 5, inputs: p}\n"
                             "  - Dropout: {name: q, rate: 0.4, inputs: d1}\n"
                             "  - Concatenate: {inputs: [d2, d3, q]}\n  - Dense: {units: 3}\n", 4},
    {"shared_conv_gradients", IMG "  - Conv2D: {name: c1, filters: 2, kernel_size: 3, padding: same}\n"
                              "  - Conv2D: {name: c2, filters: 2, kernel_size: 3, padding: same, inputs: c1}\n"
                              "  - Add: {inputs: [c2, c1]}\n  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    {"categorical_ce", "input: {shape: [5]}\nlayers:\n  - Dense: {units: 4}\n"
                       "loss: categorical_crossentropy\n", 3},
    {"binary_ce_sigmoid", "input: {shape: [5]}\nlayers:\n  - Dense: {units: 3, activation: sigmoid}\n"
                          "loss: binary_crossentropy\n", 3},
    {"binary_ce_logits", "input: {shape: [5]}\nlayers:\n  - Dense: {units: 1}\n"
                         "loss: binary_crossentropy\n", 4},
    {"mse_softmax", "input: {shape: [5]}\nlayers:\n  - Dense: {units: 3, activation: softmax}\n"
                    "loss: mse\n", 3},
    {"regression_losses_mae", "input: {shape: [5]}\nlayers:\n  - Dense: {units: 4, activation: tanh}\n"
                              "  - Dense: {units: 3}\nloss: mae\n", 3},
    {"regression_losses_huber", "input: {shape: [5]}\nlayers:\n  - Dense: {units: 3}\n"
                                "loss: {type: huber, delta: 1.0}\n", 4},
    {"regression_losses_log_cosh", "input: {shape: [5]}\nlayers:\n  - Dense: {units: 3}\n"
                                   "loss: log_cosh\n", 4},
    {"conv_valid", IMG "  - Conv2D: {filters: 3, kernel_size: 3, activation: tanh}\n"
                   "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"conv_same_stride2_even", IMG "  - Conv2D: {filters: 3, kernel_size: [2, 4], strides: 2, padding: same}\n"
                               "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"conv_dilated_nobias", IMG "  - Conv2D: {filters: 2, kernel_size: 2, dilation_rate: 2, use_bias: false}\n"
                            "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"maxpool_same", IMG "  - MaxPooling2D: {pool_size: 3, strides: 2, padding: same}\n"
                     "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"avgpool_same", IMG "  - AveragePooling2D: {pool_size: 2, padding: same}\n"
                     "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"global_avgpool", IMG "  - Conv2D: {filters: 4, kernel_size: 2}\n  - GlobalAveragePooling2D: {}\n"
                       "  - Dense: {units: 3}\n", 3},
    {"batchnorm_dense", "input: {shape: [4]}\nlayers:\n  - Dense: {units: 5}\n"
                        "  - BatchNormalization: {}\n  - Dense: {units: 3}\n", 6},
    /* without scale or center: the constant's gradient goes to the workspace, unread; a
     * ReLU folded into the first (forward_relu) */
    {"batchnorm_no_scale", IMG "  - Conv2D: {filters: 3, kernel_size: 3}\n"
                           "  - BatchNormalization: {scale: false}\n"
                           "  - Activation: {activation: relu}\n"
                           "  - Conv2D: {filters: 3, kernel_size: 1}\n"
                           "  - BatchNormalization: {center: false}\n"
                           "  - BatchNormalization: {center: false, scale: false}\n"
                           "  - Flatten: {}\n  - Dense: {units: 3}\n", 6},
    {"batchnorm_conv", IMG "  - Conv2D: {filters: 3, kernel_size: 3}\n  - BatchNormalization: {momentum: 0.9}\n"
                       "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    {"dropout", "input: {shape: [8]}\nlayers:\n  - Dense: {units: 8}\n  - Dropout: {rate: 0.3}\n"
                "  - Dense: {units: 3}\n", 4},
    /* the noise layers in training: each draw fixed by (layer, step), so linear in x */
    /* activity regularizers: the penalty of each output in the loss (a ReLU applied by the
     * convolution, a softmax the loss folds, an LSTM's sequences) */
    {"activity_regularizers", IMG "  - Conv2D: {filters: 3, kernel_size: 3, activation: relu, "
                              "activity_regularizer: {l2: 0.1}}\n"
                              "  - ActivityRegularization: {l1: 0.05, l2: 0.02}\n"
                              "  - Reshape: {target_shape: [12, 3]}\n"
                              "  - LSTM: {units: 3, return_sequences: true, "
                              "activity_regularizer: {type: l1, l1: 0.05}}\n  - Flatten: {}\n"
                              "  - Dense: {units: 3, activation: softmax, "
                              "activity_regularizer: {type: l1l2, l1: 0.1, l2: 0.3}}\n", 4},
    /* Normalization: given statistics (per feature, then over two kept axes, inverted),
     * between Dense layers so the gradient passes through it */
    {"normalization", "input: {shape: [3, 4]}\nlayers:\n  - Dense: {units: 4}\n"
                      "  - Normalization: {mean: [0.5, -1, 2, 0], variance: [4, 0.25, 1, 0.5]}\n"
                      "  - Normalization: {axis: [1, 2], mean: [[1, 2, 3, 4]], "
                      "variance: [[2, 0.5, 1, 3]], invert: true}\n"
                      "  - Normalization: {axis: null}\n"
                      "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    /* RepeatVector (its repetitions' gradients added) and Identity */
    {"repeat_vector", "input: {shape: [6]}\nlayers:\n  - Dense: {units: 3, activation: tanh}\n"
                      "  - RepeatVector: {n: 4}\n  - Identity: {}\n"
                      "  - LSTM: {units: 3, return_sequences: true}\n  - Flatten: {}\n"
                      "  - Dense: {units: 3}\n", 4},
    {"noise", "input: {shape: [6, 4]}\nlayers:\n  - Dense: {units: 4}\n"
              "  - SpatialDropout1D: {rate: 0.3}\n  - GaussianNoise: {stddev: 0.2}\n"
              "  - GaussianDropout: {rate: 0.3}\n  - AlphaDropout: {rate: 0.2}\n"
              "  - Dropout: {rate: 0.3, noise_shape: [null, 1, null]}\n  - Flatten: {}\n"
              "  - Dense: {units: 3}\n", 4},
    {"spatial_dropout2d", IMG "  - Conv2D: {filters: 3, kernel_size: 3}\n"
                          "  - SpatialDropout2D: {rate: 0.4}\n  - Flatten: {}\n"
                          "  - Dense: {units: 3}\n", 4},
    {"spatial_dropout3d", "input: {shape: [2, 3, 2, 3]}\nlayers:\n  - Dense: {units: 3}\n"
                          "  - SpatialDropout3D: {rate: 0.5}\n  - Flatten: {}\n"
                          "  - Dense: {units: 3}\n", 4},
    {"reshape", "input: {shape: [12]}\nlayers:\n  - Reshape: {target_shape: [3, -1]}\n"
                "  - Dense: {units: 2}\n  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"residual_add", IMG "  - Conv2D: {name: a, filters: 2, kernel_size: 3, padding: same}\n"
                     "  - Conv2D: {name: b, filters: 2, kernel_size: 3, padding: same, activation: relu}\n"
                     "  - Add: {inputs: [input, b]}\n  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    /* a hidden layer with three consumers (their gradients accumulate in one block, which
     * the last consumer's backward step must zero first: graph.c's plan_grads) */
    {"residual_block", IMG "  - Conv2D: {name: a, filters: 2, kernel_size: 3, padding: same, activation: tanh}\n"
                       "  - Conv2D: {name: b, filters: 2, kernel_size: 3, padding: same}\n"
                       "  - BatchNormalization: {name: n}\n"
                       "  - Add: {name: s, inputs: [n, a]}\n"
                       "  - Conv2D: {name: c, filters: 2, kernel_size: 1, inputs: a}\n"
                       "  - Concatenate: {inputs: [s, c]}\n  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"concatenate", IMG "  - Conv2D: {name: a, filters: 2, kernel_size: 1}\n"
                    "  - Conv2D: {name: b, filters: 3, kernel_size: 1, inputs: input}\n"
                    "  - Concatenate: {inputs: [a, b, input]}\n  - Flatten: {}\n"
                    "  - Concatenate: {name: c2, inputs: [flatten, flatten], axis: 1}\n"
                    "  - Dense: {units: 3}\n", 2},
    /* 3-D branches (5, 6, 2) joined on their rows and columns: axis 1 and 2 (Keras counts
     * the batch axis) */
    {"concat_axis0_3d", IMG "  - Conv2D: {name: a, filters: 2, kernel_size: 1, activation: tanh}\n"
                        "  - Conv2D: {name: b, filters: 2, kernel_size: 3, padding: same, inputs: input}\n"
                        "  - Concatenate: {inputs: [a, b, input], axis: 1}\n"
                        "  - Conv2D: {filters: 2, kernel_size: 3, strides: 2}\n"
                        "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"concat_axis1_3d", IMG "  - Conv2D: {name: a, filters: 2, kernel_size: 1, activation: tanh}\n"
                        "  - Conv2D: {name: b, filters: 2, kernel_size: 3, padding: same, inputs: input}\n"
                        "  - Concatenate: {inputs: [a, b], axis: 2}\n"
                        "  - Conv2D: {filters: 2, kernel_size: 3, strides: 2}\n"
                        "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"add_three", IMG "  - Conv2D: {name: a, filters: 2, kernel_size: 3, padding: same, activation: tanh}\n"
                  "  - Conv2D: {name: b, filters: 2, kernel_size: 1, inputs: input}\n"
                  "  - Add: {inputs: [a, b, input]}\n  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    /* VALID pooling with the default strides (= pool_size): 5 rows pool to 2, the last row
     * receives no gradient */
    {"pool_valid_default_strides", IMG "  - Conv2D: {filters: 3, kernel_size: 1, activation: tanh}\n"
                                   "  - MaxPooling2D: {pool_size: 2}\n"
                                   "  - AveragePooling2D: {pool_size: [2, 1], inputs: conv2d}\n"
                                   "  - Flatten: {inputs: max_pooling2d}\n"
                                   "  - Flatten: {name: f2, inputs: average_pooling2d}\n"
                                   "  - Concatenate: {inputs: [flatten, f2]}\n  - Dense: {units: 3}\n", 2},
    /* Conv2D's groups: 3x3 same, then stride 2 with a ReLU (applied after the grouped op),
     * then 1x1 with groups = channels and no bias */
    {"conv2d_groups", IMG "  - Conv2D: {filters: 4, kernel_size: 1, activation: tanh}\n"
                      "  - Conv2D: {filters: 6, kernel_size: 3, groups: 2, padding: same}\n"
                      "  - Conv2D: {filters: 4, kernel_size: [2, 3], groups: 2, strides: 2, activation: relu}\n"
                      "  - Conv2D: {filters: 4, kernel_size: 1, groups: 4, use_bias: false}\n"
                      "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"conv_strides_2_1", IMG "  - Conv2D: {filters: 3, kernel_size: 3, strides: [2, 1]}\n"
                         "  - Conv2D: {filters: 2, kernel_size: [2, 3], strides: [2, 1], padding: same}\n"
                         "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"embedding_lstm_last", SEQ "  - Embedding: {input_dim: 10, output_dim: 3}\n"
                            "  - LSTM: {units: 4}\n  - Dense: {units: 3}\n", 3},
    {"lstm_sequences_masked", SEQ "  - Embedding: {input_dim: 10, output_dim: 3, mask_zero: true}\n"
                              "  - LSTM: {units: 4, return_sequences: true}\n"
                              "  - Dense: {units: 5, activation: softmax}\n", 3},
    {"lstm_masked_classify", SEQ "  - Embedding: {input_dim: 10, output_dim: 3, mask_zero: true}\n"
                             "  - LSTM: {units: 3}\n  - Dense: {units: 2}\n", 4},
    /* a batch with twice the vocabulary's tokens: the LSTM takes the Embedding's ids and
     * table (graph.c, cpu_lstm.c) */
    {"embedding_lstm_ids", SEQ "  - Embedding: {input_dim: 10, output_dim: 3}\n"
                           "  - LSTM: {units: 4, return_sequences: true}\n"
                           "  - Dense: {units: 3}\n", 4},
    {"lstm_float_nobias", "input: {shape: [4, 3]}\nlayers:\n"
                          "  - LSTM: {units: 3, return_sequences: true, use_bias: false}\n"
                          "  - LSTM: {units: 2}\n  - Dense: {units: 2}\n", 2},
    {"conv1d_valid", SEQ1 "  - Conv1D: {filters: 4, kernel_size: 3, activation: tanh}\n"
                     "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    {"conv1d_same_stride2", SEQ1 "  - Conv1D: {filters: 3, kernel_size: 4, strides: 2, padding: same}\n"
                            "  - Conv1D: {filters: 2, kernel_size: 2, strides: 3, padding: same}\n"
                            "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"conv1d_causal_dilated", SEQ1 "  - Conv1D: {filters: 3, kernel_size: 3, dilation_rate: 2, padding: causal}\n"
                              "  - Conv1D: {filters: 2, kernel_size: 2, strides: 2, padding: causal,"
                              " use_bias: false}\n  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"conv1d_groups", SEQ1 "  - Conv1D: {filters: 4, kernel_size: 3, groups: 2, dilation_rate: 2,"
                      " padding: causal, activation: tanh}\n"
                      "  - Conv1D: {filters: 6, kernel_size: 2, groups: 2, strides: 2, padding: same}\n"
                      "  - Conv1D: {filters: 2, kernel_size: 3, groups: 2, use_bias: false}\n"
                      "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    {"conv1d_depthwise", SEQ1 "  - Conv1D: {filters: 4, kernel_size: 3, groups: 4, padding: causal, dilation_rate: 2}\n"
                         "  - Conv1D: {filters: 8, kernel_size: 2, groups: 4, strides: 2, padding: same}\n"
                         "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    {"pooling1d", SEQ1 "  - Conv1D: {filters: 3, kernel_size: 1, activation: tanh}\n"
                  "  - MaxPooling1D: {pool_size: 3, strides: 2, padding: same}\n"
                  "  - AveragePooling1D: {name: a, pool_size: 2, inputs: conv1d}\n"
                  "  - AveragePooling1D: {name: b, pool_size: 3, strides: 2, padding: same, inputs: conv1d}\n"
                  "  - Flatten: {inputs: max_pooling1d}\n  - Flatten: {name: fa, inputs: a}\n"
                  "  - Flatten: {name: fb, inputs: b}\n"
                  "  - Concatenate: {inputs: [flatten, fa, fb]}\n  - Dense: {units: 3}\n", 2},
    {"global_pooling1d", SEQ1 "  - Conv1D: {filters: 3, kernel_size: 2, activation: tanh}\n"
                         "  - GlobalMaxPooling1D: {}\n"
                         "  - GlobalAveragePooling1D: {keepdims: true, inputs: conv1d}\n"
                         "  - Flatten: {}\n  - Concatenate: {inputs: [global_max_pooling1d, flatten]}\n"
                         "  - Dense: {units: 3}\n", 3},
    /* Conv1D drops the Embedding's mask (as Keras): the average is over every step */
    {"embedding_conv1d_avgpool", SEQ "  - Embedding: {input_dim: 10, output_dim: 3, mask_zero: true}\n"
                                 "  - Conv1D: {filters: 4, kernel_size: 3, padding: same, activation: tanh}\n"
                                 "  - GlobalAveragePooling1D: {}\n  - Dense: {units: 3}\n", 3},
    /* groups > 1 apply their ReLU after the grouped op (conv1d.c's forward_fused); a ReLU
     * whose derivative the max pooling after it takes (graph.c's relu_pool) */
    {"conv1d_groups_relu", SEQ1 "  - Conv1D: {filters: 4, kernel_size: 3, groups: 2, activation: relu}\n"
                           "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    {"conv1d_relu_maxpool", SEQ1 "  - Conv1D: {filters: 4, kernel_size: 2, groups: 2, activation: relu}\n"
                            "  - MaxPooling1D: {pool_size: 2}\n"
                            "  - Conv1D: {filters: 3, kernel_size: 2, padding: causal, activation: relu}\n"
                            "  - AveragePooling1D: {pool_size: 2, padding: same}\n"
                            "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    /* the mean over the unmasked steps (fill_ids pads 0, 1 or 2 steps) */
    {"global_avgpool1d_masked", SEQ "  - Embedding: {input_dim: 10, output_dim: 3, mask_zero: true}\n"
                                "  - Dense: {units: 4, activation: tanh}\n"
                                "  - GlobalAveragePooling1D: {}\n  - Dense: {units: 3}\n", 4},
    {"depthwise_same_stride2", IMG "  - DepthwiseConv2D: {kernel_size: 3, strides: 2, padding: same, activation: tanh}\n"
                               "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    /* depth_multiplier 3 (output channel k reads channel k / 3), dilation and strides
     * together (Keras's JAX backend allows both), no bias */
    {"depthwise_multiplier_dilated", IMG "  - DepthwiseConv2D: {kernel_size: [2, 3], depth_multiplier: 3, "
                                     "dilation_rate: [2, 1], strides: [1, 2], use_bias: false}\n"
                                     "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"depthwise_valid_multiplier", IMG "  - Conv2D: {filters: 3, kernel_size: 1, activation: tanh}\n"
                                   "  - DepthwiseConv2D: {kernel_size: 2, depth_multiplier: 2}\n"
                                   "  - GlobalAveragePooling2D: {}\n  - Dense: {units: 3}\n", 3},
    /* every form of the amounts: an int, a pair, a pair of pairs, an int beside a pair */
    {"zero_padding_cropping", IMG "  - ZeroPadding2D: {}\n"
                              "  - Conv2D: {filters: 2, kernel_size: 3, activation: tanh}\n"
                              "  - ZeroPadding2D: {padding: [[1, 2], [0, 3]]}\n"
                              "  - Cropping2D: {cropping: [2, 1]}\n"
                              "  - ZeroPadding2D: {padding: [0, [2, 1]]}\n"
                              "  - Cropping2D: {cropping: [[0, 1], 2]}\n"
                              "  - Cropping2D: {cropping: 1}\n"
                              "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"upsampling_nearest", IMG "  - UpSampling2D: {size: [2, 3]}\n"
                           "  - Conv2D: {filters: 2, kernel_size: 3, strides: 2}\n"
                           "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    /* odd factors: half-pixel centres fall between cells and at the clamped edges */
    {"upsampling_bilinear_odd", IMG "  - UpSampling2D: {size: [3, 1], interpolation: bilinear}\n"
                                "  - UpSampling2D: {size: [1, 3], interpolation: bilinear}\n"
                                "  - Conv2D: {filters: 2, kernel_size: 3, strides: 3}\n"
                                "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"global_max_keepdims", IMG "  - Conv2D: {filters: 4, kernel_size: 2, activation: tanh}\n"
                            "  - GlobalMaxPooling2D: {keepdims: true}\n"
                            "  - GlobalAveragePooling2D: {name: gap, keepdims: true, inputs: conv2d}\n"
                            "  - Concatenate: {inputs: [global_max_pooling2d, gap]}\n"
                            "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    /* squeeze-and-excitation: a (1, 1, C) scale and a (C) one broadcast over the image;
     * three inputs (the product of the others in the workspace) */
    {"multiply_broadcast", IMG "  - Conv2D: {name: c, filters: 3, kernel_size: 3, padding: same, activation: tanh}\n"
                           "  - GlobalAveragePooling2D: {keepdims: true}\n"
                           "  - Dense: {name: s, units: 3, activation: sigmoid}\n"
                           "  - GlobalMaxPooling2D: {inputs: c}\n"
                           "  - Dense: {name: t, units: 3}\n"
                           "  - Multiply: {name: m, inputs: [s, c, t]}\n"
                           "  - Multiply: {inputs: [m, c]}\n"
                           "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    /* inputs spread over the kinks of relu6 (0, 6) and hard_silu (-3, 3) */
    {"activations_vision", "input: {shape: [6]}\nlayers:\n"
                           "  - Dense: {units: 8, activation: relu6, kernel_initializer: {type: random_uniform, minval: -4, maxval: 4}}\n"
                           "  - Dense: {units: 8, activation: hard_silu, kernel_initializer: {type: random_uniform, minval: -3, maxval: 3}}\n"
                           "  - Dense: {units: 6, activation: mish}\n"
                           "  - Activation: {activation: mish}\n  - Dense: {units: 3}\n", 3},
    /* the decoder's step: strides with valid (default output_padding), same, an explicit
     * output_padding, a kernel smaller than the stride (rows no tap reaches: bias only) */
    {"conv_transpose_valid_same", IMG "  - Conv2DTranspose: {filters: 3, kernel_size: 3, strides: 2, activation: tanh}\n"
                                  "  - Conv2DTranspose: {filters: 2, kernel_size: [2, 3], strides: [1, 2], padding: same}\n"
                                  "  - Conv2D: {filters: 2, kernel_size: 3, strides: 3}\n"
                                  "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"conv_transpose_output_padding", IMG "  - Conv2DTranspose: {filters: 2, kernel_size: 3, strides: [3, 2], padding: same, output_padding: [2, 0]}\n"
                                      "  - Conv2DTranspose: {filters: 2, kernel_size: 1, strides: 2, use_bias: false}\n"
                                      "  - Conv2DTranspose: {filters: 2, kernel_size: 2, dilation_rate: 2, output_padding: 0}\n"
                                      "  - Conv2D: {filters: 2, kernel_size: 3, strides: 4}\n"
                                      "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    /* LayerNormalization first (the input's gradient) and after a Dense, gamma and beta
     * away from their ones and zeros */
    {"layernorm_sequence", "input: {shape: [4, 6]}\nlayers:\n  - LayerNormalization: {name: n0}\n"
                           "  - Dense: {units: 6}\n"
                           "  - LayerNormalization: {gamma_initializer: {type: random_uniform, "
                           "minval: 0.5, maxval: 1.5}, beta_initializer: {type: random_uniform}}\n"
                           "  - Dense: {units: 3}\n", 3},
    {"layernorm_axes_options", "input: {shape: [3, 4]}\nlayers:\n  - Dense: {units: 4, "
                               "kernel_initializer: {type: random_uniform, minval: -1, "
                               "maxval: 1}}\n"
                               "  - LayerNormalization: {axis: [-2, -1], epsilon: 0.01}\n"
                               "  - LayerNormalization: {name: a, axis: [1, 2], center: false}\n"
                               "  - LayerNormalization: {name: b, scale: false}\n"
                               "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    {"layernorm_bare_rms_scaling", "input: {shape: [3, 4]}\nlayers:\n"
                                   "  - LayerNormalization: {name: c, center: false, "
                                   "scale: false}\n"
                                   "  - Dense: {units: 4}\n"
                                   "  - LayerNormalization: {name: d, rms_scaling: true}\n"
                                   "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    {"layernorm_masked", SEQ "  - Embedding: {input_dim: 10, output_dim: 4, mask_zero: true, "
                         "embeddings_initializer: {type: random_uniform, minval: -1, maxval: 1}}\n"
                         "  - LayerNormalization: {}\n"
                         "  - Dense: {units: 5, activation: softmax}\n", 3},
    /* GroupNormalization first (the input's gradient) on images, after a convolution with
     * one group per channel, on sequences with center or scale off, and on a middle axis;
     * gamma and beta away from their ones and zeros */
    {"groupnorm_image", IMG "  - GroupNormalization: {name: g0, groups: 1}\n"
                        "  - Conv2D: {filters: 4, kernel_size: 3, padding: same}\n"
                        "  - GroupNormalization: {groups: 2, gamma_initializer: {type: "
                        "random_uniform, minval: 0.5, maxval: 1.5}, beta_initializer: {type: "
                        "random_uniform}}\n"
                        "  - GroupNormalization: {name: g2, groups: -1, epsilon: 0.01}\n"
                        "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    {"groupnorm_sequence_axes", "input: {shape: [4, 6]}\nlayers:\n"
                                "  - GroupNormalization: {name: g0, groups: 3}\n"
                                "  - Dense: {units: 6}\n"
                                "  - GroupNormalization: {name: g1, groups: 2, center: false}\n"
                                "  - GroupNormalization: {name: g2, groups: 6, scale: false}\n"
                                "  - GroupNormalization: {name: g3, groups: 2, axis: 1}\n"
                                "  - Dense: {units: 3}\n", 3},
    /* Permute first (the input's gradient), then around a Dense whose gradient block a
     * Permute shares with an Add (one of them writes it, the other adds) */
    {"permute", "input: {shape: [3, 4, 2]}\nlayers:\n  - Permute: {name: p0, dims: [3, 1, 2]}\n"
                "  - Dense: {name: d, units: 4, activation: tanh}\n"
                "  - Permute: {name: p1, dims: [1, 3, 2], inputs: d}\n"
                "  - Permute: {name: p2, dims: [1, 3, 2], inputs: p1}\n"
                "  - Add: {inputs: [d, p2]}\n  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    /* UnitNormalization first, then over the last axis, a leading axis and both, readers
     * of one Dense's output */
    {"unit_normalization", "input: {shape: [3, 4]}\nlayers:\n  - UnitNormalization: {name: u0}\n"
                           "  - Dense: {name: d, units: 4}\n"
                           "  - UnitNormalization: {name: u1, axis: 1, inputs: d}\n"
                           "  - UnitNormalization: {name: u2, axis: [1, 2], inputs: d}\n"
                           "  - Add: {inputs: [u1, u2, d]}\n  - Flatten: {}\n"
                           "  - Dense: {units: 3}\n", 3},
    /* a transformer's feed-forward half on [time, features] */
    {"ffn_block_sequence", "input: {shape: [4, 6]}\nlayers:\n"
                           "  - Dense: {name: d1, units: 8, activation: gelu}\n"
                           "  - Dropout: {rate: 0.2}\n  - Dense: {name: d2, units: 6}\n"
                           "  - Add: {inputs: [input, d2]}\n  - LayerNormalization: {}\n"
                           "  - Activation: {activation: gelu}\n  - Dense: {units: 3}\n", 3},
    /* positions added to a sequence's vectors with Add (fewer steps than positions) */
    {"position_embedding", "input: {shape: [4, 3]}\nlayers:\n  - Dense: {name: d, units: 3}\n"
                           "  - PositionEmbedding: {sequence_length: 6}\n"
                           "  - Add: {inputs: [d, position_embedding]}\n"
                           "  - Dense: {units: 3}\n", 3},
    {"token_and_position_masked", SEQ "  - TokenAndPositionEmbedding: {vocabulary_size: 10, "
                                  "sequence_length: 6, embedding_dim: 3, mask_zero: true}\n"
                                  "  - Dense: {units: 5, activation: softmax}\n", 3},
    {"rmsnorm", "input: {shape: [3, 5]}\nlayers:\n  - RMSNormalization: {name: r0}\n"
                "  - Dense: {units: 5}\n  - RMSNormalization: {axis: [-2, -1], epsilon: 0.001}\n"
                "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    {"mha_self", "input: {shape: [5, 4]}\nlayers:\n"
                 "  - MultiHeadAttention: {num_heads: 2, key_dim: 3}\n"
                 "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"mha_causal_value_dim", "input: {shape: [6, 4]}\nlayers:\n  - Dense: {units: 5}\n"
                             "  - MultiHeadAttention: {num_heads: 3, key_dim: 2, value_dim: 4,"
                             " use_causal_mask: true, output_shape: 3, sliding_window: 3}\n"
                             "  - Dense: {units: 3}\n", 2},
    /* query 6 steps, value 3 steps (a reshape of the input), key a projection of the value */
    {"mha_cross", "input: {shape: [6, 4]}\nlayers:\n  - Dense: {name: q, units: 5}\n"
                  "  - Reshape: {name: kv, target_shape: [3, 8], inputs: [input]}\n"
                  "  - Dense: {name: k, units: 3}\n"
                  "  - MultiHeadAttention: {inputs: [q, kv, k], num_heads: 2, key_dim: 4,"
                  " use_bias: false}\n"
                  "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    /* padding: the padded query rows take the mean of the values (dropout 0, as Keras) */
    {"mha_masked", SEQ "  - Embedding: {input_dim: 10, output_dim: 4, mask_zero: true}\n"
                   "  - MultiHeadAttention: {num_heads: 2, key_dim: 3}\n"
                   "  - Flatten: {}\n  - Dense: {units: 2}\n", 3},
    /* padding, causal and dropout: padded rows give zeros (Keras's path with dropout) */
    {"mha_masked_causal_dropout", SEQ "  - Embedding: {input_dim: 10, output_dim: 4,"
                                  " mask_zero: true}\n"
                                  "  - MultiHeadAttention: {num_heads: 2, key_dim: 2,"
                                  " use_causal_mask: true, dropout: 0.3}\n"
                                  "  - Flatten: {}\n  - Dense: {units: 2}\n", 3},
    /* GroupQueryAttention: 4 query heads over 2 key/value heads with the gate, a causal window
     * over a key apart from the value; one key/value head (MQA) under padding and dropout */
    {"gqa_gate_cross_window", "input: {shape: [6, 4]}\nlayers:\n"
                              "  - Reshape: {name: kv, target_shape: [3, 8]}\n"
                              "  - Dense: {name: v, units: 4}\n"
                              "  - Dense: {name: k, units: 3, inputs: [kv]}\n"
                              "  - GroupQueryAttention: {inputs: [input, v, k], head_dim: 2,"
                              " num_query_heads: 4, num_key_value_heads: 2, use_gate: true,"
                              " use_causal_mask: true, sliding_window: 2}\n"
                              "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"gqa_mqa_masked_dropout", SEQ "  - Embedding: {input_dim: 10, output_dim: 4,"
                               " mask_zero: true}\n"
                               "  - GroupQueryAttention: {head_dim: 3, num_query_heads: 3,"
                               " num_key_value_heads: 1, dropout: 0.3}\n"
                               "  - Flatten: {}\n  - Dense: {units: 2}\n", 3},
    /* Attention and AdditiveAttention: a key apart from the value and a learned scale; concat
     * scores with padding, a causal mask and dropout; a value narrower than the query; the
     * query and the value of different lengths */
    {"luong_dot_key_scale", "input: {shape: [5, 4]}\nlayers:\n  - Dense: {name: q, units: 3}\n"
                            "  - Dense: {name: k, units: 3, inputs: [input]}\n"
                            "  - Attention: {inputs: [q, input, k], use_scale: true}\n"
                            "  - Flatten: {}\n  - Dense: {units: 2}\n", 2},
    {"luong_concat_masked_causal_dropout", SEQ "  - Embedding: {name: e, input_dim: 10,"
                                           " output_dim: 4, mask_zero: true}\n"
                                           "  - Dense: {name: q, units: 4}\n"
                                           "  - Attention: {inputs: [q, e], use_scale: true,"
                                           " score_mode: concat, use_causal_mask: true,"
                                           " dropout: 0.3}\n"
                                           "  - Flatten: {}\n  - Dense: {units: 2}\n", 3},
    {"luong_dot_masked", SEQ "  - Embedding: {name: e, input_dim: 10, output_dim: 4,"
                         " mask_zero: true}\n"
                         "  - Attention: {inputs: [e, e]}\n"
                         "  - GlobalAveragePooling1D: {}\n  - Dense: {units: 2}\n", 3},
    {"bahdanau_masked_narrow_value", SEQ "  - Embedding: {name: e, input_dim: 10, output_dim: 4,"
                                     " mask_zero: true}\n"
                                     "  - Dense: {name: v, units: 3}\n"
                                     "  - AdditiveAttention: {inputs: [e, v, e]}\n"
                                     "  - Flatten: {}\n  - Dense: {units: 2}\n", 3},
    {"bahdanau_cross_dropout", "input: {shape: [6, 4]}\nlayers:\n"
                               "  - Dense: {name: q, units: 8}\n"
                               "  - Reshape: {name: kv, target_shape: [3, 8], inputs: [input]}\n"
                               "  - AdditiveAttention: {inputs: [q, kv], use_scale: false,"
                               " dropout: 0.25}\n"
                               "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"gru_float", "input: {shape: [4, 3]}\nlayers:\n  - GRU: {units: 3}\n  - Dense: {units: 2}\n", 3},
    {"gru_reset_before_sequences", "input: {shape: [4, 3]}\nlayers:\n"
                                   "  - GRU: {units: 3, reset_after: false, return_sequences: true}\n"
                                   "  - GRU: {units: 2, reset_after: false, use_bias: false}\n"
                                   "  - Dense: {units: 2}\n", 2},
    {"gru_masked_sequences", SEQ "  - Embedding: {input_dim: 10, output_dim: 3, mask_zero: true}\n"
                             "  - GRU: {units: 4, return_sequences: true}\n"
                             "  - Dense: {units: 5, activation: softmax}\n", 3},
    {"gru_masked_backwards", SEQ "  - Embedding: {input_dim: 10, output_dim: 3, mask_zero: true}\n"
                             "  - GRU: {units: 3, go_backwards: true, reset_after: false}\n"
                             "  - Dense: {units: 2}\n", 4},
    {"gru_dropout", "input: {shape: [5, 4]}\nlayers:\n"
                    "  - GRU: {units: 3, dropout: 0.4, return_sequences: true}\n"
                    "  - Dense: {units: 2}\n", 3},
    {"lstm_backwards_dropout_masked", SEQ "  - Embedding: {input_dim: 10, output_dim: 3, mask_zero: true}\n"
                                      "  - LSTM: {units: 3, go_backwards: true, dropout: 0.3,"
                                      " return_sequences: true}\n"
                                      "  - Dense: {units: 2}\n", 4},
    {"bidir_lstm_concat_masked", SEQ "  - Embedding: {input_dim: 10, output_dim: 3, mask_zero: true}\n"
                                 "  - Bidirectional: {layer: {LSTM: {units: 3, return_sequences: true}}}\n"
                                 "  - Dense: {units: 2}\n", 4},
    {"bidir_gru_sum_masked", SEQ "  - Embedding: {input_dim: 10, output_dim: 3, mask_zero: true}\n"
                             "  - Bidirectional: {layer: {GRU: {units: 3}}, merge_mode: sum}\n"
                             "  - Dense: {units: 2}\n", 4},
    {"bidir_gru_mul_masked", SEQ "  - Embedding: {input_dim: 10, output_dim: 3, mask_zero: true}\n"
                             "  - Bidirectional: {layer: {GRU: {units: 3, return_sequences: true,"
                             " reset_after: false, dropout: 0.2}}, merge_mode: mul}\n"
                             "  - Dense: {units: 2}\n", 3},
    {"bidir_lstm_ave", "input: {shape: [4, 3]}\nlayers:\n"
                       "  - Bidirectional: {layer: {LSTM: {units: 2, return_sequences: true}},"
                       " merge_mode: ave}\n"
                       "  - Bidirectional: {name: b2, layer: {GRU: {units: 2}}}\n"
                       "  - Dense: {units: 2}\n", 2},
    {"bidir_gru_ave_masked", SEQ "  - Embedding: {input_dim: 10, output_dim: 3, mask_zero: true}\n"
                             "  - Bidirectional: {layer: {GRU: {units: 2, return_sequences: true}},"
                             " merge_mode: ave}\n"
                             "  - Dense: {units: 2}\n", 3},
    /* SimpleRNN: tanh, and other activations (softmax over the units, swish, sigmoid), masks,
     * go_backwards with dropout, no bias, and in a Bidirectional */
    {"simple_rnn_float", "input: {shape: [4, 3]}\nlayers:\n  - SimpleRNN: {units: 3}\n"
                         "  - Dense: {units: 2}\n", 3},
    {"simple_rnn_masked_softmax", SEQ "  - Embedding: {input_dim: 10, output_dim: 3,"
                                  " mask_zero: true}\n"
                                  "  - SimpleRNN: {units: 4, return_sequences: true,"
                                  " activation: softmax}\n"
                                  "  - Dense: {units: 5, activation: softmax}\n", 3},
    {"simple_rnn_backwards_dropout", SEQ "  - Embedding: {input_dim: 10, output_dim: 3,"
                                     " mask_zero: true}\n"
                                     "  - SimpleRNN: {units: 3, go_backwards: true,"
                                     " dropout: 0.3, return_sequences: true,"
                                     " activation: swish}\n"
                                     "  - SimpleRNN: {units: 2, use_bias: false,"
                                     " activation: tanh}\n"
                                     "  - Dense: {units: 2}\n", 4},
    {"bidir_simple_rnn_masked", SEQ "  - Embedding: {input_dim: 10, output_dim: 3,"
                                " mask_zero: true}\n"
                                "  - Bidirectional: {layer: {SimpleRNN: {units: 3,"
                                " return_sequences: true, activation: sigmoid}}}\n"
                                "  - Dense: {units: 2}\n", 3},
    /* RNN of a cell: an LSTMCell under a mask with zero_output_for_mask; a StackedRNNCells
     * (GRUCell, SimpleRNNCell, LSTMCell) going backwards under a mask, with dropout; a
     * Bidirectional around a stack */
    {"rnn_cell_lstm_zero", SEQ "  - Embedding: {input_dim: 10, output_dim: 3, mask_zero: true}\n"
                           "  - RNN: {cell: {LSTMCell: {units: 3}}, return_sequences: true,"
                           " zero_output_for_mask: true}\n"
                           "  - Dense: {units: 2}\n", 3},
    {"rnn_cell_stacked_backwards", SEQ "  - Embedding: {input_dim: 10, output_dim: 3,"
                                   " mask_zero: true}\n"
                                   "  - RNN: {cell: {StackedRNNCells: {cells: [{GRUCell: "
                                   "{units: 3, dropout: 0.3}}, {SimpleRNNCell: {units: 2}}, "
                                   "{LSTMCell: {units: 2}}]}}, go_backwards: true,"
                                   " zero_output_for_mask: true}\n"
                                   "  - Dense: {units: 2}\n", 4},
    {"rnn_cell_bidir_stacked", "input: {shape: [4, 3]}\nlayers:\n"
                               "  - Bidirectional: {layer: {RNN: {cell: {StackedRNNCells: "
                               "{cells: [{LSTMCell: {units: 2}}, {GRUCell: {units: 2, "
                               "reset_after: false}}]}}, return_sequences: true}}}\n"
                               "  - Dense: {units: 2}\n", 3},
    /* ConvLSTM2D: every step with same padding into a second one going backwards with strides
     * 2 and valid padding (the input's gradient through both), no bias */
    {"conv_lstm2d", "input: {shape: [3, 5, 5, 2]}\nlayers:\n"
                    "  - ConvLSTM2D: {filters: 2, kernel_size: 3, padding: same,"
                    " return_sequences: true}\n"
                    "  - ConvLSTM2D: {filters: 2, kernel_size: [2, 3], strides: 2,"
                    " go_backwards: true, use_bias: false}\n"
                    "  - Flatten: {}\n  - Dense: {units: 2}\n", 2},
    {"conv_lstm1d", "input: {shape: [3, 7, 2]}\nlayers:\n"
                    "  - ConvLSTM1D: {filters: 2, kernel_size: 3, padding: same,"
                    " return_sequences: true, dropout: 0.3}\n"
                    "  - ConvLSTM1D: {filters: 2, kernel_size: 2, strides: 2,"
                    " go_backwards: true}\n"
                    "  - Flatten: {}\n  - Dense: {units: 2}\n", 2},
    /* LayerScale first (the input's gradient) and after a Dense (its factors' gradient) */
    {"layer_scale", "input: {shape: [3, 4]}\nlayers:\n"
                    "  - LayerScale: {init_values: 0.7, projection_dim: 4}\n"
                    "  - Dense: {units: 3}\n"
                    "  - LayerScale: {init_values: -1.5, projection_dim: 3}\n", 2},
    /* CustomScaleLayer: the model input and a branch of it (both gradients into the input)
     * and two Dense branches (the second one's weights through the scale) */
    {"custom_scale", "input: {shape: [3, 4]}\nlayers:\n"
                     "  - Dense: {name: b, units: 4}\n"
                     "  - CustomScaleLayer: {scale: 0.17, inputs: [input, b]}\n"
                     "  - Dense: {name: c, units: 3}\n"
                     "  - Dense: {name: e, units: 3, inputs: b}\n"
                     "  - CustomScaleLayer: {scale: -2.5, inputs: [c, e]}\n", 2},
    /* other activations: the derivatives from the kept pre-activations (smooth ones, so
     * that the difference quotient holds) */
    {"conv_lstm2d_activations", "input: {shape: [3, 4, 4, 2]}\nlayers:\n"
                                "  - ConvLSTM2D: {filters: 2, kernel_size: 3, padding: same,"
                                " activation: swish, recurrent_activation: softsign,"
                                " return_sequences: true}\n"
                                "  - Flatten: {}\n  - Dense: {units: 2}\n", 2},
    {"conv_lstm2d_dropout", "input: {shape: [3, 4, 4, 2]}\nlayers:\n"
                            "  - ConvLSTM2D: {filters: 2, kernel_size: 3, padding: same,"
                            " dropout: 0.4, seed: 3, go_backwards: true}\n"
                            "  - Flatten: {}\n  - Dense: {units: 2}\n", 2},
    /* recurrent_dropout: each gate's recurrent convolution of the state under its own mask
     * (with the input's masks too in the second layer) */
    {"conv_lstm_recurrent_dropout", "input: {shape: [4, 4, 4, 2]}\nlayers:\n"
                                    "  - ConvLSTM2D: {filters: 2, kernel_size: 3,"
                                    " padding: same, recurrent_dropout: 0.5,"
                                    " return_sequences: true}\n"
                                    "  - ConvLSTM2D: {filters: 2, kernel_size: 2, dropout: 0.3,"
                                    " recurrent_dropout: 0.4, seed: 7, go_backwards: true}\n"
                                    "  - Flatten: {}\n  - Dense: {units: 2}\n", 2},
    /* ConvLSTM3D: every step with same padding and an even kernel into a second one going
     * backwards with strides (2, 1, 1), valid padding and dropout; then dilation, no bias
     * (each window argument unequal along its axes) */
    {"conv_lstm3d", "input: {shape: [3, 3, 4, 3, 2]}\nlayers:\n"
                    "  - ConvLSTM3D: {filters: 2, kernel_size: [2, 3, 1], padding: same,"
                    " return_sequences: true}\n"
                    "  - ConvLSTM3D: {filters: 2, kernel_size: [2, 2, 3], strides: [2, 1, 1],"
                    " go_backwards: true, dropout: 0.3, seed: 5}\n"
                    "  - Flatten: {}\n  - Dense: {units: 2}\n", 2},
    {"conv_lstm3d_dilated", "input: {shape: [2, 4, 3, 3, 1]}\nlayers:\n"
                            "  - ConvLSTM3D: {filters: 2, kernel_size: [2, 1, 2],"
                            " dilation_rate: [2, 1, 1], use_bias: false,"
                            " return_sequences: true}\n"
                            "  - Flatten: {}\n  - Dense: {units: 2}\n", 2},
    /* the depthwise step's strides and same padding, then depth_multiplier 2 with dilation
     * (the input's gradient through both steps), no bias, a fused activation */
    {"separable_stride_same", IMG "  - SeparableConv2D: {filters: 3, kernel_size: 3, strides: 2,"
                              " padding: same, activation: tanh}\n"
                              "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"separable_multiplier_dilated", IMG "  - Conv2D: {filters: 3, kernel_size: 1, activation: tanh}\n"
                                     "  - SeparableConv2D: {filters: 4, kernel_size: [2, 3],"
                                     " depth_multiplier: 2, dilation_rate: [2, 1], use_bias: false}\n"
                                     "  - SeparableConv2D: {filters: 2, kernel_size: 2, strides: [1, 2],"
                                     " depth_multiplier: 3, activation: sigmoid}\n"
                                     "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    /* the 1-D convolutions run as their 2-D twins over 1 x steps images: strides, same and
     * valid padding, output_padding, dilation (with strides for the depthwise ones),
     * depth_multiplier, no bias, fused activations */
    {"conv1d_transpose", SEQ1 "  - Conv1DTranspose: {filters: 3, kernel_size: 3, strides: 2,"
                         " activation: tanh}\n"
                         "  - Conv1DTranspose: {filters: 2, kernel_size: 2, strides: 3, padding: same,"
                         " output_padding: 1, use_bias: false}\n"
                         "  - Conv1DTranspose: {filters: 2, kernel_size: 3, dilation_rate: 2,"
                         " padding: same}\n"
                         "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"separable_conv1d", SEQ1 "  - SeparableConv1D: {filters: 3, kernel_size: 3, strides: 2,"
                         " padding: same, depth_multiplier: 2, activation: tanh}\n"
                         "  - SeparableConv1D: {filters: 2, kernel_size: 2, dilation_rate: 2,"
                         " use_bias: false}\n"
                         "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"depthwise_conv1d", SEQ1 "  - DepthwiseConv1D: {kernel_size: 3, strides: 2, padding: same,"
                         " depth_multiplier: 2, activation: tanh}\n"
                         "  - DepthwiseConv1D: {kernel_size: 2, strides: 2, dilation_rate: 2,"
                         " use_bias: false}\n"
                         "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    /* Resizing (a pad of fill_value, nearest, an aspect-ratio crop), RandomCrop in training
     * (a random window), CenterCrop on an image smaller than it (resized) and RandomBrightness
     * (its clip far away) after a convolution, so that their transposes carry its gradient */
    {"crop_resize", IMG "  - Conv2D: {filters: 2, kernel_size: 2, padding: same}\n"
                    "  - Resizing: {height: 8, width: 4, pad_to_aspect_ratio: true,"
                    " fill_value: 0.5}\n"
                    "  - Resizing: {height: 7, width: 9, interpolation: nearest}\n"
                    "  - RandomCrop: {height: 5, width: 6}\n"
                    "  - CenterCrop: {height: 6, width: 4}\n"
                    "  - Resizing: {height: 3, width: 3, crop_to_aspect_ratio: true}\n"
                    "  - RandomBrightness: {factor: 0.05, value_range: [-8, 8]}\n"
                    "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    /* the augmentation layers after a convolution, so that their transposes carry its
     * gradient: each fill mode and interpolation, contrast with and without clipping */
    {"augment_bilinear", IMG "  - Conv2D: {filters: 3, kernel_size: 2, padding: same}\n"
                         "  - RandomFlip: {}\n"
                         "  - RandomTranslation: {height_factor: 0.3, width_factor: [-0.2, 0.4]}\n"
                         "  - RandomRotation: {factor: 0.1, fill_mode: constant, fill_value: 0.5}\n"
                         "  - RandomZoom: {height_factor: 0.3, width_factor: 0.2,"
                         " fill_mode: wrap}\n"
                         "  - RandomContrast: {factor: 0.5, value_range: [-20, 20]}\n"
                         "  - Flatten: {}\n  - Dense: {units: 3}\n", 4},
    {"augment_nearest", IMG "  - RandomFlip: {mode: horizontal}\n"
                        "  - Conv2D: {filters: 2, kernel_size: 2}\n"
                        "  - RandomRotation: {factor: 0.2, interpolation: nearest,"
                        " fill_mode: nearest}\n"
                        "  - RandomZoom: {height_factor: [-0.4, -0.1], interpolation: nearest}\n"
                        "  - RandomContrast: {factor: [0.3, 0.6], value_range: [-0.6, 0.5]}\n"
                        "  - Flatten: {}\n  - Dense: {units: 3}\n", 4},
    /* the colour augmentations on a convolution's three channels: Solarization's threshold 0
     * (every value inverted) and the clips far away, so that no step crosses a kink */
    {"augment_color", IMG "  - Conv2D: {filters: 3, kernel_size: 2, padding: same}\n"
                      "  - RandomGrayscale: {factor: 0.5}\n"
                      "  - RandomInvert: {factor: 0.8, value_range: [-1, 1]}\n"
                      "  - Solarization: {addition_factor: 0.05, value_range: [-3, 3]}\n"
                      "  - RandomColorDegeneration: {factor: 0.6, value_range: [-20, 20]}\n"
                      "  - Flatten: {}\n  - Dense: {units: 3}\n", 4},
    /* AutoContrast through each channel's minimum and maximum (no ties among the
     * convolution's values), and Equalization where it keeps the channel (every value in
     * one of its bins: its identity's gradient; elsewhere its gradient is zero, as Keras's,
     * test_augment_tone's parity) */
    {"augment_tone", IMG "  - Conv2D: {filters: 3, kernel_size: 2, padding: same}\n"
                     "  - AutoContrast: {value_range: [-2, 2]}\n"
                     "  - Conv2D: {filters: 2, kernel_size: 2}\n"
                     "  - Equalization: {bins: 2, value_range: [-10, 10]}\n"
                     "  - Flatten: {}\n  - Dense: {units: 3}\n", 4},
    /* ContrastLimitedAdaptiveHistogramEqualization: its gradient is zero (Keras's: the int32
     * bins), so the input's is; value_range wide, so every input value keeps to one bin and
     * no step crosses to another; the convolution after it gets its gradient */
    {"clahe", IMG "  - ContrastLimitedAdaptiveHistogramEqualization: {value_range: [-1000, 1000],"
              " tile_grid_size: [2, 3]}\n"
              "  - Conv2D: {filters: 2, kernel_size: 2}\n"
              "  - Flatten: {}\n  - Dense: {units: 3}\n", 4},
    /* RandomElasticTransform: every image moved (factor [1, 1]), the transpose of its
     * bilinear reads (reflect and constant fills), the clip far away */
    {"elastic", IMG "  - Conv2D: {filters: 3, kernel_size: 2, padding: same}\n"
                "  - RandomElasticTransform: {factor: [1, 1], value_range: [-50, 50], seed: 3}\n"
                "  - RandomElasticTransform: {factor: [1, 1], fill_mode: constant,"
                " fill_value: 0.5, value_range: [-50, 50], scale: [0.5, 1]}\n"
                "  - Flatten: {}\n  - Dense: {units: 3}\n", 4},
    /* RandomSaturation, RandomHue and RandomColorJitter (its four stages) through Keras's HSV
     * maps, on positive RGB values (a pixel's maximum near 0 is where the saturation jumps)
     * whose clips do not bind. The jitter's seed: with the run's stream alone a step moves a
     * pixel across a tie of its largest channels (the contrast moves the whole image), a
     * kink the two step sizes miss (max error 0.07; 5e-4 to 1e-3 with seeds 5, 6, 7) */
    {"augment_hsv", "input: {shape: [4, 5, 3]}\nlayers:\n"
                    "  - Rescaling: {scale: 0.4, offset: 0.5}\n"
                    "  - RandomSaturation: {factor: [0.1, 0.4], value_range: [0, 1]}\n"
                    "  - RandomHue: {factor: 0.5, value_range: [0, 1]}\n"
                    "  - RandomColorJitter: {value_range: [0, 1], brightness_factor: 0.05,"
                    " contrast_factor: 0.2, saturation_factor: [0.2, 0.4], hue_factor: 0.3,"
                    " seed: 5}\n"
                    "  - Conv2D: {filters: 2, kernel_size: 2}\n"
                    "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    /* RandomPosterization has no gradient (the cast to a byte): a value range so wide that
     * every input falls in one bucket, so the numeric derivative is 0 as the analytic one */
    {"augment_posterize", IMG "  - RandomPosterization: {factor: [7, 8],"
                          " value_range: [-600, 1000]}\n"
                          "  - Conv2D: {filters: 2, kernel_size: 2}\n"
                          "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    /* RandomShear (a shear about the origin, both signs) after a convolution: bilinear with
     * reflect, nearest with constant; RandomErasing (noise in its rectangles, no gradient
     * there); RandomGaussianBlur (half the images blurred, a few values clipped) */
    {"augment_shear", IMG "  - Conv2D: {filters: 2, kernel_size: 2, padding: same}\n"
                      "  - RandomShear: {x_factor: 0.4, y_factor: [0.1, 0.3]}\n"
                      "  - RandomShear: {x_factor: 0.3, interpolation: nearest,"
                      " fill_mode: constant, fill_value: 0.5}\n"
                      "  - RandomErasing: {scale: [0.1, 0.5], value_range: [-1, 1]}\n"
                      "  - RandomGaussianBlur: {kernel_size: [5, 3], value_range: [-2, 2]}\n"
                      "  - Flatten: {}\n  - Dense: {units: 3}\n", 4},
    /* RandomPerspective (a homography per image, bilinear and nearest, constant fill) and
     * RandomSharpness (a blend with the smoothing, some values clipped) after a convolution */
    {"augment_perspective", IMG "  - Conv2D: {filters: 2, kernel_size: 2, padding: same}\n"
                            "  - RandomPerspective: {factor: [0.6, 1], scale: 0.8}\n"
                            "  - RandomPerspective: {interpolation: nearest, fill_value: 0.5}\n"
                            "  - RandomSharpness: {factor: [0, 1], value_range: [-2, 2]}\n"
                            "  - Flatten: {}\n  - Dense: {units: 3}\n", 4},
    /* RandAugment's operations chained backward through its kept inputs and its two gradient
     * buffers: seed 37 picks, at the checker's step, the rotation, the contrast and the
     * sharpness (differentiable; the clips of value_range far away) */
    {"rand_augment", IMG "  - Conv2D: {filters: 3, kernel_size: 2, padding: same}\n"
                     "  - RandAugment: {num_ops: 3, factor: 0.3, value_range: [-20, 20],"
                     " seed: 37}\n"
                     "  - Flatten: {}\n  - Dense: {units: 3}\n", 4},
    /* AugMix's chains backward through their recomputed inputs, mixed: seed 26 picks, at the
     * checker's step, the colour degeneration, rotation and contrast in one chain, the
     * translation, shear and brightness in the other (weights 0.92 and 0.08, w 0.61) */
    {"aug_mix", IMG "  - Conv2D: {filters: 3, kernel_size: 2, padding: same}\n"
                "  - AugMix: {num_chains: 2, factor: 0.3, value_range: [-20, 20], seed: 26}\n"
                "  - Flatten: {}\n  - Dense: {units: 3}\n", 4},
    /* Masking passes real steps through and its mask on to the recurrent layers and the
     * pooling (random inputs mask no step: a masked step's input gradient, 0 by Keras's
     * definition, is no derivative of the loss, so test_masking checks those) */
    {"masking_rnn", SEQ1 "  - Masking: {mask_value: 0.25}\n"
                    "  - Bidirectional: {layer: {GRU: {units: 3, return_sequences: true}}}\n"
                    "  - LSTM: {units: 3, return_sequences: true}\n"
                    "  - GlobalAveragePooling1D: {}\n  - Dense: {units: 3}\n", 3},
    /* Conv1D at stride and dilation 1 (the CPU's conv1d ops) after an Embedding, as in
     * bench/models/conv1d: an even kernel with same padding, a causal one, more filters than
     * one 16-wide panel (ReLU's kinks here failed the check on the old ops too: test_conv1d
     * checks the ReLU against loops) */
    {"conv1d_direct", SEQ "  - Embedding: {input_dim: 10, output_dim: 5}\n"
                      "  - Conv1D: {filters: 18, kernel_size: 4, padding: same, activation: tanh}\n"
                      "  - Conv1D: {filters: 4, kernel_size: 3, padding: causal}\n"
                      "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    /* Keras's activation layers: arguments no tfc activation has (the pact ops, the threshold
     * and the clip in one ReLU) and ones that are tfc activations (pure_act), Rescaling
     * first (the input's gradient), a Softmax layer folded into the loss */
    {"activation_layers", "input: {shape: [6]}\nlayers:\n"
                          "  - Rescaling: {scale: 2.0, offset: 0.1}\n  - Dense: {units: 8}\n"
                          "  - ReLU: {max_value: 1.5, negative_slope: 0.1, threshold: 0.25}\n"
                          "  - Dense: {units: 8}\n  - LeakyReLU: {}\n"
                          "  - Dense: {units: 8}\n  - ELU: {alpha: 0.7}\n"
                          "  - Dense: {units: 8}\n  - ReLU: {}\n"
                          "  - Dense: {units: 8}\n  - LeakyReLU: {negative_slope: 0.2}\n"
                          "  - Dense: {units: 8}\n  - ELU: {}\n"
                          "  - Dense: {units: 4}\n  - Softmax: {}\n", 4},
    /* Weight regularizers: their penalties in the loss the differences take, their
     * gradients added after the backward pass (L1's sign too); an Embedding's table, whose
     * gradient the LSTM it feeds may add */
    {"regularizers", IMG "  - Conv2D: {filters: 3, kernel_size: 3, kernel_regularizer: "
                     "{type: l1l2, l1: 0.01, l2: 0.05}, bias_regularizer: {l2: 0.1}}\n"
                     "  - BatchNormalization: {gamma_regularizer: {l2: 0.2}, "
                     "beta_regularizer: {type: l1, l1: 0.05}}\n"
                     "  - PReLU: {shared_axes: [1, 2], alpha_initializer: {type: constant, "
                     "value: 0.3}, alpha_regularizer: {l2: 0.5}}\n"
                     "  - Flatten: {}\n  - Dense: {units: 3, kernel_regularizer: {type: l1, "
                     "l1: 0.02}}\n", 2},
    {"regularizers_rnn", SEQ "  - Embedding: {input_dim: 10, output_dim: 4, "
                         "embeddings_regularizer: {l2: 0.1}}\n"
                         "  - LSTM: {units: 3, kernel_regularizer: {l2: 0.05}, "
                         "recurrent_regularizer: {type: l1, l1: 0.01}}\n"
                         "  - Dense: {units: 3, bias_regularizer: {l2: 0.3}}\n", 3},
    /* ZeroPadding1D, Cropping1D, UpSampling1D around a Conv1D, the input's gradient too */
    {"sequence1d", SEQ1 "  - ZeroPadding1D: {padding: [1, 2]}\n"
                   "  - Conv1D: {filters: 3, kernel_size: 3, activation: tanh}\n"
                   "  - UpSampling1D: {size: 3}\n  - Cropping1D: {cropping: [2, 4]}\n"
                   "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    /* Subtract and Average: a difference of two branches, an average of three (1/3 not a
     * power of two) sharing an input with the difference */
    {"subtract_average", "input: {shape: [6]}\nlayers:\n  - Dense: {name: a, units: 5, activation: tanh}\n"
                         "  - Dense: {name: b, units: 5, inputs: input}\n"
                         "  - Subtract: {name: d, inputs: [a, b]}\n"
                         "  - Dense: {name: c, units: 5, activation: tanh, inputs: input}\n"
                         "  - Average: {inputs: [d, b, c]}\n  - Dense: {units: 3}\n", 4},
    /* Maximum of three branches and Minimum of two (one listed twice), joined; then under a mask:
     * every input masked (padding steps take the first input's values and gradient), and a
     * Dense (masked) against a Conv1D (which drops the mask), which replaces it on padding
     * (embeddings of Keras's +-0.05 would put every branch near 0, every element near a tie) */
    {"maximum_minimum", "input: {shape: [6]}\nlayers:\n  - Dense: {name: a, units: 5, activation: tanh}\n"
                        "  - Dense: {name: b, units: 5, inputs: input}\n"
                        "  - Dense: {name: c, units: 5, activation: tanh, inputs: input}\n"
                        "  - Maximum: {name: m, inputs: [a, b, c]}\n"
                        "  - Minimum: {name: n, inputs: [a, b, a]}\n"
                        "  - Concatenate: {inputs: [m, n]}\n  - Dense: {units: 3}\n", 4},
    {"maximum_minimum_masked", SEQ "  - Embedding: {name: e, input_dim: 10, output_dim: 4, mask_zero: true, "
                               "embeddings_initializer: {type: random_uniform, minval: -1, maxval: 1}}\n"
                               "  - Dense: {name: a, units: 4, activation: tanh}\n"
                               "  - Maximum: {name: m, inputs: [a, e]}\n"
                               "  - Conv1D: {name: c, filters: 4, kernel_size: 3, padding: same, inputs: e}\n"
                               "  - Minimum: {inputs: [m, c]}\n"
                               "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    /* Dot first (the input with itself: both operands' gradients into one), then on a
     * sequence: scores over the features (the second operand transposed), over the steps (the
     * first transposed), mixed axes with normalize, a vector against the steps */
    {"dot_sequence", "input: {shape: [4, 3]}\nlayers:\n"
                     "  - Dot: {name: g, axes: [2, 2], inputs: [input, input]}\n"
                     "  - Dense: {name: q, units: 3, activation: tanh, inputs: input}\n"
                     "  - Dot: {name: s, axes: 2, inputs: [q, input]}\n"
                     "  - Dot: {name: t, axes: 1, inputs: [q, input]}\n"
                     "  - Dot: {name: n, axes: [-2, 1], normalize: true, inputs: [q, input]}\n"
                     "  - Flatten: {name: f, inputs: input}\n  - Dense: {name: v, units: 3}\n"
                     "  - Dot: {name: u, axes: [1, 2], normalize: true, inputs: [v, q]}\n"
                     "  - Flatten: {name: fg, inputs: g}\n  - Flatten: {name: fs, inputs: s}\n"
                     "  - Flatten: {name: ft, inputs: t}\n  - Flatten: {name: fn, inputs: n}\n"
                     "  - Concatenate: {inputs: [fg, fs, ft, fn, u]}\n  - Dense: {units: 3}\n", 3},
    /* Dot on rank-3 examples: a middle axis of both (permuted), with normalize, and vectors
     * ((batch, 1) out) plain and normalised */
    {"dot_image", "input: {shape: [2, 3, 2]}\nlayers:\n"
                  "  - Dense: {name: a, units: 2, activation: tanh}\n"
                  "  - Dot: {name: m, axes: 2, inputs: [a, input]}\n"
                  "  - Dot: {name: n, axes: [2, 2], normalize: true, inputs: [input, a]}\n"
                  "  - Flatten: {name: f, inputs: input}\n  - Dense: {name: v, units: 4}\n"
                  "  - Dense: {name: w, units: 4, inputs: f}\n"
                  "  - Dot: {name: d, axes: 1, inputs: [v, w]}\n"
                  "  - Dot: {name: c, axes: -1, normalize: true, inputs: [v, w]}\n"
                  "  - Flatten: {name: fm, inputs: m}\n  - Flatten: {name: fn, inputs: n}\n"
                  "  - Concatenate: {inputs: [fm, fn, d, c]}\n  - Dense: {units: 3}\n", 3},
    /* ZeroPadding3D first (the input's gradient), Cropping3D, UpSampling3D with and without
     * its depth pass, around a Dense over the channels */
    {"volume", "input: {shape: [2, 3, 2, 2]}\nlayers:\n"
               "  - ZeroPadding3D: {padding: [[1, 0], 1, [0, 2]]}\n"
               "  - Dense: {units: 2, activation: tanh}\n"
               "  - Cropping3D: {cropping: [[0, 1], [2, 1], 1]}\n"
               "  - UpSampling3D: {size: [2, 1, 3]}\n"
               "  - UpSampling3D: {size: [1, 2, 1]}\n"
               "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    {"volume_upsampling_first", "input: {shape: [2, 2, 2, 2]}\nlayers:\n"
                                "  - UpSampling3D: {}\n  - Cropping3D: {}\n"
                                "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    /* PReLU shared over an image's rows and columns, not shared, and over a sequence's steps */
    {"prelu", IMG "  - Conv2D: {filters: 3, kernel_size: 3, padding: same}\n"
              "  - PReLU: {shared_axes: [1, 2], alpha_initializer: {type: constant, value: 0.25}}\n"
              "  - Conv2D: {filters: 2, kernel_size: 3}\n"
              "  - PReLU: {alpha_initializer: random_normal}\n"
              "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    {"prelu_sequence", SEQ1 "  - Dense: {units: 5}\n"
                       "  - PReLU: {shared_axes: [1], alpha_initializer: {type: random_uniform, minval: -0.5, maxval: 0.5}}\n"
                       "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    /* TimeDistributed: the inner layer over batch * T examples, BatchNormalization in training
     * per step (each step's batch statistics), an inner Embedding reading token ids */
    {"td_video", "input: {shape: [3, 5, 5, 2]}\nlayers:\n"
                 "  - TimeDistributed: {layer: {Conv2D: {filters: 3, kernel_size: 3, "
                 "activation: tanh}}}\n"
                 "  - TimeDistributed: {layer: {MaxPooling2D: {pool_size: 2, padding: same}}}\n"
                 "  - TimeDistributed: {layer: {Flatten: {}}}\n"
                 "  - TimeDistributed: {layer: {Dense: {units: 3, activation: sigmoid}}}\n"
                 "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    {"td_batchnorm", "input: {shape: [3, 4, 2]}\nlayers:\n"
                     "  - TimeDistributed: {layer: {Dense: {units: 3}}}\n"
                     "  - TimeDistributed: {layer: {BatchNormalization: {momentum: 0.9}}}\n"
                     "  - TimeDistributed: {layer: {Activation: {activation: tanh}}}\n"
                     "  - TimeDistributed: {layer: {GlobalAveragePooling1D: {}}}\n"
                     "  - Flatten: {}\n  - Dense: {units: 3}\n", 4},
    {"td_sequence", "input: {shape: [3, 6, 2]}\nlayers:\n"
                    "  - TimeDistributed: {layer: {Conv1D: {filters: 3, kernel_size: 2, "
                    "padding: same}}}\n"
                    "  - TimeDistributed: {layer: {LayerNormalization: {}}}\n"
                    "  - TimeDistributed: {layer: {ZeroPadding1D: {padding: 1}}}\n"
                    "  - TimeDistributed: {layer: {AveragePooling1D: {pool_size: 2}}}\n"
                    "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    {"td_masked", SEQ "  - Embedding: {input_dim: 10, output_dim: 3, mask_zero: true}\n"
                  "  - TimeDistributed: {layer: {Dense: {units: 4, activation: tanh}}}\n"
                  "  - TimeDistributed: {layer: {Dropout: {rate: 0.2}}}\n"
                  "  - LSTM: {units: 4}\n  - Dense: {units: 3}\n", 3},
    {"td_embedding", "input: {shape: [3, 4], dtype: int32}\nlayers:\n"
                     "  - TimeDistributed: {layer: {Embedding: {input_dim: 10, output_dim: 2}}}\n"
                     "  - TimeDistributed: {layer: {Flatten: {}}}\n"
                     "  - TimeDistributed: {layer: {Dense: {units: 2}}}\n"
                     "  - TimeDistributed: {layer: {ELU: {}}}\n"
                     "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    /* Conv3D first (the input's gradient): same padding at stride 2 with a bias and tanh,
     * dilation, groups */
    {"conv3d", "input: {shape: [4, 5, 4, 2]}\nlayers:\n"
               "  - Conv3D: {filters: 4, kernel_size: [2, 3, 2], strides: 2, padding: same, "
               "activation: tanh, bias_initializer: random_normal}\n"
               "  - Conv3D: {filters: 4, kernel_size: 2, dilation_rate: [1, 2, 1], groups: 2, "
               "padding: same}\n"
               "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    /* the 3-D poolings on the input (its gradient; a weight's moves every window's values at
     * once, near-ties of the max then beyond the checker's kink test): max (overlapping
     * windows, same padding), average (same padding: the padding not counted); the global
     * ones (keepdims) after a convolution on two branches */
    {"pooling3d", "input: {shape: [4, 5, 4, 2]}\nlayers:\n"
                  "  - MaxPooling3D: {pool_size: [2, 3, 2], strides: [1, 2, 1], padding: same}\n"
                  "  - AveragePooling3D: {name: ap, pool_size: [2, 2, 3], strides: [1, 2, 1], "
                  "padding: same, inputs: input}\n"
                  "  - Concatenate: {inputs: [max_pooling3d, ap]}\n"
                  "  - Conv3D: {filters: 3, kernel_size: 2, activation: tanh}\n"
                  "  - GlobalMaxPooling3D: {name: gm, keepdims: true}\n"
                  "  - GlobalAveragePooling3D: {name: ga, inputs: conv3d}\n"
                  "  - Flatten: {inputs: gm}\n  - Concatenate: {inputs: [flatten, ga]}\n"
                  "  - Dense: {units: 3}\n", 2},
    /* Conv3DTranspose on the input twice (its gradient added to by the second: the
     * scratch path): valid at stride 2, same at unequal strides with output_padding and no
     * bias; then dilation with same padding and tanh */
    {"conv3d_transpose", "input: {shape: [2, 3, 2, 2]}\nlayers:\n"
                         "  - Conv3DTranspose: {filters: 2, kernel_size: 2, strides: 2, "
                         "bias_initializer: random_normal}\n"
                         "  - Conv3DTranspose: {name: b, filters: 2, kernel_size: [3, 1, 2], "
                         "strides: [2, 2, 3], padding: same, output_padding: [1, 1, 2], "
                         "use_bias: false, inputs: input}\n"
                         "  - Cropping3D: {cropping: [[0, 0], [0, 0], [0, 1]], inputs: b}\n"
                         "  - Concatenate: {inputs: [conv3d_transpose, cropping3d]}\n"
                         "  - Conv3DTranspose: {filters: 2, kernel_size: 2, dilation_rate: "
                         "[2, 1, 1], padding: same, activation: tanh}\n"
                         "  - Flatten: {}\n  - Dense: {units: 3}\n", 2},
    /* EinsumDense first (the input's gradient): MultiHeadAttention's query projection with
     * a bias on the heads only (broadcast over the last axis), its output projection, a
     * projection of each step with tanh, and '...' in front */
    {"einsum_dense", "input: {shape: [4, 5]}\nlayers:\n"
                     "  - EinsumDense: {equation: \"abc,cde->abde\", output_shape: [null, 2, 3], "
                     "bias_axes: d, bias_initializer: random_normal}\n"
                     "  - EinsumDense: {equation: \"abde,deg->abg\", output_shape: [null, 3], "
                     "bias_axes: g, activation: tanh}\n"
                     "  - EinsumDense: {equation: \"...b,bc->...c\", output_shape: 2, "
                     "bias_axes: c, bias_initializer: random_normal}\n"
                     "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    /* EinsumDense with a shared letter (a GEMM per step), a kernel read transposed, one
     * permuted, and '...' at the end (the input and the output permuted, the bias (2, 1)) */
    {"einsum_shared", "input: {shape: [4, 5]}\nlayers:\n"
                      "  - EinsumDense: {equation: \"abc,bcd->abd\", output_shape: [4, 3], "
                      "bias_axes: bd, bias_initializer: random_normal}\n"
                      "  - EinsumDense: {equation: \"abc,dc->abd\", output_shape: [4, 3], "
                      "activation: tanh}\n"
                      "  - EinsumDense: {equation: \"abc,cdb->adb\", output_shape: [2, 4], "
                      "bias_axes: b, bias_initializer: random_normal}\n"
                      "  - EinsumDense: {equation: \"ab...,bc->ac...\", output_shape: 2, "
                      "bias_axes: c, bias_initializer: random_normal}\n"
                      "  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    /* EinsumDense with letters of the input alone, summed away: beside a shared letter with
     * a kernel that moves, and with a kernel read transposed */
    {"einsum_summed", "input: {shape: [3, 4, 5]}\nlayers:\n"
                      "  - EinsumDense: {name: s, equation: \"abcd,db->ab\", output_shape: [3], "
                      "bias_axes: b, bias_initializer: random_normal}\n"
                      "  - Reshape: {name: r, target_shape: [12, 5], inputs: input}\n"
                      "  - EinsumDense: {name: t, equation: \"abc,dc->ad\", output_shape: 4, "
                      "activation: tanh, inputs: r}\n"
                      "  - Concatenate: {inputs: [s, t]}\n  - Dense: {units: 3}\n", 3},
    /* the adaptive poolings on the input (its gradient): bins overlapping (6 to 4, 30 to 7,
     * 5 to 3 and 2), cells repeated (6 to 9, 30 to 40, 3 to 4, 2 to 3), 1-D and 3-D on the
     * input reshaped */
    {"adaptive_pooling", "input: {shape: [5, 6, 2]}\nlayers:\n"
                         "  - AdaptiveMaxPooling2D: {name: m2, output_size: [3, 4]}\n"
                         "  - AdaptiveAveragePooling2D: {name: a2, output_size: [2, 9], "
                         "inputs: input}\n"
                         "  - Reshape: {name: s, target_shape: [30, 2], inputs: input}\n"
                         "  - AdaptiveMaxPooling1D: {name: m1, output_size: 7}\n"
                         "  - AdaptiveAveragePooling1D: {name: a1, output_size: 40, inputs: s}\n"
                         "  - Reshape: {name: v, target_shape: [5, 3, 2, 2], inputs: input}\n"
                         "  - AdaptiveMaxPooling3D: {name: m3, output_size: [2, 2, 1]}\n"
                         "  - AdaptiveAveragePooling3D: {name: a3, output_size: [3, 4, 3], "
                         "inputs: v}\n"
                         "  - Flatten: {name: f1, inputs: m2}\n"
                         "  - Flatten: {name: f2, inputs: a2}\n"
                         "  - Flatten: {name: f3, inputs: m1}\n"
                         "  - Flatten: {name: f4, inputs: a1}\n"
                         "  - Flatten: {name: f5, inputs: m3}\n"
                         "  - Flatten: {name: f6, inputs: a3}\n"
                         "  - Concatenate: {inputs: [f1, f2, f3, f4, f5, f6]}\n"
                         "  - Dense: {units: 3}\n", 2},
    /* SpectralNormalization: the input's gradient through the wrapped layers, frozen (their
     * kernels' gradients are the plain layers' at the normalized kernel, which each training
     * forward re-normalizes: not the derivative of the loss in the stored kernel that central
     * differences measure; test_spectral_norm holds them to Keras's). 30 power steps make
     * sigma 1 to float precision after the first pass, so every pass sees the same kernel. */
    {"spectral_norm", IMG "  - SpectralNormalization: {trainable: false, power_iterations: 30, "
                      "layer: {Conv2D: {filters: 3, kernel_size: 3, activation: tanh}}}\n"
                      "  - Flatten: {}\n"
                      "  - SpectralNormalization: {trainable: false, power_iterations: 30, "
                      "layer: {Dense: {units: 4, activation: tanh}}}\n"
                      "  - Dense: {units: 3}\n", 3},
    /* STFTSpectrogram in each mode but angle (the input's and the kernels' gradients; near
     * re = im = 0 atan2's curvature puts central differences off by 2e-3 and more: Keras's
     * stft_angle fixture checks its gradients), channels last and first, valid and same
     * padding, expand_dims;
     * MelSpectrogram in decibels with the top_db floor active, and as magnitudes */
    {"spectrogram", "input: {shape: [24, 2]}\nlayers:\n"
                    "  - STFTSpectrogram: {name: a, frame_length: 16, frame_step: 8}\n"
                    "  - STFTSpectrogram: {name: b, mode: magnitude, frame_length: 6, "
                    "frame_step: 5, fft_length: 8, window: hamming, periodic: true, "
                    "padding: same, inputs: input}\n"
                    "  - Permute: {name: p, dims: [2, 1], inputs: input}\n"
                    "  - STFTSpectrogram: {name: c, mode: psd, frame_length: 8, "
                    "frame_step: 3, data_format: channels_first, expand_dims: true}\n"
                    "  - STFTSpectrogram: {name: d, mode: psd, frame_length: 8, "
                    "frame_step: 4, scaling: spectrum, inputs: input}\n"
                    "  - STFTSpectrogram: {name: e, mode: stft, frame_length: 5, "
                    "frame_step: 4, fft_length: 7, window: null, data_format: channels_first, "
                    "inputs: p}\n"
                    "  - STFTSpectrogram: {name: g, mode: real, frame_length: 8, "
                    "frame_step: 4, expand_dims: true, inputs: input}\n"
                    "  - STFTSpectrogram: {name: h, mode: imag, frame_length: 8, "
                    "frame_step: 4, padding: same, inputs: input}\n"
                    "  - Flatten: {name: f1, inputs: a}\n  - Flatten: {name: f2, inputs: b}\n"
                    "  - Flatten: {name: f3, inputs: c}\n  - Flatten: {name: f4, inputs: d}\n"
                    "  - Flatten: {name: f5, inputs: e}\n  - Flatten: {name: f6, inputs: g}\n"
                    "  - Flatten: {name: f7, inputs: h}\n"
                    "  - Concatenate: {inputs: [f1, f2, f3, f4, f5, f6, f7]}\n"
                    "  - Dense: {units: 3}\n", 3},
    {"mel_spectrogram", "input: {shape: [48]}\nlayers:\n"
                        "  - MelSpectrogram: {name: m, fft_length: 16, sequence_stride: 8, "
                        "sampling_rate: 4000, num_mel_bins: 4, top_db: 15.0}\n"
                        "  - MelSpectrogram: {name: n, fft_length: 16, sequence_stride: 6, "
                        "sequence_length: 12, sampling_rate: 4000, num_mel_bins: 3, "
                        "power_to_db: false, mag_exp: 1.0, inputs: input}\n"
                        "  - Flatten: {name: f8, inputs: m}\n  - Flatten: {name: f9, inputs: n}\n"
                        "  - Concatenate: {inputs: [f8, f9]}\n  - Dense: {units: 3}\n", 3},
    /* the preprocessing layers (no weights, no gradient to their input): the weights after
     * them, IntegerLookup's int32 indices into an Embedding, CategoryEncoding's counts and
     * Hashing's multi-hot of the token ids; Discretization's one-hot of float values */
    {"preprocessing_ids", SEQ "  - IntegerLookup: {name: v, vocabulary: [1, 3, 5, 7, 9]}\n"
                          "  - Embedding: {input_dim: 6, output_dim: 3}\n"
                          "  - Flatten: {name: p1}\n"
                          "  - CategoryEncoding: {num_tokens: 10, output_mode: count, "
                          "inputs: input}\n  - Dense: {units: 2, name: p2}\n"
                          "  - Hashing: {num_bins: 5, output_mode: multi_hot, inputs: input}\n"
                          "  - Dense: {units: 2, name: p3}\n"
                          "  - Concatenate: {inputs: [p1, p2, p3]}\n  - Dense: {units: 3}\n", 3},
    {"discretization", "input: {shape: [5]}\nlayers:\n"
                       "  - Discretization: {bin_boundaries: [-0.5, 0.1, 0.6], "
                       "output_mode: one_hot}\n  - Flatten: {}\n  - Dense: {units: 3}\n", 3},
    /* HashedCrossing's int32 bin ids into an Embedding and its one-hot of three inputs */
    {"hashed_crossing", "input: {shape: [1], dtype: int32}\nlayers:\n"
                        "  - Hashing: {name: h, num_bins: 7, inputs: input}\n"
                        "  - HashedCrossing: {num_bins: 6, inputs: [input, h]}\n"
                        "  - Embedding: {input_dim: 6, output_dim: 3}\n  - Flatten: {name: q1}\n"
                        "  - HashedCrossing: {num_bins: 5, output_mode: one_hot, "
                        "inputs: [input, h, input]}\n  - Dense: {units: 2, name: q2}\n"
                        "  - Concatenate: {inputs: [q1, q2]}\n  - Dense: {units: 3}\n", 4},
};

/* Token ids 1..9 with trailing padding (0) of 0, 1 or 2 steps per example. */
static void fill_ids(int32_t *ids, int batch, int steps)
{
    for (int b = 0; b < batch; b++)
        for (int t = 0; t < steps; t++)
            ids[b * steps + t] = t >= steps - b % 3 ? 0 : 1 + (b * 7 + t * 3) % 9;
}

static void *make_labels(tfc_model *m, int batch)
{
    int64_t rows = (int64_t)batch * tfc_model_label_rows(m);
    int classes = tfc_model_classes(m);
    if (tfc_model_loss_kind(m) == TFC_LOSS_SPARSE_CCE) {
        int32_t *l = malloc((size_t)rows * 4);
        for (int64_t r = 0; r < rows; r++) l[r] = (int32_t)((r * 5 + 1) % classes);
        return l;
    }
    float *l = malloc((size_t)(rows * classes) * 4);
    tfc_test_fill(l, rows * classes, 0, 1, 9);
    if (tfc_model_loss_kind(m) == TFC_LOSS_CCE)
        for (int64_t r = 0; r < rows; r++) { /* a distribution per row */
            double s = 0;
            for (int c = 0; c < classes; c++) s += l[r * classes + c];
            for (int c = 0; c < classes; c++) l[r * classes + c] /= (float)s;
        }
    if (tfc_model_loss_kind(m) == TFC_LOSS_BCE)
        for (int64_t i = 0; i < rows * classes; i++) l[i] = l[i] > 0.5f;
    return l;
}

/* The gradient check of one case, with every analytic gradient multiplied by `scale`. */
static gradcheck_result check_case(const gc_case *c, double scale)
{
    tfc_model *m = tfc_test_model(c->yaml);
    TFC_ASSERT(m != NULL);
    int64_t n = (int64_t)c->batch * tfc_shape_numel(tfc_model_input_shape(m));
    void *x = malloc((size_t)n * 4);
    if (tfc_model_input_dtype(m) == TFC_I32)
        fill_ids(x, c->batch, (int)tfc_shape_numel(tfc_model_input_shape(m)));
    else
        tfc_test_fill(x, n, -1, 1, 3);
    void *labels = make_labels(m, c->batch);
    gradcheck_result r = tfc_gradcheck_scaled(m, c->batch, x, labels, 40, 1, scale);
    free(x);
    free(labels);
    tfc_model_free(m);
    return r;
}

static void test_gradients(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const gc_case *c = &cases[i];
        if (getenv("TFC_CASE") && strcmp(getenv("TFC_CASE"), c->name)) continue; /* one */
        gradcheck_result r = check_case(c, 1.0);
        int ok = r.max_err < TFC_GRADCHECK_BOUND && r.checked > 10 &&
                 r.skipped < r.checked / 4 + 2 && r.null_dx_diff == 0;
        if (!ok || getenv("TFC_VERBOSE"))
            fprintf(stderr, "\n%s: max error %.3g at %s; %d checked, %d skipped; %lld weight "
                    "gradients differ without the input's\n", c->name, r.max_err, r.worst,
                    r.checked, r.skipped, (long long)r.null_dx_diff);
        CU_ASSERT(ok);
    }
}

/* The checker's own test: a uniform 2% error planted in every analytic gradient fails every
 * case (each has gradients above the checker's floor, so the error shows as ~1e-2). */
static void test_gradcheck_catches_2_percent(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        gradcheck_result r = check_case(&cases[i], 1.02);
        if (r.max_err < 2 * TFC_GRADCHECK_BOUND)
            fprintf(stderr, "\n%s: a 2%% error shows only as %.3g\n", cases[i].name, r.max_err);
        CU_ASSERT(r.max_err > 2 * TFC_GRADCHECK_BOUND);
    }
}

/* Mechanical coverage: every registered layer type appears in some gradient case. */
static void test_registry_covered(void)
{
    for (int i = 0; tfc_layer_registry[i]; i++) {
        char needle[64];
        snprintf(needle, sizeof needle, "- %s:", tfc_layer_registry[i]->type);
        int found = 0;
        for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
            found |= strstr(cases[k].yaml, needle) != NULL;
        if (!found) fprintf(stderr, "\nno gradient case for layer %s\n", tfc_layer_registry[i]->type);
        CU_ASSERT(found);
    }
}

/* ---- forward values against loops written here ---------------------------------------- */

typedef struct bound {
    tfc_model *m;
    tfc_backend *be;
} bound;

static bound bind(const char *yaml, int batch)
{
    bound b = {tfc_test_model(yaml), tfc_cpu_backend_create(1)};
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(b.m && tfc_model_bind(b.m, b.be, batch, &err) == TFC_OK);
    TFC_ASSERT(tfc_model_init_weights(b.m, 5, &err) == TFC_OK);
    return b;
}

static void unbind(bound b)
{
    tfc_model_free(b.m);
    tfc_backend_free(b.be);
}

static float *param(bound b, int layer, int p)
{
    tfc_param *pr = &tfc_model_layer(b.m, layer)->params[p];
    float *h = malloc((size_t)pr->numel * 4);
    tfc_model_param_download(b.m, pr, h);
    return h;
}

static float *forward(bound b, const void *x, int batch, int training)
{
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(tfc_model_forward(b.m, x, batch, training, 1, 0, &err) == TFC_OK);
    int64_t n = (int64_t)batch * tfc_shape_numel(tfc_model_output_shape(b.m));
    float *y = malloc((size_t)n * 4);
    tfc_model_get_output(b.m, y);
    return y;
}

/* TensorFlow SAME with stride 2 and an even kernel: the extra padding goes after. */
static void test_conv_same_stride2_even_values(void)
{
    const int N = 2, H = 5, W = 6, C = 2, KH = 2, KW = 4, F = 3, OH = 3, OW = 3;
    bound b = bind("input: {shape: [5, 6, 2]}\nlayers:\n"
                   "  - Conv2D: {filters: 3, kernel_size: [2, 4], strides: 2, padding: same,"
                   " bias_initializer: {type: random_normal, stddev: 1}}\nloss: mse\n", N);
    CU_ASSERT_EQUAL(tfc_model_output_shape(b.m)->dim[0], OH);
    float x[2 * 5 * 6 * 2];
    tfc_test_fill(x, N * H * W * C, -1, 1, 11);
    float *k = param(b, 0, 0), *bias = param(b, 0, 1), *y = forward(b, x, N, 0);
    /* pad_h = (3-1)*2 + 2 - 5 = 1 -> top 0; pad_w = (3-1)*2 + 4 - 6 = 2 -> left 1. */
    int pt = 0, pl = 1;
    double worst = 0;
    for (int n = 0; n < N; n++)
        for (int i = 0; i < OH; i++)
            for (int j = 0; j < OW; j++)
                for (int f = 0; f < F; f++) {
                    double s = bias[f];
                    for (int u = 0; u < KH; u++)
                        for (int v = 0; v < KW; v++)
                            for (int c = 0; c < C; c++) {
                                int hi = i * 2 + u - pt, wi = j * 2 + v - pl;
                                if (hi < 0 || hi >= H || wi < 0 || wi >= W) continue;
                                s += x[((n * H + hi) * W + wi) * C + c] * k[((u * KW + v) * C + c) * F + f];
                            }
                    worst = fmax(worst, fabs(s - y[((n * OH + i) * OW + j) * F + f]));
                }
    CU_ASSERT(worst < 1e-5);
    free(k);
    free(bias);
    free(y);
    unbind(b);
}

/* Flatten keeps NHWC order: element (h, w, c) lands at (h * W + w) * C + c. */
static void test_flatten_nhwc(void)
{
    bound b = bind("input: {shape: [2, 3, 4]}\nlayers:\n  - Flatten: {}\n", 2);
    float x[48];
    for (int i = 0; i < 48; i++) x[i] = (float)i;
    float *y = forward(b, x, 2, 0);
    int same = 1;
    for (int n = 0; n < 2; n++)
        for (int h = 0; h < 2; h++)
            for (int w = 0; w < 3; w++)
                for (int c = 0; c < 4; c++)
                    same &= y[n * 24 + (h * 3 + w) * 4 + c] == x[n * 24 + (h * 3 + w) * 4 + c];
    CU_ASSERT(same);
    free(y);
    unbind(b);
}

static double sigm(double v) { return 1 / (1 + exp(-v)); }

/* Embedding + LSTM with a mask against Keras's equations; masked steps repeat the state. */
static void test_lstm_masked_values(void)
{
    const int N = 3, T = 6, E = 3, U = 4;
    bound b = bind(SEQ "  - Embedding: {input_dim: 10, output_dim: 3, mask_zero: true}\n"
                   "  - LSTM: {units: 4, return_sequences: true}\n", N);
    int32_t ids[18];
    fill_ids(ids, N, T);
    float *emb = param(b, 0, 0), *k = param(b, 1, 0), *r = param(b, 1, 1), *bias = param(b, 1, 2);
    float *y = forward(b, ids, N, 0);
    double worst = 0;
    for (int n = 0; n < N; n++) {
        double h[4] = {0}, c[4] = {0};
        for (int t = 0; t < T; t++) {
            int id = ids[n * T + t];
            if (id != 0) {
                double z[16];
                for (int g = 0; g < 4 * U; g++) {
                    z[g] = bias[g];
                    for (int e = 0; e < E; e++) z[g] += emb[id * E + e] * k[e * 4 * U + g];
                    for (int u = 0; u < U; u++) z[g] += h[u] * r[u * 4 * U + g];
                }
                for (int u = 0; u < U; u++) {
                    double ig = sigm(z[u]), fg = sigm(z[U + u]), gg = tanh(z[2 * U + u]),
                           og = sigm(z[3 * U + u]);
                    c[u] = fg * c[u] + ig * gg;
                    h[u] = og * tanh(c[u]);
                }
            }
            for (int u = 0; u < U; u++) worst = fmax(worst, fabs(h[u] - y[(n * T + t) * U + u]));
        }
    }
    CU_ASSERT(worst < 1e-5);
    /* unit_forget_bias: the forget gate's quarter starts at 1. */
    CU_ASSERT_EQUAL(bias[U], 1.f);
    CU_ASSERT_EQUAL(bias[0], 0.f);
    free(emb); free(k); free(r); free(bias); free(y);
    unbind(b);
}

/* BatchNormalization: batch statistics and the moving update in training, moving
 * statistics at inference, Keras's epsilon 1e-3 and momentum 0.99. */
static void test_batchnorm_values(void)
{
    const int N = 5, C = 3;
    bound b = bind("input: {shape: [3]}\nlayers:\n  - BatchNormalization: {}\n", N);
    float x[15];
    tfc_test_fill(x, N * C, -2, 3, 4);
    float *y = forward(b, x, N, 1);
    float *mm = param(b, 0, 2), *mv = param(b, 0, 3);
    double worst = 0;
    for (int c = 0; c < C; c++) {
        double mean = 0, var = 0;
        for (int n = 0; n < N; n++) mean += x[n * C + c] / N;
        for (int n = 0; n < N; n++) var += (x[n * C + c] - mean) * (x[n * C + c] - mean) / N;
        for (int n = 0; n < N; n++)
            worst = fmax(worst, fabs((x[n * C + c] - mean) / sqrt(var + 1e-3) - y[n * C + c]));
        worst = fmax(worst, fabs(mm[c] - 0.01 * mean));
        worst = fmax(worst, fabs(mv[c] - (0.99 + 0.01 * var)));
    }
    CU_ASSERT(worst < 1e-5);
    free(y);
    y = forward(b, x, N, 0);
    double worst_inf = 0;
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++)
            worst_inf = fmax(worst_inf, fabs((x[n * C + c] - mm[c]) / sqrt(mv[c] + 1e-3) - y[n * C + c]));
    CU_ASSERT(worst_inf < 1e-5);
    free(y); free(mm); free(mv);
    unbind(b);
}

/* Pooling with SAME padding: the padded cells neither win a max nor count in an average. */
static void test_pooling_same_values(void)
{
    const int H = 5, W = 5, O = 3;
    float x[25];
    tfc_test_fill(x, 25, -3, -1, 8); /* all negative: a zero pad would win a max */
    for (int avg = 0; avg < 2; avg++) {
        bound b = bind(avg ? "input: {shape: [5, 5, 1]}\nlayers:\n  - AveragePooling2D: {pool_size: 3, strides: 2, padding: same}\nloss: mse\n"
                           : "input: {shape: [5, 5, 1]}\nlayers:\n  - MaxPooling2D: {pool_size: 3, strides: 2, padding: same}\nloss: mse\n", 1);
        float *y = forward(b, x, 1, 0);
        double worst = 0; /* total pad = (3-1)*2 + 3 - 5 = 2: one before */
        for (int i = 0; i < O; i++)
            for (int j = 0; j < O; j++) {
                double best = -1e30, sum = 0;
                int count = 0;
                for (int u = 0; u < 3; u++)
                    for (int v = 0; v < 3; v++) {
                        int hi = i * 2 + u - 1, wi = j * 2 + v - 1;
                        if (hi < 0 || hi >= H || wi < 0 || wi >= W) continue;
                        best = fmax(best, x[hi * W + wi]);
                        sum += x[hi * W + wi];
                        count++;
                    }
                worst = fmax(worst, fabs((avg ? sum / count : best) - y[i * O + j]));
            }
        CU_ASSERT(worst < 1e-6);
        free(y);
        unbind(b);
    }
}

/* Inverted dropout: about `rate` of the outputs are zero, survivors are scaled by
 * 1/(1-rate); at inference it is the identity. */
static void test_dropout_values(void)
{
    const int N = 100, D = 100;
    bound b = bind("input: {shape: [100]}\nlayers:\n  - Dropout: {rate: 0.3}\n", N);
    float *x = malloc(N * D * 4);
    tfc_test_fill(x, N * D, 1, 2, 6);
    float *y = forward(b, x, N, 1);
    int zeros = 0, scaled = 1;
    for (int i = 0; i < N * D; i++) {
        if (y[i] == 0) zeros++;
        else scaled &= fabsf(y[i] - x[i] / 0.7f) < 1e-5f;
    }
    CU_ASSERT(scaled);
    CU_ASSERT(zeros > 2700 && zeros < 3300);
    free(y);
    y = forward(b, x, N, 0);
    CU_ASSERT(memcmp(x, y, N * D * 4) == 0);
    free(y);
    free(x);
    unbind(b);
}

/* Dense on a sequence applies the same kernel at every step; Embedding rows are table rows. */
static void test_dense_embedding_values(void)
{
    bound b = bind("input: {shape: [4], dtype: int32}\nlayers:\n"
                   "  - Embedding: {input_dim: 10, output_dim: 3}\n  - Dense: {units: 2}\n", 2);
    int32_t ids[8] = {1, 2, 3, 9, 0, 5, 5, 7};
    float *emb = param(b, 0, 0), *k = param(b, 1, 0), *y = forward(b, ids, 2, 0);
    double worst = 0;
    for (int r = 0; r < 8; r++)
        for (int u = 0; u < 2; u++) {
            double s = 0;
            for (int e = 0; e < 3; e++) s += emb[ids[r] * 3 + e] * k[e * 2 + u];
            worst = fmax(worst, fabs(s - y[r * 2 + u]));
        }
    CU_ASSERT(worst < 1e-6);
    /* Embedding weights follow Keras's uniform(-0.05, 0.05). */
    int in_range = 1;
    for (int i = 0; i < 30; i++) in_range &= emb[i] >= -0.05f && emb[i] <= 0.05f;
    CU_ASSERT(in_range);
    /* Ids outside [0, input_dim) are a data error, not a crash. */
    int32_t bad[8] = {1, 2, 3, 10, 0, 0, 0, 0};
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_forward(b.m, bad, 2, 0, 1, 0, &err), TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "token id 10 at position 3 is outside [0, 10)"));
    free(emb); free(k); free(y);
    unbind(b);
}

/* The loss of a masked sequence averages over real steps only; the fused softmax loss
 * equals -log p[label]; accuracy counts argmax hits. */
static void test_masked_loss_values(void)
{
    const int N = 3, T = 6, V = 5;
    bound b = bind(SEQ "  - Embedding: {input_dim: 10, output_dim: 3, mask_zero: true}\n"
                   "  - LSTM: {units: 4, return_sequences: true}\n"
                   "  - Dense: {units: 5, activation: softmax}\nmetrics: [accuracy]\n", N);
    int32_t ids[18], labels[18];
    fill_ids(ids, N, T);
    for (int i = 0; i < N * T; i++) labels[i] = (i * 3) % V;
    float *p = forward(b, ids, N, 0);
    double sum = 0, hits = 0;
    int count = 0;
    for (int r = 0; r < N * T; r++) {
        if (!ids[r]) continue;
        sum += -log(p[r * V + labels[r]]);
        int best = 0;
        for (int v = 1; v < V; v++) if (p[r * V + v] > p[r * V + best]) best = v;
        hits += best == labels[r];
        count++;
    }
    tfc_error err;
    tfc_error_clear(&err);
    tfc_batch_result res;
    CU_ASSERT_EQUAL_FATAL(tfc_model_loss(b.m, labels, 0, &res, &err), TFC_OK);
    CU_ASSERT_EQUAL(res.count, count);
    CU_ASSERT(count == 18 - 3); /* one example each with 0, 1 and 2 padded steps */
    CU_ASSERT(fabs(res.loss - sum / count) < 1e-5);
    CU_ASSERT(fabs(res.metric[0] - hits / count) < 1e-9);
    /* A label outside the classes is a data error naming the example. */
    labels[7] = 5;
    CU_ASSERT_EQUAL(tfc_model_loss(b.m, labels, 0, &res, &err), TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "example 1 of the batch: label 5 is outside [0, 5)"));
    free(p);
    unbind(b);
}

/* Initializers: same seed same weights, another seed others; Glorot's limit; orthogonal
 * recurrent kernels have orthonormal rows. */
/* Keras's initializer seed: a seeded weight is drawn from its seed alone, the same whatever
 * the solver's seed and for two weights of one shape and one seed (as Keras's seeded
 * initializer gives); another seed draws other values; an unseeded weight follows the solver's
 * seed. In both of Keras's forms, and a seed that is no integer is an error naming it. */
static void test_seeded_initializers(void)
{
    const char *y = "input: {shape: [8]}\nlayers:\n"
                    "  - Dense: {units: 4, kernel_initializer: {class_name: RandomNormal,"
                    " config: {stddev: 0.02, seed: 42}}}\n"
                    "  - Dense: {units: 4, kernel_initializer: {type: random_normal,"
                    " stddev: 0.02, seed: 42}}\n"
                    "  - Dense: {units: 4, kernel_initializer: {type: he_normal, seed: -3}}\n"
                    "  - Dense: {units: 4, kernel_initializer: {type: random_normal,"
                    " stddev: 0.02, seed: 43}}\n"
                    "  - Dense: {units: 4, kernel_initializer: {type: random_normal,"
                    " stddev: 0.02}}\n";
    float *k[2][5];
    for (int run = 0; run < 2; run++) {
        bound b = {tfc_test_model(y), tfc_cpu_backend_create(1)};
        tfc_error err;
        tfc_error_clear(&err);
        TFC_ASSERT(b.m && tfc_model_bind(b.m, b.be, 1, &err) == TFC_OK);
        TFC_ASSERT(tfc_model_init_weights(b.m, run ? 99 : 5, &err) == TFC_OK);
        for (int i = 0; i < 5; i++) k[run][i] = param(b, i, 0);
        unbind(b);
    }
    const size_t bytes = 16 * sizeof(float); /* the 4 x 4 kernels after the first */
    CU_ASSERT(memcmp(k[0][1], k[1][1], bytes) == 0); /* the solver's seed changes nothing */
    CU_ASSERT(memcmp(k[0][2], k[1][2], bytes) == 0);
    CU_ASSERT(memcmp(k[0][3], k[1][3], bytes) == 0);
    CU_ASSERT(memcmp(k[0][1], k[0][3], bytes) != 0); /* seed 43 is another draw */
    CU_ASSERT(memcmp(k[0][4], k[1][4], bytes) != 0); /* unseeded: the solver's seed */
    CU_ASSERT(memcmp(k[0][0], k[1][0], 32 * sizeof(float)) == 0);
    for (int run = 0; run < 2; run++)
        for (int i = 0; i < 5; i++) free(k[run][i]);
    /* one seed and one shape: the same values in two layers, as Keras's */
    const char *twice = "input: {shape: [4]}\nlayers:\n"
                        "  - Dense: {units: 4, kernel_initializer: {type: glorot_uniform,"
                        " seed: 7}}\n"
                        "  - Dense: {units: 4, kernel_initializer: {class_name: GlorotUniform,"
                        " config: {seed: 7}}}\n";
    bound b = bind(twice, 1);
    float *a = param(b, 0, 0), *c = param(b, 1, 0);
    CU_ASSERT(memcmp(a, c, bytes) == 0);
    free(a), free(c);
    unbind(b);
    tfc_test_expect_model_error("input: {shape: [4]}\nlayers:\n  - Dense: {units: 2,"
                                " kernel_initializer: {type: he_normal, seed: lucky}}\n",
                                "layers[0].Dense.kernel_initializer.seed");
}

static void test_initializers(void)
{
    const char *y = "input: {shape: [6, 8]}\nlayers:\n  - LSTM: {units: 5}\n  - Dense: {units: 3}\n";
    bound a = bind(y, 1), b = bind(y, 1);
    float *k1 = param(a, 0, 0), *k2 = param(b, 0, 0), *r = param(a, 0, 1);
    CU_ASSERT(memcmp(k1, k2, 8 * 20 * 4) == 0);
    double limit = sqrt(6.0 / (8 + 20)), worst = 0;
    int in_range = 1;
    for (int i = 0; i < 160; i++) in_range &= fabs(k1[i]) <= limit;
    CU_ASSERT(in_range);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 5; j++) {
            double dot = 0;
            for (int c = 0; c < 20; c++) dot += (double)r[i * 20 + c] * r[j * 20 + c];
            worst = fmax(worst, fabs(dot - (i == j)));
        }
    CU_ASSERT(worst < 1e-5);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model_init_weights(b.m, 6, &err);
    free(k2);
    k2 = param(b, 0, 0);
    CU_ASSERT(memcmp(k1, k2, 8 * 20 * 4) != 0);
    free(k1); free(k2); free(r);
    unbind(a);
    unbind(b);
}

/* ---- inference chains (graph.c) ---------------------------------------------------------- */

/* The model of `yaml` on a CPU backend of `threads`, bound for n and initialised, as run
 * `run` of a chain test: 0 chains in the training layout, 1 no chains (TFC_FUSE=0), 2
 * chains in the inference layout. */
static bound bind_chains(const char *yaml, int run, int n, int threads)
{
    if (run == 1) setenv("TFC_FUSE", "0", 1);
    bound b = {tfc_test_model(yaml), tfc_cpu_backend_create(threads)};
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(b.m);
    CU_ASSERT_EQUAL_FATAL(run == 2 ? tfc_model_bind_inference(b.m, b.be, n, &err)
                                   : tfc_model_bind(b.m, b.be, n, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_init_weights(b.m, 5, &err), TFC_OK);
    if (run == 1) unsetenv("TFC_FUSE");
    return b;
}

/* The inference output (n rows of `classes`) of a model from bind_chains for input x; the
 * model is unbound. */
static float *chains_output(bound b, const float *x, int n, int classes)
{
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_forward(b.m, x, n, 0, 0, 0, &err), TFC_OK);
    float *out = malloc(sizeof(float) * (size_t)classes * (size_t)n);
    TFC_ASSERT(out);
    tfc_model_get_output(b.m, out);
    unbind(b);
    return out;
}

/* At inference a convolution applies the BatchNormalization, the Add and the Activation
 * layer that alone read its output (conv -> BN -> ReLU, conv -> tanh, conv -> BN, the 1x1
 * stride-2 convolution oneDNN refuses -> BN -> ReLU, conv -> BN -> Add(an earlier output)
 * -> ReLU, conv -> Add); a convolution with its own activation, a BN read by an Add whose
 * other input comes later, and a last layer whose softmax the loss reads stay as they are.
 * The chains are the expected ones, and the output equals, bit for bit, that of the same
 * model with TFC_FUSE=0 (every layer on its own), with random normalisation statistics,
 * in the training layout and in the inference layout. */
static void test_inference_chains(void)
{
    static const char yaml[] =
        "name: chains\n"
        "input: {shape: [9, 9, 3]}\n"
        "layers:\n"
        "  - Conv2D: {name: c1, filters: 8, kernel_size: 3, padding: same, use_bias: false}\n"
        "  - BatchNormalization: {name: b1}\n"
        "  - Activation: {name: r1, activation: relu6}\n"
        "  - Conv2D: {name: c2, filters: 8, kernel_size: 3, padding: same}\n"
        "  - Activation: {name: t2, activation: tanh}\n"
        "  - Conv2D: {name: c3, filters: 8, kernel_size: 3, padding: same}\n"
        "  - BatchNormalization: {name: b3}\n"
        "  - Add: {name: a3, inputs: [b3, r1]}\n"
        "  - Conv2D: {name: c4, filters: 8, kernel_size: 1, strides: 2, use_bias: false}\n"
        "  - BatchNormalization: {name: b4}\n"
        "  - Activation: {name: r4, activation: relu}\n"
        "  - Conv2D: {name: c5, filters: 4, kernel_size: 3, activation: relu}\n"
        "  - BatchNormalization: {name: b5}\n"
        "  - Conv2D: {name: c6, filters: 4, kernel_size: 3, padding: same, inputs: b5}\n"
        "  - BatchNormalization: {name: b6}\n"
        "  - Conv2D: {name: c6p, filters: 4, kernel_size: 1, inputs: b5}\n"
        "  - BatchNormalization: {name: b6p}\n"
        "  - Add: {name: a6, inputs: [b6, b6p]}\n"
        "  - Activation: {name: r6, activation: relu}\n"
        "  - Conv2D: {name: c7, filters: 4, kernel_size: 3, padding: same}\n"
        "  - Add: {name: a7, inputs: [r6, c7]}\n"
        "  - Flatten: {}\n"
        "  - Dropout: {rate: 0.5}\n"
        "  - Dense: {units: 5, activation: softmax}\n"
        "loss: sparse_categorical_crossentropy\n";
    const int n = 6, nl = 24;
    float *out[3];
    /* run 0: chains, training layout; 1: TFC_FUSE=0; 2: chains, inference layout */
    for (int run = 0; run < 3; run++) {
        bound b = bind_chains(yaml, run, n, 1);
        tfc_error err;
        tfc_error_clear(&err);
        /* the chains as planned: c1-b1-r1, c2-t2, c3-b3-a3(+r1), c4-b4-r4, c6-b6 (a6's other
         * input comes later), c6p-b6p-a6(+b6)-r6, c7-a7(+r6) */
        int chains = 0, skips = 0;
        for (int i = 0; i < nl; i++) {
            chains += b.m->bound[i].chain_end != i;
            skips += b.m->bound[i].skip;
        }
        CU_ASSERT_EQUAL(chains, run == 1 ? 0 : 7);
        CU_ASSERT_EQUAL(skips, run == 1 ? 0 : 12);
        if (run != 1) {
            const tfc_bound *c = b.m->bound;
            CU_ASSERT(c[0].chain_end == 2 && c[0].chain_bn == 1 && c[0].chain_res < 0);
            CU_ASSERT(c[0].chain_act == TFC_ACT_RELU6);
            CU_ASSERT(c[3].chain_end == 4 && c[3].chain_act == TFC_ACT_TANH);
            CU_ASSERT(c[5].chain_end == 7 && c[5].chain_bn == 6 && c[5].chain_res == 2);
            CU_ASSERT(c[5].chain_act == TFC_ACT_LINEAR);
            CU_ASSERT(c[8].chain_end == 10 && c[8].chain_act == TFC_ACT_RELU);
            CU_ASSERT_EQUAL(c[11].chain_end, 11);
            CU_ASSERT(c[13].chain_end == 14 && c[13].chain_res < 0);
            CU_ASSERT(c[15].chain_end == 18 && c[15].chain_bn == 16 && c[15].chain_res == 14);
            CU_ASSERT(c[19].chain_end == 20 && c[19].chain_bn < 0 && c[19].chain_res == 18);
        }
        /* random normalisation statistics, the same in every run */
        srand(11);
        for (int i = 0; i < nl; i++) {
            tfc_layer *l = tfc_model_layer(b.m, i);
            for (int p = 0; p < l->nparams; p++) {
                tfc_param *pr = &l->params[p];
                if (strcmp(l->ops->type, "BatchNormalization")) continue;
                float *h = malloc((size_t)pr->numel * 4);
                int var = !strcmp(pr->name, "moving_variance");
                for (int64_t k = 0; k < pr->numel; k++)
                    h[k] = var ? 0.1f + 1.9f * (float)rand() / (float)RAND_MAX
                               : -1.0f + 2.0f * (float)rand() / (float)RAND_MAX;
                tfc_model_param_upload(b.m, pr, h);
                free(h);
            }
        }
        float x[6 * 9 * 9 * 3];
        for (size_t k = 0; k < sizeof x / sizeof *x; k++)
            x[k] = -1.0f + 2.0f * (float)rand() / (float)RAND_MAX;
        out[run] = chains_output(b, x, n, 5);
    }
    CU_ASSERT_EQUAL(memcmp(out[0], out[1], sizeof(float) * 5 * n), 0);
    CU_ASSERT_EQUAL(memcmp(out[2], out[1], sizeof(float) * 5 * n), 0);
    free(out[0]), free(out[1]), free(out[2]);
}

/* Two training steps (forward, loss, backward, an SGD update) of a model on two threads
 * with the training folds (run 0) and with TFC_FUSE=0 (run 1), each bound with init seed
 * `seed`: check(model, run) asserts the folds planned; then the two runs must give the
 * same losses, gradients, parameters and (out > 0: out floats an example) inference
 * outputs bit for bit, and no layer reads as non-finite. */
static void train_against_unfolded(const char *yaml, int n, const float *x,
                                   const int32_t *labels, uint64_t seed, int out,
                                   void (*check)(const tfc_model *m, int run))
{
    float *res[2][3] = {{NULL}};
    double loss[2][2];
    for (int run = 0; run < 2; run++) { /* 0: folds, 1: TFC_FUSE=0 */
        if (run == 1) setenv("TFC_FUSE", "0", 1);
        bound b = {tfc_test_model(yaml), tfc_cpu_backend_create(2)};
        tfc_error err;
        tfc_error_clear(&err);
        CU_ASSERT_EQUAL_FATAL(tfc_model_bind(b.m, b.be, n, &err), TFC_OK);
        CU_ASSERT_EQUAL_FATAL(tfc_model_init_weights(b.m, seed, &err), TFC_OK);
        if (run == 1) unsetenv("TFC_FUSE");
        check(b.m, run);
        const int64_t np = tfc_model_param_count(b.m), ng = tfc_model_trainable_count(b.m);
        for (int step = 0; step < 2; step++) {
            tfc_batch_result r;
            CU_ASSERT_EQUAL_FATAL(tfc_model_forward(b.m, x, n, 1, 9, (uint64_t)step, &err), TFC_OK);
            CU_ASSERT_EQUAL_FATAL(tfc_model_loss(b.m, labels, 1, &r, &err), TFC_OK);
            loss[run][step] = r.loss;
            CU_ASSERT_EQUAL(tfc_model_first_nonfinite(b.m), -1);
            tfc_model_zero_grad(b.m);
            tfc_model_backward(b.m);
            b.be->ops->axpy(b.be, ng, -0.1f, tfc_model_grads(b.m), tfc_model_params(b.m));
        }
        res[run][0] = malloc(sizeof(float) * (size_t)ng);
        res[run][1] = malloc(sizeof(float) * (size_t)np);
        if (out > 0) res[run][2] = forward(b, x, n, 0);
        b.be->ops->download(b.be, res[run][0], tfc_model_grads(b.m), (size_t)ng * 4);
        b.be->ops->download(b.be, res[run][1], tfc_model_params(b.m), (size_t)np * 4);
        if (run == 1) {
            CU_ASSERT(loss[0][0] == loss[1][0] && loss[0][1] == loss[1][1]);
            CU_ASSERT_EQUAL(memcmp(res[0][0], res[1][0], sizeof(float) * (size_t)ng), 0);
            CU_ASSERT_EQUAL(memcmp(res[0][1], res[1][1], sizeof(float) * (size_t)np), 0);
            if (out > 0)
                CU_ASSERT_EQUAL(memcmp(res[0][2], res[1][2], sizeof(float) * (size_t)out * n), 0);
        }
        unbind(b);
    }
    CU_ASSERT(loss[0][1] != loss[0][0]); /* the first step moved the parameters */
    for (int run = 0; run < 2; run++)
        for (int k = 0; k < 3; k++) free(res[run][k]);
}

/* c1 -> p1, c2 -> p2, c3 -> p3 folded (run 0), not c4; none with TFC_FUSE=0 */
static void pool_folds_planned(const tfc_model *m, int run)
{
    int folds = 0;
    for (int i = 0; i < m->nlayers; i++) folds += m->bound[i].relu_pool >= 0;
    CU_ASSERT_EQUAL(folds, run ? 0 : 3);
    if (!run) {
        CU_ASSERT(m->bound[0].relu_pool == 1 && m->bound[1].pool_relu_of == 0);
        CU_ASSERT(m->bound[2].relu_pool == 3 && m->bound[4].relu_pool == 5);
        CU_ASSERT(m->bound[6].relu_pool == -1 && m->bound[7].pool_relu_of == -1);
    }
}

/* In training a layer's own ReLU whose output only a pooling layer reads has its derivative
 * taken in the pooling's backward (c1 -> p1 2x2 max, c2 -> p2 overlapping 3x3 max at stride
 * 1, c3 -> p3 average); a linear c4 before p4 stays as it is. Two training steps on two
 * threads give the same loss, gradients and parameters, bit for bit, as with TFC_FUSE=0. */
static void test_training_pool_relu_folds(void)
{
    static const char yaml[] =
        "name: pool_folds\n"
        "input: {shape: [8, 8, 3]}\n"
        "layers:\n"
        "  - Conv2D: {name: c1, filters: 4, kernel_size: 3, padding: same, activation: relu}\n"
        "  - MaxPooling2D: {name: p1, pool_size: 2}\n"
        "  - Conv2D: {name: c2, filters: 4, kernel_size: 3, padding: same, activation: relu}\n"
        "  - MaxPooling2D: {name: p2, pool_size: 3, strides: 1, padding: same}\n"
        "  - Conv2D: {name: c3, filters: 4, kernel_size: 3, padding: same, activation: relu}\n"
        "  - AveragePooling2D: {name: p3, pool_size: 2}\n"
        "  - Conv2D: {name: c4, filters: 4, kernel_size: 1}\n"
        "  - MaxPooling2D: {name: p4, pool_size: 2}\n"
        "  - Flatten: {}\n"
        "  - Dense: {units: 5, activation: softmax}\n"
        "loss: sparse_categorical_crossentropy\n";
    float x[6 * 8 * 8 * 3];
    int32_t labels[6];
    tfc_test_fill(x, (int)(sizeof x / sizeof *x), -1, 1, 4);
    for (int i = 0; i < 6; i++) labels[i] = (i * 3) % 5;
    train_against_unfolded(yaml, 6, x, labels, 3, 0, pool_folds_planned);
}

/* b1 -> r1, a2 -> r2 and a5 -> r5 folded (run 0), none with TFC_FUSE=0 */
static void relu_folds_planned(const tfc_model *m, int run)
{
    int folds = 0;
    for (int i = 0; i < m->nlayers; i++) folds += m->bound[i].relu_into >= 0;
    CU_ASSERT_EQUAL(folds, run ? 0 : 3);
    if (!run) {
        CU_ASSERT_EQUAL(m->bound[1].relu_into, 2);
        CU_ASSERT_EQUAL(m->bound[5].relu_into, 6);
        CU_ASSERT_EQUAL(m->bound[12].relu_into, 13);
        CU_ASSERT(m->bound[2].relu_done && m->bound[6].relu_done);
        CU_ASSERT(m->bound[13].relu_done);
    }
}

/* In training a BatchNormalization or Add whose output only a ReLU Activation reads writes
 * that ReLU's output itself (b1 -> r1, a2 -> r2, the three-input a5 -> r5); a BN before an
 * Add, a tanh, a BN read twice stay as they are. Two training steps (forward, loss,
 * backward, an SGD update) on two threads give the same loss, gradients and parameters,
 * bit for bit, as with TFC_FUSE=0, and no layer reads as non-finite. */
static void test_training_relu_folds(void)
{
    static const char yaml[] =
        "name: folds\n"
        "input: {shape: [6, 6, 3]}\n"
        "layers:\n"
        "  - Conv2D: {name: c1, filters: 8, kernel_size: 3, padding: same, use_bias: false}\n"
        "  - BatchNormalization: {name: b1}\n"
        "  - Activation: {name: r1, activation: relu}\n"
        "  - Conv2D: {name: c2, filters: 8, kernel_size: 3, padding: same}\n"
        "  - BatchNormalization: {name: b2}\n"
        "  - Add: {name: a2, inputs: [b2, r1]}\n"
        "  - Activation: {name: r2, activation: relu}\n"
        "  - Conv2D: {name: c3, filters: 8, kernel_size: 3, padding: same}\n"
        "  - BatchNormalization: {name: b3}\n"
        "  - Activation: {name: t3, activation: tanh}\n"
        "  - BatchNormalization: {name: b4}\n"
        "  - Activation: {name: r4, activation: relu}\n"
        "  - Add: {name: a5, inputs: [r4, b4, r2]}\n"
        "  - Activation: {name: r5, activation: relu}\n"
        "  - Flatten: {}\n"
        "  - Dense: {units: 5, activation: softmax}\n"
        "loss: sparse_categorical_crossentropy\n";
    float x[7 * 6 * 6 * 3];
    int32_t labels[7];
    tfc_test_fill(x, (int)(sizeof x / sizeof *x), -1, 1, 3);
    for (int i = 0; i < 7; i++) labels[i] = (i * 2) % 5;
    train_against_unfolded(yaml, 7, x, labels, 5, 5, relu_folds_planned);
}

/* tfc_model_zero_grad is lazy (graph.c): a Dense writes its parameters' gradients at the
 * step's first backward, other layers' are zeroed then, and a read before any backward
 * zeroes them. Against that: a second backward without zero_grad adds (2 g), one after it
 * starts again (g, bit for bit), and grads read right after zero_grad are zeros. */
static void test_lazy_zero_grad(void)
{
    static const char yaml[] =
        "name: lazy\ninput: {shape: [6]}\nlayers:\n"
        "  - Dense: {units: 8, activation: relu}\n"
        "  - BatchNormalization: {}\n"
        "  - Dense: {units: 3, activation: softmax}\n"
        "loss: sparse_categorical_crossentropy\n";
    const int n = 5;
    float x[5 * 6];
    int32_t labels[5] = {0, 1, 2, 1, 0};
    tfc_test_fill(x, 30, -1, 1, 4);
    bound b = {tfc_test_model(yaml), tfc_cpu_backend_create(2)};
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(b.m, b.be, n, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_init_weights(b.m, 3, &err), TFC_OK);
    const int64_t ng = tfc_model_trainable_count(b.m);
    float *g[3];
    for (int k = 0; k < 3; k++) g[k] = malloc(sizeof(float) * (size_t)ng);
    for (int k = 0; k < 3; k++) { /* zero, backward; backward again; zero, backward */
        tfc_batch_result r;
        CU_ASSERT_EQUAL_FATAL(tfc_model_forward(b.m, x, n, 1, 9, 0, &err), TFC_OK);
        CU_ASSERT_EQUAL_FATAL(tfc_model_loss(b.m, labels, 1, &r, &err), TFC_OK);
        if (k != 1) tfc_model_zero_grad(b.m);
        tfc_model_backward(b.m);
        b.be->ops->download(b.be, g[k], tfc_model_grads(b.m), (size_t)ng * 4);
    }
    int64_t doubled = 0, nonzero = 0;
    for (int64_t i = 0; i < ng; i++) {
        doubled += fabsf(g[1][i] - 2 * g[0][i]) <= 1e-6f * (1 + fabsf(g[0][i]));
        nonzero += g[0][i] != 0;
    }
    CU_ASSERT_EQUAL(doubled, ng);
    CU_ASSERT(nonzero > ng / 2);
    CU_ASSERT_EQUAL(memcmp(g[0], g[2], sizeof(float) * (size_t)ng), 0);
    tfc_model_zero_grad(b.m);
    b.be->ops->download(b.be, g[1], tfc_model_grads(b.m), (size_t)ng * 4);
    int64_t zeros = 0;
    for (int64_t i = 0; i < ng; i++) zeros += g[1][i] == 0.0f;
    CU_ASSERT_EQUAL(zeros, ng);
    for (int k = 0; k < 3; k++) free(g[k]);
    unbind(b);
}

/* An Embedding (with mask_zero) whose output only an LSTM reads hands it its ids and table
 * where the batch has at least twice the vocabulary's tokens (6 examples of 12 steps, 10
 * ids; not at a batch of 1, nor with TFC_FUSE=0). Against the same model with TFC_FUSE=0:
 * the training forward pass and the loss bit for bit, inference too, the gradients to
 * rounding (the table's comes from dgates summed by id); a second backward without zeroing
 * adds the same gradients again, the table's too. */
static void test_lstm_takes_ids(void)
{
    static const char yaml[] = "input: {shape: [12], dtype: int32}\nlayers:\n"
                               "  - Embedding: {input_dim: 10, output_dim: 5, mask_zero: true}\n"
                               "  - LSTM: {units: 8, return_sequences: true}\n"
                               "  - Dense: {units: 4}\nloss: sparse_categorical_crossentropy\n";
    const int n = 6, T = 12;
    int32_t ids[6 * 12];
    fill_ids(ids, n, T);
    bound one = bind(yaml, 1);
    CU_ASSERT_EQUAL(one.m->bound[1].ids_from, -1);
    unbind(one);
    float *g[2], *y[2];
    double loss[2];
    int64_t ng = 0;
    for (int run = 0; run < 2; run++) { /* 0: ids taken, 1: TFC_FUSE=0 */
        if (run == 1) setenv("TFC_FUSE", "0", 1);
        bound b = bind(yaml, n);
        if (run == 1) unsetenv("TFC_FUSE");
        CU_ASSERT_EQUAL(b.m->bound[1].ids_from, run ? -1 : 0);
        CU_ASSERT_EQUAL(b.m->bound[0].ids_into, run ? -1 : 1);
        void *labels = make_labels(b.m, n);
        tfc_error err;
        tfc_error_clear(&err);
        ng = tfc_model_trainable_count(b.m);
        g[run] = malloc(sizeof(float) * (size_t)ng);
        float *twice = malloc(sizeof(float) * (size_t)ng);
        tfc_batch_result r;
        for (int k = 0; k < 2; k++) {
            CU_ASSERT_EQUAL_FATAL(tfc_model_forward(b.m, ids, n, 1, 9, 0, &err), TFC_OK);
            CU_ASSERT_EQUAL_FATAL(tfc_model_loss(b.m, labels, 1, &r, &err), TFC_OK);
            if (k == 0) tfc_model_zero_grad(b.m);
            tfc_model_backward(b.m);
            b.be->ops->download(b.be, k ? twice : g[run], tfc_model_grads(b.m), (size_t)ng * 4);
        }
        loss[run] = r.loss;
        int64_t doubled = 0;
        for (int64_t i = 0; i < ng; i++)
            doubled += fabsf(twice[i] - 2 * g[run][i]) <= 1e-6f * (1 + fabsf(g[run][i]));
        CU_ASSERT_EQUAL(doubled, ng);
        y[run] = forward(b, ids, n, 0);
        free(twice), free(labels);
        unbind(b);
    }
    CU_ASSERT(loss[0] == loss[1]);
    CU_ASSERT_EQUAL(memcmp(y[0], y[1], sizeof(float) * (size_t)(n * T * 4)), 0);
    int64_t near = 0, moved = 0;
    for (int64_t i = 0; i < ng; i++) {
        near += fabsf(g[0][i] - g[1][i]) <= 1e-6f + 1e-4f * fabsf(g[1][i]);
        moved += g[1][i] != 0;
    }
    CU_ASSERT_EQUAL(near, ng);
    CU_ASSERT(moved > ng / 2);
    for (int run = 0; run < 2; run++) free(g[run]), free(y[run]);
}

/* A pooling layer that alone reads a chain's result (or a convolution's with its own
 * activation) joins the chain: conv(relu) -> MaxPooling2D, conv -> BN -> ReLU ->
 * AveragePooling2D (SAME, stride 2), conv(tanh) -> MaxPooling2D, conv -> Add ->
 * GlobalAveragePooling2D; a convolution with its own activation read by a convolution stays
 * as it is. On two threads, at 8 images of 48x48 with 32 channels, the second convolution
 * runs as Winograd in one-image chunks on AVX-512 machines and its pooling reads the
 * kernel's blocked output. The output equals the unfused model's bit for bit, in the
 * training and the inference layout. */
static void test_inference_pool_chains(void)
{
    static const char yaml[] =
        "name: pool_chains\n"
        "input: {shape: [48, 48, 3]}\n"
        "layers:\n"
        "  - Conv2D: {name: c1, filters: 32, kernel_size: 3, padding: same, activation: relu}\n"
        "  - Conv2D: {name: c2, filters: 32, kernel_size: 3, padding: same, activation: relu}\n"
        "  - MaxPooling2D: {name: p2}\n"
        "  - Conv2D: {name: c3, filters: 32, kernel_size: 3, padding: same, use_bias: false}\n"
        "  - BatchNormalization: {name: b3}\n"
        "  - Activation: {name: r3, activation: relu}\n"
        "  - AveragePooling2D: {name: p3, pool_size: 3, strides: 2, padding: same}\n"
        "  - Conv2D: {name: c4, filters: 16, kernel_size: 3, padding: same, activation: tanh}\n"
        "  - MaxPooling2D: {name: p4}\n"
        "  - Conv2D: {name: c5, filters: 16, kernel_size: 1}\n"
        "  - Add: {name: a5, inputs: [c5, p4]}\n"
        "  - GlobalAveragePooling2D: {name: g5}\n"
        "  - Dense: {units: 5, activation: softmax}\n"
        "loss: sparse_categorical_crossentropy\n";
    const int n = 8, nl = 13, nx = 8 * 48 * 48 * 3;
    float *out[3], *x = malloc(sizeof(float) * nx);
    TFC_ASSERT(x);
    srand(12);
    for (int k = 0; k < nx; k++) x[k] = -1.0f + 2.0f * (float)rand() / (float)RAND_MAX;
    for (int run = 0; run < 3; run++) {
        bound b = bind_chains(yaml, run, n, 2);
        tfc_error err;
        tfc_error_clear(&err);
        const tfc_bound *c = b.m->bound;
        int chains = 0, skips = 0;
        for (int i = 0; i < nl; i++) {
            chains += c[i].chain_end != i;
            skips += c[i].skip;
        }
        CU_ASSERT_EQUAL(chains, run == 1 ? 0 : 4);
        CU_ASSERT_EQUAL(skips, run == 1 ? 0 : 7);
        if (run != 1) {
            CU_ASSERT_EQUAL(c[0].chain_end, 0);
            CU_ASSERT(c[1].chain_end == 2 && c[1].chain_pool == 2 && c[1].chain_act == TFC_ACT_RELU);
            CU_ASSERT(c[3].chain_end == 6 && c[3].chain_bn == 4 && c[3].chain_pool == 6 &&
                      c[3].chain_act == TFC_ACT_RELU);
            CU_ASSERT(c[7].chain_end == 8 && c[7].chain_pool == 8 && c[7].chain_act == TFC_ACT_TANH);
            CU_ASSERT(c[9].chain_end == 11 && c[9].chain_res == 8 && c[9].chain_pool == 11 &&
                      c[9].chain_act == TFC_ACT_LINEAR);
        }
        out[run] = chains_output(b, x, n, 5);
    }
    CU_ASSERT_EQUAL(memcmp(out[0], out[1], sizeof(float) * 5 * n), 0);
    CU_ASSERT_EQUAL(memcmp(out[2], out[1], sizeof(float) * 5 * n), 0);
    free(out[0]), free(out[1]), free(out[2]), free(x);
}

/* A model bound for inference lets the CPU backend keep its convolution weights in oneDNN's
 * layout between calls (core/backend.h: frozen); new weights uploaded over them must be
 * used on the next call: the output then equals a fresh model's with those weights. */
static void test_frozen_weights_reload(void)
{
    static const char yaml[] = "name: frozen\n"
                               "input: {shape: [12, 12, 16]}\n"
                               "layers:\n"
                               "  - Conv2D: {filters: 32, kernel_size: 3, padding: same}\n"
                               "  - Conv2D: {filters: 32, kernel_size: 3, activation: relu}\n"
                               "  - Flatten: {}\n"
                               "  - Dense: {units: 3, activation: softmax}\n"
                               "loss: sparse_categorical_crossentropy\n";
    const int n = 8, nx = 8 * 12 * 12 * 16;
    float *x = malloc(sizeof(float) * nx), y[3][24];
    srand(5);
    for (int k = 0; k < nx; k++) x[k] = -1.0f + 2.0f * (float)rand() / (float)RAND_MAX;
    tfc_error err;
    tfc_error_clear(&err);
    bound f = {tfc_test_model(yaml), tfc_cpu_backend_create(2)};
    bound g = {tfc_test_model(yaml), tfc_cpu_backend_create(2)};
    TFC_ASSERT(f.m && g.m);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind_inference(f.m, f.be, n, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(g.m, g.be, n, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_init_weights(f.m, 5, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_init_weights(g.m, 5, &err), TFC_OK);
    CU_ASSERT(!g.be->frozen);
    CU_ASSERT(f.be->frozen);
    for (int call = 0; call < 2; call++) { /* the second call runs on kept weights */
        CU_ASSERT_EQUAL_FATAL(tfc_model_forward(f.m, x, n, 0, 0, 0, &err), TFC_OK);
        tfc_model_get_output(f.m, y[0]);
    }
    /* new kernels for both convolutions, in both models */
    for (int layer = 0; layer < 2; layer++) {
        tfc_param *pf = &tfc_model_layer(f.m, layer)->params[0];
        tfc_param *pg = &tfc_model_layer(g.m, layer)->params[0];
        float *h = malloc((size_t)pf->numel * 4);
        for (int64_t k = 0; k < pf->numel; k++) h[k] = -0.2f + 0.4f * (float)rand() / (float)RAND_MAX;
        tfc_model_param_upload(f.m, pf, h);
        tfc_model_param_upload(g.m, pg, h);
        free(h);
    }
    for (int l = 2; l < 4; l++) /* the rest as f's */
        for (int p = 0; p < tfc_model_layer(f.m, l)->nparams; p++) {
            tfc_param *pf = &tfc_model_layer(f.m, l)->params[p];
            float *h = malloc((size_t)pf->numel * 4);
            tfc_model_param_download(f.m, pf, h);
            tfc_model_param_upload(g.m, &tfc_model_layer(g.m, l)->params[p], h);
            free(h);
        }
    for (int k = 0; k < 2; k++) {
        bound b = k ? g : f;
        CU_ASSERT_EQUAL_FATAL(tfc_model_forward(b.m, x, n, 0, 0, 0, &err), TFC_OK);
        tfc_model_get_output(b.m, y[1 + k]);
    }
    CU_ASSERT(memcmp(y[0], y[1], sizeof y[0]) != 0);
    CU_ASSERT_EQUAL(memcmp(y[1], y[2], sizeof y[1]), 0);
    unbind(f), unbind(g);
    free(x);
}

/* A layer whose kernel a backend lacks (tfc_layer_ops.needs; a layer landed CPU-first) makes
 * binding fail on that backend, naming the layer and the op, and binds where the op is. */
static const char *const *needs_gemm(const tfc_layer *l)
{
    static const char *const needs[] = {"lstm_forward", "gemm", NULL};
    return needs;
}

static void test_missing_kernel_refused(void)
{
    tfc_model *m = tfc_test_model("input: {shape: [4]}\nlayers:\n  - Dense: {units: 3}\n"
                                  "  - Dense: {name: head, units: 2}\n");
    tfc_backend *be = tfc_cpu_backend_create(1);
    TFC_ASSERT(m && be);
    CU_ASSERT(tfc_backend_has(be->ops, "gemm"));
    CU_ASSERT(!tfc_backend_has(be->ops, "no_such_op"));
    tfc_layer_ops needy = *tfc_model_layer(m, 1)->ops;
    needy.needs = needs_gemm;
    tfc_model_layer(m, 1)->ops = &needy;
    tfc_backend_ops lacking = *be->ops;
    const tfc_backend_ops *cpu_ops = be->ops;
    lacking.gemm = NULL;
    be->ops = &lacking;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'head'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no kernel for Dense yet (op 'gemm')"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "--device cpu"));
    /* planning asks the same ops (workspace sizes): the same refusal, never a NULL call */
    tfc_memory_plan plan;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_plan_memory(m, be, 2, &plan, &err), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no kernel for Dense yet (op 'gemm')"));
    be->ops = cpu_ops;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_plan_memory(m, be, 2, &plan, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* A layer that runs on the common ops but has not run under make test-gpu (cpu_first) is
 * refused by a backend other than the CPU, naming it: a CPU backend posing as device 0. No
 * shipped layer has the flag today, so the test sets it on a copy of ZeroPadding2D's ops. */
static void test_cpu_first_refused(void)
{
    tfc_model *m = tfc_test_model("input: {shape: [8, 8, 3]}\nlayers:\n"
                                  "  - ZeroPadding2D: {name: c, padding: 1}\n"
                                  "  - Flatten: {}\n  - Dense: {units: 2}\n");
    tfc_backend *be = tfc_cpu_backend_create(1);
    TFC_ASSERT(m && be);
    tfc_layer_ops first = *tfc_model_layer(m, 0)->ops;
    first.cpu_first = 1;
    tfc_model_layer(m, 0)->ops = &first;
    tfc_error err;
    tfc_error_clear(&err);
    be->device = 0;
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'c'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "ZeroPadding2D has not run on the cpu backend"));
    be->device = -1;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
    tfc_model_free(m);
    tfc_backend_free(be);
}

TFC_TEST_MAIN("layers", {"gradients", test_gradients},
              {"gradcheck_catches_2_percent", test_gradcheck_catches_2_percent},
              {"registry_covered", test_registry_covered},
              {"conv_same_stride2_even_values", test_conv_same_stride2_even_values},
              {"flatten_nhwc", test_flatten_nhwc}, {"lstm_masked_values", test_lstm_masked_values},
              {"batchnorm_values", test_batchnorm_values},
              {"pooling_same_values", test_pooling_same_values},
              {"dropout_values", test_dropout_values},
              {"dense_embedding_values", test_dense_embedding_values},
              {"masked_loss_values", test_masked_loss_values},
              {"initializers", test_initializers},
              {"seeded_initializers", test_seeded_initializers},
              {"inference_chains", test_inference_chains},
              {"training_relu_folds", test_training_relu_folds},
              {"training_pool_relu_folds", test_training_pool_relu_folds},
              {"lazy_zero_grad", test_lazy_zero_grad}, {"lstm_takes_ids", test_lstm_takes_ids},
              {"inference_pool_chains", test_inference_pool_chains},
              {"frozen_weights_reload", test_frozen_weights_reload},
              {"missing_kernel_refused", test_missing_kernel_refused},
              {"cpu_first_refused", test_cpu_first_refused})
