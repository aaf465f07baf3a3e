/* Conv1D and the 1-D poolings: the CPU's grouped convolution, conv1d and masked mean ops
 * (the conv1d ops' bits on any thread count), and the layers' forward values (valid, same,
 * causal, dilated, strided, grouped; each pooling; the masked average after an Embedding)
 * against loops written here from the definitions; the GPU refusal of the ops the CPU alone
 * has. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "graph/model.h"
#include "graph/model_internal.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "testutil.h"

/* ---- reference loops ------------------------------------------------------------------ */

/* The input element under output (oy, ox) and kernel tap (u, v), or -1 outside. */
static int64_t tap(const tfc_conv_desc *d, int64_t i, int oy, int ox, int u, int v, int ch)
{
    int iy = oy * d->sh - d->pad_top + u * d->dh, ix = ox * d->sw - d->pad_left + v * d->dw;
    if (iy < 0 || iy >= d->h || ix < 0 || ix >= d->w) return -1;
    return ((i * d->h + iy) * d->w + ix) * d->c + ch;
}

/* y, dx and dw of the grouped convolution, in double, straight from the definition:
 *   y[i, oy, ox, f] = sum_{u, v, ci} x[i, iy, ix, g cg + ci] w[u, v, ci, f], g = f / fg
 * dx and dw are the gradients of sum(y * dy). */
static void ref_grouped(const tfc_conv_desc *d, int groups, const float *x, const float *w,
                        const float *dy, double *y, double *dx, double *dw)
{
    const int cg = d->c / groups, fg = d->f / groups;
    memset(dx, 0, sizeof(double) * (size_t)d->n * d->h * d->w * d->c);
    memset(dw, 0, sizeof(double) * (size_t)d->kh * d->kw * cg * d->f);
    for (int64_t i = 0; i < d->n; i++)
        for (int oy = 0; oy < d->oh; oy++)
            for (int ox = 0; ox < d->ow; ox++)
                for (int f = 0; f < d->f; f++) {
                    int64_t o = ((i * d->oh + oy) * d->ow + ox) * d->f + f;
                    double s = 0;
                    for (int u = 0; u < d->kh; u++)
                        for (int v = 0; v < d->kw; v++)
                            for (int ci = 0; ci < cg; ci++) {
                                int64_t xi = tap(d, i, oy, ox, u, v, f / fg * cg + ci);
                                int64_t wi = ((int64_t)(u * d->kw + v) * cg + ci) * d->f + f;
                                if (xi < 0) continue;
                                s += (double)x[xi] * w[wi];
                                dx[xi] += (double)dy[o] * w[wi];
                                dw[wi] += (double)dy[o] * x[xi];
                            }
                    y[o] = s;
                }
}

static double max_rel(const float *got, const double *want, int64_t n)
{
    double worst = 0;
    for (int64_t k = 0; k < n; k++) {
        double e = fabs(got[k] - want[k]) / fmax(1.0, fabs(want[k]));
        if (e > worst || isnan(got[k])) worst = isnan(got[k]) ? INFINITY : e;
    }
    return worst;
}

/* A 1 x T image's convolution with Keras's padding, worked out here from its rules: mode 0
 * valid, 1 same (the odd extra step after), 2 causal ((k - 1) dil steps before, none after). */
static tfc_conv_desc keras_desc(int n, int T, int C, int k, int s, int dil, int F, int mode)
{
    tfc_conv_desc d = {.n = n, .h = 1, .w = T, .c = C, .kh = 1, .kw = k, .f = F, .sh = 1,
                       .sw = s, .dh = 1, .dw = dil, .oh = 1};
    const int span = (k - 1) * dil + 1;
    if (mode == 0) d.ow = (T - span) / s + 1;
    if (mode == 1) {
        d.ow = (T + s - 1) / s;
        int total = (d.ow - 1) * s + span - T;
        d.pad_left = total > 0 ? total / 2 : 0;
    }
    if (mode == 2) d.ow = (T + s - 1) / s, d.pad_left = span - 1;
    return d;
}

/* One case of a sweep, drawn from *r: 1..3 examples of 1..12 steps, kernel 1..4, stride or
 * dilation 1..3 (not both, as Keras), 1..max_groups groups, a padding mode (valid only where
 * the kernel fits). */
typedef struct sweep_case {
    int n, T, k, s, dil, groups, mode;
} sweep_case;

static sweep_case sweep_pick(uint32_t *r, int max_groups)
{
    int pick[8];
    for (int j = 0; j < 8; j++) pick[j] = (int)((*r = *r * 1103515245u + 12345u) >> 16);
    sweep_case c = {.n = 1 + pick[0] % 3, .T = 1 + pick[1] % 12, .k = 1 + pick[2] % 4,
                    .s = 1 + pick[3] % 3, .dil = 1 + pick[4] % 3,
                    .groups = 1 + pick[5] % max_groups, .mode = pick[6] % 3};
    if (pick[7] & 1) c.s = 1;
    else c.dil = 1;
    if (c.mode == 0 && c.T < (c.k - 1) * c.dil + 1) c.mode = 2;
    return c;
}

/* Which ops check_conv_ops runs: the grouped ones, the backend's conv ops (oneDNN or
 * im2col) or its conv1d ops (stride and dilation 1), the last two with a workspace. */
enum { OPS_GROUPED, OPS_CONV, OPS_CONV1D };

/* The convolution ops `kind` on d against the loops (kind other than OPS_GROUPED: one group).
 * Forward overwrites, backward data with assign overwrites and without it adds, backward
 * filter adds; conv1d_forward also with a bias and ReLU. */
