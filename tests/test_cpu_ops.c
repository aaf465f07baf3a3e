/* The CPU backend's ops against independent references written here with plain double
 * loops (direct 7-loop convolution, windowed pooling, the LSTM recurrence, Keras's loss
 * formulas), and every backward op against central finite differences, in double, of
 * the scalar L = sum(weights * output) computed by those references. Gradient buffers
 * are pre-filled so the checks also prove that d* outputs accumulate. */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"
#include "core/backend.h"
#include "core/rng.h"
#include "util/testutil.h"

/* ---- helpers ------------------------------------------------------------------------ */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static double urand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}

static void fill(float *p, int64_t n, double lo, double hi)
{
    for (int64_t i = 0; i < n; i++) p[i] = (float)(lo + (hi - lo) * urand());
}

static double *to_double(const float *p, int64_t n)
{
    double *d = malloc((size_t)(n ? n : 1) * sizeof *d);
    for (int64_t i = 0; i < n; i++) d[i] = p[i];
    return d;
}

static float *falloc(int64_t n)
{
    return malloc((size_t)(n ? n : 1) * sizeof(float));
}

static tfc_backend *backend(void)
{
    return tfc_cpu_backend_create(2);
}

static int close_to(double got, double want, double rtol, double atol)
{
    return fabs(got - want) <= atol + rtol * fabs(want);
}

/* Counts (and prints the first few of) elements where got differs from want. */
static int compare(const char *what, const float *got, const double *want, int64_t n,
                   double rtol, double atol)
{
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (close_to(got[i], want[i], rtol, atol)) continue;
        if (bad++ < 5)
            printf("\n  %s[%lld]: got %.9g, want %.9g", what, (long long)i, got[i], want[i]);
    }
    return bad;
}

/* Scalar function of the parameters held in a context, evaluated in double. */
typedef double (*scalar_fn)(void *ctx);

/* Central differences of f over param[i] against analytic[i], for every index of small
 * tensors and about 60 spread ones of large tensors. Returns the number of mismatches. */
static int grad_check(const char *what, double *param, int64_t n, const double *analytic,
                      scalar_fn f, void *ctx, double h, double rtol, double atol)
{
    int bad = 0;
    int64_t stride = n > 150 ? n / 60 : 1;
    for (int64_t i = (int64_t)(urand() * (double)stride); i < n; i += stride) {
        double save = param[i];
        param[i] = save + h;
        double lp = f(ctx);
        param[i] = save - h;
        double lm = f(ctx);
        param[i] = save;
        double num = (lp - lm) / (2 * h);
        if (close_to(analytic[i], num, rtol, atol)) continue;
        if (bad++ < 5)
            printf("\n  d%s[%lld]: analytic %.9g, numeric %.9g", what, (long long)i,
                   analytic[i], num);
    }
    return bad;
}

/* after - before, in double: what an accumulating op added. */
static double *added(const float *after, const float *before, int64_t n)
{
    double *d = calloc((size_t)(n ? n : 1), sizeof *d);
    for (int64_t i = 0; i < n; i++) d[i] = (double)after[i] - before[i];
    return d;
}

static double dot(const double *a, const double *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* ---- table, memory ------------------------------------------------------------------ */

static void test_backend_check(void)
{
    tfc_backend *be = backend();
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_backend_check(be->ops, &err), TFC_OK);
    CU_ASSERT_STRING_EQUAL(be->ops->name, "cpu");
    CU_ASSERT_EQUAL(be->device, -1);
    CU_ASSERT_EQUAL(be->threads, 2);

    tfc_backend_ops broken = *be->ops;
    broken.pool_backward = NULL;
    CU_ASSERT_EQUAL(tfc_backend_check(&broken, &err), TFC_ERR_DEVICE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "pool_backward"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "cpu"));

    broken = *be->ops;
    broken.count_nonfinite = NULL;
    broken.destroy = NULL;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_backend_check(&broken, &err), TFC_ERR_DEVICE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "'destroy'"));
    CU_ASSERT_PTR_NULL(strstr(err.msg, "count_nonfinite"));

    broken = *be->ops;
    broken.count_nonfinite = NULL;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_backend_check(&broken, &err), TFC_ERR_DEVICE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "count_nonfinite"));
    broken = *be->ops;
    broken.status = NULL;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_backend_check(&broken, &err), TFC_ERR_DEVICE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "'status'"));
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_backend_check(NULL, &err), TFC_ERR_DEVICE);

    /* the CPU takes the solver's options without effect, and never has an error pending */
    tfc_device_options o = {1, 1, 1};
    tfc_backend_configure(be, &o);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_backend_status(be, &err), TFC_OK);
    CU_ASSERT_EQUAL(err.count, 0);
    void *p = be->ops->alloc(be, 4096);
    CU_ASSERT_PTR_NOT_NULL(p);
    be->ops->free(be, p);
    tfc_backend_free(be);
    tfc_backend_free(NULL);

    int count = 0;
    while (tfc_act_names[count]) count++;
    CU_ASSERT_EQUAL(count, TFC_ACT_COUNT);
    CU_ASSERT_STRING_EQUAL(tfc_act_names[TFC_ACT_LINEAR], "linear");
    CU_ASSERT_STRING_EQUAL(tfc_act_names[TFC_ACT_LEAKY_RELU], "leaky_relu");
    CU_ASSERT_STRING_EQUAL(tfc_act_names[TFC_ACT_HARD_SIGMOID], "hard_sigmoid");
    CU_ASSERT_STRING_EQUAL(tfc_act_names[TFC_ACT_EXPONENTIAL], "exponential");

    tfc_backend *all = tfc_cpu_backend_create(0);
    CU_ASSERT(all->threads >= 1);
    tfc_backend_free(all);
}

static void test_memory(void)
{
    tfc_backend *be = backend();
    size_t sizes[] = {0, 1, 3, 64, 1000, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        unsigned char *p = be->ops->alloc(be, sizes[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        CU_ASSERT_EQUAL((uintptr_t)p % 64, 0);
        if (sizes[i]) {
            memset(p, 0xAB, sizes[i]);
            be->ops->zero(be, p, sizes[i]);
            CU_ASSERT_EQUAL(p[0], 0);
            CU_ASSERT_EQUAL(p[sizes[i] - 1], 0);
        }
        be->ops->free(be, p);
    }
    CU_ASSERT_PTR_NULL(be->ops->alloc(be, SIZE_MAX));
    float host[5] = {1, 2, 3, 4, 5}, back[5] = {0};
    float *dev = be->ops->alloc(be, sizeof host);
    float *dev2 = be->ops->alloc(be, sizeof host);
    be->ops->upload(be, dev, host, sizeof host);
    be->ops->copy(be, dev2, dev, sizeof host);
    be->ops->sync(be);
    be->ops->download(be, back, dev2, sizeof back);
    CU_ASSERT_EQUAL(memcmp(host, back, sizeof host), 0);
    be->ops->free(be, dev);
    be->ops->free(be, dev2);
    be->ops->free(be, NULL);
    tfc_backend_free(be);
}

/* ---- gemm ---------------------------------------------------------------------------- */

/* op(M)[i, j] of a row-major matrix with leading dimension ld. */
static double opel(const double *m, int ld, int trans, int i, int j)
{
    return trans ? m[(int64_t)j * ld + i] : m[(int64_t)i * ld + j];
}

typedef struct gemm_ctx {
    int ta, tb, m, n, k, lda, ldb;
    double *a, *b, *wt; /* wt [m, n]: L = sum wt * op(A) op(B) */
} gemm_ctx;

static double gemm_loss(void *p)
{
    gemm_ctx *c = p;
    double L = 0;
    for (int i = 0; i < c->m; i++)
        for (int j = 0; j < c->n; j++) {
            double s = 0;
            for (int l = 0; l < c->k; l++)
                s += opel(c->a, c->lda, c->ta, i, l) * opel(c->b, c->ldb, c->tb, l, j);
            L += c->wt[i * c->n + j] * s;
        }
    return L;
}

/* C = alpha op(A) op(B) + beta C for all four transposes with padded leading dimensions,
 * then the Dense-layer gradients (dA = dC op(B)ᵀ, dB = op(A)ᵀ dC, each itself a gemm with
 * transposes) against finite differences. */
static void test_gemm(void)
{
    tfc_backend *be = backend();
    const int m = 5, n = 7, k = 6;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int arows = ta ? k : m, acols = ta ? m : k, lda = acols + 3;
            int brows = tb ? n : k, bcols = tb ? k : n, ldb = bcols + 2;
            int ldc = n + 1;
            float *a = falloc(arows * lda), *b = falloc(brows * ldb), *c = falloc(m * ldc);
            fill(a, arows * lda, -1, 1);
            fill(b, brows * ldb, -1, 1);
            fill(c, m * ldc, -1, 1);
            double *da = to_double(a, arows * lda), *db = to_double(b, brows * ldb);
            double *want = malloc(sizeof(double) * m * ldc);
            for (int i = 0; i < m; i++)
                for (int j = 0; j < ldc; j++) {
                    double s = 0;
                    for (int l = 0; l < k; l++)
                        s += opel(da, lda, ta, i, l) * opel(db, ldb, tb, l, j < n ? j : 0);
                    want[i * ldc + j] = j < n ? 0.7 * s + 0.3 * c[i * ldc + j] : c[i * ldc + j];
                }
            be->ops->gemm(be, ta, tb, m, n, k, 0.7f, a, lda, b, ldb, 0.3f, c, ldc);
            CU_ASSERT_EQUAL(compare("gemm", c, want, m * ldc, 1e-5, 1e-6), 0);

            /* gradients of L = sum wt * op(A) op(B) */
            float *wt = falloc(m * n), *ga = falloc(arows * lda), *gb = falloc(brows * ldb);
            fill(wt, m * n, -1, 1);
            fill(ga, arows * lda, -1, 1);
            fill(gb, brows * ldb, -1, 1);
            float *ga0 = falloc(arows * lda), *gb0 = falloc(brows * ldb);
            memcpy(ga0, ga, sizeof(float) * arows * lda);
            memcpy(gb0, gb, sizeof(float) * brows * ldb);
            if (!ta) /* dA [m, k] += wt · op(B)ᵀ */
                be->ops->gemm(be, 0, !tb, m, k, n, 1.0f, wt, n, b, ldb, 1.0f, ga, lda);
            else /* dA stored [k, m] += op(B) · wtᵀ */
                be->ops->gemm(be, tb, 1, k, m, n, 1.0f, b, ldb, wt, n, 1.0f, ga, lda);
            if (!tb) /* dB [k, n] += op(A)ᵀ · wt */
                be->ops->gemm(be, !ta, 0, k, n, m, 1.0f, a, lda, wt, n, 1.0f, gb, ldb);
            else /* dB stored [n, k] += wtᵀ · op(A) */
                be->ops->gemm(be, 1, ta, n, k, m, 1.0f, wt, n, a, lda, 1.0f, gb, ldb);
            gemm_ctx ctx = {ta, tb, m, n, k, lda, ldb, da, db, to_double(wt, m * n)};
            double *gad = added(ga, ga0, arows * lda), *gbd = added(gb, gb0, brows * ldb);
            /* padding columns of the leading dimension get no gradient, and the FD agrees */
            CU_ASSERT_EQUAL(grad_check("A", da, arows * lda, gad, gemm_loss, &ctx, 1e-3, 1e-5, 1e-6), 0);
            CU_ASSERT_EQUAL(grad_check("B", db, brows * ldb, gbd, gemm_loss, &ctx, 1e-3, 1e-5, 1e-6), 0);
            free(a), free(b), free(c), free(da), free(db), free(want), free(wt), free(ga);
            free(gb), free(ga0), free(gb0), free(ctx.wt), free(gad), free(gbd);
        }
    /* k == 0: C = beta C */
    float c2[4] = {1, 2, 3, 4}, dummy[1] = {0};
    be->ops->gemm(be, 0, 0, 2, 2, 0, 1.0f, dummy, 1, dummy, 2, 0.5f, c2, 2);
    CU_ASSERT_DOUBLE_EQUAL(c2[3], 2.0, 1e-7);
    be->ops->gemm(be, 0, 0, 2, 2, 0, 1.0f, dummy, 1, dummy, 2, 0.0f, c2, 2);
    CU_ASSERT_DOUBLE_EQUAL(c2[0], 0.0, 1e-7);
    tfc_backend_free(be);
}

/* tfc_cpu_gemm through both libraries (cpu_backend.c, sgemm1: oneDNN's dnnl_sgemm for A not
 * transposed, 16+ rows and a short k or B transposed; OpenBLAS for the rest, and for every
 * GEMM under TFC_CPU_GEMM=openblas) on shapes past the oneDNN threshold, with padded leading
 * dimensions, alpha and beta, on one and two threads (two threads split C into blocks):
 * each within float rounding of a double reference, and a second call the same bits. */
static void test_gemm_libraries(void)
{
    static const int shapes[][5] = {/* ta, tb, m, n, k */
                                    {0, 0, 37, 29, 19},   {0, 1, 37, 29, 19},
                                    {0, 0, 300, 130, 128}, {0, 1, 300, 130, 128},
                                    {0, 1, 64, 70, 600},  {0, 0, 64, 70, 600},
                                    {1, 0, 40, 33, 300},  {0, 0, 15, 40, 50}};
    for (int lib = 0; lib < 2; lib++)
        for (int threads = 1; threads <= 2; threads++) {
            if (lib) setenv("TFC_CPU_GEMM", "openblas", 1);
            tfc_backend *be = tfc_cpu_backend_create(threads);
            unsetenv("TFC_CPU_GEMM");
            for (size_t q = 0; q < sizeof shapes / sizeof shapes[0]; q++) {
                const int ta = shapes[q][0], tb = shapes[q][1], m = shapes[q][2];
                const int n = shapes[q][3], k = shapes[q][4];
                const int arows = ta ? k : m, lda = (ta ? m : k) + 3;
                const int brows = tb ? n : k, ldb = (tb ? k : n) + 2, ldc = n + 1;
                float *a = falloc(arows * lda), *b = falloc(brows * ldb), *c = falloc(m * ldc);
                float *c1 = falloc(m * ldc);
                fill(a, arows * lda, -1, 1);
                fill(b, brows * ldb, -1, 1);
                fill(c, m * ldc, -1, 1);
                memcpy(c1, c, sizeof(float) * m * ldc);
                double *da = to_double(a, arows * lda), *db = to_double(b, brows * ldb);
                double *want = malloc(sizeof(double) * m * ldc);
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < ldc; j++) {
                        double sum = 0;
                        for (int l = 0; j < n && l < k; l++)
                            sum += opel(da, lda, ta, i, l) * opel(db, ldb, tb, l, j);
                        want[i * ldc + j] = j < n ? 0.7 * sum + 0.3 * c[i * ldc + j] : c[i * ldc + j];
                    }
                be->ops->gemm(be, ta, tb, m, n, k, 0.7f, a, lda, b, ldb, 0.3f, c, ldc);
                char what[96];
                snprintf(what, sizeof what, "gemm %s %d threads %dx%dx%d ta %d tb %d",
                         lib ? "openblas" : "auto", threads, m, n, k, ta, tb);
                CU_ASSERT_EQUAL(compare(what, c, want, m * ldc, 1e-5, 1e-4), 0);
                be->ops->gemm(be, ta, tb, m, n, k, 0.7f, a, lda, b, ldb, 0.3f, c1, ldc);
                CU_ASSERT_EQUAL(memcmp(c, c1, sizeof(float) * m * ldc), 0);
                free(a), free(b), free(c), free(c1), free(da), free(db), free(want);
            }
            tfc_backend_free(be);
        }
}

/* ---- element-wise ---------------------------------------------------------------------- */

/* The LSTM's packed-panel GEMM (cpu_panel.c), c (+)= [A1 A2] · B with B packed plain or
 * transposed, through each kernel this CPU runs: every row count of a tile's remainder
 * (1..20 rows), a last panel short or whole, an odd number of panels (the AVX-512 kernel
 * takes them two at a time, and one row four at a time: groups of four and what is left,
 * walked forwards or in reverse), padded leading dimensions; A row-major, in panels of 8 rows
 * (tfc_cpu_pack_rows8_col) or in panels of 16 columns; a second A side by side or none, B
 * inside a taller packed matrix (panels further apart than k rows,
 * starting at a row inside them); adding to c, or setting it to an init row or to the sum
 * alone. Each against a double reference, and the AVX2 and AVX-512 kernels bit for bit with
 * each other (the same fused multiply-add chains). Where c is set, the same sums split in
 * two calls, A1's part alone from zero and then A2's continued from it (from_c, as the LSTM
 * with ids does), give the one call's bits. */
static void test_gemm_panels(void)
{
    const int ns[] = {5, 16, 33, 48, 64, 100, 1024}, ks[] = {1, 7, 256};
    int ran[3] = {0};
    for (int in = 0; in < 7; in++)
        for (int ik = 0; ik < 3; ik++)
            for (int m = 1; m <= 20; m += (m < 10 ? 1 : 5)) {
                const int n = ns[in], k = ks[ik], v = m + n + ik, tr = v % 2;
                /* k split between A1 and A2 (k2 0 half the time); A1 alone in every layout */
                const int k2 = (v / 2) % 2 ? k / 2 : 0, k1 = k - k2;
                const int lay = k2 ? TFC_PANEL_ROWS : (v / 2 + ik) % 3;
                const int set = (v / 4) % 3; /* 0 add, 1 set from init, 2 set from zero */
                const int skip = m % 3, ldp = k + skip + (m % 2); /* B's rows in the panels */
                const int lda1 = k1 + 3, lda2 = k2 + 2, ldc = n + 2;
                const int ldb = tr ? k + 1 : n + 1, brows = tr ? n : k;
                float *a1 = falloc(m * lda1), *a2 = falloc(m * lda2 + 1);
                float *b = falloc(brows * ldb), *c0 = falloc(m * ldc), *init = falloc(n);
                float *packed = falloc((int)tfc_cpu_panels_floats(ldp, n));
                float *c[3] = {falloc(m * ldc), falloc(m * ldc), falloc(m * ldc)};
                fill(a1, m * lda1, -1, 1), fill(a2, m * lda2 + 1, -1, 1);
                fill(b, brows * ldb, -1, 1), fill(c0, m * ldc, -1, 1), fill(init, n, -1, 1);
                fill(packed, (int64_t)tfc_cpu_panels_floats(ldp, n), 9, 9);
                tfc_cpu_pack_panels_ld(k, n, b, ldb, tr, packed + skip * 16, ldp);
                /* A1 [m, k1] as the kernel reads it: in place, in panels of 8 rows (written
                 * one column at a time), or in panels of 16 columns (packed as a B) */
                const int lda8 = 8 * k1 + 5, lda16 = 16 * (m + 1);
                float *al = a1, *col = falloc(m);
                int ldal = lda1;
                if (lay == TFC_PANEL_ROWS8) {
                    al = falloc((m + 7) / 8 * lda8), ldal = lda8;
                    for (int l = 0; l < k1; l++) {
                        for (int i = 0; i < m; i++) col[i] = a1[i * lda1 + l];
                        tfc_cpu_pack_rows8_col(m, col, al + 8 * l, lda8);
                    }
                } else if (lay == TFC_PANEL_COLS16) {
                    al = falloc((int)tfc_cpu_panels_floats(m + 1, k1)), ldal = lda16;
                    tfc_cpu_pack_panels_ld(m, k1, a1, lda1, 0, al, m + 1);
                }
                double *want = malloc(sizeof(double) * m * ldc);
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < ldc; j++) {
                        double acc = c0[i * ldc + j];
                        if (j < n && set) acc = set == 1 ? init[j] : 0.0;
                        for (int l = 0; j < n && l < k; l++) {
                            const double bl = tr ? b[j * ldb + l] : b[l * ldb + j];
                            const float ail = l < k1 ? a1[i * lda1 + l] : a2[i * lda2 + l - k1];
                            acc += ail * bl;
                        }
                        want[i * ldc + j] = acc;
                    }
                tfc_panel_gemm g = {.m = m, .n = n, .packed = packed + skip * 16, .ldp = ldp,
                                    .set = set != 0, .init = set == 1 ? init : NULL, .ldc = ldc,
                                    .reverse = (n + ik) % 2,
                                    .a1 = {.a = al, .lda = ldal, .k = k1, .layout = lay},
                                    .a2 = {.a = a2, .lda = lda2, .k = k2}};
                int have[3];
                for (int isa = 0; isa < 3; isa++) {
                    memcpy(c[isa], c0, sizeof(float) * m * ldc);
                    g.c = c[isa];
                    have[isa] = tfc_cpu_panel_gemm_isa(isa, &g);
                    ran[isa] += have[isa];
                    if (have[isa])
                        CU_ASSERT_EQUAL(compare("gemm_panels", c[isa], want, m * ldc, 1e-4, 1e-5),
                                        0);
                }
                if (have[1] && have[2])
                    CU_ASSERT_EQUAL(memcmp(c[1], c[2], sizeof(float) * m * ldc), 0);
                for (int isa = 0; isa < 3 && set; isa++) {
                    if (!have[isa]) continue;
                    float *cs = falloc(m * ldc);
                    memcpy(cs, c0, sizeof(float) * m * ldc);
                    tfc_panel_gemm g1 = g;
                    g1.c = cs, g1.init = NULL, g1.a2.k = 0;
                    tfc_cpu_panel_gemm_isa(isa, &g1);
                    tfc_panel_gemm g2 = {.m = m, .n = n, .packed = packed + (skip + k1) * 16,
                                         .ldp = ldp, .set = 1, .from_c = 1, .init = g.init,
                                         .c = cs, .ldc = ldc, .reverse = !g.reverse,
                                         .a1 = {.a = a2, .lda = lda2, .k = k2}};
                    tfc_cpu_panel_gemm_isa(isa, &g2);
                    CU_ASSERT_EQUAL(memcmp(cs, c[isa], sizeof(float) * m * ldc), 0);
                    free(cs);
                }
                if (al != a1) free(al);
                free(a1), free(a2), free(col), free(b), free(c0), free(init), free(packed);
                free(want);
                for (int isa = 0; isa < 3; isa++) free(c[isa]);
            }
    CU_ASSERT(ran[0] > 0);
    __builtin_cpu_init();
    /* where the CPU has the instructions, the kernel ran (and the dispatch picks the best) */
    CU_ASSERT_EQUAL(ran[2] > 0, __builtin_cpu_supports("avx512f") != 0);
    if (!__builtin_cpu_supports("avx512f"))
        printf("\n(no AVX-512 here: its panel kernel not compared) ");
}

/* GEMMs big enough to be split into blocks that threads claim (cpu_backend.c): split by
 * rows (m >= n) and by columns (m < n), every transpose combination, padded leading
 * dimensions, alpha and beta; against a double reference, on 2 and 5 threads, and 5
 * threads repeat their bits. */
