/* Keras's `trainable: false` (a Layer argument; model.c, graph.c, batch_norm.c): training
 * against Keras 3's own (tests/ref/keras_trainable.py: SGD with momentum through frozen layers
 * at the front, in the middle and wrapped, a frozen BatchNormalization in inference mode, a
 * frozen weight's regularizer adding nothing), the frozen weights' bits unchanged, the counts,
 * the backward passes a step skips, the input gradient through a frozen BatchNormalization
 * checked numerically, a resumed run repeating the uninterrupted one, and the errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu/cpu.h"
#include "graph/model.h"
#include "graph/model_internal.h"
#include "gradcheck.h"
#include "kerassteps.h"
#include "testutil.h"

/* The fixture's weight NAME before training (`NAME`) and tfc's after (the run's final
 * weights) hold the same bits. */
static int unchanged(const tfc_st_file *f, const char *run, const char *name)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/final.safetensors", tfc_test_path(run));
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *got = tfc_st_open(path, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(got);
    const tfc_st_tensor *a = tfc_st_find(got, name), *b = tfc_st_find(f, name);
    CU_ASSERT_FATAL(a && b && a->numel == b->numel);
    float *x = malloc((size_t)a->numel * 4), *y = malloc((size_t)a->numel * 4);
    tfc_st_tensor_to_f32(a, x);
    tfc_st_tensor_to_f32(b, y);
    int same = !memcmp(x, y, (size_t)a->numel * 4);
    free(x), free(y);
    tfc_st_close(got);
    return same;
}

/* Keras 3's weights after train_on_batch's steps of SGD with momentum, against tfc's solver
 * from the same weights on the same batch, on 1 and 2 threads and on the host path; the
 * frozen weights (BatchNormalization's moving statistics among them) bit for bit as they
 * started, the trainable ones moved. */
