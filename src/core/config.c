/* YAML documents as trees of positioned nodes. libyaml's event parser drives a recursive
 * builder; aliases are expanded by copying under a node budget so a few KB cannot grow into
 * gigabytes, and an alias to an anchor still being built (a cycle) is an error. */
#include "core/config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

struct tfc_doc {
    char *path;
    char *text;
    size_t len;
    tfc_node *root;
    void **allocs; /* everything owned by the document */
    size_t nallocs, cap;
    long nodes;    /* nodes created, bounded by TFC_CONFIG_MAX_NODES */
};

typedef struct anchor {
    char *name;
    tfc_node *node;
} anchor;

typedef struct builder {
    tfc_doc *doc;
    yaml_parser_t parser;
    anchor *anchors;
    int nanchors, cap;
    tfc_error *err;
    int failed;
} builder;

static void *doc_alloc(tfc_doc *doc, size_t size)
{
    if (doc->nallocs == doc->cap) {
        size_t cap = doc->cap ? doc->cap * 2 : 64;
        void **a = realloc(doc->allocs, cap * sizeof *a);
        if (!a) return NULL;
        doc->allocs = a;
        doc->cap = cap;
    }
    void *p = calloc(1, size ? size : 1);
    if (p) doc->allocs[doc->nallocs++] = p;
    return p;
}

static char *doc_strdup(tfc_doc *doc, const char *s)
{
    size_t n = strlen(s);
    char *p = doc_alloc(doc, n + 1);
    if (p) memcpy(p, s, n + 1);
    return p;
}

static tfc_node *node_new(tfc_doc *doc, tfc_node_kind kind, int line, int col,
                          const tfc_doc *src)
{
    if (doc->nodes >= TFC_CONFIG_MAX_NODES) return NULL;
    tfc_node *n = doc_alloc(doc, sizeof *n);
    if (!n) return NULL;
    doc->nodes++;
    n->kind = kind;
    n->line = line;
    n->col = col;
    n->doc = doc;
    n->src = src ? src : doc;
    n->str = kind == TFC_NODE_SCALAR ? "" : NULL;
    return n;
}

static int node_grow(tfc_node *n)
{
    if (n->n < n->cap) return 1;
    int cap = n->cap ? n->cap * 2 : 4;
    tfc_node **vals = doc_alloc(n->doc, (size_t)cap * sizeof *vals);
    tfc_node **keys = n->kind == TFC_NODE_MAP ? doc_alloc(n->doc, (size_t)cap * sizeof *keys) : NULL;
    if (!vals || (n->kind == TFC_NODE_MAP && !keys)) return 0;
    if (n->n) {
        memcpy(vals, n->vals, (size_t)n->n * sizeof *vals);
        if (keys) memcpy(keys, n->keys, (size_t)n->n * sizeof *keys);
    }
    n->vals = vals;
    n->keys = keys;
    n->cap = cap;
    return 1;
}

tfc_node *tfc_node_new_scalar(tfc_doc *doc, const tfc_node *at, const char *text, int quoted)
{
    tfc_node *n = node_new(doc, TFC_NODE_SCALAR, at ? at->line : 0, at ? at->col : 0, at ? at->src : NULL);
    if (!n) return NULL;
    n->str = doc_strdup(doc, text);
    n->quoted = quoted;
    return n->str ? n : NULL;
}

tfc_node *tfc_node_new_map(tfc_doc *doc, const tfc_node *at)
{
    return node_new(doc, TFC_NODE_MAP, at ? at->line : 0, at ? at->col : 0, at ? at->src : NULL);
}

void tfc_node_map_set(tfc_node *map, tfc_node *key, tfc_node *val)
{
    TFC_ASSERT(map->kind == TFC_NODE_MAP && key->kind == TFC_NODE_SCALAR);
    for (int i = 0; i < map->n; i++)
        if (strcmp(map->keys[i]->str, key->str) == 0) {
            map->vals[i] = val;
            return;
        }
    TFC_ASSERT(node_grow(map));
    map->keys[map->n] = key;
    map->vals[map->n++] = val;
}

