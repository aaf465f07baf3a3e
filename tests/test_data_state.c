/* Saving and restoring the pipeline position: for pipelines with shuffles (lazy and eager),
 * parallel maps, caches, filters, take/skip, repeats, batches and prefetch, the elements
 * read after restoring a state saved at element k into a fresh pipeline equal elements k...
 * of an uninterrupted run, their rows named by the same records. A state of the earlier
 * format restores. Corrupt, truncated and foreign state blobs are errors. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/rng.h"
#include "data/data.h"
#include "testutil.h"

#define MAXV 4096

static tfc_status jitter(tfc_element *e, const tfc_map_ctx *ctx, void *user, tfc_error *err)
{
    int32_t *x = e->comp[TFC_COMP_FEATURES].data;
    *x = *x * 1000 + (int32_t)(tfc_rng_uniform(ctx->key, 0, 0) * 1000);
    return TFC_OK;
}

/* The identity, a millisecond late: background threads fall behind the consumer. */
static tfc_status slow(tfc_element *e, const tfc_map_ctx *ctx, void *user, tfc_error *err)
{
    nanosleep(&(struct timespec){0, 1000000}, NULL);
    return TFC_OK;
}

static int keep_even(const tfc_element *e, void *user)
{
    return *(int32_t *)e->comp[TFC_COMP_FEATURES].data % 2 == 0;
}

