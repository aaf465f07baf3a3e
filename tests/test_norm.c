/* The transformer layers around attention: LayerNormalization and RMSNormalization (the CPU
 * op against double-precision loops written here, forward and backward against central
 * differences of the double forward; its sums over rows independent of the team), KerasHub's
 * PositionEmbedding and TokenAndPositionEmbedding. Keras 3 parity from the fixtures
 * tests/ref/keras_norm.py wrote (tests/ref/norm/: outputs, input and weight gradients, and
 * Dense/gelu/Dropout/Add on [batch, time, features]), masks, argument errors, and the refusals
 * of a backend without the kernels and ONNX export's of what it cannot write. Run from the
 * repository's root. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/onnx.h"
#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "graph/model.h"
#include "solver/solver.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "layers/layer.h"
#include "testutil.h"

/* ---- the op against loops in double ----------------------------------------------------- */

/* The contract's forward of one row in double. */
static void ref_row(const double *x, int cols, int center_stats, int center, double eps,
                    const float *gamma, const float *beta, double *y)
{
    double mean = 0, mu, s = 0;
    for (int j = 0; j < cols; j++) mean += x[j];
    mean /= cols;
    mu = center_stats ? mean : 0.0;
    for (int j = 0; j < cols; j++) s += (x[j] - mu) * (x[j] - mu);
    double inv = 1.0 / sqrt(s / cols + eps);
    for (int j = 0; j < cols; j++) {
        double u = (x[j] - (center ? mean : 0.0)) * inv;
        y[j] = u * (gamma ? gamma[j] : 1.0) + (beta ? beta[j] : 0.0);
    }
}

/* L(x) = sum_j w[j] y[j] of one row, for the central differences. */
static double ref_loss(const double *x, const float *w, int cols, int cs, int c, double eps,
                       const float *gamma, const float *beta)
{
    double y[64], l = 0;
    ref_row(x, cols, cs, c, eps, gamma, beta, y);
    for (int j = 0; j < cols; j++) l += w[j] * y[j];
    return l;
}

static void check_op(int center_stats, int center, int with_gamma, int with_beta)
{
    enum { ROWS = 7, COLS = 24 };
    const float eps = 1e-3f;
    tfc_backend *be = tfc_cpu_backend_create(2);
    float x[ROWS * COLS], dy[ROWS * COLS], gamma[COLS], beta[COLS], y[ROWS * COLS];
    float stats[2 * ROWS], dx[ROWS * COLS], dg[COLS], db[COLS];
    tfc_test_fill(x, ROWS * COLS, -1, 1, 3);
    for (int i = 0; i < ROWS * COLS; i++) x[i] += 50.0f * (float)(i / COLS % 3); /* offsets */
    tfc_test_fill(dy, ROWS * COLS, -1, 1, 4);
    tfc_test_fill(gamma, COLS, 0.5, 1.5, 5);
    tfc_test_fill(beta, COLS, -0.5, 0.5, 6);
    const float *g = with_gamma ? gamma : NULL, *b = with_beta ? beta : NULL;
    tfc_layernorm_desc d = {.rows = ROWS, .cols = COLS, .center_stats = center_stats,
                            .center = center, .eps = eps};
    be->ops->layernorm_forward(be, &d, x, g, b, y, stats);
    /* errors relative to the largest value of each (rms_scaling's outputs reach ~100); rows
     * sit 0, 50 and 100 off zero, where a float's ulp (7.6e-6 at 100) is already ~1e-5 of the
     * rows' deviation (0.58): the input's own precision bounds y's and dx's */
    double worst_y = 0, worst_dx = 0, worst_dg = 0, worst_db = 0, my = 0, mdx = 0, mdg = 0;
    double rdg[COLS] = {0}, rdb[COLS] = {0};
    for (int j = 0; j < ROWS * COLS; j++) dx[j] = 1.0f; /* accumulates onto 1 */
    for (int j = 0; j < COLS; j++) dg[j] = db[j] = 0.0f;
    void *ws = malloc(be->ops->layernorm_workspace(be, &d));
    be->ops->layernorm_backward(be, &d, x, dy, g, stats, dx, with_gamma ? dg : NULL,
                                with_beta ? db : NULL, 0, ws);
    for (int r = 0; r < ROWS; r++) {
        double xr[COLS], yr[COLS], u[COLS];
        for (int j = 0; j < COLS; j++) xr[j] = x[r * COLS + j];
        ref_row(xr, COLS, center_stats, center, eps, g, b, yr);
        ref_row(xr, COLS, center_stats, center, eps, NULL, NULL, u);
        for (int j = 0; j < COLS; j++) {
            worst_y = fmax(worst_y, fabs(yr[j] - y[r * COLS + j])), my = fmax(my, fabs(yr[j]));
            rdg[j] += dy[r * COLS + j] * u[j];
            rdb[j] += dy[r * COLS + j];
            double xp[COLS], xm[COLS], h = 1e-4 * fmax(1.0, fabs(xr[j]));
            memcpy(xp, xr, sizeof xp), memcpy(xm, xr, sizeof xm);
            xp[j] += h, xm[j] -= h;
            double num = (ref_loss(xp, dy + r * COLS, COLS, center_stats, center, eps, g, b) -
                          ref_loss(xm, dy + r * COLS, COLS, center_stats, center, eps, g, b)) /
                         (2 * h);
            worst_dx = fmax(worst_dx, fabs(num + 1.0 - dx[r * COLS + j]));
            mdx = fmax(mdx, fabs(num));
        }
    }
    for (int j = 0; j < COLS; j++) {
        if (with_gamma) worst_dg = fmax(worst_dg, fabs(rdg[j] - dg[j]));
        mdg = fmax(mdg, fabs(rdg[j]));
        if (with_beta) worst_db = fmax(worst_db, fabs(rdb[j] - db[j]));
    }
    worst_y /= my, worst_dx /= mdx, worst_dg /= mdg;
    if (worst_y > 1e-5 || worst_dx > 5e-5 || worst_dg > 1e-5 || worst_db > 1e-5)
        fprintf(stderr, "\ncenter_stats %d center %d gamma %d beta %d: y %.3g dx %.3g "
                "dgamma %.3g dbeta %.3g\n", center_stats, center, with_gamma, with_beta, worst_y,
                worst_dx, worst_dg, worst_db);
    CU_ASSERT(worst_y < 1e-5);
    CU_ASSERT(worst_dx < 5e-5);
    CU_ASSERT(worst_dg < 1e-5);
    CU_ASSERT(worst_db < 1e-5);
    /* assign: dx's old contents (NaN here) are never read, and it writes what the
     * accumulating backward added onto 1 (within that sum's rounding) */
    float acc[ROWS * COLS];
    memcpy(acc, dx, sizeof acc);
    for (int j = 0; j < ROWS * COLS; j++) dx[j] = NAN;
    be->ops->layernorm_backward(be, &d, x, dy, g, stats, dx, NULL, NULL, 1, ws);
    int same = 1;
    for (int j = 0; j < ROWS * COLS; j++)
        same &= fabs((double)dx[j] - ((double)acc[j] - 1.0)) <= 2e-7 * (1.0 + fabs(acc[j]));
    CU_ASSERT(same);
    free(ws);
    tfc_backend_free(be);
}

