/* CPU AutoContrast, Equalization and CLAHE (tfc_tone_desc), NHWC: AutoContrast and CLAHE one
 * (image, channel) at a time on a thread, Equalization one channel (over the batch) at a
 * time; the per-value maps from core/tone.h, so no result depends on the thread count. */
#include <math.h>
#include <stdlib.h>

#include "core/tone.h"
#include "cpu/cpu_internal.h"

/* the extremes of values x[0], x[c], ... (hw of them) in [0, 255]; NaN when one is NaN
 * (jnp.min propagates it) */
static void extremes(const tfc_tone_desc *d, const float *x, float *lo, float *hi)
{
    float l = INFINITY, h = -INFINITY;
    for (int64_t p = 0; p < d->hw; p++) {
        const float z = tfc_tone_range(d, x[p * d->c], 0);
        if (z != z) l = h = NAN;
        if (l != l) break;
        l = z < l ? z : l, h = z > h ? z : h;
    }
    *lo = l, *hi = h;
}

/* Equalization of channel ch over the batch: the histogram of its values in [0, 255], the
 * lookup table; y (or, with dy, dx's gradient) for every value */
static void equalize_channel(const tfc_tone_desc *d, int ch, const float *x, const float *dy,
                             float *out)
{
    int hist[TFC_TONE_MAX_BINS];
    float lut[TFC_TONE_MAX_BINS];
    const float s1 = tfc_equalize_scale(d, 1), o1 = tfc_equalize_offset(d, 1);
    const float s2 = tfc_equalize_scale(d, 0), o2 = tfc_equalize_offset(d, 0);
    const int64_t count = (int64_t)d->n * d->hw;
    for (int k = 0; k < d->bins; k++) hist[k] = 0;
    for (int64_t p = 0; p < count; p++)
        hist[tfc_equalize_bin(d->bins, x[p * d->c + ch] * s1 + o1, 0)]++;
    const int kept = tfc_equalize_lut(d->bins, hist, lut) <= 1;
    for (int64_t p = 0; p < count; p++) {
        const int64_t at = p * d->c + ch;
        const float z = x[at] * s1 + o1;
        if (dy) {
            if (kept) out[at] += dy[at] * s2 * s1;
        } else {
            out[at] = (kept ? z : lut[tfc_equalize_bin(d->bins, z, 1)]) * s2 + o2;
        }
    }
}

static void clahe_forward(tfc_backend *be, const tfc_tone_desc *d, const float *x, float *y)
{
    const int64_t hwc = (int64_t)d->hw * d->c, planes = (int64_t)d->n * d->c;
    const size_t table_bytes = sizeof(float) * 256 * (size_t)d->grid_h * (size_t)d->grid_w;
    int nt = tfc_cpu_threads(be, d->n * hwc);
#pragma omp parallel num_threads(tfc_cpu_team(nt))
    {
        float *tables = malloc(table_bytes);
#pragma omp for schedule(static, tfc_cpu_share(planes, nt))
        for (int64_t q = 0; q < planes; q++) {
            const int64_t base = (q / d->c) * hwc + q % d->c;
            if (tables) tfc_clahe_plane(d, x + base, y + base, tables);
        }
        free(tables);
    }
}

void tfc_cpu_tone_forward(tfc_backend *be, const tfc_tone_desc *d, const float *x, float *y)
{
    const int64_t hwc = (int64_t)d->hw * d->c;
    if (d->kind == TFC_TONE_CLAHE) {
        clahe_forward(be, d, x, y);
        return;
    }
    if (d->kind == TFC_TONE_EQUALIZE) {
        int nt = tfc_cpu_threads(be, d->n * hwc);
#pragma omp parallel for TFC_CPU_STATIC(d->c, nt)
        for (int ch = 0; ch < d->c; ch++) equalize_channel(d, ch, x, NULL, y);
        return;
    }
    const int64_t planes = (int64_t)d->n * d->c;
    int nt = tfc_cpu_threads(be, d->n * hwc);
#pragma omp parallel for TFC_CPU_STATIC(planes, nt)
    for (int64_t q = 0; q < planes; q++) {
        const int64_t base = (q / d->c) * hwc + q % d->c;
        float lo, hi;
        extremes(d, x + base, &lo, &hi);
        for (int64_t p = 0; p < d->hw; p++)
            y[base + p * d->c] = tfc_autocontrast_value(d, x[base + p * d->c], lo, hi);
    }
}

/* AutoContrast's gradient of one (image, channel): with z the values in [0, 255],
 * t = (z - lo) / (hi - lo), s = 255 / (hi - lo), g = dy in [0, 255]'s units:
 *   dz_j = s (g_j + [z_j = lo] A / n_lo - [z_j = hi] B / n_hi),
 *   A = sum_i g_i (t_i - 1), B = sum_i g_i t_i
 * (n_lo, n_hi the ties, which share the extreme as JAX's min and max do). A constant or NaN
 * channel passes dy (y = x there; JAX's own gradient is NaN, 0 times 255 / 0). */
static void autocontrast_grad(const tfc_tone_desc *d, const float *x, const float *dy,
                              float *dx)
{
    float lo, hi;
    extremes(d, x, &lo, &hi);
    const int64_t c = d->c;
    if (!(hi > lo)) {
        for (int64_t p = 0; p < d->hw; p++) dx[p * c] += dy[p * c];
        return;
    }
    const float a = tfc_tone_range(d, 1.0f, 0) - tfc_tone_range(d, 0.0f, 0); /* d z / d x */
    const float b = tfc_tone_range(d, 1.0f, 1) - tfc_tone_range(d, 0.0f, 1); /* d y / d r */
    const float s = 255.0f / (hi - lo);
    double A = 0, B = 0;
    int64_t nlo = 0, nhi = 0;
    for (int64_t p = 0; p < d->hw; p++) {
        const float z = tfc_tone_range(d, x[p * c], 0), t = (z - lo) / (hi - lo);
        const double g = (double)dy[p * c] * b;
        A += g * (t - 1.0f), B += g * t;
        nlo += z == lo, nhi += z == hi;
    }
    for (int64_t p = 0; p < d->hw; p++) {
        const float z = tfc_tone_range(d, x[p * c], 0);
        double g = (double)dy[p * c] * b;
        if (z == lo) g += A / (double)nlo;
        if (z == hi) g -= B / (double)nhi;
        dx[p * c] += (float)(g * s * a);
    }
}

void tfc_cpu_tone_backward(tfc_backend *be, const tfc_tone_desc *d, const float *x,
                           const float *dy, float *dx)
{
    const int64_t hwc = (int64_t)d->hw * d->c;
    if (d->kind == TFC_TONE_CLAHE) return; /* the int32 bins carry no gradient */
    if (d->kind == TFC_TONE_EQUALIZE) {
        int nt = tfc_cpu_threads(be, d->n * hwc);
#pragma omp parallel for TFC_CPU_STATIC(d->c, nt)
        for (int ch = 0; ch < d->c; ch++) equalize_channel(d, ch, x, dy, dx);
        return;
    }
    const int64_t planes = (int64_t)d->n * d->c;
    int nt = tfc_cpu_threads(be, d->n * hwc);
#pragma omp parallel for TFC_CPU_STATIC(planes, nt)
    for (int64_t q = 0; q < planes; q++) {
        const int64_t base = (q / d->c) * hwc + q % d->c;
        autocontrast_grad(d, x + base, dy + base, dx + base);
    }
}
