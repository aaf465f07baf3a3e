/* Autoencoders: the `autoencode` map op (labels = a copy of the features, docs/data.md), the
 * loss by Keras's long name `mean_squared_error` against image-shaped targets, a small
 * convolutional autoencoder that learns to reproduce its input through the solver, and
 * configs/fashion_autoencoder.yaml loading (where Fashion-MNIST is installed). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/data.h"
#include "gradcheck.h"
#include "graph/model.h"
#include "solver/solver.h"
#include "testutil.h"

/* Scaled images (2, 2, 1) of two elements with int labels: after autoencode each element's
 * labels are its features, same dtype, shape and values, in the spec before any data too. */
static void test_autoencode_values(void)
{
    const float f[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    const int32_t l[2] = {7, 9};
    tfc_tensor tf = {TFC_F32, {.ndim = 4, .dim = {2, 2, 2, 1}}, (void *)f, -1};
    tfc_tensor tl = {TFC_I32, {.ndim = 1, .dim = {2}}, (void *)l, -1};
    tfc_data_options opt = {.seed = 3};
    tfc_error err;
    tfc_error_clear(&err);
    tfc_pipeline *p = tfc_pipeline_from_tensors(&tf, &tl, &opt, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_add_yaml(p, "map: {op: scale, factor: 0.5}", &err), 0);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_add_yaml(p, "map: {op: autoencode}", &err), 0);
    const tfc_component_spec *ls = &tfc_pipeline_element_spec(p)->comp[TFC_COMP_LABELS];
    CU_ASSERT(ls->present && ls->dtype == TFC_F32 && ls->shape.ndim == 3 &&
              ls->shape.dim[0] == 2 && ls->shape.dim[1] == 2 && ls->shape.dim[2] == 1);
    for (int e = 0; e < 2; e++) {
        tfc_batch b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        CU_ASSERT_EQUAL(b.labels.dtype, TFC_F32);
        CU_ASSERT_EQUAL(b.labels.shape.ndim, 3);
        const float want[4] = {e * 2.0f, e * 2.0f + 0.5f, e * 2.0f + 1.0f, e * 2.0f + 1.5f};
        CU_ASSERT(memcmp(b.labels.data, want, sizeof want) == 0);
        CU_ASSERT(memcmp(b.features.data, want, sizeof want) == 0);
    }
    tfc_pipeline_free(p);
}

/* `mean_squared_error` is mse, as a name and as {type:}; an image output takes an image
 * target (a label per pixel and channel). */
static void test_mse_long_name(void)
{
    const char *yamls[] = {"input: {shape: [4, 4, 1]}\nlayers:\n"
                           "  - Conv2D: {filters: 1, kernel_size: 3, padding: same}\n"
                           "loss: mean_squared_error\n",
                           "input: {shape: [4, 4, 1]}\nlayers:\n"
                           "  - Conv2D: {filters: 1, kernel_size: 3, padding: same}\n"
                           "loss: {type: mean_squared_error}\n"};
    for (int k = 0; k < 2; k++) {
        tfc_model *m = tfc_test_model(yamls[k]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        CU_ASSERT_EQUAL(tfc_model_loss_kind(m), TFC_LOSS_MSE);
        CU_ASSERT_EQUAL(tfc_model_label_rows(m) * tfc_model_classes(m), 16);
        tfc_model_free(m);
    }
}

/* A convolutional autoencoder (Conv2D, Conv2DTranspose, UpSampling2D) on 4x4 images in
 * [0, 1] (the synthetic set's 16 features, rescaled) learns to reproduce them: its test mse
 * ends well below the 1/12 of always answering 0.5 (0.083; about 0.01 here), and its
 * root_mean_squared_error is the mse's root. */
static void test_trains(void)
{
    tfc_test_write_split("ax.npy", "ay.npy", 512, 31);
    tfc_test_write_split("tx.npy", "ty.npy", 128, 32);
    const char *pre = "      - map: {op: scale, factor: 0.5, offset: 0.5}\n"
                      "      - map: {op: reshape, shape: [4, 4, 1]}\n"
                      "      - map: {op: autoencode}\n";
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "model:\n  name: ae\n  input: {shape: [4, 4, 1]}\n  layers:\n"
             "    - Conv2D: {filters: 16, kernel_size: 3, strides: 2, padding: same, "
             "activation: relu}\n"
             "    - Conv2DTranspose: {filters: 8, kernel_size: 3, strides: 2, padding: same, "
             "activation: relu}\n"
             "    - UpSampling2D: {size: 1}\n"
             "    - Conv2D: {filters: 1, kernel_size: 3, padding: same, activation: sigmoid}\n"
             "  loss: mean_squared_error\n"
             "  metrics: [mse, root_mean_squared_error]\n"
             "data:\n"
             "  train:\n"
             "    source: {type: npy, features: ax.npy, labels: ay.npy}\n"
             "    pipeline:\n%s"
             "      - shuffle: {buffer_size: 100}\n      - repeat: {}\n"
             "      - batch: {batch_size: 16}\n"
             "  test:\n"
             "    source: {type: npy, features: tx.npy, labels: ty.npy}\n"
             "    pipeline:\n%s      - batch: {batch_size: 48}\n"
             "optimizer: {type: adam, learning_rate: 0.01}\n"
             "max_iter: 400\ntest_interval: 400\ndisplay: 100\nseed: 3\n",
             pre, pre);
    tfc_error err;
    tfc_train_result res;
    tfc_status st = tfc_test_train_result(yaml, "ae.yaml", "ae", &res, &err);
    if (st) fprintf(stderr, "\n%s", err.text);
    CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
    printf("\n  test mse %.4f", res.test.loss);
    CU_ASSERT(res.have_test && res.test.loss < 0.02);
    /* root_mean_squared_error over the test set's batches of 48, 48 and 32 rows: the root of
     * their mean square (the mse), not the mean of their roots */
    printf(", rmse %.6f (sqrt of mse %.6f)", res.test.metric[1], sqrt(res.test.metric[0]));
    CU_ASSERT(fabs(res.test.metric[1] - sqrt(res.test.metric[0])) <= 1e-6 * res.test.metric[1]);
}

/* configs/fashion_autoencoder.yaml loads: its model, and pipelines whose labels (the scaled
 * images) fit the model's 28x28x1 output. Skipped without the data set. */
static void test_config_loads(void)
{
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", R_OK)) {
        printf("\n  skipped: no Fashion-MNIST");
        return;
    }
    tfc_solver_options o = {0};
    o.out_dir = tfc_test_path("fashion_ae");
    o.threads = 1;
    tfc_error err;
    tfc_error_clear(&err);
    tfc_solver *s = tfc_solver_load("configs/fashion_autoencoder.yaml", &o, &err);
    if (!s) fprintf(stderr, "\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL(s);
    tfc_solver_free(s);
}

TFC_TEST_MAIN("autoencoder", {"autoencode_values", test_autoencode_values},
              {"mse_long_name", test_mse_long_name}, {"trains", test_trains},
              {"config_loads", test_config_loads})