static void test_op_values(void)
{
    check_op(1, 1, 1, 1); /* LayerNormalization */
    check_op(1, 1, 0, 1);
    check_op(1, 1, 1, 0);
    check_op(1, 1, 0, 0);
    check_op(0, 0, 1, 0); /* RMSNormalization */
    check_op(1, 0, 1, 0); /* LayerNormalization's rms_scaling */
}

/* A row whose mean is 1e4 deviations off zero: float sums of x^2 would lose the variance. */
static void test_op_offset_rows(void)
{
    enum { COLS = 4096 };
    tfc_backend *be = tfc_cpu_backend_create(1);
    float *x = malloc(COLS * 4), *y = malloc(COLS * 4), stats[2];
    tfc_test_fill(x, COLS, -1, 1, 8);
    for (int j = 0; j < COLS; j++) x[j] += 1e4f;
    double mean = 0, var = 0;
    for (int j = 0; j < COLS; j++) mean += x[j];
    mean /= COLS;
    for (int j = 0; j < COLS; j++) var += (x[j] - mean) * (x[j] - mean);
    var /= COLS;
    tfc_layernorm_desc d = {.rows = 1, .cols = COLS, .center_stats = 1, .center = 1, .eps = 1e-3f};
    be->ops->layernorm_forward(be, &d, x, NULL, NULL, y, stats);
    CU_ASSERT(fabs(stats[0] - mean) < 1e-3);
    CU_ASSERT(fabs(stats[1] * sqrt(var + 1e-3) - 1.0) < 1e-6);
    free(x), free(y);
    tfc_backend_free(be);
}

/* The backward's sums over rows split by the backend's thread count, not the team's: the
 * same bits on one thread of the team as on every one. */
static void test_op_team_independent(void)
{
    enum { ROWS = 4096, COLS = 40 };
    tfc_backend *be = tfc_cpu_backend_create(4);
    const size_t bytes = (size_t)ROWS * COLS * 4;
    float *x = malloc(bytes), *dy = malloc(bytes), *y = malloc(bytes);
    float *dx1 = malloc(bytes), *dx2 = malloc(bytes), stats[2 * ROWS];
    float gamma[COLS], dg[2][COLS] = {{0}}, db[2][COLS] = {{0}};
    tfc_test_fill(x, ROWS * COLS, -2, 2, 9);
    tfc_test_fill(dy, ROWS * COLS, -1, 1, 10);
    tfc_test_fill(gamma, COLS, 0.5, 1.5, 11);
    tfc_layernorm_desc d = {.rows = ROWS, .cols = COLS, .center_stats = 1, .center = 1,
                            .eps = 1e-3f};
    void *ws = malloc(be->ops->layernorm_workspace(be, &d));
    be->ops->layernorm_forward(be, &d, x, gamma, NULL, y, stats);
    for (int k = 0; k < 2; k++) {
        tfc_cpu_team_force(k == 0 ? 1 : 4);
        be->ops->layernorm_backward(be, &d, x, dy, gamma, stats, k ? dx2 : dx1, dg[k], db[k], 1,
                                    ws);
    }
    tfc_cpu_team_force(0);
    CU_ASSERT(!memcmp(dg[0], dg[1], sizeof dg[0]));
    CU_ASSERT(!memcmp(db[0], db[1], sizeof db[0]));
    CU_ASSERT(!memcmp(dx1, dx2, bytes));
    free(x), free(dy), free(y), free(dx1), free(dx2), free(ws);
    tfc_backend_free(be);
}

