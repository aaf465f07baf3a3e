/* AugMix (layers/aug_mix.c): its output at a step is the mix, written out here, of its chains,
 * each the tfc layers Keras builds them from with the streams of `seed: 1 + c D + s` (bit for
 * bit up to the mix's float rounding); Keras's own transform_images with the chains, weights
 * and every draw given (tests/ref/keras_aug_mix.py); the identity at inference; the draws'
 * statistics (Dirichlet and Beta moments, the picks' frequencies); determinism in (run seed,
 * layer seed, step) and the thread count; config errors; the GPU's refusal; a small CNN
 * behind it that trains, and resumes bit for bit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "graph/model.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "layers/augment.h"
#include "layers/layer.h"
#include "solver/solver.h"
#include "testutil.h"

typedef struct bound {
    tfc_model *m;
    tfc_backend *be;
} bound;

static bound bind(const char *layer, int h, int w, int c, int batch, int threads)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "input: {shape: [%d, %d, %d]}\nlayers:\n  - %s\n", h, w, c,
             layer);
    bound b = {tfc_test_model(yaml), tfc_cpu_backend_create(threads)};
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

/* The tfc layer AugMix builds operation k (Keras's list order) from with factor [0, f] (f a
 * number), value_range [vlo, vhi] and `interp`, with `seed`, written out independently of
 * layers/rand_augment.c. */
static void op_layer(int k, double f, const char *interp, double vlo, double vhi, int seed,
                     char *buf, size_t size)
{
    char vr[64];
    snprintf(vr, sizeof vr, "value_range: [%g, %g], seed: %d", vlo, vhi, seed);
    switch (k) {
    case 0: snprintf(buf, size, "RandomShear: {x_factor: [0, %g], y_factor: [0, %g], "
                     "interpolation: %s, seed: %d}", f, f, interp, seed); break;
    case 1: snprintf(buf, size, "RandomTranslation: {height_factor: [0, %g], width_factor: "
                     "[0, %g], interpolation: %s, seed: %d}", f, f, interp, seed); break;
    case 2: snprintf(buf, size, "RandomRotation: {factor: [0, %g], interpolation: %s, seed: %d}",
                     f, interp, seed); break;
    case 3: snprintf(buf, size, "RandomPosterization: {factor: %d, %s}",
                     (int)fmax(1, (int)(8 * f)), vr); break;
    case 4: snprintf(buf, size, "Solarization: {addition_factor: [0, %g], threshold_factor: "
                     "[0, %g], %s}", f, f, vr); break;
    case 5: snprintf(buf, size, "AutoContrast: {value_range: [%g, %g]}", vlo, vhi); break;
    case 6: snprintf(buf, size, "Equalization: {value_range: [%g, %g]}", vlo, vhi); break;
    case 7: snprintf(buf, size, "RandomBrightness: {factor: [0, %g], %s}", f, vr); break;
    case 8: snprintf(buf, size, "RandomColorDegeneration: {factor: [0, %g], %s}", f, vr); break;
    case 9: snprintf(buf, size, "RandomContrast: {factor: [0, %g], %s}", f, vr); break;
    default: snprintf(buf, size, "RandomSharpness: {factor: [0, %g], %s}", f, vr); break;
    }
}

/* Keras's mix of the chain outputs ch[c] in float32, its order: acc = sum_c ch_c m_c from
 * zero, y = clip(w x + (1 - w) acc, vlo, vhi). */
static void mix(const float *x, float *const *ch, const float *m, int chains, float w,
                float vlo, float vhi, int64_t n, float *y)
{
    for (int64_t i = 0; i < n; i++) {
        float acc = 0;
        for (int c = 0; c < chains; c++) acc += ch[c][i] * m[c];
        const float a = w * x[i], b = (1.0f - w) * acc;
        y[i] = fminf(fmaxf(a + b, vlo), vhi);
    }
}

/* ---- structure ---------------------------------------------------------------------------- */

