/* SpectralNormalization: Keras 3 parity (tests/ref/keras_spectral_norm.py, the TensorFlow
 * backend: the stored kernel is the normalized one): a training forward's input and weight
 * gradients and vector_u after it, the weights after a few SGD steps of train_on_batch (each
 * step's power iteration, vector_u and the assigned kernel) and Keras's inference output
 * after them; a resumed run repeating the uninterrupted one bit for bit; the argument
 * errors; names and the inference pass leaving the weights alone. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "graph/model.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "kerassteps.h"
#include "testutil.h"

/* Outputs, the input's and weights' gradients of a training forward, vector_u after it */
static void test_keras_parity(void)
{
    static const tfc_keras_parity p = {.dir = "spectral_norm", .tol = 1e-5};
    static const char *const names[] = {"parity_image", "parity_sequence", NULL};
    tfc_test_keras_cases(&p, names);
}

/* Keras's weights after train_on_batch's SGD steps against tfc's solver run from the same
 * weights on the same batch, on 1 and 2 threads; then Keras's inference output from them. */
static void test_keras_steps(void)
{
    const char *cases[] = {"image", "sequence"};
    for (int c = 0; c < 2; c++) {
        char path[256], xn[64], yn[64], run[64];
        snprintf(path, sizeof path, "tests/ref/spectral_norm/%s.safetensors", cases[c]);
        tfc_error err;
        tfc_error_clear(&err);
        tfc_st_file *f = tfc_st_open(path, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        snprintf(xn, sizeof xn, "sn_%s_x.npy", cases[c]);
        snprintf(yn, sizeof yn, "sn_%s_y.npy", cases[c]);
        tfc_ks_write_npy(tfc_st_find(f, "x"), xn);
        tfc_ks_write_npy(tfc_st_find(f, "labels"), yn);
        const char *solver = tfc_ks_solver(f, xn, yn, NULL);
        char abs_path[1200], cwd[900];
        CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
        snprintf(abs_path, sizeof abs_path, "%s/%s", cwd, path);
        for (int threads = 1; threads <= 2; threads++) {
            snprintf(run, sizeof run, "sn_%s_%d", cases[c], threads);
            CU_ASSERT_EQUAL_FATAL(tfc_ks_train("sn.yaml", solver, abs_path, run, threads, NULL,
                                               0, 0, &err), TFC_OK);
            int n;
            double worst = tfc_ks_worst(f, run, &n);
            printf("\n  %s, %d thread%s: %d weights, max difference vs Keras %.3g", cases[c],
                   threads, threads > 1 ? "s" : "", n, worst);
            CU_ASSERT(n >= (c ? 6 : 12));
            CU_ASSERT(worst <= 2e-5);
        }
        /* the inference output of the trained weights: the inner layers alone */
        const tfc_st_tensor *meta_x = tfc_st_find(f, "x");
        const char *yaml = tfc_st_meta(f, "yaml");
        CU_ASSERT_PTR_NOT_NULL_FATAL(yaml);
        tfc_model *m = tfc_test_model(yaml);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        const int batch = (int)meta_x->shape.dim[0];
        tfc_backend *be = tfc_cpu_backend_create(1);
        CU_ASSERT_PTR_NOT_NULL_FATAL(be);
        CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, batch, &err), TFC_OK);
        char weights[1200];
        snprintf(run, sizeof run, "sn_%s_1", cases[c]);
        snprintf(weights, sizeof weights, "%s/final.safetensors", tfc_test_path(run));
        CU_ASSERT_EQUAL_FATAL(tfc_model_load_weights(m, weights, NULL, &err), TFC_OK);
        int64_t nx, ny;
        float *x = tfc_test_tensor(f, "x", &nx), *want = tfc_test_tensor(f, "y", &ny);
        float *got = calloc((size_t)ny, sizeof *got);
        CU_ASSERT_EQUAL_FATAL(tfc_model_forward(m, x, batch, 0, 1, 0, &err), TFC_OK);
        tfc_model_get_output(m, got);
        double d = tfc_test_rel_diff(got, want, ny, 1.0, NULL);
        printf("; inference output %.3g", d);
        CU_ASSERT(d <= 1e-5);
        free(x), free(want), free(got);
        tfc_model_free(m);
        tfc_backend_free(be);
        tfc_st_close(f);
    }
}

