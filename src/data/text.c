/* Text: the text source (lines of files like TextLineDataset, or fortune-style records
 * separated by a line holding "%"; a deterministic train/test split by record index; the
 * record's file as its class label; `tokenizer:` as a tokenize op right after it) and the
 * tokenize map op, which builds the vocabulary from the training split, or loads it, with
 * vocab.c. Records are bounded in size and files holding NUL bytes are refused. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "data/internal.h"

#define TEXT_MAX_FILE_BYTES ((size_t)1 << 30)

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
    int32_t *file_class; /* `directory:`: each file's class folder (NULL: the file's index) */
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
        *l = t->file_class ? t->file_class[r->file] : r->file;
    }
    return TFC_OK;
}

static void text_describe(const source *s, int64_t i, char *buf, size_t size)
{
    const text_source *t = (const text_source *)s;
    const text_record *r = &t->rec[i];
    snprintf(buf, size, "%s:%d", t->files[r->file], r->line);
}

static int64_t text_label(const source *s, int64_t i)
{
    const text_source *t = (const text_source *)s;
    return !t->labels ? -1 : t->file_class ? t->file_class[t->rec[i].file] : t->rec[i].file;
}

static void text_free(source *s)
{
    text_source *t = (text_source *)s;
    for (int i = 0; i < t->nfiles; i++) free(t->files[i]);
    free(t->files);
    free(t->file_class);
    free(t->buf);
    free(t->rec);
    free(t);
}

static const source_ops text_ops = {
    .type = "text",
    .get = text_get,
    .describe = text_describe,
    .label = text_label,
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
    const tfc_split_rule rule = {a->split_every, a->split_part, a->split_offset};
    return tfc_data_split_keeps(&rule, r);
}

