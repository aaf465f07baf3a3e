/* Device selection: the one place that knows every backend. It stands above src/cpu/ and
 * src/gpu/ and opens the backend a --device/`device:` string names; everything after that
 * (options, status, the ops) goes through the backend's op table (core/backend.h). */
#ifndef TFC_DEVICE_DEVICE_H
#define TFC_DEVICE_DEVICE_H

#include "core/backend.h"

/* Opens the backend a --device/`device:` string names: "cpu", "gpu", "gpu:N", or NULL/""
 * for the default (a GPU when one is usable, else the CPU). Asking for a GPU that this build
 * or this machine cannot provide is TFC_ERR_DEVICE with the reason (exit 1). `threads`
 * applies to the CPU (<= 0: all cores). The backend's table has passed tfc_backend_check.
 * Free the backend with tfc_backend_free. */
tfc_backend *tfc_backend_open(const char *device, int threads, tfc_error *err);

/* The usable GPUs (after CUDA_VISIBLE_DEVICES); 0 in a build without CUDA. */
int tfc_device_gpu_count(void);

#endif
