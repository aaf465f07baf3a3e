/* CPU recurrences with Keras 3's recurrent_dropout (backend.h, tfc_rnn_dropout_desc): the
 * LSTM's, GRU's and SimpleRNN's cells as Keras's implementation 1 computes them, one keep
 * mask per gate and sequence on the previous state (and, LSTM and GRU, on the input).
 * Keras itself leaves its fused kernels (cuDNN's among them) for this, and so does tfc: the
 * gates' sums are library GEMMs per gate, the input's over all steps at once and the
 * recurrent ones per step over the batch's rows, each against a masked copy of its operand;
 * the cells are vector loops a row at a time. Backward walks the steps in reverse keeping each step's
 * pre-activation gradients, then forms the weight gradients as GEMMs over all n t rows, gate
 * by gate, and dbias as column sums in double in row order. Recurrent dropout's training
 * passes run these (inference runs the cell's own fused op: dropout does nothing there), and
 * every pass of an LSTM or GRU with other activations than tanh and sigmoid
 * (tfc_rnn_dropout_any_acts), all its masks then 1: its cells apply the activations a row at
 * a time through act_forward's and act_backward's loops, the gates' sums kept in the state
 * for the derivatives that need them (gelu's, swish's). */
#include "cpu/cpu_internal.h"

#include "core/rng.h"

/* Gates of a cell: the column blocks of its kernels */
static int gates_of(const tfc_rnn_dropout_desc *d)
{
    return d->cell == TFC_RNN_CELL_LSTM ? 4 : d->cell == TFC_RNN_CELL_GRU ? 3 : 1;
}

/* Floats of a row of the saved state (backend.h): the pre-activations last, any_acts */
static int64_t state_of(const tfc_rnn_dropout_desc *d)
{
    const int64_t u = d->units, pre = tfc_rnn_dropout_any_acts(d) ? gates_of(d) * u : 0;
    return (d->cell == TFC_RNN_CELL_LSTM ? 5 * u : d->cell == TFC_RNN_CELL_GRU ? 4 * u : u) + pre;
}

/* Workspace, floats unless said (NT = n t, G gates, GU = G u): dk [n, G, in] (input masks),
 * rk [n, G, u] (recurrent masks), hm [n, u] and tmp [n, u] (a step's masked state and a
 * product), dh, dc [n, u], xm [NT, in] (a masked copy of x, or of dx's part), hp [NT, u] (the
 * masked previous states), dzi [NT, GU] (the gates' pre-activation gradients), dzr [NT, u]
 * (the GRU's d((h ⊙ rk_h) R_h + b'_h)), then double [2 GU] (dbias's sums). */
typedef struct drop_ws {
    float *dk, *rk, *hm, *tmp, *dh, *dc, *xm, *hp, *dzi, *dzr;
    double *db;
} drop_ws;

/* The pieces' float counts in drop_ws's order (the last: dzr's) */
#define WS_PIECES 10

static void ws_floats(const tfc_rnn_dropout_desc *d, size_t f[WS_PIECES])
{
    const int64_t n = d->n, nt = n * d->t, u = d->units, in = d->in, g = gates_of(d);
    const int64_t count[WS_PIECES] = {n * g * in, n * g * u, n * u,      n * u,      n * u,
                                      n * u,      nt * in,   nt * u,     nt * g * u, nt * u};
    for (int k = 0; k < WS_PIECES; k++) f[k] = tfc_cpu_padded(count[k]);
}

static drop_ws carve(const tfc_rnn_dropout_desc *d, void *ws)
{
    size_t f[WS_PIECES];
    ws_floats(d, f);
    float *p = ws;
    drop_ws w;
    float **at[WS_PIECES] = {&w.dk, &w.rk, &w.hm, &w.tmp, &w.dh, &w.dc, &w.xm, &w.hp, &w.dzi,
                             &w.dzr};
    for (int k = 0; k < WS_PIECES; k++) *at[k] = p, p += f[k];
    w.db = (double *)p;
    return w;
}

size_t tfc_cpu_rnn_dropout_workspace(tfc_backend *be, const tfc_rnn_dropout_desc *d)
{
    (void)be;
    size_t f[WS_PIECES], floats = 0;
    ws_floats(d, f);
    for (int k = 0; k < WS_PIECES; k++) floats += f[k];
    return floats * sizeof(float) + (size_t)(2 * gates_of(d) * d->units) * sizeof(double);
}

/* keep[i, g, c] for n sequences, g gates, f columns: (v >= rate) / (1 - rate); all 1 at a
 * rate of 0 (a pass of any_acts without recurrent dropout), without drawing */
