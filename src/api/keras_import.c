/* Keras models into tfc (SPEC §3 tfc-import): the input opened (a .keras archive, JSON, a
 * Keras 2 .h5), its configuration made a model file (keras_config.c), tfc's model built from
 * that file, and Keras's weights put into the model's weights by name.
 *
 * The weights. Keras 3 stores a layer's variables as `layers/<its class in snake case,
 * numbered among its siblings>/vars/<i>`, i in creation order (trainable then not), and the
 * variables of the layers it owns under their attribute: `cell/` (a recurrent layer's cell:
 * tfc drops its segment), `cell/cells/<lstm_cell, gru_cell, lstm_cell_1>/` (StackedRNNCells:
 * tfc names them so), `forward_layer/` and `backward_layer/` (Bidirectional: tfc's
 * forward_<type>), `layers/<...>/` (Pipeline, a Sequential inside), and any other attribute
 * (`layer/`, `query_dense/`, `token_embedding/`) under the name its `vars` group records,
 * which is the Keras layer's name and so tfc's. Each `vars` group thus maps to a prefix of
 * tfc's weight names, and its tensors to the model's weights of that prefix in order, shape
 * by shape. Keras 2 `.h5` files name each weight (`dense/kernel:0`); the name less `:0` and
 * the cell's segment is tfc's. Every tensor must find its weight and every weight a tensor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/keras_config.h"
#include "api/keras_import.h"
#include "core/config.h"
#include "core/fileio.h"
#include "core/hdf5.h"
#include "core/safetensors.h"
#include "core/zip.h"
#include "device/device.h"
#include "graph/model_internal.h"

#define MAX_INPUT_BYTES ((size_t)8 << 30)  /* a .keras or .h5 file read whole */
#define MAX_CONFIG_BYTES ((size_t)64 << 20) /* config.json inside an archive */

#define sval tfc_keras_str

/* ---- weights ------------------------------------------------------------------------------- */

typedef struct weight {
    char name[256];     /* layer/variable, tfc's (SPEC §5) */
    tfc_param *p;
    char from[256];     /* the tensor it took, "" when none yet */
} weight;

typedef struct wmap {
    tfc_model *m;
    weight *w;
    int n;
    const tfc_h5_file *h5;
    const char *file;   /* the weights' file, for messages */
    const tfc_node *layers; /* the configuration's layers (NULL: a Keras 2 file) */
    tfc_error *err;
    float *buf;         /* scratch for one tensor: floats, then its bytes as read */
    size_t cap;
    const tfc_h5_object *skipped[64]; /* tensors saved twice, left out */
    int nskipped;
} wmap;

static tfc_status gather_weights(wmap *w)
{
    tfc_model *m = w->m;
    for (int i = 0; i < m->nlayers; i++)
        for (int p = 0; p < m->layers[i].nparams; p++)
            w->n += !m->layers[i].params[p].constant && !m->layers[i].params[p].shared;
    w->w = calloc((size_t)(w->n ? w->n : 1), sizeof *w->w);
    if (!w->w) return tfc_error_set(w->err, TFC_ERR_NOMEM, "out of memory");
    int k = 0;
    for (int i = 0; i < m->nlayers; i++) {
        tfc_layer *l = &m->layers[i];
        for (int p = 0; p < l->nparams; p++) {
            if (l->params[p].constant || l->params[p].shared) continue; /* the layer's, once */
            snprintf(w->w[k].name, sizeof w->w[k].name, "%s/%s", l->name, l->params[p].name);
            w->w[k++].p = &l->params[p];
        }
    }
    return TFC_OK;
}

static void shape_text(const tfc_shape *s, char *buf, size_t size)
{
    size_t o = (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < s->ndim && o < size; i++)
        o += (size_t)snprintf(buf + o, size - o, "%s%lld", i ? ", " : "", (long long)s->dim[i]);
    if (o < size) snprintf(buf + o, size - o, s->ndim == 1 ? ",)" : ")");
}

/* Keras's scalar (a Normalization's count) is a one-element weight in tfc. */
static int same_shape(const tfc_shape *a, const tfc_shape *b)
{
    if (tfc_shape_equal(a, b)) return 1;
    int64_t na = 1, nb = 1;
    for (int i = 0; i < a->ndim; i++) na *= a->dim[i];
    for (int i = 0; i < b->ndim; i++) nb *= b->dim[i];
    return na == 1 && nb == 1 && (a->ndim == 0 || b->ndim == 0);
}

