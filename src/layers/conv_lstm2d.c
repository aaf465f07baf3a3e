/* ConvLSTM2D (keras.layers.ConvLSTM2D) over a sequence of images (T, H, W, C): an LSTM whose
 * input and recurrent products are convolutions, gates in Keras's order i, f, c, o:
 *   z_t = conv(x_t, K; strides, padding, dilation) + conv(h_{t-1}, R; stride 1, same) + b
 *   i, f, o = sigmoid(z_i, z_f, z_o),  g = tanh(z_c),  c_t = f c_{t-1} + i g,  h_t = o tanh(c_t)
 * (sigmoid: recurrent_activation, tanh: activation, any of Keras's elementwise activations:
 * keras.io's next-frame example's relu)
 * K [kh, kw, C, 4F], R [kh, kw, F, 4F], b [4F] (Keras's layouts; the gate of channel j is
 * j / F), h and c (oh, ow, F) starting at zero. Output: h_T (oh, ow, F), or every h_t
 * (T, oh, ow, F) with return_sequences; go_backwards runs over the reversed sequence and
 * returns the outputs in that order, as Keras does. ConvLSTM1D (keras.layers.ConvLSTM1D) is
 * the same over (T, L, C) sequences of sequences, each step a 1 x L image (as Conv1D), K
 * [k, C, 4F] and R [k, F, 4F] the 2-D ones' memory. ConvLSTM3D (keras.layers.ConvLSTM3D) is
 * the same over (T, D, H, W, C) sequences of volumes on the backend's 3-D convolution ops
 * (conv3d_*), K [kd, kh, kw, C, 4F] and R [kd, kh, kw, F, 4F]. Each type's window is kept as
 * three axes, depth, height and width (1 where a lower rank has none), and `conv` below runs
 * a convolution on the 2-D ops or the 3-D ones as the rank says.
 *
 * Made of the backend's existing ops (cpu_first until `make test-gpu` has run it): the input
 * is laid out time-major once (copy2d), its convolution taken for all T steps in one
 * conv_forward over T n images; each step adds the recurrent convolution (conv_forward's
 * residual), splits the channels into the four gates (copy2d) and runs the activations and
 * products (act_forward, mul). Backward runs back through time over the saved gates, states
 * and outputs, collecting every step's pre-activation gradient so that the input's and K's
 * gradients are again one convolution over T n images each.
 *
 * dropout, as Keras's ConvLSTM cell: four masks per sequence, one per gate, each the same at
 * every step, each gate's input convolution reading the input dropped by its own mask
 *   z_k += conv(x_t m_k, K_k),  m_k = keep / (1 - rate) from dropout_forward at the gate's key
 * (the layer's, `seed` mixed in, then the gate) and the training step: element i of every
 * step's [n, h, w, c] image draws the same uniform. The four convolutions then run one gate at
 * a time (K_k copied out of K's columns) instead of one over 4F filters.
 *
 * recurrent_dropout the same on the state (Keras's cell: four more masks, one per gate, the
 * same at every step), each gate's recurrent convolution reading h_{t-1} under its own mask
 *   z_k += conv(h_{t-1} r_k, R_k),  r_k from dropout_forward at the key's stream 5 + k
 * element i of [n, oh, ow, f] drawing the same uniform at every step; the four recurrent
 * convolutions then run one gate at a time (R_k copied out of R's columns once a pass). */
#include "layers/layer.h"

#include "core/rng.h"

extern const tfc_layer_ops tfc_conv_lstm1d_ops, tfc_conv_lstm2d_ops, tfc_conv_lstm3d_ops;

/* ConvLSTM1D's and ConvLSTM3D's kernel_size, strides and dilation_rate (kl, sl, dl: an
 * integer or a list of one or three, as Conv1D's and Conv3D's), and ConvLSTM2D's pairs, become
 * the triples k, s, dil (depth, height, width; 1 on the axes a lower rank lacks) at build;
 * rank says which type it is. */
typedef struct conv_lstm_args {
    int filters, kernel_size[2], strides[2], padding, dilation_rate[2], activation,
        recurrent_activation, use_bias, unit_forget_bias, seed, return_sequences, return_state,
        go_backwards, stateful, rank;
    int k[3], s[3], dil[3];
    double dropout, recurrent_dropout;
    tfc_int_list kl, sl, dl;
    const tfc_node *kernel_initializer, *recurrent_initializer, *bias_initializer;
} conv_lstm_args;

#define OFF(m) offsetof(conv_lstm_args, m)
/* Every argument but the window's (kernel_size, strides, dilation_rate) */
/* first, as Keras's first parameter (a scalar item is it: `- ConvLSTM2D: 8` is filters) */
#define FILTERS_FIELD                                                                           \
    {"filters", TFC_F_INT, OFF(filters), NULL, 1, 1 << 16, NULL, "state channels"}
