/* Normalization (Keras's preprocessing layer) and the trainer's adapt pass. Keras 3 parity
 * from the fixtures tests/ref/keras_normalization.py wrote (tests/ref/normalization/): given
 * statistics (scalars, per-feature lists, two kept axes, axis null, invert) and Keras's
 * adapted weights, outputs and input gradients; the weights tfc writes under Keras's names;
 * tfc-train adapting to the tabular set Keras adapted to, then predicting with Keras's Dense
 * weights; the adapt pass against statistics in double for several batch sizes; a resumed
 * run keeping its snapshot's statistics; argument errors. Run from the repository's root. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "data/data.h"
#include "graph/model.h"
#include "layers/layer.h"
#include "solver/solver.h"
#include "testutil.h"

static float *tensor(const tfc_st_file *f, const char *name, int64_t *n)
{
    const tfc_st_tensor *t = tfc_st_find(f, name);
    if (!t) return NULL;
    float *v = malloc((size_t)t->numel * 4 + 4);
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

static tfc_st_file *open_fixture(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "tests/ref/normalization/%s.safetensors", name);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open(path, &err);
    TFC_ASSERT(f != NULL);
    return f;
}

/* One fixture: its YAML bound for training, Keras's weights (if any) loaded strictly, the
 * inference output and, after a training forward, the MSE loss's input gradient compared;
 * the weights tfc writes are Keras's, name for name. Returns the worst relative
 * difference. */
static double parity_case(const char *name, double *worst_abs)
{
    char path[256];
    snprintf(path, sizeof path, "tests/ref/normalization/%s.safetensors", name);
    tfc_st_file *f = open_fixture(name);
    tfc_error err;
    tfc_error_clear(&err);
    const char *yaml = tfc_st_meta(f, "yaml");
    tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), name, &err);
    TFC_ASSERT(m != NULL);
    const tfc_st_tensor *xt = tfc_st_find(f, "x");
    const int batch = (int)xt->shape.dim[0];
    tfc_backend *be = tfc_cpu_backend_create(2);
    TFC_ASSERT(tfc_model_bind(m, be, batch, &err) == TFC_OK);
    TFC_ASSERT(tfc_model_init_weights(m, 1, &err) == TFC_OK);
    tfc_model_want_input_grad(m, 1);
    const int has_weights = tfc_model_weight_count(m) > 0;
    if (has_weights) TFC_ASSERT(tfc_model_load_weights(m, path, NULL, &err) == TFC_OK);
    int64_t n = 0;
    float *x = tensor(f, "x", NULL), *y = tensor(f, "y", &n), *t = tensor(f, "t", NULL);
    float *out = malloc((size_t)n * 4);
    TFC_ASSERT(tfc_model_forward(m, x, batch, 0, 1, 0, &err) == TFC_OK);
    tfc_model_get_output(m, out);
    double worst = rel_diff(out, y, n, worst_abs);
    if (has_weights) { /* tfc's file: Keras's names, shapes and values (count: float32) */
        const char *saved = tfc_test_path("saved.safetensors");
        TFC_ASSERT(tfc_model_save_weights(m, saved, &err) == TFC_OK);
        tfc_st_file *sf = tfc_st_open(saved, &err);
        TFC_ASSERT(sf != NULL);
        int keras = 0;
        for (int i = 0; i < tfc_st_count(f); i++)
            keras += strchr(tfc_st_tensor_at(f, i)->name, '/') != NULL;
        CU_ASSERT_EQUAL(tfc_st_count(sf), keras);
        for (int i = 0; i < tfc_st_count(sf); i++) {
            const tfc_st_tensor *a = tfc_st_tensor_at(sf, i), *b = tfc_st_find(f, a->name);
            CU_ASSERT_PTR_NOT_NULL_FATAL(b);
            CU_ASSERT(a->numel == b->numel && a->shape.ndim == b->shape.ndim);
            float *va = tensor(sf, a->name, NULL), *vb = tensor(f, a->name, NULL);
            CU_ASSERT(!memcmp(va, vb, (size_t)a->numel * 4));
            free(va), free(vb);
        }
        tfc_st_close(sf);
    }
    { /* the inference layout, as tfc-predict binds it: no initialisation but the bind's */
        tfc_model *mi = tfc_model_from_string(yaml, strlen(yaml), name, &err);
        tfc_backend *bi = tfc_cpu_backend_create(1);
        TFC_ASSERT(mi && tfc_model_bind_inference(mi, bi, batch, &err) == TFC_OK);
        if (has_weights) TFC_ASSERT(tfc_model_load_weights(mi, path, NULL, &err) == TFC_OK);
        TFC_ASSERT(tfc_model_forward(mi, x, batch, 0, 1, 0, &err) == TFC_OK);
        float *o2 = malloc((size_t)n * 4);
        tfc_model_get_output(mi, o2);
        CU_ASSERT(!memcmp(o2, out, (size_t)n * 4));
        free(o2);
        tfc_model_free(mi);
        tfc_backend_free(bi);
    }
    float *dx = tensor(f, "dx", NULL);
    tfc_batch_result res;
    TFC_ASSERT(tfc_model_forward(m, x, batch, 1, 1, 0, &err) == TFC_OK);
    tfc_model_zero_grad(m);
    TFC_ASSERT(tfc_model_loss(m, t, 1, &res, &err) == TFC_OK);
    tfc_model_backward(m);
    float *got = malloc((size_t)n * 4);
    be->ops->download(be, got, tfc_model_input_grad(m), (size_t)n * 4);
    worst = fmax(worst, rel_diff(got, dx, n, worst_abs));
    free(got), free(dx), free(x), free(y), free(t), free(out);
    tfc_model_free(m);
    tfc_backend_free(be);
    tfc_st_close(f);
    return worst;
}

