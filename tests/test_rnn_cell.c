/* RNN with a cell (layers/rnn_layer.c): Keras 3.15 parity on the fixtures of
 * tests/ref/keras_rnn_cell.py (tests/ref/rnn_cell/: LSTMCell, GRUCell, SimpleRNNCell; every
 * step and the last, go_backwards, zero_output_for_mask under an Embedding's mask, at every
 * step and the last; StackedRNNCells of two and three cells, masked going backwards;
 * Bidirectional around both: outputs, the input's and every weight's gradients, the weights
 * tfc writes under Keras's paths); an RNN of one cell is its recurrent layer, bit for bit;
 * the arguments tfc refuses, named, at their FILE:LINE:COL. The numeric gradient checks are
 * test_layers' rnn_cell cases. */
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
    static const tfc_keras_parity p = {.dir = "rnn_cell", .tol = 1e-4, .all_grads = 1};
    static const char *const names[] = {
        "lstm_seq", "gru_last_backwards", "simple_relu_seq", "lstm_masked_zero",
        "gru_masked_zero_backwards", "simple_masked_zero_last", "stacked_seq",
        "stacked_masked_backwards", "stacked_masked_zero", "bidir_lstm_masked",
        "bidir_stacked_sum", NULL};
    tfc_test_keras_cases(&p, names);
}

typedef struct bound {
    tfc_model *m;
    tfc_backend *be;
} bound;

/* The model of `layers` after a mask_zero Embedding, bound for 4 on one thread, seed 3 */
static bound bind_model(const char *layers)
{
    char yaml[1024];
    snprintf(yaml, sizeof yaml, "input: {shape: [6], dtype: int32}\nlayers:\n"
             "  - Embedding: {input_dim: 10, output_dim: 3, mask_zero: true}\n%s", layers);
    bound b = {tfc_test_model(yaml), tfc_cpu_backend_create(1)};
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(b.m && tfc_model_bind(b.m, b.be, 4, &err) == TFC_OK);
    TFC_ASSERT(tfc_model_init_weights(b.m, 3, &err) == TFC_OK);
    return b;
}

static void unbind(bound b)
{
    tfc_model_free(b.m);
    tfc_backend_free(b.be);
}

/* b's weights, in order over its layers, set to a's */
static void copy_weights(bound a, bound b)
{
    int pa = 0, la = 0;
    for (int lb = 0; lb < tfc_model_nlayers(b.m); lb++) {
        tfc_layer *l = tfc_model_layer(b.m, lb);
        for (int p = 0; p < l->nparams; p++) {
            const tfc_layer *src = tfc_model_layer(a.m, la);
            while (pa >= src->nparams) src = tfc_model_layer(a.m, ++la), pa = 0;
            TFC_ASSERT(src->params[pa].numel == l->params[p].numel);
            float *h = malloc((size_t)l->params[p].numel * 4);
            tfc_model_param_download(a.m, &src->params[pa++], h);
            tfc_model_param_upload(b.m, &l->params[p], h);
            free(h);
        }
    }
}

static const int32_t IDS[24] = {3, 1, 4, 1, 5, 0, 9, 2, 6, 5, 3, 5,
                                7, 9, 0, 0, 0, 0, 2, 7, 1, 8, 2, 0};

/* The output for IDS (training: a training forward at step 7), n floats */
static float *forward(bound b, int training, int64_t n)
{
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(tfc_model_forward(b.m, IDS, 4, training, 1, 7, &err) == TFC_OK);
    CU_ASSERT_EQUAL(4 * tfc_shape_numel(tfc_model_output_shape(b.m)), n);
    float *y = malloc((size_t)n * 4);
    tfc_model_get_output(b.m, y);
    return y;
}

/* An RNN of one cell is the recurrent layer of the cell's arguments (going backwards, with
 * dropout or recurrent dropout in training, the same draws), and a StackedRNNCells the layers one after another,
 * every one returning sequences: the same output bits for the same weights */
