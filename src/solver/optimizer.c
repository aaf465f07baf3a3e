/* Optimizers: one field table per type with Keras's names and defaults, the slots each
 * type keeps, and the step that hands the whole trainable arena to the backend's fused
 * optimizer_update (formulas in core/backend.h). Adam's bias correction is computed here in
 * float32, as Keras does, so a step matches Keras's to the rounding of the update itself. */
#include "solver/optimizer.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

const char *const tfc_optimizer_names[TFC_OPTIMIZER_COUNT + 1] = {
    [TFC_OPTIMIZER_SGD] = "sgd",         [TFC_OPTIMIZER_ADAM] = "adam",
    [TFC_OPTIMIZER_ADAMW] = "adamw",     [TFC_OPTIMIZER_RMSPROP] = "rmsprop",
    [TFC_OPTIMIZER_ADAGRAD] = "adagrad", [TFC_OPTIMIZER_COUNT] = NULL};

#define OFF(member) offsetof(tfc_optimizer_config, member)
#define TYPE_FIELD                                                                           \
    {"type", TFC_F_ENUM, OFF(type), "sgd", TFC_UNBOUNDED, tfc_optimizer_names,               \
     "the optimizer"}
#define LR_FIELD(def)                                                                        \
    {"learning_rate", TFC_F_FLOAT, OFF(learning_rate), def, 0, 1e30, NULL,                   \
     "base learning rate (the lr_policy scales it)"}
#define EPS_FIELD                                                                            \
    {"epsilon", TFC_F_FLOAT, OFF(epsilon), "1e-7", 0, 1e30, NULL,                            \
     "small constant for numerical stability"}

/* Keras's arguments of every optimizer that tfc has as solver keys, or not at all:
 * accepted at Keras's default (TFC_F_FIXED), else an error saying which key tfc has. */
#define CLIP_HINT                                                                            \
    "tfc clips by the global norm of all gradients: the solver's clip_gradients (Keras's "   \
    "global_clipnorm)"
#define EMA_HINT "the solver's ema: {decay} keeps a moving average of the weights"
#define KERAS_COMMON                                                                         \
    TFC_FIXED_FIELD("clipnorm", TFC_NO_DEFAULT, CLIP_HINT),                                  \
        TFC_FIXED_FIELD("clipvalue", TFC_NO_DEFAULT, CLIP_HINT),                             \
        TFC_FIXED_FIELD("global_clipnorm", TFC_NO_DEFAULT, CLIP_HINT),                       \
        TFC_FIXED_FIELD("use_ema", "false", EMA_HINT),                                       \
        TFC_FIXED_FIELD("ema_momentum", "0.99", EMA_HINT),                                   \
        TFC_FIXED_FIELD("ema_overwrite_frequency", TFC_NO_DEFAULT, EMA_HINT),                \
        TFC_FIXED_FIELD("loss_scale_factor", TFC_NO_DEFAULT,                                 \
                        "the solver's precision: float16 scales the loss dynamically "       \
                        "(loss_scale)"),                                                     \
        TFC_FIXED_FIELD("gradient_accumulation_steps", TFC_NO_DEFAULT,                       \
                        "the solver's iter_size accumulates that many batches' gradients")
/* Keras 3's weight_decay of the optimizers other than AdamW (decoupled) */
#define WEIGHT_DECAY_FIXED                                                                   \
    TFC_FIXED_FIELD("weight_decay", TFC_NO_DEFAULT,                                          \
                    "tfc's decoupled decay is optimizer type adamw; the solver's "           \
                    "weight_decay adds L2 decay to the gradient (Caffe's)")

static const tfc_field sgd_fields[] = {
    TYPE_FIELD,
    LR_FIELD("0.01"),
    {"momentum", TFC_F_FLOAT, OFF(momentum), "0.0", 0, 1, NULL,
     "velocity = momentum * velocity - lr * g; 0 is plain gradient descent"},
    {"nesterov", TFC_F_BOOL, OFF(nesterov), "false", TFC_UNBOUNDED, NULL,
     "Nesterov momentum"},
    WEIGHT_DECAY_FIXED,
    KERAS_COMMON,
    {NULL}};

#define ADAM_COMMON                                                                          \
    {"beta_1", TFC_F_FLOAT, OFF(beta_1), "0.9", 0, 0.999999, NULL,                           \
     "decay of the first-moment estimate"},                                                  \
    {"beta_2", TFC_F_FLOAT, OFF(beta_2), "0.999", 0, 0.999999, NULL,                         \
     "decay of the second-moment estimate"},                                                 \
    EPS_FIELD,                                                                               \
    {"amsgrad", TFC_F_BOOL, OFF(amsgrad), "false", TFC_UNBOUNDED, NULL,                      \
     "use the maximum of past second moments (AMSGrad)"}

static const tfc_field adam_fields[] = {
    TYPE_FIELD, LR_FIELD("0.001"), ADAM_COMMON, WEIGHT_DECAY_FIXED, KERAS_COMMON, {NULL}};

