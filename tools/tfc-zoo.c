/* tfc-zoo: the model zoo (SPEC §3). Each model is a folder model_zoo/<name>/ holding
 * model.yaml, solver.yaml, the weights (.safetensors) and README.md whose YAML front matter
 * records the task, data set, test metric, the weights' SHA-256, the training command, time,
 * device and licence. list / info / verify (SHA-256, nettle) / test (re-evaluates the test
 * split and fails below the README's value) / export. The folder: $TFC_ZOO, else the first
 * model_zoo in the folders above this program's. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "tfc.h"

/* The command line, as the option table fills it: the command and its operands in words. */
static const char *word_v[3];
static struct {
    cli_list words;
    const char *device;
    long threads;
    int all, onnx, overwrite;
} args = {.words = CLI_LIST_OF(word_v)};

static const cli_option options[] = {
    {"all", 0, CLI_FLAG, &args.all, NULL, .help = "verify: every model of the zoo"},
    {"onnx", 0, CLI_FLAG, &args.onnx, NULL,
     .help = "export: also write NAME.onnx (tfc-export's defaults: opset 17, dynamic batch)"},
    {"overwrite", 0, CLI_FLAG, &args.overwrite, NULL,
     .help = "export: DIR may hold files; the model's replace those of the same names\n"
             "(the others stay)"},
    CLI_OPT_SOLVER_DEVICE(&args.device),
    CLI_OPT_THREADS(&args.threads),
    {NULL},
};

static const cli_tool tool = {
    .name = "tfc-zoo",
    .operands = "COMMAND",
    .forms = "list\n"
             "info NAME\n"
             "verify NAME|--all\n"
             "test NAME [--device D] [--threads N]\n"
             "export NAME DIR [--onnx] [--overwrite]",
    .about = "The model zoo: each model_zoo/<name>/ has model.yaml, solver.yaml, the weights\n"
             "and a README.md whose front matter gives the task, data set, test metric,\n"
             "SHA-256 of the weights, training command, time, device and licence.\n"
             "  list     one line per model: name, task, metric\n"
             "  info     the README's front matter, the class names the weights record\n"
             "           and the folder's files\n"
             "  verify   checks the weights' SHA-256 against the README (--all: every model)\n"
             "  test     re-evaluates the weights on the solver's test split; fails when the\n"
             "           result is worse than the README's value by more than its tolerance\n"
             "           (default 0.001)\n"
             "  export   verifies, then copies the model's files into DIR (created; a\n"
             "           non-empty DIR is refused unless --overwrite); --onnx adds NAME.onnx",
    .options = options,
    .notes = "The zoo folder is $TFC_ZOO, else the first model_zoo/ found in the parent\n"
             "folders of this program's folder.",
    .exit_status = "0 success, 1 a check failed or a file is unreadable, 2 bad usage (a model\n"
                   "that is not in the zoo) or a malformed README",
    .operand_list = &args.words,
};

#define README_MAX (1u << 20)

/* The README front matter of one model. Strings point into `doc`. */
typedef struct entry {
    char name[256];
    char dir[4400];
    tfc_doc *doc;
    const char *task, *dataset, *metric, *weights, *sha256, *command, *time, *device, *licence;
    double value, tolerance;
    int higher_is_better;
} entry;

static char zoo[4096];

/* $TFC_ZOO, else the first <ancestor>/model_zoo of the program's folder (up to 4 levels:
 * bin/.. for an install, build/<config>/bin/../../.. for a build tree). */
static void find_zoo(const char *argv0)
{
    const char *env = getenv("TFC_ZOO");
    if (env && *env) {
        snprintf(zoo, sizeof zoo, "%s", env);
        return;
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) self[n] = 0;
    else snprintf(self, sizeof self, "%s", argv0);
    for (int up = 0; up < 4; up++) {
        char *slash = strrchr(self, '/');
        if (!slash) break;
        *slash = 0;
        struct stat st;
        snprintf(zoo, sizeof zoo, "%s/../model_zoo", self);
        if (stat(zoo, &st) == 0 && S_ISDIR(st.st_mode)) {
            char real[4096];
            if (realpath(zoo, real)) snprintf(zoo, sizeof zoo, "%s", real);
            return;
        }
    }
    snprintf(zoo, sizeof zoo, "model_zoo");
}

/* A model name is a plain folder name: [A-Za-z0-9_.-], not starting with '.'. */
static int valid_name(const char *s)
{
    if (!*s || *s == '.' || strlen(s) > 200) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '-' || *s == '.'))
            return 0;
    return 1;
}

