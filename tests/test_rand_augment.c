/* RandAugment (layers/rand_augment.c): each picked operation is the tfc layer Keras builds it
 * from, with Keras's arguments and the stream that layer would have with `seed: j + 1`
 * (bit for bit, one operation and a chain of three); Keras's own transform_images with the
 * picks given and every draw fixed (tests/ref/keras_rand_augment.py); the identity at
 * inference; the picks' frequencies, read from the outputs; determinism in (run seed, layer
 * seed, step) and the thread count; config errors; the GPU's refusal; a small CNN behind it
 * that trains, and resumes bit for bit. */
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

/* The first step from `from` whose n picks are `want` (the layer has run a forward at the
 * run's seed, which sets its stream); -1 if none within 100000. */
static int64_t step_with(bound b, const int *want, int n, int64_t from)
{
    const tfc_layer *l = tfc_model_layer(b.m, 0);
    for (int64_t s = from; s < from + 100000; s++) {
        int k = 0;
        while (k < n && tfc_rand_augment_pick(l, (uint64_t)s, k) == want[k]) k++;
        if (k == n) return s;
    }
    return -1;
}

/* The tfc layer RandAugment builds operation j from with factor [0, f] (f a number), value
 * range [0, 255] and `interp`, and the stream of operation j (seed j + 1), written out
 * independently of layers/rand_augment.c. */
static void op_layer(int j, double f, const char *interp, char *buf, size_t size)
{
    static const char *const fmt[11] = {
        "RandomShear: {x_factor: [0, %g], y_factor: [0, %g], interpolation: %s, seed: 1}",
        "RandomTranslation: {height_factor: [0, %g], width_factor: [0, %g], interpolation: %s,"
        " seed: 2}",
        "RandomRotation: {factor: [0, %g], interpolation: %s, seed: 3}",
        "RandomBrightness: {factor: [0, %g], seed: 4}",
        "RandomColorDegeneration: {factor: [0, %g], seed: 5}",
        "RandomContrast: {factor: [0, %g], seed: 6}",
        "RandomSharpness: {factor: [0, %g], seed: 7}",
        "RandomPosterization: {factor: %d, seed: 8}",
        "Solarization: {addition_factor: [0, %g], threshold_factor: [0, %g], seed: 9}",
        "AutoContrast: {}",
        "Equalization: {}"};
    if (j == 0 || j == 1) snprintf(buf, size, fmt[j], f, f, interp);
    else if (j == 2) snprintf(buf, size, fmt[j], f, interp);
    else if (j == 7) snprintf(buf, size, fmt[j], (int)fmax(1, (int)(8 * f)));
    else if (j == 8) snprintf(buf, size, fmt[j], f, f);
    else if (j >= 9) snprintf(buf, size, "%s", fmt[j]);
    else snprintf(buf, size, fmt[j], f);
}

/* ---- structure ---------------------------------------------------------------------------- */

/* With one operation, at a step that picks operation j, RandAugment's output is the bytes
 * of that tfc layer's (op_layer) at the same place, run seed and step, for each of the 11;
 * with three (factor 0.7, nearest), at a step that picks one of them twice, the three
 * layers run one after another (the twice-picked one with the same draws both times). */
