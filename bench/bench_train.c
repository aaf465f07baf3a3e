/* Training-step benchmark: forward + loss + backward + SGD update per batch for each model
 * given, on random data, after warm-up; prints one JSON line per model with the median of
 * each repeat (every repeat is the median of --steps steps). On the CPU it also measures the
 * machine's sgemm rate, which with each model's GEMM FLOPs gives the sgemm-rate bound: right
 * before each repeat's warm-up and right after its steps, since a shared machine's speed
 * drifts by more than the ratio it bounds within the minutes a run takes; on a GPU
 * (--device gpu[:N]) it reports the allocator's peak memory instead.
 * --threads N sizes the CPU backend (default: all cores, as tfc-train's --threads 0). Each
 * line also carries the model's trainable parameter count and the loss of its first step,
 * for checking that a peer's copy is the same network.
 *   bench_train [--device cpu|gpu|gpu:N] [--threads N] [--steps N] [--repeats N]
 *               [--warmup N] [--tf32] [--conv-find] [--fast-norm] [--bf16] [--staged]
 *               [--graphs] MODEL.yaml...
 * --conv-find: convolution algorithms timed by cuDNN (tfc_gpu_set_conv_find), not chosen by
 * its heuristics; "conv_measured" in the JSON counts the choices it made.
 * --fast-norm: BatchNormalization's and the bias gradient's wider column sums and fused
 * ReLU (tfc_gpu_set_fast_norm).
 * --bf16: the model bound with precision bf16 (docs/solver.md, Precision); on a GPU with
 * TF32 as the trainer sets it, round_bf16 put into the GPU's table for the process
 * (tfc_gpu_test_enable_bf16: its kernel has not landed there yet).
 * --staged: the step in its staged and queued halves (tfc_model_stage_input ...
 * tfc_model_forward_launch ...), launched, its loss read once at its end instead of before
 * the backward pass: --graphs without the graph, to tell the two gains apart.
 * --graphs (GPU): the step's queued half captured once as a CUDA graph (gpu.h) and replayed;
 * the batch is staged before each replay and the loss read after it, dropout drawing at each
 * step's number through the replay's step offset; "graph_nodes" is the launches a replay
 * replaces. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "tfc.h"
#ifdef TFC_HAVE_CUDA
#include "gpu/gpu.h"
#endif

/* The step's device work after its batch is staged: what --graphs captures. */
static void queued_step(tfc_model *m, tfc_backend *be, int64_t np)
{
    tfc_model_forward_launch(m);
    tfc_model_loss_compute(m, 1);
    tfc_model_zero_grad(m);
    tfc_model_backward(m);
    be->ops->axpy(be, np, -0.01f, tfc_model_grads(m), tfc_model_params(m));
}

/* sgemm GFLOP/s on 1024^3, best of `runs` after one unmeasured: the rate the bound divides
 * by. a, b, c: n * n floats each. */
#define RATE_N 1024
static double sgemm_rate(float *a, float *b, float *c, int runs)
{
    const int n = RATE_N;
    double best = 1e9;
    for (int r = 0; r <= runs; r++) {
        double t = tfc_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
        t = tfc_now() - t;
        if (r && t < best) best = t;
    }
    return 2.0 * n * n * n / best / 1e9;
}

/* The GPU allocator's peak (MiB) and the device's name; 0 and "" on the CPU. */
static double peak_mib(tfc_backend *be)
{
#ifdef TFC_HAVE_CUDA
    tfc_gpu_memory st;
    tfc_gpu_memory_stats(be, &st);
    return (double)st.peak_reserved / (1 << 20);
#else
    (void)be;
    return 0.0;
#endif
}

static const char *gpu_name(tfc_backend *be)
{
#ifdef TFC_HAVE_CUDA
    return tfc_gpu_device_name(be);
#else
    (void)be;
    return "";
#endif
}

/* GEMM FLOPs of one training step: forward, weight gradients, and input gradients of every
 * layer but the first (whose input needs none). Dense and convolutions count as their
 * (im2col) GEMMs; LSTM, GRU and Bidirectional as their input and recurrent GEMMs (every
 * parameter named ...kernel: [in or units, gates * units]); MultiHeadAttention as its four
 * projections at the query's length (the score products and depthwise convolutions are no
 * sgemm calls). */
