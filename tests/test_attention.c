/* MultiHeadAttention and the CPU's blockwise attention (cpu_attention.c): the kernel against
 * a naive reference that holds the whole score matrix (lengths that are not a multiple of
 * the block, and several blocks long), its independence of the thread count (with the AVX2 +
 * FMA block products and with the baseline ones), the memory plan of a long sequence (O(T),
 * not a T x T score matrix), outputs against Keras 3 (fixtures
 * written by tests/ref/keras_attention.py), a training run resumed bit-exactly, and the
 * refusals (a backend without the kernel, unsupported arguments). ONNX export: test_onnx.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"
#include "graph/model.h"
#include "layers/layer.h"
#include "solver/solver.h"
#include "util/gradcheck.h"
#include "util/testutil.h"

/* ---- the kernel against a naive reference ------------------------------------------------ */

typedef struct attn_io {
    float *q, *k, *v, *dout, *qmask, *kmask;   /* inputs */
    float *o, *lse, *dq, *dk, *dv;             /* outputs */
} attn_io;

static float *filled(size_t n, float lo, float hi, unsigned seed)
{
    float *p = malloc(n * 4 + 4);
    tfc_test_fill(p, (int64_t)n, lo, hi, seed);
    return p;
}

static size_t nq(const tfc_attn_desc *d) { return (size_t)d->n * d->tq * d->heads; }
static size_t nk(const tfc_attn_desc *d) { return (size_t)d->n * d->tk * d->heads; }

/* Inputs for d (masks: key padding at the end of each example, 0, 7, 14, ... steps; the
 * query mask the same where tq == tk), outputs zeroed. */
static attn_io make_io(const tfc_attn_desc *d, int masked)
{
    attn_io io;
    io.q = filled(nq(d) * d->dk, -2, 2, 1);
    io.k = filled(nk(d) * d->dk, -2, 2, 2);
    io.v = filled(nk(d) * d->dv, -1, 1, 3);
    io.dout = filled(nq(d) * d->dv, -1, 1, 4);
    io.qmask = io.kmask = NULL;
    if (masked) {
        io.kmask = malloc((size_t)d->n * d->tk * 4);
        for (int b = 0; b < d->n; b++)
            for (int j = 0; j < d->tk; j++) io.kmask[b * d->tk + j] = j < d->tk - 7 * b;
        if (d->tq == d->tk) io.qmask = io.kmask;
    }
    io.o = calloc(nq(d) * d->dv, 4);
    io.lse = calloc((size_t)d->n * d->heads * d->tq, 4);
    io.dq = calloc(nq(d) * d->dk, 4);
    io.dk = calloc(nk(d) * d->dk, 4);
    io.dv = calloc(nk(d) * d->dv, 4);
    return io;
}

static void free_io(attn_io *io)
{
    if (io->qmask != io->kmask) free(io->qmask);
    free(io->kmask);
    free(io->q), free(io->k), free(io->v), free(io->dout);
    free(io->o), free(io->lse), free(io->dq), free(io->dk), free(io->dv);
}

static void run(tfc_backend *be, const tfc_attn_desc *d0, attn_io *io)
{
    tfc_attn_desc d = *d0;
    d.qmask = io->qmask, d.kmask = io->kmask;
    be->ops->attention_forward(be, &d, io->q, io->k, io->v, io->o, io->lse);
    be->ops->attention_backward(be, &d, io->q, io->k, io->v, io->o, io->lse, io->dout, io->dq,
                                io->dk, io->dv);
}

/* The same in double with the whole score row at once:
 *   p = softmax(s) over seen keys; o = sum p z v; dp = z dout.v; ds = p (dp - sum p dp)
 *   dq = scale sum ds k, dk = scale sum ds q, dv = sum p z dout (a row that sees no key:
 *   uniform over every key, or zeros) */