#define CONV_LSTM_COMMON_FIELDS                                                                 \
    {"padding", TFC_F_ENUM, OFF(padding), "valid", TFC_UNBOUNDED, tfc_padding_names,           \
     "the input convolution's: valid or same (the recurrent one's is same)"},                  \
    TFC_IMAGE_DATA_FORMAT_FIELD,                                                               \
    {"activation", TFC_F_ENUM, OFF(activation), "tanh", TFC_UNBOUNDED, tfc_act_names,           \
     "the candidate's and the output's activation (not softmax)"},                              \
    {"recurrent_activation", TFC_F_ENUM, OFF(recurrent_activation), "sigmoid", TFC_UNBOUNDED,   \
     tfc_act_names, "the gates' activation (not softmax)"},                                     \
    {"use_bias", TFC_F_BOOL, OFF(use_bias), "true", TFC_UNBOUNDED, NULL, "add a bias"},         \
    {"kernel_initializer", TFC_F_NODE, OFF(kernel_initializer), TFC_NO_DEFAULT, TFC_UNBOUNDED,  \
     NULL, "default glorot_uniform"},                                                           \
    {"recurrent_initializer", TFC_F_NODE, OFF(recurrent_initializer), TFC_NO_DEFAULT,           \
     TFC_UNBOUNDED, NULL, "default orthogonal (of the kernel as a (kh kw F, 4F) matrix)"},      \
    {"bias_initializer", TFC_F_NODE, OFF(bias_initializer), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,\
     "default zeros (forget gate 1 with unit_forget_bias)"},                                    \
    {"unit_forget_bias", TFC_F_BOOL, OFF(unit_forget_bias), "true", TFC_UNBOUNDED, NULL,        \
     "start the forget gate's bias at 1"},                                                      \
    TFC_KERNEL_BIAS_KERAS_FIELDS, TFC_REGULARIZER_FIELD("recurrent_regularizer"),               \
    TFC_CONSTRAINT_FIELD("recurrent_constraint"),                                               \
    {"dropout", TFC_F_FLOAT, OFF(dropout), "0", 0, 0.999999, NULL,                              \
     "fraction of the inputs to drop: four masks per sequence, one per gate"},                  \
    {"recurrent_dropout", TFC_F_FLOAT, OFF(recurrent_dropout), "0", 0, 0.999999, NULL,          \
     "fraction of the state to drop: four masks per sequence, one per gate"},                   \
    {"seed", TFC_F_INT, OFF(seed), "0", 0, 2147483647, NULL,                                    \
     "mixed into the run's seed for the dropout masks"},                                        \
    {"return_sequences", TFC_F_BOOL, OFF(return_sequences), "false", TFC_UNBOUNDED, NULL,       \
     "output every step, not only the last"},                                                   \
    {"return_state", TFC_F_BOOL, OFF(return_state), "false", TFC_UNBOUNDED, NULL,               \
     "false only (a layer has one output)"},                                                    \
    {"go_backwards", TFC_F_BOOL, OFF(go_backwards), "false", TFC_UNBOUNDED, NULL,               \
     "run over the reversed sequence (output in that order)"},                                  \
    {"stateful", TFC_F_BOOL, OFF(stateful), "false", TFC_UNBOUNDED, NULL,                       \
     "false only (not supported)"}

static const tfc_field conv_lstm_fields[] = {
    FILTERS_FIELD,
    {"kernel_size", TFC_F_INT_PAIR, OFF(kernel_size), NULL, 1, 4096, NULL,
     "kernel height and width (of both convolutions)"},
    {"strides", TFC_F_INT_PAIR, OFF(strides), "1", 1, 4096, NULL,
     "the input convolution's stride"},
    {"dilation_rate", TFC_F_INT_PAIR, OFF(dilation_rate), "1", 1, 4096, NULL,
     "the input convolution's dilation"},
    CONV_LSTM_COMMON_FIELDS,
    {NULL}};

static const tfc_field conv_lstm1d_fields[] = {
    FILTERS_FIELD,
    {"kernel_size", TFC_F_INT_LIST, OFF(kl), NULL, 1, 4096, NULL,
     "window length (of both convolutions)"},
    {"strides", TFC_F_INT_LIST, OFF(sl), "1", 1, 4096, NULL, "the input convolution's stride"},
    {"dilation_rate", TFC_F_INT_LIST, OFF(dl), "1", 1, 4096, NULL,
     "the input convolution's dilation"},
    CONV_LSTM_COMMON_FIELDS,
    {NULL}};

static const tfc_field conv_lstm3d_fields[] = {
    FILTERS_FIELD,
    {"kernel_size", TFC_F_INT_LIST, OFF(kl), NULL, 1, 4096, NULL,
     "window depth, height and width (of both convolutions)"},
    {"strides", TFC_F_INT_LIST, OFF(sl), "1", 1, 4096, NULL, "the input convolution's stride"},
    {"dilation_rate", TFC_F_INT_LIST, OFF(dl), "1", 1, 4096, NULL,
     "the input convolution's dilation"},
    CONV_LSTM_COMMON_FIELDS,
    {NULL}};
#undef FILTERS_FIELD
#undef OFF

/* Whether the gates' pre-activations are kept for backward: tanh's and sigmoid's derivatives
 * are taken from their outputs (the defaults keep what they always did), any other
 * activation's from its input. */
static int keeps_pre(const conv_lstm_args *a)
{
    return a->activation != TFC_ACT_TANH || a->recurrent_activation != TFC_ACT_SIGMOID;
}

/* The sizes of a built layer: T steps of (d, h, w, c) volumes, states (od, oh, ow, f). */
typedef struct dims {
    int64_t t, hwc, p, f; /* hwc: one step's input floats; p = od oh ow: a state's pixels */
} dims;

/* One step's input as a volume (depth, height, width; ConvLSTM2D's image is 1 deep,
 * ConvLSTM1D's (length, channels) 1 x 1 x length) and its channels */
static void volume_of(const tfc_layer *l, int in[3], int *c)
{
    const conv_lstm_args *a = l->args;
    const int64_t *dim = l->in_shape[0].dim;
    for (int ax = 0; ax < 3; ax++) in[ax] = ax < 3 - a->rank ? 1 : (int)dim[ax - 2 + a->rank];
    *c = (int)dim[a->rank + 1];
}

/* One of the layer's convolutions: on the 2-D ops (three = 0; ConvLSTM1D, ConvLSTM2D) or the
 * 3-D ones */
typedef struct conv {
    int three;
    tfc_conv_desc d2;
    tfc_conv3d_desc d3;
} conv;

/* n volumes in[] of c channels into f filters, window k, s, dil (depth, height, width) */
static conv conv_make(int three, int n, const int in[3], int c, int f, const int k[3],
                      const int s[3], const int dil[3], int same)
{
    conv v = {.three = three};
    if (three) {
        v.d3 = (tfc_conv3d_desc){.n = n, .c = c, .f = f, .groups = 1};
        for (int ax = 0; ax < 3; ax++) {
            v.d3.in[ax] = in[ax];
            v.d3.k[ax] = k[ax];
            v.d3.s[ax] = s[ax];
            v.d3.dil[ax] = dil[ax];
            tfc_conv_axis(in[ax], k[ax], s[ax], dil[ax], same, &v.d3.out[ax], &v.d3.pad[ax]);
        }
    } else {
        v.d2 = (tfc_conv_desc){.n = n, .h = in[1], .w = in[2], .c = c, .kh = k[1], .kw = k[2],
                               .f = f, .sh = s[1], .sw = s[2], .dh = dil[1], .dw = dil[2]};
        tfc_conv_axis(in[1], k[1], s[1], dil[1], same, &v.d2.oh, &v.d2.pad_top);
        tfc_conv_axis(in[2], k[2], s[2], dil[2], same, &v.d2.ow, &v.d2.pad_left);
    }
    return v;
}

