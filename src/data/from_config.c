/* Building pipelines from configuration: the schema tables of every source and stage, the
 * two-phase build (first every key of the split is validated and all errors reported, then
 * the source is opened and the stages appended, checking each against the element spec), the
 * YAML-text entry points of the C API, and the typed stage appenders. */
#include <fnmatch.h>
#include <glob.h>
#include <stdlib.h>
#include <string.h>

#include "data/internal.h"

static const char *const on_error_choices[] = {"fail", "skip", NULL};

#define ON_ERROR_FIELD(T)                                                                     \
    {"on_error", TFC_F_ENUM, offsetof(T, on_error), "fail", TFC_UNBOUNDED, on_error_choices,  \
     "fail: bad records are errors; skip: they are counted and left out"}
#define NUM_CLASSES_FIELD(T)                                                                  \
    {"num_classes", TFC_F_INT, offsetof(T, num_classes), "0", 0, 1 << 30, NULL,               \
     "> 0: integer labels must lie in [0, num_classes)"}
#define TYPE_FIELD(T)                                                                         \
    {"type", TFC_F_STRING, offsetof(T, type), NULL, TFC_UNBOUNDED, NULL, "the source type"}

/* ---- sources ----------------------------------------------------------------------------- */

static const tfc_field idx_fields[] = {
    TYPE_FIELD(idx_args),
    {"images", TFC_F_STRING, offsetof(idx_args, images), NULL, TFC_UNBOUNDED, NULL,
     "IDX file of the examples (gzip or plain); (N, rows, cols) gives (rows, cols, 1)"},
    {"labels", TFC_F_STRING, offsetof(idx_args, labels), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "IDX file of integer labels (N,), yielded as int32"},
    NUM_CLASSES_FIELD(idx_args),
    ON_ERROR_FIELD(idx_args),
    {NULL},
};

static const tfc_field npy_fields[] = {
    TYPE_FIELD(npy_args),
    {"features", TFC_F_STRING, offsetof(npy_args, features), NULL, TFC_UNBOUNDED, NULL,
     ".npy array (N, ...) sliced along axis 0"},
    {"labels", TFC_F_STRING, offsetof(npy_args, labels), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     ".npy array (N, ...) of labels"},
    NUM_CLASSES_FIELD(npy_args),
    ON_ERROR_FIELD(npy_args),
    {NULL},
};

static const char *const label_dtype_choices[] = {"int32", "float32", NULL};

static const tfc_field csv_fields[] = {
    TYPE_FIELD(csv_args),
    {"file", TFC_F_STRING, offsetof(csv_args, file), NULL, TFC_UNBOUNDED, NULL, "the CSV file"},
    {"header", TFC_F_BOOL, offsetof(csv_args, header), "true", TFC_UNBOUNDED, NULL,
     "the first row names the columns"},
    {"delimiter", TFC_F_STRING, offsetof(csv_args, delimiter), ",", TFC_UNBOUNDED, NULL,
     "one character between cells"},
    {"label_column", TFC_F_NODE, offsetof(csv_args, label_column), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL,
     "column name or 0-based index of the label (-1: the last); none: no labels"},
    {"feature_columns", TFC_F_NODE, offsetof(csv_args, feature_columns), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "list of column names or indices (default: every other column)"},
    {"label_dtype", TFC_F_ENUM, offsetof(csv_args, label_dtype), "int32", TFC_UNBOUNDED,
     label_dtype_choices, "class indices (int32) or regression targets (float32)"},
    NUM_CLASSES_FIELD(csv_args),
    ON_ERROR_FIELD(csv_args),
    {NULL},
};

static const tfc_field images_fields[] = {
    TYPE_FIELD(images_args),
    {"list", TFC_F_STRING, offsetof(images_args, list), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "a file of lines `path label` (paths relative to it)"},
    {"directory", TFC_F_STRING, offsetof(images_args, directory), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "a folder with one sub-folder of images per class (sorted names)"},
    {"channels", TFC_F_INT, offsetof(images_args, channels), "3", 0, 4, NULL,
     "1 grey, 3 RGB, 4 RGBA; 0 keeps what the file holds"},
    {"decode", TFC_F_BOOL, offsetof(images_args, decode), "true", TFC_UNBOUNDED, NULL,
     "false yields the file bytes for a parallel decode_image map"},
    {"max_side", TFC_F_INT, offsetof(images_args, max_side), "16384", 1, 1 << 30, NULL,
     "largest width or height accepted"},
    {"max_pixels", TFC_F_FLOAT, offsetof(images_args, max_pixels), "268435456", 1, 1e18, NULL,
     "largest width x height accepted"},
    NUM_CLASSES_FIELD(images_args),
    ON_ERROR_FIELD(images_args),
    {NULL},
};

static const char *const format_choices[] = {"lines", "fortune", NULL};
static const char *const label_choices[] = {"none", "file", NULL};
static const char *const src_tokenizer_choices[] = {"none", "char", "word", NULL};
static const char *const lowercase_choices[] = {"auto", "true", "false", NULL};
static const char *const part_choices[] = {"train", "test", NULL};

