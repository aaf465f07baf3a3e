/* LayerScale (keras.applications.convnext.LayerScale): Keras 3 parity from the fixtures
 * tests/ref/keras_layer_scale.py wrote (tests/ref/layer_scale/: outputs and the input's and
 * the factors' gradients), its weight, the mask it passes on, argument errors, and the
 * refusal of a backend without the Multiply ops it runs on. Run from the repository's
 * root. */
#include <stdio.h>
#include <string.h>

#include "graph/model.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "layers/layer.h"
#include "testutil.h"

/* Each fixture through tests/util/kerasref's harness, trained: Keras's weights loaded by
 * name, the inference output and the MSE loss's gradients of the input and of every weight
 * within 1e-5 of the largest value. On an image's channels (first in the model, then after
 * a Dense) and on a vector between two Dense layers. */
static void test_keras_parity(void)
{
    static const tfc_keras_parity p = {.dir = "layer_scale", .tol = 1e-5, .all_grads = 1};
    static const char *const names[] = {"image", "vector", NULL};
    tfc_test_keras_cases(&p, names);
}

/* One weight, gamma [projection_dim], at init_values, trainable; the mask passes on. */
static void test_weight_and_mask(void)
{
    tfc_model *m = tfc_test_model("input: {shape: [5], dtype: int32}\nlayers:\n"
                                  "  - Embedding: {input_dim: 9, output_dim: 4, "
                                  "mask_zero: true}\n"
                                  "  - LayerScale: {init_values: 0.25, projection_dim: 4}\n");
    TFC_ASSERT(m != NULL);
    const tfc_layer *l = tfc_model_layer(m, 1);
    CU_ASSERT_STRING_EQUAL(l->name, "layer_scale");
    CU_ASSERT(l->mask_in && l->mask_out);
    CU_ASSERT_EQUAL_FATAL(l->nparams, 1);
    CU_ASSERT_STRING_EQUAL(l->params[0].name, "gamma");
    CU_ASSERT(l->params[0].trainable);
    CU_ASSERT(l->params[0].shape.ndim == 1 && l->params[0].shape.dim[0] == 4);
    CU_ASSERT_EQUAL(l->params[0].init.kind, TFC_INIT_CONSTANT);
    CU_ASSERT_EQUAL(l->params[0].init.a, 0.25);
    tfc_model_free(m);
}

static void expect_error(const char *layer, const char *what)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "input: {shape: [3, 4]}\nlayers:\n  - %s\n", layer);
    const tfc_error err = tfc_test_model_error(yaml);
    if (!strstr(err.msg, what) || !strstr(err.text, "t.yaml:3:"))
        fprintf(stderr, "\n%s: %s", layer, err.text);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, what));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "t.yaml:3:"));
}

static void test_argument_errors(void)
{
    expect_error("LayerScale: {init_values: 1.0e-6, projection_dim: 3}",
                 "projection_dim 3 must be the input's channels, its last axis: the input is "
                 "(3, 4)");
    expect_error("LayerScale: {projection_dim: 4}", "init_values");
    expect_error("LayerScale: {init_values: 1.0e-6}", "projection_dim");
    expect_error("LayerScale: {init_values: 1.0e-6, projection_dim: 0}",
                 "expected an integer in [1, 16777216]");
    expect_error("LayerScale: {init_values: 1.0e-6, projection_dim: 4, gamma: 1}",
                 "unknown key 'gamma'");
    const tfc_error err = tfc_test_model_error("input: {shape: [4], dtype: int32}\nlayers:\n"
                                               "  - LayerScale: {init_values: 1, "
                                               "projection_dim: 4}\n");
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "takes float32 input, not token ids"));
}

static void drop_mul(tfc_backend_ops *ops)
{
    ops->mul = NULL, ops->mul_reduce = NULL;
}

/* A backend without the Multiply ops (the CPU's table with the slots emptied) refuses the
 * layer at bind, naming it and the op. */
static void test_missing_kernel_refused(void)
{
    tfc_test_expect_refused("input: {shape: [3, 4]}\nlayers:\n"
                            "  - LayerScale: {name: ly, init_values: 1, projection_dim: 4}\n",
                            drop_mul, "layer 'ly'", "(op 'mul')");
}

TFC_TEST_MAIN("layer_scale", {"keras_parity", test_keras_parity},
              {"weight_and_mask", test_weight_and_mask},
              {"argument_errors", test_argument_errors},
              {"missing_kernel_refused", test_missing_kernel_refused})
