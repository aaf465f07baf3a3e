/* The idx, npy and csv sources on fixtures this test writes: values, dtypes and shapes
 * (idx gzip and plain, big-endian types; npy of many dtypes, both byte orders, versions 1
 * and 2), and bad data (truncated files, Fortran order, object arrays, cells that are not
 * numbers, labels out of range) reported with the file and record, or skipped and counted. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data/data.h"
#include "testutil.h"

static tfc_data_options opts(void)
{
    tfc_data_options o = {.key = "data.train", .base_dir = tfc_test_tmpdir(), .seed = 1};
    return o;
}

static tfc_pipeline *open_yaml(const char *yaml, tfc_error *err)
{
    tfc_data_options o = opts();
    tfc_error_clear(err);
    return tfc_pipeline_from_yaml(yaml, &o, err);
}

/* IDX bytes: magic, dims (big-endian), data. */
static size_t idx_bytes(unsigned char *out, int type, int ndim, const int *dims,
                        const void *data, size_t dlen)
{
    size_t n = 0;
    out[n++] = 0;
    out[n++] = 0;
    out[n++] = (unsigned char)type;
    out[n++] = (unsigned char)ndim;
    for (int i = 0; i < ndim; i++) {
        out[n++] = (unsigned char)(dims[i] >> 24);
        out[n++] = (unsigned char)(dims[i] >> 16);
        out[n++] = (unsigned char)(dims[i] >> 8);
        out[n++] = (unsigned char)dims[i];
    }
    memcpy(out + n, data, dlen);
    return n + dlen;
}

static void write_gz(const char *name, const void *data, size_t len)
{
    gzFile g = gzopen(tfc_test_path(name), "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_EQUAL(gzwrite(g, data, (unsigned)len), (int)len);
    gzclose(g);
}

static void write_idx_fixtures(void)
{
    unsigned char img[5 * 3 * 4], lab[5] = {3, 1, 4, 1, 5}, buf[512];
    for (int i = 0; i < (int)sizeof img; i++) img[i] = (unsigned char)i;
    int di[3] = {5, 3, 4}, dl[1] = {5};
    size_t n = idx_bytes(buf, 0x08, 3, di, img, sizeof img);
    tfc_test_write("img.idx", buf, (long)n);
    write_gz("img.idx.gz", buf, n);
    tfc_test_write("img_trunc.idx", buf, (long)n - 20); /* records 0-2 complete */
    n = idx_bytes(buf, 0x08, 1, dl, lab, sizeof lab);
    tfc_test_write("lab.idx", buf, (long)n);
    write_gz("lab.idx.gz", buf, n);
}

static void test_idx_plain_and_gzip(void)
{
    write_idx_fixtures();
    const char *yamls[2] = {"{type: idx, images: img.idx, labels: lab.idx}",
                            "{type: idx, images: img.idx.gz, labels: lab.idx.gz}"};
    for (int k = 0; k < 2; k++) {
        tfc_error err;
        tfc_pipeline *p = open_yaml(yamls[k], &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        const tfc_element_spec *s = tfc_pipeline_element_spec(p);
        CU_ASSERT_EQUAL(s->comp[0].dtype, TFC_U8);
        CU_ASSERT_EQUAL(s->comp[0].shape.ndim, 3);
        CU_ASSERT_EQUAL(s->comp[0].shape.dim[0], 3);
        CU_ASSERT_EQUAL(s->comp[0].shape.dim[1], 4);
        CU_ASSERT_EQUAL(s->comp[0].shape.dim[2], 1);
        CU_ASSERT_EQUAL(s->comp[1].dtype, TFC_I32);
        CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), 5);
        tfc_batch b;
        for (int i = 0; i < 5; i++) {
            CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
            CU_ASSERT_EQUAL(((unsigned char *)b.features.data)[0], i * 12);
            CU_ASSERT_EQUAL(((unsigned char *)b.features.data)[11], i * 12 + 11);
        }
        CU_ASSERT_EQUAL(*(int32_t *)b.labels.data, 5);
        CU_ASSERT_EQUAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        CU_ASSERT(b.end);
        tfc_pipeline_free(p);
    }
}