static const tfc_field text_fields[] = {
    TYPE_FIELD(text_args),
    {"files", TFC_F_NODE, offsetof(text_args, files), NULL, TFC_UNBOUNDED, NULL,
     "a path or list of paths; glob patterns are expanded (sorted)"},
    {"exclude", TFC_F_NODE, offsetof(text_args, exclude), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "glob patterns of base names to leave out, e.g. [\"*.dat\", \"*.u8\"]"},
    {"format", TFC_F_ENUM, offsetof(text_args, format), "lines", TFC_UNBOUNDED, format_choices,
     "lines: one record per line; fortune: records between lines holding %"},
    {"label", TFC_F_ENUM, offsetof(text_args, label), "none", TFC_UNBOUNDED, label_choices,
     "file: the label is the index of the record's file in `files` (its category)"},
    {"split", TFC_F_NODE, offsetof(text_args, split), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "{every: N, part: train|test, offset: K}: record r is test when r % N == K"},
    {"max_record_bytes", TFC_F_INT, offsetof(text_args, max_record_bytes), "1048576", 1,
     1 << 30, NULL, "longer records are errors (or skipped)"},
    {"skip_empty", TFC_F_BOOL, offsetof(text_args, skip_empty), "false", TFC_UNBOUNDED, NULL,
     "lines format: leave out blank lines"},
    {"tokenizer", TFC_F_ENUM, offsetof(text_args, tokenizer), "none", TFC_UNBOUNDED,
     src_tokenizer_choices, "tokenize right away (same as a tokenize map op)"},
    {"vocabulary", TFC_F_STRING, offsetof(text_args, vocabulary), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "with tokenizer: a vocabulary file to use"},
    {"max_tokens", TFC_F_INT, offsetof(text_args, max_tokens), "0", 0, 1 << 24, NULL,
     "with tokenizer: vocabulary size cap (0: none)"},
    {"min_count", TFC_F_INT, offsetof(text_args, min_count), "1", 1, 1 << 30, NULL,
     "with tokenizer: rarer tokens become <unk>"},
    {"lowercase", TFC_F_ENUM, offsetof(text_args, lowercase), "auto", TFC_UNBOUNDED,
     lowercase_choices, "with tokenizer: auto lowercases words, not characters"},
    ON_ERROR_FIELD(text_args),
    {NULL},
};

typedef struct split_rule {
    int every, part, offset;
} split_rule;

static const tfc_field split_fields[] = {
    {"every", TFC_F_INT, offsetof(split_rule, every), NULL, 2, 1 << 30, NULL,
     "one record in `every` goes to the test part"},
    {"part", TFC_F_ENUM, offsetof(split_rule, part), NULL, TFC_UNBOUNDED, part_choices,
     "which part this pipeline reads"},
    {"offset", TFC_F_INT, offsetof(split_rule, offset), "0", 0, 1 << 30, NULL,
     "record r is test when r % every == offset"},
    {NULL},
};

typedef struct source_def {
    const char *name;
    const tfc_field *fields;
    size_t size;
    const char *help;
} source_def;

static const source_def source_defs[] = {
    {"idx", idx_fields, sizeof(idx_args), "MNIST IDX files"},
    {"npy", npy_fields, sizeof(npy_args), "NumPy .npy arrays"},
    {"csv", csv_fields, sizeof(csv_args), "a CSV file of numbers"},
    {"images", images_fields, sizeof(images_args), "PNG and JPEG files"},
    {"text", text_fields, sizeof(text_args), "lines or %-separated records of text files"},
    {NULL, NULL, 0, NULL},
};

const char *const *tfc_data_source_names(void)
{
    static const char *const names[] = {"idx", "npy", "csv", "images", "text", NULL};
    return names;
}

/* ---- stages -------------------------------------------------------------------------------- */

typedef struct shuffle_cfg {
    int buffer_size, seed, reshuffle_each_iteration;
} shuffle_cfg;
typedef struct count_cfg {
    int count;
} count_cfg;
typedef struct batch_cfg {
    int batch_size, drop_remainder;
    tfc_int_list padded_shapes;
    tfc_float_list padding_values;
} batch_cfg;
typedef struct prefetch_cfg {
    int buffer_size;
} prefetch_cfg;
typedef struct filter_cfg {
    int min_length, max_length;
    tfc_int_list labels;
} filter_cfg;
typedef struct empty_cfg {
    int unused;
} empty_cfg;