static void check_conv_ops(tfc_backend *be, tfc_conv_desc d, int groups, int kind)
{
    const int plain = kind == OPS_CONV, direct = kind == OPS_CONV1D;
    const int64_t nx = (int64_t)d.n * d.h * d.w * d.c, ny = (int64_t)d.n * d.oh * d.ow * d.f;
    const int64_t nw = (int64_t)d.kh * d.kw * (d.c / groups) * d.f;
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *dy = malloc(ny * 4), *y = malloc(ny * 4);
    float *dx = malloc(nx * 4), *dw = malloc(nw * 4);
    double *ry = malloc(ny * 8), *rdx = malloc(nx * 8), *rdw = malloc(nw * 8);
    size_t wsb = plain ? be->ops->conv_workspace(be, &d)
                 : direct ? be->ops->conv1d_workspace(be, &d) : 0;
    void *ws = wsb ? malloc(wsb) : NULL;
    const tfc_backend_ops *op = be->ops;
    tfc_test_fill(x, nx, -1, 1, 1);
    tfc_test_fill(w, nw, -1, 1, 2);
    tfc_test_fill(dy, ny, -1, 1, 3);
    ref_grouped(&d, groups, x, w, dy, ry, rdx, rdw);
    for (int64_t k = 0; k < ny; k++) y[k] = NAN; /* overwritten */
    if (plain) op->conv_forward(be, &d, x, w, NULL, NULL, NULL, TFC_ACT_LINEAR, y, NULL, NULL, ws);
    else if (direct) op->conv1d_forward(be, &d, x, w, NULL, 0, y, ws);
    else op->grouped_conv_forward(be, &d, groups, x, w, y);
    CU_ASSERT(max_rel(y, ry, ny) < 1e-5);
    if (direct) { /* y = max(conv + bias, 0) */
        float bias[64];
        TFC_ASSERT(d.f <= 64);
        tfc_test_fill(bias, d.f, -1, 1, 4);
        for (int64_t k = 0; k < ny; k++) ry[k] = fmax(ry[k] + bias[k % d.f], 0.0);
        op->conv1d_forward(be, &d, x, w, bias, 1, y, ws);
        CU_ASSERT(max_rel(y, ry, ny) < 1e-5);
    }
    for (int64_t k = 0; k < nx; k++) dx[k] = NAN; /* assign: never read */
    if (plain) op->conv_backward_data(be, &d, dy, w, dx, 1, ws);
    else if (direct) op->conv1d_backward_data(be, &d, dy, w, dx, 1, ws);
    else op->grouped_conv_backward_data(be, &d, groups, dy, w, dx, 1);
    CU_ASSERT(max_rel(dx, rdx, nx) < 1e-5);
    for (int64_t k = 0; k < nx; k++) rdx[k] *= 2;
    if (plain) op->conv_backward_data(be, &d, dy, w, dx, 0, ws);
    else if (direct) op->conv1d_backward_data(be, &d, dy, w, dx, 0, ws);
    else op->grouped_conv_backward_data(be, &d, groups, dy, w, dx, 0);
    CU_ASSERT(max_rel(dx, rdx, nx) < 1e-5);
    for (int64_t k = 0; k < nw; k++) dw[k] = 1.0f, rdw[k] += 1.0;
    if (plain) op->conv_backward_filter(be, &d, x, dy, dw, ws);
    else if (direct) op->conv1d_backward_filter(be, &d, x, dy, dw, ws);
    else op->grouped_conv_backward_filter(be, &d, groups, x, dy, dw);
    CU_ASSERT(max_rel(dw, rdw, nw) < 1e-5);
    free(x), free(w), free(dy), free(y), free(dx), free(dw), free(ry), free(rdx), free(rdw);
    free(ws);
}

static void check_grouped_op(tfc_backend *be, tfc_conv_desc d, int groups)
{
    check_conv_ops(be, d, groups, OPS_GROUPED);
}

static void test_grouped_conv_op(void)
{
    tfc_backend *be = tfc_cpu_backend_create(2);
    TFC_ASSERT(be != NULL);
    /* causal, dilated: (k - 1) d = 4 steps before, none after */
    check_grouped_op(be, (tfc_conv_desc){.n = 3, .h = 1, .w = 11, .c = 6, .kh = 1, .kw = 3,
                                         .f = 4, .sh = 1, .sw = 1, .dh = 1, .dw = 2,
                                         .pad_left = 4, .oh = 1, .ow = 11}, 2);
    /* same with stride 2: the extra step after */
    check_grouped_op(be, (tfc_conv_desc){.n = 2, .h = 1, .w = 10, .c = 6, .kh = 1, .kw = 4,
                                         .f = 9, .sh = 1, .sw = 2, .dh = 1, .dw = 1,
                                         .pad_left = 1, .oh = 1, .ow = 5}, 3);
    /* depthwise-like (one channel per group) and a 2-D image with padding on both axes */
    check_grouped_op(be, (tfc_conv_desc){.n = 2, .h = 5, .w = 4, .c = 4, .kh = 3, .kw = 2,
                                         .f = 8, .sh = 2, .sw = 1, .dh = 1, .dw = 1,
                                         .pad_top = 1, .pad_left = 0, .oh = 3, .ow = 3}, 4);
    /* depthwise (one channel per group and filter, cpu_conv1d.c's own loops), more groups
     * than one iteration of the filter gradient takes (16) */
    check_grouped_op(be, keras_desc(3, 9, 20, 3, 1, 2, 20, 2), 20);
    check_grouped_op(be, keras_desc(2, 10, 18, 4, 2, 1, 36, 1), 18);
    /* one group: the plain convolution */
    check_grouped_op(be, (tfc_conv_desc){.n = 2, .h = 1, .w = 7, .c = 3, .kh = 1, .kw = 2,
                                         .f = 2, .sh = 1, .sw = 3, .dh = 1, .dw = 1,
                                         .oh = 1, .ow = 2}, 1);
    /* a sweep of 1 x steps images with Keras's padding (keras_desc): steps 1..12, kernel
     * 1..4, stride or dilation 1..3, 1..3 groups, valid, same or causal; one group also
     * through the backend's conv ops (causal: padding before the sequence only), and at
     * stride and dilation 1 through its conv1d ops */
    uint32_t r = 777;
    for (int i = 0; i < 80; i++) {
        sweep_case c = sweep_pick(&r, 3);
        tfc_conv_desc d = keras_desc(c.n, c.T, 2 * c.groups, c.k, c.s, c.dil, 3 * c.groups,
                                     c.mode);
        check_conv_ops(be, d, c.groups, OPS_GROUPED);
        if (c.groups == 1) check_conv_ops(be, d, 1, OPS_CONV);
        if (c.groups == 1 && c.s == 1 && c.dil == 1) check_conv_ops(be, d, 1, OPS_CONV1D);
    }
    tfc_backend_free(be);
}