static const tfc_field adamw_fields[] = {
    TYPE_FIELD,
    LR_FIELD("0.001"),
    {"weight_decay", TFC_F_FLOAT, OFF(weight_decay), "0.004", 0, 1e30, NULL,
     "decoupled decay: w -= lr * weight_decay * w before each update"},
    ADAM_COMMON,
    KERAS_COMMON,
    {NULL}};

static const tfc_field rmsprop_fields[] = {
    TYPE_FIELD,
    LR_FIELD("0.001"),
    {"rho", TFC_F_FLOAT, OFF(rho), "0.9", 0, 1, NULL, "decay of the squared-gradient average"},
    {"momentum", TFC_F_FLOAT, OFF(momentum), "0.0", 0, 1, NULL, "momentum of the increments"},
    EPS_FIELD,
    {"centered", TFC_F_BOOL, OFF(centered), "false", TFC_UNBOUNDED, NULL,
     "normalise by the estimated variance instead of the second moment"},
    WEIGHT_DECAY_FIXED,
    KERAS_COMMON,
    {NULL}};

static const tfc_field adagrad_fields[] = {
    TYPE_FIELD,
    LR_FIELD("0.001"),
    {"initial_accumulator_value", TFC_F_FLOAT, OFF(initial_accumulator_value), "0.1", 0, 1e30,
     NULL, "starting value of the accumulated squared gradients"},
    EPS_FIELD,
    WEIGHT_DECAY_FIXED,
    KERAS_COMMON,
    {NULL}};

static const tfc_field *const optimizer_tables[TFC_OPTIMIZER_COUNT] = {
    [TFC_OPTIMIZER_SGD] = sgd_fields,         [TFC_OPTIMIZER_ADAM] = adam_fields,
    [TFC_OPTIMIZER_ADAMW] = adamw_fields,     [TFC_OPTIMIZER_RMSPROP] = rmsprop_fields,
    [TFC_OPTIMIZER_ADAGRAD] = adagrad_fields};

const tfc_field *tfc_optimizer_fields(tfc_optimizer_type type)
{
    return (unsigned)type < TFC_OPTIMIZER_COUNT ? optimizer_tables[type] : NULL;
}

/* The `type` of a mapping (or a bare name), checked against `names`; def when absent. */
static tfc_status read_type(const tfc_node *node, const char *path, const char *const *names,
                            int def, int *type, tfc_error *err)
{
    char tpath[320];
    *type = def;
    if (node->kind == TFC_NODE_SCALAR) return tfc_node_enum(node, path, names, type, err);
    const tfc_node *t = tfc_node_get(node, "type");
    snprintf(tpath, sizeof tpath, "%s.type", path);
    return t && !tfc_node_is_null(t) ? tfc_node_enum(t, tpath, names, type, err) : TFC_OK;
}

tfc_status tfc_optimizer_config_read(const tfc_node *node, const char *path,
                                     tfc_optimizer_config *out, tfc_error *err)
{
    memset(out, 0, sizeof *out);
    if (tfc_node_is_null(node)) node = NULL;
    if (node && node->kind == TFC_NODE_SEQ)
        return tfc_node_error(err, TFC_ERR_CONFIG, node, path,
                              "expected a mapping such as {type: adam, learning_rate: 0.001} or "
                              "an optimizer name, found a sequence");
    int type = TFC_OPTIMIZER_SGD;
    if (node && read_type(node, path, tfc_optimizer_names, TFC_OPTIMIZER_SGD, &type, err))
        return TFC_ERR_CONFIG;
    const tfc_node *map = node && node->kind == TFC_NODE_MAP ? node : NULL;
    tfc_status s = tfc_schema_apply(optimizer_tables[type], map, path, out, err);
    out->type = type;
    return s;
}

/* Keras's slot variables per type, in slot order (NULL: unused for this config). */
static void slot_names(const tfc_optimizer_config *c, const char *names[3])
{
    names[0] = names[1] = names[2] = NULL;
    switch ((tfc_optimizer_type)c->type) {
    case TFC_OPTIMIZER_SGD:
        if (c->momentum != 0) names[0] = "momentum";
        break;
    case TFC_OPTIMIZER_ADAM:
    case TFC_OPTIMIZER_ADAMW:
        names[0] = "momentum";
        names[1] = "velocity";
        if (c->amsgrad) names[2] = "velocity_hat";
        break;
    case TFC_OPTIMIZER_RMSPROP:
        names[0] = "velocity";
        if (c->momentum > 0) names[1] = "momentum";
        if (c->centered) names[2] = "average_gradient";
        break;
    case TFC_OPTIMIZER_ADAGRAD: names[0] = "accumulator"; break;
    case TFC_OPTIMIZER_COUNT: break;
    }
}

