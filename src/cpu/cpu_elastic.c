/* CPU RandomElasticTransform (tfc_elastic_desc), NHWC: one image at a time on a thread, its
 * field (core/elastic.h) blurred by rows then by columns in tfc_elastic_field_at's order of
 * operations, then read as warp_forward reads; the transpose scatters into that image's dx
 * in pixel order, so no result depends on the thread count. */
#include <stdlib.h>

#include "core/elastic.h"
#include "cpu/cpu_internal.h"

/* Image i's field f[h w] (tfc_elastic_field_at's values), row the rows' pass, kn[k] */
static void field_of(const tfc_elastic_desc *d, int64_t i, float *f, float *row, float *kn)
{
    const int64_t hw = (int64_t)d->h * d->w;
    if (!(d->sigma > 0.0f)) {
        for (int64_t p = 0; p < hw; p++) f[p] = 0.0f;
        return;
    }
    const float norm = tfc_elastic_tap_sum(d);
    const int r = (d->k - 1) / 2;
    for (int j = 0; j < d->k; j++) kn[j] = tfc_elastic_tap(d, j) / norm;
    for (int y = 0; y < d->h; y++)
        for (int x = 0; x < d->w; x++) {
            float s = 0.0f;
            for (int b = 0; b < d->k; b++) {
                const int xs = x + b - r;
                if (xs < 0 || xs >= d->w) continue;
                s += kn[b] * (d->sigma * tfc_elastic_normal(d, i, (int64_t)y * d->w + xs));
            }
            row[(int64_t)y * d->w + x] = s;
        }
    for (int y = 0; y < d->h; y++)
        for (int x = 0; x < d->w; x++) {
            float s = 0.0f;
            for (int a = 0; a < d->k; a++) {
                const int ys = y + a - r;
                if (ys < 0 || ys >= d->h) continue;
                s += kn[a] * row[(int64_t)ys * d->w + x];
            }
            f[(int64_t)y * d->w + x] = s;
        }
}

/* Image i's values before the clip at pixel p into v[c]: the warp's (taps summed in order, as
 * map_coordinates) where it moves (f its field), else x's */
static void value_at(const tfc_elastic_desc *d, const float *xi, const float *f, int64_t p,
                     float *v)
{
    const int64_t c = d->c;
    if (!f) {
        for (int64_t k = 0; k < c; k++) v[k] = xi[p * c + k];
        return;
    }
    const tfc_warp_taps t = tfc_elastic_taps(d, f[p], (int)(p / d->w), (int)(p % d->w));
    for (int64_t k = 0; k < c; k++) v[k] = 0.0f;
    for (int j = 0; j < t.n; j++)
        for (int64_t k = 0; k < c; k++)
            v[k] += t.wt[j] * (t.off[j] < 0 ? d->fill_value : xi[t.off[j] * c + k]);
}

/* per image: its field, the rows' pass, the kernel and one pixel's values */
static float *scratch(const tfc_elastic_desc *d)
{
    const size_t hw = (size_t)d->h * (size_t)d->w;
    float *s = malloc(sizeof(float) * (2 * hw + (size_t)d->k + (size_t)d->c));
    TFC_ASSERT(s != NULL);
    return s;
}

void tfc_cpu_elastic_forward(tfc_backend *be, const tfc_elastic_desc *d, const float *x,
                             float *y)
{
    const int64_t hw = (int64_t)d->h * d->w, c = d->c;
    int nt = tfc_cpu_threads(be, d->n * hw * c);
#pragma omp parallel num_threads(tfc_cpu_team(nt))
    {
        float *s = scratch(d), *kn = s + 2 * hw, *v = kn + d->k;
#pragma omp for schedule(static, tfc_cpu_share(d->n, nt))
        for (int64_t i = 0; i < d->n; i++) {
            const int moved = tfc_elastic_moved(d, i);
            if (moved) field_of(d, i, s, s + hw, kn);
            const float *xi = x + i * hw * c;
            float *yi = y + i * hw * c;
            for (int64_t p = 0; p < hw; p++) {
                value_at(d, xi, moved ? s : NULL, p, v);
                for (int64_t k = 0; k < c; k++) yi[p * c + k] = tfc_elastic_clip(d, v[k]);
            }
        }
        free(s);
    }
}

void tfc_cpu_elastic_backward(tfc_backend *be, const tfc_elastic_desc *d, const float *x,
                              const float *dy, float *dx)
{
    const int64_t hw = (int64_t)d->h * d->w, c = d->c;
    int nt = tfc_cpu_threads(be, d->n * hw * c);
#pragma omp parallel num_threads(tfc_cpu_team(nt))
    {
        float *s = scratch(d), *kn = s + 2 * hw, *v = kn + d->k;
#pragma omp for schedule(static, tfc_cpu_share(d->n, nt))
        for (int64_t i = 0; i < d->n; i++) {
            const int moved = tfc_elastic_moved(d, i);
            if (moved) field_of(d, i, s, s + hw, kn);
            const float *xi = x + i * hw * c, *gi = dy + i * hw * c;
            float *di = dx + i * hw * c;
            for (int64_t p = 0; p < hw; p++) {
                value_at(d, xi, moved ? s : NULL, p, v);
                if (!moved) {
                    for (int64_t k = 0; k < c; k++)
                        if (tfc_elastic_passes(d, v[k])) di[p * c + k] += gi[p * c + k];
                    continue;
                }
                const tfc_warp_taps t = tfc_elastic_taps(d, s[p], (int)(p / d->w),
                                                         (int)(p % d->w));
                for (int j = 0; j < t.n; j++) {
                    if (t.off[j] < 0) continue;
                    for (int64_t k = 0; k < c; k++)
                        if (tfc_elastic_passes(d, v[k]))
                            di[t.off[j] * c + k] += t.wt[j] * gi[p * c + k];
                }
            }
        }
        free(s);
    }
}
