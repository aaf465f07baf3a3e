/* CPU GRU over a whole sequence (Keras's formulation, gates z, r, h; see backend.h).
 * Forward: x·K for every step at once, one GEMM into `gates`; then per step h_{t-1}·R (or,
 * reset_before, h_{t-1}·R_zr and (r h_{t-1})·R_h) on the kernels packed once per pass
 * (cpu_panel.c; on a frozen backend kept from call to call, tfc_cpu_kept), and the
 * element-wise cell. Backward walks the steps in reverse writing the
 * pre-activations' gradients gx (the input side, [n t, 3u]) and gm (the recurrent side,
 * stored one step back so that row i t + s pairs with h_s) and dh_{t-1} = dh z + gm·Rᵀ per
 * step; dkernel, drkernel and dx are then panel GEMMs over all n t rows, on column groups
 * and row chunks that do not depend on the thread count (as cpu_lstm.c's).
 * As in cpu_lstm.c, the sequences go through all steps in blocks of rows inside one
 * parallel region (tfc_cpu_rnn_split), and dbias is summed per block in double, then in
 * block order: the same bits at any thread count. */
#include "cpu/cpu_internal.h"

#include <omp.h>

/* Workspace layout (floats): gx [n t, 3u]; gm [n t, 3u]; dh [n, u]; zero [3u] (h_0 and a
 * missing bias); packed: R [u, 3u] (reset_after) or R_zr [u, 2u] then R_h [u, u] for the
 * forward GEMMs, Rᵀ [3u, u] or R_zrᵀ [2u, u] then R_hᵀ [u, u] for the backward ones; per
 * thread scratch rows [most, 4u] (h_{t-1}·R, then r h_{t-1} or its gradient); after the
 * recurrence, for the weight gradients: xᵀ, hseqᵀ and (reset_before) (r h_prev)ᵀ in panels of
 * 8 rows (TFC_PANEL_ROWS8, [in or u, n t]), gx, gm's z and r (or all) columns and
 * (reset_before) gx's h columns packed as panels of [n t, cols], and Kᵀ [3u, in] packed;
 * dbias: a double [6u] per block of sequences. */
typedef struct gru_ws {
    float *gx, *gm, *dh, *zero, *packed, *scratch, *x8, *h8, *a8, *pgx, *pgm, *pgh, *pkt;
    double *dbias;
} gru_ws;

static tfc_rnn_split split(const tfc_backend *be, const tfc_gru_desc *d)
{
    return tfc_cpu_rnn_split(be, d->n, (int64_t)d->n * d->t * 3 * d->units * d->units);
}

static int64_t packed_floats(const tfc_gru_desc *d)
{
    const int u = d->units;
    size_t f = d->reset_after ? tfc_cpu_panels_floats(u, 3 * u)
                              : tfc_cpu_panels_floats(u, 2 * u) + tfc_cpu_panels_floats(u, u);
    size_t b = d->reset_after ? tfc_cpu_panels_floats(3 * u, u)
                              : tfc_cpu_panels_floats(2 * u, u) + tfc_cpu_panels_floats(u, u);
    return (int64_t)(f > b ? f : b);
}

#define WS_PIECES 13

static void ws_floats(const tfc_backend *be, const tfc_gru_desc *d, int64_t f[WS_PIECES])
{
    const int64_t nt = (int64_t)d->n * d->t, u = d->units, rb = !d->reset_after;
    const tfc_rnn_split sp = split(be, d);
    f[0] = f[1] = nt * 3 * u;
    f[2] = (int64_t)d->n * u;
    f[3] = 3 * u;
    f[4] = packed_floats(d);
    f[5] = (int64_t)sp.threads * sp.most * 4 * u;
    f[6] = (d->in + 7) / 8 * 8 * nt;
    f[7] = (u + 7) / 8 * 8 * nt;
    f[8] = rb ? f[7] : 0;
    f[9] = (int64_t)tfc_cpu_panels_floats((int)nt, 3 * (int)u);
    f[10] = (int64_t)tfc_cpu_panels_floats((int)nt, (rb ? 2 : 3) * (int)u);
    f[11] = rb ? (int64_t)tfc_cpu_panels_floats((int)nt, (int)u) : 0;
    f[12] = (int64_t)tfc_cpu_panels_floats(3 * (int)u, d->in);
}

