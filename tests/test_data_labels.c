/* Elements of several named labels (Keras's fit(x, {"main": y1, "aux": y2})): the npy
 * source's `labels: {name: file}` (alone and with several inputs) and the csv source's
 * `label_column: {name: column}`, the element spec and tfc_pipeline_labels, every label
 * carried through shuffle, cache, repeat, batch, take, prefetch, shard, skip, padded_batch,
 * bucket_by_sequence_length and filter by length in one row order with the features (values
 * checked against the files' own), records dropped by label 0's range from every label,
 * ragged labels padded each to its own longest, map ops on a named label, the refusals (ops,
 * filter by labels, segmentation masks, names, row counts, timeseries), saved state restored
 * (also a blob of the format before the labels' components), and tfc-data's spec lines and
 * .npy output read back. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"
#include "testutil.h"

enum { N = 10 };

/* Row r of every file tells its r, so any mix-up of rows shows:
 * x.npy, title.npy float32 (N, 3): 10 r + j; body.npy int32 (N, 2): 1000 + 10 r + j;
 * y_main.npy (and y.npy) int32 (N,): r; y_aux.npy int32 (N,): r % 3 (class ids);
 * y_score.npy float32 (N, 2): 100 + 10 r + j (regression targets); short.npy int32 (N - 1,). */
static void write_fixtures(void)
{
    static float x[N][3], score[N][2];
    static int32_t body[N][2], y[N], aux[N], shorty[N - 1];
    for (int r = 0; r < N; r++) {
        for (int j = 0; j < 3; j++) x[r][j] = (float)(10 * r + j);
        for (int j = 0; j < 2; j++) body[r][j] = 1000 + 10 * r + j;
        for (int j = 0; j < 2; j++) score[r][j] = (float)(100 + 10 * r + j);
        y[r] = r;
        aux[r] = r % 3;
    }
    tfc_tensor t[] = {{TFC_F32, {.ndim = 2, .dim = {N, 3}}, x, -1},
                      {TFC_F32, {.ndim = 2, .dim = {N, 3}}, x, -1},
                      {TFC_I32, {.ndim = 2, .dim = {N, 2}}, body, -1},
                      {TFC_I32, {.ndim = 1, .dim = {N}}, y, -1},
                      {TFC_I32, {.ndim = 1, .dim = {N}}, y, -1},
                      {TFC_I32, {.ndim = 1, .dim = {N}}, aux, -1},
                      {TFC_F32, {.ndim = 2, .dim = {N, 2}}, score, -1},
                      {TFC_I32, {.ndim = 1, .dim = {N - 1}}, shorty, -1}};
    const char *names[] = {"x.npy",     "title.npy", "body.npy",    "y_main.npy",
                           "y.npy",     "y_aux.npy", "y_score.npy", "short.npy"};
    tfc_error err;
    tfc_error_clear(&err);
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++)
        CU_ASSERT_EQUAL_FATAL(tfc_npy_write(tfc_test_path(names[k]), &t[k], &err), TFC_OK);
}

#define LABELS "labels: {main: y_main.npy, aux: y_aux.npy, score: y_score.npy}"
/* one unnamed input, three labels */
#define SRC1 "{type: npy, features: x.npy, " LABELS "}"
/* two inputs, three labels */
#define SRC2 "{type: npy, features: {title: title.npy, body: body.npy}, " LABELS "}"

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

static double value(const tfc_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case TFC_F32: return ((const float *)t->data)[i];
    case TFC_I32: return ((const int32_t *)t->data)[i];
    case TFC_I64: return (double)((const int64_t *)t->data)[i];
    default: CU_FAIL("unexpected dtype"); return -1;
    }
}

/* How the labels were mapped (the files' own values when 0). */
typedef struct mapped {
    int aux_one_hot;   /* aux one-hot of depth 3 (float32) */
    double score_mul;  /* score scaled by it (1: not) */
    int score_pad_len; /* > 0: score row r keeps 1 + r % 2 values, then this many in all,
                          padded with -1 */
} mapped;

/* Checks that row i of batch b is the source's record r in every input and label, as the
 * fixtures made them (mapped by m), and returns r (-1 on a mismatch). */
