/* The CUDA backend's table and everything that is not math: device discovery and
 * creation (one non-blocking stream, a cuBLAS and a cuDNN handle bound to it), the caching
 * allocator (cudaMalloc'd blocks rounded to size classes and kept on free lists, so a
 * training step allocates nothing and a run holds only what its model needs), pinned
 * staging for host transfers, scratch, the sticky error behind the TFC_*_TRY wrappers (the
 * table's status op), and the options that its configure op sets. */
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu_internal.cuh"

/* ---- errors ------------------------------------------------------------------------- */

int tfc_gpu_fail(gpu_ctx *g, const char *call, const char *what, const char *file, int line)
{
    if (!g->failed) {
        tfc_error_clear(&g->err);
        tfc_error_set(&g->err, TFC_ERR_DEVICE, "gpu:%d: %s failed: %s (%s:%d)", g->device, call,
                      what, file, line);
    }
    g->failed++;
    return 1;
}

int tfc_gpu_cuda_failed(gpu_ctx *g, cudaError_t e, const char *call, const char *file, int line)
{
    if (e == cudaSuccess) return 0;
    char what[256];
    snprintf(what, sizeof what, "%s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
    return tfc_gpu_fail(g, call, what, file, line);
}

int tfc_gpu_cublas_failed(gpu_ctx *g, cublasStatus_t s, const char *call, const char *file, int line)
{
    if (s == CUBLAS_STATUS_SUCCESS) return 0;
    return tfc_gpu_fail(g, call, cublasGetStatusString(s), file, line);
}

int tfc_gpu_cudnn_failed(gpu_ctx *g, cudnnStatus_t s, const char *call, const char *file, int line)
{
    if (s == CUDNN_STATUS_SUCCESS) return 0;
    return tfc_gpu_fail(g, call, cudnnGetErrorString(s), file, line);
}

/* ---- caching allocator ----------------------------------------------------------------- */

/* Size classes: 512 bytes and up, four per power of two (at most 25% rounding), and above
 * 32 MiB multiples of 2 MiB (the arenas: at most 2 MiB more). Blocks of a class are
 * interchangeable, so a freed block serves the next request of its class without
 * cudaMalloc (which synchronises the device). */
static size_t size_class(size_t bytes)
{
    if (bytes <= 512) return 512;
    if (bytes > ((size_t)32 << 20)) return (bytes + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
    int e = 63 - __builtin_clzll((unsigned long long)(bytes - 1)); /* 2^e < bytes <= 2^(e+1) */
    size_t step = (size_t)1 << (e - 2);                            /* 2^e / 4 */
    return (bytes + step - 1) / step * step;
}

static int push_block(gpu_block **v, int *n, int *cap, gpu_block b)
{
    if (*n == *cap) {
        int nc = *cap ? 2 * *cap : 64;
        gpu_block *nv = (gpu_block *)realloc(*v, (size_t)nc * sizeof **v);
        if (!nv) return 1;
        *v = nv;
        *cap = nc;
    }
    (*v)[(*n)++] = b;
    return 0;
}

/* cudaFree every cached block (cudaFree synchronises, so pending work is done first). */
static void release_cached(gpu_ctx *g)
{
    for (int i = 0; i < g->ncached; i++) {
        cudaFree(g->cached[i].ptr);
        g->reserved -= g->cached[i].size;
    }
    g->ncached = 0;
}

static void *alloc_block(gpu_ctx *g, size_t bytes)
{
    GPU_CAPTURE_REFUSE(g, "alloc", NULL);
    if (bytes > ((size_t)1 << 46)) return NULL; /* 64 TiB: no GPU has it, and no overflow below */
    size_t size = size_class(bytes);
    gpu_block b = {NULL, size};
    /* the most recently freed block of the class: likeliest still in L2 */
    for (int i = g->ncached - 1; i >= 0; i--)
        if (g->cached[i].size == size) {
            b = g->cached[i];
            g->cached[i] = g->cached[--g->ncached];
            break;
        }
    if (!b.ptr) {
        if (g->limit && g->reserved + size > g->limit) release_cached(g);
        if (g->limit && g->reserved + size > g->limit) return NULL;
        cudaError_t e = cudaMalloc(&b.ptr, size);
        if (e == cudaErrorMemoryAllocation && g->ncached) {
            (void)cudaGetLastError();
            release_cached(g);
            e = cudaMalloc(&b.ptr, size);
        }
        if (e != cudaSuccess) {
            (void)cudaGetLastError(); /* out of memory is not sticky: the caller reports it */
            return NULL;
        }
        g->reserved += size;
        if (g->reserved > g->peak_reserved) g->peak_reserved = g->reserved;
    }
    if (push_block(&g->live, &g->nlive, &g->live_cap, b)) {
        cudaFree(b.ptr);
        g->reserved -= size;
        return NULL;
    }
    g->in_use += size;
    if (g->in_use > g->peak_in_use) g->peak_in_use = g->in_use;
    return b.ptr;
}

/* The block goes back to its class's free list; work already enqueued on the stream that
 * still reads it finishes before any later user's work starts (one stream, in order). */
static void free_block(gpu_ctx *g, void *p)
{
    if (!p) return;
    GPU_CAPTURE_REFUSE(g, "free");
    for (int i = g->nlive - 1; i >= 0; i--)
        if (g->live[i].ptr == p) {
            gpu_block b = g->live[i];
            g->live[i] = g->live[--g->nlive];
            g->in_use -= b.size;
            if (push_block(&g->cached, &g->ncached, &g->cached_cap, b)) {
                cudaFree(b.ptr);
                g->reserved -= b.size;
            }
            return;
        }
    tfc_gpu_fail(g, "free", "pointer was not allocated by this backend", __FILE__, __LINE__);
}

static void *gpu_alloc(tfc_backend *be, size_t bytes)
{
    return alloc_block(gpu_of(be), bytes);
}

static void gpu_free(tfc_backend *be, void *p)
{
    free_block(gpu_of(be), p);
}

void *tfc_gpu_scratch(gpu_ctx *g, size_t bytes)
{
    if (bytes <= g->scratch_bytes && g->scratch) return g->scratch;
    GPU_CAPTURE_REFUSE(g, "growing the scratch", NULL);
    size_t want = bytes > 2 * g->scratch_bytes ? bytes : 2 * g->scratch_bytes;
    if (g->scratch && g->graphs) { /* a graph may still use it */
        if (g->nretired == g->retired_cap) {
            int nc = g->retired_cap ? 2 * g->retired_cap : 8;
            void **nr = (void **)realloc(g->retired, (size_t)nc * sizeof *nr);
            if (!nr) {
                tfc_gpu_fail(g, "scratch", "out of host memory", __FILE__, __LINE__);
                return NULL;
            }
            g->retired = nr;
            g->retired_cap = nc;
        }
        g->retired[g->nretired++] = g->scratch;
        g->scratch = NULL;
    }
    if (g->scratch) free_block(g, g->scratch);
    g->scratch = alloc_block(g, want);
    g->scratch_bytes = g->scratch ? want : 0;
    if (!g->scratch) {
        char what[96];
        snprintf(what, sizeof what, "out of device memory for %.1f MiB of scratch",
                 (double)want / (1 << 20));
        tfc_gpu_fail(g, "scratch", what, __FILE__, __LINE__);
    }
    return g->scratch;
}

void tfc_gpu_scratch_release_retired(gpu_ctx *g)
{
    for (int i = 0; i < g->nretired; i++) free_block(g, g->retired[i]);
    g->nretired = 0;
}

/* ---- transfers ---------------------------------------------------------------------------- */

gpu_stage *tfc_gpu_stage_take(gpu_ctx *g, size_t bytes)
{
    GPU_CAPTURE_REFUSE(g, "a staged transfer (upload or download)", NULL);
    gpu_stage *s = &g->stage[g->stage_next];
    g->stage_next = (g->stage_next + 1) % GPU_STAGES;
    TFC_CUDA_TRY(g, cudaEventSynchronize(s->done), NULL);
    if (s->cap < bytes) {
        if (s->host) cudaFreeHost(s->host);
        s->host = NULL;
        s->cap = 0;
        size_t want = bytes < ((size_t)1 << 20) ? (size_t)1 << 20 : bytes;
        TFC_CUDA_TRY(g, cudaHostAlloc(&s->host, want, cudaHostAllocDefault), NULL);
        s->cap = want;
    }
    return s;
}

/* Host to device without waiting for the GPU: the data is copied into a pinned staging
 * buffer (so the caller may reuse its memory at once) and the DMA is queued on the stream.
 * A pageable cudaMemcpyAsync would first wait for all queued work. */
static void gpu_upload(tfc_backend *be, void *dst, const void *src, size_t bytes)
{
    gpu_ctx *g = gpu_of(be);
    if (!bytes) return;
    GPU_CAPTURE_REFUSE(g, "upload");
    if (bytes > GPU_STAGE_MAX) { /* pageable: returns once src has been staged by CUDA */
        TFC_CUDA_TRY(g, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, g->stream));
        return;
    }
    gpu_stage *s = tfc_gpu_stage_take(g, bytes);
    if (!s) return;
    memcpy(s->host, src, bytes);
    TFC_CUDA_TRY(g, cudaMemcpyAsync(dst, s->host, bytes, cudaMemcpyHostToDevice, g->stream));
    TFC_CUDA_TRY(g, cudaEventRecord(s->done, g->stream));
}

/* Device to host, synchronous: returns when the data is in host memory. */
static void gpu_download(tfc_backend *be, void *dst, const void *src, size_t bytes)
{
    gpu_ctx *g = gpu_of(be);
    if (!bytes) return;
    if (tfc_gpu_capture_refused(g, "download", __FILE__, __LINE__)) {
        memset(dst, 0, bytes);
        return;
    }
    if (bytes > GPU_STAGE_MAX) {
        TFC_CUDA_TRY(g, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, g->stream));
        TFC_CUDA_TRY(g, cudaStreamSynchronize(g->stream));
        return;
    }
    gpu_stage *s = tfc_gpu_stage_take(g, bytes);
    if (!s) {
        memset(dst, 0, bytes);
        return;
    }
    TFC_CUDA_TRY(g, cudaMemcpyAsync(s->host, src, bytes, cudaMemcpyDeviceToHost, g->stream));
    TFC_CUDA_TRY(g, cudaEventRecord(s->done, g->stream));
    TFC_CUDA_TRY(g, cudaEventSynchronize(s->done));
    memcpy(dst, s->host, bytes);
}

