/* Keras initializers over Philox streams; see init.h for the formulas. */
#include "core/init.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/schema.h"

const char *const tfc_init_names[TFC_INIT_COUNT + 1] = {
    [TFC_INIT_ZEROS] = "zeros",
    [TFC_INIT_ONES] = "ones",
    [TFC_INIT_CONSTANT] = "constant",
    [TFC_INIT_GLOROT_UNIFORM] = "glorot_uniform",
    [TFC_INIT_GLOROT_NORMAL] = "glorot_normal",
    [TFC_INIT_HE_UNIFORM] = "he_uniform",
    [TFC_INIT_HE_NORMAL] = "he_normal",
    [TFC_INIT_LECUN_UNIFORM] = "lecun_uniform",
    [TFC_INIT_LECUN_NORMAL] = "lecun_normal",
    [TFC_INIT_ORTHOGONAL] = "orthogonal",
    [TFC_INIT_RANDOM_UNIFORM] = "random_uniform",
    [TFC_INIT_RANDOM_NORMAL] = "random_normal",
    [TFC_INIT_TRUNCATED_NORMAL] = "truncated_normal",
    [TFC_INIT_LSTM_BIAS] = "lstm_bias",
    [TFC_INIT_VARIANCE_SCALING] = "variance_scaling",
    [TFC_INIT_COUNT] = NULL,
};

static const char *const mode_names[] = {"fan_in", "fan_out", "fan_avg", NULL};
static const char *const dist_names[] = {"truncated_normal", "untruncated_normal", "uniform",
                                         NULL};

tfc_init tfc_init_make(tfc_init_kind kind)
{
    tfc_init in = {.kind = kind};
    switch (kind) {
    case TFC_INIT_ORTHOGONAL:
    case TFC_INIT_VARIANCE_SCALING: in.a = 1.0; break;
    case TFC_INIT_RANDOM_UNIFORM: in.a = -0.05; in.b = 0.05; break;
    case TFC_INIT_RANDOM_NORMAL:
    case TFC_INIT_TRUNCATED_NORMAL: in.a = 0.0; in.b = 0.05; break;
    default: break;
    }
    return in;
}

typedef struct init_args {
    int type, mode, distribution;
    double value, minval, maxval, mean, stddev, gain, scale;
    const tfc_node *type_node; /* read by init_name: tfc's names or Keras's class names */
    const tfc_node *seed;      /* Keras's seed: an integer or null */
} init_args;

/* Each type's arguments, Keras's names and defaults (keras.initializers): another type's is
 * an unknown key. Without Keras's seed a weight's stream is (the solver's seed, the layer,
 * the variable), the same on every device; with one, the seed alone (tfc_init_key). */
#define IOFF(m) offsetof(init_args, m)
#define TYPE_FIELD                                                                           \
    {"type", TFC_F_NODE, IOFF(type_node), NULL, TFC_UNBOUNDED, NULL,                          \
     "initializer name (tfc's, or Keras's class name: HeNormal)"}
#define SEED_FIELD                                                                           \
    {"seed", TFC_F_NODE, IOFF(seed), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,                     \
     "an integer: the weight drawn from it alone (null: from the solver's seed, the layer "   \
     "and the variable)"}
#define AXES_FIELDS                                                                          \
    TFC_FIXED_FIELD("input_axes", TFC_NO_DEFAULT, "tfc's fans are Keras's defaults: the "     \
                    "last axis is fan_out, the one before fan_in"),                          \
        TFC_FIXED_FIELD("output_axes", TFC_NO_DEFAULT, "tfc's fans are Keras's defaults: "   \
                        "the last axis is fan_out, the one before fan_in")
static const tfc_field plain_fields[] = {TYPE_FIELD, {NULL}};
static const tfc_field constant_fields[] = {
    TYPE_FIELD,
    {"value", TFC_F_FLOAT, IOFF(value), "0", TFC_UNBOUNDED, NULL, "every weight's value"},
    {NULL}};