static void draw(const tfc_backend *be, uint64_t key, uint64_t step, int n, int g, int f,
                 float rate, float *keep)
{
    const float scale = 1.0f / (1.0f - rate);
    const int64_t count = (int64_t)n * g * f;
    if (rate <= 0.0f) {
        for (int64_t k = 0; k < count; k++) keep[k] = 1.0f;
        return;
    }
    TFC_CPU_FOR(count, tfc_cpu_threads(be, count), for (int64_t k = 0; k < count; k++)
        keep[k] = tfc_rng_uniform(key, step, (uint64_t)k) >= rate ? scale : 0.0f;);
}

/* The masks of this pass: dk (NULL where the input is not dropped) and rk */
static const float *masks(const tfc_backend *be, const tfc_rnn_dropout_desc *d, drop_ws *w)
{
    const int g = gates_of(d);
    draw(be, tfc_rng_key(d->key, 2), d->step, d->n, g, d->units, d->recurrent_rate, w->rk);
    if (d->rate <= 0.0f) return NULL;
    draw(be, tfc_rng_key(d->key, 1), d->step, d->n, g, d->in, d->rate, w->dk);
    return w->dk;
}

/* out [rows, f] = a ⊙ the mask of gate g for each row's sequence (row r is sequence r / per
 * of `per` rows each); a may have a leading dimension lda >= f. */
static void masked(const tfc_backend *be, int64_t rows, int per, int f, const float *a,
                   int64_t lda, const float *keep, int g, int gates, float *out)
{
    TFC_CPU_FOR(rows, tfc_cpu_threads(be, rows * f), for (int64_t r = 0; r < rows; r++) {
        const float *k = keep + ((r / per) * gates + g) * f, *x = a + r * lda;
        float *o = out + r * f;
        for (int c = 0; c < f; c++) o[c] = x[c] * k[c];
    });
}

/* The previous state of step s's rows, masked for gate g, into w->hm [n, u]; NULL at s 0
 * (a zero state: no product to add). */
static const float *prev_masked(const tfc_backend *be, const tfc_rnn_dropout_desc *d,
                                const float *hseq, int s, int g, drop_ws *w)
{
    if (s == 0) return NULL;
    const int u = d->units;
    masked(be, d->n, 1, u, hseq + (int64_t)(s - 1) * u, (int64_t)d->t * u, w->rk, g,
           gates_of(d), w->hm);
    return w->hm;
}

/* Whether d's pass has no masks (any_acts outside a recurrent-dropout training pass): its
 * gates then share each product with the input, the state and their gradients, one GEMM
 * for all of them (the GRU's h gate apart where the reset gate or dph comes between). */
static int plain(const tfc_rnn_dropout_desc *d)
{
    return d->rate <= 0.0f && d->recurrent_rate <= 0.0f;
}

/* The input's part of every gate over all steps: pre[:, g u .. (g + 1) u) (rows n t, leading
 * dimension ld) = (x ⊙ dk_g) K_g + b_g */
static void input_parts(tfc_backend *be, const tfc_rnn_dropout_desc *d, const float *x,
                        const float *kernel, const float *bias, const float *dk, float *pre,
                        int64_t ld, drop_ws *w)
{
    const int g = gates_of(d), u = d->units, in = d->in, nt = d->n * d->t;
    if (plain(d)) /* one product for all the gates */
        tfc_cpu_gemm(be, 0, 0, nt, g * u, in, 1.0f, x, in, kernel, g * u, 0.0f, pre, (int)ld);
    for (int q = 0; q < g && !plain(d); q++) {
        const float *a = x;
        if (dk) masked(be, nt, d->t, in, x, in, dk, q, g, w->xm), a = w->xm;
        tfc_cpu_gemm(be, 0, 0, nt, u, in, 1.0f, a, in, kernel + q * u, g * u, 0.0f, pre + q * u,
                     (int)ld);
    }
    if (bias)
        TFC_CPU_FOR(nt, tfc_cpu_threads(be, (int64_t)nt * g * u), for (int r = 0; r < nt; r++) {
            float *row = pre + r * ld;
            for (int c = 0; c < g * u; c++) row[c] += bias[c];
        });
}

/* Row r's previous state (a zero row at a sequence's first step) */
static const float *prev_row(const float *hseq, const float *zero, int t, int u, int64_t r)
{
    return r % t ? hseq + (r - 1) * u : zero;
}

/* An LSTM step's cells of one row: z its gates' sums [4u], activated in place; c its cell
 * state (cp the previous one, NULL: 0) and h its output */