static void naive(const tfc_attn_desc *d, const attn_io *io, double *o, double *dq, double *dk,
                  double *dv)
{
    const int H = d->heads, tq = d->tq, tk = d->tk;
    double *s = malloc((size_t)tk * 8), *p = malloc((size_t)tk * 8), *z = malloc((size_t)tk * 8);
    memset(o, 0, nq(d) * d->dv * 8), memset(dq, 0, nq(d) * d->dk * 8);
    memset(dk, 0, nk(d) * d->dk * 8), memset(dv, 0, nk(d) * d->dv * 8);
    for (int b = 0; b < d->n; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < tq; i++) {
                const float *qi = io->q + (((size_t)b * tq + i) * H + h) * d->dk;
                const float *doi = io->dout + (((size_t)b * tq + i) * H + h) * d->dv;
                double *oi = o + (((size_t)b * tq + i) * H + h) * d->dv;
                double mx = -INFINITY;
                int any = 0;
                const uint64_t row = ((uint64_t)b * H + h) * tq + i;
                for (int j = 0; j < tk; j++) {
                    const float *kj = io->k + (((size_t)b * tk + j) * H + h) * d->dk;
                    int seen = (!io->kmask || io->kmask[b * tk + j]) &&
                               (!io->qmask || io->qmask[b * tq + i]) && (!d->causal || j <= i) &&
                               (d->window <= 0 || abs(i - j) < d->window);
                    double acc = 0;
                    for (int c = 0; c < d->dk; c++) acc += (double)qi[c] * kj[c];
                    s[j] = seen ? d->scale * acc : -INFINITY;
                    any |= seen;
                    if (s[j] > mx) mx = s[j];
                    float u = tfc_rng_uniform(d->key, d->step, row * ((tk + 3) & ~3) + j);
                    z[j] = d->rate > 0 ? (u >= d->rate ? 1.0 / (1.0 - d->rate) : 0) : 1;
                }
                if (!any) {
                    if (!d->uniform) continue;
                    for (int j = 0; j < tk; j++) {
                        const float *vj = io->v + (((size_t)b * tk + j) * H + h) * d->dv;
                        double *dvj = dv + (((size_t)b * tk + j) * H + h) * d->dv;
                        for (int c = 0; c < d->dv; c++) {
                            oi[c] += vj[c] / (double)tk;
                            dvj[c] += doi[c] / (double)tk;
                        }
                    }
                    continue;
                }
                double sum = 0, D = 0;
                for (int j = 0; j < tk; j++) sum += p[j] = s[j] == -INFINITY ? 0 : exp(s[j] - mx);
                for (int j = 0; j < tk; j++) {
                    p[j] /= sum;
                    const float *vj = io->v + (((size_t)b * tk + j) * H + h) * d->dv;
                    for (int c = 0; c < d->dv; c++) oi[c] += p[j] * z[j] * vj[c];
                }
                for (int c = 0; c < d->dv; c++) D += oi[c] * doi[c];
                for (int j = 0; j < tk; j++) {
                    if (p[j] == 0) continue;
                    const float *kj = io->k + (((size_t)b * tk + j) * H + h) * d->dk;
                    const float *vj = io->v + (((size_t)b * tk + j) * H + h) * d->dv;
                    double *dkj = dk + (((size_t)b * tk + j) * H + h) * d->dk;
                    double *dvj = dv + (((size_t)b * tk + j) * H + h) * d->dv;
                    double *dqi = dq + (((size_t)b * tq + i) * H + h) * d->dk;
                    double dp = 0;
                    for (int c = 0; c < d->dv; c++) dp += (double)doi[c] * vj[c];
                    const double ds = p[j] * (z[j] * dp - D);
                    for (int c = 0; c < d->dv; c++) dvj[c] += p[j] * z[j] * doi[c];
                    for (int c = 0; c < d->dk; c++) {
                        dkj[c] += d->scale * ds * qi[c];
                        dqi[c] += d->scale * ds * kj[c];
                    }
                }
            }
    free(s), free(p), free(z);
}

/* max |a - b| / (1 + |b|) */
static double max_err(const float *a, const double *b, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs(a[i] - b[i]) / (1 + fabs(b[i]));
        if (!(e <= worst)) worst = e;
    }
    return worst;
}