/* At steps 1 to 8 of {num_chains: 3, chain_depth: 3, factor: 0.6}, the output is the mix
 * (above) with the step's own draws (tfc_aug_mix_draw) of the chains run as the op layers,
 * slot s of chain c with `seed: 1 + 3 c + s`; an operation picked in two slots of a step
 * (its draws from two streams) is among them, and changes the output where both slots
 * given one stream would not match. */
static void test_structure(void)
{
    enum { H = 5, W = 6, C = 3, N = 8, PER = H * W * C, D = 3, NC = 3, STEPS = 8 };
    float *x = falloc(N * PER), *y = falloc(N * PER), *want = falloc(N * PER);
    float *ch[NC], *tmp = falloc(N * PER);
    for (int c = 0; c < NC; c++) ch[c] = falloc(N * PER);
    tfc_test_fill(x, N * PER, 0, 255, 3);
    bound b = bind("AugMix: {factor: 0.6}", H, W, C, N, 2);
    run(b, x, N, 1, 11, 0, y);
    const tfc_layer *l = tfc_model_layer(b.m, 0);
    tfc_aug_mix_draws *d = calloc(1, sizeof *d);
    TFC_ASSERT(d != NULL);
    int good = 0, repeated = 0, skipped = 0;
    double worst = 0;
    char layer[256];
    for (int s = 1; s <= STEPS; s++) {
        tfc_aug_mix_draw(l, (uint64_t)s, d);
        run(b, x, N, 1, 11, (uint64_t)s, y);
        int seen[11] = {0};
        for (int c = 0; c < NC; c++) {
            memcpy(ch[c], x, sizeof(float) * N * PER);
            for (int t = 0; t < D; t++) {
                const int k = d->pick[c][t];
                if (k < 0) {
                    skipped++;
                    continue;
                }
                repeated += seen[k]++ == 1 && k != 5 && k != 6; /* the tone layers draw none */
                op_layer(k, 0.6, "bilinear", 0, 255, 1 + D * c + t, layer, sizeof layer);
                tfc_test_run_image_layer(layer, H, W, C, N, 1, ch[c], 1, 11, (uint64_t)s, tmp);
                memcpy(ch[c], tmp, sizeof(float) * N * PER);
            }
        }
        mix(x, ch, d->chain_weight, NC, d->weight, 0, 255, N * PER, want);
        const int bad = tfc_test_mismatches(y, want, N * PER, &worst);
        if (bad) printf("\n  step %d: %d mismatches", s, bad);
        good += !bad && memcmp(y, x, sizeof(float) * N * PER) != 0;
    }
    printf("\n  %d of %d steps match (max abs diff %.3g); %d slots skipped, %d repeats",
           good, STEPS, worst, skipped, repeated);
    CU_ASSERT_EQUAL(good, STEPS);
    CU_ASSERT(skipped > 0 && repeated > 0);

    /* a repeated operation's second slot given the first's stream: another output */
    int found = 0;
    for (int s = 1; s < 400 && !found; s++) {
        tfc_aug_mix_draw(l, (uint64_t)s, d);
        const int k = d->pick[0][0];
        if (k < 0 || k > 4 || d->pick[0][1] != k || d->pick[0][2] != -1) continue;
        found = 1;
        run(b, x, N, 1, 11, (uint64_t)s, y);
        for (int c = 0; c < NC; c++) {
            memcpy(ch[c], x, sizeof(float) * N * PER);
            for (int t = 0; t < D; t++) {
                if (d->pick[c][t] < 0) continue;
                const int seed = c == 0 && t == 1 ? 1 : 1 + D * c + t; /* slot 0's stream */
                op_layer(d->pick[c][t], 0.6, "bilinear", 0, 255, seed, layer, sizeof layer);
                tfc_test_run_image_layer(layer, H, W, C, N, 1, ch[c], 1, 11, (uint64_t)s, tmp);
                memcpy(ch[c], tmp, sizeof(float) * N * PER);
            }
        }
        mix(x, ch, d->chain_weight, NC, d->weight, 0, 255, N * PER, want);
        double w2 = 0;
        CU_ASSERT(tfc_test_mismatches(y, want, N * PER, &w2) > 0);
    }
    CU_ASSERT(found);
    unbind(b);
    free(d), free(x), free(y), free(want), free(tmp);
    for (int c = 0; c < NC; c++) free(ch[c]);
}

