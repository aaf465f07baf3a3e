/* Elements of several named inputs (Keras's fit({"title": x1, "body": x2}, y)): the npy
 * source's `features: {name: file}`, the element spec and tfc_pipeline_inputs, every input
 * carried through shuffle, cache, repeat, batch, take, prefetch and shard in one row order
 * with the labels (values checked bit for bit against the files' own), padded_batch, a map
 * op on a named input, the refusals (ops, filter by length, bucketing, names, row counts,
 * the trainer), saved state restored, tfc-data's spec lines and .npy output, and the
 * trainer's bad values named in the file of the input that holds them. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"
#include "testutil.h"

enum { N = 10 };

/* title.npy float32 (N, 3): 10 r + j; body.npy int32 (N, 2): 1000 + 10 r + j; y.npy int32
 * (N,): r. Row r of every file tells its r, so any mix-up of rows shows. */
static void write_fixtures(void)
{
    static float title[N][3];
    static int32_t body[N][2], y[N], shortb[N - 1][2];
    for (int r = 0; r < N; r++) {
        for (int j = 0; j < 3; j++) title[r][j] = (float)(10 * r + j);
        for (int j = 0; j < 2; j++) body[r][j] = 1000 + 10 * r + j;
        y[r] = r;
    }
    tfc_tensor t[4] = {{TFC_F32, {.ndim = 2, .dim = {N, 3}}, title, -1},
                       {TFC_I32, {.ndim = 2, .dim = {N, 2}}, body, -1},
                       {TFC_I32, {.ndim = 1, .dim = {N}}, y, -1},
                       {TFC_I32, {.ndim = 2, .dim = {N - 1, 2}}, shortb, -1}};
    const char *names[4] = {"title.npy", "body.npy", "y.npy", "short.npy"};
    tfc_error err;
    tfc_error_clear(&err);
    for (int k = 0; k < 4; k++)
        CU_ASSERT_EQUAL_FATAL(tfc_npy_write(tfc_test_path(names[k]), &t[k], &err), TFC_OK);
}

#define SRC "{type: npy, features: {title: title.npy, body: body.npy}, labels: y.npy}"

/* The source `src` with `stages` (NULL-ended) appended; NULL with err filled when one is
 * refused. */
static tfc_pipeline *build(const char *src, const char *const *stages, tfc_error *err)
{
    tfc_data_options o = {.key = "data.train", .base_dir = tfc_test_tmpdir(), .seed = 5};
    tfc_error_clear(err);
    tfc_pipeline *p = tfc_pipeline_from_yaml(src, &o, err);
    for (int i = 0; p && stages && stages[i]; i++)
        if (tfc_pipeline_add_yaml(p, stages[i], err)) {
            tfc_pipeline_free(p);
            return NULL;
        }
    return p;
}

static tfc_pipeline *build_ok(const char *src, const char *const *stages)
{
    tfc_error err;
    tfc_pipeline *p = build(src, stages, &err);
    if (!p) printf("\n%s\n", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    return p;
}

/* Expects building to fail with a message holding `want`. */
static void refused(const char *src, const char *const *stages, const char *want)
{
    tfc_error err;
    tfc_pipeline *p = build(src, stages, &err);
    CU_ASSERT_PTR_NULL(p);
    tfc_pipeline_free(p);
    if (!strstr(err.text, want)) printf("\nwanted '%s' in:\n%s\n", want, err.text);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, want));
}

/* Checks that row i of batch b (rows rows) is the source's record r in every component, as
 * the fixtures made them (title scaled by `scale`), and returns r (-1 on a mismatch). */
static int check_row(const tfc_batch *b, int64_t i, float scale)
{
    int r = ((const int32_t *)b->labels.data)[i];
    const float *t = (const float *)b->inputs[0].data + 3 * i;
    const int32_t *x = (const int32_t *)b->inputs[1].data + 2 * i;
    int ok = r >= 0 && r < N;
    for (int j = 0; ok && j < 3; j++) ok = t[j] == (float)(10 * r + j) * scale;
    for (int j = 0; ok && j < 2; j++) ok = x[j] == 1000 + 10 * r + j;
    CU_ASSERT(ok);
    return ok ? r : -1;
}

