/* Adaptive max and average pooling on the GPU (tfc_adaptive_pool_desc in core/backend.h, its
 * bins in core/adaptive_pool.h): plain kernels, a thread per output value forward, walking
 * its bin in cpu_adaptive_pool.c's order (w, then h, then d; a later cell wins the max only
 * when strictly larger), and a thread per input value backward, gathering from the bins
 * that hold it in output order, as the CPU's scatter reaches it: the same bits as the CPU.
 * Not in the GPU's op table yet (TFC_BACKEND_LAYER_OPS): tfc_gpu_test_enable_layer_ops puts
 * them in for `make test-gpu`'s adaptive_pool case; until that has passed on a GPU, the
 * adaptive pooling layers are refused there. */
#include "core/adaptive_pool.h"
#include "gpu/gpu_internal.cuh"

/* A thread per output value (b, p, j). */
static __global__ void adaptive_pool_forward_kernel(tfc_adaptive_pool_desc d, const float *x,
                                                    float *y, int32_t *argmax)
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
        for (int a = 0; a < 3; a++) tfc_adaptive_bin(o[a], d.in[a], d.out[a], &lo[a], &hi[a]);
        const float *xb = x + b * vin;
        float acc = 0.0f;
        int32_t win = -1;
        for (int i2 = lo[2]; i2 < hi[2]; i2++)
            for (int i1 = lo[1]; i1 < hi[1]; i1++)
                for (int i0 = lo[0]; i0 < hi[0]; i0++) {
                    const int64_t at = (((int64_t)i0 * d.in[1] + i1) * d.in[2] + i2) * d.c + j;
                    const float v = xb[at];
                    if (win < 0 || (d.is_max && v > acc)) {
                        acc = v;
                        win = (int32_t)at;
                    } else if (!d.is_max) {
                        acc += v;
                    }
                }
        if (!d.is_max) acc /= (float)((hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]));
        y[e] = acc;
        if (argmax) argmax[e] = win;
    }
}

/* A thread per input value (b, i, j): the bins holding it, in output order. */
static __global__ void adaptive_pool_backward_kernel(tfc_adaptive_pool_desc d, const float *dy,
                                                     const int32_t *argmax, float *dx,
                                                     int assign)
{
    const int64_t V = (int64_t)d.in[0] * d.in[1] * d.in[2];
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < d.n * V * d.c;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int j = (int)(e % d.c);
        const int64_t v = e / d.c % V, b = e / d.c / V;
        const int i[3] = {(int)(v / ((int64_t)d.in[1] * d.in[2])), (int)(v / d.in[2] % d.in[1]),
                          (int)(v % d.in[2])};
        int olo[3], ohi[3];
        for (int a = 0; a < 3; a++) tfc_adaptive_cover(i[a], d.in[a], d.out[a], &olo[a], &ohi[a]);
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
                    int count = 1;
                    for (int a = 0; a < 3; a++) {
                        int lo, hi;
                        tfc_adaptive_bin(o[a], d.in[a], d.out[a], &lo, &hi);
                        count *= hi - lo;
                    }
                    acc += g / (float)count;
                }
        dx[e] = acc;
    }
}

void tfc_gpu_adaptive_pool_forward(tfc_backend *be, const tfc_adaptive_pool_desc *d,
                                   const float *x, float *y, int32_t *argmax)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t n = (int64_t)d->n * d->out[0] * d->out[1] * d->out[2] * d->c;
    if (n <= 0) return;
    adaptive_pool_forward_kernel<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>(*d, x, y,
                                                                                   argmax);
    TFC_LAUNCH_CHECK(g, adaptive_pool_forward_kernel);
}

void tfc_gpu_adaptive_pool_backward(tfc_backend *be, const tfc_adaptive_pool_desc *d,
                                    const float *dy, const int32_t *argmax, float *dx,
                                    int assign)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t n = (int64_t)d->n * d->in[0] * d->in[1] * d->in[2] * d->c;
    if (n <= 0) return;
    adaptive_pool_backward_kernel<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>(*d, dy, argmax,
                                                                                    dx, assign);
    TFC_LAUNCH_CHECK(g, adaptive_pool_backward_kernel);
}