static gru_ws carve(const tfc_backend *be, const tfc_gru_desc *d, void *ws)
{
    int64_t f[WS_PIECES];
    ws_floats(be, d, f);
    float *p[WS_PIECES + 1];
    p[0] = ws;
    for (int i = 1; i <= WS_PIECES; i++) p[i] = p[i - 1] + tfc_cpu_padded(f[i - 1]);
    gru_ws w = {p[0], p[1], p[2], p[3], p[4],  p[5],  p[6],
                p[7], p[8], p[9], p[10], p[11], p[12], (double *)p[13]};
    return w;
}

size_t tfc_cpu_gru_workspace(tfc_backend *be, const tfc_gru_desc *d)
{
    int64_t f[WS_PIECES];
    ws_floats(be, d, f);
    size_t floats = 0;
    for (int i = 0; i < WS_PIECES; i++) floats += tfc_cpu_padded(f[i]);
    return floats * sizeof(float) + (size_t)split(be, d).blocks * 6 * d->units * sizeof(double);
}

/* One reset_after step of one sequence, units [j0, j1) of u (each unit's arithmetic its
 * own: any range gives it the same bits). g [4u]: x·K's three parts in, z, r, hh and
 * a = h_prev R_h + b'_h out; bx [3u] the input bias, mr [3u] h_prev R + b':
 *   z = σ(x_z + m_z), r = σ(x_r + m_r), hh = tanh(x_h + r a), h = z h_prev + (1 - z) hh;
 * a masked step (m == 0) keeps h_prev. */
TFC_VECTOR512
static void cell_after(int u, int j0, int j1, float *g, const float *bx, const float *mr,
                       const float *hp, float m, float *h)
{
#pragma omp simd
    for (int j = j0; j < j1; j++) {
        float z = tfc_cpu_sigmoidf(g[j] + bx[j] + mr[j]);
        float r = tfc_cpu_sigmoidf(g[u + j] + bx[u + j] + mr[u + j]);
        float a = mr[2 * u + j];
        float hh = tfc_cpu_tanhf(g[2 * u + j] + bx[2 * u + j] + r * a);
        g[j] = z, g[u + j] = r, g[2 * u + j] = hh, g[3 * u + j] = a;
        h[j] = tfc_cpu_select(m != 0.0f, z * hp[j] + (1.0f - z) * hh, hp[j]);
    }
}

/* reset_before, the gates: z, r from x·K, bx and mzr = h_prev R_zr [2u]; g's fourth part
 * and rh get r h_prev. */
TFC_VECTOR512
static void cell_gates(int u, float *g, const float *bx, const float *mzr, const float *hp,
                       float *rh)
{
#pragma omp simd
    for (int j = 0; j < u; j++) {
        float z = tfc_cpu_sigmoidf(g[j] + bx[j] + mzr[j]);
        float r = tfc_cpu_sigmoidf(g[u + j] + bx[u + j] + mzr[u + j]);
        g[j] = z, g[u + j] = r;
        g[3 * u + j] = rh[j] = r * hp[j];
    }
}

/* reset_before, the state: hh = tanh(x_h + b_h + mh), mh = (r h_prev) R_h; h as above. */
TFC_VECTOR512
static void cell_state(int u, float *g, const float *bx, const float *mh, const float *hp,
                       float m, float *h)
{
#pragma omp simd
    for (int j = 0; j < u; j++) {
        float z = g[j];
        float hh = tfc_cpu_tanhf(g[2 * u + j] + bx[2 * u + j] + mh[j]);
        g[2 * u + j] = hh;
        h[j] = tfc_cpu_select(m != 0.0f, z * hp[j] + (1.0f - z) * hh, hp[j]);
    }
}

