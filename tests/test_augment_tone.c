/* AutoContrast, Equalization and ContrastLimitedAdaptiveHistogramEqualization
 * (layers/augment_tone.c, core/tone.h): outputs in training and at inference and input
 * gradients against Keras 3 (tests/ref/keras_tone.py, keras_clahe.py), the op against the
 * same gradients, results the same for every thread count, config errors and the refusal of
 * a backend without the kernels (and of a device for CLAHE, CPU-first). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "graph/model.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "layers/layer.h"
#include "testutil.h"
#include "tfc.h"

static float *falloc(int64_t n)
{
    float *p = calloc((size_t)n, sizeof(float));
    TFC_ASSERT(p != NULL);
    return p;
}

/* y = the model's output for x, in training or not, on `threads` threads */
static void model_run(const char *yaml, const float *x, int batch, int training, int threads,
                      float *y)
{
    tfc_model *m = tfc_test_model(yaml);
    tfc_backend *be = tfc_cpu_backend_create(threads);
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(m && be);
    if (tfc_model_bind(m, be, batch, &err)) fprintf(stderr, "\n%s", err.text);
    TFC_ASSERT(tfc_model_forward(m, x, batch, training, 1, 0, &err) == TFC_OK);
    tfc_model_get_output(m, y);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* the desc of each case's layer, as augment_tone.c's tone_desc makes it */
static int op_desc(const char *name, tfc_tone_desc *d)
{
    static const struct {
        const char *name;
        tfc_tone_kind kind;
        int bins;
        float vlo, vhi;
    } descs[] = {{"autocontrast_default", TFC_TONE_AUTOCONTRAST, 0, 0, 255},
                 {"autocontrast_range", TFC_TONE_AUTOCONTRAST, 0, -1, 1},
                 {"equalize_default", TFC_TONE_EQUALIZE, 256, 0, 255},
                 {"equalize_bins", TFC_TONE_EQUALIZE, 16, 0, 1},
                 {"equalize_outside", TFC_TONE_EQUALIZE, 64, -1, 1}};
    for (size_t k = 0; k < sizeof descs / sizeof *descs; k++) {
        if (strcmp(name, descs[k].name)) continue;
        d->kind = descs[k].kind, d->bins = descs[k].bins;
        d->vlo = descs[k].vlo, d->vhi = descs[k].vhi;
        return 1;
    }
    return 0;
}

/* Every case of tests/ref/tone/tone.safetensors: the layer in training (y) and at inference
 * (yi), and the op's backward (from zero: it accumulates) against Keras's dx. */
static void test_parity_keras(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open("tests/ref/tone/tone.safetensors", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    tfc_backend *be = tfc_cpu_backend_create(2);
    int cases = 0;
    double worst = 0;
    for (int k = 0; k < tfc_st_meta_count(f); k++) {
        const char *key, *yaml;
        tfc_st_meta_at(f, k, &key, &yaml);
        if (strncmp(key, "yaml_", 5)) continue;
        const char *name = key + 5;
        const int n = 2, hw = 12, c = 3;
        const int64_t numel = (int64_t)n * hw * c;
        float *x = tfc_test_tensor_at(f, "x_", name, numel), *dy = tfc_test_tensor_at(f, "dy_", name, numel);
        float *y = tfc_test_tensor_at(f, "y_", name, numel), *yi = tfc_test_tensor_at(f, "yi_", name, numel);
        float *dx = tfc_test_tensor_at(f, "dx_", name, numel), *got = falloc(numel);
        model_run(yaml, x, n, 1, 2, got);
        int bad = tfc_test_mismatches(got, y, numel, &worst);
        model_run(yaml, x, n, 0, 2, got);
        bad += tfc_test_mismatches(got, yi, numel, &worst);
        /* the op itself, with the layer's desc (its value_range sorted, bins) */
        tfc_tone_desc d = {.n = n, .hw = hw, .c = c};
        if (!op_desc(name, &d)) CU_FAIL("a case without its desc");
        memset(got, 0, (size_t)numel * sizeof(float));
        be->ops->tone_backward(be, &d, x, dy, got);
        const int bad_dx = tfc_test_mismatches(got, dx, numel, &worst);
        if (bad || bad_dx) printf("\n  %s: %d values off, %d gradients off", name, bad, bad_dx);
        CU_ASSERT_EQUAL(bad + bad_dx, 0);
        free(x), free(dy), free(y), free(yi), free(dx), free(got);
        cases++;
    }
    printf("\n  %d cases, worst diff %.3g ", cases, worst);
    CU_ASSERT_EQUAL(cases, 5);
    tfc_backend_free(be);
    tfc_st_close(f);
}

/* The C inference API applies AutoContrast (and leaves Equalization out, as Keras's
 * inference): a model of both, its weights (none) written by tfc, against Keras's output at
 * inference for the autocontrast_range case's input. */
static void test_predictor(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open("tests/ref/tone/tone.safetensors", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    const int64_t numel = 2 * 12 * 3;
    float *x = tfc_test_tensor_at(f, "x_", "autocontrast_range", numel);
    float *yi = tfc_test_tensor_at(f, "yi_", "autocontrast_range", numel), *got = falloc(numel);
    const char *yaml = "input: {shape: [3, 4, 3]}\nlayers:\n"
                       "  - Equalization: {value_range: [-1, 1]}\n"
                       "  - AutoContrast: {value_range: [1, -1]}\n";
    char model[1024], weights[1024], msg[512];
    snprintf(model, sizeof model, "%s", tfc_test_write("tone.yaml", yaml, -1));
    snprintf(weights, sizeof weights, "%s", tfc_test_path("tone.safetensors"));
    tfc_model *m = tfc_test_model(yaml);
    tfc_backend *be = tfc_cpu_backend_create(1);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, 1, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_save_weights(m, weights, &err), TFC_OK);
    tfc_model_free(m);
    tfc_backend_free(be);
    tfc_predictor *p = tfc_predictor_open(model, weights, "cpu", msg, sizeof msg);
    if (!p) printf("\n%s", msg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_predictor_run(p, x, 2, got, msg, sizeof msg), 0);
    double worst = 0;
    CU_ASSERT_EQUAL(tfc_test_mismatches(got, yi, numel, &worst), 0);
    tfc_predictor_close(p);
    free(x), free(yi), free(got);
    tfc_st_close(f);
}

/* The same outputs on 1 and 3 threads, in training and at inference, on a larger batch. */
static void test_threads(void)
{
    const int n = 5, h = 7, w = 6, c = 3;
    const int64_t numel = (int64_t)n * h * w * c;
    float *x = falloc(numel), *a = falloc(numel), *b = falloc(numel);
    for (int64_t i = 0; i < numel; i++) x[i] = (float)((i * 7919) % 256);
    const char *layers[] = {"AutoContrast: {}", "Equalization: {bins: 32}",
                            "AutoContrast: {value_range: [0, 300]}"};
    for (int k = 0; k < 3; k++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [%d, %d, %d]}\nlayers:\n  - %s\n", h, w, c,
                 layers[k]);
        for (int training = 0; training < 2; training++) {
            model_run(yaml, x, n, training, 1, a);
            model_run(yaml, x, n, training, 3, b);
            CU_ASSERT(memcmp(a, b, (size_t)numel * sizeof(float)) == 0);
        }
    }
    free(x), free(a), free(b);
}

