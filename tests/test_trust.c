/* What the tools do when things go wrong, walked as a user meets it ($TFC_BIN, as make test
 * builds them): corrupted, truncated and padded gzip inputs (IDX and TFRecord) fail naming
 * the file; SIGTERM during a test pass resumes into the uninterrupted run; a NaN or inf
 * among the features and a label out of range fail naming file and record (labels before
 * any work where they can be read ahead; right after a resume too); SIGHUP snapshots like
 * SIGTERM and a closed stdout (`| head -1`) does not stop the run; resumes keep a run's
 * records consistent (log.csv, summary.json, final weights) and name what they change;
 * empty and skipped data are said with their files (and a stage that leaves nothing, with
 * its split, by tfc-train and tfc-test); tfc-data reads a solver as tfc-train does
 * (base_dir, the --set keys it refuses and accepts); `make run` again
 * re-tests a finished run, resumes an interrupted one, and starts over one stopped before
 * its first snapshot. */
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "data/data.h"
#include "testutil.h"

/* Starts `cmd` (a shell line, run with exec so the pid is the command's) in the scratch
 * directory, stdout and stderr into `log`. */
static pid_t spawn(const char *cmd, const char *log)
{
    char full[4096];
    snprintf(full, sizeof full, "cd '%s' && exec %s >'%s' 2>&1", tfc_test_tmpdir(), cmd, log);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", full, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* The exit status of `pid`; 1000 + the signal when a signal ended it. */
static int wait_code(pid_t pid)
{
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 1000 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* wait_code with a limit of ~30 s; then kills it (SIGKILL) and returns -1. */
static int wait_code_limited(pid_t pid)
{
    for (int i = 0; i < 3000; i++) {
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + WTERMSIG(status);
        struct timespec ms10 = {0, 10000000};
        nanosleep(&ms10, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

/* Waits until the scratch file `name` holds `text` (up to ~20 s). */
static int wait_for(const char *name, const char *text)
{
    for (int i = 0; i < 2000; i++) {
        char *t = tfc_test_read(tfc_test_path(name), NULL);
        int found = t && strstr(t, text);
        free(t);
        if (found) return 1;
        struct timespec ms10 = {0, 10000000};
        nanosleep(&ms10, NULL);
    }
    return 0;
}

static int exists(const char *name)
{
    struct stat st;
    return stat(tfc_test_path(name), &st) == 0;
}

/* summary.json's status in the scratch run directory `run` (a static string, "" if none). */
static const char *run_status(const char *run)
{
    static char status[64];
    char path[256];
    snprintf(path, sizeof path, "%s/summary.json", run);
    json_error_t je;
    json_t *j = json_load_file(tfc_test_path(path), 0, &je);
    const char *v = j ? json_string_value(json_object_get(j, "status")) : NULL;
    snprintf(status, sizeof status, "%s", v ? v : "");
    json_decref(j);
    return status;
}

/* A tiny learnable solver (tiny.yaml; npy data beside it) that runs `max_iter` iterations
 * and prints a line at each. */
static void write_solver(void)
{
    tfc_test_write_split("train_x.npy", "train_y.npy", 256, 11);
    tfc_test_write_split("test_x.npy", "test_y.npy", 64, 12);
    tfc_test_write("tiny.yaml",
                   "model:\n"
                   "  name: tiny\n"
                   "  input: {shape: [16]}\n"
                   "  layers:\n"
                   "    - Dense: {name: hidden, units: 16, activation: relu}\n"
                   "    - Dense: {name: out, units: 4}\n"
                   "data:\n"
                   "  train:\n"
                   "    source: {type: npy, features: train_x.npy, labels: train_y.npy}\n"
                   "    pipeline: [{shuffle: {buffer_size: 64}}, {repeat: {}}, "
                   "{batch: {batch_size: 16}}]\n"
                   "  test:\n"
                   "    source: {type: npy, features: test_x.npy, labels: test_y.npy}\n"
                   "    pipeline: [{batch: {batch_size: 32}}]\n"
                   "optimizer: {type: adam, learning_rate: 0.01}\n"
                   "max_iter: 300\n"
                   "test_interval: 100\n"
                   "display: 1\n"
                   "snapshot: {interval: 0}\n"
                   "seed: 7\n", -1);
}

/* ---- 1. gzip inputs: CRC-32, length, truncation, trailing bytes ------------------------- */

/* Writes `len` bytes as a gzip file at compression `level` (0: stored blocks, so a flipped
 * data byte leaves valid deflate that only the CRC catches); returns the file's bytes. */
static unsigned char *write_gz(const char *name, const void *data, size_t len, int level,
                               size_t *gzlen)
{
    char mode[4] = {'w', 'b', (char)('0' + level), 0};
    gzFile g = gzopen(tfc_test_path(name), mode);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_EQUAL(gzwrite(g, data, (unsigned)len), (int)len);
    gzclose(g);
    return (unsigned char *)tfc_test_read(tfc_test_path(name), gzlen);
}

static void test_gzip_integrity(void)
{
    const char *bin = tfc_test_bin("tfc-data");
    if (!bin) return;
    enum { N = 40, H = 16 };
    unsigned char img[H + N * 12], lab[8 + N];
    memcpy(img, "\0\0\x08\x03\0\0\0\x28\0\0\0\x03\0\0\0\x04", H);
    for (int i = 0; i < N * 12; i++) img[H + i] = (unsigned char)(i * 7);
    memcpy(lab, "\0\0\x08\x01\0\0\0\x28", 8);
    for (int i = 0; i < N; i++) lab[8 + i] = (unsigned char)(i % 4);
    size_t n, nl;
    unsigned char *good = write_gz("img.gz", img, sizeof img, 0, &n);
    free(write_gz("lab.gz", lab, sizeof lab, 6, &nl));
    tfc_test_write("bad.gz", good, (long)n);
    char yaml[512], cmd[2048];
    snprintf(yaml, sizeof yaml, "data:\n  train:\n    source: {type: idx, images: bad.gz, "
             "labels: lab.gz}\n    pipeline: [{batch: {batch_size: 8}}]\n");
    tfc_test_write("gz.yaml", yaml, -1);
    snprintf(cmd, sizeof cmd, "'%s/tfc-data' gz.yaml", bin);
    tfc_test_sh_expect(0, cmd, "40 examples", NULL);

    /* a data byte flipped in the middle (stored blocks: only the CRC-32 can tell) */
    good[n / 2] ^= 0x5a;
    tfc_test_write("bad.gz", good, (long)n);
    tfc_test_sh_expect(1, cmd, "bad.gz: corrupt gzip file", "incorrect data check");
    good[n / 2] ^= 0x5a;
    /* the trailer's CRC zeroed, then its length (ISIZE) */
    unsigned char *copy = malloc(n + 8);
    memcpy(copy, good, n);
    memset(copy + n - 8, 0, 4);
    tfc_test_write("bad.gz", copy, (long)n);
    tfc_test_sh_expect(1, cmd, "bad.gz: corrupt gzip file", "incorrect data check");
    memcpy(copy, good, n);
    copy[n - 4] ^= 1;
    tfc_test_write("bad.gz", copy, (long)n);
    tfc_test_sh_expect(1, cmd, "bad.gz: corrupt gzip file", "incorrect length check");
    /* the trailer cut off: every record inflates, but the stream never ends */
    tfc_test_write("bad.gz", good, (long)n - 8);
    tfc_test_sh_expect(1, cmd, "bad.gz: corrupt gzip file: truncated", NULL);
    /* bytes after the stream that are not another gzip member */
    memcpy(copy, good, n);
    memcpy(copy + n, "garbage!", 8);
    tfc_test_write("bad.gz", copy, (long)n + 8);
    tfc_test_sh_expect(1, cmd, "bad.gz: corrupt gzip file: 8 bytes of trailing garbage", NULL);
    /* two members (cat a.gz b.gz) are one valid stream */
    size_t n1, n2;
    unsigned char *a = write_gz("a.gz", img, 100, 6, &n1);
    unsigned char *b = write_gz("b.gz", img + 100, sizeof img - 100, 6, &n2);
    copy = realloc(copy, n1 + n2);
    memcpy(copy, a, n1);
    memcpy(copy + n1, b, n2);
    tfc_test_write("bad.gz", copy, (long)(n1 + n2));
    tfc_test_sh_expect(0, cmd, "40 examples", NULL);
    free(a);
    free(b);

    /* tfc-train stops on the corrupt file before its first step */
    good[n / 2] ^= 0x5a;
    tfc_test_write("bad.gz", good, (long)n);
    tfc_test_write("gzm.yaml", "input: {shape: [3, 4, 1]}\nlayers:\n  - Flatten: {}\n"
                   "  - Dense: {units: 4}\n", -1);
    snprintf(yaml, sizeof yaml, "model: gzm.yaml\ndata:\n  train:\n    source: {type: idx, "
             "images: bad.gz, labels: lab.gz}\n    pipeline: [{repeat: {}}, {batch: "
             "{batch_size: 8}}]\nmax_iter: 20\n");
    tfc_test_write("gzs.yaml", yaml, -1);
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' gzs.yaml --out gzrun --device cpu", bin);
    tfc_test_sh_expect(1, cmd, "bad.gz: corrupt gzip file", NULL);

    /* a TFRecord GZIP file: its CRC zeroed, then garbage after it */
    tfc_error err;
    tfc_error_clear(&err);
    tfc_tfrecord_writer *w = tfc_tfrecord_writer_open(tfc_test_path("r.tfrecord.gz"), 1, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    for (int r = 0; r < 5; r++) {
        float x[12];
        for (int i = 0; i < 12; i++) x[i] = (float)(r * 12 + i);
        tfc_tensor v = {TFC_F32, {.ndim = 1, .dim = {12}}, x, -1};
        const char *key = "x";
        CU_ASSERT_EQUAL(tfc_tfrecord_write(w, 1, &key, &v, &err), TFC_OK);
    }
    CU_ASSERT_EQUAL(tfc_tfrecord_writer_close(w, &err), TFC_OK);
    free(good);
    good = (unsigned char *)tfc_test_read(tfc_test_path("r.tfrecord.gz"), &n);
    tfc_test_write("r.yaml", "data:\n  train:\n    source: {type: tfrecord, files: "
                   "bad.tfrecord.gz, compression: gzip,\n      features: {key: x, "
                   "dtype: float32, shape: [12]}}\n", -1);
    snprintf(cmd, sizeof cmd, "'%s/tfc-data' r.yaml", bin);
    tfc_test_write("bad.tfrecord.gz", good, (long)n);
    tfc_test_sh_expect(0, cmd, "5 elements", NULL);
    copy = realloc(copy, n + 8);
    memcpy(copy, good, n);
    memset(copy + n - 8, 0, 4);
    tfc_test_write("bad.tfrecord.gz", copy, (long)n);
    tfc_test_sh_expect(1, cmd, "bad.tfrecord.gz: corrupt gzip file", "incorrect data check");
    memcpy(copy, good, n);
    memcpy(copy + n, "\0\0\0\0\0\0\0\0", 8);
    tfc_test_write("bad.tfrecord.gz", copy, (long)n + 8);
    tfc_test_sh_expect(1, cmd,
                       "bad.tfrecord.gz: corrupt gzip file: 8 bytes of trailing garbage", NULL);
    free(copy);
    free(good);
}

/* ---- 2. a signal during a test pass: the resumed run runs that test -------------------- */

static void *fifo_png; /* the bytes of pass.png, the second image of the test split */
static size_t fifo_png_len;

/* pass.png as a FIFO (fifo 1) or a plain file of the same bytes (0). */
static void make_pass_png(int fifo)
{
    unlink(tfc_test_path("pass.png"));
    if (!fifo) tfc_test_write("pass.png", fifo_png, (long)fifo_png_len);
    else CU_ASSERT_EQUAL(mkfifo(tfc_test_path("pass.png"), 0644), 0);
}

/* Writes the bytes of pass.png into its FIFO once a reader has it open, waiting up to ~20 s
 * for one: 1, or 0 when none came. A reader is the test pass under way (images are read as
 * their batch comes); the next one is known only once this pass is over. */
static int serve_pass(void)
{
    for (int i = 0; i < 20000; i++) {
        int fd = open(tfc_test_path("pass.png"), O_WRONLY | O_NONBLOCK);
        if (fd >= 0) {
            int ok = write(fd, fifo_png, fifo_png_len) == (ssize_t)fifo_png_len;
            close(fd);
            return ok;
        }
        struct timespec ms1 = {0, 1000000};
        nanosleep(&ms1, NULL);
    }
    return 0;
}

/* A learnable 4x4 grey fixture: train split from npy, test split 12 PNGs of a list whose
 * second image is pass.png (a FIFO while a pass is to be caught under way); the plateau
 * policy and early stopping as test_train's early_stopping case (stops at 40: tests at 10
 * .. 40). */
static void write_pass_fixture(void)
{
    enum { N = 64 };
    float x[N * 16];
    int32_t y[N];
    for (int i = 0; i < N; i++) {
        y[i] = i % 4;
        for (int j = 0; j < 16; j++)
            x[i * 16 + j] = j / 4 == y[i] ? 0.9f : (float)((i + j) % 3) / 10;
    }
    tfc_error err;
    tfc_error_clear(&err);
    tfc_tensor t = {TFC_F32, {.ndim = 4, .dim = {N, 4, 4, 1}}, x, -1};
    tfc_tensor l = {TFC_I32, {.ndim = 1, .dim = {N}}, y, -1};
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("pass_x.npy"), &t, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("pass_y.npy"), &l, &err), TFC_OK);
    char list[1024] = "", name[64];
    for (int k = 0; k < 12; k++) {
        uint8_t px[16];
        for (int j = 0; j < 16; j++) px[j] = j / 4 == k % 4 ? 230 : (uint8_t)(20 * ((k + j) % 3));
        if (k == 1) {
            free(fifo_png);
            CU_ASSERT_EQUAL(tfc_image_encode_png(px, 4, 4, 1, &fifo_png, &fifo_png_len, &err),
                            TFC_OK);
            make_pass_png(0);
            snprintf(name, sizeof name, "pass.png");
        } else {
            snprintf(name, sizeof name, "img%d.png", k);
            CU_ASSERT_EQUAL(tfc_image_write_png(tfc_test_path(name), px, 4, 4, 1, 8, &err), TFC_OK);
        }
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s %d\n", name, k % 4);
    }
    tfc_test_write("pass.txt", list, -1);
    tfc_test_write("pass.yaml",
                   "model:\n  name: pass\n  input: {shape: [4, 4, 1]}\n  layers:\n"
                   "    - Flatten: {}\n    - Dense: {units: 8, activation: relu}\n"
                   "    - Dense: {units: 4}\n  metrics: [accuracy]\n"
                   "data:\n  train:\n    source: {type: npy, features: pass_x.npy, labels: "
                   "pass_y.npy}\n    pipeline: [{shuffle: {buffer_size: 64}}, {repeat: {}}, "
                   "{batch: {batch_size: 8}}]\n"
                   "  test:\n    source: {type: images, list: pass.txt, channels: 1}\n"
                   "    pipeline: [{batch: {batch_size: 4}}]\n"
                   "optimizer: {type: adam, learning_rate: 0.01}\n"
                   "early_stopping: {monitor: test/loss, mode: max, patience: 3, "
                   "restore_best: true}\n"
                   "lr_policy: {type: plateau, monitor: test/accuracy, mode: min, patience: 1, "
                   "factor: 0.5}\n"
                   "max_iter: 150\ntest_interval: 10\ndisplay: 10\n"
                   "snapshot: {interval: 10, keep: 0}\nseed: 7\n", -1);
}

/* log.csv's test rows of run directory `run` without their seconds column. */
static void test_rows(const char *run, char *out, size_t size)
{
    char path[256];
    snprintf(path, sizeof path, "%s/log.csv", run);
    char *log = tfc_test_read(tfc_test_path(path), NULL);
    out[0] = 0;
    for (char *row = log ? strstr(log, ",test,") : NULL; row; row = strstr(row + 1, ",test,")) {
        char *start = row, *end = strchr(row, '\n'), *last = end;
        while (start > log && start[-1] != '\n') start--;
        while (last && last > row && *last != ',') last--;
        if (last)
            snprintf(out + strlen(out), size - strlen(out), "%.*s\n", (int)(last - start), start);
    }
    free(log);
}

/* SIGTERM while the test at 20 runs (its pass is reading the test images): tfc-train
 * snapshots 20 and exits 143; --resume runs that test first, and the run ends with the
 * uninterrupted one's test rows (20's among them: the plateau halves the rate there) and
 * weights. */
static void test_signal_during_test(void)
{
    const char *bin = tfc_test_bin("tfc-train");
    if (!bin) return;
    write_pass_fixture();
    char cmd[2048], *text;
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' pass.yaml --out full --device cpu --threads 1",
             bin);
    int rc = tfc_test_sh(cmd, &text);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    free(text);
    make_pass_png(1);
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' pass.yaml --out cut --device cpu --threads 1",
             bin);
    pid_t pid = spawn(cmd, "cut.txt");
    CU_ASSERT_FATAL(serve_pass());                  /* the test at 10 */
    CU_ASSERT_FATAL(wait_for("cut/log.csv", "\n10,test,"));
    CU_ASSERT_FATAL(serve_pass());                  /* the test at 20, under way */
    kill(pid, SIGTERM);
    CU_ASSERT_EQUAL(wait_code_limited(pid), 143);
    text = tfc_test_read(tfc_test_path("cut/log.csv"), NULL);
    CU_ASSERT(text && strstr(text, "\n20,train,") && !strstr(text, "\n20,test,"));
    free(text);
    CU_ASSERT_FATAL(exists("cut/snapshots/pass_iter_20.state"));
    make_pass_png(0);
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' pass.yaml --resume cut/snapshots/pass_iter_20.state "
             "--device cpu --threads 1", bin);
    rc = tfc_test_sh(cmd, &text);
    CU_ASSERT_EQUAL(rc, 0);
    CU_ASSERT(text && strstr(text, "the test of iteration 20 did not finish before the snapshot"));
    if (rc) printf("\n%s\n", text ? text : "");
    free(text);
    char full[2048], resumed[2048];
    test_rows("full", full, sizeof full);
    test_rows("cut", resumed, sizeof resumed);
    CU_ASSERT(strstr(full, "\n20,test,") && strcmp(full, resumed) == 0);
    if (strcmp(full, resumed)) printf("\nuninterrupted:\n%sresumed:\n%s", full, resumed);
    /* the final weights (restore_best: the test at 10's) and the last trained ones */
    const char *weights[] = {"final.safetensors", "snapshots/pass_iter_40.safetensors"};
    for (int k = 0; k < 2; k++) {
        char pa[128], pb[128];
        size_t la, lb;
        snprintf(pa, sizeof pa, "full/%s", weights[k]);
        snprintf(pb, sizeof pb, "cut/%s", weights[k]);
        char *a = tfc_test_read(tfc_test_path(pa), &la), *b = tfc_test_read(tfc_test_path(pb), &lb);
        CU_ASSERT(a && b && la == lb && !memcmp(a, b, la));
        free(a);
        free(b);
    }
}

/* ---- 3, 4. bad values in the data: named by file and record ------------------------------ */

/* N records of 16 float32 features and int32 labels i % 4 as NAME_x.npy / NAME_y.npy;
 * feature 5 of record bad_row is bad_value and its label bad_label (bad_row < 0: none). */
static void write_values(const char *name, int n, int bad_row, float bad_value, int bad_label)
{
    float *x = malloc((size_t)n * 16 * sizeof *x);
    int32_t *y = malloc((size_t)n * sizeof *y);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < 16; j++) x[i * 16 + j] = (float)((i * 7 + j * 3) % 11) / 11.0f;
        y[i] = i % 4;
    }
    if (bad_row >= 0) {
        x[bad_row * 16 + 5] = bad_value;
        y[bad_row] = bad_label;
    }
    char path[64];
    tfc_error err;
    tfc_error_clear(&err);
    tfc_tensor t = {TFC_F32, {.ndim = 2, .dim = {n, 16}}, x, -1};
    snprintf(path, sizeof path, "%s_x.npy", name);
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path(path), &t, &err), TFC_OK);
    tfc_tensor l = {TFC_I32, {.ndim = 1, .dim = {n}}, y, -1};
    snprintf(path, sizeof path, "%s_y.npy", name);
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path(path), &l, &err), TFC_OK);
    free(x);
    free(y);
}

