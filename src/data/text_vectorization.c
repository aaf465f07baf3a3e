/* The text_vectorization map op: Keras 3's TextVectorization layer on text bytes, with its
 * constructor's arguments. The vocabulary is the layer's `vocabulary:` (a list, or a file of
 * one token per line), the train split's own (Keras's adapt over the source's records,
 * written to the run's vocabulary.txt), or the one the program or the run folder gives the
 * test split and prediction, like the tokenize op's (text.c). The tokenizing, the lookup
 * and the output modes are in vocab.c. */
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "data/internal.h"

typedef struct tv_args {
    map_common common;
    const tfc_node *max_tokens, *standardize, *split, *ngrams, *output_sequence_length;
    const tfc_node *vocabulary, *idf_weights;
    int output_mode, pad_to_max_tokens;
    const char *name;
    /* resolved by check and init */
    tfc_text_spec ts;
    int max, length;        /* max_tokens (0: none), output_sequence_length (0: none) */
    int64_t width;          /* the output's length: ids (0: each text's own) or vector */
    const tfc_vocab *vocab; /* owned by the pipeline or the options */
} tv_args;

/* Keras's names, and its deprecated spellings of two modes. */
enum { MODE_BINARY = TFC_TEXT_OUTPUT_COUNT, MODE_TF_IDF_DASH };
static const char *const mode_choices[] = {
    [TFC_TEXT_INT] = "int",        [TFC_TEXT_ONE_HOT] = "one_hot",
    [TFC_TEXT_MULTI_HOT] = "multi_hot", [TFC_TEXT_COUNT] = "count",
    [TFC_TEXT_TF_IDF] = "tf_idf",  [MODE_BINARY] = "binary",
    [MODE_TF_IDF_DASH] = "tf-idf", NULL};

static const tfc_field tv_fields[] = {
    MAP_COMMON_FIELDS(tv_args),
    {"max_tokens", TFC_F_NODE, offsetof(tv_args, max_tokens), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "null or the vocabulary's size cap, special tokens included (> 1)"},
    {"standardize", TFC_F_NODE, offsetof(tv_args, standardize), "lower_and_strip_punctuation",
     TFC_UNBOUNDED, NULL, "lower_and_strip_punctuation, lower, strip_punctuation or null"},
    {"split", TFC_F_NODE, offsetof(tv_args, split), "whitespace", TFC_UNBOUNDED, NULL,
     "whitespace, character or null (the whole text is one token)"},
    {"ngrams", TFC_F_NODE, offsetof(tv_args, ngrams), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "null, n (n-grams of 1..n tokens) or a list of widths"},
    {"output_mode", TFC_F_ENUM, offsetof(tv_args, output_mode), "int", TFC_UNBOUNDED,
     mode_choices, "int (ids), one_hot, multi_hot, count or tf_idf (float32 vectors)"},
    {"output_sequence_length", TFC_F_NODE, offsetof(tv_args, output_sequence_length),
     TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL, "int mode: pad or cut the ids to this length"},
    {"pad_to_max_tokens", TFC_F_BOOL, offsetof(tv_args, pad_to_max_tokens), "false",
     TFC_UNBOUNDED, NULL, "vector modes: max_tokens wide, not the vocabulary's size"},
    {"vocabulary", TFC_F_NODE, offsetof(tv_args, vocabulary), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "a list of tokens or a file of one per line, instead of adapting"},
    {"idf_weights", TFC_F_NODE, offsetof(tv_args, idf_weights), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "tf_idf with a vocabulary: one weight per vocabulary entry"},
    TFC_FIXED_FIELD("sparse", "false", "tfc makes dense outputs"),
    TFC_FIXED_FIELD("ragged", "false", "int outputs without output_sequence_length already "
                    "keep each text's length (padded_batch pads them)"),
    TFC_FIXED_FIELD("encoding", "utf-8", "text is UTF-8"),
    {"name", TFC_F_STRING, offsetof(tv_args, name), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "Keras's layer name (unused)"},
    {NULL},
};

/* The key path of argument `arg` for messages. */
static const char *arg_path(const op_build *b, const char *arg, char *buf, size_t size)
{
    snprintf(buf, size, "%s.%s", b->key, arg);
    return buf;
}

/* An optional int argument (null: 0) in [lo, hi]. */
static tfc_status opt_int(const op_build *b, const tfc_node *n, const char *arg, long long lo,
                          long long hi, int *out)
{
    char path[400];
    long long v = 0;
    *out = 0;
    if (!n || tfc_node_is_null(n)) return TFC_OK;
    tfc_status st = tfc_node_int(n, arg_path(b, arg, path, sizeof path), lo, hi, &v, b->err);
    *out = (int)v;
    return st;
}

