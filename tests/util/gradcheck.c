/* Numerical gradient checks; see gradcheck.h. The loss is computed in float32, so steps
 * are large (1e-2) and each estimate is confirmed with a second step (5e-3): where the two
 * disagree by more than 1% (plus float32 noise) the element sits at a kink (ReLU, max-pool
 * ties, clipping) and is skipped; elsewhere the smaller step's estimate is compared. */
#include "cpu/cpu.h"
#include "gradcheck.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tfc_model *tfc_test_model(const char *yaml)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), "test.yaml", &err);
    if (!m) fprintf(stderr, "%s", err.text);
    return m;
}

tfc_error tfc_test_model_error(const char *yaml)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), "t.yaml", &err);
    CU_ASSERT_PTR_NULL(m);
    tfc_model_free(m);
    return err;
}

void tfc_test_expect_model_error(const char *yaml, const char *want)
{
    tfc_error err = tfc_test_model_error(yaml);
    if (!strstr(err.text, want)) fprintf(stderr, "\n%s: %s\n", yaml, err.text);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, want));
}

void tfc_test_expect_refused(const char *yaml, void (*drop)(tfc_backend_ops *ops),
                             const char *layer, const char *op)
{
    tfc_model *m = tfc_test_model(yaml);
    TFC_ASSERT(m != NULL);
    tfc_backend *be = tfc_cpu_backend_create(1);
    const tfc_backend_ops *cpu_ops = be->ops;
    tfc_backend_ops lacking = *be->ops;
    drop(&lacking);
    tfc_error err;
    tfc_error_clear(&err);
    be->ops = &lacking;
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_ERR_CONFIG);
    if (!strstr(err.msg, layer) || !strstr(err.msg, op)) fprintf(stderr, "\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, layer));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, op));
    be->ops = cpu_ops;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
    tfc_model_free(m);
    tfc_backend_free(be);
}

void tfc_test_expect_cpu_first(const char *yaml, const char *layer, const char *type)
{
    tfc_model *m = tfc_test_model(yaml);
    tfc_backend *be = tfc_cpu_backend_create(1);
    TFC_ASSERT(m && be);
    char named[96], says[96];
    snprintf(named, sizeof named, "layer '%s'", layer);
    snprintf(says, sizeof says, "%s has not run on the", type);
    tfc_error err;
    tfc_error_clear(&err);
    be->device = 0;
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_ERR_CONFIG);
    if (!strstr(err.msg, named) || !strstr(err.msg, says)) fprintf(stderr, "\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, named));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, says));
    be->device = -1;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
    tfc_model_free(m);
    tfc_backend_free(be);
}

void tfc_test_run_image_layer(const char *layer, int h, int w, int c, int n, int threads,
                              const float *x, int training, uint64_t seed, uint64_t step,
                              float *y)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "input: {shape: [%d, %d, %d]}\nlayers:\n  - %s\n", h, w, c,
             layer);
    tfc_model *m = tfc_test_model(yaml);
    tfc_backend *be = tfc_cpu_backend_create(threads);
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(m && be && tfc_model_bind(m, be, n, &err) == TFC_OK);
    TFC_ASSERT(tfc_model_forward(m, x, n, training, seed, step, &err) == TFC_OK);
    tfc_model_get_output(m, y);
    tfc_model_free(m);
    tfc_backend_free(be);
}

void tfc_test_fill(float *x, int64_t n, float lo, float hi, unsigned seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = lo + (hi - lo) * (float)((s >> 11) * (1.0 / 9007199254740992.0));
    }
}

static double loss_at(tfc_model *m, int batch, const void *const *xs, const void *const *labels)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_batch_result r;
    if (tfc_model_forward_inputs(m, xs, batch, 1, 7, 3, &err) ||
        tfc_model_loss_targets(m, labels, 0, &r, &err)) {
        fprintf(stderr, "gradcheck: %s", err.text);
        abort();
    }
    return r.loss;
}

