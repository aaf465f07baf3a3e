/* The colour augmentation layers (RandomGrayscale, RandomInvert, Solarization,
 * RandomPosterization, RandomColorDegeneration, RandomSaturation, RandomHue,
 * RandomColorJitter): outputs and input gradients against Keras 3
 * where the draw is fixed (tests/ref/keras_color.py), their draws' statistics measured on
 * the outputs, the identity at inference, determinism in (run seed, layer seed, step) and
 * the thread count, config errors, the refusal of a backend without the kernels, and a run
 * resumed through them bit for bit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "graph/model.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "layers/layer.h"
#include "solver/solver.h"
#include "testutil.h"

typedef struct bound {
    tfc_model *m;
    tfc_backend *be;
} bound;

static tfc_model *layer_model(const char *layer, int h, int w, int c)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "input: {shape: [%d, %d, %d]}\nlayers:\n  - %s\n", h, w, c,
             layer);
    return tfc_test_model(yaml);
}

static bound bind(const char *layer, int h, int w, int c, int batch, int threads)
{
    bound b = {layer_model(layer, h, w, c), tfc_cpu_backend_create(threads)};
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(b.m && b.be);
    if (tfc_model_bind(b.m, b.be, batch, &err)) fprintf(stderr, "\n%s", err.text);
    TFC_ASSERT(err.code == TFC_OK);
    return b;
}

static void unbind(bound b)
{
    tfc_model_free(b.m);
    tfc_backend_free(b.be);
}

/* y = the layer's output for x in training (or not) at (seed, step). */
static void run(bound b, const float *x, int batch, int training, uint64_t seed,
                uint64_t step, float *y)
{
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(tfc_model_forward(b.m, x, batch, training, seed, step, &err) == TFC_OK);
    tfc_model_get_output(b.m, y);
}

static float *falloc(int64_t n)
{
    float *p = calloc((size_t)n, sizeof(float));
    TFC_ASSERT(p != NULL);
    return p;
}

/* Each of `bins` equal bins of [lo, hi] holds its share of the n values within 25%, and
 * every value lies in [lo - slack, hi + slack]. */
static int uniform_in(const double *v, int n, double lo, double hi, double slack, int bins)
{
    int count[32] = {0}, ok = 1;
    for (int i = 0; i < n; i++) {
        ok &= v[i] >= lo - slack && v[i] <= hi + slack;
        int k = (int)((v[i] - lo) / (hi - lo) * bins);
        count[k < 0 ? 0 : k >= bins ? bins - 1 : k]++;
    }
    for (int k = 0; k < bins; k++) ok &= fabs(count[k] - (double)n / bins) < 0.25 * n / bins;
    if (!ok) {
        printf("\n  bins of [%g, %g]:", lo, hi);
        for (int k = 0; k < bins; k++) printf(" %d", count[k]);
    }
    return ok;
}

/* ---- Keras parity ----------------------------------------------------------------------- */

/* Every case of tests/ref/color/color.safetensors: the op with the case's desc against
 * Keras's y and dx (dx from zero: the op accumulates), and, where the case has a YAML, the
 * layer in training against y. A RandomHue case's stream is one that draws its signs. */
