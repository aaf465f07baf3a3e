/* EinsumDense (src/layers/einsum_dense.c, its equation in einsum_spec.c): Keras 3 parity from
 * the fixtures tests/ref/keras_einsum_dense.py wrote (tests/ref/einsum_dense/: Dense, a
 * projection of each step, MultiHeadAttention's query and output projections, a bias that
 * broadcasts, '...' in front and at the end, a shared letter, a kernel read transposed and
 * one permuted, letters of the input alone summed away: outputs, input and weight gradients,
 * the weights tfc writes); the plans of
 * the equations by hand; the kernel's initializer drawn with Keras's fans; the equation's,
 * output_shape's and bias_axes' errors at their FILE:LINE:COL; the refusal of a backend
 * without permute. Run from the repository's root. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "gradcheck.h"
#include "graph/model.h"
#include "kerasref.h"
#include "layers/einsum_spec.h"
#include "layers/layer.h"
#include "testutil.h"

static void test_keras_parity(void)
{
    static const tfc_keras_parity p = {.dir = "einsum_dense", .tol = 1e-5, .all_grads = 1};
    static const char *const names[] = {"dense", "sequence", "mha", "bias_d", "ellipsis",
                                        "shared", "summed", "summed_shared", NULL};
    tfc_test_keras_cases(&p, names);
}

/* The plan of eq on an input of `dims` (per example) with output_shape partial. */
static tfc_einsum_plan plan_of(const char *eq, int rank, const int64_t *dims,
                               const int64_t *partial, int np, const char *bias)
{
    tfc_einsum_spec s;
    tfc_einsum_error e;
    tfc_einsum_plan p;
    memset(&p, 0, sizeof p);
    CU_ASSERT_EQUAL_FATAL(tfc_einsum_parse(eq, &s, &e), 0);
    const int rc = tfc_einsum_plan_make(&s, rank, dims, partial, np, bias, &p, &e);
    if (rc) fprintf(stderr, "\n%s: %s\n", eq, e.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    return p;
}

/* Keras's shapes and fans, the GEMM's sizes and which operands move, by hand */
static void test_plans(void)
{
    /* Dense: nothing moves */
    tfc_einsum_plan p = plan_of("ab,bc->ac", 1, (int64_t[]){5}, (int64_t[]){4}, 1, "c");
    CU_ASSERT(p.rank_ker == 2 && p.ker_dim[0] == 5 && p.ker_dim[1] == 4);
    CU_ASSERT(p.rank_bias == 1 && p.bias_dim[0] == 4 && !p.bias_expand);
    CU_ASSERT(p.k == 5 && p.n == 4 && p.shared == 1 && p.rows_per == 1);
    CU_ASSERT(!p.x_permuted && !p.y_permuted && !p.k_permuted && !p.k_trans);
    /* the query projection: fans in 8 (c), out 6 (d e), as Keras's input/output_axes */
    p = plan_of("abc,cde->abde", 2, (int64_t[]){7, 8}, (int64_t[]){-1, 2, 3}, 3, "d");
    CU_ASSERT(p.fan_in == 8 && p.fan_out == 6);
    CU_ASSERT(p.rank_out == 3 && p.out_dim[0] == 7 && p.out_dim[1] == 2 && p.out_dim[2] == 3);
    CU_ASSERT(p.rank_bias == 2 && p.bias_dim[0] == 2 && p.bias_dim[1] == 1);
    CU_ASSERT(p.bias_expand && p.bias_block == 6 && p.bias_q == 3 && p.bias_p == 2);
    CU_ASSERT(p.rows_per == 7 && p.k == 8 && p.n == 6);
    /* the kernel (d, c): read transposed */
    p = plan_of("abc,dc->abd", 2, (int64_t[]){4, 5}, (int64_t[]){4, 6}, 2, NULL);
    CU_ASSERT(p.k_trans && !p.k_permuted && p.rank_bias == 0);
    /* a shared b: x stays, the kernel (c, d, b) and the output (a, d, b) move */
    p = plan_of("abc,cdb->adb", 2, (int64_t[]){4, 6}, (int64_t[]){2, 4}, 2, "b");
    CU_ASSERT(p.shared == 4 && p.k == 6 && p.n == 2 && p.rows_per == 1);
    CU_ASSERT(!p.x_permuted && p.k_permuted && p.y_permuted);
    CU_ASSERT(p.rank_bias == 1 && p.bias_dim[0] == 4 && !p.bias_expand);
    /* '...' in front: the steps are rows; at the end: x and y move, the bias is (5, 1) */
    p = plan_of("...b,bc->...c", 3, (int64_t[]){2, 3, 4}, (int64_t[]){3}, 1, "c");
    CU_ASSERT(p.rows_per == 6 && p.rank_out == 3 && p.out_dim[2] == 3 && !p.x_permuted);
    p = plan_of("ab...,bc->ac...", 2, (int64_t[]){3, 4}, (int64_t[]){5}, 1, "c");
    CU_ASSERT(p.x_permuted && p.y_permuted && p.out_dim[0] == 5 && p.out_dim[1] == 4);
    CU_ASSERT(p.rank_bias == 2 && p.bias_dim[0] == 5 && p.bias_dim[1] == 1 && p.bias_expand);
    /* a letter of the input alone (b) summed with the contracted; with a shared one (b), a
     * summed (c) and a kernel (d, b) that moves */
    p = plan_of("abc,cd->ad", 2, (int64_t[]){4, 5}, (int64_t[]){3}, 1, "d");
    CU_ASSERT(p.reduce == 4 && p.k == 5 && p.n == 3 && p.rows_per == 1 && p.x_permuted);
    CU_ASSERT(p.fan_in == 5 && p.fan_out == 3 && p.rank_ker == 2);
    p = plan_of("abcd,db->ab", 3, (int64_t[]){3, 4, 5}, (int64_t[]){3}, 1, "b");
    CU_ASSERT(p.reduce == 4 && p.k == 5 && p.shared == 3 && p.n == 1 && p.x_permuted);
    CU_ASSERT(p.k_permuted && !p.y_permuted);
    /* a leading '...' of no axis: the first letter is the batch */
    p = plan_of("...ab,bc->...ac", 1, (int64_t[]){5}, (int64_t[]){4}, 1, NULL);
    CU_ASSERT(p.rank_out == 1 && p.out_dim[0] == 4);
}

/* The parser's and the planner's messages and where they point */
static void test_spec_errors(void)
{
    const struct {
        const char *eq, *what;
        int at;
    } bad[] = {
        {"", "is empty", 0},
        {"ab,bc", "has no '->'", 5},
        {"ab,bc->ac->ac", "'->' twice", 9},
        {"ab->ab", "1 operand before '->'", 0},
        {"ab,bc,cd->ad", "3 operands", 2},
        {"ab,bc->a,c", "a ',' in the output", 8},
        {"ab,bb->ab", "'b' appears twice in the kernel", 4},
        {"aab,bc->ac", "'a' appears twice in the input", 1},
        {"ab,bc->acc", "'c' appears twice in the output", 9},
        {"ab,bc->acz", "the output's 'z' is in neither", 9},
        {"ab,bcq->ac", "the kernel's 'q' is in neither", 5},
        {"ab,ac->bc", "the input's first letter 'a' is the batch", 0},
        {"ab,bc->ca", "must start with the batch letter 'a'", 7},
        {"a b,bc->ac", "' ' in the input", 1},
        {"ab,b1->a1", "'1' in the kernel", 4},
        {"..b,bc->..c", "not part of '...'", 0},
        {"...b,...bc->...c", "the kernel cannot have '...'", 5},
        {"...b,bc->c", "'...' must start both", 0},
        {"ab...,bc->...ac", "'...' must end both", 0},
        {"a...b,bc->a...c", "'...' in the middle of the input", 1},
        {"a...,ac->...", "the output has no letters", 9},
        {"b...,bc->c...", "two letters at least", 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tfc_einsum_spec s;
        tfc_einsum_error e;
        const int rc = tfc_einsum_parse(bad[i].eq, &s, &e);
        CU_ASSERT_EQUAL(rc, -1);
        if (rc != -1 || !strstr(e.msg, bad[i].what) || e.at != bad[i].at)
            fprintf(stderr, "\n%s -> at %d: %s\n", bad[i].eq, e.at, e.msg);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, bad[i].what));
        CU_ASSERT_EQUAL(e.at, bad[i].at);
    }
    /* planned against shapes */
    const struct {
        const char *eq, *bias, *what;
        int rank, np;
        int64_t dims[3], partial[3];
        tfc_einsum_arg arg;
        int at;
    } plan_bad[] = {
        {"abc,cd->abd", NULL, "has 3 axes but the input has 2", 1, 2, {4}, {-1, 3},
         TFC_EINSUM_INPUT, -1},
        {"abc,cd->abd", NULL, "has 1 size but the output 'abd' needs 2", 2, 1, {4, 5}, {3},
         TFC_EINSUM_OUTPUT_SHAPE, -1},
        {"abc,cd->abd", NULL, "output_shape[0] is 7 but 'b' is the input's axis of 4", 2, 2,
         {4, 5}, {7, 3}, TFC_EINSUM_OUTPUT_SHAPE, 0},
        {"abc,cd->abd", NULL, "output_shape[1] is null but the kernel's 'd'", 2, 2, {4, 5},
         {-1, -1}, TFC_EINSUM_OUTPUT_SHAPE, 1},
        {"abc,cd->abd", "e", "'e' is not a letter of the output", 2, 2, {4, 5}, {-1, 3},
         TFC_EINSUM_BIAS_AXES, 0},
        {"abc,cd->abd", "da", "'a' is the batch axis", 2, 2, {4, 5}, {-1, 3},
         TFC_EINSUM_BIAS_AXES, 1},
        {"abc,cd->abd", "", "is empty", 2, 2, {4, 5}, {-1, 3}, TFC_EINSUM_BIAS_AXES, 0},
        {"...abc,cd->...abd", NULL, "'...abc' has 3 letters but the input has 2", 1, 2, {4},
         {-1, 3}, TFC_EINSUM_INPUT, -1},
        {"...ab,abd->...ad", NULL, "the batch axis here", 1, 1, {4}, {3}, TFC_EINSUM_EQUATION,
         3},
        {"...b,bc->...c", NULL, "needs 1: one for each letter (the '...' is the input's)", 2, 2,
         {4, 5}, {-1, 3}, TFC_EINSUM_OUTPUT_SHAPE, -1},
    };
    for (size_t i = 0; i < sizeof plan_bad / sizeof *plan_bad; i++) {
        tfc_einsum_spec s;
        tfc_einsum_error e;
        tfc_einsum_plan p;
        CU_ASSERT_EQUAL_FATAL(tfc_einsum_parse(plan_bad[i].eq, &s, &e), 0);
        const int rc = tfc_einsum_plan_make(&s, plan_bad[i].rank, plan_bad[i].dims,
                                            plan_bad[i].partial, plan_bad[i].np,
                                            plan_bad[i].bias, &p, &e);
        CU_ASSERT_EQUAL(rc, -1);
        if (rc != -1 || !strstr(e.msg, plan_bad[i].what) || e.at != plan_bad[i].at)
            fprintf(stderr, "\n%s -> at %d: %s\n", plan_bad[i].eq, e.at, e.msg);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, plan_bad[i].what));
        CU_ASSERT_EQUAL(e.arg, plan_bad[i].arg);
        CU_ASSERT_EQUAL(e.at, plan_bad[i].at);
    }
}

