/* Maximum and Minimum (src/layers/merge.c on the extremum ops, cpu_extremum.c): the op against
 * hand-worked folds (ties split in halves, NaN, Keras's Merge under a mask with every mix of
 * masked inputs), Keras 3 parity from the fixtures tests/ref/keras_merge.py wrote
 * (tests/ref/merge/: outputs, input and weight gradients, ties, images, masked sequences and
 * their padding steps), argument errors, the refusal of a backend without the kernels and
 * ONNX export's of masked inputs. Dot (src/layers/dot.c): Keras 3 parity (tests/ref/dot/:
 * vectors, sequences and rank-3 examples, every kind of axis, normalize and its clamp at
 * keras.config.epsilon()), a hand-worked
 * product, argument errors and the refusal of a backend without permute or l2norm.
 * Run from the repository's root. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/onnx.h"
#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "gradcheck.h"
#include "graph/model.h"
#include "kerasref.h"
#include "layers/layer.h"
#include "testutil.h"

/* ---- the op ------------------------------------------------------------------------------ */

/* Three inputs of 2 rows x 2 columns through extremum_forward / backward (dy = 1): y and the
 * weights dx_i, against the expected values. */
static void check_fold(int minimum, unsigned masked, const float *mask, const float *x0,
                       const float *x1, const float *x2, const float *y_want,
                       const float w_want[3][4])
{
    tfc_backend *be = tfc_cpu_backend_create(2);
    const float *x[3] = {x0, x1, x2};
    float y[4], dy[4] = {1, 1, 1, 1}, d0[4] = {0}, d1[4] = {0}, d2[4] = {0};
    float *dx[3] = {d0, d1, d2};
    tfc_extremum_desc d = {.rows = 2, .cols = 2, .k = 3, .minimum = minimum, .masked = masked};
    be->ops->extremum_forward(be, &d, x, mask, y);
    be->ops->extremum_backward(be, &d, x, mask, dy, dx);
    for (int e = 0; e < 4; e++) {
        CU_ASSERT(y[e] == y_want[e] || (isnan(y[e]) && isnan(y_want[e])));
        for (int i = 0; i < 3; i++) {
            if (dx[i][e] != w_want[i][e])
                fprintf(stderr, "\nmin %d masked %u: element %d input %d: %g, want %g\n",
                        minimum, masked, e, i, dx[i][e], w_want[i][e]);
            CU_ASSERT_EQUAL(dx[i][e], w_want[i][e]);
        }
    }
    /* dx[i] NULL: not needed, the others unchanged (accumulating) */
    float *some[3] = {d0, NULL, d2};
    be->ops->extremum_backward(be, &d, x, mask, dy, some);
    for (int e = 0; e < 4; e++) {
        CU_ASSERT_EQUAL(d0[e], 2 * w_want[0][e]);
        CU_ASSERT_EQUAL(d2[e], 2 * w_want[2][e]);
    }
    tfc_backend_free(be);
}