/* Puts a tensor into the weight called `name`. */
static tfc_status assign(wmap *w, const char *name, const tfc_h5_object *t)
{
    weight *x = NULL;
    for (int i = 0; i < w->n && !x; i++)
        if (!strcmp(w->w[i].name, name)) x = &w->w[i];
    char ts[96], ws[96];
    shape_text(&t->shape, ts, sizeof ts);
    if (!x)
        return tfc_error_set(w->err, TFC_ERR_FORMAT, "%s: '%s' %s is the weight %s, which "
                             "tfc's model does not have", w->file, t->path, ts, name);
    shape_text(&x->p->shape, ws, sizeof ws);
    if (x->from[0])
        return tfc_error_set(w->err, TFC_ERR_FORMAT, "%s: '%s' and '%s' are both the weight %s",
                             w->file, x->from, t->path, name);
    if (!t->is_dataset || !same_shape(&t->shape, &x->p->shape))
        return tfc_error_set(w->err, TFC_ERR_FORMAT, "%s: '%s' %s is the weight %s, which is "
                             "%s in tfc's model", w->file, t->path, ts, name, ws);
    /* the file's bytes need not be aligned: copy them, then convert */
    size_t need = (size_t)t->numel * (4 + tfc_dtype_size(t->dtype));
    if (need > w->cap) {
        float *b = realloc(w->buf, need);
        if (!b) return tfc_error_set(w->err, TFC_ERR_NOMEM, "out of memory");
        w->buf = b;
        w->cap = need;
    }
    void *raw = w->buf + t->numel;
    if (t->nbytes) memcpy(raw, t->data, t->nbytes);
    tfc_values_convert(w->buf, TFC_F32, raw, t->dtype, t->numel);
    tfc_model_param_upload(w->m, x->p, w->buf);
    snprintf(x->from, sizeof x->from, "%s", t->path);
    return TFC_OK;
}

/* The object at `dir/name`, or NULL. */
static const tfc_h5_object *child(const tfc_h5_file *h5, const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s%s%s", dir, dir[0] ? "/" : "", name);
    return tfc_h5_find(h5, path);
}

/* The Keras name a layer's `vars` group records, or NULL. */
static const char *vars_name(const tfc_h5_file *h5, const char *dir)
{
    const tfc_h5_object *v = child(h5, dir, "vars");
    const tfc_h5_attr *a = v ? tfc_h5_attr_find(v, "name") : NULL;
    return a && a->n_strings == 1 ? a->strings[0] : NULL;
}

/* A direct member of group `dir`: its last segment, or NULL. */
static const char *member(const tfc_h5_object *o, const char *dir)
{
    size_t n = strlen(dir);
    if (n && (strncmp(o->path, dir, n) || o->path[n] != '/')) return NULL;
    const char *rest = o->path + n + (n ? 1 : 0);
    return rest[0] && !strchr(rest, '/') ? rest : NULL;
}

/* The config of the layer called `name` in a list of serialized layers, or NULL. */
static const tfc_node *layer_config(const tfc_node *layers, const char *name)
{
    for (int i = 0; layers && layers->kind == TFC_NODE_SEQ && i < layers->n; i++) {
        const tfc_node *cfg = tfc_node_get(layers->vals[i], "config");
        const char *n = sval(cfg, "name");
        if (n && !strcmp(n, name)) return cfg;
    }
    return NULL;
}

/* Whether dataset `t` holds the same bytes as another dataset under `top` (SpectralNormalization
 * saves its layer's kernel twice: as its own variable and as the layer's). */
static int duplicated(const tfc_h5_file *h5, const char *top, const tfc_h5_object *t)
{
    size_t n = strlen(top);
    for (int i = 0; i < tfc_h5_count(h5); i++) {
        const tfc_h5_object *o = tfc_h5_object_at(h5, i);
        if (o == t || !o->is_dataset || strncmp(o->path, top, n) || o->nbytes != t->nbytes ||
            !tfc_shape_equal(&o->shape, &t->shape) || o->dtype != t->dtype)
            continue;
        if (!t->nbytes || !memcmp(o->data, t->data, t->nbytes)) return 1;
    }
    return 0;
}