/* y, dx (accumulated onto ones) and dw (onto ones) of the conv1d ops on `threads` threads,
 * into out (ny + nx + nw floats) */
static void conv1d_ops_on(int threads, const tfc_conv_desc *d, const float *x, const float *w,
                          const float *dy, float *out)
{
    tfc_backend *be = tfc_cpu_backend_create(threads);
    TFC_ASSERT(be != NULL);
    const int64_t nx = (int64_t)d->n * d->w * d->c, ny = (int64_t)d->n * d->ow * d->f;
    const int64_t nw = (int64_t)d->kw * d->c * d->f;
    void *ws = malloc(be->ops->conv1d_workspace(be, d));
    float *y = out, *dx = y + ny, *dw = dx + nx;
    for (int64_t k = 0; k < nx + nw; k++) dx[k] = 1.0f;
    be->ops->conv1d_forward(be, d, x, w, w, 1, y, ws);
    be->ops->conv1d_backward_data(be, d, dy, w, dx, 0, ws);
    be->ops->conv1d_backward_filter(be, d, x, dy, dw, ws);
    free(ws);
    tfc_backend_free(be);
}

/* The conv1d ops at widths past one 16-filter panel and one 6-row tile, every padding, an
 * even kernel (same: the extra step after), on one thread and three; then the same bits
 * from 1, 2 and 3 threads on the benchmark's layer shape. */
static void test_conv1d_op(void)
{
    for (int threads = 1; threads <= 3; threads += 2) {
        tfc_backend *be = tfc_cpu_backend_create(threads);
        TFC_ASSERT(be != NULL);
        for (int mode = 0; mode < 3; mode++) {
            check_conv_ops(be, keras_desc(5, 23, 20, 5, 1, 1, 40, mode), 1, OPS_CONV1D);
            check_conv_ops(be, keras_desc(4, 9, 33, 4, 1, 1, 17, mode), 1, OPS_CONV1D);
        }
        tfc_backend_free(be);
    }
    const tfc_conv_desc d = keras_desc(8, 64, 128, 5, 1, 1, 128, 1);
    const int64_t nx = (int64_t)d.n * d.w * d.c, ny = (int64_t)d.n * d.ow * d.f;
    const int64_t nw = (int64_t)d.kw * d.c * d.f, all = nx + ny + nw;
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *dy = malloc(ny * 4);
    float *one = malloc(all * 4), *other = malloc(all * 4);
    tfc_test_fill(x, nx, -1, 1, 5);
    tfc_test_fill(w, nw, -1, 1, 6);
    tfc_test_fill(dy, ny, -1, 1, 7);
    conv1d_ops_on(1, &d, x, w, dy, one);
    for (int threads = 2; threads <= 3; threads++) {
        conv1d_ops_on(threads, &d, x, w, dy, other);
        CU_ASSERT(memcmp(one, other, (size_t)all * 4) == 0);
    }
    free(x), free(w), free(dy), free(one), free(other);
}

static void test_masked_mean_op(void)
{
    tfc_backend *be = tfc_cpu_backend_create(2);
    TFC_ASSERT(be != NULL);
    enum { N = 3, T = 5, C = 4 };
    float x[N * T * C], dy[N * C], y[N * C], dx[N * T * C];
    const float mask[N * T] = {1, 1, 0, 1, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0};
    tfc_test_fill(x, N * T * C, -1, 1, 4);
    tfc_test_fill(dy, N * C, -1, 1, 5);
    be->ops->masked_mean_forward(be, N, T, C, x, mask, y);
    for (int i = 0; i < 2; i++) {
        double kept = i == 0 ? 3 : 5;
        for (int c = 0; c < C; c++) {
            double s = 0;
            for (int t = 0; t < T; t++) s += mask[i * T + t] * x[(i * T + t) * C + c];
            CU_ASSERT_DOUBLE_EQUAL(y[i * C + c], s / kept, 1e-6);
        }
    }
    for (int c = 0; c < C; c++) CU_ASSERT(isnan(y[2 * C + c])); /* 0 / 0, as Keras */
    for (int k = 0; k < N * T * C; k++) dx[k] = NAN;
    be->ops->masked_mean_backward(be, N, T, C, dy, mask, dx, 1);
    for (int k = 0; k < N * T * C; k++) dx[k] += 0.5f; /* accumulate onto it */
    be->ops->masked_mean_backward(be, N, T, C, dy, mask, dx, 0);
    for (int i = 0; i < 2; i++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                double g = mask[i * T + t] * dy[i * C + c] / (i == 0 ? 3 : 5);
                CU_ASSERT_DOUBLE_EQUAL(dx[(i * T + t) * C + c], 2 * g + 0.5, 1e-6);
            }
    for (int k = 2 * T * C; k < N * T * C; k++) CU_ASSERT_EQUAL(dx[k], 0.5f);
    tfc_backend_free(be);
}