static const tfc_field shuffle_fields[] = {
    {"buffer_size", TFC_F_INT, offsetof(shuffle_cfg, buffer_size), NULL, 1, 1 << 30, NULL,
     "elements to draw from (the data set size for a full shuffle)"},
    {"seed", TFC_F_INT, offsetof(shuffle_cfg, seed), "-1", -1, 2147483647, NULL,
     "-1: derived from the solver's seed"},
    {"reshuffle_each_iteration", TFC_F_BOOL, offsetof(shuffle_cfg, reshuffle_each_iteration),
     "true", TFC_UNBOUNDED, NULL, "a new order every pass"},
    {NULL},
};
static const tfc_field repeat_fields[] = {
    {"count", TFC_F_INT, offsetof(count_cfg, count), "-1", -1, 2147483647, NULL,
     "passes; -1 repeats forever"},
    {NULL},
};
static const tfc_field batch_fields[] = {
    {"batch_size", TFC_F_INT, offsetof(batch_cfg, batch_size), NULL, 1, 1 << 24, NULL,
     "elements per batch"},
    {"drop_remainder", TFC_F_BOOL, offsetof(batch_cfg, drop_remainder), "false", TFC_UNBOUNDED,
     NULL, "drop the last, short batch"},
    {NULL},
};
static const tfc_field padded_batch_fields[] = {
    {"batch_size", TFC_F_INT, offsetof(batch_cfg, batch_size), NULL, 1, 1 << 24, NULL,
     "elements per batch"},
    {"padded_shapes", TFC_F_INT_LIST, offsetof(batch_cfg, padded_shapes), TFC_NO_DEFAULT, -1,
     1 << 30, NULL, "shape of padded features (-1 or absent: the longest in the batch)"},
    {"padding_values", TFC_F_FLOAT_LIST, offsetof(batch_cfg, padding_values), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "padding value of the features, or [features, labels] (default 0)"},
    {"drop_remainder", TFC_F_BOOL, offsetof(batch_cfg, drop_remainder), "false", TFC_UNBOUNDED,
     NULL, "drop the last, short batch"},
    {NULL},
};
static const tfc_field take_fields[] = {
    {"count", TFC_F_INT, offsetof(count_cfg, count), NULL, -1, 2147483647, NULL,
     "elements to keep (-1: all)"},
    {NULL},
};
static const tfc_field skip_fields[] = {
    {"count", TFC_F_INT, offsetof(count_cfg, count), NULL, 0, 2147483647, NULL,
     "elements to drop at the start of each pass"},
    {NULL},
};
static const tfc_field prefetch_fields[] = {
    {"buffer_size", TFC_F_INT, offsetof(prefetch_cfg, buffer_size), "2", 1, 4096, NULL,
     "elements prepared ahead by a background thread"},
    {NULL},
};
static const tfc_field filter_fields[] = {
    {"min_length", TFC_F_INT, offsetof(filter_cfg, min_length), "0", 0, 1 << 30, NULL,
     "keep elements whose features have at least this many rows (axis 0)"},
    {"max_length", TFC_F_INT, offsetof(filter_cfg, max_length), "0", 0, 1 << 30, NULL,
     "keep elements with at most this many rows (0: no limit)"},
    {"labels", TFC_F_INT_LIST, offsetof(filter_cfg, labels), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "keep elements whose (scalar) label is one of these"},
    {NULL},
};
static const tfc_field cache_fields[] = {{NULL}};
static const tfc_field map_fields[] = {
    {"op", TFC_F_STRING, 0, NULL, TFC_UNBOUNDED, NULL, "the map op (see the op list)"},
    {"num_parallel_calls", TFC_F_INT, 0, "1", 1, 256, NULL, "elements mapped in parallel"},
    {NULL},
};

typedef struct stage_def {
    const char *name;
    const tfc_field *fields;
    size_t size;
    const char *help;
} stage_def;

static const stage_def stage_defs[] = {
    {"map", map_fields, 0, "applies a named op to every element"},
    {"filter", filter_fields, sizeof(filter_cfg), "keeps the elements that pass"},
    {"shuffle", shuffle_fields, sizeof(shuffle_cfg), "tf.data's buffered shuffle"},
    {"repeat", repeat_fields, sizeof(count_cfg), "passes over the data again"},
    {"batch", batch_fields, sizeof(batch_cfg), "stacks consecutive elements"},
    {"padded_batch", padded_batch_fields, sizeof(batch_cfg),
     "stacks variable-length elements, padding them; adds lengths"},
    {"cache", cache_fields, sizeof(empty_cfg), "keeps the first pass in memory"},
    {"take", take_fields, sizeof(count_cfg), "the first count elements"},
    {"skip", skip_fields, sizeof(count_cfg), "all but the first count elements"},
    {"prefetch", prefetch_fields, sizeof(prefetch_cfg), "prepares elements in the background"},
    {NULL, NULL, 0, NULL},
};

const char *const *tfc_data_stage_names(void)
{
    static const char *const names[] = {"map",  "filter", "shuffle", "repeat",   "batch",
                                        "padded_batch", "cache", "take", "skip", "prefetch",
                                        NULL};
    return names;
}

