/* CPU group normalisation (GroupNormalization; tfc_groupnorm_desc in core/backend.h). The
 * unit of work is one example's group: its m = outer cg inner values lie in `outer` runs of
 * cg inner contiguous floats, one run per position before the channel axis. Channels last
 * (inner 1) with small groups, those runs are a few floats each: there the unit is a block of
 * consecutive groups of up to BLOCK channels, whose runs make one contiguous segment per
 * position, read as a row with per-channel sums (32x32x64 images in 32 groups, a batch of 16
 * on two threads, tfc-time: forward 10 ms group by group, 0.33 ms in blocks; backward without
 * dx 10.6 ms, 0.28 ms). Units are independent, so the forward splits them among threads
 * freely; the backward's per-channel sums (dgamma, dbeta) go through fixed shares of units
 * whose partial sums are added in share order (cpu_internal.h), so they depend on the
 * backend's thread count only. */
#include "cpu/cpu_internal.h"

enum { BLOCK = 256 }; /* the channels of a block unit at most */

/* Groups per block unit: BLOCK / cg (at most every group) channels last, 0 for the per-group
 * units (inner > 1, or groups of more than BLOCK channels). */
static int block_groups(const tfc_groupnorm_desc *d)
{
    if (d->inner != 1 || d->cg > BLOCK) return 0;
    return BLOCK / d->cg < d->groups ? BLOCK / d->cg : d->groups;
}

/* The units: examples times blocks (or groups). */
static int64_t units_of(const tfc_groupnorm_desc *d)
{
    const int bg = block_groups(d);
    return d->n * (bg ? (d->groups + bg - 1) / bg : d->groups);
}

/* Block unit u: its example *b, first group *g0 and group count *ng. */
static void block_of(const tfc_groupnorm_desc *d, int64_t u, int64_t *b, int *g0, int *ng)
{
    const int bg = block_groups(d), per = (d->groups + bg - 1) / bg;
    *b = u / per;
    *g0 = (int)(u % per) * bg;
    *ng = d->groups - *g0 < bg ? d->groups - *g0 : bg;
}

/* Block unit (b, g0, ng)'s statistics into mu[g], inv[g] (g from 0), summed per channel in
 * double over x shifted by each group's first value, then per group in channel order. */
TFC_CPU_VECTOR
static void block_stats(const tfc_groupnorm_desc *d, const float *x, int64_t b, int g0, int ng,
                        float *mu, float *inv)
{
    const int C = d->groups * d->cg, cg = d->cg, nc = ng * cg;
    const float *x0 = x + b * d->outer * C + (int64_t)g0 * cg;
    double s[BLOCK], s2[BLOCK], shift[BLOCK];
    for (int j = 0; j < nc; j++) s[j] = s2[j] = 0.0, shift[j] = x0[j / cg * cg];
    for (int64_t o = 0; o < d->outer; o++) {
        const float *xr = x0 + o * C;
#pragma omp simd
        for (int j = 0; j < nc; j++) {
            double v = (double)xr[j] - shift[j];
            s[j] += v;
            s2[j] += v * v;
        }
    }
    const double m = (double)(d->outer * cg);
    for (int g = 0; g < ng; g++) {
        double sg = 0.0, sg2 = 0.0;
        for (int k = 0; k < cg; k++) sg += s[g * cg + k], sg2 += s2[g * cg + k];
        double md = sg / m, var = sg2 / m - md * md;
        if (var < 0.0) var = 0.0;
        mu[g] = (float)(shift[g * cg] + md);
        inv[g] = (float)(1.0 / sqrt(var + (double)d->eps));
    }
}

/* Block unit u's forward: y = (x - mu) sc + sh with per-channel mu, sc = gamma invstd and
 * sh = beta. */
