/* RandomPerspective (a warp kind, layers/augment.c) and RandomSharpness
 * (layers/augment_sharpness.c) against Keras 3 (tests/ref/keras_augment_persp.py):
 * RandomSharpness's outputs and input gradients for pinned factors through the layer;
 * RandomPerspective's homography, output and input gradient from the warp op for the corners
 * tfc draws (the generator draws them as tfc does); the draws' statistics, determinism,
 * inference, argument errors and the refusals of a device without them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/augment.h"
#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "graph/model.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "layers/layer.h"
#include "testutil.h"

static float *falloc(int64_t n)
{
    float *p = calloc((size_t)n, sizeof(float));
    TFC_ASSERT(p != NULL);
    return p;
}

/* |got - want| <= rel |want| + abs_scale over n values; the largest difference raises
 * *worst. */
static int close_to(const float *got, const float *want, int64_t n, double rel, double abs_,
                    double *worst)
{
    int ok = 1;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - want[i]);
        *worst = fmax(*worst, d);
        ok &= d <= rel * fabs(want[i]) + abs_;
    }
    return ok;
}

/* The training output y at (seed 1, step) of the fixture's YAML plus an MSE loss, and the
 * input's gradient dx of sum(y w) (the MSE against t = y - w N / 2, N values). */
static void step_case(const char *key, const char *yaml, const float *x, const float *w,
                      int batch, int64_t n, int step, float *y, float *dx)
{
    char full[1024];
    snprintf(full, sizeof full, "%sloss: mse\n", yaml);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_backend *be = tfc_cpu_backend_create(2);
    tfc_model *m = tfc_model_from_string(full, strlen(full), key, &err);
    if (!m) fprintf(stderr, "\n%s", err.text);
    TFC_ASSERT(m && be && tfc_model_bind(m, be, batch, &err) == TFC_OK);
    tfc_model_want_input_grad(m, 1);
    float *t = falloc(n);
    TFC_ASSERT(tfc_model_forward(m, x, batch, 1, 1, (uint64_t)step, &err) == TFC_OK);
    tfc_model_get_output(m, y);
    for (int64_t i = 0; i < n; i++) t[i] = y[i] - w[i] * (float)n / 2;
    tfc_batch_result res;
    tfc_model_zero_grad(m);
    TFC_ASSERT(tfc_model_loss(m, t, 1, &res, &err) == TFC_OK);
    tfc_model_backward(m);
    be->ops->download(be, dx, tfc_model_input_grad(m), (size_t)n * 4);
    free(t);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* RandomSharpness's cases (yaml_<case> with y_<case>): the layer in training at steps 1 to 3
 * (its factor pinned) against Keras's output and input gradient. */
static void test_sharpness_keras(void)
{
    tfc_st_file *f = tfc_test_fixture("augment_persp", "augment_persp");
    int64_t n = 0;
    float *x = tfc_test_tensor(f, "x", &n), *w = tfc_test_tensor(f, "w", NULL);
    const int batch = (int)tfc_st_find(f, "x")->shape.dim[0];
    float *got = falloc(n), *dx = falloc(n);
    int cases = 0;
    double worst_y = 0, worst_dx = 0;
    for (int k = 0; k < tfc_st_meta_count(f); k++) {
        const char *key, *yaml;
        tfc_st_meta_at(f, k, &key, &yaml);
        if (strncmp(key, "yaml_", 5)) continue;
        char name[128];
        snprintf(name, sizeof name, "y_%s", key + 5);
        float *want = tfc_test_tensor(f, name, NULL);
        snprintf(name, sizeof name, "dx_%s", key + 5);
        float *want_dx = tfc_test_tensor(f, name, NULL);
        CU_ASSERT_FATAL(want && want_dx);
        for (int step = 1; step <= 3; step++) {
            double dy = 0, dg = 0;
            step_case(key, yaml, x, w, batch, n, step, got, dx);
            if (!close_to(got, want, n, 1e-5, 1e-6, &dy) ||
                !close_to(dx, want_dx, n, 1e-5, 2e-6, &dg)) {
                printf("\n  %s step %d: y off by %.3g, dx by %.3g", key + 5, step, dy, dg);
                CU_FAIL("RandomSharpness differs from Keras");
            }
            worst_y = fmax(worst_y, dy), worst_dx = fmax(worst_dx, dg);
        }
        cases++;
        free(want), free(want_dx);
    }
    printf("\n  %d cases: max abs diff y %.3g, dx %.3g", cases, worst_y, worst_dx);
    CU_ASSERT(cases >= 7);
    free(x), free(w), free(got), free(dx);
    tfc_st_close(f);
}

/* RandomPerspective's cases (desc_<case>: "key step plo phi scale bilinear fill_value"):
 * tfc_warp_matrix against Keras's homography ph_<case> (1e-5 relative to the largest
 * coefficient of its row's kind), then the CPU's warp op on px against py_<case> and its
 * transpose on pw against pdx_<case>. */
static void test_perspective_keras(void)
{
    tfc_st_file *f = tfc_test_fixture("augment_persp", "augment_persp");
    int64_t n = 0;
    float *x = tfc_test_tensor(f, "px", &n), *w = tfc_test_tensor(f, "pw", NULL);
    const tfc_st_tensor *tx = tfc_st_find(f, "px");
    tfc_backend *be = tfc_cpu_backend_create(2);
    float *got = falloc(n), *dx = falloc(n);
    int cases = 0, applied = 0, kept = 0;
    double worst_m = 0, worst_y = 0, worst_dx = 0;
    for (int k = 0; k < tfc_st_meta_count(f); k++) {
        const char *key, *desc;
        tfc_st_meta_at(f, k, &key, &desc);
        if (strncmp(key, "desc_", 5)) continue;
        unsigned long long rkey, step;
        double plo, phi, scale, fill;
        int bil;
        CU_ASSERT_FATAL(sscanf(desc, "%llu %llu %lf %lf %lf %d %lf", &rkey, &step, &plo, &phi,
                               &scale, &bil, &fill) == 7);
        const tfc_warp_desc d = {
            .n = (int)tx->shape.dim[0], .h = (int)tx->shape.dim[1], .w = (int)tx->shape.dim[2],
            .c = (int)tx->shape.dim[3], .kind = TFC_WARP_PERSPECTIVE, .lo = {plo, -0.5 * scale},
            .hi = {phi, 0.5 * scale}, .fill = TFC_FILL_CONSTANT, .bilinear = bil,
            .fill_value = (float)fill, .key = rkey, .step = step};
        char name[128];
        snprintf(name, sizeof name, "ph_%s", key + 5);
        float *hm = tfc_test_tensor(f, name, NULL);
        snprintf(name, sizeof name, "py_%s", key + 5);
        float *want = tfc_test_tensor(f, name, NULL);
        snprintf(name, sizeof name, "pdx_%s", key + 5);
        float *want_dx = tfc_test_tensor(f, name, NULL);
        CU_ASSERT_FATAL(hm && want && want_dx);
        for (int i = 0; i < d.n; i++) {
            float m[8];
            tfc_warp_matrix(&d, i, m);
            const float *h = hm + 8 * i;
            const int ident = h[0] == 1 && h[1] == 0 && h[2] == 0 && h[4] == 1 && h[6] == 0;
            applied += !ident, kept += ident;
            for (int j = 0; j < 8; j++) {
                /* the translations' scale is the image's, the denominator's 1 / size */
                const double s = j == 2 || j == 5 ? d.w : j >= 6 ? 1.0 / d.w : 1.0;
                const double e = fabs((double)m[j] - h[j]) / s;
                worst_m = fmax(worst_m, e);
                if (e > 1e-5) {
                    printf("\n  %s image %d: m[%d] %.8g, Keras %.8g", key + 5, i, j, m[j], h[j]);
                    CU_FAIL("RandomPerspective's homography differs from Keras's");
                }
            }
        }
        be->ops->warp_forward(be, &d, x, got);
        memset(dx, 0, (size_t)n * 4);
        be->ops->warp_backward(be, &d, w, dx);
        double dy = 0, dg = 0;
        const int ok_y = close_to(got, want, n, 1e-4, 1e-5, &dy);
        if (!close_to(dx, want_dx, n, 1e-4, 1e-5, &dg) || !ok_y) {
            printf("\n  %s: y off by %.3g, dx by %.3g", key + 5, dy, dg);
            CU_FAIL("RandomPerspective differs from Keras");
        }
        worst_y = fmax(worst_y, dy), worst_dx = fmax(worst_dx, dg);
        cases++;
        free(hm), free(want), free(want_dx);
    }
    printf("\n  %d cases (%d images transformed, %d kept): max diff m %.3g, y %.3g, dx %.3g",
           cases, applied, kept, worst_m, worst_y, worst_dx);
    CU_ASSERT(cases >= 4 && applied >= 8 && kept >= 1);
    free(x), free(w), free(got), free(dx);
    tfc_backend_free(be);
    tfc_st_close(f);
}

/* RandomPerspective on ramps (each cell its own value, bilinear): a transformed image moves
 * some cell (its corners move by up to scale / 2 of the image). factor [0.3, 0.3]: about 30%
 * of the images transformed; the default factor 1 (p uniform in [0, 1]): about half; scale 0
 * or factor 0: none (each case at its own step). The corner
 * (w - 1, 0)'s column moves by f (w - 1), f uniform in [-scale / 2, scale / 2]: measured
 * through the matrix (its end point maps back to the corner). */
static void test_perspective_statistics(void)
{
    const int n = 2000, h = 10, w = 12;
    float *x = falloc((int64_t)n * h * w), *y = falloc((int64_t)n * h * w);
    for (int64_t i = 0; i < (int64_t)n * h * w; i++) x[i] = (float)(i % (h * w));
    static const struct {
        const char *layer;
        double want;
    } cases[] = {
        {"RandomPerspective: {factor: [0.3, 0.3]}", 0.3},
        {"RandomPerspective: {}", 0.5},
        {"RandomPerspective: {scale: 0}", 0},
        {"RandomPerspective: {factor: 0}", 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        tfc_test_run_image_layer(cases[k].layer, h, w, 1, n, 2, x, 1, 1, 3 + k, y);
        int changed = 0;
        for (int i = 0; i < n; i++)
            changed += memcmp(y + (int64_t)i * h * w, x, sizeof(float) * h * w) != 0;
        printf("\n  %s: %d of %d changed", cases[k].layer, changed, n);
        CU_ASSERT(fabs(changed - cases[k].want * n) < 0.04 * n);
    }
    /* the corner factors' range and mean, from the draws the matrix uses */
    const tfc_warp_desc d = {.n = n, .h = h, .w = w, .c = 1, .kind = TFC_WARP_PERSPECTIVE,
                             .lo = {1, -0.3f}, .hi = {1, 0.3f}, .key = 77, .step = 5};
    double lo = 1, hi = -1, mean = 0;
    for (int i = 0; i < n; i++) {
        float m[8];
        tfc_warp_matrix(&d, i, m);
        /* the end point ex of corner (w - 1, 0) solves (m0 ex + m2) / (m6 ex + 1) = w - 1 */
        const double ex = ((w - 1) - m[2]) / (m[0] - (w - 1) * (double)m[6]);
        const double fx = ex / (w - 1) - 1;
        lo = fmin(lo, fx), hi = fmax(hi, fx), mean += fx / n;
    }
    printf("\n  corner factor in [%.4f, %.4f], mean %.4f", lo, hi, mean);
    CU_ASSERT(lo >= -0.3001 && lo < -0.29 && hi <= 0.3001 && hi > 0.29 && fabs(mean) < 0.015);
    free(x), free(y);
}

/* RandomSharpness's factor f, read back from impulses (1 at the centre of 5 x 5, value_range
 * [-10, 10]): the centre becomes 1 + (1 - 2 f) (5 / 13 - 1); f uniform in [0.2, 0.7]. */
static void test_sharpness_statistics(void)
{
    const int n = 3000, h = 5, w = 5;
    float *x = falloc((int64_t)n * h * w), *y = falloc((int64_t)n * h * w);
    for (int i = 0; i < n; i++) x[(int64_t)i * h * w + 12] = 1;
    tfc_test_run_image_layer("RandomSharpness: {factor: [0.2, 0.7], value_range: [-10, 10]}", h,
                             w, 1, n, 2, x, 1, 1, 2, y);
    double lo = 1, hi = 0, mean = 0, var = 0;
    for (int i = 0; i < n; i++) {
        const double c = (1 - y[(int64_t)i * h * w + 12]) / (8.0 / 13.0), f = (1 - c) / 2;
        lo = fmin(lo, f), hi = fmax(hi, f), mean += f / n, var += f * f / n;
    }
    var -= mean * mean;
    printf("\n  factor in [%.4f, %.4f], mean %.4f, var %.5f", lo, hi, mean, var);
    CU_ASSERT(lo >= 0.2 - 1e-5 && lo < 0.21 && hi <= 0.7 + 1e-5 && hi > 0.69);
    CU_ASSERT(fabs(mean - 0.45) < 0.01 && fabs(var - 0.25 / 12) < 0.002);
    free(x), free(y);
}

/* Both layers: y = x at inference; in training the same (seed, step) repeat, another step,
 * run seed or layer seed changes the images. */
static void test_determinism(void)
{
    static const char *const layers[][2] = {
        {"RandomPerspective: {}", "RandomPerspective: {seed: 4}"},
        {"RandomSharpness: {factor: 1, value_range: [0, 1]}",
         "RandomSharpness: {factor: 1, value_range: [0, 1], seed: 4}"}};
    const int n = 64, per = 8 * 9 * 3;
    float *x = falloc(n * per), *a = falloc(n * per), *b = falloc(n * per);
    tfc_test_fill(x, n * per, 0, 1, 5);
    for (int k = 0; k < 2; k++) {
        const char *layer = layers[k][0];
        tfc_test_run_image_layer(layer, 8, 9, 3, n, 2, x, 0, 1, 1, a);
        CU_ASSERT(memcmp(a, x, sizeof(float) * n * per) == 0);
        tfc_test_run_image_layer(layer, 8, 9, 3, n, 2, x, 1, 1, 1, a);
        CU_ASSERT(memcmp(a, x, sizeof(float) * n * per) != 0);
        tfc_test_run_image_layer(layer, 8, 9, 3, n, 2, x, 1, 1, 1, b);
        CU_ASSERT(memcmp(a, b, sizeof(float) * n * per) == 0);
        tfc_test_run_image_layer(layer, 8, 9, 3, n, 2, x, 1, 1, 2, b);
        CU_ASSERT(memcmp(a, b, sizeof(float) * n * per) != 0);
        tfc_test_run_image_layer(layer, 8, 9, 3, n, 2, x, 1, 2, 1, b);
        CU_ASSERT(memcmp(a, b, sizeof(float) * n * per) != 0);
        tfc_test_run_image_layer(layers[k][1], 8, 9, 3, n, 2, x, 1, 1, 1, b);
        CU_ASSERT(memcmp(a, b, sizeof(float) * n * per) != 0);
    }
    free(x), free(a), free(b);
}

/* Keras's argument checks, as errors naming the argument. */
static void test_errors(void)
{
    static const struct {
        const char *layer, *want;
    } bad[] = {
        {"RandomPerspective: {factor: 1.5}", "factor: 1.5 is outside [0, 1]"},
        {"RandomPerspective: {factor: [2, 3]}", "factor: a pair [lower, upper] needs lower"},
        {"RandomPerspective: {factor: [0.1, 0.2, 0.3]}", "factor: expected a number or a pair"},
        {"RandomPerspective: {scale: 1.5}", "scale"},
        {"RandomPerspective: {scale: -0.1}", "scale"},
        {"RandomPerspective: {interpolation: bicubic}", "interpolation"},
        {"RandomPerspective: {fill_mode: reflect}", "fill_mode"},
        {"RandomPerspective: {data_format: channels_first}", "data_format"},
        {"RandomSharpness: {}", "factor"},
        {"RandomSharpness: {factor: -0.5}", "factor: -0.5 is outside [0, 1]"},
        {"RandomSharpness: {factor: [1.5, 2]}", "factor: a pair [lower, upper] needs lower"},
        {"RandomSharpness: {factor: 0.5, value_range: [1]}", "value_range: expected a pair"},
        {"RandomSharpness: {factor: 0.5, data_format: channels_first}", "data_format"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [4, 4, 3]}\nlayers:\n  - %s\n", bad[k].layer);
        tfc_test_expect_model_error(yaml, bad[k].want);
    }
    tfc_test_expect_model_error("input: {shape: [4, 3]}\nlayers:\n"
                                "  - RandomSharpness: {factor: 0.5}\n", "RandomSharpness");
}

/* RandomPerspective (cpu_first) is refused on any device but the CPU, naming the layer. */
static void test_perspective_gpu_refused(void)
{
    tfc_test_expect_cpu_first("input: {shape: [4, 4, 1]}\nlayers:\n"
                              "  - RandomPerspective: {name: v}\n",
                              "v", "RandomPerspective");
}

static void drop_sharpen(tfc_backend_ops *ops)
{
    ops->sharpen_backward = NULL;
}

/* A backend without RandomSharpness's ops (the GPU's table until make test-gpu has run them)
 * refuses it, naming the layer and the op. */
static void test_missing_kernels_refused(void)
{
    tfc_test_expect_refused("input: {shape: [4, 4, 3]}\nlayers:\n"
                            "  - RandomSharpness: {factor: 0.5}\n",
                            drop_sharpen, "RandomSharpness", "sharpen_backward");
}

TFC_TEST_MAIN("augment_persp", {"sharpness_keras", test_sharpness_keras},
              {"perspective_keras", test_perspective_keras},
              {"perspective_statistics", test_perspective_statistics},
              {"sharpness_statistics", test_sharpness_statistics},
              {"determinism", test_determinism}, {"errors", test_errors},
              {"perspective_gpu_refused", test_perspective_gpu_refused},
              {"missing_kernels_refused", test_missing_kernels_refused})