static void check_against_naive(const char *what, tfc_attn_desc d, int masked)
{
    tfc_backend *be = tfc_cpu_backend_create(2);
    attn_io io = make_io(&d, masked);
    run(be, &d, &io);
    double *o = malloc(nq(&d) * d.dv * 8), *dq = malloc(nq(&d) * d.dk * 8);
    double *dk = malloc(nk(&d) * d.dk * 8), *dv = malloc(nk(&d) * d.dv * 8);
    naive(&d, &io, o, dq, dk, dv);
    double e[4] = {max_err(io.o, o, nq(&d) * d.dv), max_err(io.dq, dq, nq(&d) * d.dk),
                   max_err(io.dk, dk, nk(&d) * d.dk), max_err(io.dv, dv, nk(&d) * d.dv)};
    for (int k = 0; k < 4; k++) {
        if (!(e[k] < 2e-5))
            fprintf(stderr, "\n%s: %s differs by %.3g\n", what,
                    (const char *[]){"o", "dq", "dk", "dv"}[k], e[k]);
        CU_ASSERT(e[k] < 2e-5);
    }
    free(o), free(dq), free(dk), free(dv);
    free_io(&io);
    tfc_backend_free(be);
}

/* Lengths past several 64-key blocks and not a multiple of one; causal; tq != tk; padding
 * (a fully padded example: rows that see no key, uniform and zero); dropout; sliding
 * windows. */
static void test_blocked_matches_naive(void)
{
    const tfc_attn_desc base = {.n = 2, .heads = 3, .tq = 150, .tk = 150, .dk = 8, .dv = 5,
                                .uniform = 1, .scale = 0.35f};
    tfc_attn_desc d = base;
    check_against_naive("plain", d, 0);
    d.causal = 1;
    check_against_naive("causal", d, 0);
    d = base, d.tq = 70, d.tk = 201;
    check_against_naive("cross", d, 0);
    d.causal = 1;
    check_against_naive("cross causal", d, 0);
    d = base, d.n = 3, d.tk = d.tq = 9;
    check_against_naive("a padded example, uniform", d, 1);
    d.uniform = 0;
    check_against_naive("a padded example, zeros", d, 1);
    d = base, d.causal = 1;
    check_against_naive("causal padded", d, 1);
    d.rate = 0.3f, d.key = 99, d.step = 4, d.uniform = 0;
    check_against_naive("causal padded dropout", d, 1);
    d = base, d.window = 40; /* bands across block edges, blocks skipped on both sides */
    check_against_naive("window", d, 0);
    d.causal = 1;
    check_against_naive("causal window", d, 1);
    d = base, d.tq = 201, d.tk = 70, d.window = 9; /* rows past tk + 8 see no key */
    check_against_naive("cross window", d, 0);
    /* the packed blocks' dims: key and value widths of a vector, a few and one past, and
     * several of the block products' 16-column tiles */
    const int dims[][2] = {{8, 8}, {32, 32}, {33, 8}, {8, 33}, {32, 17}, {64, 40}, {128, 24}};
    for (int k = 0; k < 7; k++) {
        d = base, d.tq = 37, d.tk = 53, d.dk = dims[k][0], d.dv = dims[k][1];
        check_against_naive("cross, dims", d, 0);
        d.causal = 1, d.window = 20;
        check_against_naive("cross causal window, dims", d, 0);
        d = base, d.tq = d.tk = 53, d.dk = dims[k][0], d.dv = dims[k][1], d.causal = 1;
        d.rate = 0.2f, d.key = 7, d.step = 2;
        check_against_naive("causal padded dropout, dims", d, 1);
    }
}

