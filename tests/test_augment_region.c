/* RandomShear against Keras 3, and the region augmentation layers (layers/augment_region.c:
 * RandomErasing, RandomGaussianBlur):
 * outputs and input gradients against Keras for pinned draws
 * (tests/ref/keras_augment_region.py), and the refusal of the layers not yet run on a GPU.
 * RandomShear's statistics, determinism and resume are test_augment's, with the other
 * warps. */
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

static float *falloc(int64_t n)
{
    float *p = calloc((size_t)n, sizeof(float));
    TFC_ASSERT(p != NULL);
    return p;
}

/* |got - want| <= 1e-5 |want| + 1e-6 scale over n values; the largest difference raises
 * *worst. */
static int close_to(const float *got, const float *want, int64_t n, double scale,
                    double *worst)
{
    int ok = 1;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - want[i]);
        *worst = fmax(*worst, d);
        ok &= d <= 1e-5 * fabs(want[i]) + 1e-6 * scale;
    }
    return ok;
}

static double max_abs(const float *v, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(v[i]));
    return m;
}

/* Binds the YAML of fixture case `key` plus an MSE loss for training on a 2-thread CPU
 * backend, with the input's gradient. */
static tfc_model *bind_case(const char *key, const char *yaml, int batch, tfc_backend *be)
{
    char full[1024];
    snprintf(full, sizeof full, "%sloss: mse\n", yaml);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_from_string(full, strlen(full), key, &err);
    if (!m) fprintf(stderr, "\n%s", err.text);
    TFC_ASSERT(m != NULL);
    TFC_ASSERT(tfc_model_bind(m, be, batch, &err) == TFC_OK);
    tfc_model_want_input_grad(m, 1);
    return m;
}

/* The training output y at (seed 1, step) and the input's gradient dx of sum(y w): the MSE
 * against t = y - w N / 2 (N values), whose gradient is w. */
static void step_case(tfc_model *m, tfc_backend *be, const float *x, const float *w, int batch,
                      int64_t n, int step, float *y, float *dx)
{
    tfc_error err;
    tfc_error_clear(&err);
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
}

enum { MAX_OUTCOMES = 64 };

/* Every case of tests/ref/augment_region/augment_region.safetensors with outputs y_<case>:
 * the layer in training on x, at steps 1 to 6, each image against Keras's y_<case> or
 * another outcome y_<case>~<j> of a draw a range cannot pin (RandomShear's sign), then its
 * input gradient against that outcome's dx_<case>. Both outcomes must be met. */
