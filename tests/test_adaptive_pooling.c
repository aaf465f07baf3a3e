/* AdaptiveAveragePooling1D/2D/3D and AdaptiveMaxPooling1D/2D/3D: the bins of
 * core/adaptive_pool.h against their definition, the CPU's adaptive_pool ops against loops
 * written here (the tie rule, dx added and assigned), Keras 3 parity of whole models
 * (tests/ref/keras_adaptive_pooling.py: outputs and the input's gradients, ties included),
 * argument errors, shapes, and the refusal of a backend without the ops. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/adaptive_pool.h"
#include "cpu/cpu.h"
#include "graph/model.h"
#include "layers/layer.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "testutil.h"

/* Bins from the definition (floor and ceil of the real quotients), and the cover as the
 * bins that hold a cell, for every size up to 24 pooled to every size up to 24. */
static void test_bins(void)
{
    int bad = 0;
    for (int in = 1; in <= 24; in++)
        for (int out = 1; out <= 24; out++) {
            for (int o = 0; o < out; o++) {
                int lo, hi;
                tfc_adaptive_bin(o, in, out, &lo, &hi);
                bad += lo != (int)floor((double)o * in / out) ||
                       hi != (int)ceil((double)(o + 1) * in / out) || hi <= lo || hi > in;
            }
            for (int i = 0; i < in; i++) {
                int olo, ohi, first = -1, last = -1;
                tfc_adaptive_cover(i, in, out, &olo, &ohi);
                for (int o = 0; o < out; o++) {
                    int lo, hi;
                    tfc_adaptive_bin(o, in, out, &lo, &hi);
                    if (lo <= i && i < hi) last = o, first = first < 0 ? o : first;
                }
                bad += olo != first || ohi != last + 1;
            }
        }
    CU_ASSERT_EQUAL(bad, 0);
}

/* y, the winners and dx of sum(y * dy), in double, from the definition: a bin's max is its
 * first cell with the max value in (w, h, d) order. */
static void ref_pool(const tfc_adaptive_pool_desc *d, const float *x, const float *dy,
                     double *y, int64_t *win, double *dx)
{
    const int64_t vin = (int64_t)d->in[0] * d->in[1] * d->in[2] * d->c;
    memset(dx, 0, sizeof(double) * (size_t)(d->n * vin));
    int64_t q = 0;
    for (int64_t b = 0; b < d->n; b++)
        for (int o0 = 0; o0 < d->out[0]; o0++)
            for (int o1 = 0; o1 < d->out[1]; o1++)
                for (int o2 = 0; o2 < d->out[2]; o2++)
                    for (int j = 0; j < d->c; j++, q++) {
                        const int o[3] = {o0, o1, o2};
                        int lo[3], hi[3];
                        for (int a = 0; a < 3; a++)
                            tfc_adaptive_bin(o[a], d->in[a], d->out[a], &lo[a], &hi[a]);
                        double s = 0, best = -INFINITY;
                        int64_t at_best = -1, count = 0;
                        for (int i2 = lo[2]; i2 < hi[2]; i2++)
                            for (int i1 = lo[1]; i1 < hi[1]; i1++)
                                for (int i0 = lo[0]; i0 < hi[0]; i0++, count++) {
                                    const int64_t at =
                                        (((int64_t)i0 * d->in[1] + i1) * d->in[2] + i2) * d->c + j;
                                    const double v = x[b * vin + at];
                                    s += v;
                                    if (v > best) best = v, at_best = at;
                                }
                        y[q] = d->is_max ? best : s / (double)count;
                        win[q] = at_best;
                        if (d->is_max) {
                            dx[b * vin + at_best] += dy[q];
                            continue;
                        }
                        for (int i2 = lo[2]; i2 < hi[2]; i2++)
                            for (int i1 = lo[1]; i1 < hi[1]; i1++)
                                for (int i0 = lo[0]; i0 < hi[0]; i0++)
                                    dx[b * vin + (((int64_t)i0 * d->in[1] + i1) * d->in[2] + i2) *
                                                     d->c + j] += dy[q] / (double)count;
                    }
}

static double worst_abs(const float *got, const double *want, int64_t n)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(got[i] - want[i]));
    return worst;
}

/* One shape through the CPU's ops, inputs random or (ties) from {0, 1/2, 1}: y and the
 * winners, dx added to a nonzero start and assigned. */
