/* The model file's `loss:` options against losses computed here by hand: label smoothing
 * (a sparse label made one-hot, then t (1 - s) + s / C, Keras's categorical rule; binary
 * t (1 - s) + s / 2) and class weights (each training row's loss times its class's weight,
 * the sum divided by the number of rows, Keras's sum_over_batch_size; evaluation
 * unweighted, as Keras's validation), then numerical gradient checks of both, and the
 * configuration errors; `class_weight: balanced` against scikit-learn's formula n / (C n_c)
 * on the source's label counts, and a run with it against the same run given those weights
 * as a list. CPU backend. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "data/data.h"
#include "solver/monitor.h"
#include "solver/solver.h"
#include "graph/model_internal.h"
#include "util/gradcheck.h"
#include "util/testutil.h"

static const float X[2][2] = {{1.0f, 2.0f}, {0.5f, -1.0f}};
static const float W[2][3] = {{0.2f, -0.3f, 0.5f}, {0.1f, 0.4f, -0.2f}};
static const float Bias[3] = {0.05f, -0.1f, 0.0f};

static char yaml_buf[1024];
static const char *model_yaml(const char *act, const char *loss)
{
    snprintf(yaml_buf, sizeof yaml_buf,
             "input: {shape: [2]}\n"
             "layers:\n"
             "  - Dense: {units: 3, activation: %s}\n"
             "loss: %s\n"
             "metrics: [accuracy]\n",
             act, loss);
    return yaml_buf;
}

/* The model bound on the CPU for 2 rows with the weights above. */
static tfc_model *bound_model(const char *act, const char *loss, tfc_backend *be)
{
    tfc_model *m = tfc_test_model(model_yaml(act, loss));
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
    tfc_layer *l = tfc_model_layer(m, 0);
    memcpy(l->params[0].data, W, sizeof W); /* the CPU backend's memory is the host's */
    memcpy(l->params[1].data, Bias, sizeof Bias);
    return m;
}

/* Row r's logits and softmax probabilities, in double. */
static void probs(int r, double q[3])
{
    double z[3], mx = -1e300, sum = 0;
    for (int c = 0; c < 3; c++) {
        z[c] = Bias[c] + X[r][0] * W[0][c] + X[r][1] * W[1][c];
        if (z[c] > mx) mx = z[c];
    }
    for (int c = 0; c < 3; c++) sum += (q[c] = exp(z[c] - mx));
    for (int c = 0; c < 3; c++) q[c] /= sum;
}

/* mean over rows of cw[y] * (-sum_c t_c log q_c), t = onehot(y) (1 - s) + s / 3 */
static double expected_cce(const int32_t y[2], double s, const double cw[3])
{
    double total = 0;
    for (int r = 0; r < 2; r++) {
        double q[3], l = 0;
        probs(r, q);
        for (int c = 0; c < 3; c++) l -= ((c == y[r]) * (1 - s) + s / 3) * log(q[c]);
        total += cw[y[r]] * l;
    }
    return total / 2;
}

static double model_loss(tfc_model *m, const void *labels, int training)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_batch_result br;
    CU_ASSERT_EQUAL_FATAL(tfc_model_forward(m, X, 2, training, 1, 0, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_loss(m, labels, 0, &br, &err), TFC_OK);
    return br.loss;
}