static void test_parity_keras(void)
{
    tfc_st_file *f = tfc_test_fixture("augment_region", "augment_region");
    int64_t n = 0;
    float *x = tfc_test_tensor(f, "x", &n), *w = tfc_test_tensor(f, "w", NULL);
    const int batch = (int)tfc_st_find(f, "x")->shape.dim[0];
    const int64_t per = n / batch;
    float *got = falloc(n), *dx = falloc(n);
    int cases = 0, outcomes[2] = {0, 0};
    double worst_y = 0, worst_dx = 0;
    for (int k = 0; k < tfc_st_meta_count(f); k++) {
        const char *key, *yaml;
        tfc_st_meta_at(f, k, &key, &yaml);
        char name[128];
        float *want[MAX_OUTCOMES], *want_dx[MAX_OUTCOMES];
        int nout = 0;
        for (; nout < MAX_OUTCOMES; nout++) {
            snprintf(name, sizeof name, nout ? "y_%s~%d" : "y_%s", key + 5, nout);
            if (!(want[nout] = tfc_test_tensor(f, name, NULL))) break;
            snprintf(name, sizeof name, nout ? "dx_%s~%d" : "dx_%s", key + 5, nout);
            want_dx[nout] = tfc_test_tensor(f, name, NULL);
            CU_ASSERT_FATAL(want_dx[nout] != NULL);
        }
        if (strncmp(key, "yaml_", 5) || !nout) continue;
        tfc_backend *be = tfc_cpu_backend_create(2);
        tfc_model *m = bind_case(key, yaml, batch, be);
        const double scale = max_abs(want[0], n), gscale = max_abs(want_dx[0], n);
        int bad = 0;
        for (int step = 1; step <= 6; step++) {
            step_case(m, be, x, w, batch, n, step, got, dx);
            for (int i = 0; i < batch; i++) {
                const int64_t at = i * per;
                double dy = 0, dg = 0;
                int which = -1;
                for (int o = 0; o < nout && which < 0; o++) {
                    double unused = 0;
                    if (close_to(got + at, want[o] + at, per, scale, &unused)) which = o;
                }
                if (which < 0) {
                    bad++;
                    close_to(got + at, want[0] + at, per, scale, &dy);
                    printf("\n  %s step %d image %d: output off by %.3g", key + 5, step, i, dy);
                    continue;
                }
                outcomes[which > 0]++;
                close_to(got + at, want[which] + at, per, scale, &worst_y);
                if (!close_to(dx + at, want_dx[which] + at, per, gscale, &dg)) {
                    bad++;
                    printf("\n  %s step %d image %d: dx off by %.3g", key + 5, step, i, dg);
                }
                worst_dx = fmax(worst_dx, dg);
            }
        }
        CU_ASSERT_EQUAL(bad, 0);
        cases++;
        for (int o = 0; o < nout; o++) free(want[o]), free(want_dx[o]);
        tfc_model_free(m);
        tfc_backend_free(be);
    }
    printf("\n  %d cases, outcomes %d / %d: max abs diff y %.3g, dx %.3g", cases, outcomes[0],
           outcomes[1], worst_y, worst_dx);
    CU_ASSERT(cases >= 10);
    CU_ASSERT(outcomes[0] > 0 && outcomes[1] > 0);
    free(x), free(w), free(got), free(dx);
    tfc_st_close(f);
}

/* RandomErasing's cases (fill_<case>): the layer in training on x at steps 1 to 40; each
 * image must be where(mask, fill, x) for one of Keras's masks mask_<case>~<j> (its
 * rectangles over all corners), bit for bit (a copy and Keras's clipped fill), and its input
 * gradient w where the mask is 0 (within 1e-6: the loss's rounding), 0 where it is 1. Over
 * the steps, several masks are met. */
static void test_erasing_keras(void)
{
    tfc_st_file *f = tfc_test_fixture("augment_region", "augment_region");
    int64_t n = 0;
    float *x = tfc_test_tensor(f, "x", &n), *w = tfc_test_tensor(f, "w", NULL);
    const tfc_st_tensor *tx = tfc_st_find(f, "x");
    const int batch = (int)tx->shape.dim[0], c = (int)tx->shape.dim[3];
    const int64_t per = n / batch;
    float *got = falloc(n), *dx = falloc(n);
    int cases = 0;
    for (int k = 0; k < tfc_st_meta_count(f); k++) {
        const char *key, *yaml;
        tfc_st_meta_at(f, k, &key, &yaml);
        char name[128];
        snprintf(name, sizeof name, "fill_%s", key + 5);
        float *fill = tfc_test_tensor(f, name, NULL);
        if (strncmp(key, "yaml_", 5) || !fill) continue;
        float *mask[MAX_OUTCOMES];
        int nmask = 0, met[MAX_OUTCOMES] = {0}, bad = 0;
        for (; nmask < MAX_OUTCOMES; nmask++) {
            snprintf(name, sizeof name, "mask_%s~%d", key + 5, nmask);
            if (!(mask[nmask] = tfc_test_tensor(f, name, NULL))) break;
        }
        CU_ASSERT_FATAL(nmask > 0);
        tfc_backend *be = tfc_cpu_backend_create(2);
        tfc_model *m = bind_case(key, yaml, batch, be);
        for (int step = 1; step <= 40; step++) {
            step_case(m, be, x, w, batch, n, step, got, dx);
            for (int i = 0; i < batch; i++) {
                int which = -1;
                for (int j = 0; j < nmask && which < 0; j++) {
                    int same = 1;
                    for (int64_t q = 0; q < per && same; q++) {
                        const int64_t at = i * per + q;
                        const int in = mask[j][q / c] != 0;
                        same &= got[at] == (in ? fill[at] : x[at]) &&
                                fabs(dx[at] - (in ? 0.0f : w[at])) <= 1e-6;
                    }
                    if (same) which = j;
                }
                if (which < 0) {
                    bad++;
                    printf("\n  %s step %d image %d: no Keras mask gives it", key + 5, step, i);
                } else {
                    met[which]++;
                }
            }
        }
        int distinct = 0;
        for (int j = 0; j < nmask; j++) distinct += met[j] > 0;
        printf("\n  %s: %d of Keras's %d masks met", key + 5, distinct, nmask);
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT(distinct >= (nmask < 8 ? nmask : 8));
        cases++;
        for (int j = 0; j < nmask; j++) free(mask[j]);
        free(fill);
        tfc_model_free(m);
        tfc_backend_free(be);
    }
    CU_ASSERT(cases >= 4);
    free(x), free(w), free(got), free(dx);
    tfc_st_close(f);
}

