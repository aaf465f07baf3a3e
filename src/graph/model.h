/* The model: a model file (SPEC §1) turned into a graph of layers with inferred shapes,
 * then bound to a backend: parameters, gradients and activations live in a few arenas
 * planned once for the largest batch, so a training step allocates nothing.
 *
 *   load (YAML → layers, shapes checked)  →  bind (backend, max batch)  →  init weights
 *   → per step: forward(x) → loss(labels) → zero_grad → backward
 *
 * Parameters sit in one flat arena, trainable ones first, so an optimizer is one loop over
 * [0, tfc_model_trainable_count) of params and grads. model.c loads and describes the model,
 * graph.c binds and runs it, weights.c reads and writes weights files. */
#ifndef TFC_GRAPH_MODEL_H
#define TFC_GRAPH_MODEL_H

#include <stdint.h>

#include "core/backend.h"
#include "core/config.h"
#include "layers/layer.h"

typedef struct tfc_model tfc_model;

typedef enum tfc_metric_kind {
    TFC_METRIC_ACCURACY = 0,
    TFC_METRIC_TOP_K,
    TFC_METRIC_LOSS,
    TFC_METRIC_MAE,  /* mean absolute error against float targets (a regression loss's) */
    TFC_METRIC_MSE,  /* mean squared error, likewise */
    TFC_METRIC_RMSE, /* its square root, of the mean over every row seen (Keras's
                      * root_mean_squared_error: not the mean of the batches' roots) */
    TFC_METRIC_COUNTED, /* a ratio of counts summed over batches: Precision, AUC, MeanIoU
                         * ... (tfc_metric.counted; graph/metric_counts.h) */
    TFC_METRIC_LOSS_FN, /* a loss function's mean over the rows seen, as Keras's
                         * MeanMetricWrapper: msle, poisson, cosine_similarity,
                         * binary_crossentropy, ... (tfc_metric.fn) */
    TFC_METRIC_COUNT
} tfc_metric_kind;

/* Whether a lower value of the metric is better: the loss and the errors (mae, mse,
 * root_mean_squared_error, FalsePositives, FalseNegatives); the others are better higher.
 * By the metric, or by the name a model reports it under (Keras's long names too), for
 * callers that only have a run's summary. */
typedef struct tfc_metric tfc_metric;
int tfc_metric_lower_is_better(const tfc_metric *mt);
int tfc_metric_name_lower_is_better(const char *name);
/* Whether `metrics:` takes `name` (tfc's names and Keras's other ones). */
int tfc_metric_known(const char *name);
/* For a Keras metric class that takes arguments (Precision, AUC, BinaryCrossentropy, ...):
 * the name its instance reports at Keras's defaults (precision, binary_crossentropy), else
 * NULL; and whether its config's `key` holds Keras's default, so that tfc-import can leave
 * it out. */
const char *tfc_metric_class_name(const char *cls);
int tfc_metric_default_arg(const char *cls, const char *key, const tfc_node *v);

/* Means of a metric over batches (a display's, an evaluation's, over ranks): each batch's
 * value v of `rows` rows adds tfc_metric_summand(k, v) rows to a row-weighted sum, whose
 * mean tfc_metric_of_mean(k, mean) turns back into the metric (RMSE: squared, then the
 * root; the others: themselves). */
double tfc_metric_summand(tfc_metric_kind k, double v);
double tfc_metric_of_mean(tfc_metric_kind k, double mean);

#define TFC_MAX_METRICS 8
#define TFC_MODEL_MAX_INPUTS 8 /* a functional model's InputLayers */
#define TFC_MODEL_MAX_OUTPUTS 8 /* and its outputs (`outputs:`) */

struct tfc_counted;