/* What a forward pass's blocks of sequences read and write. */
typedef struct gru_fwd {
    const tfc_gru_desc *d;
    const float *bx, *bh, *mask, *packed, *packed_h;
    float *hseq, *gates;
    gru_ws w;
} gru_fwd;

/* Block b of nb: its sequences through all t steps, with the thread's scratch mr (the
 * recurrent products, [rows, 3u]) and rh (r h_prev, [rows, u], reset_before). */
static void forward_block(const gru_fwd *f, int b, int nb, float *mr, float *rh)
{
    const tfc_gru_desc *d = f->d;
    const int n = d->n, T = d->t, u = d->units, G = 3 * u, ra = d->reset_after;
    const float *bx = f->bx, *mask = f->mask;
    float *hseq = f->hseq, *gates = f->gates;
    int r0, r1;
    tfc_cpu_block_rows(n, b, nb, &r0, &r1);
    for (int s = 0; s < T && r1 > r0; s++) {
        /* a step that masks every sequence of the block keeps each one's h, as the cells
         * do, without its GEMMs and activations (its gates keep x·K: the backward pass
         * gives a masked step's gradients 0 whatever they hold) */
        if (mask && tfc_cpu_rnn_block_masked(mask, T, r0, r1, s)) {
            for (int i = r0; i < r1; i++) {
                const int64_t row = (int64_t)i * T + s;
                memcpy(hseq + row * u, s > 0 ? hseq + (row - 1) * u : f->w.zero,
                       (size_t)u * sizeof(float));
            }
            continue;
        }
        const int64_t first = (int64_t)r0 * T + s;
        /* mr = h_{s-1}·R + b' (reset_after), or h_{s-1}·R_zr; h_{-1} is zero's row */
        tfc_panel_gemm g = {.m = r1 - r0, .n = ra ? G : 2 * u, .packed = f->packed, .ldp = u,
                            .set = 1, .init = f->bh, .c = mr, .ldc = G, .reverse = s & 1,
                            .a1 = {.a = s > 0 ? hseq + (first - 1) * u : f->w.zero,
                                   .lda = s > 0 ? T * u : 0, .k = u}};
        tfc_cpu_panel_gemm(&g);
        for (int i = r0; i < r1; i++) {
            const int64_t row = (int64_t)i * T + s;
            const float *hp = s > 0 ? hseq + (row - 1) * u : f->w.zero;
            float *gr = gates + row * 4 * u, *mi = mr + (int64_t)(i - r0) * G;
            if (ra)
                cell_after(u, 0, u, gr, bx, mi, hp, mask ? mask[row] : 1.0f, hseq + row * u);
            else
                cell_gates(u, gr, bx, mi, hp, rh + (int64_t)(i - r0) * u);
        }
        if (ra) continue;
        /* mh = (r h_{s-1})·R_h, into mr's first u columns */
        tfc_panel_gemm gh = {.m = r1 - r0, .n = u, .packed = f->packed_h, .ldp = u, .set = 1,
                             .c = mr, .ldc = G, .reverse = s & 1,
                             .a1 = {.a = rh, .lda = u, .k = u}};
        tfc_cpu_panel_gemm(&gh);
        for (int i = r0; i < r1; i++) {
            const int64_t row = (int64_t)i * T + s;
            const float *hp = s > 0 ? hseq + (row - 1) * u : f->w.zero;
            cell_state(u, gates + row * 4 * u, bx, mr + (int64_t)(i - r0) * G, hp,
                       mask ? mask[row] : 1.0f, hseq + row * u);
        }
    }
}

