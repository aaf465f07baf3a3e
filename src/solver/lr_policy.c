/* Learning-rate policies: pure functions of the iteration. Caffe's formulas
 * (SGDSolver::GetLearningRate) for fixed, step, multistep, exp, inv and poly; Keras's
 * CosineDecay for cosine; plateau's keys (Keras's ReduceLROnPlateau, stepped in plateau.c);
 * each with an optional linear warm-up. One field table per policy, so a key that the
 * chosen policy does not read is an error, not silently ignored. */
#include "solver/optimizer.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

const char *const tfc_lr_policy_names[TFC_LR_COUNT + 1] = {
    "fixed", "step", "multistep", "exp", "inv", "poly", "cosine", "plateau", NULL};

#define OFF(member) offsetof(tfc_lr_policy, member)
#define TYPE_FIELD                                                                           \
    {"type", TFC_F_ENUM, OFF(type), "fixed", TFC_UNBOUNDED, tfc_lr_policy_names,             \
     "the policy"}
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

static const tfc_field cosine_fields[] = {
    TYPE_FIELD,
    {"decay_steps", TFC_F_INT, OFF(max_iter), "0", 0, 2147483647, NULL,
     "iterations of the decay (then constant); 0 = the solver's max_iter"},
    {"alpha", TFC_F_FLOAT, OFF(alpha), "0.0", 0, 1, NULL,
     "the final rate as a fraction of base_lr"},
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
    fixed_fields, step_fields, multistep_fields, exp_fields,
    inv_fields,   poly_fields, cosine_fields,    plateau_fields};

const tfc_field *tfc_lr_policy_fields(tfc_lr_type type)
{
    return (unsigned)type < TFC_LR_COUNT ? policy_tables[type] : NULL;
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
        if (tfc_node_enum(node, path, tfc_lr_policy_names, &type, err)) return TFC_ERR_CONFIG;
    } else if (node) {
        const tfc_node *t = tfc_node_get(node, "type");
        char tpath[320];
        snprintf(tpath, sizeof tpath, "%s.type", path);
        if (t && !tfc_node_is_null(t) &&
            tfc_node_enum(t, tpath, tfc_lr_policy_names, &type, err))
            return TFC_ERR_CONFIG;
    }
    const tfc_node *map = node && node->kind == TFC_NODE_MAP ? node : NULL;
    tfc_status s = tfc_schema_apply(policy_tables[type], map, path, out, err);
    out->type = type;
    if (s == TFC_OK && type == TFC_LR_MULTISTEP)
        for (int i = 1; i < out->steps.n; i++)
            if (out->steps.v[i] <= out->steps.v[i - 1]) {
                const tfc_node *steps = tfc_node_get(map, "steps");
                char spath[320];
                snprintf(spath, sizeof spath, "%s.steps", path);
                return tfc_node_error(err, TFC_ERR_CONFIG,
                                      steps && steps->kind == TFC_NODE_SEQ ? steps->vals[i] : steps,
                                      spath, "steps must increase: %d follows %d",
                                      out->steps.v[i], out->steps.v[i - 1]);
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
        /* Keras CosineDecay: decayed = (1 - alpha) * 0.5 (1 + cos(pi t / T)) + alpha. */
        double horizon = (double)(p->max_iter > 0 ? p->max_iter : max_iter);
        double frac = horizon > 0 ? fmin(it / horizon, 1.0) : 1.0;
        double cosine = 0.5 * (1.0 + cos(3.14159265358979323846 * frac));
        lr = base_lr * ((1.0 - p->alpha) * cosine + p->alpha);
        break;
    }
    case TFC_LR_COUNT: break;
    }
    if (p->warmup_iters > 0 && iter + 1 < p->warmup_iters)
        lr *= (double)(iter + 1) / (double)p->warmup_iters;
    return lr;
}
