/* ZeroPadding3D, Cropping3D and UpSampling3D (src/layers/padding3d.c, upsampling3d.c): Keras 3
 * parity from the fixtures tests/ref/keras_volume.py wrote (tests/ref/volume/: outputs, the
 * input's and weights' gradients; every form of the amounts, the defaults, the factors with
 * and without the depth pass), a hand-worked volume, and argument errors. Run from the
 * repository's root. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "gradcheck.h"
#include "graph/model.h"
#include "kerasref.h"
#include "testutil.h"

static void test_keras_parity(void)
{
    static const tfc_keras_parity p = {.dir = "volume", .tol = 1e-5, .all_grads = 1};
    static const char *const names[] = {"pad_crop", "upsampling", NULL};
    tfc_test_keras_cases(&p, names);
}

/* The forward pass of `yaml` on one example x, into y (n floats, checked against want) */
static void check_forward(const char *yaml, const float *x, const float *want, int n)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *m = tfc_test_model(yaml);
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(m && tfc_model_bind_inference(m, be, 1, &err) == TFC_OK);
    TFC_ASSERT(tfc_model_forward(m, x, 1, 0, 1, 0, &err) == TFC_OK);
    float *y = calloc((size_t)n, sizeof *y);
    tfc_model_get_output(m, y);
    for (int i = 0; i < n; i++) {
        if (y[i] != want[i]) fprintf(stderr, "\n%s: y[%d] = %g, want %g\n", yaml, i, y[i],
                                     want[i]);
        CU_ASSERT_EQUAL(y[i], want[i]);
    }
    free(y);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* A (2, 2, 1, 1) volume x = 1, 2 / 3, 4 (depth slices): padded by one at the back of the
 * depth and the top of the height, each cell then at [d][h + 1]; upsampled by (2, 1, 2); and
 * the padding cropped back off */
static void test_values(void)
{
    const float x[4] = {1, 2, 3, 4};
    const float pad[12] = {0, 1, 2, 0, 3, 4, 0, 0, 0};
    check_forward("input: {shape: [2, 2, 1, 1]}\nlayers:\n"
                  "  - ZeroPadding3D: {padding: [[0, 1], [1, 0], 0]}\n", x, pad, 9);
    const float up[16] = {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4};
    check_forward("input: {shape: [2, 2, 1, 1]}\nlayers:\n"
                  "  - UpSampling3D: {size: [2, 1, 2]}\n", x, up, 16);
    check_forward("input: {shape: [2, 2, 1, 1]}\nlayers:\n"
                  "  - ZeroPadding3D: {padding: [[0, 1], [1, 0], 0]}\n"
                  "  - Cropping3D: {cropping: [[0, 1], [1, 0], [0, 0]]}\n", x, x, 4);
}

static void expect_error(const char *layer, const char *what)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "input: {shape: [3, 4, 5, 2]}\nlayers:\n"
             "  - Dense: {name: a, units: 2}\n%s", layer);
    const tfc_error err = tfc_test_model_error(yaml);
    if (!strstr(err.msg, what) || err.line != 4)
        fprintf(stderr, "\n%s-> %s:%d:%d: %s\n", yaml, err.file, err.line, err.col, err.msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, what));
    CU_ASSERT_STRING_EQUAL(err.file, "t.yaml"); /* positioned: FILE:LINE:COL */
    CU_ASSERT_EQUAL(err.line, 4);
    CU_ASSERT(err.col > 0);
}

static void test_argument_errors(void)
{
    expect_error("  - ZeroPadding3D: {padding: [1, 2]}\n", "expected an int, [depth, height, "
                 "width]");
    expect_error("  - ZeroPadding3D: {padding: [1, [2, 3, 4], 1]}\n",
                 "expected an int or a pair [before, after]");
    expect_error("  - ZeroPadding3D: {padding: -1}\n", "expected an integer in [0, 1048576]");
    expect_error("  - Cropping3D: {cropping: [[1, 1], 2, [3, 2]]}\n",
                 "cropping [[1, 1], [2, 2], [3, 2]] leaves nothing of the input (3, 4, 5, 2)");
    expect_error("  - Cropping3D: {cropping: 1, data_format: channels_first}\n", "data_format");
    expect_error("  - UpSampling3D: {size: [2, 2]}\n", "size: expected an int or three ints");
    expect_error("  - UpSampling3D: {size: 0}\n", "expected an integer in [1, 4096]");
    expect_error("  - UpSampling3D: {interpolation: bilinear}\n", "unknown key 'interpolation'");
    const tfc_error err = tfc_test_model_error("input: {shape: [4, 5, 2]}\nlayers:\n"
                                               "  - ZeroPadding3D: {}\n");
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "needs a float volume of shape (depth, height, "
                                           "width, channels), got (4, 5, 2)"));
}

TFC_TEST_MAIN("volume", {"keras_parity", test_keras_parity}, {"values", test_values},
              {"argument_errors", test_argument_errors})