static void test_keras_parity(void)
{
    static const char *const names[] = {"given_scalar", "given_list",   "given_none",
                                        "given_2d",     "given_invert", "adapted_none",
                                        "adapted_2d",   "adapted_invert"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        double abs_diff = 0, rel = parity_case(names[i], &abs_diff);
        if (rel > 1e-6 || getenv("TFC_VERBOSE"))
            fprintf(stderr, "\n%s: max abs %.3g, max rel (to the largest value) %.3g\n",
                    names[i], abs_diff, rel);
        CU_ASSERT(rel <= 1e-6);
    }
}

/* ---- the adapt pass ----------------------------------------------------------------------- */

/* Trains `model` (YAML lines of the model mapping, two-space indented) for `iters` steps of
 * SGD at learning rate 0 (nothing moves but what adapt sets) on tab_x.npy / tab_y.npy with
 * batches of `batch`, `extra` appended to the solver (e.g. a repeat stage's absence). */
static tfc_status run(const char *out, const char *model, int batch, int repeat, int iters,
                      const char *weights, const char *resume, tfc_error *err)
{
    char solver[4096];
    snprintf(solver, sizeof solver,
             "model:\n  name: tab\n%s  loss: mse\n"
             "data:\n  train:\n    source: {type: npy, features: tab_x.npy, labels: tab_y.npy}\n"
             "    pipeline: [%s{shuffle: {buffer_size: 64}}, {batch: {batch_size: %d}}]\n"
             "optimizer: {type: sgd, learning_rate: 0.0}\n"
             "max_iter: %d\nsnapshot: {interval: %d, keep: 0}\nseed: 5\n",
             model, repeat ? "{repeat: {}}, " : "", batch, iters, iters > 1 ? iters / 2 : 1);
    tfc_solver_options o = {0};
    o.out_dir = tfc_test_path(out);
    o.weights = weights;
    o.resume = resume;
    o.threads = 2;
    o.console = fopen("/dev/null", "w");
    tfc_error_clear(err);
    tfc_solver *s = tfc_solver_load(tfc_test_write("tab.yaml", solver, -1), &o, err);
    tfc_train_result *res = calloc(1, sizeof *res);
    tfc_status st = s ? tfc_solver_train(s, res, err) : err->code;
    free(res);
    if (st) printf("\n%s", err->text);
    tfc_solver_free(s);
    if (o.console) fclose(o.console);
    return st;
}

