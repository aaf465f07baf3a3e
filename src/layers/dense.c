/* Dense (keras.layers.Dense): y = x K + b over the last axis, so a sequence [T, in] maps
 * step by step to [T, units].
 *   forward:  y[r, u] = sum_i x[r, i] K[i, u] + b[u]          K [in, units], b [units]
 *   backward: dK += x^T dy,  db += sum_r dy[r, :],  dx += dy K^T (dx = where it starts
 *             here, dK = at the step's first backward) */
#include "layers/layer.h"

typedef struct dense_args {
    int units, activation, use_bias;
    const tfc_node *kernel_initializer, *bias_initializer;
} dense_args;

static const tfc_field dense_fields[] = {
    {"units", TFC_F_INT, offsetof(dense_args, units), NULL, 1, 1 << 24, NULL, "output size"},
    TFC_ACTIVATION_FIELD(dense_args, activation),
    {"use_bias", TFC_F_BOOL, offsetof(dense_args, use_bias), "true", TFC_UNBOUNDED, NULL,
     "add a bias vector"},
    {"kernel_initializer", TFC_F_NODE, offsetof(dense_args, kernel_initializer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "default glorot_uniform"},
    {"bias_initializer", TFC_F_NODE, offsetof(dense_args, bias_initializer), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "default zeros"},
    TFC_KERNEL_BIAS_KERAS_FIELDS,
    TFC_FIXED_FIELD("lora_rank", TFC_NO_DEFAULT, "tfc has no LoRA; leave this argument out"),
    TFC_FIXED_FIELD("lora_alpha", TFC_NO_DEFAULT, "tfc has no LoRA; leave this argument out"),
    TFC_FIXED_FIELD("quantization_config", TFC_NO_DEFAULT,
                    "tfc has no quantization; leave this argument out"),
    {NULL}};

static tfc_status dense_build(tfc_layer *l, tfc_error *err)
{
    const dense_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    if (in->ndim < 1) return tfc_layer_error(err, l, "needs an input with at least one axis");
    int64_t fan_in = in->dim[in->ndim - 1];
    l->out_shape = *in;
    l->out_shape.dim[in->ndim - 1] = a->units;
    l->act = (tfc_act)a->activation;
    tfc_init ki, bi;
    if (tfc_layer_init_arg(l, a->kernel_initializer, "kernel_initializer",
                           TFC_INIT_GLOROT_UNIFORM, &ki, err) ||
        tfc_layer_init_arg(l, a->bias_initializer, "bias_initializer", TFC_INIT_ZEROS, &bi, err))
        return TFC_ERR_CONFIG;
    tfc_layer_add_param(l, "kernel", 2, (int64_t[]){fan_in, a->units}, 1, ki);
    if (a->use_bias) tfc_layer_add_param(l, "bias", 1, (int64_t[]){a->units}, 1, bi);
    return TFC_OK;
}

static void dense_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const dense_args *a = l->args;
    int in = (int)l->in_shape[0].dim[l->in_shape[0].ndim - 1];
    int64_t rows = (int64_t)ex->batch * (tfc_shape_numel(&l->in_shape[0]) / in);
    ex->be->ops->gemm_weights(ex->be, 0, 0, (int)rows, a->units, in, 1.f, x[0], in,
                              l->params[0].data, a->units, 0.f, y, a->units);
    if (a->use_bias) ex->be->ops->bias_add(ex->be, rows, a->units, l->params[1].data, y);
}

static void dense_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                           const float *dy, float *const *dx)
{
    const dense_args *a = l->args;
    int in = (int)l->in_shape[0].dim[l->in_shape[0].ndim - 1];
    int64_t rows = (int64_t)ex->batch * (tfc_shape_numel(&l->in_shape[0]) / in);
    const tfc_backend_ops *op = ex->be->ops;
    /* the step's first backward writes the kernel's gradient (beta 0; the bias's, summed
     * into, is zeroed: 4 bytes a unit) */
    op->gemm(ex->be, 1, 0, in, a->units, (int)rows, 1.f, x[0], in, dy, a->units,
             ex->params_fresh ? 0.f : 1.f, l->params[0].grad, a->units);
    if (a->use_bias) {
        if (ex->params_fresh) op->zero(ex->be, l->params[1].grad, (size_t)a->units * 4);
        op->bias_grad(ex->be, rows, a->units, dy, l->params[1].grad);
    }
    if (dx[0]) /* written, not added, where dx's block starts here (ex->fresh) */
        op->gemm(ex->be, 0, 1, (int)rows, in, a->units, 1.f, dy, a->units, l->params[0].data,
                 a->units, (ex->fresh & 1) ? 0.f : 1.f, dx[0], in);
}

const tfc_layer_ops tfc_dense_ops = {
    .type = "Dense", .schema = dense_fields, .args_size = sizeof(dense_args),
    .min_inputs = 1, .max_inputs = 1, .keeps_mask = 1, .assigns_grads = 1,
    .assigns_param_grads = 1,
    .build = dense_build, .forward = dense_forward, .backward = dense_backward,
};
