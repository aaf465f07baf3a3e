/* CPU kernels of RandomSharpness (layers/augment_sharpness.c), NHWC, from
 * core/augment_sharp.h: one image per thread, each value computed on its own (the backward
 * gathers), so no result depends on the thread count. */
#include "core/augment_sharp.h"
#include "cpu/cpu_internal.h"

/* y = clip(x + c (s - x), vlo, vhi), c image i's blend weight, s the smoothing */
void tfc_cpu_sharpen_forward(tfc_backend *be, const tfc_sharpen_desc *d, const float *x,
                             float *y)
{
    const int64_t per = (int64_t)d->h * d->w * d->c;
    int nt = tfc_cpu_threads(be, d->n * per * 9);
#pragma omp parallel for TFC_CPU_STATIC(d->n, nt)
    for (int64_t i = 0; i < d->n; i++) {
        const float c = tfc_sharpen_blend(d, i);
        for (int oy = 0; oy < d->h; oy++)
            for (int ox = 0; ox < d->w; ox++)
                for (int ch = 0; ch < d->c; ch++) {
                    const float z = tfc_sharpen_at(d, x + i * per, c, oy, ox, ch);
                    y[i * per + ((int64_t)oy * d->w + ox) * d->c + ch] =
                        fminf(fmaxf(z, d->vlo), d->vhi);
                }
    }
}

/* dx += the blend's transpose of g, g = dy where the clip passes */
void tfc_cpu_sharpen_backward(tfc_backend *be, const tfc_sharpen_desc *d, const float *x,
                              const float *dy, float *dx)
{
    const int64_t per = (int64_t)d->h * d->w * d->c;
    int nt = tfc_cpu_threads(be, d->n * per * 81);
#pragma omp parallel for TFC_CPU_STATIC(d->n, nt)
    for (int64_t i = 0; i < d->n; i++) {
        const float c = tfc_sharpen_blend(d, i);
        for (int iy = 0; iy < d->h; iy++)
            for (int ix = 0; ix < d->w; ix++)
                for (int ch = 0; ch < d->c; ch++)
                    dx[i * per + ((int64_t)iy * d->w + ix) * d->c + ch] +=
                        tfc_sharpen_grad_at(d, x + i * per, dy + i * per, c, iy, ix, ch);
    }
}
