/* CPU max and average pooling, NHWC. Each output pixel's window is clipped to the image,
 * so padded cells never win a max and never count in an average (TensorFlow's SAME).
 * Channels are the contiguous inner loop. Max pooling records the winner's flat index
 * within the image (h*w*c) so backward routes the gradient without re-searching. */
#include "cpu/cpu_internal.h"

/* Rows [lo, hi) and columns of the window of output (oy, ox), clipped to the image. */
typedef struct window {
    int y0, y1, x0, x1;
} window;

static window clip_window(const tfc_pool_desc *d, int oy, int ox)
{
    window w;
    w.y0 = oy * d->sh - d->pad_top;
    w.x0 = ox * d->sw - d->pad_left;
    w.y1 = w.y0 + d->kh;
    w.x1 = w.x0 + d->kw;
    if (w.y0 < 0) w.y0 = 0;
    if (w.x0 < 0) w.x0 = 0;
    if (w.y1 > d->h) w.y1 = d->h;
    if (w.x1 > d->w) w.x1 = d->w;
    return w;
}

/* Max: the first cell of the window seeds y and argmax, later cells replace them only when
 * strictly larger (the first maximum wins ties). A window with no cell inside the image
 * (only possible with padding >= kernel) gives 0 and argmax -1. */
TFC_CPU_VECTOR
static void max_pixel(const tfc_pool_desc *d, const float *img, window w, float *y,
                      int32_t *arg)
{
    const int c = d->c;
    if (w.y0 >= w.y1 || w.x0 >= w.x1) {
        for (int ch = 0; ch < c; ch++) {
            y[ch] = 0.0f;
            if (arg) arg[ch] = -1;
        }
        return;
    }
    int32_t first = (int32_t)(((int64_t)w.y0 * d->w + w.x0) * c);
    memcpy(y, img + first, (size_t)c * sizeof(float));
    if (arg)
        for (int ch = 0; ch < c; ch++) arg[ch] = first + ch;
    for (int iy = w.y0; iy < w.y1; iy++) {
        for (int ix = w.x0; ix < w.x1; ix++) {
            int32_t base = (int32_t)(((int64_t)iy * d->w + ix) * c);
            const float *v = img + base;
            if (arg) {
#pragma omp simd
                for (int ch = 0; ch < c; ch++) {
                    int32_t win = -(int32_t)(v[ch] > y[ch]); /* all ones when v wins */
                    y[ch] = tfc_cpu_select(win, v[ch], y[ch]);
                    arg[ch] = ((base + ch) & win) | (arg[ch] & ~win);
                }
            } else {
#pragma omp simd
                for (int ch = 0; ch < c; ch++) y[ch] = v[ch] > y[ch] ? v[ch] : y[ch];
            }
        }
    }
}

/* Average over the cells inside the image. */
static void avg_pixel(const tfc_pool_desc *d, const float *img, window w, float *y)
{
    const int c = d->c;
    int count = (w.y1 - w.y0) * (w.x1 - w.x0);
    for (int ch = 0; ch < c; ch++) y[ch] = 0.0f;
    if (w.y0 >= w.y1 || w.x0 >= w.x1) return;
    for (int iy = w.y0; iy < w.y1; iy++)
        for (int ix = w.x0; ix < w.x1; ix++) {
            const float *v = img + ((int64_t)iy * d->w + ix) * c;
#pragma omp simd
            for (int ch = 0; ch < c; ch++) y[ch] += v[ch];
        }
    float inv = 1.0f / (float)count;
#pragma omp simd
    for (int ch = 0; ch < c; ch++) y[ch] *= inv;
}

/* y[n, oh, ow, c] = max or mean over each window; argmax (max only) may be NULL when no
 * backward follows. */