static void test_structure(void)
{
    enum { H = 5, W = 6, C = 3, N = 16, PER = H * W * C };
    float *x = falloc(N * PER), *y = falloc(N * PER), *want = falloc(N * PER);
    float *tmp = falloc(N * PER);
    tfc_test_fill(x, N * PER, 0, 255, 3);
    char layer[256];
    bound b = bind("RandAugment: {num_ops: 1}", H, W, C, N, 2);
    run(b, x, N, 1, 11, 0, y);
    int same = 0, changed = 0;
    for (int j = 0; j < 11; j++) {
        const int64_t s = step_with(b, &j, 1, 1);
        CU_ASSERT_FATAL(s > 0);
        run(b, x, N, 1, 11, (uint64_t)s, y);
        op_layer(j, 0.5, "bilinear", layer, sizeof layer);
        tfc_test_run_image_layer(layer, H, W, C, N, 2, x, 1, 11, (uint64_t)s, want);
        const int eq = memcmp(y, want, sizeof(float) * N * PER) == 0;
        if (!eq) printf("\n  op %d (%s) at step %lld differs", j, layer, (long long)s);
        same += eq;
        changed += memcmp(y, x, sizeof(float) * N * PER) != 0;
    }
    CU_ASSERT_EQUAL(same, 11);
    CU_ASSERT_EQUAL(changed, 11);
    unbind(b);

    b = bind("RandAugment: {num_ops: 3, factor: 0.7, interpolation: nearest}", H, W, C, N, 2);
    run(b, x, N, 1, 12, 0, y);
    const tfc_layer *l = tfc_model_layer(b.m, 0);
    int64_t s = 1;
    int p[3];
    for (;; s++) {
        for (int k = 0; k < 3; k++) p[k] = tfc_rand_augment_pick(l, (uint64_t)s, k);
        /* an operation with draws picked twice, and a third */
        if (p[0] < 9 && p[0] == p[2] && p[1] != p[0]) break;
    }
    run(b, x, N, 1, 12, (uint64_t)s, y);
    memcpy(tmp, x, sizeof(float) * N * PER);
    for (int k = 0; k < 3; k++) {
        op_layer(p[k], 0.7, "nearest", layer, sizeof layer);
        tfc_test_run_image_layer(layer, H, W, C, N, 1, tmp, 1, 12, (uint64_t)s, want);
        memcpy(tmp, want, sizeof(float) * N * PER);
    }
    printf("\n  11 single operations; step %lld picks %d %d %d", (long long)s, p[0], p[1], p[2]);
    CU_ASSERT(memcmp(y, want, sizeof(float) * N * PER) == 0);
    unbind(b);
    free(x), free(y), free(want), free(tmp);
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

/* Every case of tests/ref/rand_augment/rand_augment.safetensors at a step that picks its
 * operations; the shear (its sign drawn per image) image by image against Keras's output of
 * either sign, at steps until both signs have been seen; inference against Keras's. */
static void test_parity_keras(void)
{
    enum { H = 6, W = 7, C = 3, N = 2, PER = H * W * C };
    tfc_st_file *f = tfc_test_fixture("rand_augment", "rand_augment");
    float *x255 = tfc_test_tensor_at(f, "", "x255", N * PER);
    float *x1 = tfc_test_tensor_at(f, "", "x1", N * PER);
    float *y = falloc(N * PER);
    int cases = 0;
    double worst = 0;
    for (int k = 0; k < tfc_st_meta_count(f); k++) {
        const char *key, *yaml;
        tfc_st_meta_at(f, k, &key, &yaml);
        if (strncmp(key, "yaml_", 5) || !strcmp(key, "yaml_shear")) continue;
        const char *name = key + 5;
        char mk[96];
        snprintf(mk, sizeof mk, "picks_%s", name);
        int picks[3], n = 0, off = 0, used;
        const char *ps = meta(f, mk);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ps);
        while (n < 3 && sscanf(ps + off, "%d%n", &picks[n], &used) == 1) n++, off += used;
        snprintf(mk, sizeof mk, "x_%s", name);
        const float *x = !strcmp(meta(f, mk), "x1") ? x1 : x255;
        float *want = tfc_test_tensor_at(f, "y_", name, N * PER);
        bound b = bind(yaml, H, W, C, N, 2);
        run(b, x, N, 1, 1, 0, y);
        const int64_t s = step_with(b, picks, n, 1);
        CU_ASSERT_FATAL(s > 0);
        run(b, x, N, 1, 1, (uint64_t)s, y);
        const int bad = tfc_test_mismatches(y, want, N * PER, &worst);
        if (bad) printf("\n  %s: %d MISMATCH", name, bad);
        CU_ASSERT_EQUAL(bad, 0);
        unbind(b);
        free(want);
        cases++;
    }
    float *pos = tfc_test_tensor_at(f, "y_shear_", "pos", N * PER);
    float *neg = tfc_test_tensor_at(f, "y_shear_", "neg", N * PER);
    bound b = bind(meta(f, "yaml_shear"), H, W, C, N, 2);
    run(b, x255, N, 1, 1, 0, y);
    int seen[2] = {0, 0}, bad = 0, zero = 0;
    for (int64_t s = step_with(b, &zero, 1, 1); s > 0 && !(seen[0] && seen[1]);
         s = step_with(b, &zero, 1, s + 1)) {
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
    b = bind("RandAugment: {}", H, W, C, N, 2);
    run(b, x255, N, 0, 1, 3, y);
    CU_ASSERT(memcmp(y, inf, sizeof(float) * N * PER) == 0);
    CU_ASSERT(memcmp(inf, x255, sizeof(float) * N * PER) == 0);
    unbind(b);
    printf("\n  %d cases, the shear and inference: max abs diff %.3g", cases, worst);
    CU_ASSERT(cases >= 14);
    free(pos), free(neg), free(inf), free(x255), free(x1), free(y);
    tfc_st_close(f);
}

/* ---- inference and determinism ---------------------------------------------------------- */

/* At inference the identity, bound for training or for inference; in training the same
 * (seed, step) gives the same output on 1 or 2 threads, a new step, a new run seed or a layer
 * seed another; num_ops 0 is the identity in training too. */
static void test_identity_and_determinism(void)
{
    enum { H = 6, W = 7, C = 3, N = 64, PER = H * W * C };
    float *x = falloc(N * PER), *a = falloc(N * PER), *b2 = falloc(N * PER);
    tfc_test_fill(x, N * PER, 0, 255, 5);
    const size_t bytes = sizeof(float) * N * PER;
    bound b = bind("RandAugment: {}", H, W, C, N, 1), t = bind("RandAugment: {}", H, W, C, N, 2);
    run(b, x, N, 0, 1, 1, a);
    CU_ASSERT(memcmp(a, x, bytes) == 0);
    char yaml[128];
    snprintf(yaml, sizeof yaml, "input: {shape: [%d, %d, %d]}\nlayers:\n  - RandAugment: {}\n",
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
    t = bind("RandAugment: {seed: 9}", H, W, C, N, 1);
    run(t, x, N, 1, 1, 1, b2);
    CU_ASSERT(memcmp(a, b2, bytes) != 0);
    run(t, x, N, 1, 1, 1, a);
    CU_ASSERT(memcmp(a, b2, bytes) == 0);
    unbind(t);
    t = bind("RandAugment: {num_ops: 0}", H, W, C, N, 1);
    run(t, x, N, 1, 1, 1, a);
    CU_ASSERT(memcmp(a, x, bytes) == 0);
    unbind(t);
    unbind(b);
    free(x), free(a), free(b2);
}

/* ---- statistics ------------------------------------------------------------------------- */

/* num_ops 1 over 1100 steps: the operation applied, read by matching the whole batch's
 * output with each of the 11 layers' (op_layer) at that step, is each about 1/11 of the
 * steps (chi-square over 10 degrees of freedom under 29.6, p = 0.001), every output matches
 * exactly one. num_ops 2 over 24200 steps of picks: the pairs uniform over the 121 (chi-square
 * under 180, p ~ 3e-4 for 120), so drawn with replacement and independently. */
static void test_pick_statistics(void)
{
    enum { H = 4, W = 4, C = 3, N = 2, PER = H * W * C, STEPS = 1100 };
    float *x = falloc(N * PER), *y = falloc(N * PER), *o = falloc(N * PER);
    tfc_test_fill(x, N * PER, 0, 255, 9);
    bound ra = bind("RandAugment: {num_ops: 1}", H, W, C, N, 1), op[11];
    char layer[256];
    for (int j = 0; j < 11; j++) {
        op_layer(j, 0.5, "bilinear", layer, sizeof layer);
        op[j] = bind(layer, H, W, C, N, 1);
    }
    int count[11] = {0}, unmatched = 0, ambiguous = 0;
    for (int s = 0; s < STEPS; s++) {
        run(ra, x, N, 1, 4, (uint64_t)s, y);
        int found = -1, matches = 0;
        for (int j = 0; j < 11; j++) {
            run(op[j], x, N, 1, 4, (uint64_t)s, o);
            if (memcmp(y, o, sizeof(float) * N * PER)) continue;
            matches++;
            if (found < 0) found = j;
        }
        if (found < 0) unmatched++;
        else count[found]++;
        ambiguous += matches > 1;
    }
    double chi = 0;
    printf("\n  picks of 11 over %d steps:", STEPS);
    for (int j = 0; j < 11; j++) {
        printf(" %d", count[j]);
        chi += (count[j] - STEPS / 11.0) * (count[j] - STEPS / 11.0) / (STEPS / 11.0);
    }
    printf(" (chi-square %.1f, %d unmatched, %d ambiguous)", chi, unmatched, ambiguous);
    CU_ASSERT(chi < 29.6 && unmatched == 0 && ambiguous == 0);
    for (int j = 0; j < 11; j++) unbind(op[j]);
    unbind(ra);

    ra = bind("RandAugment: {num_ops: 2, seed: 3}", H, W, C, N, 1);
    run(ra, x, N, 1, 4, 0, y);
    const tfc_layer *l = tfc_model_layer(ra.m, 0);
    int pairs[121] = {0}, twice = 0;
    const int n = 24200;
    for (int s = 0; s < n; s++) {
        const int a = tfc_rand_augment_pick(l, (uint64_t)s, 0);
        const int b = tfc_rand_augment_pick(l, (uint64_t)s, 1);
        pairs[a * 11 + b]++;
        twice += a == b;
    }
    chi = 0;
    const double e = n / 121.0;
    for (int k = 0; k < 121; k++) chi += (pairs[k] - e) * (pairs[k] - e) / e;
    printf("\n  pairs over %d steps: chi-square %.1f, the same operation twice %.4f (1/11 "
           "%.4f)", n, chi, (double)twice / n, 1 / 11.0);
    CU_ASSERT(chi < 180);
    CU_ASSERT(fabs((double)twice / n - 1 / 11.0) < 0.01);
    unbind(ra);
    free(x), free(y), free(o);
}

/* ---- errors and devices ----------------------------------------------------------------- */

/* Keras's checks as config errors naming the argument; the ranges Keras accepts build. */
static void test_config_errors(void)
{
    static const struct {
        const char *layer, *want;
        int c;
    } bad[] = {
        {"RandAugment: {factor: 1.5}", "factor: 1.5 is outside [0, 1]", 3},
        {"RandAugment: {factor: [-0.2, 0.5]}", "factor: -0.2 is outside [0, 1]", 3},
        {"RandAugment: {factor: [0.1, 0.2, 0.3]}", "factor: expected a number or a pair", 3},
        {"RandAugment: {num_ops: -1}", "num_ops", 3},
        {"RandAugment: {num_ops: 65}", "num_ops", 3},
        {"RandAugment: {value_range: [1]}", "value_range: expected a pair", 3},
        {"RandAugment: {value_range: [2, 2]}", "value_range: low and high must differ", 3},
        {"RandAugment: {}", "needs 3 channels (RGB) or 1 (grayscale)", 2},
        {"RandAugment: {interpolation: bicubic}", "interpolation", 3},
        {"RandAugment: {data_format: channels_first}", "data_format", 3},
        {"RandAugment: {fill_mode: constant}", "fill_mode", 3},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [4, 4, %d]}\nlayers:\n  - %s\n", bad[k].c,
                 bad[k].layer);
        tfc_test_expect_model_error(yaml, bad[k].want);
    }
    tfc_test_expect_model_error("input: {shape: [4, 3]}\nlayers:\n  - RandAugment: {}\n",
                                "RandAugment");
    static const char *const good[] = {"RandAugment: {factor: [0.8, 0.2]}",
                                       "RandAugment: {factor: 0, num_ops: 0}",
                                       "RandAugment: {value_range: [1, -1], factor: 1}"};
    for (size_t k = 0; k < sizeof good / sizeof *good; k++) unbind(bind(good[k], 4, 4, 1, 1, 1));
}

