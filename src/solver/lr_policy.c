/* Learning-rate policies: pure functions of the iteration. Caffe's formulas
 * (SGDSolver::GetLearningRate) for fixed, step, multistep, exp, inv and poly; Keras's
 * CosineDecay for cosine and Keras 3's other schedules (keras.optimizers.schedules) under
 * their own names and keys, the base rate as their initial_learning_rate; plateau's keys
 * (Keras's ReduceLROnPlateau, stepped in plateau.c); each with an optional linear warm-up.
 * One field table per policy, so a key that the chosen policy does not read is an error,
 * not silently ignored. */
#include "solver/optimizer.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

const char *const tfc_lr_policy_names[TFC_LR_COUNT + 1] = {
    [TFC_LR_FIXED] = "fixed",
    [TFC_LR_STEP] = "step",
    [TFC_LR_MULTISTEP] = "multistep",
    [TFC_LR_EXP] = "exp",
    [TFC_LR_INV] = "inv",
    [TFC_LR_POLY] = "poly",
    [TFC_LR_COSINE] = "cosine",
    [TFC_LR_PLATEAU] = "plateau",
    [TFC_LR_EXPONENTIAL_DECAY] = "exponential_decay",
    [TFC_LR_INVERSE_TIME_DECAY] = "inverse_time_decay",
    [TFC_LR_POLYNOMIAL_DECAY] = "polynomial_decay",
    [TFC_LR_PIECEWISE_CONSTANT_DECAY] = "piecewise_constant_decay",
    [TFC_LR_COSINE_DECAY_RESTARTS] = "cosine_decay_restarts",
    [TFC_LR_COUNT] = NULL};

/* Keras's class names of the schedules, as `type` may give them */
static const struct {
    const char *keras;
    tfc_lr_type type;
} keras_schedules[] = {
    {"ExponentialDecay", TFC_LR_EXPONENTIAL_DECAY},
    {"InverseTimeDecay", TFC_LR_INVERSE_TIME_DECAY},
    {"PolynomialDecay", TFC_LR_POLYNOMIAL_DECAY},
    {"PiecewiseConstantDecay", TFC_LR_PIECEWISE_CONSTANT_DECAY},
    {"CosineDecay", TFC_LR_COSINE},
    {"CosineDecayRestarts", TFC_LR_COSINE_DECAY_RESTARTS},
};

#define OFF(member) offsetof(tfc_lr_policy, member)
/* read by tfc_lr_policy_read (read_policy_type: a name, or Keras's class name) */
#define TYPE_FIELD                                                                           \
    {"type", TFC_F_NODE, OFF(type_node), "fixed", TFC_UNBOUNDED, NULL,                       \
     "the policy, or Keras's class name of the schedule"}
#define WARMUP_FIELD                                                                         \
    {"warmup_iters", TFC_F_INT, OFF(warmup_iters), "0", 0, 2147483647, NULL,                 \
     "linear warm-up: the rate is multiplied by min(1, (iter + 1) / warmup_iters)"}
#define GAMMA_FIELD(def)                                                                     \
    {"gamma", TFC_F_FLOAT, OFF(gamma), def, 0, 1e30, NULL, "multiplier of the decay"}

static const tfc_field fixed_fields[] = {TYPE_FIELD, WARMUP_FIELD, {NULL}};

static const tfc_field step_fields[] = {
    TYPE_FIELD,
    {"step_size", TFC_F_INT, OFF(step_size), NULL, 1, 2147483647, NULL,
     "lr = base_lr * gamma ^ floor(iter / step_size)"},
    GAMMA_FIELD("0.1"),
    WARMUP_FIELD,
    {NULL}};

static const tfc_field multistep_fields[] = {
    TYPE_FIELD,
    {"steps", TFC_F_INT_LIST, OFF(steps), NULL, 1, 2147483647, NULL,
     "increasing iterations; lr = base_lr * gamma ^ (number of steps reached)"},
    GAMMA_FIELD("0.1"),
    WARMUP_FIELD,
    {NULL}};

