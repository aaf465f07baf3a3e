/* Text: the text source (lines of files like TextLineDataset, or fortune-style records
 * separated by a line holding "%"; a deterministic train/test split by record index; the
 * record's file as its class label), the char and word tokenizers, vocabularies (built from
 * the training split, saved beside the run, loaded for test and prediction) and the
 * tokenize map op. Records are bounded in size and files holding NUL bytes are refused. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fileio.h"
#include "data/internal.h"

#define TEXT_MAX_FILE_BYTES ((size_t)1 << 30)
#define VOCAB_MAX_FILE_BYTES ((size_t)256 << 20)
#define VOCAB_MAX_TOKENS (1 << 24)
#define VOCAB_HEADER "# tfc vocabulary 1"

/* ---- a string → int64 hash map ------------------------------------------------------------ */

typedef struct strmap_entry {
    char *s;
    uint32_t len;
    int64_t val;
} strmap_entry;

typedef struct strmap {
    strmap_entry *e;
    size_t cap, n;
} strmap;

static uint64_t str_hash(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static strmap_entry *strmap_find(const strmap *m, const char *s, size_t n)
{
    if (!m->cap) return NULL;
    size_t mask = m->cap - 1;
    for (size_t i = str_hash(s, n) & mask;; i = (i + 1) & mask) {
        strmap_entry *e = &m->e[i];
        if (!e->s) return NULL;
        if (e->len == n && !memcmp(e->s, s, n)) return e;
    }
}

/* The entry for s, inserted with val 0 when new; NULL when out of memory. */
static strmap_entry *strmap_upsert(strmap *m, const char *s, size_t n)
{
    strmap_entry *f = strmap_find(m, s, n);
    if (f) return f;
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 1024;
        strmap_entry *ne = calloc(cap, sizeof *ne);
        if (!ne) return NULL;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->e[i].s) continue;
            size_t j = str_hash(m->e[i].s, m->e[i].len) & (cap - 1);
            while (ne[j].s) j = (j + 1) & (cap - 1);
            ne[j] = m->e[i];
        }
        free(m->e);
        m->e = ne;
        m->cap = cap;
    }
    char *copy = malloc(n + 1);
    if (!copy) return NULL;
    memcpy(copy, s, n);
    copy[n] = 0;
    size_t j = str_hash(s, n) & (m->cap - 1);
    while (m->e[j].s) j = (j + 1) & (m->cap - 1);
    m->e[j] = (strmap_entry){copy, (uint32_t)n, 0};
    m->n++;
    return &m->e[j];
}

static void strmap_free(strmap *m, int free_strings)
{
    for (size_t i = 0; free_strings && i < m->cap; i++) free(m->e[i].s);
    free(m->e);
    memset(m, 0, sizeof *m);
}

/* ---- tokenizers --------------------------------------------------------------------------- */

struct tfc_vocab {
    tfc_tokenizer tok;
    int lowercase;
    int64_t n;
    char **tokens;  /* n tokens, NUL-terminated (may contain NUL bytes: lens) */
    uint32_t *lens;
    strmap index;   /* token → id; strings shared with tokens */
};

/* Length of the UTF-8 character at s (1 for an invalid byte). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t k = s[0] < 0x80 ? 1
               : (s[0] >> 5) == 6 ? 2
               : (s[0] >> 4) == 14 ? 3
               : (s[0] >> 3) == 30 ? 4
                                   : 1;
    if (k > n) return 1;
    for (size_t i = 1; i < k; i++)
        if ((s[i] & 0xc0) != 0x80) return 1;
    return k;
}

static int word_byte(unsigned char c)
{
    return isalnum(c) || c >= 0x80;
}

/* Calls fn for each token of text; lowercased tokens go through `scratch` (len bytes). */
typedef int (*token_fn)(const char *tok, size_t n, void *user);

