/* The zoo's variable-length classifiers (model_zoo/fortunes_bigru, fortunes_conv_bigru,
 * fortunes_encoder) through the C API: each record's class probabilities are the same whatever
 * its batch is padded to (alone at its own length, in a batch at the longest record's length,
 * at max_length 80), which their READMEs promise for bucketed batches (the embedding's mask
 * through the Bidirectional GRU, or through the attention block, to the masked mean; or the
 * Bidirectional GRU's zeros at masked steps through a ReLU Conv1D of kernel 1 without bias,
 * 0 there, to the max over every step); and
 * fortunes_encoder predicts what Keras 3 predicts with its weights (tests/ref/encoder). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "tfc.h"
#include "testutil.h"

#define RECORDS 5
#define CLASSES 8
#define MAX_LENGTH 80

/* The records' lengths (tests/ref/keras_encoder.py's LENGTHS). */
static const int len[RECORDS] = {3, 11, 17, 30, 6};

/* Record r's ids at `length` steps: its own len[r] ids from [1, 8000), zeros after. */
static void fill(int32_t *ids, int length)
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

/* Zoo model `name`'s predictor. */
static tfc_predictor *open_zoo(const char *name)
{
    char model[128], weights[128], err[512] = "";
    snprintf(model, sizeof model, "model_zoo/%s/model.yaml", name);
    snprintf(weights, sizeof weights, "model_zoo/%s/%s.safetensors", name, name);
    tfc_predictor *p = tfc_predictor_open(model, weights, "cpu", err, sizeof err);
    if (!p) fprintf(stderr, "%s\n", err);
    return p;
}

/* Zoo model `name`: the five records alone, together at 30 and at 80 steps, agree. */
static void batch_independent(const char *name)
{
    static int32_t ids[RECORDS * MAX_LENGTH];
    float alone[RECORDS * CLASSES], at30[RECORDS * CLASSES], at80[RECORDS * CLASSES];
    char err[512] = "";
    tfc_predictor *p = open_zoo(name);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    int64_t dims[8];
    CU_ASSERT_EQUAL(tfc_predictor_shape(p, 0, dims, NULL), 1);
    CU_ASSERT_EQUAL(dims[0], -1); /* variable length */
    for (int r = 0; r < RECORDS; r++) {
        fill(ids, len[r]);
        CU_ASSERT_EQUAL_FATAL(tfc_predictor_run_length(p, ids + r * len[r], 1, len[r],
                                                       alone + r * CLASSES, err, sizeof err), 0);
    }
    fill(ids, 30);
    CU_ASSERT_EQUAL_FATAL(tfc_predictor_run_length(p, ids, RECORDS, 30, at30, err, sizeof err), 0);
    fill(ids, MAX_LENGTH);
    CU_ASSERT_EQUAL_FATAL(tfc_predictor_run(p, ids, RECORDS, at80, err, sizeof err), 0);
    double w30 = worst(at30, alone, RECORDS * CLASSES), w80 = worst(at80, alone, RECORDS * CLASSES);
    printf("\n  %s: max relative difference from each record alone: %.2g at 30, %.2g at 80 ",
           name, w30, w80);
    CU_ASSERT(w30 <= 1e-5);
    CU_ASSERT(w80 <= 1e-5);
    for (int r = 0; r < RECORDS; r++) { /* probabilities */
        double sum = 0;
        for (int k = 0; k < CLASSES; k++) sum += at80[r * CLASSES + k];
        CU_ASSERT_DOUBLE_EQUAL(sum, 1.0, 1e-5);
    }
    tfc_predictor_close(p);
}

static void test_batch_independent(void) { batch_independent("fortunes_bigru"); }
static void test_conv_batch_independent(void) { batch_independent("fortunes_conv_bigru"); }
static void test_encoder_batch_independent(void) { batch_independent("fortunes_encoder"); }

/* fortunes_encoder on the five records at 80 steps against Keras 3.15's predictions with the
 * zoo's weights (tests/ref/keras_encoder.py: KerasHub's TokenAndPositionEmbedding, Keras's
 * MultiHeadAttention, its implicit masks): within 1e-5 relative; and Keras's own predictions
 * of each record alone and at 80 agreed within 1e-5 when the fixture was written. */
static void test_encoder_keras(void)
{
    tfc_error e;
    tfc_error_clear(&e);
    tfc_st_file *f = tfc_st_open("tests/ref/encoder/fortunes_encoder.safetensors", &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    const tfc_st_tensor *x = tfc_st_find(f, "x"), *y = tfc_st_find(f, "y");
    CU_ASSERT_FATAL(x && y && x->dtype == TFC_I32);
    CU_ASSERT_EQUAL_FATAL(x->shape.dim[0] * x->shape.dim[1], RECORDS * MAX_LENGTH);
    CU_ASSERT_EQUAL_FATAL(tfc_shape_numel(&y->shape), RECORDS * CLASSES);
    static int32_t ids[RECORDS * MAX_LENGTH];
    memcpy(ids, x->data, sizeof ids);
    float keras[RECORDS * CLASSES], out[RECORDS * CLASSES];
    tfc_st_tensor_to_f32(y, keras);
    char err[512] = "";
    tfc_predictor *p = open_zoo("fortunes_encoder");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL_FATAL(tfc_predictor_run(p, ids, RECORDS, out, err, sizeof err), 0);
    double w = worst(out, keras, RECORDS * CLASSES);
    const char *keras_alone = tfc_st_meta(f, "alone_vs_80"); /* Keras is batch-independent too */
    printf("\n  max relative difference from Keras %s: %.2g (Keras alone vs at 80: %s) ",
           tfc_st_meta(f, "keras"), w, keras_alone);
    CU_ASSERT(w <= 1e-5);
    CU_ASSERT(keras_alone && atof(keras_alone) <= 1e-5);
    tfc_predictor_close(p);
    tfc_st_close(f);
}

TFC_TEST_MAIN("zoo_seq", {"batch_independent", test_batch_independent},
              {"conv_batch_independent", test_conv_batch_independent},
              {"encoder_batch_independent", test_encoder_batch_independent},
              {"encoder_keras", test_encoder_keras})
