/* CPU LSTM over a whole sequence (Keras's formulation, gates i, f, c, o; see backend.h).
 * Forward: one GEMM x·K for every step at once straight into `gates`, then per step one
 * GEMM h_{t-1}·R added into that step's slice and the element-wise cell. Backward walks
 * the steps in reverse computing dgates (and dh_{t-1} = dgates·Rᵀ per step); dkernel,
 * drkernel, dbias and dx are then one GEMM (or reduction) each over all n·t rows.
 * The sequences of a batch never meet in the recurrence, so they go through all t steps in
 * blocks of a few rows inside one parallel region, each block claimed by whichever thread is
 * free: no barrier per step, which on a busy machine would make every step wait for the most
 * descheduled thread, and a descheduled thread simply takes fewer blocks (docs/cpu.md).
 * dbias is summed per block inside the backward region, while dgates is still in cache.
 * The per-step GEMMs run on the recurrent kernel packed once per pass (cpu_panel.c), since
 * OpenBLAS would re-pack all of it for each thread's few rows at every step. */
#include "cpu/cpu_internal.h"

/* Floats, rounded up to a 64-byte multiple so every workspace piece stays aligned. */
static size_t padded(int64_t floats)
{
    return (size_t)((floats + 15) & ~(int64_t)15);
}

/* Workspace layout (floats): dgates [n*t, 4u], hprev [n*t, u], dh [n, u], dc [n, u],
 * zero [u] (the h_0 = c_0 = 0 row), packed: the recurrent kernel R [u, 4u] packed for the
 * forward GEMM, or Rᵀ for the backward one; dbias: a double [4u] per block of sequences. */
typedef struct lstm_ws {
    float *dgates, *hprev, *dh, *dc, *zero, *packed;
    double *dbias;
} lstm_ws;

/* Threads for the recurrence: at least LSTM_ROWS_PER_THREAD sequences each (a GEMM on
 * fewer rows wastes most of its register tile), and one when the recurrent GEMMs have fewer
 * than LSTM_PAR_MIN_MACS multiply-adds in all (about 0.1 ms on one core: less than waking a
 * team costs and risks on a busy machine). */
#define LSTM_ROWS_PER_THREAD 4
#define LSTM_PAR_MIN_MACS ((int64_t)1 << 20)

static int team(const tfc_backend *be, const tfc_lstm_desc *d)
{
    int64_t macs = (int64_t)d->n * d->t * 4 * d->units * d->units;
    int nt = macs >= LSTM_PAR_MIN_MACS ? be->threads : 1;
    int most = d->n / LSTM_ROWS_PER_THREAD;
    if (nt > most) nt = most;
    return nt < 1 ? 1 : nt;
}

/* Blocks of sequences: LSTM_BLOCK_ROWS rows each (the AVX-512 panel kernel's tile; the
 * last ones a few more), so that a thread that falls behind hands its share to the others,
 * but never fewer blocks than threads. The split depends on n and the thread count only,
 * so a run repeats bit for bit at a fixed thread count. */
#define LSTM_BLOCK_ROWS 8

static int blocks(const tfc_backend *be, const tfc_lstm_desc *d)
{
    int nb = d->n / LSTM_BLOCK_ROWS, nt = team(be, d);
    return nb > nt ? nb : nt;
}

/* Rows [r0, r1) of n in block b of nb. */
static void block_rows(int n, int b, int nb, int *r0, int *r1)
{
    *r0 = (int)((int64_t)n * b / nb);
    *r1 = (int)((int64_t)n * (b + 1) / nb);
}

static int64_t packed_floats(const tfc_lstm_desc *d)
{
    size_t f = tfc_cpu_panels_floats(d->units, 4 * d->units);
    size_t b = tfc_cpu_panels_floats(4 * d->units, d->units);
    return (int64_t)(f > b ? f : b);
}

static lstm_ws carve(const tfc_lstm_desc *d, void *ws)
{
    const int64_t nt = (int64_t)d->n * d->t, u = d->units;
    lstm_ws w;
    w.dgates = ws;
    w.hprev = w.dgates + padded(nt * 4 * u);
    w.dh = w.hprev + padded(nt * u);
    w.dc = w.dh + padded((int64_t)d->n * u);
    w.zero = w.dc + padded((int64_t)d->n * u);
    w.packed = w.zero + padded(u);
    w.dbias = (double *)(w.packed + padded(packed_floats(d)));
    return w;
}

size_t tfc_cpu_lstm_workspace(tfc_backend *be, const tfc_lstm_desc *d)
{
    const int64_t nt = (int64_t)d->n * d->t, u = d->units;
    return (padded(nt * 4 * u) + padded(nt * u) + 2 * padded((int64_t)d->n * u) + padded(u) +
            padded(packed_floats(d))) *
               sizeof(float) +
           (size_t)blocks(be, d) * 4 * u * sizeof(double);
}