void tfc_cpu_pool_forward(tfc_backend *be, const tfc_pool_desc *d, const float *x, float *y,
                          int32_t *argmax)
{
    const int64_t img_in = (int64_t)d->h * d->w * d->c;
    const int64_t row_out = (int64_t)d->ow * d->c;
    const int64_t rows = (int64_t)d->n * d->oh;
    int nt = tfc_cpu_threads(be, rows * row_out * d->kh * d->kw);
    TFC_CPU_FOR(rows, nt, for (int64_t r = 0; r < rows; r++) {
        int64_t i = r / d->oh;
        int oy = (int)(r % d->oh);
        const float *img = x + i * img_in;
        for (int ox = 0; ox < d->ow; ox++) {
            int64_t o = r * row_out + (int64_t)ox * d->c;
            window w = clip_window(d, oy, ox);
            if (d->is_max)
                max_pixel(d, img, w, y + o, argmax ? argmax + o : NULL);
            else
                avg_pixel(d, img, w, y + o);
        }
    });
}

/* One channel block of oneDNN's nChw16c layout: 16 lanes in registers, their comparison
 * masks, and 16 floats in memory at any alignment. */
typedef float vf __attribute__((vector_size(64)));
typedef int32_t vi __attribute__((vector_size(64)));
typedef float vmem __attribute__((vector_size(64), aligned(4), may_alias));

/* max_pixel's step, lane by lane: v where it is strictly larger (a NaN never wins); a
 * macro, since a function passing vf by value would have another ABI in each clone */
#define LANES_MAX(acc, v) ((vf)(((vi)(v) & (vi)((v) > (acc))) | ((vi)(acc) & ~(vi)((v) > (acc)))))

/* The same windows over oneDNN's nChw16c layout, 16 channels at a time in registers, each
 * lane taking its cells in max_pixel's or avg_pixel's order (so the same values, bit for
 * bit; max_pixel's second look at the first cell changes nothing and is left out): the
 * pooling a convolution's chunk gets straight from its kernel's blocked output. Where no
 * window reaches outside the image, TILE neighbouring outputs go side by side, each cell
 * of their windows in turn, so that their chains of maxima overlap. */
TFC_VECTOR512
void tfc_cpu_pool_forward_16c(const tfc_pool_desc *d, const float *x, float *y)
{
    enum { TILE = 4 };
    const tfc_pool_desc e = *d; /* not aliased by y's stores: kept in registers */
    const int blocks = e.c / 16;
    const int64_t plane = (int64_t)e.h * e.w * 16, line = (int64_t)e.w * 16;
    const int64_t step = (int64_t)e.sw * 16;
    const int inside = e.pad_top == 0 && e.pad_left == 0 && (e.oh - 1) * e.sh + e.kh <= e.h &&
                       (e.ow - 1) * e.sw + e.kw <= e.w;
    const float inv = 1.0f / (float)(e.kh * e.kw);
    for (int64_t i = 0; i < e.n; i++)
        for (int b = 0; b < blocks; b++) {
            const float *img = x + (i * blocks + b) * plane;
            for (int oy = 0; oy < e.oh; oy++) {
                float *out = y + (i * e.oh + oy) * e.ow * e.c + b * 16;
                int ox = 0;
                for (; inside && ox + TILE <= e.ow; ox += TILE, out += TILE * e.c) {
                    const float *at = img + (int64_t)oy * e.sh * line + (int64_t)ox * step;
                    vf acc[TILE];
#pragma GCC unroll 4
                    for (int t = 0; t < TILE; t++)
                        acc[t] = e.is_max ? (vf) * (const vmem *)(at + t * step) : (vf){0};
                    for (int r = 0; r < e.kh; r++)
                        for (int k = 0; k < e.kw; k++) {
                            const float *cell = at + r * line + k * 16;
                            if (e.is_max && !r && !k) continue;
#pragma GCC unroll 4
                            for (int t = 0; t < TILE; t++) {
                                vf v = *(const vmem *)(cell + t * step);
                                acc[t] = e.is_max ? LANES_MAX(acc[t], v) : acc[t] + v;
                            }
                        }
#pragma GCC unroll 4
                    for (int t = 0; t < TILE; t++)
                        *(vmem *)(out + t * e.c) = e.is_max ? acc[t] : acc[t] * inv;
                }
                for (; ox < e.ow; ox++, out += e.c) { /* one by one, clipped */
                    window w = clip_window(&e, oy, ox);
                    const int rows = w.y1 - w.y0, cols = w.x1 - w.x0;
                    vf acc = {0};
                    const float *row = img + w.y0 * line + w.x0 * 16;
                    if (rows > 0 && cols > 0 && e.is_max) {
                        acc = *(const vmem *)row;
                        for (int r = 0; r < rows; r++, row += line)
                            for (int k = r ? 0 : 1; k < cols; k++) {
                                vf v = *(const vmem *)(row + k * 16);
                                acc = LANES_MAX(acc, v);
                            }
                    } else if (rows > 0 && cols > 0) {
                        for (int r = 0; r < rows; r++, row += line)
                            for (int k = 0; k < cols; k++) acc += *(const vmem *)(row + k * 16);
                        acc *= 1.0f / (float)(rows * cols);
                    }
                    *(vmem *)out = acc;
                }
            }
        }
}

