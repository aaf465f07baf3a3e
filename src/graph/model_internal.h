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
    int z_unset;       /* the last forward wrote y only (forward_act): z holds nothing */
    /* Inference: this layer writes layer chain_end's output, applying the transforms of the
     * BatchNormalization chain_bn (-1: none), an Add of layer chain_res's output (-1: none),
     * chain_act (an activation layer's, or this layer's own) and the pooling layer
     * chain_pool (-1: none; then chain_end) on the way; the layers between are skipped
     * (skip). chain_end == the layer itself: no chain. */
    int chain_end, chain_bn, chain_res, chain_pool, skip;
    tfc_act chain_act;
    /* Training: this layer (forward_relu) writes the output of the ReLU Activation layer
     * relu_into (-1: none) that alone reads it, its own output left unwritten; that layer
     * has relu_done set and is skipped; after an Add, in backward too: the Add's backward
     * writes the ReLU's derivative into each of its inputs' gradients. */
    int relu_into, relu_done;
    /* Training: this layer's own ReLU (z_unset) has its derivative taken by the pooling
     * layer relu_pool (-1: none) that alone reads its output, in the pooling's backward;
     * that layer has pool_relu_of = this one (else -1). */
    int relu_pool, pool_relu_of;
    /* This layer (takes_ids) reads the ids and table of the Embedding ids_from (-1: none)
     * that alone feeds it, in training and at inference, and adds that Embedding's table
     * gradient itself; the Embedding has ids_into = this one (else -1), still writes its
     * output, and has no backward of its own. */
    int ids_from, ids_into;
    /* tfc_model_zero_grad ran and this layer's backward has not since: its parameters'
     * gradients count as zero but may hold anything (graph.c's grads_unset) */
    int grads_unset;
    /* Training: neither this layer nor any on its inputs' paths has a trainable weight, nor
     * is the model input's gradient wanted there: its backward is skipped (graph.c,
     * plan_backward) */
    int no_backward;
    /* A layer that joins its inputs' masks (tfc_layer.joins_mask): its output's mask
     * [max_batch, steps] on the device at mask_at in the arena, and its host copy */
    size_t mask_at;
    float *mask, *host_mask;
} tfc_bound;

/* `loss:`'s options (loss_options.c). */
typedef struct tfc_loss_options {
    double label_smoothing;    /* 0: none */
    double delta;              /* Huber's (1: Keras's default) */
    double *class_weight;      /* [nclass_weight], malloc'd; NULL: none */
    int nclass_weight;
    int balanced;              /* class_weight: balanced, set from the training data's counts */
    int from_logits;           /* as given: 0, 1; -1: not given (inferred from the last layer) */
    const tfc_node *from_logits_node;
    const tfc_node *node;      /* the `loss:` mapping, for errors */
} tfc_loss_options;

/* One batch's loss call as tfc_model_stage_labels leaves it for tfc_model_loss_compute:
 * the loss kind (sparse becomes categorical with smoothed targets), the device targets,
 * the rows' 0/1 mask for the metrics (NULL: every row), the loss's row weights (the mask,
 * or class weights), and 1 / the counted rows. */
typedef struct tfc_loss_call {
    tfc_loss_kind kind;
    const void *target;
    const float *weight, *loss_weight;
    float scale;
} tfc_loss_call;

/* One output's loss (a head): the model's output k is head k's layer. What model.c
 * describes (the loss, its options and weight, the classes, the metrics), then what graph.c
 * binds (the labels and their staging, the loss's scalars). A model of one output has one
 * head, at its last layer, whose scalars are the model's. */
