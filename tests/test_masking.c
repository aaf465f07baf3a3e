/* Masking (keras.layers.Masking): its values and gradient (padding steps zeroed, a NaN step
 * real), the mask it makes reaching LSTM, GRU, Bidirectional, GlobalAveragePooling1D and
 * MultiHeadAttention, variable-length batches (examples of lengths 5, 9 and 17 padded together
 * give what each gives alone, also fed through a tfrecord source and padded_batch), Keras
 * parity (tests/ref/keras_masking.py), its configuration errors, the refusals of a backend
 * without its kernels and of the ONNX export, and a short training run on such a pipeline. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/onnx.h"
#include "cpu/cpu.h"
#include "data/data.h"
#include "graph/model.h"
#include "graph/model_internal.h"
#include "gradcheck.h"
#include "seqref.h"
#include "solver/solver.h"
#include "testutil.h"

/* Values: steps whose every feature is the mask value (0.5) become zeros, a step with one
 * other value or a NaN is real and passes unchanged; the mask the graph makes says the same;
 * the backward op adds dy at real steps only. */
static void test_values(void)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *m = tfc_test_bound_model("input: {shape: [4, 2]}\n"
                                        "layers:\n  - Masking: {mask_value: 0.5}\n", be, 2);
    const float x[16] = {1, 2, 0.5f, 0.5f, 0.5f, -3, 0.5f, 0.5f,
                         NAN, 0.5f, 0, 0, 0.5f, 0.5f, 4, 5};
    static const float want_mask[8] = {1, 0, 1, 0, 1, 1, 0, 1};
    float *y = tfc_test_run_at(m, 0, x, 2);
    for (int r = 0; r < 8; r++) {
        CU_ASSERT_EQUAL(m->host_mask[r], want_mask[r]);
        for (int c = 0; c < 2; c++) {
            const float want = want_mask[r] ? x[2 * r + c] : 0.f;
            CU_ASSERT(isnan(want) ? isnan(y[2 * r + c]) : y[2 * r + c] == want);
        }
    }
    CU_ASSERT(tfc_model_layer(m, 0)->mask_out);
    float dy[16], dx[16];
    for (int k = 0; k < 16; k++) dy[k] = (float)k, dx[k] = 1.f;
    be->ops->masking_backward(be, 8, 2, 0.5f, x, dy, dx);
    for (int k = 0; k < 16; k++) CU_ASSERT_EQUAL(dx[k], want_mask[k / 2] ? 1.f + dy[k] : 1.f);
    free(y);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* The mask reaches every consumer as an Embedding(mask_zero)'s does, and a training step's
 * input gradient is zero at the masked steps (Keras: the mask has no gradient, the output
 * there is the constant 0). */
static void test_mask_reaches(void)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *m = tfc_test_bound_model(
        "input: {shape: [6, 3]}\n"
        "layers:\n"
        "  - Masking: {name: masking}\n"
        "  - LSTM: {name: lstm, units: 3, return_sequences: true}\n"
        "  - Bidirectional: {name: bi, layer: {GRU: {units: 2, return_sequences: true}}}\n"
        "  - MultiHeadAttention: {name: mha, num_heads: 1, key_dim: 2, inputs: [bi, masking]}\n"
        "  - GlobalAveragePooling1D: {name: pool}\n"
        "  - Dense: {units: 2}\n"
        "loss: mse\n",
        be, 2);
    for (int i = 1; i <= 4; i++) CU_ASSERT(tfc_model_layer(m, i)->mask_in);
    CU_ASSERT(!tfc_model_layer(m, 5)->mask_in);
    float x[36], labels[4] = {0.5f, -1, 2, 0};
    tfc_test_fill(x, 36, -1, 1, 5);
    memset(x + 3 * 4, 0, 6 * 4);  /* example 0: steps 4 and 5 padding */
    memset(x + 18 + 3, 0, 3 * 4); /* example 1: step 1 masked between real ones */
    tfc_model_want_input_grad(m, 1);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_batch_result r;
    TFC_ASSERT(tfc_model_forward(m, x, 2, 1, 1, 0, &err) == TFC_OK);
    TFC_ASSERT(tfc_model_loss(m, labels, 1, &r, &err) == TFC_OK);
    tfc_model_zero_grad(m);
    tfc_model_backward(m);
    float g[36];
    be->ops->download(be, g, tfc_model_input_grad(m), sizeof g);
    int zero_masked = 1, some_real = 0;
    for (int k = 0; k < 36; k++) {
        const int step = k / 3, masked = step == 4 || step == 5 || step == 7;
        if (masked) zero_masked &= g[k] == 0.f;
        else some_real |= g[k] != 0.f;
    }
    CU_ASSERT(zero_masked && some_real);
    tfc_model_free(m);
    tfc_backend_free(be);
}