/* FILE: a solver training on TRAIN_x/y.npy (its pipeline `pre` stages first, then shuffle,
 * repeat, batch, prefetch) and testing on TEST_x/y.npy. */
static void write_values_solver(const char *file, const char *train, const char *test,
                                const char *pre)
{
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "model:\n  name: vals\n  input: {shape: [16]}\n  layers:\n"
             "    - Dense: {name: hidden, units: 16, activation: relu}\n"
             "    - Dense: {name: out, units: 4}\n"
             "data:\n  train:\n"
             "    source: {type: npy, features: %s_x.npy, labels: %s_y.npy}\n"
             "    pipeline: [%s{shuffle: {buffer_size: 64}}, {repeat: {}}, "
             "{batch: {batch_size: 16}}, {prefetch: {buffer_size: 2}}]\n"
             "  test:\n    source: {type: npy, features: %s_x.npy, labels: %s_y.npy}\n"
             "    pipeline: [{batch: {batch_size: 32}}]\n"
             "optimizer: {type: adam, learning_rate: 0.01}\n"
             "max_iter: 40\ntest_interval: 20\ndisplay: 10\nsnapshot: {interval: 0}\nseed: 7\n",
             train, train, pre, test, test);
    tfc_test_write(file, yaml, -1);
}

/* tfc-test SOLVER (its test split bad) with the weights of a run on the clean fixture (made
 * once): exit 1 with `want` about data.test. */
