/* What the tools say when a user names the wrong thing, walked as a user meets it ($TFC_BIN,
 * as make test builds them; issue 43 "what the tools say"): one exit-code rule for a named
 * file that is missing or of the wrong kind (2, SPEC §3) across every tool; tfc-predict
 * --text with the run's vocabulary and no other; a memory plan larger than the machine
 * refused before allocating, naming the knob that helps. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* Runs the tool command line `fmt` (the tools' folder first on PATH) in the scratch folder
 * and asserts its exit status and that its output holds `want` (NULL: anything). */
static void check(int code, const char *want, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void check(int code, const char *want, const char *fmt, ...)
{
    char line[4096], cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "export PATH='%s':\"$PATH\"; %s", tfc_test_bin("tfc-train"), line);
    tfc_test_sh_expect(code, cmd, want, NULL);
}

/* Two tiny solvers of different models (tiny.yaml, other.yaml: other layer names), npy data
 * beside them, and a short run of each (runs a/ and b/, a snapshot at iteration 4). */
static int write_runs(void)
{
    if (!tfc_test_bin("tfc-train")) return 0;
    tfc_test_write_split("x.npy", "y.npy", 64, 11);
    static const char *yaml =
        "model:\n"
        "  name: %s\n"
        "  input: {shape: [16]}\n"
        "  layers:\n"
        "    - Dense: {name: %s, units: 8, activation: relu}\n"
        "    - Dense: {name: %s, units: 4}\n"
        "data:\n"
        "  train:\n"
        "    source: {type: npy, features: x.npy, labels: y.npy}\n"
        "    pipeline: [{repeat: {}}, {batch: {batch_size: 16}}]\n"
        "  test:\n"
        "    source: {type: npy, features: x.npy, labels: y.npy}\n"
        "    pipeline: [{batch: {batch_size: 32}}]\n"
        "optimizer: {type: adam, learning_rate: 0.01}\n"
        "max_iter: 4\n"
        "test_interval: 4\n"
        "snapshot: {interval: 4}\n"
        "seed: 7\n";
    char text[2048];
    snprintf(text, sizeof text, yaml, "tiny", "hidden", "out");
    tfc_test_write("tiny.yaml", text, -1);
    snprintf(text, sizeof text, yaml, "other", "wide", "head");
    tfc_test_write("other.yaml", text, -1);
    check(0, NULL, "tfc-train tiny.yaml --out a --threads 1 && "
          "tfc-train other.yaml --out b --threads 1");
    return CU_get_number_of_failures() == 0;
}

/* ---- 14. a named file that is missing or of the wrong kind: exit 2 in every tool -------- */