TFC_VECTOR
static void lstm_cells(int u, float *z, const float *cp, float *c, float *h)
{
#pragma omp simd
    for (int j = 0; j < u; j++) {
        const float ig = tfc_cpu_sigmoidf(z[j]), fg = tfc_cpu_sigmoidf(z[u + j]),
                    gg = tfc_cpu_tanhf(z[2 * u + j]), og = tfc_cpu_sigmoidf(z[3 * u + j]);
        z[j] = ig, z[u + j] = fg, z[2 * u + j] = gg, z[3 * u + j] = og;
        c[j] = fg * (cp ? cp[j] : 0.0f) + ig * gg;
        h[j] = og * tfc_cpu_tanhf(c[j]);
    }
}

/* A GRU step's cells of one row: st its z, r and h sums [3u] and then p, ph the recurrent
 * product of the h gate, rb the recurrent bias (NULL: none), hp the previous state (NULL:
 * 0); h the output */
TFC_VECTOR
static void gru_cells(int u, int reset_after, float *st, const float *ph, const float *rb,
                      const float *hp, float *h)
{
#pragma omp simd
    for (int j = 0; j < u; j++) {
        const float zg = tfc_cpu_sigmoidf(st[j] + (rb ? rb[j] : 0.0f));
        const float rg = tfc_cpu_sigmoidf(st[u + j] + (rb ? rb[u + j] : 0.0f));
        const float p = ph[j] + (rb ? rb[2 * u + j] : 0.0f);
        const float hh = tfc_cpu_tanhf(st[2 * u + j] + (reset_after ? rg * p : p));
        st[j] = zg, st[u + j] = rg, st[2 * u + j] = hh, st[3 * u + j] = p;
        h[j] = zg * (hp ? hp[j] : 0.0f) + (1.0f - zg) * hh;
    }
}

/* lstm_cells under other activations (any_acts): the sums kept in pre [4u] first; ra is
 * the gates' activation, act the candidate's and the output's */
static void lstm_cells_any(int u, tfc_act act, tfc_act ra, float *z, float *pre,
                           const float *cp, float *c, float *h)
{
    memcpy(pre, z, (size_t)(4 * u) * sizeof(float));
    tfc_cpu_act_forward_serial(ra, 2 * u, 2 * u, pre, z); /* i, f */
    tfc_cpu_act_forward_serial(act, u, u, pre + 2 * u, z + 2 * u);
    tfc_cpu_act_forward_serial(ra, u, u, pre + 3 * u, z + 3 * u);
    for (int j = 0; j < u; j++) c[j] = z[u + j] * (cp ? cp[j] : 0.0f) + z[j] * z[2 * u + j];
    tfc_cpu_act_forward_serial(act, u, u, c, h);
    for (int j = 0; j < u; j++) h[j] *= z[3 * u + j];
}

/* gru_cells under other activations (any_acts): z, r and hh's sums kept in pre [3u] */
static void gru_cells_any(int u, int reset_after, tfc_act act, tfc_act ra, float *st,
                          float *pre, const float *ph, const float *rb, const float *hp,
                          float *h)
{
    for (int j = 0; j < 2 * u; j++) pre[j] = st[j] + (rb ? rb[j] : 0.0f);
    tfc_cpu_act_forward_serial(ra, 2 * u, 2 * u, pre, st); /* z, r */
    for (int j = 0; j < u; j++) {
        const float p = ph[j] + (rb ? rb[2 * u + j] : 0.0f);
        pre[2 * u + j] = st[2 * u + j] + (reset_after ? st[u + j] * p : p);
        st[3 * u + j] = p;
    }
    tfc_cpu_act_forward_serial(act, u, u, pre + 2 * u, st + 2 * u);
    for (int j = 0; j < u; j++)
        h[j] = st[j] * (hp ? hp[j] : 0.0f) + (1.0f - st[j]) * st[2 * u + j];
}

/* The state rows of step s that a masked sequence keeps: h (and c) from the step before */
static void keep_state(const tfc_rnn_dropout_desc *d, int64_t row, int s, float *hseq,
                       float *c, int64_t cld)
{
    const int u = d->units;
    if (s > 0) memcpy(hseq + row * u, hseq + (row - 1) * u, (size_t)u * sizeof(float));
    else memset(hseq + row * u, 0, (size_t)u * sizeof(float));
    if (!c) return;
    if (s > 0) memcpy(c + row * cld, c + (row - 1) * cld, (size_t)u * sizeof(float));
    else memset(c + row * cld, 0, (size_t)u * sizeof(float));
}

