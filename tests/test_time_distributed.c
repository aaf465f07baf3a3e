/* TimeDistributed: Keras 3 parity from the fixtures tests/ref/keras_time_distributed.py wrote
 * (tests/ref/time_distributed/: inference outputs, the input's and weights' gradients of an MSE
 * loss in training mode, BatchNormalization's moving statistics after a training forward, and
 * the weights under Keras's paths both ways), the refusals of what it cannot wrap, and of the
 * GPU for a CPU-first inner layer. Run from the repository's root. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "graph/model.h"
#include "layers/layer.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "testutil.h"

/* tests/ref/time_distributed, each case as tfc_test_keras_case compares it: outputs, the
 * inference layout's, the weights both ways, the input's and the trainable weights'
 * gradients, and BatchNormalization's moving statistics after the training forward (moved
 * once per step, as Keras's step-by-step calls move them). */
static void test_keras_parity(void)
{
    static const tfc_keras_parity p = {.dir = "time_distributed", .tol = 1e-5};
    static const char *const names[] = {"video", "masked", "batchnorm", "sequence", "volume",
                                        "assorted", "frames", NULL};
    tfc_test_keras_cases(&p, names);
}

static void expect_error(const char *input, const char *layers, const char *what)
{
    char yaml[768];
    snprintf(yaml, sizeof yaml, "input: %s\nlayers:\n%s", input, layers);
    tfc_error err = tfc_test_model_error(yaml);
    if (!strstr(err.msg, what)) fprintf(stderr, "\n%s: %s\n", layers, err.msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, what));
}

static void test_errors(void)
{
    const char *seq = "{shape: [5, 4]}";
    expect_error(seq, "  - TimeDistributed: {layer: {LSTM: {units: 3}}}\n",
                 "LSTM cannot be wrapped");
    expect_error(seq,
                 "  - TimeDistributed: {layer: {Bidirectional: {layer: {LSTM: {units: 3}}}}}\n",
                 "Bidirectional cannot be wrapped");
    expect_error(seq, "  - TimeDistributed: {layer: {MultiHeadAttention: {num_heads: 1, "
                      "key_dim: 2}}}\n", "MultiHeadAttention cannot be wrapped");
    expect_error(seq, "  - TimeDistributed: {layer: {Add: {}}}\n", "Add cannot be wrapped");
    expect_error(seq, "  - TimeDistributed: {layer: {Densee: {units: 3}}}\n",
                 "Densee cannot be wrapped");
    expect_error(seq, "  - TimeDistributed: {}\n", "layer");
    expect_error(seq, "  - TimeDistributed: {layer: {Dense: {units: 3}, Flatten: {}}}\n",
                 "expected one layer");
    expect_error("{shape: [5]}", "  - TimeDistributed: {layer: {Dense: {units: 3}}}\n",
                 "at least one axis after the steps");
    expect_error(seq, "  - TimeDistributed: {layer: {Dense: {units: 0}}}\n", "expected an integer");
    expect_error(seq, "  - TimeDistributed: {layer: {Dense: {units: 3, bogus: 1}}}\n",
                 "bogus");
    expect_error(seq, "  - TimeDistributed: {layer: {Dense: {units: 3, activity_regularizer: "
                      "l2}}}\n", "activity_regularizer inside TimeDistributed");
    expect_error(seq, "  - TimeDistributed: {layer: {Dense: {units: 3, name: "
                      "a_very_long_inner_layer_name_over_forty_characters}}}\n", "longer than");
    expect_error("{shape: [5, 4], dtype: int32}",
                 "  - TimeDistributed: {layer: {Embedding: {input_dim: 9, output_dim: 2, "
                 "mask_zero: true}}}\n", "making a mask");
    const char *ids = "{shape: [5], dtype: int32}";
    const char *emb = "  - Embedding: {input_dim: 9, output_dim: 4, mask_zero: true}\n";
    const char *bad[] = {"BatchNormalization: {}", "Softmax: {}"};
    for (int i = 0; i < 2; i++) {
        char layers[256];
        snprintf(layers, sizeof layers, "%s  - TimeDistributed: {layer: {%s}}\n", emb, bad[i]);
        expect_error(ids, layers, "under a mask is not supported");
    }
}

/* Weights are named <layer>/<inner>/<weight>, the inner layer Keras's snake case of its type
 * unless named; the output keeps the input's mask; an inner embedding reads token ids. */
