/* The trainer's `precision: bf16` and `float16` on the CPU, the reference numerics
 * (docs/solver.md, "Precision"): bfloat16 and float16 rounding against references in double
 * over every kind of float; a bound model's passes against the contract written out here
 * (inputs, weights, outputs and output gradients 16-bit, arithmetic float32, the float32
 * weights untouched); the solver key, its errors, training close to float32, snapshots
 * holding float32 weights, resumes across precisions both ways; float16's dynamic loss scale
 * (growth, overflows skipped with the weights untouched, the host and device paths alike,
 * resumed exactly, its TensorBoard scalar); Keras 3's mixed policies on the same models
 * and weights (tests/ref/keras_precision.py); the refusal of a backend without the op; the
 * memory plan's copies. Run from the repository's root. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "graph/model.h"
#include "solver/solver.h"
#include "util/gradcheck.h"
#include "util/testutil.h"

static uint32_t bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

static int is_bf16(float x) { return (bits(x) & 0xffffu) == 0; }

/* The nearest bfloat16 by comparing distances in double: the two candidates around x (its
 * top 16 bits, and one bfloat16 step away from zero), ties to the even one, past the
 * largest finite value an infinity. NaN and infinities handled apart. */
static float ref_round(float x)
{
    uint32_t u = bits(x);
    if (isnan(x)) return x;
    if (isinf(x)) return x;
    uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
    double dl = fabs((double)x - (double)from_bits(lo));
    double dh = (hi & 0x7f800000u) == 0x7f800000u ? INFINITY : 0;
    if (dh == 0) dh = fabs((double)from_bits(hi) - (double)x);
    else { /* hi is an infinity: x rounds up to it when at or past halfway to 2^128 */
        double top = ldexp(1.0, 128) * (x < 0 ? -1 : 1);
        dh = fabs(top - (double)x);
    }
    if (dl < dh) return from_bits(lo);
    if (dh < dl) return from_bits(hi);
    return from_bits((lo >> 16) & 1 ? hi : lo);
}

static void round_cases(void)
{
    const struct {
        uint32_t in, want;
    } cases[] = {
        {0x3f800000u, 0x3f800000u}, /* 1: exact */
        {0x3f808000u, 0x3f800000u}, /* halfway, even below */
        {0x3f818000u, 0x3f820000u}, /* halfway, even above */
        {0x3f808001u, 0x3f810000u}, /* past halfway */
        {0x3f807fffu, 0x3f800000u}, /* below halfway */
        {0xbf808001u, 0xbf810000u}, /* negative: magnitude rounds */
        {0x7f7fffffu, 0x7f800000u}, /* FLT_MAX: to infinity */
        {0x7f7f7fffu, 0x7f7f0000u}, /* the largest that stays finite */
        {0x7f800000u, 0x7f800000u}, /* +inf */
        {0xff800000u, 0xff800000u}, /* -inf */
        {0x00008000u, 0x00000000u}, /* subnormal tie to even zero */
        {0x00018000u, 0x00020000u}, /* subnormal tie up */
        {0x80000000u, 0x80000000u}, /* -0 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint32_t got = bits(tfc_bf16_round(from_bits(cases[i].in)));
        if (got != cases[i].want)
            printf("\n  %08x -> %08x, want %08x", cases[i].in, got, cases[i].want);
        CU_ASSERT_EQUAL(got, cases[i].want);
        CU_ASSERT_EQUAL(bits(ref_round(from_bits(cases[i].in))), cases[i].want);
    }
    /* NaNs stay NaNs, even one whose payload is only in the dropped bits */
    const uint32_t nans[] = {0x7f800001u, 0xff800001u, 0x7fc00000u, 0x7f80ffffu};
    for (size_t i = 0; i < sizeof nans / sizeof *nans; i++) {
        float r = tfc_bf16_round(from_bits(nans[i]));
        CU_ASSERT(isnan(r));
        CU_ASSERT_EQUAL(bits(r) >> 31, nans[i] >> 31);
    }
}

/* The backend op over random bit patterns of every exponent, against ref_round. */
static void round_op(void)
{
    enum { N = 1 << 20 };
    float *x = malloc(N * 4), *y = malloc(N * 4);
    CU_ASSERT_FATAL(x && y);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < N; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint32_t u = (uint32_t)(s >> 16);
        if (i % 4 == 1) u = (u & 0xffff0000u) | 0x8000u; /* many exact ties */
        x[i] = from_bits(u);
    }
    tfc_backend *be = tfc_cpu_backend_create(2);
    be->ops->round_bf16(be, N, x, y);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        float want = ref_round(x[i]);
        int same = isnan(want) ? isnan(y[i]) && (bits(y[i]) & 0xffffu) == 0
                               : bits(y[i]) == bits(want);
        if (!same && bad++ < 3)
            printf("\n  %08x -> %08x, want %08x", bits(x[i]), bits(y[i]), bits(want));
    }
    CU_ASSERT_EQUAL(bad, 0);
    be->ops->round_bf16(be, N, x, x); /* in place */
    CU_ASSERT_EQUAL(memcmp(x, y, N * 4), 0);
    tfc_backend_free(be);
    free(x), free(y);
}

/* The nearest float16 in double: |x| over the float16 quantum of its binade (2^-24 below
 * 2^-14), rounded to an integer ties to even (rint, the default rounding mode), times the
 * quantum; from 65520 on an infinity. */
static float ref_f16(float x)
{
    if (isnan(x) || isinf(x)) return x;
    double a = fabs((double)x);
    if (a >= 65520.0) return copysignf(INFINITY, x);
    int e;
    frexp(a, &e); /* a = m 2^e, m in [0.5, 1): the binade [2^(e-1), 2^e) */
    double q = a < ldexp(1.0, -14) ? ldexp(1.0, -24) : ldexp(1.0, e - 1 - 10);
    double r = rint(a / q) * q;
    return (float)copysign(r, x); /* -0 stays -0 */
}

