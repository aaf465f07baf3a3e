/* Pipeline (keras.layers.Pipeline, src/graph/pipeline.c): expanded into its layers when the
 * graph is built. A model with Pipelines computes what the same layers written inline do
 * (outputs in inference and training, the weights' gradients), its weights carry Keras 3's
 * variable paths (tests/ref/keras_pipeline.py: Keras's default names, nested Pipelines), a
 * Pipeline's `inputs:` and name work as a layer's, and a bad Pipeline is an error at its
 * FILE:LINE:COL. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "graph/model.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "layers/layer.h"
#include "testutil.h"

/* tests/ref/keras_pipeline.py's model (the inner Pipeline's layers positionally, the list
 * alone, its Dense's units too) */
static const char *const MODEL =
    "input: {shape: [4]}\nlayers:\n"
    "  - Pipeline:\n"
    "      layers:\n"
    "        - Rescaling: {scale: 2.0}\n"
    "        - Dense: {units: 3}\n"
    "        - Normalization: {}\n"
    "        - Pipeline: [Dense: 2, BatchNormalization]\n" /* Pipeline(layers) */
    "  - Pipeline: {name: head, layers: [{Dense: {units: 2}}]}\n"
    "  - Dense: {units: 1}\n"
    "loss: mse\n";

/* The same layers inline. */
static const char *const INLINE =
    "input: {shape: [4]}\nlayers:\n"
    "  - Rescaling: {scale: 2.0}\n"
    "  - Dense: {units: 3}\n"
    "  - Normalization: {}\n"
    "  - Dense: {units: 2}\n"
    "  - BatchNormalization\n"
    "  - Dense: {units: 2}\n"
    "  - Dense: {units: 1}\n"
    "loss: mse\n";

/* Every weight's path and shape (`path 4x3`, `scalar`) against Keras's, in order. */
static void test_keras_paths(void)
{
    char *want = tfc_test_read("tests/ref/pipeline/paths.txt", NULL);
    TFC_ASSERT(want != NULL);
    tfc_model *m = tfc_test_model(MODEL);
    TFC_ASSERT(m != NULL);
    char got[2048] = "";
    size_t at = 0;
    for (int i = 0; i < tfc_model_nlayers(m); i++) {
        const tfc_layer *l = tfc_model_layer(m, i);
        for (int p = 0; p < l->nparams; p++) {
            const tfc_param *w = &l->params[p];
            if (w->constant) continue;
            at += (size_t)snprintf(got + at, sizeof got - at, "%s/%s ", l->name, w->name);
            for (int d = 0; d < w->shape.ndim; d++)
                at += (size_t)snprintf(got + at, sizeof got - at, "%s%lld", d ? "x" : "",
                                       (long long)w->shape.dim[d]);
            at += (size_t)snprintf(got + at, sizeof got - at, "%s\n",
                                   w->shape.ndim ? "" : "scalar");
        }
    }
    if (strcmp(got, want)) fprintf(stderr, "\ntfc's paths:\n%s\nKeras's:\n%s\n", got, want);
    CU_ASSERT_STRING_EQUAL(got, want);
    /* a later layer names the Pipeline: its last layer */
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 4)->name, "pipeline_1/pipeline/batch_normalization");
    CU_ASSERT_EQUAL(tfc_model_layer(m, 5)->inputs[0], 4);
    tfc_model_free(m);
    free(want);
}

/* Keras 3 parity of a model with nested Pipelines (tests/ref/pipeline/model.safetensors):
 * Keras's weights loaded by their paths, the inference output, the gradients of the weights
 * and the input in training mode, BatchNormalization's moved statistics. */
static void test_keras_parity(void)
{
    static const tfc_keras_parity p = {.dir = "pipeline", .tol = 1e-5, .grad_floor = 1e-3,
                                       .all_grads = 1};
    static const char *const names[] = {"model", NULL};
    tfc_test_keras_cases(&p, names);
}

/* Runs a batch through m (weights `params`, copied in): its output into y, and with
 * `training` the weights' gradients of the MSE against zeros into g. */
