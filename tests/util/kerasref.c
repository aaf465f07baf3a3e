/* Keras parity of whole models from safetensors fixtures; see kerasref.h. */
#include "kerasref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "graph/model.h"
#include "layers/layer.h"
#include "testutil.h"

float *tfc_test_tensor_at(const tfc_st_file *f, const char *prefix, const char *name,
                          int64_t n)
{
    char key[96];
    snprintf(key, sizeof key, "%s%s", prefix, name);
    const tfc_st_tensor *t = tfc_st_find(f, key);
    CU_ASSERT_FATAL(t && t->numel == n);
    float *v = calloc((size_t)(n ? n : 1), sizeof(float));
    TFC_ASSERT(v != NULL);
    tfc_st_tensor_to_f32(t, v);
    return v;
}

int tfc_test_mismatches(const float *got, const float *want, int64_t n, double *worst)
{
    double scale = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - want[i]);
        *worst = fmax(*worst, d);
        bad += !(d <= 1e-5 * fabs(want[i]) + 1e-6 * scale);
    }
    return bad;
}

float *tfc_test_tensor(const tfc_st_file *f, const char *name, int64_t *n)
{
    const tfc_st_tensor *t = tfc_st_find(f, name);
    if (!t) return NULL;
    float *v = malloc((size_t)t->numel * 4 + 4);
    tfc_st_tensor_to_f32(t, v);
    if (n) *n = t->numel;
    return v;
}

double tfc_test_rel_diff(const float *a, const float *b, int64_t n, double floor,
                         double *abs_out)
{
    double d = 0, m = floor;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        if (isnan(b[i])) continue;
        d = fmax(d, fabs(a[i] - b[i])), m = fmax(m, fabs(b[i]));
    }
    if (abs_out) *abs_out = fmax(*abs_out, d);
    return d / (m > 0 ? m : 1);
}

tfc_st_file *tfc_test_fixture(const char *dir, const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "tests/ref/%s/%s.safetensors", dir, name);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open(path, &err);
    if (!f) printf("\n%s\n", err.text);
    TFC_ASSERT(f != NULL);
    return f;
}

/* Whether tensor `name` of a fixture is one of Keras's weights (a variable path, not a
 * gradient or moved statistic) */
static int is_weight(const char *name)
{
    return strchr(name, '/') && strncmp(name, "grad:", 5) && strncmp(name, "moved:", 6);
}

/* The weights tfc writes from m are the fixture's (`matched` of them loaded), name for
 * name: what a Keras model loads by name. */
static void check_saved(const tfc_keras_parity *p, tfc_model *m, const tfc_st_file *f,
                        int matched)
{
    tfc_error err;
    tfc_error_clear(&err);
    const char *saved = tfc_test_path("keras_saved.safetensors");
    TFC_ASSERT(tfc_model_save_weights(m, saved, &err) == TFC_OK);
    tfc_st_file *sf = tfc_st_open(saved, &err);
    TFC_ASSERT(sf != NULL);
    int keras = 0;
    for (int i = 0; i < tfc_st_count(f); i++) keras += is_weight(tfc_st_tensor_at(f, i)->name);
    CU_ASSERT_EQUAL(tfc_st_count(sf), matched);
    CU_ASSERT_EQUAL(tfc_st_count(sf), keras);
    for (int i = 0; i < tfc_st_count(sf); i++) {
        const tfc_st_tensor *a = tfc_st_tensor_at(sf, i), *b = tfc_st_find(f, a->name);
        CU_ASSERT_PTR_NOT_NULL(b);
        if (!b) continue;
        CU_ASSERT(tfc_shape_equal(&a->shape, &b->shape));
        if (p->cast_weights) {
            float *va = tfc_test_tensor(sf, a->name, NULL), *vb = tfc_test_tensor(f, a->name, NULL);
            CU_ASSERT(a->numel == b->numel && !memcmp(va, vb, (size_t)a->numel * 4));
            free(va), free(vb);
        } else {
            CU_ASSERT(a->dtype == b->dtype && a->nbytes == b->nbytes &&
                      !memcmp(a->data, b->data, a->nbytes));
        }
    }
    tfc_st_close(sf);
}

/* The inference layout of the same YAML and weights gives the bits `out` ([n] floats). */
static void check_inference(const tfc_keras_parity *p, const char *yaml, const char *name,
                            const char *path, const void *in, int batch, const float *out,
                            int64_t n, int has_weights)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *mi = tfc_model_from_string(yaml, strlen(yaml), name, &err);
    tfc_backend *bi = tfc_cpu_backend_create(p->inference_threads ? p->inference_threads : 2);
    TFC_ASSERT(mi && tfc_model_bind_inference(mi, bi, batch, &err) == TFC_OK);
    if (has_weights) TFC_ASSERT(tfc_model_load_weights(mi, path, NULL, &err) == TFC_OK);
    TFC_ASSERT(tfc_model_forward(mi, in, batch, 0, 1, 0, &err) == TFC_OK);
    float *o2 = malloc((size_t)n * 4);
    tfc_model_get_output(mi, o2);
    CU_ASSERT(!memcmp(o2, out, (size_t)n * 4));
    free(o2);
    tfc_model_free(mi);
    tfc_backend_free(bi);
}

/* Each weight of m against the fixture after the training step's backward: a trainable
 * one's gradient against grad:<path>, a non-trainable one (not a constant) against
 * moved:<path>. Returns the worst relative difference. */
