/* Recurrent dropout on the GPU (core/backend.h, tfc_rnn_dropout_desc), as cpu_rnn_dropout.c:
 * the same keep masks (core/rng.h's Philox, drawn here), the gates' sums as cuBLAS GEMMs per
 * gate against masked copies of x and of h_{t-1}, the cells as one thread per unit, the
 * backward pass step by step in reverse, then the weight gradients over all n t rows gate by
 * gate. Not in the GPU's op table yet (TFC_BACKEND_LAYER_OPS): tfc_gpu_test_enable_layer_ops
 * puts it in for `make test-gpu`'s case against the CPU; until that has passed on a GPU, a
 * layer with recurrent_dropout, or an LSTM or GRU with other activations than tanh and
 * sigmoid (which runs these ops in every pass, the gates' sums kept), is refused there. */
#include "core/rng.h"
#include "gpu/gpu_act.cuh"
#include "gpu/gpu_internal.cuh"

#define GRID_LOOP(i, n)                                                              \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);        \
         i += (int64_t)gridDim.x * blockDim.x)

#define LAUNCH(g, count, kernel, ...)                                                       \
    do {                                                                                   \
        kernel<<<gpu_blocks(g, (count)), GPU_THREADS, 0, (g)->stream>>>(__VA_ARGS__);      \
        TFC_LAUNCH_CHECK(g, kernel);                                                       \
    } while (0)

static int gates_of(const tfc_rnn_dropout_desc *d)
{
    return d->cell == TFC_RNN_CELL_LSTM ? 4 : d->cell == TFC_RNN_CELL_GRU ? 3 : 1;
}

/* Floats of a row of the saved state (backend.h): the gates' sums last under any_acts */
static __host__ __device__ int64_t state_of(const tfc_rnn_dropout_desc *d)
{
    const int64_t u = d->units;
    const int any = d->cell != TFC_RNN_CELL_SIMPLE &&
                    (d->act != TFC_ACT_TANH || d->recurrent_act != TFC_ACT_SIGMOID);
    return d->cell == TFC_RNN_CELL_LSTM ? (any ? 9 : 5) * u
           : d->cell == TFC_RNN_CELL_GRU ? (any ? 7 : 4) * u
                                         : u;
}

/* Workspace as the CPU's (cpu_rnn_dropout.c), each part padded to 64 floats: dk, rk, hm,
 * tmp, dh, dc, xm, hp, dzi, dzr, then gr [n, u] and db [2 GU] (the bias sums). */
#define WS_PIECES 12

typedef struct drop_ws {
    float *dk, *rk, *hm, *tmp, *dh, *dc, *xm, *hp, *dzi, *dzr, *gr, *db;
} drop_ws;

static size_t padded(int64_t floats)
{
    return (size_t)(floats + 63) / 64 * 64;
}

static void ws_floats(const tfc_rnn_dropout_desc *d, size_t f[WS_PIECES])
{
    const int64_t n = d->n, nt = n * d->t, u = d->units, in = d->in, g = gates_of(d);
    const int64_t count[WS_PIECES] = {n * g * in, n * g * u, n * u,      n * u,  n * u, n * u,
                                      nt * in,    nt * u,    nt * g * u, nt * u, n * u, 2 * g * u};
    for (int k = 0; k < WS_PIECES; k++) f[k] = padded(count[k]);
}

static drop_ws carve(const tfc_rnn_dropout_desc *d, void *ws)
{
    size_t f[WS_PIECES];
    ws_floats(d, f);
    drop_ws w;
    float **at[WS_PIECES] = {&w.dk, &w.rk, &w.hm, &w.tmp, &w.dh,  &w.dc,
                             &w.xm, &w.hp, &w.dzi, &w.dzr, &w.gr, &w.db};
    float *p = (float *)ws;
    for (int k = 0; k < WS_PIECES; k++) *at[k] = p, p += f[k];
    return w;
}

extern "C" size_t tfc_gpu_rnn_dropout_workspace(tfc_backend *be, const tfc_rnn_dropout_desc *d)
{
    (void)be;
    size_t f[WS_PIECES], floats = 0;
    ws_floats(d, f);
    for (int k = 0; k < WS_PIECES; k++) floats += f[k];
    return floats * sizeof(float);
}

