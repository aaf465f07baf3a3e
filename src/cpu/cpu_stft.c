/* CPU STFTSpectrogram and MelSpectrogram (tfc_stft_desc in core/backend.h; the per-value math
 * in core/stft.h, which the GPU's kernels share). Each value is a direct sum over its frame,
 * its frames or its bands, in index order: the threads split the values, never a sum, so the
 * results do not depend on the thread count. MEL's top_db floor takes the batch's maximum,
 * found serially. */
#include <stdlib.h>

#include "core/stft.h"
#include "cpu/cpu_internal.h"

static int64_t rows_of(const tfc_stft_desc *d)
{
    return (int64_t)d->n * d->c * d->frames;
}

size_t tfc_cpu_stft_workspace(tfc_backend *be, const tfc_stft_desc *d)
{
    (void)be;
    int64_t floats = 2 * rows_of(d) * d->bins; /* the gradients of re and im */
    if (d->mode == TFC_STFT_MEL) floats += (int64_t)d->n * d->frames * d->mels;
    return (size_t)floats * sizeof(float);
}

/* MEL with db: the batch's largest value of y (its maximum before the floor too) */
static float mel_max(const tfc_stft_desc *d, const float *y)
{
    const int64_t total = (int64_t)d->n * d->mels * d->frames;
    float m = -INFINITY;
    for (int64_t k = 0; k < total; k++) m = fmaxf(m, y[k]);
    return m;
}

/* Row r's bins: the frame gathered once, then each kernel row added to every bin's sum in
 * turn (u ascending, the order of tfc_stft_bin, so the same values), contiguous in f. acc:
 * bins doubles, frame: frame floats of scratch. */
static void frame_bins(const tfc_stft_desc *d, const float *w, const float *frame, double *acc,
                       float *out)
{
    for (int f = 0; f < d->bins; f++) acc[f] = 0;
    for (int u = 0; u < d->frame; u++) {
        const double s = frame[u];
        const float *wu = w + (int64_t)u * d->bins;
        for (int f = 0; f < d->bins; f++) acc[f] += s * wu[f];
    }
    for (int f = 0; f < d->bins; f++) out[f] = (float)acc[f];
}

void tfc_cpu_stft_forward(tfc_backend *be, const tfc_stft_desc *d, const float *x,
                          const float *wr, const float *wi, const float *mel, float *re,
                          float *im, float *y)
{
    const int64_t rows = rows_of(d);
    int nt = tfc_cpu_threads(be, rows * d->bins * d->frame);
#pragma omp parallel num_threads(tfc_cpu_team(nt))
    {
        /* per thread: the frame, the sums, MEL's spectrum row */
        float *frame = malloc(sizeof(float) * ((size_t)d->frame + d->bins));
        double *acc = malloc(sizeof(double) * (size_t)d->bins);
        TFC_ASSERT(frame && acc);
        float *spec = frame + d->frame;
#pragma omp for schedule(static, tfc_cpu_share(rows, nt))
        for (int64_t r = 0; r < rows; r++) {
            const int64_t n = r / ((int64_t)d->c * d->frames);
            const int c = (int)(r / d->frames % d->c), t = (int)(r % d->frames);
            for (int u = 0; u < d->frame; u++)
                frame[u] = tfc_stft_sample(d, x, n, c, t * d->step + u);
            if (wr) frame_bins(d, wr, frame, acc, re + r * d->bins);
            if (wi) frame_bins(d, wi, frame, acc, im + r * d->bins);
            const float *rr = wr ? re + r * d->bins : NULL, *ri = wi ? im + r * d->bins : NULL;
            if (d->mode == TFC_STFT_MEL) {
                /* tfc_mel_power's sums with the spectrum row computed once */
                for (int f = 0; f < d->bins; f++) spec[f] = tfc_mel_spec(d, rr, ri, f);
                float *yr = y + n * d->sn + t * d->st;
                for (int m = 0; m < d->mels; m++) {
                    double s = 0;
                    for (int f = 0; f < d->bins; f++)
                        s += (double)spec[f] * mel[(int64_t)f * d->mels + m];
                    yr[m * d->sf] = d->db ? tfc_mel_db(d, (float)s) : (float)s;
                }
            } else {
                float *yr = y + n * d->sn + c * d->sc + t * d->st;
                const int k_end = d->mode == TFC_STFT_STFT ? 2 * d->bins : d->bins;
                for (int k = 0; k < k_end; k++) yr[k * d->sf] = tfc_stft_value(d, rr, ri, k);
            }
        }
        free(frame);
        free(acc);
    }
    if (d->mode == TFC_STFT_MEL && d->db) {
        const int64_t total = (int64_t)d->n * d->mels * d->frames;
        const float floor_db = mel_max(d, y) - d->top_db;
        for (int64_t k = 0; k < total; k++) y[k] = fmaxf(y[k], floor_db);
    }
}

/* MEL: the gradients of re and im from dy through the decibels (the floor's share of each
 * value's gradient goes to the batch's maximum, split among its ties as JAX's max does),
 * the mel matrix and |X|^mag_exp. dmel: [n, frames, mels] scratch. */
