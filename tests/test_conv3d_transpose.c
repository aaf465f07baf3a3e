/* Conv3DTranspose: Keras 3 parity of whole models (tests/ref/keras_conv3d_transpose.py:
 * valid and same padding, unequal strides, output_padding, dilation, no bias, activations;
 * outputs, the input's and every weight's gradient, weights loaded and written under Keras's
 * paths), output shapes against Keras's rule, argument errors at FILE:LINE:COL, and the
 * refusal of a backend without the conv3d ops it runs on. */
#include <stdio.h>
#include <string.h>

#include "graph/model.h"
#include "layers/layer.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "testutil.h"

/* Keras 3 parity (tests/ref/keras_conv3d_transpose.py). */
static void test_keras_parity(void)
{
    static const tfc_keras_parity p = {.dir = "conv3d_transpose", .tol = 1e-5};
    static const char *const names[] = {"ct_valid", "ct_same", "ct_output_padding",
                                        "ct_dilation", NULL};
    tfc_test_keras_cases(&p, names);
}

static void expect_error(const char *layer, const char *needle)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "input: {shape: [4, 6, 5, 4]}\nlayers:\n  - %s\n", layer);
    tfc_test_expect_model_error(yaml, needle);
}

static void test_errors(void)
{
    expect_error("Conv3DTranspose: {filters: 2, kernel_size: 3, strides: 2, "
                 "dilation_rate: [1, 2, 1]}",
                 "strides > 1 with dilation_rate > 1 is not supported");
    expect_error("Conv3DTranspose: {filters: 2, kernel_size: 3, strides: [2, 2, 3], "
                 "output_padding: [1, 1, 3]}",
                 "t.yaml:3:94: error: layers[0].Conv3DTranspose.output_padding: "
                 "output_padding 3 must be less than the stride 3 (as in Keras)");
    expect_error("Conv3DTranspose: {filters: 2, kernel_size: 3, output_padding: 1}",
                 "t.yaml:3:67: error: layers[0].Conv3DTranspose.output_padding: "
                 "output_padding 1 must be less than the stride 1");
    expect_error("Conv3DTranspose: {filters: 2, kernel_size: 3, strides: 2, "
                 "output_padding: [1, 1]}",
                 "t.yaml:3:79: error: layers[0].Conv3DTranspose.output_padding: expected an "
                 "int or a list of 3 [d, h, w]");
    expect_error("Conv3DTranspose: {filters: 2, kernel_size: 3, strides: 2, "
                 "output_padding: -1}", "Conv3DTranspose.output_padding");
    expect_error("Conv3DTranspose: {filters: 2, kernel_size: 3, data_format: channels_first}",
                 "Conv3DTranspose.data_format: not supported by tfc: only channels_last");
    expect_error("Conv3DTranspose: {filters: 2, kernel_size: [2, 3]}",
                 "kernel_size: expected an integer or a list of 3 (a 3-D window), found 2");
    expect_error("Conv3DTranspose: {filters: 2, kernel_size: 2, strides: [1, 2, 1, 1]}",
                 "strides: expected an integer or a list of 3");
    expect_error("Conv3DTranspose: {filters: 2, kernel_size: 3, padding: causal}",
                 "unknown value \"causal\" (one of: valid, same)");
    expect_error("Conv3DTranspose: {kernel_size: 3}", "filters");
    expect_error("Conv3DTranspose: {filters: 2, kernel_size: 0}", "kernel_size");
    expect_error("Conv3DTranspose: {filters: 2, kernel_size: 2, groups: 2}", "groups");
    expect_error("Conv3DTranspose: {filters: 2, kernel_size: 2, kernel_initializer: nope}",
                 "kernel_initializer");
    expect_error("Conv3DTranspose: {filters: 2, kernel_size: 2, lora_rank: 2}", "lora_rank");
    expect_error("Flatten: {}\n  - Conv3DTranspose: {filters: 2, kernel_size: 3}",
                 "needs an input of shape (depth, height, width, channels)");
    tfc_test_expect_model_error("input: {shape: [4, 6, 5, 4]}\nlayers:\n"
                                "  - Conv3DTranspose: {filters: 2, kernel_size: [2, 3]}\n",
                                "t.yaml:3:5: error: layers[0].Conv3DTranspose: layer "
                                "'conv3d_transpose': kernel_size");
}