static void test_same_as_layers(void)
{
    static const struct {
        const char *rnn, *layers;
        int64_t n;
    } cases[] = {
        {"  - RNN: {cell: {LSTMCell: {units: 3, dropout: 0.3}}, go_backwards: true,"
         " return_sequences: true}\n",
         "  - LSTM: {units: 3, dropout: 0.3, go_backwards: true, return_sequences: true}\n",
         4 * 6 * 3},
        {"  - RNN: {cell: {GRUCell: {units: 3, recurrent_dropout: 0.4, dropout: 0.2}},"
         " return_sequences: true}\n",
         "  - GRU: {units: 3, recurrent_dropout: 0.4, dropout: 0.2, return_sequences: true}\n",
         4 * 6 * 3},
        {"  - RNN: {cell: {GRUCell: {units: 2, reset_after: false}}}\n",
         "  - GRU: {units: 2, reset_after: false}\n", 4 * 2},
        {"  - RNN: {cell: {SimpleRNNCell: {units: 2, activation: null}},"
         " return_sequences: true}\n",
         "  - SimpleRNN: {units: 2, activation: null, return_sequences: true}\n", 4 * 6 * 2},
        {"  - RNN: {cell: {StackedRNNCells: {cells: [{LSTMCell: {units: 3}}, {GRUCell: "
         "{units: 2}}, {SimpleRNNCell: {units: 2}}]}}, return_sequences: true}\n",
         "  - LSTM: {units: 3, return_sequences: true}\n"
         "  - GRU: {units: 2, return_sequences: true}\n"
         "  - SimpleRNN: {units: 2, return_sequences: true}\n", 4 * 6 * 2},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        bound a = bind_model(cases[k].rnn), b = bind_model(cases[k].layers);
        copy_weights(a, b);
        for (int training = 0; training < 2; training++) {
            float *ya = forward(a, training, cases[k].n), *yb = forward(b, training, cases[k].n);
            int same = !memcmp(ya, yb, (size_t)cases[k].n * 4);
            if (!same) fprintf(stderr, "\ncase %zu training %d: outputs differ\n", k, training);
            CU_ASSERT(same);
            free(ya), free(yb);
        }
        unbind(a), unbind(b);
    }
}

/* Keras's weight names: the cell's segment dropped; a stack's cells numbered per type */
static void test_weight_names(void)
{
    bound b = bind_model("  - RNN: {cell: {StackedRNNCells: {cells: [{GRUCell: {units: 2}},"
                         " {LSTMCell: {units: 2, use_bias: false}}, {GRUCell: {units: 2,"
                         " reset_after: false}}]}}}\n"
                         "  - RepeatVector: {n: 2}\n"
                         "  - RNN: {cell: {LSTMCell: {units: 2}}}\n");
    static const char *const want[] = {
        "gru_cell/kernel", "gru_cell/recurrent_kernel", "gru_cell/bias", "lstm_cell/kernel",
        "lstm_cell/recurrent_kernel", "gru_cell_1/kernel", "gru_cell_1/recurrent_kernel",
        "gru_cell_1/bias"};
    const tfc_layer *l = tfc_model_layer(b.m, 1), *l2 = tfc_model_layer(b.m, 3);
    CU_ASSERT_STRING_EQUAL(l->name, "rnn");
    CU_ASSERT_STRING_EQUAL(l2->name, "rnn_1");
    CU_ASSERT_EQUAL_FATAL(l->nparams, 8);
    for (int p = 0; p < 8; p++) CU_ASSERT_STRING_EQUAL(l->params[p].name, want[p]);
    CU_ASSERT_EQUAL(l->params[7].shape.ndim, 1);
    CU_ASSERT_EQUAL(l2->nparams, 3);
    CU_ASSERT_STRING_EQUAL(l2->params[0].name, "kernel");
    CU_ASSERT_STRING_EQUAL(l2->params[2].name, "bias");
    /* unit_forget_bias: the forget gate's bias starts at 1 */
    float bias[8];
    tfc_model_param_download(b.m, &l2->params[2], bias);
    for (int j = 0; j < 8; j++) CU_ASSERT_EQUAL(bias[j], j >= 2 && j < 4 ? 1.0f : 0.0f);
    unbind(b);
    /* Keras's list of cells: a StackedRNNCells */
    b = bind_model("  - RNN: {cell: [{LSTMCell: {units: 2}}, {LSTMCell: {units: 3}}]}\n");
    l = tfc_model_layer(b.m, 1);
    CU_ASSERT_EQUAL_FATAL(l->nparams, 6);
    CU_ASSERT_STRING_EQUAL(l->params[0].name, "lstm_cell/kernel");
    CU_ASSERT_STRING_EQUAL(l->params[3].name, "lstm_cell_1/kernel");
    CU_ASSERT_EQUAL(l->out_shape.ndim, 1);
    CU_ASSERT_EQUAL(l->out_shape.dim[0], 3);
    unbind(b);
}