/* ---- Keras parity ------------------------------------------------------------------------ */

/* tests/ref/norm (tests/ref/keras_norm.py), each case as tfc_test_keras_case compares it:
 * outputs, the inference layout's, the weights both ways and, where the fixture has them
 * (no Dropout), the input's and every weight's gradients. */
static void test_keras_parity(void)
{
    static const tfc_keras_parity p = {.dir = "norm", .tol = 1e-5};
    static const char *const names[] = {"ln_last",  "ln_axes",  "rms",           "block",
                                        "block_nodrop", "position", "token_position", NULL};
    tfc_test_keras_cases(&p, names);
}

/* ---- the layers in a model ---------------------------------------------------------------- */

static void expect_error(const char *layer, const char *what)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "input: {shape: [3, 4]}\nlayers:\n  - %s\n", layer);
    tfc_error err = tfc_test_model_error(yaml);
    if (!strstr(err.msg, what)) fprintf(stderr, "\n%s: %s\n", layer, err.msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, what));
}

static void test_argument_errors(void)
{
    expect_error("LayerNormalization: {axis: 1}", "only trailing axes");
    expect_error("LayerNormalization: {axis: [-1, 1]}", "only trailing axes");
    expect_error("LayerNormalization: {axis: 0}", "is the batch axis");
    expect_error("RMSNormalization: {axis: 3}", "out of range");
    expect_error("LayerNormalization: {gamma_constraint: {type: unit_norm, axis: 1}}",
                 "axis: tfc takes a leading run of the axes of gamma [4]");
    expect_error("LayerNormalization: {beta_constraint: {max_value: 1}}", "missing required");
    expect_error("RMSNormalization: {center: false}", "unknown key 'center'");
    /* a null regularizer is Keras's default */
    tfc_error err;
    tfc_error_clear(&err);
    const char *ok = "input: {shape: [3, 4]}\nlayers:\n"
                     "  - LayerNormalization: {gamma_regularizer: null, axis: [2]}\n";
    tfc_model *m = tfc_model_from_string(ok, strlen(ok), "t.yaml", &err);
    CU_ASSERT_PTR_NOT_NULL(m);
    if (m) {
        const tfc_layer *l = tfc_model_layer(m, 0);
        CU_ASSERT_EQUAL(l->nparams, 2);
        CU_ASSERT_STRING_EQUAL(l->params[0].name, "gamma");
        CU_ASSERT_EQUAL(l->params[0].shape.ndim, 1);
        CU_ASSERT_EQUAL(l->params[0].shape.dim[0], 4);
    }
    tfc_model_free(m);
}

/* LayerNormalization passes an Embedding's mask on (Keras's supports_masking); Keras's
 * RMSNormalization does not support masking, so the mask stops there. */
static void test_masks(void)
{
    const char *yaml = "input: {shape: [5], dtype: int32}\nlayers:\n"
                       "  - Embedding: {input_dim: 9, output_dim: 4, mask_zero: true}\n"
                       "  - LayerNormalization: {}\n  - RMSNormalization: {}\n";
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), "t.yaml", &err);
    TFC_ASSERT(m != NULL);
    CU_ASSERT(tfc_model_layer(m, 1)->mask_in && tfc_model_layer(m, 1)->mask_out);
    CU_ASSERT(tfc_model_layer(m, 2)->mask_in && !tfc_model_layer(m, 2)->mask_out);
    tfc_model_free(m);
}

static void drop_layernorm(tfc_backend_ops *ops)
{
    ops->layernorm_forward = NULL, ops->layernorm_backward = NULL;
    ops->layernorm_workspace = NULL;
}

/* A backend without the kernels (the CPU's table with the slots emptied) refuses the model
 * at bind, naming the layer, for each of the two layers. */
static void test_missing_kernel_refused(void)
{
    static const char *const layers[] = {"LayerNormalization: {name: ln}",
                                         "RMSNormalization: {name: ln}"};
    for (int i = 0; i < 2; i++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [3, 4]}\nlayers:\n  - %s\n", layers[i]);
        tfc_test_expect_refused(yaml, drop_layernorm, "layer 'ln'", "(op 'layernorm_forward')");
    }
}

/* TokenAndPositionEmbedding is Embedding + PositionEmbedding, added: the same loss and the
 * same gradients, bit for bit, with the same weights; and token ids past the vocabulary are
 * data errors. With mask_zero only TokenAndPositionEmbedding carries the mask on: the Add
 * drops it, as Keras's does for an input without one (PositionEmbedding's). */