/* ---- Keras parity ----------------------------------------------------------------------- */

static const char *meta(tfc_st_file *f, const char *key)
{
    for (int j = 0; j < tfc_st_meta_count(f); j++) {
        const char *k, *v;
        tfc_st_meta_at(f, j, &k, &v);
        if (!strcmp(k, key)) return v;
    }
    return NULL;
}

/* The draws of case `name`: its picks (chains of slots, "|" between chains), weights. */
static void case_draws(tfc_st_file *f, const char *name, tfc_aug_mix_draws *d)
{
    char key[96];
    memset(d, 0, sizeof *d);
    snprintf(key, sizeof key, "picks_%s", name);
    const char *p = meta(f, key);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    int c = 0, s = 0, used;
    while (*p) {
        if (*p == ' ') {
            p++;
        } else if (*p == '|') {
            c++, s = 0, p++;
        } else {
            TFC_ASSERT(sscanf(p, "%d%n", &d->pick[c][s], &used) == 1);
            s++, p += used;
        }
    }
    float *m = tfc_test_tensor_at(f, "m_", name, c + 1), *w = tfc_test_tensor_at(f, "w_", name, 1);
    memcpy(d->chain_weight, m, sizeof(float) * (size_t)(c + 1));
    d->weight = w[0];
    free(m), free(w);
}

/* Every case of tests/ref/aug_mix/aug_mix.safetensors with its draws fixed; the shear (its
 * sign drawn per image) image by image against Keras's output of either sign, at steps until
 * both signs have been seen; inference against Keras's. */
static void test_parity_keras(void)
{
    enum { H = 6, W = 7, C = 3, N = 2, PER = H * W * C };
    tfc_st_file *f = tfc_test_fixture("aug_mix", "aug_mix");
    float *y = falloc(N * PER);
    tfc_aug_mix_draws *d = calloc(1, sizeof *d);
    TFC_ASSERT(d != NULL);
    int cases = 0;
    double worst = 0;
    for (int k = 0; k < tfc_st_meta_count(f); k++) {
        const char *key, *yaml;
        tfc_st_meta_at(f, k, &key, &yaml);
        if (strncmp(key, "yaml_", 5) || !strcmp(key, "yaml_shear")) continue;
        const char *name = key + 5;
        char mk[96];
        snprintf(mk, sizeof mk, "x_%s", name);
        float *x = tfc_test_tensor_at(f, "", meta(f, mk), N * PER);
        float *want = tfc_test_tensor_at(f, "y_", name, N * PER);
        case_draws(f, name, d);
        bound b = bind(yaml, H, W, C, N, 2);
        tfc_aug_mix_fix_draws(tfc_model_layer(b.m, 0), d);
        run(b, x, N, 1, 1, 5, y);
        const int bad = tfc_test_mismatches(y, want, N * PER, &worst);
        if (bad) printf("\n  %s: %d MISMATCH", name, bad);
        CU_ASSERT_EQUAL(bad, 0);
        unbind(b);
        free(want), free(x);
        cases++;
    }
    float *x255 = tfc_test_tensor_at(f, "", "x255", N * PER);
    float *pos = tfc_test_tensor_at(f, "y_shear_", "pos", N * PER);
    float *neg = tfc_test_tensor_at(f, "y_shear_", "neg", N * PER);
    bound b = bind(meta(f, "yaml_shear"), H, W, C, N, 2);
    case_draws(f, "shear", d);
    tfc_aug_mix_fix_draws(tfc_model_layer(b.m, 0), d);
    int seen[2] = {0, 0}, bad = 0;
    for (int s = 1; s < 64 && !(seen[0] && seen[1]); s++) {
        run(b, x255, N, 1, 1, (uint64_t)s, y);
        for (int i = 0; i < N; i++) {
            double w0 = 0, w1 = 0;
            const int bp = tfc_test_mismatches(y + i * PER, pos + i * PER, PER, &w0);
            const int bn = tfc_test_mismatches(y + i * PER, neg + i * PER, PER, &w1);
            bad += bp && bn;
            seen[0] += !bp, seen[1] += !bn;
            worst = fmax(worst, bp ? w1 : w0);
        }
    }
    printf("\n  shear images: %d of sign +, %d of sign -, %d neither", seen[0], seen[1], bad);
    CU_ASSERT(seen[0] && seen[1] && bad == 0);
    unbind(b);
    float *inf = tfc_test_tensor_at(f, "y_", "inference", N * PER);
    b = bind("AugMix: {}", H, W, C, N, 2);
    run(b, x255, N, 0, 1, 3, y);
    CU_ASSERT(memcmp(y, inf, sizeof(float) * N * PER) == 0);
    CU_ASSERT(memcmp(inf, x255, sizeof(float) * N * PER) == 0);
    unbind(b);
    printf("\n  %d cases, the shear and inference: max abs diff %.3g", cases, worst);
    CU_ASSERT(cases >= 7);
    free(pos), free(neg), free(inf), free(x255), free(y), free(d);
    tfc_st_close(f);
}

