/* The model's private layout, shared by model.c (loading, shapes) and graph.c (memory,
 * passes, loss). Nothing outside src/graph includes this. */
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

    /* Bound state (tfc_model_bind). */
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
    size_t act_grad_bytes; /* the region the activation-gradient blocks share */
    tfc_exec ex;
    int64_t rows_counted;  /* rows the last loss averaged over */
    int want_input_grad;
};

/* Whether the last layer's fused activation folds into the loss (softmax with a
 * categorical cross-entropy, sigmoid with binary cross-entropy), as Keras computes these
 * from the logits. */
int tfc_model_fused_loss(const tfc_model *m);

#endif
