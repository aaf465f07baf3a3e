/* The batch-mixing map ops mix_up and cut_mix (docs/data.md, Map ops): Keras parity with the
 * draws pinned (tests/ref/keras_mix.py), each mixed example and its label weighted alike,
 * label rows still summing to 1, the Beta sampler's moments, alpha -> 0 giving whole images
 * (Keras's semantics: each example is one image, its own or its partner's), determinism over
 * num_parallel_calls, resume, seeds, the configuration errors (before batch, integer labels,
 * a non-image for cut_mix) at FILE:LINE:COL, a model naming MixUp pointed to the op, and a
 * classifier trained with mix_up (synthetic data; Fashion-MNIST where installed). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/internal.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "solver/solver.h"
#include "testutil.h"

/* ---- Keras parity ---------------------------------------------------------------------------- */

/* Each case of tests/ref/mix/mix.safetensors: the batch x, labels, Keras's draws applied by
 * tfc_mix_apply, against Keras's images and labels. */
static void test_keras_parity(void)
{
    tfc_st_file *f = tfc_test_fixture("mix", "mix");
    const int64_t B = 4, per = 5 * 6 * 3, K = 3;
    float *x = tfc_test_tensor_at(f, "", "x", B * per);
    float *lab = tfc_test_tensor_at(f, "", "labels", B * K);
    const char *cases[] = {"mixup", "mixup_self", "cutmix", "cutmix_edges"};
    double worst = 0.0;
    for (int c = 0; c < 4; c++) {
        int cut = !strncmp(cases[c], "cutmix", 6);
        tfc_mix_draws d = {B, NULL, NULL, NULL, NULL};
        float *perm = tfc_test_tensor_at(f, "perm_", cases[c], B);
        d.perm = malloc(sizeof *d.perm * (size_t)B);
        for (int i = 0; i < B; i++) d.perm[i] = (int64_t)perm[i];
        d.lam = tfc_test_tensor_at(f, "lam_", cases[c], B);
        if (cut) {
            d.ux = tfc_test_tensor_at(f, "ux_", cases[c], B);
            d.uy = tfc_test_tensor_at(f, "uy_", cases[c], B);
        }
        tfc_element e;
        memset(&e, 0, sizeof e);
        tfc_shape fs = {.ndim = 4, .dim = {B, 5, 6, 3}}, ls = {.ndim = 2, .dim = {B, K}};
        memcpy(tfc_element_alloc(&e, TFC_COMP_FEATURES, TFC_F32, &fs), x, sizeof *x * B * per);
        memcpy(tfc_element_alloc(&e, TFC_COMP_LABELS, TFC_F32, &ls), lab, sizeof *lab * B * K);
        tfc_error err;
        tfc_error_clear(&err);
        CU_ASSERT_EQUAL_FATAL(tfc_mix_apply(&e, &d, cut, &err), TFC_OK);
        float *y = tfc_test_tensor_at(f, "y_", cases[c], B * per);
        float *z = tfc_test_tensor_at(f, "z_", cases[c], B * K);
        double wy = 0.0, wz = 0.0;
        int bad = tfc_test_mismatches(e.comp[TFC_COMP_FEATURES].data, y, B * per, &wy) +
                  tfc_test_mismatches(e.comp[TFC_COMP_LABELS].data, z, B * K, &wz);
        printf("\n  %-13s max |d| images %.3g, labels %.3g", cases[c], wy, wz);
        CU_ASSERT_EQUAL(bad, 0);
        worst = fmax(worst, fmax(wy, wz));
        free(y);
        free(z);
        free(perm);
        free(d.perm);
        free(d.lam);
        free(d.ux);
        free(d.uy);
        for (int k = 0; k < TFC_COMP_COUNT; k++) free(e.comp[k].data);
    }
    free(x);
    free(lab);
    tfc_st_close(f);
}

/* ---- pipelines ------------------------------------------------------------------------------- */