static void test_gemm_blocks(void)
{
    const int shapes[2][3] = {{200, 70, 300}, {40, 300, 200}};
    tfc_backend *two = tfc_cpu_backend_create(2), *five = tfc_cpu_backend_create(5);
    for (int sh = 0; sh < 2; sh++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                const int m = shapes[sh][0], n = shapes[sh][1], k = shapes[sh][2];
                int arows = ta ? k : m, lda = (ta ? m : k) + 3;
                int brows = tb ? n : k, ldb = (tb ? k : n) + 2, ldc = n + 1;
                float *a = falloc(arows * lda), *b = falloc(brows * ldb);
                float *c0 = falloc(m * ldc), *c = falloc(m * ldc), *c5 = falloc(m * ldc);
                fill(a, arows * lda, -1, 1), fill(b, brows * ldb, -1, 1);
                fill(c0, m * ldc, -1, 1);
                double *da = to_double(a, arows * lda), *db = to_double(b, brows * ldb);
                double *want = malloc(sizeof(double) * m * ldc);
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < ldc; j++) {
                        double acc = 0;
                        for (int l = 0; j < n && l < k; l++)
                            acc += opel(da, lda, ta, i, l) * opel(db, ldb, tb, l, j);
                        want[i * ldc + j] = j < n ? 0.7 * acc + 0.3 * c0[i * ldc + j]
                                                  : c0[i * ldc + j];
                    }
                memcpy(c, c0, sizeof(float) * m * ldc);
                two->ops->gemm(two, ta, tb, m, n, k, 0.7f, a, lda, b, ldb, 0.3f, c, ldc);
                CU_ASSERT_EQUAL(compare("gemm 2 threads", c, want, m * ldc, 1e-4, 1e-5), 0);
                int differ = 0;
                for (int run = 0; run < 5; run++) {
                    memcpy(c5, c0, sizeof(float) * m * ldc);
                    five->ops->gemm(five, ta, tb, m, n, k, 0.7f, a, lda, b, ldb, 0.3f, c5, ldc);
                    if (run == 0) {
                        CU_ASSERT_EQUAL(compare("gemm 5 threads", c5, want, m * ldc, 1e-4, 1e-5),
                                        0);
                        memcpy(c, c5, sizeof(float) * m * ldc);
                    } else
                        differ += memcmp(c, c5, sizeof(float) * m * ldc) != 0;
                }
                CU_ASSERT_EQUAL(differ, 0);
                free(a), free(b), free(c0), free(c), free(c5), free(da), free(db), free(want);
            }
    tfc_backend_free(two);
    tfc_backend_free(five);
}

static void test_elementwise(void)
{
    tfc_backend *be = backend();
    const int64_t n = 70001; /* above the parallel threshold, odd */
    float *x = falloc(n), *y = falloc(n), *y0 = falloc(n);
    fill(x, n, -2, 2);
    fill(y, n, -2, 2);
    memcpy(y0, y, sizeof(float) * n);
    be->ops->axpy(be, n, 0.5f, x, y);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += !close_to(y[i], y0[i] + 0.5 * x[i], 1e-6, 1e-7);
    CU_ASSERT_EQUAL(bad, 0);
    be->ops->scale(be, n, -3.0f, y0);
    bad = 0;
    for (int64_t i = 0; i < n; i++) bad += !close_to(y0[i], -3.0 * (y[i] - 0.5 * x[i]), 1e-5, 1e-6);
    CU_ASSERT_EQUAL(bad, 0);

    /* bias_add / bias_grad on [rows, cols], cols past one reduction block */
    const int rows = 130, cols = 300;
    float *m = falloc(rows * cols), *m0 = falloc(rows * cols), *b = falloc(cols), *db = falloc(cols);
    fill(m, rows * cols, -1, 1);
    memcpy(m0, m, sizeof(float) * rows * cols);
    fill(b, cols, -1, 1);
    for (int c = 0; c < cols; c++) db[c] = 1.0f;
    be->ops->bias_add(be, rows, cols, b, m);
    bad = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            bad += !close_to(m[r * cols + c], (double)m0[r * cols + c] + b[c], 1e-6, 1e-7);
    CU_ASSERT_EQUAL(bad, 0);
    be->ops->bias_grad(be, rows, cols, m0, db);
    bad = 0;
    for (int c = 0; c < cols; c++) {
        double s = 1.0;
        for (int r = 0; r < rows; r++) s += m0[r * cols + c];
        bad += !close_to(db[c], s, 1e-5, 1e-5);
    }
    CU_ASSERT_EQUAL(bad, 0);

    /* copy2d: = and += between strided views (Concatenate) */
    float src[3 * 5], dst[3 * 7];
    fill(src, 15, -1, 1);
    for (int i = 0; i < 21; i++) dst[i] = (float)i;
    be->ops->copy2d(be, 3, 2, src + 1, 5, dst + 4, 7, 0);
    bad = 0;
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 7; c++) {
            double want = c >= 4 && c < 6 ? src[r * 5 + 1 + c - 4] : r * 7 + c;
            bad += dst[r * 7 + c] != (float)want;
        }
    CU_ASSERT_EQUAL(bad, 0);
    be->ops->copy2d(be, 3, 2, src + 1, 5, dst + 4, 7, 1);
    bad = 0;
    for (int r = 0; r < 3; r++) bad += !close_to(dst[r * 7 + 5], 2.0 * src[r * 5 + 2], 1e-6, 0);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(dst[3], 3.0f);
    CU_ASSERT_EQUAL(dst[20], 20.0f);

    /* sumsq (double accumulation) and count_nonfinite */
    double want = 0;
    for (int64_t i = 0; i < n; i++) want += (double)x[i] * x[i];
    CU_ASSERT(close_to(be->ops->sumsq(be, n, x), want, 1e-12, 0));
    CU_ASSERT_EQUAL(be->ops->count_nonfinite(be, n, x), 0);
    x[5] = NAN;
    x[n - 1] = INFINITY;
    x[1000] = -INFINITY;
    x[7] = 3e38f;
    CU_ASSERT_EQUAL(be->ops->count_nonfinite(be, n, x), 3);
    CU_ASSERT_EQUAL(be->ops->count_nonfinite(be, 5, x), 0);
    free(x), free(y), free(y0), free(m), free(m0), free(b), free(db);
    tfc_backend_free(be);
}

/* Inverted dropout: rate statistics, keep-scale, the Philox mask of the contract,
 * determinism per (key, step), and a backward with the forward's mask. */
static void test_dropout(void)
{
    tfc_backend *be = backend();
    const int64_t n = 100003;
    const float rate = 0.3f;
    float *x = falloc(n), *y = falloc(n), *y2 = falloc(n), *dx = falloc(n);
    fill(x, n, 0.5, 1.5);
    be->ops->dropout_forward(be, n, rate, 42, 7, x, y);
    int64_t dropped = 0, bad = 0, mask_bad = 0;
    for (int64_t i = 0; i < n; i++) {
        int keep = y[i] != 0.0f;
        dropped += !keep;
        if (keep) bad += !close_to(y[i], x[i] / (1.0 - rate), 1e-6, 0);
        mask_bad += keep != (tfc_rng_uniform(42, 7, (uint64_t)i) >= rate);
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(mask_bad, 0);
    CU_ASSERT(fabs((double)dropped / n - rate) < 0.01);

    be->ops->dropout_forward(be, n, rate, 42, 7, x, y2);
    CU_ASSERT_EQUAL(memcmp(y, y2, sizeof(float) * n), 0);
    be->ops->dropout_forward(be, n, rate, 42, 8, x, y2);
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++) differ += (y[i] == 0.0f) != (y2[i] == 0.0f);
    /* two independent masks disagree on 2 * 0.3 * 0.7 = 42% of elements */
    CU_ASSERT(fabs((double)differ / n - 0.42) < 0.02);
    be->ops->dropout_forward(be, n, rate, 43, 7, x, y2);
    differ = 0;
    for (int64_t i = 0; i < n; i++) differ += (y[i] == 0.0f) != (y2[i] == 0.0f);
    CU_ASSERT(differ > n / 3);

    /* backward: dx += dy * mask / (1 - rate); with dy = x it reproduces y */
    for (int64_t i = 0; i < n; i++) dx[i] = 1.0f;
    be->ops->dropout_backward(be, n, rate, 42, 7, x, dx);
    bad = 0;
    for (int64_t i = 0; i < n; i++) bad += !close_to(dx[i], 1.0 + y[i], 1e-6, 1e-7);
    CU_ASSERT_EQUAL(bad, 0);

    /* rate 0 is the identity (in place too), rate 1 drops everything */
    be->ops->dropout_forward(be, n, 0.0f, 1, 1, x, y2);
    CU_ASSERT_EQUAL(memcmp(x, y2, sizeof(float) * n), 0);
    be->ops->dropout_forward(be, n, 1.0f, 1, 1, x, y2);
    bad = 0;
    for (int64_t i = 0; i < n; i++) bad += y2[i] != 0.0f;
    CU_ASSERT_EQUAL(bad, 0);
    /* in place */
    memcpy(y2, x, sizeof(float) * n);
    be->ops->dropout_forward(be, n, rate, 42, 7, y2, y2);
    CU_ASSERT_EQUAL(memcmp(y, y2, sizeof(float) * n), 0);

    /* the AVX-512 kernel (where the CPU has it) gives the plain loops' bits, forward and
     * accumulating, on lengths that end inside a 16-lane vector and a 64-element batch,
     * and at rates equal to element e's uniform (kept: u >= rate) and just above it, e the
     * first whose Philox word has a zero low byte (u is its top 24 bits: the word is on the
     * kernel's integer threshold itself) */
    float *ref = falloc(n), *got = falloc(n);
    int64_t e = 0;
    while ((tfc_philox(9, (uint64_t)e >> 2, 3).v[e & 3] & 0xFF) != 0) e++;
    CU_ASSERT_FATAL(e < 4096);
    const float ue = tfc_rng_uniform(9, 3, (uint64_t)e);
    const float rates[] = {rate, 0.5f, ue, nextafterf(ue, 1.0f)};
    const int64_t lens[] = {n, 64, 77, 5};
    int ran = 0;
    for (int ri = 0; ri < 4; ri++)
        for (int li = 0; li < 4; li++)
            for (int acc = 0; acc < 2; acc++) {
                for (int64_t i = 0; i < n; i++) ref[i] = got[i] = (float)(i % 7) - 3.0f;
                CU_ASSERT(tfc_cpu_dropout_isa(be, 0, lens[li], rates[ri], 9, 3, x, ref, acc));
                if (!tfc_cpu_dropout_isa(be, 2, lens[li], rates[ri], 9, 3, x, got, acc)) continue;
                ran++;
                CU_ASSERT_EQUAL(memcmp(ref, got, sizeof(float) * n), 0);
                if (ri >= 2 && lens[li] > e && !acc) /* the boundary itself, in the contract */
                    CU_ASSERT_EQUAL(got[e] != 0.0f, ri == 2);
            }
    if (ran) {
        /* Philox blocks across a carry into the counter's high word */
        uint32_t r[64];
        const uint64_t firsts[] = {0, (1ull << 32) - 7, (5ull << 32) - 16, 123456789012345ull};
        int wrong = 0;
        for (int f = 0; f < 4; f++) {
            CU_ASSERT(tfc_cpu_philox16(0x0123456789ABCDEFull, firsts[f], 77, r));
            for (int j = 0; j < 16; j++) {
                tfc_u32x4 b = tfc_philox(0x0123456789ABCDEFull, firsts[f] + (uint64_t)j, 77);
                for (int w = 0; w < 4; w++) wrong += r[4 * j + w] != b.v[w];
            }
        }
        CU_ASSERT_EQUAL(wrong, 0);
    }
    free(ref), free(got);
    free(x), free(y), free(y2), free(dx);
    tfc_backend_free(be);
}

/* ---- activations --------------------------------------------------------------------- */

/* Closed forms, in double, written from the Keras documentation. */
static double ref_act(tfc_act a, double x)
{
    switch (a) {
    case TFC_ACT_LINEAR: return x;
    case TFC_ACT_RELU: return x > 0 ? x : 0;
    case TFC_ACT_SIGMOID: return 1 / (1 + exp(-x));
    case TFC_ACT_TANH: return tanh(x);
    case TFC_ACT_ELU: return x > 0 ? x : exp(x) - 1;
    case TFC_ACT_SELU:
        return 1.0507009873554805 * (x > 0 ? x : 1.6732632423543772 * (exp(x) - 1));
    case TFC_ACT_GELU: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case TFC_ACT_LEAKY_RELU: return x > 0 ? x : 0.2 * x;
    case TFC_ACT_SOFTPLUS: return x > 30 ? x : log(1 + exp(x));
    case TFC_ACT_SOFTSIGN: return x / (1 + fabs(x));
    case TFC_ACT_SWISH: return x / (1 + exp(-x));
    case TFC_ACT_HARD_SIGMOID: return fmax(0, fmin(6, x + 3)) / 6;
    case TFC_ACT_EXPONENTIAL: return exp(x);
    case TFC_ACT_RELU6: return fmax(0, fmin(6, x));
    case TFC_ACT_HARD_SILU: return x * fmax(0, fmin(6, x + 3)) / 6;
    case TFC_ACT_MISH: return x * tanh(x > 30 ? x : log(1 + exp(x)));
    default: return NAN;
    }
}

static void test_act_values(void)
{
    tfc_backend *be = backend();
    const float pts[] = {-4.0f, -2.5f, -0.7f, -1e-3f, 0.3f, 1.7f, 4.0f, 9.0f};
    const int np = sizeof pts / sizeof *pts;
    for (int a = 0; a < TFC_ACT_COUNT; a++) {
        if (a == TFC_ACT_SOFTMAX) continue;
        float y[8];
        be->ops->act_forward(be, (tfc_act)a, np, np, pts, y);
        for (int i = 0; i < np; i++)
            if (!close_to(y[i], ref_act((tfc_act)a, pts[i]), 3e-6, 1e-7)) {
                printf("\n  %s(%g) = %.9g, want %.9g", tfc_act_names[a], pts[i], y[i],
                       ref_act((tfc_act)a, pts[i]));
                CU_FAIL("activation value");
            }
    }
    /* extremes: no overflow to NaN, exact limits, NaN propagates */
    float big[] = {-100.0f, 100.0f, 1e-6f, NAN, -1000.0f, 95.0f};
    float out[6];
    be->ops->act_forward(be, TFC_ACT_SIGMOID, 6, 6, big, out);
    CU_ASSERT(out[0] >= 0 && out[0] < 1e-30);
    CU_ASSERT_EQUAL(out[1], 1.0f);
    CU_ASSERT(isnan(out[3]));
    CU_ASSERT_EQUAL(out[4], 0.0f);
    be->ops->act_forward(be, TFC_ACT_TANH, 6, 6, big, out);
    CU_ASSERT_EQUAL(out[0], -1.0f);
    CU_ASSERT_EQUAL(out[1], 1.0f);
    CU_ASSERT(close_to(out[2], 1e-6, 1e-6, 0));
    CU_ASSERT(isnan(out[3]));
    be->ops->act_forward(be, TFC_ACT_EXPONENTIAL, 6, 6, big, out);
    CU_ASSERT(out[0] > 0 && out[0] < 1e-40); /* e^-100: a float denormal */
    CU_ASSERT_EQUAL(out[4], 0.0f);
    CU_ASSERT(isinf(out[1]) && out[1] > 0);
    CU_ASSERT(isnan(out[3]));
    CU_ASSERT(isinf(out[5]));
    be->ops->act_forward(be, TFC_ACT_SOFTPLUS, 6, 6, big, out);
    CU_ASSERT(out[0] >= 0 && out[0] < 1e-30);
    CU_ASSERT_EQUAL(out[1], 100.0f);
    be->ops->act_forward(be, TFC_ACT_RELU, 6, 6, big, out);
    CU_ASSERT(isnan(out[3]));
    CU_ASSERT_EQUAL(out[0], 0.0f);

    /* the vectorised exp and tanh stay within a few ulp over their whole range */
    const int64_t n = 200001;
    float *x = falloc(n), *y = falloc(n);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(-103.0 + 191.5 * (double)i / (double)(n - 1));
    be->ops->act_forward(be, TFC_ACT_EXPONENTIAL, n, n, x, y);
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double want = exp((double)x[i]);
        if (want < 1.2e-38 || want > 3.4e38) continue; /* denormal or overflow */
        double e = fabs(y[i] - want) / want;
        worst = e > worst ? e : worst;
    }
    CU_ASSERT(worst < 3.0e-7);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(-9.0 + 18.0 * (double)i / (double)(n - 1));
    be->ops->act_forward(be, TFC_ACT_TANH, n, n, x, y);
    worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double want = tanh((double)x[i]);
        double e = fabs(y[i] - want) / fmax(fabs(want), 1e-30);
        worst = e > worst ? e : worst;
    }
    CU_ASSERT(worst < 3.0e-7);
    free(x), free(y);
    tfc_backend_free(be);
}

/* gelu's normal distribution function over a dense grid of [-12, 12] (every float step
 * near 0), forward x Phi(x) and backward Phi(x) + x phi(x) against libm's double erfc:
 * within 6e-7 relative (10 float ulp; the float evaluation measured 4.6e-7 and 3.7e-7, the
 * double one it replaced 6e-8) in the left tail too, where 1 + erf would have cancelled
 * (x Phi(x) is about 1e-33 at x = -12; Keras's float erf form is off by 100% there). The
 * backward's error is relative to its larger term, Phi or
 * x phi, since the two cancel at gelu's minimum (x near -0.75). */
static void test_gelu_tail(void)
{
    tfc_backend *be = backend();
    const int64_t n = 2400001;
    float *x = falloc(n), *y = falloc(n), *one = falloc(n), *dx = falloc(n);
    for (int64_t i = 0; i < n; i++) {
        x[i] = (float)(-12.0 + 24.0 * (double)i / (double)(n - 1));
        one[i] = 1.0f;
    }
    x[0] = -1e-30f, x[1] = 1e-30f, x[2] = 0.0f, x[3] = 5.9604645e-8f;
    be->ops->act_forward(be, TFC_ACT_GELU, n, n, x, y);
    be->ops->act_backward(be, TFC_ACT_GELU, n, n, x, y, one, dx, 1);
    double worst_f = 0, worst_b = 0;
    for (int64_t i = 0; i < n; i++) {
        const double v = x[i], cdf = 0.5 * erfc(-v / sqrt(2.0));
        const double pdf = exp(-0.5 * v * v) / sqrt(2.0 * M_PI), want = v * cdf;
        const double ef = want == 0 ? fabs((double)y[i]) : fabs(y[i] - want) / fabs(want);
        const double eb = fabs(dx[i] - (cdf + v * pdf)) / fmax(cdf, fabs(v * pdf));
        worst_f = ef > worst_f ? ef : worst_f;
        worst_b = eb > worst_b ? eb : worst_b;
    }
    printf("\n  gelu: max relative error %.3g forward, %.3g backward", worst_f, worst_b);
    CU_ASSERT(worst_f < 6e-7);
    CU_ASSERT(worst_b < 6e-7);
    /* beyond the grid: gelu(x) = x and gelu' = 1 for large x, 0 far left (gelu'(inf) is
     * 1 + inf 0: not asserted) */
    const float big[4] = {INFINITY, 1e30f, -1e30f, -30.0f}, ybig[4] = {INFINITY, 1e30f, 0, 0};
    float yb[4], db[4], ones[4] = {1, 1, 1, 1};
    be->ops->act_forward(be, TFC_ACT_GELU, 4, 4, big, yb);
    be->ops->act_backward(be, TFC_ACT_GELU, 4, 4, big, yb, ones, db, 1);
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(yb[i], ybig[i]);
        if (i > 0) CU_ASSERT_EQUAL(db[i], i < 2 ? 1.0f : 0.0f);
    }
    free(x), free(y), free(one), free(dx);
    tfc_backend_free(be);
}

/* Forward (separate and in place) and backward (accumulating, against a per-element
 * central difference of the closed form) of every element-wise activation, with n above
 * the parallel threshold. Points avoid the kinks (relu and leaky_relu at 0, elu and selu
 * at 0, hard_sigmoid at -3 and 3). */
static void test_act_grad(void)
{
    tfc_backend *be = backend();
    const int64_t n = 50001;
    float *x = falloc(n), *y = falloc(n), *y2 = falloc(n), *wt = falloc(n), *dx = falloc(n),
          *dx0 = falloc(n);
    for (int a = 0; a < TFC_ACT_COUNT; a++) {
        if (a == TFC_ACT_SOFTMAX) continue;
        for (int64_t i = 0; i < n; i++) {
            double v;
            do v = -4.5 + 9.0 * urand();
            while (fabs(v) < 0.02 || fabs(fabs(v) - 3) < 0.02);
            x[i] = (float)v;
        }
        fill(wt, n, -1, 1);
        fill(dx, n, -1, 1);
        memcpy(dx0, dx, sizeof(float) * n);
        be->ops->act_forward(be, (tfc_act)a, n, 1, x, y);
        memcpy(y2, x, sizeof(float) * n);
        be->ops->act_forward(be, (tfc_act)a, n, 1, y2, y2);
        CU_ASSERT_EQUAL(memcmp(y, y2, sizeof(float) * n), 0);
        be->ops->act_backward(be, (tfc_act)a, n, 1, x, y, wt, dx, 0);
        /* assigned: what adding to zeros gives, whatever dx held (NaN here) */
        float *da = falloc(n), *dz = falloc(n);
        for (int64_t i = 0; i < n; i++) da[i] = NAN, dz[i] = 0.0f;
        be->ops->act_backward(be, (tfc_act)a, n, 1, x, y, wt, da, 1);
        be->ops->act_backward(be, (tfc_act)a, n, 1, x, y, wt, dz, 0);
        int assigned = 0;
        for (int64_t i = 0; i < n; i++) assigned += !(da[i] == dz[i]);
        if (assigned) printf("\n  %s backward assigned: %d differ", tfc_act_names[a], assigned);
        CU_ASSERT_EQUAL(assigned, 0);
        free(da), free(dz);
        int bad_f = 0, bad_b = 0;
        const double h = 1e-5;
        for (int64_t i = 0; i < n; i++) {
            double want = ref_act((tfc_act)a, x[i]);
            if (!close_to(y[i], want, 3e-6, 1e-7)) bad_f++;
            double fd = (ref_act((tfc_act)a, x[i] + h) - ref_act((tfc_act)a, x[i] - h)) / (2 * h);
            double got = (double)dx[i] - dx0[i];
            if (!close_to(got, wt[i] * fd, 1e-4, 1e-5)) {
                if (bad_b++ < 3)
                    printf("\n  %s'(%g): got %.9g want %.9g", tfc_act_names[a], x[i], got,
                           wt[i] * fd);
            }
        }
        if (bad_f || bad_b) printf("\n  %s: %d forward, %d backward mismatches", tfc_act_names[a], bad_f, bad_b);
        CU_ASSERT_EQUAL(bad_f, 0);
        CU_ASSERT_EQUAL(bad_b, 0);
    }
    free(x), free(y), free(y2), free(wt), free(dx), free(dx0);
    tfc_backend_free(be);
}

typedef struct softmax_ctx {
    int64_t rows;
    int cols;
    double *x, *wt;
} softmax_ctx;

static void ref_softmax(int cols, const double *x, double *y)
{
    double m = x[0], s = 0;
    for (int j = 1; j < cols; j++) m = fmax(m, x[j]);
    for (int j = 0; j < cols; j++) s += exp(x[j] - m);
    for (int j = 0; j < cols; j++) y[j] = exp(x[j] - m) / s;
}

static double softmax_loss(void *p)
{
    softmax_ctx *c = p;
    double L = 0, y[64];
    for (int64_t r = 0; r < c->rows; r++) {
        ref_softmax(c->cols, c->x + r * c->cols, y);
        L += dot(y, c->wt + r * c->cols, c->cols);
    }
    return L;
}

