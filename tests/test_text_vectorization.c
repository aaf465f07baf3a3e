/* The text_vectorization map op against Keras 3's TextVectorization
 * (tests/ref/keras_text_vectorization.py): per case, the vocabulary adapted on a corpus (or
 * given), its idf weights, and the outputs for held-out texts read by a second pipeline
 * that loads the run folder's vocabulary.txt, as a test split does; then the vocabulary
 * file forms, the configuration errors Keras raises, a model naming the layer, and a
 * classifier trained end to end on text. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/safetensors.h"
#include "data/data.h"
#include "graph/model.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "solver/solver.h"
#include "testutil.h"

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c - 'a' + 10;
}

/* Item k of a comma-separated list of hex strings, decoded into buf; its length or -1. */
static long hex_item(const char *list, int k, char *buf, size_t size)
{
    for (int i = 0; i < k && list; i++) {
        list = strchr(list, ',');
        if (list) list++;
    }
    if (!list) return -1;
    size_t n = 0;
    for (; list[0] && list[0] != ',' && n + 1 < size; list += 2)
        buf[n++] = (char)(hexval(list[0]) * 16 + hexval(list[1]));
    buf[n] = 0;
    return (long)n;
}

static int count_items(const char *list)
{
    int n = 1;
    for (; *list; list++) n += *list == ',';
    return n;
}

/* The records of a hex list written one per line to `name`. */
static void write_lines(const char *name, const char *list)
{
    int n = count_items(list);
    size_t cap = strlen(list) + (size_t)n + 1, len = 0;
    char *text = malloc(cap), buf[512];
    for (int i = 0; i < n; i++) {
        long l = hex_item(list, i, buf, sizeof buf);
        memcpy(text + len, buf, (size_t)l);
        len += (size_t)l;
        text[len++] = '\n';
    }
    tfc_test_write(name, text, (long)len);
    free(text);
}

/* A text source over `file` with `map: {op: text_vectorization, <args>}` after it. */
static tfc_pipeline *open_tv(const char *file, const char *args_json, const char *run,
                             int load, tfc_error *err)
{
    tfc_data_options o = {.key = "data.train", .base_dir = tfc_test_tmpdir(), .seed = 1,
                          .run_dir = run, .load_vocabulary = load};
    char src[256], stage[2048];
    snprintf(src, sizeof src, "{type: text, files: %s}", file);
    size_t al = strlen(args_json);
    snprintf(stage, sizeof stage, "map: {op: text_vectorization%s%.*s}", al > 2 ? ", " : "",
             al > 2 ? (int)al - 2 : 0, args_json + 1);
    tfc_error_clear(err);
    tfc_pipeline *p = tfc_pipeline_from_yaml(src, &o, err);
    if (p && tfc_pipeline_add_yaml(p, stage, err)) {
        tfc_pipeline_free(p);
        return NULL;
    }
    return p;
}