int tfc_data_print_help(FILE *f, const char *kind, const char *name)
{
    if (!strcmp(kind, "source")) {
        for (const source_def *d = source_defs; d->name; d++)
            if (!strcmp(d->name, name)) {
                fprintf(f, "source %s: %s\n", d->name, d->help);
                tfc_schema_print_help(f, d->fields, "  ");
                return 1;
            }
    } else if (!strcmp(kind, "stage")) {
        for (const stage_def *d = stage_defs; d->name; d++)
            if (!strcmp(d->name, name)) {
                fprintf(f, "stage %s: %s\n", d->name, d->help);
                tfc_schema_print_help(f, d->fields, "  ");
                return 1;
            }
    } else if (!strcmp(kind, "op")) {
        const op_def *d = op_find(name);
        if (d) {
            fprintf(f, "map op %s: %s\n", d->name, d->help);
            tfc_schema_print_help(f, d->fields, "  ");
            return 1;
        }
    }
    return 0;
}

/* ---- the built-in filter predicate ---------------------------------------------------------- */

static int filter_pred(const tfc_element *e, void *user)
{
    const filter_cfg *c = user;
    const tfc_tensor *f = &e->comp[TFC_COMP_FEATURES];
    int64_t len = f->shape.ndim ? f->shape.dim[0] : 1;
    if (len < c->min_length) return 0;
    if (c->max_length > 0 && len > c->max_length) return 0;
    if (c->labels.n) {
        const tfc_tensor *l = &e->comp[TFC_COMP_LABELS];
        if (!l->data || tfc_shape_numel(&l->shape) != 1) return 0;
        double v = tfc_value_get(l->data, l->dtype, 0);
        for (int i = 0; i < c->labels.n; i++)
            if (v == c->labels.v[i]) return 1;
        return 0;
    }
    return 1;
}

/* ---- the plan: phase 1 validates, phase 2 builds ------------------------------------------- */

typedef struct stage_plan {
    const stage_def *def;
    const op_def *op;
    const tfc_node *node; /* the stage's argument mapping (may be NULL) */
    char key[320];
    void *args;           /* malloc'd; for map, the op's args struct */
} stage_plan;

static void plans_free(stage_plan *plans, int n)
{
    for (int i = 0; i < n; i++) free(plans[i].args);
    free(plans);
}

static tfc_status unknown_name(const tfc_node *at, const char *key, const char *what,
                               const char *name, const char *const *known, tfc_error *err)
{
    char list[1024];
    tfc_join_names(list, sizeof list, known);
    const char *guess = tfc_did_you_mean(name, known);
    if (guess)
        return tfc_node_error(err, TFC_ERR_CONFIG, at, key, "unknown %s '%s'; did you mean '%s'? "
                              "(known: %s)", what, name, guess, list);
    return tfc_node_error(err, TFC_ERR_CONFIG, at, key, "unknown %s '%s' (known: %s)", what, name,
                          list);
}

/* Validates one pipeline item ({stage: {args}}) into a plan. */
static tfc_status plan_stage(const tfc_node *item, const char *key, stage_plan *pl,
                             tfc_error *err)
{
    memset(pl, 0, sizeof *pl);
    snprintf(pl->key, sizeof pl->key, "%s", key);
    if (item->kind != TFC_NODE_MAP || item->n != 1) {
        char found[128];
        tfc_node_describe(item, found, sizeof found);
        return tfc_node_error(err, TFC_ERR_CONFIG, item, key, "expected one stage as a mapping "
                              "like `- batch: {batch_size: 32}`, found %s", found);
    }
    const char *name = item->keys[0]->str;
    for (const stage_def *d = stage_defs; d->name; d++)
        if (!strcmp(d->name, name)) pl->def = d;
    if (!pl->def)
        return unknown_name(item->keys[0], key, "stage", name, tfc_data_stage_names(), err);
    pl->node = item->vals[0];
    snprintf(pl->key, sizeof pl->key, "%s.%s", key, name);
    if (strcmp(name, "map")) {
        pl->args = calloc(1, pl->def->size);
        if (!pl->args) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        return tfc_schema_apply(pl->def->fields, pl->node, pl->key, pl->args, err);
    }
    const tfc_node *opn = tfc_node_get(pl->node, "op");
    if (!opn || opn->kind != TFC_NODE_SCALAR || !*opn->str) {
        const tfc_node *at = pl->node && !tfc_node_is_null(pl->node) ? pl->node : item;
        char list[1024];
        tfc_join_names(list, sizeof list, tfc_data_op_names());
        return tfc_node_error(err, TFC_ERR_CONFIG, at, pl->key, "a map needs `op: NAME` (one of: "
                              "%s)", list);
    }
    char okey[352];
    snprintf(okey, sizeof okey, "%s.op", pl->key);
    pl->op = op_find(opn->str);
    if (!pl->op) return unknown_name(opn, okey, "map op", opn->str, tfc_data_op_names(), err);
    pl->args = calloc(1, pl->op->args_size);
    if (!pl->args) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    return tfc_schema_apply(pl->op->fields, pl->node, pl->key, pl->args, err);
}

