/* Backend-independent pieces of the op table: the activation names, the start-up check
 * that rejects a backend with a missing op (its slot list generated from TFC_BACKEND_OPS,
 * like the struct), tfc_backend_free and the wrappers over the configure and status ops. */
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
    [TFC_ACT_RELU6] = "relu6",
    [TFC_ACT_HARD_SILU] = "hard_silu",
    [TFC_ACT_MISH] = "mish",
    [TFC_ACT_COUNT] = NULL,
};

typedef void (*generic_fn)(void);

#define SLOT(ret, op, params) {#op, offsetof(tfc_backend_ops, op), 0},
#define OPTIONAL_SLOT(ret, op, params) {#op, offsetof(tfc_backend_ops, op), 1},
static const struct {
    const char *name;
    size_t offset;
    int optional; /* TFC_BACKEND_LAYER_OPS, _STEP_OPS, _PRECISION_OPS and _GRAPH_OPS: may
                   * be NULL */
} slots[] = {TFC_BACKEND_DEVICE_OPS(SLOT) TFC_BACKEND_MATH_OPS(SLOT)
                 TFC_BACKEND_LAYER_OPS(OPTIONAL_SLOT) TFC_BACKEND_STEP_OPS(OPTIONAL_SLOT)
                     TFC_BACKEND_PRECISION_OPS(OPTIONAL_SLOT) TFC_BACKEND_GRAPH_OPS(OPTIONAL_SLOT)};
#undef SLOT
#undef OPTIONAL_SLOT

static generic_fn slot_fn(const tfc_backend_ops *ops, size_t i)
{
    generic_fn fn;
    memcpy(&fn, (const char *)ops + slots[i].offset, sizeof fn);
    return fn;
}

/* The struct and the list above both come from TFC_BACKEND_OPS, so every op is checked by
 * construction; this guards the one way around it, a member written into the struct by
 * hand: after `name`, the struct holds exactly the listed function pointers. */
_Static_assert(sizeof(tfc_backend_ops) ==
                   sizeof(const char *) + sizeof slots / sizeof *slots * sizeof(generic_fn),
               "tfc_backend_ops has a member outside TFC_BACKEND_OPS");

tfc_status tfc_backend_check(const tfc_backend_ops *ops, tfc_error *err)
{
    if (!ops) return tfc_error_set(err, TFC_ERR_DEVICE, "no backend op table");
    if (!ops->name) return tfc_error_set(err, TFC_ERR_DEVICE, "backend op table has no name");
    for (size_t i = 0; i < sizeof slots / sizeof *slots; i++)
        if (!slots[i].optional && !slot_fn(ops, i))
            return tfc_error_set(err, TFC_ERR_DEVICE, "backend %s does not implement op '%s'",
                                 ops->name, slots[i].name);
    return TFC_OK;
}

int tfc_backend_has(const tfc_backend_ops *ops, const char *op)
{
    for (size_t i = 0; i < sizeof slots / sizeof *slots; i++)
        if (strcmp(slots[i].name, op) == 0) return slot_fn(ops, i) != NULL;
    return 0;
}

void tfc_backend_free(tfc_backend *be)
{
    if (be && be->ops && be->ops->destroy) be->ops->destroy(be);
}

void tfc_backend_configure(tfc_backend *be, const tfc_device_options *o)
{
    if (be) be->ops->configure(be, o);
}

tfc_status tfc_backend_status(tfc_backend *be, tfc_error *err)
{
    return be ? be->ops->status(be, err) : TFC_OK;
}