/* A run stopped at 3 and resumed from its snapshot ends with the uninterrupted run's weights
 * (the kernels and vector_u), bit for bit. */
static void test_resume(void)
{
    tfc_test_write_split("sn_x.npy", "sn_y.npy", 64, 5);
    const char *solver =
        "model:\n  name: sn\n  input: {shape: [16]}\n  layers:\n"
        "    - SpectralNormalization: {name: h, power_iterations: 2, layer: {Dense: {units: 8, "
        "activation: tanh}}}\n"
        "    - SpectralNormalization: {name: out, layer: {Dense: {units: 4}}}\n"
        "data:\n  train:\n    source: {type: npy, features: sn_x.npy, labels: sn_y.npy}\n"
        "    pipeline: [{repeat: {}}, {batch: {batch_size: 16}}]\n"
        "optimizer: {type: sgd, learning_rate: 0.5, momentum: 0.5}\nlr_policy: fixed\n"
        "max_iter: 6\ntest_interval: 0\ndisplay: 0\nseed: 3\n"
        "snapshot: {interval: 3, keep: 0}\n";
    tfc_ks_expect_resume_exact("sn.yaml", solver, "sn", "sn", 3);
}

static void expect_error(const char *input, const char *layer, const char *needle)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "input: {shape: %s}\nlayers:\n  - %s\n", input, layer);
    tfc_test_expect_model_error(yaml, needle);
}

static void test_errors(void)
{
    const char *img = "[6, 6, 2]", *seq = "[5, 4]";
    expect_error(seq, "SpectralNormalization: {layer: {Dense: {units: 3}}, power_iterations: 0}",
                 "t.yaml:3:75: error: layers[0].SpectralNormalization.power_iterations: "
                 "expected an integer");
    expect_error(seq, "SpectralNormalization: {layer: {LSTM: {units: 3}}}",
                 "t.yaml:3:5: error: layers[0].SpectralNormalization: layer "
                 "'spectral_normalization': layer: LSTM has no kernel nor embeddings");
    expect_error(img, "SpectralNormalization: {layer: {SeparableConv2D: {filters: 2, "
                      "kernel_size: 3}}}", "SeparableConv2D has no kernel");
    expect_error(img, "SpectralNormalization: {layer: {BatchNormalization: {}}}",
                 "BatchNormalization has no kernel");
    expect_error(seq, "SpectralNormalization: {layer: {Densee: {units: 3}}}",
                 "Densee has no kernel");
    expect_error("[5], dtype: int32",
                 "SpectralNormalization: {layer: {Embedding: {input_dim: 9, output_dim: 2}}}",
                 "Embedding is not supported");
    expect_error(seq, "SpectralNormalization: {}", "layer");
    expect_error(seq, "SpectralNormalization: {layer: {Dense: {units: 3}, Conv1D: {}}}",
                 "expected one layer");
    expect_error(seq, "SpectralNormalization: {layer: {Dense: {units: 3, bogus: 1}}}",
                 "t.yaml:3:55: error: layers[0].SpectralNormalization.layer.Dense.bogus");
    expect_error(seq, "SpectralNormalization: {layer: {Dense: {units: 3}}, bogus: 1}", "bogus");
    expect_error(seq, "SpectralNormalization: {layer: {Dense: {units: 3, activity_regularizer: "
                      "l2}}}", "activity_regularizer inside SpectralNormalization");
}

/* Weights <layer>/<inner>/<weight> and <layer>/vector_u (not trainable, stddev 0.02); an
 * inference forward leaves them alone, a training forward normalizes the kernel: its largest
 * singular value then near 1 (one power step from a fixed u: about), vector_u of norm 1. */
