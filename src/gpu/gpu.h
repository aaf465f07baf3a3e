/* The CUDA backend (src/gpu/) as seen from C: creation and device count (device/device.c
 * calls these), the run-time options (determinism, TF32, a memory limit: the table's
 * configure op sets all three, tests and benchmarks one at a time), the sticky error that
 * asynchronous ops leave behind (the table's status op), memory statistics, and the
 * C-callable launchers each src/gpu/ file contributes to the op table. Plain C: no CUDA
 * header here, so any file may include it; everything exists only in builds with
 * TFC_HAVE_CUDA. */
#ifndef TFC_GPU_GPU_H
#define TFC_GPU_GPU_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* C linkage for everything declared here and in the core headers when a .cu includes this
 * file: the library's symbols keep their C names (tfc_gpu_...), never C++-mangled ones. */
#ifdef __cplusplus
extern "C" {
#endif

#include "core/backend.h"

/* Usable CUDA devices (after CUDA_VISIBLE_DEVICES); 0 when there is no GPU, no driver or
 * a driver too old for this build. Never prints, never fails otherwise. */
int tfc_gpu_device_count(void);

/* Opens device `index` (0-based among the visible ones): a stream, cuBLAS and cuDNN
 * handles and an empty caching allocator. NULL with err filled (TFC_ERR_DEVICE, naming the
 * failing call and the library's message) when the device cannot be used, e.g. when this
 * build has no kernels for its compute capability. Free with tfc_backend_free. */
tfc_backend *tfc_gpu_backend_create(int index, tfc_error *err);

/* 1 when `be` is a backend made by tfc_gpu_backend_create. The setters and queries below
 * do nothing (return 0 / TFC_OK) for any other backend, so callers need not check. */
int tfc_gpu_is_gpu(const tfc_backend *be);

/* deterministic: cuDNN algorithms that are deterministic only, and embedding
 * scatter-add without atomics, so two runs on the same device give identical bits.
 * Off by default (fastest algorithms). */
void tfc_gpu_set_deterministic(tfc_backend *be, int on);

/* tf32: allow TensorFloat-32 tensor cores in cuBLAS GEMMs and cuDNN convolutions on
 * Ampere and newer (10-bit mantissa products; about 1e-3 relative error). Off by default,
 * so results match the CPU to float32 rounding. */
void tfc_gpu_set_tf32(tfc_backend *be, int on);

/* attention_no_split (for tests): the attention kernels walk each block of rows or keys in
 * one block, never splitting the walk over several (gpu_attention.cu, split_of). Off by
 * default: they split where their blocks are few. */
void tfc_gpu_set_attention_no_split(tfc_backend *be, int on);

/* conv_find: choose each convolution's algorithms by timing them (cudnnFind*AlgorithmEx on
 * the op's own tensors, within the same workspace budget) the first time a shape runs,
 * instead of by cuDNN's heuristics alone; the choice is cached per shape like theirs.
 * Ignored in deterministic mode (measured choices can differ between runs). Off by default:
 * on an H200 it slowed the steps replayed from CUDA graphs (docs/gpu.md, issue 41). */
void tfc_gpu_set_conv_find(tfc_backend *be, int on);

/* fast_norm: BatchNormalization's statistics and gradients and the bias gradient through
 * wider column sums (more, shorter slices of rows; blocks as wide as narrow matrices), the
 * ReLU folded into BatchNormalization's affine pass, 32-bit indices. Deterministic still;
 * other last bits of the statistics (another summation order). Off by default: not yet run
 * on a GPU (issue 41; bench_train --fast-norm, test-gpu fast_norm). */
void tfc_gpu_set_fast_norm(tfc_backend *be, int on);

/* How many of the cached convolution algorithm choices (one per shape and direction) were
 * measured rather than taken from the heuristics; 0 on any other backend. */
int tfc_gpu_conv_measured(const tfc_backend *be);

/* ---- CUDA graphs (gpu_graph.cu; issue 41, first run on an H200 on 2026-11-30) --------------
 * The work queued on the backend between tfc_gpu_capture_begin and tfc_gpu_capture_end is
 * recorded, not run; tfc_gpu_graph_launch replays it on the backend's stream. A replay
 * reads and writes the very addresses the capture saw and repeats its by-value arguments
 * (batch size, the learning rate), so the caller keeps those fixed and puts each step's
 * new data where the capture read it: stage the batch (tfc_model_stage_input,
 * _stage_labels) before capturing, and before each replay, then capture or replay the
 * queued half (tfc_model_forward_launch ... the update; the update's rates from the step
 * state, tfc_optim_desc.rates_at_state). The step numbers of the random draws (dropout,
 * attention's dropout, augmentation) are the exception: a replay draws at each captured
 * step number plus its step_offset, so pass the step minus the captured step. Capture after one uncaptured step
 * with the same shapes, so workspaces, scratch and algorithm choices exist: during a
 * capture, an op that would wait for the device or allocate (download, sync, sumsq,
 * count_nonfinite, upload, alloc, free, growing the scratch) fails, recording that it ran
 * during a capture, and the capture ends invalid. Free the graphs before the backend. */
typedef struct tfc_gpu_graph tfc_gpu_graph;
tfc_status tfc_gpu_capture_begin(tfc_backend *be, tfc_error *err);
/* NULL with err when the capture failed (an op above, or CUDA's own refusal). */
tfc_gpu_graph *tfc_gpu_capture_end(tfc_backend *be, tfc_error *err);
void tfc_gpu_graph_launch(tfc_backend *be, const tfc_gpu_graph *gr, uint64_t step_offset);
/* The nodes the graph holds (kernels, copies, memsets): the launches one replay saves. */
int tfc_gpu_graph_nodes(const tfc_gpu_graph *gr);
void tfc_gpu_graph_free(tfc_gpu_graph *gr);
/* For tests, process-wide: 1 makes every tfc_gpu_capture_end fail as an invalidated capture
 * does (the work recorded, not run, and dropped), to check what a caller does then. */
void tfc_gpu_test_fail_captures(int on);

/* For tests, process-wide: 1 puts the precision ops (round_bf16, round_f16, loss_scale_at)
 * into the GPU's op table, so models with `precision: bf16` or `float16` bind there (`make
 * test-gpu`'s bf16 case against the CPU's reference). Off by default: the ops have not run
 * on a GPU yet, and without them both precisions are refused. */
void tfc_gpu_test_enable_bf16(int on);

/* For tests, process-wide: 1 puts the kernels of TFC_BACKEND_LAYER_OPS (pact_*, prelu_*:
 * gpu_pact.cu; penalty, constrain: gpu_elementwise.cu; noise_*: gpu_noise.cu; groupnorm_*:
 * gpu_groupnorm.cu; simple_rnn_*: gpu_simple_rnn.cu; score_attention_*:
 * gpu_score_attention.cu; extremum_*: gpu_extremum.cu) into the GPU's op table, so models
 * with Keras's parametrised activation layers, weight regularizers and constraints, noise
 * layers, GroupNormalization, SimpleRNN, Attention, AdditiveAttention, Maximum and Minimum
 * bind there (`make test-gpu`'s pact, penalty, constrain, noise, groupnorm, simple_rnn,
 * score_attention and extremum cases against the CPU). Off by default: the kernels have not
 * run on a GPU yet, and without them those models are refused. */
void tfc_gpu_test_enable_layer_ops(int on);

/* Caps the device memory the allocator holds (bytes; 0 = no cap other than the GPU's own).
 * An allocation past the cap first releases cached free blocks, then fails (alloc returns
 * NULL and the caller reports the size). */
void tfc_gpu_set_memory_limit(tfc_backend *be, size_t bytes);

/* The first error any op met since creation (or the last call of this function), copied
 * into err; TFC_OK when none. Ops are asynchronous and return nothing, so a failing CUDA,
 * cuBLAS or cuDNN call is recorded here with the call's text and the library's message.
 * Clears the recorded error. The table's status op: the trainer asks it through
 * tfc_backend_status after each step's download. */
tfc_status tfc_gpu_status(tfc_backend *be, tfc_error *err);

typedef struct tfc_gpu_memory {
    size_t in_use;        /* bytes handed out by alloc and not yet freed */
    size_t reserved;      /* bytes obtained from cudaMalloc (in use + cached) */
    size_t peak_in_use;   /* maxima since creation */
    size_t peak_reserved;
    size_t limit;         /* tfc_gpu_set_memory_limit, 0 = none */
    size_t device_free, device_total; /* cudaMemGetInfo at the time of the call */
} tfc_gpu_memory;

/* Memory statistics of the caching allocator (zeros for a non-GPU backend). */
void tfc_gpu_memory_stats(tfc_backend *be, tfc_gpu_memory *out);

/* "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)" for a GPU backend, "" otherwise. */
const char *tfc_gpu_device_name(const tfc_backend *be);

/* ---- the nccl engine (gpu_nccl.cu; builds with TFC_HAVE_NCCL only) ----------------------- */

typedef struct tfc_comm tfc_comm;
typedef struct tfc_gpu_nccl tfc_gpu_nccl;

/* A communicator of world's ranks for device buffers of `be` (this rank's GPU): rank 0's
 * unique id goes to every rank through world's broadcast (every rank must call this). Any
 * NCCL call taking more than timeout_s (<= 0: 60 s) aborts the communicator and fails, so
 * a dead rank ends its peers' calls. NULL with err (TFC_ERR_DEVICE) on failure. */
tfc_gpu_nccl *tfc_gpu_nccl_open(tfc_backend *be, tfc_comm *world, double timeout_s,
                                tfc_error *err);
/* Sums `count` float32 values of the device buffer `buf` over the ranks, in place, on the
 * backend's stream (after the work already queued there); returns when the sum is done. */
tfc_status tfc_gpu_nccl_allreduce(tfc_gpu_nccl *n, float *buf, int64_t count, tfc_error *err);
/* Finalizes (or, after a failure, aborts) and frees; NULL is fine. */
void tfc_gpu_nccl_close(tfc_gpu_nccl *n);
/* The NCCL library's version, "2.28.3". */
const char *tfc_gpu_nccl_version(void);

/* ---- the math ops ----------------------------------------------------------------------
 * tfc_gpu_<op>: C-callable launchers for every op of TFC_BACKEND_MATH_OPS (contracts in
 * core/backend.h), each defined in the .cu of its family: gemm in gpu_gemm.cu; axpy, scale,
 * bias_*, copy2d, act_*, dropout_*, sumsq and count_nonfinite in gpu_elementwise.cu;
 * conv_* in gpu_conv.cu; pool_* in gpu_pool.cu; bn_* in gpu_norm.cu; gather and scatter_add
 * in gpu_embed.cu; lstm_* in gpu_lstm.cu; loss and accuracy in gpu_loss.cu;
 * optimizer_update in gpu_optim.cu; gru_* in gpu_gru.cu; rnn_input_* and bidir_* in
 * gpu_rnn.cu; grouped_conv_*, conv1d_* and masked_mean_* in gpu_conv1d.cu; depthwise_* in
 * gpu_depthwise.cu; upsample_* in gpu_resize.cu; warp_* and contrast_* in gpu_augment.cu;
 * attention_* in gpu_attention.cu; layernorm_*, mul, mul_reduce and masking_* in
 * gpu_layernorm.cu. The trainer's step ops (TFC_BACKEND_STEP_OPS: grad_sumsq, step_scale,
 * optimizer_update_at) in gpu_optim.cu too; round_bf16, round_f16 and loss_scale_at in
 * gpu_elementwise.cu.
 * The precision ops (TFC_BACKEND_PRECISION_OPS) stay outside the table until
 * tfc_gpu_test_enable_bf16's case has passed on a GPU.
 * The layer ops (TFC_BACKEND_LAYER_OPS: pact_* and prelu_* in gpu_pact.cu, penalty and
 * constrain in gpu_elementwise.cu, noise_* in gpu_noise.cu, groupnorm_* in gpu_groupnorm.cu,
 * simple_rnn_* in gpu_simple_rnn.cu, score_attention_* in gpu_score_attention.cu,
 * extremum_* in gpu_extremum.cu) stay
 * outside it until tfc_gpu_test_enable_layer_ops's cases have.
 */
#define TFC_GPU_DECLARE(ret, op, params) ret tfc_gpu_##op params;
TFC_BACKEND_MATH_OPS(TFC_GPU_DECLARE)
TFC_BACKEND_STEP_OPS(TFC_GPU_DECLARE)
TFC_BACKEND_PRECISION_OPS(TFC_GPU_DECLARE)
TFC_BACKEND_LAYER_OPS(TFC_GPU_DECLARE)
#undef TFC_GPU_DECLARE

#ifdef __cplusplus
}
#endif

#endif