static void gpu_copy(tfc_backend *be, void *dst, const void *src, size_t bytes)
{
    gpu_ctx *g = gpu_of(be);
    if (!bytes || dst == src) return;
    TFC_CUDA_TRY(g, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, g->stream));
}

static void gpu_zero(tfc_backend *be, void *p, size_t bytes)
{
    gpu_ctx *g = gpu_of(be);
    if (!bytes) return;
    TFC_CUDA_TRY(g, cudaMemsetAsync(p, 0, bytes, g->stream));
}

static void gpu_sync(tfc_backend *be)
{
    gpu_ctx *g = gpu_of(be);
    GPU_CAPTURE_REFUSE(g, "sync");
    TFC_CUDA_TRY(g, cudaStreamSynchronize(g->stream));
}

/* ---- the table ----------------------------------------------------------------------------- */

static void gpu_destroy(tfc_backend *be)
{
    gpu_ctx *g = gpu_of(be);
    if (g) {
        cudaSetDevice(g->device);
        if (g->stream) cudaStreamSynchronize(g->stream);
        tfc_gpu_conv_cache_free(g);
        free(g->retired); /* the blocks themselves are among the live ones */
        for (int i = 0; i < g->nlive; i++) cudaFree(g->live[i].ptr);
        for (int i = 0; i < g->ncached; i++) cudaFree(g->cached[i].ptr);
        free(g->live);
        free(g->cached);
        for (int i = 0; i < GPU_STAGES; i++) {
            if (g->stage[i].host) cudaFreeHost(g->stage[i].host);
            if (g->stage[i].done) cudaEventDestroy(g->stage[i].done);
        }
        if (g->host_result) cudaFreeHost(g->host_result);
        if (g->dnn) cudnnDestroy(g->dnn);
        if (g->blas) cublasDestroy(g->blas);
        if (g->stream) cudaStreamDestroy(g->stream);
        free(g);
    }
    free(be);
}

