/* A generic numerical gradient checker for whole models: central differences of the
 * training loss with respect to every parameter (sampled) and the input, against the
 * analytic gradients of tfc_model_backward. */
#ifndef TFC_TESTS_GRADCHECK_H
#define TFC_TESTS_GRADCHECK_H

#include "graph/model.h"

/* Loads a model from YAML text; NULL (with the error printed) on failure. */
tfc_model *tfc_test_model(const char *yaml);

/* Deterministic pseudo-random test data in [lo, hi). */
void tfc_test_fill(float *x, int64_t n, float lo, float hi, unsigned seed);

typedef struct gradcheck_result {
    double max_err;      /* largest |analytic - numeric| / max(1e-3, |analytic| + |numeric|) */
    char worst[128];     /* where it occurred */
    int checked;         /* elements compared */
    int skipped;         /* elements skipped at a kink (two step sizes disagreed) */
} gradcheck_result;

/* Binds `m` on the CPU for `batch` examples, initialises weights with `seed`, runs one
 * training step's forward/loss/backward on (x, labels) and compares every trainable
 * parameter (up to `per_param` sampled elements each) and, for float inputs, the input
 * gradient. Returns the result; the caller asserts on max_err. */
gradcheck_result tfc_gradcheck(tfc_model *m, int batch, const void *x, const void *labels,
                               int per_param, unsigned seed);

#endif
