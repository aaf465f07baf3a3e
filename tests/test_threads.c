/* Thread sweep of the CPU backend. Ops run on sizes above the parallel threshold that no
 * thread count divides (40009 rows, prime) at 1, 2, 3 and 7 threads: the elementwise ones
 * must agree with 1 thread to the last bits, the sums with a double reference.
 * Then a training step of a CNN and of an LSTM at 1 vs 3 (and 7) threads: gradients within
 * 1e-5 relative, and bit-identical when the same thread count runs twice. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "cpu/cpu.h"
#include "graph/model.h"
#include "gradcheck.h"
#include "testutil.h"

static const int sweep[] = {1, 2, 3, 7};
#define NSWEEP (int)(sizeof sweep / sizeof *sweep)

enum { ROWS = 40009, COLS = 5 };

/* Largest |a - b| over max(|b|) (0 when b is all zero and a equals it). */
static double rel_diff(const float *a, const float *b, int64_t n)
{
    double d = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? d / m : d;
}

static void test_ops_sweep(void)
{
    const int64_t n = (int64_t)ROWS * COLS;
    float *x = malloc(sizeof(float) * n), *dy = malloc(sizeof(float) * n);
    int32_t *ids = malloc(sizeof(int32_t) * ROWS);
    tfc_test_fill(x, n, -3, 3, 1);
    tfc_test_fill(dy, n, -1, 1, 2);
    for (int r = 0; r < ROWS; r++) ids[r] = (r * 7) % COLS;
    /* double references: column sums of dy, sum of squares of x */
    double bg_ref[COLS] = {0}, ss_ref = 0;
    for (int64_t i = 0; i < n; i++) {
        bg_ref[i % COLS] += dy[i];
        ss_ref += (double)x[i] * x[i];
    }
    /* per thread count: BN output, BN input gradient, loss logits gradient; [0] is 1 thread */
    float *y[2], *dx[2], *dl[2], st[2][4 * COLS + 1];
    for (int k = 0; k < 2; k++) {
        y[k] = malloc(sizeof(float) * n);
        dx[k] = malloc(sizeof(float) * n);
        dl[k] = malloc(sizeof(float) * n);
    }
    for (int s = 0; s < NSWEEP; s++) {
        int k = s > 0;
        tfc_backend *be = tfc_cpu_backend_create(sweep[s]);
        float gamma[COLS] = {1, 2, 0.5f, 1, -1}, beta[COLS] = {0, 1, 0, 0, 2};
        float mm[COLS] = {0}, mv[COLS] = {1}, sm[COLS], si[COLS];
        float dg[COLS] = {0}, db[COLS] = {0}, bg[COLS] = {0}, loss;
        be->ops->bias_grad(be, ROWS, COLS, dy, bg);
        double ss = be->ops->sumsq(be, n, x);
        be->ops->bn_forward_train(be, ROWS, COLS, x, gamma, beta, 1e-3f, 0.9f, mm, mv, y[k], sm, si,
                                  TFC_ACT_LINEAR);
        memset(dx[k], 0, sizeof(float) * n);
        be->ops->bn_backward(be, ROWS, COLS, x, dy, gamma, sm, si, dx[k], dg, db, 0);
        be->ops->loss(be, TFC_LOSS_SPARSE_CCE, 1, ROWS, COLS, x, ids, NULL, 1.0f / ROWS, &loss,
                      dl[k]);
        for (int c = 0; c < COLS; c++) {
            st[k][c] = sm[c], st[k][COLS + c] = si[c];
            st[k][2 * COLS + c] = dg[c], st[k][3 * COLS + c] = db[c];
        }
        st[k][4 * COLS] = loss;
        /* The sums run in double: only their order differs from the reference, so a row
         * lost or counted twice at a chunk boundary (|x|^2 ~ 3, |dy| ~ 0.5) shows far above
         * these bounds. */
        int ok = fabs(ss - ss_ref) <= 1e-9 * ss_ref;
        for (int c = 0; c < COLS; c++) ok &= fabs(bg[c] - bg_ref[c]) <= 1e-4;
        if (k) /* the same values as 1 thread, up to the last bits of float results */
            ok &= rel_diff(st[1], st[0], 4 * COLS + 1) < 1e-6 && rel_diff(y[1], y[0], n) < 1e-6 &&
                  rel_diff(dx[1], dx[0], n) < 1e-6 && rel_diff(dl[1], dl[0], n) < 1e-6;
        if (!ok) printf("\nops at %d threads disagree\n", sweep[s]);
        CU_ASSERT(ok);
        tfc_backend_free(be);
    }
    for (int k = 0; k < 2; k++) free(y[k]), free(dx[k]), free(dl[k]);
    free(x), free(dy), free(ids);
}

