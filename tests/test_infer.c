/* Low-latency inference (issue 44): tfc_predictor_options (threads, spin) and their errors;
 * the CPU's GEMM of one row (a GEMV) against a double-precision product, the same bits on
 * any team; every zoo model's predictor output at batch 1, on 1 and 2 threads, against the
 * training graph's forward at batch 5; calls on one-thread predictors from several threads
 * at once; MultiHeadAttention bound for inference plans no backward workspace; the ops a
 * batch-1 forward runs enter no OpenMP region on a backend of one thread; recurrent kernels
 * packed once on a frozen backend, and packed again after an upload. */
#include <dlfcn.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"
#include "device/device.h"
#include "gradcheck.h"
#include "graph/model.h"
#include "tfc.h"
#include "testutil.h"

static const char *const zoo[] = {"fashion_mlp",        "fashion_cnn",       "fashion_cnn_bn",
                                  "fashion_resnet",     "fashion_mobilenet", "fortunes_classify",
                                  "fortunes_char_lstm", "fortunes_char_gru", "fortunes_gpt",
                                  "fortunes_bigru",     "fortunes_encoder",  "fortunes_conv_bigru",
                                  "fortunes_bag_of_bigrams"};
#define NZOO (int)(sizeof zoo / sizeof *zoo)

static void paths(const char *name, char *model, char *weights, size_t size)
{
    snprintf(model, size, "model_zoo/%s/model.yaml", name);
    snprintf(weights, size, "model_zoo/%s/%s.safetensors", name, name);
}

/* The predictor's input (0) or output (1) shape, a variable-length axis (-1) at the model's
 * input.max_length, the length tfc_predictor_run takes; the rank. */
static int shape_at_max(const tfc_predictor *p, int which, int64_t *dims, const char **dtype)
{
    int rank = tfc_predictor_shape(p, which, dims, dtype);
    for (int i = 0; i < rank; i++)
        if (dims[i] < 0) dims[i] = tfc_predictor_max_length(p);
    return rank;
}

static int64_t numel(const tfc_predictor *p, int which)
{
    int64_t dims[8], n = 1;
    int rank = shape_at_max(p, which, dims, NULL);
    for (int i = 0; i < rank; i++) n *= dims[i];
    return n;
}

