/* CPU permute (Permute; tfc_permute_desc in core/backend.h). The batch axis joins the
 * permutation as a fixed first axis, axes of size 1 drop out, and output axes that stay
 * neighbours in the input merge, so the copy sees the fewest axes: an identity is one run,
 * (2, 1, 3) on (a, b, c) runs of c floats. Then either
 *   - the output's last axis is contiguous in the input: runs of floats copied in order (short
 *     runs a block at a time along the axis before, their offsets found once a block), or
 *   - it is not: 32 x 32 tiles between the output's last axis and the input's (the one of
 *     input stride 1), each read and written through L1, one side strided.
 * Units (runs or tiles) are independent, so they split among threads freely; every output
 * float is written (or added to) once, so the result never depends on the threads. On
 * [128, 64, 32, 16], one thread: 1.2 - 3.8 ms a permutation against 1.2 ms for a memcpy and
 * 75 - 110 ms for an index loop (docs/gpu.md, Permute and UnitNormalization). */
#include <string.h>

#include "cpu/cpu_internal.h"

enum { TILE = 32, RUN = 4096 }; /* tile side; floats of a run unit at most */

/* The merged view: k output axes of sizes od, their strides in the input (is) and in the
 * output (os), outermost first. */
typedef struct pview {
    int k;
    int64_t od[TFC_PERMUTE_AXES + 1], is[TFC_PERMUTE_AXES + 1], os[TFC_PERMUTE_AXES + 1];
} pview;

static void view_of(const tfc_permute_desc *d, pview *v)
{
    int64_t dim[TFC_PERMUTE_AXES + 1], st[TFC_PERMUTE_AXES + 1];
    int p[TFC_PERMUTE_AXES + 1];
    const int nd = d->ndim + 1;
    dim[0] = d->n, p[0] = 0;
    for (int i = 0; i < d->ndim; i++) dim[i + 1] = d->dim[i], p[i + 1] = d->perm[i] + 1;
    st[nd - 1] = 1;
    for (int i = nd - 2; i >= 0; i--) st[i] = st[i + 1] * dim[i + 1];
    v->k = 0;
    for (int i = 0; i < nd; i++) {
        const int a = p[i];
        if (dim[a] == 1) continue;
        if (v->k > 0 && v->is[v->k - 1] == st[a] * dim[a]) { /* the input's next axis: merge */
            v->od[v->k - 1] *= dim[a];
            v->is[v->k - 1] = st[a];
        } else {
            v->od[v->k] = dim[a], v->is[v->k] = st[a];
            v->k++;
        }
    }
    if (v->k == 0) v->od[0] = 1, v->is[0] = 1, v->k = 1;
    v->os[v->k - 1] = 1;
    for (int i = v->k - 2; i >= 0; i--) v->os[i] = v->os[i + 1] * v->od[i + 1];
}

/* The input and output offsets of index u over the axes of v other than skip0 and skip1
 * (mixed radix, the last axis fastest). */
static void offsets(const pview *v, int64_t u, int skip0, int skip1, int64_t *xo, int64_t *yo)
{
    *xo = *yo = 0;
    for (int i = v->k - 1; i >= 0; i--) {
        if (i == skip0 || i == skip1) continue;
        const int64_t c = u % v->od[i];
        u /= v->od[i];
        *xo += c * v->is[i], *yo += c * v->os[i];
    }
}

TFC_CPU_VECTOR
static void copy_run(const float *x, float *y, int64_t len, int add)
{
    if (!add) {
        memcpy(y, x, (size_t)len * sizeof *y);
        return;
    }
#pragma omp simd
    for (int64_t i = 0; i < len; i++) y[i] += x[i];
}

/* One tile: a in [a0, a1) along the output's last axis (input stride sa), b in [b0, b1)
 * along the input's last axis (output stride sb). */
static void copy_tile(const float *x, float *y, int64_t sa, int64_t sb, int64_t a0, int64_t a1,
                      int64_t b0, int64_t b1, int add)
{
    for (int64_t b = b0; b < b1; b++) {
        const float *xr = x + b;
        float *yr = y + b * sb;
        if (add)
            for (int64_t a = a0; a < a1; a++) yr[a] += xr[a * sa];
        else
            for (int64_t a = a0; a < a1; a++) yr[a] = xr[a * sa];
    }
}

void tfc_cpu_permute(tfc_backend *be, const tfc_permute_desc *d, const float *x, float *y,
                     int add)
{
    pview v;
    view_of(d, &v);
    int64_t total = 1;
    for (int i = 0; i < v.k; i++) total *= v.od[i];
    if (total == 0) return;
    const int nt = tfc_cpu_threads(be, total);
    const int last = v.k - 1;
    if (v.is[last] == 1 && (v.od[last] >= RUN || v.k == 1)) { /* long runs, cut into RUN */
        const int64_t len = v.od[last], pieces = (len + RUN - 1) / RUN;
        const int64_t units = total / len * pieces;
        TFC_CPU_FOR(units, nt, for (int64_t u = 0; u < units; u++) {
            int64_t xo, yo;
            offsets(&v, u / pieces, last, -1, &xo, &yo);
            const int64_t s = u % pieces * RUN, e = s + RUN < len ? s + RUN : len;
            copy_run(x + xo + s, y + yo + s, e - s, add);
        });
        return;
    }
    if (v.is[last] == 1) { /* short runs: a unit is up to RUN floats of runs along the axis
                            * before the last, its offsets decoded once */
        const int64_t len = v.od[last], m = v.od[last - 1], per = (RUN / len < m ? RUN / len : m);
        const int64_t sx = v.is[last - 1], sy = v.os[last - 1], chunks = (m + per - 1) / per;
        const int64_t units = total / (len * m) * chunks;
        TFC_CPU_FOR(units, nt, for (int64_t u = 0; u < units; u++) {
            int64_t xo, yo;
            offsets(&v, u / chunks, last, last - 1, &xo, &yo);
            const int64_t j0 = u % chunks * per, j1 = j0 + per < m ? j0 + per : m;
            for (int64_t j = j0; j < j1; j++) copy_run(x + xo + j * sx, y + yo + j * sy, len, add);
        });
        return;
    }
    int b = 0; /* the input's last axis (input stride 1): some output axis before the last */
    while (v.is[b] != 1) b++;
    const int64_t na = v.od[last], nb = v.od[b], sa = v.is[last], sb = v.os[b];
    const int64_t ta = (na + TILE - 1) / TILE, tb = (nb + TILE - 1) / TILE;
    const int64_t units = total / (na * nb) * ta * tb;
    TFC_CPU_FOR(units, nt, for (int64_t u = 0; u < units; u++) {
        int64_t xo, yo;
        offsets(&v, u / (ta * tb), last, b, &xo, &yo);
        const int64_t a0 = u % ta * TILE, b0 = u / ta % tb * TILE;
        copy_tile(x + xo, y + yo, sa, sb, a0, a0 + TILE < na ? a0 + TILE : na, b0,
                  b0 + TILE < nb ? b0 + TILE : nb, add);
    });
}