static void test_op_values(void)
{
    /* element 0: a tie then a loser; 1: a winner then a tie; 2: a three-way tie; 3: one winner */
    const float x0[4] = {1, 2, 0, -1}, x1[4] = {1, 3, 0, 5}, x2[4] = {0, 3, 0, 2};
    const float ymax[4] = {1, 3, 0, 5}, ymin[4] = {0, 2, 0, -1};
    const float wmax[3][4] = {{.5f, 0, .25f, 0}, {.5f, .5f, .25f, 1}, {0, .5f, .5f, 0}};
    const float wmin[3][4] = {{0, 1, .25f, 1}, {0, 0, .25f, 0}, {1, 0, .5f, 0}};
    check_fold(0, 0, NULL, x0, x1, x2, ymax, wmax);
    check_fold(1, 0, NULL, x0, x1, x2, ymin, wmin);
    /* a mask without masked inputs changes nothing */
    const float mask[2] = {1, 0};
    check_fold(0, 0, mask, x0, x1, x2, ymax, wmax);
    /* row 1 (elements 2, 3) padding: every input masked: x0 */
    const float y111[4] = {1, 3, 0, -1};
    const float w111[3][4] = {{.5f, 0, 1, 1}, {.5f, .5f, 0, 0}, {0, .5f, 0, 0}};
    check_fold(0, 7, mask, x0, x1, x2, y111, w111);
    /* x1 without the mask replaces x0, then x2 (masked) leaves it */
    const float y101[4] = {1, 3, 0, 5};
    const float w101[3][4] = {{.5f, 0, 0, 0}, {.5f, .5f, 1, 1}, {0, .5f, 0, 0}};
    check_fold(0, 5, mask, x0, x1, x2, y101, w101);
    /* x1 masked leaves x0, x2 without replaces it */
    const float y011[4] = {1, 3, 0, 2};
    const float w011[3][4] = {{.5f, 0, 0, 0}, {.5f, .5f, 0, 0}, {0, .5f, 1, 1}};
    check_fold(0, 3, mask, x0, x1, x2, y011, w011);
    /* x0 without the mask: x1 masked leaves it, x2 enters the fold (min: 0 ties, 2 > -1) */
    const float y010[4] = {0, 2, 0, -1};
    const float w010[3][4] = {{0, 1, .5f, 1}, {0, 0, 0, 0}, {1, 0, .5f, 0}};
    check_fold(1, 2, mask, x0, x1, x2, y010, w010);
    /* NaN propagates from either side */
    const float n0[4] = {NAN, 1, 1, 1}, n1[4] = {0, NAN, 0, 0}, n2[4] = {0, 0, 0, NAN};
    const float ynan[4] = {NAN, NAN, 1, NAN};
    const float wnan[3][4] = {{1, 0, 1, 0}, {0, 1, 0, 0}, {0, 0, 0, 1}};
    check_fold(0, 0, NULL, n0, n1, n2, ynan, wnan);
}

/* ---- Keras parity ------------------------------------------------------------------------ */

/* Each fixture through tests/util/kerasref's harness: its weights loaded by name (every
 * parameter there) and written back the same under the same names, the inference output (the
 * same bits from the inference layout) and, where the fixture has them, the MSE loss's
 * gradients after a training forward, each within 1e-5 of the largest value */
static void test_keras_parity(void)
{
    static const tfc_keras_parity p = {.dir = "merge", .tol = 1e-5};
    static const char *const names[] = {"ties", "image", "seq_masked", "seq_steps", NULL};
    tfc_test_keras_cases(&p, names);
}

/* Dot: vectors, sequences (transposed operands) and rank-3 examples (permuted operands),
 * normalize on each kind */
static void test_dot_keras_parity(void)
{
    static const tfc_keras_parity p = {.dir = "dot", .tol = 1e-5, .all_grads = 1};
    static const char *const names[] = {"vectors", "sequences", "images", "clamp", NULL};
    tfc_test_keras_cases(&p, names);
}

/* Dot of the input (2, 3) with itself over axis 1 (the steps): y = x^T x, (3, 3), checked
 * against the sums by hand, and with normalize the cosines (1 on the diagonal) */
static void test_dot_values(void)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    for (int norm = 0; norm < 2; norm++) {
        char yaml[160];
        snprintf(yaml, sizeof yaml, "input: {shape: [2, 3]}\nlayers:\n"
                 "  - Dot: {axes: 1, normalize: %s, inputs: [input, input]}\n",
                 norm ? "true" : "false");
        tfc_model *m = tfc_test_model(yaml);
        tfc_error err;
        tfc_error_clear(&err);
        TFC_ASSERT(m && tfc_model_bind_inference(m, be, 1, &err) == TFC_OK);
        const float x[6] = {1, 2, 3, -1, 0, 4};
        float y[9];
        TFC_ASSERT(tfc_model_forward(m, x, 1, 0, 1, 0, &err) == TFC_OK);
        tfc_model_get_output(m, y);
        double nrm[3];
        for (int j = 0; j < 3; j++) nrm[j] = norm ? sqrt(x[j] * x[j] + x[3 + j] * x[3 + j]) : 1;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                double want = (x[i] * x[j] + x[3 + i] * x[3 + j]) / (nrm[i] * nrm[j]);
                CU_ASSERT_DOUBLE_EQUAL(y[i * 3 + j], want, 1e-6);
            }
        tfc_model_free(m);
    }
    tfc_backend_free(be);
}

/* Concatenate's `axis` counted as Keras counts it, the batch axis 0: the image x (2, 2, 1)
 * joined with 10 + x along axis 1 (rows), 2 (columns), 3 and -1 (channels), against the
 * values by hand; DenseNet's Concatenate(axis=3) is the channels' join. */