static const char *scalar(const tfc_node *map, const char *key)
{
    const tfc_node *n = tfc_node_get(map, key);
    return n && n->kind == TFC_NODE_SCALAR && n->str[0] ? n->str : NULL;
}

static void entry_free(entry *e)
{
    tfc_doc_free(e->doc);
    e->doc = NULL;
}

/* Reads model_zoo/NAME/README.md's front matter (between the first two lines "---").
 * Returns 0 and prints why on failure; *code gets the exit status (1 unreadable, 2
 * malformed). */
static int list_names(char ***out);

/* "; did you mean 'NAME'?" for the zoo model closest to `name`, or "" (into buf). */
static const char *near_model(const char *name, char *buf, size_t size)
{
    char **names;
    int n = list_names(&names);
    const char *near = NULL;
    buf[0] = 0;
    if (names) {
        names[n] = NULL;
        near = tfc_did_you_mean(name, (const char *const *)names);
        if (near) snprintf(buf, size, "; did you mean '%s'?", near);
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    return buf;
}

static int entry_load(const char *name, entry *e, int *code)
{
    memset(e, 0, sizeof *e);
    *code = 2;
    if (!valid_name(name)) {
        fprintf(stderr, "tfc-zoo: '%s' is not a model name (letters, digits, _ . -)\n", name);
        return 0;
    }
    snprintf(e->name, sizeof e->name, "%s", name);
    snprintf(e->dir, sizeof e->dir, "%s/%s", zoo, name);
    char path[4600], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/README.md", e->dir);
    tfc_error err;
    tfc_error_clear(&err);
    if (tfc_file_read_all(path, README_MAX, &text, &len, &err)) {
        struct stat st;
        char near[300];
        /* a model the user named that is not there is a usage error (SPEC §3) */
        *code = 2;
        if (stat(e->dir, &st) != 0)
            fprintf(stderr, "tfc-zoo: no model '%s' in %s%s (tfc-zoo list shows them)\n", name,
                    zoo, near_model(name, near, sizeof near));
        else {
            fprintf(stderr, "tfc-zoo: %s", err.text);
            *code = tfc_exit_code(err.code);
        }
        return 0;
    }
    char *end = NULL;
    if (!strncmp(text, "---\n", 4)) end = strstr(text + 3, "\n---\n");
    if (!end) {
        fprintf(stderr, "tfc-zoo: %s: no front matter (a first line '---', YAML keys, a line "
                        "'---')\n", path);
        free(text);
        return 0;
    }
    /* blank the opening marker so line numbers in errors match the file */
    memset(text, ' ', 3);
    e->doc = tfc_doc_load_string(text, (size_t)(end - text) + 1, path, &err);
    free(text);
    if (!e->doc) {
        fprintf(stderr, "tfc-zoo: %s", err.text);
        return 0;
    }
    const tfc_node *r = tfc_doc_root(e->doc);
    const tfc_node *m = tfc_node_get(r, "metric");
    const char *fm_name = scalar(r, "name");
    e->task = scalar(r, "task");
    e->dataset = scalar(r, "dataset");
    e->metric = scalar(m, "name");
    e->weights = scalar(r, "weights");
    e->sha256 = scalar(r, "sha256");
    e->command = scalar(r, "command");
    e->time = scalar(r, "training_time");
    e->device = scalar(r, "device");
    e->licence = scalar(r, "licence");
    const char *value = scalar(m, "value"), *tol = scalar(m, "tolerance");
    const char *hib = scalar(m, "higher_is_better");
    const char *need[] = {"name", "task", "dataset", "metric.name", "metric.value", "weights",
                          "sha256", "command", "training_time", "device", "licence"};
    const char *have[] = {fm_name, e->task, e->dataset, e->metric, value, e->weights,
                          e->sha256, e->command, e->time, e->device, e->licence};
    int ok = 1;
    for (size_t i = 0; i < sizeof need / sizeof *need; i++)
        if (!have[i]) {
            fprintf(stderr, "tfc-zoo: %s: the front matter has no '%s'\n", path, need[i]);
            ok = 0;
        }
    if (!ok) return 0;
    char *stop;
    e->value = strtod(value, &stop);
    if (*stop || !isfinite(e->value)) {
        fprintf(stderr, "tfc-zoo: %s: metric.value '%s' is not a number\n", path, value);
        return 0;
    }
    e->tolerance = 0.001;
    if (tol) {
        e->tolerance = strtod(tol, &stop);
        if (*stop || !(e->tolerance >= 0)) {
            fprintf(stderr, "tfc-zoo: %s: metric.tolerance '%s' is not a number >= 0\n", path, tol);
            return 0;
        }
    }
    e->higher_is_better = strcmp(e->metric, "loss") != 0 && strcmp(e->metric, "bits_per_character") != 0;
    if (hib) e->higher_is_better = !strcmp(hib, "true");
    if (strcmp(fm_name, name) != 0) {
        fprintf(stderr, "tfc-zoo: %s: name '%s' differs from its folder '%s'\n", path, fm_name, name);
        return 0;
    }
    if (strlen(e->sha256) != 64 || strspn(e->sha256, "0123456789abcdef") != 64) {
        fprintf(stderr, "tfc-zoo: %s: sha256 must be 64 lower-case hex digits\n", path);
        return 0;
    }
    if (!valid_name(e->weights)) {
        fprintf(stderr, "tfc-zoo: %s: weights '%s' must be a file name in the model's folder\n",
                path, e->weights);
        return 0;
    }
    *code = 0;
    return 1;
}

/* SHA-256 of a file as 64 hex digits; 0 on read errors (printed). */
static int sha256_file(const char *path, char hex[65])
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "tfc-zoo: cannot open %s: %s\n", path, strerror(errno));
        return 0;
    }
    struct sha256_ctx ctx;
    sha256_init(&ctx);
    static unsigned char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) sha256_update(&ctx, n, buf);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "tfc-zoo: cannot read %s\n", path);
        return 0;
    }
    unsigned char d[SHA256_DIGEST_SIZE];
    sha256_digest(&ctx, sizeof d, d);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    return 1;
}

