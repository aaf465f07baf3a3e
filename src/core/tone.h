/* AutoContrast's and Equalization's per-value maps (tfc_tone_desc, core/backend.h):
 * header-only, as core/color.h, so the CPU and a CUDA kernel compute the same. They follow
 * Keras 3's auto_contrast.py and equalization.py in float32 and in their order of
 * operations (the constants Keras computes in Python, in double, rounded to float). */
#ifndef TFC_CORE_TONE_H
#define TFC_CORE_TONE_H

#include <math.h>

#include "core/augment.h"

/* ---- AutoContrast -------------------------------------------------------------------------- */

/* v from value_range to [0, 255] (BaseImagePreprocessingLayer._transform_value_range, the
 * identity when value_range is [0, 255]); back with back set */
TFC_HD float tfc_tone_range(const tfc_tone_desc *d, float v, int back)
{
    if (d->vlo == 0.0f && d->vhi == 255.0f) return v;
    if (back) return (v - 0.0f) / (255.0f - 0.0f) * (d->vhi - d->vlo) + d->vlo;
    return (v - d->vlo) / (d->vhi - d->vlo) * (255.0f - 0.0f) + 0.0f;
}

/* The output for input x of a channel whose values in [0, 255] have the extremes lo, hi:
 * clip((z - lo) 255 / (hi - lo), 0, 255) back in value_range, as Keras's z scale + offset;
 * x itself where that is NaN (a constant channel: Keras's "don't process NaN channels"). */
TFC_HD float tfc_autocontrast_value(const tfc_tone_desc *d, float x, float lo, float hi)
{
    const float scale = 255.0f / (hi - lo), offset = -lo * scale;
    float r = tfc_tone_range(d, x, 0) * scale + offset;
    if (r < 0.0f) r = 0.0f; /* NaN stays NaN, as jnp.clip */
    if (r > 255.0f) r = 255.0f;
    r = tfc_tone_range(d, r, 1);
    return r != r ? x : r;
}

/* ---- Equalization -------------------------------------------------------------------------- */

/* the constants of Equalization._scale_values to [0, 255] (to255 set) and back */
TFC_HD float tfc_equalize_scale(const tfc_tone_desc *d, int to255)
{
    const double lo = d->vlo, hi = d->vhi;
    return (float)(to255 ? 255.0 / (hi - lo) : (hi - lo) / 255.0);
}

TFC_HD float tfc_equalize_offset(const tfc_tone_desc *d, int to255)
{
    const double lo = d->vlo, hi = d->vhi;
    return (float)(to255 ? 0.0 - lo * (255.0 / (hi - lo)) : lo);
}

/* v (in [0, 255]) clamped into [0, bins - 1] and truncated: the histogram's bin (_custom_
 * histogram_fixed_width: v (bins - 1) / 255) or, with lookup set, the lookup table's index
 * (_apply_equalization: v / 255 (bins - 1)); both orders as Keras's, which differ in the
 * last bit */
TFC_HD int tfc_equalize_bin(int bins, float v, int lookup)
{
    const float s = lookup ? (v / 255.0f) * (float)(bins - 1)
                           : ((v - 0.0f) * (float)(bins - 1)) / (255.0f - 0.0f);
    if (!(s > 0.0f)) return 0; /* NaN too */
    return s >= (float)(bins - 1) ? bins - 1 : (int)s;
}

/* The lookup table from the histogram hist[bins] (overwritten by its running sum):
 * lut[k] = clip(round((cdf[k] - cdf_min) 255 / (cdf[-1] - cdf_min)), 0, 255), cdf_min the
 * first non-zero cdf (a zero denominator taken as 1), as float32 true division of the
 * integers, rounded half to even (jnp.round). Returns the number of non-zero bins; with at
 * most 1 Keras keeps the channel as it is (lut then unset). */
TFC_HD int tfc_equalize_lut(int bins, int *hist, float *lut)
{
    int nonzero = 0, cdf_min = 0;
    for (int k = 0; k < bins; k++) {
        nonzero += hist[k] != 0;
        hist[k] += k ? hist[k - 1] : 0;
        if (!cdf_min) cdf_min = hist[k];
    }
    if (nonzero <= 1) return nonzero;
    int den = hist[bins - 1] - cdf_min;
    if (den == 0) den = 1;
    for (int k = 0; k < bins; k++) {
        float v = rintf((float)((long long)(hist[k] - cdf_min) * 255) / (float)den);
        lut[k] = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
    }
    return nonzero;
}

#endif
