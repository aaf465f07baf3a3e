/* Keras's weight constraints (kernel_constraint and its kin; core/init.c, graph.c, train.c):
 * every YAML form Keras's and tfc's and their errors, the weights each argument reaches and
 * the axes tfc takes, training against Keras 3's own (tests/ref/keras_constraints.py: a few
 * SGD steps of train_on_batch, every kind of constraint on several kinds of weight, the
 * updated weights compared), iter_size applying them once per update, a resumed run repeating
 * the uninterrupted one, the refusal on a backend without the op, and the op the same on 1 and
 * 2 threads and against a reference computed here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "data/data.h"
#include "graph/model.h"
#include "graph/model_internal.h"
#include "gradcheck.h"
#include "kerassteps.h"
#include "solver/solver.h"
#include "testutil.h"

/* The model of `layers` after a [6, 6, 2] image, or NULL with the error in err. */
static tfc_model *model_of(const char *layers, tfc_error *err)
{
    char yaml[2048];
    snprintf(yaml, sizeof yaml, "input: {shape: [6, 6, 2]}\nlayers:\n  - %s\n", layers);
    tfc_error_clear(err);
    return tfc_model_from_string(yaml, strlen(yaml), "m.yaml", err);
}

/* The constraint layer `layer`'s weight `name` got (kind -1: no such weight). */
static tfc_constraint_desc constraint_of(tfc_model *m, int layer, const char *name)
{
    const tfc_layer *l = tfc_model_layer(m, layer);
    tfc_constraint_desc d = {.kind = (tfc_constraint_kind)-1};
    for (int p = 0; p < l->nparams; p++)
        if (!strcmp(l->params[p].name, name)) d = l->params[p].constraint;
    return d;
}

static void expect_error(const char *layers, const char *want, const char *hint)
{
    tfc_error err;
    tfc_model *m = model_of(layers, &err);
    CU_ASSERT_PTR_NULL(m);
    int ok = strstr(err.text, want) && (!hint || strstr(err.text, hint));
    if (!ok) fprintf(stderr, "\n%s: wanted '%s' / '%s' in: %s\n", layers, want, hint, err.text);
    CU_ASSERT(ok);
    tfc_model_free(m);
}

/* Keras's names (snake case and class names) with its defaults, tfc's mapping with `type`,
 * Keras's serialized {class_name, config}; each type's own arguments only; the axes laid out
 * on a Dense kernel [72, 3]. */
