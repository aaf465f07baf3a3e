/* Initializer statistics against Keras's VarianceScaling (keras.initializers): variance
 * scale / fan with glorot 2/(fan_in + fan_out), he 2/fan_in, lecun 1/fan_in; uniform on
 * ±sqrt(3 · variance); normal truncated at 2σ with σ = sqrt(variance) / 0.87962566 (so the
 * kept variance is the intended one). Fans of a Dense kernel [in, units] and a Conv2D kernel
 * [kh, kw, in, filters] (receptive field kh · kw times the channels). zeros/ones/constant exact. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "graph/model.h"
#include "gradcheck.h"
#include "testutil.h"

/* Layer 0's parameter `p` after binding `yaml` and initialising with seed 5 (malloc'd). */
static float *init_param(const char *yaml, int p, int64_t *n)
{
    tfc_model *m = tfc_test_model(yaml);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, 1, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_init_weights(m, 5, &err), TFC_OK);
    tfc_param *pr = &tfc_model_layer(m, 0)->params[p];
    float *h = malloc((size_t)pr->numel * 4);
    tfc_model_param_download(m, pr, h);
    *n = pr->numel;
    tfc_model_free(m);
    tfc_backend_free(be);
    return h;
}

typedef struct layer_fans {
    const char *fmt; /* the model, %s for the kernel initializer */
    double fan_in, fan_out;
} layer_fans;

static const layer_fans layers[] = {
    {"input: {shape: [200]}\nlayers:\n  - Dense: {units: 300, kernel_initializer: %s}\n", 200, 300},
    {"input: {shape: [8, 8, 32]}\nlayers:\n"
     "  - Conv2D: {filters: 64, kernel_size: 3, kernel_initializer: %s}\n"
     "loss: mse\n", 9 * 32, 9 * 64},
};

static void test_variance_scaling(void)
{
    static const struct {
        const char *name;
        double scale;
        int mode; /* 0 fan_in, 1 fan_avg */
        int normal;
    } inits[] = {
        {"glorot_uniform", 1, 1, 0}, {"glorot_normal", 1, 1, 1}, {"he_uniform", 2, 0, 0},
        {"he_normal", 2, 0, 1},      {"lecun_uniform", 1, 0, 0}, {"lecun_normal", 1, 0, 1},
    };
    for (size_t l = 0; l < sizeof layers / sizeof *layers; l++)
        for (size_t k = 0; k < sizeof inits / sizeof *inits; k++) {
            char yaml[512];
            snprintf(yaml, sizeof yaml, layers[l].fmt, inits[k].name);
            int64_t n;
            float *w = init_param(yaml, 0, &n);
            double fan = inits[k].mode ? (layers[l].fan_in + layers[l].fan_out) / 2
                                       : layers[l].fan_in;
            double var = inits[k].scale / fan;
            /* the bound every value respects: the uniform limit, or 2 σ of the normal before
             * truncation (σ = sqrt(var) / 0.87962566) */
            double bound = inits[k].normal ? 2 * sqrt(var) / 0.87962566103423978 : sqrt(3 * var);
            double sum = 0, sumsq = 0, maxabs = 0;
            for (int64_t i = 0; i < n; i++) {
                sum += w[i];
                sumsq += (double)w[i] * w[i];
                maxabs = fmax(maxabs, fabs(w[i]));
            }
            double mean = sum / (double)n, v = sumsq / (double)n - mean * mean;
            /* n >= 18432: the variance estimate's relative sd is under 1.1% (normal) and 0.7%
             * (uniform); 5% is > 4 sd and still far from a wrong fan (x1.5 to x9) or a missing
             * truncation correction (x0.774). The mean's sd is sqrt(var / n). */
            int ok = fabs(v / var - 1) < 0.05 && fabs(mean) < 5 * sqrt(var / (double)n) &&
                     maxabs <= bound * (1 + 1e-6) && maxabs > 0.97 * bound;
            if (!ok)
                printf("\n%s (layer %zu): variance %.4g want %.4g, mean %.3g, max |w| %.4g bound "
                       "%.4g\n", inits[k].name, l, v, var, mean, maxabs, bound);
            CU_ASSERT(ok);
            free(w);
        }
}

static void test_constant_initializers(void)
{
    static const struct {
        const char *init;
        float value;
    } cases[] = {{"zeros", 0.0f}, {"ones", 1.0f}, {"{type: constant, value: 0.1}", 0.1f},
                 {"{type: constant, value: -2.5}", -2.5f}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (int p = 0; p < 2; p++) {
            char yaml[512];
            snprintf(yaml, sizeof yaml,
                     "input: {shape: [7]}\nlayers:\n  - Dense: {units: 5, %s_initializer: %s}\n",
                     p ? "bias" : "kernel", cases[c].init);
            int64_t n;
            float *w = init_param(yaml, p, &n);
            int exact = n == (p ? 5 : 35);
            for (int64_t i = 0; i < n; i++) exact &= memcmp(&w[i], &cases[c].value, 4) == 0;
            if (!exact) printf("\n%s as %s: not exactly %g\n", cases[c].init, p ? "bias" : "kernel",
                               cases[c].value);
            CU_ASSERT(exact);
            free(w);
        }
}

TFC_TEST_MAIN("init", {"variance_scaling", test_variance_scaling},
              {"constant_initializers", test_constant_initializers})
