/* CPU upsampling (UpSampling2D) by integer factors and crop-and-resize (Resizing,
 * CenterCrop, RandomCrop: core/crop_resize.h), NHWC, nearest or bilinear with half-pixel
 * centres. Both directions gather: forward by output rows, backward by input rows (each
 * thread writes only its own rows), so no result depends on the thread count. Channels are
 * the contiguous inner loop. */
#include "core/crop_resize.h"
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

/* Row v of the view of image xi (NULL: a border row of fill_value). */
static const float *view_row(const tfc_crop_resize_desc *d, const float *xi, int v, int top)
{
    const int r = v - top;
    return r >= 0 && r < d->h ? xi + (int64_t)r * d->w * d->c : NULL;
}

/* y[oy, ox] = wy0 (wx0 a + wx1 b) + wy1 (wx0 e + wx1 g), the view's cells a = (y0, x0),
 * b = (y0, x1), e = (y1, x0), g = (y1, x1) (fill_value outside the input) */
TFC_CPU_VECTOR
void tfc_cpu_crop_resize_forward(tfc_backend *be, const tfc_crop_resize_desc *d,
                                 const float *x, float *y)
{
    const int c = d->c;
    const int64_t rows = (int64_t)d->n * d->oh;
    int top, left;
    tfc_crop_resize_origin(d, &top, &left);
    int nt = tfc_cpu_threads(be, rows * d->ow * c);
#pragma omp parallel for TFC_CPU_STATIC(rows, nt)
    for (int64_t r = 0; r < rows; r++) {
        const float *xi = x + r / d->oh * d->h * d->w * c;
        const tfc_resize_taps ty = tfc_resize_taps_at((int)(r % d->oh), d->vh, d->oh,
                                                      d->nearest);
        const float *r0 = view_row(d, xi, ty.i0, top), *r1 = view_row(d, xi, ty.i1, top);
        for (int ox = 0; ox < d->ow; ox++) {
            const tfc_resize_taps tx = tfc_resize_taps_at(ox, d->vw, d->ow, d->nearest);
            const int q0 = tx.i0 - left, q1 = tx.i1 - left;
            const float *cell[4] = {r0, r0, r1, r1};
            const int q[4] = {q0, q1, q0, q1};
            float f[4];
            const float *src[4];
            for (int j = 0; j < 4; j++) {
                src[j] = cell[j] && q[j] >= 0 && q[j] < d->w ? cell[j] + (int64_t)q[j] * c
                                                               : NULL;
                f[j] = d->fill_value;
            }
            float *o = y + (r * d->ow + ox) * c;
            for (int k = 0; k < c; k++) {
                for (int j = 0; j < 4; j++)
                    if (src[j]) f[j] = src[j][k];
                o[k] = ty.w0 * (tx.w0 * f[0] + tx.w1 * f[1]) +
                       ty.w1 * (tx.w0 * f[2] + tx.w1 * f[3]);
            }
        }
    }
}

/* dx[iy, ix] += sum over the outputs that read its view cell of wy wx dy: input row (n, iy)
 * in parallel, gathering from the output rows of its window (tfc_resize_window), each output
 * cell adding to the one or two input columns it read, in output order. */
TFC_CPU_VECTOR
void tfc_cpu_crop_resize_backward(tfc_backend *be, const tfc_crop_resize_desc *d,
                                  const float *dy, float *dx)
{
    const int c = d->c;
    const int64_t rows = (int64_t)d->n * d->h;
    int top, left;
    tfc_crop_resize_origin(d, &top, &left);
    int nt = tfc_cpu_threads(be, (int64_t)d->n * d->oh * d->ow * c);
#pragma omp parallel for TFC_CPU_STATIC(rows, nt)
    for (int64_t r = 0; r < rows; r++) {
        const int v = (int)(r % d->h) + top;
        if (v < 0 || v >= d->vh) continue;
        const float *gy = dy + r / d->h * d->oh * d->ow * c;
        float *g = dx + r * d->w * c;
        int lo, hi;
        tfc_resize_window(v, d->vh, d->oh, &lo, &hi);
        for (int oy = lo; oy < hi; oy++) {
            const float wy = tfc_resize_weight(tfc_resize_taps_at(oy, d->vh, d->oh,
                                                                  d->nearest), v);
            if (wy == 0.0f) continue;
            for (int ox = 0; ox < d->ow; ox++) {
                const tfc_resize_taps tx = tfc_resize_taps_at(ox, d->vw, d->ow, d->nearest);
                const float *o = gy + ((int64_t)oy * d->ow + ox) * c;
                const int q[2] = {tx.i0 - left, tx.i1 - left};
                const float wx[2] = {tx.w0, tx.w1};
                for (int j = 0; j < 2; j++) {
                    if (q[j] < 0 || q[j] >= d->w || wx[j] == 0.0f) continue;
                    float *t = g + (int64_t)q[j] * c;
                    const float wt = wy * wx[j];
#pragma omp simd
                    for (int k = 0; k < c; k++) t[k] += wt * o[k];
                }
            }
        }
    }
}
