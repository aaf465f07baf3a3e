/* `timeseries:` on the csv and npy sources: the windows and targets are Keras's
 * timeseries_dataset_from_array's (tests/ref/timeseries/cases.safetensors, written by
 * tests/ref/keras_timeseries.py), bit for bit; windows are records a shuffle, a cache and a
 * saved state handle by index; mistakes are configuration errors at FILE:LINE:COL; and an
 * LSTM learns to predict a noisy sine five steps ahead from windows of it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "data/data.h"
#include "solver/solver.h"
#include "kerasref.h"
#include "testutil.h"

static tfc_doc *doc; /* the last split_of's document */

static size_t nbytes(const tfc_tensor *t)
{
    return (size_t)tfc_shape_numel(&t->shape) * tfc_dtype_size(t->dtype);
}

static void free_doc(void)
{
    tfc_doc_free(doc);
    doc = NULL;
}

/* Loads `yaml` as solver.yaml in the scratch folder; returns data.<split>. */
static const tfc_node *split_of(const char *yaml, const char *split)
{
    tfc_error err;
    tfc_error_clear(&err);
    static int registered;
    if (!registered++) atexit(free_doc);
    tfc_doc_free(doc);
    doc = tfc_doc_load_file(tfc_test_write("solver.yaml", yaml, -1), &err);
    if (!doc) printf("%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    const tfc_node *data = tfc_node_get(tfc_doc_root(doc), "data");
    CU_ASSERT_PTR_NOT_NULL_FATAL(data);
    return tfc_node_get(data, split);
}

/* The train split of a solver whose data.train.source is `source` and pipeline `pipeline`. */
static tfc_pipeline *open_split(const char *source, const char *pipeline, tfc_error *err)
{
    char yaml[2048];
    snprintf(yaml, sizeof yaml, "data:\n  train:\n    source: %s\n    pipeline: %s\n", source,
             pipeline ? pipeline : "[]");
    tfc_data_options o = {.key = "data.train", .base_dir = tfc_test_tmpdir(), .seed = 1};
    tfc_error_clear(err);
    return tfc_pipeline_from_config(split_of(yaml, "train"), &o, err);
}

/* The fixture's table as ts.csv (columns a, b, c, y, cls, values written so that they read
 * back as the same float32) and as .npy files. */
static void write_table(const tfc_st_file *f)
{
    const tfc_st_tensor *t = tfc_st_find(f, "table"), *y = tfc_st_find(f, "y"),
                        *c = tfc_st_find(f, "cls");
    CU_ASSERT_FATAL(t && y && c && t->dtype == TFC_F32 && c->dtype == TFC_I32);
    int64_t n = t->shape.dim[0];
    float *tv = malloc((size_t)t->nbytes), *yv = malloc((size_t)y->nbytes);
    int32_t *cv = malloc((size_t)c->nbytes);
    memcpy(tv, t->data, t->nbytes);
    memcpy(yv, y->data, y->nbytes);
    memcpy(cv, c->data, c->nbytes);
    size_t cap = (size_t)n * 100 + 64, len = 0;
    char *csv = malloc(cap);
    len += (size_t)snprintf(csv, cap, "a,b,c,y,cls\n");
    for (int64_t i = 0; i < n; i++)
        len += (size_t)snprintf(csv + len, cap - len, "%.9g,%.9g,%.9g,%.9g,%d\n", tv[i * 3],
                                tv[i * 3 + 1], tv[i * 3 + 2], yv[i], cv[i]);
    tfc_test_write("ts.csv", csv, (long)len);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_tensor tt = {TFC_F32, t->shape, tv, -1}, ty = {TFC_F32, y->shape, yv, -1};
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("table.npy"), &tt, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("y.npy"), &ty, &err), TFC_OK);
    float *col = malloc((size_t)n * sizeof *col), *vec = malloc((size_t)n * 2 * sizeof *vec);
    for (int64_t i = 0; i < n; i++) {
        col[i] = tv[i * 3];
        vec[2 * i] = yv[i];
        vec[2 * i + 1] = 2 * yv[i];
    }
    tfc_tensor tc = {TFC_F32, {.ndim = 1, .dim = {n}}, col, -1};
    tfc_tensor tv2 = {TFC_F32, {.ndim = 2, .dim = {n, 2}}, vec, -1};
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("col.npy"), &tc, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("yvec.npy"), &tv2, &err), TFC_OK);
    free(tv);
    free(yv);
    free(cv);
    free(csv);
    free(col);
    free(vec);
}