/* Appends a planned stage to p (phase 2). Takes the plan's args for map. */
static tfc_status build_stage(tfc_pipeline *p, stage_plan *pl, tfc_error *err)
{
    const char *name = pl->def->name;
    const tfc_node *at = pl->node && !tfc_node_is_null(pl->node) ? pl->node : NULL;
    tfc_status st;
    if (pl->op) {
        op_build b = {p, at, pl->key, err};
        stage *top = pipeline_top(p);
        tfc_element_spec out = top->spec;
        st = pl->op->init(pl->args, &b, &top->spec, &out, err);
        if (st) {
            if (pl->op->fini) pl->op->fini(pl->args);
            return st;
        }
        map_common *mc = pl->args;
        mc->op = pl->op->name; /* the YAML text may not outlive the pipeline */
        int npc = mc->num_parallel_calls;
        void *args = pl->args;
        pl->args = NULL;
        uint64_t h = hash_mix(hash_str(0, pl->op->name), (uint64_t)npc);
        return stage_map_push(p, pl->op, args, NULL, NULL, &out, npc, h, err);
    }
    if (!strcmp(name, "filter")) {
        filter_cfg *c = pl->args;
        uint64_t h = hash_mix(hash_mix((uint64_t)c->min_length, (uint64_t)c->max_length),
                              (uint64_t)c->labels.n);
        if (c->labels.n && !p->stages[p->n - 1]->spec.comp[TFC_COMP_LABELS].present)
            return tfc_node_error(err, TFC_ERR_CONFIG, at, pl->key, "filter by labels, but the "
                                  "elements have no labels");
        return stage_filter_push(p, filter_pred, NULL, c, sizeof *c, h, err);
    }
    if (!strcmp(name, "shuffle")) {
        shuffle_cfg *c = pl->args;
        shuffle_args a = {c->buffer_size, c->seed, c->reshuffle_each_iteration};
        return stage_shuffle_push(p, &a, err);
    }
    if (!strcmp(name, "repeat")) return stage_repeat_push(p, ((count_cfg *)pl->args)->count, err);
    if (!strcmp(name, "take")) return stage_take_push(p, ((count_cfg *)pl->args)->count, 0, err);
    if (!strcmp(name, "skip")) return stage_take_push(p, ((count_cfg *)pl->args)->count, 1, err);
    if (!strcmp(name, "cache")) return stage_cache_push(p, err);
    if (!strcmp(name, "prefetch"))
        return stage_prefetch_push(p, ((prefetch_cfg *)pl->args)->buffer_size, err);
    batch_cfg *c = pl->args;
    batch_args a = {.batch_size = c->batch_size, .drop_remainder = c->drop_remainder,
                    .padded = !strcmp(name, "padded_batch")};
    a.padded_shape.ndim = c->padded_shapes.n;
    for (int i = 0; i < c->padded_shapes.n && i < TFC_MAX_DIMS; i++)
        a.padded_shape.dim[i] = c->padded_shapes.v[i];
    if (c->padded_shapes.n > TFC_MAX_DIMS)
        return tfc_node_error(err, TFC_ERR_CONFIG, at, pl->key, "padded_shapes: at most %d "
                              "dimensions", TFC_MAX_DIMS);
    if (c->padding_values.n > 2)
        return tfc_node_error(err, TFC_ERR_CONFIG, at, pl->key, "padding_values: one value, or "
                              "[features, labels]");
    a.padding_value = c->padding_values.n ? c->padding_values.v[0] : 0;
    a.label_padding_value = c->padding_values.n > 1 ? c->padding_values.v[1] : 0;
    return stage_batch_push(p, &a, at, pl->key, err);
}

/* ---- opening sources --------------------------------------------------------------------- */

static char *resolve(const tfc_data_options *opt, const char *path)
{
    return path ? path_resolve(opt ? opt->base_dir : NULL, path) : NULL;
}

typedef struct path_list {
    char **v;
    int n, cap;
} path_list;

static int path_push(path_list *l, const char *s)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 16;
        char **v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return -1;
        l->v = v;
        l->cap = cap;
    }
    size_t n = strlen(s) + 1;
    if (!(l->v[l->n] = malloc(n))) return -1;
    memcpy(l->v[l->n++], s, n);
    return 0;
}

