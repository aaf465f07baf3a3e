/* Keras's noise layers (src/layers/noise.c): Dropout with a noise_shape, SpatialDropout1D,
 * 2D and 3D, AlphaDropout, GaussianNoise and GaussianDropout. Their draws cannot equal
 * Keras's (another generator), so what is held is what Keras's code defines: which elements
 * share a draw (a whole channel of an example for the spatial dropouts), the factor and the
 * shift of each kind (AlphaDropout's a and b from Keras's own formula), the moments of the
 * noise, the identity at inference and at rate 0, and the refusals (a bad noise_shape, a
 * rank the layer does not take, a backend without the kernels). The noise op's DROPOUT with
 * a draw per element equals the dropout op bit for bit, and its results do not depend on the
 * thread count. Gradients are checked numerically in test_layers (case `noise`). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "graph/model.h"
#include "gradcheck.h"
#include "testutil.h"

/* The model of `layer` after an input of `shape`, or NULL with the error in err. */
static tfc_model *model_of(const char *shape, const char *layer, tfc_error *err)
{
    char yaml[1024];
    snprintf(yaml, sizeof yaml, "input: {shape: %s}\nlayers:\n  - %s\n", shape, layer);
    tfc_error_clear(err);
    return tfc_model_from_string(yaml, strlen(yaml), "m.yaml", err);
}

typedef struct run {
    tfc_model *m;
    tfc_backend *be;
} run;

static run bound(const char *shape, const char *layer, int batch, int threads)
{
    tfc_error err;
    run r = {model_of(shape, layer, &err), tfc_cpu_backend_create(threads)};
    if (!r.m) fprintf(stderr, "\n%s\n", err.text);
    TFC_ASSERT(r.m && tfc_model_bind(r.m, r.be, batch, &err) == TFC_OK);
    return r;
}

static void unbound(run r)
{
    tfc_model_free(r.m);
    tfc_backend_free(r.be);
}

/* The output of a forward pass of n examples x, in training or not. */
static float *output(run r, const float *x, int n, int training)
{
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(tfc_model_forward(r.m, x, n, training, 1, 0, &err) == TFC_OK);
    int64_t k = (int64_t)n * tfc_shape_numel(tfc_model_output_shape(r.m));
    float *y = malloc((size_t)k * 4);
    tfc_model_get_output(r.m, y);
    return y;
}

/* x[i] / y[i] for x far from 0: the factor the layer applied */
static double factor(const float *x, const float *y, int64_t i)
{
    return (double)y[i] / x[i];
}

/* Whether the elements of x [groups, rows, cols] that the shape shares (the rows of a
 * group and column) got one factor, 0 or 1 / (1 - rate), and how many of the draws were
 * dropped. */
static int shares(const float *x, const float *y, int64_t groups, int64_t rows, int64_t cols,
                  double rate, int64_t *dropped)
{
    int ok = 1;
    *dropped = 0;
    for (int64_t g = 0; g < groups; g++)
        for (int64_t c = 0; c < cols; c++) {
            const double f = factor(x, y, g * rows * cols + c);
            ok &= f == 0 || fabs(f - 1 / (1 - rate)) < 1e-6;
            *dropped += f == 0;
            for (int64_t r = 1; r < rows; r++)
                ok &= fabs(factor(x, y, (g * rows + r) * cols + c) - f) < 1e-6;
        }
    return ok;
}

static float *inputs(int64_t n)
{
    float *x = malloc((size_t)n * 4);
    tfc_test_fill(x, n, 1, 2, 3);
    for (int64_t i = 0; i < n; i += 2) x[i] = -x[i];
    return x;
}

/* SpatialDropout1D/2D/3D and Dropout's noise_shape: a draw per example and channel, shared
 * by every step or pixel; about `rate` of them dropped; the identity at inference. */
