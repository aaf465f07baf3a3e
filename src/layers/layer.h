/* The layer contract. A layer type is a tfc_layer_ops: its Keras name, its argument schema,
 * and build / forward / backward. build() sees only shapes (per example, no batch axis) and
 * declares parameters, workspace and saved buffers; the graph then binds memory once and
 * calls forward/backward with device pointers. Layers know math and shapes, never devices:
 * everything they compute goes through ex->be's op table.
 *
 * Gradients ACCUMULATE: backward adds into dx[i] and into each parameter's grad, all zeroed
 * by the graph once per step. A layer with a fused `activation:` sees its pre-activation
 * output as y/dy; the graph applies the activation and its derivative around it. */
#ifndef TFC_LAYERS_LAYER_H
#define TFC_LAYERS_LAYER_H

#include <stdint.h>

#include "core/backend.h"
#include "core/init.h"
#include "core/schema.h"
#include "core/tensor.h"

#define TFC_LAYER_MAX_INPUTS 8
#define TFC_LAYER_MAX_PARAMS 24 /* an RNN of 8 stacked cells, a Bidirectional of 4 */

typedef struct tfc_layer tfc_layer;

/* What a forward or backward pass sees. */
typedef struct tfc_exec {
    tfc_backend *be;
    int training;     /* dropout active, batch statistics for BatchNormalization */
    uint64_t seed;    /* the run's seed */
    uint64_t step;    /* iteration: the counter of per-step random streams (dropout) */
    int batch;        /* examples in this batch (<= the bound maximum) */
    void *ws;         /* shared scratch, at least the largest layer's workspace */
    unsigned fresh;   /* backward of a layer with assigns_grads: bit j set, dx[j] starts at
                       * this layer (holds nothing yet): the layer may write it, not add */
    int params_fresh; /* backward of a layer with assigns_param_grads: its parameters'
                       * gradients hold nothing yet (the step's first backward): written,
                       * not added */
    const float *relu_x; /* backward of a pooling (pool_params): the output of the ReLU
                          * before it, whose derivative it takes too (graph.c); NULL: none */
    /* forward and backward of a layer with takes_ids whose ids_vocab is set: the token ids
     * [batch, in_shape] of the Embedding that alone feeds it and that Embedding's table,
     * which the layer reads (and whose gradient it adds to) in place of x and dx */
    const int32_t *ids;
    const struct tfc_param *ids_table;
} tfc_exec;

/* A weight: Keras's variable name and layout; data/grad are bound by the graph. */
typedef struct tfc_param tfc_param;
struct tfc_param {
    char name[48];      /* kernel, bias, recurrent_kernel, embeddings, gamma, ... */
    tfc_shape shape;    /* Keras layout (SPEC §5) */
    int trainable;      /* 0 for moving statistics: no gradient, no optimizer update */
    int frozen;         /* a weight of a layer with `trainable: false` (Keras's): not
                         * trainable (no update, no slots, no regularizer or constraint, not
                         * counted as trainable) but bound with a gradient, which its layer's
                         * backward may write and nothing reads */
    int constant;       /* a value the layer reads where Keras's layer has no variable
                         * (BatchNormalization's gamma without scale, beta without center):
                         * not trainable; initialised, bound and kept as a moving statistic,
                         * but in no weights file and no count of weights */
    tfc_init init;      /* how to fill it */
    /* the layer argument that regularizes it (Keras's: kernel_regularizer, ...; NULL: none),
     * set by tfc_layer_add_param from the name, which build may change; and the factors the
     * graph read from it (trainable weights only, as Keras) */
    const char *regularizer;
    float l1, l2;
    /* the constraint the graph read from the argument of the same weight (kernel_constraint
     * for kernel_regularizer, ...), applied after each optimizer update (trainable weights
     * only, as Keras); kind TFC_CONSTRAINT_NONE: none */
    tfc_constraint_desc constraint;
    /* a weight of a layer called again (tfc_layer.calls): a view of the first call's
     * parameter of the same index, bound to its data and gradient; whatever owns, counts,
     * initialises, saves, loads, regularizes, constrains or updates weights skips it */
    int shared;
    int64_t numel;
    float *data;        /* bound */
    float *grad;        /* bound; NULL when not trainable */
};

