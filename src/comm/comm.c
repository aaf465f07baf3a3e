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

static tfc_status self_gather(tfc_comm *c, const void *buf, size_t bytes, void **out,
                              size_t *out_bytes, tfc_error *err)
{
    (void)c;
    out[0] = malloc(bytes ? bytes : 1);
    if (!out[0]) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    memcpy(out[0], buf, bytes);
    out_bytes[0] = bytes;
    return TFC_OK;
}

static void self_abort(tfc_comm *c, int code)
{
    (void)c;
    exit(code);
}

static const tfc_comm_ops self_ops = {"self", self_allreduce, self_broadcast, self_gather,
                                      self_abort};

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

static tfc_status mpi_gather(tfc_comm *c, const void *buf, size_t bytes, void **out,
                             size_t *out_bytes, tfc_error *err)
{
    if (bytes > (size_t)INT32_MAX)
        return tfc_error_set(err, TFC_ERR_INTERNAL, "gather: %zu bytes is too many", bytes);
    int n = (int)bytes, *sizes = NULL, *at = NULL;
    char *all = NULL;
    if (c->rank == 0) {
        sizes = calloc((size_t)c->size, sizeof *sizes);
        at = calloc((size_t)c->size, sizeof *at);
    }
    tfc_status s = TFC_OK;
    int rc = MPI_Gather(&n, 1, MPI_INT, sizes, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) s = mpi_failed(err, "MPI_Gather", rc);
    int64_t total = 0;
    if (!s && c->rank == 0) {
        for (int r = 0; r < c->size; r++) {
            at[r] = (int)total;
            total += sizes[r];
        }
        all = total > INT32_MAX ? NULL : malloc((size_t)total + 1);
        if (!all) s = tfc_error_set(err, TFC_ERR_NOMEM, "gather: cannot hold %lld bytes",
                                    (long long)total);
    }
    /* every rank joins the second call even after rank 0 failed to allocate (it then
     * receives into nothing and reports), so no rank waits forever */
    if (c->rank == 0 && s) {
        free(sizes);
        sizes = calloc((size_t)c->size, sizeof *sizes);
    }
    rc = MPI_Gatherv(buf, n, MPI_BYTE, all, sizes, at, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (!s && rc != MPI_SUCCESS) s = mpi_failed(err, "MPI_Gatherv", rc);
    for (int r = 0; !s && c->rank == 0 && r < c->size; r++) {
        out[r] = malloc(sizes[r] ? (size_t)sizes[r] : 1);
        if (!out[r]) {
            while (r-- > 0) free(out[r]);
            s = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
            break;
        }
        memcpy(out[r], all + at[r], (size_t)sizes[r]);
        out_bytes[r] = (size_t)sizes[r];
    }
    free(all);
    free(sizes);
    free(at);
    return s;
}

static void mpi_abort(tfc_comm *c, int code)
{
    (void)c;
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

static const tfc_comm_ops mpi_ops = {"mpi", mpi_allreduce, mpi_broadcast, mpi_gather, mpi_abort};

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
