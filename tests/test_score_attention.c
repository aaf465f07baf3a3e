/* Attention (Luong) and AdditiveAttention (Bahdanau): the CPU's score_attention op against
 * central differences of its own forward (every score mode, learned scales away from 1,
 * padding masks, the causal mask, dropout), its bits independent of the thread count; Keras
 * 3 parity from the fixtures tests/ref/keras_attention_layers.py wrote
 * (tests/ref/score_attention/: outputs, input and weight gradients, weights under Keras's
 * paths both ways); the refusals (a backend without the kernels, the GPU, unsupported
 * arguments, ONNX export). Run from the repository's root. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/onnx.h"
#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "graph/model.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "layers/layer.h"
#include "testutil.h"

/* ---- the op against central differences ------------------------------------------------- */

typedef struct op_io {
    tfc_score_attn_desc d;
    float *q, *k, *v, *scale, *cw, *dout, *qmask, *kmask; /* inputs */
    float *o, *p, *ds, *dq, *dk, *dv, *dscale, *dcw;      /* outputs */
} op_io;

static float *filled(size_t n, float lo, float hi, unsigned *seed)
{
    float *a = malloc(n * sizeof *a);
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1103515245u + 12345u;
        a[i] = lo + (hi - lo) * (float)((*seed >> 8) & 0xffff) / 65535.0f;
    }
    return a;
}

/* sum(o * dout) of the forward, in double */
static double loss(tfc_backend *be, op_io *io)
{
    be->ops->score_attention_forward(be, &io->d, io->q, io->k, io->v, io->scale, io->cw, io->o,
                                     io->p);
    double s = 0;
    for (int64_t i = 0; i < (int64_t)io->d.n * io->d.tq * io->d.dv; i++)
        s += (double)io->o[i] * io->dout[i];
    return s;
}

/* The largest |analytic - numeric| / max(1e-2, |numeric|) over the n values of x whose
 * gradient the op gave in g. */
static double worst(tfc_backend *be, op_io *io, float *x, const float *g, int64_t n)
{
    double w = 0;
    for (int64_t i = 0; i < n; i++) {
        const float keep = x[i], h = 1e-2f;
        x[i] = keep + h;
        const double up = loss(be, io);
        x[i] = keep - h;
        const double down = loss(be, io);
        x[i] = keep;
        const double num = (up - down) / (2.0 * h);
        w = fmax(w, fabs(g[i] - num) / fmax(1e-2, fabs(num)));
    }
    return w;
}