/* The solver's options; each setter does nothing when its value does not change. */
static void gpu_configure(tfc_backend *be, const tfc_device_options *o)
{
    tfc_gpu_set_deterministic(be, o->deterministic);
    tfc_gpu_set_tf32(be, o->tf32);
    tfc_gpu_set_memory_limit(be, o->memory_limit);
}

/* The ops of TFC_BACKEND_LAYER_OPS have no GPU kernel yet (an op leaves that list once it
 * has one): NULL, so that a model needing one is refused at bind (graph.c). */
#define GPU_NO_KERNEL(ret, op, params) .op = NULL,

static tfc_backend_ops gpu_ops = { /* not const: tfc_gpu_test_enable_bf16, _layer_ops */
    .name = "gpu",
    .destroy = gpu_destroy,
    .configure = gpu_configure,
    .status = tfc_gpu_status,
    .alloc = gpu_alloc,
    .free = gpu_free,
    .upload = gpu_upload,
    .download = gpu_download,
    .copy = gpu_copy,
    .zero = gpu_zero,
    .sync = gpu_sync,
    .gemm = tfc_gpu_gemm,
    .gemm_weights = tfc_gpu_gemm, /* cuBLAS reads B in place */
    .axpy = tfc_gpu_axpy,
    .add = tfc_gpu_add,
    .scale = tfc_gpu_scale,
    .bias_add = tfc_gpu_bias_add,
    .bias_grad = tfc_gpu_bias_grad,
    .copy2d = tfc_gpu_copy2d,
    .act_forward = tfc_gpu_act_forward,
    .act_backward = tfc_gpu_act_backward,
    .dropout_forward = tfc_gpu_dropout_forward,
    .dropout_backward = tfc_gpu_dropout_backward,
    .conv_workspace = tfc_gpu_conv_workspace,
    .conv_forward = tfc_gpu_conv_forward,
    .conv_backward_data = tfc_gpu_conv_backward_data,
    .conv_backward_filter = tfc_gpu_conv_backward_filter,
    .pool_forward = tfc_gpu_pool_forward,
    .pool_backward = tfc_gpu_pool_backward,
    .bn_forward_train = tfc_gpu_bn_forward_train,
    .bn_forward_infer = tfc_gpu_bn_forward_infer,
    .bn_backward = tfc_gpu_bn_backward,
    .gather = tfc_gpu_gather,
    .scatter_add = tfc_gpu_scatter_add,
    .lstm_workspace = tfc_gpu_lstm_workspace,
    .lstm_forward = tfc_gpu_lstm_forward,
    .lstm_backward = tfc_gpu_lstm_backward,
    .loss = tfc_gpu_loss,
    .accuracy = tfc_gpu_accuracy,
    .sumsq = tfc_gpu_sumsq,
    .count_nonfinite = tfc_gpu_count_nonfinite,
    .optimizer_update = tfc_gpu_optimizer_update,
    .gru_workspace = tfc_gpu_gru_workspace,
    .gru_forward = tfc_gpu_gru_forward,
    .gru_backward = tfc_gpu_gru_backward,
    .rnn_input_forward = tfc_gpu_rnn_input_forward,
    .rnn_input_backward = tfc_gpu_rnn_input_backward,
    .bidir_forward = tfc_gpu_bidir_forward,
    .bidir_backward = tfc_gpu_bidir_backward,
    .grouped_conv_forward = tfc_gpu_grouped_conv_forward,
    .grouped_conv_backward_data = tfc_gpu_grouped_conv_backward_data,
    .grouped_conv_backward_filter = tfc_gpu_grouped_conv_backward_filter,
    .conv1d_workspace = tfc_gpu_conv1d_workspace,
    .conv1d_forward = tfc_gpu_conv1d_forward,
    .conv1d_backward_data = tfc_gpu_conv1d_backward_data,
    .conv1d_backward_filter = tfc_gpu_conv1d_backward_filter,
    .masked_mean_forward = tfc_gpu_masked_mean_forward,
    .masked_mean_backward = tfc_gpu_masked_mean_backward,
    .depthwise_workspace = tfc_gpu_depthwise_workspace,
    .depthwise_forward = tfc_gpu_depthwise_forward,
    .depthwise_backward_data = tfc_gpu_depthwise_backward_data,
    .depthwise_backward_filter = tfc_gpu_depthwise_backward_filter,
    .upsample_forward = tfc_gpu_upsample_forward,
    .upsample_backward = tfc_gpu_upsample_backward,
    .warp_forward = tfc_gpu_warp_forward,
    .warp_backward = tfc_gpu_warp_backward,
    .contrast_forward = tfc_gpu_contrast_forward,
    .contrast_backward = tfc_gpu_contrast_backward,
    .mul = tfc_gpu_mul,
    .mul_reduce = tfc_gpu_mul_reduce,
    .layernorm_forward = tfc_gpu_layernorm_forward,
    .layernorm_workspace = tfc_gpu_layernorm_workspace,
    .layernorm_backward = tfc_gpu_layernorm_backward,
    .attention_forward = tfc_gpu_attention_forward,
    .attention_backward = tfc_gpu_attention_backward,
    .masking_forward = tfc_gpu_masking_forward,
    .masking_backward = tfc_gpu_masking_backward,
    /* the layer kernels that have not run on a GPU yet (core/backend.h; gpu_pact.cu,
     * gpu_elementwise.cu's penalty and constrain, gpu_noise.cu, gpu_groupnorm.cu,
     * gpu_simple_rnn.cu, gpu_score_attention.cu and gpu_extremum.cu, which
     * tfc_gpu_test_enable_layer_ops puts in for those tests): a model whose layer needs one is
     * refused at bind, naming it */
    TFC_BACKEND_LAYER_OPS(GPU_NO_KERNEL)
    /* TFC_BACKEND_STEP_OPS: the trainer's step without a host round trip (gpu_optim.cu) */
    .grad_sumsq = tfc_gpu_grad_sumsq,
    .step_scale = tfc_gpu_step_scale,
    .optimizer_update_at = tfc_gpu_optimizer_update_at,
    /* TFC_BACKEND_PRECISION_OPS: none until their kernels have run on a GPU (docs/gpu.md;
     * tfc_gpu_test_enable_bf16 puts them in for that test); a model asking for bf16 or
     * float16 is refused at bind */
    .round_bf16 = NULL,
    .round_f16 = NULL,
    .loss_scale_at = NULL,
    /* TFC_BACKEND_GRAPH_OPS: CUDA graphs (gpu_graph.cu) */
    .capture_begin = tfc_gpu_capture_begin,
    .capture_end = tfc_gpu_graph_op_capture_end,
    .graph_launch = tfc_gpu_graph_op_launch,
    .graph_free = tfc_gpu_graph_op_free,
};
#undef GPU_NO_KERNEL