static int for_each_token(tfc_tokenizer tok, int lower, const char *text, size_t len,
                          char *scratch, token_fn fn, void *user)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < len) {
        size_t start = i, n;
        if (tok == TFC_TOKENIZER_CHAR) {
            n = utf8_len(s + i, len - i);
            i += n;
        } else {
            if (!word_byte(s[i])) {
                i++;
                continue;
            }
            /* A word: letters and digits, with apostrophes inside ("don't"). */
            while (i < len && (word_byte(s[i]) ||
                               (s[i] == '\'' && i + 1 < len && word_byte(s[i + 1]) && i > start)))
                i++;
            n = i - start;
        }
        const char *t = text + start;
        if (lower) {
            for (size_t k = 0; k < n; k++) scratch[k] = (char)tolower(s[start + k]);
            t = scratch;
        }
        if (fn(t, n, user)) return 1;
    }
    return 0;
}

tfc_tokenizer tfc_vocab_tokenizer(const tfc_vocab *v)
{
    return v->tok;
}

int64_t tfc_vocab_size(const tfc_vocab *v)
{
    return v->n;
}

const char *tfc_vocab_token(const tfc_vocab *v, int64_t id)
{
    return id >= 0 && id < v->n ? v->tokens[id] : NULL;
}

typedef struct encode_ctx {
    const tfc_vocab *v;
    int32_t *ids;
    int64_t cap, n;
} encode_ctx;

static int encode_one(const char *t, size_t n, void *user)
{
    encode_ctx *c = user;
    const strmap_entry *e = strmap_find(&c->v->index, t, n);
    if (c->ids && c->n < c->cap) c->ids[c->n] = e ? (int32_t)e->val : 1;
    c->n++;
    return 0;
}

int64_t tfc_vocab_encode(const tfc_vocab *v, const char *text, size_t len, int32_t *ids,
                         int64_t cap)
{
    char small[256];
    char *scratch = len <= sizeof small ? small : malloc(len);
    if (!scratch) return -1;
    encode_ctx c = {v, ids, cap, 0};
    for_each_token(v->tok, v->lowercase, text, len, scratch, encode_one, &c);
    if (scratch != small) free(scratch);
    return c.n;
}

void tfc_vocab_free(tfc_vocab *v)
{
    if (!v) return;
    for (int64_t i = 0; i < v->n; i++) free(v->tokens[i]);
    free(v->tokens);
    free(v->lens);
    strmap_free(&v->index, 0);
    free(v);
}

static tfc_vocab *vocab_new(tfc_tokenizer tok, int lower)
{
    tfc_vocab *v = calloc(1, sizeof *v);
    if (v) {
        v->tok = tok;
        v->lowercase = lower;
    }
    return v;
}

/* Appends a token; returns 0 on success, -1 out of memory, 1 duplicate. */
static int vocab_add(tfc_vocab *v, const char *s, size_t n)
{
    if (strmap_find(&v->index, s, n)) return 1;
    if ((v->n & (v->n - 1)) == 0) { /* grow at powers of two */
        size_t cap = v->n ? (size_t)v->n * 2 : 16;
        char **t = realloc(v->tokens, cap * sizeof *t);
        if (t) v->tokens = t;
        uint32_t *l = realloc(v->lens, cap * sizeof *l);
        if (l) v->lens = l;
        if (!t || !l) return -1;
    }
    strmap_entry *e = strmap_upsert(&v->index, s, n);
    if (!e) return -1;
    e->val = v->n;
    v->tokens[v->n] = e->s;
    v->lens[v->n] = (uint32_t)n;
    v->n++;
    return 0;
}

/* ---- building, saving and loading vocabularies -------------------------------------------- */

static int count_one(const char *t, size_t n, void *user)
{
    strmap_entry *e = strmap_upsert(user, t, n);
    if (!e) return 1;
    e->val++;
    return 0;
}