/* n images (4, 4, 1) of distinct values and int32 labels i % classes, as a tensor pipeline. */
static tfc_pipeline *images(int n, int classes, uint64_t seed)
{
    float *f = malloc(sizeof *f * 16 * (size_t)n);
    int32_t *l = malloc(sizeof *l * (size_t)n);
    for (int i = 0; i < n * 16; i++) f[i] = (float)((i * 7919) % 1000) / 1000.0f;
    for (int i = 0; i < n; i++) l[i] = i % classes;
    tfc_tensor tf = {TFC_F32, {.ndim = 4, .dim = {n, 4, 4, 1}}, f, -1};
    tfc_tensor tl = {TFC_I32, {.ndim = 1, .dim = {n}}, l, -1};
    tfc_data_options opt = {.seed = seed};
    tfc_error err;
    tfc_error_clear(&err);
    tfc_pipeline *p = tfc_pipeline_from_tensors(&tf, &tl, &opt, &err);
    free(f);
    free(l);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    return p;
}

static void add(tfc_pipeline *p, const char *yaml)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_status st = tfc_pipeline_add_yaml(p, yaml, &err);
    if (st) printf("\n%s: %s\n", yaml, err.text);
    CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
}

static tfc_batch next(tfc_pipeline *p)
{
    tfc_batch b;
    tfc_error err;
    tfc_error_clear(&err);
    tfc_status st = tfc_pipeline_next(p, &b, &err);
    if (st) printf("\n%s\n", err.text);
    CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
    return b;
}

/* The unmixed images of `images` (the same formula). */
static float pixel(int64_t row, int64_t k)
{
    return (float)(((row * 16 + k) * 7919) % 1000) / 1000.0f;
}

/* Batches of B = classes with labels one-hot of i (each row its own class), so a mixed label
 * row shows its partner and weight: z_i = w e_i + (1 - w) e_p. mix_up: every image is
 * w x_i + (1 - w) x_p with that same w; cut_mix: every pixel is x_i's or x_p's, x_p's fill a
 * rectangle, and their count is the box area 1 - w of the image to within its border. Label
 * rows sum to 1; shapes and dtypes as the spec says. */
static void check_mixed(int cut)
{
    const int B = 8, n = 20;
    tfc_pipeline *p = images(n, B, 5);
    add(p, "batch: {batch_size: 8}");
    add(p, "map: {op: one_hot, depth: 8}");
    add(p, cut ? "map: {op: cut_mix, factor: 1.0}" : "map: {op: mix_up, alpha: 0.4}");
    const tfc_element_spec *s = tfc_pipeline_element_spec(p);
    CU_ASSERT(s->batched && s->comp[TFC_COMP_FEATURES].dtype == TFC_F32 &&
              s->comp[TFC_COMP_LABELS].dtype == TFC_F32 &&
              s->comp[TFC_COMP_LABELS].shape.dim[1] == 8);
    int mixed = 0, rows = 0;
    for (int bi = 0; bi < 3; bi++) {
        tfc_batch b = next(p);
        int64_t m = bi < 2 ? B : n - 2 * B; /* the last batch is short */
        CU_ASSERT_EQUAL_FATAL(b.features.shape.dim[0], m);
        CU_ASSERT_EQUAL(b.features.shape.ndim, 4);
        CU_ASSERT_EQUAL_FATAL(b.labels.shape.dim[0], m);
        const float *z = b.labels.data, *y = b.features.data;
        for (int64_t i = 0; i < m; i++) {
            const float *zi = z + i * B;
            double sum = 0.0;
            int64_t partner = i;
            for (int k = 0; k < B; k++) {
                sum += zi[k];
                if (k != i && zi[k] > 0) partner = k;
                CU_ASSERT(zi[k] >= 0 && (k == i || k == partner || zi[k] == 0));
            }
            CU_ASSERT(fabs(sum - 1.0) < 1e-6);
            int64_t pr = bi * B + partner, r = bi * B + i; /* rows of the source */
            float w = zi[i];
            rows++;
            mixed += partner != i;
            int64_t from_partner = 0, ylo = 4, yhi = -1, xlo = 4, xhi = -1;
            for (int64_t k = 0; k < 16; k++) {
                float v = y[i * 16 + k], own = pixel(r, k), other = pixel(pr, k);
                if (!cut) {
                    CU_ASSERT(fabsf(v - (w * own + (1 - w) * other)) < 1e-5f);
                    continue;
                }
                CU_ASSERT(v == own || v == other);
                if (v != own) {
                    from_partner++;
                    ylo = k / 4 < ylo ? k / 4 : ylo;
                    yhi = k / 4 > yhi ? k / 4 : yhi;
                    xlo = k % 4 < xlo ? k % 4 : xlo;
                    xhi = k % 4 > xhi ? k % 4 : xhi;
                }
            }
            if (cut && from_partner) { /* a rectangle, about the box's area */
                CU_ASSERT_EQUAL(from_partner, (yhi - ylo + 1) * (xhi - xlo + 1));
                CU_ASSERT(fabs((1.0 - w) * 16 - (double)from_partner) <= 4 + 4 + 1);
            }
        }
    }
    printf("\n  %s: %d of %d rows mixed with another", cut ? "cut_mix" : "mix_up", mixed, rows);
    CU_ASSERT(mixed >= rows / 2);
    CU_ASSERT(next(p).end);
    tfc_pipeline_free(p);
}