static void expect_tfc_test(const char *bin, const char *solver, const char *want)
{
    char cmd[2048];
    if (!exists("vals_clean/final.safetensors")) {
        write_values_solver("vals_clean.yaml", "clean", "clean", "");
        snprintf(cmd, sizeof cmd, "'%s/tfc-train' vals_clean.yaml --out vals_clean --device cpu",
                 bin);
        tfc_test_sh_expect(0, cmd, NULL, NULL);
    }
    snprintf(cmd, sizeof cmd, "'%s/tfc-test' %s --weights vals_clean/final.safetensors "
             "--device cpu", bin, solver);
    tfc_test_sh_expect(1, cmd, want, "data.test: /");
}

/* A NaN or inf in the features of the train or the test split (tfc-train, tfc-test) stops
 * at its batch naming the file and record; the learning rate is not blamed. */
static void test_nonfinite_inputs(void)
{
    const char *bin = tfc_test_bin("tfc-train");
    if (!bin) return;
    char cmd[2048];
    write_values("clean", 128, -1, 0, 0);
    write_values("nan", 128, 37, NAN, 1);
    write_values("inf", 64, 5, -INFINITY, 1);
    write_values_solver("nf_train.yaml", "nan", "clean", "");
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' nf_train.yaml --out nf1 --device cpu", bin);
    char *text;
    int rc = tfc_test_sh(cmd, &text);
    int ok = rc == 1 && text && strstr(text, "data.train: /") &&
             strstr(text, "nan_x.npy record 37: feature value nan is not finite") &&
             !strstr(text, "learning_rate");
    CU_ASSERT(ok);
    if (!ok) printf("\n`%s`: exit %d\n%s\n", cmd, rc, text ? text : "");
    free(text);
    /* the test split: it was passed with exit 0 */
    write_values_solver("nf_test.yaml", "clean", "inf", "");
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' nf_test.yaml --out nf2 --device cpu", bin);
    tfc_test_sh_expect(1, cmd,
                       "inf_x.npy record 5: feature value -inf is not finite", "data.test: /");
    expect_tfc_test(bin, "nf_test.yaml", "inf_x.npy record 5: feature value -inf is not finite");
}

/* A bad record met right after a resume, in a batch the snapshot held prefetched: named by
 * its file and record as in the uninterrupted run (not "example K of a batch"). */
