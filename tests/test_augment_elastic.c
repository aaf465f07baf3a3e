/* RandomElasticTransform (layers/augment_elastic.c, core/elastic.h, cpu/cpu_elastic.c): the op
 * given Keras's draws (the normals, the distortion factor, which images move) against Keras 3's
 * output and input gradient (tests/ref/keras_elastic.py); the layer: the identity at
 * inference and when factor's upper bound is 0, its draws repeated by (seed, step) and
 * changed by the step, the same on 1 and 3 threads, outputs in value_range; config errors,
 * the refusal of a device (CPU-first) and of a backend without the ops. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/elastic.h"
#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "testutil.h"

static float *falloc(int64_t n)
{
    float *p = calloc((size_t)n, sizeof(float));
    TFC_ASSERT(p != NULL);
    return p;
}

/* each case's layer arguments as the desc takes them (keras_elastic.py's cases) */
static int case_desc(const char *name, tfc_elastic_desc *d)
{
    static const struct {
        const char *name;
        tfc_fill_mode fill;
        int bilinear;
        float fill_value, vlo, vhi;
    } cases[] = {{"bilinear_reflect", TFC_FILL_REFLECT, 1, 0, 0, 255},
                 {"nearest_constant", TFC_FILL_CONSTANT, 0, 7, 0, 255},
                 {"wrap", TFC_FILL_WRAP, 1, 0, 0, 255},
                 {"mirror_nearest", TFC_FILL_MIRROR, 0, 0, 0, 255},
                 {"nearest_fill_unit", TFC_FILL_NEAREST, 1, 0, 0, 1},
                 {"unmoved_clip", TFC_FILL_REFLECT, 1, 0, 0, 255}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        if (strcmp(name, cases[k].name)) continue;
        d->fill = cases[k].fill, d->bilinear = cases[k].bilinear;
        d->fill_value = cases[k].fill_value, d->vlo = cases[k].vlo, d->vhi = cases[k].vhi;
        return 1;
    }
    return 0;
}

/* Every case of tests/ref/elastic/elastic.safetensors: the forward with Keras's draws (the
 * probability range [1, 1] moves every image, [0, 0] none) and its backward (from zero: it
 * accumulates) against Keras's y and dx; the layer at inference is x itself. */