static const tfc_field exp_fields[] = {
    TYPE_FIELD,
    {"gamma", TFC_F_FLOAT, OFF(gamma), NULL, 0, 1e30, NULL, "lr = base_lr * gamma ^ iter"},
    WARMUP_FIELD,
    {NULL}};

static const tfc_field inv_fields[] = {
    TYPE_FIELD,
    {"gamma", TFC_F_FLOAT, OFF(gamma), NULL, 0, 1e30, NULL,
     "lr = base_lr * (1 + gamma * iter) ^ (-power)"},
    {"power", TFC_F_FLOAT, OFF(power), NULL, 0, 1e30, NULL, "exponent of the decay"},
    WARMUP_FIELD,
    {NULL}};

static const tfc_field poly_fields[] = {
    TYPE_FIELD,
    {"power", TFC_F_FLOAT, OFF(power), "1.0", 0, 1e30, NULL,
     "lr = base_lr * (1 - iter / max_iter) ^ power"},
    {"max_iter", TFC_F_INT, OFF(max_iter), "0", 0, 2147483647, NULL,
     "where the rate reaches 0; 0 = the solver's max_iter"},
    WARMUP_FIELD,
    {NULL}};


/* Keras's schedules: their arguments but initial_learning_rate, which is the base rate */
#define INITIAL_LR_FIELD                                                                     \
    TFC_FIXED_FIELD("initial_learning_rate", TFC_NO_DEFAULT,                                 \
                    "tfc's base rate is the optimizer's learning_rate (Keras's "             \
                    "initial_learning_rate)")
#define NAME_FIELD                                                                           \
    {"name", TFC_F_STRING, OFF(name), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,                   \
     "Keras's name of the schedule (unused)"}
#define DECAY_STEPS_FIELD(key, what)                                                         \
    {key, TFC_F_INT, OFF(decay_steps), NULL, 1, 2147483647, NULL, what}

/* Keras's CosineDecay, with its own warm-up (warmup_target, warmup_steps) */
static const tfc_field cosine_fields[] = {
    TYPE_FIELD,
    {"decay_steps", TFC_F_INT, OFF(max_iter), "0", 0, 2147483647, NULL,
     "iterations of the decay (then constant); 0 = the solver's max_iter"},
    {"alpha", TFC_F_FLOAT, OFF(alpha), "0.0", 0, 1, NULL,
     "the final rate as a fraction of the rate the decay starts from"},
    {"warmup_target", TFC_F_NODE, OFF(warmup_target_node), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "Keras's warm-up: the rate climbs linearly from base_lr to this rate over warmup_steps, "
     "then decays from it (null: no climb)"},
    {"warmup_steps", TFC_F_INT, OFF(warmup_steps), "0", 0, 2147483647, NULL,
     "iterations of warmup_target's climb"},
    INITIAL_LR_FIELD,
    NAME_FIELD,
    WARMUP_FIELD,
    {NULL}};

static const tfc_field exponential_fields[] = {
    TYPE_FIELD,
    DECAY_STEPS_FIELD("decay_steps", "lr = base_lr * decay_rate ^ (iter / decay_steps)"),
    {"decay_rate", TFC_F_FLOAT, OFF(decay_rate), NULL, 0, 1e30, NULL, "the rate's factor"},
    {"staircase", TFC_F_BOOL, OFF(staircase), "false", TFC_UNBOUNDED, NULL,
     "floor(iter / decay_steps): the rate falls in steps"},
    INITIAL_LR_FIELD,
    NAME_FIELD,
    WARMUP_FIELD,
    {NULL}};

static const tfc_field inverse_time_fields[] = {
    TYPE_FIELD,
    DECAY_STEPS_FIELD("decay_steps", "lr = base_lr / (1 + decay_rate * iter / decay_steps)"),
    {"decay_rate", TFC_F_FLOAT, OFF(decay_rate), NULL, 0, 1e30, NULL, "the decay's rate"},
    {"staircase", TFC_F_BOOL, OFF(staircase), "false", TFC_UNBOUNDED, NULL,
     "floor(iter / decay_steps): the rate falls in steps"},
    INITIAL_LR_FIELD,
    NAME_FIELD,
    WARMUP_FIELD,
    {NULL}};