/* RandomErasing with factor 1 (Keras: p uniform in [0, 1], so about half the images erased)
 * and scale [0.1, 0.4] on images 20 x 30 of 9s: each erased image's changed cells form one
 * rectangle, its columns' count has the mean of sqrt(U(0.1, 0.4)) 30 = 14.76 and its rows'
 * of the same times 20 (9.84; a window of length l at a uniform offset holds l cells on
 * average), its centre on average (w / 2, h / 2) (Keras's cells ceil(x0) to ceil(x0 + l) - 1,
 * half a cell past the image's centre); the fill constant 0.5. */
static void test_erasing_statistics(void)
{
    const int n = 4000, h = 20, w = 30;
    float *x = falloc((int64_t)n * h * w), *y = falloc((int64_t)n * h * w);
    for (int64_t i = 0; i < (int64_t)n * h * w; i++) x[i] = 9;
    tfc_test_run_image_layer(
        "RandomErasing: {scale: [0.1, 0.4], fill_value: 0.5, value_range: [0, 1]}", h, w, 1, n,
        2, x, 1, 3, 4, y);
    int erased = 0, rect = 1;
    double cols = 0, rows = 0, cx = 0, cy = 0;
    for (int i = 0; i < n; i++) {
        const float *o = y + (int64_t)i * h * w;
        int x0 = w, x1 = -1, y0 = h, y1 = -1, count = 0;
        for (int p = 0; p < h * w; p++) {
            if (o[p] == 9) continue;
            rect &= o[p] == 0.5f;
            count++;
            const int r = p / w, q = p % w;
            x0 = q < x0 ? q : x0, x1 = q > x1 ? q : x1, y0 = r < y0 ? r : y0, y1 = r > y1 ? r : y1;
        }
        if (!count) continue;
        erased++;
        rect &= count == (x1 - x0 + 1) * (y1 - y0 + 1);
        cols += x1 - x0 + 1, rows += y1 - y0 + 1;
        cx += 0.5 * (x0 + x1), cy += 0.5 * (y0 + y1);
    }
    cols /= erased, rows /= erased, cx /= erased, cy /= erased;
    printf("\n  %d of %d erased; mean sides %.3f x %.3f, centre (%.2f, %.2f)", erased, n, cols,
           rows, cx, cy);
    const double side = 2.0 / 3.0 * (pow(0.4, 1.5) - pow(0.1, 1.5)) / 0.3;
    CU_ASSERT(rect);
    CU_ASSERT(fabs(erased - n / 2.0) < 0.04 * n);
    CU_ASSERT(fabs(cols - side * w) < 0.25);
    CU_ASSERT(fabs(rows - side * h) < 0.2);
    CU_ASSERT(fabs(cx - w / 2.0) < 0.2 && fabs(cy - h / 2.0) < 0.2);
    free(x), free(y);
}

/* Without fill_value the fill is clip(z 3, -1, 3) per value (value_range [-1, 3], z a
 * standard normal): about Phi(-1/3) = 0.369 of the values at -1, 1 - Phi(1) = 0.159 at 3,
 * the rest within, their mean that of 3 z given -1/3 < z < 1 (0.861); the values differ
 * from each other. */