static int by_count(const void *a, const void *b)
{
    const strmap_entry *x = *(strmap_entry *const *)a, *y = *(strmap_entry *const *)b;
    if (x->val != y->val) return x->val > y->val ? -1 : 1;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

tfc_vocab *vocab_build(tfc_tokenizer tok, int lowercase, int max_tokens, int min_count,
                       source *src, tfc_error *err)
{
    strmap counts = {0};
    tfc_vocab *v = NULL;
    strmap_entry **order = NULL;
    char *scratch = NULL;
    size_t scap = 0;
    for (int64_t i = 0; i < src->count; i++) {
        tfc_element e = {0};
        tfc_status st = src->ops->get(src, i, &e, err);
        if (st) {
            for (int c = 0; c < TFC_COMP_COUNT; c++) free(e.comp[c].data);
            goto fail;
        }
        const tfc_tensor *t = &e.comp[TFC_COMP_FEATURES];
        size_t len = comp_bytes(t);
        if (len > scap) {
            free(scratch);
            scap = len;
            scratch = malloc(scap);
        }
        int bad = len && !scratch;
        if (!bad) bad = for_each_token(tok, lowercase, t->data, len, scratch, count_one, &counts);
        for (int c = 0; c < TFC_COMP_COUNT; c++) free(e.comp[c].data);
        if (bad) {
            tfc_error_set(err, TFC_ERR_NOMEM, "out of memory building the vocabulary");
            goto fail;
        }
    }
    order = malloc((counts.n + 1) * sizeof *order);
    v = vocab_new(tok, lowercase);
    if (!order || !v || vocab_add(v, "<pad>", 5) || vocab_add(v, "<unk>", 5)) {
        tfc_error_set(err, TFC_ERR_NOMEM, "out of memory building the vocabulary");
        goto fail;
    }
    size_t n = 0;
    for (size_t i = 0; i < counts.cap; i++)
        if (counts.e[i].s) order[n++] = &counts.e[i];
    qsort(order, n, sizeof *order, by_count);
    for (size_t i = 0; i < n; i++) {
        if (max_tokens > 0 && v->n >= max_tokens) break;
        if (order[i]->val < min_count) break;
        if (vocab_add(v, order[i]->s, order[i]->len) < 0) {
            tfc_error_set(err, TFC_ERR_NOMEM, "out of memory building the vocabulary");
            goto fail;
        }
    }
    free(order);
    free(scratch);
    strmap_free(&counts, 1);
    return v;
fail:
    free(order);
    free(scratch);
    strmap_free(&counts, 1);
    tfc_vocab_free(v);
    return NULL;
}

static void escape_token(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\') fputs("\\\\", f);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c == ' ') fputs("\\s", f);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\x%02x", c);
        else fputc(c, f);
    }
    fputc('\n', f);
}

tfc_status tfc_vocab_save(const tfc_vocab *v, const char *path, tfc_error *err)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory writing %s", path);
    fprintf(f, "%s tokenizer=%s lowercase=%d\n", VOCAB_HEADER,
            v->tok == TFC_TOKENIZER_CHAR ? "char" : "word", v->lowercase);
    for (int64_t i = 0; i < v->n; i++) escape_token(f, v->tokens[i], v->lens[i]);
    fclose(f);
    const void *chunks[1] = {text};
    size_t sizes[1] = {len};
    tfc_status st = tfc_file_write_atomic(path, chunks, sizes, 1, err);
    free(text);
    return st;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                          : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Unescapes line[0..n) into out (at least n bytes); returns the length or -1. */
static long unescape(const char *line, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (line[i] != '\\') {
            out[o++] = line[i];
            continue;
        }
        if (++i >= n) return -1;
        switch (line[i]) {
        case '\\': out[o++] = '\\'; break;
        case 'n': out[o++] = '\n'; break;
        case 't': out[o++] = '\t'; break;
        case 'r': out[o++] = '\r'; break;
        case 's': out[o++] = ' '; break;
        case 'x': {
            if (i + 2 >= n) return -1;
            int h = hexval(line[i + 1]), l = hexval(line[i + 2]);
            if (h < 0 || l < 0) return -1;
            out[o++] = (char)(h * 16 + l);
            i += 2;
            break;
        }
        default: return -1;
        }
    }
    return (long)o;
}

