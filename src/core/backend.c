/* Backend-independent pieces of the op table: the activation names, the start-up check
 * that rejects a backend with a missing op, and tfc_backend_free. The slot list below
 * is pinned to the struct by a static assert, so a new op cannot escape the check. */
#include "core/backend.h"

#include <stddef.h>
#include <string.h>

const char *const tfc_act_names[TFC_ACT_COUNT + 1] = {
    [TFC_ACT_LINEAR] = "linear",
    [TFC_ACT_RELU] = "relu",
    [TFC_ACT_SIGMOID] = "sigmoid",
    [TFC_ACT_TANH] = "tanh",
    [TFC_ACT_SOFTMAX] = "softmax",
    [TFC_ACT_ELU] = "elu",
    [TFC_ACT_SELU] = "selu",
    [TFC_ACT_GELU] = "gelu",
    [TFC_ACT_LEAKY_RELU] = "leaky_relu",
    [TFC_ACT_SOFTPLUS] = "softplus",
    [TFC_ACT_SOFTSIGN] = "softsign",
    [TFC_ACT_SWISH] = "swish",
    [TFC_ACT_HARD_SIGMOID] = "hard_sigmoid",
    [TFC_ACT_EXPONENTIAL] = "exponential",
    [TFC_ACT_COUNT] = NULL,
};

typedef void (*generic_fn)(void);

#define SLOT(f) {#f, offsetof(tfc_backend_ops, f)}
static const struct {
    const char *name;
    size_t offset;
} slots[] = {
    SLOT(destroy),           SLOT(alloc),          SLOT(free),
    SLOT(upload),            SLOT(download),       SLOT(copy),
    SLOT(zero),              SLOT(sync),           SLOT(gemm),
    SLOT(axpy),              SLOT(scale),          SLOT(bias_add),
    SLOT(bias_grad),         SLOT(copy2d),         SLOT(act_forward),
    SLOT(act_backward),      SLOT(dropout_forward), SLOT(dropout_backward),
    SLOT(conv_workspace),    SLOT(conv_forward),   SLOT(conv_backward_data),
    SLOT(conv_backward_filter), SLOT(pool_forward), SLOT(pool_backward),
    SLOT(bn_forward_train),  SLOT(bn_forward_infer), SLOT(bn_backward),
    SLOT(gather),            SLOT(scatter_add),    SLOT(lstm_workspace),
    SLOT(lstm_forward),      SLOT(lstm_backward),  SLOT(loss),
    SLOT(accuracy),          SLOT(sumsq),          SLOT(count_nonfinite),
    SLOT(optimizer_update),
};
#undef SLOT

/* Every member after `name` is a function pointer listed above: adding an op to the struct
 * without listing it here fails to compile. */
_Static_assert(sizeof(tfc_backend_ops) ==
                   sizeof(const char *) + sizeof slots / sizeof *slots * sizeof(generic_fn),
               "tfc_backend_ops has a slot that tfc_backend_check does not list");

tfc_status tfc_backend_check(const tfc_backend_ops *ops, tfc_error *err)
{
    if (!ops) return tfc_error_set(err, TFC_ERR_DEVICE, "no backend op table");
    if (!ops->name) return tfc_error_set(err, TFC_ERR_DEVICE, "backend op table has no name");
    for (size_t i = 0; i < sizeof slots / sizeof *slots; i++) {
        generic_fn fn;
        memcpy(&fn, (const char *)ops + slots[i].offset, sizeof fn);
        if (!fn)
            return tfc_error_set(err, TFC_ERR_DEVICE, "backend %s does not implement op '%s'",
                                 ops->name, slots[i].name);
    }
    return TFC_OK;
}

void tfc_backend_free(tfc_backend *be)
{
    if (be && be->ops && be->ops->destroy) be->ops->destroy(be);
}
