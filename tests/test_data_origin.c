/* Where a row of a batch came from (tfc_pipeline_describe_row): every row of every batch
 * names the record it was read from, through shuffle, repeat, map, batch, padded_batch,
 * bucket_by_sequence_length, cache and prefetch, with the labels' own file for the labels;
 * a batch restored by value from saved state says it does not know. And the label set read
 * ahead (tfc_pipeline_find_label_outside): the first record outside, only where every
 * record's label reaches the end unchanged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"
#include "testutil.h"

enum { N = 24 };

/* x.npy: N records of 3 float32 features, the first the record's index; y.npy: labels
 * i % 4, record `bad` (>= 0) labelled 9. */
static tfc_pipeline *npy_pipeline(int bad, const char *const *stages, int nstages)
{
    float x[N * 3];
    int32_t y[N];
    for (int i = 0; i < N; i++) {
        x[i * 3] = (float)i;
        x[i * 3 + 1] = x[i * 3 + 2] = 0.5f;
        y[i] = i == bad ? 9 : i % 4;
    }
    tfc_error err;
    tfc_error_clear(&err);
    tfc_tensor tx = {TFC_F32, {.ndim = 2, .dim = {N, 3}}, x, -1};
    tfc_tensor ty = {TFC_I32, {.ndim = 1, .dim = {N}}, y, -1};
    CU_ASSERT_EQUAL_FATAL(tfc_npy_write(tfc_test_path("x.npy"), &tx, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_write(tfc_test_path("y.npy"), &ty, &err), TFC_OK);
    tfc_data_options opt = {.seed = 5};
    char xp[1024], yp[1024];
    snprintf(xp, sizeof xp, "%s", tfc_test_path("x.npy"));
    snprintf(yp, sizeof yp, "%s", tfc_test_path("y.npy"));
    tfc_pipeline *p = tfc_pipeline_from_npy(xp, yp, &opt, &err);
    if (!p) printf("\n%s\n", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    for (int i = 0; i < nstages; i++) {
        CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, stages[i], &err), TFC_OK);
        if (err.count) printf("\n%s: %s\n", stages[i], err.text);
    }
    return p;
}

/* Reads `batches` batches: each row's name is "x.npy record K" (labels: "y.npy record K")
 * for K its first feature; returns the rows seen, or -1 when one was not known. */
static int check_rows(tfc_pipeline *p, int batches)
{
    int rows = 0;
    tfc_error err;
    tfc_error_clear(&err);
    for (int k = 0; k < batches; k++) {
        tfc_batch b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        if (b.end) break;
        int64_t n = b.features.shape.dim[0], per = tfc_shape_numel(&b.features.shape) / n;
        for (int64_t r = 0; r < n; r++, rows++) {
            char got[512], want[64];
            if (!tfc_pipeline_describe_row(p, 0, r, got, sizeof got)) return -1;
            int rec = (int)((const float *)b.features.data)[r * per];
            snprintf(want, sizeof want, "x.npy record %d", rec);
            CU_ASSERT(strstr(got, want) != NULL);
            if (!strstr(got, want)) printf("\nrow %lld: %s, want %s\n", (long long)r, got, want);
            CU_ASSERT(tfc_pipeline_describe_row(p, 1, r, got, sizeof got) == 1);
            snprintf(want, sizeof want, "y.npy record %d", rec);
            CU_ASSERT(strstr(got, want) != NULL);
        }
    }
    return rows;
}