static void expect_error(const char *layer, const char *what)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "input: {shape: [4, 3]}\nlayers:\n  - %s\n", layer);
    tfc_test_expect_model_error(yaml, what);
}

static void test_errors(void)
{
    expect_error("RNN: {cell: {LSTMCell: {units: 2}}, return_state: true}",
                 "t.yaml:3:5: error: layers[0].RNN: layer 'rnn': return_state: not supported");
    expect_error("RNN: {cell: {LSTMCell: {units: 2}}, stateful: true}",
                 "t.yaml:3:5: error: layers[0].RNN: layer 'rnn': stateful: not supported");
    expect_error("RNN: {cell: {Dense: {units: 2}}}",
                 "t.yaml:3:18: error: layers[0].RNN.cell.Dense: Dense is not a recurrent cell");
    expect_error("RNN: {cell: {LSTMCell: {units: 2, recurrent_dropout: 1}}}",
                 "t.yaml:3:58: error: layers[0].RNN.cell.LSTMCell.recurrent_dropout:");
    expect_error("RNN: {cell: {LSTMCell: {units: 2, return_sequences: true}}}",
                 "unknown key 'return_sequences'");
    expect_error("RNN: {cell: {GRUCell: {units: 2, use_cudnn: auto}}}", "unknown key 'use_cudnn'");
    expect_error("RNN: {cell: {LSTMCell: {units: 2, activation: softmax}}}", "activation softmax");
    expect_error("RNN: {cell: {SimpleRNNCell: {}}}", "units");
    expect_error("RNN: {return_sequences: true}", "cell: required");
    expect_error("RNN: {cell: {LSTMCell: {units: 2}, GRUCell: {units: 2}}}", "expected one cell");
    expect_error("RNN: {cell: {StackedRNNCells: {cells: []}}}", "cells: expected a list");
    expect_error("RNN: {cell: [{LSTMCell: {units: 2}}, {Dense: {units: 2}}]}",
                 "t.yaml:3:43: error: layers[0].RNN.cell[1].Dense: Dense is not a recurrent cell");
    expect_error("RNN: {cell: {StackedRNNCells: {cells: [{LSTMCell: {units: 2}}], x: 1}}}",
                 "unknown key 'x'");
    expect_error("RNN: {cell: {StackedRNNCells: {cells: [{Conv2D: {filters: 2}}]}}}",
                 "t.yaml:3:45: error: layers[0].RNN.cell.StackedRNNCells.cells[0].Conv2D: "
                 "Conv2D is not a recurrent cell");
    expect_error("RNN: {cell: {StackedRNNCells: {cells: [{LSTMCell: {units: 2,"
                 " kernel_regularizer: l2}}]}}}",
                 "kernel_regularizer: not supported in a StackedRNNCells");
    expect_error("RNN: {cell: {StackedRNNCells: {cells: [{StackedRNNCells: {cells: []}}]}}}",
                 "StackedRNNCells is not a recurrent cell");
    expect_error("Bidirectional: {layer: {RNN: {cell: {LSTMCell: {units: 2}},"
                 " go_backwards: true}}}", "go_backwards: must be false");
    tfc_test_expect_model_error("input: {shape: [4]}\nlayers:\n"
                                "  - RNN: {cell: {LSTMCell: {units: 2}}}\n",
                                "needs a sequence input");
}