static int check_row(const tfc_batch *b, int64_t i, const mapped *m)
{
    CU_ASSERT_EQUAL_FATAL(b->nlabels, 3);
    CU_ASSERT_PTR_EQUAL(b->label_at[0].data, b->labels.data);
    int r = (int)value(&b->label_at[0], i);
    int ok = r >= 0 && r < N;
    /* inputs: x (or title) and, with two inputs, body */
    for (int j = 0; ok && j < 3; j++) ok = value(&b->inputs[0], 3 * i + j) == 10 * r + j;
    for (int j = 0; ok && b->ninputs == 2 && j < 2; j++)
        ok = value(&b->inputs[1], 2 * i + j) == 1000 + 10 * r + j;
    /* aux */
    if (m->aux_one_hot)
        for (int j = 0; ok && j < 3; j++) ok = value(&b->label_at[1], 3 * i + j) == (j == r % 3);
    else if (ok)
        ok = value(&b->label_at[1], i) == r % 3;
    /* score */
    int w = m->score_pad_len ? m->score_pad_len : 2;
    for (int j = 0; ok && j < w; j++) {
        double want = (100 + 10 * r + j) * m->score_mul;
        if (m->score_pad_len && j >= 1 + r % 2) want = -1;
        ok = value(&b->label_at[2], w * i + j) == want;
    }
    CU_ASSERT(ok);
    return ok ? r : -1;
}

static const mapped plain = {0, 1.0, 0};

static void test_spec_and_names(void)
{
    write_fixtures();
    CU_ASSERT_EQUAL(TFC_COMP_LABEL1, TFC_COMP_INPUT1 + TFC_MAX_INPUTS - 1);
    CU_ASSERT_EQUAL(TFC_COMP_COUNT, TFC_COMP_LABEL1 + TFC_MAX_LABELS - 1);
    CU_ASSERT_EQUAL(tfc_label_comp(0), TFC_COMP_LABELS);
    CU_ASSERT_EQUAL(tfc_label_comp(1), TFC_COMP_LABEL1);
    CU_ASSERT_EQUAL(tfc_label_comp(TFC_MAX_LABELS - 1), TFC_COMP_COUNT - 1);
    CU_ASSERT_EQUAL(tfc_label_comp(TFC_MAX_LABELS), -1);
    CU_ASSERT_EQUAL(tfc_label_comp(-1), -1);
    CU_ASSERT_STRING_EQUAL(tfc_data_component_name(TFC_COMP_LABEL1), "label1");
    CU_ASSERT_STRING_EQUAL(tfc_data_component_name(TFC_COMP_COUNT - 1), "label7");
    CU_ASSERT_STRING_EQUAL(tfc_data_component_name(TFC_COMP_INPUT1 + 6), "input7");

    tfc_pipeline *p = build_ok(SRC2, NULL);
    const char *names[TFC_MAX_LABELS];
    CU_ASSERT_EQUAL(tfc_pipeline_labels(p, names), 3);
    CU_ASSERT_STRING_EQUAL(names[0], "main");
    CU_ASSERT_STRING_EQUAL(names[1], "aux");
    CU_ASSERT_STRING_EQUAL(names[2], "score");
    CU_ASSERT_EQUAL(tfc_pipeline_inputs(p, NULL), 2);
    const tfc_element_spec *s = tfc_pipeline_element_spec(p);
    CU_ASSERT_EQUAL(s->nlabels, 3);
    const tfc_component_spec *a = &s->comp[TFC_COMP_LABEL1], *sc = &s->comp[TFC_COMP_LABEL1 + 1];
    CU_ASSERT(a->present && a->dtype == TFC_I32 && a->shape.ndim == 0);
    CU_ASSERT(sc->present && sc->dtype == TFC_F32 && sc->shape.ndim == 1 && sc->shape.dim[0] == 2);
    CU_ASSERT_FALSE(s->comp[TFC_COMP_LABEL1 + 2].present);
    CU_ASSERT_STRING_EQUAL(tfc_data_spec_component_name(s, TFC_COMP_LABELS), "main");
    CU_ASSERT_STRING_EQUAL(tfc_data_spec_component_name(s, TFC_COMP_LABEL1), "aux");
    CU_ASSERT_STRING_EQUAL(tfc_data_spec_component_name(s, TFC_COMP_LABEL1 + 1), "score");
    CU_ASSERT_STRING_EQUAL(tfc_data_spec_component_name(s, TFC_COMP_LABEL1 + 2), "label3");
    CU_ASSERT_STRING_EQUAL(tfc_data_spec_component_name(s, TFC_COMP_INPUT1), "body");
    char buf[64];
    CU_ASSERT_STRING_EQUAL(tfc_data_labels_str(s, buf, sizeof buf), "main, aux, score");
    /* label 0's values stand for the labels where a consumer reads only `labels` */
    int64_t bad;
    char where[256];
    CU_ASSERT_EQUAL(tfc_pipeline_find_label_outside(p, 5, &bad, where, sizeof where), 1);
    CU_ASSERT_EQUAL(bad, 5);
    tfc_batch b;
    tfc_error err;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(check_row(&b, 0, &plain), 0);
    CU_ASSERT_EQUAL(b.labels.shape.ndim, 0);
    /* a row's record, in each label's own file */
    const char *files[] = {"y_main.npy record 0", "y_aux.npy record 0", "y_score.npy record 0"};
    for (int k = 0; k < 3; k++) {
        CU_ASSERT_EQUAL(tfc_pipeline_describe_row(p, tfc_label_comp(k), 0, where, sizeof where), 1);
        CU_ASSERT_PTR_NOT_NULL(strstr(where, files[k]));
    }
    CU_ASSERT_EQUAL(tfc_pipeline_describe_row(p, TFC_COMP_INPUT1, 0, where, sizeof where), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(where, "body.npy record 0"));
    tfc_pipeline_free(p);

    /* a plain file is one unnamed label, as before; no labels file, none */
    p = build_ok("{type: npy, features: x.npy, labels: y_main.npy}", NULL);
    CU_ASSERT_EQUAL(tfc_pipeline_labels(p, names), 1);
    CU_ASSERT_STRING_EQUAL(names[0], "");
    s = tfc_pipeline_element_spec(p);
    CU_ASSERT_EQUAL(s->nlabels, 1);
    CU_ASSERT_FALSE(s->comp[TFC_COMP_LABEL1].present);
    CU_ASSERT_STRING_EQUAL(tfc_data_labels_str(s, buf, sizeof buf), "labels");
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(b.nlabels, 1);
    CU_ASSERT_PTR_EQUAL(b.label_at[0].data, b.labels.data);
    CU_ASSERT_PTR_NULL(b.label_at[1].data);
    tfc_pipeline_free(p);
    p = build_ok("{type: npy, features: x.npy}", NULL);
    CU_ASSERT_EQUAL(tfc_pipeline_labels(p, names), 0);
    CU_ASSERT_EQUAL(tfc_pipeline_element_spec(p)->nlabels, 0);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(b.nlabels, 0);
    CU_ASSERT_PTR_NULL(b.labels.data);
    tfc_pipeline_free(p);
    /* one named label: its name, as one named input has */
    p = build_ok("{type: npy, features: x.npy, labels: {main: y_main.npy}}", NULL);
    CU_ASSERT_EQUAL(tfc_pipeline_labels(p, names), 1);
    CU_ASSERT_STRING_EQUAL(names[0], "main");
    tfc_pipeline_free(p);
}

