/* The augmentation layers (RandomFlip, RandomTranslation, RandomRotation, RandomZoom,
 * RandomShear, RandomContrast): their draws' statistics measured on the outputs, the identity at
 * inference, determinism in (run seed, layer seed, step) and the thread count, the warps and
 * contrast against Keras 3 for fixed parameters (tests/ref/keras_augment.py), config errors,
 * the refusal of a backend without the kernels, and a run resumed through them bit for bit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "graph/model.h"
#include "gradcheck.h"
#include "layers/layer.h"
#include "solver/solver.h"
#include "testutil.h"

/* A one-layer model bound for batches of `batch` on a CPU backend of `threads`. */
typedef struct bound {
    tfc_model *m;
    tfc_backend *be;
} bound;

/* The model of one layer on images h x w x c. */
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

/* ---- statistics ------------------------------------------------------------------------- */

/* RandomFlip on images 2x3 of distinct values: each output is the image, its mirror left to
 * right or top to bottom, or both; each mode flips its axes in about half the images, both
 * axes together in horizontal_and_vertical (Keras draws one flip per image). */
static void test_flip_statistics(void)
{
    const int n = 4000;
    const char *modes[] = {"horizontal", "vertical", "horizontal_and_vertical"};
    float *x = falloc(n * 6), *y = falloc(n * 6);
    for (int i = 0; i < n * 6; i++) x[i] = (float)(i % 6);
    for (int mode = 0; mode < 3; mode++) {
        char layer[96];
        snprintf(layer, sizeof layer, "RandomFlip: {mode: %s}", modes[mode]);
        bound b = bind(layer, 2, 3, 1, n, 1);
        run(b, x, n, 1, 12, 5, y);
        int seen[4] = {0}; /* none, columns, rows, both */
        for (int i = 0; i < n; i++) {
            const float *o = y + i * 6;
            int kind = -1;
            for (int k = 0; k < 4; k++) {
                int same = 1;
                for (int p = 0; p < 6; p++) {
                    int r = p / 3, c = p % 3;
                    if (k & 1) c = 2 - c;
                    if (k & 2) r = 1 - r;
                    same &= o[p] == (float)(r * 3 + c);
                }
                if (same) kind = k;
            }
            CU_ASSERT_FATAL(kind >= 0);
            seen[kind]++;
        }
        const int flipped = mode == 0 ? 1 : mode == 1 ? 2 : 3;
        printf("\n  %s: %d of %d flipped", modes[mode], seen[flipped], n);
        CU_ASSERT(seen[flipped] + seen[0] == n);
        CU_ASSERT(fabs(seen[flipped] - n / 2.0) < 0.04 * n);
        unbind(b);
    }
    free(x), free(y);
}

/* n images RH x RW (not square, so that rows and columns cannot be confused) of two ramps:
 * channel 0 holds the column, channel 1 the row. A bilinear warp reproduces a linear
 * function exactly, so where it reads inside the image its output is the coordinates read. */
enum { RH = 33, RW = 41, CY = 16, CX = 20 };

static float *ramp_images(int n)
{
    float *x = falloc((int64_t)n * RH * RW * 2);
    for (int64_t p = 0; p < (int64_t)n * RH * RW; p++)
        x[2 * p] = (float)(p % RW), x[2 * p + 1] = (float)(p / RW % RH);
    return x;
}

/* Image img's matrix (a0, a1, a2, b0, b1, b2) measured from the warped ramps at the centre
 * (CY, CX) and its right and lower neighbours: (sx, sy) = (a0 ox + a1 oy + a2, ...). */
static void measured_matrix(const float *y, int img, double m[6])
{
    const float *o = y + (int64_t)img * RH * RW * 2;
    const int64_t at = (CY * RW + CX) * 2, right = at + 2, down = at + RW * 2;
    for (int k = 0; k < 2; k++) {
        m[3 * k] = o[right + k] - o[at + k];
        m[3 * k + 1] = o[down + k] - o[at + k];
        m[3 * k + 2] = o[at + k] - CX * m[3 * k] - CY * m[3 * k + 1];
    }
}

/* Draws one transform per image of n with `layer` on the ramps (seed, step); m gets each
 * image's measured matrix. */