static const char *const varlen_model =
    "input: {shape: [null, 3], max_length: 17}\n"
    "layers:\n"
    "  - Masking: {}\n"
    "  - LSTM: {units: 4, return_sequences: true}\n"
    "  - Bidirectional: {layer: {GRU: {units: 3, return_sequences: true}}}\n"
    "  - GlobalAveragePooling1D: {}\n"
    "  - Dense: {units: 3}\n";

static const int lens[3] = {5, 9, 17};

/* Step s of example i: nonzero features (0 is padding). */
static void example_step(int i, int s, float *out)
{
    for (int c = 0; c < 3; c++) out[c] = 0.25f + (float)sin(0.7 * s + 1.3 * i + c) * 0.5f + 0.5f;
}

/* Output rows [3, 3] of the padded batch `x` [3, t, 3] against each example alone at its own
 * length: the largest relative difference. */
static double against_alone(tfc_model *m, int t, const float *x, const float *batch)
{
    double worst = 0;
    for (int i = 0; i < 3; i++) {
        float *alone = tfc_test_run_at(m, lens[i], x + (size_t)i * t * 3, 1);
        for (int j = 0; j < 3; j++)
            worst = fmax(worst, fabs(alone[j] - batch[i * 3 + j]) / (1 + fabs(alone[j])));
        free(alone);
    }
    return worst;
}

/* Examples of lengths 5, 9 and 17 padded to 17 in one batch give each example's output
 * alone (its length, no padding): the padding changes nothing; a model bound for inference
 * only gives the same. */
static void test_lengths(void)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *m = tfc_test_bound_model(varlen_model, be, 3);
    float *x = calloc(3 * 17 * 3, 4);
    for (int i = 0; i < 3; i++)
        for (int s = 0; s < lens[i]; s++) example_step(i, s, x + (i * 17 + s) * 3);
    float *batch = tfc_test_run_at(m, 17, x, 3);
    double worst = against_alone(m, 17, x, batch);
    /* bound for inference only (the predictor's layout), the same weights: the same */
    tfc_model *inf = tfc_test_model(varlen_model);
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(inf && tfc_model_bind_inference(inf, be, 3, &err) == TFC_OK &&
               tfc_model_init_weights(inf, 7, &err) == TFC_OK);
    float *served = tfc_test_run_at(inf, 17, x, 3);
    for (int k = 0; k < 9; k++)
        worst = fmax(worst, fabs(served[k] - batch[k]) / (1 + fabs(batch[k])));
    CU_ASSERT(worst <= 1e-5);
    printf("\n  padded against alone: worst relative difference %.3g ", worst);
    free(batch), free(served), free(x);
    tfc_model_free(inf);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* The same through a pipeline: [T, 3] float records of a tfrecord file (shape [-1, 3]),
 * padded_batch padding each batch to its longest element, the model run at that length. */
