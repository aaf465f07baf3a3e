/* Atomic file replacement, bounded whole-file reads and mkdir -p (see fileio.h). The atomic
 * write is the classic sequence: mkstemp next to the target, write, fsync, close, rename,
 * fsync the directory; every failure removes the temporary file and leaves the target. */
#include "core/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static tfc_status io_error(tfc_error *err, const char *path, const char *what, int e)
{
    return tfc_error_at(err, TFC_ERR_IO, path, 0, 0, NULL, NULL, "%s: %s", what, strerror(e));
}

tfc_status tfc_open_status(int e)
{
    return e == ENOENT || e == ENOTDIR || e == EISDIR ? TFC_ERR_USAGE : TFC_ERR_IO;
}

/* A failed open (or a directory's read) of `path`, with tfc_open_status's code. */
static tfc_status open_error(tfc_error *err, const char *path, const char *what, int e)
{
    return tfc_error_at(err, tfc_open_status(e), path, 0, 0, NULL, NULL, "%s: %s", what,
                        strerror(e));
}

/* Splits `path` into its directory ("." when it has none) and its last component. */
static void split_path(const char *path, char *dir, size_t dsize, const char **base)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(dir, dsize, ".");
        *base = path;
    } else if (slash == path) {
        snprintf(dir, dsize, "/");
        *base = slash + 1;
    } else {
        snprintf(dir, dsize, "%.*s", (int)(slash - path), path);
        *base = slash + 1;
    }
}

/* The process umask without changing it (umask(2) can only read by writing, which races
 * with other threads creating files): Linux shows it in /proc/self/status. */
static mode_t current_umask(void)
{
    mode_t mask = 022;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return mask;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        unsigned m;
        if (sscanf(line, "Umask: %o", &m) == 1) {
            mask = (mode_t)(m & 0777);
            break;
        }
    }
    fclose(f);
    return mask;
}

/* Exceeding RLIMIT_FSIZE raises SIGXFSZ, whose default action kills the process before
 * write() can report EFBIG. Ignoring it turns the limit into an ordinary write error. The
 * signal is process-directed, so blocking it in this thread alone would not be enough. */
static void ignore_sigxfsz(void)
{
    struct sigaction old;
    if (sigaction(SIGXFSZ, NULL, &old) == 0 && old.sa_handler == SIG_DFL &&
        !(old.sa_flags & SA_SIGINFO)) {
        struct sigaction ign;
        memset(&ign, 0, sizeof ign);
        ign.sa_handler = SIG_IGN;
        sigemptyset(&ign.sa_mask);
        sigaction(SIGXFSZ, &ign, NULL);
    }
}

static int write_full(int fd, const void *data, size_t size)
{
    const char *p = data;
    while (size > 0) {
        size_t chunk = size > ((size_t)1 << 30) ? ((size_t)1 << 30) : size;
        ssize_t n = write(fd, p, chunk);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (n == 0) {
            errno = EIO;
            return -1;
        }
        p += n;
        size -= (size_t)n;
    }
    return 0;
}

