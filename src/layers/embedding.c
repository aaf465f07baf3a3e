/* Embedding (keras.layers.Embedding): token ids to vectors.
 *   y[..., :] = E[id, :]              E [input_dim, output_dim]
 *   backward: dE[id, :] += dy[..., :]  (no gradient flows to integer ids)
 * The ids are the model input's (int32) or the int32 indices of a layer before it
 * (IntegerLookup, Discretization with output_mode int), whose limit the graph checks against
 * input_dim when the model is built.
 * With mask_zero, id 0 is padding: the graph derives a mask [batch, T] from the ids and
 * hands it to the layers downstream (LSTM keeps state over masked steps, losses skip them). */
#include "layers/layer.h"

typedef struct embedding_args {
    int input_dim, output_dim, mask_zero;
    const tfc_node *embeddings_initializer, *input_length;
} embedding_args;

static const tfc_field embedding_fields[] = {
    {"input_dim", TFC_F_INT, offsetof(embedding_args, input_dim), NULL, 1, 1 << 28, NULL,
     "vocabulary size: ids lie in [0, input_dim)"},
    {"output_dim", TFC_F_INT, offsetof(embedding_args, output_dim), NULL, 1, 1 << 20, NULL,
     "vector size"},
    {"mask_zero", TFC_F_BOOL, offsetof(embedding_args, mask_zero), "false", TFC_UNBOUNDED, NULL,
     "id 0 is padding, masked downstream"},
    {"embeddings_initializer", TFC_F_NODE, offsetof(embedding_args, embeddings_initializer),
     TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL, "default random_uniform(-0.05, 0.05)"},
    TFC_REGULARIZER_FIELD("embeddings_regularizer"), TFC_CONSTRAINT_FIELD("embeddings_constraint"),
    {"input_length", TFC_F_NODE, offsetof(embedding_args, input_length), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "Keras 2's sequence length: the input's steps (first layer: the "
     "model input's)"},
    TFC_FIXED_FIELD("weights", TFC_NO_DEFAULT, "initial weights come from --weights FILE "
                    "(tfc-train) or the layer's embeddings_initializer"),
    TFC_FIXED_FIELD("lora_rank", TFC_NO_DEFAULT, "tfc has no LoRA; leave this argument out"),
    TFC_FIXED_FIELD("lora_alpha", TFC_NO_DEFAULT, "tfc has no LoRA; leave this argument out"),
    TFC_FIXED_FIELD("quantization_config", TFC_NO_DEFAULT,
                    "tfc has no quantization; leave this argument out"),
    {NULL}};

static tfc_status embedding_build(tfc_layer *l, tfc_error *err)
{
    const embedding_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    char buf[96];
    if (l->in_dtype[0] != TFC_I32)
        return tfc_layer_error(err, l, "reads token ids: it must take the model input, declared "
                                       "as input: {shape: [...], dtype: int32}, or the int32 "
                                       "indices of a layer (IntegerLookup, Discretization)");
    if (a->mask_zero && l->inputs[0] >= 0)
        return tfc_layer_error(err, l, "mask_zero needs the model input's token ids, not the "
                                       "indices of another layer");
    if (a->mask_zero && in->ndim != 1)
        return tfc_layer_error(err, l, "mask_zero needs a sequence input of shape (steps), got %s",
                               tfc_shape_str(in, buf, sizeof buf));
    if (in->ndim >= TFC_MAX_DIMS - 1)
        return tfc_layer_error(err, l, "input has too many axes");
    if (a->input_length && !tfc_node_is_null(a->input_length)) {
        /* Keras 2 checked it against the input's first axis; Keras 3 ignores it */
        char path[96];
        long long steps;
        snprintf(path, sizeof path, "layers[%d].Embedding.input_length", l->index);
        if (tfc_node_int(a->input_length, path, 1, INT32_MAX, &steps, err)) return err->code;
        if (in->ndim < 1 || steps != in->dim[0])
            return tfc_layer_error(err, l, "input_length %lld is not the input's %s (Keras 2 "
                                   "refused that too; Keras 3 ignores input_length: leave it "
                                   "out)", steps, in->ndim < 1 ? "shape"
                                   : tfc_shape_str(in, buf, sizeof buf));
    }
    l->out_shape = *in;
    l->out_shape.dim[l->out_shape.ndim++] = a->output_dim;
    l->id_limit = a->input_dim;
    l->mask_out = a->mask_zero;
    tfc_init ei;
    if (tfc_layer_init_arg(l, a->embeddings_initializer, "embeddings_initializer",
                           TFC_INIT_RANDOM_UNIFORM, &ei, err))
        return TFC_ERR_CONFIG;
    tfc_layer_add_param(l, "embeddings", 2, (int64_t[]){a->input_dim, a->output_dim}, 1, ei);
    return TFC_OK;
}

static void embedding_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const embedding_args *a = l->args;
    int64_t n = (int64_t)ex->batch * tfc_shape_numel(&l->in_shape[0]);
    ex->be->ops->gather(ex->be, n, a->output_dim, x[0], l->params[0].data, y);
}

static void embedding_backward(tfc_layer *l, tfc_exec *ex, const void *const *x,
                               const float *y, const float *dy, float *const *dx)
{
    const embedding_args *a = l->args;
    int64_t n = (int64_t)ex->batch * tfc_shape_numel(&l->in_shape[0]);
    ex->be->ops->scatter_add(ex->be, n, a->output_dim, x[0], dy, l->params[0].grad);
}

const tfc_layer_ops tfc_embedding_ops = {
    .type = "Embedding", .schema = embedding_fields, .args_size = sizeof(embedding_args),
    .min_inputs = 1, .max_inputs = 1, .looks_up = 1, .reads_ints = 1,
    .build = embedding_build, .forward = embedding_forward, .backward = embedding_backward,
};