/* A single cell's regularizers and constraints are its RNN's weights' (and a Bidirectional's
 * RNN's), as Keras's */
static void test_regularizers(void)
{
    static const char *const cases[] = {
        "  - RNN: {cell: {LSTMCell: {units: 2, kernel_regularizer: {type: l2, l2: 0.25},"
        " recurrent_constraint: non_neg}}}\n",
        "  - Bidirectional: {layer: {RNN: {cell: {LSTMCell: {units: 2, kernel_regularizer:"
        " {type: l2, l2: 0.25}, recurrent_constraint: non_neg}}}}}\n"};
    for (int k = 0; k < 2; k++) {
        bound b = bind_model(cases[k]);
        const tfc_layer *l = tfc_model_layer(b.m, 1);
        for (int p = 0; p < l->nparams; p++) {
            const int kernel = strstr(l->params[p].name, "recurrent") == NULL &&
                               strstr(l->params[p].name, "kernel") != NULL;
            const int rec = strstr(l->params[p].name, "recurrent_kernel") != NULL;
            CU_ASSERT_EQUAL(l->params[p].l2, kernel ? 0.25f : 0.0f);
            CU_ASSERT_EQUAL(l->params[p].constraint.kind != TFC_CONSTRAINT_NONE, rec);
        }
        unbind(b);
    }
    tfc_test_expect_model_error("input: {shape: [4, 3]}\nlayers:\n"
                                "  - RNN: {cell: {LSTMCell: {units: 2, bias_regularizer: l9}}}\n",
                                "layers[0].RNN.cell.LSTMCell.bias_regularizer");
}

/* A backend other than the CPU (a CPU backend posing as device 0) refuses an RNN while it is
 * CPU-first, and a Bidirectional around one (which takes its flag), naming the layer and its
 * type; a Bidirectional around an LSTM binds */
static void test_device_refused(void)
{
    static const char *const layers[] = {
        "RNN: {name: v, cell: {LSTMCell: {units: 2}}}",
        "Bidirectional: {name: v, layer: {RNN: {cell: {LSTMCell: {units: 2}}}}}",
        "Bidirectional: {name: v, layer: {LSTM: {units: 2}}}"};
    tfc_backend *be = tfc_cpu_backend_create(1);
    for (size_t i = 0; i < sizeof layers / sizeof *layers; i++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [4, 3]}\nlayers:\n  - %s\n", layers[i]);
        tfc_model *m = tfc_test_model(yaml);
        TFC_ASSERT(m && be);
        const tfc_layer_ops *ops = tfc_model_layer(m, 0)->ops;
        CU_ASSERT_EQUAL(ops->cpu_first, i < 2 ? tfc_layer_lookup("RNN")->cpu_first : 0);
        tfc_error err;
        tfc_error_clear(&err);
        be->device = 0;
        tfc_status st = tfc_model_bind(m, be, 2, &err);
        be->device = -1;
        CU_ASSERT_EQUAL(st, ops->cpu_first ? TFC_ERR_CONFIG : TFC_OK);
        if (ops->cpu_first) {
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'v'"));
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, ops->type));
        }
        tfc_model_free(m);
    }
    tfc_backend_free(be);
}

TFC_TEST_MAIN("rnn_cell", {"device_refused", test_device_refused},
              {"keras_parity", test_keras_parity},
              {"same_as_layers", test_same_as_layers}, {"weight_names", test_weight_names},
              {"errors", test_errors}, {"regularizers", test_regularizers})
