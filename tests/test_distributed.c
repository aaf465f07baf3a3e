/* Data-parallel training on CPU ranks under Open MPI's mpirun (docs/distributed.md): 2 ranks
 * against one process with the global batch (SGD, Adam; a model of two inputs, its split
 * dealt or sliced), bit-identity with iter_size under
 * `deterministic: true`, exact resume, SIGINT, a killed rank, the refusals, and plain progress
 * lines into a file (a live line on a terminal). Runs the built
 * tfc-train ($TFC_BIN) through `mpirun -np 2` and `--nprocs 2`; skipped, visibly, where
 * mpirun is missing. */
#include <math.h>
#include <stdarg.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tfc.h"
#include "data/data.h"
#include "testutil.h"

static const char *bin(void)
{
    const char *b = getenv("TFC_BIN");
    return b ? b : "bin";
}

/* mpirun present, and allowed to start here (CI runs as root; 2 ranks on 2 cores or fewer). */
static int have_mpirun(void)
{
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
    if (system("mpirun --version >/dev/null 2>&1") != 0) {
        tfc_test_skip("mpirun is not installed (apt install openmpi-bin)");
        return 0;
    }
    return 1;
}

/* The solver of these tests: a 16-4 classifier on the synthetic split, global batch 32. */
static const char *solver(void)
{
    static int made;
    if (!made) {
        tfc_test_write_split("x.npy", "y.npy", 512, 5);
        tfc_test_write("model.yaml",
                       "name: tiny\ninput: {shape: [16]}\nlayers:\n"
                       "  - Dense: {units: 32, activation: relu}\n"
                       "  - Dropout: {rate: 0.1}\n"
                       "  - Dense: {units: 4, activation: softmax}\n"
                       "loss: sparse_categorical_crossentropy\nmetrics: [accuracy]\n",
                       -1);
        tfc_test_write("solver.yaml",
                       "model: model.yaml\n"
                       "data:\n"
                       "  train:\n"
                       "    source: {type: npy, features: x.npy, labels: y.npy}\n"
                       "    pipeline:\n"
                       "      - shuffle: {buffer_size: 512}\n"
                       "      - repeat: {}\n"
                       "      - batch: {batch_size: 32}\n"
                       "  test:\n"
                       "    source: {type: npy, features: x.npy, labels: y.npy}\n"
                       "    pipeline:\n"
                       "      - batch: {batch_size: 100}\n"
                       "optimizer: {type: sgd, learning_rate: 0.1}\n"
                       "max_iter: 30\ntest_interval: 10\ndisplay: 1\n"
                       "snapshot: {interval: 15}\nseed: 3\n",
                       -1);
        made = 1;
    }
    return tfc_test_path("solver.yaml");
}

/* Runs a shell command; returns its exit status (128 + signal when killed). */
static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The largest relative difference between the tensors of two weights files (all float32). */
static double weights_diff(const char *a, const char *b)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *fa = tfc_st_open(a, &err), *fb = tfc_st_open(b, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fa);
    CU_ASSERT_PTR_NOT_NULL_FATAL(fb);
    CU_ASSERT_EQUAL(tfc_st_count(fa), tfc_st_count(fb));
    double worst = 0;
    for (int i = 0; i < tfc_st_count(fa); i++) {
        const tfc_st_tensor *ta = tfc_st_tensor_at(fa, i), *tb = tfc_st_find(fb, ta->name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(tb);
        CU_ASSERT_EQUAL_FATAL(ta->numel, tb->numel);
        double scale = 1e-12, d = 0;
        for (int64_t j = 0; j < ta->numel; j++) {
            float x, y;
            memcpy(&x, (const char *)ta->data + 4 * j, 4);
            memcpy(&y, (const char *)tb->data + 4 * j, 4);
            scale = fmax(scale, fabs(y));
            d = fmax(d, fabs((double)x - y));
        }
        worst = fmax(worst, d / scale);
    }
    tfc_st_close(fa);
    tfc_st_close(fb);
    return worst;
}

