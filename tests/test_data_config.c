/* Pipelines from solver YAML: a whole SPEC §2 pipeline, the two fortune tasks (char-level
 * language model, category from words), config errors at FILE:LINE:COL with key paths and
 * did-you-mean (unknown keys, stages, ops, source types; wrong types, ranges, spec
 * mismatches), all reported before any data is read; planning a split without reading it,
 * and a solver load reporting model, solver and data errors together; and a registry walk
 * that runs every source, stage and map op from YAML, so a new one without a case fails. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/data.h"
#include "solver/solver.h"
#include "testutil.h"

static tfc_doc *doc; /* the last split_of's document, freed at exit */

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
    const char *path = tfc_test_write("solver.yaml", yaml, -1);
    doc = tfc_doc_load_file(path, &err);
    if (!doc) printf("%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    const tfc_node *data = tfc_node_get(tfc_doc_root(doc), "data");
    CU_ASSERT_PTR_NOT_NULL_FATAL(data);
    return tfc_node_get(data, split);
}

static tfc_pipeline *build(const char *yaml, const char *split, const char *run_dir, int load,
                           tfc_error *err)
{
    char key[32];
    snprintf(key, sizeof key, "data.%s", split);
    tfc_data_options o = {.key = key, .base_dir = tfc_test_tmpdir(), .seed = 7,
                          .run_dir = run_dir, .load_vocabulary = load};
    tfc_error_clear(err);
    return tfc_pipeline_from_config(split_of(yaml, split), &o, err);
}