static void test_forms(void)
{
    static const struct {
        const char *form;
        int kind;
        float min, max, rate;
        int64_t outer, red, inner;
    } ok[] = {
        {"max_norm", TFC_CONSTRAINT_MAX_NORM, 0, 2, 0, 1, 72, 3},
        {"MaxNorm", TFC_CONSTRAINT_MAX_NORM, 0, 2, 0, 1, 72, 3},
        {"non_neg", TFC_CONSTRAINT_NON_NEG, 0, 0, 0, 1, 216, 1},
        {"NonNeg", TFC_CONSTRAINT_NON_NEG, 0, 0, 0, 1, 216, 1},
        {"unit_norm", TFC_CONSTRAINT_UNIT_NORM, 0, 0, 0, 1, 72, 3},
        {"UnitNorm", TFC_CONSTRAINT_UNIT_NORM, 0, 0, 0, 1, 72, 3},
        {"min_max_norm", TFC_CONSTRAINT_MIN_MAX_NORM, 0, 1, 1, 1, 72, 3},
        {"MinMaxNorm", TFC_CONSTRAINT_MIN_MAX_NORM, 0, 1, 1, 1, 72, 3},
        {"null", TFC_CONSTRAINT_NONE, 0, 0, 0, 0, 0, 0},
        {"{type: max_norm, max_value: 3, axis: 1}", TFC_CONSTRAINT_MAX_NORM, 0, 3, 0, 72, 3, 1},
        {"{type: MaxNorm, axis: [-1]}", TFC_CONSTRAINT_MAX_NORM, 0, 2, 0, 72, 3, 1},
        {"{type: unit_norm, axis: [0, 1]}", TFC_CONSTRAINT_UNIT_NORM, 0, 0, 0, 1, 216, 1},
        {"{type: unit_norm, axis: [1, 0]}", TFC_CONSTRAINT_UNIT_NORM, 0, 0, 0, 1, 216, 1},
        {"{type: unit_norm, axis: null}", TFC_CONSTRAINT_UNIT_NORM, 0, 0, 0, 1, 216, 1},
        {"{class_name: MaxNorm, config: {max_value: 2, axis: null}}", TFC_CONSTRAINT_MAX_NORM,
         0, 2, 0, 1, 216, 1},
        {"{type: min_max_norm, min_value: 0.5, max_value: 2, rate: 0.25}",
         TFC_CONSTRAINT_MIN_MAX_NORM, 0.5f, 2, 0.25f, 1, 72, 3},
        {"{class_name: MaxNorm, config: {max_value: 2.5, axis: 0}}", TFC_CONSTRAINT_MAX_NORM, 0,
         2.5f, 0, 1, 72, 3},
        {"{module: keras.constraints, class_name: MinMaxNorm, config: {min_value: 0.1, "
         "max_value: 0.2, rate: 0.5, axis: -1}, registered_name: null}",
         TFC_CONSTRAINT_MIN_MAX_NORM, 0.1f, 0.2f, 0.5f, 72, 3, 1},
        {"{class_name: NonNeg, config: {}}", TFC_CONSTRAINT_NON_NEG, 0, 0, 0, 1, 216, 1},
        {"{class_name: UnitNorm, config: {axis: 1}}", TFC_CONSTRAINT_UNIT_NORM, 0, 0, 0, 72, 3,
         1},
    };
    char y[512];
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        snprintf(y, sizeof y, "Flatten: {}\n  - Dense: {units: 3, kernel_constraint: %s}",
                 ok[i].form);
        tfc_error err;
        tfc_model *m = model_of(y, &err);
        if (!m) fprintf(stderr, "\n%s", err.text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        tfc_constraint_desc d = constraint_of(m, 1, "kernel");
        int good = (int)d.kind == ok[i].kind;
        if (ok[i].kind != TFC_CONSTRAINT_NONE)
            good = good && d.outer == ok[i].outer && d.red == ok[i].red && d.inner == ok[i].inner;
        if (ok[i].kind == TFC_CONSTRAINT_MAX_NORM || ok[i].kind == TFC_CONSTRAINT_MIN_MAX_NORM)
            good = good && d.max_value == ok[i].max;
        if (ok[i].kind == TFC_CONSTRAINT_MIN_MAX_NORM)
            good = good && d.min_value == ok[i].min && d.rate == ok[i].rate;
        if (!good)
            fprintf(stderr, "\n%s: kind %d [%lld, %lld, %lld] min %g max %g rate %g\n",
                    ok[i].form, (int)d.kind, (long long)d.outer, (long long)d.red,
                    (long long)d.inner, d.min_value, d.max_value, d.rate);
        CU_ASSERT(good);
        CU_ASSERT(constraint_of(m, 1, "bias").kind == TFC_CONSTRAINT_NONE); /* not given */
        tfc_model_free(m);
    }
    static const char *const bad[][3] = {
        {"{type: non_neg, axis: 0}", "kernel_constraint.axis: unknown key 'axis'", NULL},
        {"{type: max_norm, min_value: 0.1}", "kernel_constraint.min_value: unknown key", NULL},
        {"{type: max_norm, max_value: -1}", "kernel_constraint.max_value", ">= 0"},
        {"{type: min_max_norm, rate: 2}", "kernel_constraint.rate", NULL},
        {"{type: min_max_norm, min_value: 2, max_value: 1}", "min_value 2 exceeds max_value 1",
         NULL},
        {"{max_value: 2}", "kernel_constraint: missing required key 'type'", NULL},
        {"{type: max_nrom}", "kernel_constraint.type", "max_norm"},
        {"Constraint", "kernel_constraint", "max_norm"},
        {"[0]", "expected a constraint", NULL},
        {"{class_name: MaxNorm, config: {l2: 1}}", "kernel_constraint.config.l2: unknown key",
         NULL},
        {"{class_name: NonNeg, conf: {}}", "unknown key 'conf'", NULL},
        {"{type: max_norm, axis: 2}", "kernel_constraint: axis: tfc takes a leading run",
         "kernel [72, 3]"},
        {"{type: max_norm, axis: [0, 0]}", "kernel_constraint: axis", NULL},
        {"{type: unit_norm, axis: -3}", "kernel_constraint: axis", NULL},
        {"{type: unit_norm, axis: []}", "kernel_constraint: axis", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(y, sizeof y, "Flatten: {}\n  - Dense: {units: 3, kernel_constraint: %s}",
                 bad[i][0]);
        expect_error(y, bad[i][1], bad[i][2]);
    }
    /* a middle run of a Conv2D kernel [3, 3, 2, 4] is refused; leading and trailing taken */
    expect_error("Conv2D: {filters: 4, kernel_size: 3, kernel_constraint: {type: max_norm, "
                 "axis: [1, 2]}}", "layers[0].Conv2D.kernel_constraint: axis", "[3, 3, 2, 4]");
    expect_error("Conv2D: {filters: 4, kernel_size: 3, kernel_constraint: {type: max_norm, "
                 "axis: [0, 2]}}", "Conv2D.kernel_constraint: axis", NULL);
    tfc_error err;
    tfc_model *m = model_of("Conv2D: {filters: 4, kernel_size: 3, kernel_constraint: {type: "
                            "max_norm, axis: [0, 1, 2]}, bias_constraint: {type: unit_norm, "
                            "axis: -1}}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    tfc_constraint_desc d = constraint_of(m, 0, "kernel");
    CU_ASSERT(d.outer == 1 && d.red == 18 && d.inner == 4);
    d = constraint_of(m, 0, "bias");
    CU_ASSERT(d.kind == TFC_CONSTRAINT_UNIT_NORM && d.outer == 1 && d.red == 4 && d.inner == 1);
    tfc_model_free(m);
    m = model_of("Conv2D: {filters: 4, kernel_size: 3, kernel_constraint: {type: max_norm, "
                 "axis: [-2, 3]}}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    d = constraint_of(m, 0, "kernel");
    CU_ASSERT(d.outer == 9 && d.red == 8 && d.inner == 1);
    tfc_model_free(m);
}

/* Each argument reaches the weights Keras constrains with it: DepthwiseConv2D's kernel by
 * depthwise_constraint, a Bidirectional's directions by its layer's, MultiHeadAttention's
 * kernels by kernel_constraint; not BatchNormalization's moving statistics, nor a gamma
 * without scale. */
static void test_weights_reached(void)
{
    static const struct {
        const char *layer, *weight;
        int kind;
    } cases[] = {
        {"DepthwiseConv2D: {kernel_size: 3, depthwise_constraint: non_neg}", "kernel",
         TFC_CONSTRAINT_NON_NEG},
        {"SeparableConv2D: {filters: 2, kernel_size: 3, pointwise_constraint: max_norm}",
         "pointwise_kernel", TFC_CONSTRAINT_MAX_NORM},
        {"SeparableConv2D: {filters: 2, kernel_size: 3, pointwise_constraint: max_norm}",
         "depthwise_kernel", TFC_CONSTRAINT_NONE},
        {"Conv2DTranspose: {filters: 2, kernel_size: 3, bias_constraint: non_neg}", "bias",
         TFC_CONSTRAINT_NON_NEG},
        {"BatchNormalization: {gamma_constraint: unit_norm, beta_constraint: non_neg}", "gamma",
         TFC_CONSTRAINT_UNIT_NORM},
        {"BatchNormalization: {gamma_constraint: unit_norm, beta_constraint: non_neg}", "beta",
         TFC_CONSTRAINT_NON_NEG},
        {"BatchNormalization: {gamma_constraint: unit_norm}", "moving_variance",
         TFC_CONSTRAINT_NONE},
        {"BatchNormalization: {scale: false, gamma_constraint: unit_norm}", "gamma",
         TFC_CONSTRAINT_NONE},
        {"LayerNormalization: {beta_constraint: non_neg}", "beta", TFC_CONSTRAINT_NON_NEG},
        {"GroupNormalization: {groups: 2, gamma_constraint: non_neg}", "gamma",
         TFC_CONSTRAINT_NON_NEG},
        {"PReLU: {alpha_constraint: non_neg}", "alpha", TFC_CONSTRAINT_NON_NEG},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tfc_error err;
        tfc_model *m = model_of(cases[i].layer, &err);
        if (!m) fprintf(stderr, "\n%s", err.text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        int got = (int)constraint_of(m, 0, cases[i].weight).kind;
        if (got != cases[i].kind)
            fprintf(stderr, "\n%s: %s got %d\n", cases[i].layer, cases[i].weight, got);
        CU_ASSERT_EQUAL(got, cases[i].kind);
        tfc_model_free(m);
    }
    const char *seq = "input: {shape: [5], dtype: int32}\nlayers:\n"
                      "  - Embedding: {input_dim: 9, output_dim: 4, embeddings_constraint: "
                      "{type: unit_norm, axis: 1}}\n"
                      "  - Bidirectional: {layer: {GRU: {units: 3, return_sequences: true, "
                      "kernel_constraint: non_neg, recurrent_constraint: max_norm}}}\n"
                      "  - MultiHeadAttention: {num_heads: 2, key_dim: 3, kernel_constraint: "
                      "non_neg}\n"
                      "  - SimpleRNN: {units: 2, recurrent_constraint: unit_norm}\n";
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_from_string(seq, strlen(seq), "m.yaml", &err);
    if (!m) fprintf(stderr, "\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    tfc_constraint_desc d = constraint_of(m, 0, "embeddings");
    CU_ASSERT(d.kind == TFC_CONSTRAINT_UNIT_NORM && d.outer == 9 && d.red == 4);
    CU_ASSERT(constraint_of(m, 1, "forward_gru/kernel").kind == TFC_CONSTRAINT_NON_NEG);
    CU_ASSERT(constraint_of(m, 1, "backward_gru/recurrent_kernel").kind ==
              TFC_CONSTRAINT_MAX_NORM);
    CU_ASSERT(constraint_of(m, 1, "backward_gru/bias").kind == TFC_CONSTRAINT_NONE);
    const char *mha[] = {"query/kernel", "key/kernel", "value/kernel", "attention_output/kernel"};
    for (int k = 0; k < 4; k++)
        CU_ASSERT(constraint_of(m, 2, mha[k]).kind == TFC_CONSTRAINT_NON_NEG);
    CU_ASSERT(constraint_of(m, 2, "query/bias").kind == TFC_CONSTRAINT_NONE);
    CU_ASSERT(constraint_of(m, 3, "recurrent_kernel").kind == TFC_CONSTRAINT_UNIT_NORM);
    CU_ASSERT(constraint_of(m, 3, "kernel").kind == TFC_CONSTRAINT_NONE);
    tfc_model_free(m);
}

/* Writes tensor t of the fixture as the scratch .npy `name`. */
static int host_step_next; /* the host_step option of the next train() call */

/* Trains `solver` from the weights `weights` into tmp/<out> on `threads` threads. */
static tfc_status train(const char *solver, const char *weights, const char *out, int threads,
                        const char *resume, int64_t stop_at, tfc_error *err)
{
    return tfc_ks_train("constraints.yaml", solver, weights, out, threads, resume, stop_at,
                        host_step_next, err);
}

/* Keras 3's weights after train_on_batch's SGD steps with every constraint binding, against
 * tfc's solver run from the same weights on the same batch; on 1 and 2 threads, and on the
 * host path (host_step) too. */
static void test_keras_steps(void)
{
    const char *cases[] = {"image", "sequence"};
    for (int c = 0; c < 2; c++) {
        char path[256], xn[64], yn[64], run[64];
        snprintf(path, sizeof path, "tests/ref/constraints/%s.safetensors", cases[c]);
        tfc_error err;
        tfc_error_clear(&err);
        tfc_st_file *f = tfc_st_open(path, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        snprintf(xn, sizeof xn, "con_%s_x.npy", cases[c]);
        snprintf(yn, sizeof yn, "con_%s_y.npy", cases[c]);
        tfc_ks_write_npy(tfc_st_find(f, "x"), xn);
        tfc_ks_write_npy(tfc_st_find(f, "labels"), yn);
        const char *solver = tfc_ks_solver(f, xn, yn, NULL);
        char abs_path[1200], cwd[900];
        CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
        snprintf(abs_path, sizeof abs_path, "%s/%s", cwd, path);
        for (int v = 1; v <= 3; v++) { /* 1, 2 threads; 2 on the host path */
            const int threads = v > 1 ? 2 : 1;
            host_step_next = v == 3;
            snprintf(run, sizeof run, "con_%s_%d", cases[c], v);
            CU_ASSERT_EQUAL_FATAL(train(solver, abs_path, run, threads, NULL, 0, &err), TFC_OK);
            host_step_next = 0;
            int n;
            double worst = tfc_ks_worst(f, run, &n);
            printf("\n  %s, %d thread%s%s: %d weights, max difference vs Keras %.3g", cases[c],
                   threads, threads > 1 ? "s" : "", v == 3 ? ", host step" : "", n, worst);
            CU_ASSERT(n >= 10);
            CU_ASSERT(worst <= 2e-5);
        }
        tfc_st_close(f);
    }
}

/* A Dense model on the synthetic split with a MinMaxNorm of rate 0.5 (not idempotent: applied
 * twice it moves the norm again) and a NonNeg bias; `extra` holds further solver keys. */
static const char *dense_solver(int batch, const char *extra)
{
    static char text[2048];
    snprintf(text, sizeof text,
             "model:\n  name: con\n  input: {shape: [16]}\n  layers:\n"
             "    - Dense: {name: h, units: 8, activation: tanh, kernel_constraint: {type: "
             "min_max_norm, min_value: 0.2, max_value: 0.3, rate: 0.5}, bias_constraint: "
             "non_neg}\n"
             "    - Dense: {name: out, units: 4, kernel_constraint: {type: max_norm, max_value: "
             "0.4, axis: -1}}\n"
             "data:\n  train:\n    source: {type: npy, features: con_x.npy, labels: con_y.npy}\n"
             "    pipeline: [{repeat: {}}, {batch: {batch_size: %d}}]\n"
             "optimizer: {type: sgd, learning_rate: 0.5, momentum: 0.5}\nlr_policy: fixed\n"
             "max_iter: 6\ntest_interval: 0\ndisplay: 0\nseed: 3\n%s",
             batch, extra ? extra : "");
    return text;
}

/* iter_size 2 of batches of 8 makes the update of one batch of 16, the constraints applied
 * once after it (applied after each micro-batch too, the rate-0.5 MinMaxNorm would move the
 * norm twice); and the constraints do bind (without them the run ends elsewhere). */
static void test_iter_size(void)
{
    tfc_test_write_split("con_x.npy", "con_y.npy", 64, 5);
    tfc_error err;
    char extra[64] = "iter_size: 2\n";
    CU_ASSERT_EQUAL_FATAL(train(dense_solver(16, NULL), NULL, "con_bs16", 2, NULL, 0, &err),
                          TFC_OK);
    CU_ASSERT_EQUAL_FATAL(train(dense_solver(8, extra), NULL, "con_bs8x2", 2, NULL, 0, &err),
                          TFC_OK);
    int64_t na, nb;
    float *a = tfc_ks_final_weights("con_bs16", &na);
    float *b = tfc_ks_final_weights("con_bs8x2", &nb);
    CU_ASSERT_EQUAL_FATAL(na, nb);
    double d = 0;
    for (int64_t i = 0; i < na; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    printf("\n  iter_size 2 against one batch of 16: max difference %.3g", d);
    CU_ASSERT(d < 1e-6);
    /* the constraints bind: out/kernel's rows (axis -1) at norms up to 0.4, some at 0.4;
     * h/bias not negative */
    char path[1200];
    snprintf(path, sizeof path, "%s/final.safetensors", tfc_test_path("con_bs16"));
    tfc_st_file *f = tfc_st_open(path, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    const tfc_st_tensor *ok = tfc_st_find(f, "out/kernel"), *hb = tfc_st_find(f, "h/bias");
    CU_ASSERT_FATAL(ok && hb && ok->numel == 32 && hb->numel == 8);
    float k[32], bias[8];
    tfc_st_tensor_to_f32(ok, k);
    tfc_st_tensor_to_f32(hb, bias);
    int at_bound = 0, zeros = 0;
    for (int r = 0; r < 8; r++) {
        double sq = 0;
        for (int c = 0; c < 4; c++) sq += (double)k[r * 4 + c] * k[r * 4 + c];
        CU_ASSERT(sqrt(sq) <= 0.4 + 1e-6);
        at_bound += fabs(sqrt(sq) - 0.4) < 1e-6;
    }
    for (int c = 0; c < 8; c++) {
        CU_ASSERT(bias[c] >= 0);
        zeros += bias[c] == 0;
    }
    printf("; %d of 8 rows at the max norm, %d biases at 0", at_bound, zeros);
    CU_ASSERT(at_bound > 0);
    tfc_st_close(f);
    free(a), free(b);
}

/* A run stopped at 3 and resumed from its snapshot ends with the uninterrupted run's weights,
 * bit for bit. */
static void test_resume(void)
{
    tfc_test_write_split("con_x.npy", "con_y.npy", 64, 5);
    const char *extra = "snapshot: {interval: 3, keep: 0}\n";
    tfc_ks_expect_resume_exact("constraints.yaml", dense_solver(16, extra), "con", "con", 3);
}

/* A backend without the op (the GPU, for now) refuses a model with a constraint at bind,
 * naming the layer and the argument. */
static void test_refused(void)
{
    tfc_error err;
    tfc_model *m = model_of("Conv2D: {name: v, filters: 2, kernel_size: 3, "
                            "bias_constraint: non_neg}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_backend_ops lacking = *be->ops;
    const tfc_backend_ops *cpu_ops = be->ops;
    lacking.constrain = NULL;
    be->ops = &lacking;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'v'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no kernel for bias_constraint yet (op 'constrain')"));
    be->ops = cpu_ops;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* Keras's formula in double on w [outer, red, inner], for the op's result to be held to. */
static void reference(const tfc_constraint_desc *d, const float *w, double *out)
{
    for (int64_t o = 0; o < d->outer; o++)
        for (int64_t c = 0; c < d->inner; c++) {
            double s = 0;
            for (int64_t r = 0; r < d->red; r++) {
                double v = w[(o * d->red + r) * d->inner + c];
                s += v * v;
            }
            double norm = sqrt(s), f;
            double lo = d->kind == TFC_CONSTRAINT_MIN_MAX_NORM ? d->min_value : 0;
            double cl = fmin(fmax(norm, lo), d->max_value);
            if (d->kind == TFC_CONSTRAINT_UNIT_NORM) f = 1 / (1e-7 + norm);
            else if (d->kind == TFC_CONSTRAINT_MAX_NORM) f = cl / (1e-7 + norm);
            else f = (d->rate * cl + (1 - d->rate) * norm) / (1e-7 + norm);
            for (int64_t r = 0; r < d->red; r++) {
                int64_t i = (o * d->red + r) * d->inner + c;
                out[i] = d->kind == TFC_CONSTRAINT_NON_NEG ? fmax(w[i], 0.0) : w[i] * f;
            }
        }
}

/* The op on 1 and 2 threads: the same bits; against Keras's formula in double within float
 * rounding; each kind, norms over a leading and a trailing run. */
static void test_op_threads(void)
{
    const int64_t rows = 4099, cols = 67, n = rows * cols;
    float *w = malloc((size_t)n * 4), *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
    double *want = malloc((size_t)n * sizeof *want);
    tfc_test_fill(w, n, -0.02f, 0.02f, 13);
    for (int64_t c = 0; c < cols; c += 3) /* some norms below the bounds, most above */
        for (int64_t r = 0; r < rows; r++) w[r * cols + c] *= 0.01f;
    tfc_backend *b1 = tfc_cpu_backend_create(1), *b2 = tfc_cpu_backend_create(2);
    const tfc_constraint_kind kinds[] = {TFC_CONSTRAINT_MAX_NORM, TFC_CONSTRAINT_NON_NEG,
                                         TFC_CONSTRAINT_UNIT_NORM, TFC_CONSTRAINT_MIN_MAX_NORM};
    for (int k = 0; k < 4; k++)
        for (int lead = 0; lead < 2; lead++) {
            tfc_constraint_desc d = {kinds[k], lead ? 1 : rows, lead ? rows : cols,
                                     lead ? cols : 1, 0.3f, 0.5f, 0.75f};
            memcpy(a, w, (size_t)n * 4);
            memcpy(b, w, (size_t)n * 4);
            b1->ops->constrain(b1, &d, a);
            b2->ops->constrain(b2, &d, b);
            CU_ASSERT(!memcmp(a, b, (size_t)n * 4));
            reference(&d, w, want);
            double worst = 0;
            for (int64_t i = 0; i < n; i++)
                worst = fmax(worst, fabs(a[i] - want[i]) / fmax(fabs(want[i]), 1e-3));
            if (worst > 2e-6) printf("\n  kind %d lead %d: relative %.3g", k, lead, worst);
            CU_ASSERT(worst <= 2e-6);
        }
    tfc_backend_free(b1), tfc_backend_free(b2);
    free(w), free(a), free(b), free(want);
}

TFC_TEST_MAIN("constraints", {"forms", test_forms}, {"weights_reached", test_weights_reached},
              {"keras_steps", test_keras_steps}, {"iter_size", test_iter_size},
              {"resume", test_resume}, {"refused", test_refused},
              {"op_threads", test_op_threads})