static void test_mix_up_rows(void)
{
    check_mixed(0);
}

static void test_cut_mix_rows(void)
{
    check_mixed(1);
}

/* The Beta(a, a) draws have its mean 1/2 and variance 1 / (4 (2a + 1)); Beta(1/2, 1/2)'s
 * P(l < 0.1) is (2/pi) asin(sqrt(0.1)) = 0.2048; every perm is a permutation. */
static void test_beta_moments(void)
{
    const double alphas[] = {0.2, 0.5, 1.0, 4.0};
    for (int k = 0; k < 4; k++) {
        tfc_mix_draws d;
        tfc_error err;
        CU_ASSERT_EQUAL_FATAL(tfc_mix_draw(1234 + (uint64_t)k, 0, alphas[k], alphas[k], 20000,
                                           &d, &err), TFC_OK);
        double m = 0, v = 0, low = 0;
        for (int64_t i = 0; i < d.n; i++) m += d.lam[i];
        m /= (double)d.n;
        for (int64_t i = 0; i < d.n; i++) {
            v += (d.lam[i] - m) * (d.lam[i] - m);
            low += d.lam[i] < 0.1;
            CU_ASSERT(d.lam[i] >= 0 && d.lam[i] <= 1);
        }
        v /= (double)d.n;
        double want_v = 1.0 / (4 * (2 * alphas[k] + 1));
        printf("\n  alpha %.1f: mean %.4f var %.4f (want 0.5, %.4f)", alphas[k], m, v, want_v);
        CU_ASSERT(fabs(m - 0.5) < 0.01 && fabs(v - want_v) < 0.01);
        if (alphas[k] == 0.5) CU_ASSERT(fabs(low / (double)d.n - 0.2048) < 0.01);
        char *seen = calloc((size_t)d.n, 1);
        for (int64_t i = 0; i < d.n; i++) seen[d.perm[i]]++;
        int ok = 1;
        for (int64_t i = 0; i < d.n; i++) ok &= seen[i] == 1;
        CU_ASSERT(ok);
        free(seen);
        tfc_mix_draws_free(&d);
    }
}

/* alpha -> 0 (mix_up 1e-5; cut_mix's factor [0, 0], which Keras turns into alpha 1e-6):
 * Beta(a, a) puts its weight at 0 and 1, so each example comes out as one whole image, its
 * own or its partner's (not near the identity: about half take the partner's), with a label
 * one-hot to 1e-3. */
