/* `make bench-conv` (not in CI): the CPU backend's convolution paths side by side through
 * its op table: oneDNN (src/cpu/cpu_dnnl.c) against im2col + OpenBLAS GEMM (cpu_conv.c, what
 * TFC_CPU_CONV=im2col selects) or, with --against direct, against oneDNN's direct kernels
 * alone (TFC_CPU_CONV=direct: no Winograd), layer by layer for the convolutions of mnist_cnn and
 * resnet20 at batch 128 and fashion_cnn's at an inference pass of 256: forward, backward data
 * and backward filter, the same thread count, interleaved rounds, medians. The oneDNN times
 * include all tfc pays to use it (weight reorders, the backward ops' accumulation). Prints
 * each op's ms and oneDNN / im2col, and the largest difference between the two results
 * relative to the largest magnitude.
 *
 *     bench_conv [--threads N] [--rounds N] [--reps N] [--against im2col|direct]
 *
 * Needs a build with oneDNN (Debian libdnnl-dev). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/backend.h"
#include "cpu/cpu.h"

typedef struct shape {
    const char *name;
    int n, h, w, c, k, f, s, same;
} shape;

static const shape shapes[] = {
    {"mnist_cnn conv1", 128, 28, 28, 1, 3, 32, 1, 0},
    {"mnist_cnn conv2", 128, 26, 26, 32, 3, 64, 1, 0},
    {"resnet20 conv1", 128, 32, 32, 3, 3, 16, 1, 1},
    {"resnet20 s1 3x3 (x6)", 128, 32, 32, 16, 3, 16, 1, 1},
    {"resnet20 s2b1_conv1", 128, 32, 32, 16, 3, 32, 2, 1},
    {"resnet20 s2 3x3 (x5)", 128, 16, 16, 32, 3, 32, 1, 1},
    {"resnet20 s3b1_conv1", 128, 16, 16, 32, 3, 64, 2, 1},
    {"resnet20 s3 3x3 (x5)", 128, 8, 8, 64, 3, 64, 1, 1},
    {"fashion_cnn conv2 infer", 256, 26, 26, 32, 3, 64, 1, 0},
};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static tfc_conv_desc conv_desc(const shape *s)
{
    tfc_conv_desc d = {.n = s->n, .h = s->h, .w = s->w, .c = s->c, .kh = s->k, .kw = s->k,
                       .f = s->f, .sh = s->s, .sw = s->s, .dh = 1, .dw = 1};
    if (s->same) {
        d.oh = (s->h + s->s - 1) / s->s;
        d.ow = (s->w + s->s - 1) / s->s;
        int ph = (d.oh - 1) * s->s + s->k - s->h, pw = (d.ow - 1) * s->s + s->k - s->w;
        d.pad_top = (ph > 0 ? ph : 0) / 2;
        d.pad_left = (pw > 0 ? pw : 0) / 2;
    } else {
        d.oh = (s->h - s->k) / s->s + 1;
        d.ow = (s->w - s->k) / s->s + 1;
    }
    return d;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double rel_diff(const float *a, const float *b, size_t n)
{
    double dmax = 0, amax = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > dmax) dmax = d;
        if (fabs(a[i]) > amax) amax = fabs(a[i]);
    }
    return amax > 0 ? dmax / amax : dmax;
}

static void fill(float *p, size_t n, unsigned *seed)
{
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        p[i] = ((*seed >> 8) * (1.0f / 16777216.0f)) - 0.5f;
    }
}

/* Median ms of one op on backend `be`, one round = `reps` calls. */
static double time_op(tfc_backend *be, int op, const tfc_conv_desc *d, const float *x,
                      const float *w, const float *dy, float *y, float *dx, float *dw, void *ws,
                      int reps)
{
    double t0 = now();
    for (int k = 0; k < reps; k++) {
        if (op == 0) be->ops->conv_forward(be, d, x, w, NULL, NULL, NULL, TFC_ACT_LINEAR, y, NULL, NULL, ws);
        if (op == 1) be->ops->conv_backward_data(be, d, dy, w, dx, 0, ws);
        if (op == 2) be->ops->conv_backward_filter(be, d, x, dy, dw, ws);
    }
    return (now() - t0) * 1e3 / reps;
}

