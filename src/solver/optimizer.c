/* Optimizers: one field table per type with Keras's names and defaults, the slots each
 * type keeps, and the step that hands the whole trainable arena to the backend's fused
 * optimizer_update (formulas in core/backend.h). Adam's bias correction is computed here in
 * float32, as Keras does, so a step matches Keras's to the rounding of the update itself. */
#include "solver/optimizer.h"

#include <ctype.h>
#include <math.h>
#include <regex.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *const tfc_optimizer_names[TFC_OPTIMIZER_COUNT + 1] = {
    [TFC_OPTIMIZER_SGD] = "sgd",           [TFC_OPTIMIZER_ADAM] = "adam",
    [TFC_OPTIMIZER_ADAMW] = "adamw",       [TFC_OPTIMIZER_RMSPROP] = "rmsprop",
    [TFC_OPTIMIZER_ADAGRAD] = "adagrad",   [TFC_OPTIMIZER_NADAM] = "nadam",
    [TFC_OPTIMIZER_ADAMAX] = "adamax",     [TFC_OPTIMIZER_LION] = "lion",
    [TFC_OPTIMIZER_ADADELTA] = "adadelta", [TFC_OPTIMIZER_FTRL] = "ftrl",
    [TFC_OPTIMIZER_LAMB] = "lamb",         [TFC_OPTIMIZER_ADAFACTOR] = "adafactor",
    [TFC_OPTIMIZER_MUON] = "muon",         [TFC_OPTIMIZER_COUNT] = NULL,
    [TFC_OPTIMIZER_SCHEDULE_FREE_ADAMW] = "schedulefreeadamw"};

#define OFF(member) offsetof(tfc_optimizer_config, member)
#define TYPE_FIELD                                                                           \
    {"type", TFC_F_NODE, OFF(type_node), "sgd", TFC_UNBOUNDED, NULL,                         \
     "the optimizer: its name, or Keras's class name (Adam, RMSprop, ...)"}
/* read by tfc_optimizer_config_read: a number, or a Keras schedule (a mapping) */
#define LR_FIELD(def)                                                                        \
    {"learning_rate", TFC_F_NODE, OFF(lr_node), def, 0, 1e30, NULL,                          \
     "base learning rate (the lr_policy scales it), or a Keras schedule such as "            \
     "{ExponentialDecay: {initial_learning_rate, decay_steps, decay_rate}}"}
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
    {"name", TFC_F_STRING, OFF(name), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,                   \
     "Keras's name of the optimizer object (kept in the resolved config, nothing else)"},    \
        TFC_FIXED_FIELD("clipnorm", TFC_NO_DEFAULT, CLIP_HINT),                              \
        {"clipvalue", TFC_F_FLOAT, OFF(clipvalue), TFC_NO_DEFAULT, 1e-30, 1e30, NULL,          \
         "each gradient value is clipped to [-clipvalue, clipvalue] (null: not clipped)"},     \
        TFC_FIXED_FIELD("global_clipnorm", TFC_NO_DEFAULT, CLIP_HINT),                       \
        TFC_FIXED_FIELD("use_ema", "false", EMA_HINT),                                       \
        TFC_FIXED_FIELD("ema_momentum", "0.99", EMA_HINT),                                   \
        TFC_FIXED_FIELD("ema_overwrite_frequency", TFC_NO_DEFAULT, EMA_HINT),                \
        TFC_FIXED_FIELD("loss_scale_factor", TFC_NO_DEFAULT,                                 \
                        "the solver's precision: float16 scales the loss dynamically "       \
                        "(loss_scale)"),                                                     \
        TFC_FIXED_FIELD("gradient_accumulation_steps", TFC_NO_DEFAULT,                       \
                        "the solver's iter_size accumulates that many batches' gradients"),  \
        {"lr", TFC_F_REFUSED, 0, TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,                         \
         "Keras 2's name: write learning_rate (Keras 3 refuses lr too)"},                      \
        {"decay", TFC_F_REFUSED, 0, TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,                      \
         "Keras 2's lr / (1 + decay * iterations), which Keras 3 ignores with a warning: "      \
         "write the solver's lr_policy: {type: inv, gamma: <decay>, power: 1}, the same rates"}
/* Keras 3's weight_decay, which every optimizer takes (AdamW's default 0.004, the others'
 * None): decoupled, w -= lr * weight_decay * w before the update, as Keras's
 * _apply_weight_decay. Not the solver's weight_decay, Caffe's L2 term in the gradient. */