static double (*warp_matrices(const char *layer, int n, uint64_t seed, uint64_t step))[6]
{
    float *x = ramp_images(n), *y = falloc((int64_t)n * RH * RW * 2);
    bound b = bind(layer, RH, RW, 2, n, 2);
    run(b, x, n, 1, seed, step, y);
    double (*m)[6] = malloc((size_t)n * sizeof *m);
    for (int i = 0; i < n; i++) measured_matrix(y, i, m[i]);
    unbind(b);
    free(x), free(y);
    return m;
}

/* RandomRotation: a turn by t = factor's draw * 360 degrees about the centre (CX, CY), t uniform in
 * [-36, 54] here; (a0 a1; b0 b1) = (cos t, -sin t; sin t, cos t). */
static void test_rotation_statistics(void)
{
    const int n = 3000;
    double (*m)[6] = warp_matrices("RandomRotation: {factor: [-0.1, 0.15]}", n, 3, 9);
    double *angle = malloc(n * sizeof *angle);
    int rigid = 1;
    for (int i = 0; i < n; i++) {
        angle[i] = atan2(m[i][3], m[i][0]) * 180 / 3.14159265358979;
        rigid &= fabs(m[i][0] - m[i][4]) < 1e-4 && fabs(m[i][1] + m[i][3]) < 1e-4 &&
                 fabs(m[i][0] * CX + m[i][1] * CY + m[i][2] - CX) < 1e-3 &&
                 fabs(m[i][3] * CX + m[i][4] * CY + m[i][5] - CY) < 1e-3;
    }
    CU_ASSERT(rigid);
    CU_ASSERT(uniform_in(angle, n, -36, 54, 1e-3, 9));
    free(angle), free(m);
}

/* RandomTranslation: (sx, sy) = (ox - tx, oy - ty), rows by height_factor * 33 in
 * [-6.6, 3.3], columns by width_factor * 41 in [-12.3, 12.3] (a single number f means
 * [-f, f]), each uniform. */
static void test_translation_statistics(void)
{
    const int n = 3000;
    double (*m)[6] = warp_matrices("RandomTranslation: {height_factor: [-0.2, 0.1], "
                                   "width_factor: -0.3}", n, 5, 2);
    double *tx = malloc(n * sizeof *tx), *ty = malloc(n * sizeof *ty);
    for (int i = 0; i < n; i++) tx[i] = -m[i][2], ty[i] = -m[i][5];
    CU_ASSERT(uniform_in(ty, n, -6.6, 3.3, 1e-3, 5));
    CU_ASSERT(uniform_in(tx, n, -12.3, 12.3, 1e-3, 6));
    free(tx), free(ty), free(m);
}

/* RandomZoom: sx = zx (ox - 20) + 20, zx = 1 + width_factor's draw in [0.7, 1.2]; zy from
 * height_factor in [0.8, 1.3]; without width_factor zx = zy. */
static void test_zoom_statistics(void)
{
    const int n = 3000;
    double (*m)[6] = warp_matrices("RandomZoom: {height_factor: [-0.2, 0.3], "
                                   "width_factor: [0.2, -0.3]}", n, 8, 1);
    double *zx = malloc(n * sizeof *zx), *zy = malloc(n * sizeof *zy);
    for (int i = 0; i < n; i++) zx[i] = m[i][0], zy[i] = m[i][4];
    CU_ASSERT(uniform_in(zx, n, 0.7, 1.2, 1e-4, 5));
    CU_ASSERT(uniform_in(zy, n, 0.8, 1.3, 1e-4, 5));
    free(m);
    m = warp_matrices("RandomZoom: {height_factor: 0.3}", n, 8, 1);
    int same = 1;
    for (int i = 0; i < n; i++) same &= fabs(m[i][0] - m[i][4]) < 1e-4, zy[i] = m[i][4];
    CU_ASSERT(same);
    CU_ASSERT(uniform_in(zy, n, 0.7, 1.3, 1e-4, 5));
    free(zx), free(zy), free(m);
}

/* RandomShear: (sx, sy) = (ox + kx oy, ky ox + oy) about pixel (0, 0), kx = s ux, ky = s uy
 * with one sign s per image (-1 in about half), ux uniform in x_factor's [0.1, 0.4], uy in
 * [-0.3, 0.3] (a single number f means [-f, f]), independent of ux. */
