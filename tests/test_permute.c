/* Permute and UnitNormalization: the CPU's permute and l2norm ops against loops written here
 * (every merge and tile path of permute, added or assigned, on one thread and on a team;
 * l2norm in double with the clamp of Keras's epsilon, forward and backward), Keras 3 parity
 * from the fixtures tests/ref/keras_permute.py wrote (tests/ref/permute/: outputs and the
 * input's and weights' gradients), masks, argument errors, and the refusal of a backend
 * without the kernels. Run from the repository's root. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "graph/model.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "layers/layer.h"
#include "testutil.h"

static float frand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

/* ---- permute against an index loop ------------------------------------------------------- */

/* y = (or +=) x permuted, one float at a time from the output's multi-index */
static void permute_ref(const tfc_permute_desc *d, const float *x, float *y, int add)
{
    int64_t st[TFC_PERMUTE_AXES + 1], numel = 1;
    st[d->ndim] = 1;
    for (int i = d->ndim - 1; i >= 0; i--) st[i] = st[i + 1] * d->dim[i];
    numel = st[0];
    for (int64_t b = 0; b < d->n; b++)
        for (int64_t o = 0; o < numel; o++) {
            int64_t u = o, at = 0;
            for (int i = d->ndim - 1; i >= 0; i--) {
                const int64_t od = d->dim[d->perm[i]];
                at += u % od * st[d->perm[i] + 1];
                u /= od;
            }
            float *yo = y + b * numel + o;
            *yo = add ? *yo + x[b * numel + at] : x[b * numel + at];
        }
}

/* One shape and permutation on both thread counts, assigned and added, and back through the
 * inverse: the same bits as the loop (a copy: exact). Returns the mismatches. */
static int permute_case(int64_t n, int ndim, const int64_t *dim, const int *perm)
{
    tfc_permute_desc d = {.n = n, .ndim = ndim}, inv = {.n = n, .ndim = ndim};
    int64_t numel = n;
    for (int i = 0; i < ndim; i++) {
        d.dim[i] = dim[i], d.perm[i] = perm[i], numel *= dim[i];
        inv.perm[perm[i]] = i;
        inv.dim[i] = dim[perm[i]];
    }
    float *x = malloc((size_t)numel * 4), *y0 = malloc((size_t)numel * 4);
    float *y = malloc((size_t)numel * 4), *back = malloc((size_t)numel * 4);
    uint64_t seed = 7;
    for (int64_t i = 0; i < numel; i++) x[i] = frand(&seed), y0[i] = frand(&seed);
    int bad = 0;
    for (int threads = 1; threads <= 2; threads++) {
        tfc_backend *be = tfc_cpu_backend_create(threads);
        for (int add = 0; add < 2; add++) {
            float *want = malloc((size_t)numel * 4);
            memcpy(want, y0, (size_t)numel * 4);
            memcpy(y, y0, (size_t)numel * 4);
            permute_ref(&d, x, want, add);
            be->ops->permute(be, &d, x, y, add);
            bad += memcmp(y, want, (size_t)numel * 4) != 0;
            free(want);
        }
        be->ops->permute(be, &d, x, y, 0);
        be->ops->permute(be, &inv, y, back, 0); /* the inverse undoes it */
        bad += memcmp(back, x, (size_t)numel * 4) != 0;
        tfc_backend_free(be);
    }
    if (bad) fprintf(stderr, "\npermute case (n %lld, %d axes): %d mismatches\n", (long long)n,
                     ndim, bad);
    free(x), free(y0), free(y), free(back);
    return bad;
}