static const tfc_field polynomial_fields[] = {
    TYPE_FIELD,
    DECAY_STEPS_FIELD("decay_steps", "iterations from base_lr to end_learning_rate"),
    {"end_learning_rate", TFC_F_FLOAT, OFF(end_lr), "0.0001", 0, 1e30, NULL,
     "the rate at decay_steps"},
    {"power", TFC_F_FLOAT, OFF(power), "1.0", 0, 1e30, NULL, "the polynomial's power"},
    {"cycle", TFC_F_BOOL, OFF(cycle), "false", TFC_UNBOUNDED, NULL,
     "restart past decay_steps, over the next multiple of it"},
    INITIAL_LR_FIELD,
    NAME_FIELD,
    WARMUP_FIELD,
    {NULL}};

static const tfc_field piecewise_fields[] = {
    TYPE_FIELD,
    {"boundaries", TFC_F_INT_LIST, OFF(boundaries), NULL, 0, 2147483647, NULL,
     "increasing iterations where the rate changes (after the iteration given)"},
    {"values", TFC_F_FLOAT_LIST, OFF(values), NULL, 0, 1e30, NULL,
     "the rates, one more than the boundaries (absolute: base_lr is not used)"},
    NAME_FIELD,
    WARMUP_FIELD,
    {NULL}};

static const tfc_field restarts_fields[] = {
    TYPE_FIELD,
    DECAY_STEPS_FIELD("first_decay_steps", "iterations of the first cosine period"),
    {"t_mul", TFC_F_FLOAT, OFF(t_mul), "2.0", 1e-30, 1e30, NULL,
     "each period is t_mul times the one before"},
    {"m_mul", TFC_F_FLOAT, OFF(m_mul), "1.0", 0, 1e30, NULL,
     "each period starts at m_mul times the rate the one before started at"},
    {"alpha", TFC_F_FLOAT, OFF(alpha), "0.0", 0, 1, NULL,
     "the rate's floor as a fraction of each period's start"},
    INITIAL_LR_FIELD,
    NAME_FIELD,
    WARMUP_FIELD,
    {NULL}};

#define PL(member) OFF(plateau.member)
static const tfc_field plateau_fields[] = {
    TYPE_FIELD,
    {"monitor", TFC_F_STRING, PL(monitor.name), "test/loss", TFC_UNBOUNDED, NULL,
     "the watched value: test/METRIC or train/METRIC (Keras ReduceLROnPlateau's monitor)"},
    {"mode", TFC_F_ENUM, PL(monitor.mode), "auto", TFC_UNBOUNDED, tfc_monitor_mode_names,
     "min, max, or auto: min for a loss, max for accuracies"},
    {"factor", TFC_F_FLOAT, PL(factor), "0.1", 0, 1, NULL,
     "lr = max(lr * factor, min_lr) after `patience` evaluations without improvement; < 1"},
    {"patience", TFC_F_INT, PL(patience), "10", 0, 2147483647, NULL,
     "test evaluations without improvement before the rate falls"},
    {"min_delta", TFC_F_FLOAT, PL(min_delta), "1e-4", 0, 1e30, NULL,
     "the margin an improvement needs (absolute, or relative with threshold_mode: rel)"},
    {"threshold_mode", TFC_F_ENUM, PL(threshold_mode), "abs", TFC_UNBOUNDED,
     tfc_threshold_mode_names, "abs (Keras): best -/+ min_delta; rel (PyTorch): best * (1 -/+ min_delta)"},
    {"cooldown", TFC_F_INT, PL(cooldown), "0", 0, 2147483647, NULL,
     "test evaluations after a reduction during which no patience is counted"},
    {"min_lr", TFC_F_FLOAT, PL(min_lr), "0.0", 0, 1e30, NULL, "the floor of the rate"},
    WARMUP_FIELD,
    {NULL}};