static void op_case(tfc_adaptive_pool_desc d, int ties)
{
    const int64_t nx = (int64_t)d.n * d.in[0] * d.in[1] * d.in[2] * d.c;
    const int64_t ny = (int64_t)d.n * d.out[0] * d.out[1] * d.out[2] * d.c;
    tfc_backend *be = tfc_cpu_backend_create(2);
    float *x = malloc(nx * 4), *dy = malloc(ny * 4), *y = malloc(ny * 4), *dx = malloc(nx * 4);
    double *ry = malloc(ny * 8), *rdx = malloc(nx * 8);
    int32_t *am = malloc(ny * 4);
    int64_t *rwin = malloc(ny * 8);
    TFC_ASSERT(x && dy && y && dx && ry && rdx && am && rwin);
    tfc_test_fill(x, nx, -1, 1, 7), tfc_test_fill(dy, ny, -1, 1, 8);
    for (int64_t i = 0; ties && i < nx; i++) x[i] = floorf((x[i] + 1.0f) * 1.5f) / 2.0f;
    ref_pool(&d, x, dy, ry, rwin, rdx);
    be->ops->adaptive_pool_forward(be, &d, x, y, d.is_max ? am : NULL);
    CU_ASSERT(worst_abs(y, ry, ny) < 1e-6);
    int bad = 0;
    for (int64_t q = 0; d.is_max && q < ny; q++) bad += am[q] != rwin[q];
    CU_ASSERT_EQUAL(bad, 0);
    for (int64_t i = 0; i < nx; i++) dx[i] = 2.0f, rdx[i] += 2.0;
    be->ops->adaptive_pool_backward(be, &d, dy, am, dx, 0);
    CU_ASSERT(worst_abs(dx, rdx, nx) < 1e-5);
    for (int64_t i = 0; i < nx; i++) dx[i] = NAN, rdx[i] -= 2.0;
    be->ops->adaptive_pool_backward(be, &d, dy, am, dx, 1);
    CU_ASSERT(worst_abs(dx, rdx, nx) < 1e-5);
    free(x), free(dy), free(y), free(dx), free(ry), free(rdx), free(am), free(rwin);
    tfc_backend_free(be);
}

static void test_op_values(void)
{
    for (int is_max = 0; is_max < 2; is_max++)
        for (int ties = 0; ties <= is_max; ties++) {
            /* overlapping bins on every axis; out > in on two; divisible; a 1-D one */
            op_case((tfc_adaptive_pool_desc){.n = 3, .c = 5, .is_max = is_max, .in = {5, 7, 6},
                                             .out = {3, 4, 4}}, ties);
            op_case((tfc_adaptive_pool_desc){.n = 2, .c = 3, .is_max = is_max, .in = {3, 2, 7},
                                             .out = {5, 5, 2}}, ties);
            op_case((tfc_adaptive_pool_desc){.n = 2, .c = 4, .is_max = is_max, .in = {4, 6, 8},
                                             .out = {2, 3, 1}}, ties);
            op_case((tfc_adaptive_pool_desc){.n = 4, .c = 2, .is_max = is_max, .in = {1, 1, 13},
                                             .out = {1, 1, 5}}, ties);
        }
}

/* Keras 3 parity (tests/ref/keras_adaptive_pooling.py): the six layers, bins overlapping,
 * outputs larger than inputs, list output_size, every bin the same size; and inputs with
 * ties, where the input's gradient shows the winner JAX's gradient picks. */
static void test_keras_parity(void)
{
    static const tfc_keras_parity p = {.dir = "adaptive_pooling", .tol = 1e-5};
    static const char *const names[] = {"adaptive1d", "adaptive2d", "adaptive2d_even",
                                        "adaptive3d", "ties1d",     "ties2d",
                                        "ties3d",     NULL};
    tfc_test_keras_cases(&p, names);
}

static void expect_error(const char *input, const char *layer, const char *needle)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "input: {shape: %s}\nlayers:\n  - %s\n", input, layer);
    tfc_test_expect_model_error(yaml, needle);
}