/* The source mapping of a fixture case. */
static void case_source(const char *kind, const char *ts, char *out, size_t size)
{
    if (!strcmp(kind, "csv"))
        snprintf(out, size, "{type: csv, file: ts.csv, feature_columns: [a, b, c], label_column: "
                 "y, label_dtype: float32, timeseries: %s}", ts);
    else if (!strcmp(kind, "csv_int"))
        snprintf(out, size, "{type: csv, file: ts.csv, feature_columns: [a, b, c], label_column: "
                 "cls, num_classes: 4, timeseries: %s}", ts);
    else if (!strcmp(kind, "csv_none"))
        snprintf(out, size, "{type: csv, file: ts.csv, feature_columns: [a, b, c], timeseries: "
                 "%s}", ts);
    else if (!strcmp(kind, "npy"))
        snprintf(out, size, "{type: npy, features: table.npy, labels: y.npy, timeseries: %s}",
                 ts);
    else if (!strcmp(kind, "npy_vec"))
        snprintf(out, size, "{type: npy, features: table.npy, labels: yvec.npy, timeseries: "
                 "%s}", ts);
    else if (!strcmp(kind, "npy_1d"))
        snprintf(out, size, "{type: npy, features: col.npy, labels: y.npy, timeseries: %s}", ts);
    else
        CU_FAIL_FATAL("unknown fixture source");
}

/* Every case: the element spec, the count and each window and target equal Keras's. */
static void test_keras_parity(void)
{
    tfc_st_file *f = tfc_test_fixture("timeseries", "cases");
    write_table(f);
    const char *cases = tfc_st_meta(f, "cases");
    CU_ASSERT_PTR_NOT_NULL_FATAL(cases);
    char *list = strdup(cases), *save = NULL;
    int ncases = 0;
    for (char *line = strtok_r(list, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[64], kind[32], ts[256], source[512], key[80];
        CU_ASSERT_FATAL(sscanf(line, "%63[^|]|%31[^|]|%255[^\n]", name, kind, ts) == 3);
        case_source(kind, ts, source, sizeof source);
        snprintf(key, sizeof key, "x_%s", name);
        const tfc_st_tensor *x = tfc_st_find(f, key);
        snprintf(key, sizeof key, "y_%s", name);
        const tfc_st_tensor *y = tfc_st_find(f, key);
        CU_ASSERT_PTR_NOT_NULL_FATAL(x);
        tfc_error err;
        tfc_pipeline *p = open_split(source, NULL, &err);
        if (!p) printf("\n%s: %s", name, err.text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        const tfc_element_spec *s = tfc_pipeline_element_spec(p);
        int64_t n = x->shape.dim[0];
        CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), n);
        CU_ASSERT_EQUAL(s->comp[0].shape.ndim, x->shape.ndim - 1);
        for (int d = 1; d < x->shape.ndim; d++)
            CU_ASSERT_EQUAL(s->comp[0].shape.dim[d - 1], x->shape.dim[d]);
        CU_ASSERT_EQUAL(s->comp[1].present, y != NULL);
        if (y) {
            CU_ASSERT_EQUAL(s->comp[1].dtype, y->dtype);
            CU_ASSERT_EQUAL(s->comp[1].shape.ndim, y->shape.ndim - 1);
        }
        size_t xb = x->nbytes / (size_t)n, yb = y ? y->nbytes / (size_t)n : 0;
        int64_t got = 0, bad = 0;
        double worst = 0;
        for (;;) {
            tfc_batch b;
            CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
            if (b.end) break;
            if (got >= n) {
                got++;
                continue;
            }
            CU_ASSERT_EQUAL_FATAL(nbytes(&b.features), xb);
            const float *want = (const float *)((const char *)x->data + got * (int64_t)xb);
            const float *have = b.features.data;
            for (size_t k = 0; k < xb / 4; k++) {
                float w;
                memcpy(&w, want + k, 4);
                if (fabs((double)have[k] - w) > worst) worst = fabs((double)have[k] - w);
            }
            bad += memcmp(have, want, xb) != 0;
            if (y) {
                CU_ASSERT_EQUAL_FATAL(nbytes(&b.labels), yb);
                bad += memcmp(b.labels.data, (const char *)y->data + got * (int64_t)yb, yb) != 0;
            } else {
                CU_ASSERT_PTR_NULL(b.labels.data);
            }
            got++;
        }
        printf("\n  %-12s %3lld windows, %lld differ, max |diff| %g", name, (long long)got,
               (long long)bad, worst);
        CU_ASSERT_EQUAL(got, n);
        CU_ASSERT_EQUAL(bad, 0);
        tfc_pipeline_free(p);
        ncases++;
    }
    CU_ASSERT(ncases >= 10);
    free(list);
    tfc_st_close(f);
}