static void test_permute_op(void)
{
    /* a swap (tiles), a rotation keeping the last axis (runs), an identity (one run), axes of
     * size 1, sizes off the tile, a reversal of four axes, and one large enough for a team */
    CU_ASSERT_EQUAL(permute_case(3, 2, (int64_t[]){5, 4}, (int[]){1, 0}), 0);
    CU_ASSERT_EQUAL(permute_case(2, 3, (int64_t[]){3, 4, 5}, (int[]){1, 0, 2}), 0);
    CU_ASSERT_EQUAL(permute_case(2, 3, (int64_t[]){3, 4, 5}, (int[]){2, 0, 1}), 0);
    CU_ASSERT_EQUAL(permute_case(2, 3, (int64_t[]){3, 4, 5}, (int[]){0, 1, 2}), 0);
    CU_ASSERT_EQUAL(permute_case(3, 4, (int64_t[]){1, 7, 1, 3}, (int[]){3, 1, 0, 2}), 0);
    CU_ASSERT_EQUAL(permute_case(2, 2, (int64_t[]){70, 45}, (int[]){1, 0}), 0);
    CU_ASSERT_EQUAL(permute_case(2, 4, (int64_t[]){2, 3, 4, 5}, (int[]){3, 2, 1, 0}), 0);
    CU_ASSERT_EQUAL(permute_case(1, 3, (int64_t[]){1, 1, 1}, (int[]){2, 1, 0}), 0);
    CU_ASSERT_EQUAL(permute_case(8, 3, (int64_t[]){64, 32, 16}, (int[]){2, 1, 0}), 0);
    CU_ASSERT_EQUAL(permute_case(8, 3, (int64_t[]){64, 32, 16}, (int[]){1, 0, 2}), 0);
    CU_ASSERT_EQUAL(permute_case(2, 2, (int64_t[]){3, 9000}, (int[]){0, 1}), 0); /* long runs */
    /* short runs in blocks: 3000 runs of 2 along one axis make two blocks */
    CU_ASSERT_EQUAL(permute_case(2, 3, (int64_t[]){3000, 2, 2}, (int[]){1, 0, 2}), 0);
}

/* ---- l2norm against loops in double ------------------------------------------------------ */

/* The contract in double for [outer, red, inner]: the scale min(rsqrt(s), inv_max) as the op
 * rounds it, then y, and dx (added to dx0) */
static void l2_ref(const tfc_l2norm_desc *d, const float *x, const float *dy, double *y,
                   double *dx)
{
    for (int64_t o = 0; o < d->outer; o++)
        for (int64_t i = 0; i < d->inner; i++) {
            const int64_t at = o * d->red * d->inner + i;
            double s = 0, g = 0;
            for (int64_t j = 0; j < d->red; j++) {
                const double v = x[at + j * d->inner];
                s += v * v, g += v * dy[at + j * d->inner];
            }
            const double rs = 1.0 / sqrt(s);
            const int clamped = (float)rs >= d->inv_max;
            const double r = clamped ? d->inv_max : rs;
            for (int64_t j = 0; j < d->red; j++) {
                const int64_t k = at + j * d->inner;
                y[k] = x[k] * r;
                dx[k] = clamped ? d->inv_max * dy[k] : r * (dy[k] - x[k] * r * r * g);
            }
        }
}