static void test_pipeline(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    const char *path = tfc_test_path("seq3.tfrecord");
    tfc_tfrecord_writer *w = tfc_tfrecord_writer_open(path, 0, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    for (int i = 0; i < 3; i++) {
        float v[17 * 3];
        for (int s = 0; s < lens[i]; s++) example_step(i, s, v + s * 3);
        tfc_tensor t = {TFC_F32, {.ndim = 2, .dim = {lens[i], 3}}, v, -1};
        const char *key = "x";
        CU_ASSERT_EQUAL_FATAL(tfc_tfrecord_write(w, 1, &key, &t, &err), TFC_OK);
    }
    CU_ASSERT_EQUAL_FATAL(tfc_tfrecord_writer_close(w, &err), TFC_OK);
    char yaml[512];
    snprintf(yaml, sizeof yaml, "{type: tfrecord, files: %s, features: {key: x, shape: [-1, 3]}}",
             path);
    tfc_data_options o = {.key = "data.train", .base_dir = tfc_test_tmpdir(), .seed = 1};
    tfc_pipeline *p = tfc_pipeline_from_yaml(yaml, &o, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_add_yaml(p, "{padded_batch: {batch_size: 3}}", &err),
                          TFC_OK);
    tfc_batch b;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(b.features.shape.ndim, 3);
    CU_ASSERT_EQUAL_FATAL(b.features.shape.dim[1], 17);
    for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(((int32_t *)b.lengths.data)[i], lens[i]);
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *m = tfc_test_bound_model(varlen_model, be, 3);
    float *x = malloc(3 * 17 * 3 * 4);
    memcpy(x, b.features.data, 3 * 17 * 3 * 4);
    float *batch = tfc_test_run_at(m, 17, x, 3);
    CU_ASSERT(against_alone(m, 17, x, batch) <= 1e-5);
    free(batch), free(x);
    tfc_model_free(m);
    tfc_backend_free(be);
    tfc_pipeline_free(p);
}

/* Training end to end: a solver whose tfrecord source gives [T, 3] records of lengths 2 to
 * 17 with a class each, shuffled and padded per batch (padded_batch to the batch's longest),
 * trains a Masking -> Bidirectional GRU -> masked mean -> Dense model for 20 steps with a
 * finite loss below chance's (ln 2). */
static void test_train(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_tfrecord_writer *w = tfc_tfrecord_writer_open(tfc_test_path("train3.tfrecord"), 0, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    for (int i = 0; i < 32; i++) {
        const int len = 2 + (i * 5) % 16;
        int32_t label = i % 2;
        float v[17 * 3];
        for (int s = 0; s < len; s++)
            for (int c = 0; c < 3; c++) v[s * 3 + c] = (label ? 0.5f : -0.5f) + 0.1f * (float)c;
        tfc_tensor t[2] = {{TFC_F32, {.ndim = 2, .dim = {len, 3}}, v, -1},
                           {TFC_I32, {.ndim = 0}, &label, -1}};
        const char *keys[2] = {"x", "y"};
        CU_ASSERT_EQUAL_FATAL(tfc_tfrecord_write(w, 2, keys, t, &err), TFC_OK);
    }
    CU_ASSERT_EQUAL_FATAL(tfc_tfrecord_writer_close(w, &err), TFC_OK);
    tfc_test_write("masking_model.yaml",
                   "name: frames\n"
                   "input: {shape: [null, 3], max_length: 17}\n"
                   "layers:\n"
                   "  - Masking: {}\n"
                   "  - Bidirectional: {layer: {GRU: {units: 4, return_sequences: true}}}\n"
                   "  - GlobalAveragePooling1D: {}\n"
                   "  - Dense: {units: 2, activation: softmax}\n",
                   -1);
    const char *solver =
        "model: masking_model.yaml\n"
        "data:\n"
        "  train:\n"
        "    source: {type: tfrecord, files: train3.tfrecord, features: {key: x, shape: [-1, 3]},\n"
        "             labels: {key: y}, num_classes: 2}\n"
        "    pipeline: [{shuffle: {buffer_size: 32}}, {repeat: {}},\n"
        "               {padded_batch: {batch_size: 8}}]\n"
        "optimizer: {type: adam, learning_rate: 0.05}\n"
        "max_iter: 20\n"
        "display: 0\n"
        "seed: 3\n";
    tfc_solver_options o = {0};
    o.out_dir = tfc_test_path("masking_run");
    o.threads = 1;
    tfc_solver *sv = tfc_solver_load(tfc_test_write("masking_solver.yaml", solver, -1), &o, &err);
    if (!sv) printf("\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sv);
    tfc_train_result res;
    tfc_status st = tfc_solver_train(sv, &res, &err);
    if (st) printf("\n%s", err.text);
    CU_ASSERT_EQUAL(st, TFC_OK);
    CU_ASSERT_EQUAL(res.iterations, 20);
    CU_ASSERT(res.have_train && isfinite(res.train.loss) && res.train.loss < log(2.0));
    printf("\n  train loss after 20 steps %.3g ", res.train.loss);
    tfc_solver_free(sv);
}

/* Keras parity (tests/ref/keras_masking.py): each fixture's model, its weights loaded by
 * name, run at lengths 5, 9 and 17 on the fixture's x<T> gives Keras's y<T>. */
static void test_keras_parity(void)
{
    static const char *const cases[] = {"alone", "lstm_last", "bidir_gru_mean", "gru_sequence",
                                         "attention_mean", NULL};
    tfc_backend *be = tfc_cpu_backend_create(1);
    double worst_abs = 0, worst_rel = 0;
    tfc_test_keras_lengths("tests/ref/masking", cases, be, &worst_abs, &worst_rel);
    CU_ASSERT(worst_rel <= 1e-5);
    printf("\n  keras parity: max abs %.3g, max rel %.3g ", worst_abs, worst_rel);
    tfc_backend_free(be);
}

/* The first error of loading `yaml` contains `want`. */
static void refused(const char *yaml, const char *want)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), "test.yaml", &err);
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, want));
    if (!strstr(err.text, want)) printf("\nwanted '%s' in: %s", want, err.text);
    tfc_model_free(m);
}