static void compare(gradcheck_result *res, double analytic, double num1, double num2,
                    const char *what, int64_t idx)
{
    /* Two step sizes disagreeing means a kink inside the step: not a fair comparison
     * (1e-4: the float32 noise of the two estimates, a few 1.2e-5 quanta each). */
    if (fabs(num1 - num2) > 0.01 * (fabs(num1) + fabs(num2)) + 1e-4) {
        res->skipped++;
        return;
    }
    /* The floor 2e-2 turns the relative bound into an absolute one for small gradients,
     * where the numeric estimate's float32 noise dominates: see gradcheck.h. */
    double e = fabs(analytic - num2) / fmax(2e-2, fabs(analytic) + fabs(num2));
    res->checked++;
    if (e > res->max_err) {
        res->max_err = e;
        snprintf(res->worst, sizeof res->worst, "%s[%lld]: analytic %.6g numeric %.6g", what,
                 (long long)idx, analytic, num2);
    }
}

gradcheck_result tfc_gradcheck(tfc_model *m, int batch, const void *x, const void *labels,
                               int per_param, unsigned seed)
{
    return tfc_gradcheck_scaled(m, batch, x, labels, per_param, seed, 1.0);
}

gradcheck_result tfc_gradcheck_scaled(tfc_model *m, int batch, const void *x,
                                      const void *labels, int per_param, unsigned seed,
                                      double scale)
{
    return tfc_gradcheck_inputs(m, batch, &x, labels, per_param, seed, scale);
}

gradcheck_result tfc_gradcheck_inputs(tfc_model *m, int batch, const void *const *xs,
                                      const void *labels, int per_param, unsigned seed,
                                      double scale)
{
    return tfc_gradcheck_targets(m, batch, xs, &labels, per_param, seed, scale);
}

