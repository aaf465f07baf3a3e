/* Initializers with Keras's names, defaults and formulas, drawn from Philox so a weight
 * depends only on (seed, layer, variable): the same on every device and every run.
 * In YAML an initializer is a name (`he_normal`) or a mapping with `type` and its
 * arguments (`{type: constant, value: 0.1}`, `{type: random_normal, stddev: 0.01}`). */
#ifndef TFC_CORE_INIT_H
#define TFC_CORE_INIT_H

#include <stdint.h>

#include "core/config.h"
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
    TFC_INIT_COUNT
} tfc_init_kind;

typedef struct tfc_init {
    tfc_init_kind kind;
    double a, b;              /* value | minval, maxval | mean, stddev | gain */
} tfc_init;

extern const char *const tfc_init_names[TFC_INIT_COUNT + 1];

tfc_init tfc_init_make(tfc_init_kind kind);

/* Reads an initializer from `node` (NULL: returns `def`). Errors name `path`. */
tfc_status tfc_init_parse(const tfc_node *node, const char *path, tfc_init def, tfc_init *out,
                          tfc_error *err);

/* Fills `out` (host memory, `shape` in Keras layout) from the stream `key`. Fans follow
 * Keras: the last axis is fan_out, the one before fan_in, leading axes are the receptive
 * field. Returns TFC_ERR_NOMEM only for orthogonal's scratch. */
tfc_status tfc_init_fill(const tfc_init *init, const tfc_shape *shape, uint64_t key, float *out,
                         tfc_error *err);

#endif
