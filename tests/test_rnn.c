/* The recurrent layers beyond the LSTM's own tests: GRU (both reset_after) against a loop
 * written here, with masks, go_backwards and input dropout (one mask per sequence);
 * the same bits on one thread and two; Keras 3.15 parity on the fixtures of
 * tests/ref/keras_rnn.py (tests/ref/rnn/: GRU, LSTM go_backwards, Bidirectional); and a
 * backend without the kernels refusing the model, naming the layer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/onnx.h"
#include "core/rng.h"
#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "graph/model.h"
#include "graph/model_internal.h"
#include "layers/rnn.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "testutil.h"

typedef struct bound {
    tfc_model *m;
    tfc_backend *be;
} bound;

static bound bind_threads(const char *yaml, int batch, int threads)
{
    bound b = {tfc_test_model(yaml), tfc_cpu_backend_create(threads)};
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(b.m && tfc_model_bind(b.m, b.be, batch, &err) == TFC_OK);
    TFC_ASSERT(tfc_model_init_weights(b.m, 5, &err) == TFC_OK);
    return b;
}

static void unbind(bound b)
{
    tfc_model_free(b.m);
    tfc_backend_free(b.be);
}

static float *param(bound b, int layer, int p)
{
    tfc_param *pr = &tfc_model_layer(b.m, layer)->params[p];
    float *h = malloc((size_t)pr->numel * 4);
    tfc_model_param_download(b.m, pr, h);
    return h;
}

static float *forward(bound b, const void *x, int batch, int training, uint64_t step)
{
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(tfc_model_forward(b.m, x, batch, training, 1, step, &err) == TFC_OK);
    int64_t n = (int64_t)batch * tfc_shape_numel(tfc_model_output_shape(b.m));
    float *y = malloc((size_t)n * 4);
    tfc_model_get_output(b.m, y);
    return y;
}

static double sigm(double v) { return 1 / (1 + exp(-v)); }

/* One GRU step in double, Keras's GRUCell: x [in], h [u] updated in place. k [in, 3u],
 * r [u, 3u], b [2, 3u] (reset_after), [3u] or NULL. */
typedef struct ref_gru {
    int in, u, reset_after;
    const float *k, *r, *b;
} ref_gru;

static void ref_step(const ref_gru *g, const double *x, double *h)
{
    const int u = g->u, G = 3 * u;
    double xk[3 * 16], hr[3 * 16], hn[16];
    TFC_ASSERT(u <= 16);
    for (int j = 0; j < G; j++) {
        xk[j] = g->b ? g->b[j] : 0;
        hr[j] = g->b && g->reset_after ? g->b[G + j] : 0;
        for (int e = 0; e < g->in; e++) xk[j] += x[e] * g->k[e * G + j];
        for (int q = 0; q < u; q++) hr[j] += h[q] * g->r[q * G + j];
    }
    for (int j = 0; j < u; j++) {
        double z = sigm(xk[j] + hr[j]), r = sigm(xk[u + j] + hr[u + j]), a;
        if (g->reset_after) {
            a = r * hr[2 * u + j];
        } else {
            a = 0;
            for (int q = 0; q < u; q++)
                a += sigm(xk[u + q] + hr[u + q]) * h[q] * g->r[q * G + 2 * u + j];
        }
        hn[j] = z * h[j] + (1 - z) * tanh(xk[2 * u + j] + a);
    }
    memcpy(h, hn, sizeof(double) * (size_t)u);
}

/* Right-padded ids: sequence i has 6 - i % 3 tokens of 6 */
static void fill_ids(int32_t *ids, int n, int t)
{
    for (int i = 0; i < n; i++)
        for (int s = 0; s < t; s++)
            ids[i * t + s] = s >= t - 1 - i % 3 ? 0 : 1 + (i * 7 + s * 3) % 9;
}

/* Embedding(mask_zero) + GRU(return_sequences), both reset_after, forwards and backwards:
 * going backwards reverses the whole padded sequence (its mask with it), masked steps keep
 * h and output it, and the output is in the order the steps ran. Every sequence ends in 1
 * to 3 zeros: its last step masks them all (cpu_gru.c skips it; going backwards, the first). */