static void test_tiny_alpha(void)
{
    for (int cut = 0; cut < 2; cut++) {
        tfc_pipeline *p = images(64, 64, 9);
        add(p, "batch: {batch_size: 64}");
        add(p, "map: {op: one_hot, depth: 64}");
        add(p, cut ? "map: {op: cut_mix, factor: 0}" : "map: {op: mix_up, alpha: 0.00001}");
        tfc_batch b = next(p);
        const float *z = b.labels.data, *y = b.features.data;
        int swapped = 0, whole = 0;
        for (int64_t i = 0; i < 64; i++) {
            int top = 0;
            for (int k = 1; k < 64; k++) top = z[i * 64 + k] > z[i * 64 + top] ? k : top;
            double dmax = 0;
            for (int64_t k = 0; k < 16; k++)
                dmax = fmax(dmax, fabs(y[i * 16 + k] - pixel(top, k)));
            whole += z[i * 64 + top] > 0.999f && dmax < 1e-3;
            swapped += top != i;
        }
        printf("\n  %s: %d of 64 whole images, %d of them the partner's",
               cut ? "cut_mix factor 0" : "mix_up alpha 1e-5", whole, swapped);
        CU_ASSERT(whole >= 63);
        CU_ASSERT(swapped > 8 && swapped < 56);
        tfc_pipeline_free(p);
    }
}

/* mix_up's output is the same with num_parallel_calls 1 and 3, after a prefetch, and through
 * a saved and restored position; another seed (or the op's own seed:) draws otherwise. */
static void test_deterministic(void)
{
    const char *tail[] = {"map: {op: mix_up, alpha: 0.3}",
                          "map: {op: mix_up, alpha: 0.3, num_parallel_calls: 3}",
                          "map: {op: cut_mix, factor: [0.2, 0.9], num_parallel_calls: 2}"};
    float ref[6][4 * 16];
    for (int v = 0; v < 3; v++) {
        tfc_pipeline *p = images(50, 5, 3);
        add(p, "shuffle: {buffer_size: 10}");
        add(p, "repeat: {}");
        add(p, "batch: {batch_size: 4}");
        add(p, "map: {op: one_hot, depth: 5}");
        add(p, tail[v]);
        add(p, "prefetch: {buffer_size: 2}");
        float got[6][4 * 16];
        void *state = NULL;
        size_t len = 0;
        tfc_error err;
        for (int i = 0; i < 6; i++) {
            if (i == 3) CU_ASSERT_EQUAL_FATAL(tfc_pipeline_save_state(p, &state, &len, &err), 0);
            tfc_batch b = next(p);
            memcpy(got[i], b.features.data, sizeof got[i]);
        }
        if (v == 0) memcpy(ref, got, sizeof got);
        if (v == 1) CU_ASSERT(memcmp(got, ref, sizeof got) == 0); /* 3 workers: the same */
        /* resume: a fresh pipeline restored to the position before batch 3 */
        tfc_pipeline *q = images(50, 5, 3);
        add(q, "shuffle: {buffer_size: 10}");
        add(q, "repeat: {}");
        add(q, "batch: {batch_size: 4}");
        add(q, "map: {op: one_hot, depth: 5}");
        add(q, tail[v]);
        add(q, "prefetch: {buffer_size: 2}");
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_restore_state(q, state, len, &err), 0);
        for (int i = 3; i < 6; i++) {
            tfc_batch b = next(q);
            CU_ASSERT(memcmp(b.features.data, got[i], sizeof got[i]) == 0);
        }
        free(state);
        tfc_pipeline_free(q);
        tfc_pipeline_free(p);
    }
    /* another solver seed, and the op's own seed, draw other mixes */
    const char *other[] = {NULL, "map: {op: mix_up, alpha: 0.3, seed: 42}"};
    for (int k = 0; k < 2; k++) {
        tfc_pipeline *p = images(50, 5, k == 0 ? 4 : 3);
        add(p, "shuffle: {buffer_size: 10, seed: 0}");
        add(p, "repeat: {}");
        add(p, "batch: {batch_size: 4}");
        add(p, "map: {op: one_hot, depth: 5}");
        add(p, other[k] ? other[k] : tail[0]);
        tfc_pipeline *q = images(50, 5, 3);
        add(q, "shuffle: {buffer_size: 10, seed: 0}");
        add(q, "repeat: {}");
        add(q, "batch: {batch_size: 4}");
        add(q, "map: {op: one_hot, depth: 5}");
        add(q, tail[0]);
        tfc_batch a = next(p), b = next(q);
        CU_ASSERT(memcmp(a.labels.data, b.labels.data, 4 * 5 * sizeof(float)) != 0);
        tfc_pipeline_free(p);
        tfc_pipeline_free(q);
    }
}

