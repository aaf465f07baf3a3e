/* tfc — the header a program using the library includes, and the only library header the
 * tools (tools/tfc-*.c) include. It gathers the public modules, one header each:
 *
 *   errors       core/error.h        tfc_error, tfc_status, tfc_exit_code
 *   config       core/config.h       tfc_config_* (YAML trees with FILE:LINE:COL), overrides
 *                core/schema.h       tfc_schema_* (key tables, did-you-mean, --keys docs)
 *   values       core/tensor.h       tfc_dtype, tfc_value_get/set, tfc_values_convert, halves
 *   files        core/fileio.h       tfc_file_read_all, tfc_file_write_atomic, tfc_mkdir_p
 *                core/safetensors.h  tfc_safetensors_* (read, write, metadata)
 *                core/zip.h          tfc_zip_* (zip archives, Keras's .keras files: read)
 *                core/hdf5.h         tfc_h5_* (the HDF5 files of Keras's weights: read)
 *   ranks        comm/comm.h         tfc_comm_world, the collectives of a data-parallel run
 *   utilities    core/timing.h       tfc_now, tfc_median;  core/rng.h  Philox4x32-10 draws
 *   backends     core/backend.h      the op table, tfc_backend_configure/_status/_free
 *                device/device.h     tfc_backend_open("cpu" | "gpu" | "gpu:N" | NULL)
 *   models       graph/model.h       tfc_model_load / _from_string, _bind, _init_weights,
 *                                    _forward, _loss, _backward, _save_weights, _load_weights,
 *                                    tfc_model_layer (read-only view of a layer)
 *   data         data/data.h         tfc_pipeline_* (sources, stages, plans, map callbacks, state)
 *   training     solver/solver.h     tfc_solver_load, tfc_solver_train, tfc_solver_evaluate,
 *                                    tfc_snapshot_* (names, discovery)
 *   sweeps       solver/asha.h       tfc_asha_* (successive halving's decisions, tfc-grid)
 *   inference    (below)             tfc_predictor_* : the stable part (SPEC §5c,
 *                                    docs/embedding.md), plain C types only
 *   export       api/onnx.h          tfc_onnx_export (SPEC §5d)
 *   import       api/keras_import.h  tfc_keras_import (Keras models, SPEC §3 tfc-import)
 *
 * Internal headers (graph/model_internal.h, cpu/cpu_internal.h, data/internal.h,
 * solver/internal.h, gpu/gpu_internal.cuh) are not reachable from here. Installed (`make
 * install`), `cc app.c $(pkg-config --cflags --libs tfc)` builds a program (docs/embedding.md:
 * the module headers go under include/tfc/). From the build tree: `-I include -I src` and
 * build/release/libtfc.a (or libtfc.so) with -lopenblas -lyaml -ljansson -lpng -ljpeg -lz -lm
 * -fopenmp. Every call that can fail returns
 * a tfc_status and fills a tfc_error; nothing exits. libtfc exports only tfc_ / TFC_ names
 * (tests/test_symbols.sh checks it with nm). */
#ifndef TFC_H
#define TFC_H