static void test_softmax(void)
{
    tfc_backend *be = backend();
    const int64_t rows = 7001;
    const int cols = 10;
    const int64_t n = rows * cols;
    float *x = falloc(n), *y = falloc(n), *wt = falloc(n), *dx = falloc(n), *dx0 = falloc(n);
    fill(x, n, -5, 5);
    x[3] = 1000.0f; /* a row with huge logits must not overflow */
    x[4] = 1001.0f;
    fill(wt, n, -1, 1);
    fill(dx, n, -1, 1);
    memcpy(dx0, dx, sizeof(float) * n);
    be->ops->act_forward(be, TFC_ACT_SOFTMAX, n, cols, x, y);
    double *xd = to_double(x, n), *want = malloc(sizeof(double) * n);
    for (int64_t r = 0; r < rows; r++) ref_softmax(cols, xd + r * cols, want + r * cols);
    CU_ASSERT_EQUAL(compare("softmax", y, want, n, 1e-5, 1e-7), 0);
    CU_ASSERT(close_to(y[4], 1 / (1 + exp(-1.0)), 1e-6, 0));
    be->ops->act_backward(be, TFC_ACT_SOFTMAX, n, cols, x, y, wt, dx, 0);
    float *da = falloc(n), *dz = falloc(n);
    for (int64_t i = 0; i < n; i++) da[i] = NAN, dz[i] = 0.0f;
    be->ops->act_backward(be, TFC_ACT_SOFTMAX, n, cols, x, y, wt, da, 1);
    be->ops->act_backward(be, TFC_ACT_SOFTMAX, n, cols, x, y, wt, dz, 0);
    int assigned = 0;
    for (int64_t i = 0; i < n; i++) assigned += !(da[i] == dz[i]);
    CU_ASSERT_EQUAL(assigned, 0);
    free(da), free(dz);
    softmax_ctx ctx = {rows, cols, xd, to_double(wt, n)};
    double *g = added(dx, dx0, n);
    CU_ASSERT_EQUAL(grad_check("softmax", xd, n, g, softmax_loss, &ctx, 1e-5, 1e-4, 1e-6), 0);
    /* in place */
    be->ops->act_forward(be, TFC_ACT_SOFTMAX, n, cols, x, x);
    CU_ASSERT_EQUAL(memcmp(x, y, sizeof(float) * n), 0);
    free(x), free(y), free(wt), free(dx), free(dx0), free(xd), free(want), free(ctx.wt), free(g);
    tfc_backend_free(be);
}

/* ---- convolution ------------------------------------------------------------------- */

/* TensorFlow's output size and leading pad for SAME (pad = 1) or VALID (pad = 0). */
static void tf_dim(int in, int k, int s, int d, int same, int *out, int *pad_before)
{
    int eff = (k - 1) * d + 1;
    if (same) {
        *out = (in + s - 1) / s;
        int total = (*out - 1) * s + eff - in;
        if (total < 0) total = 0;
        *pad_before = total / 2;
    } else {
        *out = (in - eff) / s + 1;
        *pad_before = 0;
    }
}

static tfc_conv_desc conv_desc(int n, int h, int w, int c, int kh, int kw, int f, int s, int d,
                               int same)
{
    tfc_conv_desc cd = {.n = n, .h = h, .w = w, .c = c, .kh = kh, .kw = kw, .f = f,
                        .sh = s, .sw = s, .dh = d, .dw = d};
    tf_dim(h, kh, s, d, same, &cd.oh, &cd.pad_top);
    tf_dim(w, kw, s, d, same, &cd.ow, &cd.pad_left);
    return cd;
}

/* Direct summation: y[n, oy, ox, f] = sum_{ki, kj, ci} x[n, iy, ix, ci] w[ki, kj, ci, f]
 * with iy = oy sh - pad_top + ki dh (zero outside the image). */
static void ref_conv(const tfc_conv_desc *d, const double *x, const double *w, double *y)
{
    for (int n = 0; n < d->n; n++)
        for (int oy = 0; oy < d->oh; oy++)
            for (int ox = 0; ox < d->ow; ox++)
                for (int f = 0; f < d->f; f++) {
                    double s = 0;
                    for (int ki = 0; ki < d->kh; ki++)
                        for (int kj = 0; kj < d->kw; kj++)
                            for (int ci = 0; ci < d->c; ci++) {
                                int iy = oy * d->sh - d->pad_top + ki * d->dh;
                                int ix = ox * d->sw - d->pad_left + kj * d->dw;
                                if (iy < 0 || iy >= d->h || ix < 0 || ix >= d->w) continue;
                                s += x[((int64_t)(n * d->h + iy) * d->w + ix) * d->c + ci] *
                                     w[((ki * d->kw + kj) * d->c + ci) * d->f + f];
                            }
                    y[((int64_t)(n * d->oh + oy) * d->ow + ox) * d->f + f] = s;
                }
}

/* The adjoints by direct scatter: dx += sum dy w, dw += sum x dy over the same index set. */
static void ref_conv_backward(const tfc_conv_desc *d, const double *x, const double *w,
                              const double *dy, double *dx, double *dw)
{
    for (int n = 0; n < d->n; n++)
        for (int oy = 0; oy < d->oh; oy++)
            for (int ox = 0; ox < d->ow; ox++)
                for (int ki = 0; ki < d->kh; ki++)
                    for (int kj = 0; kj < d->kw; kj++) {
                        int iy = oy * d->sh - d->pad_top + ki * d->dh;
                        int ix = ox * d->sw - d->pad_left + kj * d->dw;
                        if (iy < 0 || iy >= d->h || ix < 0 || ix >= d->w) continue;
                        for (int ci = 0; ci < d->c; ci++)
                            for (int f = 0; f < d->f; f++) {
                                int64_t xi = ((int64_t)(n * d->h + iy) * d->w + ix) * d->c + ci;
                                int64_t wi = ((ki * d->kw + kj) * d->c + ci) * d->f + f;
                                double g = dy[((int64_t)(n * d->oh + oy) * d->ow + ox) * d->f + f];
                                dx[xi] += g * w[wi];
                                dw[wi] += g * x[xi];
                            }
                    }
}

typedef struct conv_ctx {
    tfc_conv_desc d;
    double *x, *w, *wt, *y;
} conv_ctx;

static double conv_loss(void *p)
{
    conv_ctx *c = p;
    ref_conv(&c->d, c->x, c->w, c->y);
    return dot(c->y, c->wt, (int64_t)c->d.n * c->d.oh * c->d.ow * c->d.f);
}

/* Forward against direct summation; with grads == 1, backward data and filter against
 * finite differences of L = sum wt * conv(x, w); with grads == 2 (large cases) against the
 * direct adjoints. */
/* The forward result's absolute tolerance against the double-precision reference. */
static double conv_y_atol = 1e-5;

static void check_conv(tfc_backend *be, tfc_conv_desc d, int grads)
{
    const int64_t nx = (int64_t)d.n * d.h * d.w * d.c, nw = (int64_t)d.kh * d.kw * d.c * d.f;
    const int64_t ny = (int64_t)d.n * d.oh * d.ow * d.f;
    float *x = falloc(nx), *w = falloc(nw), *y = falloc(ny), *wt = falloc(ny);
    fill(x, nx, -1, 1);
    fill(w, nw, -1, 1);
    fill(wt, ny, -1, 1);
    for (int64_t i = 0; i < ny; i++) y[i] = NAN; /* forward overwrites */
    size_t wsb = be->ops->conv_workspace(be, &d);
    void *ws = wsb ? be->ops->alloc(be, wsb) : NULL;
    be->ops->conv_forward(be, &d, x, w, NULL, NULL, NULL, TFC_ACT_LINEAR, y, NULL, NULL, ws);
    conv_ctx ctx = {d, to_double(x, nx), to_double(w, nw), to_double(wt, ny),
                    malloc(sizeof(double) * (size_t)ny)};
    ref_conv(&d, ctx.x, ctx.w, ctx.y);
    int bad = compare("conv y", y, ctx.y, ny, 1e-5, conv_y_atol);
    /* with a bias, a normalisation, a residual and an activation (oneDNN's kernel applies
     * the first three and ReLU, tanh comes after): the values of conv, then bias_add,
     * bn_forward_infer, axpy and act_forward, to the bit (-0 == 0) */
    float *b = falloc(d.f), *fused = falloc(ny), *sep = falloc(ny), *bnp = falloc(4 * d.f);
    float *res = falloc(ny);
    fill(b, d.f, -1, 1);
    fill(res, ny, -1, 1);
    fill(bnp, 3 * d.f, -1, 1);
    fill(bnp + 3 * d.f, d.f, 0.1, 2); /* variances */
    const tfc_bn_params bn = {bnp, bnp + d.f, bnp + 2 * d.f, bnp + 3 * d.f, 1e-3f};
    /* the epilogues: bias, normalisation, residual, activation, then a pooling of the
     * result (pooled; what the convolution writes to y is then scratch): 1 max 2x2, 2
     * average 3x3 stride 2 SAME (clipped windows), 3 global average, 4 average 2x2. After
     * a bare Winograd kernel (bias and ReLU at most) the pooling reads its blocked output
     * (cpu_dnnl.c). */
    static const struct {
        int bias, bn, res;
        tfc_act act;
        int pool;
    } epi[] = {
        {1, 0, 0, TFC_ACT_RELU, 0},   {1, 0, 0, TFC_ACT_TANH, 0},   {1, 0, 0, TFC_ACT_LINEAR, 0},
        {1, 1, 0, TFC_ACT_RELU, 0},   {1, 1, 0, TFC_ACT_TANH, 0},   {0, 1, 0, TFC_ACT_LINEAR, 0},
        {1, 1, 1, TFC_ACT_RELU, 0},   {1, 1, 1, TFC_ACT_TANH, 0},   {1, 1, 1, TFC_ACT_LINEAR, 0},
        {1, 0, 0, TFC_ACT_RELU, 1},   {1, 0, 0, TFC_ACT_RELU, 2},   {1, 0, 0, TFC_ACT_RELU, 3},
        {0, 0, 0, TFC_ACT_LINEAR, 1}, {0, 0, 0, TFC_ACT_LINEAR, 2}, {1, 0, 0, TFC_ACT_TANH, 1},
        {1, 1, 0, TFC_ACT_RELU, 1},   {1, 1, 1, TFC_ACT_RELU, 3},   {0, 1, 1, TFC_ACT_TANH, 2},
        {1, 0, 0, TFC_ACT_RELU, 4},   {1, 1, 0, TFC_ACT_LINEAR, 4},
        {1, 1, 1, TFC_ACT_RELU6, 0},  {0, 0, 0, TFC_ACT_RELU6, 1},
    };
    tfc_pool_desc pools[5] = {
        {0},
        {d.n, d.oh, d.ow, d.f, 2, 2, 2, 2, 0, 0, d.oh / 2, d.ow / 2, 1},
        {d.n, d.oh, d.ow, d.f, 3, 3, 2, 2, 0, 0, (d.oh + 1) / 2, (d.ow + 1) / 2, 0},
        {d.n, d.oh, d.ow, d.f, d.oh, d.ow, d.oh, d.ow, 0, 0, 1, 1, 0},
        {d.n, d.oh, d.ow, d.f, 2, 2, 2, 2, 0, 0, d.oh / 2, d.ow / 2, 0}};
    int th = (pools[2].oh - 1) * 2 + 3 - d.oh, tw = (pools[2].ow - 1) * 2 + 3 - d.ow;
    pools[2].pad_top = th > 0 ? th / 2 : 0; /* SAME: half the padding before, rounded down */
    pools[2].pad_left = tw > 0 ? tw / 2 : 0;
    const int64_t np = ny; /* no pooling here gives more than its input */
    float *pooled = falloc(np), *pool_sep = falloc(np);
    for (size_t k = 0; k < sizeof epi / sizeof *epi; k++) {
        const float *bias = epi[k].bias ? b : NULL, *r = epi[k].res ? res : NULL;
        const tfc_bn_params *norm = epi[k].bn ? &bn : NULL;
        const tfc_act act = epi[k].act;
        const tfc_pool_desc *pool = epi[k].pool && pools[epi[k].pool].oh > 0 &&
                                            pools[epi[k].pool].ow > 0
                                        ? &pools[epi[k].pool]
                                        : NULL;
        if (epi[k].pool && !pool) continue; /* an output smaller than the window */
        for (int64_t i = 0; i < ny; i++) fused[i] = NAN;
        for (int64_t i = 0; i < np; i++) pooled[i] = NAN;
        be->ops->conv_forward(be, &d, x, w, bias, norm, r, act, fused, pool, pooled, ws);
        memcpy(sep, y, sizeof(float) * ny);
        if (bias) be->ops->bias_add(be, ny / d.f, d.f, bias, sep);
        if (norm)
            be->ops->bn_forward_infer(be, ny / d.f, d.f, sep, bn.gamma, bn.beta, bn.mean, bn.var,
                                      bn.eps, sep);
        if (r) be->ops->axpy(be, ny, 1.0f, r, sep);
        be->ops->act_forward(be, act, ny, d.f, sep, sep);
        int differ = 0;
        if (pool) {
            be->ops->pool_forward(be, pool, sep, pool_sep, NULL);
            const int64_t n_out = (int64_t)d.n * pool->oh * pool->ow * d.f;
            for (int64_t i = 0; i < n_out; i++) differ += !(pooled[i] == pool_sep[i]);
        } else {
            for (int64_t i = 0; i < ny; i++) differ += !(fused[i] == sep[i]);
        }
        if (differ)
            printf("\n  conv%s%s%s + %s, pooling %d: %d differ", bias ? " + bias" : "",
                   norm ? " + bn" : "", r ? " + residual" : "", tfc_act_names[act], epi[k].pool,
                   differ);
        bad += differ;
    }
    free(pooled), free(pool_sep);
    if (bad)
        printf("\n  conv n%d %dx%dx%d k%dx%d f%d s%d,%d d%d,%d pad %d,%d out %dx%d", d.n, d.h,
               d.w, d.c, d.kh, d.kw, d.f, d.sh, d.sw, d.dh, d.dw, d.pad_top, d.pad_left, d.oh,
               d.ow);
    CU_ASSERT_EQUAL(bad, 0);
    free(b), free(fused), free(sep), free(bnp), free(res);
    if (grads) {
        float *dx = falloc(nx), *dx0 = falloc(nx), *dw = falloc(nw), *dw0 = falloc(nw);
        fill(dx, nx, -1, 1);
        fill(dw, nw, -1, 1);
        memcpy(dx0, dx, sizeof(float) * nx);
        memcpy(dw0, dw, sizeof(float) * nw);
        be->ops->conv_backward_data(be, &d, wt, w, dx, 0, ws);
        be->ops->conv_backward_filter(be, &d, x, wt, dw, ws);
        double *gx = added(dx, dx0, nx), *gw = added(dw, dw0, nw);
        /* assigned (a block that starts at the convolution): what adding to zeros gives,
         * whatever dx held (NaN here) */
        float *da = falloc(nx), *dz = falloc(nx);
        for (int64_t i = 0; i < nx; i++) da[i] = NAN, dz[i] = 0.0f;
        be->ops->conv_backward_data(be, &d, wt, w, da, 1, ws);
        be->ops->conv_backward_data(be, &d, wt, w, dz, 0, ws);
        int assigned = 0;
        for (int64_t i = 0; i < nx; i++) assigned += !(da[i] == dz[i]);
        CU_ASSERT_EQUAL(assigned, 0);
        free(da), free(dz);
        if (grads == 1) {
            CU_ASSERT_EQUAL(grad_check("x", ctx.x, nx, gx, conv_loss, &ctx, 1e-3, 1e-4, 1e-5), 0);
            CU_ASSERT_EQUAL(grad_check("w", ctx.w, nw, gw, conv_loss, &ctx, 1e-3, 1e-4, 1e-5), 0);
        } else {
            double *rx = calloc((size_t)nx, sizeof(double)), *rw = calloc((size_t)nw, sizeof(double));
            /* the backward data op runs twice: its scratch must come back clean */
            memcpy(dx0, dx, sizeof(float) * nx);
            be->ops->conv_backward_data(be, &d, wt, w, dx, 0, ws);
            for (int64_t i = 0; i < nx; i++) gx[i] = (double)dx[i] - dx0[i];
            ref_conv_backward(&d, ctx.x, ctx.w, ctx.wt, rx, rw);
            int wrong = 0;
            for (int64_t i = 0; i < nx; i++) wrong += !close_to(gx[i], rx[i], 1e-4, 1e-4);
            for (int64_t i = 0; i < nw; i++) wrong += !close_to(gw[i], rw[i], 1e-4, 1e-3);
            CU_ASSERT_EQUAL(wrong, 0);
            free(rx), free(rw);
        }
        free(dx), free(dx0), free(dw), free(dw0), free(gx), free(gw);
    }
    be->ops->free(be, ws);
    free(x), free(w), free(y), free(wt), free(ctx.x), free(ctx.w), free(ctx.wt), free(ctx.y);
}

static void conv_cases(void)
{
    tfc_backend *be = backend();
    /* n, h, w, c, kh, kw, f, stride, dilation, same */
    check_conv(be, conv_desc(2, 7, 6, 3, 3, 3, 4, 1, 1, 0), 1);  /* valid */
    check_conv(be, conv_desc(2, 7, 8, 3, 3, 3, 4, 2, 1, 1), 1);  /* stride 2, asym SAME */
    check_conv(be, conv_desc(2, 9, 9, 2, 3, 3, 3, 1, 2, 0), 1);  /* dilation 2, valid */
    check_conv(be, conv_desc(1, 8, 7, 2, 3, 3, 3, 1, 2, 1), 1);  /* dilation 2, SAME */
    check_conv(be, conv_desc(2, 5, 6, 2, 2, 4, 3, 1, 1, 1), 1);  /* even kernel, SAME */
    check_conv(be, conv_desc(2, 5, 5, 2, 2, 2, 3, 1, 1, 1), 1);  /* pad 0 before, 1 after */
    check_conv(be, conv_desc(3, 4, 5, 6, 1, 1, 5, 1, 1, 0), 1);  /* 1x1: plain GEMM */
    check_conv(be, conv_desc(2, 6, 6, 3, 1, 1, 2, 2, 1, 1), 1);  /* 1x1 stride 2 */
    check_conv(be, conv_desc(2, 6, 7, 1, 5, 5, 2, 3, 1, 1), 1);  /* 1 channel, stride 3 */
    check_conv(be, conv_desc(2, 6, 6, 2, 3, 3, 40, 1, 1, 1), 1); /* short K, 32 + 8 filters */
    tfc_conv_desc odd = conv_desc(2, 6, 6, 2, 3, 3, 2, 2, 1, 0); /* pad_top 0, 2 after */
    odd.oh = odd.ow = 4;
    check_conv(be, odd, 1);
    /* several col chunks (~2.4 MB of col per image) and the parallel paths */
    check_conv(be, conv_desc(5, 64, 64, 16, 3, 3, 8, 1, 1, 1), 2);
    check_conv(be, conv_desc(6, 40, 40, 24, 3, 3, 8, 2, 1, 1), 2);
    /* oneDNN's chunks on 2 threads: 5 chunks, 4 of 2 images and a last of 1 */
    check_conv(be, conv_desc(9, 10, 10, 4, 3, 3, 8, 1, 1, 1), 2);
    check_conv(be, conv_desc(9, 9, 9, 3, 3, 3, 4, 2, 1, 0), 1);
    tfc_backend_free(be);
    /* one thread: the shared-chunk walk, several chunks */
    tfc_backend *one = tfc_cpu_backend_create(1);
    check_conv(one, conv_desc(5, 64, 64, 16, 3, 3, 8, 1, 1, 1), 2);
    check_conv(one, conv_desc(3, 7, 8, 3, 3, 3, 4, 2, 1, 1), 1);
    tfc_backend_free(one);
}

/* Both paths of the CPU backend: oneDNN's primitives where the build has them (cpu_dnnl.c),
 * and im2col + GEMM (cpu_conv.c), which TFC_CPU_CONV=im2col selects at creation. */
static int with_im2col(int on)
{
    if (on) return setenv("TFC_CPU_CONV", "im2col", 1);
    return unsetenv("TFC_CPU_CONV");
}

static void test_conv(void)
{
    tfc_backend *be = backend();
#ifdef TFC_HAVE_DNNL
    CU_ASSERT_PTR_NOT_NULL(be->impl); /* a build with oneDNN uses it */
#else
    CU_ASSERT_PTR_NULL(be->impl);
#endif
    tfc_backend_free(be);
    conv_cases();
    with_im2col(1);
    be = backend();
    CU_ASSERT_PTR_NULL(be->impl);
    tfc_backend_free(be);
    conv_cases();
    with_im2col(0);
}

/* Whether this machine has the AVX-512 subsets oneDNN's Winograd kernel needs. */
static int has_winograd(void)
{
#ifdef TFC_HAVE_DNNL
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq");
#else
    return 0;
#endif
}

/* Winograd's F(4x4, 3x3) (oneDNN's jit_wino_4x3), which 3x3 convolutions at stride 1 with at
 * least 32 channels in and out, multiples of 16, and 128 output tiles of 4x4 per call (or
 * chunk; 512 for the filter gradient) take on a machine with AVX-512: forward and
 * both gradients against the double-precision reference, the epilogue that follows it
 * against the separate ops to the bit (check_conv), on chunks and (on one thread) as one
 * call, SAME and VALID.
 * TFC_CPU_CONV=direct turns it off. */
static void test_conv_winograd(void)
{
    tfc_backend *be = backend();
    /* on 2 threads: 8 chunks of 2 images, 128 output tiles each (forward and data; the
     * filter gradient wants 512) */
    const tfc_conv_desc same = conv_desc(16, 32, 32, 32, 3, 3, 48, 1, 1, 1);
    const tfc_conv_desc valid = conv_desc(10, 34, 33, 48, 3, 3, 32, 1, 1, 0);
    /* fewer than two images per thread: one call on the team, direct (conv_workspace's
     * promise, cpu_dnnl.c); on one thread Winograd's (147 tiles) */
    const tfc_conv_desc team = conv_desc(3, 28, 28, 32, 3, 3, 32, 1, 1, 1);
    /* one image of 529 tiles: all three on one thread */
    const tfc_conv_desc big = conv_desc(1, 92, 92, 32, 3, 3, 32, 1, 1, 1);
    const tfc_conv_desc narrow = conv_desc(16, 32, 32, 16, 3, 3, 16, 1, 1, 1);
    const tfc_conv_desc strided = conv_desc(16, 32, 32, 32, 3, 3, 32, 2, 1, 1);
    const tfc_conv_desc few = conv_desc(16, 28, 28, 32, 3, 3, 32, 1, 1, 1); /* 98 tiles */
    const int wino = has_winograd();
    for (int op = 0; op < 3; op++) {
        CU_ASSERT(tfc_cpu_dnnl_winograd(be, (tfc_cpu_conv_op)op, &same) == (wino && op < 2));
        CU_ASSERT(tfc_cpu_dnnl_winograd(be, (tfc_cpu_conv_op)op, &valid) == (wino && op < 2));
        CU_ASSERT(!tfc_cpu_dnnl_winograd(be, (tfc_cpu_conv_op)op, &team));
        CU_ASSERT(!tfc_cpu_dnnl_winograd(be, (tfc_cpu_conv_op)op, &few));
        CU_ASSERT(!tfc_cpu_dnnl_winograd(be, (tfc_cpu_conv_op)op, &narrow));
        CU_ASSERT(!tfc_cpu_dnnl_winograd(be, (tfc_cpu_conv_op)op, &strided));
    }
    /* its transforms round more than the direct sum: 3.5e-5 at most here, where outputs reach
     * 28 (the direct kernels: 1.2e-5) */
    conv_y_atol = 1e-4;
    check_conv(be, same, 2);
    check_conv(be, valid, 2);
    check_conv(be, team, 2);
    /* an inference pass takes oneDNN's inference kernel (the weights transformed by their
     * reorder, not in the call): as close to the reference, every epilogue and pooling
     * the separate ops' values. Without AVX-512 it takes tfc's own F(4x4, 3x3)
     * (cpu_winograd.c, conv_winograd_f2), whose errors reach 1.6e-4 here */
    be->inference_pass = 1;
    conv_y_atol = 2.5e-4;
    check_conv(be, same, 0);
    check_conv(be, valid, 0);
    conv_y_atol = 1e-4;
    be->inference_pass = 0;
    tfc_backend_free(be);
    tfc_backend *one = tfc_cpu_backend_create(1);
    for (int op = 0; op < 3; op++) {
        CU_ASSERT(tfc_cpu_dnnl_winograd(one, (tfc_cpu_conv_op)op, &team) == (wino && op < 2));
        CU_ASSERT(tfc_cpu_dnnl_winograd(one, (tfc_cpu_conv_op)op, &big) == wino);
    }
    check_conv(one, team, 2);
    check_conv(one, big, 2);
    tfc_backend_free(one);
    setenv("TFC_CPU_CONV", "direct", 1);
    be = backend();
    CU_ASSERT(!tfc_cpu_dnnl_winograd(be, TFC_CPU_CONV_FORWARD, &same));
    conv_y_atol = 1e-5;
    check_conv(be, same, 2);
    tfc_backend_free(be);
    unsetenv("TFC_CPU_CONV");
}

