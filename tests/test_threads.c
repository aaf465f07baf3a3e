/* Thread sweep of the CPU backend. Ops run on sizes above the parallel threshold that no
 * thread count divides (40009 rows, prime) at 1, 2, 3 and 7 threads: the elementwise ones
 * must agree with 1 thread to the last bits, the sums with a double reference.
 * Then a training step of a CNN and of an LSTM at 1 vs 3 (and 7) threads: gradients within
 * 1e-5 relative, and bit-identical when the same thread count runs twice, or when its
 * regions run on fewer threads (a busy machine, cpu_team.c); and that team shrinking with
 * the machine's load and growing back. */
#include <math.h>
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/backend.h"
#include "core/timing.h"
#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"
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
        be->ops->loss(be, TFC_LOSS_SPARSE_CCE, 1, 1.0f, ROWS, COLS, x, ids, NULL, 1.0f / ROWS,
                      &loss, dl[k]);
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

/* batch 37: each conv output (37 x 13 x 11 x 8 = 42328) is above the parallel threshold */
static const char CNN_YAML[] =
    "input: {shape: [13, 11, 3]}\nlayers:\n"
    "  - Conv2D: {filters: 8, kernel_size: 3, padding: same, activation: relu}\n"
    "  - BatchNormalization: {}\n"
    "  - MaxPooling2D: {pool_size: 2}\n"
    "  - AveragePooling2D: {pool_size: 2, strides: 1, padding: same}\n"
    "  - Conv2D: {filters: 6, kernel_size: 3, strides: [2, 1]}\n"
    "  - GlobalAveragePooling2D: {}\n  - Dense: {units: 5}\n";

static const char LSTM_YAML[] = "input: {shape: [9], dtype: int32}\nlayers:\n"
                                "  - Embedding: {input_dim: 50, output_dim: 16, mask_zero: true}\n"
                                "  - LSTM: {units: 24, return_sequences: true}\n"
                                "  - LSTM: {units: 12}\n  - Dense: {units: 5}\n";

static void test_cnn_step(void)
{
    check_model("cnn", CNN_YAML, 37);
}

static void test_lstm_step(void)
{
    check_model("lstm", LSTM_YAML, 301);
}

/* ---- a team the machine shrinks (cpu_team.c) ------------------------------------------ */

/* Every region of 3 threads' steps run on 1 and on 2 threads: the same bits as on 3. */
static void check_team(const char *name, const char *yaml, int batch)
{
    tfc_cpu_team_force(0);
    grads all = step(yaml, batch, 3);
    for (int team = 1; team <= 2; team++) {
        tfc_cpu_team_force(team);
        grads g = step(yaml, batch, 3);
        tfc_cpu_team_force(0);
        CU_ASSERT_FATAL(g.n == all.n && g.n > 0);
        int same = memcmp(g.g, all.g, (size_t)g.n * 4) == 0;
        if (!same) printf("\n%s: 3 threads' split run by %d differs\n", name, team);
        CU_ASSERT(same);
        free(g.g);
    }
    free(all.g);
}

static void test_team_same_bits(void)
{
    check_team("cnn", CNN_YAML, 37);
    check_team("lstm", LSTM_YAML, 301);
    /* 301 x 40 x 300: a GEMM split into blocks; dropout, softmax and the loss above the
     * parallel threshold */
    check_team("mlp",
               "input: {shape: [40]}\nlayers:\n"
               "  - Dense: {units: 300, activation: tanh}\n  - Dropout: {rate: 0.3}\n"
               "  - Dense: {units: 200, activation: sigmoid}\n"
               "  - Dense: {units: 5, activation: softmax}\n",
               301);
}

/* The decision on a made-up clock: windows of 10 ms, each with the process's threads
 * waiting `busy` thread-equivalents, and regions started at `full` a second on every
 * thread or `cut` a second with the team cut. */
typedef struct sim {
    long long now, wait, regions;
    int cut;
} sim;

/* Runs ms of windows; returns the share of them run with a cut, and in *most (if not NULL)
 * the largest cut. */
static double sim_run(sim *s, int ms, double busy, double full, double cut, int *most)
{
    int with = 0, n = ms / 10;
    for (int i = 0; i < n; i++) {
        s->now += 10000000LL;
        s->wait += (long long)(busy * 10000000.0);
        with += s->cut > 0;
        const int k = (int)((s->cut ? cut : full) / 100);
        for (int j = 0; j < k; j++) { /* region by region, as tfc_cpu_team sees them */
            s->regions++;
            s->cut = tfc_cpu_team_feed(s->now, s->wait, s->regions);
            if (most && s->cut > *most) *most = s->cut;
        }
        s->cut = tfc_cpu_team_feed(s->now, s->wait, s->regions);
        if (most && s->cut > *most) *most = s->cut;
    }
    return (double)with / n;
}

