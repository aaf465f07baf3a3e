/* Resizing, CenterCrop, RandomCrop and RandomBrightness: Keras 3 parity from the fixtures tests/ref/
 * keras_preprocess.py wrote (tests/ref/preprocess/: outputs and the input's and weights'
 * gradients), RandomCrop's training windows (every one a window of the input, the same for
 * the whole batch, uniform over the places, the same at the same step, the gradient going
 * back to the window alone), RandomBrightness's deltas (one per image, uniform in its range,
 * clipped, the gradient passing where the clip does), argument errors, and the refusal of a
 * backend without the kernels. Run from the repository's root. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "graph/model.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "layers/layer.h"
#include "testutil.h"

/* ---- Keras parity ------------------------------------------------------------------------ */

/* Each fixture through tests/util/kerasref's harness: the inference output and, after a
 * training forward, the MSE loss's gradients of the input and the weights, within 1e-5 of
 * the largest value (jax.image.resize sums its taps in another order). Resizing up, down, one
 * axis alone, nearest up and down, both aspect-ratio crops and pads (rows and columns, a
 * fill_value), antialias where nothing shrinks, and between two convolutions; CenterCrop
 * cropping, on an image smaller than the crop (resized), and of the same size; RandomCrop at
 * inference and, where its training crop is not random, in training; RandomBrightness with a
 * factor range of one value (its delta fixed: the training gradient deterministic). */
static void test_keras_parity(void)
{
    static const tfc_keras_parity p = {.dir = "preprocess", .tol = 1e-5};
    static const char *const names[] = {
        "rs_up", "rs_down", "rs_odd", "rs_axis", "rs_nearest", "rs_nearest_down", "rs_crop",
        "rs_crop_rows", "rs_pad_cols", "rs_pad_rows", "rs_pad_nearest", "rs_antialias_up",
        "rs_mid", "cc_crop", "cc_small", "cc_same", "rc_infer", "rc_small", "rc_equal_rows",
        "rb_fixed", "rb_neg", NULL};
    tfc_test_keras_cases(&p, names);
}

/* ---- RandomCrop's training windows ------------------------------------------------------- */

/* RandomCrop's op in training: images x of distinct values (image i, cell (r, q): i 1000 +
 * r 10 + q); each batch's output must be the window at one (top, left) for every image, and
 * dy sent back must land on that window alone. Over 2000 steps each of the 5 x 5 places must
 * come up 80 times within 35%. The same step gives the same window. */
static void test_random_crop_windows(void)
{
    tfc_backend *be = tfc_cpu_backend_create(2);
    enum { N = 3, H = 8, W = 10, C = 2, OH = 4, OW = 6, STEPS = 2000 };
    static float x[N * H * W * C], y[N * OH * OW * C], dx[N * H * W * C], y2[N * OH * OW * C];
    for (int i = 0; i < N * H * W; i++)
        for (int k = 0; k < C; k++)
            x[i * C + k] = (float)(i / (H * W) * 1000 + i % (H * W) / W * 10 + i % W) + k * 0.5f;
    tfc_crop_resize_desc d = {.n = N, .h = H, .w = W, .c = C, .oh = OH, .ow = OW, .vh = OH,
                              .vw = OW, .random = 1, .key = 12345};
    int count[H - OH + 1][W - OW + 1] = {{0}};
    int windows = 1, grads = 1;
    for (int s = 0; s < STEPS; s++) {
        d.step = (uint64_t)s;
        be->ops->crop_resize_forward(be, &d, x, y);
        const int top = (int)(y[0] / 10) % 100, left = (int)y[0] % 10;
        if (top > H - OH || left > W - OW) {
            windows = 0;
            continue;
        }
        count[top][left]++;
        for (int i = 0; i < N; i++)
            for (int r = 0; r < OH; r++)
                for (int q = 0; q < OW; q++)
                    for (int k = 0; k < C; k++)
                        windows &= y[((i * OH + r) * OW + q) * C + k] ==
                                   x[((i * H + top + r) * W + left + q) * C + k];
        if (s % 100 == 0) { /* the gradient: y sent back, 0 outside the window */
            memset(dx, 0, sizeof dx);
            be->ops->crop_resize_backward(be, &d, y, dx);
            for (int i = 0; i < N * H * W * C; i++) {
                const int r = i / C / W % H, q = i / C % W;
                const int in = r >= top && r < top + OH && q >= left && q < left + OW;
                grads &= dx[i] == (in ? x[i] : 0.0f);
            }
            be->ops->crop_resize_forward(be, &d, x, y2);
            grads &= memcmp(y, y2, sizeof y) == 0;
        }
    }
    CU_ASSERT(windows);
    CU_ASSERT(grads);
    int worst = 0;
    for (int r = 0; r <= H - OH; r++)
        for (int q = 0; q <= W - OW; q++) {
            const int off = abs(count[r][q] - STEPS / 25);
            worst = off > worst ? off : worst;
        }
    printf("\n  places: largest count off the mean %d of %d", worst, STEPS / 25);
    CU_ASSERT(worst < STEPS / 25 * 35 / 100);
    tfc_backend_free(be);
}

