/* tfc-zoo end to end ($TFC_BIN/tfc-zoo and tfc-train): a scratch zoo with one model trained
 * here on a synthetic fixture (NumPy files this test writes) is listed, shown, verified,
 * re-evaluated (passing at its real metric, failing above it) and exported; a flipped byte
 * in the weights fails `verify`; malformed READMEs and bad names are refused (exit 2); and
 * every model of the repository's model_zoo/ (there is at least one) matches its SHA-256. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data/data.h"
#include "testutil.h"

static char out[1 << 16];

static void tool(char *buf, size_t size, const char *name)
{
    const char *bin = getenv("TFC_BIN");
    char cwd[2048] = "";
    if (!bin) bin = "bin";
    if (bin[0] != '/' && !getcwd(cwd, sizeof cwd)) cwd[0] = 0;
    snprintf(buf, size, "%s%s%s/%s", cwd, cwd[0] ? "/" : "", bin, name);
}

/* Runs `env TFC_ZOO=zoo <bin>/<name> args` in the scratch folder; output in `out`. */
static int run(const char *zoo, const char *name, const char *args)
{
    char exe[2048], cmd[8192];
    tool(exe, sizeof exe, name);
    snprintf(cmd, sizeof cmd, "cd '%s' && TFC_ZOO='%s' '%s' %s 2>&1", tfc_test_tmpdir(), zoo, exe,
             args);
    FILE *p = popen(cmd, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void write_split(const char *path, int n, uint64_t seed, int labels)
{
    float *x = malloc(sizeof(float) * 8 * (size_t)n);
    int32_t *y = malloc(sizeof(int32_t) * (size_t)n);
    uint64_t s = seed;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < 8; j++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            x[i * 8 + j] = (float)((double)(s >> 11) / 9007199254740992.0 * 2 - 1);
        }
        y[i] = x[i * 8] + x[i * 8 + 1] > 0; /* a linearly separable label */
    }
    tfc_tensor tx = {TFC_F32, {2, {n, 8}}, x, -1}, ty = {TFC_I32, {1, {n}}, y, -1};
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_npy_write(path, labels ? &ty : &tx, &err), TFC_OK);
    free(x);
    free(y);
}

static char zoo[1024], model_dir[1200], accuracy[64];

/* A zoo with one model, "tiny": trained here with tfc-train, packaged as a zoo entry whose
 * README carries the run's real accuracy and the weights' SHA-256 (sha256sum). */