/* ---- the layers through a model -------------------------------------------------------- */

/* A model bound on the CPU for `batch` examples, weights of seed 5. */
static tfc_model *bound_model(const char *yaml, int batch, tfc_backend **be)
{
    tfc_model *m = tfc_test_model(yaml);
    *be = tfc_cpu_backend_create(2);
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(m && *be && tfc_model_bind(m, *be, batch, &err) == TFC_OK &&
               tfc_model_init_weights(m, 5, &err) == TFC_OK);
    return m;
}

/* The output of a forward pass (training or not) of x, malloc'd. */
static float *forward(tfc_model *m, const void *x, int batch, int training)
{
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_model_forward(m, x, batch, training, 1, 1, &err), TFC_OK);
    const tfc_layer *last = tfc_model_layer(m, tfc_model_nlayers(m) - 1);
    float *y = malloc((size_t)batch * (size_t)tfc_layer_out_numel(last) * 4);
    tfc_model_get_output(m, y);
    return y;
}

/* A layer's parameter p, downloaded (malloc'd). */
static float *param(tfc_model *m, int layer, int p)
{
    tfc_param *pr = &tfc_model_layer(m, layer)->params[p];
    float *h = malloc((size_t)pr->numel * 4);
    tfc_model_param_download(m, pr, h);
    return h;
}

/* Conv1D {args} on (T, C) sequences of a batch of 3 against the loops (keras_desc's
 * padding, mode 0 valid, 1 same, 2 causal). */
static void check_conv1d(const char *args, int T, int C, int k, int s, int dil, int groups,
                         int F, int mode)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "input: {shape: [%d, %d]}\nlayers:\n  - Conv1D: {%s, "
             "bias_initializer: random_uniform}\n", T, C, args);
    tfc_backend *be;
    const int n = 3;
    tfc_model *m = bound_model(yaml, n, &be);
    tfc_conv_desc d = keras_desc(n, T, C, k, s, dil, F, mode);
    CU_ASSERT_EQUAL(tfc_model_layer(m, 0)->out_shape.dim[0], d.ow);
    float *x = malloc((size_t)n * T * C * 4), *w = param(m, 0, 0), *b = param(m, 0, 1);
    tfc_test_fill(x, (int64_t)n * T * C, -1, 1, 6);
    const int64_t ny = (int64_t)n * d.ow * F;
    float *dy = calloc((size_t)ny, 4);
    double *ry = malloc((size_t)ny * 8), *rdx = malloc((size_t)n * T * C * 8);
    double *rdw = malloc((size_t)k * C / groups * F * 8);
    ref_grouped(&d, groups, x, w, dy, ry, rdx, rdw);
    for (int64_t q = 0; q < ny; q++) ry[q] += b[q % F];
    for (int training = 0; training < 2; training++) {
        float *y = forward(m, x, n, training);
        CU_ASSERT(max_rel(y, ry, ny) < 1e-5);
        free(y);
    }
    free(x), free(w), free(b), free(dy), free(ry), free(rdx), free(rdw);
    tfc_model_free(m);
    tfc_backend_free(be);
}

static void test_conv1d_values(void)
{
    check_conv1d("filters: 3, kernel_size: 3", 8, 2, 3, 1, 1, 1, 3, 0);
    check_conv1d("filters: 4, kernel_size: 4, strides: 3", 11, 3, 4, 3, 1, 1, 4, 0);
    check_conv1d("filters: 2, kernel_size: 4, strides: 2, padding: same", 9, 3, 4, 2, 1, 1, 2, 1);
    check_conv1d("filters: 2, kernel_size: 3, dilation_rate: 3, padding: same", 10, 2, 3, 1, 3,
                 1, 2, 1);
    check_conv1d("filters: 3, kernel_size: 3, dilation_rate: 2, padding: causal", 9, 2, 3, 1, 2,
                 1, 3, 2);
    check_conv1d("filters: 3, kernel_size: 2, strides: 2, padding: causal", 9, 4, 2, 2, 1, 1, 3,
                 2);
    check_conv1d("filters: 6, kernel_size: 3, groups: 3, dilation_rate: 2, padding: causal", 10,
                 6, 3, 1, 2, 3, 6, 2);
    check_conv1d("filters: 4, kernel_size: 2, groups: 2, strides: 3, padding: same", 10, 4, 2, 3,
                 1, 2, 4, 1);
    check_conv1d("filters: 4, kernel_size: 3, groups: 4", 7, 4, 3, 1, 1, 4, 4, 0);
    /* a sweep (sweep_pick; T = 1 and k > T included) with one or two groups */
    static const char *const modes[] = {"valid", "same", "causal"};
    uint32_t r = 12345;
    for (int i = 0; i < 60; i++) {
        sweep_case c = sweep_pick(&r, 2);
        char args[160];
        snprintf(args, sizeof args, "filters: %d, kernel_size: %d, strides: %d, dilation_rate: %d, "
                 "groups: %d, padding: %s", 2 * c.groups, c.k, c.s, c.dil, c.groups,
                 modes[c.mode]);
        check_conv1d(args, c.T, 2 * c.groups, c.k, c.s, c.dil, c.groups, 2 * c.groups, c.mode);
    }
    /* Keras's configs write tuples of one */
    check_conv1d("filters: 3, kernel_size: [3], strides: [2], dilation_rate: [1], padding: same",
                 9, 2, 3, 2, 1, 1, 3, 1);
}