/* The pipelines under test, by number. */
static tfc_pipeline *build(int kind)
{
    enum { N = 60 };
    int32_t f[N];
    for (int i = 0; i < N; i++) f[i] = i;
    tfc_tensor tf = {TFC_I32, {.ndim = 1, .dim = {N}}, f, -1};
    tfc_data_options opt = {.seed = 11};
    tfc_error err;
    tfc_error_clear(&err);
    tfc_pipeline *p = tfc_pipeline_from_tensors(&tf, NULL, &opt, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    tfc_status st = TFC_OK;
    switch (kind) {
    case 0: /* lazy shuffle of ids, random map, repeat, batch, prefetch */
        st |= tfc_pipeline_shuffle(p, 20, -1, 1, &err);
        st |= tfc_pipeline_map(p, jitter, NULL, NULL, 1, &err);
        st |= tfc_pipeline_repeat(p, -1, &err);
        st |= tfc_pipeline_batch(p, 7, 0, &err);
        st |= tfc_pipeline_prefetch(p, 2, &err);
        break;
    case 1: /* parallel map feeding an eager shuffle */
        st |= tfc_pipeline_map(p, jitter, NULL, NULL, 4, &err);
        st |= tfc_pipeline_shuffle(p, 15, -1, 1, &err);
        st |= tfc_pipeline_repeat(p, 3, &err);
        st |= tfc_pipeline_batch(p, 5, 0, &err);
        break;
    case 2: /* filter, then a shuffle that must keep elements */
        st |= tfc_pipeline_filter(p, keep_even, NULL, &err);
        st |= tfc_pipeline_shuffle(p, 10, -1, 1, &err);
        st |= tfc_pipeline_repeat(p, -1, &err);
        st |= tfc_pipeline_batch(p, 4, 0, &err);
        break;
    case 3: /* shuffling batches: the buffer is saved by value */
        st |= tfc_pipeline_batch(p, 3, 0, &err);
        st |= tfc_pipeline_shuffle(p, 4, -1, 1, &err);
        st |= tfc_pipeline_repeat(p, -1, &err);
        st |= tfc_pipeline_prefetch(p, 3, &err);
        break;
    case 4: /* cache after a random map, shuffled afterwards */
        st |= tfc_pipeline_map(p, jitter, NULL, NULL, 1, &err);
        st |= tfc_pipeline_cache(p, &err);
        st |= tfc_pipeline_repeat(p, 4, &err);
        st |= tfc_pipeline_shuffle(p, 8, -1, 1, &err);
        break;
    case 5: /* skip, take, repeat, parallel map at the end, prefetch */
        st |= tfc_pipeline_skip(p, 3, &err);
        st |= tfc_pipeline_take(p, 40, &err);
        st |= tfc_pipeline_shuffle(p, 40, 5, 1, &err);
        st |= tfc_pipeline_repeat(p, -1, &err);
        st |= tfc_pipeline_map(p, jitter, NULL, NULL, 3, &err);
        st |= tfc_pipeline_batch(p, 9, 1, &err);
        st |= tfc_pipeline_prefetch(p, 1, &err);
        break;
    case 7: /* a slow parallel map under a batch and a prefetch */
        st |= tfc_pipeline_shuffle(p, 10, -1, 1, &err);
        st |= tfc_pipeline_map(p, slow, NULL, NULL, 2, &err);
        st |= tfc_pipeline_batch(p, 2, 0, &err);
        st |= tfc_pipeline_prefetch(p, 3, &err);
        break;
    case 8: /* a slow map in the consumer's thread under a prefetch */
        st |= tfc_pipeline_map(p, slow, NULL, NULL, 1, &err);
        st |= tfc_pipeline_repeat(p, -1, &err);
        st |= tfc_pipeline_prefetch(p, 4, &err);
        break;
    case 6: /* shard of a shuffled endless stream before a random map, batch, prefetch */
        st |= tfc_pipeline_shuffle(p, 20, -1, 1, &err);
        st |= tfc_pipeline_repeat(p, -1, &err);
        st |= tfc_pipeline_shard(p, 3, 1, &err);
        st |= tfc_pipeline_map(p, jitter, NULL, NULL, 2, &err);
        st |= tfc_pipeline_batch(p, 4, 0, &err);
        st |= tfc_pipeline_prefetch(p, 2, &err);
        break;
    }
    CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
    return p;
}

/* Reads up to `elements` elements, appending their values (and a -1 after each element,
 * so batch boundaries count) to v; returns the values written. */
static int read_some(tfc_pipeline *p, int elements, int32_t *v, int cap)
{
    int n = 0;
    tfc_error err;
    tfc_error_clear(&err);
    for (int k = 0; k < elements; k++) {
        tfc_batch b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        if (b.end) break;
        int64_t m = tfc_shape_numel(&b.features.shape);
        for (int64_t i = 0; i < m && n < cap; i++) v[n++] = ((int32_t *)b.features.data)[i];
        if (n < cap) v[n++] = -1;
    }
    return n;
}

static int count_elements(const int32_t *v, int n)
{
    int e = 0;
    for (int i = 0; i < n; i++) e += v[i] == -1;
    return e;
}

static void check_resume(int kind)
{
    enum { TOTAL = 60 };
    static int32_t ref[MAXV], got[MAXV];
    tfc_pipeline *p = build(kind);
    int nref = read_some(p, TOTAL, ref, MAXV);
    tfc_pipeline_free(p);
    int total = count_elements(ref, nref);
    CU_ASSERT(total > 10);
    int cuts[] = {0, 1, 2, 5, 9, 13, 17, 25, 33, 47};
    for (size_t c = 0; c < sizeof cuts / sizeof *cuts; c++) {
        int k = cuts[c];
        if (k > total) continue;
        p = build(kind);
        int n = read_some(p, k, got, MAXV);
        void *blob;
        size_t len;
        tfc_error err;
        tfc_error_clear(&err);
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_save_state(p, &blob, &len, &err), TFC_OK);
        /* The saved pipeline itself goes on undisturbed. */
        n += read_some(p, 3, got + n, MAXV - n);
        tfc_pipeline_free(p);
        p = build(kind);
        read_some(p, 4, got + n, MAXV - n); /* a position to be overwritten */
        CU_ASSERT_EQUAL(tfc_pipeline_restore_state(p, blob, len, &err), TFC_OK);
        int m = read_some(p, total - k, got, MAXV);
        tfc_pipeline_free(p);
        free(blob);
        /* got now holds elements k.. of the restored run: compare with the reference. */
        int start = 0, e = 0;
        while (e < k && start < nref) e += ref[start++] == -1;
        CU_ASSERT_EQUAL(m, nref - start);
        if (m == nref - start) CU_ASSERT(memcmp(got, ref + start, (size_t)m * sizeof *got) == 0);
    }
}

