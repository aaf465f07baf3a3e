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

/* The memory a new allocation on `be` may still take, in bytes, and where the figure comes
 * from (*source, a static string for messages): on a GPU the device's free memory plus the
 * allocator's cached blocks, capped by gpu_memory_limit ("free on the device", "left under
 * gpu_memory_limit"); on the CPU /proc/meminfo's MemAvailable, or the cgroup v2 limit
 * (memory.max less memory.current of this process's cgroup) when that is lower
 * ("MemAvailable", "left under the cgroup's memory.max"). SIZE_MAX (source "unknown") when
 * neither can be read. */
size_t tfc_device_memory_available(tfc_backend *be, const char **source);

/* The usable GPUs (after CUDA_VISIBLE_DEVICES); 0 in a build without CUDA. */
int tfc_device_gpu_count(void);

#endif