/* A series whose row r holds r (features [r, -r], target 1000 + r): shuffled, cached,
 * repeated and batched, each pass of windows holds every window once (record i's values tell
 * which); the position saved mid-pass resumes to the same batches. */
static void test_random_access(void)
{
    char csv[4096];
    size_t len = (size_t)snprintf(csv, sizeof csv, "p,q,t\n");
    for (int r = 0; r < 60; r++)
        len += (size_t)snprintf(csv + len, sizeof csv - len, "%d,%d,%d\n", r, -r, 1000 + r);
    tfc_test_write("rows.csv", csv, (long)len);
    const char *src = "{type: csv, file: rows.csv, feature_columns: [p, q], label_column: t, "
                      "label_dtype: float32, timeseries: {sequence_length: 4, sampling_rate: 2, "
                      "sequence_stride: 3, start_index: 2, target_offset: 9}}";
    const char *pipe = "[{shuffle: {buffer_size: 8}}, {cache: {}}, {repeat: {}}, "
                       "{batch: {batch_size: 5}}]";
    tfc_error err;
    tfc_pipeline *p = open_split(src, pipe, &err);
    if (!p) printf("\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    /* windows start at 2, 5, ..., while r + 6 < 60 and r + 9 < 60: 17 of them */
    enum { W = 17 };
    int seen[2][W] = {{0}}, order_differs = 0;
    float saved[6][5 * 8];
    void *state = NULL;
    size_t slen = 0;
    for (int k = 0; k < 2 * W / 5 * 2; k++) { /* 12 batches of 5: beyond two passes */
        tfc_batch b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        CU_ASSERT_FATAL(!b.end && b.features.shape.dim[0] == 5 && b.features.shape.dim[1] == 4);
        const float *x = b.features.data, *t = b.labels.data;
        for (int i = 0; i < 5; i++) {
            int r = (int)x[i * 8], w = (r - 2) / 3, at = k * 5 + i;
            CU_ASSERT_FATAL(r >= 2 && (r - 2) % 3 == 0 && w < W);
            for (int s = 0; s < 4; s++) {
                CU_ASSERT_EQUAL(x[i * 8 + 2 * s], r + 2 * s);
                CU_ASSERT_EQUAL(x[i * 8 + 2 * s + 1], -(r + 2 * s));
            }
            CU_ASSERT_EQUAL(t[i], 1000 + r + 9);
            if (at < 2 * W) seen[at / W][w]++;
            order_differs |= at < W && w != at;
        }
        if (k == 3) CU_ASSERT_EQUAL(tfc_pipeline_save_state(p, &state, &slen, &err), TFC_OK);
        if (k >= 4 && k < 10) memcpy(saved[k - 4], x, sizeof saved[0]);
    }
    for (int e = 0; e < 2; e++)
        for (int w = 0; w < W; w++) CU_ASSERT_EQUAL(seen[e][w], 1);
    CU_ASSERT(order_differs); /* shuffled */
    tfc_pipeline_free(p);
    p = open_split(src, pipe, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_restore_state(p, state, slen, &err), TFC_OK);
    for (int k = 4; k < 10; k++) {
        tfc_batch b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        CU_ASSERT(memcmp(b.features.data, saved[k - 4], sizeof saved[0]) == 0);
    }
    free(state);
    tfc_pipeline_free(p);
}

/* A source that does not open: the error's code, message, key (NULL: not checked) and, for
 * a configuration error, its place: solver.yaml line 3, the column where `at` (NULL: the
 * source mapping) starts in `source` (which starts at column 13). */
static void expect_error(const char *source, tfc_status code, const char *at, const char *key,
                         const char *want)
{
    tfc_error err;
    tfc_pipeline *p = open_split(source, NULL, &err);
    CU_ASSERT_PTR_NULL(p);
    tfc_pipeline_free(p);
    int col = at ? 13 + (int)(strstr(source, at) - source) : 13;
    int ok = err.code == code && (!key || !strcmp(err.key, key)) && strstr(err.text, want);
    if (code == TFC_ERR_CONFIG)
        ok &= err.line == 3 && err.col == col && strstr(err.file, "solver.yaml") != NULL;
    if (!ok)
        printf("\nsource %s:\n  got code %d at %d:%d key %s: %s  want %d at 3:%d %s: %s",
               source, err.code, err.line, err.col, err.key, err.text, code, col,
               key ? key : "", want);
    CU_ASSERT(ok);
}

/* Keras's argument checks and the ones that need the table's length are configuration errors
 * at the key's value; Keras's batch_size, shuffle, seed and targets point to what tfc has
 * instead. */
static void test_config_errors(void)
{
    tfc_test_write("small.csv", "a,y\n1,1\n2,2\n3,3\n4,4\n5,5\n6,6\n", -1);
#define CSV "{type: csv, file: small.csv, feature_columns: [a], label_column: y, " \
            "label_dtype: float32, timeseries: "
#define K "data.train.source.timeseries."
    expect_error(CSV "{sequence_length: 7}}", TFC_ERR_CONFIG, "7}", K "sequence_length",
                 "are only 6");
    expect_error(CSV "{sequence_length: 3, sampling_rate: 3}}", TFC_ERR_CONFIG, "3, ",
                 K "sequence_length", "spans 7 rows");
    expect_error(CSV "{sequence_length: 2, start_index: 6}}", TFC_ERR_CONFIG, "6}",
                 K "start_index", "not below the table's 6 rows");
    expect_error(CSV "{sequence_length: 2, end_index: 6}}", TFC_ERR_CONFIG, "6}", K "end_index",
                 "leave it out");
    expect_error(CSV "{sequence_length: 2, start_index: 3, end_index: 3}}", TFC_ERR_CONFIG,
                 "3}", K "end_index", "must be above start_index 3");
    expect_error(CSV "{sequence_length: 2, start_index: 1, target_offset: 5}}", TFC_ERR_CONFIG,
                 "5}", K "target_offset", "no window has a target");
    expect_error(CSV "{sequence_length: 2, target_offset: 6}}", TFC_ERR_CONFIG, "6}",
                 K "target_offset", "not below the labels' 6 rows");
    expect_error(CSV "{sequence_length: 2, sequence_stride: 6}}", TFC_ERR_CONFIG, "6}",
                 K "sequence_stride", "not below");
    expect_error(CSV "{sequence_length: 0}}", TFC_ERR_CONFIG, "0}", K "sequence_length",
                 "expected an integer in [1,");
    expect_error(CSV "{sequence_lenght: 3}}", TFC_ERR_CONFIG, "sequence_lenght", NULL,
                 "did you mean 'sequence_length'");
    expect_error(CSV "{sequence_length: 3, batch_size: 128}}", TFC_ERR_CONFIG, "128",
                 K "batch_size", "add `- batch: {batch_size: 128}` to `pipeline:`");
    expect_error(CSV "{sequence_length: 3, shuffle: true}}", TFC_ERR_CONFIG, "true", K "shuffle",
                 "`- shuffle: {buffer_size: N}`");
    expect_error(CSV "{sequence_length: 3, seed: 4}}", TFC_ERR_CONFIG, "4}", K "seed",
                 "solver's `seed`");
    expect_error(CSV "{sequence_length: 3, targets: t}}", TFC_ERR_CONFIG, "t}", K "targets",
                 "target_offset: d");
    expect_error(CSV "[3]}", TFC_ERR_CONFIG, "[3]", "data.train.source.timeseries",
                 "expected a mapping");
    expect_error(CSV "{sequence_length: 3}, on_error: skip}", TFC_ERR_CONFIG, "{sequence_length",
                 "data.train.source.timeseries", "on_error: skip would join");
#undef CSV
    expect_error("{type: csv, file: small.csv, timeseries: {sequence_length: 2, target_offset: "
                 "1}}", TFC_ERR_CONFIG, "1}", K "target_offset", "give label_column");
    expect_error("{type: csv, file: small.csv, text_column: a, timeseries: {sequence_length: 2}}",
                 TFC_ERR_CONFIG, "{sequence_length", "data.train.source.timeseries",
                 "not text_column");
    expect_error("{type: npy, features: f.npy, timeseries: {sequence_length: 2, "
                 "target_offset: 1}}", TFC_ERR_CONFIG, "1}", K "target_offset", "give `labels:`");
    expect_error("{type: npy, features: f.npy, labels: l.npy, on_error: skip, timeseries: "
                 "{sequence_length: 2}}", TFC_ERR_CONFIG, "skip", "data.train.source.on_error",
                 "on_error: skip would leave out");
#undef K
    /* a label that is not a class index says how to read regression targets */
    tfc_test_write("seq.csv", "a,y\n1,0.5\n2,1\n", -1);
    expect_error("{type: csv, file: seq.csv, label_column: y, timeseries: {sequence_length: 1}}",
                 TFC_ERR_DATA, NULL, NULL, "label_dtype: float32");
    /* class labels out of range name the record (the target row of a window) */
    tfc_test_write("cls.csv", "a,y\n1,0\n2,1\n3,7\n", -1);
    tfc_error err;
    tfc_data_options o = {.key = "data.train", .base_dir = tfc_test_tmpdir(), .num_classes = 4};
    tfc_error_clear(&err);
    tfc_pipeline *p = tfc_pipeline_from_yaml("{type: csv, file: cls.csv, label_column: y, "
                                             "timeseries: {sequence_length: 1}}", &o, &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_EQUAL(err.code, TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "label 7 is out of range [0, 4)"));
}

/* A noisy sine (period 25 rows, noise sd 0.1) as a CSV column: an LSTM reads windows of 16
 * rows (rows [0, 1000)) and predicts the value 5 rows after a window's last; on the windows
 * from row 1000 on its test mse ends far below both the mean's (the variance, ~0.5) and the
 * last value's (~0.7). */
static void test_trains(void)
{
    enum { N = 1200, T = 16, H = 5 };
    float s[N];
    uint64_t z = 12345;
    size_t cap = 32 * N, len = 0;
    char *csv = malloc(cap);
    len += (size_t)snprintf(csv, cap, "t,s\n");
    for (int i = 0; i < N; i++) {
        double u = 0; /* Irwin-Hall: sum of 12 uniforms - 6 ~ N(0, 1) */
        for (int k = 0; k < 12; k++) {
            z = z * 6364136223846793005ull + 1442695040888963407ull;
            u += (double)(z >> 11) / 9007199254740992.0;
        }
        char cell[32];
        snprintf(cell, sizeof cell, "%.6f", sin(2 * M_PI * i / 25.0) + 0.1 * (u - 6));
        s[i] = strtof(cell, NULL); /* the value the CSV holds */
        len += (size_t)snprintf(csv + len, cap - len, "%d,%s\n", i, cell);
    }
    tfc_test_write("sine.csv", csv, (long)len);
    free(csv);
    /* the baselines on the test windows: rows r = 1000, 1001, ... while r + T + H - 1 < N */
    double mean = 0, var = 0, last = 0;
    int nt = 0;
    for (int r = 1000; r + T - 1 + H < N; r++, nt++) mean += s[r + T - 1 + H];
    mean /= nt;
    for (int r = 1000; r + T - 1 + H < N; r++) {
        double y = s[r + T - 1 + H];
        var += (y - mean) * (y - mean) / nt;
        last += (y - s[r + T - 1]) * (y - s[r + T - 1]) / nt;
    }
    char yaml[2048];
    const char *src = "{type: csv, file: sine.csv, feature_columns: [s], label_column: s, "
                      "label_dtype: float32, timeseries: {sequence_length: 16, target_offset: 20";
    snprintf(yaml, sizeof yaml,
             "model:\n  name: sine\n  input: {shape: [16, 1]}\n  layers:\n"
             "    - LSTM: {units: 16}\n    - Dense: {units: 1}\n"
             "  loss: mean_squared_error\n"
             "data:\n"
             "  train:\n"
             "    source: %s, end_index: 1000}}\n"
             "    pipeline:\n"
             "      - shuffle: {buffer_size: 1000}\n      - repeat: {}\n"
             "      - batch: {batch_size: 32}\n"
             "  test:\n"
             "    source: %s, start_index: 1000}}\n"
             "    pipeline:\n      - batch: {batch_size: 200}\n"
             "optimizer: {type: adam, learning_rate: 0.01}\n"
             "max_iter: 500\ntest_interval: 500\ndisplay: 0\nseed: 3\n",
             src, src);
    tfc_error err;
    tfc_train_result res;
    tfc_status st = tfc_test_train_result(yaml, "sine.yaml", "sine", &res, &err);
    if (st) fprintf(stderr, "\n%s", err.text);
    CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
    printf("\n  %lld steps in %.2f s; %d test windows: mse %.4f; predicting the mean %.4f, "
           "the last value %.4f", (long long)res.iterations, res.wall_seconds, nt, res.test.loss,
           var, last);
    CU_ASSERT(res.iterations == 500 && res.have_test && res.test.examples == nt);
    CU_ASSERT(res.test.loss < 0.1 * var && res.test.loss < 0.1 * last);
}

TFC_TEST_MAIN("data_timeseries", {"keras_parity", test_keras_parity},
              {"random_access", test_random_access}, {"config_errors", test_config_errors},
              {"trains", test_trains})
