/* What the tools do when things go wrong, walked as a user meets it ($TFC_BIN, as make test
 * builds them): corrupted, truncated and padded gzip inputs (IDX and TFRecord) fail naming
 * the file; SIGHUP snapshots like SIGTERM and a closed stdout (`| head -1`) does not stop
 * the run. */
#include <jansson.h>
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

/* Runs `cmd` in the scratch directory (stdout and stderr into out.txt); returns the exit
 * status and the output in a malloc'd string. */
static int run(const char *cmd, char **text)
{
    char full[8192];
    snprintf(full, sizeof full, "cd '%s' && (%s) >out.txt 2>&1", tfc_test_tmpdir(), cmd);
    int st = system(full);
    *text = tfc_test_read(tfc_test_path("out.txt"), NULL);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* run() that asserts the exit code and that the output holds each of the `want` strings. */
static void expect(int code, const char *cmd, const char *want1, const char *want2)
{
    char *text;
    int rc = run(cmd, &text);
    int ok = rc == code && text && (!want1 || strstr(text, want1)) &&
             (!want2 || strstr(text, want2));
    CU_ASSERT(ok);
    if (!ok) printf("\n`%s`: exit %d, want %d with '%s' '%s':\n%s\n", cmd, rc, code,
                    want1 ? want1 : "", want2 ? want2 : "", text ? text : "");
    free(text);
}

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
    expect(0, cmd, "40 examples", NULL);

    /* a data byte flipped in the middle (stored blocks: only the CRC-32 can tell) */
    good[n / 2] ^= 0x5a;
    tfc_test_write("bad.gz", good, (long)n);
    expect(1, cmd, "bad.gz: corrupt gzip file", "incorrect data check");
    good[n / 2] ^= 0x5a;
    /* the trailer's CRC zeroed, then its length (ISIZE) */
    unsigned char *copy = malloc(n + 8);
    memcpy(copy, good, n);
    memset(copy + n - 8, 0, 4);
    tfc_test_write("bad.gz", copy, (long)n);
    expect(1, cmd, "bad.gz: corrupt gzip file", "incorrect data check");
    memcpy(copy, good, n);
    copy[n - 4] ^= 1;
    tfc_test_write("bad.gz", copy, (long)n);
    expect(1, cmd, "bad.gz: corrupt gzip file", "incorrect length check");
    /* the trailer cut off: every record inflates, but the stream never ends */
    tfc_test_write("bad.gz", good, (long)n - 8);
    expect(1, cmd, "bad.gz: corrupt gzip file: truncated", NULL);
    /* bytes after the stream that are not another gzip member */
    memcpy(copy, good, n);
    memcpy(copy + n, "garbage!", 8);
    tfc_test_write("bad.gz", copy, (long)n + 8);
    expect(1, cmd, "bad.gz: corrupt gzip file: 8 bytes of trailing garbage", NULL);
    /* two members (cat a.gz b.gz) are one valid stream */
    size_t n1, n2;
    unsigned char *a = write_gz("a.gz", img, 100, 6, &n1);
    unsigned char *b = write_gz("b.gz", img + 100, sizeof img - 100, 6, &n2);
    copy = realloc(copy, n1 + n2);
    memcpy(copy, a, n1);
    memcpy(copy + n1, b, n2);
    tfc_test_write("bad.gz", copy, (long)(n1 + n2));
    expect(0, cmd, "40 examples", NULL);
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
    expect(1, cmd, "bad.gz: corrupt gzip file", NULL);

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
    expect(0, cmd, "5 elements", NULL);
    copy = realloc(copy, n + 8);
    memcpy(copy, good, n);
    memset(copy + n - 8, 0, 4);
    tfc_test_write("bad.tfrecord.gz", copy, (long)n);
    expect(1, cmd, "bad.tfrecord.gz: corrupt gzip file", "incorrect data check");
    memcpy(copy, good, n);
    memcpy(copy + n, "\0\0\0\0\0\0\0\0", 8);
    tfc_test_write("bad.tfrecord.gz", copy, (long)n + 8);
    expect(1, cmd, "bad.tfrecord.gz: corrupt gzip file: 8 bytes of trailing garbage", NULL);
    free(copy);
    free(good);
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
    CU_ASSERT_EQUAL(run(ctl, &text), 0);
    free(text);
    kill(pid, SIGCONT);
    CU_ASSERT_EQUAL(wait_code_limited(pid), 0);
    CU_ASSERT_STRING_EQUAL(run_status("live"), "completed");
    CU_ASSERT_EQUAL(last_row("live", "train", 1L << 40, NULL), n);
    CU_ASSERT(exists("live/final.safetensors"));
    /* the poly schedule runs to the new end: the rate near it is a run's planned with it */
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --out planned --threads 1 --set "
             "max_iter=%ld --set lr_policy.type=poly --set test_interval=0 >/dev/null", bin, n);
    CU_ASSERT_EQUAL(run(cmd, &text), 0);
    free(text);
    double lr_live = -1, lr_planned = -2;
    CU_ASSERT_EQUAL(last_row("live", "train", n - 10, &lr_live), n - 10);
    CU_ASSERT_EQUAL(last_row("planned", "train", n - 10, &lr_planned), n - 10);
    CU_ASSERT(lr_live == lr_planned && lr_live > 0);

    /* a misspelled key: exit 2 with a did-you-mean, without a trainer to ask */
    snprintf(ctl, sizeof ctl, "'%s/tfc-ctl' live set max_iters=5", bin);
    expect(2, ctl, "unknown key 'max_iters'; did you mean 'max_iter'?", "clip_gradients");
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
    expect(2, cmd, pid_text, "one run directory has one writer");
    snprintf(cmd, sizeof cmd, "timeout 20 '%s/tfc-train' held/config.yaml --resume %s "
             "--threads 1", bin, state);
    expect(2, cmd, pid_text, NULL);
    snprintf(cmd, sizeof cmd, "timeout 20 '%s/tfc-train' tiny.yaml --out held --overwrite "
             "--threads 1", bin);
    expect(2, cmd, pid_text, "--overwrite never clears a live run");
    CU_ASSERT(exists("held/config.yaml") && exists("held/control"));
    kill(pid, SIGTERM);
    CU_ASSERT_EQUAL(wait_code(pid), 143);
    /* the lock died with the run */
    long it = 0;
    sscanf(state, "held/snapshots/tiny_iter_%ld", &it);
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' held/config.yaml --resume %s --threads 1 "
             "--stop-at %ld", bin, state, it + 10);
    snprintf(pid_text, sizeof pid_text, "paused at iteration %ld", it + 10);
    expect(0, cmd, pid_text, NULL);

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
    expect(2, cmd, pid_text, NULL);
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
    expect(0, cmd, "done: 10 iterations", NULL);
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
    expect(0, cmd, "done: 30 iterations", NULL);
    snprintf(cmd, sizeof cmd, "'%s/tfc-inspect' insp/snapshots/tiny_iter_30.state", bin);
    expect(0, cmd, "\nchecksum ok (", NULL);
    snprintf(cmd, sizeof cmd, "'%s/tfc-inspect' insp/final.safetensors", bin);
    expect(0, cmd, "\nchecksum: none", NULL);
    /* one bit of the last tensor's data flipped */
    size_t n;
    char *state = tfc_test_read(tfc_test_path("insp/snapshots/tiny_iter_30.state"), &n);
    CU_ASSERT_FATAL(state && n > 16);
    state[n - 2] ^= 1;
    tfc_test_write("bad.state", state, (long)n);
    free(state);
    snprintf(cmd, sizeof cmd, "'%s/tfc-inspect' bad.state", bin);
    expect(1, cmd, "\nchecksum mismatch (stored ", "bad.state: checksum mismatch");
}