typedef struct tfc_metric {
    tfc_metric_kind kind;
    int k;           /* top_k_accuracy */
    char name[48];   /* as reported, the name the model file gives: accuracy, loss,
                      * sparse_top_k_categorical_accuracy */
    struct tfc_counted *counted; /* TFC_METRIC_COUNTED: its arguments (owned) */
    int fn;          /* the loss op that sums the rows' values (a tfc_loss_kind: mae, mse,
                      * root_mean_squared_error and TFC_METRIC_LOSS_FN), else -1 */
    int fn_logits;   /* ... reading the outputs as logits (a cross-entropy's from_logits) */
    int sign;        /* ... whose value is sign * the loss (cosine_similarity: -1) */
    int64_t at;      /* ... and where its counts start in the model's (tfc_model_ncounts) */
} tfc_metric;

/* One batch's results. `count` is the number of rows (examples, or unmasked steps) that the
 * loss and metrics averaged over, so callers can weight batches when accumulating. A model
 * with counted metrics also gives the batch's counts (tfc_model_ncounts of them, valid
 * until its next loss), which add over batches and ranks: tfc_model_counted_value turns
 * the sums into the metrics' values. */
typedef struct tfc_batch_result {
    double loss;
    double metric[TFC_MAX_METRICS];
    int64_t count;
    const double *counts;
} tfc_batch_result;

/* Builds a model from a parsed model mapping. `name` is the default model name (the file's
 * stem). Every error of the file is reported (up to TFC_ERROR_MAX_REPORTS); NULL on error.
 * The model keeps no pointer into `root` after it returns except node positions for
 * messages, so the document must outlive the model. */
tfc_model *tfc_model_from_node(const tfc_node *root, const char *name, tfc_error *err);
/* Whether a `layers:` item is `- InputLayer: {...}` or `- Input: {...}`: Keras's Sequential
 * form of the model's input, which a model may give as its first layer instead of `input:`
 * (its arguments are keras.Input's: shape or batch_shape, dtype, name; and max_length). */
int tfc_model_is_input_layer(const tfc_node *item);

/* Loads a model file (owning its document). */
tfc_model *tfc_model_load(const char *path, tfc_error *err);

/* Parses a model from YAML text (owning the document); `file` names it in errors and its
 * stem is the default model name. */
tfc_model *tfc_model_from_string(const char *yaml, size_t len, const char *file,
                                 tfc_error *err);

void tfc_model_free(tfc_model *m);

/* Makes `m` own `what` (the documents its nodes point into, when it was built by
 * tfc_model_from_node from a tree the caller would otherwise have to keep): tfc_model_free
 * calls release(what) after freeing the model. One holding per model. */
void tfc_model_hold(tfc_model *m, void (*release)(void *), void *what);

/* Whether the model's loss fits its output. A model file with `loss:` is checked when it is
 * loaded; one without it loads whatever its output shape (inference: a Conv2D or pooling
 * output), and this reports, at the last layer, why the default loss does not fit. Training,
 * evaluation and tfc_model_loss call it. */
tfc_status tfc_model_check_loss(const tfc_model *m, tfc_error *err);

const char *tfc_model_name(const tfc_model *m);
int tfc_model_nlayers(const tfc_model *m);
tfc_layer *tfc_model_layer(tfc_model *m, int i);
const tfc_shape *tfc_model_input_shape(const tfc_model *m);
tfc_dtype tfc_model_input_dtype(const tfc_model *m);
/* A functional model's several inputs (its leading InputLayers, SPEC §1): their count (1
 * for a model of one input), and input k's per-example shape, dtype and name ("input", or
 * its InputLayer's name). Input 0 is tfc_model_input_shape's. */
int tfc_model_ninputs(const tfc_model *m);
const tfc_shape *tfc_model_input_shape_at(const tfc_model *m, int k);
tfc_dtype tfc_model_input_dtype_at(const tfc_model *m, int k);
const char *tfc_model_input_name(const tfc_model *m, int k);
/* The last layer's output shape: the loss's, and a model of one output's. */
const tfc_shape *tfc_model_output_shape(const tfc_model *m);
/* A model's outputs (`outputs:`, Keras's Model(outputs=[...]), SPEC §1): their count (1:
 * the last layer alone), and output k's layer, per-example shape and name (its layer's). */
