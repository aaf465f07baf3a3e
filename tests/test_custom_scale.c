/* CustomScaleLayer (keras.applications.inception_resnet_v2.CustomScaleLayer): Keras 3 parity
 * from the fixtures tests/ref/keras_layer_scale.py wrote (tests/ref/custom_scale/: outputs
 * and the gradients of the input and every weight), the mask it drops as Keras does, and
 * argument errors. Run from the repository's root. */
#include <stdio.h>
#include <string.h>

#include "graph/model.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "layers/layer.h"
#include "testutil.h"

/* Each fixture through tests/util/kerasref's harness, trained: Keras's weights loaded by
 * name, the inference output and the MSE loss's gradients of the input and of every weight
 * within 1e-5 of the largest value. Inception-ResNet's join of an image and its branch, and
 * two Dense branches of a vector under a negative scale. */
static void test_keras_parity(void)
{
    static const tfc_keras_parity p = {.dir = "custom_scale", .tol = 1e-5, .all_grads = 1};
    static const char *const names[] = {"image", "vector", NULL};
    tfc_test_keras_cases(&p, names);
}

/* No weights; Keras's layer does not support masking, so the mask stops here (Keras warns
 * that it destroys it), where an Add would pass it on. */
static void test_no_weights_mask_dropped(void)
{
    tfc_model *m = tfc_test_model("input: {shape: [5], dtype: int32}\nlayers:\n"
                                  "  - Embedding: {input_dim: 9, output_dim: 4, "
                                  "mask_zero: true}\n"
                                  "  - Dense: {units: 4}\n"
                                  "  - CustomScaleLayer: {scale: 0.5, inputs: [embedding, "
                                  "dense]}\n");
    TFC_ASSERT(m != NULL);
    const tfc_layer *l = tfc_model_layer(m, 2);
    CU_ASSERT_STRING_EQUAL(l->name, "custom_scale_layer");
    CU_ASSERT_EQUAL(l->nparams, 0);
    CU_ASSERT(tfc_model_layer(m, 1)->mask_out);
    CU_ASSERT(!l->mask_out);
    tfc_model_free(m);
}

static void expect_error(const char *layers, const char *what)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "input: {shape: [3, 4]}\nlayers:\n%s", layers);
    const tfc_error err = tfc_test_model_error(yaml);
    if (!strstr(err.msg, what)) fprintf(stderr, "\n%s: %s", layers, err.text);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, what));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "t.yaml:"));
}

static void test_argument_errors(void)
{
    expect_error("  - Dense: {units: 5}\n"
                 "  - CustomScaleLayer: {scale: 0.1, inputs: [input, dense]}\n",
                 "inputs must have equal shapes: input 0 is (3, 4), input 1 is (3, 5)");
    expect_error("  - Dense: {units: 4}\n  - CustomScaleLayer: {inputs: [input, dense]}\n",
                 "missing required key 'scale'");
    expect_error("  - CustomScaleLayer: {scale: 0.1}\n", "input");
    expect_error("  - Dense: {units: 4}\n"
                 "  - CustomScaleLayer: {scale: 0.1, inputs: [input, dense, input]}\n",
                 "input");
}

TFC_TEST_MAIN("custom_scale", {"keras_parity", test_keras_parity},
              {"no_weights_mask_dropped", test_no_weights_mask_dropped},
              {"argument_errors", test_argument_errors})