static void test_keras_parity(void)
{
    tfc_st_file *f = tfc_test_fixture("text_vectorization", "text_vectorization");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    const char *corpus = tfc_st_meta(f, "corpus"), *inputs = tfc_st_meta(f, "inputs");
    const char *cases = tfc_st_meta(f, "cases");
    CU_ASSERT_PTR_NOT_NULL_FATAL(cases);
    write_lines("corpus.txt", corpus);
    write_lines("inputs.txt", inputs);
    char run[1024], cmd[1100], names[1024];
    snprintf(run, sizeof run, "%s", tfc_test_path("tv_run"));
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", run);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    snprintf(names, sizeof names, "%s", cases);
    int ncases = 0;
    for (char *save, *name = strtok_r(names, ",", &save); name;
         name = strtok_r(NULL, ",", &save), ncases++) {
        char key[128];
        snprintf(key, sizeof key, "args_%s", name);
        const char *args = tfc_st_meta(f, key);
        snprintf(key, sizeof key, "vocab_%s", name);
        const char *vocab = tfc_st_meta(f, key);
        const tfc_st_tensor *want = tfc_st_find(f, name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(want);
        tfc_error err;
        /* The train split adapts (or takes the given vocabulary) and writes vocabulary.txt. */
        tfc_pipeline *p = open_tv("corpus.txt", args, run, 0, &err);
        if (!p) printf("\n  %s: %s", name, err.text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), 66);
        const tfc_vocab *v = tfc_pipeline_vocab(p);
        CU_ASSERT_PTR_NOT_NULL_FATAL(v);
        int nv = count_items(vocab), vocab_ok = tfc_vocab_size(v) == nv;
        for (int i = 0; vocab_ok && i < nv; i++) {
            char buf[512];
            long l = hex_item(vocab, i, buf, sizeof buf);
            vocab_ok = l >= 0 && !memcmp(tfc_vocab_token(v, i), buf, (size_t)l + 1);
            if (!vocab_ok) printf("\n  %s: id %d is '%s', Keras has '%s'", name, i,
                                  tfc_vocab_token(v, i), buf);
        }
        CU_ASSERT(vocab_ok);
        snprintf(key, sizeof key, "idf_%s", name);
        const tfc_st_tensor *idf = tfc_st_find(f, key);
        CU_ASSERT_EQUAL(idf != NULL, tfc_vocab_idf(v) != NULL);
        double idf_err = 0;
        for (int64_t i = 0; idf && tfc_vocab_idf(v) && i < idf->numel && i < nv; i++) {
            float w;
            memcpy(&w, (const char *)idf->data + 4 * i, 4);
            idf_err = fmax(idf_err, fabs(w - tfc_vocab_idf(v)[i]));
        }
        CU_ASSERT(idf_err < 1e-6);
        char vhash[17];
        tfc_vocab_hash(v, vhash);
        tfc_pipeline_free(p);
        /* The held-out texts through a pipeline that loads the run's vocabulary. */
        p = open_tv("inputs.txt", args, run, 1, &err);
        if (!p) printf("\n  %s: %s", name, err.text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        char lhash[17];
        tfc_vocab_hash(tfc_pipeline_vocab(p) ? tfc_pipeline_vocab(p) : v, lhash);
        int64_t rows = want->shape.dim[0], width = want->shape.dim[1];
        double max_err = 0;
        int mism = 0;
        for (int64_t r = 0; r < rows; r++) {
            tfc_batch b;
            CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
            CU_ASSERT_FATAL(!b.end);
            int64_t n = b.features.shape.dim[0];
            if (want->dtype == TFC_I32) {
                CU_ASSERT_EQUAL(b.features.dtype, TFC_I32);
                mism += n > width;
                for (int64_t i = 0; i < width; i++) {
                    int32_t k;
                    memcpy(&k, (const char *)want->data + 4 * (r * width + i), 4);
                    int32_t got = i < n ? ((int32_t *)b.features.data)[i] : 0;
                    if (got != k && mism++ < 3)
                        printf("\n  %s: row %lld [%lld]: %d, Keras %d", name, (long long)r,
                               (long long)i, got, k);
                }
            } else {
                CU_ASSERT_EQUAL(b.features.dtype, TFC_F32);
                CU_ASSERT_EQUAL_FATAL(n, width);
                for (int64_t i = 0; i < width; i++) {
                    float k;
                    memcpy(&k, (const char *)want->data + 4 * (r * width + i), 4);
                    double d = fabs(((float *)b.features.data)[i] - k);
                    max_err = fmax(max_err, d / fmax(1.0, fabs(k)));
                }
            }
        }
        printf("\n  %-17s vocabulary %4d (%s), idf max diff %.2g, outputs %s max diff %.2g",
               name, nv, vocab_ok ? "equal" : "DIFFERS", idf_err,
               mism ? "DIFFER" : "equal", max_err);
        CU_ASSERT_EQUAL(mism, 0);
        CU_ASSERT(max_err < 1e-6);
        CU_ASSERT_STRING_EQUAL(vhash, lhash); /* the saved vocabulary reloads the same */
        tfc_pipeline_free(p);
    }
    CU_ASSERT(ncases >= 15);
    tfc_st_close(f);
}

/* A vocabulary given as Keras's plain file (one token per line, with or without the special
 * tokens in front) equals the same list given in the YAML. */
static void test_vocabulary_file(void)
{
    tfc_test_write("few.txt", "the cat\nzebra the dog\n", -1);
    tfc_test_write("keras_vocab.txt", "the\ncat\ndog\n\n", -1);
    tfc_test_write("keras_vocab_full.txt", "\r\n[UNK]\r\nthe\r\ncat\r\ndog\r\n", -1);
    const char *forms[] = {"{vocabulary: [the, cat, dog]}", "{vocabulary: keras_vocab.txt}",
                           "{vocabulary: keras_vocab_full.txt}",
                           "{vocabulary: [\"\", \"[UNK]\", the, cat, dog]}"};
    for (int k = 0; k < 4; k++) {
        tfc_error err;
        tfc_pipeline *p = open_tv("few.txt", forms[k], NULL, 0, &err);
        if (!p) printf("\n  %s", err.text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        const tfc_vocab *v = tfc_pipeline_vocab(p);
        CU_ASSERT_EQUAL(tfc_vocab_size(v), 5);
        CU_ASSERT_STRING_EQUAL(tfc_vocab_token(v, 0), "");
        CU_ASSERT_STRING_EQUAL(tfc_vocab_token(v, 1), "[UNK]");
        CU_ASSERT_STRING_EQUAL(tfc_vocab_token(v, 4), "dog");
        tfc_batch b;
        tfc_pipeline_next(p, &b, &err);
        tfc_pipeline_next(p, &b, &err);
        CU_ASSERT_EQUAL_FATAL(b.features.shape.dim[0], 3);
        const int32_t *ids = b.features.data;
        CU_ASSERT(ids[0] == 1 && ids[1] == 2 && ids[2] == 4); /* zebra the dog */
        tfc_pipeline_free(p);
    }
}

/* Keras's own errors for argument combinations, and tfc's for what it leaves out; each at
 * the op's key path. */
static void test_config_errors(void)
{
    tfc_test_write("few.txt", "the cat\nzebra the dog\n", -1);
    struct {
        const char *args, *want;
    } cases[] = {
        {"{output_mode: multi_hot, output_sequence_length: 4}", "output_sequence_length"},
        {"{output_mode: one_hot}", "split: null"},
        {"{max_tokens: 1}", "max_tokens"},
        {"{ngrams: 0}", "ngrams"},
        {"{ngrams: [1, x]}", "ngrams[1]"},
        {"{standardize: upper}", "standardize"},
        {"{split: words}", "split"},
        {"{output_mode: tf_idf, vocabulary: [a, b]}", "idf_weights"},
        {"{idf_weights: [1.0]}", "idf_weights"},
        {"{output_mode: tf_idf, vocabulary: [a], idf_weights: [1, 2]}", "one per vocabulary"},
        {"{vocabulary: [a, b, a]}", "repeats the token \"a\""},
        {"{vocabulary: [a, \"\", b]}", "special token"},
        {"{vocabulary: [a, \"[UNK]\"]}", "special token"},
        {"{vocabulary: [a, b, c], max_tokens: 4}", "over max_tokens 4"},
        {"{vocabulary: []}", "empty"},
        {"{vocabulary: no_such_file.txt}", "no_such_file.txt"},
        {"{sparse: true}", "sparse"},
        {"{ragged: true}", "ragged"},
        {"{encoding: latin-1}", "encoding"},
        {"{output_mode: count, pad_to_max_tokens: true}", "needs max_tokens"},
        {"{output_mode: tfidf}", "output_mode"},
        {"{max_token: 5}", "did you mean 'max_tokens'"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        tfc_error err;
        tfc_pipeline *p = open_tv("few.txt", cases[k].args, NULL, 0, &err);
        CU_ASSERT_PTR_NULL(p);
        if (p) printf("\n  accepted: %s", cases[k].args);
        tfc_pipeline_free(p);
        if (!strstr(err.text, cases[k].want) || !strstr(err.text, "data.train"))
            printf("\n  %s: expected '%s' in: %s", cases[k].args, cases[k].want, err.text);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, cases[k].want));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "data.train"));
    }
    /* Keras's deprecated spellings of two modes are accepted. */
    tfc_error err;
    tfc_pipeline *p = open_tv("few.txt", "{output_mode: binary}", NULL, 0, &err);
    CU_ASSERT_PTR_NOT_NULL(p);
    CU_ASSERT_EQUAL(tfc_vocab_text_spec(tfc_pipeline_vocab(p))->output_mode, TFC_TEXT_MULTI_HOT);
    tfc_pipeline_free(p);
}

