/* Masking (keras.layers.Masking): a step of a feature sequence (steps, features) whose every
 * feature equals mask_value is padding.
 *   m[t] = any_f x[t, f] != mask_value,   y[t, :] = m[t] ? x[t, :] : 0
 *   backward: dx[t, :] += m[t] dy[t, :]   (the mask itself has no gradient)
 * The mask [batch, T] goes to the layers downstream as an Embedding(mask_zero)'s does (graph.c
 * makes it on the host from the input batch: LSTM and GRU keep their state over masked steps,
 * GlobalAveragePooling1D averages the real ones, losses skip them). tfc makes masks from the
 * model input only, so Masking must read it. */
#include "layers/layer.h"

typedef struct masking_args {
    double mask_value;
} masking_args;

static const tfc_field masking_fields[] = {
    {"mask_value", TFC_F_FLOAT, offsetof(masking_args, mask_value), "0.0", TFC_UNBOUNDED, NULL,
     "a step whose every feature equals it is padding"},
    {NULL}};

static tfc_status masking_build(tfc_layer *l, tfc_error *err)
{
    const tfc_shape *in = &l->in_shape[0];
    char buf[96];
    if (l->inputs[0] >= 0 || l->in_dtype[0] != TFC_F32)
        return tfc_layer_error(err, l, "makes the sequence mask from the model input: it must "
                                       "take the model input, declared as input: {shape: "
                                       "[steps, features]} (float32)");
    if (in->ndim != 2)
        return tfc_layer_error(err, l, "needs a sequence input of shape (steps, features), got %s",
                               tfc_shape_str(in, buf, sizeof buf));
    l->out_shape = *in;
    l->mask_out = 1;
    return TFC_OK;
}

/* The value compared in float32, as Keras compares the float32 input with it. */
static float mask_value(const tfc_layer *l)
{
    const masking_args *a = l->args;
    return (float)a->mask_value;
}

static void masking_host_mask(const tfc_layer *l, const void *x, int64_t rows, float *mask)
{
    const float *v = x, value = mask_value(l);
    const int64_t f = l->in_shape[0].dim[1];
    for (int64_t r = 0; r < rows; r++) {
        int real = 0;
        for (int64_t c = 0; c < f; c++) real |= v[r * f + c] != value;
        mask[r] = real ? 1.f : 0.f;
    }
}

static void masking_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const tfc_shape *in = &l->in_shape[0];
    ex->be->ops->masking_forward(ex->be, (int64_t)ex->batch * in->dim[0], (int)in->dim[1],
                                 mask_value(l), x[0], y);
}

static void masking_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                             const float *dy, float *const *dx)
{
    const tfc_shape *in = &l->in_shape[0];
    if (!dx[0]) return;
    ex->be->ops->masking_backward(ex->be, (int64_t)ex->batch * in->dim[0], (int)in->dim[1],
                                  mask_value(l), x[0], dy, dx[0]);
}

static const char *const *masking_needs(const tfc_layer *l)
{
    static const char *const ops[] = {"masking_forward", "masking_backward", NULL};
    return ops;
}

const tfc_layer_ops tfc_masking_ops = {
    .type = "Masking", .schema = masking_fields, .args_size = sizeof(masking_args),
    .min_inputs = 1, .max_inputs = 1, .host_mask = masking_host_mask, .needs = masking_needs,
    .build = masking_build, .forward = masking_forward, .backward = masking_backward,
};
