/* Conv3D and the 3-D poolings: the CPU's conv3d ops against loops written here from the
 * definition (padding, strides, dilation, groups; dx added or assigned), the pool3d ops'
 * gradient added and assigned, Keras 3 parity of whole models (tests/ref/keras_conv3d.py:
 * outputs, the input's and every weight's gradient, weights loaded and written under Keras's
 * paths), argument errors, and the refusal of a backend without the ops. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "graph/model.h"
#include "layers/layer.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "testutil.h"

/* The input element under output o and kernel tap u (per axis) in channel ch of example
 * b, or -1 outside the volume. */
static int64_t tap3(const tfc_conv3d_desc *d, int64_t b, const int o[3], const int u[3], int ch)
{
    int i[3];
    for (int a = 0; a < 3; a++) {
        i[a] = o[a] * d->s[a] + u[a] * d->dil[a] - d->pad[a];
        if (i[a] < 0 || i[a] >= d->in[a]) return -1;
    }
    return (((b * d->in[0] + i[0]) * d->in[1] + i[1]) * d->in[2] + i[2]) * d->c + ch;
}

/* y (with bias), dx and dw of sum(y * dy), in double, straight from the definition. */
static void ref_conv3d(const tfc_conv3d_desc *d, const float *x, const float *w,
                       const float *bias, const float *dy, double *y, double *dx, double *dw)
{
    const int cg = d->c / d->groups, fg = d->f / d->groups;
    memset(dx, 0, sizeof(double) * (size_t)d->n * d->in[0] * d->in[1] * d->in[2] * d->c);
    memset(dw, 0, sizeof(double) * (size_t)d->k[0] * d->k[1] * d->k[2] * cg * d->f);
    int64_t o_at = 0;
    for (int64_t b = 0; b < d->n; b++)
        for (int o0 = 0; o0 < d->out[0]; o0++)
            for (int o1 = 0; o1 < d->out[1]; o1++)
                for (int o2 = 0; o2 < d->out[2]; o2++)
                    for (int f = 0; f < d->f; f++, o_at++) {
                        const int o[3] = {o0, o1, o2};
                        double s = bias ? bias[f] : 0.0;
                        int64_t wi = 0;
                        for (int u0 = 0; u0 < d->k[0]; u0++)
                            for (int u1 = 0; u1 < d->k[1]; u1++)
                                for (int u2 = 0; u2 < d->k[2]; u2++)
                                    for (int ci = 0; ci < cg; ci++, wi += d->f) {
                                        const int u[3] = {u0, u1, u2};
                                        const int64_t xi = tap3(d, b, o, u, f / fg * cg + ci);
                                        if (xi < 0) continue;
                                        s += (double)x[xi] * w[wi + f];
                                        dx[xi] += (double)dy[o_at] * w[wi + f];
                                        dw[wi + f] += (double)dy[o_at] * x[xi];
                                    }
                        y[o_at] = s;
                    }
}

static double worst_rel(const float *got, const double *want, int64_t n)
{
    double worst = 0, scale = 1e-6;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(got[i] - want[i]) / scale);
    return worst;
}

/* One shape through the CPU's ops: y, then dw (added to a nonzero start), dx added and
 * assigned, against the reference. */
static void op_case(tfc_conv3d_desc d, int same)
{
    for (int a = 0; a < 3; a++)
        tfc_conv_axis(d.in[a], d.k[a], d.s[a], d.dil[a], same, &d.out[a], &d.pad[a]);
    const int64_t nx = (int64_t)d.n * d.in[0] * d.in[1] * d.in[2] * d.c;
    const int64_t ny = (int64_t)d.n * d.out[0] * d.out[1] * d.out[2] * d.f;
    const int64_t nw = (int64_t)d.k[0] * d.k[1] * d.k[2] * (d.c / d.groups) * d.f;
    tfc_backend *be = tfc_cpu_backend_create(2);
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *bias = malloc(d.f * 4), *dy = malloc(ny * 4);
    float *y = malloc(ny * 4), *dx = malloc(nx * 4), *dw = malloc(nw * 4);
    double *ry = malloc(ny * 8), *rdx = malloc(nx * 8), *rdw = malloc(nw * 8);
    void *ws = malloc(be->ops->conv3d_workspace(be, &d) + 4);
    TFC_ASSERT(x && w && bias && dy && y && dx && dw && ry && rdx && rdw && ws);
    tfc_test_fill(x, nx, -1, 1, 1), tfc_test_fill(w, nw, -1, 1, 2);
    tfc_test_fill(bias, d.f, -1, 1, 3), tfc_test_fill(dy, ny, -1, 1, 4);
    ref_conv3d(&d, x, w, bias, dy, ry, rdx, rdw);
    be->ops->conv3d_forward(be, &d, x, w, bias, y, ws);
    CU_ASSERT(worst_rel(y, ry, ny) < 1e-5);
    for (int64_t i = 0; i < nw; i++) dw[i] = 1.0f, rdw[i] += 1.0;
    for (int64_t i = 0; i < nx; i++) dx[i] = 2.0f, rdx[i] += 2.0;
    be->ops->conv3d_backward(be, &d, x, w, dy, dx, dw, 0, ws);
    CU_ASSERT(worst_rel(dw, rdw, nw) < 1e-5);
    CU_ASSERT(worst_rel(dx, rdx, nx) < 1e-5);
    for (int64_t i = 0; i < nx; i++) dx[i] = NAN, rdx[i] -= 2.0;
    be->ops->conv3d_backward(be, &d, x, w, dy, dx, NULL, 1, ws);
    CU_ASSERT(worst_rel(dx, rdx, nx) < 1e-5);
    free(x), free(w), free(bias), free(dy), free(y), free(dx), free(dw);
    free(ry), free(rdx), free(rdw), free(ws);
    tfc_backend_free(be);
}