/* A test split loading a vocabulary adapted with other settings is refused, naming the
 * setting; so is the tokenize op's vocabulary. */
static void test_settings_must_match(void)
{
    tfc_test_write("few.txt", "the cat\nzebra the dog\n", -1);
    char run[1024], cmd[1100];
    snprintf(run, sizeof run, "%s", tfc_test_path("tv_match"));
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", run);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    tfc_error err;
    tfc_pipeline *p = open_tv("few.txt", "{ngrams: 2}", run, 0, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    tfc_pipeline_free(p);
    p = open_tv("few.txt", "{ngrams: 2, split: character}", run, 1, &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "split differs"));
    p = open_tv("few.txt", "{}", run, 1, &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "ngrams differ"));
    p = open_tv("few.txt", "{ngrams: [1, 2], output_mode: count}", run, 1, &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "output_mode differs"));
    p = open_tv("few.txt", "{ngrams: [1, 2]}", run, 1, &err); /* the same widths */
    CU_ASSERT_PTR_NOT_NULL(p);
    tfc_pipeline_free(p);
    /* A damaged vocabulary file is an error at its line. */
    char path[1100];
    snprintf(path, sizeof path, "%s/vocabulary.txt", run);
    tfc_test_write("tv_match/vocabulary.txt",
                   "# tfc vocabulary 1 tokenizer=keras standardize=lower split=whitespace "
                   "ngrams=null output_mode=tf_idf\n[UNK]\t0.5\nthe\n", -1);
    tfc_error_clear(&err);
    CU_ASSERT_PTR_NULL(tfc_vocab_load(path, &err));
    CU_ASSERT_EQUAL(err.line, 3);
    tfc_test_write("tv_match/vocabulary.txt",
                   "# tfc vocabulary 1 tokenizer=keras standardize=lower split=whitespace "
                   "ngrams=null output_mode=int\nthe\n", -1);
    tfc_error_clear(&err);
    CU_ASSERT_PTR_NULL(tfc_vocab_load(path, &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "[UNK]"));
    tfc_test_write("tv_match/vocabulary.txt",
                   "# tfc vocabulary 1 tokenizer=keras standardize=upper split=whitespace "
                   "ngrams=null output_mode=int\n\n[UNK]\n", -1);
    tfc_error_clear(&err);
    CU_ASSERT_PTR_NULL(tfc_vocab_load(path, &err));
    CU_ASSERT_EQUAL(err.line, 1);
}

