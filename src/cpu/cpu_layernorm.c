/* CPU normalisation of rows (LayerNormalization, RMSNormalization; tfc_layernorm_desc in
 * core/backend.h). Rows are independent, so the forward splits them among threads freely;
 * the backward's sums over rows (dgamma, dbeta) go through fixed shares of rows whose partial
 * sums are added in share order (cpu_internal.h), so they depend on the backend's thread
 * count only. Each row is read once for its statistics and once more, from cache, to write. */
#include "cpu/cpu_internal.h"

/* A row's mu and invstd (the contract's). The sums run in double over x shifted by the row's
 * first value when centring: in float, a row of 4096 values with a mean a hundred deviations
 * off zero would lose the variance's leading digits to E[x^2] - E[x]^2 cancellation and
 * accumulate ~1e-4 relative rounding; shifted, the subtraction cancels only about
 * ((x[0] - mean)^2 / var + 1) times var's magnitude, in double's 1e-16. */
TFC_CPU_VECTOR
static void row_stats(const float *x, int cols, int center_stats, float eps, float *mu,
                      float *invstd)
{
    const double shift = center_stats ? x[0] : 0.0;
    double s = 0.0, s2 = 0.0;
#pragma omp simd reduction(+ : s, s2)
    for (int j = 0; j < cols; j++) {
        double d = (double)x[j] - shift;
        s += d;
        s2 += d * d;
    }
    double md = s / cols, var = center_stats ? s2 / cols - md * md : s2 / cols;
    if (var < 0.0) var = 0.0;
    *mu = center_stats ? (float)(shift + md) : 0.0f;
    *invstd = (float)(1.0 / sqrt(var + (double)eps));
}

/* The loops below take whether gamma and beta exist (G, B) and whether dx is written or
 * added to (A) as constants of their inlined copies: such a test inside the loop kept GCC
 * from vectorising it (scalar code, 3.5% of fortunes_gpt's batch-1 call in the forward
 * alone, perf). */
#define ROW_INLINE static inline __attribute__((always_inline))

/* y = u [gamma] + [beta] (0 without), u = (x - c) invstd. */
ROW_INLINE void scale_row(const float *xr, float *yr, int cols, float c, float inv,
                          const float *gamma, const float *beta, const int G, const int B)
{
#pragma omp simd
    for (int j = 0; j < cols; j++) {
        float u = (xr[j] - c) * inv;
        yr[j] = (G ? u * gamma[j] : u) + (B ? beta[j] : 0.0f);
    }
}

/* Per row: mu, invstd from row_stats, c = center ? mu : 0, u = (x - c) invstd,
 * y = u gamma + beta. */
TFC_CPU_VECTOR
void tfc_cpu_layernorm_forward(tfc_backend *be, const tfc_layernorm_desc *d, const float *x,
                               const float *gamma, const float *beta, float *y, float *stats)
{
    TFC_ASSERT(!d->center || d->center_stats);
    const int cols = d->cols;
    int nt = tfc_cpu_threads(be, d->rows * cols);
    TFC_CPU_FOR(d->rows, nt, for (int64_t r = 0; r < d->rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float mu, inv;
        row_stats(xr, cols, d->center_stats, d->eps, &mu, &inv);
        if (stats) stats[2 * r] = mu, stats[2 * r + 1] = inv;
        const float c = d->center ? mu : 0.0f;
        if (gamma && beta)
            scale_row(xr, yr, cols, c, inv, gamma, beta, 1, 1);
        else if (gamma)
            scale_row(xr, yr, cols, c, inv, gamma, beta, 1, 0);
        else if (beta)
            scale_row(xr, yr, cols, c, inv, gamma, beta, 0, 1);
        else
            scale_row(xr, yr, cols, c, inv, gamma, beta, 0, 0);
    });
}

/* The shares of the backward's sums over rows: partial dgamma and dbeta in double, cols each
 * per share. */
static int backward_shares(const tfc_backend *be, const tfc_layernorm_desc *d)
{
    return tfc_cpu_reduce_threads(be, d->rows * d->cols);
}

size_t tfc_cpu_layernorm_workspace(tfc_backend *be, const tfc_layernorm_desc *d)
{
    return (size_t)backward_shares(be, d) * 2 * (size_t)d->cols * sizeof(double);
}

/* Row r's dx, with g = dy [gamma] (G), u = (x - c) invstd, v = (x - mu) invstd (u = v
 * unless only the statistics are centred): one pass for sum g and sum g u, one (from cache)
 * that writes (A) or adds
 *   dx = invstd (g - [center] sum g / cols - v sum(g u) / cols). */