static void expect_error(const char *yaml, int line, int col, const char *what)
{
    const tfc_error err = tfc_test_model_error(yaml);
    if (!strstr(err.text, what) || err.line != line || err.col != col)
        fprintf(stderr, "\n%s-> %s", yaml, err.text);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, what)); /* the key path and the message */
    CU_ASSERT_STRING_EQUAL(err.file, "t.yaml"); /* positioned: FILE:LINE:COL */
    CU_ASSERT_EQUAL(err.line, line);
    CU_ASSERT_EQUAL(err.col, col);
}

/* Errors through a model's YAML: at the equation's offending character, output_shape's item,
 * bias_axes' character, or the argument */
static void test_argument_errors(void)
{
    const char *head = "input: {shape: [4, 5]}\nlayers:\n";
    const struct {
        const char *layer, *what;
        int col;
    } bad[] = {
        /* col 30: the equation's first character (after its quote) */
        {"  - EinsumDense: {equation: \"abc,cdd->abd\", output_shape: [null, 3]}\n",
         "equation \"abc,cdd->abd\": 'd' appears twice in the kernel", 36},
        {"  - EinsumDense: {equation: 'abc,cd->abe', output_shape: [null, 3]}\n",
         "the output's 'e' is in neither", 40},
        {"  - EinsumDense: {equation: \"abc,cd->abd\", output_shape: [5, 3]}\n",
         "output_shape[0] is 5 but 'b' is the input's axis of 4", 59},
        {"  - EinsumDense: {equation: \"abc,cd->abd\", output_shape: [null, 3, 2]}\n",
         "output_shape: has 3 sizes", 58},
        {"  - EinsumDense: {equation: \"abc,cd->abd\", output_shape: [null, 3], "
         "bias_axes: ''}\n", "bias_axes: expected a string", 80},
        {"  - EinsumDense: {equation: \"abc,cd->abd\", output_shape: [null, 3], "
         "bias_axes: dx}\n", "bias_axes: 'x' is not a letter of the output 'abd'", 81},
        {"  - EinsumDense: {equation: \"abcd,de->abce\", output_shape: [null, 3]}\n",
         "has 4 axes but the input has 3 (with the batch axis); the input is (4, 5)", 29},
        {"  - EinsumDense: {equation: \"abc,cd->abd\", output_shape: [null, 0]}\n",
         "EinsumDense.output_shape: expected an integer in [1", 65},
        {"  - EinsumDense: {equation: \"abc,cd->abd\"}\n",
         "missing required key 'output_shape'", 18},
        {"  - EinsumDense: {equation: \"abc,cd->abd\", output_shape: 3, lora_rank: 4}\n",
         "EinsumDense.lora_rank: not supported", 72},
        {"  - EinsumDense: {equation: \"abc,cd->abd\", output_shape: 3, "
         "quantization_config: {}}\n", "EinsumDense.quantization_config: not supported", 82},
        {"  - EinsumDense: {equation: \"abc,cd->abd\", output_shape: 3, "
         "gptq_unpacked_column_size: 4}\n", "EinsumDense.gptq_unpacked_column_size: not", 88},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char yaml[320];
        snprintf(yaml, sizeof yaml, "%s%s", head, bad[i].layer);
        expect_error(yaml, 3, bad[i].col, bad[i].what);
    }
}

