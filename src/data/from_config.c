/* Pipelines from configuration: the walk over a split {source: {...}, pipeline: [...]}.
 * Planning looks every name up in the registries (with a did-you-mean), reads each mapping
 * with its definition's field table and check, and reports every error without opening a
 * file (tfc_pipeline_plan). Building plans first, then opens the source and has each stage
 * push itself, checked against the element spec (from_config, from_yaml, add_yaml). */
#include <stdlib.h>
#include <string.h>

#include "data/internal.h"

/* A planned split: the source, then its stages in order (the one it implies first). */
typedef struct split_plan {
    const source_def *source;
    void *source_args;
    const tfc_node *classes; /* `classes:` of the source, or NULL */
    const tfc_node *source_node; /* the `source:` mapping */
    char source_key[320];
    stage_plan *stages;
    int n;
} split_plan;

static void split_plan_free(split_plan *sp)
{
    for (int i = 0; i < sp->n; i++) free(sp->stages[i].args);
    free(sp->stages);
    free(sp->source_args);
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

/* A zeroed arguments struct (at least one byte: cache has no arguments). */
static void *args_new(size_t size, tfc_error *err)
{
    void *a = calloc(1, size ? size : 1);
    if (!a) tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    return a;
}

/* The arguments of a stage that runs a map op: `op:` names it, its own table and check
 * read them. */
static tfc_status plan_op(stage_plan *pl, tfc_error *err)
{
    const tfc_node *opn = tfc_node_get(pl->node, "op");
    if (!opn || opn->kind != TFC_NODE_SCALAR || !*opn->str) {
        char list[1024];
        tfc_join_names(list, sizeof list, tfc_data_op_names());
        return tfc_node_error(err, TFC_ERR_CONFIG, pl->at, pl->key, "a map needs `op: NAME` (one "
                              "of: %s)", list);
    }
    char okey[352];
    snprintf(okey, sizeof okey, "%s.op", pl->key);
    pl->op = tfc_data_op_find(opn->str);
    if (!pl->op)
        return unknown_name(opn, okey, "map op", opn->str, tfc_data_op_names(), err);
    pl->args = args_new(pl->op->args_size, err);
    if (!pl->args) return TFC_ERR_NOMEM;
    tfc_status st = tfc_schema_apply(pl->op->fields, pl->node, pl->key, pl->args, err);
    if (!st && pl->op->check) {
        op_build b = {.at = pl->at, .key = pl->key, .err = err};
        st = pl->op->check(pl->args, &b);
    }
    return st;
}

/* Validates one pipeline item ({stage: {args}}) into a plan. */
static tfc_status plan_stage(const tfc_node *item, const char *key, stage_plan *pl,
                             tfc_error *err)
{
    memset(pl, 0, sizeof *pl);
    snprintf(pl->key, sizeof pl->key, "%s", key);
    /* `- repeat` is the stage at its defaults, as tf.data's repeat() */
    const int bare = item->kind == TFC_NODE_SCALAR && !item->quoted && item->str[0];
    if (!bare && (item->kind != TFC_NODE_MAP || item->n != 1)) {
        char found[128];
        tfc_node_describe(item, found, sizeof found);
        return tfc_node_error(err, TFC_ERR_CONFIG, item, key, "expected one stage as a mapping "
                              "like `- batch: {batch_size: 32}`, found %s", found);
    }
    const tfc_node *name_node = bare ? item : item->keys[0];
    const char *name = name_node->str;
    pl->def = tfc_data_stage_find(name);
    if (!pl->def)
        return unknown_name(name_node, key, "stage", name, tfc_data_stage_names(), err);
    pl->node = bare ? NULL : item->vals[0];
    pl->at = tfc_node_is_null(pl->node) ? item : pl->node;
    /* a scalar is the first argument, tf.data's first positional one: `- batch: 32`,
     * `- shuffle: 1000`, `- repeat: 2` */
    const tfc_node *a = pl->node;
    if (a && a->kind == TFC_NODE_SCALAR && !tfc_node_is_null(a) && !pl->def->runs_op &&
        pl->def->fields && pl->def->fields[0].name) {
        tfc_node *m = tfc_node_new_map(a->doc, a),
                 *k = tfc_node_new_scalar(a->doc, a, pl->def->fields[0].name, 0);
        if (!m || !k) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        tfc_node_map_set(m, k, (tfc_node *)a);
        pl->node = m;
    }
    snprintf(pl->key, sizeof pl->key, "%s.%s", key, name);
    tfc_status st;
    if (pl->def->runs_op) {
        st = plan_op(pl, err);
    } else {
        pl->args = args_new(pl->def->args_size, err);
        if (!pl->args) return TFC_ERR_NOMEM;
        st = tfc_schema_apply(pl->def->fields, pl->node, pl->key, pl->args, err);
    }
    if (!st && pl->def->check) st = pl->def->check(pl, err);
    return st;
}

/* `classes: [name, ...]`, a key of every source: the class names of its integer labels (the
 * trainer records them with the weights). Checked here into sp->classes; *rest gets the
 * mapping without it (keys and vals in one malloc'd block, freed by the caller through
 * rest->keys), which the source's own field table then checks. */
static tfc_status take_classes(const tfc_node *src, const char *key, tfc_node *rest,
                               split_plan *sp, tfc_error *err)
{
    *rest = *src;
    rest->keys = malloc(sizeof(tfc_node *) * 2 * (size_t)(src->n + 1));
    if (!rest->keys) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    rest->vals = rest->keys + src->n + 1;
    rest->n = 0;
    const tfc_node *classes = NULL;
    for (int i = 0; i < src->n; i++) {
        if (!strcmp(src->keys[i]->str, "classes")) {
            classes = src->vals[i];
            continue;
        }
        rest->keys[rest->n] = src->keys[i];
        rest->vals[rest->n++] = src->vals[i];
    }
    if (!classes) return TFC_OK;
    char ckey[352];
    snprintf(ckey, sizeof ckey, "%s.classes", key);
    if (classes->kind != TFC_NODE_SEQ || classes->n < 1) {
        free(rest->keys);
        return tfc_node_error(err, TFC_ERR_CONFIG, classes, ckey,
                              "expected a list of class names, such as [cat, dog]");
    }
    for (int i = 0; i < classes->n; i++)
        if (classes->vals[i]->kind != TFC_NODE_SCALAR) {
            free(rest->keys);
            return tfc_node_error(err, TFC_ERR_CONFIG, classes->vals[i], ckey,
                                  "class %d: expected a name", i);
        }
    sp->classes = classes;
    return TFC_OK;
}

static tfc_status plan_source_fields(const tfc_node *src, const tfc_node *whole, split_plan *sp,
                                     tfc_error *err);

/* Validates the source mapping into sp (and the stage it implies into sp->stages[0], which
 * has room for it). */
static tfc_status plan_source(const tfc_node *src, split_plan *sp, tfc_error *err)
{
    const char *key = sp->source_key;
    if (!src || src->kind != TFC_NODE_MAP) {
        char found[128] = "nothing";
        if (src) tfc_node_describe(src, found, sizeof found);
        return tfc_node_error(err, TFC_ERR_CONFIG, src, key, "expected a mapping like {type: idx, "
                              "images: FILE, labels: FILE}, found %s", found);
    }
    sp->source_node = src;
    tfc_node rest;
    tfc_status st = take_classes(src, key, &rest, sp, err);
    if (st) return st;
    st = plan_source_fields(&rest, src, sp, err);
    free(rest.keys);
    return st;
}

/* The source's own keys (all but `classes:`): its type, its field table, what it implies.
 * `src` is a copy of the source mapping without `classes:` that dies on return; the implied
 * stage keeps `whole`, the mapping as written, for its errors. */
static tfc_status plan_source_fields(const tfc_node *src, const tfc_node *whole, split_plan *sp,
                                     tfc_error *err)
{
    const char *key = sp->source_key;
    const tfc_node *type = tfc_node_get(src, "type");
    char tkey[352];
    snprintf(tkey, sizeof tkey, "%s.type", key);
    if (!type || type->kind != TFC_NODE_SCALAR) {
        char list[256];
        tfc_join_names(list, sizeof list, tfc_data_source_names());
        return tfc_node_error(err, TFC_ERR_CONFIG, type ? type : src, tkey,
                              "a source needs `type:` (one of: %s)", list);
    }
    const source_def *def = tfc_data_source_find(type->str);
    if (!def)
        return unknown_name(type, tkey, "source type", type->str, tfc_data_source_names(), err);
    void *args = args_new(def->args_size, err);
    if (!args) return TFC_ERR_NOMEM;
    sp->source = def;
    sp->source_args = args;
    tfc_status st = tfc_schema_apply(def->fields, src, key, args, err);
    if (!st && def->check) st = def->check(args, src, key, err);
    if (!st && def->implies) {
        st = def->implies(args, whole, key, &sp->stages[0], err);
        if (sp->stages[0].def) sp->n = 1;
    }
    return st;
}

/* Whether a planned stage makes batches (its elements' axis 0 is then the batch). */
static int batches(const stage_plan *pl)
{
    return tfc_stage_plan_batch_size((stage_plan *)pl) ||
           !strcmp(pl->def->name, "bucket_by_sequence_length");
}

/* Plans a whole split, reporting every error. The key prefix is opt->key. */
static tfc_status plan_split(const tfc_node *split, const tfc_data_options *opt, split_plan *sp,
                             tfc_error *err)
{
    memset(sp, 0, sizeof *sp);
    const char *key = opt && opt->key ? opt->key : "data";
    char pkey[320];
    snprintf(sp->source_key, sizeof sp->source_key, "%s.source", key);
    snprintf(pkey, sizeof pkey, "%s.pipeline", key);
    if (!split || split->kind != TFC_NODE_MAP) {
        char found[128] = "nothing";
        if (split) tfc_node_describe(split, found, sizeof found);
        return tfc_node_error(err, TFC_ERR_CONFIG, split, key, "expected a mapping {source: "
                              "{...}, pipeline: [...]}, found %s", found);
    }
    static const tfc_field split_fields[] = {
        {"source", TFC_F_NODE, 0, NULL, TFC_UNBOUNDED, NULL, "where the elements come from"},
        {"pipeline", TFC_F_NODE, sizeof(const tfc_node *), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
         "stages, run in the order written"},
        {NULL},
    };
    const tfc_node *top[2] = {NULL, NULL};
    tfc_status st = tfc_schema_apply(split_fields, split, key, top, err);
    const tfc_node *pipe = top[1];
    int nst = pipe && pipe->kind == TFC_NODE_SEQ ? pipe->n : 0;
    /* One more slot for the stage the source implies. */
    sp->stages = calloc((size_t)nst + 1, sizeof *sp->stages);
    if (!sp->stages) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    if (top[0] && plan_source(top[0], sp, err)) st = TFC_ERR_CONFIG;
    if (pipe && !tfc_node_is_null(pipe) && pipe->kind != TFC_NODE_SEQ)
        st = tfc_node_error(err, TFC_ERR_CONFIG, pipe, pkey, "expected a list of stages");
    int batched = 0;
    for (int i = 0; i < nst; i++) {
        char ikey[340];
        snprintf(ikey, sizeof ikey, "%s[%d]", pkey, i);
        stage_plan *pl = &sp->stages[sp->n++];
        if (plan_stage(pipe->vals[i], ikey, pl, err)) {
            st = TFC_ERR_CONFIG;
            continue;
        }
        batched |= batches(pl);
        if (pl->op && pl->op->needs_batch && !batched)
            st = tfc_node_error(err, TFC_ERR_CONFIG, pl->at, pl->key, "%s mixes the examples of "
                                "a batch: place it after `batch` (e.g. `- batch: {batch_size: "
                                "128}` then `- map: {op: %s}`)", pl->op->name, pl->op->name);
    }
    return st;
}

tfc_status tfc_source_rename_classes(source *src, const tfc_node *c, const char *key,
                                     tfc_error *err)
{
    if (src->nclasses && src->nclasses != c->n)
        return tfc_node_error(err, TFC_ERR_CONFIG, c, key,
                              "classes: %d names, but the source has %d classes", c->n,
                              src->nclasses);
    const char **names = malloc(sizeof *names * (size_t)c->n);
    if (!names) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    for (int i = 0; i < c->n; i++) names[i] = c->vals[i]->str;
    for (int i = 0; i < src->nclasses; i++) free(src->class_names[i]);
    free(src->class_names);
    src->class_names = NULL;
    src->nclasses = 0;
    tfc_status st = tfc_source_set_classes(src, names, c->n, err);
    free(names);
    return st;
}

/* Where a data-parallel split is dealt among the ranks (tfc_data_options.shard_count): the
 * index of the stage the shard goes before, with *batch the first batch stage's index; -1
 * when the split is left whole (no batch stage or more than one, no endless repeat before
 * it unless shard_finite, a batch the ranks do not divide — the trainer names that one —
 * or a single rank). */
static int shard_point(split_plan *sp, const tfc_data_options *opt, int *batch)
{
    if (!opt || opt->shard_count <= 1) return -1;
    int b = 0, endless = 0;
    while (b < sp->n && !tfc_stage_plan_batch_size(&sp->stages[b]))
        endless |= tfc_stage_plan_repeats_forever(&sp->stages[b++]);
    if (b == sp->n || (!endless && !opt->shard_finite) ||
        *tfc_stage_plan_batch_size(&sp->stages[b]) % opt->shard_count)
        return -1;
    for (int i = b + 1; i < sp->n; i++) /* one batching stage only: it is the global batch */
        if (tfc_stage_plan_batch_size(&sp->stages[i])) return -1;
    int at = b; /* maps and prefetches before the batch run after the shard */
    while (at > 0 && (!strcmp(sp->stages[at - 1].def->name, "map") ||
                      !strcmp(sp->stages[at - 1].def->name, "prefetch")))
        at--;
    *batch = b;
    return at;
}

/* Names the stages [from, n) after the key path of the plan that pushed them, for the
 * profile: data.train.pipeline[2].map -> "pipeline[2].map decode_image". */
static void label_stages(tfc_pipeline *p, int from, const char *key)
{
    size_t k = strlen(p->key);
    const char *rel = !strncmp(key, p->key, k) && key[k] == '.' ? key + k + 1 : key;
    const char *dot = strrchr(rel, '.');
    int len = dot ? (int)(dot - rel) : 0;
    for (int i = from; i < p->n; i++) {
        stage *s = p->stages[i];
        char own[sizeof s->label];
        snprintf(own, sizeof own, "%s", s->label);
        if (len) snprintf(s->label, sizeof s->label, "%.*s.%s", len, rel, own);
    }
}

/* A source's file that cannot be opened: the hint names the key that gave its path, and where
 * a relative path was looked for. */
static void missing_file_hint(const split_plan *sp, const tfc_data_options *opt, tfc_error *err)
{
    const tfc_node *src = sp->source_node;
    if (!src || src->kind != TFC_NODE_MAP || !err || err->count != 1 || !err->file[0] ||
        (err->code != TFC_ERR_USAGE && err->code != TFC_ERR_IO))
        return;
    for (int i = 0; i < src->n; i++) {
        const tfc_node *v = src->vals[i];
        for (int j = 0; j < (v->kind == TFC_NODE_SEQ ? v->n : 1); j++) {
            const tfc_node *item = v->kind == TFC_NODE_SEQ ? v->vals[j] : v;
            if (item->kind != TFC_NODE_SCALAR || !*item->str) continue;
            char *path = tfc_data_path_join(opt ? opt->base_dir : NULL, item->str);
            const int same = path && !strcmp(path, err->file);
            free(path);
            if (!same) continue;
            if (item->str[0] != '/' && opt && opt->base_dir)
                tfc_error_hint(err, "%s.%s at %s:%d:%d names it; a relative path is read from "
                               "%s, the solver's folder", sp->source_key, src->keys[i]->str,
                               tfc_node_file(item), item->line, item->col, opt->base_dir);
            else
                tfc_error_hint(err, "%s.%s at %s:%d:%d names it", sp->source_key,
                               src->keys[i]->str, tfc_node_file(item), item->line, item->col);
            return;
        }
    }
}

/* Opens the planned source and pushes its stages (phase 2). */
static tfc_pipeline *build(split_plan *sp, const tfc_data_options *opt, tfc_error *err)
{
    int batch = -1, at = shard_point(sp, opt, &batch);
    source *src;
    if (sp->source->classes_offset)
        memcpy((char *)sp->source_args + sp->source->classes_offset, &sp->classes,
               sizeof sp->classes);
    if (sp->source->open(sp->source_args, opt, sp->source_key, &src, err)) {
        missing_file_hint(sp, opt, err);
        return NULL;
    }
    if (sp->classes && !sp->source->classes_offset &&
        tfc_source_rename_classes(src, sp->classes, sp->source_key, err)) {
        tfc_source_free(src);
        return NULL;
    }
    tfc_pipeline *p = tfc_pipeline_new(src, opt, err);
    for (int i = 0; p && i < sp->n; i++) {
        if (i == at) {
            int *size = tfc_stage_plan_batch_size(&sp->stages[batch]);
            *size /= opt->shard_count;
            if (tfc_pipeline_shard_blocks(p, opt->shard_count, opt->shard_index, *size, err)) {
                tfc_pipeline_free(p);
                return NULL;
            }
            p->hidden++; /* the stages after it keep their random keys */
            p->shard_count = opt->shard_count;
        }
        int before = p->n;
        if (sp->stages[i].def->push(p, &sp->stages[i], err)) {
            tfc_pipeline_free(p);
            p = NULL;
        } else {
            label_stages(p, before, sp->stages[i].key);
        }
    }
    return p;
}

/* ---- the public entry points --------------------------------------------------------------- */

tfc_status tfc_pipeline_plan(const tfc_node *split, const tfc_data_options *opt,
                             tfc_data_plan *out, tfc_error *err)
{
    memset(out, 0, sizeof *out);
    split_plan sp;
    tfc_status st = plan_split(split, opt, &sp, err);
    for (int i = 0; !st && i < sp.n; i++)
        if (sp.stages[i].def->plan) sp.stages[i].def->plan(&sp.stages[i], out);
    split_plan_free(&sp);
    return st;
}

tfc_pipeline *tfc_pipeline_from_config(const tfc_node *split, const tfc_data_options *opt,
                                       tfc_error *err)
{
    split_plan sp;
    tfc_pipeline *p = plan_split(split, opt, &sp, err) ? NULL : build(&sp, opt, err);
    split_plan_free(&sp);
    return p;
}

tfc_pipeline *tfc_pipeline_from_yaml(const char *source_yaml, const tfc_data_options *opt,
                                     tfc_error *err)
{
    tfc_doc *doc = tfc_doc_load_string(source_yaml, strlen(source_yaml), "<source>", err);
    if (!doc) return NULL;
    const char *key = opt && opt->key ? opt->key : "data";
    stage_plan implied;
    split_plan sp = {.stages = &implied};
    memset(&implied, 0, sizeof implied);
    snprintf(sp.source_key, sizeof sp.source_key, "%s.source", key);
    tfc_pipeline *p = plan_source(tfc_doc_root(doc), &sp, err) ? NULL : build(&sp, opt, err);
    free(implied.args);
    free(sp.source_args);
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
    int before = p->n;
    if (!st) st = pl.def->push(p, &pl, err);
    if (!st) label_stages(p, before, pl.key);
    free(pl.args);
    tfc_doc_free(doc);
    return st;
}