static void f16_cases(void)
{
    const struct {
        uint32_t in, want;
    } cases[] = {
        {0x3f800000u, 0x3f800000u}, /* 1 */
        {0x3f801000u, 0x3f800000u}, /* halfway above 1, even below */
        {0x3f803000u, 0x3f804000u}, /* halfway, even above */
        {0x477fe000u, 0x477fe000u}, /* 65504, the largest */
        {0x477fefffu, 0x477fe000u}, /* just below 65520 */
        {0x477ff000u, 0x7f800000u}, /* 65520: infinity */
        {0x33800000u, 0x33800000u}, /* 2^-24, the smallest subnormal */
        {0x33000000u, 0x00000000u}, /* 2^-25: halfway to it, even is zero */
        {0x33000001u, 0x33800000u}, /* just above: up */
        {0x387fc000u, 0x387fc000u}, /* 2^-14 - 2^-24, the largest subnormal */
        {0x387fe000u, 0x38800000u}, /* halfway to 2^-14: up to even */
        {0xc0490fdbu, 0xc0490000u}, /* -pi */
        {0x7f800000u, 0x7f800000u},
        {0xff800000u, 0xff800000u},
        {0x80000000u, 0x80000000u},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint32_t got = bits(tfc_f16_round(from_bits(cases[i].in)));
        if (got != cases[i].want)
            printf("\n  %08x -> %08x, want %08x", cases[i].in, got, cases[i].want);
        CU_ASSERT_EQUAL(got, cases[i].want);
        CU_ASSERT_EQUAL(bits(ref_f16(from_bits(cases[i].in))), cases[i].want);
    }
    const uint32_t nans[] = {0x7f800001u, 0xff800001u, 0x7fc00000u, 0x7f801fffu};
    for (size_t i = 0; i < sizeof nans / sizeof *nans; i++) {
        float r = tfc_f16_round(from_bits(nans[i]));
        CU_ASSERT(isnan(r));
        CU_ASSERT_EQUAL(bits(r) & 0x1fffu, 0);
    }
    /* every float16 value is kept (all 63488 finite ones, through the reference's inverse:
     * sign, exponent, fraction) */
    int moved = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        uint32_t e = h >> 10 & 31, f = h & 1023;
        if (e == 31) continue;
        double v = e ? ldexp(1024 + f, (int)e - 25) : ldexp(f, -24);
        float x = (float)(h & 0x8000u ? -v : v);
        moved += bits(tfc_f16_round(x)) != bits(x);
    }
    CU_ASSERT_EQUAL(moved, 0);
}

/* The backend op over random bit patterns, most in float16's range, against ref_f16. */
static void f16_op(void)
{
    enum { N = 1 << 20 };
    float *x = malloc(N * 4), *y = malloc(N * 4);
    CU_ASSERT_FATAL(x && y);
    uint64_t s = 0x6a09e667f3bcc908ull;
    for (int i = 0; i < N; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint32_t u = (uint32_t)(s >> 16);
        /* exponents 2^-30 .. 2^20 mostly: subnormals, normals and overflow */
        if (i % 8) u = (u & 0x807fffffu) | (uint32_t)(97 + (s >> 40) % 51) << 23;
        if (i % 4 == 1) u = (u & 0xffffe000u) | 0x1000u; /* ties */
        x[i] = from_bits(u);
    }
    tfc_backend *be = tfc_cpu_backend_create(2);
    be->ops->round_f16(be, N, x, y);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        float want = ref_f16(x[i]);
        int same = isnan(want) ? isnan(y[i]) : bits(y[i]) == bits(want);
        if (!same && bad++ < 3)
            printf("\n  %08x -> %08x, want %08x", bits(x[i]), bits(y[i]), bits(want));
    }
    CU_ASSERT_EQUAL(bad, 0);
    tfc_backend_free(be);
    free(x), free(y);
}

/* ---- a bound model against the contract ----------------------------------------------------- */

static const char *mlp_yaml = "name: mlp\n"
                              "input: {shape: [12]}\n"
                              "layers:\n"
                              "  - Dense: {name: h, units: 10, activation: tanh}\n"
                              "  - Dense: {name: o, units: 5}\n"
                              "loss: sparse_categorical_crossentropy\n";

enum { NB = 6, NI = 12, NH = 10, NO = 5 };

/* The format under test: its precision, rounding, fraction bits, and the relative error a
 * gradient element may have before it counts as "off" (a sum in float32, not a dlogit
 * rounded to the other neighbour). */
typedef struct format {
    tfc_precision precision;
    float (*round)(float);
    int fraction_bits;
    double off;
} format;
static const format bf16_fmt = {TFC_PRECISION_BF16, tfc_bf16_round, 7, 1e-4};
static const format f16_fmt = {TFC_PRECISION_FLOAT16, tfc_f16_round, 10, 2e-5};
static const format *fmt = &bf16_fmt;

static float rnd(float x) { return fmt->round(x); }
static int representable(float x) { return bits(fmt->round(x)) == bits(x); }

/* Float32 weights that are not 16-bit values, and inputs that are not either. */
static void fill_weights(tfc_model *m, float *kh, float *bh, float *ko, float *bo)
{
    tfc_test_fill(kh, NI * NH, -0.6f, 0.6f, 21);
    tfc_test_fill(bh, NH, -0.2f, 0.2f, 22);
    tfc_test_fill(ko, NH * NO, -0.6f, 0.6f, 23);
    tfc_test_fill(bo, NO, -0.2f, 0.2f, 24);
    float *w[4] = {kh, bh, ko, bo};
    for (int k = 0; k < 4; k++) {
        tfc_param *p = &tfc_model_layer(m, k / 2)->params[k % 2];
        tfc_model_param_upload(m, p, w[k]);
    }
}

/* y = round(round(tanh(round(x) Kh_r + bh_r)) Ko_r + bo_r), in double before each rounding
 * (_r: rounded): the activation reads the float32 sum, whose rounded value only the
 * activation's derivative reads. */
