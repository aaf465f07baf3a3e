/* The vision layers' kernels and layers (DepthwiseConv2D, ZeroPadding2D, Cropping2D,
 * UpSampling2D, GlobalMaxPooling2D, Multiply, relu6 / hard_silu / mish, SeparableConv2D): the
 * CPU ops against loops written here in double, the depthwise filter gradient bit for bit on
 * 1 and 2 threads, the refusal of a backend that lacks a kernel, and Keras 3 parity from the
 * fixtures of tests/ref/keras_vision.py (tests/ref/vision/) and keras_separable.py
 * (tests/ref/separable/). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"
#include "graph/model.h"
#include "graph/model_internal.h"
#include "gradcheck.h"
#include "layers/layer.h"
#include "solver/solver.h"
#include "testutil.h"

static float *falloc(int64_t n)
{
    float *p = calloc((size_t)n, sizeof(float));
    TFC_ASSERT(p != NULL);
    return p;
}

/* Largest |got - want| / (1 + |want|) over n values. */
static double max_rel(const float *got, const double *want, int64_t n)
{
    double e = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(got[i] - want[i]) / (1 + fabs(want[i]));
        if (d > e || d != d) e = d != d ? INFINITY : d;
    }
    return e;
}

/* ---- DepthwiseConv2D ------------------------------------------------------------------ */

static tfc_conv_desc dw_desc(int n, int h, int w, int c, int m, int kh, int kw, int sh, int sw,
                             int dh, int dw, int same)
{
    tfc_conv_desc d = {.n = n, .h = h, .w = w, .c = c, .kh = kh, .kw = kw, .f = c * m,
                       .sh = sh, .sw = sw, .dh = dh, .dw = dw};
    tfc_conv_axis(h, kh, sh, dh, same, &d.oh, &d.pad_top);
    tfc_conv_axis(w, kw, sw, dw, same, &d.ow, &d.pad_left);
    return d;
}

/* Calls f(d, ctx, n, i, j, k, xi) for every (output pixel, tap) that reads input element xi
 * (a flat index into x), with the tap's flat kernel index ki. */
typedef void (*dw_visit)(void *ctx, int64_t yi, int64_t xi, int64_t ki);
static void dw_walk(const tfc_conv_desc *d, dw_visit f, void *ctx)
{
    const int m = d->f / d->c;
    for (int n = 0; n < d->n; n++)
        for (int i = 0; i < d->oh; i++)
            for (int j = 0; j < d->ow; j++)
                for (int k = 0; k < d->f; k++)
                    for (int u = 0; u < d->kh; u++)
                        for (int v = 0; v < d->kw; v++) {
                            int iy = i * d->sh + u * d->dh - d->pad_top;
                            int ix = j * d->sw + v * d->dw - d->pad_left;
                            if (iy < 0 || iy >= d->h || ix < 0 || ix >= d->w) continue;
                            int64_t yi = (((int64_t)n * d->oh + i) * d->ow + j) * d->f + k;
                            int64_t xi = (((int64_t)n * d->h + iy) * d->w + ix) * d->c + k / m;
                            f(ctx, yi, xi, (int64_t)(u * d->kw + v) * d->f + k);
                        }
}

typedef struct dw_ref {
    const float *x, *w, *dy;
    double *y, *dx, *dw;
} dw_ref;

static void ref_forward(void *p, int64_t yi, int64_t xi, int64_t ki)
{
    dw_ref *r = p;
    r->y[yi] += (double)r->x[xi] * r->w[ki];
}

static void ref_data(void *p, int64_t yi, int64_t xi, int64_t ki)
{
    dw_ref *r = p;
    r->dx[xi] += (double)r->dy[yi] * r->w[ki];
}

static void ref_filter(void *p, int64_t yi, int64_t xi, int64_t ki)
{
    dw_ref *r = p;
    r->dw[ki] += (double)r->x[xi] * r->dy[yi];
}

/* Forward (with bias), the data and the filter gradients (both accumulating onto 1) against
 * the loops above, for strides, dilation, same/valid padding and depth multipliers. */
static void depthwise_values(void)
{
    const tfc_conv_desc ds[] = {
        dw_desc(2, 7, 8, 3, 1, 3, 3, 1, 1, 1, 1, 1), dw_desc(2, 7, 8, 3, 2, 3, 3, 2, 2, 1, 1, 1),
        dw_desc(1, 9, 6, 4, 3, 2, 3, 1, 2, 2, 1, 0), dw_desc(3, 5, 5, 2, 1, 4, 2, 3, 1, 1, 2, 1),
        dw_desc(2, 6, 7, 5, 1, 1, 1, 2, 2, 1, 1, 0), dw_desc(1, 8, 8, 17, 2, 3, 3, 1, 1, 2, 2, 1),
    };
    tfc_backend *be = tfc_cpu_backend_create(1);
    for (size_t t = 0; t < sizeof ds / sizeof *ds; t++) {
        const tfc_conv_desc *d = &ds[t];
        int64_t nx = (int64_t)d->n * d->h * d->w * d->c, ny = (int64_t)d->n * d->oh * d->ow * d->f;
        int64_t nw = (int64_t)d->kh * d->kw * d->f;
        float *x = falloc(nx), *w = falloc(nw), *b = falloc(d->f), *y = falloc(ny);
        float *dy = falloc(ny), *dx = falloc(nx), *dwt = falloc(nw);
        float *ws = falloc((int64_t)be->ops->depthwise_workspace(be, d) / 4 + 1);
        tfc_test_fill(x, nx, -1, 1, 1 + (unsigned)t);
        tfc_test_fill(w, nw, -1, 1, 11 + (unsigned)t);
        tfc_test_fill(b, d->f, -1, 1, 21 + (unsigned)t);
        tfc_test_fill(dy, ny, -1, 1, 31 + (unsigned)t);
        for (int64_t i = 0; i < nx; i++) dx[i] = 1;
        for (int64_t i = 0; i < nw; i++) dwt[i] = 1;
        dw_ref r = {x, w, dy, calloc((size_t)ny, 8), calloc((size_t)nx, 8), calloc((size_t)nw, 8)};
        for (int64_t i = 0; i < ny; i++) r.y[i] = b[i % d->f];
        for (int64_t i = 0; i < nx; i++) r.dx[i] = 1;
        for (int64_t i = 0; i < nw; i++) r.dw[i] = 1;
        dw_walk(d, ref_forward, &r);
        dw_walk(d, ref_data, &r);
        dw_walk(d, ref_filter, &r);
        be->ops->depthwise_forward(be, d, x, w, b, NULL, NULL, TFC_ACT_LINEAR, y, NULL);
        be->ops->depthwise_backward_data(be, d, dy, w, dx);
        be->ops->depthwise_backward_filter(be, d, x, dy, dwt, ws);
        double ef = max_rel(y, r.y, ny), ed = max_rel(dx, r.dx, nx), ew = max_rel(dwt, r.dw, nw);
        if (ef > 1e-5 || ed > 1e-5 || ew > 1e-5)
            fprintf(stderr, "\ncase %zu: forward %.3g data %.3g filter %.3g\n", t, ef, ed, ew);
        CU_ASSERT(ef <= 1e-5 && ed <= 1e-5 && ew <= 1e-5);
        free(x), free(w), free(b), free(y), free(dy), free(dx), free(dwt), free(ws);
        free(r.y), free(r.dx), free(r.dw);
    }
    tfc_backend_free(be);
}