/* Returns the exit status: 0 the hash matches, 1 it does not or the file is unreadable. */
static int verify(const entry *e, int quiet)
{
    char path[4800], hex[65];
    snprintf(path, sizeof path, "%s/%s", e->dir, e->weights);
    if (!sha256_file(path, hex)) return 1;
    if (strcmp(hex, e->sha256) != 0) {
        fprintf(stderr, "tfc-zoo: %s: SHA-256 mismatch: the file's is %s, README.md says %s\n",
                path, hex, e->sha256);
        return 1;
    }
    if (!quiet) printf("%s: ok (sha256 %s)\n", e->name, hex);
    return 0;
}

/* The model folders in the zoo (those with a README.md), sorted. */
static int list_names(char ***out)
{
    DIR *d = opendir(zoo);
    int n = 0, cap = 16;
    char **names = calloc((size_t)cap, sizeof *names);
    for (struct dirent *de; d && names && (de = readdir(d));) {
        char path[4600];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s/README.md", zoo, de->d_name);
        if (!valid_name(de->d_name) || stat(path, &st) != 0) continue;
        if (n + 1 == cap) { /* room for a NULL after the names */
            char **more = realloc(names, sizeof *names * (size_t)(cap *= 2));
            if (!more) break;
            names = more;
        }
        names[n++] = strdup(de->d_name);
    }
    if (d) closedir(d);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    *out = names;
    return n;
}

/* One line a model: its name, its metric and the task last (free text of any length), the
 * first two columns as wide as their longest entry. */
static int cmd_list(void)
{
    char **names;
    int n = list_names(&names), status = 0, loaded = 0, wname = 0, wmetric = 0;
    entry *all = n > 0 ? calloc((size_t)n, sizeof *all) : NULL;
    if (n == 0) printf("no models in %s\n", zoo);
    if (n > 0 && !all) {
        fprintf(stderr, "tfc-zoo: out of memory\n");
        status = 1;
    }
    for (int i = 0; i < n && all; i++) {
        int code;
        if (entry_load(names[i], &all[loaded], &code)) {
            const entry *e = &all[loaded++];
            int a = (int)strlen(e->name), b = snprintf(NULL, 0, "%s %.4f", e->metric, e->value);
            wname = a > wname ? a : wname;
            wmetric = b > wmetric ? b : wmetric;
        } else {
            entry_free(&all[loaded]);
            status = status > code ? status : code;
        }
    }
    for (int i = 0; i < loaded; i++) {
        char metric[300];
        snprintf(metric, sizeof metric, "%s %.4f", all[i].metric, all[i].value);
        printf("%-*s  %-*s  %s\n", wname, all[i].name, wmetric, metric, all[i].task);
        entry_free(&all[i]);
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    free(all);
    return status;
}

/* The class names the weights file records (metadata "classes", a JSON array), one line. */
static void print_classes(const entry *e)
{
    char path[4800];
    snprintf(path, sizeof path, "%s/%s", e->dir, e->weights);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open(path, &err);
    const char *classes = f ? tfc_st_meta(f, "classes") : NULL;
    printf("classes: %s\n", classes ? classes : "(not recorded in the weights)");
    if (f) tfc_st_close(f);
}

static int cmd_info(const entry *e)
{
    printf("folder: %s\n", e->dir);
    tfc_node_emit(stdout, tfc_doc_root(e->doc));
    print_classes(e);
    printf("files:\n");
    DIR *d = opendir(e->dir);
    for (struct dirent *de; d && (de = readdir(d));) {
        char path[4800];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", e->dir, de->d_name);
        if (de->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode))
            printf("  %-28s %10lld bytes\n", de->d_name, (long long)st.st_size);
    }
    if (d) closedir(d);
    return 0;
}

