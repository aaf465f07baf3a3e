/* File I/O that checkpoints and readers share: crash-safe atomic replacement of a file
 * (temporary file in the same directory, fsync, rename, fsync of the directory), whole-file
 * reads bounded by a size limit, mkdir -p, and a folder's advisory lock. Errors name the
 * path and the system's reason. */
#ifndef TFC_CORE_FILEIO_H
#define TFC_CORE_FILEIO_H

#include <stddef.h>

#include "core/error.h"

/* Writes the concatenation of `nchunks` buffers (chunks[i] holds sizes[i] bytes; a chunk of
 * size 0 may be NULL) to `path` atomically: the bytes go to a fresh temporary file
 * ".<name>.tmp-XXXXXX" in the same directory, which is fsynced, renamed over `path`, and
 * the directory is fsynced. Readers see either the old file or the complete new one, and a
 * crash, kill, full disk or file-size limit at any moment leaves the old file intact.
 * The new file keeps the old file's permission bits, or gets 0666 & ~umask when new.
 * Returns TFC_OK, or TFC_ERR_IO (err names the path, the step and strerror) after removing
 * the temporary file. Side effect: a SIGXFSZ disposition still at its default
 * (terminate) is set to SIG_IGN, process-wide, so that exceeding RLIMIT_FSIZE makes write()
 * fail with EFBIG and is reported instead of killing the process. */
tfc_status tfc_file_write_atomic(const char *path, const void *const *chunks, const size_t *sizes,
                                 int nchunks, tfc_error *err);

/* The status of a failed open (or read, for EISDIR) of a file the user named, from errno:
 * TFC_ERR_USAGE when nothing is there (ENOENT, ENOTDIR) or a folder is where a file belongs
 * (EISDIR), the user's mistake (SPEC §3: exit 2); TFC_ERR_IO for the machine's reasons
 * (permissions, I/O errors, too many open files). */
tfc_status tfc_open_status(int e);

/* Reads the whole of `path` into a new buffer (*buf, freed by the caller with free()) and
 * stores its size in *len. The buffer has one extra NUL byte after the data so text files
 * can be used as C strings. Files larger than `max_bytes` are refused before anything of
 * their size is allocated (TFC_ERR_DATA, saying both sizes); a missing path or a directory
 * gives tfc_open_status's TFC_ERR_USAGE, other open/read failures TFC_ERR_IO. On error *buf
 * is NULL and *len 0. */
tfc_status tfc_file_read_all(const char *path, size_t max_bytes, char **buf, size_t *len,
                             tfc_error *err);

/* The same for many small files: no fstat (glibc's fstat is newfstatat(fd, "", ...): 6% of
 * the samples of a pipeline decoding 2 KB JPEGs, against 8% for the open), the buffer
 * starts at `guess` bytes (at least 4096) and doubles as needed; a directory fails at its
 * read (EISDIR). Larger-than-limit files fail once max_bytes have been read. */
tfc_status tfc_file_read_guess(const char *path, size_t max_bytes, size_t guess, char **buf,
                               size_t *len, tfc_error *err);

/* Creates `path` and any missing parents (mode 0777 & ~umask), like mkdir -p. An existing
 * directory is fine; an existing non-directory is TFC_ERR_IO. */
tfc_status tfc_mkdir_p(const char *path, tfc_error *err);

/* Takes the advisory lock of the existing folder `dir`: flock(LOCK_EX | LOCK_NB) on
 * DIR/.lock (created when missing, never removed), which then holds this process's pid.
 * *fd keeps the lock until it is closed or the process ends (a kill -9 too). Held by another
 * process: TFC_ERR_USAGE "DIR is in use by process PID"; other failures TFC_ERR_IO. flock is
 * local to a machine: on NFS (Linux maps it to fcntl locks, which need the server's lock
 * manager) two machines may both get it or both be refused; no two processes of one
 * machine can. */
tfc_status tfc_dir_lock(const char *dir, int *fd, tfc_error *err);

#endif