/* ---- inference and determinism ---------------------------------------------------------- */

/* At inference the identity, bound for training or for inference; in training the same
 * (seed, step) gives the same output on 1 or 2 threads, a new step, a new run seed or a layer
 * seed another; chain_depth 0 blends x with itself (x up to rounding); num_chains 0 is
 * clip(w x). */
static void test_identity_and_determinism(void)
{
    enum { H = 6, W = 7, C = 3, N = 32, PER = H * W * C };
    float *x = falloc(N * PER), *a = falloc(N * PER), *b2 = falloc(N * PER);
    tfc_test_fill(x, N * PER, 0, 255, 5);
    const size_t bytes = sizeof(float) * N * PER;
    bound b = bind("AugMix: {}", H, W, C, N, 1), t = bind("AugMix: {}", H, W, C, N, 2);
    run(b, x, N, 0, 1, 1, a);
    CU_ASSERT(memcmp(a, x, bytes) == 0);
    char yaml[128];
    snprintf(yaml, sizeof yaml, "input: {shape: [%d, %d, %d]}\nlayers:\n  - AugMix: {}\n",
             H, W, C);
    tfc_model *inf = tfc_test_model(yaml);
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(inf && tfc_model_bind_inference(inf, b.be, N, &err) == TFC_OK);
    TFC_ASSERT(tfc_model_forward(inf, x, N, 0, 1, 1, &err) == TFC_OK);
    tfc_model_get_output(inf, a);
    CU_ASSERT(memcmp(a, x, bytes) == 0);
    tfc_model_free(inf);

    run(b, x, N, 1, 1, 1, a);
    CU_ASSERT(memcmp(a, x, bytes) != 0);
    run(t, x, N, 1, 1, 1, b2);
    CU_ASSERT(memcmp(a, b2, bytes) == 0);
    run(b, x, N, 1, 1, 1, b2);
    CU_ASSERT(memcmp(a, b2, bytes) == 0);
    run(b, x, N, 1, 1, 2, b2);
    CU_ASSERT(memcmp(a, b2, bytes) != 0);
    run(b, x, N, 1, 2, 1, b2);
    CU_ASSERT(memcmp(a, b2, bytes) != 0);
    unbind(t);
    t = bind("AugMix: {seed: 9}", H, W, C, N, 1);
    run(t, x, N, 1, 1, 1, b2);
    CU_ASSERT(memcmp(a, b2, bytes) != 0);
    run(t, x, N, 1, 1, 1, a);
    CU_ASSERT(memcmp(a, b2, bytes) == 0);
    unbind(t);
    double worst = 0;
    t = bind("AugMix: {chain_depth: 0}", H, W, C, N, 1);
    run(t, x, N, 1, 1, 1, a);
    CU_ASSERT(tfc_test_mismatches(a, x, N * PER, &worst) == 0);
    unbind(t);
    t = bind("AugMix: {num_chains: 0, alpha: 0.5}", H, W, C, N, 1);
    run(t, x, N, 1, 1, 4, a);
    tfc_aug_mix_draws *d = calloc(1, sizeof *d);
    TFC_ASSERT(d != NULL);
    tfc_aug_mix_draw(tfc_model_layer(t.m, 0), 4, d);
    for (int64_t i = 0; i < N * PER; i++) b2[i] = d->weight * x[i];
    CU_ASSERT(tfc_test_mismatches(a, b2, N * PER, &worst) == 0);
    printf("\n  depth 0 and no chain: max abs diff %.3g (w %.3f)", worst, d->weight);
    unbind(t);
    unbind(b);
    free(x), free(a), free(b2), free(d);
}

