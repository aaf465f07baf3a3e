/* Max and average pooling, NHWC, with kernels of our own: windows clipped to the image so
 * padded cells never win a max nor count in an average (TensorFlow's SAME). Forward: one
 * thread per output, cells in the CPU's order (first maximum wins ties). Backward gathers:
 * one thread per input cell adds what the windows containing it send, in (oy, ox) order:
 * no atomics, and the CPU's sums bit for bit. */
#include "gpu/gpu_internal.cuh"

#define GRID_LOOP(i, n)                                                              \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);        \
         i += (int64_t)gridDim.x * blockDim.x)

/* The window of output (oy, ox) clipped to the image: rows [y0, y1), columns [x0, x1). */
struct window {
    int y0, y1, x0, x1;
};

static __device__ __forceinline__ window clip_window(const tfc_pool_desc &d, int oy, int ox)
{
    window w;
    w.y0 = oy * d.sh - d.pad_top;
    w.x0 = ox * d.sw - d.pad_left;
    w.y1 = min(w.y0 + d.kh, d.h);
    w.x1 = min(w.x0 + d.kw, d.w);
    w.y0 = max(w.y0, 0);
    w.x0 = max(w.x0, 0);
    return w;
}

/* y[n, oy, ox, c]: max (argmax = flat index within the image, -1 for an empty window, whose
 * output is 0) or mean over the cells inside the image. */
static __global__ void pool_forward_kernel(tfc_pool_desc d, const float *x, float *y, int32_t *argmax)
{
    const int64_t total = (int64_t)d.n * d.oh * d.ow * d.c;
    GRID_LOOP(i, total)
    {
        const int ch = (int)(i % d.c);
        int64_t t = i / d.c;
        const int ox = (int)(t % d.ow);
        t /= d.ow;
        const int oy = (int)(t % d.oh);
        const int64_t img = t / d.oh;
        const float *im = x + img * d.h * d.w * d.c;
        const window w = clip_window(d, oy, ox);
        if (w.y0 >= w.y1 || w.x0 >= w.x1) {
            y[i] = 0.0f;
            if (argmax) argmax[i] = -1;
            continue;
        }
        if (d.is_max) {
            int32_t best = (w.y0 * d.w + w.x0) * d.c + ch;
            float m = im[best];
            for (int iy = w.y0; iy < w.y1; iy++)
                for (int ix = w.x0; ix < w.x1; ix++) {
                    int32_t at = (iy * d.w + ix) * d.c + ch;
                    float v = im[at];
                    if (v > m) {
                        m = v;
                        best = at;
                    }
                }
            y[i] = m;
            if (argmax) argmax[i] = best;
        } else {
            float s = 0.0f;
            for (int iy = w.y0; iy < w.y1; iy++)
                for (int ix = w.x0; ix < w.x1; ix++) s += im[(iy * d.w + ix) * d.c + ch];
            y[i] = s * (1.0f / (float)((w.y1 - w.y0) * (w.x1 - w.x0)));
        }
    }
}

/* Outputs whose window (before clipping) contains input row iy: oy*s - pad <= iy <
 * oy*s - pad + k, i.e. oy in [ceil((iy + pad - k + 1) / s), floor((iy + pad) / s)]. */
static __device__ __forceinline__ void covering(int i, int pad, int k, int s, int o, int *lo, int *hi)
{
    int a = i + pad - k + 1;
    *lo = a <= 0 ? 0 : (a + s - 1) / s;
    *hi = min((i + pad) / s, o - 1);
}

/* dx[n, iy, ix, c] += what the windows containing it send: max, dy where this cell won;
 * average, dy / (cells of the window). With assign, dx = (its old contents never read); with
 * relu_x, times the ReLU's derivative there, as act_backward takes it. */
static __global__ void pool_backward_kernel(tfc_pool_desc d, const float *dy, const int32_t *argmax,
                                     float *dx, int assign, const float *relu_x)
{
    const int64_t total = (int64_t)d.n * d.h * d.w * d.c;
    GRID_LOOP(i, total)
    {
        const int ch = (int)(i % d.c);
        int64_t t = i / d.c;
        const int ix = (int)(t % d.w);
        t /= d.w;
        const int iy = (int)(t % d.h);
        const int64_t img = t / d.h;
        const int32_t self = (iy * d.w + ix) * d.c + ch;
        int oy0, oy1, ox0, ox1;
        covering(iy, d.pad_top, d.kh, d.sh, d.oh, &oy0, &oy1);
        covering(ix, d.pad_left, d.kw, d.sw, d.ow, &ox0, &ox1);
        const int64_t base = img * d.oh * d.ow * d.c;
        float acc = assign ? 0.0f : dx[i];
        for (int oy = oy0; oy <= oy1; oy++)
            for (int ox = ox0; ox <= ox1; ox++) {
                const int64_t o = base + ((int64_t)oy * d.ow + ox) * d.c + ch;
                if (d.is_max) {
                    if (argmax[o] == self) acc += dy[o];
                } else {
                    const window w = clip_window(d, oy, ox);
                    acc += dy[o] * (1.0f / (float)((w.y1 - w.y0) * (w.x1 - w.x0)));
                }
            }
        dx[i] = relu_x ? (relu_x[i] > 0.0f ? 1.0f : 0.0f) * acc : acc;
    }
}

void tfc_gpu_pool_forward(tfc_backend *be, const tfc_pool_desc *d, const float *x, float *y,
                          int32_t *argmax)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t total = (int64_t)d->n * d->oh * d->ow * d->c;
    if (total <= 0) return;
    pool_forward_kernel<<<gpu_blocks(g, total), GPU_THREADS, 0, g->stream>>>(
        *d, x, y, d->is_max ? argmax : NULL);
    TFC_LAUNCH_CHECK(g, pool_forward_kernel);
}

void tfc_gpu_pool_backward(tfc_backend *be, const tfc_pool_desc *d, const float *dy,
                           const int32_t *argmax, float *dx, int assign, const float *relu_x)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t total = (int64_t)d->n * d->h * d->w * d->c;
    if (total <= 0 || d->oh <= 0 || d->ow <= 0) return;
    pool_backward_kernel<<<gpu_blocks(g, total), GPU_THREADS, 0, g->stream>>>(*d, dy, argmax, dx,
                                                                              assign, relu_x);
    TFC_LAUNCH_CHECK(g, pool_backward_kernel);
}
