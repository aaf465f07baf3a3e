/* Device selection: "cpu", "gpu", "gpu:N" or the default. GPU backends exist only in
 * builds with CUDA (TFC_HAVE_CUDA); elsewhere asking for one is a clear error. A backend
 * whose table misses an op is never handed out. Nothing else here: options and status are
 * ops of the backend's table. */
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