int tfc_gpu_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

/* Trivial kernel whose attributes tell whether this binary has code for the device. */
static __global__ void probe_kernel(int *p)
{
    if (p) *p = 0;
}

/* Creation failure: fills err from the recorded failure and frees what exists. */
static tfc_backend *create_failed(tfc_backend *be, tfc_error *err)
{
    gpu_ctx *g = gpu_of(be);
    if (err) *err = g->err;
    gpu_destroy(be);
    return NULL;
}

tfc_backend *tfc_gpu_backend_create(int index, tfc_error *err)
{
    int count = tfc_gpu_device_count();
    if (index < 0 || index >= count) {
        tfc_error_set(err, TFC_ERR_DEVICE, "gpu:%d requested but %d usable GPU%s found", index,
                      count, count == 1 ? "" : "s");
        return NULL;
    }
    tfc_backend *be = (tfc_backend *)calloc(1, sizeof *be);
    gpu_ctx *g = (gpu_ctx *)calloc(1, sizeof *g);
    if (!be || !g) {
        free(be);
        free(g);
        tfc_error_set(err, TFC_ERR_NOMEM, "out of memory creating the GPU backend");
        return NULL;
    }
    be->ops = &gpu_ops;
    be->device = index;
    be->acts = (1u << TFC_ACT_COUNT) - 1; /* every one (gpu_elementwise.cu) */
    /* the cross-entropies and MSE; MAE, Huber and log-cosh (gpu_loss.cu) join once make
     * test-gpu's regression_losses case has passed on a GPU */
    be->losses = (1u << TFC_LOSS_MAE) - 1;
    be->threads = 1;
    be->impl = g;
    g->device = index;
    tfc_error_clear(&g->err);
    TFC_CUDA_TRY(g, cudaSetDevice(index), create_failed(be, err));
    cudaDeviceProp prop;
    TFC_CUDA_TRY(g, cudaGetDeviceProperties(&prop, index), create_failed(be, err));
    g->sm_count = prop.multiProcessorCount;
    g->cc_major = prop.major;
    g->cc_minor = prop.minor;
    g->smem_optin = prop.sharedMemPerBlockOptin;
    snprintf(g->name, sizeof g->name, "%s (sm_%d%d, %d SMs)", prop.name, prop.major, prop.minor,
             prop.multiProcessorCount);
    cudaFuncAttributes attr;
    cudaError_t e = cudaFuncGetAttributes(&attr, probe_kernel);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        char what[320];
        snprintf(what, sizeof what,
                 "%s: this build has no code for %s; rebuild tfc with an nvcc that targets it",
                 cudaGetErrorName(e), g->name);
        tfc_gpu_fail(g, "cudaFuncGetAttributes(probe_kernel)", what, __FILE__, __LINE__);
        return create_failed(be, err);
    }
    TFC_CUDA_TRY(g, cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking),
                 create_failed(be, err));
    TFC_CUBLAS_TRY(g, cublasCreate(&g->blas), create_failed(be, err));
    TFC_CUBLAS_TRY(g, cublasSetStream(g->blas, g->stream), create_failed(be, err));
    TFC_CUBLAS_TRY(g, cublasSetMathMode(g->blas, CUBLAS_DEFAULT_MATH), create_failed(be, err));
    TFC_CUDNN_TRY(g, cudnnCreate(&g->dnn), create_failed(be, err));
    TFC_CUDNN_TRY(g, cudnnSetStream(g->dnn, g->stream), create_failed(be, err));
    for (int i = 0; i < GPU_STAGES; i++)
        TFC_CUDA_TRY(g, cudaEventCreateWithFlags(&g->stage[i].done, cudaEventDisableTiming),
                     create_failed(be, err));
    TFC_CUDA_TRY(g, cudaHostAlloc(&g->host_result, 64, cudaHostAllocDefault),
                 create_failed(be, err));
    return be;
}

