/* A generic numerical gradient checker for whole models: central differences of the
 * training loss with respect to every parameter (sampled) and the input, against the
 * analytic gradients of tfc_model_backward. */
#ifndef TFC_TESTS_GRADCHECK_H
#define TFC_TESTS_GRADCHECK_H

#include "graph/model.h"

/* Loads a model from YAML text; NULL (with the error printed) on failure. */
tfc_model *tfc_test_model(const char *yaml);

/* The error of loading a model from YAML text, CUnit-asserting that the load fails. */
tfc_error tfc_test_model_error(const char *yaml);
/* The same, CUnit-asserting that its text holds `want` (printing it where it does not). */
void tfc_test_expect_model_error(const char *yaml, const char *want);

/* The model of `yaml` (which must build) refused at bind by a CPU backend whose op table
 * `drop` has emptied slots of (a backend without a layer's kernels, as the GPU's may be):
 * TFC_ERR_CONFIG, the message holding `layer` and `op`; and then bound by the CPU's own
 * table. */
void tfc_test_expect_refused(const char *yaml, void (*drop)(tfc_backend_ops *ops),
                             const char *layer, const char *op);

/* The model of `yaml` (which must build) refused at bind by a CPU backend marked as a
 * device (as a GPU's) while its layer is CPU-first: TFC_ERR_CONFIG, the message naming
 * `layer` ("layer 'NAME'") and saying "TYPE has not run on the"; and then bound by the CPU. */
void tfc_test_expect_cpu_first(const char *yaml, const char *layer, const char *type);

/* y = the output of the model `input: {shape: [h, w, c]}` with the one layer `layer` (YAML
 * text, "RandomShear: {x_factor: 0.2}") for the n images x, on `threads` CPU threads, in
 * training or not, with the step's seed and number. Aborts when it does not build or run. */
void tfc_test_run_image_layer(const char *layer, int h, int w, int c, int n, int threads,
                              const float *x, int training, uint64_t seed, uint64_t step,
                              float *y);

/* Deterministic pseudo-random test data in [lo, hi). */
void tfc_test_fill(float *x, int64_t n, float lo, float hi, unsigned seed);

typedef struct gradcheck_result {
    double max_err;      /* largest |analytic - numeric| / max(2e-2, |analytic| + |numeric|) */
    char worst[128];     /* where it occurred */
    int checked;         /* elements compared */
    int skipped;         /* elements skipped at a kink (two step sizes disagreed) */
    int64_t null_dx_diff; /* weight gradient elements that differ when no input gradient is
                             wanted (every layer's first input's dx NULL) */
} gradcheck_result;

/* The bound test_layers holds max_err to. A uniform 2% gradient error gives max_err ~1e-2
 * (|0.02 g| / |2.02 g|) on every element with |g| above 1e-2, five times the bound. Below the
 * floor (|a| + |n| < 2e-2) an absolute difference of 4e-5 passes: the numeric estimate is
 * quantized to the float32 loss's ulp over the step, 2^-23 * loss / (2 * 5e-3) = 1.2e-5 for a
 * loss near 1, so 4e-5 is about three quanta. */
#define TFC_GRADCHECK_BOUND 2e-3

/* Binds `m` on the CPU for `batch` examples, initialises weights with `seed`, runs one
 * training step's forward/loss/backward on (x, labels) and compares every trainable
 * parameter (up to `per_param` sampled elements each) and, for float inputs, the input
 * gradient. Returns the result; the caller asserts on max_err. */
gradcheck_result tfc_gradcheck(tfc_model *m, int batch, const void *x, const void *labels,
                               int per_param, unsigned seed);
/* The same with every analytic gradient multiplied by `scale` before the comparison: the
 * checker's self-test plants a 2% error (scale 1.02) and expects max_err above the bound. */
gradcheck_result tfc_gradcheck_scaled(tfc_model *m, int batch, const void *x,
                                      const void *labels, int per_param, unsigned seed,
                                      double scale);
/* tfc_gradcheck_scaled for a model of several inputs: xs[k] holds input k's batch; every
 * float input's gradient is compared. */
gradcheck_result tfc_gradcheck_inputs(tfc_model *m, int batch, const void *const *xs,
                                      const void *labels, int per_param, unsigned seed,
                                      double scale);
/* ... and of several outputs: labels[k] holds output k's; the loss is the outputs' weighted
 * sum (loss_weights). */
gradcheck_result tfc_gradcheck_targets(tfc_model *m, int batch, const void *const *xs,
                                       const void *const *labels, int per_param, unsigned seed,
                                       double scale);

#endif