static void ref_forward(const float *x, const float *kh, const float *bh, const float *ko,
                        const float *bo, float *h, float *y)
{
    for (int n = 0; n < NB; n++) {
        for (int j = 0; j < NH; j++) {
            double z = rnd(bh[j]);
            for (int i = 0; i < NI; i++) z += (double)rnd(x[n * NI + i]) * rnd(kh[i * NH + j]);
            h[n * NH + j] = rnd((float)tanh((float)z));
        }
        for (int j = 0; j < NO; j++) {
            double z = rnd(bo[j]);
            for (int i = 0; i < NH; i++) z += (double)h[n * NH + i] * rnd(ko[i * NO + j]);
            y[n * NO + j] = rnd((float)z);
        }
    }
}

/* Elements of got that differ from want by more than one step of the format at want (a
 * float32 sum may round the other way near a midpoint), and whether any differ at all;
 * every got must be a value of the format. */
static int far_apart(const float *got, const float *want, int n, int *differ)
{
    int far = 0;
    for (int i = 0; i < n; i++) {
        CU_ASSERT(representable(got[i]));
        if (got[i] != want[i]) ++*differ;
        if (fabsf(got[i] - want[i]) > ldexpf(fabsf(want[i]), -fmt->fraction_bits) + 1e-30f) far++;
    }
    return far;
}

static void forward_contract_of(const format *f16)
{
    fmt = f16;
    tfc_backend *be = tfc_cpu_backend_create(2);
    tfc_model *m = tfc_test_model(mlp_yaml);
    CU_ASSERT_FATAL(m != NULL);
    tfc_model_set_precision(m, fmt->precision);
    CU_ASSERT_EQUAL(tfc_model_precision(m), fmt->precision);
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, NB, &err), TFC_OK);
    float kh[NI * NH], bh[NH], ko[NH * NO], bo[NO], x[NB * NI], h[NB * NH], y[NB * NO];
    float got[NB * NO];
    fill_weights(m, kh, bh, ko, bo);
    tfc_test_fill(x, NB * NI, -1, 1, 25);
    int wide = 0;
    for (int i = 0; i < NI * NH; i++) wide += !representable(kh[i]);
    CU_ASSERT(wide > NI * NH / 2); /* the fixture tests something */

    CU_ASSERT_EQUAL_FATAL(tfc_model_forward(m, x, NB, 0, 0, 0, &err), TFC_OK);
    tfc_model_get_output(m, got);
    ref_forward(x, kh, bh, ko, bo, h, y);
    int differ = 0;
    CU_ASSERT_EQUAL(far_apart(got, y, NB * NO, &differ), 0);
    CU_ASSERT(differ <= NB * NO / 10);

    /* the weights' float32 values are what the model keeps and gives back */
    float back[NI * NH];
    tfc_model_param_download(m, &tfc_model_layer(m, 0)->params[0], back);
    CU_ASSERT_EQUAL(memcmp(back, kh, sizeof kh), 0);

    /* training mode: the same output, and the output gradients bfloat16 values */
    int32_t labels[NB] = {0, 1, 2, 3, 4, 0};
    CU_ASSERT_EQUAL_FATAL(tfc_model_forward(m, x, NB, 1, 0, 0, &err), TFC_OK);
    float got_train[NB * NO];
    tfc_model_get_output(m, got_train);
    CU_ASSERT_EQUAL(memcmp(got_train, got, sizeof got), 0);
    tfc_batch_result r;
    CU_ASSERT_EQUAL_FATAL(tfc_model_loss(m, labels, 1, &r, &err), TFC_OK);
    tfc_model_zero_grad(m);
    tfc_model_backward(m);
    /* Ko's gradient = h^T dlogits, dlogits = round((softmax(y) - onehot) / NB): check it */
    float gko[NH * NO];
    tfc_model_grad_download(m, &tfc_model_layer(m, 1)->params[0], gko);
    double worst = 0;
    int off = 0;
    for (int i = 0; i < NH; i++)
        for (int j = 0; j < NO; j++) {
            double g = 0;
            for (int n = 0; n < NB; n++) {
                double mx = -INFINITY, s = 0;
                for (int k = 0; k < NO; k++) mx = fmax(mx, got[n * NO + k]);
                for (int k = 0; k < NO; k++) s += exp(got[n * NO + k] - mx);
                double p = exp(got[n * NO + j] - mx) / s - (labels[n] == j);
                g += (double)h[n * NH + i] * rnd((float)(p / NB));
            }
            double e = fabs(g - gko[i * NO + j]) / (fabs(g) + 1e-3);
            worst = fmax(worst, e);
            off += e > fmt->off;
        }
    /* float32 sums: 1e-6. A dlogit that float32 rounds to the other neighbour than double
     * does moves its terms by a step (2^-8 in bfloat16): a few such, not most (as unrounded
     * dlogits would give) */
    CU_ASSERT(worst < 2e-2);
    CU_ASSERT(off <= NH * NO / 10);
    if (off > NH * NO / 10)
        printf("\n  %d of %d gradients off by more than %g", off, NH * NO, fmt->off);

    /* float32 on the same weights gives another output: the format did something */
    tfc_model *f = tfc_test_model(mlp_yaml);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(f, be, NB, &err), TFC_OK);
    fill_weights(f, kh, bh, ko, bo);
    CU_ASSERT_EQUAL_FATAL(tfc_model_forward(f, x, NB, 0, 0, 0, &err), TFC_OK);
    float f32[NB * NO];
    tfc_model_get_output(f, f32);
    int exact = 0;
    double close = 0;
    for (int i = 0; i < NB * NO; i++) {
        exact += representable(f32[i]);
        close = fmax(close, fabs(f32[i] - got[i]));
    }
    CU_ASSERT(exact < NB * NO / 2);
    CU_ASSERT(close < 0.05);
    tfc_model_free(f);
    tfc_model_free(m);
    tfc_backend_free(be);
    fmt = &bf16_fmt;
}

static void forward_contract(void) { forward_contract_of(&bf16_fmt); }
static void forward_contract_f16(void) { forward_contract_of(&f16_fmt); }

