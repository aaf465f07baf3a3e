/* What the recurrent layers (LSTM, GRU, SimpleRNN, and Bidirectional through them) share:
 * the Keras arguments of keras.layers.RNN and its cells that they all take, and the input a
 * layer feeds its kernel when it goes backwards or drops inputs out:
 *   x'[i, s] = x[i, s'] keep[i],  s' = go_backwards ? t - 1 - s : s,
 * keep one Bernoulli(1 - dropout) / (1 - dropout) mask per sequence and feature, the same at
 * every step (Keras's DropoutRNNCell), drawn from Philox at (the layer's key, step, index).
 * Going backwards reverses the mask with the sequence (Keras reverses the whole padded
 * sequence); the output is in that reversed order, as Keras returns it. */
#ifndef TFC_LAYERS_RNN_H
#define TFC_LAYERS_RNN_H

#include "layers/layer.h"

/* The arguments' struct of LSTM, GRU and SimpleRNN starts with this (member `rnn`); its
 * activation and recurrent_activation (LSTM, GRU) are tfc_acts (tfc_act_names). */
typedef struct tfc_rnn_args {
    int units, activation, recurrent_activation, use_bias, return_sequences, return_state,
        go_backwards, stateful, unroll, seed, use_cudnn, implementation;
    double dropout, recurrent_dropout;
    const tfc_node *kernel_initializer, *recurrent_initializer, *bias_initializer;
    int gate_masks; /* set by build: the cell drops its input per gate under recurrent
                     * dropout or with implementation 1 (LSTM, GRU: Keras's implementation 1),
                     * not through rnn_input */
} tfc_rnn_args;

extern const char *const tfc_rnn_use_cudnn_names[];

/* The schema entries of tfc_rnn_args in an arguments struct `type`: LSTM's and GRU's (any
 * elementwise activations, use_cudnn) */
#define TFC_RNN_FIELDS(type)                                                                    \
    TFC_RNN_UNITS_FIELD(type),                                                                  \
    {"activation", TFC_F_ENUM, offsetof(type, rnn.activation), "tanh", TFC_UNBOUNDED,          \
     tfc_act_names, "the candidate's and the output's activation (null: linear; not "         \
     "softmax)"},                                                                              \
    {"recurrent_activation", TFC_F_ENUM, offsetof(type, rnn.recurrent_activation), "sigmoid",  \
     TFC_UNBOUNDED, tfc_act_names, "the gates' activation (null: linear; not softmax)"},       \
    TFC_RNN_COMMON_FIELDS(type),                                                                \
    {"use_cudnn", TFC_F_ENUM, offsetof(type, rnn.use_cudnn), "auto", TFC_UNBOUNDED,            \
     tfc_rnn_use_cudnn_names, "accepted: tfc runs its own kernels, never cuDNN's RNN"},        \
    {"implementation", TFC_F_INT, offsetof(type, rnn.implementation), "2", 1, 2, NULL,         \
     "Keras 3's cell mode: 1 drops the input with a mask per gate (as under "                 \
     "recurrent_dropout); the same numbers without dropout"}

#define TFC_RNN_UNITS_FIELD(type)                                                               \
    {"units", TFC_F_INT, offsetof(type, rnn.units), NULL, 1, 1 << 16, NULL, "state size"}

