/* What every source shares: freeing (with its class names), class names, the label range
 * check, the `on_error` choices, resolving a source's files against the solver's folder, and
 * expanding a `files:` list of paths and globs, and the names of several inputs and labels. */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fileio.h"
#include "data/internal.h"

const char *const tfc_data_on_error_names[] = {
    [ON_ERROR_FAIL] = "fail", [ON_ERROR_SKIP] = "skip", [ON_ERROR_COUNT] = NULL};

void tfc_source_name_skip(source *s, const char *where)
{
    if (s->nskip_names >= TFC_SKIP_NAMES) return;
    size_t n = strlen(s->skip_names);
    snprintf(s->skip_names + n, sizeof s->skip_names - n, "%s%s", n ? ", " : "", where);
    s->nskip_names++;
}

void tfc_source_free(source *s)
{
    if (!s) return;
    for (int i = 0; i < s->nclasses; i++) free(s->class_names[i]);
    free(s->class_names);
    s->ops->free(s);
}

tfc_status tfc_source_set_classes(source *s, const char *const *names, int n, tfc_error *err)
{
    s->class_names = calloc((size_t)n + 1, sizeof *s->class_names);
    if (!s->class_names) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        s->class_names[i] = strdup(names[i]);
        if (!s->class_names[i]) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        s->nclasses = i + 1;
    }
    return TFC_OK;
}

int tfc_data_labels_in_range(const tfc_tensor *labels, int num_classes, int64_t *bad_value)
{
    if (num_classes <= 0 || !labels->data || !tfc_dtype_is_int(labels->dtype)) return 1;
    int64_t n = tfc_shape_numel(&labels->shape);
    for (int64_t i = 0; i < n; i++) {
        double v = tfc_value_get(labels->data, labels->dtype, i);
        if (v < 0 || v >= num_classes) {
            *bad_value = (int64_t)v;
            return 0;
        }
    }
    return 1;
}

char *tfc_data_path_join(const char *base_dir, const char *path)
{
    size_t lp = strlen(path);
    if (path[0] == '/' || !base_dir || !*base_dir) {
        char *r = malloc(lp + 1);
        if (r) memcpy(r, path, lp + 1);
        return r;
    }
    size_t lb = strlen(base_dir);
    char *r = malloc(lb + lp + 2);
    if (!r) return NULL;
    memcpy(r, base_dir, lb);
    r[lb] = '/';
    memcpy(r + lb + 1, path, lp + 1);
    return r;
}

tfc_status tfc_data_resolve(const tfc_data_options *opt, const char **path, char **owned,
                            tfc_error *err)
{
    *owned = NULL;
    if (!*path) return TFC_OK;
    *owned = tfc_data_path_join(opt ? opt->base_dir : NULL, *path);
    if (!*owned) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    *path = *owned;
    return TFC_OK;
}

/* ---- `files:` lists ---------------------------------------------------------------------- */

tfc_status tfc_data_check_files(const tfc_node *f, const char *key, tfc_error *err)
{
    int n = f->kind == TFC_NODE_SEQ ? f->n : 1;
    if (f->kind == TFC_NODE_MAP || n == 0)
        return tfc_node_error(err, TFC_ERR_CONFIG, f, key, "expected a path or a list of paths");
    tfc_status st = TFC_OK;
    for (int i = 0; i < n; i++) {
        const tfc_node *item = f->kind == TFC_NODE_SEQ ? f->vals[i] : f;
        if (item->kind != TFC_NODE_SCALAR || !*item->str)
            st = tfc_node_error(err, TFC_ERR_CONFIG, item, key, "expected a path");
    }
    return st;
}

static int path_push(tfc_path_list *l, const char *s)
{
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 16;
        char **v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return -1;
        l->v = v;
        l->cap = cap;
    }
    if (!(l->v[l->n] = strdup(s))) return -1;
    l->n++;
    return 0;
}