/* A choice argument whose first choice is Keras's None (null). */
static tfc_status opt_choice(const op_build *b, const tfc_node *n, const char *arg,
                             const char *const *names, int def, int *out)
{
    char path[400];
    *out = def;
    if (!n) return TFC_OK;
    if (tfc_node_is_null(n)) return *out = 0, TFC_OK;
    return tfc_node_enum(n, arg_path(b, arg, path, sizeof path), names + 1, out, b->err)
               ? TFC_ERR_CONFIG : (++*out, TFC_OK);
}

static tfc_status tv_ngrams(tv_args *a, const op_build *b)
{
    char path[400];
    const tfc_node *n = a->ngrams;
    a->ts.nngrams = 0;
    if (!n || tfc_node_is_null(n)) return TFC_OK;
    arg_path(b, "ngrams", path, sizeof path);
    if (n->kind == TFC_NODE_SCALAR) {
        long long w;
        if (tfc_node_int(n, path, 1, TFC_TEXT_MAX_NGRAMS, &w, b->err)) return TFC_ERR_CONFIG;
        for (int i = 0; i < w; i++) a->ts.ngrams[a->ts.nngrams++] = i + 1;
        return TFC_OK;
    }
    if (n->kind != TFC_NODE_SEQ || n->n < 1 || n->n > TFC_TEXT_MAX_NGRAMS)
        return tfc_node_error(b->err, TFC_ERR_CONFIG, n, path, "expected null, an integer or a "
                              "list of 1 to %d widths", TFC_TEXT_MAX_NGRAMS);
    for (int i = 0; i < n->n; i++) {
        long long w;
        char item[420];
        snprintf(item, sizeof item, "%s[%d]", path, i);
        if (tfc_node_int(n->vals[i], item, 1, 1 << 16, &w, b->err)) return TFC_ERR_CONFIG;
        a->ts.ngrams[a->ts.nngrams++] = (int)w;
    }
    return TFC_OK;
}

/* Keras's checks of argument combinations, before any data is read. */
static tfc_status tv_check(void *args, const op_build *b)
{
    tv_args *a = args;
    char path[400];
    /* The schema gives null and absent alike (NULL); these two default to something else. */
    a->standardize = tfc_node_get(b->at, "standardize");
    a->split = tfc_node_get(b->at, "split");
    if (opt_int(b, a->max_tokens, "max_tokens", 2, TFC_VOCAB_MAX_TOKENS, &a->max) ||
        opt_int(b, a->output_sequence_length, "output_sequence_length", 1, 1 << 24,
                &a->length) ||
        opt_choice(b, a->standardize, "standardize", tfc_standardize_names,
                   TFC_STANDARDIZE_LOWER_AND_STRIP_PUNCTUATION, &a->ts.standardize) ||
        opt_choice(b, a->split, "split", tfc_text_split_names, TFC_TEXT_SPLIT_WHITESPACE,
                   &a->ts.split) ||
        tv_ngrams(a, b))
        return TFC_ERR_CONFIG;
    a->ts.output_mode = a->output_mode == MODE_BINARY      ? TFC_TEXT_MULTI_HOT
                        : a->output_mode == MODE_TF_IDF_DASH ? TFC_TEXT_TF_IDF
                                                             : a->output_mode;
    int ints = a->ts.output_mode == TFC_TEXT_INT, tfidf = a->ts.output_mode == TFC_TEXT_TF_IDF;
    if (!ints && a->length)
        return tfc_node_error(b->err, TFC_ERR_CONFIG, a->output_sequence_length,
                              arg_path(b, "output_sequence_length", path, sizeof path),
                              "must not be set when output_mode is not int (Keras)");
    if (a->ts.output_mode == TFC_TEXT_ONE_HOT && a->ts.split != TFC_TEXT_SPLIT_NONE)
        return tfc_op_error(b, "output_mode one_hot encodes one token per text: it needs "
                            "split: null (for the tokens of a split text use multi_hot or "
                            "count)");
    if (a->pad_to_max_tokens && !ints && !a->max)
        return tfc_op_error(b, "pad_to_max_tokens needs max_tokens (the output's width)");
    int given = a->vocabulary && !tfc_node_is_null(a->vocabulary);
    int weights = a->idf_weights && !tfc_node_is_null(a->idf_weights);
    if (weights && !tfidf)
        return tfc_node_error(b->err, TFC_ERR_CONFIG, a->idf_weights,
                              arg_path(b, "idf_weights", path, sizeof path),
                              "should only be set when output_mode is tf_idf (Keras)");
    if (tfidf && given && !weights)
        return tfc_op_error(b, "with a vocabulary, output_mode tf_idf needs idf_weights too "
                            "(Keras)");
    if (tfidf && given && a->vocabulary->kind == TFC_NODE_SCALAR)
        return tfc_op_error(b, "output_mode tf_idf cannot load its vocabulary from a file "
                            "(Keras): give the list and idf_weights");
    return TFC_OK;
}