/* The layer in a model: training crops one window for the batch, which differs between
 * steps and repeats at a step; inference gives the aspect-ratio window resized (the
 * fixtures check its values), here the centred 8 x 8 of 8 x 10 at full size. */
static void test_random_crop_layer(void)
{
    tfc_model *m = tfc_test_model("input: {shape: [8, 10, 1]}\nlayers:\n"
                                  "  - RandomCrop: {height: 8, width: 8, seed: 4}\n");
    TFC_ASSERT(m != NULL);
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(tfc_model_bind(m, be, 2, &err) == TFC_OK);
    float x[2 * 80], y[2 * 64];
    for (int i = 0; i < 160; i++) x[i] = (float)i;
    TFC_ASSERT(tfc_model_forward(m, x, 2, 0, 1, 1, &err) == TFC_OK);
    tfc_model_get_output(m, y);
    CU_ASSERT(y[0] == 1.0f && y[63] == 78.0f && y[64] == 81.0f);
    /* 8 x 10 -> 8 x 8: rows are not larger, so training is not random either (Keras: the
     * crop only where both sides are larger) */
    TFC_ASSERT(tfc_model_forward(m, x, 2, 1, 1, 7, &err) == TFC_OK);
    tfc_model_get_output(m, y);
    CU_ASSERT(y[0] == 1.0f && y[64] == 81.0f);
    tfc_model_free(m);

    m = tfc_test_model("input: {shape: [8, 10, 1]}\nlayers:\n"
                       "  - RandomCrop: {height: 5, width: 5}\n");
    TFC_ASSERT(m != NULL && tfc_model_bind(m, be, 2, &err) == TFC_OK);
    int seen[4 * 6] = {0}, same = 1;
    for (int s = 0; s < 200; s++) {
        float a[50], b[50];
        TFC_ASSERT(tfc_model_forward(m, x, 2, 1, 1, (uint64_t)s, &err) == TFC_OK);
        tfc_model_get_output(m, a);
        TFC_ASSERT(tfc_model_forward(m, x, 2, 1, 1, (uint64_t)s, &err) == TFC_OK);
        tfc_model_get_output(m, b);
        same &= memcmp(a, b, sizeof a) == 0 && a[25] == a[0] + 80;
        const int top = (int)a[0] / 10, left = (int)a[0] % 10;
        if (top <= 3 && left <= 5) seen[top * 6 + left] = 1;
    }
    int places = 0;
    for (int i = 0; i < 24; i++) places += seen[i];
    CU_ASSERT(same);
    CU_ASSERT_EQUAL(places, 24);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* ---- RandomBrightness ------------------------------------------------------------------- */

/* Its op on 4000 zero images of 3 x 2: each image shifted by one delta, the deltas uniform in
 * [-0.2, 0.4] x 20 (4 bins within 10%, mean 2 within 0.1); with value_range [-1, 1] the
 * outputs are clipped and the gradient passes only where x + b lies inside it. */
static void test_brightness(void)
{
    tfc_backend *be = tfc_cpu_backend_create(2);
    enum { N = 4000, PER = 6 };
    static float x[N * PER], y[N * PER], dy[N * PER], dx[N * PER];
    tfc_contrast_desc d = {.n = N, .hw = 3, .c = 2, .lo = -0.2f, .hi = 0.4f, .vlo = -10,
                           .vhi = 10, .key = 5, .step = 3};
    be->ops->brightness_forward(be, &d, x, y);
    int same = 1, bins[4] = {0};
    double mean = 0;
    for (int i = 0; i < N; i++) {
        for (int k = 1; k < PER; k++) same &= y[i * PER + k] == y[i * PER];
        const double b = y[i * PER];
        mean += b / N;
        const int bin = (int)((b + 4) / 3);
        if (b >= -4 && b <= 8) bins[bin > 3 ? 3 : bin]++;
    }
    CU_ASSERT(same);
    for (int k = 0; k < 4; k++) CU_ASSERT(abs(bins[k] - N / 4) < N / 40);
    CU_ASSERT(fabs(mean - 2) < 0.1);
    d.vlo = -1, d.vhi = 1;
    tfc_test_fill(x, N * PER, -1, 1, 7);
    tfc_test_fill(dy, N * PER, -1, 1, 8);
    be->ops->brightness_forward(be, &d, x, y);
    be->ops->brightness_backward(be, &d, x, dy, dx);
    int clipped = 0, ok = 1;
    for (int i = 0; i < N * PER; i++) {
        const int in = y[i] > -1 && y[i] < 1;
        clipped += !in;
        ok &= y[i] >= -1 && y[i] <= 1 && dx[i] == (in ? dy[i] : 0.0f);
    }
    CU_ASSERT(ok);
    CU_ASSERT(clipped > N * PER / 10);
    tfc_backend_free(be);
}

/* ---- errors and devices ------------------------------------------------------------------ */

/* The error of one layer on an image [6, 8, 3] (or `shape`): its text names `what` (the
 * argument) and the position t.yaml:3:COL. */
static void expect_error(const char *shape, const char *layer, const char *what)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "input: {shape: %s}\nlayers:\n  - %s\n",
             shape ? shape : "[6, 8, 3]", layer);
    const tfc_error err = tfc_test_model_error(yaml);
    if (!strstr(err.text, what) || !strstr(err.text, "t.yaml:3:"))
        fprintf(stderr, "\n%s: %s", layer, err.text);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, what));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "t.yaml:3:"));
}

