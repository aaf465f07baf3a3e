/* The text source and tokenizers on files written here: lines and %-separated records, the
 * deterministic train/test split, file labels, globs and excludes, bad input (binary files,
 * records over the limit), char and word vocabularies (order, <pad>/<unk>, lowercasing,
 * saving and loading with escapes), and the window op for language-model pairs. */
#include <stdlib.h>
#include <string.h>

#include "data/data.h"
#include "testutil.h"

static tfc_pipeline *open_yaml(const char *yaml, const char *run_dir, int load, tfc_error *err)
{
    tfc_data_options o = {.key = "data.train", .base_dir = tfc_test_tmpdir(), .seed = 1,
                          .run_dir = run_dir, .load_vocabulary = load};
    tfc_error_clear(err);
    return tfc_pipeline_from_yaml(yaml, &o, err);
}

/* Next element's features as a NUL-terminated string (bytes) into buf. */
static int next_text(tfc_pipeline *p, char *buf, size_t size, int *label)
{
    tfc_batch b;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    if (b.end) return 0;
    size_t n = (size_t)b.features.shape.dim[0];
    if (n >= size) n = size - 1;
    memcpy(buf, b.features.data, n);
    buf[n] = 0;
    if (label) *label = b.labels.data ? *(int32_t *)b.labels.data : -1;
    return 1;
}

static void test_lines_and_records(void)
{
    tfc_test_write("lines.txt", "alpha\nbeta\r\n\nlast", -1);
    tfc_error err;
    char s[256];
    tfc_pipeline *p = open_yaml("{type: text, files: lines.txt}", NULL, 0, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), 4);
    next_text(p, s, sizeof s, NULL);
    CU_ASSERT_STRING_EQUAL(s, "alpha");
    next_text(p, s, sizeof s, NULL);
    CU_ASSERT_STRING_EQUAL(s, "beta");
    next_text(p, s, sizeof s, NULL);
    CU_ASSERT_STRING_EQUAL(s, "");
    next_text(p, s, sizeof s, NULL);
    CU_ASSERT_STRING_EQUAL(s, "last");
    CU_ASSERT_EQUAL(next_text(p, s, sizeof s, NULL), 0);
    tfc_pipeline_free(p);
    p = open_yaml("{type: text, files: lines.txt, skip_empty: true}", NULL, 0, &err);
    CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), 3);
    tfc_pipeline_free(p);
    tfc_test_write("fort_a", "one\nline two\n%\n%\n  \n%\nthree\n%\n", -1);
    tfc_test_write("fort_b", "four\n%\nfive, with \"quotes\"\n", -1);
    tfc_test_write("fort_a.dat", "\x01\x00\x02", 3);
    p = open_yaml("{type: text, files: [\"fort_*\"], exclude: [\"*.dat\"], format: fortune, "
                  "label: file}", NULL, 0, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), 4);
    int label, n;
    next_text(p, s, sizeof s, &label);
    CU_ASSERT_STRING_EQUAL(s, "one\nline two");
    CU_ASSERT_EQUAL(label, 0);
    next_text(p, s, sizeof s, &label);
    CU_ASSERT_STRING_EQUAL(s, "three");
    next_text(p, s, sizeof s, &label);
    CU_ASSERT_STRING_EQUAL(s, "four");
    CU_ASSERT_EQUAL(label, 1);
    next_text(p, s, sizeof s, &label);
    CU_ASSERT_STRING_EQUAL(s, "five, with \"quotes\"");
    const char *const *names = tfc_pipeline_class_names(p, &n);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT_STRING_EQUAL(names[1], "fort_b");
    CU_ASSERT_EQUAL(tfc_pipeline_element_spec(p)->comp[1].dtype, TFC_I32);
    tfc_pipeline_free(p);
    /* Without the exclude the binary .dat file is refused by name. */
    p = open_yaml("{type: text, files: [\"fort_*\"], format: fortune}", NULL, 0, &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "fort_a.dat: binary file"));
    p = open_yaml("{type: text, files: [\"nothing_*\"]}", NULL, 0, &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_EQUAL(err.code, TFC_ERR_CONFIG);
}