/* ---- configuration errors -------------------------------------------------------------------- */

/* tfc-data on a solver file: exit 2 with the message (and FILE:LINE:COL) expected. */
static void expect_config_error_in(const char *features, const char *pipeline,
                                  const char *want1, const char *want2)
{
    const char *bin = tfc_test_bin("tfc-data");
    if (!bin) return;
    tfc_test_write_split("mx.npy", "my.npy", 12, 3);
    char yaml[1024];
    snprintf(yaml, sizeof yaml, "data:\n  train:\n    source: {type: npy, features: %s, "
             "labels: my.npy}\n    pipeline:\n%s", features, pipeline);
    tfc_test_write("mix.yaml", yaml, -1);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s/tfc-data mix.yaml --take 1", bin);
    tfc_test_sh_expect(2, cmd, want1, want2);
}

static void expect_config_error(const char *pipeline, const char *want1, const char *want2)
{
    expect_config_error_in("mx.npy", pipeline, want1, want2);
}

static void test_config_errors(void)
{
    /* a place before batch is found by the plan, before any file is opened */
    expect_config_error_in("no_such.npy", "      - map: {op: mix_up}\n      - batch: "
                           "{batch_size: 4}\n", "mix.yaml:5:14: error: data.train.pipeline[0]."
                           "map: mix_up mixes the examples of a batch", NULL);
    /* before batch: found by the plan, before any data */
    expect_config_error("      - map: {op: mix_up}\n      - batch: {batch_size: 4}\n",
                        "mix.yaml:5:14: error: data.train.pipeline[0].map: mix_up mixes the "
                        "examples of a batch: place it after `batch`", NULL);
    expect_config_error("      - map: {op: one_hot, depth: 4}\n      - map: {op: cut_mix}\n",
                        "mix.yaml:6:14: error: data.train.pipeline[1].map: cut_mix mixes", NULL);
    /* integer labels */
    expect_config_error("      - batch: {batch_size: 4}\n      - map: {op: mix_up}\n",
                        "mix.yaml:6:14: error: data.train.pipeline[1].map: mix_up needs float "
                        "labels", "add `- map: {op: one_hot, depth: NUM_CLASSES}` before it");
    /* cut_mix on features that are no images */
    expect_config_error("      - batch: {batch_size: 4}\n      - map: {op: one_hot, depth: 4}\n"
                        "      - map: {op: cut_mix}\n",
                        "mix.yaml:7:14: error: data.train.pipeline[2].map: cut_mix needs "
                        "batches of images", "float32 (-1, 16)");
    /* arguments */
    expect_config_error("      - batch: {batch_size: 4}\n      - map: {op: mix_up, alpha: 0}\n",
                        "alpha must be > 0", NULL);
    expect_config_error("      - batch: {batch_size: 4}\n"
                        "      - map: {op: cut_mix, factor: [0.1, 0.2, 0.3]}\n",
                        "factor is one number or a pair", NULL);
    expect_config_error("      - batch: {batch_size: 4}\n      - map: {op: cut_mix, factor: 2}\n",
                        "data.train.pipeline[1].map.factor", "[0, 1]");
    expect_config_error("      - batch: {batch_size: 4}\n"
                        "      - map: {op: mix_up, alpha: 0.2, data_format: channels_last}\n",
                        "data_format", NULL);
}

