/* cuDNN's convolutions on resnet20's and mnist_cnn's shapes (bench/models/, batch 128) in
 * both tensor layouts: NHWC, tfc's (Keras's), and NCHW, PyTorch's and XLA's for float32.
 * Each op (forward, backward-data, backward-filter) is timed with the algorithm tfc's
 * heuristics take (the first of cudnnGet*Algorithm_v7 that succeeds, fits the workspace
 * budget and uses no TF32 unless --tf32: gpu_conv.cu's rule) and with the fastest
 * acceptable one that cudnnFind*AlgorithmEx measures; then the totals of one step of each
 * network, each shape weighted by its count. Whether another layout or measured algorithms
 * would shorten tfc's steps (issue 41, on an H200: resnet20 0.85x the fastest peer,
 * mnist_cnn 1.07x): the convolutions alone, no transposes, paddings or kernel-layout
 * copies. The stride-2 3x3 convolutions pad symmetrically here (TensorFlow's SAME pads one
 * row and column at the end; tfc copies into a padded buffer for those two), which reads
 * the same windows' count. --bf16 stores the tensors and filters as bfloat16, accumulating
 * in float32 on tensor cores (cuDNN's PSEUDO_BFLOAT16_CONFIG, as PyTorch's bf16 autocast
 * runs convolutions): what the GPU's convolutions would gain from `precision: bf16` with
 * 16-bit buffers (docs/gpu.md, *Not done*), before that is built.
 *   bench_cudnn [--batch N] [--tf32 | --bf16] [--reps N]   (tools/gpu-bare.sh conv-layout) */
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK_CUDA(call)                                                                          \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "bench_cudnn: %s: %s (%s:%d)\n", #call, cudaGetErrorString(e_),    \
                    __FILE__, __LINE__);                                                       \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)