static void test_split(void)
{
    char text[256] = "";
    for (int i = 0; i < 10; i++) snprintf(text + strlen(text), 20, "r%d\n", i);
    tfc_test_write("ten.txt", text, -1);
    tfc_error err;
    char s[32];
    int seen[10] = {0};
    const char *parts[2] = {"test", "train"};
    for (int k = 0; k < 2; k++) {
        char yaml[128];
        snprintf(yaml, sizeof yaml, "{type: text, files: ten.txt, split: {every: 3, part: %s}}",
                 parts[k]);
        tfc_pipeline *p = open_yaml(yaml, NULL, 0, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), k ? 6 : 4);
        while (next_text(p, s, sizeof s, NULL)) {
            int r = atoi(s + 1);
            seen[r]++;
            CU_ASSERT_EQUAL(r % 3 == 0, k == 0);
        }
        tfc_pipeline_free(p);
    }
    for (int i = 0; i < 10; i++) CU_ASSERT_EQUAL(seen[i], 1);
    tfc_pipeline *p = open_yaml("{type: text, files: ten.txt, split: {every: 3, part: test, "
                                "offset: 3}}", NULL, 0, &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_EQUAL(err.code, TFC_ERR_CONFIG);
    p = open_yaml("{type: text, files: ten.txt, split: {evry: 3, part: test}}", NULL, 0, &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "did you mean 'every'"));
}

static void test_record_limit(void)
{
    tfc_test_write("long.txt", "short\nthis line is long\nok\n", -1);
    tfc_error err;
    tfc_pipeline *p = open_yaml("{type: text, files: long.txt, max_record_bytes: 8}", NULL, 0, &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_EQUAL(err.line, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.file, "long.txt"));
    p = open_yaml("{type: text, files: long.txt, max_record_bytes: 8, on_error: skip}", NULL, 0,
                  &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), 2);
    CU_ASSERT_EQUAL(tfc_pipeline_skipped(p), 1);
    tfc_pipeline_free(p);
}

static int next_ids(tfc_pipeline *p, int32_t *ids, int cap)
{
    tfc_batch b;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    if (b.end) return -1;
    CU_ASSERT_EQUAL(b.features.dtype, TFC_I32);
    int n = (int)b.features.shape.dim[0];
    for (int i = 0; i < n && i < cap; i++) ids[i] = ((int32_t *)b.features.data)[i];
    return n;
}

