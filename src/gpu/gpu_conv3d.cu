/* Conv3D and the 3-D poolings on the GPU (tfc_conv3d_desc, tfc_pool3d_desc in core/backend.h).
 * The convolution is cuDNN's Nd convolution over NDHWC tensors (5-D descriptors in
 * CUDNN_TENSOR_NHWC, the filter as cuDNN's K D R S C, groups by cudnnSetConvolutionGroupCount,
 * FMA math: no TF32). cuDNN pads symmetrically, TensorFlow's SAME pads the extra plane after:
 * a padded input is written into the workspace (and its gradient cropped back) whenever the
 * layer pads. Keras's kernel [kd, kh, kw, c / g, f] is transposed to [f, kd kh kw c / g] there
 * too, and the weight gradient computed in that layout is transposed and added back. The
 * algorithms are cuDNN's heuristic choice within CONV3D_CUDNN_BYTES, deterministic ones only
 * for the backward ops; the descriptors are made on each call (no plan cache yet). The
 * poolings are plain kernels: a thread per output value forward, a thread per input value
 * backward gathering from the windows that cover it, in the CPU's order (cpu_pool3d.c).
 * Not in the GPU's op table yet (TFC_BACKEND_LAYER_OPS): tfc_gpu_test_enable_layer_ops puts
 * them in for `make test-gpu`'s conv3d and pool3d cases; until those have passed on a GPU,
 * Conv3D and the 3-D poolings are refused there. */
#include "gpu/gpu_internal.cuh"

/* cuDNN's workspace within the op's (a fixed budget, so that the layout is the same for
 * any batch up to the planned one). */
#define CONV3D_CUDNN_BYTES ((size_t)64 << 20)

/* Zeros after the volume along axis a that the output needs (TensorFlow's SAME: the extra
 * plane goes after), 0 where the output reads short of the end (valid). */
static int pad_after(const tfc_conv3d_desc *d, int a)
{
    const int need = (d->out[a] - 1) * d->s[a] + (d->k[a] - 1) * d->dil[a] + 1;
    const int after = need - d->in[a] - d->pad[a];
    return after > 0 ? after : 0;
}

static int padded(const tfc_conv3d_desc *d)
{
    for (int a = 0; a < 3; a++)
        if (d->pad[a] || pad_after(d, a)) return 1;
    return 0;
}

/* The (padded) input's extent along axis a. */
static int in_padded(const tfc_conv3d_desc *d, int a)
{
    return d->in[a] + d->pad[a] + pad_after(d, a);
}

/* The workspace's pieces, 256-byte aligned: the padded input (or its gradient), the
 * transposed kernel, the transposed kernel gradient, cuDNN's workspace. */
typedef struct conv3d_ws {
    float *pad, *wt, *dwt;
    void *cudnn;
} conv3d_ws;

static size_t pad_bytes(const tfc_conv3d_desc *d)
{
    if (!padded(d)) return 0;
    return gpu_align((size_t)d->n * in_padded(d, 0) * in_padded(d, 1) * in_padded(d, 2) * d->c *
                     sizeof(float));
}

static size_t kernel_bytes(const tfc_conv3d_desc *d)
{
    return gpu_align((size_t)d->k[0] * d->k[1] * d->k[2] * (d->c / d->groups) * d->f *
                     sizeof(float));
}

size_t tfc_gpu_conv3d_workspace(tfc_backend *be, const tfc_conv3d_desc *d)
{
    (void)be;
    return pad_bytes(d) + 2 * kernel_bytes(d) + CONV3D_CUDNN_BYTES;
}

static conv3d_ws carve(const tfc_conv3d_desc *d, void *ws)
{
    char *p = (char *)ws;
    conv3d_ws s;
    s.pad = (float *)p;
    p += pad_bytes(d);
    s.wt = (float *)p;
    p += kernel_bytes(d);
    s.dwt = (float *)p;
    p += kernel_bytes(d);
    s.cudnn = p;
    return s;
}

/* cuDNN's descriptors of one call. */
typedef struct conv3d_descs {
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
} conv3d_descs;

static void descs_free(conv3d_descs *t)
{
    if (t->xd) cudnnDestroyTensorDescriptor(t->xd);
    if (t->yd) cudnnDestroyTensorDescriptor(t->yd);
    if (t->wd) cudnnDestroyFilterDescriptor(t->wd);
    if (t->cd) cudnnDestroyConvolutionDescriptor(t->cd);
}