typedef struct tfc_layer_ops {
    const char *type;          /* Keras class name: Dense, Conv2D, ... */
    const char *class_name;    /* Keras's class where it differs from the name Keras exports
                                * it as, type (GroupQueryAttention's is GroupedQueryAttention):
                                * default layer names come from it; NULL: type */
    const tfc_field *schema;   /* arguments (besides name and inputs) */
    size_t args_size;          /* bytes of the struct the schema fills */
    int min_inputs, max_inputs;
    int keeps_mask;            /* output keeps the sequence mask of its input */
    int pure_act;              /* y = act(x) and nothing else (Activation); a layer's
                                * tfc_layer.pure_act starts as this and build may clear it */
    int sums_inputs;           /* y = x[0] + x[1] + ... (Add) */
    int assigns_grads;         /* backward writes dx[j] where ex->fresh has bit j (Conv2D,
                                * BatchNormalization, Dense, Dropout, the poolings, Flatten,
                                * Reshape), else adds to it */
    int assigns_param_grads;   /* backward writes every parameter gradient where
                                * ex->params_fresh (Dense), else adds to them; without it
                                * the graph zeroes them first */
    int looks_up;              /* y = table[x]: token ids into rows of its one parameter,
                                * [id_limit, dim] (Embedding) */
    /* A layer that makes the model's sequence mask from the model input it reads (mask_out
     * set by build, no mask in): mask[r] = 1 for a real step, 0 for padding, over the `rows`
     * steps (batch times its input's first axis) of the input batch x in host memory. NULL:
     * the input is token ids and id 0 is padding (Embedding's mask_zero). */
    void (*host_mask)(const tfc_layer *l, const void *x, int64_t rows, float *mask);
    /* Whether the layer can read the ids and table (vocab rows) of a looks_up layer in
     * place of its input, bound for batches of up to max_batch on `be` (LSTM, where the
     * backend's lstm_ids says so; then the graph sets l->ids_vocab); may be NULL: never. */
    int (*takes_ids)(const tfc_layer *l, const tfc_backend *be, int64_t vocab, int max_batch);
    /* The ops of TFC_BACKEND_LAYER_OPS this built layer calls (its arguments may decide), by
     * name, NULL-terminated; binding it on a backend that lacks one fails naming the layer.
     * May be NULL: none. */
    const char *const *(*needs)(const tfc_layer *l);
    /* The layer runs on ops every backend has, but has not yet run under `make test-gpu` on
     * a real GPU: a backend other than the CPU refuses it at bind, naming it, until it has
     * (then the flag goes). */
    int cpu_first;
    int reads_ints;            /* may read a layer's int32 output (tfc_layer.out_dtype):
                                * Embedding, the preprocessing layers */
    int writes_params;         /* a training forward writes the layer's trainable parameters
                                * (SpectralNormalization's kernel): bf16 and float16, whose
                                * layers read 16-bit copies of them, refuse it */
    int copies_at_inference;   /* inference forward copies x to y (Flatten, Reshape, Dropout):
                                * the inference layout gives y x's memory, the copy a no-op */
    int host_choices;          /* a training forward decides on the host, each step, which ops
                                * it queues or with what (RandAugment's picks,
                                * RandomElasticTransform's distortion factor): a CUDA graph
                                * would replay the captured step's, so the solver captures none */
    /* Checks l->in_shape against the arguments (l->args), sets l->out_shape, l->act,
     * parameters (tfc_layer_add_param), l->saved_floats (floats per example kept from
     * forward for backward) and, for token inputs, l->id_limit. Errors name the layer via
     * tfc_layer_error. */
    tfc_status (*build)(tfc_layer *l, tfc_error *err);
    /* Sets l->workspace (bytes of scratch) for batches of up to l->max_batch on `be`;
     * called when the graph binds. NULL: no workspace. */
    void (*plan)(tfc_layer *l, tfc_backend *be);
    /* y = f(x). x[i] has shape [batch, in_shape[i]] (int32 for an int model input). */
    void (*forward)(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y);
    /* y = act(f(x)) with the layer's fused activation l->act applied by the layer itself,
     * in one pass where the backend can (a convolution's bias and ReLU in the kernel's
     * epilogue); may be NULL. The graph calls it at inference, and in training for ReLU
     * (whose derivative it then takes from y); backward then gets no f(x) as its y. */
    void (*forward_act)(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y);
    /* Training only (may be NULL): y = relu(f(x)) in the pass that computes f(x), for the
     * ReLU Activation layer that alone reads this layer's output (graph.c): y is that layer's
     * output, this layer's own is left unwritten, and its backward must not read it
     * (BatchNormalization, Add). */
    void (*forward_relu)(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y);
    /* Inference only (may be NULL): y = act(bn(f(x)) + residual), the transforms of the
     * BatchNormalization, Add and activation layers that consume this layer's output alone
     * applied by it, which the graph then skips (graph.c); bn and residual may be NULL, and
     * are NULL where act is the layer's own activation. With pool (NULL: none) the pooling
     * layer that reads that result alone is applied too: its output goes to pooled, and y is
     * scratch of this layer's output size, which the backend may leave unwritten. */
    void (*forward_fused)(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y,
                          const tfc_bn_params *bn, const float *residual, tfc_act act,
                          const tfc_pool_desc *pool, float *pooled);
    /* BatchNormalization: its inference transform's parameters (device pointers). */
    void (*bn_params)(const tfc_layer *l, tfc_bn_params *out);
    /* Pooling layers: the pooling of a batch of n, as the backend's pool ops take it. */
    tfc_pool_desc (*pool_params)(const tfc_layer *l, int n);
    /* dx[i] += dL/dx[i] (dx[i] NULL: not needed), param grads += ... */
    void (*backward)(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                     const float *dy, float *const *dx);
    void (*free_state)(tfc_layer *l); /* may be NULL */
    /* Values of parameter p (host, numel floats) that its initializer cannot say: called
     * after the initializer filled them (a constant's at bind, every parameter's by
     * tfc_model_init_weights), to overwrite them or not (Normalization's given mean and
     * variance). May be NULL. */
    void (*fill_param)(const tfc_layer *l, int p, float *host);
    /* Adapting (Keras's adapt): statistics of the layer's input over the training data, set
     * as its weights before a fresh run trains (solver/adapt.c). adapt_begin starts them
     * (TFC_ERR_NOMEM on failure); adapt_batch takes a batch of its first input x (host,
     * [batch, in_shape[0]]); adapt_end writes the parameters it sets into host[p] (numel
     * floats each, holding the current values on entry). All NULL: the layer does not
     * adapt. */
    tfc_status (*adapt_begin)(tfc_layer *l, tfc_error *err);
    void (*adapt_batch)(tfc_layer *l, const float *x, int batch);
    void (*adapt_end)(tfc_layer *l, float *const *host);
} tfc_layer_ops;