#define CK_DNN(call)                                                                           \
    do {                                                                                       \
        cudnnStatus_t s_ = (call);                                                             \
        if (s_ != CUDNN_STATUS_SUCCESS) {                                                      \
            fprintf(stderr, "bench_cudnn: %s: %s (%s:%d)\n", #call, cudnnGetErrorString(s_),   \
                    __FILE__, __LINE__);                                                       \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

/* One convolution of a network (0 resnet20, 1 mnist_cnn): input h x w x c, f filters of
 * k x k, stride s, padding p, count times a step; needs_dx 0 for a first layer. */
typedef struct shape {
    const char *name;
    int net, h, w, c, f, k, s, p, count, needs_dx;
} shape;

static const char *const nets[] = {"resnet20", "mnist_cnn"};
static const shape shapes[] = {
    {"conv1 3->16 3x3", 0, 32, 32, 3, 16, 3, 1, 1, 1, 0},
    {"32x32 16->16 3x3", 0, 32, 32, 16, 16, 3, 1, 1, 6, 1},
    {"32x32 16->32 3x3/2", 0, 32, 32, 16, 32, 3, 2, 1, 1, 1},
    {"32x32 16->32 1x1/2", 0, 32, 32, 16, 32, 1, 2, 0, 1, 1},
    {"16x16 32->32 3x3", 0, 16, 16, 32, 32, 3, 1, 1, 5, 1},
    {"16x16 32->64 3x3/2", 0, 16, 16, 32, 64, 3, 2, 1, 1, 1},
    {"16x16 32->64 1x1/2", 0, 16, 16, 32, 64, 1, 2, 0, 1, 1},
    {"8x8 64->64 3x3", 0, 8, 8, 64, 64, 3, 1, 1, 5, 1},
    {"28x28 1->32 3x3 valid", 1, 28, 28, 1, 32, 3, 1, 0, 1, 0},
    {"26x26 32->64 3x3 valid", 1, 26, 26, 32, 64, 3, 1, 0, 1, 1},
};
#define NSHAPES ((int)(sizeof shapes / sizeof *shapes))

enum { FWD, DATA, FILTER };
static const char *const op_names[] = {"forward", "backward_data", "backward_filter"};

typedef struct conv {
    cudnnHandle_t h;
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    void *x, *w, *y, *dy, *dx, *dw; /* float, or bfloat16 with --bf16 */
    void *ws;
    size_t ws_bytes;
    int tf32, bf16;
} conv;

/* gpu_conv.cu's acceptable(): it ran, fits, and no TF32 unless allowed (bfloat16 data runs
 * on tensor cores: any math). */
static int acceptable(const conv *cv, cudnnStatus_t status, size_t memory, cudnnMathType_t math)
{
    if (status != CUDNN_STATUS_SUCCESS || memory > cv->ws_bytes) return 0;
    return cv->tf32 || cv->bf16 || (math != CUDNN_TENSOR_OP_MATH &&
                        math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
}

#define FIRST(cv, perf, got, algo, math)                                                       \
    for (int i_ = 0; i_ < (got) && (algo) < 0; i_++)                                           \
        if (acceptable(cv, perf[i_].status, perf[i_].memory, perf[i_].mathType)) {             \
            (algo) = (int)perf[i_].algo;                                                       \
            (math) = perf[i_].mathType;                                                        \
        }

/* The algorithm for op: from the heuristics (measure 0) or cudnnFind (1); -1 if none. */
static int choose(conv *cv, int op, int measure, cudnnMathType_t *math)
{
    int got = 0, algo = -1;
    CK_DNN(cudnnSetConvolutionMathType(cv->cd, cv->bf16   ? CUDNN_TENSOR_OP_MATH
                                               : cv->tf32 ? CUDNN_DEFAULT_MATH
                                                          : CUDNN_FMA_MATH));
    if (op == FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        if (measure)
            CK_DNN(cudnnFindConvolutionForwardAlgorithmEx(
                cv->h, cv->xd, cv->x, cv->wd, cv->w, cv->cd, cv->yd, cv->y,
                CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf, cv->ws, cv->ws_bytes));
        else
            CK_DNN(cudnnGetConvolutionForwardAlgorithm_v7(cv->h, cv->xd, cv->wd, cv->cd, cv->yd,
                                                          CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got,
                                                          perf));
        FIRST(cv, perf, got, algo, *math);
    } else if (op == DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        if (measure)
            CK_DNN(cudnnFindConvolutionBackwardDataAlgorithmEx(
                cv->h, cv->wd, cv->w, cv->yd, cv->dy, cv->cd, cv->xd, cv->dx,
                CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, perf, cv->ws, cv->ws_bytes));
        else
            CK_DNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                cv->h, cv->wd, cv->yd, cv->cd, cv->xd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                &got, perf));
        FIRST(cv, perf, got, algo, *math);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        if (measure)
            CK_DNN(cudnnFindConvolutionBackwardFilterAlgorithmEx(
                cv->h, cv->xd, cv->x, cv->yd, cv->dy, cv->cd, cv->wd, cv->dw,
                CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, perf, cv->ws, cv->ws_bytes));
        else
            CK_DNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                cv->h, cv->xd, cv->yd, cv->cd, cv->wd, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                &got, perf));
        FIRST(cv, perf, got, algo, *math);
    }
    return algo;
}

