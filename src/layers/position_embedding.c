/* Learned position embeddings, KerasHub's (keras_hub.layers):
 *   PositionEmbedding          y[..., t, :] = P[t, :]                    P [sequence_length, dim]
 *       for an input [..., T, dim] with T <= sequence_length: the first T rows of P broadcast
 *       over the batch (and leading axes); the input gives only its shape. Added to the
 *       tokens' vectors with Add. Backward: dP[t, :] += sum over the batch of dy[.., t, :].
 *   TokenAndPositionEmbedding  y[t, :] = E[id_t, :] + P[t, :]     E [vocabulary_size, dim]
 *       on token ids [T]; backward dE[id_t, :] += dy[t, :], dP as above. With mask_zero, id 0
 *       is padding and the layer makes the mask an Embedding(mask_zero) makes (graph.c).
 * Both go through the backend's gather / scatter_add / bias_add / bias_grad, so they run on
 * every backend. Gradients accumulate; no gradient reaches the inputs. */
#include <stdio.h>

#include "layers/layer.h"

/* ---- PositionEmbedding -------------------------------------------------------------------- */

typedef struct pos_args {
    int sequence_length;
    const tfc_node *initializer;
} pos_args;

static const tfc_field pos_fields[] = {
    {"sequence_length", TFC_F_INT, offsetof(pos_args, sequence_length), NULL, 1, 1 << 24, NULL,
     "positions learned: inputs may have up to this many steps"},
    {"initializer", TFC_F_NODE, offsetof(pos_args, initializer), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "default glorot_uniform"},
    {NULL}};

/* Steps and width of the [T, dim] block a position table of `length` rows covers, from the
 * input's last two axes; an error where T exceeds length. */
static tfc_status position_block(tfc_layer *l, const tfc_shape *in, int length, int64_t *steps,
                                 int64_t *dim, tfc_error *err)
{
    char buf[96];
    *steps = in->dim[in->ndim - 2];
    *dim = in->dim[in->ndim - 1];
    if (*steps > length)
        return tfc_layer_error(err, l, "the input %s has %lld steps, more than sequence_length "
                               "%d (KerasHub's extension past it is not supported)",
                               tfc_shape_str(in, buf, sizeof buf), (long long)*steps, length);
    return TFC_OK;
}

static tfc_status pos_build(tfc_layer *l, tfc_error *err)
{
    const pos_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    char buf[96];
    if (in->ndim < 2 || l->in_dtype[0] != TFC_F32)
        return tfc_layer_error(err, l, "needs a float input (steps, features), got %s",
                               tfc_shape_str(in, buf, sizeof buf));
    int64_t steps, dim;
    if (position_block(l, in, a->sequence_length, &steps, &dim, err)) return TFC_ERR_CONFIG;
    l->out_shape = *in;
    tfc_init init;
    if (tfc_layer_init_arg(l, a->initializer, "initializer", TFC_INIT_GLOROT_UNIFORM, &init, err))
        return TFC_ERR_CONFIG;
    tfc_layer_add_param(l, "embeddings", 2, (int64_t[]){a->sequence_length, dim}, 1, init);
    return TFC_OK;
}

/* The [T, dim] block's floats, and how many times it repeats in a batch. */
static int block_floats(const tfc_layer *l)
{
    const tfc_shape *s = &l->out_shape;
    return (int)(s->dim[s->ndim - 2] * s->dim[s->ndim - 1]);
}

static int64_t block_rows(const tfc_layer *l, int batch)
{
    return (int64_t)batch * (tfc_layer_out_numel(l) / block_floats(l));
}

static void pos_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    (void)x;
    const int cols = block_floats(l);
    const int64_t rows = block_rows(l, ex->batch);
    ex->be->ops->zero(ex->be, y, (size_t)(rows * cols) * 4);
    ex->be->ops->bias_add(ex->be, rows, cols, l->params[0].data, y);
}

static void pos_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                         const float *dy, float *const *dx)
{
    (void)x, (void)y, (void)dx;
    ex->be->ops->bias_grad(ex->be, block_rows(l, ex->batch), block_floats(l), dy,
                           l->params[0].grad);
}

/* KerasHub's PositionEmbedding does not support masking: the mask stops at it (an Add with
 * the tokens' vectors carries it on). */
const tfc_layer_ops tfc_position_embedding_ops = {
    .type = "PositionEmbedding", .schema = pos_fields, .args_size = sizeof(pos_args),
    .min_inputs = 1, .max_inputs = 1,
    .build = pos_build, .forward = pos_forward, .backward = pos_backward,
};