static void path_list_free(path_list *l)
{
    for (int i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
}

static int excluded(const tfc_node *exclude, const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (!exclude) return 0;
    if (exclude->kind == TFC_NODE_SCALAR) return fnmatch(exclude->str, base, 0) == 0;
    for (int i = 0; exclude->kind == TFC_NODE_SEQ && i < exclude->n; i++)
        if (exclude->vals[i]->kind == TFC_NODE_SCALAR &&
            fnmatch(exclude->vals[i]->str, base, 0) == 0)
            return 1;
    return 0;
}

/* Expands `files` (a string or a list of strings, globs allowed) into paths. */
static tfc_status text_paths(const text_args *a, const tfc_data_options *opt, const char *key,
                             path_list *out, tfc_error *err)
{
    const tfc_node *f = a->files;
    int n = f->kind == TFC_NODE_SEQ ? f->n : 1;
    if (f->kind == TFC_NODE_MAP || n == 0)
        return tfc_node_error(err, TFC_ERR_CONFIG, f, key, "expected a path or a list of paths");
    for (int i = 0; i < n; i++) {
        const tfc_node *item = f->kind == TFC_NODE_SEQ ? f->vals[i] : f;
        if (item->kind != TFC_NODE_SCALAR || !*item->str)
            return tfc_node_error(err, TFC_ERR_CONFIG, item, key, "expected a path");
        char *pattern = resolve(opt, item->str);
        if (!pattern) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        int has_glob = strpbrk(item->str, "*?[") != NULL;
        if (!has_glob) {
            int r = excluded(a->exclude, pattern) ? 0 : path_push(out, pattern);
            free(pattern);
            if (r) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
            continue;
        }
        glob_t g;
        int r = glob(pattern, 0, NULL, &g);
        free(pattern);
        if (r == GLOB_NOMATCH)
            return tfc_node_error(err, TFC_ERR_CONFIG, item, key, "'%s' matches no files",
                                  item->str);
        if (r) return tfc_node_error(err, TFC_ERR_CONFIG, item, key, "cannot expand '%s'",
                                     item->str);
        for (size_t k = 0; k < g.gl_pathc; k++)
            if (!excluded(a->exclude, g.gl_pathv[k]) && path_push(out, g.gl_pathv[k])) {
                globfree(&g);
                return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
            }
        globfree(&g);
    }
    if (out->n == 0)
        return tfc_node_error(err, TFC_ERR_CONFIG, f, key, "no files left after `exclude`");
    return TFC_OK;
}

/* Validates the source mapping into `args` (phase 1). */
static tfc_status plan_source(const tfc_node *src, const char *key, const source_def **def,
                              void **args, tfc_error *err)
{
    *def = NULL;
    *args = NULL;
    if (!src || src->kind != TFC_NODE_MAP) {
        char found[128] = "nothing";
        if (src) tfc_node_describe(src, found, sizeof found);
        return tfc_node_error(err, TFC_ERR_CONFIG, src, key, "expected a mapping like {type: idx, "
                              "images: FILE, labels: FILE}, found %s", found);
    }
    const tfc_node *type = tfc_node_get(src, "type");
    char tkey[352];
    snprintf(tkey, sizeof tkey, "%s.type", key);
    if (!type || type->kind != TFC_NODE_SCALAR) {
        char list[256];
        tfc_join_names(list, sizeof list, tfc_data_source_names());
        return tfc_node_error(err, TFC_ERR_CONFIG, type ? type : src, tkey,
                              "a source needs `type:` (one of: %s)", list);
    }
    for (const source_def *d = source_defs; d->name; d++)
        if (!strcmp(d->name, type->str)) *def = d;
    if (!*def)
        return unknown_name(type, tkey, "source type", type->str, tfc_data_source_names(), err);
    *args = calloc(1, (*def)->size);
    if (!*args) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    tfc_status st = tfc_schema_apply((*def)->fields, src, key, *args, err);
    if (st) return st;
    if (!strcmp((*def)->name, "images")) {
        images_args *a = *args;
        if (!a->list == !a->directory)
            return tfc_node_error(err, TFC_ERR_CONFIG, src, key, "give exactly one of `list` and "
                                  "`directory`");
    }
    if (!strcmp((*def)->name, "text")) {
        text_args *a = *args;
        if (a->split) {
            split_rule r;
            char skey[352];
            snprintf(skey, sizeof skey, "%s.split", key);
            st = tfc_schema_apply(split_fields, a->split, skey, &r, err);
            if (st) return st;
            if (r.offset >= r.every)
                return tfc_node_error(err, TFC_ERR_CONFIG, a->split, skey, "offset %d must be "
                                      "below every (%d)", r.offset, r.every);
            a->split_every = r.every;
            a->split_part = r.part;
            a->split_offset = r.offset;
        }
        if (a->tokenizer == 0 && (a->vocabulary || a->max_tokens || a->min_count != 1))
            return tfc_node_error(err, TFC_ERR_CONFIG, src, key, "vocabulary, max_tokens and "
                                  "min_count need a tokenizer (char or word)");
    }
    if (!strcmp((*def)->name, "csv")) {
        csv_args *a = *args;
        if (strlen(a->delimiter) != 1)
            return tfc_node_error(err, TFC_ERR_CONFIG, tfc_node_get(src, "delimiter"), key,
                                  "delimiter must be one character, found \"%s\"", a->delimiter);
    }
    return TFC_OK;
}

/* Opens the planned source (phase 2): reads the data. */
static tfc_status open_source(const source_def *def, void *args, const tfc_node *at,
                              const char *key, const tfc_data_options *opt, source **out,
                              tfc_error *err)
{
    tfc_status st = TFC_ERR_NOMEM;
    int want = opt ? opt->num_classes : 0;
    const char *name = def->name;
    if (!strcmp(name, "idx")) {
        idx_args a = *(idx_args *)args;
        char *im = resolve(opt, a.images), *lb = resolve(opt, a.labels);
        a.images = im;
        a.labels = lb;
        if (want) a.num_classes = want;
        if (im && (lb || !a.labels)) st = source_idx(out, &a, err);
        free(im);
        free(lb);
    } else if (!strcmp(name, "npy")) {
        npy_args a = *(npy_args *)args;
        char *f = resolve(opt, a.features), *l = resolve(opt, a.labels);
        a.features = f;
        a.labels = l;
        if (want) a.num_classes = want;
        if (f && (l || !a.labels)) st = source_npy(out, &a, err);
        free(f);
        free(l);
    } else if (!strcmp(name, "csv")) {
        csv_args a = *(csv_args *)args;
        char *f = resolve(opt, a.file);
        a.file = f;
        if (want) a.num_classes = want;
        if (f) st = source_csv(out, &a, at, key, err);
        free(f);
    } else if (!strcmp(name, "images")) {
        images_args a = *(images_args *)args;
        char *l = resolve(opt, a.list), *d = resolve(opt, a.directory);
        a.list = l;
        a.directory = d;
        if (want) a.num_classes = want;
        if (l || d) st = source_images(out, &a, err);
        free(l);
        free(d);
    } else {
        text_args a = *(text_args *)args;
        path_list pl = {0};
        char fkey[352];
        snprintf(fkey, sizeof fkey, "%s.files", key);
        st = text_paths(&a, opt, fkey, &pl, err);
        if (!st && want > 0 && a.label == 1 && pl.n > want)
            st = tfc_node_error(err, TFC_ERR_CONFIG, a.files, fkey, "%d files give %d classes "
                                "(label: file) but the model has %d", pl.n, pl.n, want);
        if (!st) {
            a.paths = (const char *const *)pl.v;
            a.npaths = pl.n;
            st = source_text(out, &a, err);
        }
        path_list_free(&pl);
    }
    if (st == TFC_ERR_NOMEM && err && !err->count) tfc_error_set(err, st, "out of memory");
    return st;
}

/* The text source's `tokenizer:` is a tokenize map op right after it. */
static tfc_status text_tokenizer_stage(tfc_pipeline *p, const text_args *a, const tfc_node *at,
                                       const char *key, tfc_error *err)
{
    const op_def *op = &op_tokenize;
    tokenize_args *t = calloc(1, sizeof *t);
    if (!t) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    tfc_status st = TFC_OK;
    /* The source's fields have the op's names and meanings. */
    t->common.op = op->name;
    t->common.num_parallel_calls = 1;
    t->tokenizer = a->tokenizer - 1;
    t->vocabulary = a->vocabulary;
    t->max_tokens = a->max_tokens;
    t->min_count = a->min_count;
    t->lowercase = a->lowercase;
    void *args = t;
    stage_plan pl = {.def = &stage_defs[0], .op = op, .node = at, .args = args};
    snprintf(pl.key, sizeof pl.key, "%s", key);
    if (!st) st = build_stage(p, &pl, err);
    free(pl.args);
    return st;
}

/* ---- the public entry points --------------------------------------------------------------- */

tfc_pipeline *tfc_pipeline_from_config(const tfc_node *split, const tfc_data_options *opt,
                                       tfc_error *err)
{
    const char *key = opt && opt->key ? opt->key : "data";
    char skey[320], pkey[320];
    snprintf(skey, sizeof skey, "%s.source", key);
    snprintf(pkey, sizeof pkey, "%s.pipeline", key);
    if (!split || split->kind != TFC_NODE_MAP) {
        char found[128] = "nothing";
        if (split) tfc_node_describe(split, found, sizeof found);
        tfc_node_error(err, TFC_ERR_CONFIG, split, key, "expected a mapping {source: {...}, "
                       "pipeline: [...]}, found %s", found);
        return NULL;
    }
    /* Phase 1: every key of the split. */
    static const tfc_field split_fields_top[] = {
        {"source", TFC_F_NODE, 0, NULL, TFC_UNBOUNDED, NULL, "where the elements come from"},
        {"pipeline", TFC_F_NODE, sizeof(const tfc_node *), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
         "stages, run in the order written"},
        {NULL},
    };
    const tfc_node *top[2] = {NULL, NULL};
    tfc_status st = tfc_schema_apply(split_fields_top, split, key, top, err);
    const source_def *sdef = NULL;
    void *sargs = NULL;
    if (top[0] && plan_source(top[0], skey, &sdef, &sargs, err)) st = TFC_ERR_CONFIG;
    const tfc_node *pipe = top[1];
    int nst = 0;
    if (pipe && !tfc_node_is_null(pipe)) {
        if (pipe->kind != TFC_NODE_SEQ) {
            tfc_node_error(err, TFC_ERR_CONFIG, pipe, pkey, "expected a list of stages");
            st = TFC_ERR_CONFIG;
        } else {
            nst = pipe->n;
        }
    }
    stage_plan *plans = calloc((size_t)nst + 1, sizeof *plans);
    if (!plans) {
        free(sargs);
        tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int i = 0; i < nst; i++) {
        char ikey[340];
        snprintf(ikey, sizeof ikey, "%s[%d]", pkey, i);
        if (plan_stage(pipe->vals[i], ikey, &plans[i], err)) st = TFC_ERR_CONFIG;
    }
    if (st) {
        plans_free(plans, nst);
        free(sargs);
        return NULL;
    }
    /* Phase 2: read the data, then append the stages in order. */
    source *src = NULL;
    st = open_source(sdef, sargs, top[0], skey, opt, &src, err);
    tfc_pipeline *p = st ? NULL : pipeline_new(src, opt, err);
    if (p && !strcmp(sdef->name, "text") && ((text_args *)sargs)->tokenizer)
        st = text_tokenizer_stage(p, sargs, top[0], skey, err);
    for (int i = 0; p && !st && i < nst; i++) st = build_stage(p, &plans[i], err);
    plans_free(plans, nst);
    free(sargs);
    if (st || !p) {
        tfc_pipeline_free(p);
        return NULL;
    }
    return p;
}

tfc_pipeline *tfc_pipeline_from_yaml(const char *source_yaml, const tfc_data_options *opt,
                                     tfc_error *err)
{
    tfc_doc *doc = tfc_doc_load_string(source_yaml, strlen(source_yaml), "<source>", err);
    if (!doc) return NULL;
    const char *key = opt && opt->key ? opt->key : "data";
    char skey[320];
    snprintf(skey, sizeof skey, "%s.source", key);
    const source_def *def;
    void *args;
    tfc_pipeline *p = NULL;
    tfc_node *root = tfc_doc_root(doc);
    if (!plan_source(root, skey, &def, &args, err)) {
        source *src;
        if (!open_source(def, args, root, skey, opt, &src, err)) {
            p = pipeline_new(src, opt, err);
            if (p && !strcmp(def->name, "text") && ((text_args *)args)->tokenizer &&
                text_tokenizer_stage(p, args, root, skey, err)) {
                tfc_pipeline_free(p);
                p = NULL;
            }
        }
    }
    free(args);
    tfc_doc_free(doc);
    return p;
}

tfc_status tfc_pipeline_add_yaml(tfc_pipeline *p, const char *stage_yaml, tfc_error *err)
{
    tfc_doc *doc = tfc_doc_load_string(stage_yaml, strlen(stage_yaml), "<stage>", err);
    if (!doc) return TFC_ERR_CONFIG;
    char key[320];
    snprintf(key, sizeof key, "%s.pipeline[%d]", p->key, p->n - 1);
    stage_plan pl;
    tfc_status st = plan_stage(tfc_doc_root(doc), key, &pl, err);
    if (!st) st = build_stage(p, &pl, err);
    free(pl.args);
    tfc_doc_free(doc);
    return st;
}

/* ---- typed appenders ------------------------------------------------------------------------ */

tfc_status tfc_pipeline_shuffle(tfc_pipeline *p, int64_t buffer_size, int64_t seed,
                                int reshuffle_each_iteration, tfc_error *err)
{
    shuffle_args a = {buffer_size, seed < 0 ? -1 : seed, reshuffle_each_iteration != 0};
    return stage_shuffle_push(p, &a, err);
}

tfc_status tfc_pipeline_repeat(tfc_pipeline *p, int64_t count, tfc_error *err)
{
    return stage_repeat_push(p, count, err);
}

tfc_status tfc_pipeline_batch(tfc_pipeline *p, int64_t batch_size, int drop_remainder,
                              tfc_error *err)
{
    batch_args a = {.batch_size = batch_size, .drop_remainder = drop_remainder != 0};
    return stage_batch_push(p, &a, NULL, "batch", err);
}

tfc_status tfc_pipeline_padded_batch(tfc_pipeline *p, int64_t batch_size,
                                     const tfc_shape *padded_shape, double padding_value,
                                     int drop_remainder, tfc_error *err)
{
    batch_args a = {.batch_size = batch_size, .drop_remainder = drop_remainder != 0, .padded = 1,
                    .padding_value = padding_value};
    if (padded_shape) a.padded_shape = *padded_shape;
    return stage_batch_push(p, &a, NULL, "padded_batch", err);
}

tfc_status tfc_pipeline_cache(tfc_pipeline *p, tfc_error *err)
{
    return stage_cache_push(p, err);
}

tfc_status tfc_pipeline_take(tfc_pipeline *p, int64_t count, tfc_error *err)
{
    return stage_take_push(p, count, 0, err);
}

tfc_status tfc_pipeline_skip(tfc_pipeline *p, int64_t count, tfc_error *err)
{
    return stage_take_push(p, count, 1, err);
}

tfc_status tfc_pipeline_prefetch(tfc_pipeline *p, int buffer_size, tfc_error *err)
{
    return stage_prefetch_push(p, buffer_size, err);
}

tfc_status tfc_pipeline_filter(tfc_pipeline *p, tfc_filter_fn fn, void *user, tfc_error *err)
{
    if (!fn) return tfc_error_set(err, TFC_ERR_CONFIG, "filter: the callback is NULL");
    return stage_filter_push(p, fn, user, NULL, 0, 0, err);
}