static void run(tfc_model *m, const float *params, const float *x, int training, float *y,
                float *g)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(tfc_model_bind(m, be, 5, &err) == TFC_OK);
    TFC_ASSERT(tfc_model_init_weights(m, 1, &err) == TFC_OK);
    const int64_t np = tfc_model_param_count(m), ng = tfc_model_trainable_count(m);
    memcpy(tfc_model_params(m), params, (size_t)np * sizeof *params);
    for (int i = 0; i < tfc_model_nlayers(m); i++) { /* variances positive */
        const tfc_layer *l = tfc_model_layer(m, i);
        for (int p = 0; p < l->nparams; p++)
            if (strstr(l->params[p].name, "variance"))
                for (int64_t k = 0; k < l->params[p].numel; k++)
                    l->params[p].data[k] = fabsf(l->params[p].data[k]) + 0.5f;
    }
    TFC_ASSERT(tfc_model_forward(m, x, 5, training, 7, 0, &err) == TFC_OK);
    tfc_model_get_output(m, y);
    if (training) {
        const float labels[5] = {0};
        tfc_model_zero_grad(m);
        tfc_batch_result res;
        TFC_ASSERT(tfc_model_loss(m, labels, 1, &res, &err) == TFC_OK);
        tfc_model_backward(m);
        memcpy(g, tfc_model_grads(m), (size_t)ng * sizeof *g);
    }
    tfc_model_unbind(m);
    tfc_backend_free(be);
}

/* The model with Pipelines against the layers inline: the same weights (by position) give
 * the same outputs, in inference and training (BatchNormalization's batch statistics), and
 * the same gradients, bit for bit. */
static void test_equals_inline(void)
{
    tfc_model *a = tfc_test_model(MODEL), *b = tfc_test_model(INLINE);
    TFC_ASSERT(a && b);
    CU_ASSERT_EQUAL(tfc_model_nlayers(a), tfc_model_nlayers(b));
    const int64_t np = tfc_model_param_count(a), ng = tfc_model_trainable_count(a);
    CU_ASSERT_FATAL(np == tfc_model_param_count(b) && ng == tfc_model_trainable_count(b));
    float *w = malloc((size_t)np * sizeof *w), *ga = malloc((size_t)ng * sizeof *ga),
          *gb = malloc((size_t)ng * sizeof *gb);
    TFC_ASSERT(w && ga && gb);
    tfc_test_fill(w, np, -1, 1, 3);
    float x[20], ya[5], yb[5];
    tfc_test_fill(x, 20, -2, 2, 4);
    for (int training = 0; training < 2; training++) {
        run(a, w, x, training, ya, ga);
        run(b, w, x, training, yb, gb);
        CU_ASSERT_EQUAL(memcmp(ya, yb, sizeof ya), 0);
        if (training) CU_ASSERT_EQUAL(memcmp(ga, gb, (size_t)ng * sizeof *ga), 0);
    }
    int nonzero = 0;
    for (int64_t k = 0; k < ng; k++) nonzero += ga[k] != 0;
    CU_ASSERT(nonzero > ng / 2); /* the comparison saw real gradients */
    free(w), free(ga), free(gb);
    tfc_model_free(a);
    tfc_model_free(b);
}

/* A Pipeline's inputs: go to its first layer; later layers name it (its last layer). */
static void test_inputs(void)
{
    tfc_model *m = tfc_test_model("input: {shape: [4]}\nlayers:\n"
                                  "  - Dense: {name: a, units: 4}\n"
                                  "  - Dense: {name: b, units: 3}\n"
                                  "  - Pipeline: {name: p, inputs: a, layers: [{Dense: "
                                  "{name: d, units: 3}}, {Rescaling: {scale: 0.5}}]}\n"
                                  "  - Add: {inputs: [b, p]}\n"
                                  "loss: mse\n");
    TFC_ASSERT(m != NULL);
    CU_ASSERT_EQUAL(tfc_model_layer(m, 2)->inputs[0], 0);
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 2)->name, "p/d");
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 3)->name, "p/rescaling");
    CU_ASSERT_EQUAL(tfc_model_layer(m, 4)->inputs[0], 1);
    CU_ASSERT_EQUAL(tfc_model_layer(m, 4)->inputs[1], 3);
    tfc_model_free(m);
}