int main(int argc, char **argv)
{
    tfc_cpu_blas_restart(argv); /* the kernels tfc-train would run on */
    int threads = 2, rounds = 5, reps = 5;
    const char *base = "im2col";
    static const char usage[] =
        "usage: bench_conv [--threads N] [--rounds N] [--reps N] [--against im2col|direct]\n";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--against")) base = argv[i + 1];
        else {
            fputs(usage, stderr);
            return 2;
        }
    }
    if (argc % 2 == 0 || rounds < 1 || rounds > 64 || reps < 1 || threads < 1 ||
        (strcmp(base, "im2col") && strcmp(base, "direct"))) {
        fputs(usage, stderr);
        return 2;
    }
    /* the environment decides at creation whether a backend uses oneDNN, and Winograd */
    setenv("TFC_CPU_CONV", base, 1);
    tfc_backend *gemm = tfc_cpu_backend_create(threads);
    unsetenv("TFC_CPU_CONV");
    tfc_backend *dnnl = tfc_cpu_backend_create(threads);
    if (!dnnl->impl) {
        fprintf(stderr, "bench_conv: this build has no oneDNN (apt install libdnnl-dev, make)\n");
        return 1;
    }
    printf("tfc's CPU convolutions: oneDNN against %s, %d threads, "
           "%d interleaved rounds x %d calls, medians\n",
           strcmp(base, "direct") ? "im2col + OpenBLAS GEMM" : "oneDNN's direct kernels alone",
           threads, rounds, reps);
    printf("%-26s %-7s %7s ms %9s %8s %9s\n", "layer", "op", base, "oneDNN ms", "ratio",
           "rel diff");
    double tot[2] = {0, 0}, inf[2] = {0, 0};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const shape *s = &shapes[si];
        tfc_conv_desc d = conv_desc(s);
        size_t nx = (size_t)d.n * d.h * d.w * d.c, nw = (size_t)d.kh * d.kw * d.c * d.f;
        size_t ny = (size_t)d.n * d.oh * d.ow * d.f;
        float *x = malloc(nx * 4), *w = malloc(nw * 4), *dy = malloc(ny * 4);
        float *y[2] = {malloc(ny * 4), malloc(ny * 4)}, *dx[2] = {malloc(nx * 4), malloc(nx * 4)};
        float *dw[2] = {malloc(nw * 4), malloc(nw * 4)};
        unsigned seed = 1234 + (unsigned)si;
        fill(x, nx, &seed);
        fill(w, nw, &seed);
        fill(dy, ny, &seed);
        tfc_backend *be[2] = {gemm, dnnl};
        void *ws[2];
        for (int b = 0; b < 2; b++) {
            size_t bytes = be[b]->ops->conv_workspace(be[b], &d);
            ws[b] = bytes ? be[b]->ops->alloc(be[b], bytes) : NULL;
            /* once for the results (the backward ops accumulate) */
            memset(dx[b], 0, nx * 4);
            memset(dw[b], 0, nw * 4);
            for (int op = 0; op < 3; op++)
                time_op(be[b], op, &d, x, w, dy, y[b], dx[b], dw[b], ws[b], 1);
        }
        double diff[3] = {rel_diff(y[0], y[1], ny), rel_diff(dx[0], dx[1], nx),
                          rel_diff(dw[0], dw[1], nw)};
        const char *ops[3] = {"forward", "b-data", "b-filt"};
        int infer = strstr(s->name, "infer") != NULL;
        int mult = strstr(s->name, "(x6)") ? 6 : strstr(s->name, "(x5)") ? 5 : 1;
        for (int op = 0; op < (infer ? 1 : 3); op++) {
            double t[2][64];
            for (int r = 0; r < rounds; r++)
                for (int k = 0; k < 2; k++) { /* alternate who goes first */
                    int b = (r + k) % 2;
                    t[b][r] = time_op(be[b], op, &d, x, w, dy, y[b], dx[b], dw[b], ws[b], reps);
                }
            double m[2] = {median(t[0], rounds), median(t[1], rounds)};
            for (int b = 0; b < 2; b++) {
                if (infer) inf[b] += m[b];
                else tot[b] += mult * m[b];
            }
            printf("%-26s %-7s %10.3f %9.3f %8.2f %9.1e\n", op ? "" : s->name, ops[op], m[0], m[1],
                   m[1] / m[0], diff[op]);
        }
        free(x), free(w), free(dy);
        for (int b = 0; b < 2; b++) free(y[b]), free(dx[b]), free(dw[b]), be[b]->ops->free(be[b], ws[b]);
    }
    printf("training convolutions of mnist_cnn and resnet20 at batch 128 (repeated layers "
           "counted): %s %.1f ms, oneDNN %.1f ms, oneDNN / %s %.2f\n",
           base, tot[0], tot[1], base, tot[1] / tot[0]);
    printf("fashion_cnn's second convolution, forward at 256: oneDNN / %s %.2f\n", base,
           inf[1] / inf[0]);
    tfc_backend_free(gemm);
    tfc_backend_free(dnnl);
    return 0;
}
