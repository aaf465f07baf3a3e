/* Private to the CUDA backend: the state behind tfc_backend.impl (device, stream, library
 * handles, caching allocator, scratch, pinned staging), the TFC_*_TRY wrappers that record a
 * failing call's text and the library's message as the backend's sticky error (library code
 * never exits), launch-size helpers, and the deterministic reductions several files share.
 * Included by the .cu files only; C code sees gpu.h. */
#ifndef TFC_GPU_GPU_INTERNAL_CUH
#define TFC_GPU_GPU_INTERNAL_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "gpu/gpu.h"

#include "core/rng.h"

/* Threads per block of the element-wise kernels. */
#define GPU_THREADS 256

/* Pinned staging buffers for uploads and downloads (a ring, each with an event that says
 * when its last copy finished) and the largest transfer staged (larger ones go direct). */
#define GPU_STAGES 4
#define GPU_STAGE_MAX ((size_t)64 << 20)

typedef struct gpu_block {
    void *ptr;
    size_t size; /* the size class, what cudaMalloc was asked for */
} gpu_block;

typedef struct gpu_stage {
    void *host;
    size_t cap;
    cudaEvent_t done;
} gpu_stage;

typedef struct gpu_conv_cache gpu_conv_cache; /* gpu_conv.cu */

typedef struct gpu_ctx {
    int device;
    int sm_count, cc_major, cc_minor;
    size_t smem_optin; /* shared memory a block may opt in to (bytes) */
    char name[192];
    cudaStream_t stream;
    cublasHandle_t blas;
    cudnnHandle_t dnn;
    int deterministic, tf32;
    int attention_no_split; /* tfc_gpu_set_attention_no_split */
    int conv_find;          /* tfc_gpu_set_conv_find */
    int fast_norm;          /* tfc_gpu_set_fast_norm */
    int capturing;          /* a CUDA graph capture is under way (gpu_graph.cu) */
    uint64_t *step_offset;  /* device: what a replay adds to its captured step numbers */
    int graphs;             /* graphs captured on this backend and not yet freed */

    /* sticky error: the first failure since the last tfc_gpu_status */
    tfc_error err;
    int failed;

    /* caching allocator: blocks handed out (live) and cached free blocks, by size class */
    gpu_block *live, *cached;
    int nlive, live_cap, ncached, cached_cap;
    size_t in_use, reserved, peak_in_use, peak_reserved, limit;

    /* scratch for ops without a workspace argument (reductions, statistics) */
    void *scratch;
    size_t scratch_bytes;
    /* scratch blocks outgrown while graphs exist, which may still use them: freed with the
     * last graph (tfc_gpu_scratch_release_retired) */
    void **retired;
    int nretired, retired_cap;

    gpu_stage stage[GPU_STAGES];
    int stage_next;
    void *host_result; /* pinned 64 bytes for scalar results */

    gpu_conv_cache *conv;
} gpu_ctx;

static inline gpu_ctx *gpu_of(tfc_backend *be)
{
    return (gpu_ctx *)be->impl;
}

/* The helpers the .cu files share are declared with C linkage, as gpu.h's are, so that
 * every symbol of libtfc keeps its plain tfc_ name. */