struct tfc_layer {
    const tfc_layer_ops *ops;
    char name[128];                /* a Pipeline's layers: pipeline/inner/dense, Keras's path */
    int index;                     /* position in the model's layer list */
    const tfc_node *node;          /* the layer's YAML (errors point here) */
    const tfc_node *args_node;     /* its arguments' mapping (NULL: none) */
    void *args;                    /* filled by ops->schema */
    int ninputs;
    int inputs[TFC_LAYER_MAX_INPUTS]; /* producing layers' indices; -1 = the model input */
    tfc_shape in_shape[TFC_LAYER_MAX_INPUTS]; /* per example */
    tfc_dtype in_dtype[TFC_LAYER_MAX_INPUTS];
    tfc_shape out_shape;           /* per example */
    tfc_act act;                   /* fused activation, TFC_ACT_LINEAR when none */
    int pure_act;                  /* y = act(x) and nothing else: ops->pure_act, set before
                                      build, which may clear it (a ReLU whose arguments no
                                      tfc_act has runs ops of its own) */
    int nparams;
    tfc_param params[TFC_LAYER_MAX_PARAMS];
    int max_batch;                 /* the batch size memory is planned for */
    size_t workspace;              /* bytes */
    int64_t saved_floats;          /* per example */
    int64_t fixed_floats;          /* independent of the batch (per-channel statistics) */
    float *saved;                  /* bound: [fixed_floats + max_batch * saved_floats] */
    int mask_in;                   /* the input carries the sequence mask (set before build) */
    unsigned mask_inputs;          /* bit j: input j carries it (set before build) */
    int mask_out;                  /* the output carries it: set by the graph to
                                      mask_in && ops->keeps_mask; build may change it */
    const float *mask;             /* bound: [batch, T] sequence mask when mask_in, else NULL */
    int joins_mask;                /* set by build: the output's mask is the inputs' masks
                                      joined along the time axis, ones for an input without
                                      one (Concatenate of sequences on their axis 0); the
                                      graph makes it per batch. 0: the output's mask (with
                                      mask_out) is its input's */
    uint64_t rng_key;              /* this layer's random stream (dropout) */
    int calls;                     /* a call of an earlier layer (Keras's one layer object
                                      called on several tensors, SPEC §1): that layer's
                                      index, whose weights this one's are (tfc_param.shared);
                                      -1: none */
    int frozen;                    /* `trainable: false` (Keras's Layer argument): its
                                      weights are frozen (tfc_param.frozen); a
                                      BatchNormalization runs in inference mode in training
                                      too, as Keras's */
    /* the factors of a penalty on the output, l1 sum |y| + l2 sum y^2 over the batch size,
     * in every loss (Keras's activity_regularizer; set after build from the argument, or by
     * build: ActivityRegularization); 0, 0: none */
    float activity_l1, activity_l2;
    int64_t id_limit;              /* token inputs must lie in [0, id_limit); 0: no check */
    tfc_dtype out_dtype;           /* set by build: TFC_I32 for an output of int32 indices
                                      (IntegerLookup's and Discretization's output_mode int),
                                      which only a layer with ops->reads_ints may read;
                                      TFC_F32 (the graph's default before build) otherwise */
    int64_t out_id_limit;          /* out_dtype TFC_I32: its values lie in [0, out_id_limit),
                                      checked against a reader's id_limit when the model is
                                      built */
    int64_t ids_vocab;             /* takes_ids: set by the graph before plan when this layer
                                      takes the ids of the Embedding that alone feeds it (its
                                      input_dim; tfc_exec.ids); 0: it reads its input */
    void *state;                   /* layer-private */
};