static void test_parity_keras(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open("tests/ref/color/color.safetensors", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    tfc_backend *be = tfc_cpu_backend_create(2);
    int cases = 0, layers = 0;
    double worst = 0;
    for (int k = 0; k < tfc_st_meta_count(f); k++) {
        const char *key, *desc;
        tfc_st_meta_at(f, k, &key, &desc);
        if (strncmp(key, "desc_", 5)) continue;
        const char *name = key + 5;
        char xname[96];
        snprintf(xname, sizeof xname, "x_%s", name);
        const tfc_st_tensor *tx = tfc_st_find(f, xname);
        CU_ASSERT_PTR_NOT_NULL_FATAL(tx);
        const int64_t n = tx->numel;
        float *x = tfc_test_tensor_at(f, "x_", name, n), *dy = tfc_test_tensor_at(f, "dy_", name, n);
        float *want_y = tfc_test_tensor_at(f, "y_", name, n), *want_dx = tfc_test_tensor_at(f, "dx_", name, n);
        float *y = falloc(n), *dx = falloc(n);
        double v[7];
        CU_ASSERT_FATAL(sscanf(desc, "%lf %lf %lf %lf %lf %lf %lf", &v[0], &v[1], &v[2], &v[3],
                               &v[4], &v[5], &v[6]) == 7);
        tfc_color_desc d = {
            .n = (int)tx->shape.dim[0], .hw = (int)(tx->shape.dim[1] * tx->shape.dim[2]),
            .c = (int)tx->shape.dim[3], .kind = (tfc_color_kind)v[0],
            .lo = {(float)v[1], (float)v[3]}, .hi = {(float)v[2], (float)v[4]},
            .vlo = (float)v[5], .vhi = (float)v[6], .key = 99, .step = 3};
        /* RandomHue's sign is drawn: a stream that shifts image 0 up, image 1 down */
        while (d.kind == TFC_COLOR_HUE && !(tfc_rng_uniform(d.key, d.step, 0) <= 0.5f &&
                                            tfc_rng_uniform(d.key, d.step, 4) > 0.5f))
            d.key++;
        be->ops->color_forward(be, &d, x, y);
        be->ops->color_backward(be, &d, x, dy, dx);
        int bad_y = tfc_test_mismatches(y, want_y, n, &worst), bad_dx = tfc_test_mismatches(dx, want_dx, n, &worst);
        int bad_layer = 0;
        char yname[96];
        snprintf(yname, sizeof yname, "yaml_%s", name);
        const char *yaml = NULL;
        for (int j = 0; j < tfc_st_meta_count(f); j++) {
            const char *mk, *mv;
            tfc_st_meta_at(f, j, &mk, &mv);
            if (!strcmp(mk, yname)) yaml = mv;
        }
        if (yaml) {
            tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), yname, &err);
            if (!m) fprintf(stderr, "\n%s", err.text);
            CU_ASSERT_PTR_NOT_NULL_FATAL(m);
            CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, d.n, &err), TFC_OK);
            CU_ASSERT_EQUAL(tfc_model_forward(m, x, d.n, 1, 1, 1, &err), TFC_OK);
            tfc_model_get_output(m, y);
            bad_layer = tfc_test_mismatches(y, want_y, n, &worst);
            tfc_model_free(m);
            layers++;
        }
        if (bad_y || bad_dx || bad_layer)
            printf("\n  %s: %d y, %d dx, %d layer y MISMATCH", name, bad_y, bad_dx, bad_layer);
        CU_ASSERT_EQUAL(bad_y + bad_dx + bad_layer, 0);
        cases++;
        free(x), free(dy), free(want_y), free(want_dx), free(y), free(dx);
    }
    printf("\n  %d cases (%d layers): max abs diff %.3g", cases, layers, worst);
    CU_ASSERT(cases >= 22 && layers >= 17);
    tfc_backend_free(be);
    tfc_st_close(f);
}

/* RandomColorJitter with every stage's draw fixed (tests/ref/keras_color.py's `jitter_<c>`):
 * the layer in training against Keras's y. */
static void test_jitter_parity_keras(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open("tests/ref/color/color.safetensors", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    tfc_backend *be = tfc_cpu_backend_create(2);
    int cases = 0;
    double worst = 0;
    for (int k = 0; k < tfc_st_meta_count(f); k++) {
        const char *key, *yaml;
        tfc_st_meta_at(f, k, &key, &yaml);
        if (strncmp(key, "jitter_", 7)) continue;
        char xname[96];
        snprintf(xname, sizeof xname, "x_%s", key + 7);
        const tfc_st_tensor *tx = tfc_st_find(f, xname);
        CU_ASSERT_PTR_NOT_NULL_FATAL(tx);
        const int64_t n = tx->numel;
        const int batch = (int)tx->shape.dim[0];
        float *x = tfc_test_tensor_at(f, "x_", key + 7, n), *want = tfc_test_tensor_at(f, "y_", key + 7, n);
        float *y = falloc(n);
        tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), key, &err);
        if (!m) fprintf(stderr, "\n%s", err.text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, batch, &err), TFC_OK);
        CU_ASSERT_EQUAL(tfc_model_forward(m, x, batch, 1, 1, 1, &err), TFC_OK);
        tfc_model_get_output(m, y);
        const int bad = tfc_test_mismatches(y, want, n, &worst);
        if (bad) printf("\n  %s: %d MISMATCH", key + 7, bad);
        CU_ASSERT_EQUAL(bad, 0);
        tfc_model_free(m);
        free(x), free(want), free(y);
        cases++;
    }
    printf("\n  %d cases: max abs diff %.3g", cases, worst);
    CU_ASSERT(cases >= 2);
    tfc_backend_free(be);
    tfc_st_close(f);
}