int tfc_model_noutputs(const tfc_model *m);
int tfc_model_output_layer(const tfc_model *m, int k);
const tfc_shape *tfc_model_output_shape_at(const tfc_model *m, int k);
const char *tfc_model_output_name(const tfc_model *m, int k);
tfc_loss_kind tfc_model_loss_kind(const tfc_model *m);
/* The metrics the logs report after the loss: a model of several outputs first reports each
 * output's loss (OUTPUT_loss), then each output's metrics (OUTPUT_METRIC). */
int tfc_model_nmetrics(const tfc_model *m);
const tfc_metric *tfc_model_metric(const tfc_model *m, int i);
/* The counts of the model's counted metrics, all of them (0: none), and metric i's value
 * from their sums over batches (counts: tfc_model_ncounts of them). */
int64_t tfc_model_ncounts(const tfc_model *m);
double tfc_model_counted_value(const tfc_model *m, int i, const double *counts);
/* Output classes per row (the last axis of the output). */
int tfc_model_classes(const tfc_model *m);
/* Rows of labels per example: 1, or T for sequence outputs. */
int64_t tfc_model_label_rows(const tfc_model *m);
/* The same three of output k's loss (the ones above are output 0's). */
tfc_loss_kind tfc_model_loss_kind_at(const tfc_model *m, int k);
int tfc_model_classes_at(const tfc_model *m, int k);
int64_t tfc_model_label_rows_at(const tfc_model *m, int k);

/* Variable-length sequences (SPEC §1 input.shape [null, ...]): the longest length a batch
 * may hold (input.max_length), or 0 for a model whose input shape is fixed. */
int64_t tfc_model_max_length(const tfc_model *m);

/* Re-derives every layer's shapes for batches of sequences of length t (the first axis of
 * the input); tfc_model_input_shape and the output shape then read at t, and the following
 * forward passes take [batch, t, ...] inputs in the buffers bound at max_length. Parameters
 * and bound memory stay. A fixed-shape model takes only its own length. Errors:
 * TFC_ERR_DATA for a length outside [1, max_length] or one a layer cannot take (the
 * layer's message, naming it); the model then stays at its previous length. */
tfc_status tfc_model_set_length(tfc_model *m, int64_t t, tfc_error *err);

/* Trainable and total parameter floats (the params arena), and the weights among them:
 * all but the constants (tfc_param.constant), Keras's count_params, what weights files hold
 * and the summaries count. */
int64_t tfc_model_trainable_count(const tfc_model *m);
int64_t tfc_model_param_count(const tfc_model *m);
int64_t tfc_model_weight_count(const tfc_model *m);

/* The trainable weights as the optimizer's variables (tfc_optim_var: offsets in the
 * trainable range of the params arena, Keras's shapes folded over their last two axes,
 * matrix for rank 2), in arena order, written to out and their Keras paths (`layer/weight`)
 * to paths where those are not NULL; returns how many there are. */
#define TFC_OPTIM_PATH 192
int tfc_model_optim_vars(const tfc_model *m, tfc_optim_var *out,
                         char (*paths)[TFC_OPTIM_PATH]);

/* Whose backward passes a training step runs: runs[i] = 1 when layer i has a trainable
 * weight or reads the output of a layer whose backward runs, or the model input with
 * input_grad (a gradient check's). The others' gradients would reach nothing that reads
 * them: a frozen base (`trainable: false`) under a trainable head, the weightless
 * preprocessing and augmentation layers at the front. runs: [tfc_model_nlayers]. */
void tfc_model_backward_plan(const tfc_model *m, int input_grad, int *runs);

/* The numbers the passes compute with (the solver's `precision`, docs/solver.md): float32,
 * or bf16 or float16, where the values a layer hands on (its output, the pre-activation it
 * keeps, its output's gradient; the model's float input) and the weights the layers read
 * are 16-bit values (core/half.h), each layer computing in float32 and the weights' float32
 * values staying what the optimizer updates, snapshots hold and tfc_model_params gives. A
 * backend without the format's round op (core/backend.h) refuses it when the model binds.
 * Set before binding. */