/* Appends a parameter; returns it so build() can adjust its initializer. */
tfc_param *tfc_layer_add_param(tfc_layer *l, const char *name, int ndim, const int64_t *dims,
                               int trainable, tfc_init init);

/* The constraint argument that goes with a weight's regularizer argument (kernel_constraint
 * for kernel_regularizer, ...; tfc_param.regularizer); NULL for NULL or an unknown one. */
const char *tfc_constraint_arg(const char *regularizer);

/* Floats of l's weights: its parameters but the constants (Keras's count_params) and, for
 * a call of a layer, the shared ones (0). */
int64_t tfc_layer_weight_count(const tfc_layer *l);

/* Reports a build error positioned at the layer's YAML, naming it as
 * layers[INDEX].TYPE (NAME). */
tfc_status tfc_layer_error(tfc_error *err, const tfc_layer *l, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* keras.utils.to_snake_case of a class name into out: Keras's default layer names (Conv2D →
 * conv2d, MaxPooling2D → max_pooling2d, PReLU → p_re_lu) */
void tfc_snake_case(const char *type, char *out, size_t size);

/* A wrapper's inner layer (TimeDistributed, SpectralNormalization) from {Type: {args}}: the
 * arguments but `name` into ia (keys and vals allocated; tfc_inner_args_free), parsed by
 * ops->schema into d->args (allocated) at the path layers[I].WRAPPER.layer.TYPE; d named by
 * its `name:` (without '/'), else the snake case of its type. An inner activity_regularizer
 * is an error, act_reg_msg saying why and what to do. */