static void test_sparse_smoothing_and_weights(void)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    const int32_t y[2] = {2, 1};
    const double ones[3] = {1, 1, 1}, cw[3] = {1, 2, 0.5};
    /* plain, smoothed, weighted, both; from logits (softmax fused) and from probabilities */
    const char *acts[] = {"softmax", "linear"};
    for (int a = 0; a < 2; a++) {
        /* "linear" makes the Dense output logits with a softmax-less loss: from_logits */
        tfc_model *m = bound_model(acts[a], "sparse_categorical_crossentropy", be);
        CU_ASSERT_DOUBLE_EQUAL(model_loss(m, y, 1), expected_cce(y, 0, ones), 1e-5);
        tfc_model_free(m);
        m = bound_model(acts[a], "{type: sparse_categorical_crossentropy, label_smoothing: 0.1}",
                        be);
        CU_ASSERT_DOUBLE_EQUAL(model_loss(m, y, 1), expected_cce(y, 0.1, ones), 1e-5);
        CU_ASSERT_DOUBLE_EQUAL(model_loss(m, y, 0), expected_cce(y, 0.1, ones), 1e-5);
        tfc_model_free(m);
        m = bound_model(acts[a], "{class_weight: [1, 2, 0.5]}", be);
        CU_ASSERT_DOUBLE_EQUAL(model_loss(m, y, 1), expected_cce(y, 0, cw), 1e-5);
        /* evaluation is unweighted, as Keras's validation loss */
        CU_ASSERT_DOUBLE_EQUAL(model_loss(m, y, 0), expected_cce(y, 0, ones), 1e-5);
        tfc_model_free(m);
        m = bound_model(acts[a], "{label_smoothing: 0.1, class_weight: [1, 2, 0.5]}", be);
        CU_ASSERT_DOUBLE_EQUAL(model_loss(m, y, 1), expected_cce(y, 0.1, cw), 1e-5);
        tfc_model_free(m);
    }
    /* The numbers themselves (numpy, float64, the same formula written independently):
     * plain 1.5607658, smoothed 1.5199325, weighted 2.1264390, both 2.0610224. */
    CU_ASSERT_DOUBLE_EQUAL(expected_cce(y, 0, ones), 1.5607658, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(expected_cce(y, 0.1, ones), 1.5199325, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(expected_cce(y, 0, cw), 2.1264390, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(expected_cce(y, 0.1, cw), 2.0610224, 1e-6);
    tfc_backend_free(be);
}

/* Dense targets: categorical (argmax picks the class weight) and binary (toward 1/2). */
static void test_dense_targets(void)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    const float onehot[2][3] = {{0, 0, 1}, {0, 1, 0}};
    const int32_t y[2] = {2, 1};
    const double cw[3] = {1, 2, 0.5};
    tfc_model *m = bound_model("softmax", "{type: categorical_crossentropy, label_smoothing: 0.2, "
                                          "class_weight: [1, 2, 0.5]}", be);
    CU_ASSERT_DOUBLE_EQUAL(model_loss(m, onehot, 1), expected_cce(y, 0.2, cw), 1e-5);
    tfc_model_free(m);
    /* BCE on sigmoid outputs: mean over rows and outputs of -(t log p + (1-t) log(1-p)),
     * t = t (1 - s) + s / 2 */
    m = bound_model("sigmoid", "{type: binary_crossentropy, label_smoothing: 0.2}", be);
    double want = 0;
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 3; c++) {
            double z = Bias[c] + X[r][0] * W[0][c] + X[r][1] * W[1][c];
            double p = 1 / (1 + exp(-z)), t = onehot[r][c] * 0.8 + 0.1;
            want -= (t * log(p) + (1 - t) * log(1 - p)) / 6;
        }
    CU_ASSERT_DOUBLE_EQUAL(model_loss(m, onehot, 1), want, 1e-5);
    tfc_model_free(m);
    tfc_backend_free(be);
}

static void test_gradients(void)
{
    const char *losses[] = {
        "{type: sparse_categorical_crossentropy, label_smoothing: 0.1, class_weight: [1, 2, 0.5]}",
        "{label_smoothing: 0.3}", "{class_weight: [0.2, 3, 1]}"};
    const char *acts[] = {"softmax", "linear"};
    float x[8 * 2];
    int32_t y[8];
    tfc_test_fill(x, 16, -1, 1, 3);
    for (int i = 0; i < 8; i++) y[i] = i % 3;
    for (int a = 0; a < 2; a++)
        for (int k = 0; k < 3; k++) {
            tfc_model *m = tfc_test_model(model_yaml(acts[a], losses[k]));
            CU_ASSERT_PTR_NOT_NULL_FATAL(m);
            gradcheck_result r = tfc_gradcheck(m, 8, x, y, 40, 1);
            CU_ASSERT(r.checked > 0 && r.max_err < 1e-2);
            if (r.max_err >= 1e-2) printf("\n%s %s: %g at %s\n", acts[a], losses[k], r.max_err, r.worst);
            tfc_model_free(m);
        }
}

static void expect_error(const char *loss, const char *want)
{
    tfc_error err;
    tfc_error_clear(&err);
    const char *y = model_yaml("softmax", loss);
    tfc_doc *d = tfc_doc_load_string(y, strlen(y), "m.yaml", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    tfc_model *m = tfc_model_from_node(tfc_doc_root(d), "m", &err);
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, want));
    if (!strstr(err.text, want)) printf("\nwant: %s\ngot:  %s\n", want, err.text);
    tfc_model_free(m);
    tfc_doc_free(d);
}