void tfc_cpu_rnn_dropout_forward(tfc_backend *be, const tfc_rnn_dropout_desc *d, const float *x,
                                 const float *kernel, const float *rkernel, const float *bias,
                                 const float *mask, float *y, float *hseq, float *state,
                                 void *ws)
{
    const int n = d->n, T = d->t, u = d->units, g = gates_of(d);
    if (n <= 0 || T <= 0 || u <= 0) return;
    drop_ws w = carve(d, ws);
    const float *dk = masks(be, d, &w);
    const int64_t S = state_of(d), ld = (int64_t)T * S; /* a step's rows are ld apart */
    const int lstm = d->cell == TFC_RNN_CELL_LSTM, gru = d->cell == TFC_RNN_CELL_GRU;
    const int any = tfc_rnn_dropout_any_acts(d);
    const tfc_act act = d->act, ra = d->recurrent_act;
    float *pre = state + (lstm ? u : 0); /* the gates' sums, activated in place */
    /* the GRU's input bias is its bias's first row; its recurrent one the second */
    const float *rb = gru && d->reset_after && bias ? bias + 3 * u : NULL;
    input_parts(be, d, x, kernel, bias, dk, pre, S, &w);
    const int nt = tfc_cpu_threads(be, (int64_t)n * g * u);
    for (int s = 0; s < T; s++) {
        float *ps = pre + (int64_t)s * S;
        /* the recurrent parts of the gates the state meets before the cell: all but the
         * GRU's h gate */
        if (plain(d) && s > 0)
            tfc_cpu_gemm(be, 0, 0, n, (gru ? 2 : g) * u, u, 1.0f, hseq + (int64_t)(s - 1) * u,
                         T * u, rkernel, g * u, 1.0f, ps, (int)ld);
        for (int q = 0; q < (gru ? 2 : g) && !plain(d); q++) {
            const float *hm = prev_masked(be, d, hseq, s, q, &w);
            if (hm)
                tfc_cpu_gemm(be, 0, 0, n, u, u, 1.0f, hm, u, rkernel + q * u, g * u, 1.0f,
                             ps + q * u, (int)ld);
        }
        if (gru) { /* ph = (h ⊙ rk_h) R_h (+ b'_h), or with r first: into tmp */
            const float *hm = prev_masked(be, d, hseq, s, 2, &w);
            if (!d->reset_after && hm) { /* hm = r ⊙ h ⊙ rk_h */
                for (int i = 0; i < n; i++) {
                    const float *zr = ps + (int64_t)i * ld;
                    float *r = w.tmp + (int64_t)i * u, *hr = w.hm + (int64_t)i * u;
                    if (any) { /* r into tmp, which the product below then takes */
                        tfc_cpu_act_forward_serial(ra, u, u, zr + u, r);
                        for (int j = 0; j < u; j++) hr[j] *= r[j];
                    } else {
                        for (int j = 0; j < u; j++) /* rb NULL: no recurrent bias here */
                            hr[j] *= tfc_cpu_sigmoidf(zr[u + j]);
                    }
                }
            }
            if (hm)
                tfc_cpu_gemm(be, 0, 0, n, u, u, 1.0f, hm, u, rkernel + 2 * u, 3 * u, 0.0f,
                             w.tmp, u);
            else
                memset(w.tmp, 0, (size_t)n * u * sizeof(float));
        }
        TFC_CPU_FOR(n, nt, for (int i = 0; i < n; i++) {
            const int64_t row = (int64_t)i * T + s;
            float *z = state + row * S + (lstm ? u : 0), *h = hseq + row * u;
            const float *hp = s > 0 ? h - u : NULL;
            if (mask && mask[row] == 0.0f) {
                keep_state(d, row, s, hseq, lstm ? state : NULL, S);
                continue;
            }
            if (lstm) {
                float *c = state + row * S;
                if (any) lstm_cells_any(u, act, ra, z, c + 5 * u, s > 0 ? c - S : NULL, c, h);
                else lstm_cells(u, z, s > 0 ? c - S : NULL, c, h);
            } else if (gru && any) {
                gru_cells_any(u, d->reset_after, act, ra, z, z + 4 * u, w.tmp + (int64_t)i * u,
                              rb, hp, h);
            } else if (gru) {
                gru_cells(u, d->reset_after, z, w.tmp + (int64_t)i * u, rb, hp, h);
            } else {
                tfc_cpu_act_forward_serial(d->act, u, u, z, h);
            }
        });
    }
    tfc_cpu_rnn_output(n, T, u, d->return_sequences, hseq, y);
}

/* An LSTM row's cells in reverse: st its c then its activated gates, cp the previous c
 * (NULL: 0); dz gets the gates' sums' gradients, dc passes to c_{s-1}, dh is consumed. */