typedef struct tfc_inner_args {
    tfc_node args;
    tfc_node **keys, **vals;
} tfc_inner_args;
tfc_status tfc_layer_parse_inner(const tfc_layer *l, const tfc_layer_ops *ops,
                                 const tfc_node *inner, tfc_inner_args *ia, tfc_layer *d,
                                 const char *act_reg_msg, tfc_error *err);
void tfc_inner_args_free(tfc_inner_args *ia);

/* The inputs of an attention layer (query, value and optional key): each a float sequence
 * (steps, features), the key's steps the value's; otherwise a tfc_layer_error naming the
 * input. */
tfc_status tfc_attention_inputs_check(const tfc_layer *l, tfc_error *err);

/* MultiHeadAttention's and GroupQueryAttention's (layers/attention_shared.c). The value is
 * input 1 (else the query), the key input 2 (else the value).
 * heads_check: flash_attention (a bool or absent) true refuses dropout, as Keras; the output
 * keeps the query's mask, and one mask over query and keys needs as many steps in each. */
tfc_status tfc_attention_heads_check(tfc_layer *l, const tfc_node *flash_attention,
                                     double dropout, tfc_error *err);
/* The backend's attention desc for the batch: the masks, the scale 1/sqrt(dk), dropout's
 * stream (the seed, when set, mixed into the layer's) in training. */
tfc_attn_desc tfc_attention_desc(const tfc_layer *l, const tfc_exec *ex, int heads, int dk,
                                 int dv, int causal, int window, double dropout, int seed);
/* out [rows, width] = x [rows, in] W + b (b may be NULL) */
void tfc_proj(tfc_exec *ex, int64_t rows, int in, const void *x,
                           const tfc_param *w, const tfc_param *b, int width, float *out);
/* its gradients given dout [rows, width]: dW, db += ..., dx += dout W^T (dx may be NULL) */
void tfc_proj_backward(tfc_exec *ex, int64_t rows, int in, const void *x,
                                    tfc_param *w, tfc_param *b, int width, const float *dout,
                                    float *dx);

/* The `activation:` argument every layer with a fused activation declares. */
#define TFC_ACTIVATION_FIELD(type, member)                                                   \
    {"activation", TFC_F_ENUM, offsetof(type, member), "linear", TFC_UNBOUNDED, tfc_act_names, \
     "activation applied to the output"}

/* The `data_format:` argument of the image and sequence layers, an index into
 * tfc_data_format_names (NULL-terminated): 0 channels_last, what Keras's default (None:
 * keras.config.image_data_format()) gives unless configured otherwise, and the only layout
 * tfc has (images NHWC, sequences (steps, channels)); channels_first, a value Keras knows,
 * is refused naming the argument for every layer whose schema takes it (graph/model.c). */
extern const char *const tfc_data_format_names[3];
#define TFC_DATA_FORMAT_FIELD(type, member)                                                   \
    {"data_format", TFC_F_ENUM, offsetof(type, member), "channels_last", TFC_UNBOUNDED,        \
     tfc_data_format_names, "channels_last only"}

