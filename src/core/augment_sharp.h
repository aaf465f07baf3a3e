/* RandomSharpness's per-image factor and per-value blend (layers/augment_sharpness.c), from
 * its desc (core/backend.h): header-only, as core/augment.h, so every backend (and a CUDA
 * kernel) computes the same ones. Keras 3's random_sharpness.py in float32 and in its order
 * of operations: the smoothing a depthwise 3 x 3 convolution (weights 1/13, centre 5/13,
 * zero padding SAME), then x + (1 - 2 f) (s - x), clipped. */
#ifndef TFC_CORE_AUGMENT_SHARP_H
#define TFC_CORE_AUGMENT_SHARP_H

#include "core/augment.h"

/* Image i's blend weight c = 1 - 2 f, f = lo + u0 (hi - lo) (Keras's factor * 2 in float32). */
TFC_HD float tfc_sharpen_blend(const tfc_sharpen_desc *d, int64_t i)
{
    return 1.0f - tfc_augment_draw(d->key, d->step, i, 0, d->lo, d->hi) * 2.0f;
}

/* The smoothing kernel's weight at offset (a, b) in {-1, 0, 1}^2. */
TFC_HD float tfc_sharpen_weight(int a, int b)
{
    return a == 0 && b == 0 ? 5.0f / 13.0f : 1.0f / 13.0f;
}

/* The blend before the clip at (oy, ox, ch) of image xi (h, w, c): x + c (s - x), s summed
 * over the window in row order, zero outside the image. */
TFC_HD float tfc_sharpen_at(const tfc_sharpen_desc *d, const float *xi, float c, int oy, int ox,
                            int ch)
{
    float s = 0;
    for (int a = -1; a <= 1; a++) {
        const int iy = oy + a;
        if (iy < 0 || iy >= d->h) continue;
        for (int b = -1; b <= 1; b++) {
            const int ix = ox + b;
            if (ix < 0 || ix >= d->w) continue;
            s += tfc_sharpen_weight(a, b) * xi[((int64_t)iy * d->w + ix) * d->c + ch];
        }
    }
    const float x = xi[((int64_t)oy * d->w + ox) * d->c + ch];
    return x + c * (s - x);
}

/* The gradient at input (iy, ix, ch) of image xi given the outputs' gradient gi: each output
 * o whose clip passes (vlo <= blend <= vhi) sends g[o] ((1 - c) [o is the input] + c k),
 * k the kernel's weight between them (the kernel is symmetric); gathered in the window's
 * row order, the output at the input itself last. */
TFC_HD float tfc_sharpen_grad_at(const tfc_sharpen_desc *d, const float *xi, const float *gi,
                                 float c, int iy, int ix, int ch)
{
    float acc = 0, self = 0;
    for (int a = -1; a <= 1; a++) {
        const int oy = iy + a;
        if (oy < 0 || oy >= d->h) continue;
        for (int b = -1; b <= 1; b++) {
            const int ox = ix + b;
            if (ox < 0 || ox >= d->w) continue;
            const float z = tfc_sharpen_at(d, xi, c, oy, ox, ch);
            if (z < d->vlo || z > d->vhi) continue;
            const float g = gi[((int64_t)oy * d->w + ox) * d->c + ch];
            acc += c * tfc_sharpen_weight(a, b) * g;
            if (a == 0 && b == 0) self = (1.0f - c) * g;
        }
    }
    return acc + self;
}

#endif
