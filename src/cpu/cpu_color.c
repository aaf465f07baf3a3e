/* CPU colour augmentations (RandomGrayscale, RandomInvert, Solarization, RandomPosterization,
 * RandomColorDegeneration, RandomSaturation, RandomHue), NHWC: each image's draw and each
 * pixel's map from core/color.h, one image at a time on a thread, so no result depends on
 * the thread count. */
#include "core/color.h"
#include "cpu/cpu_internal.h"

void tfc_cpu_color_forward(tfc_backend *be, const tfc_color_desc *d, const float *x, float *y)
{
    const int64_t per = (int64_t)d->hw * d->c;
    int nt = tfc_cpu_threads(be, d->n * per);
#pragma omp parallel for TFC_CPU_STATIC(d->n, nt)
    for (int64_t i = 0; i < d->n; i++) {
        const tfc_color_draw r = tfc_color_draw_at(d, i);
        for (int64_t p = i * per; p < (i + 1) * per; p += d->c)
            tfc_color_pixel(d, r, x + p, y + p);
    }
}

void tfc_cpu_color_backward(tfc_backend *be, const tfc_color_desc *d, const float *x,
                            const float *dy, float *dx)
{
    if (d->kind == TFC_COLOR_POSTERIZE) return;
    const int64_t per = (int64_t)d->hw * d->c;
    int nt = tfc_cpu_threads(be, d->n * per);
#pragma omp parallel for TFC_CPU_STATIC(d->n, nt)
    for (int64_t i = 0; i < d->n; i++) {
        const tfc_color_draw r = tfc_color_draw_at(d, i);
        for (int64_t p = i * per; p < (i + 1) * per; p += d->c)
            tfc_color_pixel_grad(d, r, x + p, dy + p, dx + p);
    }
}