static double check_weights(const tfc_keras_parity *p, tfc_model *m, const tfc_st_file *f,
                            const char *name, double *worst_abs)
{
    double worst = 0;
    for (int i = 0; i < tfc_model_nlayers(m); i++) {
        tfc_layer *l = tfc_model_layer(m, i);
        for (int k = 0; k < l->nparams; k++) {
            const tfc_param *pr = &l->params[k];
            if (!pr->trainable && pr->constant) continue;
            char wname[128];
            snprintf(wname, sizeof wname, "%s:%s/%s", pr->trainable ? "grad" : "moved",
                     l->name, pr->name);
            float *want = tfc_test_tensor(f, wname, NULL), *g = malloc((size_t)pr->numel * 4);
            CU_ASSERT_PTR_NOT_NULL(want);
            if (want) {
                if (pr->trainable) tfc_model_grad_download(m, pr, g);
                else tfc_model_param_download(m, pr, g);
                const double r = tfc_test_rel_diff(g, want, pr->numel, p->grad_floor, worst_abs);
                if (r > p->tol) printf("\n  %s: %s off by %.2e", name, wname, r);
                worst = fmax(worst, r);
            }
            free(want), free(g);
        }
    }
    return worst;
}

double tfc_test_keras_case(const tfc_keras_parity *p, const char *name, double *worst_abs)
{
    char path[256];
    snprintf(path, sizeof path, "tests/ref/%s/%s.safetensors", p->dir, name);
    tfc_st_file *f = tfc_test_fixture(p->dir, name);
    tfc_error err;
    tfc_error_clear(&err);
    const char *yaml = tfc_st_meta(f, "yaml");
    TFC_ASSERT(yaml != NULL);
    tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), name, &err);
    if (!m) printf("\n%s\n", err.text);
    TFC_ASSERT(m != NULL);
    const tfc_st_tensor *xt = tfc_st_find(f, "x");
    TFC_ASSERT(xt != NULL);
    const int batch = (int)xt->shape.dim[0];
    int32_t *ids = NULL; /* token inputs */
    if (xt->dtype == TFC_I32) {
        ids = malloc(xt->nbytes);
        memcpy(ids, xt->data, xt->nbytes);
    }
    tfc_backend *be = tfc_cpu_backend_create(2);
    TFC_ASSERT(tfc_model_bind(m, be, batch, &err) == TFC_OK);
    TFC_ASSERT(tfc_model_init_weights(m, 1, &err) == TFC_OK);
    tfc_model_want_input_grad(m, 1);
    const int has_weights = tfc_model_weight_count(m) > 0;
    tfc_weights_report rep = {0};
    if (has_weights) {
        TFC_ASSERT(tfc_model_load_weights(m, path, &rep, &err) == TFC_OK);
        CU_ASSERT(rep.missing == 0 && rep.mismatched == 0 && rep.matched > 0);
        free(rep.text);
    }
    int64_t n = 0;
    float *x = ids ? NULL : tfc_test_tensor(f, "x", NULL), *y = tfc_test_tensor(f, "y", &n);
    float *t = tfc_test_tensor(f, "t", NULL);
    TFC_ASSERT(y != NULL);
    const void *in = ids ? (const void *)ids : x;
    float *out = malloc((size_t)n * 4);
    TFC_ASSERT(tfc_model_forward(m, in, batch, 0, 1, 0, &err) == TFC_OK);
    tfc_model_get_output(m, out);
    double worst = tfc_test_rel_diff(out, y, n, 0, worst_abs);
    if (has_weights) check_saved(p, m, f, rep.matched);
    check_inference(p, yaml, name, path, in, batch, out, n, has_weights);
    int64_t nd = 0;
    float *dx = tfc_test_tensor(f, "dx", &nd);
    int grads = 0; /* the fixture has weight gradients (cases without Dropout) */
    for (int i = 0; i < tfc_st_count(f); i++)
        grads |= !strncmp(tfc_st_tensor_at(f, i)->name, "grad:", 5);
    if (p->all_grads) {
        CU_ASSERT(ids || dx); /* float inputs have the input's gradient */
        grads |= has_weights;
    }
    if (dx || grads) {
        tfc_batch_result res;
        TFC_ASSERT(tfc_model_forward(m, in, batch, 1, 1, 0, &err) == TFC_OK);
        tfc_model_zero_grad(m);
        TFC_ASSERT(tfc_model_loss(m, t, 1, &res, &err) == TFC_OK);
        tfc_model_backward(m);
        if (dx) {
            float *got = malloc((size_t)nd * 4);
            be->ops->download(be, got, tfc_model_input_grad(m), (size_t)nd * 4);
            worst = fmax(worst, tfc_test_rel_diff(got, dx, nd, p->grad_floor, worst_abs));
            free(got);
        }
        if (grads) worst = fmax(worst, check_weights(p, m, f, name, worst_abs));
    }
    free(dx), free(x), free(ids), free(y), free(t), free(out);
    tfc_model_free(m);
    tfc_backend_free(be);
    tfc_st_close(f);
    return worst;
}

void tfc_test_keras_cases(const tfc_keras_parity *p, const char *const *names)
{
    for (int i = 0; names[i]; i++) {
        double abs_diff = 0, rel = tfc_test_keras_case(p, names[i], &abs_diff);
        printf("\n  keras %-22s max abs %.2e, max rel (to the largest value) %.2e%s", names[i],
               abs_diff, rel, names[i + 1] ? "" : "\n");
        CU_ASSERT(rel <= p->tol);
    }
}