static void test_token_position_as_embedding(void)
{
    static const char *const yaml[2] = {
        "input: {shape: [6], dtype: int32}\nlayers:\n"
        "  - TokenAndPositionEmbedding: {name: e, vocabulary_size: 10, sequence_length: 8, "
        "embedding_dim: 4}\n  - Dense: {name: out, units: 5}\n",
        "input: {shape: [6], dtype: int32}\nlayers:\n"
        "  - Embedding: {name: tok, input_dim: 10, output_dim: 4}\n"
        "  - PositionEmbedding: {name: pos, sequence_length: 8}\n"
        "  - Add: {name: e, inputs: [tok, pos]}\n  - Dense: {name: out, units: 5}\n"};
    static const char *const masked[2] = {
        "input: {shape: [6], dtype: int32}\nlayers:\n"
        "  - TokenAndPositionEmbedding: {name: e, vocabulary_size: 10, sequence_length: 8, "
        "embedding_dim: 4, mask_zero: true}\n  - Dense: {name: out, units: 5}\n",
        "input: {shape: [6], dtype: int32}\nlayers:\n"
        "  - Embedding: {name: tok, input_dim: 10, output_dim: 4, mask_zero: true}\n"
        "  - PositionEmbedding: {name: pos, sequence_length: 8}\n"
        "  - Add: {name: e, inputs: [tok, pos]}\n  - Dense: {name: out, units: 5}\n"};
    for (int k = 0; k < 2; k++) {
        tfc_model *mm = tfc_test_model(masked[k]);
        TFC_ASSERT(mm);
        CU_ASSERT_EQUAL(tfc_model_layer(mm, k ? 2 : 0)->mask_out, !k);
        CU_ASSERT_EQUAL(tfc_model_layer(mm, k ? 3 : 1)->mask_out, !k);
        tfc_model_free(mm);
    }
    enum { N = 4, T = 6 };
    int32_t ids[N * T], labels[N * T];
    for (int i = 0; i < N * T; i++) /* trailing padding of 0 to 3 steps */
        ids[i] = i % T >= T - i / T ? 0 : 1 + (i * 7) % 9, labels[i] = i % 5;
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *m[2];
    double loss[2];
    float grads[2][8 * 4], tok[2][10 * 4];
    tfc_error err;
    tfc_error_clear(&err);
    for (int k = 0; k < 2; k++) {
        m[k] = tfc_test_model(yaml[k]);
        TFC_ASSERT(m[k] && tfc_model_bind(m[k], be, N, &err) == TFC_OK);
        TFC_ASSERT(tfc_model_init_weights(m[k], 3, &err) == TFC_OK);
    }
    tfc_layer *a = tfc_model_layer(m[0], 0);
    CU_ASSERT_STRING_EQUAL(a->params[0].name, "token_embedding/embeddings");
    CU_ASSERT_STRING_EQUAL(a->params[1].name, "position_embedding/embeddings");
    /* B's weights into A's */
    float buf[10 * 5];
    tfc_model_param_download(m[1], &tfc_model_layer(m[1], 0)->params[0], buf);
    tfc_model_param_upload(m[0], &a->params[0], buf);
    tfc_model_param_download(m[1], &tfc_model_layer(m[1], 1)->params[0], buf);
    tfc_model_param_upload(m[0], &a->params[1], buf);
    for (int p = 0; p < 2; p++) {
        tfc_model_param_download(m[1], &tfc_model_layer(m[1], 3)->params[p], buf);
        tfc_model_param_upload(m[0], &tfc_model_layer(m[0], 1)->params[p], buf);
    }
    for (int k = 0; k < 2; k++) {
        tfc_batch_result r;
        TFC_ASSERT(tfc_model_forward(m[k], ids, N, 1, 1, 0, &err) == TFC_OK);
        tfc_model_zero_grad(m[k]);
        TFC_ASSERT(tfc_model_loss(m[k], labels, 1, &r, &err) == TFC_OK);
        tfc_model_backward(m[k]);
        loss[k] = r.loss;
        tfc_model_grad_download(m[k], &tfc_model_layer(m[k], k)->params[k ? 0 : 1], grads[k]);
        tfc_model_grad_download(m[k], &tfc_model_layer(m[k], 0)->params[0], tok[k]);
    }
    CU_ASSERT_EQUAL(loss[0], loss[1]);
    CU_ASSERT(!memcmp(grads[0], grads[1], sizeof grads[0]));
    CU_ASSERT(!memcmp(tok[0], tok[1], sizeof tok[0]));
    ids[5] = 10;
    CU_ASSERT_EQUAL(tfc_model_forward(m[0], ids, N, 0, 1, 0, &err), TFC_ERR_DATA);
    for (int k = 0; k < 2; k++) tfc_model_free(m[k]);
    tfc_backend_free(be);
}

