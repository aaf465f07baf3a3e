/* The bins of adaptive pooling (tfc_adaptive_pool_desc, core/backend.h): header-only, as
 * core/crop_resize.h, so every backend (and a CUDA kernel) pools the same cells. PyTorch's
 * rule, which Keras 3's two-pool gather (keras/src/backend/jax/nn.py) reproduces: along an
 * axis of `in` cells pooled to `out`, output cell o covers [floor(o in / out),
 * ceil((o + 1) in / out)), never empty. */
#ifndef TFC_CORE_ADAPTIVE_POOL_H
#define TFC_CORE_ADAPTIVE_POOL_H

#include <stdint.h>

#include "core/rng.h" /* TFC_HD */

/* Output cell o's bin [*lo, *hi) along an axis of in cells pooled to out. */
TFC_HD void tfc_adaptive_bin(int o, int in, int out, int *lo, int *hi)
{
    *lo = (int)((int64_t)o * in / out);
    *hi = (int)(((int64_t)(o + 1) * in + out - 1) / out);
}

/* The output cells [*olo, *ohi) whose bins hold input cell i (the inverse of
 * tfc_adaptive_bin): floor(o in / out) <= i holds up to o = floor(((i + 1) out - 1) / in),
 * ceil((o + 1) in / out) > i from o = floor(i out / in). */
TFC_HD void tfc_adaptive_cover(int i, int in, int out, int *olo, int *ohi)
{
    *olo = (int)((int64_t)i * out / in);
    *ohi = (int)(((int64_t)(i + 1) * out - 1) / in) + 1;
}

#endif