static __global__ void draw_kernel(int64_t count, uint64_t key, uint64_t step, float rate,
                                   float *keep);

/* The pass's masks into w: rk, and dk where the input is dropped (d->rate > 0) */
static void draw_masks(gpu_ctx *g, const tfc_rnn_dropout_desc *d, drop_ws *w)
{
    const int64_t G = gates_of(d), nr = (int64_t)d->n * G * d->units;
    const int64_t nx = (int64_t)d->n * G * d->in;
    LAUNCH(g, nr, draw_kernel, nr, tfc_rng_key(d->key, 2), d->step, d->recurrent_rate, w->rk);
    if (d->rate > 0.0f)
        LAUNCH(g, nx, draw_kernel, nx, tfc_rng_key(d->key, 1), d->step, d->rate, w->dk);
}

static __global__ void draw_kernel(int64_t count, uint64_t key, uint64_t step, float rate,
                                   float *keep)
{
    const float scale = 1.0f / (1.0f - rate);
    GRID_LOOP(k, count) keep[k] = tfc_rng_uniform(key, step, (uint64_t)k) >= rate ? scale : 0.0f;
}

/* out[r, c] = a[r lda + c] keep[(r / per) gates + g, c] */
static __global__ void masked_kernel(int64_t rows, int per, int f, const float *a, int64_t lda,
                                     const float *keep, int g, int gates, float *out)
{
    GRID_LOOP(e, rows * f)
    {
        const int64_t r = e / f, c = e % f;
        out[e] = a[r * lda + c] * keep[((r / per) * gates + g) * f + c];
    }
}

/* y[r ld + c] += b[c] */
static __global__ void bias_ld_kernel(int64_t rows, int cols, int64_t ld, const float *b,
                                      float *y)
{
    GRID_LOOP(e, rows * cols) y[(e / cols) * ld + e % cols] += b[e % cols];
}

/* hm[i, j] *= ra(r's sum + b'_r): the GRU's r ⊙ h ⊙ rk_h (reset_after false) */
static __global__ void reset_kernel(int n, int u, int ra, const float *ps, int64_t ld,
                                    const float *rb, float *hm)
{
    GRID_LOOP(e, (int64_t)n * u)
    {
        const int64_t i = e / u, j = e % u;
        hm[e] *= act_value(ra, ps[i * ld + u + j] + (rb ? rb[u + j] : 0.0f));
    }
}

/* Step s's LSTM or GRU cells, one thread per (sequence, unit); a masked row keeps h (and c).
 * Under any_acts the gates' sums go to the state's end (pre) before their activations. */
static __global__ void cells_kernel(tfc_rnn_dropout_desc d, int s, const float *mask,
                                    const float *rb, const float *ph, float *hseq, float *state)
{
    const int u = d.units, T = d.t, lstm = d.cell == TFC_RNN_CELL_LSTM;
    const int64_t S = state_of(&d), P = lstm ? 5 * u : 4 * u; /* pre's offset */
    const int any = S > P, act = d.act, ra = d.recurrent_act;
    GRID_LOOP(e, (int64_t)d.n * u)
    {
        const int64_t i = e / u, j = e % u, row = i * T + s;
        float *st = state + row * S, *h = hseq + row * u;
        const float hp = s > 0 ? h[j - u] : 0.0f;
        if (mask && mask[row] == 0.0f) {
            h[j] = hp;
            if (lstm) st[j] = s > 0 ? st[j - S] : 0.0f;
            continue;
        }
        if (lstm) {
            float *z = st + u;
            if (any)
                for (int q = 0; q < 4; q++) st[P + q * u + j] = z[q * u + j];
            const float ig = act_value(ra, z[j]), fg = act_value(ra, z[u + j]),
                        gg = act_value(act, z[2 * u + j]), og = act_value(ra, z[3 * u + j]);
            z[j] = ig, z[u + j] = fg, z[2 * u + j] = gg, z[3 * u + j] = og;
            st[j] = fg * (s > 0 ? st[j - S] : 0.0f) + ig * gg;
            h[j] = og * act_value(act, st[j]);
        } else {
            const float pz = st[j] + (rb ? rb[j] : 0.0f), pr = st[u + j] + (rb ? rb[u + j] : 0.0f);
            const float zg = act_value(ra, pz), rg = act_value(ra, pr);
            const float p = ph[e] + (rb ? rb[2 * u + j] : 0.0f);
            const float ph_ = st[2 * u + j] + (d.reset_after ? rg * p : p);
            const float hh = act_value(act, ph_);
            if (any) st[P + j] = pz, st[P + u + j] = pr, st[P + 2 * u + j] = ph_;
            st[j] = zg, st[u + j] = rg, st[2 * u + j] = hh, st[3 * u + j] = p;
            h[j] = zg * hp + (1.0f - zg) * hh;
        }
    }
}