/* The window of output o: steps [lo, hi) inside the sequence. */
static void window(int o, int k, int s, int pad, int T, int *lo, int *hi)
{
    *lo = o * s - pad;
    *hi = *lo + k;
    if (*lo < 0) *lo = 0;
    if (*hi > T) *hi = T;
}

/* MaxPooling1D / AveragePooling1D {args} on (T, C) against the loops (same: Keras's
 * padding with the extra step after; padded steps neither win nor count). */
static void check_pool1d(const char *type, const char *args, int T, int C, int k, int s,
                         int same)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "input: {shape: [%d, %d]}\nlayers:\n  - %s: {%s}\n", T, C,
             type, args);
    tfc_backend *be;
    const int n = 2, is_max = type[0] == 'M';
    tfc_model *m = bound_model(yaml, n, &be);
    int ow = same ? (T + s - 1) / s : (T - k) / s + 1;
    int total = (ow - 1) * s + k - T, pad = same && total > 0 ? total / 2 : 0;
    CU_ASSERT_EQUAL(tfc_model_layer(m, 0)->out_shape.dim[0], ow);
    float x[2 * 16 * 4];
    tfc_test_fill(x, (int64_t)n * T * C, -1, 1, 7);
    double want[2 * 16 * 4];
    for (int i = 0; i < n; i++)
        for (int o = 0; o < ow; o++)
            for (int c = 0; c < C; c++) {
                int lo, hi;
                window(o, k, s, pad, T, &lo, &hi);
                double acc = is_max ? -INFINITY : 0;
                for (int t = lo; t < hi; t++) {
                    double v = x[(i * T + t) * C + c];
                    acc = is_max ? fmax(acc, v) : acc + v / (hi - lo);
                }
                want[(i * ow + o) * C + c] = acc;
            }
    float *y = forward(m, x, n, 1);
    CU_ASSERT(max_rel(y, want, (int64_t)n * ow * C) < 1e-6);
    free(y);
    tfc_model_free(m);
    tfc_backend_free(be);
}

static void test_pooling1d_values(void)
{
    check_pool1d("MaxPooling1D", "pool_size: 3, strides: 2, padding: same", 10, 3, 3, 2, 1);
    check_pool1d("MaxPooling1D", "pool_size: 3", 11, 2, 3, 3, 0);
    check_pool1d("AveragePooling1D", "pool_size: 4, strides: 3, padding: same", 11, 4, 4, 3, 1);
    check_pool1d("AveragePooling1D", "pool_size: 2, data_format: channels_last", 9, 2, 2, 2, 0);
    check_pool1d("MaxPooling1D", "pool_size: 1, strides: 2", 7, 2, 1, 2, 0);
    check_pool1d("AveragePooling1D", "pool_size: [3], strides: [1], padding: same", 8, 2, 3, 1, 1);
}

/* Embedding(mask_zero) -> GlobalAveragePooling1D / GlobalMaxPooling1D: the mean of the
 * unmasked rows; the max over every step, padding included (Keras 3 ignores the mask
 * there); keepdims gives (1, C). */
static void test_global_pooling1d_masked(void)
{
    const char *yaml = "input: {shape: [5], dtype: int32}\nlayers:\n"
                       "  - Embedding: {input_dim: 7, output_dim: 3, mask_zero: true}\n"
                       "  - GlobalAveragePooling1D: {}\n"
                       "  - GlobalMaxPooling1D: {name: mx, keepdims: true, inputs: embedding}\n"
                       "  - Flatten: {}\n"
                       "  - Concatenate: {inputs: [global_average_pooling1d, flatten]}\n";
    tfc_backend *be;
    const int n = 3;
    tfc_model *m = bound_model(yaml, n, &be);
    CU_ASSERT_EQUAL(tfc_model_layer(m, 2)->out_shape.ndim, 2);
    const int32_t ids[3 * 5] = {3, 1, 0, 0, 0, 2, 2, 5, 6, 1, 0, 4, 0, 6, 0};
    float *table = param(m, 0, 0);
    for (int training = 0; training < 2; training++) {
        float *y = forward(m, ids, n, training);
        for (int i = 0; i < n; i++)
            for (int c = 0; c < 3; c++) {
                double sum = 0, mx = -INFINITY;
                int kept = 0;
                for (int t = 0; t < 5; t++) {
                    double v = table[ids[i * 5 + t] * 3 + c];
                    mx = fmax(mx, v);
                    if (ids[i * 5 + t]) sum += v, kept++;
                }
                CU_ASSERT_DOUBLE_EQUAL(y[i * 6 + c], sum / kept, 1e-6);
                CU_ASSERT_DOUBLE_EQUAL(y[i * 6 + 3 + c], mx, 0);
            }
        free(y);
    }
    free(table);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* Configuration errors name the argument. */
static void expect_error(const char *layer, const char *needle)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "input: {shape: [8, 4]}\nlayers:\n  - %s\n", layer);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), "m.yaml", &err);
    CU_ASSERT_PTR_NULL(m);
    if (!strstr(err.text, needle)) fprintf(stderr, "\nexpected '%s' in: %s\n", needle, err.text);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, needle));
    tfc_model_free(m);
}