/* y = conv_forward(x, w) (linear, no epilogue) on be, through a workspace of its own. */
static void conv_run(tfc_backend *be, const tfc_conv_desc *d, const float *x, const float *w,
                     float *y)
{
    size_t wsb = be->ops->conv_workspace(be, d);
    void *ws = wsb ? be->ops->alloc(be, wsb) : NULL;
    be->ops->conv_forward(be, d, x, w, NULL, NULL, NULL, TFC_ACT_LINEAR, y, NULL, NULL, ws);
    if (ws) be->ops->free(be, ws);
}

static int64_t bits_differ(const float *a, const float *b, int64_t n)
{
    return n - (int64_t)(memcmp(a, b, (size_t)n * sizeof(float)) == 0) * n;
}

/* Winograd's F(2x2, 3x3) and F(4x4, 3x3) of cpu_winograd.c (inference passes on AVX2 + FMA without AVX-512;
 * forced on here wherever the CPU has AVX2 and FMA): against the double reference with every
 * epilogue and pooling the separate ops' values (check_conv), on outputs of odd size (partial
 * tiles), a filter count not a multiple of 16, blocks that split the filters into groups
 * (batch 1 at 7x7 on 2 threads), valid and same padding. The same bits on 1, 2 and 3 threads,
 * in a batch or alone, and on a frozen backend that keeps the transformed weights, also after
 * an upload overwrote them; training passes and the shapes it does not take stay on the other
 * paths (their bits). */
static void test_conv_winograd_f2(void)
{
    if (!tfc_cpu_winograd_isa(1)) {
        printf("\n  no AVX2 + FMA here: conv_winograd_f2 skipped");
        return;
    }
    /* F(4x4, 3x3) where an image has 12 tiles of 4x4 or more and they save a quarter of the
     * work, else F(2x2, 3x3) */
    const tfc_conv_desc shapes[] = {
        conv_desc(1, 28, 28, 32, 3, 3, 32, 1, 1, 1),  /* 4x4: 49 tiles in 2 blocks */
        conv_desc(1, 26, 26, 32, 3, 3, 64, 1, 1, 0),  /* 4x4: fashion_cnn's second convolution */
        conv_desc(1, 14, 14, 64, 3, 3, 64, 1, 1, 1),  /* 4x4: 16 tiles, two filter groups */
        conv_desc(2, 15, 13, 16, 3, 3, 24, 1, 1, 1),  /* 4x4: partial tiles; 8 filters past 16 */
        conv_desc(1, 7, 7, 128, 3, 3, 128, 1, 1, 1), /* 2x2: 16 tiles, two filter groups */
        conv_desc(3, 9, 6, 16, 3, 3, 24, 1, 1, 1),   /* 2x2: odd rows; 8 filters past 16 */
        conv_desc(2, 5, 8, 24, 3, 3, 40, 1, 1, 0),   /* 2x2: a 3x6 output */
    };
    const int ns = (int)(sizeof shapes / sizeof *shapes);
    tfc_backend *be = backend();
    be->inference_pass = 1;
    /* outputs reach 30 to 48 here. Errors against double, one image (/tmp programs, x and w
     * uniform in [-1, 1] as here): F(2x2, 3x3) at 7x7x128 1.7e-5 at most (oneDNN's direct
     * kernel 4e-5), at 28x28x32 5.4e-6 (1.5e-5); F(4x4, 3x3) at 28x28x32 9.4e-5, 14x14x64
     * 1.3e-4 (2.4e-5), 28x28x128 3.3e-4 (5.3e-5): its transforms' coefficients reach 5 and
     * 8 */
    conv_y_atol = 2.5e-4;
    for (int i = 0; i < ns; i++) {
        CU_ASSERT(tfc_cpu_winograd_fits(be, &shapes[i]));
        check_conv(be, shapes[i], 0);
    }
    const tfc_conv_desc no[] = {conv_desc(1, 8, 8, 8, 3, 3, 16, 1, 1, 1),
                                conv_desc(1, 8, 8, 16, 3, 3, 16, 2, 1, 1),
                                conv_desc(1, 8, 8, 16, 3, 3, 16, 1, 2, 1),
                                conv_desc(1, 8, 8, 16, 5, 5, 16, 1, 1, 1),
                                conv_desc(1, 8, 8, 16, 3, 3, 20, 1, 1, 1)};
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) CU_ASSERT(!tfc_cpu_winograd_fits(be, &no[i]));
    tfc_backend *one = tfc_cpu_backend_create(1), *three = tfc_cpu_backend_create(3);
    tfc_backend *frozen = backend();
    one->inference_pass = three->inference_pass = frozen->inference_pass = 1;
    frozen->frozen = 1;
    for (int i = 0; i < ns; i++) {
        tfc_conv_desc d = shapes[i], d1 = d;
        d1.n = 1;
        const int64_t nx = (int64_t)d.n * d.h * d.w * d.c, nw = (int64_t)9 * d.c * d.f;
        const int64_t ny = (int64_t)d.n * d.oh * d.ow * d.f, ny1 = ny / d.n;
        float *x = falloc(nx), *w = falloc(nw), *w2 = falloc(nw), *y[8];
        for (int k = 0; k < 8; k++) y[k] = falloc(ny);
        fill(x, nx, -1, 1), fill(w, nw, -1, 1), fill(w2, nw, -1, 1);
        conv_run(be, &d, x, w, y[0]);
        conv_run(one, &d, x, w, y[1]);
        conv_run(three, &d, x, w, y[2]);
        conv_run(frozen, &d, x, w, y[3]);
        conv_run(frozen, &d, x, w, y[4]);  /* the kept weights */
        conv_run(be, &d1, x + (nx - nx / d.n), w, y[5]); /* the last image alone */
        CU_ASSERT_EQUAL(bits_differ(y[0], y[1], ny), 0);
        CU_ASSERT_EQUAL(bits_differ(y[0], y[2], ny), 0);
        CU_ASSERT_EQUAL(bits_differ(y[0], y[3], ny), 0);
        CU_ASSERT_EQUAL(bits_differ(y[0], y[4], ny), 0);
        CU_ASSERT_EQUAL(bits_differ(y[0] + ny - ny1, y[5], ny1), 0);
        /* new weights through upload: the frozen backend transforms them again */
        frozen->ops->upload(frozen, w, w2, (size_t)nw * sizeof(float));
        conv_run(frozen, &d, x, w, y[6]);
        conv_run(be, &d, x, w2, y[7]);
        CU_ASSERT_EQUAL(bits_differ(y[6], y[7], ny), 0);
        CU_ASSERT(bits_differ(y[6], y[0], ny) > 0);
        /* a training pass, and Winograd turned off: the direct path's bits, which differ */
        be->inference_pass = 0;
        conv_run(be, &d, x, w2, y[1]);
        be->inference_pass = 1;
        CU_ASSERT(tfc_cpu_winograd_isa(0));
        conv_run(be, &d, x, w2, y[2]);
        CU_ASSERT(tfc_cpu_winograd_isa(1));
        CU_ASSERT_EQUAL(bits_differ(y[1], y[2], ny), 0);
        if (ny > 4096) CU_ASSERT(bits_differ(y[1], y[7], ny) > 0);
        for (int k = 0; k < 8; k++) free(y[k]);
        free(x), free(w), free(w2);
    }
    tfc_cpu_winograd_isa(-1);
    conv_y_atol = 1e-5;
    tfc_backend_free(one), tfc_backend_free(three), tfc_backend_free(frozen), tfc_backend_free(be);
}

/* The outputs of y [ny] (f channels) not close to a direct convolution's sums yd, rounded to
 * float and then finished step by step as the separate ops round them (bias, normalisation,
 * residual, activation; NULL: the step left out), into want. */
static int epilogue_misses(tfc_backend *one, const double *yd, int64_t ny, int f,
                           const float *bias, const tfc_bn_params *bn, const float *residual,
                           tfc_act act, float *want, const float *y)
{
    for (int64_t j = 0; j < ny; j++) want[j] = (float)yd[j];
    if (bias) one->ops->bias_add(one, ny / f, f, bias, want);
    if (bn)
        one->ops->bn_forward_infer(one, ny / f, f, want, bn->gamma, bn->beta, bn->mean, bn->var,
                                   bn->eps, want);
    if (residual) one->ops->axpy(one, ny, 1.0f, residual, want);
    one->ops->act_forward(one, act, ny, f, want, want);
    int bad = 0;
    for (int64_t j = 0; j < ny; j++) bad += !close_to(y[j], want[j], 1e-4, 1e-5);
    return bad;
}

/* Convolutions of one input channel in inference passes (cpu_conv_c1.c, where the CPU has
 * AVX2 and FMA): 'same' and 'valid', strides, dilations, kernels 3x3 and 5x3, filter counts
 * of one to five vectors of 8 (a group of 4 and what is left), each epilogue (bias,
 * normalisation, residual, ReLU or relu6); against direct summation in double with the
 * epilogue's steps applied in float as the separate ops round them, and bit for bit on 1 and
 * 2 threads and (on 2 threads, where a batch of 2 or 3 images is still few) for an image
 * alone and in the batch; a max pooling fused (pool_forward's values, on few images and on
 * many, where the kernel takes no unpooled call). */
static void test_conv_c1(void)
{
    tfc_conv_desc shapes[] = {conv_desc(1, 28, 28, 1, 3, 3, 32, 1, 1, 1),
                              conv_desc(1, 13, 11, 1, 3, 3, 24, 2, 1, 0),
                              conv_desc(2, 9, 10, 1, 3, 3, 8, 1, 2, 1),
                              conv_desc(2, 12, 7, 1, 5, 3, 40, 1, 1, 1),
                              conv_desc(1, 8, 8, 1, 3, 3, 16, 2, 1, 1)};
    tfc_backend *one = tfc_cpu_backend_create(1), *two = backend();
    one->inference_pass = two->inference_pass = 1;
    int ran = 0, bad = 0, pools = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const tfc_conv_desc d = shapes[i];
        const int64_t nx = (int64_t)d.n * d.h * d.w, nw = (int64_t)d.kh * d.kw * d.f;
        const int64_t ny = (int64_t)d.n * d.oh * d.ow * d.f, per = ny / d.n;
        float *x = falloc(nx), *w = falloc(nw), *b = falloc(d.f), *res = falloc(ny);
        float *bnp = falloc(4 * d.f), *y1 = falloc(ny), *y2 = falloc(ny), *last = falloc(per);
        float *want = falloc(ny);
        double *xd = malloc(sizeof(double) * nx), *wd = malloc(sizeof(double) * nw);
        double *yd = malloc(sizeof(double) * ny);
        fill(x, nx, -1, 1), fill(w, nw, -1, 1), fill(b, d.f, -1, 1), fill(res, ny, -1, 1);
        fill(bnp, 3 * d.f, -1, 1), fill(bnp + 3 * d.f, d.f, 0.1, 2);
        for (int64_t j = 0; j < nx; j++) xd[j] = x[j];
        for (int64_t j = 0; j < nw; j++) wd[j] = w[j];
        ref_conv(&d, xd, wd, yd);
        const tfc_bn_params bn = {bnp, bnp + d.f, bnp + 2 * d.f, bnp + 3 * d.f, 1e-3f};
        for (int e = 0; e < 5; e++) {
            const float *bias = e == 1 || e == 3 ? b : NULL, *r = e == 3 ? res : NULL;
            const tfc_bn_params *norm = e >= 2 ? &bn : NULL;
            const tfc_act act = e == 1 || e == 3 ? TFC_ACT_RELU : e == 2 ? TFC_ACT_RELU6
                                                                   : TFC_ACT_LINEAR;
            if (!tfc_cpu_conv_c1_forward(two, &d, x, w, bias, norm, r, act, y2, NULL, NULL))
                continue;
            ran++;
            if (d.n == 1) /* one thread: one image only */
                CU_ASSERT(
                    tfc_cpu_conv_c1_forward(one, &d, x, w, bias, norm, r, act, y1, NULL, NULL))
            else
                memcpy(y1, y2, sizeof(float) * (size_t)ny);
            tfc_conv_desc d1 = d;
            d1.n = 1;
            CU_ASSERT(tfc_cpu_conv_c1_forward(two, &d1, x + nx - nx / d.n, w, bias, norm,
                                              r ? r + ny - per : NULL, act, last, NULL, NULL));
            CU_ASSERT_EQUAL(bits_differ(y1, y2, ny), 0);
            CU_ASSERT_EQUAL(bits_differ(y1 + ny - per, last, per), 0);
            /* a max pooling whose windows tile the output (2x2 and 3x2, the last row or
             * column left out where the output is odd) fused: pool_forward's values; an
             * overlapping or average pooling is not taken */
            for (int k = 0; k < 4; k++) { /* 2x2, 3x2, 3x2 of stride 2 (overlapping), avg */
                const int kh = k == 1 || k == 2 ? 3 : 2, sh = k == 1 ? 3 : 2;
                const tfc_pool_desc pd = {.n = d.n, .h = d.oh, .w = d.ow, .c = d.f, .kh = kh,
                                          .kw = 2, .sh = sh, .sw = 2, .oh = (d.oh - kh) / sh + 1,
                                          .ow = d.ow / 2, .is_max = k < 3};
                const int64_t np = (int64_t)d.n * pd.oh * pd.ow * d.f;
                float *pw = falloc(np), *pg = falloc(np), *scratch = falloc(ny);
                one->ops->pool_forward(one, &pd, y1, pw, NULL);
                const int got = tfc_cpu_conv_c1_forward(two, &d, x, w, bias, norm, r, act,
                                                        scratch, &pd, pg);
                CU_ASSERT_EQUAL(got, k < 2 ? 2 : 1);
                if (got == 2) CU_ASSERT_EQUAL(bits_differ(pw, pg, np), 0);
                pools += got == 2;
                free(pw), free(pg), free(scratch);
            }
            bad += epilogue_misses(one, yd, ny, d.f, bias, norm, r, act, want, y1);
        }
        free(x), free(w), free(b), free(res), free(bnp), free(y1), free(y2), free(last);
        free(want), free(xd), free(wd), free(yd);
    }
    CU_ASSERT_EQUAL(bad, 0);
    /* where the CPU has AVX2 and FMA it ran; never outside inference passes */
    __builtin_cpu_init();
    CU_ASSERT_EQUAL(ran > 0, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
    CU_ASSERT_EQUAL(pools > 0, ran > 0);
    if (ran) { /* fused on 5 images (unfused refused): pool_forward of each image's output */
        const tfc_conv_desc d5 = conv_desc(5, 12, 10, 1, 3, 3, 16, 1, 1, 1);
        tfc_conv_desc d1 = d5;
        d1.n = 1;
        const tfc_pool_desc pd = {.n = 5, .h = 12, .w = 10, .c = 16, .kh = 2, .kw = 2, .sh = 2,
                                  .sw = 2, .oh = 6, .ow = 5, .is_max = 1};
        const int64_t per = 12 * 10 * 16, np = 5 * 6 * 5 * 16;
        float *x = falloc(5 * 120), *w = falloc(9 * 16), *y = falloc(5 * per);
        float *pw = falloc(np), *pg = falloc(np);
        fill(x, 5 * 120, -1, 1), fill(w, 9 * 16, -1, 1);
        for (int i = 0; i < 5; i++)
            CU_ASSERT(tfc_cpu_conv_c1_forward(two, &d1, x + i * 120, w, NULL, NULL, NULL,
                                              TFC_ACT_RELU, y + i * per, NULL, NULL));
        one->ops->pool_forward(one, &pd, y, pw, NULL);
        CU_ASSERT(!tfc_cpu_conv_c1_forward(two, &d5, x, w, NULL, NULL, NULL, TFC_ACT_RELU, y,
                                           NULL, NULL));
        CU_ASSERT_EQUAL(tfc_cpu_conv_c1_forward(two, &d5, x, w, NULL, NULL, NULL, TFC_ACT_RELU,
                                                y, &pd, pg), 2);
        CU_ASSERT_EQUAL(bits_differ(pw, pg, np), 0);
        free(x), free(w), free(y), free(pw), free(pg);
    }
    one->inference_pass = 0;
    const tfc_conv_desc d = shapes[0];
    float *x = falloc(2 * (int64_t)d.h * d.w), *w = falloc(9 * d.f), *y = falloc(2 * 784 * d.f);
    CU_ASSERT(!tfc_cpu_conv_c1_forward(one, &d, x, w, NULL, NULL, NULL, TFC_ACT_LINEAR, y, NULL,
                                       NULL));
    one->inference_pass = 1; /* nor for as many images as twice the threads, unpooled */
    tfc_conv_desc d2 = d;
    d2.n = 2;
    CU_ASSERT(!tfc_cpu_conv_c1_forward(one, &d2, x, w, NULL, NULL, NULL, TFC_ACT_LINEAR, y, NULL,
                                       NULL));
    free(x), free(w), free(y);
    tfc_backend_free(one), tfc_backend_free(two);
}

/* Pointwise convolutions in inference passes (cpu_conv_1x1.c, where the CPU has AVX2 and
 * FMA): against the direct sums in double (rounded to float, then bias, the normalisation,
 * the residual and the activation as their ops round them), with the same bits on one
 * thread and two, for the last image alone and on the AVX2 and AVX-512 tiles. Shapes whose
 * pixels leave every tile size a remainder, filters 8 to 136 (the 64-, 48-, 32-wide groups
 * and the 8-wide rest), channels 1 to 300. */
static void test_conv_1x1(void)
{
    tfc_conv_desc shapes[] = {conv_desc(1, 28, 28, 16, 1, 1, 64, 1, 1, 1),
                              conv_desc(1, 7, 7, 192, 1, 1, 48, 1, 1, 1),
                              conv_desc(3, 5, 9, 24, 1, 1, 96, 1, 1, 0),
                              conv_desc(2, 14, 14, 3, 1, 1, 8, 1, 1, 1),
                              conv_desc(1, 1, 13, 300, 1, 1, 136, 1, 1, 1),
                              conv_desc(2, 3, 5, 40, 1, 1, 56, 1, 1, 1),
                              conv_desc(1, 4, 4, 1, 1, 1, 40, 1, 1, 1),
                              conv_desc(5, 7, 7, 33, 1, 1, 24, 1, 1, 1)};
    tfc_backend *one = tfc_cpu_backend_create(1), *two = backend();
    one->inference_pass = two->inference_pass = 1;
    int ran = 0, bad = 0, isas = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const tfc_conv_desc d = shapes[i];
        const int64_t nx = (int64_t)d.n * d.h * d.w * d.c, nw = (int64_t)d.c * d.f;
        const int64_t ny = (int64_t)d.n * d.oh * d.ow * d.f, per = ny / d.n;
        float *x = falloc(nx), *w = falloc(nw), *b = falloc(d.f), *res = falloc(ny);
        float *bnp = falloc(4 * d.f), *y1 = falloc(ny), *y2 = falloc(ny), *last = falloc(per);
        float *want = falloc(ny);
        double *xd = malloc(sizeof(double) * nx), *wd = malloc(sizeof(double) * nw);
        double *yd = malloc(sizeof(double) * ny);
        fill(x, nx, -1, 1), fill(w, nw, -1, 1), fill(b, d.f, -1, 1), fill(res, ny, -1, 1);
        fill(bnp, 3 * d.f, -1, 1), fill(bnp + 3 * d.f, d.f, 0.1, 2);
        for (int64_t j = 0; j < nx; j++) xd[j] = x[j];
        for (int64_t j = 0; j < nw; j++) wd[j] = w[j];
        ref_conv(&d, xd, wd, yd);
        const tfc_bn_params bn = {bnp, bnp + d.f, bnp + 2 * d.f, bnp + 3 * d.f, 1e-3f};
        for (int e = 0; e < 5; e++) {
            const float *bias = e == 1 || e == 3 ? b : NULL, *r = e >= 3 ? res : NULL;
            const tfc_bn_params *norm = e >= 2 ? &bn : NULL;
            const tfc_act act = e == 1 || e == 3 ? TFC_ACT_RELU : e == 2 ? TFC_ACT_RELU6
                                                                   : TFC_ACT_LINEAR;
            if (!tfc_cpu_conv_1x1_forward(two, &d, x, w, bias, norm, r, act, y2)) continue;
            ran++;
            CU_ASSERT(tfc_cpu_conv_1x1_forward(one, &d, x, w, bias, norm, r, act, y1));
            CU_ASSERT_EQUAL(bits_differ(y1, y2, ny), 0);
            tfc_conv_desc d1 = d;
            d1.n = 1;
            CU_ASSERT(tfc_cpu_conv_1x1_forward(two, &d1, x + nx - nx / d.n, w, bias, norm,
                                               r ? r + ny - per : NULL, act, last));
            CU_ASSERT_EQUAL(bits_differ(y1 + ny - per, last, per), 0);
            for (int isa = 1; isa <= 2; isa++) /* the other tiles: the same bits */
                if (tfc_cpu_conv_1x1_isa(isa)) {
                    isas += isa == 2;
                    CU_ASSERT(tfc_cpu_conv_1x1_forward(two, &d, x, w, bias, norm, r, act, y2));
                    CU_ASSERT_EQUAL(bits_differ(y1, y2, ny), 0);
                }
            tfc_cpu_conv_1x1_isa(-1);
            bad += epilogue_misses(one, yd, ny, d.f, bias, norm, r, act, want, y1);
        }
        free(x), free(w), free(b), free(res), free(bnp), free(y1), free(y2), free(last);
        free(want), free(xd), free(wd), free(yd);
    }
    CU_ASSERT_EQUAL(bad, 0);
    /* where the CPU has AVX2 and FMA it ran (and both tiles where it has AVX-512); never
     * outside inference passes, nor for a stride, padding or filters it does not take */
    __builtin_cpu_init();
    CU_ASSERT_EQUAL(ran > 0, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
    CU_ASSERT_EQUAL(isas > 0, ran > 0 && __builtin_cpu_supports("avx512f") &&
                                  __builtin_cpu_supports("avx512vl"));
    const tfc_conv_desc no[] = {conv_desc(1, 8, 8, 16, 1, 1, 32, 2, 1, 1),
                                conv_desc(1, 8, 8, 16, 1, 1, 20, 1, 1, 1),
                                conv_desc(1, 8, 8, 16, 3, 3, 32, 1, 1, 1)};
    float *x = falloc(8 * 8 * 16), *w = falloc(9 * 16 * 32), *y = falloc(8 * 8 * 32);
    for (int i = 0; i < 3; i++)
        CU_ASSERT(!tfc_cpu_conv_1x1_forward(one, &no[i], x, w, NULL, NULL, NULL,
                                            TFC_ACT_LINEAR, y));
    one->inference_pass = 0;
    const tfc_conv_desc d = shapes[0];
    CU_ASSERT(!tfc_cpu_conv_1x1_forward(one, &d, x, w, NULL, NULL, NULL, TFC_ACT_LINEAR, y));
    free(x), free(w), free(y);
    tfc_backend_free(one), tfc_backend_free(two);
}