static void test_idx_big_endian_types(void)
{
    int32_t v[3] = {1, -2, 70000};
    unsigned char be[12], buf[64];
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 4; k++) be[i * 4 + k] = (unsigned char)((uint32_t)v[i] >> (24 - 8 * k));
    int d[2] = {3, 1};
    size_t n = idx_bytes(buf, 0x0C, 2, d, be, sizeof be);
    tfc_tensor t;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_idx_parse(buf, n, "mem", &t, &err), TFC_OK);
    CU_ASSERT_EQUAL(t.dtype, TFC_I32);
    CU_ASSERT(memcmp(t.data, v, sizeof v) == 0);
    free(t.data);
    float f = 1.5f;
    uint32_t fb;
    memcpy(&fb, &f, 4);
    unsigned char fbe[4] = {(unsigned char)(fb >> 24), (unsigned char)(fb >> 16),
                            (unsigned char)(fb >> 8), (unsigned char)fb};
    int d1[1] = {1};
    n = idx_bytes(buf, 0x0D, 1, d1, fbe, 4);
    CU_ASSERT_EQUAL_FATAL(tfc_idx_parse(buf, n, "mem", &t, &err), TFC_OK);
    CU_ASSERT_EQUAL(*(float *)t.data, 1.5f);
    free(t.data);
    /* Bad magic, unknown type, a header announcing more than the file holds. */
    buf[0] = 1;
    CU_ASSERT_EQUAL(tfc_idx_parse(buf, n, "mem", &t, &err), TFC_ERR_DATA);
    int huge[3] = {0x7fffffff, 0x7fffffff, 0x7fffffff};
    n = idx_bytes(buf, 0x08, 3, huge, "", 0);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_idx_parse(buf, n, "mem", &t, &err), TFC_ERR_DATA);
    n = idx_bytes(buf, 0x42, 1, d1, "abcd", 4);
    CU_ASSERT_EQUAL(tfc_idx_parse(buf, n, "mem", &t, &err), TFC_ERR_DATA);
}

static void test_idx_bad_data(void)
{
    write_idx_fixtures();
    tfc_error err;
    tfc_pipeline *p = open_yaml("{type: idx, images: img_trunc.idx, labels: lab.idx}", &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_EQUAL(err.code, TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "img_trunc.idx"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "truncated"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "record 3"));
    p = open_yaml("{type: idx, images: img_trunc.idx, labels: lab.idx, on_error: skip}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), 3);
    CU_ASSERT_EQUAL(tfc_pipeline_skipped(p), 2);
    tfc_pipeline_free(p);
    p = open_yaml("{type: idx, images: img.idx, labels: lab.idx, num_classes: 5}", &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "lab.idx record 4: label 5 is out of range [0, 5)"));
    p = open_yaml("{type: idx, images: img.idx, labels: lab.idx, num_classes: 5, "
                  "on_error: skip}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), 4);
    CU_ASSERT_EQUAL(tfc_pipeline_skipped(p), 1);
    tfc_pipeline_free(p);
    p = open_yaml("{type: idx, images: missing.idx}", &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_EQUAL(err.code, TFC_ERR_USAGE); /* a named file that is not there: exit 2 */
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "missing.idx"));
}