static void test_gru_values(void)
{
    const int N = 3, T = 6, E = 3, U = 4;
    for (int variant = 0; variant < 4; variant++) {
        const int ra = variant & 1, back = variant >> 1;
        char yaml[512];
        snprintf(yaml, sizeof yaml,
                 "input: {shape: [6], dtype: int32}\nlayers:\n"
                 "  - Embedding: {input_dim: 10, output_dim: 3, mask_zero: true}\n"
                 "  - GRU: {units: 4, return_sequences: true, reset_after: %s, go_backwards: %s,"
                 " bias_initializer: {type: random_normal, stddev: 0.5}}\n",
                 ra ? "true" : "false", back ? "true" : "false");
        bound b = bind_threads(yaml, N, 1);
        int32_t ids[18];
        fill_ids(ids, N, T);
        float *emb = param(b, 0, 0);
        ref_gru g = {E, U, ra, param(b, 1, 0), param(b, 1, 1), param(b, 1, 2)};
        float *y = forward(b, ids, N, 0, 0);
        double worst = 0;
        for (int i = 0; i < N; i++) {
            double h[4] = {0};
            for (int s = 0; s < T; s++) {
                const int id = ids[i * T + (back ? T - 1 - s : s)];
                double x[3];
                for (int e = 0; e < E; e++) x[e] = emb[id * E + e];
                if (id != 0) ref_step(&g, x, h);
                for (int j = 0; j < U; j++)
                    worst = fmax(worst, fabs(h[j] - y[(i * T + s) * U + j]));
            }
        }
        CU_ASSERT(worst < 1e-5);
        if (worst >= 1e-5) fprintf(stderr, "\nvariant %d: worst %g\n", variant, worst);
        free(emb), free((void *)g.k), free((void *)g.r), free((void *)g.b), free(y);
        unbind(b);
    }
}

/* GRU dropout: in training each sequence's inputs are multiplied by one mask, the same at
 * every step, drawn from Philox at (the layer's key, step, i in + c); at inference none. */
static void test_gru_dropout_values(void)
{
    const int N = 3, T = 5, F = 4, U = 3;
    const float rate = 0.4f;
    bound b = bind_threads("input: {shape: [5, 4]}\nlayers:\n"
                           "  - GRU: {units: 3, dropout: 0.4, reset_after: false}\n", N, 1);
    float x[60];
    tfc_test_fill(x, N * T * F, -1, 1, 3);
    ref_gru g = {F, U, 0, param(b, 0, 0), param(b, 0, 1), param(b, 0, 2)};
    const uint64_t key = tfc_rng_key(1, 0x100000u), step = 7;
    double worst[2] = {0, 0};
    int dropped = 0;
    for (int training = 0; training < 2; training++) {
        float *y = forward(b, x, N, training, step);
        for (int i = 0; i < N; i++) {
            double h[3] = {0};
            for (int s = 0; s < T; s++) {
                double xs[4];
                for (int c = 0; c < F; c++) {
                    int keep = !training || tfc_rng_uniform(key, step, (uint64_t)i * F + c) >= rate;
                    dropped += !keep && s == 0;
                    xs[c] = keep ? x[(i * T + s) * F + c] / (training ? 1 - rate : 1) : 0;
                }
                ref_step(&g, xs, h);
            }
            for (int j = 0; j < U; j++)
                worst[training] = fmax(worst[training], fabs(h[j] - y[i * U + j]));
        }
        free(y);
    }
    CU_ASSERT(dropped > 0 && dropped < N * F);
    CU_ASSERT(worst[0] < 1e-5 && worst[1] < 1e-5);
    free((void *)g.k), free((void *)g.r), free((void *)g.b);
    unbind(b);
}