static tfc_st_file *final_weights(const char *out)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/final.safetensors", tfc_test_path(out));
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open(path, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    return f;
}

/* The fixture's tabular set as tab_x.npy [n, 5] and tab_y.npy [n, 1]; returns n. */
static int write_tabular(const tfc_st_file *f, float **data)
{
    const tfc_st_tensor *d = tfc_st_find(f, "data"), *l = tfc_st_find(f, "labels");
    TFC_ASSERT(d && l);
    *data = tensor(f, "data", NULL);
    float *labels = tensor(f, "labels", NULL);
    tfc_tensor tx = {TFC_F32, d->shape, *data, -1}, ty = {TFC_F32, l->shape, labels, -1};
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("tab_x.npy"), &tx, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("tab_y.npy"), &ty, &err), TFC_OK);
    free(labels);
    return (int)d->shape.dim[0];
}

static const char tab_model[] =
    "  input: {shape: [5]}\n  layers:\n"
    "    - Normalization: {name: normalization, axis: -1}\n"
    "    - Dense: {name: dense, units: 1}\n";

/* tfc-train's adapt against the data's mean and biased variance in double: the same within
 * 1e-6 relative whatever the batch size, with and without a repeating pipeline; and against
 * Keras's adapt of the same data (float32 sums: 1e-5). */
static void test_adapt_statistics(void)
{
    tfc_st_file *fx = open_fixture("adapt");
    float *data;
    const int n = write_tabular(fx, &data);
    double mean[5] = {0}, var[5] = {0};
    for (int k = 0; k < 5; k++) {
        for (int r = 0; r < n; r++) mean[k] += data[r * 5 + k];
        mean[k] /= n;
        for (int r = 0; r < n; r++) {
            double d = data[r * 5 + k] - mean[k];
            var[k] += d * d;
        }
        var[k] /= n;
    }
    float *km = tensor(fx, "normalization/mean", NULL), *kv = tensor(fx, "normalization/variance",
                                                                     NULL);
    static const int batches[] = {1, 7, 64, 203, 256};
    for (size_t b = 0; b < sizeof batches / sizeof *batches; b++)
        for (int repeat = 0; repeat < 2; repeat++) {
            tfc_error err;
            char out[64];
            snprintf(out, sizeof out, "adapt_%d_%d", batches[b], repeat);
            CU_ASSERT_EQUAL_FATAL(run(out, tab_model, batches[b], repeat, 1, NULL, NULL, &err),
                                  TFC_OK);
            tfc_st_file *f = final_weights(out);
            float *m = tensor(f, "normalization/mean", NULL);
            float *v = tensor(f, "normalization/variance", NULL);
            float *c = tensor(f, "normalization/count", NULL);
            CU_ASSERT_PTR_NOT_NULL_FATAL(c);
            CU_ASSERT_EQUAL(*c, 0.f); /* as Keras keeps it */
            double em = 0, ev = 0, km_d = 0, kv_d = 0;
            for (int k = 0; k < 5; k++) {
                em = fmax(em, fabs(m[k] - mean[k]) / fmax(fabs(mean[k]), 1e-30));
                if (var[k] > 0) ev = fmax(ev, fabs(v[k] - var[k]) / var[k]);
                else CU_ASSERT_EQUAL(v[k], 0.f);
                km_d = fmax(km_d, fabs(m[k] - km[k]) / fmax(fabs(km[k]), 1e-30));
                if (kv[k] > 0) kv_d = fmax(kv_d, fabs(v[k] - kv[k]) / kv[k]);
            }
            if (getenv("TFC_VERBOSE"))
                fprintf(stderr, "\nbatch %d repeat %d: rel error mean %.3g var %.3g; vs Keras "
                        "%.3g %.3g", batches[b], repeat, em, ev, km_d, kv_d);
            CU_ASSERT(em <= 1e-6 && ev <= 1e-6);
            CU_ASSERT(km_d <= 1e-5 && kv_d <= 1e-5);
            free(m), free(v), free(c);
            tfc_st_close(f);
        }
    free(km), free(kv), free(data);
    tfc_st_close(fx);
}