static void test_errors(void)
{
    expect_error("{class_weight: [1, 2]}",
                 "m.yaml:4:22: error: loss.class_weight: has 2 weights for the 3 classes of the "
                 "last layer 'dense'");
    expect_error("{label_smoothing: 1.5}", "loss.label_smoothing: expected a number in [0, 1]");
    expect_error("{type: mse, label_smoothing: 0.1}", "mse takes none");
    expect_error("{type: huber, label_smoothing: 0.1}", "huber takes none");
    expect_error("{type: mae, delta: 1.0}", "loss.delta: is huber's argument; mae takes none");
    expect_error("{type: log_cosh, class_weight: [1, 1, 1]}", "log_cosh has no class per row");
    expect_error("{type: binary_crossentropy, class_weight: [1, 1, 1]}",
                 "loss.class_weight: weighs the rows of a categorical cross-entropy");
    expect_error("{class_weight: [1, -2, 1]}", "loss.class_weight[1]: expected a finite weight >= 0");
    expect_error("{class_weight: balance}",
                 "expected a list of one weight per class, such as [1, 2.5, 1], or balanced");
    expect_error("{typ: binary_crossentropy}", "did you mean 'type'?");
    expect_error("sparse_categorical_crossentropyy", "loss");
    expect_error("[a]", "expected a loss name or a mapping");
}

/* Label counts of a tensors source (the records, before stages), then the balanced weights
 * n / (C n_c) (scikit-learn's compute_class_weight("balanced")) in the loss. */