static void test_nonfinite_after_resume(void)
{
    const char *bin = tfc_test_bin("tfc-train");
    if (!bin) return;
    write_values("rnan", 128, 37, NAN, 1);
    tfc_test_write("rnan.yaml",
                   "model:\n  name: vals\n  input: {shape: [16]}\n"
                   "  layers: [{Dense: {name: out, units: 4}}]\n"
                   "data:\n  train:\n"
                   "    source: {type: npy, features: rnan_x.npy, labels: rnan_y.npy}\n"
                   "    pipeline: [{repeat: {}}, {batch: {batch_size: 16}}, "
                   "{prefetch: {buffer_size: 2}}]\n"
                   "optimizer: {type: sgd, learning_rate: 0.01}\n"
                   "max_iter: 10\ndisplay: 1\nsnapshot: {interval: 0}\nseed: 7\n", -1);
    const char *want = "rnan_x.npy record 37: feature value nan is not finite";
    char cmd[2048];
    /* uninterrupted: record 37 is in the third batch */
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' rnan.yaml --out rn1 --device cpu", bin);
    tfc_test_sh_expect(1, cmd, want, "data.train: /");
    /* paused after the second batch (the third prefetched into the snapshot), resumed */
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' rnan.yaml --out rn2 --device cpu --stop-at 2", bin);
    tfc_test_sh_expect(0, cmd, "paused at iteration 2", NULL);
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' rn2/config.yaml --resume "
             "rn2/snapshots/vals_iter_2.state --device cpu", bin);
    tfc_test_sh_expect(1, cmd, want, "data.train: /");
}

/* A class label outside the model's classes: found before any work where every record's
 * label reaches the model (the run directory is not even made), naming the labels file and
 * record and the source's num_classes; behind a filter, when its batch comes, named the
 * same way. Train and test splits, tfc-test too. */
static void test_labels_out_of_range(void)
{
    const char *bin = tfc_test_bin("tfc-train");
    if (!bin) return;
    char cmd[2048];
    write_values("clean", 128, -1, 0, 0);
    write_values("lab7", 128, 23, 0.5f, 7);
    write_values("lab9", 64, 3, 0.5f, 9);
    write_values_solver("lr_train.yaml", "lab7", "clean", "");
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' lr_train.yaml --out lr1 --device cpu", bin);
    tfc_test_sh_expect(1, cmd, "lab7_y.npy record 23: label 7 is out of range [0, 4) (the model's "
                       "output has 4 classes)", "`num_classes: 4` on data.train.source");
    CU_ASSERT(!exists("lr1"));
    /* a filter may drop records: the check waits for the batch, which names the record */
    write_values_solver("lr_filter.yaml", "lab7", "clean", "{filter: {labels: [0, 1, 2, 3, 7]}}, ");
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' lr_filter.yaml --out lr2 --device cpu", bin);
    tfc_test_sh_expect(1, cmd,
                       "lab7_y.npy record 23: label 7 is out of range [0, 4)", "data.train: /");
    /* the test split, in tfc-train and tfc-test */
    write_values_solver("lr_test.yaml", "clean", "lab9", "");
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' lr_test.yaml --out lr3 --device cpu", bin);
    tfc_test_sh_expect(1, cmd,
                       "lab9_y.npy record 3: label 9 is out of range [0, 4)", "data.test: /");
    CU_ASSERT(!exists("lr3"));
    expect_tfc_test(bin, "lr_test.yaml", "lab9_y.npy record 3: label 9 is out of range [0, 4)");
}

/* ---- 10. signals: SIGHUP like SIGTERM; a closed stdout only ends the printing ------------- */

static void test_sighup_and_closed_stdout(void)
{
    const char *bin = tfc_test_bin("tfc-train");
    if (!bin) return;
    write_solver();
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --out hup --threads 1 --set "
             "max_iter=100000000", bin);
    pid_t pid = spawn(cmd, "hup.txt");
    CU_ASSERT_FATAL(wait_for("hup/log.csv", "\n20,train,"));
    kill(pid, SIGHUP);
    CU_ASSERT_EQUAL(wait_code(pid), 129);
    CU_ASSERT_STRING_EQUAL(run_status("hup"), "interrupted");
    CU_ASSERT(!exists("hup/control"));
    CU_ASSERT(wait_for("hup.txt", "stopped by signal 1 at iteration"));
    CU_ASSERT(wait_for("hup.txt", "--resume hup/snapshots/tiny_iter_"));

    /* `| head -1`: the first line comes out, then the pipe closes; the run trains to the end */
    snprintf(cmd, sizeof cmd, "cd '%s' && bash -c \"'%s/tfc-train' tiny.yaml --out pipe "
             "--threads 1 | head -1; exit \\${PIPESTATUS[0]}\" >head.txt 2>&1",
             tfc_test_tmpdir(), bin);
    int st = system(cmd);
    CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CU_ASSERT_STRING_EQUAL(run_status("pipe"), "completed");
    CU_ASSERT(exists("pipe/final.safetensors"));
    CU_ASSERT(wait_for("pipe/log.csv", "\n300,test,"));
    char *text = tfc_test_read(tfc_test_path("head.txt"), NULL);
    CU_ASSERT(text && strstr(text, "tiny:") && !strchr(strchr(text, '\n') + 1, '\n'));
    free(text);
}

/* ---- 11. tfc-ctl set max_iter is honoured; a misspelled key is refused locally ---------- */

/* The last row of `phase` in the scratch run's log.csv: its iteration, *lr its learning rate
 * (iter,phase,loss,lr,seconds: the fixture has no metrics); -1 when none. */
static long last_row(const char *run, const char *phase, long upto, double *lr)
{
    char path[256];
    snprintf(path, sizeof path, "%s/log.csv", run);
    char *t = tfc_test_read(tfc_test_path(path), NULL);
    long last = -1;
    for (char *line = t ? strtok(t, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        long it;
        char ph[16];
        double loss, v;
        if (sscanf(line, "%ld,%15[^,],%lf,%lf", &it, ph, &loss, &v) == 4 &&
            !strcmp(ph, phase) && it <= upto) {
            last = it;
            if (lr) *lr = v;
        }
    }
    free(t);
    return last;
}

static void test_ctl_set_max_iter(void)
{
    const char *bin = tfc_test_bin("tfc-train");
    if (!bin) return;
    write_solver();
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --out live --threads 1 --set "
             "max_iter=100000000 --set lr_policy.type=poly --set test_interval=0", bin);
    pid_t pid = spawn(cmd, "live.txt");
    CU_ASSERT_FATAL(wait_for("live/log.csv", "\n20,train,"));
    /* stopped, the trainer is at the last logged iteration (or inside the next one) */
    kill(pid, SIGSTOP);
    long at = last_row("live", "train", 1L << 40, NULL), n = at + 150;
    char ctl[2048];
    snprintf(ctl, sizeof ctl, "'%s/tfc-ctl' live set max_iter=%ld", bin, n);
    char *text;
    CU_ASSERT_EQUAL(tfc_test_sh(ctl, &text), 0);
    free(text);
    kill(pid, SIGCONT);
    CU_ASSERT_EQUAL(wait_code_limited(pid), 0);
    CU_ASSERT_STRING_EQUAL(run_status("live"), "completed");
    CU_ASSERT_EQUAL(last_row("live", "train", 1L << 40, NULL), n);
    CU_ASSERT(exists("live/final.safetensors"));
    /* the poly schedule runs to the new end: the rate near it is a run's planned with it */
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --out planned --threads 1 --set "
             "max_iter=%ld --set lr_policy.type=poly --set test_interval=0 >/dev/null", bin, n);
    CU_ASSERT_EQUAL(tfc_test_sh(cmd, &text), 0);
    free(text);
    double lr_live = -1, lr_planned = -2;
    CU_ASSERT_EQUAL(last_row("live", "train", n - 10, &lr_live), n - 10);
    CU_ASSERT_EQUAL(last_row("planned", "train", n - 10, &lr_planned), n - 10);
    CU_ASSERT(lr_live == lr_planned && lr_live > 0);

    /* a misspelled key: exit 2 with a did-you-mean, without a trainer to ask */
    snprintf(ctl, sizeof ctl, "'%s/tfc-ctl' live set max_iters=5", bin);
    tfc_test_sh_expect(2, ctl,
                       "unknown key 'max_iters'; did you mean 'max_iter'?", "clip_gradients");
}