/* ---- 19. tfc-zoo export refuses a non-empty folder unless --overwrite -------------------- */

static void test_zoo_export_non_empty(void)
{
    const char *bin = tfc_test_bin("tfc-zoo");
    if (!bin) return;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "mkdir mine && echo own >mine/notes.txt && '%s/tfc-zoo' export "
             "fortunes_char_lstm mine", bin);
    expect(2, cmd, "mine is not empty (1 entry)", "--overwrite");
    CU_ASSERT(!exists("mine/model.yaml"));
    snprintf(cmd, sizeof cmd, "'%s/tfc-zoo' export fortunes_char_lstm mine --overwrite", bin);
    expect(0, cmd, "files exported to mine", NULL);
    CU_ASSERT(exists("mine/model.yaml") && exists("mine/notes.txt"));
    /* a new folder, and an empty one, take it */
    snprintf(cmd, sizeof cmd, "mkdir empty && '%s/tfc-zoo' export fortunes_char_lstm empty && "
             "'%s/tfc-zoo' export fortunes_char_lstm new/dir", bin, bin);
    expect(0, cmd, "files exported to new/dir", NULL);
    CU_ASSERT(exists("empty/model.yaml") && exists("new/dir/model.yaml"));
}

/* ---- 15. options that were silently ignored ------------------------------------------------ */

static void test_ignored_options(void)
{
    const char *bin = tfc_test_bin("tfc-train");
    if (!bin) return;
    write_solver();
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --force", bin);
    expect(2, cmd, "--force goes with --resume", NULL);
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --output x", bin);
    expect(2, cmd, "unknown option '--output'; did you mean '--out'?", NULL);
    snprintf(cmd, sizeof cmd, "'%s/tfc-summary' tiny.yaml --memory 1G", bin);
    expect(2, cmd, "--memory goes with --max-batch", NULL);
    snprintf(cmd, sizeof cmd, "'%s/tfc-zoo' info fashon_mlp", bin);
    expect(2, cmd, "no model 'fashon_mlp'", "did you mean 'fashion_mlp'?");
    /* --stop-at at or past max_iter, or before the resumed snapshot: refused, nothing run */
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --out sa --set max_iter=40 --stop-at 40",
             bin);
    expect(2, cmd, "--stop-at 40 is not below max_iter 40", NULL);
    CU_ASSERT(!exists("sa/log.csv"));
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' tiny.yaml --out sa --set max_iter=40 --stop-at 20 "
             "&& '%s/tfc-train' sa/config.yaml --resume sa/snapshots/tiny_iter_20.state "
             "--stop-at 10", bin, bin);
    expect(2, cmd, "--stop-at 10 is before iteration 20, where the resumed snapshot is", NULL);
    CU_ASSERT_STRING_EQUAL(run_status("sa"), "paused");
    CU_ASSERT(!exists("sa/final.safetensors"));
}

TFC_TEST_MAIN("trust", {"gzip_integrity", test_gzip_integrity},
              {"sighup_and_closed_stdout", test_sighup_and_closed_stdout},
              {"ctl_set_max_iter", test_ctl_set_max_iter},
              {"run_dir_lock", test_run_dir_lock},
              {"stale_temps", test_stale_temps},
              {"inspect_checksum", test_inspect_checksum},
              {"zoo_export_non_empty", test_zoo_export_non_empty},
              {"ignored_options", test_ignored_options})