/* Nonzero (recorded) on failure; t is to be freed by descs_free either way. */
static int descs_make(gpu_ctx *g, const tfc_conv3d_desc *d, conv3d_descs *t)
{
    *t = conv3d_descs{};
    TFC_CUDNN_TRY(g, cudnnCreateTensorDescriptor(&t->xd), 1);
    TFC_CUDNN_TRY(g, cudnnCreateTensorDescriptor(&t->yd), 1);
    TFC_CUDNN_TRY(g, cudnnCreateFilterDescriptor(&t->wd), 1);
    TFC_CUDNN_TRY(g, cudnnCreateConvolutionDescriptor(&t->cd), 1);
    /* dimensions in N C D H W order, the layout NDHWC */
    const int xdim[5] = {d->n, d->c, in_padded(d, 0), in_padded(d, 1), in_padded(d, 2)};
    const int ydim[5] = {d->n, d->f, d->out[0], d->out[1], d->out[2]};
    const int wdim[5] = {d->f, d->c / d->groups, d->k[0], d->k[1], d->k[2]};
    const int zero[3] = {0, 0, 0};
    TFC_CUDNN_TRY(g, cudnnSetTensorNdDescriptorEx(t->xd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 5,
                                                  xdim), 1);
    TFC_CUDNN_TRY(g, cudnnSetTensorNdDescriptorEx(t->yd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 5,
                                                  ydim), 1);
    TFC_CUDNN_TRY(g, cudnnSetFilterNdDescriptor(t->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, 5,
                                                wdim), 1);
    TFC_CUDNN_TRY(g, cudnnSetConvolutionNdDescriptor(t->cd, 3, zero, d->s, d->dil,
                                                     CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                  1);
    TFC_CUDNN_TRY(g, cudnnSetConvolutionGroupCount(t->cd, d->groups), 1);
    TFC_CUDNN_TRY(g, cudnnSetConvolutionMathType(t->cd, CUDNN_FMA_MATH), 1);
    return 0;
}

/* The first of cuDNN's ranked algorithms that runs within the budget (and, with det, is
 * deterministic); -1 when none. */
#define CONV3D_PICK(perf, got, det, algo)                                                      \
    for (int i_ = 0; i_ < (got) && (algo) < 0; i_++)                                           \
        if ((perf)[i_].status == CUDNN_STATUS_SUCCESS &&                                       \
            (perf)[i_].memory <= CONV3D_CUDNN_BYTES &&                                         \
            (!(det) || (perf)[i_].determinism == CUDNN_DETERMINISTIC))                         \
            (algo) = (int)(perf)[i_].algo

static __global__ void pad_kernel(tfc_conv3d_desc d, int p0, int p1, int p2, const float *x,
                                  float *xp)
{
    const int64_t total = (int64_t)d.n * p0 * p1 * p2 * d.c;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = e / d.c;
        const int j = (int)(e % d.c), i2 = (int)(r % p2) - d.pad[2];
        r /= p2;
        const int i1 = (int)(r % p1) - d.pad[1];
        r /= p1;
        const int i0 = (int)(r % p0) - d.pad[0];
        const int64_t b = r / p0;
        const int inside = i0 >= 0 && i0 < d.in[0] && i1 >= 0 && i1 < d.in[1] && i2 >= 0 &&
                           i2 < d.in[2];
        xp[e] = inside ? x[(((b * d.in[0] + i0) * d.in[1] + i1) * d.in[2] + i2) * d.c + j]
                       : 0.0f;
    }
}

/* dx (+)= the padded gradient dxp cropped to the volume. */
static __global__ void crop_kernel(tfc_conv3d_desc d, int p0, int p1, int p2, const float *dxp,
                                   float *dx, int assign)
{
    const int64_t total = (int64_t)d.n * d.in[0] * d.in[1] * d.in[2] * d.c;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = e / d.c;
        const int j = (int)(e % d.c), i2 = (int)(r % d.in[2]);
        r /= d.in[2];
        const int i1 = (int)(r % d.in[1]);
        r /= d.in[1];
        const int i0 = (int)(r % d.in[0]);
        const int64_t b = r / d.in[0];
        const float v = dxp[(((b * p0 + i0 + d.pad[0]) * p1 + i1 + d.pad[1]) * p2 + i2 +
                             d.pad[2]) * d.c + j];
        dx[e] = assign ? v : dx[e] + v;
    }
}