static int same_bytes(const char *a, const char *b)
{
    size_t la, lb;
    char *x = tfc_test_read(a, &la), *y = tfc_test_read(b, &lb);
    int same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

/* The train losses of log.csv (column 3 of the "train" rows) into out; returns how many. */
static int train_losses(const char *dir, double *out, int max)
{
    char path[1024], line[1024];
    snprintf(path, sizeof path, "%s/log.csv", dir);
    FILE *f = fopen(path, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    int n = 0;
    long long it;
    char phase[16];
    double loss;
    while (fgets(line, sizeof line, f) && n < max)
        if (sscanf(line, "%lld,%15[^,],%lf", &it, phase, &loss) == 3 && !strcmp(phase, "train"))
            out[n++] = loss;
    fclose(f);
    return n;
}

static const char *out(const char *name)
{
    const char *p = tfc_test_path(name);
    run("rm -rf '%s'", p);
    return p;
}

/* The runs in the folders one and two trained alike, up to the order of float sums (1e-5
 * relative): the same 30 train losses and the same final weights (`what` names the case). */
static void same_training(const char *one, const char *two, const char *what)
{
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/final.safetensors", one);
    snprintf(b, sizeof b, "%s/final.safetensors", two);
    double d = weights_diff(a, b);
    CU_ASSERT(d < 1e-5);
    if (d >= 1e-5) fprintf(stderr, "  %s: weights differ by %g relative\n", what, d);
    double l1[64], l2[64];
    int n1 = train_losses(one, l1, 64), n2 = train_losses(two, l2, 64);
    CU_ASSERT_EQUAL(n1, 30);
    CU_ASSERT_EQUAL(n1, n2);
    for (int i = 0; i < n1 && i < n2; i++)
        CU_ASSERT(fabs(l1[i] - l2[i]) <= 1e-5 * fabs(l1[i]));
}

/* Two ranks with the global batch of 32 against one process with batch 32: the same
 * mathematics, up to the order of float sums (1e-5 relative). SGD and Adam, 30 steps; no
 * dropout (its streams are keyed by micro-batch, so they differ from a batch-32 run's). */
static void test_two_ranks_equal_one_process(void)
{
    if (!have_mpirun()) return;
    static const char *const opts[] = {
        "--set model.layers.1.Dropout.rate=0 --set optimizer.type=sgd",
        "--set model.layers.1.Dropout.rate=0 --set optimizer.type=adam "
        "--set optimizer.learning_rate=0.01"};
    for (int k = 0; k < 2; k++) {
        char one[512], two[512];
        snprintf(one, sizeof one, "%s", out("one"));
        snprintf(two, sizeof two, "%s", out("two"));
        CU_ASSERT_EQUAL(run("%s/tfc-train %s --device cpu --threads 2 %s --out %s --quiet "
                            ">/dev/null", bin(), solver(), opts[k], one), 0);
        CU_ASSERT_EQUAL(run("mpirun -np 2 %s/tfc-train %s --device cpu %s --out %s --quiet "
                            ">/dev/null", bin(), solver(), opts[k], two), 0);
        same_training(one, two, opts[k]);
        /* rank 0 alone wrote the run directory */
        char sum[600];
        snprintf(sum, sizeof sum, "%s/summary.json", two);
        char *js = tfc_test_read(sum, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(js);
        CU_ASSERT_PTR_NOT_NULL(strstr(js, "\"ranks\": 2"));
        CU_ASSERT_PTR_NOT_NULL(strstr(js, "\"rank_batch\": 16"));
        CU_ASSERT_PTR_NOT_NULL(strstr(js, "\"global_batch\": 32"));
        /* the test split, dealt among the ranks, counts each of its 512 examples once: the
         * same confusion matrix as one process's */
        snprintf(sum, sizeof sum, "%s/summary.json", one);
        char *j1 = tfc_test_read(sum, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(j1);
        const char *c1 = strstr(j1, "\"confusion\""), *c2 = strstr(js, "\"confusion\"");
        CU_ASSERT_FATAL(c1 && c2);
        size_t len1 = strcspn(c1, "}"), len2 = strcspn(c2, "}");
        CU_ASSERT(len1 == len2 && !strncmp(c1, c2, len1));
        free(j1);
        free(js);
    }
}

/* A model of two inputs (SPEC §1), x's 16 floats and two int32 ids through an Embedding,
 * fed from an npy source of named inputs: each rank takes its rows of every input as it does
 * of the features, so 2 ranks train as one process does. Both ways a split reaches the
 * ranks: dealt (repeat before batch: each rank batches its own blocks) and whole (batch
 * before repeat: each rank slices its rows out of the global batch). */
static void test_two_inputs_equal_one_process(void)
{
    if (!have_mpirun()) return;
    solver(); /* x.npy, y.npy */
    enum { N = 512 };
    static int32_t ids[N][2];
    for (int i = 0; i < N; i++)
        for (int j = 0; j < 2; j++) ids[i][j] = (7 * i + 3 * j) % 10;
    tfc_tensor t = {.dtype = TFC_I32, .shape = {2, {N, 2}}, .data = ids, .device = -1};
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_write(tfc_test_path("ids.npy"), &t, &err), TFC_OK);
    static const char *const pipelines[] = {"[{shuffle: 512}, repeat, {batch: 32}]",
                                            "[{shuffle: 512}, {batch: 32}, repeat]"};
    for (int k = 0; k < 2; k++) {
        char yaml[2048];
        snprintf(yaml, sizeof yaml,
                 "model:\n  name: two\n  layers:\n"
                 "    - InputLayer: {name: x, shape: [16]}\n"
                 "    - InputLayer: {name: ids, shape: [2], dtype: int32}\n"
                 "    - Embedding: {input_dim: 10, output_dim: 4, inputs: ids}\n"
                 "    - GlobalAveragePooling1D\n"
                 "    - Concatenate: {inputs: [x, global_average_pooling1d]}\n"
                 "    - Dense: {units: 32, activation: relu}\n"
                 "    - Dense: {units: 4, activation: softmax}\n"
                 "  loss: sparse_categorical_crossentropy\n"
                 "data:\n  train:\n"
                 "    source: {type: npy, features: {x: x.npy, ids: ids.npy}, labels: y.npy}\n"
                 "    pipeline: %s\n"
                 "optimizer: {type: adam, learning_rate: 0.01}\n"
                 "max_iter: 30\ndisplay: 1\nseed: 3\n",
                 pipelines[k]);
        char s[1024], one[512], two[512];
        snprintf(s, sizeof s, "%s", tfc_test_write("two_inputs.yaml", yaml, -1));
        snprintf(one, sizeof one, "%s", out("in2_one"));
        snprintf(two, sizeof two, "%s", out("in2_two"));
        CU_ASSERT_EQUAL(run("%s/tfc-train %s --device cpu --threads 2 --out %s --quiet "
                            ">/dev/null", bin(), s, one), 0);
        CU_ASSERT_EQUAL(run("mpirun -np 2 %s/tfc-train %s --device cpu --out %s --quiet "
                            ">/dev/null", bin(), s, two), 0);
        same_training(one, two, pipelines[k]);
    }
}

/* A model of two outputs (a class and a regression, named labels from an npy source, loss
 * weights) trains on two ranks as one process does: each rank takes the same rows of every
 * label as of the features, dealt or sliced. */
static void test_two_outputs_equal_one_process(void)
{
    if (!have_mpirun()) return;
    solver(); /* x.npy, y.npy */
    tfc_tensor x;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_read(tfc_test_path("x.npy"), &x, &err), TFC_OK);
    const int64_t n = x.shape.dim[0], d = x.shape.dim[1];
    float *r = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) r[i] = ((float *)x.data)[i * d] - ((float *)x.data)[i * d + 1];
    tfc_tensor t = {.dtype = TFC_F32, .shape = {2, {n, 1}}, .data = r, .device = -1};
    CU_ASSERT_EQUAL_FATAL(tfc_npy_write(tfc_test_path("r.npy"), &t, &err), TFC_OK);
    free(r), free(x.data);
    static const char *const pipelines[] = {"[{shuffle: 512}, repeat, {batch: 32}]",
                                            "[{shuffle: 512}, {batch: 32}, repeat]"};
    for (int k = 0; k < 2; k++) {
        char yaml[2048];
        snprintf(yaml, sizeof yaml,
                 "model:\n  name: heads\n  layers:\n"
                 "    - InputLayer: {name: x, shape: [%lld]}\n"
                 "    - Dense: {name: trunk, units: 32, activation: relu}\n"
                 "    - Dense: {name: cls, units: 4, activation: softmax}\n"
                 "    - Dense: {name: reg, units: 1, inputs: trunk}\n"
                 "  outputs: [cls, reg]\n"
                 "  loss: {cls: sparse_categorical_crossentropy, reg: mse}\n"
                 "  loss_weights: {reg: 0.5}\n"
                 "data:\n  train:\n"
                 "    source: {type: npy, features: x.npy, labels: {reg: r.npy, cls: y.npy}}\n"
                 "    pipeline: %s\n"
                 "optimizer: {type: adam, learning_rate: 0.01}\n"
                 "max_iter: 30\ndisplay: 1\nseed: 3\n",
                 (long long)d, pipelines[k]);
        char s[1024], one[512], two[512];
        snprintf(s, sizeof s, "%s", tfc_test_write("two_outputs.yaml", yaml, -1));
        snprintf(one, sizeof one, "%s", out("out2_one"));
        snprintf(two, sizeof two, "%s", out("out2_two"));
        CU_ASSERT_EQUAL(run("%s/tfc-train %s --device cpu --threads 2 --out %s --quiet "
                            ">/dev/null", bin(), s, one), 0);
        CU_ASSERT_EQUAL(run("mpirun -np 2 %s/tfc-train %s --device cpu --out %s --quiet "
                            ">/dev/null", bin(), s, two), 0);
        same_training(one, two, pipelines[k]);
    }
}

/* deterministic: true — 2 ranks equal one process running iter_size 2 over batches of 16
 * bit for bit (rank r's rows are micro-batch r; the sum is in rank order; dropout streams
 * keyed alike), and two 2-rank runs equal each other. */
static void test_deterministic_bit_identical(void)
{
    if (!have_mpirun()) return;
    char one[512], two[512], again[512];
    snprintf(one, sizeof one, "%s", out("det_one"));
    snprintf(two, sizeof two, "%s", out("det_two"));
    snprintf(again, sizeof again, "%s", out("det_again"));
    const char *det = "--set deterministic=true --set optimizer.type=adam "
                      "--set optimizer.learning_rate=0.01";
    CU_ASSERT_EQUAL(run("%s/tfc-train %s --device cpu --threads 1 %s --set iter_size=2 --set "
                        "data.train.pipeline.2.batch.batch_size=16 --out %s --quiet >/dev/null",
                        bin(), solver(), det, one), 0);
    CU_ASSERT_EQUAL(run("mpirun -np 2 %s/tfc-train %s --device cpu %s --out %s --quiet "
                        ">/dev/null", bin(), solver(), det, two), 0);
    CU_ASSERT_EQUAL(run("%s/tfc-train %s --nprocs 2 --device cpu %s --out %s --quiet >/dev/null",
                        bin(), solver(), det, again), 0);
    char a[600], b[600], c[600];
    snprintf(a, sizeof a, "%s/final.safetensors", one);
    snprintf(b, sizeof b, "%s/final.safetensors", two);
    snprintf(c, sizeof c, "%s/final.safetensors", again);
    CU_ASSERT(same_bytes(a, b));
    CU_ASSERT(same_bytes(b, c));
}

/* A 2-rank run resumed from its snapshot at 15 ends bit-identical to the uninterrupted one;
 * a single process may not resume it (another rank count), nor may 2 ranks split a batch of
 * 31. */
static void test_resume_and_refusals(void)
{
    if (!have_mpirun()) return;
    char full[512], res[512], bad[512];
    snprintf(full, sizeof full, "%s", out("full"));
    snprintf(res, sizeof res, "%s", out("resumed"));
    snprintf(bad, sizeof bad, "%s", out("bad"));
    CU_ASSERT_EQUAL(run("%s/tfc-train %s --nprocs 2 --device cpu --out %s --quiet >/dev/null",
                        bin(), solver(), full), 0);
    CU_ASSERT_EQUAL(run("%s/tfc-train %s --nprocs 2 --device cpu --out %s --resume "
                        "%s/snapshots/tiny_iter_15.state --quiet >/dev/null",
                        bin(), solver(), res, full), 0);
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/final.safetensors", full);
    snprintf(b, sizeof b, "%s/final.safetensors", res);
    CU_ASSERT(same_bytes(a, b));
    const char *log = tfc_test_path("refused.txt");
    CU_ASSERT_EQUAL(run("%s/tfc-train %s --device cpu --out %s --resume "
                        "%s/snapshots/tiny_iter_15.state >/dev/null 2>%s",
                        bin(), solver(), bad, full, log), 2);
    char *msg = tfc_test_read(log, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "a run of 2 ranks, this run has 1"));
    free(msg);
    int rc = run("%s/tfc-train %s --nprocs 2 --device cpu --out %s --set "
                 "data.train.pipeline.2.batch.batch_size=31 >/dev/null 2>%s",
                 bin(), solver(), bad, log);
    CU_ASSERT_NOT_EQUAL(rc, 0);
    msg = tfc_test_read(log, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "the batch of 31 examples cannot be split evenly among 2 ranks"));
    free(msg);
}