/* The values under each instruction set this CPU runs (cpu_depthwise.c's AVX-512, AVX2 and
 * baseline loops). */
static void test_depthwise_values(void)
{
    for (int isa = 2; isa >= 0; isa--)
        if (tfc_cpu_depthwise_isa(isa)) depthwise_values();
    tfc_cpu_depthwise_isa(-1);
}

/* Forward (with a bias where `bias`), the data gradient and the filter gradient (both from
 * zero) of d on `threads` threads into out[0..2] (allocated here), from fixed x, w, bias and
 * dy. */
static void depthwise_run(const tfc_conv_desc *d, int threads, int bias, float *out[3])
{
    int64_t nx = (int64_t)d->n * d->h * d->w * d->c, ny = (int64_t)d->n * d->oh * d->ow * d->f;
    int64_t nw = (int64_t)d->kh * d->kw * d->f;
    float *x = falloc(nx), *w = falloc(nw), *dy = falloc(ny), *b = falloc(d->f);
    tfc_test_fill(x, nx, -1, 1, 3);
    tfc_test_fill(w, nw, -1, 1, 4);
    tfc_test_fill(dy, ny, -1, 1, 5);
    tfc_test_fill(b, d->f, -1, 1, 6);
    tfc_backend *be = tfc_cpu_backend_create(threads);
    float *ws = falloc((int64_t)be->ops->depthwise_workspace(be, d) / 4 + 1);
    out[0] = falloc(ny), out[1] = falloc(nx), out[2] = falloc(nw);
    be->ops->depthwise_forward(be, d, x, w, bias ? b : NULL, NULL, NULL, TFC_ACT_LINEAR, out[0],
                               NULL);
    be->ops->depthwise_backward_data(be, d, dy, w, out[1]);
    be->ops->depthwise_backward_filter(be, d, x, dy, out[2], ws);
    free(ws);
    tfc_backend_free(be);
    free(x), free(w), free(dy), free(b);
}

/* Whether two depthwise_run results of d hold the same bits; frees b. */
static int depthwise_same(const tfc_conv_desc *d, float *a[3], float *b[3])
{
    size_t n[3] = {(size_t)d->n * d->oh * d->ow * d->f, (size_t)d->n * d->h * d->w * d->c,
                   (size_t)d->kh * d->kw * d->f};
    int same = 1;
    for (int k = 0; k < 3; k++) {
        same &= memcmp(a[k], b[k], n[k] * 4) == 0;
        free(b[k]);
    }
    return same;
}

/* The filter gradient sums fixed shares of the rows: the same bits on 1 and 2 threads (a
 * shape large enough for both to split it). Forward and the data gradient too. */
static void test_depthwise_threads(void)
{
    const tfc_conv_desc d = dw_desc(5, 17, 16, 32, 1, 3, 3, 1, 1, 1, 1, 1);
    float *one[3], *two[3];
    depthwise_run(&d, 1, 1, one);
    depthwise_run(&d, 2, 1, two);
    CU_ASSERT(depthwise_same(&d, one, two));
    for (int k = 0; k < 3; k++) free(one[k]);
}

/* Each instruction set this CPU runs gives the baseline loops' bits, with a bias and
 * without: depth multipliers 1 to 4 (unrolled) and 5 (the general loop), channel counts off
 * the vector widths, strides, dilation. */