/* SimpleRNN: h[i, s] = m ? a[i] : h[i, s - 1] (0 at s 0) */
static __global__ void simple_step_kernel(int n, int T, int u, int s, const float *mask,
                                          const float *a, float *hseq)
{
    GRID_LOOP(e, (int64_t)n * u)
    {
        const int64_t i = e / u, j = e % u, row = i * T + s;
        const float prev = s > 0 ? hseq[(row - 1) * u + j] : 0.0f;
        hseq[row * u + j] = !mask || mask[row] != 0.0f ? a[e] : prev;
    }
}

extern "C" void tfc_gpu_rnn_dropout_forward(tfc_backend *be, const tfc_rnn_dropout_desc *d,
                                            const float *x, const float *kernel,
                                            const float *rkernel, const float *bias,
                                            const float *mask, float *y, float *hseq,
                                            float *state, void *ws)
{
    gpu_ctx *g = gpu_of(be);
    const int n = d->n, T = d->t, u = d->units, in = d->in, G = gates_of(d);
    if (n <= 0 || T <= 0 || u <= 0) return;
    const int64_t nt = (int64_t)n * T, S = state_of(d), ld = (int64_t)T * S, nu = (int64_t)n * u;
    drop_ws w = carve(d, ws);
    const int lstm = d->cell == TFC_RNN_CELL_LSTM, gru = d->cell == TFC_RNN_CELL_GRU;
    draw_masks(g, d, &w);
    const int dropped = d->rate > 0.0f;
    float *pre = state + (lstm ? u : 0);
    const float *rb = gru && d->reset_after && bias ? bias + 3 * u : NULL;
    for (int q = 0; q < G; q++) { /* the input's parts */
        const float *a = x;
        if (dropped) {
            LAUNCH(g, nt * in, masked_kernel, nt, T, in, x, (int64_t)in, w.dk, q, G, w.xm);
            a = w.xm;
        }
        tfc_gpu_gemm(be, 0, 0, (int)nt, u, in, 1.0f, a, in, kernel + q * u, G * u, 0.0f,
                     pre + q * u, (int)S);
    }
    if (bias) LAUNCH(g, nt * G * u, bias_ld_kernel, nt, G * u, S, bias, pre);
    for (int s = 0; s < T; s++) {
        float *ps = pre + (int64_t)s * S;
        const float *hprev = hseq + (int64_t)(s - 1) * u;
        for (int q = 0; q < (gru ? 2 : G) && s > 0; q++) {
            LAUNCH(g, nu, masked_kernel, (int64_t)n, 1, u, hprev, (int64_t)T * u, w.rk, q, G,
                   w.hm);
            tfc_gpu_gemm(be, 0, 0, n, u, u, 1.0f, w.hm, u, rkernel + q * u, G * u, 1.0f,
                         ps + q * u, (int)ld);
        }
        if (gru) {
            if (s > 0) {
                LAUNCH(g, nu, masked_kernel, (int64_t)n, 1, u, hprev, (int64_t)T * u, w.rk, 2,
                       G, w.hm);
                if (!d->reset_after)
                    LAUNCH(g, nu, reset_kernel, n, u, (int)d->recurrent_act, ps, ld, rb, w.hm);
                tfc_gpu_gemm(be, 0, 0, n, u, u, 1.0f, w.hm, u, rkernel + 2 * u, 3 * u, 0.0f,
                             w.tmp, u);
            } else {
                TFC_CUDA_TRY(g, cudaMemsetAsync(w.tmp, 0, (size_t)nu * sizeof(float), g->stream));
            }
        }
        if (lstm || gru) {
            LAUNCH(g, nu, cells_kernel, *d, s, mask, rb, w.tmp, hseq, state);
        } else {
            tfc_gpu_copy2d(be, n, u, ps, (int)ld, w.gr, u, 0);
            tfc_gpu_act_forward(be, d->act, nu, u, w.gr, w.gr);
            LAUNCH(g, nu, simple_step_kernel, n, T, u, s, mask, w.gr, hseq);
        }
    }
    tfc_gpu_rnn_output(be, n, T, u, d->return_sequences, hseq, y);
}