static void test_concat_axes(void)
{
    static const struct {
        const char *axis;
        int shape[3];
        float want[8];
    } cases[] = {
        {"1", {4, 2, 1}, {1, 2, 3, 4, 11, 12, 13, 14}},
        {"2", {2, 4, 1}, {1, 2, 11, 12, 3, 4, 13, 14}},
        {"3", {2, 2, 2}, {1, 11, 2, 12, 3, 13, 4, 14}},
        {"-1", {2, 2, 2}, {1, 11, 2, 12, 3, 13, 4, 14}},
        {"-3", {4, 2, 1}, {1, 2, 3, 4, 11, 12, 13, 14}},
    };
    tfc_backend *be = tfc_cpu_backend_create(1);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [2, 2, 1]}\nlayers:\n"
                 "  - Rescaling: {name: r, scale: 1, offset: 10}\n"
                 "  - Concatenate: {axis: %s, inputs: [input, r]}\n", cases[c].axis);
        tfc_model *m = tfc_test_model(yaml);
        tfc_error err;
        tfc_error_clear(&err);
        TFC_ASSERT(m && tfc_model_bind_inference(m, be, 1, &err) == TFC_OK);
        const tfc_shape *s = &tfc_model_layer(m, 1)->out_shape;
        CU_ASSERT(s->ndim == 3 && s->dim[0] == cases[c].shape[0] &&
                  s->dim[1] == cases[c].shape[1] && s->dim[2] == cases[c].shape[2]);
        const float x[4] = {1, 2, 3, 4};
        float y[8];
        TFC_ASSERT(tfc_model_forward(m, x, 1, 0, 1, 0, &err) == TFC_OK);
        tfc_model_get_output(m, y);
        for (int i = 0; i < 8; i++) CU_ASSERT_DOUBLE_EQUAL(y[i], cases[c].want[i], 0);
        tfc_model_free(m);
    }
    tfc_backend_free(be);
}

/* ---- errors and refusals ----------------------------------------------------------------- */

static void expect_error(const char *yaml, int line, const char *what)
{
    const tfc_error err = tfc_test_model_error(yaml);
    if (!strstr(err.msg, what) || err.line != line)
        fprintf(stderr, "\n%s-> %s:%d:%d: %s\n", yaml, err.file, err.line, err.col, err.msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, what));
    CU_ASSERT_STRING_EQUAL(err.file, "t.yaml"); /* positioned: FILE:LINE:COL */
    CU_ASSERT_EQUAL(err.line, line);
    CU_ASSERT(err.col > 0);
}

static void test_argument_errors(void)
{
    expect_error("input: {shape: [4]}\nlayers:\n  - Dense: {name: a, units: 3}\n"
                 "  - Maximum: {inputs: [a, input]}\n", 4, "inputs must have equal shapes");
    expect_error("input: {shape: [4]}\nlayers:\n  - Dense: {name: a, units: 4}\n"
                 "  - Minimum: {inputs: [a]}\n", 4, "takes 2 to 8 inputs");
    expect_error("input: {shape: [4]}\nlayers:\n  - Dense: {name: a, units: 4}\n"
                 "  - Maximum: {inputs: [a, input], axis: 1}\n", 4, "unknown key 'axis'");
    /* Dot */
    const char *dot = "input: {shape: [5, 3]}\nlayers:\n  - Dense: {name: a, units: 4}\n";
    const struct {
        const char *layer, *what;
    } bad[] = {
        {"  - Dot: {inputs: [a, input]}\n", "axes"},
        {"  - Dot: {axes: 3, inputs: [a, input]}\n", "axis 3 is out of range for input 0"},
        {"  - Dot: {axes: [1, -4], inputs: [a, input]}\n", "axis -4 is out of range for input 1"},
        {"  - Dot: {axes: 0, inputs: [a, input]}\n", "axis 0 of input 0 is the batch axis"},
        {"  - Dot: {axes: [1, -3], inputs: [a, input]}\n", "axis -3 of input 1 is the batch"},
        {"  - Dot: {axes: 2, inputs: [a, input]}\n", "has 4 along axis 2 but input 1 (5, 3)"},
        {"  - Dot: {axes: [1, 2, 1], inputs: [a, input]}\n", "an integer or a pair"},
        {"  - Dot: {axes: 1, inputs: [a]}\n", "takes 2 inputs"},
        {"  - Dot: {axes: 1, normalize: 2, inputs: [a, input]}\n", "true or false"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "%s%s", dot, bad[i].layer);
        expect_error(yaml, 4, bad[i].what);
    }
    /* Concatenate: Keras's axes of a (5, 4) example are 1, 2 (or -2, -1); 0 is the batch */
    expect_error("input: {shape: [5, 3]}\nlayers:\n  - Dense: {name: a, units: 4}\n"
                 "  - Concatenate: {inputs: [a, a], axis: 0}\n", 4,
                 "axis 0 is the batch axis, which cannot be joined");
    expect_error("input: {shape: [5, 3]}\nlayers:\n  - Dense: {name: a, units: 4}\n"
                 "  - Concatenate: {inputs: [a, a], axis: 3}\n", 4,
                 "axis 3 is outside the inputs' axes: the batch axis 0 and an example's 1 to 2");
    expect_error("input: {shape: [5, 3]}\nlayers:\n  - Dense: {name: a, units: 4}\n"
                 "  - Concatenate: {inputs: [a, a], axis: -3}\n", 4, "axis -3 is outside");
}