/* Keras's weight regularizer arguments (kernel_regularizer, ...; TFC_F_REGULARIZER, core/
 * init.h): the graph reads each for the weights whose tfc_param.regularizer names it, and
 * activity_regularizer (a penalty on the layer's output, over the batch size as Keras 3
 * adds it) into tfc_layer.activity_l1, activity_l2. The constraints (kernel_constraint, ...;
 * TFC_F_CONSTRAINT) the graph reads into tfc_param.constraint from the argument named like
 * the weight's regularizer. */
#define TFC_REGULARIZER_FIELD(name)                                                          \
    {name, TFC_F_REGULARIZER, 0, TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,                         \
     "l1, l2 or {type: l2, l2: 0.0001}: a penalty on the weight, in the loss"}
#define TFC_ACTIVITY_REGULARIZER_FIELD                                                       \
    {"activity_regularizer", TFC_F_REGULARIZER, 0, TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,       \
     "l1, l2 or {type: l2, l2: 0.0001}: a penalty on the output over the batch size, in the "  \
     "loss"}
#define TFC_CONSTRAINT_FIELD(name)                                                           \
    {name, TFC_F_CONSTRAINT, 0, TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,                          \
     "max_norm, non_neg, unit_norm, min_max_norm or {type: max_norm, max_value: 2, axis: 0}: "  \
     "a projection of the weight after each update"}
/* Those of a layer with a kernel and a bias (Dense and the convolutions): kernel_regularizer,
 * bias_regularizer, activity_regularizer, kernel_constraint, bias_constraint. */
#define TFC_KERNEL_BIAS_KERAS_FIELDS                                                         \
    TFC_REGULARIZER_FIELD("kernel_regularizer"), TFC_REGULARIZER_FIELD("bias_regularizer"),   \
        TFC_ACTIVITY_REGULARIZER_FIELD, TFC_CONSTRAINT_FIELD("kernel_constraint"),            \
        TFC_CONSTRAINT_FIELD("bias_constraint")

/* The `data_format:` of the Keras image layers whose tfc schema has no other use for it
 * (Conv2D, the 2-D poolings, Flatten): only channels_last (or null, Keras's default). */
#define TFC_IMAGE_DATA_FORMAT_FIELD                                                          \
    TFC_FIXED_FIELD("data_format", "channels_last", "tfc's images are (height, width, "     \
                    "channels)")

/* ZeroPadding2D's or Cropping2D's rows and columns added or cut: top, bottom, left, right
 * (padding.c; for the ONNX export); ZeroPadding1D's and Cropping1D's steps are its left and
 * right. */
void tfc_layer_border(const tfc_layer *l, int side[4]);

/* ZeroPadding3D's or Cropping3D's amounts: front, back, top, bottom, left, right (padding3d.c;
 * for the ONNX export). */
void tfc_layer_border3d(const tfc_layer *l, int side[6]);
/* Resizing's, CenterCrop's or RandomCrop's resize of one image at inference (resizing.c; for
 * the ONNX export). */
tfc_crop_resize_desc tfc_layer_crop_resize(const tfc_layer *l);

/* TimeDistributed's inner layer (time_distributed.c; for the ONNX export): built, its
 * parameters the wrapper's in order, bound only while the wrapper runs. */
const tfc_layer *tfc_time_distributed_inner(const tfc_layer *l);
/* SpectralNormalization's inner layer (spectral_norm.c; for the ONNX export, where it runs
 * as at inference): built, its parameters the wrapper's first ones in order. */
const tfc_layer *tfc_spectral_normalization_inner(const tfc_layer *l);

/* STFTSpectrogram's or MelSpectrogram's tfc_stft_desc for n examples (spectrogram.c; for
 * the ONNX export); its mode TFC_STFT_MEL for MelSpectrogram. 0 for another layer. */
int tfc_layer_stft_desc(const tfc_layer *l, int n, tfc_stft_desc *d);

/* A ConvLSTM1D's, ConvLSTM2D's or ConvLSTM3D's form (conv_lstm2d.c; for the ONNX export):
 * rank 1, 2 or 3, the window k, strides s and dilation dil as (depth, height, width), 1 on
 * the axes a lower rank lacks; same (else valid) padding of the input convolution; the
 * activations; use_bias, go_backwards, return_sequences. 0 for any other layer. */