/* ---- statistics ------------------------------------------------------------------------- */

/* Over 4000 steps: the chain weights sum to 1 and each has a Beta(alpha, 2 alpha)'s mean 1/3
 * and variance 2 / (9 (3 alpha + 1)) (Dirichlet(alpha, alpha, alpha)'s marginal), the weight
 * sample Beta(alpha, alpha)'s mean 1/2 and variance 1 / (4 (2 alpha + 1)), for alpha 1 and
 * 0.4; every slot's pick uniform over the list and "none" (chi-square over 11 degrees of
 * freedom under 31.3, over 7 under 24.3, p = 0.001). */
static void test_draw_statistics(void)
{
    enum { STEPS = 4000, NC = 3 };
    static const struct {
        const char *layer;
        double alpha;
        int nops;
    } cfg[] = {{"AugMix: {}", 1.0, 11}, {"AugMix: {alpha: 0.4, all_ops: false, seed: 2}", 0.4, 7}};
    float *x = falloc(4 * 4 * 3);
    tfc_aug_mix_draws *d = calloc(1, sizeof *d);
    TFC_ASSERT(d != NULL);
    for (int q = 0; q < 2; q++) {
        bound b = bind(cfg[q].layer, 4, 4, 3, 1, 1);
        float *y = falloc(4 * 4 * 3);
        run(b, x, 1, 1, 7, 0, y);
        const tfc_layer *l = tfc_model_layer(b.m, 0);
        double sm[NC] = {0}, sm2[NC] = {0}, sw = 0, sw2 = 0, sum_err = 0;
        int count[12] = {0};
        for (int s = 0; s < STEPS; s++) {
            tfc_aug_mix_draw(l, (uint64_t)s, d);
            double sum = 0;
            for (int c = 0; c < NC; c++) {
                sm[c] += d->chain_weight[c], sm2[c] += d->chain_weight[c] * d->chain_weight[c];
                sum += d->chain_weight[c];
                for (int t = 0; t < 3; t++)
                    count[d->pick[c][t] < 0 ? cfg[q].nops : d->pick[c][t]]++;
            }
            sum_err = fmax(sum_err, fabs(sum - 1));
            sw += d->weight, sw2 += d->weight * d->weight;
        }
        const double a = cfg[q].alpha, vm = 2 / (9 * (3 * a + 1)), vw = 1 / (4 * (2 * a + 1));
        int ok = sum_err < 1e-6;
        printf("\n  alpha %g: weights sum to 1 within %.2g; means", a, sum_err);
        for (int c = 0; c < NC; c++) {
            const double mean = sm[c] / STEPS, var = sm2[c] / STEPS - mean * mean;
            printf(" %.4f (var %.4f)", mean, var);
            ok &= fabs(mean - 1 / 3.0) < 0.015 && fabs(var - vm) < 0.15 * vm;
        }
        const double mw = sw / STEPS, varw = sw2 / STEPS - mw * mw;
        printf("; weight %.4f (var %.4f, want %.4f)", mw, varw, vw);
        ok &= fabs(mw - 0.5) < 0.02 && fabs(varw - vw) < 0.1 * vw;
        double chi = 0;
        const double e = STEPS * NC * 3.0 / (cfg[q].nops + 1);
        for (int k = 0; k <= cfg[q].nops; k++) chi += (count[k] - e) * (count[k] - e) / e;
        printf("; picks chi-square %.1f over %d", chi, cfg[q].nops + 1);
        ok &= chi < (cfg[q].nops == 11 ? 31.3 : 24.3);
        CU_ASSERT(ok);
        unbind(b);
        free(y);
    }
    free(x), free(d);
}

