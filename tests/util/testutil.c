/* Shared test helpers; see testutil.h. */
#include "testutil.h"

#include "cpu/cpu.h"
#include "data/data.h"
#include "solver/solver.h"

#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[512];

static void remove_tmpdir(void)
{
    char cmd[600];
    if (!tmpdir[0] || getenv("TFC_KEEP_TMP")) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
}

const char *tfc_test_tmpdir(void)
{
    if (!tmpdir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmpdir, sizeof tmpdir, "%s/tfc-test-XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(tmpdir)) {
            perror("mkdtemp");
            exit(2);
        }
        atexit(remove_tmpdir);
    }
    return tmpdir;
}

const char *tfc_test_path(const char *name)
{
    static char bufs[8][1024];
    static int next;
    char *b = bufs[next++ & 7];
    snprintf(b, sizeof bufs[0], "%s/%s", tfc_test_tmpdir(), name);
    return b;
}

const char *tfc_test_write(const char *name, const void *data, long len)
{
    const char *path = tfc_test_path(name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(2);
    }
    size_t n = len < 0 ? strlen(data) : (size_t)len;
    if (n && fwrite(data, 1, n, f) != n) exit(2);
    fclose(f);
    return path;
}

char *tfc_test_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    if (len) *len = (size_t)n;
    return buf;
}

static int skipped;

void tfc_test_skip(const char *why)
{
    CU_pTest t = CU_get_current_test();
    CU_pSuite s = CU_get_current_suite();
    const char *req = getenv("TFC_REQUIRE_OPTIONAL");
    if (req && *req && strcmp(req, "0") != 0) {
        /* CI installs every optional peer: a skip there means a dependency went missing. */
        printf("\nREQUIRED %s.%s: %s (TFC_REQUIRE_OPTIONAL is set)\n", s ? s->pName : "?",
               t ? t->pName : "?", why);
        CU_FAIL("skipped while TFC_REQUIRE_OPTIONAL is set");
        return;
    }
    printf("\nSKIP %s.%s: %s\n", s ? s->pName : "?", t ? t->pName : "?", why);
    fflush(stdout);
    skipped++;
}

int tfc_test_python_has(const char *modules)
{
    char cmd[512], why[512];
    snprintf(cmd, sizeof cmd, "python3 -c 'import %s' >/dev/null 2>&1", modules);
    fflush(NULL);
    if (system(cmd) == 0) return 1;
    snprintf(why, sizeof why, "python3 cannot import %s (pip install: see .ci/run)", modules);
    tfc_test_skip(why);
    return 0;
}

int tfc_test_main(const char *suite, const tfc_test_case *cases, int argc, char **argv)
{
    tfc_cpu_blas_restart(argv); /* the kernels the tools run on, so their bits match ours */
    if (CU_initialize_registry() != CUE_SUCCESS) return 2;
    CU_pSuite s = CU_add_suite(suite, NULL, NULL);
    for (const tfc_test_case *c = cases; c->name; c++)
        if (argc < 2 || strcmp(argv[1], c->name) == 0) CU_add_test(s, c->name, c->fn);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    int failed = (int)CU_get_number_of_tests_failed();
    int ran = (int)CU_get_number_of_tests_run();
    CU_cleanup_registry();
    if (skipped) printf("skipped: %d\n", skipped);
    return failed || ran == 0 ? 1 : 0;
}

/* 16 features uniform in [-1, 1]; the label is the argmax of a fixed random linear map to 4
 * classes, so a small network can learn it well. xorshift, seeded per file. */
void tfc_test_write_split(const char *xname, const char *yname, int n, uint64_t seed)
{
    static float w[4][16];
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int c = 0; c < 4; c++)
        for (int j = 0; j < 16; j++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            w[c][j] = (float)((double)(s >> 11) / 9007199254740992.0 * 2 - 1);
        }
    float *x = malloc(sizeof(float) * 16 * (size_t)n);
    int32_t *y = malloc(sizeof(int32_t) * (size_t)n);
    s = seed;
    for (int i = 0; i < n; i++) {
        float best = -1e30f;
        for (int j = 0; j < 16; j++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            x[i * 16 + j] = (float)((double)(s >> 11) / 9007199254740992.0 * 2 - 1);
        }
        for (int c = 0; c < 4; c++) {
            float z = 0;
            for (int j = 0; j < 16; j++) z += w[c][j] * x[i * 16 + j];
            if (z > best) {
                best = z;
                y[i] = c;
            }
        }
    }
    tfc_tensor tx = {TFC_F32, {2, {n, 16}}, x, -1}, ty = {TFC_I32, {1, {n}}, y, -1};
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path(xname), &tx, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path(yname), &ty, &err), TFC_OK);
    free(x);
    free(y);
}

const char *tfc_test_bin(const char *tool)
{
    static char bin[1024];
    const char *b = getenv("TFC_BIN");
    char cwd[512] = "", probe[1200];
    if (!b) b = "bin";
    if (b[0] != '/' && !getcwd(cwd, sizeof cwd)) cwd[0] = 0;
    snprintf(bin, sizeof bin, "%s%s%s", cwd, cwd[0] ? "/" : "", b);
    snprintf(probe, sizeof probe, "%s/%s", bin, tool);
    if (access(probe, X_OK) == 0) return bin;
    snprintf(probe, sizeof probe, "no %s/%s; run through make test", bin, tool);
    tfc_test_skip(probe);
    return NULL;
}

tfc_status tfc_test_train_result(const char *solver_yaml, const char *file, const char *out,
                                 tfc_train_result *res, tfc_error *err)
{
    tfc_solver_options o = {0};
    o.out_dir = tfc_test_path(out);
    o.threads = 1;
    o.console = fopen("/dev/null", "w");
    tfc_error_clear(err);
    tfc_solver *s = tfc_solver_load(tfc_test_write(file, solver_yaml, -1), &o, err);
    tfc_status st = s ? tfc_solver_train(s, res, err) : err->code;
    tfc_solver_free(s);
    if (o.console) fclose(o.console);
    return st;
}

tfc_status tfc_test_train(const char *solver_yaml, const char *file, const char *out,
                          tfc_error *err)
{
    tfc_train_result res;
    return tfc_test_train_result(solver_yaml, file, out, &res, err);
}

int tfc_test_sh(const char *cmd, char **text)
{
    char full[16384];
    snprintf(full, sizeof full, "cd '%s' && (%s) >out.txt 2>&1", tfc_test_tmpdir(), cmd);
    int st = system(full);
    if (text) *text = tfc_test_read(tfc_test_path("out.txt"), NULL);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void tfc_test_sh_expect(int code, const char *cmd, const char *want1, const char *want2)
{
    char *text;
    int rc = tfc_test_sh(cmd, &text);
    int ok = rc == code && text && (!want1 || strstr(text, want1)) &&
             (!want2 || strstr(text, want2));
    CU_ASSERT(ok);
    if (!ok)
        printf("\n`%s`: exit %d, want %d with '%s' '%s':\n%s\n", cmd, rc, code,
               want1 ? want1 : "", want2 ? want2 : "", text ? text : "");
    free(text);
}