static double step_flops(tfc_model *m, int batch)
{
    double total = 0;
    for (int i = 0; i < tfc_model_nlayers(m); i++) {
        tfc_layer *l = tfc_model_layer(m, i);
        const char *type = l->ops->type;
        const tfc_shape *in = &l->in_shape[0], *out = &l->out_shape;
        double fwd = 0;
        if (!strcmp(type, "Dense"))
            fwd = 2.0 * batch * (double)tfc_shape_numel(in) * (double)out->dim[out->ndim - 1];
        else if (!strcmp(type, "Conv2D") || !strcmp(type, "Conv1D")) /* kernel [.., c, f] */
            fwd = 2.0 * batch * (double)tfc_shape_numel(out) *
                  (double)tfc_shape_numel(&l->params[0].shape) /
                  (double)out->dim[out->ndim - 1];
        else if (!strcmp(type, "LSTM") || !strcmp(type, "GRU") ||
                 !strcmp(type, "Bidirectional") || !strcmp(type, "MultiHeadAttention"))
            for (int p = 0; p < l->nparams; p++) {
                const char *name = l->params[p].name;
                size_t n = strlen(name);
                if (n >= 6 && !strcmp(name + n - 6, "kernel")) /* steps * [in, out] */
                    fwd += 2.0 * batch * (double)in->dim[0] *
                           (double)tfc_shape_numel(&l->params[p].shape);
            }
        total += fwd * (i == 0 ? 2 : 3);
    }
    return total;
}

/* The batch of each model: the zoo's where the model is a zoo network's, 32 for the
 * recurrent and text ones, 8 for the transformer at T = 512 and 2 at T = 2048 (4096 tokens
 * a batch, as at 512), else 128. */
static int batch_of(const char *name)
{
    static const struct { const char *name; int batch; } table[] = {
        {"char_lstm", 32}, {"bigru", 32}, {"conv1d", 32}, {"gpt_t128", 32}, {"gpt_t512", 8},
        {"gpt_t2048", 2}};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(name, table[i].name)) return table[i].batch;
    /* gpt_tN for other T (the peers' out-of-memory sweep): 4096 tokens, at least one sequence */
    int t = 0, used = 0;
    if (sscanf(name, "gpt_t%d%n", &t, &used) == 1 && name[used] == '\0' && t > 0)
        return t < 4096 ? 4096 / t : 1;
    return 128;
}