gradcheck_result tfc_gradcheck_targets(tfc_model *m, int batch, const void *const *xs,
                                       const void *const *labels, int per_param, unsigned seed,
                                       double scale)
{
    gradcheck_result res = {0};
    tfc_error err;
    tfc_error_clear(&err);
    tfc_backend *be = tfc_cpu_backend_create(1);
    if (tfc_model_bind(m, be, batch, &err) || tfc_model_init_weights(m, seed, &err)) {
        fprintf(stderr, "gradcheck: %s", err.text);
        abort();
    }
    tfc_model_want_input_grad(m, 1);
    tfc_batch_result r;
    tfc_model_forward_inputs(m, xs, batch, 1, 7, 3, &err);
    tfc_model_loss_targets(m, labels, 1, &r, &err);
    tfc_model_zero_grad(m);
    tfc_model_backward(m);

    /* the same weight gradients, bit for bit, with no input gradient (NULL to the layers
     * reading the input, as when an input's producer runs no backward) */
    int64_t total = 0;
    for (int li = 0; li < tfc_model_nlayers(m); li++)
        for (int pi = 0; pi < tfc_model_layer(m, li)->nparams; pi++)
            if (tfc_model_layer(m, li)->params[pi].trainable)
                total += tfc_model_layer(m, li)->params[pi].numel;
    float *with = malloc((size_t)(total + 1) * 4), *without = malloc((size_t)(total + 1) * 4);
    for (int pass = 0; pass < 2; pass++) {
        if (pass) {
            /* NaN in every gradient first: a backward that assigns nothing leaves it */
            for (int64_t k = 0; k < total; k++) without[k] = NAN;
            int64_t at = 0;
            for (int li = 0; li < tfc_model_nlayers(m); li++)
                for (int pi = 0; pi < tfc_model_layer(m, li)->nparams; pi++) {
                    const tfc_param *p = &tfc_model_layer(m, li)->params[pi];
                    if (!p->trainable) continue;
                    be->ops->upload(be, p->grad, without + at, (size_t)p->numel * 4);
                    at += p->numel;
                }
            tfc_model_want_input_grad(m, 0);
            tfc_model_forward_inputs(m, xs, batch, 1, 7, 3, &err);
            tfc_model_loss_targets(m, labels, 1, &r, &err);
            tfc_model_zero_grad(m);
            tfc_model_backward(m);
            tfc_model_want_input_grad(m, 1);
        }
        tfc_model_grads(m); /* zeroes what no backward wrote */
        int64_t at = 0;
        for (int li = 0; li < tfc_model_nlayers(m); li++)
            for (int pi = 0; pi < tfc_model_layer(m, li)->nparams; pi++) {
                const tfc_param *p = &tfc_model_layer(m, li)->params[pi];
                if (!p->trainable) continue;
                be->ops->download(be, (pass ? without : with) + at, p->grad,
                                  (size_t)p->numel * 4);
                at += p->numel;
            }
    }
    /* (unless a layer's forward changes its weights: SpectralNormalization's each pass) */
    int writes = 0;
    for (int li = 0; li < tfc_model_nlayers(m); li++)
        writes |= tfc_model_layer(m, li)->ops->writes_params;
    for (int64_t k = 0; k < total && !writes; k++) res.null_dx_diff += with[k] != without[k];
    free(with);
    free(without);

    const double h1 = 1e-2, h2 = 5e-3;
    for (int li = 0; li < tfc_model_nlayers(m); li++) {
        tfc_layer *l = tfc_model_layer(m, li);
        for (int pi = 0; pi < l->nparams; pi++) {
            tfc_param *p = &l->params[pi];
            if (!p->trainable) continue;
            float *w = malloc((size_t)p->numel * 4), *g = malloc((size_t)p->numel * 4);
            tfc_model_param_download(m, p, w);
            be->ops->download(be, g, p->grad, (size_t)p->numel * 4);
            char what[128];
            snprintf(what, sizeof what, "%s/%s", l->name, p->name);
            int64_t step = p->numel > per_param ? p->numel / per_param : 1;
            for (int64_t k = (seed + pi) % step; k < p->numel; k += step) {
                float orig = w[k];
                double f[4];
                const double hs[4] = {h1, -h1, h2, -h2};
                for (int s = 0; s < 4; s++) {
                    w[k] = (float)(orig + hs[s]);
                    tfc_model_param_upload(m, p, w);
                    f[s] = loss_at(m, batch, xs, labels);
                }
                w[k] = orig;
                tfc_model_param_upload(m, p, w);
                compare(&res, scale * g[k], (f[0] - f[1]) / (2 * h1), (f[2] - f[3]) / (2 * h2),
                        what, k);
            }
            free(w);
            free(g);
        }
    }
    for (int in = 0; in < tfc_model_ninputs(m); in++) {
        if (tfc_model_input_dtype_at(m, in) != TFC_F32) continue;
        int64_t n = (int64_t)batch * tfc_shape_numel(tfc_model_input_shape_at(m, in));
        float *xi = malloc((size_t)n * 4), *g = malloc((size_t)n * 4);
        memcpy(xi, xs[in], (size_t)n * 4);
        const void *xk[TFC_MODEL_MAX_INPUTS];
        for (int k = 0; k < tfc_model_ninputs(m); k++) xk[k] = k == in ? xi : xs[k];
        /* The analytic input gradient of the first pass (restore it: loss_at overwrote). */
        tfc_model_forward_inputs(m, xs, batch, 1, 7, 3, &err);
        tfc_model_loss_targets(m, labels, 1, &r, &err);
        tfc_model_zero_grad(m);
        tfc_model_backward(m);
        be->ops->download(be, g, tfc_model_input_grad_at(m, in), (size_t)n * 4);
        char what[160];
        snprintf(what, sizeof what, "input%s%s", tfc_model_ninputs(m) > 1 ? " " : "",
                 tfc_model_ninputs(m) > 1 ? tfc_model_input_name(m, in) : "");
        int64_t step = n > per_param ? n / per_param : 1;
        for (int64_t k = seed % step; k < n; k += step) {
            float orig = xi[k];
            double f[4];
            const double hs[4] = {h1, -h1, h2, -h2};
            for (int s = 0; s < 4; s++) {
                xi[k] = (float)(orig + hs[s]);
                f[s] = loss_at(m, batch, xk, labels);
            }
            xi[k] = orig;
            compare(&res, scale * g[k], (f[0] - f[1]) / (2 * h1), (f[2] - f[3]) / (2 * h2),
                    what, k);
        }
        free(xi);
        free(g);
    }
    tfc_model_unbind(m);
    tfc_backend_free(be);
    return res;
}