/* Step s's cells in reverse (cpu_rnn_dropout.c's cells_backward); the SimpleRNN's act'
 * comes in gr (its rows' act_backward), placed here. */
static __global__ void cells_back_kernel(tfc_rnn_dropout_desc d, int s, const float *mask,
                                         const float *hseq, const float *state, const float *gr,
                                         float *dh, float *dc, float *dzi, float *dzr)
{
    const int u = d.units, T = d.t, act = d.act, ra = d.recurrent_act;
    const int G = d.cell == TFC_RNN_CELL_LSTM ? 4 : d.cell == TFC_RNN_CELL_GRU ? 3 : 1;
    const int64_t S = state_of(&d), P = d.cell == TFC_RNN_CELL_LSTM ? 5 * u : 4 * u;
    GRID_LOOP(e, (int64_t)d.n * u)
    {
        const int64_t i = e / u, j = e % u, row = i * T + s;
        float *dz = dzi + row * G * u;
        if (mask && mask[row] == 0.0f) {
            for (int q = 0; q < G; q++) dz[q * u + j] = 0.0f;
            if (d.cell == TFC_RNN_CELL_GRU) dzr[row * u + j] = 0.0f;
            continue;
        }
        const float *st = state + row * S;
        /* the sums before the activations (any_acts), else the outputs: tanh's and
         * sigmoid's derivatives read only those */
        const float *pre = S > P ? st + P : NULL;
        if (d.cell == TFC_RNN_CELL_LSTM) {
            const float *gt = st + u, *pv = pre ? pre : gt;
            const float ig = gt[j], fg = gt[u + j], gg = gt[2 * u + j], og = gt[3 * u + j];
            const float tc = act_value(act, st[j]), cp = s > 0 ? st[j - S] : 0.0f;
            const float dcj = dc[e] + dh[e] * og * act_deriv(act, st[j], tc);
            dz[j] = dcj * gg * act_deriv(ra, pv[j], ig);
            dz[u + j] = dcj * cp * act_deriv(ra, pv[u + j], fg);
            dz[2 * u + j] = dcj * ig * act_deriv(act, pv[2 * u + j], gg);
            dz[3 * u + j] = dh[e] * tc * act_deriv(ra, pv[3 * u + j], og);
            dc[e] = dcj * fg;
            dh[e] = 0.0f;
        } else if (d.cell == TFC_RNN_CELL_GRU) {
            const float hp = s > 0 ? hseq[(row - 1) * u + j] : 0.0f, *pv = pre ? pre : st;
            const float zg = st[j], rg = st[u + j], hh = st[2 * u + j], p = st[3 * u + j];
            const float dah = dh[e] * (1.0f - zg) * act_deriv(act, pv[2 * u + j], hh);
            dz[j] = dh[e] * (hp - hh) * act_deriv(ra, pv[j], zg);
            dz[2 * u + j] = dah;
            dz[u + j] = d.reset_after ? dah * p * act_deriv(ra, pv[u + j], rg) : 0.0f;
            dzr[row * u + j] = d.reset_after ? dah * rg : dah;
            dh[e] *= zg;
        } else {
            dz[j] = gr[e];
            dh[e] = 0.0f;
        }
    }
}

