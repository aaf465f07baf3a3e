/* The CUDA backend against the CPU backend (`make test-gpu`): every op with the same random
 * inputs, TF32 off and on, deterministic mode twice, whole training steps of a CNN, an
 * LSTM and two GRU/Bidirectional models. Without a usable GPU only device selection runs
 * and it prints "skipped" (exit 0). `--cpu-twin` runs it all against a second CPU backend,
 * to check this harness on machines without a GPU. Tolerances: see EXACT, F32, SUM and
 * TF32 below. */
#include <CUnit/CUnit.h>
#include <float.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "cpu/cpu.h"
#include "core/backend.h"
#include "core/half.h"
#include "core/safetensors.h"
#include "data/data.h"
#include "graph/model.h"
#include "solver/solver.h"
#include "core/elastic.h"
#include "core/encode.h"
#include "core/rng.h"
#include "util/testutil.h"
#ifdef TFC_HAVE_CUDA
#include "gpu/gpu.h"
#endif

static tfc_backend *ref; /* the CPU: the reference */
static tfc_backend *dev; /* the GPU, or a second CPU backend with --cpu-twin */
static int twin;         /* dev is a CPU backend */

/* ---- GPU options, no-ops without CUDA ------------------------------------------------- */

static void set_tf32(int on)
{
#ifdef TFC_HAVE_CUDA
    tfc_gpu_set_tf32(dev, on);
#else
    (void)on;
#endif
}

/* 1: the attention kernels walk every row or key block in one block (no splits). */
static void set_attention_no_split(int on)
{
#ifdef TFC_HAVE_CUDA
    tfc_gpu_set_attention_no_split(dev, on);
#else
    (void)on;
#endif
}

/* 1: the GPU's table has the precision ops (tfc_gpu_test_enable_bf16), so bf16 and float16
 * models bind */
static void enable_bf16(int on)
{
#ifdef TFC_HAVE_CUDA
    tfc_gpu_test_enable_bf16(on);
#else
    (void)on;
#endif
}

/* 1: the GPU's table has the ops of TFC_BACKEND_LAYER_OPS (tfc_gpu_test_enable_layer_ops),
 * so ReLU with arguments, LeakyReLU, ELU with alpha, PReLU, weight regularizers and the noise
 * layers bind */
static void enable_layer_ops(int on)
{
#ifdef TFC_HAVE_CUDA
    tfc_gpu_test_enable_layer_ops(on);
#else
    (void)on;
#endif
}

static void set_deterministic(int on)
{
#ifdef TFC_HAVE_CUDA
    tfc_gpu_set_deterministic(dev, on);
#else
    (void)on;
#endif
}

/* The sticky GPU error must stay clear after every case. */
static void check_status(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_status s = tfc_backend_status(dev, &err);
    if (s) printf("\n  GPU error: %s", err.text);
    CU_ASSERT_EQUAL(s, TFC_OK);
}

static int gpu_count(void)
{
#ifdef TFC_HAVE_CUDA
    return tfc_gpu_device_count();
#else
    return 0;
#endif
}

/* ---- random numbers --------------------------------------------------------------------- */

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

static double urand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}

static int irand(int n)
{
    return (int)(urand() * n) % n;
}

/* ---- paired buffers: h on the reference (host memory), d on the device ------------------ */

typedef struct pair {
    float *h, *d;
    int64_t n;
} pair;

typedef struct ipair {
    int32_t *h, *d;
    int64_t n;
} ipair;

static pair pair_new(int64_t n)
{
    pair p = {ref->ops->alloc(ref, (size_t)n * 4), dev->ops->alloc(dev, (size_t)n * 4), n};
    TFC_ASSERT(p.h && p.d);
    memset(p.h, 0, (size_t)n * 4);
    dev->ops->zero(dev, p.d, (size_t)n * 4);
    return p;
}

/* Copies h to d. */
static void pair_push(pair *p)
{
    dev->ops->upload(dev, p->d, p->h, (size_t)p->n * 4);
}

static pair pair_rand(int64_t n, double lo, double hi)
{
    pair p = pair_new(n);
    for (int64_t i = 0; i < n; i++) p.h[i] = (float)(lo + (hi - lo) * urand());
    pair_push(&p);
    return p;
}

static void pair_free(pair *p)
{
    ref->ops->free(ref, p->h);
    dev->ops->free(dev, p->d);
    p->h = p->d = NULL;
}

static ipair ipair_new(int64_t n)
{
    ipair p = {ref->ops->alloc(ref, (size_t)n * 4), dev->ops->alloc(dev, (size_t)n * 4), n};
    TFC_ASSERT(p.h && p.d);
    memset(p.h, 0, (size_t)n * 4);
    dev->ops->zero(dev, p.d, (size_t)n * 4);
    return p;
}

static void ipair_push(ipair *p)
{
    dev->ops->upload(dev, p->d, p->h, (size_t)p->n * 4);
}

static void ipair_free(ipair *p)
{
    ref->ops->free(ref, p->h);
    dev->ops->free(dev, p->d);
}

/* Mismatches of the device copy against the reference: |d - h| <= atol + rtol |h|, NaN
 * matching NaN. rtol = atol = 0 demands identical bits. Prints the first few and the
 * largest error. */
static int compare_floats(const char *what, const float *got, const float *want, int64_t n,
                          double rtol, double atol)
{
    int bad = 0;
    double worst = 0.0;
    int64_t worst_at = -1;
    for (int64_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        int ok;
        if (isnan(w) || isnan(g))
            ok = isnan(w) && isnan(g);
        else if (rtol == 0.0 && atol == 0.0)
            ok = memcmp(&got[i], &want[i], 4) == 0;
        else
            ok = fabs(g - w) <= atol + rtol * fabs(w);
        double e = isnan(g - w) ? INFINITY : fabs(g - w);
        if (e > worst) worst = e, worst_at = i;
        if (ok) continue;
        if (bad++ < 4) printf("\n  %s[%lld]: device %.9g, cpu %.9g", what, (long long)i, g, w);
    }
    if (bad)
        printf("\n  %s: %d of %lld differ (largest |error| %.3g at %lld)", what, bad, (long long)n,
               worst, (long long)worst_at);
    return bad;
}

static int pair_check(const char *what, const pair *p, double rtol, double atol)
{
    float *got = malloc((size_t)(p->n ? p->n : 1) * 4);
    dev->ops->download(dev, got, p->d, (size_t)p->n * 4);
    int bad = compare_floats(what, got, p->h, p->n, rtol, atol);
    free(got);
    return bad;
}

static int ipair_check(const char *what, const ipair *p)
{
    int32_t *got = malloc((size_t)(p->n ? p->n : 1) * 4);
    dev->ops->download(dev, got, p->d, (size_t)p->n * 4);
    int bad = 0;
    for (int64_t i = 0; i < p->n; i++)
        if (got[i] != p->h[i] && bad++ < 4)
            printf("\n  %s[%lld]: device %d, cpu %d", what, (long long)i, got[i], p->h[i]);
    free(got);
    return bad;
}

/* Tolerances. EXACT: the same bits. F32: float32 rounding and library functions
 * (expf, tanhf, erfcf) that differ in the last ulps. SUM: results of long float sums in
 * another order (GEMM, convolution). TF32: 10-bit mantissa tensor-core products. */
#define EXACT 0.0, 0.0
#define F32 2e-5, 1e-6
#define SUM 2e-4, 2e-5
#define TF32 2e-2, 2e-2

/* ---- device selection (runs without a GPU too) ---------------------------------------- */

static void test_device_selection(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    int count = gpu_count();
    tfc_backend *b = tfc_backend_open("cpu", 1, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(b->device, -1);
    tfc_backend_free(b);

    /* one past the last GPU is always an error that says how many there are */
    char name[32];
    snprintf(name, sizeof name, "gpu:%d", count);
    tfc_error_clear(&err);
    CU_ASSERT_PTR_NULL(tfc_backend_open(name, 1, &err));
    CU_ASSERT_EQUAL(err.code, TFC_ERR_DEVICE);
#ifdef TFC_HAVE_CUDA
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "usable GPU"));
#else
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no GPU support"));
#endif
    tfc_error_clear(&err);
    CU_ASSERT_PTR_NULL(tfc_backend_open("gpu:x", 1, &err));
    CU_ASSERT_EQUAL(err.code, TFC_ERR_USAGE);

    /* the default is a GPU when one is usable, else the CPU */
    tfc_error_clear(&err);
    b = tfc_backend_open(NULL, 1, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    CU_ASSERT_EQUAL(b->device, count > 0 ? 0 : -1);
    CU_ASSERT_EQUAL(tfc_backend_check(b->ops, &err), TFC_OK);
    tfc_backend_free(b);

    if (count == 0) {
        tfc_error_clear(&err);
        CU_ASSERT_PTR_NULL(tfc_backend_open("gpu", 1, &err));
        CU_ASSERT_EQUAL(err.code, TFC_ERR_DEVICE);
    }
#ifdef TFC_HAVE_CUDA
    /* the GPU-only calls accept any backend and do nothing for the CPU */
    b = tfc_cpu_backend_create(1);
    CU_ASSERT_FALSE(tfc_gpu_is_gpu(b));
    tfc_gpu_set_tf32(b, 1);
    tfc_gpu_set_deterministic(b, 1);
    tfc_gpu_set_memory_limit(b, 1);
    CU_ASSERT_EQUAL(tfc_gpu_status(b, &err), TFC_OK);
    tfc_gpu_memory st;
    tfc_gpu_memory_stats(b, &st);
    CU_ASSERT_EQUAL(st.reserved, 0);
    CU_ASSERT_STRING_EQUAL(tfc_gpu_device_name(b), "");
    tfc_backend_free(b);
    tfc_error_clear(&err);
    CU_ASSERT_PTR_NULL(tfc_gpu_backend_create(count, &err));
    CU_ASSERT_EQUAL(err.code, TFC_ERR_DEVICE);
#endif
}

/* ---- GEMM ------------------------------------------------------------------------------ */

/* One GEMM on both backends: row-major with padded leading dimensions, C pre-filled. */
static int gemm_case(int ta, int tb, int m, int n, int k, float alpha, float beta, double rtol,
                     double atol)
{
    int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 2;
    int64_t arows = ta ? k : m, brows = tb ? n : k;
    pair a = pair_rand(arows * lda + 1, -1, 1), b = pair_rand(brows * ldb + 1, -1, 1);
    pair c = pair_rand((int64_t)m * ldc + 1, -1, 1);
    ref->ops->gemm(ref, ta, tb, m, n, k, alpha, a.h, lda, b.h, ldb, beta, c.h, ldc);
    dev->ops->gemm(dev, ta, tb, m, n, k, alpha, a.d, lda, b.d, ldb, beta, c.d, ldc);
    char what[64];
    snprintf(what, sizeof what, "gemm(%d,%d,%dx%dx%d)", ta, tb, m, n, k);
    int bad = pair_check(what, &c, rtol, atol);
    pair_free(&a), pair_free(&b), pair_free(&c);
    return bad;
}

static void test_gemm(void)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            CU_ASSERT_EQUAL(gemm_case(ta, tb, 37, 53, 129, 1.0f, 0.0f, SUM), 0);
            CU_ASSERT_EQUAL(gemm_case(ta, tb, 64, 5, 300, 0.5f, 1.0f, SUM), 0);
        }
    CU_ASSERT_EQUAL(gemm_case(0, 0, 7, 9, 0, 1.0f, 0.5f, EXACT), 0); /* empty product */
    CU_ASSERT_EQUAL(gemm_case(0, 0, 7, 9, 0, 1.0f, 0.0f, EXACT), 0);
    check_status();
}

static void test_gemm_tf32(void)
{
    set_tf32(1);
    for (int ta = 0; ta < 2; ta++)
        CU_ASSERT_EQUAL(gemm_case(ta, 1 - ta, 128, 96, 256, 1.0f, 1.0f, TF32), 0);
    set_tf32(0);
    check_status();
}

/* ---- element-wise --------------------------------------------------------------------- */

static void test_elementwise(void)
{
    const int64_t rows = 333, cols = 77, n = rows * cols;
    pair x = pair_rand(n, -2, 2), y = pair_rand(n, -2, 2), b = pair_rand(cols, -1, 1);
    ref->ops->axpy(ref, n, -0.75f, x.h, y.h);
    dev->ops->axpy(dev, n, -0.75f, x.d, y.d);
    CU_ASSERT_EQUAL(pair_check("axpy", &y, F32), 0);
    { /* add, plain and with ReLU (into a, as the Add layer's further inputs do) */
        pair s = pair_new(n), t = pair_rand(n, -2, 2);
        ref->ops->add(ref, n, x.h, y.h, TFC_ACT_LINEAR, s.h);
        dev->ops->add(dev, n, x.d, y.d, TFC_ACT_LINEAR, s.d);
        CU_ASSERT_EQUAL(pair_check("add", &s, EXACT), 0);
        ref->ops->add(ref, n, t.h, x.h, TFC_ACT_RELU, t.h);
        dev->ops->add(dev, n, t.d, x.d, TFC_ACT_RELU, t.d);
        CU_ASSERT_EQUAL(pair_check("add, relu", &t, EXACT), 0);
        pair_free(&s), pair_free(&t);
    }
    ref->ops->scale(ref, n, 1.5f, y.h);
    dev->ops->scale(dev, n, 1.5f, y.d);
    CU_ASSERT_EQUAL(pair_check("scale", &y, F32), 0);
    ref->ops->bias_add(ref, rows, (int)cols, b.h, y.h);
    dev->ops->bias_add(dev, rows, (int)cols, b.d, y.d);
    CU_ASSERT_EQUAL(pair_check("bias_add", &y, F32), 0);
    /* bias_grad accumulates; many rows exercise the split reduction */
    const int64_t big = 40000;
    pair dy = pair_rand(big * 19, -1, 1), db = pair_rand(19, -1, 1);
    ref->ops->bias_grad(ref, big, 19, dy.h, db.h);
    dev->ops->bias_grad(dev, big, 19, dy.d, db.d);
    CU_ASSERT_EQUAL(pair_check("bias_grad", &db, 1e-6, 1e-5), 0);
    ref->ops->bias_grad(ref, rows, (int)cols, x.h, b.h);
    dev->ops->bias_grad(dev, rows, (int)cols, x.d, b.d);
    CU_ASSERT_EQUAL(pair_check("bias_grad(small)", &b, 1e-6, 1e-5), 0);
    /* copy2d: a column block of x into the middle of a wider y, then accumulated back */
    ref->ops->copy2d(ref, rows, 20, x.h + 5, (int)cols, y.h + 3, (int)cols, 0);
    dev->ops->copy2d(dev, rows, 20, x.d + 5, (int)cols, y.d + 3, (int)cols, 0);
    CU_ASSERT_EQUAL(pair_check("copy2d", &y, EXACT), 0);
    ref->ops->copy2d(ref, rows / 2, 31, y.h, (int)cols, x.h + 1, (int)cols * 2, 1);
    dev->ops->copy2d(dev, rows / 2, 31, y.d, (int)cols, x.d + 1, (int)cols * 2, 1);
    CU_ASSERT_EQUAL(pair_check("copy2d(accumulate)", &x, F32), 0);
    pair_free(&x), pair_free(&y), pair_free(&b), pair_free(&dy), pair_free(&db);
    check_status();
}

static void test_activations(void)
{
    const int rows = 129, cols = 67;
    const int64_t n = (int64_t)rows * cols;
    for (int a = 0; a < TFC_ACT_COUNT; a++) {
        /* softmax rows spread wide, so the max subtraction matters */
        double span = a == TFC_ACT_SOFTMAX ? 40 : a == TFC_ACT_EXPONENTIAL ? 5 : 6;
        pair x = pair_rand(n, -span, span), y = pair_new(n);
        pair dy = pair_rand(n, -1, 1), dx = pair_rand(n, -1, 1);
        ref->ops->act_forward(ref, (tfc_act)a, n, cols, x.h, y.h);
        dev->ops->act_forward(dev, (tfc_act)a, n, cols, x.d, y.d);
        char what[64];
        snprintf(what, sizeof what, "%s forward", tfc_act_names[a]);
        CU_ASSERT_EQUAL(pair_check(what, &y, F32), 0);
        /* backward from the same y on both, so only the derivative is compared */
        pair_push(&y);
        ref->ops->act_backward(ref, (tfc_act)a, n, cols, x.h, y.h, dy.h, dx.h, 0);
        dev->ops->act_backward(dev, (tfc_act)a, n, cols, x.d, y.d, dy.d, dx.d, 0);
        snprintf(what, sizeof what, "%s backward", tfc_act_names[a]);
        CU_ASSERT_EQUAL(pair_check(what, &dx, 1e-5, 1e-5), 0);
        pair dxa = pair_rand(n, -1, 1); /* overwritten */
        ref->ops->act_backward(ref, (tfc_act)a, n, cols, x.h, y.h, dy.h, dxa.h, 1);
        dev->ops->act_backward(dev, (tfc_act)a, n, cols, x.d, y.d, dy.d, dxa.d, 1);
        snprintf(what, sizeof what, "%s backward, assigned", tfc_act_names[a]);
        CU_ASSERT_EQUAL(pair_check(what, &dxa, 1e-5, 1e-5), 0);
        pair_free(&x), pair_free(&y), pair_free(&dy), pair_free(&dx), pair_free(&dxa);
    }
    /* in place (x and y alias) */
    pair x = pair_rand(n, -3, 3);
    ref->ops->act_forward(ref, TFC_ACT_SOFTMAX, n, cols, x.h, x.h);
    dev->ops->act_forward(dev, TFC_ACT_SOFTMAX, n, cols, x.d, x.d);
    CU_ASSERT_EQUAL(pair_check("softmax in place", &x, F32), 0);
    pair_free(&x);
    check_status();
}

/* The mask is the same Philox stream on both: identical bits, forward and backward. */
static void test_dropout(void)
{
    const int64_t n = 100003; /* not a multiple of 4: the last Philox block is partial */
    const float rates[] = {0.0f, 0.25f, 0.5f, 0.9f, 1.0f};
    for (size_t r = 0; r < sizeof rates / sizeof *rates; r++) {
        pair x = pair_rand(n, -1, 1), y = pair_rand(n, -1, 1), dx = pair_rand(n, -1, 1);
        uint64_t key = tfc_rng_key(7, r), step = 1234567 + r;
        ref->ops->dropout_forward(ref, n, rates[r], key, step, x.h, y.h);
        dev->ops->dropout_forward(dev, n, rates[r], key, step, x.d, y.d);
        char what[64];
        snprintf(what, sizeof what, "dropout(%.2f) forward", rates[r]);
        CU_ASSERT_EQUAL(pair_check(what, &y, EXACT), 0);
        ref->ops->dropout_backward(ref, n, rates[r], key, step, x.h, dx.h);
        dev->ops->dropout_backward(dev, n, rates[r], key, step, x.d, dx.d);
        snprintf(what, sizeof what, "dropout(%.2f) backward", rates[r]);
        CU_ASSERT_EQUAL(pair_check(what, &dx, EXACT), 0);
        /* and the mask is tfc_rng_uniform's */
        if (r == 2) {
            int wrong = 0;
            for (int64_t i = 0; i < n; i += 997)
                wrong += (y.h[i] != 0.0f) != (tfc_rng_uniform(key, step, (uint64_t)i) >= 0.5f);
            CU_ASSERT_EQUAL(wrong, 0);
        }
        pair_free(&x), pair_free(&y), pair_free(&dx);
    }
    check_status();
}

static void test_reductions(void)
{
    const int64_t n = 1000001;
    pair x = pair_rand(n, -3, 3);
    double want = ref->ops->sumsq(ref, n, x.h), got = dev->ops->sumsq(dev, n, x.d);
    CU_ASSERT(fabs(got - want) <= 1e-12 * want);
    CU_ASSERT_EQUAL(dev->ops->count_nonfinite(dev, n, x.d), 0);
    x.h[17] = NAN;
    x.h[n - 1] = INFINITY;
    x.h[5000] = -INFINITY;
    pair_push(&x);
    CU_ASSERT_EQUAL(dev->ops->count_nonfinite(dev, n, x.d), 3);
    CU_ASSERT_EQUAL(ref->ops->count_nonfinite(ref, n, x.h), 3);
    CU_ASSERT_EQUAL(dev->ops->sumsq(dev, 0, x.d), 0.0);
    pair_free(&x);
    check_status();
}

/* ---- convolution ----------------------------------------------------------------------- */

/* TensorFlow's SAME padding for one axis: (out, pad_before). */
static void same_pad(int in, int k, int s, int dil, int *out, int *pad)
{
    *out = (in + s - 1) / s;
    int ek = (k - 1) * dil + 1, total = (*out - 1) * s + ek - in;
    *pad = total > 0 ? total / 2 : 0;
}

static tfc_conv_desc conv_desc(int n, int h, int w, int c, int kh, int kw, int f, int sh, int sw,
                               int dil, int same)
{
    tfc_conv_desc d = {.n = n, .h = h, .w = w, .c = c, .kh = kh, .kw = kw, .f = f, .sh = sh,
                       .sw = sw, .dh = dil, .dw = dil};
    if (same) {
        same_pad(h, kh, sh, dil, &d.oh, &d.pad_top);
        same_pad(w, kw, sw, dil, &d.ow, &d.pad_left);
    } else {
        d.oh = (h - ((kh - 1) * dil + 1)) / sh + 1;
        d.ow = (w - ((kw - 1) * dil + 1)) / sw + 1;
    }
    return d;
}

/* Forward, backward-data and backward-filter of d on both backends. Workspaces are sized for
 * `plan_n` images (>= d.n), as the graph plans them for the largest batch. */
static int conv_case(const char *name, tfc_conv_desc d, int plan_n, double rtol, double atol)
{
    tfc_conv_desc big = d;
    big.n = plan_n;
    size_t wr = ref->ops->conv_workspace(ref, &big), wd = dev->ops->conv_workspace(dev, &big);
    /* the plan for the largest batch must cover every smaller one */
    CU_ASSERT(dev->ops->conv_workspace(dev, &d) <= wd);
    void *wsr = ref->ops->alloc(ref, wr ? wr : 1), *wsd = dev->ops->alloc(dev, wd ? wd : 1);
    const int64_t nx = (int64_t)d.n * d.h * d.w * d.c, ny = (int64_t)d.n * d.oh * d.ow * d.f;
    const int64_t nw = (int64_t)d.kh * d.kw * d.c * d.f;
    pair x = pair_rand(nx, -1, 1), w = pair_rand(nw, -1, 1), y = pair_rand(ny, -1, 1);
    pair dy = pair_rand(ny, -1, 1), dx = pair_rand(nx, -1, 1), dw = pair_rand(nw, -1, 1);
    pair b = pair_rand(d.f, -1, 1), g = pair_rand(3 * d.f, -1, 1), v = pair_rand(d.f, 0.1, 2);
    pair r = pair_rand(ny, -1, 1);
    /* with a bias, a normalisation, a residual and ReLU: fused into oneDNN's kernel on the
     * CPU, kernels of their own on the GPU */
    tfc_bn_params bh = {g.h, g.h + d.f, g.h + 2 * d.f, v.h, 1e-3f};
    tfc_bn_params bd = {g.d, g.d + d.f, g.d + 2 * d.f, v.d, 1e-3f};
    ref->ops->conv_forward(ref, &d, x.h, w.h, b.h, &bh, r.h, TFC_ACT_RELU, y.h, NULL, NULL, wsr);
    dev->ops->conv_forward(dev, &d, x.d, w.d, b.d, &bd, r.d, TFC_ACT_RELU, y.d, NULL, NULL, wsd);
    /* and with a 2x2 max pooling after (the CPU may pool from its kernel's own layout) */
    const tfc_pool_desc pd = {d.n, d.oh, d.ow, d.f, 2, 2, 2, 2, 0, 0, d.oh / 2, d.ow / 2, 1};
    const int64_t np = (int64_t)d.n * pd.oh * pd.ow * d.f;
    pair pooled = pair_rand(np > 0 ? np : 1, -1, 1), scratch = pair_rand(ny, -1, 1);
    if (np > 0) {
        ref->ops->conv_forward(ref, &d, x.h, w.h, b.h, NULL, NULL, TFC_ACT_RELU, scratch.h, &pd,
                               pooled.h, wsr);
        dev->ops->conv_forward(dev, &d, x.d, w.d, b.d, NULL, NULL, TFC_ACT_RELU, scratch.d, &pd,
                               pooled.d, wsd);
    }
    ref->ops->conv_backward_data(ref, &d, dy.h, w.h, dx.h, 0, wsr);
    dev->ops->conv_backward_data(dev, &d, dy.d, w.d, dx.d, 0, wsd);
    /* and overwriting (a gradient block that starts at the convolution) */
    pair dxa = pair_rand(nx, -1, 1);
    ref->ops->conv_backward_data(ref, &d, dy.h, w.h, dxa.h, 1, wsr);
    dev->ops->conv_backward_data(dev, &d, dy.d, w.d, dxa.d, 1, wsd);
    ref->ops->conv_backward_filter(ref, &d, x.h, dy.h, dw.h, wsr);
    dev->ops->conv_backward_filter(dev, &d, x.d, dy.d, dw.d, wsd);
    char what[96];
    int bad = 0;
    snprintf(what, sizeof what, "%s forward", name);
    bad += pair_check(what, &y, rtol, atol);
    if (np > 0) {
        snprintf(what, sizeof what, "%s forward + max pooling", name);
        bad += pair_check(what, &pooled, rtol, atol);
    }
    snprintf(what, sizeof what, "%s backward data", name);
    bad += pair_check(what, &dx, rtol, atol);
    snprintf(what, sizeof what, "%s backward data, assigned", name);
    bad += pair_check(what, &dxa, rtol, atol);
    snprintf(what, sizeof what, "%s backward filter", name);
    bad += pair_check(what, &dw, rtol, atol * 10);
    pair_free(&x), pair_free(&w), pair_free(&y), pair_free(&dy), pair_free(&dx), pair_free(&dw);
    pair_free(&b), pair_free(&g), pair_free(&v), pair_free(&r);
    pair_free(&pooled), pair_free(&scratch), pair_free(&dxa);
    ref->ops->free(ref, wsr);
    dev->ops->free(dev, wsd);
    return bad;
}

static void conv_suite(double rtol, double atol)
{
    /* symmetric SAME (cuDNN pads), stride-2 SAME (one more row/column after: the padded
     * path), pointwise, VALID with dilation, non-square kernel and strides with explicit
     * asymmetric padding, a VALID stride that leaves rows unread */
    CU_ASSERT_EQUAL(conv_case("3x3 same", conv_desc(4, 13, 11, 5, 3, 3, 7, 1, 1, 1, 1), 6, rtol, atol), 0);
    CU_ASSERT_EQUAL(conv_case("3x3/2 same", conv_desc(3, 16, 15, 4, 3, 3, 8, 2, 2, 1, 1), 3, rtol, atol), 0);
    CU_ASSERT_EQUAL(conv_case("1x1", conv_desc(5, 8, 8, 16, 1, 1, 12, 1, 1, 1, 0), 5, rtol, atol), 0);
    CU_ASSERT_EQUAL(conv_case("5x5 dil2 valid", conv_desc(2, 17, 19, 3, 5, 5, 6, 1, 1, 2, 0), 4, rtol, atol), 0);
    CU_ASSERT_EQUAL(conv_case("4x2/(2,1) same", conv_desc(3, 10, 9, 6, 4, 2, 5, 2, 1, 1, 1), 3, rtol, atol), 0);
    CU_ASSERT_EQUAL(conv_case("3x3/2 valid", conv_desc(2, 28, 28, 3, 3, 3, 4, 2, 2, 1, 0), 2, rtol, atol), 0);
    tfc_conv_desc odd = conv_desc(2, 9, 9, 3, 3, 3, 4, 1, 1, 1, 0);
    odd.pad_top = 2, odd.pad_left = 0, odd.oh = 9, odd.ow = 8; /* 2 rows before, 0 after */
    CU_ASSERT_EQUAL(conv_case("explicit pad (2,0)x(0,1)", odd, 2, rtol, atol), 0);
    /* Conv1D's causal padding: (k - 1) d steps before a 1 x steps image, none after */
    tfc_conv_desc causal = conv_desc(3, 1, 12, 4, 1, 3, 5, 1, 1, 2, 0);
    causal.pad_left = 4, causal.ow = 12;
    CU_ASSERT_EQUAL(conv_case("1x3 dil2 causal", causal, 3, rtol, atol), 0);
    tfc_conv_desc causal2 = conv_desc(3, 1, 11, 4, 1, 4, 6, 1, 2, 1, 0);
    causal2.pad_left = 3, causal2.ow = 6;
    CU_ASSERT_EQUAL(conv_case("1x4/2 causal", causal2, 3, rtol, atol), 0);
}

static void test_conv(void)
{
    conv_suite(SUM);
    check_status();
}

static void test_conv_tf32(void)
{
    set_tf32(1);
    conv_suite(TF32);
    set_tf32(0);
    check_status();
}

static void test_grouped_conv(void);
static void test_conv1d_ops(void);

/* Convolution algorithms chosen by timing them (tfc_gpu_set_conv_find): every result as the
 * CPU's within the float32 sum tolerance, backward-data still adding into dx (conv_case
 * fills dx first; the candidates are timed on another buffer), every choice of the suite
 * (9 shapes, 3 directions) measured; deterministic mode measures none. */
static void test_conv_find(void)
{
#ifdef TFC_HAVE_CUDA
    if (!twin) {
        tfc_gpu_set_conv_find(dev, 1);
        conv_suite(SUM);
        int measured = tfc_gpu_conv_measured(dev);
        if (measured != 27) printf("\n  %d of 27 choices measured", measured);
        CU_ASSERT_EQUAL(measured, 27);
        test_grouped_conv(); /* grouped and 1-D: the same plans, measured */
        test_conv1d_ops();
        set_tf32(1);
        conv_suite(TF32);
        set_tf32(0);
        set_deterministic(1);
        CU_ASSERT_EQUAL(conv_case("3x3 same, deterministic",
                                  conv_desc(4, 13, 11, 5, 3, 3, 7, 1, 1, 1, 1), 6, SUM), 0);
        CU_ASSERT_EQUAL(tfc_gpu_conv_measured(dev), 0);
        set_deterministic(0);
        tfc_gpu_set_conv_find(dev, 0);
    }
#endif
    check_status();
}

/* ---- pooling ----------------------------------------------------------------------------- */

static int pool_case(const char *name, tfc_pool_desc d)
{
    const int64_t nx = (int64_t)d.n * d.h * d.w * d.c, ny = (int64_t)d.n * d.oh * d.ow * d.c;
    pair x = pair_rand(nx, -1, 1), y = pair_new(ny), dy = pair_rand(ny, -1, 1);
    pair dx = pair_rand(nx, -1, 1);
    /* quantised inputs make ties, which the first maximum must win on both */
    for (int64_t i = 0; i < nx; i++) x.h[i] = (float)irand(5);
    pair_push(&x);
    ipair arg = ipair_new(ny);
    ref->ops->pool_forward(ref, &d, x.h, y.h, d.is_max ? arg.h : NULL);
    dev->ops->pool_forward(dev, &d, x.d, y.d, d.is_max ? arg.d : NULL);
    ref->ops->pool_backward(ref, &d, dy.h, d.is_max ? arg.h : NULL, dx.h, 0, NULL);
    dev->ops->pool_backward(dev, &d, dy.d, d.is_max ? arg.d : NULL, dx.d, 0, NULL);
    char what[96];
    int bad = 0;
    snprintf(what, sizeof what, "%s forward", name);
    bad += pair_check(what, &y, EXACT);
    if (d.is_max) {
        snprintf(what, sizeof what, "%s argmax", name);
        bad += ipair_check(what, &arg);
    }
    snprintf(what, sizeof what, "%s backward", name);
    bad += pair_check(what, &dx, d.is_max ? 0.0 : 1e-6, d.is_max ? 0.0 : 1e-6);
    /* assign: written over what dx held (the sums above), on both */
    ref->ops->pool_backward(ref, &d, dy.h, d.is_max ? arg.h : NULL, dx.h, 1, NULL);
    dev->ops->pool_backward(dev, &d, dy.d, d.is_max ? arg.d : NULL, dx.d, 1, NULL);
    snprintf(what, sizeof what, "%s backward, assign", name);
    bad += pair_check(what, &dx, d.is_max ? 0.0 : 1e-6, d.is_max ? 0.0 : 1e-6);
    /* with a ReLU's output before the pooling (half of it zeros): its derivative too */
    pair rx = pair_rand(nx, -1, 1);
    for (int64_t i = 0; i < nx; i++) rx.h[i] = rx.h[i] < 0 ? 0.0f : rx.h[i];
    pair_push(&rx);
    ref->ops->pool_backward(ref, &d, dy.h, d.is_max ? arg.h : NULL, dx.h, 0, rx.h);
    dev->ops->pool_backward(dev, &d, dy.d, d.is_max ? arg.d : NULL, dx.d, 0, rx.d);
    snprintf(what, sizeof what, "%s backward, after a ReLU", name);
    bad += pair_check(what, &dx, d.is_max ? 0.0 : 1e-6, d.is_max ? 0.0 : 1e-6);
    pair_free(&rx);
    pair_free(&x), pair_free(&y), pair_free(&dy), pair_free(&dx);
    ipair_free(&arg);
    return bad;
}

static tfc_pool_desc pool_desc(int n, int h, int w, int c, int k, int s, int same, int is_max)
{
    tfc_pool_desc d = {.n = n, .h = h, .w = w, .c = c, .kh = k, .kw = k, .sh = s, .sw = s,
                       .is_max = is_max};
    if (same) {
        same_pad(h, k, s, 1, &d.oh, &d.pad_top);
        same_pad(w, k, s, 1, &d.ow, &d.pad_left);
    } else {
        d.oh = (h - k) / s + 1;
        d.ow = (w - k) / s + 1;
    }
    return d;
}

static void test_pool(void)
{
    for (int is_max = 0; is_max < 2; is_max++) {
        const char *kind = is_max ? "max" : "avg";
        char name[64];
        snprintf(name, sizeof name, "%s 2/2 valid", kind);
        CU_ASSERT_EQUAL(pool_case(name, pool_desc(3, 12, 10, 5, 2, 2, 0, is_max)), 0);
        snprintf(name, sizeof name, "%s 3/2 same", kind); /* overlapping, padded windows */
        CU_ASSERT_EQUAL(pool_case(name, pool_desc(2, 11, 13, 4, 3, 2, 1, is_max)), 0);
        snprintf(name, sizeof name, "%s 3/1 same", kind);
        CU_ASSERT_EQUAL(pool_case(name, pool_desc(2, 7, 6, 3, 3, 1, 1, is_max)), 0);
        snprintf(name, sizeof name, "%s global", kind); /* GlobalAveragePooling2D's shape */
        CU_ASSERT_EQUAL(pool_case(name, pool_desc(4, 8, 8, 9, 8, 8, 0, is_max)), 0);
        /* the 1-D poolings: a 1 x steps image, window 1 x 3 stride 2 SAME, and global */
        tfc_pool_desc seq = {.n = 3, .h = 1, .w = 12, .c = 5, .kh = 1, .kw = 3, .sh = 1,
                             .sw = 2, .oh = 1, .is_max = is_max};
        same_pad(seq.w, seq.kw, seq.sw, 1, &seq.ow, &seq.pad_left);
        snprintf(name, sizeof name, "%s 1x3/2 same", kind);
        CU_ASSERT_EQUAL(pool_case(name, seq), 0);
        seq.kw = seq.sw = seq.w, seq.ow = 1, seq.pad_left = 0;
        snprintf(name, sizeof name, "%s 1-D global", kind);
        CU_ASSERT_EQUAL(pool_case(name, seq), 0);
    }
    check_status();
}

/* ---- batch normalisation ---------------------------------------------------------------- */

static int bn_case(int64_t rows, int cols)
{
    pair x = pair_rand(rows * cols, -2, 3), gamma = pair_rand(cols, 0.5, 1.5);
    pair beta = pair_rand(cols, -0.5, 0.5), mm = pair_rand(cols, -1, 1), mv = pair_rand(cols, 0.5, 2);
    pair y = pair_new(rows * cols), sm = pair_new(cols), si = pair_new(cols);
    pair dy = pair_rand(rows * cols, -1, 1), dx = pair_rand(rows * cols, -1, 1);
    pair dg = pair_rand(cols, -1, 1), dbt = pair_rand(cols, -1, 1);
    int bad = 0;
    pair yr = pair_new(rows * cols), m2 = pair_new(cols), v2 = pair_new(cols);
    memcpy(m2.h, mm.h, (size_t)cols * 4), memcpy(v2.h, mv.h, (size_t)cols * 4);
    pair_push(&m2), pair_push(&v2);
    ref->ops->bn_forward_train(ref, rows, cols, x.h, gamma.h, beta.h, 1e-3f, 0.99f, mm.h, mv.h,
                               y.h, sm.h, si.h, TFC_ACT_LINEAR);
    dev->ops->bn_forward_train(dev, rows, cols, x.d, gamma.d, beta.d, 1e-3f, 0.99f, mm.d, mv.d,
                               y.d, sm.d, si.d, TFC_ACT_LINEAR);
    bad += pair_check("bn train y", &y, 1e-5, 1e-5);
    ref->ops->bn_forward_train(ref, rows, cols, x.h, gamma.h, beta.h, 1e-3f, 0.99f, m2.h, v2.h,
                               yr.h, sm.h, si.h, TFC_ACT_RELU);
    dev->ops->bn_forward_train(dev, rows, cols, x.d, gamma.d, beta.d, 1e-3f, 0.99f, m2.d, v2.d,
                               yr.d, sm.d, si.d, TFC_ACT_RELU);
    bad += pair_check("bn train y, relu", &yr, 1e-5, 1e-5);
    pair_free(&yr), pair_free(&m2), pair_free(&v2);
    bad += pair_check("bn save_mean", &sm, 1e-6, 1e-6);
    bad += pair_check("bn save_invstd", &si, 1e-6, 1e-6);
    bad += pair_check("bn moving_mean", &mm, 1e-6, 1e-6);
    bad += pair_check("bn moving_var", &mv, 1e-6, 1e-6);
    /* backward from the same saved statistics */
    pair_push(&sm);
    pair_push(&si);
    ref->ops->bn_backward(ref, rows, cols, x.h, dy.h, gamma.h, sm.h, si.h, dx.h, dg.h, dbt.h, 0);
    dev->ops->bn_backward(dev, rows, cols, x.d, dy.d, gamma.d, sm.d, si.d, dx.d, dg.d, dbt.d, 0);
    bad += pair_check("bn dx", &dx, 1e-4, 1e-5);
    bad += pair_check("bn dgamma", &dg, 1e-5, 1e-4);
    bad += pair_check("bn dbeta", &dbt, 1e-5, 1e-4);
    pair dxa = pair_rand(rows * cols, -1, 1); /* overwritten */
    ref->ops->bn_backward(ref, rows, cols, x.h, dy.h, gamma.h, sm.h, si.h, dxa.h, dg.h, dbt.h, 1);
    dev->ops->bn_backward(dev, rows, cols, x.d, dy.d, gamma.d, sm.d, si.d, dxa.d, dg.d, dbt.d, 1);
    bad += pair_check("bn dx, assigned", &dxa, 1e-4, 1e-5);
    pair_free(&dxa);
    ref->ops->bn_forward_infer(ref, rows, cols, x.h, gamma.h, beta.h, mm.h, mv.h, 1e-3f, y.h);
    dev->ops->bn_forward_infer(dev, rows, cols, x.d, gamma.d, beta.d, mm.d, mv.d, 1e-3f, y.d);
    bad += pair_check("bn infer y", &y, 1e-5, 1e-5);
    pair *all[] = {&x, &gamma, &beta, &mm, &mv, &y, &sm, &si, &dy, &dx, &dg, &dbt};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) pair_free(all[i]);
    return bad;
}

static void test_batch_norm(void)
{
    CU_ASSERT_EQUAL(bn_case(50, 3), 0);
    CU_ASSERT_EQUAL(bn_case(64 * 16 * 16, 16), 0); /* many rows: split reduction */
    CU_ASSERT_EQUAL(bn_case(37, 300), 0);           /* many channels */
    check_status();
}

/* ---- embedding ------------------------------------------------------------------------------ */

static void test_embedding(void)
{
    const int vocab = 50, dim = 70;
    const int64_t n = 3000; /* many repeated ids */
    ipair ids = ipair_new(n);
    for (int64_t i = 0; i < n; i++) ids.h[i] = irand(vocab);
    ipair_push(&ids);
    pair table = pair_rand((int64_t)vocab * dim, -1, 1), y = pair_new(n * dim);
    pair dy = pair_rand(n * dim, -1, 1), dt = pair_rand((int64_t)vocab * dim, -1, 1);
    ref->ops->gather(ref, n, dim, ids.h, table.h, y.h);
    dev->ops->gather(dev, n, dim, ids.d, table.d, y.d);
    CU_ASSERT_EQUAL(pair_check("gather", &y, EXACT), 0);
    pair dt0 = pair_new(dt.n);
    memcpy(dt0.h, dt.h, (size_t)dt.n * 4);
    pair_push(&dt0);
    ref->ops->scatter_add(ref, n, dim, ids.h, dy.h, dt.h);
    dev->ops->scatter_add(dev, n, dim, ids.d, dy.d, dt.d);
    CU_ASSERT_EQUAL(pair_check("scatter_add", &dt, 1e-5, 1e-5), 0);
    /* deterministic mode: the CPU's order, so its bits */
    set_deterministic(1);
    dev->ops->scatter_add(dev, n, dim, ids.d, dy.d, dt0.d);
    memcpy(dt0.h, dt.h, (size_t)dt.n * 4); /* the reference's result */
    CU_ASSERT_EQUAL(pair_check("scatter_add deterministic", &dt0, EXACT), 0);
    set_deterministic(0);
    ipair_free(&ids);
    pair_free(&table), pair_free(&y), pair_free(&dy), pair_free(&dt), pair_free(&dt0);
    check_status();
}

/* ---- LSTM ---------------------------------------------------------------------------------- */

static int lstm_case(const char *name, tfc_lstm_desc d, int with_mask, int with_bias,
                     int with_dx, double rtol, double atol)
{
    const int64_t nt = (int64_t)d.n * d.t, G = 4 * (int64_t)d.units;
    pair x = pair_rand(nt * d.in, -1, 1), k = pair_rand(d.in * G, -0.4, 0.4);
    pair r = pair_rand(d.units * G, -0.4, 0.4), b = pair_rand(G, -0.3, 0.3);
    pair mask = pair_new(nt);
    for (int64_t i = 0; i < nt; i++) mask.h[i] = !with_mask || urand() > 0.3 ? 1.0f : 0.0f;
    pair_push(&mask);
    const int64_t ny = d.return_sequences ? nt * d.units : (int64_t)d.n * d.units;
    pair y = pair_new(ny), hs = pair_new(nt * d.units), cs = pair_new(nt * d.units);
    pair gates = pair_new(nt * G), dy = pair_rand(ny, -1, 1), dx = pair_rand(nt * d.in, -1, 1);
    pair dk = pair_rand(d.in * G, -1, 1), dr = pair_rand(d.units * G, -1, 1);
    pair dbias = pair_rand(G, -1, 1);
    size_t wr = ref->ops->lstm_workspace(ref, &d), wd = dev->ops->lstm_workspace(dev, &d);
    void *wsr = ref->ops->alloc(ref, wr), *wsd = dev->ops->alloc(dev, wd);
    const float *mh = with_mask ? mask.h : NULL, *md = with_mask ? mask.d : NULL;
    ref->ops->lstm_forward(ref, &d, x.h, k.h, r.h, with_bias ? b.h : NULL, mh, y.h, hs.h, cs.h,
                           gates.h, wsr);
    dev->ops->lstm_forward(dev, &d, x.d, k.d, r.d, with_bias ? b.d : NULL, md, y.d, hs.d, cs.d,
                           gates.d, wsd);
    char what[96];
    int bad = 0;
    snprintf(what, sizeof what, "%s y", name);
    bad += pair_check(what, &y, rtol, atol);
    snprintf(what, sizeof what, "%s cseq", name);
    bad += pair_check(what, &cs, rtol, atol);
    snprintf(what, sizeof what, "%s gates", name);
    bad += pair_check(what, &gates, rtol, atol);
    /* backward from the reference's saved sequences on both */
    pair_push(&hs), pair_push(&cs), pair_push(&gates);
    ref->ops->lstm_backward(ref, &d, x.h, k.h, r.h, mh, hs.h, cs.h, gates.h, dy.h,
                            with_dx ? dx.h : NULL, dk.h, dr.h, with_bias ? dbias.h : NULL, wsr);
    dev->ops->lstm_backward(dev, &d, x.d, k.d, r.d, md, hs.d, cs.d, gates.d, dy.d,
                            with_dx ? dx.d : NULL, dk.d, dr.d, with_bias ? dbias.d : NULL, wsd);
    snprintf(what, sizeof what, "%s dx", name);
    bad += pair_check(what, &dx, rtol, atol);
    snprintf(what, sizeof what, "%s dkernel", name);
    bad += pair_check(what, &dk, rtol, atol * 10);
    snprintf(what, sizeof what, "%s drkernel", name);
    bad += pair_check(what, &dr, rtol, atol * 10);
    snprintf(what, sizeof what, "%s dbias", name);
    bad += pair_check(what, &dbias, rtol, atol * 10);
    pair *all[] = {&x, &k, &r, &b, &mask, &y, &hs, &cs, &gates, &dy, &dx, &dk, &dr, &dbias};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) pair_free(all[i]);
    ref->ops->free(ref, wsr);
    dev->ops->free(dev, wsd);
    return bad;
}

static void test_lstm(void)
{
    tfc_lstm_desc seq = {.n = 5, .t = 9, .in = 7, .units = 12, .return_sequences = 1};
    tfc_lstm_desc last = {.n = 4, .t = 11, .in = 6, .units = 33, .return_sequences = 0};
    CU_ASSERT_EQUAL(lstm_case("lstm seq", seq, 0, 1, 1, 1e-4, 1e-5), 0);
    CU_ASSERT_EQUAL(lstm_case("lstm seq masked", seq, 1, 1, 1, 1e-4, 1e-5), 0);
    CU_ASSERT_EQUAL(lstm_case("lstm last", last, 0, 1, 1, 1e-4, 1e-5), 0);
    CU_ASSERT_EQUAL(lstm_case("lstm last masked, no bias, no dx", last, 1, 0, 0, 1e-4, 1e-5), 0);
    check_status();
}

static void test_lstm_tf32(void)
{
    set_tf32(1);
    tfc_lstm_desc seq = {.n = 16, .t = 12, .in = 32, .units = 64, .return_sequences = 1};
    CU_ASSERT_EQUAL(lstm_case("lstm tf32", seq, 1, 1, 1, TF32), 0);
    set_tf32(0);
    check_status();
}

/* ---- losses and accuracy --------------------------------------------------------------------- */

/* The loss op of `kind` on both backends (delta: Huber's). */
static int loss_case(tfc_loss_kind kind, int logits, int weighted, int with_dx, float delta)
{
    const int64_t rows = 203;
    const int C = kind == TFC_LOSS_BCE ? 5 : 17;
    pair x = pair_rand(rows * C, logits ? -6 : 0, logits ? 6 : 1);
    if (!logits) /* rows of probabilities, with a few at the clip boundaries */
        for (int64_t r = 0; r < rows; r++) {
            float *p = x.h + r * C;
            if (kind != TFC_LOSS_BCE && kind < TFC_LOSS_MSE) { /* not the regression ones */
                double s = 0;
                for (int j = 0; j < C; j++) s += p[j];
                for (int j = 0; j < C; j++) p[j] = (float)(p[j] / s);
            }
            if (r % 17 == 3) p[0] = 0.0f;
            if (r % 19 == 4) p[C - 1] = 1.0f;
        }
    pair_push(&x);
    ipair sl = ipair_new(rows);
    pair dl = pair_new(rows * C), w = pair_new(rows);
    for (int64_t r = 0; r < rows; r++) {
        sl.h[r] = irand(C);
        w.h[r] = !weighted || r % 5 ? 1.0f : 0.0f;
        if (kind == TFC_LOSS_CCE) { /* soft distributions */
            double s = 0;
            for (int j = 0; j < C; j++) s += dl.h[r * C + j] = (float)urand();
            for (int j = 0; j < C; j++) dl.h[r * C + j] = (float)(dl.h[r * C + j] / s);
        } else {
            for (int j = 0; j < C; j++)
                dl.h[r * C + j] = kind == TFC_LOSS_BCE ? (float)irand(2) : (float)urand();
        }
    }
    ipair_push(&sl), pair_push(&dl), pair_push(&w);
    pair lo = pair_new(1), dx = pair_rand(rows * C, -9, 9);
    const void *lh = kind == TFC_LOSS_SPARSE_CCE ? (const void *)sl.h : (const void *)dl.h;
    const void *ld = kind == TFC_LOSS_SPARSE_CCE ? (const void *)sl.d : (const void *)dl.d;
    const float scale = 1.0f / 150.0f;
    ref->ops->loss(ref, kind, logits, delta, rows, C, x.h, lh, weighted ? w.h : NULL, scale, lo.h,
                   with_dx ? dx.h : NULL);
    dev->ops->loss(dev, kind, logits, delta, rows, C, x.d, ld, weighted ? w.d : NULL, scale, lo.d,
                   with_dx ? dx.d : NULL);
    char what[96];
    snprintf(what, sizeof what, "loss %d%s%s", (int)kind, logits ? " logits" : " probs",
             weighted ? " weighted" : "");
    int bad = pair_check(what, &lo, 1e-5, 1e-7);
    strcat(what, " dx");
    bad += pair_check(what, &dx, 1e-5, 1e-7);
    pair_free(&x), pair_free(&dl), pair_free(&w), pair_free(&lo), pair_free(&dx);
    ipair_free(&sl);
    return bad;
}

static void test_loss(void)
{
    for (int kind = 0; kind < TFC_LOSS_COUNT; kind++)
        for (int logits = 0; logits < 2; logits++)
            for (int weighted = 0; weighted < 2; weighted++)
                CU_ASSERT_EQUAL(loss_case((tfc_loss_kind)kind, logits, weighted, 1, 1.0f), 0);
    CU_ASSERT_EQUAL(loss_case(TFC_LOSS_SPARSE_CCE, 1, 0, 0, 1.0f), 0); /* inference: no dx */
    CU_ASSERT_EQUAL(loss_case(TFC_LOSS_HUBER, 0, 1, 1, 0.3f), 0); /* errors on both sides */
    /* a sparse label out of range counts nothing and gets dx 0, as on the CPU */
    pair x = pair_rand(3 * 4, -1, 1), lo = pair_new(1), dx = pair_rand(12, -1, 1);
    ipair l = ipair_new(3);
    l.h[0] = 1, l.h[1] = 7, l.h[2] = -1;
    ipair_push(&l);
    ref->ops->loss(ref, TFC_LOSS_SPARSE_CCE, 1, 1.0f, 3, 4, x.h, l.h, NULL, 1.0f, lo.h, dx.h);
    dev->ops->loss(dev, TFC_LOSS_SPARSE_CCE, 1, 1.0f, 3, 4, x.d, l.d, NULL, 1.0f, lo.d, dx.d);
    CU_ASSERT_EQUAL(pair_check("loss bad labels", &lo, F32), 0);
    CU_ASSERT_EQUAL(pair_check("loss bad labels dx", &dx, F32), 0);
    pair_free(&x), pair_free(&lo), pair_free(&dx);
    ipair_free(&l);
    check_status();
}

static int accuracy_case(tfc_loss_kind kind, int C, int k, int weighted)
{
    const int64_t rows = 517;
    pair x = pair_new(rows * C), dl = pair_new(rows * C), w = pair_new(rows);
    ipair sl = ipair_new(rows);
    for (int64_t r = 0; r < rows; r++) {
        /* few distinct scores: many ties, which count against the label */
        for (int j = 0; j < C; j++) x.h[r * C + j] = (float)irand(4) - (C == 1 ? 1.5f : 0.0f);
        if (r % 41 == 0) x.h[r * C] = NAN;
        sl.h[r] = irand(C == 1 ? 2 : C);
        for (int j = 0; j < C; j++) dl.h[r * C + j] = C == 1 ? (float)sl.h[r] : (float)(j == sl.h[r]);
        w.h[r] = !weighted || r % 3 ? 1.0f : 0.0f;
    }
    pair_push(&x), pair_push(&dl), pair_push(&w), ipair_push(&sl);
    pair count = pair_rand(1, 0, 10); /* accumulates */
    const void *lh = kind == TFC_LOSS_SPARSE_CCE ? (const void *)sl.h : (const void *)dl.h;
    const void *ld = kind == TFC_LOSS_SPARSE_CCE ? (const void *)sl.d : (const void *)dl.d;
    ref->ops->accuracy(ref, kind, 1, rows, C, k, x.h, lh, weighted ? w.h : NULL, count.h);
    dev->ops->accuracy(dev, kind, 1, rows, C, k, x.d, ld, weighted ? w.d : NULL, count.d);
    char what[64];
    snprintf(what, sizeof what, "accuracy kind %d C %d k %d", (int)kind, C, k);
    int bad = pair_check(what, &count, EXACT);
    pair_free(&x), pair_free(&dl), pair_free(&w), pair_free(&count);
    ipair_free(&sl);
    return bad;
}

static void test_accuracy(void)
{
    CU_ASSERT_EQUAL(accuracy_case(TFC_LOSS_SPARSE_CCE, 10, 1, 0), 0);
    CU_ASSERT_EQUAL(accuracy_case(TFC_LOSS_SPARSE_CCE, 10, 3, 1), 0);
    CU_ASSERT_EQUAL(accuracy_case(TFC_LOSS_SPARSE_CCE, 70, 5, 0), 0);
    CU_ASSERT_EQUAL(accuracy_case(TFC_LOSS_CCE, 10, 1, 1), 0);
    CU_ASSERT_EQUAL(accuracy_case(TFC_LOSS_BCE, 1, 1, 0), 0);
    CU_ASSERT_EQUAL(accuracy_case(TFC_LOSS_SPARSE_CCE, 1, 1, 1), 0);
    check_status();
}

/* ---- optimizer ---------------------------------------------------------------------------- */

/* slot0's range: an accumulator of squares (adadelta, ftrl) is never negative */
static double optim_slot0_low(const tfc_optim_desc *d)
{
    return d->type == TFC_OPTIMIZER_ADADELTA || d->type == TFC_OPTIMIZER_FTRL ? 0.0 : -0.1;
}

/* The tolerance of a kind: bit for bit, but ftrl's powf (a power other than 0.5), which
 * CUDA does not round correctly */
static double optim_rtol(const tfc_optim_desc *d)
{
    return d->type == TFC_OPTIMIZER_FTRL && d->lr_power != -0.5f ? 2e-6 : 0.0;
}

static int optim_case(const char *name, tfc_optim_desc d)
{
    const int64_t n = 54321;
    pair w = pair_rand(n, -1, 1), g = pair_rand(n, -1, 1);
    pair s0 = pair_rand(n, optim_slot0_low(&d), 0.1), s1 = pair_rand(n, 0, 0.1),
         s2 = pair_rand(n, 0, 0.1);
    const double rtol = optim_rtol(&d), atol = rtol * 1e-2;
    int bad = 0;
    for (int step = 0; step < 3; step++) {
        ref->ops->optimizer_update(ref, &d, n, w.h, g.h, s0.h, s1.h, s2.h);
        dev->ops->optimizer_update(dev, &d, n, w.d, g.d, s0.d, s1.d, s2.d);
    }
    char what[96];
    snprintf(what, sizeof what, "%s params", name);
    bad += pair_check(what, &w, rtol, atol);
    snprintf(what, sizeof what, "%s slot0", name);
    bad += pair_check(what, &s0, rtol, atol);
    snprintf(what, sizeof what, "%s slot1", name);
    bad += pair_check(what, &s1, rtol, atol);
    snprintf(what, sizeof what, "%s slot2", name);
    bad += pair_check(what, &s2, rtol, atol);
    pair_free(&w), pair_free(&g), pair_free(&s0), pair_free(&s1), pair_free(&s2);
    return bad;
}

/* Every optimizer kind and variant the kernel branches on: fills d[0..17) and name[0..17). */
#define OPTIM_KINDS 17
static void optim_kinds(tfc_optim_desc d[OPTIM_KINDS], const char *name[OPTIM_KINDS])
{
    const tfc_optim_desc base = {.lr = 0.01f, .grad_scale = 0.5f, .l2 = 1e-4f, .epsilon = 1e-7f};
    for (int k = 0; k < OPTIM_KINDS; k++) d[k] = base;
    d[0].type = TFC_OPTIMIZER_SGD, name[0] = "sgd";
    d[1] = d[0], d[1].momentum = 0.9f, name[1] = "sgd momentum";
    d[2] = d[1], d[2].nesterov = 1, name[2] = "sgd nesterov";
    d[3].type = TFC_OPTIMIZER_ADAM, d[3].beta_1 = 0.9f, d[3].beta_2 = 0.999f;
    d[3].alpha = 0.0031f, name[3] = "adam";
    d[4] = d[3], d[4].type = TFC_OPTIMIZER_ADAMW, d[4].amsgrad = 1;
    d[4].decay = 0.01f * 0.004f, name[4] = "adamw amsgrad";
    d[5].type = TFC_OPTIMIZER_RMSPROP, d[5].rho = 0.9f, name[5] = "rmsprop";
    d[6] = d[5], d[6].centered = 1, d[6].momentum = 0.5f, name[6] = "rmsprop centered momentum";
    d[7].type = TFC_OPTIMIZER_ADAGRAD, name[7] = "adagrad";
    /* the CPU-first ones (docs/gpu.md), with the per-step constants of some step */
    d[8].type = TFC_OPTIMIZER_NADAM, d[8].beta_1 = 0.9f, d[8].beta_2 = 0.999f;
    d[8].coef[0] = 0.87f, d[8].coef[1] = 0.3f, d[8].coef[2] = 0.1f, d[8].coef[3] = 0.2f;
    d[8].coef[4] = 0.002f, d[8].decay = 1e-4f, name[8] = "nadam";
    d[9].type = TFC_OPTIMIZER_ADAMAX, d[9].beta_1 = 0.9f, d[9].beta_2 = 0.999f;
    d[9].coef[0] = 0.1f, name[9] = "adamax";
    d[10].type = TFC_OPTIMIZER_LION, d[10].beta_1 = 0.9f, d[10].beta_2 = 0.99f;
    d[10].decay = 1e-3f, name[10] = "lion";
    d[11].type = TFC_OPTIMIZER_ADADELTA, d[11].rho = 0.95f, name[11] = "adadelta";
    d[12].type = TFC_OPTIMIZER_FTRL, d[12].lr_power = -0.5f, d[12].l1 = 1e-3f;
    d[12].l2_shrinkage = 2e-3f, d[12].coef[0] = 0.01f, name[12] = "ftrl";
    d[13] = d[12], d[13].lr_power = -0.7f, name[13] = "ftrl power 0.7"; /* powf, not sqrtf */
    d[14].type = TFC_OPTIMIZER_SCHEDULE_FREE_ADAMW, d[14].beta_1 = 0.9f, d[14].beta_2 = 0.999f;
    d[14].epsilon = 1e-8f, d[14].coef[0] = 0.002f, d[14].coef[1] = 0.003f;
    d[14].coef[2] = 1.0f / 3.0f, d[14].decay = 1e-4f, name[14] = "schedulefreeadamw";
    d[15] = d[14], d[15].coef[3] = 1.0f, name[15] = "schedulefreeadamw first"; /* z = w */
    d[16] = d[3], d[16].clipvalue = 0.3f, name[16] = "adam clipvalue"; /* Keras's clipvalue */
}

static void test_optimizer(void)
{
    tfc_optim_desc d[OPTIM_KINDS];
    const char *name[OPTIM_KINDS];
    optim_kinds(d, name);
    for (int k = 0; k < OPTIM_KINDS; k++) CU_ASSERT_EQUAL(optim_case(name[k], d[k]), 0);
    check_status();
}

/* ---- determinism ----------------------------------------------------------------------------- */

/* In deterministic mode the convolution gradients come out identical on a second run. */
static void test_deterministic(void)
{
    set_deterministic(1);
    tfc_conv_desc d = conv_desc(16, 16, 16, 32, 3, 3, 32, 1, 1, 1, 1);
    size_t wd = dev->ops->conv_workspace(dev, &d);
    void *ws = dev->ops->alloc(dev, wd);
    const int64_t nx = (int64_t)d.n * d.h * d.w * d.c, ny = (int64_t)d.n * d.oh * d.ow * d.f;
    const int64_t nw = (int64_t)d.kh * d.kw * d.c * d.f;
    pair x = pair_rand(nx, -1, 1), w = pair_rand(nw, -1, 1), dy = pair_rand(ny, -1, 1);
    pair dx = pair_new(nx), dw = pair_new(nw);
    float *first_dx = malloc((size_t)nx * 4), *first_dw = malloc((size_t)nw * 4);
    for (int run = 0; run < 2; run++) {
        dev->ops->zero(dev, dx.d, (size_t)nx * 4);
        dev->ops->zero(dev, dw.d, (size_t)nw * 4);
        dev->ops->conv_backward_data(dev, &d, dy.d, w.d, dx.d, 0, ws);
        dev->ops->conv_backward_filter(dev, &d, x.d, dy.d, dw.d, ws);
        dev->ops->download(dev, run ? dx.h : first_dx, dx.d, (size_t)nx * 4);
        dev->ops->download(dev, run ? dw.h : first_dw, dw.d, (size_t)nw * 4);
    }
    CU_ASSERT_EQUAL(compare_floats("deterministic dx", dx.h, first_dx, nx, EXACT), 0);
    CU_ASSERT_EQUAL(compare_floats("deterministic dw", dw.h, first_dw, nw, EXACT), 0);
    free(first_dx), free(first_dw);
    pair_free(&x), pair_free(&w), pair_free(&dy), pair_free(&dx), pair_free(&dw);
    dev->ops->free(dev, ws);
    set_deterministic(0);
    check_status();
}

/* tfc-summary's plan on the GPU (issue 16): what binding each zoo model takes from the
 * caching allocator is the plan made on paper, rounded up to the allocator's size classes
 * (at most 25%, 2 MiB above 32 MiB), never less. A model with a layer the GPU lacks (none in
 * the zoo since every layer got its kernels) is refused at binding, naming it, and left out. */
static void test_memory_plan(void)
{
#ifdef TFC_HAVE_CUDA
    if (twin) return;
    glob_t g;
    if (glob("model_zoo/*/model.yaml", 0, NULL, &g) != 0) {
        tfc_test_skip("run from the project root (model_zoo/ not found)");
        return;
    }
    for (size_t f = 0; f < g.gl_pathc; f++) {
        tfc_error err;
        tfc_error_clear(&err);
        tfc_model *m = tfc_model_load_config(g.gl_pathv[f], NULL, 0, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        tfc_memory_plan p;
        tfc_gpu_memory before, after;
        /* a model with a layer the GPU lacks fails planning as binding would, naming it */
        tfc_status planned_ok = tfc_model_plan_memory(m, dev, 64, &p, &err);
        if (planned_ok && strstr(err.msg, "run this model with --device cpu")) {
            printf("\n  %s: left out, %s", g.gl_pathv[f], err.msg);
            tfc_error_clear(&err);
            CU_ASSERT_NOT_EQUAL(tfc_model_bind(m, dev, 64, &err), TFC_OK);
            tfc_model_free(m);
            continue;
        }
        CU_ASSERT_EQUAL_FATAL(planned_ok, TFC_OK);
        tfc_gpu_memory_stats(dev, &before);
        CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, dev, 64, &err), TFC_OK);
        tfc_gpu_memory_stats(dev, &after);
        size_t planned = p.params + p.grads + p.arena, got = after.in_use - before.in_use;
        CU_ASSERT(got >= planned);
        CU_ASSERT(got <= planned + planned / 4 + 3 * 512);
        printf("\n  %s: planned %.2f MiB, bound %.2f MiB (%.3fx)", g.gl_pathv[f],
               (double)planned / (1 << 20), (double)got / (1 << 20),
               (double)got / (double)planned);
        tfc_model_free(m);
    }
    globfree(&g);
    check_status();
#endif
}

/* ---- memory and errors (GPU only) --------------------------------------------------------- */

static void test_memory(void)
{
#ifdef TFC_HAVE_CUDA
    if (twin) return;
    tfc_gpu_memory st0, st;
    tfc_gpu_memory_stats(dev, &st0);
    void *a = dev->ops->alloc(dev, 3 << 20);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    tfc_gpu_memory_stats(dev, &st);
    CU_ASSERT(st.in_use >= st0.in_use + (3 << 20));
    dev->ops->free(dev, a);
    /* the cached block serves the next request of its size class without cudaMalloc */
    void *b = dev->ops->alloc(dev, (3 << 20) - 1000);
    CU_ASSERT_PTR_EQUAL(b, a);
    dev->ops->free(dev, b);
    tfc_gpu_memory_stats(dev, &st);
    CU_ASSERT_EQUAL(st.in_use, st0.in_use);
    /* a limit just above what is in use refuses a big block (after releasing the cached
     * ones); lifting it allows it again */
    tfc_gpu_set_memory_limit(dev, st.in_use + (1 << 20));
    CU_ASSERT_PTR_NULL(dev->ops->alloc(dev, (size_t)64 << 20));
    tfc_gpu_set_memory_limit(dev, 0);
    a = dev->ops->alloc(dev, (size_t)64 << 20);
    CU_ASSERT_PTR_NOT_NULL(a);
    dev->ops->free(dev, a);
    /* the table's configure op sets the same limit, with the other options */
    tfc_device_options o = {0, 0, st.in_use + (1 << 20)};
    tfc_backend_configure(dev, &o);
    tfc_gpu_memory lim;
    tfc_gpu_memory_stats(dev, &lim);
    CU_ASSERT_EQUAL(lim.limit, o.memory_limit);
    CU_ASSERT_PTR_NULL(dev->ops->alloc(dev, (size_t)64 << 20));
    o.memory_limit = 0;
    tfc_backend_configure(dev, &o);
    tfc_gpu_memory_stats(dev, &lim);
    CU_ASSERT_EQUAL(lim.limit, 0);
    /* an impossible request is NULL, not an error */
    CU_ASSERT_PTR_NULL(dev->ops->alloc(dev, (size_t)1 << 50));
    check_status();
    /* freeing a pointer that is not ours is recorded, with the call, and then cleared */
    int local;
    dev->ops->free(dev, &local);
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_gpu_status(dev, &err), TFC_ERR_DEVICE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not allocated by this backend"));
    CU_ASSERT_EQUAL(tfc_gpu_status(dev, &err), TFC_OK);
    /* the same through the table's status op */
    dev->ops->free(dev, &local);
    CU_ASSERT_EQUAL(tfc_backend_status(dev, &err), TFC_ERR_DEVICE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not allocated by this backend"));
    CU_ASSERT_EQUAL(tfc_backend_status(dev, &err), TFC_OK);
    printf("\n  %s: %.1f MiB reserved at peak", tfc_gpu_device_name(dev),
           (double)st.peak_reserved / (1 << 20));
#endif
}

/* ---- whole training steps ------------------------------------------------------------------ */

static const char cnn_yaml[] =
    "name: small_cnn\n"
    "input: {shape: [12, 12, 3]}\n"
    "layers:\n"
    "  - Conv2D: {name: c1, filters: 8, kernel_size: 3, strides: 2, padding: same, activation: relu}\n"
    "  - BatchNormalization: {name: bn}\n"
    "  - Conv2D: {name: c2, filters: 8, kernel_size: 3, padding: same, use_bias: false}\n"
    "  - Add: {name: add, inputs: [c2, bn]}\n"
    "  - Activation: {activation: swish}\n"
    "  - MaxPooling2D: {pool_size: 3, strides: 2, padding: same}\n"
    "  - Dropout: {rate: 0.3}\n"
    "  - Flatten: {}\n"
    "  - Dense: {units: 16, activation: tanh}\n"
    "  - Dense: {units: 10, activation: softmax}\n"
    "loss: sparse_categorical_crossentropy\n"
    "metrics: [accuracy]\n";

static const char lstm_yaml[] =
    "name: small_lstm\n"
    "input: {shape: [9], dtype: int32}\n"
    "layers:\n"
    "  - Embedding: {input_dim: 20, output_dim: 8, mask_zero: true}\n"
    "  - LSTM: {units: 16, return_sequences: true}\n"
    "  - Dropout: {rate: 0.2}\n"
    "  - Dense: {units: 20}\n"
    "loss: sparse_categorical_crossentropy\n"
    "metrics: [accuracy]\n";

/* The layers and loss the two models above leave out: AveragePooling2D, a Concatenate of two
 * branches, Reshape, GlobalAveragePooling2D and a non-sparse loss (categorical, on soft
 * labels); trained with Adam in train_steps. */
static const char mixed_yaml[] =
    "name: mixed\n"
    "input: {shape: [10, 10, 3]}\n"
    "layers:\n"
    "  - Conv2D: {name: a, filters: 6, kernel_size: 3, padding: same, activation: tanh}\n"
    "  - AveragePooling2D: {name: ap, pool_size: 2}\n"
    "  - Conv2D: {name: b, filters: 4, kernel_size: 1, strides: 2, inputs: input}\n"
    "  - Concatenate: {name: cat, inputs: [ap, b]}\n"
    "  - Reshape: {name: r, target_shape: [25, 10]}\n"
    "  - Dense: {name: d1, units: 8, activation: relu}\n"
    "  - Reshape: {name: r2, target_shape: [5, 5, 8]}\n"
    "  - GlobalAveragePooling2D: {name: gap}\n"
    "  - Dense: {name: out, units: 5, activation: softmax}\n"
    "loss: categorical_crossentropy\n"
    "metrics: [accuracy]\n";

static tfc_precision bind_precision; /* load_bound binds with it (float32 unless set) */

/* 1: load_bound lets the layers that set cpu_first (built from ops every backend has, not
 * yet run under make test-gpu) bind on the device, so that the case that clears them can
 * run before the flag goes. */
static int lift_cpu_first;

/* Points each cpu_first layer of m at a copy of its ops without the flag. */
static void cpu_first_lifted(tfc_model *m)
{
    static tfc_layer_ops lifted[64]; /* one per CPU-first type the cases train */
    static int nlifted;
    for (int i = 0; i < tfc_model_nlayers(m); i++) {
        tfc_layer *l = tfc_model_layer(m, i);
        if (!l->ops->cpu_first) continue;
        int k = 0;
        while (k < nlifted && strcmp(lifted[k].type, l->ops->type)) k++;
        if (k == nlifted) {
            TFC_ASSERT(nlifted < (int)(sizeof lifted / sizeof *lifted));
            lifted[nlifted] = *l->ops;
            lifted[nlifted++].cpu_first = 0;
        }
        l->ops = &lifted[k];
    }
}

static tfc_model *load_bound(const char *yaml, tfc_backend *be, int batch)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), "step.yaml", &err);
    if (m) tfc_model_set_precision(m, bind_precision);
    if (m && lift_cpu_first) cpu_first_lifted(m);
    if (!m || tfc_model_bind(m, be, batch, &err) || tfc_model_init_weights(m, 42, &err)) {
        printf("\n  %s", err.text);
        tfc_model_free(m);
        return NULL;
    }
    return m;
}

/* Downloads n floats of a backend buffer. */
static float *fetch(tfc_backend *be, const float *p, int64_t n)
{
    float *h = malloc((size_t)(n ? n : 1) * 4);
    be->ops->download(be, h, p, (size_t)n * 4);
    return h;
}

/* Every parameter (values, and gradients of the trainable ones) of ma against mb, by name. */
/* > 0: compare_params compares each tensor as a whole, ||dev - cpu|| / ||cpu|| <= this,
 * instead of element by element. The TF32 bound, derived: TF32 keeps 10 mantissa bits, so
 * rounding an operand costs up to u = 2^-11 = 4.9e-4 relative and a product of two rounded
 * operands up to 2u ~ 1e-3. A weight gradient is a reduction over K = batch * output
 * pixels terms (c1 and c2, 6 x 6 outputs: 16 * 36 = 576; the Dense layers: 16);
 * the rounding errors have independent signs, so the error of the sum is about
 * 2u * sqrt(K) * rms(term), while the sum itself is sqrt(K) * rms(term) * rho, rho <= 1
 * measuring how much the terms cancel (rho ~ 1 for uncorrelated terms). The normwise
 * error of one TF32 stage is then about 2u / rho, and the backward pass chains L ~ 3
 * TF32 stages (forward activations, dx of the layer above, the weight-gradient GEMM),
 * over 4 training steps whose weight differences feed the next: 2u * L * 4 / rho
 * = 1.2e-2 / rho. The bound 0.25 admits rho down to 0.05 (gradients cancelling 20-fold
 * below the random-walk size, as the conv kernels behind BatchNormalization do: measured
 * on an H100 up to 0.11) and still fails a wrong layout or a missing term (errors near 1).
 * One tensor is outside the derivation: c1/bias, whose exact gradient is zero
 * (BatchNormalization removes any shift), so rho = 0 and both sides are rounding noise
 * that happens to stay correlated (measured 0.19); the bound is empirical for it alone.
 * The losses, checked at 2e-2, and the outputs, normwise at OUTPUT_NORMWISE (5% where a
 * wrong term errs near 1; element by element a near-tie in max pooling can flip one
 * output), are the tighter check. */
static double normwise_tol;
#define OUTPUT_NORMWISE 0.05 /* the outputs' bound where normwise_tol is set */

static int compare_normwise(const char *what, const float *got, const float *want, int64_t n,
                            double tol)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)got[i] - want[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    double e = sqrt(num) / (sqrt(den) + 1e-30);
    if (e <= tol) return 0; /* NaN fails too */
    printf("\n  %s: ||device - cpu|| / ||cpu|| = %.3g > %.3g", what, e, tol);
    return 1;
}

static int compare_params(tfc_model *ma, tfc_model *mb, int grads, double rtol, double atol)
{
    int bad = 0;
    for (int i = 0; i < tfc_model_nlayers(ma); i++) {
        tfc_layer *la = tfc_model_layer(ma, i), *lb = tfc_model_layer(mb, i);
        for (int p = 0; p < la->nparams; p++) {
            tfc_param *pa = &la->params[p], *pb = &lb->params[p];
            if (grads && !pa->trainable) continue;
            float *a = fetch(ref, grads ? pa->grad : pa->data, pa->numel);
            float *b = fetch(dev, grads ? pb->grad : pb->data, pb->numel);
            char what[96];
            snprintf(what, sizeof what, "%s/%s%s", la->name, pa->name, grads ? " grad" : "");
            bad += normwise_tol > 0 ? compare_normwise(what, b, a, pa->numel, normwise_tol)
                                    : compare_floats(what, b, a, pa->numel, rtol, atol);
            free(a), free(b);
        }
    }
    return bad;
}

/* Steps of forward, loss, backward and an update (SGD with momentum, or Adam) on both
 * backends from the same initial weights and data; losses, metrics, outputs, gradients and
 * weights must agree. Labels are class ids for the sparse loss, else rows of soft labels
 * summing to 1. */
static void train_steps(const char *yaml, int batch, int tokens, int adam, double rtol,
                        double atol)
{
    tfc_model *ma = load_bound(yaml, ref, batch), *mb = load_bound(yaml, dev, batch);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ma);
    CU_ASSERT_PTR_NOT_NULL_FATAL(mb);
    const int64_t per = tfc_shape_numel(tfc_model_input_shape(ma));
    const int64_t nlab = (int64_t)batch * tfc_model_label_rows(ma);
    const int classes = tfc_model_classes(ma);
    const int sparse = tfc_model_loss_kind(ma) == TFC_LOSS_SPARSE_CCE;
    TFC_ASSERT(per > 0 && per < (1 << 24) && nlab > 0 && nlab < (1 << 24) && classes > 0);
    void *x = malloc((size_t)batch * (size_t)per * 4);
    int32_t *labels = malloc((size_t)nlab * 4 * (sparse ? 1 : (size_t)classes));
    for (int64_t i = 0; i < batch * per; i++) {
        if (tokens) /* ids with zeros (masked steps) sprinkled in */
            ((int32_t *)x)[i] = urand() < 0.2 ? 0 : 1 + irand(19);
        else
            ((float *)x)[i] = (float)urand();
    }
    for (int64_t i = 0; i < nlab; i++) {
        if (sparse) {
            labels[i] = irand(classes);
            continue;
        }
        float *row = (float *)labels + i * classes, sum = 0;
        for (int c = 0; c < classes; c++) sum += row[c] = (float)urand() + 0.1f;
        for (int c = 0; c < classes; c++) row[c] /= sum;
    }
    const int64_t nt = tfc_model_trainable_count(ma), nout = batch * tfc_shape_numel(tfc_model_output_shape(ma));
    float *slots[2][2];
    tfc_backend *bes[2] = {ref, dev};
    for (int b = 0; b < 2; b++)
        for (int s = 0; s < 2; s++) {
            slots[b][s] = bes[b]->ops->alloc(bes[b], (size_t)nt * 4);
            bes[b]->ops->zero(bes[b], slots[b][s], (size_t)nt * 4);
        }
    tfc_error err;
    tfc_error_clear(&err);
    for (int step = 0; step < 4; step++) {
        tfc_batch_result ra = {0}, rb = {0}; /* a model without metrics leaves them */
        CU_ASSERT_EQUAL(tfc_model_forward(ma, x, batch, 1, 5, (uint64_t)step, &err), TFC_OK);
        CU_ASSERT_EQUAL(tfc_model_forward(mb, x, batch, 1, 5, (uint64_t)step, &err), TFC_OK);
        CU_ASSERT_EQUAL(tfc_model_loss(ma, labels, 1, &ra, &err), TFC_OK);
        CU_ASSERT_EQUAL(tfc_model_loss(mb, labels, 1, &rb, &err), TFC_OK);
        if (fabs(ra.loss - rb.loss) > rtol * fabs(ra.loss) + atol)
            printf("\n  step %d: loss device %.9g, cpu %.9g", step, rb.loss, ra.loss);
        CU_ASSERT(fabs(ra.loss - rb.loss) <= rtol * fabs(ra.loss) + atol);
        CU_ASSERT_EQUAL(ra.count, rb.count);
        /* accuracy may differ only where two scores are within rounding of each other */
        if (fabs(ra.metric[0] - rb.metric[0]) > 2.0 / (double)ra.count + 1e-12)
            printf("\n  step %d: accuracy device %.9g, cpu %.9g of %lld", step, rb.metric[0],
                   ra.metric[0], (long long)ra.count);
        CU_ASSERT(fabs(ra.metric[0] - rb.metric[0]) <= 2.0 / (double)ra.count + 1e-12);
        float *oa = malloc((size_t)nout * 4), *ob = malloc((size_t)nout * 4);
        tfc_model_get_output(ma, oa);
        tfc_model_get_output(mb, ob);
        char what[64];
        snprintf(what, sizeof what, "step %d output", step);
        /* in TF32 normwise: a near-tie in max pooling may flip one element (on the H200, 1
         * of 160 outputs 4% off after 3 steps once other tests changed the data) */
        CU_ASSERT_EQUAL(normwise_tol > 0 ? compare_normwise(what, ob, oa, nout, OUTPUT_NORMWISE)
                                         : compare_floats(what, ob, oa, nout, rtol, atol), 0);
        if (bind_precision) { /* the device's outputs are 16-bit values too */
            int64_t wide = 0;
            for (int64_t i = 0; i < nout; i++) {
                float r = bind_precision == TFC_PRECISION_BF16 ? tfc_bf16_round(ob[i])
                                                               : tfc_f16_round(ob[i]);
                wide += memcmp(&r, &ob[i], 4) != 0;
            }
            if (wide) printf("\n  %s: %lld of %lld not %s values", what, (long long)wide,
                             (long long)nout, tfc_precision_names[bind_precision]);
            CU_ASSERT_EQUAL(wide, 0);
        }
        free(oa), free(ob);
        tfc_model_zero_grad(ma);
        tfc_model_zero_grad(mb);
        tfc_model_backward(ma);
        tfc_model_backward(mb);
        CU_ASSERT_EQUAL(compare_params(ma, mb, 1, rtol * 10, atol * 10), 0);
        /* SGD with momentum: a weight moves by lr times its gradient, so rounding-level
         * gradient differences stay rounding-level. Adam's g / sqrt(v) would turn the sign
         * of a gradient that is zero up to rounding into a full step of lr; its epsilon 1e-3
         * (instead of Keras's 1e-7) keeps such a step below lr * |g| / 1e-3, rounding-level
         * again, while gradients of ordinary size (>> 1e-3) take Adam's normalised step. */
        tfc_optim_desc d = {.type = TFC_OPTIMIZER_SGD, .lr = 0.05f, .grad_scale = 1.0f,
                            .momentum = 0.9f};
        if (adam) {
            double t = step + 1;
            d = (tfc_optim_desc){.type = TFC_OPTIMIZER_ADAM, .lr = 0.01f, .grad_scale = 1.0f,
                                 .beta_1 = 0.9f, .beta_2 = 0.999f, .epsilon = 1e-3f,
                                 .alpha = (float)(0.01 * sqrt(1 - pow(0.999, t)) /
                                                  (1 - pow(0.9, t)))};
        }
        ref->ops->optimizer_update(ref, &d, nt, tfc_model_params(ma), tfc_model_grads(ma),
                                   slots[0][0], adam ? slots[0][1] : NULL, NULL);
        dev->ops->optimizer_update(dev, &d, nt, tfc_model_params(mb), tfc_model_grads(mb),
                                   slots[1][0], adam ? slots[1][1] : NULL, NULL);
        /* weights (and batch-norm moving statistics) after the update */
        CU_ASSERT_EQUAL(compare_params(ma, mb, 0, rtol * 10, atol * 10), 0);
    }
    /* inference mode too (moving statistics, no dropout) */
    tfc_batch_result ra, rb;
    tfc_model_forward(ma, x, batch, 0, 5, 99, &err);
    tfc_model_forward(mb, x, batch, 0, 5, 99, &err);
    tfc_model_loss(ma, labels, 0, &ra, &err);
    tfc_model_loss(mb, labels, 0, &rb, &err);
    CU_ASSERT(fabs(ra.loss - rb.loss) <= rtol * 10 * fabs(ra.loss) + atol);
    CU_ASSERT_EQUAL(tfc_model_first_nonfinite(mb), -1);
    for (int b = 0; b < 2; b++)
        for (int s = 0; s < 2; s++) bes[b]->ops->free(bes[b], slots[b][s]);
    free(x), free(labels);
    tfc_model_free(ma);
    tfc_model_free(mb);
    check_status();
}

/* Parameters after `steps` SGD steps of a freshly initialised model on dev (malloc'd);
 * `tokens`: its input is ids below 20. */
static float *train_on_dev(const char *yaml, int batch, int steps, int tokens, int64_t *n)
{
    tfc_model *m = load_bound(yaml, dev, batch);
    TFC_ASSERT(m != NULL);
    const int64_t per = tfc_shape_numel(tfc_model_input_shape(m));
    const int64_t nlab = (int64_t)batch * tfc_model_label_rows(m);
    TFC_ASSERT(per > 0 && per < (1 << 24) && nlab > 0 && nlab < (1 << 24));
    float *x = malloc((size_t)batch * (size_t)per * 4);
    int32_t *labels = malloc((size_t)nlab * 4);
    uint64_t save = rng_state;
    rng_state = 99;
    for (int64_t i = 0; i < batch * per; i++) {
        if (tokens)
            ((int32_t *)x)[i] = irand(20);
        else
            x[i] = (float)urand();
    }
    for (int64_t i = 0; i < nlab; i++) labels[i] = irand(tfc_model_classes(m));
    rng_state = save;
    const int64_t nt = tfc_model_trainable_count(m);
    float *mom = dev->ops->alloc(dev, (size_t)nt * 4);
    dev->ops->zero(dev, mom, (size_t)nt * 4);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_optim_desc d = {.type = TFC_OPTIMIZER_SGD, .lr = 0.05f, .grad_scale = 1.0f, .momentum = 0.9f};
    for (int step = 0; step < steps; step++) {
        tfc_batch_result r;
        tfc_model_forward(m, x, batch, 1, 5, (uint64_t)step, &err);
        tfc_model_loss(m, labels, 1, &r, &err);
        tfc_model_zero_grad(m);
        tfc_model_backward(m);
        dev->ops->optimizer_update(dev, &d, nt, tfc_model_params(m), tfc_model_grads(m), mom,
                                   NULL, NULL);
    }
    *n = tfc_model_param_count(m);
    float *params = fetch(dev, tfc_model_params(m), *n);
    dev->ops->free(dev, mom);
    free(x), free(labels);
    tfc_model_free(m);
    return params;
}

/* Deterministic mode: two runs of three training steps end in identical weights. */
static void test_deterministic_training(void)
{
    set_deterministic(1);
    int64_t n1, n2;
    float *a = train_on_dev(cnn_yaml, 32, 3, 0, &n1), *b = train_on_dev(cnn_yaml, 32, 3, 0, &n2);
    CU_ASSERT_EQUAL_FATAL(n1, n2);
    CU_ASSERT_EQUAL(compare_floats("deterministic weights", b, a, n1, EXACT), 0);
    free(a), free(b);
    set_deterministic(0);
    check_status();
}

static void test_train_cnn(void)
{
    train_steps(cnn_yaml, 16, 0, 0, 5e-4, 1e-5);
}

static void test_train_mixed_adam(void)
{
    train_steps(mixed_yaml, 12, 0, 1, 5e-4, 1e-5);
}

static void test_train_lstm(void)
{
    train_steps(lstm_yaml, 6, 1, 0, 5e-4, 1e-5);
}

/* `trainable: false`: frozen layers at the front (their backward passes skipped), in the
 * middle (run, their weights' gradients unread) and a frozen BatchNormalization in inference
 * mode before a ReLU (not folded into it) and after a trainable convolution; SGD and Adam. */
static void test_train_frozen(void)
{
    static const char yaml[] =
        "input: {shape: [8, 8, 3]}\n"
        "layers:\n"
        "  - Conv2D: {filters: 4, kernel_size: 3, trainable: false}\n"
        "  - BatchNormalization: {trainable: false}\n"
        "  - Activation: {activation: relu}\n"
        "  - Conv2D: {filters: 6, kernel_size: 3, padding: same}\n"
        "  - BatchNormalization: {trainable: false}\n"
        "  - Activation: {activation: relu}\n"
        "  - Flatten\n"
        "  - Dense: {units: 12, activation: tanh, trainable: false}\n"
        "  - Dense: {units: 5, activation: softmax}\n"
        "loss: sparse_categorical_crossentropy\n";
    train_steps(yaml, 8, 0, 0, 5e-4, 1e-5);
    train_steps(yaml, 8, 0, 1, 5e-4, 1e-5);
}

static void test_train_cnn_tf32(void)
{
    set_tf32(1);
    normwise_tol = 0.25;
    train_steps(cnn_yaml, 16, 0, 0, 2e-2, 2e-3);
    normwise_tol = 0;
    set_tf32(0);
}

/* precision: bf16 and float16 (docs/solver.md, "Precision") against the CPU's reference:
 * the rounding ops bit for bit over random floats, ties, NaNs, infinities and overflow;
 * then training steps of the CNN and the LSTM in bf16, and of the CNN in float16, on both
 * backends, TF32 on the device as the trainer sets it for both (exact products of 16-bit
 * operands), compared as TF32's case is: normwise, the outputs at OUTPUT_NORMWISE; a device
 * output that is not a value of the format fails. The two sides differ in float32
 * summation order, which now and then rounds a value to the other 16-bit neighbour. */
static void test_bf16(void)
{
    enable_bf16(1);
    enum { N = 1 << 18 };
    float *x = malloc(N * 4), *a = malloc(N * 4), *b = malloc(N * 4);
    uint64_t s = 0x243f6a8885a308d3ull;
    for (int i = 0; i < N; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint32_t u = (uint32_t)(s >> 16);
        if (i % 4 == 1) u = (u & 0xffff0000u) | 0x8000u; /* exact ties */
        if (i % 97 == 3) u = 0x7f800000u | (u & 0x8000ffffu); /* NaNs and infinities */
        if (i % 89 == 5) u = 0x7f7f8000u | (u & 0x80007fffu); /* past the largest bfloat16 */
        memcpy(&x[i], &u, 4);
    }
    float *dx = dev->ops->alloc(dev, N * 4);
    dev->ops->upload(dev, dx, x, N * 4);
    dev->ops->round_bf16(dev, N, dx, dx);
    dev->ops->download(dev, b, dx, N * 4);
    ref->ops->round_bf16(ref, N, x, a);
    CU_ASSERT_EQUAL(memcmp(a, b, N * 4), 0);
    /* float16's too, on exponents around its range (subnormals, normals, overflow) */
    for (int i = 0; i < N; i += 2) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        u = (u & 0x807fffffu) | (uint32_t)(97 + (u >> 9) % 51) << 23;
        memcpy(&x[i], &u, 4);
    }
    dev->ops->upload(dev, dx, x, N * 4);
    dev->ops->round_f16(dev, N, dx, dx);
    dev->ops->download(dev, b, dx, N * 4);
    ref->ops->round_f16(ref, N, x, a);
    CU_ASSERT_EQUAL(memcmp(a, b, N * 4), 0);
    dev->ops->free(dev, dx);
    free(x), free(a), free(b);
    bind_precision = TFC_PRECISION_BF16;
    set_tf32(1);
    normwise_tol = 0.25;
    train_steps(cnn_yaml, 16, 0, 0, 2e-2, 2e-3);
    train_steps(lstm_yaml, 6, 1, 0, 2e-2, 2e-3);
    bind_precision = TFC_PRECISION_FLOAT16; /* its gradients unscaled: small ones vanish alike */
    train_steps(cnn_yaml, 16, 0, 0, 2e-2, 2e-3);
    normwise_tol = 0;
    set_tf32(0);
    bind_precision = TFC_PRECISION_FLOAT32;
    enable_bf16(0);
    check_status();
}

#ifdef TFC_HAVE_CUDA
/* Two runs of BatchNormalization's training forward (with ReLU) and backward on the same
 * tensors: the same bits (the fast path's column sums are deterministic too). */
static int fast_norm_twice(int64_t rows, int cols)
{
    pair x = pair_rand(rows * cols, -2, 3), gamma = pair_rand(cols, 0.5, 1.5);
    pair beta = pair_rand(cols, -0.5, 0.5), dy = pair_rand(rows * cols, -1, 1);
    float *got[2][4];
    for (int k = 0; k < 2; k++) {
        pair mm = pair_new(cols), mv = pair_new(cols), y = pair_new(rows * cols);
        pair sm = pair_new(cols), si = pair_new(cols), dx = pair_new(rows * cols);
        pair dg = pair_new(cols), db = pair_new(cols);
        dev->ops->bn_forward_train(dev, rows, cols, x.d, gamma.d, beta.d, 1e-3f, 0.99f, mm.d,
                                   mv.d, y.d, sm.d, si.d, TFC_ACT_RELU);
        dev->ops->bn_backward(dev, rows, cols, x.d, dy.d, gamma.d, sm.d, si.d, dx.d, dg.d, db.d,
                              1);
        got[k][0] = fetch(dev, y.d, rows * cols), got[k][1] = fetch(dev, dx.d, rows * cols);
        got[k][2] = fetch(dev, dg.d, cols), got[k][3] = fetch(dev, mv.d, cols);
        pair *all[] = {&mm, &mv, &y, &sm, &si, &dx, &dg, &db};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) pair_free(all[i]);
    }
    int bad = compare_floats("fast_norm y, twice", got[1][0], got[0][0], rows * cols, 0, 0) +
              compare_floats("fast_norm dx, twice", got[1][1], got[0][1], rows * cols, 0, 0) +
              compare_floats("fast_norm dgamma, twice", got[1][2], got[0][2], cols, 0, 0) +
              compare_floats("fast_norm moving_var, twice", got[1][3], got[0][3], cols, 0, 0);
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 4; j++) free(got[k][j]);
    pair_free(&x), pair_free(&gamma), pair_free(&beta), pair_free(&dy);
    return bad;
}
#endif

/* tfc_gpu_set_fast_norm (issue 41): BatchNormalization through the wider column sums, its
 * ReLU in the affine pass and 32-bit indices, against the CPU at batch_norm's tolerances:
 * channel counts that take blocks 8, 16 and 32 wide, with the channel by mask and by
 * modulo (3, 8, 16, 24, 64, 300), one slice of rows up to the cap of 256 (resnet20's first
 * stage, 131072 rows of 16 channels); the bias gradient likewise; two runs the same bits;
 * a CNN with BatchNormalization and biases trained against the CPU. */
static void test_fast_norm(void)
{
#ifdef TFC_HAVE_CUDA
    if (twin) return;
    tfc_gpu_set_fast_norm(dev, 1);
    CU_ASSERT_EQUAL(bn_case(50, 3), 0);
    CU_ASSERT_EQUAL(bn_case(4096, 8), 0);
    CU_ASSERT_EQUAL(bn_case(128 * 32 * 32, 16), 0);
    CU_ASSERT_EQUAL(bn_case(777, 24), 0);
    CU_ASSERT_EQUAL(bn_case(128 * 8 * 8, 64), 0);
    CU_ASSERT_EQUAL(bn_case(37, 300), 0);
    const int64_t rows[] = {100000, 33};
    const int cols[] = {19, 40};
    for (int k = 0; k < 2; k++) {
        pair dy = pair_rand(rows[k] * cols[k], -1, 1), db = pair_rand(cols[k], -1, 1);
        ref->ops->bias_grad(ref, rows[k], cols[k], dy.h, db.h);
        dev->ops->bias_grad(dev, rows[k], cols[k], dy.d, db.d);
        CU_ASSERT_EQUAL(pair_check("fast_norm bias_grad", &db, 1e-6, 1e-5), 0);
        pair_free(&dy), pair_free(&db);
    }
    CU_ASSERT_EQUAL(fast_norm_twice(128 * 32 * 32, 16), 0);
    CU_ASSERT_EQUAL(fast_norm_twice(999, 24), 0);
    train_steps(cnn_yaml, 16, 0, 0, 5e-4, 1e-5);
    tfc_gpu_set_fast_norm(dev, 0);
#endif
    check_status();
}

/* ---- the trainer's step ops (TFC_BACKEND_STEP_OPS) ------------------------------------------ */

/* dev's step state, read back. */
static tfc_step_state step_fetch(const tfc_step_state *st)
{
    tfc_step_state h;
    dev->ops->download(dev, &h, st, sizeof h);
    return h;
}

/* grad_sumsq stores the very double sumsq returns (the same bits on the same backend; the
 * CPU's within the rounding of a sum in another order), for tails and no input too, and a
 * NaN or an infinity in the gradient makes it NaN or infinite. */
static void test_grad_sumsq(void)
{
    CU_ASSERT_FATAL(tfc_backend_has(dev->ops, "grad_sumsq"));
    tfc_step_state *st = dev->ops->alloc(dev, sizeof *st);
    static const int64_t sizes[] = {0, 1, 31, 257, 54321, 1000001};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        const int64_t n = sizes[k];
        pair x = pair_rand(n ? n : 1, -3, 3);
        dev->ops->grad_sumsq(dev, n, x.d, st);
        double want = dev->ops->sumsq(dev, n, x.d), cpu = ref->ops->sumsq(ref, n, x.h);
        tfc_step_state h = step_fetch(st);
        int same = memcmp(&h.sumsq, &want, sizeof want) == 0;
        if (!same) printf("\n  n %lld: grad_sumsq %.17g, sumsq %.17g", (long long)n, h.sumsq, want);
        CU_ASSERT(same);
        CU_ASSERT(fabs(h.sumsq - cpu) <= 1e-12 * cpu);
        pair_free(&x);
    }
    pair x = pair_rand(1000, -1, 1);
    x.h[999] = -INFINITY;
    pair_push(&x);
    dev->ops->grad_sumsq(dev, x.n, x.d, st);
    CU_ASSERT(isinf(step_fetch(st).sumsq));
    x.h[3] = NAN;
    pair_push(&x);
    dev->ops->grad_sumsq(dev, x.n, x.d, st);
    CU_ASSERT(isnan(step_fetch(st).sumsq));
    pair_free(&x);
    dev->ops->free(dev, st);
    check_status();
}

/* step_scale: skip exactly when the loss or the sum of squares is not finite; grad_scale the
 * bits of the host's tfc_step_grad_scale (clipping off, biting, not biting, scales of
 * iter_size 1, 2 and 3, divided by float16's loss scale of 1 or 2^20 in the state), as the
 * CPU's step_scale gives them; sumsq left as it was. */
static void test_step_scale(void)
{
    static const float losses[] = {1.25f, NAN, INFINITY, -INFINITY};
    static const double sums[] = {333.3, 0.0, 1e-30, 1e300, NAN, INFINITY};
    static const double clips[] = {0.0, 0.5, 1e9};
    static const double scales[] = {1.0, 0.5, 1.0 / 3.0};
    tfc_step_state *st = dev->ops->alloc(dev, sizeof *st);
    pair loss = pair_new(1);
    int bad = 0, clipped = 0;
    for (int l = 0; l < 4; l++)
        for (int k = 0; k < 6; k++)
            for (int c = 0; c < 3; c++)
                for (int a = 0; a < 6; a++) {
                    const float S = a < 3 ? 1.0f : 1048576.0f;
                    const tfc_step_state in = {.sumsq = sums[k], .grad_scale = -7.0f, .skip = 7,
                                               .loss_scale = S};
                    dev->ops->upload(dev, st, &in, sizeof in);
                    loss.h[0] = losses[l];
                    pair_push(&loss);
                    dev->ops->step_scale(dev, loss.d, scales[a % 3], clips[c], st);
                    tfc_step_state got = step_fetch(st), cpu = in;
                    ref->ops->step_scale(ref, loss.h, scales[a % 3], clips[c], &cpu);
                    const float want =
                        tfc_step_grad_scale(sums[k], scales[a % 3] / (double)S, clips[c]);
                    const int skip = !isfinite(losses[l]) || !isfinite(sums[k]);
                    int ok = got.skip == skip && cpu.skip == skip &&
                             !memcmp(&got.grad_scale, &want, 4) &&
                             !memcmp(&cpu.grad_scale, &want, 4) &&
                             !memcmp(&got.sumsq, &in.sumsq, sizeof in.sumsq);
                    clipped += want < 0.1f * (float)scales[a % 3] / S;
                    if (!ok && bad++ < 4)
                        printf("\n  loss %g sumsq %g clip %g scale %g S %g: device %.9g skip "
                               "%d, cpu %.9g skip %d, want %.9g skip %d",
                               losses[l], sums[k], clips[c], scales[a % 3], S, got.grad_scale,
                               got.skip, cpu.grad_scale, cpu.skip, want, skip);
                }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(clipped > 0); /* the clipping bites in some cases */
    pair_free(&loss);
    dev->ops->free(dev, st);
    check_status();
}

/* optimizer_update_at for one kind: with skip set no operand changes a bit; without, three
 * steps equal the CPU's optimizer_update with the state's grad_scale (d's own, far off, is
 * not read), and the state is left as it was. */
static int optim_at_case(const char *name, tfc_optim_desc d)
{
    const int64_t n = 54321;
    pair w = pair_rand(n, -1, 1), g = pair_rand(n, -1, 1);
    pair s0 = pair_rand(n, optim_slot0_low(&d), 0.1), s1 = pair_rand(n, 0, 0.1),
         s2 = pair_rand(n, 0, 0.1);
    const double rtol = optim_rtol(&d), atol = rtol * 1e-2;
    tfc_step_state *st = dev->ops->alloc(dev, sizeof *st);
    tfc_step_state h = {.sumsq = NAN, .grad_scale = 0.37f, .skip = 1};
    dev->ops->upload(dev, st, &h, sizeof h);
    tfc_optim_desc want = d;
    want.grad_scale = h.grad_scale;
    d.grad_scale = 1e6f;
    int bad = 0;
    char what[96];
    dev->ops->optimizer_update_at(dev, &d, st, n, w.d, g.d, s0.d, s1.d, s2.d);
    pair *ops[] = {&w, &g, &s0, &s1, &s2};
    static const char *const opn[] = {"params", "grads", "slot0", "slot1", "slot2"};
    for (int k = 0; k < 5; k++) {
        snprintf(what, sizeof what, "%s skipped %s", name, opn[k]);
        bad += pair_check(what, ops[k], EXACT);
    }
    h.skip = 0, h.sumsq = 2.0;
    dev->ops->upload(dev, st, &h, sizeof h);
    for (int step = 0; step < 3; step++) {
        ref->ops->optimizer_update(ref, &want, n, w.h, g.h, s0.h, s1.h, s2.h);
        dev->ops->optimizer_update_at(dev, &d, st, n, w.d, g.d, s0.d, s1.d, s2.d);
    }
    /* and with the rates in the state (a replayed graph's update): d's, far off, unread */
    h.lr = want.lr, h.alpha = want.alpha, h.decay = want.decay;
    memcpy(h.coef, want.coef, sizeof h.coef);
    dev->ops->upload(dev, st, &h, sizeof h);
    tfc_optim_desc off = d;
    off.rates_at_state = 1, off.lr = 7, off.alpha = 7, off.decay = 0.5f;
    for (int k = 0; k < TFC_OPTIM_COEFS; k++) off.coef[k] = 3.0f + (float)k;
    for (int step = 0; step < 2; step++) {
        ref->ops->optimizer_update(ref, &want, n, w.h, g.h, s0.h, s1.h, s2.h);
        dev->ops->optimizer_update_at(dev, &off, st, n, w.d, g.d, s0.d, s1.d, s2.d);
    }
    for (int k = 0; k < 5; k++) {
        snprintf(what, sizeof what, "%s %s", name, opn[k]);
        bad += pair_check(what, ops[k], rtol, atol);
    }
    tfc_step_state after = step_fetch(st);
    bad += memcmp(&after, &h, sizeof h) != 0;
    dev->ops->free(dev, st);
    pair_free(&w), pair_free(&g), pair_free(&s0), pair_free(&s1), pair_free(&s2);
    return bad;
}

static void test_optimizer_update_at(void)
{
    tfc_optim_desc d[OPTIM_KINDS];
    const char *name[OPTIM_KINDS];
    optim_kinds(d, name);
    for (int k = 0; k < OPTIM_KINDS; k++) CU_ASSERT_EQUAL(optim_at_case(name[k], d[k]), 0);
    check_status();
}

/* Whole runs of the trainer (solver/train.c) on dev, through its device path (the step ops
 * above, one read of the step's state at its end) and its host path (host_step: the loss
 * and the gradient norm read back before the update), as tests/test_train.c's device_step
 * does on the CPU. */
static const char *step_solver =
    "model:\n"
    "  name: tiny\n"
    "  input: {shape: [16]}\n"
    "  layers:\n"
    "    - Dense: {name: hidden, units: 32, activation: relu}\n"
    "    - Dropout: {rate: 0.2}\n"
    "    - Dense: {name: out, units: 4}\n"
    "  metrics: [accuracy]\n"
    "data:\n"
    "  train:\n"
    "    source: {type: npy, features: step_x.npy, labels: step_y.npy}\n"
    "    pipeline:\n"
    "      - shuffle: {buffer_size: 100}\n"
    "      - repeat: {}\n"
    "      - batch: {batch_size: 16}\n"
    "  test:\n"
    "    source: {type: npy, features: step_tx.npy, labels: step_ty.npy}\n"
    "    pipeline:\n"
    "      - batch: {batch_size: 50}\n"
    "max_iter: 30\n"
    "test_interval: 0\n"
    "display: 10\n"
    "snapshot: {interval: 10, keep: 0}\n"
    "clip_gradients: 0.5\n"
    "deterministic: true\n"
    "seed: 7\n";

/* step_solver and its data, written once to the scratch directory. */
static const char *step_solver_path(void)
{
    static char path[1024];
    if (!path[0]) {
        tfc_test_write_split("step_x.npy", "step_y.npy", 512, 11);
        tfc_test_write_split("step_tx.npy", "step_ty.npy", 200, 12);
        snprintf(path, sizeof path, "%s", tfc_test_write("step.yaml", step_solver, -1));
    }
    return path;
}

static int step_graphs;      /* tfc_solver_options.cuda_graphs of the next step_train */
static FILE *step_console;   /* and its console (NULL: silent) */
static const char *step_resume; /* and its --resume state (NULL: none) */

/* Trains step_solver with `sets` on dev into tmp/<out>_h (host path) or tmp/<out>_d. */
static tfc_status step_train(const char *out, int host, const char *const *sets, int nsets,
                             tfc_train_result *res, tfc_error *err)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s_%c", out, host ? 'h' : 'd');
    tfc_solver_options o = {0};
    o.device = twin ? "cpu" : "gpu";
    o.threads = 1;
    o.host_step = host;
    o.cuda_graphs = step_graphs;
    o.console = step_console;
    o.resume = step_resume;
    o.sets = sets;
    o.nsets = nsets;
    o.out_dir = tfc_test_path(dir);
    tfc_error_clear(err);
    tfc_solver *sv = tfc_solver_load(step_solver_path(), &o, err);
    if (!sv) {
        printf("\n  %s", err->text);
        return err->code;
    }
    tfc_status st = tfc_solver_train(sv, res, err);
    tfc_solver_free(sv);
    return st;
}

static void step_train_both(const char *out, const char *const *sets, int nsets,
                            tfc_status st[2], tfc_train_result res[2], tfc_error err[2])
{
    for (int d = 0; d < 2; d++) st[d] = step_train(out, !d, sets, nsets, &res[d], &err[d]);
}

static const char *run_file(const char *out, int host, const char *name)
{
    static char bufs[4][2048];
    static int k;
    char dir[256], *b = bufs[k++ & 3];
    snprintf(dir, sizeof dir, "%s_%c", out, host ? 'h' : 'd');
    snprintf(b, sizeof bufs[0], "%s/%s", tfc_test_path(dir), name);
    return b;
}

static int files_equal(const char *a, const char *b)
{
    size_t la, lb;
    char *x = tfc_test_read(a, &la), *y = tfc_test_read(b, &lb);
    int eq = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return eq;
}

/* Two safetensors files with the same tensors, byte for byte, but for the elapsed time. */
static int st_files_equal(const char *a, const char *b)
{
    tfc_error err;
    tfc_st_file *fa = tfc_st_open(a, &err), *fb = tfc_st_open(b, &err);
    int same = fa && fb && tfc_st_count(fa) == tfc_st_count(fb);
    for (int i = 0; same && i < tfc_st_count(fa); i++) {
        const tfc_st_tensor *ta = tfc_st_tensor_at(fa, i), *tb = tfc_st_find(fb, ta->name);
        if (!strcmp(ta->name, "solver/elapsed_seconds")) continue;
        same = tb && tb->nbytes == ta->nbytes && !memcmp(ta->data, tb->data, ta->nbytes);
        if (!same) printf("\n  %s: %s differs", b, ta->name);
    }
    tfc_st_close(fa);
    tfc_st_close(fb);
    return same;
}

/* Whether two runs of step_solver (tmp/<a>_h or _d by host_a, and b's) ended alike: the
 * same final weights, snapshots at 10, 20 and 30 (weights and state, slots included) and
 * displayed results. */
static int same_runs(const char *a, int host_a, const char *b, int host_b,
                     const tfc_train_result res[2])
{
    int same = files_equal(run_file(a, host_a, "final.safetensors"),
                           run_file(b, host_b, "final.safetensors"));
    for (int it = 10; it <= 30; it += 10) {
        char name[2][96];
        snprintf(name[0], sizeof name[0], "snapshots/tiny_iter_%d.state", it);
        snprintf(name[1], sizeof name[1], "snapshots/tiny_iter_%d.safetensors", it);
        for (int f = 0; f < 2; f++)
            same &= st_files_equal(run_file(a, host_a, name[f]), run_file(b, host_b, name[f]));
    }
    return same && !memcmp(&res[0].train, &res[1].train, sizeof res[0].train);
}

/* The device path gives the host path's bits on dev: every optimizer kind with clipping
 * that bites, iter_size 2, weight decay, BatchNormalization, warm-up and cosine schedules:
 * the same final weights, snapshots (weights and state, slots included) and displayed
 * loss and metrics. */
static void test_train_device_step(void)
{
    CU_ASSERT_FATAL(tfc_backend_has(dev->ops, "grad_sumsq") &&
                    tfc_backend_has(dev->ops, "step_scale") &&
                    tfc_backend_has(dev->ops, "optimizer_update_at"));
    static const char *const opt[][3] = {
        {"optimizer={type: adam, learning_rate: 0.01, amsgrad: true}", "iter_size=2",
         "lr_policy={type: cosine, alpha: 0.1}"},
        {"optimizer={type: sgd, learning_rate: 0.05, momentum: 0.9, nesterov: true}",
         "model.layers.1={BatchNormalization: {}}",
         "lr_policy={type: step, step_size: 10, gamma: 0.5, warmup_iters: 5}"},
        {"optimizer={type: adamw, learning_rate: 0.01, weight_decay: 0.1}", "weight_decay=0.001",
         "lr_policy={type: poly, power: 2}"},
        {"optimizer={type: rmsprop, learning_rate: 0.01, centered: true, momentum: 0.5}",
         "iter_size=2", "model.layers.1={BatchNormalization: {}}"},
        {"optimizer={type: adagrad, learning_rate: 0.05}", "weight_decay=0.001",
         "lr_policy={type: cosine, alpha: 0.1}"},
        {"optimizer={type: sgd, learning_rate: 0.05}", "iter_size=3",
         "lr_policy={type: fixed, warmup_iters: 8}"},
    };
    tfc_train_result *res = calloc(3, sizeof *res);
    tfc_error err[3];
    tfc_status st[3];
    for (size_t o = 0; o < sizeof opt / sizeof *opt; o++) {
        char out[32];
        snprintf(out, sizeof out, "dstep%zu", o);
        step_train_both(out, opt[o], 3, st, res, err);
        CU_ASSERT_FATAL(st[0] == TFC_OK && st[1] == TFC_OK);
        int same = same_runs(out, 1, out, 0, res);
        if (!same) printf("\n  the paths differ: %s, %s, %s", opt[o][0], opt[o][1], opt[o][2]);
        CU_ASSERT(same);
    }
    /* the clipping bites: without it the weights differ */
    const char *const unclipped[] = {opt[0][0], opt[0][1], opt[0][2], "clip_gradients=0"};
    st[2] = step_train("dstep_noclip", 0, unclipped, 4, &res[2], &err[2]);
    CU_ASSERT_EQUAL_FATAL(st[2], TFC_OK);
    CU_ASSERT(!files_equal(run_file("dstep_noclip", 0, "final.safetensors"),
                            run_file("dstep0", 0, "final.safetensors")));
    free(res);
    check_status();
}

/* The trainer's step replayed from a CUDA graph (tfc_solver_options.cuda_graphs) gives the
 * launched device path's bits: every optimizer kind, clipping, weight decay,
 * BatchNormalization, dropout, warm-up and decaying schedules (rates read from the step
 * state), test passes between steps; the same final weights, snapshots and displayed
 * results; the console says the step was captured; and a snapshot of either resumes in the
 * other to the uninterrupted run's weights. tfc-train's default (TFC_CUDA_GRAPHS_AUTO)
 * says nothing and gives those bits too, also where every capture fails (then it says so
 * and launches). */
static void test_train_graphs(void)
{
    static const char *const opt[][3] = {
        {"optimizer={type: sgd, learning_rate: 0.05, momentum: 0.9, nesterov: true}",
         "model.layers.1={BatchNormalization: {}}",
         "lr_policy={type: step, step_size: 10, gamma: 0.5, warmup_iters: 5}"},
        {"optimizer={type: adamw, learning_rate: 0.01, weight_decay: 0.1}", "weight_decay=0.001",
         "lr_policy={type: poly, power: 2}"},
        {"optimizer={type: adam, learning_rate: 0.01, amsgrad: true}", "test_interval=10",
         "lr_policy={type: cosine, alpha: 0.1}"},
        {"optimizer={type: rmsprop, learning_rate: 0.01, centered: true, momentum: 0.5}",
         "weight_decay=0.001", "lr_policy={type: cosine, alpha: 0.1}"},
        {"optimizer={type: adagrad, learning_rate: 0.05}", "weight_decay=0.001",
         "lr_policy={type: fixed, warmup_iters: 8}"},
    };
    tfc_train_result *res = calloc(2, sizeof *res);
    tfc_error err[2];
    tfc_status st[2];
    for (size_t o = 0; o < sizeof opt / sizeof *opt; o++) {
        char out[2][32];
        char *text = NULL;
        size_t len = 0;
        for (int g = 0; g < 2; g++) {
            snprintf(out[g], sizeof out[g], "graphs%zu%s", o, g ? "g" : "");
            step_graphs = g;
            step_console = g ? open_memstream(&text, &len) : NULL;
            st[g] = step_train(out[g], 0, opt[o], 3, &res[g], &err[g]);
            if (step_console) fclose(step_console);
            step_console = NULL;
            step_graphs = 0;
        }
        CU_ASSERT_FATAL(st[0] == TFC_OK && st[1] == TFC_OK);
        int same = same_runs(out[0], 0, out[1], 0, res) &&
                   !memcmp(&res[0].test, &res[1].test, sizeof res[0].test);
        if (!same) printf("\n  replayed and launched differ: %s, %s, %s", opt[o][0], opt[o][1],
                          opt[o][2]);
        CU_ASSERT(same);
        int said = text && (twin ? strstr(text, "cpu has no CUDA graphs") != NULL
                                 : strstr(text, "note: cuda_graphs: the step was captured at "
                                                "iteration 1;") != NULL);
        if (!said) printf("\n  console: %s", text ? text : "(none)");
        CU_ASSERT(said);
        free(text);
    }
    /* a replayed run's snapshot resumed launched, and a launched one's resumed replayed,
     * end with the uninterrupted runs' weights */
    for (int g = 0; g < 2; g++) {
        char state[2048], out[32];
        snprintf(state, sizeof state, "%s",
                 run_file(g ? "graphs0g" : "graphs0", 0, "snapshots/tiny_iter_10.state"));
        snprintf(out, sizeof out, "graphs_resumed%d", g);
        step_graphs = !g;
        step_resume = state;
        st[0] = step_train(out, 0, opt[0], 3, &res[0], &err[0]);
        step_resume = NULL;
        step_graphs = 0;
        if (st[0]) printf("\n  %s", err[0].text);
        CU_ASSERT_EQUAL_FATAL(st[0], TFC_OK);
        CU_ASSERT(files_equal(run_file(g ? "graphs0g" : "graphs0", 0, "final.safetensors"),
                              run_file(out, 0, "final.safetensors")));
    }
    /* TFC_CUDA_GRAPHS_AUTO (tfc-train's default): silent, the launched run's bits; and with
     * every capture failing (as one holding an op that cannot be captured would): a note,
     * then every step launched, the same bits, which also shows that AUTO captures here */
    for (int fail = 0; fail < 2; fail++) {
        char out[32], *text = NULL;
        size_t len = 0;
        snprintf(out, sizeof out, "graphs_auto%d", fail);
#ifdef TFC_HAVE_CUDA
        if (!twin) tfc_gpu_test_fail_captures(fail);
#endif
        step_graphs = TFC_CUDA_GRAPHS_AUTO;
        step_console = open_memstream(&text, &len);
        st[0] = step_train(out, 0, opt[0], 3, &res[0], &err[0]);
        fclose(step_console);
        step_console = NULL;
        step_graphs = 0;
#ifdef TFC_HAVE_CUDA
        tfc_gpu_test_fail_captures(0);
#endif
        if (st[0]) printf("\n  %s", err[0].text);
        CU_ASSERT_EQUAL_FATAL(st[0], TFC_OK);
        CU_ASSERT(files_equal(run_file("graphs0", 0, "final.safetensors"),
                              run_file(out, 0, "final.safetensors")));
        const char *note = "note: cuda_graphs: the step could not be captured";
        int said = text && strstr(text, "cuda_graphs") != NULL;
        int want = fail && !twin; /* the CPU has no graphs: nothing to say */
        if (said != want || (want && !strstr(text, note)))
            printf("\n  auto%s: console: %s", fail ? " with failing captures" : "",
                   text ? text : "(none)");
        CU_ASSERT_EQUAL(said, want);
        CU_ASSERT(!want || strstr(text, note));
        free(text);
    }
    free(res);
    check_status();
}

/* A planted overflow stops both paths at the same iteration with the same message (the
 * first layer to overflow named), in the last micro-batch of a step or an earlier one; a
 * huge rate from iteration 10 stops both alike with the same newest snapshot, and with
 * rollback both reload it alike and end with the same weights. */
static void test_train_device_step_divergence(void)
{
    tfc_train_result *res = calloc(2, sizeof *res);
    tfc_error err[2];
    tfc_status st[2];
    tfc_tensor x;
    step_solver_path();
    CU_ASSERT_EQUAL_FATAL(tfc_npy_read(tfc_test_path("step_x.npy"), &x, &err[0]), TFC_OK);
    for (int j = 0; j < 16; j++) ((float *)x.data)[300 * 16 + j] = FLT_MAX;
    CU_ASSERT_EQUAL_FATAL(tfc_npy_write(tfc_test_path("step_inf_x.npy"), &x, &err[0]), TFC_OK);
    free(x.data);
    for (int iter_size = 1; iter_size <= 2; iter_size++) {
        char is[32], out[32];
        snprintf(is, sizeof is, "iter_size=%d", iter_size);
        snprintf(out, sizeof out, "dstep_inf%d", iter_size);
        const char *const sets[] = {
            "data.train.source={type: npy, features: step_inf_x.npy, labels: step_y.npy}",
            "optimizer={type: sgd, learning_rate: 0.05, momentum: 0.9}", "max_iter=100", is};
        step_train_both(out, sets, 4, st, res, err);
        CU_ASSERT(st[0] == TFC_ERR_NUMERIC && st[1] == TFC_ERR_NUMERIC);
        CU_ASSERT(res[0].iterations == res[1].iterations && res[0].iterations < 100);
        CU_ASSERT_STRING_EQUAL(err[0].msg, err[1].msg);
        CU_ASSERT_PTR_NOT_NULL(strstr(err[1].msg, "first layer whose output is not finite is "
                                                  "'hidden'"));
        if (strcmp(err[0].msg, err[1].msg))
            printf("\n  host: %s\n  device: %s", err[0].msg, err[1].msg);
    }
    const char *huge[] = {"optimizer={type: sgd, learning_rate: 0.1}",
                          "lr_policy={type: step, step_size: 10, gamma: 1e30}",
                          "snapshot={interval: 5, keep: 0}", "max_iter=50",
                          "model.layers.1={BatchNormalization: {}}",
                          "rollback={lr_factor: 1e-30, max_rollbacks: 2}"};
    step_train_both("dstep_huge", huge, 5, st, res, err);
    CU_ASSERT(st[0] == TFC_ERR_NUMERIC && st[1] == TFC_ERR_NUMERIC);
    CU_ASSERT(res[0].iterations == res[1].iterations && res[0].iterations < 50);
    CU_ASSERT_STRING_EQUAL(err[0].msg, err[1].msg);
    CU_ASSERT_STRING_EQUAL(res[0].last_snapshot + strlen(tfc_test_path("dstep_huge_h")),
                           res[1].last_snapshot + strlen(tfc_test_path("dstep_huge_d")));
    CU_ASSERT(st_files_equal(res[0].last_snapshot, res[1].last_snapshot));
    huge[3] = "max_iter=20"; /* rollback, before the rate's next jump at 20 */
    step_train_both("dstep_roll", huge, 6, st, res, err);
    CU_ASSERT(st[0] == TFC_OK && st[1] == TFC_OK);
    if (st[0] || st[1]) printf("\n  host: %s\n  device: %s", err[0].text, err[1].text);
    CU_ASSERT(res[0].rollbacks == 1 && res[1].rollbacks == 1);
    CU_ASSERT(files_equal(run_file("dstep_roll", 1, "final.safetensors"),
                           run_file("dstep_roll", 0, "final.safetensors")));
    free(res);
    check_status();
}

/* ---- recurrent layers: GRU, rnn_input, Bidirectional ------------------------------------- */

/* A [n, t] step mask: all ones without with_mask; with it, sequence 0 empty (every step
 * masked), sequence 1 full, the others random. */
static pair seq_mask(int n, int t, int with_mask)
{
    pair m = pair_new((int64_t)n * t);
    for (int i = 0; i < n; i++)
        for (int s = 0; s < t; s++)
            m.h[(int64_t)i * t + s] = !with_mask || i == 1 || (i > 1 && urand() > 0.3) ? 1.0f
                                                                                          : 0.0f;
    pair_push(&m);
    return m;
}

/* Forward on both from the same inputs (y, hseq, gates compared), then backward on both
 * from the CPU's saved hseq and gates, accumulating into the same random dx, dkernel,
 * drkernel, dbias. With `repeat` the device's backward then runs twice more from zeroed
 * gradients, which must come out the same bits (deterministic). */
static int gru_case(const char *name, tfc_gru_desc d, int with_mask, int with_bias, int with_dx,
                    int repeat)
{
    const int64_t nt = (int64_t)d.n * d.t, G = 3 * (int64_t)d.units;
    const int64_t nb = d.reset_after ? 2 * G : G;
    pair x = pair_rand(nt * d.in, -1, 1), k = pair_rand(d.in * G, -0.4, 0.4);
    pair r = pair_rand(d.units * G, -0.4, 0.4), b = pair_rand(nb, -0.3, 0.3);
    pair mask = seq_mask(d.n, d.t, with_mask);
    const int64_t ny = d.return_sequences ? nt * d.units : (int64_t)d.n * d.units;
    pair y = pair_new(ny), hs = pair_new(nt * d.units), gates = pair_new(nt * 4 * d.units);
    pair dy = pair_rand(ny, -1, 1), dx = pair_rand(nt * d.in, -1, 1);
    pair dk = pair_rand(d.in * G, -1, 1), dr = pair_rand(d.units * G, -1, 1);
    pair dbias = pair_rand(nb, -1, 1);
    size_t wr = ref->ops->gru_workspace(ref, &d), wd = dev->ops->gru_workspace(dev, &d);
    void *wsr = ref->ops->alloc(ref, wr), *wsd = dev->ops->alloc(dev, wd);
    const float *mh = with_mask ? mask.h : NULL, *md = with_mask ? mask.d : NULL;
    ref->ops->gru_forward(ref, &d, x.h, k.h, r.h, with_bias ? b.h : NULL, mh, y.h, hs.h,
                          gates.h, wsr);
    dev->ops->gru_forward(dev, &d, x.d, k.d, r.d, with_bias ? b.d : NULL, md, y.d, hs.d,
                          gates.d, wsd);
    char what[96];
    int bad = 0;
    snprintf(what, sizeof what, "%s y", name);
    bad += pair_check(what, &y, 1e-4, 1e-5);
    snprintf(what, sizeof what, "%s hseq", name);
    bad += pair_check(what, &hs, 1e-4, 1e-5);
    snprintf(what, sizeof what, "%s gates", name);
    bad += pair_check(what, &gates, 1e-4, 1e-5);
    pair_push(&hs), pair_push(&gates);
    ref->ops->gru_backward(ref, &d, x.h, k.h, r.h, mh, hs.h, gates.h, dy.h,
                           with_dx ? dx.h : NULL, dk.h, dr.h, with_bias ? dbias.h : NULL, wsr);
    dev->ops->gru_backward(dev, &d, x.d, k.d, r.d, md, hs.d, gates.d, dy.d,
                           with_dx ? dx.d : NULL, dk.d, dr.d, with_bias ? dbias.d : NULL, wsd);
    pair *grads[] = {&dx, &dk, &dr, &dbias};
    const char *gname[] = {"dx", "dkernel", "drkernel", "dbias"};
    for (int q = 0; q < 4; q++) {
        snprintf(what, sizeof what, "%s %s", name, gname[q]);
        bad += pair_check(what, grads[q], 1e-4, q ? 1e-4 : 1e-5);
    }
    float *runs[2][4];
    for (int run = 0; run < (repeat ? 2 : 0); run++) { /* twice from zeroed gradients */
        for (int q = 0; q < 4; q++) dev->ops->zero(dev, grads[q]->d, (size_t)grads[q]->n * 4);
        dev->ops->gru_backward(dev, &d, x.d, k.d, r.d, md, hs.d, gates.d, dy.d,
                               with_dx ? dx.d : NULL, dk.d, dr.d, with_bias ? dbias.d : NULL,
                               wsd);
        for (int q = 0; q < 4; q++) runs[run][q] = fetch(dev, grads[q]->d, grads[q]->n);
    }
    for (int q = 0; q < (repeat ? 4 : 0); q++) {
        snprintf(what, sizeof what, "%s %s again", name, gname[q]);
        bad += compare_floats(what, runs[1][q], runs[0][q], grads[q]->n, EXACT);
        free(runs[0][q]), free(runs[1][q]);
    }
    pair *all[] = {&x, &k, &r, &b, &mask, &y, &hs, &gates, &dy, &dx, &dk, &dr, &dbias};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) pair_free(all[i]);
    ref->ops->free(ref, wsr);
    dev->ops->free(dev, wsd);
    return bad;
}

static void test_gru(void)
{
    tfc_gru_desc seq = {.n = 5, .t = 9, .in = 7, .units = 13, .return_sequences = 1,
                        .reset_after = 1};
    tfc_gru_desc last = {.n = 4, .t = 11, .in = 6, .units = 33, .reset_after = 1};
    tfc_gru_desc one = {.n = 3, .t = 1, .in = 5, .units = 7, .return_sequences = 1};
    for (int ra = 1; ra >= 0; ra--) {
        seq.reset_after = last.reset_after = ra;
        const char *tag = ra ? "after" : "before";
        char name[64];
        snprintf(name, sizeof name, "gru %s seq", tag);
        CU_ASSERT_EQUAL(gru_case(name, seq, 0, 1, 1, 0), 0);
        snprintf(name, sizeof name, "gru %s seq masked", tag);
        CU_ASSERT_EQUAL(gru_case(name, seq, 1, 1, 1, 0), 0);
        snprintf(name, sizeof name, "gru %s last masked", tag);
        CU_ASSERT_EQUAL(gru_case(name, last, 1, 1, 1, 0), 0);
        snprintf(name, sizeof name, "gru %s last masked, no bias, no dx", tag);
        CU_ASSERT_EQUAL(gru_case(name, last, 1, 0, 0, 0), 0);
    }
    CU_ASSERT_EQUAL(gru_case("gru before, one step", one, 1, 1, 1, 0), 0);
    check_status();
}

/* SimpleRNN's ops (gpu_simple_rnn.cu, put in the table for this case) against the CPU: each
 * step's activation (tanh, relu, softmax over the units, gelu), masked and not, every step
 * and the last, without bias or dx; then training steps of a model with SimpleRNN alone and
 * in a Bidirectional (cpu_first lifted). */
static int simple_rnn_case(const char *name, tfc_simple_rnn_desc d, int with_mask, int with_bias,
                           int with_dx)
{
    const int64_t nt = (int64_t)d.n * d.t, u = d.units;
    pair x = pair_rand(nt * d.in, -1, 1), k = pair_rand(d.in * u, -0.4, 0.4);
    pair r = pair_rand(u * u, -0.4, 0.4), b = pair_rand(u, -0.3, 0.3);
    pair mask = seq_mask(d.n, d.t, with_mask);
    const int64_t ny = d.return_sequences ? nt * u : (int64_t)d.n * u;
    pair y = pair_new(ny), hs = pair_new(nt * u), pre = pair_new(nt * u);
    pair dy = pair_rand(ny, -1, 1), dx = pair_rand(nt * d.in, -1, 1);
    pair dk = pair_rand(d.in * u, -1, 1), dr = pair_rand(u * u, -1, 1), db = pair_rand(u, -1, 1);
    size_t wr = ref->ops->simple_rnn_workspace(ref, &d);
    size_t wd = dev->ops->simple_rnn_workspace(dev, &d);
    void *wsr = ref->ops->alloc(ref, wr), *wsd = dev->ops->alloc(dev, wd);
    const float *mh = with_mask ? mask.h : NULL, *md = with_mask ? mask.d : NULL;
    ref->ops->simple_rnn_forward(ref, &d, x.h, k.h, r.h, with_bias ? b.h : NULL, mh, y.h, hs.h,
                                 pre.h, wsr);
    dev->ops->simple_rnn_forward(dev, &d, x.d, k.d, r.d, with_bias ? b.d : NULL, md, y.d, hs.d,
                                 pre.d, wsd);
    char what[96];
    int bad = 0;
    snprintf(what, sizeof what, "%s y", name);
    bad += pair_check(what, &y, 1e-4, 1e-5);
    snprintf(what, sizeof what, "%s hseq", name);
    bad += pair_check(what, &hs, 1e-4, 1e-5);
    pair_push(&hs), pair_push(&pre); /* the CPU's saved values on both (masked steps' pre) */
    ref->ops->simple_rnn_backward(ref, &d, x.h, k.h, r.h, mh, hs.h, pre.h, dy.h,
                                  with_dx ? dx.h : NULL, dk.h, dr.h, with_bias ? db.h : NULL, wsr);
    dev->ops->simple_rnn_backward(dev, &d, x.d, k.d, r.d, md, hs.d, pre.d, dy.d,
                                  with_dx ? dx.d : NULL, dk.d, dr.d, with_bias ? db.d : NULL, wsd);
    pair *grads[] = {&dx, &dk, &dr, &db};
    const char *gname[] = {"dx", "dkernel", "drkernel", "dbias"};
    for (int q = 0; q < 4; q++) {
        snprintf(what, sizeof what, "%s %s", name, gname[q]);
        bad += pair_check(what, grads[q], 1e-4, q ? 1e-4 : 1e-5);
    }
    pair *all[] = {&x, &k, &r, &b, &mask, &y, &hs, &pre, &dy, &dx, &dk, &dr, &db};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) pair_free(all[i]);
    ref->ops->free(ref, wsr);
    dev->ops->free(dev, wsd);
    return bad;
}

static void test_simple_rnn(void)
{
    enable_layer_ops(1);
    const tfc_act acts[] = {TFC_ACT_TANH, TFC_ACT_RELU, TFC_ACT_SOFTMAX, TFC_ACT_GELU};
    for (int a = 0; a < 4; a++) {
        tfc_simple_rnn_desc seq = {.n = 5, .t = 9, .in = 7, .units = 13, .return_sequences = 1,
                                   .act = acts[a]};
        tfc_simple_rnn_desc last = {.n = 4, .t = 11, .in = 6, .units = 33, .act = acts[a]};
        char name[64];
        snprintf(name, sizeof name, "simple_rnn %s seq", tfc_act_names[acts[a]]);
        CU_ASSERT_EQUAL(simple_rnn_case(name, seq, 0, 1, 1), 0);
        snprintf(name, sizeof name, "simple_rnn %s seq masked", tfc_act_names[acts[a]]);
        CU_ASSERT_EQUAL(simple_rnn_case(name, seq, 1, 1, 1), 0);
        snprintf(name, sizeof name, "simple_rnn %s last masked, no bias, no dx",
                 tfc_act_names[acts[a]]);
        CU_ASSERT_EQUAL(simple_rnn_case(name, last, 1, 0, 0), 0);
    }
    check_status();
    lift_cpu_first = 1;
    train_steps("input: {shape: [7], dtype: int32}\nlayers:\n"
                "  - Embedding: {input_dim: 20, output_dim: 6, mask_zero: true}\n"
                "  - SimpleRNN: {units: 5, return_sequences: true, go_backwards: true,"
                " dropout: 0.2}\n"
                "  - Bidirectional: {layer: {SimpleRNN: {units: 4, activation: relu}}}\n"
                "  - Dense: {units: 4, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\nmetrics: [accuracy]\n",
                8, 1, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
    enable_layer_ops(0);
}

/* Recurrent dropout's ops (gpu_rnn_dropout.cu, put in the table for this case) against the
 * CPU's: the same Philox masks, so the same outputs and gradients within float tolerance;
 * each cell (the GRU with the reset gate after and before R_h), with input dropout and
 * without, masked and not, every step and the last, without bias or dx; then training steps
 * of a model with all three (a Bidirectional among them). */
static int rnn_dropout_case(const char *name, tfc_rnn_dropout_desc d, int with_mask,
                            int with_bias, int with_dx)
{
    const int G = d.cell == TFC_RNN_CELL_LSTM ? 4 : d.cell == TFC_RNN_CELL_GRU ? 3 : 1;
    const int64_t nt = (int64_t)d.n * d.t, u = d.units, GU = G * u;
    const int64_t S = (d.cell == TFC_RNN_CELL_LSTM ? 5 * u : d.cell == TFC_RNN_CELL_GRU ? 4 * u
                                                                                       : u) +
                      (tfc_rnn_dropout_any_acts(&d) ? GU : 0);
    const int64_t nb = d.cell == TFC_RNN_CELL_GRU && d.reset_after ? 2 * GU : GU;
    pair x = pair_rand(nt * d.in, -1, 1), k = pair_rand(d.in * GU, -0.4, 0.4);
    pair r = pair_rand(u * GU, -0.4, 0.4), b = pair_rand(nb, -0.3, 0.3);
    pair mask = seq_mask(d.n, d.t, with_mask);
    const int64_t ny = d.return_sequences ? nt * u : (int64_t)d.n * u;
    pair y = pair_new(ny), hs = pair_new(nt * u), st = pair_new(nt * S);
    pair dy = pair_rand(ny, -1, 1), dx = pair_rand(nt * d.in, -1, 1);
    pair dk = pair_rand(d.in * GU, -1, 1), dr = pair_rand(u * GU, -1, 1);
    pair db = pair_rand(nb, -1, 1);
    size_t wr = ref->ops->rnn_dropout_workspace(ref, &d);
    size_t wd = dev->ops->rnn_dropout_workspace(dev, &d);
    void *wsr = ref->ops->alloc(ref, wr), *wsd = dev->ops->alloc(dev, wd);
    const float *mh = with_mask ? mask.h : NULL, *md = with_mask ? mask.d : NULL;
    ref->ops->rnn_dropout_forward(ref, &d, x.h, k.h, r.h, with_bias ? b.h : NULL, mh, y.h, hs.h,
                                  st.h, wsr);
    dev->ops->rnn_dropout_forward(dev, &d, x.d, k.d, r.d, with_bias ? b.d : NULL, md, y.d, hs.d,
                                  st.d, wsd);
    char what[96];
    int bad = 0;
    snprintf(what, sizeof what, "%s y", name);
    bad += pair_check(what, &y, 1e-4, 1e-5);
    snprintf(what, sizeof what, "%s hseq", name);
    bad += pair_check(what, &hs, 1e-4, 1e-5);
    pair_push(&hs), pair_push(&st); /* the CPU's saved values on both (masked steps' too) */
    ref->ops->rnn_dropout_backward(ref, &d, x.h, k.h, r.h, mh, hs.h, st.h, dy.h,
                                   with_dx ? dx.h : NULL, dk.h, dr.h, with_bias ? db.h : NULL,
                                   wsr);
    dev->ops->rnn_dropout_backward(dev, &d, x.d, k.d, r.d, md, hs.d, st.d, dy.d,
                                   with_dx ? dx.d : NULL, dk.d, dr.d, with_bias ? db.d : NULL,
                                   wsd);
    pair *grads[] = {&dx, &dk, &dr, &db};
    const char *gname[] = {"dx", "dkernel", "drkernel", "dbias"};
    for (int q = 0; q < 4; q++) {
        snprintf(what, sizeof what, "%s %s", name, gname[q]);
        bad += pair_check(what, grads[q], 1e-4, q ? 1e-4 : 1e-5);
    }
    pair *all[] = {&x, &k, &r, &b, &mask, &y, &hs, &st, &dy, &dx, &dk, &dr, &db};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) pair_free(all[i]);
    ref->ops->free(ref, wsr);
    dev->ops->free(dev, wsd);
    return bad;
}

static void test_rnn_dropout(void)
{
    enable_layer_ops(1);
    static const struct {
        const char *name;
        tfc_rnn_cell cell;
        int reset_after;
    } cells[] = {{"lstm", TFC_RNN_CELL_LSTM, 0},
                 {"gru after", TFC_RNN_CELL_GRU, 1},
                 {"gru before", TFC_RNN_CELL_GRU, 0},
                 {"simple_rnn tanh", TFC_RNN_CELL_SIMPLE, 0}};
    for (size_t c = 0; c < sizeof cells / sizeof *cells; c++)
        for (int form = 0; form < 3; form++) {
            tfc_rnn_dropout_desc d = {.cell = cells[c].cell, .n = 5, .t = 9, .in = 7,
                                      .units = 13, .return_sequences = form < 2,
                                      .reset_after = cells[c].reset_after,
                                      .act = TFC_ACT_TANH, .recurrent_act = TFC_ACT_SIGMOID,
                                      .recurrent_rate = 0.3f,
                                      .key = 77 + c, .step = 5};
            if (form == 1 && cells[c].cell != TFC_RNN_CELL_SIMPLE) d.rate = 0.25f;
            if (form == 2) d.n = 4, d.t = 11, d.units = 33;
            char name[96];
            snprintf(name, sizeof name, "rnn_dropout %s%s%s", cells[c].name,
                     form == 1 ? " input dropout masked" : "",
                     form == 2 ? " last masked, no bias, no dx" : "");
            CU_ASSERT_EQUAL(rnn_dropout_case(name, d, form > 0, form < 2, form < 2), 0);
        }
    /* other activations than tanh and sigmoid (the gates' sums kept): with recurrent dropout
     * and without (every pass of such a layer) */
    static const struct {
        const char *name;
        tfc_rnn_cell cell;
        int reset_after;
        tfc_act act, ra;
        float rate;
    } any[] = {{"lstm relu hard_sigmoid", TFC_RNN_CELL_LSTM, 0, TFC_ACT_RELU,
                TFC_ACT_HARD_SIGMOID, 0.3f},
               {"lstm gelu softsign no dropout", TFC_RNN_CELL_LSTM, 0, TFC_ACT_GELU,
                TFC_ACT_SOFTSIGN, 0.0f},
               {"gru after swish", TFC_RNN_CELL_GRU, 1, TFC_ACT_SWISH, TFC_ACT_SIGMOID, 0.3f},
               {"gru before elu softplus", TFC_RNN_CELL_GRU, 0, TFC_ACT_ELU, TFC_ACT_SOFTPLUS,
                0.0f}};
    for (size_t c = 0; c < sizeof any / sizeof *any; c++) {
        tfc_rnn_dropout_desc d = {.cell = any[c].cell, .n = 5, .t = 9, .in = 7, .units = 13,
                                  .return_sequences = 1, .reset_after = any[c].reset_after,
                                  .act = any[c].act, .recurrent_act = any[c].ra,
                                  .recurrent_rate = any[c].rate, .key = 91 + c, .step = 3};
        char name[96];
        snprintf(name, sizeof name, "rnn_dropout %s masked", any[c].name);
        CU_ASSERT_EQUAL(rnn_dropout_case(name, d, 1, 1, 1), 0);
    }
    check_status();
    lift_cpu_first = 1;
    /* implementation 1: the input dropped per gate inside the stepped cell, no recurrent
     * dropout (recurrent_rate 0) */
    train_steps("input: {shape: [6, 4]}\nlayers:\n"
                "  - LSTM: {units: 5, dropout: 0.3, implementation: 1, return_sequences: true}\n"
                "  - GRU: {units: 4, dropout: 0.25, implementation: 1, go_backwards: true}\n"
                "  - Dense: {units: 3, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    train_steps("input: {shape: [7], dtype: int32}\nlayers:\n"
                "  - Embedding: {input_dim: 20, output_dim: 6, mask_zero: true}\n"
                "  - LSTM: {units: 5, return_sequences: true, recurrent_dropout: 0.3,"
                " dropout: 0.2}\n"
                "  - Bidirectional: {layer: {GRU: {units: 4, recurrent_dropout: 0.25,"
                " return_sequences: true}}}\n"
                "  - SimpleRNN: {units: 4, recurrent_dropout: 0.2}\n"
                "  - Dense: {units: 4, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\nmetrics: [accuracy]\n",
                8, 1, 1, 5e-4, 1e-5);
    train_steps("input: {shape: [7], dtype: int32}\nlayers:\n"
                "  - Embedding: {input_dim: 20, output_dim: 6, mask_zero: true}\n"
                "  - LSTM: {units: 5, return_sequences: true, activation: relu,"
                " recurrent_activation: hard_sigmoid, dropout: 0.2}\n"
                "  - Bidirectional: {layer: {GRU: {units: 4, activation: gelu,"
                " recurrent_dropout: 0.25}}}\n"
                "  - Dense: {units: 4, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\nmetrics: [accuracy]\n",
                8, 1, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
    enable_layer_ops(0);
}

/* Deterministic mode: the GRU's gradients (GEMMs and column sums) the same bits twice. */
static void test_gru_deterministic(void)
{
    set_deterministic(1);
    tfc_gru_desc d = {.n = 33, .t = 17, .in = 19, .units = 37, .return_sequences = 1,
                      .reset_after = 1};
    CU_ASSERT_EQUAL(gru_case("gru after, twice", d, 1, 1, 1, 1), 0);
    d.reset_after = 0;
    CU_ASSERT_EQUAL(gru_case("gru before, twice", d, 1, 1, 1, 1), 0);
    set_deterministic(0);
    check_status();
}

/* go_backwards and input dropout: the same Philox draws, so the same bits both ways. */
static void test_rnn_input(void)
{
    const int n = 5, t = 7, f = 13;
    const float rates[] = {0.0f, 0.3f};
    for (int rev = 0; rev < 2; rev++)
        for (int q = 0; q < 2; q++) {
            const int64_t nx = (int64_t)n * t * f;
            pair x = pair_rand(nx, -1, 1), y = pair_rand(nx, -1, 1), dx = pair_rand(nx, -1, 1);
            const uint64_t key = tfc_rng_key(11, (uint64_t)q), step = 77 + (uint64_t)rev;
            ref->ops->rnn_input_forward(ref, n, t, f, rev, rates[q], key, step, x.h, y.h);
            dev->ops->rnn_input_forward(dev, n, t, f, rev, rates[q], key, step, x.d, y.d);
            ref->ops->rnn_input_backward(ref, n, t, f, rev, rates[q], key, step, x.h, dx.h);
            dev->ops->rnn_input_backward(dev, n, t, f, rev, rates[q], key, step, x.d, dx.d);
            char what[64];
            snprintf(what, sizeof what, "rnn_input reverse %d rate %.1f y", rev, rates[q]);
            CU_ASSERT_EQUAL(pair_check(what, &y, EXACT), 0);
            snprintf(what, sizeof what, "rnn_input reverse %d rate %.1f dx", rev, rates[q]);
            CU_ASSERT_EQUAL(pair_check(what, &dx, EXACT), 0);
            pair_free(&x), pair_free(&y), pair_free(&dx);
        }
    /* the mask reversed as a one-feature sequence (tfc_rnn_forward_input) */
    pair m = seq_mask(n, t, 1), mr = pair_new((int64_t)n * t);
    ref->ops->rnn_input_forward(ref, n, t, 1, 1, 0.0f, 0, 0, m.h, mr.h);
    dev->ops->rnn_input_forward(dev, n, t, 1, 1, 0.0f, 0, 0, m.d, mr.d);
    CU_ASSERT_EQUAL(pair_check("rnn_input reversed mask", &mr, EXACT), 0);
    pair_free(&m), pair_free(&mr);
    check_status();
}

/* Every merge mode, with and without a mask (an empty and a full sequence among them), and
 * the last outputs alone (t 1, no mask); da and db start random: they are overwritten. */
static void test_bidir(void)
{
    const int n = 5, u = 11;
    const int ts[] = {9, 9, 1};
    for (int c = 0; c < 3; c++) {
        const int t = ts[c], with_mask = c == 0;
        for (int mode = TFC_MERGE_CONCAT; mode <= TFC_MERGE_AVE; mode++) {
            const int64_t nt = (int64_t)n * t, w = mode == TFC_MERGE_CONCAT ? 2 * u : u;
            pair a = pair_rand(nt * u, -1, 1), b = pair_rand(nt * u, -1, 1);
            pair y = pair_rand(nt * w, -1, 1), dy = pair_rand(nt * w, -1, 1);
            pair da = pair_rand(nt * u, -1, 1), db = pair_rand(nt * u, -1, 1);
            pair m = seq_mask(n, t, with_mask);
            const float *mh = with_mask ? m.h : NULL, *md = with_mask ? m.d : NULL;
            const tfc_merge_mode mm = (tfc_merge_mode)mode;
            ref->ops->bidir_forward(ref, n, t, u, mm, mh, a.h, b.h, y.h);
            dev->ops->bidir_forward(dev, n, t, u, mm, md, a.d, b.d, y.d);
            ref->ops->bidir_backward(ref, n, t, u, mm, mh, a.h, b.h, dy.h, da.h, db.h);
            dev->ops->bidir_backward(dev, n, t, u, mm, md, a.d, b.d, dy.d, da.d, db.d);
            char what[64];
            snprintf(what, sizeof what, "bidir mode %d t %d mask %d y", mode, t, with_mask);
            CU_ASSERT_EQUAL(pair_check(what, &y, EXACT), 0);
            snprintf(what, sizeof what, "bidir mode %d t %d mask %d da", mode, t, with_mask);
            CU_ASSERT_EQUAL(pair_check(what, &da, EXACT), 0);
            snprintf(what, sizeof what, "bidir mode %d t %d mask %d db", mode, t, with_mask);
            CU_ASSERT_EQUAL(pair_check(what, &db, EXACT), 0);
            pair *all[] = {&a, &b, &y, &dy, &da, &db, &m};
            for (size_t i = 0; i < sizeof all / sizeof *all; i++) pair_free(all[i]);
        }
    }
    check_status();
}

/* Embedding(mask_zero) -> Bidirectional GRU (sequences, concat) -> Bidirectional LSTM (the
 * last outputs, ave) -> Dense; and a GRU (reset_before) and an LSTM both going backwards
 * with input dropout. */
static const char bidir_rnn_yaml[] =
    "name: bidir_rnn\n"
    "input: {shape: [9], dtype: int32}\n"
    "layers:\n"
    "  - Embedding: {input_dim: 20, output_dim: 8, mask_zero: true}\n"
    "  - Bidirectional: {layer: {GRU: {units: 7, return_sequences: true}}}\n"
    "  - Bidirectional: {layer: {LSTM: {units: 6}}, merge_mode: ave}\n"
    "  - Dense: {units: 5}\n"
    "loss: sparse_categorical_crossentropy\n"
    "metrics: [accuracy]\n";

static const char gru_back_yaml[] =
    "name: gru_back\n"
    "input: {shape: [8], dtype: int32}\n"
    "layers:\n"
    "  - Embedding: {input_dim: 20, output_dim: 6, mask_zero: true}\n"
    "  - GRU: {units: 9, go_backwards: true, dropout: 0.3, return_sequences: true,\n"
    "          reset_after: false}\n"
    "  - LSTM: {units: 5, go_backwards: true, dropout: 0.2}\n"
    "  - Dense: {units: 4}\n"
    "loss: sparse_categorical_crossentropy\n"
    "metrics: [accuracy]\n";

static void test_train_bidir_rnn(void)
{
    train_steps(bidir_rnn_yaml, 7, 1, 0, 5e-4, 1e-5);
}

static void test_train_gru_back(void)
{
    train_steps(gru_back_yaml, 6, 1, 0, 5e-4, 1e-5);
}

/* ---- the convolution family: Conv1D (groups), the 1-D poolings, DepthwiseConv2D,
 * SeparableConv2D, Conv2DTranspose, UpSampling2D --------------------------------------- */

/* A pair's buffer on side k: 0 the reference's, 1 the device's. */
#define SIDE(p, k) ((k) ? (p).d : (p).h)

static int check_part(const char *name, const char *part, const pair *p, double rtol,
                      double atol)
{
    char what[128];
    snprintf(what, sizeof what, "%s %s", name, part);
    return pair_check(what, p, rtol, atol);
}

/* A Conv1D-shaped desc (h = kh = 1): padding 0 valid, 1 same, 2 causal ((k - 1) d before). */
static tfc_conv_desc conv1d_shape(int n, int w, int c, int k, int f, int s, int dil, int padding)
{
    tfc_conv_desc d = conv_desc(n, 1, w, c, 1, k, f, 1, s, dil, padding == 1);
    if (padding == 2) d.pad_left = (k - 1) * dil, d.ow = (w - 1) / s + 1;
    return d;
}

/* grouped_conv_forward, _backward_data (adding and assigning) and _backward_filter. */
static int grouped_case(const char *name, tfc_conv_desc d, int groups)
{
    const int64_t nx = (int64_t)d.n * d.h * d.w * d.c, ny = (int64_t)d.n * d.oh * d.ow * d.f;
    const int64_t nw = (int64_t)d.kh * d.kw * (d.c / groups) * d.f;
    pair x = pair_rand(nx, -1, 1), w = pair_rand(nw, -1, 1), y = pair_rand(ny, -1, 1);
    pair dy = pair_rand(ny, -1, 1), dx = pair_rand(nx, -1, 1), dxa = pair_rand(nx, -1, 1);
    pair dw = pair_rand(nw, -1, 1);
    for (int k = 0; k < 2; k++) {
        tfc_backend *be = k ? dev : ref;
        be->ops->grouped_conv_forward(be, &d, groups, SIDE(x, k), SIDE(w, k), SIDE(y, k));
        be->ops->grouped_conv_backward_data(be, &d, groups, SIDE(dy, k), SIDE(w, k),
                                            SIDE(dx, k), 0);
        be->ops->grouped_conv_backward_data(be, &d, groups, SIDE(dy, k), SIDE(w, k),
                                            SIDE(dxa, k), 1);
        be->ops->grouped_conv_backward_filter(be, &d, groups, SIDE(x, k), SIDE(dy, k),
                                              SIDE(dw, k));
    }
    int bad = check_part(name, "forward", &y, SUM) + check_part(name, "backward data", &dx, SUM) +
              check_part(name, "backward data, assigned", &dxa, SUM) +
              check_part(name, "backward filter", &dw, 2e-4, 1e-5);
    pair_free(&x), pair_free(&w), pair_free(&y), pair_free(&dy), pair_free(&dx);
    pair_free(&dxa), pair_free(&dw);
    return bad;
}

/* Grouped Conv1D shapes (same, valid with stride and dilation, causal, one filter per group)
 * and a 2-D grouped convolution on the padded path (stride-2 SAME). */
static void test_grouped_conv(void)
{
    CU_ASSERT_EQUAL(grouped_case("g2 same", conv1d_shape(3, 13, 6, 3, 8, 1, 1, 1), 2), 0);
    CU_ASSERT_EQUAL(grouped_case("g3 /2 dil2 valid", conv1d_shape(2, 17, 9, 3, 6, 2, 2, 0), 3),
                    0);
    CU_ASSERT_EQUAL(grouped_case("g4 causal", conv1d_shape(3, 11, 8, 4, 4, 1, 1, 2), 4), 0);
    CU_ASSERT_EQUAL(grouped_case("g3 causal /2", conv1d_shape(2, 12, 6, 3, 9, 2, 1, 2), 3), 0);
    CU_ASSERT_EQUAL(grouped_case("2-D g2 3x3/2 same", conv_desc(2, 9, 7, 6, 3, 3, 6, 2, 2, 1, 1),
                                 2), 0);
    check_status();
}

/* conv1d_forward (bias and ReLU; neither), _backward_data (adding, assigning) and
 * _backward_filter, workspaces sized for one more sequence than run. */
static int conv1d_case(const char *name, tfc_conv_desc d)
{
    tfc_conv_desc big = d;
    big.n = d.n + 1;
    const size_t wr = ref->ops->conv1d_workspace(ref, &big);
    const size_t wd = dev->ops->conv1d_workspace(dev, &big);
    CU_ASSERT(dev->ops->conv1d_workspace(dev, &d) <= wd);
    void *ws[2] = {ref->ops->alloc(ref, wr ? wr : 1), dev->ops->alloc(dev, wd ? wd : 1)};
    const int64_t nx = (int64_t)d.n * d.w * d.c, ny = (int64_t)d.n * d.ow * d.f;
    const int64_t nw = (int64_t)d.kw * d.c * d.f;
    pair x = pair_rand(nx, -1, 1), w = pair_rand(nw, -1, 1), b = pair_rand(d.f, -1, 1);
    pair y = pair_rand(ny, -1, 1), y0 = pair_rand(ny, -1, 1), dy = pair_rand(ny, -1, 1);
    pair dx = pair_rand(nx, -1, 1), dxa = pair_rand(nx, -1, 1), dw = pair_rand(nw, -1, 1);
    for (int k = 0; k < 2; k++) {
        tfc_backend *be = k ? dev : ref;
        be->ops->conv1d_forward(be, &d, SIDE(x, k), SIDE(w, k), SIDE(b, k), 1, SIDE(y, k),
                                ws[k]);
        be->ops->conv1d_forward(be, &d, SIDE(x, k), SIDE(w, k), NULL, 0, SIDE(y0, k), ws[k]);
        be->ops->conv1d_backward_data(be, &d, SIDE(dy, k), SIDE(w, k), SIDE(dx, k), 0, ws[k]);
        be->ops->conv1d_backward_data(be, &d, SIDE(dy, k), SIDE(w, k), SIDE(dxa, k), 1, ws[k]);
        be->ops->conv1d_backward_filter(be, &d, SIDE(x, k), SIDE(dy, k), SIDE(dw, k), ws[k]);
    }
    int bad = check_part(name, "forward, bias + relu", &y, SUM) +
              check_part(name, "forward", &y0, SUM) +
              check_part(name, "backward data", &dx, SUM) +
              check_part(name, "backward data, assigned", &dxa, SUM) +
              check_part(name, "backward filter", &dw, 2e-4, 1e-5);
    pair_free(&x), pair_free(&w), pair_free(&b), pair_free(&y), pair_free(&y0);
    pair_free(&dy), pair_free(&dx), pair_free(&dxa), pair_free(&dw);
    ref->ops->free(ref, ws[0]);
    dev->ops->free(dev, ws[1]);
    return bad;
}

static void test_conv1d_ops(void)
{
    CU_ASSERT_EQUAL(conv1d_case("k3 same", conv1d_shape(3, 13, 5, 3, 7, 1, 1, 1)), 0);
    CU_ASSERT_EQUAL(conv1d_case("k4 same", conv1d_shape(2, 10, 6, 4, 9, 1, 1, 1)), 0);
    CU_ASSERT_EQUAL(conv1d_case("k5 valid", conv1d_shape(4, 19, 3, 5, 6, 1, 1, 0)), 0);
    CU_ASSERT_EQUAL(conv1d_case("k3 causal", conv1d_shape(3, 11, 8, 3, 5, 1, 1, 2)), 0);
    CU_ASSERT_EQUAL(conv1d_case("k1", conv1d_shape(2, 9, 33, 1, 17, 1, 1, 0)), 0);
    check_status();
}

/* masked_mean_forward and _backward (adding and assigning): identical bits, as both add the
 * kept steps in step order and divide. Sequence 0 keeps every step, sequence 1 none (NaN). */
static int masked_mean_case(int n, int t, int c)
{
    pair x = pair_rand((int64_t)n * t * c, -1, 1), m = pair_new((int64_t)n * t);
    pair y = pair_rand((int64_t)n * c, -1, 1), dy = pair_rand((int64_t)n * c, -1, 1);
    pair dx = pair_rand((int64_t)n * t * c, -1, 1), dxa = pair_rand((int64_t)n * t * c, -1, 1);
    for (int i = 0; i < n; i++)
        for (int s = 0; s < t; s++) m.h[i * t + s] = i == 0 || (i > 1 && urand() < 0.6);
    pair_push(&m);
    for (int k = 0; k < 2; k++) {
        tfc_backend *be = k ? dev : ref;
        be->ops->masked_mean_forward(be, n, t, c, SIDE(x, k), SIDE(m, k), SIDE(y, k));
        be->ops->masked_mean_backward(be, n, t, c, SIDE(dy, k), SIDE(m, k), SIDE(dx, k), 0);
        be->ops->masked_mean_backward(be, n, t, c, SIDE(dy, k), SIDE(m, k), SIDE(dxa, k), 1);
    }
    int bad = check_part("masked mean", "forward", &y, EXACT) +
              check_part("masked mean", "backward", &dx, EXACT) +
              check_part("masked mean", "backward, assigned", &dxa, EXACT);
    pair_free(&x), pair_free(&m), pair_free(&y), pair_free(&dy), pair_free(&dx);
    pair_free(&dxa);
    return bad;
}

static void test_masked_mean(void)
{
    CU_ASSERT_EQUAL(masked_mean_case(5, 13, 37), 0);
    CU_ASSERT_EQUAL(masked_mean_case(3, 70, 300), 0); /* channels past one block's threads */
    CU_ASSERT_EQUAL(masked_mean_case(4, 9, 1), 0);
    check_status();
}

/* depthwise_forward (with a bias; without; with a bias, a normalisation, a residual and
 * relu6: the epilogue the CPU applies row by row, the GPU as kernels of their own),
 * _backward_data, _backward_filter; d.f = c m. */
static int depthwise_case(const char *name, tfc_conv_desc d)
{
    const size_t wr = ref->ops->depthwise_workspace(ref, &d);
    const size_t wd = dev->ops->depthwise_workspace(dev, &d);
    void *ws[2] = {wr ? ref->ops->alloc(ref, wr) : NULL, wd ? dev->ops->alloc(dev, wd) : NULL};
    const int64_t nx = (int64_t)d.n * d.h * d.w * d.c, ny = (int64_t)d.n * d.oh * d.ow * d.f;
    const int64_t nw = (int64_t)d.kh * d.kw * d.f;
    pair x = pair_rand(nx, -1, 1), w = pair_rand(nw, -1, 1), b = pair_rand(d.f, -1, 1);
    pair y = pair_rand(ny, -1, 1), y0 = pair_rand(ny, -1, 1), dy = pair_rand(ny, -1, 1);
    pair dx = pair_rand(nx, -1, 1), dw = pair_rand(nw, -1, 1);
    pair g = pair_rand(3 * d.f, -1, 1), v = pair_rand(d.f, 0.1, 2), r = pair_rand(ny, -1, 1);
    pair ye = pair_rand(ny, -1, 1);
    const tfc_bn_params bn[2] = {{g.h, g.h + d.f, g.h + 2 * d.f, v.h, 1e-3f},
                                 {g.d, g.d + d.f, g.d + 2 * d.f, v.d, 1e-3f}};
    for (int k = 0; k < 2; k++) {
        tfc_backend *be = k ? dev : ref;
        be->ops->depthwise_forward(be, &d, SIDE(x, k), SIDE(w, k), SIDE(b, k), NULL, NULL,
                                   TFC_ACT_LINEAR, SIDE(y, k), NULL);
        be->ops->depthwise_forward(be, &d, SIDE(x, k), SIDE(w, k), NULL, NULL, NULL,
                                   TFC_ACT_LINEAR, SIDE(y0, k), NULL);
        be->ops->depthwise_forward(be, &d, SIDE(x, k), SIDE(w, k), SIDE(b, k), &bn[k],
                                   SIDE(r, k), TFC_ACT_RELU6, SIDE(ye, k), ws[k]);
        be->ops->depthwise_backward_data(be, &d, SIDE(dy, k), SIDE(w, k), SIDE(dx, k));
        be->ops->depthwise_backward_filter(be, &d, SIDE(x, k), SIDE(dy, k), SIDE(dw, k), ws[k]);
    }
    int bad = check_part(name, "forward, bias", &y, SUM) + check_part(name, "forward", &y0, SUM) +
              check_part(name, "forward, bias + bn + residual + relu6", &ye, SUM) +
              check_part(name, "backward data", &dx, SUM) +
              check_part(name, "backward filter", &dw, 2e-4, 1e-5);
    pair_free(&x), pair_free(&w), pair_free(&b), pair_free(&y), pair_free(&y0);
    pair_free(&dy), pair_free(&dx), pair_free(&dw);
    pair_free(&g), pair_free(&v), pair_free(&r), pair_free(&ye);
    if (ws[0]) ref->ops->free(ref, ws[0]);
    if (ws[1]) dev->ops->free(dev, ws[1]);
    return bad;
}

/* Depth multipliers 1, 2 and 3; SAME, stride-2 SAME (one more row and column after), VALID
 * with dilation, strides (2, 1) over 33 channels (a channel run's tail), odd sizes. */
static void test_depthwise(void)
{
    CU_ASSERT_EQUAL(depthwise_case("3x3 m2 same", conv_desc(3, 9, 11, 5, 3, 3, 10, 1, 1, 1, 1)),
                    0);
    CU_ASSERT_EQUAL(depthwise_case("3x3/2 same", conv_desc(2, 12, 13, 4, 3, 3, 4, 2, 2, 1, 1)),
                    0);
    CU_ASSERT_EQUAL(depthwise_case("5x3 m3 dil2 valid",
                                   conv_desc(2, 13, 10, 3, 5, 3, 9, 1, 1, 2, 0)), 0);
    CU_ASSERT_EQUAL(depthwise_case("3x3/(2,1) m2 same",
                                   conv_desc(2, 7, 8, 33, 3, 3, 66, 2, 1, 1, 1)), 0);
    check_status();
}

/* upsample_forward and _backward (adding): identical bits, the CPU's arithmetic unfused. */
static int upsample_case(int n, int h, int w, int c, int sh, int sw, int bilinear)
{
    const tfc_resize_desc d = {n, h, w, c, sh, sw, bilinear};
    const int64_t nx = (int64_t)n * h * w * c, ny = nx * sh * sw;
    pair x = pair_rand(nx, -1, 1), y = pair_rand(ny, -1, 1), dy = pair_rand(ny, -1, 1);
    pair dx = pair_rand(nx, -1, 1);
    for (int k = 0; k < 2; k++) {
        tfc_backend *be = k ? dev : ref;
        be->ops->upsample_forward(be, &d, SIDE(x, k), SIDE(y, k));
        be->ops->upsample_backward(be, &d, SIDE(dy, k), SIDE(dx, k));
    }
    char name[64];
    snprintf(name, sizeof name, "upsample %dx%d %s", sh, sw, bilinear ? "bilinear" : "nearest");
    int bad = check_part(name, "forward", &y, EXACT) + check_part(name, "backward", &dx, EXACT);
    pair_free(&x), pair_free(&y), pair_free(&dy), pair_free(&dx);
    return bad;
}

static void test_upsample(void)
{
    for (int bilinear = 0; bilinear < 2; bilinear++) {
        CU_ASSERT_EQUAL(upsample_case(2, 5, 7, 3, 2, 2, bilinear), 0);
        CU_ASSERT_EQUAL(upsample_case(3, 4, 3, 5, 3, 2, bilinear), 0);
        CU_ASSERT_EQUAL(upsample_case(1, 1, 6, 33, 1, 3, bilinear), 0);
        CU_ASSERT_EQUAL(upsample_case(2, 7, 1, 2, 4, 1, bilinear), 0);
    }
    check_status();
}

/* Deterministic mode: the gradients of a grouped and a depthwise convolution and of a
 * bilinear upsampling come out identical on a second run. */
static void test_conv_family_deterministic(void)
{
    set_deterministic(1);
    const tfc_conv_desc g = conv1d_shape(8, 64, 32, 5, 32, 1, 1, 1);
    const tfc_conv_desc dw = conv_desc(8, 16, 16, 32, 3, 3, 64, 1, 1, 1, 1);
    const tfc_resize_desc up = {8, 9, 11, 16, 2, 2, 1};
    const int64_t nx = (int64_t)8 * 16 * 16 * 32, ny = (int64_t)8 * 16 * 16 * 64;
    /* w serves both kernels: grouped [5, 8, 32], depthwise [3, 3, 64] */
    pair x = pair_rand(nx, -1, 1), dy = pair_rand(ny, -1, 1), w = pair_rand(5 * 8 * 32, -1, 1);
    pair out = pair_new(nx);
    const size_t wd = dev->ops->depthwise_workspace(dev, &dw);
    void *ws = wd ? dev->ops->alloc(dev, wd) : NULL;
    float *first = malloc((size_t)nx * 4);
    const char *what[] = {"grouped dw", "grouped dx", "depthwise dw", "depthwise dx",
                          "upsample dx"};
    const int64_t len[] = {5 * 8 * 32, 8 * 64 * 32, 9 * 64, nx, 8 * 9 * 11 * 16};
    for (int op = 0; op < 5; op++)
        for (int run = 0; run < 2; run++) {
            dev->ops->zero(dev, out.d, (size_t)nx * 4);
            if (op == 0) dev->ops->grouped_conv_backward_filter(dev, &g, 4, x.d, dy.d, out.d);
            if (op == 1) dev->ops->grouped_conv_backward_data(dev, &g, 4, dy.d, w.d, out.d, 1);
            if (op == 2) dev->ops->depthwise_backward_filter(dev, &dw, x.d, dy.d, out.d, ws);
            if (op == 3) dev->ops->depthwise_backward_data(dev, &dw, dy.d, w.d, out.d);
            if (op == 4) dev->ops->upsample_backward(dev, &up, dy.d, out.d);
            dev->ops->download(dev, run ? out.h : first, out.d, (size_t)len[op] * 4);
            if (run) CU_ASSERT_EQUAL(compare_floats(what[op], out.h, first, len[op], EXACT), 0);
        }
    free(first);
    pair_free(&x), pair_free(&dy), pair_free(&w), pair_free(&out);
    if (ws) dev->ops->free(dev, ws);
    set_deterministic(0);
    check_status();
}

/* A text model of Conv1D (causal and dilated, grouped, plain with ReLU: the conv1d ops,
 * strided) and every 1-D pooling, the masked GlobalAveragePooling1D on the Embedding's mask. */
static const char conv1d_yaml[] =
    "name: text_conv1d\n"
    "input: {shape: [16], dtype: int32}\n"
    "layers:\n"
    "  - Embedding: {name: emb, input_dim: 20, output_dim: 8, mask_zero: true}\n"
    "  - GlobalAveragePooling1D: {name: avg}\n"
    "  - Conv1D: {name: c1, filters: 12, kernel_size: 3, padding: causal, dilation_rate: 2,\n"
    "             activation: relu, inputs: emb}\n"
    "  - Conv1D: {name: c2, filters: 8, kernel_size: 3, padding: same, groups: 4}\n"
    "  - Conv1D: {name: c3, filters: 8, kernel_size: 4, padding: same, activation: relu}\n"
    "  - MaxPooling1D: {pool_size: 2}\n"
    "  - Conv1D: {name: c4, filters: 8, kernel_size: 3, strides: 2, activation: tanh}\n"
    "  - AveragePooling1D: {pool_size: 2, padding: same}\n"
    "  - GlobalMaxPooling1D: {name: gmax}\n"
    "  - Concatenate: {inputs: [avg, gmax]}\n"
    "  - Dense: {units: 5, activation: softmax}\n"
    "loss: sparse_categorical_crossentropy\n"
    "metrics: [accuracy]\n";

/* A small MobileNet-like model: depthwise (multiplier 2; strided), separable, grouped
 * (Conv2D's groups: the grouped_conv ops, bias and ReLU after), transposed convolutions, a
 * BatchNormalization without center and scale (constants, the unread gradient in the
 * workspace) and both upsamplings. */
static const char mobilenet_yaml[] =
    "name: small_mobilenet\n"
    "input: {shape: [12, 12, 3]}\n"
    "layers:\n"
    "  - Conv2D: {name: stem, filters: 8, kernel_size: 3, strides: 2, padding: same,\n"
    "             activation: relu}\n"
    "  - DepthwiseConv2D: {name: dw1, kernel_size: 3, padding: same, depth_multiplier: 2}\n"
    "  - BatchNormalization: {}\n"
    "  - Activation: {activation: relu}\n"
    "  - DepthwiseConv2D: {name: dw2, kernel_size: 3, strides: 2, padding: same,\n"
    "                      use_bias: false}\n"
    "  - SeparableConv2D: {name: sep, filters: 12, kernel_size: 3, padding: same,\n"
    "                      activation: relu}\n"
    "  - Conv2D: {name: gc, filters: 12, kernel_size: 3, padding: same, groups: 3,\n"
    "             activation: relu}\n"
    "  - BatchNormalization: {name: bn_fixed, center: false, scale: false}\n"
    "  - Conv2DTranspose: {name: tr, filters: 8, kernel_size: 3, strides: 2, padding: same}\n"
    "  - UpSampling2D: {name: up, size: 2, interpolation: bilinear}\n"
    "  - Conv2D: {name: c2, filters: 4, kernel_size: 3, strides: 2, activation: tanh}\n"
    "  - UpSampling2D: {name: up2, size: [1, 2]}\n"
    "  - GlobalAveragePooling2D: {}\n"
    "  - Dense: {units: 10, activation: softmax}\n"
    "loss: sparse_categorical_crossentropy\n"
    "metrics: [accuracy]\n";

static void test_train_conv1d(void)
{
    train_steps(conv1d_yaml, 6, 1, 0, 5e-4, 1e-5);
}

static void test_train_mobilenet(void)
{
    train_steps(mobilenet_yaml, 8, 0, 0, 5e-4, 1e-5);
}

/* Keras's activation layers where their arguments are tfc activations (the Activation layer
 * under another name: ReLU, ELU, LeakyReLU at 0.2, Softmax last), and Rescaling, Subtract and
 * Average, which land CPU-first (cpu_first, lifted here): once this passes on a GPU, their
 * flags go. The
 * parametrised ones (pact, PReLU) have no GPU kernel yet. */
static const char *activation_layers_yaml =
    "input: {shape: [6, 6, 2]}\nlayers:\n"
    "  - Rescaling: {scale: 2.0, offset: -1.0}\n"
    "  - Conv2D: {filters: 4, kernel_size: 3, padding: same}\n"
    "  - ReLU: {}\n"
    "  - Conv2D: {filters: 4, kernel_size: 3}\n"
    "  - ReLU: {max_value: 6}\n  - Rescaling: {scale: 0.5}\n"
    "  - Flatten: {}\n  - Dense: {units: 8}\n  - ELU: {}\n"
    "  - Dense: {units: 8}\n  - LeakyReLU: {negative_slope: 0.2}\n"
    "  - Dense: {name: h, units: 5}\n"
    "  - Dense: {name: g, units: 5, inputs: flatten}\n"
    "  - Subtract: {name: s, inputs: [h, g]}\n"
    "  - Average: {inputs: [s, g, h]}\n  - Softmax: {}\n"
    "loss: sparse_categorical_crossentropy\n"
    "metrics: [accuracy]\n";

static void test_train_activation_layers(void)
{
    lift_cpu_first = 1;
    train_steps(activation_layers_yaml, 8, 0, 1, 5e-4, 1e-5);
    /* ZeroPadding1D, Cropping1D and UpSampling1D around a Conv1D */
    train_steps("input: {shape: [9, 4]}\nlayers:\n  - ZeroPadding1D: {padding: [1, 2]}\n"
                "  - Conv1D: {filters: 3, kernel_size: 3, activation: tanh}\n"
                "  - UpSampling1D: {size: 3}\n  - Cropping1D: {cropping: [2, 4]}\n"
                "  - GlobalAveragePooling1D: {}\n  - Dense: {units: 3, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    /* RepeatVector and Identity: an LSTM autoencoder's repeated state; Normalization with
     * given statistics (per feature) first */
    train_steps("input: {shape: [5, 3]}\nlayers:\n"
                "  - Normalization: {mean: [0.5, -0.25, 0.0], variance: [2.0, 0.5, 1.0]}\n"
                "  - LSTM: {units: 4}\n"
                "  - RepeatVector: {n: 5}\n  - Identity: {}\n"
                "  - LSTM: {units: 4, return_sequences: true}\n  - Flatten: {}\n"
                "  - Dense: {units: 3, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
}

/* DepthwiseConv1D, SeparableConv1D and Conv1DTranspose (CPU-first, lifted here): their 2-D
 * twins' ops (depthwise, gemm, the convolution's data gradient) over 1 x steps images; once
 * this passes on a GPU, their flags go. */
static void test_train_conv1d_variants(void)
{
    lift_cpu_first = 1;
    train_steps("input: {shape: [10, 3]}\nlayers:\n"
                "  - DepthwiseConv1D: {kernel_size: 3, padding: same, depth_multiplier: 2, "
                "activation: relu}\n"
                "  - SeparableConv1D: {filters: 4, kernel_size: 3, strides: 2, "
                "dilation_rate: 1, activation: tanh}\n"
                "  - Conv1DTranspose: {filters: 3, kernel_size: 3, strides: 2, padding: same, "
                "output_padding: 1}\n"
                "  - DepthwiseConv1D: {kernel_size: 2, strides: 2, dilation_rate: 2, "
                "use_bias: false}\n"
                "  - Flatten: {}\n  - Dense: {units: 3, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
}

/* TimeDistributed (CPU-first, lifted for the case) around layers the GPU runs: frames through
 * Conv2D, BatchNormalization (each step's batch statistics, the steps transposed by copy2d),
 * pooling and Flatten into an LSTM; token ids under the mask through a Dense into an LSTM */
static void test_train_time_distributed(void)
{
    lift_cpu_first = 1;
    train_steps("input: {shape: [3, 6, 6, 2]}\nlayers:\n"
                "  - TimeDistributed: {layer: {Conv2D: {filters: 4, kernel_size: 3, "
                "activation: relu}}}\n"
                "  - TimeDistributed: {layer: {BatchNormalization: {momentum: 0.9}}}\n"
                "  - TimeDistributed: {layer: {MaxPooling2D: {pool_size: 2}}}\n"
                "  - TimeDistributed: {layer: {Flatten: {}}}\n"
                "  - LSTM: {units: 6}\n  - Dense: {units: 3, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    train_steps("input: {shape: [10], dtype: int32}\nlayers:\n"
                "  - Embedding: {input_dim: 20, output_dim: 4, mask_zero: true}\n"
                "  - TimeDistributed: {layer: {Dense: {units: 5, activation: tanh}}}\n"
                "  - TimeDistributed: {layer: {LayerNormalization: {}}}\n"
                "  - LSTM: {units: 4}\n  - Dense: {units: 3, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 20, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
}

/* SpectralNormalization (CPU-first, lifted for the case): the power iteration on gemm, sumsq,
 * copy and scale, the kernel divided in place before the wrapped Conv2D, Dense and
 * Conv2DTranspose run; each step's vector_u and kernels compared with the weights */
static void test_train_spectral_normalization(void)
{
    lift_cpu_first = 1;
    train_steps("input: {shape: [6, 6, 2]}\nlayers:\n"
                "  - SpectralNormalization: {layer: {Conv2D: {filters: 4, kernel_size: 3, "
                "activation: relu}}}\n"
                "  - SpectralNormalization: {power_iterations: 2, layer: {Conv2DTranspose: "
                "{filters: 2, kernel_size: 2, strides: 2}}}\n"
                "  - Flatten: {}\n"
                "  - SpectralNormalization: {layer: {Dense: {units: 3, activation: softmax}}}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
}

/* ---- augmentation (gpu_augment.cu) and the layers on existing ops ---------------------- */

/* One warp desc on both backends: forward y, backward into a random dx; the same bits (the
 * draws, matrices and taps are core/augment.h's on both, --fmad=false, and each input cell
 * adds its readers in the CPU's order); the device's backward twice gives the same bits. */
static int warp_case(tfc_warp_desc d)
{
    const int64_t n = (int64_t)d.n * d.h * d.w * d.c;
    pair x = pair_rand(n, -1, 1), y = pair_new(n), dy = pair_rand(n, -1, 1);
    pair dx = pair_rand(n, -1, 1);
    float *dx0 = fetch(ref, dx.h, n);
    ref->ops->warp_forward(ref, &d, x.h, y.h);
    dev->ops->warp_forward(dev, &d, x.d, y.d);
    ref->ops->warp_backward(ref, &d, dy.h, dx.h);
    dev->ops->warp_backward(dev, &d, dy.d, dx.d);
    int bad = pair_check("warp y", &y, EXACT) + pair_check("warp dx", &dx, EXACT);
    float *once = fetch(dev, dx.d, n);
    dev->ops->upload(dev, dx.d, dx0, (size_t)n * 4);
    dev->ops->warp_backward(dev, &d, dy.d, dx.d);
    float *twice = fetch(dev, dx.d, n);
    bad += compare_floats("warp dx again", twice, once, n, EXACT);
    if (bad)
        printf("\n  warp kind %d fill %d bilinear %d, %dx%dx%dx%d", d.kind, d.fill, d.bilinear,
               d.n, d.h, d.w, d.c);
    free(dx0), free(once), free(twice);
    pair_free(&x), pair_free(&y), pair_free(&dy), pair_free(&dx);
    return bad;
}

/* Every kind, fill mode and interpolation at odd sizes, with ranges that read far outside
 * the image (shifts past half the image, any angle, zooms from 0.3 to 1.9, RandomShear's
 * shears up to 1). */
static void test_augment_warp(void)
{
    static const int shapes[][4] = {{3, 7, 9, 3}, {2, 5, 4, 1}, {2, 1, 6, 2}, {1, 16, 11, 5}};
    int bad = 0;
    for (int s = 0; s < 4; s++)
        for (int kind = TFC_WARP_FLIP; kind <= TFC_WARP_SHEAR; kind++)
            for (int fill = TFC_FILL_REFLECT; fill <= TFC_FILL_NEAREST; fill++)
                for (int bil = 0; bil < 2; bil++) {
                    if (kind == TFC_WARP_FLIP && (fill || bil)) continue;
                    tfc_warp_desc d = {.n = shapes[s][0], .h = shapes[s][1],
                                       .w = shapes[s][2], .c = shapes[s][3],
                                       .kind = (tfc_warp_kind)kind, .fill = (tfc_fill_mode)fill,
                                       .bilinear = bil, .fill_value = 0.25f,
                                       .key = 0x1234u + (uint64_t)s, .step = 7};
                    if (kind == TFC_WARP_FLIP) {
                        for (int axes = 1; axes < 4; axes++) {
                            d.flip_rows = axes & 1, d.flip_cols = axes >> 1;
                            bad += warp_case(d);
                        }
                        continue;
                    }
                    if (kind == TFC_WARP_TRANSLATE)
                        d.lo[0] = -0.6f, d.hi[0] = 0.7f, d.lo[1] = -1, d.hi[1] = 0.4f;
                    if (kind == TFC_WARP_ROTATE) d.lo[0] = -180, d.hi[0] = 180;
                    if (kind == TFC_WARP_SHEAR) /* RandomShear's largest, both signs */
                        d.lo[0] = -1, d.hi[0] = 0.6f, d.lo[1] = 0.2f, d.hi[1] = 1;
                    if (kind == TFC_WARP_ZOOM) {
                        d.lo[0] = 0.3f, d.hi[0] = 1.9f, d.lo[1] = 0.5f, d.hi[1] = 1.5f;
                        d.same_zoom = bil;
                    }
                    bad += warp_case(d);
                }
    CU_ASSERT_EQUAL(bad, 0);
    check_status();
}

/* RandomContrast's op on both backends: the factor, the channel means (double sums, rounded
 * once), the clip to value_range and its gradient; images smaller and larger than a block. */
static void test_augment_contrast(void)
{
    static const int shapes[][3] = {{3, 35, 3}, {2, 1600, 1}, {4, 1, 2}};
    int bad = 0;
    for (int s = 0; s < 3; s++) {
        tfc_contrast_desc d = {.n = shapes[s][0], .hw = shapes[s][1], .c = shapes[s][2],
                               .lo = 0.4f, .hi = 1.6f, .vlo = 0.2f, .vhi = 0.8f,
                               .key = 0x77u, .step = (uint64_t)s};
        const int64_t n = (int64_t)d.n * d.hw * d.c;
        pair x = pair_rand(n, 0, 1), y = pair_new(n), dy = pair_rand(n, -1, 1);
        pair dx = pair_rand(n, -1, 1);
        ref->ops->contrast_forward(ref, &d, x.h, y.h);
        dev->ops->contrast_forward(dev, &d, x.d, y.d);
        ref->ops->contrast_backward(ref, &d, x.h, dy.h, dx.h);
        dev->ops->contrast_backward(dev, &d, x.d, dy.d, dx.d);
        bad += pair_check("contrast y", &y, EXACT) + pair_check("contrast dx", &dx, EXACT);
        pair_free(&x), pair_free(&y), pair_free(&dy), pair_free(&dx);
    }
    CU_ASSERT_EQUAL(bad, 0);
    check_status();
}

/* In inference the augmentation layers pass their input through, on the device too. */
static void test_augment_inference(void)
{
    static const char yaml[] =
        "input: {shape: [7, 9, 3]}\nlayers:\n"
        "  - RandomFlip: {}\n  - RandomTranslation: {height_factor: 0.3, width_factor: 0.2}\n"
        "  - RandomRotation: {factor: 0.2}\n  - RandomZoom: {height_factor: 0.3}\n"
        "  - RandomContrast: {factor: 0.5, value_range: [0, 1]}\n";
    tfc_model *m = load_bound(yaml, dev, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    const int64_t n = 4 * 7 * 9 * 3;
    float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) x[i] = (float)urand();
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_forward(m, x, 4, 0, 5, 3, &err), TFC_OK);
    tfc_model_get_output(m, y);
    CU_ASSERT_EQUAL(compare_floats("inference output", y, x, n, EXACT), 0);
    CU_ASSERT_EQUAL(tfc_model_forward(m, x, 4, 1, 5, 3, &err), TFC_OK);
    tfc_model_get_output(m, y);
    CU_ASSERT(memcmp(x, y, (size_t)n * 4) != 0); /* training transforms */
    free(x), free(y);
    tfc_model_free(m);
    check_status();
}

/* A Conv2D first, so that every augmentation layer's backward runs; the same seed and steps
 * on both backends draw the same transforms. */
static const char augment_yaml[] =
    "name: augment\n"
    "input: {shape: [11, 13, 3]}\n"
    "layers:\n"
    "  - Conv2D: {filters: 4, kernel_size: 3, padding: same, activation: tanh}\n"
    "  - RandomFlip: {}\n"
    "  - RandomRotation: {factor: 0.1, fill_mode: reflect}\n"
    "  - RandomZoom: {height_factor: [-0.3, 0.2], width_factor: 0.2, fill_mode: nearest}\n"
    "  - RandomTranslation: {height_factor: 0.2, width_factor: 0.3, fill_mode: wrap,\n"
    "                        interpolation: nearest}\n"
    "  - RandomContrast: {factor: 0.3, value_range: [-0.9, 0.9]}\n"
    "  - Conv2D: {filters: 6, kernel_size: 3, activation: relu}\n"
    "  - GlobalMaxPooling2D: {}\n"
    "  - Dense: {units: 5, activation: softmax}\n"
    "loss: sparse_categorical_crossentropy\n"
    "metrics: [accuracy]\n";

/* ZeroPadding2D and Cropping2D between convolutions (both backwards run), then
 * GlobalMaxPooling2D. */
static const char border_yaml[] =
    "name: border\n"
    "input: {shape: [9, 10, 2]}\n"
    "layers:\n"
    "  - Conv2D: {filters: 4, kernel_size: 3, activation: relu}\n"
    "  - ZeroPadding2D: {padding: [[1, 2], [0, 3]]}\n"
    "  - Conv2D: {filters: 5, kernel_size: 3, padding: same, activation: tanh}\n"
    "  - Cropping2D: {cropping: [[2, 1], 1]}\n"
    "  - GlobalMaxPooling2D: {keepdims: true}\n"
    "  - Flatten: {}\n"
    "  - Dense: {units: 4, activation: softmax}\n"
    "loss: sparse_categorical_crossentropy\n"
    "metrics: [accuracy]\n";

static const char token_position_yaml[] =
    "name: token_position\n"
    "input: {shape: [9], dtype: int32}\n"
    "layers:\n"
    "  - TokenAndPositionEmbedding: {vocabulary_size: 20, sequence_length: 12,\n"
    "                                embedding_dim: 8, mask_zero: true}\n"
    "  - LSTM: {units: 8, return_sequences: true}\n"
    "  - Dense: {units: 20}\n"
    "loss: sparse_categorical_crossentropy\n"
    "metrics: [accuracy]\n";

static const char position_yaml[] =
    "name: position\n"
    "input: {shape: [9], dtype: int32}\n"
    "layers:\n"
    "  - Embedding: {name: tok, input_dim: 20, output_dim: 8}\n"
    "  - PositionEmbedding: {name: pos, sequence_length: 11}\n"
    "  - Add: {inputs: [tok, pos]}\n"
    "  - Dense: {units: 20}\n"
    "loss: sparse_categorical_crossentropy\n"
    "metrics: [accuracy]\n";

static void test_train_augment(void)
{
    train_steps(augment_yaml, 6, 0, 0, 5e-4, 1e-5);
}

/* RandomErasing's and RandomGaussianBlur's ops (gpu_region.cu) against the CPU: a constant
 * fill per channel bit for bit, the noise fill (a normal per value, log and cos in double on
 * both) within 1e-6, the blur bit for bit; then a model with both trains on both backends */
static void test_augment_region(void)
{
    enable_layer_ops(1);
    for (int noise = 0; noise < 2; noise++) {
        const tfc_erase_desc d = {.n = 5, .h = 13, .w = 11, .c = 3, .plo = 0.2f, .phi = 1,
                                  .slo = 0.05f, .shi = 0.6f, .noise = noise,
                                  .fill = {0.3f, -2, 0.7f}, .vlo = -1, .vhi = 1, .key = 21,
                                  .step = 3};
        const int64_t n = 5 * 13 * 11 * 3;
        pair x = pair_rand(n, -1, 1), y = pair_rand(n, -1, 1), dy = pair_rand(n, -1, 1);
        pair dx = pair_rand(n, -1, 1);
        for (int k = 0; k < 2; k++) {
            tfc_backend *be = k ? dev : ref;
            be->ops->erasing_forward(be, &d, SIDE(x, k), SIDE(y, k));
            be->ops->erasing_backward(be, &d, SIDE(dy, k), SIDE(dx, k));
        }
        CU_ASSERT_EQUAL(check_part("erasing", "forward", &y, noise ? 1e-6 : 0, noise ? 1e-6 : 0) +
                            check_part("erasing", "backward", &dx, EXACT), 0);
        pair_free(&x), pair_free(&y), pair_free(&dy), pair_free(&dx);
    }
    /* RandomGaussianBlur's ops: kernels 3 x 3 and 5 wide by 3 high, some values clipped;
     * the same bits (the weights from core/augment_region.h, each sum in the CPU's order) */
    for (int wide = 0; wide < 2; wide++) {
        const tfc_blur_desc d = {.n = 6, .h = 9, .w = 10, .c = 3, .kh = 3, .kw = wide ? 5 : 3,
                                 .plo = 0.1f, .phi = 0.9f, .slo = 0.3f, .shi = 1,
                                 .vlo = -0.6f, .vhi = 0.7f, .key = 5, .step = 9};
        const int64_t n = 6 * 9 * 10 * 3;
        pair x = pair_rand(n, -1, 1), y = pair_rand(n, -1, 1), dy = pair_rand(n, -1, 1);
        pair dx = pair_rand(n, -1, 1);
        for (int k = 0; k < 2; k++) {
            tfc_backend *be = k ? dev : ref;
            be->ops->blur_forward(be, &d, SIDE(x, k), SIDE(y, k));
            be->ops->blur_backward(be, &d, SIDE(x, k), SIDE(dy, k), SIDE(dx, k));
        }
        CU_ASSERT_EQUAL(check_part("blur", "forward", &y, EXACT) +
                            check_part("blur", "backward", &dx, EXACT), 0);
        pair_free(&x), pair_free(&y), pair_free(&dy), pair_free(&dx);
    }
    check_status();
    train_steps("input: {shape: [9, 8, 3]}\nlayers:\n"
                "  - Conv2D: {filters: 3, kernel_size: 2, padding: same}\n"
                "  - RandomErasing: {value_range: [-1, 1]}\n"
                "  - RandomErasing: {factor: [0.5, 1], scale: 0.3, fill_value: [0.1, 0.2, 0.3]}\n"
                "  - RandomGaussianBlur: {kernel_size: [5, 3], value_range: [-2, 2]}\n"
                "  - Conv2D: {filters: 4, kernel_size: 3, activation: relu}\n"
                "  - Flatten: {}\n  - Dense: {units: 5, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    enable_layer_ops(0);
}

/* STFTSpectrogram's and MelSpectrogram's ops (gpu_stft.cu) against the CPU: each STFT mode
 * (channels last and first, valid and same padding) and MEL with and without decibels (its
 * floor active), the outputs and every gradient within 1e-5 (the same sums in double; the
 * float functions may differ in their last bits); then a model with both layers trains on
 * both backends */
static int stft_case(const char *name, tfc_stft_desc d, int real, int imag, int mel)
{
    const int64_t nx = (int64_t)d.n * d.c * d.t, nw = (int64_t)d.frame * d.bins;
    const int64_t rows = (int64_t)d.n * d.c * d.frames;
    const int64_t ny = mel ? (int64_t)d.n * d.mels * d.frames
                           : rows * (d.mode == TFC_STFT_STFT ? 2 : 1) * d.bins;
    pair x = pair_rand(nx, -1, 1), wr = pair_rand(nw, -0.5, 0.5), wi = pair_rand(nw, -0.5, 0.5);
    pair m = pair_rand(mel ? (int64_t)d.bins * d.mels : 1, 0, 1);
    pair re = pair_new(rows * d.bins), im = pair_new(rows * d.bins), y = pair_new(ny);
    pair dy = pair_rand(ny, -1, 1), dx = pair_rand(nx, -1, 1);
    pair dwr = pair_rand(nw, -1, 1), dwi = pair_rand(nw, -1, 1);
    void *ws[2] = {ref->ops->alloc(ref, ref->ops->stft_workspace(ref, &d)),
                   dev->ops->alloc(dev, dev->ops->stft_workspace(dev, &d))};
    for (int k = 0; k < 2; k++) {
        tfc_backend *be = k ? dev : ref;
        const float *kr = real ? SIDE(wr, k) : NULL, *ki = imag ? SIDE(wi, k) : NULL;
        be->ops->stft_forward(be, &d, SIDE(x, k), kr, ki, mel ? SIDE(m, k) : NULL, SIDE(re, k),
                              SIDE(im, k), SIDE(y, k));
        be->ops->stft_backward(be, &d, SIDE(x, k), kr, ki, mel ? SIDE(m, k) : NULL,
                               SIDE(re, k), SIDE(im, k), SIDE(y, k), SIDE(dy, k), SIDE(dx, k),
                               mel ? NULL : SIDE(dwr, k), mel ? NULL : SIDE(dwi, k), ws[k]);
    }
    int bad = check_part(name, "forward", &y, 1e-5, 1e-5) +
              check_part(name, "dx", &dx, 1e-5, 1e-5);
    if (!mel && real) bad += check_part(name, "dreal_kernel", &dwr, 1e-5, 1e-5);
    if (!mel && imag) bad += check_part(name, "dimag_kernel", &dwi, 1e-5, 1e-5);
    ref->ops->free(ref, ws[0]);
    dev->ops->free(dev, ws[1]);
    pair_free(&x), pair_free(&wr), pair_free(&wi), pair_free(&m), pair_free(&re);
    pair_free(&im), pair_free(&y), pair_free(&dy), pair_free(&dx), pair_free(&dwr);
    pair_free(&dwi);
    return bad;
}

static void test_stft(void)
{
    enable_layer_ops(1);
    int bad = 0;
    for (int mode = TFC_STFT_LOG; mode <= TFC_STFT_STFT; mode++) {
        /* 27 samples, frames of 8 every 3: valid 7 frames; same ceil(27 / 3) = 9 frames,
         * (9 - 1) 3 + 8 - 27 = 5 zeros, 2 before */
        const int cf = mode % 2, same = mode % 3 == 0, bins = 5;
        const int fo = mode == TFC_STFT_STFT ? 2 * bins : bins;
        tfc_stft_desc d = {.n = 3, .c = 2, .t = 27, .channels_first = cf, .frame = 8,
                           .step = 3, .bins = bins, .frames = same ? 9 : 7,
                           .pad_left = same ? 2 : 0, .mode = (tfc_stft_mode)mode};
        d.sn = (int64_t)d.frames * d.c * fo;
        if (!cf) d.st = (int64_t)d.c * fo, d.sc = fo, d.sf = 1;
        else d.sc = (int64_t)fo * d.frames, d.sf = d.frames, d.st = 1;
        char name[32];
        snprintf(name, sizeof name, "stft mode %d", mode);
        bad += stft_case(name, d, mode != TFC_STFT_IMAG, mode != TFC_STFT_REAL, 0);
    }
    for (int db = 0; db < 2; db++) {
        tfc_stft_desc d = {.n = 3, .c = 1, .t = 60, .channels_first = 1, .frame = 16,
                           .step = 6, .bins = 9, .pad_left = 8, .reflect = 1,
                           .mode = TFC_STFT_MEL, .mels = 4, .db = db, .mag_exp = db ? 2 : 1,
                           .min_power = 1e-3f, .ref_db = 1.0f, .top_db = 8.0f};
        d.frames = (60 + 16 - 16) / 6 + 1;
        d.sn = (int64_t)d.mels * d.frames, d.sf = d.frames, d.st = 1;
        bad += stft_case(db ? "mel db" : "mel power", d, 1, 1, 1);
    }
    CU_ASSERT_EQUAL(bad, 0);
    check_status();
    train_steps("input: {shape: [64, 2]}\nlayers:\n"
                "  - STFTSpectrogram: {frame_length: 16, frame_step: 8, padding: same}\n"
                "  - Conv1D: {filters: 4, kernel_size: 3, activation: relu}\n"
                "  - Flatten: {name: a}\n"
                "  - Reshape: {target_shape: [128], inputs: input}\n"
                "  - MelSpectrogram: {fft_length: 16, sequence_stride: 8, sampling_rate: 4000, "
                "num_mel_bins: 4, top_db: 20.0}\n"
                "  - Flatten: {name: b}\n"
                "  - Concatenate: {inputs: [a, b]}\n"
                "  - Dense: {units: 5, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    enable_layer_ops(0);
}

/* The preprocessing layers' encode_forward (gpu_encode.cu) against the CPU, bit for bit:
 * every map (index, bucket with values on the boundaries and NaN, lookup with floormod OOV
 * indices, invert, hash: plain, salted and masked) in every mode, float and int32 values, int32 and float indices out; then
 * a model with the three layers (cpu_first lifted) trains on both backends, and one with a
 * HashedCrossing */
static int encode_case(const char *name, tfc_encode_desc d, const float *table, int ntable)
{
    const int64_t nx = d.rows * d.width;
    const int64_t per = d.mode == TFC_ENCODE_INT       ? d.width
                        : d.mode == TFC_ENCODE_ONE_HOT ? (int64_t)d.width * d.depth
                                                       : d.depth;
    pair x = pair_new(nx), t = pair_new(ntable), y = pair_rand(d.rows * per, -1, 1);
    pair sc = pair_rand(d.depth, 0.5, 2);
    for (int64_t i = 0; i < nx; i++) {
        const int v = irand(13) - 4; /* -4 .. 8 */
        if (d.ints) ((int32_t *)x.h)[i] = v;
        else x.h[i] = i % 11 == 5 ? NAN : (float)v * 0.5f;
    }
    memcpy(t.h, table, (size_t)ntable * 4);
    pair_push(&x), pair_push(&t);
    const int scaled = d.mode == TFC_ENCODE_COUNT;
    for (int k = 0; k < 2; k++) {
        tfc_backend *be = k ? dev : ref;
        be->ops->encode_forward(be, &d, SIDE(x, k), SIDE(t, k), scaled ? SIDE(sc, k) : NULL,
                                SIDE(y, k));
    }
    int bad = check_part(name, "forward", &y, EXACT);
    pair_free(&x), pair_free(&t), pair_free(&y), pair_free(&sc);
    return bad;
}

/* HashedCrossing's hash_cross_forward: k int32 inputs over the whole int32 range crossed
 * into bins, int32 ids or one-hot, against the CPU bit for bit */
static int cross_case(const char *name, tfc_encode_desc d, int k)
{
    const int64_t nx = d.rows * d.width, per = tfc_encode_row(&d);
    pair x[TFC_ENCODE_MAX_CROSS], y = pair_rand(d.rows * per, -1, 1);
    const int32_t *xs[2][TFC_ENCODE_MAX_CROSS];
    for (int i = 0; i < k; i++) {
        x[i] = pair_new(nx);
        for (int64_t j = 0; j < nx; j++)
            ((int32_t *)x[i].h)[j] = (int32_t)(uint32_t)(urand() * 4294967296.0);
        pair_push(&x[i]);
        xs[0][i] = (const int32_t *)x[i].h, xs[1][i] = (const int32_t *)x[i].d;
    }
    for (int s = 0; s < 2; s++) {
        tfc_backend *be = s ? dev : ref;
        be->ops->hash_cross_forward(be, &d, k, xs[s], SIDE(y, s));
    }
    int bad = check_part(name, "forward", &y, EXACT);
    for (int i = 0; i < k; i++) pair_free(&x[i]);
    pair_free(&y);
    return bad;
}

static void test_encode(void)
{
    enable_layer_ops(1);
    static const float bounds[] = {-1.0f, 0.0f, 0.5f, 2.0f};
    static const float lookup[] = {-3, 1, 2, 7, 3, 5, 2, 4}; /* keys, then their indices */
    static const float invert[] = {-1, -3, 7, 1, 2, 9};
    int bad = 0;
    for (int map = TFC_ENCODE_INDEX; map <= TFC_ENCODE_HASH; map++)
        for (int mode = TFC_ENCODE_INT; mode <= TFC_ENCODE_COUNT; mode++)
            for (int ints = 0; ints < 2; ints++) {
                tfc_encode_desc d = {.rows = 37, .width = mode == TFC_ENCODE_INT ? 5 : 3,
                                     .ints = ints, .out_ints = mode == TFC_ENCODE_INT && ints,
                                     .map = (tfc_encode_map)map,
                                     .mode = (tfc_encode_mode)mode, .depth = 8};
                const float *table = map == TFC_ENCODE_BUCKET   ? bounds
                                     : map == TFC_ENCODE_LOOKUP ? lookup
                                                                : invert;
                d.n = map == TFC_ENCODE_BUCKET   ? 4
                      : map == TFC_ENCODE_LOOKUP ? 4
                      : map == TFC_ENCODE_HASH   ? 7
                                                 : 6;
                d.oov = map == TFC_ENCODE_INVERT ? -1 : 0, d.noov = 2;
                if (map == TFC_ENCODE_HASH) /* salted with int32 values, masked in one_hot */
                    d.salted = ints, d.key[0] = 133, d.key[1] = 1ull << 40,
                    d.masked = mode == TFC_ENCODE_ONE_HOT, d.mask_value = 2;
                char name[48];
                snprintf(name, sizeof name, "encode map %d mode %d ints %d", map, mode, ints);
                bad += encode_case(name, d, table, map == TFC_ENCODE_LOOKUP ? 8 : 6);
            }
    for (int k = 2; k <= 3; k++)
        for (int mode = TFC_ENCODE_INT; mode <= TFC_ENCODE_ONE_HOT; mode++) {
            tfc_encode_desc d = {.rows = 41, .width = 1, .ints = 1,
                                 .out_ints = mode == TFC_ENCODE_INT,
                                 .mode = (tfc_encode_mode)mode, .n = 11, .depth = 11};
            char name[48];
            snprintf(name, sizeof name, "hash_cross k %d mode %d", k, mode);
            bad += cross_case(name, d, k);
        }
    CU_ASSERT_EQUAL(bad, 0);
    check_status();
    lift_cpu_first = 1;
    train_steps("input: {shape: [6], dtype: int32}\nlayers:\n"
                "  - IntegerLookup: {vocabulary: [1, 2, 3, 5, 8, 13]}\n"
                "  - Embedding: {input_dim: 7, output_dim: 3}\n"
                "  - Flatten: {name: a}\n"
                "  - CategoryEncoding: {num_tokens: 20, output_mode: count, inputs: input}\n"
                "  - Dense: {units: 4, name: b}\n"
                "  - Hashing: {num_bins: 5, salt: 3, output_mode: multi_hot, inputs: input}\n"
                "  - Dense: {units: 2, name: c}\n"
                "  - Concatenate: {inputs: [a, b, c]}\n"
                "  - Dense: {units: 5, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 1, 1, 5e-4, 1e-5);
    train_steps("input: {shape: [4]}\nlayers:\n"
                "  - Discretization: {bin_boundaries: [0.25, 0.5, 0.75], output_mode: one_hot}\n"
                "  - Flatten: {}\n"
                "  - Dense: {units: 5, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    train_steps("input: {shape: [1], dtype: int32}\nlayers:\n"
                "  - Hashing: {name: h, num_bins: 9, inputs: input}\n"
                "  - HashedCrossing: {num_bins: 6, output_mode: one_hot, inputs: [input, h]}\n"
                "  - Dense: {units: 3, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 1, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
    enable_layer_ops(0);
}

/* RandomShear (cpu_first, on the warp ops) between convolutions, so its backward runs: a
 * few steps on both backends */
static void test_train_shear(void)
{
    lift_cpu_first = 1;
    train_steps("input: {shape: [9, 8, 2]}\nlayers:\n"
                "  - Conv2D: {filters: 3, kernel_size: 2, padding: same}\n"
                "  - RandomShear: {x_factor: 0.5, y_factor: [0.1, 0.4], fill_mode: wrap}\n"
                "  - RandomShear: {y_factor: 0.3, interpolation: nearest, fill_mode: constant}\n"
                "  - Conv2D: {filters: 4, kernel_size: 3, activation: relu}\n"
                "  - Flatten: {}\n  - Dense: {units: 5, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
}

/* RandomPerspective's warp kind (the homography in double, the GPU's transpose scanning every
 * output) and RandomSharpness's ops (gpu_sharpness.cu) against the CPU, bit for bit, at odd
 * sizes, some images kept (factor [0.3, 0.9]) and some values clipped; then a model with both
 * layers (RandomPerspective cpu_first) trains on both backends */
static void test_augment_persp(void)
{
    static const int shapes[][4] = {{3, 7, 9, 3}, {2, 5, 4, 1}, {1, 16, 11, 5}};
    int bad = 0;
    for (int s = 0; s < 3; s++)
        for (int bil = 0; bil < 2; bil++) {
            const tfc_warp_desc d = {.n = shapes[s][0], .h = shapes[s][1], .w = shapes[s][2],
                                     .c = shapes[s][3], .kind = TFC_WARP_PERSPECTIVE,
                                     .lo = {0.3f, -0.5f}, .hi = {0.9f, 0.5f},
                                     .fill = TFC_FILL_CONSTANT, .bilinear = bil,
                                     .fill_value = 0.25f, .key = 0x77u + (uint64_t)s, .step = 4};
            bad += warp_case(d);
        }
    CU_ASSERT_EQUAL(bad, 0);
    enable_layer_ops(1);
    for (int s = 0; s < 3; s++) {
        const tfc_sharpen_desc d = {.n = shapes[s][0], .h = shapes[s][1], .w = shapes[s][2],
                                    .c = shapes[s][3], .lo = 0, .hi = 1, .vlo = -0.6f,
                                    .vhi = 0.7f, .key = 8, .step = (uint64_t)s};
        const int64_t n = (int64_t)d.n * d.h * d.w * d.c;
        pair x = pair_rand(n, -1, 1), y = pair_rand(n, -1, 1), dy = pair_rand(n, -1, 1);
        pair dx = pair_rand(n, -1, 1);
        for (int k = 0; k < 2; k++) {
            tfc_backend *be = k ? dev : ref;
            be->ops->sharpen_forward(be, &d, SIDE(x, k), SIDE(y, k));
            be->ops->sharpen_backward(be, &d, SIDE(x, k), SIDE(dy, k), SIDE(dx, k));
        }
        CU_ASSERT_EQUAL(check_part("sharpen", "forward", &y, EXACT) +
                            check_part("sharpen", "backward", &dx, EXACT), 0);
        pair_free(&x), pair_free(&y), pair_free(&dy), pair_free(&dx);
    }
    check_status();
    lift_cpu_first = 1;
    train_steps("input: {shape: [9, 8, 3]}\nlayers:\n"
                "  - Conv2D: {filters: 3, kernel_size: 2, padding: same}\n"
                "  - RandomPerspective: {factor: [0.5, 1], scale: 0.6}\n"
                "  - RandomPerspective: {interpolation: nearest, fill_value: 0.5}\n"
                "  - RandomSharpness: {factor: [0, 1], value_range: [-2, 2]}\n"
                "  - Conv2D: {filters: 4, kernel_size: 3, activation: relu}\n"
                "  - Flatten: {}\n  - Dense: {units: 5, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
    enable_layer_ops(0);
}

/* RandAugment adds no op: its eleven operations are the layers above (warp, brightness,
 * contrast, colour, sharpen and tone ops), picked on the host per step (so the solver
 * captures no CUDA graph of it: tfc_layer_ops.host_choices). A model with two of it, three
 * operations each and a value range the convolution's outputs keep within, trains on both
 * backends (RandAugment cpu_first). */
static void test_rand_augment(void)
{
    enable_layer_ops(1);
    lift_cpu_first = 1;
    train_steps("input: {shape: [9, 8, 3]}\nlayers:\n"
                "  - RandAugment: {num_ops: 3, factor: 0.4, value_range: [-1, 1]}\n"
                "  - Conv2D: {filters: 3, kernel_size: 2, padding: same}\n"
                "  - RandAugment: {num_ops: 2, interpolation: nearest, value_range: [-4, 4],"
                " seed: 3}\n"
                "  - Conv2D: {filters: 4, kernel_size: 3, activation: relu}\n"
                "  - Flatten: {}\n  - Dense: {units: 5, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
    enable_layer_ops(0);
}

/* AugMix adds no op either: RandAugment's operations in chains, mixed with zero, copy, scale
 * and axpy, clipped by brightness with a zero delta; its picks and weights drawn on the host
 * per step (host_choices). A model with two of it trains on both backends (AugMix
 * cpu_first). */
static void test_aug_mix(void)
{
    enable_layer_ops(1);
    lift_cpu_first = 1;
    train_steps("input: {shape: [9, 8, 3]}\nlayers:\n"
                "  - AugMix: {num_chains: 2, factor: 0.4, value_range: [-1, 1]}\n"
                "  - Conv2D: {filters: 3, kernel_size: 2, padding: same}\n"
                "  - AugMix: {chain_depth: 2, interpolation: nearest, value_range: [-4, 4],"
                " all_ops: false, seed: 3}\n"
                "  - Conv2D: {filters: 4, kernel_size: 3, activation: relu}\n"
                "  - Flatten: {}\n  - Dense: {units: 5, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
    enable_layer_ops(0);
}

static void test_train_border(void)
{
    train_steps(border_yaml, 8, 0, 1, 5e-4, 1e-5);
}

static void test_train_token_position(void)
{
    train_steps(token_position_yaml, 6, 1, 0, 5e-4, 1e-5);
}

static void test_train_position(void)
{
    train_steps(position_yaml, 6, 1, 1, 5e-4, 1e-5);
}

/* ---- the transformer family: LayerNormalization, attention, Multiply, Masking ---------- */

/* Rows normalised on both backends, forward (y, stats) and backward from the reference's
 * stats (dx accumulated and assigned, dgamma, dbeta); the backward twice on the device gives
 * the same bits. */
static int layernorm_case(int64_t rows, int cols, int center_stats, int center, int affine)
{
    tfc_layernorm_desc d = {.rows = rows, .cols = cols, .center_stats = center_stats,
                            .center = center, .eps = 1e-3f};
    const int64_t n = rows * cols;
    pair x = pair_rand(n, -2, 3), gamma = pair_rand(cols, 0.5, 1.5), beta = pair_rand(cols, -1, 1);
    pair y = pair_new(n), st = pair_new(2 * rows), dy = pair_rand(n, -1, 1);
    pair dx = pair_rand(n, -1, 1), dxa = pair_rand(n, -1, 1);
    pair dg = pair_rand(cols, -1, 1), db = pair_rand(cols, -1, 1);
    const float *gh = affine ? gamma.h : NULL, *gd = affine ? gamma.d : NULL;
    int bad = 0;
    ref->ops->layernorm_forward(ref, &d, x.h, gh, affine ? beta.h : NULL, y.h, st.h);
    dev->ops->layernorm_forward(dev, &d, x.d, gd, affine ? beta.d : NULL, y.d, st.d);
    bad += pair_check("layernorm y", &y, 1e-5, 1e-5);
    bad += pair_check("layernorm stats", &st, 1e-6, 1e-6);
    pair_push(&st);
    size_t wr = ref->ops->layernorm_workspace(ref, &d), wd = dev->ops->layernorm_workspace(dev, &d);
    void *wsr = wr ? ref->ops->alloc(ref, wr) : NULL, *wsd = wd ? dev->ops->alloc(dev, wd) : NULL;
    ref->ops->layernorm_backward(ref, &d, x.h, dy.h, gh, st.h, dx.h, dg.h, db.h, 0, wsr);
    dev->ops->layernorm_backward(dev, &d, x.d, dy.d, gd, st.d, dx.d, dg.d, db.d, 0, wsd);
    bad += pair_check("layernorm dx", &dx, 1e-4, 1e-5);
    bad += pair_check("layernorm dgamma", &dg, 1e-5, 1e-4);
    bad += pair_check("layernorm dbeta", &db, 1e-5, 1e-4);
    ref->ops->layernorm_backward(ref, &d, x.h, dy.h, gh, st.h, dxa.h, NULL, NULL, 1, wsr);
    dev->ops->layernorm_backward(dev, &d, x.d, dy.d, gd, st.d, dxa.d, NULL, NULL, 1, wsd);
    bad += pair_check("layernorm dx, assigned", &dxa, 1e-4, 1e-5);
    /* deterministic: the parameter gradients twice from zero, the same bits */
    float *first = malloc((size_t)cols * 4);
    for (int run = 0; run < 2; run++) {
        dev->ops->zero(dev, dg.d, (size_t)cols * 4);
        dev->ops->layernorm_backward(dev, &d, x.d, dy.d, gd, st.d, NULL, dg.d, NULL, 0, wsd);
        dev->ops->download(dev, run ? dg.h : first, dg.d, (size_t)cols * 4);
    }
    bad += compare_floats("layernorm dgamma repeated", dg.h, first, cols, EXACT);
    free(first);
    if (wsr) ref->ops->free(ref, wsr);
    if (wsd) dev->ops->free(dev, wsd);
    pair *all[] = {&x, &gamma, &beta, &y, &st, &dy, &dx, &dxa, &dg, &db};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) pair_free(all[i]);
    return bad;
}

static void test_layernorm(void)
{
    CU_ASSERT_EQUAL(layernorm_case(37, 65, 1, 1, 1), 0);   /* LayerNormalization, odd tails */
    CU_ASSERT_EQUAL(layernorm_case(5000, 48, 1, 1, 1), 0); /* many rows: split sums */
    CU_ASSERT_EQUAL(layernorm_case(19, 300, 0, 0, 1), 0);  /* RMSNormalization */
    CU_ASSERT_EQUAL(layernorm_case(23, 7, 1, 0, 0), 0);    /* rms_scaling, no gamma or beta */
    check_status();
}

/* GroupNormalization (gpu_groupnorm.cu, put in the table for this case) against the CPU:
 * forward (y, stats), backward from the reference's stats (dx accumulated and assigned,
 * dgamma, dbeta, in double in other orders), the device's parameter gradients twice the same
 * bits; channels last, first and in the middle, with and without gamma and beta. Then a
 * model with the layer trains on both backends (its cpu_first lifted). */
static int groupnorm_case(int64_t n, int64_t outer, int groups, int cg, int64_t inner,
                          int affine)
{
    tfc_groupnorm_desc d = {.n = n, .outer = outer, .inner = inner, .groups = groups, .cg = cg,
                            .eps = 1e-3f};
    const int64_t m = n * outer * groups * cg * inner, c = (int64_t)groups * cg;
    pair x = pair_rand(m, -2, 3), gamma = pair_rand(c, 0.5, 1.5), beta = pair_rand(c, -1, 1);
    pair y = pair_new(m), st = pair_new(2 * n * groups), dy = pair_rand(m, -1, 1);
    pair dx = pair_rand(m, -1, 1), dxa = pair_rand(m, -1, 1);
    pair dg = pair_rand(c, -1, 1), db = pair_rand(c, -1, 1);
    const float *gh = affine ? gamma.h : NULL, *gd = affine ? gamma.d : NULL;
    int bad = 0;
    ref->ops->groupnorm_forward(ref, &d, x.h, gh, affine ? beta.h : NULL, y.h, st.h);
    dev->ops->groupnorm_forward(dev, &d, x.d, gd, affine ? beta.d : NULL, y.d, st.d);
    bad += pair_check("groupnorm y", &y, 1e-5, 1e-5);
    bad += pair_check("groupnorm stats", &st, 1e-6, 1e-6);
    pair_push(&st);
    size_t wr = ref->ops->groupnorm_workspace(ref, &d);
    size_t wd = dev->ops->groupnorm_workspace(dev, &d);
    void *wsr = wr ? ref->ops->alloc(ref, wr) : NULL, *wsd = wd ? dev->ops->alloc(dev, wd) : NULL;
    ref->ops->groupnorm_backward(ref, &d, x.h, dy.h, gh, st.h, dx.h, dg.h, db.h, 0, wsr);
    dev->ops->groupnorm_backward(dev, &d, x.d, dy.d, gd, st.d, dx.d, dg.d, db.d, 0, wsd);
    bad += pair_check("groupnorm dx", &dx, 1e-4, 1e-5);
    bad += pair_check("groupnorm dgamma", &dg, 1e-5, 1e-4);
    bad += pair_check("groupnorm dbeta", &db, 1e-5, 1e-4);
    ref->ops->groupnorm_backward(ref, &d, x.h, dy.h, gh, st.h, dxa.h, NULL, NULL, 1, wsr);
    dev->ops->groupnorm_backward(dev, &d, x.d, dy.d, gd, st.d, dxa.d, NULL, NULL, 1, wsd);
    bad += pair_check("groupnorm dx, assigned", &dxa, 1e-4, 1e-5);
    float *first = malloc((size_t)c * 4);
    for (int run = 0; run < 2; run++) {
        dev->ops->zero(dev, dg.d, (size_t)c * 4);
        dev->ops->groupnorm_backward(dev, &d, x.d, dy.d, gd, st.d, NULL, dg.d, NULL, 0, wsd);
        dev->ops->download(dev, run ? dg.h : first, dg.d, (size_t)c * 4);
    }
    bad += compare_floats("groupnorm dgamma repeated", dg.h, first, c, EXACT);
    free(first);
    if (wsr) ref->ops->free(ref, wsr);
    if (wsd) dev->ops->free(dev, wsd);
    pair *all[] = {&x, &gamma, &beta, &y, &st, &dy, &dx, &dxa, &dg, &db};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) pair_free(all[i]);
    return bad;
}

static void test_groupnorm(void)
{
    enable_layer_ops(1);
    CU_ASSERT_EQUAL(groupnorm_case(4, 32 * 32, 32, 2, 1, 1), 0); /* a U-Net's 64 channels */
    CU_ASSERT_EQUAL(groupnorm_case(3, 17, 5, 1, 1, 1), 0);       /* instance, odd sizes */
    CU_ASSERT_EQUAL(groupnorm_case(2, 1, 4, 3, 77, 1), 0);       /* channels first */
    CU_ASSERT_EQUAL(groupnorm_case(5, 6, 3, 2, 7, 0), 0);        /* a middle axis, bare */
    CU_ASSERT_EQUAL(groupnorm_case(300, 9, 2, 4, 1, 1), 0);      /* many examples */
    check_status();
    lift_cpu_first = 1;
    train_steps("input: {shape: [6, 6, 2]}\nlayers:\n"
                "  - Conv2D: {filters: 8, kernel_size: 3, padding: same}\n"
                "  - GroupNormalization: {groups: 4}\n  - Activation: {activation: relu}\n"
                "  - Conv2D: {filters: 4, kernel_size: 3}\n"
                "  - GroupNormalization: {groups: -1, axis: 1}\n"
                "  - Flatten: {}\n  - Dense: {units: 5, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
    enable_layer_ops(0);
}

/* Permute (gpu_permute.cu, put in the table for this case) against the CPU: the same bits
 * (a copy), written and added, and back through the inverse permutation. */
static int permute_case(int64_t n, int ndim, const int64_t *dim, const int *perm)
{
    tfc_permute_desc d = {.n = n, .ndim = ndim}, inv = {.n = n, .ndim = ndim};
    int64_t m = n;
    for (int i = 0; i < ndim; i++) {
        d.dim[i] = dim[i], d.perm[i] = perm[i], m *= dim[i];
        inv.perm[perm[i]] = i, inv.dim[i] = dim[perm[i]];
    }
    pair x = pair_rand(m, -1, 1), y = pair_new(m), acc = pair_rand(m, -1, 1), back = pair_new(m);
    int bad = 0;
    ref->ops->permute(ref, &d, x.h, y.h, 0);
    dev->ops->permute(dev, &d, x.d, y.d, 0);
    bad += pair_check("permute y", &y, EXACT);
    ref->ops->permute(ref, &d, x.h, acc.h, 1);
    dev->ops->permute(dev, &d, x.d, acc.d, 1);
    bad += pair_check("permute y, added", &acc, EXACT);
    ref->ops->permute(ref, &inv, y.h, back.h, 0);
    dev->ops->permute(dev, &inv, y.d, back.d, 0);
    bad += pair_check("permute back", &back, EXACT);
    float *got = fetch(dev, back.d, m);
    bad += compare_floats("permute back is x", got, x.h, m, EXACT);
    free(got);
    pair *all[] = {&x, &y, &acc, &back};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) pair_free(all[i]);
    return bad;
}

/* UnitNormalization's l2norm ops (gpu_permute.cu) against the CPU on [outer, red, inner]:
 * y, dx added and assigned; with clamp, slice (0, 0) is all zeros and slice (outer - 1,
 * inner - 1) of norm 5e-13 (Keras's epsilon clamp: y = 1e12 x, dx = 1e12 dy). */
static int l2norm_case(int64_t outer, int64_t red, int64_t inner, int clamp)
{
    tfc_l2norm_desc d = {.outer = outer, .red = red, .inner = inner, .inv_max = 1e12f};
    const int64_t m = outer * red * inner;
    pair x = pair_rand(m, -2, 2), y = pair_new(m), dy = pair_rand(m, -1, 1);
    pair dx = pair_rand(m, -1, 1), dxa = pair_rand(m, -1, 1);
    if (clamp) {
        for (int64_t j = 0; j < red; j++) {
            x.h[j * inner] = 0.0f;
            x.h[(outer - 1) * red * inner + j * inner + inner - 1] = j ? 0.0f : 5e-13f;
        }
        pair_push(&x);
    }
    int bad = 0;
    ref->ops->l2norm_forward(ref, &d, x.h, y.h);
    dev->ops->l2norm_forward(dev, &d, x.d, y.d);
    bad += pair_check("l2norm y", &y, 1e-6, 1e-7);
    ref->ops->l2norm_backward(ref, &d, x.h, dy.h, dx.h, 0);
    dev->ops->l2norm_backward(dev, &d, x.d, dy.d, dx.d, 0);
    bad += pair_check("l2norm dx", &dx, 1e-5, 1e-6);
    ref->ops->l2norm_backward(ref, &d, x.h, dy.h, dxa.h, 1);
    dev->ops->l2norm_backward(dev, &d, x.d, dy.d, dxa.d, 1);
    bad += pair_check("l2norm dx, assigned", &dxa, 1e-5, 1e-6);
    pair *all[] = {&x, &y, &dy, &dx, &dxa};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) pair_free(all[i]);
    return bad;
}

/* Permute and UnitNormalization: their ops against the CPU, then a model with both trains on
 * both backends (their kernels put in the GPU's table for the case) */
static void test_permute_l2norm(void)
{
    enable_layer_ops(1);
    CU_ASSERT_EQUAL(permute_case(3, 2, (int64_t[]){5, 4}, (int[]){1, 0}), 0);
    CU_ASSERT_EQUAL(permute_case(4, 3, (int64_t[]){64, 32, 16}, (int[]){2, 1, 0}), 0);
    CU_ASSERT_EQUAL(permute_case(4, 3, (int64_t[]){64, 32, 16}, (int[]){1, 0, 2}), 0);
    CU_ASSERT_EQUAL(permute_case(2, 4, (int64_t[]){1, 7, 3, 5}, (int[]){3, 1, 0, 2}), 0);
    CU_ASSERT_EQUAL(permute_case(2, 3, (int64_t[]){3, 4, 5}, (int[]){0, 1, 2}), 0);
    CU_ASSERT_EQUAL(l2norm_case(50, 300, 1, 0), 0);  /* rows: a warp each */
    CU_ASSERT_EQUAL(l2norm_case(6, 7, 33, 0), 0);    /* columns: a thread each */
    CU_ASSERT_EQUAL(l2norm_case(3, 4, 1, 1), 0);     /* the clamp, rows */
    CU_ASSERT_EQUAL(l2norm_case(3, 4, 5, 1), 0);     /* and columns */
    check_status();
    train_steps("input: {shape: [5, 4]}\nlayers:\n  - Permute: {dims: [2, 1]}\n"
                "  - Dense: {units: 6, activation: tanh}\n  - UnitNormalization: {}\n"
                "  - Permute: {dims: [2, 1]}\n  - UnitNormalization: {axis: 1}\n"
                "  - Flatten: {}\n  - Dense: {units: 3, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    enable_layer_ops(0);
}

/* crop_resize_forward and _backward (adding; gpu_resize.cu, put in the table for this case)
 * against the CPU: identical bits (core/crop_resize.h's arithmetic, unfused) for bilinear and
 * nearest resizes up, down and of one axis, a crop, a pad of fill_value and a random window. */
static int crop_resize_case(const char *name, tfc_crop_resize_desc d)
{
    const int64_t nx = (int64_t)d.n * d.h * d.w * d.c, ny = (int64_t)d.n * d.oh * d.ow * d.c;
    pair x = pair_rand(nx, -1, 1), y = pair_rand(ny, -1, 1), dy = pair_rand(ny, -1, 1);
    pair dx = pair_rand(nx, -1, 1);
    for (int k = 0; k < 2; k++) {
        tfc_backend *be = k ? dev : ref;
        be->ops->crop_resize_forward(be, &d, SIDE(x, k), SIDE(y, k));
        be->ops->crop_resize_backward(be, &d, SIDE(dy, k), SIDE(dx, k));
    }
    int bad = check_part(name, "forward", &y, EXACT) + check_part(name, "backward", &dx, EXACT);
    pair_free(&x), pair_free(&y), pair_free(&dy), pair_free(&dx);
    return bad;
}

/* Resizing, CenterCrop, RandomCrop and RandomBrightness: their ops against the CPU, then a
 * model with all four (the draws alike from (key, step)) trains on both backends */
static void test_crop_resize(void)
{
    enable_layer_ops(1);
    for (int nearest = 0; nearest < 2; nearest++) {
        const tfc_crop_resize_desc up = {.n = 2, .h = 5, .w = 7, .c = 3, .oh = 11, .ow = 16,
                                         .vh = 5, .vw = 7, .nearest = nearest};
        const tfc_crop_resize_desc down = {.n = 3, .h = 17, .w = 12, .c = 33, .oh = 5,
                                           .ow = 7, .vh = 17, .vw = 12, .nearest = nearest};
        const tfc_crop_resize_desc crop = {.n = 2, .h = 9, .w = 14, .c = 2, .oh = 6, .ow = 6,
                                           .vh = 9, .vw = 9, .left = -2, .nearest = nearest};
        const tfc_crop_resize_desc pad = {.n = 2, .h = 4, .w = 9, .c = 5, .oh = 7, .ow = 6,
                                          .vh = 8, .vw = 9, .top = 2, .nearest = nearest,
                                          .fill_value = 0.5f};
        CU_ASSERT_EQUAL(crop_resize_case(nearest ? "crop_resize up, nearest" : "up", up), 0);
        CU_ASSERT_EQUAL(crop_resize_case("crop_resize down", down), 0);
        CU_ASSERT_EQUAL(crop_resize_case("crop_resize crop", crop), 0);
        CU_ASSERT_EQUAL(crop_resize_case("crop_resize pad", pad), 0);
    }
    const tfc_crop_resize_desc random = {.n = 4, .h = 12, .w = 10, .c = 3, .oh = 5, .ow = 6,
                                         .vh = 5, .vw = 6, .random = 1, .key = 99, .step = 7};
    CU_ASSERT_EQUAL(crop_resize_case("crop_resize random", random), 0);
    /* RandomBrightness's ops (gpu_augment.cu), some values clipped */
    const tfc_contrast_desc b = {.n = 5, .hw = 37, .c = 3, .lo = -0.3f, .hi = 0.4f,
                                 .vlo = -1, .vhi = 1, .key = 8, .step = 2};
    const int64_t nb = 5 * 37 * 3;
    pair x = pair_rand(nb, -1, 1), y = pair_rand(nb, -1, 1), dy = pair_rand(nb, -1, 1);
    pair dx = pair_rand(nb, -1, 1);
    for (int k = 0; k < 2; k++) {
        tfc_backend *be = k ? dev : ref;
        be->ops->brightness_forward(be, &b, SIDE(x, k), SIDE(y, k));
        be->ops->brightness_backward(be, &b, SIDE(x, k), SIDE(dy, k), SIDE(dx, k));
    }
    CU_ASSERT_EQUAL(check_part("brightness", "forward", &y, EXACT) +
                        check_part("brightness", "backward", &dx, EXACT), 0);
    pair_free(&x), pair_free(&y), pair_free(&dy), pair_free(&dx);
    check_status();
    train_steps("input: {shape: [10, 9, 2]}\nlayers:\n"
                "  - RandomCrop: {height: 8, width: 8}\n"
                "  - Conv2D: {filters: 4, kernel_size: 3, activation: relu}\n"
                "  - Resizing: {height: 9, width: 5, pad_to_aspect_ratio: true}\n"
                "  - CenterCrop: {height: 7, width: 5}\n"
                "  - Resizing: {height: 4, width: 4, interpolation: nearest}\n"
                "  - RandomBrightness: {factor: 0.2, value_range: [-1, 1]}\n"
                "  - Flatten: {}\n  - Dense: {units: 5, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    enable_layer_ops(0);
}

/* The colour augmentations (gpu_color.cu; RandomGrayscale, RandomInvert, Solarization,
 * RandomPosterization, RandomColorDegeneration, RandomSaturation, RandomHue; and
 * RandomColorJitter, their saturation and hue after RandomBrightness's and RandomContrast's
 * ops): each kind's ops against the CPU (the same
 * core/color.h draws and maps), some values clipped, then a model with every layer trains
 * on both backends */
static void test_augment_color(void)
{
    enable_layer_ops(1);
    const tfc_color_desc descs[] = {
        {.kind = TFC_COLOR_GRAYSCALE, .lo = {0.5f}, .hi = {0.5f}, .vlo = 0, .vhi = 255},
        {.kind = TFC_COLOR_INVERT, .lo = {0.2f}, .hi = {0.9f}, .vlo = -1, .vhi = 1},
        {.kind = TFC_COLOR_SOLARIZE, .lo = {0, 0.1f}, .hi = {60, 200}, .vlo = -1, .vhi = 1},
        {.kind = TFC_COLOR_POSTERIZE, .lo = {2}, .hi = {7}, .vlo = -1, .vhi = 1},
        {.kind = TFC_COLOR_DEGENERATE, .lo = {-0.8f}, .hi = {0.8f}, .vlo = -0.9f, .vhi = 0.9f},
        {.kind = TFC_COLOR_SATURATE, .lo = {-0.2f}, .hi = {0.7f}, .vlo = 0, .vhi = 1},
        {.kind = TFC_COLOR_HUE, .lo = {0}, .hi = {0.8f}, .vlo = -1, .vhi = 1}};
    const char *names[] = {"grayscale", "invert",     "solarize", "posterize",
                           "degenerate", "saturation", "hue"};
    const int64_t nb = 5 * 37 * 3;
    for (int d = 0; d < 7; d++) {
        tfc_color_desc c = descs[d];
        c.n = 5, c.hw = 37, c.c = 3, c.key = 8, c.step = 2;
        pair x = pair_rand(nb, -1, 1), y = pair_rand(nb, -1, 1), dy = pair_rand(nb, -1, 1);
        pair dx = pair_rand(nb, -1, 1);
        for (int k = 0; k < 2; k++) {
            tfc_backend *be = k ? dev : ref;
            be->ops->color_forward(be, &c, SIDE(x, k), SIDE(y, k));
            be->ops->color_backward(be, &c, SIDE(x, k), SIDE(dy, k), SIDE(dx, k));
        }
        CU_ASSERT_EQUAL(check_part(names[d], "forward", &y, EXACT) +
                            check_part(names[d], "backward", &dx, EXACT), 0);
        pair_free(&x), pair_free(&y), pair_free(&dy), pair_free(&dx);
    }
    check_status();
    train_steps("input: {shape: [6, 5, 3]}\nlayers:\n"
                "  - RandomPosterization: {factor: [3, 8], value_range: [-1, 1]}\n"
                "  - RandomGrayscale: {}\n"
                "  - RandomInvert: {factor: 0.7, value_range: [-1, 1]}\n"
                "  - Conv2D: {filters: 3, kernel_size: 3, activation: relu}\n"
                "  - Solarization: {addition_factor: 0.1, threshold_factor: 0.5,"
                " value_range: [0, 2]}\n"
                "  - RandomColorDegeneration: {factor: 0.5, value_range: [-2, 2]}\n"
                "  - RandomSaturation: {factor: [0.2, 0.6], value_range: [0, 1]}\n"
                "  - RandomHue: {factor: 0.4, value_range: [-2, 2]}\n"
                "  - RandomColorJitter: {value_range: [-2, 2], brightness_factor: 0.1,"
                " contrast_factor: 0.2, saturation_factor: 0.3, hue_factor: 0.2}\n"
                "  - Flatten: {}\n  - Dense: {units: 5, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    enable_layer_ops(0);
}

/* AutoContrast and Equalization (gpu_tone.cu, core/tone.h): the ops against the CPU, a
 * constant channel and ties among the extremes, values on a grid so that the histogram's
 * bins repeat and Equalization's second channel keeps one bin; the forward the same bits,
 * AutoContrast's backward to its sums' order. Then a model with both layers trains on both
 * backends. */
static void test_augment_tone(void)
{
    enable_layer_ops(1);
    const tfc_tone_desc descs[] = {
        {.kind = TFC_TONE_AUTOCONTRAST, .vlo = 0, .vhi = 255},
        {.kind = TFC_TONE_AUTOCONTRAST, .vlo = -1, .vhi = 2},
        {.kind = TFC_TONE_EQUALIZE, .bins = 256, .vlo = 0, .vhi = 255},
        {.kind = TFC_TONE_EQUALIZE, .bins = 4096, .vlo = -1, .vhi = 1},
        {.kind = TFC_TONE_EQUALIZE, .bins = 7, .vlo = -0.5f, .vhi = 0.5f}};
    const char *names[] = {"autocontrast", "autocontrast_range", "equalize", "equalize_4096",
                           "equalize_7"};
    const int n = 5, hw = 300, c = 3;
    const int64_t nb = (int64_t)n * hw * c;
    for (int d = 0; d < 5; d++) {
        tfc_tone_desc t = descs[d];
        t.n = n, t.hw = hw, t.c = c;
        pair x = pair_rand(nb, t.vlo, t.vhi), y = pair_rand(nb, -1, 1);
        pair dy = pair_rand(nb, -1, 1), dx = pair_rand(nb, -1, 1);
        for (int64_t i = 0; i < nb; i++) {
            x.h[i] = t.vlo + roundf((x.h[i] - t.vlo) / (t.vhi - t.vlo) * 40) / 40 *
                                 (t.vhi - t.vlo);
            if (i % c == 1 && (t.kind == TFC_TONE_EQUALIZE || i < hw * c)) x.h[i] = t.vlo;
        }
        pair_push(&x);
        for (int k = 0; k < 2; k++) {
            tfc_backend *be = k ? dev : ref;
            be->ops->tone_forward(be, &t, SIDE(x, k), SIDE(y, k));
            be->ops->tone_backward(be, &t, SIDE(x, k), SIDE(dy, k), SIDE(dx, k));
        }
        CU_ASSERT_EQUAL(check_part(names[d], "forward", &y, EXACT) +
                            check_part(names[d], "backward", &dx, F32), 0);
        pair_free(&x), pair_free(&y), pair_free(&dy), pair_free(&dx);
    }
    /* ContrastLimitedAdaptiveHistogramEqualization (TFC_TONE_CLAHE): grids that divide the
     * image and ones that do not, clipped or not, a reversed range; its backward adds nothing */
    const tfc_tone_desc clahe[] = {
        {.kind = TFC_TONE_CLAHE, .vlo = 0, .vhi = 255, .grid_h = 4, .grid_w = 3,
         .clip_limit = 4},
        {.kind = TFC_TONE_CLAHE, .vlo = 1, .vhi = -1, .grid_h = 8, .grid_w = 8,
         .clip_limit = 0},
        {.kind = TFC_TONE_CLAHE, .vlo = 0, .vhi = 1, .grid_h = 3, .grid_w = 7,
         .clip_limit = 1.5f}};
    for (int d = 0; d < 3; d++) {
        tfc_tone_desc t = clahe[d];
        t.n = n, t.h = 20, t.w = 15, t.hw = hw, t.c = c;
        pair x = pair_rand(nb, fminf(t.vlo, t.vhi), fmaxf(t.vlo, t.vhi)), y = pair_rand(nb, -1, 1);
        pair dy = pair_rand(nb, -1, 1), dx = pair_rand(nb, -1, 1);
        for (int k = 0; k < 2; k++) {
            tfc_backend *be = k ? dev : ref;
            be->ops->tone_forward(be, &t, SIDE(x, k), SIDE(y, k));
            be->ops->tone_backward(be, &t, SIDE(x, k), SIDE(dy, k), SIDE(dx, k));
        }
        CU_ASSERT_EQUAL(check_part("clahe", "forward", &y, EXACT) +
                            check_part("clahe", "backward", &dx, EXACT), 0);
        pair_free(&x), pair_free(&y), pair_free(&dy), pair_free(&dx);
    }
    check_status();
    lift_cpu_first = 1; /* ContrastLimitedAdaptiveHistogramEqualization */
    train_steps("input: {shape: [6, 5, 3]}\nlayers:\n"
                "  - AutoContrast: {value_range: [-1, 1]}\n"
                "  - Conv2D: {filters: 3, kernel_size: 3, activation: relu}\n"
                "  - Equalization: {bins: 16, value_range: [0, 2]}\n"
                "  - AutoContrast: {}\n"
                "  - ContrastLimitedAdaptiveHistogramEqualization: {tile_grid_size: [2, 2]}\n"
                "  - Flatten: {}\n  - Dense: {units: 5, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
    enable_layer_ops(0);
}

/* RandomElasticTransform's ops (gpu_elastic.cu, put in the table for this case) against the
 * CPU: drawn normals, both interpolations and every fill mode, some images kept (probability
 * [0.3, 0.9]), values clipped; the field's blur in the same order on both (its exponential in
 * double), so within float32 rounding. Then a model with two layers (cpu_first lifted) trains
 * on both backends. */
static void test_augment_elastic(void)
{
    static const int shapes[][4] = {{3, 12, 9, 3}, {2, 7, 16, 1}, {2, 20, 20, 2}};
    enable_layer_ops(1);
    for (int s = 0; s < 3; s++)
        for (int m = 0; m < 5; m++) {
            tfc_elastic_desc d = {.n = shapes[s][0], .h = shapes[s][1], .w = shapes[s][2],
                                  .c = shapes[s][3], .plo = 0.3f, .phi = 0.9f,
                                  .fill = (tfc_fill_mode)m, .bilinear = (m + s) % 2,
                                  .fill_value = 0.25f, .vlo = -0.8f, .vhi = 0.9f,
                                  .key = 0x51u + (uint64_t)s, .step = (uint64_t)m};
            tfc_elastic_params(d.h, d.w, 0.4f + 0.2f * (float)m, &d.alpha, &d.sigma, &d.k);
            d.alpha *= 4; /* reads past the edges */
            const int64_t n = (int64_t)d.n * d.h * d.w * d.c;
            pair x = pair_rand(n, -1, 1), y = pair_rand(n, -1, 1), dy = pair_rand(n, -1, 1);
            pair dx = pair_rand(n, -1, 1);
            for (int k = 0; k < 2; k++) {
                tfc_backend *be = k ? dev : ref;
                be->ops->elastic_forward(be, &d, SIDE(x, k), SIDE(y, k));
                be->ops->elastic_backward(be, &d, SIDE(x, k), SIDE(dy, k), SIDE(dx, k));
            }
            CU_ASSERT_EQUAL(check_part("elastic", "forward", &y, F32) +
                                check_part("elastic", "backward", &dx, F32), 0);
            pair_free(&x), pair_free(&y), pair_free(&dy), pair_free(&dx);
        }
    check_status();
    lift_cpu_first = 1; /* RandomElasticTransform */
    train_steps("input: {shape: [12, 10, 3]}\nlayers:\n"
                "  - Conv2D: {filters: 3, kernel_size: 2, padding: same}\n"
                "  - RandomElasticTransform: {factor: [0.5, 1], value_range: [-5, 5]}\n"
                "  - RandomElasticTransform: {interpolation: nearest, fill_mode: mirror}\n"
                "  - Conv2D: {filters: 4, kernel_size: 3, activation: relu}\n"
                "  - Flatten: {}\n  - Dense: {units: 5, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
    enable_layer_ops(0);
}

/* Maximum and Minimum (gpu_extremum.cu, put in the table for this case) against the CPU: the
 * fold of k inputs, values on a grid of halves so ties are common (the weights halve), with
 * and without a sequence mask and its mixes of masked inputs; y and every dx (accumulated,
 * one of them NULL) the same bits (both run core/backend.h's tfc_extremum_at). Then a model
 * with both layers, masked and not, trains on both backends. */
static int extremum_case(int64_t rows, int cols, int k, int minimum, unsigned masked,
                         int with_mask)
{
    tfc_extremum_desc d = {.rows = rows, .cols = cols, .k = k, .minimum = minimum,
                           .masked = masked};
    const int64_t n = rows * cols;
    pair x[8], dx[8], y = pair_new(n), dy = pair_rand(n, -1, 1), mask = pair_rand(rows, 0, 1);
    const float *xh[8], *xd[8];
    float *dxh[8], *dxd[8];
    for (int i = 0; i < k; i++) {
        x[i] = pair_rand(n, -2, 2);
        for (int64_t e = 0; e < n; e++) x[i].h[e] = roundf(x[i].h[e] * 2) / 2;
        if (i == 1) x[i].h[0] = NAN; /* NaN propagates */
        pair_push(&x[i]);
        dx[i] = pair_rand(n, -1, 1);
        xh[i] = x[i].h, xd[i] = x[i].d;
        dxh[i] = i == 1 ? NULL : dx[i].h, dxd[i] = i == 1 ? NULL : dx[i].d;
    }
    for (int64_t r = 0; r < rows; r++) mask.h[r] = mask.h[r] < 0.3f ? 0.f : 1.f;
    pair_push(&mask);
    int bad = 0;
    ref->ops->extremum_forward(ref, &d, xh, with_mask ? mask.h : NULL, y.h);
    dev->ops->extremum_forward(dev, &d, xd, with_mask ? mask.d : NULL, y.d);
    bad += pair_check("extremum y", &y, 0, 0);
    ref->ops->extremum_backward(ref, &d, xh, with_mask ? mask.h : NULL, dy.h, dxh);
    dev->ops->extremum_backward(dev, &d, xd, with_mask ? mask.d : NULL, dy.d, dxd);
    for (int i = 0; i < k; i++) bad += pair_check("extremum dx", &dx[i], 0, 0);
    for (int i = 0; i < k; i++) pair_free(&x[i]), pair_free(&dx[i]);
    pair_free(&y), pair_free(&dy), pair_free(&mask);
    return bad;
}

/* Conv3D's ops (gpu_conv3d.cu, put in the table for this case) against the CPU: y with and
 * without a bias, dw added, dx added and assigned; valid and same padding (the padded copy),
 * strides, dilation, groups. Then a model with Conv3D trains on both backends. */
static int conv3d_case(tfc_conv3d_desc d, int same)
{
    for (int a = 0; a < 3; a++) {
        int o, p;
        const int k = d.k[a], s = d.s[a], dil = d.dil[a], n = d.in[a];
        /* TensorFlow's rules (layers/layer.h's tfc_conv_axis) */
        o = same ? (n + s - 1) / s : (n - (k - 1) * dil + s - 1) / s;
        p = same ? ((o - 1) * s + (k - 1) * dil + 1 - n) / 2 : 0;
        d.out[a] = o, d.pad[a] = p > 0 ? p : 0;
    }
    const int64_t nx = (int64_t)d.n * d.in[0] * d.in[1] * d.in[2] * d.c;
    const int64_t ny = (int64_t)d.n * d.out[0] * d.out[1] * d.out[2] * d.f;
    const int64_t nw = (int64_t)d.k[0] * d.k[1] * d.k[2] * (d.c / d.groups) * d.f;
    pair x = pair_rand(nx, -1, 1), w = pair_rand(nw, -1, 1), b = pair_rand(d.f, -1, 1);
    pair y = pair_new(ny), yb = pair_new(ny), dy = pair_rand(ny, -1, 1);
    pair dx = pair_rand(nx, -1, 1), dxa = pair_rand(nx, -1, 1), dw = pair_rand(nw, -1, 1);
    size_t wr = ref->ops->conv3d_workspace(ref, &d), wd = dev->ops->conv3d_workspace(dev, &d);
    void *wsr = ref->ops->alloc(ref, wr + 4), *wsd = dev->ops->alloc(dev, wd + 4);
    int bad = 0;
    ref->ops->conv3d_forward(ref, &d, x.h, w.h, NULL, y.h, wsr);
    dev->ops->conv3d_forward(dev, &d, x.d, w.d, NULL, y.d, wsd);
    bad += pair_check("conv3d y", &y, 1e-4, 1e-5);
    ref->ops->conv3d_forward(ref, &d, x.h, w.h, b.h, yb.h, wsr);
    dev->ops->conv3d_forward(dev, &d, x.d, w.d, b.d, yb.d, wsd);
    bad += pair_check("conv3d y, bias", &yb, 1e-4, 1e-5);
    ref->ops->conv3d_backward(ref, &d, x.h, w.h, dy.h, dx.h, dw.h, 0, wsr);
    dev->ops->conv3d_backward(dev, &d, x.d, w.d, dy.d, dx.d, dw.d, 0, wsd);
    bad += pair_check("conv3d dx", &dx, 1e-4, 1e-5);
    bad += pair_check("conv3d dw", &dw, 1e-4, 1e-4);
    ref->ops->conv3d_backward(ref, &d, x.h, w.h, dy.h, dxa.h, NULL, 1, wsr);
    dev->ops->conv3d_backward(dev, &d, x.d, w.d, dy.d, dxa.d, NULL, 1, wsd);
    bad += pair_check("conv3d dx, assigned", &dxa, 1e-4, 1e-5);
    ref->ops->free(ref, wsr);
    dev->ops->free(dev, wsd);
    pair *all[] = {&x, &w, &b, &y, &yb, &dy, &dx, &dxa, &dw};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) pair_free(all[i]);
    return bad;
}

static void test_conv3d(void)
{
    enable_layer_ops(1);
    CU_ASSERT_EQUAL(conv3d_case((tfc_conv3d_desc){.n = 3, .c = 3, .f = 8, .groups = 1,
                                                  .in = {6, 7, 5}, .k = {3, 3, 3},
                                                  .s = {1, 1, 1}, .dil = {1, 1, 1}}, 0), 0);
    CU_ASSERT_EQUAL(conv3d_case((tfc_conv3d_desc){.n = 2, .c = 4, .f = 6, .groups = 1,
                                                  .in = {8, 9, 7}, .k = {3, 2, 3},
                                                  .s = {2, 2, 3}, .dil = {1, 1, 1}}, 1), 0);
    CU_ASSERT_EQUAL(conv3d_case((tfc_conv3d_desc){.n = 2, .c = 6, .f = 4, .groups = 2,
                                                  .in = {5, 6, 6}, .k = {2, 3, 2},
                                                  .s = {1, 1, 1}, .dil = {2, 1, 2}}, 1), 0);
    check_status();
    train_steps("input: {shape: [4, 6, 5, 2]}\nlayers:\n"
                "  - Conv3D: {filters: 4, kernel_size: 3, padding: same, activation: relu}\n"
                "  - Conv3D: {filters: 4, kernel_size: [2, 3, 2], strides: 2, groups: 2}\n"
                "  - Flatten: {}\n  - Dense: {units: 5, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    enable_layer_ops(0);
}

/* Conv3DTranspose's use of the conv3d ops (put in the table for this case) against the CPU:
 * a layer of c input channels, f filters on volumes `in` with kernel k, strides s, dilation
 * dil, same or valid padding and output_padding op (-1: none) runs the convolution D from
 * its output onto its input (conv3d_transpose.c): y = D's data gradient (assigned, no x),
 * dw += D's filter gradient with x and dy in each other's roles, dx = D's forward. Then a
 * model with Conv3DTranspose (cpu_first lifted) trains on both backends. */
static int conv3d_transpose_case(int n, int c, int f, const int in[3], const int k[3],
                                 const int s[3], const int dil[3], int same, const int op[3])
{
    tfc_conv3d_desc d = {.n = n, .c = f, .f = c, .groups = 1};
    for (int a = 0; a < 3; a++) {
        d.k[a] = k[a], d.s[a] = s[a], d.dil[a] = dil[a], d.out[a] = in[a];
        tfc_layer_transpose_axis(in[a], k[a], s[a], dil[a], same, op[a], &d.in[a], &d.pad[a]);
    }
    const int64_t nx = (int64_t)n * in[0] * in[1] * in[2] * c;
    const int64_t ny = (int64_t)n * d.in[0] * d.in[1] * d.in[2] * f;
    const int64_t nw = (int64_t)k[0] * k[1] * k[2] * c * f;
    pair x = pair_rand(nx, -1, 1), w = pair_rand(nw, -1, 1), y = pair_rand(ny, -1, 1);
    pair dy = pair_rand(ny, -1, 1), dx = pair_rand(nx, -1, 1), dw = pair_rand(nw, -1, 1);
    size_t wr = ref->ops->conv3d_workspace(ref, &d), wd = dev->ops->conv3d_workspace(dev, &d);
    void *wsr = ref->ops->alloc(ref, wr + 4), *wsd = dev->ops->alloc(dev, wd + 4);
    int bad = 0;
    ref->ops->conv3d_backward(ref, &d, NULL, w.h, x.h, y.h, NULL, 1, wsr);
    dev->ops->conv3d_backward(dev, &d, NULL, w.d, x.d, y.d, NULL, 1, wsd);
    bad += pair_check("conv3d_transpose y", &y, 1e-4, 1e-5);
    ref->ops->conv3d_backward(ref, &d, dy.h, w.h, x.h, NULL, dw.h, 0, wsr);
    dev->ops->conv3d_backward(dev, &d, dy.d, w.d, x.d, NULL, dw.d, 0, wsd);
    bad += pair_check("conv3d_transpose dw", &dw, 1e-4, 1e-4);
    ref->ops->conv3d_forward(ref, &d, dy.h, w.h, NULL, dx.h, wsr);
    dev->ops->conv3d_forward(dev, &d, dy.d, w.d, NULL, dx.d, wsd);
    bad += pair_check("conv3d_transpose dx", &dx, 1e-4, 1e-5);
    ref->ops->free(ref, wsr);
    dev->ops->free(dev, wsd);
    pair *all[] = {&x, &w, &y, &dy, &dx, &dw};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) pair_free(all[i]);
    return bad;
}

static void test_conv3d_transpose(void)
{
    enable_layer_ops(1);
    const int one[3] = {1, 1, 1}, none[3] = {-1, -1, -1};
    /* valid, strides below, at and above the kernel */
    CU_ASSERT_EQUAL(conv3d_transpose_case(3, 4, 6, (int[]){4, 5, 3}, (int[]){2, 3, 1},
                                          (int[]){1, 2, 3}, one, 0, none), 0);
    /* same at stride 2 with output_padding (planes no tap reaches) */
    CU_ASSERT_EQUAL(conv3d_transpose_case(2, 3, 5, (int[]){3, 4, 4}, (int[]){3, 3, 2},
                                          (int[]){2, 2, 3}, one, 1, (int[]){1, 0, 2}), 0);
    /* dilation, same and valid */
    CU_ASSERT_EQUAL(conv3d_transpose_case(2, 4, 3, (int[]){4, 4, 5}, (int[]){2, 3, 2}, one,
                                          (int[]){2, 1, 2}, 1, none), 0);
    CU_ASSERT_EQUAL(conv3d_transpose_case(2, 2, 4, (int[]){3, 4, 3}, (int[]){3, 2, 2}, one,
                                          (int[]){1, 2, 2}, 0, none), 0);
    check_status();
    lift_cpu_first = 1;
    train_steps("input: {shape: [3, 3, 2, 3]}\nlayers:\n"
                "  - Conv3DTranspose: {filters: 4, kernel_size: 3, strides: 2, padding: same, "
                "activation: relu}\n"
                "  - Conv3DTranspose: {filters: 3, kernel_size: [2, 3, 2], strides: [1, 2, 3], "
                "output_padding: [0, 1, 2], use_bias: false}\n"
                "  - Conv3D: {filters: 2, kernel_size: 3, strides: 2}\n"
                "  - Flatten: {}\n  - Dense: {units: 5, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
    enable_layer_ops(0);
}

/* The 3-D poolings' ops (gpu_conv3d.cu, put in the table for this case) against the CPU,
 * bit for bit: y and the winners, dx added and assigned; max and average, valid and same
 * padding, windows overlapping and apart. Then a model with MaxPooling3D, AveragePooling3D
 * and the global ones (cpu_first lifted: the 2-D pool ops) trains on both backends. */
static int pool3d_case(tfc_pool3d_desc d, int same)
{
    for (int a = 0; a < 3; a++) {
        const int k = d.k[a], s = d.s[a], n = d.in[a];
        const int o = same ? (n + s - 1) / s : (n - k + s) / s;
        const int p = same ? ((o - 1) * s + k - n) / 2 : 0;
        d.out[a] = o, d.pad[a] = p > 0 ? p : 0;
    }
    const int64_t nx = (int64_t)d.n * d.in[0] * d.in[1] * d.in[2] * d.c;
    const int64_t ny = (int64_t)d.n * d.out[0] * d.out[1] * d.out[2] * d.c;
    pair x = pair_rand(nx, -1, 1), y = pair_new(ny), dy = pair_rand(ny, -1, 1);
    pair dx = pair_rand(nx, -1, 1), dxa = pair_rand(nx, -1, 1);
    ipair am = ipair_new(ny);
    int bad = 0;
    ref->ops->pool3d_forward(ref, &d, x.h, y.h, d.is_max ? am.h : NULL);
    dev->ops->pool3d_forward(dev, &d, x.d, y.d, d.is_max ? am.d : NULL);
    bad += pair_check("pool3d y", &y, EXACT);
    if (d.is_max) bad += ipair_check("pool3d argmax", &am);
    ref->ops->pool3d_backward(ref, &d, dy.h, am.h, dx.h, 0);
    dev->ops->pool3d_backward(dev, &d, dy.d, am.d, dx.d, 0);
    bad += pair_check("pool3d dx", &dx, EXACT);
    ref->ops->pool3d_backward(ref, &d, dy.h, am.h, dxa.h, 1);
    dev->ops->pool3d_backward(dev, &d, dy.d, am.d, dxa.d, 1);
    bad += pair_check("pool3d dx, assigned", &dxa, EXACT);
    pair *all[] = {&x, &y, &dy, &dx, &dxa};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) pair_free(all[i]);
    ipair_free(&am);
    return bad;
}

static void test_pool3d(void)
{
    enable_layer_ops(1);
    for (int is_max = 0; is_max < 2; is_max++) {
        CU_ASSERT_EQUAL(pool3d_case((tfc_pool3d_desc){.n = 3, .c = 5, .is_max = is_max,
                                                      .in = {6, 7, 5}, .k = {2, 2, 2},
                                                      .s = {2, 2, 2}}, 0), 0);
        CU_ASSERT_EQUAL(pool3d_case((tfc_pool3d_desc){.n = 2, .c = 4, .is_max = is_max,
                                                      .in = {7, 6, 9}, .k = {3, 2, 3},
                                                      .s = {1, 2, 2}}, 1), 0);
        CU_ASSERT_EQUAL(pool3d_case((tfc_pool3d_desc){.n = 2, .c = 3, .is_max = is_max,
                                                      .in = {5, 8, 6}, .k = {2, 3, 4},
                                                      .s = {3, 1, 2}}, 1), 0);
    }
    check_status();
    lift_cpu_first = 1;
    train_steps("input: {shape: [6, 6, 5, 2]}\nlayers:\n"
                "  - Conv3D: {filters: 4, kernel_size: 3, padding: same, activation: tanh}\n"
                "  - MaxPooling3D: {pool_size: [2, 3, 2], strides: [1, 2, 1], padding: same}\n"
                "  - AveragePooling3D: {pool_size: 2, padding: same}\n"
                "  - GlobalMaxPooling3D: {name: gm, keepdims: true}\n"
                "  - GlobalAveragePooling3D: {name: ga, inputs: max_pooling3d}\n"
                "  - Flatten: {inputs: gm}\n  - Concatenate: {inputs: [flatten, ga]}\n"
                "  - Dense: {units: 5, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
    enable_layer_ops(0);
}

/* The adaptive poolings' ops (gpu_adaptive_pool.cu, put in the table for this case) against
 * the CPU, bit for bit: y and the winners, dx added and assigned; max and average, bins
 * overlapping, cells repeated (out > in), even bins, ties (inputs from {0, 1/2, 1}). Then a
 * model with AdaptiveMaxPooling1D/2D/3D and AdaptiveAveragePooling1D/2D/3D trains on both
 * backends. */
static int adaptive_pool_case(tfc_adaptive_pool_desc d, int ties)
{
    const int64_t nx = (int64_t)d.n * d.in[0] * d.in[1] * d.in[2] * d.c;
    const int64_t ny = (int64_t)d.n * d.out[0] * d.out[1] * d.out[2] * d.c;
    pair x = pair_rand(nx, -1, 1), y = pair_new(ny), dy = pair_rand(ny, -1, 1);
    pair dx = pair_rand(nx, -1, 1), dxa = pair_rand(nx, -1, 1);
    ipair am = ipair_new(ny);
    if (ties) {
        for (int64_t i = 0; i < nx; i++) x.h[i] = floorf((x.h[i] + 1.0f) * 1.5f) / 2.0f;
        pair_push(&x);
    }
    int bad = 0;
    ref->ops->adaptive_pool_forward(ref, &d, x.h, y.h, d.is_max ? am.h : NULL);
    dev->ops->adaptive_pool_forward(dev, &d, x.d, y.d, d.is_max ? am.d : NULL);
    bad += pair_check("adaptive_pool y", &y, EXACT);
    if (d.is_max) bad += ipair_check("adaptive_pool argmax", &am);
    ref->ops->adaptive_pool_backward(ref, &d, dy.h, am.h, dx.h, 0);
    dev->ops->adaptive_pool_backward(dev, &d, dy.d, am.d, dx.d, 0);
    bad += pair_check("adaptive_pool dx", &dx, EXACT);
    ref->ops->adaptive_pool_backward(ref, &d, dy.h, am.h, dxa.h, 1);
    dev->ops->adaptive_pool_backward(dev, &d, dy.d, am.d, dxa.d, 1);
    bad += pair_check("adaptive_pool dx, assigned", &dxa, EXACT);
    pair *all[] = {&x, &y, &dy, &dx, &dxa};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) pair_free(all[i]);
    ipair_free(&am);
    return bad;
}

static void test_adaptive_pool(void)
{
    enable_layer_ops(1);
    for (int is_max = 0; is_max < 2; is_max++) {
        CU_ASSERT_EQUAL(adaptive_pool_case((tfc_adaptive_pool_desc){
                            .n = 3, .c = 5, .is_max = is_max, .in = {7, 9, 6}, .out = {3, 4, 4}},
                                           0), 0);
        CU_ASSERT_EQUAL(adaptive_pool_case((tfc_adaptive_pool_desc){
                            .n = 2, .c = 3, .is_max = is_max, .in = {3, 2, 7}, .out = {5, 5, 2}},
                                           is_max), 0);
        CU_ASSERT_EQUAL(adaptive_pool_case((tfc_adaptive_pool_desc){
                            .n = 4, .c = 16, .is_max = is_max, .in = {1, 32, 32}, .out = {1, 7, 8}},
                                           0), 0);
        CU_ASSERT_EQUAL(adaptive_pool_case((tfc_adaptive_pool_desc){
                            .n = 5, .c = 2, .is_max = is_max, .in = {1, 1, 50}, .out = {1, 1, 13}},
                                           is_max), 0);
    }
    check_status();
    train_steps("input: {shape: [6, 8, 2]}\nlayers:\n"
                "  - Conv2D: {name: c, filters: 4, kernel_size: 3, padding: same, "
                "activation: tanh}\n"
                "  - AdaptiveMaxPooling2D: {name: m2, output_size: [4, 3]}\n"
                "  - AdaptiveAveragePooling2D: {name: a2, output_size: [9, 2], inputs: c}\n"
                "  - Reshape: {name: s, target_shape: [48, 4], inputs: c}\n"
                "  - AdaptiveMaxPooling1D: {name: m1, output_size: 10}\n"
                "  - AdaptiveAveragePooling1D: {name: a1, output_size: 5, inputs: s}\n"
                "  - Reshape: {name: v, target_shape: [6, 4, 2, 4], inputs: c}\n"
                "  - AdaptiveMaxPooling3D: {name: m3, output_size: [4, 3, 1]}\n"
                "  - AdaptiveAveragePooling3D: {name: a3, output_size: 2, inputs: v}\n"
                "  - Flatten: {name: f1, inputs: m2}\n  - Flatten: {name: f2, inputs: a2}\n"
                "  - Flatten: {name: f3, inputs: m1}\n  - Flatten: {name: f4, inputs: a1}\n"
                "  - Flatten: {name: f5, inputs: m3}\n  - Flatten: {name: f6, inputs: a3}\n"
                "  - Concatenate: {inputs: [f1, f2, f3, f4, f5, f6]}\n"
                "  - Dense: {units: 5, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    enable_layer_ops(0);
}

static void test_extremum(void)
{
    enable_layer_ops(1);
    CU_ASSERT_EQUAL(extremum_case(1000, 37, 2, 0, 0, 0), 0);  /* Maximum of two */
    CU_ASSERT_EQUAL(extremum_case(333, 64, 5, 1, 0, 0), 0);   /* Minimum of five */
    CU_ASSERT_EQUAL(extremum_case(8 * 50, 9, 3, 0, 7, 1), 0); /* every input masked */
    CU_ASSERT_EQUAL(extremum_case(8 * 50, 9, 4, 1, 5, 1), 0); /* some masked */
    CU_ASSERT_EQUAL(extremum_case(8 * 50, 9, 8, 0, 0xaa, 1), 0); /* the first unmasked */
    check_status();
    train_steps("input: {shape: [6, 6, 2]}\nlayers:\n"
                "  - Conv2D: {name: a, filters: 4, kernel_size: 3, padding: same}\n"
                "  - Conv2D: {name: b, filters: 4, kernel_size: 3, padding: same, inputs: input}\n"
                "  - Activation: {name: r, activation: relu, inputs: b}\n"
                "  - Maximum: {name: m, inputs: [a, r, b]}\n"
                "  - Minimum: {inputs: [m, a]}\n"
                "  - Flatten: {}\n  - Dense: {units: 5, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    train_steps("input: {shape: [7], dtype: int32}\nlayers:\n"
                "  - Embedding: {name: e, input_dim: 20, output_dim: 6, mask_zero: true}\n"
                "  - Dense: {name: a, units: 6, activation: tanh}\n"
                "  - Maximum: {name: m, inputs: [a, e]}\n"
                "  - Conv1D: {name: c, filters: 6, kernel_size: 3, padding: same, inputs: e}\n"
                "  - Minimum: {inputs: [m, c]}\n"
                "  - GlobalAveragePooling1D: {}\n  - Dense: {units: 4, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 1, 1, 5e-4, 1e-5);
    enable_layer_ops(0);
}

/* Dot (CPU-first, lifted here; the permute and l2norm kernels put in the table): the GPU's
 * gemm per example with each kind of operand (in place, transposed, permuted) and normalize,
 * training steps on both backends */
static void test_dot(void)
{
    enable_layer_ops(1);
    lift_cpu_first = 1;
    train_steps("input: {shape: [6, 4]}\nlayers:\n"
                "  - Dense: {name: q, units: 5, activation: tanh}\n"
                "  - Dense: {name: k, units: 5, inputs: input}\n"
                "  - Dot: {name: s, axes: 2, inputs: [q, k]}\n"
                "  - Dot: {name: t, axes: [1, 1], normalize: true, inputs: [q, input]}\n"
                "  - Flatten: {name: f, inputs: input}\n  - Dense: {name: v, units: 5}\n"
                "  - Dot: {name: u, axes: [1, 2], inputs: [v, k]}\n"
                "  - Dot: {name: c, axes: 1, normalize: true, inputs: [v, v]}\n"
                "  - Flatten: {name: fs, inputs: s}\n  - Flatten: {name: ft, inputs: t}\n"
                "  - Concatenate: {inputs: [fs, ft, u, c]}\n"
                "  - Dense: {units: 3, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    train_steps("input: {shape: [3, 4, 2]}\nlayers:\n"
                "  - Dense: {name: a, units: 2, activation: tanh}\n"
                "  - Dot: {name: m, axes: 2, inputs: [a, input]}\n"
                "  - Dot: {name: n, axes: [2, 2], normalize: true, inputs: [input, a]}\n"
                "  - Flatten: {name: fm, inputs: m}\n  - Flatten: {name: fn, inputs: n}\n"
                "  - Concatenate: {inputs: [fm, fn]}\n"
                "  - Dense: {units: 3, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
    enable_layer_ops(0);
}

/* EinsumDense (CPU-first, lifted here; the permute kernel put in the table): the GPU's gemms
 * on each layout (the MHA projections with a bias broadcast over the last axis, '...' in
 * front and at the end, a shared letter, a kernel read transposed and one permuted, a letter
 * summed away), training steps on both backends */
static void test_einsum_dense(void)
{
    enable_layer_ops(1);
    lift_cpu_first = 1;
    train_steps("input: {shape: [6, 8]}\nlayers:\n"
                "  - EinsumDense: {equation: \"abc,cde->abde\", output_shape: [null, 2, 4], "
                "bias_axes: d}\n"
                "  - EinsumDense: {equation: \"abde,deg->abg\", output_shape: [null, 5], "
                "bias_axes: g, activation: tanh}\n"
                "  - EinsumDense: {equation: \"...b,bc->...c\", output_shape: 4, bias_axes: c}\n"
                "  - EinsumDense: {equation: \"ab...,bc->ac...\", output_shape: 3, "
                "bias_axes: c}\n"
                "  - EinsumDense: {equation: \"abc,bcd->abd\", output_shape: [3, 4], "
                "bias_axes: bd, activation: tanh}\n"
                "  - EinsumDense: {equation: \"abc,dc->abd\", output_shape: [3, 5]}\n"
                "  - EinsumDense: {equation: \"abc,cdb->adb\", output_shape: [2, 3], "
                "bias_axes: b}\n"
                "  - EinsumDense: {equation: \"abc,dc->ad\", output_shape: 4, bias_axes: d}\n"
                "  - Dense: {units: 3, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
    enable_layer_ops(0);
}

/* ZeroPadding3D, Cropping3D and UpSampling3D (CPU-first, lifted here): copy2d and the
 * upsample op (its depth pass an image of one wide pixel a row) on the GPU; training steps
 * of a small volume model on both backends */
static void test_train_volume(void)
{
    lift_cpu_first = 1;
    train_steps("input: {shape: [3, 4, 3, 2]}\nlayers:\n"
                "  - ZeroPadding3D: {padding: [[1, 0], 1, [0, 2]]}\n"
                "  - Dense: {units: 4, activation: tanh}\n"
                "  - UpSampling3D: {size: [2, 1, 2]}\n"
                "  - Cropping3D: {cropping: [[1, 2], [0, 1], 2]}\n"
                "  - UpSampling3D: {size: [1, 2, 1]}\n"
                "  - Flatten: {}\n  - Dense: {units: 3, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
}

/* ConvLSTM2D and ConvLSTM1D (CPU-first, lifted here): the convolution ops over T n images and n states per
 * step, copy2d, act_forward/backward, mul and dropout on the GPU; training steps of a model
 * with one over every step (same padding, dropout) into one going backwards (strides 2,
 * valid) on both backends, one with recurrent_dropout, and a ConvLSTM1D; then a ConvLSTM3D
 * model (the conv3d ops, put in the table for it, and add): one over every step (same
 * padding, an even kernel, dropout) into one going backwards (strides (2, 1, 1), valid,
 * recurrent_dropout) */
static void test_train_conv_lstm(void)
{
    lift_cpu_first = 1;
    train_steps("input: {shape: [3, 6, 6, 2]}\nlayers:\n"
                "  - ConvLSTM2D: {filters: 3, kernel_size: 3, padding: same, "
                "return_sequences: true, dropout: 0.25}\n"
                "  - ConvLSTM2D: {filters: 2, kernel_size: [2, 3], strides: 2, "
                "go_backwards: true, use_bias: false}\n"
                "  - Flatten: {}\n  - Dense: {units: 3, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    /* recurrent_dropout: each gate's recurrent convolution (one gate's filters) over the
     * state under its own mask */
    train_steps("input: {shape: [3, 5, 5, 2]}\nlayers:\n"
                "  - ConvLSTM2D: {filters: 3, kernel_size: 3, padding: same, "
                "return_sequences: true, recurrent_dropout: 0.3}\n"
                "  - ConvLSTM2D: {filters: 2, kernel_size: 2, dropout: 0.2, "
                "recurrent_dropout: 0.4, go_backwards: true}\n"
                "  - Flatten: {}\n  - Dense: {units: 3, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    train_steps("input: {shape: [4, 9, 2]}\nlayers:\n"
                "  - ConvLSTM1D: {filters: 3, kernel_size: 3, strides: 2, go_backwards: true}\n"
                "  - Flatten: {}\n  - Dense: {units: 3, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    /* other activations: the gates' pre-activations kept, their derivatives from them */
    train_steps("input: {shape: [3, 5, 5, 2]}\nlayers:\n"
                "  - ConvLSTM2D: {filters: 3, kernel_size: 3, padding: same, activation: relu, "
                "recurrent_activation: hard_sigmoid, return_sequences: true}\n"
                "  - ConvLSTM2D: {filters: 2, kernel_size: 3, activation: gelu}\n"
                "  - Flatten: {}\n  - Dense: {units: 3, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    enable_layer_ops(1);
    train_steps("input: {shape: [3, 3, 5, 4, 2]}\nlayers:\n"
                "  - ConvLSTM3D: {filters: 3, kernel_size: [2, 3, 1], padding: same, "
                "return_sequences: true, dropout: 0.25}\n"
                "  - ConvLSTM3D: {filters: 2, kernel_size: [2, 2, 3], strides: [2, 1, 1], "
                "go_backwards: true, recurrent_dropout: 0.3}\n"
                "  - Flatten: {}\n  - Dense: {units: 3, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    enable_layer_ops(0);
    lift_cpu_first = 0;
}

/* LayerScale (CPU-first, lifted here): the Multiply ops mul (a broadcast factor) and
 * mul_reduce on the GPU; training steps of ConvNeXt's block end (a pointwise Dense, then
 * LayerScale) on an image and of one on a vector, on both backends */
static void test_train_layer_scale(void)
{
    lift_cpu_first = 1;
    train_steps("input: {shape: [4, 4, 6]}\nlayers:\n"
                "  - LayerScale: {init_values: 0.5, projection_dim: 6}\n"
                "  - Dense: {units: 8, activation: gelu}\n"
                "  - LayerScale: {init_values: 1.0e-6, projection_dim: 8}\n"
                "  - Flatten: {}\n  - Dense: {units: 3}\n"
                "  - LayerScale: {init_values: 2, projection_dim: 3}\n"
                "  - Activation: {activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
}

/* CustomScaleLayer (CPU-first, lifted here; on copy and axpy, in the GPU's table): training
 * steps of Inception-ResNet's join of a convolution's input and its branch, then of two Dense
 * branches under a negative scale, on both backends */
static void test_train_custom_scale(void)
{
    lift_cpu_first = 1;
    train_steps("input: {shape: [4, 4, 6]}\nlayers:\n"
                "  - Conv2D: {name: b, filters: 6, kernel_size: 3, padding: same}\n"
                "  - CustomScaleLayer: {scale: 0.17, inputs: [input, b]}\n"
                "  - Activation: {activation: relu}\n"
                "  - Flatten: {name: f}\n  - Dense: {name: c, units: 5}\n"
                "  - Dense: {name: e, units: 5, inputs: f}\n"
                "  - CustomScaleLayer: {scale: -1.5, inputs: [c, e]}\n"
                "  - Dense: {units: 3, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
}

/* RNN with a cell (CPU-first, lifted here): its cells' kernels (the LSTM's, the GRU's and
 * the SimpleRNN's, enabled here), rnn_input and mul on the GPU; training steps of an RNN of a
 * StackedRNNCells going backwards under a mask with zero_output_for_mask, into a
 * Bidirectional around an RNN of an LSTMCell, on both backends */
static void test_train_rnn_cell(void)
{
    enable_layer_ops(1);
    lift_cpu_first = 1;
    train_steps("input: {shape: [7], dtype: int32}\nlayers:\n"
                "  - Embedding: {input_dim: 20, output_dim: 6, mask_zero: true}\n"
                "  - RNN: {cell: {StackedRNNCells: {cells: [{GRUCell: {units: 5}}, "
                "{SimpleRNNCell: {units: 4}}, {LSTMCell: {units: 4}}]}}, go_backwards: true, "
                "return_sequences: true, zero_output_for_mask: true}\n"
                "  - Bidirectional: {layer: {RNN: {cell: {LSTMCell: {units: 3}}}}}\n"
                "  - Dense: {units: 4, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\nmetrics: [accuracy]\n",
                8, 1, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
    enable_layer_ops(0);
}

/* lse compared as the contract has it: +-inf exactly, finite values within rtol, atol. */
static int lse_check(const pair *p, double rtol, double atol)
{
    float *got = fetch(dev, p->d, p->n);
    int bad = 0;
    for (int64_t i = 0; i < p->n; i++) {
        const float g = got[i], w = p->h[i];
        const int ok = isinf(w) || isinf(g) ? g == w : fabs(g - w) <= atol + rtol * fabs(w);
        if (!ok && bad++ < 4) printf("\n  lse[%lld]: device %.9g, cpu %.9g", (long long)i, g, w);
    }
    free(got);
    return bad;
}

/* Attention on both backends: o and lse, then the gradients from the reference's o and lse;
 * masks (qmask, kmask) with example 0's keys all masked (every row of it sees none); the
 * device's backward twice gives the same bits. */
static int attention_case(const char *name, tfc_attn_desc d, int masks)
{
    const int64_t nq = (int64_t)d.n * d.tq * d.heads, nk = (int64_t)d.n * d.tk * d.heads;
    pair q = pair_rand(nq * d.dk, -1, 1), k = pair_rand(nk * d.dk, -1, 1);
    pair v = pair_rand(nk * d.dv, -1, 1), o = pair_new(nq * d.dv), lse = pair_new(nq);
    pair dout = pair_rand(nq * d.dv, -1, 1), dq = pair_rand(nq * d.dk, -1, 1);
    pair dk = pair_rand(nk * d.dk, -1, 1), dv = pair_rand(nk * d.dv, -1, 1);
    pair qm = pair_new((int64_t)d.n * d.tq), km = pair_new((int64_t)d.n * d.tk);
    for (int64_t i = 0; i < qm.n; i++) qm.h[i] = urand() < 0.8 ? 1.0f : 0.0f;
    for (int64_t i = 0; i < km.n; i++) km.h[i] = i >= d.tk && urand() < 0.7 ? 1.0f : 0.0f;
    pair_push(&qm), pair_push(&km);
    tfc_attn_desc dh = d, dd = d;
    if (masks) dh.qmask = qm.h, dh.kmask = km.h, dd.qmask = qm.d, dd.kmask = km.d;
    char what[96];
    int bad = 0;
    ref->ops->attention_forward(ref, &dh, q.h, k.h, v.h, o.h, lse.h);
    dev->ops->attention_forward(dev, &dd, q.d, k.d, v.d, o.d, lse.d);
    snprintf(what, sizeof what, "%s o", name);
    bad += pair_check(what, &o, SUM);
    bad += lse_check(&lse, 1e-5, 1e-5);
    pair_push(&o), pair_push(&lse);
    ref->ops->attention_backward(ref, &dh, q.h, k.h, v.h, o.h, lse.h, dout.h, dq.h, dk.h, dv.h);
    dev->ops->attention_backward(dev, &dd, q.d, k.d, v.d, o.d, lse.d, dout.d, dq.d, dk.d, dv.d);
    snprintf(what, sizeof what, "%s dq", name);
    bad += pair_check(what, &dq, SUM);
    snprintf(what, sizeof what, "%s dk", name);
    bad += pair_check(what, &dk, SUM);
    snprintf(what, sizeof what, "%s dv", name);
    bad += pair_check(what, &dv, SUM);
    float *first = fetch(dev, dk.d, dk.n);
    dev->ops->attention_backward(dev, &dd, q.d, k.d, v.d, o.d, lse.d, dout.d, dq.d, dk.d, dv.d);
    snprintf(what, sizeof what, "%s dk repeated", name);
    float *again = fetch(dev, dk.d, dk.n);
    bad += compare_floats(what, again, first, dk.n, EXACT);
    free(first), free(again);
    pair *all[] = {&q, &k, &v, &o, &lse, &dout, &dq, &dk, &dv, &qm, &km};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) pair_free(all[i]);
    return bad;
}

/* Every case twice: with the splits the kernels choose (on a large GPU the small cases split
 * their walks over several blocks, gpu_attention.cu's split_of) and with none. */
static void attention_cases(void)
{
    const float s4 = 0.5f, s5 = 0.4472136f;
    tfc_attn_desc base = {.n = 2, .heads = 1, .tq = 37, .tk = 37, .dk = 4, .dv = 4, .scale = s4};
    CU_ASSERT_EQUAL(attention_case("attn", base, 0), 0);
    tfc_attn_desc causal = {.n = 3, .heads = 3, .tq = 71, .tk = 71, .dk = 5, .dv = 7,
                            .causal = 1, .uniform = 1, .scale = s5};
    CU_ASSERT_EQUAL(attention_case("attn causal", causal, 0), 0);
    CU_ASSERT_EQUAL(attention_case("attn causal masked", causal, 1), 0);
    tfc_attn_desc cross = {.n = 2, .heads = 3, .tq = 9, .tk = 45, .dk = 33, .dv = 40,
                           .uniform = 1, .scale = 0.17f};
    CU_ASSERT_EQUAL(attention_case("attn cross masked", cross, 1), 0);
    cross.uniform = 0;
    CU_ASSERT_EQUAL(attention_case("attn cross masked, zero rows", cross, 1), 0);
    tfc_attn_desc wide = {.n = 2, .heads = 2, .tq = 130, .tk = 97, .dk = 64, .dv = 200,
                          .causal = 1, .uniform = 1, .scale = 0.125f};
    CU_ASSERT_EQUAL(attention_case("attn wide heads, tq > tk", wide, 1), 0);
    tfc_attn_desc widest = {.n = 2, .heads = 1, .tq = 40, .tk = 33, .dk = 256, .dv = 256,
                            .uniform = 1, .scale = 0.0625f}; /* over 48 KiB of shared memory */
    CU_ASSERT_EQUAL(attention_case("attn head size 256", widest, 1), 0);
    tfc_attn_desc window = {.n = 2, .heads = 2, .tq = 100, .tk = 100, .dk = 8, .dv = 8,
                            .window = 9, .uniform = 1, .scale = 0.35f};
    CU_ASSERT_EQUAL(attention_case("attn window", window, 1), 0);
    tfc_attn_desc drop = {.n = 2, .heads = 3, .tq = 50, .tk = 50, .dk = 6, .dv = 6, .causal = 1,
                          .scale = 0.4f, .rate = 0.3f, .key = 77, .step = 5};
    CU_ASSERT_EQUAL(attention_case("attn dropout", drop, 1), 0);
    /* The register-tiled kernels (head sizes up to 64) over more than one 64-row tile: a
     * GPT's heads of 32 (tiles cut at 200), key_dim != value_dim of 48 and 40 with a window
     * and tq > tk, heads of 64 with dropout. The cases above run them too, on one tile or
     * two; value_dim 200 and the heads of 256 run the warp-per-row kernels. */
    tfc_attn_desc gpt = {.n = 2, .heads = 4, .tq = 200, .tk = 200, .dk = 32, .dv = 32,
                         .causal = 1, .uniform = 1, .scale = 0.17677670f};
    CU_ASSERT_EQUAL(attention_case("attn gpt heads", gpt, 0), 0);
    CU_ASSERT_EQUAL(attention_case("attn gpt heads masked", gpt, 1), 0);
    tfc_attn_desc mixed = {.n = 2, .heads = 2, .tq = 150, .tk = 130, .dk = 48, .dv = 40,
                           .window = 30, .uniform = 1, .scale = 0.144f};
    CU_ASSERT_EQUAL(attention_case("attn 48/40 window", mixed, 1), 0);
    tfc_attn_desc d64 = {.n = 2, .heads = 2, .tq = 129, .tk = 129, .dk = 64, .dv = 64,
                         .causal = 1, .scale = 0.125f, .rate = 0.2f, .key = 9, .step = 3};
    CU_ASSERT_EQUAL(attention_case("attn heads of 64, dropout", d64, 1), 0);
}

static void test_attention(void)
{
    attention_cases();
    set_attention_no_split(1);
    attention_cases();
    set_attention_no_split(0);
    check_status();
}

static void test_mul_masking(void)
{
    const int64_t groups = 3, rows = 1001;
    const int cols = 37;
    const int64_t n = groups * rows * cols;
    pair a = pair_rand(n, -1, 1), b = pair_rand(n, -1, 1), bb = pair_rand(groups * cols, -1, 1);
    pair y = pair_rand(n, -1, 1), db = pair_rand(groups * cols, -1, 1);
    ref->ops->mul(ref, groups, rows, cols, a.h, b.h, 0, y.h, 1);
    dev->ops->mul(dev, groups, rows, cols, a.d, b.d, 0, y.d, 1);
    CU_ASSERT_EQUAL(pair_check("mul accumulate", &y, F32), 0);
    ref->ops->mul(ref, groups, rows, cols, a.h, bb.h, 1, y.h, 0);
    dev->ops->mul(dev, groups, rows, cols, a.d, bb.d, 1, y.d, 0);
    CU_ASSERT_EQUAL(pair_check("mul broadcast", &y, EXACT), 0);
    ref->ops->mul_reduce(ref, groups, rows, cols, a.h, b.h, db.h);
    dev->ops->mul_reduce(dev, groups, rows, cols, a.d, b.d, db.d);
    CU_ASSERT_EQUAL(pair_check("mul_reduce", &db, SUM), 0);
    /* Masking: rows of the mask value (some with a NaN, which is real) */
    const int64_t mrows = 203;
    const int mcols = 45;
    pair x = pair_rand(mrows * mcols, -1, 1), my = pair_new(mrows * mcols);
    pair mdy = pair_rand(mrows * mcols, -1, 1), mdx = pair_rand(mrows * mcols, -1, 1);
    for (int64_t r = 0; r < mrows; r++) {
        if (r % 3 == 0)
            for (int c = 0; c < mcols; c++) x.h[r * mcols + c] = 0.5f;
        if (r % 7 == 0) x.h[r * mcols + mcols - 1] = NAN;
    }
    pair_push(&x);
    ref->ops->masking_forward(ref, mrows, mcols, 0.5f, x.h, my.h);
    dev->ops->masking_forward(dev, mrows, mcols, 0.5f, x.d, my.d);
    CU_ASSERT_EQUAL(pair_check("masking y", &my, EXACT), 0);
    ref->ops->masking_backward(ref, mrows, mcols, 0.5f, x.h, mdy.h, mdx.h);
    dev->ops->masking_backward(dev, mrows, mcols, 0.5f, x.d, mdy.d, mdx.d);
    CU_ASSERT_EQUAL(pair_check("masking dx", &mdx, EXACT), 0);
    pair *all[] = {&a, &b, &bb, &y, &db, &x, &my, &mdy, &mdx};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) pair_free(all[i]);
    check_status();
}

/* The parametrised activations (gpu_pact.cu, put in the table for this case) against the
 * CPU: every branch of Keras's relu (threshold, clip, slope, leaky), elu with alpha, over
 * inputs in [-3, 3] with exact zeros and thresholds among them; forward and the products of
 * backward bit for bit, elu's expm1/exp within float rounding; PReLU's dx bit for bit and
 * its alpha gradient (double column sums, the order differing) within SUM, on wide and
 * narrow columns. Then a model with each layer trains on both backends. */
static void test_pact(void)
{
    enable_layer_ops(1);
    const tfc_pact_desc descs[] = {
        {0, 0.1f, 1.5f, 0.25f}, {0, 0.3f, INFINITY, 0}, {0, 0, 2.0f, 0}, {0, 0, INFINITY, 0.5f},
        {0, 0.05f, 1.0f, 0}, {1, 0.7f, INFINITY, 0}, {1, 1.0f, INFINITY, 0}};
    const int64_t n = 100003;
    pair x = pair_rand(n, -3, 3), y = pair_new(n), dy = pair_rand(n, -1, 1);
    for (int64_t i = 0; i < n; i += 97) x.h[i] = i % 2 ? 0.0f : 0.5f; /* on the kinks */
    pair_push(&x);
    for (size_t k = 0; k < sizeof descs / sizeof *descs; k++) {
        pair dx = pair_rand(n, -1, 1);
        ref->ops->pact_forward(ref, &descs[k], n, x.h, y.h);
        dev->ops->pact_forward(dev, &descs[k], n, x.d, y.d);
        ref->ops->pact_backward(ref, &descs[k], n, x.h, dy.h, dx.h);
        dev->ops->pact_backward(dev, &descs[k], n, x.d, dy.d, dx.d);
        const int elu = descs[k].elu;
        int bad = elu ? pair_check("pact y", &y, F32) : pair_check("pact y", &y, EXACT);
        bad += elu ? pair_check("pact dx", &dx, F32) : pair_check("pact dx", &dx, EXACT);
        if (bad) printf("\n  pact desc %zu", k);
        CU_ASSERT_EQUAL(bad, 0);
        pair_free(&dx);
    }
    static const int64_t shapes[][2] = {{128, 784}, {4096, 16}, {37, 5}, {20000, 3}};
    for (int s = 0; s < 4; s++) {
        const int64_t rows = shapes[s][0], cols = shapes[s][1], m = rows * cols;
        pair px = pair_rand(m, -2, 2), py = pair_new(m), pdy = pair_rand(m, -1, 1);
        pair pdx = pair_rand(m, -1, 1), alpha = pair_rand(cols, -0.5, 0.5);
        pair da = pair_rand(cols, -1, 1);
        ref->ops->prelu_forward(ref, rows, (int)cols, px.h, alpha.h, py.h);
        dev->ops->prelu_forward(dev, rows, (int)cols, px.d, alpha.d, py.d);
        ref->ops->prelu_backward(ref, rows, (int)cols, px.h, alpha.h, pdy.h, pdx.h, da.h);
        dev->ops->prelu_backward(dev, rows, (int)cols, px.d, alpha.d, pdy.d, pdx.d, da.d);
        int bad = pair_check("prelu y", &py, EXACT) + pair_check("prelu dx", &pdx, EXACT) +
                  pair_check("prelu dalpha", &da, SUM);
        /* without dx (the layer after the model input) */
        ref->ops->prelu_backward(ref, rows, (int)cols, px.h, alpha.h, pdy.h, NULL, da.h);
        dev->ops->prelu_backward(dev, rows, (int)cols, px.d, alpha.d, pdy.d, NULL, da.d);
        bad += pair_check("prelu dalpha again", &da, SUM);
        if (bad) printf("\n  prelu %lld x %lld", (long long)rows, (long long)cols);
        CU_ASSERT_EQUAL(bad, 0);
        pair *all[] = {&px, &py, &pdy, &pdx, &alpha, &da};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) pair_free(all[i]);
    }
    pair_free(&x), pair_free(&y), pair_free(&dy);
    check_status();
    train_steps("input: {shape: [6, 6, 2]}\nlayers:\n"
                "  - Conv2D: {filters: 4, kernel_size: 3, padding: same}\n"
                "  - PReLU: {shared_axes: [1, 2], alpha_initializer: {type: constant, value: 0.2}}\n"
                "  - Conv2D: {filters: 4, kernel_size: 3}\n"
                "  - ReLU: {max_value: 1.5, negative_slope: 0.1, threshold: 0.05}\n"
                "  - Flatten: {}\n  - Dense: {units: 8}\n  - LeakyReLU: {}\n"
                "  - Dense: {units: 8}\n  - ELU: {alpha: 0.7}\n"
                "  - Dense: {units: 8}\n  - PReLU: {alpha_initializer: random_uniform}\n"
                "  - Dense: {units: 5, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\nmetrics: [accuracy]\n",
                8, 0, 1, 5e-4, 1e-5);
    enable_layer_ops(0);
}

/* The weight regularizers' penalty (gpu_elementwise.cu, put in the table for this case)
 * against the CPU: the sum added to a loss scalar within the sum tolerance (both in double,
 * in other orders), the gradient added bit for bit; L1, L2 and both, on weights with zeros,
 * from 1 to 1,000,003 of them. Then four training steps of a model with a regularizer on
 * each kind of weight (the penalties in the losses compared, their gradients in the
 * weights'), and of a model with activity regularizers. */
static void test_penalty(void)
{
    enable_layer_ops(1);
    static const float f[][2] = {{0.01f, 0}, {0, 0.02f}, {1e-3f, 5e-3f}};
    static const int64_t sizes[] = {1, 37, 4099, 1000003};
    for (int k = 0; k < 3; k++)
        for (int z = 0; z < 4; z++) {
            const int64_t n = sizes[z];
            pair w = pair_rand(n, -2, 2), g = pair_rand(n, -1, 1), loss = pair_rand(1, 1, 2);
            for (int64_t i = 0; i < n; i += 7) w.h[i] = 0;
            pair_push(&w);
            ref->ops->penalty(ref, n, f[k][0], f[k][1], w.h, loss.h, g.h);
            dev->ops->penalty(dev, n, f[k][0], f[k][1], w.d, loss.d, g.d);
            int bad = pair_check("penalty loss", &loss, SUM) + pair_check("penalty grad", &g, EXACT);
            ref->ops->penalty(ref, n, f[k][0], f[k][1], w.h, NULL, g.h); /* gradient alone */
            dev->ops->penalty(dev, n, f[k][0], f[k][1], w.d, NULL, g.d);
            bad += pair_check("penalty grad again", &g, EXACT);
            if (bad) printf("\n  penalty l1 %g l2 %g n %lld", f[k][0], f[k][1], (long long)n);
            CU_ASSERT_EQUAL(bad, 0);
            pair_free(&w), pair_free(&g), pair_free(&loss);
        }
    check_status();
    train_steps("input: {shape: [6, 6, 2]}\nlayers:\n"
                "  - Conv2D: {filters: 4, kernel_size: 3, padding: same, kernel_regularizer: "
                "{type: l1l2, l1: 0.001, l2: 0.01}, bias_regularizer: {l2: 0.1}}\n"
                "  - BatchNormalization: {gamma_regularizer: {l2: 0.05}, beta_regularizer: l1}\n"
                "  - DepthwiseConv2D: {kernel_size: 3, depthwise_regularizer: l2}\n"
                "  - Flatten: {}\n  - Dense: {units: 8, kernel_regularizer: L2}\n"
                "  - PReLU: {alpha_regularizer: {l2: 0.2}}\n"
                "  - Dense: {units: 5, activation: softmax, kernel_regularizer: l1}\n"
                "loss: sparse_categorical_crossentropy\nmetrics: [accuracy]\n",
                8, 0, 1, 5e-4, 1e-5);
    train_steps("input: {shape: [7], dtype: int32}\nlayers:\n"
                "  - Embedding: {input_dim: 20, output_dim: 6, mask_zero: true, "
                "embeddings_regularizer: {l2: 0.05}}\n"
                "  - LSTM: {units: 5, return_sequences: true, kernel_regularizer: l2, "
                "recurrent_regularizer: {type: l1, l1: 0.002}}\n"
                "  - GlobalAveragePooling1D: {}\n"
                "  - Dense: {units: 4, activation: softmax, bias_regularizer: {l2: 0.5}}\n"
                "loss: sparse_categorical_crossentropy\nmetrics: [accuracy]\n",
                8, 1, 1, 5e-4, 1e-5);
    /* activity regularizers: the penalty of outputs (a ReLU convolution's, a softmax the
     * loss folds) in the loss, their gradients into the outputs' */
    train_steps("input: {shape: [6, 6, 2]}\nlayers:\n"
                "  - Conv2D: {filters: 4, kernel_size: 3, activation: relu, "
                "activity_regularizer: {l2: 0.05}}\n"
                "  - ActivityRegularization: {l1: 0.01, l2: 0.01}\n  - Flatten: {}\n"
                "  - Dense: {units: 8, activation: tanh, activity_regularizer: l1}\n"
                "  - Dense: {units: 5, activation: softmax, activity_regularizer: {l2: 0.2}}\n"
                "loss: sparse_categorical_crossentropy\nmetrics: [accuracy]\n",
                8, 0, 1, 5e-4, 1e-5);
    enable_layer_ops(0);
}

/* The weight constraints' kernel (gpu_elementwise.cu's constrain, put in the table for this
 * case) against the CPU within float rounding (both sum each norm in double in the same
 * order): every kind, norms over a leading and a trailing run, from one weight to 1,000,003,
 * norms below and above the bounds. */
static void test_constrain(void)
{
    enable_layer_ops(1);
    static const int64_t shapes[][3] = {{1, 1, 1}, {1, 37, 5}, {7, 19, 1}, {1, 4099, 67},
                                        {1000003, 1, 1}, {5, 200003, 1}};
    for (int kind = TFC_CONSTRAINT_MAX_NORM; kind <= TFC_CONSTRAINT_MIN_MAX_NORM; kind++)
        for (int s = 0; s < 6; s++) {
            tfc_constraint_desc d = {(tfc_constraint_kind)kind, shapes[s][0], shapes[s][1],
                                     shapes[s][2], 0.3f, 0.5f, 0.75f};
            const int64_t n = d.outer * d.red * d.inner;
            pair w = pair_rand(n, -0.05, 0.05);
            for (int64_t i = 0; i < n; i += 3) w.h[i] *= 0.01f;
            pair_push(&w);
            ref->ops->constrain(ref, &d, w.h);
            dev->ops->constrain(dev, &d, w.d);
            int bad = pair_check("constrain", &w, 1e-6, 1e-9);
            if (bad) printf("\n  constrain kind %d [%lld, %lld, %lld]", kind,
                            (long long)d.outer, (long long)d.red, (long long)d.inner);
            CU_ASSERT_EQUAL(bad, 0);
            pair_free(&w);
        }
    check_status();
    enable_layer_ops(0);
}

/* Attention's and AdditiveAttention's kernels (gpu_score_attention.cu, put in the table for
 * this case) against the CPU: dot, concat and additive scores, with and without scales,
 * masks on both sides, causal, dropout, tq != tv; the outputs and the kept softmax within
 * float tolerance (exp's last bits differ), every gradient within the sum tolerance. Then
 * training steps of a model with each layer (cpu_first lifted) on both backends. */
static int score_attention_case(int mode, int use_scale, int masked, int causal, float rate)
{
    tfc_score_attn_desc d = {.n = 3, .tq = 7, .tv = 5, .dim = 6, .dv = 4, .mode = mode,
                             .causal = causal, .rate = rate, .key = 99, .step = 4};
    const int64_t nq = (int64_t)d.n * d.tq * d.dim, nk = (int64_t)d.n * d.tv * d.dim;
    const int64_t nv = (int64_t)d.n * d.tv * d.dv, no = (int64_t)d.n * d.tq * d.dv;
    const int64_t ns = (int64_t)d.n * d.tq * d.tv, nsc = mode == TFC_SCORE_ADDITIVE ? d.dim : 1;
    pair q = pair_rand(nq, -1, 1), k = pair_rand(nk, -1, 1), v = pair_rand(nv, -1, 1);
    pair sc = pair_rand(nsc, 0.5, 1.5), cw = pair_rand(1, 0.5, 1.5), dout = pair_rand(no, -1, 1);
    pair qm = pair_new((int64_t)d.n * d.tq), km = pair_new((int64_t)d.n * d.tv);
    for (int64_t i = 0; i < qm.n; i++) qm.h[i] = i % d.tq < d.tq - (int)(i / d.tq);
    for (int64_t j = 0; j < km.n; j++) km.h[j] = j % d.tv < d.tv - (int)(j / d.tv);
    pair_push(&qm), pair_push(&km);
    pair o = pair_new(no), pr = pair_new(ns), ds = pair_new(ns);
    pair dq = pair_rand(nq, -1, 1), dk = pair_rand(nk, -1, 1), dv = pair_rand(nv, -1, 1);
    pair dsc = pair_rand(nsc, -1, 1), dcw = pair_rand(1, -1, 1);
    const int concat = mode == TFC_SCORE_CONCAT;
    tfc_score_attn_desc dh = d, dd = d;
    if (masked) dh.qmask = qm.h, dh.kmask = km.h, dd.qmask = qm.d, dd.kmask = km.d;
    ref->ops->score_attention_forward(ref, &dh, q.h, k.h, v.h, use_scale ? sc.h : NULL,
                                      concat ? cw.h : NULL, o.h, pr.h);
    dev->ops->score_attention_forward(dev, &dd, q.d, k.d, v.d, use_scale ? sc.d : NULL,
                                      concat ? cw.d : NULL, o.d, pr.d);
    int bad = pair_check("score_attention o", &o, F32) + pair_check("score_attention p", &pr, F32);
    pair_push(&pr); /* both backwards from the same softmax */
    ref->ops->score_attention_backward(ref, &dh, q.h, k.h, v.h, use_scale ? sc.h : NULL,
                                       concat ? cw.h : NULL, pr.h, dout.h, ds.h, dq.h, dk.h,
                                       dv.h, use_scale ? dsc.h : NULL, concat ? dcw.h : NULL);
    dev->ops->score_attention_backward(dev, &dd, q.d, k.d, v.d, use_scale ? sc.d : NULL,
                                       concat ? cw.d : NULL, pr.d, dout.d, ds.d, dq.d, dk.d,
                                       dv.d, use_scale ? dsc.d : NULL, concat ? dcw.d : NULL);
    bad += pair_check("score_attention dq", &dq, 1e-4, 1e-5) +
           pair_check("score_attention dk", &dk, 1e-4, 1e-5) +
           pair_check("score_attention dv", &dv, 1e-4, 1e-5) +
           pair_check("score_attention dscale", &dsc, 1e-4, 1e-5) +
           pair_check("score_attention dcw", &dcw, 1e-4, 1e-5);
    if (bad)
        printf("\n  score_attention mode %d scale %d masked %d causal %d rate %g", mode,
               use_scale, masked, causal, rate);
    pair *all[] = {&q, &k, &v, &sc, &cw, &dout, &qm, &km, &o, &pr, &ds, &dq, &dk, &dv, &dsc, &dcw};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) pair_free(all[i]);
    return bad;
}

static void test_score_attention(void)
{
    enable_layer_ops(1);
    int bad = 0;
    for (int mode = 0; mode < 3; mode++) {
        bad += score_attention_case(mode, 1, 0, 0, 0);
        bad += score_attention_case(mode, 0, 1, 0, 0);
        bad += score_attention_case(mode, 1, 1, 1, 0);
        bad += score_attention_case(mode, 1, 1, 0, 0.25f);
    }
    CU_ASSERT_EQUAL(bad, 0);
    check_status();
    lift_cpu_first = 1;
    train_steps("input: {shape: [8], dtype: int32}\nlayers:\n"
                "  - Embedding: {name: e, input_dim: 20, output_dim: 6, mask_zero: true}\n"
                "  - Dense: {name: k, units: 6, activation: tanh}\n"
                "  - Attention: {name: a, use_scale: true, inputs: [e, e, k], "
                "use_causal_mask: true}\n"
                "  - AdditiveAttention: {name: b, inputs: [a, e], dropout: 0.1}\n"
                "  - Attention: {score_mode: concat, use_scale: true, inputs: [b, a]}\n"
                "  - GlobalAveragePooling1D: {}\n  - Dense: {units: 3, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 20, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
    enable_layer_ops(0);
}

/* The noise layers' kernels (gpu_noise.cu, put in the table for this case) against the
 * CPU: every kind, a draw per element and draws shared by rows, forward, backward adding and
 * assigning; the dropouts bit for bit, the Gaussian ones within float rounding (a normal
 * from double log and cos, whose last bits may differ). Then training steps of a model with
 * every noise layer, whose draws are the same on both backends. */
static void test_noise(void)
{
    enable_layer_ops(1);
    static const int64_t shapes[][3] = {{1, 1, 100003}, {64, 49, 32}, {3, 1000, 5}};
    for (int kind = 0; kind < 4; kind++)
        for (int s = 0; s < 3; s++) {
            tfc_noise_desc d = {.kind = (tfc_noise_kind)kind, .groups = shapes[s][0],
                                .rows = shapes[s][1], .cols = shapes[s][2], .rate = 0.3f,
                                .stddev = 0.4f, .a = 0.9f, .shift = 0.1f, .dropped = -1.5f,
                                .key = 1234567, .step = 99};
            const int64_t n = d.groups * d.rows * d.cols;
            pair x = pair_rand(n, -2, 2), y = pair_new(n), dx = pair_rand(n, -1, 1);
            pair dxa = pair_new(n);
            ref->ops->noise_forward(ref, &d, x.h, y.h);
            dev->ops->noise_forward(dev, &d, x.d, y.d);
            ref->ops->noise_backward(ref, &d, x.h, dx.h, 0);
            dev->ops->noise_backward(dev, &d, x.d, dx.d, 0);
            ref->ops->noise_backward(ref, &d, x.h, dxa.h, 1);
            dev->ops->noise_backward(dev, &d, x.d, dxa.d, 1);
            const int gauss = kind >= TFC_NOISE_GAUSSIAN;
            int bad = gauss ? pair_check("noise y", &y, F32) : pair_check("noise y", &y, EXACT);
            bad += gauss ? pair_check("noise dx", &dx, F32) : pair_check("noise dx", &dx, EXACT);
            bad += gauss ? pair_check("noise dx =", &dxa, F32)
                         : pair_check("noise dx =", &dxa, EXACT);
            if (bad) printf("\n  noise kind %d shape %d", kind, s);
            CU_ASSERT_EQUAL(bad, 0);
            pair_free(&x), pair_free(&y), pair_free(&dx), pair_free(&dxa);
        }
    check_status();
    train_steps("input: {shape: [6, 6, 2]}\nlayers:\n"
                "  - Conv2D: {filters: 4, kernel_size: 3, padding: same}\n"
                "  - SpatialDropout2D: {rate: 0.3}\n"
                "  - GaussianNoise: {stddev: 0.1}\n"
                "  - Reshape: {target_shape: [36, 4]}\n"
                "  - SpatialDropout1D: {rate: 0.2, seed: 3}\n"
                "  - Dropout: {rate: 0.2, noise_shape: [null, 1, null]}\n"
                "  - Flatten: {}\n  - Dense: {units: 8, activation: selu}\n"
                "  - AlphaDropout: {rate: 0.1}\n  - GaussianDropout: {rate: 0.2}\n"
                "  - Dense: {units: 5, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\nmetrics: [accuracy]\n",
                8, 0, 1, 5e-4, 1e-5);
    enable_layer_ops(0);
}

/* The element-wise losses MAE, Huber, log-cosh, MSLE, MAPE, Poisson, KL divergence, hinge and
 * squared hinge, and the row-wise categorical hinge and cosine similarity (gpu_loss.cu;
 * test_loss compares the op against the CPU for every kind), which
 * the GPU's tfc_backend.losses leaves out until this has passed: set for the case, four
 * training steps of a model with each (the
 * dense model's outputs against soft targets, their gradients through a CNN). */
static void test_regression_losses(void)
{
    const uint32_t had = dev->losses;
    dev->losses = (1u << TFC_LOSS_COUNT) - 1;
    /* each with the output activation its targets want (Poisson's rates, a distribution) */
    static const char *const losses[][2] = {
        {"mae", "linear"},     {"huber", "linear"},         {"log_cosh", "linear"},
        {"msle", "linear"},    {"mape", "linear"},          {"poisson", "softplus"},
        {"kld", "softmax"},    {"hinge", "linear"},         {"squared_hinge", "linear"},
        {"mean_absolute_error", "linear"}, {"{type: huber, delta: 0.25}", "linear"},
        {"categorical_hinge", "linear"},   {"cosine_similarity", "linear"}};
    for (size_t k = 0; k < sizeof losses / sizeof *losses; k++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml,
                 "input: {shape: [6, 6, 2]}\nlayers:\n"
                 "  - Conv2D: {filters: 4, kernel_size: 3, activation: relu}\n"
                 "  - Flatten: {}\n  - Dense: {units: 5, activation: %s}\nloss: %s\n",
                 losses[k][1], losses[k][0]);
        train_steps(yaml, 8, 0, 1, 5e-4, 1e-5);
    }
    dev->losses = had;
}

/* A causal decoder block (Embedding + PositionEmbedding are CPU-first: a plain Embedding)
 * with a gated (Multiply) output; a masked encoder (Embedding's mask_zero reaching
 * MultiHeadAttention's query and key masks); Masking before self-attention on float steps.
 * Per-step Dense heads: the pooling layers are CPU-first too. */
static const char gpt_yaml[] =
    "name: small_gpt\n"
    "input: {shape: [13], dtype: int32}\n"
    "layers:\n"
    "  - Embedding: {name: embed, input_dim: 20, output_dim: 12}\n"
    "  - LayerNormalization: {name: n1}\n"
    "  - MultiHeadAttention: {name: att, num_heads: 3, key_dim: 4, value_dim: 5,"
    " use_causal_mask: true}\n"
    "  - Add: {name: a1, inputs: [embed, att]}\n"
    "  - LayerNormalization: {name: n2}\n"
    "  - Dense: {name: ff1, units: 24, activation: gelu}\n"
    "  - Dense: {name: ff2, units: 12}\n"
    "  - Add: {name: a2, inputs: [a1, ff2]}\n"
    "  - Dense: {name: gate, units: 12, activation: sigmoid}\n"
    "  - Multiply: {name: m, inputs: [a2, gate]}\n"
    "  - RMSNormalization: {name: n3}\n"
    "  - Dense: {name: logits, units: 20}\n"
    "loss: sparse_categorical_crossentropy\n"
    "metrics: [accuracy]\n";

static const char encoder_yaml[] =
    "name: small_encoder\n"
    "input: {shape: [11], dtype: int32}\n"
    "layers:\n"
    "  - Embedding: {name: embed, input_dim: 20, output_dim: 8, mask_zero: true}\n"
    "  - LayerNormalization: {name: n1}\n"
    "  - MultiHeadAttention: {name: att, num_heads: 2, key_dim: 6}\n"
    "  - Add: {name: a1, inputs: [embed, att]}\n"
    "  - LayerNormalization: {name: n2, center: false, scale: false}\n"
    "  - Dense: {name: out, units: 20}\n"
    "loss: sparse_categorical_crossentropy\n"
    "metrics: [accuracy]\n";

static const char masking_yaml[] =
    "name: small_masking\n"
    "input: {shape: [7, 6]}\n"
    "layers:\n"
    "  - Masking: {name: mask}\n"
    "  - MultiHeadAttention: {name: att, num_heads: 2, key_dim: 3}\n"
    "  - LayerNormalization: {name: n1}\n"
    "  - Dense: {name: out, units: 5}\n"
    "loss: sparse_categorical_crossentropy\n"
    "metrics: [accuracy]\n";

static void test_train_transformer(void)
{
    train_steps(gpt_yaml, 6, 1, 0, 5e-4, 1e-5);
    train_steps(encoder_yaml, 5, 1, 1, 5e-4, 1e-5);
    train_steps(masking_yaml, 4, 0, 0, 5e-4, 1e-5);
}

/* GroupQueryAttention (CPU-first, lifted for the case; MultiHeadAttention's attention op,
 * copy2d for the key/value heads' repeat, mul and sigmoid for the gate): a causal gated
 * decoder block under an Embedding's mask (4 query heads over 2), and cross-attention with one
 * key/value head, a key apart from the value, a sliding window and dropout, trained on both
 * backends. */
static void test_train_gqa(void)
{
    lift_cpu_first = 1;
    train_steps("input: {shape: [11], dtype: int32}\nlayers:\n"
                "  - Embedding: {name: embed, input_dim: 20, output_dim: 8, mask_zero: true}\n"
                "  - GroupQueryAttention: {name: att, head_dim: 3, num_query_heads: 4,"
                " num_key_value_heads: 2, use_gate: true, use_causal_mask: true}\n"
                "  - Add: {inputs: [embed, att]}\n  - LayerNormalization: {}\n"
                "  - Dense: {units: 20}\n"
                "loss: sparse_categorical_crossentropy\n",
                5, 1, 1, 5e-4, 1e-5);
    train_steps("input: {shape: [8, 6]}\nlayers:\n"
                "  - Reshape: {name: kv, target_shape: [4, 12]}\n"
                "  - Dense: {name: v, units: 6}\n"
                "  - Dense: {name: k, units: 5, inputs: [kv]}\n"
                "  - GroupQueryAttention: {inputs: [input, v, k], head_dim: 4,"
                " num_query_heads: 3, num_key_value_heads: 1, sliding_window: 3,"
                " dropout: 0.2}\n"
                "  - Flatten: {}\n  - Dense: {units: 4, activation: softmax}\n"
                "loss: sparse_categorical_crossentropy\n",
                8, 0, 1, 5e-4, 1e-5);
    lift_cpu_first = 0;
}

/* Deterministic mode: two runs of the decoder block end in identical weights. */
static void test_deterministic_transformer(void)
{
    set_deterministic(1);
    int64_t n1, n2;
    float *a = train_on_dev(gpt_yaml, 8, 3, 1, &n1), *b = train_on_dev(gpt_yaml, 8, 3, 1, &n2);
    CU_ASSERT_EQUAL_FATAL(n1, n2);
    CU_ASSERT_EQUAL(compare_floats("deterministic transformer", b, a, n1, EXACT), 0);
    free(a), free(b);
    set_deterministic(0);
    check_status();
}

/* ---- CUDA graphs ------------------------------------------------------------------------------ */

#ifdef TFC_HAVE_CUDA
/* Attention with dropout, for graph_replay's draws. */
static const char graph_attention_yaml[] =
    "name: graph_attention\n"
    "input: {shape: [13], dtype: int32}\n"
    "layers:\n"
    "  - Embedding: {name: embed, input_dim: 20, output_dim: 12}\n"
    "  - MultiHeadAttention: {name: att, num_heads: 3, key_dim: 4, dropout: 0.25,"
    " use_causal_mask: true}\n"
    "  - Add: {inputs: [embed, att]}\n"
    "  - LayerNormalization: {}\n"
    "  - Dense: {units: 20}\n"
    "loss: sparse_categorical_crossentropy\n"
    "metrics: [accuracy]\n";

/* A step's queued half (gpu.h): forward, loss, backward, SGD with momentum through the
 * device path's update, its learning rate read from the step state (rates_at_state; the
 * desc's is far off). */
static void graph_step(tfc_model *m, float *slot, tfc_step_state *st)
{
    tfc_model_forward_launch(m);
    tfc_model_loss_compute(m, 1);
    tfc_model_zero_grad(m);
    tfc_model_backward(m);
    int64_t nt = tfc_model_trainable_count(m);
    float *grads = tfc_model_grads(m);
    dev->ops->grad_sumsq(dev, nt, grads, st);
    dev->ops->step_scale(dev, tfc_model_loss_scalar(m), 1.0, 5.0, st);
    const tfc_optim_desc d = {.type = TFC_OPTIMIZER_SGD, .lr = 9.0f, .momentum = 0.9f,
                              .rates_at_state = 1};
    dev->ops->optimizer_update_at(dev, &d, st, nt, tfc_model_params(m), grads, slot, NULL, NULL);
}

/* Six steps on new batches and new step numbers (dropout's, attention's and augmentation's
 * draws), launched on model a and on model b: its first launched, its second captured and
 * every later one a replay of that capture, with the step offset; each step's loss and the
 * final weights, moving statistics and momentum the same bits. replay 0: model b launched
 * at every step too (the control: whether two launched runs give the same bits). */
static int graph_case(const char *name, const char *yaml, int batch, int tokens, int replay)
{
    tfc_model *ma = load_bound(yaml, dev, batch), *mb = load_bound(yaml, dev, batch);
    if (!ma || !mb) return 1;
    const int64_t per = tfc_shape_numel(tfc_model_input_shape(ma));
    const int64_t nlab = (int64_t)batch * tfc_model_label_rows(ma);
    const int64_t nt = tfc_model_trainable_count(ma), np = tfc_model_param_count(ma);
    void *x = malloc((size_t)(batch * per) * 4);
    int32_t *labels = malloc((size_t)nlab * 4);
    float *slot[2];
    tfc_step_state *st[2];
    tfc_model *ms[2] = {ma, mb};
    for (int k = 0; k < 2; k++) {
        slot[k] = dev->ops->alloc(dev, (size_t)nt * 4);
        dev->ops->zero(dev, slot[k], (size_t)nt * 4);
        st[k] = dev->ops->alloc(dev, sizeof(tfc_step_state));
        if (bind_precision == TFC_PRECISION_FLOAT16) tfc_model_set_loss_scale_at(ms[k], st[k]);
    }
    tfc_gpu_graph *graph = NULL;
    tfc_error err;
    tfc_error_clear(&err);
    int bad = 0, nodes = 0;
    for (int step = 0; step < 6 && !bad; step++) {
        /* masked steps (id 0) at the same places in every batch: a loss over the steps
         * averages the same count of rows, as a replay requires (tfc_model_loss_rows) */
        for (int64_t i = 0; i < batch * per; i++) {
            if (tokens)
                ((int32_t *)x)[i] = i % 5 == 3 ? 0 : 1 + irand(19);
            else
                ((float *)x)[i] = (float)urand() * 2 - 1;
        }
        for (int64_t i = 0; i < nlab; i++) labels[i] = irand(tfc_model_classes(ma));
        double loss[2];
        /* lr, alpha, decay and a loss scale S (1, 2, 4: the update divides by it; with
         * float16 the loss's gradient is multiplied by it too) */
        const float rates[4] = {0.05f / (1 + 0.3f * (float)step), 0, 0, (float)(1 << step % 3)};
        for (int k = 0; k < 2 && !bad; k++) {
            tfc_batch_result r;
            dev->ops->upload(dev, &st[k]->lr, rates, sizeof rates);
            if (tfc_model_stage_input(ms[k], x, batch, 1, 5, 3 + (uint64_t)step, &err) ||
                tfc_model_stage_labels(ms[k], labels, &err)) {
                printf("\n  %s: %s", name, err.text);
                bad = 1;
                break;
            }
            if (k == 0 || step == 0 || !replay) {
                graph_step(ms[k], slot[k], st[k]);
            } else {
                if (!graph) {
                    if (tfc_gpu_capture_begin(dev, &err)) {
                        printf("\n  %s: %s", name, err.text);
                        bad = 1;
                        break;
                    }
                    graph_step(mb, slot[1], st[1]);
                    if (!(graph = tfc_gpu_capture_end(dev, &err))) {
                        printf("\n  %s: %s", name, err.text);
                        bad = 1;
                        break;
                    }
                    nodes = tfc_gpu_graph_nodes(graph);
                }
                tfc_gpu_graph_launch(dev, graph, (uint64_t)step - 1); /* captured at 1 */
            }
            tfc_model_loss_result(ms[k], &r);
            loss[k] = r.loss;
        }
        if (!bad && memcmp(&loss[0], &loss[1], sizeof loss[0]) != 0) {
            printf("\n  %s step %d: loss %.9g, %s %.9g", name, step, loss[0],
                   replay ? "replayed" : "launched again", loss[1]);
            bad = 1;
        }
    }
    if (!bad) {
        float *a = fetch(dev, tfc_model_params(ma), np), *b = fetch(dev, tfc_model_params(mb), np);
        const char *vs = replay ? "launched against replayed" : "launched twice";
        char what[64];
        snprintf(what, sizeof what, "weights and statistics, %s", vs);
        bad += compare_floats(what, b, a, np, 0, 0);
        free(a), free(b);
        a = fetch(dev, slot[0], nt), b = fetch(dev, slot[1], nt);
        snprintf(what, sizeof what, "momentum, %s", vs);
        bad += compare_floats(what, b, a, nt, 0, 0);
        free(a), free(b);
        if (replay && nodes < 10) {
            printf("\n  %s: the captured step holds %d nodes", name, nodes);
            bad = 1;
        }
    }
    tfc_gpu_graph_free(graph);
    for (int k = 0; k < 2; k++) dev->ops->free(dev, slot[k]), dev->ops->free(dev, st[k]);
    free(x), free(labels);
    tfc_model_free(ma), tfc_model_free(mb);
    return bad;
}
#endif


/* CUDA graphs (gpu.h): replayed steps give the launched steps' bits (a CNN with
 * BatchNormalization, a residual Add and dropout; a masked LSTM with dropout; a small GPT;
 * attention with dropout; the augmentation layers); an op that waits for the device during
 * a capture fails the capture naming itself, and the backend works on after it. */
static void test_graph_replay(void)
{
#ifdef TFC_HAVE_CUDA
    if (twin) return;
    CU_ASSERT_EQUAL(graph_case("cnn", cnn_yaml, 16, 0, 1), 0);
    CU_ASSERT_EQUAL(graph_case("augment", augment_yaml, 6, 0, 1), 0);
    /* Outside deterministic mode Embedding's gradient adds rows with atomics, in an order
     * that can differ from run to run, so that two launched runs differ in the last bits
     * too (on the H200 first seen as launched against replayed: the LSTM's embedding rows'
     * momentum, 23 of 2100 values by up to 3e-11).
     * The control below prints so when it happens; the token models replay in
     * deterministic mode. */
    if (graph_case("gpt launched twice (a control, not asserted)", gpt_yaml, 4, 1, 0))
        printf("\n  (two launched runs differ: Embedding's atomics)");
    set_deterministic(1);
    CU_ASSERT_EQUAL(graph_case("lstm", lstm_yaml, 8, 1, 1), 0);
    CU_ASSERT_EQUAL(graph_case("gpt", gpt_yaml, 4, 1, 1), 0);
    CU_ASSERT_EQUAL(graph_case("attention dropout", graph_attention_yaml, 4, 1, 1), 0);
    set_deterministic(0);
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_gpu_capture_begin(dev, &err), TFC_OK);
    dev->ops->sync(dev);
    tfc_gpu_graph *g = tfc_gpu_capture_end(dev, &err);
    CU_ASSERT_PTR_NULL(g);
    if (!strstr(err.text, "sync while a CUDA graph is being captured"))
        printf("\n  a sync during a capture: %s", err.text);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "sync while a CUDA graph is being captured"));
    tfc_gpu_graph_free(g);
    CU_ASSERT_EQUAL(graph_case("cnn after a failed capture", cnn_yaml, 16, 0, 1), 0);
#endif
    check_status();
}

/* float16's loss scale S on the device (tfc_step_state.loss_scale, read by loss_scale_at and
 * step_scale): loss_scale_at multiplies as the CPU's does, bit for bit; a float16 CNN's
 * replayed steps give its launched steps' bits while S changes from step to step
 * (graph_case); and the trainer's float16 runs, from a scale that overflows (2^40, so S
 * falls, then grows every 5 updates), give the same bits on the host path (S by value), the
 * device path and the device path replayed from a graph: weights, snapshots, displayed
 * losses, the scale and the count of overflows. */
static void test_float16_steps(void)
{
    enable_bf16(1);
    pair x = pair_rand(100003, -3e4, 3e4);
    const float x7 = x.h[7];
    tfc_step_state *st = dev->ops->alloc(dev, sizeof *st), h = {.loss_scale = 4096.0f};
    dev->ops->upload(dev, st, &h, sizeof h);
    dev->ops->loss_scale_at(dev, x.n, st, x.d);
    ref->ops->loss_scale_at(ref, x.n, &h, x.h);
    CU_ASSERT_EQUAL(pair_check("loss_scale_at", &x, EXACT), 0);
    CU_ASSERT(x.h[7] == x7 * 4096.0f && x.h[7] != x7);
    dev->ops->free(dev, st);
    pair_free(&x);
#ifdef TFC_HAVE_CUDA
    if (!twin) {
        bind_precision = TFC_PRECISION_FLOAT16;
        CU_ASSERT_EQUAL(graph_case("cnn float16", cnn_yaml, 16, 0, 1), 0);
        bind_precision = TFC_PRECISION_FLOAT32;
    }
#endif
    const char *const sets[] = {"precision=float16",
                                "loss_scale={initial_scale: 1099511627776, "
                                "dynamic_growth_steps: 5}"};
    tfc_train_result *res = calloc(3, sizeof *res);
    tfc_error err[3];
    tfc_status st3[3];
    char *text = NULL;
    size_t len = 0;
    st3[0] = step_train("f16_paths", 1, sets, 2, &res[0], &err[0]);
    st3[1] = step_train("f16_paths", 0, sets, 2, &res[1], &err[1]);
    step_graphs = 1;
    step_console = open_memstream(&text, &len);
    st3[2] = step_train("f16_graphs", 0, sets, 2, &res[2], &err[2]);
    fclose(step_console);
    step_console = NULL;
    step_graphs = 0;
    for (int k = 0; k < 3; k++)
        if (st3[k]) printf("\n  run %d: %s", k, err[k].text);
    CU_ASSERT_FATAL(!st3[0] && !st3[1] && !st3[2]);
    const tfc_train_result dg[2] = {res[1], res[2]};
    int same = same_runs("f16_paths", 1, "f16_paths", 0, res) &&
               same_runs("f16_paths", 0, "f16_graphs", 0, dg);
    if (!same) printf("\n  float16: host, device and replayed runs differ");
    CU_ASSERT(same);
    printf("\n  float16 from 2^40: %lld overflows, scale %g at 30",
           (long long)res[1].loss_scale_overflows, res[1].loss_scale);
    CU_ASSERT(res[1].loss_scale_overflows > 5);
    for (int k = 0; k < 3; k += 2) {
        CU_ASSERT_EQUAL(res[k].loss_scale, res[1].loss_scale);
        CU_ASSERT_EQUAL(res[k].loss_scale_overflows, res[1].loss_scale_overflows);
    }
    int said = text && (twin ? strstr(text, "cpu has no CUDA graphs") != NULL
                             : strstr(text, "note: cuda_graphs: the step was captured at") != NULL);
    if (!said) printf("\n  console: %s", text ? text : "(none)");
    CU_ASSERT(said);
    free(text);
    free(res);
    enable_bf16(0);
    check_status();
}

/* Resumes across precisions on the device (issue 41; snapshots hold the float32 weights): a
 * float32 run's snapshot resumed in bf16 and a bf16 run's resumed in float32 finish, their
 * final losses within 5% of the uninterrupted runs' of the precision they end in; a bf16
 * run's snapshot resumed in bf16 and replayed from a graph ends with the launched
 * uninterrupted run's bits. */
static void test_precision_resume(void)
{
    enable_bf16(1);
    const char *const bf[] = {"precision=bf16"};
    tfc_train_result *res = calloc(5, sizeof *res);
    tfc_error err[5];
    tfc_status st[5];
    st[0] = step_train("pr_f32", 0, NULL, 0, &res[0], &err[0]);
    st[1] = step_train("pr_bf16", 0, bf, 1, &res[1], &err[1]);
    char snap[2][2048];
    snprintf(snap[0], sizeof snap[0], "%s", run_file("pr_f32", 0, "snapshots/tiny_iter_10.state"));
    snprintf(snap[1], sizeof snap[1], "%s", run_file("pr_bf16", 0, "snapshots/tiny_iter_10.state"));
    step_resume = snap[0];
    st[2] = step_train("pr_32to16", 0, bf, 1, &res[2], &err[2]);
    step_resume = snap[1];
    st[3] = step_train("pr_16to32", 0, NULL, 0, &res[3], &err[3]);
    step_graphs = 1;
    st[4] = step_train("pr_16again", 0, bf, 1, &res[4], &err[4]);
    step_graphs = 0;
    step_resume = NULL;
    for (int k = 0; k < 5; k++)
        if (st[k]) printf("\n  run %d: %s", k, err[k].text);
    CU_ASSERT_FATAL(!st[0] && !st[1] && !st[2] && !st[3] && !st[4]);
    static const char *const resumed[] = {"pr_32to16", "pr_16to32", "pr_16again"};
    for (int k = 2; k < 5; k++) { /* resumed at 10: snapshots from 20 on, none of its own at 10 */
        CU_ASSERT_EQUAL(res[k].iterations, 30);
        CU_ASSERT(access(run_file(resumed[k - 2], 0, "snapshots/tiny_iter_10.state"), F_OK) != 0);
        CU_ASSERT(access(run_file(resumed[k - 2], 0, "snapshots/tiny_iter_20.state"), F_OK) == 0);
    }
    const double l32 = res[0].train.loss, l16 = res[1].train.loss;
    printf("\n  final losses: float32 %.5f, bf16 %.5f, float32 resumed in bf16 %.5f, bf16 "
           "resumed in float32 %.5f", l32, l16, res[2].train.loss, res[3].train.loss);
    CU_ASSERT(fabs(res[2].train.loss - l16) <= 0.05 * l16);
    CU_ASSERT(fabs(res[3].train.loss - l32) <= 0.05 * l32);
    CU_ASSERT(files_equal(run_file("pr_bf16", 0, "final.safetensors"),
                          run_file("pr_16again", 0, "final.safetensors")));
    free(res);
    enable_bf16(0);
    check_status();
}

/* ---- main ----------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    static const tfc_test_case device_cases[] = {
        {"device_selection", test_device_selection},
        {NULL, NULL},
    };
    static const tfc_test_case op_cases[] = {
        {"device_selection", test_device_selection},
        {"gemm", test_gemm},
        {"gemm_tf32", test_gemm_tf32},
        {"elementwise", test_elementwise},
        {"activations", test_activations},
        {"dropout", test_dropout},
        {"reductions", test_reductions},
        {"conv", test_conv},
        {"conv_tf32", test_conv_tf32},
        {"conv_find", test_conv_find},
        {"graph_replay", test_graph_replay},
        {"train_graphs", test_train_graphs},
        {"pool", test_pool},
        {"batch_norm", test_batch_norm},
        {"embedding", test_embedding},
        {"lstm", test_lstm},
        {"lstm_tf32", test_lstm_tf32},
        {"loss", test_loss},
        {"accuracy", test_accuracy},
        {"optimizer", test_optimizer},
        {"deterministic", test_deterministic},
        {"memory", test_memory},
        {"memory_plan", test_memory_plan},
        {"train_cnn", test_train_cnn},
        {"train_frozen", test_train_frozen},
        {"train_lstm", test_train_lstm},
        {"train_mixed_adam", test_train_mixed_adam},
        {"train_cnn_tf32", test_train_cnn_tf32},
        {"bf16", test_bf16},
        {"float16_steps", test_float16_steps},
        {"precision_resume", test_precision_resume},
        {"fast_norm", test_fast_norm},
        {"deterministic_training", test_deterministic_training},
        {"grad_sumsq", test_grad_sumsq},
        {"step_scale", test_step_scale},
        {"optimizer_update_at", test_optimizer_update_at},
        {"train_device_step", test_train_device_step},
        {"train_device_step_divergence", test_train_device_step_divergence},
        {"gru", test_gru},
        {"gru_deterministic", test_gru_deterministic},
        {"simple_rnn", test_simple_rnn},
        {"rnn_dropout", test_rnn_dropout},
        {"rnn_input", test_rnn_input},
        {"bidir", test_bidir},
        {"train_bidir_rnn", test_train_bidir_rnn},
        {"train_gru_back", test_train_gru_back},
        {"grouped_conv", test_grouped_conv},
        {"conv1d_ops", test_conv1d_ops},
        {"masked_mean", test_masked_mean},
        {"depthwise", test_depthwise},
        {"upsample", test_upsample},
        {"conv_family_deterministic", test_conv_family_deterministic},
        {"train_conv1d", test_train_conv1d},
        {"train_mobilenet", test_train_mobilenet},
        {"train_activation_layers", test_train_activation_layers},
        {"train_time_distributed", test_train_time_distributed},
        {"train_spectral_normalization", test_train_spectral_normalization},
        {"train_conv1d_variants", test_train_conv1d_variants},
        {"pact", test_pact},
        {"penalty", test_penalty},
        {"constrain", test_constrain},
        {"noise", test_noise},
        {"score_attention", test_score_attention},
        {"regression_losses", test_regression_losses},
        {"augment_warp", test_augment_warp},
        {"augment_contrast", test_augment_contrast},
        {"augment_inference", test_augment_inference},
        {"augment_color", test_augment_color},
        {"augment_tone", test_augment_tone},
        {"augment_elastic", test_augment_elastic},
        {"train_augment", test_train_augment},
        {"train_shear", test_train_shear},
        {"augment_region", test_augment_region},
        {"augment_persp", test_augment_persp},
        {"rand_augment", test_rand_augment},
        {"aug_mix", test_aug_mix},
        {"stft", test_stft},
        {"encode", test_encode},
        {"train_border", test_train_border},
        {"train_token_position", test_train_token_position},
        {"train_position", test_train_position},
        {"layernorm", test_layernorm},
        {"groupnorm", test_groupnorm},
        {"permute_l2norm", test_permute_l2norm},
        {"crop_resize", test_crop_resize},
        {"extremum", test_extremum},
        {"dot", test_dot},
        {"einsum_dense", test_einsum_dense},
        {"train_volume", test_train_volume},
        {"train_conv_lstm", test_train_conv_lstm},
        {"train_layer_scale", test_train_layer_scale},
        {"train_custom_scale", test_train_custom_scale},
        {"train_rnn_cell", test_train_rnn_cell},
        {"conv3d", test_conv3d},
        {"conv3d_transpose", test_conv3d_transpose},
        {"pool3d", test_pool3d},
        {"adaptive_pool", test_adaptive_pool},
        {"attention", test_attention},
        {"mul_masking", test_mul_masking},
        {"train_transformer", test_train_transformer},
        {"train_gqa", test_train_gqa},
        {"deterministic_transformer", test_deterministic_transformer},
        {NULL, NULL},
    };
    /* tfc_test_main restarts the process on a better BLAS core with the arguments it gets,
     * which no longer hold --cpu-twin: restart here first, with all of them */
    tfc_cpu_blas_restart(argv);
    int args = 1;
    if (argc > 1 && strcmp(argv[1], "--cpu-twin") == 0) {
        twin = 1;
        args = 2;
    }
    char **rest = argv + args - 1;
    int nrest = argc - args + 1;
    rest[0] = argv[0];
    ref = tfc_cpu_backend_create(2);
    if (twin) {
        dev = tfc_cpu_backend_create(1);
        printf("test_gpu_ops: --cpu-twin: the device is a second CPU backend\n");
    } else if (gpu_count() > 0) {
#ifdef TFC_HAVE_CUDA
        tfc_error err;
        tfc_error_clear(&err);
        dev = tfc_gpu_backend_create(0, &err);
        if (!dev) {
            printf("test_gpu_ops: a GPU is present but cannot be used:\n%s", err.text);
            return 1;
        }
        printf("test_gpu_ops: gpu:0 is %s\n", tfc_gpu_device_name(dev));
#endif
    }
    if (!dev) {
        int rc = tfc_test_main("gpu_device", device_cases, nrest, rest);
        printf("test_gpu_ops: skipped: %s; only device selection was checked\n",
#ifdef TFC_HAVE_CUDA
               "no usable GPU (CUDA reports 0 devices)"
#else
               "this build has no CUDA (nvcc and cuDNN not found, or CUDA=0)"
#endif
        );
        tfc_backend_free(ref);
        return rc;
    }
    int rc = tfc_test_main("gpu_ops", op_cases, nrest, rest);
    tfc_backend_free(dev);
    tfc_backend_free(ref);
    return rc;
}
