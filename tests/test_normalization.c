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
#include "kerasref.h"
#include "testutil.h"

/* tests/ref/normalization, each case as tfc_test_keras_case compares it: outputs, the
 * inference layout's (a 1-thread backend, no initialisation but the bind's), Keras's weights
 * (where the model has any; the count, Keras's int32, as tfc's float32) both ways and the
 * input's gradient. */
static void test_keras_parity(void)
{
    static const tfc_keras_parity p = {.dir = "normalization", .tol = 1e-6,
                                       .inference_threads = 1, .cast_weights = 1};
    static const char *const names[] = {"given_scalar", "given_list",   "given_none",
                                        "given_2d",     "given_invert", "adapted_none",
                                        "adapted_2d",   "adapted_invert", NULL};
    tfc_test_keras_cases(&p, names);
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
    *data = tfc_test_tensor(f, "data", NULL);
    float *labels = tfc_test_tensor(f, "labels", NULL);
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
    tfc_st_file *fx = tfc_test_fixture("normalization", "adapt");
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
    float *km = tfc_test_tensor(fx, "normalization/mean", NULL);
    float *kv = tfc_test_tensor(fx, "normalization/variance", NULL);
    static const int batches[] = {1, 7, 64, 203, 256};
    for (size_t b = 0; b < sizeof batches / sizeof *batches; b++)
        for (int repeat = 0; repeat < 2; repeat++) {
            tfc_error err;
            char out[64];
            snprintf(out, sizeof out, "adapt_%d_%d", batches[b], repeat);
            CU_ASSERT_EQUAL_FATAL(run(out, tab_model, batches[b], repeat, 1, NULL, NULL, &err),
                                  TFC_OK);
            tfc_st_file *f = final_weights(out);
            float *m = tfc_test_tensor(f, "normalization/mean", NULL);
            float *v = tfc_test_tensor(f, "normalization/variance", NULL);
            float *c = tfc_test_tensor(f, "normalization/count", NULL);
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
    tfc_st_file *fx = tfc_test_fixture("normalization", "adapt");
    float *data;
    write_tabular(fx, &data);
    free(data);
    tfc_st_writer *w = tfc_st_writer_create();
    tfc_error err;
    tfc_error_clear(&err);
    float *k = tfc_test_tensor(fx, "dense/kernel", NULL);
    float *b = tfc_test_tensor(fx, "dense/bias", NULL);
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
    float *x = tfc_test_tensor(fx, "x", NULL), *y = tfc_test_tensor(fx, "y", &n), out[7];
    TFC_ASSERT(tfc_model_forward(m, x, 7, 0, 1, 0, &err) == TFC_OK);
    tfc_model_get_output(m, out);
    double abs_diff = 0, rel = tfc_test_rel_diff(out, y, n, 0, &abs_diff);
    if (getenv("TFC_VERBOSE"))
        fprintf(stderr, "\nadapt predictions: max abs %.3g, rel %.3g\n", abs_diff, rel);
    CU_ASSERT(rel <= 1e-5);
    /* the Dense weights are Keras's still */
    tfc_st_file *f = final_weights("adapt_keras");
    float *fk = tfc_test_tensor(f, "dense/kernel", NULL);
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
    tfc_st_file *fx = tfc_test_fixture("normalization", "adapt");
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
    float *ma = tfc_test_tensor(a, "normalization/mean", NULL);
    float *mw = tfc_test_tensor(w, "normalization/mean", NULL);
    float *mf = tfc_test_tensor(fr, "normalization/mean", NULL);
    float *km = tfc_test_tensor(fx, "normalization/mean", NULL);
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
