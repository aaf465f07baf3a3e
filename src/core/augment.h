/* The per-image transforms of the augmentation layers, from their descs (core/backend.h),
 * and the cells a warped pixel reads: header-only, as core/rng.h, so every backend (and a
 * CUDA kernel) draws and reads the same ones.
 * The matrices follow Keras 3's layers (random_translation.py, random_rotation.py,
 * random_zoom.py, random_flip.py, random_shear.py) in float32 and in their order of
 * operations. */
#ifndef TFC_CORE_AUGMENT_H
#define TFC_CORE_AUGMENT_H

#include "core/backend.h"
#include "core/rng.h"

/* Draw k (< 4) of image i in [lo, hi]: lo + u (hi - lo), as jax.random.uniform. */
TFC_HD float tfc_augment_draw(uint64_t key, uint64_t step, int64_t i, int k, float lo,
                              float hi)
{
    return tfc_rng_uniform(key, step, 4 * (uint64_t)i + (uint64_t)k) * (hi - lo) + lo;
}

/* RandomPerspective's draw k (< 10) of image i, uniform in [0, 1): 0 the probability's,
 * 1 the threshold, 2 + 2 j + a the factor of corner j's axis a (x 0, y 1). */
TFC_HD float tfc_perspective_draw(const tfc_warp_desc *d, int64_t i, int k)
{
    return tfc_rng_uniform(d->key, d->step, 16 * (uint64_t)i + (uint64_t)k);
}

/* RandomPerspective's matrix of image i (Keras's random_perspective.py and JAX's
 * perspective_transform): when u1 < p (p = lo[0] + u0 (hi[0] - lo[0])), the corners
 * s_j = (0, 0), (w - 1, 0), (0, h - 1), (w - 1, h - 1) move to e_j = s_j + s_j f_j (f_j's two
 * factors lo[1] + u (hi[1] - lo[1]), in float32), and m is the homography taking e_j to s_j:
 * the 8 x 8 system of compute_homography_matrix, solved in double (partial pivoting) and
 * rounded once. Otherwise, or when the system is singular (an image 1 pixel wide or high,
 * where Keras's solve gives NaN), m is the identity. */
TFC_HD void tfc_perspective_matrix(const tfc_warp_desc *d, int64_t i, float m[8])
{
    const float p = d->lo[0] + tfc_perspective_draw(d, i, 0) * (d->hi[0] - d->lo[0]);
    if (!(tfc_perspective_draw(d, i, 1) < p)) return;
    const float sx[4] = {0, (float)(d->w - 1), 0, (float)(d->w - 1)};
    const float sy[4] = {0, 0, (float)(d->h - 1), (float)(d->h - 1)};
    double a[8][9];
    for (int j = 0; j < 4; j++) {
        const float fx = d->lo[1] + tfc_perspective_draw(d, i, 2 + 2 * j) * (d->hi[1] - d->lo[1]);
        const float fy = d->lo[1] + tfc_perspective_draw(d, i, 3 + 2 * j) * (d->hi[1] - d->lo[1]);
        const double ex = sx[j] + sx[j] * fx, ey = sy[j] + sy[j] * fy;
        const double rx[9] = {ex, ey, 1, 0, 0, 0, -sx[j] * ex, -sx[j] * ey, sx[j]};
        const double ry[9] = {0, 0, 0, ex, ey, 1, -sy[j] * ex, -sy[j] * ey, sy[j]};
        for (int k = 0; k < 9; k++) a[j][k] = rx[k], a[4 + j][k] = ry[k];
    }
    for (int c = 0; c < 8; c++) {
        int piv = c;
        for (int r = c + 1; r < 8; r++)
            if (fabs(a[r][c]) > fabs(a[piv][c])) piv = r;
        if (fabs(a[piv][c]) < 1e-9) return;
        for (int k = 0; k < 9; k++) {
            const double t = a[c][k];
            a[c][k] = a[piv][k], a[piv][k] = t;
        }
        for (int r = 0; r < 8; r++) {
            if (r == c) continue;
            const double f = a[r][c] / a[c][c];
            for (int k = c; k < 9; k++) a[r][k] -= f * a[c][k];
        }
    }
    for (int k = 0; k < 8; k++) m[k] = (float)(a[k][8] / a[k][k]);
}