/* to [cols, rows] = from [rows, cols] transposed, or with add to += that. */
static __global__ void transpose_kernel(int64_t rows, int cols, const float *from, float *to,
                                        int add)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < rows * cols;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = e / cols, c = e % cols;
        const float v = from[e];
        to[c * rows + r] = add ? to[c * rows + r] + v : v;
    }
}

static __global__ void bias3d_kernel(int64_t rows, int f, const float *bias, float *y)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < rows * f;
         e += (int64_t)gridDim.x * blockDim.x)
        y[e] += bias[e % f];
}

/* The kernel's rows: kd kh kw c / g. */
static int64_t kernel_rows(const tfc_conv3d_desc *d)
{
    return (int64_t)d->k[0] * d->k[1] * d->k[2] * (d->c / d->groups);
}

void tfc_gpu_conv3d_forward(tfc_backend *be, const tfc_conv3d_desc *d, const float *x,
                            const float *w, const float *bias, float *y, void *ws)
{
    gpu_ctx *g = gpu_of(be);
    if (d->n <= 0) return;
    conv3d_ws s = carve(d, ws);
    conv3d_descs t;
    const int64_t R = kernel_rows(d);
    if (descs_make(g, d, &t)) goto done;
    transpose_kernel<<<gpu_blocks(g, R * d->f), GPU_THREADS, 0, g->stream>>>(R, d->f, w, s.wt,
                                                                              0);
    if (tfc_gpu_cuda_failed(g, cudaGetLastError(), "launch transpose_kernel", __FILE__, __LINE__))
        goto done;
    if (padded(d)) {
        const int p0 = in_padded(d, 0), p1 = in_padded(d, 1), p2 = in_padded(d, 2);
        pad_kernel<<<gpu_blocks(g, (int64_t)d->n * p0 * p1 * p2 * d->c), GPU_THREADS, 0,
                     g->stream>>>(*d, p0, p1, p2, x, s.pad);
        if (tfc_gpu_cuda_failed(g, cudaGetLastError(), "launch pad_kernel", __FILE__, __LINE__))
            goto done;
        x = s.pad;
    }
    {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        int got = 0, algo = -1;
        if (tfc_gpu_cudnn_failed(g, cudnnGetConvolutionForwardAlgorithm_v7(
                                        g->dnn, t.xd, t.wd, t.cd, t.yd,
                                        CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf),
                                 "cudnnGetConvolutionForwardAlgorithm_v7", __FILE__, __LINE__))
            goto done;
        CONV3D_PICK(perf, got, g->deterministic, algo);
        if (algo < 0) algo = (int)CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
        const float one = 1.0f, zero = 0.0f;
        if (tfc_gpu_cudnn_failed(g, cudnnConvolutionForward(
                                        g->dnn, &one, t.xd, x, t.wd, s.wt, t.cd,
                                        (cudnnConvolutionFwdAlgo_t)algo, s.cudnn,
                                        CONV3D_CUDNN_BYTES, &zero, t.yd, y),
                                 "cudnnConvolutionForward", __FILE__, __LINE__))
            goto done;
    }
    if (bias) {
        const int64_t rows = (int64_t)d->n * d->out[0] * d->out[1] * d->out[2];
        bias3d_kernel<<<gpu_blocks(g, rows * d->f), GPU_THREADS, 0, g->stream>>>(rows, d->f,
                                                                                 bias, y);
        tfc_gpu_cuda_failed(g, cudaGetLastError(), "launch bias3d_kernel", __FILE__, __LINE__);
    }
done:
    descs_free(&t);
}