typedef enum tfc_precision {
    TFC_PRECISION_FLOAT32 = 0,
    TFC_PRECISION_BF16,
    TFC_PRECISION_FLOAT16
} tfc_precision;
extern const char *const tfc_precision_names[]; /* "float32", "bf16", "float16", NULL */
void tfc_model_set_precision(tfc_model *m, tfc_precision p);
tfc_precision tfc_model_precision(const tfc_model *m);
/* Whether `be` has the ops precision p needs (core/backend.h: bf16 round_bf16; float16
 * round_f16 and loss_scale_at; float32 none). */
int tfc_precision_available(const tfc_backend *be, tfc_precision p);
/* The loss scale (float16's, the trainer's): the loss's gradient is multiplied by s before
 * the backward pass (a power of two: exactly), its value is not. 1 unless set. */
void tfc_model_set_loss_scale(tfc_model *m, float s);
/* The same with the scale read on the device from st->loss_scale (loss_scale_at), whatever
 * it is when the step runs: a step captured in a CUDA graph takes each replay's. st on the
 * model's backend, or NULL (back to tfc_model_set_loss_scale's value); it takes precedence. */
void tfc_model_set_loss_scale_at(tfc_model *m, const tfc_step_state *st);

/* Plans and allocates every buffer on `be` for batches of up to max_batch examples; the
 * model keeps `be`. Re-binding with another size frees the old buffers. Errors name the
 * sizes (TFC_ERR_NOMEM). */
tfc_status tfc_model_bind(tfc_model *m, tfc_backend *be, int max_batch, tfc_error *err);

/* Binds for inference only (tfc_predictor, tfc-predict): no gradients, and buffers whose
 * lifetimes in a forward pass do not meet share memory (an output lives until its last
 * reader). A training forward pass is then a usage error. */
tfc_status tfc_model_bind_inference(tfc_model *m, tfc_backend *be, int max_batch,
                                    tfc_error *err);

/* The memory tfc_model_bind lays out on a backend for batches of up to max_batch, in bytes:
 * the two parameter arenas and the activation arena, which is the sum of its parts (each
 * aligned to 256 bytes, as bound). */
typedef struct tfc_memory_plan {
    int max_batch;
    size_t params, grads;     /* every parameter; the trainable ones' gradients */
    size_t arena;             /* = io + outputs + saved + workspace + activation_grads */
    size_t io;                /* input batch and its gradient, sequence mask, labels, loss
                                 scalars, smoothed targets, class weights */
    size_t outputs;           /* layer outputs and pre-activations, kept for backward */
    size_t saved;             /* what layers keep from forward for backward besides those */
    size_t workspace;         /* scratch: the largest layer's */
    size_t activation_grads;  /* activation gradients: layers whose gradients live at
                                 disjoint steps of backward share memory */
} tfc_memory_plan;

/* Plans tfc_model_bind's memory on paper: runs the layers' plans against `be` (workspace
 * sizes; a GPU backend asks cuDNN) but allocates no device memory. The model must be
 * unbound (TFC_ERR_USAGE); a backend without a kernel the model needs fails as binding
 * would (naming the layer). */
tfc_status tfc_model_plan_memory(tfc_model *m, tfc_backend *be, int max_batch,
                                 tfc_memory_plan *out, tfc_error *err);

/* The plan of the current binding, or NULL when unbound. */
const tfc_memory_plan *tfc_model_memory(const tfc_model *m);

/* The forward and backward FLOPs of one example through layer i (summary.c): two per
 * multiply-add of the matrix products (Dense, Conv2D, LSTM's input and recurrent kernels,
 * each time step, MultiHeadAttention's projections and scores), and one per output element
 * elsewhere (activations, pooling, merges, normalization, LSTM gates: an estimate).
 * Backward: the product for the weights' gradient plus, unless the layer reads the model
 * input or a layer whose backward the step skips, the one for the input's gradient; none
 * where the step skips the layer's backward (tfc_model_backward_plan). */
void tfc_model_layer_flops(const tfc_model *m, int i, int64_t *forward, int64_t *backward);

