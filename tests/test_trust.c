/* What the tools do when things go wrong, walked as a user meets it ($TFC_BIN, as make test
 * builds them): corrupted, truncated and padded gzip inputs (IDX and TFRecord) fail naming
 * the file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
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

TFC_TEST_MAIN("trust", {"gzip_integrity", test_gzip_integrity})
