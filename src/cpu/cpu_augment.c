/* CPU augmentation transforms (RandomFlip, RandomTranslation, RandomRotation, RandomZoom,
 * RandomContrast), NHWC: each image's transform from core/augment.h. The warp gathers by
 * output rows; its transpose scatters into one image's dx on one thread, in pixel order, and
 * contrast works one (image, channel) at a time, so no result depends on the thread count. */
#include "core/augment.h"
#include "cpu/cpu_internal.h"

/* y[i, oy, ox] = sum_k wt[k] x[i, off[k]] (fill_value where off[k] < 0), summed in tap
 * order as jax.scipy.ndimage.map_coordinates does */
TFC_CPU_VECTOR
void tfc_cpu_warp_forward(tfc_backend *be, const tfc_warp_desc *d, const float *x, float *y)
{
    const int64_t rows = (int64_t)d->n * d->h, c = d->c;
    int nt = tfc_cpu_threads(be, rows * d->w * c);
#pragma omp parallel for TFC_CPU_STATIC(rows, nt)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t img = r / d->h;
        float m[8];
        tfc_warp_matrix(d, img, m);
        const float *xi = x + img * d->h * d->w * c;
        for (int ox = 0; ox < d->w; ox++) {
            const tfc_warp_taps t = tfc_warp_taps_at(d, m, (int)(r % d->h), ox);
            float *o = y + (r * d->w + ox) * c;
            for (int64_t k = 0; k < c; k++) o[k] = 0;
            for (int j = 0; j < t.n; j++) {
                const float *src = t.off[j] < 0 ? NULL : xi + t.off[j] * c;
                const float wt = t.wt[j], fill = d->fill_value;
                if (src) {
#pragma omp simd
                    for (int64_t k = 0; k < c; k++) o[k] += wt * src[k];
                } else {
                    for (int64_t k = 0; k < c; k++) o[k] += wt * fill;
                }
            }
        }
    }
}

/* dx[i, off[k]] += wt[k] dy[i, oy, ox] over every output pixel and tap inside the image:
 * the transpose of the forward (fill_value does not depend on x) */
TFC_CPU_VECTOR
void tfc_cpu_warp_backward(tfc_backend *be, const tfc_warp_desc *d, const float *dy, float *dx)
{
    const int64_t px = (int64_t)d->h * d->w, c = d->c;
    int nt = tfc_cpu_threads(be, d->n * px * c);
#pragma omp parallel for TFC_CPU_STATIC(d->n, nt)
    for (int64_t img = 0; img < d->n; img++) {
        float m[8];
        tfc_warp_matrix(d, img, m);
        float *g = dx + img * px * c;
        for (int64_t p = 0; p < px; p++) {
            const tfc_warp_taps t = tfc_warp_taps_at(d, m, (int)(p / d->w), (int)(p % d->w));
            const float *o = dy + (img * px + p) * c;
            for (int j = 0; j < t.n; j++) {
                if (t.off[j] < 0) continue;
                float *dst = g + t.off[j] * c;
                const float wt = t.wt[j];
#pragma omp simd
                for (int64_t k = 0; k < c; k++) dst[k] += wt * o[k];
            }
        }
    }
}

/* Pair q = (image, channel) of contrast: the offset of its first float (then every c-th,
 * hw of them), its image's factor f and its mean m (summed in double, in pixel order). */
static int64_t channel_at(const tfc_contrast_desc *d, const float *x, int64_t q, float *f,
                          float *m)
{
    const int64_t img = q / d->c, base = img * d->hw * d->c + q % d->c;
    double s = 0;
    for (int64_t p = 0; p < d->hw; p++) s += x[base + p * d->c];
    *f = tfc_contrast_factor(d, img);
    *m = (float)(s / (double)d->hw);
    return base;
}

/* y = clip((x - m) f + m, vlo, vhi) per image and channel */
void tfc_cpu_contrast_forward(tfc_backend *be, const tfc_contrast_desc *d, const float *x,
                              float *y)
{
    const int64_t pairs = (int64_t)d->n * d->c, hw = d->hw, c = d->c;
    int nt = tfc_cpu_threads(be, pairs * hw);
#pragma omp parallel for TFC_CPU_STATIC(pairs, nt)
    for (int64_t q = 0; q < pairs; q++) {
        float f, m;
        const int64_t base = channel_at(d, x, q, &f, &m);
        for (int64_t p = 0; p < hw; p++) {
            const float z = (x[base + p * c] - m) * f + m;
            y[base + p * c] = fminf(fmaxf(z, d->vlo), d->vhi);
        }
    }
}

/* With g = dy where vlo <= z <= vhi (else 0), z = (x - m) f + m:
 *   dx += f g + (1 - f) mean(g)     (the mean over the channel's pixels, as m) */
void tfc_cpu_contrast_backward(tfc_backend *be, const tfc_contrast_desc *d, const float *x,
                               const float *dy, float *dx)
{
    const int64_t pairs = (int64_t)d->n * d->c, hw = d->hw, c = d->c;
    int nt = tfc_cpu_threads(be, pairs * hw);
#pragma omp parallel for TFC_CPU_STATIC(pairs, nt)
    for (int64_t q = 0; q < pairs; q++) {
        float f, m;
        const int64_t base = channel_at(d, x, q, &f, &m);
        double gs = 0;
        for (int64_t p = 0; p < hw; p++) {
            const float z = (x[base + p * c] - m) * f + m;
            if (z >= d->vlo && z <= d->vhi) gs += dy[base + p * c];
        }
        const float shared = (float)((1.0 - f) * gs / (double)hw);
        for (int64_t p = 0; p < hw; p++) {
            const float z = (x[base + p * c] - m) * f + m;
            const float g = z >= d->vlo && z <= d->vhi ? dy[base + p * c] : 0.0f;
            dx[base + p * c] += f * g + shared;
        }
    }
}

/* y = clip(x + b, vlo, vhi), b image i's delta */
void tfc_cpu_brightness_forward(tfc_backend *be, const tfc_contrast_desc *d, const float *x,
                                float *y)
{
    const int64_t per = (int64_t)d->hw * d->c;
    int nt = tfc_cpu_threads(be, d->n * per);
#pragma omp parallel for TFC_CPU_STATIC(d->n, nt)
    for (int64_t i = 0; i < d->n; i++) {
        const float b = tfc_brightness_delta(d, i);
        for (int64_t k = i * per; k < (i + 1) * per; k++)
            y[k] = fminf(fmaxf(x[k] + b, d->vlo), d->vhi);
    }
}

/* dx += dy where vlo <= x + b <= vhi */
void tfc_cpu_brightness_backward(tfc_backend *be, const tfc_contrast_desc *d, const float *x,
                                 const float *dy, float *dx)
{
    const int64_t per = (int64_t)d->hw * d->c;
    int nt = tfc_cpu_threads(be, d->n * per);
#pragma omp parallel for TFC_CPU_STATIC(d->n, nt)
    for (int64_t i = 0; i < d->n; i++) {
        const float b = tfc_brightness_delta(d, i);
        for (int64_t k = i * per; k < (i + 1) * per; k++) {
            const float z = x[k] + b;
            if (z >= d->vlo && z <= d->vhi) dx[k] += dy[k];
        }
    }
}