tfc_status tfc_file_write_atomic(const char *path, const void *const *chunks, const size_t *sizes,
                                 int nchunks, tfc_error *err)
{
    char dir[PATH_MAX], tmp[PATH_MAX];
    const char *base;
    if (!path || !*path) return tfc_error_set(err, TFC_ERR_IO, "cannot write a file with an empty name");
    if (strlen(path) + 16 >= sizeof tmp)
        return tfc_error_at(err, TFC_ERR_IO, path, 0, 0, NULL, NULL, "path is too long");
    split_path(path, dir, sizeof dir, &base);
    if (!*base)
        return tfc_error_at(err, TFC_ERR_IO, path, 0, 0, NULL, NULL, "path names a directory");
    /* Same directory, hidden name: "dir/.name.tmp-XXXXXX". */
    snprintf(tmp, sizeof tmp, "%.*s.%s.tmp-XXXXXX", (int)(base - path), path, base);

    ignore_sigxfsz();
    struct stat old;
    mode_t mode = stat(path, &old) == 0 && S_ISREG(old.st_mode) ? (old.st_mode & 07777)
                                                                 : (0666 & ~current_umask());

    int fd = mkstemp(tmp);
    if (fd < 0) return io_error(err, path, "cannot create a temporary file in its directory", errno);

    const char *step = NULL;
    int e = 0;
    if (fchmod(fd, mode) != 0) {
        step = "cannot set the permissions of the temporary file";
        e = errno;
    }
    for (int i = 0; !step && i < nchunks; i++) {
        if (sizes[i] && write_full(fd, chunks[i], sizes[i]) != 0) {
            step = "cannot write the temporary file";
            e = errno;
        }
    }
    if (!step && fsync(fd) != 0) {
        step = "cannot flush the temporary file to disk (fsync)";
        e = errno;
    }
    /* close() can report delayed write errors (NFS, quotas): it counts as a failure too. */
    if (close(fd) != 0 && !step) {
        step = "cannot close the temporary file";
        e = errno;
    }
    if (!step && rename(tmp, path) != 0) {
        step = "cannot rename the temporary file over it";
        e = errno;
    }
    if (step) {
        unlink(tmp);
        return io_error(err, path, step, e);
    }

    /* The rename is durable only once the directory entry is: fsync the directory. Some
     * file systems cannot fsync directories (EINVAL); the data itself is already safe. */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return io_error(err, path, "cannot open its directory to fsync it", errno);
    if (fsync(dfd) != 0 && errno != EINVAL && errno != ENOTSUP) {
        e = errno;
        close(dfd);
        return io_error(err, path, "cannot flush its directory to disk (fsync)", e);
    }
    close(dfd);
    return TFC_OK;
}

/* Reads fd to its end into a buffer of `cap` bytes (plus the NUL) grown as needed, never
 * past max_bytes; closes fd. */
static tfc_status read_to_end(int fd, const char *path, size_t max_bytes, size_t cap,
                              char **buf, size_t *len, tfc_error *err)
{
    if (cap > max_bytes) cap = max_bytes;
    char *data = malloc(cap + 1);
    if (!data) {
        close(fd);
        return tfc_error_at(err, TFC_ERR_NOMEM, path, 0, 0, NULL, NULL,
                            "cannot allocate %zu bytes to read it", cap + 1);
    }
    size_t used = 0;
    tfc_status st;
    for (;;) {
        /* A full buffer reads one probe byte before growing, so a file that is exactly the
         * expected size (the usual case) needs no reallocation. */
        char probe;
        int probing = used == cap;
        ssize_t n = read(fd, probing ? &probe : data + used, probing ? 1 : cap - used);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            st = io_error(err, path, "cannot read", errno);
            goto fail;
        }
        if (n == 0) break;
        if (!probing) {
            used += (size_t)n;
            continue;
        }
        if (cap >= max_bytes) {
            st = tfc_error_at(err, TFC_ERR_DATA, path, 0, 0, NULL, NULL,
                              "file is more than the limit of %zu bytes", max_bytes);
            goto fail;
        }
        size_t ncap = cap < 4096 ? 8192 : cap > max_bytes / 2 ? max_bytes : cap * 2;
        if (ncap > max_bytes) ncap = max_bytes;
        char *grown = realloc(data, ncap + 1);
        if (!grown) {
            st = tfc_error_at(err, TFC_ERR_NOMEM, path, 0, 0, NULL, NULL,
                              "cannot allocate %zu bytes to read it", ncap + 1);
            goto fail;
        }
        data = grown;
        cap = ncap;
        data[used++] = probe;
    }
    close(fd);
    if (used + 4096 < cap) { /* a generous guess: give the rest back */
        char *fit = realloc(data, used + 1);
        if (fit) data = fit;
    }
    data[used] = 0;
    *buf = data;
    *len = used;
    return TFC_OK;

fail:
    free(data);
    close(fd);
    return st;
}