static void test_exit_code_rule(void)
{
    if (!write_runs()) return;
    const char *w = "a/final.safetensors", *state = "a/snapshots/tiny_iter_4.state";
    const char *theirs = "b/final.safetensors";
    /* weights of another model */
    check(2, "matches a variable of this model", "tfc-train tiny.yaml --out t1 --weights %s",
          theirs);
    check(2, "no tensor 'hidden/kernel'", "tfc-test tiny.yaml --weights %s", theirs);
    check(2, "hint: the file holds the weights of model 'other' (its metadata), this is model "
          "'tiny'", "tfc-test tiny.yaml --weights %s", theirs);
    check(2, "no tensor 'hidden/kernel'", "tfc-predict tiny.yaml --weights %s --input x.npy "
          "--output p.npy", theirs);
    check(2, "no tensor 'hidden/kernel'", "tfc-export tiny.yaml --weights %s --onnx m.onnx",
          theirs);
    /* a weights file given to --resume, a state given to --weights */
    check(2, "is not a tfc state file", "tfc-train tiny.yaml --out t2 --resume %s", w);
    check(2, "is a snapshot state", "tfc-train tiny.yaml --out t3 --weights %s", state);
    check(2, "is a snapshot state", "tfc-test tiny.yaml --weights %s", state);
    check(2, "is a snapshot state", "tfc-predict tiny.yaml --weights %s --input x.npy "
          "--output p.npy", state);
    /* a missing weights file, state file, model file, data file, image folder, run folder */
    check(2, "nope.safetensors: error: cannot open", "tfc-test tiny.yaml --weights "
          "nope.safetensors");
    check(2, "nope.safetensors: error: cannot open", "tfc-predict tiny.yaml --weights "
          "nope.safetensors --input x.npy --output p.npy");
    check(2, "nope.safetensors: error: cannot open", "tfc-inspect nope.safetensors");
    check(2, "nope.safetensors: error: cannot open", "tfc-train tiny.yaml --out t4 --weights "
          "nope.safetensors");
    check(2, "nope.state: error: cannot open", "tfc-train tiny.yaml --out t5 --resume nope.state");
    check(2, "nope.yaml: error: cannot open", "tfc-train nope.yaml --out t6");
    check(2, "nope.yaml: error: cannot open", "tfc-summary nope.yaml");
    check(2, "nope.npy: error: cannot open", "tfc-predict tiny.yaml --weights %s --input "
          "nope.npy --output p.npy", w);
    check(2, "nope.npy: error: cannot open", "tfc-train tiny.yaml --out t7 "
          "--set data.train.source.features=nope.npy");
    check(2, "nope.npy: error: cannot open", "tfc-test tiny.yaml --weights %s "
          "--set data.test.source.features=nope.npy", w);
    tfc_test_write("images.yaml", "data:\n  train:\n    source: {type: images, directory: "
                   "nowhere}\n    pipeline: [{batch: {batch_size: 2}}]\n", -1);
    /* relative to the solver's folder, made absolute, as tfc-train names it */
    check(2, "cannot open folder /", "tfc-data images.yaml");
    check(2, "a: error: cannot read: Is a directory", "tfc-test tiny.yaml --weights a");
    check(2, "nowhere: No such file or directory", "tfc-ctl nowhere stop");
    check(2, "no model 'nosuch'", "tfc-zoo info nosuch");
    /* a file of another kind given as weights (a YAML, an .npy): 2; a cut one: 1 */
    check(2, "not a safetensors file", "tfc-test tiny.yaml --weights tiny.yaml");
    check(2, "not a safetensors file", "tfc-inspect x.npy");
    check(1, "truncated file", "head -c 100 %s > cut.safetensors && tfc-inspect "
          "cut.safetensors", w);
    /* a file that is there but damaged stays a runtime failure (1) */
    tfc_test_write("cut.npy", "\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': "
                   "False, 'shape': (64, 16), }", -1);
    check(1, "cut.npy", "tfc-test tiny.yaml --weights %s --set data.test.source.features="
          "cut.npy", w);
}

/* ---- 18. tfc-predict --text: the run's vocabulary, and no other -------------------------- */

/* A text classifier of two files' lines (label: file) with `tokenizer`, trained a few steps
 * into run `out`. */
static int train_text(const char *out, const char *tokenizer)
{
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "model:\n"
             "  name: topic\n"
             "  input: {shape: [12], dtype: int32}\n"
             "  layers:\n"
             "    - Embedding: {input_dim: 64, output_dim: 4, mask_zero: true}\n"
             "    - GlobalAveragePooling1D: {}\n"
             "    - Dense: {units: 2, activation: softmax}\n"
             "data:\n"
             "  train:\n"
             "    source: {type: text, files: [cats.txt, dogs.txt], label: file, "
             "tokenizer: %s}\n"
             "    pipeline: [{map: {op: truncate, length: 12}}, {repeat: {}}, "
             "{padded_batch: {batch_size: 4, padded_shapes: [12]}}]\n"
             "  test:\n"
             "    source: {type: text, files: [cats.txt, dogs.txt], label: file, "
             "tokenizer: %s}\n"
             "    pipeline: [{map: {op: truncate, length: 12}}, "
             "{padded_batch: {batch_size: 4, padded_shapes: [12]}}]\n"
             "optimizer: {type: adam, learning_rate: 0.05}\n"
             "max_iter: 3\n"
             "snapshot: {interval: 0}\n"
             "seed: 3\n", tokenizer, tokenizer);
    char name[64];
    snprintf(name, sizeof name, "%s.yaml", out);
    tfc_test_write(name, yaml, -1);
    check(0, NULL, "tfc-train %s --out %s --threads 1", name, out);
    return CU_get_number_of_failures() == 0;
}