static void test_erasing_noise(void)
{
    const int n = 400, h = 16, w = 16, c = 3;
    const int64_t total = (int64_t)n * h * w * c;
    float *x = falloc(total), *y = falloc(total);
    for (int64_t i = 0; i < total; i++) x[i] = 100;
    tfc_test_run_image_layer(
        "RandomErasing: {factor: [1, 1], scale: [0.5, 0.5], value_range: [-1, 3]}", h, w, c, n,
        1, x, 1, 8, 2, y);
    int64_t filled = 0, low = 0, high = 0, repeats = 0;
    double mid = 0;
    for (int64_t i = 0; i < total; i++) {
        if (y[i] == 100) continue;
        filled++;
        low += y[i] == -1, high += y[i] == 3;
        if (y[i] > -1 && y[i] < 3) mid += y[i];
        repeats += i && y[i] == y[i - 1] && y[i] > -1 && y[i] < 3;
    }
    mid /= (double)(filled - low - high);
    printf("\n  %lld filled: %.4f at -1, %.4f at 3, mean within %.4f", (long long)filled,
           (double)low / filled, (double)high / filled, mid);
    CU_ASSERT(filled > total / 3);
    CU_ASSERT(fabs((double)low / filled - 0.3694) < 0.01);
    CU_ASSERT(fabs((double)high / filled - 0.1587) < 0.01);
    CU_ASSERT(fabs(mid - 0.861) < 0.02);
    CU_ASSERT(repeats == 0);
    free(x), free(y);
}

/* At inference the identity; in training the same (seed, step) gives the same output on 1
 * or 2 threads, and a new step, run seed or layer seed another. */
static void test_erasing_determinism(void)
{
    const int n = 256, per = 8 * 9 * 3;
    float *x = falloc(n * per), *a = falloc(n * per), *b = falloc(n * per);
    tfc_test_fill(x, n * per, 0, 1, 5);
    const char *layer = "RandomErasing: {value_range: [0, 1]}";
    tfc_test_run_image_layer(layer, 8, 9, 3, n, 1, x, 0, 1, 1, a);
    CU_ASSERT(memcmp(a, x, sizeof(float) * n * per) == 0);
    tfc_test_run_image_layer(layer, 8, 9, 3, n, 1, x, 1, 1, 1, a);
    CU_ASSERT(memcmp(a, x, sizeof(float) * n * per) != 0);
    tfc_test_run_image_layer(layer, 8, 9, 3, n, 2, x, 1, 1, 1, b);
    CU_ASSERT(memcmp(a, b, sizeof(float) * n * per) == 0);
    tfc_test_run_image_layer(layer, 8, 9, 3, n, 1, x, 1, 1, 2, b);
    CU_ASSERT(memcmp(a, b, sizeof(float) * n * per) != 0);
    tfc_test_run_image_layer(layer, 8, 9, 3, n, 1, x, 1, 2, 1, b);
    CU_ASSERT(memcmp(a, b, sizeof(float) * n * per) != 0);
    tfc_test_run_image_layer("RandomErasing: {value_range: [0, 1], seed: 4}", 8, 9, 3, n, 1, x,
                             1, 1, 1, b);
    CU_ASSERT(memcmp(a, b, sizeof(float) * n * per) != 0);
    free(x), free(a), free(b);
}

/* Keras's argument checks, as errors naming the argument. */
static void test_erasing_errors(void)
{
    static const struct {
        const char *layer, *want;
    } bad[] = {
        {"RandomErasing: {factor: 1.5}", "factor: 1.5 is outside [0, 1]"},
        {"RandomErasing: {factor: [2, 3]}", "factor: a pair [lower, upper] needs lower <= 1"},
        {"RandomErasing: {scale: [0.1, 0.2, 0.3]}", "scale: expected a number or a pair"},
        {"RandomErasing: {scale: -0.5}", "scale: -0.5 is outside [0, 1]"},
        {"RandomErasing: {fill_value: [1, 2]}", "fill_value: expected a number or a list of"},
        {"RandomErasing: {value_range: [0, 1, 2]}", "value_range: expected a pair"},
        {"RandomErasing: {data_format: channels_first}", "data_format"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [4, 4, 3]}\nlayers:\n  - %s\n", bad[k].layer);
        tfc_test_expect_model_error(yaml, bad[k].want);
    }
    tfc_test_expect_model_error("input: {shape: [4, 4, 2]}\nlayers:\n"
                                "  - RandomErasing: {fill_value: [1, 2, 3]}\n",
                                "fill_value: three values need 3 channels, the input has 2");
}