static void test_spatial(void)
{
    static const struct {
        const char *shape, *layer;
        int64_t rows, cols; /* per example: rows share a draw; cols draws */
    } cases[] = {
        {"[7, 16]", "SpatialDropout1D: {rate: 0.4}", 7, 16},
        {"[5, 3, 16]", "SpatialDropout2D: {rate: 0.4}", 15, 16},
        {"[5, 3, 16]", "SpatialDropout2D: {rate: 0.4, data_format: channels_last}", 15, 16},
        {"[2, 3, 2, 16]", "SpatialDropout3D: {rate: 0.4, seed: 9}", 12, 16},
        {"[7, 16]", "Dropout: {rate: 0.4, noise_shape: [null, 1, null]}", 7, 16},
        {"[7, 16]", "Dropout: {rate: 0.4, noise_shape: [null, 1, 16]}", 7, 16},
        /* one draw per example: every element of it shares */
        {"[4, 4]", "Dropout: {rate: 0.4, noise_shape: [null, 1, 1]}", 16, 1},
        /* an axis of size 1 goes with either side */
        {"[5, 1, 3, 16]", "Dropout: {rate: 0.4, noise_shape: [null, 1, null, 1, null]}", 15, 16},
    };
    const int N = 64;
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        run r = bound(cases[k].shape, cases[k].layer, N, 1);
        const int64_t per = cases[k].rows * cases[k].cols, n = N * per;
        float *x = inputs(n), *y = output(r, x, N, 1);
        int64_t dropped;
        int ok = shares(x, y, N, cases[k].rows, cases[k].cols, 0.4, &dropped);
        const double frac = (double)dropped / (N * cases[k].cols);
        if (!ok || fabs(frac - 0.4) > 0.12)
            fprintf(stderr, "\n%s: shared %d, dropped %.3f\n", cases[k].layer, ok, frac);
        CU_ASSERT(ok);
        CU_ASSERT(fabs(frac - 0.4) <= 0.12);
        free(y);
        y = output(r, x, N, 0);
        CU_ASSERT(!memcmp(x, y, (size_t)n * 4));
        free(y), free(x);
        unbound(r);
    }
    /* the batch axis shared: one mask for every example */
    run r = bound("[6, 8]", "Dropout: {rate: 0.5, noise_shape: [1, null, null]}", 16, 1);
    float *x = inputs(16 * 48), *y = output(r, x, 16, 1);
    int64_t dropped;
    CU_ASSERT(shares(x, y, 1, 16, 48, 0.5, &dropped));
    CU_ASSERT(dropped > 8 && dropped < 40);
    free(y), free(x);
    unbound(r);
}

/* Dropout without a noise_shape, and with one of nothing shared, runs the dropout op: the
 * same outputs as the noise op's DROPOUT with a draw per element, bit for bit. */
static void test_dropout_op_equal(void)
{
    const int64_t n = 100003;
    float *x = inputs(n), *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
    tfc_backend *be = tfc_cpu_backend_create(2), *b1 = tfc_cpu_backend_create(1);
    tfc_noise_desc d = {.kind = TFC_NOISE_DROPOUT, .groups = 1, .rows = 1, .cols = n,
                        .rate = 0.3f, .key = 77, .step = 5};
    be->ops->dropout_forward(be, n, 0.3f, 77, 5, x, a);
    be->ops->noise_forward(be, &d, x, b);
    b1->ops->noise_forward(b1, &d, x, c);
    int same = 1;
    for (int64_t i = 0; i < n; i++) same &= a[i] == b[i] && !memcmp(&b[i], &c[i], 4);
    CU_ASSERT(same);
    /* the same draws split [groups, 1, cols] */
    d.groups = 101, d.cols = n / 101;
    be->ops->noise_forward(be, &d, x, b);
    same = 1;
    for (int64_t i = 0; i < d.groups * d.cols; i++) same &= a[i] == b[i];
    CU_ASSERT(same);
    /* backward: dx += m dy, and assign writes m dy */
    for (int64_t i = 0; i < n; i++) c[i] = 1;
    d.groups = 1, d.cols = n;
    be->ops->noise_backward(be, &d, x, c, 0);
    be->ops->noise_backward(be, &d, x, b, 1);
    same = 1;
    for (int64_t i = 0; i < n; i++) same &= c[i] == 1 + a[i] && b[i] == a[i];
    CU_ASSERT(same);
    tfc_backend_free(be), tfc_backend_free(b1);
    free(x), free(a), free(b), free(c);
}

/* The Gaussian layers: GaussianNoise adds N(0, stddev^2), GaussianDropout multiplies by
 * N(1, rate / (1 - rate)), a draw per element; the moments of 1.6 million draws within 4
 * standard errors; the same on 1 and 2 threads; backward's factor the forward's. */