/* gemm_weights (a Dense kernel's or an attention projection's product): in an inference
 * pass on AVX2 + FMA the panel kernel, with the same bits on a frozen backend (panels kept)
 * and one that is not (packed per call), on one thread and two, against the double sums;
 * a write over the weights (all of them, or their last float) reaches the next call; outside
 * an inference pass, or with alpha or beta not 1 and 0, it is gemm's call. One row (the
 * four-chain walk) and many (row shares, chunks of rows). */
static void test_gemm_weights(void)
{
    const int shapes[][3] = {{2, 10, 3}, {37, 100, 784}, {8, 512, 64}, {64, 48, 129},
                             {300, 40, 50}, {203, 24, 2000}, {1, 300, 784}, {1, 40, 7}};
    tfc_backend *frozen = backend(), *plain = backend(), *one = tfc_cpu_backend_create(1);
    frozen->frozen = 1;
    int bad = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const int m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
        float *a = falloc((int64_t)m * k), *b = falloc((int64_t)k * n), *b2 = falloc((int64_t)k * n);
        float *got = falloc((int64_t)m * n), *want = falloc((int64_t)m * n);
        float *ref = falloc((int64_t)m * n);
        fill(a, (int64_t)m * k, -1, 1), fill(b, (int64_t)k * n, -1, 1), fill(b2, (int64_t)k * n, -1, 1);
        for (int step = 0; step < 3; step++) {
            if (step == 1) frozen->ops->upload(frozen, b, b2, (size_t)k * n * sizeof(float));
            if (step == 2) { /* the last float only */
                b2[(int64_t)k * n - 1] = 0.75f;
                frozen->ops->upload(frozen, b + (int64_t)k * n - 1, b2 + (int64_t)k * n - 1, 4);
            }
            frozen->inference_pass = plain->inference_pass = one->inference_pass = 1;
            frozen->ops->gemm_weights(frozen, 0, 0, m, n, k, 1.f, a, k, b, n, 0.f, got, n);
            plain->ops->gemm_weights(plain, 0, 0, m, n, k, 1.f, a, k, b, n, 0.f, want, n);
            CU_ASSERT_EQUAL(bits_differ(got, want, (int64_t)m * n), 0);
            one->ops->gemm_weights(one, 0, 0, m, n, k, 1.f, a, k, b, n, 0.f, want, n);
            CU_ASSERT_EQUAL(bits_differ(got, want, (int64_t)m * n), 0);
            for (int r = 0; r < m; r++)
                for (int c = 0; c < n; c++) {
                    double sum = 0;
                    for (int l = 0; l < k; l++)
                        sum += (double)a[(int64_t)r * k + l] * b[(int64_t)l * n + c];
                    bad += !close_to(got[(int64_t)r * n + c], sum, 1e-5, 1e-5 * k);
                }
            /* a training pass: gemm's own call, the same bits as gemm */
            frozen->inference_pass = 0;
            frozen->ops->gemm_weights(frozen, 0, 0, m, n, k, 1.f, a, k, b, n, 0.f, got, n);
            frozen->ops->gemm(frozen, 0, 0, m, n, k, 1.f, a, k, b, n, 0.f, ref, n);
            CU_ASSERT_EQUAL(bits_differ(got, ref, (int64_t)m * n), 0);
        }
        /* beta 1 accumulates (gemm's call) */
        frozen->inference_pass = 1;
        memcpy(got, ref, sizeof(float) * (size_t)m * n), memcpy(want, ref, sizeof(float) * (size_t)m * n);
        frozen->ops->gemm_weights(frozen, 0, 0, m, n, k, 1.f, a, k, b, n, 1.f, got, n);
        frozen->ops->gemm(frozen, 0, 0, m, n, k, 1.f, a, k, b, n, 1.f, want, n);
        CU_ASSERT_EQUAL(bits_differ(got, want, (int64_t)m * n), 0);
        free(a), free(b), free(b2), free(got), free(want), free(ref);
    }
    CU_ASSERT_EQUAL(bad, 0);
    tfc_backend_free(frozen), tfc_backend_free(plain), tfc_backend_free(one);
}

/* A frozen backend keeps oneDNN's reorder of each convolution's weights (cpu_dnnl.c,
 * weights_in) and reorders again only after a write overlaps them: writes of activations (an
 * upload of the input) keep the reorders, and new weights uploaded into the first part of
 * the weights, into their last float, or over them all, are used on the next call: the
 * values a backend that keeps nothing gives. A 1x1 (of 20 filters: cpu_conv_1x1.c's kernel
 * takes multiples of 8) and a 3x3 convolution, each with two sets of weights (two layers of
 * one shape). */
static void conv_kept(void)
{
    const tfc_conv_desc shapes[] = {conv_desc(1, 8, 8, 16, 1, 1, 20, 1, 1, 1),
                                    conv_desc(2, 9, 9, 16, 3, 3, 16, 1, 1, 1)};
    tfc_backend *frozen = backend(), *plain = backend();
    frozen->frozen = frozen->inference_pass = plain->inference_pass = 1;
    for (int i = 0; i < 2; i++) {
        const tfc_conv_desc d = shapes[i];
        const int64_t nx = (int64_t)d.n * d.h * d.w * d.c, nw = (int64_t)d.kh * d.kw * d.c * d.f;
        const int64_t ny = (int64_t)d.n * d.oh * d.ow * d.f;
        float *x = falloc(nx), *x2 = falloc(nx), *w[2] = {falloc(nw), falloc(nw)};
        float *w2 = falloc(nw), *got = falloc(ny), *want = falloc(ny);
        fill(x, nx, -1, 1), fill(x2, nx, -1, 1), fill(w[0], nw, -1, 1), fill(w[1], nw, -1, 1);
        fill(w2, nw, -1, 1);
        for (int k = 0; k < 2; k++) conv_run(frozen, &d, x, w[k], got); /* reorders kept */
        for (int step = 0; step < 5; step++) {
            const int k = step % 2;
            if (step == 1) frozen->ops->upload(frozen, x, x2, (size_t)nx * sizeof(float));
            if (step == 2) frozen->ops->upload(frozen, w[k], w2, sizeof(float) * 5);
            if (step == 3) frozen->ops->upload(frozen, w[k] + nw - 1, w2, sizeof(float));
            if (step == 4) frozen->ops->upload(frozen, w[k], w2, (size_t)nw * sizeof(float));
            conv_run(frozen, &d, x, w[k], got);
            conv_run(plain, &d, x, w[k], want);
            if (bits_differ(got, want, ny)) printf("\n  conv kept: shape %d, step %d differs", i, step);
            CU_ASSERT_EQUAL(bits_differ(got, want, ny), 0);
        }
        free(x), free(x2), free(w[0]), free(w[1]), free(w2), free(got), free(want);
    }
    tfc_backend_free(frozen), tfc_backend_free(plain);
}

/* Threads claim im2col's convolution chunks dynamically (cpu_conv.c), oneDNN partitions
 * statically: with 5 threads (more than this machine's cores, so the claims vary) forward,
 * data and filter gradients repeat their bits over 10 calls, and agree with 1 thread, on
 * either path. 64 images of 24x24x8 make 22 im2col chunks of 3, so some filter slots sum
 * several chunks. */
static void conv_repeat(void)
{
    const tfc_conv_desc d = conv_desc(64, 24, 24, 8, 3, 3, 16, 1, 1, 1);
    const int64_t nx = (int64_t)d.n * d.h * d.w * d.c, ny = (int64_t)d.n * d.oh * d.ow * d.f;
    const int64_t nw = (int64_t)d.kh * d.kw * d.c * d.f, nout = ny + nx + nw;
    float *x = malloc(sizeof(float) * nx), *w = malloc(sizeof(float) * nw);
    float *dy = malloc(sizeof(float) * ny), *first = malloc(sizeof(float) * nout);
    float *got = malloc(sizeof(float) * nout), *one = malloc(sizeof(float) * nout);
    TFC_ASSERT(x && w && dy && first && got && one);
    fill(x, nx, -1, 1), fill(w, nw, -0.5, 0.5), fill(dy, ny, -1, 1);
    int differ = 0;
    for (int run = -1; run < 10; run++) {
        tfc_backend *be = tfc_cpu_backend_create(run < 0 ? 1 : 5);
        float *out = run < 0 ? one : run == 0 ? first : got;
        void *ws = be->ops->alloc(be, be->ops->conv_workspace(be, &d));
        memset(out + ny, 0, sizeof(float) * (nx + nw));
        be->ops->conv_forward(be, &d, x, w, NULL, NULL, NULL, TFC_ACT_LINEAR, out, NULL, NULL, ws);
        be->ops->conv_backward_data(be, &d, dy, w, out + ny, 0, ws);
        be->ops->conv_backward_filter(be, &d, x, dy, out + ny + nx, ws);
        be->ops->free(be, ws);
        tfc_backend_free(be);
        if (run > 0) differ += memcmp(first, got, sizeof(float) * nout) != 0;
    }
    CU_ASSERT_EQUAL(differ, 0);
    /* 1 and 5 threads add in different orders: each of y, dx, dw within 2e-5 of its largest
     * magnitude (a filter gradient sums 36,864 products; oneDNN and im2col alike) */
    const int64_t off[4] = {0, ny, ny + nx, nout};
    int bad = 0;
    for (int part = 0; part < 3; part++) {
        double big = 0;
        for (int64_t i = off[part]; i < off[part + 1]; i++)
            if (fabs(one[i]) > big) big = fabs(one[i]);
        for (int64_t i = off[part]; i < off[part + 1]; i++)
            bad += !close_to(first[i], one[i], 0, 2e-5 * big);
    }
    CU_ASSERT_EQUAL(bad, 0);
    free(x), free(w), free(dy), free(first), free(got), free(one);
}

static void test_conv_threads_repeat(void)
{
    conv_repeat();
    with_im2col(1);
    conv_repeat();
    with_im2col(0);
}

/* ---- pooling ----------------------------------------------------------------------- */

static tfc_pool_desc pool_desc(int n, int h, int w, int c, int k, int s, int same, int is_max)
{
    tfc_pool_desc p = {.n = n, .h = h, .w = w, .c = c, .kh = k, .kw = k, .sh = s, .sw = s,
                       .is_max = is_max};
    tf_dim(h, k, s, 1, same, &p.oh, &p.pad_top);
    tf_dim(w, k, s, 1, same, &p.ow, &p.pad_left);
    return p;
}

/* Max or mean over the window cells inside the image. */
static void ref_pool(const tfc_pool_desc *d, const double *x, double *y)
{
    for (int n = 0; n < d->n; n++)
        for (int oy = 0; oy < d->oh; oy++)
            for (int ox = 0; ox < d->ow; ox++)
                for (int c = 0; c < d->c; c++) {
                    double best = -INFINITY, sum = 0;
                    int count = 0;
                    for (int ki = 0; ki < d->kh; ki++)
                        for (int kj = 0; kj < d->kw; kj++) {
                            int iy = oy * d->sh - d->pad_top + ki, ix = ox * d->sw - d->pad_left + kj;
                            if (iy < 0 || iy >= d->h || ix < 0 || ix >= d->w) continue;
                            double v = x[((int64_t)(n * d->h + iy) * d->w + ix) * d->c + c];
                            best = fmax(best, v);
                            sum += v;
                            count++;
                        }
                    y[((int64_t)(n * d->oh + oy) * d->ow + ox) * d->c + c] =
                        d->is_max ? best : sum / count;
                }
}

typedef struct pool_ctx {
    tfc_pool_desc d;
    double *x, *wt, *y;
} pool_ctx;

static double pool_loss(void *p)
{
    pool_ctx *c = p;
    ref_pool(&c->d, c->x, c->y);
    return dot(c->y, c->wt, (int64_t)c->d.n * c->d.oh * c->d.ow * c->d.c);
}

static void check_pool(tfc_backend *be, tfc_pool_desc d)
{
    const int64_t nx = (int64_t)d.n * d.h * d.w * d.c, ny = (int64_t)d.n * d.oh * d.ow * d.c;
    float *x = falloc(nx), *y = falloc(ny), *wt = falloc(ny), *dx = falloc(nx), *dx0 = falloc(nx);
    int32_t *arg = malloc(sizeof(int32_t) * (size_t)ny);
    /* distinct values at least 0.01 apart (no near-ties for the finite differences), all
     * negative so that a padded zero winning a max would show */
    for (int64_t i = 0; i < nx; i++) x[i] = (float)(-0.01 * (double)(1 + (i * 7919) % nx));
    fill(wt, ny, -1, 1);
    fill(dx, nx, -1, 1);
    memcpy(dx0, dx, sizeof(float) * nx);
    be->ops->pool_forward(be, &d, x, y, d.is_max ? arg : NULL);
    pool_ctx ctx = {d, to_double(x, nx), to_double(wt, ny), malloc(sizeof(double) * (size_t)ny)};
    ref_pool(&d, ctx.x, ctx.y);
    CU_ASSERT_EQUAL(compare(d.is_max ? "maxpool" : "avgpool", y, ctx.y, ny, 1e-6, 1e-7), 0);
    if (d.is_max) {
        int bad = 0;
        for (int64_t o = 0; o < ny; o++) {
            int64_t img = o / ((int64_t)d.oh * d.ow * d.c);
            bad += arg[o] < 0 || x[img * d.h * d.w * d.c + arg[o]] != y[o] ||
                   arg[o] % d.c != o % d.c;
        }
        CU_ASSERT_EQUAL(bad, 0);
        /* argmax may be NULL when no backward follows */
        float *y2 = falloc(ny);
        be->ops->pool_forward(be, &d, x, y2, NULL);
        CU_ASSERT_EQUAL(memcmp(y, y2, sizeof(float) * ny), 0);
        free(y2);
    }
    be->ops->pool_backward(be, &d, wt, d.is_max ? arg : NULL, dx, 0, NULL);
    double *g = added(dx, dx0, nx);
    CU_ASSERT_EQUAL(grad_check("pool", ctx.x, nx, g, pool_loss, &ctx, 1e-4, 1e-4, 1e-5), 0);
    /* assign: what adding into zeros gives, written over whatever dx held (NaNs here, never
     * read) */
    float *sum = calloc((size_t)nx, sizeof(float));
    be->ops->pool_backward(be, &d, wt, d.is_max ? arg : NULL, sum, 0, NULL);
    for (int64_t i = 0; i < nx; i++) dx[i] = NAN;
    be->ops->pool_backward(be, &d, wt, d.is_max ? arg : NULL, dx, 1, NULL);
    CU_ASSERT_EQUAL(memcmp(dx, sum, sizeof(float) * nx), 0);
    /* with relu_x (a ReLU's output before the pooling, zeros included), the same bits as
     * act_backward's derivative after it: written over NaNs, and added to what dx held */
    float *rx = falloc(nx), *want = falloc(nx), *held = falloc(nx);
    fill(rx, nx, -1, 1);
    for (int64_t i = 0; i < nx; i++) rx[i] = rx[i] < 0 ? (i % 3 ? 0.0f : -rx[i]) : rx[i];
    be->ops->act_backward(be, TFC_ACT_RELU, nx, d.c, rx, rx, sum, want, 1);
    for (int64_t i = 0; i < nx; i++) dx[i] = NAN;
    be->ops->pool_backward(be, &d, wt, d.is_max ? arg : NULL, dx, 1, rx);
    CU_ASSERT_EQUAL(memcmp(dx, want, sizeof(float) * nx), 0);
    memcpy(held, dx0, sizeof(float) * nx);
    be->ops->pool_backward(be, &d, wt, d.is_max ? arg : NULL, held, 0, NULL);
    be->ops->act_backward(be, TFC_ACT_RELU, nx, d.c, rx, rx, held, want, 1);
    memcpy(dx, dx0, sizeof(float) * nx);
    be->ops->pool_backward(be, &d, wt, d.is_max ? arg : NULL, dx, 0, rx);
    CU_ASSERT_EQUAL(memcmp(dx, want, sizeof(float) * nx), 0);
    free(sum), free(rx), free(want), free(held);
    free(x), free(y), free(wt), free(dx), free(dx0), free(arg), free(ctx.x), free(ctx.wt);
    free(ctx.y), free(g);
}

static void test_pool(void)
{
    tfc_backend *be = backend();
    for (int is_max = 0; is_max < 2; is_max++) {
        check_pool(be, pool_desc(2, 6, 6, 3, 2, 2, 0, is_max));  /* the usual 2x2 */
        check_pool(be, pool_desc(2, 7, 5, 3, 3, 2, 1, is_max));  /* overlapping, SAME */
        check_pool(be, pool_desc(1, 5, 6, 2, 2, 2, 1, is_max));  /* pad only after */
        check_pool(be, pool_desc(2, 4, 4, 2, 3, 1, 1, is_max));  /* stride 1, SAME */
        check_pool(be, pool_desc(3, 30, 30, 20, 3, 2, 1, is_max)); /* parallel path */
    }
    /* an average window half outside the image counts only the cells inside */
    tfc_pool_desc d = pool_desc(1, 1, 3, 1, 2, 2, 1, 0);
    float x[3] = {1, 2, 4}, y[2];
    be->ops->pool_forward(be, &d, x, y, NULL);
    CU_ASSERT_DOUBLE_EQUAL(y[0], 1.5, 1e-7);
    CU_ASSERT_DOUBLE_EQUAL(y[1], 4.0, 1e-7);
    tfc_backend_free(be);
}

/* ---- batch normalisation -------------------------------------------------------------- */

/* y = gamma (x - mean) / sqrt(var + eps) + beta with the batch's mean and biased var. */
static void ref_bn(int64_t rows, int cols, const double *x, const double *gamma,
                   const double *beta, double eps, double *y, double *mean, double *var)
{
    for (int c = 0; c < cols; c++) {
        double m = 0, v = 0;
        for (int64_t r = 0; r < rows; r++) m += x[r * cols + c];
        m /= (double)rows;
        for (int64_t r = 0; r < rows; r++) v += (x[r * cols + c] - m) * (x[r * cols + c] - m);
        v /= (double)rows;
        for (int64_t r = 0; r < rows; r++)
            y[r * cols + c] = gamma[c] * (x[r * cols + c] - m) / sqrt(v + eps) + beta[c];
        if (mean) mean[c] = m;
        if (var) var[c] = v;
    }
}

typedef struct bn_ctx {
    int64_t rows;
    int cols;
    double *x, *gamma, *beta, *wt, *y;
} bn_ctx;

static double bn_loss(void *p)
{
    bn_ctx *c = p;
    ref_bn(c->rows, c->cols, c->x, c->gamma, c->beta, 1e-3, c->y, NULL, NULL);
    return dot(c->y, c->wt, c->rows * c->cols);
}

static void check_bn(tfc_backend *be, int64_t rows, int cols, int grads)
{
    const int64_t n = rows * cols;
    float *x = falloc(n), *y = falloc(n), *wt = falloc(n), *dx = falloc(n), *dx0 = falloc(n);
    float *gamma = falloc(cols), *beta = falloc(cols), *mm = falloc(cols), *mv = falloc(cols);
    float *mm0 = falloc(cols), *mv0 = falloc(cols), *smean = falloc(cols), *sinv = falloc(cols);
    float *dg = falloc(cols), *db = falloc(cols), *dg0 = falloc(cols), *db0 = falloc(cols);
    for (int64_t r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) x[r * cols + c] = (float)(3.0 + c % 5 + (urand() - 0.5) * (1 + c % 3));
    fill(gamma, cols, 0.5, 1.5);
    fill(beta, cols, -1, 1);
    fill(mm, cols, -1, 1);
    fill(mv, cols, 0.5, 2);
    memcpy(mm0, mm, sizeof(float) * cols);
    memcpy(mv0, mv, sizeof(float) * cols);
    be->ops->bn_forward_train(be, rows, cols, x, gamma, beta, 1e-3f, 0.99f, mm, mv, y, smean, sinv,
                              TFC_ACT_LINEAR);
    bn_ctx ctx = {rows, cols, to_double(x, n), to_double(gamma, cols), to_double(beta, cols),
                  NULL, malloc(sizeof(double) * (size_t)n)};
    double *mean = calloc((size_t)cols, sizeof(double)), *var = calloc((size_t)cols, sizeof(double));
    double *want = calloc((size_t)cols, sizeof(double));
    ref_bn(rows, cols, ctx.x, ctx.gamma, ctx.beta, 1e-3, ctx.y, mean, var);
    CU_ASSERT_EQUAL(compare("bn y", y, ctx.y, n, 1e-5, 2e-5), 0);
    CU_ASSERT_EQUAL(compare("bn mean", smean, mean, cols, 1e-6, 1e-6), 0);
    for (int c = 0; c < cols; c++) want[c] = 1 / sqrt(var[c] + 1e-3);
    CU_ASSERT_EQUAL(compare("bn invstd", sinv, want, cols, 1e-5, 0), 0);
    for (int c = 0; c < cols; c++) want[c] = 0.99 * mm0[c] + 0.01 * mean[c];
    CU_ASSERT_EQUAL(compare("moving_mean", mm, want, cols, 1e-5, 1e-7), 0);
    for (int c = 0; c < cols; c++) want[c] = 0.99 * mv0[c] + 0.01 * var[c];
    CU_ASSERT_EQUAL(compare("moving_var", mv, want, cols, 1e-5, 1e-7), 0);
    { /* with act ReLU: the ReLU (act_forward's) of the same y, bit for bit */
        float *yr = falloc(n), *yl = falloc(n), *m2 = falloc(cols), *v2 = falloc(cols);
        memcpy(m2, mm0, sizeof(float) * cols);
        memcpy(v2, mv0, sizeof(float) * cols);
        be->ops->bn_forward_train(be, rows, cols, x, gamma, beta, 1e-3f, 0.99f, m2, v2, yr,
                                  smean, sinv, TFC_ACT_RELU);
        be->ops->act_forward(be, TFC_ACT_RELU, n, cols, y, yl);
        int zeros = 0;
        for (int64_t i = 0; i < n; i++) zeros += yl[i] == 0.0f;
        CU_ASSERT(zeros > 0 && zeros < n);
        CU_ASSERT_EQUAL(memcmp(yr, yl, sizeof(float) * (size_t)n), 0);
        CU_ASSERT_EQUAL(memcmp(m2, mm, sizeof(float) * cols), 0);
        free(yr), free(yl), free(m2), free(v2);
    }

    /* inference uses the moving statistics */
    be->ops->bn_forward_infer(be, rows, cols, x, gamma, beta, mm, mv, 1e-3f, y);
    int bad = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            double v = gamma[c] * ((double)x[r * cols + c] - mm[c]) / sqrt((double)mv[c] + 1e-3) + beta[c];
            bad += !close_to(y[r * cols + c], v, 1e-5, 1e-5);
        }
    CU_ASSERT_EQUAL(bad, 0);

    if (grads) {
        fill(wt, n, -1, 1);
        fill(dx, n, -1, 1);
        fill(dg, cols, -1, 1);
        fill(db, cols, -1, 1);
        memcpy(dx0, dx, sizeof(float) * n);
        memcpy(dg0, dg, sizeof(float) * cols);
        memcpy(db0, db, sizeof(float) * cols);
        be->ops->bn_backward(be, rows, cols, x, wt, gamma, smean, sinv, dx, dg, db, 0);
        /* assigned: what adding to zeros gives, whatever dx held (NaN here) */
        float *da = falloc(n), *dz = falloc(n), *g2 = falloc(2 * cols);
        for (int64_t i = 0; i < n; i++) da[i] = NAN, dz[i] = 0.0f;
        memset(g2, 0, sizeof(float) * 2 * cols);
        be->ops->bn_backward(be, rows, cols, x, wt, gamma, smean, sinv, da, g2, g2 + cols, 1);
        be->ops->bn_backward(be, rows, cols, x, wt, gamma, smean, sinv, dz, g2, g2 + cols, 0);
        int assigned = 0;
        for (int64_t i = 0; i < n; i++) assigned += !(da[i] == dz[i]);
        CU_ASSERT_EQUAL(assigned, 0);
        free(da), free(dz), free(g2);
        ctx.wt = to_double(wt, n);
        double *gx = added(dx, dx0, n), *gg = added(dg, dg0, cols), *gb = added(db, db0, cols);
        CU_ASSERT_EQUAL(grad_check("x", ctx.x, n, gx, bn_loss, &ctx, 1e-4, 1e-3, 1e-4), 0);
        CU_ASSERT_EQUAL(grad_check("gamma", ctx.gamma, cols, gg, bn_loss, &ctx, 1e-4, 1e-4, 1e-4), 0);
        CU_ASSERT_EQUAL(grad_check("beta", ctx.beta, cols, gb, bn_loss, &ctx, 1e-4, 1e-4, 1e-4), 0);
        free(gx), free(gg), free(gb), free(ctx.wt);
    }
    free(x), free(y), free(wt), free(dx), free(dx0), free(gamma), free(beta), free(mm), free(mv);
    free(mm0), free(mv0), free(smean), free(sinv), free(dg), free(db), free(dg0), free(db0);
    free(ctx.x), free(ctx.gamma), free(ctx.beta), free(ctx.y), free(mean), free(var), free(want);
}

