/* The model's private layout: the one contract between the files of src/graph. model.c
 * fills the description when a model file is loaded (layers with their shapes and
 * parameters, loss, metrics, parameter counts) and frees the model; graph.c owns the bound
 * state below (backend, arenas, per-layer buffers), reads the description from the fields
 * and runs the passes; weights.c reads layers and parameters. Between model.c and graph.c,
 * calls go one way: tfc_model_free unbinds. Nothing outside src/graph includes this. */
#ifndef TFC_GRAPH_MODEL_INTERNAL_H
#define TFC_GRAPH_MODEL_INTERNAL_H

#include "graph/model.h"

#define TFC_MAX_LAYERS 1024

/* Per-layer bound buffers. y/dy: the layer's output and its gradient; z/dz: the
 * pre-activation output when the layer has a fused activation (else z == y, dz == dy). */
typedef struct tfc_bound {
    float *y, *dy, *z, *dz;
    size_t grad_bytes; /* the block [dy | dz] */
    int zero_at;       /* the layer whose backward step zeroes the block first (graph.c) */
} tfc_bound;

struct tfc_model {
    /* The description (model.c). */
    char name[128];
    tfc_doc *doc;          /* the model file, when loaded from one */
    tfc_doc *doc_scratch;  /* nodes made while loading (argument maps) */
    tfc_layer *layers;
    int nlayers;
    tfc_shape input_shape;
    tfc_dtype input_dtype;
    tfc_loss_kind loss;
    tfc_metric metrics[TFC_MAX_METRICS];
    int nmetrics;
    int classes;
    int64_t label_rows;
    int fused_loss;        /* the last layer's softmax/sigmoid is folded into the loss */
    int64_t param_count;   /* parameter floats, all of them ... */
    int64_t trainable_count; /* ... and the trainable ones */

    /* The bound state (graph.c: tfc_model_bind). */
    tfc_backend *be;
    int max_batch;
    void *arena;           /* activations, saved buffers, input, labels, scalars */
    float *params, *grads; /* parameter arenas */
    tfc_bound *bound;
    void *x;               /* input [max_batch, input shape] */
    float *dx;             /* its gradient (float inputs) */
    float *mask;           /* [max_batch, T] when an Embedding has mask_zero */
    int mask_layer;        /* that Embedding, or -1 */
    float *host_mask;      /* host copy of the mask */
    void *labels;          /* device labels */
    float *scalars;        /* device: loss, then one per metric */
    void *ws;
    size_t ws_bytes;
    tfc_exec ex;
    int want_input_grad;
};

#endif
