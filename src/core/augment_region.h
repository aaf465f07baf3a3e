/* The per-image draws of the region augmentation layers (layers/augment_region.c), from
 * their descs (core/backend.h): header-only, as core/augment.h, so every backend (and a CUDA
 * kernel) draws the same ones. They follow Keras 3's layers (random_erasing.py,
 * random_gaussian_blur.py) in float32 and in their order of operations. */
#ifndef TFC_CORE_AUGMENT_REGION_H
#define TFC_CORE_AUGMENT_REGION_H

#include "core/backend.h"
#include "core/rng.h"

/* Draw k (< 8) of image i: uniform in [0, 1). */
TFC_HD float tfc_region_u(uint64_t key, uint64_t step, int64_t i, int k)
{
    return tfc_rng_uniform(key, step, 8 * (uint64_t)i + (uint64_t)k);
}

/* RandomErasing: whether image i is erased, and its rectangle [box0, box1) of columns and
 * [box2, box3) of rows (compared as floats with the pixel's column and row, as Keras's mask):
 *   rx = sqrt(slo + u0 (shi - slo)), lx = rx w, x0 = u2 (w - lx), x1 = x0 + lx
 *   ry = sqrt(slo + u1 (shi - slo)), ly = ry h, y0 = u3 (h - ly), y1 = y0 + ly
 *   erased when u5 < plo + u4 (phi - plo) */
TFC_HD int tfc_erase_box(const tfc_erase_desc *d, int64_t i, float box[4])
{
    const float rx = sqrtf(d->slo + tfc_region_u(d->key, d->step, i, 0) * (d->shi - d->slo));
    const float ry = sqrtf(d->slo + tfc_region_u(d->key, d->step, i, 1) * (d->shi - d->slo));
    const float lx = rx * (float)d->w, ly = ry * (float)d->h;
    box[0] = tfc_region_u(d->key, d->step, i, 2) * ((float)d->w - lx), box[1] = box[0] + lx;
    box[2] = tfc_region_u(d->key, d->step, i, 3) * ((float)d->h - ly), box[3] = box[2] + ly;
    const float p = d->plo + tfc_region_u(d->key, d->step, i, 4) * (d->phi - d->plo);
    return tfc_region_u(d->key, d->step, i, 5) < p;
}

/* Whether pixel (oy, ox) lies in the rectangle. */
TFC_HD int tfc_erase_inside(const float box[4], int oy, int ox)
{
    return (float)ox >= box[0] && (float)ox < box[1] && (float)oy >= box[2] &&
           (float)oy < box[3];
}

/* The fill of value k (flat index in the batch, channel ch) */
TFC_HD float tfc_erase_fill(const tfc_erase_desc *d, int64_t k, int ch)
{
    const float v = d->noise ? (float)tfc_rng_normal(d->key, d->step, (uint64_t)k) * d->vhi
                             : d->fill[ch % 3];
    return fminf(fmaxf(v, d->vlo), d->vhi);
}

/* RandomGaussianBlur: whether image i is blurred (u1 < plo + u0 (phi - plo), Keras's draws
 * of the probability, then the threshold). */
TFC_HD int tfc_blur_applies(const tfc_blur_desc *d, int64_t i)
{
    const float p = d->plo + tfc_region_u(d->key, d->step, i, 0) * (d->phi - d->plo);
    return tfc_region_u(d->key, d->step, i, 1) < p;
}

/* The batch's normalised 1-D weights, as Keras's gaussian_blur on JAX: wx (kw of them, the
 * columns', sigma draw 0) and wy (kh, the rows', draw 1), sigma = slo + u (shi - slo) + 1e-6
 * from a stream of its own (one draw per batch, not per image);
 *   w[j] = exp(-(t / sigma)^2 / 2) / sum,  t = j - (k - 1) / 2 */
TFC_HD void tfc_blur_weights(const tfc_blur_desc *d, float *wx, float *wy)
{
    const uint64_t key = tfc_rng_key(d->key, 0xB1u);
    for (int axis = 0; axis < 2; axis++) {
        const float sigma =
            d->slo + tfc_rng_uniform(key, d->step, (uint64_t)axis) * (d->shi - d->slo) + 1e-6f;
        const int k = axis ? d->kh : d->kw;
        float *wt = axis ? wy : wx, sum = 0;
        for (int j = 0; j < k; j++) {
            const float t = ((float)j - (float)(k - 1) / 2) / sigma;
            wt[j] = expf(-0.5f * (t * t));
            sum += wt[j];
        }
        for (int j = 0; j < k; j++) wt[j] /= sum;
    }
}

/* y at (oy, ox, ch) of the blurred image xi (h, w, c): the sum over the window of
 * wy[a] wx[b] x[oy + a - kh / 2, ox + b - kw / 2], zero outside (padding SAME) */
TFC_HD float tfc_blur_at(const tfc_blur_desc *d, const float *xi, const float *wx,
                         const float *wy, int oy, int ox, int ch)
{
    float acc = 0;
    for (int a = 0; a < d->kh; a++) {
        const int iy = oy + a - d->kh / 2;
        if (iy < 0 || iy >= d->h) continue;
        for (int b = 0; b < d->kw; b++) {
            const int ix = ox + b - d->kw / 2;
            if (ix < 0 || ix >= d->w) continue;
            acc += wy[a] * wx[b] * xi[((int64_t)iy * d->w + ix) * d->c + ch];
        }
    }
    return acc;
}

#endif