tfc_vocab *tfc_vocab_load(const char *path, tfc_error *err)
{
    char *text;
    size_t len;
    if (tfc_file_read_all(path, VOCAB_MAX_FILE_BYTES, &text, &len, err)) return NULL;
    char tokname[16] = "";
    int lower = -1, lineno = 1;
    const char *p = text, *end = text + len;
    const char *nl = memchr(p, '\n', len);
    size_t hl = strlen(VOCAB_HEADER);
    if (!nl || (size_t)(nl - p) < hl || strncmp(p, VOCAB_HEADER, hl) ||
        sscanf(p + strlen(VOCAB_HEADER), " tokenizer=%15s lowercase=%d", tokname, &lower) != 2 ||
        (strcmp(tokname, "char") && strcmp(tokname, "word")) || (lower != 0 && lower != 1)) {
        free(text);
        tfc_error_at(err, TFC_ERR_DATA, path, 1, 1, NULL, NULL,
                     "not a tfc vocabulary (expected the header \"%s tokenizer=char|word "
                     "lowercase=0|1\")", VOCAB_HEADER);
        return NULL;
    }
    tfc_vocab *v = vocab_new(strcmp(tokname, "char") ? TFC_TOKENIZER_WORD : TFC_TOKENIZER_CHAR,
                             lower);
    char *buf = malloc(len + 1);
    if (!v || !buf) goto nomem;
    for (p = nl + 1; p < end; p = nl + 1) {
        lineno++;
        nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        long n = unescape(p, (size_t)(nl - p), buf);
        const char *why = n < 0 ? "bad escape" : n == 0 ? "empty token" : NULL;
        int r = why ? 0 : vocab_add(v, buf, (size_t)n);
        if (r < 0) goto nomem;
        if (r == 1) why = "duplicate token";
        if (!why && v->n > VOCAB_MAX_TOKENS) why = "too many tokens";
        if (why) {
            tfc_error_at(err, TFC_ERR_DATA, path, lineno, 1, NULL, NULL, "%s", why);
            goto fail;
        }
    }
    if (v->n < 2 || strcmp(v->tokens[0], "<pad>") || strcmp(v->tokens[1], "<unk>")) {
        tfc_error_at(err, TFC_ERR_DATA, path, 2, 1, NULL, NULL,
                     "a vocabulary starts with the tokens <pad> and <unk>");
        goto fail;
    }
    free(buf);
    free(text);
    return v;
nomem:
    tfc_error_set(err, TFC_ERR_NOMEM, "out of memory reading %s", path);
fail:
    free(buf);
    free(text);
    tfc_vocab_free(v);
    return NULL;
}

/* ---- the text source ---------------------------------------------------------------------- */

typedef struct text_record {
    int64_t off;  /* into the text buffer */
    int32_t len;
    int32_t file;
    int32_t line; /* 1-based first line */
} text_record;

typedef struct text_source {
    source base;
    char *buf;
    size_t used, cap;
    text_record *rec;
    int64_t n, rcap;
    char **files;
    int nfiles;
    int labels;
} text_source;

static tfc_status text_get(source *s, int64_t i, tfc_element *e, tfc_error *err)
{
    text_source *t = (text_source *)s;
    const text_record *r = &t->rec[i];
    tfc_shape sh = {.ndim = 1, .dim = {r->len}};
    void *d = tfc_element_alloc(e, TFC_COMP_FEATURES, TFC_U8, &sh);
    if (!d) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    if (r->len) memcpy(d, t->buf + r->off, (size_t)r->len);
    if (t->labels) {
        tfc_shape ls = {0};
        int32_t *l = tfc_element_alloc(e, TFC_COMP_LABELS, TFC_I32, &ls);
        if (!l) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        *l = r->file;
    }
    return TFC_OK;
}

static void text_describe(const source *s, int64_t i, char *buf, size_t size)
{
    const text_source *t = (const text_source *)s;
    const text_record *r = &t->rec[i];
    snprintf(buf, size, "%s:%d", t->files[r->file], r->line);
}

static void text_free(source *s)
{
    text_source *t = (text_source *)s;
    for (int i = 0; i < t->nfiles; i++) free(t->files[i]);
    free(t->files);
    free(t->buf);
    free(t->rec);
    free(t);
}

static const source_ops text_ops = {
    .type = "text",
    .get = text_get,
    .describe = text_describe,
    .free = text_free,
};

typedef struct splitter {
    text_source *t;
    const text_args *a;
    int64_t seen;  /* records before the split, for the split rule */
    tfc_error *err;
} splitter;

static int split_keeps(const text_args *a, int64_t r)
{
    if (a->split_every <= 0) return 1;
    int in_test = r % a->split_every == a->split_offset;
    return a->split_part == 1 ? in_test : !in_test;
}

