/* Keras's Pipeline (keras.layers.Pipeline(layers, name=None)) in a model file:
 *   - Pipeline: {name: augment, layers: [{RandomFlip: {}}, {RandomRotation: {factor: 0.1}}]}
 * a sequential composition of layers, which is what the graph makes of it: the Pipeline's
 * items are expanded in place into the model's layer list when the graph is built, each
 * taking the one before it (the first the Pipeline's `inputs:`, or the layer above it), the
 * Pipeline's name standing for its last layer in later `inputs:`. Its layers are named as
 * Keras names them, under the Pipeline's name (Keras's variable paths: a Dense `dense` in a
 * Pipeline `pipeline` has `pipeline/dense/kernel`; nested Pipelines nest the prefix). */
#include <stdlib.h>
#include <string.h>

#include "graph/model_internal.h"
#include "graph/pipeline.h"

#define MAX_NESTING 16

static int is_pipeline(const tfc_node *item)
{
    const tfc_node *k = item->kind == TFC_NODE_MAP && item->n == 1 ? item->keys[0]
                        : item->kind == TFC_NODE_SCALAR && !item->quoted ? item
                                                                         : NULL;
    return k && !strcmp(k->str, "Pipeline");
}

static tfc_status push(tfc_pipelines *ps, const tfc_node *item, int owner, tfc_error *err)
{
    if (ps->list->n >= TFC_MAX_LAYERS)
        return tfc_node_error(err, TFC_ERR_CONFIG, item, "layers", "at most %d layers (a "
                              "Pipeline's layers counted), found more", TFC_MAX_LAYERS);
    int *o = realloc(ps->owner, (size_t)(ps->list->n + 1) * sizeof *o);
    if (!o) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    ps->owner = o;
    o[ps->list->n] = owner;
    tfc_node_seq_push(ps->list, (tfc_node *)item);
    return TFC_OK;
}

/* Appends the layers of `list` (the model's, or a Pipeline's `layers:` at path) to ps->list,
 * each Pipeline among them replaced by its own, recursively. */
static tfc_status expand(tfc_pipelines *ps, const tfc_node *list, int parent, const char *path,
                         int depth, tfc_error *err)
{
    for (int i = 0; i < list->n; i++) {
        const tfc_node *item = list->vals[i];
        if (!is_pipeline(item)) {
            if (push(ps, item, parent, err)) return TFC_ERR_CONFIG;
            continue;
        }
        char here[160];
        snprintf(here, sizeof here, "%s[%d].Pipeline", path, i);
        const tfc_node *a = item->kind == TFC_NODE_MAP ? item->vals[0] : NULL;
        tfc_pipeline p = {.item = item, .parent = parent};
        if (a && a->kind == TFC_NODE_SEQ) /* Pipeline(layers) positionally: the list alone */
            p.layers = a;
        else if (!a || tfc_node_is_null(a) || a->kind != TFC_NODE_MAP ||
                 !tfc_node_get(a, "layers"))
            return tfc_node_error(err, TFC_ERR_CONFIG, a ? a : item, here,
                                  "expected `{layers: [...]}`, the Pipeline's list of layers "
                                  "(Keras's Pipeline(layers, name=None))");
        if (depth >= MAX_NESTING || ps->n >= TFC_MAX_LAYERS)
            return tfc_node_error(err, TFC_ERR_CONFIG, item, here, depth >= MAX_NESTING ?
                                  "Pipelines nested more than %d deep" : "more than %d "
                                  "Pipelines", depth >= MAX_NESTING ? MAX_NESTING
                                  : TFC_MAX_LAYERS);
        for (int k = 0; a->kind == TFC_NODE_MAP && k < a->n; k++) {
            const char *key = a->keys[k]->str;
            if (!strcmp(key, "layers")) p.layers = a->vals[k];
            else if (!strcmp(key, "name")) p.name = a->vals[k];
            else if (!strcmp(key, "inputs")) p.inputs = a->vals[k];
            else {
                char kpath[192];
                snprintf(kpath, sizeof kpath, "%s.%s", here, key);
                return tfc_node_error(err, TFC_ERR_CONFIG, a->keys[k], kpath,
                                      "unknown argument '%s': Keras's Pipeline takes `layers` "
                                      "and `name` (and tfc's `inputs:`)", key);
            }
        }
        if (p.layers->kind != TFC_NODE_SEQ || p.layers->n == 0) {
            char lpath[192];
            snprintf(lpath, sizeof lpath, "%s.layers", here);
            return tfc_node_error(err, TFC_ERR_CONFIG, p.layers, lpath,
                                  "expected a non-empty list of layers, found %s",
                                  p.layers->kind == TFC_NODE_SEQ ? "an empty list"
                                  : tfc_node_kind_name(p.layers->kind));
        }
        tfc_pipeline *grown = realloc(ps->p, (size_t)(ps->n + 1) * sizeof *grown);
        if (!grown) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        ps->p = grown;
        const int me = ps->n++;
        p.first = ps->list->n;
        ps->p[me] = p;
        char inner[192];
        snprintf(inner, sizeof inner, "%s.layers", here);
        if (expand(ps, p.layers, me, inner, depth + 1, err)) return TFC_ERR_CONFIG;
        ps->p[me].last = ps->list->n - 1;
    }
    return TFC_OK;
}