#define WEIGHT_DECAY_FIELD(def)                                                              \
    {"weight_decay", TFC_F_FLOAT, OFF(weight_decay), def, 0, 1e30, NULL,                     \
     "decoupled decay: w -= lr * weight_decay * w before each update (null: none)"}
#define BETA_FIELD(key, member, def, hi, what)                                               \
    {key, TFC_F_FLOAT, OFF(member), def, 0, hi, NULL, what}

static const tfc_field sgd_fields[] = {
    TYPE_FIELD,
    LR_FIELD("0.01"),
    {"momentum", TFC_F_FLOAT, OFF(momentum), "0.0", 0, 1, NULL,
     "velocity = momentum * velocity - lr * g; 0 is plain gradient descent"},
    {"nesterov", TFC_F_BOOL, OFF(nesterov), "false", TFC_UNBOUNDED, NULL,
     "Nesterov momentum"},
    WEIGHT_DECAY_FIELD(TFC_NO_DEFAULT),
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
    TYPE_FIELD,
    LR_FIELD("0.001"),
    ADAM_COMMON,
    WEIGHT_DECAY_FIELD(TFC_NO_DEFAULT),
    KERAS_COMMON,
    {NULL}};

static const tfc_field adamw_fields[] = {
    TYPE_FIELD,
    LR_FIELD("0.001"),
    WEIGHT_DECAY_FIELD("0.004"),
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
    WEIGHT_DECAY_FIELD(TFC_NO_DEFAULT),
    KERAS_COMMON,
    {NULL}};

static const tfc_field adagrad_fields[] = {
    TYPE_FIELD,
    LR_FIELD("0.001"),
    {"initial_accumulator_value", TFC_F_FLOAT, OFF(initial_accumulator_value), "0.1", 0, 1e30,
     NULL, "starting value of the accumulated squared gradients"},
    EPS_FIELD,
    WEIGHT_DECAY_FIELD(TFC_NO_DEFAULT),
    KERAS_COMMON,
    {NULL}};

/* Nadam, Adamax and Lamb: Adam's betas and epsilon (no amsgrad); Lamb's update is scaled
 * per variable by ||w|| / ||update||, and its keys are Nadam's */
static const tfc_field nadam_fields[] = {
    TYPE_FIELD,
    LR_FIELD("0.001"),
    BETA_FIELD("beta_1", beta_1, "0.9", 0.999999, "decay of the first-moment estimate"),
    BETA_FIELD("beta_2", beta_2, "0.999", 0.999999, "decay of the second-moment estimate"),
    EPS_FIELD,
    WEIGHT_DECAY_FIELD(TFC_NO_DEFAULT),
    KERAS_COMMON,
    {NULL}};

static const tfc_field adamax_fields[] = {
    TYPE_FIELD,
    LR_FIELD("0.001"),
    BETA_FIELD("beta_1", beta_1, "0.9", 0.999999, "decay of the first-moment estimate"),
    BETA_FIELD("beta_2", beta_2, "0.999", 0.999999, "decay of the infinity norm"),
    EPS_FIELD,
    WEIGHT_DECAY_FIELD(TFC_NO_DEFAULT),
    KERAS_COMMON,
    {NULL}};

/* Lion: beta_1 in (0, 1] (Keras refuses 0; checked after the table) */
static const tfc_field lion_fields[] = {
    TYPE_FIELD,
    LR_FIELD("0.001"),
    BETA_FIELD("beta_1", beta_1, "0.9", 1, "weight of the momentum in the update's sign"),
    BETA_FIELD("beta_2", beta_2, "0.99", 1, "decay of the momentum"),
    WEIGHT_DECAY_FIELD(TFC_NO_DEFAULT),
    KERAS_COMMON,
    {NULL}};

static const tfc_field adadelta_fields[] = {
    TYPE_FIELD,
    LR_FIELD("0.001"),
    {"rho", TFC_F_FLOAT, OFF(rho), "0.95", 0, 1, NULL, "decay of the accumulated averages"},
    EPS_FIELD,
    WEIGHT_DECAY_FIELD(TFC_NO_DEFAULT),
    KERAS_COMMON,
    {NULL}};