static void write_idx(void)
{
    unsigned char buf[16 + 10 * 12];
    memcpy(buf, "\0\0\x08\x03\0\0\0\x0a\0\0\0\x03\0\0\0\x04", 16);
    for (int i = 0; i < 120; i++) buf[16 + i] = (unsigned char)(i * 2);
    tfc_test_write("img.idx", buf, sizeof buf);
    unsigned char lab[8 + 10] = {0, 0, 8, 1, 0, 0, 0, 10, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    tfc_test_write("lab.idx", lab, sizeof lab);
}

static void test_spec_pipeline(void)
{
    write_idx();
    tfc_error err;
    tfc_pipeline *p = build("data:\n"
                            "  train:\n"
                            "    source: {type: idx, images: img.idx, labels: lab.idx}\n"
                            "    pipeline:\n"
                            "      - map: {op: scale, factor: 0.00392156862745098}\n"
                            "      - shuffle: {buffer_size: 10}\n"
                            "      - repeat: {}\n"
                            "      - batch: {batch_size: 4}\n"
                            "      - prefetch: {buffer_size: 2}\n",
                            "train", NULL, 0, &err);
    if (!p) printf("%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const tfc_element_spec *s = tfc_pipeline_element_spec(p);
    char buf[128];
    CU_ASSERT_STRING_EQUAL(tfc_data_spec_str(&s->comp[0], buf, sizeof buf), "float32 (-1, 3, 4, 1)");
    CU_ASSERT_STRING_EQUAL(tfc_data_spec_str(&s->comp[1], buf, sizeof buf), "int32 (-1,)");
    int seen[10] = {0};
    for (int k = 0; k < 5; k++) { /* 20 examples: two epochs */
        tfc_batch b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        CU_ASSERT_EQUAL(b.features.shape.dim[0], 4);
        for (int i = 0; i < 4; i++) {
            int l = ((int32_t *)b.labels.data)[i];
            seen[l]++;
            CU_ASSERT_DOUBLE_EQUAL(((float *)b.features.data)[i * 12 + 1], (l * 24 + 2) / 255.0, 1e-6);
        }
    }
    for (int i = 0; i < 10; i++) CU_ASSERT_EQUAL(seen[i], 2);
    tfc_pipeline_free(p);
}

static void write_fortunes(void)
{
    tfc_test_write("computers", "Bugs are features.\n%\nThe computer is down.\n%\nReboot it.\n%\n"
                   "A byte walks into a bar.\n%\n", -1);
    tfc_test_write("science", "E equals m c squared.\n%\nThe atom is small.\n%\n"
                   "Science is fun.\n%\nCats are not science.\n%\n", -1);
}

static void test_fortune_language_model(void)
{
    write_fortunes();
    const char *yaml =
        "data:\n"
        "  train:\n"
        "    source: {type: text, files: [computers, science], format: fortune,\n"
        "             split: {every: 4, part: train}}\n"
        "    pipeline:\n"
        "      - map: {op: tokenize, tokenizer: char}\n"
        "      - map: {op: window, size: 8}\n"
        "      - shuffle: {buffer_size: 100}\n"
        "      - repeat: {}\n"
        "      - batch: {batch_size: 3, drop_remainder: true}\n"
        "  test:\n"
        "    source: {type: text, files: [computers, science], format: fortune,\n"
        "             split: {every: 4, part: test}}\n"
        "    pipeline:\n"
        "      - map: {op: tokenize, tokenizer: char}\n"
        "      - map: {op: window, size: 8, random: false}\n"
        "      - batch: {batch_size: 3}\n";
    tfc_error err;
    const char *run = tfc_test_tmpdir();
    tfc_pipeline *p = build(yaml, "train", run, 0, &err);
    if (!p) printf("%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), 6);
    char buf[128];
    const tfc_element_spec *s = tfc_pipeline_element_spec(p);
    CU_ASSERT_STRING_EQUAL(tfc_data_spec_str(&s->comp[0], buf, sizeof buf), "int32 (3, 8)");
    CU_ASSERT_STRING_EQUAL(tfc_data_spec_str(&s->comp[1], buf, sizeof buf), "int32 (3, 8)");
    tfc_batch b;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    int32_t *x = b.features.data, *y = b.labels.data;
    for (int i = 0; i < 7; i++)
        if (y[i]) CU_ASSERT_EQUAL(x[i + 1], y[i]); /* the target is the next input */
    int64_t vsize = tfc_vocab_size(tfc_pipeline_vocab(p));
    tfc_pipeline_free(p);
    p = build(yaml, "test", run, 1, &err);
    if (!p) printf("%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), 2);
    CU_ASSERT_EQUAL(tfc_vocab_size(tfc_pipeline_vocab(p)), vsize);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(b.features.shape.dim[0], 2);
    tfc_pipeline_free(p);
}

static void test_fortune_classification(void)
{
    write_fortunes();
    const char *yaml =
        "data:\n"
        "  train:\n"
        "    source: {type: text, files: [computers, science], format: fortune, label: file,\n"
        "             tokenizer: word, split: {every: 4, part: train}}\n"
        "    pipeline:\n"
        "      - map: {op: truncate, length: 4}\n"
        "      - shuffle: {buffer_size: 100, seed: 3}\n"
        "      - padded_batch: {batch_size: 6}\n";
    tfc_error err;
    tfc_pipeline *p = build(yaml, "train", NULL, 0, &err);
    if (!p) printf("%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const tfc_element_spec *s = tfc_pipeline_element_spec(p);
    char buf[128];
    CU_ASSERT_STRING_EQUAL(tfc_data_spec_str(&s->comp[0], buf, sizeof buf), "int32 (-1, -1)");
    CU_ASSERT_STRING_EQUAL(tfc_data_spec_str(&s->comp[1], buf, sizeof buf), "int32 (-1,)");
    CU_ASSERT_STRING_EQUAL(tfc_data_spec_str(&s->comp[2], buf, sizeof buf), "int32 (-1,)");
    tfc_batch b;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(b.features.shape.dim[0], 6);
    CU_ASSERT_EQUAL(b.features.shape.dim[1], 4); /* "A byte walks into a bar" truncated */
    int counts[2] = {0, 0};
    for (int i = 0; i < 6; i++) {
        int len = ((int32_t *)b.lengths.data)[i], lab = ((int32_t *)b.labels.data)[i];
        CU_ASSERT(len >= 2 && len <= 4);
        CU_ASSERT(lab == 0 || lab == 1);
        counts[lab & 1]++;
        for (int k = len; k < 4; k++) CU_ASSERT_EQUAL(((int32_t *)b.features.data)[i * 4 + k], 0);
    }
    CU_ASSERT_EQUAL(counts[0], 3);
    CU_ASSERT_EQUAL(counts[1], 3);
    tfc_pipeline_free(p);
}

/* The first error's position and message, and how many were reported. */
static void expect_error(const char *yaml, int line, int col, const char *key, const char *msg,
                         int min_count)
{
    tfc_error err;
    tfc_pipeline *p = build(yaml, "train", NULL, 0, &err);
    CU_ASSERT_PTR_NULL(p);
    tfc_pipeline_free(p);
    CU_ASSERT_EQUAL(err.code, TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.file, "solver.yaml"));
    CU_ASSERT_EQUAL(err.line, line);
    CU_ASSERT_EQUAL(err.col, col);
    CU_ASSERT_STRING_EQUAL(err.key, key);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, msg));
    CU_ASSERT(err.count >= min_count);
    if (err.line != line || err.col != col || strcmp(err.key, key) || !strstr(err.msg, msg))
        printf("\n%s", err.text);
}

static void test_config_errors(void)
{
    expect_error("data:\n  train:\n    source: {type: idx, images: img.idx}\n    pipeline:\n"
                 "      - shard: {num_shards: 2, index: 2}\n",
                 5, 39, "data.train.pipeline[0].shard.index",
                 "expected an index below num_shards = 2, found 2", 1);
    expect_error("data:\n  train:\n    source: {type: idx, images: img.idx}\n    pipeline:\n"
                 "      - batch: {batch_sise: 32}\n",
                 5, 17, "data.train.pipeline[0].batch.batch_sise",
                 "unknown key 'batch_sise'; did you mean 'batch_size'?", 1);
    expect_error("data:\n  train:\n    source: {type: idx, images: img.idx}\n    pipeline:\n"
                 "      - shufle: {buffer_size: 3}\n",
                 5, 9, "data.train.pipeline[0]", "unknown stage 'shufle'; did you mean 'shuffle'?",
                 1);
    expect_error("data:\n  train:\n    source: {type: idx, images: img.idx}\n    pipeline:\n"
                 "      - map: {op: scael, factor: 2}\n",
                 5, 19, "data.train.pipeline[0].map.op", "unknown map op 'scael'; did you mean 'scale'?",
                 1);
    expect_error("data:\n  train:\n    source: {type: idk, images: img.idx}\n",
                 3, 20, "data.train.source.type", "unknown source type 'idk'", 1);
    expect_error("data:\n  train:\n    source: {type: idx, images: img.idx}\n    pipeline:\n"
                 "      - batch: {batch_size: many}\n",
                 5, 29, "data.train.pipeline[0].batch.batch_size", "expected", 1);
    expect_error("data:\n  train:\n    source: {type: idx, images: img.idx}\n    pipeline:\n"
                 "      - shuffle: {buffer_size: 0}\n",
                 5, 32, "data.train.pipeline[0].shuffle.buffer_size", "expected", 1);
    expect_error("data:\n  train:\n    source: {type: idx, images: img.idx}\n    pipeline:\n"
                 "      - map: {op: random_flip, mode: sideways}\n",
                 5, 38, "data.train.pipeline[0].map.mode", "unknown value \"sideways\"", 1);
    /* Several errors in one file are reported together, and before reading any data: the
     * missing image file is never opened. */
    expect_error("data:\n  train:\n    source: {type: idx, images: missing.idx, labls: x}\n"
                 "    pipeline:\n"
                 "      - batch: {batch_size: 0}\n"
                 "      - prefetch: {buffer: 2}\n",
                 3, 46, "data.train.source.labls", "unknown key 'labls'; did you mean 'labels'?", 3);
    /* A spec mismatch found while building points at the op. */
    write_idx();
    expect_error("data:\n  train:\n    source: {type: idx, images: img.idx}\n    pipeline:\n"
                 "      - map: {op: one_hot, depth: 10}\n",
                 5, 14, "data.train.pipeline[0].map", "no labels", 1);
    expect_error("data:\n  train:\n    source: {type: idx, images: img.idx}\n    pipeline:\n"
                 "      - map: {op: decode_png}\n",
                 5, 14, "data.train.pipeline[0].map", "encoded bytes", 1);
    expect_error("data:\n  train:\n    source: {type: idx, images: img.idx}\n    pipeline:\n"
                 "      - map: {op: reshape, shape: [5, -1]}\n",
                 5, 14, "data.train.pipeline[0].map", "cannot reshape", 1);
    expect_error("data:\n  train:\n    source: {type: idx, images: img.idx}\n    pipeline: {}\n",
                 4, 15, "data.train.pipeline", "expected a list of stages", 1);
    expect_error("data:\n  train:\n    source: {type: idx, images: img.idx}\n    pipeline:\n"
                 "      - batch: {batch_size: 2}\n        shuffle: {buffer_size: 2}\n",
                 5, 9, "data.train.pipeline[0]", "expected one stage", 1);
}

/* ---- planning: the whole configuration checked, nothing read ---------------------------- */

static tfc_status plan_of(const char *yaml, const char *split, tfc_data_plan *out,
                          tfc_error *err)
{
    char key[32];
    snprintf(key, sizeof key, "data.%s", split);
    tfc_data_options o = {.key = key};
    return tfc_pipeline_plan(split_of(yaml, split), &o, out, err);
}

/* A successful plan of `yaml`'s train split (whose files do not exist). */
static tfc_data_plan plan_ok(const char *yaml)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_data_plan pl;
    tfc_status st = plan_of(yaml, "train", &pl, &err);
    if (st) printf("\n%s", err.text);
    CU_ASSERT_EQUAL(st, TFC_OK);
    CU_ASSERT_EQUAL(err.count, 0);
    return pl;
}

static void test_plan_answers(void)
{
    /* The last batch stage gives the batch size. */
    tfc_data_plan pl = plan_ok("data:\n  train:\n    source: {type: idx, images: none.idx}\n"
                               "    pipeline:\n      - batch: {batch_size: 4}\n"
                               "      - batch: {batch_size: 3, drop_remainder: true}\n");
    CU_ASSERT_EQUAL(pl.batch_size, 3);
    CU_ASSERT_EQUAL(pl.batched, 1);
    CU_ASSERT_EQUAL(pl.tokenizes, 0);
    pl = plan_ok("data:\n  train:\n    source: {type: npy, features: none.npy}\n"
                 "    pipeline:\n      - map: {op: scale, factor: 2}\n");
    CU_ASSERT_EQUAL(pl.batch_size, 0);
    CU_ASSERT_EQUAL(pl.batched, 0);
    /* Tokenizers: the source's (not `none`) and the op. */
    pl = plan_ok("data:\n  train:\n    source: {type: text, files: none.txt, tokenizer: none}\n"
                 "    pipeline:\n      - padded_batch: {batch_size: 5}\n");
    CU_ASSERT_EQUAL(pl.tokenizes, 0);
    CU_ASSERT_EQUAL(pl.batch_size, 5);
    CU_ASSERT_EQUAL(pl.batched, 1);
    pl = plan_ok("data:\n  train:\n    source: {type: text, files: none.txt, tokenizer: word}\n");
    CU_ASSERT_EQUAL(pl.tokenizes, 1);
    pl = plan_ok("data:\n  train:\n    source: {type: text, files: [a, b]}\n"
                 "    pipeline:\n      - map: {op: tokenize, tokenizer: word}\n");
    CU_ASSERT_EQUAL(pl.tokenizes, 1);
}

/* err->text holds the report "solver.yaml:WHERE: error: WHAT" (WHERE is LINE:COL). */
static void expect_report(const tfc_error *err, const char *where, const char *what)
{
    char want[512];
    snprintf(want, sizeof want, "solver.yaml:%s: error: %s", where, what);
    int found = strstr(err->text, want) != NULL;
    if (!found) printf("\nwanted \"%s\" in:\n%s", want, err->text);
    CU_ASSERT(found);
}

static void test_plan_errors(void)
{
    /* Every error of the split, including combinations of keys that used to wait for the
     * data, after the reports already there; the missing files are never opened. */
    const char *yaml =
        "data:\n"
        "  train:\n"
        "    source: {type: csv, file: missing.csv, delimiter: \";;\", label_column: [y]}\n"
        "    pipeline:\n"
        "      - map: {op: normalize, mean: [1, 2], std: [1, 2, 3]}\n"
        "      - map: {op: reshape, shape: [-1, -1]}\n"
        "      - padded_batch: {batch_size: 2, padding_values: [0, 1, 2]}\n"
        "      - batch: {batch_sise: 2}\n"
        "  test:\n"
        "    source: {type: images, list: a.list, directory: images}\n";
    tfc_error err;
    tfc_error_clear(&err);
    tfc_error_set(&err, TFC_ERR_CONFIG, "an earlier report");
    tfc_data_plan pl = {.batch_size = 7};
    CU_ASSERT_EQUAL(plan_of(yaml, "train", &pl, &err), TFC_ERR_CONFIG);
    CU_ASSERT_STRING_EQUAL(err.msg, "an earlier report");
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "an earlier report"));
    CU_ASSERT_EQUAL(pl.batch_size, 0);
    expect_report(&err, "3:55", "data.train.source: delimiter must be one character, found \";;\"");
    expect_report(&err, "3:75", "data.train.source.label_column: expected a column name or index");
    expect_report(&err, "5:14", "data.train.pipeline[0].map: mean has 2 values but std has 3");
    expect_report(&err, "6:14", "data.train.pipeline[1].map: at most one dimension of shape "
                                "may be -1");
    expect_report(&err, "7:23", "data.train.pipeline[2].padded_batch: padding_values: one value, "
                                "or [features, labels]");
    expect_report(&err, "8:17", "data.train.pipeline[3].batch.batch_sise: unknown key "
                                "'batch_sise'; did you mean 'batch_size'?");
    CU_ASSERT_PTR_NULL(strstr(err.text, "missing.csv:"));
    CU_ASSERT_EQUAL(err.count, 7);
    if (err.count != 7) printf("\n%s", err.text);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(plan_of(yaml, "test", &pl, &err), TFC_ERR_CONFIG);
    expect_report(&err, "10:13", "data.test.source: give exactly one of `list` and `directory`");
    CU_ASSERT_EQUAL(err.count, 1);
}

