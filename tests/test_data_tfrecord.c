/* The tfrecord source and writer. Fixtures written by TensorFlow 2.21 itself
 * (tests/ref/tfrecord/make.py, committed): the first 8 Fashion-MNIST images as raw bytes, PNG
 * and a float_list, plain and gzip, read back equal to the .npy copies numpy wrote beside
 * them; variable-length packed int64 sequences equal to what tf.data's VarLenFeature read
 * (the table in make.py). Records tfc writes read back through the source; broken framing,
 * corrupted data, missing keys and wrong sizes are errors naming the file and record (or
 * skipped and counted), and so are bytes that are not TFRecord; configuration mistakes name their key; a shuffled pipeline resumes
 * from saved state exactly. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"
#include "data/data.h"
#include "testutil.h"

static char refdir[2048];

static tfc_pipeline *open_yaml(const char *yaml, tfc_error *err)
{
    tfc_data_options o = {.key = "data.train", .base_dir = refdir, .seed = 1};
    tfc_error_clear(err);
    return tfc_pipeline_from_yaml(yaml, &o, err);
}

static tfc_pipeline *open_tmp(const char *yaml, tfc_error *err)
{
    tfc_data_options o = {.key = "data.train", .base_dir = tfc_test_tmpdir(), .seed = 1};
    tfc_error_clear(err);
    return tfc_pipeline_from_yaml(yaml, &o, err);
}

static void set_refdir(void)
{
    char cwd[1800];
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
    snprintf(refdir, sizeof refdir, "%s/tests/ref/tfrecord", cwd);
}

static tfc_tensor read_npy(const char *name)
{
    char path[2200];
    snprintf(path, sizeof path, "%s/%s", refdir, name);
    tfc_tensor t;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_read(path, &t, &err), TFC_OK);
    return t;
}

/* Every element of p: features gathered into fx (uint8 or float32 as declared), labels
 * into lab. Returns the count. */
static int drain(tfc_pipeline *p, void *fx, size_t fbytes, int64_t *lab)
{
    int n = 0;
    tfc_error err;
    tfc_error_clear(&err);
    for (;;) {
        tfc_batch b;
        tfc_status st = tfc_pipeline_next(p, &b, &err);
        if (st) printf("\n  %s", err.text);
        CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
        if (b.end) break;
        CU_ASSERT_EQUAL_FATAL(tfc_shape_numel(&b.features.shape) *
                                  (int64_t)tfc_dtype_size(b.features.dtype),
                              (int64_t)fbytes);
        memcpy((char *)fx + (size_t)n * fbytes, b.features.data, fbytes);
        lab[n] = (int64_t)tfc_value_get(b.labels.data, b.labels.dtype, 0);
        n++;
    }
    return n;
}

static void test_tensorflow_written_images(void)
{
    set_refdir();
    tfc_tensor img = read_npy("fashion8.images.npy"), lab = read_npy("fashion8.labels.npy");
    CU_ASSERT_EQUAL_FATAL(tfc_shape_numel(&img.shape), 8 * 784);
    static const char *const yamls[] = {
        "{type: tfrecord, files: fashion8.tfrecord, features: {key: image, dtype: uint8, "
        "shape: [28, 28, 1]}, labels: {key: label}, num_classes: 10}",
        "{type: tfrecord, files: fashion8.tfrecord.gz, compression: gzip, features: {key: image, "
        "dtype: uint8, shape: [28, 28, 1]}, labels: {key: label, dtype: int64}}",
        "{type: tfrecord, files: 'fashion8.tfrec*d', features: {key: image_png, dtype: uint8, "
        "shape: [28, 28, 1], encoded: png}, labels: {key: label}}",
        "{type: tfrecord, files: [fashion8.tfrecord], features: {key: pixels, dtype: float32, "
        "shape: [784]}, labels: {key: label}}",
    };
    for (int k = 0; k < 4; k++) {
        tfc_error err;
        tfc_pipeline *p = open_yaml(yamls[k], &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), 8);
        const tfc_element_spec *s = tfc_pipeline_element_spec(p);
        CU_ASSERT_EQUAL(s->comp[TFC_COMP_LABELS].dtype, k == 1 ? TFC_I64 : TFC_I32);
        CU_ASSERT_EQUAL(s->comp[TFC_COMP_LABELS].shape.ndim, 0);
        float fx[8 * 784];
        uint8_t ux[8 * 784];
        int64_t got[8];
        int n = k == 3 ? drain(p, fx, 784 * 4, got) : drain(p, ux, 784, got);
        CU_ASSERT_EQUAL(n, 8);
        for (int i = 0; i < 8; i++)
            CU_ASSERT_EQUAL(got[i], ((int64_t *)lab.data)[i]);
        int same = 1;
        for (int i = 0; i < 8 * 784; i++) {
            uint8_t want = ((uint8_t *)img.data)[i];
            if (k == 3) same &= fx[i] == (float)(want / 255.0);
            else same &= ux[i] == want;
        }
        CU_ASSERT(same);
        tfc_pipeline_free(p);
    }
    free(img.data);
    free(lab.data);
}