static const tfc_field ftrl_fields[] = {
    TYPE_FIELD,
    LR_FIELD("0.001"),
    {"learning_rate_power", TFC_F_FLOAT, OFF(lr_power), "-0.5", -1e30, 0, NULL,
     "how the per-weight rate falls as the squared gradients accumulate (<= 0)"},
    {"initial_accumulator_value", TFC_F_FLOAT, OFF(initial_accumulator_value), "0.1", 0, 1e30,
     NULL, "starting value of the accumulated squared gradients"},
    {"l1_regularization_strength", TFC_F_FLOAT, OFF(l1), "0.0", 0, 1e30, NULL,
     "L1 strength: weights whose linear term is within it become exactly 0"},
    {"l2_regularization_strength", TFC_F_FLOAT, OFF(l2), "0.0", 0, 1e30, NULL, "L2 strength"},
    {"l2_shrinkage_regularization_strength", TFC_F_FLOAT, OFF(l2_shrinkage), "0.0", 0, 1e30,
     NULL, "L2 shrinkage added to the gradient in the linear term"},
    {"beta", TFC_F_FLOAT, OFF(ftrl_beta), "0.0", TFC_UNBOUNDED, NULL,
     "adds beta / (2 lr) to the L2 strength"},
    WEIGHT_DECAY_FIELD(TFC_NO_DEFAULT),
    KERAS_COMMON,
    {NULL}};

/* ScheduleFreeAdamW: interpolation and averaging in place of a schedule */
static const tfc_field schedule_free_fields[] = {
    TYPE_FIELD,
    LR_FIELD("0.0025"),
    BETA_FIELD("beta_1", beta_1, "0.9", 0.999999,
               "interpolation between the averaged and the gradient sequences"),
    BETA_FIELD("beta_2", beta_2, "0.999", 0.999999, "decay of the second-moment estimate"),
    {"epsilon", TFC_F_FLOAT, OFF(epsilon), "1e-8", 0, 1e30, NULL,
     "small constant for numerical stability"},
    {"warmup_steps", TFC_F_INT, OFF(warmup_steps), "0", 0, 1e9, NULL,
     "the rate rises linearly to learning_rate over these updates"},
    WEIGHT_DECAY_FIELD(TFC_NO_DEFAULT),
    KERAS_COMMON,
    {NULL}};

/* Adafactor: factored second moments; the step is relative to each variable's RMS */
static const tfc_field adafactor_fields[] = {
    TYPE_FIELD,
    LR_FIELD("0.001"),
    {"beta_2_decay", TFC_F_FLOAT, OFF(beta_2_decay), "-0.8", -1e30, 0, NULL,
     "the second moments' decay at step t is 1 - t^beta_2_decay"},
    {"epsilon_1", TFC_F_FLOAT, OFF(epsilon), "1e-30", 0, 1e30, NULL,
     "added to the squared gradients"},
    {"epsilon_2", TFC_F_FLOAT, OFF(epsilon_2), "1e-3", 0, 1e30, NULL,
     "the smallest RMS of a variable that scales its step"},
    {"clip_threshold", TFC_F_FLOAT, OFF(clip_threshold), "1.0", 1e-30, 1e30, NULL,
     "the update's RMS is clipped to this"},
    {"relative_step", TFC_F_BOOL, OFF(relative_step), "true", TFC_UNBOUNDED, NULL,
     "the step is min(learning_rate, 1 / sqrt(t)); in Keras 3 that holds either way"},
    WEIGHT_DECAY_FIELD(TFC_NO_DEFAULT),
    KERAS_COMMON,
    {NULL}};

/* Muon: Newton-Schulz orthogonalised momentum for the rank-2 weights, AdamW for the rest
 * (exclude_layers and rms_rate are read after the table: a list, and a number or null) */