static void drop_extremum(tfc_backend_ops *ops)
{
    ops->extremum_forward = NULL, ops->extremum_backward = NULL;
}

/* A backend without the kernels (the GPU's today) refuses the model at bind, naming the layer
 * and the op. */
static void test_missing_kernel_refused(void)
{
    const char *types[] = {"Maximum", "Minimum"};
    for (int t = 0; t < 2; t++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [4]}\nlayers:\n  - Dense: {name: a, units: 4}\n"
                 "  - %s: {name: mm, inputs: [a, input]}\n", types[t]);
        tfc_test_expect_refused(yaml, drop_extremum, "layer 'mm'", "(op 'extremum_forward')");
    }
}

static void drop_permute(tfc_backend_ops *ops) { ops->permute = NULL; }
static void drop_l2norm(tfc_backend_ops *ops) { ops->l2norm_forward = NULL; }

/* Dot needs permute for a middle axis, l2norm for normalize, neither otherwise */
static void test_dot_refused(void)
{
    const char *img = "input: {shape: [3, 4, 2]}\nlayers:\n  - Dense: {name: a, units: 2}\n";
    char yaml[256];
    snprintf(yaml, sizeof yaml, "%s  - Dot: {name: dd, axes: 2, inputs: [a, input]}\n", img);
    tfc_test_expect_refused(yaml, drop_permute, "layer 'dd'", "(op 'permute')");
    snprintf(yaml, sizeof yaml, "%s  - Dot: {name: dn, axes: 3, normalize: true, "
             "inputs: [a, input]}\n", img);
    tfc_test_expect_refused(yaml, drop_l2norm, "layer 'dn'", "(op 'l2norm_forward')");
}

/* ONNX export refuses masked inputs (Keras's padding-step values have no Max/Min form),
 * naming the layer; the unmasked layers export (checked with onnxruntime in test_onnx). */
static void test_onnx_masked_refused(void)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *m = tfc_test_model("input: {shape: [5], dtype: int32}\nlayers:\n"
                                  "  - Embedding: {name: e, input_dim: 9, output_dim: 4, "
                                  "mask_zero: true}\n  - Dense: {name: a, units: 4}\n"
                                  "  - Minimum: {name: mn, inputs: [a, e]}\n"
                                  "  - GlobalAveragePooling1D: {}\n");
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(m && tfc_model_bind_inference(m, be, 2, &err) == TFC_OK);
    const char *path = tfc_test_path("merge.onnx");
    remove(path);
    tfc_onnx_options o = {.opset = 17};
    CU_ASSERT_EQUAL(tfc_onnx_export(m, &o, path, &err), TFC_ERR_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'mn' (Minimum)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "masked inputs"));
    FILE *f = fopen(path, "rb");
    CU_ASSERT_PTR_NULL(f);
    if (f) fclose(f);
    tfc_model_free(m);
    tfc_backend_free(be);
}

TFC_TEST_MAIN("merge", {"op_values", test_op_values}, {"keras_parity", test_keras_parity},
              {"argument_errors", test_argument_errors},
              {"missing_kernel_refused", test_missing_kernel_refused},
              {"onnx_masked_refused", test_onnx_masked_refused},
              {"dot_keras_parity", test_dot_keras_parity}, {"dot_values", test_dot_values},
              {"dot_refused", test_dot_refused}, {"concat_axes", test_concat_axes})