static void test_keras_steps(void)
{
    static const struct {
        const char *name;
        const char *frozen[8], *moved[4];
    } cases[] = {
        {"image",
         {"c/kernel", "c/bias", "bn/gamma", "bn/moving_mean", "bn/moving_variance", "d/kernel",
          "d/bias", NULL},
         {"c2/kernel", "bn2/moving_mean", "out/kernel", NULL}},
        {"sequence",
         {"e/embeddings", "bi/forward_gru/kernel", "bi/backward_gru/recurrent_kernel", NULL},
         {"lstm/kernel", "lstm/recurrent_kernel", "out/bias", NULL}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char path[256], xn[64], yn[64], run[64];
        snprintf(path, sizeof path, "tests/ref/trainable/%s.safetensors", cases[c].name);
        tfc_error err;
        tfc_error_clear(&err);
        tfc_st_file *f = tfc_st_open(path, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        snprintf(xn, sizeof xn, "tr_%s_x.npy", cases[c].name);
        snprintf(yn, sizeof yn, "tr_%s_y.npy", cases[c].name);
        tfc_ks_write_npy(tfc_st_find(f, "x"), xn);
        tfc_ks_write_npy(tfc_st_find(f, "labels"), yn);
        const char *solver = tfc_ks_solver(f, xn, yn, NULL);
        char abs_path[1200], cwd[900];
        CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
        snprintf(abs_path, sizeof abs_path, "%s/%s", cwd, path);
        for (int v = 1; v <= 3; v++) { /* 1, 2 threads; 2 on the host path */
            const int threads = v > 1 ? 2 : 1;
            snprintf(run, sizeof run, "tr_%s_%d", cases[c].name, v);
            CU_ASSERT_EQUAL_FATAL(tfc_ks_train("trainable.yaml", solver, abs_path, run, threads,
                                               NULL, 0, v == 3, &err),
                                  TFC_OK);
            int n;
            double worst = tfc_ks_worst(f, run, &n);
            printf("\n  %s, %d thread%s%s: %d weights, max difference vs Keras %.3g",
                   cases[c].name, threads, threads > 1 ? "s" : "", v == 3 ? ", host step" : "",
                   n, worst);
            CU_ASSERT(n >= 10);
            CU_ASSERT(worst <= 2e-5);
            for (int k = 0; cases[c].frozen[k]; k++) {
                if (!unchanged(f, run, cases[c].frozen[k]))
                    printf("\n    %s moved", cases[c].frozen[k]);
                CU_ASSERT(unchanged(f, run, cases[c].frozen[k]));
            }
            for (int k = 0; cases[c].moved[k]; k++)
                CU_ASSERT(!unchanged(f, run, cases[c].moved[k]));
        }
        tfc_st_close(f);
    }
}

static const char image_yaml[] =
    "input: {shape: [6, 6, 2]}\n"
    "layers:\n"
    "  - Rescaling: {scale: 0.5}\n"
    "  - Conv2D: {name: c, filters: 3, kernel_size: 3, trainable: false}\n"
    "  - BatchNormalization: {name: bn, trainable: false}\n"
    "  - Conv2D: {name: c2, filters: 4, kernel_size: 2, inputs: bn}\n"
    "  - Conv2D: {name: side, filters: 4, kernel_size: 2, inputs: bn, trainable: false}\n"
    "  - Add: {inputs: [c2, side]}\n"
    "  - Flatten\n"
    "  - Dense: {name: d, units: 8, trainable: false}\n"
    "  - Dense: {name: out, units: 4, trainable: true}\n"
    "loss: sparse_categorical_crossentropy\n";

/* Counts: frozen weights are not trainable (Keras's count_params splits them so) but are
 * weights; the backward passes a step runs: none for the frozen and weightless layers in
 * front of the first trainable one, every one after it; all of them when the input's
 * gradient is wanted. Bound, the graph skips the same ones. */
static void test_counts_and_plan(void)
{
    tfc_model *m = tfc_test_model(image_yaml);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    const int64_t c = 3 * 3 * 2 * 3 + 3, bn = 4 * 3, c2 = 2 * 2 * 3 * 4 + 4, d = 36 * 8 + 8,
                  out = 8 * 4 + 4;
    CU_ASSERT_EQUAL(tfc_model_param_count(m), c + bn + 2 * c2 + d + out);
    CU_ASSERT_EQUAL(tfc_model_weight_count(m), c + bn + 2 * c2 + d + out);
    CU_ASSERT_EQUAL(tfc_model_trainable_count(m), c2 + out);
    CU_ASSERT(tfc_model_layer(m, 1)->frozen && !tfc_model_layer(m, 3)->frozen);
    const tfc_param *ck = &tfc_model_layer(m, 1)->params[0];
    CU_ASSERT(ck->frozen && !ck->trainable);
    /* bn's moving statistics were never trainable: not frozen either */
    CU_ASSERT(!tfc_model_layer(m, 2)->params[2].frozen && tfc_model_layer(m, 2)->params[0].frozen);
    int runs[9];
    const int want[9] = {0, 0, 0, 1, 0, 1, 1, 1, 1};
    tfc_model_backward_plan(m, 0, runs);
    for (int i = 0; i < 9; i++) CU_ASSERT_EQUAL(runs[i], want[i]);
    tfc_model_backward_plan(m, 1, runs);
    for (int i = 0; i < 9; i++) CU_ASSERT_EQUAL(runs[i], 1);
    int64_t fw, bw;
    tfc_model_layer_flops(m, 1, &fw, &bw);
    CU_ASSERT(fw > 0 && bw == 0);
    tfc_model_layer_flops(m, 3, &fw, &bw);
    CU_ASSERT(bw > 0);
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
    for (int i = 0; i < 9; i++) CU_ASSERT_EQUAL(m->bound[i].no_backward, !want[i]);
    tfc_model_want_input_grad(m, 1);
    for (int i = 0; i < 9; i++) CU_ASSERT_EQUAL(m->bound[i].no_backward, 0);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* The input's gradient through frozen layers, a frozen BatchNormalization's inference-mode
 * derivative among them, and the trainable weights' gradients, against central differences
 * (the gradient checker compares trainable weights only: the frozen ones have none to
 * check). */
static void test_gradients(void)
{
    static const char yaml[] =
        "input: {shape: [4, 4, 3]}\n"
        "layers:\n"
        "  - BatchNormalization: {trainable: false, moving_mean_initializer: {type: "
        "random_uniform}, moving_variance_initializer: {type: random_uniform, minval: 0.5, "
        "maxval: 1.5}, gamma_initializer: {type: random_uniform, minval: 0.5, maxval: 1.5}}\n"
        "  - Conv2D: {filters: 3, kernel_size: 2, trainable: false}\n"
        "  - BatchNormalization: {trainable: false}\n"
        "  - Activation: {activation: relu}\n"
        "  - Conv2D: {filters: 2, kernel_size: 2}\n"
        "  - BatchNormalization: {trainable: false, center: false}\n"
        "  - Flatten\n"
        "  - Dense: {units: 3}\n"
        "loss: sparse_categorical_crossentropy\n";
    tfc_model *m = tfc_test_model(yaml);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    float x[4 * 48];
    int32_t labels[4] = {0, 2, 1, 2};
    tfc_test_fill(x, 4 * 48, -1, 1, 5);
    gradcheck_result r = tfc_gradcheck(m, 4, x, labels, 64, 7);
    printf("\n  max error %.3g at %s (%d checked)", r.max_err, r.worst, r.checked);
    CU_ASSERT(r.max_err < TFC_GRADCHECK_BOUND);
    CU_ASSERT(r.checked > 48);
    tfc_model_free(m);
}

/* A frozen model's run stopped at 3 and resumed from its snapshot ends with the uninterrupted
 * run's weights, bit for bit (the optimizer's slots are the trainable weights' only). */
static void test_resume(void)
{
    tfc_test_write_split("tr_x.npy", "tr_y.npy", 64, 5);
    static const char solver[] =
        "model:\n  name: tr\n  input: {shape: [16]}\n  layers:\n"
        "    - Dense: {name: h, units: 8, activation: tanh, trainable: false}\n"
        "    - BatchNormalization: {trainable: false}\n"
        "    - Dense: {name: h2, units: 8, activation: relu}\n"
        "    - Dense: {name: out, units: 4}\n"
        "data:\n  train:\n    source: {type: npy, features: tr_x.npy, labels: tr_y.npy}\n"
        "    pipeline: [{repeat: {}}, {batch: {batch_size: 16}}]\n"
        "optimizer: {type: adam, learning_rate: 0.01}\nlr_policy: fixed\n"
        "max_iter: 6\ntest_interval: 0\ndisplay: 0\nseed: 3\n"
        "snapshot: {interval: 3, keep: 0}\n";
    tfc_ks_expect_resume_exact("tr.yaml", solver, "tr", "tr", 3);
}

/* `trainable` takes a boolean, at its FILE:LINE:COL; a wrapped layer's own is an unknown key
 * (the wrapper's freezes it). */
static void test_errors(void)
{
    tfc_test_expect_model_error("input: {shape: [4]}\nlayers:\n  - Dense: {units: 2, "
                                "trainable: maybe}\n",
                                "t.yaml:3:34: error: layers[0].Dense.trainable:");
    tfc_test_expect_model_error("input: {shape: [4, 2]}\nlayers:\n  - Bidirectional: {layer: "
                                "{LSTM: {units: 2, trainable: false}}}\n",
                                "trainable");
}

TFC_TEST_MAIN("trainable", {"keras_steps", test_keras_steps},
              {"counts_and_plan", test_counts_and_plan}, {"gradients", test_gradients},
              {"resume", test_resume}, {"errors", test_errors})
