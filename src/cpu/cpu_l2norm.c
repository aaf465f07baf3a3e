/* CPU L2 normalisation (UnitNormalization; tfc_l2norm_desc in core/backend.h). The unit of
 * work is one outer index and a block of up to BLOCK inner positions: its red values lie in
 * red runs of the block's floats, inner apart, read as rows with per-position sums in double
 * (inner 1: one row of red floats). Units are independent and every sum is taken in one
 * order, so the results never depend on the threads. Backward recomputes the scale from x,
 * the same bits as forward, and sums dy x in the same pass. */
#include <math.h>

#include "cpu/cpu_internal.h"

enum { BLOCK = 256 }; /* inner positions of a unit at most */

/* The scale of a sum of squares: min(rsqrt(s), inv_max) in float (NaN stays NaN); *clamped
 * tells which side of the min won. */
static float scale_of(double s, float inv_max, int *clamped)
{
    const float r = (float)(1.0 / sqrt(s));
    *clamped = r >= inv_max;
    return *clamped ? inv_max : r;
}

static int64_t units_of(const tfc_l2norm_desc *d)
{
    return d->outer * ((d->inner + BLOCK - 1) / BLOCK);
}

/* Unit u's first float and its block width. */
static int64_t unit_at(const tfc_l2norm_desc *d, int64_t u, int *w)
{
    const int64_t per = (d->inner + BLOCK - 1) / BLOCK, o = u / per, i0 = u % per * BLOCK;
    *w = (int)(d->inner - i0 < BLOCK ? d->inner - i0 : BLOCK);
    return o * d->red * d->inner + i0;
}

TFC_CPU_VECTOR
static void unit_forward(const tfc_l2norm_desc *d, const float *x, float *y, int64_t u)
{
    int w;
    const int64_t at = unit_at(d, u, &w), inner = d->inner;
    double s[BLOCK];
    float r[BLOCK];
    int clamped;
    for (int i = 0; i < w; i++) s[i] = 0.0;
    for (int64_t k = 0; k < d->red; k++) {
        const float *xr = x + at + k * inner;
#pragma omp simd
        for (int i = 0; i < w; i++) s[i] += (double)xr[i] * xr[i];
    }
    for (int i = 0; i < w; i++) r[i] = scale_of(s[i], d->inv_max, &clamped);
    for (int64_t k = 0; k < d->red; k++) {
        const float *xr = x + at + k * inner;
        float *yr = y + at + k * inner;
#pragma omp simd
        for (int i = 0; i < w; i++) yr[i] = xr[i] * r[i];
    }
}

void tfc_cpu_l2norm_forward(tfc_backend *be, const tfc_l2norm_desc *d, const float *x,
                            float *y)
{
    const int64_t units = units_of(d);
    const int nt = tfc_cpu_threads(be, d->outer * d->red * d->inner);
    TFC_CPU_FOR(units, nt, for (int64_t u = 0; u < units; u++) { unit_forward(d, x, y, u); });
}

/* Per unit: s = sum x^2 and g = sum dy x in one pass, then
 *   dx = r (dy - x k) with k = r^2 g   (rsqrt won the min)   or   dx = inv_max dy (clamped) */
TFC_CPU_VECTOR
static void unit_backward(const tfc_l2norm_desc *d, const float *x, const float *dy, float *dx,
                          int assign, int64_t u)
{
    int w;
    const int64_t at = unit_at(d, u, &w), inner = d->inner;
    double s[BLOCK], g[BLOCK];
    float r[BLOCK], k[BLOCK];
    for (int i = 0; i < w; i++) s[i] = g[i] = 0.0;
    for (int64_t j = 0; j < d->red; j++) {
        const float *xr = x + at + j * inner, *gr = dy + at + j * inner;
#pragma omp simd
        for (int i = 0; i < w; i++) {
            s[i] += (double)xr[i] * xr[i];
            g[i] += (double)gr[i] * xr[i];
        }
    }
    for (int i = 0; i < w; i++) {
        int clamped;
        r[i] = scale_of(s[i], d->inv_max, &clamped);
        k[i] = clamped ? 0.0f : (float)((double)r[i] * r[i] * g[i]);
    }
    for (int64_t j = 0; j < d->red; j++) {
        const float *xr = x + at + j * inner, *gr = dy + at + j * inner;
        float *dr = dx + at + j * inner;
        if (assign) {
#pragma omp simd
            for (int i = 0; i < w; i++) dr[i] = r[i] * (gr[i] - xr[i] * k[i]);
        } else {
#pragma omp simd
            for (int i = 0; i < w; i++) dr[i] += r[i] * (gr[i] - xr[i] * k[i]);
        }
    }
}

void tfc_cpu_l2norm_backward(tfc_backend *be, const tfc_l2norm_desc *d, const float *x,
                             const float *dy, float *dx, int assign)
{
    const int64_t units = units_of(d);
    const int nt = tfc_cpu_threads(be, d->outer * d->red * d->inner);
    TFC_CPU_FOR(units, nt, for (int64_t u = 0; u < units; u++) {
        unit_backward(d, x, dy, dx, assign, u);
    });
}
