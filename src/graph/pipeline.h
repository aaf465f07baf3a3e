/* Keras's Pipeline in a model file, expanded into its layers when the graph is built
 * (pipeline.c; model.c's build_layers is its only user). */
#ifndef TFC_GRAPH_PIPELINE_H
#define TFC_GRAPH_PIPELINE_H

#include "core/config.h"
#include "core/error.h"

typedef struct tfc_model tfc_model;

/* One Pipeline of the model file. */
typedef struct tfc_pipeline {
    const tfc_node *item;   /* `- Pipeline: {...}` (errors point here) */
    const tfc_node *layers; /* its `layers:` */
    const tfc_node *name;   /* its `name:`, NULL: Keras's default (pipeline, pipeline_1, ...) */
    const tfc_node *inputs; /* its `inputs:`, which its first layer takes; NULL: none */
    int first, last;        /* its layers in the expanded list, first to last */
    int parent;             /* the Pipeline around it, -1: none */
    char label[128];        /* its name (tfc_pipelines_name) */
} tfc_pipeline;

typedef struct tfc_pipelines {
    tfc_node *list; /* the model's layers, each Pipeline replaced by its layers */
    int *owner;     /* per item of list: the innermost Pipeline holding it, -1: none */
    tfc_pipeline *p; /* in the order they are written (an enclosing one first) */
    int n;
} tfc_pipelines;

/* Expands the model's `layers:` list into ps (nodes made in doc, the rest malloc'd: free with
 * tfc_pipelines_free, also after an error). A Pipeline without a non-empty `layers:` list,
 * with another argument than layers, name and inputs, nested more than 16 deep or beyond
 * TFC_MAX_LAYERS Pipelines (or layers) is an error at its YAML. */
tfc_status tfc_pipelines_expand(tfc_doc *doc, const tfc_node *list, tfc_pipelines *ps,
                                tfc_error *err);
void tfc_pipelines_free(tfc_pipelines *ps);

/* Names the Pipelines (`name:` or Keras's defaults, unique against the model's layer names,
 * which must be set) and prefixes each layer inside them with their names, outermost first.
 * Errors: a bad or taken name, a name too long. */
tfc_status tfc_pipelines_name(tfc_pipelines *ps, tfc_model *m, tfc_error *err);

/* The outermost Pipeline whose first layer is item i of ps->list, -1: none. */
int tfc_pipelines_outermost_at(const tfc_pipelines *ps, int i);

/* The Pipeline named name, -1: none. */
int tfc_pipelines_find(const tfc_pipelines *ps, const char *name);

#endif