static void test_config_errors(void)
{
    static const struct {
        const char *layer, *want;
    } bad[] = {
        {"AutoContrast: {value_range: [1]}", "value_range: expected a pair"},
        {"AutoContrast: {value_range: [2, 2]}", "value_range: low and high must differ"},
        {"AutoContrast: {data_format: channels_first}", "data_format"},
        {"AutoContrast: {factor: 0.5}", "factor"},
        {"Equalization: {bins: 0}", "bins"},
        {"Equalization: {bins: 5000}", "bins"},
        {"Equalization: {value_range: [0, 1, 2]}", "value_range: expected a pair"},
        {"Equalization: {data_format: channels_first}", "data_format"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [4, 4, 3]}\nlayers:\n  - %s\n",
                 bad[k].layer);
        tfc_error err;
        tfc_error_clear(&err);
        tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), "bad.yaml", &err);
        if (m) {
            tfc_backend *be = tfc_cpu_backend_create(1);
            CU_ASSERT(tfc_model_bind(m, be, 1, &err) != TFC_OK);
            tfc_model_free(m);
            tfc_backend_free(be);
        }
        const int ok = strstr(err.text, bad[k].want) && strstr(err.text, "bad.yaml:");
        if (!ok) printf("\n%s: %s", bad[k].layer, err.text);
        CU_ASSERT(ok);
    }
    /* a 2-D input is no image */
    tfc_error err;
    tfc_error_clear(&err);
    const char *flat = "input: {shape: [4, 3]}\nlayers:\n  - Equalization: {}\n";
    tfc_model *m = tfc_model_from_string(flat, strlen(flat), "bad.yaml", &err);
    CU_ASSERT(m == NULL && strstr(err.text, "needs an input of shape (height, width"));
    tfc_model_free(m);
}

/* Every case of tests/ref/clahe/clahe.safetensors: the layer in training and at inference
 * (the same, as Keras's) against Keras's output; the op's backward adds nothing (Keras's
 * gradient is zero). */