/* One step of one sequence. z [4u]: pre-activations in, activations i, f, g, o out.
 *   c = f c_prev + i g,  h = o tanh(c);  a masked step (m == 0) keeps c_prev and h_prev. */
TFC_VECTOR512
static void cell_forward(int u, float *z, const float *hp, const float *cp, float m, float *h,
                         float *c)
{
#pragma omp simd
    for (int j = 0; j < u; j++) {
        float ig = tfc_cpu_sigmoidf(z[j]);
        float fg = tfc_cpu_sigmoidf(z[u + j]);
        float gg = tfc_cpu_tanhf(z[2 * u + j]);
        float og = tfc_cpu_sigmoidf(z[3 * u + j]);
        z[j] = ig;
        z[u + j] = fg;
        z[2 * u + j] = gg;
        z[3 * u + j] = og;
        float cn = fg * cp[j] + ig * gg;
        float hn = og * tfc_cpu_tanhf(cn);
        c[j] = tfc_cpu_select(m != 0.0f, cn, cp[j]);
        h[j] = tfc_cpu_select(m != 0.0f, hn, hp[j]);
    }
}

/* x [n, t, in], kernel [in, 4u], rkernel [u, 4u], bias [4u] or NULL (no bias), mask
 * [n, t] or NULL; y [n, t, u] (may be hseq itself) or [n, u]; hseq, cseq [n, t, u];
 * gates [n, t, 4u]. */
void tfc_cpu_lstm_forward(tfc_backend *be, const tfc_lstm_desc *d, const float *x,
                          const float *kernel, const float *rkernel, const float *bias,
                          const float *mask, float *y, float *hseq, float *cseq, float *gates,
                          void *ws)
{
    const int n = d->n, T = d->t, u = d->units, G = 4 * u;
    if (n <= 0 || T <= 0 || u <= 0) return;
    lstm_ws w = carve(d, ws);
    memset(w.zero, 0, (size_t)u * sizeof(float));
    tfc_cpu_gemm(be, 0, 0, n * T, G, d->in, 1.0f, x, d->in, kernel, G, 0.0f, gates, G);
    if (bias) tfc_cpu_bias_add(be, (int64_t)n * T, G, bias, gates);
    if (T > 1) tfc_cpu_pack_panels(u, G, rkernel, G, 0, w.packed);
    const int nt = team(be, d), nb = blocks(be, d);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int b = 0; b < nb; b++) {
        int r0, r1;
        block_rows(n, b, nb, &r0, &r1);
        for (int s = 0; s < T && r1 > r0; s++) {
            if (s > 0) /* gates_s += h_{s-1} · R */
                tfc_cpu_gemm_panels(r1 - r0, G, u, hseq + ((int64_t)r0 * T + s - 1) * u, T * u,
                                    w.packed, gates + ((int64_t)r0 * T + s) * G, T * G);
            for (int i = r0; i < r1; i++) {
                int64_t row = (int64_t)i * T + s;
                const float *hp = s > 0 ? hseq + (row - 1) * u : w.zero;
                const float *cp = s > 0 ? cseq + (row - 1) * u : w.zero;
                float m = mask ? mask[row] : 1.0f;
                cell_forward(u, gates + row * G, hp, cp, m, hseq + row * u, cseq + row * u);
            }
        }
    }
    if (d->return_sequences) {
        if (y != hseq) memcpy(y, hseq, (size_t)n * T * u * sizeof(float));
    } else {
        for (int i = 0; i < n; i++)
            memcpy(y + (int64_t)i * u, hseq + ((int64_t)i * T + T - 1) * u,
                   (size_t)u * sizeof(float));
    }
}

/* One step of one sequence, in reverse. With tc = tanh(c):
 *   do = dh tc,  dc += dh o (1 - tc^2),  di = dc g,  dg = dc i,  df = dc c_prev,
 *   dc_prev = dc f,  and through the activations dz = (di i(1-i), df f(1-f), dg (1-g^2),
 *   do o(1-o)). dh is consumed (zeroed; the caller adds dgates·Rᵀ for the step before).
 * A masked step passes dh and dc through untouched and has zero dgates. */