/* tf.data's spelling: a stage without arguments bare (`- repeat`), a scalar its first
 * argument (`- batch: 4`, `- shuffle: 10`); the pipeline yields what the mappings do. */
static void test_stage_shorthand(void)
{
    write_idx();
    static const char *const forms[2] = {
        "data:\n  train:\n    source: {type: idx, images: img.idx, labels: lab.idx}\n"
        "    pipeline:\n      - shuffle: {buffer_size: 10}\n      - repeat: {}\n"
        "      - batch: {batch_size: 4}\n      - prefetch: {buffer_size: 2}\n",
        "data:\n  train:\n    source: {type: idx, images: img.idx, labels: lab.idx}\n"
        "    pipeline: [shuffle: 10, repeat, batch: 4, prefetch: 2]\n"};
    int32_t labels[2][20];
    for (int f = 0; f < 2; f++) {
        tfc_error err;
        tfc_pipeline *p = build(forms[f], "train", NULL, 0, &err);
        if (!p) printf("%s", err.text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        for (int k = 0; k < 5; k++) {
            tfc_batch b;
            CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
            CU_ASSERT_EQUAL_FATAL(b.features.shape.dim[0], 4);
            memcpy(labels[f] + 4 * k, b.labels.data, 16);
        }
        tfc_pipeline_free(p);
    }
    CU_ASSERT_EQUAL(memcmp(labels[0], labels[1], sizeof labels[0]), 0);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_data_plan pl;
    CU_ASSERT_EQUAL(plan_of("data:\n  train:\n    source: {type: idx, images: a, labels: b}\n"
                            "    pipeline: [batch: two, repeats, \"repeat\"]\n",
                            "train", &pl, &err), TFC_ERR_CONFIG);
    expect_report(&err, "4:23", "data.train.pipeline[0].batch.batch_size: expected an integer");
    expect_report(&err, "4:28", "data.train.pipeline[1]: unknown stage 'repeats'; did you mean "
                                "'repeat'?");
    expect_report(&err, "4:37", "data.train.pipeline[2]: expected one stage as a mapping");
}

/* A solver with a typo in its model, in a data stage and in a solver key: one load reports
 * all three at their places, before any device opens or any data file is read (the data
 * files do not exist). */
static void test_solver_load_reports_all(void)
{
    const char *yaml =
        "model:\n"
        "  input: {shape: [4]}\n"
        "  layers:\n"
        "    - Dense: {units: 3, activaton: relu}\n"
        "data:\n"
        "  train:\n"
        "    source: {type: npy, features: nowhere/x.npy, labels: nowhere/y.npy}\n"
        "    pipeline:\n"
        "      - shufle: {buffer_size: 10}\n"
        "      - batch: {batch_size: 8}\n"
        "optimizer: {type: sgd, learning_rate: 0.1}\n"
        "max_iter: 10\n"
        "dispaly: 5\n";
    tfc_error err;
    tfc_error_clear(&err);
    tfc_solver *s = tfc_solver_load(tfc_test_write("solver.yaml", yaml, -1), NULL, &err);
    CU_ASSERT_PTR_NULL(s);
    tfc_solver_free(s);
    CU_ASSERT_EQUAL(err.code, TFC_ERR_CONFIG);
    expect_report(&err, "4:25", "layers[0].Dense.activaton: unknown key 'activaton'; did you "
                                "mean 'activation'?");
    expect_report(&err, "9:9", "data.train.pipeline[0]: unknown stage 'shufle'; did you mean "
                               "'shuffle'?");
    expect_report(&err, "13:1", "dispaly: unknown key 'dispaly'; did you mean 'display'?");
    CU_ASSERT_EQUAL(err.count, 3);
    CU_ASSERT_PTR_NULL(strstr(err.text, "nowhere"));
    if (err.count != 3) printf("\n%s", err.text);
    /* Without the typos the load succeeds, the data still unread, and holds the plans. */
    const char *good =
        "model:\n"
        "  input: {shape: [4]}\n"
        "  layers:\n"
        "    - Dense: {units: 3}\n"
        "data:\n"
        "  train:\n"
        "    source: {type: npy, features: nowhere/x.npy, labels: nowhere/y.npy}\n"
        "    pipeline:\n"
        "      - shuffle: {buffer_size: 10}\n"
        "      - batch: {batch_size: 8}\n"
        "  test:\n"
        "    source: {type: text, files: nowhere/*.txt, tokenizer: char}\n"
        "    pipeline:\n"
        "      - padded_batch: {batch_size: 16}\n"
        "max_iter: 10\n";
    tfc_error_clear(&err);
    s = tfc_solver_load(tfc_test_write("solver.yaml", good, -1), NULL, &err);
    if (!s) printf("\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    const tfc_solver_config *c = tfc_solver_get_config(s);
    CU_ASSERT_EQUAL(c->train_plan.batch_size, 8);
    CU_ASSERT_EQUAL(c->train_plan.tokenizes, 0);
    CU_ASSERT_EQUAL(c->test_plan.batch_size, 16);
    CU_ASSERT_EQUAL(c->test_plan.tokenizes, 1);
    tfc_solver_free(s);
}

/* ---- the registry walk: a YAML case for every source, stage and op ---------------------- */

typedef struct reg_case {
    const char *kind, *name;
    const char *source;   /* source YAML */
    const char *stages[3];
} reg_case;

static void write_all_fixtures(void)
{
    write_idx();
    write_fortunes();
    float f[6] = {1, 2, 3, 4, 5, 6};
    int32_t l[3] = {0, 1, 2};
    tfc_tensor tf = {TFC_F32, {.ndim = 2, .dim = {3, 2}}, f, -1};
    tfc_tensor tl = {TFC_I32, {.ndim = 1, .dim = {3}}, l, -1};
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("f.npy"), &tf, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("l.npy"), &tl, &err), TFC_OK);
    tfc_test_write("t.csv", "a,b,y\n1,2,0\n3,4,1\n", -1);
    uint8_t px[4 * 4 * 3];
    for (int i = 0; i < 48; i++) px[i] = (uint8_t)(i * 5);
    CU_ASSERT_EQUAL(tfc_image_write_png(tfc_test_path("p.png"), px, 4, 4, 3, 8, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_image_write_jpeg(tfc_test_path("j.jpg"), px, 4, 4, 3, 90, &err), TFC_OK);
    tfc_test_write("png.list", "p.png 0\n", -1);
    tfc_test_write("jpg.list", "j.jpg 1\n", -1);
    tfc_tfrecord_writer *w = tfc_tfrecord_writer_open(tfc_test_path("t.tfrecord"), 0, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    const char *keys[2] = {"x", "y"};
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(tfc_tfrecord_write(w, 2, keys, (tfc_tensor[2]){tf, tl}, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_tfrecord_writer_close(w, &err), TFC_OK);
    /* two classes of WAV files, one mono, one stereo (tests/ref/audio_source's) */
    static const char *const wavs[2][2] = {{"bird/a.wav", "wav/bird/a.wav"},
                                           {"cat/c.wav", "wav/cat/c.wav"}};
    mkdir(tfc_test_path("wav"), 0777);
    mkdir(tfc_test_path("wav/bird"), 0777);
    mkdir(tfc_test_path("wav/cat"), 0777);
    for (int i = 0; i < 2; i++) {
        char from[128];
        snprintf(from, sizeof from, "tests/ref/audio_source/wavs/%s", wavs[i][0]);
        size_t len;
        char *b = tfc_test_read(from, &len);
        CU_ASSERT_PTR_NOT_NULL_FATAL(b);
        tfc_test_write(wavs[i][1], b, (long)len);
        free(b);
    }
}

#define IDX "{type: idx, images: img.idx, labels: lab.idx}"
#define TEXT "{type: text, files: computers, format: fortune}"
static const reg_case cases[] = {
    {"source", "idx", IDX, {NULL}},
    {"source", "npy", "{type: npy, features: f.npy, labels: l.npy}", {NULL}},
    {"source", "csv", "{type: csv, file: t.csv, label_column: y}", {NULL}},
    {"source", "images", "{type: images, list: png.list}", {NULL}},
    {"source", "audio", "{type: audio, directory: wav}", {NULL}},
    {"source", "text", TEXT, {NULL}},
    {"source", "tfrecord", "{type: tfrecord, files: t.tfrecord, features: {key: x, shape: "
     "[3, 2]}, labels: {key: y, shape: [3]}}", {NULL}},
    {"stage", "map", IDX, {"map: {op: cast, dtype: float64}"}},
    {"stage", "filter", IDX, {"filter: {labels: [1, 3]}"}},
    {"stage", "shuffle", IDX, {"shuffle: {buffer_size: 4}"}},
    {"stage", "repeat", IDX, {"repeat: {count: 2}"}},
    {"stage", "batch", IDX, {"batch: {batch_size: 3}"}},
    {"stage", "padded_batch", TEXT, {"map: {op: tokenize}", "padded_batch: {batch_size: 2}"}},
    {"stage", "cache", IDX, {"cache: {}"}},
    {"stage", "take", IDX, {"take: {count: 2}"}},
    {"stage", "skip", IDX, {"skip: {count: 2}"}},
    {"stage", "prefetch", IDX, {"prefetch: {}"}},
    {"stage", "shard", IDX, {"shard: {num_shards: 2, index: 1}"}},
    {"stage", "bucket_by_sequence_length", TEXT,
     {"map: {op: tokenize}", "bucket_by_sequence_length: {boundaries: [4], batch_sizes: [2, 2]}"}},
    {"op", "scale", IDX, {"map: {op: scale, factor: 2, offset: 1}"}},
    {"op", "normalize", IDX, {"map: {op: normalize, mean: 1, std: 2}"}},
    {"op", "cast", IDX, {"map: {op: cast, dtype: int16, component: labels}"}},
    {"op", "reshape", IDX, {"map: {op: reshape, shape: [-1]}"}},
    {"op", "one_hot", IDX, {"map: {op: one_hot, depth: 10}"}},
    {"op", "pad", TEXT, {"map: {op: tokenize}", "map: {op: pad, length: 40, value: 0}"}},
    {"op", "truncate", TEXT, {"map: {op: tokenize}", "map: {op: truncate, length: 5}"}},
    {"op", "window", TEXT, {"map: {op: tokenize}", "map: {op: window, size: 5}"}},
    {"op", "tokenize", TEXT, {"map: {op: tokenize, tokenizer: word, min_count: 1}"}},
    {"op", "random_flip", IDX, {"map: {op: random_flip, mode: vertical}"}},
    {"op", "random_crop", IDX, {"map: {op: random_crop, size: [2, 3], padding: 1}"}},
    {"op", "resize", IDX, {"map: {op: resize, size: [6, 8]}"}},
    {"op", "decode_png", "{type: images, list: png.list, decode: false}", {"map: {op: decode_png}"}},
    {"op", "decode_jpeg", "{type: images, list: jpg.list, decode: false}",
     {"map: {op: decode_jpeg, channels: 1}"}},
    {"op", "decode_image", "{type: images, list: jpg.list, decode: false}",
     {"map: {op: decode_image}"}},
    {"op", "autoencode", IDX, {"map: {op: autoencode}"}},
    {"op", "mix_up", IDX,
     {"batch: {batch_size: 3}", "map: {op: one_hot, depth: 10}", "map: {op: mix_up, alpha: 1}"}},
    {"op", "cut_mix", IDX,
     {"batch: {batch_size: 3}", "map: {op: one_hot, depth: 10}", "map: {op: cut_mix}"}},
    {"op", "text_vectorization", TEXT,
     {"map: {op: text_vectorization, ngrams: 2, output_mode: count}", "batch: {batch_size: 2}"}},
};

static const reg_case *find_case(const char *kind, const char *name)
{
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (!strcmp(cases[i].kind, kind) && !strcmp(cases[i].name, name)) return &cases[i];
    return NULL;
}

static void run_case(const reg_case *c)
{
    tfc_error err;
    tfc_data_options o = {.key = "data.train", .base_dir = tfc_test_tmpdir(), .seed = 1};
    tfc_error_clear(&err);
    tfc_pipeline *p = tfc_pipeline_from_yaml(c->source, &o, &err);
    for (int i = 0; p && i < 3 && c->stages[i]; i++)
        if (tfc_pipeline_add_yaml(p, c->stages[i], &err)) {
            tfc_pipeline_free(p);
            p = NULL;
        }
    if (!p) printf("\n%s %s: %s", c->kind, c->name, err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const tfc_element_spec *s = tfc_pipeline_element_spec(p);
    int n = 0;
    for (;;) {
        tfc_batch b;
        tfc_status st = tfc_pipeline_next(p, &b, &err);
        if (st) printf("\n%s %s: %s", c->kind, c->name, err.text);
        CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
        if (b.end || ++n > 100) break;
        /* Every element agrees with the spec. */
        tfc_tensor *t[3] = {&b.features, &b.labels, &b.lengths};
        for (int k = 0; k < 3; k++) {
            CU_ASSERT_EQUAL(t[k]->data != NULL, s->comp[k].present);
            if (!t[k]->data) continue;
            CU_ASSERT_EQUAL(t[k]->dtype, s->comp[k].dtype);
            CU_ASSERT_EQUAL(t[k]->shape.ndim, s->comp[k].shape.ndim);
            for (int d = 0; d < s->comp[k].shape.ndim; d++)
                if (s->comp[k].shape.dim[d] >= 0)
                    CU_ASSERT_EQUAL(t[k]->shape.dim[d], s->comp[k].shape.dim[d]);
        }
    }
    CU_ASSERT(n > 0);
    tfc_pipeline_free(p);
}

static void test_registry_walk(void)
{
    write_all_fixtures();
    const char *kinds[3] = {"source", "stage", "op"};
    const char *const *lists[3] = {tfc_data_source_names(), tfc_data_stage_names(),
                                   tfc_data_op_names()};
    FILE *null = fopen("/dev/null", "w");
    for (int k = 0; k < 3; k++) {
        for (const char *const *n = lists[k]; *n; n++) {
            const reg_case *c = find_case(kinds[k], *n);
            if (!c) printf("\nno test case for %s %s\n", kinds[k], *n);
            CU_ASSERT_PTR_NOT_NULL(c);
            CU_ASSERT(tfc_data_print_help(null, kinds[k], *n));
            if (c) run_case(c);
        }
    }
    fclose(null);
}


/* A data-parallel split (tfc_data_options.shard_count): rank r's batches are exactly the rows
 * [r B/N, (r+1) B/N) of the whole pipeline's, random flips included (the maps after the
 * shard keep their keys); a split without an endless repeat before its batch is not dealt. */
static void test_dealt_among_ranks(void)
{
    write_idx();
    const char *yaml = "data:\n  train:\n"
                       "    source: {type: idx, images: img.idx, labels: lab.idx}\n"
                       "    pipeline:\n"
                       "      - shuffle: {buffer_size: 6}\n"
                       "      - repeat: {}\n"
                       "      - map: {op: random_flip, mode: horizontal}\n"
                       "      - batch: {batch_size: 4}\n";
    tfc_error err;
    tfc_error_clear(&err);
    tfc_data_options o = {.key = "data.train", .base_dir = tfc_test_tmpdir(), .seed = 7};
    tfc_pipeline *whole = tfc_pipeline_from_config(split_of(yaml, "train"), &o, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(whole);
    CU_ASSERT_EQUAL(tfc_pipeline_shard_count(whole), 1);
    tfc_pipeline *rank[2];
    for (int r = 0; r < 2; r++) {
        o.shard_count = 2;
        o.shard_index = r;
        rank[r] = tfc_pipeline_from_config(split_of(yaml, "train"), &o, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(rank[r]);
        CU_ASSERT_EQUAL(tfc_pipeline_shard_count(rank[r]), 2);
    }
    for (int step = 0; step < 12; step++) { /* about five passes of the 10 images */
        tfc_batch g, b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(whole, &g, &err), TFC_OK);
        CU_ASSERT_EQUAL_FATAL(g.features.shape.dim[0], 4);
        char rows[4][12];
        int32_t labels[4];
        memcpy(rows, g.features.data, sizeof rows);
        memcpy(labels, g.labels.data, sizeof labels);
        for (int r = 0; r < 2; r++) {
            CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(rank[r], &b, &err), TFC_OK);
            CU_ASSERT_EQUAL_FATAL(b.features.shape.dim[0], 2);
            CU_ASSERT(memcmp(b.features.data, rows[2 * r], 2 * 12) == 0);
            CU_ASSERT(memcmp(b.labels.data, labels + 2 * r, 2 * sizeof(int32_t)) == 0);
        }
    }
    tfc_pipeline_free(whole);
    tfc_pipeline_free(rank[0]);
    tfc_pipeline_free(rank[1]);
    /* one pass only: the ranks slice the whole pipeline's batches instead */
    const char *finite = "data:\n  train:\n"
                         "    source: {type: idx, images: img.idx, labels: lab.idx}\n"
                         "    pipeline: [{shuffle: {buffer_size: 6}}, {batch: {batch_size: 4}}]\n";
    tfc_pipeline *p = tfc_pipeline_from_config(split_of(finite, "train"), &o, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_shard_count(p), 1);
    tfc_pipeline_free(p);
}

/* A source's file that is missing: the error names the path tried, the hint the key that gave
 * it at its FILE:LINE:COL and the folder a relative path was read from. */
static void test_missing_file_hint(void)
{
    write_idx();
    tfc_error err;
    char want[512];
    tfc_pipeline *p = build("data:\n  train:\n"
                            "    source: {type: idx, images: img.idx, labels: nope.idx}\n",
                            "train", NULL, 0, &err);
    CU_ASSERT_PTR_NULL(p);
    snprintf(want, sizeof want, "%s/nope.idx: error: cannot open", tfc_test_tmpdir());
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, want));
    snprintf(want, sizeof want, "hint: data.train.source.labels at %s/solver.yaml:3:50 names it; "
             "a relative path is read from %s, the solver's folder", tfc_test_tmpdir(),
             tfc_test_tmpdir());
    if (!strstr(err.text, want)) printf("\nexpected '%s' in:\n%s", want, err.text);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, want));
    p = build("data:\n  train:\n    source: {type: npy, features: /nope/x.npy}\n", "train",
              NULL, 0, &err);
    CU_ASSERT_PTR_NULL(p);
    snprintf(want, sizeof want, "hint: data.train.source.features at %s/solver.yaml:3:35 names it\n",
             tfc_test_tmpdir());
    if (!strstr(err.text, want)) printf("\nexpected '%s' in:\n%s", want, err.text);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, want));
}

TFC_TEST_MAIN("data_config", {"stage_shorthand", test_stage_shorthand},
              {"spec_pipeline", test_spec_pipeline},
              {"fortune_language_model", test_fortune_language_model},
              {"fortune_classification", test_fortune_classification},
              {"config_errors", test_config_errors},
              {"plan_answers", test_plan_answers},
              {"plan_errors", test_plan_errors},
              {"solver_load_reports_all", test_solver_load_reports_all},
              {"registry_walk", test_registry_walk},
              {"dealt_among_ranks", test_dealt_among_ranks},
              {"missing_file_hint", test_missing_file_hint})