/* shuffle permutes the features and every label together; cache, repeat, batch, take and
 * prefetch carry them all; each epoch holds every record once. */
static void test_stages_keep_rows_together(void)
{
    write_fixtures();
    const char *st[] = {"shuffle: {buffer_size: 10, seed: 2}", "cache: {}", "repeat: {count: 2}",
                        "batch: {batch_size: 4}", "take: {count: 5}", "prefetch: {buffer_size: 2}",
                        NULL};
    for (int src = 0; src < 2; src++) {
        tfc_pipeline *p = build_ok(src ? SRC2 : SRC1, st);
        int seen[2 * N], n = 0, moved = 0;
        for (;;) {
            tfc_batch b;
            tfc_error err;
            CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
            if (b.end) break;
            CU_ASSERT_EQUAL_FATAL(b.ninputs, src ? 2 : 1);
            CU_ASSERT_EQUAL_FATAL(b.label_at[2].shape.ndim, 2);
            CU_ASSERT_EQUAL_FATAL(b.label_at[1].shape.dim[0], b.features.shape.dim[0]);
            CU_ASSERT_EQUAL_FATAL(b.label_at[2].shape.dim[0], b.features.shape.dim[0]);
            for (int64_t i = 0; i < b.labels.shape.dim[0] && n < 2 * N; i++, n++) {
                seen[n] = check_row(&b, i, &plain);
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
}

/* shard and skip pick whole elements; padded_batch stacks every label (lengths: the
 * features'). */
static void test_shard_skip_padded_batch(void)
{
    write_fixtures();
    const char *st[] = {"shard: {num_shards: 2, index: 1}", "skip: {count: 1}",
                        "padded_batch: {batch_size: 8}", NULL};
    tfc_pipeline *p = build_ok(SRC2, st);
    tfc_batch b;
    tfc_error err;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(b.labels.shape.dim[0], 4); /* records 3, 5, 7, 9 */
    for (int64_t i = 0; i < 4; i++) CU_ASSERT_EQUAL(check_row(&b, i, &plain), 3 + 2 * (int)i);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b.lengths.data);
    CU_ASSERT_EQUAL(((int32_t *)b.lengths.data)[0], 3);
    CU_ASSERT_EQUAL(b.label_at[2].shape.ndim, 2);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT(b.end);
    tfc_pipeline_free(p);
}

/* bucket_by_sequence_length and filter by length work on one input whatever the labels;
 * every label stays with its row. */
static void test_bucket_and_filter_by_length(void)
{
    write_fixtures();
    const char *st[] = {"filter: {min_length: 3}",
                        "bucket_by_sequence_length: {boundaries: [4], batch_sizes: [4, 4]}",
                        NULL};
    tfc_pipeline *p = build_ok(SRC1, st);
    int n = 0;
    for (;;) {
        tfc_batch b;
        tfc_error err;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        if (b.end) break;
        for (int64_t i = 0; i < b.labels.shape.dim[0]; i++, n++)
            CU_ASSERT_EQUAL(check_row(&b, i, &plain), n);
    }
    CU_ASSERT_EQUAL(n, N);
    tfc_pipeline_free(p);
}

/* num_classes and on_error: skip check label 0 (here aux, r % 3 of 2 classes) and drop its
 * records (r = 2, 5, 8) from every label alike. */
static void test_skip_by_label0(void)
{
    write_fixtures();
    tfc_pipeline *p = build_ok("{type: npy, features: x.npy, labels: {aux: y_aux.npy, main: "
                               "y_main.npy, score: y_score.npy}, num_classes: 2, on_error: skip}",
                               (const char *[]){"batch: {batch_size: 10}", NULL});
    const int kept[] = {0, 1, 3, 4, 6, 7, 9};
    tfc_batch b;
    tfc_error err;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(b.nlabels, 3);
    CU_ASSERT_EQUAL_FATAL(b.labels.shape.dim[0], 7);
    for (int i = 0; i < 7; i++) {
        int r = kept[i];
        CU_ASSERT_EQUAL(value(&b.label_at[0], i), r % 3);
        CU_ASSERT_EQUAL(value(&b.label_at[1], i), r);
        CU_ASSERT_EQUAL(value(&b.label_at[2], 2 * i + 1), 100 + 10 * r + 1);
        CU_ASSERT_EQUAL(value(&b.features, 3 * i + 2), 10 * r + 2);
    }
    tfc_pipeline_free(p);
}

/* A user map that keeps 1 + r % 2 of score's 2 values (ragged labels). */
static tfc_status cut_score(tfc_element *e, const tfc_map_ctx *ctx, void *user, tfc_error *err)
{
    int r = ((const int32_t *)e->comp[TFC_COMP_LABELS].data)[0];
    float v = ((const float *)e->comp[TFC_COMP_LABEL1 + 1].data)[0];
    tfc_shape s = {.ndim = 1, .dim = {1 + r % 2}};
    float *y = tfc_element_alloc(e, TFC_COMP_LABEL1 + 1, TFC_F32, &s);
    if (!y) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    y[0] = v;
    if (r % 2) y[1] = v + 1;
    return TFC_OK;
}

/* padded_batch pads a ragged label to its own longest with the labels' padding value; a
 * user map whose spec does not tell the labels keeps their names. */
static void test_padded_batch_ragged_label(void)
{
    write_fixtures();
    tfc_pipeline *p = build_ok(SRC1, NULL);
    tfc_element_spec out = *tfc_pipeline_element_spec(p);
    out.comp[TFC_COMP_LABEL1 + 1].shape.dim[0] = -1;
    out.nlabels = 0; /* not told: the input's */
    memset(out.label_names, 0, sizeof out.label_names);
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_map(p, cut_score, NULL, &out, 1, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_add_yaml(p, "padded_batch: {batch_size: 4, "
                                                   "padding_values: [0, -1]}", &err), TFC_OK);
    const char *names[TFC_MAX_LABELS];
    CU_ASSERT_EQUAL(tfc_pipeline_labels(p, names), 3);
    CU_ASSERT_STRING_EQUAL(names[2], "score");
    int n = 0;
    for (;;) {
        tfc_batch b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        if (b.end) break;
        CU_ASSERT_EQUAL_FATAL(b.label_at[2].shape.dim[1], 2); /* every batch has an odd r */
        mapped m = {0, 1.0, 2};
        for (int64_t i = 0; i < b.labels.shape.dim[0]; i++, n++)
            CU_ASSERT_EQUAL(check_row(&b, i, &m), n);
        CU_ASSERT_EQUAL(((int32_t *)b.lengths.data)[0], 3);
    }
    CU_ASSERT_EQUAL(n, N);
    tfc_pipeline_free(p);
}

/* `component: aux` one-hots that label, `component: score` scales that one, `component:
 * labels` and `component: main` are label 0; ops on the features alone take several labels. */
static void test_map_on_named_label(void)
{
    write_fixtures();
    const char *st[] = {"map: {op: one_hot, depth: 3, component: aux}",
                        "map: {op: scale, factor: 0.5, component: score}",
                        "map: {op: cast, dtype: int64, component: labels}",
                        "map: {op: reshape, shape: [1], component: main}",
                        "map: {op: normalize, mean: [0], std: [1]}",
                        "batch: {batch_size: 10}", NULL};
    tfc_pipeline *p = build_ok(SRC1, st);
    const tfc_element_spec *s = tfc_pipeline_element_spec(p);
    CU_ASSERT_EQUAL(s->nlabels, 3);
    CU_ASSERT_EQUAL(s->comp[TFC_COMP_LABEL1].dtype, TFC_F32);
    CU_ASSERT_EQUAL(s->comp[TFC_COMP_LABEL1].shape.dim[1], 3);
    CU_ASSERT_EQUAL(s->comp[TFC_COMP_LABELS].dtype, TFC_I64);
    CU_ASSERT_EQUAL(s->comp[TFC_COMP_LABELS].shape.ndim, 2);
    tfc_batch b;
    tfc_error err;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(b.label_at[1].dtype, TFC_F32);
    mapped m = {1, 0.5, 0};
    for (int r = 0; r < N; r++) CU_ASSERT_EQUAL(check_row(&b, r, &m), r);
    tfc_pipeline_free(p);
}

static void test_refusals(void)
{
    write_fixtures();
    const char *one_hot[] = {"map: {op: one_hot, depth: 10}", NULL};
    refused(SRC1, one_hot, "the elements have 3 labels (main, aux, score): say which one this "
                           "op works on with component: NAME");
    const char *unknown[] = {"map: {op: cast, dtype: int32, component: axu}", NULL};
    refused(SRC2, unknown, "'axu' is not a component of the elements: features, labels or an "
                           "input: title, body or a label: main, aux, score");
    refused(SRC1, unknown, "'axu' is not a component of the elements: features, labels or a "
                           "label: main, aux, score");
    const char *mix[] = {"batch: {batch_size: 2}", "map: {op: mix_up}", NULL};
    refused(SRC1, mix, "mix_up works on elements of one label; these have 3 (main, aux, score)");
    const char *cut[] = {"batch: {batch_size: 2}", "map: {op: cut_mix}", NULL};
    refused(SRC1, cut, "cut_mix works on elements of one label; these have 3");
    const char *autoenc[] = {"map: {op: autoencode}", NULL};
    refused(SRC1, autoenc, "autoencode works on elements of one label; these have 3");
    const char *window[] = {"map: {op: window, size: 2}", NULL};
    refused(SRC1, window, "window works on elements of one label; these have 3");
    const char *filt[] = {"filter: {labels: [1, 2]}", NULL};
    refused(SRC1, filt, "filter by labels keeps elements by the value of one label; these have "
                        "3 labels (main, aux, score)");
    refused("{type: npy, features: x.npy, labels: {main: y_main.npy, 2aux: y_aux.npy}}", NULL,
            "data.train.source.labels.2aux: '2aux' is not a label name (a letter or _, then "
            "letters, digits or _, at most 63)");
    refused("{type: npy, features: x.npy, labels: {labels: y_main.npy}}", NULL,
            "'labels' names a component of every element: give the label another name");
    refused("{type: npy, features: {title: title.npy, body: body.npy}, labels: {body: "
            "y_main.npy}}", NULL, "data.train.source.labels.body: 'body' names an input too: "
            "give the label another name");
    refused("{type: npy, features: x.npy, labels: [y_main.npy]}", NULL,
            "data.train.source.labels: expected a .npy file or a mapping {label name: .npy "
            "file}, found a sequence");
    refused("{type: npy, features: x.npy, labels: {main: [y_main.npy]}}", NULL,
            "data.train.source.labels.main: expected a .npy file, found a sequence");
    refused("{type: npy, features: x.npy, labels: {a: y.npy, b: y.npy, c: y.npy, d: y.npy, "
            "e: y.npy, f: y.npy, g: y.npy, h: y.npy, i: y.npy}}", NULL,
            "9 labels: give 1 to 8, one per output of the model");
    refused("{type: npy, features: x.npy, labels: {main: y_main.npy, aux: short.npy}}", NULL,
            "x.npy has 10 records but");
    refused("{type: npy, features: x.npy, labels: {main: y_main.npy, aux: short.npy}}", NULL,
            "short.npy (label aux) has 9");
    refused("{type: npy, features: x.npy, labels: {main: y_main.npy, aux: nofile.npy}}", NULL,
            "nofile.npy");
    refused("{type: npy, features: x.npy, labels: {a: y_main.npy, b: y_aux.npy}, timeseries: "
            "{sequence_length: 2}}", NULL, "timeseries: the targets' rows are of one table: "
            "give labels one .npy file");
    /* images (4, 4, 1) with a mask label and a class label: the masks move with one label */
    static float img[N][4][4][1];
    static int32_t mask[N][4][4];
    tfc_tensor t[2] = {{TFC_F32, {.ndim = 4, .dim = {N, 4, 4, 1}}, img, -1},
                       {TFC_I32, {.ndim = 3, .dim = {N, 4, 4}}, mask, -1}};
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_write(tfc_test_path("img.npy"), &t[0], &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_write(tfc_test_path("mask.npy"), &t[1], &err), TFC_OK);
    const char *flip[] = {"map: {op: random_flip, segmentation_masks: true}", NULL};
    refused("{type: npy, features: img.npy, labels: {mask: mask.npy, kind: y_aux.npy}}", flip,
            "segmentation_masks: the elements have 2 labels (mask, kind); it moves the masks of "
            "one");
    /* a one_hot naming its label, filter by length and a features op need no label named */
    const char *fine[] = {"map: {op: one_hot, depth: 3, component: aux}",
                          "filter: {max_length: 5}", "map: {op: scale, factor: 2}", NULL};
    tfc_pipeline_free(build_ok(SRC1, fine));
}

/* csv: label_column {name: column} makes one number label per name (label_dtype each's),
 * the feature columns by default every other; num_classes checks label 0; the refusals. */
static void test_csv_labels(void)
{
    tfc_test_write("t.csv", "a,b,price,kind,y\n1,2,3.5,0,4\n4,5,6.5,2,5\n7,8,9.5,1,6\n", -1);
    tfc_pipeline *p = build_ok("{type: csv, file: t.csv, label_column: {price: price, kind: "
                               "kind}, label_dtype: float32}",
                               (const char *[]){"batch: {batch_size: 3}", NULL});
    const char *names[TFC_MAX_LABELS];
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_labels(p, names), 2);
    CU_ASSERT_STRING_EQUAL(names[0], "price");
    CU_ASSERT_STRING_EQUAL(names[1], "kind");
    tfc_batch b;
    tfc_error err;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(b.nlabels, 2);
    CU_ASSERT_EQUAL_FATAL(b.features.shape.dim[1], 3); /* a, b, y */
    CU_ASSERT_EQUAL_FATAL(b.label_at[1].dtype, TFC_F32);
    const float x[3][3] = {{1, 2, 4}, {4, 5, 5}, {7, 8, 6}}, price[3] = {3.5f, 6.5f, 9.5f};
    const float kind[3] = {0, 2, 1};
    CU_ASSERT(memcmp(b.features.data, x, sizeof x) == 0);
    CU_ASSERT(memcmp(b.labels.data, price, sizeof price) == 0);
    CU_ASSERT(memcmp(b.label_at[1].data, kind, sizeof kind) == 0);
    tfc_pipeline_free(p);
    /* int32 class ids, with named inputs; num_classes and on_error: skip by label 0 */
    p = build_ok("{type: csv, file: t.csv, feature_columns: {wide: [a], deep: [b, price]}, "
                 "label_column: {kind: kind, y: -1}, num_classes: 2, on_error: skip}",
                 (const char *[]){"batch: {batch_size: 3}", NULL});
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(b.ninputs, 2);
    CU_ASSERT_EQUAL_FATAL(b.labels.shape.dim[0], 2); /* the row of kind 2 left out */
    const int32_t k2[2] = {0, 1}, y2[2] = {4, 6};
    const float deep[2][2] = {{2, 3.5f}, {8, 9.5f}};
    CU_ASSERT_EQUAL_FATAL(b.label_at[1].dtype, TFC_I32);
    CU_ASSERT(memcmp(b.labels.data, k2, sizeof k2) == 0);
    CU_ASSERT(memcmp(b.label_at[1].data, y2, sizeof y2) == 0);
    CU_ASSERT(memcmp(b.inputs[1].data, deep, sizeof deep) == 0);
    tfc_pipeline_free(p);
    refused("{type: csv, file: t.csv, label_column: {kind: kind, price: price}}", NULL,
            "t.csv:2:5: error: label 3.5 is not an integer class index");
    refused("{type: csv, file: t.csv, feature_columns: {kind: [a]}, label_column: {kind: kind}}",
            NULL, "data.train.source.label_column.kind: 'kind' names an input too");
    refused("{type: csv, file: t.csv, label_column: {a: kind, b: y}, label_dtype: string}", NULL,
            "data.train.source.label_column: label_dtype: string names the classes of one "
            "column: give label_column one column");
    refused("{type: csv, file: t.csv, text_column: a, label_column: {a2: kind, b: y}}", NULL,
            "text_column's records take one label: give label_column one column");
    refused("{type: csv, file: t.csv, label_column: {a: kind, b: y}, timeseries: "
            "{sequence_length: 2}}", NULL, "timeseries: the targets are rows of one column");
    refused("{type: csv, file: t.csv, label_column: {a: [kind]}}", NULL,
            "data.train.source.label_column.a: expected a column name or index");
    refused("{type: csv, file: t.csv, label_column: {a: kind, b: nope}}", NULL, "nope");
}

/* Reads k batches of 3 rows from p into rows (every component's bytes of a row, 3 rows a
 * batch), checking each row against its record. */
enum { ROW = 3 * 4 + 4 + 4 + 2 * 4 };
static void read_rows(tfc_pipeline *p, int k, unsigned char (*rows)[3][ROW])
{
    for (int j = 0; j < k; j++) {
        tfc_batch b;
        tfc_error err;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        CU_ASSERT_FATAL(!b.end && b.nlabels == 3 && b.labels.shape.dim[0] == 3);
        for (int i = 0; i < 3; i++) {
            unsigned char *o = rows[j][i];
            memcpy(o, (char *)b.features.data + 12 * i, 12);
            memcpy(o + 12, (char *)b.label_at[0].data + 4 * i, 4);
            memcpy(o + 16, (char *)b.label_at[1].data + 4 * i, 4);
            memcpy(o + 20, (char *)b.label_at[2].data + 8 * i, 8);
            check_row(&b, i, &plain);
        }
    }
}

/* A saved position (prefetch holding batches by value, every label's rows in them) restores
 * to the same elements, every label bit for bit. */
static void test_state_round_trip(void)
{
    write_fixtures();
    const char *st[] = {"shuffle: {buffer_size: 6}", "repeat: {}", "batch: {batch_size: 3}",
                        "prefetch: {buffer_size: 2}", NULL};
    tfc_pipeline *p = build_ok(SRC1, st);
    enum { K = 5 };
    static unsigned char ref[K][3][ROW], got[K][3][ROW], skip[3][3][ROW];
    read_rows(p, 3, skip);
    void *blob;
    size_t len;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_save_state(p, &blob, &len, &err), TFC_OK);
    tfc_pipeline *q = build_ok(SRC1, st);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_restore_state(q, blob, len, &err), TFC_OK);
    free(blob);
    read_rows(p, K, ref);
    read_rows(q, K, got);
    CU_ASSERT(memcmp(ref, got, sizeof ref) == 0);
    tfc_pipeline_free(p);
    tfc_pipeline_free(q);
}