static void test_op_values(void)
{
    op_case((tfc_conv3d_desc){.n = 2, .c = 3, .f = 4, .groups = 1, .in = {5, 6, 5},
                              .k = {2, 3, 2}, .s = {1, 2, 1}, .dil = {1, 1, 1}}, 0);
    op_case((tfc_conv3d_desc){.n = 2, .c = 3, .f = 5, .groups = 1, .in = {5, 6, 4},
                              .k = {3, 3, 3}, .s = {2, 2, 3}, .dil = {1, 1, 1}}, 1);
    op_case((tfc_conv3d_desc){.n = 1, .c = 2, .f = 3, .groups = 1, .in = {6, 5, 7},
                              .k = {2, 2, 3}, .s = {1, 1, 1}, .dil = {2, 3, 1}}, 1);
    op_case((tfc_conv3d_desc){.n = 3, .c = 6, .f = 4, .groups = 2, .in = {4, 5, 3},
                              .k = {1, 2, 3}, .s = {2, 1, 1}, .dil = {1, 1, 1}}, 1);
}

/* Keras 3 parity (tests/ref/keras_conv3d.py). */
static void test_keras_parity(void)
{
    static const tfc_keras_parity p = {.dir = "conv3d", .tol = 1e-5};
    static const char *const names[] = {"conv3d_valid", "conv3d_same", "conv3d_groups", NULL};
    tfc_test_keras_cases(&p, names);
}

static void expect_error(const char *layer, const char *needle)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "input: {shape: [4, 6, 5, 4]}\nlayers:\n  - %s\n", layer);
    tfc_test_expect_model_error(yaml, needle);
}