/* ---- statistics ------------------------------------------------------------------------- */

/* RandomGrayscale: about `factor` of the images become their luma, the rest are kept. */
static void test_grayscale_statistics(void)
{
    const int n = 4000;
    float *x = falloc(n * 6), *y = falloc(n * 6);
    for (int i = 0; i < n * 6; i++) x[i] = (float)(10 + 40 * (i % 3) + i % 6);
    bound b = bind("RandomGrayscale: {factor: 0.3}", 1, 2, 3, n, 2);
    run(b, x, n, 1, 3, 4, y);
    int gray = 0, ok = 1;
    for (int i = 0; i < n; i++) {
        const float *a = x + i * 6, *o = y + i * 6;
        const int changed = memcmp(a, o, 6 * sizeof(float)) != 0;
        gray += changed;
        for (int p = 0; p < 2 && changed; p++) {
            const float l = a[3 * p] * 0.2989f + a[3 * p + 1] * 0.5870f + a[3 * p + 2] * 0.1140f;
            ok &= o[3 * p] == l && o[3 * p + 1] == l && o[3 * p + 2] == l;
        }
    }
    printf("\n  %d of %d gray", gray, n);
    CU_ASSERT(ok);
    CU_ASSERT(fabs(gray - 0.3 * n) < 0.03 * n);
    unbind(b);
    free(x), free(y);
}

/* RandomInvert: the probability p drawn in the factor's range, then a threshold under it, so
 * a fraction E[p] of the images is inverted: 0.3 for factor 0.6 ([0, 0.6]), 0.5 for
 * [0.2, 0.8]; each image is x or value_range[1] - x. */
static void test_invert_statistics(void)
{
    const int n = 4000;
    const char *layers[] = {"RandomInvert: {factor: 0.6}",
                            "RandomInvert: {factor: [0.8, 0.2], value_range: [0, 1]}"};
    const double want[] = {0.3, 0.5}, top[] = {255, 1};
    float *x = falloc(n * 2), *y = falloc(n * 2);
    tfc_test_fill(x, n * 2, 0, 1, 3);
    for (int k = 0; k < 2; k++) {
        bound b = bind(layers[k], 1, 2, 1, n, 2);
        run(b, x, n, 1, 8, 2, y);
        int inverted = 0, ok = 1;
        for (int i = 0; i < n; i++) {
            const int inv = y[2 * i] != x[2 * i];
            inverted += inv;
            for (int p = 0; p < 2; p++)
                ok &= y[2 * i + p] == (inv ? (float)top[k] - x[2 * i + p] : x[2 * i + p]);
        }
        printf("\n  %s: %d of %d inverted", layers[k], inverted, n);
        CU_ASSERT(ok);
        CU_ASSERT(fabs(inverted - want[k] * n) < 0.03 * n);
        unbind(b);
    }
    free(x), free(y);
}

/* Solarization: the addition uniform in [0, 0.4 * 255] (seen on a pixel 0 with every value
 * inverted: threshold 0), and the threshold uniform in [0.2, 0.6 * 255] (Keras scales the
 * upper bound alone; seen on a ramp 0, 0.5, ..., 255.5 as the count of values kept). */
static void test_solarization_statistics(void)
{
    const int n = 3000, ramp = 512;
    float *x = falloc((int64_t)n * ramp), *y = falloc((int64_t)n * ramp);
    double *v = malloc(n * sizeof *v);
    bound b = bind("Solarization: {addition_factor: 0.4}", 1, 1, 1, n, 2);
    run(b, x, n, 1, 2, 5, y);
    for (int i = 0; i < n; i++) v[i] = 255.0 - y[i];
    CU_ASSERT(uniform_in(v, n, 0, 102, 1e-3, 6));
    unbind(b);
    for (int64_t k = 0; k < (int64_t)n * ramp; k++) x[k] = 0.5f * (float)(k % ramp);
    b = bind("Solarization: {threshold_factor: [0.6, 0.2]}", 1, ramp, 1, n, 2);
    run(b, x, n, 1, 2, 5, y);
    for (int i = 0; i < n; i++) {
        int kept = 0;
        for (int p = 0; p < ramp; p++) {
            const float a = fminf(x[(int64_t)i * ramp + p], 255.f);
            kept += y[(int64_t)i * ramp + p] == a;
        }
        v[i] = 0.5 * kept; /* t in (0.5 (kept - 1), 0.5 kept] */
    }
    CU_ASSERT(uniform_in(v, n, 0.2, 153, 0.51, 6));
    unbind(b);
    free(x), free(y), free(v);
}