static const tfc_field muon_fields[] = {
    TYPE_FIELD,
    LR_FIELD("0.001"),
    BETA_FIELD("adam_beta_1", beta_1, "0.9", 0.999999, "AdamW's first-moment decay"),
    BETA_FIELD("adam_beta_2", beta_2, "0.999", 0.999999, "AdamW's second-moment decay"),
    {"adam_weight_decay", TFC_F_FLOAT, OFF(adam_weight_decay), "0.004", 0, 1e30, NULL,
     "the AdamW variables' decoupled decay (weight_decay is the others')"},
    EPS_FIELD,
    WEIGHT_DECAY_FIELD("0.004"),
    {"exclude_layers", TFC_F_NODE, OFF(exclude_node), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "regular expressions: a weight whose path (layer/weight) one matches takes AdamW"},
    {"exclude_embeddings", TFC_F_BOOL, OFF(exclude_embeddings), "true", TFC_UNBOUNDED, NULL,
     "weights whose path holds \"embedding\" take AdamW"},
    {"muon_a", TFC_F_FLOAT, OFF(muon_a), "3.4445", TFC_UNBOUNDED, NULL,
     "Newton-Schulz coefficient a"},
    {"muon_b", TFC_F_FLOAT, OFF(muon_b), "-4.7750", TFC_UNBOUNDED, NULL,
     "Newton-Schulz coefficient b"},
    {"muon_c", TFC_F_FLOAT, OFF(muon_c), "2.0315", TFC_UNBOUNDED, NULL,
     "Newton-Schulz coefficient c"},
    {"adam_lr_ratio", TFC_F_FLOAT, OFF(adam_lr_ratio), "1", 0, 1e30, NULL,
     "the AdamW variables' learning rate is learning_rate times this"},
    {"momentum", TFC_F_FLOAT, OFF(momentum), "0.95", 0, 1, NULL, "Muon's momentum"},
    {"ns_steps", TFC_F_INT, OFF(ns_steps), "5", 0, 100, NULL, "Newton-Schulz iterations"},
    {"nesterov", TFC_F_BOOL, OFF(nesterov), "true", TFC_UNBOUNDED, NULL,
     "orthogonalise g + momentum m instead of m"},
    {"rms_rate", TFC_F_NODE, OFF(rms_rate_node), "0.2", 0, 1e30, NULL,
     "the update is scaled by sqrt(max(rows, cols)) rms_rate (null: not scaled)"},
    KERAS_COMMON,
    {NULL}};

static const tfc_field *const optimizer_tables[TFC_OPTIMIZER_COUNT] = {
    [TFC_OPTIMIZER_SGD] = sgd_fields,           [TFC_OPTIMIZER_ADAM] = adam_fields,
    [TFC_OPTIMIZER_ADAMW] = adamw_fields,       [TFC_OPTIMIZER_RMSPROP] = rmsprop_fields,
    [TFC_OPTIMIZER_ADAGRAD] = adagrad_fields,   [TFC_OPTIMIZER_NADAM] = nadam_fields,
    [TFC_OPTIMIZER_ADAMAX] = adamax_fields,     [TFC_OPTIMIZER_LION] = lion_fields,
    [TFC_OPTIMIZER_ADADELTA] = adadelta_fields, [TFC_OPTIMIZER_FTRL] = ftrl_fields,
    [TFC_OPTIMIZER_LAMB] = nadam_fields,        [TFC_OPTIMIZER_ADAFACTOR] = adafactor_fields,
    [TFC_OPTIMIZER_MUON] = muon_fields,
    [TFC_OPTIMIZER_SCHEDULE_FREE_ADAMW] = schedule_free_fields};

/* The rules that work per variable (tfc_optim_var), which the GPU has no kernel of */
static int per_variable(int type)
{
    return type == TFC_OPTIMIZER_LAMB || type == TFC_OPTIMIZER_ADAFACTOR ||
           type == TFC_OPTIMIZER_MUON;
}

int tfc_optimizer_cpu_first(tfc_optimizer_type type)
{
    return type >= TFC_OPTIMIZER_NADAM && type < TFC_OPTIMIZER_COUNT;
}

const tfc_field *tfc_optimizer_fields(tfc_optimizer_type type)
{
    return (unsigned)type < TFC_OPTIMIZER_COUNT ? optimizer_tables[type] : NULL;
}

/* An optimizer's name, or Keras's class name of it in any case (Adam, RMSprop, SGD,
 * ScheduleFreeAdamW are tfc's names in lower case, as keras.optimizers.get takes them) */
static tfc_status read_type_name(const tfc_node *n, const char *path, int *type,
                                 tfc_error *err)
{
    if (n->kind == TFC_NODE_SCALAR)
        for (int k = 0; k < TFC_OPTIMIZER_COUNT; k++)
            if (!strcasecmp(n->str, tfc_optimizer_names[k])) {
                *type = k;
                return TFC_OK;
            }
    return tfc_node_enum(n, path, tfc_optimizer_names, type, err);
}

/* The type of an `optimizer:` value: a bare name, a mapping's `type` (sgd when absent), or
 * the class_name of Keras's serialized form; *args gets the mapping of its keys (the
 * mapping itself, or the serialized form's config; NULL for a bare name). */