static void test_depthwise_isa(void)
{
    const tfc_conv_desc ds[] = {
        dw_desc(3, 9, 10, 37, 1, 3, 3, 1, 1, 1, 1, 1), dw_desc(2, 8, 9, 19, 2, 3, 3, 2, 2, 1, 1, 1),
        dw_desc(2, 9, 7, 13, 3, 2, 3, 1, 2, 2, 1, 0), dw_desc(2, 7, 7, 9, 4, 3, 3, 1, 1, 1, 1, 1),
        dw_desc(2, 6, 8, 7, 5, 3, 2, 2, 1, 1, 1, 1),
        /* depth multiplier 1 on whole vectors: the AVX2 pixel kernel (blocks of 32, 16, 8) */
        dw_desc(2, 9, 10, 56, 1, 3, 3, 1, 1, 1, 1, 1), dw_desc(2, 11, 9, 16, 1, 3, 3, 2, 2, 1, 1, 1),
        dw_desc(1, 9, 9, 24, 1, 3, 2, 1, 1, 2, 2, 0),
        /* and 3x3's rows of 4 interior pixels at a time: 1-3 left over (interiors of 3, 5, 6,
         * 7, 13; strides 1 and 2, SAME's edge pixels of both sides), none, widths 1 and 2,
         * one valid kernel row (height 1), stride 3 and dilation 2 (the offsets at run time),
         * VALID (no edge pixels) */
        dw_desc(1, 4, 5, 8, 1, 3, 3, 1, 1, 1, 1, 1), dw_desc(2, 6, 7, 40, 1, 3, 3, 1, 1, 1, 1, 1),
        dw_desc(1, 5, 8, 16, 1, 3, 3, 1, 1, 1, 1, 1), dw_desc(1, 7, 14, 24, 1, 3, 3, 2, 2, 1, 1, 1),
        dw_desc(1, 6, 27, 8, 1, 3, 3, 2, 2, 1, 1, 1), dw_desc(1, 7, 13, 32, 1, 3, 3, 2, 2, 1, 1, 1),
        dw_desc(2, 5, 3, 8, 1, 3, 3, 1, 1, 1, 1, 1), dw_desc(1, 5, 2, 16, 1, 3, 3, 1, 1, 1, 1, 1),
        dw_desc(1, 4, 1, 8, 1, 3, 3, 2, 2, 1, 1, 1), dw_desc(1, 1, 9, 24, 1, 3, 3, 1, 1, 1, 1, 1),
        dw_desc(1, 10, 11, 16, 1, 3, 3, 3, 3, 1, 1, 1),
        dw_desc(1, 9, 12, 8, 1, 3, 3, 1, 1, 2, 2, 1), dw_desc(1, 7, 9, 16, 1, 3, 3, 1, 2, 1, 1, 0),
    };
    int checked = 0;
    for (size_t t = 0; t < sizeof ds / sizeof *ds; t++) {
        for (int bias = 0; bias <= 1; bias++) {
            float *base[3];
            TFC_ASSERT(tfc_cpu_depthwise_isa(0));
            depthwise_run(&ds[t], 2, bias, base);
            for (int isa = 1; isa <= 2; isa++) {
                if (!tfc_cpu_depthwise_isa(isa)) continue;
                float *got[3];
                depthwise_run(&ds[t], 2, bias, got);
                int same = depthwise_same(&ds[t], base, got);
                if (!same)
                    fprintf(stderr, "\ncase %zu (bias %d): isa %d differs from the baseline\n", t,
                            bias, isa);
                CU_ASSERT(same);
                checked++;
            }
            for (int k = 0; k < 3; k++) free(base[k]);
        }
    }
    tfc_cpu_depthwise_isa(-1);
    printf("\n  %d instruction-set comparisons (AVX2%s)", checked,
           tfc_cpu_depthwise_isa(2) ? " and AVX-512" : " only: no AVX-512 here");
    tfc_cpu_depthwise_isa(-1);
}

/* ---- UpSampling2D -------------------------------------------------------------------- */

/* Row o's weights over the `in` cells of an axis enlarged s times, as jax.image.resize
 * computes them: a triangle of width 1 around the half-pixel centre (o + 1/2) / s - 1/2,
 * the weights of the cells inside the image renormalised to sum 1 (nearest: the cell o / s). */
static void axis_weights(int o, int s, int in, int bilinear, double *w)
{
    double centre = (o + 0.5) / s - 0.5, sum = 0;
    for (int i = 0; i < in; i++) {
        w[i] = bilinear ? fmax(0, 1 - fabs(centre - i)) : i == o / s;
        sum += w[i];
    }
    for (int i = 0; i < in; i++) w[i] /= sum;
}

/* Forward, and backward onto ones, against the dense weight matrices above: nearest and
 * bilinear, even and odd factors, one-cell axes. */
static void test_upsample_values(void)
{
    const tfc_resize_desc ds[] = {
        {2, 5, 4, 3, 2, 2, 1}, {1, 4, 5, 2, 3, 3, 1}, {2, 3, 1, 5, 1, 4, 1},
        {2, 5, 4, 3, 2, 3, 0}, {1, 1, 3, 17, 5, 2, 1},
    };
    tfc_backend *be = tfc_cpu_backend_create(1);
    for (size_t t = 0; t < sizeof ds / sizeof *ds; t++) {
        const tfc_resize_desc *d = &ds[t];
        const int oh = d->h * d->sh, ow = d->w * d->sw, c = d->c;
        int64_t nx = (int64_t)d->n * d->h * d->w * c, ny = (int64_t)d->n * oh * ow * c;
        float *x = falloc(nx), *y = falloc(ny), *dy = falloc(ny), *dx = falloc(nx);
        double *ry = calloc((size_t)ny, 8), *rdx = calloc((size_t)nx, 8);
        double *wy = calloc((size_t)d->h, 8), *wx = calloc((size_t)d->w, 8);
        tfc_test_fill(x, nx, -1, 1, 7 + (unsigned)t);
        tfc_test_fill(dy, ny, -1, 1, 17 + (unsigned)t);
        for (int64_t i = 0; i < nx; i++) dx[i] = 1, rdx[i] = 1;
        for (int n = 0; n < d->n; n++)
            for (int i = 0; i < oh; i++)
                for (int j = 0; j < ow; j++) {
                    axis_weights(i, d->sh, d->h, d->bilinear, wy);
                    axis_weights(j, d->sw, d->w, d->bilinear, wx);
                    for (int u = 0; u < d->h; u++)
                        for (int v = 0; v < d->w; v++)
                            for (int k = 0; k < c; k++) {
                                int64_t yi = (((int64_t)n * oh + i) * ow + j) * c + k;
                                int64_t xi = (((int64_t)n * d->h + u) * d->w + v) * c + k;
                                ry[yi] += wy[u] * wx[v] * x[xi];
                                rdx[xi] += wy[u] * wx[v] * dy[yi];
                            }
                }
        be->ops->upsample_forward(be, d, x, y);
        be->ops->upsample_backward(be, d, dy, dx);
        double ef = max_rel(y, ry, ny), eb = max_rel(dx, rdx, nx);
        if (ef > 1e-6 || eb > 1e-6) fprintf(stderr, "\ncase %zu: %.3g %.3g\n", t, ef, eb);
        CU_ASSERT(ef <= 1e-6 && eb <= 1e-6);
        free(x), free(y), free(dy), free(dx), free(ry), free(rdx), free(wy), free(wx);
    }
    tfc_backend_free(be);
}