/* The results do not depend on the thread count: 1 and 2 threads give the same bits. */
static void test_threads_same_bits(void)
{
    tfc_attn_desc d = {.n = 2, .heads = 2, .tq = 257, .tk = 190, .dk = 16, .dv = 16,
                       .causal = 1, .uniform = 1, .scale = 0.25f, .rate = 0.1f, .key = 5};
    attn_io io[2];
    for (int t = 0; t < 2; t++) {
        tfc_backend *be = tfc_cpu_backend_create(t + 1);
        io[t] = make_io(&d, 1);
        run(be, &d, &io[t]);
        tfc_backend_free(be);
    }
    CU_ASSERT_EQUAL(memcmp(io[0].o, io[1].o, nq(&d) * d.dv * 4), 0);
    CU_ASSERT_EQUAL(memcmp(io[0].lse, io[1].lse, (size_t)d.n * d.heads * d.tq * 4), 0);
    CU_ASSERT_EQUAL(memcmp(io[0].dq, io[1].dq, nq(&d) * d.dk * 4), 0);
    CU_ASSERT_EQUAL(memcmp(io[0].dk, io[1].dk, nk(&d) * d.dk * 4), 0);
    CU_ASSERT_EQUAL(memcmp(io[0].dv, io[1].dv, nk(&d) * d.dv * 4), 0);
    free_io(&io[0]), free_io(&io[1]);
}

/* The baseline block products (CPUs without AVX2 and FMA) pass the same two tests. */
static void test_baseline_kernel(void)
{
    TFC_ASSERT(tfc_cpu_attention_isa(0));
    test_blocked_matches_naive();
    test_threads_same_bits();
    tfc_cpu_attention_isa(-1);
    printf("\n  the baseline; %s", tfc_cpu_attention_isa(1) ? "AVX2 + FMA in the other tests"
                                                          : "no AVX2 + FMA on this CPU");
    tfc_cpu_attention_isa(-1);
}

/* ---- memory ------------------------------------------------------------------------------ */

static size_t allocated;
static void *(*cpu_alloc)(tfc_backend *, size_t);
static void *counting_alloc(tfc_backend *be, size_t bytes)
{
    allocated += bytes;
    return cpu_alloc(be, bytes);
}

/* Training memory at T = 2048 (4 heads): the plan is within 5% of what binding allocates,
 * grows O(T) (twice T: about twice the bytes), and is far below one T x T score matrix per
 * head; a training step runs. */
static void test_memory_plan_long(void)
{
    static const char *fmt = "input: {shape: [%d, 32]}\nlayers:\n"
                             "  - MultiHeadAttention: {num_heads: 4, key_dim: 8,"
                             " use_causal_mask: true}\n"
                             "  - Dense: {units: 2}\nloss: mse\n";
    char yaml[256];
    size_t total[2];
    tfc_backend *be = tfc_cpu_backend_create(2);
    tfc_backend_ops counting = *be->ops;
    const tfc_backend_ops *cpu_ops = be->ops;
    cpu_alloc = cpu_ops->alloc;
    counting.alloc = counting_alloc;
    for (int k = 0; k < 2; k++) {
        const int T = 1024 << k;
        snprintf(yaml, sizeof yaml, fmt, T);
        tfc_model *m = tfc_test_model(yaml);
        tfc_error err;
        tfc_error_clear(&err);
        tfc_memory_plan plan;
        TFC_ASSERT(m && tfc_model_plan_memory(m, be, 2, &plan, &err) == TFC_OK);
        total[k] = plan.params + plan.grads + plan.arena;
        allocated = 0;
        be->ops = &counting;
        TFC_ASSERT(tfc_model_bind(m, be, 2, &err) == TFC_OK);
        be->ops = cpu_ops;
        double off = fabs((double)allocated - (double)total[k]) / (double)allocated;
        if (k == 1)
            printf("\n  T = %d, batch 2: planned %.2f MiB, bound %.2f MiB; the scores "
                   "[batch, heads, T, T] alone: %.2f MiB\n", T, total[k] / 1048576.0,
                   allocated / 1048576.0, 2.0 * 4 * T * T * 4 / 1048576.0);
        CU_ASSERT(off < 0.05);
        if (k == 1) { /* a training step runs at this length */
            TFC_ASSERT(tfc_model_init_weights(m, 1, &err) == TFC_OK);
            float *x = filled((size_t)2 * T * 32, -1, 1, 8);
            float *y = filled((size_t)2 * T * 2, 0, 1, 9);
            tfc_batch_result r;
            CU_ASSERT(tfc_model_forward(m, x, 2, 1, 1, 1, &err) == TFC_OK);
            CU_ASSERT(tfc_model_loss(m, y, 1, &r, &err) == TFC_OK);
            tfc_model_backward(m);
            CU_ASSERT(isfinite(r.loss));
            free(x), free(y);
        }
        tfc_model_free(m);
    }
    /* O(T): doubling T about doubles the memory; a materialised [batch, heads, T, T] score
     * matrix at T = 2048 alone would be 128 MiB */
    CU_ASSERT((double)total[1] / (double)total[0] < 2.1);
    CU_ASSERT(total[1] < (size_t)2 * 4 * 2048 * 2048 * 4 / 10);
    tfc_backend_free(be);
}

