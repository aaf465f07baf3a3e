/* The per-value math of STFTSpectrogram and MelSpectrogram (tfc_stft_desc in core/backend.h),
 * shared by the CPU kernels (cpu/cpu_stft.c) and the GPU's (gpu/gpu_stft.cu) so that both
 * compute the same values in the same order. Sums run in double, in index order. */
#ifndef TFC_CORE_STFT_H
#define TFC_CORE_STFT_H

#include <math.h>

#include "core/backend.h"
#include "core/rng.h" /* TFC_HD */

/* Keras's backend.epsilon(): the floor of the power and the magnitude in STFTSpectrogram */
#define TFC_STFT_EPSILON 1e-7f

/* Samples of the padded signal: the zeros and mirrors included. */
TFC_HD int tfc_stft_padded(const tfc_stft_desc *d)
{
    return d->reflect ? d->t + 2 * d->pad_left : (d->frames - 1) * d->step + d->frame;
}

/* The input sample at padded position p of channel c of example n (0 in the zero padding). */
TFC_HD float tfc_stft_sample(const tfc_stft_desc *d, const float *x, int64_t n, int c, int p)
{
    int i = p - d->pad_left;
    if (d->reflect) {
        if (i < 0) i = -i;
        if (i >= d->t) i = 2 * (d->t - 1) - i;
    } else if (i < 0 || i >= d->t) {
        return 0.0f;
    }
    return d->channels_first ? x[(n * d->c + c) * d->t + i] : x[(n * d->t + i) * d->c + c];
}

/* The offset of x's sample i of channel c of example n. */
TFC_HD int64_t tfc_stft_x_at(const tfc_stft_desc *d, int64_t n, int c, int i)
{
    return d->channels_first ? (n * d->c + c) * d->t + i : (n * d->t + i) * d->c + c;
}

/* One bin of one frame against kernel w [frame, bins]: sum_u s[t step + u] w[u, f]. */
TFC_HD float tfc_stft_bin(const tfc_stft_desc *d, const float *x, const float *w, int64_t n,
                          int c, int t, int f)
{
    double s = 0;
    for (int u = 0; u < d->frame; u++)
        s += (double)tfc_stft_sample(d, x, n, c, t * d->step + u) * w[(int64_t)u * d->bins + f];
    return (float)s;
}

/* The power re^2 + im^2 (a missing half counts 0) */
TFC_HD float tfc_stft_power(float re, float im)
{
    return re * re + im * im;
}

/* STFT modes: output value k (< bins, or 2 bins for STFT) of a frame from its re and im rows
 * (either may be NULL where the mode does not read it), as Keras's call computes it. */
TFC_HD float tfc_stft_value(const tfc_stft_desc *d, const float *re, const float *im, int k)
{
    switch (d->mode) {
    case TFC_STFT_REAL: return re[k];
    case TFC_STFT_IMAG: return im[k];
    case TFC_STFT_ANGLE: return atan2f(im[k], re[k]);
    case TFC_STFT_STFT: return k < d->bins ? re[k] : im[k - d->bins];
    case TFC_STFT_PSD: {
        const float p = tfc_stft_power(re[k], im[k]);
        return k >= 1 && k <= d->bins - 2 ? p + p : p;
    }
    case TFC_STFT_MAGNITUDE: return sqrtf(fmaxf(tfc_stft_power(re[k], im[k]), TFC_STFT_EPSILON));
    default: /* LOG */
        return logf(fmaxf(sqrtf(fmaxf(tfc_stft_power(re[k], im[k]), TFC_STFT_EPSILON)),
                          TFC_STFT_EPSILON));
    }
}

/* STFT modes: the gradients of bin f of a frame's re and im (*gre, *gim) from its output
 * gradients g (the frame's row of dy, read at stride sf) and its re and im rows. */