static int l2_case(int64_t outer, int64_t red, int64_t inner, int zero_slices)
{
    tfc_l2norm_desc d = {.outer = outer, .red = red, .inner = inner, .inv_max = 1e12f};
    const int64_t n = outer * red * inner;
    float *x = malloc((size_t)n * 4), *dy = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
    float *dx = malloc((size_t)n * 4), *dx0 = malloc((size_t)n * 4);
    double *wy = malloc((size_t)n * 8), *wdx = malloc((size_t)n * 8);
    uint64_t seed = 11;
    for (int64_t i = 0; i < n; i++) x[i] = frand(&seed), dy[i] = frand(&seed);
    for (int64_t i = 0; i < n; i++) dx0[i] = frand(&seed);
    if (zero_slices) /* slice (0, 0) all zeros, slice (outer - 1, inner - 1) of norm 5e-13 */
        for (int64_t j = 0; j < red; j++) {
            x[j * inner] = 0.0f;
            x[(outer - 1) * red * inner + j * inner + inner - 1] = j ? 0.0f : 5e-13f;
        }
    l2_ref(&d, x, dy, wy, wdx);
    int bad = 0;
    for (int threads = 1; threads <= 2; threads++) {
        tfc_backend *be = tfc_cpu_backend_create(threads);
        be->ops->l2norm_forward(be, &d, x, y);
        for (int64_t i = 0; i < n; i++) bad += fabs(y[i] - wy[i]) > 2e-7 * (1 + fabs(wy[i]));
        for (int assign = 0; assign < 2; assign++) {
            memcpy(dx, dx0, (size_t)n * 4);
            be->ops->l2norm_backward(be, &d, x, dy, dx, assign);
            for (int64_t i = 0; i < n; i++) {
                const double want = wdx[i] + (assign ? 0 : dx0[i]);
                bad += fabs(dx[i] - want) > 1e-6 * (1 + fabs(want));
            }
        }
        tfc_backend_free(be);
    }
    if (bad) fprintf(stderr, "\nl2norm case [%lld, %lld, %lld]: %d mismatches\n",
                     (long long)outer, (long long)red, (long long)inner, bad);
    free(x), free(dy), free(y), free(dx), free(dx0), free(wy), free(wdx);
    return bad;
}

static void test_l2norm_op(void)
{
    CU_ASSERT_EQUAL(l2_case(5, 7, 1, 0), 0);       /* rows */
    CU_ASSERT_EQUAL(l2_case(4, 6, 9, 0), 0);       /* a middle axis */
    CU_ASSERT_EQUAL(l2_case(3, 5, 300, 0), 0);     /* inner past one block */
    CU_ASSERT_EQUAL(l2_case(3, 4, 1, 1), 0);       /* Keras's clamp, rows */
    CU_ASSERT_EQUAL(l2_case(3, 4, 5, 1), 0);       /* and columns */
    CU_ASSERT_EQUAL(l2_case(64, 300, 4, 0), 0);    /* a team */
}

/* ---- Keras parity ------------------------------------------------------------------------ */

/* Each fixture through tests/util/kerasref's harness, every case trained: Keras's weights
 * loaded by name (all there, and written back the same under the same names), the inference
 * output and, after a training forward, the MSE loss's gradients of the input (float inputs:
 * the fixture must have them) and of every weight, within 1e-5 of the largest value. Permute
 * on sequences between Dense layers, first (the input's gradient), four axes and an identity,
 * and after an Embedding's mask (which it drops, as Keras); UnitNormalization on the last
 * axis, a middle one, trailing and leading blocks, under a mask (which it keeps) and at
 * Keras's epsilon clamp (unit_zero: Keras's input gradient of the all-zero slice is NaN under
 * JAX, passed over; tfc's, the clamp's 1e12 dy, must be finite) */
static void test_keras_parity(void)
{
    static const tfc_keras_parity p = {.dir = "permute", .tol = 1e-5, .all_grads = 1};
    static const char *const names[] = {"permute_seq", "permute_3d", "permute_4d",
                                        "permute_mask", "unit_last", "unit_axes",
                                        "unit_mask", "unit_zero", NULL};
    tfc_test_keras_cases(&p, names);
}

/* ---- the layers in a model --------------------------------------------------------------- */

/* The build error of one layer on a [3, 4] input (or `shape`): its message, and the text's
 * position line t.yaml:4:COL. */
static void expect_error(const char *shape, const char *layer, const char *what)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "input: {shape: %s}\nlayers:\n  - Dense: {units: 4}\n  - %s\n",
             shape ? shape : "[3, 4]", layer);
    const tfc_error err = tfc_test_model_error(yaml);
    if (!strstr(err.msg, what) || !strstr(err.text, "t.yaml:4:"))
        fprintf(stderr, "\n%s: %s", layer, err.text);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, what));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "t.yaml:4:"));
}

