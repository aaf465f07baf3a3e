/* The colour augmentations' draws and per-pixel maps (tfc_color_desc, core/backend.h):
 * header-only, as core/augment.h, so the CPU and a CUDA kernel draw and compute the same.
 * They follow Keras 3's layers (random_grayscale.py, random_invert.py, solarization.py,
 * random_posterization.py, random_color_degeneration.py, random_saturation.py,
 * random_hue.py, and the JAX backend's rgb_to_hsv, hsv_to_rgb) in float32 and in their
 * order of operations. */
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
    } else if (d->kind == TFC_COLOR_SATURATE) {
        const float u = tfc_augment_draw(d->key, d->step, i, 0, d->lo[0], d->hi[0]);
        r.a = u / (1.0f - u + 1e-7f);
    } else if (d->kind == TFC_COLOR_HUE) {
        const float sign = tfc_rng_uniform(d->key, d->step, 4 * (uint64_t)i) > 0.5f ? -1.0f
                                                                                     : 1.0f;
        r.a = sign * tfc_augment_draw(d->key, d->step, i, 1, d->lo[0], d->hi[0]) * 0.5f;
    } else {
        r.a = tfc_augment_draw(d->key, d->step, i, 0, d->lo[0], d->hi[0]);
    }
    return r;
}

/* ---- HSV, as Keras's rgb_to_hsv and hsv_to_rgb (dm_pix's) on JAX ------------------------ */

/* A pixel in HSV and what its gradient needs: the channels zeroed (|x| < float32's eps, as
 * Keras zeroes them first), the channels of the maximum and the minimum (ties to the first
 * of r, g, b, the order of Keras's wheres), the range max - min. */
typedef struct tfc_hsv {
    float h, s, v, range, p[3];
    int vmax, vmin;
} tfc_hsv;

TFC_HD tfc_hsv tfc_rgb_to_hsv(const float *x)
{
    tfc_hsv o;
    for (int k = 0; k < 3; k++) o.p[k] = fabsf(x[k]) < 1.1920929e-7f ? 0.0f : x[k];
    const float r = o.p[0], g = o.p[1], b = o.p[2];
    o.v = fmaxf(fmaxf(r, g), b);
    const float m = fminf(fminf(r, g), b);
    o.range = o.v - m;
    o.vmax = o.v == r ? 0 : o.v == g ? 1 : 2;
    o.vmin = m == r ? 0 : m == g ? 1 : 2;
    const float safe_v = o.v > 0 ? o.v : 1.0f, safe_range = o.range > 0 ? o.range : 1.0f;
    o.s = o.v > 0 ? o.range / safe_v : 0.0f;
    const float norm = 1.0f / (6.0f * safe_range);
    float h = o.v == g ? norm * (b - r) + (float)(2.0 / 6.0) : norm * (r - g) + (float)(4.0 / 6.0);
    if (o.v == r) h = norm * (g - b);
    o.h = (o.range > 0 ? h : 0.0f) + (h < 0.0f ? 1.0f : 0.0f);
    return o;
}

/* jnp.mod(h, 1) */
TFC_HD float tfc_mod1(float h)
{
    const float r = fmodf(h, 1.0f);
    return r != 0 && r < 0 ? r + 1.0f : r;
}

/* The channel k's weight of hsv_to_rgb, clip(|dh - 3| - 1, 0, 1) for red, clip(2 - |dh - 2|,
 * 0, 1) and clip(2 - |dh - 4|, 0, 1) for green and blue, and its slope in dh (0 where the clip
 * holds). */
TFC_HD float tfc_hsv_weight(float dh, int k, float *slope)
{
    const float t = k == 0 ? fabsf(dh - 3.0f) - 1.0f : 2.0f - fabsf(dh - (k == 1 ? 2.0f : 4.0f));
    const float c = k == 0 ? dh - 3.0f : dh - (k == 1 ? 2.0f : 4.0f);
    const float sg = c > 0 ? 1.0f : c < 0 ? -1.0f : 0.0f;
    *slope = t > 0 && t < 1 ? (k == 0 ? sg : -sg) : 0.0f;
    return fminf(fmaxf(t, 0.0f), 1.0f);
}

TFC_HD void tfc_hsv_to_rgb(float h, float s, float v, float *y)
{
    const float dh = tfc_mod1(h) * 6.0f;
    for (int k = 0; k < 3; k++) {
        float slope;
        y[k] = v * ((1.0f - s) + s * tfc_hsv_weight(dh, k, &slope));
    }
}

/* The gradients (gh, gs, gv) of hsv_to_rgb at (h, s, v) given the output's dy. */
TFC_HD void tfc_hsv_to_rgb_grad(float h, float s, float v, const float *dy, float g[3])
{
    const float dh = tfc_mod1(h) * 6.0f;
    g[0] = g[1] = g[2] = 0;
    for (int k = 0; k < 3; k++) {
        float slope;
        const float w = tfc_hsv_weight(dh, k, &slope);
        g[0] += dy[k] * v * s * slope * 6.0f;
        g[1] += dy[k] * v * (w - 1.0f);
        g[2] += dy[k] * ((1.0f - s) + s * w);
    }
}

