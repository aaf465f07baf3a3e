/* The preprocessing layers' encoding, one row at a time (tfc_encode_desc in core/backend.h):
 * shared by the CPU's encode_forward (cpu/cpu_encode.c) and the GPU's (gpu/gpu_encode.cu), so
 * both give the same values. The values are compared in double, where an int32 and a float
 * both convert exactly. */
#ifndef TFC_CORE_ENCODE_H
#define TFC_CORE_ENCODE_H

#include <math.h>
#include <stdint.h>

#include "core/backend.h"
#include "core/rng.h" /* TFC_HD */

/* The index of value v: see tfc_encode_desc. */
TFC_HD int64_t tfc_encode_index(const tfc_encode_desc *d, const float *table, double v)
{
    switch (d->map) {
    case TFC_ENCODE_INDEX:
        return v >= -9e18 && v <= 9e18 ? (int64_t)v : -1; /* NaN: -1 too */
    case TFC_ENCODE_BUCKET: {
        if (v != v) return d->n; /* NaN: the last bin, as Keras's */
        int lo = 0, hi = d->n;   /* the first boundary above v */
        while (lo < hi) {
            int mid = lo + (hi - lo) / 2;
            if ((double)table[mid] <= v) lo = mid + 1;
            else hi = mid;
        }
        return lo;
    }
    case TFC_ENCODE_LOOKUP: {
        int lo = 0, hi = d->n - 1;
        while (lo <= hi) {
            int mid = lo + (hi - lo) / 2;
            if ((double)table[mid] == v) return (int64_t)table[d->n + mid];
            if ((double)table[mid] < v) lo = mid + 1;
            else hi = mid - 1;
        }
        if (d->noov < 1 || v != v) return d->oov;
        double m = v - (double)d->noov * floor(v / (double)d->noov); /* floormod */
        return d->oov + (int64_t)m;
    }
    case TFC_ENCODE_INVERT:
        return v >= 0 && v < d->n ? (int64_t)table[(int64_t)v] : d->oov;
    }
    return -1;
}

/* Values of one output row: width for INT, width depth for ONE_HOT, depth otherwise. */
TFC_HD int64_t tfc_encode_row(const tfc_encode_desc *d)
{
    return d->mode == TFC_ENCODE_INT       ? d->width
           : d->mode == TFC_ENCODE_ONE_HOT ? (int64_t)d->width * d->depth
                                           : d->depth;
}

/* Row r of the output into yr (tfc_encode_row(d) values, overwritten). */
TFC_HD void tfc_encode_one(const tfc_encode_desc *d, int64_t r, const void *x,
                           const float *table, const float *scale, float *yr)
{
    const int64_t per = tfc_encode_row(d);
    for (int64_t k = 0; k < per; k++) yr[k] = 0.f;
    for (int j = 0; j < d->width; j++) {
        const int64_t at = r * d->width + j;
        const double v = d->ints ? (double)((const int32_t *)x)[at]
                                 : (double)((const float *)x)[at];
        const int64_t k = tfc_encode_index(d, table, v);
        if (d->mode == TFC_ENCODE_INT) {
            if (d->out_ints) ((int32_t *)yr)[j] = (int32_t)k;
            else yr[j] = (float)k;
            continue;
        }
        if (k < 0 || k >= d->depth) continue;
        if (d->mode == TFC_ENCODE_ONE_HOT) yr[(int64_t)j * d->depth + k] = 1.f;
        else if (d->mode == TFC_ENCODE_MULTI_HOT) yr[k] = 1.f;
        else yr[k] += 1.f;
    }
    if (scale && (d->mode == TFC_ENCODE_MULTI_HOT || d->mode == TFC_ENCODE_COUNT))
        for (int k = 0; k < d->depth; k++) yr[k] *= scale[k];
}

#endif
