/* The model of a file a user hands a model tool (tfc-predict, tfc-draw, tfc-time,
 * tfc-export): a model file, or a solver or run config.yaml whose model is used, with --set
 * overrides either way. It lives on the solver floor because a solver file's model is only
 * known after the solver's own resolution (model: FILE inlined, base_dir, --set order). */
#include <stdlib.h>
#include <string.h>

#include "solver/internal.h"

/* What a model built from a model file's tree keeps alive: the file and one document per
 * --set value (their nodes are positions in later messages). */
typedef struct held_docs {
    tfc_doc *docs[TFC_MAX_SETS + 1];
    int n;
} held_docs;

static void free_docs(void *p)
{
    held_docs *h = p;
    for (int i = 0; h && i < h->n; i++) tfc_doc_free(h->docs[i]);
    free(h);
}

static void free_solver(void *p) { tfc_solver_free(p); }

static int is_solver_file(const tfc_node *root)
{
    return root && root->kind == TFC_NODE_MAP && tfc_node_get(root, "model") &&
           !tfc_node_get(root, "layers");
}

static tfc_model *from_solver(const char *path, const char *const *sets, int nsets,
                              tfc_error *err)
{
    tfc_solver_options opt = {.sets = sets, .nsets = nsets};
    tfc_solver *s = tfc_solver_load(path, &opt, err);
    if (!s) return NULL;
    /* The solver's own model, handed over with the solver that owns its documents. */
    tfc_model *m = s->model;
    s->model = NULL;
    /* the solver's precision is the trainer's: the model tools compute in float32 */
    tfc_model_set_precision(m, TFC_PRECISION_FLOAT32);
    tfc_model_hold(m, free_solver, s);
    return m;
}

static tfc_model *from_model_file(tfc_doc *doc, const char *path, const char *const *sets,
                                  int nsets, tfc_error *err)
{
    held_docs *h = calloc(1, sizeof *h);
    if (!h) {
        tfc_doc_free(doc);
        tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        return NULL;
    }
    h->docs[h->n++] = doc;
    if (nsets > TFC_MAX_SETS) {
        free_docs(h);
        tfc_error_set(err, TFC_ERR_USAGE, "at most %d --set options", TFC_MAX_SETS);
        return NULL;
    }
    tfc_status status = TFC_OK;
    for (int i = 0; i < nsets; i++) {
        /* model.layers.1... names the same key as in a solver: one --set works for both. */
        const char *set = sets[i];
        if (!strncmp(set, "model.", 6)) set += 6;
        tfc_doc *keep = NULL;
        if (tfc_override_apply(doc, tfc_doc_root(doc), set, &keep, err)) status = TFC_ERR_CONFIG;
        if (keep) h->docs[h->n++] = keep;
    }
    char stem[128];
    const char *base = strrchr(path, '/');
    snprintf(stem, sizeof stem, "%s", base ? base + 1 : path);
    char *dot = strrchr(stem, '.');
    if (dot && dot != stem) *dot = 0;
    tfc_model *m = status ? NULL : tfc_model_from_node(tfc_doc_root(doc), stem, err);
    if (!m) {
        free_docs(h);
        return NULL;
    }
    tfc_model_hold(m, free_docs, h);
    return m;
}

tfc_model *tfc_model_load_config(const char *path, const char *const *sets, int nsets,
                                 tfc_error *err)
{
    tfc_doc *doc = tfc_doc_load_file(path, err);
    if (!doc) return NULL;
    if (is_solver_file(tfc_doc_root(doc))) {
        tfc_doc_free(doc);
        return from_solver(path, sets, nsets, err);
    }
    return from_model_file(doc, path, sets, nsets, err);
}
