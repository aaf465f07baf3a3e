/* Training against Keras's own (tests/ref/keras_constraints.py, keras_trainable.py): a
 * fixture holds a model's YAML, the weights it starts from, one batch, the solver's numbers
 * in its metadata (lr, steps; momentum optional) and Keras's weights after
 * model.train_on_batch's SGD steps on that batch under `after/<name>`; tfc's solver trains
 * the same steps from the same weights and the two are compared. */
#ifndef TFC_TESTS_KERASSTEPS_H
#define TFC_TESTS_KERASSTEPS_H

#include <stdint.h>

#include "core/safetensors.h"
#include "core/error.h"

/* Imports DIR/NAME.keras (DIR ends in '/') into the test directory as NAME.yaml and
 * NAME.safetensors, CUnit-asserting that it imports (the error printed where not). */
void tfc_ks_import(const char *dir, const char *name);

/* Writes fixture tensor t to the test directory as NAME (.npy). */
void tfc_ks_write_npy(const tfc_st_tensor *t, const char *name);

/* The solver of fixture f: its model, features xname and labels yname (.npy files in the
 * test directory) as its batch repeated, SGD at its lr (and momentum) for its steps; `extra`
 * holds further solver keys (NULL: none). The text lives until the next call. */
const char *tfc_ks_solver(const tfc_st_file *f, const char *xname, const char *yname,
                          const char *extra);

/* Trains `solver` (written to the test directory as FILE) from the weights `weights` (NULL:
 * initialised) into tmp/<out> on `threads` threads; resume and stop_at as tfc-train's
 * --resume and --stop-at (NULL, 0: none), host_step the solver's host path. */
tfc_status tfc_ks_train(const char *file, const char *solver, const char *weights,
                        const char *out, int threads, const char *resume, int64_t stop_at,
                        int host_step, tfc_error *err);

/* The largest difference between each `after/NAME` tensor of f and NAME of the run's final
 * weights, relative to max(1, |Keras's|); every weight of the run is compared (*compared of
 * them), each one over 1e-4 printed. */
double tfc_ks_worst(const tfc_st_file *f, const char *run, int *compared);

/* Every tensor of the run's final weights, concatenated in file order (malloc'd; *n floats). */
float *tfc_ks_final_weights(const char *run, int64_t *n);

/* Trains `solver` (written as FILE; it snapshots at iteration `at`, its PREFIX_iter_AT.state)
 * into tmp/<run>_full on 2 threads, then resumes a second run from that snapshot into
 * tmp/<run>_resumed on 1 thread, CUnit-asserting that both end with the same bits. */
void tfc_ks_expect_resume_exact(const char *file, const char *solver, const char *run,
                                const char *prefix, int at);

#endif