/* The kernel of "abc,cde->abde" (64, 8, 16) drawn with Keras's fans (in 64, out 128: limit
 * sqrt(6 / 192)), not those of its shape's (in 512, out 1024) */
static void test_kernel_fans(void)
{
    tfc_model *m = tfc_test_model("input: {shape: [3, 64]}\nlayers:\n"
                                  "  - EinsumDense: {equation: \"abc,cde->abde\", "
                                  "output_shape: [null, 8, 16]}\n");
    TFC_ASSERT(m);
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(tfc_model_bind(m, be, 2, &err) == TFC_OK);
    TFC_ASSERT(tfc_model_init_weights(m, 5, &err) == TFC_OK);
    const tfc_param *k = &tfc_model_layer(m, 0)->params[0];
    CU_ASSERT_EQUAL(k->numel, 64 * 8 * 16);
    float *w = malloc(sizeof(float) * (size_t)k->numel);
    tfc_model_param_download(m, k, w);
    double peak = 0;
    for (int64_t i = 0; i < k->numel; i++) peak = fmax(peak, fabs(w[i]));
    const double limit = sqrt(6.0 / 192);
    CU_ASSERT(peak <= limit && peak > 0.95 * limit);
    free(w);
    tfc_model_free(m);
    tfc_backend_free(be);
}