typedef struct tfc_conv_lstm_desc {
    int rank, filters, k[3], s[3], dil[3], same, act, ract, use_bias, go_backwards,
        return_sequences;
} tfc_conv_lstm_desc;
int tfc_layer_conv_lstm_desc(const tfc_layer *l, tfc_conv_lstm_desc *d);

/* A numeric preprocessing layer's map and encoding (encoding.c: CategoryEncoding,
 * Discretization, IntegerLookup, Hashing; rows unset; for the ONNX export), its table the
 * layer's constant parameter `table`; NULL for any other layer. */
const tfc_encode_desc *tfc_layer_encode_desc(const tfc_layer *l);

/* Conv2DTranspose's convolution D, for one image (conv2d_transpose.c; for the ONNX export):
 * the layer's output is D's input, its input D's output. */
tfc_conv_desc tfc_layer_transposed_conv(const tfc_layer *l);
/* One axis of a transposed convolution (Keras 3 on JAX; conv2d_transpose.c): from the input
 * size `in`, kernel k, stride s, dilation dil, same or valid padding and output_padding op
 * (-1: none), the output size and the top padding of the convolution D it is the transpose
 * of (D's input is the output). */
void tfc_layer_transpose_axis(int in, int k, int s, int dil, int same, int op, int *out,
                              int *pad);
/* Conv3DTranspose's convolution D, for one volume (conv3d_transpose.c; for the ONNX export):
 * the layer's output is D's input, its input D's output. */
tfc_conv3d_desc tfc_layer_transposed_conv3d(const tfc_layer *l);

/* The depthwise step of DepthwiseConv2D and SeparableConv2D for a batch of n
 * (depthwise_conv2d.c): input (h, w, c), kernel k, strides s, dilation d, TensorFlow's `same`
 * or valid padding, m filters per channel (f = c m output channels). */
tfc_conv_desc tfc_layer_depthwise_desc(const tfc_shape *in, const int k[2], const int s[2],
                                       const int d[2], int same, int m, int n);
/* The backend ops of that step, NULL-terminated: both layers' `needs`. */
extern const char *const tfc_layer_depthwise_ops[];

/* The grouped convolution of Conv1D and Conv2D with groups > 1: the backend ops it calls
 * (NULL-terminated: the layers' `needs`), conv_forward's contract for it (the grouped
 * convolution into y, then the epilogue op by op: bias, bn, residual, act, pool; bias, bn,
 * residual and pool may be NULL) and its backward (dw += ...; dx, unless NULL, += ... or,
 * with assign, = ...). The kernel w is [kh, kw, c / groups, f] (Keras's layout). */
extern const char *const tfc_layer_grouped_ops[];
void tfc_layer_grouped_forward(tfc_backend *be, const tfc_conv_desc *d, int groups,
                               const float *x, const float *w, const float *bias,
                               const tfc_bn_params *bn, const float *residual, tfc_act act,
                               float *y, const tfc_pool_desc *pool, float *pooled);
void tfc_layer_grouped_backward(tfc_backend *be, const tfc_conv_desc *d, int groups,
                                const float *x, const float *w, const float *dy, float *dw,
                                float *dx, int assign);
/* Checks that `groups` divides the input's `channels` and the layer's `filters`; else a
 * build error of l naming groups. */
tfc_status tfc_layer_check_groups(const tfc_layer *l, int groups, int64_t channels,
                                  int filters, tfc_error *err);

/* An image layer's input check: TFC_OK when l's input is (height, width, channels), else a
 * positioned error naming the shape found. */
tfc_status tfc_layer_need_image(const tfc_layer *l, tfc_error *err);

/* TFC_OK when l's input has ndim dimensions, else a positioned error "needs WHAT, got SHAPE"
 * with a hint of the reshape most likely meant (an image's channel axis, a vector's steps of
 * one feature, an image's rows as steps), where there is one. */