static const tfc_field scaling_fields[] = {TYPE_FIELD, SEED_FIELD, AXES_FIELDS, {NULL}};
static const tfc_field orthogonal_fields[] = {
    TYPE_FIELD,
    {"gain", TFC_F_FLOAT, IOFF(gain), "1", TFC_UNBOUNDED, NULL, "multiplies the matrix"},
    SEED_FIELD,
    {NULL}};
static const tfc_field uniform_fields[] = {
    TYPE_FIELD,
    {"minval", TFC_F_FLOAT, IOFF(minval), "-0.05", TFC_UNBOUNDED, NULL, "lower bound"},
    {"maxval", TFC_F_FLOAT, IOFF(maxval), "0.05", TFC_UNBOUNDED, NULL, "upper bound"},
    SEED_FIELD,
    {NULL}};
static const tfc_field normal_fields[] = {
    TYPE_FIELD,
    {"mean", TFC_F_FLOAT, IOFF(mean), "0", TFC_UNBOUNDED, NULL, "mean"},
    {"stddev", TFC_F_FLOAT, IOFF(stddev), "0.05", 0, 1e300, NULL, "standard deviation"},
    SEED_FIELD,
    {NULL}};
static const tfc_field variance_fields[] = {
    TYPE_FIELD,
    {"scale", TFC_F_FLOAT, IOFF(scale), "1", 1e-300, 1e300, NULL, "the variance's numerator"},
    {"mode", TFC_F_ENUM, IOFF(mode), "fan_in", TFC_UNBOUNDED, mode_names,
     "the fans it divides by"},
    {"distribution", TFC_F_ENUM, IOFF(distribution), "truncated_normal", TFC_UNBOUNDED,
     dist_names, "what the values are drawn from"},
    SEED_FIELD,
    AXES_FIELDS,
    {NULL}};

const tfc_field *tfc_init_fields(tfc_init_kind kind)
{
    switch (kind) {
    case TFC_INIT_CONSTANT: return constant_fields;
    case TFC_INIT_GLOROT_UNIFORM:
    case TFC_INIT_GLOROT_NORMAL:
    case TFC_INIT_HE_UNIFORM:
    case TFC_INIT_HE_NORMAL:
    case TFC_INIT_LECUN_UNIFORM:
    case TFC_INIT_LECUN_NORMAL: return scaling_fields;
    case TFC_INIT_ORTHOGONAL: return orthogonal_fields;
    case TFC_INIT_RANDOM_UNIFORM: return uniform_fields;
    case TFC_INIT_RANDOM_NORMAL:
    case TFC_INIT_TRUNCATED_NORMAL: return normal_fields;
    case TFC_INIT_VARIANCE_SCALING: return variance_fields;
    default: return plain_fields;
    }
}

static tfc_status init_from_args(const init_args *a0, const tfc_node *node, const char *path,
                                 tfc_init *out, tfc_error *err);

/* Keras's class names of the initializers (serialize()'s class_name, and a name Keras's
 * get() takes), in tfc_init_names' order; NULL: none (lstm_bias is tfc's) */
static const char *const init_classes[TFC_INIT_COUNT] = {
    [TFC_INIT_ZEROS] = "Zeros",
    [TFC_INIT_ONES] = "Ones",
    [TFC_INIT_CONSTANT] = "Constant",
    [TFC_INIT_GLOROT_UNIFORM] = "GlorotUniform",
    [TFC_INIT_GLOROT_NORMAL] = "GlorotNormal",
    [TFC_INIT_HE_UNIFORM] = "HeUniform",
    [TFC_INIT_HE_NORMAL] = "HeNormal",
    [TFC_INIT_LECUN_UNIFORM] = "LecunUniform",
    [TFC_INIT_LECUN_NORMAL] = "LecunNormal",
    [TFC_INIT_ORTHOGONAL] = "Orthogonal",
    [TFC_INIT_RANDOM_UNIFORM] = "RandomUniform",
    [TFC_INIT_RANDOM_NORMAL] = "RandomNormal",
    [TFC_INIT_TRUNCATED_NORMAL] = "TruncatedNormal",
    [TFC_INIT_VARIANCE_SCALING] = "VarianceScaling",
};