int tfc_optimizer_slot_count(const tfc_optimizer_config *cfg)
{
    const char *names[3] = {NULL, NULL, NULL};
    slot_names(cfg, names);
    return !!names[0] + !!names[1] + !!names[2];
}

tfc_status tfc_optimizer_init(tfc_optimizer *o, const tfc_optimizer_config *cfg, tfc_backend *be,
                              int64_t n, tfc_error *err)
{
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    o->be = be;
    o->n = n;
    slot_names(cfg, o->slot_name);
    size_t bytes = (size_t)(n > 0 ? n : 1) * sizeof(float);
    float *host = NULL;
    for (int k = 0; k < 3; k++) {
        if (!o->slot_name[k]) continue;
        o->slot[k] = be->ops->alloc(be, bytes);
        if (!o->slot[k]) {
            tfc_optimizer_release(o);
            free(host);
            return tfc_error_set(err, TFC_ERR_NOMEM,
                                 "cannot allocate %.1f MiB for the optimizer's %s on %s",
                                 (double)bytes / (1 << 20), o->slot_name[k], be->ops->name);
        }
        o->nslots = k + 1;
        if (cfg->type == TFC_OPTIMIZER_ADAGRAD && cfg->initial_accumulator_value != 0) {
            if (!host) host = malloc(bytes);
            if (!host) {
                tfc_optimizer_release(o);
                return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
            }
            for (int64_t i = 0; i < n; i++) host[i] = (float)cfg->initial_accumulator_value;
            be->ops->upload(be, o->slot[k], host, (size_t)n * sizeof(float));
        } else {
            be->ops->zero(be, o->slot[k], bytes);
        }
    }
    free(host);
    return TFC_OK;
}

void tfc_optimizer_release(tfc_optimizer *o)
{
    for (int k = 0; k < 3; k++)
        if (o->slot[k]) o->be->ops->free(o->be, o->slot[k]);
    memset(o->slot, 0, sizeof o->slot);
    o->nslots = 0;
}

/* The backend's description of the `iter`-th update (grad_scale as given). */
static tfc_optim_desc describe(const tfc_optimizer *o, int64_t iter, double lr, double grad_scale,
                               double l2)
{
    const tfc_optimizer_config *c = &o->cfg;
    tfc_optim_desc d = {0};
    d.lr = (float)lr;
    d.grad_scale = (float)grad_scale;
    d.l2 = (float)l2;
    d.epsilon = (float)c->epsilon;
    d.type = (tfc_optimizer_type)c->type;
    switch (d.type) {
    case TFC_OPTIMIZER_SGD:
        d.momentum = (float)c->momentum;
        d.nesterov = c->nesterov;
        break;
    case TFC_OPTIMIZER_ADAMW:
        /* Keras applies the decay with the current learning rate: w -= w * wd * lr. */
        d.decay = (float)c->weight_decay * (float)lr;
        /* fall through */
    case TFC_OPTIMIZER_ADAM: {
        d.beta_1 = (float)c->beta_1;
        d.beta_2 = (float)c->beta_2;
        d.amsgrad = c->amsgrad;
        /* alpha = lr sqrt(1 - beta_2^t) / (1 - beta_1^t), t = iter + 1, in float32 as
         * Keras computes it. */
        float t = (float)(iter + 1);
        float b1t = powf(d.beta_1, t), b2t = powf(d.beta_2, t);
        d.alpha = d.lr * sqrtf(1.0f - b2t) / (1.0f - b1t);
        break;
    }
    case TFC_OPTIMIZER_RMSPROP:
        d.rho = (float)c->rho;
        d.momentum = (float)c->momentum;
        d.centered = c->centered;
        break;
    case TFC_OPTIMIZER_ADAGRAD: break;
    case TFC_OPTIMIZER_COUNT: TFC_ASSERT(!"unknown optimizer type"); break;
    }
    return d;
}

void tfc_optimizer_step(tfc_optimizer *o, int64_t iter, double lr, double grad_scale, double l2,
                        float *params, const float *grads)
{
    tfc_optim_desc d = describe(o, iter, lr, grad_scale, l2);
    o->be->ops->optimizer_update(o->be, &d, o->n, params, grads, o->slot[0], o->slot[1],
                                 o->slot[2]);
}

void tfc_optimizer_step_at(tfc_optimizer *o, int64_t iter, double lr, const tfc_step_state *st,
                           double l2, float *params, const float *grads, int rates_at_state)
{
    tfc_optim_desc d = describe(o, iter, lr, 0, l2);
    d.rates_at_state = rates_at_state;
    o->be->ops->optimizer_update_at(o->be, &d, st, o->n, params, grads, o->slot[0], o->slot[1],
                                    o->slot[2]);
}

void tfc_optimizer_rates(const tfc_optimizer *o, int64_t iter, double lr, float rates[3])
{
    tfc_optim_desc d = describe(o, iter, lr, 0, 0);
    rates[0] = d.lr, rates[1] = d.alpha, rates[2] = d.decay;
}
