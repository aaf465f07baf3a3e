/* Keras 3 models into tfc (SPEC §3 tfc-import): a `.keras` archive, the JSON of
 * `model.to_json()` (or an archive's config.json) with or without a `.weights.h5` file, or a
 * full-model `.h5` file, becomes a model YAML and a weights file in tfc's names. The YAML is
 * Keras's configuration as tfc's model file writes it: each layer its Keras constructor's
 * arguments, a functional graph's edges as `inputs:`, the compiled loss and metrics. */
#ifndef TFC_API_KERAS_IMPORT_H
#define TFC_API_KERAS_IMPORT_H

#include <stdint.h>

#include "core/error.h"

/* What an import did, for the tool to print. */
typedef struct tfc_import_report {
    char model[128];      /* the model's name */
    char source[160];     /* "Keras 3.15.1", or "" when the file does not say */
    int layers;           /* layers of the model file (the InputLayer not counted) */
    int tensors;          /* weight tensors written; 0 without weights */
    int64_t params;       /* their elements */
    char notes[4096];     /* what the user should know, one line each ("" when nothing) */
} tfc_import_report;

/* Imports `path` (kind by content: a zip archive is a `.keras` file, an HDF5 file a Keras 2
 * full-model `.h5`, anything else the model's JSON) and writes the model file to `model_out`
 * and, when the input has weights or `weights` (a `.weights.h5` file of
 * `model.save_weights`) is given, the weights to `weights_out` (safetensors, SPEC §5), both
 * atomically. With `model` (a tfc model file: the one an import wrote, edited) the model is
 * built from that file instead and only the weights are written (model_out unused). The
 * model file is written even when tfc cannot build the model (so the user can edit it and
 * import again with `model`): the error then names its FILE:LINE:COL, and no weights are
 * written. A weight the model lacks, a variable left without one, or a shape that differs
 * is TFC_ERR_FORMAT naming both paths. Keras objects tfc cannot express (a custom layer, a
 * shared layer, a second input or output) are TFC_ERR_USAGE at the JSON's FILE:LINE:COL. */
tfc_status tfc_keras_import(const char *path, const char *weights, const char *model,
                            const char *model_out, const char *weights_out,
                            tfc_import_report *rep, tfc_error *err);

#endif