static void test_shear_statistics(void)
{
    const int n = 3000;
    double (*m)[6] = warp_matrices("RandomShear: {x_factor: [0.4, 0.1], y_factor: 0.3}", n,
                                   6, 3);
    double *ux = malloc(n * sizeof *ux), *uy = malloc(n * sizeof *uy);
    int negated = 0, affine = 1;
    for (int i = 0; i < n; i++) {
        const double s = m[i][1] < 0 ? -1 : 1;
        negated += s < 0;
        ux[i] = s * m[i][1], uy[i] = s * m[i][3];
        affine &= fabs(m[i][0] - 1) < 1e-4 && fabs(m[i][4] - 1) < 1e-4 &&
                  fabs(m[i][2]) < 1e-3 && fabs(m[i][5]) < 1e-3;
    }
    printf("\n  %d of %d negated", negated, n);
    CU_ASSERT(affine);
    CU_ASSERT(fabs(negated - n / 2.0) < 0.04 * n);
    CU_ASSERT(uniform_in(ux, n, 0.1, 0.4, 1e-4, 5));
    CU_ASSERT(uniform_in(uy, n, -0.3, 0.3, 1e-4, 6));
    /* the two draws independent: their correlation near 0 (sd 1 / sqrt(n) = 0.018) */
    double mx = 0, my = 0, sxy = 0, sxx = 0, syy = 0;
    for (int i = 0; i < n; i++) mx += ux[i] / n, my += uy[i] / n;
    for (int i = 0; i < n; i++) {
        sxy += (ux[i] - mx) * (uy[i] - my);
        sxx += (ux[i] - mx) * (ux[i] - mx), syy += (uy[i] - my) * (uy[i] - my);
    }
    printf(", correlation %.3f", sxy / sqrt(sxx * syy));
    CU_ASSERT(fabs(sxy / sqrt(sxx * syy)) < 0.07);
    free(ux), free(uy), free(m);
}

/* RandomContrast: y - m = f (x - m) per channel, f uniform in [1 - lower, 1 + upper], the
 * pair sorted ([0.4, 0.3]: [0.7, 1.4]); a single number f gives [1, 1 + f] as Keras 3
 * computes it. Both channels share the image's f. */
static void test_contrast_statistics(void)
{
    const int n = 3000;
    const char *layers[] = {"RandomContrast: {factor: [0.4, 0.3]}",
                            "RandomContrast: {factor: 0.5}"};
    const double lo[] = {0.7, 1.0}, hi[] = {1.4, 1.5};
    float *x = falloc(n * 8), *y = falloc(n * 8);
    for (int i = 0; i < n * 8; i++) x[i] = (float)(100 + 10 * (i % 8) + i % 3);
    double *f = malloc(n * sizeof *f);
    for (int k = 0; k < 2; k++) {
        bound b = bind(layers[k], 2, 2, 2, n, 1);
        run(b, x, n, 1, 4, 7, y);
        for (int i = 0; i < n; i++) {
            const float *a = x + i * 8, *o = y + i * 8;
            f[i] = (o[0] - o[6]) / (double)(a[0] - a[6]);
            CU_ASSERT(fabs((o[1] - o[7]) / (double)(a[1] - a[7]) - f[i]) < 1e-4);
        }
        CU_ASSERT(uniform_in(f, n, lo[k], hi[k], 1e-4, 5));
        unbind(b);
    }
    free(f), free(x), free(y);
}

/* ---- determinism and inference ---------------------------------------------------------- */

/* Each layer, and the same with a layer seed. */
static const char *const every_layer[][2] = {
    {"RandomFlip: {}", "RandomFlip: {seed: 9}"},
    {"RandomTranslation: {height_factor: 0.2, width_factor: 0.3}",
     "RandomTranslation: {height_factor: 0.2, width_factor: 0.3, seed: 9}"},
    {"RandomRotation: {factor: 0.2}", "RandomRotation: {factor: 0.2, seed: 9}"},
    {"RandomZoom: {height_factor: 0.3}", "RandomZoom: {height_factor: 0.3, seed: 9}"},
    {"RandomShear: {x_factor: 0.3, y_factor: 0.2}",
     "RandomShear: {x_factor: 0.3, y_factor: 0.2, seed: 9}"},
    {"RandomContrast: {factor: 0.4, value_range: [0, 1]}",
     "RandomContrast: {factor: 0.4, value_range: [0, 1], seed: 9}"}};

