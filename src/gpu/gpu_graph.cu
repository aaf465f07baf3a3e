/* CUDA graphs (issue 41): the work queued on the backend's stream between
 * tfc_gpu_capture_begin and tfc_gpu_capture_end is recorded, not run, and
 * tfc_gpu_graph_launch replays it with the same pointers and the same by-value arguments
 * (gpu.h says what a caller must keep fixed). A replay costs one launch where the recorded
 * step cost one per kernel, cuBLAS and cuDNN call.
 *
 * What may not happen during a capture, and what the backend does about it:
 *   - waiting for the device (download, sync, sumsq, count_nonfinite, a staged upload's
 *     wait for its buffer) and allocating (cudaMalloc, or a cached block whose address the
 *     graph would keep after it went back to the cache): gpu_capture_refused records
 *     "... while a CUDA graph is being captured" naming the op, and the op does nothing;
 *     cudaStreamEndCapture then reports the capture invalid too;
 *   - measuring convolution algorithms (cudnnFind synchronises): a shape first met during
 *     a capture takes the heuristics' choice (gpu_conv.cu);
 *   - the scratch that ops share growing while a graph holds its old address: the old block
 *     is retired, not freed, until the last graph goes (tfc_gpu_scratch);
 *   - per-step random draws (dropout, the recurrent input's dropout, attention's dropout,
 *     the augmentation layers' transforms): their kernels, captured, add the device value
 *     g->step_offset to the step they were launched with (gpu_step_offset), which each
 *     replay sets first to its step minus the captured one, so a replay draws what a
 *     launched step at that number draws.
 * The capture mode is cudaStreamCaptureModeThreadLocal: this thread's unsafe CUDA calls
 * fail rather than run, and other threads (the input pipeline's) are not affected. */
#include <stdio.h>
#include <stdlib.h>

#include "gpu/gpu_internal.cuh"

static int fail_captures; /* tfc_gpu_test_fail_captures */

void tfc_gpu_test_fail_captures(int on)
{
    fail_captures = !!on;
}

struct tfc_gpu_graph {
    gpu_ctx *g;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    int nodes;
};

int tfc_gpu_capture_refused(gpu_ctx *g, const char *op, const char *file, int line)
{
    if (!g->capturing) return 0;
    char what[320];
    snprintf(what, sizeof what,
             "%s while a CUDA graph is being captured (it would wait for the device, allocate, "
             "or keep this step's host data in every replay)",
             op);
    return tfc_gpu_fail(g, op, what, file, line);
}

tfc_status tfc_gpu_capture_begin(tfc_backend *be, tfc_error *err)
{
    if (!tfc_gpu_is_gpu(be))
        return tfc_error_set(err, TFC_ERR_USAGE, "CUDA graphs need a GPU backend");
    gpu_ctx *g = gpu_of(be);
    if (g->capturing)
        return tfc_error_set(err, TFC_ERR_USAGE, "a CUDA graph capture is already under way");
    if (g->failed) /* left recorded, for the caller's status check to report */
        return tfc_error_set(err, TFC_ERR_DEVICE, "a GPU call failed before the capture");
    TFC_CUDA_TRY(g, cudaSetDevice(g->device), tfc_gpu_status(be, err));
    if (!g->step_offset && !(g->step_offset = (uint64_t *)be->ops->alloc(be, sizeof(uint64_t))))
        return tfc_error_set(err, TFC_ERR_DEVICE, "out of device memory for a CUDA graph");
    TFC_CUDA_TRY(g, cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal),
                 tfc_gpu_status(be, err));
    g->capturing = 1;
    return TFC_OK;
}

tfc_gpu_graph *tfc_gpu_capture_end(tfc_backend *be, tfc_error *err)
{
    if (!tfc_gpu_is_gpu(be)) {
        tfc_error_set(err, TFC_ERR_USAGE, "CUDA graphs need a GPU backend");
        return NULL;
    }
    gpu_ctx *g = gpu_of(be);
    if (!g->capturing) {
        tfc_error_set(err, TFC_ERR_USAGE, "no CUDA graph capture is under way");
        return NULL;
    }
    g->capturing = 0;
    cudaGraph_t graph = NULL;
    /* always ended, so the stream runs work again; an invalidated capture fails here */
    cudaError_t e = cudaStreamEndCapture(g->stream, &graph);
    tfc_gpu_cuda_failed(g, e, "cudaStreamEndCapture", __FILE__, __LINE__);
    if (fail_captures && !g->failed)
        tfc_gpu_fail(g, "cudaStreamEndCapture", "the capture failed on purpose "
                     "(tfc_gpu_test_fail_captures)", __FILE__, __LINE__);
    tfc_gpu_graph *gr = NULL;
    if (!g->failed) {
        gr = (tfc_gpu_graph *)calloc(1, sizeof *gr);
        if (!gr) tfc_gpu_fail(g, "graph", "out of host memory", __FILE__, __LINE__);
    }
    if (gr) {
        size_t nodes = 0;
        gr->g = g;
        gr->graph = graph;
        if (!tfc_gpu_cuda_failed(g, cudaGraphGetNodes(graph, NULL, &nodes), "cudaGraphGetNodes",
                                 __FILE__, __LINE__) &&
            !tfc_gpu_cuda_failed(g, cudaGraphInstantiate(&gr->exec, graph, 0),
                                 "cudaGraphInstantiate", __FILE__, __LINE__)) {
            gr->nodes = (int)nodes;
            g->graphs++;
            return gr;
        }
        free(gr);
    }
    if (graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError(); /* recorded: later launch checks must not see it again */
    tfc_gpu_status(be, err);
    return NULL;
}

void tfc_gpu_graph_launch(tfc_backend *be, const tfc_gpu_graph *gr, uint64_t step_offset)
{
    gpu_ctx *g = gpu_of(be);
    if (gr->g != g) {
        tfc_gpu_fail(g, "cudaGraphLaunch", "the graph was captured on another backend", __FILE__,
                     __LINE__);
        return;
    }
    be->ops->upload(be, g->step_offset, &step_offset, sizeof step_offset); /* staged, queued */
    TFC_CUDA_TRY(g, cudaGraphLaunch(gr->exec, g->stream));
}

int tfc_gpu_graph_nodes(const tfc_gpu_graph *gr)
{
    return gr ? gr->nodes : 0;
}

void tfc_gpu_graph_free(tfc_gpu_graph *gr)
{
    if (!gr) return;
    gpu_ctx *g = gr->g;
    cudaStreamSynchronize(g->stream); /* a replay still running keeps using its memory */
    cudaGraphExecDestroy(gr->exec);
    cudaGraphDestroy(gr->graph);
    free(gr);
    if (--g->graphs == 0) tfc_gpu_scratch_release_retired(g);
}

/* ---- the table's TFC_BACKEND_GRAPH_OPS ---------------------------------------------------- */

void *tfc_gpu_graph_op_capture_end(tfc_backend *be, tfc_error *err)
{
    return tfc_gpu_capture_end(be, err);
}

void tfc_gpu_graph_op_launch(tfc_backend *be, const void *graph, uint64_t step_offset)
{
    tfc_gpu_graph_launch(be, (const tfc_gpu_graph *)graph, step_offset);
}

void tfc_gpu_graph_op_free(tfc_backend *be, void *graph)
{
    (void)be;
    tfc_gpu_graph_free((tfc_gpu_graph *)graph);
}
