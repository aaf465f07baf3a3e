/* Ranks of a data-parallel run and the collectives between them: a small engine table beside
 * the backend op table. `self` is one process (no MPI initialised, nothing to link at run time
 * beyond the library); `mpi` reduces host buffers with MPI (device buffers are staged through
 * the host by the caller). A process is one rank of N when a launcher (mpirun, srun) says so. */
#ifndef TFC_COMM_COMM_H
#define TFC_COMM_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct tfc_comm tfc_comm;

typedef struct tfc_comm_ops {
    const char *name; /* "self" or "mpi" */
    /* Sums n values (float32, or float64 when f64) of every rank into buf on every rank. With
     * `ordered` the sum is taken in rank order ((b0 + b1) + b2 ...), so the result does not
     * depend on the library's reduction tree. */
    tfc_status (*allreduce)(tfc_comm *c, void *buf, int64_t n, int f64, int ordered,
                            tfc_error *err);
    /* Rank 0's `bytes` at buf into buf on every rank. */
    tfc_status (*broadcast)(tfc_comm *c, void *buf, size_t bytes, tfc_error *err);
    /* Every rank's `bytes` at buf (sizes may differ, below 2 GiB) to rank 0: there out[r] gets
     * a malloc'd copy of rank r's and out_bytes[r] its size, for r < size (the caller frees
     * them); other ranks' out and out_bytes are not touched (may be NULL). */
    tfc_status (*gather)(tfc_comm *c, const void *buf, size_t bytes, void **out,
                         size_t *out_bytes, tfc_error *err);
    /* Ends every rank of the job with `code` (a rank that cannot go on). */
    void (*abort)(tfc_comm *c, int code);
} tfc_comm_ops;

struct tfc_comm {
    const tfc_comm_ops *ops;
    int rank, size;             /* this process and the job's process count */
    int local_rank, local_size; /* the same on this machine (picks gpu:<local_rank>) */
    void *scratch;              /* the mpi engine's gather buffer for ordered sums */
    size_t scratch_bytes;
};

/* The job's size as the launcher's environment announces it (OMPI_COMM_WORLD_SIZE, PMI_SIZE,
 * PMIX_SIZE through Open MPI, WORLD_SIZE), or 1 — without initialising anything, so a
 * configuration can be checked against it before any rank talks to another. */
int tfc_comm_launched_size(void);

/* The process's communicator, opened on the first call: `self` for a job of one, else `mpi`
 * (MPI_Init; MPI_Finalize at exit). A job of several ranks in a build without MPI is
 * TFC_ERR_DEVICE naming the fix. Later calls return the same one. */
tfc_comm *tfc_comm_world(tfc_error *err);

/* Ends the job from any rank with `code`: MPI_Abort for several ranks, exit otherwise. */
void tfc_comm_abort(tfc_comm *c, int code);

/* 1 on every rank when `flag` is non-zero on any (a stop request, a failure). */
int tfc_comm_any(tfc_comm *c, int flag);

/* The engines this build has, as "self" or "self, mpi" (for the feature line). */
const char *tfc_comm_engines(void);

#endif