static void make_zoo(const char *value)
{
    snprintf(zoo, sizeof zoo, "%s/zoo", tfc_test_tmpdir());
    snprintf(model_dir, sizeof model_dir, "%s/tiny", zoo);
    char path[2048], cmd[4096];
    if (!accuracy[0]) {
        mkdir(zoo, 0777);
        mkdir(model_dir, 0777);
        snprintf(path, sizeof path, "%s/x.npy", tfc_test_tmpdir());
        write_split(path, 300, 5, 0);
        snprintf(path, sizeof path, "%s/y.npy", tfc_test_tmpdir());
        write_split(path, 300, 5, 1);
        snprintf(path, sizeof path, "%s/model.yaml", model_dir);
        FILE *f = fopen(path, "w");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        fputs("name: tiny\ninput: {shape: [8]}\nlayers:\n"
              "  - Dense: {name: hidden, units: 8, activation: relu}\n"
              "  - Dense: {name: out, units: 2}\nmetrics: [accuracy]\n", f);
        fclose(f);
        snprintf(path, sizeof path, "%s/solver.yaml", model_dir);
        f = fopen(path, "w");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        fprintf(f, "model: model.yaml\n"
                   "data:\n"
                   "  train:\n"
                   "    source: {type: npy, features: %s/x.npy, labels: %s/y.npy}\n"
                   "    pipeline: [{repeat: {}}, {batch: {batch_size: 20}}]\n"
                   "  test:\n"
                   "    source: {type: npy, features: %s/x.npy, labels: %s/y.npy}\n"
                   "    pipeline: [{batch: {batch_size: 100}}]\n"
                   "optimizer: {type: adam, learning_rate: 0.02}\n"
                   "max_iter: 60\ndisplay: 0\nseed: 2\n",
                tfc_test_tmpdir(), tfc_test_tmpdir(), tfc_test_tmpdir(), tfc_test_tmpdir());
        fclose(f);
        char args[4096];
        snprintf(args, sizeof args, "'%s/solver.yaml' --threads 1 --out run", model_dir);
        CU_ASSERT_EQUAL_FATAL(run(zoo, "tfc-train", args), 0);
        snprintf(cmd, sizeof cmd, "cp '%s/run/final.safetensors' '%s/tiny.safetensors'",
                 tfc_test_tmpdir(), model_dir);
        CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
        /* the run's real final test accuracy */
        snprintf(path, sizeof path, "%s/run/summary.json", tfc_test_tmpdir());
        char *sum = tfc_test_read(path, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(sum);
        char *t = strstr(sum, "\"test\"");
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        t = strstr(t, "\"accuracy\": ");
        CU_ASSERT_PTR_NOT_NULL_FATAL(t);
        snprintf(accuracy, sizeof accuracy, "%.*s", (int)strcspn(t + 12, "\n ,}"), t + 12);
        free(sum);
    }
    snprintf(cmd, sizeof cmd,
             "cd '%s' && sha=$(sha256sum tiny.safetensors | cut -d' ' -f1) && "
             "printf -- '---\\nname: tiny\\ntask: binary classification\\ndataset: synthetic\\n"
             "metric: {name: accuracy, value: %s}\\nweights: tiny.safetensors\\nsha256: %%s\\n"
             "command: \"tfc-train solver.yaml\"\\ntraining_time: 1 s\\ndevice: cpu\\n"
             "licence: MIT\\n---\\n\\n# tiny\\n' \"$sha\" > README.md",
             model_dir, value ? value : accuracy);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
}

static void test_list_info_verify(void)
{
    make_zoo(NULL);
    CU_ASSERT_EQUAL(run(zoo, "tfc-zoo", "list"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "tiny "));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "binary classification"));
    /* the task, free text of any length, comes last: the metric column stays aligned */
    CU_ASSERT(strstr(out, "tiny  accuracy ") && strstr(out, "accuracy ") < strstr(out, "binary"));
    CU_ASSERT_EQUAL(run(zoo, "tfc-zoo", "info tiny"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "dataset: synthetic"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "tiny.safetensors"));
    CU_ASSERT_EQUAL(run(zoo, "tfc-zoo", "verify tiny"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "tiny: ok (sha256 "));
    CU_ASSERT_EQUAL(run(zoo, "tfc-zoo", "verify --all"), 0);
    CU_ASSERT_EQUAL(run(zoo, "tfc-zoo", "--version"), 0);
    CU_ASSERT_EQUAL(run(zoo, "tfc-zoo", "--help"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: tfc-zoo list"));
}

static void test_flipped_byte(void)
{
    make_zoo(NULL);
    char path[2048];
    snprintf(path, sizeof path, "%s/tiny.safetensors", model_dir);
    FILE *f = fopen(path, "r+b");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fseek(f, -5, SEEK_END);
    int c = fgetc(f);
    fseek(f, -5, SEEK_END);
    fputc(c ^ 0x01, f);
    fclose(f);
    CU_ASSERT_EQUAL(run(zoo, "tfc-zoo", "verify tiny"), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "SHA-256 mismatch"));
    CU_ASSERT_EQUAL(run(zoo, "tfc-zoo", "verify --all"), 1);
    CU_ASSERT_EQUAL(run(zoo, "tfc-zoo", "test tiny"), 1); /* test verifies first */
    f = fopen(path, "r+b");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fseek(f, -5, SEEK_END);
    fputc(c, f);
    fclose(f);
    CU_ASSERT_EQUAL(run(zoo, "tfc-zoo", "verify tiny"), 0);
}