/* RandomGaussianBlur (factor 1: p uniform in [0, 1], about half the images blurred) on
 * impulses (1 at the centre of 9 x 9, value_range [0, 1]) at 300 steps of 8: the blurred
 * images of a step are alike (one pair of sigmas per batch, as Keras), and the sigmas read
 * back from the centre row and column (r = y[c +- 1] / y[c] = exp(-1 / (2 sigma^2))) are
 * uniform in sigma's [0.2, 0.9], independently. */
static void test_blur_statistics(void)
{
    const int n = 8, steps = 300, side = 9, c = side / 2, per = side * side;
    float *x = falloc(n * per), *y = falloc(n * per);
    for (int i = 0; i < n; i++) x[i * per + c * side + c] = 1;
    double sx[300], sy[300];
    int blurred = 0, alike = 1, used = 0;
    char yaml[256];
    snprintf(yaml, sizeof yaml, "input: {shape: [%d, %d, 1]}\nlayers:\n"
             "  - RandomGaussianBlur: {sigma: [0.2, 0.9], value_range: [0, 1]}\n", side, side);
    tfc_model *m = tfc_test_model(yaml);
    tfc_backend *be = tfc_cpu_backend_create(2);
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(m && be && tfc_model_bind(m, be, n, &err) == TFC_OK);
    for (int s = 0; s < steps; s++) {
        TFC_ASSERT(tfc_model_forward(m, x, n, 1, 6, (uint64_t)s, &err) == TFC_OK);
        tfc_model_get_output(m, y);
        int first = -1;
        for (int i = 0; i < n; i++) {
            const float *o = y + i * per;
            if (o[c * side + c] == 1) continue;
            blurred++;
            if (first < 0) first = i;
            alike &= memcmp(o, y + first * per, sizeof(float) * per) == 0;
        }
        if (first < 0) continue;
        const float *o = y + first * per;
        sx[used] = sqrt(-1 / (2 * log(o[c * side + c + 1] / (double)o[c * side + c])));
        sy[used] = sqrt(-1 / (2 * log(o[(c + 1) * side + c] / (double)o[c * side + c])));
        used++;
    }
    printf("\n  %d of %d blurred", blurred, n * steps);
    CU_ASSERT(alike);
    CU_ASSERT(fabs(blurred - n * steps / 2.0) < 0.05 * n * steps);
    int ok = 1;
    double mx = 0, my = 0, cxy = 0, vx = 0, vy = 0;
    for (int k = 0; k < used; k++) {
        ok &= sx[k] > 0.2 - 1e-3 && sx[k] < 0.9 + 1e-3 && sy[k] > 0.2 - 1e-3 && sy[k] < 0.9 + 1e-3;
        mx += sx[k] / used, my += sy[k] / used;
    }
    for (int k = 0; k < used; k++) {
        cxy += (sx[k] - mx) * (sy[k] - my);
        vx += (sx[k] - mx) * (sx[k] - mx), vy += (sy[k] - my) * (sy[k] - my);
    }
    printf(", sigma means %.3f %.3f, sd %.3f, correlation %.3f", mx, my, sqrt(vx / used),
           cxy / sqrt(vx * vy));
    CU_ASSERT(ok);
    CU_ASSERT(fabs(mx - 0.55) < 0.04 && fabs(my - 0.55) < 0.04);
    CU_ASSERT(fabs(sqrt(vx / used) - 0.7 / sqrt(12.0)) < 0.03);
    CU_ASSERT(fabs(cxy / sqrt(vx * vy)) < 0.2);
    tfc_model_free(m);
    tfc_backend_free(be);
    free(x), free(y);
}