static void test_gaussian(void)
{
    const int N = 100, D = 16000;
    for (int kind = 0; kind < 2; kind++) {
        const char *layer = kind ? "GaussianDropout: {rate: 0.2}" : "GaussianNoise: {stddev: 0.3}";
        const double sd = kind ? sqrt(0.2 / 0.8) : 0.3;
        run r = bound("[16000]", layer, N, 2), r1 = bound("[16000]", layer, N, 1);
        float *x = inputs((int64_t)N * D), *y = output(r, x, N, 1), *y1 = output(r1, x, N, 1);
        double s = 0, q = 0;
        for (int64_t i = 0; i < (int64_t)N * D; i++) {
            double z = kind ? factor(x, y, i) - 1 : (double)y[i] - x[i];
            s += z, q += z * z;
        }
        const double cnt = (double)N * D, mean = s / cnt, var = q / cnt - mean * mean;
        if (fabs(mean) > 4 * sd / sqrt(cnt) || fabs(var / (sd * sd) - 1) > 4 * sqrt(2 / cnt))
            fprintf(stderr, "\n%s: mean %g, stddev %g (want %g)\n", layer, mean, sqrt(var), sd);
        CU_ASSERT(fabs(mean) <= 4 * sd / sqrt(cnt));
        CU_ASSERT(fabs(var / (sd * sd) - 1) <= 4 * sqrt(2 / cnt));
        CU_ASSERT(!memcmp(y, y1, (size_t)N * D * 4));
        /* every element its own draw: no two neighbours alike */
        int distinct = 1;
        for (int i = 1; i < 1000; i++) distinct &= y[i] - x[i] != y[i - 1] - x[i - 1];
        CU_ASSERT(distinct);
        free(y);
        y = output(r, x, N, 0);
        CU_ASSERT(!memcmp(x, y, (size_t)N * D * 4));
        free(y), free(y1), free(x);
        unbound(r), unbound(r1);
    }
}

/* AlphaDropout: kept elements a x + b, dropped ones a alpha' + b, with Keras 3's constants
 * (alpha' = -1.6732632423543772 * 1.0507009873554805; a = ((1 - rate)(1 + rate alpha'^2))^-0.5,
 * b = -a alpha' rate, computed here as Keras's Python does); standard normal inputs keep mean
 * 0 and variance 1 (SELU's fixed point, what the layer is for); a noise_shape shares. */
static void test_alpha_dropout(void)
{
    const int N = 200, D = 5000;
    const double rate = 0.25, alpha_p = -1.6732632423543772848170429916717 *
                                        1.0507009873554804934193349852946;
    const double a = pow((1 - rate) * (1 + rate * alpha_p * alpha_p), -0.5),
                 b = -a * alpha_p * rate;
    const float dropped = (float)a * (float)alpha_p + (float)b;
    run r = bound("[5000]", "AlphaDropout: {rate: 0.25}", N, 2);
    float *x = malloc((size_t)N * D * 4);
    /* standard normal inputs by Box-Muller on tfc_test_fill's uniforms */
    float *u = malloc((size_t)N * D * 4);
    tfc_test_fill(u, (int64_t)N * D, 1e-7f, 1, 8);
    for (int64_t i = 0; i + 1 < (int64_t)N * D; i += 2) {
        double m = sqrt(-2 * log(u[i]));
        x[i] = (float)(m * cos(6.283185307179586 * u[i + 1]));
        x[i + 1] = (float)(m * sin(6.283185307179586 * u[i + 1]));
    }
    float *y = output(r, x, N, 1);
    int64_t kept = 0, ok = 1;
    double s = 0, q = 0;
    for (int64_t i = 0; i < (int64_t)N * D; i++) {
        const float k = (float)a * x[i] + (float)b;
        if (y[i] == dropped && fabsf(k - dropped) > 1e-6f) {
            /* dropped */
        } else {
            ok &= fabsf(y[i] - k) <= 1e-6f * (1 + fabsf(k));
            kept++;
        }
        s += y[i], q += (double)y[i] * y[i];
    }
    const double cnt = (double)N * D, mean = s / cnt, var = q / cnt - mean * mean;
    CU_ASSERT(ok);
    CU_ASSERT(fabs((double)kept / cnt - (1 - rate)) < 0.01);
    if (fabs(mean) > 0.01 || fabs(var - 1) > 0.01)
        fprintf(stderr, "\nAlphaDropout: mean %g, variance %g\n", mean, var);
    CU_ASSERT(fabs(mean) < 0.01);
    CU_ASSERT(fabs(var - 1) < 0.01);
    free(y);
    y = output(r, x, N, 0);
    CU_ASSERT(!memcmp(x, y, (size_t)N * D * 4));
    free(y), free(x), free(u);
    unbound(r);
    /* a noise_shape shares one draw per example over the steps */
    run r2 = bound("[6, 4]", "AlphaDropout: {rate: 0.5, noise_shape: [null, 1, null]}", 32, 1);
    x = inputs(32 * 24);
    y = output(r2, x, 32, 1);
    int same = 1;
    for (int n = 0; n < 32; n++)
        for (int c = 0; c < 4; c++)
            for (int t = 1; t < 6; t++) {
                const int64_t i = (n * 6 + t) * 4 + c, i0 = n * 24 + c;
                same &= (y[i] == dropped) == (y[i0] == dropped) ||
                        (float)a * x[i] + (float)b == dropped;
            }
    CU_ASSERT(same);
    free(y), free(x);
    unbound(r2);
}

