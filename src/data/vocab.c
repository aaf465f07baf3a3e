/* Vocabularies and the char and word tokenizers, and Keras's TextVectorization (standardize,
 * split, n-grams, the lookup and its output modes): a string -> id hash map, tokenizing text
 * into ids, building a vocabulary from a source's records (the training split), and saving
 * and loading it as an escaped text file beside the run (for test and prediction). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
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
    int64_t docs, last; /* adapting for tf_idf: documents holding it, the last one (1-based) */
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
    m->e[j] = (strmap_entry){.s = copy, .len = (uint32_t)n};
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
    tfc_text_spec ks; /* TFC_TOKENIZER_KERAS */
    float *idf;       /* Keras tf_idf: n weights */
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

/* ---- Keras's TextVectorization: standardize, split, n-grams -------------------------------- */

const char *const tfc_standardize_names[] = {
    [TFC_STANDARDIZE_NONE] = "null",
    [TFC_STANDARDIZE_LOWER_AND_STRIP_PUNCTUATION] = "lower_and_strip_punctuation",
    [TFC_STANDARDIZE_LOWER] = "lower",
    [TFC_STANDARDIZE_STRIP_PUNCTUATION] = "strip_punctuation",
    [TFC_STANDARDIZE_COUNT] = NULL};
const char *const tfc_text_split_names[] = {[TFC_TEXT_SPLIT_NONE] = "null",
                                            [TFC_TEXT_SPLIT_WHITESPACE] = "whitespace",
                                            [TFC_TEXT_SPLIT_CHARACTER] = "character",
                                            [TFC_TEXT_SPLIT_COUNT] = NULL};
const char *const tfc_text_output_names[] = {
    [TFC_TEXT_INT] = "int",         [TFC_TEXT_ONE_HOT] = "one_hot",
    [TFC_TEXT_MULTI_HOT] = "multi_hot", [TFC_TEXT_COUNT] = "count",
    [TFC_TEXT_TF_IDF] = "tf_idf",   [TFC_TEXT_OUTPUT_COUNT] = NULL};

/* Keras's strip_punctuation regex: every ASCII punctuation character. */
static const char keras_punctuation[] = "!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~'";
static const char utf8_replacement[] = "\xef\xbf\xbd"; /* U+FFFD */

typedef struct span {
    const char *p;
    size_t n;
} span;

/* Bytes of the UTF-8 character at s (n > 0 bytes left); *bad when they are instead the
 * maximal invalid subpart, which unicode_split replaces with one U+FFFD. */
static size_t utf8_char(const unsigned char *s, size_t n, int *bad)
{
    unsigned c = s[0], lo = 0x80, hi = 0xbf;
    size_t need = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
                 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (!need) {
        *bad = 1;
        return 1;
    }
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
    size_t i = 1;
    for (; i < need && i < n; i++)
        if (s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xbf)) break;
    *bad = i < need;
    return i;
}

static int keras_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r'); /* tf.strings.split: \t \n \v \f \r */
}

/* Calls fn for each token TextVectorization makes of text: standardized (ASCII lowercase,
 * ASCII punctuation removed), split (whitespace runs; UTF-8 characters with invalid bytes
 * as U+FFFD; or the whole text) and joined into n-grams of each width in turn. Returns 0,
 * fn's non-zero result, or -1 out of memory. */