/* A model naming TextVectorization is pointed to the op; one whose input is Keras's int64
 * ids (the dtype TextVectorization gives) reads them as int32. */
static void test_layer_points_to_op(void)
{
    tfc_model *m = tfc_test_model("input: {shape: [8], dtype: int64}\nlayers:\n"
                                  "  - Embedding: {input_dim: 50, output_dim: 4}\n"
                                  "  - GlobalAveragePooling1D: {}\n  - Dense: {units: 2}\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL(tfc_model_input_dtype(m), TFC_I32);
    tfc_model_free(m);
    tfc_error err = tfc_test_model_error("input: {shape: [1]}\nlayers:\n"
                                         "  - TextVectorization: {max_tokens: 100}\n"
                                         "  - Dense: {units: 2}\n");
    printf("\n  %s", err.text);
    CU_ASSERT_EQUAL(err.code, TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "op: text_vectorization"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "layers[0]"));
    /* Keras layers left out on purpose say why and what to write instead. */
    const char *left_out[][2] = {{"StringLookup", "string_lookup"}, {"Lambda", "Python"},
                                 {"TFSMLayer", "SavedModel"}, {"ReversibleEmbedding", "Dense"}};
    for (int k = 0; k < 4; k++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [4]}\nlayers:\n  - Dense: {units: 3}\n"
                 "  - %s: {}\n", left_out[k][0]);
        err = tfc_test_model_error(yaml);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "layers[1]"));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "is not in tfc"));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, left_out[k][1]));
        CU_ASSERT_PTR_NULL(strstr(err.text, "known:"));
    }
}

/* Which of three made-up topics a line is about, from its words (label: file): multi_hot
 * over the adapted vocabulary into a softmax, trained and tested on disjoint lines. Each of
 * a line's 10 words is a topic word with probability 1/4, so 94% of lines have one. */
