/* CPU upsampling (UpSampling2D) by integer factors, NHWC, nearest or bilinear with
 * half-pixel centres. Both directions gather: forward by output rows, backward by input
 * rows (each thread writes only its own rows), so no result depends on the thread count.
 * Channels are the contiguous inner loop. */
#include "cpu/cpu_internal.h"

/* The two source cells of output index o along an axis of `in` cells enlarged s times and
 * the weight of the second: src = (o + 1/2) / s - 1/2 clamped to [0, in - 1]. At the
 * edges both cells are the same one (jax.image.resize renormalises the weights that fall
 * inside the image, which comes to the same). */
typedef struct lerp {
    int i0, i1;
    float f;
} lerp;

static lerp lerp_at(int o, int s, int in)
{
    float src = ((float)o + 0.5f) / (float)s - 0.5f;
    if (src < 0.0f) src = 0.0f;
    lerp p = {.i0 = (int)src};
    if (p.i0 > in - 1) p.i0 = in - 1;
    p.i1 = p.i0 + 1 < in ? p.i0 + 1 : in - 1;
    p.f = src - (float)p.i0;
    return p;
}

/* nearest: y[n, i, j] = x[n, i / sh, j / sw]; bilinear:
 * y = (1 - fy) ((1 - fx) x[y0, x0] + fx x[y0, x1]) + fy ((1 - fx) x[y1, x0] + fx x[y1, x1]) */
TFC_CPU_VECTOR
void tfc_cpu_upsample_forward(tfc_backend *be, const tfc_resize_desc *d, const float *x,
                              float *y)
{
    const int oh = d->h * d->sh, ow = d->w * d->sw, c = d->c;
    const int64_t rows = (int64_t)d->n * oh;
    int nt = tfc_cpu_threads(be, rows * ow * c);
#pragma omp parallel for TFC_CPU_STATIC(rows, nt)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t img = r / oh;
        const int oy = (int)(r % oh);
        const float *xi = x + img * d->h * d->w * c;
        float *out = y + r * ow * c;
        if (!d->bilinear) {
            const float *src = xi + (int64_t)(oy / d->sh) * d->w * c;
            for (int ox = 0; ox < ow; ox++)
                memcpy(out + (int64_t)ox * c, src + (int64_t)(ox / d->sw) * c,
                       (size_t)c * sizeof(float));
            continue;
        }
        const lerp py = lerp_at(oy, d->sh, d->h);
        const float *r0 = xi + (int64_t)py.i0 * d->w * c, *r1 = xi + (int64_t)py.i1 * d->w * c;
        for (int ox = 0; ox < ow; ox++) {
            const lerp px = lerp_at(ox, d->sw, d->w);
            const float *a = r0 + (int64_t)px.i0 * c, *b = r0 + (int64_t)px.i1 * c;
            const float *e = r1 + (int64_t)px.i0 * c, *g = r1 + (int64_t)px.i1 * c;
            float *o = out + (int64_t)ox * c;
            const float fx = px.f, fy = py.f;
#pragma omp simd
            for (int k = 0; k < c; k++)
                o[k] = (1.0f - fy) * ((1.0f - fx) * a[k] + fx * b[k]) +
                       fy * ((1.0f - fx) * e[k] + fx * g[k]);
        }
    }
}

/* dx += the transpose of the forward map: input row (n, iy) in parallel, gathering from the
 * output rows that read it (nearest: its sh rows; bilinear: those whose y0 or y1 is iy,
 * within one factor of iy's centre), each output cell adding to its one or two columns. */
TFC_CPU_VECTOR
void tfc_cpu_upsample_backward(tfc_backend *be, const tfc_resize_desc *d, const float *dy,
                               float *dx)
{
    const int oh = d->h * d->sh, ow = d->w * d->sw, c = d->c;
    const int64_t rows = (int64_t)d->n * d->h;
    int nt = tfc_cpu_threads(be, (int64_t)d->n * oh * ow * c);
#pragma omp parallel for TFC_CPU_STATIC(rows, nt)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t img = r / d->h;
        const int iy = (int)(r % d->h);
        const float *gy = dy + img * oh * ow * c;
        float *g = dx + r * d->w * c;
        if (!d->bilinear) {
            for (int oy = iy * d->sh; oy < (iy + 1) * d->sh; oy++)
                for (int ox = 0; ox < ow; ox++) {
                    const float *o = gy + ((int64_t)oy * ow + ox) * c;
                    float *t = g + (int64_t)(ox / d->sw) * c;
#pragma omp simd
                    for (int k = 0; k < c; k++) t[k] += o[k];
                }
            continue;
        }
        const int lo = (iy - 1) * d->sh > 0 ? (iy - 1) * d->sh : 0;
        const int hi = (iy + 2) * d->sh < oh ? (iy + 2) * d->sh : oh;
        for (int oy = lo; oy < hi; oy++) {
            const lerp py = lerp_at(oy, d->sh, d->h);
            const float wy = (py.i0 == iy ? 1.0f - py.f : 0.0f) + (py.i1 == iy ? py.f : 0.0f);
            if (py.i0 != iy && py.i1 != iy) continue;
            for (int ox = 0; ox < ow; ox++) {
                const lerp px = lerp_at(ox, d->sw, d->w);
                const float *o = gy + ((int64_t)oy * ow + ox) * c;
                float *t0 = g + (int64_t)px.i0 * c, *t1 = g + (int64_t)px.i1 * c;
                const float w0 = wy * (1.0f - px.f), w1 = wy * px.f;
#pragma omp simd
                for (int k = 0; k < c; k++) t0[k] += w0 * o[k];
#pragma omp simd
                for (int k = 0; k < c; k++) t1[k] += w1 * o[k];
            }
        }
    }
}