/* A model naming Keras's MixUp or CutMix as a layer is pointed to the pipeline op. */
static void test_layer_points_to_op(void)
{
    const char *types[] = {"MixUp", "CutMix"}, *ops[] = {"op: mix_up", "op: cut_mix"};
    for (int k = 0; k < 2; k++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [4, 4, 1]}\nlayers:\n  - %s: {}\n"
                 "  - Flatten: {}\n  - Dense: {units: 2}\n", types[k]);
        tfc_error err = tfc_test_model_error(yaml);
        printf("\n  %s", err.text);
        CU_ASSERT_EQUAL(err.code, TFC_ERR_CONFIG);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, ops[k]));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "layers[0]"));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "not a model layer"));
    }
}

/* ---- training -------------------------------------------------------------------------------- */

/* The synthetic 4-class set (16 features) trained with mix_up (features of rank 1 mix too)
 * and categorical_crossentropy on the soft labels: the test accuracy (one-hot test labels)
 * well above chance. */
static void test_trains_synthetic(void)
{
    tfc_test_write_split("sx.npy", "sy.npy", 512, 21);
    tfc_test_write_split("tx.npy", "ty.npy", 200, 22);
    const char *yaml =
        "model:\n  name: mixed\n  input: {shape: [16]}\n  layers:\n"
        "    - Dense: {units: 32, activation: relu}\n"
        "    - Dense: {units: 4, activation: softmax}\n"
        "  loss: categorical_crossentropy\n  metrics: [accuracy]\n"
        "data:\n  train:\n    source: {type: npy, features: sx.npy, labels: sy.npy}\n"
        "    pipeline:\n      - shuffle: {buffer_size: 512}\n      - repeat: {}\n"
        "      - batch: {batch_size: 16}\n      - map: {op: one_hot, depth: 4}\n"
        "      - map: {op: mix_up, alpha: 0.2}\n"
        "  test:\n    source: {type: npy, features: tx.npy, labels: ty.npy}\n"
        "    pipeline:\n      - batch: {batch_size: 50}\n      - map: {op: one_hot, depth: 4}\n"
        "optimizer: {type: adam, learning_rate: 0.01}\n"
        "max_iter: 300\ntest_interval: 300\ndisplay: 100\nseed: 5\n";
    tfc_error err;
    tfc_train_result res;
    tfc_status st = tfc_test_train_result(yaml, "mixed.yaml", "mixed", &res, &err);
    if (st) fprintf(stderr, "\n%s", err.text);
    CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
    printf("\n  synthetic, mix_up: test accuracy %.3f, loss %.3f", res.test.metric[0],
           res.test.loss);
    CU_ASSERT(res.have_test && res.test.metric[0] > 0.8);
}

/* Fashion-MNIST (where installed): a small MLP trained with cut_mix then mix_up for 300
 * steps of 64 reaches a test accuracy that only learning gives (0.1 is chance). */