/* Few sequences (one block) on several threads, reset_after: each step's gate columns are
 * shared instead, as the LSTM's are (cpu_lstm.c, forward_cols): share t of nt takes units
 * [j0, j1), whole panels of 16, their three columns of h_{s-1}·R + b' into the one mr and
 * their cells; the team meets at a barrier after each step. The same bits as one block
 * (cpu_ops.gru_columns). reset_before's second GEMM reads all of r h_{s-1}: not shared.
 * From COLS_MIN_MACS multiply-adds a step (fortunes_char_gru's batch 1: 49,152). */
#define COLS_MIN_MACS 16384

static int column_shares(const tfc_backend *be, const tfc_gru_desc *d, const tfc_rnn_split *sp)
{
    const int u = d->units, nt = be->threads;
    if (!d->reset_after || sp->blocks != 1 || nt < 2 || u % 16 || u / 16 < nt) return 1;
    return (int64_t)d->n * u * 3 * u >= COLS_MIN_MACS ? nt : 1;
}

/* The steps of all n sequences on the units of shares tid, tid + team, ... of nt (a team of
 * `team`; one: no barrier), with mr [n, 3u] shared. */
static void forward_cols(const gru_fwd *f, int tid, int team, int nt, float *mr)
{
    const tfc_gru_desc *d = f->d;
    const int n = d->n, T = d->t, u = d->units, G = 3 * u, panels = u / 16;
    const float *mask = f->mask;
    float *hseq = f->hseq, *gates = f->gates;
    for (int s = 0; s < T; s++) {
        const int masked = mask && tfc_cpu_rnn_block_masked(mask, T, 0, n, s);
        for (int t = tid; t < nt; t += team) {
            const int j0 = 16 * (panels * t / nt), j1 = 16 * (panels * (t + 1) / nt);
            if (j1 == j0) continue;
            if (masked) { /* as forward_block: h kept */
                for (int i = 0; i < n; i++) {
                    const int64_t row = (int64_t)i * T + s;
                    memcpy(hseq + row * u + j0, s > 0 ? hseq + (row - 1) * u + j0 : f->w.zero,
                           (size_t)(j1 - j0) * sizeof(float));
                }
                continue;
            }
            for (int q = 0; q < 3; q++) {
                const int c0 = q * u + j0;
                tfc_panel_gemm g = {.m = n, .n = j1 - j0,
                                    .packed = f->packed + (size_t)(c0 / 16) * 16 * u, .ldp = u,
                                    .set = 1, .init = f->bh ? f->bh + c0 : NULL, .c = mr + c0,
                                    .ldc = G, .reverse = s & 1,
                                    .a1 = {.a = s > 0 ? hseq + (int64_t)(s - 1) * u : f->w.zero,
                                           .lda = s > 0 ? T * u : 0, .k = u}};
                tfc_cpu_panel_gemm(&g);
            }
            for (int i = 0; i < n; i++) {
                const int64_t row = (int64_t)i * T + s;
                const float *hp = s > 0 ? hseq + (row - 1) * u : f->w.zero;
                cell_after(u, j0, j1, gates + row * 4 * u, f->bx, mr + (int64_t)i * G, hp,
                           mask ? mask[row] : 1.0f, hseq + row * u);
            }
        }
        if (team > 1) {
#pragma omp barrier
        }
    }
}

/* R (or R_zr then R_h) packed, by the threads of the region it is called in (or all here). */
static void pack_r(const tfc_gru_desc *d, const float *rkernel, float *packed, float *packed_h)
{
    const int u = d->units, G = 3 * u;
    if (d->reset_after) {
        tfc_cpu_pack_panels(u, G, rkernel, G, 0, packed);
    } else {
        tfc_cpu_pack_panels(u, 2 * u, rkernel, G, 0, packed);
        tfc_cpu_pack_panels(u, u, rkernel + 2 * u, G, 0, packed_h);
    }
}