/* A state depends on the position alone: saved at once after the k-th element (the
 * threads still reading) and saved after the threads had time to fill their buffers, it is
 * the same bytes (a snapshot's bits do not depend on timing). */
static void test_state_independent_of_timing(void)
{
    int kinds[] = {7, 8, 0, 5, 6};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
        for (int k = 1; k <= 9; k += 4) {
            static int32_t v[MAXV];
            void *blob[2];
            size_t len[2];
            for (int late = 0; late < 2; late++) {
                tfc_pipeline *p = build(kinds[i]);
                read_some(p, k, v, MAXV);
                if (late) nanosleep(&(struct timespec){0, 60000000}, NULL);
                tfc_error err;
                tfc_error_clear(&err);
                CU_ASSERT_EQUAL_FATAL(tfc_pipeline_save_state(p, &blob[late], &len[late], &err),
                                      TFC_OK);
                tfc_pipeline_free(p);
            }
            int same = len[0] == len[1] && !memcmp(blob[0], blob[1], len[0]);
            if (!same) printf("\npipeline %d, element %d: the states differ\n", kinds[i], k);
            CU_ASSERT(same);
            free(blob[0]);
            free(blob[1]);
        }
}

static void test_resume_lazy_shuffle_prefetch(void) { check_resume(0); }
static void test_resume_parallel_map_eager_shuffle(void) { check_resume(1); }
static void test_resume_filter_shuffle(void) { check_resume(2); }
static void test_resume_shuffled_batches(void) { check_resume(3); }
static void test_resume_cache(void) { check_resume(4); }
static void test_resume_shard(void) { check_resume(6); }
static void test_resume_skip_take_parallel(void) { check_resume(5); }

/* Appends to `text` the record of every row (tfc_pipeline_describe_row; "?" when not known)
 * of up to `elements` elements, "|" after each element; returns the elements read. */
static int read_rows(tfc_pipeline *p, int elements, char *text, size_t cap)
{
    tfc_error err;
    tfc_error_clear(&err);
    int k = 0;
    for (; k < elements; k++) {
        tfc_batch b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        if (b.end) break;
        int64_t rows = tfc_pipeline_element_spec(p)->batched ? b.features.shape.dim[0] : 1;
        for (int64_t r = 0; r < rows; r++) {
            char at[256];
            size_t used = strlen(text);
            int known = tfc_pipeline_describe_row(p, TFC_COMP_FEATURES, r, at, sizeof at);
            snprintf(text + used, cap - used, "%s,", known ? at : "?");
        }
        size_t used = strlen(text);
        snprintf(text + used, cap - used, "|");
    }
    return k;
}

/* A data error right after a resume names its record as in the uninterrupted run: the
 * batches a state holds by value (shuffled batches, a prefetch buffer) keep the records of
 * their rows. */
static void test_resume_keeps_row_names(void)
{
    enum { TOTAL = 30, CAP = 1 << 16 };
    static char ref[CAP], got[CAP];
    static const int kinds[] = {0, 3, 5, 6};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        ref[0] = 0;
        tfc_pipeline *p = build(kinds[i]);
        CU_ASSERT_EQUAL(read_rows(p, TOTAL, ref, CAP), TOTAL);
        tfc_pipeline_free(p);
        CU_ASSERT_PTR_NULL(strchr(ref, '?')); /* every row of the uninterrupted run named */
        for (int k = 1; k < TOTAL; k += 4) {
            got[0] = 0;
            p = build(kinds[i]);
            read_rows(p, k, got, CAP);
            void *blob;
            size_t len;
            tfc_error err;
            tfc_error_clear(&err);
            CU_ASSERT_EQUAL_FATAL(tfc_pipeline_save_state(p, &blob, &len, &err), TFC_OK);
            tfc_pipeline_free(p);
            p = build(kinds[i]);
            CU_ASSERT_EQUAL(tfc_pipeline_restore_state(p, blob, len, &err), TFC_OK);
            free(blob);
            read_rows(p, TOTAL - k, got, CAP);
            tfc_pipeline_free(p);
            CU_ASSERT_STRING_EQUAL(got, ref);
        }
    }
}