/* One training step's output and parameter gradients, concatenated */
static float *step_results(const char *yaml, int n, int threads, const float *x, int64_t *len)
{
    bound b = bind_threads(yaml, n, threads);
    tfc_error err;
    tfc_error_clear(&err);
    int64_t out = (int64_t)n * tfc_shape_numel(tfc_model_output_shape(b.m));
    int64_t total = out;
    for (int i = 0; i < tfc_model_nlayers(b.m); i++)
        for (int p = 0; p < tfc_model_layer(b.m, i)->nparams; p++)
            total += tfc_model_layer(b.m, i)->params[p].numel;
    float *r = malloc((size_t)total * 4);
    int32_t *labels = malloc((size_t)out * 4);
    for (int64_t k = 0; k < out; k++) labels[k] = (int32_t)(k % 3);
    tfc_model_zero_grad(b.m);
    TFC_ASSERT(tfc_model_forward(b.m, x, n, 1, 1, 0, &err) == TFC_OK);
    tfc_batch_result res;
    TFC_ASSERT(tfc_model_loss(b.m, labels, 1, &res, &err) == TFC_OK);
    tfc_model_backward(b.m);
    tfc_model_get_output(b.m, r);
    int64_t at = out;
    for (int i = 0; i < tfc_model_nlayers(b.m); i++)
        for (int p = 0; p < tfc_model_layer(b.m, i)->nparams; p++) {
            tfc_param *pr = &tfc_model_layer(b.m, i)->params[p];
            tfc_model_grad_download(b.m, pr, r + at);
            at += pr->numel;
        }
    *len = total;
    free(labels);
    unbind(b);
    return r;
}

/* Large enough that the recurrence runs on two threads (tfc_cpu_rnn_split; SimpleRNN's
 * GEMMs over all steps, x·K, the weight gradients and dx, split into blocks): the output
 * and every gradient equal those of one thread, bit for bit. The library GEMMs are cut into
 * 4 blocks on both (tfc_cpu_gemm_blocks_force): cut by the threads, their bits change with
 * the count on AVX2 (OpenBLAS's Haswell kernels: any cut of a GEMM changes them). */
static void test_threads_same_bits(void)
{
    tfc_cpu_gemm_blocks_force(4);
    static const char *const yamls[] = {
        "input: {shape: [8, 24]}\nlayers:\n  - GRU: {units: 64, return_sequences: true,"
        " dropout: 0.2}\n  - GRU: {units: 48, reset_after: false, go_backwards: true}\n"
        "  - Dense: {units: 3}\n",
        "input: {shape: [8, 24]}\nlayers:\n  - LSTM: {units: 64, go_backwards: true,"
        " dropout: 0.2}\n  - Dense: {units: 3}\n",
        "input: {shape: [8, 24]}\nlayers:\n  - Bidirectional: {layer: {GRU: {units: 64,"
        " return_sequences: true}}, merge_mode: mul}\n  - Dense: {units: 3}\n",
        "input: {shape: [8, 24]}\nlayers:\n  - Dense: {units: 256}\n"
        "  - SimpleRNN: {units: 128, return_sequences: true, dropout: 0.2,"
        " activation: softmax}\n"
        "  - Bidirectional: {layer: {SimpleRNN: {units: 48}}}\n  - Dense: {units: 3}\n"};
    const int n = 24;
    float *x = malloc(sizeof(float) * n * 8 * 24);
    tfc_test_fill(x, n * 8 * 24, -1, 1, 5);
    for (size_t k = 0; k < sizeof yamls / sizeof *yamls; k++) {
        int64_t l1, l2;
        float *a = step_results(yamls[k], n, 1, x, &l1), *b = step_results(yamls[k], n, 2, x, &l2);
        CU_ASSERT_EQUAL(l1, l2);
        CU_ASSERT_EQUAL(memcmp(a, b, sizeof(float) * (size_t)l1), 0);
        for (int64_t i = 0; i < l1; i++)
            if (a[i] != b[i]) {
                fprintf(stderr, "\ncase %zu: first difference at %ld of %ld\n", k, (long)i,
                        (long)l1);
                break;
            }
        free(a), free(b);
    }
    tfc_cpu_gemm_blocks_force(0);
    free(x);
}

/* ---- Keras parity ----------------------------------------------------------------------- */

static const char *const keras_cases[] = {
    "gru_after_sequences", "gru_before_masked", "gru_backwards_masked",
    "lstm_backwards_masked", "lstm_backwards_last", "bidir_lstm_concat_masked",
    "bidir_gru_sum_masked", "bidir_gru_mul_sequences", "bidir_lstm_ave_masked",
    "simple_after_sequences", "simple_backwards_masked", "simple_relu_masked",
    "simple_softmax_masking", "simple_linear_nobias_backwards", "bidir_simple_concat_masked",
    "bidir_simple_elu_sum", NULL};

/* Each fixture's model built from its YAML, its weights loaded by name (every parameter
 * found, the fixture's x and y left unused), predicts Keras's y on x. */