/* Image i's matrix m = (a0, a1, a2, b0, b1, b2), output pixel to input coordinates:
 *   flip:      sx = w - 1 - ox (flip_cols), sy = h - 1 - oy (flip_rows), when u0 <= 1/2
 *   translate: sx = ox - tx, sy = oy - ty,  tx = draw1 w, ty = draw0 h
 *   rotate:    a rotation by t = draw0 degrees about c = ((w - 1) / 2, (h - 1) / 2):
 *              (a0 a1; b0 b1) = (cos t, -sin t; sin t, cos t), (a2, b2) = c - (a b) c
 *   zoom:      sx = zx ox + (w - 1) / 2 (1 - zx), sy = zy oy + (h - 1) / 2 (1 - zy),
 *              zy = draw0, zx = draw1 (or zy with same_zoom)
 *   shear:     sx = ox + kx oy, sy = ky ox + oy (about pixel (0, 0), as Keras),
 *              kx = s draw1, ky = s draw2, s = -1 when u0 > 1/2 else 1
 *   perspective: the homography (m6, m7 its denominator's) tfc_perspective_matrix makes
 * m6 = m7 = 0 but for perspective. */
TFC_HD void tfc_warp_matrix(const tfc_warp_desc *d, int64_t i, float m[8])
{
    const float w = (float)d->w, h = (float)d->h;
    m[0] = 1, m[1] = 0, m[2] = 0, m[3] = 0, m[4] = 1, m[5] = 0, m[6] = 0, m[7] = 0;
    if (d->kind == TFC_WARP_PERSPECTIVE) {
        tfc_perspective_matrix(d, i, m);
        return;
    }
    if (d->kind == TFC_WARP_FLIP) {
        if (tfc_rng_uniform(d->key, d->step, 4 * (uint64_t)i) > 0.5f) return;
        if (d->flip_cols) m[0] = -1, m[2] = w - 1;
        if (d->flip_rows) m[4] = -1, m[5] = h - 1;
    } else if (d->kind == TFC_WARP_TRANSLATE) {
        m[5] = -(tfc_augment_draw(d->key, d->step, i, 0, d->lo[0], d->hi[0]) * h);
        m[2] = -(tfc_augment_draw(d->key, d->step, i, 1, d->lo[1], d->hi[1]) * w);
    } else if (d->kind == TFC_WARP_ROTATE) {
        const float t = tfc_augment_draw(d->key, d->step, i, 0, d->lo[0], d->hi[0]) *
                        (float)(3.14159265358979323846 / 180.0);
        const float cx = 0.5f * (w - 1), cy = 0.5f * (h - 1);
        /* in double, rounded once: the same float from glibc and from CUDA */
        const float c = (float)cos((double)t), s = (float)sin((double)t);
        m[0] = c, m[1] = -s, m[3] = s, m[4] = c;
        m[2] = cx - cx * m[0] - cy * m[1];
        m[5] = cy - cx * m[3] - cy * m[4];
    } else if (d->kind == TFC_WARP_SHEAR) {
        const float s = tfc_rng_uniform(d->key, d->step, 4 * (uint64_t)i) > 0.5f ? -1.0f : 1.0f;
        m[1] = tfc_augment_draw(d->key, d->step, i, 1, d->lo[1], d->hi[1]) * s;
        m[3] = tfc_augment_draw(d->key, d->step, i, 2, d->lo[0], d->hi[0]) * s;
    } else {
        const float zy = tfc_augment_draw(d->key, d->step, i, 0, d->lo[0], d->hi[0]);
        const float zx = d->same_zoom ? zy
                                      : tfc_augment_draw(d->key, d->step, i, 1, d->lo[1],
                                                         d->hi[1]);
        m[0] = zx, m[2] = (w - 1) / 2 * (1 - zx);
        m[4] = zy, m[5] = (h - 1) / 2 * (1 - zy);
    }
}

/* Image i's contrast factor. */
TFC_HD float tfc_contrast_factor(const tfc_contrast_desc *d, int64_t i)
{
    return tfc_augment_draw(d->key, d->step, i, 0, d->lo, d->hi);
}