static void test_clahe_parity_keras(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open("tests/ref/clahe/clahe.safetensors", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    int cases = 0;
    double worst = 0;
    for (int k = 0; k < tfc_st_meta_count(f); k++) {
        const char *key, *yaml;
        tfc_st_meta_at(f, k, &key, &yaml);
        if (strncmp(key, "yaml_", 5)) continue;
        const char *name = key + 5;
        char xname[64];
        snprintf(xname, sizeof xname, "x_%s", name);
        const tfc_st_tensor *t = tfc_st_find(f, xname);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        const int n = (int)t->shape.dim[0];
        const int64_t numel = t->numel;
        float *x = tfc_test_tensor_at(f, "x_", name, numel);
        float *y = tfc_test_tensor_at(f, "y_", name, numel), *got = falloc(numel);
        int bad = 0;
        for (int training = 0; training < 2; training++) {
            model_run(yaml, x, n, training, 2, got);
            bad += tfc_test_mismatches(got, y, numel, &worst);
        }
        /* the op's backward: dx stays as it was */
        tfc_backend *be = tfc_cpu_backend_create(1);
        tfc_tone_desc d = {.n = n, .hw = (int)(t->shape.dim[1] * t->shape.dim[2]),
                           .c = (int)t->shape.dim[3], .kind = TFC_TONE_CLAHE};
        for (int64_t i = 0; i < numel; i++) got[i] = 0.25f;
        be->ops->tone_backward(be, &d, x, y, got);
        int moved = 0;
        for (int64_t i = 0; i < numel; i++) moved += got[i] != 0.25f;
        if (bad || moved) printf("\n  %s: %d values off, %d gradients", name, bad, moved);
        CU_ASSERT_EQUAL(bad + moved, 0);
        tfc_backend_free(be);
        free(x), free(y), free(got);
        cases++;
    }
    printf("\n  %d cases, worst diff %.3g ", cases, worst);
    CU_ASSERT_EQUAL(cases, 7);
    tfc_st_close(f);
}

/* CLAHE the same on 1 and 3 threads; refused on a device (CPU-first); its config errors. */
static void test_clahe_threads_and_errors(void)
{
    const int n = 3, h = 11, w = 9, c = 3;
    const int64_t numel = (int64_t)n * h * w * c;
    float *x = falloc(numel), *a = falloc(numel), *b = falloc(numel);
    for (int64_t i = 0; i < numel; i++) x[i] = (float)((i * 7919) % 256);
    const char *layer = "ContrastLimitedAdaptiveHistogramEqualization: {tile_grid_size: [3, 2]}";
    tfc_test_run_image_layer(layer, h, w, c, n, 1, x, 1, 1, 0, a);
    tfc_test_run_image_layer(layer, h, w, c, n, 3, x, 1, 1, 0, b);
    CU_ASSERT(memcmp(a, b, (size_t)numel * sizeof(float)) == 0);
    free(x), free(a), free(b);
    tfc_test_expect_cpu_first("input: {shape: [4, 4, 1]}\nlayers:\n"
                              "  - ContrastLimitedAdaptiveHistogramEqualization: {}\n",
                              "contrast_limited_adaptive_histogram_equalization",
                              "ContrastLimitedAdaptiveHistogramEqualization");
    static const struct {
        const char *args, *want;
    } bad[] = {
        {"{tile_grid_size: [8]}", "tile_grid_size: expected a pair"},
        {"{tile_grid_size: [0, 2]}", "tile_grid_size: 0 is outside"},
        {"{tile_grid_size: [2, 100]}", "tile_grid_size: 100 is outside"},
        {"{value_range: [3, 3]}", "value_range: low and high must differ"},
        {"{data_format: channels_first}", "data_format"},
        {"{bins: 8}", "bins"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [4, 4, 3]}\nlayers:\n"
                 "  - ContrastLimitedAdaptiveHistogramEqualization: %s\n", bad[k].args);
        tfc_error err;
        tfc_error_clear(&err);
        tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), "bad.yaml", &err);
        if (m) {
            tfc_backend *be = tfc_cpu_backend_create(1);
            CU_ASSERT(tfc_model_bind(m, be, 1, &err) != TFC_OK);
            tfc_model_free(m);
            tfc_backend_free(be);
        }
        const int ok = strstr(err.text, bad[k].want) && strstr(err.text, "bad.yaml:");
        if (!ok) printf("\n%s: %s", bad[k].args, err.text);
        CU_ASSERT(ok);
    }
}

static void drop_tone_forward(tfc_backend_ops *ops)
{
    ops->tone_forward = NULL;
}

static void drop_tone_backward(tfc_backend_ops *ops)
{
    ops->tone_backward = NULL;
}

/* On a table without the ops binding is refused naming the layer and the op. */
static void test_missing_kernels_refused(void)
{
    tfc_test_expect_refused("input: {shape: [4, 4, 3]}\nlayers:\n  - AutoContrast: {}\n",
                            drop_tone_forward, "AutoContrast", "tone_forward");
    tfc_test_expect_refused("input: {shape: [4, 4, 3]}\nlayers:\n  - Equalization: {}\n",
                            drop_tone_backward, "Equalization", "tone_backward");
}

TFC_TEST_MAIN("augment_tone", {"parity_keras", test_parity_keras}, {"predictor", test_predictor},
              {"threads", test_threads},
              {"config_errors", test_config_errors},
              {"missing_kernels_refused", test_missing_kernels_refused},
              {"clahe_parity_keras", test_clahe_parity_keras},
              {"clahe_threads_and_errors", test_clahe_threads_and_errors})
