/* UpSampling2D's and crop-and-resize's (Resizing, CenterCrop, RandomCrop) kernels on the
 * GPU, NHWC, nearest or bilinear with half-pixel centres, the CPU's arithmetic (cpu_resize.c)
 * step for step, unfused (__fmul_rn, __fadd_rn; core/crop_resize.h under --fmad=false), so
 * both give the same bits. Forward: one thread per output cell. Backward gathers: one thread
 * per input cell adds what the output cells that read it send, in the CPU's (oy, ox) order:
 * no atomics. Channels are the fastest index, so neighbouring threads read neighbouring
 * floats. The crop-and-resize kernels are not in the GPU's op table yet
 * (TFC_BACKEND_LAYER_OPS): tfc_gpu_test_enable_layer_ops puts them in for `make test-gpu`'s
 * crop_resize case against the CPU. */
#include "core/crop_resize.h"
#include "gpu/gpu_internal.cuh"

#define GRID_LOOP(i, n)                                                              \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);        \
         i += (int64_t)gridDim.x * blockDim.x)

/* The two source cells of output index o along an axis of `in` cells enlarged s times and
 * the weight of the second: src = (o + 1/2) / s - 1/2 clamped to [0, in - 1]. */
typedef struct lerp {
    int i0, i1;
    float f;
} lerp;

static __device__ lerp lerp_at(int o, int s, int in)
{
    float src = __fsub_rn(__fdiv_rn(__fadd_rn((float)o, 0.5f), (float)s), 0.5f);
    if (src < 0.0f) src = 0.0f;
    lerp p;
    p.i0 = (int)src;
    if (p.i0 > in - 1) p.i0 = in - 1;
    p.i1 = p.i0 + 1 < in ? p.i0 + 1 : in - 1;
    p.f = __fsub_rn(src, (float)p.i0);
    return p;
}

/* (1 - f) a + f b */
static __device__ float mix(float a, float b, float f)
{
    return __fadd_rn(__fmul_rn(1.0f - f, a), __fmul_rn(f, b));
}

/* nearest: y[n, i, j] = x[n, i / sh, j / sw]; bilinear:
 * y = (1 - fy) ((1 - fx) x[y0, x0] + fx x[y0, x1]) + fy ((1 - fx) x[y1, x0] + fx x[y1, x1]) */
static __global__ void upsample_fwd(tfc_resize_desc d, const float *x, float *y)
{
    const int oh = d.h * d.sh, ow = d.w * d.sw, c = d.c;
    GRID_LOOP(i, (int64_t)d.n * oh * ow * c)
    {
        const int k = (int)(i % c);
        int64_t t = i / c;
        const int ox = (int)(t % ow);
        t /= ow;
        const int oy = (int)(t % oh);
        const float *xi = x + t / oh * d.h * d.w * c + k;
        if (!d.bilinear) {
            y[i] = xi[((int64_t)(oy / d.sh) * d.w + ox / d.sw) * c];
            continue;
        }
        const lerp py = lerp_at(oy, d.sh, d.h), px = lerp_at(ox, d.sw, d.w);
        const float *r0 = xi + (int64_t)py.i0 * d.w * c, *r1 = xi + (int64_t)py.i1 * d.w * c;
        y[i] = mix(mix(r0[(int64_t)px.i0 * c], r0[(int64_t)px.i1 * c], px.f),
                   mix(r1[(int64_t)px.i0 * c], r1[(int64_t)px.i1 * c], px.f), py.f);
    }
}

/* dx += the transpose of the forward map, for input cell (n, iy, ix, k): nearest, the sh x sw
 * outputs of its block; bilinear, the outputs within one factor of it whose y0 or y1 is iy
 * and x0 or x1 is ix, with weight wy ((1 - fx) where x0 is ix, then fx where x1 is ix). */
static __global__ void upsample_bwd(tfc_resize_desc d, const float *dy, float *dx)
{
    const int oh = d.h * d.sh, ow = d.w * d.sw, c = d.c;
    GRID_LOOP(i, (int64_t)d.n * d.h * d.w * c)
    {
        const int k = (int)(i % c);
        int64_t t = i / c;
        const int ix = (int)(t % d.w);
        t /= d.w;
        const int iy = (int)(t % d.h);
        const float *gy = dy + t / d.h * oh * ow * c + k;
        float acc = dx[i];
        if (!d.bilinear) {
            for (int oy = iy * d.sh; oy < (iy + 1) * d.sh; oy++)
                for (int ox = ix * d.sw; ox < (ix + 1) * d.sw; ox++)
                    acc = __fadd_rn(acc, gy[((int64_t)oy * ow + ox) * c]);
            dx[i] = acc;
            continue;
        }
        const int ylo = (iy - 1) * d.sh > 0 ? (iy - 1) * d.sh : 0;
        const int yhi = (iy + 2) * d.sh < oh ? (iy + 2) * d.sh : oh;
        const int xlo = (ix - 1) * d.sw > 0 ? (ix - 1) * d.sw : 0;
        const int xhi = (ix + 2) * d.sw < ow ? (ix + 2) * d.sw : ow;
        for (int oy = ylo; oy < yhi; oy++) {
            const lerp py = lerp_at(oy, d.sh, d.h);
            if (py.i0 != iy && py.i1 != iy) continue;
            const float wy = __fadd_rn(py.i0 == iy ? 1.0f - py.f : 0.0f, py.i1 == iy ? py.f : 0.0f);
            for (int ox = xlo; ox < xhi; ox++) {
                const lerp px = lerp_at(ox, d.sw, d.w);
                const float o = gy[((int64_t)oy * ow + ox) * c];
                if (px.i0 == ix) acc = __fadd_rn(acc, __fmul_rn(__fmul_rn(wy, 1.0f - px.f), o));
                if (px.i1 == ix) acc = __fadd_rn(acc, __fmul_rn(__fmul_rn(wy, px.f), o));
            }
        }
        dx[i] = acc;
    }
}