/* RandomGaussianBlur: the identity at inference (no clip there, as Keras), the same output
 * for a (seed, step) on 1 or 2 threads, another for a new step; argument errors. */
static void test_blur_determinism_errors(void)
{
    const int n = 64, per = 7 * 6 * 2;
    float *x = falloc(n * per), *a = falloc(n * per), *b = falloc(n * per);
    tfc_test_fill(x, n * per, -1, 2, 9);
    const char *layer = "RandomGaussianBlur: {value_range: [0, 1]}";
    tfc_test_run_image_layer(layer, 7, 6, 2, n, 1, x, 0, 1, 1, a);
    CU_ASSERT(memcmp(a, x, sizeof(float) * n * per) == 0);
    tfc_test_run_image_layer(layer, 7, 6, 2, n, 1, x, 1, 1, 1, a);
    tfc_test_run_image_layer(layer, 7, 6, 2, n, 2, x, 1, 1, 1, b);
    CU_ASSERT(memcmp(a, b, sizeof(float) * n * per) == 0);
    tfc_test_run_image_layer(layer, 7, 6, 2, n, 1, x, 1, 1, 2, b);
    CU_ASSERT(memcmp(a, b, sizeof(float) * n * per) != 0);
    free(x), free(a), free(b);
    static const struct {
        const char *layer, *want;
    } bad[] = {
        {"RandomGaussianBlur: {kernel_size: 4}", "kernel_size must be odd"},
        {"RandomGaussianBlur: {kernel_size: [3, 2]}", "kernel_size must be odd"},
        {"RandomGaussianBlur: {kernel_size: [3, 3, 3]}", "kernel_size: expected a number"},
        {"RandomGaussianBlur: {sigma: 1.5}", "sigma: 1.5 is outside [0, 1]"},
        {"RandomGaussianBlur: {factor: -0.5}", "factor: -0.5 is outside [0, 1]"},
        {"RandomGaussianBlur: {value_range: [1]}", "value_range: expected a pair"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [4, 4, 3]}\nlayers:\n  - %s\n", bad[k].layer);
        tfc_test_expect_model_error(yaml, bad[k].want);
    }
}

/* RandomShear (cpu_first) is refused on any device but the CPU, naming the layer; the CPU
 * binds it. */
static void test_shear_gpu_refused(void)
{
    tfc_test_expect_cpu_first("input: {shape: [4, 4, 1]}\nlayers:\n"
                              "  - RandomShear: {name: v, x_factor: 0.2}\n",
                              "v", "RandomShear");
}

static void drop_erasing(tfc_backend_ops *ops)
{
    ops->erasing_backward = NULL;
}

static void drop_blur(tfc_backend_ops *ops)
{
    ops->blur_forward = NULL;
}

/* A backend without RandomErasing's or RandomGaussianBlur's ops (the GPU's table until make
 * test-gpu has run them) refuses each, naming the layer and the op. */
static void test_missing_kernels_refused(void)
{
    tfc_test_expect_refused("input: {shape: [4, 4, 3]}\nlayers:\n  - RandomErasing: {}\n",
                            drop_erasing, "RandomErasing", "erasing_backward");
    tfc_test_expect_refused("input: {shape: [4, 4, 3]}\nlayers:\n  - RandomGaussianBlur: {}\n",
                            drop_blur, "RandomGaussianBlur", "blur_forward");
}

TFC_TEST_MAIN("augment_region", {"parity_keras", test_parity_keras},
              {"erasing_keras", test_erasing_keras},
              {"erasing_statistics", test_erasing_statistics},
              {"erasing_noise", test_erasing_noise},
              {"erasing_determinism", test_erasing_determinism},
              {"erasing_errors", test_erasing_errors},
              {"blur_statistics", test_blur_statistics},
              {"blur_determinism_errors", test_blur_determinism_errors},
              {"shear_gpu_refused", test_shear_gpu_refused},
              {"missing_kernels_refused", test_missing_kernels_refused})
