/* CPU embedding lookups: gather rows of a table by id, and the gradient's scatter-add.
 * Ids are range-checked by the caller. The scatter runs on one thread over ids (repeated
 * ids would race) unless rows are wide, when threads split the columns instead. */
#include <omp.h>

#include "cpu/cpu_internal.h"

/* y[i, :] = table[ids[i], :] */
void tfc_cpu_gather(tfc_backend *be, int64_t n, int dim, const int32_t *ids, const float *table,
                    float *y)
{
    int nt = tfc_cpu_threads(be, n * dim);
    TFC_CPU_FOR(n, nt, for (int64_t i = 0; i < n; i++)
        memcpy(y + i * dim, table + (int64_t)ids[i] * dim, (size_t)dim * sizeof(float)););
}

/* dtable[ids[i], :] += dy[i, :]. Column slices are disjoint, so threads take slices of
 * at least 64 columns and each walks all ids in order (the same sums on any thread count). */
void tfc_cpu_scatter_add(tfc_backend *be, int64_t n, int dim, const int32_t *ids,
                         const float *dy, float *dtable)
{
    int slices = dim / 64 < 1 ? 1 : dim / 64;
    int nt = tfc_cpu_threads(be, n * dim);
    if (slices < nt) nt = slices;
    const int T = nt;
#pragma omp parallel num_threads(tfc_cpu_team(nt))
    TFC_CPU_SHARES(t, nt)
    {
        int lo = (int)((int64_t)dim * t / T), hi = (int)((int64_t)dim * (t + 1) / T);
        for (int64_t i = 0; i < n; i++) {
            float *o = dtable + (int64_t)ids[i] * dim;
            const float *g = dy + i * dim;
#pragma omp simd
            for (int j = lo; j < hi; j++) o[j] += g[j];
        }
    }
}