/* Keras's Dense weights alone as --weights: the Normalization adapts, the Dense keeps them
 * (learning rate 0), and the model predicts Keras's outputs for its inputs. */
static void test_adapt_keras_predictions(void)
{
    tfc_st_file *fx = open_fixture("adapt");
    float *data;
    write_tabular(fx, &data);
    free(data);
    tfc_st_writer *w = tfc_st_writer_create();
    tfc_error err;
    tfc_error_clear(&err);
    float *k = tensor(fx, "dense/kernel", NULL), *b = tensor(fx, "dense/bias", NULL);
    const tfc_shape *ks = &tfc_st_find(fx, "dense/kernel")->shape;
    const tfc_shape *bs = &tfc_st_find(fx, "dense/bias")->shape;
    TFC_ASSERT(!tfc_st_writer_add(w, "dense/kernel", TFC_F32, ks, k, &err));
    TFC_ASSERT(!tfc_st_writer_add(w, "dense/bias", TFC_F32, bs, b, &err));
    const char *dense = tfc_test_path("dense.safetensors");
    TFC_ASSERT(!tfc_st_writer_save(w, dense, &err));
    tfc_st_writer_free(w);
    CU_ASSERT_EQUAL_FATAL(run("adapt_keras", tab_model, 16, 1, 1, dense, NULL, &err), TFC_OK);
    char path[1024];
    snprintf(path, sizeof path, "%s/final.safetensors", tfc_test_path("adapt_keras"));
    static const char model[] = "input: {shape: [5]}\nlayers:\n"
                                "  - Normalization: {name: normalization, axis: -1}\n"
                                "  - Dense: {name: dense, units: 1}\nloss: mse\n";
    tfc_model *m = tfc_model_from_string(model, strlen(model), "m.yaml", &err);
    tfc_backend *be = tfc_cpu_backend_create(1);
    TFC_ASSERT(m && tfc_model_bind_inference(m, be, 7, &err) == TFC_OK);
    TFC_ASSERT(tfc_model_load_weights(m, path, NULL, &err) == TFC_OK);
    int64_t n = 0;
    float *x = tensor(fx, "x", NULL), *y = tensor(fx, "y", &n), out[7];
    TFC_ASSERT(tfc_model_forward(m, x, 7, 0, 1, 0, &err) == TFC_OK);
    tfc_model_get_output(m, out);
    double abs_diff = 0, rel = rel_diff(out, y, n, &abs_diff);
    if (getenv("TFC_VERBOSE"))
        fprintf(stderr, "\nadapt predictions: max abs %.3g, rel %.3g\n", abs_diff, rel);
    CU_ASSERT(rel <= 1e-5);
    /* the Dense weights are Keras's still */
    tfc_st_file *f = final_weights("adapt_keras");
    float *fk = tensor(f, "dense/kernel", NULL);
    CU_ASSERT(!memcmp(fk, k, 5 * 4));
    free(fk), free(k), free(b), free(x), free(y);
    tfc_st_close(f);
    tfc_model_free(m);
    tfc_backend_free(be);
    tfc_st_close(fx);
}

/* A resumed run (in a folder of its own) takes the statistics from its snapshot: data
 * changed between the runs (every feature shifted by 10) does not move them, and a run from
 * --weights holding them keeps them too; a fresh run on the shifted data adapts to it. */
