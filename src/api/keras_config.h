/* Keras's model configuration into tfc's model file (keras_config.c): the half of
 * tfc_keras_import (keras_import.h) that reads no weights and runs no kernel. Internal. */
#ifndef TFC_API_KERAS_CONFIG_H
#define TFC_API_KERAS_CONFIG_H

#include <stddef.h>

#include "api/keras_import.h"
#include "core/config.h"
#include "core/error.h"

/* The model file (YAML text, malloc'd, *len bytes) of Keras's configuration `config` (the
 * parsed JSON's root: {class_name: Sequential | Functional, config: ...}); `from` names the
 * input in the file's first comment. Fills rep's model, layers and notes. Errors point at
 * the JSON (TFC_ERR_USAGE: what tfc cannot express). */
tfc_status tfc_keras_convert(const tfc_node *config, const char *from, tfc_import_report *rep,
                             char **yaml, size_t *len, tfc_error *err);

/* A string scalar's text under `key` of a mapping, or NULL. */
const char *tfc_keras_str(const tfc_node *map, const char *key);

/* tfc's layer type of Keras's class name (GroupedQueryAttention: GroupQueryAttention). */
const char *tfc_keras_type(const char *cls);

#endif