void tfc_node_seq_push(tfc_node *seq, tfc_node *val)
{
    TFC_ASSERT(seq->kind == TFC_NODE_SEQ);
    TFC_ASSERT(node_grow(seq));
    seq->vals[seq->n++] = val;
}

/* Copies src into doc; NULL when the node budget runs out. */
tfc_node *tfc_node_copy(tfc_doc *doc, const tfc_node *src)
{
    tfc_node *n = node_new(doc, src->kind, src->line, src->col, src->src);
    if (!n) return NULL;
    n->quoted = src->quoted;
    if (src->kind == TFC_NODE_SCALAR) {
        n->str = doc_strdup(doc, src->str);
        return n->str ? n : NULL;
    }
    for (int i = 0; i < src->n; i++) {
        tfc_node *v = tfc_node_copy(doc, src->vals[i]);
        tfc_node *k = src->kind == TFC_NODE_MAP ? tfc_node_copy(doc, src->keys[i]) : NULL;
        if (!v || (src->kind == TFC_NODE_MAP && !k) || !node_grow(n)) return NULL;
        if (k) n->keys[n->n] = k;
        n->vals[n->n++] = v;
    }
    return n;
}

const char *tfc_node_file(const tfc_node *node)
{
    return node && node->src && node->src->path ? node->src->path : "";
}

tfc_node *tfc_node_get(const tfc_node *map, const char *key)
{
    if (!map || map->kind != TFC_NODE_MAP) return NULL;
    for (int i = 0; i < map->n; i++)
        if (strcmp(map->keys[i]->str, key) == 0) return map->vals[i];
    return NULL;
}

const char *tfc_node_kind_name(tfc_node_kind kind)
{
    return kind == TFC_NODE_MAP ? "a mapping" : kind == TFC_NODE_SEQ ? "a sequence" : "a scalar";
}

tfc_status tfc_node_error(tfc_error *err, tfc_status code, const tfc_node *node, const char *key,
                          const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const tfc_doc *doc = node ? node->src : NULL;
    return tfc_error_at(err, code, doc ? doc->path : NULL, node ? node->line : 0,
                        node ? node->col : 0, doc ? doc->text : NULL, key, "%s", msg);
}

/* ---- building from libyaml events ----------------------------------------------------- */

static void fail_at(builder *b, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail_at(builder *b, int line, int col, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!b->failed)
        tfc_error_at(b->err, TFC_ERR_CONFIG, b->doc->path, line, col, b->doc->text, NULL, "%s",
                     msg);
    b->failed = 1;
}

/* What a libyaml problem most often means in a hand-written config, said in its terms. */
static void yaml_hint(builder *b, const yaml_parser_t *p)
{
    static const struct {
        const char *problem, *hint;
    } hints[] = {
        {"expected ',' or '}'", "the entries of a {...} mapping are separated by commas, "
                                "{units: 10, activation: relu}, and it ends in '}'"},
        {"expected ',' or ']'", "the items of a [...] list are separated by commas, "
                                "[28, 28, 1], and it ends in ']'"},
        {"mapping values are not allowed",
         "a ':' where no key may start: is this line indented deeper than the key above it, "
         "or does a value hold ': ' (then quote it)?"},
        {"expected '-' indicator", "a line of a list begins with '- ' in the column of the "
                                   "items above it"},
        {"did not find expected key",
         "this line lines up with no key above it (the keys of one mapping, and the '- ' items "
         "of one list, each start in one column), or a key before it lacks the space after its "
         "':'"},
        {"could not find expected ':'", "a key is followed by ': ' (a colon and a space)"},
    };
    const char *problem = p->problem ? p->problem : "";
    const size_t at = p->problem_mark.index;
    if (strstr(problem, "cannot start any token") && at < b->doc->len &&
        b->doc->text[at] == '\t') {
        tfc_error_hint(b->err, "YAML indents with spaces: a tab is not allowed here");
        return;
    }
    if (strstr(problem, "end of stream") && p->context && strstr(p->context, "quoted scalar")) {
        tfc_error_hint(b->err, "the quote at line %d, column %d is never closed",
                       (int)p->context_mark.line + 1, (int)p->context_mark.column + 1);
        return;
    }
    for (size_t i = 0; i < sizeof hints / sizeof *hints; i++)
        if (strstr(problem, hints[i].problem)) {
            tfc_error_hint(b->err, "%s", hints[i].hint);
            return;
        }
}