static void test_spec_and_names(void)
{
    write_fixtures();
    tfc_pipeline *p = build_ok(SRC, NULL);
    const char *names[TFC_MAX_INPUTS];
    CU_ASSERT_EQUAL(tfc_pipeline_inputs(p, names), 2);
    CU_ASSERT_STRING_EQUAL(names[0], "title");
    CU_ASSERT_STRING_EQUAL(names[1], "body");
    const tfc_element_spec *s = tfc_pipeline_element_spec(p);
    CU_ASSERT_EQUAL(s->ninputs, 2);
    CU_ASSERT_EQUAL(tfc_input_comp(0), TFC_COMP_FEATURES);
    CU_ASSERT_EQUAL(tfc_input_comp(1), TFC_COMP_INPUT1);
    CU_ASSERT_EQUAL(tfc_input_comp(TFC_MAX_INPUTS), -1);
    const tfc_component_spec *b = &s->comp[TFC_COMP_INPUT1];
    CU_ASSERT(b->present && b->dtype == TFC_I32 && b->shape.ndim == 1 && b->shape.dim[0] == 2);
    CU_ASSERT_STRING_EQUAL(tfc_data_spec_component_name(s, TFC_COMP_INPUT1), "body");
    CU_ASSERT_STRING_EQUAL(tfc_data_spec_component_name(s, TFC_COMP_FEATURES), "title");
    CU_ASSERT_STRING_EQUAL(tfc_data_component_name(TFC_COMP_INPUT1), "input1");
    char buf[64];
    CU_ASSERT_STRING_EQUAL(tfc_data_inputs_str(s, buf, sizeof buf), "title, body");
    tfc_pipeline_free(p);
    /* a plain file is one unnamed input, as before */
    p = build_ok("{type: npy, features: title.npy, labels: y.npy}", NULL);
    CU_ASSERT_EQUAL(tfc_pipeline_inputs(p, names), 1);
    CU_ASSERT_STRING_EQUAL(names[0], "");
    CU_ASSERT_FALSE(tfc_pipeline_element_spec(p)->comp[TFC_COMP_INPUT1].present);
    tfc_pipeline_free(p);
}

/* shuffle permutes every input and the labels together; cache, repeat, batch, take and
 * prefetch carry them all; each epoch holds every record once. */
static void test_stages_keep_rows_together(void)
{
    write_fixtures();
    const char *st[] = {"shuffle: {buffer_size: 10, seed: 2}", "cache: {}", "repeat: {count: 2}",
                        "batch: {batch_size: 4}", "take: {count: 5}", "prefetch: {buffer_size: 2}",
                        NULL};
    tfc_pipeline *p = build_ok(SRC, st);
    int seen[2 * N], n = 0, moved = 0;
    for (;;) {
        tfc_batch b;
        tfc_error err;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        if (b.end) break;
        CU_ASSERT_EQUAL_FATAL(b.ninputs, 2);
        CU_ASSERT_PTR_EQUAL(b.inputs[0].data, b.features.data);
        CU_ASSERT_EQUAL_FATAL(b.inputs[1].dtype, TFC_I32);
        CU_ASSERT_EQUAL_FATAL(b.inputs[1].shape.dim[0], b.labels.shape.dim[0]);
        for (int64_t i = 0; i < b.labels.shape.dim[0] && n < 2 * N; i++, n++) {
            seen[n] = check_row(&b, i, 1.0f);
            moved += seen[n] != n % N;
        }
    }
    CU_ASSERT_EQUAL(n, 2 * N); /* 5 batches of 4 */
    CU_ASSERT(moved > 0);      /* shuffled */
    for (int e = 0; e < 2; e++) {
        int count[N] = {0};
        for (int i = 0; i < N; i++)
            if (seen[e * N + i] >= 0) count[seen[e * N + i]]++;
        for (int r = 0; r < N; r++) CU_ASSERT_EQUAL(count[r], 1);
    }
    tfc_pipeline_free(p);
}