/* ---- Multiply ------------------------------------------------------------------------ */

/* mul with and without broadcast and accumulation, and mul_reduce, against loops. */
static void test_mul_values(void)
{
    enum { G = 3, R = 5, C = 7 };
    tfc_backend *be = tfc_cpu_backend_create(1);
    float a[G * R * C], b[G * R * C], v[G * C], y[G * R * C], acc[G * R * C], db[G * C];
    tfc_test_fill(a, G * R * C, -1, 1, 1);
    tfc_test_fill(b, G * R * C, -1, 1, 2);
    tfc_test_fill(v, G * C, -1, 1, 3);
    for (int i = 0; i < G * R * C; i++) acc[i] = 1;
    for (int i = 0; i < G * C; i++) db[i] = 1;
    be->ops->mul(be, G, R, C, a, v, 1, y, 0);
    be->ops->mul(be, G, R, C, a, b, 0, acc, 1);
    be->ops->mul_reduce(be, G, R, C, a, b, db);
    double ry[G * R * C], racc[G * R * C], rdb[G * C];
    for (int g = 0; g < G; g++)
        for (int k = 0; k < C; k++) {
            rdb[g * C + k] = 1;
            for (int r = 0; r < R; r++) {
                int i = (g * R + r) * C + k;
                ry[i] = (double)a[i] * v[g * C + k];
                racc[i] = 1 + (double)a[i] * b[i];
                rdb[g * C + k] += (double)a[i] * b[i];
            }
        }
    CU_ASSERT(max_rel(y, ry, G * R * C) <= 1e-6);
    CU_ASSERT(max_rel(acc, racc, G * R * C) <= 1e-6);
    CU_ASSERT(max_rel(db, rdb, G * C) <= 1e-6);
    tfc_backend_free(be);
}

/* Shapes Multiply refuses, naming the input. */
static void test_multiply_shapes_refused(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    const char *yaml = "input: {shape: [4, 4, 3]}\nlayers:\n"
                       "  - Conv2D: {name: c, filters: 3, kernel_size: 1}\n"
                       "  - Conv2D: {name: d, filters: 1, kernel_size: 1, inputs: input}\n"
                       "  - Multiply: {inputs: [c, d]}\n";
    tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), "t.yaml", &err);
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "input 1 is (4, 4, 1)"));
    tfc_model_free(m);
}

/* Arguments refused with a positioned error saying why. */
static void test_config_errors(void)
{
    const char *bad[][2] = {
        {"  - Conv2DTranspose: {filters: 2, kernel_size: 3, strides: 2, output_padding: [1, 2]}\n",
         "must be less than the stride 2"},
        {"  - Conv2DTranspose: {filters: 2, kernel_size: 3, strides: 2, dilation_rate: 2}\n",
         "strides > 1 with dilation_rate > 1"},
        {"  - ZeroPadding2D: {padding: [1, 2, 3]}\n", "expected an int, [rows, columns]"},
        {"  - ZeroPadding2D: {padding: [1, [2, 3, 4]]}\n", "expected an int or a pair"},
        {"  - Cropping2D: {cropping: [[2, 3], 0]}\n", "leaves nothing of the input"},
        {"  - DepthwiseConv2D: {kernel_size: 3, data_format: channels_first}\n", "channels_last"},
        {"  - UpSampling2D: {interpolation: bicubic}\n", "bilinear"},
        {"  - DepthwiseConv2D: {kernel_size: 3, depthwise_regularizer: {type: l1, l2: 0.1}}\n",
         "depthwise_regularizer.l2: unknown key 'l2'"},
        {"  - SeparableConv2D: {filters: 2, kernel_size: 3, pointwise_constraint: {type: "
         "max_norm, axis: [1, 2]}}\n",
         "pointwise_constraint: axis: tfc takes a leading run"},
        {"  - SeparableConv2D: {filters: 2, kernel_size: 3, data_format: channels_first}\n",
         "channels_last"},
        {"  - SeparableConv2D: {filters: 2, kernel_size: [3, 7]}\n", "smaller than the 3x7"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml, "input: {shape: [5, 6, 2]}\nlayers:\n%s", bad[i][0]);
        tfc_error err;
        tfc_error_clear(&err);
        tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), "bad.yaml", &err);
        CU_ASSERT_PTR_NULL(m);
        int found = strstr(err.text, bad[i][1]) != NULL;
        if (!found) fprintf(stderr, "\nwanted '%s' in: %s", bad[i][1], err.text);
        CU_ASSERT(found);
        CU_ASSERT(err.line == 3);
        tfc_model_free(m);
    }
}

/* ---- relu6, hard_silu, mish ---------------------------------------------------------- */

static double relu6(double v) { return fmin(fmax(v, 0), 6); }

/* Forward and backward (onto ones) over [-8, 8] against Keras's formulas in double: relu6
 * min(max(x, 0), 6); hard_silu x relu6(x + 3) / 6; mish x tanh(log(1 + e^x)). Derivatives
 * away from the kinks by central differences of the same formulas. */