static int count_prefix(const wmap *w, const char *prefix)
{
    size_t n = strlen(prefix);
    int k = 0;
    for (int i = 0; i < w->n; i++)
        k += !strncmp(w->w[i].name, prefix, n) && w->w[i].name[n] == '/' &&
             !strchr(w->w[i].name + n + 1, '/');
    return k;
}

/* The variables of one `vars` group (0, 1, ... in creation order) into the model's weights
 * named `prefix/<variable>`, in the model's order. */
static tfc_status assign_vars(wmap *w, const char *dir, const char *prefix, const char *top)
{
    char vdir[1024];
    snprintf(vdir, sizeof vdir, "%s%svars", dir, dir[0] ? "/" : "");
    const tfc_h5_object *t[256];
    int nt = 0;
    for (;; nt++) {
        char idx[16];
        snprintf(idx, sizeof idx, "%d", nt);
        const tfc_h5_object *o = child(w->h5, vdir, idx);
        if (!o) break;
        if (nt == 256)
            return tfc_error_set(w->err, TFC_ERR_FORMAT, "%s: '%s': more than 256 variables",
                                 w->file, vdir);
        t[nt] = o;
    }
    if (!nt) return TFC_OK;
    int want = count_prefix(w, prefix);
    if (want < nt) { /* leave out what is saved twice */
        int k = 0;
        for (int i = 0; i < nt; i++) {
            if (nt - (i - k) > want && w->nskipped < 64 && duplicated(w->h5, top, t[i]))
                w->skipped[w->nskipped++] = t[i];
            else
                t[k++] = t[i];
        }
        nt = k;
    }
    if (want != nt) {
        char ts[96];
        shape_text(&t[0]->shape, ts, sizeof ts);
        return tfc_error_set(w->err, TFC_ERR_FORMAT, "%s: '%s' holds %d variables (the first "
                             "%s) where tfc's model has %d weights %s/...", w->file, vdir, nt,
                             ts, want, prefix);
    }
    size_t n = strlen(prefix);
    int k = 0;
    for (int i = 0; i < w->n && k < nt; i++) {
        const char *name = w->w[i].name;
        if (strncmp(name, prefix, n) || name[n] != '/' || strchr(name + n + 1, '/')) continue;
        tfc_status s = assign(w, name, t[k++]);
        if (s) return s;
    }
    return TFC_OK;
}

static tfc_status walk_layer(wmap *w, const char *dir, const char *prefix,
                             const tfc_node *cfg, const char *top, int depth);
static tfc_status walk_members(wmap *w, const char *dir, const char *prefix,
                               const tfc_node *layers, int by_group, const char *top,
                               int depth);

/* A functional model among a model's layers: Keras saves it as `functional` (`functional_1`,
 * ... in the order of the layers), its `vars` empty and named as the model, its layers under
 * `layers`; tfc writes its layers in place (keras_config.c), named as Keras's variable paths
 * name them (a functional model's layers are built outside any scope of its own). Its config
 * among `layers`, or NULL when `dir` is no such group. */
static int is_model(const tfc_node *l)
{
    const char *cls = sval(l, "class_name");
    return cls && (!strcmp(cls, "Functional") || !strcmp(cls, "Model"));
}

static const tfc_node *nested_model(const wmap *w, const char *dir, const char *group,
                                    const tfc_node *layers)
{
    if (strncmp(group, "functional", 10) || child(w->h5, dir, "vars/0") ||
        !child(w->h5, dir, "layers"))
        return NULL;
    const char *name = vars_name(w->h5, dir);
    for (int i = 0; name && layers && layers->kind == TFC_NODE_SEQ && i < layers->n; i++) {
        const tfc_node *cfg = tfc_node_get(layers->vals[i], "config");
        const char *n = sval(cfg, "name");
        if (is_model(layers->vals[i]) && n && !strcmp(n, name)) return cfg;
    }
    int k = 0; /* else functional_k is the (k+1)th functional model of the list */
    if (group[10]) {
        if (group[10] != '_' || !group[11]) return NULL;
        char *end;
        long v = strtol(group + 11, &end, 10);
        if (*end || v < 1 || v > 1 << 20) return NULL;
        k = (int)v;
    }
    for (int i = 0; layers && layers->kind == TFC_NODE_SEQ && i < layers->n; i++)
        if (is_model(layers->vals[i]) && k-- == 0)
            return tfc_node_get(layers->vals[i], "config");
    return NULL;
}