/* Examples per forward pass for inference of many examples (tfc_predictor_run,
 * tfc-predict's default --batch): 256, or on the CPU (cpu != 0) for a memory-bound model
 * (forward FLOPs per byte of layer outputs, one example, under 8: MobileNet-like stacks of
 * depthwise and 1x1 convolutions) the largest power of two down to 8 whose examples' widest
 * layer (inputs and output) fits in 8 MiB, so that a pass's activations stay in the last
 * level cache (docs/cpu.md, "Batch 1000 and the pass size"). From the layers' shapes: the
 * same for a model bound or not; 256 where a shape has a variable axis. */
int tfc_model_inference_pass(const tfc_model *m, int cpu);

/* Frees the bound buffers (a no-op when unbound); the model can be bound again. */
void tfc_model_unbind(tfc_model *m);

/* Fills every parameter from its initializer with streams keyed by (seed, layer index). */
tfc_status tfc_model_init_weights(tfc_model *m, uint64_t seed, tfc_error *err);

/* Device arenas: params [param_count] and grads [trainable_count] (grads settles the
 * gradients that tfc_model_zero_grad left unset: zeroes them). */
float *tfc_model_params(tfc_model *m);
float *tfc_model_grads(tfc_model *m);

/* Uploads one batch of inputs (host, [batch, input shape], float32 or int32 as the model
 * declares) and runs the forward pass. Token ids are checked against each Embedding's
 * input_dim (TFC_ERR_DATA naming the example). `training` selects dropout and batch
 * statistics; `step` keys the per-step random streams. */
tfc_status tfc_model_forward(tfc_model *m, const void *x, int batch, int training,
                             uint64_t seed, uint64_t step, tfc_error *err);

/* tfc_model_forward in two halves, for a caller that queues the device work apart from the
 * host's (a CUDA graph captures the second; bench_train --graphs): _stage_input checks and
 * uploads the batch (and its mask) and sets the pass's batch, mode, seed and step;
 * _forward_launch queues the layers' forward work, no host transfer among it. */
tfc_status tfc_model_stage_input(tfc_model *m, const void *x, int batch, int training,
                                 uint64_t seed, uint64_t step, tfc_error *err);
/* _stage_input for a model of several inputs: xs[k] holds input k's batch (host, [batch,
 * input k's shape]); tfc_model_stage_input is this with one input, and refuses a model of
 * several. tfc_model_forward_inputs is tfc_model_forward's. */
tfc_status tfc_model_stage_inputs(tfc_model *m, const void *const *xs, int batch, int training,
                                  uint64_t seed, uint64_t step, tfc_error *err);
tfc_status tfc_model_forward_inputs(tfc_model *m, const void *const *xs, int batch,
                                    int training, uint64_t seed, uint64_t step,
                                    tfc_error *err);
void tfc_model_forward_launch(tfc_model *m);

/* Loss and metrics of the last forward pass against host labels: int32 class indices
 * [batch, label_rows] for sparse_categorical_crossentropy, float32 [batch, label_rows,
 * classes] otherwise. Labels out of range are TFC_ERR_DATA. With want_grad, the loss
 * gradient is left in the output's gradient for tfc_model_backward. The model file's
 * loss options apply: label smoothing always, class weights after a training-mode
 * forward only (evaluation losses are unweighted, as Keras's validation). */
tfc_status tfc_model_loss(tfc_model *m, const void *labels, int want_grad,
                          tfc_batch_result *out, tfc_error *err);
/* The same for a model of several outputs: labels[k] holds output k's (a model of one
 * output: labels[0]); the loss is the outputs' losses weighted by loss_weights, the metrics
 * report each output's loss and metrics. The calls taking one labels array refuse such a
 * model. */
tfc_status tfc_model_loss_targets(tfc_model *m, const void *const *labels, int want_grad,
                                  tfc_batch_result *out, tfc_error *err);