tfc_status tfc_file_read_all(const char *path, size_t max_bytes, char **buf, size_t *len,
                             tfc_error *err)
{
    *buf = NULL;
    *len = 0;
    if (max_bytes > SIZE_MAX / 2) max_bytes = SIZE_MAX / 2; /* so cap + 1 never wraps */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return open_error(err, path, "cannot open", errno);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return io_error(err, path, "cannot stat", e);
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return open_error(err, path, "cannot read", EISDIR);
    }
    if (S_ISREG(st.st_mode) && (uintmax_t)st.st_size > max_bytes) {
        close(fd);
        return tfc_error_at(err, TFC_ERR_DATA, path, 0, 0, NULL, NULL,
                            "file is %lld bytes, more than the limit of %zu bytes",
                            (long long)st.st_size, max_bytes);
    }
    /* Regular files are read at their size (a file growing meanwhile is read up to the
     * limit); pipes and devices grow the buffer by doubling, never past the limit. */
    return read_to_end(fd, path, max_bytes, S_ISREG(st.st_mode) ? (size_t)st.st_size : 65536,
                       buf, len, err);
}

tfc_status tfc_file_read_guess(const char *path, size_t max_bytes, size_t guess, char **buf,
                               size_t *len, tfc_error *err)
{
    *buf = NULL;
    *len = 0;
    if (max_bytes > SIZE_MAX / 2) max_bytes = SIZE_MAX / 2;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return open_error(err, path, "cannot open", errno);
    /* a directory opens, and its read fails with EISDIR */
    return read_to_end(fd, path, max_bytes, guess < 4096 ? 4096 : guess, buf, len, err);
}

tfc_status tfc_mkdir_p(const char *path, tfc_error *err)
{
    char buf[PATH_MAX];
    if (!path || !*path) return tfc_error_set(err, TFC_ERR_IO, "cannot create a directory with an empty name");
    if (strlen(path) >= sizeof buf)
        return tfc_error_at(err, TFC_ERR_IO, path, 0, 0, NULL, NULL, "path is too long");
    snprintf(buf, sizeof buf, "%s", path);
    size_t n = strlen(buf);
    /* Creates each prefix ending before a '/', then the whole path. */
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != 0) continue;
        if (buf[i - 1] == '/') continue; /* "a//b" */
        char saved = buf[i];
        buf[i] = 0;
        if (mkdir(buf, 0777) != 0) {
            /* An existing directory is fine whatever mkdir said (EEXIST, or EACCES/EROFS
             * on a parent we may not write). */
            int e = errno;
            struct stat st;
            if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) {
                char what[PATH_MAX + 64];
                snprintf(what, sizeof what, "cannot create directory %s", buf);
                return io_error(err, path, what, e == EEXIST ? ENOTDIR : e);
            }
        }
        buf[i] = saved;
    }
    return TFC_OK;
}

tfc_status tfc_dir_lock(const char *dir, int *fd, tfc_error *err)
{
    char path[PATH_MAX];
    *fd = -1;
    if (snprintf(path, sizeof path, "%s/.lock", dir) >= (int)sizeof path)
        return tfc_error_set(err, TFC_ERR_IO, "%s: path too long", dir);
    int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (f < 0)
        return tfc_error_set(err, TFC_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    if (flock(f, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char pid[32] = "";
        ssize_t n = e == EWOULDBLOCK ? pread(f, pid, sizeof pid - 1, 0) : -1;
        close(f);
        if (e != EWOULDBLOCK)
            return tfc_error_set(err, TFC_ERR_IO, "cannot lock %s: %s", path, strerror(e));
        pid[n > 0 ? n : 0] = 0;
        pid[strcspn(pid, "\n")] = 0;
        return tfc_error_set(err, TFC_ERR_USAGE, "%s is in use by process %s (it holds %s)",
                             dir, pid[0] ? pid : "(pid not written yet)", path);
    }
    char line[32];
    int len = snprintf(line, sizeof line, "%ld\n", (long)getpid());
    if (ftruncate(f, 0) != 0 || pwrite(f, line, (size_t)len, 0) != len) {
        int e = errno;
        close(f);
        return tfc_error_set(err, TFC_ERR_IO, "cannot write %s: %s", path, strerror(e));
    }
    *fd = f;
    return TFC_OK;
}
