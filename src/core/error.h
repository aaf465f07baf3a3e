/* Errors: every library call that can fail for a user, data or environment reason returns
 * a tfc_status and fills a tfc_error. The library never exits; tools print the error and
 * map its code to an exit status (tfc_exit_code). Broken invariants use TFC_ASSERT, which
 * is always on and aborts with file:line and the expression. */
#ifndef TFC_CORE_ERROR_H
#define TFC_CORE_ERROR_H

#include <stdio.h>

typedef enum tfc_status {
    TFC_OK = 0,
    TFC_ERR_CONFIG,  /* bad model/solver file or override: exit 2 */
    TFC_ERR_USAGE,   /* bad command line, or a file the user named that is missing or of
                        the wrong kind (SPEC §3): exit 2 */
    TFC_ERR_DATA,    /* unreadable or invalid data: exit 1 */
    TFC_ERR_IO,      /* open/read/write/rename failed: exit 1 */
    TFC_ERR_FORMAT,  /* a weights/state file is malformed: exit 1 */
    TFC_ERR_NOMEM,   /* allocation failed: exit 1 */
    TFC_ERR_DEVICE,  /* device missing or failing: exit 1 */
    TFC_ERR_NUMERIC, /* non-finite loss or gradient: exit 1 */
    TFC_ERR_INTERNAL
} tfc_status;

#define TFC_ERROR_MAX_REPORTS 20

/* The first error's fields are kept structured (tests read them); every error reported
 * (up to TFC_ERROR_MAX_REPORTS) is also appended, fully formatted, to `text`. */
typedef struct tfc_error {
    tfc_status code;
    char file[512];    /* file the error is about, "" when none */
    int line, col;     /* 1-based position in `file`, 0 when unknown */
    char key[256];     /* key path such as layers[3].Conv2D.kernel_size, "" when none */
    char msg[1024];    /* the message without position or key */
    int count;         /* errors reported so far */
    char text[16384];  /* all reports, formatted, each ending in '\n' */
    int starts[TFC_ERROR_MAX_REPORTS]; /* where each report (with its hints) begins in text */
} tfc_error;

void tfc_error_clear(tfc_error *err);

/* Records an error with no position. Returns `code` so callers can write
 * `return tfc_error_set(err, TFC_ERR_IO, "cannot open %s", path);`. `err` may be NULL. */
tfc_status tfc_error_set(tfc_error *err, tfc_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records an error at FILE:LINE:COL with a key path (either may be NULL/0). When `source`
 * is given (the whole text of FILE), the offending line and a caret follow the message,
 * as compilers print them. Formats `FILE:LINE:COL: error: KEY: MESSAGE`. */
tfc_status tfc_error_at(tfc_error *err, tfc_status code, const char *file, int line, int col,
                        const char *source, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 8, 9)));

/* Orders the reports in `text` by file (files in the order they first appear), then line and
 * column; reports without a position keep their order at the end. The structured fields
 * still describe the first error reported. For reports that collect several files' errors
 * (a solver and its model) so they read top to bottom. */
void tfc_error_sort(tfc_error *err);

/* Appends a "hint: ..." line to the most recent report. */
void tfc_error_hint(tfc_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefixes context to the first error's message (e.g. "reading model.yaml: "). */
void tfc_error_prefix(tfc_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* 0 for TFC_OK, 2 for configuration and usage errors, 1 for everything else. */
int tfc_exit_code(tfc_status code);

/* The closest of `candidates` (NULL-terminated) to `word` by edit distance; when none is
 * close enough to be a plausible typo, a candidate of 3 or more characters that begins the
 * word or that the word begins (`output` for `out`); else NULL. */
const char *tfc_did_you_mean(const char *word, const char *const *candidates);

/* Writes "a, b, c" (the candidates) into buf. */
void tfc_join_names(char *buf, size_t size, const char *const *names);

void tfc_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));
#define TFC_ASSERT(e) ((e) ? (void)0 : tfc_assert_fail(#e, __FILE__, __LINE__))

#endif