/* The tokens of `vocabulary:`, a list of strings or a file of one per line (Keras's plain
 * file, without escapes); *text keeps the file's bytes the tokens point into. */
static tfc_status given_tokens(const tv_args *a, const op_build *b, const char ***tokens,
                               size_t **lens, int64_t *n, char **text)
{
    char path[400];
    const tfc_node *v = a->vocabulary;
    arg_path(b, "vocabulary", path, sizeof path);
    *text = NULL;
    *n = 0;
    size_t cap = v->kind == TFC_NODE_SEQ ? (size_t)v->n : 0, len = 0;
    if (v->kind == TFC_NODE_SCALAR) {
        char *file = tfc_data_path_join(b->opt->base_dir, v->str);
        tfc_error why;
        tfc_error_clear(&why);
        tfc_status st = file ? tfc_file_read_all(file, (size_t)256 << 20, text, &len, &why)
                             : tfc_error_set(b->err, TFC_ERR_NOMEM, "out of memory");
        if (st && file)
            tfc_node_error(b->err, st, v, path, "cannot read %s: %s", file, why.msg);
        free(file);
        if (st) return st;
        for (size_t i = 0; i < len; i++) cap += (*text)[i] == '\n';
        cap++;
    } else if (v->kind != TFC_NODE_SEQ) {
        return tfc_node_error(b->err, TFC_ERR_CONFIG, v, path, "expected a list of tokens or a "
                              "file name");
    }
    *tokens = malloc((cap ? cap : 1) * sizeof **tokens);
    *lens = malloc((cap ? cap : 1) * sizeof **lens);
    if (!*tokens || !*lens) return tfc_error_set(b->err, TFC_ERR_NOMEM, "out of memory");
    if (v->kind == TFC_NODE_SEQ) {
        for (int i = 0; i < v->n; i++) {
            if (v->vals[i]->kind != TFC_NODE_SCALAR) {
                char item[420];
                snprintf(item, sizeof item, "%s[%d]", path, i);
                return tfc_node_error(b->err, TFC_ERR_CONFIG, v->vals[i], item, "expected a "
                                      "token (a string)");
            }
            (*tokens)[i] = v->vals[i]->str;
            (*lens)[i] = strlen(v->vals[i]->str);
        }
        *n = v->n;
        return TFC_OK;
    }
    for (char *p = *text, *end = *text + len; p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) nl = end;
        size_t l = (size_t)(nl - p);
        if (l && p[l - 1] == '\r') p[--l] = 0; /* a line ending in \r\n, as TensorFlow reads it */
        (*tokens)[*n] = p;
        (*lens)[(*n)++] = l;
        *nl = 0;
        p = nl + 1;
    }
    while (*n && (*lens)[*n - 1] == 0) --*n; /* Keras drops trailing empty lines */
    return TFC_OK;
}

/* The vocabulary the op is given, checked as Keras's set_vocabulary checks it: the special
 * tokens may lead it (then they are kept), else they are put in front; idf_weights get the
 * mean weight in front for them and zeros after when padded to max_tokens. */