static void test_char_vocabulary(void)
{
    tfc_test_write("chars.txt", "aab\nbca\n", -1);
    tfc_error err;
    tfc_pipeline *p = open_yaml("{type: text, files: chars.txt, tokenizer: char}", NULL, 0, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const tfc_vocab *v = tfc_pipeline_vocab(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    /* a: 3, b: 2, c: 1 → ids 2, 3, 4 after <pad> and <unk>. */
    CU_ASSERT_EQUAL(tfc_vocab_size(v), 5);
    CU_ASSERT_STRING_EQUAL(tfc_vocab_token(v, 0), "<pad>");
    CU_ASSERT_STRING_EQUAL(tfc_vocab_token(v, 1), "<unk>");
    CU_ASSERT_STRING_EQUAL(tfc_vocab_token(v, 2), "a");
    CU_ASSERT_STRING_EQUAL(tfc_vocab_token(v, 4), "c");
    int32_t ids[16];
    CU_ASSERT_EQUAL(next_ids(p, ids, 16), 3);
    CU_ASSERT_EQUAL(ids[0], 2);
    CU_ASSERT_EQUAL(ids[2], 3);
    int32_t e[8];
    CU_ASSERT_EQUAL(tfc_vocab_encode(v, "cxa", 3, e, 8), 3);
    CU_ASSERT_EQUAL(e[1], 1);
    const tfc_element_spec *s = tfc_pipeline_element_spec(p);
    CU_ASSERT_EQUAL(s->comp[0].dtype, TFC_I32);
    CU_ASSERT_EQUAL(s->comp[0].shape.dim[0], -1);
    tfc_pipeline_free(p);
}

static void test_word_vocabulary_and_files(void)
{
    tfc_test_write("words.txt", "The cat's hat.\nthe CAT sat, the end\nx\n", -1);
    char run[1024];
    snprintf(run, sizeof run, "%s", tfc_test_path("run"));
    tfc_error err;
    tfc_error_clear(&err);
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", run);
    CU_ASSERT_EQUAL(system(cmd), 0);
    /* Train: builds the vocabulary from its split and writes it to the run folder. */
    tfc_pipeline *p = open_yaml("{type: text, files: words.txt, tokenizer: word, "
                                "split: {every: 3, part: train, offset: 2}}", run, 0, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const tfc_vocab *v = tfc_pipeline_vocab(p);
    CU_ASSERT_STRING_EQUAL(tfc_vocab_token(v, 2), "the"); /* 3 times, lowercased */
    CU_ASSERT_STRING_EQUAL(tfc_vocab_token(v, 3), "cat"); /* "cat" once, "cat's" once: ties */
    int32_t ids[16];
    CU_ASSERT_EQUAL(next_ids(p, ids, 16), 3); /* the / cat's / hat */
    tfc_pipeline_free(p);
    char path[1100];
    snprintf(path, sizeof path, "%s/vocabulary.txt", run);
    tfc_vocab *loaded = tfc_vocab_load(path, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(loaded);
    CU_ASSERT_EQUAL(tfc_vocab_tokenizer(loaded), TFC_TOKENIZER_WORD);
    CU_ASSERT_STRING_EQUAL(tfc_vocab_token(loaded, 2), "the");
    tfc_vocab_free(loaded);
    /* Test: loads it; "x" was never seen in training and becomes <unk>. */
    p = open_yaml("{type: text, files: words.txt, tokenizer: word, "
                  "split: {every: 3, part: test, offset: 2}}", run, 1, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(next_ids(p, ids, 16), 1);
    CU_ASSERT_EQUAL(ids[0], 1);
    tfc_pipeline_free(p);
    /* A test split with no vocabulary to load says where it looked. */
    p = open_yaml("{type: text, files: words.txt, tokenizer: word}", tfc_test_path("none"), 1, &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "vocabulary.txt"));
    /* An explicit vocabulary wins, and its tokenizer must match. */
    p = open_yaml("{type: text, files: words.txt, tokenizer: char, vocabulary: run/vocabulary.txt}",
                  NULL, 0, &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_EQUAL(err.code, TFC_ERR_CONFIG);
}

static void test_vocabulary_escapes(void)
{
    tfc_test_write("esc.txt", "a b\\c\t\xc3\xa9\n%\nzz\n", -1);
    tfc_error err;
    tfc_pipeline *p = open_yaml("{type: text, files: esc.txt, format: fortune, tokenizer: char}",
                                tfc_test_tmpdir(), 0, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const tfc_vocab *v = tfc_pipeline_vocab(p);
    tfc_vocab *w = tfc_vocab_load(tfc_test_path("vocabulary.txt"), &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    CU_ASSERT_EQUAL(tfc_vocab_size(v), tfc_vocab_size(w));
    int utf8 = 0;
    for (int64_t i = 0; i < tfc_vocab_size(v); i++) {
        CU_ASSERT_STRING_EQUAL(tfc_vocab_token(v, i), tfc_vocab_token(w, i));
        utf8 |= !strcmp(tfc_vocab_token(w, i), "\xc3\xa9");
    }
    CU_ASSERT(utf8); /* é is one token */
    tfc_vocab_free(w);
    tfc_pipeline_free(p);
    tfc_test_write("badvocab.txt", "# tfc vocabulary 1 tokenizer=char lowercase=0\n<pad>\n<unk>\na\na\n", -1);
    CU_ASSERT_PTR_NULL(tfc_vocab_load(tfc_test_path("badvocab.txt"), &err));
    CU_ASSERT_EQUAL(err.line, 5);
    tfc_test_write("notvocab.txt", "hello\n", -1);
    tfc_error_clear(&err);
    CU_ASSERT_PTR_NULL(tfc_vocab_load(tfc_test_path("notvocab.txt"), &err));
}

/* `directory:` as Keras's text_dataset_from_directory: class folders in byte order, each
 * .txt file one record labelled with its folder, the files of the folders under a class
 * folder after its own; other files and hidden ones (and hidden folders) left out. */
static void test_directory(void)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd '%s' && mkdir -p reviews/pos reviews/neg/sub "
             "reviews/neg/.cache reviews/.hidden reviews/empty", tfc_test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    tfc_test_write("reviews/pos/b.txt", "Loved it.\nWould watch again.\n", -1);
    tfc_test_write("reviews/pos/a.TXT", "Great film", -1);
    tfc_test_write("reviews/neg/1.txt", "Dull.", -1);
    tfc_test_write("reviews/neg/notes.md", "not a review", -1);
    tfc_test_write("reviews/neg/.swap.txt", "hidden", -1);
    tfc_test_write("reviews/.hidden/x.txt", "hidden", -1);
    tfc_test_write("reviews/neg/sub/2.txt", "Meh.", -1);
    tfc_test_write("reviews/neg/.cache/3.txt", "hidden", -1);
    tfc_error err;
    tfc_pipeline *p = open_yaml("{type: text, directory: reviews}", NULL, 0, &err);
    if (!p) printf("\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), 4);
    int n;
    const char *const *names = tfc_pipeline_class_names(p, &n);
    CU_ASSERT_EQUAL_FATAL(n, 3); /* empty, neg, pos: an empty folder is still a class */
    CU_ASSERT_STRING_EQUAL(names[1], "neg");
    CU_ASSERT_STRING_EQUAL(names[2], "pos");
    const char *want[] = {"Dull.", "Meh.", "Great film", "Loved it.\nWould watch again.\n"};
    int labels[] = {1, 1, 2, 2};
    for (int i = 0; i < 4; i++) {
        char buf[128];
        int label;
        CU_ASSERT_FATAL(next_text(p, buf, sizeof buf, &label));
        CU_ASSERT_STRING_EQUAL(buf, want[i]);
        CU_ASSERT_EQUAL(label, labels[i]);
    }
    tfc_pipeline_free(p);
    /* Lines of the files instead, without labels; and the split by record index. */
    p = open_yaml("{type: text, directory: reviews, format: lines, label: none}", NULL, 0, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), 5);
    CU_ASSERT_PTR_NULL(tfc_pipeline_class_names(p, &n));
    tfc_pipeline_free(p);
    /* classes: picks and orders the folders, as Keras's class_names: pos is class 0 */
    p = open_yaml("{type: text, directory: reviews, classes: [pos, neg]}", NULL, 0, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), 4);
    {
        char buf[128];
        int label;
        CU_ASSERT_FATAL(next_text(p, buf, sizeof buf, &label));
        CU_ASSERT_STRING_EQUAL(buf, "Great film");
        CU_ASSERT_EQUAL(label, 0);
    }
    tfc_pipeline_free(p);
    p = open_yaml("{type: text, directory: reviews, split: {every: 3, part: test}}", NULL, 0,
                  &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), 2); /* records 0 and 3 */
    tfc_pipeline_free(p);
    const char *bad[][2] = {
        {"{type: text, directory: reviews, files: x.txt}", "not both"},
        {"{type: text}", "give `files` or `directory`"},
        {"{type: text, directory: reviews, label: file}", "label is the folder"},
        {"{type: text, files: lines.txt, label: folder}", "needs `directory`"},
        {"{type: text, directory: reviews/empty}", "no class sub-folders"},
        {"{type: text, directory: nowhere}", "nowhere"},
    };
    for (int k = 0; k < 6; k++) {
        p = open_yaml(bad[k][0], NULL, 0, &err);
        CU_ASSERT_PTR_NULL(p);
        if (!strstr(err.text, bad[k][1])) printf("\n%s: %s", bad[k][0], err.text);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, bad[k][1]));
        tfc_pipeline_free(p);
    }
}

static void test_window(void)
{
    tfc_test_write("lm.txt", "abcdefghij\nab\n", -1);
    tfc_error err;
    tfc_pipeline *p = open_yaml("{type: text, files: lm.txt, tokenizer: char}", NULL, 0, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, "map: {op: window, size: 4, random: false}", &err),
                    TFC_OK);
    const tfc_element_spec *s = tfc_pipeline_element_spec(p);
    CU_ASSERT_EQUAL(s->comp[0].shape.dim[0], 4);
    CU_ASSERT_EQUAL(s->comp[1].shape.dim[0], 4);
    CU_ASSERT_EQUAL(s->comp[1].dtype, TFC_I32);
    const tfc_vocab *v = tfc_pipeline_vocab(p);
    tfc_batch b;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    int32_t *x = b.features.data, *y = b.labels.data;
    CU_ASSERT_STRING_EQUAL(tfc_vocab_token(v, x[0]), "a");
    CU_ASSERT_STRING_EQUAL(tfc_vocab_token(v, y[0]), "b");
    CU_ASSERT_STRING_EQUAL(tfc_vocab_token(v, y[3]), "e");
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    x = b.features.data;
    y = b.labels.data;
    CU_ASSERT_STRING_EQUAL(tfc_vocab_token(v, x[1]), "b");
    CU_ASSERT_EQUAL(x[2], 0); /* padding */
    CU_ASSERT_EQUAL(y[1], 0);
    tfc_pipeline_free(p);
    /* Random windows stay inside the record and shift labels by one. */
    p = open_yaml("{type: text, files: lm.txt, tokenizer: char}", NULL, 0, &err);
    CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, "map: {op: window, size: 3}", &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_repeat(p, 20, &err), TFC_OK);
    v = tfc_pipeline_vocab(p);
    int starts[10] = {0};
    for (int k = 0; k < 40; k++) {
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        x = b.features.data;
        y = b.labels.data;
        if (x[2] == 0) continue;
        const char *t0 = tfc_vocab_token(v, x[0]);
        CU_ASSERT_EQUAL(tfc_vocab_token(v, y[0])[0], t0[0] + 1);
        CU_ASSERT_EQUAL(tfc_vocab_token(v, y[2])[0], t0[0] + 3);
        starts[t0[0] - 'a']++;
    }
    int distinct = 0;
    for (int i = 0; i < 10; i++) distinct += starts[i] > 0;
    CU_ASSERT(distinct >= 4);
    CU_ASSERT_EQUAL(starts[7] + starts[8] + starts[9], 0); /* a window needs size + 1 chars */
    tfc_pipeline_free(p);
}

TFC_TEST_MAIN("data_text",
              {"lines_and_records", test_lines_and_records},
              {"split", test_split},
              {"record_limit", test_record_limit},
              {"char_vocabulary", test_char_vocabulary},
              {"word_vocabulary_and_files", test_word_vocabulary_and_files},
              {"vocabulary_escapes", test_vocabulary_escapes},
              {"window", test_window}, {"directory", test_directory})