static int next_event(builder *b, yaml_event_t *ev)
{
    if (yaml_parser_parse(&b->parser, ev)) return 1;
    const yaml_parser_t *p = &b->parser;
    const int first = !b->failed;
    int line = (int)p->problem_mark.line + 1, col = (int)p->problem_mark.column + 1;
    if (p->error == YAML_READER_ERROR) { /* a byte offset, not a mark */
        line = 1;
        col = 1;
        for (size_t i = 0; i < p->problem_offset && i < b->doc->len; i++, col++)
            if (b->doc->text[i] == '\n') {
                line++;
                col = 0;
            }
    }
    fail_at(b, line, col, "invalid YAML: %s%s%s", p->problem ? p->problem : "syntax error",
            p->context ? " " : "", p->context ? p->context : "");
    if (first && p->error != YAML_READER_ERROR) yaml_hint(b, p);
    return 0;
}

static void remember_anchor(builder *b, const yaml_char_t *name, tfc_node *node)
{
    if (!name) return;
    for (int i = 0; i < b->nanchors; i++)
        if (strcmp(b->anchors[i].name, (const char *)name) == 0) {
            b->anchors[i].node = node; /* YAML: a redefined anchor names the newer node */
            return;
        }
    if (b->nanchors == b->cap) {
        int cap = b->cap ? b->cap * 2 : 8;
        anchor *a = realloc(b->anchors, (size_t)cap * sizeof *a);
        if (!a) {
            fail_at(b, 0, 0, "out of memory");
            return;
        }
        b->anchors = a;
        b->cap = cap;
    }
    b->anchors[b->nanchors].name = doc_strdup(b->doc, (const char *)name);
    b->anchors[b->nanchors++].node = node;
}

static tfc_node *budget_exceeded(builder *b, int line, int col)
{
    fail_at(b, line, col,
            "the document expands to more than %d nodes (aliases are copied where used); "
            "is this an alias bomb?",
            TFC_CONFIG_MAX_NODES);
    return NULL;
}

/* YAML merge keys (`<<: *base`, `<<: [*a, *b]`, yaml.org/type/merge.html): the value is a
 * mapping or a sequence of mappings. */
static int merge_source_ok(builder *b, const tfc_node *key, const tfc_node *val)
{
    int ok = val->kind == TFC_NODE_MAP;
    if (val->kind == TFC_NODE_SEQ) {
        ok = 1;
        for (int i = 0; i < val->n; i++) ok &= val->vals[i]->kind == TFC_NODE_MAP;
    }
    if (!ok)
        fail_at(b, val->line, val->col,
                "the merge key '<<' takes a mapping or a list of mappings (e.g. <<: *defaults)");
    return ok;
}

/* Adds the keys of merge source `src` that `node` lacks: keys written in the mapping win
 * over merged ones, and of several merged mappings the earlier wins (YAML's merge type). */
static int apply_merge(builder *b, tfc_node *node, const tfc_node *src, int line, int col)
{
    if (src->kind == TFC_NODE_SEQ) {
        for (int i = 0; i < src->n; i++)
            if (!apply_merge(b, node, src->vals[i], line, col)) return 0;
        return 1;
    }
    for (int k = 0; k < src->n; k++) {
        int have = 0;
        for (int i = 0; i < node->n && !have; i++)
            have = strcmp(node->keys[i]->str, src->keys[k]->str) == 0;
        if (have) continue;
        if (!node_grow(node)) return budget_exceeded(b, line, col), 0;
        node->keys[node->n] = src->keys[k];
        node->vals[node->n++] = src->vals[k];
    }
    return 1;
}