static void test_rows_named(void)
{
    const char *plain[] = {"shuffle: {buffer_size: 10}", "repeat: {count: 2}",
                           "map: {op: scale, factor: 1}", "batch: {batch_size: 5}",
                           "cache: {}", "prefetch: {buffer_size: 2}"};
    tfc_pipeline *p = npy_pipeline(-1, plain, 6);
    CU_ASSERT_EQUAL(check_rows(p, 100), 2 * N);
    tfc_pipeline_reset(p); /* the cache replays its batches with their rows */
    CU_ASSERT_EQUAL(check_rows(p, 100), 2 * N);
    tfc_pipeline_free(p);
    const char *padded[] = {"shuffle: {buffer_size: 6}", "padded_batch: {batch_size: 4}"};
    p = npy_pipeline(-1, padded, 2);
    CU_ASSERT_EQUAL(check_rows(p, 100), N);
    tfc_pipeline_free(p);
    const char *bucket[] = {
        "bucket_by_sequence_length: {boundaries: [2, 5], batch_sizes: [3, 3, 3]}"};
    p = npy_pipeline(-1, bucket, 1);
    CU_ASSERT_EQUAL(check_rows(p, 100), N);
    tfc_pipeline_free(p);
    /* an unbatched element is its own row 0 */
    p = npy_pipeline(-1, NULL, 0);
    tfc_batch b;
    tfc_error err;
    tfc_error_clear(&err);
    char got[512];
    CU_ASSERT_EQUAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT(tfc_pipeline_describe_row(p, 0, 0, got, sizeof got) &&
              strstr(got, "x.npy record 0"));
    CU_ASSERT(!tfc_pipeline_describe_row(p, 0, 1, got, sizeof got) && !got[0]);
    tfc_pipeline_free(p);
}

/* Batches prefetched when the state was saved (up to its buffer_size) come back by value,
 * without their rows: not known (0, ""); the ones made after the restore are named. */
static void test_restored_batches(void)
{
    const char *stages[] = {"repeat: {}", "batch: {batch_size: 4}", "prefetch: {buffer_size: 2}"};
    tfc_pipeline *p = npy_pipeline(-1, stages, 3);
    CU_ASSERT_EQUAL(check_rows(p, 2), 8);
    void *blob;
    size_t len;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_save_state(p, &blob, &len, &err), TFC_OK);
    tfc_pipeline *q = npy_pipeline(-1, stages, 3);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_restore_state(q, blob, len, &err), TFC_OK);
    free(blob);
    int unknown = 0, named = 0;
    for (int k = 0; k < 8; k++) {
        int r = check_rows(q, 1);
        unknown += r < 0;
        named += r == 4;
    }
    CU_ASSERT(unknown <= 2 && named == 8 - unknown); /* (how many were buffered is timing) */
    tfc_pipeline_free(p);
    tfc_pipeline_free(q);
}

/* The label set read ahead: record 13's label 9 is found where every record's label reaches
 * the end, named by the labels file; behind a filter or a take it is not looked for. */
static void test_label_outside(void)
{
    const char *plain[] = {"shuffle: {buffer_size: 10}", "repeat: {}", "batch: {batch_size: 5}",
                           "prefetch: {buffer_size: 2}"};
    tfc_pipeline *p = npy_pipeline(13, plain, 4);
    char at[512];
    int64_t v = 0;
    CU_ASSERT(tfc_pipeline_find_label_outside(p, 4, &v, at, sizeof at) == 1 && v == 9 &&
              strstr(at, "y.npy record 13"));
    CU_ASSERT(tfc_pipeline_find_label_outside(p, 10, &v, at, sizeof at) == 0);
    tfc_pipeline_free(p);
    const char *filtered[] = {"filter: {labels: [0, 1, 2, 3]}", "batch: {batch_size: 5}"};
    p = npy_pipeline(13, filtered, 2);
    CU_ASSERT(tfc_pipeline_find_label_outside(p, 4, &v, at, sizeof at) == 0);
    tfc_pipeline_free(p);
    const char *taken[] = {"take: {count: 10}", "batch: {batch_size: 5}"};
    p = npy_pipeline(13, taken, 2);
    CU_ASSERT(tfc_pipeline_find_label_outside(p, 4, &v, at, sizeof at) == 0);
    tfc_pipeline_free(p);
    const char *rewritten[] = {"map: {op: scale, factor: 1, component: labels}"};
    p = npy_pipeline(13, rewritten, 1);
    CU_ASSERT(tfc_pipeline_find_label_outside(p, 4, &v, at, sizeof at) == 0);
    tfc_pipeline_free(p);
}

TFC_TEST_MAIN("data_origin", {"rows_named", test_rows_named},
              {"restored_batches", test_restored_batches},
              {"label_outside", test_label_outside})