/* Starts a long 2-rank run through --nprocs in the background; returns its pid. */
static pid_t start_long(const char *dir)
{
    pid_t pid = fork();
    if (pid == 0) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd,
                 "exec %s/tfc-train %s --nprocs 2 --device cpu --out %s --quiet --set "
                 "max_iter=100000000 --set display=0 --set test_interval=0 --set "
                 "snapshot.interval=50 >/dev/null 2>&1",
                 bin(), solver(), dir);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Waits until DIR/snapshots holds a state file (at most 60 s). */
static int wait_for_snapshot(const char *dir)
{
    for (int i = 0; i < 600; i++) {
        if (run("ls %s/snapshots/*.state >/dev/null 2>&1", dir) == 0) return 1;
        usleep(100000);
    }
    return 0;
}

/* SIGINT to the launcher: every rank stops at one iteration, rank 0 writes its snapshot, the
 * exit status is 130, and the snapshot resumes. */
static void test_sigint_snapshots(void)
{
    if (!have_mpirun()) return;
    char dir[512], more[512];
    snprintf(dir, sizeof dir, "%s", out("int"));
    snprintf(more, sizeof more, "%s", out("int_more"));
    pid_t pid = start_long(dir);
    CU_ASSERT_FATAL(wait_for_snapshot(dir));
    kill(pid, SIGINT);
    int st = 0;
    waitpid(pid, &st, 0);
    CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 130);
    /* the newest snapshot is the stop's: resume it for 5 more iterations */
    CU_ASSERT_EQUAL(run("s=$(ls -v %s/snapshots/*.state | tail -n 1); it=${s##*_iter_}; "
                        "it=${it%%.state}; %s/tfc-train %s --nprocs 2 --device cpu --out %s "
                        "--quiet --resume $s --set max_iter=$((it + 5)) >/dev/null",
                        dir, bin(), solver(), more), 0);
}