static const tfc_field *const policy_tables[TFC_LR_COUNT] = {
    [TFC_LR_FIXED] = fixed_fields,
    [TFC_LR_STEP] = step_fields,
    [TFC_LR_MULTISTEP] = multistep_fields,
    [TFC_LR_EXP] = exp_fields,
    [TFC_LR_INV] = inv_fields,
    [TFC_LR_POLY] = poly_fields,
    [TFC_LR_COSINE] = cosine_fields,
    [TFC_LR_PLATEAU] = plateau_fields,
    [TFC_LR_EXPONENTIAL_DECAY] = exponential_fields,
    [TFC_LR_INVERSE_TIME_DECAY] = inverse_time_fields,
    [TFC_LR_POLYNOMIAL_DECAY] = polynomial_fields,
    [TFC_LR_PIECEWISE_CONSTANT_DECAY] = piecewise_fields,
    [TFC_LR_COSINE_DECAY_RESTARTS] = restarts_fields};

const tfc_field *tfc_lr_policy_fields(tfc_lr_type type)
{
    return (unsigned)type < TFC_LR_COUNT ? policy_tables[type] : NULL;
}

/* A policy's name, or Keras's class name of the schedule it is */
static tfc_status read_policy_type(const tfc_node *t, const char *path, int *type,
                                   tfc_error *err)
{
    for (size_t k = 0; k < sizeof keras_schedules / sizeof *keras_schedules; k++)
        if (t->kind == TFC_NODE_SCALAR && !strcmp(t->str, keras_schedules[k].keras)) {
            *type = (int)keras_schedules[k].type;
            return TFC_OK;
        }
    const char *name;
    int len, args;
    const int python = t->kind == TFC_NODE_SCALAR && tfc_python_name(t->str, &name, &len, &args);
    for (size_t k = 0; python && k < sizeof keras_schedules / sizeof *keras_schedules; k++)
        if ((int)strlen(keras_schedules[k].keras) == len &&
            !strncmp(name, keras_schedules[k].keras, (size_t)len))
            return args ? tfc_node_error(err, TFC_ERR_CONFIG, t, path, "\"%s\" is a Python "
                                         "call: write {type: %s, ...}, the arguments by name "
                                         "as Keras names them (initial_learning_rate is the "
                                         "optimizer's learning_rate)", t->str,
                                         keras_schedules[k].keras)
                        : tfc_node_error(err, TFC_ERR_CONFIG, t, path, "\"%s\" is Python: "
                                         "write %s", t->str, keras_schedules[k].keras);
    return tfc_node_enum(t, path, tfc_lr_policy_names, type, err);
}

/* Increasing list items, or an error at the offending item */
static tfc_status check_increasing(const tfc_node *map, const char *key, const int *v, int n,
                                   const char *path, tfc_error *err)
{
    for (int i = 1; i < n; i++)
        if (v[i] <= v[i - 1]) {
            const tfc_node *list = tfc_node_get(map, key);
            char kpath[320];
            snprintf(kpath, sizeof kpath, "%s.%s", path, key);
            return tfc_node_error(err, TFC_ERR_CONFIG,
                                  list && list->kind == TFC_NODE_SEQ ? list->vals[i] : list,
                                  kpath, "%s must increase: %d follows %d", key, v[i], v[i - 1]);
        }
    return TFC_OK;
}