/* reset_after false, with dq = dah R_hᵀ in dq: r's gradient and dh += dq ⊙ r ⊙ rk_h */
static __global__ void reset_back_kernel(tfc_rnn_dropout_desc d, int s, const float *mask,
                                         const float *hseq, const float *state, const float *rk,
                                         const float *dq, float *dzi, float *dh)
{
    const int u = d.units, T = d.t, ra = d.recurrent_act;
    const int64_t S = state_of(&d);
    GRID_LOOP(e, (int64_t)d.n * u)
    {
        const int64_t i = e / u, j = e % u, row = i * T + s;
        if (mask && mask[row] == 0.0f) continue;
        const float *st = state + row * S;
        const float rg = st[u + j], pr = S > 4 * u ? st[5 * u + j] : rg;
        const float k = rk[(i * 3 + 2) * u + j];
        dzi[row * 3 * u + u + j] =
            dq[e] * hseq[(row - 1) * u + j] * k * act_deriv(ra, pr, rg);
        dh[e] += dq[e] * rg * k;
    }
}

/* dh[i, j] += t[i, j] rk[i, q, j] */
static __global__ void state_add_kernel(int n, int u, int q, int G, const float *t,
                                        const float *rk, float *dh)
{
    GRID_LOOP(e, (int64_t)n * u) dh[e] += t[e] * rk[((e / u) * G + q) * u + e % u];
}

/* dx[r, c] += v[r, c] dk[(r / T) G + q, c] */
static __global__ void dx_add_kernel(int64_t nt, int T, int in, int q, int G, const float *v,
                                     const float *dk, float *dx)
{
    GRID_LOOP(e, nt * in)
    {
        const int64_t r = e / in, c = e % in;
        dx[e] += v[e] * dk[((r / T) * G + q) * in + c];
    }
}

/* hp[r, j] = h_prev[r, j] rk[(r / T) G + q, j] (times r[r, j] for the GRU's h gate without
 * reset_after) */
static __global__ void prev_kernel(int64_t nt, int T, int u, int q, int G, int with_r,
                                   int64_t S, const float *hseq, const float *state,
                                   const float *rk, float *hp)
{
    GRID_LOOP(e, nt * u)
    {
        const int64_t r = e / u, j = e % u;
        const float h = r % T ? hseq[(r - 1) * u + j] : 0.0f;
        const float k = rk[((r / T) * G + q) * u + j];
        hp[e] = h * k * (with_r ? state[r * S + u + j] : 1.0f);
    }
}

