/* ConvLSTM2D, ConvLSTM1D and ConvLSTM3D (layers/conv_lstm2d.c): Keras 3.15 parity on the
 * fixtures of tests/ref/keras_conv_lstm.py (tests/ref/conv_lstm/: every step or the last,
 * same and valid padding, strides 2, dilation, go_backwards, no bias; ConvLSTM1D every step
 * and the last going backwards with strides 2; ConvLSTM3D every step with an even kernel and
 * same padding, the last going backwards with strides (2, 1, 1), dilation without bias;
 * outputs, the input's and every weight's gradients); dropout's four masks; Keras's weights
 * and their initial values (unit_forget_bias, the orthogonal recurrent kernel as a
 * (kh kw F, 4F) matrix); the arguments tfc refuses, named, at their FILE:LINE:COL; ConvLSTM3D
 * refused by a backend without the conv3d ops. The numeric gradient checks are test_layers'
 * conv_lstm* cases. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "graph/model.h"
#include "layers/layer.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "testutil.h"

static void test_keras_parity(void)
{
    static const tfc_keras_parity p = {.dir = "conv_lstm", .tol = 1e-4, .all_grads = 1};
    static const char *const names[] = {"seq_same", "last_valid", "stride2_valid", "backwards",
                                        "backwards_last_dilated", "conv1d_seq_same",
                                        "conv1d_last_stride_backwards", "conv3d_seq_same",
                                        "conv3d_last_stride_backwards", "conv3d_dilated_nobias",
                                        "relu", "conv1d_gelu_hard_sigmoid",
                                        "dropout_recurrent", "conv1d_recurrent_backwards",
                                        "conv3d_recurrent_last", NULL};
    tfc_test_keras_cases(&p, names);
}

static void expect_error(const char *layer, const char *what)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "input: {shape: [3, 5, 5, 2]}\nlayers:\n  - %s\n", layer);
    tfc_test_expect_model_error(yaml, what);
}

static void test_errors(void)
{
    expect_error("ConvLSTM2D: {filters: 2, kernel_size: 3, dropout: 1}", "dropout");
    expect_error("ConvLSTM2D: {filters: 2, kernel_size: 3, recurrent_dropout: 1}",
                 "recurrent_dropout");
    expect_error("ConvLSTM2D: {filters: 2, kernel_size: 3, return_state: true}",
                 "t.yaml:3:5: error: layers[0].ConvLSTM2D: layer 'conv_lstm2d': return_state: "
                 "not supported");
    expect_error("ConvLSTM2D: {filters: 2, kernel_size: 3, stateful: true}",
                 "t.yaml:3:5: error: layers[0].ConvLSTM2D: layer 'conv_lstm2d': stateful: not "
                 "supported");
    expect_error("ConvLSTM2D: {filters: 2, kernel_size: 3, activation: softmax}",
                 "t.yaml:3:5: error: layers[0].ConvLSTM2D: layer 'conv_lstm2d': activation "
                 "softmax is not supported");
    expect_error("ConvLSTM2D: {filters: 2, kernel_size: 3, recurrent_activation: softmax}",
                 "recurrent_activation softmax is not supported");
    expect_error("ConvLSTM2D: {filters: 2, kernel_size: 3, activation: rectifier}",
                 "activation");
    expect_error("ConvLSTM2D: {filters: 2, kernel_size: 3, data_format: channels_first}",
                 "data_format");
    expect_error("ConvLSTM2D: {filters: 2, kernel_size: 3, unroll: true}", "unknown key 'unroll'");
    expect_error("ConvLSTM2D: {filters: 2, kernel_size: 6}", "smaller than the 6x6 kernel");
    expect_error("ConvLSTM2D: {filters: 2, kernel_size: 3, strides: 2, dilation_rate: 2}",
                 "strides > 1 with dilation_rate > 1");
    expect_error("ConvLSTM2D: {kernel_size: 3}", "filters");
    tfc_test_expect_model_error("input: {shape: [3, 5, 2]}\nlayers:\n"
                                "  - ConvLSTM1D: {filters: 2, kernel_size: [3, 3]}\n",
                                "t.yaml:3:5: error: layers[0].ConvLSTM1D: layer 'conv_lstm1d': "
                                "kernel_size");
    tfc_test_expect_model_error("input: {shape: [3, 5, 2]}\nlayers:\n"
                                "  - ConvLSTM1D: {filters: 2, kernel_size: 3, stateful: true}\n",
                                "t.yaml:3:5: error: layers[0].ConvLSTM1D: layer 'conv_lstm1d': "
                                "stateful: not supported");
    tfc_test_expect_model_error("input: {shape: [3, 5, 5, 2]}\nlayers:\n"
                                "  - ConvLSTM1D: {filters: 2, kernel_size: 3}\n",
                                "needs a sequence of sequences");
    tfc_test_expect_model_error("input: {shape: [5, 5, 2]}\nlayers:\n"
                                "  - ConvLSTM2D: {filters: 2, kernel_size: 3}\n",
                                "t.yaml:3:5: error: layers[0].ConvLSTM2D: layer 'conv_lstm2d': "
                                "needs a sequence of images");
    /* ConvLSTM3D refuses what ConvLSTM2D refuses, and its windows are one or three integers */
    static const char *const refused3[][2] = {
        {"recurrent_dropout: 1", "recurrent_dropout"},
        {"return_state: true", "return_state: not supported"},
        {"stateful: true", "stateful: not supported"},
        {"activation: softmax", "activation softmax is not supported"},
        {"recurrent_activation: softmax", "recurrent_activation softmax is not supported"},
        {"data_format: channels_first", "data_format"},
        {"dropout: 1", "dropout"},
        {"unroll: true", "unknown key 'unroll'"},
        {"kernel_size: [3, 3]", "kernel_size: expected an integer or a list of 3"},
        {"strides: [2, 1]", "strides: expected an integer or a list of 3"},
        {"dilation_rate: [1, 2, 1, 1]", "dilation_rate: expected an integer or a list of 3"},
        {"strides: [1, 1, 2], dilation_rate: [2, 1, 1]", "strides > 1 with dilation_rate > 1"},
        {"kernel_size: [2, 5, 2]", "smaller than the 2x5x2 kernel (dilation 1x1x1)"},
        {"dilation_rate: [1, 1, 5]", "smaller than the 2x2x2 kernel (dilation 1x1x5)"},
    };
    for (size_t i = 0; i < sizeof refused3 / sizeof *refused3; i++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml, "input: {shape: [3, 2, 4, 5, 2]}\nlayers:\n"
                 "  - ConvLSTM3D: {filters: 2, kernel_size: 2, %s}\n", refused3[i][0]);
        /* kernel_size given twice: the list replaces the integer */
        if (strstr(refused3[i][0], "kernel_size"))
            snprintf(yaml, sizeof yaml, "input: {shape: [3, 2, 4, 5, 2]}\nlayers:\n"
                     "  - ConvLSTM3D: {filters: 2, %s}\n", refused3[i][0]);
        tfc_test_expect_model_error(yaml, refused3[i][1]);
        tfc_test_expect_model_error(yaml, "t.yaml:3:");
    }
    tfc_test_expect_model_error("input: {shape: [3, 5, 5, 2]}\nlayers:\n"
                                "  - ConvLSTM3D: {filters: 2, kernel_size: 3}\n",
                                "t.yaml:3:5: error: layers[0].ConvLSTM3D: layer 'conv_lstm3d': "
                                "needs a sequence of volumes, input shape (steps, depth, height, "
                                "width, channels), got (3, 5, 5, 2)");
    tfc_test_expect_model_error("input: {shape: [3, 2, 4, 5, 2]}\nlayers:\n"
                                "  - ConvLSTM3D: {kernel_size: 3}\n", "filters");
}

