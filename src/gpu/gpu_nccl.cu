/* The `nccl` engine of data-parallel runs: an all-reduce of device float32 buffers among the
 * ranks of the job, on the backend's own stream, so GPU gradients are summed where they are
 * instead of through host memory. The communicator's unique id travels over the `mpi`
 * engine; every NCCL call is non-blocking and polled with ncclCommGetAsyncError under a
 * time limit, so a dead peer ends the call with an error (then ncclCommAbort) instead of a
 * hang. Built only where nccl.h and libnccl are found (NCCL=0|1, Makefile). */
#include <nccl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu/gpu_internal.cuh"

#include "comm/comm.h"

struct tfc_gpu_nccl {
    ncclComm_t comm;
    gpu_ctx *g;
    double timeout_s;
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static tfc_status nccl_error(tfc_error *err, const char *what, ncclResult_t r)
{
    return tfc_error_set(err, TFC_ERR_DEVICE, "NCCL %s: %s (%s)", what, ncclGetErrorString(r),
                         ncclGetLastError(NULL));
}

/* Polls the communicator until `done` says the pending work finished, an asynchronous error
 * shows up, or timeout_s passes (then the communicator is aborted: it cannot be used again).
 * The first SPIN_S it polls back to back, yielding the core between polls, as CUDA's own
 * synchronisation spins: an all-reduce usually ends within a step's time, and a 0.1 ms sleep
 * (~0.15 ms with the kernel's timer slack) from the start cost a 1 ms step 16% on an H100
 * (bench/comm_overhead.sh, 2026-11-26). After that it sleeps 0.1 ms between polls. */
#define SPIN_S 0.05
static tfc_status nccl_wait(tfc_gpu_nccl *n, const char *what, int (*done)(tfc_gpu_nccl *),
                            tfc_error *err)
{
    double start = now_s();
    for (;;) {
        ncclResult_t state = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(n->comm, &state);
        if (r != ncclSuccess) return nccl_error(err, what, r);
        if (state != ncclSuccess && state != ncclInProgress) {
            ncclCommAbort(n->comm);
            n->comm = NULL;
            return nccl_error(err, what, state);
        }
        if (state == ncclSuccess && done(n)) return TFC_OK;
        if (now_s() - start > n->timeout_s) {
            ncclCommAbort(n->comm);
            n->comm = NULL;
            return tfc_error_set(err, TFC_ERR_DEVICE,
                                 "NCCL %s: no progress in %.0f s (a rank died or hangs); the "
                                 "communicator was aborted",
                                 what, n->timeout_s);
        }
        if (now_s() - start < SPIN_S) {
            sched_yield();
        } else {
            struct timespec pause = {0, 100000}; /* 0.1 ms */
            nanosleep(&pause, NULL);
        }
    }
}

static int init_done(tfc_gpu_nccl *n)
{
    (void)n;
    return 1; /* the async state alone says when initialisation finished */
}

static int stream_done(tfc_gpu_nccl *n)
{
    return cudaStreamQuery(n->g->stream) != cudaErrorNotReady;
}

extern "C" tfc_gpu_nccl *tfc_gpu_nccl_open(tfc_backend *be, tfc_comm *world, double timeout_s,
                                           tfc_error *err)
{
    if (!tfc_gpu_is_gpu(be)) {
        tfc_error_set(err, TFC_ERR_DEVICE, "the nccl engine needs a GPU backend");
        return NULL;
    }
    tfc_gpu_nccl *n = (tfc_gpu_nccl *)calloc(1, sizeof *n);
    if (!n) {
        tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        return NULL;
    }
    n->g = gpu_of(be);
    n->timeout_s = timeout_s > 0 ? timeout_s : 60;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ncclResult_t r = world->rank == 0 ? ncclGetUniqueId(&id) : ncclSuccess;
    /* every rank takes part in the broadcast, so rank 0's failure reaches all as garbage
     * ids: the flag in front tells them apart */
    unsigned char msg[1 + sizeof id];
    msg[0] = r == ncclSuccess;
    memcpy(msg + 1, &id, sizeof id);
    if (world->ops->broadcast(world, msg, sizeof msg, err)) {
        free(n);
        return NULL;
    }
    if (!msg[0]) {
        if (r != ncclSuccess) nccl_error(err, "ncclGetUniqueId", r);
        else tfc_error_set(err, TFC_ERR_DEVICE, "NCCL: rank 0 could not make a unique id");
        free(n);
        return NULL;
    }
    memcpy(&id, msg + 1, sizeof id);
    cudaSetDevice(n->g->device);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    r = ncclCommInitRankConfig(&n->comm, world->size, id, world->rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
        nccl_error(err, "ncclCommInitRankConfig", r);
        free(n);
        return NULL;
    }
    if (nccl_wait(n, "ncclCommInitRankConfig", init_done, err)) {
        tfc_gpu_nccl_close(n);
        return NULL;
    }
    return n;
}

extern "C" tfc_status tfc_gpu_nccl_allreduce(tfc_gpu_nccl *n, float *buf, int64_t count,
                                             tfc_error *err)
{
    if (!n->comm)
        return tfc_error_set(err, TFC_ERR_DEVICE, "NCCL: the communicator was aborted earlier");
    ncclResult_t r =
        ncclAllReduce(buf, buf, (size_t)count, ncclFloat, ncclSum, n->comm, n->g->stream);
    if (r != ncclSuccess && r != ncclInProgress) return nccl_error(err, "ncclAllReduce", r);
    if (nccl_wait(n, "ncclAllReduce", stream_done, err)) return err->code;
    cudaError_t e = cudaStreamQuery(n->g->stream);
    return e == cudaSuccess ? TFC_OK
                            : tfc_error_set(err, TFC_ERR_DEVICE, "the stream of ncclAllReduce: %s",
                                            cudaGetErrorString(e));
}

extern "C" void tfc_gpu_nccl_close(tfc_gpu_nccl *n)
{
    if (!n) return;
    if (n->comm) {
        /* a clean end flushes pending work (finalize, polled); anything else aborts */
        ncclResult_t state = ncclCommFinalize(n->comm);
        double start = now_s();
        while (state == ncclInProgress && now_s() - start < n->timeout_s &&
               ncclCommGetAsyncError(n->comm, &state) == ncclSuccess && state == ncclInProgress) {
            struct timespec pause = {0, 100000};
            nanosleep(&pause, NULL);
        }
        if (state == ncclSuccess) ncclCommDestroy(n->comm);
        else ncclCommAbort(n->comm);
    }
    free(n);
}

extern "C" const char *tfc_gpu_nccl_version(void)
{
    static char v[32];
    int code = 0;
    ncclGetVersion(&code);
    /* NCCL_VERSION(X,Y,Z) = X*10000 + Y*100 + Z since 2.9 */
    snprintf(v, sizeof v, "%d.%d.%d", code / 10000, code / 100 % 100, code % 100);
    return v;
}