static void drop_tone(tfc_backend_ops *ops)
{
    ops->tone_forward = NULL;
}

/* CPU-first: a device refuses it naming the layer; a table without one of the operations'
 * ops refuses it naming the op. */
static void test_devices(void)
{
    tfc_test_expect_cpu_first("input: {shape: [4, 4, 3]}\nlayers:\n  - RandAugment: {name: v}\n",
                              "v", "RandAugment");
    tfc_test_expect_refused("input: {shape: [4, 4, 3]}\nlayers:\n  - RandAugment: {}\n",
                            drop_tone, "RandAugment", "tone_forward");
}

/* ---- training ----------------------------------------------------------------------------- */

static const char *train_solver =
    "model:\n  name: ra\n  input: {shape: [16]}\n  layers:\n"
    "    - Reshape: {target_shape: [4, 4, 1]}\n"
    "    - RandAugment: {value_range: [-1, 1], num_ops: 2, factor: 0.1}\n"
    "    - Conv2D: {filters: 8, kernel_size: 2, padding: same, activation: relu}\n"
    "    - Flatten: {}\n    - Dense: {units: 4, activation: softmax}\n"
    "  loss: sparse_categorical_crossentropy\n  metrics: [accuracy]\n"
    "data:\n  train:\n"
    "    source: {type: npy, features: rx.npy, labels: ry.npy}\n"
    "    pipeline: [{shuffle: {buffer_size: 64}}, {repeat: {}}, {batch: {batch_size: 16}}]\n"
    "  test:\n    source: {type: npy, features: rx.npy, labels: ry.npy}\n"
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
    tfc_solver *s = tfc_solver_load(tfc_test_write("ra.yaml", train_solver, -1), &o, &err);
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