TFC_VECTOR
static void lstm_cells_back(int u, const float *st, const float *cp, float *dh, float *dc,
                            float *dz)
{
    const float *g = st + u;
#pragma omp simd
    for (int j = 0; j < u; j++) {
        const float ig = g[j], fg = g[u + j], gg = g[2 * u + j], og = g[3 * u + j];
        const float tc = tfc_cpu_tanhf(st[j]);
        const float dcj = dc[j] + dh[j] * og * (1.0f - tc * tc);
        dz[j] = dcj * gg * ig * (1.0f - ig);
        dz[u + j] = dcj * (cp ? cp[j] : 0.0f) * fg * (1.0f - fg);
        dz[2 * u + j] = dcj * ig * (1.0f - gg * gg);
        dz[3 * u + j] = dh[j] * tc * og * (1.0f - og);
        dc[j] = dcj * fg;
        dh[j] = 0.0f;
    }
}

/* A GRU row's cells in reverse: st its z, r, hh and p, hp the previous state (NULL: 0);
 * dz gets the sums' gradients (r's 0 without reset_after: gru_reset_before's), dph the
 * gradient of p, and dh keeps z dh, what passes to h_{s-1} directly. */
TFC_VECTOR
static void gru_cells_back(int u, int reset_after, const float *st, const float *hp, float *dh,
                           float *dz, float *dph)
{
#pragma omp simd
    for (int j = 0; j < u; j++) {
        const float zg = st[j], rg = st[u + j], hh = st[2 * u + j], p = st[3 * u + j];
        const float dah = dh[j] * (1.0f - zg) * (1.0f - hh * hh);
        dz[j] = dh[j] * ((hp ? hp[j] : 0.0f) - hh) * zg * (1.0f - zg);
        dz[2 * u + j] = dah;
        /* reset_after: hh = tanh(x_h + r p); else r's waits for dah R_hᵀ */
        dz[u + j] = reset_after ? dah * p * rg * (1.0f - rg) : 0.0f;
        dph[j] = reset_after ? dah * rg : dah;
        dh[j] *= zg;
    }
}

/* lstm_cells_back under other activations (any_acts): st also holds the sums [4u] after the
 * gates; dz's own rows serve as scratch until they are written, dh once consumed. */
static void lstm_cells_back_any(tfc_backend *be, int u, tfc_act act, tfc_act ra,
                                const float *st, const float *cp, float *dh, float *dc,
                                float *dz)
{
    const float *c = st, *g = st + u, *pre = st + 5 * u;
    float *dzi = dz, *dzf = dz + u, *dzc = dz + 2 * u, *dzo = dz + 3 * u;
    tfc_cpu_act_forward_serial(act, u, u, c, dzi); /* act(c) */
    for (int j = 0; j < u; j++) dzf[j] = dh[j] * g[3 * u + j];
    tfc_cpu_act_backward(be, act, u, u, c, dzi, dzf, dzc, 1);
    for (int j = 0; j < u; j++) dc[j] += dzc[j], dzf[j] = dh[j] * dzi[j];
    tfc_cpu_act_backward(be, ra, u, u, pre + 3 * u, g + 3 * u, dzf, dzo, 1);
    for (int j = 0; j < u; j++) dh[j] = dc[j] * g[2 * u + j];
    tfc_cpu_act_backward(be, ra, u, u, pre, g, dh, dzi, 1);
    for (int j = 0; j < u; j++) dh[j] = dc[j] * (cp ? cp[j] : 0.0f);
    tfc_cpu_act_backward(be, ra, u, u, pre + u, g + u, dh, dzf, 1);
    for (int j = 0; j < u; j++) dh[j] = dc[j] * g[j];
    tfc_cpu_act_backward(be, act, u, u, pre + 2 * u, g + 2 * u, dh, dzc, 1);
    for (int j = 0; j < u; j++) dc[j] *= g[u + j], dh[j] = 0.0f;
}

/* gru_cells_back under other activations (any_acts): st also holds z's, r's and hh's sums
 * [3u] after p; dz's r row serves as scratch until written. */
static void gru_cells_back_any(tfc_backend *be, int u, int reset_after, tfc_act act,
                               tfc_act ra, const float *st, const float *hp, float *dh,
                               float *dz, float *dph)
{
    const float *pre = st + 4 * u;
    float *t = dz + u;
    for (int j = 0; j < u; j++) t[j] = dh[j] * (1.0f - st[j]);
    tfc_cpu_act_backward(be, act, u, u, pre + 2 * u, st + 2 * u, t, dz + 2 * u, 1); /* dah */
    for (int j = 0; j < u; j++) t[j] = dh[j] * ((hp ? hp[j] : 0.0f) - st[2 * u + j]);
    tfc_cpu_act_backward(be, ra, u, u, pre, st, t, dz, 1);
    for (int j = 0; j < u; j++) {
        const float dah = dz[2 * u + j];
        t[j] = dah * st[3 * u + j]; /* reset_after: r's before its derivative */
        dph[j] = reset_after ? dah * st[u + j] : dah;
        dh[j] *= st[j];
    }
    if (reset_after) tfc_cpu_act_backward(be, ra, u, u, pre + u, st + u, t, t, 1);
    else memset(t, 0, (size_t)u * sizeof(float));
}