static void test_activation_values(void)
{
    enum { N = 401 };
    tfc_backend *be = tfc_cpu_backend_create(1);
    const tfc_act acts[] = {TFC_ACT_RELU6, TFC_ACT_HARD_SILU, TFC_ACT_MISH};
    float x[N], y[N], dy[N], dx[N];
    double ry[N], rdx[N];
    for (size_t a = 0; a < sizeof acts / sizeof *acts; a++) {
        for (int i = 0; i < N; i++) {
            x[i] = -8.0f + 16.0f * (float)i / (N - 1) + 0.013f; /* off the kinks */
            dy[i] = 0.5f + (float)(i % 7) / 7.0f;
            dx[i] = 1;
            double f[3];
            for (int k = 0; k < 3; k++) {
                double v = x[i] + (k - 1) * 1e-6;
                f[k] = acts[a] == TFC_ACT_RELU6       ? relu6(v)
                       : acts[a] == TFC_ACT_HARD_SILU ? v * relu6(v + 3) / 6
                                                      : v * tanh(log1p(exp(v)));
            }
            ry[i] = f[1];
            rdx[i] = 1 + dy[i] * (f[2] - f[0]) / 2e-6;
        }
        be->ops->act_forward(be, acts[a], N, N, x, y);
        be->ops->act_backward(be, acts[a], N, N, x, y, dy, dx, 0);
        double ef = max_rel(y, ry, N), eb = max_rel(dx, rdx, N);
        if (ef > 1e-6 || eb > 2e-5)
            fprintf(stderr, "\n%s: forward %.3g backward %.3g\n", tfc_act_names[acts[a]], ef, eb);
        CU_ASSERT(ef <= 1e-6 && eb <= 2e-5);
    }
    tfc_backend_free(be);
}

/* The GPU backend lacks these activations (tfc_backend.acts): a model using one is refused
 * at bind, naming the layer and the activation, whichever layer carries it. */
static void test_missing_activation_refused(void)
{
    const char *yamls[] = {"input: {shape: [4]}\nlayers:\n  - Dense: {name: v, units: 3, activation: mish}\n",
                           "input: {shape: [5, 5, 2]}\nlayers:\n"
                           "  - Conv2D: {filters: 2, kernel_size: 3}\n"
                           "  - Activation: {name: v, activation: relu6}\n",
                           "input: {shape: [5, 5, 2]}\nlayers:\n"
                           "  - Conv2D: {name: v, filters: 2, kernel_size: 3, activation: hard_silu}\n"};
    const char *names[] = {"'mish'", "'relu6'", "'hard_silu'"};
    for (int k = 0; k < 3; k++) {
        tfc_model *m = tfc_test_model(yamls[k]);
        tfc_backend *be = tfc_cpu_backend_create(1);
        TFC_ASSERT(m && be);
        be->acts = (1u << TFC_ACT_RELU6) - 1; /* the GPU's */
        tfc_error err;
        tfc_error_clear(&err);
        CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_ERR_CONFIG);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'v'"));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no kernel for the activation"));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, names[k]));
        be->acts = (1u << TFC_ACT_COUNT) - 1;
        tfc_error_clear(&err);
        CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
        tfc_model_free(m);
        tfc_backend_free(be);
    }
}

/* ---- Keras parity ---------------------------------------------------------------------- */

/* One fixture of tests/ref/vision: its model (metadata `yaml`) bound for inference (the
 * inference layout with its fused chains, or with `training_layout` the training one), the
 * weights loaded by name, the forward pass of `x` against Keras's `y`: each value within
 * 1e-5 of |y| plus 1e-6 of y's largest magnitude. Prints the largest differences. */
static void parity_case(const char *path, int training_layout)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open(path, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    const char *yaml = tfc_st_meta(f, "yaml");
    const tfc_st_tensor *tx = tfc_st_find(f, "x"), *ty = tfc_st_find(f, "y");
    CU_ASSERT_FATAL(yaml && tx && ty);
    tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), path, &err);
    if (!m) fprintf(stderr, "\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    tfc_backend *be = tfc_cpu_backend_create(2);
    const int batch = (int)tx->shape.dim[0];
    tfc_status st = training_layout ? tfc_model_bind(m, be, batch, &err)
                                    : tfc_model_bind_inference(m, be, batch, &err);
    CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
    if (tfc_model_param_count(m)) { /* a load matching nothing is an error */
        tfc_weights_report rep = {0};
        CU_ASSERT_EQUAL(tfc_model_load_weights(m, path, &rep, &err), TFC_OK);
        int params = 0;
        for (int i = 0; i < tfc_model_nlayers(m); i++) /* the constants are in no file */
            for (int p = 0; p < tfc_model_layer(m, i)->nparams; p++)
                params += !tfc_model_layer(m, i)->params[p].constant;
        CU_ASSERT(rep.missing == 0 && rep.mismatched == 0 && rep.matched == params);
        free(rep.text);
    }
    float *x = falloc(tx->numel), *want = falloc(ty->numel), *got = falloc(ty->numel);
    tfc_st_tensor_to_f32(tx, x);
    tfc_st_tensor_to_f32(ty, want);
    CU_ASSERT_EQUAL(tfc_model_forward(m, x, batch, 0, 0, 0, &err), TFC_OK);
    CU_ASSERT_EQUAL(ty->numel, batch * tfc_shape_numel(tfc_model_output_shape(m)));
    tfc_model_get_output(m, got);
    double scale = 0, abs_err = 0, rel_err = 0;
    for (int64_t i = 0; i < ty->numel; i++) scale = fmax(scale, fabs(want[i]));
    int bad = 0;
    for (int64_t i = 0; i < ty->numel; i++) {
        double d = fabs((double)got[i] - want[i]);
        abs_err = fmax(abs_err, d);
        if (fabs(want[i]) > 1e-3 * scale) rel_err = fmax(rel_err, d / fabs(want[i]));
        bad += !(d <= 1e-5 * fabs(want[i]) + 1e-6 * scale);
    }
    printf("\n  %s (%s layout): max abs diff %.3g (max |y| %.3g), max rel %.3g%s",
           strrchr(path, '/') + 1, training_layout ? "training" : "inference", abs_err, scale,
           rel_err, bad ? " MISMATCH" : "");
    CU_ASSERT_EQUAL(bad, 0);
    free(x), free(want), free(got);
    tfc_model_free(m);
    tfc_backend_free(be);
    tfc_st_close(f);
}