/* tfc_model_loss in two halves, for a caller that reads the result later (the trainer's
 * device path): _launch checks the labels and queues the loss, the metrics and the
 * gradient without waiting for the device; _result downloads the last launch's loss and
 * metrics; _scalar is the device scalar its loss lands in (the loss op's loss_out). */
tfc_status tfc_model_loss_launch(tfc_model *m, const void *labels, int want_grad, tfc_error *err);
tfc_status tfc_model_loss_launch_targets(tfc_model *m, const void *const *labels, int want_grad,
                                         tfc_error *err);
void tfc_model_loss_result(tfc_model *m, tfc_batch_result *out);
/* _launch in two halves as the forward pass's: _stage_labels checks and uploads the labels
 * (and smoothed targets, class weights) of the staged batch; _compute queues the loss, the
 * metrics and, with want_grad, the gradient, no host transfer among them. */
tfc_status tfc_model_stage_labels(tfc_model *m, const void *labels, tfc_error *err);
tfc_status tfc_model_stage_targets(tfc_model *m, const void *const *labels, tfc_error *err);
void tfc_model_loss_compute(tfc_model *m, int want_grad);
/* The rows the staged labels' loss averages over (masked steps left out): its scale, 1 /
 * rows, is a by-value argument of the queued loss, so a CUDA graph's replay holds only for
 * batches with its capture's count. */
int64_t tfc_model_loss_rows(const tfc_model *m);
const float *tfc_model_loss_scalar(const tfc_model *m);

/* Zeroes the parameter gradients (once per step; not between iter_size accumulations).
 * On the CPU lazily: each layer's at its next backward step, or at a read through
 * tfc_model_grads or tfc_model_grad_download; read the arena through those, not a pointer
 * kept from before. */
void tfc_model_zero_grad(tfc_model *m);

/* Back-propagates the loss gradient; parameter gradients accumulate. */
void tfc_model_backward(tfc_model *m);

/* Keras's weight constraints (tfc_param.constraint): each trainable weight that has one
 * projected in place (its float32 master weights where reduced precision binds copies), as
 * Keras's optimizer does after every update it applies; returns how many weights have one
 * (0: nothing ran). */
int tfc_model_constrain(tfc_model *m);

/* The last forward pass's output, downloaded: [batch, output shape] floats. */
void tfc_model_get_output(tfc_model *m, float *host);
/* The same for output k (tfc_model_noutputs): [batch, its shape] floats. */
void tfc_model_get_output_at(tfc_model *m, int k, float *host);

/* The first layer (in order) whose output holds NaN or Inf after the last forward pass, or
 * -1 when all are finite. */
int tfc_model_first_nonfinite(tfc_model *m);

/* Per-layer steps for profiling (tfc-time): run forward/backward of layer i alone with
 * the current buffers. */
void tfc_model_layer_forward(tfc_model *m, int i);
void tfc_model_layer_backward(tfc_model *m, int i);

/* Adapting (Keras's adapt; solver/adapt.c): whether layer i takes statistics of its input
 * (its ops have the adapt hooks and it has a weight that is not a constant); _begin starts
 * them; _batch runs the layers before i forward in inference mode on the host batch xs (one
 * per input, as tfc_model_forward_inputs takes them) and hands layer i its input; _end
 * writes what the layer computed into its parameters. */
int tfc_model_layer_adapts(const tfc_model *m, int i);
tfc_status tfc_model_adapt_begin(tfc_model *m, int i, tfc_error *err);
tfc_status tfc_model_adapt_batch(tfc_model *m, int i, const void *const *xs, int batch,
                                 tfc_error *err);
tfc_status tfc_model_adapt_end(tfc_model *m, int i, tfc_error *err);

/* Whether backward computes the gradient of the model input (gradient checks); off by
 * default, which saves the first layer's backward-data pass. */
void tfc_model_want_input_grad(tfc_model *m, int on);

/* Host copies of one bound parameter (one of a layer's params): its p->numel floats
 * downloaded to, or uploaded from, `host`. */