/* RandomPosterization: factor [2, 6] keeps 2, 3, 4 or 5 bits (jax.random.randint's upper
 * bound is excluded), each about a quarter of the images; a pixel 255 shows them. */
static void test_posterization_statistics(void)
{
    const int n = 4000;
    float *x = falloc(n), *y = falloc(n);
    for (int i = 0; i < n; i++) x[i] = 255;
    bound b = bind("RandomPosterization: {factor: [6, 2]}", 1, 1, 1, n, 2);
    run(b, x, n, 1, 4, 1, y);
    int count[9] = {0}, other = 0;
    for (int i = 0; i < n; i++) {
        int bits = -1;
        for (int k = 1; k <= 8; k++)
            if (y[i] == (float)(256 - (1 << (8 - k)))) bits = k;
        if (bits < 0) other++;
        else count[bits]++;
    }
    printf("\n  bits 2..6: %d %d %d %d %d", count[2], count[3], count[4], count[5], count[6]);
    CU_ASSERT(other == 0 && count[1] == 0 && count[6] == 0 && count[7] == 0 && count[8] == 0);
    for (int k = 2; k < 6; k++) CU_ASSERT(fabs(count[k] - n / 4.0) < 0.05 * n);
    unbind(b);
    free(x), free(y);
}

/* RandomColorDegeneration: factor 0.5 draws f uniform in [-0.5, 0.5]; an unclipped pixel
 * shows it as (y - x) / (luma - x). */
static void test_degeneration_statistics(void)
{
    const int n = 3000;
    float *x = falloc(n * 3), *y = falloc(n * 3);
    for (int i = 0; i < n; i++) x[3 * i] = 100, x[3 * i + 1] = 150, x[3 * i + 2] = 180;
    const double luma = 100 * 0.2989 + 150 * 0.5870 + 180 * 0.1140;
    bound b = bind("RandomColorDegeneration: {factor: 0.5}", 1, 1, 3, n, 2);
    run(b, x, n, 1, 6, 6, y);
    double *f = malloc(n * sizeof *f);
    for (int i = 0; i < n; i++) f[i] = (y[3 * i + 2] - 180.0) / (luma - 180.0);
    CU_ASSERT(uniform_in(f, n, -0.5, 0.5, 1e-4, 5));
    unbind(b);
    free(x), free(y), free(f);
}

/* The hue in [0, 1) of an RGB pixel (the usual hexcone formula). */
static double hue_of(const float *p)
{
    const double r = p[0], g = p[1], b = p[2];
    const double v = fmax(fmax(r, g), b), m = fmin(fmin(r, g), b), d = v - m;
    double h = v == r ? (g - b) / d : v == g ? 2 + (b - r) / d : 4 + (r - g) / d;
    h /= 6;
    return h < 0 ? h + 1 : h;
}

/* RandomSaturation: factor [0.2, 0.6] draws u uniform there and scales the saturation by
 * u / (1 - u); a pixel (100, 150, 200) of saturation 0.5 keeps its maximum and shows it in
 * its minimum, 200 (1 - 0.5 f). RandomHue: factor 0.6 shifts the hue by +-f / 2, f uniform in
 * [0, 0.6], so the shift is uniform in [-0.3, 0.3]. */