/* Builds the node that starts with event `ev` (consumed here, with its children). */
static tfc_node *build(builder *b, yaml_event_t *ev, int depth)
{
    int line = (int)ev->start_mark.line + 1, col = (int)ev->start_mark.column + 1;
    tfc_node *node = NULL;
    if (depth > TFC_CONFIG_MAX_DEPTH) {
        fail_at(b, line, col, "nesting deeper than %d levels", TFC_CONFIG_MAX_DEPTH);
        return NULL;
    }
    switch (ev->type) {
    case YAML_SCALAR_EVENT: {
        node = node_new(b->doc, TFC_NODE_SCALAR, line, col, NULL);
        if (!node) return budget_exceeded(b, line, col);
        node->str = doc_strdup(b->doc, (const char *)ev->data.scalar.value);
        node->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
        remember_anchor(b, ev->data.scalar.anchor, node);
        return node;
    }
    case YAML_ALIAS_EVENT: {
        const char *name = (const char *)ev->data.alias.anchor;
        for (int i = b->nanchors - 1; i >= 0; i--)
            if (strcmp(b->anchors[i].name, name) == 0) {
                node = tfc_node_copy(b->doc, b->anchors[i].node);
                return node ? node : budget_exceeded(b, line, col);
            }
        fail_at(b, line, col, "alias *%s refers to no complete anchor (undefined, or a cycle)",
                name);
        return NULL;
    }
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
        int is_map = ev->type == YAML_MAPPING_START_EVENT;
        const yaml_char_t *anchor_name =
            is_map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor;
        char *anchor_copy = anchor_name ? doc_strdup(b->doc, (const char *)anchor_name) : NULL;
        node = node_new(b->doc, is_map ? TFC_NODE_MAP : TFC_NODE_SEQ, line, col, NULL);
        if (!node) return budget_exceeded(b, line, col);
        tfc_node *merges[16]; /* values of `<<` keys, applied when the mapping ends */
        int nmerges = 0;
        for (;;) {
            yaml_event_t child;
            if (!next_event(b, &child)) return NULL;
            if (child.type == YAML_SEQUENCE_END_EVENT || child.type == YAML_MAPPING_END_EVENT) {
                yaml_event_delete(&child);
                break;
            }
            tfc_node *key = NULL, *val;
            if (is_map) {
                key = build(b, &child, depth + 1);
                yaml_event_delete(&child);
                if (!key) return NULL;
                if (key->kind != TFC_NODE_SCALAR) {
                    fail_at(b, key->line, key->col, "a mapping key must be a plain string");
                    return NULL;
                }
                tfc_node *prev_key = NULL;
                for (int i = 0; i < node->n; i++)
                    if (strcmp(node->keys[i]->str, key->str) == 0) prev_key = node->keys[i];
                if (prev_key) {
                    fail_at(b, key->line, key->col, "duplicate key '%s' (first at line %d)",
                            key->str, prev_key->line);
                    return NULL;
                }
                if (!next_event(b, &child)) return NULL;
            }
            val = build(b, &child, depth + 1);
            yaml_event_delete(&child);
            if (!val) return NULL;
            if (is_map && !key->quoted && strcmp(key->str, "<<") == 0) {
                if (!merge_source_ok(b, key, val)) return NULL;
                if (nmerges == (int)(sizeof merges / sizeof *merges)) {
                    fail_at(b, key->line, key->col, "more than %d merge keys in one mapping",
                            nmerges);
                    return NULL;
                }
                merges[nmerges++] = val;
                continue;
            }
            if (!node_grow(node)) return budget_exceeded(b, line, col);
            if (is_map) node->keys[node->n] = key;
            node->vals[node->n++] = val;
        }
        for (int m = 0; m < nmerges; m++)
            if (!apply_merge(b, node, merges[m], line, col)) return NULL;
        remember_anchor(b, (const yaml_char_t *)anchor_copy, node);
        return node;
    }
    default:
        fail_at(b, line, col, "unexpected YAML event");
        return NULL;
    }
}