static void test_parity_keras(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open("tests/ref/elastic/elastic.safetensors", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    tfc_backend *be = tfc_cpu_backend_create(2);
    int cases = 0, moved_pixels = 0;
    double worst_y = 0, worst_dx = 0;
    for (int k = 0; k < tfc_st_meta_count(f); k++) {
        const char *key, *args;
        tfc_st_meta_at(f, k, &key, &args);
        if (strncmp(key, "yaml_", 5)) continue;
        const char *name = key + 5;
        char xname[64];
        snprintf(xname, sizeof xname, "x_%s", name);
        const tfc_st_tensor *t = tfc_st_find(f, xname);
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        const int n = (int)t->shape.dim[0], h = (int)t->shape.dim[1], w = (int)t->shape.dim[2];
        const int c = (int)t->shape.dim[3];
        const int64_t numel = t->numel;
        float *x = tfc_test_tensor_at(f, "x_", name, numel);
        float *dy = tfc_test_tensor_at(f, "dy_", name, numel);
        float *y = tfc_test_tensor_at(f, "y_", name, numel);
        float *dx = tfc_test_tensor_at(f, "dx_", name, numel);
        float *noise = tfc_test_tensor_at(f, "noise_", name, (int64_t)n * h * w);
        float *s = tfc_test_tensor_at(f, "s_", name, 2), *got = falloc(numel);
        tfc_elastic_desc d = {.n = n, .h = h, .w = w, .c = c, .plo = s[1], .phi = s[1],
                              .key = 99, .step = 3, .noise = noise};
        if (!case_desc(name, &d)) CU_FAIL("a case without its desc");
        tfc_elastic_params(h, w, s[0], &d.alpha, &d.sigma, &d.k);
        /* within 2e-5 of the largest value: the field's blur sums in another order than
         * XLA's convolution, and a read's coordinate off by 1e-6 of a pixel moves a value by
         * that much of its neighbour's difference (these images are noise) */
        be->ops->elastic_forward(be, &d, x, got);
        double abs_y = 0, abs_dx = 0;
        const double rel_y = tfc_test_rel_diff(got, y, numel, 1e-3, &abs_y);
        for (int64_t i = 0; i < numel; i++) moved_pixels += got[i] != x[i];
        memset(got, 0, (size_t)numel * sizeof(float));
        be->ops->elastic_backward(be, &d, x, dy, got);
        const double rel_dx = tfc_test_rel_diff(got, dx, numel, 1e-3, &abs_dx);
        const int bad = rel_y > 2e-5, bad_dx = rel_dx > 2e-5;
        worst_y = fmax(worst_y, abs_y), worst_dx = fmax(worst_dx, abs_dx);
        printf("\n  %s: y %.2g (abs %.2g), dx %.2g (abs %.2g)", name, rel_y, abs_y, rel_dx,
               abs_dx);
        /* the layer at inference: x, unclipped */
        char layer[256];
        snprintf(layer, sizeof layer, "RandomElasticTransform: %s", args);
        tfc_test_run_image_layer(layer, h, w, c, n, 2, x, 0, 1, 0, got);
        const int bad_inf = memcmp(got, x, (size_t)numel * sizeof(float)) != 0;
        if (bad_inf) printf("\n  %s: not x at inference", name);
        CU_ASSERT_EQUAL(bad + bad_dx + bad_inf, 0);
        free(x), free(dy), free(y), free(dx), free(noise), free(s), free(got);
        cases++;
    }
    printf("\n  %d cases, worst abs diff y %.3g, dx %.3g ", cases, worst_y, worst_dx);
    CU_ASSERT_EQUAL(cases, 6);
    CU_ASSERT(moved_pixels > 1000); /* the fixtures do move */
    tfc_backend_free(be);
    tfc_st_close(f);
}

/* The layer in training: its draws repeated for a (seed, step), another step another field,
 * the same on 1 and 3 threads, every output in value_range; factor 0 (Keras draws nothing) is
 * x itself, unclipped; factor [1, 1] moves every image. */
static void test_layer_draws(void)
{
    const int n = 4, h = 13, w = 11, c = 3;
    const int64_t numel = (int64_t)n * h * w * c;
    float *x = falloc(numel), *a = falloc(numel), *b = falloc(numel);
    tfc_test_fill(x, numel, -20, 270, 5);
    const char *layer = "RandomElasticTransform: {factor: [1, 1], seed: 4}";
    tfc_test_run_image_layer(layer, h, w, c, n, 1, x, 1, 1, 7, a);
    tfc_test_run_image_layer(layer, h, w, c, n, 3, x, 1, 1, 7, b);
    CU_ASSERT(memcmp(a, b, (size_t)numel * sizeof(float)) == 0);
    int outside = 0, moved = 0;
    for (int64_t i = 0; i < numel; i++) {
        outside += a[i] < 0 || a[i] > 255;
        moved += a[i] != fminf(fmaxf(x[i], 0), 255);
    }
    CU_ASSERT_EQUAL(outside, 0);
    CU_ASSERT(moved > numel / 2);
    tfc_test_run_image_layer(layer, h, w, c, n, 1, x, 1, 1, 8, b);
    CU_ASSERT(memcmp(a, b, (size_t)numel * sizeof(float)) != 0);
    tfc_test_run_image_layer("RandomElasticTransform: {factor: 0}", h, w, c, n, 1, x, 1, 1, 7, b);
    CU_ASSERT(memcmp(x, b, (size_t)numel * sizeof(float)) == 0);
    free(x), free(a), free(b);
}

/* The blur's taps: Keras's kernel size int(6 sigma) | 1, the taps symmetric about the centre
 * and summing to 1 once normalised. */
static void test_params(void)
{
    float alpha, sigma;
    int k;
    tfc_elastic_params(40, 30, 1.0f, &alpha, &sigma, &k);
    CU_ASSERT(fabsf(alpha - 4.0f) < 1e-6f && fabsf(sigma - 1.5f) < 1e-6f && k == 9);
    tfc_elastic_params(20, 24, 0.5f, &alpha, &sigma, &k);
    CU_ASSERT(fabsf(alpha - 1.2f) < 1e-6f && fabsf(sigma - 0.5f) < 1e-6f && k == 3);
    tfc_elastic_desc d = {.h = 40, .w = 30, .k = 9, .sigma = 1.5f};
    const float norm = tfc_elastic_tap_sum(&d);
    float sum = 0;
    for (int j = 0; j < d.k; j++) sum += tfc_elastic_tap(&d, j) / norm;
    CU_ASSERT(fabsf(sum - 1) < 1e-6f);
    CU_ASSERT_EQUAL(tfc_elastic_tap(&d, 0), tfc_elastic_tap(&d, 8));
    CU_ASSERT_EQUAL(tfc_elastic_tap(&d, 4), 1.0f);
    /* mirror: (c b | a b c d | c b) */
    CU_ASSERT_EQUAL(tfc_warp_place(-1, 4, TFC_FILL_MIRROR), 1);
    CU_ASSERT_EQUAL(tfc_warp_place(-2, 4, TFC_FILL_MIRROR), 2);
    CU_ASSERT_EQUAL(tfc_warp_place(4, 4, TFC_FILL_MIRROR), 2);
    CU_ASSERT_EQUAL(tfc_warp_place(6, 4, TFC_FILL_MIRROR), 0);
    CU_ASSERT_EQUAL(tfc_warp_place(7, 4, TFC_FILL_MIRROR), 1);
    CU_ASSERT_EQUAL(tfc_warp_place(5, 1, TFC_FILL_MIRROR), 0);
}

static void test_config_errors(void)
{
    static const struct {
        const char *layer, *want;
    } bad[] = {
        {"RandomElasticTransform: {factor: 1.5}", "factor: 1.5 is outside [0, 1]"},
        {"RandomElasticTransform: {scale: [2, 3]}", "scale: a pair [lower, upper] needs lower"},
        {"RandomElasticTransform: {scale: [0.1, 0.2, 0.3]}", "scale: expected a number or a pair"},
        {"RandomElasticTransform: {interpolation: bicubic}", "interpolation"},
        {"RandomElasticTransform: {fill_mode: edge}", "fill_mode"},
        {"RandomElasticTransform: {value_range: [1]}", "value_range: expected a pair"},
        {"RandomElasticTransform: {data_format: channels_first}", "data_format"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [4, 4, 3]}\nlayers:\n  - %s\n", bad[k].layer);
        tfc_test_expect_model_error(yaml, bad[k].want);
    }
    tfc_test_expect_model_error("input: {shape: [4, 3]}\nlayers:\n"
                                "  - RandomElasticTransform: {}\n", "RandomElasticTransform");
}

static void drop_elastic(tfc_backend_ops *ops)
{
    ops->elastic_backward = NULL;
}

/* CPU-first: refused on any device but the CPU, naming the layer; and by a backend without
 * its ops, naming the op. */
static void test_refused(void)
{
    tfc_test_expect_cpu_first("input: {shape: [4, 4, 1]}\nlayers:\n"
                              "  - RandomElasticTransform: {name: el}\n",
                              "el", "RandomElasticTransform");
    tfc_test_expect_refused("input: {shape: [4, 4, 3]}\nlayers:\n"
                            "  - RandomElasticTransform: {}\n",
                            drop_elastic, "RandomElasticTransform", "elastic_backward");
}

TFC_TEST_MAIN("augment_elastic", {"parity_keras", test_parity_keras},
              {"layer_draws", test_layer_draws}, {"params", test_params},
              {"config_errors", test_config_errors}, {"refused", test_refused})
