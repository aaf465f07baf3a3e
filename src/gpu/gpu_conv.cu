/* 2-D convolution through cuDNN on NHWC tensors, plain or grouped (the tfc_gpu_conv_run_*
 * that gpu_conv1d.cu shares): Keras kernels transposed into cuDNN's filter layout per call,
 * TensorFlow's asymmetric SAME padding through an explicitly padded copy, algorithms from
 * cuDNN's heuristics within a bounded workspace, cached per shape and group count.
 * The decisions are spelled out below the includes. */
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu_internal.cuh"

/* Filters: cuDNN's NHWC filter layout is [f, kh, kw, c]; Keras's is [kh, kw, c, f] (with
 * groups, c / groups in both: cudnnSetConvolutionGroupCount gives filter j the channels of
 * group j / (f / groups), as Keras's grouped convolution reads them). Each call transposes
 * the (small) kernel into the workspace, and backward-filter computes into a [f, kh, kw, c]
 * scratch that is transposed and added into dw. Stateless: no cached copy can go stale when
 * the optimizer updates the weights.
 * Padding: cuDNN pads symmetrically. When pad_top/pad_left with cuDNN's output formula give
 * exactly (oh, ow), the padding goes to cuDNN; otherwise (TensorFlow's SAME with one more
 * row or column at the end, e.g. stride 2) the input is copied into a zero-padded buffer of
 * exactly the extent the windows read and the convolution runs unpadded.
 * Algorithms: cuDNN's heuristics (Get*_v7), the first that fits the workspace budget and,
 * when asked, is deterministic; chosen once per shape and cached. With conv_find
 * (tfc_gpu_set_conv_find) and deterministic off, the first use of a shape times every
 * algorithm instead (cudnnFind*AlgorithmEx, on the op's own tensors) and the fastest
 * acceptable one is cached: measured choices may differ between runs, and so may the last
 * bits of the results, which is why deterministic mode never measures.
 * Workspace: [kernel^T | dkernel^T | padded input (if needed) | cuDNN's budget]; every part
 * grows with the batch size only, so the plan for the largest batch covers the rest. */

/* cuDNN's own workspace: 16 MiB plus twice the activations, at most 256 MiB. */
#define CUDNN_WS_FLOOR ((size_t)16 << 20)
#define CUDNN_WS_CAP ((size_t)256 << 20)

enum { OP_FWD = 0, OP_DATA, OP_FILTER };

typedef struct conv_plan {
    tfc_conv_desc d;   /* the key, with groups */
    int groups;        /* > 1: a grouped convolution (cudnnSetConvolutionGroupCount) */
    int broken;        /* set-up failed: every use reports it */
    int padded;        /* runs unpadded on an explicitly padded copy of extent hp x wp */
    int hp, wp;
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    int chosen[3];
    int measured[3];   /* chosen by cudnnFind*Ex (conv_find) rather than the heuristics */
    int algo[3];
    cudnnMathType_t math[3];
} conv_plan;

struct gpu_conv_cache {
    conv_plan *plans;
    int n, cap;
};

static void plan_destroy(conv_plan *p)
{
    if (p->xd) cudnnDestroyTensorDescriptor(p->xd);
    if (p->yd) cudnnDestroyTensorDescriptor(p->yd);
    if (p->wd) cudnnDestroyFilterDescriptor(p->wd);
    if (p->cd) cudnnDestroyConvolutionDescriptor(p->cd);
}

void tfc_gpu_conv_cache_free(gpu_ctx *g)
{
    if (!g->conv) return;
    for (int i = 0; i < g->conv->n; i++) plan_destroy(&g->conv->plans[i]);
    free(g->conv->plans);
    free(g->conv);
    g->conv = NULL;
}

int tfc_gpu_conv_measured(const tfc_backend *be)
{
    if (!tfc_gpu_is_gpu(be)) return 0;
    const gpu_ctx *g = (const gpu_ctx *)be->impl;
    int n = 0;
    if (g->conv)
        for (int i = 0; i < g->conv->n; i++)
            for (int op = 0; op < 3; op++) n += g->conv->plans[i].measured[op];
    return n;
}

/* Input rows a window reaches: (o - 1) s + (k - 1) dil + 1. */
static int extent(int o, int s, int k, int dil)
{
    return (o - 1) * s + (k - 1) * dil + 1;
}

