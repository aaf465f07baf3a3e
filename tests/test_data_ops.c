/* Map ops and the YAML filter by value, each expected value derived by hand from docs/data.md
 * (not read back from the implementation): cast's truncation, saturation and NaN, one_hot and
 * its out-of-range error, pad/truncate at either side, filter by labels and by length,
 * vertical flip, and random_crop's padding reaching every offset. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"
#include "testutil.h"

/* `n` elements of features float32 (n, per...) from `f` and int32 labels from `l`. */
static tfc_pipeline *tensors(const float *f, int n, const int64_t *per, int nper,
                             const int32_t *l)
{
    tfc_tensor tf = {TFC_F32, {.ndim = 1 + nper, .dim = {n}}, (void *)f, -1};
    for (int i = 0; i < nper; i++) tf.shape.dim[1 + i] = per[i];
    tfc_tensor tl = {TFC_I32, {.ndim = 1, .dim = {n}}, (void *)l, -1};
    tfc_data_options opt = {.seed = 3};
    tfc_error err;
    tfc_error_clear(&err);
    tfc_pipeline *p = tfc_pipeline_from_tensors(&tf, &tl, &opt, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    return p;
}

static void add(tfc_pipeline *p, const char *stage)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_status st = tfc_pipeline_add_yaml(p, stage, &err);
    if (st) printf("\n%s: %s\n", stage, err.text);
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

static void test_cast_truncates_saturates(void)
{
    /* docs: float -> int truncates toward zero and saturates (NaN -> 0). */
    const float f[2][6] = {{-1.7f, 2.9f, NAN, 1e10f, -1e10f, -0.5f},
                           {127.9f, -128.9f, 255.5f, -3.5f, INFINITY, -INFINITY}};
    const int32_t l[2] = {0, 1};
    const int64_t per[1] = {6};
    tfc_pipeline *p = tensors(&f[0][0], 2, per, 1, l);
    add(p, "map: {op: cast, dtype: int8}");
    const int8_t want8[2][6] = {{-1, 2, 0, 127, -128, 0}, {127, -128, 127, -3, 127, -128}};
    for (int e = 0; e < 2; e++) {
        tfc_batch b = next(p);
        CU_ASSERT_EQUAL_FATAL(b.features.dtype, TFC_I8);
        CU_ASSERT_EQUAL(memcmp(b.features.data, want8[e], 6), 0);
    }
    CU_ASSERT(next(p).end);
    tfc_pipeline_free(p);

    p = tensors(&f[0][0], 2, per, 1, l);
    add(p, "map: {op: cast, dtype: uint8}");
    const uint8_t wantu[2][6] = {{0, 2, 0, 255, 0, 0}, {127, 0, 255, 0, 255, 0}};
    for (int e = 0; e < 2; e++) {
        tfc_batch b = next(p);
        CU_ASSERT_EQUAL_FATAL(b.features.dtype, TFC_U8);
        CU_ASSERT_EQUAL(memcmp(b.features.data, wantu[e], 6), 0);
    }
    tfc_pipeline_free(p);

    /* int32: NaN is 0 (a plain C cast would give INT32_MIN on x86), infinities saturate. */
    p = tensors(&f[0][0], 2, per, 1, l);
    add(p, "map: {op: cast, dtype: int32}");
    const int32_t want32[2][6] = {{-1, 2, 0, INT32_MAX, INT32_MIN, 0},
                                  {127, -128, 255, -3, INT32_MAX, INT32_MIN}};
    for (int e = 0; e < 2; e++) {
        tfc_batch b = next(p);
        CU_ASSERT_EQUAL_FATAL(b.features.dtype, TFC_I32);
        CU_ASSERT_EQUAL(memcmp(b.features.data, want32[e], sizeof want32[e]), 0);
    }
    tfc_pipeline_free(p);
}

static void test_one_hot_values_and_error(void)
{
    const float f[2] = {0, 0};
    const int32_t l[2] = {2, 0};
    tfc_pipeline *p = tensors(f, 2, NULL, 0, l);
    add(p, "map: {op: one_hot, depth: 3}");
    const float want[2][3] = {{0, 0, 1}, {1, 0, 0}};
    for (int e = 0; e < 2; e++) {
        tfc_batch b = next(p);
        CU_ASSERT_EQUAL_FATAL(b.labels.dtype, TFC_F32);
        CU_ASSERT_EQUAL(b.labels.shape.ndim, 1);
        CU_ASSERT_EQUAL(b.labels.shape.dim[0], 3);
        CU_ASSERT_EQUAL(memcmp(b.labels.data, want[e], sizeof want[e]), 0);
    }
    tfc_pipeline_free(p);

    /* An index outside [0, depth): an error naming the record (the second, index 1). */
    const int32_t bad[3] = {1, 3, 0};
    const float f3[3] = {0, 0, 0};
    p = tensors(f3, 3, NULL, 0, bad);
    add(p, "map: {op: one_hot, depth: 3}");
    next(p);
    tfc_batch b;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_pipeline_next(p, &b, &err), TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "record 1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "3"));
    if (!strstr(err.text, "record 1") || getenv("TFC_VERBOSE")) printf("\n%s\n", err.text);
    tfc_pipeline_free(p);
}

/* The features of the first element after `stage` on the one element [1, 2, 3]. */
static void expect_seq(const char *stage, const float *want, int n)
{
    const float f[3] = {1, 2, 3};
    const int32_t l[1] = {0};
    const int64_t per[1] = {3};
    tfc_pipeline *p = tensors(f, 1, per, 1, l);
    add(p, stage);
    tfc_batch b = next(p);
    CU_ASSERT_EQUAL(b.features.shape.dim[0], n);
    int ok = b.features.shape.dim[0] == n &&
             memcmp(b.features.data, want, (size_t)n * sizeof *want) == 0;
    if (!ok) printf("\n%s: unexpected features\n", stage);
    CU_ASSERT(ok);
    tfc_pipeline_free(p);
}

static void test_pad_truncate_sides(void)
{
    expect_seq("map: {op: pad, length: 5, value: 9}", (const float[]){1, 2, 3, 9, 9}, 5);
    expect_seq("map: {op: pad, length: 5, value: 9, side: start}", (const float[]){9, 9, 1, 2, 3}, 5);
    /* truncate (default true) cuts at the padding side */
    expect_seq("map: {op: pad, length: 2, side: start}", (const float[]){2, 3}, 2);
    expect_seq("map: {op: pad, length: 2}", (const float[]){1, 2}, 2);
    expect_seq("map: {op: pad, length: 2, truncate: false}", (const float[]){1, 2, 3}, 3);
    expect_seq("map: {op: truncate, length: 2}", (const float[]){1, 2}, 2);
    expect_seq("map: {op: truncate, length: 2, side: start}", (const float[]){2, 3}, 2);
    expect_seq("map: {op: truncate, length: 5, side: start}", (const float[]){1, 2, 3}, 3);
}

static void test_filter_labels_and_length(void)
{
    const float f[5] = {10, 11, 12, 13, 14};
    const int32_t l[5] = {0, 1, 2, 3, 1};
    tfc_pipeline *p = tensors(f, 5, NULL, 0, l);
    add(p, "filter: {labels: [1, 3]}");
    const float want[3] = {11, 13, 14};
    for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(*(float *)next(p).features.data, want[i]);
    CU_ASSERT(next(p).end);
    tfc_pipeline_free(p);

    /* Lines of 1..6 bytes; min 2 and max 4 keep lengths 2, 3, 4 (both ends included). */
    tfc_test_write("lines.txt", "a\nbb\nccc\ndddd\neeeee\nffffff\n", -1);
    tfc_data_options o = {.key = "data.train", .base_dir = tfc_test_tmpdir(), .seed = 1};
    tfc_error err;
    tfc_error_clear(&err);
    p = tfc_pipeline_from_yaml("{type: text, files: lines.txt}", &o, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    add(p, "filter: {min_length: 2, max_length: 4}");
    for (int len = 2; len <= 4; len++) {
        tfc_batch b = next(p);
        CU_ASSERT_FATAL(!b.end);
        CU_ASSERT_EQUAL(b.features.shape.dim[0], len);
        CU_ASSERT_EQUAL(((char *)b.features.data)[0], 'a' + len - 1);
    }
    CU_ASSERT(next(p).end);
    tfc_pipeline_free(p);
}

static void test_vertical_flip(void)
{
    /* (H 3, W 2, C 1): rows reversed, each row's order kept. */
    const float f[6] = {1, 2, 3, 4, 5, 6};
    const int32_t l[1] = {0};
    const int64_t per[3] = {3, 2, 1};
    tfc_pipeline *p = tensors(f, 1, per, 3, l);
    add(p, "map: {op: random_flip, mode: vertical, probability: 1}");
    const float want[6] = {5, 6, 3, 4, 1, 2};
    tfc_batch b = next(p);
    CU_ASSERT_EQUAL(memcmp(b.features.data, want, sizeof want), 0);
    tfc_pipeline_free(p);
}

static void test_random_crop_offsets(void)
{
    /* A 4x4 image of values 1..16, padding 2, crop 4: the padded 8x8 image has 5 x 5 = 25
     * window offsets (dy, dx), each uniform; every window overlaps the image, so a nonzero
     * pixel value v = 1 + 4y + x at window (i, j) tells dy = y + 2 - i. With 25 equally
     * likely offsets, 500 draws miss one with probability < 25 (24/25)^500 ~ 3e-8. */
    float f[16];
    for (int i = 0; i < 16; i++) f[i] = (float)(i + 1);
    const int32_t l[1] = {0};
    const int64_t per[3] = {4, 4, 1};
    tfc_pipeline *p = tensors(f, 1, per, 3, l);
    add(p, "map: {op: random_crop, size: 4, padding: 2}");
    add(p, "repeat: {count: 500}");
    int seen[5][5] = {{0}}, n = 0, bad = 0;
    for (;;) {
        tfc_batch b = next(p);
        if (b.end) break;
        n++;
        const float *c = b.features.data;
        int dy = -1, dx = -1, zeros = 0;
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) {
                float v = c[i * 4 + j];
                if (v == 0) { zeros++; continue; }
                int y = ((int)v - 1) / 4, x = ((int)v - 1) % 4;
                if (dy < 0) dy = y + 2 - i, dx = x + 2 - j;
                /* every pixel agrees on the offset: a shifted copy, not a shuffle */
                bad += dy != y + 2 - i || dx != x + 2 - j;
            }
        /* the zeros are exactly the padding inside the window */
        int inside = 0;
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                inside += dy + i >= 2 && dy + i < 6 && dx + j >= 2 && dx + j < 6;
        bad += zeros != 16 - inside;
        if (dy >= 0 && dy < 5 && dx >= 0 && dx < 5) seen[dy][dx]++;
        else bad++;
    }
    CU_ASSERT_EQUAL(n, 500);
    CU_ASSERT_EQUAL(bad, 0);
    int offsets = 0;
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 5; j++) offsets += seen[i][j] > 0;
    CU_ASSERT_EQUAL(offsets, 25);
    tfc_pipeline_free(p);
}

TFC_TEST_MAIN("data_ops", {"cast_truncates_saturates", test_cast_truncates_saturates},
              {"one_hot_values_and_error", test_one_hot_values_and_error},
              {"pad_truncate_sides", test_pad_truncate_sides},
              {"filter_labels_and_length", test_filter_labels_and_length},
              {"vertical_flip", test_vertical_flip},
              {"random_crop_offsets", test_random_crop_offsets})