/* An initializer's name: tfc's (Keras's snake case, with its second names) or Keras's class
 * name (HeNormal; OrthogonalInitializer too, Keras 3's class). */
static tfc_status init_name(const tfc_node *n, const char *path, int *kind, tfc_error *err)
{
    for (int k = 0; n->kind == TFC_NODE_SCALAR && k < TFC_INIT_COUNT; k++)
        if (init_classes[k] && !strcmp(n->str, init_classes[k])) {
            *kind = k;
            return TFC_OK;
        }
    if (n->kind == TFC_NODE_SCALAR && !strcmp(n->str, "OrthogonalInitializer")) {
        *kind = TFC_INIT_ORTHOGONAL;
        return TFC_OK;
    }
    return tfc_node_enum(n, path, tfc_init_names, kind, err);
}

const tfc_field tfc_keras_form_fields[] = {
    {"class_name", TFC_F_NODE, offsetof(tfc_keras_form, class_name), NULL, TFC_UNBOUNDED, NULL,
     "Keras's class: HeNormal, L2, Huber, ..."},
    {"config", TFC_F_NODE, offsetof(tfc_keras_form, config), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "the class's arguments"},
    {"module", TFC_F_NODE, offsetof(tfc_keras_form, module), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "keras.initializers, keras.regularizers, keras.losses (not read)"},
    {"registered_name", TFC_F_NODE, offsetof(tfc_keras_form, registered_name), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "(not read)"},
    {NULL}};

tfc_status tfc_init_parse(const tfc_node *node, const char *path, tfc_init def, tfc_init *out,
                          tfc_error *err)
{
    *out = def;
    if (tfc_node_is_null(node)) return TFC_OK;
    int kind;
    if (node->kind == TFC_NODE_SCALAR) {
        tfc_status s = init_name(node, path, &kind, err);
        if (s) return s;
        *out = tfc_init_make((tfc_init_kind)kind);
        return TFC_OK;
    }
    char kpath[320];
    if (node->kind == TFC_NODE_MAP && tfc_node_get(node, "class_name")) {
        /* Keras's serialized form: {module, class_name, config: {...}, registered_name} */
        tfc_keras_form f;
        if (tfc_schema_apply(tfc_keras_form_fields, node, path, &f, err)) return TFC_ERR_CONFIG;
        snprintf(kpath, sizeof kpath, "%s.class_name", path);
        if (init_name(f.class_name, kpath, &kind, err)) return TFC_ERR_CONFIG;
        snprintf(kpath, sizeof kpath, "%s.config", path);
        init_args a = {0};
        /* the type's arguments but `type` (the first field) */
        if (tfc_schema_apply(tfc_init_fields((tfc_init_kind)kind) + 1, f.config, kpath, &a, err))
            return TFC_ERR_CONFIG;
        a.type = kind;
        return init_from_args(&a, node, path, out, err);
    }
    /* the type first (a mapping without one is the schema's "missing required key"), then
     * that type's arguments */
    const tfc_node *t = node->kind == TFC_NODE_MAP ? tfc_node_get(node, "type") : NULL;
    char tpath[320];
    snprintf(tpath, sizeof tpath, "%s.type", path);
    kind = TFC_INIT_ZEROS;
    if (t && !tfc_node_is_null(t) && init_name(t, tpath, &kind, err)) return TFC_ERR_CONFIG;
    init_args a = {0};
    tfc_status s = tfc_schema_apply(tfc_init_fields((tfc_init_kind)kind), node, path, &a, err);
    if (s) return s;
    a.type = kind; /* as init_name read it (a class name too) */
    return init_from_args(&a, node, path, out, err);
}