static void mel_grad(tfc_backend *be, const tfc_stft_desc *d, const float *mel,
                     const float *re, const float *im, const float *y, const float *dy,
                     float *gre, float *gim, float *dmel)
{
    const int64_t rows = rows_of(d); /* c is 1 */
    float top = 0, floor_db = 0, to_max = 0;
    int64_t ties = 0;
    if (d->db) {
        top = mel_max(d, y);
        floor_db = top - d->top_db;
    }
    /* serial: to_max and ties are sums over the batch */
    for (int64_t r = 0; r < rows; r++) {
        const int64_t n = r / d->frames;
        const int t = (int)(r % d->frames);
        const float *rr = re + r * d->bins, *ri = im + r * d->bins;
        for (int m = 0; m < d->mels; m++) {
            const int64_t at = n * d->sn + t * d->st + m * d->sf;
            const float p = tfc_mel_power(d, rr, ri, mel, m);
            float g = dy[at];
            if (d->db) {
                const float v = tfc_mel_db(d, p);
                const float keep = v > floor_db ? 1.0f : v == floor_db ? 0.5f : 0.0f;
                to_max += (1.0f - keep) * g;
                ties += v == top;
                g *= keep;
                /* d/dp of 10 log10(max(p, min_power)) */
                const float through = p > d->min_power ? 1.0f : p == d->min_power ? 0.5f : 0.0f;
                g *= through * 10.0f / ((float)M_LN10 * p);
            }
            dmel[r * d->mels + m] = g;
        }
    }
    if (d->db && to_max != 0.0f)
        for (int64_t r = 0; r < rows; r++)
            for (int m = 0; m < d->mels; m++) {
                const float *rr = re + r * d->bins, *ri = im + r * d->bins;
                const float p = tfc_mel_power(d, rr, ri, mel, m);
                if (tfc_mel_db(d, p) == top && p > d->min_power)
                    dmel[r * d->mels + m] += to_max / (float)ties * 10.0f /
                                             ((float)M_LN10 * p);
            }
    int nt = tfc_cpu_threads(be, rows * d->bins * d->mels);
#pragma omp parallel for TFC_CPU_STATIC(rows, nt)
    for (int64_t r = 0; r < rows; r++)
        for (int f = 0; f < d->bins; f++) {
            double gs = 0;
            for (int m = 0; m < d->mels; m++)
                gs += (double)dmel[r * d->mels + m] * mel[(int64_t)f * d->mels + m];
            const float a = re[r * d->bins + f], b = im[r * d->bins + f];
            const float mag = sqrtf(tfc_stft_power(a, b));
            /* d|X|^e = e |X|^(e - 1) d|X|, d|X| = (a da + b db) / |X| */
            const float gm = (float)gs * d->mag_exp * powf(mag, d->mag_exp - 1.0f) / mag;
            gre[r * d->bins + f] = a * gm;
            gim[r * d->bins + f] = b * gm;
        }
}

void tfc_cpu_stft_backward(tfc_backend *be, const tfc_stft_desc *d, const float *x,
                           const float *wr, const float *wi, const float *mel, const float *re,
                           const float *im, const float *y, const float *dy, float *dx,
                           float *dwr, float *dwi, void *ws)
{
    const int64_t rows = rows_of(d);
    float *gre = ws, *gim = gre + rows * d->bins;
    if (d->mode == TFC_STFT_MEL) {
        mel_grad(be, d, mel, re, im, y, dy, gre, gim, gim + rows * d->bins);
    } else {
        int nt = tfc_cpu_threads(be, rows * d->bins);
#pragma omp parallel for TFC_CPU_STATIC(rows, nt)
        for (int64_t r = 0; r < rows; r++) {
            const int64_t n = r / ((int64_t)d->c * d->frames);
            const int c = (int)(r / d->frames % d->c), t = (int)(r % d->frames);
            const float *g = dy + n * d->sn + c * d->sc + t * d->st;
            const float *rr = wr ? re + r * d->bins : NULL, *ri = wi ? im + r * d->bins : NULL;
            for (int f = 0; f < d->bins; f++)
                tfc_stft_value_grad(d, rr, ri, g, f, gre + r * d->bins + f,
                                    gim + r * d->bins + f);
        }
    }
    const float *gr = wr ? gre : NULL, *gi = wi ? gim : NULL;
    if (dx) {
        const int64_t signals = (int64_t)d->n * d->c;
        int nt = tfc_cpu_threads(be, signals * d->t * d->bins);
#pragma omp parallel for TFC_CPU_STATIC(signals, nt)
        for (int64_t s = 0; s < signals; s++)
            for (int i = 0; i < d->t; i++)
                dx[tfc_stft_x_at(d, s / d->c, (int)(s % d->c), i)] +=
                    tfc_stft_dx(d, gr, gi, wr, wi, s / d->c, (int)(s % d->c), i);
    }
    if (!(dwr && gr) && !(dwi && gi)) return;
    /* the kernels' gradients: each thread owns a share of the kernel rows u and walks every
     * frame in order, adding s[u] g[f] to its rows' sums (tfc_stft_dw's order: n, c, t) */
    const int64_t kernel = (int64_t)d->frame * d->bins;
    double *acc = calloc((size_t)kernel * 2, sizeof(double));
    TFC_ASSERT(acc);
    int nt = tfc_cpu_threads(be, kernel * rows);
#pragma omp parallel for TFC_CPU_STATIC(d->frame, nt)
    for (int u = 0; u < d->frame; u++) {
        double *ar = acc + (int64_t)u * d->bins, *ai = ar + kernel;
        for (int64_t r = 0; r < rows; r++) {
            const int64_t n = r / ((int64_t)d->c * d->frames);
            const int c = (int)(r / d->frames % d->c), t = (int)(r % d->frames);
            const double s = tfc_stft_sample(d, x, n, c, t * d->step + u);
            if (dwr && gr)
                for (int f = 0; f < d->bins; f++) ar[f] += s * gr[r * d->bins + f];
            if (dwi && gi)
                for (int f = 0; f < d->bins; f++) ai[f] += s * gi[r * d->bins + f];
        }
    }
    for (int64_t k = 0; k < kernel; k++) {
        if (dwr && gr) dwr[k] += (float)acc[k];
        if (dwi && gi) dwi[k] += (float)acc[kernel + k];
    }
    free(acc);
}