static void test_keras_parity(void)
{
    double worst_abs = 0, worst_rel = 0;
    for (int c = 0; keras_cases[c]; c++) {
        char path[256];
        snprintf(path, sizeof path, "tests/ref/rnn/%s.safetensors", keras_cases[c]);
        tfc_error err;
        tfc_error_clear(&err);
        tfc_st_file *f = tfc_st_open(path, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        const tfc_st_tensor *x = tfc_st_find(f, "x"), *y = tfc_st_find(f, "y");
        TFC_ASSERT(x && y && tfc_st_meta(f, "yaml"));
        const int n = (int)x->shape.dim[0];
        bound b = bind_threads(tfc_st_meta(f, "yaml"), n, 1);
        tfc_weights_report rep = {0};
        CU_ASSERT_EQUAL(tfc_model_load_weights(b.m, path, &rep, &err), TFC_OK);
        CU_ASSERT(rep.missing == 0 && rep.mismatched == 0 && rep.unused == 2);
        free(rep.text);
        void *xin = malloc(x->nbytes);
        memcpy(xin, x->data, x->nbytes);
        float *want = malloc((size_t)y->numel * 4), *got = forward(b, xin, n, 0, 0);
        CU_ASSERT_EQUAL(y->numel, (int64_t)n * tfc_shape_numel(tfc_model_output_shape(b.m)));
        tfc_st_tensor_to_f32(y, want);
        double wa = 0, wr = 0;
        for (int64_t k = 0; k < y->numel; k++) {
            double d = fabs((double)got[k] - want[k]);
            wa = fmax(wa, d);
            /* relative to |y|, or to 0.1 below that: an output near 0 keeps the absolute
             * rounding of the O(1) sums before its activation (simple_backwards_masked
             * differs by 1.5e-7 at an output near 0) */
            wr = fmax(wr, d / fmax(fabs(want[k]), 0.1));
        }
        if (wr > 1e-5) fprintf(stderr, "\n%s: max abs %.3g rel %.3g\n", keras_cases[c], wa, wr);
        CU_ASSERT(wr <= 1e-5);
        worst_abs = fmax(worst_abs, wa), worst_rel = fmax(worst_rel, wr);
        free(xin), free(want), free(got);
        unbind(b);
        tfc_st_close(f);
    }
    printf("\n  keras parity: max abs %.3g, max rel %.3g ", worst_abs, worst_rel);
}

/* ---- recurrent dropout ---------------------------------------------------------------------- */

/* Keras 3's recurrent_dropout (its cells' implementation 1: a mask per gate on the state and,
 * LSTM and GRU, on the input), given the masks tfc draws (tests/ref/keras_recurrent_dropout.py):
 * a training pass's input and weight gradients, and the inference output, which dropout
 * leaves alone; LSTM, GRU with the reset gate after and before R_h, SimpleRNN with its one
 * input mask, and masked steps going backwards under a second layer. Then LSTMs and GRUs
 * with other activations than tanh and sigmoid (stepped in every pass: with recurrent dropout,
 * without any dropout, with rnn_input's one input mask, masked going backwards). */
static void test_recurrent_dropout_keras(void)
{
    static const tfc_keras_parity p = {.dir = "recurrent_dropout", .tol = 1e-5, .all_grads = 1};
    static const char *const names[] = {"lstm",       "gru",       "gru_reset_before",
                                        "simple_rnn", "masked_backwards", "lstm_relu",
                                        "gru_gelu",   "gru_before_swish", "masked_any",
                                        "lstm_implementation1", "gru_implementation1",
                                        NULL};
    tfc_test_keras_cases(&p, names);
}

/* Each layer (YAML) over a [5, 3] input, then Flatten and a Dense of 3: its gradients
 * against central differences on a batch of 4 filled from `seed` */
static void gradcheck_layers(const char *const *layers, size_t count, unsigned seed)
{
    for (size_t k = 0; k < count; k++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml, "input: {shape: [5, 3]}\nlayers:\n  - %s\n"
                 "  - Flatten\n  - Dense: {units: 3}\nloss: sparse_categorical_crossentropy\n",
                 layers[k]);
        tfc_model *m = tfc_test_model(yaml);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        float x[4 * 15];
        int32_t labels[4] = {0, 2, 1, 1};
        tfc_test_fill(x, 4 * 15, -1, 1, seed);
        gradcheck_result r = tfc_gradcheck(m, 4, x, labels, 48, 5);
        printf("\n  %.48s  max error %.3g at %s (%d checked)", layers[k], r.max_err, r.worst,
               r.checked);
        CU_ASSERT(r.max_err < TFC_GRADCHECK_BOUND);
        CU_ASSERT(r.checked > 40);
        tfc_model_free(m);
    }
}