static void test_hsv_statistics(void)
{
    const int n = 3000;
    float *x = falloc(n * 3), *y = falloc(n * 3);
    double *v = malloc(n * sizeof *v);
    for (int i = 0; i < n; i++) x[3 * i] = 100, x[3 * i + 1] = 150, x[3 * i + 2] = 200;
    bound b = bind("RandomSaturation: {factor: [0.6, 0.2]}", 1, 1, 3, n, 2);
    run(b, x, n, 1, 5, 3, y);
    int kept = 1;
    for (int i = 0; i < n; i++) {
        kept &= fabsf(y[3 * i + 2] - 200) < 1e-3f;
        const double f = (1 - y[3 * i] / 200.0) / 0.5;
        v[i] = f / (1 + f);
    }
    CU_ASSERT(kept);
    CU_ASSERT(uniform_in(v, n, 0.2, 0.6, 1e-4, 5));
    unbind(b);
    for (int i = 0; i < n; i++) x[3 * i] = 0.9f, x[3 * i + 1] = 0.5f, x[3 * i + 2] = 0.2f;
    b = bind("RandomHue: {factor: 0.6, value_range: [0, 1]}", 1, 1, 3, n, 2);
    run(b, x, n, 1, 5, 3, y);
    const double h0 = hue_of(x);
    for (int i = 0; i < n; i++) {
        double dh = hue_of(y + 3 * i) - h0;
        v[i] = dh > 0.5 ? dh - 1 : dh < -0.5 ? dh + 1 : dh;
    }
    CU_ASSERT(uniform_in(v, n, -0.3, 0.3, 1e-4, 6));
    unbind(b);
    free(x), free(y), free(v);
}

/* ---- determinism and inference ---------------------------------------------------------- */

/* Each layer, and the same with a layer seed. */
static const char *const every_layer[][2] = {
    {"RandomGrayscale: {}", "RandomGrayscale: {seed: 9}"},
    {"RandomInvert: {value_range: [0, 1]}", "RandomInvert: {value_range: [0, 1], seed: 9}"},
    {"Solarization: {addition_factor: 0.3, threshold_factor: 0.5, value_range: [0, 1]}",
     "Solarization: {addition_factor: 0.3, threshold_factor: 0.5, value_range: [0, 1], "
     "seed: 9}"},
    {"RandomPosterization: {factor: 7, value_range: [0, 1]}",
     "RandomPosterization: {factor: 7, value_range: [0, 1], seed: 9}"},
    {"RandomColorDegeneration: {factor: 0.5, value_range: [0, 1]}",
     "RandomColorDegeneration: {factor: 0.5, value_range: [0, 1], seed: 9}"},
    {"RandomSaturation: {factor: 0.5, value_range: [0, 1]}",
     "RandomSaturation: {factor: 0.5, value_range: [0, 1], seed: 9}"},
    {"RandomHue: {factor: 0.5, value_range: [0, 1]}",
     "RandomHue: {factor: 0.5, value_range: [0, 1], seed: 9}"},
    {"RandomColorJitter: {value_range: [0, 1], brightness_factor: 0.2, contrast_factor: 0.3,"
     " saturation_factor: 0.4, hue_factor: 0.2}",
     "RandomColorJitter: {value_range: [0, 1], brightness_factor: 0.2, contrast_factor: 0.3,"
     " saturation_factor: 0.4, hue_factor: 0.2, seed: 9}"}};

/* At inference every layer is the identity, bound for training or for inference; in
 * training the same (seed, step) gives the same output on 1 or 2 threads, and a new step,
 * a new run seed or a layer seed gives another. */
static void test_identity_and_determinism(void)
{
    const int n = 512, per = 6 * 7 * 3;
    float *x = falloc(n * per), *a = falloc(n * per), *b2 = falloc(n * per);
    tfc_test_fill(x, n * per, 0, 1, 5);
    for (size_t k = 0; k < sizeof every_layer / sizeof *every_layer; k++) {
        bound b = bind(every_layer[k][0], 6, 7, 3, n, 1);
        bound t = bind(every_layer[k][0], 6, 7, 3, n, 2);
        run(b, x, n, 0, 1, 1, a);
        CU_ASSERT(memcmp(a, x, sizeof(float) * n * per) == 0);
        tfc_model *inf = layer_model(every_layer[k][0], 6, 7, 3);
        tfc_error err;
        tfc_error_clear(&err);
        TFC_ASSERT(inf && tfc_model_bind_inference(inf, b.be, n, &err) == TFC_OK);
        TFC_ASSERT(tfc_model_forward(inf, x, n, 0, 1, 1, &err) == TFC_OK);
        tfc_model_get_output(inf, a);
        CU_ASSERT(memcmp(a, x, sizeof(float) * n * per) == 0);
        tfc_model_free(inf);

        run(b, x, n, 1, 1, 1, a);
        CU_ASSERT(memcmp(a, x, sizeof(float) * n * per) != 0);
        run(t, x, n, 1, 1, 1, b2);
        CU_ASSERT(memcmp(a, b2, sizeof(float) * n * per) == 0);
        run(b, x, n, 1, 1, 2, b2);
        CU_ASSERT(memcmp(a, b2, sizeof(float) * n * per) != 0);
        run(b, x, n, 1, 2, 1, b2);
        CU_ASSERT(memcmp(a, b2, sizeof(float) * n * per) != 0);
        unbind(t);
        t = bind(every_layer[k][1], 6, 7, 3, n, 1);
        run(t, x, n, 1, 1, 1, b2);
        CU_ASSERT(memcmp(a, b2, sizeof(float) * n * per) != 0);
        unbind(t);
        unbind(b);
    }
    free(x), free(a), free(b2);
}

