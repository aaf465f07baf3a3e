/* Zip archives (PKWARE APPNOTE 6.3), read-only, as Keras 3's `.keras` files use them: the
 * end-of-central-directory record (found in the last 65557 bytes), its zip64 locator and
 * record, the central directory with zip64 extra fields, and each entry's local header.
 * Entries are stored (method 0) or deflated (method 8, through zlib); encrypted entries,
 * other methods and archives spanning several disks are refused. Every offset and length is
 * checked against the buffer before it is used, and an entry is only ever inflated into a
 * buffer of the size the central directory declares, bounded by the caller's limit (SPEC
 * §5a), with its CRC-32 checked. */
#ifndef TFC_CORE_ZIP_H
#define TFC_CORE_ZIP_H

#include <stddef.h>

#include "core/error.h"

typedef struct tfc_zip tfc_zip;

/* Parses the archive in memory. `buf` is referenced, not copied: it must stay valid and
 * unchanged until tfc_zip_close. `name` stands for the file name in errors (copied).
 * Checked here: the end records, that the central directory and every local header lie
 * inside the buffer (the entries' data before the central directory), that each local
 * header agrees with its central-directory entry (name, method, and CRC-32 and sizes unless
 * they follow the data in a descriptor), that names hold no NUL byte and no name appears
 * twice. Returns NULL on error: TFC_ERR_USAGE when `buf` is no zip archive at all (no end
 * record, and not the start of one cut short: the user named a file of the wrong kind, SPEC
 * §3), TFC_ERR_FORMAT when the archive is damaged or uses what tfc does not read (spanned
 * archives; err->file is `name`, err->msg names the entry, when there is one, and the
 * rule), TFC_ERR_NOMEM. Close with tfc_zip_close. */
tfc_zip *tfc_zip_parse(const void *buf, size_t len, const char *name, tfc_error *err);

/* Reads the file `path` whole (a missing path: TFC_ERR_USAGE; unreadable: TFC_ERR_IO), then
 * tfc_zip_parse with `path` as the name. The archive owns the bytes. */
tfc_zip *tfc_zip_open(const char *path, tfc_error *err);

/* Frees the archive (and for tfc_zip_open its bytes). NULL is fine. */
void tfc_zip_close(tfc_zip *z);

/* Number of entries, directories ("dir/") included. */
int tfc_zip_count(const tfc_zip *z);

/* The name of the i-th entry (0 <= i < count) in central-directory order, as stored (no
 * NUL inside; UTF-8 when the archive says so, else the archive's own code page). Valid
 * until tfc_zip_close. */
const char *tfc_zip_name_at(const tfc_zip *z, int i);

/* The index of the entry called exactly `entry`, or -1 (O(log n)). */
int tfc_zip_find(const tfc_zip *z, const char *entry);

/* Uncompresses entry i (0 <= i < count) into a new malloc'd buffer (*data, freed by the
 * caller) of *len bytes, followed by one NUL byte not counted in *len (text entries can be
 * used as C strings). The declared size is checked against `max_size` before anything is
 * allocated: larger is TFC_ERR_DATA (the message says both sizes). TFC_ERR_FORMAT, naming the
 * entry: encrypted, a method other than stored or deflate, a stored entry whose sizes
 * differ, a deflated one declaring more than 1032 times its compressed size (deflate's
 * limit: so a small archive never makes a large allocation, whatever the limit), deflate
 * data that is damaged, ends early, or inflates to more or fewer bytes than declared, a
 * CRC-32 mismatch. TFC_ERR_NOMEM. On error *data is NULL and *len 0. */
tfc_status tfc_zip_read(const tfc_zip *z, int i, size_t max_size, void **data, size_t *len,
                        tfc_error *err);

#endif
