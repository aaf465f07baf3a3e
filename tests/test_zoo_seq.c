/* The zoo's variable-length classifier (model_zoo/fortunes_bigru) through the C API: each
 * record's class probabilities are the same whatever its batch is padded to (alone at its own
 * length, in a batch at the longest record's length, at max_length 80), which its README
 * promises for bucketed batches (the Embedding's mask through the Bidirectional GRU to the
 * masked mean). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "tfc.h"
#include "testutil.h"

#define MODEL "model_zoo/fortunes_bigru/model.yaml"
#define WEIGHTS "model_zoo/fortunes_bigru/fortunes_bigru.safetensors"
#define RECORDS 5
#define CLASSES 8
#define MAX_LENGTH 80

/* Record r's ids at `length` steps: its own len[r] ids from [1, 8000), zeros after. */
static void fill(int32_t *ids, const int *len, int length)
{
    for (int r = 0; r < RECORDS; r++)
        for (int t = 0; t < length; t++)
            ids[r * length + t] = t < len[r] ? 1 + (int32_t)((r * 7919 + t * 104729) % 7999) : 0;
}

/* The largest |a - b| / max(|b|, 1e-3) over n outputs. */
static double worst(const float *a, const float *b, int n)
{
    double w = 0;
    for (int i = 0; i < n; i++) w = fmax(w, fabs(a[i] - b[i]) / fmax(fabs(b[i]), 1e-3));
    return w;
}

static void test_batch_independent(void)
{
    static const int len[RECORDS] = {3, 11, 17, 30, 6};
    static int32_t ids[RECORDS * MAX_LENGTH];
    float alone[RECORDS * CLASSES], at30[RECORDS * CLASSES], at80[RECORDS * CLASSES];
    char err[512] = "";
    tfc_predictor *p = tfc_predictor_open(MODEL, WEIGHTS, "cpu", err, sizeof err);
    if (!p) fprintf(stderr, "%s\n", err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    int64_t dims[8];
    CU_ASSERT_EQUAL(tfc_predictor_shape(p, 0, dims, NULL), 1);
    CU_ASSERT_EQUAL(dims[0], -1); /* variable length */
    for (int r = 0; r < RECORDS; r++) {
        fill(ids, len, len[r]);
        CU_ASSERT_EQUAL_FATAL(tfc_predictor_run_length(p, ids + r * len[r], 1, len[r],
                                                       alone + r * CLASSES, err, sizeof err), 0);
    }
    fill(ids, len, 30);
    CU_ASSERT_EQUAL_FATAL(tfc_predictor_run_length(p, ids, RECORDS, 30, at30, err, sizeof err), 0);
    fill(ids, len, MAX_LENGTH);
    CU_ASSERT_EQUAL_FATAL(tfc_predictor_run(p, ids, RECORDS, at80, err, sizeof err), 0);
    double w30 = worst(at30, alone, RECORDS * CLASSES), w80 = worst(at80, alone, RECORDS * CLASSES);
    printf("\n  max relative difference from each record alone: %.2g at 30, %.2g at 80 ", w30, w80);
    CU_ASSERT(w30 <= 1e-5);
    CU_ASSERT(w80 <= 1e-5);
    for (int r = 0; r < RECORDS; r++) { /* probabilities */
        double sum = 0;
        for (int k = 0; k < CLASSES; k++) sum += at80[r * CLASSES + k];
        CU_ASSERT_DOUBLE_EQUAL(sum, 1.0, 1e-5);
    }
    tfc_predictor_close(p);
}

TFC_TEST_MAIN("zoo_seq", {"batch_independent", test_batch_independent})