static tfc_doc *parse(tfc_doc *doc, tfc_error *err)
{
    builder b = {.doc = doc, .err = err};
    if (memchr(doc->text, 0, doc->len)) {
        tfc_error_at(err, TFC_ERR_CONFIG, doc->path, 0, 0, NULL, NULL,
                     "not a text file (NUL byte at offset %zu)",
                     (size_t)((char *)memchr(doc->text, 0, doc->len) - doc->text));
        tfc_doc_free(doc);
        return NULL;
    }
    if (!yaml_parser_initialize(&b.parser)) {
        tfc_error_set(err, TFC_ERR_NOMEM, "cannot initialise the YAML parser");
        tfc_doc_free(doc);
        return NULL;
    }
    yaml_parser_set_input_string(&b.parser, (const unsigned char *)doc->text, doc->len);
    int docs = 0;
    for (int done = 0; !done && !b.failed;) {
        yaml_event_t ev;
        if (!next_event(&b, &ev)) break;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT: done = 1; break;
        case YAML_STREAM_START_EVENT:
        case YAML_DOCUMENT_END_EVENT: break;
        case YAML_DOCUMENT_START_EVENT:
            if (++docs > 1)
                fail_at(&b, (int)ev.start_mark.line + 1, (int)ev.start_mark.column + 1,
                        "more than one YAML document in the file");
            break;
        default: doc->root = build(&b, &ev, 0); break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&b.parser);
    free(b.anchors);
    if (!b.failed && !doc->root)
        tfc_error_at(err, TFC_ERR_CONFIG, doc->path, 1, 1, NULL, NULL,
                     "empty file: expected a mapping of keys");
    if (b.failed || !doc->root) {
        tfc_doc_free(doc);
        return NULL;
    }
    return doc;
}

tfc_doc *tfc_doc_load_string(const char *text, size_t len, const char *name, tfc_error *err)
{
    if (len > TFC_CONFIG_MAX_BYTES) {
        tfc_error_at(err, TFC_ERR_CONFIG, name, 0, 0, NULL, NULL,
                     "file too large for a configuration (%zu bytes, at most %u)", len,
                     TFC_CONFIG_MAX_BYTES);
        return NULL;
    }
    tfc_doc *doc = calloc(1, sizeof *doc);
    if (!doc) return NULL;
    doc->path = strdup(name ? name : "<string>");
    doc->text = malloc(len + 1);
    if (!doc->path || !doc->text) {
        tfc_doc_free(doc);
        tfc_error_set(err, TFC_ERR_NOMEM, "out of memory reading %s", name);
        return NULL;
    }
    memcpy(doc->text, text, len);
    doc->text[len] = 0;
    doc->len = len;
    return parse(doc, err);
}