static void test_conv1d_errors(void)
{
    expect_error("Conv1D: {filters: 2, kernel_size: 3, strides: 2, dilation_rate: 2}",
                 "strides > 1 is not supported with dilation_rate > 1");
    expect_error("Conv1D: {filters: 3, kernel_size: 3, groups: 2}",
                 "filters (3) must be divisible by groups (2)");
    expect_error("Conv1D: {filters: 6, kernel_size: 3, groups: 3}",
                 "4 channels must be divisible by groups (3)");
    expect_error("Conv1D: {filters: 2, kernel_size: 3, data_format: channels_first}",
                 "data_format: channels_first is not supported");
    expect_error("Conv1D: {filters: 2, kernel_size: 3, kernel_constraint: {type: max_norm, "
                 "axis: 1}}", "kernel_constraint: axis: tfc takes a leading run");
    expect_error("Conv1D: {filters: 2, kernel_size: 3, bias_constraint: [non_neg]}",
                 "bias_constraint: expected a constraint");
    expect_error("Conv1D: {filters: 2, kernel_size: 9}", "shorter than the kernel");
    expect_error("Conv1D: {filters: 2, kernel_size: 2, padding: full}", "causal");
    expect_error("GlobalMaxPooling1D: {data_format: channels_first}",
                 "data_format: channels_first is not supported");
    expect_error("MaxPooling1D: {pool_size: 9}", "shorter than the window");
    expect_error("Flatten: {}\n  - Conv1D: {filters: 2, kernel_size: 3}",
                 "needs an input of shape (steps, channels)");
    expect_error("Conv1D: {filters: 2, kernel_size: [3, 3]}",
                 "kernel_size: expected an integer or a list of one (a 1-D window), found 2");
    expect_error("MaxPooling1D: {strides: [1, 2]}", "strides: expected an integer or a list");
    /* null is Keras's None: accepted */
    tfc_model *m = tfc_test_model("input: {shape: [8, 4]}\nlayers:\n  - Conv1D: {filters: 2, "
                                  "kernel_size: 3, kernel_regularizer: null}\n");
    CU_ASSERT_PTR_NOT_NULL(m);
    tfc_model_free(m);
}

/* The layer ops a backend may lack: a backend without them (the GPU's table once did)
 * refuses a Conv1D with groups > 1 and a masked GlobalAveragePooling1D at bind, naming the
 * layer and the op, and binds the same layers where they need no such op. */
static void expect_refused(const char *yaml, const char *op, int refused)
{
    tfc_model *m = tfc_test_model(yaml);
    tfc_backend *be = tfc_cpu_backend_create(1);
    TFC_ASSERT(m && be);
    tfc_backend_ops lacking = *be->ops;
    const tfc_backend_ops *cpu_ops = be->ops;
    lacking.grouped_conv_forward = NULL;
    lacking.grouped_conv_backward_data = NULL;
    lacking.grouped_conv_backward_filter = NULL;
    lacking.masked_mean_forward = NULL;
    lacking.masked_mean_backward = NULL;
    lacking.conv1d_workspace = NULL; /* a Conv1D then takes the conv ops */
    lacking.conv1d_forward = NULL;
    lacking.conv1d_backward_data = NULL;
    lacking.conv1d_backward_filter = NULL;
    be->ops = &lacking;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), refused ? TFC_ERR_CONFIG : TFC_OK);
    if (refused) {
        char want[96];
        snprintf(want, sizeof want, "(op '%s')", op);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'x'"));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, want));
    }
    tfc_model_unbind(m);
    be->ops = cpu_ops;
    tfc_model_free(m);
    tfc_backend_free(be);
}

static void test_gpu_refusal(void)
{
    expect_refused("input: {shape: [8, 4]}\nlayers:\n  - Conv1D: {name: x, filters: 2, "
                   "kernel_size: 3, groups: 2}\n", "grouped_conv_forward", 1);
    expect_refused("input: {shape: [8, 4]}\nlayers:\n  - Conv1D: {name: x, filters: 2, "
                   "kernel_size: 3, padding: causal, dilation_rate: 2}\n", NULL, 0);
    expect_refused("input: {shape: [6], dtype: int32}\nlayers:\n  - Embedding: {input_dim: 9, "
                   "output_dim: 3, mask_zero: true}\n  - GlobalAveragePooling1D: {name: x}\n"
                   "  - Dense: {units: 2}\n", "masked_mean_forward", 1);
    expect_refused("input: {shape: [6], dtype: int32}\nlayers:\n  - Embedding: {input_dim: 9, "
                   "output_dim: 3}\n  - GlobalAveragePooling1D: {name: x}\n"
                   "  - Dense: {units: 2}\n", NULL, 0);
}

/* At inference a Conv1D applies the BatchNormalization, the residual Add, the ReLU and the
 * pooling that alone read its output (graph.c's chains; groups > 1 op by op in conv1d.c's
 * forward_fused): the same values, to float rounding, as every layer on its own
 * (TFC_FUSE=0). Random normalisation statistics, the same in both runs. */