static void test_errors(void)
{
    expect_error("Conv3D: {filters: 2, kernel_size: 3, strides: 2, dilation_rate: [1, 2, 1]}",
                 "strides > 1 with dilation_rate > 1 is not supported");
    expect_error("Conv3D: {filters: 3, kernel_size: 3, groups: 2}",
                 "filters (3) must be divisible by groups (2)");
    expect_error("Conv3D: {filters: 6, kernel_size: 3, groups: 3}",
                 "4 channels must be divisible by groups (3)");
    expect_error("Conv3D: {filters: 2, kernel_size: 3, data_format: channels_first}",
                 "Conv3D.data_format: not supported by tfc: only channels_last");
    expect_error("Conv3D: {filters: 2, kernel_size: [2, 3]}",
                 "kernel_size: expected an integer or a list of 3 (a 3-D window), found 2");
    expect_error("Conv3D: {filters: 2, kernel_size: 2, strides: [1, 2, 1, 1]}",
                 "strides: expected an integer or a list of 3");
    expect_error("Conv3D: {filters: 2, kernel_size: [5, 2, 2]}",
                 "smaller than the 5x2x2 kernel (dilation 1x1x1) with valid padding");
    expect_error("Conv3D: {filters: 2, kernel_size: 3, padding: causal}",
                 "unknown value \"causal\" (one of: valid, same)");
    expect_error("Conv3D: {kernel_size: 3}", "filters");
    expect_error("Conv3D: {filters: 2, kernel_size: 0}", "kernel_size");
    expect_error("Conv3D: {filters: 2, kernel_size: 2, kernel_initializer: nope}",
                 "kernel_initializer");
    expect_error("Conv3D: {filters: 2, kernel_size: 2, kernel_constraint: {type: max_norm, "
                 "axis: 1}}", "kernel_constraint: axis: tfc takes a leading run");
    expect_error("Conv3D: {filters: 2, kernel_size: 2, lora_rank: 2}", "lora_rank");
    expect_error("Flatten: {}\n  - Conv3D: {filters: 2, kernel_size: 3}",
                 "needs an input of shape (depth, height, width, channels)");
    tfc_test_expect_model_error("input: {shape: [4, 6, 5, 4]}\nlayers:\n"
                                "  - Conv3D: {filters: 2, kernel_size: [2, 3]}\n",
                                "t.yaml:3:5: error: layers[0].Conv3D: layer 'conv3d': "
                                "kernel_size");
    /* Keras's weights: kernel (kd, kh, kw, c / groups, f), bias (f); null is Keras's None */
    tfc_model *m = tfc_test_model("input: {shape: [4, 6, 5, 4]}\nlayers:\n"
                                  "  - Conv3D: {filters: 6, kernel_size: [1, 2, 3], groups: 2, "
                                  "kernel_regularizer: l2, bias_regularizer: null, "
                                  "data_format: null}\n"
                                  "  - Conv3D: {filters: 2, kernel_size: 2, use_bias: false, "
                                  "padding: same}\n");
    TFC_ASSERT(m != NULL);
    const tfc_layer *l = tfc_model_layer(m, 0), *l2 = tfc_model_layer(m, 1);
    CU_ASSERT_STRING_EQUAL(l->name, "conv3d");
    CU_ASSERT_STRING_EQUAL(l2->name, "conv3d_1");
    CU_ASSERT_EQUAL(l->nparams, 2);
    CU_ASSERT_STRING_EQUAL(l->params[0].name, "kernel");
    const int64_t want[5] = {1, 2, 3, 2, 6};
    CU_ASSERT_EQUAL(l->params[0].shape.ndim, 5);
    CU_ASSERT(!memcmp(l->params[0].shape.dim, want, sizeof want));
    CU_ASSERT_STRING_EQUAL(l->params[1].name, "bias");
    CU_ASSERT_EQUAL(l2->nparams, 1);
    CU_ASSERT(l->out_shape.ndim == 4 && l->out_shape.dim[0] == 4 && l->out_shape.dim[1] == 5 &&
              l->out_shape.dim[2] == 3 && l->out_shape.dim[3] == 6);
    CU_ASSERT(l2->out_shape.dim[0] == 4 && l2->out_shape.dim[1] == 5 &&
              l2->out_shape.dim[2] == 3 && l2->out_shape.dim[3] == 2);
    tfc_model_free(m);
}

static void drop_conv3d(tfc_backend_ops *ops)
{
    ops->conv3d_workspace = NULL, ops->conv3d_forward = NULL, ops->conv3d_backward = NULL;
}

static void drop_pool3d(tfc_backend_ops *ops)
{
    ops->pool3d_forward = NULL, ops->pool3d_backward = NULL;
}

/* A backend without the ops (the GPU's table until they have run there) refuses the layer at
 * bind, naming it and the op. */
static void test_refused(void)
{
    tfc_test_expect_refused("input: {shape: [3, 4, 4, 2]}\nlayers:\n"
                            "  - Conv3D: {name: c3, filters: 2, kernel_size: 2}\n",
                            drop_conv3d, "layer 'c3'", "conv3d_");
    tfc_test_expect_refused("input: {shape: [3, 4, 4, 2]}\nlayers:\n"
                            "  - AveragePooling3D: {name: p3, pool_size: 2}\n",
                            drop_pool3d, "layer 'p3'", "pool3d_");
}

/* pool3d_backward adds to dx what it assigns (max and average, overlapping windows clipped
 * by same padding); the max's winners are inside their windows and hold the window's max. */
