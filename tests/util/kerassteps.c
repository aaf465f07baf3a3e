/* Training against Keras's own, fixture by fixture (kerassteps.h). */
#include "kerassteps.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/keras_import.h"
#include "data/data.h"
#include "solver/solver.h"
#include "testutil.h"

void tfc_ks_import(const char *dir, const char *name)
{
    char src[512], model[512], out[512];
    snprintf(src, sizeof src, "%s%s.keras", dir, name);
    snprintf(model, sizeof model, "%s/%s.yaml", tfc_test_tmpdir(), name);
    snprintf(out, sizeof out, "%s/%s.safetensors", tfc_test_tmpdir(), name);
    tfc_import_report rep;
    tfc_error err;
    tfc_error_clear(&err);
    tfc_status st = tfc_keras_import(src, NULL, NULL, model, out, &rep, &err);
    if (st) printf("\n%s", err.text);
    CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
}

void tfc_ks_write_npy(const tfc_st_tensor *t, const char *name)
{
    tfc_tensor x = {t->dtype, t->shape, (void *)t->data, -1};
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path(name), &x, &err), TFC_OK);
}

const char *tfc_ks_solver(const tfc_st_file *f, const char *xname, const char *yname,
                          const char *extra)
{
    static char text[8192];
    const char *yaml = tfc_st_meta(f, "yaml"), *momentum = tfc_st_meta(f, "momentum");
    int o = snprintf(text, sizeof text, "model:\n");
    for (const char *p = yaml; *p;) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        if (len) o += snprintf(text + o, sizeof text - (size_t)o, "  %.*s\n", len, p);
        p += len + (nl ? 1 : 0);
    }
    snprintf(text + o, sizeof text - (size_t)o,
             "data:\n  train:\n    source: {type: npy, features: %s, labels: %s}\n"
             "    pipeline: [{repeat: {}}, {batch: {batch_size: %lld}}]\n"
             "optimizer: {type: sgd, learning_rate: %s%s%s}\nlr_policy: fixed\nmax_iter: %s\n"
             "test_interval: 0\ndisplay: 0\nseed: 3\n%s",
             xname, yname, (long long)tfc_st_find(f, "x")->shape.dim[0], tfc_st_meta(f, "lr"),
             momentum ? ", momentum: " : "", momentum ? momentum : "", tfc_st_meta(f, "steps"),
             extra ? extra : "");
    return text;
}

tfc_status tfc_ks_train(const char *file, const char *solver, const char *weights,
                        const char *out, int threads, const char *resume, int64_t stop_at,
                        int host_step, tfc_error *err)
{
    tfc_solver_options o = {0};
    o.out_dir = tfc_test_path(out);
    o.threads = threads;
    o.weights = weights;
    o.resume = resume;
    o.stop_at = stop_at;
    o.host_step = host_step;
    o.console = fopen("/dev/null", "w");
    tfc_error_clear(err);
    tfc_solver *s = tfc_solver_load(tfc_test_write(file, solver, -1), &o, err);
    tfc_train_result *res = calloc(1, sizeof *res);
    tfc_status st = s ? tfc_solver_train(s, res, err) : err->code;
    if (st) printf("\n%s", err->text);
    free(res);
    tfc_solver_free(s);
    if (o.console) fclose(o.console);
    return st;
}

double tfc_ks_worst(const tfc_st_file *f, const char *run, int *compared)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/final.safetensors", tfc_test_path(run));
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *got = tfc_st_open(path, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(got);
    double worst = 0;
    *compared = 0;
    for (int i = 0; i < tfc_st_count(got); i++) {
        const tfc_st_tensor *t = tfc_st_tensor_at(got, i);
        char name[300];
        snprintf(name, sizeof name, "after/%s", t->name);
        const tfc_st_tensor *k = tfc_st_find(f, name);
        if (!k) fprintf(stderr, "\nno %s in the fixture\n", name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(k);
        CU_ASSERT_EQUAL_FATAL(k->numel, t->numel);
        float *a = malloc((size_t)t->numel * 4), *b = malloc((size_t)t->numel * 4);
        tfc_st_tensor_to_f32(t, a);
        tfc_st_tensor_to_f32(k, b);
        double w = 0;
        for (int64_t j = 0; j < t->numel; j++)
            w = fmax(w, fabs((double)a[j] - b[j]) / fmax(1.0, fabs((double)b[j])));
        if (w > 1e-4) printf("\n    %s: %.3g", t->name, w);
        worst = fmax(worst, w);
        (*compared)++;
        free(a), free(b);
    }
    tfc_st_close(got);
    return worst;
}

void tfc_ks_expect_resume_exact(const char *file, const char *solver, const char *run,
                                const char *prefix, int at)
{
    char full[128], resumed[128], state[1400];
    snprintf(full, sizeof full, "%s_full", run);
    snprintf(resumed, sizeof resumed, "%s_resumed", run);
    tfc_error err;
    CU_ASSERT_EQUAL_FATAL(tfc_ks_train(file, solver, NULL, full, 2, NULL, 0, 0, &err), TFC_OK);
    snprintf(state, sizeof state, "%s/snapshots/%s_iter_%d.state", tfc_test_path(full), prefix,
             at);
    CU_ASSERT_EQUAL_FATAL(tfc_ks_train(file, solver, NULL, resumed, 1, state, 0, 0, &err),
                          TFC_OK);
    int64_t na, nb;
    float *a = tfc_ks_final_weights(full, &na), *b = tfc_ks_final_weights(resumed, &nb);
    CU_ASSERT_EQUAL_FATAL(na, nb);
    CU_ASSERT(!memcmp(a, b, (size_t)na * 4));
    free(a), free(b);
}

float *tfc_ks_final_weights(const char *run, int64_t *n)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/final.safetensors", tfc_test_path(run));
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open(path, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    int64_t total = 0;
    for (int i = 0; i < tfc_st_count(f); i++) total += tfc_st_tensor_at(f, i)->numel;
    float *w = malloc((size_t)total * sizeof *w);
    int64_t at = 0;
    for (int i = 0; i < tfc_st_count(f); i++) {
        tfc_st_tensor_to_f32(tfc_st_tensor_at(f, i), w + at);
        at += tfc_st_tensor_at(f, i)->numel;
    }
    tfc_st_close(f);
    *n = total;
    return w;
}