void tfc_gpu_conv3d_backward(tfc_backend *be, const tfc_conv3d_desc *d, const float *x,
                             const float *w, const float *dy, float *dx, float *dw, int assign,
                             void *ws)
{
    gpu_ctx *g = gpu_of(be);
    if (d->n <= 0) return;
    conv3d_ws s = carve(d, ws);
    conv3d_descs t;
    const int64_t R = kernel_rows(d);
    const int p0 = in_padded(d, 0), p1 = in_padded(d, 1), p2 = in_padded(d, 2);
    const float one = 1.0f, zero = 0.0f;
    if (descs_make(g, d, &t)) goto done;
    if (dw) {
        const float *xin = x;
        if (padded(d)) {
            pad_kernel<<<gpu_blocks(g, (int64_t)d->n * p0 * p1 * p2 * d->c), GPU_THREADS, 0,
                         g->stream>>>(*d, p0, p1, p2, x, s.pad);
            if (tfc_gpu_cuda_failed(g, cudaGetLastError(), "launch pad_kernel", __FILE__,
                                    __LINE__))
                goto done;
            xin = s.pad;
        }
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        int got = 0, algo = -1;
        if (tfc_gpu_cudnn_failed(g, cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                                        g->dnn, t.xd, t.yd, t.cd, t.wd,
                                        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf),
                                 "cudnnGetConvolutionBackwardFilterAlgorithm_v7", __FILE__,
                                 __LINE__))
            goto done;
        CONV3D_PICK(perf, got, 1, algo);
        if (algo < 0) algo = (int)CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
        if (tfc_gpu_cudnn_failed(g, cudnnConvolutionBackwardFilter(
                                        g->dnn, &one, t.xd, xin, t.yd, dy, t.cd,
                                        (cudnnConvolutionBwdFilterAlgo_t)algo, s.cudnn,
                                        CONV3D_CUDNN_BYTES, &zero, t.wd, s.dwt),
                                 "cudnnConvolutionBackwardFilter", __FILE__, __LINE__))
            goto done;
        /* dw [R, f] += dwt [f, R] transposed */
        transpose_kernel<<<gpu_blocks(g, R * d->f), GPU_THREADS, 0, g->stream>>>(d->f, (int)R,
                                                                                  s.dwt, dw, 1);
        if (tfc_gpu_cuda_failed(g, cudaGetLastError(), "launch transpose_kernel", __FILE__,
                                __LINE__))
            goto done;
    }
    if (dx) {
        transpose_kernel<<<gpu_blocks(g, R * d->f), GPU_THREADS, 0, g->stream>>>(R, d->f, w,
                                                                                  s.wt, 0);
        if (tfc_gpu_cuda_failed(g, cudaGetLastError(), "launch transpose_kernel", __FILE__,
                                __LINE__))
            goto done;
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        int got = 0, algo = -1;
        if (tfc_gpu_cudnn_failed(g, cudnnGetConvolutionBackwardDataAlgorithm_v7(
                                        g->dnn, t.wd, t.yd, t.cd, t.xd,
                                        CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf),
                                 "cudnnGetConvolutionBackwardDataAlgorithm_v7", __FILE__,
                                 __LINE__))
            goto done;
        CONV3D_PICK(perf, got, 1, algo);
        if (algo < 0) algo = (int)CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
        /* unpadded: straight into dx (beta 1 adds); padded: into the pad buffer, cropped */
        const int pads = padded(d);
        const float beta = pads || assign ? 0.0f : 1.0f;
        if (tfc_gpu_cudnn_failed(g, cudnnConvolutionBackwardData(
                                        g->dnn, &one, t.wd, s.wt, t.yd, dy, t.cd,
                                        (cudnnConvolutionBwdDataAlgo_t)algo, s.cudnn,
                                        CONV3D_CUDNN_BYTES, &beta, t.xd, pads ? s.pad : dx),
                                 "cudnnConvolutionBackwardData", __FILE__, __LINE__))
            goto done;
        if (pads) {
            crop_kernel<<<gpu_blocks(g, (int64_t)d->n * d->in[0] * d->in[1] * d->in[2] * d->c),
                          GPU_THREADS, 0, g->stream>>>(*d, p0, p1, p2, s.pad, dx, assign);
            tfc_gpu_cuda_failed(g, cudaGetLastError(), "launch crop_kernel", __FILE__,
                                __LINE__);
        }
    }
done:
    descs_free(&t);
}

/* ---- 3-D pooling ------------------------------------------------------------------------ */