tfc_status tfc_lr_policy_read(const tfc_node *node, const char *path, tfc_lr_policy *out,
                              tfc_error *err)
{
    memset(out, 0, sizeof *out);
    if (tfc_node_is_null(node)) node = NULL;
    int type = TFC_LR_FIXED;
    if (node && node->kind == TFC_NODE_SEQ)
        return tfc_node_error(err, TFC_ERR_CONFIG, node, path,
                              "expected a mapping such as {type: step, step_size: 1000} or a "
                              "policy name, found a sequence");
    if (node && node->kind == TFC_NODE_SCALAR) {
        if (read_policy_type(node, path, &type, err)) return TFC_ERR_CONFIG;
    } else if (node) {
        const tfc_node *t = tfc_node_get(node, "type");
        char tpath[320];
        snprintf(tpath, sizeof tpath, "%s.type", path);
        if (t && !tfc_node_is_null(t) && read_policy_type(t, tpath, &type, err))
            return TFC_ERR_CONFIG;
    }
    const tfc_node *map = node && node->kind == TFC_NODE_MAP ? node : NULL;
    tfc_status s = tfc_schema_apply(policy_tables[type], map, path, out, err);
    out->type = type;
    if (s == TFC_OK && type == TFC_LR_MULTISTEP)
        s = check_increasing(map, "steps", out->steps.v, out->steps.n, path, err);
    if (s == TFC_OK && type == TFC_LR_PIECEWISE_CONSTANT_DECAY) {
        s = check_increasing(map, "boundaries", out->boundaries.v, out->boundaries.n, path,
                             err);
        if (!s && out->values.n != out->boundaries.n + 1) {
            char vpath[320];
            snprintf(vpath, sizeof vpath, "%s.values", path);
            return tfc_node_error(err, TFC_ERR_CONFIG, tfc_node_get(map, "values"), vpath,
                                  "expected %d values, one more than the %d boundaries; found "
                                  "%d", out->boundaries.n + 1, out->boundaries.n,
                                  out->values.n);
        }
    }
    if (s == TFC_OK && type == TFC_LR_COSINE && out->warmup_target_node &&
        tfc_node_is_null(out->warmup_target_node))
        out->warmup_target_node = NULL;
    if (s == TFC_OK && out->warmup_target_node) {
        char wpath[320];
        snprintf(wpath, sizeof wpath, "%s.warmup_target", path);
        s = tfc_node_double(out->warmup_target_node, wpath, &out->warmup_target, err);
        if (!s && !(out->warmup_target >= 0 && out->warmup_target < 1e30))
            return tfc_node_error(err, TFC_ERR_CONFIG, out->warmup_target_node, wpath,
                                  "expected a learning rate of 0 or more, found %g",
                                  out->warmup_target);
    }
    if (s == TFC_OK && type == TFC_LR_COSINE && out->warmup_steps > 0 &&
        !out->warmup_target_node) {
        char wpath[320];
        snprintf(wpath, sizeof wpath, "%s.warmup_steps", path);
        return tfc_node_error(err, TFC_ERR_CONFIG, tfc_node_get(map, "warmup_steps"), wpath,
                              "warmup_steps climbs to warmup_target, which is not given "
                              "(Keras ignores warmup_steps then): give warmup_target, or "
                              "warmup_iters for a climb from 0 to the base rate");
    }
    if (s == TFC_OK && type == TFC_LR_PLATEAU && out->plateau.factor >= 1.0) {
        char fpath[320];
        snprintf(fpath, sizeof fpath, "%s.factor", path);
        return tfc_node_error(err, TFC_ERR_CONFIG, tfc_node_get(map, "factor"), fpath,
                              "expected a factor below 1 (the rate must fall), found %g",
                              out->plateau.factor);
    }
    return s;
}