/* A weight updated by less than half a bfloat16 step moves its float32 value, and the next
 * forward reads the new value rounded: updates accumulate in float32. */
static void updates_in_float32(void)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *m = tfc_test_model(mlp_yaml);
    CU_ASSERT_FATAL(m != NULL);
    tfc_model_set_precision(m, TFC_PRECISION_BF16);
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, NB, &err), TFC_OK);
    float kh[NI * NH], bh[NH], ko[NH * NO], bo[NO], x[NB * NI], first[NB * NO], out[NB * NO];
    fill_weights(m, kh, bh, ko, bo);
    tfc_test_fill(x, NB * NI, -1, 1, 26);
    /* o's bias at 1, then 64 times an eighth of its bfloat16 step (1/128) more: the rounded
     * copy moves only every 4th time, the float32 value every time */
    float one[NO], b[NO], *params = tfc_model_params(m);
    for (int j = 0; j < NO; j++) one[j] = 1.0f;
    tfc_param *bias = &tfc_model_layer(m, 1)->params[1];
    tfc_model_param_upload(m, bias, one);
    int64_t at = NI * NH + NH + NH * NO; /* the bias's offset: the trainables in layer order */
    for (int k = 0; k <= 64; k++) {
        CU_ASSERT_EQUAL_FATAL(tfc_model_forward(m, x, NB, 0, 0, 0, &err), TFC_OK);
        tfc_model_get_output(m, k ? out : first);
        if (k == 1) CU_ASSERT_EQUAL(memcmp(out, first, sizeof out), 0);
        if (k < 64)
            for (int j = 0; j < NO; j++) params[at + j] += 1.0f / 1024;
    }
    tfc_model_param_download(m, bias, b);
    CU_ASSERT_EQUAL(b[0], 1.0625f);
    /* logits of bias 1.0625 against bias 1: about 0.0625 apart */
    for (int i = 0; i < NB * NO; i++) CU_ASSERT(fabsf(out[i] - first[i]) > 0.03f);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* A backend without round_bf16 (the GPU's until its kernels have run) refuses bf16; one
 * with round_f16 but without loss_scale_at refuses float16. */
static void refused_without_op(void)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_backend_ops table = *be->ops;
    table.round_bf16 = NULL;
    const tfc_backend_ops *cpu = be->ops;
    be->ops = &table;
    tfc_model *m = tfc_test_model(mlp_yaml);
    tfc_model_set_precision(m, TFC_PRECISION_BF16);
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, NB, &err), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "precision: bf16 is not available on"));
    tfc_model_set_precision(m, TFC_PRECISION_FLOAT16);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, NB, &err), TFC_OK);
    table.loss_scale_at = NULL;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, NB, &err), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "precision: float16 is not available on"));
    tfc_model_set_precision(m, TFC_PRECISION_FLOAT32);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, NB, &err), TFC_OK);
    tfc_model_free(m);
    be->ops = cpu;
    tfc_backend_free(be);
}

/* The plan counts the weights' copies: one float per trainable parameter on the CPU. */
static void memory_plan(void)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *m = tfc_test_model(mlp_yaml);
    tfc_memory_plan a, b;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_model_plan_memory(m, be, 8, &a, &err), TFC_OK);
    tfc_model_set_precision(m, TFC_PRECISION_BF16);
    CU_ASSERT_EQUAL_FATAL(tfc_model_plan_memory(m, be, 8, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(b.params - a.params, (size_t)tfc_model_trainable_count(m) * 4);
    CU_ASSERT_EQUAL(b.arena, a.arena);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, 8, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_model_memory(m)->params, b.params);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* ---- Keras 3's mixed policies ------------------------------------------------------------- */

/* max |a - b| over max |b| */
static double gap(const float *a, const float *b, int64_t n)
{
    double d = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return d / (m > 0 ? m : 1);
}

/* tests/ref/keras_precision.py's fixtures: the model, its weights loaded by name, run in each
 * precision against Keras's output under the matching policy (mixed_bfloat16,
 * mixed_float16): within four steps of the format. Keras rounds at other places too (a
 * Dense's product before its bias, the activation's result), so the two are not the same
 * bits; in these small models both stay about a step from float32 (the printout says how
 * far), so this checks agreement at the format's precision, not the rounding points, which
 * forward_contract does. */
static void keras_parity(void)
{
    const char *cases[] = {"mlp", "cnn"};
    const struct {
        tfc_precision p;
        const char *tag;
        double bound; /* four steps of the format, relative to the largest output */
    } precs[] = {{TFC_PRECISION_FLOAT32, "float32", 1e-5},
                 {TFC_PRECISION_BF16, "bf16", 4 * 0x1p-8},
                 {TFC_PRECISION_FLOAT16, "float16", 4 * 0x1p-11}};
    tfc_backend *be = tfc_cpu_backend_create(2);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char path[256], key[32];
        snprintf(path, sizeof path, "tests/ref/precision/%s.safetensors", cases[c]);
        tfc_error err;
        tfc_error_clear(&err);
        tfc_st_file *f = tfc_st_open(path, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        const char *yaml = tfc_st_meta(f, "yaml");
        const tfc_st_tensor *xt = tfc_st_find(f, "x");
        const int batch = (int)xt->shape.dim[0];
        const tfc_st_tensor *y32 = tfc_st_find(f, "y:float32");
        CU_ASSERT_PTR_NOT_NULL_FATAL(y32);
        for (size_t k = 0; k < sizeof precs / sizeof *precs; k++) {
            snprintf(key, sizeof key, "y:%s", precs[k].tag);
            const tfc_st_tensor *yt = tfc_st_find(f, key);
            CU_ASSERT_PTR_NOT_NULL_FATAL(yt);
            tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), cases[c], &err);
            CU_ASSERT_PTR_NOT_NULL_FATAL(m);
            tfc_model_set_precision(m, precs[k].p);
            CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, batch, &err), TFC_OK);
            tfc_weights_report rep = {0};
            CU_ASSERT_EQUAL_FATAL(tfc_model_load_weights(m, path, &rep, &err), TFC_OK);
            CU_ASSERT(rep.missing == 0 && rep.mismatched == 0 && rep.matched > 0);
            free(rep.text);
            float *out = malloc(yt->nbytes);
            CU_ASSERT_EQUAL_FATAL(tfc_model_forward(m, xt->data, batch, 0, 1, 0, &err), TFC_OK);
            tfc_model_get_output(m, out);
            double ours = gap(out, yt->data, yt->numel);
            double theirs = gap(y32->data, yt->data, yt->numel);
            printf("\n  %s %s: tfc against Keras %.3g (bound %.3g); Keras's float32 against "
                   "it %.3g", cases[c], precs[k].tag, ours, precs[k].bound, theirs);
            CU_ASSERT(ours <= precs[k].bound);
            free(out);
            tfc_model_free(m);
        }
        tfc_st_close(f);
    }
    tfc_backend_free(be);
}

