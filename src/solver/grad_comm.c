/* How a data-parallel run sums its gradient arena over the ranks: in place on the CPU, or
 * for a GPU either through host memory with the world's engine (`mpi`: any build, ordered
 * sums for `deterministic: true`, and two ranks may share one GPU) or on the device with
 * `nccl` (builds with NCCL; the default for GPU ranks, each on its own GPU, unless
 * deterministic). TFC_COMM=mpi
 * or =nccl overrides the choice (SPEC §4); =nccl also serves a one-rank run, for tests. */
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "solver/internal.h"

tfc_status tfc_grad_comm_open(tfc_grad_comm *g, tfc_comm *world, tfc_backend *be,
                              int deterministic, tfc_error *err)
{
    memset(g, 0, sizeof *g);
    g->world = world;
    g->be = be;
    g->ordered = deterministic;
    g->host = !strcmp(be->ops->name, "cpu");
    const char *want = getenv("TFC_COMM");
    if (!want || !*want || !strcmp(want, "auto")) want = NULL;
    else if (strcmp(want, "mpi") && strcmp(want, "nccl"))
        return tfc_error_set(err, TFC_ERR_USAGE, "TFC_COMM=%s: expected auto, mpi or nccl", want);
    int nccl = want ? !strcmp(want, "nccl") : !g->host && !deterministic && world->size > 1;
#ifdef TFC_HAVE_NCCL
    /* NCCL wants a GPU per rank: ranks sharing one (a test on a one-GPU machine) stage */
    if (!want && world->local_size > tfc_device_gpu_count()) nccl = 0;
#endif
    if (!nccl) return TFC_OK;
    if (want && (g->host || deterministic))
        return tfc_error_set(err, TFC_ERR_USAGE,
                             "TFC_COMM=nccl sums GPU buffers%s; use TFC_COMM=mpi",
                             g->host ? ", and this run is on the CPU"
                                     : ", in no fixed order, and this run is deterministic");
#ifdef TFC_HAVE_NCCL
    g->nccl = tfc_device_nccl_open(be, world, 60.0, err);
    return g->nccl ? TFC_OK : err->code;
#else
    if (want)
        return tfc_error_set(err, TFC_ERR_USAGE, "TFC_COMM=nccl: this build has no NCCL (its "
                                                 "feature line says NCCL ✗; see docs/gpu.md)");
    return TFC_OK; /* staged through the host */
#endif
}

const char *tfc_grad_comm_name(const tfc_grad_comm *g)
{
    return g->nccl ? "nccl" : g->world->ops->name;
}

tfc_status tfc_grad_comm_sum(tfc_grad_comm *g, float *grads, int64_t n, tfc_error *err)
{
#ifdef TFC_HAVE_NCCL
    if (g->nccl) return tfc_device_nccl_sum(g->nccl, grads, n, err);
#endif
    if (g->host) return g->world->ops->allreduce(g->world, grads, n, 0, g->ordered, err);
    size_t bytes = (size_t)n * sizeof(float);
    if (!g->staged && !(g->staged = malloc(bytes ? bytes : 1)))
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory staging the gradients");
    g->be->ops->download(g->be, g->staged, grads, bytes);
    tfc_status s = tfc_backend_status(g->be, err);
    if (!s) s = g->world->ops->allreduce(g->world, g->staged, n, 0, g->ordered, err);
    if (!s) g->be->ops->upload(g->be, grads, g->staged, bytes);
    return s;
}

void tfc_grad_comm_close(tfc_grad_comm *g)
{
#ifdef TFC_HAVE_NCCL
    tfc_device_nccl_close(g->nccl);
#endif
    g->nccl = NULL;
    free(g->staged);
    g->staged = NULL;
}
