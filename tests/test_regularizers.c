/* Keras's weight regularizers (kernel_regularizer and its kin; core/init.h, graph.c): every
 * YAML form Keras's and tfc's, the weights each argument reaches (a wrapper's layer's too),
 * the loss against Keras 3's own (tests/ref/keras_regularizers.py: model.evaluate, the
 * penalties included; the activity regularizers' and ActivityRegularization's too) in both
 * bindings, the refusals (a backend without the kernel,
 * float16), and the kernel's sum the same on 1 and 2 threads. The gradient is checked
 * numerically in test_layers (case `regularizers`). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "graph/model.h"
#include "graph/model_internal.h"
#include "gradcheck.h"
#include "testutil.h"

/* The model of `layers` after a [6, 6, 2] image, or NULL with the error in err. */
static tfc_model *model_of(const char *layers, tfc_error *err)
{
    char yaml[2048];
    snprintf(yaml, sizeof yaml, "input: {shape: [6, 6, 2]}\nlayers:\n  - %s\n", layers);
    tfc_error_clear(err);
    return tfc_model_from_string(yaml, strlen(yaml), "m.yaml", err);
}

/* The factors the first layer's weight `name` got. */
static void factors(tfc_model *m, int layer, const char *name, float *l1, float *l2)
{
    const tfc_layer *l = tfc_model_layer(m, layer);
    *l1 = *l2 = -1;
    for (int p = 0; p < l->nparams; p++)
        if (!strcmp(l->params[p].name, name)) *l1 = l->params[p].l1, *l2 = l->params[p].l2;
}