/* The layers of a functional model among `layers` when `dir` is its group: walked under
 * `prefix`, the model's own (1), else 0. */
static int walk_nested(wmap *w, const tfc_h5_object *o, const char *group, const char *prefix,
                       const tfc_node *layers, const char *top, int depth, tfc_status *s)
{
    const tfc_node *cfg = nested_model(w, o->path, group, layers);
    if (!cfg) return 0;
    *s = walk_members(w, child(w->h5, o->path, "layers")->path, prefix,
                      tfc_node_get(cfg, "layers"), 0, top, depth + 1);
    return 1;
}

/* The members of `dir` each under its Keras name (vars attribute), or its group name when
 * `by_group` (StackedRNNCells' cells, which tfc names by type and place as Keras's groups). */
static tfc_status walk_members(wmap *w, const char *dir, const char *prefix,
                               const tfc_node *layers, int by_group, const char *top,
                               int depth)
{
    for (int i = 0; i < tfc_h5_count(w->h5); i++) {
        const tfc_h5_object *o = tfc_h5_object_at(w->h5, i);
        const char *g = member(o, dir);
        if (!g || o->is_dataset) continue;
        const char *name = by_group ? g : vars_name(w->h5, o->path);
        if (!name) name = g;
        char p[1024];
        snprintf(p, sizeof p, "%s%s%s", prefix, prefix[0] ? "/" : "", name);
        tfc_status s = TFC_OK;
        if (depth > 32)
            return tfc_error_set(w->err, TFC_ERR_FORMAT, "%s: '%s': layers nested too deep",
                                 w->file, o->path);
        if (!(!by_group && walk_nested(w, o, g, prefix, layers, top, depth, &s)))
            s = walk_layer(w, o->path, p, layer_config(layers, name), top, depth + 1);
        if (s) return s;
    }
    return TFC_OK;
}

/* One layer's group: its own variables, then the layers it holds (module comment). */
static tfc_status walk_layer(wmap *w, const char *dir, const char *prefix,
                             const tfc_node *cfg, const char *top, int depth)
{
    if (depth > 32)
        return tfc_error_set(w->err, TFC_ERR_FORMAT, "%s: '%s': layers nested too deep",
                             w->file, dir);
    tfc_status s = assign_vars(w, dir, prefix, top);
    for (int i = 0; !s && i < tfc_h5_count(w->h5); i++) {
        const tfc_h5_object *o = tfc_h5_object_at(w->h5, i);
        const char *k = member(o, dir);
        if (!k || o->is_dataset || !strcmp(k, "vars")) continue;
        const tfc_node *inner = tfc_node_get(cfg, "layer");
        char p[1024];
        if (!strcmp(k, "cell")) {
            const tfc_node *cell = tfc_node_get(tfc_node_get(cfg, "cell"), "config");
            if (child(w->h5, o->path, "cells"))
                s = walk_members(w, child(w->h5, o->path, "cells")->path, prefix, NULL, 1, top,
                                 depth);
            else
                s = walk_layer(w, o->path, prefix, cell, top, depth + 1);
        } else if (!strcmp(k, "forward_layer") || !strcmp(k, "backward_layer")) {
            char type[96];
            const char *cls = sval(inner, "class_name");
            const char *vn = vars_name(w->h5, o->path);
            if (cls) tfc_snake_case(tfc_keras_type(cls), type, sizeof type);
            else snprintf(type, sizeof type, "%s", vn && strchr(vn, '_') ? strchr(vn, '_') + 1
                                                                         : "layer");
            snprintf(p, sizeof p, "%s/%s_%s", prefix, k[0] == 'f' ? "forward" : "backward",
                     type);
            s = walk_layer(w, o->path, p, tfc_node_get(inner, "config"), top, depth + 1);
        } else if (!strcmp(k, "layers")) {
            s = walk_members(w, o->path, prefix, tfc_node_get(cfg, "layers"), 0, top, depth);
        } else {
            const char *name = vars_name(w->h5, o->path);
            snprintf(p, sizeof p, "%s/%s", prefix, name ? name : k);
            s = walk_layer(w, o->path, p,
                           !strcmp(k, "layer") ? tfc_node_get(inner, "config") : NULL, top,
                           depth + 1);
        }
    }
    return s;
}