typedef struct tfc_head {
    int layer;
    const tfc_node *node;      /* its `loss:` entry, for errors (NULL: not given) */
    tfc_loss_kind loss;
    tfc_loss_options loss_opt;
    float weight;              /* loss_weights: its share of the model's loss (1) */
    int classes;
    int64_t label_rows;
    int fused;                 /* its layer's softmax/sigmoid is folded into the loss */
    int metric0, nmetrics;     /* its metrics: the model's metrics[metric0 ..] */
    const tfc_node *metrics_node; /* their list in the file, and its path there */
    char metrics_at[160];
    /* bound (graph.c) */
    void *labels;              /* device labels */
    float *target, *row_weight; /* device: smoothed targets, class weights (loss_opt) */
    float *host_target, *host_weight; /* their host staging */
    float *scalars;            /* device: its loss, then one per metric */
    /* counted metrics: the batch's labels and row weights as staged, the outputs read back */
    void *count_labels;
    float *count_weight;
    int count_weighted;        /* count_weight holds the last batch's (else every row counts) */
    int64_t count_rows;
    float *count_out;
    int64_t loss_counted;      /* the rows the last staged labels' loss averages over */
    tfc_loss_call loss_call;   /* what tfc_model_stage_labels set up for the loss */
} tfc_head;

/* Reads `loss:` (a name or {type, label_smoothing, class_weight}) into *kind and `o`. */
tfc_status tfc_loss_options_read(const tfc_node *node, tfc_loss_kind *kind,
                                 tfc_loss_options *o, tfc_error *err);
/* Once the classes are known: class_weight has one weight per class. */
tfc_status tfc_loss_options_check(const tfc_model *m, const tfc_head *h, tfc_error *err);
void tfc_loss_options_free(tfc_loss_options *o);
/* The field table of a `loss:` mapping, for help and docs. */
const tfc_field *tfc_loss_fields(void);

/* Whether the loss compares outputs with float targets element by element (MSE, MAE, Huber,
 * log-cosh), rather than a cross-entropy. */
int tfc_loss_is_regression(tfc_loss_kind k);
/* On the host, for `rows` rows of `labels` (as the loss takes them): the smoothed dense
 * targets [rows, classes] into `target` and the rows' class weights (times the 0/1 `mask`
 * when not NULL) into `weight`; either may be NULL (not wanted). */
void tfc_loss_targets(const tfc_head *h, const void *labels, int64_t rows, const float *mask,
                      float *target, float *weight);

struct tfc_model {
    /* The description (model.c). */
    char name[128];
    char input_name[128];  /* a first `- InputLayer:`'s name, `input`'s alias in inputs: */
    /* Several inputs (a functional model's InputLayers): input 0 is the fields input_*
     * above and below, inputs 1 .. ninputs - 1 are more[k - 1]; a layer's producer -1 - k
     * is input k. The further inputs have a fixed shape. */
    int ninputs;
    struct tfc_model_input {
        char name[128];
        tfc_shape shape;
        tfc_dtype dtype;
    } more[TFC_MODEL_MAX_INPUTS - 1];
    const tfc_node *input_item[TFC_MODEL_MAX_INPUTS]; /* the InputLayers' keys, for errors */
    /* The model's outputs (`outputs:`): their layers, in the order the file lists them; one,
     * the last layer, when it lists none. The loss and metrics are the last layer's. */
    int noutputs;
    int outputs[TFC_MODEL_MAX_OUTPUTS];
    tfc_doc *doc;          /* the model file, when loaded from one */
    tfc_doc *doc_scratch;  /* nodes made while loading (argument maps) */
    void (*release)(void *); /* tfc_model_hold: frees `held` with the model */
    void *held;
    tfc_layer *layers;
    int nlayers;
    tfc_shape input_shape; /* at the current sequence length (varlen.c) */
    int input_from_layer;  /* given by the first layer's input_shape or input_dim (Keras's
                              Sequential), which that layer's arguments then skip */
    tfc_dtype input_dtype;
    int64_t max_length;    /* input.shape's first axis is null: its longest length; else 0 */
    int64_t *caps;         /* with max_length: per layer, its output's and saved buffer's
                              floats per example at max_length (what bind sizes them for) */
    /* one head per output (head k at outputs[k]); the metrics are every head's, as the logs
     * report them: a model of several outputs first has each head's loss (NAME_loss), then
     * each head's metrics (NAME_accuracy) */
    tfc_head heads[TFC_MODEL_MAX_OUTPUTS];
    tfc_metric metrics[TFC_MAX_METRICS];
    int nmetrics;
    int64_t ncounts;       /* the counted metrics' counts, all of them (tfc_metric.at) */
    int loss_unusable;     /* no `loss:`, and the default does not fit the output (inference
                              only: tfc_model_check_loss says why) */
    char **class_names;    /* [nclass_names], owned: what the weights file records */
    int nclass_names;
    char vocabulary[17];   /* the training vocabulary's hash (tfc_vocab_hash), "" when none */
    int64_t param_count;   /* parameter floats, all of them ... */
    int64_t trainable_count; /* ... and the trainable ones */
    int64_t frozen_count;  /* ... and the frozen ones (tfc_param.frozen): with the trainable
                              ones, those bound with a gradient and, in bf16, a copy */
    int64_t weight_count;  /* ... and those but the constants (tfc_param.constant) */
    tfc_precision precision; /* of the passes (tfc_model_set_precision), before binding */
    float loss_scale;      /* multiplies the loss's gradient (tfc_model_set_loss_scale); 1 */
    const tfc_step_state *loss_scale_at; /* else this one's, on the device; NULL */