static void expect(const char *layers, const char *what, int line)
{
    char yaml[768];
    snprintf(yaml, sizeof yaml, "input: {shape: [4]}\nlayers:\n%s", layers);
    tfc_error err = tfc_test_model_error(yaml);
    if (!strstr(err.text, what) || err.line != line)
        fprintf(stderr, "\n%s: line %d: %s\n", layers, err.line, err.text);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, what));
    CU_ASSERT_EQUAL(err.line, line);
}

#define LONG50 "a_pipeline_name_of_fifty_characters_xxxxxxxxxxxxxx"
#define LONG60 "a_name_of_sixty_characters_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"

static void test_errors(void)
{
    expect("  - Pipeline: {layers: []}\n", "an empty list", 3);
    expect("  - Pipeline: {layers: {Dense: {units: 2}}}\n", "found a mapping", 3);
    expect("  - Dense: {units: 2}\n  - Pipeline: {name: p}\n", "expected `{layers: [...]}`", 4);
    expect("  - Pipeline\n", "expected `{layers: [...]}`", 3);
    expect("  - Pipeline: {layers: [Dense], trainable: false}\n", "unknown argument 'trainable'",
           3);
    expect("  - Pipeline:\n      layers:\n        - Dense: {units: 2}\n        - 5\n",
           "unknown layer type '5'", 6);
    expect("  - Pipeline:\n      layers:\n        - Dense: {units: 2}\n"
           "        - Dnse: {units: 2}\n", "did you mean 'Dense'", 6);
    expect("  - Pipeline:\n      layers:\n        - Dense: {units: 2, inputs: input}\n",
           "give `inputs:` to the Pipeline", 5);
    expect("  - Pipeline: {layers: [{Dense: {units: -2}}]}\n", "units", 3);
    expect("  - Dense: {name: p, units: 2}\n  - Pipeline: {name: p, layers: [Flatten]}\n",
           "the name 'p' is already used", 4);
    expect("  - Pipeline: {name: p, layers: [{Dense: {units: 2}}]}\n"
           "  - Dense: {units: 2, inputs: p/dense}\n", "no earlier layer is named 'p/dense'", 4);
    expect("  - Dense: {units: 2, inputs: p}\n  - Pipeline: {name: p, layers: [Flatten]}\n",
           "from layers above it", 3);
    char deep[1024] = "  - Pipeline: {layers: [";
    for (int i = 0; i < 16; i++) strcat(deep, "{Pipeline: {layers: [");
    strcat(deep, "Flatten");
    for (int i = 0; i < 16; i++) strcat(deep, "]}}");
    strcat(deep, "]}\n");
    expect(deep, "nested more than 16 deep", 3);
    /* a path past 127 characters: Pipeline names of 60 and 50, a layer's of 20 */
    expect("  - Pipeline:\n      name: " LONG60 "\n      layers:\n"
           "        - Pipeline:\n            name: " LONG50 "\n            layers:\n"
           "              - Dense: {name: dense_of_twenty_char, units: 2}\n",
           "is longer than 127 characters", 9);
}

/* keras.applications' ConvNeXt names a LayerNormalization in a Sequential
 * convnext_tiny_downsampling_block_0/convnext_tiny_downsampling_layernorm_0 (74 characters):
 * such paths, up to 127 characters, name the layer and its weights */
static void test_long_paths(void)
{
    tfc_model *m = tfc_test_model("input: {shape: [4]}\nlayers:\n"
                                  "  - Pipeline:\n      name: " LONG60 "\n      layers:\n"
                                  "        - Dense: {name: " LONG50 ", units: 2}\n");
    TFC_ASSERT(m != NULL);
    const tfc_layer *l = tfc_model_layer(m, 0);
    CU_ASSERT_STRING_EQUAL(l->name, LONG60 "/" LONG50);
    tfc_model_free(m);
}

TFC_TEST_MAIN("pipeline", {"keras_paths", test_keras_paths}, {"keras_parity", test_keras_parity},
              {"equals_inline", test_equals_inline}, {"inputs", test_inputs},
              {"errors", test_errors}, {"long_paths", test_long_paths})