static void test_npy_dtypes_round_trip(void)
{
    for (int dt = 0; dt < TFC_DTYPE_COUNT; dt++) {
        if (dt == TFC_BF16) continue;
        size_t es = tfc_dtype_size((tfc_dtype)dt);
        unsigned char data[6 * 8];
        for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)(i * 7 % 2);
        tfc_tensor t = {(tfc_dtype)dt, {.ndim = 2, .dim = {3, 2}}, data, -1};
        tfc_error err;
        tfc_error_clear(&err);
        const char *path = tfc_test_path("rt.npy");
        CU_ASSERT_EQUAL_FATAL(tfc_npy_write(path, &t, &err), TFC_OK);
        tfc_tensor r;
        CU_ASSERT_EQUAL_FATAL(tfc_npy_read(path, &r, &err), TFC_OK);
        CU_ASSERT_EQUAL((int)r.dtype, dt);
        CU_ASSERT(tfc_shape_equal(&r.shape, &t.shape));
        CU_ASSERT(memcmp(r.data, data, 6 * es) == 0);
        free(r.data);
    }
    /* Through the source: features (3, 2) float32 give elements of shape (2,). */
    float f[6] = {1, 2, 3, 4, 5, 6};
    int64_t l[3] = {0, 1, 2};
    tfc_tensor tf = {TFC_F32, {.ndim = 2, .dim = {3, 2}}, f, -1};
    tfc_tensor tl = {TFC_I64, {.ndim = 1, .dim = {3}}, l, -1};
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("f.npy"), &tf, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("l.npy"), &tl, &err), TFC_OK);
    tfc_pipeline *p = open_yaml("{type: npy, features: f.npy, labels: l.npy}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    tfc_batch b;
    CU_ASSERT_EQUAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(b.features.shape.ndim, 1);
    CU_ASSERT_EQUAL(((float *)b.features.data)[1], 4);
    CU_ASSERT_EQUAL(b.labels.dtype, TFC_I64);
    CU_ASSERT_EQUAL(*(int64_t *)b.labels.data, 1);
    tfc_pipeline_free(p);
}

/* A hand-made .npy: header text padded to 64, then data. */
static size_t npy_bytes(unsigned char *out, int major, const char *dict, const void *data,
                        size_t dlen)
{
    size_t pre = major == 1 ? 10 : 12, hl = strlen(dict) + 1;
    size_t total = (pre + hl + 63) / 64 * 64;
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (unsigned char)major;
    out[7] = 0;
    size_t h = total - pre;
    out[8] = (unsigned char)h;
    out[9] = (unsigned char)(h >> 8);
    if (major != 1) out[10] = out[11] = 0;
    memset(out + pre, ' ', h);
    memcpy(out + pre, dict, strlen(dict));
    out[total - 1] = '\n';
    memcpy(out + total, data, dlen);
    return total + dlen;
}

static void test_npy_headers(void)
{
    unsigned char buf[512];
    tfc_tensor t;
    tfc_error err;
    unsigned char be[16] = {0, 0, 1, 0, 0xff, 0xff, 0xff, 0xfe}; /* 256, -2 big-endian */
    size_t n = npy_bytes(buf, 2, "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", be, 8);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_parse(buf, n, "be.npy", &t, &err), TFC_OK);
    CU_ASSERT_EQUAL(((int32_t *)t.data)[0], 256);
    CU_ASSERT_EQUAL(((int32_t *)t.data)[1], -2);
    free(t.data);
    n = npy_bytes(buf, 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", be, 16);
    CU_ASSERT_EQUAL(tfc_npy_parse(buf, n, "fo.npy", &t, &err), TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "Fortran"));
    tfc_error_clear(&err);
    n = npy_bytes(buf, 1, "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", be, 8);
    CU_ASSERT_EQUAL(tfc_npy_parse(buf, n, "obj.npy", &t, &err), TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "object arrays"));
    tfc_error_clear(&err);
    n = npy_bytes(buf, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", be, 8);
    CU_ASSERT_EQUAL(tfc_npy_parse(buf, n, "short.npy", &t, &err), TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "truncated"));
    tfc_error_clear(&err);
    n = npy_bytes(buf, 1, "{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,), }",
                  be, 4);
    CU_ASSERT_EQUAL(tfc_npy_parse(buf, n, "rec.npy", &t, &err), TFC_ERR_DATA);
    n = npy_bytes(buf, 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (), }", "\x00\x3c", 2);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_parse(buf, n, "half.npy", &t, &err), TFC_OK);
    CU_ASSERT_EQUAL(t.dtype, TFC_F16);
    CU_ASSERT_EQUAL(t.shape.ndim, 0);
    free(t.data);
    CU_ASSERT_EQUAL(tfc_npy_parse("\x93NUMPY", 6, "x.npy", &t, &err), TFC_ERR_DATA);
    /* A scalar cannot be sliced into records. */
    tfc_test_write("scalar.npy", buf, (long)n);
    tfc_pipeline *p = open_yaml("{type: npy, features: scalar.npy}", &err);
    CU_ASSERT_PTR_NULL(p);
}

