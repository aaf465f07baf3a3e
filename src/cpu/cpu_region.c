/* CPU kernels of the region augmentation layers (RandomErasing), NHWC: each image's draws
 * from core/augment_region.h, one image per thread, so no result depends on the thread
 * count. */
#include "core/augment_region.h"
#include "cpu/cpu_internal.h"

/* y = the fill inside image i's rectangle when it is erased, x elsewhere */
void tfc_cpu_erasing_forward(tfc_backend *be, const tfc_erase_desc *d, const float *x, float *y)
{
    const int64_t per = (int64_t)d->h * d->w * d->c;
    int nt = tfc_cpu_threads(be, d->n * per);
#pragma omp parallel for TFC_CPU_STATIC(d->n, nt)
    for (int64_t i = 0; i < d->n; i++) {
        float box[4];
        const int erased = tfc_erase_box(d, i, box);
        for (int oy = 0; oy < d->h; oy++)
            for (int ox = 0; ox < d->w; ox++) {
                const int64_t at = i * per + ((int64_t)oy * d->w + ox) * d->c;
                const int in = erased && tfc_erase_inside(box, oy, ox);
                for (int ch = 0; ch < d->c; ch++)
                    y[at + ch] = in ? tfc_erase_fill(d, at + ch, ch) : x[at + ch];
            }
    }
}

/* dx += dy outside the erased rectangles */
void tfc_cpu_erasing_backward(tfc_backend *be, const tfc_erase_desc *d, const float *dy,
                              float *dx)
{
    const int64_t per = (int64_t)d->h * d->w * d->c;
    int nt = tfc_cpu_threads(be, d->n * per);
#pragma omp parallel for TFC_CPU_STATIC(d->n, nt)
    for (int64_t i = 0; i < d->n; i++) {
        float box[4];
        const int erased = tfc_erase_box(d, i, box);
        for (int oy = 0; oy < d->h; oy++)
            for (int ox = 0; ox < d->w; ox++) {
                if (erased && tfc_erase_inside(box, oy, ox)) continue;
                const int64_t at = i * per + ((int64_t)oy * d->w + ox) * d->c;
                for (int ch = 0; ch < d->c; ch++) dx[at + ch] += dy[at + ch];
            }
    }
}