/* A CNN behind RandAugment learns the synthetic split (test accuracy well above chance,
 * 0.25), and 200 steps equal 100, a snapshot and 100 resumed, byte for byte (the picks and
 * draws come back from (seed, step) alone). */
static void test_trains_and_resumes(void)
{
    tfc_test_write_split("rx.npy", "ry.npy", 256, 13);
    tfc_train_result *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    CU_ASSERT_EQUAL_FATAL(train("ra_full", NULL, a), TFC_OK);
    printf("\n  test accuracy %.3f, loss %.3f", a->test.metric[0], a->test.loss);
    CU_ASSERT(a->have_test && a->test.metric[0] > 0.6);
    char state[2048], fa[2048], fb[2048];
    snprintf(state, sizeof state, "%s/snapshots/ra_iter_100.state", tfc_test_path("ra_full"));
    CU_ASSERT_EQUAL_FATAL(train("ra_resumed", state, b), TFC_OK);
    snprintf(fa, sizeof fa, "%s/final.safetensors", tfc_test_path("ra_full"));
    snprintf(fb, sizeof fb, "%s/final.safetensors", tfc_test_path("ra_resumed"));
    size_t la, lb;
    char *da = tfc_test_read(fa, &la), *db = tfc_test_read(fb, &lb);
    CU_ASSERT(da && db && la == lb && memcmp(da, db, la) == 0);
    free(da), free(db), free(a), free(b);
}

TFC_TEST_MAIN("rand_augment", {"structure", test_structure},
              {"parity_keras", test_parity_keras},
              {"identity_and_determinism", test_identity_and_determinism},
              {"pick_statistics", test_pick_statistics},
              {"config_errors", test_config_errors}, {"devices", test_devices},
              {"trains_and_resumes", test_trains_and_resumes})
