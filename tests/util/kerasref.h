/* Keras parity of whole models from the fixtures the tests/ref/keras_*.py generators write
 * (tests/ref/<dir>/<case>.safetensors): metadata "yaml" (the model), tensors x (the input,
 * float32 or int32 token ids), y (Keras's inference output), t (an MSE target), and where
 * the case has them dx (the input's gradient of that loss after a training forward),
 * grad:<weight path> (each trainable weight's), moved:<weight path> (each non-trainable
 * weight after that training forward: BatchNormalization's moving statistics), and the
 * weights under Keras's variable paths. Used by test_norm, test_time_distributed,
 * test_normalization, test_score_attention, test_conv1d, test_merge and test_permute. */
#ifndef TFC_TESTS_KERASREF_H
#define TFC_TESTS_KERASREF_H

#include <stdint.h>

#include "core/safetensors.h"

/* Tensor `name` of f as float32 in a malloc'd buffer (room for at least one value), its
 * value count into *n (n may be NULL); NULL when f has no such tensor. */
float *tfc_test_tensor(const tfc_st_file *f, const char *name, int64_t *n);

/* Tensor `prefix``name` of f as float32 in a calloc'd buffer of n values, asserting (fatal)
 * that it is there with n values. */
float *tfc_test_tensor_at(const tfc_st_file *f, const char *prefix, const char *name,
                          int64_t n);

/* The number of values of got off want by more than 1e-5 of |want| plus 1e-6 of want's
 * largest magnitude (float32 in Keras's order of operations); the largest |got - want|
 * raises *worst. */
int tfc_test_mismatches(const float *got, const float *want, int64_t n, double *worst);

/* max |a - b| / max(floor, max |b|) over n values (1 in place of a zero denominator); the
 * largest |a - b| raises *abs_out (which may be NULL). Values where b (the reference) is
 * NaN are passed over (Keras's NaN gradient of an all-zero slice under JAX, where tfc's is
 * finite); a (tfc's) must be finite everywhere: INFINITY where it is not. */
double tfc_test_rel_diff(const float *a, const float *b, int64_t n, double floor,
                         double *abs_out);

/* tests/ref/<dir>/<name>.safetensors, opened; asserts that it opens. */
tfc_st_file *tfc_test_fixture(const char *dir, const char *name);

/* How one test's fixtures are compared. */
typedef struct tfc_keras_parity {
    const char *dir;       /* tests/ref/<dir> */
    double tol;            /* the largest relative difference a case may have */
    double grad_floor;     /* gradients relative to max(grad_floor, their largest value) */
    int inference_threads; /* of the inference layout's CPU backend (0: 2) */
    int cast_weights;      /* the weights tfc writes may have another dtype than Keras's
                            * (Normalization's count: Keras's int32, tfc's float32): compared
                            * as float32 values; otherwise byte for byte */
    int all_grads;         /* every case is trained: its fixture must have dx (float inputs)
                            * and every weight's gradient, even where it has none at all */
} tfc_keras_parity;

/* One case: the YAML bound for training on a 2-thread CPU backend and initialised (seed 1),
 * the fixture's weights (when the model has any) loaded by name strictly (none missing or
 * mismatched); the inference output against y; the weights tfc then writes are the
 * fixture's, every one under the same path, shape and value; the inference layout (as
 * tfc-predict binds it) gives the same bits; and where the fixture has dx or grad:
 * tensors, after a training forward and the MSE loss's backward: the input's gradient, each
 * trainable weight's gradient and each non-trainable weight (not a constant) against its
 * moved: value. CUnit-asserts each of those; returns the worst difference relative to the
 * largest value and raises *worst_abs with the largest absolute one. */
double tfc_test_keras_case(const tfc_keras_parity *p, const char *name, double *worst_abs);

/* tfc_test_keras_case of each of `names` (ended by NULL), printing each case's differences
 * and asserting each within p->tol. */
void tfc_test_keras_cases(const tfc_keras_parity *p, const char *const *names);

#endif
