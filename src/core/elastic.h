/* RandomElasticTransform's draws, displacement field and taps (tfc_elastic_desc,
 * core/backend.h): header-only, as core/augment.h, so the CPU and a CUDA kernel draw and
 * read the same. They follow Keras 3's random_elastic_transform.py and the JAX backend's
 * elastic_transform (gaussian_blur, jax.scipy.ndimage.map_coordinates) in float32. */
#ifndef TFC_CORE_ELASTIC_H
#define TFC_CORE_ELASTIC_H

#include <math.h>

#include "core/augment.h"

/* the streams of the per-batch draw and of the normals, apart from the images' draws */
enum { TFC_ELASTIC_SCALE_STREAM = 0x5ca1e, TFC_ELASTIC_NOISE_STREAM = 0xe1a5 };

/* The batch's distortion factor, uniform in [lo, hi] (Keras's one draw per call). */
TFC_HD float tfc_elastic_scale(uint64_t key, uint64_t step, float lo, float hi)
{
    return tfc_rng_uniform(tfc_rng_key(key, TFC_ELASTIC_SCALE_STREAM), step, 0) * (hi - lo) + lo;
}

/* Keras's get_elastic_transform_params and elastic_transform's kernel size for a factor f:
 * alpha = max(h, w) (0.1 f), sigma = min(h, w) (0.05 f), k = int(6 sigma) | 1. */
TFC_HD void tfc_elastic_params(int h, int w, float f, float *alpha, float *sigma, int *k)
{
    *alpha = (float)(h > w ? h : w) * (0.1f * f);
    *sigma = (float)(h < w ? h : w) * (0.05f * f);
    *k = (int)(6.0f * *sigma) | 1;
}

/* Whether image i moves: its draw u1 < p, p = plo + u0 (phi - plo). */
TFC_HD int tfc_elastic_moved(const tfc_elastic_desc *d, int64_t i)
{
    const float p = tfc_augment_draw(d->key, d->step, i, 0, d->plo, d->phi);
    return tfc_augment_draw(d->key, d->step, i, 1, 0.0f, 1.0f) < p;
}

/* Image i's normal at pixel p (noise's when set). */
TFC_HD float tfc_elastic_normal(const tfc_elastic_desc *d, int64_t i, int64_t p)
{
    const int64_t at = i * d->h * d->w + p;
    if (d->noise) return d->noise[at];
    return (float)tfc_rng_normal(tfc_rng_key(d->key, TFC_ELASTIC_NOISE_STREAM), d->step,
                                 (uint64_t)at);
}

/* Tap j of the blur's unnormalised 1-D kernel: exp(-(t / sigma)^2 / 2), t = j - (k - 1) / 2
 * (gaussian_blur's float32 arange less the centre; the exponential in double, rounded once,
 * the same float from glibc and from CUDA). */
TFC_HD float tfc_elastic_tap(const tfc_elastic_desc *d, int j)
{
    const float t = (float)j - (float)((d->k - 1) / 2.0), q = t / d->sigma;
    return (float)exp((double)(-0.5f * (q * q)));
}

/* The sum of the k taps (the kernel's normaliser), in tap order. */
TFC_HD float tfc_elastic_tap_sum(const tfc_elastic_desc *d)
{
    float s = 0.0f;
    for (int j = 0; j < d->k; j++) s += tfc_elastic_tap(d, j);
    return s;
}

/* Image i's field at (oy, ox): the blur of sigma z, zero outside the image,
 *   f = sum_a kn[a] (sum_b kn[b] (sigma z[oy + a - r, ox + b - r])),  kn = tap / norm
 * (norm = tfc_elastic_tap_sum, r = (k - 1) / 2); 0 when sigma <= 0 (no displacement). */
TFC_HD float tfc_elastic_field_at(const tfc_elastic_desc *d, int64_t i, int oy, int ox,
                                  float norm)
{
    if (!(d->sigma > 0.0f)) return 0.0f;
    const int r = (d->k - 1) / 2;
    float f = 0.0f;
    for (int a = 0; a < d->k; a++) {
        const int y = oy + a - r;
        if (y < 0 || y >= d->h) continue;
        float row = 0.0f;
        for (int b = 0; b < d->k; b++) {
            const int x = ox + b - r;
            if (x < 0 || x >= d->w) continue;
            row += tfc_elastic_tap(d, b) / norm *
                   (d->sigma * tfc_elastic_normal(d, i, (int64_t)y * d->w + x));
        }
        f += tfc_elastic_tap(d, a) / norm * row;
    }
    return f;
}

/* The taps of output pixel (oy, ox) of image i displaced by alpha f (f its field value):
 * jax.scipy.ndimage.map_coordinates at (oy + alpha f, ox + alpha f) with the desc's fill
 * (tfc_warp_place) and its order of weights and taps (tfc_warp_taps_at's). */
TFC_HD tfc_warp_taps tfc_elastic_taps(const tfc_elastic_desc *d, float f, int oy, int ox)
{
    const float dsp = d->alpha * f;
    const float sx = (float)ox + dsp, sy = (float)oy + dsp;
    return tfc_warp_taps_of(sy, sx, d->h, d->w, d->fill, d->bilinear);
}

/* Keras's final clip: min(max(v, vlo), vhi) (jnp.clip, value_range as given), and whether
 * it passes v (the gradient's mask; NaN does not pass). */
TFC_HD float tfc_elastic_clip(const tfc_elastic_desc *d, float v)
{
    const float a = v > d->vlo ? v : v != v ? v : d->vlo;
    return a < d->vhi ? a : a != a ? a : d->vhi;
}

TFC_HD int tfc_elastic_passes(const tfc_elastic_desc *d, float v)
{
    return v >= d->vlo && v <= d->vhi;
}

#endif
