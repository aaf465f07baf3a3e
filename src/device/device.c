/* Device selection: "cpu", "gpu", "gpu:N" or the default. GPU backends exist only in
 * builds with CUDA (TFC_HAVE_CUDA); elsewhere asking for one is a clear error. A backend
 * whose table misses an op is never handed out. Besides, what the solver and the tools need
 * of a backend outside its op table, so they include no backend's header: the memory it has
 * left (the solver's check before binding), the CPU BLAS's start and kernel line (the tools),
 * and NCCL's gradient sum. Options and status are ops of the backend's table. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "device/device.h"

#ifdef TFC_HAVE_CUDA
#include "gpu/gpu.h"
#endif

static tfc_backend *create(const char *device, int threads, tfc_error *err)
{
    if (!device || !*device) {
#ifdef TFC_HAVE_CUDA
        if (tfc_gpu_device_count() > 0) return tfc_gpu_backend_create(0, err);
#endif
        return tfc_cpu_backend_create(threads);
    }
    if (strcmp(device, "cpu") == 0) return tfc_cpu_backend_create(threads);
    int index = 0;
    if (strcmp(device, "gpu") == 0) {
        index = 0;
    } else if (strncmp(device, "gpu:", 4) == 0) {
        char *end;
        long v = strtol(device + 4, &end, 10);
        if (!device[4] || *end || v < 0 || v > 1024) {
            tfc_error_set(err, TFC_ERR_USAGE, "device '%s': expected cpu, gpu or gpu:N", device);
            return NULL;
        }
        index = (int)v;
    } else {
        tfc_error_set(err, TFC_ERR_USAGE, "unknown device '%s' (expected cpu, gpu or gpu:N)",
                      device);
        return NULL;
    }
#ifdef TFC_HAVE_CUDA
    int count = tfc_gpu_device_count();
    if (index >= count) {
        tfc_error_set(err, TFC_ERR_DEVICE, "device %s requested but %d usable GPU%s found%s",
                      device, count, count == 1 ? "" : "s",
                      getenv("CUDA_VISIBLE_DEVICES") ? " (CUDA_VISIBLE_DEVICES is set)" : "");
        return NULL;
    }
    return tfc_gpu_backend_create(index, err);
#else
    tfc_error_set(err, TFC_ERR_DEVICE,
                  "device %s requested, but this build of tfc has no GPU support (it was built "
                  "without nvcc and cuDNN, or with CUDA=0)", device);
    (void)index;
    return NULL;
#endif
}

tfc_backend *tfc_backend_open(const char *device, int threads, tfc_error *err)
{
    tfc_backend *be = create(device, threads, err);
    if (be && tfc_backend_check(be->ops, err)) {
        tfc_backend_free(be);
        return NULL;
    }
    return be;
}

int tfc_device_gpu_count(void)
{
#ifdef TFC_HAVE_CUDA
    return tfc_gpu_device_count();
#else
    return 0;
#endif
}

/* The first number in the file `path` after `key` (the whole file when key is ""), times
 * `unit`; SIZE_MAX when the file or the key is missing or the value is not a number ("max"). */
static size_t read_number(const char *path, const char *key, size_t unit)
{
    FILE *f = fopen(path, "r");
    char line[256];
    size_t v = SIZE_MAX;
    while (f && v == SIZE_MAX && fgets(line, sizeof line, f)) {
        unsigned long long n;
        size_t k = strlen(key);
        if (strncmp(line, key, k) == 0 && sscanf(line + k, " %llu", &n) == 1)
            v = n > SIZE_MAX / unit ? SIZE_MAX - 1 : (size_t)n * unit;
    }
    if (f) fclose(f);
    return v;
}

/* What the cgroup v2 limit of this process leaves (memory.max - memory.current of the
 * cgroup /proc/self/cgroup's "0::" line names); SIZE_MAX with no limit or no cgroup v2. */
static size_t cgroup_left(void)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[1024], path[1200];
    size_t left = SIZE_MAX;
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "0::", 3) != 0) continue;
        line[strcspn(line, "\n")] = 0;
        snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", line + 3);
        size_t max = read_number(path, "", 1);
        snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.current", line + 3);
        size_t cur = read_number(path, "", 1);
        if (max != SIZE_MAX && cur != SIZE_MAX) left = cur < max ? max - cur : 0;
    }
    if (f) fclose(f);
    return left;
}

size_t tfc_device_memory_available(tfc_backend *be, const char **source)
{
#ifdef TFC_HAVE_CUDA
    if (tfc_gpu_is_gpu(be)) {
        tfc_gpu_memory g;
        tfc_gpu_memory_stats(be, &g);
        size_t avail = g.device_free + (g.reserved - g.in_use); /* cached blocks are reusable */
        *source = "free on the device";
        size_t under = g.limit > g.in_use ? g.limit - g.in_use : 0;
        if (g.limit && under < avail) {
            avail = under;
            *source = "left under gpu_memory_limit";
        }
        return avail;
    }
#endif
    (void)be;
    size_t avail = read_number("/proc/meminfo", "MemAvailable:", 1024), cg = cgroup_left();
    *source = avail == SIZE_MAX ? "unknown" : "MemAvailable";
    if (cg < avail) {
        avail = cg;
        *source = "left under the cgroup's memory.max";
    }
    return avail;
}

void tfc_device_start(char **argv)
{
    tfc_cpu_blas_restart(argv);
}

void tfc_device_blas_line(char *buf, size_t size)
{
    const char *fallback = tfc_cpu_blas_fallback();
    if (fallback)
        snprintf(buf, size, "OpenBLAS: %s kernels (OPENBLAS_CORETYPE set by tfc: OpenBLAS chose "
                 "%s for this CPU)", tfc_cpu_blas_core(), fallback);
    else
        snprintf(buf, size, "OpenBLAS: %s kernels", tfc_cpu_blas_core());
}

#ifdef TFC_HAVE_NCCL
tfc_gpu_nccl *tfc_device_nccl_open(tfc_backend *be, tfc_comm *world, double timeout_s,
                                   tfc_error *err)
{
    return tfc_gpu_nccl_open(be, world, timeout_s, err);
}

tfc_status tfc_device_nccl_sum(tfc_gpu_nccl *n, float *buf, int64_t count, tfc_error *err)
{
    return tfc_gpu_nccl_allreduce(n, buf, count, err);
}

void tfc_device_nccl_close(tfc_gpu_nccl *n)
{
    tfc_gpu_nccl_close(n);
}
#else
tfc_gpu_nccl *tfc_device_nccl_open(tfc_backend *be, tfc_comm *world, double timeout_s,
                                   tfc_error *err)
{
    (void)be, (void)world, (void)timeout_s;
    tfc_error_set(err, TFC_ERR_USAGE, "this build has no NCCL");
    return NULL;
}

tfc_status tfc_device_nccl_sum(tfc_gpu_nccl *n, float *buf, int64_t count, tfc_error *err)
{
    (void)n, (void)buf, (void)count;
    return tfc_error_set(err, TFC_ERR_USAGE, "this build has no NCCL");
}

void tfc_device_nccl_close(tfc_gpu_nccl *n)
{
    (void)n;
}
#endif