/* shard and skip pick whole elements; padded_batch pads each input and measures input 0. */
static void test_shard_skip_padded_batch(void)
{
    write_fixtures();
    const char *st[] = {"shard: {num_shards: 2, index: 1}", "skip: {count: 1}",
                        "padded_batch: {batch_size: 8}", NULL};
    tfc_pipeline *p = build_ok(SRC, st);
    tfc_batch b;
    tfc_error err;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(b.labels.shape.dim[0], 4); /* records 3, 5, 7, 9 */
    for (int64_t i = 0; i < 4; i++) CU_ASSERT_EQUAL(check_row(&b, i, 1.0f), 3 + 2 * (int)i);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b.lengths.data);
    CU_ASSERT_EQUAL(((int32_t *)b.lengths.data)[0], 3); /* title's rows */
    CU_ASSERT_EQUAL(b.inputs[1].shape.ndim, 2);
    tfc_pipeline_free(p);
}

/* `component: body` scales that input only; `component: features` is input 0. */
static void test_map_on_named_input(void)
{
    write_fixtures();
    const char *st[] = {"map: {op: scale, factor: 0.5, component: body}",
                        "map: {op: scale, factor: 2, component: features}",
                        "batch: {batch_size: 10}", NULL};
    tfc_pipeline *p = build_ok(SRC, st);
    const tfc_element_spec *s = tfc_pipeline_element_spec(p);
    CU_ASSERT_EQUAL(s->comp[TFC_COMP_INPUT1].dtype, TFC_F32);
    CU_ASSERT_EQUAL(s->ninputs, 2);
    tfc_batch b;
    tfc_error err;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(b.inputs[1].dtype, TFC_F32);
    const float *x = b.inputs[1].data, *t = b.inputs[0].data;
    for (int r = 0; r < N; r++) {
        for (int j = 0; j < 2; j++) CU_ASSERT_EQUAL(x[2 * r + j], (1000 + 10 * r + j) * 0.5f);
        for (int j = 0; j < 3; j++) CU_ASSERT_EQUAL(t[3 * r + j], (10 * r + j) * 2.0f);
    }
    tfc_pipeline_free(p);
}

static void test_refusals(void)
{
    write_fixtures();
    const char *no_comp[] = {"map: {op: scale, factor: 2}", NULL};
    refused(SRC, no_comp, "the elements have 2 inputs (title, body): say which one this op "
                          "works on with component: NAME");
    const char *unknown[] = {"map: {op: cast, dtype: int32, component: bdoy}", NULL};
    refused(SRC, unknown, "'bdoy' is not a component of the elements: features, labels or an "
                          "input: title, body");
    const char *normalize[] = {"map: {op: normalize, mean: [0], std: [1]}", NULL};
    refused(SRC, normalize, "normalize works on elements of one input; these have 2 (title, "
                            "body)");
    const char *autoenc[] = {"map: {op: autoencode}", NULL};
    refused(SRC, autoenc, "autoencode works on elements of one input");
    const char *mix[] = {"batch: {batch_size: 2}", "map: {op: mix_up}", NULL};
    refused(SRC, mix, "mix_up works on elements of one input");
    const char *filt[] = {"filter: {min_length: 2}", NULL};
    refused(SRC, filt, "filter by length: the elements have 2 inputs (title, body)");
    const char *bucket[] = {"bucket_by_sequence_length: {boundaries: [4], batch_sizes: [2, 2]}",
                            NULL};
    refused(SRC, bucket, "bucket_by_sequence_length buckets by one length; the elements have "
                         "2 inputs (title, body)");
    refused("{type: npy, features: {title: title.npy, body: short.npy}}", NULL,
            "title.npy has 10 records but");
    refused("{type: npy, features: {title: title.npy, 2body: body.npy}}", NULL,
            "<source>:1:42: error: data.train.source.features.2body: '2body' is not an input "
            "name");
    refused("{type: npy, features: {labels: title.npy}}", NULL,
            "'labels' names a component of every element");
    refused("{type: npy, features: [title.npy]}", NULL,
            "data.train.source.features: expected a .npy file or a mapping {input name: .npy "
            "file}, found a sequence");
    refused("{type: npy, features: {a: x.npy, b: x.npy, c: x.npy, d: x.npy, e: x.npy, f: x.npy,"
            " g: x.npy, h: x.npy, i: x.npy}}", NULL, "9 inputs: give 1 to 8");
    refused("{type: npy, features: {a: title.npy, b: body.npy}, timeseries: {sequence_length: "
            "2}}", NULL, "timeseries: windows are of one table");
    /* filter by labels and a one_hot of the labels need no input named */
    const char *fine[] = {"filter: {labels: [1, 2]}", "map: {op: one_hot, depth: 10}", NULL};
    tfc_pipeline_free(build_ok(SRC, fine));
}