static void check_op(int mode, int use_scale, int masked, int causal, float rate, int tq,
                     int tv)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    op_io io = {.d = {.n = 2, .tq = tq, .tv = tv, .dim = 3, .dv = 4, .mode = mode,
                      .causal = causal, .rate = rate, .key = 77, .step = 3}};
    const tfc_score_attn_desc *d = &io.d;
    unsigned seed = 11u + (unsigned)(mode * 8 + use_scale * 4 + masked * 2 + causal);
    const size_t nq = (size_t)d->n * tq * d->dim, nk = (size_t)d->n * tv * d->dim;
    const size_t nv = (size_t)d->n * tv * d->dv, no = (size_t)d->n * tq * d->dv;
    const size_t ns = (size_t)d->n * tq * tv, nsc = mode == TFC_SCORE_ADDITIVE ? 3 : 1;
    io.q = filled(nq, -1, 1, &seed), io.k = filled(nk, -1, 1, &seed);
    io.v = filled(nv, -1, 1, &seed), io.dout = filled(no, -1, 1, &seed);
    io.scale = use_scale ? filled(nsc, 0.5f, 1.5f, &seed) : NULL;
    io.cw = mode == TFC_SCORE_CONCAT ? filled(1, 0.5f, 1.5f, &seed) : NULL;
    if (masked) { /* example 1: its last step padding */
        io.qmask = calloc((size_t)d->n * tq, 4), io.kmask = calloc((size_t)d->n * tv, 4);
        for (int i = 0; i < d->n * tq; i++) io.qmask[i] = i != 2 * tq - 1;
        for (int j = 0; j < d->n * tv; j++) io.kmask[j] = j != 2 * tv - 1;
        io.d.qmask = io.qmask, io.d.kmask = io.kmask;
    }
    io.o = malloc(no * 4), io.p = malloc(ns * 4), io.ds = malloc(ns * 4);
    io.dq = calloc(nq, 4), io.dk = calloc(nk, 4), io.dv = calloc(nv, 4);
    io.dscale = calloc(nsc, 4), io.dcw = calloc(1, 4);
    loss(be, &io);
    be->ops->score_attention_backward(be, d, io.q, io.k, io.v, io.scale, io.cw, io.p, io.dout,
                                      io.ds, io.dq, io.dk, io.dv,
                                      use_scale ? io.dscale : NULL, io.cw ? io.dcw : NULL);
    double w = fmax(worst(be, &io, io.q, io.dq, (int64_t)nq),
                    worst(be, &io, io.k, io.dk, (int64_t)nk));
    w = fmax(w, worst(be, &io, io.v, io.dv, (int64_t)nv));
    if (use_scale) w = fmax(w, worst(be, &io, io.scale, io.dscale, (int64_t)nsc));
    if (io.cw) w = fmax(w, worst(be, &io, io.cw, io.dcw, 1));
    if (w > 2e-3 || getenv("TFC_VERBOSE"))
        printf("\n  mode %d scale %d masked %d causal %d rate %.2f tq %d tv %d: worst %.2e",
               mode, use_scale, masked, causal, rate, tq, tv, w);
    CU_ASSERT(w <= 2e-3);
    if (masked) { /* the padded query row is zero */
        for (int c = 0; c < d->dv; c++) CU_ASSERT(io.o[(size_t)(2 * tq - 1) * d->dv + c] == 0);
    }
    free(io.q), free(io.k), free(io.v), free(io.dout), free(io.scale), free(io.cw);
    free(io.qmask), free(io.kmask), free(io.o), free(io.p), free(io.ds);
    free(io.dq), free(io.dk), free(io.dv), free(io.dscale), free(io.dcw);
    tfc_backend_free(be);
}

static void test_op_gradients(void)
{
    for (int mode = TFC_SCORE_DOT; mode <= TFC_SCORE_ADDITIVE; mode++)
        for (int use_scale = 0; use_scale < 2; use_scale++) {
            check_op(mode, use_scale, 0, 0, 0, 4, 4);
            check_op(mode, use_scale, 1, 1, 0, 4, 4);
            check_op(mode, use_scale, 1, 0, 0.3f, 5, 3);
            check_op(mode, use_scale, 0, 1, 0.25f, 3, 5);
        }
}

/* The forward and backward give the same bits on 1 and 4 threads (a shape past the size
 * where the CPU splits the work). */
static void test_threads_same_bits(void)
{
    tfc_backend *be[2] = {tfc_cpu_backend_create(1), tfc_cpu_backend_create(4)};
    tfc_score_attn_desc d = {.n = 8, .tq = 40, .tv = 40, .dim = 16, .dv = 16,
                             .mode = TFC_SCORE_CONCAT, .causal = 1, .rate = 0.2f, .key = 5};
    unsigned seed = 3;
    const size_t nx = (size_t)d.n * d.tq * d.dim, ns = (size_t)d.n * d.tq * d.tv;
    float *q = filled(nx, -1, 1, &seed), *k = filled(nx, -1, 1, &seed);
    float *v = filled(nx, -1, 1, &seed), *dout = filled(nx, -1, 1, &seed);
    float sc = 0.7f, cw = 1.3f, *out[2][5];
    for (int t = 0; t < 2; t++) {
        float *o = malloc(nx * 4), *p = malloc(ns * 4), *ds = malloc(ns * 4);
        float *dq = calloc(nx, 4), *dk = calloc(nx, 4), *dv = calloc(nx, 4);
        float *dw = calloc(2, 4);
        be[t]->ops->score_attention_forward(be[t], &d, q, k, v, &sc, &cw, o, p);
        be[t]->ops->score_attention_backward(be[t], &d, q, k, v, &sc, &cw, p, dout, ds, dq, dk,
                                             dv, dw, dw + 1);
        out[t][0] = o, out[t][1] = dq, out[t][2] = dk, out[t][3] = dv, out[t][4] = dw;
        free(p), free(ds);
    }
    for (int i = 0; i < 5; i++) {
        CU_ASSERT(!memcmp(out[0][i], out[1][i], i == 4 ? 8 : nx * 4));
        free(out[0][i]), free(out[1][i]);
    }
    free(q), free(k), free(v), free(dout);
    tfc_backend_free(be[0]), tfc_backend_free(be[1]);
}