extern "C" void tfc_gpu_rnn_dropout_backward(tfc_backend *be, const tfc_rnn_dropout_desc *d,
                                             const float *x, const float *kernel,
                                             const float *rkernel, const float *mask,
                                             const float *hseq, const float *state,
                                             const float *dy, float *dx, float *dkernel,
                                             float *drkernel, float *dbias, void *ws)
{
    gpu_ctx *g = gpu_of(be);
    const int n = d->n, T = d->t, u = d->units, in = d->in, G = gates_of(d), GU = G * u;
    if (n <= 0 || T <= 0 || u <= 0) return;
    const int64_t nt = (int64_t)n * T, nu = (int64_t)n * u, S = state_of(d);
    const int gru = d->cell == TFC_RNN_CELL_GRU;
    drop_ws w = carve(d, ws);
    draw_masks(g, d, &w);
    const int dropped = d->rate > 0.0f;
    TFC_CUDA_TRY(g, cudaMemsetAsync(w.dh, 0, (size_t)nu * sizeof(float), g->stream));
    TFC_CUDA_TRY(g, cudaMemsetAsync(w.dc, 0, (size_t)nu * sizeof(float), g->stream));
    for (int s = T - 1; s >= 0; s--) {
        if (d->return_sequences)
            tfc_gpu_copy2d(be, n, u, dy + (int64_t)s * u, T * u, w.dh, u, 1);
        else if (s == T - 1)
            tfc_gpu_axpy(be, nu, 1.0f, dy, w.dh);
        if (d->cell == TFC_RNN_CELL_SIMPLE) {
            tfc_gpu_copy2d(be, n, u, state + (int64_t)s * S, (int)(T * S), w.hm, u, 0);
            tfc_gpu_copy2d(be, n, u, hseq + (int64_t)s * u, T * u, w.tmp, u, 0);
            tfc_gpu_act_backward(be, d->act, nu, u, w.hm, w.tmp, w.dh, w.gr, 1);
        }
        LAUNCH(g, nu, cells_back_kernel, *d, s, mask, hseq, state, w.gr, w.dh, w.dc, w.dzi,
               w.dzr);
        if (gru && !d->reset_after && s > 0) {
            tfc_gpu_gemm(be, 0, 1, n, u, u, 1.0f, w.dzr + (int64_t)s * u, T * u, rkernel + 2 * u,
                         3 * u, 0.0f, w.tmp, u);
            LAUNCH(g, nu, reset_back_kernel, *d, s, mask, hseq, state, w.rk, w.tmp, w.dzi, w.dh);
        }
        for (int q = 0; q < G && s > 0; q++) { /* dh_{s-1} += (dz_q R_qᵀ) ⊙ rk_q */
            if (gru && q == 2 && !d->reset_after) continue;
            const int h_gate = gru && q == 2;
            const float *dz = h_gate ? w.dzr + (int64_t)s * u : w.dzi + (int64_t)s * GU + q * u;
            tfc_gpu_gemm(be, 0, 1, n, u, u, 1.0f, dz, h_gate ? T * u : T * GU, rkernel + q * u,
                         GU, 0.0f, w.tmp, u);
            LAUNCH(g, nu, state_add_kernel, n, u, q, G, w.tmp, w.rk, w.dh);
        }
    }
    for (int q = 0; q < G; q++) { /* the weight gradients and dx, gate by gate */
        const float *dz = w.dzi + q * u, *a = x;
        if (dropped) {
            LAUNCH(g, nt * in, masked_kernel, nt, T, in, x, (int64_t)in, w.dk, q, G, w.xm);
            a = w.xm;
        }
        tfc_gpu_gemm(be, 1, 0, in, u, (int)nt, 1.0f, a, in, dz, GU, 1.0f, dkernel + q * u, GU);
        if (dx && dropped) {
            tfc_gpu_gemm(be, 0, 1, (int)nt, in, u, 1.0f, dz, GU, kernel + q * u, GU, 0.0f, w.xm,
                         in);
            LAUNCH(g, nt * in, dx_add_kernel, nt, T, in, q, G, w.xm, w.dk, dx);
        } else if (dx) {
            tfc_gpu_gemm(be, 0, 1, (int)nt, in, u, 1.0f, dz, GU, kernel + q * u, GU, 1.0f, dx, in);
        }
        LAUNCH(g, nt * u, prev_kernel, nt, T, u, q, G, gru && q == 2 && !d->reset_after, S,
               hseq, state, w.rk, w.hp);
        const int from_dzr = gru && q == 2 && d->reset_after;
        tfc_gpu_gemm(be, 1, 0, u, u, (int)nt, 1.0f, w.hp, u, from_dzr ? w.dzr : dz,
                     from_dzr ? u : GU, 1.0f, drkernel + q * u, GU);
    }
    if (!dbias) return;
    if (gru && d->reset_after) { /* [2, 3u]: the input row, then z's, r's and dph's sums */
        TFC_CUDA_TRY(g, cudaMemsetAsync(w.db, 0, (size_t)GU * sizeof(float), g->stream));
        tfc_gpu_bias_grad(be, nt, GU, w.dzi, w.db);
        tfc_gpu_axpy(be, GU, 1.0f, w.db, dbias);
        tfc_gpu_axpy(be, 2 * u, 1.0f, w.db, dbias + GU);
        tfc_gpu_bias_grad(be, nt, u, w.dzr, dbias + GU + 2 * u);
    } else {
        tfc_gpu_bias_grad(be, nt, GU, w.dzi, dbias);
    }
}