/* Keras 3's layout (`layers/<...>/vars/<i>`, .keras archives and .weights.h5 files). */
static tfc_status map_keras3(wmap *w)
{
    for (int i = 0; i < tfc_h5_count(w->h5); i++) {
        const tfc_h5_object *o = tfc_h5_object_at(w->h5, i);
        if (!member(o, "layers") || o->is_dataset) continue;
        const char *name = vars_name(w->h5, o->path);
        if (!name) name = member(o, "layers");
        tfc_status s = TFC_OK;
        if (!walk_nested(w, o, member(o, "layers"), "", w->layers, o->path, 0, &s))
            s = walk_layer(w, o->path, name, layer_config(w->layers, name), o->path, 0);
        if (s) return s;
    }
    return TFC_OK;
}

/* A recurrent cell's own segment of a variable path: lstm_cell, gru_cell_2. */
static int is_cell_segment(const char *seg, size_t len)
{
    for (size_t i = 0; i + 5 <= len; i++) {
        if (memcmp(seg + i, "_cell", 5)) continue;
        size_t j = i + 5;
        if (j == len) return 1;
        if (seg[j] != '_' || j + 1 == len) continue;
        for (j++; j < len && seg[j] >= '0' && seg[j] <= '9'; j++) {}
        if (j == len) return 1;
    }
    return 0;
}

/* StackedRNNCells' own segment: stacked_rnn_cells, stacked_rnn_cells_1. */
static int is_stacked_segment(const char *seg, size_t len)
{
    if (len < 17 || memcmp(seg, "stacked_rnn_cells", 17)) return 0;
    if (len == 17) return 1;
    if (seg[17] != '_' || len == 18) return 0;
    for (size_t j = 18; j < len; j++)
        if (seg[j] < '0' || seg[j] > '9') return 0;
    return 1;
}

/* tfc's name of a Keras 2 weight (and of a Keras 3 legacy .h5's): `lstm/lstm_cell/kernel:0`
 * -> lstm/kernel; of StackedRNNCells, its own segment goes and each cell's stays, as in a
 * .keras file: `rnn/stacked_rnn_cells/gru_cell_1/kernel` -> rnn/gru_cell_1/kernel. */
static void keras2_name(const char *s, char *name, size_t size)
{
    size_t o = 0;
    int stacked = 0;
    while (*s) {
        const char *e = strchr(s, '/');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        const char *colon = memchr(s, ':', len);
        size_t keep = colon ? (size_t)(colon - s) : len;
        int drop = 0;
        if (e && is_stacked_segment(s, keep)) drop = stacked = 1;
        else if (e && !stacked && is_cell_segment(s, keep)) drop = 1;
        if (!drop && o + keep + 2 < size) {
            if (o) name[o++] = '/';
            memcpy(name + o, s, keep);
            o += keep;
        }
        s = e ? e + 1 : s + len;
    }
    name[o] = 0;
}

/* A weight's name from its layer's own segment on (Keras 3 writes the model's name in
 * front: sequential/dense/kernel). */
static const char *from_segment(const char *wn, const char *layer)
{
    size_t ll = strlen(layer);
    for (const char *q = wn; q; q = strchr(q, '/'), q = q ? q + 1 : NULL)
        if (!strncmp(q, layer, ll) && q[ll] == '/') return q;
    return wn;
}

/* Keras 2's layout: model_weights/<layer>/<weight name> for each name of the layer group's
 * weight_names, `dense/kernel:0` and the like. */
static tfc_status map_keras2(wmap *w, const char *root)
{
    for (int i = 0; i < tfc_h5_count(w->h5); i++) {
        const tfc_h5_object *g = tfc_h5_object_at(w->h5, i);
        if (!member(g, root) || g->is_dataset) continue;
        const tfc_h5_attr *names = tfc_h5_attr_find(g, "weight_names");
        for (int k = 0; names && k < names->n_strings; k++) {
            const tfc_h5_object *t = child(w->h5, g->path, names->strings[k]);
            if (!t || !t->is_dataset)
                return tfc_error_set(w->err, TFC_ERR_FORMAT, "%s: '%s' lists the weight '%s', "
                                     "which is not there", w->file, g->path, names->strings[k]);
            const char *wn = from_segment(names->strings[k], member(g, root));
            char name[256];
            keras2_name(wn, name, sizeof name);
            tfc_status st = assign(w, name, t);
            if (st) return st;
        }
    }
    return TFC_OK;
}