static void test_variable_length(void)
{
    set_refdir();
    /* tf.data's VarLenFeature read of seq.tfrecord (printed by make.py) */
    static const int want[8][9] = {
        {1, 4, 7}, {8}, {15, 18, 21, 24}, {22}, {29, 32, 35, 38, 41},
        {36, 39, 42, 45, 48, 1, 4, 7, 10}, {43, 46}, {50, 3, 6, 9, 12, 15}};
    static const int lens[8] = {3, 1, 4, 1, 5, 9, 2, 6};
    tfc_error err;
    tfc_pipeline *p = open_yaml("{type: tfrecord, files: seq.tfrecord, features: {key: tokens, "
                                "dtype: int32, shape: [-1]}, labels: {key: label}}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_element_spec(p)->comp[0].shape.dim[0], -1);
    for (int i = 0; i < 8; i++) {
        tfc_batch b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        CU_ASSERT_EQUAL_FATAL(b.features.shape.dim[0], lens[i]);
        CU_ASSERT_EQUAL(memcmp(b.features.data, want[i], (size_t)lens[i] * 4), 0);
        CU_ASSERT_EQUAL(*(int32_t *)b.labels.data, lens[i] % 3);
    }
    tfc_pipeline_free(p);
    /* the float_list of the same lengths, as [-1, 1] */
    p = open_yaml("{type: tfrecord, files: seq.tfrecord, features: {key: weights, "
                  "shape: [-1, 1]}}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    for (int i = 0; i < 8; i++) {
        tfc_batch b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        CU_ASSERT_EQUAL_FATAL(b.features.shape.ndim, 2);
        CU_ASSERT_EQUAL_FATAL(b.features.shape.dim[0], lens[i]);
        CU_ASSERT_PTR_NULL(b.labels.data);
        for (int t = 0; t < lens[i]; t++)
            CU_ASSERT_EQUAL(((float *)b.features.data)[t], want[i][t] / 2.0f);
    }
    tfc_pipeline_free(p);
}

/* Records written by tfc read back, plain and gzip. */
static void test_writer_round_trip(void)
{
    for (int gz = 0; gz < 2; gz++) {
        tfc_error err;
        tfc_error_clear(&err);
        const char *path = tfc_test_path(gz ? "w.tfrecord.gz" : "w.tfrecord");
        tfc_tfrecord_writer *w = tfc_tfrecord_writer_open(path, gz, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(w);
        for (int i = 0; i < 5; i++) {
            float x[6];
            uint8_t u[3] = {(uint8_t)i, (uint8_t)(200 + i), 7};
            int16_t l = (int16_t)(i - 2);
            for (int k = 0; k < 6; k++) x[k] = 0.25f * (float)(i * 6 + k) - 3.0f;
            tfc_tensor v[3] = {{TFC_F32, {.ndim = 2, .dim = {2, 3}}, x, -1},
                               {TFC_I16, {.ndim = 0}, &l, -1},
                               {TFC_U8, {.ndim = 1, .dim = {3}}, u, -1}};
            const char *keys[3] = {"x", "y", "raw"};
            CU_ASSERT_EQUAL(tfc_tfrecord_write(w, 3, keys, v, &err), TFC_OK);
        }
        CU_ASSERT_EQUAL(tfc_tfrecord_writer_close(w, &err), TFC_OK);
        char yaml[512];
        snprintf(yaml, sizeof yaml, "{type: tfrecord, files: %s, compression: %s, features: "
                 "{key: x, shape: [2, 3]}, labels: {key: y, dtype: int64}}", path,
                 gz ? "gzip" : "none");
        tfc_pipeline *p = open_tmp(yaml, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        for (int i = 0; i < 5; i++) {
            tfc_batch b;
            CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
            for (int k = 0; k < 6; k++)
                CU_ASSERT_EQUAL(((float *)b.features.data)[k], 0.25f * (float)(i * 6 + k) - 3.0f);
            CU_ASSERT_EQUAL(*(int64_t *)b.labels.data, i - 2); /* negative int64 survives */
        }
        tfc_pipeline_free(p);
        snprintf(yaml, sizeof yaml, "{type: tfrecord, files: %s, compression: %s, features: "
                 "{key: raw, dtype: uint8, shape: [-1]}}", path, gz ? "gzip" : "none");
        p = open_tmp(yaml, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        tfc_batch b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        CU_ASSERT_EQUAL(b.features.shape.dim[0], 3);
        CU_ASSERT_EQUAL(((uint8_t *)b.features.data)[1], 200);
        tfc_pipeline_free(p);
    }
}

/* Copies the TF-written fixture with a change: byte `at` set to `value`, or cut to `cut`
 * bytes when cut >= 0. */
static void write_variant(const char *name, long at, int value, long cut)
{
    char path[2200], *buf;
    size_t len;
    tfc_error err;
    tfc_error_clear(&err);
    snprintf(path, sizeof path, "%s/seq.tfrecord", refdir);
    CU_ASSERT_EQUAL_FATAL(tfc_file_read_all(path, 1 << 20, &buf, &len, &err), TFC_OK);
    if (at >= 0) buf[at] = (char)value;
    tfc_test_write(name, buf, cut >= 0 ? cut : (long)len);
    free(buf);
}

static void test_bad_records(void)
{
    set_refdir();
    /* seq.tfrecord's first record is 12 + 66 + 4 bytes, its length at byte 0 */
    write_variant("trunc.tfrecord", -1, 0, 100);
    write_variant("len.tfrecord", 0, 99, -1);
    write_variant("data.tfrecord", 20, 0x55, -1);
    tfc_error err;
    const char *tok = "features: {key: tokens, dtype: int32, shape: [-1]}";
    char yaml[512];
    snprintf(yaml, sizeof yaml, "{type: tfrecord, files: trunc.tfrecord, %s}", tok);
    CU_ASSERT_PTR_NULL(open_tmp(yaml, &err));
    CU_ASSERT_EQUAL(err.code, TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "trunc.tfrecord record 1 (byte 82): truncated record"));
    snprintf(yaml, sizeof yaml, "{type: tfrecord, files: trunc.tfrecord, on_error: skip, %s}", tok);
    tfc_pipeline *p = open_tmp(yaml, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), 1);
    CU_ASSERT_EQUAL(tfc_pipeline_skipped(p), 1);
    tfc_pipeline_free(p);
    snprintf(yaml, sizeof yaml, "{type: tfrecord, files: len.tfrecord, %s}", tok);
    CU_ASSERT_PTR_NULL(open_tmp(yaml, &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "len.tfrecord record 0 (byte 0): corrupted length"));
    /* a corrupted data byte: found when the record is read, named, or skipped */
    snprintf(yaml, sizeof yaml, "{type: tfrecord, files: data.tfrecord, %s}", tok);
    p = open_tmp(yaml, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    tfc_batch b;
    CU_ASSERT_EQUAL(tfc_pipeline_next(p, &b, &err), TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "data.tfrecord record 0: data CRC mismatch"));
    tfc_pipeline_free(p);
    snprintf(yaml, sizeof yaml, "{type: tfrecord, files: data.tfrecord, on_error: skip, %s}", tok);
    p = open_tmp(yaml, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    int n = 0;
    for (;; n++) {
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        if (b.end) break;
        if (n == 0) CU_ASSERT_EQUAL(b.features.shape.dim[0], 1); /* the second record: [8] */
    }
    CU_ASSERT_EQUAL(n, 7);
    CU_ASSERT_EQUAL(tfc_pipeline_skipped(p), 1);
    tfc_pipeline_free(p);
    /* a missing key, a shape its values do not fill, labels outside num_classes */
    static const struct { const char *yaml, *msg; } bad[] = {
        {"{type: tfrecord, files: seq.tfrecord, features: {key: nope, shape: [-1]}}",
         "seq.tfrecord record 0: no feature 'nope'"},
        {"{type: tfrecord, files: seq.tfrecord, features: {key: tokens, shape: [3]}}",
         "seq.tfrecord record 1: feature 'tokens' holds 1 values where its shape needs 3"},
        {"{type: tfrecord, files: seq.tfrecord, features: {key: tokens, shape: [-1, 2]}}",
         "seq.tfrecord record 0: feature 'tokens': its values do not fill the declared shape"},
        {"{type: tfrecord, files: seq.tfrecord, features: {key: tokens, dtype: float32, shape: "
         "[-1], encoded: none}, labels: {key: label}, num_classes: 2}",
         "seq.tfrecord record 4: label 2 outside [0, 2)"},
        {"{type: tfrecord, files: seq.tfrecord, features: {key: tokens, dtype: uint8, "
         "shape: [28, 28, 1], encoded: png}}",
         "seq.tfrecord record 0: feature 'tokens' must hold one encoded image"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        p = open_yaml(bad[k].yaml, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        tfc_status st;
        while (!(st = tfc_pipeline_next(p, &b, &err)) && !b.end) {}
        CU_ASSERT_EQUAL(st, TFC_ERR_DATA);
        if (!strstr(err.msg, bad[k].msg)) printf("\n  got: %s\n", err.msg);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, bad[k].msg));
        tfc_pipeline_free(p);
    }
    /* not a TFRecord file at all, and gzip bytes read as none */
    tfc_test_write("text.tfrecord", "hello, world: not records\n", -1);
    CU_ASSERT_PTR_NULL(open_tmp("{type: tfrecord, files: text.tfrecord, features: {key: a, "
                                "shape: []}}", &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not a TFRecord file, or compressed"));
    CU_ASSERT_PTR_NULL(open_yaml("{type: tfrecord, files: fashion8.tfrecord.gz, features: "
                                 "{key: a, shape: []}}", &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "fashion8.tfrecord.gz record 0 (byte 0)"));
    /* gzip reads an uncompressed file as it is (zlib's gzread passes it through) */
    p = open_yaml("{type: tfrecord, files: seq.tfrecord, compression: gzip, features: {key: "
                  "tokens, shape: [-1]}}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), 8);
    tfc_pipeline_free(p);
}

static void test_config_errors(void)
{
    set_refdir();
    static const struct { const char *yaml, *msg; } bad[] = {
        {"{type: tfrecord, files: seq.tfrecord, features: {key: t, shape: [-1, -1]}}",
         "data.train.source.features: shape: at most one dimension may be -1"},
        {"{type: tfrecord, files: seq.tfrecord, features: {key: t, shape: [28, 28], "
         "encoded: png}}", "an encoded image is uint8 of shape [height, width, channels]"},
        {"{type: tfrecord, files: seq.tfrecord, features: {key: t, shape: [1]}, labels: "
         "{key: t}}", "features and labels both read 't'"},
        {"{type: tfrecord, files: seq.tfrecord, features: {key: t}}",
         "data.train.source.features.shape"},
        {"{type: tfrecord, files: seq.tfrecord, features: {key: t, shape: [1], dtyp: int32}}",
         "data.train.source.features.dtyp"},
        {"{type: tfrecord, files: seq.tfrecord, compression: zlib, features: {key: t, "
         "shape: [1]}}", "data.train.source.compression"},
        {"{type: tfrecord, files: 'nothing*.tfrecord', features: {key: t, shape: [1]}}",
         "'nothing*.tfrecord' matches no files"},
        {"{type: tfrecord, files: seq.tfrecord, features: [t]}", "expected a mapping"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        tfc_error err;
        CU_ASSERT_PTR_NULL(open_yaml(bad[k].yaml, &err));
        CU_ASSERT_EQUAL(err.code, TFC_ERR_CONFIG);
        if (!strstr(err.text, bad[k].msg)) printf("\n  got: %s\n", err.text);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, bad[k].msg));
        CU_ASSERT(err.line >= 1);
    }
}

/* Shuffled and decoded in parallel, then saved after 5 elements and restored into a fresh
 * pipeline: the rest equals the uninterrupted run's. */
static void test_shuffle_resume(void)
{
    set_refdir();
    const char *src = "{type: tfrecord, files: fashion8.tfrecord, features: {key: image_png, "
                      "dtype: uint8, shape: [28, 28, 1], encoded: png}, labels: {key: label}}";
    const char *stages[] = {"shuffle: {buffer_size: 8}", "repeat: {count: 3}",
                            "map: {op: scale, factor: 0.5, num_parallel_calls: 2}",
                            "batch: {batch_size: 3}"};
    float ref[8][3 * 784], got[3 * 784];
    tfc_error err;
    tfc_pipeline *p = open_yaml(src, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    for (int s = 0; s < 4; s++) CU_ASSERT_EQUAL_FATAL(tfc_pipeline_add_yaml(p, stages[s], &err), TFC_OK);
    void *state = NULL;
    size_t slen = 0;
    for (int i = 0; i < 8; i++) {
        tfc_batch b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        CU_ASSERT_EQUAL_FATAL(b.features.shape.dim[0], 3);
        memcpy(ref[i], b.features.data, sizeof ref[i]);
        if (i == 4) CU_ASSERT_EQUAL_FATAL(tfc_pipeline_save_state(p, &state, &slen, &err), TFC_OK);
    }
    tfc_pipeline_free(p);
    p = open_yaml(src, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    for (int s = 0; s < 4; s++) CU_ASSERT_EQUAL_FATAL(tfc_pipeline_add_yaml(p, stages[s], &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_restore_state(p, state, slen, &err), TFC_OK);
    for (int i = 5; i < 8; i++) {
        tfc_batch b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        memcpy(got, b.features.data, sizeof got);
        CU_ASSERT_EQUAL(memcmp(got, ref[i], sizeof got), 0);
    }
    tfc_pipeline_free(p);
    free(state);
}

TFC_TEST_MAIN("data_tfrecord",
              {"tensorflow_written_images", test_tensorflow_written_images},
              {"variable_length", test_variable_length},
              {"writer_round_trip", test_writer_round_trip},
              {"bad_records", test_bad_records},
              {"config_errors", test_config_errors},
              {"shuffle_resume", test_shuffle_resume})