static void run_op(conv *cv, int op, int algo)
{
    const float one = 1.f, zero = 0.f;
    if (op == FWD)
        CK_DNN(cudnnConvolutionForward(cv->h, &one, cv->xd, cv->x, cv->wd, cv->w, cv->cd,
                                       (cudnnConvolutionFwdAlgo_t)algo, cv->ws, cv->ws_bytes,
                                       &zero, cv->yd, cv->y));
    else if (op == DATA)
        CK_DNN(cudnnConvolutionBackwardData(cv->h, &one, cv->wd, cv->w, cv->yd, cv->dy, cv->cd,
                                            (cudnnConvolutionBwdDataAlgo_t)algo, cv->ws,
                                            cv->ws_bytes, &zero, cv->xd, cv->dx));
    else
        CK_DNN(cudnnConvolutionBackwardFilter(cv->h, &one, cv->xd, cv->x, cv->yd, cv->dy, cv->cd,
                                              (cudnnConvolutionBwdFilterAlgo_t)algo, cv->ws,
                                              cv->ws_bytes, &zero, cv->wd, cv->dw));
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Milliseconds a call of op takes: `reps` calls back to back between two events, the
 * median over 5 such rounds, after 3 unmeasured calls. */
static double time_op(conv *cv, int op, int algo, cudnnMathType_t math, int reps)
{
    CK_DNN(cudnnSetConvolutionMathType(cv->cd, math));
    cudaEvent_t a, b;
    CK_CUDA(cudaEventCreate(&a));
    CK_CUDA(cudaEventCreate(&b));
    for (int i = 0; i < 3; i++) run_op(cv, op, algo);
    float round[5];
    for (int r = 0; r < 5; r++) {
        CK_CUDA(cudaEventRecord(a, 0));
        for (int i = 0; i < reps; i++) run_op(cv, op, algo);
        CK_CUDA(cudaEventRecord(b, 0));
        CK_CUDA(cudaEventSynchronize(b));
        CK_CUDA(cudaEventElapsedTime(&round[r], a, b));
        round[r] /= (float)reps;
    }
    qsort(round, 5, sizeof *round, cmp_float);
    CK_CUDA(cudaEventDestroy(a));
    CK_CUDA(cudaEventDestroy(b));
    return round[2];
}

/* n values in [-0.5, 0.5) on the device: floats, or (bf16) their top halves, bfloat16 */
static void *device_random(size_t n, int bf16, unsigned *seed)
{
    float *host = malloc(n * sizeof *host);
    void *dev = NULL;
    if (!host) exit(1);
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1103515245u + 12345u;
        host[i] = (float)((*seed >> 9) & 0xffff) / 65536.f - 0.5f;
    }
    if (bf16) { /* in place: the i-th half of the buffer from the i-th float */
        unsigned short *half = (unsigned short *)host;
        for (size_t i = 0; i < n; i++) {
            unsigned u;
            memcpy(&u, &host[i], 4);
            half[i] = (unsigned short)(u >> 16);
        }
    }
    const size_t bytes = n * (bf16 ? 2 : 4);
    CK_CUDA(cudaMalloc(&dev, bytes));
    CK_CUDA(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
    free(host);
    return dev;
}

int main(int argc, char **argv)
{
    int batch = 128, tf32 = 0, bf16 = 0, reps = 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tf32")) tf32 = 1;
        else if (!strcmp(argv[i], "--bf16")) bf16 = 1;
        else {
            fprintf(stderr, "usage: %s [--batch N] [--tf32 | --bf16] [--reps N]\n", argv[0]);
            return 2;
        }
    }
    if (batch < 1 || reps < 1 || (tf32 && bf16)) {
        fprintf(stderr, "bench_cudnn: --batch and --reps must be positive, and --tf32 and "
                        "--bf16 are two settings\n");
        return 2;
    }
    const cudnnDataType_t dt = bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
    int ngpu = 0;
    if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < 1) {
        fprintf(stderr, "bench_cudnn: no GPU\n");
        return 1;
    }
    struct cudaDeviceProp prop;
    CK_CUDA(cudaGetDeviceProperties(&prop, 0));
    conv cv = {.tf32 = tf32, .bf16 = bf16, .ws_bytes = (size_t)256 << 20};
    CK_DNN(cudnnCreate(&cv.h));
    CK_CUDA(cudaMalloc(&cv.ws, cv.ws_bytes));
    CK_DNN(cudnnCreateTensorDescriptor(&cv.xd));
    CK_DNN(cudnnCreateTensorDescriptor(&cv.yd));
    CK_DNN(cudnnCreateFilterDescriptor(&cv.wd));
    CK_DNN(cudnnCreateConvolutionDescriptor(&cv.cd));
    printf("bench_cudnn: %s, cuDNN %zu, batch %d, %s, %d calls a round\n", prop.name,
           cudnnGetVersion(), batch,
           bf16   ? "bfloat16 data, float32 accumulation"
           : tf32 ? "TF32 allowed"
                  : "strict float32",
           reps);
    double total[2][2][2] = {{{0}}}; /* [net][layout][heuristics, measured]: ms a step */
    unsigned seed = 1;
    for (int si = 0; si < NSHAPES; si++) {
        const shape *sh = &shapes[si];
        const int oh = (sh->h + 2 * sh->p - sh->k) / sh->s + 1;
        const int ow = (sh->w + 2 * sh->p - sh->k) / sh->s + 1;
        const size_t nx = (size_t)batch * sh->h * sh->w * sh->c;
        const size_t ny = (size_t)batch * oh * ow * sh->f;
        const size_t nw = (size_t)sh->f * sh->k * sh->k * sh->c;
        cv.x = device_random(nx, bf16, &seed), cv.dx = device_random(nx, bf16, &seed);
        cv.y = device_random(ny, bf16, &seed), cv.dy = device_random(ny, bf16, &seed);
        cv.w = device_random(nw, bf16, &seed), cv.dw = device_random(nw, bf16, &seed);
        for (int layout = 0; layout < 2; layout++) {
            const cudnnTensorFormat_t fmt = layout ? CUDNN_TENSOR_NCHW : CUDNN_TENSOR_NHWC;
            CK_DNN(cudnnSetTensor4dDescriptor(cv.xd, fmt, dt, batch, sh->c, sh->h, sh->w));
            CK_DNN(cudnnSetTensor4dDescriptor(cv.yd, fmt, dt, batch, sh->f, oh, ow));
            CK_DNN(cudnnSetFilter4dDescriptor(cv.wd, dt, fmt, sh->f, sh->c, sh->k, sh->k));
            CK_DNN(cudnnSetConvolution2dDescriptor(cv.cd, sh->p, sh->p, sh->s, sh->s, 1, 1,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
            for (int op = FWD; op <= FILTER; op++) {
                if (op == DATA && !sh->needs_dx) continue;
                double ms[2] = {-1, -1};
                int algo[2];
                for (int m = 0; m < 2; m++) {
                    cudnnMathType_t math = CUDNN_FMA_MATH;
                    algo[m] = choose(&cv, op, m, &math);
                    if (algo[m] >= 0) ms[m] = time_op(&cv, op, algo[m], math, reps);
                    total[sh->net][layout][m] += ms[m] > 0 ? ms[m] * sh->count : 0;
                }
                printf("{\"net\": \"%s\", \"shape\": \"%s\", \"count\": %d, \"layout\": \"%s\", "
                       "\"op\": \"%s\", "
                       "\"heuristic_algo\": %d, \"heuristic_ms\": %.4f, \"measured_algo\": %d, "
                       "\"measured_ms\": %.4f}\n",
                       nets[sh->net], sh->name, sh->count, layout ? "NCHW" : "NHWC",
                       op_names[op], algo[0],
                       ms[0], algo[1], ms[1]);
            }
        }
        cudaFree(cv.x), cudaFree(cv.dx), cudaFree(cv.y), cudaFree(cv.dy);
        cudaFree(cv.w), cudaFree(cv.dw);
    }
    printf("\nthe convolutions of one step (ms; forward, backward-data where needed, "
           "backward-filter; each shape times its count):\n");
    printf("%-10s %-6s %11s %10s\n", "network", "layout", "heuristics", "measured");
    for (int net = 0; net < 2; net++)
        for (int layout = 0; layout < 2; layout++)
            printf("%-10s %-6s %11.3f %10.3f\n", nets[net], layout ? "NCHW" : "NHWC",
                   total[net][layout][0], total[net][layout][1]);
    cudnnDestroyConvolutionDescriptor(cv.cd);
    cudnnDestroyFilterDescriptor(cv.wd);
    cudnnDestroyTensorDescriptor(cv.yd);
    cudnnDestroyTensorDescriptor(cv.xd);
    cudaFree(cv.ws);
    cudnnDestroy(cv.h);
    return 0;
}