static void drop_permute(tfc_backend_ops *ops) { ops->permute = NULL; }

/* permute is needed where an operand moves or the bias broadcasts, not for a Dense */
static void test_refused(void)
{
    tfc_test_expect_refused("input: {shape: [4, 5]}\nlayers:\n"
                            "  - EinsumDense: {name: ed, equation: \"abc,cd->adb\", "
                            "output_shape: [3, null]}\n", drop_permute, "layer 'ed'",
                            "(op 'permute')");
    tfc_test_expect_refused("input: {shape: [4, 5]}\nlayers:\n"
                            "  - EinsumDense: {name: eb, equation: \"abc,cd->abd\", "
                            "output_shape: [4, 3], bias_axes: b}\n", drop_permute,
                            "layer 'eb'", "(op 'permute')");
    tfc_model *m = tfc_test_model("input: {shape: [5]}\nlayers:\n"
                                  "  - EinsumDense: {equation: \"ab,bc->ac\", output_shape: 3, "
                                  "bias_axes: c}\n");
    TFC_ASSERT(m);
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_backend_ops ops = *be->ops;
    drop_permute(&ops);
    const tfc_backend_ops *own = be->ops;
    be->ops = &ops;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
    be->ops = own;
    tfc_model_free(m);
    tfc_backend_free(be);
}

TFC_TEST_MAIN("einsum_dense", {"keras_parity", test_keras_parity}, {"plans", test_plans},
              {"spec_errors", test_spec_errors}, {"argument_errors", test_argument_errors},
              {"kernel_fans", test_kernel_fans}, {"refused", test_refused})