static tfc_status read_type(const tfc_node *node, const char *path, int *type,
                            const tfc_node **args, tfc_error *err)
{
    char tpath[320];
    *type = TFC_OPTIMIZER_SGD;
    *args = NULL;
    if (node->kind == TFC_NODE_SCALAR) return read_type_name(node, path, type, err);
    const tfc_node *cls = tfc_node_get(node, "class_name");
    if (cls) { /* keras.optimizers.serialize's {module, class_name, config, registered_name} */
        for (int i = 0; i < node->n; i++) {
            const char *k = node->keys[i]->str;
            if (strcmp(k, "class_name") && strcmp(k, "config") && strcmp(k, "module") &&
                strcmp(k, "registered_name"))
                return tfc_node_error(err, TFC_ERR_CONFIG, node->keys[i], path,
                                      "unknown key '%s' in a serialized optimizer (known keys: "
                                      "class_name, config, module, registered_name)", k);
        }
        const tfc_node *config = tfc_node_get(node, "config");
        snprintf(tpath, sizeof tpath, "%s.config", path);
        if (config && !tfc_node_is_null(config) && config->kind != TFC_NODE_MAP)
            return tfc_node_error(err, TFC_ERR_CONFIG, config, tpath,
                                  "expected the optimizer's arguments as a mapping");
        *args = config && !tfc_node_is_null(config) ? config : NULL;
        snprintf(tpath, sizeof tpath, "%s.class_name", path);
        return read_type_name(cls, tpath, type, err);
    }
    *args = node;
    const tfc_node *t = tfc_node_get(node, "type");
    snprintf(tpath, sizeof tpath, "%s.type", path);
    return t && !tfc_node_is_null(t) ? read_type_name(t, tpath, type, err) : TFC_OK;
}

/* learning_rate (lr_node): absent, the table's default; a number >= 0; or a mapping, a
 * Keras schedule the solver reads (lr_schedule) */
static tfc_status read_learning_rate(const tfc_field *fields, const char *path,
                                     tfc_optimizer_config *out, tfc_error *err)
{
    const tfc_node *n = out->lr_node;
    char lpath[320];
    snprintf(lpath, sizeof lpath, "%s.learning_rate", path);
    out->learning_rate = 0;
    if (!n || tfc_node_is_null(n)) {
        for (const tfc_field *f = fields; f->name; f++)
            if (!strcmp(f->name, "learning_rate")) out->learning_rate = strtod(f->def, NULL);
        return TFC_OK;
    }
    if (n->kind == TFC_NODE_MAP) {
        out->lr_schedule = n;
        return TFC_OK;
    }
    if (n->kind == TFC_NODE_SEQ)
        return tfc_node_error(err, TFC_ERR_CONFIG, n, lpath,
                              "expected a number or a Keras schedule such as {ExponentialDecay: "
                              "{initial_learning_rate: 0.1, decay_steps: 1000, decay_rate: 0.96}}, "
                              "found a sequence");
    if (tfc_node_double(n, lpath, &out->learning_rate, err)) return TFC_ERR_CONFIG;
    if (!(out->learning_rate >= 0 && out->learning_rate <= 1e30))
        return tfc_node_error(err, TFC_ERR_CONFIG, n, lpath,
                              "expected a number in [0, 1e+30], found \"%s\"", n->str);
    return TFC_OK;
}

/* Muon's rms_rate (absent 0.2, null none: 0) and exclude_layers (a list of regular
 * expressions, each compiled here so that a bad one is an error at its line) */
