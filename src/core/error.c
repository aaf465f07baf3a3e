/* Error records, formatting with source carets, exit codes and did-you-mean. */
#include "core/error.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void tfc_error_clear(tfc_error *err)
{
    if (err) memset(err, 0, sizeof *err);
}

static void append(tfc_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void append(tfc_error *err, const char *fmt, ...)
{
    size_t used = strlen(err->text);
    if (used + 1 >= sizeof err->text) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->text + used, sizeof err->text - used, fmt, ap);
    va_end(ap);
}

/* Appends line `line` of `source` and a caret under column `col`. Tabs are kept so the
 * caret lines up in a terminal. Of a long line (Keras's one-line JSON) a window around the
 * column is shown, "..." before it. */
static void append_source_line(tfc_error *err, const char *source, int line, int col)
{
    const char *p = source;
    for (int l = 1; l < line && p; l++) {
        p = strchr(p, '\n');
        if (p) p++;
    }
    if (!p || !*p) return;
    const char *end = strchr(p, '\n');
    int len = end ? (int)(end - p) : (int)strlen(p);
    int from = col - 1 > 150 ? col - 1 - 80 : 0;
    if (from > len) from = len;
    const char *lead = from ? "..." : "";
    p += from;
    len -= from;
    if (len > 200) len = 200;
    char caret[256];
    int n = (int)strlen(lead);
    memset(caret, ' ', (size_t)n);
    for (int i = 0; i < col - 1 - from && i < len && n < 250; i++)
        caret[n++] = p[i] == '\t' ? '\t' : ' ';
    caret[n++] = '^';
    caret[n] = 0;
    append(err, "  %s%.*s\n  %s\n", lead, len, p, caret);
}

static tfc_status vreport(tfc_error *err, tfc_status code, const char *file, int line, int col,
                          const char *source, const char *key, const char *fmt, va_list ap)
{
    if (!err) return code;
    char msg[sizeof err->msg];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (err->count == 0) {
        err->code = code;
        snprintf(err->file, sizeof err->file, "%s", file ? file : "");
        err->line = line;
        err->col = col;
        snprintf(err->key, sizeof err->key, "%s", key ? key : "");
        snprintf(err->msg, sizeof err->msg, "%s", msg);
    }
    err->count++;
    if (err->count > TFC_ERROR_MAX_REPORTS) return err->code;
    err->starts[err->count - 1] = (int)strlen(err->text);
    if (file && *file) {
        if (line > 0)
            append(err, "%s:%d:%d: ", file, line, col > 0 ? col : 1);
        else
            append(err, "%s: ", file);
    }
    append(err, "error: ");
    if (key && *key) append(err, "%s: ", key);
    append(err, "%s\n", msg);
    if (source && line > 0) append_source_line(err, source, line, col > 0 ? col : 1);
    return err->count == 1 ? code : err->code;
}

tfc_status tfc_error_set(tfc_error *err, tfc_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tfc_status s = vreport(err, code, NULL, 0, 0, NULL, NULL, fmt, ap);
    va_end(ap);
    return s;
}

tfc_status tfc_error_at(tfc_error *err, tfc_status code, const char *file, int line, int col,
                        const char *source, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tfc_status s = vreport(err, code, file, line, col, source, key, fmt, ap);
    va_end(ap);
    return s;
}

/* One report of tfc_error_sort: its text span and its position "FILE:LINE:COL: error:". */
typedef struct report_span {
    int start, end, file, line, col;
} report_span;

static int report_before(const report_span *a, const report_span *b)
{
    if (a->file != b->file) return a->file < b->file;
    if (a->line != b->line) return a->line < b->line;
    return a->col < b->col;
}