/* Adds one record (text[0..len), from `file` starting at `line`) if the split keeps it. */
static tfc_status add_record(splitter *sp, const char *text, size_t len, int file, int line)
{
    text_source *t = sp->t;
    const text_args *a = sp->a;
    if (len > (size_t)a->max_record_bytes) {
        if (a->on_error == ON_ERROR_SKIP) {
            t->base.skipped++;
            return TFC_OK;
        }
        return tfc_error_at(sp->err, TFC_ERR_DATA, t->files[file], line, 1, NULL, NULL,
                            "a record of %zu bytes is longer than max_record_bytes (%d)", len,
                            a->max_record_bytes);
    }
    if (!split_keeps(a, sp->seen++)) return TFC_OK;
    if (t->n == t->rcap) {
        int64_t cap = t->rcap ? t->rcap * 2 : 1024;
        text_record *r = realloc(t->rec, (size_t)cap * sizeof *r);
        if (!r) return tfc_error_set(sp->err, TFC_ERR_NOMEM, "out of memory reading text");
        t->rec = r;
        t->rcap = cap;
    }
    if (t->used + len > t->cap) {
        size_t cap = t->cap ? t->cap : 1 << 16;
        while (cap < t->used + len) cap *= 2;
        char *b = realloc(t->buf, cap);
        if (!b) return tfc_error_set(sp->err, TFC_ERR_NOMEM, "out of memory reading text");
        t->buf = b;
        t->cap = cap;
    }
    if (len) memcpy(t->buf + t->used, text, len);
    t->rec[t->n++] = (text_record){(int64_t)t->used, (int32_t)len, file, line};
    t->used += len;
    return TFC_OK;
}

static int blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)s[i])) return 0;
    return 1;
}

/* Splits one file's text into records. */
static tfc_status split_text(splitter *sp, const char *text, size_t len, int file)
{
    const text_args *a = sp->a;
    if (memchr(text, 0, len)) {
        tfc_error_set(sp->err, TFC_ERR_DATA, "%s: binary file (holds NUL bytes), not text",
                      sp->t->files[file]);
        tfc_error_hint(sp->err, "leave it out, e.g. exclude: [\"*.dat\"]");
        return TFC_ERR_DATA;
    }
    const char *p = text, *end = text + len;
    int line = 1, rec_line = 1;
    const char *rec_start = p;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        size_t ll = (size_t)(le - p);
        if (ll && p[ll - 1] == '\r') ll--;
        tfc_status st = TFC_OK;
        if (a->format == 0) {
            if (!(a->skip_empty && blank(p, ll))) st = add_record(sp, p, ll, file, line);
        } else if (ll == 1 && p[0] == '%') {
            size_t rl = (size_t)(p - rec_start);
            if (rl && rec_start[rl - 1] == '\n') rl--;
            if (rl && rec_start[rl - 1] == '\r') rl--;
            if (!blank(rec_start, rl)) st = add_record(sp, rec_start, rl, file, rec_line);
            rec_start = nl ? nl + 1 : end;
            rec_line = line + 1;
        }
        if (st) return st;
        p = nl ? nl + 1 : end;
        line++;
    }
    if (a->format == 1) {
        size_t rl = (size_t)(end - rec_start);
        while (rl && (rec_start[rl - 1] == '\n' || rec_start[rl - 1] == '\r')) rl--;
        if (!blank(rec_start, rl)) return add_record(sp, rec_start, rl, file, rec_line);
    }
    return TFC_OK;
}

static text_source *text_new(const text_args *a, const char *const *names, int n,
                             tfc_error *err)
{
    text_source *t = calloc(1, sizeof *t);
    if (t) t->files = calloc((size_t)n + 1, sizeof *t->files);
    if (!t || !t->files) {
        free(t);
        tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        return NULL;
    }
    t->base.ops = &text_ops;
    for (int i = 0; i < n; i++) {
        size_t l = strlen(names[i]) + 1;
        t->files[i] = malloc(l);
        if (!t->files[i]) {
            text_free(&t->base);
            tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
            return NULL;
        }
        memcpy(t->files[i], names[i], l);
        t->nfiles = i + 1;
    }
    t->labels = a->label == 1;
    return t;
}