static void expect_factors(const char *layers, const char *name, float l1, float l2)
{
    tfc_error err;
    tfc_model *m = model_of(layers, &err);
    if (!m) fprintf(stderr, "\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    float a, b;
    factors(m, 0, name, &a, &b);
    if (a != l1 || b != l2)
        fprintf(stderr, "\n%s: %s got l1 %g l2 %g, wanted %g %g\n", layers, name, a, b, l1, l2);
    CU_ASSERT(a == l1 && b == l2);
    tfc_model_free(m);
}

static void expect_error(const char *layers, const char *want, const char *hint)
{
    tfc_error err;
    tfc_model *m = model_of(layers, &err);
    CU_ASSERT_PTR_NULL(m);
    int ok = strstr(err.text, want) && (!hint || strstr(err.text, hint));
    if (!ok) fprintf(stderr, "\n%s: wanted '%s' / '%s' in: %s\n", layers, want, hint, err.text);
    CU_ASSERT(ok);
    tfc_model_free(m);
}

/* Keras's names (l1, l2, l1l2 and the class names) with its defaults, tfc's mapping with
 * `type`, Keras's serialized {class_name, config}; each type's own arguments only. */
static void test_forms(void)
{
    const char *D = "Dense: {units: 3, kernel_regularizer: ";
    char y[512];
    static const struct {
        const char *form;
        float l1, l2;
    } ok[] = {
        {"l2", 0, 0.01f},
        {"L2", 0, 0.01f},
        {"l1", 0.01f, 0},
        {"L1", 0.01f, 0},
        {"l1l2", 0, 0},
        {"L1L2", 0, 0},
        {"null", 0, 0},
        {"{l2: 0.0001}", 0, 1e-4f},
        {"{type: l2, l2: 0.5}", 0, 0.5f},
        {"{type: l1}", 0.01f, 0},
        {"{type: l1l2, l1: 0.001}", 1e-3f, 0},
        {"{type: L1L2, l1: 0.001, l2: 0.002}", 1e-3f, 2e-3f},
        {"{class_name: L2, config: {l2: 0.0001}}", 0, 1e-4f},
        {"{module: keras.regularizers, class_name: L1L2, config: {l1: 0.1, l2: 0.2}, "
         "registered_name: null}", 0.1f, 0.2f},
        {"{class_name: L1, config: {}}", 0.01f, 0},
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        snprintf(y, sizeof y, "Flatten: {}\n  - %s%s}", D, ok[i].form);
        tfc_error err;
        tfc_model *m = model_of(y, &err);
        if (!m) fprintf(stderr, "\n%s", err.text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        float a, b;
        factors(m, 1, "kernel", &a, &b);
        if (a != ok[i].l1 || b != ok[i].l2)
            fprintf(stderr, "\n%s: l1 %g l2 %g\n", ok[i].form, a, b);
        CU_ASSERT(a == ok[i].l1 && b == ok[i].l2);
        factors(m, 1, "bias", &a, &b); /* bias_regularizer not given */
        CU_ASSERT(a == 0 && b == 0);
        tfc_model_free(m);
    }
    static const char *const bad[][3] = {
        {"{type: l1, l2: 0.1}", "kernel_regularizer.l2: unknown key 'l2'", NULL},
        {"{l2: -1}", "kernel_regularizer.l2", ">= 0"},
        {"orthogonal_regularizer", "kernel_regularizer", "no orthogonal regularizer"},
        {"[0.01]", "expected a regularizer", NULL},
        {"{type: l3}", "kernel_regularizer.type", "l1"},
        {"{class_name: L2, config: {l1: 0.1}}", "kernel_regularizer.config.l1: unknown key", NULL},
        {"{class_name: L2, conf: {}}", "unknown key 'conf'", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(y, sizeof y, "Flatten: {}\n  - %s%s}", D, bad[i][0]);
        expect_error(y, bad[i][1], bad[i][2]);
    }
    /* activity_regularizer: the same forms, onto the layer's factors */
    expect_error("Flatten: {}\n  - Dense: {units: 3, activity_regularizer: {type: l3}}",
                 "Dense.activity_regularizer.type", "l1");
    tfc_error err;
    tfc_model *m = model_of("Flatten: {}\n  - Dense: {units: 3, activity_regularizer: "
                            "{class_name: L1L2, config: {l1: 0.25, l2: 0.5}}}\n"
                            "  - ActivityRegularization: {l2: 0.125}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT(tfc_model_layer(m, 1)->activity_l1 == 0.25f);
    CU_ASSERT(tfc_model_layer(m, 1)->activity_l2 == 0.5f);
    CU_ASSERT(tfc_model_layer(m, 2)->activity_l1 == 0);
    CU_ASSERT(tfc_model_layer(m, 2)->activity_l2 == 0.125f);
    CU_ASSERT(tfc_model_layer(m, 0)->activity_l1 == 0 && tfc_model_layer(m, 0)->activity_l2 == 0);
    tfc_model_free(m);
}

/* Each argument reaches the weights Keras regularizes with it: DepthwiseConv2D's kernel by
 * depthwise_regularizer, a Bidirectional's directions by its layer's, MultiHeadAttention's
 * four kernels by kernel_regularizer; not BatchNormalization's moving statistics. */
static void test_weights_reached(void)
{
    expect_factors("Conv2D: {filters: 2, kernel_size: 3, kernel_regularizer: l1, "
                   "bias_regularizer: {l2: 0.5}}", "bias", 0, 0.5f);
    expect_factors("Conv2D: {filters: 2, kernel_size: 3, kernel_regularizer: l1}", "kernel",
                   0.01f, 0);
    expect_factors("DepthwiseConv2D: {kernel_size: 3, depthwise_regularizer: l2}", "kernel", 0,
                   0.01f);
    expect_factors("SeparableConv2D: {filters: 2, kernel_size: 3, pointwise_regularizer: l1}",
                   "pointwise_kernel", 0.01f, 0);
    expect_factors("SeparableConv2D: {filters: 2, kernel_size: 3, pointwise_regularizer: l1}",
                   "depthwise_kernel", 0, 0);
    expect_factors("Conv2DTranspose: {filters: 2, kernel_size: 3, kernel_regularizer: l2}",
                   "kernel", 0, 0.01f);
    expect_factors("BatchNormalization: {gamma_regularizer: l2, beta_regularizer: l1}", "gamma",
                   0, 0.01f);
    expect_factors("BatchNormalization: {gamma_regularizer: l2, beta_regularizer: l1}", "beta",
                   0.01f, 0);
    expect_factors("BatchNormalization: {gamma_regularizer: l2}", "moving_variance", 0, 0);
    expect_factors("BatchNormalization: {scale: false, gamma_regularizer: l2}", "gamma", 0, 0);
    expect_factors("LayerNormalization: {gamma_regularizer: l2}", "gamma", 0, 0.01f);
    expect_factors("PReLU: {alpha_regularizer: {l2: 0.25}}", "alpha", 0, 0.25f);
    expect_factors("Reshape: {target_shape: [36, 2]}\n  - Conv1D: {filters: 2, kernel_size: 3, "
                   "kernel_regularizer: l2}", "reshape", -1, -1); /* layer 0 has none */
    const char *seq = "input: {shape: [5], dtype: int32}\nlayers:\n"
                      "  - Embedding: {input_dim: 9, output_dim: 4, embeddings_regularizer: l2}\n"
                      "  - Bidirectional: {layer: {GRU: {units: 3, return_sequences: true, "
                      "kernel_regularizer: l1, recurrent_regularizer: {l2: 0.5}}}}\n"
                      "  - MultiHeadAttention: {num_heads: 2, key_dim: 3, kernel_regularizer: "
                      "{l2: 0.25}}\n"
                      "  - LSTM: {units: 2, recurrent_regularizer: l1}\n";
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_from_string(seq, strlen(seq), "m.yaml", &err);
    if (!m) fprintf(stderr, "\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    float a, b;
    factors(m, 0, "embeddings", &a, &b);
    CU_ASSERT(a == 0 && b == 0.01f);
    factors(m, 1, "forward_gru/kernel", &a, &b);
    CU_ASSERT(a == 0.01f && b == 0);
    factors(m, 1, "backward_gru/recurrent_kernel", &a, &b);
    CU_ASSERT(a == 0 && b == 0.5f);
    factors(m, 1, "backward_gru/bias", &a, &b);
    CU_ASSERT(a == 0 && b == 0);
    const char *mha[] = {"query/kernel", "key/kernel", "value/kernel", "attention_output/kernel"};
    for (int k = 0; k < 4; k++) {
        factors(m, 2, mha[k], &a, &b);
        CU_ASSERT(a == 0 && b == 0.25f);
    }
    factors(m, 2, "query/bias", &a, &b);
    CU_ASSERT(a == 0 && b == 0);
    factors(m, 3, "recurrent_kernel", &a, &b);
    CU_ASSERT(a == 0.01f && b == 0);
    factors(m, 3, "kernel", &a, &b);
    CU_ASSERT(a == 0 && b == 0);
    tfc_model_free(m);
}

/* A fixture of tests/ref/regularizers: the loss of `x` and `labels` against Keras's
 * evaluate(), which adds every penalty, within 1e-5 relative; in the training binding and
 * the inference one. Returns tfc's loss. */
static double keras_case(const char *path, int inference)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open(path, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    const char *yaml = tfc_st_meta(f, "yaml");
    const tfc_st_tensor *tx = tfc_st_find(f, "x"), *tl = tfc_st_find(f, "labels");
    const tfc_st_tensor *tloss = tfc_st_find(f, "loss"), *tpen = tfc_st_find(f, "penalty");
    CU_ASSERT_FATAL(yaml && tx && tl && tloss && tpen);
    tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), path, &err);
    if (!m) fprintf(stderr, "\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    tfc_backend *be = tfc_cpu_backend_create(2);
    const int batch = (int)tx->shape.dim[0];
    tfc_status st = inference ? tfc_model_bind_inference(m, be, batch, &err)
                              : tfc_model_bind(m, be, batch, &err);
    if (st) fprintf(stderr, "\n%s", err.text);
    CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
    tfc_weights_report rep = {0};
    CU_ASSERT_EQUAL(tfc_model_load_weights(m, path, &rep, &err), TFC_OK);
    CU_ASSERT(rep.missing == 0 && rep.mismatched == 0);
    free(rep.text);
    void *x = malloc(tx->nbytes), *labels = malloc(tl->nbytes);
    memcpy(x, tx->data, tx->nbytes);
    memcpy(labels, tl->data, tl->nbytes);
    float want, penalty;
    memcpy(&want, tloss->data, 4);
    memcpy(&penalty, tpen->data, 4);
    tfc_batch_result r;
    CU_ASSERT_EQUAL(tfc_model_forward(m, x, batch, 0, 0, 0, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_model_loss(m, labels, 0, &r, &err), TFC_OK);
    double rel = fabs(r.loss - want) / want;
    printf("\n  %s (%s): loss %.7f, Keras's %.7f (penalty %.7f): relative %.2g",
           strrchr(path, '/') + 1, inference ? "inference" : "training", r.loss, want, penalty,
           rel);
    CU_ASSERT(rel <= 1e-5);
    free(x), free(labels);
    tfc_model_free(m);
    tfc_backend_free(be);
    tfc_st_close(f);
    return r.loss;
}

static void test_keras_loss(void)
{
    const char *cases[] = {"tests/ref/regularizers/image.safetensors",
                           "tests/ref/regularizers/sequence.safetensors",
                           "tests/ref/regularizers/activity.safetensors"};
    for (int c = 0; c < 3; c++) {
        double a = keras_case(cases[c], 0), b = keras_case(cases[c], 1);
        CU_ASSERT(fabs(a - b) <= 1e-6 * fabs(a));
    }
}

/* A backend without the penalty kernel (the GPU, for now) refuses a model with a
 * regularizer at bind, naming the layer and the argument; float16 is refused too (its loss
 * scale), bf16 binds. The same for an activity regularizer; one inside Bidirectional is an
 * error. */
static void test_refused(void)
{
    tfc_error err;
    tfc_model *m = model_of("Conv2D: {name: v, filters: 2, kernel_size: 3, "
                            "bias_regularizer: l2}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_backend_ops lacking = *be->ops;
    const tfc_backend_ops *cpu_ops = be->ops;
    lacking.penalty = NULL;
    be->ops = &lacking;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'v'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no kernel for bias_regularizer yet (op 'penalty')"));
    be->ops = cpu_ops;
    tfc_model_set_precision(m, TFC_PRECISION_FLOAT16);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "bias_regularizer with precision float16"));
    tfc_model_set_precision(m, TFC_PRECISION_BF16);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
    tfc_model_free(m);
    /* an activity regularizer: the same refusals, naming it */
    m = model_of("Conv2D: {name: v, filters: 2, kernel_size: 3, activity_regularizer: l1}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    be->ops = &lacking;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'v'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no kernel for activity_regularizer yet "
                                           "(op 'penalty')"));
    be->ops = cpu_ops;
    tfc_model_set_precision(m, TFC_PRECISION_FLOAT16);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "activity_regularizer with precision float16"));
    tfc_model_free(m);
    tfc_backend_free(be);
    /* inside Bidirectional (Keras penalises each direction apart): an error at the value */
    expect_error("Reshape: {target_shape: [12, 6]}\n  - Bidirectional: {layer: {LSTM: {units: 2, "
                 "activity_regularizer: l2}}}", "activity_regularizer inside Bidirectional is "
                 "not supported", "ActivityRegularization layer after");
}

/* The penalty op's sum and gradient on 1 and 2 threads: the same bits; against a sum in
 * long double within float rounding. */
static void test_penalty_threads(void)
{
    const int64_t n = 1000003;
    float *w = malloc((size_t)n * 4), *g1 = calloc((size_t)n, 4), *g2 = calloc((size_t)n, 4);
    tfc_test_fill(w, n, -1, 1, 11);
    w[5] = 0;
    long double a = 0, q = 0;
    for (int64_t i = 0; i < n; i++) a += fabsl((long double)w[i]), q += (long double)w[i] * w[i];
    tfc_backend *b1 = tfc_cpu_backend_create(1), *b2 = tfc_cpu_backend_create(2);
    float s1 = 0.5f, s2 = 0.5f;
    b1->ops->penalty(b1, n, 1e-3f, 2e-3f, w, &s1, g1);
    b2->ops->penalty(b2, n, 1e-3f, 2e-3f, w, &s2, g2);
    CU_ASSERT(s1 == s2);
    CU_ASSERT(!memcmp(g1, g2, (size_t)n * 4));
    double want = 0.5 + 1e-3f * (double)a + 2e-3f * (double)q;
    CU_ASSERT(fabs(s1 - want) <= 1e-6 * want);
    CU_ASSERT(g1[5] == 0); /* sign(0) = 0, and 2 l2 0 */
    CU_ASSERT(g1[7] == 1e-3f * (w[7] > 0 ? 1.0f : -1.0f) + 2 * 2e-3f * w[7]);
    tfc_backend_free(b1), tfc_backend_free(b2);
    free(w), free(g1), free(g2);
}

TFC_TEST_MAIN("regularizers", {"forms", test_forms}, {"weights_reached", test_weights_reached},
              {"keras_loss", test_keras_loss}, {"refused", test_refused},
              {"penalty_threads", test_penalty_threads})