static void test_position_errors(void)
{
    expect_error("PositionEmbedding: {sequence_length: 2}", "more than sequence_length 2");
    expect_error("TokenAndPositionEmbedding: {vocabulary_size: 5, sequence_length: 9, "
                 "embedding_dim: 2}", "reads token ids");
    tfc_error err = tfc_test_model_error("input: {shape: [6], dtype: int32}\nlayers:\n"
                                "  - TokenAndPositionEmbedding: {vocabulary_size: 5, "
                                "sequence_length: 9, embedding_dim: 2, tie_weights: false}\n");
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "tie_weights"));
}

/* A small transformer-style model (positions, LayerNormalization, a gelu feed-forward block
 * with a residual Add, RMSNormalization) learns the synthetic 4-class set on two threads, and
 * a run resumed from its snapshot ends with the same weights, bit for bit. */
static tfc_status train_tiny(const char *out, const char *resume, tfc_train_result *res,
                             tfc_error *err)
{
    static const char solver[] =
        "model:\n  name: tiny\n  input: {shape: [16]}\n  layers:\n"
        "    - Reshape: {target_shape: [4, 4]}\n    - Dense: {name: d, units: 8}\n"
        "    - PositionEmbedding: {name: pos, sequence_length: 6}\n"
        "    - Add: {name: a, inputs: [d, pos]}\n    - LayerNormalization: {name: n1}\n"
        "    - Dense: {name: f1, units: 16, activation: gelu}\n"
        "    - Dense: {name: f2, units: 8}\n    - Add: {name: r, inputs: [n1, f2]}\n"
        "    - RMSNormalization: {name: n2}\n    - Flatten: {}\n"
        "    - Dense: {units: 4, activation: softmax}\n"
        "  loss: sparse_categorical_crossentropy\n  metrics: [accuracy]\n"
        "data:\n  train:\n    source: {type: npy, features: tn_x.npy, labels: tn_y.npy}\n"
        "    pipeline: [{repeat: {}}, {shuffle: {buffer_size: 64}}, {batch: {batch_size: 16}}]\n"
        "  test:\n    source: {type: npy, features: tn_x.npy, labels: tn_y.npy}\n"
        "    pipeline: [{batch: {batch_size: 64}}]\n"
        "optimizer: {type: adam, learning_rate: 0.01}\n"
        "max_iter: 120\ntest_interval: 120\nsnapshot: {interval: 60, keep: 0}\nseed: 3\n";
    tfc_solver_options o = {0};
    o.out_dir = tfc_test_path(out);
    o.resume = resume;
    o.threads = 2;
    o.console = fopen("/dev/null", "w");
    tfc_error_clear(err);
    tfc_solver *s = tfc_solver_load(tfc_test_write("tn.yaml", solver, -1), &o, err);
    tfc_status st = s ? tfc_solver_train(s, res, err) : err->code;
    if (st) printf("\n%s", err->text);
    tfc_solver_free(s);
    if (o.console) fclose(o.console);
    return st;
}

static void test_train_resume_exact(void)
{
    tfc_test_write_split("tn_x.npy", "tn_y.npy", 256, 7);
    tfc_train_result *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    tfc_error err;
    CU_ASSERT_EQUAL_FATAL(train_tiny("tn_full", NULL, a, &err), TFC_OK);
    CU_ASSERT(a->have_test && a->test.metric[0] > 0.6); /* chance: 0.25 */
    char state[1024], fa[1024], fb[1024];
    snprintf(state, sizeof state, "%s/snapshots/tiny_iter_60.state", tfc_test_path("tn_full"));
    CU_ASSERT_EQUAL_FATAL(train_tiny("tn_resumed", state, b, &err), TFC_OK);
    snprintf(fa, sizeof fa, "%s/final.safetensors", tfc_test_path("tn_full"));
    snprintf(fb, sizeof fb, "%s/final.safetensors", tfc_test_path("tn_resumed"));
    size_t na, nb;
    char *da = tfc_test_read(fa, &na), *db = tfc_test_read(fb, &nb);
    CU_ASSERT(da && db && na == nb && !memcmp(da, db, na));
    if (getenv("TFC_VERBOSE")) fprintf(stderr, "\ntest accuracy %.3f\n", a->test.metric[0]);
    free(da), free(db), free(a), free(b);
}

/* ONNX export refuses what it has no form for: LayerNormalization's operator below opset 17
 * is an error naming the layer, no file; RMSNormalization (composed before opset 23) and
 * rms_scaling export at any opset. (The normalisations and position embeddings it exports
 * are checked against onnxruntime in tests/test_onnx.c.) */