static void test_csv(void)
{
    tfc_test_write("a.csv", "x,y,\"z, quoted\",label\n1,2,3,0\n4.5, 5 ,6,1\n\n7,8,9,2\n", -1);
    tfc_error err;
    tfc_pipeline *p = open_yaml("{type: csv, file: a.csv, label_column: label}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const tfc_element_spec *s = tfc_pipeline_element_spec(p);
    CU_ASSERT_EQUAL(s->comp[0].dtype, TFC_F32);
    CU_ASSERT_EQUAL(s->comp[0].shape.dim[0], 3);
    CU_ASSERT_EQUAL(s->comp[1].dtype, TFC_I32);
    tfc_batch b;
    CU_ASSERT_EQUAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(((float *)b.features.data)[0], 4.5f);
    CU_ASSERT_EQUAL(((float *)b.features.data)[1], 5.0f);
    CU_ASSERT_EQUAL(*(int32_t *)b.labels.data, 1);
    tfc_pipeline_free(p);
    p = open_yaml("{type: csv, file: a.csv, label_column: -1, feature_columns: [\"z, quoted\", 0]}",
                  &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(b.features.shape.dim[0], 2);
    CU_ASSERT_EQUAL(((float *)b.features.data)[0], 3.0f);
    CU_ASSERT_EQUAL(((float *)b.features.data)[1], 1.0f);
    tfc_pipeline_free(p);
    /* An unknown column name is a config error with a suggestion. */
    p = open_yaml("{type: csv, file: a.csv, label_column: lable}", &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_EQUAL(err.code, TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "did you mean 'label'"));
    /* Bad cells are errors at FILE:LINE:COL, or skipped rows. */
    tfc_test_write("bad.csv", "1,2,0\n3,abc,1\n5,6,7\n7,8,1\n", -1);
    p = open_yaml("{type: csv, file: bad.csv, header: false, label_column: 2}", &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_EQUAL(err.code, TFC_ERR_DATA);
    CU_ASSERT_EQUAL(err.line, 2);
    CU_ASSERT_EQUAL(err.col, 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.file, "bad.csv"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not a number: \"abc\""));
    p = open_yaml("{type: csv, file: bad.csv, header: false, label_column: 2, num_classes: 3, "
                  "on_error: skip}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), 2);
    CU_ASSERT_EQUAL(tfc_pipeline_skipped(p), 2);
    tfc_pipeline_free(p);
    p = open_yaml("{type: csv, file: bad.csv, header: false, label_column: 2, num_classes: 3}",
                  &err);
    CU_ASSERT_PTR_NULL(p);
    tfc_test_write("ragged.csv", "1,2\n3\n", -1);
    p = open_yaml("{type: csv, file: ragged.csv, header: false}", &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_EQUAL(err.line, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "a row of 1 cells, expected 2"));
}

/* String labels are class names: their sorted distinct values, or their place in
 * `classes:`; a label not in that list is an error at its cell (or a skipped row). */
static void test_csv_string_labels(void)
{
    tfc_test_write("iris.csv", "sepal,petal,species\n5.1,1.4,setosa\n7.0,4.7,versicolor\n"
                   "6.3,6.0,virginica\n4.9,1.4,\"setosa\"\n", -1);
    tfc_error err;
    tfc_pipeline *p = open_yaml("{type: csv, file: iris.csv, label_column: species, "
                                "label_dtype: string}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    int n;
    const char *const *names = tfc_pipeline_class_names(p, &n);
    CU_ASSERT_EQUAL_FATAL(n, 3);
    CU_ASSERT_STRING_EQUAL(names[0], "setosa");
    CU_ASSERT_STRING_EQUAL(names[2], "virginica");
    int want[] = {0, 1, 2, 0};
    for (int i = 0; i < 4; i++) {
        tfc_batch b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        CU_ASSERT_EQUAL(b.labels.dtype, TFC_I32);
        CU_ASSERT_EQUAL(*(int32_t *)b.labels.data, want[i]);
    }
    tfc_pipeline_free(p);
    /* `classes:` orders them (and names them in the weights). */
    p = open_yaml("{type: csv, file: iris.csv, label_column: species, label_dtype: string, "
                  "classes: [virginica, versicolor, setosa]}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    names = tfc_pipeline_class_names(p, &n);
    CU_ASSERT_EQUAL_FATAL(n, 3);
    CU_ASSERT_STRING_EQUAL(names[0], "virginica");
    tfc_batch b;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(*(int32_t *)b.labels.data, 2);
    tfc_pipeline_free(p);
    p = open_yaml("{type: csv, file: iris.csv, label_column: species, label_dtype: string, "
                  "classes: [setosa, versicolor]}", &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_EQUAL(err.line, 4);
    CU_ASSERT_EQUAL(err.col, 9);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "\"virginica\" is not one of `classes:`"));
    p = open_yaml("{type: csv, file: iris.csv, label_column: species, label_dtype: string, "
                  "classes: [setosa, versicolor], on_error: skip}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), 3);
    tfc_pipeline_free(p);
    p = open_yaml("{type: csv, file: iris.csv, label_column: species, label_dtype: string, "
                  "classes: [setosa, setosa, virginica]}", &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "named twice"));
    /* More distinct names than the model's classes. */
    p = open_yaml("{type: csv, file: iris.csv, label_column: species, label_dtype: string, "
                  "num_classes: 2}", &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "3 distinct labels"));
    /* A class name where a number is expected points to label_dtype: string. */
    p = open_yaml("{type: csv, file: iris.csv, label_column: species}", &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "label_dtype: string"));
    /* `classes:` still names integer labels. */
    tfc_test_write("ints.csv", "x,y\n1,0\n2,1\n", -1);
    p = open_yaml("{type: csv, file: ints.csv, label_column: y, classes: [no, yes]}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    names = tfc_pipeline_class_names(p, &n);
    CU_ASSERT(n == 2 && !strcmp(names[1], "yes"));
    tfc_pipeline_free(p);
}

/* A text column: each record's features are its cell's text (quoted cells may hold commas
 * and newlines), for tokenize or text_vectorization. */
static void test_csv_text(void)
{
    tfc_test_write("sms.csv", "label,message\nham,Ok lar... Joking wif u oni\n"
                   "spam,\"WINNER!! Claim your prize, call now\nT&C apply\"\nham,\n", -1);
    tfc_error err;
    tfc_pipeline *p = open_yaml("{type: csv, file: sms.csv, text_column: message, "
                                "label_column: label, label_dtype: string}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const tfc_element_spec *s = tfc_pipeline_element_spec(p);
    CU_ASSERT_EQUAL(s->comp[0].dtype, TFC_U8);
    CU_ASSERT_EQUAL(s->comp[0].shape.ndim, 1);
    const char *want[] = {"Ok lar... Joking wif u oni", "WINNER!! Claim your prize, call now\n"
                          "T&C apply", ""};
    int labels[] = {0, 1, 0};
    for (int i = 0; i < 3; i++) {
        tfc_batch b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        CU_ASSERT_EQUAL(b.features.shape.dim[0], (int64_t)strlen(want[i]));
        CU_ASSERT(!memcmp(b.features.data, want[i], strlen(want[i])));
        CU_ASSERT_EQUAL(*(int32_t *)b.labels.data, labels[i]);
    }
    tfc_pipeline_free(p);
    /* Tokenized straight away by the text_vectorization op. */
    p = open_yaml("{type: csv, file: sms.csv, text_column: 1, label_column: 0, "
                  "label_dtype: string}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, "map: {op: text_vectorization, "
                                          "output_sequence_length: 4}", &err), TFC_OK);
    tfc_batch b;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(b.features.dtype, TFC_I32);
    CU_ASSERT_EQUAL(b.features.shape.dim[0], 4);
    tfc_pipeline_free(p);
    p = open_yaml("{type: csv, file: sms.csv, text_column: message, feature_columns: [0]}", &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not both"));
    p = open_yaml("{type: csv, file: sms.csv, text_column: mesage}", &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "did you mean 'message'"));
    p = open_yaml("{type: csv, file: sms.csv, text_column: label, label_column: label}", &err);
    CU_ASSERT_PTR_NULL(p);
}

/* Feature columns of names as Keras's StringLookup(vocabulary, output_mode="one_hot"): [UNK]
 * first, then the terms, expanded in the column's place among the features. */
static void test_csv_string_lookup(void)
{
    tfc_test_write("titanic.csv", "survived,pclass,sex,fare,embarked\n0,3,male,7.25,S\n"
                   "1,1,female,71.28,C\n1,3,female,7.92,\n0,2,Male,13,Q\n", -1);
    tfc_error err;
    tfc_pipeline *p = open_yaml("{type: csv, file: titanic.csv, label_column: survived, "
                                "string_lookup: {sex: [male, female], embarked: [S, C, Q]}}",
                                &err);
    if (!p) printf("\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_element_spec(p)->comp[0].shape.dim[0], 1 + 3 + 1 + 4);
    /* pclass, [UNK] male female, fare, [UNK] S C Q */
    const float want[4][9] = {{3, 0, 1, 0, 7.25f, 0, 1, 0, 0},
                              {1, 0, 0, 1, 71.28f, 0, 0, 1, 0},
                              {3, 0, 0, 1, 7.92f, 1, 0, 0, 0},
                              {2, 1, 0, 0, 13, 0, 0, 0, 1}};
    for (int r = 0; r < 4; r++) {
        tfc_batch b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        CU_ASSERT_EQUAL_FATAL(b.features.shape.dim[0], 9);
        CU_ASSERT(!memcmp(b.features.data, want[r], sizeof want[r]));
    }
    tfc_pipeline_free(p);
    /* Keras's [UNK] leading the vocabulary is its own first slot, not a second one. */
    p = open_yaml("{type: csv, file: titanic.csv, label_column: 0, feature_columns: [sex], "
                  "string_lookup: {sex: [\"[UNK]\", male, female]}}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_element_spec(p)->comp[0].shape.dim[0], 3);
    tfc_pipeline_free(p);
    const char *bad[][2] = {
        {"{type: csv, file: titanic.csv, label_column: 0, string_lookup: {sex: [m, m]}}",
         "twice"},
        {"{type: csv, file: titanic.csv, label_column: 0, string_lookup: {sex: []}}",
         "non-empty list"},
        {"{type: csv, file: titanic.csv, label_column: 0, string_lookup: {sx: [m]}}",
         "did you mean 'sex'"},
        {"{type: csv, file: titanic.csv, label_column: 0, feature_columns: [fare], "
         "string_lookup: {sex: [m]}}", "not a feature column"},
        {"{type: csv, file: titanic.csv, label_column: 0, string_lookup: [sex]}", "mapping"},
        {"{type: csv, file: titanic.csv, label_column: 0}", "a column of names: string_lookup"},
    };
    for (int k = 0; k < 6; k++) {
        p = open_yaml(bad[k][0], &err);
        CU_ASSERT_PTR_NULL(p);
        tfc_pipeline_free(p);
        if (!strstr(err.text, bad[k][1])) printf("\n%s: %s", bad[k][0], err.text);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, bad[k][1]));
    }
}

TFC_TEST_MAIN("data_sources",
              {"idx_plain_and_gzip", test_idx_plain_and_gzip},
              {"idx_big_endian_types", test_idx_big_endian_types},
              {"idx_bad_data", test_idx_bad_data},
              {"npy_dtypes_round_trip", test_npy_dtypes_round_trip},
              {"npy_headers", test_npy_headers},
              {"csv", test_csv}, {"csv_string_labels", test_csv_string_labels},
              {"csv_text", test_csv_text}, {"csv_string_lookup", test_csv_string_lookup})