/* At inference every layer is the identity, bound for training or for inference; in
 * training the same (seed, step) gives the same output on 1 or 2 threads (a batch large
 * enough to be split), and a new step, a new run seed or a layer seed gives another. */
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

/* ---- Keras parity ----------------------------------------------------------------------- */

/* Every case of tests/ref/augment/augment.safetensors: the layer of `yaml_<case>` in
 * training on `x` against Keras's `y_<case>`, each value within 1e-5 of |y| plus 1e-6 of
 * y's largest magnitude (float32 coordinates and sums in Keras's order). */
static void test_parity_keras(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open("tests/ref/augment/augment.safetensors", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    const tfc_st_tensor *tx = tfc_st_find(f, "x");
    CU_ASSERT_PTR_NOT_NULL_FATAL(tx);
    const int batch = (int)tx->shape.dim[0];
    float *x = falloc(tx->numel), *want = falloc(tx->numel), *got = falloc(tx->numel);
    tfc_st_tensor_to_f32(tx, x);
    int cases = 0;
    double worst_abs = 0, worst_rel = 0;
    for (int k = 0; k < tfc_st_meta_count(f); k++) {
        const char *key, *yaml;
        tfc_st_meta_at(f, k, &key, &yaml);
        if (strncmp(key, "yaml_", 5)) continue;
        char yname[96];
        snprintf(yname, sizeof yname, "y_%s", key + 5);
        const tfc_st_tensor *ty = tfc_st_find(f, yname);
        CU_ASSERT_FATAL(ty && ty->numel == tx->numel);
        tfc_st_tensor_to_f32(ty, want);
        tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), key, &err);
        if (!m) fprintf(stderr, "\n%s", err.text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        tfc_backend *be = tfc_cpu_backend_create(2);
        CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, batch, &err), TFC_OK);
        CU_ASSERT_EQUAL(tfc_model_forward(m, x, batch, 1, 1, 1, &err), TFC_OK);
        tfc_model_get_output(m, got);
        double scale = 0, abs_err = 0, rel_err = 0;
        for (int64_t i = 0; i < ty->numel; i++) scale = fmax(scale, fabs(want[i]));
        int bad = 0;
        for (int64_t i = 0; i < ty->numel; i++) {
            double d = fabs((double)got[i] - want[i]);
            abs_err = fmax(abs_err, d);
            if (fabs(want[i]) > 1e-3 * scale) rel_err = fmax(rel_err, d / fabs(want[i]));
            bad += !(d <= 1e-5 * fabs(want[i]) + 1e-6 * scale);
        }
        if (bad) printf("\n  %s: max abs diff %.3g, max rel %.3g MISMATCH", key + 5, abs_err,
                        rel_err);
        CU_ASSERT_EQUAL(bad, 0);
        worst_abs = fmax(worst_abs, abs_err), worst_rel = fmax(worst_rel, rel_err);
        cases++;
        tfc_model_free(m);
        tfc_backend_free(be);
    }
    printf("\n  %d cases: max abs diff %.3g, max rel %.3g", cases, worst_abs, worst_rel);
    CU_ASSERT(cases >= 28);
    free(x), free(want), free(got);
    tfc_st_close(f);
}

/* ---- contrast's clipped gradient -------------------------------------------------------- */

/* contrast_backward against central differences of contrast_forward where some values are
 * clipped (skipping the few within a step of a bound): dx = f g + (1 - f) mean(g), g = dy
 * where unclipped. */