/* The output's depth, height and width (depth 1 on the 2-D ops) */
static void conv_out(const conv *v, int out[3])
{
    if (v->three) {
        for (int ax = 0; ax < 3; ax++) out[ax] = v->d3.out[ax];
    } else {
        out[0] = 1;
        out[1] = v->d2.oh;
        out[2] = v->d2.ow;
    }
}

static size_t conv_workspace_of(tfc_backend *be, const conv *v)
{
    return v->three ? be->ops->conv3d_workspace(be, &v->d3)
                    : be->ops->conv_workspace(be, &v->d2);
}

/* y = conv(x, w) + bias + residual (bias, residual NULL: none) */
static void conv_run(tfc_backend *be, const conv *v, const float *x, const float *w,
                     const float *bias, const float *residual, float *y, void *ws)
{
    if (!v->three) {
        be->ops->conv_forward(be, &v->d2, x, w, bias, NULL, residual, TFC_ACT_LINEAR, y, NULL,
                              NULL, ws);
        return;
    }
    be->ops->conv3d_forward(be, &v->d3, x, w, bias, y, ws);
    if (residual) {
        int out[3];
        conv_out(v, out);
        be->ops->add(be, (int64_t)v->d3.n * out[0] * out[1] * out[2] * v->d3.f, y, residual,
                     TFC_ACT_LINEAR, y);
    }
}

/* dx += dy (*)^T w (= with assign); x is the forward's input (the 3-D ops take it) */
static void conv_data(tfc_backend *be, const conv *v, const float *x, const float *dy,
                      const float *w, float *dx, int assign, void *ws)
{
    if (v->three)
        be->ops->conv3d_backward(be, &v->d3, x, w, dy, dx, NULL, assign, ws);
    else
        be->ops->conv_backward_data(be, &v->d2, dy, w, dx, assign, ws);
}

/* dw += x (*) dy */
static void conv_filter(tfc_backend *be, const conv *v, const float *x, const float *dy,
                        float *dw, void *ws)
{
    if (v->three)
        be->ops->conv3d_backward(be, &v->d3, x, NULL, dy, NULL, dw, 0, ws);
    else
        be->ops->conv_backward_filter(be, &v->d2, x, dy, dw, ws);
}

/* The input convolution over n volumes (T n of them for a whole batch), of gates gates'
 * filters (4; 1 for one gate's) */
static conv input_conv_f(const tfc_layer *l, int n, int gates)
{
    const conv_lstm_args *a = l->args;
    int in[3], c;
    volume_of(l, in, &c);
    return conv_make(a->rank == 3, n, in, c, gates * a->filters, a->k, a->s, a->dil,
                     a->padding == TFC_PADDING_SAME);
}

static conv input_conv(const tfc_layer *l, int n)
{
    return input_conv_f(l, n, 4);
}

/* The recurrent convolution of n states: stride 1, same padding, no dilation (Keras's), of
 * gates gates' filters (4; 1 for one gate's) */
static conv recurrent_conv_f(const tfc_layer *l, int n, int gates)
{
    const conv_lstm_args *a = l->args;
    conv in = input_conv(l, 1);
    int out[3];
    conv_out(&in, out);
    return conv_make(a->rank == 3, n, out, a->filters, gates * a->filters, a->k,
                     (const int[3]){1, 1, 1}, (const int[3]){1, 1, 1}, 1);
}

static conv recurrent_conv(const tfc_layer *l, int n)
{
    return recurrent_conv_f(l, n, 4);
}

static dims dims_of(const tfc_layer *l)
{
    const conv_lstm_args *a = l->args;
    int in[3], c, out[3];
    volume_of(l, in, &c);
    conv v = input_conv(l, 1);
    conv_out(&v, out);
    dims d = {.t = l->in_shape[0].dim[0], .hwc = (int64_t)in[0] * in[1] * in[2] * c,
              .p = (int64_t)out[0] * out[1] * out[2], .f = a->filters};
    return d;
}

