/* Keras parity of one fixture in keras_group_norm.py's format (tests/ref/keras_norm.py,
 * keras_group_norm.py, keras_conv1d_variants.py): metadata "yaml" (the model), x, Keras's
 * inference output y, MSE targets t, and where Keras's gradients were taken dx and
 * grad:<layer>/<weight> (and moved:<layer>/<weight>), every weight under its Keras path. */
#ifndef TFC_TESTS_KERASREF_H
#define TFC_TESTS_KERASREF_H

/* tests/ref/DIR/NAME.safetensors: binds its YAML on the CPU, loads its weights by name (every
 * parameter must be there), checks that the weights tfc then writes are the fixture's under
 * the same names (what a Keras model loads by name), compares the inference output (the same
 * bits from the inference layout) and, where the fixture has gradients (grad:<path>), those
 * of the MSE loss after a training forward, then the non-trainable weights it moved
 * (moved:<path>: BatchNormalization's statistics). Returns the worst difference relative to
 * the largest value of each tensor; raises *worst_abs to the worst absolute one.
 * CUnit-asserts the loads. */
double tfc_test_keras_parity(const char *dir, const char *name, double *worst_abs);

/* tfc_test_keras_parity of each case of `names` (NULL-terminated) under DIR, CUnit-asserting
 * each within `tol`; the differences go to stderr where one is not (or under TFC_VERBOSE). */
void tfc_test_keras_parity_all(const char *dir, const char *const *names, double tol);

#endif