static void test_contrast_clipped_gradient(void)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    const int n = 3, hw = 12, c = 2, total = n * hw * c;
    tfc_contrast_desc d = {.n = n, .hw = hw, .c = c, .lo = 1.2f, .hi = 1.8f, .vlo = 0.15f,
                           .vhi = 0.85f, .key = 77, .step = 4};
    float *x = falloc(total), *dy = falloc(total), *dx = falloc(total), *y = falloc(total);
    tfc_test_fill(x, total, 0, 1, 3);
    tfc_test_fill(dy, total, -1, 1, 4);
    be->ops->contrast_forward(be, &d, x, y);
    int clipped = 0;
    for (int i = 0; i < total; i++) clipped += y[i] == d.vlo || y[i] == d.vhi;
    CU_ASSERT(clipped > 4 && clipped < total * 2 / 3);
    be->ops->contrast_backward(be, &d, x, dy, dx);
    double worst = 0;
    const float h = 1e-3f;
    int skipped = 0;
    for (int i = 0; i < total; i++) {
        const float keep = x[i];
        double lp = 0, lm = 0;
        x[i] = keep + h;
        be->ops->contrast_forward(be, &d, x, y);
        for (int k = 0; k < total; k++) lp += (double)y[k] * dy[k];
        const int clip_p = y[i] == d.vlo || y[i] == d.vhi;
        x[i] = keep - h;
        be->ops->contrast_forward(be, &d, x, y);
        for (int k = 0; k < total; k++) lm += (double)y[k] * dy[k];
        x[i] = keep;
        if (clip_p != (y[i] == d.vlo || y[i] == d.vhi)) { /* a bound within the step */
            skipped++;
            continue;
        }
        worst = fmax(worst, fabs((lp - lm) / (2 * h) - dx[i]));
    }
    CU_ASSERT(skipped <= 2);
    printf("\n  max |numeric - analytic| %.3g", worst);
    CU_ASSERT(worst < 2e-3);
    free(x), free(dy), free(dx), free(y);
    tfc_backend_free(be);
}

/* ---- errors and devices ----------------------------------------------------------------- */

/* Keras's ranges and unknown values are config errors naming the argument. */
static void test_config_errors(void)
{
    static const struct {
        const char *layer, *want;
    } bad[] = {
        {"RandomTranslation: {height_factor: 1.5, width_factor: 0}",
         "height_factor: 1.5 is outside [-1, 1]"},
        {"RandomTranslation: {height_factor: 0.1, width_factor: [0.1, 0.2, 0.3]}",
         "width_factor: expected a number or a pair [lower, upper], found 3 values"},
        {"RandomZoom: {height_factor: -1}", "height_factor: -1 is outside (-1, 1]"},
        {"RandomRotation: {factor: 1.2}", "factor: 1.2 is outside [-1, 1]"},
        {"RandomRotation: {factor: [2, 3]}", "factor: a pair [lower, upper] needs lower <= 1"},
        {"RandomContrast: {factor: -0.1}", "factor: -0.1 is outside [0, 1]"},
        {"RandomContrast: {factor: 0.1, value_range: [0, 1, 2]}", "value_range: expected a pair"},
        {"RandomRotation: {factor: 0.1, fill_mode: mirror}", "fill_mode"},
        {"RandomZoom: {height_factor: 0.1, interpolation: bicubic}", "interpolation"},
        {"RandomFlip: {mode: diagonal}", "mode"},
        {"RandomFlip: {data_format: channels_first}", "data_format"},
        {"RandomShear: {x_factor: -0.2}", "x_factor: -0.2 is outside [0, 1]"},
        {"RandomShear: {y_factor: [0.2, 1.5]}", "y_factor: 1.5 is outside [0, 1]"},
        {"RandomShear: {x_factor: [0.1, 0.2, 0.3]}", "x_factor: expected a number or a pair"},
        {"RandomShear: {x_factor: 0.1, fill_mode: mirror}", "fill_mode"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [4, 4, 1]}\nlayers:\n  - %s\n", bad[k].layer);
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
    /* the ranges Keras accepts: a rotation pair checked only at its ends, zoom's upper 1 */
    bound b = bind("RandomRotation: {factor: [-3, 0.5]}", 4, 4, 1, 1, 1);
    unbind(b);
    b = bind("RandomZoom: {height_factor: [-0.9, 1]}", 4, 4, 1, 1, 1);
    unbind(b);
}

/* On a CPU table without a layer's op binding is refused naming the layer, its type and the
 * op; a backend other than the CPU binds them (the GPU has the ops, no cpu_first). */
static void test_missing_kernels_refused(void)
{
    static const struct {
        const char *layer, *type, *op;
    } cases[] = {{"RandomFlip: {name: v}", "RandomFlip", "warp_forward"},
                 {"RandomZoom: {name: v, height_factor: 0.2}", "RandomZoom", "warp_backward"},
                 {"RandomContrast: {name: v, factor: 0.2}", "RandomContrast",
                  "contrast_backward"}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [4, 4, 1]}\nlayers:\n  - %s\n",
                 cases[k].layer);
        tfc_model *m = tfc_test_model(yaml);
        tfc_backend *be = tfc_cpu_backend_create(1);
        TFC_ASSERT(m && be);
        tfc_backend_ops lacking = *be->ops;
        const tfc_backend_ops *cpu_ops = be->ops;
        if (!strcmp(cases[k].op, "warp_forward")) lacking.warp_forward = NULL;
        if (!strcmp(cases[k].op, "warp_backward")) lacking.warp_backward = NULL;
        if (!strcmp(cases[k].op, "contrast_backward")) lacking.contrast_backward = NULL;
        be->ops = &lacking;
        tfc_error err;
        tfc_error_clear(&err);
        char want[128];
        snprintf(want, sizeof want, "no kernel for %s yet (op '%s')", cases[k].type, cases[k].op);
        CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_ERR_CONFIG);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'v'"));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, want));
        be->ops = cpu_ops;
        be->device = 0;
        tfc_error_clear(&err);
        CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
        be->device = -1;
        tfc_model_free(m);
        tfc_backend_free(be);
    }
}