/* The gradients under recurrent dropout against central differences (the masks are the
 * pass's: fixed by its seed and step), every cell, with and without input dropout, masked
 * steps and a Bidirectional among them. */
static void test_recurrent_dropout_gradients(void)
{
    static const char *const layers[] = {
        "LSTM: {units: 4, recurrent_dropout: 0.3, dropout: 0.2, return_sequences: true}",
        "GRU: {units: 4, recurrent_dropout: 0.4, return_sequences: true}",
        "GRU: {units: 3, reset_after: false, recurrent_dropout: 0.3, dropout: 0.25}",
        "SimpleRNN: {units: 4, recurrent_dropout: 0.3, dropout: 0.2, activation: relu}",
        "Bidirectional: {layer: {GRU: {units: 3, recurrent_dropout: 0.3, dropout: 0.1}}}",
    };
    gradcheck_layers(layers, sizeof layers / sizeof *layers, 11);
}

/* ---- other activations --------------------------------------------------------------------- */

/* An LSTM's and GRU's activation and recurrent_activation other than tanh and sigmoid (the
 * stepped ops, their gates' sums kept): gradients against central differences, with and
 * without recurrent dropout, both GRU forms, going backwards, in a Bidirectional and as an
 * RNN's cell. */
static void test_activations_gradients(void)
{
    static const char *const layers[] = {
        "LSTM: {units: 4, activation: relu, return_sequences: true, dropout: 0.2}",
        "LSTM: {units: 3, activation: gelu, recurrent_activation: hard_sigmoid, "
        "recurrent_dropout: 0.3, go_backwards: true}",
        "LSTM: {units: 3, activation: null, recurrent_activation: softsign}",
        "GRU: {units: 4, activation: swish, recurrent_activation: hard_sigmoid, "
        "return_sequences: true}",
        "GRU: {units: 3, reset_after: false, activation: elu, recurrent_activation: softplus}",
        "GRU: {units: 3, reset_after: false, activation: softsign, recurrent_dropout: 0.3, "
        "dropout: 0.25}",
        "Bidirectional: {layer: {GRU: {units: 3, activation: relu, use_bias: false}}}",
        "RNN: {cell: {LSTMCell: {units: 3, activation: mish, recurrent_activation: tanh}}}",
    };
    gradcheck_layers(layers, sizeof layers / sizeof *layers, 13);
}

/* ---- a backend without the kernels -------------------------------------------------------- */

/* Binding fails naming the layer where the backend lacks its op (the recurrent ops taken
 * out of a CPU table), and binds where it has it: a GRU needs the gru ops, a Bidirectional
 * the merge (and its directions' ops), an LSTM going backwards rnn_input_forward, one with
 * recurrent dropout or another activation than tanh the stepped rnn_dropout ops, a plain
 * one nothing beyond the other math ops. */
