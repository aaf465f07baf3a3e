/* The user docs stay true to the code: every layer type and every argument of its schema
 * appears in docs/layers.md under that layer's heading, and README.md's tool table lists, for
 * each tool, exactly the options its --help lists (run from $TFC_BIN, as make test builds
 * them), README's and docs/solver.md's trained-config tables give the figures of the runs
 * model_zoo/'s weights come from, and docs/data.md's fortune examples run as written. */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "layers/layer.h"
#include "testutil.h"

static void test_layers_documented(void)
{
    char *doc = tfc_test_read("docs/layers.md", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    for (int i = 0; tfc_layer_registry[i]; i++) {
        const tfc_layer_ops *o = tfc_layer_registry[i];
        char heading[96];
        snprintf(heading, sizeof heading, "\n## %s\n", o->type);
        char *sec = strstr(doc, heading);
        if (!sec) fprintf(stderr, "\ndocs/layers.md: no section for %s\n", o->type);
        CU_ASSERT_PTR_NOT_NULL(sec);
        if (!sec) continue;
        char *end = strstr(sec + 1, "\n## ");
        size_t len = end ? (size_t)(end - sec) : strlen(sec);
        for (const tfc_field *f = o->schema; f->name; f++) {
            char key[96];
            snprintf(key, sizeof key, "| `%s` |", f->name);
            char *hit = strstr(sec, key);
            int ok = hit && (size_t)(hit - sec) < len;
            if (!ok) fprintf(stderr, "\ndocs/layers.md: %s.%s undocumented\n", o->type, f->name);
            CU_ASSERT(ok);
        }
    }
    free(doc);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* The distinct option names ("--name") that `text` mentions, sorted, space-separated, into
 * buf; --help and --version are left out (every tool has them; the README says so once). */
static void option_names(const char *text, char *buf, size_t size)
{
    char names[64][48];
    int n = 0;
    for (const char *p = text; (p = strstr(p, "--")); p += 2) {
        size_t len = 2;
        while (islower((unsigned char)p[len]) || p[len] == '-') len++;
        if (len == 2 || len >= sizeof names[0] || n == 64) continue;
        char name[48];
        snprintf(name, sizeof name, "%.*s", (int)len, p);
        int seen = !strcmp(name, "--help") || !strcmp(name, "--version");
        for (int i = 0; i < n && !seen; i++) seen = !strcmp(names[i], name);
        if (!seen) snprintf(names[n++], sizeof names[0], "%s", name);
        p += len - 2;
    }
    qsort(names, (size_t)n, sizeof names[0], by_name);
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? " " : "", names[i]);
}

static void test_tool_table(void)
{
    const char *bin = getenv("TFC_BIN");
    char probe[1024];
    snprintf(probe, sizeof probe, "%s/tfc-train", bin ? bin : "bin");
    FILE *f = fopen(probe, "r");
    if (!f) {
        char why[1100];
        snprintf(why, sizeof why, "no %s; run through make test", probe);
        tfc_test_skip(why);
        return;
    }
    fclose(f);
    char *readme = tfc_test_read("README.md", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(readme);
    const char *tools[] = {"train", "test", "predict", "data", "time", "inspect", "draw", "grid",
                           "zoo",   "ctl"};
    for (int i = 0; i < 10; i++) {
        char cmd[1200], help[16384], row_key[64], from_help[2048], from_readme[2048];
        snprintf(cmd, sizeof cmd, "%s/tfc-%s --help", bin ? bin : "bin", tools[i]);
        FILE *p = popen(cmd, "r");
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        size_t len = fread(help, 1, sizeof help - 1, p);
        help[len] = 0;
        CU_ASSERT_EQUAL(pclose(p), 0);
        /* the option list: from "options:" to the next blank line */
        char *list = strstr(help, "\noptions:\n"), *end = list ? strstr(list + 1, "\n\n") : NULL;
        CU_ASSERT_PTR_NOT_NULL_FATAL(end);
        *end = 0;
        /* each option line's own name, not the options that help texts mention */
        char labels[4096] = "";
        for (char *l = strchr(list + 1, '\n'); l; l = strchr(l + 1, '\n')) {
            char *name = strncmp(l + 1, "  -", 3) ? NULL : strstr(l + 1, "--");
            if (name && strlen(labels) + 64 < sizeof labels)
                strncat(labels, name, strcspn(name, " \n") + 1);
        }
        option_names(labels, from_help, sizeof from_help);
        snprintf(row_key, sizeof row_key, "\n| `tfc-%s ", tools[i]);
        char *row = strstr(readme, row_key);
        if (!row) fprintf(stderr, "\nREADME.md: no row for tfc-%s in the tool table\n", tools[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(row);
        char line[2048];
        snprintf(line, sizeof line, "%.*s", (int)strcspn(row + 1, "\n"), row + 1);
        option_names(line, from_readme, sizeof from_readme);
        if (strcmp(from_help, from_readme))
            fprintf(stderr, "\ntfc-%s: --help lists [%s], README.md's row [%s]\n", tools[i],
                    from_help, from_readme);
        CU_ASSERT_STRING_EQUAL(from_help, from_readme);
    }
    free(readme);
}

/* The output of the shell line `cmd` (its stdout; add 2>&1 for stderr) into out[size]. */
static void capture(const char *cmd, char *out, size_t size)
{
    FILE *p = popen(cmd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    pclose(p);
}

/* README's model example, with the typo its error example shows, gives exactly that error
 * (its first three lines: the message, the source line, the caret), from tfc-draw. */
static void test_readme_error_example(void)
{
    char *readme = tfc_test_read("README.md", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(readme);
    char *model = strstr(readme, "```yaml\nname: fashion_cnn\n");
    char *shown = strstr(readme, "```\ncnn.yaml:");
    CU_ASSERT_PTR_NOT_NULL_FATAL(model);
    CU_ASSERT_PTR_NOT_NULL_FATAL(shown);
    model += strlen("```yaml\n");
    *strstr(model, "```") = '\0';
    shown += strlen("```\n");
    *strstr(shown, "```") = '\0';
    char *typo = strstr(model, "filters: 32");
    CU_ASSERT_PTR_NOT_NULL_FATAL(typo);
    memcpy(typo, "filtres", 7);
    const char *dir = tfc_test_tmpdir();
    tfc_test_write("cnn.yaml", model, -1);
    char bin[PATH_MAX], cmd[2048 + PATH_MAX], out[4096] = ""; /* realpath writes up to PATH_MAX */
    CU_ASSERT_PTR_NOT_NULL_FATAL(realpath(getenv("TFC_BIN") ? getenv("TFC_BIN") : "bin", bin));
    /* from the file's folder, so the error names it as README does */
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s/tfc-draw' cnn.yaml 2>&1 >/dev/null", dir, bin);
    capture(cmd, out, sizeof out);
    CU_ASSERT_EQUAL(strncmp(out, shown, strlen(shown)), 0);
    if (strncmp(out, shown, strlen(shown))) printf("\nREADME shows:\n%s\ntfc-draw says:\n%s", shown, out);
    free(readme);
}

/* README's tfc-summary sample is what the command it shows prints, line for line (it pins the
 * convolution path, whose workspace differs between oneDNN's kernels and im2col's). */
static void test_readme_summary_sample(void)
{
    char *readme = tfc_test_read("README.md", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(readme);
    const char *prompt = "```\n$ ";
    char *cmd = strstr(readme, "```\n$ TFC_CPU_CONV=im2col tfc-summary ");
    CU_ASSERT_PTR_NOT_NULL_FATAL(cmd);
    cmd += strlen(prompt);
    char *shown = strchr(cmd, '\n');
    *shown++ = '\0';
    *strstr(shown, "```") = '\0';
    char bin[PATH_MAX], line[2048 + PATH_MAX], out[8192] = "";
    CU_ASSERT_PTR_NOT_NULL_FATAL(realpath(getenv("TFC_BIN") ? getenv("TFC_BIN") : "bin", bin));
    snprintf(line, sizeof line, "PATH='%s':\"$PATH\" %s 2>&1", bin, cmd);
    capture(line, out, sizeof out);
    CU_ASSERT_STRING_EQUAL(out, shown);
    if (strcmp(out, shown)) printf("\nREADME shows:\n%s\n`%s` says:\n%s", shown, cmd, out);
    free(readme);
}

/* The front-matter value of `key` in a zoo README ("key: VALUE"), into buf; 0 if absent. */
static int front_matter(const char *doc, const char *key, char *buf, size_t size)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\n%s: ", key);
    const char *v = strstr(doc, pat);
    if (!v) return 0;
    v += strlen(pat);
    snprintf(buf, size, "%.*s", (int)strcspn(v, "\n"), v);
    return 1;
}

/* Whether `line` holds `want` as a whole figure: not a part of a longer number (0.905 is not in
 * 0.9052, nor 12 s in 112 s). */
static int holds_figure(const char *line, const char *want)
{
    size_t n = strlen(want);
    for (const char *at = strstr(line, want); at; at = strstr(at + 1, want)) {
        int before = at > line && (isdigit((unsigned char)at[-1]) || at[-1] == '.');
        if (!before && !isdigit((unsigned char)at[n])) return 1;
    }
    return 0;
}

/* The row of `doc`'s table that starts with `start` holds `want`; says which doc disagrees. */
static void row_holds(const char *doc, const char *docname, const char *start, const char *want,
                      const char *alt)
{
    const char *row = strstr(doc, start);
    if (!row) fprintf(stderr, "\n%s: no row %s\n", docname, start + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(row);
    row++; /* past the newline before it */
    char line[1024];
    snprintf(line, sizeof line, "%.*s", (int)strcspn(row, "\n"), row);
    int ok = holds_figure(line, want) || (alt && holds_figure(line, alt));
    if (!ok) fprintf(stderr, "\n%s: row %s lacks the zoo's %s\n", docname, start + 1, want);
    CU_ASSERT(ok);
}

/* README's "Trained configs" table and docs/solver.md's results table give, for every CPU-trained
 * zoo model, the test metric and the wall time its model_zoo README's front matter records (the
 * run its weights come from): a retrained model cannot leave the docs behind. */
static void test_zoo_figures(void)
{
    char *readme = tfc_test_read("README.md", NULL), *solver = tfc_test_read("docs/solver.md", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(readme);
    CU_ASSERT_PTR_NOT_NULL_FATAL(solver);
    static const char *const zoo[] = {"fashion_mlp",        "fashion_cnn",       "fashion_cnn_bn",
                                      "fortunes_classify",  "fortunes_char_lstm", "fashion_resnet",
                                      "fortunes_bigru",     "fortunes_char_gru", "fortunes_gpt",
                                      "fashion_mobilenet",  "fortunes_encoder",
                                      "fortunes_conv_bigru", "fortunes_bag_of_bigrams"};
    for (int i = 0; i < (int)(sizeof zoo / sizeof *zoo); i++) {
        char path[256], metric[256], time[256], four[32], three[32], secs[64], start[96];
        snprintf(path, sizeof path, "model_zoo/%s/README.md", zoo[i]);
        char *doc = tfc_test_read(path, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
        CU_ASSERT_FATAL(front_matter(doc, "metric", metric, sizeof metric));
        CU_ASSERT_FATAL(front_matter(doc, "training_time", time, sizeof time));
        const char *value = strstr(metric, "value: ");
        CU_ASSERT_PTR_NOT_NULL_FATAL(value);
        double v = atof(value + 7);
        /* the docs round to 4 or 3 decimals (bits per character: 2.760) */
        snprintf(four, sizeof four, "%.4f", v);
        snprintf(three, sizeof three, "%.3f", v);
        snprintf(secs, sizeof secs, "| %d s", atoi(time + 1));
        snprintf(start, sizeof start, "\n| %s |", zoo[i]);
        row_holds(readme, "README.md", start, four, three);
        row_holds(readme, "README.md", start, secs, NULL);
        if (strstr(doc, "device: \"CPU")) { /* solver.md's table is of CPU runs */
            snprintf(start, sizeof start, "\n| `%s` |", zoo[i]);
            row_holds(solver, "docs/solver.md", start, four, three);
            row_holds(solver, "docs/solver.md", start, secs, NULL);
        }
        free(doc);
    }
    free(readme);
    free(solver);
}

/* Runs `tool` (a tfc-* program) in the scratch folder with `args`; its exit code, the
 * output (stdout and stderr) in `out`. */
static int run_tool(const char *bin, const char *tool, const char *args, char *out, size_t size)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s/%s' %s 2>&1", tfc_test_tmpdir(), bin, tool, args);
    FILE *p = popen(cmd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    size_t n = fread(out, 1, size - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The text of the ```yaml block of `doc` that follows `after` and starts with `head`, into a
 * malloc'd string with every `from` replaced by `to`; NULL if there is none. */
static char *yaml_block(const char *doc, const char *after, const char *head, const char *from,
                        const char *to)
{
    const char *a = strstr(doc, after);
    if (!a) return NULL;
    char open[128];
    snprintf(open, sizeof open, "```yaml\n%s", head);
    const char *b = strstr(a, open);
    if (!b) return NULL;
    b += strlen("```yaml\n");
    const char *e = strstr(b, "```");
    if (!e) return NULL;
    char *text = calloc((size_t)(e - b) * 2 + 1, 1); /* `to` is never twice as long as `from` */
    for (const char *p = b; p < e;) {
        if (!strncmp(p, from, strlen(from))) {
            strcat(text, to);
            p += strlen(from);
        } else {
            strncat(text, p++, 1);
        }
    }
    return text;
}

/* docs/data.md's two fortune examples work as written, on three small fortune files in place
 * of Debian's: tfc-data reads both splits of each, the category example's classes line counts
 * the files, and its solver (the data block with the model block after it, shortened to a few
 * iterations) trains — the issue 19 trap, batches padded to their longest record, fails here. */
static void test_data_examples(void)
{
    const char *bin = tfc_test_bin("tfc-train");
    if (!bin) return;
    char *doc = tfc_test_read("docs/data.md", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    static const char *const files[] = {"fort/alpha", "fort/beta", "fort/gamma"};
    static const char *const words[] = {"cat", "dog", "the", "a", "moon", "sun", "river", "bird",
                                        "stone", "tree", "wind", "and", "of", "quiet", "old"};
    char record[4096];
    mkdir(tfc_test_path("fort"), 0755);
    for (int f = 0; f < 3; f++) {
        size_t used = 0;
        /* 40 records of 20 to 59 words (about 100 to 300 characters): longer than a window */
        for (int r = 0; r < 40 && used < sizeof record - 512; r++) {
            for (int w = 0; w < 20 + (r * 7 + f) % 40 && used < sizeof record - 512; w++)
                used += (size_t)snprintf(record + used, sizeof record - used, "%s%s",
                                         w ? " " : "", words[(r * 3 + w * (f + 2)) % 15]);
            used += (size_t)snprintf(record + used, sizeof record - used, "\n%%\n");
        }
        tfc_test_write(files[f], record, (long)used);
    }
    tfc_test_write("fort/alpha.dat", "\x01\x02\x03", 3); /* excluded by the examples */
    char out[16384];
    char *lm = yaml_block(doc, "Character-level language model", "data:",
                          "/usr/share/games/fortunes/*", "fort/*");
    char *cat = yaml_block(doc, "Category from words", "data:", "/usr/share/games/fortunes/*",
                           "fort/*");
    char *model = yaml_block(doc, "Category from words", "model:", "units: 43", "units: 3");
    CU_ASSERT_PTR_NOT_NULL_FATAL(lm);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cat);
    CU_ASSERT_PTR_NOT_NULL_FATAL(model);
    tfc_test_write("lm.yaml", lm, -1);
    tfc_test_write("cat_data.yaml", cat, -1);
    const char *const solvers[] = {"lm.yaml", "cat_data.yaml"};
    for (int i = 0; i < 2; i++)
        for (int split = 0; split < 2; split++) {
            char args[256];
            snprintf(args, sizeof args, "%s --take 3%s", solvers[i], split ? " --split test" : "");
            int code = run_tool(bin, "tfc-data", args, out, sizeof out);
            if (code) fprintf(stderr, "\ntfc-data %s:\n%s", args, out);
            CU_ASSERT_EQUAL(code, 0);
            /* test: about 12 records, one batch of 256 */
            CU_ASSERT_PTR_NOT_NULL(strstr(out, split ? "\n1 elements" : "\n3 elements"));
        }
    run_tool(bin, "tfc-data", "cat_data.yaml --take 1", out, sizeof out);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "classes: 3 (alpha, beta, gamma)"));
    /* the solver: data + model, 4 iterations, one test pass at the end */
    size_t len = strlen(cat) + strlen(model) + 64;
    char *solver = malloc(len);
    snprintf(solver, len, "%s%s", cat, model);
    char *iters = strstr(solver, "max_iter: 2000\ntest_interval: 500\n");
    CU_ASSERT_PTR_NOT_NULL_FATAL(iters);
    strcpy(iters, "max_iter: 4\ntest_interval: 4\n");
    tfc_test_write("cat.yaml", solver, -1);
    int code = run_tool(bin, "tfc-train", "cat.yaml --out cat_run --quiet", out, sizeof out);
    if (code) fprintf(stderr, "\ntfc-train cat.yaml:\n%s", out);
    CU_ASSERT_EQUAL(code, 0);
    CU_ASSERT(access(tfc_test_path("cat_run/final.safetensors"), R_OK) == 0);
    free(solver);
    free(lm);
    free(cat);
    free(model);
    free(doc);
}

TFC_TEST_MAIN("docs", {"layers_documented", test_layers_documented},
              {"tool_table", test_tool_table}, {"readme_error_example", test_readme_error_example},
              {"readme_summary_sample", test_readme_summary_sample},
              {"zoo_figures", test_zoo_figures}, {"data_examples", test_data_examples})
