/* The CUDA backend (src/gpu/) as seen from C: creation and device count (core/device.c
 * calls these), run-time options the solver sets (determinism, TF32, a memory limit), the
 * sticky error that asynchronous ops leave behind, memory statistics, and the C-callable
 * launchers each src/gpu/ file contributes to the op table. Plain C: no CUDA header here, so
 * any file may include it; everything exists only in builds with TFC_HAVE_CUDA. */
#ifndef TFC_GPU_GPU_H
#define TFC_GPU_GPU_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* core headers are C: C linkage for their declarations when a .cu includes this one */
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

/* Caps the device memory the allocator holds (bytes; 0 = no cap other than the GPU's own).
 * An allocation past the cap first releases cached free blocks, then fails (alloc returns
 * NULL and the caller reports the size). */
void tfc_gpu_set_memory_limit(tfc_backend *be, size_t bytes);

/* The first error any op met since creation (or the last call of this function), copied
 * into err; TFC_OK when none. Ops are asynchronous and return nothing, so a failing CUDA,
 * cuBLAS or cuDNN call is recorded here with the call's text and the library's message;
 * the trainer checks this after each step's download. Clears the recorded error. */
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

/* ---- launchers: the ops each .cu contributes (semantics in core/backend.h) ------------- */

/* gpu_gemm.cu */
void tfc_gpu_gemm(tfc_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
                  const float *a, int lda, const float *b, int ldb, float beta, float *c,
                  int ldc);

/* gpu_elementwise.cu */
void tfc_gpu_axpy(tfc_backend *be, int64_t n, float alpha, const float *x, float *y);
void tfc_gpu_scale(tfc_backend *be, int64_t n, float alpha, float *x);
void tfc_gpu_bias_add(tfc_backend *be, int64_t rows, int cols, const float *b, float *y);
void tfc_gpu_bias_grad(tfc_backend *be, int64_t rows, int cols, const float *dy, float *db);
void tfc_gpu_copy2d(tfc_backend *be, int64_t rows, int cols, const float *src, int src_ld,
                    float *dst, int dst_ld, int accumulate);
void tfc_gpu_act_forward(tfc_backend *be, tfc_act act, int64_t n, int cols, const float *x,
                         float *y);
void tfc_gpu_act_backward(tfc_backend *be, tfc_act act, int64_t n, int cols, const float *x,
                          const float *y, const float *dy, float *dx);
void tfc_gpu_dropout_forward(tfc_backend *be, int64_t n, float rate, uint64_t key,
                             uint64_t step, const float *x, float *y);
void tfc_gpu_dropout_backward(tfc_backend *be, int64_t n, float rate, uint64_t key,
                              uint64_t step, const float *dy, float *dx);
double tfc_gpu_sumsq(tfc_backend *be, int64_t n, const float *x);
int64_t tfc_gpu_count_nonfinite(tfc_backend *be, int64_t n, const float *x);

/* gpu_conv.cu */
size_t tfc_gpu_conv_workspace(tfc_backend *be, const tfc_conv_desc *d);
void tfc_gpu_conv_forward(tfc_backend *be, const tfc_conv_desc *d, const float *x,
                          const float *w, float *y, void *ws);
void tfc_gpu_conv_backward_data(tfc_backend *be, const tfc_conv_desc *d, const float *dy,
                                const float *w, float *dx, void *ws);
void tfc_gpu_conv_backward_filter(tfc_backend *be, const tfc_conv_desc *d, const float *x,
                                  const float *dy, float *dw, void *ws);

/* gpu_pool.cu */
void tfc_gpu_pool_forward(tfc_backend *be, const tfc_pool_desc *d, const float *x, float *y,
                          int32_t *argmax);
void tfc_gpu_pool_backward(tfc_backend *be, const tfc_pool_desc *d, const float *dy,
                           const int32_t *argmax, float *dx);

/* gpu_norm.cu */
void tfc_gpu_bn_forward_train(tfc_backend *be, int64_t rows, int cols, const float *x,
                              const float *gamma, const float *beta, float eps, float momentum,
                              float *moving_mean, float *moving_var, float *y, float *save_mean,
                              float *save_invstd);
void tfc_gpu_bn_forward_infer(tfc_backend *be, int64_t rows, int cols, const float *x,
                              const float *gamma, const float *beta, const float *moving_mean,
                              const float *moving_var, float eps, float *y);
void tfc_gpu_bn_backward(tfc_backend *be, int64_t rows, int cols, const float *x,
                         const float *dy, const float *gamma, const float *save_mean,
                         const float *save_invstd, float *dx, float *dgamma, float *dbeta);

/* gpu_embed.cu */
void tfc_gpu_gather(tfc_backend *be, int64_t n, int dim, const int32_t *ids, const float *table,
                    float *y);
void tfc_gpu_scatter_add(tfc_backend *be, int64_t n, int dim, const int32_t *ids,
                         const float *dy, float *dtable);

/* gpu_lstm.cu */
size_t tfc_gpu_lstm_workspace(tfc_backend *be, const tfc_lstm_desc *d);
void tfc_gpu_lstm_forward(tfc_backend *be, const tfc_lstm_desc *d, const float *x,
                          const float *kernel, const float *rkernel, const float *bias,
                          const float *mask, float *y, float *hseq, float *cseq, float *gates,
                          void *ws);
void tfc_gpu_lstm_backward(tfc_backend *be, const tfc_lstm_desc *d, const float *x,
                           const float *kernel, const float *rkernel, const float *mask,
                           const float *hseq, const float *cseq, const float *gates,
                           const float *dy, float *dx, float *dkernel, float *drkernel,
                           float *dbias, void *ws);

/* gpu_loss.cu */
void tfc_gpu_loss(tfc_backend *be, tfc_loss_kind kind, int from_logits, int64_t rows,
                  int classes, const float *x, const void *labels, const float *row_weight,
                  float scale, float *loss_out, float *dx);
void tfc_gpu_accuracy(tfc_backend *be, tfc_loss_kind kind, int from_logits, int64_t rows,
                      int classes, int k, const float *x, const void *labels,
                      const float *row_weight, float *count_out);

/* gpu_optim.cu */
void tfc_gpu_optimizer_update(tfc_backend *be, const tfc_optim_desc *d, int64_t n,
                              float *params, const float *grads, float *slot0, float *slot1,
                              float *slot2);

#ifdef __cplusplus
}
#endif

#endif