/* dx += the gradient of rgb_to_hsv at o given (gh, gs, gv) */
TFC_HD void tfc_rgb_to_hsv_grad(const tfc_hsv *o, const float g[3], float *dx)
{
    float d[3] = {0, 0, 0};
    d[o->vmax] += g[2]; /* v */
    if (o->v > 0) {     /* s = range / v */
        const float inv = 1.0f / o->v;
        d[o->vmax] += g[1] * (inv - o->range * inv * inv);
        d[o->vmin] -= g[1] * inv;
    }
    if (o->range > 0) { /* h = num / (6 range) + offset */
        const float r = o->p[0], gg = o->p[1], b = o->p[2];
        const int hi = o->vmax;
        const float num = hi == 0 ? gg - b : hi == 1 ? b - r : r - gg;
        const float q = g[0] / (6.0f * o->range);
        const int plus = hi == 0 ? 1 : hi == 1 ? 2 : 0, minus = hi == 0 ? 2 : hi == 1 ? 0 : 1;
        d[plus] += q, d[minus] -= q;
        const float dr = -q * num / o->range; /* through range = v - min */
        d[o->vmax] += dr, d[o->vmin] -= dr;
    }
    for (int k = 0; k < 3; k++)
        if (o->p[k] != 0) dx[k] += d[k]; /* a zeroed channel: Keras's where, no gradient */
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

/* RandomHue's _transform_value_range of v from [vlo, vhi] (as given) to [0, 1], and back;
 * the identity when value_range is [0, 1]. */
TFC_HD float tfc_color_hue_in(const tfc_color_desc *d, float v)
{
    if (d->vlo == 0 && d->vhi == 1) return v;
    return (v - d->vlo) / (d->vhi - d->vlo) * 1.0f + 0.0f;
}

TFC_HD float tfc_color_hue_out(const tfc_color_desc *d, float v)
{
    if (d->vlo == 0 && d->vhi == 1) return v;
    return (v - 0.0f) / (1.0f - 0.0f) * (d->vhi - d->vlo) + d->vlo;
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
    } else if (d->kind == TFC_COLOR_DEGENERATE) {
        const float g = c == 3 ? tfc_color_luma(x) : 0;
        for (int k = 0; k < c; k++) {
            const float v = x[k] + r.a * ((c == 3 ? g : x[k]) - x[k]);
            y[k] = fminf(fmaxf(v, d->vlo), d->vhi);
        }
    } else if (d->kind == TFC_COLOR_SATURATE) {
        const tfc_hsv o = tfc_rgb_to_hsv(x);
        tfc_hsv_to_rgb(o.h, fminf(fmaxf(o.s * r.a, d->vlo), d->vhi), o.v, y);
    } else {
        float p[3];
        for (int k = 0; k < 3; k++) p[k] = tfc_color_hue_in(d, x[k]);
        const tfc_hsv o = tfc_rgb_to_hsv(p);
        float h = o.h + r.a;
        h = h > 1.0f ? h - 1.0f : h;
        h = h < 0.0f ? h + 1.0f : h;
        tfc_hsv_to_rgb(h, o.s, o.v, y);
        for (int k = 0; k < 3; k++) y[k] = tfc_color_hue_out(d, fminf(fmaxf(y[k], 0.0f), 1.0f));
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
    } else if (d->kind == TFC_COLOR_SATURATE) {
        /* through hsv_to_rgb, the saturation's clip and factor, and rgb_to_hsv */
        const tfc_hsv o = tfc_rgb_to_hsv(x);
        const float sa = o.s * r.a, s2 = fminf(fmaxf(sa, d->vlo), d->vhi);
        float g[3];
        tfc_hsv_to_rgb_grad(o.h, s2, o.v, dy, g);
        g[1] = sa >= d->vlo && sa <= d->vhi ? g[1] * r.a : 0.0f;
        tfc_rgb_to_hsv_grad(&o, g, dx);
    } else if (d->kind == TFC_COLOR_HUE) {
        /* through the output's clip and rescaling, hsv_to_rgb (the hue's shift and wrap have
         * slope 1), rgb_to_hsv and the input's rescaling */
        float p[3], y[3], gy[3], g[3], dp[3] = {0, 0, 0};
        for (int k = 0; k < 3; k++) p[k] = tfc_color_hue_in(d, x[k]);
        const tfc_hsv o = tfc_rgb_to_hsv(p);
        float h = o.h + r.a;
        h = h > 1.0f ? h - 1.0f : h;
        h = h < 0.0f ? h + 1.0f : h;
        tfc_hsv_to_rgb(h, o.s, o.v, y);
        const int scaled = !(d->vlo == 0 && d->vhi == 1);
        for (int k = 0; k < 3; k++)
            gy[k] = y[k] >= 0.0f && y[k] <= 1.0f ? (scaled ? dy[k] * (d->vhi - d->vlo) : dy[k])
                                                 : 0.0f;
        tfc_hsv_to_rgb_grad(h, o.s, o.v, gy, g);
        tfc_rgb_to_hsv_grad(&o, g, dp);
        for (int k = 0; k < 3; k++) dx[k] += scaled ? dp[k] / (d->vhi - d->vlo) : dp[k];
    }
}

#endif
