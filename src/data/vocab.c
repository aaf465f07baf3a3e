/* Vocabularies and the char and word tokenizers: a string -> id hash map, tokenizing text
 * into ids, building a vocabulary from a source's records (the training split), and saving
 * and loading it as an escaped text file beside the run (for test and prediction). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "core/checksum.h"
#include "core/fileio.h"
#include "data/internal.h"

#define VOCAB_MAX_FILE_BYTES ((size_t)256 << 20)
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
    return tfc_fnv1a(TFC_FNV_INIT, s, n);
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

tfc_vocab *tfc_vocab_build(tfc_tokenizer tok, int lowercase, int max_tokens, int min_count,
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
        size_t len = tfc_data_tensor_bytes(t);
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

/* The vocabulary file's text (malloc'd; *len its bytes), or NULL when out of memory. */
static char *vocab_text(const tfc_vocab *v, size_t *len)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    if (!f) return NULL;
    fprintf(f, "%s tokenizer=%s lowercase=%d\n", VOCAB_HEADER,
            v->tok == TFC_TOKENIZER_CHAR ? "char" : "word", v->lowercase);
    for (int64_t i = 0; i < v->n; i++) escape_token(f, v->tokens[i], v->lens[i]);
    return fclose(f) == 0 ? text : (free(text), NULL);
}

void tfc_vocab_hash(const tfc_vocab *v, char out[17])
{
    size_t len = 0;
    char *text = vocab_text(v, &len);
    out[0] = 0;
    if (text) snprintf(out, 17, "%016llx", (unsigned long long)tfc_fnv1a(TFC_FNV_INIT, text, len));
    free(text);
}

tfc_status tfc_vocab_save(const tfc_vocab *v, const char *path, tfc_error *err)
{
    size_t len = 0;
    char *text = vocab_text(v, &len);
    if (!text) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory writing %s", path);
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
        if (!why && v->n > TFC_VOCAB_MAX_TOKENS) why = "too many tokens";
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