/* ---- Keras 3 parity ----------------------------------------------------------------------- */

/* tests/ref/score_attention, each case as tfc_test_keras_case compares it: outputs, the
 * inference layout's, the weights both ways and, where the fixture has them, the input's and
 * every weight's gradients. A gradient is compared relative to its largest value or 1e-2,
 * whichever is larger: the scale's is a sum over every score that nearly cancels (1e-3 from
 * terms of 1e-2), and Keras rounds that sum in float32. */
static void test_keras_parity(void)
{
    static const tfc_keras_parity p = {.dir = "score_attention", .tol = 1e-5,
                                       .grad_floor = 1e-2};
    static const char *const names[] = {"self_dot_masked", "self_scale_causal", "concat_masked",
                                        "cross_key", "additive_masked", "additive_cross_causal",
                                        "dropout_masked", NULL};
    tfc_test_keras_cases(&p, names);
}

/* ---- refusals ------------------------------------------------------------------------------ */

static const char *const att_yaml = "input: {shape: [4, 6]}\nlayers:\n"
                                    "  - Dense: {name: q, units: 6}\n"
                                    "  - %s: {name: att, inputs: [q, input]}\n";

/* A backend without the kernels (the CPU's table, the slots emptied) refuses the model at
 * bind, naming the layer. */
static void test_missing_kernel_refused(void)
{
    static const char *const types[] = {"Attention", "AdditiveAttention"};
    for (int i = 0; i < 2; i++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, att_yaml, types[i]);
        tfc_model *m = tfc_test_model(yaml);
        tfc_backend *be = tfc_cpu_backend_create(1);
        TFC_ASSERT(m && be);
        tfc_backend_ops lacking = *be->ops;
        const tfc_backend_ops *cpu_ops = be->ops;
        lacking.score_attention_forward = NULL;
        lacking.score_attention_backward = NULL;
        be->ops = &lacking;
        tfc_error err;
        tfc_error_clear(&err);
        CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_ERR_CONFIG);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'att'"));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, types[i]));
        be->ops = cpu_ops;
        tfc_model_free(m);
        tfc_backend_free(be);
    }
}

/* Arguments tfc does not support, and inputs Keras refuses, are errors naming them. */
static void test_unsupported_arguments(void)
{
    static const char *const bad[][2] = {
        {"Attention: {inputs: [q, input], return_attention_scores: true}",
         "return_attention_scores"},
        {"AdditiveAttention: {inputs: [q, input], return_attention_scores: true}",
         "return_attention_scores"},
        {"Attention: {inputs: [q, input], score_mode: general}", "score_mode"},
        {"AdditiveAttention: {inputs: [q, input], score_mode: concat}", "score_mode"},
        {"Attention: {inputs: [q, input], dropout: 1}", "dropout"},
        {"Attention: {}", "Attention"},
        {"Attention: {inputs: [q, r]}", "query has 6 features and value 3"},
        {"AdditiveAttention: {inputs: [q, input, r]}", "query has 6 features and key 3"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char yaml[320];
        snprintf(yaml, sizeof yaml, "input: {shape: [4, 6]}\nlayers:\n"
                                    "  - Dense: {name: q, units: 6}\n"
                                    "  - Dense: {name: r, units: 3, inputs: [input]}\n"
                                    "  - %s\n", bad[i][0]);
        tfc_test_expect_model_error(yaml, bad[i][1]);
    }
}

TFC_TEST_MAIN("score_attention", {"op_gradients", test_op_gradients},
              {"threads_same_bits", test_threads_same_bits},
              {"keras_parity", test_keras_parity},
              {"missing_kernel_refused", test_missing_kernel_refused},
              {"unsupported_arguments", test_unsupported_arguments})