static void test_argument_errors(void)
{
    expect_error(NULL, "Permute: {dims: [1, 1]}", "dims [1, 1] is not a permutation of 1 .. 2");
    expect_error(NULL, "Permute: {dims: [0, 1]}", "dims [0, 1] is not a permutation");
    expect_error(NULL, "Permute: {dims: [2, 3]}", "dims [2, 3] is not a permutation");
    expect_error(NULL, "Permute: {dims: []}", "is not a permutation");
    expect_error(NULL, "Permute: {dims: [3, 1, 2]}", "dims has 3 axes but the input (3, 4)");
    expect_error(NULL, "Permute: {}", "dims");
    expect_error(NULL, "Permute: {dims: [2, 1], axes: 1}", "unknown key 'axes'");
    expect_error(NULL, "UnitNormalization: {axis: 0}", "axis 0 is the batch axis");
    expect_error(NULL, "UnitNormalization: {axis: 3}", "axis 3 is out of range");
    expect_error(NULL, "UnitNormalization: {axis: -4}", "axis -4 is out of range");
    expect_error(NULL, "UnitNormalization: {axis: [2, -1]}", "axis -1 is listed twice");
    expect_error(NULL, "UnitNormalization: {axis: []}", "axis: give at least one axis");
    expect_error("[2, 3, 4]", "UnitNormalization: {axis: [1, 3]}",
                 "the axes must be consecutive");
    expect_error(NULL, "UnitNormalization: {epsilon: 0.1}", "unknown key 'epsilon'");
    static const char *const firsts[] = {"Permute: {dims: [1]}", "UnitNormalization: {}"};
    for (int i = 0; i < 2; i++) { /* token ids are no values to move or normalise */
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [5], dtype: int32}\nlayers:\n  - %s\n",
                 firsts[i]);
        const tfc_error err = tfc_test_model_error(yaml);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "takes float32 input, not token ids"));
    }
}

/* Permute drops an Embedding's mask (Keras's layer does not support masking: it warns and
 * drops it); UnitNormalization passes it on (supports_masking). Both have no weights. */
static void test_masks(void)
{
    tfc_model *m = tfc_test_model("input: {shape: [5], dtype: int32}\nlayers:\n"
                                  "  - Embedding: {input_dim: 9, output_dim: 4, "
                                  "mask_zero: true}\n  - UnitNormalization: {}\n"
                                  "  - Permute: {dims: [2, 1]}\n");
    TFC_ASSERT(m != NULL);
    const tfc_layer *u = tfc_model_layer(m, 1), *p = tfc_model_layer(m, 2);
    CU_ASSERT(u->mask_in && u->mask_out);
    CU_ASSERT(p->mask_in && !p->mask_out);
    CU_ASSERT(u->nparams == 0 && p->nparams == 0);
    CU_ASSERT(p->out_shape.ndim == 2 && p->out_shape.dim[0] == 4 && p->out_shape.dim[1] == 5);
    tfc_model_free(m);
}

static void drop_permute_l2norm(tfc_backend_ops *ops)
{
    ops->permute = NULL, ops->l2norm_forward = NULL, ops->l2norm_backward = NULL;
}

/* A backend without the kernels (the CPU's table with the slots emptied) refuses each
 * layer at bind, naming it and the op. */
static void test_missing_kernel_refused(void)
{
    static const char *const layers[] = {"Permute: {name: ly, dims: [2, 1]}",
                                         "UnitNormalization: {name: ly}"};
    static const char *const ops[] = {"(op 'permute')", "(op 'l2norm_forward')"};
    for (int i = 0; i < 2; i++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [3, 4]}\nlayers:\n  - %s\n", layers[i]);
        tfc_test_expect_refused(yaml, drop_permute_l2norm, "layer 'ly'", ops[i]);
    }
}

TFC_TEST_MAIN("permute", {"permute_op", test_permute_op}, {"l2norm_op", test_l2norm_op},
              {"keras_parity", test_keras_parity}, {"argument_errors", test_argument_errors},
              {"masks", test_masks}, {"missing_kernel_refused", test_missing_kernel_refused})