static void test_trains_fashion(void)
{
    const char *dir = "/usr/share/datasets/fashion-mnist";
    char img[256];
    snprintf(img, sizeof img, "%s/train-images-idx3-ubyte.gz", dir);
    if (access(img, R_OK)) {
        tfc_test_skip("no Fashion-MNIST (apt-get install dataset-fashion-mnist)");
        return;
    }
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "model:\n  name: fashion_mix\n  input: {shape: [28, 28, 1]}\n  layers:\n"
             "    - Flatten: {}\n    - Dense: {units: 64, activation: relu}\n"
             "    - Dense: {units: 10, activation: softmax}\n"
             "  loss: categorical_crossentropy\n  metrics: [accuracy]\n"
             "data:\n  train:\n"
             "    source: {type: idx, images: %s/train-images-idx3-ubyte.gz, "
             "labels: %s/train-labels-idx1-ubyte.gz}\n"
             "    pipeline:\n      - map: {op: scale, factor: 0.00392156862745098}\n"
             "      - shuffle: {buffer_size: 60000}\n      - repeat: {}\n"
             "      - batch: {batch_size: 64}\n      - map: {op: one_hot, depth: 10}\n"
             "      - map: {op: cut_mix, factor: 0.5}\n"
             "      - map: {op: mix_up, alpha: 0.2}\n      - prefetch: {}\n"
             "  test:\n"
             "    source: {type: idx, images: %s/t10k-images-idx3-ubyte.gz, "
             "labels: %s/t10k-labels-idx1-ubyte.gz}\n"
             "    pipeline:\n      - map: {op: scale, factor: 0.00392156862745098}\n"
             "      - take: {count: 2000}\n"
             "      - batch: {batch_size: 500}\n      - map: {op: one_hot, depth: 10}\n"
             "optimizer: {type: adam, learning_rate: 0.002}\n"
             "max_iter: 300\ntest_interval: 300\ndisplay: 100\nseed: 1\n",
             dir, dir, dir, dir);
    tfc_error err;
    tfc_train_result res;
    tfc_status st = tfc_test_train_result(yaml, "fashion_mix.yaml", "fashion_mix", &res, &err);
    if (st) fprintf(stderr, "\n%s", err.text);
    CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
    printf("\n  Fashion-MNIST, cut_mix + mix_up, 300 steps: test accuracy %.3f, loss %.3f",
           res.test.metric[0], res.test.loss);
    CU_ASSERT(res.have_test && res.test.metric[0] > 0.7);
}

/* tfc-data prints the mixed split's spec and writes its elements: float32 labels whose rows
 * sum to 1 and are not all one-hot. */
static void test_tool_writes_mixed(void)
{
    const char *bin = tfc_test_bin("tfc-data");
    if (!bin) return;
    tfc_test_write_split("wx.npy", "wy.npy", 32, 8);
    tfc_test_write("w.yaml", "data:\n  train:\n    source: {type: npy, features: wx.npy, "
                   "labels: wy.npy}\n    pipeline:\n      - batch: {batch_size: 8}\n"
                   "      - map: {op: one_hot, depth: 4}\n      - map: {op: mix_up, alpha: 1}\n",
                   -1);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s/tfc-data w.yaml --output mixed", bin);
    tfc_test_sh_expect(0, cmd, "labels    float32 (-1, 4)", "wrote mixed.labels.npy: float32 "
                       "(32, 4)");
    size_t len;
    char *npy = tfc_test_read(tfc_test_path("mixed.labels.npy"), &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(npy);
    CU_ASSERT_FATAL(len >= 32 * 4 * sizeof(float));
    const float *z = (const float *)(npy + len - 32 * 4 * sizeof(float));
    int soft = 0;
    for (int i = 0; i < 32; i++) {
        double s = 0;
        for (int k = 0; k < 4; k++) {
            s += z[i * 4 + k];
            soft += z[i * 4 + k] > 0.01f && z[i * 4 + k] < 0.99f;
        }
        CU_ASSERT(fabs(s - 1) < 1e-6);
    }
    CU_ASSERT(soft > 16);
    free(npy);
}

TFC_TEST_MAIN("data_mix", {"keras_parity", test_keras_parity},
              {"mix_up_rows", test_mix_up_rows}, {"cut_mix_rows", test_cut_mix_rows},
              {"beta_moments", test_beta_moments}, {"tiny_alpha", test_tiny_alpha},
              {"deterministic", test_deterministic}, {"config_errors", test_config_errors},
              {"layer_points_to_op", test_layer_points_to_op},
              {"trains_synthetic", test_trains_synthetic},
              {"trains_fashion", test_trains_fashion},
              {"tool_writes_mixed", test_tool_writes_mixed})