static void test_names_and_training(void)
{
    tfc_model *m = tfc_test_model("input: {shape: [6]}\nlayers:\n"
                                  "  - SpectralNormalization: {power_iterations: 30, layer: "
                                  "{Dense: {units: 5, name: d}}}\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    const tfc_layer *l = tfc_model_layer(m, 0);
    CU_ASSERT_EQUAL_FATAL(l->nparams, 3);
    CU_ASSERT_STRING_EQUAL(l->params[0].name, "d/kernel");
    CU_ASSERT_STRING_EQUAL(l->params[1].name, "d/bias");
    CU_ASSERT_STRING_EQUAL(l->params[2].name, "vector_u");
    CU_ASSERT(l->params[2].trainable == 0 && l->params[2].shape.ndim == 2 &&
              l->params[2].shape.dim[0] == 1 && l->params[2].shape.dim[1] == 5);
    CU_ASSERT(l->params[2].init.kind == TFC_INIT_TRUNCATED_NORMAL && l->params[2].init.b == 0.02);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_backend *be = tfc_cpu_backend_create(1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(be);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_init_weights(m, 4, &err), TFC_OK);
    float k0[30], k1[30], u[5], x[12];
    memcpy(k0, l->params[0].data, sizeof k0);
    tfc_test_fill(x, 12, -1, 1, 3);
    CU_ASSERT_EQUAL_FATAL(tfc_model_forward(m, x, 2, 0, 1, 0, &err), TFC_OK);
    CU_ASSERT(!memcmp(k0, l->params[0].data, sizeof k0));
    CU_ASSERT_EQUAL_FATAL(tfc_model_forward(m, x, 2, 1, 1, 0, &err), TFC_OK);
    memcpy(k1, l->params[0].data, sizeof k1);
    memcpy(u, l->params[2].data, sizeof u);
    /* k1 = k0 / sigma, and |k1 u| = 1 for the converged u (the top singular pair) */
    double s = k0[0] / k1[0], nu = 0, nku = 0;
    for (int i = 0; i < 30; i++) CU_ASSERT(fabs(k0[i] / s - k1[i]) <= 1e-6);
    for (int j = 0; j < 5; j++) nu += (double)u[j] * u[j];
    for (int i = 0; i < 6; i++) {
        double r = 0;
        for (int j = 0; j < 5; j++) r += (double)k1[i * 5 + j] * u[j];
        nku += r * r;
    }
    printf("\n  sigma %.4f, |u| %.6f, |W u| after %.6f", s, sqrt(nu), sqrt(nku));
    CU_ASSERT(s > 1.0 && fabs(sqrt(nu) - 1) < 1e-5 && fabs(sqrt(nku) - 1) < 1e-4);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* bf16 and float16 bind the layers to 16-bit copies of the weights, where the normalized
 * kernel would not reach the float32 weights: refused at bind, naming the layer */
static void test_precision_refused(void)
{
    for (int p = 1; p <= 2; p++) {
        tfc_model *m = tfc_test_model("input: {shape: [6]}\nlayers:\n"
                                      "  - SpectralNormalization: {name: sn, layer: {Dense: "
                                      "{units: 5}}}\n");
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        tfc_model_set_precision(m, (tfc_precision)p);
        tfc_error err;
        tfc_error_clear(&err);
        tfc_backend *be = tfc_cpu_backend_create(1);
        CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_ERR_CONFIG);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "'sn'"));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, tfc_precision_names[p]));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "is not supported yet"));
        tfc_model_free(m);
        tfc_backend_free(be);
    }
}

TFC_TEST_MAIN("spectral_norm", {"keras_parity", test_keras_parity},
              {"keras_steps", test_keras_steps}, {"resume", test_resume},
              {"errors", test_errors}, {"names_and_training", test_names_and_training},
              {"precision_refused", test_precision_refused})