/* Every type's build; a->rank, k, s and dil set */
static tfc_status conv_lstm_build(tfc_layer *l, tfc_error *err)
{
    const conv_lstm_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    char buf[96];
    static const char *const wants[] = {
        NULL, "a sequence of sequences, input shape (steps, length, channels)",
        "a sequence of images, input shape (steps, height, width, channels)",
        "a sequence of volumes, input shape (steps, depth, height, width, channels)"};
    if (in->ndim != a->rank + 2)
        return tfc_layer_error(err, l, "needs %s, got %s", wants[a->rank],
                               tfc_shape_str(in, buf, sizeof buf));
    if (l->mask_in)
        return tfc_layer_error(err, l, "a sequence mask (Masking, Embedding's mask_zero) is not "
                                       "supported");
    if (a->return_state)
        return tfc_layer_error(err, l, "return_state: not supported (a layer has one output)");
    if (a->stateful) return tfc_layer_error(err, l, "stateful: not supported");
    if ((a->s[0] > 1 || a->s[1] > 1 || a->s[2] > 1) &&
        (a->dil[0] > 1 || a->dil[1] > 1 || a->dil[2] > 1))
        return tfc_layer_error(err, l, "strides > 1 with dilation_rate > 1 is not supported "
                                       "(as in Keras)");
    int64_t numel = 1;
    for (int i = 1; i < in->ndim; i++) numel *= in->dim[i];
    if (a->rank == 3 && (in->dim[4] > (1 << 24) || numel > INT32_MAX))
        return tfc_layer_error(err, l, "input %s is too large", tfc_shape_str(in, buf, sizeof buf));
    conv v = input_conv(l, 1);
    int out[3];
    conv_out(&v, out);
    if (out[0] < 1 || out[1] < 1 || out[2] < 1) {
        if (a->rank == 3)
            return tfc_layer_error(err, l, "input %s is smaller than the %dx%dx%d kernel "
                                           "(dilation %dx%dx%d) with valid padding",
                                   tfc_shape_str(in, buf, sizeof buf), a->k[0], a->k[1],
                                   a->k[2], a->dil[0], a->dil[1], a->dil[2]);
        return tfc_layer_error(err, l,
                               "input %s is smaller than the %dx%d kernel (dilation %dx%d) with "
                               "valid padding",
                               tfc_shape_str(in, buf, sizeof buf), a->k[1], a->k[2], a->dil[1],
                               a->dil[2]);
    }
    const int64_t t = in->dim[0], f = a->filters;
    /* (T,) then the output's last `rank` axes, then F */
    int64_t shape[5];
    int nd = 0;
    if (a->return_sequences) shape[nd++] = t;
    for (int ax = 3 - a->rank; ax < 3; ax++) shape[nd++] = out[ax];
    shape[nd++] = f;
    l->out_shape = tfc_shape_make(nd, shape);
    if (a->activation == TFC_ACT_SOFTMAX || a->recurrent_activation == TFC_ACT_SOFTMAX)
        return tfc_layer_error(err, l, "%s softmax is not supported (an activation of each "
                               "state channel alone is)", a->activation == TFC_ACT_SOFTMAX
                                                          ? "activation" : "recurrent_activation");
    /* per step: the four gates after their activations, c_t and h_t; with activations other
     * than Keras's defaults also the gates' pre-activations (saved_parts) */
    l->saved_floats = t * (keeps_pre(a) ? 10 : 6) * (int64_t)out[0] * out[1] * out[2] * f;
    tfc_init ki, ri, bi;
    if (tfc_layer_init_arg(l, a->kernel_initializer, "kernel_initializer",
                           TFC_INIT_GLOROT_UNIFORM, &ki, err) ||
        tfc_layer_init_arg(l, a->recurrent_initializer, "recurrent_initializer",
                           TFC_INIT_ORTHOGONAL, &ri, err) ||
        tfc_layer_init_arg(l, a->bias_initializer, "bias_initializer", TFC_INIT_ZEROS, &bi, err))
        return TFC_ERR_CONFIG;
    if (a->unit_forget_bias && !a->bias_initializer) bi = tfc_init_make(TFC_INIT_LSTM_BIAS);
    /* Keras's (window..., c, 4f), the window's last `rank` axes: ConvLSTM1D's (kw, c, 4f) is
     * the (1, kw, c, 4f) of the 2-D convolution in the same memory */
    int64_t ks[5], rs[5];
    nd = 0;
    for (int ax = 3 - a->rank; ax < 3; ax++) ks[nd] = rs[nd] = a->k[ax], nd++;
    ks[nd] = in->dim[a->rank + 1];
    rs[nd] = f;
    ks[nd + 1] = rs[nd + 1] = 4 * f;
    tfc_layer_add_param(l, "kernel", nd + 2, ks, 1, ki);
    tfc_layer_add_param(l, "recurrent_kernel", nd + 2, rs, 1, ri);
    if (a->use_bias) tfc_layer_add_param(l, "bias", 1, (int64_t[]){4 * f}, 1, bi);
    return TFC_OK;
}

static tfc_status conv_lstm2d_build(tfc_layer *l, tfc_error *err)
{
    conv_lstm_args *a = l->args;
    a->rank = 2;
    a->k[0] = a->s[0] = a->dil[0] = 1;
    for (int i = 0; i < 2; i++) {
        a->k[i + 1] = a->kernel_size[i];
        a->s[i + 1] = a->strides[i];
        a->dil[i + 1] = a->dilation_rate[i];
    }
    return conv_lstm_build(l, err);
}

/* ConvLSTM1D: its window's integers as the triples {1, 1, v} */
static tfc_status conv_lstm1d_build(tfc_layer *l, tfc_error *err)
{
    conv_lstm_args *a = l->args;
    if (tfc_layer_one_int(l, "kernel_size", &a->kl, err) ||
        tfc_layer_one_int(l, "strides", &a->sl, err) ||
        tfc_layer_one_int(l, "dilation_rate", &a->dl, err))
        return TFC_ERR_CONFIG;
    a->rank = 1;
    for (int i = 0; i < 2; i++) a->k[i] = a->s[i] = a->dil[i] = 1;
    a->k[2] = a->kl.v[0];
    a->s[2] = a->sl.v[0];
    a->dil[2] = a->dl.v[0];
    return conv_lstm_build(l, err);
}

/* ConvLSTM3D: an integer or a list of three per window argument, as Conv3D's */
static tfc_status conv_lstm3d_build(tfc_layer *l, tfc_error *err)
{
    conv_lstm_args *a = l->args;
    a->rank = 3;
    if (tfc_layer_int3(l, "kernel_size", &a->kl, 1, a->k, err) ||
        tfc_layer_int3(l, "strides", &a->sl, 1, a->s, err) ||
        tfc_layer_int3(l, "dilation_rate", &a->dl, 1, a->dil, err))
        return TFC_ERR_CONFIG;
    return conv_lstm_build(l, err);
}

static const char *const *conv_lstm3d_needs(const tfc_layer *l)
{
    (void)l;
    static const char *const needs[] = {"conv3d_workspace", "conv3d_forward", "conv3d_backward",
                                        NULL};
    return needs;
}

static size_t aligned(size_t bytes)
{
    return (bytes + 63) & ~(size_t)63;
}

/* Whether this pass drops the input out */
static int dropped(const conv_lstm_args *a, const tfc_exec *ex)
{
    return ex->training && a->dropout > 0;
}

/* Whether this pass drops the state out */
static int rdropped(const conv_lstm_args *a, const tfc_exec *ex)
{
    return ex->training && a->recurrent_dropout > 0;
}

