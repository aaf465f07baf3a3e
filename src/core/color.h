/* The colour augmentations' draws and per-pixel maps (tfc_color_desc, core/backend.h):
 * header-only, as core/augment.h, so the CPU and a CUDA kernel draw and compute the same.
 * They follow Keras 3's layers (random_grayscale.py, random_invert.py, solarization.py,
 * random_posterization.py, random_color_degeneration.py) in float32 and in their order of
 * operations. */
#ifndef TFC_CORE_COLOR_H
#define TFC_CORE_COLOR_H

#include "core/augment.h"

/* Image i's parameters: on, whether it is changed (GRAYSCALE, INVERT); a, t (SOLARIZE: the
 * addition and the threshold; DEGENERATE: the factor in a); bits kept (POSTERIZE). */
typedef struct tfc_color_draw {
    int on, bits;
    float a, t;
} tfc_color_draw;

TFC_HD tfc_color_draw tfc_color_draw_at(const tfc_color_desc *d, int64_t i)
{
    tfc_color_draw r = {1, 8, 0, 0};
    if (d->kind == TFC_COLOR_GRAYSCALE) {
        r.on = tfc_rng_uniform(d->key, d->step, 4 * (uint64_t)i) < d->hi[0];
    } else if (d->kind == TFC_COLOR_INVERT) {
        /* Keras: the probability drawn in the factor's range, then a threshold under it */
        const float p = tfc_augment_draw(d->key, d->step, i, 0, d->lo[0], d->hi[0]);
        r.on = tfc_rng_uniform(d->key, d->step, 4 * (uint64_t)i + 1) < p;
    } else if (d->kind == TFC_COLOR_SOLARIZE) {
        r.a = tfc_augment_draw(d->key, d->step, i, 0, d->lo[0], d->hi[0]);
        r.t = tfc_augment_draw(d->key, d->step, i, 1, d->lo[1], d->hi[1]);
    } else if (d->kind == TFC_COLOR_POSTERIZE) {
        /* an integer in [lo, hi) as jax.random.randint, or lo when the range is one value */
        const int lo = (int)d->lo[0], span = (int)d->hi[0] - lo;
        int k = 0;
        if (span > 0) {
            k = (int)(tfc_rng_uniform(d->key, d->step, 4 * (uint64_t)i) * (float)span);
            k = k < span ? k : span - 1;
        }
        r.bits = lo + k;
    } else {
        r.a = tfc_augment_draw(d->key, d->step, i, 0, d->lo[0], d->hi[0]);
    }
    return r;
}

/* The luma of an RGB pixel, Keras's rgb_to_grayscale weights in their order. */
TFC_HD float tfc_color_luma(const float *p)
{
    return p[0] * 0.2989f + p[1] * 0.5870f + p[2] * 0.1140f;
}

/* Keras's _transform_value_range of v from [vlo, vhi] to [0, 255] (to255) or back; the
 * identity when value_range is [0, 255]. */
TFC_HD float tfc_color_rescale(const tfc_color_desc *d, float v, int to255)
{
    if (d->vlo == 0 && d->vhi == 255) return v;
    if (to255) return (v - d->vlo) / (d->vhi - d->vlo) * 255.0f + 0.0f;
    return (v - 0.0f) / (255.0f - 0.0f) * (d->vhi - d->vlo) + d->vlo;
}

/* y = the pixel x (c channels) transformed by image r's parameters. */
TFC_HD void tfc_color_pixel(const tfc_color_desc *d, tfc_color_draw r, const float *x,
                            float *y)
{
    const int c = d->c;
    if (d->kind == TFC_COLOR_GRAYSCALE) {
        const float g = r.on && c == 3 ? tfc_color_luma(x) : 0;
        for (int k = 0; k < c; k++) y[k] = r.on && c == 3 ? g : x[k];
    } else if (d->kind == TFC_COLOR_INVERT) {
        for (int k = 0; k < c; k++) y[k] = r.on ? d->vhi - x[k] : x[k];
    } else if (d->kind == TFC_COLOR_SOLARIZE) {
        for (int k = 0; k < c; k++) {
            const float z = fminf(fmaxf(tfc_color_rescale(d, x[k], 1) + r.a, 0.0f), 255.0f);
            y[k] = tfc_color_rescale(d, z < r.t ? z : 255.0f - z, 0);
        }
    } else if (d->kind == TFC_COLOR_POSTERIZE) {
        const int shift = 8 - r.bits;
        for (int k = 0; k < c; k++) {
            /* the cast to uint8 saturates (XLA's float to integer conversion) */
            const float z = tfc_color_rescale(d, x[k], 1);
            const int b = z >= 255.0f ? 255 : z > 0.0f ? (int)z : 0;
            y[k] = tfc_color_rescale(d, (float)((b >> shift) << shift), 0);
        }
    } else {
        const float g = c == 3 ? tfc_color_luma(x) : 0;
        for (int k = 0; k < c; k++) {
            const float v = x[k] + r.a * ((c == 3 ? g : x[k]) - x[k]);
            y[k] = fminf(fmaxf(v, d->vlo), d->vhi);
        }
    }
}

/* dx += the forward's gradient at the pixel x times dy (POSTERIZE: none). */
TFC_HD void tfc_color_pixel_grad(const tfc_color_desc *d, tfc_color_draw r, const float *x,
                                 const float *dy, float *dx)
{
    const int c = d->c;
    if (d->kind == TFC_COLOR_GRAYSCALE) {
        if (r.on && c == 3) {
            const float s = dy[0] + dy[1] + dy[2];
            dx[0] += 0.2989f * s, dx[1] += 0.5870f * s, dx[2] += 0.1140f * s;
        } else {
            for (int k = 0; k < c; k++) dx[k] += dy[k];
        }
    } else if (d->kind == TFC_COLOR_INVERT) {
        for (int k = 0; k < c; k++) dx[k] += r.on ? -dy[k] : dy[k];
    } else if (d->kind == TFC_COLOR_SOLARIZE) {
        /* through the clip where it passes, negated where 255 - z is taken; the two
         * rescalings' slopes multiply to 1 */
        for (int k = 0; k < c; k++) {
            const float z = tfc_color_rescale(d, x[k], 1) + r.a;
            if (z >= 0.0f && z <= 255.0f) dx[k] += z < r.t ? dy[k] : -dy[k];
        }
    } else if (d->kind == TFC_COLOR_DEGENERATE) {
        /* y_k = (1 - f) x_k + f luma (c == 3), g = dy where the clip passes */
        float g[3] = {0, 0, 0}, s = 0;
        const float luma = c == 3 ? tfc_color_luma(x) : 0;
        for (int k = 0; k < c; k++) {
            const float v = x[k] + r.a * ((c == 3 ? luma : x[k]) - x[k]);
            const float gk = v >= d->vlo && v <= d->vhi ? dy[k] : 0.0f;
            if (c != 3) dx[k] += gk;
            else g[k] = gk, s += gk;
        }
        if (c == 3) {
            const float w[3] = {0.2989f, 0.5870f, 0.1140f};
            for (int k = 0; k < 3; k++) dx[k] += (1.0f - r.a) * g[k] + r.a * w[k] * s;
        }
    }
}

#endif