/* Re-evaluates on the test split (--device, --threads); the metric is a model metric by
 * name, `loss`, or `bits_per_character` (loss / ln 2). */
static int cmd_test(const entry *e)
{
    if (verify(e, 1)) return 1;
    char solver[4600], weights[4800];
    snprintf(solver, sizeof solver, "%s/solver.yaml", e->dir);
    snprintf(weights, sizeof weights, "%s/%s", e->dir, e->weights);
    tfc_solver_options opt = {0};
    opt.device = args.device;
    opt.threads = (int)args.threads;
    tfc_error err;
    tfc_error_clear(&err);
    tfc_eval ev;
    tfc_solver *s = tfc_solver_load(solver, &opt, &err);
    tfc_status st = s ? tfc_solver_evaluate(s, weights, &ev, &err) : err.code;
    if (st) {
        fputs(err.text, stderr);
        tfc_solver_free(s);
        return tfc_exit_code(st);
    }
    char line[512];
    tfc_solver_format_eval(s, &ev, line, sizeof line);
    double got = NAN;
    if (!strcmp(e->metric, "loss")) {
        got = ev.loss;
    } else if (!strcmp(e->metric, "bits_per_character")) {
        got = ev.loss / log(2.0);
    } else {
        const tfc_model *m = tfc_solver_model(s);
        for (int i = 0; i < tfc_model_nmetrics(m); i++)
            if (!strcmp(tfc_model_metric(m, i)->name, e->metric)) got = ev.metric[i];
    }
    tfc_solver_free(s);
    printf("%s: test %s  (%lld examples)\n", e->name, line, (long long)ev.examples);
    if (isnan(got)) {
        fprintf(stderr, "tfc-zoo: %s: the model has no metric '%s'\n", e->name, e->metric);
        return 2;
    }
    int pass = e->higher_is_better ? got >= e->value - e->tolerance
                                   : got <= e->value + e->tolerance;
    printf("%s: %s %.6g, README %.6g (tolerance %g): %s\n", e->name, e->metric, got, e->value,
           e->tolerance, pass ? "ok" : "WORSE");
    return pass ? 0 : 1;
}

static int copy_file(const char *from, const char *to)
{
    char *buf = NULL;
    size_t len = 0;
    tfc_error err;
    tfc_error_clear(&err);
    if (tfc_file_read_all(from, (size_t)1 << 31, &buf, &len, &err)) {
        fprintf(stderr, "tfc-zoo: %s", err.text);
        return 0;
    }
    const void *chunks[1] = {buf};
    int ok = tfc_file_write_atomic(to, chunks, &len, 1, &err) == TFC_OK;
    if (!ok) fprintf(stderr, "tfc-zoo: %s", err.text);
    free(buf);
    return ok;
}

/* DIR/NAME.onnx from the model and its weights (tfc_onnx_export, default options). */
static int export_onnx(const entry *e, const char *dest)
{
    char model[4600], weights[4800], out[4800];
    snprintf(model, sizeof model, "%s/model.yaml", e->dir);
    snprintf(weights, sizeof weights, "%s/%s", e->dir, e->weights);
    snprintf(out, sizeof out, "%s/%s.onnx", dest, e->name);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_load(model, &err);
    tfc_backend *be = m ? tfc_backend_open("cpu", 1, &err) : NULL;
    tfc_status s = m && be ? TFC_OK : err.code;
    if (!s) s = tfc_model_bind(m, be, 1, &err);
    if (!s) s = tfc_model_load_weights(m, weights, NULL, &err);
    if (!s) s = tfc_onnx_export(m, NULL, out, &err);
    if (s) fprintf(stderr, "tfc-zoo: %s", err.text);
    tfc_model_free(m);
    if (be) tfc_backend_free(be);
    return s != TFC_OK;
}