static void test_resume_keeps_statistics(void)
{
    tfc_st_file *fx = open_fixture("adapt");
    float *data;
    const int n = write_tabular(fx, &data);
    tfc_error err;
    CU_ASSERT_EQUAL_FATAL(run("res_a", tab_model, 16, 1, 4, NULL, NULL, &err), TFC_OK);
    for (int i = 0; i < n * 5; i++) data[i] += 10.f;
    tfc_tensor tx = {TFC_F32, {2, {n, 5}}, data, -1};
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("tab_x.npy"), &tx, &err), TFC_OK);
    char state[1024], wpath[1024];
    snprintf(state, sizeof state, "%s/snapshots/tab_iter_2.state", tfc_test_path("res_a"));
    CU_ASSERT_EQUAL_FATAL(run("res_b", tab_model, 16, 1, 4, NULL, state, &err), TFC_OK);
    snprintf(wpath, sizeof wpath, "%s/final.safetensors", tfc_test_path("res_a"));
    CU_ASSERT_EQUAL_FATAL(run("res_w", tab_model, 16, 1, 1, wpath, NULL, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(run("res_fresh", tab_model, 16, 1, 1, NULL, NULL, &err), TFC_OK);
    tfc_st_file *a = final_weights("res_b"), *w = final_weights("res_w"),
                *fr = final_weights("res_fresh");
    float *ma = tensor(a, "normalization/mean", NULL), *mw = tensor(w, "normalization/mean", NULL);
    float *mf = tensor(fr, "normalization/mean", NULL);
    float *km = tensor(fx, "normalization/mean", NULL);
    for (int k = 0; k < 5; k++) {
        CU_ASSERT(fabsf(ma[k] - km[k]) <= 1e-5f * fmaxf(fabsf(km[k]), 1));
        CU_ASSERT_EQUAL(mw[k], ma[k]);
        CU_ASSERT(fabsf(mf[k] - km[k] - 10.f) <= 1e-4f * fmaxf(fabsf(km[k]), 1));
    }
    free(ma), free(mw), free(mf), free(km), free(data);
    tfc_st_close(a), tfc_st_close(w), tfc_st_close(fr), tfc_st_close(fx);
}

/* The sequence mask passes through (Keras's supports_masking). */
static void test_mask_passes(void)
{
    static const char yaml[] = "input: {shape: [5, 3]}\nlayers:\n  - Masking: {}\n"
                               "  - Normalization: {name: n}\n  - LSTM: {units: 2}\n";
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), "t.yaml", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    const tfc_layer *l = tfc_model_layer(m, 1);
    CU_ASSERT(l->mask_in && l->mask_out && tfc_model_layer(m, 2)->mask_in);
    tfc_model_free(m);
}

/* ---- errors ---------------------------------------------------------------------------- */

static void expect_error(const char *layer, const char *what)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "input: {shape: [3, 4]}\nlayers:\n  - Normalization: %s\n", layer);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), "t.yaml", &err);
    CU_ASSERT_PTR_NULL(m);
    if (!strstr(err.msg, what)) printf("\n%s: wanted '%s' in: %s\n", layer, what, err.msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, what));
    tfc_model_free(m);
}

static void test_argument_errors(void)
{
    expect_error("{mean: 1.0}", "give both or neither");
    expect_error("{mean: [1, 2, 3, 4], variance: [[1, 2, 3, 4]]}", "same shape");
    expect_error("{mean: [1, 2, 3], variance: [1, 2, 3]}", "does not broadcast");
    expect_error("{axis: null, mean: [1, 2, 3, 4], variance: [1, 2, 3, 4]}", "more than");
    expect_error("{mean: 1, variance: -1}", "not negative");
    expect_error("{axis: 1}", "trailing block");
    expect_error("{axis: 0}", "batch axis");
    expect_error("{axis: 3}", "out of range");
    expect_error("{axis: [2, 2]}", "twice");
    expect_error("{mean: [1, [2]], variance: [1, 2]}", "rectangular");
}

TFC_TEST_MAIN("normalization", {"keras_parity", test_keras_parity},
              {"adapt_statistics", test_adapt_statistics},
              {"adapt_keras_predictions", test_adapt_keras_predictions},
              {"resume_keeps_statistics", test_resume_keeps_statistics},
              {"mask_passes", test_mask_passes}, {"argument_errors", test_argument_errors})