/* ---- errors and devices ----------------------------------------------------------------- */

/* Keras's ranges are config errors naming the argument; the luma needs 1 or 3 channels. */
static void test_config_errors(void)
{
    static const struct {
        const char *layer, *want;
        int c;
    } bad[] = {
        {"RandomGrayscale: {factor: 1.5}", "factor", 3},
        {"RandomGrayscale: {factor: 0.5}", "needs 3 channels (RGB) or 1 (grayscale), got 2", 2},
        {"RandomGrayscale: {data_format: channels_first}", "data_format", 3},
        {"RandomInvert: {factor: -0.2}", "factor: -0.2 is outside [0, 1]", 3},
        {"RandomInvert: {factor: [2, 3]}", "factor: a pair [lower, upper] needs lower <= 1", 3},
        {"RandomInvert: {value_range: [1]}", "value_range: expected a pair", 3},
        {"Solarization: {addition_factor: 1.2}", "addition_factor: 1.2 is outside [0, 1]", 3},
        {"Solarization: {threshold_factor: [0.1, -0.1]}",
         "threshold_factor: -0.1 is outside [0, 1]", 3},
        {"Solarization: {data_format: channels_last}", "data_format", 3},
        {"RandomPosterization: {}", "factor", 3},
        {"RandomPosterization: {factor: 9}", "factor: 9 is outside [1, 8]", 3},
        {"RandomPosterization: {factor: 3.5}", "factor: 3.5 is not a whole number of bits", 3},
        {"RandomPosterization: {factor: [-2, 4]}", "factor: the bits [-2, 4] must lie in [1, 8]",
         3},
        {"RandomColorDegeneration: {factor: 1.5}", "factor: 1.5 is outside [-1, 1]", 3},
        {"RandomColorDegeneration: {factor: 0.5}", "needs 3 channels (RGB) or 1", 4},
        {"RandomSaturation: {factor: 1.5}", "factor: 1.5 is outside [-1, 1]", 3},
        {"RandomSaturation: {factor: 0.5}", "needs 3 channels (RGB, for HSV), got 1", 1},
        {"RandomHue: {factor: -0.5}", "factor: -0.5 is outside [0, 1]", 3},
        {"RandomColorJitter: {contrast_factor: 1.5}", "contrast_factor: 1.5 is outside [0, 1]",
         3},
        {"RandomColorJitter: {hue_factor: 0.1}", "needs 3 channels (RGB, for HSV), got 1", 1},
        {"RandomHue: {factor: [0.1, 0.2], value_range: [0, 1, 2]}", "value_range: expected a pair",
         3},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [4, 4, %d]}\nlayers:\n  - %s\n", bad[k].c,
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
        if (!strstr(err.text, bad[k].want)) printf("\n%s: %s", bad[k].layer, err.text);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, bad[k].want));
    }
    /* the ranges Keras accepts: a pair checked only at its ends (BaseImagePreprocessingLayer) */
    bound b = bind("RandomInvert: {factor: [-3, 0.5]}", 4, 4, 1, 1, 1);
    unbind(b);
    b = bind("RandomColorDegeneration: {factor: [-3, 0.5]}", 4, 4, 1, 1, 1);
    unbind(b);
}

static void drop_color_forward(tfc_backend_ops *ops)
{
    ops->color_forward = NULL;
}

static void drop_color_backward(tfc_backend_ops *ops)
{
    ops->color_backward = NULL;
}

/* On a table without the ops binding is refused naming the layer and the op. */
static void test_missing_kernels_refused(void)
{
    tfc_test_expect_refused("input: {shape: [4, 4, 3]}\nlayers:\n  - RandomGrayscale: {}\n",
                            drop_color_forward, "RandomGrayscale", "color_forward");
    tfc_test_expect_refused("input: {shape: [4, 4, 3]}\nlayers:\n  - Solarization: {}\n",
                            drop_color_backward, "Solarization", "color_backward");
}