static void test_names_and_masks(void)
{
    const char *yaml = "input: {shape: [4, 3], dtype: int32}\n"
                       "layers:\n"
                       "  - TimeDistributed: {layer: {Embedding: {input_dim: 7, output_dim: 2}}}\n"
                       "  - TimeDistributed: {layer: {Conv1D: {filters: 2, kernel_size: 2}}}\n"
                       "  - TimeDistributed: {layer: {Flatten: {}}}\n"
                       "  - TimeDistributed: {layer: {PReLU: {}}}\n"
                       "  - TimeDistributed: {layer: {Dense: {units: 2, name: head, "
                       "kernel_regularizer: {type: l2, l2: 0.01}, "
                       "bias_constraint: non_neg}}}\n";
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), "t.yaml", &err);
    if (!m) fprintf(stderr, "\n%s\n", err.msg);
    TFC_ASSERT(m != NULL);
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 0)->params[0].name, "embedding/embeddings");
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 1)->params[0].name, "conv1d/kernel");
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 1)->name, "time_distributed_1");
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 0)->name, "time_distributed");
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 3)->params[0].name, "p_re_lu/alpha");
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 4)->params[1].name, "head/bias");
    /* the inner layer's regularizer, on its weight (Keras regularizes the wrapped layer's) */
    CU_ASSERT_EQUAL(tfc_model_layer(m, 4)->params[0].l2, 0.01f);
    CU_ASSERT_EQUAL(tfc_model_layer(m, 4)->params[1].l2, 0.0f);
    /* and its constraint (Keras's optimizer applies the wrapped layer's variables' own) */
    CU_ASSERT_EQUAL(tfc_model_layer(m, 4)->params[1].constraint.kind, TFC_CONSTRAINT_NON_NEG);
    CU_ASSERT_EQUAL(tfc_model_layer(m, 4)->params[0].constraint.kind, TFC_CONSTRAINT_NONE);
    CU_ASSERT_EQUAL(tfc_model_layer(m, 0)->id_limit, 7);
    CU_ASSERT_EQUAL(tfc_model_layer(m, 4)->out_shape.ndim, 2);
    CU_ASSERT_EQUAL(tfc_model_layer(m, 4)->out_shape.dim[0], 4);
    tfc_model_free(m);
    /* under a mask (Embedding's mask_zero) the output keeps it */
    yaml = "input: {shape: [5], dtype: int32}\nlayers:\n"
           "  - Embedding: {input_dim: 9, output_dim: 4, mask_zero: true}\n"
           "  - TimeDistributed: {layer: {Dense: {units: 3}}}\n"
           "  - TimeDistributed: {layer: {Dropout: {rate: 0.5}}}\n";
    m = tfc_model_from_string(yaml, strlen(yaml), "t.yaml", &err);
    TFC_ASSERT(m != NULL);
    CU_ASSERT(tfc_model_layer(m, 1)->mask_out && tfc_model_layer(m, 2)->mask_out);
    tfc_model_free(m);
}

/* A backend without the inner layer's ops refuses the model naming the TimeDistributed layer
 * and the op; a GPU refuses one around a CPU-first layer (Rescaling, until the layer-op
 * flip) or while the wrapper itself is CPU-first, and otherwise takes it (Dense). */
static void test_device_refusals(void)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    const tfc_backend_ops *cpu_ops = be->ops;
    tfc_backend_ops lacking = *be->ops;
    lacking.groupnorm_forward = NULL;
    tfc_model *m = tfc_test_model("input: {shape: [3, 4]}\nlayers:\n"
                                  "  - TimeDistributed: {name: td, layer: {LayerNormalization: "
                                  "{}}}\n  - TimeDistributed: {name: tg, layer: "
                                  "{GroupNormalization: {groups: 2}}}\n");
    TFC_ASSERT(m != NULL);
    tfc_error err;
    tfc_error_clear(&err);
    be->ops = &lacking;
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'tg'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "groupnorm_forward"));
    be->ops = cpu_ops;
    tfc_model_free(m);
    /* refused where the inner layer is CPU-first (Rescaling, ZeroPadding1D until make
     * test-gpu has run them) or the wrapper itself is; the flags say which */
    static const struct {
        const char *inner, *type;
    } cases[] = {{"Rescaling: {scale: 2.0}", "Rescaling"}, {"Dense: {units: 2}", "Dense"},
                 {"ZeroPadding1D: {}", "ZeroPadding1D"},
                 {"BatchNormalization: {}", "BatchNormalization"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [3, 4, 2]}\nlayers:\n"
                 "  - TimeDistributed: {name: td, layer: {%s}}\n", cases[i].inner);
        m = tfc_test_model(yaml);
        TFC_ASSERT(m != NULL);
        tfc_error_clear(&err);
        be->device = 0; /* as a GPU backend */
        tfc_status s = tfc_model_bind(m, be, 2, &err);
        be->device = -1;
        const int refused = tfc_layer_lookup(cases[i].type)->cpu_first ||
                            tfc_layer_lookup("TimeDistributed")->cpu_first;
        CU_ASSERT_EQUAL(s, refused ? TFC_ERR_CONFIG : TFC_OK);
        if (refused) {
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'td'"));
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "--device cpu"));
        }
        tfc_model_free(m);
    }
    tfc_backend_free(be);
}

TFC_TEST_MAIN("time_distributed", {"keras_parity", test_keras_parity}, {"errors", test_errors},
              {"names_and_masks", test_names_and_masks},
              {"device_refusals", test_device_refusals})