/* Keras's variables and their initial values: kernel (kh, kw, C, 4F), recurrent_kernel
 * (kh, kw, F, 4F), bias (4F) with the forget gate's 1 (unit_forget_bias); an orthogonal
 * recurrent kernel as Keras initialises a 4-D one, a (kh kw F, 4F) matrix with orthonormal
 * columns (or rows, the shorter side) */
static void test_weights(void)
{
    tfc_model *m = tfc_test_model("input: {shape: [3, 6, 5, 2]}\nlayers:\n"
                                  "  - ConvLSTM2D: {filters: 3, kernel_size: [2, 3],"
                                  " kernel_regularizer: l2, recurrent_constraint: non_neg,"
                                  " return_sequences: true}\n"
                                  "  - ConvLSTM2D: {filters: 2, kernel_size: 1, strides: 2,"
                                  " padding: same, use_bias: false, unit_forget_bias: false}\n");
    TFC_ASSERT(m != NULL);
    const tfc_layer *l = tfc_model_layer(m, 0), *l2 = tfc_model_layer(m, 1);
    CU_ASSERT_STRING_EQUAL(l->name, "conv_lstm2d");
    CU_ASSERT_STRING_EQUAL(l2->name, "conv_lstm2d_1");
    CU_ASSERT_EQUAL(l->nparams, 3);
    CU_ASSERT_EQUAL(l2->nparams, 2);
    const int64_t k[4] = {2, 3, 2, 12}, r[4] = {2, 3, 3, 12};
    CU_ASSERT_STRING_EQUAL(l->params[0].name, "kernel");
    CU_ASSERT(!memcmp(l->params[0].shape.dim, k, sizeof k));
    CU_ASSERT_STRING_EQUAL(l->params[1].name, "recurrent_kernel");
    CU_ASSERT(!memcmp(l->params[1].shape.dim, r, sizeof r));
    CU_ASSERT_STRING_EQUAL(l->params[2].name, "bias");
    CU_ASSERT_EQUAL(l->params[2].shape.dim[0], 12);
    /* (3, 5, 3, 3) every step, valid; then strides 2 with same padding: (3, 2, 2) */
    CU_ASSERT_EQUAL(l->out_shape.ndim, 4);
    CU_ASSERT_EQUAL(l->out_shape.dim[1], 5);
    CU_ASSERT_EQUAL(l->out_shape.dim[2], 3);
    CU_ASSERT_EQUAL(l2->out_shape.ndim, 3);
    CU_ASSERT_EQUAL(l2->out_shape.dim[0], 3);
    CU_ASSERT_EQUAL(l2->out_shape.dim[1], 2);
    CU_ASSERT_EQUAL(l2->out_shape.dim[2], 2);
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_init_weights(m, 1, &err), TFC_OK);
    float b[12], rk[2 * 3 * 3 * 12];
    be->ops->download(be, b, l->params[2].data, sizeof b);
    for (int j = 0; j < 12; j++) CU_ASSERT_EQUAL(b[j], j >= 3 && j < 6 ? 1.0f : 0.0f);
    /* 18 x 12: orthonormal columns */
    be->ops->download(be, rk, l->params[1].data, sizeof rk);
    double worst = 0;
    for (int i = 0; i < 12; i++)
        for (int j = 0; j < 12; j++) {
            double dot = 0;
            for (int row = 0; row < 18; row++) dot += (double)rk[row * 12 + i] * rk[row * 12 + j];
            worst = fmax(worst, fabs(dot - (i == j)));
        }
    CU_ASSERT(worst < 1e-5);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* dropout as Keras's ConvLSTM cell: four masks per sequence, one per gate, each the same at
 * every step. One pixel, one channel, x = 1, a 1x1 kernel reading it into gates i and c only
 * (f = o = 1/2), no recurrence: with the masks m_i, m_c in {0, 2} (rate 1/2) every step adds
 * i g = sigmoid(m_i) tanh(m_c), so c_1 = i g, c_2 = c_1 / 2 + i g, c_3 = c_2 / 2 + i g and
 * h = tanh(c) / 2. Each example must be one of the mask pairs at all three steps (m_c = 0
 * gives 0 whatever m_i), and over 64 examples m_c = 2 occurs with both m_i = 0 and m_i = 2
 * (the gates' masks differ: one shared mask would never give m_i != m_c), and m_c = 0 too.
 * At inference no mask applies. `type` ConvLSTM2D over 1 x 1 images or ConvLSTM3D over
 * 1 x 1 x 1 volumes. */
static void check_dropout_masks(const char *type)
{
    enum { N = 64, T = 3 };
    char yaml[320];
    snprintf(yaml, sizeof yaml, "input: {shape: [3, 1, 1, 1%s]}\nlayers:\n"
             "  - %s: {filters: 1, kernel_size: 1, dropout: 0.5, use_bias: false,"
             " recurrent_initializer: zeros, return_sequences: true}\n",
             strcmp(type, "ConvLSTM3D") ? "" : ", 1", type);
    tfc_model *m = tfc_test_model(yaml);
    TFC_ASSERT(m != NULL);
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, N, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_init_weights(m, 1, &err), TFC_OK);
    const tfc_layer *l = tfc_model_layer(m, 0);
    const float k[4] = {1, 0, 1, 0};
    be->ops->upload(be, l->params[0].data, k, sizeof k);
    float x[N * T], y[N * T], want[4][T];
    for (int i = 0; i < N * T; i++) x[i] = 1;
    for (int pair = 0; pair < 4; pair++) {
        const double mi = pair & 1 ? 2 : 0, mc = pair & 2 ? 2 : 0,
                     ig = 1 / (1 + exp(-mi)) * tanh(mc);
        double c = 0;
        for (int t = 0; t < T; t++) c = c / 2 + ig, want[pair][t] = (float)(tanh(c) / 2);
    }
    CU_ASSERT_EQUAL_FATAL(tfc_model_forward(m, x, N, 1, 1, 5, &err), TFC_OK);
    tfc_model_get_output(m, y);
    int seen[4] = {0}, unmatched = 0;
    for (int i = 0; i < N; i++) {
        int found = -1;
        for (int pair = 0; pair < 4 && found < 0; pair++) {
            int all = 1;
            for (int t = 0; t < T; t++) all &= fabsf(y[i * T + t] - want[pair][t]) < 1e-5f;
            if (all) found = pair;
        }
        if (found < 0) unmatched++;
        else seen[found]++;
    }
    CU_ASSERT_EQUAL(unmatched, 0);
    CU_ASSERT(seen[0] > 0 && seen[2] > 0 && seen[3] > 0);
    /* inference: every input kept, no scaling */
    CU_ASSERT_EQUAL_FATAL(tfc_model_forward(m, x, N, 0, 1, 5, &err), TFC_OK);
    tfc_model_get_output(m, y);
    const double ig = 1 / (1 + exp(-1.0)) * tanh(1.0);
    CU_ASSERT(fabs(y[0] - tanh(ig) / 2) < 1e-6 && fabs(y[2] - tanh(1.75 * ig) / 2) < 1e-6);
    tfc_model_free(m);
    tfc_backend_free(be);
}