/* csv: feature_columns {name: [columns]} makes one float32 input per name, string_lookup
 * columns one-hot within their input; text_column and timeseries refuse the mapping. */
static void test_csv_inputs(void)
{
    tfc_test_write("t.csv", "a,b,c,color,y\n1,2,3,red,0\n4,5,6,blue,1\n7,8,9,green,2\n", -1);
    tfc_pipeline *p = build_ok("{type: csv, file: t.csv, label_column: y, feature_columns: "
                               "{wide: [c, a], deep: [color, b]}, string_lookup: {color: [red, "
                               "blue]}}", (const char *[]){"batch: {batch_size: 3}", NULL});
    const char *names[TFC_MAX_INPUTS];
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_inputs(p, names), 2);
    CU_ASSERT_STRING_EQUAL(names[0], "wide");
    CU_ASSERT_STRING_EQUAL(names[1], "deep");
    tfc_batch b;
    tfc_error err;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(b.inputs[0].shape.dim[1], 2);
    CU_ASSERT_EQUAL_FATAL(b.inputs[1].shape.dim[1], 4); /* [UNK], red, blue; then b */
    const float wide[3][2] = {{3, 1}, {6, 4}, {9, 7}};
    const float deep[3][4] = {{0, 1, 0, 2}, {0, 0, 1, 5}, {1, 0, 0, 8}};
    CU_ASSERT(memcmp(b.inputs[0].data, wide, sizeof wide) == 0);
    CU_ASSERT(memcmp(b.inputs[1].data, deep, sizeof deep) == 0);
    CU_ASSERT_EQUAL(((int32_t *)b.labels.data)[2], 2);
    tfc_pipeline_free(p);
    refused("{type: csv, file: t.csv, text_column: color, feature_columns: {w: [a]}}", NULL,
            "give text_column or feature_columns, not both");
    refused("{type: csv, file: t.csv, label_column: y, feature_columns: {w: [a], d: [b]}, "
            "timeseries: {sequence_length: 2}}", NULL, "timeseries: windows are of one table: "
            "give feature_columns a list");
    refused("{type: csv, file: t.csv, feature_columns: {w: [a], lengths: [b]}}", NULL,
            "'lengths' names a component of every element");
}

/* A saved position (prefetch holding batches by value) restores to the same elements, every
 * input bit for bit. */
