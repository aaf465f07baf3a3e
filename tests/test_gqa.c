/* GroupQueryAttention: Keras 3 parity from the fixtures tests/ref/keras_gqa.py wrote
 * (tests/ref/gqa/: outputs, input and weight gradients, weights under Keras's paths both
 * ways, the default name grouped_query_attention); flash_attention as a hint (the same
 * bits); the refusals (arguments, a backend without the attention kernels, a device while
 * the layer is CPU-first). Run from the repository's root. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "graph/model.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "layers/layer.h"
#include "testutil.h"

/* tests/ref/gqa, each case as tfc_test_keras_case compares it: outputs, the inference
 * layout's, the weights both ways and, where the fixture has them, the input's and every
 * weight's gradients (relative to their largest value or 1e-2). */
static void test_keras_parity(void)
{
    static const tfc_keras_parity p = {.dir = "gqa", .tol = 1e-5, .grad_floor = 1e-2};
    static const char *const names[] = {"self_default_name", "cross", "causal_mqa",
                                        "masked_mha", "masked_causal_gate", "window_gate_cross",
                                        "window", "dropout_masked_causal", NULL};
    tfc_test_keras_cases(&p, names);
}

/* The model's predictions for one batch of x (float inputs of n values), as a malloc'd
 * buffer. */
static float *predict(const char *yaml, const float *x, int batch)
{
    tfc_model *m = tfc_test_model(yaml);
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(m && be && !tfc_model_bind(m, be, batch, &err) &&
               !tfc_model_init_weights(m, 5, &err));
    const int64_t n = batch * tfc_shape_numel(tfc_model_output_shape(m));
    float *y = malloc((size_t)n * sizeof *y);
    TFC_ASSERT(!tfc_model_forward(m, x, batch, 0, 1, 0, &err));
    tfc_model_get_output(m, y);
    tfc_model_free(m);
    tfc_backend_free(be);
    return y;
}

/* flash_attention true, false or null: the same weights (seed) and the same bits. */
static void test_flash_attention_hint(void)
{
    static const char *const fa[] = {"null", "false", "true"};
    float x[2 * 5 * 4], *y[3];
    tfc_test_fill(x, 40, -1, 1, 3);
    for (int i = 0; i < 3; i++) {
        char yaml[320];
        snprintf(yaml, sizeof yaml, "input: {shape: [5, 4]}\nlayers:\n"
                                    "  - GroupQueryAttention: {head_dim: 3, num_query_heads: 4,"
                                    " num_key_value_heads: 2, use_causal_mask: true,"
                                    " flash_attention: %s}\n", fa[i]);
        y[i] = predict(yaml, x, 2);
    }
    CU_ASSERT(!memcmp(y[0], y[1], sizeof x));
    CU_ASSERT(!memcmp(y[0], y[2], sizeof x));
    for (int i = 0; i < 3; i++) free(y[i]);
}