/* ---- the solver key ---------------------------------------------------------------------- */

static const char *solver_text =
    "model:\n"
    "  name: tiny\n"
    "  input: {shape: [16]}\n"
    "  layers:\n"
    "    - Dense: {name: hidden, units: 32, activation: relu}\n"
    "    - BatchNormalization: {}\n"
    "    - Dense: {name: out, units: 4}\n"
    "  metrics: [accuracy]\n"
    "data:\n"
    "  train:\n"
    "    source: {type: npy, features: train_x.npy, labels: train_y.npy}\n"
    "    pipeline:\n"
    "      - shuffle: {buffer_size: 100}\n"
    "      - repeat: {}\n"
    "      - batch: {batch_size: 16}\n"
    "  test:\n"
    "    source: {type: npy, features: test_x.npy, labels: test_y.npy}\n"
    "    pipeline:\n"
    "      - batch: {batch_size: 50}\n"
    "optimizer: {type: adam, learning_rate: 0.01}\n"
    "max_iter: 200\n"
    "test_interval: 100\n"
    "display: 20\n"
    "snapshot: {interval: 100, keep: 0}\n"
    "device: cpu\n"
    "seed: 5\n";

static const char *solver_path(void)
{
    static char path[1024];
    if (!path[0]) {
        tfc_test_write_split("train_x.npy", "train_y.npy", 512, 11);
        tfc_test_write_split("test_x.npy", "test_y.npy", 200, 12);
        snprintf(path, sizeof path, "%s", tfc_test_write("tiny.yaml", solver_text, -1));
    }
    return path;
}

static int host_step_next;   /* the host_step option of the next train() call */
static int cuda_graphs_next; /* and its cuda_graphs */

static tfc_status train(const char *out, const char **sets, int nsets, const char *resume,
                        FILE *console, tfc_train_result *res, tfc_error *err)
{
    tfc_solver_options o = {0};
    o.host_step = host_step_next;
    o.cuda_graphs = cuda_graphs_next;
    o.sets = sets;
    o.nsets = nsets;
    o.out_dir = tfc_test_path(out);
    o.resume = resume;
    o.console = console;
    o.threads = 2;
    tfc_error_clear(err);
    tfc_solver *s = tfc_solver_load(solver_path(), &o, err);
    if (!s) {
        printf("\n%s", err->text);
        return err->code;
    }
    tfc_status st = tfc_solver_train(s, res, err);
    if (st) printf("\n%s", err->text);
    tfc_solver_free(s);
    return st;
}

/* The floats of every F32 tensor of a weights file that are not bfloat16 values. */
static int64_t non_bf16(const char *path)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open(path, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    int64_t n = 0;
    for (int i = 0; i < tfc_st_count(f); i++) {
        const tfc_st_tensor *t = tfc_st_tensor_at(f, i);
        if (t->dtype != TFC_F32) continue;
        const float *v = t->data;
        for (int64_t k = 0; k < t->numel; k++) n += !is_bf16(v[k]);
    }
    tfc_st_close(f);
    return n;
}

/* Whether run directory dir's TensorBoard event file holds `text` (a tag is stored as its
 * bytes). */
static int events_hold(const char *dir, const char *text)
{
    DIR *d = opendir(dir);
    int found = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strncmp(e->d_name, "events.out.tfevents.", 20)) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t n = 0, k = strlen(text);
        char *b = tfc_test_read(path, &n);
        for (size_t i = 0; b && i + k <= n && !found; i++) found = !memcmp(b + i, text, k);
        free(b);
    }
    if (d) closedir(d);
    return found;
}

static int files_equal(const char *a, const char *b)
{
    size_t la, lb;
    char *x = tfc_test_read(a, &la), *y = tfc_test_read(b, &lb);
    int same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x), free(y);
    return same;
}

static const char *in(const char *dir, const char *name)
{
    static char bufs[4][2048];
    static int k;
    char *b = bufs[k++ & 3];
    snprintf(b, sizeof bufs[0], "%s/%s", tfc_test_path(dir), name);
    return b;
}

