/* CPU group normalisation (GroupNormalization; tfc_groupnorm_desc in core/backend.h). The
 * unit of work is one example's group: its m = outer cg inner values lie in `outer` runs of
 * cg inner contiguous floats, one run per position before the channel axis. Units are
 * independent, so the forward splits them among threads freely; the backward's per-channel
 * sums (dgamma, dbeta) go through fixed shares of units whose partial sums are added in share
 * order (cpu_internal.h), so they depend on the backend's thread count only. */
#include "cpu/cpu_internal.h"

/* The first value of unit (b, g)'s run o. */
static inline int64_t run_at(const tfc_groupnorm_desc *d, int64_t b, int g, int64_t o)
{
    const int64_t c = (int64_t)d->groups * d->cg;
    return ((b * d->outer + o) * c + (int64_t)g * d->cg) * d->inner;
}

/* A unit's mu and invstd, summed in double over x shifted by the unit's first value (as
 * cpu_layernorm.c's rows: E[x^2] - E[x]^2 then cancels only about ((x[0] - mean)^2 / var + 1)
 * times var's magnitude, in double's 1e-16). */
TFC_CPU_VECTOR
static void unit_stats(const tfc_groupnorm_desc *d, const float *x, int64_t b, int g,
                       float *mu, float *invstd)
{
    const int64_t run = (int64_t)d->cg * d->inner, m = d->outer * run;
    const double shift = x[run_at(d, b, g, 0)];
    double s = 0.0, s2 = 0.0;
    for (int64_t o = 0; o < d->outer; o++) {
        const float *xr = x + run_at(d, b, g, o);
#pragma omp simd reduction(+ : s, s2)
        for (int64_t j = 0; j < run; j++) {
            double v = (double)xr[j] - shift;
            s += v;
            s2 += v * v;
        }
    }
    double md = s / (double)m, var = s2 / (double)m - md * md;
    if (var < 0.0) var = 0.0;
    *mu = (float)(shift + md);
    *invstd = (float)(1.0 / sqrt(var + (double)d->eps));
}

/* Unit (b, g)'s statistics, then y = (x - mu) invstd gamma[c] + beta[c] over its runs. */
TFC_CPU_VECTOR
static void unit_forward(const tfc_groupnorm_desc *d, const float *x, int64_t b, int g,
                         const float *gamma, const float *beta, float *y, float *stats)
{
    float mu, inv;
    unit_stats(d, x, b, g, &mu, &inv);
    if (stats) stats[0] = mu, stats[1] = inv;
    for (int64_t o = 0; o < d->outer; o++) {
        const int64_t at = run_at(d, b, g, o);
        for (int k = 0; k < d->cg; k++) {
            const int c = g * d->cg + k;
            const float sc = gamma ? gamma[c] * inv : inv, sh = beta ? beta[c] : 0.0f;
            const float *xr = x + at + (int64_t)k * d->inner;
            float *yr = y + at + (int64_t)k * d->inner;
#pragma omp simd
            for (int64_t i = 0; i < d->inner; i++) yr[i] = (xr[i] - mu) * sc + sh;
        }
    }
}

void tfc_cpu_groupnorm_forward(tfc_backend *be, const tfc_groupnorm_desc *d, const float *x,
                               const float *gamma, const float *beta, float *y, float *stats)
{
    const int64_t units = d->n * d->groups;
    const int nt = tfc_cpu_threads(be, units * d->outer * d->cg * d->inner);
    TFC_CPU_FOR(units, nt, for (int64_t u = 0; u < units; u++) {
        unit_forward(d, x, u / d->groups, (int)(u % d->groups), gamma, beta, y,
                     stats ? stats + 2 * u : NULL);
    });
}

/* The shares of the backward's per-channel sums: partial dgamma and dbeta in double,
 * groups cg each per share. */
static int backward_shares(const tfc_backend *be, const tfc_groupnorm_desc *d)
{
    return tfc_cpu_reduce_threads(be, d->n * d->groups * d->outer * d->cg * d->inner);
}