/* ---- 5. one run directory, one writer ----------------------------------------------------- */

static void test_run_dir_lock(void)
{
    const char *bin = tfc_test_bin("tfc-train");
    if (!bin) return;
    write_solver();
    char cmd[2048], pid_text[64];
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --out held --threads 1 --set "
             "max_iter=100000000 --set test_interval=0", bin);
    pid_t pid = spawn(cmd, "held.txt");
    snprintf(pid_text, sizeof pid_text, "held is in use by process %ld", (long)pid);
    CU_ASSERT_FATAL(wait_for("held/log.csv", "\n20,train,"));
    kill(pid, SIGUSR1);
    CU_ASSERT_FATAL(wait_for("held.txt", "snapshot held/snapshots/tiny_iter_"));
    char *text = tfc_test_read(tfc_test_path("held.txt"), NULL), state[256] = "";
    const char *at = text ? strstr(text, "snapshot held/snapshots/") : NULL;
    if (at) sscanf(at + 9, "%255s", state);
    free(text);
    /* a second start, a --resume of its snapshot and an --overwrite are all refused (at once:
     * `timeout` ends one that trains instead) */
    snprintf(cmd, sizeof cmd, "timeout 20 '%s/tfc-train' tiny.yaml --out held --threads 1",
             bin);
    tfc_test_sh_expect(2, cmd, pid_text, "one run directory has one writer");
    snprintf(cmd, sizeof cmd, "timeout 20 '%s/tfc-train' held/config.yaml --resume %s "
             "--threads 1", bin, state);
    tfc_test_sh_expect(2, cmd, pid_text, NULL);
    snprintf(cmd, sizeof cmd, "timeout 20 '%s/tfc-train' tiny.yaml --out held --overwrite "
             "--threads 1", bin);
    tfc_test_sh_expect(2, cmd, pid_text, "--overwrite never clears a live run");
    CU_ASSERT(exists("held/config.yaml") && exists("held/control"));
    kill(pid, SIGTERM);
    CU_ASSERT_EQUAL(wait_code(pid), 143);
    /* the lock died with the run */
    long it = 0;
    sscanf(state, "held/snapshots/tiny_iter_%ld", &it);
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' held/config.yaml --resume %s --threads 1 "
             "--stop-at %ld", bin, state, it + 10);
    snprintf(pid_text, sizeof pid_text, "paused at iteration %ld", it + 10);
    tfc_test_sh_expect(0, cmd, pid_text, NULL);

    /* two starts racing for one folder: exactly one trains */
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --out race --threads 1 --set "
             "max_iter=100000000", bin);
    pid_t racer[2] = {spawn(cmd, "race_a.txt"), spawn(cmd, "race_b.txt")};
    int code[2] = {-1, -1};
    for (int i = 0; i < 2000 && code[0] < 0 && code[1] < 0; i++) {
        for (int k = 0; k < 2; k++) {
            int status;
            if (waitpid(racer[k], &status, WNOHANG) == racer[k])
                code[k] = WIFEXITED(status) ? WEXITSTATUS(status) : 1000;
        }
        struct timespec ms10 = {0, 10000000};
        nanosleep(&ms10, NULL);
    }
    int lost = code[0] == 2 ? 0 : 1;
    CU_ASSERT(code[lost] == 2 && code[1 - lost] == -1);
    CU_ASSERT(wait_for(lost ? "race_b.txt" : "race_a.txt", "race is in use by process"));
    CU_ASSERT(wait_for("race/log.csv", "\n20,train,"));
    kill(racer[1 - lost], SIGTERM);
    CU_ASSERT_EQUAL(wait_code_limited(racer[1 - lost]), 143);

    /* a sweep folder has one tfc-grid */
    snprintf(cmd, sizeof cmd, "'%s/tfc-grid' tiny.yaml --grid seed=1 --out sweep --set "
             "max_iter=100000000", bin);
    pid = spawn(cmd, "sweep.txt");
    CU_ASSERT(wait_for("sweep/seed=1/log.csv", "\n20,train,"));
    snprintf(pid_text, sizeof pid_text, "sweep is in use by process %ld", (long)pid);
    snprintf(cmd, sizeof cmd, "timeout 20 '%s/tfc-grid' tiny.yaml --grid seed=1 --out sweep",
             bin);
    tfc_test_sh_expect(2, cmd, pid_text, NULL);
    kill(pid, SIGTERM);
    CU_ASSERT_EQUAL(wait_code_limited(pid), 143);
}

/* ---- 9. a run cleans its own files' temporaries a kill left (holding the lock) ----------- */

static void test_stale_temps(void)
{
    const char *bin = tfc_test_bin("tfc-train");
    if (!bin) return;
    write_solver();
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "mkdir t9 && touch t9/.best.safetensors.tmp-Ab12Cd "
             "t9/.summary.json.tmp-Zz9999 t9/.notes.txt.tmp-abcdef && '%s/tfc-train' tiny.yaml "
             "--out t9 --threads 1 --set max_iter=10", bin);
    tfc_test_sh_expect(0, cmd, "done: 10 iterations", NULL);
    CU_ASSERT(!exists("t9/.best.safetensors.tmp-Ab12Cd"));
    CU_ASSERT(!exists("t9/.summary.json.tmp-Zz9999"));
    CU_ASSERT(exists("t9/.notes.txt.tmp-abcdef")); /* not a file of the run's */
}

/* ---- 22. tfc-inspect verifies a state's checksum ------------------------------------------ */

static void test_inspect_checksum(void)
{
    const char *bin = tfc_test_bin("tfc-inspect");
    if (!bin) return;
    write_solver();
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --out insp --threads 1 --set "
             "max_iter=30", bin);
    tfc_test_sh_expect(0, cmd, "done: 30 iterations", NULL);
    snprintf(cmd, sizeof cmd, "'%s/tfc-inspect' insp/snapshots/tiny_iter_30.state", bin);
    tfc_test_sh_expect(0, cmd, "\nchecksum ok (", NULL);
    snprintf(cmd, sizeof cmd, "'%s/tfc-inspect' insp/final.safetensors", bin);
    tfc_test_sh_expect(0, cmd, "\nchecksum: none", NULL);
    /* one bit of the last tensor's data flipped */
    size_t n;
    char *state = tfc_test_read(tfc_test_path("insp/snapshots/tiny_iter_30.state"), &n);
    CU_ASSERT_FATAL(state && n > 16);
    state[n - 2] ^= 1;
    tfc_test_write("bad.state", state, (long)n);
    free(state);
    snprintf(cmd, sizeof cmd, "'%s/tfc-inspect' bad.state", bin);
    tfc_test_sh_expect(1, cmd, "\nchecksum mismatch (stored ", "bad.state: checksum mismatch");
}

/* ---- 19. tfc-zoo export refuses a non-empty folder unless --overwrite -------------------- */

static void test_zoo_export_non_empty(void)
{
    const char *bin = tfc_test_bin("tfc-zoo");
    if (!bin) return;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "mkdir mine && echo own >mine/notes.txt && '%s/tfc-zoo' export "
             "fortunes_char_lstm mine", bin);
    tfc_test_sh_expect(2, cmd, "mine is not empty (1 entry)", "--overwrite");
    CU_ASSERT(!exists("mine/model.yaml"));
    snprintf(cmd, sizeof cmd, "'%s/tfc-zoo' export fortunes_char_lstm mine --overwrite", bin);
    tfc_test_sh_expect(0, cmd, "files exported to mine", NULL);
    CU_ASSERT(exists("mine/model.yaml") && exists("mine/notes.txt"));
    /* a new folder, and an empty one, take it */
    snprintf(cmd, sizeof cmd, "mkdir empty && '%s/tfc-zoo' export fortunes_char_lstm empty && "
             "'%s/tfc-zoo' export fortunes_char_lstm new/dir", bin, bin);
    tfc_test_sh_expect(0, cmd, "files exported to new/dir", NULL);
    CU_ASSERT(exists("empty/model.yaml") && exists("new/dir/model.yaml"));
}

/* ---- 15. options that were silently ignored; tfc-data --set ------------------------------ */