/* Every recurrent layer's (SimpleRNN's too) but units and the activations */
#define TFC_RNN_COMMON_FIELDS(type)                                                             \
    {"use_bias", TFC_F_BOOL, offsetof(type, rnn.use_bias), "true", TFC_UNBOUNDED, NULL,        \
     "add a bias"},                                                                            \
    {"dropout", TFC_F_FLOAT, offsetof(type, rnn.dropout), "0", 0, 0.999999, NULL,              \
     "fraction of the inputs to drop (one mask per sequence)"},                                \
    {"recurrent_dropout", TFC_F_FLOAT, offsetof(type, rnn.recurrent_dropout), "0", 0,          \
     0.999999, NULL, "fraction of the state to drop where it meets each gate (a mask per "    \
     "sequence; training, CPU)"},                                                              \
    {"seed", TFC_F_INT, offsetof(type, rnn.seed), "0", 0, 2147483647, NULL,                    \
     "mixed into the run's seed for the dropout masks"},                                       \
    {"return_sequences", TFC_F_BOOL, offsetof(type, rnn.return_sequences), "false",            \
     TFC_UNBOUNDED, NULL, "output every step, not only the last"},                             \
    {"return_state", TFC_F_BOOL, offsetof(type, rnn.return_state), "false", TFC_UNBOUNDED,     \
     NULL, "false only (a layer has one output)"},                                             \
    {"go_backwards", TFC_F_BOOL, offsetof(type, rnn.go_backwards), "false", TFC_UNBOUNDED,     \
     NULL, "run over the reversed sequence (output in that order)"},                           \
    {"stateful", TFC_F_BOOL, offsetof(type, rnn.stateful), "false", TFC_UNBOUNDED, NULL,       \
     "false only (not supported)"},                                                            \
    {"unroll", TFC_F_BOOL, offsetof(type, rnn.unroll), "false", TFC_UNBOUNDED, NULL,           \
     "accepted; the same results either way"},                                                 \
    {"kernel_initializer", TFC_F_NODE, offsetof(type, rnn.kernel_initializer),                 \
     TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL, "default glorot_uniform"},                           \
    {"recurrent_initializer", TFC_F_NODE, offsetof(type, rnn.recurrent_initializer),           \
     TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL, "default orthogonal"},                               \
    TFC_KERNEL_BIAS_KERAS_FIELDS, TFC_REGULARIZER_FIELD("recurrent_regularizer"),              \
    TFC_CONSTRAINT_FIELD("recurrent_constraint")

/* Checks the input (steps, features) and the arguments tfc does not support (return_state,
 * stateful; the LSTM's and GRU's softmax), naming them; takes the YAML's `activation: null`
 * and `recurrent_activation: null` as Keras's None, linear (where a null argument elsewhere
 * takes the default); sets l->out_shape and l->mask_out. */
tfc_status tfc_rnn_build(tfc_layer *l, tfc_rnn_args *a, tfc_error *err);

/* Reads kernel_initializer (default glorot_uniform), recurrent_initializer (orthogonal) and
 * bias_initializer (zeros). */
tfc_status tfc_rnn_initializers(const tfc_layer *l, const tfc_rnn_args *a, tfc_init *kernel,
                                tfc_init *recurrent, tfc_init *bias, tfc_error *err);

/* Floats per example the layer saves besides its kernel's: the prepared input and, going
 * backwards under a mask, the reversed mask. */
int64_t tfc_rnn_saved_floats(const tfc_layer *l, const tfc_rnn_args *a);

/* Workspace bytes: the kernel's (kernel_ws) and the prepared input's gradient after it. */
size_t tfc_rnn_workspace(const tfc_layer *l, const tfc_rnn_args *a, size_t kernel_ws);

/* The ops of TFC_BACKEND_LAYER_OPS the input and the recurrent dropout need
 * (NULL-terminated; none: an empty list); tfc_rnn_needs_index tells which of the four lists
 * that is (bit 0: the input's rnn_input ops, bit 1: rnn_dropout's), for a layer that lists
 * its own ops with them. A backend without rnn_dropout (the GPU's, so far) refuses a layer
 * with recurrent_dropout or tfc_rnn_any_acts, naming it. */
#define TFC_RNN_INPUT_OPS "rnn_input_forward", "rnn_input_backward"
#define TFC_RNN_DROPOUT_OPS "rnn_dropout_workspace", "rnn_dropout_forward", "rnn_dropout_backward"
const char *const *tfc_rnn_needs(const tfc_rnn_args *a);
int tfc_rnn_needs_index(const tfc_rnn_args *a);

/* What the kernel reads, from the layer's input x and `extra` (its saved floats past the
 * kernel's, tfc_rnn_saved_floats of them per example): the input (x itself, or prepared
 * into extra) and the mask (l->mask, or reversed into extra; NULL without one). forward
 * prepares them; the backward pass reads what forward left (rnn_mask, rnn_input). */
const float *tfc_rnn_forward_input(tfc_layer *l, const tfc_rnn_args *a, tfc_exec *ex,
                                   const float *x, float *extra, const float **mask);