/* A state of the format before several labels (version 3 of 10 components, written by
 * commit a62d6f7 from test_data_inputs's pipeline of two inputs after 3 batches,
 * tests/ref/data_state/v3_ten_components.state) still restores: the batches it holds and
 * those after are the uninterrupted run's, bit for bit. */
static void test_ten_component_state(void)
{
    write_fixtures();
    const char *src = "{type: npy, features: {title: title.npy, body: body.npy}, labels: y.npy}";
    const char *st[] = {"shuffle: {buffer_size: 6}", "repeat: {}", "batch: {batch_size: 3}",
                        "prefetch: {buffer_size: 2}", NULL};
    enum { K = 6, BYTES = 3 * (12 + 8 + 4) };
    static unsigned char ref[K][BYTES], got[K][BYTES];
    size_t len = 0;
    char *blob = tfc_test_read("tests/ref/data_state/v3_ten_components.state", &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(blob);
    CU_ASSERT_EQUAL(((const unsigned char *)blob)[8], 3); /* the version */
    tfc_pipeline *p = build_ok(src, st), *q = build_ok(src, st);
    tfc_batch b;
    tfc_error err;
    tfc_error_clear(&err);
    for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_restore_state(q, blob, len, &err), TFC_OK);
    free(blob);
    tfc_pipeline *both[2] = {p, q};
    for (int w = 0; w < 2; w++)
        for (int k = 0; k < K; k++) {
            CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(both[w], &b, &err), TFC_OK);
            CU_ASSERT_FATAL(b.ninputs == 2 && b.nlabels == 1 && b.labels.shape.dim[0] == 3);
            unsigned char *o = w ? got[k] : ref[k];
            memcpy(o, b.inputs[0].data, 36);
            memcpy(o + 36, b.inputs[1].data, 24);
            memcpy(o + 60, b.labels.data, 12);
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

/* The source tfc-data printed after "read them with:" ("{type: npy, ...}"), built with a
 * batch of 8; checks its 8 rows. */
static void read_back(const char *want)
{
    const char *src = strstr(out, want);
    if (!src) printf("\nwanted '%s' in:\n%s\n", want, out);
    CU_ASSERT_PTR_NOT_NULL_FATAL(src);
    char yaml[512];
    snprintf(yaml, sizeof yaml, "%.*s", (int)strlen(want) - 8, src + 8);
    tfc_pipeline *p = build_ok(yaml, (const char *[]){"batch: {batch_size: 8}", NULL});
    tfc_batch b;
    tfc_error err;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(b.labels.shape.dim[0], 8);
    for (int64_t i = 0; i < 8; i++) CU_ASSERT(check_row(&b, i, &plain) >= 0);
    tfc_pipeline_free(p);
}

/* tfc-data prints every label's spec, writes one .npy per label and prints the source that
 * reads them back, which yields the same rows; tfrecord cannot hold several labels. */
static void test_tool_output(void)
{
    write_fixtures();
    tfc_test_write("in.yaml", "data:\n  train:\n    source: " SRC2 "\n"
                   "    pipeline: [{shuffle: {buffer_size: 10}}, {batch: {batch_size: 4}}]\n",
                   -1);
    int code = run_tool("in.yaml --take 2 --output o");
    if (code == -2) return; /* skipped: tfc-data is not built */
    CU_ASSERT_EQUAL(code, 0);
    const char *spec = "  title     float32 (-1, 3)\n  body      int32 (-1, 2)\n"
                       "  main      int32 (-1,)\n  aux       int32 (-1,)\n"
                       "  score     float32 (-1, 2)\n";
    if (!strstr(out, spec)) printf("\n%s\n", out);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, spec));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "wrote o.main.npy: int32 (8,)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "wrote o.aux.npy: int32 (8,)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "wrote o.score.npy: float32 (8, 2)"));
    read_back("source: {type: npy, features: {title: o.title.npy, body: o.body.npy}, labels: "
              "{main: o.main.npy, aux: o.aux.npy, score: o.score.npy}}");

    /* one unnamed input: PREFIX.features.npy beside the labels' files */
    tfc_test_write("in1.yaml", "data:\n  train:\n    source: " SRC1 "\n"
                   "    pipeline: [{shuffle: {buffer_size: 10}}, {batch: {batch_size: 4}}]\n",
                   -1);
    CU_ASSERT_EQUAL(run_tool("in1.yaml --take 2 --output o1"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "  features  float32 (-1, 3)\n  main      int32 (-1,)\n"));
    read_back("source: {type: npy, features: o1.features.npy, labels: {main: o1.main.npy, aux: "
              "o1.aux.npy, score: o1.score.npy}}");
    CU_ASSERT_EQUAL(run_tool("in1.yaml --take 2 --output o1 --format tfrecord"), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--format tfrecord: the elements have 3 labels (main, "
                                       "aux, score), and the tfrecord source reads one labels "
                                       "key"));
}

TFC_TEST_MAIN("data_labels",
              {"spec_and_names", test_spec_and_names},
              {"stages_keep_rows_together", test_stages_keep_rows_together},
              {"shard_skip_padded_batch", test_shard_skip_padded_batch},
              {"bucket_and_filter_by_length", test_bucket_and_filter_by_length},
              {"skip_by_label0", test_skip_by_label0},
              {"padded_batch_ragged_label", test_padded_batch_ragged_label},
              {"map_on_named_label", test_map_on_named_label},
              {"refusals", test_refusals},
              {"csv_labels", test_csv_labels},
              {"state_round_trip", test_state_round_trip},
              {"ten_component_state", test_ten_component_state},
              {"tool_output", test_tool_output})