/* Statistics where E[x^2] - E[x]^2 would lose everything in float and the first digits in
 * double (unshifted one-pass sums fail here): a mean of 1e6 and a spread of 1, the first row
 * (the one-pass sums' shift) 40 deviations off; against two passes in double. */
static void check_bn_cancellation(tfc_backend *be)
{
    const int64_t rows = 5000;
    const int cols = 3;
    float *x = falloc(rows * cols), *y = falloc(rows * cols), *gamma = falloc(cols);
    float *beta = falloc(cols), *mm = falloc(cols), *mv = falloc(cols), *smean = falloc(cols);
    float *sinv = falloc(cols);
    for (int64_t r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            x[r * cols + c] = (float)(1e6 * (c + 1) + (r == 0 ? 40.0 : urand() - 0.5));
    for (int c = 0; c < cols; c++) gamma[c] = 1, beta[c] = 0, mm[c] = 0, mv[c] = 1;
    be->ops->bn_forward_train(be, rows, cols, x, gamma, beta, 1e-3f, 0.99f, mm, mv, y, smean, sinv,
                              TFC_ACT_LINEAR);
    double *xd = to_double(x, rows * cols), *yd = malloc(sizeof(double) * (size_t)(rows * cols));
    double mean[3], var[3], want[3];
    double g[3] = {1, 1, 1}, b[3] = {0, 0, 0};
    ref_bn(rows, cols, xd, g, b, 1e-3, yd, mean, var);
    for (int c = 0; c < cols; c++) want[c] = 1 / sqrt(var[c] + 1e-3);
    CU_ASSERT_EQUAL(compare("bn mean, large", smean, mean, cols, 1e-7, 0), 0);
    CU_ASSERT_EQUAL(compare("bn invstd, large", sinv, want, cols, 1e-6, 0), 0);
    free(x), free(y), free(gamma), free(beta), free(mm), free(mv), free(smean), free(sinv);
    free(xd), free(yd);
}

/* add: y = a + b, and its ReLU as act_forward's (NaN kept, -0 and negatives to 0), bit for
 * bit, y aliasing a or b, on the parallel path and below it */
static void test_add(void)
{
    tfc_backend *be = backend();
    const int64_t sizes[] = {37, 300001};
    for (int k = 0; k < 2; k++) {
        const int64_t n = sizes[k];
        float *a = falloc(n), *b = falloc(n), *y = falloc(n), *want = falloc(n), *c = falloc(n);
        fill(a, n, -2, 2);
        fill(b, n, -2, 2);
        a[3] = NAN, a[5] = -0.0f, b[5] = 0.0f, a[6] = INFINITY, b[6] = -INFINITY;
        for (int act = 0; act < 2; act++) {
            tfc_act f = act ? TFC_ACT_RELU : TFC_ACT_LINEAR;
            for (int64_t i = 0; i < n; i++) want[i] = a[i] + b[i];
            if (act) be->ops->act_forward(be, TFC_ACT_RELU, n, 1, want, want);
            be->ops->add(be, n, a, b, f, y);
            CU_ASSERT_EQUAL(memcmp(y, want, sizeof(float) * (size_t)n), 0);
            memcpy(c, a, sizeof(float) * (size_t)n);
            be->ops->add(be, n, c, b, f, c); /* y is a */
            CU_ASSERT_EQUAL(memcmp(c, want, sizeof(float) * (size_t)n), 0);
            memcpy(c, b, sizeof(float) * (size_t)n);
            be->ops->add(be, n, a, c, f, c); /* y is b */
            CU_ASSERT_EQUAL(memcmp(c, want, sizeof(float) * (size_t)n), 0);
        }
        CU_ASSERT(isnan(y[3]) && y[6] != y[6]);
        free(a), free(b), free(y), free(want), free(c);
    }
    tfc_backend_free(be);
}

static void test_bn(void)
{
    tfc_backend *be = backend();
    check_bn(be, 24, 5, 1);
    check_bn(be, 3000, 16, 1); /* parallel path */
    check_bn(be, 6, 300, 1);   /* more channels than one block */
    check_bn_cancellation(be);
    tfc_backend_free(be);
}

/* ---- embedding ------------------------------------------------------------------------ */

static void test_embedding(void)
{
    tfc_backend *be = backend();
    const int vocab = 50, n = 300;
    const int dims[] = {3, 130};
    for (int k = 0; k < 2; k++) {
        const int dim = dims[k];
        float *table = falloc(vocab * dim), *y = falloc(n * dim), *dy = falloc(n * dim);
        float *dt = falloc(vocab * dim);
        int32_t ids[300];
        for (int i = 0; i < n; i++) ids[i] = (int32_t)((i * 37 + i / 7) % vocab); /* repeats */
        fill(table, vocab * dim, -1, 1);
        fill(dy, n * dim, -1, 1);
        fill(dt, vocab * dim, -1, 1);
        double *want = malloc(sizeof(double) * vocab * dim);
        for (int i = 0; i < vocab * dim; i++) want[i] = dt[i];
        for (int i = 0; i < n; i++)
            for (int j = 0; j < dim; j++) want[ids[i] * dim + j] += dy[i * dim + j];
        be->ops->gather(be, n, dim, ids, table, y);
        int bad = 0;
        for (int i = 0; i < n; i++)
            bad += memcmp(y + i * dim, table + ids[i] * dim, sizeof(float) * dim) != 0;
        CU_ASSERT_EQUAL(bad, 0);
        be->ops->scatter_add(be, n, dim, ids, dy, dt);
        CU_ASSERT_EQUAL(compare("scatter", dt, want, vocab * dim, 1e-5, 1e-6), 0);
        free(table), free(y), free(dy), free(dt), free(want);
    }
    tfc_backend_free(be);
}

/* ---- LSTM ------------------------------------------------------------------------------ */

static double sigm(double v)
{
    return 1 / (1 + exp(-v));
}

/* The recurrence of backend.h in double: z = x_t K + h R + b, gates i f c o, masked steps
 * keep h and c. Fills y ([n,t,u] or [n,u]) and, when given, hseq, cseq, gates. */
static void ref_lstm(const tfc_lstm_desc *d, const double *x, const double *K, const double *R,
                     const double *b, const float *mask, double *y, double *hseq,
                     double *cseq, double *gates)
{
    const int u = d->units, G = 4 * u;
    double h[64], c[64], z[256];
    for (int i = 0; i < d->n; i++) {
        for (int j = 0; j < u; j++) h[j] = c[j] = 0;
        for (int s = 0; s < d->t; s++) {
            const int64_t row = (int64_t)i * d->t + s;
            for (int g = 0; g < G; g++) {
                double v = b ? b[g] : 0;
                for (int k = 0; k < d->in; k++) v += x[row * d->in + k] * K[k * G + g];
                for (int k = 0; k < u; k++) v += h[k] * R[k * G + g];
                z[g] = v;
            }
            for (int j = 0; j < u; j++) {
                double ig = sigm(z[j]), fg = sigm(z[u + j]), gg = tanh(z[2 * u + j]),
                       og = sigm(z[3 * u + j]);
                if (gates) {
                    gates[row * G + j] = ig;
                    gates[row * G + u + j] = fg;
                    gates[row * G + 2 * u + j] = gg;
                    gates[row * G + 3 * u + j] = og;
                }
                if (!mask || mask[row] != 0) {
                    c[j] = fg * c[j] + ig * gg;
                    z[j] = og * tanh(c[j]); /* new h, kept in z until all j are done */
                } else {
                    z[j] = h[j];
                }
            }
            for (int j = 0; j < u; j++) h[j] = z[j];
            if (hseq) memcpy(hseq + row * u, h, sizeof(double) * u);
            if (cseq) memcpy(cseq + row * u, c, sizeof(double) * u);
            if (d->return_sequences) memcpy(y + row * u, h, sizeof(double) * u);
        }
        if (!d->return_sequences) memcpy(y + (int64_t)i * u, h, sizeof(double) * u);
    }
}

typedef struct lstm_ctx {
    tfc_lstm_desc d;
    double *x, *K, *R, *b, *wt, *y;
    const float *mask;
} lstm_ctx;

static int64_t lstm_ny(const tfc_lstm_desc *d)
{
    return (int64_t)d->n * (d->return_sequences ? d->t : 1) * d->units;
}

static double lstm_loss(void *p)
{
    lstm_ctx *c = p;
    ref_lstm(&c->d, c->x, c->K, c->R, c->b, c->mask, c->y, NULL, NULL, NULL);
    return dot(c->y, c->wt, lstm_ny(&c->d));
}

/* x's values lie in [-lstm_x, lstm_x] */
static float lstm_x = 1.0f;

static void check_lstm(tfc_backend *be, tfc_lstm_desc d, const float *mask, int use_bias,
                       int grads)
{
    const int u = d.units, G = 4 * u;
    const int64_t nx = (int64_t)d.n * d.t * d.in, nk = (int64_t)d.in * G, nr = (int64_t)u * G;
    const int64_t nseq = (int64_t)d.n * d.t * u, ny = lstm_ny(&d);
    float *x = falloc(nx), *K = falloc(nk), *R = falloc(nr), *b = falloc(G), *y = falloc(ny);
    float *hseq = falloc(nseq), *cseq = falloc(nseq), *gates = falloc(nseq * 4), *wt = falloc(ny);
    fill(x, nx, -lstm_x, lstm_x);
    fill(K, nk, -0.8, 0.8);
    fill(R, nr, -0.8, 0.8);
    fill(b, G, -0.5, 0.5);
    fill(wt, ny, -1, 1);
    void *ws = be->ops->alloc(be, be->ops->lstm_workspace(be, &d));
    be->ops->lstm_forward(be, &d, x, K, R, use_bias ? b : NULL, mask, y, hseq, cseq, gates, ws);
    lstm_ctx ctx = {d, to_double(x, nx), to_double(K, nk), to_double(R, nr),
                    use_bias ? to_double(b, G) : NULL, to_double(wt, ny),
                    malloc(sizeof(double) * (size_t)ny), mask};
    double *hw = malloc(sizeof(double) * nseq), *cw = malloc(sizeof(double) * nseq);
    double *gw = malloc(sizeof(double) * nseq * 4);
    ref_lstm(&d, ctx.x, ctx.K, ctx.R, ctx.b, mask, ctx.y, hw, cw, gw);
    CU_ASSERT_EQUAL(compare("lstm y", y, ctx.y, ny, 1e-4, 1e-5), 0);
    CU_ASSERT_EQUAL(compare("lstm hseq", hseq, hw, nseq, 1e-4, 1e-5), 0);
    CU_ASSERT_EQUAL(compare("lstm cseq", cseq, cw, nseq, 1e-4, 1e-5), 0);
    if (mask) { /* gates of masked steps are unspecified */
        for (int64_t r = 0; r < (int64_t)d.n * d.t; r++)
            if (mask[r] == 0)
                for (int g = 0; g < G; g++) gw[r * G + g] = gates[r * G + g];
    }
    CU_ASSERT_EQUAL(compare("lstm gates", gates, gw, nseq * 4, 1e-4, 1e-5), 0);
    if (grads) {
        float *dx = falloc(nx), *dK = falloc(nk), *dR = falloc(nr), *db = falloc(G);
        float *dx0 = falloc(nx), *dK0 = falloc(nk), *dR0 = falloc(nr), *db0 = falloc(G);
        fill(dx, nx, -1, 1), fill(dK, nk, -1, 1), fill(dR, nr, -1, 1), fill(db, G, -1, 1);
        memcpy(dx0, dx, sizeof(float) * nx), memcpy(dK0, dK, sizeof(float) * nk);
        memcpy(dR0, dR, sizeof(float) * nr), memcpy(db0, db, sizeof(float) * G);
        be->ops->lstm_backward(be, &d, x, K, R, mask, hseq, cseq, gates, wt, dx, dK, dR,
                               use_bias ? db : NULL, ws);
        double *gx = added(dx, dx0, nx), *gk = added(dK, dK0, nk), *gr = added(dR, dR0, nr);
        double *gb = added(db, db0, G);
        CU_ASSERT_EQUAL(grad_check("x", ctx.x, nx, gx, lstm_loss, &ctx, 1e-4, 1e-3, 1e-5), 0);
        CU_ASSERT_EQUAL(grad_check("kernel", ctx.K, nk, gk, lstm_loss, &ctx, 1e-4, 1e-3, 1e-5), 0);
        CU_ASSERT_EQUAL(grad_check("rkernel", ctx.R, nr, gr, lstm_loss, &ctx, 1e-4, 1e-3, 1e-5), 0);
        if (use_bias) {
            CU_ASSERT_EQUAL(grad_check("bias", ctx.b, G, gb, lstm_loss, &ctx, 1e-4, 1e-3, 1e-5), 0);
        } else {
            CU_ASSERT_EQUAL(memcmp(db, db0, sizeof(float) * G), 0);
        }
        /* dx may be NULL (the input needs no gradient); the rest is unchanged */
        memcpy(dK0, dK, sizeof(float) * nk);
        be->ops->lstm_backward(be, &d, x, K, R, mask, hseq, cseq, gates, wt, NULL, dK, dR,
                               NULL, ws);
        int bad = 0;
        for (int64_t i = 0; i < nk; i++) bad += !close_to(dK[i] - dK0[i], gk[i], 1e-4, 1e-5);
        CU_ASSERT_EQUAL(bad, 0);
        free(dx), free(dK), free(dR), free(db), free(dx0), free(dK0), free(dR0), free(db0);
        free(gx), free(gk), free(gr), free(gb);
    }
    be->ops->free(be, ws);
    free(x), free(K), free(R), free(b), free(y), free(hseq), free(cseq), free(gates), free(wt);
    free(ctx.x), free(ctx.K), free(ctx.R), free(ctx.b), free(ctx.wt), free(ctx.y);
    free(hw), free(cw), free(gw);
}

static void lstm_cases(tfc_backend *be)
{
    /* sequence 0: first step masked; 1: a masked middle step; 2: trailing padding */
    const float mask[3 * 5] = {0, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 0, 0};
    for (int rs = 0; rs < 2; rs++)
        for (int m = 0; m < 2; m++) {
            tfc_lstm_desc d = {.n = 3, .t = 5, .in = 4, .units = 3, .return_sequences = rs};
            check_lstm(be, d, m ? mask : NULL, 1, 1);
        }
    /* right padding, lengths 4, 2, 3 and 0 of 6: steps 4 and 5 mask every sequence of any
     * block (cpu_lstm.c skips such a step's GEMM and cells), sequence 3 every step */
    float pad[4 * 6];
    const int len[4] = {4, 2, 3, 0};
    for (int i = 0; i < 4 * 6; i++) pad[i] = i % 6 < len[i / 6] ? 1.0f : 0.0f;
    for (int rs = 0; rs < 2; rs++) {
        tfc_lstm_desc d = {.n = 4, .t = 6, .in = 3, .units = 9, .return_sequences = rs};
        check_lstm(be, d, pad, 1, 1); /* x·K inside the recurrence (in <= units) */
        d.in = 12;                     /* x·K for all steps at once */
        check_lstm(be, d, pad, 1, 1);
    }
    /* no bias, with x·K for all steps at once (in > units) and inside the recurrence (cpu_lstm.c's
     * fused_input; the cases above and below have both) */
    tfc_lstm_desc nb = {.n = 2, .t = 4, .in = 3, .units = 2, .return_sequences = 1};
    check_lstm(be, nb, NULL, 0, 1);
    nb.units = 3;
    check_lstm(be, nb, NULL, 0, 1);
    /* a batch big enough for the parallel cell loops */
    tfc_lstm_desc big = {.n = 64, .t = 6, .in = 8, .units = 32, .return_sequences = 1};
    check_lstm(be, big, NULL, 1, 0);
    tfc_lstm_desc one = {.n = 2, .t = 1, .in = 3, .units = 4, .return_sequences = 0};
    check_lstm(be, one, NULL, 1, 1);
    /* 19 sequences: two blocks of the recurrence (8 and 11 rows, cpu_lstm.c), each summing
     * its own part of dbias, with masked steps in both */
    float mask19[19 * 3];
    for (int i = 0; i < 19 * 3; i++) mask19[i] = i % 7 == 3 ? 0.0f : 1.0f;
    tfc_lstm_desc two = {.n = 19, .t = 3, .in = 2, .units = 3, .return_sequences = 1};
    check_lstm(be, two, mask19, 1, 1);
    /* units a multiple of 16: the backward cell writes dgates' panels itself (cpu_lstm.c),
     * masked steps too; the rest of the cases go through its rows of dz */
    tfc_lstm_desc panels = {.n = 19, .t = 3, .in = 5, .units = 16, .return_sequences = 0};
    check_lstm(be, panels, mask19, 1, 1);
    /* pre-activations in the hundreds: saturated gates (sigmoid's exp(-x) overflowing to
     * inf, tanh's exp(2|x|) too), and 20 units: a whole vector of the AVX-512 cells and a
     * part of one */
    lstm_x = 60.0f;
    tfc_lstm_desc wide = {.n = 9, .t = 4, .in = 6, .units = 20, .return_sequences = 1};
    check_lstm(be, wide, mask19, 1, 1);
    lstm_x = 1.0f;
}

static void test_lstm(void)
{
    tfc_backend *be = backend();
    /* every case through each cells' kernel this CPU runs: the AVX-512 one, the plain loops */
    for (int isa = 2; isa >= 0; isa -= 2)
        if (tfc_cpu_lstm_cells_isa(isa)) lstm_cases(be);
    tfc_cpu_lstm_cells_isa(-1);

    /* y may be hseq itself when return_sequences is set */
    tfc_lstm_desc d = {.n = 2, .t = 3, .in = 2, .units = 2, .return_sequences = 1};
    float x[12], K[16], R[16], b[8], y[12], h1[12], h2[12], c[12], g[48];
    fill(x, 12, -1, 1), fill(K, 16, -1, 1), fill(R, 16, -1, 1), fill(b, 8, -1, 1);
    void *ws = be->ops->alloc(be, be->ops->lstm_workspace(be, &d));
    be->ops->lstm_forward(be, &d, x, K, R, b, NULL, y, h1, c, g, ws);
    be->ops->lstm_forward(be, &d, x, K, R, b, NULL, h2, h2, c, g, ws);
    CU_ASSERT_EQUAL(memcmp(y, h1, sizeof y), 0);
    CU_ASSERT_EQUAL(memcmp(h1, h2, sizeof h1), 0);
    be->ops->free(be, ws);
    tfc_backend_free(be);
}

/* The LSTM reading an Embedding's ids and table (tfc_lstm_desc.vocab; cpu_lstm.c) against
 * the same LSTM on the table's rows gathered into x, its dx scattered into the table by id
 * (what Embedding's backward does): the forward pass's every output bit for bit, the
 * gradients (table, kernel, recurrent kernel, bias) to rounding. The backward on `threads`
 * threads repeats its own bits. */
static void check_lstm_ids(int threads, tfc_lstm_desc d, int vocab, const float *mask)
{
    tfc_backend *be = tfc_cpu_backend_create(threads);
    const int u = d.units, G = 4 * u;
    const int64_t NT = (int64_t)d.n * d.t, nx = NT * d.in, nk = (int64_t)d.in * G;
    const int64_t nr = (int64_t)u * G, ne = (int64_t)vocab * d.in, nseq = NT * u, ny = lstm_ny(&d);
    float *E = falloc(ne), *x = falloc(nx), *K = falloc(nk), *R = falloc(nr), *b = falloc(G);
    float *dy = falloc(ny);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)NT);
    fill(E, ne, -1, 1), fill(K, nk, -0.5, 0.5), fill(R, nr, -0.5, 0.5), fill(b, G, -0.5, 0.5);
    fill(dy, ny, -1, 1);
    for (int64_t r = 0; r < NT; r++) { /* every id, some many times, the last rarely */
        ids[r] = (int32_t)((r * 7 + r / 5) % vocab);
        memcpy(x + r * d.in, E + (int64_t)ids[r] * d.in, sizeof(float) * (size_t)d.in);
    }
    tfc_lstm_desc di = d;
    di.vocab = vocab, di.ids = ids;
    CU_ASSERT_FATAL(be->lstm_ids && be->lstm_ids(be, &di));
    float *out[2][7]; /* y, hseq, cseq, gates, dK, dR, db: without ids, with */
    float *dxs = falloc(nx), *dE = falloc(ne), *dE2 = falloc(ne);
    for (int run = 0; run < 2; run++) {
        const tfc_lstm_desc *dd = run ? &di : &d;
        void *ws = be->ops->alloc(be, be->ops->lstm_workspace(be, dd));
        const int64_t sz[7] = {ny, nseq, nseq, 4 * nseq, nk, nr, G};
        for (int q = 0; q < 7; q++) out[run][q] = falloc(sz[q]);
        for (int q = 4; q < 7; q++) memset(out[run][q], 0, sizeof(float) * (size_t)sz[q]);
        float **o = out[run];
        be->ops->lstm_forward(be, dd, run ? E : x, K, R, b, mask, o[0], o[1], o[2], o[3], ws);
        float *dxo = run ? dE : dxs;
        memset(dxo, 0, sizeof(float) * (size_t)(run ? ne : nx));
        be->ops->lstm_backward(be, dd, run ? E : x, K, R, mask, o[1], o[2], o[3], dy, dxo, o[4],
                               o[5], o[6], ws);
        if (run) { /* the backward again repeats its bits */
            float *k2 = falloc(nk), *r2 = falloc(nr), *b2 = falloc(G);
            memset(k2, 0, sizeof(float) * nk), memset(r2, 0, sizeof(float) * nr);
            memset(b2, 0, sizeof(float) * G), memset(dE2, 0, sizeof(float) * ne);
            be->ops->lstm_backward(be, dd, E, K, R, mask, o[1], o[2], o[3], dy, dE2, k2, r2, b2,
                                   ws);
            CU_ASSERT_EQUAL(memcmp(k2, o[4], sizeof(float) * nk), 0);
            CU_ASSERT_EQUAL(memcmp(r2, o[5], sizeof(float) * nr), 0);
            CU_ASSERT_EQUAL(memcmp(b2, o[6], sizeof(float) * G), 0);
            CU_ASSERT_EQUAL(memcmp(dE2, dE, sizeof(float) * ne), 0);
            free(k2), free(r2), free(b2);
        }
        be->ops->free(be, ws);
    }
    for (int q = 0; q < 4; q++) { /* the forward: the same bits (gates of masked steps too) */
        const int64_t sz[4] = {ny, nseq, nseq, 4 * nseq};
        CU_ASSERT_EQUAL(memcmp(out[0][q], out[1][q], sizeof(float) * (size_t)sz[q]), 0);
    }
    double *want = calloc((size_t)ne, sizeof(double));
    for (int64_t r = 0; r < NT; r++)
        for (int c = 0; c < d.in; c++) want[(int64_t)ids[r] * d.in + c] += dxs[r * d.in + c];
    CU_ASSERT_EQUAL(compare("lstm ids dE", dE, want, ne, 1e-4, 1e-5), 0);
    const int64_t gsz[3] = {nk, nr, G};
    for (int q = 0; q < 3; q++) {
        double *w = to_double(out[0][4 + q], gsz[q]);
        CU_ASSERT_EQUAL(compare("lstm ids grads", out[1][4 + q], w, gsz[q], 1e-4, 1e-5), 0);
        free(w);
    }
    free(want);
    for (int run = 0; run < 2; run++)
        for (int q = 0; q < 7; q++) free(out[run][q]);
    free(E), free(x), free(K), free(R), free(b), free(dy), free(ids);
    free(dxs), free(dE), free(dE2);
    tfc_backend_free(be);
}

