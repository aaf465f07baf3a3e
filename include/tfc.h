/* tfc — the header a program using the library includes, and the only library header the
 * tools (tools/tfc-*.c) include. It gathers the public modules, one header each:
 *
 *   errors       core/error.h        tfc_error, tfc_status, tfc_exit_code
 *   config       core/config.h       tfc_config_* (YAML trees with FILE:LINE:COL), overrides
 *                core/schema.h       tfc_schema_* (key tables, did-you-mean, --keys docs)
 *   values       core/tensor.h       tfc_dtype, tfc_value_get/set, tfc_values_convert, halves
 *   files        core/fileio.h       tfc_file_read_all, tfc_file_write_atomic, tfc_mkdir_p
 *                core/safetensors.h  tfc_safetensors_* (read, write, metadata)
 *   ranks        comm/comm.h         tfc_comm_world, the collectives of a data-parallel run
 *   utilities    core/timing.h       tfc_now, tfc_median;  core/rng.h  Philox4x32-10 draws
 *   backends     core/backend.h      the op table, tfc_backend_configure/_status/_free
 *                device/device.h     tfc_backend_open("cpu" | "gpu" | "gpu:N" | NULL)
 *   models       graph/model.h       tfc_model_load / _from_string, _bind, _init_weights,
 *                                    _forward, _loss, _backward, _save_weights, _load_weights,
 *                                    tfc_model_layer (read-only view of a layer)
 *   data         data/data.h         tfc_pipeline_* (sources, stages, plans, map callbacks, state)
 *   training     solver/solver.h     tfc_solver_load, tfc_solver_train, tfc_solver_evaluate,
 *                                    tfc_snapshot_* (names, discovery)
 *
 * Internal headers (graph/model_internal.h, cpu/cpu_internal.h, data/internal.h,
 * solver/internal.h, gpu/gpu_internal.cuh) are not reachable from here. Build against the
 * library with `-I include -I src` and link build/release/libtfc.a (or libtfc.so) with
 * -lopenblas -lyaml -ljansson -lpng -ljpeg -lz -lm -fopenmp. Every call that can fail returns
 * a tfc_status and fills a tfc_error; nothing exits. libtfc exports only tfc_ / TFC_ names
 * (tests/test_symbols.sh checks it with nm). */
#ifndef TFC_H
#define TFC_H

#ifdef __cplusplus
extern "C" {
#endif

#include "core/error.h"
#include "core/config.h"
#include "core/schema.h"
#include "core/tensor.h"
#include "core/fileio.h"
#include "core/safetensors.h"
#include "core/timing.h"
#include "core/rng.h"
#include "core/backend.h"
#include "device/device.h"
#include "comm/comm.h"
#include "graph/model.h"
#include "data/data.h"
#include "solver/solver.h"

#ifdef __cplusplus
}
#endif

#endif