static size_t conv_ws(const tfc_layer *l, tfc_backend *be)
{
    const conv_lstm_args *a = l->args;
    const int b = l->max_batch, t = (int)dims_of(l).t;
    conv di = input_conv(l, b * t), dr = recurrent_conv(l, b), dg = input_conv_f(l, b * t, 1),
         drg = recurrent_conv_f(l, b, 1);
    size_t ws = conv_workspace_of(be, &di), wr = conv_workspace_of(be, &dr);
    if (wr > ws) ws = wr;
    if (a->dropout > 0 && conv_workspace_of(be, &dg) > ws) ws = conv_workspace_of(be, &dg);
    if (a->recurrent_dropout > 0 && conv_workspace_of(be, &drg) > ws)
        ws = conv_workspace_of(be, &drg);
    return aligned(ws);
}

/* The workspace past the convolutions' scratch, for batches of up to l->max_batch:
 * xt [T, n, hwc]: the input time-major (in the order the steps run), then the input's
 *    gradient in that order;
 * z  [T, n, p, 4f]: the input convolution's output, then the pre-activations' gradients;
 * s  [n, p, 4f]: one step's pre-activations, or their gradients gate by gate;
 * four [n, p, f] buffers: tanh(c_t), and in backward dh, dc and a product;
 * with dropout: xd [T, n, hwc] (the input under one gate's mask, then its gradient), dxt
 * [T, n, hwc] (the time-major input's gradient), kg and dkg [kh, kw, c, f] (one gate's
 * kernel and its gradient) and zk [T, n, p, f] (one gate's pre-activations or gradient);
 * with recurrent_dropout: rk and drk [4][kh, kw, f, f] (the gates' recurrent kernels and
 * their gradients), ra and rb [n, p, f] (a state under one gate's mask, one gate's part). */
typedef struct scratch {
    float *xt, *z, *s, *tc, *dh, *dc, *tmp, *xd, *dxt, *kg, *dkg, *zk, *rk, *drk, *ra, *rb;
} scratch;

static int64_t gate_kernel_floats(const tfc_layer *l)
{
    const conv_lstm_args *a = l->args;
    int in[3], c;
    volume_of(l, in, &c);
    return (int64_t)a->k[0] * a->k[1] * a->k[2] * c * a->filters;
}

/* One gate's recurrent kernel: [kd, kh, kw, f, f] */
static int64_t rgate_kernel_floats(const tfc_layer *l)
{
    const conv_lstm_args *a = l->args;
    return (int64_t)a->k[0] * a->k[1] * a->k[2] * a->filters * a->filters;
}

static size_t scratch_floats(const tfc_layer *l)
{
    const conv_lstm_args *a = l->args;
    dims d = dims_of(l);
    const int64_t b = l->max_batch;
    int64_t floats = d.t * b * d.hwc + d.t * b * d.p * 4 * d.f + b * d.p * 4 * d.f +
                     4 * b * d.p * d.f;
    if (a->dropout > 0)
        floats += 2 * d.t * b * d.hwc + 2 * gate_kernel_floats(l) + d.t * b * d.p * d.f;
    if (a->recurrent_dropout > 0) floats += 8 * rgate_kernel_floats(l) + 2 * b * d.p * d.f;
    return (size_t)floats;
}

static scratch scratch_of(const tfc_layer *l, tfc_exec *ex)
{
    const conv_lstm_args *a = l->args;
    dims d = dims_of(l);
    const int64_t b = l->max_batch;
    scratch s;
    s.xt = (float *)((char *)ex->ws + conv_ws(l, ex->be));
    s.z = s.xt + d.t * b * d.hwc;
    s.s = s.z + d.t * b * d.p * 4 * d.f;
    s.tc = s.s + b * d.p * 4 * d.f;
    s.dh = s.tc + b * d.p * d.f;
    s.dc = s.dh + b * d.p * d.f;
    s.tmp = s.dc + b * d.p * d.f;
    s.xd = s.tmp + b * d.p * d.f;
    s.dxt = s.xd + d.t * b * d.hwc;
    s.kg = s.dxt + d.t * b * d.hwc;
    s.dkg = s.kg + gate_kernel_floats(l);
    s.zk = s.dkg + gate_kernel_floats(l);
    s.rk = a->dropout > 0 ? s.zk + d.t * b * d.p * d.f : s.xd; /* past what dropout uses */
    s.drk = s.rk + 4 * rgate_kernel_floats(l);
    s.ra = s.drk + 4 * rgate_kernel_floats(l);
    s.rb = s.ra + b * d.p * d.f;
    return s;
}

static void conv_lstm_plan(tfc_layer *l, tfc_backend *be)
{
    l->workspace = conv_ws(l, be) + scratch_floats(l) * sizeof(float);
}

/* Saved, for a batch of n: gates [T, 4, n, p, f] (i, f, g, o after their activations), then
 * c [T, n, p, f] and h [T, n, p, f], each part at its offset for l->max_batch; with
 * keeps_pre, then the gates before their activations [T, 4, n, p, f] (else *pre is NULL). */
static void saved_parts(const tfc_layer *l, float **g, float **c, float **h, float **pre)
{
    dims d = dims_of(l);
    const int64_t part = d.t * l->max_batch * d.p * d.f;
    *g = l->saved;
    *c = l->saved + 4 * part;
    *h = l->saved + 5 * part;
    *pre = keeps_pre(l->args) ? l->saved + 6 * part : NULL;
}

/* Gate k's dropout key: the layer's, its seed mixed in, then the gate */
static uint64_t gate_key(const tfc_layer *l, int k)
{
    const conv_lstm_args *a = l->args;
    uint64_t key = a->seed ? tfc_rng_key(l->rng_key, (uint64_t)a->seed) : l->rng_key;
    return tfc_rng_key(key, (uint64_t)k + 1);
}

/* Gate k's part of the dropped pass: xd = the time-major input under the gate's mask, kg =
 * the gate's columns of K */