/* Adds one record (text[0..len), from `file` starting at `line`) if the split keeps it. */
static tfc_status add_record(splitter *sp, const char *text, size_t len, int file, int line)
{
    text_source *t = sp->t;
    const text_args *a = sp->a;
    if (len > (size_t)a->max_record_bytes) {
        if (a->on_error == ON_ERROR_SKIP) {
            char where[300];
            snprintf(where, sizeof where, "%s:%d", t->files[file], line);
            tfc_source_name_skip(&t->base, where);
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
    if (a->format == TEXT_FORMAT_FILE) return add_record(sp, text, len, file, 1);
    const char *p = text, *end = text + len;
    int line = 1, rec_line = 1;
    const char *rec_start = p;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        size_t ll = (size_t)(le - p);
        if (ll && p[ll - 1] == '\r') ll--;
        tfc_status st = TFC_OK;
        if (a->format == TEXT_FORMAT_LINES) {
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
    if (a->format == TEXT_FORMAT_FORTUNE) {
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
    t->labels = a->label != TEXT_LABEL_NONE;
    return t;
}

static tfc_status text_finish(text_source *t, tfc_error *err)
{
    source *s = &t->base;
    s->count = t->n;
    if (t->n == 0) /* before anything is made of a run whose data is missing */
        return tfc_error_set(err, TFC_ERR_DATA, "%s%s: no records (%s)", t->files[0],
                             t->nfiles > 1 ? " and the other files" : "",
                             s->skipped ? "every record was skipped" : "empty or blank");
    s->spec.comp[TFC_COMP_FEATURES] = (tfc_component_spec){1, TFC_U8, {.ndim = 1, .dim = {-1}}};
    if (t->labels) s->spec.comp[TFC_COMP_LABELS] = (tfc_component_spec){1, TFC_I32, {.ndim = 0}};
    if (t->labels && !t->file_class) {
        /* Class names: the files' base names (`directory:`: its folders, set by the caller). */
        const char **names = malloc((size_t)t->nfiles * sizeof *names + 1);
        if (!names) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        for (int i = 0; i < t->nfiles; i++) {
            const char *slash = strrchr(t->files[i], '/');
            names[i] = slash ? slash + 1 : t->files[i];
        }
        tfc_status st = tfc_source_set_classes(s, names, t->nfiles, err);
        free(names);
        if (st) return st;
    }
    return TFC_OK;
}

/* Reads the files `paths` (resolved, in label order) into a text source; with `directory:`,
 * file_class (owned from here on) gives each file's class, named `classes`. */
static tfc_status load_text(source **out, const text_args *a, char *const *paths, int npaths,
                            int32_t *file_class, char *const *classes, int nclasses,
                            tfc_error *err)
{
    *out = NULL;
    text_source *t = text_new(a, (const char *const *)paths, npaths, err);
    if (!t) {
        free(file_class);
        return TFC_ERR_NOMEM;
    }
    t->file_class = file_class;
    splitter sp = {t, a, 0, err};
    for (int i = 0; i < npaths; i++) {
        char *text;
        size_t len;
        tfc_status st = tfc_file_read_all(paths[i], TEXT_MAX_FILE_BYTES, &text, &len, err);
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
    if (!st && file_class)
        st = tfc_source_set_classes(&t->base, (const char *const *)classes, nclasses, err);
    if (st) {
        text_free(&t->base);
        return st;
    }
    *out = &t->base;
    return TFC_OK;
}

static int txt_name(const char *n)
{
    const char *dot = strrchr(n, '.');
    return dot && !strcasecmp(dot, ".txt");
}

/* `directory:` as Keras's text_dataset_from_directory reads it: its sub-folders, in byte
 * order, are the classes, and the .txt files of each one and of the folders under it
 * (tfc_data_walk_files) its records' files. */
static tfc_status load_directory(source **out, const text_args *a, const char *dir, int want,
                                 const char *key, tfc_error *err)
{
    int nc, n = 0, cap = 0;
    char **classes = tfc_data_class_dirs(dir, a->classes, key, &nc, err), **paths = NULL;
    int32_t *fc = NULL;
    tfc_status st = classes ? TFC_OK : err && err->code ? err->code : TFC_ERR_IO;
    if (!st && nc == 0) st = tfc_error_set(err, TFC_ERR_DATA, "%s: no class sub-folders", dir);
    if (!st && want > 0 && a->label != TEXT_LABEL_NONE && nc > want)
        st = tfc_error_set(err, TFC_ERR_DATA, "%s: %d class folders but the model has %d "
                           "classes", dir, nc, want);
    for (int c = 0; !st && c < nc; c++) {
        size_t dl = strlen(dir) + strlen(classes[c]) + 2;
        char *sub = malloc(dl);
        tfc_path_list files = {0};
        if (sub) snprintf(sub, dl, "%s/%s", dir, classes[c]);
        st = sub ? tfc_data_walk_files(sub, txt_name, &files, err)
                 : tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        for (int i = 0; !st && i < files.n; i++) {
            if (n == cap) {
                cap = cap ? cap * 2 : 256;
                char **np = realloc(paths, (size_t)cap * sizeof *np);
                int32_t *nfc = realloc(fc, (size_t)cap * sizeof *nfc);
                if (np) paths = np;
                if (nfc) fc = nfc;
                if (!np || !nfc) {
                    st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
                    break;
                }
            }
            paths[n] = files.v[i]; /* taken from the list */
            files.v[i] = NULL;
            fc[n++] = c;
        }
        tfc_path_list_free(&files);
        free(sub);
    }
    if (!st && n == 0)
        st = tfc_error_set(err, TFC_ERR_DATA, "%s: no .txt files in its class folders", dir);
    if (!st) {
        st = load_text(out, a, paths, n, a->label == TEXT_LABEL_NONE ? NULL : fc, classes, nc,
                       err);
        if (a->label == TEXT_LABEL_NONE) free(fc);
        fc = NULL;
    }
    free(fc);
    tfc_data_free_names(paths, n);
    tfc_data_free_names(classes, nc);
    return st;
}

tfc_status tfc_source_text_mem(source **out, const text_args *a, const char *text, size_t len,
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

typedef struct tokenize_args {
    map_common common;
    int tokenizer;          /* tfc_tokenizer */
    const char *vocabulary; /* a file to load (relative to base_dir) */
    int max_tokens, min_count;
    int lowercase;          /* LOWERCASE_* */
    const tfc_vocab *vocab; /* resolved by init; owned by the pipeline or the options */
} tokenize_args;

static const char *const lowercase_choices[] = {
    [LOWERCASE_AUTO] = "auto", [LOWERCASE_TRUE] = "true", [LOWERCASE_FALSE] = "false",
    [LOWERCASE_COUNT] = NULL};
static const char *const tokenizer_choices[] = {
    [TFC_TOKENIZER_CHAR] = "char", [TFC_TOKENIZER_WORD] = "word", NULL};

static const tfc_field tokenize_fields[] = {
    MAP_COMMON_FIELDS(tokenize_args),
    {"tokenizer", TFC_F_ENUM, offsetof(tokenize_args, tokenizer), "char", TFC_UNBOUNDED,
     tokenizer_choices, "char: UTF-8 characters; word: runs of letters and digits"},
    {"vocabulary", TFC_F_STRING, offsetof(tokenize_args, vocabulary), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "a vocabulary file to use instead of building one"},
    {"max_tokens", TFC_F_INT, offsetof(tokenize_args, max_tokens), "0", 0, TFC_VOCAB_MAX_TOKENS,
     NULL, "vocabulary size cap including <pad> and <unk> (0: no cap)"},
    {"min_count", TFC_F_INT, offsetof(tokenize_args, min_count), "1", 1, 1 << 30, NULL,
     "rarer tokens become <unk>"},
    {"lowercase", TFC_F_ENUM, offsetof(tokenize_args, lowercase), "auto", TFC_UNBOUNDED,
     lowercase_choices, "auto: words are lowercased, characters are not"},
    {NULL},
};

/* Finds the vocabulary: the op's `vocabulary:` file, the options' vocabulary, the run's
 * vocabulary.txt (test split), or one built from the source and saved there (train split). */
static tfc_status tokenize_init(void *args, const op_build *b, const tfc_element_spec *in,
                                tfc_element_spec *out, tfc_error *err)
{
    tokenize_args *a = args;
    const tfc_data_options *opt = b->opt;
    const tfc_component_spec *c = &in->comp[TFC_COMP_FEATURES];
    if (!c->present || c->dtype != TFC_U8 || (c->shape.ndim >= 0 && c->shape.ndim != 1)) {
        char sh[160];
        return tfc_op_error(b, "needs text bytes (uint8 of rank 1), found %s",
                            tfc_data_spec_str(c, sh, sizeof sh));
    }
    if (*b->vocab) return tfc_op_error(b, "a pipeline has at most one tokenizer");
    tfc_tokenizer tok = (tfc_tokenizer)a->tokenizer;
    int lower = a->lowercase == LOWERCASE_AUTO ? tok == TFC_TOKENIZER_WORD
                                               : a->lowercase == LOWERCASE_TRUE;
    const tfc_vocab *v = NULL;
    char *path = NULL;
    if (a->vocabulary) {
        path = tfc_data_path_join(opt->base_dir, a->vocabulary);
        if (!path || !(*b->vocab = tfc_vocab_load(path, err))) {
            free(path);
            return err && err->code ? err->code : TFC_ERR_NOMEM;
        }
        v = *b->vocab;
    } else if (opt->vocab) {
        v = opt->vocab;
    } else if (opt->load_vocabulary) {
        if (!opt->run_dir)
            return tfc_op_error(b, "no vocabulary to load: give `vocabulary: FILE` or a run "
                                "folder");
        path = tfc_data_path_join(opt->run_dir, "vocabulary.txt");
        if (!path || !(*b->vocab = tfc_vocab_load(path, err))) {
            free(path);
            tfc_error_hint(err, "the train split writes it; or give `vocabulary: FILE`");
            return err && err->code ? err->code : TFC_ERR_NOMEM;
        }
        v = *b->vocab;
    } else {
        /* Built from every record of this pipeline's source (the training split). */
        if (b->src->spec.comp[TFC_COMP_FEATURES].dtype != TFC_U8)
            return tfc_op_error(b, "can build a vocabulary only over a text source");
        *b->vocab = tfc_vocab_build(tok, lower, a->max_tokens, a->min_count, b->src, err);
        if (!*b->vocab) return err && err->code ? err->code : TFC_ERR_NOMEM;
        v = *b->vocab;
        if (opt->run_dir) {
            path = tfc_data_path_join(opt->run_dir, "vocabulary.txt");
            tfc_status st = path ? tfc_vocab_save(v, path, err)
                                 : tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
            if (st) {
                free(path);
                return st;
            }
        }
    }
    if (tfc_vocab_tokenizer(v) != tok) {
        tfc_status st = tfc_op_error(b, "tokenizer is %s but the vocabulary%s%s was made by the "
                                     "%s tokenizer", tokenizer_choices[tok], path ? " " : "",
                                     path ? path : "", tokenizer_choices[tfc_vocab_tokenizer(v)]);
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

static void tokenize_plan(const void *args, tfc_data_plan *out)
{
    out->tokenizes = 1;
}

const op_def tfc_op_tokenize = {
    .name = "tokenize",
    .fields = tokenize_fields,
    .args_size = sizeof(tokenize_args),
    .help = "text bytes to int32 token ids (0 <pad>, 1 <unk>)",
    .init = tokenize_init,
    .apply = tokenize_apply,
    .plan = tokenize_plan,
};

/* ---- the source's configuration -------------------------------------------------------- */

static const char *const format_choices[] = {
    [TEXT_FORMAT_LINES] = "lines", [TEXT_FORMAT_FORTUNE] = "fortune",
    [TEXT_FORMAT_FILE] = "file", [TEXT_FORMAT_COUNT] = NULL};
static const char *const label_choices[] = {
    [TEXT_LABEL_NONE] = "none", [TEXT_LABEL_FILE] = "file", [TEXT_LABEL_FOLDER] = "folder",
    [TEXT_LABEL_COUNT] = NULL};
static const char *const source_tokenizer_choices[] = {
    [TEXT_TOKENIZER_NONE] = "none", [TEXT_TOKENIZER_CHAR] = "char",
    [TEXT_TOKENIZER_WORD] = "word", [TEXT_TOKENIZER_COUNT] = NULL};

static const tfc_field text_fields[] = {
    SOURCE_TYPE_FIELD(text_args),
    {"files", TFC_F_NODE, offsetof(text_args, files), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "a path or list of paths; glob patterns are expanded (sorted)"},
    {"directory", TFC_F_STRING, offsetof(text_args, directory), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "instead of files: one sub-folder of .txt files per class (Keras's "
     "text_dataset_from_directory)"},
    {"exclude", TFC_F_NODE, offsetof(text_args, exclude), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "glob patterns of base names to leave out, e.g. [\"*.dat\", \"*.u8\"]"},
    {"format", TFC_F_ENUM, offsetof(text_args, format), "lines", TFC_UNBOUNDED, format_choices,
     "lines: one record per line; fortune: records between lines holding %; file: one record "
     "per file (directory's default)"},
    {"label", TFC_F_ENUM, offsetof(text_args, label), "none", TFC_UNBOUNDED, label_choices,
     "file: the index of the record's file in `files`; folder: its class folder in "
     "`directory` (directory's default)"},
    {"split", TFC_F_NODE, offsetof(text_args, split), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "{every: N, part: train|test, offset: K}: record r is test when r % N == K"},
    {"max_record_bytes", TFC_F_INT, offsetof(text_args, max_record_bytes), "1048576", 1,
     1 << 30, NULL, "longer records are errors (or skipped)"},
    {"skip_empty", TFC_F_BOOL, offsetof(text_args, skip_empty), "false", TFC_UNBOUNDED, NULL,
     "lines format: leave out blank lines"},
    {"tokenizer", TFC_F_ENUM, offsetof(text_args, tokenizer), "none", TFC_UNBOUNDED,
     source_tokenizer_choices, "tokenize right away (same as a tokenize map op)"},
    {"vocabulary", TFC_F_STRING, offsetof(text_args, vocabulary), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "with tokenizer: a vocabulary file to use"},
    {"max_tokens", TFC_F_INT, offsetof(text_args, max_tokens), "0", 0, TFC_VOCAB_MAX_TOKENS,
     NULL, "with tokenizer: vocabulary size cap (0: none)"},
    {"min_count", TFC_F_INT, offsetof(text_args, min_count), "1", 1, 1 << 30, NULL,
     "with tokenizer: rarer tokens become <unk>"},
    {"lowercase", TFC_F_ENUM, offsetof(text_args, lowercase), "auto", TFC_UNBOUNDED,
     lowercase_choices, "with tokenizer: auto lowercases words, not characters"},
    SOURCE_ON_ERROR_FIELD(text_args),
    {NULL},
};

/* The split rule (into split_every, split_part, split_offset), the tokenizer's keys without
 * a tokenizer, and the shape of `files`. */
static tfc_status text_check(void *args, const tfc_node *at, const char *key, tfc_error *err)
{
    text_args *a = args;
    tfc_status st = TFC_OK;
    tfc_split_rule r;
    if (tfc_data_split_read(a->split, key, &r, err)) {
        st = TFC_ERR_CONFIG;
    } else {
        a->split_every = r.every;
        a->split_part = r.part;
        a->split_offset = r.offset;
    }
    int tokenizer_keys = a->vocabulary || a->max_tokens || a->min_count != 1;
    if (a->tokenizer == TEXT_TOKENIZER_NONE && tokenizer_keys)
        st = tfc_node_error(err, TFC_ERR_CONFIG, at, key, "vocabulary, max_tokens and min_count "
                            "need a tokenizer (char or word)");
    /* `directory:` reads one record per file and labels it with its folder unless told. */
    if (a->directory && !tfc_node_get(at, "format")) a->format = TEXT_FORMAT_FILE;
    if (a->directory && !tfc_node_get(at, "label")) a->label = TEXT_LABEL_FOLDER;
    if (!a->files == !a->directory)
        return tfc_node_error(err, TFC_ERR_CONFIG, at, key, "give `files` or `directory` (one "
                              "sub-folder of .txt files per class)%s",
                              a->files ? ", not both" : "");
    if (a->label == TEXT_LABEL_FOLDER && !a->directory)
        st = tfc_node_error(err, TFC_ERR_CONFIG, tfc_node_get(at, "label"), key,
                            "label: folder needs `directory`");
    if (a->label == TEXT_LABEL_FILE && a->directory)
        st = tfc_node_error(err, TFC_ERR_CONFIG, tfc_node_get(at, "label"), key,
                            "with `directory` the label is the folder (label: folder) or none");
    if (a->directory && a->exclude)
        st = tfc_node_error(err, TFC_ERR_CONFIG, a->exclude, key, "exclude goes with `files`; "
                            "`directory` reads the .txt files of its sub-folders");
    char fkey[352];
    snprintf(fkey, sizeof fkey, "%s.files", key);
    if (a->files && tfc_data_check_files(a->files, fkey, err)) st = TFC_ERR_CONFIG;
    return st;
}

/* `tokenizer: char|word` is a tokenize op right after the source, at the source's mapping:
 * the source's tokenizer keys have the op's names and meanings. */
static tfc_status text_implies(const void *args, const tfc_node *at, const char *key,
                               stage_plan *pl, tfc_error *err)
{
    const text_args *a = args;
    if (a->tokenizer == TEXT_TOKENIZER_NONE) return TFC_OK;
    tokenize_args *t = calloc(1, sizeof *t);
    if (!t) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    t->common.op = tfc_op_tokenize.name;
    t->common.num_parallel_calls = 1;
    t->tokenizer = a->tokenizer == TEXT_TOKENIZER_WORD ? TFC_TOKENIZER_WORD : TFC_TOKENIZER_CHAR;
    t->vocabulary = a->vocabulary;
    t->max_tokens = a->max_tokens;
    t->min_count = a->min_count;
    t->lowercase = a->lowercase;
    *pl = (stage_plan){.def = &tfc_stage_map, .op = &tfc_op_tokenize, .node = at, .at = at,
                       .args = t};
    snprintf(pl->key, sizeof pl->key, "%s", key);
    return TFC_OK;
}

static tfc_status text_open(const void *args, const tfc_data_options *opt, const char *key,
                            source **out, tfc_error *err)
{
    const text_args *a = args;
    int want = opt ? opt->num_classes : 0;
    tfc_path_list pl = {0};
    char fkey[352];
    snprintf(fkey, sizeof fkey, "%s.files", key);
    *out = NULL;
    if (a->directory) {
        const char *dir = a->directory;
        char *owned = NULL;
        tfc_status st = tfc_data_resolve(opt, &dir, &owned, err);
        if (!st) st = load_directory(out, a, dir, want, key, err);
        free(owned);
        return st;
    }
    tfc_status st = tfc_data_expand_files(a->files, a->exclude, opt, fkey, &pl, err);
    if (!st && want > 0 && a->label == TEXT_LABEL_FILE && pl.n > want)
        st = tfc_node_error(err, TFC_ERR_CONFIG, a->files, fkey, "%d files give %d classes "
                            "(label: file) but the model has %d", pl.n, pl.n, want);
    if (!st) st = load_text(out, a, pl.v, pl.n, NULL, NULL, 0, err);
    tfc_path_list_free(&pl);
    /* files' classes: new names for the labels, as for any source */
    if (!st && a->classes && (st = tfc_source_rename_classes(*out, a->classes, key, err))) {
        tfc_source_free(*out);
        *out = NULL;
    }
    return st;
}

const source_def tfc_source_text = {
    .name = "text",
    .help = "lines, %-separated records or whole files of text (files, or class folders)",
    .fields = text_fields,
    .args_size = sizeof(text_args),
    .check = text_check,
    .implies = text_implies,
    .open = text_open,
    .classes_offset = offsetof(text_args, classes),
};