/* x [n, t, in], kernel [in, 3u], rkernel [u, 3u], bias [2, 3u] / [3u] / NULL, mask [n, t] or
 * NULL; y [n, t, u] (may be hseq) or [n, u]; hseq [n, t, u]; gates [n, t, 4u]. */
void tfc_cpu_gru_forward(tfc_backend *be, const tfc_gru_desc *d, const float *x,
                         const float *kernel, const float *rkernel, const float *bias,
                         const float *mask, float *y, float *hseq, float *gates, void *ws)
{
    const int n = d->n, T = d->t, u = d->units, G = 3 * u, ra = d->reset_after;
    if (n <= 0 || T <= 0 || u <= 0) return;
    gru_ws w = carve(be, d, ws);
    memset(w.zero, 0, (size_t)G * sizeof(float));
    const float *bx = bias ? bias : w.zero, *bh = bias && ra ? bias + G : NULL;
    tfc_cpu_gemm(be, 0, 0, n * T, G, d->in, 1.0f, x, d->in, kernel, G, 0.0f, gates, 4 * u);
    const tfc_rnn_split sp = split(be, d);
    /* R (or R_zr then R_h) packed: kept on a frozen backend, packed there only when it is
     * fresh; else into the workspace */
    const float *const src[2] = {NULL, rkernel};
    const size_t bytes[2] = {0, (size_t)u * G * sizeof(float)};
    const size_t floats = ra ? tfc_cpu_panels_floats(u, G)
                             : tfc_cpu_panels_floats(u, 2 * u) + tfc_cpu_panels_floats(u, u);
    int pack;
    float *packed = tfc_cpu_kept(be, src, bytes, ra, floats, &pack);
    if (!packed) packed = w.packed;
    float *packed_h = packed + tfc_cpu_panels_floats(u, 2 * u); /* R_h (reset_before) */
    const gru_fwd f = {d, bx, bh, mask, packed, packed_h, hseq, gates, w};
    const int64_t scratch = (int64_t)sp.most * 4 * u; /* a thread's mr and rh */
    /* the team of the column shares (cols > 1: one mr, w.scratch's), or of the blocks */
    const int cols = column_shares(be, d, &sp), team = tfc_cpu_team(cols > 1 ? cols : sp.threads);
    if (team == 1) { /* no OpenMP region: a one-thread one ends in a futex call */
        if (pack) pack_r(d, rkernel, packed, packed_h);
        /* the column shares on one thread (the team cut to one) would run each gate's
         * columns apart: the one block gives their bits, its GEMMs whole */
        for (int b = 0; b < sp.blocks; b++)
            forward_block(&f, b, sp.blocks, w.scratch, w.scratch + (int64_t)sp.most * G);
    } else {
#pragma omp parallel num_threads(team)
        {
            float *mr = w.scratch + (int64_t)omp_get_thread_num() * scratch;
            if (pack) pack_r(d, rkernel, packed, packed_h); /* ends at a barrier */
            if (cols > 1) {
                forward_cols(&f, omp_get_thread_num(), omp_get_num_threads(), cols, w.scratch);
            } else {
#pragma omp for schedule(dynamic, 1)
                for (int b = 0; b < sp.blocks; b++)
                    forward_block(&f, b, sp.blocks, mr, mr + (int64_t)sp.most * G);
            }
        }
    }
    tfc_cpu_rnn_output(n, T, u, d->return_sequences, hseq, y);
}

/* One reset_after step of one sequence, in reverse. With dhh = dh (1 - z):
 *   ah = dhh (1 - hh^2),  az = dh (h_prev - hh) z (1 - z),  ar = ah a r (1 - r);
 *   gx = (az, ar, ah), gm = (az, ar, ah r), dh_prev = dh z (+ gm·Rᵀ, the caller's GEMM).
 * A masked step passes dh through and has zero gx and gm. */
