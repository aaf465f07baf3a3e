/* Training-step benchmark: forward + loss + backward + SGD update per batch for each model
 * given, on random data, after warm-up; prints one JSON line per model with the median of
 * each repeat (every repeat is the median of --steps steps). Also measures the machine's
 * sgemm rate, which with each model's GEMM FLOPs gives the sgemm-rate bound. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/model.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* sgemm GFLOP/s on 1024^3 (best of 5), the rate the bound divides by. */
static double sgemm_rate(void)
{
    int n = 1024;
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n),
          *c = malloc(sizeof(float) * n * n);
    for (int i = 0; i < n * n; i++) a[i] = b[i] = c[i] = 0.001f * (float)(i % 97);
    double best = 1e9;
    for (int r = 0; r < 6; r++) {
        double t = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
        t = now() - t;
        if (r && t < best) best = t;
    }
    free(a), free(b), free(c);
    return 2.0 * n * n * n / best / 1e9;
}

/* GEMM FLOPs of one training step: forward, weight gradients, and input gradients of every
 * layer but the first (whose input needs none). Convolutions count as their im2col GEMMs;
 * the LSTM as its input and recurrent GEMMs. */
static double step_flops(tfc_model *m, int batch)
{
    double total = 0;
    for (int i = 0; i < tfc_model_nlayers(m); i++) {
        tfc_layer *l = tfc_model_layer(m, i);
        double fwd = 0;
        const tfc_shape *in = &l->in_shape[0], *out = &l->out_shape;
        if (!strcmp(l->ops->type, "Dense"))
            fwd = 2.0 * batch * (double)tfc_shape_numel(in) * (double)out->dim[out->ndim - 1];
        else if (!strcmp(l->ops->type, "Conv2D"))
            fwd = 2.0 * batch * (double)tfc_shape_numel(out) * (double)l->params[0].shape.dim[0] *
                  (double)l->params[0].shape.dim[1] * (double)in->dim[2];
        else if (!strcmp(l->ops->type, "LSTM"))
            fwd = 2.0 * batch * (double)in->dim[0] * (double)(in->dim[1] + l->params[1].shape.dim[0]) *
                  (double)l->params[0].shape.dim[1];
        total += fwd * (i == 0 ? 2 : 3);
    }
    return total;
}

int main(int argc, char **argv)
{
    int steps = 150, repeats = 3, warmup = 20;
    double rate = sgemm_rate();
    printf("{\"sgemm_gflops\": %.1f}\n", rate);
    for (int a = 1; a < argc; a++) {
        const char *path = argv[a];
        int batch = strstr(path, "lstm") ? 32 : 128;
        tfc_error err;
        tfc_error_clear(&err);
        tfc_model *m = tfc_model_load(path, &err);
        tfc_backend *be = tfc_cpu_backend_create(0);
        if (!m || tfc_model_bind(m, be, batch, &err) || tfc_model_init_weights(m, 1, &err)) {
            fputs(err.text, stderr);
            return 1;
        }
        int64_t nin = (int64_t)batch * tfc_shape_numel(tfc_model_input_shape(m));
        int64_t nlab = (int64_t)batch * tfc_model_label_rows(m);
        if (nin <= 0 || nlab <= 0) return 1;
        void *x = malloc((size_t)nin * 4);
        int32_t *labels = malloc((size_t)nlab * 4);
        for (int64_t i = 0; i < nin; i++) {
            if (tfc_model_input_dtype(m) == TFC_I32) ((int32_t *)x)[i] = (int32_t)(i * 7 % 80);
            else ((float *)x)[i] = (float)(i % 255) / 255.f;
        }
        for (int64_t i = 0; i < nlab; i++) labels[i] = (int32_t)(i * 3 % tfc_model_classes(m));
        double *t = malloc(sizeof(double) * (size_t)steps), reps[16];
        int64_t np = tfc_model_trainable_count(m);
        tfc_batch_result r;
        for (int rep = 0; rep < repeats; rep++) {
            for (int s = -warmup; s < steps; s++) {
                double t0 = now();
                tfc_model_forward(m, x, batch, 1, 1, (uint64_t)(s + warmup), &err);
                tfc_model_loss(m, labels, 1, &r, &err);
                tfc_model_zero_grad(m);
                tfc_model_backward(m);
                be->ops->axpy(be, np, -0.01f, tfc_model_grads(m), tfc_model_params(m));
                be->ops->sync(be);
                if (s >= 0) t[s] = now() - t0;
            }
            reps[rep] = median(t, steps) * 1e3;
        }
        double flops = step_flops(m, batch);
        printf("{\"model\": \"%s\", \"batch\": %d, \"steps\": %d, \"ms\": [", tfc_model_name(m), batch, steps);
        for (int rep = 0; rep < repeats; rep++) printf("%s%.3f", rep ? ", " : "", reps[rep]);
        printf("], \"bound_ms\": %.3f, \"gflop\": %.3f}\n", flops / (rate * 1e9) * 1e3, flops / 1e9);
        fflush(stdout);
        free(x), free(labels), free(t);
        tfc_model_free(m);
        tfc_backend_free(be);
    }
    return 0;
}