/* cuDNN's output size for symmetric padding p: (i + 2p - extent_k) / s + 1, or -1. */
static int cudnn_out(int i, int p, int s, int k, int dil)
{
    int span = i + 2 * p - ((k - 1) * dil + 1);
    return p < 0 || span < 0 ? -1 : span / s + 1;
}

/* Workspace pieces in bytes, in layout order. */
typedef struct ws_layout {
    size_t wt, dwt, pad, cudnn, total;
} ws_layout;

static ws_layout layout(const tfc_conv_desc *d)
{
    ws_layout l;
    const size_t kfloats = (size_t)d->kh * d->kw * d->c * d->f;
    const int padded = cudnn_out(d->h, d->pad_top, d->sh, d->kh, d->dh) != d->oh ||
                       cudnn_out(d->w, d->pad_left, d->sw, d->kw, d->dw) != d->ow;
    const size_t hp = (size_t)extent(d->oh, d->sh, d->kh, d->dh);
    const size_t wp = (size_t)extent(d->ow, d->sw, d->kw, d->dw);
    const size_t xbytes = (size_t)d->n * d->h * d->w * d->c * sizeof(float);
    const size_t ybytes = (size_t)d->n * d->oh * d->ow * d->f * sizeof(float);
    l.wt = gpu_align(kfloats * sizeof(float));
    l.dwt = l.wt;
    l.pad = padded ? gpu_align((size_t)d->n * hp * wp * d->c * sizeof(float)) : 0;
    l.cudnn = CUDNN_WS_FLOOR + 2 * (xbytes + ybytes);
    if (l.cudnn > CUDNN_WS_CAP) l.cudnn = CUDNN_WS_CAP;
    l.total = l.wt + l.dwt + l.pad + l.cudnn;
    return l;
}

size_t tfc_gpu_conv_workspace(tfc_backend *be, const tfc_conv_desc *d)
{
    return tfc_gpu_conv_run_workspace(d);
}