static tfc_status given_vocab(tv_args *a, const op_build *b, tfc_vocab **out)
{
    const char **tokens = NULL, **all = NULL;
    size_t *lens = NULL, *all_lens = NULL;
    char *text = NULL, path[400];
    int64_t n = 0;
    float *idf = NULL;
    tfc_status st = given_tokens(a, b, &tokens, &lens, &n, &text);
    int ints = a->ts.output_mode == TFC_TEXT_INT, start = ints ? 2 : 1, found = 0;
    if (st) goto done;
    if (n == 0) {
        st = tfc_node_error(b->err, TFC_ERR_CONFIG, a->vocabulary,
                            arg_path(b, "vocabulary", path, sizeof path), "is empty");
        goto done;
    }
    found = n >= start && (!ints || lens[0] == 0) && lens[start - 1] == 5 &&
            !memcmp(tokens[start - 1], "[UNK]", 5);
    for (int64_t i = found ? start : 0; i < n; i++) {
        if (lens[i] == 0 || (lens[i] == 5 && !memcmp(tokens[i], "[UNK]", 5))) {
            st = tfc_node_error(b->err, TFC_ERR_CONFIG, a->vocabulary,
                                arg_path(b, "vocabulary", path, sizeof path),
                                "entry %lld is the special token \"%s\": the special tokens "
                                "may only lead the vocabulary, in the order %s", (long long)i,
                                lens[i] ? "[UNK]" : "", ints ? "\"\", [UNK]" : "[UNK]");
            goto done;
        }
    }
    int64_t total = (found ? 0 : start) + n;
    if (a->max && total > a->max) {
        st = tfc_op_error(b, "the vocabulary has %lld entries with its special tokens, over "
                          "max_tokens %d", (long long)total, a->max);
        goto done;
    }
    all = malloc((size_t)total * sizeof *all);
    all_lens = malloc((size_t)total * sizeof *all_lens);
    if (!all || !all_lens) {
        st = tfc_error_set(b->err, TFC_ERR_NOMEM, "out of memory");
        goto done;
    }
    int64_t k = 0;
    if (!found) {
        if (ints) all[k] = "", all_lens[k++] = 0;
        all[k] = "[UNK]", all_lens[k++] = 5;
    }
    for (int64_t i = 0; i < n; i++) all[k] = tokens[i], all_lens[k++] = lens[i];
    if (a->idf_weights && !tfc_node_is_null(a->idf_weights)) {
        const tfc_node *w = a->idf_weights;
        arg_path(b, "idf_weights", path, sizeof path);
        if (w->kind != TFC_NODE_SEQ || w->n != n) {
            st = tfc_node_error(b->err, TFC_ERR_CONFIG, w, path, "expected a list of %lld "
                                "weights, one per vocabulary entry (Keras)", (long long)n);
            goto done;
        }
        if (!(idf = malloc((size_t)total * sizeof *idf))) {
            st = tfc_error_set(b->err, TFC_ERR_NOMEM, "out of memory");
            goto done;
        }
        double sum = 0;
        for (int i = 0; i < w->n; i++) {
            double x;
            char item[420];
            snprintf(item, sizeof item, "%s[%d]", path, i);
            if ((st = tfc_node_double(w->vals[i], item, &x, b->err))) goto done;
            idf[total - n + i] = (float)x;
            sum += x;
        }
        if (!found) idf[0] = (float)(sum / (double)n); /* numpy's average, for [UNK] */
    }
    int64_t dup;
    *out = tfc_vocab_keras(&a->ts, all, all_lens, total, idf, &dup, b->err);
    if (!*out && dup >= 0)
        st = tfc_node_error(b->err, TFC_ERR_CONFIG, a->vocabulary,
                            arg_path(b, "vocabulary", path, sizeof path),
                            "entry %lld repeats the token \"%.*s\" (Keras wants unique terms)",
                            (long long)(dup - (found ? 0 : start)), (int)all_lens[dup], all[dup]);
    else if (!*out)
        st = b->err && b->err->code ? b->err->code : TFC_ERR_NOMEM;
done:
    free(tokens);
    free(lens);
    free(all);
    free(all_lens);
    free(idf);
    free(text);
    return st;
}

/* Why a vocabulary cannot serve this op's settings, or NULL when it can. */
static const char *mismatch(const tfc_text_spec *want, const tfc_vocab *v)
{
    const tfc_text_spec *has = tfc_vocab_text_spec(v);
    if (!has) return "it was made by the tokenize op (char or word), not text_vectorization";
    if (has->standardize != want->standardize) return "its standardize differs";
    if (has->split != want->split) return "its split differs";
    if (has->nngrams != want->nngrams ||
        memcmp(has->ngrams, want->ngrams, sizeof *has->ngrams * (size_t)has->nngrams))
        return "its ngrams differ";
    if (has->output_mode != want->output_mode) return "its output_mode differs";
    return NULL;
}