/* ---- Keras 3 parity ---------------------------------------------------------------------- */

typedef struct keras_case {
    const char *file;
    const char *yaml;
} keras_case;

static const keras_case keras_cases[] = {
    {"self", "input: {shape: [5, 8]}\nlayers:\n"
             "  - MultiHeadAttention: {name: mha, num_heads: 2, key_dim: 4}\n"},
    {"causal", "input: {shape: [7, 6]}\nlayers:\n"
               "  - MultiHeadAttention: {name: mha, num_heads: 3, key_dim: 2, output_shape: 4,"
               " use_causal_mask: true}\n"},
    {"value_dim", "input: {shape: [7, 6]}\nlayers:\n"
                  "  - MultiHeadAttention: {name: mha, num_heads: 3, key_dim: 2, value_dim: 5,"
                  " output_shape: 4, dropout: 0.1, use_causal_mask: true}\n"},
    {"cross", "input: {shape: [6, 8]}\nlayers:\n"
              "  - Reshape: {name: kv, target_shape: [3, 16]}\n  - Dense: {name: k, units: 5}\n"
              "  - MultiHeadAttention: {name: mha, inputs: [input, kv, k], num_heads: 2,"
              " key_dim: 4, use_bias: false}\n"},
    {"masked", "input: {shape: [6], dtype: int32}\nlayers:\n"
               "  - Embedding: {name: emb, input_dim: 12, output_dim: 8, mask_zero: true}\n"
               "  - MultiHeadAttention: {name: mha, num_heads: 2, key_dim: 4}\n"},
    {"window", "input: {shape: [6, 8]}\nlayers:\n"
               "  - MultiHeadAttention: {name: mha, num_heads: 2, key_dim: 4,"
               " sliding_window: 2}\n"},
    {"masked_causal_dropout", "input: {shape: [6], dtype: int32}\nlayers:\n"
                              "  - Embedding: {name: emb, input_dim: 12, output_dim: 8,"
                              " mask_zero: true}\n"
                              "  - MultiHeadAttention: {name: mha, num_heads: 2, key_dim: 4,"
                              " dropout: 0.25, use_causal_mask: true}\n"},
};

/* Each fixture's weights loaded by name (strictly) into the model bound from the same YAML:
 * the outputs agree with Keras's within 1e-5 relative plus 1e-6 of the largest output (float32
 * sums in another order: an output near 0 is a difference of larger terms; SPEC §5d's bound
 * for ONNX), and tfc saves them back under the same names. */