/* ---- resume ------------------------------------------------------------------------------- */

static const char *resume_solver =
    "model:\n  name: aug\n  input: {shape: [16]}\n  layers:\n"
    "    - Reshape: {target_shape: [4, 4, 1]}\n"
    "    - RandomFlip: {mode: horizontal}\n"
    "    - Conv2D: {filters: 4, kernel_size: 2, padding: same, activation: relu}\n"
    "    - RandomTranslation: {height_factor: 0.2, width_factor: 0.2}\n"
    "    - RandomRotation: {factor: 0.1, seed: 3}\n"
    "    - RandomZoom: {height_factor: 0.2, interpolation: nearest}\n"
    "    - RandomShear: {x_factor: 0.2, y_factor: [0.1, 0.3]}\n"
    "    - RandomErasing: {value_range: [-5, 5]}\n"
    "    - RandomContrast: {factor: 0.3, value_range: [-5, 5]}\n"
    "    - Flatten: {}\n    - Dense: {units: 4}\n"
    "data:\n  train:\n"
    "    source: {type: npy, features: ax.npy, labels: ay.npy}\n"
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
    tfc_solver *s = tfc_solver_load(tfc_test_write("aug.yaml", resume_solver, -1), &o, &err);
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

/* 40 steps through every augmentation layer against 20, a snapshot and 20 resumed: the
 * final weights are the same bytes (the transforms come back from (seed, step) alone). */
static void test_resume_exact(void)
{
    tfc_test_write_split("ax.npy", "ay.npy", 256, 31);
    CU_ASSERT_EQUAL_FATAL(train("aug_full", NULL), TFC_OK);
    char state[2048], a[2048], b[2048];
    snprintf(state, sizeof state, "%s/snapshots/aug_iter_20.state", tfc_test_path("aug_full"));
    CU_ASSERT_EQUAL_FATAL(train("aug_resumed", state), TFC_OK);
    snprintf(a, sizeof a, "%s/final.safetensors", tfc_test_path("aug_full"));
    snprintf(b, sizeof b, "%s/final.safetensors", tfc_test_path("aug_resumed"));
    size_t la, lb;
    char *fa = tfc_test_read(a, &la), *fb = tfc_test_read(b, &lb);
    CU_ASSERT(fa && fb && la == lb && memcmp(fa, fb, la) == 0);
    free(fa), free(fb);
}

TFC_TEST_MAIN("augment", {"flip_statistics", test_flip_statistics},
              {"rotation_statistics", test_rotation_statistics},
              {"translation_statistics", test_translation_statistics},
              {"zoom_statistics", test_zoom_statistics},
              {"shear_statistics", test_shear_statistics},
              {"contrast_statistics", test_contrast_statistics},
              {"identity_and_determinism", test_identity_and_determinism},
              {"parity_keras", test_parity_keras},
              {"contrast_clipped_gradient", test_contrast_clipped_gradient},
              {"config_errors", test_config_errors},
              {"missing_kernels_refused", test_missing_kernels_refused},
              {"resume_exact", test_resume_exact})
