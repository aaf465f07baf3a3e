/* The communicator engines: `self` (one process) and, in builds with TFC_HAVE_MPI, `mpi`
 * (Open MPI or any MPI-3 library). Ordered sums gather every rank's buffer and add them in
 * rank order, so two runs with the same rank count are bit-identical; unordered ones are
 * MPI_Allreduce. */
#include "comm/comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TFC_HAVE_MPI
#include <mpi.h>
#endif

static int env_int(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : 0;
}

int tfc_comm_launched_size(void)
{
    static const char *const names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                                        "WORLD_SIZE"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        int n = env_int(names[i]);
        if (n > 0) return n;
    }
    return 1;
}

/* ---- self ------------------------------------------------------------------------------- */

static tfc_status self_allreduce(tfc_comm *c, void *buf, int64_t n, int f64, int ordered,
                                 tfc_error *err)
{
    (void)c, (void)buf, (void)n, (void)f64, (void)ordered, (void)err;
    return TFC_OK;
}

static tfc_status self_broadcast(tfc_comm *c, void *buf, size_t bytes, tfc_error *err)
{
    (void)c, (void)buf, (void)bytes, (void)err;
    return TFC_OK;
}

static void self_abort(tfc_comm *c, int code)
{
    (void)c;
    exit(code);
}

static const tfc_comm_ops self_ops = {"self", self_allreduce, self_broadcast, self_abort};

/* ---- mpi -------------------------------------------------------------------------------- */

#ifdef TFC_HAVE_MPI
static tfc_status mpi_failed(tfc_error *err, const char *what, int rc)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return tfc_error_set(err, TFC_ERR_DEVICE, "%s failed: %.*s", what, len, msg);
}

/* MPI counts are ints: large buffers go in chunks. */
#define MPI_CHUNK ((int64_t)1 << 28)

static tfc_status mpi_allreduce(tfc_comm *c, void *buf, int64_t n, int f64, int ordered,
                                tfc_error *err)
{
    size_t width = f64 ? 8 : 4;
    MPI_Datatype type = f64 ? MPI_DOUBLE : MPI_FLOAT;
    for (int64_t at = 0; at < n; at += MPI_CHUNK) {
        int k = (int)(n - at < MPI_CHUNK ? n - at : MPI_CHUNK);
        char *part = (char *)buf + (size_t)at * width;
        if (!ordered) {
            int rc = MPI_Allreduce(MPI_IN_PLACE, part, k, type, MPI_SUM, MPI_COMM_WORLD);
            if (rc != MPI_SUCCESS) return mpi_failed(err, "MPI_Allreduce", rc);
            continue;
        }
        size_t need = (size_t)k * width * (size_t)c->size;
        if (need > c->scratch_bytes) {
            void *grown = realloc(c->scratch, need);
            if (!grown)
                return tfc_error_set(err, TFC_ERR_NOMEM, "cannot allocate %zu bytes to reduce "
                                                         "gradients", need);
            c->scratch = grown;
            c->scratch_bytes = need;
        }
        int rc = MPI_Allgather(part, k, type, c->scratch, k, type, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_failed(err, "MPI_Allgather", rc);
        if (f64) {
            const double *all = c->scratch;
            double *out = (double *)part;
            for (int i = 0; i < k; i++) {
                double s = all[i];
                for (int r = 1; r < c->size; r++) s += all[(size_t)r * (size_t)k + (size_t)i];
                out[i] = s;
            }
        } else {
            const float *all = c->scratch;
            float *out = (float *)part;
            for (int i = 0; i < k; i++) {
                float s = all[i];
                for (int r = 1; r < c->size; r++) s += all[(size_t)r * (size_t)k + (size_t)i];
                out[i] = s;
            }
        }
    }
    return TFC_OK;
}

static tfc_status mpi_broadcast(tfc_comm *c, void *buf, size_t bytes, tfc_error *err)
{
    (void)c;
    for (size_t at = 0; at < bytes; at += (size_t)MPI_CHUNK) {
        int k = (int)(bytes - at < (size_t)MPI_CHUNK ? bytes - at : (size_t)MPI_CHUNK);
        int rc = MPI_Bcast((char *)buf + at, k, MPI_BYTE, 0, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_failed(err, "MPI_Bcast", rc);
    }
    return TFC_OK;
}

static void mpi_abort(tfc_comm *c, int code)
{
    (void)c;
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

static const tfc_comm_ops mpi_ops = {"mpi", mpi_allreduce, mpi_broadcast, mpi_abort};

static void mpi_finish(void)
{
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
}

static tfc_status mpi_open(tfc_comm *c, tfc_error *err)
{
    int provided = 0;
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return mpi_failed(err, "MPI_Init_thread", rc);
    atexit(mpi_finish);
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &c->local_rank);
    MPI_Comm_size(local, &c->local_size);
    MPI_Comm_free(&local);
    c->ops = &mpi_ops;
    return TFC_OK;
}
#endif

const char *tfc_comm_engines(void)
{
#if defined(TFC_HAVE_MPI) && defined(TFC_HAVE_NCCL)
    return "self, mpi, nccl";
#elif defined(TFC_HAVE_MPI)
    return "self, mpi";
#elif defined(TFC_HAVE_NCCL)
    return "self, nccl";
#else
    return "self";
#endif
}

tfc_comm *tfc_comm_world(tfc_error *err)
{
    static tfc_comm world;
    if (world.ops) return &world;
    world.rank = 0, world.size = 1, world.local_rank = 0, world.local_size = 1;
    if (tfc_comm_launched_size() > 1) {
#ifdef TFC_HAVE_MPI
        if (mpi_open(&world, err)) return NULL;
        return &world;
#else
        tfc_error_set(err, TFC_ERR_DEVICE,
                      "launched as one of %d ranks, but this tfc was built without MPI",
                      tfc_comm_launched_size());
        tfc_error_hint(err, "install libopenmpi-dev and rebuild (make MPI=1)");
        return NULL;
#endif
    }
    world.ops = &self_ops;
    return &world;
}

void tfc_comm_abort(tfc_comm *c, int code) { c->ops->abort(c, code); }

int tfc_comm_any(tfc_comm *c, int flag)
{
    if (c->size == 1) return flag != 0;
    double v = flag != 0;
    tfc_error err;
    tfc_error_clear(&err);
    if (c->ops->allreduce(c, &v, 1, 1, 0, &err)) tfc_comm_abort(c, 1);
    return v > 0;
}