/* ---- resume ------------------------------------------------------------------------------- */

static const char *resume_solver =
    "model:\n  name: aug\n  input: {shape: [16]}\n  layers:\n"
    "    - Reshape: {target_shape: [4, 4, 1]}\n"
    "    - RandomPosterization: {factor: [4, 8], value_range: [-20, 20]}\n"
    "    - RandomInvert: {factor: 0.5, value_range: [-1, 1]}\n"
    "    - Conv2D: {filters: 3, kernel_size: 2, padding: same, activation: relu}\n"
    "    - RandomGrayscale: {}\n"
    "    - Solarization: {addition_factor: 0.1, threshold_factor: 0.6, value_range: [0, 4]}\n"
    "    - RandomColorDegeneration: {factor: 0.4, value_range: [-9, 9], seed: 3}\n"
    "    - RandomSaturation: {factor: 0.6, value_range: [0, 1]}\n"
    "    - RandomHue: {factor: 0.3, value_range: [-9, 9]}\n"
    "    - RandomColorJitter: {value_range: [-9, 9], brightness_factor: 0.1,"
    " contrast_factor: 0.2, saturation_factor: 0.3, hue_factor: 0.1}\n"
    "    - Flatten: {}\n    - Dense: {units: 4}\n"
    "data:\n  train:\n"
    "    source: {type: npy, features: cx.npy, labels: cy.npy}\n"
    "    pipeline: [{shuffle: {buffer_size: 64}}, {repeat: {}}, {batch: {batch_size: 8}}]\n"
    "optimizer: {type: adam, learning_rate: 0.01}\n"
    "max_iter: 40\ntest_interval: 0\ndisplay: 10\nsnapshot: {interval: 20, keep: 0}\nseed: 5\n";

static tfc_status train(const char *out, const char *resume)
{
    tfc_solver_options o = {0};
    o.out_dir = tfc_test_path(out);
    o.resume = resume;
    o.threads = 2;
    o.console = fopen("/dev/null", "w");
    tfc_error err;
    tfc_error_clear(&err);
    tfc_solver *s = tfc_solver_load(tfc_test_write("color.yaml", resume_solver, -1), &o, &err);
    if (!s) fprintf(stderr, "\n%s", err.text);
    tfc_status st = err.code;
    if (s) {
        tfc_train_result res;
        st = tfc_solver_train(s, &res, &err);
        if (st) fprintf(stderr, "\n%s", err.text);
        tfc_solver_free(s);
    }
    fclose(o.console);
    return st;
}

/* 40 steps through every colour layer against 20, a snapshot and 20 resumed: the final
 * weights are the same bytes (the draws come back from (seed, step) alone). */
static void test_resume_exact(void)
{
    tfc_test_write_split("cx.npy", "cy.npy", 256, 31);
    CU_ASSERT_EQUAL_FATAL(train("color_full", NULL), TFC_OK);
    char state[2048], a[2048], b[2048];
    snprintf(state, sizeof state, "%s/snapshots/aug_iter_20.state",
             tfc_test_path("color_full"));
    CU_ASSERT_EQUAL_FATAL(train("color_resumed", state), TFC_OK);
    snprintf(a, sizeof a, "%s/final.safetensors", tfc_test_path("color_full"));
    snprintf(b, sizeof b, "%s/final.safetensors", tfc_test_path("color_resumed"));
    size_t la, lb;
    char *fa = tfc_test_read(a, &la), *fb = tfc_test_read(b, &lb);
    CU_ASSERT(fa && fb && la == lb && memcmp(fa, fb, la) == 0);
    free(fa), free(fb);
}

TFC_TEST_MAIN("augment_color", {"parity_keras", test_parity_keras},
              {"jitter_parity_keras", test_jitter_parity_keras},
              {"grayscale_statistics", test_grayscale_statistics},
              {"invert_statistics", test_invert_statistics},
              {"solarization_statistics", test_solarization_statistics},
              {"posterization_statistics", test_posterization_statistics},
              {"degeneration_statistics", test_degeneration_statistics},
              {"hsv_statistics", test_hsv_statistics},
              {"identity_and_determinism", test_identity_and_determinism},
              {"config_errors", test_config_errors},
              {"missing_kernels_refused", test_missing_kernels_refused},
              {"resume_exact", test_resume_exact})