/* Descriptors of plan p (its key set); nonzero on a recorded failure. */
static int plan_init(gpu_ctx *g, conv_plan *p)
{
    const tfc_conv_desc *d = &p->d;
    p->padded = cudnn_out(d->h, d->pad_top, d->sh, d->kh, d->dh) != d->oh ||
                cudnn_out(d->w, d->pad_left, d->sw, d->kw, d->dw) != d->ow;
    p->hp = p->padded ? extent(d->oh, d->sh, d->kh, d->dh) : d->h;
    p->wp = p->padded ? extent(d->ow, d->sw, d->kw, d->dw) : d->w;
    const int ph = p->padded ? 0 : d->pad_top, pw = p->padded ? 0 : d->pad_left;
    TFC_CUDNN_TRY(g, cudnnCreateTensorDescriptor(&p->xd), 1);
    TFC_CUDNN_TRY(g, cudnnCreateTensorDescriptor(&p->yd), 1);
    TFC_CUDNN_TRY(g, cudnnCreateFilterDescriptor(&p->wd), 1);
    TFC_CUDNN_TRY(g, cudnnCreateConvolutionDescriptor(&p->cd), 1);
    TFC_CUDNN_TRY(g, cudnnSetTensor4dDescriptor(p->xd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, d->n,
                                                d->c, p->hp, p->wp), 1);
    TFC_CUDNN_TRY(g, cudnnSetTensor4dDescriptor(p->yd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, d->n,
                                                d->f, d->oh, d->ow), 1);
    TFC_CUDNN_TRY(g, cudnnSetFilter4dDescriptor(p->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, d->f,
                                                d->c / p->groups, d->kh, d->kw), 1);
    TFC_CUDNN_TRY(g, cudnnSetConvolution2dDescriptor(p->cd, ph, pw, d->sh, d->sw, d->dh, d->dw,
                                                     CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                  1);
    TFC_CUDNN_TRY(g, cudnnSetConvolutionGroupCount(p->cd, p->groups), 1);
    int on, oc, ohh, oww;
    TFC_CUDNN_TRY(g, cudnnGetConvolution2dForwardOutputDim(p->cd, p->xd, p->wd, &on, &oc, &ohh,
                                                           &oww), 1);
    if (on != d->n || oc != d->f || ohh != d->oh || oww != d->ow) {
        char what[160];
        snprintf(what, sizeof what, "cuDNN computes output %dx%dx%dx%d, the layer expects %dx%dx%dx%d",
                 on, ohh, oww, oc, d->n, d->oh, d->ow, d->f);
        return tfc_gpu_fail(g, "cudnnGetConvolution2dForwardOutputDim", what, __FILE__, __LINE__);
    }
    return 0;
}

/* The cached plan of desc d in `groups` groups, created on first use; NULL (recorded) when
 * its set-up failed, now or earlier. */
static conv_plan *plan_get(gpu_ctx *g, const tfc_conv_desc *d, int groups)
{
    if (!g->conv) {
        g->conv = (gpu_conv_cache *)calloc(1, sizeof *g->conv);
        if (!g->conv) {
            tfc_gpu_fail(g, "conv cache", "out of host memory", __FILE__, __LINE__);
            return NULL;
        }
    }
    gpu_conv_cache *c = g->conv;
    for (int i = 0; i < c->n; i++) {
        conv_plan *p = &c->plans[i];
        if (p->groups != groups || memcmp(&p->d, d, sizeof *d) != 0) continue;
        if (!p->broken) return p;
        tfc_gpu_fail(g, "conv plan", "this convolution's cuDNN set-up failed before", __FILE__,
                 __LINE__);
        return NULL;
    }
    if (c->n == c->cap) {
        int nc = c->cap ? 2 * c->cap : 16;
        conv_plan *np = (conv_plan *)realloc(c->plans, (size_t)nc * sizeof *np);
        if (!np) {
            tfc_gpu_fail(g, "conv cache", "out of host memory", __FILE__, __LINE__);
            return NULL;
        }
        c->plans = np;
        c->cap = nc;
    }
    conv_plan *p = &c->plans[c->n++]; /* the cache owns its descriptors from here on */
    memset(p, 0, sizeof *p);
    p->d = *d;
    p->groups = groups;
    if (plan_init(g, p)) {
        p->broken = 1;
        return NULL;
    }
    return p;
}

/* Whether a heuristic or measured result may be used: it runs, fits, is deterministic when
 * asked, and uses no TF32 tensor cores unless they are allowed. */
static int acceptable(const gpu_ctx *g, cudnnStatus_t status, size_t memory,
                      cudnnDeterminism_t det, cudnnMathType_t math, size_t budget)
{
    if (status != CUDNN_STATUS_SUCCESS || memory > budget) return 0;
    if (g->deterministic && det != CUDNN_DETERMINISTIC) return 0;
    if (!g->tf32 && (math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
        return 0;
    return 1;
}

/* The first acceptable entry of cuDNN's ranked list perf[0, got) into found and math. */
#define FIRST_ACCEPTABLE(g, perf, got, budget, found, math)                                    \
    for (int i_ = 0; i_ < (got) && (found) < 0; i_++)                                          \
        if (acceptable(g, perf[i_].status, perf[i_].memory, perf[i_].determinism,              \
                       perf[i_].mathType, budget)) {                                           \
            (found) = (int)perf[i_].algo;                                                      \
            (math) = perf[i_].mathType;                                                        \
        }

/* The operands a measurement times the algorithms on: the op's two inputs (forward x and
 * the filter, data the filter and dy, filter x and dy), an output the candidates may
 * overwrite (never one the op accumulates into), and the workspace they may use. */
typedef struct conv_io {
    const void *in0, *in1;
    void *out;
    void *ws;
    size_t ws_bytes;
} conv_io;

/* cudnnFind*AlgorithmEx: runs every algorithm on io's operands (it synchronises) and
 * takes the fastest acceptable one into found and math; found stays -1 when the call fails
 * or none is acceptable, and the heuristics choose instead. A failed measurement is not an
 * error: the heuristics' choice runs as without measuring. */
static void measure(gpu_ctx *g, const conv_plan *p, int op, const conv_io *io, int *found,
                    cudnnMathType_t *math)
{
    int got = 0;
    if (op == OP_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        if (cudnnFindConvolutionForwardAlgorithmEx(
                g->dnn, p->xd, io->in0, p->wd, io->in1, p->cd, p->yd, io->out,
                CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf, io->ws,
                io->ws_bytes) == CUDNN_STATUS_SUCCESS)
            FIRST_ACCEPTABLE(g, perf, got, io->ws_bytes, *found, *math);
    } else if (op == OP_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        if (cudnnFindConvolutionBackwardDataAlgorithmEx(
                g->dnn, p->wd, io->in0, p->yd, io->in1, p->cd, p->xd, io->out,
                CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf, io->ws,
                io->ws_bytes) == CUDNN_STATUS_SUCCESS)
            FIRST_ACCEPTABLE(g, perf, got, io->ws_bytes, *found, *math);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        if (cudnnFindConvolutionBackwardFilterAlgorithmEx(
                g->dnn, p->xd, io->in0, p->yd, io->in1, p->cd, p->wd, io->out,
                CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf, io->ws,
                io->ws_bytes) == CUDNN_STATUS_SUCCESS)
            FIRST_ACCEPTABLE(g, perf, got, io->ws_bytes, *found, *math);
    }
}

/* Picks and caches op's algorithm for plan p within `budget` bytes; the math type (FMA
 * only unless TF32 is allowed) is set on the descriptor first. Measured (measure, on io's
 * operands) when conv_find is on, deterministic is off and io is given (not during a CUDA
 * graph capture: cudnnFind synchronises); otherwise, or when
 * measuring finds nothing, cuDNN's heuristics rank them. */
static int choose(gpu_ctx *g, conv_plan *p, int op, size_t budget, const conv_io *io)
{
    if (p->chosen[op]) {
        TFC_CUDNN_TRY(g, cudnnSetConvolutionMathType(p->cd, p->math[op]), 1);
        return 0;
    }
    const cudnnMathType_t base = g->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    TFC_CUDNN_TRY(g, cudnnSetConvolutionMathType(p->cd, base), 1);
    int got = 0, found = -1;
    cudnnMathType_t math = base;
    size_t need = 0;
    if (g->conv_find && !g->deterministic && io) {
        measure(g, p, op, io, &found, &math);
        if (found >= 0) p->measured[op] = 1;
    }
    if (found >= 0) {
        /* measured: within io's workspace, which lies inside the budget */
    } else if (op == OP_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        TFC_CUDNN_TRY(g, cudnnGetConvolutionForwardAlgorithm_v7(
                             g->dnn, p->xd, p->wd, p->cd, p->yd, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                             &got, perf), 1);
        FIRST_ACCEPTABLE(g, perf, got, budget, found, math);
        if (found < 0) { /* implicit GEMM: no workspace, deterministic */
            found = (int)CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
            TFC_CUDNN_TRY(g, cudnnGetConvolutionForwardWorkspaceSize(
                                 g->dnn, p->xd, p->wd, p->cd, p->yd,
                                 (cudnnConvolutionFwdAlgo_t)found, &need), 1);
        }
    } else if (op == OP_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        TFC_CUDNN_TRY(g, cudnnGetConvolutionBackwardDataAlgorithm_v7(
                             g->dnn, p->wd, p->yd, p->cd, p->xd,
                             CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf), 1);
        FIRST_ACCEPTABLE(g, perf, got, budget, found, math);
        if (found < 0) {
            found = (int)CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
            TFC_CUDNN_TRY(g, cudnnGetConvolutionBackwardDataWorkspaceSize(
                                 g->dnn, p->wd, p->yd, p->cd, p->xd,
                                 (cudnnConvolutionBwdDataAlgo_t)found, &need), 1);
        }
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        TFC_CUDNN_TRY(g, cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                             g->dnn, p->xd, p->yd, p->cd, p->wd,
                             CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf), 1);
        FIRST_ACCEPTABLE(g, perf, got, budget, found, math);
        if (found < 0) {
            found = (int)CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
            TFC_CUDNN_TRY(g, cudnnGetConvolutionBackwardFilterWorkspaceSize(
                                 g->dnn, p->xd, p->yd, p->cd, p->wd,
                                 (cudnnConvolutionBwdFilterAlgo_t)found, &need), 1);
        }
    }
    if (need > budget) {
        char what[160];
        snprintf(what, sizeof what, "no %s algorithm fits the %.0f MiB workspace budget",
                 op == OP_FWD ? "forward" : op == OP_DATA ? "backward-data" : "backward-filter",
                 (double)budget / (1 << 20));
        return tfc_gpu_fail(g, "cudnnGetConvolution*Algorithm_v7", what, __FILE__, __LINE__);
    }
    p->algo[op] = found;
    p->math[op] = g->tf32 ? math : CUDNN_FMA_MATH;
    p->chosen[op] = 1;
    TFC_CUDNN_TRY(g, cudnnSetConvolutionMathType(p->cd, p->math[op]), 1);
    return 0;
}

/* ---- layout kernels ---------------------------------------------------------------------- */

#define GRID_LOOP(i, n)                                                              \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);        \
         i += (int64_t)gridDim.x * blockDim.x)

/* wt[f, k] = w[k, f], k over kh*kw*c: Keras [kh, kw, c, f] to cuDNN's [f, kh, kw, c]. */
static __global__ void kernel_to_cudnn(int64_t K, int F, const float *w, float *wt)
{
    GRID_LOOP(i, K * F)
    {
        int64_t f = i / K, k = i % K;
        wt[i] = w[k * F + f];
    }
}

/* dw[k, f] += dwt[f, k] */
static __global__ void kernel_from_cudnn_add(int64_t K, int F, const float *dwt, float *dw)
{
    GRID_LOOP(i, K * F)
    {
        int64_t k = i / F, f = i % F;
        dw[i] += dwt[f * K + k];
    }
}

/* xp[n, hp, wp, c] = x[n, y - pt, x - pl, c] inside the image, else 0. */
static __global__ void pad_input(int n, int h, int w, int c, int hp, int wp, int pt, int pl,
                          const float *x, float *xp)
{
    GRID_LOOP(i, (int64_t)n * hp * wp * c)
    {
        int ch = (int)(i % c);
        int64_t t = i / c;
        int xx = (int)(t % wp) - pl;
        t /= wp;
        int yy = (int)(t % hp) - pt;
        int64_t img = t / hp;
        xp[i] = yy >= 0 && yy < h && xx >= 0 && xx < w
                    ? x[((img * h + yy) * w + xx) * c + ch]
                    : 0.0f;
    }
}

/* dx[n, y, x, c] += dxp[n, y + pt, x + pl, c] where that lies inside the padded extent. */
static __global__ void unpad_add(int n, int h, int w, int c, int hp, int wp, int pt, int pl,
                          const float *dxp, float *dx)
{
    GRID_LOOP(i, (int64_t)n * h * w * c)
    {
        int ch = (int)(i % c);
        int64_t t = i / c;
        int xx = (int)(t % w) + pl;
        t /= w;
        int yy = (int)(t % h) + pt;
        int64_t img = t / h;
        if (yy >= 0 && yy < hp && xx >= 0 && xx < wp)
            dx[i] += dxp[((img * hp + yy) * wp + xx) * c + ch];
    }
}

/* ---- the ops ------------------------------------------------------------------------------ */

typedef struct conv_ws {
    float *wt, *dwt, *pad;
    void *cudnn;
    size_t cudnn_bytes;
} conv_ws;

static conv_ws carve(const tfc_conv_desc *d, void *ws)
{
    ws_layout l = layout(d);
    char *b = (char *)ws;
    conv_ws w;
    w.wt = (float *)b;
    w.dwt = (float *)(b + l.wt);
    w.pad = (float *)(b + l.wt + l.dwt);
    w.cudnn = b + l.wt + l.dwt + l.pad;
    w.cudnn_bytes = l.cudnn;
    return w;
}

/* The operands measure times op on, in io (whose ws and ws_bytes hold cuDNN's part of the
 * workspace): x or its padded copy, the transposed filter in the workspace, dy; forward's
 * output y (which the op overwrites anyway), backward-filter's filter scratch, and for
 * backward-data, which may add into dx, the padded copy's buffer or else the first bytes of
 * cuDNN's workspace, the rest of it left to the candidates. NULL when that does not leave
 * CUDNN_WS_FLOOR bytes: the heuristics choose. The copies' contents need not be set yet:
 * timing does not depend on the values. */
static conv_io *operands(const conv_plan *p, int op, const conv_ws *w, const void *x,
                         const void *dy, void *y, conv_io *io)
{
    const tfc_conv_desc *d = &p->d;
    if (op == OP_FWD) {
        io->in0 = p->padded ? w->pad : x;
        io->in1 = w->wt;
        io->out = y;
    } else if (op == OP_FILTER) {
        io->in0 = p->padded ? w->pad : x;
        io->in1 = dy;
        io->out = w->dwt;
    } else {
        io->in0 = w->wt;
        io->in1 = dy;
        if (p->padded) {
            io->out = w->pad;
        } else {
            const size_t xb = gpu_align((size_t)d->n * d->h * d->w * d->c * sizeof(float));
            if (io->ws_bytes < xb + CUDNN_WS_FLOOR) return NULL;
            io->out = io->ws;
            io->ws = (char *)io->ws + xb;
            io->ws_bytes -= xb;
        }
    }
    return io;
}

/* Plan, algorithm and workspace for one op; NULL when nothing is to be done or on failure.
 * x, dy and y: the op's tensors that measure may use (operands), NULL where it has none. */
static conv_plan *prepare(gpu_ctx *g, const tfc_conv_desc *d, int groups, int op, void *ws,
                          conv_ws *w, const void *x, const void *dy, void *y)
{
    if (d->n <= 0 || d->oh <= 0 || d->ow <= 0) return NULL;
    conv_plan *p = plan_get(g, d, groups);
    if (!p) return NULL;
    *w = carve(d, ws);
    conv_io io = {NULL, NULL, NULL, w->cudnn, w->cudnn_bytes}, *use = NULL;
    if (!p->chosen[op] && g->conv_find && !g->deterministic && !g->capturing)
        use = operands(p, op, w, x, dy, y, &io);
    if (choose(g, p, op, w->cudnn_bytes, use)) return NULL;
    return p;
}

/* Rows of the kernel matrix [K, f]: kh kw c / groups. */
static int64_t kernel_rows(const tfc_conv_desc *d, int groups)
{
    return (int64_t)d->kh * d->kw * (d->c / groups);
}

static int to_cudnn_layout(gpu_ctx *g, const tfc_conv_desc *d, int groups, const float *w,
                           float *wt)
{
    const int64_t K = kernel_rows(d, groups);
    kernel_to_cudnn<<<gpu_blocks(g, K * d->f), GPU_THREADS, 0, g->stream>>>(K, d->f, w, wt);
    TFC_LAUNCH_CHECK(g, kernel_to_cudnn, 1);
    return 0;
}

static int pad(gpu_ctx *g, const conv_plan *p, const float *x, float *xp)
{
    const tfc_conv_desc *d = &p->d;
    pad_input<<<gpu_blocks(g, (int64_t)d->n * p->hp * p->wp * d->c), GPU_THREADS, 0, g->stream>>>(
        d->n, d->h, d->w, d->c, p->hp, p->wp, d->pad_top, d->pad_left, x, xp);
    TFC_LAUNCH_CHECK(g, pad_input, 1);
    return 0;
}

/* y = act(bn(conv(x, w) + bias) + residual) (overwrites y), then with pool
 * pooled = pool(y). */
void tfc_gpu_conv_forward(tfc_backend *be, const tfc_conv_desc *d, const float *x,
                          const float *w, const float *bias, const tfc_bn_params *bn,
                          const float *residual, tfc_act act, float *y,
                          const tfc_pool_desc *pool, float *pooled, void *ws)
{
    tfc_gpu_conv_run_forward(be, d, 1, x, w, y, ws);
    /* bias, normalisation and activation as their own kernels (cuDNN's fused
     * convolution-bias-activation takes ReLU only, and its own algorithm set) */
    const int64_t rows = (int64_t)d->n * d->oh * d->ow;
    if (bias) tfc_gpu_bias_add(be, rows, d->f, bias, y);
    if (bn)
        tfc_gpu_bn_forward_infer(be, rows, d->f, y, bn->gamma, bn->beta, bn->mean, bn->var,
                                 bn->eps, y);
    if (residual) tfc_gpu_axpy(be, rows * d->f, 1.0f, residual, y);
    if (act != TFC_ACT_LINEAR) tfc_gpu_act_forward(be, act, rows * d->f, d->f, y, y);
    if (pool) tfc_gpu_pool_forward(be, pool, y, pooled, NULL);
}

size_t tfc_gpu_conv_run_workspace(const tfc_conv_desc *d)
{
    if (d->n <= 0 || d->oh <= 0 || d->ow <= 0) return 0;
    return layout(d).total;
}

void *tfc_gpu_conv_run_scratch(gpu_ctx *g, const tfc_conv_desc *d)
{
    const size_t bytes = tfc_gpu_conv_run_workspace(d);
    return bytes ? tfc_gpu_scratch(g, bytes) : NULL;
}

/* y = conv(x, w) (overwrites y). */
void tfc_gpu_conv_run_forward(tfc_backend *be, const tfc_conv_desc *d, int groups,
                              const float *x, const float *w, float *y, void *ws)
{
    gpu_ctx *g = gpu_of(be);
    conv_ws s;
    conv_plan *p = prepare(g, d, groups, OP_FWD, ws, &s, x, NULL, y);
    if (!p || to_cudnn_layout(g, d, groups, w, s.wt)) return;
    if (p->padded && pad(g, p, x, s.pad)) return;
    const float one = 1.0f, zero = 0.0f;
    TFC_CUDNN_TRY(g, cudnnConvolutionForward(g->dnn, &one, p->xd, p->padded ? s.pad : x, p->wd,
                                             s.wt, p->cd,
                                             (cudnnConvolutionFwdAlgo_t)p->algo[OP_FWD], s.cudnn,
                                             s.cudnn_bytes, &zero, p->yd, y));
}

void tfc_gpu_conv_backward_data(tfc_backend *be, const tfc_conv_desc *d, const float *dy,
                                const float *w, float *dx, int assign, void *ws)
{
    tfc_gpu_conv_run_data(be, d, 1, dy, w, dx, assign, ws);
}

/* dx += conv_transpose(dy, w), or dx = with assign: cuDNN accumulates (beta 1) or
 * overwrites (beta 0), or on the padded path writes the padded gradient and its interior is
 * added (to a zeroed dx, with assign). */
void tfc_gpu_conv_run_data(tfc_backend *be, const tfc_conv_desc *d, int groups,
                           const float *dy, const float *w, float *dx, int assign, void *ws)
{
    gpu_ctx *g = gpu_of(be);
    conv_ws s;
    conv_plan *p = prepare(g, d, groups, OP_DATA, ws, &s, NULL, dy, NULL);
    if (!p || to_cudnn_layout(g, d, groups, w, s.wt)) return;
    const float one = 1.0f, zero = 0.0f;
    TFC_CUDNN_TRY(g, cudnnConvolutionBackwardData(
                         g->dnn, &one, p->wd, s.wt, p->yd, dy, p->cd,
                         (cudnnConvolutionBwdDataAlgo_t)p->algo[OP_DATA], s.cudnn, s.cudnn_bytes,
                         p->padded || assign ? &zero : &one, p->xd, p->padded ? s.pad : dx));
    if (!p->padded) return;
    if (assign) be->ops->zero(be, dx, (size_t)d->n * d->h * d->w * d->c * sizeof(float));
    unpad_add<<<gpu_blocks(g, (int64_t)d->n * d->h * d->w * d->c), GPU_THREADS, 0, g->stream>>>(
        d->n, d->h, d->w, d->c, p->hp, p->wp, d->pad_top, d->pad_left, s.pad, dx);
    TFC_LAUNCH_CHECK(g, unpad_add);
}

void tfc_gpu_conv_backward_filter(tfc_backend *be, const tfc_conv_desc *d, const float *x,
                                  const float *dy, float *dw, void *ws)
{
    tfc_gpu_conv_run_filter(be, d, 1, x, dy, dw, ws);
}

/* dw[kh, kw, c / groups, f] += the filter gradient, computed in cuDNN's layout and
 * transposed. */
void tfc_gpu_conv_run_filter(tfc_backend *be, const tfc_conv_desc *d, int groups,
                             const float *x, const float *dy, float *dw, void *ws)
{
    gpu_ctx *g = gpu_of(be);
    conv_ws s;
    conv_plan *p = prepare(g, d, groups, OP_FILTER, ws, &s, x, dy, NULL);
    if (!p) return;
    if (p->padded && pad(g, p, x, s.pad)) return;
    const float one = 1.0f, zero = 0.0f;
    TFC_CUDNN_TRY(g, cudnnConvolutionBackwardFilter(
                         g->dnn, &one, p->xd, p->padded ? s.pad : x, p->yd, dy, p->cd,
                         (cudnnConvolutionBwdFilterAlgo_t)p->algo[OP_FILTER], s.cudnn,
                         s.cudnn_bytes, &zero, p->wd, s.dwt));
    const int64_t K = kernel_rows(d, groups);
    kernel_from_cudnn_add<<<gpu_blocks(g, K * d->f), GPU_THREADS, 0, g->stream>>>(K, d->f, s.dwt,
                                                                                  dw);
    TFC_LAUNCH_CHECK(g, kernel_from_cudnn_add);
}