void tfc_path_list_free(tfc_path_list *l)
{
    for (int i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    *l = (tfc_path_list){0};
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

tfc_status tfc_data_expand_files(const tfc_node *files, const tfc_node *exclude,
                                 const tfc_data_options *opt, const char *key,
                                 tfc_path_list *out, tfc_error *err)
{
    const tfc_node *f = files;
    int n = f->kind == TFC_NODE_SEQ ? f->n : 1;
    for (int i = 0; i < n; i++) {
        const tfc_node *item = f->kind == TFC_NODE_SEQ ? f->vals[i] : f;
        char *pattern = tfc_data_path_join(opt ? opt->base_dir : NULL, item->str);
        if (!pattern) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        int has_glob = strpbrk(item->str, "*?[") != NULL;
        if (!has_glob) {
            int r = excluded(exclude, pattern) ? 0 : path_push(out, pattern);
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
            if (!excluded(exclude, g.gl_pathv[k]) && path_push(out, g.gl_pathv[k])) {
                globfree(&g);
                return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
            }
        globfree(&g);
    }
    if (out->n == 0)
        return tfc_node_error(err, TFC_ERR_CONFIG, f, key, "no files left after `exclude`");
    return TFC_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char **tfc_data_list_dir(const char *dir, int (*keep_file)(const char *name), int *n,
                         tfc_error *err)
{
    DIR *d = opendir(dir);
    *n = 0;
    if (!d) {
        tfc_error_set(err, tfc_open_status(errno), "cannot open folder %s: %m", dir);
        return NULL;
    }
    char **v = NULL;
    int cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        size_t dl = strlen(dir), nl = strlen(de->d_name);
        char *full = malloc(dl + nl + 2);
        if (!full) goto nomem;
        snprintf(full, dl + nl + 2, "%s/%s", dir, de->d_name);
        struct stat sb;
        int ok = stat(full, &sb) == 0 && (!keep_file ? S_ISDIR(sb.st_mode)
                                                     : S_ISREG(sb.st_mode) && keep_file(de->d_name));
        free(full);
        if (!ok) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nv = realloc(v, (size_t)cap * sizeof *nv);
            if (!nv) goto nomem;
            v = nv;
        }
        if (!(v[*n] = malloc(nl + 1))) goto nomem;
        memcpy(v[(*n)++], de->d_name, nl + 1);
    }
    closedir(d);
    if (*n) qsort(v, (size_t)*n, sizeof *v, cmp_str);
    if (!v) v = calloc(1, sizeof *v);
    return v;
nomem:
    closedir(d);
    for (int i = 0; i < *n; i++) free(v[i]);
    free(v);
    tfc_error_set(err, TFC_ERR_NOMEM, "out of memory listing %s", dir);
    return NULL;
}

void tfc_data_free_names(char **v, int n)
{
    for (int i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

/* `dir` and the folders under it (hidden ones left out, symbolic links not followed, as
 * os.walk walks), appended to out; deeper than 64 is an error. */
static tfc_status walk_dirs(const char *dir, int depth, tfc_path_list *out, tfc_error *err)
{
    if (depth > 64)
        return tfc_error_set(err, TFC_ERR_DATA, "%s: folders nested more than 64 deep", dir);
    if (path_push(out, dir)) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    DIR *d = opendir(dir);
    if (!d) return tfc_error_set(err, tfc_open_status(errno), "cannot open folder %s: %m", dir);
    tfc_status st = TFC_OK;
    struct dirent *de;
    while (!st && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        size_t n = strlen(dir) + strlen(de->d_name) + 2;
        char *full = malloc(n);
        if (!full) {
            st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
            break;
        }
        snprintf(full, n, "%s/%s", dir, de->d_name);
        struct stat sb;
        if (lstat(full, &sb) == 0 && S_ISDIR(sb.st_mode)) st = walk_dirs(full, depth + 1, out, err);
        free(full);
    }
    closedir(d);
    return st;
}

tfc_status tfc_data_walk_files(const char *dir, int (*keep_file)(const char *name),
                               tfc_path_list *out, tfc_error *err)
{
    /* the folder's files, then its sub-folders' in the byte order of their paths, as Keras
     * sorts os.walk's folders */
    tfc_path_list dirs = {0};
    tfc_status st = walk_dirs(dir, 0, &dirs, err);
    if (!st) qsort(dirs.v, (size_t)dirs.n, sizeof *dirs.v, cmp_str);
    for (int k = 0; k < dirs.n && !st; k++) {
        int nf;
        char **files = tfc_data_list_dir(dirs.v[k], keep_file, &nf, err);
        if (!files) st = err && err->code ? err->code : TFC_ERR_IO;
        for (int i = 0; i < nf && !st; i++) {
            size_t n = strlen(dirs.v[k]) + strlen(files[i]) + 2;
            char *p = malloc(n);
            if (p) snprintf(p, n, "%s/%s", dirs.v[k], files[i]);
            if (!p || path_push(out, p)) st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
            free(p);
        }
        tfc_data_free_names(files, nf);
    }
    tfc_path_list_free(&dirs);
    return st;
}

char **tfc_data_class_dirs(const char *directory, const tfc_node *classes, const char *key,
                           int *n, tfc_error *err)
{
    int nd;
    char **dirs = tfc_data_list_dir(directory, NULL, &nd, err);
    if (!dirs || !classes) {
        *n = nd;
        return dirs;
    }
    char **picked = calloc((size_t)classes->n + 1, sizeof *picked);
    tfc_status st = picked ? TFC_OK : tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    for (int i = 0; i < classes->n && !st; i++) {
        const char *name = classes->vals[i]->str;
        int found = 0, twice = 0;
        for (int k = 0; k < nd; k++) found |= !strcmp(dirs[k], name);
        for (int k = 0; k < i; k++) twice |= !strcmp(picked[k], name);
        if (!found || twice) {
            char list[1024] = "";
            const char **names = calloc((size_t)nd + 1, sizeof *names); /* NULL-ended */
            for (int k = 0; names && k < nd; k++) names[k] = dirs[k];
            if (names) tfc_join_names(list, sizeof list, names);
            free(names);
            char ckey[352];
            snprintf(ckey, sizeof ckey, "%s.classes", key);
            st = tfc_node_error(err, TFC_ERR_CONFIG, classes->vals[i], ckey, twice
                                ? "'%s' is named twice" : "'%s' is no class folder of %s (its "
                                "folders: %s); classes picks and orders the folders, as Keras's "
                                "class_names", name, directory, nd ? list : "none");
        } else if (!(picked[i] = strdup(name))) {
            st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        }
    }
    tfc_data_free_names(dirs, nd);
    if (st) {
        tfc_data_free_names(picked, classes->n);
        return NULL;
    }
    *n = classes->n;
    return picked;
}

tfc_status tfc_data_class_folders(source *s, const char *directory,
                                  int (*keep_file)(const char *name), const char *kind,
                                  int num_classes, const tfc_node *classes_node,
                                  const char *key,
                                  int (*add)(source *s, const char *dir, const char *name,
                                             int32_t label),
                                  tfc_error *err)
{
    int nc;
    char **classes = tfc_data_class_dirs(directory, classes_node, key, &nc, err);
    if (!classes) return err && err->code ? err->code : TFC_ERR_IO;
    tfc_status st = TFC_OK;
    int64_t added = 0;
    if (nc == 0) st = tfc_error_set(err, TFC_ERR_DATA, "%s: no class sub-folders", directory);
    if (!st && num_classes > 0 && nc > num_classes)
        st = tfc_error_set(err, TFC_ERR_DATA, "%s: %d class folders but num_classes is %d",
                           directory, nc, num_classes);
    for (int c = 0; c < nc && !st; c++) {
        size_t dl = strlen(directory) + strlen(classes[c]) + 2;
        char *sub = malloc(dl);
        if (!sub) {
            st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
            break;
        }
        snprintf(sub, dl, "%s/%s", directory, classes[c]);
        tfc_path_list files = {0};
        st = tfc_data_walk_files(sub, keep_file, &files, err);
        for (int i = 0; i < files.n && !st; i++, added++)
            if (add(s, NULL, files.v[i], c))
                st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        tfc_path_list_free(&files);
        free(sub);
    }
    if (!st && added == 0)
        st = tfc_error_set(err, TFC_ERR_DATA, "%s: no %s files in its class folders", directory,
                           kind);
    if (!st) st = tfc_source_set_classes(s, (const char *const *)classes, nc, err);
    tfc_data_free_names(classes, nc);
    return st;
}

static const char *const split_parts[] = {
    [SPLIT_PART_TRAIN] = "train", [SPLIT_PART_TEST] = "test", [SPLIT_PART_COUNT] = NULL};

static const tfc_field split_fields[] = {
    {"every", TFC_F_INT, offsetof(tfc_split_rule, every), NULL, 2, 1 << 30, NULL,
     "one record in `every` goes to the test part"},
    {"part", TFC_F_ENUM, offsetof(tfc_split_rule, part), NULL, TFC_UNBOUNDED, split_parts,
     "which part this pipeline reads"},
    {"offset", TFC_F_INT, offsetof(tfc_split_rule, offset), "0", 0, 1 << 30, NULL,
     "record r is test when r % every == offset"},
    {NULL},
};

tfc_status tfc_data_split_read(const tfc_node *split, const char *key, tfc_split_rule *out,
                               tfc_error *err)
{
    *out = (tfc_split_rule){0};
    if (!split || tfc_node_is_null(split)) return TFC_OK;
    char skey[352];
    snprintf(skey, sizeof skey, "%s.split", key);
    tfc_split_rule r;
    if (tfc_schema_apply(split_fields, split, skey, &r, err)) return TFC_ERR_CONFIG;
    if (r.offset >= r.every)
        return tfc_node_error(err, TFC_ERR_CONFIG, split, skey, "offset %d must be below every "
                              "(%d)", r.offset, r.every);
    *out = r;
    return TFC_OK;
}

int tfc_data_split_keeps(const tfc_split_rule *rule, int64_t r)
{
    if (rule->every <= 0) return 1;
    const int in_test = r % rule->every == rule->offset;
    return rule->part == SPLIT_PART_TEST ? in_test : !in_test;
}

/* ---- several inputs and labels ------------------------------------------------------------- */

static int keras_input_name(const char *s)
{
    if (!(s[0] == '_' || (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
        return 0;
    size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
    return s[n] == '\0' && n < 64;
}

/* The names of several inputs or labels (`what` "input" or "label", `a` its article, one
 * per `of` of the model, at most max), none in `taken` (a mapping, or NULL). */
static tfc_status check_names(const tfc_node *map, const char *key, const char *a,
                              const char *what, const char *of, int max, const tfc_node *taken,
                              tfc_error *err)
{
    tfc_status st = TFC_OK;
    if (map->n < 1 || map->n > max)
        return tfc_node_error(err, TFC_ERR_CONFIG, map, key, "%d %ss: give 1 to %d, one per "
                              "%s of the model", map->n, what, max, of);
    for (int i = 0; i < map->n; i++) {
        const char *name = map->keys[i]->str;
        char k[400];
        snprintf(k, sizeof k, "%s.%s", key, name);
        int in_taken = 0;
        for (int j = 0; taken && taken->kind == TFC_NODE_MAP && j < taken->n; j++)
            in_taken |= !strcmp(taken->keys[j]->str, name);
        if (!keras_input_name(name))
            st = tfc_node_error(err, TFC_ERR_CONFIG, map->keys[i], k, "'%s' is not %s %s name "
                                "(a letter or _, then letters, digits or _, at most 63)", name,
                                a, what);
        else if (!strcmp(name, "features") || !strcmp(name, "labels") ||
                 !strcmp(name, "lengths"))
            st = tfc_node_error(err, TFC_ERR_CONFIG, map->keys[i], k, "'%s' names a component "
                                "of every element: give the %s another name", name, what);
        else if (in_taken)
            st = tfc_node_error(err, TFC_ERR_CONFIG, map->keys[i], k, "'%s' names an input "
                                "too: give the %s another name (a Keras model's inputs and "
                                "outputs are layers, of names unique in it)", name, what);
    }
    return st;
}

tfc_status tfc_data_check_inputs(const tfc_node *map, const char *key, tfc_error *err)
{
    return check_names(map, key, "an", "input", "input", TFC_MAX_INPUTS, NULL, err);
}

tfc_status tfc_data_check_labels(const tfc_node *map, const tfc_node *inputs, const char *key,
                                 tfc_error *err)
{
    return check_names(map, key, "a", "label", "output", TFC_MAX_LABELS, inputs, err);
}