/* rate 0 and stddev 0: the identity in training too */
static void test_zero_rate(void)
{
    static const char *const layers[] = {
        "SpatialDropout1D: {rate: 0}", "GaussianNoise: {stddev: 0}",
        "GaussianDropout: {rate: 0.0}", "AlphaDropout: {rate: 0}",
        "Dropout: {rate: 0, noise_shape: [null, 1, null]}"};
    for (size_t k = 0; k < sizeof layers / sizeof *layers; k++) {
        run r = bound("[3, 5]", layers[k], 4, 1);
        float *x = inputs(60), *y = output(r, x, 4, 1);
        CU_ASSERT(!memcmp(x, y, 60 * 4));
        free(x), free(y);
        unbound(r);
    }
}

static void expect_error(const char *shape, const char *layer, const char *want)
{
    tfc_error err;
    tfc_model *m = model_of(shape, layer, &err);
    int ok = !m && strstr(err.text, want);
    if (!ok) fprintf(stderr, "\n%s: wanted '%s' in: %s\n", layer, want, m ? "(built)" : err.text);
    CU_ASSERT(ok);
    tfc_model_free(m);
}

/* Keras's argument ranges and shapes, an error naming the argument or the layer */
static void test_errors(void)
{
    expect_error("[3, 4]", "Dropout: {rate: 0.5, noise_shape: [null, 1]}",
                 "must be null or a list of 3 entries");
    expect_error("[3, 4]", "Dropout: {rate: 0.5, noise_shape: [null, 2, 4]}",
                 "entry 1 is 2, but that axis has 3");
    expect_error("[3, 4]", "Dropout: {rate: 0.5, noise_shape: [32, 1, 4]}",
                 "the batch axis's entry must be null");
    expect_error("[3, 4, 5]", "Dropout: {rate: 0.5, noise_shape: [null, 1, null, 1]}",
                 "must be adjacent; axis 2 between them");
    expect_error("[3, 4]", "Dropout: {rate: 0.5, noise_shape: 3}", "noise_shape");
    expect_error("[3, 4, 5]", "SpatialDropout1D: {rate: 0.5}",
                 "takes inputs of 2 axes besides the batch's (steps, channels), not 3");
    expect_error("[3, 4]", "SpatialDropout2D: {rate: 0.5}", "takes inputs of 3 axes");
    expect_error("[3, 4, 5]", "SpatialDropout3D: {rate: 0.5}", "takes inputs of 4 axes");
    expect_error("[3, 4, 5]", "SpatialDropout2D: {rate: 0.5, data_format: channels_first}",
                 "data_format");
    expect_error("[4]", "GaussianNoise: {stddev: 1.5}", "stddev");
    expect_error("[4]", "GaussianDropout: {rate: 1}", "rate");
    expect_error("[4]", "AlphaDropout: {rate: -0.1}", "rate");
    expect_error("[4]", "GaussianNoise: {stddev: 0.1, noise_shape: [null, 1]}", "noise_shape");
}

/* A backend without the noise kernels (the GPU's today) refuses the layers that need them,
 * naming the layer and the op; Dropout without a noise_shape needs only the dropout ops. */
static void test_refused(void)
{
    static const char *const layers[] = {
        "SpatialDropout1D: {name: v, rate: 0.1}", "GaussianNoise: {name: v, stddev: 0.1}",
        "GaussianDropout: {name: v, rate: 0.1}", "AlphaDropout: {name: v, rate: 0.1}",
        "Dropout: {name: v, rate: 0.1, noise_shape: [null, 1, null]}",
        "Dropout: {name: v, rate: 0.1}"};
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_backend_ops lacking = *be->ops;
    const tfc_backend_ops *cpu_ops = be->ops;
    lacking.noise_forward = NULL, lacking.noise_backward = NULL;
    be->ops = &lacking;
    for (size_t k = 0; k < sizeof layers / sizeof *layers; k++) {
        tfc_error err;
        tfc_model *m = model_of("[3, 5]", layers[k], &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        tfc_error_clear(&err);
        tfc_status st = tfc_model_bind(m, be, 2, &err);
        if (k + 1 < sizeof layers / sizeof *layers) {
            CU_ASSERT_EQUAL(st, TFC_ERR_CONFIG);
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'v'"));
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "(op 'noise_forward')"));
        } else {
            CU_ASSERT_EQUAL(st, TFC_OK);
        }
        tfc_model_free(m);
    }
    be->ops = cpu_ops;
    tfc_backend_free(be);
}

TFC_TEST_MAIN("noise", {"spatial", test_spatial}, {"dropout_op_equal", test_dropout_op_equal},
              {"gaussian", test_gaussian}, {"alpha_dropout", test_alpha_dropout},
              {"zero_rate", test_zero_rate}, {"errors", test_errors}, {"refused", test_refused})