static tfc_status text_finish(text_source *t, tfc_error *err)
{
    source *s = &t->base;
    s->count = t->n;
    s->spec.comp[TFC_COMP_FEATURES] = (tfc_component_spec){1, TFC_U8, {.ndim = 1, .dim = {-1}}};
    if (t->labels) {
        s->spec.comp[TFC_COMP_LABELS] = (tfc_component_spec){1, TFC_I32, {.ndim = 0}};
        /* Class names: the files' base names. */
        const char **names = malloc((size_t)t->nfiles * sizeof *names + 1);
        if (!names) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        for (int i = 0; i < t->nfiles; i++) {
            const char *slash = strrchr(t->files[i], '/');
            names[i] = slash ? slash + 1 : t->files[i];
        }
        tfc_status st = source_set_classes(s, names, t->nfiles, err);
        free(names);
        if (st) return st;
    }
    return TFC_OK;
}

tfc_status source_text(source **out, const text_args *a, tfc_error *err)
{
    *out = NULL;
    text_source *t = text_new(a, a->paths, a->npaths, err);
    if (!t) return TFC_ERR_NOMEM;
    splitter sp = {t, a, 0, err};
    for (int i = 0; i < a->npaths; i++) {
        char *text;
        size_t len;
        tfc_status st = tfc_file_read_all(a->paths[i], TEXT_MAX_FILE_BYTES, &text, &len, err);
        if (!st) {
            st = split_text(&sp, text, len, i);
            free(text);
        }
        if (st) {
            text_free(&t->base);
            return st;
        }
    }
    tfc_status st = text_finish(t, err);
    if (st) {
        text_free(&t->base);
        return st;
    }
    *out = &t->base;
    return TFC_OK;
}

tfc_status source_text_mem(source **out, const text_args *a, const char *text, size_t len,
                           const char *name, tfc_error *err)
{
    *out = NULL;
    text_source *t = text_new(a, &name, 1, err);
    if (!t) return TFC_ERR_NOMEM;
    splitter sp = {t, a, 0, err};
    tfc_status st = split_text(&sp, text, len, 0);
    if (!st) st = text_finish(t, err);
    if (st) {
        text_free(&t->base);
        return st;
    }
    *out = &t->base;
    return TFC_OK;
}

/* ---- the tokenize op ---------------------------------------------------------------------- */

static const char *const tokenizer_choices[] = {"char", "word", NULL};
static const char *const lowercase_choices[] = {"auto", "true", "false", NULL};

static const tfc_field tokenize_fields[] = {
    MAP_COMMON_FIELDS(tokenize_args),
    {"tokenizer", TFC_F_ENUM, offsetof(tokenize_args, tokenizer), "char", TFC_UNBOUNDED,
     tokenizer_choices, "char: UTF-8 characters; word: runs of letters and digits"},
    {"vocabulary", TFC_F_STRING, offsetof(tokenize_args, vocabulary), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "a vocabulary file to use instead of building one"},
    {"max_tokens", TFC_F_INT, offsetof(tokenize_args, max_tokens), "0", 0, VOCAB_MAX_TOKENS, NULL,
     "vocabulary size cap including <pad> and <unk> (0: no cap)"},
    {"min_count", TFC_F_INT, offsetof(tokenize_args, min_count), "1", 1, 1 << 30, NULL,
     "rarer tokens become <unk>"},
    {"lowercase", TFC_F_ENUM, offsetof(tokenize_args, lowercase), "auto", TFC_UNBOUNDED,
     lowercase_choices, "auto: words are lowercased, characters are not"},
    {NULL},
};

