/* tfc-data end to end ($TFC_BIN/tfc-data, as `make test` builds it): the element spec and
 * rate lines, --take and --output (.npy files concatenated or stacked), --split test with the
 * train split's vocabulary, --format tfrecord read back through the source it prints,
 * --help/--version, and the exit codes 0 / 1 / 2 of SPEC §3. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data/data.h"
#include "testutil.h"

static char out[65536];

/* Runs tfc-data with `args` (shell words); returns its exit code, output in `out`. */
static int run(const char *args)
{
    const char *bin = getenv("TFC_BIN");
    char cwd[2048] = "", cmd[4096];
    if (!bin) bin = "bin";
    if (bin[0] != '/' && !getcwd(cwd, sizeof cwd)) cwd[0] = 0;
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s%s%s/tfc-data' %s 2>&1", tfc_test_tmpdir(), cwd,
             cwd[0] ? "/" : "", bin, args);
    FILE *p = popen(cmd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void write_fixtures(void)
{
    unsigned char buf[16 + 10 * 12];
    memcpy(buf, "\0\0\x08\x03\0\0\0\x0a\0\0\0\x03\0\0\0\x04", 16);
    for (int i = 0; i < 120; i++) buf[16 + i] = (unsigned char)i;
    tfc_test_write("img.idx", buf, sizeof buf);
    unsigned char lab[8 + 10] = {0, 0, 8, 1, 0, 0, 0, 10, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    tfc_test_write("lab.idx", lab, sizeof lab);
    tfc_test_write("trunc.idx", buf, 40);
    tfc_test_write("m.yaml",
                   "input: {shape: [3, 4]}\nlayers: [{Flatten: {}}, {Dense: {units: 10}}]\n", -1);
    tfc_test_write("solver.yaml",
                   "model: m.yaml\n"
                   "seed: 3\n"
                   "data:\n"
                   "  train:\n"
                   "    source: {type: idx, images: img.idx, labels: lab.idx}\n"
                   "    pipeline:\n"
                   "      - map: {op: scale, factor: 0.5}\n"
                   "      - batch: {batch_size: 4}\n"
                   "  test:\n"
                   "    source: {type: idx, images: img.idx, labels: lab.idx}\n", -1);
    tfc_test_write("bad.yaml", "data:\n  train:\n    source: {type: idx, images: img.idx}\n"
                   "    pipeline:\n      - batch: {batch_sise: 4}\n", -1);
    tfc_test_write("trunc.yaml", "data:\n  train:\n    source: {type: idx, images: trunc.idx}\n", -1);
    tfc_test_write("text.txt", "one two\n%\nthree one\n%\ntwo\n%\nfour\n%\n", -1);
    tfc_test_write("text.yaml",
                   "data:\n"
                   "  train:\n"
                   "    source: {type: text, files: text.txt, format: fortune, tokenizer: word,\n"
                   "             split: {every: 2, part: train}}\n"
                   "    pipeline: [{padded_batch: {batch_size: 2}}]\n"
                   "  test:\n"
                   "    source: {type: text, files: text.txt, format: fortune, tokenizer: word,\n"
                   "             split: {every: 2, part: test}}\n"
                   "    pipeline: [{padded_batch: {batch_size: 2}}]\n", -1);
}

static void test_spec_and_output(void)
{
    write_fixtures();
    CU_ASSERT_EQUAL(run("solver.yaml --take 2 --output o"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "features  float32 (-1, 3, 4, 1)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "labels    int32 (-1,)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "2 elements (8 examples)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "elements/s"));
    tfc_tensor f, l;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_read(tfc_test_path("o.features.npy"), &f, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_read(tfc_test_path("o.labels.npy"), &l, &err), TFC_OK);
    CU_ASSERT_EQUAL(f.shape.ndim, 4);
    CU_ASSERT_EQUAL(f.shape.dim[0], 8);
    CU_ASSERT_EQUAL(((float *)f.data)[12 * 5 + 1], 30.5f);
    CU_ASSERT_EQUAL(l.dtype, TFC_I32);
    CU_ASSERT_EQUAL(((int32_t *)l.data)[7], 7);
    free(f.data);
    free(l.data);
    /* Unbatched elements are stacked; the data running out stops --take early. */
    CU_ASSERT_EQUAL(run("solver.yaml --split test --take 50 --output t"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "10 elements (10 examples)"));
    CU_ASSERT_EQUAL_FATAL(tfc_npy_read(tfc_test_path("t.features.npy"), &f, &err), TFC_OK);
    CU_ASSERT_EQUAL(f.shape.ndim, 4);
    CU_ASSERT_EQUAL(f.shape.dim[0], 10);
    CU_ASSERT_EQUAL(f.dtype, TFC_U8);
    free(f.data);
}

static void test_text_splits(void)
{
    write_fixtures();
    CU_ASSERT_EQUAL(run("text.yaml --split test --output x"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "lengths   int32 (-1,)"));
    tfc_tensor f;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_read(tfc_test_path("x.features.npy"), &f, &err), TFC_OK);
    /* Test records 0 and 2, "one two" and "two": only "one" is in the training records
     * ("three one", "four"), so "two" is <unk> (1); 0 pads. */
    CU_ASSERT_EQUAL(f.shape.dim[0], 2);
    CU_ASSERT_EQUAL(f.shape.dim[1], 2);
    int32_t *v = f.data;
    CU_ASSERT(v[0] >= 2);
    CU_ASSERT_EQUAL(v[1], 1);
    CU_ASSERT_EQUAL(v[2], 1);
    CU_ASSERT_EQUAL(v[3], 0);
    free(f.data);
}

/* --format tfrecord: one Example per example (batches split, padded sequences cut to their
 * lengths); the printed source reads them back equal to the .npy output. */
static void test_tfrecord_output(void)
{
    write_fixtures();
    CU_ASSERT_EQUAL(run("solver.yaml --take 2 --output r --format tfrecord"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "wrote r.tfrecord: 8 records"));
    const char *src = strstr(out, "source: ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(src);
    CU_ASSERT_PTR_NOT_NULL(strstr(src, "features: {key: features, dtype: float32, shape: [3, 4, 1]}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(src, "labels: {key: labels, dtype: int32, shape: []}"));
    tfc_error err;
    tfc_error_clear(&err);
    tfc_data_options o = {.key = "data.train", .base_dir = tfc_test_tmpdir(), .seed = 1};
    tfc_pipeline *p = tfc_pipeline_from_yaml(src + 8, &o, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    for (int i = 0; i < 8; i++) { /* scale 0.5 of bytes 12 i .. 12 i + 11, labels i */
        tfc_batch b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        CU_ASSERT_EQUAL(((float *)b.features.data)[5], 0.5f * (float)(12 * i + 5));
        CU_ASSERT_EQUAL(*(int32_t *)b.labels.data, i);
    }
    tfc_pipeline_free(p);
    /* padded_batch: each sequence cut to its length, the variable dimension printed -1 */
    CU_ASSERT_EQUAL(run("text.yaml --output s --format tfrecord-gzip"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "wrote s.tfrecord.gz: 2 records"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "compression: gzip"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "features: {key: features, dtype: int32, shape: [-1]}"));
    p = tfc_pipeline_from_yaml(strstr(out, "source: ") + 8, &o, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    tfc_batch b;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(b.features.shape.dim[0], 2); /* "three one" */
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(b.features.shape.dim[0], 1); /* "four", padded to 2 in its batch */
    tfc_pipeline_free(p);
    CU_ASSERT_EQUAL(run("solver.yaml --format tfrecord"), 2);
    CU_ASSERT_EQUAL(run("solver.yaml --output r --format parquet"), 2);
}

static void test_exit_codes(void)
{
    write_fixtures();
    CU_ASSERT_EQUAL(run("--help"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: tfc-data"));
    CU_ASSERT_EQUAL(run("--version"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "tfc-data "));
    CU_ASSERT_EQUAL(run(""), 2);
    CU_ASSERT_EQUAL(run("solver.yaml --take 0"), 2);
    CU_ASSERT_EQUAL(run("solver.yaml --split valid"), 2);
    CU_ASSERT_EQUAL(run("solver.yaml --bogus"), 2);
    CU_ASSERT_EQUAL(run("bad.yaml"), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "bad.yaml:5:17: error: data.train.pipeline[0].batch.batch_sise"));
    CU_ASSERT_EQUAL(run("missing.yaml"), 2);
    CU_ASSERT_EQUAL(run("trunc.yaml"), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "trunc.idx"));
    CU_ASSERT_EQUAL(run("text.yaml --output /nonexistent/dir/x"), 1);
}

/* --profile: the per-stage table (named by key path; counts exact: 2 batches of 4 read 8
 * records) and the slowest stage's line. */
static void test_profile(void)
{
    write_fixtures();
    CU_ASSERT_EQUAL(run("solver.yaml --take 2 --profile"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "profile (every call timed"));
    long long n = -1;
    const char *row = strstr(out, "\nsource (idx) ");
    CU_ASSERT(row && sscanf(row + 14, "%lld", &n) == 1 && n == 8);
    row = strstr(out, "\npipeline[0].map scale ");
    CU_ASSERT(row && sscanf(row + 23, "%lld", &n) == 1 && n == 8);
    row = strstr(out, "\npipeline[1].batch ");
    CU_ASSERT(row && sscanf(row + 20, "%lld", &n) == 1 && n == 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nslowest: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "% of the pipeline's work: "));
}

TFC_TEST_MAIN("data_tool",
              {"profile", test_profile},
              {"spec_and_output", test_spec_and_output},
              {"text_splits", test_text_splits},
              {"tfrecord_output", test_tfrecord_output},
              {"exit_codes", test_exit_codes})