/* Step s's cells in reverse: each unmasked row's pre-activation gradients into dzi (and the
 * GRU's dph into dzr), dh left holding what passes to h_{s-1} directly (the GRU's z dh; 0
 * for the others), dc to c_{s-1}. A masked row's dh and dc pass on unchanged, its dz 0. */
static void cells_backward(tfc_backend *be, const tfc_rnn_dropout_desc *d, const float *mask,
                           const float *hseq, const float *state, const float *dy, int s,
                           drop_ws *w)
{
    const int n = d->n, T = d->t, u = d->units, GU = gates_of(d) * u;
    const int64_t S = state_of(d);
    const int lstm = d->cell == TFC_RNN_CELL_LSTM, gru = d->cell == TFC_RNN_CELL_GRU;
    const int any = tfc_rnn_dropout_any_acts(d);
    TFC_CPU_FOR(n, tfc_cpu_threads(be, (int64_t)n * GU), for (int i = 0; i < n; i++) {
        const int64_t row = (int64_t)i * T + s;
        float *dh = w->dh + (int64_t)i * u, *dz = w->dzi + row * GU;
        tfc_cpu_rnn_add_dy(n, T, u, d->return_sequences, i, s, dy, dh);
        if (mask && mask[row] == 0.0f) {
            memset(dz, 0, (size_t)GU * sizeof(float));
            if (gru) memset(w->dzr + row * u, 0, (size_t)u * sizeof(float));
            continue;
        }
        const float *st = state + row * S, *h = hseq + row * u;
        if (lstm && any)
            lstm_cells_back_any(be, u, d->act, d->recurrent_act, st, s > 0 ? st - S : NULL, dh,
                                w->dc + (int64_t)i * u, dz);
        else if (lstm)
            lstm_cells_back(u, st, s > 0 ? st - S : NULL, dh, w->dc + (int64_t)i * u, dz);
        else if (gru && any)
            gru_cells_back_any(be, u, d->reset_after, d->act, d->recurrent_act, st,
                               s > 0 ? h - u : NULL, dh, dz, w->dzr + row * u);
        else if (gru)
            gru_cells_back(u, d->reset_after, st, s > 0 ? h - u : NULL, dh, dz,
                           w->dzr + row * u);
        else {
            tfc_cpu_act_backward(be, d->act, u, u, st, h, dh, dz, 1);
            memset(dh, 0, (size_t)u * sizeof(float));
        }
    });
}

/* reset_after false: hh = tanh(x_h + q R_h), q = r ⊙ h_{s-1} ⊙ rk_h. With dq = dah R_hᵀ:
 * r's pre-activation gradient (dq ⊙ h ⊙ rk_h) r (1 - r) (any_acts: times the gates'
 * activation's derivative at r's sum), and dh_{s-1} += dq ⊙ r ⊙ rk_h. */
static void gru_reset_before(tfc_backend *be, const tfc_rnn_dropout_desc *d,
                             const float *rkernel, const float *mask, const float *hseq,
                             const float *state, int s, drop_ws *w)
{
    const int n = d->n, T = d->t, u = d->units, any = tfc_rnn_dropout_any_acts(d);
    const int64_t S = state_of(d);
    if (s == 0) return; /* h_{-1} = 0: no q, r's gradient stays 0 */
    tfc_cpu_gemm(be, 0, 1, n, u, u, 1.0f, w->dzr + (int64_t)s * u, T * u, rkernel + 2 * u,
                 3 * u, 0.0f, w->tmp, u);
    for (int i = 0; i < n; i++) {
        const int64_t row = (int64_t)i * T + s;
        if (mask && mask[row] == 0.0f) continue; /* its dz 0, its dh passed on */
        const float *st = state + row * S, *hp = hseq + (row - 1) * u,
                    *rk = w->rk + ((int64_t)i * 3 + 2) * u, *dq = w->tmp + (int64_t)i * u;
        float *dz = w->dzi + row * 3 * u, *dh = w->dh + (int64_t)i * u;
        for (int j = 0; j < u; j++) {
            const float rg = st[u + j];
            dz[u + j] = dq[j] * hp[j] * rk[j] * (any ? 1.0f : rg * (1.0f - rg));
            dh[j] += dq[j] * rg * rk[j];
        }
        if (any) /* in place: elementwise */
            tfc_cpu_act_backward(be, d->recurrent_act, u, u, st + 5 * u, st + u, dz + u, dz + u,
                                 1);
    }
}

