/* Shared test helpers: a CUnit main for one suite, scratch directories and files. Each
 * tests/test_<module>.c is its own program so suites stay independent. */
#ifndef TFC_TESTS_TESTUTIL_H
#define TFC_TESTS_TESTUTIL_H

#include <CUnit/CUnit.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct tfc_test_case {
    const char *name;
    void (*fn)(void);
} tfc_test_case;

/* Runs `cases` (ended by {NULL, NULL}) as one CUnit suite in basic mode; argv[1], when
 * given, runs only the test of that name. Returns 0 when every test passed. */
int tfc_test_main(const char *suite, const tfc_test_case *cases, int argc, char **argv);

#define TFC_TEST_MAIN(suite, ...)                                              \
    int main(int argc, char **argv)                                            \
    {                                                                          \
        static const tfc_test_case tfc_cases_[] = {__VA_ARGS__, {NULL, NULL}}; \
        return tfc_test_main(suite, tfc_cases_, argc, argv);                      \
    }

/* Marks the running test skipped: prints "SKIP SUITE.TEST: WHY" on stdout (run_tests.sh counts
 * these lines as skipped, not passed) and asserts nothing. The caller returns right after. Use
 * it where a test cannot run here (a missing optional tool or Python module), never to hide a
 * failure. With TFC_REQUIRE_OPTIONAL set (and not "0"), as .ci/run sets it, the skip is a
 * failure instead ("REQUIRED SUITE.TEST: WHY"): CI installs every optional peer. */
void tfc_test_skip(const char *why);

/* 1 when python3 can import every module of `modules` (comma-separated, as in an import
 * statement: "safetensors, numpy"); otherwise marks the running test skipped with the reason
 * (tfc_test_skip) and returns 0. */
int tfc_test_python_has(const char *modules);

/* The tools' folder as an absolute path ($TFC_BIN, as make test sets it, else bin/) when
 * `tool` (e.g. "tfc-predict") is built there; otherwise marks the running test skipped and
 * returns NULL. The path stays valid until the next call. */
const char *tfc_test_bin(const char *tool);

/* A fresh scratch directory under $TMPDIR, removed at exit; returns its path. */
const char *tfc_test_tmpdir(void);
/* tmpdir + "/" + name, in a static rotating buffer (valid for the next 8 calls). */
const char *tfc_test_path(const char *name);
/* Writes `len` bytes (len < 0: strlen) to tmpdir/name and returns the full path. */
const char *tfc_test_write(const char *name, const void *data, long len);
/* Reads a whole file into a malloc'd buffer (NUL-terminated); *len gets its size. */
char *tfc_test_read(const char *path, size_t *len);

/* Runs the shell line `cmd` in the scratch directory, its stdout and stderr into out.txt
 * there; returns the exit status (-1 when a signal ended it) and, when text is not NULL,
 * the output in a malloc'd string. */
int tfc_test_sh(const char *cmd, char **text);
/* tfc_test_sh asserting the exit status and that the output holds `want1` and `want2` (each
 * may be NULL); on a mismatch prints the command, both statuses and the output. */
void tfc_test_sh_expect(int code, const char *cmd, const char *want1, const char *want2);

/* Trains the solver `solver_yaml` (written to the scratch file `file`) on the CPU with one
 * thread, console to /dev/null, its run directory tmpdir/out; e gets any error. */
tfc_status tfc_test_train(const char *solver_yaml, const char *file, const char *out,
                          tfc_error *e);
/* tfc_test_train, with the run's result in *res (solver/solver.h). */
struct tfc_train_result;
tfc_status tfc_test_train_result(const char *solver_yaml, const char *file, const char *out,
                                 struct tfc_train_result *res, tfc_error *e);

/* A learnable synthetic classification set as two .npy files in the scratch directory: 16
 * features uniform in [-1, 1] (float32 [n, 16]) and int32 labels [n], the argmax of a fixed
 * random linear map to 4 classes. Deterministic in `seed`. */
void tfc_test_write_split(const char *xname, const char *yname, int n, uint64_t seed);

#endif