static void test_ignored_options(void)
{
    const char *bin = tfc_test_bin("tfc-train");
    if (!bin) return;
    write_solver();
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --force", bin);
    tfc_test_sh_expect(2, cmd, "--force goes with --resume", NULL);
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --cuda-graphs --no-cuda-graphs", bin);
    tfc_test_sh_expect(2, cmd, "--cuda-graphs and --no-cuda-graphs exclude each other", NULL);
    /* on the CPU (no CUDA graphs) the default says nothing of them; asked for, it says so */
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --device cpu --out cg0 --set max_iter=2 "
             "--set test_interval=0 >cg0.txt 2>&1 && ! grep cuda_graphs cg0.txt", bin);
    tfc_test_sh_expect(0, cmd, NULL, NULL);
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --device cpu --out cg1 --set max_iter=2 "
             "--set test_interval=0 --cuda-graphs", bin);
    tfc_test_sh_expect(0, cmd, "note: cuda_graphs: cpu has no CUDA graphs", NULL);
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --output x", bin);
    tfc_test_sh_expect(2, cmd, "unknown option '--output'; did you mean '--out'?", NULL);
    snprintf(cmd, sizeof cmd, "'%s/tfc-summary' tiny.yaml --memory 1G", bin);
    tfc_test_sh_expect(2, cmd, "--memory goes with --max-batch", NULL);
    snprintf(cmd, sizeof cmd, "'%s/tfc-zoo' info fashon_mlp", bin);
    tfc_test_sh_expect(2, cmd, "no model 'fashon_mlp'", "did you mean 'fashion_mlp'?");
    /* --stop-at at or past max_iter, or before the resumed snapshot: refused, nothing run */
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --out sa --set max_iter=40 --stop-at 40",
             bin);
    tfc_test_sh_expect(2, cmd, "--stop-at 40 is not below max_iter 40", NULL);
    CU_ASSERT(!exists("sa/log.csv"));
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --out sa --set max_iter=40 --stop-at 20 "
             "&& '%s/tfc-train' sa/config.yaml --resume sa/snapshots/tiny_iter_20.state "
             "--stop-at 10", bin, bin);
    tfc_test_sh_expect(2, cmd,
                       "--stop-at 10 is before iteration 20, where the resumed snapshot is", NULL);
    CU_ASSERT_STRING_EQUAL(run_status("sa"), "paused");
    CU_ASSERT(!exists("sa/final.safetensors"));
    /* test_interval with nothing to test on: a configuration error at the key, no folder */
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --out ti --set data.test=null", bin);
    tfc_test_sh_expect(2, cmd, "tiny.yaml:", "test_interval: 100 needs data.test");
    CU_ASSERT(!exists("ti"));
    /* tfc-data takes --set as tfc-train does: what one refuses the other refuses, a
     * misspelled data key, solver key or model key alike, and what one accepts the other
     * accepts */
    snprintf(cmd, sizeof cmd, "'%s/tfc-data' tiny.yaml --take 3 "
             "--set data.train.pipeline.2.batch.batch_size=5", bin);
    tfc_test_sh_expect(0, cmd, "3 elements (15 examples)", NULL);
    static const struct {
        const char *set, *want;
    } sets[] = {
        {"data.tset.source=x", "data.tset: unknown key 'tset'; did you mean 'test'?"},
        {"max_itr=5", "unknown key 'max_itr'; did you mean 'max_iter'?"},
        {"optimizer.learning_rat=0.1", "unknown key 'learning_rat'; did you mean"},
        {"model.layers.0.Dense.unitz=3", "unknown key 'unitz'; did you mean 'units'?"},
    };
    for (size_t i = 0; i < sizeof sets / sizeof *sets; i++) {
        const char *const tools[] = {"tfc-data", "tfc-train"};
        for (int t = 0; t < 2; t++) {
            snprintf(cmd, sizeof cmd, "'%s/%s' tiny.yaml --set %s", bin, tools[t],
                     sets[i].set);
            tfc_test_sh_expect(2, cmd, sets[i].want, NULL);
        }
    }
    snprintf(cmd, sizeof cmd, "'%s/tfc-data' tiny.yaml --take 1 --set max_iter=5 --set "
             "optimizer.learning_rate=0.5 --set model.layers.0.Dense.units=8", bin);
    tfc_test_sh_expect(0, cmd, "1 elements (16 examples)", NULL);
    /* base_dir: the data's folder for tfc-data as for tfc-train (the solver one folder down) */
    char *tiny = tfc_test_read(tfc_test_path("tiny.yaml"), NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tiny);
    size_t len = strlen(tiny) + 32;
    char *moved = malloc(len);
    snprintf(moved, len, "base_dir: ..\n%s", tiny);
    mkdir(tfc_test_path("bd"), 0755);
    tfc_test_write("bd/tiny.yaml", moved, -1);
    free(tiny);
    free(moved);
    snprintf(cmd, sizeof cmd, "'%s/tfc-data' bd/tiny.yaml --split test --take 1", bin);
    tfc_test_sh_expect(0, cmd, "data.test: 64 source records", "1 elements (32 examples)");
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' bd/tiny.yaml --out bdrun --set max_iter=1", bin);
    tfc_test_sh_expect(0, cmd, "done: 1 iterations", NULL);
}

/* ---- 16. empty data: the file named, nothing created ---------------------------------------- */

static void test_empty_data(void)
{
    const char *bin = tfc_test_bin("tfc-train");
    if (!bin) return;
    write_solver();
    tfc_test_write("header.csv", "a,b,label\n", -1);
    tfc_test_write("empty.txt", "", 0);
    tfc_tensor x0 = {TFC_F32, {.ndim = 2, .dim = {0, 16}}, NULL, -1};
    CU_ASSERT_FATAL(tfc_npy_write(tfc_test_path("x0.npy"), &x0, NULL) == TFC_OK);
    static const struct {
        const char *source, *file, *why;
    } cases[] = {
        {"{type: csv, file: header.csv, label_column: label}", "header.csv:",
         "a header and no rows"},
        {"{type: text, files: empty.txt}", "empty.txt:", "empty or blank"},
        {"{type: npy, features: x0.npy}", "x0.npy:", "its first axis is 0"},
    };
    char cmd[2048];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --out nodata --set "
                 "'data.train.source=%s'", bin, cases[i].source);
        tfc_test_sh_expect(1, cmd, cases[i].file, cases[i].why);
        CU_ASSERT(!exists("nodata")); /* so the next try is not refused */
    }
    /* the source has records, a stage leaves none: the split and the stage named, no folder */
    static const struct {
        const char *split, *stages, *why;
    } drained[] = {
        {"train", "[{filter: {labels: [9]}}, {repeat: {}}, {batch: {batch_size: 16}}]",
         "data.train yields no elements: pipeline[0].filter leaves none of the source's 256"},
        {"train", "[{skip: {count: 300}}, {repeat: {}}, {batch: {batch_size: 16}}]",
         "data.train yields no elements: pipeline[0].skip leaves none of the source's 256"},
        {"train", "[{take: {count: 0}}, {batch: {batch_size: 16}}]",
         "data.train yields no elements: pipeline[0].take leaves none of the source's 256"},
        {"train", "[{batch: {batch_size: 300, drop_remainder: true}}]",
         "data.train yields no elements: pipeline[0].batch leaves none of the source's 256"},
        {"test", "[{filter: {labels: [9]}}, {batch: {batch_size: 32}}]",
         "data.test yields no elements: pipeline[0].filter leaves none of the source's 64"},
    };
    for (size_t i = 0; i < sizeof drained / sizeof *drained; i++) {
        snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --out nodata --set "
                 "'data.%s.pipeline=%s'", bin, drained[i].split, drained[i].stages);
        tfc_test_sh_expect(1, cmd, drained[i].why, NULL);
        CU_ASSERT(!exists("nodata"));
    }
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --out nodata --set max_iter=2", bin);
    tfc_test_sh_expect(0, cmd, "done: 2 iterations", NULL);
    /* tfc-test says the same of its split, before it evaluates (no result of 0 examples) */
    snprintf(cmd, sizeof cmd, "'%s/tfc-test' tiny.yaml --weights nodata/final.safetensors "
             "--set 'data.test.pipeline=%s'", bin, drained[4].stages);
    tfc_test_sh_expect(1, cmd, drained[4].why, NULL);
}