static void gate_input(const tfc_layer *l, tfc_exec *ex, const scratch *s, int k)
{
    const conv_lstm_args *a = l->args;
    tfc_backend *be = ex->be;
    dims d = dims_of(l);
    const int64_t img = ex->batch * d.hwc; /* one step's images */
    for (int64_t t = 0; t < d.t; t++)
        be->ops->dropout_forward(be, img, (float)a->dropout, gate_key(l, k), ex->step,
                                 s->xt + t * img, s->xd + t * img);
    be->ops->copy2d(be, gate_kernel_floats(l) / d.f, (int)d.f, l->params[0].data + k * d.f,
                    (int)(4 * d.f), s->kg, (int)d.f, 0);
}

/* z = conv(x, K) + b with dropout: each gate's convolution over its own dropped input */
static void dropped_forward(const tfc_layer *l, tfc_exec *ex, const scratch *s)
{
    const conv_lstm_args *a = l->args;
    tfc_backend *be = ex->be;
    dims d = dims_of(l);
    const int64_t rows = ex->batch * d.t * d.p;
    conv dg = input_conv_f(l, ex->batch * (int)d.t, 1);
    for (int k = 0; k < 4; k++) {
        gate_input(l, ex, s, k);
        conv_run(be, &dg, s->xd, s->kg, a->use_bias ? l->params[2].data + k * d.f : NULL, NULL,
                 s->zk, ex->ws);
        be->ops->copy2d(be, rows, (int)d.f, s->zk, (int)d.f, s->z + k * d.f, (int)(4 * d.f), 0);
    }
}

/* K's gradient and the time-major input's (into s->dxt, overwritten) from the
 * pre-activations' gradients s->z, with dropout: gate by gate */
static void dropped_backward(const tfc_layer *l, tfc_exec *ex, const scratch *s, int want_dx)
{
    const conv_lstm_args *a = l->args;
    tfc_backend *be = ex->be;
    dims d = dims_of(l);
    const int64_t rows = ex->batch * d.t * d.p, img = ex->batch * d.hwc,
                  kr = gate_kernel_floats(l) / d.f;
    conv dg = input_conv_f(l, ex->batch * (int)d.t, 1);
    if (want_dx) be->ops->zero(be, s->dxt, (size_t)(d.t * img) * sizeof(float));
    for (int k = 0; k < 4; k++) {
        gate_input(l, ex, s, k);
        be->ops->copy2d(be, rows, (int)d.f, s->z + k * d.f, (int)(4 * d.f), s->zk, (int)d.f, 0);
        be->ops->zero(be, s->dkg, (size_t)gate_kernel_floats(l) * sizeof(float));
        conv_filter(be, &dg, s->xd, s->zk, s->dkg, ex->ws);
        be->ops->copy2d(be, kr, (int)d.f, s->dkg, (int)d.f, l->params[0].grad + k * d.f,
                        (int)(4 * d.f), 1);
        if (!want_dx) continue;
        conv_data(be, &dg, s->xd, s->zk, s->kg, s->xd, 1, ex->ws);
        for (int64_t t = 0; t < d.t; t++)
            be->ops->dropout_backward(be, img, (float)a->dropout, gate_key(l, k), ex->step,
                                      s->xd + t * img, s->dxt + t * img);
    }
}

/* Gate k's recurrent dropout key: the layer's, its seed mixed in, then stream 5 + k */
static uint64_t rgate_key(const tfc_layer *l, int k)
{
    return gate_key(l, k + 4);
}

/* s->rk = the gates' columns of R, gate by gate */
static void gate_rkernels(const tfc_layer *l, tfc_backend *be, const scratch *s)
{
    const int64_t f = ((const conv_lstm_args *)l->args)->filters, rkf = rgate_kernel_floats(l);
    for (int k = 0; k < 4; k++)
        be->ops->copy2d(be, rkf / f, (int)f, l->params[1].data + k * f, (int)(4 * f),
                        s->rk + k * rkf, (int)f, 0);
}

/* z (one step's [rows, 4f]) += conv(h r_k, R_k) gate by gate: the state h under gate k's
 * recurrent mask */
static void dropped_recurrent(const tfc_layer *l, tfc_exec *ex, const scratch *s,
                              const float *h, float *z)
{
    const conv_lstm_args *a = l->args;
    tfc_backend *be = ex->be;
    dims d = dims_of(l);
    const int64_t rows = ex->batch * d.p, q = rows * d.f, rkf = rgate_kernel_floats(l);
    conv drg = recurrent_conv_f(l, ex->batch, 1);
    for (int k = 0; k < 4; k++) {
        be->ops->dropout_forward(be, q, (float)a->recurrent_dropout, rgate_key(l, k), ex->step,
                                 h, s->ra);
        conv_run(be, &drg, s->ra, s->rk + k * rkf, NULL, NULL, s->rb, ex->ws);
        be->ops->copy2d(be, rows, (int)d.f, s->rb, (int)d.f, z + k * d.f, (int)(4 * d.f), 1);
    }
}

/* The recurrent convolution's gradients with recurrent dropout, gate by gate, from dz (one
 * step's pre-activation gradients [rows, 4f]): dh += r_k (dz_k (*)^T R_k) when dh is given,
 * and s->drk[k] += (h r_k) (*) dz_k when h (the state the step read) is */
static void dropped_recurrent_backward(const tfc_layer *l, tfc_exec *ex, const scratch *s,
                                       const float *h, const float *dz, float *dh)
{
    const conv_lstm_args *a = l->args;
    tfc_backend *be = ex->be;
    dims d = dims_of(l);
    const int64_t rows = ex->batch * d.p, q = rows * d.f, rkf = rgate_kernel_floats(l);
    const float rate = (float)a->recurrent_dropout;
    conv drg = recurrent_conv_f(l, ex->batch, 1);
    for (int k = 0; k < 4; k++) {
        be->ops->copy2d(be, rows, (int)d.f, dz + k * d.f, (int)(4 * d.f), s->rb, (int)d.f, 0);
        if (dh) { /* h stands for the masked state: the data gradient reads its shape only */
            conv_data(be, &drg, h, s->rb, s->rk + k * rkf, s->ra, 1, ex->ws);
            be->ops->dropout_backward(be, q, rate, rgate_key(l, k), ex->step, s->ra, dh);
        } else {
            be->ops->dropout_forward(be, q, rate, rgate_key(l, k), ex->step, h, s->ra);
            conv_filter(be, &drg, s->ra, s->rb, s->drk + k * rkf, ex->ws);
        }
    }
}