static void test_reevaluate(void)
{
    make_zoo(NULL);
    CU_ASSERT_EQUAL(run(zoo, "tfc-zoo", "test tiny --threads 1"), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, ": ok"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "(300 examples)"));
    /* a README that claims more than the weights give fails */
    char higher[64];
    snprintf(higher, sizeof higher, "%.6f", atof(accuracy) + 0.01);
    make_zoo(higher);
    CU_ASSERT_EQUAL(run(zoo, "tfc-zoo", "test tiny --threads 1"), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "WORSE"));
    make_zoo(NULL);
}

static void test_export(void)
{
    make_zoo(NULL);
    char args[2048], path[2048];
    snprintf(args, sizeof args, "export tiny '%s/exported/tiny'", tfc_test_tmpdir());
    CU_ASSERT_EQUAL(run(zoo, "tfc-zoo", args), 0);
    const char *files[] = {"README.md", "model.yaml", "solver.yaml", "tiny.safetensors"};
    for (int i = 0; i < 4; i++) {
        struct stat st;
        snprintf(path, sizeof path, "%s/exported/tiny/%s", tfc_test_tmpdir(), files[i]);
        CU_ASSERT_EQUAL(stat(path, &st), 0);
    }
    /* the copy is a zoo of its own */
    snprintf(path, sizeof path, "%s/exported", tfc_test_tmpdir());
    CU_ASSERT_EQUAL(run(path, "tfc-zoo", "verify tiny"), 0);
}

static void test_bad_input(void)
{
    make_zoo(NULL);
    CU_ASSERT_EQUAL(run(zoo, "tfc-zoo", "info ../tiny"), 2);
    CU_ASSERT_EQUAL(run(zoo, "tfc-zoo", "info nosuch"), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "no model 'nosuch'"));
    CU_ASSERT_EQUAL(run(zoo, "tfc-zoo", "frobnicate tiny"), 2);
    CU_ASSERT_EQUAL(run(zoo, "tfc-zoo", "verify"), 2);
    char path[2048];
    mkdir(tfc_test_path("zoo/broken"), 0777);
    snprintf(path, sizeof path, "%s/broken/README.md", zoo);
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("---\nname: broken\ntask: x\n---\n", f);
    fclose(f);
    CU_ASSERT_EQUAL(run(zoo, "tfc-zoo", "verify broken"), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "has no 'sha256'"));
    f = fopen(path, "w");
    fputs("no front matter\n", f);
    fclose(f);
    CU_ASSERT_EQUAL(run(zoo, "tfc-zoo", "verify broken"), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "no front matter"));
    remove(path);
    rmdir(tfc_test_path("zoo/broken"));
}

static void test_repository_zoo(void)
{
    /* make test runs from the repository root: every model there matches its hash */
    char zdir[2048], cwd[1024];
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
    snprintf(zdir, sizeof zdir, "%s/model_zoo", cwd);
    DIR *d = opendir(zdir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s/README.md", zdir, e->d_name);
        n += e->d_name[0] != '.' && stat(path, &st) == 0;
    }
    closedir(d);
    CU_ASSERT(n >= 1);
    CU_ASSERT_EQUAL(run(zdir, "tfc-zoo", "verify --all"), 0);
    int oks = 0;
    for (const char *p = out; (p = strstr(p, ": ok (sha256 ")); p++) oks++;
    CU_ASSERT_EQUAL(oks, n);
}

TFC_TEST_MAIN("zoo", {"list_info_verify", test_list_info_verify},
              {"flipped_byte", test_flipped_byte}, {"reevaluate", test_reevaluate},
              {"export", test_export}, {"bad_input", test_bad_input},
              {"repository_zoo", test_repository_zoo})