ROW_INLINE void dx_row(const tfc_layernorm_desc *d, const float *xr, const float *gr,
                       const float *gamma, float c, float mu, float inv, float *dr, const int A,
                       const int G)
{
    const int cols = d->cols;
    double sg = 0.0, sgu = 0.0;
#pragma omp simd reduction(+ : sg, sgu)
    for (int j = 0; j < cols; j++) {
        float g = G ? gr[j] * gamma[j] : gr[j];
        sg += g;
        sgu += (double)g * ((xr[j] - c) * inv);
    }
    const float mg = d->center ? (float)(sg / cols) : 0.0f;
    const float mgu = (float)(sgu / cols);
#pragma omp simd
    for (int j = 0; j < cols; j++) {
        float g = G ? gr[j] * gamma[j] : gr[j];
        float dv = inv * (g - mg - (xr[j] - mu) * inv * mgu);
        dr[j] = A ? dv : dr[j] + dv;
    }
}

/* Per row dx_row; then dy u and dy added into the share's partial dgamma and dbeta, four
 * rows at a time (their terms summed in registers, then added to the partials once: a row at
 * a time, the partials' loads and stores bound the loop). The shares' partials are then
 * added in share order. */
TFC_CPU_VECTOR
void tfc_cpu_layernorm_backward(tfc_backend *be, const tfc_layernorm_desc *d, const float *x,
                                const float *dy, const float *gamma, const float *stats,
                                float *dx, float *dgamma, float *dbeta, int assign, void *ws)
{
    const int cols = d->cols, nt = backward_shares(be, d);
    const int64_t rows = d->rows;
    double *part = ws; /* share t: dgamma's partial at part[2 t cols], dbeta's after it */
    const int sums = dgamma || dbeta;
    TFC_ASSERT(!sums || part);
#pragma omp parallel num_threads(tfc_cpu_team(nt))
    TFC_CPU_SHARES(t, nt)
    {
        double *pg = sums ? part + 2 * (size_t)t * cols : NULL, *pb = pg ? pg + cols : NULL;
        for (int j = 0; sums && j < cols; j++) pg[j] = pb[j] = 0.0;
        const int64_t r1 = rows * (t + 1) / nt;
        for (int64_t r = rows * t / nt; r < r1; r++) {
            const float mu = stats[2 * r], inv = stats[2 * r + 1];
            const float c = d->center ? mu : 0.0f;
            const float *xr = x + r * cols, *gr = dy + r * cols;
            float *dr = dx ? dx + r * cols : NULL;
            if (dr && assign && gamma)
                dx_row(d, xr, gr, gamma, c, mu, inv, dr, 1, 1);
            else if (dr && assign)
                dx_row(d, xr, gr, gamma, c, mu, inv, dr, 1, 0);
            else if (dr && gamma)
                dx_row(d, xr, gr, gamma, c, mu, inv, dr, 0, 1);
            else if (dr)
                dx_row(d, xr, gr, gamma, c, mu, inv, dr, 0, 0);
        }
        for (int64_t r = rows * t / nt; sums && r < r1;) {
            const int n = r1 - r >= 4 ? 4 : 1; /* rows in this group */
            float cs[4], ci[4];
            for (int i = 0; i < n; i++)
                ci[i] = stats[2 * (r + i) + 1], cs[i] = d->center ? stats[2 * (r + i)] : 0.0f;
            const float *x0 = x + r * cols, *g0 = dy + r * cols;
            if (n == 4) {
                const float *x1 = x0 + cols, *x2 = x1 + cols, *x3 = x2 + cols;
                const float *g1 = g0 + cols, *g2 = g1 + cols, *g3 = g2 + cols;
#pragma omp simd
                for (int j = 0; j < cols; j++) {
                    pg[j] += ((double)g0[j] * ((x0[j] - cs[0]) * ci[0]) +
                              (double)g1[j] * ((x1[j] - cs[1]) * ci[1])) +
                             ((double)g2[j] * ((x2[j] - cs[2]) * ci[2]) +
                              (double)g3[j] * ((x3[j] - cs[3]) * ci[3]));
                    pb[j] += ((double)g0[j] + g1[j]) + ((double)g2[j] + g3[j]);
                }
            } else {
#pragma omp simd
                for (int j = 0; j < cols; j++) {
                    pg[j] += (double)g0[j] * ((x0[j] - cs[0]) * ci[0]);
                    pb[j] += g0[j];
                }
            }
            r += n;
        }
    }
    if (!sums) return;
    for (int j = 0; j < cols; j++) {
        double sg = 0.0, sb = 0.0;
        for (int t = 0; t < nt; t++) {
            sg += part[2 * (size_t)t * cols + j];
            sb += part[(2 * (size_t)t + 1) * cols + j];
        }
        if (dgamma) dgamma[j] += (float)sg;
        if (dbeta) dbeta[j] += (float)sb;
    }
}