static void test_errors(void)
{
    const char *img = "[6, 5, 3]", *seq = "[7, 3]", *vol = "[4, 5, 6, 2]";
    expect_error(seq, "AdaptiveMaxPooling1D: {output_size: 0}",
                 "t.yaml:3:41: error: layers[0].AdaptiveMaxPooling1D.output_size[0]: expected an "
                 "integer in [1, 65536], found \"0\"");
    expect_error(img, "AdaptiveAveragePooling2D: {output_size: [3, -1]}",
                 "t.yaml:3:49: error: layers[0].AdaptiveAveragePooling2D.output_size[1]");
    expect_error(vol, "AdaptiveMaxPooling3D: {output_size: [2, 0, 2]}",
                 "AdaptiveMaxPooling3D.output_size[1]");
    expect_error(seq, "AdaptiveAveragePooling1D: {}", "output_size");
    expect_error(seq, "AdaptiveAveragePooling1D: {output_size: [2, 3]}",
                 "t.yaml:3:5: error: layers[0].AdaptiveAveragePooling1D: layer "
                 "'adaptive_average_pooling1d': output_size: expected an integer or a list of "
                 "1, found 2 values");
    expect_error(img, "AdaptiveMaxPooling2D: {output_size: [2, 3, 4]}",
                 "t.yaml:3:41: error: layers[0].AdaptiveMaxPooling2D.output_size: expected a "
                 "positive integer or a pair");
    expect_error(vol, "AdaptiveAveragePooling3D: {output_size: [2, 3]}",
                 "output_size: expected an integer or a list of 3, found 2 values");
    expect_error(img, "AdaptiveMaxPooling2D: {output_size: 2, data_format: channels_first}",
                 "t.yaml:3:5: error: layers[0].AdaptiveMaxPooling2D: layer "
                 "'adaptive_max_pooling2d': data_format: channels_first is not supported");
    expect_error(seq, "AdaptiveMaxPooling1D: {output_size: 2, data_format: NWC}",
                 "t.yaml:3:57: error: layers[0].AdaptiveMaxPooling1D.data_format: unknown value "
                 "\"NWC\"");
    expect_error(img, "AdaptiveAveragePooling2D: {output_size: 2, padding: same}", "padding");
    expect_error(img, "AdaptiveAveragePooling3D: {output_size: 2}",
                 "needs an input of shape (depth, height, width, channels), got (6, 5, 3)");
    expect_error(vol, "AdaptiveMaxPooling2D: {output_size: 2}",
                 "needs an input of shape (height, width, channels)");
    expect_error(img, "AdaptiveMaxPooling1D: {output_size: 2}",
                 "needs an input of shape (steps, channels)");
    /* shapes: an integer for every axis, lists, data_format null or channels_last */
    tfc_model *m = tfc_test_model("input: {shape: [4, 6, 5, 2]}\nlayers:\n"
                                  "  - AdaptiveMaxPooling3D: {output_size: 3}\n"
                                  "  - AdaptiveAveragePooling3D: {output_size: [1, 7, 2], "
                                  "data_format: null}\n"
                                  "  - Reshape: {target_shape: [7, 2, 2]}\n"
                                  "  - AdaptiveAveragePooling2D: {output_size: [3, 9], "
                                  "data_format: channels_last}\n"
                                  "  - AdaptiveMaxPooling2D: {output_size: 2}\n"
                                  "  - Reshape: {target_shape: [4, 2]}\n"
                                  "  - AdaptiveMaxPooling1D: {output_size: [6]}\n"
                                  "  - AdaptiveAveragePooling1D: {output_size: 1}\n");
    TFC_ASSERT(m != NULL);
    static const int64_t want[8][4] = {{3, 3, 3, 2}, {1, 7, 2, 2}, {7, 2, 2}, {3, 9, 2},
                                       {2, 2, 2},    {4, 2},       {6, 2},    {1, 2}};
    static const int ndim[8] = {4, 4, 3, 3, 3, 2, 2, 2};
    for (int i = 0; i < 8; i++) {
        const tfc_layer *l = tfc_model_layer(m, i);
        CU_ASSERT_EQUAL(l->out_shape.ndim, ndim[i]);
        CU_ASSERT(!memcmp(l->out_shape.dim, want[i], sizeof(int64_t) * (size_t)ndim[i]));
        CU_ASSERT_EQUAL(l->nparams, 0);
    }
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 0)->name, "adaptive_max_pooling3d");
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 7)->name, "adaptive_average_pooling1d");
    tfc_model_free(m);
}

static void drop_adaptive(tfc_backend_ops *ops)
{
    ops->adaptive_pool_forward = NULL, ops->adaptive_pool_backward = NULL;
}

/* A backend without the ops (the GPU's table until they have run there) refuses the layer at
 * bind, naming it and the op. */
static void test_refused(void)
{
    tfc_test_expect_refused("input: {shape: [5, 4, 2]}\nlayers:\n"
                            "  - AdaptiveMaxPooling2D: {name: ap, output_size: 3}\n",
                            drop_adaptive, "layer 'ap'", "adaptive_pool_");
}

TFC_TEST_MAIN("adaptive_pooling", {"bins", test_bins}, {"op_values", test_op_values},
              {"keras_parity", test_keras_parity}, {"errors", test_errors},
              {"refused", test_refused})