void tfc_error_sort(tfc_error *err)
{
    if (!err || err->count < 2) return;
    int n = err->count < TFC_ERROR_MAX_REPORTS ? err->count : TFC_ERROR_MAX_REPORTS;
    report_span r[TFC_ERROR_MAX_REPORTS];
    int len = (int)strlen(err->text), nfiles = 0;
    const char *files[TFC_ERROR_MAX_REPORTS];
    int file_len[TFC_ERROR_MAX_REPORTS];
    for (int i = 0; i < n; i++) {
        r[i].start = err->starts[i];
        r[i].end = i + 1 < n ? err->starts[i + 1] : len;
        const char *t = err->text + r[i].start;
        const char *e = strstr(t, ": error: ");
        int line = 0, col = 0, flen = 0;
        /* FILE:LINE:COL: error: — the file is what comes before ":LINE:COL" */
        if (e && e < err->text + r[i].end) {
            const char *c2 = e, *c1;
            while (c2 > t && c2[-1] != ':') c2--;
            c1 = c2 - 1;
            while (c1 > t && c1[-1] != ':') c1--;
            if (c1 > t && sscanf(c1, "%d:%d", &line, &col) == 2) flen = (int)(c1 - 1 - t);
        }
        r[i].line = line, r[i].col = col, r[i].file = TFC_ERROR_MAX_REPORTS; /* no position */
        if (flen > 0) {
            int f = 0;
            while (f < nfiles && !(file_len[f] == flen && !strncmp(files[f], t, (size_t)flen))) f++;
            if (f == nfiles) files[nfiles] = t, file_len[nfiles++] = flen;
            r[i].file = f;
        }
    }
    for (int i = 1; i < n; i++) { /* insertion sort: stable */
        report_span x = r[i];
        int j = i - 1;
        while (j >= 0 && report_before(&x, &r[j])) {
            r[j + 1] = r[j];
            j--;
        }
        r[j + 1] = x;
    }
    char sorted[sizeof err->text];
    int used = 0, tail = n ? err->starts[0] : 0;
    memcpy(sorted, err->text, (size_t)tail); /* nothing precedes the first report today */
    used = tail;
    for (int i = 0; i < n; i++) {
        err->starts[i] = used;
        memcpy(sorted + used, err->text + r[i].start, (size_t)(r[i].end - r[i].start));
        used += r[i].end - r[i].start;
    }
    sorted[used] = '\0';
    memcpy(err->text, sorted, (size_t)used + 1);
}

void tfc_error_hint(tfc_error *err, const char *fmt, ...)
{
    if (!err || err->count > TFC_ERROR_MAX_REPORTS) return;
    char hint[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(hint, sizeof hint, fmt, ap);
    va_end(ap);
    append(err, "  hint: %s\n", hint);
}

void tfc_error_prefix(tfc_error *err, const char *fmt, ...)
{
    if (!err || err->count == 0) return;
    char pre[512], msg[sizeof err->msg], text[sizeof err->text];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    snprintf(msg, sizeof msg, "%s%s", pre, err->msg);
    memcpy(err->msg, msg, sizeof msg);
    /* An error without position starts with "error: "; put the context after it. */
    if (strncmp(err->text, "error: ", 7) == 0) {
        int before = (int)strlen(err->text);
        snprintf(text, sizeof text, "error: %s%s", pre, err->text + 7);
        memcpy(err->text, text, sizeof text);
        int shift = (int)strlen(err->text) - before; /* the later reports moved */
        for (int i = 1; i < err->count && i < TFC_ERROR_MAX_REPORTS; i++) err->starts[i] += shift;
    }
}

int tfc_exit_code(tfc_status code)
{
    switch (code) {
    case TFC_OK: return 0;
    case TFC_ERR_CONFIG:
    case TFC_ERR_USAGE: return 2;
    default: return 1;
    }
}

/* Levenshtein distance, case-insensitive, of strings up to 63 characters. */
static int edit_distance(const char *a, const char *b)
{
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 63 || lb > 63) return 1000;
    int prev[64], cur[64];
    for (int j = 0; j <= lb; j++) prev[j] = j;
    for (int i = 1; i <= la; i++) {
        cur[0] = i;
        for (int j = 1; j <= lb; j++) {
            int ca = a[i - 1] | 0x20, cb = b[j - 1] | 0x20;
            int best = prev[j - 1] + (ca != cb);
            if (prev[j] + 1 < best) best = prev[j] + 1;
            if (cur[j - 1] + 1 < best) best = cur[j - 1] + 1;
            cur[j] = best;
        }
        memcpy(prev, cur, sizeof(int) * (size_t)(lb + 1));
    }
    return prev[lb];
}

const char *tfc_did_you_mean(const char *word, const char *const *candidates)
{
    const char *best = NULL;
    int best_d = 1000;
    for (const char *const *c = candidates; c && *c; c++) {
        int d = edit_distance(word, *c);
        if (d < best_d) {
            best_d = d;
            best = *c;
        }
    }
    int len = (int)strlen(word);
    int allowed = len <= 3 ? 1 : len <= 8 ? 2 : 3;
    if (best_d <= allowed) return best;
    /* else a candidate of 3 or more characters that starts the word, or that the word starts
     * (--output for --out, batch for batch_size): the closest in length */
    best = NULL;
    best_d = 1000;
    for (const char *const *c = candidates; c && *c; c++) {
        size_t cl = strlen(*c), shorter = cl < (size_t)len ? cl : (size_t)len;
        int d = abs((int)cl - len);
        if (shorter >= 3 && !strncmp(word, *c, shorter) && d < best_d) {
            best_d = d;
            best = *c;
        }
    }
    return best;
}

void tfc_join_names(char *buf, size_t size, const char *const *names)
{
    size_t used = 0;
    buf[0] = 0;
    for (const char *const *n = names; n && *n && used + 1 < size; n++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", n == names ? "" : ", ", *n);
}

void tfc_assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "%s:%d: internal error: assertion failed: %s\n", file, line, expr);
    abort();
}