TFC_CPU_VECTOR
static void block_forward(const tfc_groupnorm_desc *d, const float *x, int64_t u,
                          const float *gamma, const float *beta, float *y, float *stats)
{
    int64_t b;
    int g0, ng;
    block_of(d, u, &b, &g0, &ng);
    const int C = d->groups * d->cg, cg = d->cg, nc = ng * cg, c0 = g0 * cg;
    float mu[BLOCK], inv[BLOCK], muc[BLOCK], sc[BLOCK], sh[BLOCK];
    block_stats(d, x, b, g0, ng, mu, inv);
    for (int g = 0; stats && g < ng; g++) {
        stats[2 * (b * d->groups + g0 + g)] = mu[g];
        stats[2 * (b * d->groups + g0 + g) + 1] = inv[g];
    }
    for (int j = 0; j < nc; j++) {
        muc[j] = mu[j / cg];
        sc[j] = gamma ? gamma[c0 + j] * inv[j / cg] : inv[j / cg];
        sh[j] = beta ? beta[c0 + j] : 0.0f;
    }
    for (int64_t o = 0; o < d->outer; o++) {
        const int64_t at = (b * d->outer + o) * C + c0;
        const float *xr = x + at;
        float *yr = y + at;
#pragma omp simd
        for (int j = 0; j < nc; j++) yr[j] = (xr[j] - muc[j]) * sc[j] + sh[j];
    }
}

/* Block unit u's backward: per channel sum dy and sum dy u (into the share's partials pg, pb
 * when not NULL), per group sum g and sum g u from them, then dx written (assign) or added. */
TFC_CPU_VECTOR
static void block_backward(const tfc_groupnorm_desc *d, const float *x, const float *dy,
                           const float *gamma, const float *stats, int64_t u, float *dx,
                           double *pg, double *pb, int assign)
{
    int64_t b;
    int g0, ng;
    block_of(d, u, &b, &g0, &ng);
    const int C = d->groups * d->cg, cg = d->cg, nc = ng * cg, c0 = g0 * cg;
    const double m = (double)(d->outer * cg);
    double cb[BLOCK], cgu[BLOCK];
    float muc[BLOCK], invc[BLOCK], gm[BLOCK], mgc[BLOCK], mguc[BLOCK];
    for (int j = 0; j < nc; j++) {
        const int64_t gi = b * d->groups + g0 + j / cg;
        muc[j] = stats[2 * gi], invc[j] = stats[2 * gi + 1];
        gm[j] = gamma ? gamma[c0 + j] : 1.0f;
        cb[j] = cgu[j] = 0.0;
    }
    for (int64_t o = 0; o < d->outer; o++) {
        const int64_t at = (b * d->outer + o) * C + c0;
        const float *xr = x + at, *gr = dy + at;
#pragma omp simd
        for (int j = 0; j < nc; j++) {
            cb[j] += gr[j];
            cgu[j] += (double)gr[j] * ((xr[j] - muc[j]) * invc[j]);
        }
    }
    for (int j = 0; pg && j < nc; j++) pg[c0 + j] += cgu[j], pb[c0 + j] += cb[j];
    if (!dx) return;
    for (int g = 0; g < ng; g++) {
        double sg = 0.0, sgu = 0.0;
        for (int k = 0; k < cg; k++) {
            const int j = g * cg + k;
            sg += cb[j] * gm[j], sgu += cgu[j] * gm[j];
        }
        for (int k = 0; k < cg; k++)
            mgc[g * cg + k] = (float)(sg / m), mguc[g * cg + k] = (float)(sgu / m);
    }
    for (int64_t o = 0; o < d->outer; o++) {
        const int64_t at = (b * d->outer + o) * C + c0;
        const float *xr = x + at, *gr = dy + at;
        float *dr = dx + at;
        if (assign) {
#pragma omp simd
            for (int j = 0; j < nc; j++)
                dr[j] = invc[j] * (gr[j] * gm[j] - mgc[j] - (xr[j] - muc[j]) * invc[j] *
                                                                mguc[j]);
        } else {
#pragma omp simd
            for (int j = 0; j < nc; j++)
                dr[j] += invc[j] * (gr[j] * gm[j] - mgc[j] - (xr[j] - muc[j]) * invc[j] *
                                                                 mguc[j]);
        }
    }
}

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
    const int64_t units = units_of(d);
    const int nt = tfc_cpu_threads(be, d->n * d->outer * d->groups * d->cg * d->inner);
    if (block_groups(d)) {
        TFC_CPU_FOR(units, nt, for (int64_t u = 0; u < units; u++) {
            block_forward(d, x, u, gamma, beta, y, stats);
        });
        return;
    }
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
    const int64_t units = units_of(d), inner = d->inner;
    const int blocks = block_groups(d) > 0;
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
        for (int64_t u = units * t / nt; blocks && u < u1; u++)
            block_backward(d, x, dy, gamma, stats, u, dx, pg, pb, assign);
        for (int64_t u = units * t / nt; !blocks && u < u1; u++) {
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