TFC_VECTOR512
static void cell_backward(int u, const float *g, const float *c, const float *cp, float m,
                          float *dh, float *dc, float *dz)
{
    if (m == 0.0f) {
        memset(dz, 0, (size_t)4 * u * sizeof(float));
        return;
    }
#pragma omp simd
    for (int j = 0; j < u; j++) {
        float ig = g[j], fg = g[u + j], gg = g[2 * u + j], og = g[3 * u + j];
        float tc = tfc_cpu_tanhf(c[j]);
        float dog = dh[j] * tc;
        float dcj = dc[j] + dh[j] * og * (1.0f - tc * tc);
        dz[j] = dcj * gg * ig * (1.0f - ig);
        dz[u + j] = dcj * cp[j] * fg * (1.0f - fg);
        dz[2 * u + j] = dcj * ig * (1.0f - gg * gg);
        dz[3 * u + j] = dog * og * (1.0f - og);
        dc[j] = dcj * fg;
        dh[j] = 0.0f;
    }
}

/* sum[j] += row[j], j < g */
TFC_CPU_VECTOR
static void sum_row(int g, const float *row, double *sum)
{
#pragma omp simd
    for (int j = 0; j < g; j++) sum[j] += row[j];
}

/* dy [n, t, u] or [n, u]; dx [n, t, in] (NULL when the input needs no gradient), dkernel,
 * drkernel, dbias (NULL without bias) accumulate. */
void tfc_cpu_lstm_backward(tfc_backend *be, const tfc_lstm_desc *d, const float *x,
                           const float *kernel, const float *rkernel, const float *mask,
                           const float *hseq, const float *cseq, const float *gates,
                           const float *dy, float *dx, float *dkernel, float *drkernel,
                           float *dbias, void *ws)
{
    const int n = d->n, T = d->t, u = d->units, G = 4 * u;
    if (n <= 0 || T <= 0 || u <= 0) return;
    lstm_ws w = carve(d, ws);
    memset(w.zero, 0, (size_t)u * sizeof(float));
    memset(w.dh, 0, (size_t)n * u * sizeof(float));
    memset(w.dc, 0, (size_t)n * u * sizeof(float));
    if (T > 1) tfc_cpu_pack_panels(G, u, rkernel, G, 1, w.packed);
    const int nt = team(be, d), nb = blocks(be, d);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int b = 0; b < nb; b++) {
        int r0, r1;
        block_rows(n, b, nb, &r0, &r1);
        double *db = w.dbias + (int64_t)b * G;
        if (dbias) memset(db, 0, (size_t)G * sizeof(double));
        for (int s = T - 1; s >= 0 && r1 > r0; s--) {
            for (int i = r0; i < r1; i++) {
                int64_t row = (int64_t)i * T + s;
                float *dh = w.dh + (int64_t)i * u;
                const float *dyi = NULL;
                if (d->return_sequences) dyi = dy + row * u;
                else if (s == T - 1) dyi = dy + (int64_t)i * u;
                if (dyi) {
#pragma omp simd
                    for (int j = 0; j < u; j++) dh[j] += dyi[j];
                }
                const float *cp = s > 0 ? cseq + (row - 1) * u : w.zero;
                float m = mask ? mask[row] : 1.0f;
                cell_backward(u, gates + row * G, cseq + row * u, cp, m, dh,
                              w.dc + (int64_t)i * u, w.dgates + row * G);
                if (dbias && m != 0.0f) sum_row(G, w.dgates + row * G, db);
            }
            /* dh_{s-1} += dz_s · Rᵀ */
            if (s > 0)
                tfc_cpu_gemm_panels(r1 - r0, u, G, w.dgates + ((int64_t)r0 * T + s) * G, T * G,
                                    w.packed, w.dh + (int64_t)r0 * u, u);
        }
    }
    /* hprev[i, s] = h[i, s-1] (0 at s = 0), so drkernel += hprevᵀ · dgates in one GEMM. */
    for (int i = 0; i < n; i++) {
        float *hp = w.hprev + (int64_t)i * T * u;
        memset(hp, 0, (size_t)u * sizeof(float));
        memcpy(hp + u, hseq + (int64_t)i * T * u, (size_t)(T - 1) * u * sizeof(float));
    }
    tfc_cpu_gemm(be, 1, 0, u, G, n * T, 1.0f, w.hprev, u, w.dgates, G, 1.0f, drkernel, G);
    tfc_cpu_gemm(be, 1, 0, d->in, G, n * T, 1.0f, x, d->in, w.dgates, G, 1.0f, dkernel, G);
    if (dx)
        tfc_cpu_gemm(be, 0, 1, n * T, d->in, G, 1.0f, w.dgates, G, kernel, G, 1.0f, dx, d->in);
    if (dbias) /* the blocks' sums in block order */
        for (int c = 0; c < G; c++) {
            double sum = 0.0;
            for (int b = 0; b < nb; b++) sum += w.dbias[(int64_t)b * G + c];
            dbias[c] += (float)sum;
        }
}