tfc_status tfc_lr_schedule_read(const tfc_node *node, const char *path, tfc_lr_policy *out,
                                double *base_lr, tfc_error *err)
{
    memset(out, 0, sizeof *out);
    const tfc_node *type = NULL, *args = NULL;
    const tfc_node *cls = tfc_node_get(node, "class_name");
    if (cls) { /* Keras's serialized form */
        type = cls;
        args = tfc_node_get(node, "config");
        for (int i = 0; i < node->n; i++) {
            const char *k = node->keys[i]->str;
            if (strcmp(k, "class_name") && strcmp(k, "config") && strcmp(k, "module") &&
                strcmp(k, "registered_name"))
                return tfc_node_error(err, TFC_ERR_CONFIG, node->keys[i], path,
                                      "unknown key '%s' in a serialized schedule (known keys: "
                                      "class_name, config, module, registered_name)", k);
        }
    } else if (node->n == 1) { /* {ExponentialDecay: {...}}, as a layer is written */
        type = node->keys[0];
        args = node->vals[0];
    } else {
        return tfc_node_error(err, TFC_ERR_CONFIG, node, path,
                              "expected a number or one Keras schedule such as "
                              "{ExponentialDecay: {initial_learning_rate: 0.1, decay_steps: "
                              "1000, decay_rate: 0.96}}, found a mapping of %d keys", node->n);
    }
    char tpath[320];
    snprintf(tpath, sizeof tpath, "%s.type", path);
    int t;
    if (type->kind != TFC_NODE_SCALAR || read_policy_type(type, tpath, &t, err)) {
        if (type->kind != TFC_NODE_SCALAR)
            tfc_node_error(err, TFC_ERR_CONFIG, type, tpath, "expected a schedule's name");
        return TFC_ERR_CONFIG;
    }
    if (t != TFC_LR_COSINE && t < TFC_LR_EXPONENTIAL_DECAY)
        return tfc_node_error(err, TFC_ERR_CONFIG, type, tpath,
                              "'%s' is not one of Keras's schedules (ExponentialDecay, "
                              "InverseTimeDecay, PolynomialDecay, PiecewiseConstantDecay, "
                              "CosineDecay, CosineDecayRestarts); tfc's own policies are "
                              "lr_policy's", type->str);
    if (args && !tfc_node_is_null(args) && args->kind != TFC_NODE_MAP)
        return tfc_node_error(err, TFC_ERR_CONFIG, args, path,
                              "expected the schedule's arguments as a mapping, found a %s",
                              tfc_node_kind_name(args->kind));
    /* the policy's mapping: type, and every argument but initial_learning_rate */
    tfc_node *map = tfc_node_new_map(node->doc, node);
    tfc_node_map_set(map, tfc_node_new_scalar(node->doc, type, "type", 0),
                     tfc_node_new_scalar(node->doc, type, tfc_lr_policy_names[t], 0));
    const tfc_node *initial = NULL;
    for (int i = 0; args && args->kind == TFC_NODE_MAP && i < args->n; i++) {
        if (!strcmp(args->keys[i]->str, "initial_learning_rate")) initial = args->vals[i];
        else tfc_node_map_set(map, args->keys[i], args->vals[i]);
    }
    tfc_status s = tfc_lr_policy_read(map, path, out, err);
    if (s) return s;
    char ipath[320];
    snprintf(ipath, sizeof ipath, "%s.initial_learning_rate", path);
    if (t == TFC_LR_PIECEWISE_CONSTANT_DECAY) { /* Keras's takes none: its values are rates */
        if (initial)
            return tfc_node_error(err, TFC_ERR_CONFIG, initial, ipath,
                                  "PiecewiseConstantDecay takes no initial_learning_rate: its "
                                  "values are the rates");
        *base_lr = out->values.v[0];
        return TFC_OK;
    }
    if (!initial)
        return tfc_node_error(err, TFC_ERR_CONFIG, args ? args : type, ipath,
                              "missing required key 'initial_learning_rate'");
    if (tfc_node_double(initial, ipath, base_lr, err)) return TFC_ERR_CONFIG;
    if (!(*base_lr >= 0 && *base_lr <= 1e30))
        return tfc_node_error(err, TFC_ERR_CONFIG, initial, ipath,
                              "expected a number in [0, 1e+30], found \"%s\"", initial->str);
    return TFC_OK;
}