/* dh_{s-1} += Σ_g (dz_{s,g} R_gᵀ) ⊙ rk_g over the gates that met the state (the GRU's h
 * gate through dzr, reset_after) */
static void state_grad(tfc_backend *be, const tfc_rnn_dropout_desc *d, const float *rkernel,
                       int s, drop_ws *w)
{
    const int n = d->n, T = d->t, u = d->units, g = gates_of(d);
    const int gru = d->cell == TFC_RNN_CELL_GRU, whole = plain(d) ? (gru ? 2 : g) : 0;
    if (whole) /* the gates but the GRU's h at once, straight into dh */
        tfc_cpu_gemm(be, 0, 1, n, u, whole * u, 1.0f, w->dzi + (int64_t)s * g * u, T * g * u,
                     rkernel, g * u, 1.0f, w->dh, u);
    for (int q = whole; q < g; q++) {
        if (gru && q == 2 && !d->reset_after) continue; /* gru_reset_before's */
        const float *dz =
            gru && q == 2 ? w->dzr + (int64_t)s * u : w->dzi + (int64_t)s * g * u + q * u;
        const int lda = gru && q == 2 ? T * u : T * g * u;
        tfc_cpu_gemm(be, 0, 1, n, u, u, 1.0f, dz, lda, rkernel + q * u, g * u, 0.0f, w->tmp, u);
        for (int i = 0; i < n; i++) {
            const float *rk = w->rk + ((int64_t)i * g + q) * u, *t = w->tmp + (int64_t)i * u;
            float *dh = w->dh + (int64_t)i * u;
            for (int j = 0; j < u; j++) dh[j] += t[j] * rk[j];
        }
    }
}

/* Gate q's input gradients over all n t rows: dkernel += (x ⊙ dk_q)ᵀ dz_q,
 * dx += (dz_q K_qᵀ) ⊙ dk_q (dk NULL: x and dx unmasked) */
static void input_grads(tfc_backend *be, const tfc_rnn_dropout_desc *d, const float *x,
                        const float *kernel, const float *dk, int q, float *dx, float *dkernel,
                        drop_ws *w)
{
    const int T = d->t, u = d->units, in = d->in, g = gates_of(d), GU = g * u, nt = d->n * T;
    const float *dz = w->dzi + q * u, *a = x;
    if (dk) masked(be, nt, T, in, x, in, dk, q, g, w->xm), a = w->xm;
    tfc_cpu_gemm(be, 1, 0, in, u, nt, 1.0f, a, in, dz, GU, 1.0f, dkernel + q * u, GU);
    if (dx && dk) {
        tfc_cpu_gemm(be, 0, 1, nt, in, u, 1.0f, dz, GU, kernel + q * u, GU, 0.0f, w->xm, in);
        TFC_CPU_FOR(nt, tfc_cpu_threads(be, (int64_t)nt * in), for (int r = 0; r < nt; r++) {
            const float *k = dk + ((int64_t)(r / T) * g + q) * in, *v = w->xm + (int64_t)r * in;
            float *o = dx + (int64_t)r * in;
            for (int c = 0; c < in; c++) o[c] += v[c] * k[c];
        });
    } else if (dx) {
        tfc_cpu_gemm(be, 0, 1, nt, in, u, 1.0f, dz, GU, kernel + q * u, GU, 1.0f, dx, in);
    }
}

/* After the recurrence, gate by gate over all n t rows: dkernel += (x ⊙ dk_g)ᵀ dz_g,
 * dx += (dz_g K_gᵀ) ⊙ dk_g, drkernel += (h_prev ⊙ rk_g)ᵀ dz_g (the GRU's h gate: dph with
 * reset_after, q = r ⊙ h_prev ⊙ rk_h against dah without). */