static void test_lstm_ids(void)
{
    float mask19[19 * 3];
    for (int i = 0; i < 19 * 3; i++) mask19[i] = i % 7 == 3 ? 0.0f : 1.0f;
    for (int isa = 2; isa >= 0; isa -= 2) {
        if (!tfc_cpu_lstm_cells_isa(isa)) continue;
        /* 16 units (the backward cell writes dgates' panels), masked, the last h only */
        tfc_lstm_desc p = {.n = 19, .t = 3, .in = 5, .units = 16, .return_sequences = 0};
        check_lstm_ids(1, p, 7, mask19);
        check_lstm_ids(2, p, 7, mask19);
        /* 40 units: 160 gate columns, two column groups of the weight gradients (128 and a
         * part), ragged blocks of sequences; on 5 threads (more than the cores) too */
        tfc_lstm_desc w = {.n = 30, .t = 8, .in = 16, .units = 40, .return_sequences = 1};
        check_lstm_ids(2, w, 50, NULL);
        check_lstm_ids(5, w, 120, NULL);
    }
    tfc_cpu_lstm_cells_isa(-1);
    /* where ids are taken: a vocabulary of at most half the tokens, x·K fused (in <= units);
     * on a frozen backend also a table of at most 2^20 floats */
    tfc_backend *be = backend();
    tfc_lstm_desc d = {.n = 32, .t = 64, .in = 64, .units = 256, .vocab = 80};
    CU_ASSERT(be->lstm_ids(be, &d));
    d.vocab = 1024;
    CU_ASSERT(be->lstm_ids(be, &d));
    d.vocab = 1025;
    CU_ASSERT(!be->lstm_ids(be, &d));
    be->frozen = 1;
    CU_ASSERT(!be->lstm_ids(be, &d)); /* 1025 x 1024 floats */
    d.n = 1, d.vocab = 1024;
    CU_ASSERT(be->lstm_ids(be, &d));
    be->frozen = 0;
    CU_ASSERT(!be->lstm_ids(be, &d));
    d.n = 32, d.vocab = 80, d.in = 300;
    CU_ASSERT(!be->lstm_ids(be, &d));
    tfc_backend_free(be);
}

/* A frozen backend keeps table K from call to call: the same bits as an unfrozen backend's
 * table made in the call, and a new table after the Embedding's table or K is written
 * (upload). */
static void test_lstm_ids_kept(void)
{
    const tfc_lstm_desc d = {.n = 1, .t = 9, .in = 8, .units = 32, .return_sequences = 1,
                             .vocab = 11};
    const int u = d.units, G = 4 * u, ne = d.vocab * d.in, nk = d.in * G, nr = u * G;
    const int ny = d.t * u, ns = d.t * u;
    tfc_backend *plain = backend(), *frozen = backend();
    frozen->frozen = plain->inference_pass = frozen->inference_pass = 1;
    CU_ASSERT_FATAL(frozen->lstm_ids(frozen, &d) && !plain->lstm_ids(plain, &d));
    float *E = falloc(ne), *K = falloc(nk), *R = falloc(nr), *b = falloc(G);
    float *E2 = falloc(ne), *K2 = falloc(nk), *y[6], *seq = falloc(6 * ns); /* h, c, gates */
    int32_t ids[9] = {3, 0, 10, 3, 7, 7, 1, 10, 2};
    fill(E, ne, -1, 1), fill(K, nk, -0.5, 0.5), fill(R, nr, -0.5, 0.5), fill(b, G, -0.5, 0.5);
    fill(E2, ne, -1, 1), fill(K2, nk, -0.5, 0.5);
    for (int k = 0; k < 6; k++) y[k] = falloc(ny);
    tfc_lstm_desc di = d;
    di.ids = ids;
    void *wsf = frozen->ops->alloc(frozen, frozen->ops->lstm_workspace(frozen, &di));
    void *wsp = plain->ops->alloc(plain, plain->ops->lstm_workspace(plain, &di));
#define RUN(be, ws, out) \
    be->ops->lstm_forward(be, &di, E, K, R, b, NULL, out, seq, seq + ns, seq + 2 * ns, ws)
    RUN(plain, wsp, y[0]);
    RUN(frozen, wsf, y[1]);
    RUN(frozen, wsf, y[2]); /* the kept table */
    CU_ASSERT_EQUAL(bits_differ(y[0], y[1], ny), 0);
    CU_ASSERT_EQUAL(bits_differ(y[0], y[2], ny), 0);
    frozen->ops->upload(frozen, E, E2, (size_t)ne * sizeof(float)); /* a new Embedding */
    RUN(frozen, wsf, y[3]);
    RUN(plain, wsp, y[4]);
    CU_ASSERT(bits_differ(y[0], y[4], ny) > 0);
    CU_ASSERT_EQUAL(bits_differ(y[4], y[3], ny), 0);
    frozen->ops->upload(frozen, K, K2, (size_t)nk * sizeof(float)); /* a new kernel */
    RUN(frozen, wsf, y[3]);
    RUN(plain, wsp, y[5]);
    CU_ASSERT(bits_differ(y[4], y[5], ny) > 0);
    CU_ASSERT_EQUAL(bits_differ(y[5], y[3], ny), 0);
#undef RUN
    frozen->ops->free(frozen, wsf), plain->ops->free(plain, wsp);
    for (int k = 0; k < 6; k++) free(y[k]);
    free(E), free(K), free(R), free(b), free(E2), free(K2), free(seq);
    tfc_backend_free(plain), tfc_backend_free(frozen);
}

/* One LSTM forward + backward on a backend of `threads` threads into out: y, dx, dkernel,
 * drkernel, dbias, in that order. */
enum { LT_N = 30, LT_T = 8, LT_IN = 16, LT_U = 40 };
#define LT_NX (LT_N * LT_T * LT_IN)
#define LT_NY (LT_N * LT_T * LT_U)
#define LT_NK (LT_IN * 4 * LT_U)
#define LT_NR (LT_U * 4 * LT_U)
#define LT_OUT (LT_NY + LT_NX + LT_NK + LT_NR + 4 * LT_U)

static void lstm_run(int threads, const float *x, const float *K, const float *R, const float *b,
                     const float *dy, float *out)
{
    tfc_backend *be = tfc_cpu_backend_create(threads);
    const tfc_lstm_desc d = {.n = LT_N, .t = LT_T, .in = LT_IN, .units = LT_U,
                             .return_sequences = 1};
    float *h = malloc(sizeof(float) * LT_NY), *c = malloc(sizeof(float) * LT_NY);
    float *g = malloc(sizeof(float) * LT_NY * 4);
    void *ws = be->ops->alloc(be, be->ops->lstm_workspace(be, &d));
    TFC_ASSERT(h && c && g && ws);
    float *y = out, *dx = y + LT_NY, *dK = dx + LT_NX, *dR = dK + LT_NK, *db = dR + LT_NR;
    memset(dx, 0, sizeof(float) * (LT_OUT - LT_NY));
    be->ops->lstm_forward(be, &d, x, K, R, b, NULL, y, h, c, g, ws);
    be->ops->lstm_backward(be, &d, x, K, R, NULL, h, c, g, dy, dx, dK, dR, db, ws);
    be->ops->free(be, ws);
    free(h), free(c), free(g);
    tfc_backend_free(be);
}

/* The recurrence runs each thread's block of sequences through all steps (cpu_lstm.c), on
 * a batch and width with ragged blocks, row tiles and column panels (30 sequences, 40
 * units): 2 and 5 threads (more than this machine's cores) agree with 1 thread, and 5
 * threads repeat their own bits exactly. */
static void test_lstm_threads(void)
{
    float *x = malloc(sizeof(float) * LT_NX), *K = malloc(sizeof(float) * LT_NK);
    float *R = malloc(sizeof(float) * LT_NR), *b = malloc(sizeof(float) * 4 * LT_U);
    float *dy = malloc(sizeof(float) * LT_NY);
    float *one = malloc(sizeof(float) * LT_OUT), *got = malloc(sizeof(float) * LT_OUT);
    float *again = malloc(sizeof(float) * LT_OUT);
    TFC_ASSERT(x && K && R && b && dy && one && got && again);
    fill(x, LT_NX, -1, 1), fill(K, LT_NK, -0.3, 0.3), fill(R, LT_NR, -0.3, 0.3);
    fill(b, 4 * LT_U, -0.5, 0.5), fill(dy, LT_NY, -1, 1);
    lstm_run(1, x, K, R, b, dy, one);
    const int counts[] = {2, 5};
    for (int i = 0; i < 2; i++) {
        lstm_run(counts[i], x, K, R, b, dy, got);
        int bad = 0;
        for (int64_t j = 0; j < LT_OUT; j++) bad += !close_to(got[j], one[j], 1e-4, 1e-5);
        CU_ASSERT_EQUAL(bad, 0);
    }
    lstm_run(5, x, K, R, b, dy, again);
    CU_ASSERT_EQUAL(memcmp(got, again, sizeof(float) * LT_OUT), 0);
    free(x), free(K), free(R), free(b), free(dy), free(one), free(got), free(again);
}

/* The forward pass of one sequence, or three, on 2 and 3 threads shares each step's gate
 * columns among the threads (cpu_lstm.c, forward_cols: 128 units, a step of 81,920
 * multiply-adds or more), also on a team cut to one: y, h, c and the gates equal the
 * one-thread pass's bit for bit. With x fused into the step's GEMM (32 inputs), apart (160),
 * and as ids (a table of 4 rows); with a mask that ends the first sequence early and masks
 * every sequence's last two steps; through the AVX-512 cells where the CPU has them, and
 * through the plain ones. x·K apart is a library GEMM, cut into 4 blocks on every thread
 * count (tfc_cpu_gemm_blocks_force): cut by the threads, its bits change with the count on
 * AVX2 (oneDNN's kernels there: 3 threads' 6 blocks of 85 columns). */
static void test_lstm_columns(void)
{
    tfc_cpu_gemm_blocks_force(4);
    for (int k = 0; k < 12; k++) {
        if (k == 6 && !tfc_cpu_lstm_cells_isa(0)) break; /* then the plain cells (AVX2 hosts') */
        const int n = k % 2 ? 3 : 1, ids = k % 6 / 2 == 2, T = 9, u = 128, G = 4 * u;
        tfc_lstm_desc d = {.n = n, .t = T, .in = k % 6 / 2 == 1 ? 160 : 32, .units = u,
                           .return_sequences = 1};
        const int64_t NT = (int64_t)n * T, vocab = 4; /* ids need vocab <= n T / 2 */
        const int64_t nx = (ids ? vocab : NT) * d.in, nseq = NT * u;
        float *x = falloc(nx), *K = falloc((int64_t)d.in * G), *R = falloc((int64_t)u * G);
        float *b = falloc(G), *mask = falloc(NT);
        int32_t *tok = malloc(sizeof(int32_t) * (size_t)NT);
        fill(x, nx, -1, 1), fill(K, (int64_t)d.in * G, -0.3, 0.3);
        fill(R, (int64_t)u * G, -0.3, 0.3), fill(b, G, -0.5, 0.5);
        for (int64_t r = 0; r < NT; r++) {
            const int i = (int)(r / T), s = (int)(r % T);
            mask[r] = s >= T - 2 || (i == 0 && s >= 4) ? 0.0f : 1.0f;
            tok[r] = (int32_t)((r * 7 + 3) % vocab);
        }
        if (ids) d.vocab = (int)vocab, d.ids = tok;
        float *out[4][4]; /* runs: 1 thread, 2, 3, 2 on a team of one; y, h, c, gates */
        for (int run = 0; run < 4; run++) {
            tfc_backend *be = tfc_cpu_backend_create(run == 0 ? 1 : run == 2 ? 3 : 2);
            CU_ASSERT_FATAL(!ids || (be->lstm_ids && be->lstm_ids(be, &d)));
            void *ws = be->ops->alloc(be, be->ops->lstm_workspace(be, &d));
            for (int q = 0; q < 4; q++) out[run][q] = falloc(q == 3 ? 4 * nseq : nseq);
            /* a step that masks every sequence leaves its gates unwritten (no one reads them) */
            memset(out[run][3], 0, sizeof(float) * (size_t)(4 * nseq));
            if (run == 3) tfc_cpu_team_force(1);
            be->ops->lstm_forward(be, &d, x, K, R, b, mask, out[run][0], out[run][1],
                                  out[run][2], out[run][3], ws);
            tfc_cpu_team_force(0);
            be->ops->free(be, ws);
            tfc_backend_free(be);
            if (!run) continue;
            int same = 1;
            for (int q = 0; q < 4; q++)
                same &= !memcmp(out[run][q], out[0][q],
                                sizeof(float) * (size_t)(q == 3 ? 4 * nseq : nseq));
            if (!same) printf("\nlstm columns: case %d, run %d differs\n", k, run);

            CU_ASSERT(same);
        }
        for (int run = 0; run < 4; run++)
            for (int q = 0; q < 4; q++) free(out[run][q]);
        free(x), free(K), free(R), free(b), free(mask), free(tok);
    }
    tfc_cpu_lstm_cells_isa(-1);
    tfc_cpu_gemm_blocks_force(0);
}

/* A batch of at most four sequences takes x·K out of the recurrence (cpu_lstm.c,
 * hoisted_input: one GEMM over all steps, each step's GEMM continuing its sums); a batch of
 * twelve (blocks of six) keeps it in each step's GEMM. Each sequence's y, h, c and gates are
 * the same bits either way: sequences 0..n-1 of the twelve run alone as a batch of n (1 and
 * 3), on 1 and 2 threads (where the two share each step's columns), x fused (32 inputs, 128
 * units) and masked (the last step of every sequence, and the first sequence from step 4). */
static void test_lstm_hoisted(void)
{
    const int N = 12, T = 7, in = 32, u = 128, G = 4 * u;
    float *x = falloc((int64_t)N * T * in), *K = falloc((int64_t)in * G);
    float *R = falloc((int64_t)u * G), *b = falloc(G), *mask = falloc((int64_t)N * T);
    fill(x, (int64_t)N * T * in, -1, 1), fill(K, (int64_t)in * G, -0.3, 0.3);
    fill(R, (int64_t)u * G, -0.3, 0.3), fill(b, G, -0.5, 0.5);
    for (int r = 0; r < N * T; r++)
        mask[r] = r % T == T - 1 || (r / T == 0 && r % T >= 4) ? 0.0f : 1.0f;
    const int64_t seq = (int64_t)N * T * u;
    float *out[2][4]; /* the twelve, then a few: y, h, c, gates */
    for (int q = 0; q < 4; q++) out[0][q] = falloc(q == 3 ? 4 * seq : seq);
    for (int q = 0; q < 4; q++) out[1][q] = falloc(q == 3 ? 4 * seq : seq);
    for (int threads = 1; threads <= 2; threads++)
        for (int n = 0; n <= 3; n += 3) {
            const int rows = n ? n : N;
            tfc_backend *be = tfc_cpu_backend_create(threads);
            const tfc_lstm_desc d = {.n = rows, .t = T, .in = in, .units = u,
                                     .return_sequences = 1};
            void *ws = be->ops->alloc(be, be->ops->lstm_workspace(be, &d));
            float **o = out[n ? 1 : 0];
            be->ops->lstm_forward(be, &d, x, K, R, b, mask, o[0], o[1], o[2], o[3], ws);
            be->ops->free(be, ws);
            tfc_backend_free(be);
            for (int k = 1; n && k <= n; k += 2) { /* the first k sequences */
                const size_t bytes = sizeof(float) * (size_t)(k * T * u);
                int same = 1;
                for (int q = 0; q < 3; q++) same &= !memcmp(out[1][q], out[0][q], bytes);
                /* gates: a step that masks all of a batch's sequences leaves them unwritten */
                for (int r = 0; r < k * T; r++)
                    same &= mask[r] == 0.0f ||
                            !memcmp(out[1][3] + (int64_t)r * G, out[0][3] + (int64_t)r * G,
                                    sizeof(float) * (size_t)G);
                if (!same) printf("\nlstm hoisted: %d threads, %d of %d differ\n", threads, k, n);
                CU_ASSERT(same);
            }
        }
    for (int p = 0; p < 2; p++)
        for (int q = 0; q < 4; q++) free(out[p][q]);
    free(x), free(K), free(R), free(b), free(mask);
}

/* The GRU's forward pass (reset_after) of one sequence, or three, on 2 and 3 threads shares
 * each step's gate columns among the threads (cpu_gru.c, forward_cols: 80 units, five panels
 * of 16, a step of 19,200 multiply-adds a sequence), also on a team cut to one: y, h and the gates
 * equal the one-thread pass's bit for bit, with and without a bias, with a mask that ends
 * the first sequence early and masks every sequence's last two steps. */
static void test_gru_columns(void)
{
    for (int k = 0; k < 4; k++) {
        const int n = k % 2 ? 3 : 1, T = 9, u = 80, G = 3 * u;
        const tfc_gru_desc d = {.n = n, .t = T, .in = 24, .units = u, .return_sequences = 1,
                                .reset_after = 1};
        const int64_t NT = (int64_t)n * T, nseq = NT * u;
        float *x = falloc(NT * d.in), *K = falloc((int64_t)d.in * G), *R = falloc((int64_t)u * G);
        float *b = k / 2 ? falloc(2 * G) : NULL, *mask = falloc(NT);
        fill(x, NT * d.in, -1, 1), fill(K, (int64_t)d.in * G, -0.3, 0.3);
        fill(R, (int64_t)u * G, -0.3, 0.3);
        if (b) fill(b, 2 * G, -0.5, 0.5);
        for (int64_t r = 0; r < NT; r++) {
            const int i = (int)(r / T), s = (int)(r % T);
            mask[r] = s >= T - 2 || (i == 0 && s >= 4) ? 0.0f : 1.0f;
        }
        float *out[4][3]; /* runs: 1 thread, 2, 3, 2 on a team of one; y, h, gates */
        for (int run = 0; run < 4; run++) {
            tfc_backend *be = tfc_cpu_backend_create(run == 0 ? 1 : run == 2 ? 3 : 2);
            void *ws = be->ops->alloc(be, be->ops->gru_workspace(be, &d));
            for (int q = 0; q < 3; q++) out[run][q] = falloc(q == 2 ? 4 * nseq : nseq);
            /* a step that masks every sequence leaves part of its gates unwritten */
            memset(out[run][2], 0, sizeof(float) * (size_t)(4 * nseq));
            if (run == 3) tfc_cpu_team_force(1);
            be->ops->gru_forward(be, &d, x, K, R, b, mask, out[run][0], out[run][1], out[run][2],
                                 ws);
            tfc_cpu_team_force(0);
            be->ops->free(be, ws);
            tfc_backend_free(be);
            if (!run) continue;
            int same = 1;
            for (int q = 0; q < 3; q++)
                same &= !memcmp(out[run][q], out[0][q],
                                sizeof(float) * (size_t)(q == 2 ? 4 * nseq : nseq));
            if (!same) printf("\ngru columns: case %d, run %d differs\n", k, run);
            CU_ASSERT(same);
        }
        for (int run = 0; run < 4; run++)
            for (int q = 0; q < 3; q++) free(out[run][q]);
        free(x), free(K), free(R), free(b), free(mask);
    }
}

/* ---- losses ----------------------------------------------------------------------------- */

static double clipd(double p)
{
    const double lo = 1e-7f, hi = 1.0f - 1e-7f;
    return p < lo ? lo : p > hi ? hi : p;
}

/* One row's loss, as Keras 3 computes it (TensorFlow backend). */
static double ref_loss_row(tfc_loss_kind kind, int logits, double delta, int C,
                           const double *x, int label, const double *t)
{
    double l = 0, m = x[0], s = 0;
    for (int j = 1; j < C; j++) m = fmax(m, x[j]);
    switch (kind) {
    case TFC_LOSS_SPARSE_CCE:
        if (logits) {
            for (int j = 0; j < C; j++) s += exp(x[j] - m);
            return -(x[label] - m - log(s));
        }
        for (int j = 0; j < C; j++) s += clipd(x[j]); /* clip, log, softmax CE */
        return -log(clipd(x[label]) / s);
    case TFC_LOSS_CCE:
        if (logits) {
            for (int j = 0; j < C; j++) s += exp(x[j] - m);
            for (int j = 0; j < C; j++) l -= t[j] * (x[j] - m - log(s));
            return l;
        }
        for (int j = 0; j < C; j++) s += x[j]; /* normalise, clip, -sum t log */
        for (int j = 0; j < C; j++) l -= t[j] * log(clipd(x[j] / s));
        return l;
    case TFC_LOSS_BCE:
        for (int j = 0; j < C; j++) {
            double p = logits ? 1 / (1 + exp(-x[j])) : clipd(x[j]);
            if (logits && fabs(x[j]) > 30) /* the sigmoid form loses it; use the limit */
                l += x[j] > 0 ? x[j] * (1 - t[j]) : -x[j] * t[j];
            else
                l -= t[j] * log(p) + (1 - t[j]) * log(1 - p);
        }
        return l / C;
    case TFC_LOSS_MSE:
        for (int j = 0; j < C; j++) l += (x[j] - t[j]) * (x[j] - t[j]);
        return l / C;
    case TFC_LOSS_MAE:
        for (int j = 0; j < C; j++) l += fabs(x[j] - t[j]);
        return l / C;
    case TFC_LOSS_HUBER:
        for (int j = 0; j < C; j++) {
            double e = x[j] - t[j];
            l += fabs(e) <= delta ? 0.5 * e * e : delta * fabs(e) - 0.5 * delta * delta;
        }
        return l / C;
    case TFC_LOSS_LOG_COSH:
        for (int j = 0; j < C; j++) l += log(cosh(x[j] - t[j]));
        return l / C;
    case TFC_LOSS_MSLE: /* Keras 3's formulas, epsilon 1e-7 */
        for (int j = 0; j < C; j++) {
            double d = log(fmax(x[j], 1e-7) + 1) - log(fmax(t[j], 1e-7) + 1);
            l += d * d;
        }
        return l / C;
    case TFC_LOSS_MAPE:
        for (int j = 0; j < C; j++) l += fabs((t[j] - x[j]) / fmax(fabs(t[j]), 1e-7));
        return 100 * l / C;
    case TFC_LOSS_POISSON:
        for (int j = 0; j < C; j++) l += x[j] - t[j] * log(x[j] + 1e-7);
        return l / C;
    case TFC_LOSS_KLD: /* summed over the row */
        for (int j = 0; j < C; j++) {
            double tc = fmin(fmax(t[j], 1e-7), 1), xc = fmin(fmax(x[j], 1e-7), 1);
            l += tc * log(tc / xc);
        }
        return l;
    case TFC_LOSS_HINGE:
    case TFC_LOSS_SQUARED_HINGE: /* 0/1 targets read as -1/1 */
        for (int j = 0; j < C; j++) {
            double h = fmax(1 - (t[j] == 0 ? -1 : t[j]) * x[j], 0);
            l += kind == TFC_LOSS_HINGE ? h : h * h;
        }
        return l / C;
    case TFC_LOSS_CATEGORICAL_HINGE: { /* one term a row */
        double pos = 0, neg = -INFINITY;
        for (int j = 0; j < C; j++) {
            pos += t[j] * x[j];
            neg = fmax(neg, (1 - t[j]) * x[j]);
        }
        return fmax(neg - pos + 1, 0);
    }
    case TFC_LOSS_COSINE_SIMILARITY: {
        double sx = 0, st = 0;
        for (int j = 0; j < C; j++) sx += x[j] * x[j], st += t[j] * t[j], l += t[j] * x[j];
        return -l * fmin(1 / sqrt(sx), 1e7) * fmin(1 / sqrt(st), 1e7);
    }
    default: return NAN;
    }
}