/* Every fixture of `dir` in both layouts; returns how many. */
static int parity_dir(const char *dir)
{
    DIR *d = opendir(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    int cases = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n < 12 || strcmp(e->d_name + n - 12, ".safetensors")) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        parity_case(path, 0);
        parity_case(path, 1);
        cases++;
    }
    closedir(d);
    return cases;
}

static void test_parity_keras(void)
{
    CU_ASSERT(parity_dir("tests/ref/vision") >= 9);
}

/* SeparableConv2D's fixtures (tests/ref/keras_separable.py): strides, dilation, both
 * paddings, depth_multiplier 2 and 3, with and without bias, two stacked. */
static void test_parity_keras_separable(void)
{
    CU_ASSERT(parity_dir("tests/ref/separable") >= 3);
}

/* The activation layers' and Rescaling's fixtures (tests/ref/keras_activations.py): every
 * argument of ReLU, LeakyReLU and ELU, both the ones that are tfc activations and the ones
 * that run the pact ops; PReLU shared along images' and sequences' leading axes and not
 * shared; Rescaling with and without offset; Softmax last. */
static void test_parity_keras_activations(void)
{
    CU_ASSERT(parity_dir("tests/ref/activations") >= 3);
}

/* ZeroPadding1D, Cropping1D and UpSampling1D's fixture (tests/ref/keras_sequence1d.py): a 1-D
 * U-Net step, both paddings and croppings (an int and a pair), a skip joined; RepeatVector's
 * and Identity's: an LSTM autoencoder. */
static void test_parity_keras_sequence1d(void)
{
    CU_ASSERT(parity_dir("tests/ref/sequence1d") >= 2);
}

/* ---- training ------------------------------------------------------------------------- */

/* Every vision layer in one model trains through the solver (a smoke test; the gradient
 * checks of test_layers are the exact ones): the synthetic 4-class set's 16 features as a
 * 4x4 image, an expansion, a depthwise step, a squeeze-and-excitation Multiply, a
 * Conv2DTranspose and upsampling, global max pooling. After 600 steps the test accuracy is
 * twice chance (0.25) and the loss well below its start (ln 4 = 1.39); 0.64 and 0.84 here. */