static void test_pool3d_op(void)
{
    tfc_backend *be = tfc_cpu_backend_create(2);
    for (int is_max = 0; is_max < 2; is_max++) {
        tfc_pool3d_desc d = {.n = 2, .c = 3, .is_max = is_max, .in = {5, 6, 4}, .k = {2, 3, 3},
                             .s = {1, 2, 2}};
        for (int a = 0; a < 3; a++)
            tfc_conv_axis(d.in[a], d.k[a], d.s[a], 1, 1, &d.out[a], &d.pad[a]);
        const int64_t nx = (int64_t)d.n * d.in[0] * d.in[1] * d.in[2] * d.c;
        const int64_t ny = (int64_t)d.n * d.out[0] * d.out[1] * d.out[2] * d.c;
        float *x = malloc(nx * 4), *y = malloc(ny * 4), *dy = malloc(ny * 4);
        float *dx = malloc(nx * 4), *dxa = malloc(nx * 4);
        int32_t *am = malloc(ny * 4);
        TFC_ASSERT(x && y && dy && dx && dxa && am);
        tfc_test_fill(x, nx, -1, 1, 5), tfc_test_fill(dy, ny, -1, 1, 6);
        be->ops->pool3d_forward(be, &d, x, y, is_max ? am : NULL);
        for (int64_t i = 0; i < nx; i++) dx[i] = 1.0f, dxa[i] = NAN;
        be->ops->pool3d_backward(be, &d, dy, am, dx, 0);
        be->ops->pool3d_backward(be, &d, dy, am, dxa, 1);
        int bad = 0;
        for (int64_t i = 0; i < nx; i++) bad += fabsf(dx[i] - (dxa[i] + 1.0f)) > 1e-6f;
        CU_ASSERT_EQUAL(bad, 0);
        const int64_t vin = nx / d.n, vout = ny / d.n;
        for (int64_t o = 0; is_max && o < ny; o++)
            bad += x[o / vout * vin + am[o]] != y[o];
        CU_ASSERT_EQUAL(bad, 0);
        free(x), free(y), free(dy), free(dx), free(dxa), free(am);
    }
    tfc_backend_free(be);
}

/* Keras 3 parity of the poolings (tests/ref/keras_conv3d.py): max and average, same and
 * valid padding, strides below and above the window, the default pool_size, the global ones
 * with and without keepdims. */
static void test_pooling_keras_parity(void)
{
    static const tfc_keras_parity p = {.dir = "conv3d", .tol = 1e-5};
    static const char *const names[] = {"pooling3d", "pooling3d_valid", "pooling3d_global",
                                        NULL};
    tfc_test_keras_cases(&p, names);
}

static void test_pooling_errors(void)
{
    expect_error("MaxPooling3D: {pool_size: [2, 2]}",
                 "pool_size: expected an integer or a list of 3 (a 3-D window), found 2");
    expect_error("AveragePooling3D: {pool_size: 2, strides: [1, 2]}",
                 "strides: expected an integer or a list of 3");
    expect_error("AveragePooling3D: {}", "pool_size");
    expect_error("MaxPooling3D: {pool_size: [5, 1, 1]}",
                 "smaller than the 5x1x1 window with valid padding");
    expect_error("MaxPooling3D: {data_format: channels_first}",
                 "MaxPooling3D.data_format: not supported by tfc: only channels_last");
    expect_error("AveragePooling3D: {pool_size: 2, padding: full}", "one of: valid, same");
    expect_error("GlobalMaxPooling3D: {data_format: channels_first}",
                 "data_format: channels_first is not supported");
    expect_error("GlobalAveragePooling3D: {keepdims: 2}", "keepdims");
    expect_error("Flatten: {}\n  - GlobalAveragePooling3D: {}",
                 "needs an input of shape (depth, height, width, channels)");
    expect_error("Flatten: {}\n  - MaxPooling3D: {}",
                 "needs an input of shape (depth, height, width, channels)");
    /* shapes: the default pool_size 2, strides defaulting to pool_size, keepdims */
    tfc_model *m = tfc_test_model("input: {shape: [4, 6, 5, 4]}\nlayers:\n"
                                  "  - MaxPooling3D: {}\n"
                                  "  - AveragePooling3D: {pool_size: [1, 2, 1], padding: same, "
                                  "data_format: null}\n"
                                  "  - GlobalMaxPooling3D: {keepdims: true}\n"
                                  "  - GlobalAveragePooling3D: {inputs: max_pooling3d}\n"
                                  "outputs: [global_max_pooling3d, global_average_pooling3d]\n");
    TFC_ASSERT(m != NULL);
    const int64_t want[4][4] = {{2, 3, 2, 4}, {2, 2, 2, 4}, {1, 1, 1, 4}, {4}};
    for (int i = 0; i < 4; i++) {
        const tfc_shape *s = &tfc_model_layer(m, i)->out_shape;
        CU_ASSERT_EQUAL(s->ndim, i == 3 ? 1 : 4);
        CU_ASSERT(!memcmp(s->dim, want[i], sizeof(int64_t) * (size_t)s->ndim));
    }
    tfc_model_free(m);
}

TFC_TEST_MAIN("conv3d", {"op_values", test_op_values}, {"keras_parity", test_keras_parity},
              {"errors", test_errors}, {"refused", test_refused},
              {"pool3d_op", test_pool3d_op},
              {"pooling_keras_parity", test_pooling_keras_parity},
              {"pooling_errors", test_pooling_errors})