/* Image i's brightness delta (RandomBrightness: Keras's uniform(lower, upper) times the
 * value range's width, in float32). */
TFC_HD float tfc_brightness_delta(const tfc_contrast_desc *d, int64_t i)
{
    return tfc_augment_draw(d->key, d->step, i, 0, d->lo, d->hi) * (d->vhi - d->vlo);
}

/* Cell i of an axis of n placed by the fill mode (jax.scipy.ndimage's index fixers);
 * -1: outside the image in constant mode. In int: a coordinate is within a few image sizes
 * of the image, and a 32-bit division is far cheaper on a GPU. */
TFC_HD int tfc_warp_place(int i, int n, tfc_fill_mode fill)
{
    if (i >= 0 && i < n) return i;
    if (fill == TFC_FILL_REFLECT) {
        const int m = (i % (2 * n) + 2 * n) % (2 * n);
        return m < n ? m : 2 * n - 1 - m;
    }
    if (fill == TFC_FILL_WRAP) return (i % n + n) % n;
    if (fill == TFC_FILL_NEAREST) return i < 0 ? 0 : n - 1;
    if (fill == TFC_FILL_MIRROR) { /* |(i + s) mod 2 s - s|, s = n - 1 (one cell: itself) */
        const int s = n - 1;
        if (s == 0) return 0;
        const int m = ((i + s) % (2 * s) + 2 * s) % (2 * s) - s;
        return m < 0 ? -m : m;
    }
    return -1;
}

/* The cells an output pixel reads and their weights: one (nearest) or four (bilinear, in
 * the order (y0, x0), (y0, x1), (y1, x0), (y1, x1)); off[k] < 0 reads fill_value. */
typedef struct tfc_warp_taps {
    int n;
    int64_t off[4]; /* pixel index within the image */
    float wt[4];
} tfc_warp_taps;

/* The taps of the source point (sy, sx) in an h x w image: the nearest cell, or the four
 * around it with bilinear weights, each placed by the fill mode. */
TFC_HD tfc_warp_taps tfc_warp_taps_of(float sy, float sx, int h, int w, tfc_fill_mode fill,
                                      int bilinear)
{
    tfc_warp_taps t;
    if (!bilinear) {
        const int iy = tfc_warp_place((int)roundf(sy), h, fill);
        const int ix = tfc_warp_place((int)roundf(sx), w, fill);
        t.n = 1;
        t.off[0] = iy < 0 || ix < 0 ? -1 : (int64_t)iy * w + ix;
        t.wt[0] = 1;
        return t;
    }
    const float fy0 = floorf(sy), fx0 = floorf(sx);
    const float wy[2] = {1 - (sy - fy0), sy - fy0}, wx[2] = {1 - (sx - fx0), sx - fx0};
    t.n = 4;
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            const int iy = tfc_warp_place((int)fy0 + a, h, fill);
            const int ix = tfc_warp_place((int)fx0 + b, w, fill);
            t.off[2 * a + b] = iy < 0 || ix < 0 ? -1 : (int64_t)iy * w + ix;
            t.wt[2 * a + b] = wy[a] * wx[b];
        }
    return t;
}

/* The taps of output pixel (oy, ox) under matrix m. A perspective's point (always read in
 * constant mode) is held within [-2, n + 1] of each axis, where every tap past the image
 * reads fill_value as before, so a point near its vanishing line (or NaN) keeps to ints. */
TFC_HD tfc_warp_taps tfc_warp_taps_at(const tfc_warp_desc *d, const float m[8], int oy, int ox)
{
    float sx = (float)oy * m[1] + (float)ox * m[0] + m[2];
    float sy = (float)oy * m[4] + (float)ox * m[3] + m[5];
    if (m[6] != 0 || m[7] != 0) {
        const float q = (float)ox * m[6] + (float)oy * m[7] + 1.0f;
        sx = fminf(fmaxf(sx / q, -2.0f), (float)d->w + 1);
        sy = fminf(fmaxf(sy / q, -2.0f), (float)d->h + 1);
    }
    return tfc_warp_taps_of(sy, sx, d->h, d->w, (tfc_fill_mode)d->fill, d->bilinear);
}

#endif
