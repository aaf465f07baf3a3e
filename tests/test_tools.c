/* Tool options no other suite runs ($TFC_BIN, as make test builds them): tfc-predict --text
 * with --vocabulary (tokenized, padded and truncated as docs/data.md says, then the model's
 * forward pass), tfc-inspect --full, tfc-train --keys against docs/solver.md's defaults, an
 * error inside an external `model: FILE` reported at that file's line, tools/grid.sh and
 * tools/zoo-package.sh end to end on a tiny run (the other scripts parse), and the deprecated
 * tfc-predict --scale. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu/cpu.h"
#include "core/safetensors.h"
#include "data/data.h"
#include "graph/model.h"
#include "gradcheck.h"
#include "testutil.h"

static char bin[1024];

/* 1 when the tools are built; else marks the running test skipped. */
static int have_tools(void)
{
    const char *b = getenv("TFC_BIN");
    char cwd[512] = "";
    if (!b) b = "bin";
    if (b[0] != '/' && !getcwd(cwd, sizeof cwd)) cwd[0] = 0;
    snprintf(bin, sizeof bin, "%s%s%s", cwd, cwd[0] ? "/" : "", b);
    char probe[1100];
    snprintf(probe, sizeof probe, "%s/tfc-predict", bin);
    if (access(probe, X_OK) == 0) return 1;
    snprintf(probe, sizeof probe, "no %s/tfc-predict; run through make test", bin);
    tfc_test_skip(probe);
    return 0;
}

/* Runs `cmd` (a shell line; stdout and stderr into the scratch file out.txt); returns the
 * exit status and the output in a malloc'd string. */