extern "C" {

/* Record a failure (first one wins; later ones are counted) and return 1; return 0 on
 * success. `call` is the source text of the call. */
int tfc_gpu_fail(gpu_ctx *g, const char *call, const char *what, const char *file, int line);
int tfc_gpu_cuda_failed(gpu_ctx *g, cudaError_t e, const char *call, const char *file, int line);
int tfc_gpu_cublas_failed(gpu_ctx *g, cublasStatus_t s, const char *call, const char *file,
                          int line);
int tfc_gpu_cudnn_failed(gpu_ctx *g, cudnnStatus_t s, const char *call, const char *file,
                         int line);

/* Run `call`; on failure record it and `return __VA_ARGS__` (nothing for void functions). */
#define TFC_CUDA_TRY(g, call, ...)                                                     \
    do {                                                                               \
        if (tfc_gpu_cuda_failed((g), (call), #call, __FILE__, __LINE__)) return __VA_ARGS__; \
    } while (0)
#define TFC_CUBLAS_TRY(g, call, ...)                                                     \
    do {                                                                                 \
        if (tfc_gpu_cublas_failed((g), (call), #call, __FILE__, __LINE__)) return __VA_ARGS__; \
    } while (0)
#define TFC_CUDNN_TRY(g, call, ...)                                                     \
    do {                                                                                \
        if (tfc_gpu_cudnn_failed((g), (call), #call, __FILE__, __LINE__)) return __VA_ARGS__; \
    } while (0)
/* After a kernel launch: a bad configuration shows up in cudaGetLastError. */
#define TFC_LAUNCH_CHECK(g, kernel, ...)                                                    \
    do {                                                                                    \
        if (tfc_gpu_cuda_failed((g), cudaGetLastError(), "launch " #kernel, __FILE__, __LINE__)) \
            return __VA_ARGS__;                                                             \
    } while (0)

/* Device scratch of at least `bytes` (grown, never shrunk; contents undefined), or NULL
 * with the error recorded. Stream order makes reuse between ops safe. While graphs exist,
 * an outgrown block is retired rather than freed (a graph may still use it). */
void *tfc_gpu_scratch(gpu_ctx *g, size_t bytes);
void tfc_gpu_scratch_release_retired(gpu_ctx *g);

/* During a CUDA graph capture (gpu_graph.cu): records "OP while a CUDA graph is being
 * captured ..." and returns 1, for the ops that must not run then (they wait for the
 * device or allocate); 0 otherwise. */
int tfc_gpu_capture_refused(gpu_ctx *g, const char *op, const char *file, int line);

/* The table's TFC_BACKEND_GRAPH_OPS over gpu.h's tfc_gpu_graph functions (gpu_graph.cu). */
void *tfc_gpu_graph_op_capture_end(tfc_backend *be, tfc_error *err);
void tfc_gpu_graph_op_launch(tfc_backend *be, const void *graph, uint64_t step_offset);
void tfc_gpu_graph_op_free(tfc_backend *be, void *graph);
/* The step offset the kernels that draw per-step random numbers (dropout, the recurrent
 * input's dropout, attention's, augmentation) add to the step they are launched with:
 * during a capture the graph's (each replay writes its step minus the captured one there,
 * tfc_gpu_graph_launch), NULL (nothing added, nothing read) otherwise. */
static inline const uint64_t *gpu_step_offset(const gpu_ctx *g)
{
    return g->capturing ? g->step_offset : NULL;
}

#define GPU_CAPTURE_REFUSE(g, op, ...)                                       \
    do {                                                                     \
        if (tfc_gpu_capture_refused((g), (op), __FILE__, __LINE__)) return __VA_ARGS__; \
    } while (0)

/* A pinned host buffer of at least `bytes` from the staging ring whose previous copy has
 * finished; the caller records the stage's `done` event after enqueueing its own copy, so
 * the next user waits for it. NULL with the error recorded. */
gpu_stage *tfc_gpu_stage_take(gpu_ctx *g, size_t bytes);

/* Frees the convolution plans (descriptors, chosen algorithms) that gpu_conv.cu caches per
 * shape; they depend on the deterministic, tf32 and conv_find settings. */
void tfc_gpu_conv_cache_free(gpu_ctx *g);

/* gpu_conv.cu's convolution in `groups` groups (cudnnSetConvolutionGroupCount; 1: plain):
 * the d->c channels and d->f filters split into equal runs, w [kh, kw, c / groups, f] (Keras's
 * layout), the plans cached per (desc, groups). forward overwrites y; data adds to dx, or
 * overwrites it with assign; filter adds to dw. ws: run_workspace(d) bytes, which also serve
 * fewer images and any groups. What conv_*, grouped_conv_* and conv1d_* run. */
size_t tfc_gpu_conv_run_workspace(const tfc_conv_desc *d);
/* The ctx's scratch as that workspace, for the ops that take none (grouped_conv_*); NULL
 * when there is nothing to compute or on a recorded failure. */
void *tfc_gpu_conv_run_scratch(gpu_ctx *g, const tfc_conv_desc *d);
void tfc_gpu_conv_run_forward(tfc_backend *be, const tfc_conv_desc *d, int groups,
                              const float *x, const float *w, float *y, void *ws);
void tfc_gpu_conv_run_data(tfc_backend *be, const tfc_conv_desc *d, int groups,
                           const float *dy, const float *w, float *dx, int assign, void *ws);
void tfc_gpu_conv_run_filter(tfc_backend *be, const tfc_conv_desc *d, int groups,
                             const float *x, const float *dy, float *dw, void *ws);

/* Blocks for a grid-stride loop over n items: enough to fill the GPU, no more. */
static inline int gpu_blocks(const gpu_ctx *g, int64_t n, int threads = GPU_THREADS)
{
    int64_t b = (n + threads - 1) / threads;
    int64_t cap = (int64_t)g->sm_count * 32;
    if (b > cap) b = cap;
    return b < 1 ? 1 : (int)b;
}

/* Bytes rounded up to 256 so that pieces carved from one buffer stay aligned. */
static inline size_t gpu_align(size_t bytes)
{
    return (bytes + 255) & ~(size_t)255;
}

/* ---- deterministic reductions (gpu_elementwise.cu) ----------------------------------- */

/* Blocks (and partial sums) of the first pass of a reduction over n items: a function of
 * n only, so the summation order, and the result, never depend on the device. */
int tfc_gpu_reduce_blocks(int64_t n);

/* out[0] = sum of in[0..n) (device pointers), in double, in a fixed order; `partials` has
 * tfc_gpu_reduce_blocks(n) doubles. Returns nonzero on a recorded failure. */
int tfc_gpu_sum_f64(gpu_ctx *g, const double *in, int64_t n, double *partials, double *out);

/* out[0] (a device double) = the value tfc_gpu_sumsq(n, x) returns, the same bits, queued on
 * the stream without a wait (0.0 for n <= 0). Returns nonzero on a recorded failure. */
int tfc_gpu_sumsq_to(gpu_ctx *g, int64_t n, const float *x, double *out);
/* ---- the recurrent layers' shared steps (gpu_rnn.cu) ------------------------------------ */

/* hprev [n, t, u]: hprev[i, s] = hseq[i, s - 1], zero at s = 0. */
void tfc_gpu_rnn_shift(tfc_backend *be, int n, int t, int u, const float *hseq, float *hprev);

/* y = hseq [n, t, u] with return_sequences (nothing to do when y is hseq), else each
 * sequence's last step, y [n, u]. */
void tfc_gpu_rnn_output(tfc_backend *be, int n, int t, int u, int return_sequences,
                        const float *hseq, float *y);

} /* extern "C" */

/* ---- column sums (bias gradient, batch-norm statistics) ------------------------------ */

/* Column sums of a [rows, cols] matrix in double, deterministic: block (32, 8) takes 32
 * columns of one slice of rows; each thread sums every 8th row of its slice, the block
 * adds its 8 rows of partial sums, and partial[(k * splits + split) * cols + c] keeps one
 * value per (quantity k, split, column); a finishing kernel adds the splits in order.
 * F(r, c, v) fills v[0..NV) (double) with the NV quantities summed at element (r, c). */
#define COLSUM_TX 32
#define COLSUM_TY 8

/* Row slices: enough blocks for big matrices, and a function of rows only. */
static inline int colsum_splits(int64_t rows)
{
    int64_t s = rows / 1024;
    return s < 1 ? 1 : s > 128 ? 128 : (int)s;
}

template <int NV, typename F>
__global__ void colsum_kernel(int64_t rows, int cols, int64_t per_split, F f, double *partial)
{
    __shared__ double sh[NV][COLSUM_TY][COLSUM_TX];
    const int c = blockIdx.x * COLSUM_TX + threadIdx.x;
    const int64_t r0 = (int64_t)blockIdx.y * per_split;
    const int64_t r1 = r0 + per_split < rows ? r0 + per_split : rows;
    double acc[NV];
    for (int k = 0; k < NV; k++) acc[k] = 0.0;
    if (c < cols)
        for (int64_t r = r0 + threadIdx.y; r < r1; r += COLSUM_TY) {
            double v[NV];
            f(r, c, v);
            for (int k = 0; k < NV; k++) acc[k] += v[k];
        }
    for (int k = 0; k < NV; k++) sh[k][threadIdx.y][threadIdx.x] = acc[k];
    __syncthreads();
    if (threadIdx.y == 0 && c < cols)
        for (int k = 0; k < NV; k++) {
            double s = 0.0;
            for (int y = 0; y < COLSUM_TY; y++) s += sh[k][y][threadIdx.x];
            partial[((int64_t)k * gridDim.y + blockIdx.y) * cols + c] = s;
        }
}

/* The wider column sums of tfc_gpu_set_fast_norm (BatchNormalization's statistics and
 * gradients, the bias gradient): slices of 256 rows, at most 256 of them (a function of
 * rows only, so deterministic), and blocks of 256 threads whose width follows the columns
 * (8, 16 or 32 of them, the rest of the block taking more rows), so that narrow matrices
 * (BatchNormalization over 16 channels) keep every thread busy and each thread sums a
 * few dozen rows rather than a hundred or more. The same partial layout as colsum_kernel,
 * finished by colsum_total with colsum_splits_fast's count. */
static inline int colsum_splits_fast(int64_t rows)
{
    int64_t s = (rows + 255) / 256;
    return s < 1 ? 1 : s > 256 ? 256 : (int)s;
}

template <int NV, typename F>
__global__ void colsum_wide_kernel(int64_t rows, int cols, int64_t per_split, F f,
                                   double *partial)
{
    __shared__ double sh[NV][256];
    const int tx = threadIdx.x, ty = threadIdx.y, bx = blockDim.x, by = blockDim.y;
    const int c = blockIdx.x * bx + tx;
    const int64_t r0 = (int64_t)blockIdx.y * per_split;
    const int64_t r1 = r0 + per_split < rows ? r0 + per_split : rows;
    double acc[NV];
    for (int k = 0; k < NV; k++) acc[k] = 0.0;
    if (c < cols) {
#pragma unroll 4
        for (int64_t r = r0 + ty; r < r1; r += by) {
            double v[NV];
            f(r, c, v);
            for (int k = 0; k < NV; k++) acc[k] += v[k];
        }
    }
    for (int k = 0; k < NV; k++) sh[k][ty * bx + tx] = acc[k];
    __syncthreads();
    if (ty == 0 && c < cols)
        for (int k = 0; k < NV; k++) {
            double s = 0.0;
            for (int y = 0; y < by; y++) s += sh[k][y * bx + tx];
            partial[((int64_t)k * gridDim.y + blockIdx.y) * cols + c] = s;
        }
}

template <int NV, typename F>
static inline int gpu_colsum_fast(gpu_ctx *g, int64_t rows, int cols, F f, double *partial)
{
    const int splits = colsum_splits_fast(rows);
    const int64_t per = (rows + splits - 1) / splits;
    const int tx = cols <= 8 ? 8 : cols <= 16 ? 16 : 32;
    dim3 grid((unsigned)((cols + tx - 1) / tx), (unsigned)splits);
    colsum_wide_kernel<NV><<<grid, dim3(tx, 256 / tx), 0, g->stream>>>(rows, cols, per, f,
                                                                       partial);
    TFC_LAUNCH_CHECK(g, colsum_wide_kernel, 1);
    return 0;
}

/* Sum over splits of quantity k at column c (in split order). */
__device__ __forceinline__ double colsum_total(const double *partial, int k, int splits,
                                               int cols, int c)
{
    double s = 0.0;
    for (int j = 0; j < splits; j++) s += partial[((int64_t)k * splits + j) * cols + c];
    return s;
}

/* Launches colsum_kernel; partial needs NV * colsum_splits(rows) * cols doubles. */
template <int NV, typename F>
int gpu_colsum(gpu_ctx *g, int64_t rows, int cols, F f, double *partial)
{
    const int splits = colsum_splits(rows);
    const int64_t per = (rows + splits - 1) / splits;
    dim3 grid((unsigned)((cols + COLSUM_TX - 1) / COLSUM_TX), (unsigned)splits);
    colsum_kernel<NV><<<grid, dim3(COLSUM_TX, COLSUM_TY), 0, g->stream>>>(rows, cols, per, f,
                                                                          partial);
    TFC_LAUNCH_CHECK(g, colsum_kernel, 1);
    return 0;
}

/* Warp-wide sums (all 32 lanes active). */
__device__ __forceinline__ double warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ int warp_sum(int v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

#endif