tfc_status tfc_layer_need_rank(const tfc_layer *l, int ndim, const char *what, tfc_error *err);

/* Reads an initializer argument of layer l (`node` may be NULL: `def`). */
tfc_status tfc_layer_init_arg(const tfc_layer *l, const tfc_node *node, const char *arg,
                              tfc_init_kind def, tfc_init *out, tfc_error *err);

/* Whether l is a ReLU, LeakyReLU or ELU layer running the pact ops (arguments no tfc_act
 * has; without them it is pure_act, an Activation); if so fills *d (ONNX export). */
int tfc_layer_pact(const tfc_layer *l, tfc_pact_desc *d);

/* Elements of one example's output. */
int64_t tfc_layer_out_numel(const tfc_layer *l);

/* The registry, in one array (registry.c). Lookup takes Keras's other names for a class too
 * (MaxPool2D, Convolution2D) and returns NULL when the type is unknown. */
extern const tfc_layer_ops *const tfc_layer_registry[];
const tfc_layer_ops *tfc_layer_lookup(const char *type);
/* NULL-terminated list of type names, for did-you-mean and --help. */
const char *const *tfc_layer_type_names(void);

/* Shared argument helpers. `padding:` of Conv2D and the poolings, an index into
 * tfc_padding_names. */
typedef enum tfc_padding {
    TFC_PADDING_VALID = 0, /* no padding: windows stay inside the input */
    TFC_PADDING_SAME,      /* out = ceil(in / stride), zeros around the input */
    TFC_PADDING_COUNT
} tfc_padding;
extern const char *const tfc_padding_names[TFC_PADDING_COUNT + 1]; /* NULL-terminated */
/* TFC_OK unless l's arguments hold a data_format (TFC_DATA_FORMAT_FIELD) other than
 * channels_last; then a build error of l naming data_format. */
tfc_status tfc_layer_channels_last(const tfc_layer *l, tfc_error *err);
/* TFC_OK when the list argument `arg` of l holds one integer (a 1-D layer's kernel_size,
 * strides, ...: Keras takes an integer or a tuple of one); else a build error naming it. */
tfc_status tfc_layer_one_int(const tfc_layer *l, const char *arg, const tfc_int_list *v,
                             tfc_error *err);
/* The list argument `arg` of a 3-D layer (Conv3D's kernel_size, a 3-D pooling's pool_size,
 * ...) as three integers in out (depth, height, width): one integer stands for all three, as
 * Keras takes it; an empty list (an optional argument not given) gives def. TFC_OK, or a
 * build error naming the argument when it holds another count. */
tfc_status tfc_layer_int3(const tfc_layer *l, const char *arg, const tfc_int_list *v, int def,
                          int out[3], tfc_error *err);
/* The window of a 1-D layer run as its 2-D twin over a 1 x steps image (DepthwiseConv1D,
 * SeparableConv1D, Conv1DTranspose): TFC_OK when l's input is (steps, channels) and the list
 * arguments kernel_size k, strides s and dilation_rate d each hold one integer, which it
 * writes into the 2-D pairs k2, s2, d2 as {1, v}; else a build error naming the argument or
 * the shape. */
tfc_status tfc_layer_window1d(const tfc_layer *l, const tfc_int_list *k, const tfc_int_list *s,
                              const tfc_int_list *d, int k2[2], int s2[2], int d2[2],
                              tfc_error *err);
/* Output size and leading padding of one spatial axis, TensorFlow's rules:
 * valid: out = ceil((in - (k - 1) * d) / s), pad 0;
 * same:  out = ceil(in / s), total pad = max((out - 1) * s + (k - 1) * d + 1 - in, 0),
 *        pad_before = total / 2 (the extra row goes after). */
void tfc_conv_axis(int in, int k, int s, int d, int same, int *out, int *pad_before);

#endif