/* One image's average-pooling gradient: every cell of each window += dy / count */
static void average_backward(const tfc_pool_desc *d, const float *gy, float *g)
{
    const int c = d->c;
    for (int oy = 0; oy < d->oh; oy++)
        for (int ox = 0; ox < d->ow; ox++) {
            window w = clip_window(d, oy, ox);
            int count = (w.y1 - w.y0) * (w.x1 - w.x0);
            if (w.y0 >= w.y1 || w.x0 >= w.x1) continue;
            const float *v = gy + ((int64_t)oy * d->ow + ox) * c;
            float inv = 1.0f / (float)count;
            for (int iy = w.y0; iy < w.y1; iy++)
                for (int ix = w.x0; ix < w.x1; ix++) {
                    float *o = g + ((int64_t)iy * d->w + ix) * c;
#pragma omp simd
                    for (int ch = 0; ch < c; ch++) o[ch] += v[ch] * inv;
                }
        }
}

/* g *= ReLU'(x), taken from the ReLU's output as act_backward does: (x > 0 ? 1 : 0) * g */
TFC_VECTOR
static void relu_derivative(int64_t n, const float *x, float *g)
{
#pragma omp simd
    for (int64_t k = 0; k < n; k++) g[k] = (x[k] > 0.0f ? 1.0f : 0.0f) * g[k];
}

/* Max: dx[winner] += dy. Average: every cell of the window += dy / count. Images are
 * independent, so they run in parallel; windows within one image overlap when the stride
 * is smaller than the kernel, so one thread owns a whole image. With assign each image's dx
 * is zeroed just before its windows add into it, while it is in cache (a separate zeroing
 * pass wrote all of dx to memory first: 19 MB a step in mnist_cnn). With relu_x each image
 * then takes the ReLU's derivative while in cache (act_backward's formula, the same bits),
 * instead of act_backward's own pass over all of dx. */
void tfc_cpu_pool_backward(tfc_backend *be, const tfc_pool_desc *d, const float *dy,
                           const int32_t *argmax, float *dx, int assign, const float *relu_x)
{
    const int64_t img_in = (int64_t)d->h * d->w * d->c;
    const int64_t img_out = (int64_t)d->oh * d->ow * d->c;
    int nt = d->n > 1 ? tfc_cpu_threads(be, (int64_t)d->n * img_out * d->kh * d->kw) : 1;
#pragma omp parallel for TFC_CPU_STATIC(d->n, nt)
    for (int64_t i = 0; i < d->n; i++) {
        float *g = dx + i * img_in;
        const float *gy = dy + i * img_out;
        if (assign) memset(g, 0, (size_t)img_in * sizeof(float));
        if (d->is_max) {
            const int32_t *a = argmax + i * img_out;
            for (int64_t o = 0; o < img_out; o++)
                if (a[o] >= 0) g[a[o]] += gy[o];
        } else {
            average_backward(d, gy, g);
        }
        if (relu_x) relu_derivative(img_in, relu_x + i * img_in, g);
    }
}