typedef struct loss_ctx {
    tfc_loss_kind kind;
    int logits, C;
    double delta;
    int64_t rows;
    double *x, *t, scale;
    const int32_t *ids;
    const float *w;
} loss_ctx;

static double loss_total(void *p)
{
    loss_ctx *c = p;
    double L = 0;
    for (int64_t r = 0; r < c->rows; r++) {
        double w = c->w ? c->w[r] : 1;
        if (w == 0) continue;
        L += w * ref_loss_row(c->kind, c->logits, c->delta, c->C, c->x + r * c->C,
                              c->ids ? c->ids[r] : 0, c->t + r * c->C);
    }
    return c->scale * L;
}

static void check_loss(tfc_backend *be, tfc_loss_kind kind, int logits, double delta,
                       int64_t rows, int C, int weighted)
{
    const int64_t n = rows * C;
    float *x = falloc(n), *t = falloc(n), *w = falloc(rows), *dx = falloc(n);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)rows);
    for (int64_t r = 0; r < rows; r++) {
        float *xr = x + r * C, *tr = t + r * C;
        fill(xr, C, -3, 3);
        if (!logits && kind < TFC_LOSS_MSE) { /* probabilities: softmax or sigmoid */
            double s = 0;
            for (int j = 0; j < C; j++) s += exp(xr[j]);
            for (int j = 0; j < C; j++)
                xr[j] = (float)(kind == TFC_LOSS_BCE ? 1 / (1 + exp(-xr[j])) : exp(xr[j]) / s);
        }
        ids[r] = (int32_t)(urand() * C);
        double ts = 0;
        fill(tr, C, 0, 1);
        for (int j = 0; j < C; j++) ts += tr[j];
        for (int j = 0; j < C; j++) {
            if (kind == TFC_LOSS_CCE) tr[j] = (float)(tr[j] / ts); /* a soft distribution */
            if (kind == TFC_LOSS_BCE && j % 3) tr[j] = tr[j] > 0.5f ? 1.0f : 0.0f;
            if (kind == TFC_LOSS_MAPE) tr[j] = tr[j] > 0.5f ? tr[j] : -0.3f - tr[j];
            /* Poisson's predictions are rates; KL divergence's mostly inside (0, 1) */
            if (kind == TFC_LOSS_POISSON) xr[j] = 0.05f + fabsf(xr[j]);
            if (kind == TFC_LOSS_KLD && j % 4) xr[j] = 0.02f + 0.96f * fabsf(xr[j]) / 3;
            if (kind == TFC_LOSS_HINGE || kind == TFC_LOSS_SQUARED_HINGE) /* -1/1 and 0/1 */
                tr[j] = tr[j] > 0.5f ? 1.0f : j % 2 ? -1.0f : 0.0f;
            if (kind == TFC_LOSS_CATEGORICAL_HINGE) tr[j] = j == ids[r]; /* one-hot */
        }
        w[r] = r % 4 == 1 ? 0.0f : (float)(0.5 + urand());
    }
    for (int64_t i = 0; i < n; i++) dx[i] = NAN; /* overwritten */
    const float scale = 1.0f / (float)rows;
    float loss = NAN, loss2 = NAN;
    const void *labels = kind == TFC_LOSS_SPARSE_CCE ? (void *)ids : t;
    be->ops->loss(be, kind, logits, (float)delta, rows, C, x, labels, weighted ? w : NULL,
                  scale, &loss, dx);
    be->ops->loss(be, kind, logits, (float)delta, rows, C, x, labels, weighted ? w : NULL,
                  scale, &loss2, NULL);
    loss_ctx ctx = {kind, logits, C, delta, rows, to_double(x, n), to_double(t, n), scale,
                    kind == TFC_LOSS_SPARSE_CCE ? ids : NULL, weighted ? w : NULL};
    double want = loss_total(&ctx);
    if (!close_to(loss, want, 1e-5, 1e-6))
        printf("\n  loss kind %d logits %d weighted %d: %.9g want %.9g", kind, logits, weighted,
               loss, want);
    CU_ASSERT(close_to(loss, want, 1e-5, 1e-6));
    CU_ASSERT_EQUAL(loss, loss2);
    double *g = to_double(dx, n);
    int bad = grad_check("loss", ctx.x, n, g, loss_total, &ctx, 1e-5, 1e-3, 1e-6);
    if (bad) printf("\n  (kind %d logits %d weighted %d)", kind, logits, weighted);
    CU_ASSERT_EQUAL(bad, 0);
    if (weighted)
        for (int64_t r = 1; r < rows; r += 4)
            for (int j = 0; j < C; j++) CU_ASSERT_EQUAL(dx[r * C + j], 0.0f);
    free(x), free(t), free(w), free(dx), free(ids), free(ctx.x), free(ctx.t), free(g);
}

static void test_loss(void)
{
    tfc_backend *be = backend();
    for (int kind = 0; kind < TFC_LOSS_COUNT; kind++)
        for (int logits = 0; logits < 2; logits++)
            for (int weighted = 0; weighted < 2; weighted++) {
                if (kind >= TFC_LOSS_MSE && logits) continue; /* the regression losses */
                check_loss(be, (tfc_loss_kind)kind, logits, 1.0, 37, 5, weighted);
            }
    check_loss(be, TFC_LOSS_HUBER, 0, 0.4, 37, 5, 1); /* Huber's delta: both branches move */
    check_loss(be, TFC_LOSS_HUBER, 0, 2.5, 37, 5, 0);
    check_loss(be, TFC_LOSS_SPARSE_CCE, 1, 1.0, 5000, 10, 1); /* parallel path */
    check_loss(be, TFC_LOSS_BCE, 1, 1.0, 1, 1, 0);

    /* clipping: a zero probability costs -log(1e-7), and passes no gradient */
    float p[3] = {0.0f, 0.5f, 0.5f}, dx[3], loss;
    int32_t label = 0;
    be->ops->loss(be, TFC_LOSS_SPARSE_CCE, 0, 1.0f, 1, 3, p, &label, NULL, 1.0f, &loss, dx);
    CU_ASSERT(close_to(loss, -log(1e-7f / (1e-7f + 1.0)), 1e-5, 0));
    CU_ASSERT_EQUAL(dx[0], 0.0f);
    float one = 1.0f, zero = 0.0f;
    be->ops->loss(be, TFC_LOSS_BCE, 0, 1.0f, 1, 1, &one, &zero, NULL, 1.0f, &loss, dx);
    CU_ASSERT(close_to(loss, -log(1.0 - (double)(1.0f - 1e-7f)), 1e-5, 0));
    CU_ASSERT_EQUAL(dx[0], 0.0f);
    /* logits far out of exp's range stay finite */
    float z[2] = {100.0f, -100.0f}, tz[2] = {0.0f, 1.0f};
    be->ops->loss(be, TFC_LOSS_BCE, 1, 1.0f, 1, 2, z, tz, NULL, 1.0f, &loss, dx);
    CU_ASSERT(close_to(loss, 100.0, 1e-6, 0));
    CU_ASSERT(close_to(dx[0], 0.5, 1e-6, 0) && close_to(dx[1], -0.5, 1e-6, 0));
    float big[3] = {1000.0f, -1000.0f, 0.0f};
    label = 1;
    be->ops->loss(be, TFC_LOSS_SPARSE_CCE, 1, 1.0f, 1, 3, big, &label, NULL, 1.0f, &loss, dx);
    CU_ASSERT(close_to(loss, 2000.0, 1e-6, 0));
    CU_ASSERT(close_to(dx[0], 1.0, 1e-6, 0) && close_to(dx[1], -1.0, 1e-6, 0));
    /* an out-of-range sparse label counts as a masked row */
    label = 7;
    be->ops->loss(be, TFC_LOSS_SPARSE_CCE, 1, 1.0f, 1, 3, big, &label, NULL, 1.0f, &loss, dx);
    CU_ASSERT_EQUAL(loss, 0.0f);
    CU_ASSERT_EQUAL(dx[0], 0.0f);
    tfc_backend_free(be);
}

static void test_accuracy(void)
{
    tfc_backend *be = backend();
    /* top-1 and top-k with ties (a tie with the label counts against it) */
    const float x[5 * 4] = {0.1f, 0.7f, 0.1f, 0.1f,  /* label 1: right */
                            0.5f, 0.9f, 0.5f, 0.1f,  /* label 0: 2 at or above it */
                            0.4f, 0.4f, 0.1f, 0.1f,  /* label 0: tie for first */
                            0.3f, 0.2f, 0.1f, 0.4f,  /* label 1: third */
                            NAN,  0.2f, 0.1f, 0.4f}; /* label 0: NaN never right */
    const int32_t ids[5] = {1, 0, 0, 1, 0};
    float count = 10.0f;
    be->ops->accuracy(be, TFC_LOSS_SPARSE_CCE, 0, 5, 4, 1, x, ids, NULL, &count);
    CU_ASSERT_DOUBLE_EQUAL(count, 11.0, 1e-6); /* accumulates */
    count = 0;
    be->ops->accuracy(be, TFC_LOSS_SPARSE_CCE, 0, 5, 4, 2, x, ids, NULL, &count);
    CU_ASSERT_DOUBLE_EQUAL(count, 2.0, 1e-6); /* rows 0 and 2 */
    count = 0;
    be->ops->accuracy(be, TFC_LOSS_SPARSE_CCE, 0, 5, 4, 3, x, ids, NULL, &count);
    CU_ASSERT_DOUBLE_EQUAL(count, 4.0, 1e-6);
    count = 0;
    be->ops->accuracy(be, TFC_LOSS_SPARSE_CCE, 0, 5, 4, 4, x, ids, NULL, &count);
    CU_ASSERT_DOUBLE_EQUAL(count, 4.0, 1e-6);
    const float w[5] = {0, 1, 1, 1, 1};
    count = 0;
    be->ops->accuracy(be, TFC_LOSS_SPARSE_CCE, 0, 5, 4, 3, x, ids, w, &count);
    CU_ASSERT_DOUBLE_EQUAL(count, 3.0, 1e-6);

    /* dense labels use their argmax */
    const float onehot[5 * 4] = {0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1};
    count = 0;
    be->ops->accuracy(be, TFC_LOSS_CCE, 1, 5, 4, 1, x, onehot, NULL, &count);
    CU_ASSERT_DOUBLE_EQUAL(count, 3.0, 1e-6); /* rows 0, 3 and 4 (a NaN elsewhere ranks nowhere) */
    count = 0;
    be->ops->accuracy(be, TFC_LOSS_CCE, 1, 5, 4, 3, x, onehot, NULL, &count);
    CU_ASSERT_DOUBLE_EQUAL(count, 4.0, 1e-6); /* and row 1 */

    /* binary: threshold 0.5 on probabilities, 0 on logits */
    const float prob[4] = {0.7f, 0.5f, 0.2f, 0.3f}, lab[4] = {1, 1, 1, 0};
    count = 0;
    be->ops->accuracy(be, TFC_LOSS_BCE, 0, 4, 1, 1, prob, lab, NULL, &count);
    CU_ASSERT_DOUBLE_EQUAL(count, 3.0, 1e-6);
    const float logit[4] = {-0.1f, 0.0f, 2.0f, 0.3f};
    count = 0;
    be->ops->accuracy(be, TFC_LOSS_BCE, 1, 4, 1, 1, logit, lab, NULL, &count);
    CU_ASSERT_DOUBLE_EQUAL(count, 2.0, 1e-6); /* rows 1 and 2 */
    const int32_t bin[4] = {0, 1, 1, 1};
    count = 0;
    be->ops->accuracy(be, TFC_LOSS_SPARSE_CCE, 1, 4, 1, 1, logit, bin, NULL, &count);
    CU_ASSERT_DOUBLE_EQUAL(count, 4.0, 1e-6);
    tfc_backend_free(be);
}

/* The floating-point sums that run in parallel (bias gradient, sum of squares, loss,
 * batch-norm statistics and gradients) give the same bits on every call with the same
 * thread count: 5 threads (more than this machine has cores, so they finish in varying
 * order), 25 calls each. An OpenMP `reduction` combines in finishing order and fails this. */
static void test_parallel_sums_repeat(void)
{
    tfc_backend *be = tfc_cpu_backend_create(5);
    enum { ROWS = 40000, COLS = 4, RUNS = 25 };
    const int64_t n = (int64_t)ROWS * COLS;
    float *x = malloc(sizeof(float) * n), *dy = malloc(sizeof(float) * n);
    float *y = malloc(sizeof(float) * n), *dx = malloc(sizeof(float) * n);
    int32_t *ids = malloc(sizeof(int32_t) * ROWS);
    TFC_ASSERT(x && dy && y && dx && ids);
    fill(x, n, -3, 3);
    fill(dy, n, -1, 1);
    for (int r = 0; r < ROWS; r++) ids[r] = r % COLS;
    float first[4 * COLS + 2], got[4 * COLS + 2];
    int differ = 0;
    for (int run = 0; run < RUNS; run++) {
        float *out = run ? got : first;
        float gamma[COLS] = {1, 2, 0.5f, 1}, beta[COLS] = {0}, mm[COLS] = {0}, mv[COLS] = {1};
        float sm[COLS], si[COLS], dg[COLS] = {0}, db[COLS] = {0}, bg[COLS] = {0}, loss;
        be->ops->bias_grad(be, ROWS, COLS, dy, bg);
        be->ops->bn_forward_train(be, ROWS, COLS, x, gamma, beta, 1e-3f, 0.9f, mm, mv, y, sm, si,
                                  TFC_ACT_LINEAR);
        memset(dx, 0, sizeof(float) * n);
        be->ops->bn_backward(be, ROWS, COLS, x, dy, gamma, sm, si, dx, dg, db, 0);
        be->ops->loss(be, TFC_LOSS_SPARSE_CCE, 1, 1.0f, ROWS, COLS, x, ids, NULL, 1.0f / ROWS,
                      &loss, y);
        double ss = be->ops->sumsq(be, n, x);
        for (int c = 0; c < COLS; c++) {
            out[c] = bg[c];
            out[COLS + c] = si[c];
            out[2 * COLS + c] = dg[c];
            out[3 * COLS + c] = db[c];
        }
        out[4 * COLS] = loss;
        out[4 * COLS + 1] = (float)ss;
        if (run && (memcmp(first, got, sizeof got) != 0 || ss != be->ops->sumsq(be, n, x))) differ++;
    }
    CU_ASSERT_EQUAL(differ, 0);
    free(x), free(dy), free(y), free(dx), free(ids);
    tfc_backend_free(be);
}

/* The step ops (TFC_BACKEND_STEP_OPS) give the host path's bits: grad_sumsq stores sumsq's
 * value, step_scale the clipping factor (the scaled norm then equals the threshold) and
 * optimizer_update_at optimizer_update's result; a non-finite loss or gradient sets skip,
 * and the update then leaves params and slots untouched. */
static void test_step_ops(void)
{
    tfc_backend *be = tfc_cpu_backend_create(3);
    enum { N = 1000 };
    float g[N], w[N], slot[3][N], w2[N], slot2[3][N];
    fill(g, N, -1, 1);
    fill(w, N, -1, 1);
    for (int k = 0; k < 3; k++) fill(slot[k], N, 0, 0.5);
    tfc_optim_desc d = {.type = TFC_OPTIMIZER_ADAM, .lr = 0.01f, .l2 = 1e-3f, .beta_1 = 0.9f,
                        .beta_2 = 0.999f, .epsilon = 1e-7f, .alpha = 0.003f, .amsgrad = 1};
    const double clips[] = {0, 0.01, 1e9};
    float loss = 1.5f;
    tfc_step_state st = {.loss_scale = 1.0f};
    for (int c = 0; c < 3; c++) {
        be->ops->grad_sumsq(be, N, g, &st);
        double ss = be->ops->sumsq(be, N, g);
        CU_ASSERT(!memcmp(&st.sumsq, &ss, sizeof ss));
        be->ops->step_scale(be, &loss, 0.5, clips[c], &st);
        CU_ASSERT_EQUAL(st.skip, 0);
        /* clipped at 0.01 (the norm is far above), the applied gradient's norm is 0.01 */
        CU_ASSERT(c == 1 ? sqrt(ss) * 0.5 > 0.01 && fabs(st.grad_scale * sqrt(ss) - 0.01) < 1e-8
                         : st.grad_scale == 0.5f);
        memcpy(w2, w, sizeof w);
        memcpy(slot2, slot, sizeof slot);
        be->ops->optimizer_update_at(be, &d, &st, N, w2, g, slot2[0], slot2[1], slot2[2]);
        tfc_optim_desc host = d;
        host.grad_scale = st.grad_scale;
        be->ops->optimizer_update(be, &host, N, w, g, slot[0], slot[1], slot[2]);
        CU_ASSERT(!memcmp(w, w2, sizeof w) && !memcmp(slot, slot2, sizeof slot));
    }
    /* float16's loss scale S in the state: the scale divided by it (in double, as the host
     * path's), the clipping seeing the unscaled norm; loss_scale_at multiplies by it as
     * `scale` does */
    {
        const double ss = st.sumsq, S = 1048576.0; /* the gradients' S^2 ss */
        st.loss_scale = (float)S;
        for (int c = 0; c < 3; c++) {
            st.sumsq = ss * S * S;
            be->ops->step_scale(be, &loss, 0.5, clips[c], &st);
            const float want = tfc_step_grad_scale(ss * S * S, 0.5 / S, clips[c]);
            CU_ASSERT(!memcmp(&st.grad_scale, &want, 4));
            CU_ASSERT(c == 1 ? fabs(st.grad_scale * S * sqrt(ss) - 0.01) < 1e-8
                             : st.grad_scale == (float)(0.5 / S));
        }
        float a[37], b[37];
        fill(a, 37, -1e3, 1e3);
        memcpy(b, a, sizeof a);
        const float a5 = a[5];
        be->ops->loss_scale_at(be, 37, &st, a);
        be->ops->scale(be, 37, (float)S, b);
        CU_ASSERT(!memcmp(a, b, sizeof a) && a[5] == a5 * (float)S && a[5] != a5);
        st.loss_scale = 1.0f, st.sumsq = ss;
        be->ops->step_scale(be, &loss, 0.5, 0, &st);
    }
    /* rates_at_state: lr, alpha and decay from the state; the desc's (far off) unread */
    for (int t = 0; t < 2; t++) {
        tfc_optim_desc at = d;
        at.type = t ? TFC_OPTIMIZER_ADAMW : TFC_OPTIMIZER_SGD;
        at.momentum = 0.9f, at.decay = t ? 4e-4f : 0;
        tfc_optim_desc off = at;
        off.rates_at_state = 1, off.lr = 7, off.alpha = 7, off.decay = 0.5f;
        st.lr = at.lr, st.alpha = at.alpha, st.decay = at.decay;
        memcpy(w2, w, sizeof w);
        memcpy(slot2, slot, sizeof slot);
        be->ops->optimizer_update_at(be, &off, &st, N, w2, g, slot2[0], slot2[1], slot2[2]);
        at.grad_scale = st.grad_scale;
        be->ops->optimizer_update(be, &at, N, w, g, slot[0], slot[1], slot[2]);
        CU_ASSERT(!memcmp(w, w2, sizeof w) && !memcmp(slot, slot2, sizeof slot));
    }
    /* skip: a non-finite loss, then a finite loss with an infinite gradient */
    for (int k = 0; k < 2; k++) {
        loss = k ? 2.0f : NAN;
        g[17] = k ? INFINITY : g[17];
        be->ops->grad_sumsq(be, N, g, &st);
        be->ops->step_scale(be, &loss, 1.0, 0.5, &st);
        CU_ASSERT_EQUAL(st.skip, 1);
        CU_ASSERT(k == 0 || isinf(st.sumsq));
        memcpy(w2, w, sizeof w);
        memcpy(slot2, slot, sizeof slot);
        be->ops->optimizer_update_at(be, &d, &st, N, w2, g, slot2[0], slot2[1], slot2[2]);
        CU_ASSERT(!memcmp(w, w2, sizeof w) && !memcmp(slot, slot2, sizeof slot));
    }
    tfc_backend_free(be);
}

TFC_TEST_MAIN("cpu_ops", {"backend_check", test_backend_check}, {"memory", test_memory},
              {"gemm", test_gemm}, {"gemm_blocks", test_gemm_blocks}, {"gemm_panels", test_gemm_panels}, {"elementwise", test_elementwise}, {"dropout", test_dropout},
              {"act_values", test_act_values}, {"gelu_tail", test_gelu_tail},
              {"gemm_libraries", test_gemm_libraries},
              {"act_grad", test_act_grad},
              {"softmax", test_softmax}, {"conv", test_conv},
              {"conv_winograd", test_conv_winograd},
              {"conv_winograd_f2", test_conv_winograd_f2},
              {"conv_threads_repeat", test_conv_threads_repeat}, {"conv_kept", conv_kept},
              {"conv_c1", test_conv_c1}, {"conv_1x1", test_conv_1x1},
              {"gemm_weights", test_gemm_weights},
              {"pool", test_pool},
              {"add", test_add}, {"bn", test_bn}, {"embedding", test_embedding},
              {"lstm", test_lstm},
              {"lstm_threads", test_lstm_threads}, {"lstm_columns", test_lstm_columns},
              {"gru_columns", test_gru_columns}, {"lstm_hoisted", test_lstm_hoisted},
              {"lstm_ids", test_lstm_ids},
              {"lstm_ids_kept", test_lstm_ids_kept},
              {"loss", test_loss}, {"accuracy", test_accuracy},
              {"parallel_sums_repeat", test_parallel_sums_repeat}, {"step_ops", test_step_ops})