/* A thread per output value (b, p, j): cpu_pool3d.c's window walk. */
static __global__ void pool3d_forward_kernel(tfc_pool3d_desc d, const float *x, float *y,
                                             int32_t *argmax)
{
    const int64_t P = (int64_t)d.out[0] * d.out[1] * d.out[2];
    const int64_t vin = (int64_t)d.in[0] * d.in[1] * d.in[2] * d.c;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < d.n * P * d.c;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int j = (int)(e % d.c);
        const int64_t p = e / d.c % P, b = e / d.c / P;
        const int o[3] = {(int)(p / ((int64_t)d.out[1] * d.out[2])),
                          (int)(p / d.out[2] % d.out[1]), (int)(p % d.out[2])};
        int lo[3], hi[3];
        for (int a = 0; a < 3; a++) {
            lo[a] = o[a] * d.s[a] - d.pad[a];
            hi[a] = min(lo[a] + d.k[a], d.in[a]);
            lo[a] = max(lo[a], 0);
        }
        const float *xb = x + b * vin;
        float acc = 0.0f;
        int32_t win = -1;
        int64_t count = 0;
        for (int i0 = lo[0]; i0 < hi[0]; i0++)
            for (int i1 = lo[1]; i1 < hi[1]; i1++)
                for (int i2 = lo[2]; i2 < hi[2]; i2++, count++) {
                    const int64_t at = (((int64_t)i0 * d.in[1] + i1) * d.in[2] + i2) * d.c + j;
                    const float v = xb[at];
                    if (count == 0 || (d.is_max && v > acc)) {
                        acc = v;
                        win = (int32_t)at;
                    } else if (!d.is_max) {
                        acc += v;
                    }
                }
        if (count == 0) acc = 0.0f;
        else if (!d.is_max) acc /= (float)count;
        y[e] = acc;
        if (argmax) argmax[e] = win;
    }
}

/* A thread per input value (b, i, j): the windows covering it in output order, as the CPU's
 * scatter reaches it. */
static __global__ void pool3d_backward_kernel(tfc_pool3d_desc d, const float *dy,
                                              const int32_t *argmax, float *dx, int assign)
{
    const int64_t V = (int64_t)d.in[0] * d.in[1] * d.in[2];
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < d.n * V * d.c;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int j = (int)(e % d.c);
        const int64_t v = e / d.c % V, b = e / d.c / V;
        const int i[3] = {(int)(v / ((int64_t)d.in[1] * d.in[2])), (int)(v / d.in[2] % d.in[1]),
                          (int)(v % d.in[2])};
        int olo[3], ohi[3];
        for (int a = 0; a < 3; a++) { /* o s - pad <= i < o s - pad + k */
            const int top = i[a] + d.pad[a];
            olo[a] = top - d.k[a] + 1 > 0 ? (top - d.k[a] + d.s[a]) / d.s[a] : 0;
            ohi[a] = min(top / d.s[a] + 1, d.out[a]);
        }
        const int32_t self = (int32_t)(v * d.c + j);
        float acc = assign ? 0.0f : dx[e];
        for (int o0 = olo[0]; o0 < ohi[0]; o0++)
            for (int o1 = olo[1]; o1 < ohi[1]; o1++)
                for (int o2 = olo[2]; o2 < ohi[2]; o2++) {
                    const int64_t q = ((b * d.out[0] + o0) * d.out[1] + o1) * d.out[2] + o2;
                    const float g = dy[q * d.c + j];
                    if (d.is_max) {
                        if (argmax[q * d.c + j] == self) acc += g;
                        continue;
                    }
                    const int o[3] = {o0, o1, o2};
                    int64_t count = 1;
                    for (int a = 0; a < 3; a++) {
                        const int lo = o[a] * d.s[a] - d.pad[a];
                        count *= min(lo + d.k[a], d.in[a]) - max(lo, 0);
                    }
                    if (count > 0) acc += g / (float)count; /* as the CPU: none */
                }
        dx[e] = acc;
    }
}

void tfc_gpu_pool3d_forward(tfc_backend *be, const tfc_pool3d_desc *d, const float *x, float *y,
                            int32_t *argmax)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t n = (int64_t)d->n * d->out[0] * d->out[1] * d->out[2] * d->c;
    if (n <= 0) return;
    pool3d_forward_kernel<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>(*d, x, y, argmax);
    TFC_LAUNCH_CHECK(g, pool3d_forward_kernel);
}

void tfc_gpu_pool3d_backward(tfc_backend *be, const tfc_pool3d_desc *d, const float *dy,
                             const int32_t *argmax, float *dx, int assign)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t n = (int64_t)d->n * d->in[0] * d->in[1] * d->in[2] * d->c;
    if (n <= 0) return;
    pool3d_backward_kernel<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>(*d, dy, argmax, dx,
                                                                             assign);
    TFC_LAUNCH_CHECK(g, pool3d_backward_kernel);
}