static void test_keras_parity(void)
{
    for (size_t c = 0; c < sizeof keras_cases / sizeof *keras_cases; c++) {
        char path[256];
        snprintf(path, sizeof path, "tests/ref/attention/%s.safetensors", keras_cases[c].file);
        tfc_error err;
        tfc_error_clear(&err);
        tfc_st_file *f = tfc_st_open(path, &err);
        TFC_ASSERT(f);
        const tfc_st_tensor *tx = tfc_st_find(f, "x"), *ty = tfc_st_find(f, "y");
        TFC_ASSERT(tx && ty);
        const int batch = (int)tx->shape.dim[0];
        const int64_t nx = tfc_shape_numel(&tx->shape), ny = tfc_shape_numel(&ty->shape);
        float *x = malloc((size_t)nx * 4), *want = malloc((size_t)ny * 4);
        float *got = malloc((size_t)ny * 4);
        if (tx->dtype == TFC_I32) memcpy(x, tx->data, (size_t)nx * 4);
        else tfc_st_tensor_to_f32(tx, x);
        tfc_st_tensor_to_f32(ty, want);
        tfc_model *m = tfc_test_model(keras_cases[c].yaml);
        tfc_backend *be = tfc_cpu_backend_create(1);
        TFC_ASSERT(m && tfc_model_bind(m, be, batch, &err) == TFC_OK);
        CU_ASSERT_EQUAL(tfc_model_load_weights(m, path, NULL, &err), TFC_OK);
        CU_ASSERT_EQUAL(tfc_model_forward(m, x, batch, 0, 1, 0, &err), TFC_OK);
        tfc_model_get_output(m, got);
        double abs_err = 0, rel_err = 0, top = 0;
        int close = 1;
        for (int64_t i = 0; i < ny; i++) top = fabs(want[i]) > top ? fabs(want[i]) : top;
        for (int64_t i = 0; i < ny; i++) {
            double e = fabs((double)got[i] - want[i]);
            close &= e <= 1e-5 * fabs(want[i]) + 1e-6 * top;
            if (!(e <= abs_err)) abs_err = e;
            e /= fabs(want[i]) > 1e-3 ? fabs(want[i]) : 1e-3;
            if (!(e <= rel_err)) rel_err = e;
        }
        printf("\n  keras %-22s max abs %.2e (max |y| %.2f), max rel %.2e%s",
               keras_cases[c].file, abs_err, top, rel_err,
               c + 1 == sizeof keras_cases / sizeof *keras_cases ? "\n" : "");
        CU_ASSERT(close);
        /* the reverse direction: tfc's weights file holds Keras's variable paths, shapes and
         * values, every one of them and nothing else */
        const char *saved = tfc_test_path("mha_saved.safetensors");
        CU_ASSERT_EQUAL(tfc_model_save_weights(m, saved, &err), TFC_OK);
        tfc_st_file *g = tfc_st_open(saved, &err);
        TFC_ASSERT(g);
        CU_ASSERT_EQUAL(tfc_st_count(g) + 2, tfc_st_count(f));
        for (int i = 0; i < tfc_st_count(g); i++) {
            const tfc_st_tensor *mine = tfc_st_tensor_at(g, i);
            const tfc_st_tensor *theirs = tfc_st_find(f, mine->name);
            CU_ASSERT(theirs && tfc_shape_equal(&mine->shape, &theirs->shape) &&
                      !memcmp(mine->data, theirs->data, mine->nbytes));
        }
        tfc_st_close(g);
        tfc_model_free(m);
        tfc_backend_free(be);
        tfc_st_close(f);
        free(x), free(want), free(got);
    }
}

/* ---- training -------------------------------------------------------------------------- */

static const char *const train_yaml =
    "model:\n"
    "  name: att\n"
    "  input: {shape: [16]}\n"
    "  layers:\n"
    "    - Reshape: {target_shape: [4, 4]}\n"
    "    - MultiHeadAttention: {num_heads: 2, key_dim: 4, dropout: 0.2, use_causal_mask: true}\n"
    "    - Flatten: {}\n"
    "    - Dense: {units: 4}\n"
    "data:\n"
    "  train:\n"
    "    source: {type: npy, features: att_x.npy, labels: att_y.npy}\n"
    "    pipeline: [{shuffle: {buffer_size: 64}}, {repeat: {}}, {batch: {batch_size: 16}}]\n"
    "optimizer: {type: adam, learning_rate: 0.03}\n"
    "max_iter: 80\n"
    "test_interval: 0\n"
    "snapshot: {interval: 40, keep: 0}\n"
    "seed: 3\n";

static tfc_status train(const char *solver, const char *out, const char *resume,
                        tfc_train_result *res, tfc_error *err)
{
    tfc_solver_options o = {0};
    o.out_dir = tfc_test_path(out);
    o.resume = resume;
    o.threads = 2;
    tfc_error_clear(err);
    tfc_solver *s = tfc_solver_load(solver, &o, err);
    if (!s) {
        printf("\n%s", err->text);
        return err->code;
    }
    tfc_status st = tfc_solver_train(s, res, err);
    tfc_solver_free(s);
    return st;
}

/* A small attention model trains (the loss falls), snapshots its weights and optimizer
 * slots under the `mha/query/kernel` names, and a run resumed halfway ends on the same bits
 * (dropout regenerated from the step). */
