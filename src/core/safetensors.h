/* Safetensors files (SPEC §5): an 8-byte little-endian header length N, N bytes of JSON
 * header {"name": {"dtype", "shape", "data_offsets"}, "__metadata__": {string: string}},
 * then the raw little-endian tensor bytes. Weights and state files both use it. The reader
 * validates every rule of the format before handing out a pointer; the writer emits the
 * same bytes as the reference implementation for the same tensor order. */
#ifndef TFC_CORE_SAFETENSORS_H
#define TFC_CORE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/tensor.h"

/* The reference implementation's bound on the JSON header. */
#define TFC_ST_MAX_HEADER 100000000u

/* ---- reading ---------------------------------------------------------------------------- */

typedef struct tfc_st_file tfc_st_file;

/* One tensor of an open file. Everything points into the tfc_st_file and lives until
 * tfc_st_close. `data` is NOT necessarily aligned to the element size (the format does not
 * promise it): copy with memcpy or convert with tfc_st_tensor_to_f32. Bytes are
 * little-endian, i.e. native on the hosts tfc builds for. */
typedef struct tfc_st_tensor {
    const char *name;   /* non-empty, valid UTF-8 */
    tfc_dtype dtype;
    tfc_shape shape;    /* ndim 0 is a scalar (one element) */
    int64_t numel;
    size_t nbytes;      /* numel * tfc_dtype_size(dtype) */
    size_t offset;      /* of the data within the data section (data_offsets[0]) */
    const void *data;   /* nbytes bytes */
} tfc_st_tensor;

/* Opens and validates a safetensors file. The header is read and checked first (against
 * the file's size), then the data section is read into memory, so a hostile file costs at
 * most its own size. Returns NULL on error: TFC_ERR_IO when the file cannot be read,
 * TFC_ERR_FORMAT when it breaks a rule (err->file is `path`, err->msg names the tensor and
 * the rule, e.g. "tensor 'dense/kernel': data_offsets [0, 100] hold 100 bytes but F32
 * [5, 6] needs 120"), TFC_ERR_NOMEM. Close with tfc_st_close. */
tfc_st_file *tfc_st_open(const char *path, tfc_error *err);

/* Same checks on a file already in memory. `buf` is referenced, not copied: it must stay
 * valid and unchanged until tfc_st_close. `name` stands for the file name in errors. */
tfc_st_file *tfc_st_parse(const void *buf, size_t len, const char *name, tfc_error *err);

/* Frees the file, its tensors' descriptions and (for tfc_st_open) its data. NULL is fine. */
void tfc_st_close(tfc_st_file *f);

/* Number of tensors (metadata is not a tensor). */
int tfc_st_count(const tfc_st_file *f);

/* The i-th tensor (0 <= i < count) in header order, which for files tfc writes is the
 * order they were added in. */
const tfc_st_tensor *tfc_st_tensor_at(const tfc_st_file *f, int i);

/* The tensor called `name`, or NULL (O(log n)). */
const tfc_st_tensor *tfc_st_find(const tfc_st_file *f, const char *name);

/* The __metadata__ value for `key`, or NULL when absent. */
const char *tfc_st_meta(const tfc_st_file *f, const char *key);

/* Metadata entries in header order: count, and the i-th key and value. */
int tfc_st_meta_count(const tfc_st_file *f);
void tfc_st_meta_at(const tfc_st_file *f, int i, const char **key, const char **value);

/* Size of the data section in bytes (the sum of every tensor's nbytes). */
size_t tfc_st_data_size(const tfc_st_file *f);

/* Converts the tensor's numel elements to float into `dst` (numel floats), whatever its
 * dtype: F16/BF16 widen exactly, F64 and 64/32-bit integers round, BOOL gives 0 or 1. */
void tfc_st_tensor_to_f32(const tfc_st_tensor *t, float *dst);

/* ---- writing ---------------------------------------------------------------------------- */

typedef struct tfc_st_writer tfc_st_writer;

/* An empty writer, or NULL when out of memory. */
tfc_st_writer *tfc_st_writer_create(void);

/* Adds a tensor. `data` (numel * dtype size bytes, little-endian) is REFERENCED, not
 * copied: it must stay valid and unchanged until the last save / to_buffer call. The name
 * is copied. Tensors are written in the order added, with contiguous offsets. Errors
 * (TFC_ERR_INTERNAL: empty or duplicate name, "__metadata__", name not UTF-8, unknown
 * dtype, ndim outside 0..TFC_MAX_DIMS, negative dimension, size overflow; TFC_ERR_NOMEM)
 * leave the writer as it was. */
tfc_status tfc_st_writer_add(tfc_st_writer *w, const char *name, tfc_dtype dtype,
                             const tfc_shape *shape, const void *data, tfc_error *err);

/* Sets a __metadata__ entry (both strings copied, UTF-8); setting a key again replaces
 * its value in place. Metadata is written in the order keys were first set. */
tfc_status tfc_st_writer_set_meta(tfc_st_writer *w, const char *key, const char *value,
                                  tfc_error *err);

/* Writes the file atomically (tfc_file_write_atomic: the old file survives any failure).
 * The header is compact JSON, __metadata__ first (omitted when empty), padded with spaces
 * to a multiple of 8 bytes as the reference implementation does. TFC_ERR_IO on failure. */
tfc_status tfc_st_writer_save(const tfc_st_writer *w, const char *path, tfc_error *err);

/* The same bytes in a new malloc'd buffer (*buf, freed by the caller; *len its size). */
tfc_status tfc_st_writer_to_buffer(const tfc_st_writer *w, void **buf, size_t *len,
                                   tfc_error *err);

void tfc_st_writer_free(tfc_st_writer *w);

#endif