static void test_trains_topics(void)
{
    static const char *const topics[3][6] = {
        {"goal", "match", "team", "score", "coach", "league"},
        {"bake", "oven", "flour", "sugar", "dough", "recipe"},
        {"orbit", "planet", "rocket", "star", "launch", "moon"}};
    static const char *const common[] = {"the", "a", "with", "and", "of", "today"};
    uint64_t s = 12345;
    for (int t = 0; t < 3; t++) {
        char name[32], *text = malloc(200 * 100), *o = text;
        for (int line = 0; line < 200; line++) {
            for (int w = 0; w < 10; w++) {
                s = s * 6364136223846793005ULL + 1442695040888963407ULL;
                int r = (int)(s >> 33) % 12;
                const char *word = r < 3 ? topics[t][(s >> 40) % 6] : common[(s >> 40) % 6];
                o += sprintf(o, "%s%s", w ? " " : "", word);
            }
            *o++ = '\n';
        }
        snprintf(name, sizeof name, "topic_%d.txt", t);
        tfc_test_write(name, text, o - text);
        free(text);
    }
    const char *yaml =
        "model:\n  name: topics\n  input: {shape: [40]}\n  layers:\n"
        "    - Dense: {units: 3, activation: softmax}\n"
        "  loss: sparse_categorical_crossentropy\n  metrics: [accuracy]\n"
        "data:\n  train:\n"
        "    source: {type: text, files: [\"topic_*.txt\"], label: file, "
        "split: {every: 4, part: train}}\n"
        "    pipeline:\n"
        "      - map: {op: text_vectorization, max_tokens: 40, output_mode: multi_hot, "
        "pad_to_max_tokens: true}\n"
        "      - shuffle: {buffer_size: 600}\n      - repeat: {}\n"
        "      - batch: {batch_size: 32}\n"
        "  test:\n"
        "    source: {type: text, files: [\"topic_*.txt\"], label: file, "
        "split: {every: 4, part: test}}\n"
        "    pipeline:\n"
        "      - map: {op: text_vectorization, max_tokens: 40, output_mode: multi_hot, "
        "pad_to_max_tokens: true}\n"
        "      - batch: {batch_size: 50}\n"
        "optimizer: {type: adam, learning_rate: 0.05}\n"
        "max_iter: 150\ntest_interval: 150\ndisplay: 50\nseed: 3\n";
    tfc_error err;
    tfc_train_result res;
    tfc_status st = tfc_test_train_result(yaml, "topics.yaml", "topics", &res, &err);
    if (st) fprintf(stderr, "\n%s", err.text);
    CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
    printf("\n  topics from words (multi_hot): test accuracy %.3f", res.test.metric[0]);
    CU_ASSERT(res.have_test && res.test.metric[0] > 0.9);
    /* Without pad_to_max_tokens the vectors are the adapted vocabulary's width (25 here),
     * not the model's 40: the error says which setting makes them 40. */
    char *nopad = strdup(yaml);
    for (char *q; (q = strstr(nopad, ", pad_to_max_tokens: true"));)
        memmove(q, q + 25, strlen(q + 25) + 1);
    tfc_status st2 = tfc_test_train_result(nopad, "topics_nopad.yaml", "topics_nopad", &res,
                                           &err);
    free(nopad);
    CU_ASSERT_EQUAL(st2, TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "(-1, 25)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "pad_to_max_tokens: true"));
    /* The run wrote the adapted vocabulary beside its weights, and tfc-predict --text
     * vectorizes lines with it: one line per topic, of that topic's words only. */
    CU_ASSERT_EQUAL(access(tfc_test_path("topics/vocabulary.txt"), R_OK), 0);
    tfc_test_write("ask.txt", "Goal! The team, the coach.\nsugar and flour in the oven\n"
                   "a rocket to the moon\n", -1);
    const char *bin = getenv("TFC_BIN");
    char cmd[4096], out[4096] = "";
    snprintf(cmd, sizeof cmd, "'%s/tfc-predict' '%s/topics/config.yaml' --weights "
             "'%s/topics/final.safetensors' --text '%s/ask.txt' --device cpu 2>&1",
             bin ? bin : "bin", tfc_test_tmpdir(), tfc_test_tmpdir(), tfc_test_tmpdir());
    FILE *f = popen(cmd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    CU_ASSERT_EQUAL(pclose(f), 0);
    printf("\n%s", out);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "line 1\ttopic_0"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "line 2\ttopic_1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "line 3\ttopic_2"));
}

/* Writes a CSV `name` of n rows "label,message": spam rows use sales words, ham rows chat
 * words, both with common filler; `only_spam` leaves ham out. */
static void write_messages(const char *name, int n, uint64_t seed, int only_spam)
{
    static const char *const spam[] = {"win", "prize", "free", "cash", "claim", "offer", "call"};
    static const char *const ham[] = {"lunch", "later", "home", "mum", "movie", "tonight", "ok"};
    static const char *const filler[] = {"the", "you", "now", "to", "a", "for", "is"};
    char *text = malloc((size_t)n * 96 + 32), *o = text;
    o += sprintf(o, "label,message\n");
    for (int r = 0; r < n; r++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        int is_spam = only_spam || (seed >> 60) < 6;
        o += sprintf(o, "%s,\"", is_spam ? "spam" : "ham");
        for (int w = 0; w < 8; w++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            const char *const *bag = (seed >> 61) < 3 ? (is_spam ? spam : ham) : filler;
            o += sprintf(o, "%s%s%s", w ? " " : "", bag[(seed >> 40) % 7], w == 3 ? "," : "");
        }
        o += sprintf(o, "%s\"\n", is_spam ? "!!" : ".");
    }
    tfc_test_write(name, text, o - text);
    free(text);
}

/* A CSV of labelled messages (class names, a text column) trains a bag-of-words classifier
 * through text_vectorization (tf_idf); a test file whose class names are not the train
 * file's is refused before training. */
static void test_trains_csv(void)
{
    write_messages("sms_train.csv", 600, 1, 0);
    write_messages("sms_test.csv", 200, 2, 0);
    write_messages("sms_spam.csv", 50, 3, 1);
    const char *solver =
        "model:\n  name: sms\n  input: {shape: [30]}\n  layers:\n"
        "    - Dense: {units: 2, activation: softmax}\n"
        "  loss: sparse_categorical_crossentropy\n  metrics: [accuracy]\n"
        "data:\n  train:\n"
        "    source: {type: csv, file: sms_train.csv, text_column: message, "
        "label_column: label, label_dtype: string}\n"
        "    pipeline:\n"
        "      - map: {op: text_vectorization, max_tokens: 30, output_mode: tf_idf, "
        "pad_to_max_tokens: true}\n"
        "      - shuffle: {buffer_size: 600}\n      - repeat: {}\n"
        "      - batch: {batch_size: 32}\n"
        "  test:\n"
        "    source: {type: csv, file: %s, text_column: message, "
        "label_column: label, label_dtype: string}\n"
        "    pipeline:\n"
        "      - map: {op: text_vectorization, max_tokens: 30, output_mode: tf_idf, "
        "pad_to_max_tokens: true}\n"
        "      - batch: {batch_size: 50}\n"
        "optimizer: {type: adam, learning_rate: 0.05}\n"
        "max_iter: 100\ntest_interval: 100\ndisplay: 50\nseed: 3\n";
    char yaml[2048];
    snprintf(yaml, sizeof yaml, solver, "sms_test.csv");
    tfc_error err;
    tfc_train_result res;
    tfc_status st = tfc_test_train_result(yaml, "sms.yaml", "sms", &res, &err);
    if (st) fprintf(stderr, "\n%s", err.text);
    CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
    printf("\n  spam or ham from a CSV (tf_idf): test accuracy %.3f", res.test.metric[0]);
    CU_ASSERT(res.have_test && res.test.metric[0] > 0.9);
    snprintf(yaml, sizeof yaml, solver, "sms_spam.csv"); /* its class 0 is spam */
    st = tfc_test_train_result(yaml, "sms_spam.yaml", "sms_spam", &res, &err);
    printf("\n  %s", err.text);
    CU_ASSERT_EQUAL(st, TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "data.train has 2 classes (ham, spam) and "
                                            "data.test 1 (spam)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "`classes:`"));
}

TFC_TEST_MAIN("text_vectorization", {"keras_parity", test_keras_parity},
              {"vocabulary_file", test_vocabulary_file}, {"config_errors", test_config_errors},
              {"settings_must_match", test_settings_must_match},
              {"layer_points_to_op", test_layer_points_to_op},
              {"trains_topics", test_trains_topics}, {"trains_csv", test_trains_csv})