static void test_predict_vocabulary(void)
{
    if (!tfc_test_bin("tfc-predict")) return;
    tfc_test_write("cats.txt", "the cat sat on the mat\na cat purrs\ncats chase mice\n", -1);
    tfc_test_write("dogs.txt", "the dog barks\na dog fetches the ball\ndogs dig holes\n", -1);
    tfc_test_write("ask.txt", "the cat purrs\nthe dog digs\n", -1);
    if (!train_text("word", "word") || !train_text("char", "char")) return;
    /* the run's config.yaml: its vocabulary.txt is found, and gives what --vocabulary gives */
    char *implicit = NULL, *explicit = NULL;
    check(0, "line 2\t", "tfc-predict word/config.yaml --weights word/final.safetensors "
          "--text ask.txt");
    implicit = tfc_test_read(tfc_test_path("out.txt"), NULL);
    check(0, "line 2\t", "tfc-predict word/config.yaml --weights word/final.safetensors "
          "--text ask.txt --vocabulary word/vocabulary.txt");
    explicit = tfc_test_read(tfc_test_path("out.txt"), NULL);
    CU_ASSERT(implicit && explicit && !strcmp(implicit, explicit));
    free(implicit);
    free(explicit);
    /* a model file with no vocabulary.txt beside it, and none given: a usage error */
    check(2, "--text needs --vocabulary", "cp word/config.yaml lone.yaml && tfc-predict "
          "lone.yaml --weights word/final.safetensors --text ask.txt");
    /* another run's vocabulary (a char tokenizer for a word model): refused, both named */
    check(2, "char/vocabulary.txt is not the vocabulary word/final.safetensors was trained "
          "with", "tfc-predict word/config.yaml --weights word/final.safetensors --text ask.txt "
          "--vocabulary char/vocabulary.txt");
    /* the weights record the hash; a vocabulary edited after training is refused too */
    check(0, NULL, "tfc-inspect word/final.safetensors | grep -q vocabulary");
    check(2, "is not the vocabulary", "sed 's/^cat$/kat/' word/vocabulary.txt > edited.txt && "
          "tfc-predict word/config.yaml --weights word/final.safetensors --text ask.txt "
          "--vocabulary edited.txt");
    /* tfc-test: the vocabulary beside the weights is checked the same way (another
     * tokenizer's is refused by the tokenize op itself) */
    check(0, "test: loss", "tfc-test word/config.yaml --weights word/final.safetensors");
    check(2, "data.test's vocabulary is not the vocabulary moved/final.safetensors was trained",
          "mkdir -p moved && cp word/final.safetensors moved/ && cp edited.txt "
          "moved/vocabulary.txt && tfc-test word/config.yaml --weights moved/final.safetensors");
}

/* ---- 21. a plan larger than the machine: refused before allocating, the right knob named -- */

static void test_memory_plan_refused(void)
{
    if (!tfc_test_bin("tfc-train")) return;
    tfc_test_write_split("x.npy", "y.npy", 64, 11);
    /* 10^11 parameters (1.5 TiB with Adam's slots): no batch helps */
    static const char *yaml =
        "model:\n"
        "  name: huge\n"
        "  input: {shape: [%d]}\n"
        "  layers:\n"
        "    - Dense: {name: wide, units: %d}\n"
        "    - Dense: {name: out, units: 4}\n"
        "data:\n"
        "  train:\n"
        "    source: {type: npy, features: x.npy, labels: y.npy}\n"
        "    pipeline: [{repeat: {}}, {batch: {batch_size: %d}}]\n"
        "optimizer: {type: adam, learning_rate: 0.01}\n"
        "max_iter: 4\n";
    char text[1024];
    snprintf(text, sizeof text, yaml, 100000, 1000000, 16);
    tfc_test_write("huge.yaml", text, -1);
    check(1, "the parameters alone do not fit, whatever the batch",
          "tfc-train huge.yaml --out h; rc=$?; test ! -e h && exit $rc"); /* nothing created */
    char *out = tfc_test_read(tfc_test_path("out.txt"), NULL);
    CU_ASSERT(out && strstr(out, "(tfc-summary's plan: parameters, gradients and optimizer state "
                                 "1525955.2 MiB, activations ") &&
              strstr(out, " MiB are available ("));
    free(out);
    /* a small model at a batch of 10^6 examples of 10^6 floats: the batch is the knob */
    snprintf(text, sizeof text, yaml, 1000000, 8, 1000000);
    tfc_test_write("batch.yaml", text, -1);
    check(1, "lower batch_size: the activations grow with it", "tfc-train batch.yaml --out b");
}

TFC_TEST_MAIN("tool_answers", {"memory_plan_refused", test_memory_plan_refused}, {"exit_code_rule", test_exit_code_rule},
              {"predict_vocabulary", test_predict_vocabulary})
