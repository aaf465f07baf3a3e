/* Initializers with Keras's names, defaults and formulas, drawn from Philox so a weight
 * depends only on (seed, layer, variable): the same on every device and every run.
 * In YAML an initializer is a name (`he_normal`; Keras's `uniform`, `normal`, `one` and
 * `zero` too) or a mapping with `type` and that type's arguments (`{type: constant, value:
 * 0.1}`, `{type: random_normal, stddev: 0.01}`): another type's argument is an error, and
 * Keras's `seed` draws a weight from it alone (tfc_init_key). */
#ifndef TFC_CORE_INIT_H
#define TFC_CORE_INIT_H

#include <stdint.h>

#include "core/backend.h"
#include "core/config.h"
#include "core/schema.h"
#include "core/tensor.h"

typedef enum tfc_init_kind {
    TFC_INIT_ZEROS = 0,
    TFC_INIT_ONES,
    TFC_INIT_CONSTANT,        /* value */
    TFC_INIT_GLOROT_UNIFORM,  /* U(-l, l), l = sqrt(6 / (fan_in + fan_out)) */
    TFC_INIT_GLOROT_NORMAL,   /* truncated N(0, 2 / (fan_in + fan_out)) */
    TFC_INIT_HE_UNIFORM,      /* U(-l, l), l = sqrt(6 / fan_in) */
    TFC_INIT_HE_NORMAL,       /* truncated N(0, 2 / fan_in) */
    TFC_INIT_LECUN_UNIFORM,   /* U(-l, l), l = sqrt(3 / fan_in) */
    TFC_INIT_LECUN_NORMAL,    /* truncated N(0, 1 / fan_in) */
    TFC_INIT_ORTHOGONAL,      /* gain * orthogonal rows/columns of the 2-D flattening */
    TFC_INIT_RANDOM_UNIFORM,  /* U(minval, maxval), Keras default -0.05, 0.05 */
    TFC_INIT_RANDOM_NORMAL,   /* N(mean, stddev), Keras default 0, 0.05 */
    TFC_INIT_TRUNCATED_NORMAL,/* N(mean, stddev) redrawn beyond 2 stddev */
    TFC_INIT_LSTM_BIAS,       /* zeros with the forget gate's quarter at 1 (unit_forget_bias) */
    TFC_INIT_VARIANCE_SCALING,/* scale / max(1, n), n the fans of mode (fan_in, fan_out or
                               * their mean): truncated N (stddev sqrt(that) / .8796),
                               * untruncated N (stddev sqrt(that)) or U(-l, l) with
                               * l = sqrt(3 that), as distribution says */
    TFC_INIT_COUNT
} tfc_init_kind;

/* variance_scaling's mode and distribution (Keras's names) */
typedef enum { TFC_FAN_IN, TFC_FAN_OUT, TFC_FAN_AVG } tfc_init_mode;
typedef enum { TFC_DIST_TRUNCATED, TFC_DIST_UNTRUNCATED, TFC_DIST_UNIFORM } tfc_init_dist;

typedef struct tfc_init {
    tfc_init_kind kind;
    double a, b;              /* value | minval, maxval | mean, stddev | gain | scale */
    int mode, distribution;   /* variance_scaling */
    /* > 0: the fans of Keras's input_axes / output_axes (EinsumDense sets them for its
     * kernel), in place of those tfc_init_fill reads off the shape */
    double fan_in, fan_out;
    /* Keras's seed: the weight is drawn from it alone (tfc_init_key), the same whatever the
     * solver's seed and for every weight of one shape and one seed, as Keras's seeded
     * initializer gives (its values are tfc's draws, not Keras's) */
    int seeded;
    int64_t seed;
} tfc_init;

/* The stream a weight is drawn from: from its initializer's seed when it has one, else
 * `unseeded` (the solver's seed, the layer and the variable) */
uint64_t tfc_init_key(const tfc_init *in, uint64_t unseeded);

extern const char *const tfc_init_names[TFC_INIT_COUNT + 1];

tfc_init tfc_init_make(tfc_init_kind kind);

/* The arguments a mapping of `kind` takes (its `type` included): for help and tests. */
const tfc_field *tfc_init_fields(tfc_init_kind kind);

/* Reads an initializer from `node` (NULL: returns `def`). Errors name `path`. */
tfc_status tfc_init_parse(const tfc_node *node, const char *path, tfc_init def, tfc_init *out,
                          tfc_error *err);

/* Keras's serialized form of an initializer, a regularizer or a loss (keras.saving's
 * serialize_keras_object), as a Keras model's config writes it: {module, class_name, config:
 * {the class's arguments}, registered_name}; module and registered_name are not read. */
typedef struct tfc_keras_form {
    const tfc_node *class_name, *config, *module, *registered_name;
} tfc_keras_form;
extern const tfc_field tfc_keras_form_fields[];

/* Keras's weight regularizers (keras.regularizers L1, L2, L1L2): the penalty l1 sum |w| +
 * l2 sum w^2 joins the loss, its gradient l1 sign(w) + 2 l2 w the weight's. In YAML a name,
 * Keras's: `l2` or `L2` (l2 0.01), `l1` or `L1` (l1 0.01), `l1l2` or `L1L2` (both 0); a
 * mapping {type: NAME, l1: .., l2: ..} with that type's arguments; or Keras's serialized form
 * {class_name: L2, config: {l2: 1e-4}} (module and registered_name ignored). null: none. */
typedef struct tfc_regularizer {
    double l1, l2;
} tfc_regularizer;

/* Reads a regularizer from `node` (NULL or null: none, both 0). Errors name `path`. */
tfc_status tfc_regularizer_parse(const tfc_node *node, const char *path, tfc_regularizer *out,
                                 tfc_error *err);

/* Keras's weight constraints (keras.constraints MaxNorm, NonNeg, UnitNorm, MinMaxNorm; the
 * formulas at tfc_constraint_desc, core/backend.h), applied to the weight after each
 * optimizer update. In YAML a name, Keras's snake case or class name (max_norm or MaxNorm,
 * non_neg, unit_norm, min_max_norm: Keras's defaults); a mapping {type: max_norm, max_value:
 * 3, axis: [0, 1, 2]} with that type's arguments; or Keras's serialized form {class_name:
 * MaxNorm, config: {max_value: 2, axis: 0}}. null: none. `axis` (an int or a list, default
 * 0; null, Keras's None, is every axis: axis.n -1) is checked against the weight's shape when
 * the model is built (tfc_constraint_layout). */
typedef struct tfc_constraint {
    tfc_constraint_kind kind;
    double min_value, max_value, rate;
    tfc_int_list axis;
} tfc_constraint;

/* Reads a constraint from `node` (NULL or null: none). Errors name `path`. */
tfc_status tfc_constraint_parse(const tfc_node *node, const char *path, tfc_constraint *out,
                                tfc_error *err);

/* The op's view of c on a weight of `shape` (Keras's layout): 0, or -1 when c's axes (negative
 * ones counted from the end) are out of range, repeated, or neither a leading nor a trailing
 * run of the shape's axes. */
int tfc_constraint_layout(const tfc_constraint *c, const tfc_shape *shape,
                          tfc_constraint_desc *out);

/* Fills `out` (host memory, `shape` in Keras layout) from the stream `key`. Fans follow
 * Keras: the last axis is fan_out, the one before fan_in, leading axes are the receptive
 * field (unless init->fan_in and fan_out say). Returns TFC_ERR_NOMEM only for orthogonal's scratch. */
tfc_status tfc_init_fill(const tfc_init *init, const tfc_shape *shape, uint64_t key, float *out,
                         tfc_error *err);

#endif