void tfc_gpu_upsample_forward(tfc_backend *be, const tfc_resize_desc *d, const float *x,
                              float *y)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t n = (int64_t)d->n * d->h * d->sh * d->w * d->sw * d->c;
    if (n <= 0) return;
    upsample_fwd<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>(*d, x, y);
    TFC_LAUNCH_CHECK(g, upsample_fwd);
}

void tfc_gpu_upsample_backward(tfc_backend *be, const tfc_resize_desc *d, const float *dy,
                               float *dx)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t n = (int64_t)d->n * d->h * d->w * d->c;
    if (n <= 0) return;
    upsample_bwd<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>(*d, dy, dx);
    TFC_LAUNCH_CHECK(g, upsample_bwd);
}

/* View cell (v, u) of image xi at channel k: the input's, or fill_value outside it. */
static __device__ float view_at(const tfc_crop_resize_desc &d, const float *xi, int v, int u,
                                int top, int left)
{
    const int r = v - top, q = u - left;
    return r >= 0 && r < d.h && q >= 0 && q < d.w ? xi[((int64_t)r * d.w + q) * d.c]
                                                  : d.fill_value;
}

/* y[oy, ox] = wy0 (wx0 a + wx1 b) + wy1 (wx0 e + wx1 g), as the CPU */
static __global__ void crop_resize_fwd(tfc_crop_resize_desc d, const uint64_t *step_off,
                                       const float *x, float *y)
{
    if (step_off) d.step += *step_off; /* gpu_step_offset */
    int top, left;
    tfc_crop_resize_origin(&d, &top, &left);
    GRID_LOOP(i, (int64_t)d.n * d.oh * d.ow * d.c)
    {
        const int k = (int)(i % d.c);
        int64_t t = i / d.c;
        const int ox = (int)(t % d.ow);
        t /= d.ow;
        const int oy = (int)(t % d.oh);
        const float *xi = x + t / d.oh * d.h * d.w * d.c + k;
        const tfc_resize_taps ty = tfc_resize_taps_at(oy, d.vh, d.oh, d.nearest);
        const tfc_resize_taps tx = tfc_resize_taps_at(ox, d.vw, d.ow, d.nearest);
        const float a = view_at(d, xi, ty.i0, tx.i0, top, left);
        const float b = view_at(d, xi, ty.i0, tx.i1, top, left);
        const float e = view_at(d, xi, ty.i1, tx.i0, top, left);
        const float g = view_at(d, xi, ty.i1, tx.i1, top, left);
        y[i] = ty.w0 * (tx.w0 * a + tx.w1 * b) + ty.w1 * (tx.w0 * e + tx.w1 * g);
    }
}

/* dx += wy wx dy over the outputs in the windows of input cell (n, iy, ix, k)'s view cell,
 * in the CPU's (oy, ox) order */
static __global__ void crop_resize_bwd(tfc_crop_resize_desc d, const uint64_t *step_off,
                                       const float *dy, float *dx)
{
    if (step_off) d.step += *step_off; /* gpu_step_offset */
    int top, left;
    tfc_crop_resize_origin(&d, &top, &left);
    GRID_LOOP(i, (int64_t)d.n * d.h * d.w * d.c)
    {
        const int k = (int)(i % d.c);
        int64_t t = i / d.c;
        const int v = (int)(t % d.w) + left;
        t /= d.w;
        const int u = (int)(t % d.h) + top;
        if (u < 0 || u >= d.vh || v < 0 || v >= d.vw) continue;
        const float *gy = dy + t / d.h * d.oh * d.ow * d.c + k;
        int ylo, yhi, xlo, xhi;
        tfc_resize_window(u, d.vh, d.oh, &ylo, &yhi);
        tfc_resize_window(v, d.vw, d.ow, &xlo, &xhi);
        float acc = dx[i];
        for (int oy = ylo; oy < yhi; oy++) {
            const float wy = tfc_resize_weight(tfc_resize_taps_at(oy, d.vh, d.oh, d.nearest), u);
            if (wy == 0.0f) continue;
            for (int ox = xlo; ox < xhi; ox++) {
                const float wx =
                    tfc_resize_weight(tfc_resize_taps_at(ox, d.vw, d.ow, d.nearest), v);
                if (wx != 0.0f) acc += wy * wx * gy[((int64_t)oy * d.ow + ox) * d.c];
            }
        }
        dx[i] = acc;
    }
}

void tfc_gpu_crop_resize_forward(tfc_backend *be, const tfc_crop_resize_desc *d,
                                 const float *x, float *y)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t n = (int64_t)d->n * d->oh * d->ow * d->c;
    if (n <= 0) return;
    crop_resize_fwd<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>(*d, gpu_step_offset(g), x,
                                                                      y);
    TFC_LAUNCH_CHECK(g, crop_resize_fwd);
}

void tfc_gpu_crop_resize_backward(tfc_backend *be, const tfc_crop_resize_desc *d,
                                  const float *dy, float *dx)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t n = (int64_t)d->n * d->h * d->w * d->c;
    if (n <= 0) return;
    crop_resize_bwd<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>(*d, gpu_step_offset(g),
                                                                      dy, dx);
    TFC_LAUNCH_CHECK(g, crop_resize_bwd);
}