/* ---- errors and devices ----------------------------------------------------------------- */

/* Keras's checks as config errors naming the argument; the ranges Keras accepts build. */
static void test_config_errors(void)
{
    static const struct {
        const char *layer, *want;
        int c;
    } bad[] = {
        {"AugMix: {factor: 1.5}", "factor: 1.5 is outside [0, 1]", 3},
        {"AugMix: {factor: [-0.2, 0.5]}", "factor: -0.2 is outside [0, 1]", 3},
        {"AugMix: {factor: [0.1, 0.2, 0.3]}", "factor: expected a number or a pair", 3},
        {"AugMix: {num_chains: -1}", "num_chains", 3},
        {"AugMix: {chain_depth: 33}", "chain_depth", 3},
        {"AugMix: {alpha: 0}", "alpha: must be positive", 3},
        {"AugMix: {all_ops: 3}", "all_ops", 3},
        {"AugMix: {value_range: [1]}", "value_range: expected a pair", 3},
        {"AugMix: {value_range: [2, 2]}", "value_range: low and high must differ", 3},
        {"AugMix: {}", "needs 3 channels (RGB) or 1 (grayscale)", 2},
        {"AugMix: {interpolation: bicubic}", "interpolation", 3},
        {"AugMix: {data_format: channels_first}", "data_format", 3},
        {"AugMix: {num_ops: 2}", "num_ops", 3},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [4, 4, %d]}\nlayers:\n  - %s\n", bad[k].c,
                 bad[k].layer);
        tfc_test_expect_model_error(yaml, bad[k].want);
    }
    tfc_test_expect_model_error("input: {shape: [4, 3]}\nlayers:\n  - AugMix: {}\n", "AugMix");
    static const char *const good[] = {"AugMix: {factor: [0.8, 0.2]}",
                                       "AugMix: {factor: 0, num_chains: 0, chain_depth: 0}",
                                       "AugMix: {value_range: [1, -1], factor: 1, alpha: 3}"};
    for (size_t k = 0; k < sizeof good / sizeof *good; k++) unbind(bind(good[k], 4, 4, 1, 1, 1));
    /* without the colour operations, any number of channels (Keras's seven take them; with
     * them, its RandomColorDegeneration fails on 2 channels when picked) */
    bound b = bind("AugMix: {all_ops: false, chain_depth: 8}", 4, 4, 2, 2, 1);
    float x[64], y[64];
    tfc_test_fill(x, 64, 0, 255, 1);
    run(b, x, 2, 1, 1, 1, y);
    CU_ASSERT(memcmp(x, y, sizeof x) != 0);
    unbind(b);
}

static void drop_tone(tfc_backend_ops *ops)
{
    ops->tone_forward = NULL;
}

/* CPU-first: a device refuses it naming the layer; a table without one of the operations'
 * ops refuses it naming the op. */
static void test_devices(void)
{
    tfc_test_expect_cpu_first("input: {shape: [4, 4, 3]}\nlayers:\n  - AugMix: {name: v}\n",
                              "v", "AugMix");
    tfc_test_expect_refused("input: {shape: [4, 4, 3]}\nlayers:\n  - AugMix: {}\n",
                            drop_tone, "AugMix", "tone_forward");
}

