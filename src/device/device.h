/* Device selection: the one place that knows every backend. It stands above src/cpu/ and
 * src/gpu/ and opens the backend a --device/`device:` string names. */
#ifndef TFC_DEVICE_DEVICE_H
#define TFC_DEVICE_DEVICE_H

#include "core/backend.h"

/* Opens the backend a --device/`device:` string names: "cpu", "gpu", "gpu:N", or NULL/""
 * for the default (a GPU when one is usable, else the CPU). Asking for a GPU that this build
 * or this machine cannot provide is TFC_ERR_DEVICE with the reason (exit 1). `threads`
 * applies to the CPU (<= 0: all cores). */
tfc_backend *tfc_backend_open(const char *device, int threads, tfc_error *err);

/* The solver's GPU options (deterministic, tf32, gpu_memory_limit): applied to a GPU
 * backend, ignored by the CPU's (whose results are deterministic and float32 already). */
typedef struct tfc_device_options {
    int deterministic;          /* deterministic cuDNN algorithms, no atomics in reductions */
    int tf32;                   /* TensorFloat-32 in GEMMs and convolutions */
    size_t memory_limit;        /* bytes the allocator may hold; 0 = no limit */
} tfc_device_options;
void tfc_backend_configure(tfc_backend *be, const tfc_device_options *o);

/* The first error an asynchronous device op met since the last call (TFC_ERR_DEVICE with the
 * failing call and the library's message), then cleared; TFC_OK on the CPU and when none. */
tfc_status tfc_backend_status(tfc_backend *be, tfc_error *err);

#endif