/* kill -9 of one rank: the job ends within 30 s with a non-zero status, and the newest
 * snapshot loads. */
static void test_killed_rank_ends_job(void)
{
    if (!have_mpirun()) return;
    char dir[512], more[512];
    snprintf(dir, sizeof dir, "%s", out("kill"));
    snprintf(more, sizeof more, "%s", out("kill_more"));
    pid_t pid = start_long(dir);
    CU_ASSERT_FATAL(wait_for_snapshot(dir));
    char cmd[1024];
    /* the newest process of the run is a rank ([n]: the pattern does not match this shell) */
    snprintf(cmd, sizeof cmd, "pkill -9 -n -f 'tfc-trai[n] .* --out %s '", dir);
    time_t t0 = time(NULL);
    CU_ASSERT_EQUAL(run("%s", cmd), 0);
    int st = 0;
    pid_t w = 0;
    while ((w = waitpid(pid, &st, WNOHANG)) == 0 && time(NULL) - t0 < 30) usleep(100000);
    CU_ASSERT_EQUAL(w, pid);
    if (w != pid) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        run("pkill -9 -f 'tfc-trai[n] .* --out %s '", dir);
    }
    CU_ASSERT(!(WIFEXITED(st) && WEXITSTATUS(st) == 0));
    CU_ASSERT_EQUAL(run("s=$(ls -v %s/snapshots/*.state | tail -n 1); it=${s##*_iter_}; "
                        "it=${it%%.state}; %s/tfc-train %s --nprocs 2 --device cpu --out %s "
                        "--quiet --resume $s --set max_iter=$((it + 5)) >/dev/null",
                        dir, bin(), solver(), more), 0);
}