/* ---- training ----------------------------------------------------------------------------- */

static const char *train_solver =
    "model:\n  name: am\n  input: {shape: [16]}\n  layers:\n"
    "    - Reshape: {target_shape: [4, 4, 1]}\n"
    "    - AugMix: {value_range: [-1, 1], num_chains: 2, chain_depth: 2, factor: 0.1}\n"
    "    - Conv2D: {filters: 8, kernel_size: 2, padding: same, activation: relu}\n"
    "    - Flatten: {}\n    - Dense: {units: 4, activation: softmax}\n"
    "  loss: sparse_categorical_crossentropy\n  metrics: [accuracy]\n"
    "data:\n  train:\n"
    "    source: {type: npy, features: ax.npy, labels: ay.npy}\n"
    "    pipeline: [{shuffle: {buffer_size: 64}}, {repeat: {}}, {batch: {batch_size: 16}}]\n"
    "  test:\n    source: {type: npy, features: ax.npy, labels: ay.npy}\n"
    "    pipeline: [{batch: {batch_size: 64}}]\n"
    "optimizer: {type: adam, learning_rate: 0.01}\n"
    "max_iter: 200\ntest_interval: 200\ndisplay: 50\nsnapshot: {interval: 100, keep: 0}\n"
    "seed: 5\n";

static tfc_status train(const char *out, const char *resume, tfc_train_result *res)
{
    tfc_solver_options o = {0};
    o.out_dir = tfc_test_path(out);
    o.resume = resume;
    o.threads = 2;
    o.console = fopen("/dev/null", "w");
    tfc_error err;
    tfc_error_clear(&err);
    tfc_solver *s = tfc_solver_load(tfc_test_write("am.yaml", train_solver, -1), &o, &err);
    if (!s) fprintf(stderr, "\n%s", err.text);
    tfc_status st = err.code;
    if (s) {
        st = tfc_solver_train(s, res, &err);
        if (st) fprintf(stderr, "\n%s", err.text);
        tfc_solver_free(s);
    }
    fclose(o.console);
    return st;
}

/* A CNN behind AugMix learns the synthetic split (test accuracy well above chance, 0.25),
 * and 200 steps equal 100, a snapshot and 100 resumed, byte for byte (the picks and draws
 * come back from (seed, step) alone). */
static void test_trains_and_resumes(void)
{
    tfc_test_write_split("ax.npy", "ay.npy", 256, 13);
    tfc_train_result *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    CU_ASSERT_EQUAL_FATAL(train("am_full", NULL, a), TFC_OK);
    printf("\n  test accuracy %.3f, loss %.3f", a->test.metric[0], a->test.loss);
    CU_ASSERT(a->have_test && a->test.metric[0] > 0.6);
    char state[2048], fa[2048], fb[2048];
    snprintf(state, sizeof state, "%s/snapshots/am_iter_100.state", tfc_test_path("am_full"));
    CU_ASSERT_EQUAL_FATAL(train("am_resumed", state, b), TFC_OK);
    snprintf(fa, sizeof fa, "%s/final.safetensors", tfc_test_path("am_full"));
    snprintf(fb, sizeof fb, "%s/final.safetensors", tfc_test_path("am_resumed"));
    size_t la, lb;
    char *da = tfc_test_read(fa, &la), *db = tfc_test_read(fb, &lb);
    CU_ASSERT(da && db && la == lb && memcmp(da, db, la) == 0);
    free(da), free(db), free(a), free(b);
}

TFC_TEST_MAIN("aug_mix", {"structure", test_structure},
              {"parity_keras", test_parity_keras},
              {"identity_and_determinism", test_identity_and_determinism},
              {"draw_statistics", test_draw_statistics},
              {"config_errors", test_config_errors}, {"devices", test_devices},
              {"trains_and_resumes", test_trains_and_resumes})