const float *tfc_rnn_input(const tfc_layer *l, const tfc_rnn_args *a, const tfc_exec *ex,
                           const float *x, float *extra);
const float *tfc_rnn_mask(const tfc_layer *l, const tfc_rnn_args *a, float *extra);

/* Backward: where the kernel adds its input's gradient (the workspace past kernel_ws,
 * zeroed, when the input was prepared; else dx, which may be NULL), and then dx += that
 * gradient taken back through the preparation (tfc_rnn_input_done). */
float *tfc_rnn_dx(const tfc_layer *l, const tfc_rnn_args *a, tfc_exec *ex, size_t kernel_ws,
                  float *dx);
void tfc_rnn_input_done(const tfc_layer *l, const tfc_rnn_args *a, tfc_exec *ex, float *dxp,
                        float *dx);

/* Recurrent dropout (Keras 3's recurrent_dropout > 0; and an LSTM's or GRU's dropout with
 * implementation 1, Keras's per-gate input masks): a training pass runs the backend's
 * rnn_dropout_forward/backward (core/backend.h) in place of the cell's own op, with the same
 * saved floats (h, then the cell's state); inference runs the cell's own op, which dropout
 * leaves alone. Under it the LSTM and GRU drop their input with one mask per gate
 * (gate_masks), inside that op, so rnn_input only reverses it.
 * tfc_rnn_recurrent: whether pass ex is such a pass. */
int tfc_rnn_recurrent(const tfc_rnn_args *a, const tfc_exec *ex);
/* An LSTM or GRU whose activations are not Keras's defaults (tanh, sigmoid), which the fused
 * ops do not compute: every pass runs rnn_dropout_forward/backward (rates 0 outside a
 * recurrent-dropout training pass), whose state then keeps the gates' pre-activations too
 * (tfc_rnn_dropout_any_acts; tfc_rnn_state_floats). tfc_rnn_stepped: whether pass ex runs
 * those ops, for either reason. */
int tfc_rnn_any_acts(const tfc_rnn_args *a);
int tfc_rnn_stepped(const tfc_rnn_args *a, const tfc_exec *ex);
/* Floats per step of the cell's saved state besides h: `fused`, the fused op's (which
 * rnn_dropout_forward's share), or with tfc_rnn_any_acts the pre-activations' gates u more */
int64_t tfc_rnn_state_floats(const tfc_rnn_args *a, int gates, int64_t fused);
/* The pass's description for `cell` (reset_after: the GRU's), its activations a's, for
 * ex->batch sequences (max_batch when ex is NULL, for the workspace); its rates 0 unless ex is
 * a recurrent-dropout training pass. */
tfc_rnn_dropout_desc tfc_rnn_dropout_desc_of(const tfc_layer *l, const tfc_rnn_args *a,
                                             const tfc_exec *ex, tfc_rnn_cell cell,
                                             int reset_after);
/* The kernel's workspace `own`, or rnn_dropout_workspace's where that is larger (a layer with
 * recurrent dropout or tfc_rnn_any_acts, on a backend with the op) */
size_t tfc_rnn_kernel_ws(const tfc_layer *l, const tfc_rnn_args *a, tfc_backend *be,
                         tfc_rnn_cell cell, int reset_after, size_t own);

/* A built Bidirectional's direction k (0 forward, 1 backward): the inner layer it runs, whose
 * arguments and parameter names (without the forward_<inner>/ prefix) it has. */
const tfc_layer *tfc_bidirectional_direction(const tfc_layer *l, int k);

/* The schema of Keras's cell `type` (LSTMCell, GRUCell, SimpleRNNCell): its layer's (LSTM,
 * GRU, SimpleRNN) without the RNN's own arguments, into out (cap fields with the ending
 * {NULL}); returns the count, or -1 for another type (rnn_layer.c). */
int tfc_rnn_cell_schema(const char *type, tfc_field *out, int cap);

/* A built RNN's cell k (0 .. *ncells - 1, a StackedRNNCells's in order): the recurrent layer
 * it runs, whose arguments and weights (under their own names) it has; its weights' data are
 * bound only while the RNN runs. */
const tfc_layer *tfc_rnn_layer_cell(const tfc_layer *l, int k, int *ncells);

#endif