/* Keras's weights (kernel (kd, kh, kw, filters, in), bias (filters); null is Keras's None),
 * default names, Keras's second class name, and output shapes as Keras 3.15 gives them
 * (measured): valid (n - 1) s + k + output_padding (default max(k, s) - k); same n s, or
 * with output_padding (n - 1) s + k - 2 (k / 2) + output_padding. */
static void test_shapes(void)
{
    tfc_model *m = tfc_test_model("input: {shape: [4, 6, 5, 4]}\nlayers:\n"
                                  "  - Conv3DTranspose: {filters: 6, kernel_size: [1, 2, 3], "
                                  "strides: [1, 2, 4], kernel_regularizer: l2, "
                                  "bias_regularizer: null, data_format: null, "
                                  "output_padding: null}\n"
                                  "  - Convolution3DTranspose: {filters: 2, kernel_size: 3, "
                                  "strides: 2, use_bias: false, padding: same, "
                                  "output_padding: [1, 0, 1]}\n"
                                  "  - Conv3DTranspose: {filters: 1, kernel_size: 2, "
                                  "dilation_rate: [1, 3, 2], padding: same}\n");
    TFC_ASSERT(m != NULL);
    const tfc_layer *l = tfc_model_layer(m, 0), *l2 = tfc_model_layer(m, 1);
    const tfc_layer *l3 = tfc_model_layer(m, 2);
    CU_ASSERT_STRING_EQUAL(l->name, "conv3d_transpose");
    CU_ASSERT_STRING_EQUAL(l2->name, "conv3d_transpose_1");
    CU_ASSERT_STRING_EQUAL(l2->ops->type, "Conv3DTranspose");
    CU_ASSERT_EQUAL(l->nparams, 2);
    CU_ASSERT_STRING_EQUAL(l->params[0].name, "kernel");
    const int64_t want[5] = {1, 2, 3, 6, 4};
    CU_ASSERT_EQUAL(l->params[0].shape.ndim, 5);
    CU_ASSERT(!memcmp(l->params[0].shape.dim, want, sizeof want));
    CU_ASSERT_STRING_EQUAL(l->params[1].name, "bias");
    CU_ASSERT_EQUAL(l->params[1].shape.dim[0], 6);
    CU_ASSERT_EQUAL(l2->nparams, 1);
    /* valid: depth 3 * 1 + 1 = 4, height 5 * 2 + 2 = 12, width 4 * 4 + 3 + (4 - 3) = 20 */
    const int64_t o1[4] = {4, 12, 20, 6}, o2[4] = {8, 23, 40, 2}, o3[4] = {8, 23, 40, 1};
    CU_ASSERT(l->out_shape.ndim == 4 && !memcmp(l->out_shape.dim, o1, sizeof o1));
    /* same, stride 2, kernel 3, output_padding [1, 0, 1]: (n - 1) 2 + 3 - 2 + op; then
     * same at stride 1 with dilation keeps the size */
    CU_ASSERT(!memcmp(l2->out_shape.dim, o2, sizeof o2));
    CU_ASSERT(!memcmp(l3->out_shape.dim, o3, sizeof o3));
    tfc_model_free(m);
}

static void drop_conv3d(tfc_backend_ops *ops)
{
    ops->conv3d_workspace = NULL, ops->conv3d_forward = NULL, ops->conv3d_backward = NULL;
}

/* A backend without the conv3d ops (the GPU's table until they have run there) refuses the
 * layer at bind, naming it and the op. */
static void test_refused(void)
{
    tfc_test_expect_refused("input: {shape: [3, 4, 4, 2]}\nlayers:\n"
                            "  - Conv3DTranspose: {name: t3, filters: 2, kernel_size: 2}\n",
                            drop_conv3d, "layer 't3'", "conv3d_");
}

TFC_TEST_MAIN("conv3d_transpose", {"keras_parity", test_keras_parity},
              {"errors", test_errors}, {"shapes", test_shapes}, {"refused", test_refused})