/* The initializer of a's type and arguments; errors at `node` name `path`. */
static tfc_status init_from_args(const init_args *a0, const tfc_node *node, const char *path,
                                 tfc_init *out, tfc_error *err)
{
    init_args a = *a0;
    *out = tfc_init_make((tfc_init_kind)a.type);
    if (a.seed && !tfc_node_is_null(a.seed)) {
        char spath[340];
        long long v;
        snprintf(spath, sizeof spath, "%s.seed", path);
        if (tfc_node_int(a.seed, spath, -INT64_MAX, INT64_MAX, &v, err)) return TFC_ERR_CONFIG;
        out->seeded = 1;
        out->seed = v;
    }
    switch (out->kind) {
    case TFC_INIT_CONSTANT: out->a = a.value; break;
    case TFC_INIT_RANDOM_UNIFORM:
        if (a.minval > a.maxval)
            return tfc_node_error(err, TFC_ERR_CONFIG, node, path, "minval %g exceeds maxval %g",
                                  a.minval, a.maxval);
        out->a = a.minval;
        out->b = a.maxval;
        break;
    case TFC_INIT_RANDOM_NORMAL:
    case TFC_INIT_TRUNCATED_NORMAL: out->a = a.mean; out->b = a.stddev; break;
    case TFC_INIT_ORTHOGONAL: out->a = a.gain; break;
    case TFC_INIT_VARIANCE_SCALING:
        out->a = a.scale;
        out->mode = a.mode;
        out->distribution = a.distribution;
        break;
    default: break;
    }
    return TFC_OK;
}

/* ---- regularizers ----------------------------------------------------------------------- */

static const char *const reg_names[] = {"l1", "l2", "l1l2", NULL};
enum { REG_L1, REG_L2, REG_L1L2 };

typedef struct reg_args {
    const tfc_node *type; /* read by reg_name */
    double l1, l2;
} reg_args;

#define REG_TYPE_FIELD                                                                     \
    {"type", TFC_F_NODE, offsetof(reg_args, type), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,    \
     "l1, l2 or l1l2 (Keras's L1, L2, L1L2)"}

/* Each type's arguments, Keras's defaults: L1(l1=0.01), L2(l2=0.01), L1L2(l1=0, l2=0); in
 * Keras's serialized config, the same without the type. */
static const tfc_field reg_fields[3][4] = {
    {REG_TYPE_FIELD,
     {"l1", TFC_F_FLOAT, offsetof(reg_args, l1), "0.01", 0, HUGE_VAL, NULL, "the L1 factor"},
     {NULL}},
    {REG_TYPE_FIELD,
     {"l2", TFC_F_FLOAT, offsetof(reg_args, l2), "0.01", 0, HUGE_VAL, NULL, "the L2 factor"},
     {NULL}},
    {REG_TYPE_FIELD,
     {"l1", TFC_F_FLOAT, offsetof(reg_args, l1), "0.0", 0, HUGE_VAL, NULL, "the L1 factor"},
     {"l2", TFC_F_FLOAT, offsetof(reg_args, l2), "0.0", 0, HUGE_VAL, NULL, "the L2 factor"},
     {NULL}}};

/* A regularizer's name, Keras's class name (L2) or its snake case (l2), as reg_names' index */
static tfc_status reg_name(const tfc_node *n, const char *path, int *type, tfc_error *err)
{
    static const char *const classes[] = {"L1", "L2", "L1L2", NULL};
    for (int i = 0; n->kind == TFC_NODE_SCALAR && classes[i]; i++)
        if (!strcmp(n->str, classes[i])) {
            *type = i;
            return TFC_OK;
        }
    tfc_status s = tfc_node_enum(n, path, reg_names, type, err);
    if (s && n->kind == TFC_NODE_SCALAR && !strcmp(n->str, "orthogonal_regularizer"))
        tfc_error_hint(err, "tfc has no orthogonal regularizer");
    return s;
}