static void test_missing_kernels_refused(void)
{
    static const struct {
        const char *yaml, *layer, *op;
    } cases[] = {
        {"input: {shape: [4, 3]}\nlayers:\n  - GRU: {name: g, units: 2}\n", "layer 'g'",
         "no kernel for GRU yet (op 'gru_workspace')"},
        {"input: {shape: [4, 3]}\nlayers:\n  - LSTM: {name: l, units: 2, go_backwards: true}\n",
         "layer 'l'", "no kernel for LSTM yet (op 'rnn_input_forward')"},
        {"input: {shape: [4, 3]}\nlayers:\n"
         "  - Bidirectional: {name: b, layer: {LSTM: {units: 2}}}\n",
         "layer 'b'", "no kernel for Bidirectional yet (op 'bidir_forward')"},
        {"input: {shape: [4, 3]}\nlayers:\n  - SimpleRNN: {name: s, units: 2}\n",
         "layer 's'", "no kernel for SimpleRNN yet (op 'simple_rnn_workspace')"},
        {"input: {shape: [4, 3]}\nlayers:\n"
         "  - Bidirectional: {name: b, layer: {SimpleRNN: {units: 2}}}\n",
         "layer 'b'", "no kernel for Bidirectional yet (op 'bidir_forward')"},
        {"input: {shape: [4, 3]}\nlayers:\n  - LSTM: {name: l, units: 2, recurrent_dropout: "
         "0.2}\n", "layer 'l'", "no kernel for LSTM yet (op 'rnn_dropout_workspace')"},
        {"input: {shape: [4, 3]}\nlayers:\n"
         "  - RNN: {name: r, cell: {LSTMCell: {units: 2, recurrent_dropout: 0.2}}}\n",
         "layer 'r'", "(op 'rnn_dropout_workspace')"},
        {"input: {shape: [4, 3]}\nlayers:\n  - LSTM: {name: l, units: 2, activation: relu}\n",
         "layer 'l'", "no kernel for LSTM yet (op 'rnn_dropout_workspace')"},
        {"input: {shape: [4, 3]}\nlayers:\n"
         "  - RNN: {name: r, cell: {LSTMCell: {units: 2, recurrent_activation: relu}}}\n",
         "layer 'r'", "(op 'rnn_dropout_workspace')"},
        {"input: {shape: [4, 3]}\nlayers:\n  - LSTM: {name: l, units: 2}\n", NULL, NULL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        tfc_model *m = tfc_test_model(cases[k].yaml);
        tfc_backend *be = tfc_cpu_backend_create(1);
        TFC_ASSERT(m && be);
        tfc_backend_ops lacking = *be->ops;
        const tfc_backend_ops *cpu_ops = be->ops;
        lacking.gru_workspace = NULL, lacking.gru_forward = NULL, lacking.gru_backward = NULL;
        lacking.rnn_input_forward = NULL, lacking.rnn_input_backward = NULL;
        lacking.bidir_forward = NULL, lacking.bidir_backward = NULL;
        lacking.simple_rnn_workspace = NULL, lacking.simple_rnn_forward = NULL;
        lacking.simple_rnn_backward = NULL;
        lacking.rnn_dropout_workspace = NULL, lacking.rnn_dropout_forward = NULL;
        lacking.rnn_dropout_backward = NULL;
        be->ops = &lacking;
        tfc_error err;
        tfc_error_clear(&err);
        tfc_status st = tfc_model_bind(m, be, 2, &err);
        if (cases[k].layer) {
            CU_ASSERT_EQUAL(st, TFC_ERR_CONFIG);
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, cases[k].layer));
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, cases[k].op));
        } else {
            CU_ASSERT_EQUAL(st, TFC_OK);
        }
        be->ops = cpu_ops;
        tfc_error_clear(&err);
        CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
        tfc_model_free(m);
        tfc_backend_free(be);
    }
}

/* Keras arguments tfc does not support are errors naming them. */
static void test_unsupported_arguments(void)
{
    static const struct {
        const char *layer, *msg;
    } cases[] = {
        {"GRU: {units: 2, recurrent_dropout: 1.0}", "recurrent_dropout"},
        {"GRU: {units: 2, return_state: true}", "return_state"},
        {"LSTM: {units: 2, stateful: true}", "stateful"},
        {"GRU: {units: 2, recurrent_activation: softmax}", "recurrent_activation softmax"},
        {"Bidirectional: {layer: {GRU: {units: 2, activity_regularizer: l2}}}",
         "activity_regularizer inside Bidirectional is not supported"},
        {"Bidirectional: {layer: {LSTM: {units: 2}}, backward_layer: {LSTM: {units: 2}}}",
         "backward_layer: not supported"},
        {"Bidirectional: {layer: {LSTM: {units: 2}}, merge_mode: null}", "merge_mode"},
        {"Bidirectional: {layer: {Dense: {units: 2}}}", "Dense cannot be wrapped"},
        {"Bidirectional: {layer: {GRU: {units: 2, go_backwards: true}}}",
         "layer.GRU.go_backwards: must be false"},
        {"Bidirectional: {layer: {GRU: {units: 2, stateful: true}}}", "stateful"},
        {"SimpleRNN: {units: 2, recurrent_dropout: -0.1}", "recurrent_dropout"},
        {"SimpleRNN: {units: 2, return_state: true}", "return_state"},
        {"SimpleRNN: {units: 2, stateful: true}", "stateful"},
        {"SimpleRNN: {units: 2, activation: celu}", "activation"},
        {"SimpleRNN: {units: 2, recurrent_activation: sigmoid}", "recurrent_activation"},
        {"SimpleRNN: {units: 2, use_cudnn: auto}", "use_cudnn"},
        {"SimpleRNN: {units: 2, recurrent_constraint: {type: NonNeg, axis: 0}}",
         "recurrent_constraint.axis: unknown key"},
        {"Bidirectional: {layer: {SimpleRNN: {units: 2, go_backwards: true}}}",
         "layer.SimpleRNN.go_backwards: must be false"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [4, 3]}\nlayers:\n  - %s\n", cases[k].layer);
        tfc_error err;
        tfc_error_clear(&err);
        tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), "t.yaml", &err);
        CU_ASSERT_PTR_NULL(m);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, cases[k].msg));
        tfc_model_free(m);
    }
}