static int keras_tokens(const tfc_text_spec *ts, const char *text, size_t len, token_fn fn,
                        void *user)
{
    char *buf = malloc(len + 1), *join = NULL;
    span *sp = malloc((len + 1) * sizeof *sp);
    int rc = -1;
    if (!buf || !sp) goto done;
    int lower = ts->standardize == TFC_STANDARDIZE_LOWER ||
                ts->standardize == TFC_STANDARDIZE_LOWER_AND_STRIP_PUNCTUATION;
    int strip = ts->standardize == TFC_STANDARDIZE_STRIP_PUNCTUATION ||
                ts->standardize == TFC_STANDARDIZE_LOWER_AND_STRIP_PUNCTUATION;
    size_t n = 0, count = 0, bytes = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (strip && c && strchr(keras_punctuation, c)) continue;
        buf[n++] = (char)(lower && c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    const unsigned char *u = (const unsigned char *)buf;
    if (ts->split == TFC_TEXT_SPLIT_NONE) {
        sp[count++] = (span){buf, n};
    } else if (ts->split == TFC_TEXT_SPLIT_WHITESPACE) {
        for (size_t i = 0; i < n;) {
            while (i < n && keras_space(u[i])) i++;
            size_t start = i;
            while (i < n && !keras_space(u[i])) i++;
            if (i > start) sp[count++] = (span){buf + start, i - start};
        }
    } else {
        for (size_t i = 0; i < n;) {
            int bad;
            size_t k = utf8_char(u + i, n - i, &bad);
            sp[count++] = bad ? (span){utf8_replacement, 3} : (span){buf + i, k};
            i += k;
        }
    }
    rc = 0;
    for (size_t i = 0; i < count; i++) bytes += sp[i].n + 1;
    if (!ts->nngrams) {
        for (size_t i = 0; i < count && !rc; i++) rc = fn(sp[i].p, sp[i].n, user);
        goto done;
    }
    if (!(join = malloc(bytes + 1))) {
        rc = -1;
        goto done;
    }
    for (int g = 0; g < ts->nngrams && !rc; g++) {
        size_t w = (size_t)ts->ngrams[g];
        for (size_t i = 0; i + w <= count && !rc; i++) {
            size_t o = 0;
            for (size_t k = i; k < i + w; k++) {
                if (k > i) join[o++] = ' ';
                memcpy(join + o, sp[k].p, sp[k].n);
                o += sp[k].n;
            }
            rc = fn(join, o, user);
        }
    }
done:
    free(join);
    free(sp);
    free(buf);
    return rc;
}

/* The id of a Keras token: output_mode int maps "" to 0 (the mask) and unknown tokens to 1;
 * the other modes map unknown tokens to 0 and drop "" (-1). */
static int64_t keras_id(const tfc_vocab *v, const char *t, size_t n)
{
    int ints = v->ks.output_mode == TFC_TEXT_INT;
    if (n == 0) return ints ? 0 : -1;
    const strmap_entry *e = strmap_find(&v->index, t, n);
    return e ? e->val : ints ? 1 : 0;
}

const tfc_text_spec *tfc_vocab_text_spec(const tfc_vocab *v)
{
    return v->tok == TFC_TOKENIZER_KERAS ? &v->ks : NULL;
}

const float *tfc_vocab_idf(const tfc_vocab *v)
{
    return v->idf;
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
    int64_t id;
    if (c->v->tok == TFC_TOKENIZER_KERAS) {
        if ((id = keras_id(c->v, t, n)) < 0) return 0;
    } else {
        const strmap_entry *e = strmap_find(&c->v->index, t, n);
        id = e ? e->val : 1;
    }
    if (c->ids && c->n < c->cap) c->ids[c->n] = (int32_t)id;
    c->n++;
    return 0;
}

typedef struct vectorize_ctx {
    const tfc_vocab *v;
    float *y;
    int64_t n;
} vectorize_ctx;

static int vectorize_one(const char *t, size_t n, void *user)
{
    vectorize_ctx *c = user;
    int64_t id = keras_id(c->v, t, n);
    if (id < 0) return 0;
    c->n++;
    int hot = c->v->ks.output_mode == TFC_TEXT_ONE_HOT ||
              c->v->ks.output_mode == TFC_TEXT_MULTI_HOT;
    c->y[id] = hot ? 1.0f : c->y[id] + 1.0f;
    return 0;
}

int64_t tfc_vocab_vectorize(const tfc_vocab *v, const char *text, size_t len, void *out,
                            int64_t width)
{
    if (v->tok != TFC_TOKENIZER_KERAS || v->ks.output_mode == TFC_TEXT_INT) {
        memset(out, 0, (size_t)width * sizeof(int32_t));
        return tfc_vocab_encode(v, text, len, out, width);
    }
    if (width < v->n) return -2;
    vectorize_ctx c = {v, out, 0};
    memset(out, 0, (size_t)width * sizeof(float));
    if (keras_tokens(&v->ks, text, len, vectorize_one, &c) < 0) return -1;
    for (int64_t i = 0; v->idf && i < v->n; i++) c.y[i] *= v->idf[i];
    return c.n;
}

int64_t tfc_vocab_encode(const tfc_vocab *v, const char *text, size_t len, int32_t *ids,
                         int64_t cap)
{
    if (v->tok == TFC_TOKENIZER_KERAS) {
        encode_ctx c = {v, ids, cap, 0};
        return keras_tokens(&v->ks, text, len, encode_one, &c) < 0 ? -1 : c.n;
    }
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
    free(v->idf);
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

/* The byte order of two tokens. */
static int bytes_order(const strmap_entry *x, const strmap_entry *y)
{
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Falling count, ties in byte order. */
static int by_count(const void *a, const void *b)
{
    const strmap_entry *x = *(strmap_entry *const *)a, *y = *(strmap_entry *const *)b;
    if (x->val != y->val) return x->val > y->val ? -1 : 1;
    return bytes_order(x, y);
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

/* ---- Keras's adapt ---------------------------------------------------------------------- */

typedef struct keras_count_ctx {
    strmap *counts;
    int64_t doc; /* the record's number, from 1 */
} keras_count_ctx;

static int keras_count_one(const char *t, size_t n, void *user)
{
    keras_count_ctx *c = user;
    strmap_entry *e = strmap_upsert(c->counts, t, n);
    if (!e) return 1;
    e->val++;
    if (e->last != c->doc) e->docs++, e->last = c->doc;
    return 0;
}

/* Falling count, ties in falling byte order: Keras's lexsort((tokens, counts))[::-1]. */
static int by_count_keras(const void *a, const void *b)
{
    const strmap_entry *x = *(strmap_entry *const *)a, *y = *(strmap_entry *const *)b;
    if (x->val != y->val) return x->val > y->val ? -1 : 1;
    return -bytes_order(x, y);
}

static int keras_special(const char *s, size_t n)
{
    return n == 0 || (n == 5 && !memcmp(s, "[UNK]", 5));
}

/* Adds the special tokens of ts's output mode to an empty vocabulary. */
static int keras_add_specials(tfc_vocab *v)
{
    return (v->ks.output_mode == TFC_TEXT_INT && vocab_add(v, "", 0)) ||
           vocab_add(v, "[UNK]", 5);
}

tfc_vocab *tfc_vocab_keras_build(const tfc_text_spec *ts, int max_tokens, source *src,
                                 tfc_error *err)
{
    strmap counts = {0};
    tfc_vocab *v = NULL;
    strmap_entry **order = NULL;
    for (int64_t i = 0; i < src->count; i++) {
        tfc_element e = {0};
        tfc_status st = src->ops->get(src, i, &e, err);
        if (st) {
            for (int c = 0; c < TFC_COMP_COUNT; c++) free(e.comp[c].data);
            goto fail;
        }
        const tfc_tensor *t = &e.comp[TFC_COMP_FEATURES];
        keras_count_ctx c = {&counts, i + 1};
        int bad = keras_tokens(ts, t->data, tfc_data_tensor_bytes(t), keras_count_one, &c);
        for (int k = 0; k < TFC_COMP_COUNT; k++) free(e.comp[k].data);
        if (bad) goto nomem;
    }
    order = malloc((counts.n + 1) * sizeof *order);
    v = vocab_new(TFC_TOKENIZER_KERAS, 0);
    if (!order || !v) goto nomem;
    v->ks = *ts;
    if (keras_add_specials(v)) goto nomem;
    int64_t start = v->n, n = 0;
    for (size_t i = 0; i < counts.cap; i++)
        if (counts.e[i].s && !keras_special(counts.e[i].s, counts.e[i].len))
            order[n++] = &counts.e[i];
    qsort(order, (size_t)n, sizeof *order, by_count_keras);
    if (max_tokens > 0 && n > max_tokens - start) n = max_tokens > start ? max_tokens - start : 0;
    if (ts->output_mode == TFC_TEXT_TF_IDF && !(v->idf = malloc((size_t)(start + n) * 4)))
        goto nomem;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        if (vocab_add(v, order[i]->s, order[i]->len) < 0) goto nomem;
        if (!v->idf) continue;
        /* TensorFlow divides the int64 counts in float64, then casts the log to float32. */
        v->idf[start + i] = (float)log(1.0 + (double)src->count / (1.0 + (double)order[i]->docs));
        sum += v->idf[start + i];
    }
    if (v->idf) v->idf[0] = n ? (float)(sum / (double)n) : 0.0f; /* [UNK]: the mean, or 0 */
    free(order);
    strmap_free(&counts, 1);
    return v;
nomem:
    tfc_error_set(err, TFC_ERR_NOMEM, "out of memory building the vocabulary");
fail:
    free(order);
    strmap_free(&counts, 1);
    tfc_vocab_free(v);
    return NULL;
}

tfc_vocab *tfc_vocab_keras(const tfc_text_spec *ts, const char *const *tokens,
                           const size_t *lens, int64_t n, const float *idf, int64_t *dup,
                           tfc_error *err)
{
    *dup = -1;
    tfc_vocab *v = vocab_new(TFC_TOKENIZER_KERAS, 0);
    if (v) v->ks = *ts;
    if (v && idf && (v->idf = malloc((size_t)(n ? n : 1) * 4))) memcpy(v->idf, idf, (size_t)n * 4);
    if (!v || (idf && !v->idf)) goto nomem;
    for (int64_t i = 0; i < n; i++) {
        int r = vocab_add(v, tokens[i], lens[i]);
        if (r < 0) goto nomem;
        if (r == 1) {
            *dup = i;
            tfc_vocab_free(v);
            return NULL;
        }
    }
    return v;
nomem:
    tfc_vocab_free(v);
    tfc_error_set(err, TFC_ERR_NOMEM, "out of memory making the vocabulary");
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
}

/* The vocabulary file's text (malloc'd; *len its bytes), or NULL when out of memory. */
static char *vocab_text(const tfc_vocab *v, size_t *len)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    if (!f) return NULL;
    if (v->tok == TFC_TOKENIZER_KERAS) {
        const tfc_text_spec *ks = &v->ks;
        fprintf(f, "%s tokenizer=keras standardize=%s split=%s ngrams=", VOCAB_HEADER,
                tfc_standardize_names[ks->standardize], tfc_text_split_names[ks->split]);
        for (int g = 0; g < ks->nngrams; g++) fprintf(f, "%s%d", g ? "," : "", ks->ngrams[g]);
        fprintf(f, "%s output_mode=%s\n", ks->nngrams ? "" : "null",
                tfc_text_output_names[ks->output_mode]);
    } else {
        fprintf(f, "%s tokenizer=%s lowercase=%d\n", VOCAB_HEADER,
                v->tok == TFC_TOKENIZER_CHAR ? "char" : "word", v->lowercase);
    }
    for (int64_t i = 0; i < v->n; i++) {
        escape_token(f, v->tokens[i], v->lens[i]);
        if (v->idf) fprintf(f, "\t%.9g", (double)v->idf[i]);
        fputc('\n', f);
    }
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

/* The index of name in a NULL-terminated list, or -1. */
static int name_index(const char *const *names, const char *name)
{
    for (int i = 0; names[i]; i++)
        if (!strcmp(names[i], name)) return i;
    return -1;
}

/* A Keras vocabulary's settings from its header line's text after "tokenizer=keras";
 * 0 when they do not parse. */
static int parse_keras_header(const char *p, tfc_text_spec *ks)
{
    char std[40], split[16], ngrams[64], mode[16];
    if (sscanf(p, " standardize=%39s split=%15s ngrams=%63s output_mode=%15s", std, split,
               ngrams, mode) != 4)
        return 0;
    ks->standardize = name_index(tfc_standardize_names, std);
    ks->split = name_index(tfc_text_split_names, split);
    ks->output_mode = name_index(tfc_text_output_names, mode);
    ks->nngrams = 0;
    for (char *q = ngrams; strcmp(ngrams, "null") && *q;) {
        char *end;
        long w = strtol(q, &end, 10);
        if (end == q || w < 1 || w > 1 << 16 || ks->nngrams == TFC_TEXT_MAX_NGRAMS) return 0;
        ks->ngrams[ks->nngrams++] = (int)w;
        q = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return 0;
    }
    return ks->standardize >= 0 && ks->split >= 0 && ks->output_mode >= 0;
}

tfc_vocab *tfc_vocab_load(const char *path, tfc_error *err)
{
    char *text;
    size_t len;
    if (tfc_file_read_all(path, VOCAB_MAX_FILE_BYTES, &text, &len, err)) return NULL;
    char tokname[16] = "";
    int lower = -1, lineno = 1, keras = 0;
    tfc_text_spec ks = {0};
    const char *p = text, *end = text + len;
    const char *nl = memchr(p, '\n', len);
    size_t hl = strlen(VOCAB_HEADER);
    int n_read = 0;
    if (nl && (size_t)(nl - p) >= hl && !strncmp(p, VOCAB_HEADER, hl) &&
        sscanf(p + hl, " tokenizer=%15s%n", tokname, &n_read) == 1) {
        keras = !strcmp(tokname, "keras");
        char *line = strndup(p + hl + n_read, (size_t)(nl - p) - hl - (size_t)n_read);
        if (!line) goto nomem_text;
        if (keras && !parse_keras_header(line, &ks)) keras = 0, tokname[0] = 0;
        if (!keras && sscanf(line, " lowercase=%d", &lower) != 1) lower = -1;
        free(line);
    }
    if (!keras && ((strcmp(tokname, "char") && strcmp(tokname, "word")) ||
                   (lower != 0 && lower != 1))) {
        free(text);
        tfc_error_at(err, TFC_ERR_DATA, path, 1, 1, NULL, NULL,
                     "not a tfc vocabulary (expected the header \"%s tokenizer=char|word "
                     "lowercase=0|1\" or tokenizer=keras with its settings)", VOCAB_HEADER);
        return NULL;
    }
    tfc_vocab *v = vocab_new(keras ? TFC_TOKENIZER_KERAS
                             : strcmp(tokname, "char") ? TFC_TOKENIZER_WORD : TFC_TOKENIZER_CHAR,
                             keras ? 0 : lower);
    char *buf = malloc(len + 1);
    int tfidf = keras && ks.output_mode == TFC_TEXT_TF_IDF;
    size_t idf_cap = 0;
    if (!v || !buf) goto nomem;
    v->ks = ks;
    for (p = nl + 1; p < end; p = nl + 1) {
        lineno++;
        nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        const char *tab = tfidf ? memchr(p, '\t', (size_t)(nl - p)) : NULL;
        long n = unescape(p, (size_t)((tab ? tab : nl) - p), buf);
        /* Keras's int mode starts with "" (the mask token). */
        int empty_ok = keras && ks.output_mode == TFC_TEXT_INT && v->n == 0;
        const char *why = n < 0 ? "bad escape" : n == 0 && !empty_ok ? "empty token"
                          : tfidf && !tab ? "no idf weight (a tab and a number)" : NULL;
        if (!why && tfidf) {
            char *e;
            double w = strtod(tab + 1, &e);
            if (e == tab + 1 || e != nl || !isfinite(w)) why = "bad idf weight";
            if (!why && (size_t)v->n >= idf_cap) {
                idf_cap = idf_cap ? idf_cap * 2 : 64;
                float *g = realloc(v->idf, idf_cap * sizeof *g);
                if (!g) goto nomem;
                v->idf = g;
            }
            if (!why) v->idf[v->n] = (float)w;
        }
        int r = why ? 0 : vocab_add(v, buf, (size_t)n);
        if (r < 0) goto nomem;
        if (r == 1) why = "duplicate token";
        if (!why && v->n > TFC_VOCAB_MAX_TOKENS) why = "too many tokens";
        if (why) {
            tfc_error_at(err, TFC_ERR_DATA, path, lineno, 1, NULL, NULL, "%s", why);
            goto fail;
        }
    }
    int specials = keras ? (ks.output_mode == TFC_TEXT_INT
                                ? v->n >= 2 && v->lens[0] == 0 && !strcmp(v->tokens[1], "[UNK]")
                                : v->n >= 1 && !strcmp(v->tokens[0], "[UNK]"))
                         : v->n >= 2 && !strcmp(v->tokens[0], "<pad>") &&
                               !strcmp(v->tokens[1], "<unk>");
    if (!specials) {
        tfc_error_at(err, TFC_ERR_DATA, path, 2, 1, NULL, NULL, "%s",
                     !keras ? "a vocabulary starts with the tokens <pad> and <unk>"
                     : ks.output_mode == TFC_TEXT_INT
                         ? "a Keras int vocabulary starts with the tokens \"\" (an empty line) "
                           "and [UNK]"
                         : "a Keras vocabulary starts with the token [UNK]");
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
nomem_text:
    free(text);
    tfc_error_set(err, TFC_ERR_NOMEM, "out of memory reading %s", path);
    return NULL;
}
