/* tfc — the header an embedding program includes. It gathers the public modules:
 *
 *   errors      core/error.h      tfc_error, tfc_status, tfc_exit_code
 *   backends    core/backend.h    tfc_backend_open("cpu" | "gpu" | "gpu:N"), tfc_backend_free
 *   models      graph/model.h      tfc_model_load / _from_string, _bind, _init_weights,
 *                                 _forward, _loss, _backward, _save_weights, _load_weights
 *   data        data/data.h       tfc_pipeline_* (sources, stages, map callbacks, state)
 *
 * Build against the library with `-I include -I src` and link build/release/libtfc.a (or
 * the shared libtfc.so) with -lopenblas -lyaml -ljansson -lpng -ljpeg -lz -lm -fopenmp.
 * Every call that can fail returns a tfc_status and fills a tfc_error; nothing exits. */
#ifndef TFC_H
#define TFC_H

#include "core/backend.h"
#include "core/error.h"
#include "graph/model.h"
#include "data/data.h"

#endif