/* ---- options and queries ------------------------------------------------------------------ */

void tfc_gpu_test_enable_bf16(int on)
{
    gpu_ops.round_bf16 = on ? tfc_gpu_round_bf16 : NULL;
    gpu_ops.round_f16 = on ? tfc_gpu_round_f16 : NULL;
    gpu_ops.loss_scale_at = on ? tfc_gpu_loss_scale_at : NULL;
}

void tfc_gpu_test_enable_layer_ops(int on)
{
#define GPU_LAYER_OP(ret, op, params) gpu_ops.op = on ? tfc_gpu_##op : NULL;
    TFC_BACKEND_LAYER_OPS(GPU_LAYER_OP)
#undef GPU_LAYER_OP
}

int tfc_gpu_is_gpu(const tfc_backend *be)
{
    return be && be->ops == &gpu_ops;
}

void tfc_gpu_set_deterministic(tfc_backend *be, int on)
{
    if (!tfc_gpu_is_gpu(be)) return;
    gpu_ctx *g = gpu_of(be);
    if (g->deterministic == !!on) return;
    g->deterministic = !!on;
    tfc_gpu_conv_cache_free(g); /* algorithm choices depend on it */
}

void tfc_gpu_set_tf32(tfc_backend *be, int on)
{
    if (!tfc_gpu_is_gpu(be)) return;
    gpu_ctx *g = gpu_of(be);
    if (g->tf32 == !!on) return;
    g->tf32 = !!on;
    TFC_CUBLAS_TRY(g, cublasSetMathMode(g->blas, on ? CUBLAS_TF32_TENSOR_OP_MATH
                                                    : CUBLAS_DEFAULT_MATH));
    tfc_gpu_conv_cache_free(g);
}