static tfc_status read_muon(const tfc_node *map, const char *path, tfc_optimizer_config *out,
                            tfc_error *err)
{
    char kpath[320];
    const tfc_node *r = tfc_node_get(map, "rms_rate"); /* the table's NULL for null too */
    out->rms_rate = 0.2;
    snprintf(kpath, sizeof kpath, "%s.rms_rate", path);
    if (r && tfc_node_is_null(r)) out->rms_rate = 0;
    else if (r && tfc_node_double(r, kpath, &out->rms_rate, err)) return TFC_ERR_CONFIG;
    if (!(out->rms_rate >= 0 && out->rms_rate <= 1e30))
        return tfc_node_error(err, TFC_ERR_CONFIG, r, kpath,
                              "expected a number in [0, 1e+30] or null, found \"%s\"", r->str);
    const tfc_node *e = out->exclude_node;
    snprintf(kpath, sizeof kpath, "%s.exclude_layers", path);
    if (!e || tfc_node_is_null(e)) return TFC_OK;
    if (e->kind != TFC_NODE_SEQ || e->n > TFC_OPTIM_EXCLUDES)
        return tfc_node_error(err, TFC_ERR_CONFIG, e, kpath,
                              "expected a list of at most %d regular expressions, such as "
                              "[%s] (Keras would take a string's characters one by one)",
                              TFC_OPTIM_EXCLUDES,
                              e->kind == TFC_NODE_SCALAR ? e->str : "^out/");
    for (int k = 0; k < e->n; k++) {
        const tfc_node *p = e->vals[k];
        regex_t re;
        if (p->kind != TFC_NODE_SCALAR || strlen(p->str) >= sizeof out->exclude[0] ||
            regcomp(&re, p->str, REG_EXTENDED | REG_NOSUB))
            return tfc_node_error(err, TFC_ERR_CONFIG, p, kpath,
                                  "expected a regular expression (POSIX extended, under %zu "
                                  "characters) matched against layer/weight paths",
                                  sizeof out->exclude[0]);
        regfree(&re);
        snprintf(out->exclude[k], sizeof out->exclude[k], "%s", p->str);
    }
    out->nexclude = e->n;
    return TFC_OK;
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
    const tfc_node *map = NULL;
    if (node && read_type(node, path, &type, &map, err)) return TFC_ERR_CONFIG;
    tfc_status s = tfc_schema_apply(optimizer_tables[type], map, path, out, err);
    out->type = type;
    if (!s) s = read_learning_rate(optimizer_tables[type], path, out, err);
    if (!s && type == TFC_OPTIMIZER_MUON) s = read_muon(map, path, out, err);
    if (!s && type == TFC_OPTIMIZER_LION && out->beta_1 <= 0) {
        char bpath[320];
        snprintf(bpath, sizeof bpath, "%s.beta_1", path);
        const tfc_node *b = tfc_node_get(map, "beta_1");
        return tfc_node_error(err, TFC_ERR_CONFIG, b ? b : node, bpath,
                              "lion's beta_1 must be in (0, 1] (Keras refuses 0)");
    }
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
    case TFC_OPTIMIZER_NADAM:
        names[0] = "momentum";
        names[1] = "velocity";
        break;
    case TFC_OPTIMIZER_ADAMAX:
        names[0] = "momentum";
        names[1] = "norm";
        break;
    case TFC_OPTIMIZER_LION: names[0] = "momentum"; break;
    case TFC_OPTIMIZER_ADADELTA:
        names[0] = "accumulated_grad";
        names[1] = "accumulated_delta_var";
        break;
    case TFC_OPTIMIZER_FTRL:
        names[0] = "accumulator";
        names[1] = "linear";
        break;
    case TFC_OPTIMIZER_LAMB:
        names[0] = "momentum";
        names[1] = "velocity";
        break;
    case TFC_OPTIMIZER_ADAFACTOR: /* Keras's _r, _c and _v */
        names[0] = "r";
        names[1] = "c";
        names[2] = "velocity";
        break;
    case TFC_OPTIMIZER_SCHEDULE_FREE_ADAMW:
        names[0] = "momentum";
        names[1] = "velocity";
        break;
    case TFC_OPTIMIZER_MUON: /* velocity: the AdamW variables' (0 for the others) */
        names[0] = "momentum";
        names[1] = "velocity";
        break;
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
    if (be->device >= 0 && tfc_optimizer_cpu_first((tfc_optimizer_type)cfg->type))
        return tfc_error_set(err, TFC_ERR_CONFIG,
                             "optimizer %s has %s on the %s backend yet; train with it on "
                             "--device cpu (docs/gpu.md)",
                             tfc_optimizer_names[cfg->type],
                             per_variable(cfg->type) ? "no kernel"
                                                     : "not run under make test-gpu",
                             be->ops->name);
    o->cfg = *cfg;
    o->be = be;
    o->n = n;
    o->u_product = 1.0f;
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
        if (k == 0 && (cfg->type == TFC_OPTIMIZER_ADAGRAD || cfg->type == TFC_OPTIMIZER_FTRL) &&
            cfg->initial_accumulator_value != 0) {
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
    free(o->vars);
    o->vars = NULL;
    o->nvars = 0;
}

/* Keras's Muon._should_use_adamw by name: "embedding" anywhere in the path (any case), with
 * exclude_embeddings, or a match of an exclude_layers pattern */
static int muon_excluded(const tfc_optimizer_config *c, const char *path)
{
    if (c->exclude_embeddings)
        for (const char *p = path; *p; p++) {
            const char *w = "embedding", *q = p;
            while (*w && *q && tolower((unsigned char)*q) == *w) q++, w++;
            if (!*w) return 1;
        }
    for (int k = 0; k < c->nexclude; k++) {
        regex_t re;
        if (regcomp(&re, c->exclude[k], REG_EXTENDED | REG_NOSUB)) continue;
        int hit = regexec(&re, path, 0, NULL, 0) == 0;
        regfree(&re);
        if (hit) return 1;
    }
    return 0;
}

tfc_status tfc_optimizer_set_vars(tfc_optimizer *o, const tfc_optim_var *vars, int nvars,
                                  const char *const *paths, tfc_error *err)
{
    int64_t end = 0;
    for (int k = 0; k < nvars; k++) {
        const tfc_optim_var *v = &vars[k];
        int folded = v->rows > 0 && v->cols > 0 && v->numel % (v->rows * v->cols) == 0;
        if (v->offset != end || v->numel < 0 || !(folded || (v->rows == 0 && v->cols == 0)))
            return tfc_error_set(err, TFC_ERR_USAGE, "optimizer variable %d does not follow "
                                 "the one before it or has a wrong fold", k);
        end += v->numel;
    }
    if (end != o->n)
        return tfc_error_set(err, TFC_ERR_USAGE, "the optimizer's variables hold %lld floats, "
                             "not its %lld", (long long)end, (long long)o->n);
    if (nvars < 0) return tfc_error_set(err, TFC_ERR_USAGE, "a negative count of variables");
    tfc_optim_var *copy = nvars > 0 ? malloc((size_t)nvars * sizeof *copy) : NULL;
    if (nvars > 0 && !copy) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    if (nvars > 0) memcpy(copy, vars, (size_t)nvars * sizeof *copy);
    for (int k = 0; k < nvars; k++)
        if (copy[k].matrix && paths && paths[k] && muon_excluded(&o->cfg, paths[k]))
            copy[k].matrix = 0;
    free(o->vars);
    o->vars = copy;
    o->nvars = nvars;
    return TFC_OK;
}

/* Keras's Nadam momentum schedule u_t = beta_1 (1 - 0.5 0.96^t), in float32 */
static float nadam_u(float beta_1, int64_t t)
{
    return beta_1 * (1.0f - 0.5f * powf(0.96f, (float)t));
}

/* Nadam's u_product after update t (1 before the first), multiplied up in float32 as
 * Keras's _backend_update_step does: (U * beta_1) * (1 - 0.5 0.96^t). */
static float nadam_u_product(tfc_optimizer *o, int64_t t)
{
    const float b1 = (float)o->cfg.beta_1;
    if (o->u_iter > t) o->u_product = 1.0f, o->u_iter = 0;
    while (o->u_iter < t) {
        o->u_iter++;
        o->u_product = o->u_product * b1 * (1.0f - 0.5f * powf(0.96f, (float)o->u_iter));
    }
    return o->u_product;
}

/* The backend's description of the `iter`-th update (grad_scale as given). */
static tfc_optim_desc describe(tfc_optimizer *o, int64_t iter, double lr, double grad_scale,
                               double l2)
{
    const tfc_optimizer_config *c = &o->cfg;
    tfc_optim_desc d = {0};
    d.lr = (float)lr;
    d.grad_scale = (float)grad_scale;
    d.l2 = (float)l2;
    d.epsilon = (float)c->epsilon;
    d.type = (tfc_optimizer_type)c->type;
    d.clipvalue = (float)c->clipvalue;
    /* Keras applies the decay with the current learning rate: w -= w * wd * lr. */
    d.decay = (float)c->weight_decay * (float)lr;
    const float t = (float)(iter + 1);
    switch (d.type) {
    case TFC_OPTIMIZER_SGD:
        d.momentum = (float)c->momentum;
        d.nesterov = c->nesterov;
        break;
    case TFC_OPTIMIZER_ADAMW:
    case TFC_OPTIMIZER_ADAM: {
        d.beta_1 = (float)c->beta_1;
        d.beta_2 = (float)c->beta_2;
        d.amsgrad = c->amsgrad;
        /* alpha = lr sqrt(1 - beta_2^t) / (1 - beta_1^t), t = iter + 1, in float32 as
         * Keras computes it. */
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
    case TFC_OPTIMIZER_NADAM: {
        d.beta_1 = (float)c->beta_1;
        d.beta_2 = (float)c->beta_2;
        const float u = nadam_u(d.beta_1, iter + 1), u_next = nadam_u(d.beta_1, iter + 2);
        const float up = nadam_u_product(o, iter + 1);
        d.coef[0] = u_next;
        d.coef[1] = 1.0f - up * u_next;
        d.coef[2] = 1.0f - u;
        d.coef[3] = 1.0f - up;
        d.coef[4] = 1.0f - powf(d.beta_2, t);
        break;
    }
    case TFC_OPTIMIZER_ADAMAX:
        d.beta_1 = (float)c->beta_1;
        d.beta_2 = (float)c->beta_2;
        d.coef[0] = 1.0f - powf(d.beta_1, t);
        break;
    case TFC_OPTIMIZER_LION:
        d.beta_1 = (float)c->beta_1;
        d.beta_2 = (float)c->beta_2;
        break;
    case TFC_OPTIMIZER_ADADELTA: d.rho = (float)c->rho; break;
    case TFC_OPTIMIZER_FTRL:
        d.lr_power = (float)c->lr_power;
        d.l1 = (float)c->l1;
        d.l2_shrinkage = (float)(2 * c->l2_shrinkage);
        /* Keras: quadratic's 2 * (l2 + beta / (2 lr)), in float32 */
        d.coef[0] = 2.0f * ((float)c->l2 + (float)c->ftrl_beta / (2.0f * d.lr));
        break;
    case TFC_OPTIMIZER_SCHEDULE_FREE_ADAMW:
        d.beta_1 = (float)c->beta_1;
        d.beta_2 = (float)c->beta_2;
        /* Keras, in float32: lr min(t / warmup_steps, 1), 1 - beta_2^t, 1 / t */
        d.coef[0] = c->warmup_steps > 0 ? d.lr * fminf(t / (float)c->warmup_steps, 1.0f)
                                        : d.lr;
        d.coef[1] = 1.0f - powf(d.beta_2, t);
        d.coef[2] = 1.0f / t;
        d.coef[3] = iter == 0 ? 1.0f : 0.0f;
        break;
    case TFC_OPTIMIZER_LAMB:
        d.beta_1 = (float)c->beta_1;
        d.beta_2 = (float)c->beta_2;
        d.coef[0] = 1.0f - powf(d.beta_1, t);
        d.coef[1] = 1.0f - powf(d.beta_2, t);
        break;
    case TFC_OPTIMIZER_ADAFACTOR:
        /* Keras: rho_t = min(lr, 1 / sqrt(t)), beta_2_t = 1 - t^beta_2_decay, float32 */
        d.coef[0] = fminf(d.lr, 1.0f / sqrtf(t));
        d.coef[1] = 1.0f - powf(t, (float)c->beta_2_decay);
        d.epsilon_2 = (float)c->epsilon_2;
        d.clip_threshold = (float)c->clip_threshold;
        break;
    case TFC_OPTIMIZER_MUON: {
        d.momentum = (float)c->momentum;
        d.nesterov = c->nesterov;
        d.beta_1 = (float)c->beta_1;
        d.beta_2 = (float)c->beta_2;
        d.ns_a = (float)c->muon_a, d.ns_b = (float)c->muon_b, d.ns_c = (float)c->muon_c;
        d.ns_steps = c->ns_steps;
        d.rms_rate = (float)c->rms_rate;
        /* the AdamW variables: Adam's alpha at lr adam_lr_ratio, and their own decay */
        const float lr2 = d.lr * (float)c->adam_lr_ratio;
        d.coef[0] = lr2 * sqrtf(1.0f - powf(d.beta_2, t)) / (1.0f - powf(d.beta_1, t));
        d.coef[1] = (float)c->adam_weight_decay * d.lr;
        break;
    }
    case TFC_OPTIMIZER_COUNT: TFC_ASSERT(!"unknown optimizer type"); break;
    }
    d.vars = o->vars;
    d.nvars = o->nvars;
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

void tfc_optimizer_rates(tfc_optimizer *o, int64_t iter, double lr, float rates[3],
                         float coef[TFC_OPTIM_COEFS])
{
    tfc_optim_desc d = describe(o, iter, lr, 0, 0);
    rates[0] = d.lr, rates[1] = d.alpha, rates[2] = d.decay;
    memcpy(coef, d.coef, sizeof d.coef);
}