static void test_onnx_refused(void)
{
    static const struct {
        const char *layer, *msg;
        int opset;
    } cases[] = {{"LayerNormalization: {name: n}", "needs opset 17", 16},
                 {"LayerNormalization: {name: n, rms_scaling: true}", NULL, 14},
                 {"RMSNormalization: {name: n}", NULL, 14},
                 {"RMSNormalization: {name: n}", NULL, 23},
                 {"PositionEmbedding: {name: n, sequence_length: 3}", NULL, 14}};
    tfc_backend *be = tfc_cpu_backend_create(1);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [3, 4]}\nlayers:\n  - Dense: {units: 4}\n"
                 "  - %s\n", cases[i].layer);
        tfc_model *m = tfc_test_model(yaml);
        tfc_error err;
        tfc_error_clear(&err);
        TFC_ASSERT(m && tfc_model_bind_inference(m, be, 2, &err) == TFC_OK);
        const char *path = tfc_test_path("norm.onnx");
        remove(path);
        tfc_onnx_options o = {.opset = cases[i].opset};
        tfc_status st = tfc_onnx_export(m, &o, path, &err);
        FILE *f = fopen(path, "rb");
        if (cases[i].msg) {
            CU_ASSERT_EQUAL(st, TFC_ERR_USAGE);
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'n' (LayerNormalization)"));
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, cases[i].msg));
            CU_ASSERT_PTR_NULL(f);
        } else {
            CU_ASSERT_EQUAL(st, TFC_OK);
            CU_ASSERT_PTR_NOT_NULL(f);
        }
        if (f) fclose(f);
        tfc_model_free(m);
    }
    tfc_backend_free(be);
}

/* ---- GroupNormalization ------------------------------------------------------------------ */

/* The contract's forward in double of one example x [outer, groups, cg, inner]. */
static void gn_ref(const tfc_groupnorm_desc *d, const double *x, const float *gamma,
                   const float *beta, double *y, double *u)
{
    const int64_t C = (int64_t)d->groups * d->cg, m = d->outer * d->cg * d->inner;
    for (int g = 0; g < d->groups; g++) {
        double mean = 0, var = 0;
        for (int pass = 0; pass < 2; pass++)
            for (int64_t o = 0; o < d->outer; o++)
                for (int64_t c = g * d->cg; c < (g + 1) * d->cg; c++)
                    for (int64_t i = 0; i < d->inner; i++) {
                        double v = x[(o * C + c) * d->inner + i];
                        if (pass) var += (v - mean) * (v - mean);
                        else mean += v / m;
                    }
        double inv = 1.0 / sqrt(var / m + d->eps);
        for (int64_t o = 0; o < d->outer; o++)
            for (int64_t c = g * d->cg; c < (g + 1) * d->cg; c++)
                for (int64_t i = 0; i < d->inner; i++) {
                    int64_t at = (o * C + c) * d->inner + i;
                    double uu = (x[at] - mean) * inv;
                    if (u) u[at] = uu;
                    y[at] = uu * (gamma ? gamma[c] : 1.0) + (beta ? beta[c] : 0.0);
                }
    }
}

static double gn_ref_loss(const tfc_groupnorm_desc *d, const double *x, const float *w,
                          const float *gamma, const float *beta)
{
    double y[640], l = 0;
    const int64_t per = d->outer * d->groups * d->cg * d->inner;
    gn_ref(d, x, gamma, beta, y, NULL);
    for (int64_t j = 0; j < per; j++) l += w[j] * y[j];
    return l;
}

/* The op against gn_ref on n examples sitting 0, 50 and 100 off zero (channels last with
 * groups of up to 256 channels in blocks of groups, the rest group by group): y, dx against central
 * differences (accumulated onto 1), dgamma and dbeta against sums in double, and the
 * assigning backward never reading dx. */