/* A state of the format before row records (version 1, written by commit 6b6dce1 from
 * build(3) after 5 elements, tests/ref/data_state/v1_batches.state) still restores: the
 * elements are those of the uninterrupted run, the buffered batches' rows not named. */
static void test_version1_state(void)
{
    enum { TOTAL = 30 };
    static int32_t ref[MAXV], got[MAXV];
    tfc_pipeline *p = build(3);
    int nref = read_some(p, TOTAL, ref, MAXV);
    tfc_pipeline_free(p);
    size_t len = 0;
    char *blob = tfc_test_read("tests/ref/data_state/v1_batches.state", &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(blob);
    CU_ASSERT_EQUAL(((const unsigned char *)blob)[8], 1); /* the version: 1 */
    p = build(3);
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_pipeline_restore_state(p, blob, len, &err), TFC_OK);
    free(blob);
    int m = read_some(p, TOTAL - 5, got, MAXV);
    tfc_pipeline_free(p);
    int start = 0, e = 0;
    while (e < 5 && start < nref) e += ref[start++] == -1;
    CU_ASSERT_EQUAL(m, nref - start);
    if (m == nref - start) CU_ASSERT(memcmp(got, ref + start, (size_t)m * sizeof *got) == 0);
}

static void test_bad_blobs(void)
{
    tfc_pipeline *p = build(0);
    int32_t v[256];
    read_some(p, 5, v, 256);
    void *blob;
    size_t len;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_save_state(p, &blob, &len, &err), TFC_OK);
    /* Every truncation is refused. */
    for (size_t cut = 0; cut < len; cut++) {
        tfc_error_clear(&err);
        CU_ASSERT_EQUAL(tfc_pipeline_restore_state(p, blob, cut, &err), TFC_ERR_FORMAT);
    }
    /* Random corruption never crashes; the pipeline still works afterwards. */
    unsigned char *copy = malloc(len);
    for (int t = 0; t < 2000; t++) {
        memcpy(copy, blob, len);
        for (int k = 0; k < 1 + t % 4; k++) {
            uint32_t r = tfc_philox(99, (uint64_t)t, (uint64_t)k).v[0];
            copy[r % len] ^= (unsigned char)(1u << (r >> 29));
        }
        tfc_error_clear(&err);
        tfc_pipeline_restore_state(p, copy, len, &err);
        read_some(p, 2, v, 256);
    }
    free(copy);
    /* A state from another configuration is refused, saying why. */
    tfc_pipeline *q = build(1);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_pipeline_restore_state(q, blob, len, &err), TFC_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "different pipeline configuration"));
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_pipeline_restore_state(q, "garbage", 7, &err), TFC_ERR_FORMAT);
    tfc_pipeline_free(q);
    free(blob);
    tfc_pipeline_free(p);
}

TFC_TEST_MAIN("data_state",
              {"resume_lazy_shuffle_prefetch", test_resume_lazy_shuffle_prefetch},
              {"resume_parallel_map_eager_shuffle", test_resume_parallel_map_eager_shuffle},
              {"resume_filter_shuffle", test_resume_filter_shuffle},
              {"resume_shuffled_batches", test_resume_shuffled_batches},
              {"resume_cache", test_resume_cache},
              {"resume_skip_take_parallel", test_resume_skip_take_parallel},
              {"resume_shard", test_resume_shard},
              {"resume_keeps_row_names", test_resume_keeps_row_names},
              {"version1_state", test_version1_state},
              {"bad_blobs", test_bad_blobs},
              {"state_independent_of_timing", test_state_independent_of_timing})