static tfc_status tv_init(void *args, const op_build *b, const tfc_element_spec *in,
                          tfc_element_spec *out, tfc_error *err)
{
    tv_args *a = args;
    const tfc_data_options *opt = b->opt;
    const tfc_component_spec *c = &in->comp[TFC_COMP_FEATURES];
    if (!c->present || c->dtype != TFC_U8 || (c->shape.ndim >= 0 && c->shape.ndim != 1)) {
        char sh[160];
        return tfc_op_error(b, "needs text bytes (uint8 of rank 1), found %s%s",
                            tfc_data_spec_str(c, sh, sizeof sh),
                            c->present && c->dtype == TFC_U8 && c->shape.ndim > 1
                                ? ": it takes each text, so it goes before batch" : "");
    }
    if (*b->vocab) return tfc_op_error(b, "a pipeline has at most one tokenizer");
    const tfc_vocab *v = NULL;
    char *path = NULL;
    tfc_status st = TFC_OK;
    if (a->vocabulary && !tfc_node_is_null(a->vocabulary)) {
        if ((st = given_vocab(a, b, b->vocab))) return st;
        v = *b->vocab;
    } else if (opt->vocab) {
        v = opt->vocab;
    } else if (opt->load_vocabulary) {
        if (!opt->run_dir)
            return tfc_op_error(b, "no vocabulary to load: give `vocabulary:` or a run folder");
        path = tfc_data_path_join(opt->run_dir, "vocabulary.txt");
        if (!path || !(*b->vocab = tfc_vocab_load(path, err))) {
            free(path);
            tfc_error_hint(err, "the train split writes it; or give `vocabulary:`");
            return err && err->code ? err->code : TFC_ERR_NOMEM;
        }
        v = *b->vocab;
    } else {
        /* Keras's adapt over every record of this pipeline's source (the training split). */
        if (b->src->spec.comp[TFC_COMP_FEATURES].dtype != TFC_U8)
            return tfc_op_error(b, "can adapt a vocabulary only over a text source");
        if (!(*b->vocab = tfc_vocab_keras_build(&a->ts, a->max, b->src, err)))
            return err && err->code ? err->code : TFC_ERR_NOMEM;
        v = *b->vocab;
        if (opt->run_dir) {
            path = tfc_data_path_join(opt->run_dir, "vocabulary.txt");
            st = path ? tfc_vocab_save(v, path, err)
                      : tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        }
    }
    const char *why = st ? NULL : mismatch(&a->ts, v);
    if (why)
        st = tfc_op_error(b, "the vocabulary%s%s does not fit these settings: %s", path ? " " : "",
                          path ? path : "", why);
    free(path);
    if (st) return st;
    a->vocab = v;
    a->vocabulary = a->idf_weights = NULL; /* the config text may not outlive the pipeline */
    a->max_tokens = a->standardize = a->split = a->ngrams = a->output_sequence_length = NULL;
    tfc_component_spec *o = &out->comp[TFC_COMP_FEATURES];
    if (a->ts.output_mode == TFC_TEXT_INT) {
        a->width = a->length;
        *o = (tfc_component_spec){1, TFC_I32, {.ndim = 1, .dim = {a->length ? a->length : -1}}};
        return TFC_OK;
    }
    a->width = a->pad_to_max_tokens ? a->max : tfc_vocab_size(v);
    if (a->width < tfc_vocab_size(v))
        return tfc_op_error(b, "pad_to_max_tokens: max_tokens %d is below the vocabulary's "
                            "%lld entries", a->max, (long long)tfc_vocab_size(v));
    *o = (tfc_component_spec){1, TFC_F32, {.ndim = 1, .dim = {a->width}}};
    return TFC_OK;
}

static tfc_status tv_apply(const void *args, tfc_element *e, const tfc_map_ctx *ctx,
                           tfc_error *err)
{
    const tv_args *a = args;
    tfc_tensor old = e->comp[TFC_COMP_FEATURES];
    if (old.dtype != TFC_U8 || old.shape.ndim != 1)
        return tfc_error_set(err, TFC_ERR_DATA, "text_vectorization: needs text bytes");
    size_t len = (size_t)old.shape.dim[0];
    int64_t width = a->width;
    int ints = a->ts.output_mode == TFC_TEXT_INT;
    if (!width && (width = tfc_vocab_encode(a->vocab, old.data, len, NULL, 0)) < 0)
        width = -1;
    void *y = NULL;
    if (width >= 0) {
        tfc_shape s = {.ndim = 1, .dim = {width}};
        e->comp[TFC_COMP_FEATURES].data = NULL;
        y = tfc_element_alloc(e, TFC_COMP_FEATURES, ints ? TFC_I32 : TFC_F32, &s);
    }
    int64_t n = y ? tfc_vocab_vectorize(a->vocab, old.data, len, y, width) : -1;
    free(old.data);
    if (n < 0) return tfc_error_set(err, TFC_ERR_NOMEM, "text_vectorization: out of memory");
    return TFC_OK;
}

static void tv_plan(const void *args, tfc_data_plan *out)
{
    out->tokenizes = 1;
}

const op_def tfc_op_text_vectorization = {
    .name = "text_vectorization",
    .fields = tv_fields,
    .args_size = sizeof(tv_args),
    .help = "Keras's TextVectorization: text bytes to int32 ids or float32 vectors",
    .check = tv_check,
    .init = tv_init,
    .apply = tv_apply,
    .plan = tv_plan,
};
