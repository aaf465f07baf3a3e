/* AutoContrast's, Equalization's and ContrastLimitedAdaptiveHistogramEqualization's per-value
 * maps (tfc_tone_desc, core/backend.h): header-only, as core/color.h, so the CPU and a CUDA
 * kernel compute the same. They follow Keras 3's auto_contrast.py, equalization.py and
 * clahe.py in float32 and in their order of operations (the constants Keras computes in
 * Python, in double, rounded to float). */
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

/* ---- ContrastLimitedAdaptiveHistogramEqualization (CLAHE) ---------------------------------- */

/* Row (or column) i of an axis of n padded after its end by numpy's "symmetric" mode
 * (d c b a after a b c d, and again reversed when the padding is longer than the axis). */
TFC_HD int tfc_clahe_mirror(int i, int n)
{
    const int m = i % (2 * n);
    return m < n ? m : 2 * n - 1 - m;
}

/* The bin of a value z in [0, 255]'s units: Keras's int32 cast clipped to [0, 255] (the
 * cast truncates toward zero; NaN taken as 0, XLA's conversion of it). */
TFC_HD int tfc_clahe_bin(float z)
{
    if (!(z > 0.0f)) return 0;
    return z >= 255.0f ? 255 : (int)z;
}

/* One tile's table from its 256-bin histogram h (counts over area = tile_h tile_w pixels,
 * overwritten by the table), as clahe.py: with clip_limit > 0 the bins clipped at
 * limit = clip_limit area / 256 and their excess (summed in bin order) spread evenly; then
 * the running sum cdf, and clip((cdf - min(cdf)) 255 / (area - min(cdf)), 0, 255), a zero
 * denominator taken as 1. No rounding: the table is float. */
TFC_HD void tfc_clahe_table(float clip_limit, int area, float *h)
{
    if (clip_limit > 0.0f) {
        const float limit = (float)((double)clip_limit * area / 256.0);
        float excess = 0.0f;
        for (int k = 0; k < 256; k++) {
            const float c = h[k] < limit ? h[k] : limit;
            excess += h[k] - c;
            h[k] = c;
        }
        const float redist = excess / 256.0f;
        for (int k = 0; k < 256; k++) h[k] = h[k] + redist;
    }
    float run = 0.0f, lo = INFINITY;
    for (int k = 0; k < 256; k++) {
        run += h[k];
        h[k] = run;
        lo = run < lo ? run : lo;
    }
    float den = (float)area - lo;
    if (den == 0.0f) den = 1.0f;
    for (int k = 0; k < 256; k++) {
        const float v = (h[k] - lo) * 255.0f / den;
        h[k] = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
    }
}

/* Where row (or column) i of the padded image reads the tiles' grid (g tiles of t rows):
 * the grid coordinate (i - t / 2) / t + 1 into the grid padded by one edge tile each side,
 * its two tiles t0, t1 (in [0, g)) and the second one's weight *wt. */
TFC_HD void tfc_clahe_axis(int i, int t, int g, int *t0, int *t1, float *wt)
{
    const float u = ((float)i - (float)(t / 2.0)) / (float)t + 1.0f;
    const float f = floorf(u);
    *wt = u - f;
    int a = (int)f, b = a + 1;
    a = a < 0 ? 0 : a > g + 1 ? g + 1 : a;
    b = b < 0 ? 0 : b > g + 1 ? g + 1 : b;
    a -= 1, b -= 1; /* the padded grid's edge tiles repeat the first and last */
    *t0 = a < 0 ? 0 : a > g - 1 ? g - 1 : a;
    *t1 = b < 0 ? 0 : b > g - 1 ? g - 1 : b;
}

/* The blend of the four tiles' table entries for one value: nw, ne (row t0), sw, se (row t1)
 * weighted by wx (to the east) and wy (to the south), in clahe.py's order. */
TFC_HD float tfc_clahe_blend(float nw, float ne, float sw, float se, float wx, float wy)
{
    const float top = nw * (1.0f - wx) + ne * wx;
    const float bot = sw * (1.0f - wx) + se * wx;
    return top * (1.0f - wy) + bot * wy;
}

/* CLAHE of one (image, channel) plane x[0], x[c], ... (h w values) into y likewise: each
 * tile's histogram over the image padded symmetrically to whole tiles, its table
 * (tables[grid_h][grid_w][256], scratch), then each value the blend of its four nearest
 * tiles'. */
TFC_HD void tfc_clahe_plane(const tfc_tone_desc *d, const float *x, float *y, float *tables)
{
    const int64_t c = d->c;
    const int th = (d->h + d->grid_h - 1) / d->grid_h, tw = (d->w + d->grid_w - 1) / d->grid_w;
    for (int ty = 0; ty < d->grid_h; ty++)
        for (int tx = 0; tx < d->grid_w; tx++) {
            float *hist = tables + ((int64_t)ty * d->grid_w + tx) * 256;
            for (int k = 0; k < 256; k++) hist[k] = 0.0f;
            for (int py = ty * th; py < (ty + 1) * th; py++) {
                const int64_t row = (int64_t)tfc_clahe_mirror(py, d->h) * d->w;
                for (int px = tx * tw; px < (tx + 1) * tw; px++) {
                    const float v = x[(row + tfc_clahe_mirror(px, d->w)) * c];
                    hist[tfc_clahe_bin(tfc_tone_range(d, v, 0))] += 1.0f;
                }
            }
            tfc_clahe_table(d->clip_limit, th * tw, hist);
        }
    for (int py = 0; py < d->h; py++) {
        int ty0, ty1;
        float wy;
        tfc_clahe_axis(py, th, d->grid_h, &ty0, &ty1, &wy);
        const float *r0 = tables + (int64_t)ty0 * d->grid_w * 256;
        const float *r1 = tables + (int64_t)ty1 * d->grid_w * 256;
        for (int px = 0; px < d->w; px++) {
            int tx0, tx1;
            float wx;
            tfc_clahe_axis(px, tw, d->grid_w, &tx0, &tx1, &wx);
            const int64_t at = ((int64_t)py * d->w + px) * c;
            const int b = tfc_clahe_bin(tfc_tone_range(d, x[at], 0));
            const float r = tfc_clahe_blend(r0[tx0 * 256 + b], r0[tx1 * 256 + b],
                                            r1[tx0 * 256 + b], r1[tx1 * 256 + b], wx, wy);
            y[at] = tfc_tone_range(d, r, 1);
        }
    }
}

#endif