static void weight_grads(tfc_backend *be, const tfc_rnn_dropout_desc *d, const float *x,
                         const float *kernel, const float *hseq, const float *state,
                         const float *dk, float *dx, float *dkernel, float *drkernel,
                         drop_ws *w)
{
    const int n = d->n, T = d->t, u = d->units, in = d->in, g = gates_of(d), GU = g * u;
    const int nt = n * T;
    const int gru = d->cell == TFC_RNN_CELL_GRU;
    const int64_t S = state_of(d);
    /* a plain pass: the input's products of all gates at once, and the recurrent ones of
     * the gates the state meets unmasked (all but the GRU's h) */
    const int whole = plain(d) ? (gru ? 2 : g) : 0;
    if (whole) {
        tfc_cpu_gemm(be, 1, 0, in, GU, nt, 1.0f, x, in, w->dzi, GU, 1.0f, dkernel, GU);
        if (dx) tfc_cpu_gemm(be, 0, 1, nt, in, GU, 1.0f, w->dzi, GU, kernel, GU, 1.0f, dx, in);
        memset(w->tmp, 0, (size_t)u * sizeof(float));
        const float *zero = w->tmp;
        TFC_CPU_FOR(nt, tfc_cpu_threads(be, (int64_t)nt * u), for (int r = 0; r < nt; r++)
            memcpy(w->hp + (int64_t)r * u, prev_row(hseq, zero, T, u, r),
                   (size_t)u * sizeof(float)););
        tfc_cpu_gemm(be, 1, 0, u, whole * u, nt, 1.0f, w->hp, u, w->dzi, GU, 1.0f, drkernel, GU);
    }
    for (int q = whole; q < g; q++) {
        const float *dz = w->dzi + q * u;
        if (!whole) input_grads(be, d, x, kernel, dk, q, dx, dkernel, w);
        /* the masked previous states, for drkernel */
        const float *zero = w->tmp;
        memset(w->tmp, 0, (size_t)u * sizeof(float));
        const int q_gate = gru && q == 2 && !d->reset_after;
        TFC_CPU_FOR(nt, tfc_cpu_threads(be, (int64_t)nt * u), for (int r = 0; r < nt; r++) {
            const float *hp = prev_row(hseq, zero, T, u, r);
            const float *rk = w->rk + ((int64_t)(r / T) * g + q) * u;
            const float *rg = state + (int64_t)r * S + u;
            float *o = w->hp + (int64_t)r * u;
            for (int j = 0; j < u; j++) o[j] = hp[j] * rk[j] * (q_gate ? rg[j] : 1.0f);
        });
        const float *dzr = gru && q == 2 && d->reset_after ? w->dzr : dz;
        tfc_cpu_gemm(be, 1, 0, u, u, nt, 1.0f, w->hp, u, dzr, dzr == w->dzr ? u : GU, 1.0f,
                     drkernel + q * u, GU);
    }
}

/* dbias += the columns of dzi summed (the GRU's reset_after second row: z's, r's and dph's) */
static void bias_grad(const tfc_rnn_dropout_desc *d, float *dbias, drop_ws *w)
{
    const int u = d->units, GU = gates_of(d) * u;
    const int64_t nt = (int64_t)d->n * d->t;
    const int two = d->cell == TFC_RNN_CELL_GRU && d->reset_after;
    memset(w->db, 0, (size_t)(2 * GU) * sizeof(double));
    for (int64_t r = 0; r < nt; r++) {
        tfc_cpu_sum_row(GU, w->dzi + r * GU, w->db);
        if (two) tfc_cpu_sum_row(u, w->dzr + r * u, w->db + GU + 2 * u);
    }
    if (two) /* the recurrent bias of z and r: the same sums as the input one's */
        for (int j = 0; j < 2 * u; j++) w->db[GU + j] = w->db[j];
    tfc_cpu_block_sums(1, two ? 2 * GU : GU, 2 * GU, w->db, dbias);
}

void tfc_cpu_rnn_dropout_backward(tfc_backend *be, const tfc_rnn_dropout_desc *d,
                                  const float *x, const float *kernel, const float *rkernel,
                                  const float *mask, const float *hseq, const float *state,
                                  const float *dy, float *dx, float *dkernel, float *drkernel,
                                  float *dbias, void *ws)
{
    const int n = d->n, T = d->t, u = d->units;
    if (n <= 0 || T <= 0 || u <= 0) return;
    drop_ws w = carve(d, ws);
    const float *dk = masks(be, d, &w);
    memset(w.dh, 0, (size_t)n * u * sizeof(float));
    memset(w.dc, 0, (size_t)n * u * sizeof(float));
    for (int s = T - 1; s >= 0; s--) {
        cells_backward(be, d, mask, hseq, state, dy, s, &w);
        if (d->cell == TFC_RNN_CELL_GRU && !d->reset_after)
            gru_reset_before(be, d, rkernel, mask, hseq, state, s, &w);
        if (s > 0) state_grad(be, d, rkernel, s, &w);
    }
    weight_grads(be, d, x, kernel, hseq, state, dk, dx, dkernel, drkernel, &w);
    if (dbias) bias_grad(d, dbias, &w);
}
