/* Inference through the C API (tfc_predictor, SPEC §5c): images per second at each batch size
 * of the command line, and at batch 1 the latency of single calls (p50, p99). Inputs are
 * random pixels in [0, 1) (token ids in [1, 20) for a text model; a model of variable length
 * gets examples of its tfc_predictor_max_length steps); every call runs on the same
 * predictor, after one warm-up call per batch size (which binds its memory). At batch 1 also
 * the calling thread's CPU time per call (p50): on a loaded machine it leaves out the time the
 * thread waited for a core, so a one-thread comparison means something there. THREADS is
 * tfc_predictor_options.threads (0: every core); the first line gives tfc_predictor_open's
 * time (cold: the first open in the process). bench/infer.sh runs it beside onnxruntime on
 * the same model exported by tfc-export (make bench-infer).
 * Usage: bench_infer MODEL.yaml WEIGHTS SECONDS THREADS BATCH... */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/cpu.h"
#include "tfc.h"

static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    tfc_cpu_blas_restart(argv); /* the kernels tfc-train would run on */
    if (argc < 6) {
        fprintf(stderr, "usage: %s MODEL.yaml WEIGHTS SECONDS THREADS BATCH...\n", argv[0]);
        return 2;
    }
    char err[512];
    tfc_predictor_options o = {.threads = atoi(argv[4])};
    double t_open = tfc_now();
    tfc_predictor *p = tfc_predictor_open_options(argv[1], argv[2], "cpu", &o, err, sizeof err);
    t_open = tfc_now() - t_open;
    if (!p) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    printf("tfc-c-api open %.1f ms\n", t_open * 1e3);
    double seconds = atof(argv[3]);
    /* a model of variable length runs at its max_length (its -1 axes), as its ONNX file */
    int64_t in[8], out[8], per_in = 1, per_out = 1, longest = tfc_predictor_max_length(p);
    const char *dtype;
    int rin = tfc_predictor_shape(p, 0, in, &dtype), rout = tfc_predictor_shape(p, 1, out, NULL);
    for (int i = 0; i < rin; i++) per_in *= in[i] < 0 ? longest : in[i];
    for (int i = 0; i < rout; i++) per_out *= out[i] < 0 ? longest : out[i];
    for (int a = 5; a < argc; a++) {
        int64_t batch = atoll(argv[a]);
        float *x = malloc((size_t)(batch * per_in) * 4), *y = malloc((size_t)(batch * per_out) * 4);
        srand(1);
        for (int64_t k = 0; x && k < batch * per_in; k++) {
            if (!strcmp(dtype, "int32")) ((int32_t *)x)[k] = 1 + rand() % 19; /* token ids */
            else x[k] = (float)rand() / (float)RAND_MAX;
        }
        int cap = 100000, n = 0;
        double *lat = malloc(sizeof(double) * (size_t)cap);
        double *cpu = malloc(sizeof(double) * (size_t)cap);
        if (!x || !y || !lat || !cpu || tfc_predictor_run(p, x, batch, y, err, sizeof err)) {
            fprintf(stderr, "batch %lld: %s\n", (long long)batch,
                    x && y && lat && cpu ? err : "no memory");
            return 1;
        }
        double start = tfc_now(), now = start;
        while (n < cap && (now - start < seconds || n < 3)) {
            double c0 = thread_cpu(), t0 = tfc_now();
            if (tfc_predictor_run(p, x, batch, y, err, sizeof err)) {
                fprintf(stderr, "%s\n", err);
                return 1;
            }
            now = tfc_now();
            cpu[n] = thread_cpu() - c0;
            lat[n++] = now - t0;
        }
        qsort(lat, (size_t)n, sizeof *lat, by_value);
        qsort(cpu, (size_t)n, sizeof *cpu, by_value);
        printf("tfc-c-api batch %5lld: %9.1f images/s", (long long)batch,
               (double)n * (double)batch / (now - start));
        if (batch == 1)
            printf("  latency p50 %.3f ms p99 %.3f ms  thread cpu p50 %.3f ms", lat[n / 2] * 1e3,
                   lat[(int)(0.99 * (n - 1))] * 1e3, cpu[n / 2] * 1e3);
        printf("  (%d calls)\n", n);
        free(x), free(y), free(lat), free(cpu);
    }
    tfc_predictor_close(p);
    return 0;
}