static void test_trains(void)
{
    tfc_test_write_split("vx.npy", "vy.npy", 512, 21);
    tfc_test_write_split("tx.npy", "ty.npy", 200, 22);
    const char *yaml =
        "model:\n  name: block\n  input: {shape: [16]}\n  layers:\n"
        "    - Reshape: {target_shape: [4, 4, 1]}\n"
        "    - ZeroPadding2D: {padding: 1}\n"
        "    - Conv2D: {name: expand, filters: 8, kernel_size: 1, activation: relu6}\n"
        "    - DepthwiseConv2D: {name: dw, kernel_size: 3, padding: same, depth_multiplier: 2, "
        "activation: hard_silu}\n"
        "    - GlobalAveragePooling2D: {keepdims: true}\n"
        "    - Dense: {units: 4, activation: relu}\n"
        "    - Dense: {name: scale, units: 16, activation: sigmoid}\n"
        "    - Multiply: {name: se, inputs: [dw, scale]}\n"
        "    - Cropping2D: {cropping: 1}\n"
        "    - Conv2DTranspose: {filters: 8, kernel_size: 2, strides: 2, activation: mish}\n"
        "    - UpSampling2D: {interpolation: bilinear}\n"
        "    - GlobalMaxPooling2D: {}\n"
        "    - Dense: {units: 4}\n"
        "  metrics: [accuracy]\n"
        "data:\n"
        "  train:\n"
        "    source: {type: npy, features: vx.npy, labels: vy.npy}\n"
        "    pipeline: [{shuffle: {buffer_size: 100}}, {repeat: {}}, {batch: {batch_size: 16}}]\n"
        "  test:\n"
        "    source: {type: npy, features: tx.npy, labels: ty.npy}\n"
        "    pipeline: [{batch: {batch_size: 50}}]\n"
        "optimizer: {type: adam, learning_rate: 0.01}\n"
        "max_iter: 600\ntest_interval: 600\ndisplay: 50\nseed: 3\n";
    tfc_solver_options o = {0};
    o.out_dir = tfc_test_path("trains");
    o.threads = 2;
    o.console = fopen("/dev/null", "w");
    tfc_error err;
    tfc_error_clear(&err);
    tfc_solver *s = tfc_solver_load(tfc_test_write("block.yaml", yaml, -1), &o, &err);
    if (!s) fprintf(stderr, "\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    tfc_train_result res;
    CU_ASSERT_EQUAL(tfc_solver_train(s, &res, &err), TFC_OK);
    tfc_solver_free(s);
    fclose(o.console);
    printf("\n  test accuracy %.3f, loss %.3f", res.test.metric[0], res.test.loss);
    CU_ASSERT(res.have_test && res.test.metric[0] > 0.5 && res.test.loss < 1.1);
}

/* ---- a backend without the kernels ---------------------------------------------------- */

/* A model with `layer` binds on the CPU and is refused, naming the layer, its type and the
 * op, on a CPU table whose slot `op` is NULL (a backend without that kernel). */
static void refused_without(const char *yaml, const char *op, const char *type)
{
    tfc_model *m = tfc_test_model(yaml);
    tfc_backend *be = tfc_cpu_backend_create(1);
    TFC_ASSERT(m && be);
    tfc_backend_ops lacking = *be->ops;
    const tfc_backend_ops *cpu_ops = be->ops;
    size_t slot = 0;
#define FIND_SLOT(ret, name, params)                                                     \
    if (!strcmp(#name, op)) slot = offsetof(tfc_backend_ops, name);
    TFC_BACKEND_OPS(FIND_SLOT)
#undef FIND_SLOT
    TFC_ASSERT(slot != 0);
    memset((char *)&lacking + slot, 0, sizeof(void (*)(void)));
    be->ops = &lacking;
    tfc_error err;
    tfc_error_clear(&err);
    char want[128];
    snprintf(want, sizeof want, "no kernel for %s yet (op '%s')", type, op);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'v'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, want));
    be->ops = cpu_ops;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
    tfc_model_free(m);
    tfc_backend_free(be);
}

static void test_missing_kernels_refused(void)
{
    const char *dw = "input: {shape: [5, 5, 2]}\nlayers:\n"
                     "  - DepthwiseConv2D: {name: v, kernel_size: 3}\n";
    refused_without(dw, "depthwise_forward", "DepthwiseConv2D");
    refused_without(dw, "depthwise_backward_filter", "DepthwiseConv2D");
    refused_without("input: {shape: [5, 5, 2]}\nlayers:\n"
                    "  - UpSampling2D: {name: v, interpolation: bilinear}\n",
                    "upsample_forward", "UpSampling2D");
    refused_without("input: {shape: [5, 5, 2]}\nlayers:\n  - GlobalAveragePooling2D: {}\n"
                    "  - Multiply: {name: v, inputs: [input, global_average_pooling2d]}\n",
                    "mul_reduce", "Multiply");
    const char *sep = "input: {shape: [5, 5, 2]}\nlayers:\n"
                      "  - SeparableConv2D: {name: v, filters: 3, kernel_size: 3}\n";
    refused_without(sep, "depthwise_forward", "SeparableConv2D");
    refused_without(sep, "depthwise_backward_data", "SeparableConv2D");
    /* the activation layers whose arguments no tfc activation has, and PReLU */
    const char *in = "input: {shape: [5, 4]}\nlayers:\n";
    char yaml[256];
    snprintf(yaml, sizeof yaml, "%s  - LeakyReLU: {name: v}\n", in);
    refused_without(yaml, "pact_forward", "LeakyReLU");
    snprintf(yaml, sizeof yaml, "%s  - ReLU: {name: v, threshold: 0.5}\n", in);
    refused_without(yaml, "pact_backward", "ReLU");
    snprintf(yaml, sizeof yaml, "%s  - ELU: {name: v, alpha: 2}\n", in);
    refused_without(yaml, "pact_forward", "ELU");
    snprintf(yaml, sizeof yaml, "%s  - PReLU: {name: v, shared_axes: [1]}\n", in);
    refused_without(yaml, "prelu_forward", "PReLU");
    refused_without(yaml, "prelu_backward", "PReLU");
}

/* The activation layers whose arguments are a tfc activation are that Activation layer:
 * they bind on a backend without the pact ops, fused into the layer before at inference.
 * Rescaling runs on common ops but lands CPU-first: a GPU refuses it, naming it. */
static void test_activation_layers_bind(void)
{
    const char *layers[] = {"ReLU: {name: v}", "ReLU: {name: v, max_value: 6}",
                            "ReLU: {name: v, negative_slope: 0.2}",
                            "LeakyReLU: {name: v, negative_slope: 0.2}",
                            "LeakyReLU: {name: v, alpha: 0.2}", "ELU: {name: v}",
                            "Softmax: {name: v}", "Softmax: {name: v, axis: 1}"};
    const tfc_act acts[] = {TFC_ACT_RELU, TFC_ACT_RELU6, TFC_ACT_LEAKY_RELU, TFC_ACT_LEAKY_RELU,
                            TFC_ACT_LEAKY_RELU, TFC_ACT_ELU, TFC_ACT_SOFTMAX, TFC_ACT_SOFTMAX};
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_backend_ops lacking = *be->ops;
    lacking.pact_forward = NULL, lacking.pact_backward = NULL;
    const tfc_backend_ops *cpu_ops = be->ops;
    be->ops = &lacking;
    for (size_t i = 0; i < sizeof layers / sizeof *layers; i++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [6]}\nlayers:\n  - Dense: {units: 4}\n"
                                    "  - %s\n", layers[i]);
        tfc_model *m = tfc_test_model(yaml);
        TFC_ASSERT(m != NULL);
        const tfc_layer *l = tfc_model_layer(m, 1);
        CU_ASSERT(l->pure_act && l->act == acts[i]);
        tfc_error err;
        tfc_error_clear(&err);
        CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
        tfc_model_free(m);
    }
    be->ops = cpu_ops;
    tfc_model *m = tfc_test_model("input: {shape: [6]}\nlayers:\n"
                                  "  - Rescaling: {name: v, scale: 0.5, offset: 1}\n");
    TFC_ASSERT(m != NULL);
    /* a CPU-first layer (Rescaling's flag set here, so that this holds once the flag has
     * gone from the layer itself, tools/gpu-flip.py) is refused on a device */
    tfc_layer *v = tfc_model_layer(m, 0);
    static tfc_layer_ops flagged;
    flagged = *v->ops;
    flagged.cpu_first = 1;
    v->ops = &flagged;
    tfc_error err;
    tfc_error_clear(&err);
    be->device = 0;
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'v'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "Rescaling has not run on the cpu backend"));
    be->device = -1;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* The activation layers' and Rescaling's arguments refused at their FILE:LINE:COL, saying
 * why (line 3: the layer's). */
static void test_activation_layer_errors(void)
{
    const char *bad[][3] = {
        {"[5, 6, 2]", "ReLU: {max_value: -1}", "negative max_value"},
        {"[5, 6, 2]", "ReLU: {negative_slope: -0.1}", "negative_slope"},
        {"[5, 6, 2]", "ReLU: {threshold: -1}", "threshold"},
        {"[5, 6, 2]", "LeakyReLU: {alpha: -0.5}", "must be a number >= 0"},
        {"[5, 6, 2]", "Softmax: {axis: 1}", "last axis only (-1 or 3 here)"},
        {"[5, 6, 2]", "Softmax: {axis: [1, 2]}", "axis"},
        {"[5, 6, 2]", "PReLU: {shared_axes: [2]}", "axis 2 follows an unshared axis 1"},
        {"[5, 6, 2]", "PReLU: {shared_axes: [1, 3]}", "axis 3 follows an unshared axis 2"},
        {"[5, 6, 2]", "PReLU: {shared_axes: [4]}", "axis 4 is beyond the input's 3 axes"},
        {"[5, 6, 2]", "PReLU: {alpha_constraint: nonneg}", "alpha_constraint: unknown value"},
        {"[5, 6, 2]", "Rescaling: {offset: 1}", "missing required key 'scale'"},
        {"[5, 6, 2]", "Rescaling: {scale: [0.5, 0.25]}", "scale"},
        {"[5], dtype: int32", "Rescaling: {scale: 2}", "float32 input"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml, "input: {shape: %s}\nlayers:\n  - %s\n", bad[i][0],
                 bad[i][1]);
        tfc_error err;
        tfc_error_clear(&err);
        tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), "bad.yaml", &err);
        CU_ASSERT_PTR_NULL(m);
        int found = strstr(err.text, bad[i][2]) != NULL;
        if (!found || err.line != 3)
            fprintf(stderr, "\nwanted '%s' at line 3 in: %s", bad[i][2], err.text);
        CU_ASSERT(found && err.line == 3);
        tfc_model_free(m);
    }
    /* Keras's Softmax applies a sequence's mask along the wrong axis: refused */
    const char *masked = "input: {shape: [6], dtype: int32}\nlayers:\n"
                         "  - Embedding: {input_dim: 9, output_dim: 4, mask_zero: true}\n"
                         "  - Softmax: {}\n";
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_from_string(masked, strlen(masked), "bad.yaml", &err);
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "takes a masked sequence"));
    tfc_model_free(m);
}