#ifdef __cplusplus
extern "C" {
#endif

#include "core/error.h"
#include "core/config.h"
#include "core/schema.h"
#include "core/tensor.h"
#include "core/fileio.h"
#include "core/safetensors.h"
#include "core/zip.h"
#include "core/hdf5.h"
#include "core/timing.h"
#include "core/rng.h"
#include "core/backend.h"
#include "device/device.h"
#include "cpu/cpu.h"
#include "comm/comm.h"
#include "graph/model.h"
#include "data/data.h"
#include "solver/solver.h"
#include "solver/asha.h"
#include "api/onnx.h"
#include "api/keras_import.h"

#include <stddef.h>
#include <stdint.h>

/* ---- inference (src/api/predictor.c; SPEC §5c) --------------------------------------------
 * A model file and its weights, opened once and run from any thread. Errors are one line, as
 * the tools print them, written into the caller's err[err_size] (err may be NULL). */
typedef struct tfc_predictor tfc_predictor;

/* device: "cpu", "gpu", "gpu:N" or NULL (a GPU when usable, else the CPU; the CPU uses all
 * cores). Loads the model file, checks the weights file strictly (every variable present with
 * its shape). On failure returns NULL and writes a one-line message into err. Close with
 * tfc_predictor_close. */
tfc_predictor *tfc_predictor_open(const char *model_yaml, const char *weights_file,
                                  const char *device, char *err, size_t err_size);

/* How a predictor runs (SPEC §5c); all zeros (`tfc_predictor_options o = {0}`) is what
 * tfc_predictor_open does. Part of the ABI: a later option comes with a new function. */
typedef struct tfc_predictor_options {
    /* CPU threads each call runs on: 0 = every core. With 1, calls from several threads run
     * at once, each on its own core (more than one: they take turns, each on every thread);
     * a GPU device takes 0 only. */
    int threads;
    /* Whether the team's idle threads spin between parallel regions, as onnxruntime's
     * allow_spinning: TFC_SPIN_PROCESS (0) as the process started; TFC_SPIN_ON or
     * TFC_SPIN_OFF need OMP_WAIT_POLICY (read once, when libgomp loads) to say the same:
     * unset or "active" spins, "passive" sleeps at once; else open fails naming it. */
    int spin;
} tfc_predictor_options;
enum { TFC_SPIN_PROCESS = 0, TFC_SPIN_ON = 1, TFC_SPIN_OFF = 2 };

/* tfc_predictor_open with options (NULL: all zeros); a bad option fails naming it. */
tfc_predictor *tfc_predictor_open_options(const char *model_yaml, const char *weights_file,
                                          const char *device,
                                          const tfc_predictor_options *options, char *err,
                                          size_t err_size);

/* which: 0 = input, 1 = output. Writes the per-example shape (batch axis excluded) into
 * dims[0..7] (0 past the rank) and returns its rank, or -1 for a NULL p or dims or another
 * `which`; *dtype (may be NULL) gets "float32" or "int32" (input token ids). A model of
 * variable length (input.shape [null, ...]) reports -1 for the input's first axis and for
 * each output axis that follows it (tfc_predictor_run_length). A model of several inputs or
 * outputs: input 0's and output 0's. */
int tfc_predictor_shape(const tfc_predictor *p, int which, int64_t dims[8], const char **dtype);

/* A model of several inputs (a functional model's InputLayers, SPEC §5c): tfc_predictor_inputs
 * is their count (1 for a model of one input; -1 for a NULL p); tfc_predictor_input writes
 * input k's per-example shape as tfc_predictor_shape does (which 0 is input 0's) and returns
 * its rank, *dtype and *name (may be NULL) getting its dtype and its name ("input", or its
 * InputLayer's), valid until tfc_predictor_close; -1 for a k out of range. */
int tfc_predictor_inputs(const tfc_predictor *p);
int tfc_predictor_input(const tfc_predictor *p, int k, int64_t dims[8], const char **dtype,
                        const char **name);

/* A model of several outputs (`outputs:`, Keras's Model(outputs=[...]), SPEC §5c):
 * tfc_predictor_outputs is their count (1 for a model of one output; -1 for a NULL p);
 * tfc_predictor_output writes output k's per-example shape as tfc_predictor_shape does and
 * returns its rank, *dtype and *name (may be NULL) getting "float32" and its name (its
 * layer's), valid until tfc_predictor_close; -1 for a k out of range. */
int tfc_predictor_outputs(const tfc_predictor *p);
int tfc_predictor_output(const tfc_predictor *p, int k, int64_t dims[8], const char **dtype,
                         const char **name);

/* The longest length a model of variable length takes (its input.max_length: the -1 axes of
 * tfc_predictor_shape at their largest, to size buffers for tfc_predictor_run_length), 0 for
 * a model of fixed shape (tfc_predictor_shape's dims are all of it), -1 for a NULL p. */
int64_t tfc_predictor_max_length(const tfc_predictor *p);

/* n examples of the input shape (float32, or int32 token ids, contiguous) -> n outputs
 * (float32, contiguous) in output. Returns 0, or -1 with err written (NULL arguments, n < 1,
 * a token id outside an Embedding's input_dim, a device failure). Any n >= 1 (run in passes
 * of at most 256 examples); no allocation by tfc after a thread's first call at its largest
 * n so far (OpenBLAS's threaded GEMM allocates on its own). Safe to call from several
 * threads at once on one predictor (each call borrows its own bound copy of the model);
 * results identical to single-threaded calls. The calling thread's OpenMP thread count
 * (omp_set_num_threads) is the predictor's during the call, and restored after. On a CPU
 * predictor of several threads a call of as many passes or more of a small model runs them
 * side by side on threads the predictor starts at the first such call and ends at close
 * (SPEC §5c). */
int tfc_predictor_run(tfc_predictor *p, const void *input, int64_t n, float *output,
                      char *err, size_t err_size);

/* tfc_predictor_run for examples of `length` steps (the input's first axis): 1 to
 * input.max_length for a model of variable length, the model's own length for another; 0:
 * that fixed length, or max_length. Each output has the shape the model gives at that length
 * (the -1 axes of tfc_predictor_shape read `length`). A length out of range is -1 with err
 * written. tfc_predictor_run is this with length 0. */
int tfc_predictor_run_length(tfc_predictor *p, const void *input, int64_t n, int64_t length,
                             float *output, char *err, size_t err_size);

/* tfc_predictor_run_length for a model of several inputs: inputs[k] holds the n examples of
 * input k (contiguous, its shape and dtype); ninputs must be tfc_predictor_inputs's. The
 * other calls take a model of one input only, and refuse another naming this one. */
int tfc_predictor_run_inputs(tfc_predictor *p, const void *const *inputs, int ninputs,
                             int64_t n, int64_t length, float *output, char *err,
                             size_t err_size);

/* tfc_predictor_run_inputs for a model of several outputs: outputs[k] gets the n examples of
 * output k (float32, contiguous, its shape at `length`); noutputs must be
 * tfc_predictor_outputs's. The other calls take a model of one output only, and refuse
 * another naming this one. */
int tfc_predictor_run_outputs(tfc_predictor *p, const void *const *inputs, int ninputs,
                              int64_t n, int64_t length, float *const *outputs, int noutputs,
                              char *err, size_t err_size);

/* For the tests: passes run side by side, each on one thread, in this process so far (a CPU
 * predictor of several threads, a call of as many passes or more, a small model). */
long long tfc_predictor_side_passes(void);

/* The name of output class `index` that the weights file records (its training data's
 * classes, SPEC §4), or NULL when it records none or index is out of range (or p is NULL).
 * Valid until tfc_predictor_close. */
const char *tfc_predictor_class_name(const tfc_predictor *p, int64_t index);

/* Frees the predictor and every copy of the model it made (NULL: nothing). Not while a run
 * on it is in progress. */
void tfc_predictor_close(tfc_predictor *p);

/* The library's version, "MAJOR.MINOR.PATCH". */
const char *tfc_version(void);

#ifdef __cplusplus
}
#endif

#endif