tfc_status tfc_pipelines_expand(tfc_doc *doc, const tfc_node *list, tfc_pipelines *ps,
                                tfc_error *err)
{
    memset(ps, 0, sizeof *ps);
    ps->list = tfc_node_new_map(doc, list);
    if (!ps->list) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    ps->list->kind = TFC_NODE_SEQ;
    return expand(ps, list, -1, "layers", 0, err);
}

void tfc_pipelines_free(tfc_pipelines *ps)
{
    free(ps->owner);
    free(ps->p);
    ps->owner = NULL;
    ps->p = NULL;
    ps->n = 0;
}

int tfc_pipelines_outermost_at(const tfc_pipelines *ps, int i)
{
    for (int p = 0; p < ps->n; p++) /* in pre-order: an enclosing Pipeline comes first */
        if (ps->p[p].first == i) return p;
    return -1;
}

int tfc_pipelines_find(const tfc_pipelines *ps, const char *name)
{
    for (int p = 0; p < ps->n; p++)
        if (!strcmp(ps->p[p].label, name)) return p;
    return -1;
}

/* Whether name is taken by a layer, the model input or another Pipeline than `self`. */
static int taken(const tfc_pipelines *ps, const tfc_model *m, const char *name, int self)
{
    if (!strcmp(name, "input") || !strcmp(name, m->input_name)) return 1;
    for (int j = 0; j < m->nlayers; j++)
        if (!strcmp(m->layers[j].name, name)) return 1;
    for (int p = 0; p < ps->n; p++)
        if (p != self && !strcmp(ps->p[p].label, name)) return 1;
    return 0;
}

/* Prepends the names of the Pipelines around layer i to its own (pipeline/inner/dense). */
static tfc_status prefix_layer(const tfc_pipelines *ps, tfc_layer *l, tfc_error *err)
{
    char full[sizeof l->name];
    snprintf(full, sizeof full, "%s", l->name);
    for (int p = ps->owner[l->index]; p >= 0; p = ps->p[p].parent) {
        char next[sizeof l->name];
        if ((size_t)snprintf(next, sizeof next, "%s/%s", ps->p[p].label, full) >= sizeof next)
            return tfc_layer_error(err, l, "its name within its Pipelines, %s/%s..., is longer "
                                   "than %zu characters", ps->p[p].label, l->name,
                                   sizeof l->name - 1);
        memcpy(full, next, sizeof full);
    }
    memcpy(l->name, full, sizeof full);
    return TFC_OK;
}

tfc_status tfc_pipelines_name(tfc_pipelines *ps, tfc_model *m, tfc_error *err)
{
    tfc_status status = TFC_OK;
    for (int p = 0; p < ps->n; p++) { /* their name: first, so defaults avoid them */
        const tfc_node *n = ps->p[p].name;
        if (!n) continue;
        char path[96];
        snprintf(path, sizeof path, "layers[%d].Pipeline.name", ps->p[p].first);
        if (n->kind != TFC_NODE_SCALAR || !*n->str || strlen(n->str) >= sizeof ps->p[p].label ||
            strchr(n->str, '/'))
            status = tfc_node_error(err, TFC_ERR_CONFIG, n, path, "expected a name of 1 to %zu "
                                    "characters without '/'", sizeof ps->p[p].label - 1);
        else if (taken(ps, m, n->str, p))
            status = tfc_node_error(err, TFC_ERR_CONFIG, n, path, "the name '%s' is already "
                                    "used", n->str);
        else snprintf(ps->p[p].label, sizeof ps->p[p].label, "%s", n->str);
    }
    /* Keras's default names in the order Keras makes the Pipelines: each after its layers
     * (an inner one before the one around it) */
    for (int done = 0; done < ps->n; done++) {
        int next = -1;
        for (int p = 0; p < ps->n; p++) {
            if (ps->p[p].name || ps->p[p].label[0]) continue;
            if (next < 0 || ps->p[p].last < ps->p[next].last ||
                (ps->p[p].last == ps->p[next].last && p > next))
                next = p;
        }
        if (next < 0) break;
        for (int k = 0;; k++) {
            char name[sizeof ps->p[next].label];
            if (k) snprintf(name, sizeof name, "pipeline_%d", k);
            else snprintf(name, sizeof name, "pipeline");
            if (!taken(ps, m, name, next)) {
                memcpy(ps->p[next].label, name, sizeof name);
                break;
            }
        }
    }
    if (status) return status;
    for (int i = 0; i < m->nlayers; i++)
        if (ps->owner[i] >= 0 && m->layers[i].name[0] && prefix_layer(ps, &m->layers[i], err))
            status = TFC_ERR_CONFIG;
    return status;
}