int main(int argc, char **argv)
{
    tfc_cpu_blas_restart(argv); /* the kernels tfc-train would run on */
    int steps = 150, repeats = 3, warmup = 20, tf32 = 0, conv_find = 0, graphs = 0, staged = 0,
        fast_norm = 0, bf16 = 0;
    int threads = 0;
    const char *device = "cpu";
    const char *models[64];
    int nmodels = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--device") && a + 1 < argc)
            device = argv[++a];
        else if (!strcmp(argv[a], "--threads") && a + 1 < argc)
            threads = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--steps") && a + 1 < argc)
            steps = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--repeats") && a + 1 < argc)
            repeats = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--warmup") && a + 1 < argc)
            warmup = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--tf32"))
            tf32 = 1;
        else if (!strcmp(argv[a], "--conv-find"))
            conv_find = 1;
        else if (!strcmp(argv[a], "--fast-norm"))
            fast_norm = 1;
        else if (!strcmp(argv[a], "--bf16"))
            bf16 = 1;
        else if (!strcmp(argv[a], "--graphs"))
            graphs = staged = 1;
        else if (!strcmp(argv[a], "--staged"))
            staged = 1;
        else if (argv[a][0] == '-' || nmodels == 64) {
            fprintf(stderr, "usage: %s [--device cpu|gpu|gpu:N] [--threads N] [--steps N] "
                            "[--repeats N] [--warmup N] [--tf32] [--conv-find] [--fast-norm] "
                            "[--bf16] [--staged] [--graphs] MODEL.yaml...\n", argv[0]);
            return 2;
        } else
            models[nmodels++] = argv[a];
    }
    if (steps < 1 || repeats < 1 || repeats > 16 || threads < 0 || warmup < 0) {
        fprintf(stderr, "--steps must be positive, --repeats in [1, 16], --threads and "
                        "--warmup >= 0\n");
        return 2;
    }
    const int on_cpu = !strcmp(device, "cpu");
    if (graphs && on_cpu) {
        fprintf(stderr, "--graphs needs --device gpu (CUDA graphs)\n");
        return 2;
    }
    float *ra = NULL, *rb = NULL, *rc = NULL;
    if (on_cpu) {
        const size_t nn = (size_t)RATE_N * RATE_N;
        ra = malloc(sizeof(float) * nn), rb = malloc(sizeof(float) * nn);
        rc = malloc(sizeof(float) * nn);
        if (!ra || !rb || !rc) return 1;
        for (size_t i = 0; i < nn; i++) ra[i] = rb[i] = rc[i] = 0.001f * (float)(i % 97);
    }
    for (int a = 0; a < nmodels; a++) {
        const char *path = models[a];
        tfc_error err;
        tfc_error_clear(&err);
        tfc_backend *be = tfc_backend_open(device, threads, &err);
        if (!be) {
            fputs(err.text, stderr);
            return 1;
        }
        tfc_backend_configure(be, &(tfc_device_options){.tf32 = tf32 || bf16});
#ifdef TFC_HAVE_CUDA
        tfc_gpu_set_conv_find(be, conv_find);
        tfc_gpu_set_fast_norm(be, fast_norm);
        tfc_gpu_test_enable_bf16(bf16);
#endif
        tfc_model *m = tfc_model_load(path, &err);
        if (m && bf16) tfc_model_set_precision(m, TFC_PRECISION_BF16);
        const int batch = m ? batch_of(tfc_model_name(m)) : 0;
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
        double *t = malloc(sizeof(double) * (size_t)steps), reps[16], rates[32];
#ifdef TFC_HAVE_CUDA
        tfc_gpu_graph *graph = NULL;
        uint64_t captured = 0; /* the step number the graph was captured at */
#endif
        int64_t np = tfc_model_trainable_count(m);
        tfc_batch_result r;
        double loss0 = 0;
        for (int rep = 0; rep < repeats; rep++) {
            if (on_cpu) rates[2 * rep] = sgemm_rate(ra, rb, rc, 3);
            for (int s = -warmup; s < steps; s++) {
                double t0 = tfc_now();
                if (staged && !(rep == 0 && s == -warmup)) {
                    /* the first step runs as the plain one; with --graphs the second is
                     * captured, then every step replays it: the batch staged where the
                     * capture read it, the loss read back after the step (the wait that
                     * ends it) */
                    if (tfc_model_stage_input(m, x, batch, 1, 1, (uint64_t)(s + warmup), &err) ||
                        tfc_model_stage_labels(m, labels, &err)) {
                        fputs(err.text, stderr);
                        return 1;
                    }
                    if (!graphs) {
                        queued_step(m, be, np);
                        tfc_model_loss_result(m, &r);
                        if (s >= 0) t[s] = tfc_now() - t0;
                        continue;
                    }
#ifdef TFC_HAVE_CUDA
                    if (!graph) {
                        captured = (uint64_t)(s + warmup);
                        if (tfc_gpu_capture_begin(be, &err)) {
                            fputs(err.text, stderr);
                            return 1;
                        }
                        queued_step(m, be, np);
                        if (!(graph = tfc_gpu_capture_end(be, &err))) {
                            fputs(err.text, stderr);
                            return 1;
                        }
                    }
                    tfc_gpu_graph_launch(be, graph, (uint64_t)(s + warmup) - captured);
                    tfc_model_loss_result(m, &r);
                    if (s >= 0) t[s] = tfc_now() - t0;
                    continue;
#endif
                }
                tfc_model_forward(m, x, batch, 1, 1, (uint64_t)(s + warmup), &err);
                tfc_model_loss(m, labels, 1, &r, &err);
                if (rep == 0 && s == -warmup) loss0 = r.loss;
                tfc_model_zero_grad(m);
                tfc_model_backward(m);
                be->ops->axpy(be, np, -0.01f, tfc_model_grads(m), tfc_model_params(m));
                be->ops->sync(be);
                if (s >= 0) t[s] = tfc_now() - t0;
            }
            reps[rep] = tfc_median(t, steps) * 1e3;
            if (on_cpu) rates[2 * rep + 1] = sgemm_rate(ra, rb, rc, 3);
        }
        double flops = step_flops(m, batch);
        printf("{\"model\": \"%s\", \"device\": \"%s\", \"batch\": %d, \"steps\": %d, "
               "\"params\": %lld, \"loss0\": %.4f, \"ms\": [",
               tfc_model_name(m), device, batch, steps, (long long)np, loss0);
        for (int rep = 0; rep < repeats; rep++) printf("%s%.3f", rep ? ", " : "", reps[rep]);
        if (on_cpu) {
            const double rate = tfc_median(rates, 2 * repeats);
            printf("], \"bound_ms\": %.3f, \"gflop\": %.3f, \"sgemm_gflops\": %.1f}\n",
                   flops / (rate * 1e9) * 1e3, flops / 1e9, rate);
        } else {
            int measured = 0, nodes = 0;
#ifdef TFC_HAVE_CUDA
            measured = tfc_gpu_conv_measured(be);
            nodes = tfc_gpu_graph_nodes(graph);
#endif
            printf("], \"gflop\": %.3f, \"peak_mib\": %.1f, \"tf32\": %d, \"conv_find\": %d, "
                   "\"conv_measured\": %d, \"fast_norm\": %d, \"bf16\": %d, \"staged\": %d, "
                   "\"graphs\": %d, \"graph_nodes\": %d, \"gpu\": \"%s\"}\n",
                   flops / 1e9, peak_mib(be), tf32 || bf16, conv_find, measured, fast_norm, bf16,
                   staged, graphs,
                   nodes,
                   gpu_name(be));
        }
        if (tfc_backend_status(be, &err)) {
            fputs(err.text, stderr);
            return 1;
        }
        fflush(stdout);
        free(x), free(labels), free(t);
#ifdef TFC_HAVE_CUDA
        tfc_gpu_graph_free(graph);
#endif
        tfc_model_free(m);
        tfc_backend_free(be);
    }
    free(ra), free(rb), free(rc);
    return 0;
}