static tfc_status tokenize_init(void *args, const op_build *b, const tfc_element_spec *in,
                                tfc_element_spec *out, tfc_error *err)
{
    tokenize_args *a = args;
    tfc_pipeline *p = b->p;
    const tfc_component_spec *c = &in->comp[TFC_COMP_FEATURES];
    if (!c->present || c->dtype != TFC_U8 || (c->shape.ndim >= 0 && c->shape.ndim != 1)) {
        char sh[160];
        return op_error(b, "needs text bytes (uint8 of rank 1), found %s",
                        tfc_data_spec_str(c, sh, sizeof sh));
    }
    if (p->vocab) return op_error(b, "a pipeline has at most one tokenizer");
    tfc_tokenizer tok = a->tokenizer ? TFC_TOKENIZER_WORD : TFC_TOKENIZER_CHAR;
    int lower = a->lowercase == 0 ? tok == TFC_TOKENIZER_WORD : a->lowercase == 1;
    const tfc_vocab *v = NULL;
    char *path = NULL;
    if (a->vocabulary) {
        path = path_resolve(p->opt.base_dir, a->vocabulary);
        if (!path || !(p->vocab = tfc_vocab_load(path, err))) {
            free(path);
            return err && err->code ? err->code : TFC_ERR_NOMEM;
        }
        v = p->vocab;
    } else if (p->opt.vocab) {
        v = p->opt.vocab;
    } else if (p->opt.load_vocabulary) {
        if (!p->opt.run_dir)
            return op_error(b, "no vocabulary to load: give `vocabulary: FILE` or a run folder");
        path = path_resolve(p->opt.run_dir, "vocabulary.txt");
        if (!path || !(p->vocab = tfc_vocab_load(path, err))) {
            free(path);
            tfc_error_hint(err, "the train split writes it; or give `vocabulary: FILE`");
            return err && err->code ? err->code : TFC_ERR_NOMEM;
        }
        v = p->vocab;
    } else {
        /* Built from every record of this pipeline's source (the training split). */
        if (p->src->spec.comp[TFC_COMP_FEATURES].dtype != TFC_U8)
            return op_error(b, "can build a vocabulary only over a text source");
        p->vocab = vocab_build(tok, lower, a->max_tokens, a->min_count, p->src, err);
        if (!p->vocab) return err && err->code ? err->code : TFC_ERR_NOMEM;
        v = p->vocab;
        if (p->opt.run_dir) {
            path = path_resolve(p->opt.run_dir, "vocabulary.txt");
            tfc_status st = path ? tfc_vocab_save(v, path, err)
                                 : tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
            if (st) {
                free(path);
                return st;
            }
        }
    }
    if (v->tok != tok) {
        tfc_status st = op_error(b, "tokenizer is %s but the vocabulary%s%s was made by the %s "
                                 "tokenizer", tokenizer_choices[a->tokenizer], path ? " " : "",
                                 path ? path : "", tokenizer_choices[v->tok]);
        free(path);
        return st;
    }
    free(path);
    a->vocab = v;
    a->vocabulary = NULL; /* the config text may not outlive the pipeline */
    out->comp[TFC_COMP_FEATURES] = (tfc_component_spec){1, TFC_I32, {.ndim = 1, .dim = {-1}}};
    return TFC_OK;
}

static tfc_status tokenize_apply(const void *args, tfc_element *e, const tfc_map_ctx *ctx,
                                 tfc_error *err)
{
    const tokenize_args *a = args;
    tfc_tensor old = e->comp[TFC_COMP_FEATURES];
    if (old.dtype != TFC_U8 || old.shape.ndim != 1)
        return tfc_error_set(err, TFC_ERR_DATA, "tokenize: needs text bytes");
    int64_t len = old.shape.dim[0];
    /* At most one token per byte: size the output by the text, then trim the shape. */
    tfc_shape s = {.ndim = 1, .dim = {len}};
    e->comp[TFC_COMP_FEATURES].data = NULL;
    int32_t *ids = tfc_element_alloc(e, TFC_COMP_FEATURES, TFC_I32, &s);
    if (!ids) {
        free(old.data);
        return tfc_error_set(err, TFC_ERR_NOMEM, "tokenize: out of memory");
    }
    int64_t n = tfc_vocab_encode(a->vocab, old.data, (size_t)len, ids, len);
    free(old.data);
    if (n < 0) return tfc_error_set(err, TFC_ERR_NOMEM, "tokenize: out of memory");
    e->comp[TFC_COMP_FEATURES].shape.dim[0] = n;
    return TFC_OK;
}

const op_def op_tokenize = {"tokenize", tokenize_fields, sizeof(tokenize_args),
                            "text bytes to int32 token ids (0 <pad>, 1 <unk>)", tokenize_init,
                            tokenize_apply, NULL};