/* ---- TokenAndPositionEmbedding ------------------------------------------------------------ */

typedef struct tpe_args {
    int vocabulary_size, sequence_length, embedding_dim, tie_weights, mask_zero;
    const tfc_node *embeddings_initializer;
} tpe_args;

static const tfc_field tpe_fields[] = {
    {"vocabulary_size", TFC_F_INT, offsetof(tpe_args, vocabulary_size), NULL, 1, 1 << 28, NULL,
     "ids lie in [0, vocabulary_size)"},
    {"sequence_length", TFC_F_INT, offsetof(tpe_args, sequence_length), NULL, 1, 1 << 24, NULL,
     "positions learned: inputs may have up to this many steps"},
    {"embedding_dim", TFC_F_INT, offsetof(tpe_args, embedding_dim), NULL, 1, 1 << 20, NULL,
     "vector size"},
    {"tie_weights", TFC_F_BOOL, offsetof(tpe_args, tie_weights), "true", TFC_UNBOUNDED, NULL,
     "only true: the reverse projection's separate weights are not supported"},
    {"embeddings_initializer", TFC_F_NODE, offsetof(tpe_args, embeddings_initializer),
     TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL, "both tables; default random_uniform(-0.05, 0.05)"},
    {"mask_zero", TFC_F_BOOL, offsetof(tpe_args, mask_zero), "false", TFC_UNBOUNDED, NULL,
     "id 0 is padding, masked downstream"},
    {NULL}};

enum { TOKENS, POSITIONS };

static tfc_status tpe_build(tfc_layer *l, tfc_error *err)
{
    const tpe_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    char buf[96];
    if (l->in_dtype[0] != TFC_I32 || l->inputs[0] >= 0)
        return tfc_layer_error(err, l, "reads token ids: it must take the model input, declared "
                                       "as input: {shape: [steps], dtype: int32}");
    if (in->ndim != 1)
        return tfc_layer_error(err, l, "needs a sequence input of shape (steps), got %s",
                               tfc_shape_str(in, buf, sizeof buf));
    if (!a->tie_weights)
        return tfc_layer_error(err, l, "tie_weights: false is not supported (its reverse "
                               "projection's weights have no use here)");
    l->out_shape = *in;
    l->out_shape.dim[l->out_shape.ndim++] = a->embedding_dim;
    int64_t steps, dim;
    if (position_block(l, &l->out_shape, a->sequence_length, &steps, &dim, err))
        return TFC_ERR_CONFIG;
    l->id_limit = a->vocabulary_size;
    l->mask_out = a->mask_zero;
    tfc_init init;
    if (tfc_layer_init_arg(l, a->embeddings_initializer, "embeddings_initializer",
                           TFC_INIT_RANDOM_UNIFORM, &init, err))
        return TFC_ERR_CONFIG;
    tfc_layer_add_param(l, "token_embedding/embeddings", 2,
                        (int64_t[]){a->vocabulary_size, a->embedding_dim}, 1, init);
    tfc_layer_add_param(l, "position_embedding/embeddings", 2,
                        (int64_t[]){a->sequence_length, a->embedding_dim}, 1, init);
    return TFC_OK;
}

static void tpe_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const tpe_args *a = l->args;
    const int64_t steps = l->in_shape[0].dim[0];
    ex->be->ops->gather(ex->be, ex->batch * steps, a->embedding_dim, x[0],
                        l->params[TOKENS].data, y);
    ex->be->ops->bias_add(ex->be, ex->batch, (int)(steps * a->embedding_dim),
                          l->params[POSITIONS].data, y);
}

static void tpe_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                         const float *dy, float *const *dx)
{
    (void)y, (void)dx;
    const tpe_args *a = l->args;
    const int64_t steps = l->in_shape[0].dim[0];
    ex->be->ops->scatter_add(ex->be, ex->batch * steps, a->embedding_dim, x[0], dy,
                             l->params[TOKENS].grad);
    ex->be->ops->bias_grad(ex->be, ex->batch, (int)(steps * a->embedding_dim), dy,
                           l->params[POSITIONS].grad);
}

const tfc_layer_ops tfc_token_and_position_embedding_ops = {
    .type = "TokenAndPositionEmbedding", .schema = tpe_fields, .args_size = sizeof(tpe_args),
    .min_inputs = 1, .max_inputs = 1,
    .build = tpe_build, .forward = tpe_forward, .backward = tpe_backward,
};