/* n examples: floats in [0, 1), or token ids in [1, 20) with a right-padded zero tail. */
static void *inputs(const tfc_predictor *p, int64_t n, unsigned seed)
{
    const char *dtype;
    int64_t dims[8], per = numel(p, 0);
    shape_at_max(p, 0, dims, &dtype);
    int ids = !strcmp(dtype, "int32");
    void *x = malloc((size_t)(n * per) * 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    srand(seed);
    for (int64_t e = 0; e < n; e++)
        for (int64_t k = 0; k < per; k++) {
            if (ids) ((int32_t *)x)[e * per + k] = k < per - 3 * e ? 1 + rand() % 19 : 0;
            else ((float *)x)[e * per + k] = (float)rand() / ((float)RAND_MAX + 1.0f);
        }
    return x;
}

/* ---- options ----------------------------------------------------------------------------- */

static void test_option_errors(void)
{
    char model[256], weights[256], err[512];
    paths("fashion_mlp", model, weights, sizeof model);
    tfc_predictor_options o = {.threads = -1};
    CU_ASSERT_PTR_NULL(tfc_predictor_open_options(model, weights, "cpu", &o, err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "options.threads is -1"));
    o = (tfc_predictor_options){.spin = 7};
    CU_ASSERT_PTR_NULL(tfc_predictor_open_options(model, weights, "cpu", &o, err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "options.spin is 7"));
    /* OpenMP read its wait policy when it loaded: the one the environment does not give is
     * refused, naming the variable */
    const char *v = getenv("OMP_WAIT_POLICY");
    int passive = v && !strcmp(v, "passive");
    o = (tfc_predictor_options){.spin = passive ? TFC_SPIN_ON : TFC_SPIN_OFF};
    CU_ASSERT_PTR_NULL(tfc_predictor_open_options(model, weights, "cpu", &o, err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "OMP_WAIT_POLICY"));
    o.spin = passive ? TFC_SPIN_OFF : TFC_SPIN_ON;
    tfc_predictor *p = tfc_predictor_open_options(model, weights, "cpu", &o, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL(p);
    tfc_predictor_close(p);
    /* NULL options are tfc_predictor_open's */
    p = tfc_predictor_open_options(model, weights, "cpu", NULL, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL(p);
    tfc_predictor_close(p);
}

/* A predictor on 3 threads runs each call on 3, and leaves the caller's count as it was. */
static void test_threads_option(void)
{
    char model[256], weights[256], err[512];
    paths("fashion_mlp", model, weights, sizeof model);
    tfc_predictor_options o = {.threads = 3};
    tfc_predictor *p = tfc_predictor_open_options(model, weights, "cpu", &o, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    omp_set_num_threads(5);
    float *x = inputs(p, 2, 1), y[20];
    CU_ASSERT_EQUAL(tfc_predictor_run(p, x, 2, y, err, sizeof err), 0);
    CU_ASSERT_EQUAL(omp_get_max_threads(), 5);
    free(x);
    tfc_predictor_close(p);
}

/* ---- the GEMM of one row ----------------------------------------------------------------- */

/* c = alpha a op(B) + beta c for one row a of k, against doubles, on a backend of 2 threads;
 * with the team forced to one thread the bits are the same (the split is the backend's). */
static void gemv_case(int trans_b, int n, int k, float beta)
{
    tfc_backend *be = tfc_cpu_backend_create(2);
    const int ldb = trans_b ? k + 3 : n + 5;
    const int64_t bsize = (int64_t)(trans_b ? n : k) * ldb;
    float *a = malloc((size_t)k * 4), *b = malloc((size_t)bsize * 4);
    float *c[2] = {malloc((size_t)n * 4), malloc((size_t)n * 4)};
    double *want = malloc((size_t)n * 8);
    srand(5);
    for (int p = 0; p < k; p++) a[p] = (float)rand() / (float)RAND_MAX - 0.5f;
    for (int64_t i = 0; i < bsize; i++) b[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    double scale = 0;
    for (int j = 0; j < n; j++) {
        double s = 0;
        for (int p = 0; p < k; p++)
            s += (double)a[p] * (trans_b ? b[(int64_t)j * ldb + p] : b[(int64_t)p * ldb + j]);
        want[j] = 0.5 * s + beta * (j % 7 - 3.0);
        scale += fabs(want[j]) / n;
    }
    for (int team = 0; team < 2; team++) {
        for (int j = 0; j < n; j++) c[team][j] = (float)(j % 7 - 3);
        tfc_cpu_team_force(team); /* 0: every thread; 1: one */
        be->ops->gemm(be, 0, trans_b, 1, n, k, 0.5f, a, k, b, ldb, beta, c[team], n);
    }
    tfc_cpu_team_force(0);
    double worst = 0;
    for (int j = 0; j < n; j++)
        if (fabs(c[0][j] - want[j]) > worst) worst = fabs(c[0][j] - want[j]);
    if (worst > 1e-5 * scale * sqrt((double)k))
        fprintf(stderr, "\ngemv trans_b %d %dx%d: off by %g (scale %g)\n", trans_b, n, k, worst,
                scale);
    CU_ASSERT(worst <= 1e-5 * scale * sqrt((double)k));
    CU_ASSERT(memcmp(c[0], c[1], (size_t)n * 4) == 0);
    free(a), free(b), free(c[0]), free(c[1]), free(want);
    tfc_backend_free(be);
}

static void test_gemv(void)
{
    for (int trans_b = 0; trans_b < 2; trans_b++) {
        gemv_case(trans_b, 10, 33, 0.f);     /* small: the calling thread */
        gemv_case(trans_b, 700, 513, 0.f);   /* split among the threads */
        gemv_case(trans_b, 700, 513, 1.f);   /* accumulating */
        gemv_case(trans_b, 17, 20000, 0.f);  /* one block: too few columns to split */
    }
}

/* The LSTM's packed-panel GEMM on one row (cpu_panel.c: four panels at a time, where the CPU
 * has AVX2) gives the bits of the same row in a call on two rows (one panel at a time), for
 * 5 to 13 panels with a short last one, A1 alone or beside A2, adding to c or set from an
 * init row, or continued from c (from_c). */
static void test_panel_row(void)
{
    const int k1 = 37, k2 = 20, ldp = k1 + k2;
    for (int n = 70; n <= 200; n += 65)
        for (int mode = 0; mode < 3; mode++) {
            float *packed = malloc(tfc_cpu_panels_floats(ldp, n) * 4);
            float *b = malloc((size_t)(ldp * n) * 4), *a = malloc(2 * (size_t)ldp * 4);
            float *init = malloc((size_t)n * 4), *c[2] = {malloc(2 * (size_t)n * 4),
                                                         malloc(2 * (size_t)n * 4)};
            srand((unsigned)(n + mode));
            for (int i = 0; i < ldp * n; i++) b[i] = (float)rand() / (float)RAND_MAX - 0.5f;
            for (int i = 0; i < 2 * ldp; i++) a[i] = (float)rand() / (float)RAND_MAX - 0.5f;
            for (int i = 0; i < n; i++) init[i] = (float)i / 7.f;
            tfc_cpu_pack_panels(ldp, n, b, n, 0, packed);
            for (int m = 1; m <= 2; m++) {
                for (int i = 0; i < 2 * n; i++) c[m - 1][i] = (float)(i % 5) - 2.f;
                /* row 0 of A is the same in both calls: rows ldp apart, A2 after A1 */
                tfc_panel_gemm g = {.m = m, .n = n, .packed = packed, .ldp = ldp,
                                    .set = mode > 0, .from_c = mode == 2, .init = init,
                                    .c = c[m - 1], .ldc = n,
                                    .a1 = {.a = a, .lda = ldp, .k = k1},
                                    .a2 = {.a = a + k1, .lda = ldp, .k = mode == 1 ? 0 : k2}};
                tfc_cpu_panel_gemm(&g);
            }
            CU_ASSERT(memcmp(c[0], c[1], (size_t)n * 4) == 0);
            free(packed), free(b), free(a), free(init), free(c[0]), free(c[1]);
        }
}

/* ---- every zoo model at batch 1 ---------------------------------------------------------- */

/* Each zoo model's 5 examples one call at a time through predictors of 1 and 2 threads, and
 * at once through the model bound for training (tfc_model_bind, batch 5): within 1e-5 of the
 * output's largest magnitude (another batch takes other kernels: a GEMV for one row, oneDNN's
 * kernels for one image; sums in another order). */
static void test_zoo_batch1(void)
{
    for (int z = 0; z < NZOO; z++) {
        char model[256], weights[256], err[512] = "";
        paths(zoo[z], model, weights, sizeof model);
        tfc_error e;
        tfc_error_clear(&e);
        tfc_model *m = tfc_model_load(model, &e);
        tfc_backend *be = tfc_backend_open("cpu", 2, &e);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        CU_ASSERT_PTR_NOT_NULL_FATAL(be);
        CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, 5, &e), TFC_OK);
        CU_ASSERT_EQUAL_FATAL(tfc_model_load_weights(m, weights, NULL, &e), TFC_OK);
        tfc_predictor *p = tfc_predictor_open(model, weights, "cpu", err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        const int64_t n = 5, per = numel(p, 0), nout = numel(p, 1);
        void *x = inputs(p, n, 11 + (unsigned)z);
        tfc_predictor_close(p);
        float *want = malloc((size_t)(n * nout) * 4), *got = malloc((size_t)nout * 4);
        CU_ASSERT_EQUAL_FATAL(tfc_model_forward(m, x, (int)n, 0, 0, 0, &e), TFC_OK);
        tfc_model_get_output(m, want);
        double big = 0;
        for (int64_t i = 0; i < n * nout; i++) big = fmax(big, fabs(want[i]));
        for (int threads = 1; threads <= 2; threads++) {
            tfc_predictor_options o = {.threads = threads};
            p = tfc_predictor_open_options(model, weights, "cpu", &o, err, sizeof err);
            CU_ASSERT_PTR_NOT_NULL_FATAL(p);
            double worst = 0;
            for (int64_t i = 0; i < n; i++) {
                CU_ASSERT_EQUAL(tfc_predictor_run(p, (char *)x + i * per * 4, 1, got, err,
                                                  sizeof err), 0);
                for (int64_t k = 0; k < nout; k++)
                    worst = fmax(worst, fabs(got[k] - want[i * nout + k]));
            }
            if (worst > 1e-5 * big)
                fprintf(stderr, "\n%s on %d threads: batch 1 off by %g (largest %g)\n", zoo[z],
                        threads, worst, big);
            CU_ASSERT(worst <= 1e-5 * big);
            tfc_predictor_close(p);
        }
        free(want), free(got), free(x);
        tfc_model_free(m);
        tfc_backend_free(be);
    }
}

/* ---- one-thread predictors called at once ------------------------------------------------ */

#define CALLERS 4
#define CALLS 100

typedef struct caller {
    tfc_predictor *p;
    const void *x;
    const float *want; /* each example's output from one call at a time */
    int64_t per, nout;
    int bad;
} caller;

static void *call_many(void *arg)
{
    caller *c = arg;
    float *out = malloc((size_t)c->nout * 4);
    char err[256];
    for (int k = 0; k < CALLS; k++) {
        int i = k % 3;
        if (tfc_predictor_run(c->p, (const char *)c->x + i * c->per * 4, 1, out, err, sizeof err) ||
            memcmp(out, c->want + i * c->nout, (size_t)c->nout * 4))
            c->bad++;
    }
    free(out);
    return NULL;
}

/* 4 threads x 100 calls on one predictor of one thread (calls run at once, not in turn): every
 * output equals the one a lone call gives. */
static void test_one_thread_concurrent(void)
{
    char model[256], weights[256], err[512];
    paths("fashion_cnn_bn", model, weights, sizeof model);
    tfc_predictor_options o = {.threads = 1};
    tfc_predictor *p = tfc_predictor_open_options(model, weights, "cpu", &o, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    caller c[CALLERS] = {{p, inputs(p, 3, 4), NULL, numel(p, 0), numel(p, 1), 0}};
    float *want = malloc((size_t)(3 * c[0].nout) * 4);
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(tfc_predictor_run(p, (char *)c[0].x + i * c[0].per * 4, 1,
                                          want + i * c[0].nout, err, sizeof err), 0);
    c[0].want = want;
    pthread_t th[CALLERS];
    for (int t = 0; t < CALLERS; t++) {
        c[t] = c[0];
        CU_ASSERT_EQUAL(pthread_create(&th[t], NULL, call_many, &c[t]), 0);
    }
    int bad = 0;
    for (int t = 0; t < CALLERS; t++) {
        pthread_join(th[t], NULL);
        bad += c[t].bad;
    }
    CU_ASSERT_EQUAL(bad, 0);
    free((void *)c[0].x), free(want);
    tfc_predictor_close(p);
}

/* ---- MultiHeadAttention's inference plan ------------------------------------------------- */

/* Bound for inference, a self-attention model's workspace is none of backward's dO, dQ, dK,
 * dV (4 heads x 64 steps x (8 + 8) floats x 2 of the batch); bound for training it is. */
static void test_mha_inference_workspace(void)
{
    static const char yaml[] = "input: {shape: [64, 32]}\nlayers:\n"
                               "  - MultiHeadAttention: {num_heads: 4, key_dim: 8}\n"
                               "  - Dense: {units: 2}\nloss: mse\n";
    const size_t backward = (size_t)2 * 4 * (64 + 64) * (8 + 8) * 4;
    size_t ws[2];
    for (int inference = 0; inference < 2; inference++) {
        tfc_error e;
        tfc_error_clear(&e);
        tfc_model *m = tfc_model_from_string(yaml, sizeof yaml - 1, "t.yaml", &e);
        tfc_backend *be = tfc_backend_open("cpu", 2, &e);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        CU_ASSERT_PTR_NOT_NULL_FATAL(be);
        tfc_status s = inference ? tfc_model_bind_inference(m, be, 2, &e)
                                 : tfc_model_bind(m, be, 2, &e);
        CU_ASSERT_EQUAL_FATAL(s, TFC_OK);
        ws[inference] = tfc_model_memory(m)->workspace;
        CU_ASSERT_EQUAL(tfc_model_init_weights(m, 1, &e), TFC_OK);
        float x[2 * 64 * 32], y[2 * 64 * 2];
        for (int i = 0; i < 2 * 64 * 32; i++) x[i] = (float)(i % 13) / 13.f;
        CU_ASSERT_EQUAL(tfc_model_forward(m, x, 2, 0, 0, 0, &e), TFC_OK);
        tfc_model_get_output(m, y);
        CU_ASSERT(isfinite(y[0]) && isfinite(y[2 * 64 * 2 - 1]));
        tfc_model_free(m);
        tfc_backend_free(be);
    }
    CU_ASSERT(ws[0] >= backward);
    CU_ASSERT(ws[1] < backward);
}

/* ---- no OpenMP region on one thread ------------------------------------------------------ */

/* Every parallel region the program starts passes here (this definition in the executable
 * stands in for libgomp's, and calls it): libgomp ends even a region of one thread with a
 * futex system call. */
static long regions;
void GOMP_parallel(void (*fn)(void *), void *data, unsigned threads, unsigned flags);
void GOMP_parallel(void (*fn)(void *), void *data, unsigned threads, unsigned flags)
{
    static void (*libgomp)(void (*)(void *), void *, unsigned, unsigned);
    if (!libgomp) *(void **)&libgomp = dlsym(RTLD_NEXT, "GOMP_parallel");
    regions++;
    libgomp(fn, data, threads, flags);
}

/* On a one-thread backend, the element-wise ops, BatchNormalization's inference map, a
 * product of one row, pooling, a depthwise convolution of one image, and the activations
 * and softmax (forward and backward) run on the calling thread without starting a region;
 * on two threads, the same work (large enough to split) starts regions (one per activation
 * call), and gives the same values. */
static void test_one_thread_no_region(void)
{
    enum { H = 64, C = 48, N = H * H * C };
    float *x = malloc(N * 4), *y[2], g[C], b[C], mean[C], var[C];
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    for (int i = 0; i < N; i++) x[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
    for (int c = 0; c < C; c++) g[c] = 1.0f + 0.01f * c, b[c] = 0.1f, mean[c] = 0.2f,
                                var[c] = 0.5f + 0.02f * c;
    const tfc_pool_desc pd = {.n = 1, .h = H, .w = H, .c = C, .kh = 2, .kw = 2, .sh = 2,
                              .sw = 2, .oh = H / 2, .ow = H / 2, .is_max = 1};
    const tfc_conv_desc dd = {.n = 1, .h = H, .w = H, .c = C, .kh = 3, .kw = 3, .f = C, .sh = 1,
                              .sw = 1, .dh = 1, .dw = 1, .pad_top = 1, .pad_left = 1, .oh = H,
                              .ow = H};
    long started[2], acts[2];
    tfc_cpu_team_force(2); /* two threads, however busy the machine */
    for (int t = 0; t < 2; t++) {
        tfc_error e;
        tfc_error_clear(&e);
        tfc_backend *be = tfc_backend_open("cpu", t + 1, &e);
        CU_ASSERT_PTR_NOT_NULL_FATAL(be);
        y[t] = calloc(6 * N, 4);
        CU_ASSERT_PTR_NOT_NULL_FATAL(y[t]);
        float *out = y[t], *pooled = out + N, *dw = out + 2 * N, *act = out + 3 * N,
              *sm = out + 4 * N, *dx = out + 5 * N;
        regions = 0;
        be->ops->axpy(be, N, 0.5f, x, out);
        be->ops->bias_add(be, H * H, C, b, out);
        be->ops->bn_forward_infer(be, H * H, C, out, g, b, mean, var, 1e-3f, out);
        be->ops->mul(be, 1, H * H, C, out, x, 1, out, 1);
        be->ops->gemm(be, 0, 0, 1, C, N / C, 1.0f, x, N / C, x, C, 0.0f, out, C);
        be->ops->pool_forward(be, &pd, x, pooled, NULL);
        be->ops->depthwise_forward(be, &dd, x, x, b, NULL, NULL, TFC_ACT_LINEAR, dw, NULL);
        started[t] = regions;
        regions = 0;
        be->ops->act_forward(be, TFC_ACT_GELU, N, C, x, act);
        be->ops->act_forward(be, TFC_ACT_SOFTMAX, N, C, x, sm);
        be->ops->act_backward(be, TFC_ACT_SOFTMAX, N, C, x, sm, x, act, 0);
        be->ops->act_backward(be, TFC_ACT_SWISH, N, C, x, act, x, dx, 1);
        acts[t] = regions;
        tfc_backend_free(be);
    }
    tfc_cpu_team_force(0);
    CU_ASSERT_EQUAL(started[0], 0);
    CU_ASSERT(started[1] > 0);
    CU_ASSERT_EQUAL(acts[0], 0);
    CU_ASSERT_EQUAL(acts[1], 4);
    CU_ASSERT(!memcmp(y[0], y[1], 6 * (size_t)N * 4));
    free(x), free(y[0]), free(y[1]);
}

/* ---- recurrent kernels packed once ------------------------------------------------------ */

/* On a frozen backend the recurrent layers keep their packed kernels from call to call
 * (cpu_internal.h: tfc_cpu_kept): a call on kept packs gives the bits of an unfrozen model's
 * forward, and kernels uploaded between calls are packed again (the output then equals the
 * unfrozen model's with the same new kernels). Both GRU layouts and a fused LSTM. */
static void test_rnn_kept_packs(void)
{
    static const char yaml[] = "name: kept\n"
                               "input: {shape: [6, 5]}\n"
                               "layers:\n"
                               "  - LSTM: {units: 16, return_sequences: true}\n"
                               "  - GRU: {units: 16, return_sequences: true}\n"
                               "  - GRU: {units: 16, reset_after: false}\n"
                               "  - Dense: {units: 3, activation: softmax}\n"
                               "loss: sparse_categorical_crossentropy\n";
    enum { N = 4, NX = N * 6 * 5, NY = N * 3 };
    float x[NX], y[4][NY];
    for (int k = 0; k < NX; k++) x[k] = (float)((k * 7919) % 1000) / 500.0f - 1.0f;
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m[2] = {tfc_test_model(yaml), tfc_test_model(yaml)};
    tfc_backend *be[2] = {tfc_cpu_backend_create(1), tfc_cpu_backend_create(1)};
    CU_ASSERT_FATAL(m[0] && m[1] && be[0] && be[1]);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind_inference(m[0], be[0], N, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m[1], be[1], N, &err), TFC_OK);
    for (int k = 0; k < 2; k++) CU_ASSERT_EQUAL_FATAL(tfc_model_init_weights(m[k], 5, &err), 0);
    for (int round = 0; round < 2; round++) {
        for (int call = 0; call < 2; call++) /* the second call on the frozen one: kept */
            CU_ASSERT_EQUAL_FATAL(tfc_model_forward(m[0], x, N, 0, 0, 0, &err), TFC_OK);
        tfc_model_get_output(m[0], y[2 * round]);
        CU_ASSERT_EQUAL_FATAL(tfc_model_forward(m[1], x, N, 0, 0, 0, &err), TFC_OK);
        tfc_model_get_output(m[1], y[2 * round + 1]);
        CU_ASSERT_EQUAL(memcmp(y[2 * round], y[2 * round + 1], sizeof y[0]), 0);
        /* the three layers' packs are kept, of their recurrent kernels */
        const tfc_cpu_backend *cb = (const tfc_cpu_backend *)be[0];
        for (int l = 0; l < 3; l++) {
            int kept = 0;
            for (int i = 0; i < TFC_CPU_KEPT; i++)
                kept += cb->kept[i].valid &&
                        cb->kept[i].src[1] == tfc_model_layer(m[0], l)->params[1].data;
            CU_ASSERT_EQUAL(kept, 1);
        }
        /* new kernels (the LSTM's input one too: it is packed with R) into both models */
        for (int l = 0; l < 3; l++)
            for (int p = l ? 1 : 0; p < 2; p++) {
                const int64_t numel = tfc_model_layer(m[0], l)->params[p].numel;
                float *h = malloc((size_t)numel * 4);
                CU_ASSERT_PTR_NOT_NULL_FATAL(h);
                for (int64_t k = 0; k < numel; k++) h[k] = 0.4f * (float)((k * 31 + l) % 17) / 17;
                for (int k = 0; k < 2; k++)
                    tfc_model_param_upload(m[k], &tfc_model_layer(m[k], l)->params[p], h);
                free(h);
            }
    }
    CU_ASSERT(memcmp(y[0], y[2], sizeof y[0]) != 0);
    for (int k = 0; k < 2; k++) tfc_model_free(m[k]), tfc_backend_free(be[k]);
}

TFC_TEST_MAIN("infer", {"option_errors", test_option_errors},
              {"threads_option", test_threads_option}, {"gemv", test_gemv},
              {"panel_row", test_panel_row},
              {"zoo_batch1", test_zoo_batch1},
              {"one_thread_concurrent", test_one_thread_concurrent},
              {"mha_inference_workspace", test_mha_inference_workspace},
              {"one_thread_no_region", test_one_thread_no_region},
              {"rnn_kept_packs", test_rnn_kept_packs})