static void test_fused_chains(void)
{
    const char *yaml =
        "input: {shape: [12, 4]}\nlayers:\n"
        "  - Conv1D: {name: a, filters: 4, kernel_size: 3, groups: 2, padding: causal}\n"
        "  - BatchNormalization: {}\n  - Activation: {activation: relu}\n"
        "  - MaxPooling1D: {pool_size: 2}\n"
        "  - Conv1D: {name: b, filters: 4, kernel_size: 2, padding: same, groups: 2}\n"
        "  - BatchNormalization: {name: n2}\n"
        "  - Add: {inputs: [n2, max_pooling1d]}\n  - Activation: {name: r2, activation: relu}\n"
        "  - Conv1D: {name: c, filters: 6, kernel_size: 2, groups: 2, dilation_rate: 2,"
        " padding: causal, activation: relu}\n"
        "  - AveragePooling1D: {pool_size: 3, padding: same}\n"
        "  - GlobalMaxPooling1D: {}\n";
    const int n = 3;
    float x[3 * 12 * 4], *y[2];
    tfc_test_fill(x, 3 * 12 * 4, -1, 1, 8);
    int chains[2] = {0, 0};
    for (int run = 0; run < 2; run++) {
        if (run) setenv("TFC_FUSE", "0", 1);
        tfc_backend *be;
        tfc_model *m = bound_model(yaml, n, &be);
        if (run) unsetenv("TFC_FUSE");
        for (int i = 0; i < tfc_model_nlayers(m); i++) {
            chains[run] += m->bound[i].chain_end != i;
            tfc_layer *l = tfc_model_layer(m, i);
            for (int p = 0; p < l->nparams; p++) { /* statistics and weights, seed 9 */
                float *v = malloc((size_t)l->params[p].numel * 4);
                tfc_test_fill(v, l->params[p].numel, 0.5f, 1.5f, 9 + i * 8 + p);
                if (strcmp(l->params[p].name, "moving_variance"))
                    for (int64_t k = 0; k < l->params[p].numel; k++) v[k] -= 1.0f;
                tfc_model_param_upload(m, &l->params[p], v);
                free(v);
            }
        }
        y[run] = forward(m, x, n, 0);
        tfc_model_free(m);
        tfc_backend_free(be);
    }
    CU_ASSERT_EQUAL(chains[0], 3); /* a -> pooling, b -> r2, c -> pooling */
    CU_ASSERT_EQUAL(chains[1], 0);
    double want[3 * 6];
    for (int k = 0; k < 3 * 6; k++) want[k] = y[1][k];
    CU_ASSERT(max_rel(y[0], want, 3 * 6) < 1e-5);
    free(y[0]), free(y[1]);
}

/* ---- Keras parity ---------------------------------------------------------------------- */

/* The cases of tests/ref/keras_conv1d.py: its YAML, Keras's weights under tfc's names
 * (loaded strictly, as a user would) and Keras's output for its input batch. */
static const char *const keras_cases[] = {
    "conv1d_valid_stride", "conv1d_same", "conv1d_causal_dilated", "conv1d_groups",
    "pooling1d", "pooling1d_global", "embedding_conv1d", "embedding_masked_average",
    "embedding_mask_conv_average", "embedding_mask_max"};

/* The largest |tfc - keras| / max(0.1, |keras|) of one case (and its absolute error). The
 * floor: outputs are sums of O(1) terms that XLA and tfc add in different orders, so they
 * differ by a few float32 ulps of the terms (~1e-7) however small the sum; an output near 0
 * (conv1d_groups has one of 0.008) would make that look like a relative 3e-5. */
static double keras_case(const char *name, double *abs_err)
{
    char path[256];
    snprintf(path, sizeof path, "tests/ref/conv1d/%s.yaml", name);
    char *yaml = tfc_test_read(path, NULL);
    TFC_ASSERT(yaml != NULL);
    snprintf(path, sizeof path, "tests/ref/conv1d/%s.io.safetensors", name);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *io = tfc_st_open(path, &err);
    TFC_ASSERT(io != NULL);
    const tfc_st_tensor *x = tfc_st_find(io, "x"), *y = tfc_st_find(io, "y");
    TFC_ASSERT(x && y);
    const int batch = (int)x->shape.dim[0];
    tfc_backend *be;
    tfc_model *m = bound_model(yaml, batch, &be);
    snprintf(path, sizeof path, "tests/ref/conv1d/%s.safetensors", name);
    CU_ASSERT_EQUAL_FATAL(tfc_model_load_weights(m, path, NULL, &err), TFC_OK);
    void *xh = malloc(x->nbytes);
    memcpy(xh, x->data, x->nbytes); /* int32 ids or float32, as the model declares */
    float *want = malloc((size_t)y->numel * 4);
    tfc_st_tensor_to_f32(y, want);
    double worst = 0;
    *abs_err = 0;
    for (int training = 0; training < 2; training++) {
        float *got = forward(m, xh, batch, training);
        for (int64_t k = 0; k < y->numel; k++) {
            double e = fabs((double)got[k] - want[k]);
            *abs_err = fmax(*abs_err, e);
            worst = fmax(worst, isnan(got[k]) ? INFINITY : e / fmax(0.1, fabs(want[k])));
        }
        free(got);
    }
    free(xh), free(want), free(yaml);
    tfc_st_close(io);
    tfc_model_free(m);
    tfc_backend_free(be);
    return worst;
}

static void test_keras_parity(void)
{
    for (size_t i = 0; i < sizeof keras_cases / sizeof *keras_cases; i++) {
        double abs_err, rel = keras_case(keras_cases[i], &abs_err);
        if (rel >= 1e-5 || getenv("TFC_VERBOSE"))
            fprintf(stderr, "\n%s: max relative difference %.3g, absolute %.3g", keras_cases[i],
                    rel, abs_err);
        CU_ASSERT(rel < 1e-5);
    }
}