size_t tfc_cpu_groupnorm_workspace(tfc_backend *be, const tfc_groupnorm_desc *d)
{
    return (size_t)backward_shares(be, d) * 2 * (size_t)d->groups * d->cg * sizeof(double);
}

/* Per unit: sum g and sum g u in one pass over its runs, then dx written (assign) or added
 *   dx = invstd (g - sum g / m - u sum(g u) / m)
 * and dy u, dy added into the share's partial dgamma, dbeta of the unit's channels. The
 * shares' partials are then added in share order. */
TFC_CPU_VECTOR
void tfc_cpu_groupnorm_backward(tfc_backend *be, const tfc_groupnorm_desc *d, const float *x,
                                const float *dy, const float *gamma, const float *stats,
                                float *dx, float *dgamma, float *dbeta, int assign, void *ws)
{
    const int nt = backward_shares(be, d);
    const int C = d->groups * d->cg;
    const int64_t units = d->n * d->groups, inner = d->inner;
    const double m = (double)(d->outer * d->cg * inner);
    double *part = ws; /* share t: dgamma's partial at part[2 t C], dbeta's after it */
    const int sums = dgamma || dbeta;
    TFC_ASSERT(!sums || part);
#pragma omp parallel num_threads(tfc_cpu_team(nt))
    TFC_CPU_SHARES(t, nt)
    {
        double *pg = sums ? part + 2 * (size_t)t * C : NULL, *pb = pg ? pg + C : NULL;
        for (int c = 0; sums && c < C; c++) pg[c] = pb[c] = 0.0;
        const int64_t u1 = units * (t + 1) / nt;
        for (int64_t u = units * t / nt; u < u1; u++) {
            const int64_t b = u / d->groups;
            const int g = (int)(u % d->groups);
            const float mu = stats[2 * u], inv = stats[2 * u + 1];
            double sg = 0.0, sgu = 0.0;
            for (int64_t o = 0; o < d->outer; o++) {
                const int64_t at = run_at(d, b, g, o);
                for (int k = 0; k < d->cg; k++) {
                    const int c = g * d->cg + k;
                    const float gm = gamma ? gamma[c] : 1.0f;
                    const float *xr = x + at + k * inner, *gr = dy + at + k * inner;
                    double cgu = 0.0, cb = 0.0; /* channel c's sum dy u and sum dy here */
#pragma omp simd reduction(+ : cgu, cb)
                    for (int64_t i = 0; i < inner; i++) {
                        const float uu = (xr[i] - mu) * inv;
                        cb += gr[i];
                        cgu += (double)gr[i] * uu;
                    }
                    sg += cb * gm, sgu += cgu * gm;
                    if (sums) pg[c] += cgu, pb[c] += cb;
                }
            }
            if (!dx) continue;
            const float mg = (float)(sg / m), mgu = (float)(sgu / m);
            for (int64_t o = 0; o < d->outer; o++) {
                const int64_t at = run_at(d, b, g, o);
                for (int k = 0; k < d->cg; k++) {
                    const float gm = gamma ? gamma[g * d->cg + k] : 1.0f;
                    const float *xr = x + at + k * inner, *gr = dy + at + k * inner;
                    float *dr = dx + at + k * inner;
                    if (assign) {
#pragma omp simd
                        for (int64_t i = 0; i < inner; i++)
                            dr[i] = inv * (gr[i] * gm - mg - (xr[i] - mu) * inv * mgu);
                    } else {
#pragma omp simd
                        for (int64_t i = 0; i < inner; i++)
                            dr[i] += inv * (gr[i] * gm - mg - (xr[i] - mu) * inv * mgu);
                    }
                }
            }
        }
    }
    if (!sums) return;
    for (int c = 0; c < C; c++) {
        double sg = 0.0, sb = 0.0;
        for (int t = 0; t < nt; t++) {
            sg += part[2 * (size_t)t * C + c];
            sb += part[(2 * (size_t)t + 1) * C + c];
        }
        if (dgamma) dgamma[c] += (float)sg;
        if (dbeta) dbeta[c] += (float)sb;
    }
}