    /* The bound state (graph.c: tfc_model_bind). */
    tfc_backend *be;
    int max_batch;
    void *arena;           /* activations, saved buffers, input, labels, scalars */
    float *params, *grads; /* parameter arenas */
    float *copies;         /* precision bf16: the trainable and frozen parameters rounded,
                              which the layers read ([trainable_count + frozen_count],
                              params' layout); else NULL */
    tfc_bound *bound;
    void *x;               /* input [max_batch, input shape] */
    float *dx;             /* its gradient (float inputs) */
    void *xs[TFC_MODEL_MAX_INPUTS];   /* every input's: xs[0] == x */
    float *dxs[TFC_MODEL_MAX_INPUTS]; /* and gradient: dxs[0] == dx */
    float *mask;           /* [max_batch, T] when an Embedding has mask_zero or a Masking
                              layer reads the input */
    int mask_layer;        /* that layer, or -1 */
    int mask_input;        /* the input it reads */
    float *host_mask;      /* host copy of the mask */
    float *scalars;        /* device: the loss (several outputs: their weighted sum), then one
                              per metric; several outputs: then each head's (tfc_head) */
    double *counts;        /* counted metrics (ncounts > 0): the batch's counts */
    void *ws;
    size_t ws_bytes;
    tfc_memory_plan mem;   /* what the binding laid out */
    tfc_exec ex;
    int want_input_grad;
    int inference_only;    /* bound by tfc_model_bind_inference: no gradients, shared buffers */
    int regularized;       /* some weight has a regularizer (tfc_param.l1, l2): its penalty
                            * joins every loss and its gradient the weight's (graph.c) */
    int activity;          /* some layer has an activity regularizer (tfc_layer.activity_l1,
                            * l2): its penalty joins every loss, its gradient the output's;
                            * no layer's output is left unwritten (graph.c, plan_chains) */
};

/* Whether layer i's output is one of the model's outputs. */
static inline int tfc_model_is_output(const tfc_model *m, int i)
{
    for (int k = 0; k < m->noutputs; k++)
        if (m->outputs[k] == i) return 1;
    return 0;
}

/* Whether layer i's activation is folded into its head's loss (tfc_head.fused). */
static inline int tfc_model_fused_at(const tfc_model *m, int i)
{
    for (int k = 0; k < m->noutputs; k++)
        if (m->outputs[k] == i) return m->heads[k].fused;
    return 0;
}

/* Layer l's input shapes, dtypes and mask bits from its producers (the model input's for
 * -1), then its build; errors name the layer (model.c). */
tfc_status tfc_model_derive_layer(tfc_model *m, tfc_layer *l, tfc_error *err);

/* With max_length, once the layers are built at it: records the caps and refuses, naming
 * the layer, a model whose parameters change with the sequence length (varlen.c). */
tfc_status tfc_model_check_varlen(tfc_model *m, tfc_error *err);

#endif