static void test_balanced_weights(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    float x[6][2] = {{0}};
    int32_t y[6] = {0, 2, 0, 0, 2, 1};
    tfc_tensor xt = {TFC_F32, {.ndim = 2, .dim = {6, 2}}, x, -1};
    tfc_tensor yt = {TFC_I32, {.ndim = 1, .dim = {6}}, y, -1};
    tfc_pipeline *p = tfc_pipeline_from_tensors(&xt, &yt, NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    int64_t counts[3];
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_label_counts(p, 3, counts, &err), TFC_OK);
    CU_ASSERT(counts[0] == 3 && counts[1] == 1 && counts[2] == 2);
    tfc_pipeline_free(p);
    /* a source without labels has nothing to count */
    p = tfc_pipeline_from_tensors(&xt, NULL, NULL, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_label_counts(p, 3, counts, &err), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no single integer label per record"));
    tfc_pipeline_free(p);

    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *m = tfc_test_model(model_yaml("softmax", "{class_weight: balanced}"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT(tfc_model_class_weight_balanced(m));
    int n = 0;
    CU_ASSERT_PTR_NULL(tfc_model_class_weight(m, &n)); /* none until the counts come */
    int64_t c3[3] = {3, 1, 2};
    CU_ASSERT_EQUAL_FATAL(tfc_model_balance_classes(m, c3, &err), TFC_OK);
    const double *w = tfc_model_class_weight(m, &n);
    CU_ASSERT_EQUAL_FATAL(n, 3);
    const double want[3] = {6.0 / 9.0, 6.0 / 3.0, 6.0 / 6.0};
    for (int c = 0; c < 3; c++) CU_ASSERT_DOUBLE_EQUAL(w[c], want[c], 1e-15);
    /* the training loss weighs its rows by them */
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
    tfc_layer *l = tfc_model_layer(m, 0);
    memcpy(l->params[0].data, W, sizeof W);
    memcpy(l->params[1].data, Bias, sizeof Bias);
    int32_t labels[2] = {1, 0};
    CU_ASSERT_DOUBLE_EQUAL(model_loss(m, labels, 1), expected_cce(labels, 0, want), 1e-6);
    tfc_model_free(m);
    /* no record of a class: weight 1 for it; no records at all: an error */
    m = tfc_test_model(model_yaml("softmax", "{class_weight: balanced}"));
    int64_t c_missing[3] = {4, 0, 2}, none[3] = {0, 0, 0};
    CU_ASSERT_EQUAL(tfc_model_balance_classes(m, c_missing, &err), TFC_OK);
    w = tfc_model_class_weight(m, &n);
    CU_ASSERT(w[0] == 6.0 / 12.0 && w[1] == 1.0 && w[2] == 1.0);
    CU_ASSERT_EQUAL(tfc_model_balance_classes(m, none, &err), TFC_ERR_CONFIG);
    tfc_model_free(m);
    tfc_backend_free(be);
}

static tfc_status train(const char *solver_yaml, const char *out, tfc_error *e)
{
    return tfc_test_train(solver_yaml, "lo_solver.yaml", out, e);
}

/* A run with `class_weight: balanced` ends with the weights of the same run given the list
 * n / (C n_c) computed here from the labels file (%.17g, the same doubles), and not with
 * those of an unweighted run. */
static void test_balanced_run(void)
{
    tfc_test_write_split("lo_x.npy", "lo_y.npy", 96, 5);
    tfc_tensor lab;
    tfc_error e;
    tfc_error_clear(&e);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_read(tfc_test_path("lo_y.npy"), &lab, &e), TFC_OK);
    int64_t counts[4] = {0};
    for (int i = 0; i < 96; i++) counts[((int32_t *)lab.data)[i]]++;
    free(lab.data);
    char list[256];
    int used = snprintf(list, sizeof list, "[");
    for (int c = 0; c < 4; c++)
        used += snprintf(list + used, sizeof list - (size_t)used, "%s%.17g", c ? ", " : "",
                         96.0 / (4.0 * (double)counts[c]));
    snprintf(list + used, sizeof list - (size_t)used, "]");
    const char *runs[3][2] = {{"balanced", "lo_bal"}, {list, "lo_list"}, {NULL, "lo_plain"}};
    char *finals[3];
    size_t lens[3];
    for (int k = 0; k < 3; k++) {
        char solver[2048], loss[512] = "sparse_categorical_crossentropy";
        if (runs[k][0]) snprintf(loss, sizeof loss, "{class_weight: %s}", runs[k][0]);
        snprintf(solver, sizeof solver,
                 "model:\n  name: lo\n  input: {shape: [16]}\n  layers:\n"
                 "    - Dense: {units: 4, activation: softmax}\n  loss: %s\n"
                 "data:\n  train:\n    source: {type: npy, features: lo_x.npy, labels: lo_y.npy}\n"
                 "    pipeline: [{shuffle: {buffer_size: 96}}, {repeat: {}}, {batch: {batch_size: 16}}]\n"
                 "optimizer: {type: sgd, learning_rate: 0.5}\nmax_iter: 12\nseed: 2\n",
                 loss);
        tfc_status st = train(solver, runs[k][1], &e);
        if (st) printf("\n%s", e.text);
        CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
        char path[1024];
        snprintf(path, sizeof path, "%s/final.safetensors", tfc_test_path(runs[k][1]));
        finals[k] = tfc_test_read(path, &lens[k]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(finals[k]);
    }
    CU_ASSERT(lens[0] == lens[1] && !memcmp(finals[0], finals[1], lens[0]));
    CU_ASSERT(lens[0] != lens[2] || memcmp(finals[0], finals[2], lens[0]));
    for (int k = 0; k < 3; k++) free(finals[k]);
}

/* MSE, MAE, Huber and log-cosh against Keras 3.15's own (tests/ref/keras_losses.py): the
 * batch loss within 1e-6 relative and its gradient within 1e-6 of its largest value
 * (jax.grad of Keras's loss), on errors from -5 to 5, and at an exact zero error MAE's
 * subgradient 0 (JAX's is -1); then each name
 * (Keras's long one too) parses as a model's `loss:`. */
static void test_keras_regression(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open("tests/ref/losses/regression.safetensors", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    const tfc_st_tensor *tx = tfc_st_find(f, "x"), *tt = tfc_st_find(f, "t");
    CU_ASSERT_FATAL(tx && tt);
    const int64_t rows = tx->shape.dim[0], C = tx->shape.dim[1], n = rows * C;
    float *x = malloc((size_t)n * 4), *t = malloc((size_t)n * 4), *dx = malloc((size_t)n * 4);
    float *want = malloc((size_t)n * 4);
    tfc_st_tensor_to_f32(tx, x);
    tfc_st_tensor_to_f32(tt, t);
    tfc_backend *be = tfc_cpu_backend_create(2);
    const tfc_loss_kind kinds[] = {TFC_LOSS_MSE, TFC_LOSS_MAE, TFC_LOSS_HUBER, TFC_LOSS_LOG_COSH};
    const char *names[] = {"mse", "mae", "huber", "log_cosh"};
    for (int k = 0; k < 4; k++) {
        char gname[32];
        snprintf(gname, sizeof gname, "%s_grad", names[k]);
        const tfc_st_tensor *tl = tfc_st_find(f, names[k]), *tg = tfc_st_find(f, gname);
        CU_ASSERT_FATAL(tl && tg);
        float wl;
        tfc_st_tensor_to_f32(tl, &wl);
        tfc_st_tensor_to_f32(tg, want);
        float loss;
        be->ops->loss(be, kinds[k], 0, 1.0f, rows, (int)C, x, t, NULL, 1.0f / (float)rows,
                      &loss, dx);
        double gmax = 0, gerr = 0;
        for (int64_t i = 1; i < n; i++) { /* element 0: below */
            gmax = fmax(gmax, fabs(want[i]));
            gerr = fmax(gerr, fabs((double)dx[i] - want[i]));
        }
        printf("\n  %s: loss %.8g, Keras's %.8g; gradient max diff %.2g of %.3g", names[k], loss,
               wl, gerr, gmax);
        CU_ASSERT(fabs(loss - wl) <= 1e-6 * fabs(wl));
        CU_ASSERT(gerr <= 1e-6 * gmax);
        /* a zero error: MAE's subgradient is 0 (TensorFlow's and PyTorch's sign(0)); JAX's
         * abs takes 1 at 0, so Keras on JAX gives -1/(rows C) there */
        const int zero_ok = kinds[k] == TFC_LOSS_MAE ? dx[0] == 0.0f && want[0] < 0
                                                     : fabs((double)dx[0] - want[0]) <= 1e-6 * gmax;
        CU_ASSERT(zero_ok);
    }
    tfc_backend_free(be);
    free(x), free(t), free(dx), free(want);
    tfc_st_close(f);
    /* a backend without the kernel (the GPU's tfc_backend.losses, for now) refuses to train
     * with it, naming the loss; binding for inference needs no loss */
    tfc_model *r = tfc_test_model(model_yaml("linear", "huber"));
    tfc_backend *lacking = tfc_cpu_backend_create(1);
    lacking->losses &= ~(1u << TFC_LOSS_HUBER);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind(r, lacking, 2, &err), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no kernel for the loss 'huber' yet"));
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind_inference(r, lacking, 2, &err), TFC_OK);
    tfc_model_free(r);
    tfc_backend_free(lacking);
    const char *losses[] = {"mae", "mean_absolute_error", "huber", "{type: huber, delta: 1}",
                            "log_cosh"};
    for (int k = 0; k < 5; k++) {
        tfc_model *m = tfc_test_model(model_yaml("linear", losses[k]));
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        CU_ASSERT(tfc_model_loss_kind(m) == (k < 2 ? TFC_LOSS_MAE : k < 4 ? TFC_LOSS_HUBER
                                                                        : TFC_LOSS_LOG_COSH));
        tfc_model_free(m);
    }
}

/* One fixture's loss cases against Keras's (tests/ref/keras_losses.py): each case's
 * predictions `<name>_x`, targets `<name>_t`, batch loss `<name>` and its gradient
 * `<name>_grad`; the loss within 1e-6 relative, the gradient within 1e-6 of its largest. */
typedef struct keras_loss_case {
    const char *name;
    tfc_loss_kind kind;
    float delta; /* Huber's */
} keras_loss_case;

static void keras_loss_cases(const char *path, const keras_loss_case *cases, size_t ncases)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open(path, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    tfc_backend *be = tfc_cpu_backend_create(2);
    for (size_t k = 0; k < ncases; k++) {
        char key[4][48];
        const char *suffix[4] = {"_x", "_t", "", "_grad"};
        const tfc_st_tensor *tv[4];
        for (int i = 0; i < 4; i++) {
            snprintf(key[i], sizeof key[i], "%s%s", cases[k].name, suffix[i]);
            tv[i] = tfc_st_find(f, key[i]);
            CU_ASSERT_PTR_NOT_NULL_FATAL(tv[i]);
        }
        const int64_t rows = tv[0]->shape.dim[0], C = tv[0]->shape.dim[1], n = rows * C;
        float *x = malloc((size_t)n * 4), *t = malloc((size_t)n * 4), *dx = malloc((size_t)n * 4);
        float *want = malloc((size_t)n * 4), wl, loss;
        tfc_st_tensor_to_f32(tv[0], x);
        tfc_st_tensor_to_f32(tv[1], t);
        tfc_st_tensor_to_f32(tv[2], &wl);
        tfc_st_tensor_to_f32(tv[3], want);
        be->ops->loss(be, cases[k].kind, 0, cases[k].delta, rows, (int)C, x, t, NULL,
                      1.0f / (float)rows, &loss, dx);
        double gmax = 0, gerr = 0;
        for (int64_t i = 0; i < n; i++) {
            gmax = fmax(gmax, fabs(want[i]));
            gerr = fmax(gerr, fabs((double)dx[i] - want[i]));
        }
        printf("\n  %s: loss %.8g, Keras's %.8g; gradient max diff %.2g of %.3g", cases[k].name,
               loss, wl, gerr, gmax);
        CU_ASSERT(fabs(loss - wl) <= 1e-6 * fabs(wl));
        CU_ASSERT(gerr <= 1e-6 * gmax);
        free(x), free(t), free(dx), free(want);
    }
    tfc_backend_free(be);
    tfc_st_close(f);
}

/* MSLE, MAPE, Poisson, KL divergence, hinge and squared hinge against Keras 3.15's own
 * (keras_losses.py, elementwise()): each on its own predictions and targets (MSLE's below 0,
 * KL divergence's outside [eps, 1], hinge's 0/1 and -1/1 targets); then Keras's names,
 * aliases and class names parse to the kind. */
static void test_keras_elementwise(void)
{
    static const keras_loss_case cases[] = {
        {"msle", TFC_LOSS_MSLE, 1},   {"mape", TFC_LOSS_MAPE, 1},
        {"poisson", TFC_LOSS_POISSON, 1}, {"kl_divergence", TFC_LOSS_KLD, 1},
        {"hinge", TFC_LOSS_HINGE, 1}, {"hinge_pm", TFC_LOSS_HINGE, 1},
        {"squared_hinge", TFC_LOSS_SQUARED_HINGE, 1}};
    keras_loss_cases("tests/ref/losses/elementwise.safetensors", cases,
                     sizeof cases / sizeof *cases);
    static const struct {
        const char *loss;
        tfc_loss_kind kind;
    } names[] = {{"msle", TFC_LOSS_MSLE},
                 {"mean_squared_logarithmic_error", TFC_LOSS_MSLE},
                 {"MSLE", TFC_LOSS_MSLE},
                 {"MeanSquaredLogarithmicError", TFC_LOSS_MSLE},
                 {"mape", TFC_LOSS_MAPE},
                 {"{type: mean_absolute_percentage_error}", TFC_LOSS_MAPE},
                 {"MeanAbsolutePercentageError", TFC_LOSS_MAPE},
                 {"poisson", TFC_LOSS_POISSON},
                 {"Poisson", TFC_LOSS_POISSON},
                 {"kl_divergence", TFC_LOSS_KLD},
                 {"kld", TFC_LOSS_KLD},
                 {"KLDivergence", TFC_LOSS_KLD},
                 {"hinge", TFC_LOSS_HINGE},
                 {"{type: Hinge, name: hinge}", TFC_LOSS_HINGE},
                 {"squared_hinge", TFC_LOSS_SQUARED_HINGE},
                 {"SquaredHinge", TFC_LOSS_SQUARED_HINGE},
                 {"MSE", TFC_LOSS_MSE},
                 {"{module: keras.losses, class_name: Poisson, config: {name: poisson, "
                  "reduction: sum_over_batch_size}, registered_name: null}",
                  TFC_LOSS_POISSON}};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        tfc_model *m = tfc_test_model(model_yaml("linear", names[k].loss));
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        CU_ASSERT(tfc_model_loss_kind(m) == names[k].kind);
        tfc_model_free(m);
    }
    expect_error("{type: poisson, from_logits: true}", "poisson takes none");
    expect_error("{type: hinge, delta: 2}", "is huber's argument; hinge takes none");
}

/* Huber with deltas 0.4 and 2.5, the categorical hinge (one-hot and -1/1 targets) and the
 * cosine similarity (a zero target row among its rows) against Keras 3.15's own
 * (keras_losses.py, rowwise()); the names parse, and delta reaches the loss. */
static void test_keras_rowwise(void)
{
    static const keras_loss_case cases[] = {
        {"huber_d04", TFC_LOSS_HUBER, 0.4f},
        {"huber_d25", TFC_LOSS_HUBER, 2.5f},
        {"categorical_hinge", TFC_LOSS_CATEGORICAL_HINGE, 1},
        {"categorical_hinge_pm", TFC_LOSS_CATEGORICAL_HINGE, 1},
        {"cosine_similarity", TFC_LOSS_COSINE_SIMILARITY, 1}};
    keras_loss_cases("tests/ref/losses/rowwise.safetensors", cases, sizeof cases / sizeof *cases);
    static const struct {
        const char *loss;
        tfc_loss_kind kind;
        double delta;
    } names[] = {{"categorical_hinge", TFC_LOSS_CATEGORICAL_HINGE, 1},
                 {"CategoricalHinge", TFC_LOSS_CATEGORICAL_HINGE, 1},
                 {"cosine_similarity", TFC_LOSS_COSINE_SIMILARITY, 1},
                 {"{type: CosineSimilarity, axis: -1}", TFC_LOSS_COSINE_SIMILARITY, 1},
                 {"{type: huber, delta: 0.4}", TFC_LOSS_HUBER, 0.4},
                 {"{class_name: Huber, config: {delta: 2.5, name: huber_loss}}", TFC_LOSS_HUBER,
                  2.5}};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        tfc_model *m = tfc_test_model(model_yaml("linear", names[k].loss));
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        CU_ASSERT(tfc_model_loss_kind(m) == names[k].kind);
        CU_ASSERT_EQUAL(m->heads[0].loss_opt.delta, names[k].delta);
        tfc_model_free(m);
    }
    expect_error("{type: huber, delta: 0}", "loss.delta: expected a finite threshold > 0, found 0");
    expect_error("{type: huber, delta: -1.5}", "expected a finite threshold > 0, found -1.5");
    expect_error("{type: cosine_similarity, axis: 1}", "loss.axis");
    expect_error("{type: categorical_hinge, from_logits: true}", "categorical_hinge takes none");
}

/* Keras's metrics mae, mse and root_mean_squared_error (and their long and class names)
 * beside a regression loss: each the mean over the rows of a row's mean error against the
 * targets (RMSE its root), computed here from the outputs;
 * reported under the name written; lower is better for the best checkpoint, early stopping
 * and the grid's ranking; with a cross-entropy, an error naming both. */
static void test_regression_metrics(void)
{
    const char *yaml = "input: {shape: [2]}\nlayers:\n  - Dense: {units: 3}\nloss: huber\n"
                       "metrics: [mae, mse, mean_absolute_error, loss, root_mean_squared_error,"
                       " RootMeanSquaredError]\n";
    tfc_model *m = tfc_test_model(yaml);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_STRING_EQUAL(tfc_model_metric(m, 2)->name, "mean_absolute_error");
    CU_ASSERT(tfc_model_metric(m, 2)->kind == TFC_METRIC_MAE);
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_model_init_weights(m, 7, &err), TFC_OK);
    const float x[4] = {1.0f, 2.0f, 0.5f, -1.0f}, t[6] = {0.5f, -2.0f, 3.0f, 0.0f, 1.0f, -0.5f};
    float y[6];
    tfc_batch_result r;
    CU_ASSERT_EQUAL(tfc_model_forward(m, x, 2, 0, 0, 0, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_model_loss(m, t, 0, &r, &err), TFC_OK);
    tfc_model_get_output(m, y);
    double mae = 0, mse = 0, huber = 0;
    for (int i = 0; i < 6; i++) {
        double e = (double)y[i] - t[i];
        mae += fabs(e) / 6, mse += e * e / 6;
        huber += (fabs(e) <= 1 ? 0.5 * e * e : fabs(e) - 0.5) / 6;
    }
    CU_ASSERT(fabs(r.metric[0] - mae) <= 1e-6 * mae);
    CU_ASSERT(fabs(r.metric[1] - mse) <= 1e-6 * mse);
    CU_ASSERT(r.metric[2] == r.metric[0]);
    CU_ASSERT(fabs(r.loss - huber) <= 1e-6 * huber && r.metric[3] == r.loss);
    CU_ASSERT(fabs(r.metric[4] - sqrt(mse)) <= 1e-6 * sqrt(mse));
    CU_ASSERT(r.metric[5] == r.metric[4]);
    CU_ASSERT_STRING_EQUAL(tfc_model_metric(m, 4)->name, "root_mean_squared_error");
    CU_ASSERT_STRING_EQUAL(tfc_model_metric(m, 5)->name, "RootMeanSquaredError");
    /* over batches, the root of the mean square (Keras's), not the mean of the roots: batches
     * of 3 and 1 rows with errors 1 and 3 give sqrt((3 + 9) / 4) */
    const tfc_metric_kind rk = TFC_METRIC_RMSE;
    double sum = tfc_metric_summand(rk, 1.0) * 3 + tfc_metric_summand(rk, 3.0) * 1;
    CU_ASSERT(tfc_metric_of_mean(rk, sum / 4) == sqrt(3.0));
    CU_ASSERT(tfc_metric_of_mean(TFC_METRIC_MSE, tfc_metric_summand(TFC_METRIC_MSE, 2.0)) == 2.0);
    CU_ASSERT(tfc_metric_name_lower_is_better("root_mean_squared_error"));
    tfc_monitor mon = {.name = "test/mean_absolute_error"};
    CU_ASSERT_EQUAL(tfc_monitor_resolve(&mon, m, NULL, "monitor", &err), TFC_OK);
    CU_ASSERT(mon.metric == 2 && !mon.higher);
    CU_ASSERT(tfc_metric_name_lower_is_better("mae") && tfc_metric_name_lower_is_better("loss"));
    CU_ASSERT(!tfc_metric_name_lower_is_better("accuracy"));
    CU_ASSERT_STRING_EQUAL(tfc_ranking_metric_name(m), "mae");
    tfc_model_free(m);
    tfc_backend_free(be);
    tfc_error_clear(&err);
    const char *bad = "input: {shape: [2]}\nlayers:\n  - Dense: {units: 3}\n"
                      "metrics: [accuracy, mae]\n";
    m = tfc_model_from_string(bad, strlen(bad), "m.yaml", &err);
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "mae compares the outputs with float targets"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "sparse_categorical_crossentropy reads one class id"));
    tfc_model_free(m);
}