static int run(const char *cmd, char **text)
{
    char full[8192];
    snprintf(full, sizeof full, "cd '%s' && (%s) >out.txt 2>&1", tfc_test_tmpdir(), cmd);
    int st = system(full);
    *text = tfc_test_read(tfc_test_path("out.txt"), NULL);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_predict_text(void)
{
    if (!have_tools()) return;
    const char *model = "input: {shape: [5], dtype: int32}\nlayers:\n"
                        "  - Embedding: {input_dim: 6, output_dim: 3}\n"
                        "  - Flatten: {}\n  - Dense: {units: 4}\n";
    tfc_test_write("text_model.yaml", model, -1);
    tfc_test_write("vocab.txt", "# tfc vocabulary 1 tokenizer=word lowercase=1\n"
                                "<pad>\n<unk>\nthe\ncat\nsat\nmat\n", -1);
    tfc_test_write("lines.txt", "The cat sat\nthe dog SAT on the mat\ncat\n", -1);
    /* docs/data.md: lowercased words, <unk> (1) for unknown ones, 0-padded or truncated to
     * the input length 5 (at the end) */
    const int32_t ids[3][5] = {{2, 3, 4, 0, 0}, {2, 1, 4, 1, 2}, {3, 0, 0, 0, 0}};
    tfc_model *m = tfc_test_model(model);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, 3, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_init_weights(m, 4, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_save_weights(m, tfc_test_path("text.safetensors"), &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_forward(m, ids, 3, 0, 0, 0, &err), TFC_OK);
    float want[12];
    tfc_model_get_output(m, want);
    tfc_model_free(m);
    tfc_backend_free(be);

    char cmd[4096], *text;
    snprintf(cmd, sizeof cmd, "'%s/tfc-predict' text_model.yaml --weights text.safetensors "
             "--text lines.txt --vocabulary vocab.txt --output text_y.npy --device cpu "
             "--threads 1", bin);
    int rc = run(cmd, &text);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc) printf("\n%s\n", text);
    free(text);
    tfc_tensor y;
    CU_ASSERT_EQUAL_FATAL(tfc_npy_read(tfc_test_path("text_y.npy"), &y, &err), TFC_OK);
    CU_ASSERT_EQUAL(y.shape.ndim, 2);
    CU_ASSERT(y.shape.dim[0] == 3 && y.shape.dim[1] == 4);
    double worst = 0;
    for (int i = 0; i < 12 && tfc_shape_numel(&y.shape) == 12; i++)
        worst = fmax(worst, fabs(((float *)y.data)[i] - want[i]));
    CU_ASSERT(tfc_shape_numel(&y.shape) == 12 && worst < 1e-6);
    free(y.data);
    /* --text without --vocabulary is a usage error */
    snprintf(cmd, sizeof cmd, "'%s/tfc-predict' text_model.yaml --weights text.safetensors "
             "--text lines.txt --output text_y.npy", bin);
    CU_ASSERT_EQUAL(run(cmd, &text), 2);
    free(text);
}

static void test_inspect_full(void)
{
    if (!have_tools()) return;
    char longv[400];
    for (int i = 0; i < 399; i++) longv[i] = (char)('a' + i % 26);
    longv[399] = 0;
    memcpy(longv + 390, "THE_END__", 9);
    float k[2] = {1, 2};
    tfc_shape s = {.ndim = 1, .dim = {2}};
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_writer *w = tfc_st_writer_create();
    CU_ASSERT_EQUAL(tfc_st_writer_add(w, "k", TFC_F32, &s, k, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_st_writer_set_meta(w, "note", longv, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_st_writer_save(w, tfc_test_path("long.safetensors"), &err), TFC_OK);
    tfc_st_writer_free(w);
    char cmd[2048], *text;
    snprintf(cmd, sizeof cmd, "'%s/tfc-inspect' long.safetensors", bin);
    CU_ASSERT_EQUAL(run(cmd, &text), 0);
    CU_ASSERT(text && !strstr(text, "THE_END__") && strstr(text, "abcdefghij"));
    free(text);
    snprintf(cmd, sizeof cmd, "'%s/tfc-inspect' long.safetensors --full", bin);
    CU_ASSERT_EQUAL(run(cmd, &text), 0);
    CU_ASSERT(text && strstr(text, longv));
    free(text);
}

/* tfc-train --keys: every optimizer's defaults equal docs/solver.md's table, and every
 * lr_policy it lists has a row there. */
static void test_train_keys_match_docs(void)
{
    if (!have_tools()) return;
    char cmd[2048], *text;
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' --keys", bin);
    CU_ASSERT_EQUAL_FATAL(run(cmd, &text), 0);
    char *docs = tfc_test_read("docs/solver.md", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(docs);
    int sections = 0, compared = 0;
    const char *row = NULL;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char type[64], key[64], kind[32], def[64];
        if (sscanf(line, "optimizer: {type: %63[a-z_]}", type) == 1 ||
            sscanf(line, "lr_policy: {type: %63[a-z_]}", type) == 1) {
            char needle[80];
            snprintf(needle, sizeof needle, "| `%s` |", type);
            row = strstr(docs, needle);
            if (!row) printf("\ndocs/solver.md has no row for %s\n", type);
            CU_ASSERT_PTR_NOT_NULL(row);
            sections++;
            if (!strncmp(line, "lr_policy", 9)) row = NULL; /* its table has no defaults */
            continue;
        }
        if (line[0] != ' ') row = NULL;
        if (!row || sscanf(line, " %63s %31s default %63s", key, kind, def) != 3) continue;
        /* the row's "`key` VALUE" */
        char needle[80];
        snprintf(needle, sizeof needle, "`%s` ", key);
        const char *end = strchr(row, '\n'), *at = strstr(row, needle);
        if (!at || at > end) continue; /* adamw: "as adam, plus ..." */
        char dv[64] = "";
        sscanf(at + strlen(needle), "%63[^ ,|]", dv);
        char *e1, *e2;
        double a = strtod(def, &e1), b = strtod(dv, &e2);
        int same = (*e1 == 0 && *e2 == 0) ? a == b : strcmp(def, dv) == 0;
        if (!same) printf("\n%s: --keys says %s, docs/solver.md %s\n", key, def, dv);
        CU_ASSERT(same);
        compared++;
    }
    CU_ASSERT_EQUAL(sections, 27); /* 14 optimizers, 13 policies */
    CU_ASSERT(compared >= 15);
    free(docs);
    free(text);
}

/* A solver whose `model:` names a file with an error: the error is at that file's line. */
static void test_external_model_error(void)
{
    if (!have_tools()) return;
    tfc_test_write_split("tx.npy", "ty.npy", 64, 3);
    tfc_test_write("ext_model.yaml", "input: {shape: [16]}\nlayers:\n  - Dense: {units: 8}\n"
                                     "  - Dense: {untis: 4}\n", -1);
    tfc_test_write("ext_solver.yaml",
                   "model: ext_model.yaml\n"
                   "data:\n  train:\n    source: {type: npy, features: tx.npy, labels: ty.npy}\n"
                   "    pipeline:\n      - batch: {batch_size: 8}\n"
                   "max_iter: 2\n", -1);
    char cmd[2048], *text;
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' ext_solver.yaml --out ext_run --quiet", bin);
    CU_ASSERT_EQUAL(run(cmd, &text), 2);
    CU_ASSERT(text && strstr(text, "ext_model.yaml:4:") && strstr(text, "untis"));
    if (text && !strstr(text, "ext_model.yaml:4:")) printf("\n%s\n", text);
    CU_ASSERT(access(tfc_test_path("ext_run"), F_OK) != 0); /* nothing written */
    free(text);
}

/* tools/grid.sh on a tiny solver whose pipeline has its batch at index 3, as the script's
 * --set expects; then tools/zoo-package.sh packages one of its runs and verifies it. */
static void test_shell_tools(void)
{
    if (!have_tools()) return;
    tfc_test_write_split("gx.npy", "gy.npy", 256, 5);
    tfc_test_write("grid_model.yaml",
                   "name: gtiny\ninput: {shape: [16]}\nlayers:\n"
                   "  - Dense: {units: 8, activation: relu}\n  - Dense: {units: 4}\n"
                   "metrics: [accuracy]\n", -1);
    tfc_test_write("grid_solver.yaml",
                   "model: grid_model.yaml\n"
                   "data:\n  train:\n    source: {type: npy, features: gx.npy, labels: gy.npy}\n"
                   "    pipeline:\n      - shuffle: {buffer_size: 64}\n      - repeat: {}\n"
                   "      - map: {op: scale, factor: 1}\n      - batch: {batch_size: 16}\n"
                   "  test:\n    source: {type: npy, features: gx.npy, labels: gy.npy}\n"
                   "    pipeline:\n      - batch: {batch_size: 64}\n"
                   "max_iter: 10\n", -1);
    char cwd[1024];
    CU_ASSERT_FATAL(getcwd(cwd, sizeof cwd) != NULL);
    char cmd[4096], *text;
    snprintf(cmd, sizeof cmd, "TFC_BIN='%s' sh '%s/tools/grid.sh' grid_solver.yaml gridout", bin,
             cwd);
    int rc = run(cmd, &text);
    CU_ASSERT_EQUAL(rc, 0);
    /* six rows lr,bs,status,accuracy,best,iteration */
    int rows = 0;
    for (char *p = text; p && (p = strstr(p, ",completed,")); p++) rows++;
    CU_ASSERT_EQUAL(rows, 6);
    if (rows != 6) printf("\n%s\n", text ? text : "");
    CU_ASSERT(text && strstr(text, "0.0001,128,completed,"));
    free(text);

    snprintf(cmd, sizeof cmd,
             "TFC_ZOO=zoo PATH='%s':$PATH sh '%s/tools/zoo-package.sh' gtiny "
             "'gridout/lr=0.01,bs=64' grid_solver.yaml 'a test machine' 'a test task' "
             "synthetic && TFC_ZOO=zoo '%s/tfc-zoo' verify gtiny", bin, cwd, bin);
    rc = run(cmd, &text);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc) printf("\n%s\n", text ? text : "");
    free(text);
    /* the packaged model: weights byte-equal to the run's, the model file copied */
    size_t la = 0, lb = 0;
    char *a = tfc_test_read(tfc_test_path("zoo/gtiny/gtiny.safetensors"), &la);
    char *b = tfc_test_read(tfc_test_path("gridout/lr=0.01,bs=64/final.safetensors"), &lb);
    CU_ASSERT(a && b && la == lb && memcmp(a, b, la) == 0);
    free(a);
    free(b);
    a = tfc_test_read(tfc_test_path("zoo/gtiny/README.md"), NULL);
    CU_ASSERT(a && strstr(a, "name: gtiny") && strstr(a, "metric: {name: accuracy"));
    free(a);
    CU_ASSERT(access(tfc_test_path("zoo/gtiny/model.yaml"), F_OK) == 0);
    /* a wrong call: usage, exit 2 */
    snprintf(cmd, sizeof cmd, "sh '%s/tools/zoo-package.sh' gtiny", cwd);
    CU_ASSERT_EQUAL(run(cmd, &text), 2);
    free(text);
    /* the scripts this test cannot run here (install-deps needs root and apt, gpu-bare and
     * bench_gpu and e2e_gpu a GPU machine) at least parse, with the shell their first line
     * names */
    static const char *const parse[] = {"sh tools/install-deps.sh", "bash tools/gpu-bare.sh",
                                        "sh bench/bench_gpu.sh", "sh bench/e2e_gpu.sh"};
    for (size_t i = 0; i < sizeof parse / sizeof *parse; i++) {
        char *sp = strchr(parse[i], ' ');
        snprintf(cmd, sizeof cmd, "%.*s -n '%s/%s'", (int)(sp - parse[i]), parse[i], cwd, sp + 1);
        rc = run(cmd, &text);
        if (rc) printf("\n%s: %s\n", parse[i], text ? text : "");
        CU_ASSERT_EQUAL(rc, 0);
        free(text);
    }
}

/* tfc-predict --scale X (deprecated) is --map '{op: scale, factor: X}': the same outputs. */
static void test_predict_scale(void)
{
    if (!have_tools()) return;
    tfc_test_write("dense.yaml", "input: {shape: [3]}\nlayers:\n  - Dense: {units: 2}\n", -1);
    tfc_model *m = tfc_test_model("input: {shape: [3]}\nlayers:\n  - Dense: {units: 2}\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_init_weights(m, 2, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_save_weights(m, tfc_test_path("dense.safetensors"), &err), TFC_OK);
    const float x[6] = {1, -2, 4, 0.5f, 8, -6}, xs[6] = {0.25f, -0.5f, 1, 0.125f, 2, -1.5f};
    CU_ASSERT_EQUAL_FATAL(tfc_model_forward(m, xs, 2, 0, 0, 0, &err), TFC_OK);
    float want[4];
    tfc_model_get_output(m, want);
    tfc_model_free(m);
    tfc_backend_free(be);
    tfc_tensor t = {TFC_F32, {.ndim = 2, .dim = {2, 3}}, (void *)x, -1};
    CU_ASSERT_EQUAL_FATAL(tfc_npy_write(tfc_test_path("dx.npy"), &t, &err), TFC_OK);
    char cmd[2048], *text;
    snprintf(cmd, sizeof cmd, "'%s/tfc-predict' dense.yaml --weights dense.safetensors --input "
             "dx.npy --output dy.npy --scale 0.25 --device cpu", bin);
    int rc = run(cmd, &text);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc) printf("\n%s\n", text ? text : "");
    free(text);
    tfc_tensor y;
    CU_ASSERT_EQUAL_FATAL(tfc_npy_read(tfc_test_path("dy.npy"), &y, &err), TFC_OK);
    CU_ASSERT(tfc_shape_numel(&y.shape) == 4 && memcmp(y.data, want, sizeof want) == 0);
    free(y.data);
}

/* Issue 19 item 4: a run trained with --set model.... is used by the model tools through its
 * config.yaml (or the model file with the same --set); a model file given where a solver is
 * expected is one error; the model file without the --set does not fit the weights. */
static void test_model_tools_take_run_config(void)
{
    if (!have_tools()) return;
    tfc_test_write_split("rc_x.npy", "rc_y.npy", 64, 21);
    tfc_test_write("rc_model.yaml", "input: {shape: [16]}\nlayers:\n"
                   "  - Dense: {units: 32, activation: relu}\n  - Dense: {units: 4}\n"
                   "loss: sparse_categorical_crossentropy\nmetrics: [accuracy]\n", -1);
    tfc_test_write("rc_solver.yaml", "model: rc_model.yaml\ndata:\n  train:\n"
                   "    source: {type: npy, features: rc_x.npy, labels: rc_y.npy}\n"
                   "    pipeline: [{repeat: {}}, {batch: {batch_size: 16}}]\n"
                   "optimizer: {type: sgd, learning_rate: 0.1}\nmax_iter: 5\n", -1);
    char cmd[4096], *text;
    snprintf(cmd, sizeof cmd, "'%s/tfc-train' rc_solver.yaml --set model.layers.0.Dense.units=8 "
             "--out r_mod --threads 1 --quiet", bin);
    CU_ASSERT_EQUAL_FATAL(run(cmd, &text), 0);
    free(text);
    const char *pred = "--weights r_mod/final.safetensors --input rc_x.npy --device cpu --threads 1";
    /* the model file alone: 32 units, the weights have 8 */
    snprintf(cmd, sizeof cmd, "'%s/tfc-predict' rc_model.yaml %s --output y0.npy", bin, pred);
    CU_ASSERT_NOT_EQUAL(run(cmd, &text), 0);
    free(text);
    /* the run's config.yaml; the model file and the solver with the run's --set */
    const char *forms[][2] = {{"r_mod/config.yaml", ""},
                              {"rc_model.yaml", "--set layers.0.Dense.units=8"},
                              {"rc_model.yaml", "--set model.layers.0.Dense.units=8"},
                              {"rc_solver.yaml", "--set model.layers.0.Dense.units=8"}};
    size_t len0 = 0;
    char *y0 = NULL;
    for (int f = 0; f < 4; f++) {
        snprintf(cmd, sizeof cmd, "'%s/tfc-predict' %s %s %s --output y%d.npy", bin, forms[f][0],
                 forms[f][1], pred, f + 1);
        int rc = run(cmd, &text);
        CU_ASSERT_EQUAL(rc, 0);
        if (rc) printf("\n%s: %s\n", cmd, text);
        free(text);
        char name[16];
        snprintf(name, sizeof name, "y%d.npy", f + 1);
        size_t len = 0;
        char *y = tfc_test_read(tfc_test_path(name), &len);
        CU_ASSERT_PTR_NOT_NULL(y);
        if (f == 0) y0 = y, len0 = len;
        else {
            CU_ASSERT(y && y0 && len == len0 && !memcmp(y, y0, len));
            free(y);
        }
    }
    free(y0);
    /* tfc-draw, tfc-time and tfc-export take the run's config.yaml too */
    snprintf(cmd, sizeof cmd, "'%s/tfc-draw' r_mod/config.yaml", bin);
    CU_ASSERT_EQUAL(run(cmd, &text), 0);
    CU_ASSERT(text && strstr(text, "|(8,)|"));
    free(text);
    snprintf(cmd, sizeof cmd, "'%s/tfc-time' r_mod/config.yaml --batch 4 --iterations 1 "
             "--device cpu --threads 1", bin);
    CU_ASSERT_EQUAL(run(cmd, &text), 0);
    free(text);
    snprintf(cmd, sizeof cmd, "'%s/tfc-export' r_mod/config.yaml --weights "
             "r_mod/final.safetensors --onnx rc.onnx", bin);
    CU_ASSERT_EQUAL(run(cmd, &text), 0);
    free(text);
    /* a model file where a solver is expected: one error, saying so */
    const char *solver_tools[] = {"tfc-train", "tfc-data", "tfc-test"};
    for (int t = 0; t < 3; t++) {
        snprintf(cmd, sizeof cmd, "'%s/%s' rc_model.yaml%s", bin, solver_tools[t],
                 t == 2 ? " --weights r_mod/final.safetensors" : "");
        CU_ASSERT_EQUAL(run(cmd, &text), 2);
        CU_ASSERT(text && strstr(text, "rc_model.yaml:1:1: error: this is a model file"));
        const char *second = text ? strstr(text, "error:") : NULL;
        CU_ASSERT(second && !strstr(second + 1, "error:"));
        free(text);
    }
}

/* Issue 19 item 8: logits are printed as probabilities (their softmax) with a note; a
 * language model's --text lines are continued (greedy), as a hand-run decoding says. */
static void test_predict_logits_and_continuation(void)
{
    if (!have_tools()) return;
    /* a next-token model: 4 steps, vocabulary of 6, scores per step */
    const char *model = "input: {shape: [4], dtype: int32}\nlayers:\n"
                        "  - Embedding: {input_dim: 6, output_dim: 5, mask_zero: true}\n"
                        "  - LSTM: {units: 7, return_sequences: true}\n  - Dense: {units: 6}\n";
    tfc_test_write("lm.yaml", model, -1);
    tfc_test_write("lm_vocab.txt", "# tfc vocabulary 1 tokenizer=char lowercase=0\n"
                                   "<pad>\n<unk>\na\nb\nc\nd\n", -1);
    tfc_test_write("lm_lines.txt", "ab\ndcba\n", -1);
    tfc_model *m = tfc_test_model(model);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, 1, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_init_weights(m, 9, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_save_weights(m, tfc_test_path("lm.safetensors"), &err), TFC_OK);
    /* the expected continuations, 5 tokens each, decoded here step by step */
    const char *letters = "??abcd";
    char want[2][16] = {{0}};
    const int32_t starts[2][4] = {{2, 3, 0, 0}, {5, 4, 3, 2}};
    for (int l = 0; l < 2; l++) {
        int32_t w[4];
        memcpy(w, starts[l], sizeof w);
        int len = l == 0 ? 2 : 4;
        for (int g = 0; g < 5; g++) {
            float y[24];
            CU_ASSERT_EQUAL_FATAL(tfc_model_forward(m, w, 1, 0, 0, 0, &err), TFC_OK);
            tfc_model_get_output(m, y);
            int best = 2;
            for (int k = 3; k < 6; k++)
                if (y[(len - 1) * 6 + k] > y[(len - 1) * 6 + best]) best = k;
            want[l][g] = letters[best];
            if (len == 4) memmove(w, w + 1, 3 * sizeof *w);
            else len++;
            w[len - 1] = best;
        }
    }
    tfc_model_free(m);
    tfc_backend_free(be);
    char cmd[4096], *text, line[64];
    snprintf(cmd, sizeof cmd, "'%s/tfc-predict' lm.yaml --weights lm.safetensors --text "
             "lm_lines.txt --vocabulary lm_vocab.txt --length 5 --device cpu --threads 1", bin);
    CU_ASSERT_EQUAL(run(cmd, &text), 0);
    for (int l = 0; l < 2; l++) {
        snprintf(line, sizeof line, "line %d\t%s\n", l + 1, want[l]);
        CU_ASSERT(text && strstr(text, line));
        if (!text || !strstr(text, line)) printf("\nwant %s in:\n%s\n", line, text);
    }
    free(text);

    /* logits: the text classifier of test_predict_text has a Dense without softmax */
    snprintf(cmd, sizeof cmd, "'%s/tfc-predict' text_model.yaml --weights text.safetensors "
             "--text lines.txt --vocabulary vocab.txt --device cpu --threads 1", bin);
    CU_ASSERT_EQUAL(run(cmd, &text), 0);
    CU_ASSERT(text && strstr(text, "the values printed are the softmax of its outputs (logits)"));
    /* each printed value is a probability of the top class: in [1/4, 1] */
    int lines = 0;
    for (const char *p = text; p && (p = strstr(p, "line ")); p++) {
        const char *tab = strrchr(p, '\n') ? strchr(strchr(p, '\t') + 1, '\t') : NULL;
        double v = tab ? atof(tab + 1) : -1;
        CU_ASSERT(v >= 0.25 && v <= 1.0);
        lines++;
    }
    CU_ASSERT_EQUAL(lines, 3);
    free(text);
}

/* bench/ncu_kernels.py (tools/gpu-bare.sh profile's summary of Nsight Compute's per-kernel
 * durations) on a CSV of ncu's raw page: kernels grouped by name without their parameters,
 * the units row honoured, thousands separators read, totals per step. */
static void test_ncu_summary(void)
{
    if (!tfc_test_python_has("csv")) return;
    const char *f = tfc_test_write(
        "ncu.csv",
        "==PROF== Connected to process 7 (bench_train)\n"
        "\"ID\",\"Kernel Name\",\"Block Size\",\"gpu__time_duration.sum\"\n"
        "\"\",\"\",\"\",\"usecond\"\n"
        "\"0\",\"void colsum_kernel<1, value_of>(long, int, value_of, double *)\",\"(32, 8, 1)\","
        "\"1,004.5\"\n"
        "\"1\",\"affine_kernel(long, int, const float *)\",\"(256, 1, 1)\",\"3\"\n"
        "\"2\",\"void colsum_kernel<1, value_of>(long, int, value_of, double *)\",\"(32, 8, 1)\","
        "\"995.5\"\n"
        "==PROF== Disconnected from process 7\n",
        -1);
    char cmd[4096], *text = NULL;
    char cwd[2048];
    if (!getcwd(cwd, sizeof cwd)) return;
    snprintf(cmd, sizeof cmd, "python3 '%s/bench/ncu_kernels.py' --steps 2 '%s'", cwd, f);
    int rc = run(cmd, &text);
    int ok = rc == 0 && text && strstr(text, "3 kernels, 2003.0 us in all") &&
             strstr(text, "1.5 kernels, 1001.5 us") &&
             strstr(text, "   1000.0  99.9%        1.0  1000.00  colsum_kernel<1, value_of>\n") &&
             strstr(text, "affine_kernel\n");
    if (!ok) printf("\n%s (exit %d)\n", text ? text : "", rc);
    CU_ASSERT(ok);
    free(text);
}

/* tools/gpu-flip.py, which lands held-out GPU kernels once their test-gpu cases have passed
 * on a GPU (docs/gpu.md): every anchor of its edits still matches the code, each set has its
 * gating cases, every cpu_first layer is trained by a test-gpu case and every held-out op
 * has a GPU kernel. Run here so that the script moves with the code it edits. */
static void test_gpu_flip_anchors(void)
{
    char cmd[4096], cwd[2048], *text = NULL;
    if (!getcwd(cwd, sizeof cwd)) return;
    snprintf(cmd, sizeof cmd, "python3 '%s/tools/gpu-flip.py' --check 2>&1", cwd);
    int rc = run(cmd, &text);
    /* each set gated by its cases, or landed already */
    int ok = rc == 0 && text && strstr(text, "precision: ") && strstr(text, "layer-ops: ") &&
             strstr(text, "losses: ");
    if (!ok) printf("\n%s (exit %d)\n", text ? text : "", rc);
    CU_ASSERT(ok);
    free(text);
}

TFC_TEST_MAIN("tools", {"predict_text", test_predict_text}, {"inspect_full", test_inspect_full},
              {"train_keys_match_docs", test_train_keys_match_docs},
              {"external_model_error", test_external_model_error},
              {"shell_tools", test_shell_tools}, {"predict_scale", test_predict_scale},
              {"model_tools_take_run_config", test_model_tools_take_run_config},
              {"predict_logits_and_continuation", test_predict_logits_and_continuation},
              {"ncu_summary", test_ncu_summary}, {"gpu_flip_anchors", test_gpu_flip_anchors})