static void solver_bf16(void)
{
    FILE *quiet = fopen("/dev/null", "w");
    tfc_train_result f32, b16, again;
    tfc_error err;
    const char *bf[] = {"precision=bf16"};
    CU_ASSERT_EQUAL_FATAL(train("f32", NULL, 0, NULL, quiet, &f32, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(train("b16", bf, 1, NULL, quiet, &b16, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(train("b16b", bf, 1, NULL, quiet, &again, &err), TFC_OK);
    /* it learns as float32 does, and is not float32 */
    printf("\n  test accuracy float32 %.4f bf16 %.4f, loss %.5f %.5f", f32.test.metric[0],
           b16.test.metric[0], f32.test.loss, b16.test.loss);
    CU_ASSERT(b16.test.metric[0] > 0.6);
    CU_ASSERT(fabs(b16.test.metric[0] - f32.test.metric[0]) < 0.05);
    CU_ASSERT(b16.test.loss != f32.test.loss);
    /* the same bits again, as float32 on the CPU at a fixed thread count */
    CU_ASSERT(files_equal(in("b16", "final.safetensors"), in("b16b", "final.safetensors")));
    /* the weights written are the float32 ones, not their bfloat16 copies */
    CU_ASSERT(non_bf16(in("b16", "final.safetensors")) > 100);
    /* config.yaml records the key */
    char *cfg = tfc_test_read(in("b16", "config.yaml"), NULL);
    CU_ASSERT_PTR_NOT_NULL(cfg && strstr(cfg, "precision: bf16"));
    free(cfg);
    /* the model tools (tfc-predict, tfc-export) take its model in float32; tfc-test and
     * tfc-summary, the solver, in bf16 */
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_load_config(in("b16", "config.yaml"), NULL, 0, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(tfc_model_precision(m), TFC_PRECISION_FLOAT32);
    tfc_model_free(m);
    tfc_solver_options o = {0};
    tfc_solver *s = tfc_solver_load(in("b16", "config.yaml"), &o, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(tfc_model_precision(tfc_solver_model(s)), TFC_PRECISION_BF16);
    tfc_solver_free(s);
    /* tfc-summary counts the copies with the parameters and says so */
    const char *bin = tfc_test_bin("tfc-summary");
    if (bin) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "'%s/tfc-summary' '%s' --set precision=bf16", bin, solver_path());
        tfc_test_sh_expect(0, cmd, "of which bf16 copies", NULL);
    }
    fclose(quiet);
}

/* Snapshots resume across precisions both ways; the change is said and applied. */
static void resume_across(void)
{
    tfc_train_result r;
    tfc_error err;
    const char *bf[] = {"precision=bf16"}, *f32[] = {"precision=float32"};
    char snap[4096];
    FILE *quiet = fopen("/dev/null", "w");
    CU_ASSERT_EQUAL_FATAL(train("r_f32", NULL, 0, NULL, quiet, &r, &err), TFC_OK);
    snprintf(snap, sizeof snap, "%s", in("r_f32", "snapshots/tiny_iter_100.state"));
    /* float32 to 100, bf16 after: the log says so */
    const char *log = tfc_test_path("resume_log.txt");
    FILE *console = fopen(log, "w");
    CU_ASSERT_EQUAL_FATAL(train("r_to_bf16", bf, 1, snap, console, &r, &err), TFC_OK);
    fclose(console);
    char *text = tfc_test_read(log, NULL);
    CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "precision: (absent) -> bf16"));
    /* and that it is no faster on the CPU */
    CU_ASSERT_PTR_NOT_NULL(text && strstr(text, "note: precision bf16 on the CPU computes its "
                                                "16-bit numbers in float32 buffers"));
    if (text && !strstr(text, "precision: (absent) -> bf16")) printf("\n%s", text);
    free(text);
    CU_ASSERT_EQUAL(r.iterations, 200);
    /* it went on in bf16: not the float32 run's final weights */
    CU_ASSERT(!files_equal(in("r_f32", "final.safetensors"), in("r_to_bf16", "final.safetensors")));
    tfc_train_result b;
    CU_ASSERT_EQUAL_FATAL(train("r_bf16", bf, 1, NULL, quiet, &b, &err), TFC_OK);
    snprintf(snap, sizeof snap, "%s", in("r_bf16", "snapshots/tiny_iter_100.state"));
    CU_ASSERT_EQUAL_FATAL(train("r_to_f32", f32, 1, snap, quiet, &r, &err), TFC_OK);
    CU_ASSERT_EQUAL(r.iterations, 200);
    CU_ASSERT(fabs(r.test.metric[0] - b.test.metric[0]) < 0.05);
    /* and a bf16 run resumed in bf16 is the uninterrupted one, bit for bit */
    CU_ASSERT_EQUAL_FATAL(train("r_bf16_again", bf, 1, snap, quiet, &r, &err), TFC_OK);
    CU_ASSERT(files_equal(in("r_bf16", "final.safetensors"),
                          in("r_bf16_again", "final.safetensors")));
    fclose(quiet);
}

/* ---- float16's dynamic loss scale ------------------------------------------------------------ */

#define F16_GROWTH "loss_scale={initial_scale: 1, dynamic_growth_steps: 20}"
#define SGD "optimizer={type: sgd, learning_rate: 0.05}"

/* From 1, doubling after every 20 finite updates: 2^10 after 200, none skipped; the updates
 * unscaled (SGD takes the gradient's size as it is: a scale left in would move the weights
 * up to 1024 times too far), so it learns as float32 does. */
static void loss_scale_growth(void)
{
    FILE *quiet = fopen("/dev/null", "w");
    tfc_train_result a, b;
    tfc_error err;
    const char *f16[] = {"precision=float16", F16_GROWTH, SGD}, *f32[] = {SGD};
    CU_ASSERT_EQUAL_FATAL(train("ls_grow", f16, 3, NULL, quiet, &a, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(train("ls_grow32", f32, 1, NULL, quiet, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(a.loss_scale, 1024.0);
    CU_ASSERT_EQUAL(a.loss_scale_overflows, 0);
    CU_ASSERT_EQUAL(b.loss_scale, 0.0); /* float32: none */
    printf("\n  sgd: test accuracy float32 %.4f float16 %.4f", b.test.metric[0], a.test.metric[0]);
    CU_ASSERT(a.test.metric[0] > 0.6);
    CU_ASSERT(fabs(a.test.metric[0] - b.test.metric[0]) < 0.05);
    char *sum = tfc_test_read(in("ls_grow", "summary.json"), NULL);
    const char *ls = sum ? strstr(sum, "\"loss_scale\": {") : NULL;
    CU_ASSERT_PTR_NOT_NULL(ls && strstr(ls, "\"scale\": 1024.0") && strstr(ls, "\"overflows\": 0"));
    /* TensorBoard has the scale beside the rate, float32 runs none: a Summary.Value with
     * tag (field 1) "loss_scale" and a simple_value (field 2, fixed32) */
    CU_ASSERT(events_hold(tfc_test_path("ls_grow"), "\x0a\x0aloss_scale\x15"));
    CU_ASSERT(!events_hold(tfc_test_path("ls_grow32"), "\x0a\x0aloss_scale\x15"));
    CU_ASSERT(events_hold(tfc_test_path("ls_grow32"), "\x0a\x02lr\x15")); /* the pattern works */
    free(sum);
    fclose(quiet);
}

/* A scale so large that the scaled gradients overflow float16: each such update is skipped,
 * the weights as they were (the same bits as updates by a rate of 0), and the scale halves
 * until the gradients fit; then it trains. */
static void loss_scale_overflow(void)
{
    FILE *quiet = fopen("/dev/null", "w");
    tfc_train_result a, b, c;
    tfc_error err;
    const char *huge[] = {"precision=float16", "loss_scale={initial_scale: 1152921504606846976}",
                          "max_iter=5"};
    const char *still[] = {"precision=float16", "max_iter=5",
                           "optimizer={type: adam, learning_rate: 0}"};
    CU_ASSERT_EQUAL_FATAL(train("ls_huge", huge, 3, NULL, quiet, &a, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(train("ls_still", still, 3, NULL, quiet, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(a.loss_scale_overflows, 5);
    CU_ASSERT_EQUAL(a.loss_scale, ldexp(1.0, 55));
    CU_ASSERT_EQUAL(b.loss_scale_overflows, 0);
    CU_ASSERT(files_equal(in("ls_huge", "final.safetensors"), in("ls_still", "final.safetensors")));
    const char *settle[] = {"precision=float16", "loss_scale={initial_scale: 1099511627776}"};
    CU_ASSERT_EQUAL_FATAL(train("ls_settle", settle, 2, NULL, quiet, &c, &err), TFC_OK);
    printf("\n  from 2^40: %lld overflows, scale 2^%g at 200, test accuracy %.4f",
           (long long)c.loss_scale_overflows, log2(c.loss_scale), c.test.metric[0]);
    CU_ASSERT(c.loss_scale_overflows >= 15 && c.loss_scale_overflows <= 40);
    CU_ASSERT(c.loss_scale <= ldexp(1.0, 25));
    CU_ASSERT(c.test.metric[0] > 0.6);
    fclose(quiet);
}

/* The host path (host_step) and the device path decide alike: the same bits, overflows
 * included; also with micro-batches accumulated and the unscaled norm clipped. */
static void loss_scale_paths(void)
{
    FILE *quiet = fopen("/dev/null", "w");
    tfc_train_result a, b;
    tfc_error err;
    const char *sets[] = {"precision=float16", "loss_scale={initial_scale: 1099511627776}",
                          "max_iter=60", "iter_size=2", "clip_gradients=0.5"};
    for (int k = 3; k <= 5; k += 2) {
        char dev[32], host[32];
        snprintf(dev, sizeof dev, "ls_device%d", k);
        snprintf(host, sizeof host, "ls_host%d", k);
        CU_ASSERT_EQUAL_FATAL(train(dev, sets, k, NULL, quiet, &a, &err), TFC_OK);
        host_step_next = 1;
        CU_ASSERT_EQUAL_FATAL(train(host, sets, k, NULL, quiet, &b, &err), TFC_OK);
        host_step_next = 0;
        CU_ASSERT(a.loss_scale_overflows > 10);
        CU_ASSERT_EQUAL(a.loss_scale_overflows, b.loss_scale_overflows);
        CU_ASSERT_EQUAL(a.loss_scale, b.loss_scale);
        CU_ASSERT(files_equal(in(dev, "final.safetensors"), in(host, "final.safetensors")));
    }
    fclose(quiet);
}

/* The staged step (cuda_graphs; on the CPU launched, on a GPU replayed from a graph) reads
 * S from the step state: the unstaged device path's bits through a run whose scale falls
 * from 2^40 (overflows) and then grows, with clipping and a test pass; asked for, it does
 * not refuse float16. */
static void loss_scale_staged(void)
{
    tfc_train_result a, b;
    tfc_error err;
    const char *sets[] = {"precision=float16", "max_iter=80", "clip_gradients=0.5",
                          "loss_scale={initial_scale: 1099511627776, dynamic_growth_steps: 5}",
                          "test_interval=40"};
    char *text = NULL;
    size_t len = 0;
    FILE *console = open_memstream(&text, &len);
    CU_ASSERT_EQUAL_FATAL(train("lss_u", sets, 5, NULL, NULL, &a, &err), TFC_OK);
    cuda_graphs_next = 1;
    tfc_status st = train("lss_s", sets, 5, NULL, console, &b, &err);
    cuda_graphs_next = 0;
    fclose(console);
    CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
    CU_ASSERT(a.loss_scale_overflows > 10);
    CU_ASSERT_EQUAL(a.loss_scale_overflows, b.loss_scale_overflows);
    CU_ASSERT_EQUAL(a.loss_scale, b.loss_scale);
    CU_ASSERT(files_equal(in("lss_u", "final.safetensors"), in("lss_s", "final.safetensors")));
    CU_ASSERT(!memcmp(&a.test, &b.test, sizeof a.test));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "note: cuda_graphs: cpu has no CUDA graphs"));
    CU_ASSERT_PTR_NULL(strstr(text, "not used with"));
    free(text);
}

/* The field (1 min, 2 max, 3 num, 4 sum, 5 sum_squares) of the last histogram tagged `tag`
 * in run directory dir's event file: Summary.Value's tag (field 1) is followed by its histo
 * (field 5), whose first five fields are doubles written in order (solver/events.c). */
static double histogram_field(const char *dir, const char *tag, int field)
{
    DIR *d = opendir(dir);
    double v = NAN;
    char want[128];
    const size_t k = (size_t)snprintf(want, sizeof want, "\x0a%c%s\x2a", (int)strlen(tag), tag);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strncmp(e->d_name, "events.out.tfevents.", 20)) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t n = 0;
        unsigned char *b = (unsigned char *)tfc_test_read(path, &n);
        for (size_t i = 0; b && i + k + 2 + 9 * 5 <= n; i++) {
            if (memcmp(b + i, want, k)) continue;
            size_t at = i + k;
            while (b[at] & 0x80) at++; /* the histo's length */
            at++;
            at += 9 * (size_t)(field - 1);
            if (b[at] == (unsigned char)(field << 3 | 1)) memcpy(&v, b + at + 1, 8);
        }
        free(b);
    }
    if (d) closedir(d);
    return v;
}

/* The gradient histograms are the gradients' own, S undone: float16's sums of squares as
 * float32's (their roundings apart), not S^2 times them. */
static void loss_scale_histograms(void)
{
    tfc_train_result a, b;
    tfc_error err;
    const char *f16[] = {"precision=float16", "max_iter=3", "summary={histogram_interval: 3}",
                         SGD},
               *f32[] = {"max_iter=3", "summary={histogram_interval: 3}", SGD};
    CU_ASSERT_EQUAL_FATAL(train("lsh16", f16, 4, NULL, NULL, &a, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(train("lsh32", f32, 3, NULL, NULL, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(a.loss_scale, 32768.0);
    for (int k = 0; k < 2; k++) {
        const char *tag = k ? "gradients/out/kernel" : "gradients/hidden/bias";
        double h = histogram_field(tfc_test_path("lsh16"), tag, 5);
        double f = histogram_field(tfc_test_path("lsh32"), tag, 5);
        double w = histogram_field(tfc_test_path("lsh32"), "weights/out/kernel", 5);
        if (!(fabs(h / f - 1) < 0.05)) printf("\n  %s: sum of squares %g, float32 %g", tag, h, f);
        CU_ASSERT(f > 0 && w > 0 && f != w);
        CU_ASSERT(fabs(h / f - 1) < 0.05);
    }
}

/* A resumed float16 run goes on with the scale and count its snapshot had: the same bits
 * and scale as the uninterrupted run. A float32 snapshot resumes in float16 from the
 * configured start. */
static void loss_scale_resume(void)
{
    FILE *quiet = fopen("/dev/null", "w");
    tfc_train_result a, b;
    tfc_error err;
    const char *f16[] = {"precision=float16", F16_GROWTH, SGD};
    CU_ASSERT_EQUAL_FATAL(train("lsr_full", f16, 3, NULL, quiet, &a, &err), TFC_OK);
    char snap[4096];
    snprintf(snap, sizeof snap, "%s", in("lsr_full", "snapshots/tiny_iter_100.state"));
    CU_ASSERT_EQUAL_FATAL(train("lsr_resumed", f16, 3, snap, quiet, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(b.loss_scale, a.loss_scale);
    CU_ASSERT(files_equal(in("lsr_full", "final.safetensors"),
                          in("lsr_resumed", "final.safetensors")));
    const char *f32[] = {SGD};
    CU_ASSERT_EQUAL_FATAL(train("lsr_32", f32, 1, NULL, quiet, &b, &err), TFC_OK);
    snprintf(snap, sizeof snap, "%s", in("lsr_32", "snapshots/tiny_iter_100.state"));
    CU_ASSERT_EQUAL_FATAL(train("lsr_32to16", f16, 3, snap, quiet, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(b.loss_scale, 32.0); /* 1, doubled 5 times in the 100 resumed updates */
    fclose(quiet);
}

static void key_errors(void)
{
    tfc_solver_options o = {0};
    const char *sets[] = {"precision=bfloat16"};
    o.sets = sets;
    o.nsets = 1;
    tfc_error err;
    tfc_error_clear(&err);
    tfc_solver *s = tfc_solver_load(solver_path(), &o, &err);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_EQUAL(err.code, TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "precision"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "bf16"));
    if (!strstr(err.text, "bf16")) printf("\n%s", err.text);
    tfc_solver_free(s);
    /* loss_scale is float16's; its scale a power of two */
    const char *other[] = {"precision=bf16", "loss_scale={initial_scale: 1024}"};
    o.sets = other;
    o.nsets = 2;
    tfc_error_clear(&err);
    CU_ASSERT_PTR_NULL(tfc_solver_load(solver_path(), &o, &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "loss_scale: applies to precision: float16"));
    if (!strstr(err.text, "applies to precision: float16")) printf("\n%s", err.text);
    /* Keras's per-layer dtype policy: refused, pointing at the solver's key */
    const char *dtype_yaml = "input: {shape: [4]}\nlayers:\n"
                             "  - Dense: {units: 3, dtype: mixed_bfloat16}\nloss: mse\n";
    tfc_error_clear(&err);
    CU_ASSERT_PTR_NULL(tfc_model_from_string(dtype_yaml, strlen(dtype_yaml), "m.yaml", &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "layers[0].Dense.dtype: mixed_bfloat16"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "write precision: bf16 in the solver file"));
    const char *odd[] = {"precision=float16", "loss_scale={initial_scale: 3000}"};
    o.sets = odd;
    tfc_error_clear(&err);
    CU_ASSERT_PTR_NULL(tfc_solver_load(solver_path(), &o, &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "expected a power of two"));
    if (!strstr(err.text, "power of two")) printf("\n%s", err.text);
}

TFC_TEST_MAIN("precision", {"round_cases", round_cases}, {"round_op", round_op},
              {"f16_cases", f16_cases}, {"f16_op", f16_op},
              {"forward_contract", forward_contract},
              {"forward_contract_f16", forward_contract_f16},
              {"updates_in_float32", updates_in_float32},
              {"refused_without_op", refused_without_op}, {"memory_plan", memory_plan},
              {"keras_parity", keras_parity}, {"solver_bf16", solver_bf16},
              {"resume_across", resume_across}, {"loss_scale_growth", loss_scale_growth},
              {"loss_scale_overflow", loss_scale_overflow}, {"loss_scale_paths", loss_scale_paths},
              {"loss_scale_resume", loss_scale_resume},
              {"loss_scale_staged", loss_scale_staged},
              {"loss_scale_histograms", loss_scale_histograms}, {"key_errors", key_errors})