double tfc_lr_at(const tfc_lr_policy *p, double base_lr, int64_t iter, int64_t max_iter)
{
    double it = (double)iter, lr = base_lr;
    switch ((tfc_lr_type)p->type) {
    case TFC_LR_FIXED:
    case TFC_LR_PLATEAU: break;
    case TFC_LR_STEP: lr = base_lr * pow(p->gamma, floor(it / p->step_size)); break;
    case TFC_LR_MULTISTEP: {
        int reached = 0;
        while (reached < p->steps.n && iter >= p->steps.v[reached]) reached++;
        lr = base_lr * pow(p->gamma, reached);
        break;
    }
    case TFC_LR_EXP: lr = base_lr * pow(p->gamma, it); break;
    case TFC_LR_INV: lr = base_lr * pow(1.0 + p->gamma * it, -p->power); break;
    case TFC_LR_POLY: {
        double horizon = (double)(p->max_iter > 0 ? p->max_iter : max_iter);
        double frac = horizon > 0 ? fmin(it / horizon, 1.0) : 1.0;
        lr = base_lr * pow(1.0 - frac, p->power);
        break;
    }
    case TFC_LR_COSINE: {
        /* Keras CosineDecay: decayed = (1 - alpha) * 0.5 (1 + cos(pi t / T)) + alpha; with
         * warmup_target first its climb from base_lr over warmup_steps (W), then the decay
         * from warmup_target at t = iter - W */
        double horizon = (double)(p->max_iter > 0 ? p->max_iter : max_iter), t = it;
        double from = base_lr;
        if (p->warmup_target_node) {
            const double w = p->warmup_steps;
            t = fmin(it, horizon + w);
            if (t < w) {
                lr = base_lr + (p->warmup_target - base_lr) * (t / w);
                break;
            }
            t -= w;
            from = p->warmup_target;
        }
        double frac = horizon > 0 ? fmin(t / horizon, 1.0) : 1.0;
        double cosine = 0.5 * (1.0 + cos(3.14159265358979323846 * frac));
        lr = from * ((1.0 - p->alpha) * cosine + p->alpha);
        break;
    }
    case TFC_LR_EXPONENTIAL_DECAY:
    case TFC_LR_INVERSE_TIME_DECAY: { /* Keras's, p = iter / decay_steps (floored) */
        double f = it / p->decay_steps;
        if (p->staircase) f = floor(f);
        lr = p->type == TFC_LR_EXPONENTIAL_DECAY ? base_lr * pow(p->decay_rate, f)
                                                 : base_lr / (1.0 + p->decay_rate * f);
        break;
    }
    case TFC_LR_POLYNOMIAL_DECAY: {
        /* Keras's: with cycle the horizon is the first multiple of decay_steps at or past
         * iter (decay_steps at 0); without, iter stops at decay_steps */
        double horizon = p->decay_steps, step = it;
        if (p->cycle) horizon *= iter == 0 ? 1.0 : ceil(it / p->decay_steps);
        else step = fmin(it, horizon);
        lr = (base_lr - p->end_lr) * pow(1.0 - step / horizon, p->power) + p->end_lr;
        break;
    }
    case TFC_LR_PIECEWISE_CONSTANT_DECAY: { /* values[k] while boundaries[k - 1] < iter */
        int k = 0;
        while (k < p->boundaries.n && iter > p->boundaries.v[k]) k++;
        lr = p->values.v[k];
        break;
    }
    case TFC_LR_COSINE_DECAY_RESTARTS: {
        /* Keras's SGDR: period i of decay_steps t_mul^i starts at m_mul^i base_lr */
        double frac = it / p->decay_steps, i;
        if (p->t_mul == 1.0) {
            i = floor(frac);
            frac -= i;
        } else {
            i = floor(log(1.0 - frac * (1.0 - p->t_mul)) / log(p->t_mul));
            double done = (1.0 - pow(p->t_mul, i)) / (1.0 - p->t_mul);
            frac = (frac - done) / pow(p->t_mul, i);
        }
        double cosine = 0.5 * pow(p->m_mul, i) * (1.0 + cos(3.14159265358979323846 * frac));
        lr = base_lr * ((1.0 - p->alpha) * cosine + p->alpha);
        break;
    }
    case TFC_LR_COUNT: break;
    }
    if (p->warmup_iters > 0 && iter + 1 < p->warmup_iters)
        lr *= (double)(iter + 1) / (double)p->warmup_iters;
    return lr;
}