/* Copies the folder's files into DIR, the command's second operand (and with --onnx writes
 * NAME.onnx there). */
static int cmd_export(const entry *e)
{
    const char *dest = args.words.v[2];
    int held = 0;
    DIR *d = opendir(dest);
    for (struct dirent *de; d && (de = readdir(d));)
        held += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    if (d) closedir(d);
    if (held && !args.overwrite) {
        fprintf(stderr, "tfc-zoo: %s is not empty (%d entr%s): the export would overwrite or mix "
                        "with them\n  hint: export into a new or empty folder, or add "
                        "--overwrite to replace the files of the model's names there\n",
                dest, held, held == 1 ? "y" : "ies");
        return 2;
    }
    if (verify(e, 1)) return 1;
    tfc_error err;
    tfc_error_clear(&err);
    if (tfc_mkdir_p(dest, &err)) {
        fprintf(stderr, "tfc-zoo: %s", err.text);
        return 1;
    }
    d = opendir(e->dir);
    int n = 0, ok = 1;
    for (struct dirent *de; d && ok && (de = readdir(d));) {
        char from[4800], to[4800];
        struct stat st;
        snprintf(from, sizeof from, "%s/%s", e->dir, de->d_name);
        if (de->d_name[0] == '.' || stat(from, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        snprintf(to, sizeof to, "%s/%s", dest, de->d_name);
        ok = copy_file(from, to);
        n += ok;
    }
    if (d) closedir(d);
    if (!ok) return 1;
    if (args.onnx) {
        if (export_onnx(e, dest)) return 1;
        n++;
    }
    printf("%s: %d files exported to %s\n", e->name, n, dest);
    return 0;
}

static int cmd_verify(const entry *e)
{
    return verify(e, 0);
}

/* The commands: the operands each takes after its name and what runs it on the model that
 * the first operand names (list takes none and has no such function). */
typedef struct command {
    const char *name;
    int operands;
    const char *takes; /* for the error when the count is wrong */
    int (*run)(const entry *e);
} command;

static const command commands[] = {
    {"list", 0, "no operand", NULL},
    {"info", 1, "one NAME", cmd_info},
    {"verify", 1, "one NAME, or --all", cmd_verify},
    {"test", 1, "one NAME", cmd_test},
    {"export", 2, "NAME DIR", cmd_export},
};
enum { NCOMMANDS = sizeof commands / sizeof *commands };

/* Every model's SHA-256 (verify --all). */
static int verify_all(void)
{
    char **names;
    int n = list_names(&names), status = 0;
    if (n == 0) {
        fprintf(stderr, "tfc-zoo: no models in %s\n", zoo);
        status = 1;
    }
    for (int i = 0; i < n; i++) {
        entry e;
        int code;
        if (entry_load(names[i], &e, &code)) code = verify(&e, 0);
        if (code > status) status = code;
        entry_free(&e);
        free(names[i]);
    }
    free(names);
    return status;
}

/* The command the first word names, or NULL after printing why there is none. */
static const command *find_command(const char *word)
{
    const char *names[NCOMMANDS + 1] = {NULL};
    for (int i = 0; i < NCOMMANDS; i++) {
        if (!strcmp(commands[i].name, word)) return &commands[i];
        names[i] = commands[i].name;
    }
    const char *near = tfc_did_you_mean(word, names);
    char known[128];
    tfc_join_names(known, sizeof known, names);
    if (near) cli_error(&tool, "unknown command '%s'; did you mean '%s'?", word, near);
    else cli_error(&tool, "unknown command '%s' (the commands: %s)", word, known);
    return NULL;
}

int main(int argc, char **argv)
{
    int rc = cli_parse(&tool, argc, argv);
    if (rc >= 0) return rc;
    const command *c = find_command(args.words.v[0]);
    if (!c) return 2;
    int given = args.words.n - 1;
    if (args.all && strcmp(c->name, "verify"))
        return cli_error(&tool, "--all goes with verify only");
    if (args.all ? given != 0 : given != c->operands)
        return cli_error(&tool, "%s takes %s", c->name, c->takes);
    find_zoo(argv[0]);
    if (args.all) return verify_all();
    if (!c->run) return cmd_list();
    entry e;
    int code;
    if (!entry_load(args.words.v[1], &e, &code)) {
        entry_free(&e);
        return code;
    }
    code = c->run(&e);
    entry_free(&e);
    return code;
}