tfc_status tfc_regularizer_parse(const tfc_node *node, const char *path, tfc_regularizer *out,
                                 tfc_error *err)
{
    out->l1 = out->l2 = 0;
    if (tfc_node_is_null(node)) return TFC_OK;
    int type = REG_L2;
    if (node->kind == TFC_NODE_SCALAR) {
        if (reg_name(node, path, &type, err)) return TFC_ERR_CONFIG;
        out->l1 = type == REG_L1 ? 0.01 : 0;
        out->l2 = type == REG_L2 ? 0.01 : 0;
        return TFC_OK;
    }
    if (node->kind != TFC_NODE_MAP)
        return tfc_node_error(err, TFC_ERR_CONFIG, node, path,
                              "expected a regularizer: l1, l2, l1l2 or a mapping {type: l2, "
                              "l2: 0.0001}");
    reg_args a;
    char kpath[320];
    const tfc_node *args = node;
    const tfc_field *fields;
    if (tfc_node_get(node, "class_name")) { /* Keras's serialized form */
        tfc_keras_form f;
        if (tfc_schema_apply(tfc_keras_form_fields, node, path, &f, err)) return TFC_ERR_CONFIG;
        snprintf(kpath, sizeof kpath, "%s.class_name", path);
        if (reg_name(f.class_name, kpath, &type, err)) return TFC_ERR_CONFIG;
        args = f.config;
        snprintf(kpath, sizeof kpath, "%s.config", path);
        path = kpath;
        fields = reg_fields[type] + 1; /* no type in a config */
    } else {
        const tfc_node *t = tfc_node_get(node, "type");
        snprintf(kpath, sizeof kpath, "%s.type", path);
        if (!tfc_node_is_null(t) && reg_name(t, kpath, &type, err)) return TFC_ERR_CONFIG;
        fields = reg_fields[type];
    }
    if (tfc_schema_apply(fields, args, path, &a, err)) return TFC_ERR_CONFIG;
    out->l1 = type == REG_L2 ? 0 : a.l1;
    out->l2 = type == REG_L1 ? 0 : a.l2;
    return TFC_OK;
}

/* ---- constraints ------------------------------------------------------------------------ */

typedef struct con_args {
    const tfc_node *type; /* read by con_name */
    double min_value, max_value, rate;
    tfc_int_list axis;
} con_args;

#define CON_TYPE_FIELD                                                                     \
    {"type", TFC_F_NODE, offsetof(con_args, type), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,    \
     "max_norm, non_neg, unit_norm or min_max_norm (Keras's MaxNorm, ...)"}
#define CON_AXIS_FIELD                                                                     \
    {"axis", TFC_F_INT_LIST, offsetof(con_args, axis), "0", TFC_UNBOUNDED, NULL,           \
     "the axes each norm is taken over: a leading or a trailing run of the weight's"}

/* Each type's arguments, Keras's defaults, in tfc_constraint_kind's order (from MAX_NORM);
 * in Keras's serialized config, the same without the type. */
static const tfc_field con_fields[4][6] = {
    {CON_TYPE_FIELD,
     {"max_value", TFC_F_FLOAT, offsetof(con_args, max_value), "2", 0, HUGE_VAL, NULL,
      "the largest norm"},
     CON_AXIS_FIELD,
     {NULL}},
    {CON_TYPE_FIELD, {NULL}},
    {CON_TYPE_FIELD, CON_AXIS_FIELD, {NULL}},
    {CON_TYPE_FIELD,
     {"min_value", TFC_F_FLOAT, offsetof(con_args, min_value), "0.0", 0, HUGE_VAL, NULL,
      "the smallest norm"},
     {"max_value", TFC_F_FLOAT, offsetof(con_args, max_value), "1.0", 0, HUGE_VAL, NULL,
      "the largest norm"},
     {"rate", TFC_F_FLOAT, offsetof(con_args, rate), "1.0", 0, 1, NULL,
      "how far toward [min_value, max_value] each update moves the norm"},
     CON_AXIS_FIELD,
     {NULL}}};

/* A constraint's name, Keras's class name (MaxNorm) or its snake case (max_norm), as a
 * tfc_constraint_kind */
static tfc_status con_name(const tfc_node *n, const char *path, int *kind, tfc_error *err)
{
    static const char *const classes[] = {"MaxNorm", "NonNeg", "UnitNorm", "MinMaxNorm", NULL};
    static const char *const names[] = {"max_norm", "non_neg", "unit_norm", "min_max_norm",
                                        NULL};
    for (int i = 0; n->kind == TFC_NODE_SCALAR && classes[i]; i++)
        if (!strcmp(n->str, classes[i])) {
            *kind = TFC_CONSTRAINT_MAX_NORM + i;
            return TFC_OK;
        }
    int i = 0;
    tfc_status s = tfc_node_enum(n, path, names, &i, err);
    *kind = TFC_CONSTRAINT_MAX_NORM + i;
    return s;
}