static void test_train_resume_exact(void)
{
    tfc_test_write_split("att_x.npy", "att_y.npy", 256, 5);
    char solver[1024], path[2][1200];
    snprintf(solver, sizeof solver, "%s", tfc_test_write("att.yaml", train_yaml, -1));
    tfc_train_result *r = calloc(2, sizeof *r);
    tfc_error err;
    CU_ASSERT_EQUAL_FATAL(train(solver, "att_full", NULL, &r[0], &err), TFC_OK);
    snprintf(path[0], sizeof path[0], "%s/snapshots/att_iter_40.state",
             tfc_test_path("att_full"));
    CU_ASSERT_EQUAL_FATAL(train(solver, "att_resumed", path[0], &r[1], &err), TFC_OK);
    CU_ASSERT_EQUAL(r[1].iterations, 80);
    /* from log(4) = 1.39 at the start (4 classes) */
    printf("\n  smoothed training loss after 80 steps: %.3f\n", r[0].train.loss);
    CU_ASSERT(r[0].have_train && r[0].train.loss < 1.2);
    size_t len[2];
    char *bytes[2];
    for (int k = 0; k < 2; k++) {
        snprintf(path[k], sizeof path[k], "%s/final.safetensors",
                 tfc_test_path(k ? "att_resumed" : "att_full"));
        bytes[k] = tfc_test_read(path[k], &len[k]);
    }
    TFC_ASSERT(bytes[0] && bytes[1]);
    CU_ASSERT(len[0] == len[1] && memcmp(bytes[0], bytes[1], len[0]) == 0);
    tfc_st_file *f = tfc_st_open(path[0], &err);
    CU_ASSERT_PTR_NOT_NULL(f && tfc_st_find(f, "multi_head_attention/query/kernel"));
    tfc_st_close(f);
    free(bytes[0]), free(bytes[1]), free(r);
}

/* ---- refusals ---------------------------------------------------------------------------- */

static const char *const mha_yaml = "input: {shape: [4, 6]}\nlayers:\n"
                                    "  - MultiHeadAttention: {name: att, num_heads: 2,"
                                    " key_dim: 3}\n";

/* A backend without the attention kernels (the CPU's table, the slots emptied) refuses the
 * model at bind, naming the layer and the op. */
static void test_gpu_refused(void)
{
    tfc_model *m = tfc_test_model(mha_yaml);
    tfc_backend *be = tfc_cpu_backend_create(1);
    TFC_ASSERT(m && be);
    tfc_backend_ops lacking = *be->ops;
    const tfc_backend_ops *cpu_ops = be->ops;
    lacking.attention_forward = NULL;
    lacking.attention_backward = NULL;
    be->ops = &lacking;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'att'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no kernel for MultiHeadAttention yet"));
    be->ops = cpu_ops;
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* Arguments tfc does not support are errors naming them. */
static void test_unsupported_arguments(void)
{
    static const char *const bad[][2] = {
        {"attention_axes: [2]", "attention_axes"},
        {"output_shape: [2, 3]", "output_shape"},
        {"flash_attention: true, dropout: 0.1", "flash_attention"},
        /* Keras penalises each projection's output: refused, not a quarter of it */
        {"activity_regularizer: l2", "activity_regularizer: not supported by tfc: only null"},
        {"sliding_window: 0", "sliding_window"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [4, 6]}\nlayers:\n  - MultiHeadAttention: "
                                    "{num_heads: 2, key_dim: 3, %s}\n", bad[i][0]);
        tfc_test_expect_model_error(yaml, bad[i][1]);
    }
}

TFC_TEST_MAIN("attention", {"blocked_matches_naive", test_blocked_matches_naive},
              {"threads_same_bits", test_threads_same_bits},
              {"baseline_kernel", test_baseline_kernel},
              {"memory_plan_long", test_memory_plan_long}, {"keras_parity", test_keras_parity},
              {"train_resume_exact", test_train_resume_exact},
              {"gpu_refused", test_gpu_refused},
              {"unsupported_arguments", test_unsupported_arguments})