static void test_state_round_trip(void)
{
    write_fixtures();
    const char *st[] = {"shuffle: {buffer_size: 6}", "repeat: {}", "batch: {batch_size: 3}",
                        "prefetch: {buffer_size: 2}", NULL};
    tfc_pipeline *p = build_ok(SRC, st);
    tfc_batch b;
    tfc_error err;
    for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    void *blob;
    size_t len;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_save_state(p, &blob, &len, &err), TFC_OK);
    enum { K = 5, ROW = 3 * 4 + 2 * 4 + 4 };
    static unsigned char ref[K][3][ROW], got[K][3][ROW];
    tfc_pipeline *q = build_ok(SRC, st);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_restore_state(q, blob, len, &err), TFC_OK);
    free(blob);
    tfc_pipeline *both[2] = {p, q};
    for (int w = 0; w < 2; w++)
        for (int k = 0; k < K; k++) {
            CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(both[w], &b, &err), TFC_OK);
            CU_ASSERT_EQUAL_FATAL(b.ninputs, 2);
            CU_ASSERT_PTR_NOT_NULL_FATAL(b.inputs[1].data);
            for (int i = 0; i < 3; i++) {
                unsigned char *o = w ? got[k][i] : ref[k][i];
                memcpy(o, (char *)b.inputs[0].data + 12 * i, 12);
                memcpy(o + 12, (char *)b.inputs[1].data + 8 * i, 8);
                memcpy(o + 20, (char *)b.labels.data + 4 * i, 4);
                check_row(&b, i, 1.0f);
            }
        }
    CU_ASSERT(memcmp(ref, got, sizeof ref) == 0);
    tfc_pipeline_free(p);
    tfc_pipeline_free(q);
}

static char out[16384];

/* Runs tfc-data in the scratch folder with `args`; its exit code (-2: not built, the test
 * skipped), output in `out`. */
static int run_tool(const char *args)
{
    const char *bin = tfc_test_bin("tfc-data");
    if (!bin) return -2;
    char cmd[4096], *text = NULL;
    snprintf(cmd, sizeof cmd, "'%s/tfc-data' %s", bin, args);
    int code = tfc_test_sh(cmd, &text);
    snprintf(out, sizeof out, "%s", text ? text : "");
    free(text);
    return code;
}

/* tfc-data prints every input's spec, writes one .npy per input and prints the source that
 * reads them back, which yields the same rows; tfrecord cannot hold several inputs. */
static void test_tool_output(void)
{
    write_fixtures();
    tfc_test_write("in.yaml", "data:\n  train:\n    source: " SRC "\n"
                   "    pipeline: [{shuffle: {buffer_size: 10}}, {batch: {batch_size: 4}}]\n",
                   -1);
    int code = run_tool("in.yaml --take 2 --output o");
    if (code == -2) return; /* skipped: tfc-data is not built */
    CU_ASSERT_EQUAL(code, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "  title     float32 (-1, 3)\n  body      int32 (-1, 2)\n"
                                       "  labels    int32 (-1,)\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "wrote o.title.npy: float32 (8, 3)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "wrote o.body.npy: int32 (8, 2)"));
    const char *want = "source: {type: npy, features: {title: o.title.npy, body: o.body.npy}, "
                       "labels: o.labels.npy}";
    const char *src = strstr(out, want);
    CU_ASSERT_PTR_NOT_NULL_FATAL(src);
    char yaml[256];
    snprintf(yaml, sizeof yaml, "%.*s", (int)strlen(want) - 8, src + 8);
    tfc_pipeline *p = build_ok(yaml, (const char *[]){"batch: {batch_size: 8}", NULL});
    tfc_batch b;
    tfc_error err;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(b.ninputs, 2);
    CU_ASSERT_EQUAL_FATAL(b.labels.shape.dim[0], 8);
    for (int64_t i = 0; i < 8; i++) check_row(&b, i, 1.0f);
    tfc_pipeline_free(p);
    CU_ASSERT_EQUAL(run_tool("in.yaml --take 2 --output o --format tfrecord"), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--format tfrecord: the elements have 2 inputs (title, "
                                       "body)"));
}