/* SimpleRNN's `activation: null` is Keras's None, linear (a null elsewhere takes the
 * default, tanh here), alone and inside a Bidirectional; left out, tanh. */
static void test_simple_rnn_null_activation(void)
{
    static const struct {
        const char *layer;
        int bidir, act;
    } cases[] = {
        {"SimpleRNN: {units: 2, activation: null}", 0, TFC_ACT_LINEAR},
        {"SimpleRNN: {units: 2}", 0, TFC_ACT_TANH},
        {"Bidirectional: {layer: {SimpleRNN: {units: 2, activation: null}}}", 1, TFC_ACT_LINEAR},
        {"Bidirectional: {layer: {SimpleRNN: {units: 2, activation: ~}}}", 1, TFC_ACT_LINEAR},
        {"Bidirectional: {layer: {SimpleRNN: {units: 2}}}", 1, TFC_ACT_TANH},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [4, 3]}\nlayers:\n  - %s\n", cases[k].layer);
        tfc_model *m = tfc_test_model(yaml);
        TFC_ASSERT(m);
        const tfc_layer *l = tfc_model_layer(m, 0);
        for (int d = 0; d < (cases[k].bidir ? 2 : 1); d++) {
            const tfc_layer *inner = cases[k].bidir ? tfc_bidirectional_direction(l, d) : l;
            CU_ASSERT_EQUAL(((const tfc_rnn_args *)inner->args)->activation, cases[k].act);
        }
        tfc_model_free(m);
    }
}

/* tfc-export writes go_backwards (ONNX's reverse direction; its values against onnxruntime
 * are tests/test_onnx.c's go_backwards). */
static void test_onnx_go_backwards(void)
{
    static const char *const cases[] = {
        "input: {shape: [4, 3]}\nlayers:\n  - GRU: {name: g, units: 2, go_backwards: true}\n",
        "input: {shape: [4, 3]}\nlayers:\n  - LSTM: {name: l, units: 2, go_backwards: true,"
        " return_sequences: true}\n",
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        bound b = bind_threads(cases[k], 2, 1);
        tfc_onnx_options o = {0};
        tfc_error err;
        tfc_error_clear(&err);
        const char *path = tfc_test_path("backwards.onnx");
        remove(path);
        CU_ASSERT_EQUAL(tfc_onnx_export(b.m, &o, path, &err), TFC_OK);
        FILE *f = fopen(path, "rb");
        CU_ASSERT_PTR_NOT_NULL(f);
        if (f) fclose(f);
        unbind(b);
    }
}

TFC_TEST_MAIN("rnn", {"gru_values", test_gru_values},
              {"gru_dropout_values", test_gru_dropout_values},
              {"threads_same_bits", test_threads_same_bits},
              {"keras_parity", test_keras_parity},
              {"recurrent_dropout_keras", test_recurrent_dropout_keras},
              {"recurrent_dropout_gradients", test_recurrent_dropout_gradients},
              {"activations_gradients", test_activations_gradients},
              {"missing_kernels_refused", test_missing_kernels_refused},
              {"unsupported_arguments", test_unsupported_arguments},
              {"simple_rnn_null_activation", test_simple_rnn_null_activation},
              {"onnx_go_backwards", test_onnx_go_backwards})