TFC_VECTOR
static void back_after(int u, const float *g, const float *hp, float m, float *dh, float *gx,
                       float *gm)
{
    if (m == 0.0f) {
        memset(gx, 0, (size_t)3 * u * sizeof(float));
        memset(gm, 0, (size_t)3 * u * sizeof(float));
        return;
    }
#pragma omp simd
    for (int j = 0; j < u; j++) {
        float z = g[j], r = g[u + j], hh = g[2 * u + j], a = g[3 * u + j], d = dh[j];
        float ah = d * (1.0f - z) * (1.0f - hh * hh);
        float az = d * (hp[j] - hh) * z * (1.0f - z), ar = ah * a * r * (1.0f - r);
        gx[j] = gm[j] = az;
        gx[u + j] = gm[u + j] = ar;
        gx[2 * u + j] = ah;
        gm[2 * u + j] = ah * r;
        dh[j] = d * z;
    }
}

/* reset_before, first half: gx's h part ah = dh (1 - z)(1 - hh^2) (0 when masked). */
TFC_VECTOR
static void back_state(int u, const float *g, float m, const float *dh, float *gx)
{
#pragma omp simd
    for (int j = 0; j < u; j++) {
        float z = g[j], hh = g[2 * u + j];
        gx[2 * u + j] = m != 0.0f ? dh[j] * (1.0f - z) * (1.0f - hh * hh) : 0.0f;
    }
}

/* reset_before, second half, with drh = ah·R_hᵀ (the gradient of r h_prev):
 *   az = dh (h_prev - hh) z (1 - z), ar = drh h_prev r (1 - r), gx = gm = (az, ar, .),
 *   dh_prev = dh z + drh r (+ gm·R_zrᵀ, the caller's GEMM). Masked: as back_after. */
TFC_VECTOR
static void back_gates(int u, const float *g, const float *hp, float m, const float *drh,
                       float *dh, float *gx, float *gm)
{
    if (m == 0.0f) {
        memset(gx, 0, (size_t)2 * u * sizeof(float));
        memset(gm, 0, (size_t)3 * u * sizeof(float));
        return;
    }
#pragma omp simd
    for (int j = 0; j < u; j++) {
        float z = g[j], r = g[u + j], hh = g[2 * u + j], d = dh[j];
        float az = d * (hp[j] - hh) * z * (1.0f - z), ar = drh[j] * hp[j] * r * (1.0f - r);
        gx[j] = gm[j] = az;
        gx[u + j] = gm[u + j] = ar;
        gm[2 * u + j] = 0.0f;
        dh[j] = d * z + drh[j] * r;
    }
}

/* The weight gradients over GRU_WG_ROWS rows of the n t at a time, on column groups of
 * GRU_WG_COLS that the threads take in turn (each element's sum the same at any thread
 * count); dx over GRU_DX_ROWS rows at a time. */
#define GRU_WG_ROWS 256
#define GRU_WG_COLS 128 /* a multiple of 16 */
#define GRU_DX_ROWS 64

/* c[m, n] (row stride ldc) += Sᵀ·B over NT rows, S [NT, m] in ROWS8 panels at a8 (8 NT
 * apart) and B [NT, n] packed as panels; called by every thread of a region. */
static void weight_grad(int m, int n, int64_t NT, const float *a8, const float *pb, float *c,
                        int ldc)
{
#pragma omp for schedule(dynamic, 1)
    for (int q = 0; q < (n + GRU_WG_COLS - 1) / GRU_WG_COLS; q++) {
        const int j0 = q * GRU_WG_COLS, cols = n - j0 < GRU_WG_COLS ? n - j0 : GRU_WG_COLS;
        for (int64_t l0 = 0; l0 < NT; l0 += GRU_WG_ROWS) {
            tfc_panel_gemm g = {
                .m = m, .n = cols, .packed = pb + ((size_t)(j0 / 16) * NT + l0) * 16,
                .ldp = (int)NT, .c = c + j0, .ldc = ldc,
                .a1 = {.a = a8 + l0 * 8, .lda = (int)(8 * NT),
                       .k = NT - l0 < GRU_WG_ROWS ? (int)(NT - l0) : GRU_WG_ROWS,
                       .layout = TFC_PANEL_ROWS8}};
            tfc_cpu_panel_gemm(&g);
        }
    }
}