/* Arguments tfc or Keras refuse are errors naming them, at the layer's place in the file. */
static void test_argument_errors(void)
{
    static const char *const bad[][2] = {
        {"GroupQueryAttention: {head_dim: 2, num_query_heads: 3, num_key_value_heads: 2}",
         "t.yaml:5:5: error: layers[2].GroupQueryAttention: layer 'grouped_query_attention': "
         "num_query_heads (3) must be divisible by num_key_value_heads (2)"},
        {"GroupQueryAttention: {head_dim: 2, num_query_heads: 4, num_key_value_heads: 2,"
         " inputs: [input, r]}", "query has 6 features and value 3"},
        {"GroupQueryAttention: {head_dim: 2, num_query_heads: 4, num_key_value_heads: 2,"
         " inputs: [input, q, r]}", "key has 8 steps and value 4"},
        {"GroupQueryAttention: {head_dim: 2, num_query_heads: 2, num_key_value_heads: 2,"
         " activity_regularizer: l2}", "activity_regularizer"},
        {"GroupQueryAttention: {head_dim: 2, num_query_heads: 2, num_key_value_heads: 1,"
         " flash_attention: true, dropout: 0.1}", "flash_attention"},
        {"GroupQueryAttention: {head_dim: 2, num_query_heads: 2, num_key_value_heads: 1,"
         " flash_attention: sometimes}", "flash_attention"},
        {"GroupQueryAttention: {head_dim: 2, num_query_heads: 2, num_key_value_heads: 1,"
         " sliding_window: 0}", "sliding_window"},
        {"GroupQueryAttention: {head_dim: 2, num_query_heads: 2}", "num_key_value_heads"},
        {"GroupQueryAttention: {head_dim: 2, num_query_heads: 2, num_key_value_heads: 0}",
         "num_key_value_heads"},
        {"GroupQueryAttention: {head_dim: 2, num_query_heads: 2, num_key_value_heads: 1,"
         " output_shape: 4}", "output_shape"},
        {"GroupQueryAttention: {head_dim: 2, num_query_heads: 2, num_key_value_heads: 1,"
         " dropout: 1}", "dropout"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml, "input: {shape: [4, 6]}\nlayers:\n"
                                    "  - Dense: {name: q, units: 6}\n"
                                    "  - Reshape: {name: r, target_shape: [8, 3], inputs: q}\n"
                                    "  - %s\n", bad[i][0]);
        tfc_test_expect_model_error(yaml, bad[i][1]);
    }
}

/* kernel_regularizer and kernel_constraint reach each of the five kernels (use_gate), the
 * bias's arguments each bias, as Keras's sublayers get them. */
static void test_weights_regularized(void)
{
    tfc_model *m = tfc_test_model("input: {shape: [4, 6]}\nlayers:\n"
                                  "  - GroupQueryAttention: {head_dim: 3, num_query_heads: 2,"
                                  " num_key_value_heads: 1, use_gate: true,"
                                  " kernel_regularizer: {l2: 0.25}, bias_regularizer: l1,"
                                  " kernel_constraint: non_neg}\n");
    TFC_ASSERT(m != NULL);
    const tfc_layer *l = tfc_model_layer(m, 0);
    CU_ASSERT_EQUAL(l->nparams, 10);
    for (int p = 0; p < l->nparams; p++) {
        const tfc_param *w = &l->params[p];
        const int is_kernel = strstr(w->name, "/kernel") != NULL;
        CU_ASSERT(w->l2 == (is_kernel ? 0.25f : 0) && w->l1 == (is_kernel ? 0 : 0.01f));
        CU_ASSERT((w->constraint.kind != TFC_CONSTRAINT_NONE) == is_kernel);
    }
    tfc_model_free(m);
}

static const char *const gqa_yaml = "input: {shape: [4, 6]}\nlayers:\n"
                                    "  - GroupQueryAttention: {name: att, head_dim: 3,"
                                    " num_query_heads: 2, num_key_value_heads: 1}\n";

static void drop_attention(tfc_backend_ops *ops)
{
    ops->attention_forward = NULL;
    ops->attention_backward = NULL;
}

/* A backend without the attention kernels refuses the model at bind, naming the layer; a
 * device backend refuses it while the layer is CPU-first. */
static void test_refused(void)
{
    tfc_test_expect_refused(gqa_yaml, drop_attention, "layer 'att'", "GroupQueryAttention");
    tfc_model *m = tfc_test_model(gqa_yaml);
    tfc_backend *be = tfc_cpu_backend_create(1);
    TFC_ASSERT(m && be);
    tfc_error err;
    tfc_error_clear(&err);
    be->device = 0;
    tfc_status st = tfc_model_bind(m, be, 2, &err);
    be->device = -1;
    CU_ASSERT_EQUAL(st, tfc_layer_lookup("GroupQueryAttention")->cpu_first ? TFC_ERR_CONFIG
                                                                           : TFC_OK);
    if (st) {
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'att'"));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "GroupQueryAttention"));
    }
    tfc_model_free(m);
    tfc_backend_free(be);
}

TFC_TEST_MAIN("gqa", {"keras_parity", test_keras_parity},
              {"flash_attention_hint", test_flash_attention_hint},
              {"argument_errors", test_argument_errors},
              {"weights_regularized", test_weights_regularized}, {"refused", test_refused})