/* ---- 7, 8. a resume never rewrites a finished run's results; log and summary agree ---------- */

/* The rows of `phase` at iteration `iter` in the scratch run's log.csv, and in *bad the
 * lines that are not whole rows (another comma count than the header's, a NUL byte). */
static int rows_at(const char *run, const char *phase, long iter, int *bad)
{
    char path[256], want[64];
    snprintf(path, sizeof path, "%s/log.csv", run);
    snprintf(want, sizeof want, "%ld,%s,", iter, phase);
    size_t len = 0;
    char *t = tfc_test_read(tfc_test_path(path), &len);
    int n = 0, header = -1;
    *bad = t == NULL || strlen(t) != len;
    for (char *line = t ? strtok(t, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        int commas = 0;
        for (char *c = line; *c; c++) commas += *c == ',';
        if (header < 0) header = commas;
        *bad += commas != header;
        n += !strncmp(line, want, strlen(want));
    }
    free(t);
    return n;
}

static void test_resume_finished_run(void)
{
    const char *bin = tfc_test_bin("tfc-train");
    if (!bin) return;
    write_solver();
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --out done --threads 1 --quiet --set "
             "snapshot.interval=100", bin);
    tfc_test_sh_expect(0, cmd, "done: 300 iterations", NULL);
    size_t log_len = 0, final_len = 0;
    char *log = tfc_test_read(tfc_test_path("done/log.csv"), &log_len);
    char *final = tfc_test_read(tfc_test_path("done/final.safetensors"), &final_len);
    /* an earlier snapshot into the finished run: refused, naming what it would replace */
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' done/config.yaml --threads 1 --resume "
             "done/snapshots/tiny_iter_100.state", bin);
    tfc_test_sh_expect(2, cmd,
                       "done holds a run finished at iteration 300; resuming iteration 100 "
                       "there would replace its final.safetensors, best.safetensors, "
                       "summary.json and the 202 row(s) of log.csv after iteration 100",
                       "--out DIR, or add --overwrite");
    size_t len = 0;
    char *now = tfc_test_read(tfc_test_path("done/log.csv"), &len);
    CU_ASSERT(now && len == log_len && !memcmp(now, log, len));
    free(now);
    now = tfc_test_read(tfc_test_path("done/final.safetensors"), &len);
    CU_ASSERT(now && len == final_len && !memcmp(now, final, len));
    free(now);
    free(log);
    free(final);
    CU_ASSERT_STRING_EQUAL(run_status("done"), "completed");
    /* into a new --out it runs; with --overwrite it replaces them */
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' done/config.yaml --threads 1 --quiet --out again "
             "--resume done/snapshots/tiny_iter_100.state", bin);
    tfc_test_sh_expect(0, cmd, "done: 300 iterations", NULL);
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' done/config.yaml --threads 1 --quiet --overwrite "
             "--resume done/snapshots/tiny_iter_100.state", bin);
    tfc_test_sh_expect(0, cmd, "done: 300 iterations", NULL);
    int bad = 0;
    CU_ASSERT_EQUAL(rows_at("done", "test", 200, &bad), 1);
    CU_ASSERT_EQUAL(bad, 0);
    /* its last snapshot continues it (a larger max_iter): nothing of it is replaced */
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' done/config.yaml --threads 1 --quiet --resume "
             "done/snapshots/tiny_iter_300.state --set max_iter=310", bin);
    tfc_test_sh_expect(0, cmd, "done: 310 iterations", NULL);
    CU_ASSERT_EQUAL(rows_at("done", "test", 300, &bad), 1);
    CU_ASSERT_EQUAL(bad, 0);
}

static void test_log_matches_summary(void)
{
    const char *bin = tfc_test_bin("tfc-train");
    if (!bin) return;
    write_solver();
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --out f --threads 1 --quiet --set "
             "snapshot.interval=100 --stop-at 100", bin);
    tfc_test_sh_expect(0, cmd, "paused at iteration 100", NULL);
    /* a NUL where a row was being written is not a row: the resumed log keeps whole rows */
    char *log = tfc_test_read(tfc_test_path("f/log.csv"), NULL);
    char *row = log ? strstr(log, "\n50,train,") : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(row);
    row[6] = 0;
    tfc_test_write("f/log.csv", log, (long)(strlen(log) + strlen(row + 7) + 1));
    free(log);
    /* the final write fails (a folder in its place) after the test row of 300 */
    CU_ASSERT_FATAL(mkdir(tfc_test_path("f/final.safetensors"), 0755) == 0);
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' f/config.yaml --threads 1 --quiet --resume "
             "f/snapshots/tiny_iter_100.state", bin);
    tfc_test_sh_expect(1, cmd, "final.safetensors", "Is a directory");
    CU_ASSERT_STRING_EQUAL(run_status("f"), "failed");
    rmdir(tfc_test_path("f/final.safetensors"));
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' f/config.yaml --threads 1 --quiet --resume "
             "f/snapshots/tiny_iter_300.state", bin);
    tfc_test_sh_expect(0, cmd, "done: 300 iterations", "test loss");
    int bad = 0;
    CU_ASSERT_EQUAL(rows_at("f", "test", 300, &bad), 1);
    CU_ASSERT_EQUAL(rows_at("f", "train", 51, &bad), 1);
    CU_ASSERT_EQUAL(rows_at("f", "train", 50, &bad), 0);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_STRING_EQUAL(run_status("f"), "completed");
    /* a resume (here over the finished run, --overwrite) that dies after cutting the log
     * leaves no summary.json of the state it left */
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' f/config.yaml --threads 1 --overwrite --resume "
             "f/snapshots/tiny_iter_100.state --set max_iter=100000000", bin);
    pid_t pid = spawn(cmd, "f.txt");
    CU_ASSERT_FATAL(wait_for("f/log.csv", "\n400,train,"));
    kill(pid, SIGKILL);
    wait_code(pid);
    CU_ASSERT(!exists("f/summary.json"));
    CU_ASSERT(!exists("f/final.safetensors"));
    CU_ASSERT_EQUAL(rows_at("f", "test", 300, &bad), 1); /* the resumed run's own */
}

/* ---- 6. a resume compares the snapshot's own configuration, its model first ------------------ */

static void test_resume_diff(void)
{
    const char *bin = tfc_test_bin("tfc-train");
    if (!bin) return;
    write_solver();
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --out seeded --threads 1 --quiet "
             "--stop-at 100 && sed -i 's/^seed: 7$/seed: 8/' seeded/config.yaml && grep -q "
             "'^seed: 8$' seeded/config.yaml", bin);
    tfc_test_sh_expect(0, cmd, "paused at iteration 100", NULL);
    /* the run's own config.yaml edited: the snapshot's configuration still tells */
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' seeded/config.yaml --threads 1 --resume "
             "seeded/snapshots/tiny_iter_100.state --stop-at 150", bin);
    tfc_test_sh_expect(0, cmd,
                       "differs from the snapshot's (the snapshot's configuration -> now):\n"
                       "  seed: 7 -> 8\ncontinuing", NULL);
    /* another model's snapshot (another optimizer too): its model is said first */
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --out other --threads 1 --quiet "
             "--set model.name=other --set optimizer.type=sgd --stop-at 100", bin);
    tfc_test_sh_expect(0, cmd, "paused at iteration 100", NULL);
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' seeded/config.yaml --threads 1 --resume "
             "other/snapshots/other_iter_100.state", bin);
    tfc_test_sh_expect(2, cmd, "cannot resume: this snapshot belongs to model 'other' "
                       "(other/snapshots/other_iter_100.state), not to this configuration's "
                       "model 'tiny'", "its own run's config.yaml");
}

/* ---- 17. on_error: skip says what it left out, each record once ----------------------------- */