/* ---- a training step at several thread counts ------------------------------------------ */

typedef struct grads {
    float *g;
    int64_t n;
} grads;

/* Every trainable gradient after one forward/backward of `yaml` on `nt` threads. */
static grads step(const char *yaml, int batch, int nt)
{
    tfc_model *m = tfc_test_model(yaml);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    tfc_backend *be = tfc_cpu_backend_create(nt);
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, batch, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_init_weights(m, 11, &err), TFC_OK);
    int64_t in = (int64_t)batch * tfc_shape_numel(tfc_model_input_shape(m));
    TFC_ASSERT(in > 0 && in < (1 << 24));
    void *x = malloc((size_t)in * 4);
    if (tfc_model_input_dtype(m) == TFC_I32)
        for (int64_t i = 0; i < in; i++) ((int32_t *)x)[i] = (int32_t)((i * 13 + 5) % 50);
    else
        tfc_test_fill(x, in, -1, 1, 4);
    int32_t *labels = malloc((size_t)batch * 4);
    for (int b = 0; b < batch; b++) labels[b] = (b * 3 + 1) % 5;
    tfc_batch_result r;
    CU_ASSERT_EQUAL_FATAL(tfc_model_forward(m, x, batch, 1, 7, 3, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_loss(m, labels, 1, &r, &err), TFC_OK);
    tfc_model_zero_grad(m);
    tfc_model_backward(m);
    grads out = {NULL, 0};
    for (int li = 0; li < tfc_model_nlayers(m); li++) {
        tfc_layer *l = tfc_model_layer(m, li);
        for (int pi = 0; pi < l->nparams; pi++) {
            tfc_param *p = &l->params[pi];
            if (!p->trainable) continue;
            out.g = realloc(out.g, (size_t)(out.n + p->numel) * 4);
            be->ops->download(be, out.g + out.n, p->grad, (size_t)p->numel * 4);
            out.n += p->numel;
        }
    }
    free(x);
    free(labels);
    tfc_model_free(m);
    tfc_backend_free(be);
    return out;
}

static void check_model(const char *name, const char *yaml, int batch)
{
    grads one = step(yaml, batch, 1), three = step(yaml, batch, 3);
    grads again = step(yaml, batch, 3), seven = step(yaml, batch, 7);
    CU_ASSERT_FATAL(one.n > 0 && one.n == three.n && one.n == again.n && one.n == seven.n);
    double d3 = rel_diff(three.g, one.g, one.n), d7 = rel_diff(seven.g, one.g, one.n);
    int same = memcmp(three.g, again.g, (size_t)one.n * 4) == 0;
    if (d3 >= 1e-5 || d7 >= 1e-5 || !same)
        printf("\n%s: 3 threads %.3g, 7 threads %.3g from 1 thread; 3 twice %s\n", name, d3, d7,
               same ? "identical" : "DIFFER");
    CU_ASSERT(d3 < 1e-5);
    CU_ASSERT(d7 < 1e-5);
    CU_ASSERT(same);
    free(one.g), free(three.g), free(again.g), free(seven.g);
}

static void test_cnn_step(void)
{
    /* batch 37: each conv output (37 x 13 x 11 x 8 = 42328) is above the parallel threshold */
    check_model("cnn",
                "input: {shape: [13, 11, 3]}\nlayers:\n"
                "  - Conv2D: {filters: 8, kernel_size: 3, padding: same, activation: relu}\n"
                "  - BatchNormalization: {}\n"
                "  - MaxPooling2D: {pool_size: 2}\n"
                "  - AveragePooling2D: {pool_size: 2, strides: 1, padding: same}\n"
                "  - Conv2D: {filters: 6, kernel_size: 3, strides: [2, 1]}\n"
                "  - GlobalAveragePooling2D: {}\n  - Dense: {units: 5}\n",
                37);
}

static void test_lstm_step(void)
{
    check_model("lstm",
                "input: {shape: [9], dtype: int32}\nlayers:\n"
                "  - Embedding: {input_dim: 50, output_dim: 16, mask_zero: true}\n"
                "  - LSTM: {units: 24, return_sequences: true}\n"
                "  - LSTM: {units: 12}\n  - Dense: {units: 5}\n",
                301);
}

TFC_TEST_MAIN("threads", {"ops_sweep", test_ops_sweep}, {"cnn_step", test_cnn_step},
              {"lstm_step", test_lstm_step})