/* dy [n, t, u] or [n, u]; dx [n, t, in] (NULL: not needed), dkernel, drkernel, dbias (NULL
 * without bias) accumulate. */
void tfc_cpu_gru_backward(tfc_backend *be, const tfc_gru_desc *d, const float *x,
                          const float *kernel, const float *rkernel, const float *mask,
                          const float *hseq, const float *gates, const float *dy, float *dx,
                          float *dkernel, float *drkernel, float *dbias, void *ws)
{
    const int n = d->n, T = d->t, u = d->units, G = 3 * u, in = d->in, ra = d->reset_after;
    if (n <= 0 || T <= 0 || u <= 0) return;
    const int64_t NT = (int64_t)n * T;
    gru_ws w = carve(be, d, ws);
    memset(w.zero, 0, (size_t)G * sizeof(float));
    memset(w.dh, 0, (size_t)n * u * sizeof(float));
    for (int i = 0; i < n; i++) /* gm's last row per sequence pairs with no step */
        memset(w.gm + ((int64_t)i * T + T - 1) * G, 0, (size_t)G * sizeof(float));
    const tfc_rnn_split sp = split(be, d);
    const int nb = sp.blocks;
    float *packed_h = w.packed + tfc_cpu_panels_floats(2 * u, u); /* R_hᵀ (reset_before) */
#pragma omp parallel num_threads(tfc_cpu_team(sp.threads))
    {
        float *scr = w.scratch + (int64_t)omp_get_thread_num() * sp.most * 4 * u;
        float *drh = scr + (int64_t)sp.most * G; /* [rows, u]; scr's first rows: gm at s 0 */
        if (ra) {
            tfc_cpu_pack_panels(G, u, rkernel, G, 1, w.packed);
        } else {
            tfc_cpu_pack_panels(2 * u, u, rkernel, G, 1, w.packed);
            tfc_cpu_pack_panels(u, u, rkernel + 2 * u, G, 1, packed_h);
        }
#pragma omp for schedule(dynamic, 1)
        for (int b = 0; b < nb; b++) {
            int r0, r1;
            tfc_cpu_block_rows(n, b, nb, &r0, &r1);
            double *db = w.dbias + (int64_t)b * 2 * G;
            memset(db, 0, (size_t)2 * G * sizeof(double));
            for (int s = T - 1; s >= 0 && r1 > r0; s--) {
                for (int i = r0; i < r1; i++) {
                    const int64_t row = (int64_t)i * T + s;
                    float *dh = w.dh + (int64_t)i * u;
                    tfc_cpu_rnn_add_dy(n, T, u, d->return_sequences, i, s, dy, dh);
                    if (!ra)
                        back_state(u, gates + row * 4 * u, mask ? mask[row] : 1.0f, dh,
                                   w.gx + row * G);
                }
                if (!ra) { /* drh = ah·R_hᵀ */
                    tfc_panel_gemm g = {.m = r1 - r0, .n = u, .packed = packed_h, .ldp = u,
                                        .set = 1, .c = drh, .ldc = u,
                                        .a1 = {.a = w.gx + ((int64_t)r0 * T + s) * G + 2 * u,
                                               .lda = T * G, .k = u}};
                    tfc_cpu_panel_gemm(&g);
                }
                for (int i = r0; i < r1; i++) {
                    const int64_t row = (int64_t)i * T + s;
                    const float *hp = s > 0 ? hseq + (row - 1) * u : w.zero;
                    float *dh = w.dh + (int64_t)i * u, *gx = w.gx + row * G;
                    float *gm = s > 0 ? w.gm + (row - 1) * G : scr + (int64_t)(i - r0) * G;
                    const float m = mask ? mask[row] : 1.0f;
                    if (ra)
                        back_after(u, gates + row * 4 * u, hp, m, dh, gx, gm);
                    else
                        back_gates(u, gates + row * 4 * u, hp, m, drh + (int64_t)(i - r0) * u,
                                   dh, gx, gm);
                    if (dbias) {
                        tfc_cpu_sum_row(G, gx, db);
                        tfc_cpu_sum_row(G, gm, db + G);
                    }
                }
                if (s > 0) { /* dh_{s-1} += gm_s·Rᵀ (reset_before: its z, r part·R_zrᵀ) */
                    tfc_panel_gemm g = {.m = r1 - r0, .n = u, .packed = w.packed,
                                        .ldp = ra ? G : 2 * u, .c = w.dh + (int64_t)r0 * u,
                                        .ldc = u,
                                        .a1 = {.a = w.gm + ((int64_t)r0 * T + s - 1) * G,
                                               .lda = T * G, .k = ra ? G : 2 * u}};
                    tfc_cpu_panel_gemm(&g);
                }
            }
        }
    }
    /* dkernel += xᵀ·gx, drkernel += h_prevᵀ·gm (gm is stored one step back, so that h_prev
     * is hseq itself; reset_before: R_zr's columns, and R_h's += (r h_prev)ᵀ·gx_h), dx +=
     * gx·Kᵀ: each element summed over the n t rows in chunks, whatever the threads */
    const int lda8 = (int)(8 * NT);
    int wt = be->threads;
    if (NT * G * (u + in) < TFC_RNN_PAR_MIN_MACS) wt = 1;
#pragma omp parallel num_threads(tfc_cpu_team(wt))
    {
#pragma omp for schedule(static)
        for (int64_t l = 0; l < NT; l++) {
            tfc_cpu_pack_rows8_col(in, x + l * in, w.x8 + l * 8, lda8);
            tfc_cpu_pack_rows8_col(u, hseq + l * u, w.h8 + l * 8, lda8);
            if (!ra) tfc_cpu_pack_rows8_col(u, gates + l * 4 * u + 3 * u, w.a8 + l * 8, lda8);
        }
        tfc_cpu_pack_panels((int)NT, G, w.gx, G, 0, w.pgx);
        tfc_cpu_pack_panels((int)NT, ra ? G : 2 * u, w.gm, G, 0, w.pgm);
        if (!ra) tfc_cpu_pack_panels((int)NT, u, w.gx + 2 * u, G, 0, w.pgh);
        if (dx) tfc_cpu_pack_panels(G, in, kernel, G, 1, w.pkt);
        weight_grad(in, G, NT, w.x8, w.pgx, dkernel, G);
        weight_grad(u, ra ? G : 2 * u, NT, w.h8, w.pgm, drkernel, G);
        if (!ra) weight_grad(u, u, NT, w.a8, w.pgh, drkernel + 2 * u, G);
#pragma omp for schedule(dynamic, 1)
        for (int64_t l0 = 0; l0 < (dx ? NT : 0); l0 += GRU_DX_ROWS) {
            tfc_panel_gemm g = {.m = NT - l0 < GRU_DX_ROWS ? (int)(NT - l0) : GRU_DX_ROWS,
                                .n = in, .packed = w.pkt, .ldp = G, .c = dx + l0 * in, .ldc = in,
                                .a1 = {.a = w.gx + l0 * G, .lda = G, .k = G}};
            tfc_cpu_panel_gemm(&g);
        }
    }
    if (dbias) /* [in; rec] with reset_after, else in */
        tfc_cpu_block_sums(nb, ra ? 2 * G : G, 2 * G, w.dbias, dbias);
}