tfc_status tfc_constraint_parse(const tfc_node *node, const char *path, tfc_constraint *out,
                                tfc_error *err)
{
    memset(out, 0, sizeof *out);
    if (tfc_node_is_null(node)) return TFC_OK;
    int kind = TFC_CONSTRAINT_MAX_NORM;
    char kpath[320];
    const tfc_node *args = NULL;
    const tfc_field *fields;
    if (node->kind == TFC_NODE_SCALAR) {
        if (con_name(node, path, &kind, err)) return TFC_ERR_CONFIG;
        fields = con_fields[kind - TFC_CONSTRAINT_MAX_NORM];
    } else if (node->kind != TFC_NODE_MAP) {
        return tfc_node_error(err, TFC_ERR_CONFIG, node, path,
                              "expected a constraint: max_norm, non_neg, unit_norm, "
                              "min_max_norm or a mapping {type: max_norm, max_value: 2, "
                              "axis: 0}");
    } else if (tfc_node_get(node, "class_name")) { /* Keras's serialized form */
        tfc_keras_form f;
        if (tfc_schema_apply(tfc_keras_form_fields, node, path, &f, err)) return TFC_ERR_CONFIG;
        snprintf(kpath, sizeof kpath, "%s.class_name", path);
        if (con_name(f.class_name, kpath, &kind, err)) return TFC_ERR_CONFIG;
        args = f.config;
        snprintf(kpath, sizeof kpath, "%s.config", path);
        path = kpath;
        fields = con_fields[kind - TFC_CONSTRAINT_MAX_NORM] + 1; /* no type in a config */
    } else {
        const tfc_node *t = tfc_node_get(node, "type");
        snprintf(kpath, sizeof kpath, "%s.type", path);
        if (!t)
            return tfc_node_error(err, TFC_ERR_CONFIG, node, path,
                                  "missing required key 'type' (max_norm, non_neg, unit_norm "
                                  "or min_max_norm)");
        if (con_name(t, kpath, &kind, err)) return TFC_ERR_CONFIG;
        args = node;
        fields = con_fields[kind - TFC_CONSTRAINT_MAX_NORM];
    }
    con_args a;
    if (tfc_schema_apply(fields, args, path, &a, err)) return TFC_ERR_CONFIG;
    if (kind == TFC_CONSTRAINT_MIN_MAX_NORM && a.min_value > a.max_value)
        return tfc_node_error(err, TFC_ERR_CONFIG, args ? args : node, path,
                              "min_value %g exceeds max_value %g", a.min_value, a.max_value);
    out->kind = (tfc_constraint_kind)kind;
    out->min_value = a.min_value;
    out->max_value = a.max_value;
    out->rate = a.rate;
    out->axis = a.axis;
    /* axis: null (Keras's None) is every axis: one norm of the whole weight */
    const tfc_node *ax = args && kind != TFC_CONSTRAINT_NON_NEG ? tfc_node_get(args, "axis")
                                                                 : NULL;
    if (ax && tfc_node_is_null(ax)) out->axis.n = -1;
    return TFC_OK;
}