static void test_team_duel(void)
{
    tfc_cpu_team_force(0);
    tfc_cpu_team_feed(-1, 0, 0);
    sim s = {1000000000LL, 0, 0, 0};
    int most = 0;
    /* quiet: every thread, whatever the regions do */
    CU_ASSERT(sim_run(&s, 3000, 0.05, 2000, 1000, &most) == 0.0);
    CU_ASSERT_EQUAL(most, 0);
    /* busy, and one thread fewer runs twice the regions: the cut within 0.1 s, and kept
     * but for the full team's turns in the duels */
    double share = sim_run(&s, 100, 0.7, 2000, 4000, &most);
    CU_ASSERT(share > 0.0 && most == 1);
    sim_run(&s, 10000, 0.7, 2000, 4000, NULL); /* the holds grow to 8 s */
    share = sim_run(&s, 18000, 0.7, 2000, 4000, NULL);
    CU_ASSERT(share > 0.9);
    if (share <= 0.9) printf("\ncut faster: cut %.0f%% of the time\n", 100 * share);
    /* busy, but every thread runs four times the regions: the cut only for duels */
    sim_run(&s, 9000, 0.7, 4000, 1000, NULL); /* the last hold of a cut ends */
    share = sim_run(&s, 18000, 0.7, 4000, 1000, NULL);
    CU_ASSERT(share < 0.25);
    if (share >= 0.25) printf("\nfull faster: cut %.0f%% of the time\n", 100 * share);
    /* two thread-equivalents waiting (four threads on two cores): a cut of two */
    most = 0;
    sim_run(&s, 12000, 2.0, 1000, 2000, &most);
    CU_ASSERT_EQUAL(most, 2);
    /* quiet again: every thread after the next duel, and no more duels */
    sim_run(&s, 12000, 0.0, 1000, 2000, NULL);
    most = 0;
    CU_ASSERT(sim_run(&s, 5000, 0.0, 1000, 2000, &most) == 0.0);
    CU_ASSERT_EQUAL(most, 0);
    tfc_cpu_team_feed(-1, 0, 0);
}

static void *spin(void *arg)
{
    volatile int *stop = arg;
    unsigned x = 1;
    while (!*stop) x = x * 1664525u + 1013904223u;
    return (void *)(uintptr_t)x;
}

/* Nanoseconds this process's threads have waited for a CPU, summed (their schedstat's second
 * field): what the team itself reads. */
static long long process_wait_ns(void)
{
    long long sum = 0;
    DIR *d = opendir("/proc/self/task");
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char path[300];
        snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
        FILE *f = fopen(path, "r");
        long long run, wait;
        if (f && fscanf(f, "%lld %lld", &run, &wait) == 2) sum += wait;
        if (f) fclose(f);
    }
    if (d) closedir(d);
    return sum;
}

/* Any cut needs the process's threads to have waited a quarter of a thread for two 40 ms
 * windows (cpu_team.c's BUSY and WINDOW_NS), or for a whole turn: 20 ms at least. Less
 * than that is a quiet machine, where a cut is a fault of the team's; more, and the
 * machine (shared, in CI) was busy, and a cut says nothing. */
#define QUIET_WAIT_NS (20 * 1000000LL)

/* Waits up to `secs` for every thread (twice in a row). */
static int team_back(double secs)
{
    int back = 0;
    for (double t0 = tfc_now(); !back && tfc_now() - t0 < secs; usleep(1000))
        back = tfc_cpu_team(2) == 2 && tfc_cpu_team(2) == 2;
    return back;
}

/* Live: with twice as many busy threads as cores the process's threads wait for a CPU
 * (schedstat), and a duel starts with the cut's turn: regions of two threads run on one
 * within seconds. When the busy threads end, every thread again, for good. The machine
 * may be busy for reasons of its own: a cut or a team that stays cut then is retried,
 * and only one the process's waits do not explain fails. */
static void test_team_follows_load(void)
{
    tfc_cpu_team_force(0);
    tfc_cpu_team_feed(-1, 0, 0);
    const char *v = getenv("TFC_CPU_ADAPT");
    FILE *f = fopen("/proc/self/task/self/schedstat", "r");
    if (!f) f = fopen("/proc/self/schedstat", "r");
    if ((v && !strcmp(v, "0")) || !f) {
        printf("(no schedstat, or TFC_CPU_ADAPT=0: skipped) ");
        if (f) fclose(f);
        return;
    }
    fclose(f);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int n = (int)(cores < 1 ? 2 : cores > 32 ? 64 : 2 * cores);
    volatile int stop = 0;
    pthread_t th[64];
    for (int i = 0; i < n; i++) CU_ASSERT_FATAL(!pthread_create(&th[i], NULL, spin, (void *)&stop));
    int shrank = 0;
    double t0 = tfc_now();
    while (!shrank && tfc_now() - t0 < 5.0) {
        shrank = tfc_cpu_team(2) == 1;
        usleep(1000);
    }
    stop = 1;
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    if (!shrank) printf("\nwith %d busy threads on %ld cores the team stayed 2\n", n, cores);
    CU_ASSERT(shrank);
    /* from here the machine should be quiet: each try measures whether it was */
    int verdict = 0;
    for (int try = 0; shrank && try < 3 && !verdict; try++) {
        const long long w0 = process_wait_ns();
        const int back = team_back(20.0);
        /* the full team's turn saw the machine quiet: no more cuts */
        int again = 0;
        for (t0 = tfc_now(); back && !again && tfc_now() - t0 < 3.0; usleep(1000))
            again = tfc_cpu_team(2) == 1;
        const long long waited = process_wait_ns() - w0;
        if (back && !again) {
            verdict = 1;
        } else if (waited < QUIET_WAIT_NS) {
            printf("\n%s on a quiet machine (its threads waited %.1f ms)\n",
                   back ? "a cut again" : "the team stayed 1", waited / 1e6);
            CU_FAIL("the team cut threads on a quiet machine");
            verdict = 1;
        } else {
            printf("\n(the machine was busy, %.0f ms of waits: try again) ", waited / 1e6);
        }
    }
    tfc_cpu_team_feed(-1, 0, 0);
    if (shrank && !verdict) tfc_test_skip("the machine stayed busy after the busy threads ended");
}

TFC_TEST_MAIN("threads", {"ops_sweep", test_ops_sweep}, {"cnn_step", test_cnn_step},
              {"lstm_step", test_lstm_step}, {"team_same_bits", test_team_same_bits},
              {"team_duel", test_team_duel},
              {"team_follows_load", test_team_follows_load})
