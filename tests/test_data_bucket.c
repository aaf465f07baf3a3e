/* bucket_by_sequence_length against tf.data's own results: the tables below are what
 * TensorFlow 2.21's Dataset.bucket_by_sequence_length printed for the elements of its
 * documentation ([0], [1..4], [5..7], [7..11], [13..20], [21, 22]) with
 * element_length_func = tf.shape(elem)[0] — the documented examples (boundaries [3, 5];
 * [7] with pad_to_bucket_boundary and padding -1) and a flush of partial buckets in bucket
 * order, with and without drop_remainder. Also the lengths component, exact resume from
 * saved state with elements waiting in the buckets, and the errors. */
#include <stdlib.h>
#include <string.h>

#include "data/data.h"
#include "testutil.h"

static const int64_t elements[6][6] = {{0},          {1, 2, 3, 4},         {5, 6, 7},
                                       {7, 8, 9, 10, 11}, {13, 14, 15, 16, 19, 20}, {21, 22}};
static const int lens[6] = {1, 4, 3, 5, 6, 2};

/* The elements as a TFRecord file read back as int64 sequences. */
static const char *write_elements(void)
{
    static char path[1100];
    snprintf(path, sizeof path, "%s", tfc_test_path("elems.tfrecord"));
    tfc_error err;
    tfc_error_clear(&err);
    tfc_tfrecord_writer *w = tfc_tfrecord_writer_open(path, 0, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    for (int i = 0; i < 6; i++) {
        tfc_tensor t = {TFC_I64, {.ndim = 1, .dim = {lens[i]}}, (void *)elements[i], -1};
        const char *key = "x";
        CU_ASSERT_EQUAL(tfc_tfrecord_write(w, 1, &key, &t, &err), TFC_OK);
    }
    CU_ASSERT_EQUAL(tfc_tfrecord_writer_close(w, &err), TFC_OK);
    return path;
}

static tfc_pipeline *open_bucketed(const char *stage, tfc_error *err)
{
    char yaml[1400];
    snprintf(yaml, sizeof yaml, "{type: tfrecord, files: %s, features: {key: x, dtype: int64, "
             "shape: [-1]}}", write_elements());
    tfc_data_options o = {.key = "data.train", .base_dir = tfc_test_tmpdir(), .seed = 1};
    tfc_error_clear(err);
    tfc_pipeline *p = tfc_pipeline_from_yaml(yaml, &o, err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    if (tfc_pipeline_add_yaml(p, stage, err)) {
        tfc_pipeline_free(p);
        return NULL;
    }
    return p;
}

/* A batch printed as tf.data's as_numpy_iterator().tolist() prints it. */
static void batch_str(const tfc_batch *b, char *out, size_t size)
{
    size_t n = 0;
    const tfc_tensor *t = &b->features;
    n += (size_t)snprintf(out + n, size - n, "[");
    for (int64_t r = 0; r < t->shape.dim[0]; r++) {
        n += (size_t)snprintf(out + n, size - n, "%s[", r ? ", " : "");
        for (int64_t c = 0; c < t->shape.dim[1]; c++)
            n += (size_t)snprintf(out + n, size - n, "%s%lld", c ? ", " : "",
                                  (long long)((int64_t *)t->data)[r * t->shape.dim[1] + c]);
        n += (size_t)snprintf(out + n, size - n, "]");
    }
    snprintf(out + n, size - n, "]");
}

/* Runs the stage to its end; the batches, one per line, into out. */
static void run_all(tfc_pipeline *p, char *out, size_t size)
{
    tfc_error err;
    tfc_error_clear(&err);
    size_t n = 0;
    out[0] = 0;
    for (;;) {
        tfc_batch b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        if (b.end) break;
        char line[512];
        batch_str(&b, line, sizeof line);
        n += (size_t)snprintf(out + n, size - n, "%s\n", line);
        /* lengths: each row's unpadded length */
        for (int64_t r = 0; r < b.lengths.shape.dim[0]; r++) {
            int32_t len = ((int32_t *)b.lengths.data)[r];
            int64_t first = ((int64_t *)b.features.data)[r * b.features.shape.dim[1]];
            int found = 0;
            for (int i = 0; i < 6; i++) found |= lens[i] == len && elements[i][0] == first;
            CU_ASSERT(found);
        }
    }
}

static void test_tf_data_tables(void)
{
    static const struct { const char *stage, *want; } cases[] = {
        {"bucket_by_sequence_length: {boundaries: [3, 5], batch_sizes: [2, 2, 2]}",
         "[[1, 2, 3, 4], [5, 6, 7, 0]]\n"
         "[[7, 8, 9, 10, 11, 0], [13, 14, 15, 16, 19, 20]]\n"
         "[[0, 0], [21, 22]]\n"},
        {"bucket_by_sequence_length: {boundaries: [7], batch_sizes: [2, 2], "
         "pad_to_bucket_boundary: true, padding_values: [-1]}",
         "[[0, -1, -1, -1, -1, -1], [1, 2, 3, 4, -1, -1]]\n"
         "[[5, 6, 7, -1, -1, -1], [7, 8, 9, 10, 11, -1]]\n"
         "[[13, 14, 15, 16, 19, 20], [21, 22, -1, -1, -1, -1]]\n"},
        {"bucket_by_sequence_length: {boundaries: [2, 4, 6], batch_sizes: [3, 3, 1, 2]}",
         "[[1, 2, 3, 4]]\n"
         "[[7, 8, 9, 10, 11]]\n"
         "[[0]]\n"
         "[[5, 6, 7], [21, 22, 0]]\n"
         "[[13, 14, 15, 16, 19, 20]]\n"},
        {"bucket_by_sequence_length: {boundaries: [2, 4, 6], batch_sizes: [3, 3, 1, 2], "
         "drop_remainder: true}",
         "[[1, 2, 3, 4]]\n"
         "[[7, 8, 9, 10, 11]]\n"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        tfc_error err;
        tfc_pipeline *p = open_bucketed(cases[k].stage, &err);
        if (!p) printf("\n%s\n", err.text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        const tfc_element_spec *s = tfc_pipeline_element_spec(p);
        CU_ASSERT(s->batched && s->comp[TFC_COMP_LENGTHS].present);
        char got[2048];
        run_all(p, got, sizeof got);
        if (strcmp(got, cases[k].want)) printf("\ncase %zu:\n%s", k, got);
        CU_ASSERT_STRING_EQUAL(got, cases[k].want);
        tfc_pipeline_free(p);
    }
}

/* Saved after the first batch (elements [0] and [5, 6, 7] wait in their buckets) and
 * restored into a fresh pipeline: the rest is the same, the epoch after it too. */
static void test_resume(void)
{
    const char *stage = "bucket_by_sequence_length: {boundaries: [2, 4, 6], "
                        "batch_sizes: [3, 3, 1, 2]}";
    tfc_error err;
    tfc_pipeline *p = open_bucketed(stage, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_add_yaml(p, "repeat: {count: 2}", &err), TFC_OK);
    tfc_batch b;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    void *state = NULL;
    size_t slen = 0;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_save_state(p, &state, &slen, &err), TFC_OK);
    char ref[2048], got[2048];
    run_all(p, ref, sizeof ref);
    tfc_pipeline_free(p);
    p = open_bucketed(stage, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_add_yaml(p, "repeat: {count: 2}", &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_restore_state(p, state, slen, &err), TFC_OK);
    run_all(p, got, sizeof got);
    CU_ASSERT_STRING_EQUAL(got, ref);
    /* the rest of the first epoch, then the second whole */
    CU_ASSERT_PTR_NOT_NULL(strstr(ref, "[[7, 8, 9, 10, 11]]\n[[0]]\n[[5, 6, 7], [21, 22, 0]]\n"
                                       "[[13, 14, 15, 16, 19, 20]]\n[[1, 2, 3, 4]]\n"));
    tfc_pipeline_free(p);
    free(state);
}

static void test_errors(void)
{
    static const struct { const char *stage, *msg; } bad[] = {
        {"bucket_by_sequence_length: {boundaries: [3, 5], batch_sizes: [2, 2]}",
         "batch_sizes needs 3 values"},
        {"bucket_by_sequence_length: {boundaries: [5, 3], batch_sizes: [2, 2, 2]}",
         "boundaries must increase: 3 follows 5"},
        {"bucket_by_sequence_length: {boundaries: [3], batch_sizes: [2, 2], bucket: 1}",
         "unknown key 'bucket'"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        tfc_error err;
        CU_ASSERT_PTR_NULL(open_bucketed(bad[k].stage, &err));
        CU_ASSERT_EQUAL(err.code, TFC_ERR_CONFIG);
        if (!strstr(err.text, bad[k].msg)) printf("\n%s\n", err.text);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, bad[k].msg));
    }
    /* pad_to_bucket_boundary with a length at the last boundary: the element is named */
    tfc_error err;
    tfc_pipeline *p = open_bucketed("bucket_by_sequence_length: {boundaries: [5], "
                                    "batch_sizes: [8, 8], pad_to_bucket_boundary: true}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    tfc_batch b;
    CU_ASSERT_EQUAL(tfc_pipeline_next(p, &b, &err), TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "elems.tfrecord record 3 has length 5, not below the "
                                           "last boundary 5"));
    if (!strstr(err.msg, "record 3 has length 5")) printf("\n%s\n", err.msg);
    tfc_pipeline_free(p);
    /* after a batch it is refused: it batches single elements */
    p = open_bucketed("batch: {batch_size: 2}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, "bucket_by_sequence_length: {boundaries: [3], "
                                             "batch_sizes: [2, 2]}", &err), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "put it in place of batch/padded_batch"));
    tfc_pipeline_free(p);
}

TFC_TEST_MAIN("data_bucket",
              {"tf_data_tables", test_tf_data_tables},
              {"resume", test_resume},
              {"errors", test_errors})