static void check_gn_op(int64_t outer, int groups, int cg, int64_t inner, int with_gamma,
                        int with_beta)
{
    enum { N = 3, MAX = 640, CMAX = 320 };
    tfc_groupnorm_desc d = {.n = N, .outer = outer, .inner = inner, .groups = groups, .cg = cg,
                            .eps = 1e-3f};
    const int C = groups * cg;
    const int64_t per = outer * C * inner;
    TFC_ASSERT(per <= MAX && C <= CMAX && groups <= 64);
    tfc_backend *be = tfc_cpu_backend_create(2);
    float x[N * MAX], dy[N * MAX], y[N * MAX], dx[N * MAX], gamma[CMAX], beta[CMAX];
    float stats[2 * N * 64], dg[CMAX] = {0}, db[CMAX] = {0};
    tfc_test_fill(x, N * per, -1, 1, 3);
    for (int64_t i = 0; i < N * per; i++) x[i] += 50.0f * (float)(i / per); /* offsets */
    tfc_test_fill(dy, N * per, -1, 1, 4);
    tfc_test_fill(gamma, C, 0.5, 1.5, 5);
    tfc_test_fill(beta, C, -0.5, 0.5, 6);
    const float *g = with_gamma ? gamma : NULL, *b = with_beta ? beta : NULL;
    be->ops->groupnorm_forward(be, &d, x, g, b, y, stats);
    for (int64_t i = 0; i < N * per; i++) dx[i] = 1.0f;
    void *ws = malloc(be->ops->groupnorm_workspace(be, &d) + 1);
    be->ops->groupnorm_backward(be, &d, x, dy, g, stats, dx, with_gamma ? dg : NULL,
                                with_beta ? db : NULL, 0, ws);
    double wy = 0, wdx = 0, my = 0, mdx = 0, rdg[CMAX] = {0}, rdb[CMAX] = {0};
    for (int e = 0; e < N; e++) {
        double xe[MAX], ye[MAX], ue[MAX];
        for (int64_t j = 0; j < per; j++) xe[j] = x[e * per + j];
        gn_ref(&d, xe, g, b, ye, ue);
        for (int64_t j = 0; j < per; j++) {
            const int c = (int)(j / inner % C);
            wy = fmax(wy, fabs(ye[j] - y[e * per + j])), my = fmax(my, fabs(ye[j]));
            rdg[c] += dy[e * per + j] * ue[j];
            rdb[c] += dy[e * per + j];
            double h = 1e-4 * fmax(1.0, fabs(xe[j])), keep = xe[j];
            xe[j] = keep + h;
            double lp = gn_ref_loss(&d, xe, dy + e * per, g, b);
            xe[j] = keep - h;
            double lm = gn_ref_loss(&d, xe, dy + e * per, g, b);
            xe[j] = keep;
            double num = (lp - lm) / (2 * h);
            wdx = fmax(wdx, fabs(num + 1.0 - dx[e * per + j])), mdx = fmax(mdx, fabs(num));
        }
    }
    double wdg = 0, wdb = 0, mdg = 0;
    for (int c = 0; c < C; c++) {
        mdg = fmax(mdg, fabs(rdg[c]));
        if (with_gamma) wdg = fmax(wdg, fabs(rdg[c] - dg[c]));
        if (with_beta) wdb = fmax(wdb, fabs(rdb[c] - db[c]));
    }
    wy /= my, wdx /= mdx, wdg /= mdg;
    if (wy > 1e-5 || wdx > 5e-5 || wdg > 1e-5 || wdb > 1e-5 || getenv("TFC_VERBOSE"))
        fprintf(stderr, "\ngroupnorm outer %lld groups %d cg %d inner %lld gamma %d beta %d: "
                "y %.3g dx %.3g dgamma %.3g dbeta %.3g\n", (long long)outer, groups, cg,
                (long long)inner, with_gamma, with_beta, wy, wdx, wdg, wdb);
    CU_ASSERT(wy < 1e-5);
    CU_ASSERT(wdx < 5e-5);
    CU_ASSERT(wdg < 1e-5);
    CU_ASSERT(wdb < 1e-5);
    /* assign: the same values, dx's old contents (NaN here) never read */
    float *dxa = malloc((size_t)(N * per) * sizeof *dxa);
    for (int64_t i = 0; i < N * per; i++) dxa[i] = NAN;
    be->ops->groupnorm_backward(be, &d, x, dy, g, stats, dxa, NULL, NULL, 1, ws);
    double wa = 0;
    for (int64_t i = 0; i < N * per; i++) wa = fmax(wa, fabs(dxa[i] + 1.0 - dx[i]));
    CU_ASSERT(wa < 1e-5 * mdx); /* NaN fails too */
    free(dxa), free(ws);
    tfc_backend_free(be);
}

static void test_gn_op_values(void)
{
    check_gn_op(12, 2, 3, 1, 1, 1); /* channels last: (4, 3, 6) images, 2 groups */
    check_gn_op(7, 6, 1, 1, 1, 1);  /* a sequence, one group per channel */
    check_gn_op(1, 2, 2, 9, 1, 1);  /* channels first: a group contiguous */
    check_gn_op(3, 3, 2, 4, 0, 1);  /* a middle axis; no gamma */
    check_gn_op(5, 1, 4, 1, 1, 0);  /* one group; no beta */
    check_gn_op(5, 2, 2, 2, 0, 0);
    check_gn_op(2, 40, 8, 1, 1, 1); /* 320 channels last: blocks of 32 and 8 groups */
    check_gn_op(2, 1, 300, 1, 1, 1); /* a group wider than a block */
}

/* The backward's sums over examples split by the backend's thread count, not the team's. */
static void test_gn_op_team_independent(void)
{
    enum { N = 512, HW = 16, C = 8 };
    tfc_backend *be = tfc_cpu_backend_create(4);
    tfc_groupnorm_desc d = {.n = N, .outer = HW, .inner = 1, .groups = 4, .cg = 2,
                            .eps = 1e-3f};
    const size_t bytes = (size_t)N * HW * C * 4;
    float *x = malloc(bytes), *dy = malloc(bytes), *y = malloc(bytes);
    float *dx1 = malloc(bytes), *dx2 = malloc(bytes), *stats = malloc(2 * N * 4 * 4);
    float gamma[C], dg[2][C] = {{0}}, db[2][C] = {{0}};
    tfc_test_fill(x, N * HW * C, -2, 2, 9);
    tfc_test_fill(dy, N * HW * C, -1, 1, 10);
    tfc_test_fill(gamma, C, 0.5, 1.5, 11);
    void *ws = malloc(be->ops->groupnorm_workspace(be, &d));
    be->ops->groupnorm_forward(be, &d, x, gamma, NULL, y, stats);
    for (int k = 0; k < 2; k++) {
        tfc_cpu_team_force(k == 0 ? 1 : 4);
        be->ops->groupnorm_backward(be, &d, x, dy, gamma, stats, k ? dx2 : dx1, dg[k], db[k], 1,
                                    ws);
    }
    tfc_cpu_team_force(0);
    CU_ASSERT(!memcmp(dg[0], dg[1], sizeof dg[0]));
    CU_ASSERT(!memcmp(db[0], db[1], sizeof db[0]));
    CU_ASSERT(!memcmp(dx1, dx2, bytes));
    free(x), free(dy), free(y), free(dx1), free(dx2), free(stats), free(ws);
    tfc_backend_free(be);
}