/* The trainer feeds one input: a split of several is refused before training. */
static void test_trainer_refuses(void)
{
    write_fixtures();
    const char *solver =
        "model:\n  input: {shape: [3]}\n  layers:\n    - Dense: {units: 10}\n"
        "data:\n"
        "  train:\n"
        "    source: " SRC "\n"
        "    pipeline: [{repeat: {}}, {batch: {batch_size: 4}}]\n"
        "optimizer: {type: sgd, learning_rate: 0.1}\n"
        "max_iter: 2\nseed: 1\n";
    tfc_error e;
    tfc_error_clear(&e);
    CU_ASSERT_EQUAL(tfc_test_train(solver, "in_solver.yaml", "in_run", &e), TFC_ERR_CONFIG);
    if (!strstr(e.text, "data.train: yields 2 inputs (title, body); this model takes one input"))
        printf("\n%s\n", e.text);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(e.text, "data.train: yields 2 inputs (title, body); this model takes one input"));
}

/* A bad value of input k > 0 names the record in input k's own file, not the features'
 * (input 0's) file: a NaN in stats.npy's row 6 (a float input), and an id beyond int32 in
 * ids.npy's row 7 (an int64 file feeding an int32 input). */
static void test_trainer_names_the_input_file(void)
{
    write_fixtures();
    static float stats[N][2];
    static int64_t ids[N][2];
    for (int r = 0; r < N; r++)
        for (int j = 0; j < 2; j++) {
            stats[r][j] = (float)r;
            ids[r][j] = r % 4;
        }
    stats[6][1] = NAN;
    ids[7][0] = (int64_t)1 << 40;
    tfc_tensor t[2] = {{TFC_F32, {.ndim = 2, .dim = {N, 2}}, stats, -1},
                       {TFC_I64, {.ndim = 2, .dim = {N, 2}}, ids, -1}};
    tfc_error e;
    tfc_error_clear(&e);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_write(tfc_test_path("stats.npy"), &t[0], &e), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_write(tfc_test_path("ids.npy"), &t[1], &e), TFC_OK);
    static const struct { const char *layers, *file, *want; } cases[] = {
        {"    - InputLayer: {name: stats, shape: [2]}\n"
         "    - Concatenate: {inputs: [title, stats]}\n",
         "stats.npy", "/stats.npy record 6: stats value nan is not finite"},
        {"    - InputLayer: {name: stats, shape: [2], dtype: int32}\n"
         "    - Embedding: {input_dim: 4, output_dim: 3, inputs: stats}\n"
         "    - Flatten\n"
         "    - Concatenate: {inputs: [title, flatten]}\n",
         "ids.npy", "/ids.npy record 7: stats value 1.09951e+12 is not an int32 token id"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char solver[2048], run[16];
        snprintf(run, sizeof run, "nf_run%zu", i);
        snprintf(solver, sizeof solver,
                 "model:\n  layers:\n    - InputLayer: {name: title, shape: [3]}\n%s"
                 "    - Dense: {units: 10}\n"
                 "  loss: sparse_categorical_crossentropy\n"
                 "data:\n  train:\n"
                 "    source: {type: npy, features: {title: title.npy, stats: %s}, "
                 "labels: y.npy}\n"
                 "    pipeline: [{repeat: {}}, {batch: {batch_size: 5}}]\n"
                 "optimizer: {type: sgd, learning_rate: 0.1}\nmax_iter: 2\nseed: 1\n",
                 cases[i].layers, cases[i].file);
        tfc_error_clear(&e);
        CU_ASSERT_EQUAL(tfc_test_train(solver, "nf_solver.yaml", run, &e), TFC_ERR_DATA);
        if (!strstr(e.text, cases[i].want))
            printf("\n  want '%s' in:\n%s\n", cases[i].want, e.text);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.text, cases[i].want));
    }
}

TFC_TEST_MAIN("data_inputs",
              {"spec_and_names", test_spec_and_names},
              {"stages_keep_rows_together", test_stages_keep_rows_together},
              {"shard_skip_padded_batch", test_shard_skip_padded_batch},
              {"map_on_named_input", test_map_on_named_input},
              {"refusals", test_refusals},
              {"csv_inputs", test_csv_inputs},
              {"state_round_trip", test_state_round_trip},
              {"tool_output", test_tool_output},
              {"trainer_refuses", test_trainer_refuses},
              {"trainer_names_the_input_file", test_trainer_names_the_input_file})