/* Every weight found, written as tfc's weights file. */
static tfc_status map_weights(tfc_model *m, const tfc_h5_file *h5, const char *file,
                              const tfc_node *layers, const char *out, tfc_import_report *rep,
                              tfc_error *err)
{
    wmap w = {.m = m, .h5 = h5, .file = file, .layers = layers, .err = err};
    tfc_status s = gather_weights(&w);
    const tfc_h5_object *legacy = tfc_h5_find(h5, "model_weights");
    if (!s) {
        if (legacy) s = map_keras2(&w, "model_weights");
        else if (tfc_h5_find(h5, "layers")) s = map_keras3(&w);
        else if (tfc_h5_attr_find(tfc_h5_object_at(h5, 0), "layer_names")) s = map_keras2(&w, "");
        else s = tfc_error_set(err, TFC_ERR_FORMAT, "%s: no Keras weights (neither layers/ nor "
                               "model_weights/)", file);
    }
    for (int i = 0; !s && i < w.n; i++) {
        if (w.w[i].from[0]) continue;
        char ws[96];
        shape_text(&w.w[i].p->shape, ws, sizeof ws);
        s = tfc_error_set(err, TFC_ERR_FORMAT, "%s: no tensor for tfc's weight %s %s",
                          file, w.w[i].name, ws);
    }
    for (int i = 0; !s && i < tfc_h5_count(h5); i++) { /* every variable taken */
        const tfc_h5_object *o = tfc_h5_object_at(h5, i);
        if (!o->is_dataset || (legacy && strncmp(o->path, "model_weights/", 14))) continue;
        if (!legacy && strncmp(o->path, "layers/", 7)) continue;
        int used = 0;
        for (int k = 0; k < w.n && !used; k++) used = !strcmp(w.w[k].from, o->path);
        for (int k = 0; k < w.nskipped && !used; k++) used = w.skipped[k] == o;
        if (!used)
            s = tfc_error_set(err, TFC_ERR_FORMAT, "%s: '%s' is no weight of tfc's model",
                              file, o->path);
    }
    if (!s) s = tfc_model_save_weights(m, out, err);
    for (int i = 0; !s && i < w.n; i++) rep->params += w.w[i].p->numel;
    if (!s) rep->tensors = w.n;
    free(w.w);
    free(w.buf);
    return s;
}

/* ---- the import ---------------------------------------------------------------------------- */

/* What the input holds, its parts opened. */
typedef struct source {
    char *bytes;            /* the input file */
    size_t len;
    tfc_zip *zip;           /* a .keras archive */
    tfc_h5_file *h5;        /* its weights, the .h5 file, or --weights */
    char *config;           /* the configuration's JSON text */
    size_t config_len;
    char config_name[1200]; /* how errors name it */
    char weights_name[1200];
} source;

static void source_free(source *src)
{
    tfc_h5_close(src->h5);
    tfc_zip_close(src->zip);
    free(src->config);
    free(src->bytes);
}

/* Keras's version from a .keras archive's metadata.json. */
static void read_version(const tfc_zip *z, tfc_import_report *rep)
{
    int i = tfc_zip_find(z, "metadata.json");
    void *meta = NULL;
    size_t len = 0;
    if (i < 0 || tfc_zip_read(z, i, 1 << 20, &meta, &len, NULL)) return;
    tfc_doc *d = tfc_doc_load_string(meta, len, "metadata.json", NULL);
    const char *v = d ? sval(tfc_doc_root(d), "keras_version") : NULL;
    if (v) snprintf(rep->source, sizeof rep->source, "Keras %s", v);
    tfc_doc_free(d);
    free(meta);
}

