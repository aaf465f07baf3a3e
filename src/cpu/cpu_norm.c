/* CPU batch normalisation over rows (n*h*w) per channel (cols). Statistics accumulate in
 * double, in one pass over x shifted by its first row (no E[x^2] - E[x]^2 cancellation).
 * Channels go in blocks of COL_BLOCK so each thread's partial sums fit on its stack. */
#include "cpu/cpu_internal.h"

#define COL_BLOCK 256

/* y[r, c0 + j] = x[r, c0 + j] * a[j] + b[j] for j < cb, or its ReLU (as act_forward's:
 * v < 0 ? 0 : v): the map both forwards end in. */
static void affine(const tfc_backend *be, int64_t rows, int cols, int c0, int cb,
                   const float *x, const float *a, const float *b, int relu, float *y)
{
    int nt = tfc_cpu_threads(be, rows * cb);
    TFC_CPU_FOR(rows, nt, for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols + c0;
        float *yr = y + r * cols + c0;
        if (relu) {
            _Pragma("omp simd")
            for (int j = 0; j < cb; j++) {
                float v = xr[j] * a[j] + b[j];
                yr[j] = v < 0.0f ? 0.0f : v;
            }
        } else {
            _Pragma("omp simd")
            for (int j = 0; j < cb; j++) yr[j] = xr[j] * a[j] + b[j];
        }
    });
}

/* Training: mean = sum x / rows, var = sum (x - mean)^2 / rows (biased), invstd =
 * 1 / sqrt(var + eps), y = act(gamma (x - mean) invstd + beta); the moving statistics become
 * momentum * moving + (1 - momentum) * batch. */
TFC_CPU_VECTOR
void tfc_cpu_bn_forward_train(tfc_backend *be, int64_t rows, int cols, const float *x,
                              const float *gamma, const float *beta, float eps, float momentum,
                              float *moving_mean, float *moving_var, float *y, float *save_mean,
                              float *save_invstd, tfc_act act)
{
    TFC_ASSERT(act == TFC_ACT_LINEAR || act == TFC_ACT_RELU);
    if (rows <= 0) return;
    for (int c0 = 0; c0 < cols; c0 += COL_BLOCK) {
        int cb = cols - c0 < COL_BLOCK ? cols - c0 : COL_BLOCK;
        int nt = tfc_cpu_threads(be, rows * cb);
        double part[TFC_REDUCE_THREADS][COL_BLOCK], sq2[TFC_REDUCE_THREADS][COL_BLOCK];
        double var[COL_BLOCK], mean[COL_BLOCK];
        if (nt > TFC_REDUCE_THREADS) nt = TFC_REDUCE_THREADS;
        const int T = nt;
        /* sums of d = x - x[0] and of d^2 in one pass over x, in fixed shares
         * (cpu_internal.h); var = E[d^2] - E[d]^2. Shifted by the first row, the subtraction
         * cancels only (x[0] - mean)^2 / var + 1 times var's magnitude (not E[x^2]'s), and
         * in double: a relative error of ~1e-16 times that, 1e-10 for a first row a thousand
         * deviations off the mean. */
        float shift[COL_BLOCK];
        for (int j = 0; j < cb; j++) shift[j] = x[c0 + j];
#pragma omp parallel num_threads(tfc_cpu_team(nt))
        TFC_CPU_SHARES(t, nt)
        {
            double *sum = part[t], *s2 = sq2[t];
            for (int j = 0; j < cb; j++) sum[j] = s2[j] = 0.0;
            for (int64_t r = rows * t / T; r < rows * (t + 1) / T; r++) {
                const float *xr = x + r * cols + c0;
#pragma omp simd
                for (int j = 0; j < cb; j++) {
                    double dv = (double)xr[j] - (double)shift[j];
                    sum[j] += dv;
                    s2[j] += dv * dv;
                }
            }
        }
        for (int t = 1; t < nt; t++)
            for (int j = 0; j < cb; j++) part[0][j] += part[t][j], sq2[0][j] += sq2[t][j];
        for (int j = 0; j < cb; j++) {
            double md = part[0][j] / (double)rows, v = sq2[0][j] / (double)rows - md * md;
            mean[j] = (double)shift[j] + md;
            var[j] = v > 0.0 ? v : 0.0;
        }
        float a[COL_BLOCK], b[COL_BLOCK];
        for (int j = 0; j < cb; j++) {
            int c = c0 + j;
            double invstd = 1.0 / sqrt(var[j] + (double)eps);
            save_mean[c] = (float)mean[j];
            save_invstd[c] = (float)invstd;
            moving_mean[c] = momentum * moving_mean[c] + (1.0f - momentum) * (float)mean[j];
            moving_var[c] = momentum * moving_var[c] + (1.0f - momentum) * (float)var[j];
            a[j] = (float)(gamma[c] * invstd);
            b[j] = (float)(beta[c] - mean[j] * gamma[c] * invstd);
        }
        affine(be, rows, cols, c0, cb, x, a, b, act == TFC_ACT_RELU, y);
    }
}