static void test_config_errors(void)
{
    refused("input: {shape: [5, 3]}\nlayers:\n  - Dense: {units: 2}\n  - Masking: {}\n",
            "layer 'masking': makes the sequence mask from the model input");
    refused("input: {shape: [5]}\nlayers:\n  - Masking: {}\n",
            "needs a sequence input of shape (steps, features), got (5,)");
    refused("input: {shape: [5], dtype: int32}\nlayers:\n  - Masking: {}\n",
            "must take the model input");
    refused("input: {shape: [5, 3]}\nlayers:\n  - Masking: {mask_value: x}\n", "mask_value");
    refused("input: {shape: [5, 3]}\nlayers:\n  - Masking: {mask: 1}\n", "mask");
    /* one mask per model: a second Masking of the input would get the first one's */
    refused("input: {shape: [5, 3]}\nlayers:\n  - Masking: {name: a}\n"
            "  - Masking: {name: b, mask_value: 1, inputs: input}\n"
            "  - Concatenate: {inputs: [a, b]}\n",
            "layer 'b': a second layer making the sequence mask from the model input (after "
            "layer 'a')");
}

/* A backend without Masking's kernels refuses the model at bind, naming the layer and the op:
 * the CPU's table with the slot emptied. */
static void test_missing_kernel_refused(void)
{
    tfc_model *m = tfc_test_model("input: {shape: [4, 2]}\nlayers:\n"
                                  "  - Masking: {name: pad}\n  - LSTM: {units: 2}\n");
    tfc_backend *be = tfc_cpu_backend_create(1);
    TFC_ASSERT(m && be);
    tfc_backend_ops lacking = *be->ops;
    const tfc_backend_ops *cpu_ops = be->ops;
    lacking.masking_backward = NULL;
    be->ops = &lacking;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'pad'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no kernel for Masking yet (op 'masking_backward')"));
    be->ops = cpu_ops;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* tfc-export has no ONNX form for Masking yet: refused, naming the layer. */
static void test_onnx_refused(void)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *m = tfc_test_bound_model(varlen_model, be, 1);
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_NOT_EQUAL(tfc_onnx_export(m, NULL, tfc_test_path("masking.onnx"), &err), TFC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "layer 'masking' (Masking)"));
    tfc_model_free(m);
    tfc_backend_free(be);
}

TFC_TEST_MAIN("masking", {"values", test_values}, {"mask_reaches", test_mask_reaches},
              {"lengths", test_lengths}, {"pipeline", test_pipeline},
              {"keras_parity", test_keras_parity}, {"config_errors", test_config_errors},
              {"missing_kernel_refused", test_missing_kernel_refused},
              {"onnx_refused", test_onnx_refused}, {"train", test_train})