static tfc_status open_source(const char *path, const char *weights, source *src,
                              tfc_import_report *rep, tfc_error *err)
{
    tfc_status s = tfc_file_read_all(path, MAX_INPUT_BYTES, &src->bytes, &src->len, err);
    if (s) return s;
    snprintf(src->config_name, sizeof src->config_name, "%s", path);
    snprintf(src->weights_name, sizeof src->weights_name, "%s", path);
    if (src->len >= 4 && !memcmp(src->bytes, "PK\3\4", 4)) {
        src->zip = tfc_zip_parse(src->bytes, src->len, path, err);
        if (!src->zip) return err->code;
        int c = tfc_zip_find(src->zip, "config.json");
        if (c < 0)
            return tfc_error_set(err, TFC_ERR_USAGE, "%s: a zip archive without config.json: "
                                 "not a .keras file", path);
        s = tfc_zip_read(src->zip, c, MAX_CONFIG_BYTES, (void **)&src->config, &src->config_len,
                         err);
        if (s) return s;
        snprintf(src->config_name, sizeof src->config_name, "%s:config.json", path);
        read_version(src->zip, rep);
        int w = tfc_zip_find(src->zip, "model.weights.h5");
        if (w >= 0 && !weights) {
            void *h = NULL;
            size_t hl = 0;
            s = tfc_zip_read(src->zip, w, MAX_INPUT_BYTES, &h, &hl, err);
            if (s) return s;
            snprintf(src->weights_name, sizeof src->weights_name, "%s:model.weights.h5", path);
            free(src->bytes); /* the archive's bytes are no longer needed; its weights are */
            tfc_zip_close(src->zip);
            src->zip = NULL;
            src->bytes = h;
            src->len = hl;
            src->h5 = tfc_h5_parse(h, hl, src->weights_name, err);
            if (!src->h5) return err->code;
        }
    } else if (src->len >= 8 && !memcmp(src->bytes, "\x89HDF\r\n\x1a\n", 8)) {
        src->h5 = tfc_h5_parse(src->bytes, src->len, path, err);
        if (!src->h5) return err->code;
        const tfc_h5_attr *a = tfc_h5_attr_find(tfc_h5_object_at(src->h5, 0), "model_config");
        if (!a || a->n_strings != 1)
            return tfc_error_set(err, TFC_ERR_USAGE, "%s: an HDF5 file without a model_config "
                                 "attribute: weights alone (give the model's JSON, with this "
                                 "file as --weights)", path);
        src->config_len = strlen(a->strings[0]);
        src->config = malloc(src->config_len + 1);
        if (!src->config) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        memcpy(src->config, a->strings[0], src->config_len + 1);
        snprintf(src->config_name, sizeof src->config_name, "%s:model_config", path);
        const tfc_h5_attr *v = tfc_h5_attr_find(tfc_h5_object_at(src->h5, 0), "keras_version");
        if (v && v->n_strings == 1)
            snprintf(rep->source, sizeof rep->source, "Keras %s", v->strings[0]);
    } else {
        src->config = src->bytes;
        src->config_len = src->len;
        src->bytes = NULL;
    }
    if (weights) {
        tfc_h5_close(src->h5);
        src->h5 = tfc_h5_open(weights, err);
        if (!src->h5) return err->code;
        snprintf(src->weights_name, sizeof src->weights_name, "%s", weights);
    }
    return TFC_OK;
}

tfc_status tfc_keras_import(const char *path, const char *weights, const char *model,
                            const char *model_out, const char *weights_out,
                            tfc_import_report *rep, tfc_error *err)
{
    memset(rep, 0, sizeof *rep);
    source src = {0};
    tfc_status s = open_source(path, weights, &src, rep, err);
    tfc_doc *in = s ? NULL : tfc_doc_load_string(src.config, src.config_len, src.config_name,
                                                  err);
    if (!s && !in) s = err->code;
    char *text = NULL;
    size_t len = 0;
    /* the conversion runs with a model file given too: it checks what tfc cannot express
     * and counts the layers */
    if (!s) s = tfc_keras_convert(tfc_doc_root(in), path, rep, &text, &len, err);
    if (!s && !model) {
        const void *chunk = text;
        s = tfc_file_write_atomic(model_out, &chunk, &len, 1, err);
    }
    tfc_model *m = NULL;
    if (!s) {
        m = model ? tfc_model_load(model, err) : tfc_model_from_string(text, len, model_out, err);
        if (!m) s = err->code;
    }
    tfc_backend *be = NULL;
    if (!s && src.h5) {
        be = tfc_backend_open("cpu", 1, err);
        if (!be) s = err->code;
        if (!s) s = tfc_model_bind(m, be, 1, err);
        if (!s) s = tfc_model_init_weights(m, 0, err);
        const tfc_node *cfg = tfc_node_get(tfc_doc_root(in), "config");
        if (!s) s = map_weights(m, src.h5, src.weights_name, tfc_node_get(cfg, "layers"),
                                weights_out, rep, err);
    }
    tfc_model_free(m);
    if (be) tfc_backend_free(be);
    free(text);
    tfc_doc_free(in);
    source_free(&src);
    return s;
}