/* Inference: y = gamma (x - moving_mean) / sqrt(moving_var + eps) + beta. */
void tfc_cpu_bn_forward_infer(tfc_backend *be, int64_t rows, int cols, const float *x,
                              const float *gamma, const float *beta, const float *moving_mean,
                              const float *moving_var, float eps, float *y)
{
    for (int c0 = 0; c0 < cols; c0 += COL_BLOCK) {
        int cb = cols - c0 < COL_BLOCK ? cols - c0 : COL_BLOCK;
        float a[COL_BLOCK], b[COL_BLOCK];
        for (int j = 0; j < cb; j++) {
            int c = c0 + j;
            double s = gamma[c] / sqrt((double)moving_var[c] + (double)eps);
            a[j] = (float)s;
            b[j] = (float)(beta[c] - moving_mean[c] * s);
        }
        affine(be, rows, cols, c0, cb, x, a, b, 0, y);
    }
}

/* With xhat = (x - mean) invstd and N = rows:
 *   dbeta += sum dy,  dgamma += sum dy xhat,
 *   dx += gamma invstd (dy - mean(dy) - xhat mean(dy xhat))   (= with assign)
 * (the batch statistics' own dependence on x gives the two mean terms). */
TFC_CPU_VECTOR
void tfc_cpu_bn_backward(tfc_backend *be, int64_t rows, int cols, const float *x,
                         const float *dy, const float *gamma, const float *save_mean,
                         const float *save_invstd, float *dx, float *dgamma, float *dbeta,
                         int assign)
{
    if (rows <= 0) return;
    for (int c0 = 0; c0 < cols; c0 += COL_BLOCK) {
        int cb = cols - c0 < COL_BLOCK ? cols - c0 : COL_BLOCK;
        int nt = tfc_cpu_threads(be, rows * cb);
        const float *mean = save_mean + c0, *invstd = save_invstd + c0;
        double part[TFC_REDUCE_THREADS][2][COL_BLOCK], sdy[COL_BLOCK], sdyx[COL_BLOCK];
        if (nt > TFC_REDUCE_THREADS) nt = TFC_REDUCE_THREADS;
        const int T = nt;
#pragma omp parallel num_threads(tfc_cpu_team(nt)) /* fixed shares, added in order */
        TFC_CPU_SHARES(t, nt)
        {
            double *a = part[t][0], *b = part[t][1];
            for (int j = 0; j < cb; j++) a[j] = b[j] = 0.0;
            for (int64_t r = rows * t / T; r < rows * (t + 1) / T; r++) {
                const float *xr = x + r * cols + c0, *gr = dy + r * cols + c0;
#pragma omp simd
                for (int j = 0; j < cb; j++) {
                    a[j] += gr[j];
                    b[j] += (double)gr[j] * ((xr[j] - mean[j]) * invstd[j]);
                }
            }
        }
        for (int j = 0; j < cb; j++) sdy[j] = part[0][0][j], sdyx[j] = part[0][1][j];
        for (int t = 1; t < nt; t++)
            for (int j = 0; j < cb; j++) sdy[j] += part[t][0][j], sdyx[j] += part[t][1][j];
        float k[COL_BLOCK], mdy[COL_BLOCK], mdyx[COL_BLOCK];
        for (int j = 0; j < cb; j++) {
            int c = c0 + j;
            dbeta[c] += (float)sdy[j];
            dgamma[c] += (float)sdyx[j];
            k[j] = gamma[c] * invstd[j];
            mdy[j] = (float)(sdy[j] / (double)rows);
            mdyx[j] = (float)(sdyx[j] / (double)rows);
        }
#pragma omp parallel for TFC_CPU_STATIC(rows, nt)
        for (int64_t r = 0; r < rows; r++) {
            const float *xr = x + r * cols + c0, *gr = dy + r * cols + c0;
            float *dr = dx + r * cols + c0;
            if (assign) {
#pragma omp simd
                for (int j = 0; j < cb; j++) {
                    float xhat = (xr[j] - mean[j]) * invstd[j];
                    dr[j] = k[j] * (gr[j] - mdy[j] - xhat * mdyx[j]);
                }
            } else {
#pragma omp simd
                for (int j = 0; j < cb; j++) {
                    float xhat = (xr[j] - mean[j]) * invstd[j];
                    dr[j] += k[j] * (gr[j] - mdy[j] - xhat * mdyx[j]);
                }
            }
        }
    }
}