/* Keras's ways of writing a loss: its class names, its from_logits (checked against the
 * last layer, never taken on trust), its fixed arguments at their defaults, and its
 * serialized form as keras.losses.serialize writes it. */
static void test_keras_forms(void)
{
    static const struct {
        const char *act, *loss;
        tfc_loss_kind kind;
    } ok[] = {
        {"linear", "SparseCategoricalCrossentropy", TFC_LOSS_SPARSE_CCE},
        {"linear", "{type: sparse_categorical_crossentropy, from_logits: true}",
         TFC_LOSS_SPARSE_CCE},
        {"softmax", "{type: CategoricalCrossentropy, from_logits: false, axis: -1}", TFC_LOSS_CCE},
        {"sigmoid", "{type: binary_crossentropy, from_logits: False, reduction: "
                    "sum_over_batch_size}", TFC_LOSS_BCE},
        {"linear", "{module: keras.losses, class_name: SparseCategoricalCrossentropy, config: "
                   "{name: sparse_categorical_crossentropy, reduction: sum_over_batch_size, "
                   "from_logits: true, ignore_class: null}, registered_name: null}",
         TFC_LOSS_SPARSE_CCE},
        {"linear", "{class_name: Huber, config: {name: huber_loss, reduction: "
                   "sum_over_batch_size}}", TFC_LOSS_HUBER},
        {"linear", "{class_name: MeanSquaredError}", TFC_LOSS_MSE},
        {"sigmoid", "{class_name: BinaryCrossentropy, config: {from_logits: false, "
                    "label_smoothing: 0.1, axis: -1}}", TFC_LOSS_BCE},
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        tfc_error err;
        tfc_error_clear(&err);
        const char *y = model_yaml(ok[i].act, ok[i].loss);
        tfc_model *m = tfc_model_from_string(y, strlen(y), "m.yaml", &err);
        if (!m) fprintf(stderr, "\n%s: %s", ok[i].loss, err.text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        CU_ASSERT(tfc_model_loss_kind(m) == ok[i].kind);
        tfc_model_free(m);
    }
    static const char *const bad[][3] = {
        {"softmax", "{type: categorical_crossentropy, from_logits: true}",
         "loss.from_logits: true, but the last layer 'dense' ends in softmax"},
        {"linear", "{type: sparse_categorical_crossentropy, from_logits: false}",
         "loss.from_logits: false, but the last layer 'dense' ends in no softmax or sigmoid"},
        {"linear", "{type: mse, from_logits: true}", "is a cross-entropy's argument"},
        {"linear", "{type: mse, reduction: sum}", "loss.reduction: not supported by tfc"},
        {"linear", "{type: sparse_categorical_crossentropy, ignore_class: 0}",
         "loss.ignore_class: not supported"},
        {"linear", "{class_name: SparseCategoricalCrossentropy, config: {from_logits: maybe}}",
         "loss.config.from_logits"},
        {"linear", "{class_name: FocalLoss}", "loss.class_name"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tfc_error err;
        tfc_error_clear(&err);
        const char *y = model_yaml(bad[i][0], bad[i][1]);
        tfc_model *m = tfc_model_from_string(y, strlen(y), "m.yaml", &err);
        CU_ASSERT_PTR_NULL(m);
        int found = strstr(err.text, bad[i][2]) != NULL;
        if (!found) fprintf(stderr, "\nwanted '%s' in: %s", bad[i][2], err.text);
        CU_ASSERT(found);
        tfc_model_free(m);
    }
}

TFC_TEST_MAIN("loss_options", {"sparse_smoothing_and_weights", test_sparse_smoothing_and_weights},
              {"dense_targets", test_dense_targets}, {"gradients", test_gradients},
              {"errors", test_errors}, {"balanced_weights", test_balanced_weights},
              {"balanced_run", test_balanced_run},
              {"keras_regression", test_keras_regression},
              {"keras_elementwise", test_keras_elementwise},
              {"keras_rowwise", test_keras_rowwise},
              {"regression_metrics", test_regression_metrics},
              {"keras_forms", test_keras_forms})