static void test_argument_errors(void)
{
    expect_error(NULL, "Resizing: {height: 4, width: 4, interpolation: bicubic}",
                 "interpolation: bicubic is not supported");
    expect_error(NULL, "Resizing: {height: 4, width: 4, interpolation: lanczos3}",
                 "interpolation: lanczos3 is not supported");
    expect_error(NULL, "Resizing: {height: 4, width: 4, interpolation: cubic}", "cubic");
    expect_error(NULL, "Resizing: {height: 4, width: 4, crop_to_aspect_ratio: true, "
                 "pad_to_aspect_ratio: true}", "only one of pad_to_aspect_ratio and");
    expect_error(NULL, "Resizing: {height: 4, width: 9, antialias: true}",
                 "antialias: true is not supported where the image shrinks (6x8 to 4x9)");
    expect_error(NULL, "Resizing: {height: 4, width: 4, fill_mode: reflect}",
                 "Resizing.fill_mode: not supported");
    expect_error(NULL, "Resizing: {height: 0, width: 4}", "Resizing.height: expected an integer");
    expect_error(NULL, "Resizing: {width: 4}", "Resizing.height");
    expect_error(NULL, "Resizing: {height: 4, width: 4, data_format: channels_first}",
                 "data_format: channels_first is not supported");
    expect_error(NULL, "Resizing: {height: 4, width: 4, scale: 2}", "unknown key 'scale'");
    expect_error("[6, 8]", "Resizing: {height: 4, width: 4}",
                 "needs an input of shape (height, width, channels)");
    expect_error(NULL, "CenterCrop: {height: 4}", "CenterCrop.width");
    expect_error(NULL, "CenterCrop: {height: 4, width: 4, interpolation: nearest}",
                 "unknown key 'interpolation'");
    expect_error(NULL, "RandomCrop: {height: 4, width: 4, seed: -1}", "RandomCrop.seed");
    expect_error("[6, 8, 3, 2]", "RandomCrop: {height: 4, width: 4}",
                 "needs an input of shape (height, width, channels)");
    expect_error(NULL, "RandomBrightness: {factor: 1.5}", "factor: 1.5 is outside [-1, 1]");
    expect_error(NULL, "RandomBrightness: {factor: [0.1, 0.2, 0.3]}", "factor: expected");
    expect_error(NULL, "RandomBrightness: {factor: 0.2, value_range: [1]}",
                 "value_range: expected a pair");
    expect_error(NULL, "RandomBrightness: {factor: 0.2, data_format: channels_last}",
                 "unknown key 'data_format'");
    expect_error(NULL, "RandomBrightness: {}", "RandomBrightness.factor");
    static const char *const layers[] = {"Resizing: {height: 2, width: 2}",
                                         "CenterCrop: {height: 2, width: 2}",
                                         "RandomCrop: {height: 2, width: 2}"};
    for (int i = 0; i < 3; i++) { /* token ids are no image */
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [5, 5, 1], dtype: int32}\nlayers:\n"
                 "  - %s\n", layers[i]);
        const tfc_error err = tfc_test_model_error(yaml);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "takes float32 input, not token ids"));
    }
}

static void drop_crop_resize(tfc_backend_ops *ops)
{
    ops->crop_resize_forward = NULL, ops->crop_resize_backward = NULL;
    ops->brightness_forward = NULL, ops->brightness_backward = NULL;
}

/* A backend without the kernels (the CPU's table with the slots emptied) refuses each
 * layer at bind, naming it and the op. */
static void test_missing_kernel_refused(void)
{
    static const char *const layers[] = {"Resizing: {name: ly, height: 3, width: 5}",
                                         "CenterCrop: {name: ly, height: 3, width: 5}",
                                         "RandomCrop: {name: ly, height: 3, width: 5}"};
    for (int i = 0; i < 3; i++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [6, 6, 2]}\nlayers:\n  - %s\n", layers[i]);
        tfc_test_expect_refused(yaml, drop_crop_resize, "layer 'ly'",
                                "(op 'crop_resize_forward')");
    }
    tfc_test_expect_refused("input: {shape: [6, 6, 2]}\nlayers:\n"
                            "  - RandomBrightness: {name: ly, factor: 0.1}\n",
                            drop_crop_resize, "layer 'ly'", "(op 'brightness_forward')");
}

TFC_TEST_MAIN("preprocess", {"keras_parity", test_keras_parity},
              {"random_crop_windows", test_random_crop_windows},
              {"random_crop_layer", test_random_crop_layer},
              {"brightness", test_brightness},
              {"argument_errors", test_argument_errors},
              {"missing_kernel_refused", test_missing_kernel_refused})