void tfc_model_param_download(tfc_model *m, const tfc_param *p, float *host);
void tfc_model_param_upload(tfc_model *m, tfc_param *p, const float *host);
/* The gradient of a trainable parameter (p->grad) downloaded to `host`. */
void tfc_model_grad_download(tfc_model *m, const tfc_param *p, float *host);

/* Device pointer to the gradient of the model input, [max_batch, input shape], which
 * backward fills when tfc_model_want_input_grad is on (gradient checks); NULL for int32
 * inputs. */
float *tfc_model_input_grad(tfc_model *m);
/* Input k's (NULL for int32 inputs). */
float *tfc_model_input_grad_at(tfc_model *m, int k);

/* 1 when the model's loss says `class_weight: balanced`: its weights wait for the training
 * data's class counts (tfc_model_balance_classes), given before tfc_model_bind. */
int tfc_model_class_weight_balanced(const tfc_model *m);

/* Sets the loss's class weights to scikit-learn's "balanced" n / (classes * counts[c]) over
 * n = the sum of counts[classes] (a class with no records gets 1); before tfc_model_bind. */
tfc_status tfc_model_balance_classes(tfc_model *m, const int64_t *counts, tfc_error *err);

/* The loss's class weights (NULL when none); *n gets their count. */
const double *tfc_model_class_weight(const tfc_model *m, int *n);

/* ---- weights files (SPEC §5) ------------------------------------------------------------ */

/* The names of the output's classes (the data source's, SPEC §2 `classes:`), copied; n = 0
 * clears them. They are written into every weights file the model saves and read back by
 * tfc_model_load_weights. Names whose count is not the output's last axis are ignored (n
 * stays 0). */
tfc_status tfc_model_set_class_names(tfc_model *m, const char *const *names, int n,
                                     tfc_error *err);

/* The class names, or NULL when the model has none; *n gets their count. */
const char *const *tfc_model_class_names(const tfc_model *m, int *n);

/* The hash of the vocabulary that tokenized the training data (tfc_vocab_hash; NULL or ""
 * clears it). Written into every weights file the model saves (metadata "vocabulary") and
 * read back by a strict tfc_model_load_weights (cleared when the file has none). */
void tfc_model_set_vocabulary_hash(tfc_model *m, const char *hash);

/* That hash, or NULL when the model has none. */
const char *tfc_model_vocabulary_hash(const tfc_model *m);

/* Refuses (TFC_ERR_USAGE, naming `vocabulary` and `weights`, the file the model's weights
 * came from) a vocabulary whose hash is not the one the weights record; TFC_OK when they
 * agree or either is unknown (NULL or "": weights from before tfc recorded it). */
tfc_status tfc_model_check_vocabulary(const tfc_model *m, const char *hash,
                                      const char *vocabulary, const char *weights,
                                      tfc_error *err);

/* Writes every parameter as `<layer>/<variable>` in Keras's layout to a safetensors file,
 * atomically, with the model name, tfc version and (when set) the class names as a JSON
 * array under "classes" and the vocabulary's hash under "vocabulary" in __metadata__. */
tfc_status tfc_model_save_weights(tfc_model *m, const char *path, tfc_error *err);

/* What a by-name load did: counts, and one line per tensor ("matched dense/kernel (784,
 * 512)", "new ...", "skipped ... shape", "unused ..."); `text` is malloc'd (free it). */
typedef struct tfc_weights_report {
    int matched, missing, mismatched, unused;
    char *text;
} tfc_weights_report;

/* Loads parameters by name. Strict (rep NULL): every parameter must be present with its
 * exact shape, else TFC_ERR_USAGE (the weights of another model: exit 2) naming the first
 * culprit. By name (rep given, for fine-tuning): matching tensors are loaded, the others
 * reported and left as initialised. Any float or integer dtype converts to float32. Strict
 * loads also take the file's class names (metadata "classes") when it has as many as the
 * output has classes, and its vocabulary hash (metadata "vocabulary"). */
tfc_status tfc_model_load_weights(tfc_model *m, const char *path, tfc_weights_report *rep,
                                  tfc_error *err);

extern const char *const tfc_loss_names[TFC_LOSS_COUNT + 1];

#endif
