/* Keras parity of one fixture; see kerasref.h. */
#include "kerasref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "graph/model.h"
#include "layers/layer.h"
#include "testutil.h"

static float *tensor(const tfc_st_file *f, const char *name, int64_t *n)
{
    const tfc_st_tensor *t = tfc_st_find(f, name);
    if (!t) return NULL;
    float *v = malloc((size_t)t->numel * 4);
    tfc_st_tensor_to_f32(t, v);
    if (n) *n = t->numel;
    return v;
}

/* max |a - b| / max |b| over n values, and the largest |a - b| into *abs_out */
static double rel_diff(const float *a, const float *b, int64_t n, double *abs_out)
{
    double d = 0, m = 0;
    for (int64_t i = 0; i < n; i++) d = fmax(d, fabs(a[i] - b[i])), m = fmax(m, fabs(b[i]));
    if (abs_out) *abs_out = fmax(*abs_out, d);
    return d / (m > 0 ? m : 1);
}

double tfc_test_keras_parity(const char *dir, const char *name, double *worst_abs)
{
    char path[256];
    snprintf(path, sizeof path, "tests/ref/%s/%s.safetensors", dir, name);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open(path, &err);
    TFC_ASSERT(f != NULL);
    const char *yaml = tfc_st_meta(f, "yaml");
    tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), name, &err);
    TFC_ASSERT(m != NULL);
    const tfc_st_tensor *xt = tfc_st_find(f, "x");
    const int batch = (int)xt->shape.dim[0];
    int32_t *ids = NULL; /* token inputs */
    if (xt->dtype == TFC_I32) {
        ids = malloc(xt->nbytes);
        memcpy(ids, xt->data, xt->nbytes);
    }
    tfc_backend *be = tfc_cpu_backend_create(2);
    TFC_ASSERT(tfc_model_bind(m, be, batch, &err) == TFC_OK);
    tfc_model_want_input_grad(m, 1);
    tfc_weights_report rep = {0};
    TFC_ASSERT(tfc_model_load_weights(m, path, &rep, &err) == TFC_OK);
    CU_ASSERT(rep.missing == 0 && rep.mismatched == 0 && rep.matched > 0);
    free(rep.text);
    rep.text = NULL;
    int64_t n = 0, nt = 0;
    float *x = ids ? NULL : tensor(f, "x", NULL), *y = tensor(f, "y", &n);
    float *t = tensor(f, "t", &nt);
    const void *in = ids ? (const void *)ids : x;
    float *out = malloc((size_t)n * 4);
    TFC_ASSERT(tfc_model_forward(m, in, batch, 0, 1, 0, &err) == TFC_OK);
    tfc_model_get_output(m, out);
    double worst = rel_diff(out, y, n, worst_abs);
    { /* the reverse: the weights tfc writes are the fixture's, name for name (Keras's paths) */
        const char *saved = tfc_test_path("saved.safetensors");
        TFC_ASSERT(tfc_model_save_weights(m, saved, &err) == TFC_OK);
        tfc_st_file *sf = tfc_st_open(saved, &err);
        TFC_ASSERT(sf != NULL);
        CU_ASSERT(tfc_st_count(sf) == rep.matched);
        for (int i = 0; i < tfc_st_count(sf); i++) {
            const tfc_st_tensor *a = tfc_st_tensor_at(sf, i), *b = tfc_st_find(f, a->name);
            CU_ASSERT(b && b->nbytes == a->nbytes && !memcmp(a->data, b->data, a->nbytes));
        }
        tfc_st_close(sf);
    }
    { /* the same from the inference layout (tfc-predict's) */
        tfc_model *mi = tfc_model_from_string(yaml, strlen(yaml), name, &err);
        tfc_backend *bi = tfc_cpu_backend_create(2);
        TFC_ASSERT(mi && tfc_model_bind_inference(mi, bi, batch, &err) == TFC_OK);
        TFC_ASSERT(tfc_model_load_weights(mi, path, &rep, &err) == TFC_OK);
        free(rep.text);
        TFC_ASSERT(tfc_model_forward(mi, in, batch, 0, 1, 0, &err) == TFC_OK);
        float *o2 = malloc((size_t)n * 4);
        tfc_model_get_output(mi, o2);
        CU_ASSERT(!memcmp(o2, out, (size_t)n * 4));
        free(o2);
        tfc_model_free(mi);
        tfc_backend_free(bi);
    }
    float *dx = tensor(f, "dx", &n);
    int grads = 0; /* the fixture has gradients (cases without Dropout) */
    for (int i = 0; i < tfc_st_count(f); i++)
        grads |= !strncmp(tfc_st_tensor_at(f, i)->name, "grad:", 5);
    if (grads) {
        tfc_batch_result res;
        TFC_ASSERT(tfc_model_forward(m, in, batch, 1, 1, 0, &err) == TFC_OK);
        tfc_model_zero_grad(m);
        TFC_ASSERT(tfc_model_loss(m, t, 1, &res, &err) == TFC_OK);
        tfc_model_backward(m);
        if (dx) {
            float *got = malloc((size_t)n * 4);
            be->ops->download(be, got, tfc_model_input_grad(m), (size_t)n * 4);
            worst = fmax(worst, rel_diff(got, dx, n, worst_abs));
            free(got);
        }
        /* each trainable weight's gradient, and each non-trainable weight after that
         * training forward (BatchNormalization's moving statistics, moved once per step as
         * Keras's step-by-step calls move them) */
        for (int i = 0; i < tfc_model_nlayers(m); i++) {
            tfc_layer *l = tfc_model_layer(m, i);
            for (int p = 0; p < l->nparams; p++) {
                const tfc_param *w = &l->params[p];
                if (w->constant) continue;
                char key[128];
                snprintf(key, sizeof key, "%s:%s/%s", w->trainable ? "grad" : "moved", l->name,
                         w->name);
                float *want = tensor(f, key, NULL), *g = malloc((size_t)w->numel * 4);
                CU_ASSERT_PTR_NOT_NULL(want);
                if (want) {
                    if (w->trainable) tfc_model_grad_download(m, w, g);
                    else tfc_model_param_download(m, w, g);
                    worst = fmax(worst, rel_diff(g, want, w->numel, worst_abs));
                }
                free(want), free(g);
            }
        }
        free(dx);
    }
    free(x), free(ids), free(y), free(t), free(out);
    tfc_model_free(m);
    tfc_backend_free(be);
    tfc_st_close(f);
    return worst;
}

void tfc_test_keras_parity_all(const char *dir, const char *const *names, double tol)
{
    for (int i = 0; names[i]; i++) {
        double abs_diff = 0, rel = tfc_test_keras_parity(dir, names[i], &abs_diff);
        if (rel > tol || getenv("TFC_VERBOSE"))
            fprintf(stderr, "\n%s/%s: max abs %.3g, max rel (to the largest value) %.3g\n", dir,
                    names[i], abs_diff, rel);
        CU_ASSERT(rel <= tol);
    }
}