/* The input's step that runs s-th */
static int64_t source_step(const conv_lstm_args *a, int64_t t, int64_t s)
{
    return a->go_backwards ? t - 1 - s : s;
}

static void conv_lstm_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const conv_lstm_args *a = l->args;
    tfc_backend *be = ex->be;
    const tfc_backend_ops *op = be->ops;
    const int n = ex->batch;
    dims d = dims_of(l);
    const int64_t rows = n * d.p, q = rows * d.f; /* q: one gate's (one state's) floats */
    scratch s = scratch_of(l, ex);
    float *gates, *cs, *hs, *pre;
    saved_parts(l, &gates, &cs, &hs, &pre);
    const tfc_act act = (tfc_act)a->activation, ract = (tfc_act)a->recurrent_activation;
    const float *in = x[0], *kernel = l->params[0].data, *rkernel = l->params[1].data;
    for (int64_t t = 0; t < d.t; t++)
        op->copy2d(be, n, (int)d.hwc, in + source_step(a, d.t, t) * d.hwc, (int)(d.t * d.hwc),
                   s.xt + t * n * d.hwc, (int)d.hwc, 0);
    conv di = input_conv(l, n * (int)d.t), dr = recurrent_conv(l, n);
    const int rdrop = rdropped(a, ex);
    if (rdrop) gate_rkernels(l, be, &s);
    if (dropped(a, ex))
        dropped_forward(l, ex, &s);
    else
        conv_run(be, &di, s.xt, kernel, a->use_bias ? l->params[2].data : NULL, NULL, s.z,
                 ex->ws);
    for (int64_t t = 0; t < d.t; t++) {
        float *z = s.z + t * rows * 4 * d.f, *g = gates + t * 4 * q, *c = cs + t * q,
              *h = hs + t * q;
        if (t > 0 && rdrop) { /* z += conv(h_{t-1} r_k, R_k), gate by gate */
            op->copy(be, s.s, z, (size_t)(4 * q) * sizeof(float));
            dropped_recurrent(l, ex, &s, h - q, s.s);
            z = s.s;
        } else if (t > 0) { /* z += conv(h_{t-1}, R) */
            conv_run(be, &dr, h - q, rkernel, NULL, z, s.s, ex->ws);
            z = s.s;
        }
        for (int k = 0; k < 4; k++)
            op->copy2d(be, rows, (int)d.f, z + k * d.f, (int)(4 * d.f), g + k * q, (int)d.f, 0);
        if (pre) op->copy(be, pre + t * 4 * q, g, (size_t)(4 * q) * sizeof(float));
        op->act_forward(be, ract, 2 * q, (int)d.f, g, g); /* i, f */
        op->act_forward(be, act, q, (int)d.f, g + 2 * q, g + 2 * q);
        op->act_forward(be, ract, q, (int)d.f, g + 3 * q, g + 3 * q);
        op->mul(be, 1, rows, (int)d.f, g, g + 2 * q, 0, c, 0); /* c = i g (+ f c_{t-1}) */
        if (t > 0) op->mul(be, 1, rows, (int)d.f, g + q, c - q, 0, c, 1);
        op->act_forward(be, act, q, (int)d.f, c, s.tc);
        op->mul(be, 1, rows, (int)d.f, g + 3 * q, s.tc, 0, h, 0); /* h = o act(c) */
        if (a->return_sequences)
            op->copy2d(be, n, (int)(d.p * d.f), h, (int)(d.p * d.f), y + t * d.p * d.f,
                       (int)(d.t * d.p * d.f), 0);
    }
    if (!a->return_sequences) op->copy(be, y, hs + (d.t - 1) * q, (size_t)q * sizeof(float));
}

