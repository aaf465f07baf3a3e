/* The cells a crop-and-resize output reads (tfc_crop_resize_desc, core/backend.h) and their
 * weights: header-only, as core/augment.h, so every backend (and a CUDA kernel) reads the
 * same ones. The arithmetic is jax.image.resize's (jax/_src/image/scale.py, which Keras 3's
 * JAX backend calls) in float32 and in its order of operations. */
#ifndef TFC_CORE_CROP_RESIZE_H
#define TFC_CORE_CROP_RESIZE_H

#include <math.h>
#include <stdint.h>

#include "core/backend.h"
#include "core/rng.h"

/* The view's origin: the desc's top and left, or RandomCrop's draw (a window of the input
 * at row floor(u0 (h - vh + 1)), column floor(u1 (w - vw + 1)), as Keras's
 * cast(uniform(0, h - height + 1), int32), clamped against a draw rounding up to the bound). */
TFC_HD void tfc_crop_resize_origin(const tfc_crop_resize_desc *d, int *top, int *left)
{
    *top = d->top, *left = d->left;
    if (!d->random) return;
    int r = (int)(tfc_rng_uniform(d->key, d->step, 0) * (float)(d->h - d->vh + 1));
    int q = (int)(tfc_rng_uniform(d->key, d->step, 1) * (float)(d->w - d->vw + 1));
    *top = -(r < d->h - d->vh ? r : d->h - d->vh);
    *left = -(q < d->w - d->vw ? q : d->w - d->vw);
}

/* The one or two view cells output o reads along an axis of m view cells resampled to n, and
 * their weights (i1 = i0, w1 = 0 for one cell). Equal sizes: cell o (jax skips the axis).
 * nearest: floor(((o + 1/2) m) / n). bilinear: s = (o + 1/2) (1 / (n / m)) - 1/2 with the
 * scale in double and its inverse rounded to float, as jax; the cells floor(s) and
 * floor(s) + 1 weigh 1 - |s - i| where they lie in the view, normalised by their sum (so at
 * the edges the one cell inside weighs 1). */
typedef struct tfc_resize_taps {
    int i0, i1;
    float w0, w1;
} tfc_resize_taps;

TFC_HD tfc_resize_taps tfc_resize_taps_at(int o, int m, int n, int nearest)
{
    tfc_resize_taps t = {o, o, 1.0f, 0.0f};
    if (m == n) return t;
    if (nearest) {
        const int i = (int)floorf(((float)o + 0.5f) * (float)m / (float)n);
        t.i0 = t.i1 = i < m - 1 ? i : m - 1;
        return t;
    }
    const float inv = (float)(1.0 / ((double)n / (double)m));
    const float s = ((float)o + 0.5f) * inv - 0.5f;
    const int i0 = (int)floorf(s);
    const float w0 = i0 >= 0 ? 1.0f - (s - (float)i0) : 0.0f;
    const float w1 = i0 + 1 < m ? 1.0f - ((float)(i0 + 1) - s) : 0.0f;
    const float sum = w0 + w1;
    t.i0 = i0 >= 0 ? i0 : i0 + 1;
    t.i1 = i0 + 1 < m ? i0 + 1 : t.i0;
    t.w0 = i0 >= 0 ? w0 / sum : w1 / sum;
    t.w1 = i0 >= 0 && i0 + 1 < m ? w1 / sum : 0.0f;
    return t;
}

/* The weight output o gives view cell v (0: none). */
TFC_HD float tfc_resize_weight(tfc_resize_taps t, int v)
{
    return (t.i0 == v ? t.w0 : 0.0f) + (t.i1 == v ? t.w1 : 0.0f);
}

/* Outputs [*lo, *hi) hold every one that reads view cell v (a few more at each end): those
 * with (o + 1/2) m / n within v - 1/2 .. v + 3/2. */
TFC_HD void tfc_resize_window(int v, int m, int n, int *lo, int *hi)
{
    const int64_t a = (int64_t)(v - 1) * n / m - 2, b = (int64_t)(v + 2) * n / m + 2;
    *lo = a > 0 ? (int)a : 0;
    *hi = b < n ? (int)b : n;
}

#endif