/* The pact ops over [-4, 4] (off the kinks) against keras.activations' formulas in double,
 * forward, and backward onto dx = 1 against central differences of the same formulas. */
static double pact_ref(const tfc_pact_desc *d, double v)
{
    if (d->elu) return v > 0 ? v : d->slope * expm1(v);
    if (d->slope != 0 && d->threshold == 0 && isinf(d->max_value)) return v >= 0 ? v : d->slope * v;
    double pos = fmin(v > d->threshold ? v : 0, d->max_value);
    return pos - d->slope * fmax(d->threshold - v, 0);
}

static void test_pact_values(void)
{
    enum { N = 401 };
    const tfc_pact_desc descs[] = {
        {0, 0.1f, 1.5f, 0.25f}, {0, 0.3f, INFINITY, 0}, {0, 0, 2.0f, 0}, {0, 0, INFINITY, 0.5f},
        {0, 0.05f, 1.0f, 0}, {1, 0.7f, INFINITY, 0}, {1, 1.0f, INFINITY, 0}};
    tfc_backend *be = tfc_cpu_backend_create(2);
    float x[N], y[N], dy[N], dx[N];
    double ry[N], rdx[N];
    for (size_t k = 0; k < sizeof descs / sizeof *descs; k++) {
        const tfc_pact_desc *d = &descs[k];
        for (int i = 0; i < N; i++) {
            x[i] = -4.0f + 8.0f * (float)i / (N - 1) + 0.0013f;
            dy[i] = 0.5f + (float)(i % 7) / 7.0f;
            dx[i] = 1;
            ry[i] = pact_ref(d, x[i]);
            rdx[i] = 1 + dy[i] * (pact_ref(d, x[i] + 1e-6) - pact_ref(d, x[i] - 1e-6)) / 2e-6;
        }
        be->ops->pact_forward(be, d, N, x, y);
        be->ops->pact_backward(be, d, N, x, dy, dx);
        double ef = max_rel(y, ry, N), eb = max_rel(dx, rdx, N);
        if (ef > 1e-6 || eb > 2e-5) fprintf(stderr, "\npact %zu: forward %.3g backward %.3g\n", k, ef, eb);
        CU_ASSERT(ef <= 1e-6 && eb <= 2e-5);
    }
    tfc_backend_free(be);
}

TFC_TEST_MAIN("vision", {"depthwise_values", test_depthwise_values},
              {"depthwise_threads", test_depthwise_threads},
              {"depthwise_isa", test_depthwise_isa},
              {"upsample_values", test_upsample_values}, {"mul_values", test_mul_values},
              {"multiply_shapes_refused", test_multiply_shapes_refused},
              {"config_errors", test_config_errors},
              {"activation_values", test_activation_values},
              {"missing_activation_refused", test_missing_activation_refused},
              {"parity_keras", test_parity_keras},
              {"parity_keras_separable", test_parity_keras_separable},
              {"parity_keras_activations", test_parity_keras_activations},
              {"parity_keras_sequence1d", test_parity_keras_sequence1d}, {"trains", test_trains},
              {"missing_kernels_refused", test_missing_kernels_refused},
              {"activation_layers_bind", test_activation_layers_bind},
              {"activation_layer_errors", test_activation_layer_errors},
              {"pact_values", test_pact_values})
