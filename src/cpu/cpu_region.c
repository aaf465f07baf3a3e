/* CPU kernels of the region augmentation layers (RandomErasing, RandomGaussianBlur), NHWC:
 * each image's draws from core/augment_region.h, one image per thread, so no result depends
 * on the thread count. */
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

/* y = clip(blurred ? the Gaussian blur of x : x, vlo, vhi), image i blurred per its draw */
void tfc_cpu_blur_forward(tfc_backend *be, const tfc_blur_desc *d, const float *x, float *y)
{
    const int64_t per = (int64_t)d->h * d->w * d->c;
    float wx[TFC_BLUR_MAX_KERNEL], wy[TFC_BLUR_MAX_KERNEL];
    tfc_blur_weights(d, wx, wy);
    int nt = tfc_cpu_threads(be, d->n * per * d->kh * d->kw);
#pragma omp parallel for TFC_CPU_STATIC(d->n, nt)
    for (int64_t i = 0; i < d->n; i++) {
        const float *xi = x + i * per;
        float *yi = y + i * per;
        const int blurred = tfc_blur_applies(d, i);
        for (int oy = 0; oy < d->h; oy++)
            for (int ox = 0; ox < d->w; ox++)
                for (int ch = 0; ch < d->c; ch++) {
                    const int64_t at = ((int64_t)oy * d->w + ox) * d->c + ch;
                    const float z = blurred ? tfc_blur_at(d, xi, wx, wy, oy, ox, ch) : xi[at];
                    yi[at] = fminf(fmaxf(z, d->vlo), d->vhi);
                }
    }
}

/* g = dy where vlo <= z <= vhi (z the value before the clip); dx += g, or the blur's
 * transpose of g (scattered over each output's window, one image per thread) */
void tfc_cpu_blur_backward(tfc_backend *be, const tfc_blur_desc *d, const float *x,
                           const float *dy, float *dx)
{
    const int64_t per = (int64_t)d->h * d->w * d->c;
    float wx[TFC_BLUR_MAX_KERNEL], wy[TFC_BLUR_MAX_KERNEL];
    tfc_blur_weights(d, wx, wy);
    int nt = tfc_cpu_threads(be, d->n * per * d->kh * d->kw);
#pragma omp parallel for TFC_CPU_STATIC(d->n, nt)
    for (int64_t i = 0; i < d->n; i++) {
        const float *xi = x + i * per, *gi = dy + i * per;
        float *di = dx + i * per;
        const int blurred = tfc_blur_applies(d, i);
        for (int oy = 0; oy < d->h; oy++)
            for (int ox = 0; ox < d->w; ox++)
                for (int ch = 0; ch < d->c; ch++) {
                    const int64_t at = ((int64_t)oy * d->w + ox) * d->c + ch;
                    const float z = blurred ? tfc_blur_at(d, xi, wx, wy, oy, ox, ch) : xi[at];
                    if (z < d->vlo || z > d->vhi) continue;
                    if (!blurred) {
                        di[at] += gi[at];
                        continue;
                    }
                    for (int a = 0; a < d->kh; a++) {
                        const int iy = oy + a - d->kh / 2;
                        if (iy < 0 || iy >= d->h) continue;
                        for (int b = 0; b < d->kw; b++) {
                            const int ix = ox + b - d->kw / 2;
                            if (ix < 0 || ix >= d->w) continue;
                            di[((int64_t)iy * d->w + ix) * d->c + ch] += wy[a] * wx[b] * gi[at];
                        }
                    }
                }
    }
}