/* Keras 3 parity (tests/ref/keras_group_norm.py): images with 2 groups and one per channel
 * after a convolution, GroupNormalization first, sequences with center or scale off, and
 * the channel axis first or in the middle; outputs, the input's and every weight's
 * gradients. */
static void test_gn_keras_parity(void)
{
    static const tfc_keras_parity p = {.dir = "group_norm", .tol = 1e-5};
    static const char *const names[] = {"image", "image_raw", "sequence", "axes", NULL};
    tfc_test_keras_cases(&p, names);
}

static void test_gn_errors(void)
{
    expect_error("GroupNormalization: {name: g, groups: 3}", "layer 'g': groups 3");
    expect_error("GroupNormalization: {groups: 3}", "groups 3 does not divide the 4 channels");
    expect_error("GroupNormalization: {}", "groups 32 is more than the 4 channels");
    expect_error("GroupNormalization: {groups: 0}", "groups 0");
    expect_error("GroupNormalization: {groups: -2}", "an integer in [-1, ");
    expect_error("GroupNormalization: {groups: 2, axis: 0}", "is the batch axis");
    expect_error("GroupNormalization: {groups: 2, axis: 3}", "out of range");
    expect_error("GroupNormalization: {groups: 2, axis: -4}", "out of range");
    expect_error("GroupNormalization: {groups: 2, gamma_constraint: {type: non_neg, rate: 1}}",
                 "unknown key 'rate'");
    expect_error("GroupNormalization: {groups: 2, axis: [1]}", "found a sequence");
    /* Keras's weights: gamma, beta (C,) as each of center and scale asks; the mask passes */
    const char *yaml = "input: {shape: [5], dtype: int32}\nlayers:\n"
                       "  - Embedding: {input_dim: 9, output_dim: 4, mask_zero: true}\n"
                       "  - GroupNormalization: {groups: 2, gamma_regularizer: l2}\n"
                       "  - GroupNormalization: {groups: -1, axis: 1, center: false}\n"
                       "  - GroupNormalization: {groups: 2, scale: false, center: false}\n";
    tfc_model *m = tfc_test_model(yaml);
    TFC_ASSERT(m != NULL);
    const tfc_layer *l = tfc_model_layer(m, 1), *l2 = tfc_model_layer(m, 2);
    CU_ASSERT(l->mask_in && l->mask_out);
    CU_ASSERT_EQUAL(l->nparams, 2);
    CU_ASSERT_STRING_EQUAL(l->params[0].name, "gamma");
    CU_ASSERT_STRING_EQUAL(l->params[1].name, "beta");
    CU_ASSERT(l->params[0].shape.ndim == 1 && l->params[0].shape.dim[0] == 4);
    CU_ASSERT(l2->nparams == 1 && l2->params[0].shape.dim[0] == 5);
    CU_ASSERT_STRING_EQUAL(l2->params[0].name, "gamma");
    CU_ASSERT_EQUAL(tfc_model_layer(m, 3)->nparams, 0);
    tfc_model_free(m);
}

/* A backend without the kernels refuses the model at bind, naming the layer. */
static void test_gn_missing_kernel_refused(void)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    const tfc_backend_ops *cpu_ops = be->ops;
    tfc_backend_ops lacking = *be->ops;
    lacking.groupnorm_forward = NULL, lacking.groupnorm_backward = NULL;
    lacking.groupnorm_workspace = NULL;
    tfc_model *m = tfc_test_model("input: {shape: [3, 4]}\nlayers:\n"
                                  "  - GroupNormalization: {name: gn, groups: 2}\n");
    TFC_ASSERT(m != NULL);
    tfc_error err;
    tfc_error_clear(&err);
    be->ops = &lacking;
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'gn'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "(op 'groupnorm_forward')"));
    be->ops = cpu_ops;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
    tfc_model_free(m);
    tfc_backend_free(be);
}

TFC_TEST_MAIN("norm", {"op_values", test_op_values}, {"op_offset_rows", test_op_offset_rows},
              {"op_team_independent", test_op_team_independent},
              {"keras_parity", test_keras_parity}, {"argument_errors", test_argument_errors},
              {"masks", test_masks}, {"missing_kernel_refused", test_missing_kernel_refused},
              {"token_position_as_embedding", test_token_position_as_embedding},
              {"position_errors", test_position_errors}, {"onnx_refused", test_onnx_refused},
              {"train_resume_exact", test_train_resume_exact},
              {"gn_op_values", test_gn_op_values},
              {"gn_op_team_independent", test_gn_op_team_independent},
              {"gn_keras_parity", test_gn_keras_parity}, {"gn_errors", test_gn_errors},
              {"gn_missing_kernel_refused", test_gn_missing_kernel_refused})