int tfc_constraint_layout(const tfc_constraint *c, const tfc_shape *shape,
                          tfc_constraint_desc *out)
{
    memset(out, 0, sizeof *out);
    out->kind = c->kind;
    out->min_value = (float)c->min_value;
    out->max_value = (float)c->max_value;
    out->rate = (float)c->rate;
    const int nd = shape->ndim;
    out->outer = 1, out->red = tfc_shape_numel(shape), out->inner = 1;
    if (c->kind == TFC_CONSTRAINT_NON_NEG || c->kind == TFC_CONSTRAINT_NONE) return 0;
    /* the named axes as a mask; then a leading run 0..k-1 or a trailing run k..nd-1 */
    unsigned mask = 0;
    if (c->axis.n == -1) return 0; /* every axis */
    if (c->axis.n < 1) return -1;
    for (int i = 0; i < c->axis.n; i++) {
        int a = c->axis.v[i] < 0 ? c->axis.v[i] + nd : c->axis.v[i];
        if (a < 0 || a >= nd || mask >> a & 1) return -1;
        mask |= 1u << a;
    }
    const int k = c->axis.n;
    const unsigned lead = (1u << k) - 1, trail = ((1u << nd) - 1) & ~((1u << (nd - k)) - 1);
    int64_t red = 1;
    if (mask == lead) {
        for (int i = 0; i < k; i++) red *= shape->dim[i];
        out->red = red;
        out->inner = red ? tfc_shape_numel(shape) / red : 0;
    } else if (mask == trail) {
        for (int i = nd - k; i < nd; i++) red *= shape->dim[i];
        out->red = red;
        out->outer = red ? tfc_shape_numel(shape) / red : 0;
    } else {
        return -1;
    }
    return 0;
}

/* Keras's fans: last axis fan_out, the one before fan_in, leading axes the receptive field. */
static void fans(const tfc_shape *s, double *fan_in, double *fan_out)
{
    if (s->ndim == 0) {
        *fan_in = *fan_out = 1;
    } else if (s->ndim == 1) {
        *fan_in = *fan_out = (double)s->dim[0];
    } else {
        double receptive = 1;
        for (int i = 0; i < s->ndim - 2; i++) receptive *= (double)s->dim[i];
        *fan_in = (double)s->dim[s->ndim - 2] * receptive;
        *fan_out = (double)s->dim[s->ndim - 1] * receptive;
    }
}

/* N(0, 1) redrawn while beyond 2 (TensorFlow's truncated normal); the redraw uses a later
 * lane of the same counter so the value stays a function of (key, i). */
static double truncated(uint64_t key, uint64_t i)
{
    for (uint64_t round = 0;; round++) {
        double z = tfc_rng_normal(key, round, i);
        if (fabs(z) <= 2.0) return z;
    }
}

static tfc_status orthogonal(const tfc_shape *shape, double gain, uint64_t key, float *out,
                             tfc_error *err)
{
    int64_t cols = shape->ndim ? shape->dim[shape->ndim - 1] : 1;
    int64_t rows = cols ? tfc_shape_numel(shape) / cols : 0;
    int64_t m = rows > cols ? rows : cols, k = rows > cols ? cols : rows;
    if (m * k == 0) return TFC_OK;
    double *q = malloc(sizeof(double) * (size_t)(m * k));
    if (!q) return tfc_error_set(err, TFC_ERR_NOMEM, "orthogonal initializer: out of memory");
    /* Columns of a normal [m, k] matrix, orthonormalised by modified Gram-Schmidt, twice
     * for stability: the Q of a QR decomposition with a positive diagonal of R. */
    for (int64_t i = 0; i < m * k; i++) q[i] = tfc_rng_normal(key, 0, (uint64_t)i);
    for (int pass = 0; pass < 2; pass++)
        for (int64_t j = 0; j < k; j++) {
            for (int64_t p = 0; p < j; p++) {
                double dot = 0;
                for (int64_t i = 0; i < m; i++) dot += q[i * k + p] * q[i * k + j];
                for (int64_t i = 0; i < m; i++) q[i * k + j] -= dot * q[i * k + p];
            }
            double norm = 0;
            for (int64_t i = 0; i < m; i++) norm += q[i * k + j] * q[i * k + j];
            norm = sqrt(norm);
            for (int64_t i = 0; i < m; i++) q[i * k + j] /= norm > 0 ? norm : 1;
        }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            out[r * cols + c] = (float)(gain * (rows >= cols ? q[r * k + c] : q[c * k + r]));
    free(q);
    return TFC_OK;
}

