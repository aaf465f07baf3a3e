/* The per-image draws of the region augmentation layers (layers/augment_region.c), from
 * their descs (core/backend.h): header-only, as core/augment.h, so every backend (and a CUDA
 * kernel) draws the same ones. They follow Keras 3's layers (random_erasing.py) in float32
 * and in their order of operations. */
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

#endif
