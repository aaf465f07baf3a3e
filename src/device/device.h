/* Device selection: the one place that knows every backend. It stands above src/cpu/ and
 * src/gpu/ and opens the backend a --device/`device:` string names; everything after that
 * (options, status, the ops) goes through the backend's op table (core/backend.h), and what
 * the table does not cover (memory left, the BLAS start, NCCL) through the calls below. The
 * solver and the tools include no backend's header (test_symbols.device_boundary). */
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

/* What every program does first, before any thread starts: on the CPU, OpenBLAS's kernel
 * restart (tfc_cpu_blas_restart, cpu/cpu.h: may exec the program again). The tools call it
 * through their command-line parser. */
void tfc_device_start(char **argv);

/* The kernel set the CPU's BLAS runs, as --version prints it: "OpenBLAS: CORE kernels", with
 * what OpenBLAS had chosen by itself when tfc_device_start replaced it. */
void tfc_device_blas_line(char *buf, size_t size);

/* NCCL's all-reduce of GPU buffers for a data-parallel run's gradients (solver/grad_comm.c),
 * the nccl engine of src/gpu/ behind this boundary; contracts as tfc_gpu_nccl_* (gpu/gpu.h).
 * In a build without NCCL, open fails (TFC_ERR_USAGE, saying so), sum fails likewise and
 * close does nothing. */
typedef struct tfc_comm tfc_comm;
typedef struct tfc_gpu_nccl tfc_gpu_nccl;
tfc_gpu_nccl *tfc_device_nccl_open(tfc_backend *be, tfc_comm *world, double timeout_s,
                                   tfc_error *err);
tfc_status tfc_device_nccl_sum(tfc_gpu_nccl *n, float *buf, int64_t count, tfc_error *err);
void tfc_device_nccl_close(tfc_gpu_nccl *n);

#endif