void tfc_gpu_set_conv_find(tfc_backend *be, int on)
{
    if (!tfc_gpu_is_gpu(be)) return;
    gpu_ctx *g = gpu_of(be);
    if (g->conv_find == !!on) return;
    g->conv_find = !!on;
    tfc_gpu_conv_cache_free(g);
}

void tfc_gpu_set_fast_norm(tfc_backend *be, int on)
{
    if (tfc_gpu_is_gpu(be)) gpu_of(be)->fast_norm = !!on;
}

void tfc_gpu_set_attention_no_split(tfc_backend *be, int on)
{
    if (tfc_gpu_is_gpu(be)) gpu_of(be)->attention_no_split = !!on;
}

void tfc_gpu_set_memory_limit(tfc_backend *be, size_t bytes)
{
    if (!tfc_gpu_is_gpu(be)) return;
    gpu_ctx *g = gpu_of(be);
    g->limit = bytes;
    if (bytes && g->reserved > bytes) release_cached(g);
}

tfc_status tfc_gpu_status(tfc_backend *be, tfc_error *err)
{
    if (!tfc_gpu_is_gpu(be)) return TFC_OK;
    gpu_ctx *g = gpu_of(be);
    if (!g->failed) return TFC_OK;
    if (g->failed > 1) tfc_error_hint(&g->err, "%d later GPU call%s failed as well", g->failed - 1,
                                      g->failed > 2 ? "s" : "");
    tfc_status code = g->err.code;
    if (err) *err = g->err;
    tfc_error_clear(&g->err);
    g->failed = 0;
    return code;
}

void tfc_gpu_memory_stats(tfc_backend *be, tfc_gpu_memory *out)
{
    memset(out, 0, sizeof *out);
    if (!tfc_gpu_is_gpu(be)) return;
    gpu_ctx *g = gpu_of(be);
    out->in_use = g->in_use;
    out->reserved = g->reserved;
    out->peak_in_use = g->peak_in_use;
    out->peak_reserved = g->peak_reserved;
    out->limit = g->limit;
    if (cudaMemGetInfo(&out->device_free, &out->device_total) != cudaSuccess)
        (void)cudaGetLastError();
}

const char *tfc_gpu_device_name(const tfc_backend *be)
{
    return tfc_gpu_is_gpu(be) ? ((const gpu_ctx *)be->impl)->name : "";
}