static void test_skip_reported(void)
{
    const char *bin = tfc_test_bin("tfc-train");
    if (!bin) return;
    char list[512] = "", name[32];
    for (int i = 0; i < 8; i++) {
        unsigned char px[16];
        memset(px, i * 30, sizeof px);
        void *png;
        size_t len;
        CU_ASSERT_FATAL(tfc_image_encode_png(px, 4, 4, 1, &png, &len, NULL) == TFC_OK);
        snprintf(name, sizeof name, "ok%d.png", i);
        tfc_test_write(name, png, (long)len);
        free(png);
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s %d\n", name, i % 2);
    }
    tfc_test_write("bad0.png", "not a png", -1);
    tfc_test_write("bad1.png", "\x89PNG\r\n\x1a\nbroken", -1);
    snprintf(list + strlen(list), sizeof list - strlen(list), "bad0.png 0\nbad1.png 1\n");
    tfc_test_write("list.txt", list, -1);
    tfc_test_write("skip.yaml",
                   "model:\n"
                   "  name: im\n"
                   "  input: {shape: [4, 4, 1]}\n"
                   "  layers: [{Flatten: {}}, {Dense: {name: out, units: 2}}]\n"
                   "data:\n"
                   "  train:\n"
                   "    source: {type: images, list: list.txt, channels: 1, on_error: skip}\n"
                   "    pipeline: [{repeat: {}}, {batch: {batch_size: 4}}]\n"
                   "  test:\n"
                   "    source: {type: images, list: list.txt, channels: 1, on_error: skip}\n"
                   "    pipeline: [{batch: {batch_size: 4}}]\n"
                   "optimizer: {type: sgd, learning_rate: 0.01}\n"
                   "max_iter: 20\n"
                   "test_interval: 5\n", -1);
    /* 20 steps of 4 over 8 good records: ten passes, each bad record counted once */
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' skip.yaml --out skip --threads 1", bin);
    tfc_test_sh_expect(0, cmd, "data.train: 2 bad records left out (on_error: skip), first: ",
                       "bad0.png, ");
    tfc_test_sh_expect(0, "cat skip/summary.json",
                       "\"skipped\": {\n    \"train\": 2,\n    \"test\": 2\n", NULL);
    snprintf(cmd, sizeof cmd, "'%s/tfc-test' skip/config.yaml --weights skip/final.safetensors",
             bin);
    tfc_test_sh_expect(0, cmd,
                       "data.test: 2 bad records left out (on_error: skip), first: ", "bad1.png");
    snprintf(cmd, sizeof cmd, "'%s/tfc-data' skip.yaml --take 10", bin);
    tfc_test_sh_expect(0, cmd, "data.train: 2 bad records left out", "bad0.png");
    /* data-parallel, each rank keeping its share of the dealt splits: still the whole run's
     * count (every rank reads each record to know whether it is bad, so rank 0's count is
     * complete, and a sum over the ranks would count each twice) */
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
    if (tfc_test_sh("mpirun --version", NULL) != 0) {
        tfc_test_skip("mpirun is not installed (apt install openmpi-bin)");
        return;
    }
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' skip.yaml --out skip2 --threads 1 --nprocs 2", bin);
    tfc_test_sh_expect(0, cmd, "input dealt", "data.train: 2 bad records left out");
    tfc_test_sh_expect(0, "cat skip2/summary.json",
                       "\"skipped\": {\n    \"train\": 2,\n    \"test\": 2\n", NULL);
}

/* ---- 20. `make run` again: re-tests a finished run, resumes an interrupted one ---------- */

/* `make -s run` from the tree TFC_BIN belongs to, on the scratch solver mk.yaml into the
 * scratch folder `dir` (RUN_SETUP=0: no installing, no build; DEBUG as bin/.config says, so
 * the Makefile leaves the build as it is). */
static void make_run(const char *root, const char *bin, const char *dir, int code,
                     const char *want1, const char *want2)
{
    char *config = tfc_test_read(tfc_test_path("mk_bin_config"), NULL);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "make -s -C '%s' run RUN_SETUP=0 DEBUG=%d BIN='%s' "
             "RUN_CONFIG='%s' RUN_DIR='%s'", root, config && strstr(config, "debug") ? 1 : 0,
             bin, tfc_test_path("mk.yaml"), tfc_test_path(dir));
    free(config);
    tfc_test_sh_expect(code, cmd, want1, want2);
}

/* 1 when the scratch files `a` and `b` hold the same bytes. */
static int same_bytes(const char *a, const char *b)
{
    size_t la = 0, lb = 0;
    char *ta = tfc_test_read(tfc_test_path(a), &la), *tb = tfc_test_read(tfc_test_path(b), &lb);
    int same = ta && tb && la == lb && !memcmp(ta, tb, la);
    free(ta);
    free(tb);
    return same;
}

static void test_make_run(void)
{
    const char *b = tfc_test_bin("tfc-train");
    if (!b) return;
    char bin[1100], root[1100], probe[1200];
    snprintf(bin, sizeof bin, "%s", b);
    snprintf(root, sizeof root, "%s", bin);
    char *slash = strrchr(root, '/');
    if (slash) *slash = 0;
    snprintf(probe, sizeof probe, "%s/mk/train.mk", root);
    fflush(NULL);
    if (system("command -v make >/dev/null 2>&1") != 0 || access(probe, R_OK) != 0) {
        tfc_test_skip("no make, or no mk/train.mk beside $TFC_BIN");
        return;
    }
    snprintf(probe, sizeof probe, "cp '%s/.config' mk_bin_config", bin);
    tfc_test_sh(probe, NULL);
    write_solver(); /* tiny.yaml, made shorter and with snapshots */
    tfc_test_sh("sed -e 's/^max_iter: 300/max_iter: 40/' -e 's/^test_interval: 100/test_interval: "
                "20/' -e 's/^snapshot: {interval: 0}/snapshot: {interval: 10}/' tiny.yaml "
                ">mk.yaml", NULL);
    /* the first time: trains, then tests the final weights */
    make_run(root, bin, "mk_run", 0, "done: 40 iterations", "test: loss ");
    /* again: the finished run is re-tested, nothing of it rewritten */
    tfc_test_sh("cp mk_run/final.safetensors mk_final && cp mk_run/log.csv mk_log", NULL);
    make_run(root, bin, "mk_run", 0, "/mk_run has finished (make run RUN_DIR=DIR trains anew",
             "test: loss ");
    CU_ASSERT(same_bytes("mk_run/final.safetensors", "mk_final"));
    CU_ASSERT(same_bytes("mk_run/log.csv", "mk_log"));
    /* interrupted after a snapshot (Ctrl-C leaves the same: a snapshot, no final weights):
     * resumed from its latest snapshot, to the weights of the uninterrupted run */
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' mk.yaml --out mk_cut --stop-at 20", bin);
    tfc_test_sh_expect(0, cmd, NULL, NULL);
    CU_ASSERT(exists("mk_cut/snapshots/tiny_iter_20.state") &&
              !exists("mk_cut/final.safetensors"));
    make_run(root, bin, "mk_cut", 0, "/mk_cut from ", "/mk_cut/snapshots/tiny_iter_20.state");
    CU_ASSERT(same_bytes("mk_cut/final.safetensors", "mk_final"));
    /* stopped before its first snapshot (killed at start: a folder and its config.yaml):
     * starts over */
    tfc_test_sh("mkdir mk_early && cp mk.yaml mk_early/config.yaml", NULL);
    make_run(root, bin, "mk_early", 0, "/mk_early stopped before its first snapshot: starting over",
             "done: 40 iterations");
    CU_ASSERT(same_bytes("mk_early/final.safetensors", "mk_final"));
}

TFC_TEST_MAIN("trust", {"gzip_integrity", test_gzip_integrity},
              {"sighup_and_closed_stdout", test_sighup_and_closed_stdout},
              {"ctl_set_max_iter", test_ctl_set_max_iter},
              {"run_dir_lock", test_run_dir_lock},
              {"stale_temps", test_stale_temps},
              {"inspect_checksum", test_inspect_checksum},
              {"zoo_export_non_empty", test_zoo_export_non_empty},
              {"ignored_options", test_ignored_options},
              {"empty_data", test_empty_data},
              {"resume_finished_run", test_resume_finished_run},
              {"log_matches_summary", test_log_matches_summary},
              {"resume_diff", test_resume_diff},
              {"skip_reported", test_skip_reported},
              {"signal_during_test", test_signal_during_test},
              {"nonfinite_inputs", test_nonfinite_inputs},
              {"nonfinite_after_resume", test_nonfinite_after_resume},
              {"labels_out_of_range", test_labels_out_of_range},
              {"make_run", test_make_run})