/* Issue 43 item 12: the progress of a data-parallel run whose output goes to a file is plain
 * lines (no carriage return, no escape code), through --nprocs and through mpirun by hand,
 * although each rank writes into mpirun's pseudo-terminal; on a terminal (script(1)'s) the
 * line is still redrawn in place. */
static void test_plain_lines_into_a_file(void)
{
    if (!have_mpirun()) return;
    char s[1024], path[1024];
    snprintf(s, sizeof s, "%s", solver());
    static const char *const how[] = {"'%s/tfc-train' '%s' --nprocs 2 --device cpu --out '%s'",
                                      "mpirun -np 2 '%s/tfc-train' '%s' --device cpu --out '%s'"};
    for (int k = 0; k < 2; k++) {
        char cmd[4096];
        snprintf(path, sizeof path, "%s", tfc_test_path(k ? "plain_mpirun.log" : "plain.log"));
        snprintf(cmd, sizeof cmd, how[k], bin(), s, out(k ? "plain_mpirun" : "plain"));
        CU_ASSERT_EQUAL(run("%s >'%s' 2>&1", cmd, path), 0);
        char *log = tfc_test_read(path, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(log);
        CU_ASSERT_PTR_NOT_NULL(strstr(log, "\niter 30/30  loss "));
        CU_ASSERT_PTR_NULL(strchr(log, '\r'));
        CU_ASSERT_PTR_NULL(strchr(log, '\033'));
        free(log);
    }
    if (system("script --version >/dev/null 2>&1") != 0) {
        tfc_test_skip("script(1) is not installed (util-linux): the terminal case");
        return;
    }
    snprintf(path, sizeof path, "%s", tfc_test_path("live.log"));
    CU_ASSERT_EQUAL(run("script -qec \"'%s/tfc-train' '%s' --nprocs 2 --device cpu --out '%s'\" "
                        "/dev/null >'%s' 2>&1",
                        bin(), s, out("live"), path),
                    0);
    char *log = tfc_test_read(path, NULL);
    CU_ASSERT(log && strstr(log, "\r\033[Kiter 30/30  loss "));
    free(log);
}

/* TFC_COMM picks the gradient engine (SPEC §4): an unknown value and nccl for a CPU run are
 * usage errors (exit 2) naming why, before any step; mpi on one CPU process trains as self
 * does, to the same bytes. No mpirun needed. */
static void test_comm_choice(void)
{
    char s[1024], log[8192];
    snprintf(s, sizeof s, "%s", solver()); /* tfc_test_path's buffers rotate */
    CU_ASSERT_EQUAL(run("TFC_COMM=bogus '%s/tfc-train' '%s' --quiet --out '%s' 2>'%s'", bin(), s,
                        out("c_bogus"), tfc_test_path("c_bogus.log")),
                    2);
    FILE *f = fopen(tfc_test_path("c_bogus.log"), "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    size_t n = fread(log, 1, sizeof log - 1, f);
    log[n] = 0;
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(log, "TFC_COMM=bogus: expected auto, mpi or nccl"));
    CU_ASSERT_EQUAL(run("TFC_COMM=nccl '%s/tfc-train' '%s' --device cpu --quiet --out '%s' 2>'%s'",
                        bin(), s, out("c_nccl"), tfc_test_path("c_nccl.log")),
                    2);
    f = fopen(tfc_test_path("c_nccl.log"), "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    n = fread(log, 1, sizeof log - 1, f);
    log[n] = 0;
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(log, "TFC_COMM=nccl sums GPU buffers, and this run is on the CPU"));
    CU_ASSERT_EQUAL(run("TFC_COMM=mpi '%s/tfc-train' '%s' --device cpu --quiet --out '%s' >/dev/null", bin(),
                        s, out("c_mpi")),
                    0);
    CU_ASSERT_EQUAL(run("'%s/tfc-train' '%s' --device cpu --quiet --out '%s' >/dev/null", bin(), s,
                        out("c_self")),
                    0);
    char a[1024], b[1024];
    snprintf(a, sizeof a, "%s/final.safetensors", tfc_test_path("c_mpi"));
    snprintf(b, sizeof b, "%s/final.safetensors", tfc_test_path("c_self"));
    CU_ASSERT(same_bytes(a, b));
}

/* Counted metrics (MeanIoU here) over ranks: each rank counts its own rows, and the display
 * and the test pass sum the counts before the ratio, so 2 ranks log what one process with
 * iter_size 2 logs: the same metrics in every train and test row of log.csv. */
static void test_counted_metrics(void)
{
    if (!have_mpirun()) return;
    char one[512], two[512];
    snprintf(one, sizeof one, "%s", out("cm_one"));
    snprintf(two, sizeof two, "%s", out("cm_two"));
    const char *set = "--set deterministic=true --set 'model.metrics=[accuracy, {MeanIoU: "
                      "{num_classes: 4, sparse_y_pred: false}}, {MeanIoU: {num_classes: 4, "
                      "sparse_y_pred: false, ignore_class: 0, name: miou_no_0}}]'";
    CU_ASSERT_EQUAL(run("%s/tfc-train %s --device cpu --threads 1 %s --set iter_size=2 --set "
                        "data.train.pipeline.2.batch.batch_size=16 --out %s --quiet >/dev/null",
                        bin(), solver(), set, one), 0);
    CU_ASSERT_EQUAL(run("%s/tfc-train %s --nprocs 2 --device cpu %s --out %s --quiet >/dev/null",
                        bin(), solver(), set, two), 0);
    char pa[600], pb[600];
    snprintf(pa, sizeof pa, "%s/log.csv", one);
    snprintf(pb, sizeof pb, "%s/log.csv", two);
    char *la = tfc_test_read(pa, NULL), *lb = tfc_test_read(pb, NULL);
    CU_ASSERT_FATAL(la && lb);
    CU_ASSERT_PTR_NOT_NULL(strstr(la, "mean_io_u,miou_no_0"));
    /* the rows without their last column */
    int rows = 0;
    for (char *a = la, *b = lb; a && b && *a && *b; rows++) {
        char *ea = strchr(a, '\n'), *eb = strchr(b, '\n');
        if (!ea || !eb) break;
        *ea = *eb = 0;
        char *ca = strrchr(a, ','), *cb = strrchr(b, ',');
        if (ca) *ca = 0;
        if (cb) *cb = 0;
        /* iteration and phase, then the metrics: not the loss (a test pass sums the ranks'
         * losses in another order, so its last digit may differ) */
        char *pa2 = strchr(a, ','), *pb2 = strchr(b, ',');
        pa2 = pa2 ? strchr(pa2 + 1, ',') : NULL, pb2 = pb2 ? strchr(pb2 + 1, ',') : NULL;
        char *ma = pa2 ? strchr(pa2 + 1, ',') : NULL, *mb = pb2 ? strchr(pb2 + 1, ',') : NULL;
        CU_ASSERT_FATAL(ma && mb);
        CU_ASSERT(pa2 - a == pb2 - b && !strncmp(a, b, (size_t)(pa2 - a)));
        CU_ASSERT_STRING_EQUAL(ma, mb);
        a = ea + 1, b = eb + 1;
    }
    CU_ASSERT(rows >= 30); /* a header, 30 train rows, 3 test rows */
    free(la);
    free(lb);
}

TFC_TEST_MAIN("distributed", {"two_ranks_equal_one_process", test_two_ranks_equal_one_process},
              {"two_inputs_equal_one_process", test_two_inputs_equal_one_process},
              {"two_outputs_equal_one_process", test_two_outputs_equal_one_process},
              {"deterministic_bit_identical", test_deterministic_bit_identical},
              {"resume_and_refusals", test_resume_and_refusals},
              {"sigint_snapshots", test_sigint_snapshots},
              {"killed_rank_ends_job", test_killed_rank_ends_job},
              {"plain_lines_into_a_file", test_plain_lines_into_a_file},
              {"comm_choice", test_comm_choice}, {"counted_metrics", test_counted_metrics})