tfc_doc *tfc_doc_load_file(const char *path, tfc_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        tfc_error_at(err, TFC_ERR_CONFIG, path, 0, 0, NULL, NULL, "cannot open: %s",
                     strerror(errno));
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    for (size_t got; buf;) {
        if (len == cap) {
            if (cap > TFC_CONFIG_MAX_BYTES) break;
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    int read_error = ferror(f);
    fclose(f);
    if (!buf || read_error) {
        free(buf);
        tfc_error_at(err, TFC_ERR_CONFIG, path, 0, 0, NULL, NULL, "cannot read the file");
        return NULL;
    }
    tfc_doc *doc = tfc_doc_load_string(buf, len, path, err);
    free(buf);
    return doc;
}

void tfc_doc_free(tfc_doc *doc)
{
    if (!doc) return;
    for (size_t i = 0; i < doc->nallocs; i++) free(doc->allocs[i]);
    free(doc->allocs);
    free(doc->path);
    free(doc->text);
    free(doc);
}

tfc_node *tfc_doc_root(const tfc_doc *doc) { return doc->root; }

/* ---- emitting ------------------------------------------------------------------------- */

/* A plain scalar that YAML would read back as the same string; else it is quoted. */
static int needs_quotes(const tfc_node *n)
{
    const char *s = n->str;
    if (!*s || s[0] == ' ' || s[strlen(s) - 1] == ' ') return 1;
    if (strchr("-?:,[]{}#&*!|>'\"%@`~", s[0])) {
        if (!(s[0] == '-' && (s[1] >= '0' && s[1] <= '9'))) return 1;
    }
    for (const char *p = s; *p; p++) {
        if ((unsigned char)*p < 0x20 || *p == '"' || *p == '\\') return 1;
        if (*p == ':' && (p[1] == ' ' || p[1] == 0)) return 1;
        if (*p == '#' && p > s && p[-1] == ' ') return 1;
        if (strchr(",[]{}", *p)) return 1;
    }
    if (n->quoted) {
        /* A quoted string that would read as a number, bool or null keeps its quotes. */
        char *end;
        strtod(s, &end);
        if (*end == 0) return 1;
        static const char *const words[] = {"true", "false", "True", "False", "TRUE", "FALSE",
                                            "null", "Null", "NULL", "yes", "no", "on", "off"};
        for (size_t i = 0; i < sizeof words / sizeof *words; i++)
            if (strcmp(s, words[i]) == 0) return 1;
    }
    return 0;
}

static void emit_scalar(FILE *f, const tfc_node *n)
{
    if (!needs_quotes(n)) {
        fputs(n->str, f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)n->str; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p < 0x20) fprintf(f, "\\x%02x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

/* Small collections of scalars print in flow style: [28, 28, 1], {units: 10}. */
static int is_flow(const tfc_node *n)
{
    if (n->kind == TFC_NODE_SCALAR) return 1;
    if (n->n > 8) return 0;
    int len = 0;
    for (int i = 0; i < n->n; i++) {
        if (n->vals[i]->kind != TFC_NODE_SCALAR) return 0;
        len += (int)strlen(n->vals[i]->str) + (n->keys ? (int)strlen(n->keys[i]->str) + 2 : 0) + 2;
    }
    return len < 72;
}

static void emit_flow(FILE *f, const tfc_node *n)
{
    if (n->kind == TFC_NODE_SCALAR) {
        emit_scalar(f, n);
        return;
    }
    fputc(n->kind == TFC_NODE_MAP ? '{' : '[', f);
    for (int i = 0; i < n->n; i++) {
        if (i) fputs(", ", f);
        if (n->kind == TFC_NODE_MAP) {
            emit_scalar(f, n->keys[i]);
            fputs(": ", f);
        }
        emit_scalar(f, n->vals[i]);
    }
    fputc(n->kind == TFC_NODE_MAP ? '}' : ']', f);
}

static void emit_block(FILE *f, const tfc_node *n, int indent, int inline_first)
{
    for (int i = 0; i < n->n; i++) {
        if (!(i == 0 && inline_first)) fprintf(f, "%*s", indent, "");
        const tfc_node *v = n->vals[i];
        if (n->kind == TFC_NODE_SEQ) fputs("- ", f);
        else {
            emit_scalar(f, n->keys[i]);
            fputc(':', f);
        }
        if (is_flow(v)) {
            if (n->kind == TFC_NODE_MAP) fputc(' ', f);
            emit_flow(f, v);
            fputc('\n', f);
        } else if (n->kind == TFC_NODE_SEQ) {
            emit_block(f, v, indent + 2, 1);
        } else {
            fputc('\n', f);
            emit_block(f, v, indent + 2, 0);
        }
    }
}

void tfc_node_emit(FILE *f, const tfc_node *node)
{
    if (is_flow(node) && node->kind == TFC_NODE_SCALAR) {
        emit_scalar(f, node);
        fputc('\n', f);
    } else if (node->n == 0) {
        fputs(node->kind == TFC_NODE_MAP ? "{}\n" : "[]\n", f);
    } else {
        emit_block(f, node, 0, 0);
    }
}
