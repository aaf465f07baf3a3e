/* Shared helpers of the variable-length sequence tests (test_varlen, test_masking): a model
 * bound on a backend with seeded weights, one inference pass at a length, and the Keras
 * parity of fixtures written at lengths 5, 9 and 17 (tests/ref/keras_varlen.py,
 * keras_masking.py). */
#ifndef TFC_TESTS_SEQREF_H
#define TFC_TESTS_SEQREF_H

#include "core/backend.h"
#include "graph/model.h"

/* The model of `yaml` bound on `be` for `batch` examples, weights initialised with seed 7;
 * asserts on failure. */
tfc_model *tfc_test_bound_model(const char *yaml, tfc_backend *be, int batch);

/* The output of one inference pass of n examples x at length t (0: the model's fixed
 * length): [n, output at t] floats, malloc'd. */
float *tfc_test_run_at(tfc_model *m, int64_t t, const void *x, int n);

/* Keras parity of the fixtures DIR/CASE.safetensors (metadata "yaml": the model; tensors
 * x<T>, y<T> at T = 5, 9, 17, four examples each; every weight by its tfc name): each model,
 * its weights loaded by name (when it has any), run at each length on x<T>, against y<T>.
 * Raises *worst_abs and *worst_rel (relative to max(|y|, 1e-2)); CUnit-asserts the loads. */
void tfc_test_keras_lengths(const char *dir, const char *const *cases, tfc_backend *be,
                            double *worst_abs, double *worst_rel);

#endif
