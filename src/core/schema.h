/* Schemas: a layer, optimizer, stage or source declares its arguments as a table of fields
 * (name, type, default, range, choices, help). One validator reads a YAML mapping against
 * the table into a C struct, so every config file is checked the same way: unknown keys
 * (with did-you-mean), wrong types, out-of-range values and unknown enum values are errors
 * at FILE:LINE:COL with the key path. The same table drives --set and help text. */
#ifndef TFC_CORE_SCHEMA_H
#define TFC_CORE_SCHEMA_H

#include <stddef.h>

#include "core/config.h"

typedef enum tfc_field_type {
    TFC_F_INT,        /* int */
    TFC_F_FLOAT,      /* double */
    TFC_F_BOOL,       /* int, 0 or 1 */
    TFC_F_STRING,     /* const char *, NULL when absent and optional */
    TFC_F_ENUM,       /* int: index into choices */
    TFC_F_INT_PAIR,   /* int[2]: `3` means [3, 3] (kernel_size, strides, pool_size) */
    TFC_F_INT_LIST,   /* tfc_int_list */
    TFC_F_FLOAT_LIST, /* tfc_float_list */
    TFC_F_NODE,       /* const tfc_node *: checked by the caller; NULL when absent */
    TFC_F_FIXED,      /* nothing stored: an argument of Keras's that tfc has one value of,
                       * its default (null: Keras's None, where def is TFC_NO_DEFAULT);
                       * any other value is an error naming it, with the help as a hint */
    TFC_F_REGULARIZER,/* nothing stored: a weight regularizer (core/init.h), checked here;
                       * the graph reads it from the layer's mapping for each weight it
                       * regularizes (tfc_param.regularizer) */
    TFC_F_CONSTRAINT, /* nothing stored: a weight constraint (core/init.h), checked here; the
                       * graph reads it as it reads a regularizer (tfc_param.constraint) */
    TFC_F_REFUSED     /* nothing stored: a key users bring from elsewhere that tfc spells
                       * another way (Keras's epochs); a value other than null is an error
                       * whose message is the help. Not listed as a known key. */
} tfc_field_type;

#define TFC_LIST_MAX 16
typedef struct tfc_int_list { int n; int v[TFC_LIST_MAX]; } tfc_int_list;
typedef struct tfc_float_list { int n; double v[TFC_LIST_MAX]; } tfc_float_list;

/* Default text meaning "optional, no default": numbers become 0, strings and nodes NULL,
 * lists empty. A NULL default means the key is required. */
#define TFC_NO_DEFAULT "~"

typedef struct tfc_field {
    const char *name;
    tfc_field_type type;
    size_t offset;               /* where the value goes in the output struct */
    const char *def;             /* default as YAML text; NULL = required; TFC_NO_DEFAULT */
    double min, max;             /* inclusive bounds on numbers and list items; min > max: none */
    const char *const *choices;  /* ENUM: NULL-terminated names */
    const char *help;
} tfc_field;

/* Fills min and max of a field without bounds (min > max). */
#define TFC_UNBOUNDED 1.0, 0.0

/* A Keras argument tfc accepts only at `def` (YAML text; TFC_NO_DEFAULT: only null), so
 * that a Keras model's config with it at its default loads (TFC_F_FIXED). `hint` (may be
 * NULL) follows the error for any other value: what tfc has instead. */
#define TFC_FIXED_FIELD(name, def, hint) {name, TFC_F_FIXED, 0, def, TFC_UNBOUNDED, NULL, hint}

/* Validates `map` (a MAP node, or NULL for "all defaults") against `fields` (ended by an
 * entry whose name is NULL) and stores each value into `out`. Errors name `path` + "." +
 * key. Keeps going after an error so a file's errors are reported together. Returns TFC_OK
 * or TFC_ERR_CONFIG. */
tfc_status tfc_schema_apply(const tfc_field *fields, const tfc_node *map, const char *path,
                            void *out, tfc_error *err);

/* Writes one line per field: name, type, default and help. */
void tfc_schema_print_help(FILE *f, const tfc_field *fields, const char *indent);

/* Scalar conversions used by the validator and by code that reads nodes directly. Each
 * reports a positioned error naming `path` and returns TFC_ERR_CONFIG on failure. */
tfc_status tfc_node_int(const tfc_node *n, const char *path, long long lo, long long hi,
                        long long *out, tfc_error *err);
tfc_status tfc_node_double(const tfc_node *n, const char *path, double *out, tfc_error *err);
tfc_status tfc_node_bool(const tfc_node *n, const char *path, int *out, tfc_error *err);
tfc_status tfc_node_enum(const tfc_node *n, const char *path, const char *const *choices,
                         int *out, tfc_error *err);
/* Whether `s` is written as Python writes a value: `[module.]name(args)` or `module.name`
 * (HeNormal(), L2(0.01), tf.nn.relu); *name, *len: the name without module or call, *args:
 * whether the call passes anything. Callers say how YAML writes it instead. */
int tfc_python_name(const char *s, const char **name, int *len, int *args);

/* True for YAML's null spellings: plain `null`, `Null`, `NULL`, `~` or empty. */
int tfc_node_is_null(const tfc_node *n);

/* Describes a node for "found ..." in messages: `"3x3"`, `a mapping`, `a sequence`. */
void tfc_node_describe(const tfc_node *n, char *buf, size_t size);

#endif