/* ---- Conv1DTranspose, SeparableConv1D, DepthwiseConv1D ---------------------------------- */

/* Keras parity (tests/ref/keras_conv1d_variants.py): outputs, the input's and every weight's
 * gradient of an MSE loss, weights loaded and written under Keras's paths. Strides, dilation
 * (at once for the depthwise ones, as Keras's JAX backend allows), valid and same padding,
 * output_padding, depth_multiplier, no bias; all three in one model. */
static void test_variants_keras_parity(void)
{
    static const char *const names[] = {"transpose", "transpose_dilated", "separable",
                                        "depthwise", "chain", NULL};
    static const tfc_keras_parity p = {.dir = "conv1d_variants", .tol = 1e-5};
    tfc_test_keras_cases(&p, names);
}

static void test_variants_errors(void)
{
    expect_error("Conv1DTranspose: {filters: 2, kernel_size: 3, strides: 2, dilation_rate: 2}",
                 "strides > 1 with dilation_rate > 1 is not supported");
    expect_error("Conv1DTranspose: {filters: 2, kernel_size: 3, strides: 2, output_padding: 2}",
                 "m.yaml:3:79: error: layers[0].Conv1DTranspose.output_padding: output_padding 2 "
                 "must be less than the stride 2");
    expect_error("Conv1DTranspose: {filters: 2, kernel_size: 3, output_padding: [0, 0]}",
                 "output_padding: expected an int or a list of one");
    expect_error("Conv1DTranspose: {filters: 2, kernel_size: 3, padding: causal}",
                 "Conv1DTranspose.padding");
    expect_error("Conv1DTranspose: {filters: 2, kernel_size: 3, data_format: channels_first}",
                 "data_format: channels_first is not supported");
    expect_error("SeparableConv1D: {filters: 2, kernel_size: [3, 3]}",
                 "kernel_size: expected an integer or a list of one (a 1-D window), found 2");
    expect_error("SeparableConv1D: {filters: 2, kernel_size: 3, strides: [1, 2]}",
                 "strides: expected an integer or a list of one");
    expect_error("SeparableConv1D: {filters: 2, kernel_size: 3, padding: causal}",
                 "SeparableConv1D.padding");
    expect_error("SeparableConv1D: {filters: 2, kernel_size: 9}", "smaller than the 1x9 kernel");
    expect_error("SeparableConv1D: {filters: 2, kernel_size: 3, kernel_regularizer: l2}",
                 "kernel_regularizer");
    expect_error("DepthwiseConv1D: {kernel_size: 3, dilation_rate: [2, 1]}",
                 "dilation_rate: expected an integer or a list of one");
    expect_error("DepthwiseConv1D: {kernel_size: 3, data_format: channels_first}",
                 "data_format: channels_first is not supported");
    expect_error("DepthwiseConv1D: {kernel_size: 3, depth_multiplier: 0}", "depth_multiplier");
    expect_error("DepthwiseConv1D: {kernel_size: 4, dilation_rate: 3}",
                 "smaller than the 1x4 kernel (dilation 1x3)");
    expect_error("Flatten: {}\n  - DepthwiseConv1D: {kernel_size: 3}",
                 "needs an input of shape (steps, channels)");
    expect_error("Reshape: {target_shape: [2, 4, 4]}\n  - Conv1DTranspose: {filters: 2, "
                 "kernel_size: 3}", "needs an input of shape (steps, channels)");
}

/* A backend other than the CPU (a CPU backend posing as device 0) refuses each while it is
 * CPU-first, naming the layer and its type; the flags say which, so this holds after the
 * layer-op flip too. */
static void test_variants_device(void)
{
    static const char *const layers[] = {
        "Conv1DTranspose: {name: v, filters: 2, kernel_size: 3}",
        "SeparableConv1D: {name: v, filters: 2, kernel_size: 3}",
        "DepthwiseConv1D: {name: v, kernel_size: 3}"};
    tfc_backend *be = tfc_cpu_backend_create(1);
    for (size_t i = 0; i < sizeof layers / sizeof *layers; i++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [8, 4]}\nlayers:\n  - %s\n", layers[i]);
        tfc_model *m = tfc_test_model(yaml);
        TFC_ASSERT(m && be);
        const tfc_layer_ops *ops = tfc_model_layer(m, 0)->ops;
        tfc_error err;
        tfc_error_clear(&err);
        be->device = 0;
        tfc_status st = tfc_model_bind(m, be, 2, &err);
        be->device = -1;
        CU_ASSERT_EQUAL(st, ops->cpu_first ? TFC_ERR_CONFIG : TFC_OK);
        if (ops->cpu_first) {
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'v'"));
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, ops->type));
        }
        tfc_model_free(m);
    }
    tfc_backend_free(be);
}

TFC_TEST_MAIN("conv1d", {"grouped_conv_op", test_grouped_conv_op}, {"conv1d_op", test_conv1d_op},
              {"masked_mean_op", test_masked_mean_op}, {"conv1d_values", test_conv1d_values},
              {"pooling1d_values", test_pooling1d_values},
              {"global_pooling1d_masked", test_global_pooling1d_masked},
              {"conv1d_errors", test_conv1d_errors}, {"gpu_refusal", test_gpu_refusal},
              {"fused_chains", test_fused_chains}, {"keras_parity", test_keras_parity},
              {"variants_keras_parity", test_variants_keras_parity},
              {"variants_errors", test_variants_errors},
              {"variants_device", test_variants_device})