tfc_status tfc_init_fill(const tfc_init *init, const tfc_shape *shape, uint64_t key, float *out,
                         tfc_error *err)
{
    int64_t n = tfc_shape_numel(shape);
    double fan_in, fan_out;
    fans(shape, &fan_in, &fan_out);
    if (init->fan_in > 0 && init->fan_out > 0) fan_in = init->fan_in, fan_out = init->fan_out;
    double limit = 0, stddev = 0;
    switch (init->kind) {
    case TFC_INIT_ZEROS:
    case TFC_INIT_ONES:
    case TFC_INIT_CONSTANT: {
        float v = init->kind == TFC_INIT_ZEROS ? 0.f : init->kind == TFC_INIT_ONES ? 1.f
                                                                                : (float)init->a;
        for (int64_t i = 0; i < n; i++) out[i] = v;
        return TFC_OK;
    }
    case TFC_INIT_LSTM_BIAS: {
        int64_t units = n / 4;
        for (int64_t i = 0; i < n; i++) out[i] = (i >= units && i < 2 * units) ? 1.f : 0.f;
        return TFC_OK;
    }
    case TFC_INIT_ORTHOGONAL: return orthogonal(shape, init->a, key, out, err);
    case TFC_INIT_GLOROT_UNIFORM: limit = sqrt(6.0 / (fan_in + fan_out)); break;
    case TFC_INIT_HE_UNIFORM: limit = sqrt(6.0 / fan_in); break;
    case TFC_INIT_LECUN_UNIFORM: limit = sqrt(3.0 / fan_in); break;
    /* Variance scaling with a truncated normal: Keras divides by 0.87962566103423978, the
     * standard deviation of N(0, 1) truncated to [-2, 2], to keep the intended variance. */
    case TFC_INIT_GLOROT_NORMAL: stddev = sqrt(2.0 / (fan_in + fan_out)) / .87962566103423978; break;
    case TFC_INIT_HE_NORMAL: stddev = sqrt(2.0 / fan_in) / .87962566103423978; break;
    case TFC_INIT_LECUN_NORMAL: stddev = sqrt(1.0 / fan_in) / .87962566103423978; break;
    case TFC_INIT_VARIANCE_SCALING: {
        double fans = init->mode == TFC_FAN_IN    ? fan_in
                      : init->mode == TFC_FAN_OUT ? fan_out
                                                  : (fan_in + fan_out) / 2;
        double v = init->a / (fans > 1 ? fans : 1);
        if (init->distribution == TFC_DIST_UNIFORM) {
            limit = sqrt(3.0 * v);
        } else if (init->distribution == TFC_DIST_UNTRUNCATED) {
            for (int64_t i = 0; i < n; i++)
                out[i] = (float)(sqrt(v) * tfc_rng_normal(key, 0, (uint64_t)i));
            return TFC_OK;
        } else {
            stddev = sqrt(v) / .87962566103423978;
        }
        break;
    }
    case TFC_INIT_RANDOM_UNIFORM:
        for (int64_t i = 0; i < n; i++)
            out[i] = (float)(init->a + (init->b - init->a) * tfc_rng_uniform(key, 0, (uint64_t)i));
        return TFC_OK;
    case TFC_INIT_RANDOM_NORMAL:
        for (int64_t i = 0; i < n; i++)
            out[i] = (float)(init->a + init->b * tfc_rng_normal(key, 0, (uint64_t)i));
        return TFC_OK;
    case TFC_INIT_TRUNCATED_NORMAL:
        for (int64_t i = 0; i < n; i++)
            out[i] = (float)(init->a + init->b * truncated(key, (uint64_t)i));
        return TFC_OK;
    case TFC_INIT_COUNT: break;
    }
    if (limit > 0) {
        for (int64_t i = 0; i < n; i++)
            out[i] = (float)(limit * (2.0 * tfc_rng_uniform(key, 0, (uint64_t)i) - 1.0));
    } else {
        for (int64_t i = 0; i < n; i++) out[i] = (float)(stddev * truncated(key, (uint64_t)i));
    }
    return TFC_OK;
}

uint64_t tfc_init_key(const tfc_init *in, uint64_t unseeded)
{
    /* a stream of its own: no solver seed's key (tfc_rng_key(seed, 16 i + p)) is this one
     * but by chance */
    return in->seeded ? tfc_rng_key(0x5EED5EED5EED5EEDULL, (uint64_t)in->seed) : unseeded;
}