TFC_HD void tfc_stft_value_grad(const tfc_stft_desc *d, const float *re, const float *im,
                                const float *g, int f, float *gre, float *gim)
{
    const float gf = g[f * d->sf];
    *gre = *gim = 0.0f;
    switch (d->mode) {
    case TFC_STFT_REAL: *gre = gf; return;
    case TFC_STFT_IMAG: *gim = gf; return;
    case TFC_STFT_STFT:
        *gre = gf;
        *gim = g[(f + d->bins) * d->sf];
        return;
    case TFC_STFT_ANGLE: { /* atan2(im, re): (-im, re) / (re^2 + im^2) */
        const float p = tfc_stft_power(re[f], im[f]);
        *gre = -im[f] / p * gf;
        *gim = re[f] / p * gf;
        return;
    }
    default: break;
    }
    const float p = tfc_stft_power(re[f], im[f]);
    float gp; /* d/dp */
    if (d->mode == TFC_STFT_PSD)
        gp = f >= 1 && f <= d->bins - 2 ? gf + gf : gf;
    else if (p <= TFC_STFT_EPSILON) /* the floor holds: no gradient */
        gp = 0.0f;
    else if (d->mode == TFC_STFT_MAGNITUDE)
        gp = gf * 0.5f / sqrtf(p);
    else /* LOG: log(sqrt(p)), the magnitude's floor above epsilon */
        gp = gf * 0.5f / p;
    *gre = 2.0f * re[f] * gp;
    *gim = 2.0f * im[f] * gp;
}

/* MEL: |X[f]|^mag_exp of a frame's bin f */
TFC_HD float tfc_mel_spec(const tfc_stft_desc *d, const float *re, const float *im, int f)
{
    return powf(sqrtf(tfc_stft_power(re[f], im[f])), d->mag_exp);
}

/* MEL: the mel power of band m of a frame (its re and im rows) */
TFC_HD float tfc_mel_power(const tfc_stft_desc *d, const float *re, const float *im,
                           const float *mel, int m)
{
    double s = 0;
    for (int f = 0; f < d->bins; f++)
        s += (double)tfc_mel_spec(d, re, im, f) * mel[(int64_t)f * d->mels + m];
    return (float)s;
}

/* MEL with db: the decibels before the top_db floor */
TFC_HD float tfc_mel_db(const tfc_stft_desc *d, float power)
{
    return 10.0f * log10f(fmaxf(power, d->min_power)) - d->ref_db;
}

/* The gradient of x's sample i of channel c of example n: every padded position that reads
 * it (itself; mirrored, up to two more), through every frame that holds that position,
 * against the kernels (g rows [n, c, frames, bins]; a NULL half is skipped). */
TFC_HD float tfc_stft_dx(const tfc_stft_desc *d, const float *gre, const float *gim,
                         const float *wr, const float *wi, int64_t n, int c, int i)
{
    int ps[3], np = 0;
    ps[np++] = i + d->pad_left;
    if (d->reflect) {
        if (i >= 1 && i <= d->pad_left) ps[np++] = d->pad_left - i;
        const int q = d->pad_left + 2 * (d->t - 1) - i; /* its mirror after the signal */
        if (q >= d->pad_left + d->t && q < tfc_stft_padded(d)) ps[np++] = q;
    }
    double s = 0;
    for (int j = 0; j < np; j++) {
        const int p = ps[j];
        int t0 = p - d->frame + 1 > 0 ? (p - d->frame + 1 + d->step - 1) / d->step : 0;
        for (int t = t0; t <= p / d->step && t < d->frames; t++) {
            const int u = p - t * d->step;
            const int64_t row = ((n * d->c + c) * d->frames + t) * d->bins;
            for (int f = 0; f < d->bins; f++) {
                if (gre) s += (double)gre[row + f] * wr[(int64_t)u * d->bins + f];
                if (gim) s += (double)gim[row + f] * wi[(int64_t)u * d->bins + f];
            }
        }
    }
    return (float)s;
}

/* The gradient of kernel value (u, f) from g rows [n, c, frames, bins]: sum over examples,
 * channels and frames of the sample it met times g. */
TFC_HD float tfc_stft_dw(const tfc_stft_desc *d, const float *x, const float *g, int u, int f)
{
    double s = 0;
    for (int64_t n = 0; n < d->n; n++)
        for (int c = 0; c < d->c; c++)
            for (int t = 0; t < d->frames; t++)
                s += (double)tfc_stft_sample(d, x, n, c, t * d->step + u) *
                     g[((n * d->c + c) * d->frames + t) * d->bins + f];
    return (float)s;
}

#endif
