/* The preprocessing layers' encoding (tfc_encode_desc in core/backend.h): CategoryEncoding,
 * Discretization, IntegerLookup and Hashing, and HashedCrossing's hash_cross_forward, a row
 * at a time by core/encode.h. */
#include <math.h>

#include "core/encode.h"
#include "cpu/cpu_internal.h"

void tfc_cpu_encode_forward(tfc_backend *be, const tfc_encode_desc *d, const void *x,
                            const float *table, const float *scale, float *y)
{
    (void)be;
    const int64_t per = tfc_encode_row(d);
    for (int64_t r = 0; r < d->rows; r++) tfc_encode_one(d, r, x, table, scale, y + r * per);
}

void tfc_cpu_hash_cross_forward(tfc_backend *be, const tfc_encode_desc *d, int k,
                                const int32_t *const *x, float *y)
{
    (void)be;
    const int64_t per = tfc_encode_row(d);
    for (int64_t r = 0; r < d->rows; r++) tfc_encode_cross_one(d, r, k, x, y + r * per);
}