static void test_dropout_masks(void)
{
    check_dropout_masks("ConvLSTM2D");
    check_dropout_masks("ConvLSTM3D");
}

/* ConvLSTM3D's variables: kernel (kd, kh, kw, C, 4F), recurrent_kernel (kd, kh, kw, F, 4F),
 * bias (4F) with the forget gate's 1; the recurrent kernel orthogonal as a (kd kh kw F, 4F)
 * matrix; the output (T,) od, oh, ow, F */
static void test_weights3d(void)
{
    tfc_model *m = tfc_test_model("input: {shape: [3, 4, 5, 6, 2]}\nlayers:\n"
                                  "  - ConvLSTM3D: {filters: 2, kernel_size: [1, 2, 3],"
                                  " strides: [1, 2, 2], return_sequences: true}\n"
                                  "  - ConvLSTM3D: {filters: 1, kernel_size: 2, padding: same,"
                                  " use_bias: false}\n");
    TFC_ASSERT(m != NULL);
    const tfc_layer *l = tfc_model_layer(m, 0), *l2 = tfc_model_layer(m, 1);
    CU_ASSERT_STRING_EQUAL(l->name, "conv_lstm3d");
    CU_ASSERT_STRING_EQUAL(l2->name, "conv_lstm3d_1");
    CU_ASSERT_EQUAL(l->nparams, 3);
    CU_ASSERT_EQUAL(l2->nparams, 2);
    const int64_t k[5] = {1, 2, 3, 2, 8}, r[5] = {1, 2, 3, 2, 8}, k2[5] = {2, 2, 2, 2, 4};
    CU_ASSERT_EQUAL(l->params[0].shape.ndim, 5);
    CU_ASSERT(!memcmp(l->params[0].shape.dim, k, sizeof k));
    CU_ASSERT_STRING_EQUAL(l->params[1].name, "recurrent_kernel");
    CU_ASSERT(!memcmp(l->params[1].shape.dim, r, sizeof r));
    CU_ASSERT(!memcmp(l2->params[0].shape.dim, k2, sizeof k2));
    /* (3, 4, 2, 2, 2) every step, valid, strides (1, 2, 2); then the last, same: (4, 2, 2, 1) */
    const int64_t o[5] = {3, 4, 2, 2, 2}, o2[4] = {4, 2, 2, 1};
    CU_ASSERT_EQUAL(l->out_shape.ndim, 5);
    CU_ASSERT(!memcmp(l->out_shape.dim, o, sizeof o));
    CU_ASSERT_EQUAL(l2->out_shape.ndim, 4);
    CU_ASSERT(!memcmp(l2->out_shape.dim, o2, sizeof o2));
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_init_weights(m, 1, &err), TFC_OK);
    float b[8], rk[1 * 2 * 3 * 2 * 8];
    be->ops->download(be, b, l->params[2].data, sizeof b);
    for (int j = 0; j < 8; j++) CU_ASSERT_EQUAL(b[j], j >= 2 && j < 4 ? 1.0f : 0.0f);
    /* 12 x 8: orthonormal columns */
    be->ops->download(be, rk, l->params[1].data, sizeof rk);
    double worst = 0;
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) {
            double dot = 0;
            for (int row = 0; row < 12; row++) dot += (double)rk[row * 8 + i] * rk[row * 8 + j];
            worst = fmax(worst, fabs(dot - (i == j)));
        }
    CU_ASSERT(worst < 1e-5);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* ConvLSTM3D runs on the backend's conv3d ops: a backend without them refuses it at bind,
 * naming the layer and the op */
static void drop_conv3d(tfc_backend_ops *ops)
{
    ops->conv3d_backward = NULL;
}

static void test_needs_conv3d(void)
{
    tfc_test_expect_refused("input: {shape: [2, 2, 3, 3, 1]}\nlayers:\n"
                            "  - ConvLSTM3D: {filters: 1, kernel_size: 2}\n",
                            drop_conv3d, "conv_lstm3d", "conv3d_backward");
}

TFC_TEST_MAIN("conv_lstm", {"keras_parity", test_keras_parity}, {"errors", test_errors},
              {"weights", test_weights}, {"dropout_masks", test_dropout_masks},
              {"weights3d", test_weights3d}, {"needs_conv3d", test_needs_conv3d})