static void conv_lstm_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                               const float *dy, float *const *dx)
{
    (void)y;
    const conv_lstm_args *a = l->args;
    tfc_backend *be = ex->be;
    const tfc_backend_ops *op = be->ops;
    const int n = ex->batch;
    dims d = dims_of(l);
    const int64_t rows = n * d.p, q = rows * d.f, pf = d.p * d.f;
    scratch s = scratch_of(l, ex);
    float *gates, *cs, *hs, *pre;
    saved_parts(l, &gates, &cs, &hs, &pre);
    const tfc_act act = (tfc_act)a->activation, ract = (tfc_act)a->recurrent_activation;
    const float *in = x[0];
    conv di = input_conv(l, n * (int)d.t), dr = recurrent_conv(l, n);
    const int rdrop = rdropped(a, ex);
    if (rdrop) {
        gate_rkernels(l, be, &s);
        op->zero(be, s.drk, (size_t)(4 * rgate_kernel_floats(l)) * sizeof(float));
    }
    op->zero(be, s.dc, (size_t)q * sizeof(float));
    for (int64_t t = d.t - 1; t >= 0; t--) {
        const float *g = gates + t * 4 * q, *c = cs + t * q;
        float *dz = s.z + t * rows * 4 * d.f, *dg = s.s;
        /* dh = dy_t, plus (below, from step t + 1) the recurrent convolution's gradient */
        if (a->return_sequences)
            op->copy2d(be, n, (int)pf, dy + t * pf, (int)(d.t * pf), s.dh, (int)pf, 0);
        else if (t == d.t - 1)
            op->copy(be, s.dh, dy, (size_t)q * sizeof(float));
        else
            op->zero(be, s.dh, (size_t)q * sizeof(float));
        if (t < d.t - 1 && rdrop)
            dropped_recurrent_backward(l, ex, &s, hs + t * q, dz + rows * 4 * d.f, s.dh);
        else if (t < d.t - 1)
            conv_data(be, &dr, hs + t * q, dz + rows * 4 * d.f, l->params[1].data, s.dh, 0,
                      ex->ws);
        op->act_forward(be, act, q, (int)d.f, c, s.tc);
        /* o: dz_o = ract'(o) dh act(c); c: dc += act'(c) dh o (tanh's and sigmoid's
         * derivatives from their outputs, any other's from the kept pre-activations) */
        const float *ig = g, *fg = g + q, *gg = g + 2 * q, *og = g + 3 * q;
        const float *zp = pre ? pre + t * 4 * q : g; /* z_i, z_f, z_c, z_o */
        op->mul(be, 1, rows, (int)d.f, s.dh, s.tc, 0, s.tmp, 0);
        op->act_backward(be, ract, q, (int)d.f, zp + 3 * q, og, s.tmp, dg + 3 * q, 1);
        op->mul(be, 1, rows, (int)d.f, s.dh, og, 0, s.tmp, 0);
        op->act_backward(be, act, q, (int)d.f, pre ? c : s.tc, s.tc, s.tmp, s.dc, 0);
        /* i: dc g; g: dc i; f: dc c_{t-1} (0 at the first step) */
        op->mul(be, 1, rows, (int)d.f, s.dc, gg, 0, s.tmp, 0);
        op->act_backward(be, ract, q, (int)d.f, zp, ig, s.tmp, dg, 1);
        op->mul(be, 1, rows, (int)d.f, s.dc, ig, 0, s.tmp, 0);
        op->act_backward(be, act, q, (int)d.f, zp + 2 * q, gg, s.tmp, dg + 2 * q, 1);
        if (t > 0) {
            op->mul(be, 1, rows, (int)d.f, s.dc, c - q, 0, s.tmp, 0);
            op->act_backward(be, ract, q, (int)d.f, zp + q, fg, s.tmp, dg + q, 1);
        } else {
            op->zero(be, dg + q, (size_t)q * sizeof(float));
        }
        op->mul(be, 1, rows, (int)d.f, s.dc, fg, 0, s.dc, 0); /* dc_{t-1} = dc f */
        for (int k = 0; k < 4; k++)
            op->copy2d(be, rows, (int)d.f, dg + k * q, (int)d.f, dz + k * d.f, (int)(4 * d.f), 0);
        if (t > 0 && rdrop) /* dR_k += (h_{t-1} r_k) (*) dz_t,k */
            dropped_recurrent_backward(l, ex, &s, hs + (t - 1) * q, dz, NULL);
        else if (t > 0) /* dR += h_{t-1} (*) dz_t */
            conv_filter(be, &dr, hs + (t - 1) * q, dz, l->params[1].grad, ex->ws);
    }
    if (rdrop) /* the gates' kernels' gradients into R's columns */
        for (int k = 0; k < 4; k++)
            op->copy2d(be, rgate_kernel_floats(l) / d.f, (int)d.f,
                       s.drk + k * rgate_kernel_floats(l), (int)d.f,
                       l->params[1].grad + k * d.f, (int)(4 * d.f), 1);
    /* The input's convolution, for all steps at once: its input time-major again */
    for (int64_t t = 0; t < d.t; t++)
        op->copy2d(be, n, (int)d.hwc, in + source_step(a, d.t, t) * d.hwc, (int)(d.t * d.hwc),
                   s.xt + t * n * d.hwc, (int)d.hwc, 0);
    if (a->use_bias) op->bias_grad(be, d.t * rows, (int)(4 * d.f), s.z, l->params[2].grad);
    float *dxt = s.xt;
    if (dropped(a, ex)) {
        dropped_backward(l, ex, &s, dx[0] != NULL);
        dxt = s.dxt;
    } else {
        conv_filter(be, &di, s.xt, s.z, l->params[0].grad, ex->ws);
        if (dx[0]) conv_data(be, &di, s.xt, s.z, l->params[0].data, s.xt, 1, ex->ws);
    }
    if (!dx[0]) return;
    for (int64_t t = 0; t < d.t; t++)
        op->copy2d(be, n, (int)d.hwc, dxt + t * n * d.hwc, (int)d.hwc,
                   dx[0] + source_step(a, d.t, t) * d.hwc, (int)(d.t * d.hwc), 1);
}

int tfc_layer_conv_lstm_desc(const tfc_layer *l, tfc_conv_lstm_desc *d)
{
    if (l->ops != &tfc_conv_lstm1d_ops && l->ops != &tfc_conv_lstm2d_ops &&
        l->ops != &tfc_conv_lstm3d_ops)
        return 0;
    const conv_lstm_args *a = l->args;
    *d = (tfc_conv_lstm_desc){.rank = a->rank, .filters = a->filters,
                              .same = a->padding == TFC_PADDING_SAME, .act = a->activation,
                              .ract = a->recurrent_activation, .use_bias = a->use_bias,
                              .go_backwards = a->go_backwards,
                              .return_sequences = a->return_sequences};
    for (int ax = 0; ax < 3; ax++)
        d->k[ax] = a->k[ax], d->s[ax] = a->s[ax], d->dil[ax] = a->dil[ax];
    return 1;
}

const tfc_layer_ops tfc_conv_lstm2d_ops = {
    .type = "ConvLSTM2D", .schema = conv_lstm_fields, .args_size = sizeof(conv_lstm_args),
    .min_inputs = 1, .max_inputs = 1, .cpu_first = 1,
    .build = conv_lstm2d_build, .plan = conv_lstm_plan, .forward = conv_lstm_forward,
    .backward = conv_lstm_backward,
};

const tfc_layer_ops tfc_conv_lstm1d_ops = {
    .type = "ConvLSTM1D", .schema = conv_lstm1d_fields, .args_size = sizeof(conv_lstm_args),
    .min_inputs = 1, .max_inputs = 1, .cpu_first = 1,
    .build = conv_lstm1d_build, .plan = conv_lstm_plan, .forward = conv_lstm_forward,
    .backward = conv_lstm_backward,
};

const tfc_layer_ops tfc_conv_lstm3d_ops = {
    .type = "ConvLSTM3D", .schema = conv_lstm3d_fields, .args_size = sizeof(conv_lstm_args),
    .min_inputs = 1, .max_inputs = 1, .cpu_first = 1, .needs = conv_lstm3d_needs,
    .build = conv_lstm3d_build, .plan = conv_lstm_plan, .forward = conv_lstm_forward,
    .backward = conv_lstm_backward,
};
