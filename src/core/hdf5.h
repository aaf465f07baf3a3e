/* HDF5 files as h5py writes them (Keras 3's model.weights.h5, Keras 2's legacy .h5): a
 * bounded reader of the subset that holds groups, plain numeric datasets and string
 * attributes, written from the HDF5 File Format Specification without libhdf5, because the
 * input is untrusted (a downloaded model). The whole file is parsed and checked when it is
 * opened; every object is then a read-only description pointing into the file's bytes. */
#ifndef TFC_CORE_HDF5_H
#define TFC_CORE_HDF5_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/tensor.h"

/* What the reader understands. Superblocks 0 to 3 (a user block before the superblock is
 * found by searching offsets 0, 512, 1024, 2048, ...); groups as symbol tables (a v1 B-tree
 * of symbol nodes, names in a local heap) or as compact link messages (version 2 object
 * headers); object headers of version 1 and 2 with their continuation blocks; datasets with
 * contiguous or compact layout (an unwritten contiguous dataset reads as zeros) of
 * little-endian IEEE floats (2, 4, 8 bytes; bfloat16 too) or integers (1, 2, 4, 8 bytes,
 * signed or not); attributes of version 1 to 3, whose fixed- or variable-length strings
 * (the latter in global heap collections) are read. Refused with TFC_ERR_FORMAT and a
 * message naming the object: chunked or virtual layout (compression, h5py's
 * `chunks=`/`maxshape=`), big-endian data, datasets of another class (strings, compound,
 * enum such as h5py's bool, references, ...), rank above TFC_MAX_DIMS, dense link or
 * attribute storage (a fractal heap: more than 8 links or attributes under
 * libver='latest'), committed datatypes, and one object linked from two places. Soft and
 * external links are not followed and not listed. Checksums of version 2 structures are
 * not verified (every address and length is checked against the buffer instead). */

/* Bounds on a hostile file: objects, group depth, continuation blocks of one object
 * header. Work and memory are also bounded as a whole: parsing a file of N bytes reads or
 * allocates at most 16 N + 1 MiB bytes (plus the file itself and one zero-filled buffer of
 * at most N bytes for unwritten datasets). */
#define TFC_H5_MAX_OBJECTS 1000000
#define TFC_H5_MAX_DEPTH 64
#define TFC_H5_MAX_CONTINUATIONS 4096

typedef struct tfc_h5_file tfc_h5_file;

/* An attribute of an object. String attributes (a fixed- or variable-length string scalar
 * or array, any rank) give their strings; any other attribute (numbers, references, a
 * shared datatype) is listed by name with n_strings 0 and strings NULL. */
typedef struct tfc_h5_attr {
    const char *name;
    int n_strings;              /* string attributes: 1 for a scalar, else the element count
                                   (row-major); 0 for any other attribute */
    const char *const *strings; /* NUL-terminated; fixed-length strings cut at their first
                                   NUL and, space-padded ones, before trailing spaces */
} tfc_h5_attr;

/* A group or a dataset. Everything points into the tfc_h5_file and lives until
 * tfc_h5_close. */
typedef struct tfc_h5_object {
    const char *path;     /* "" for the root group, else "layers/dense/vars/0" (no leading
                             '/', names joined by '/') */
    int is_dataset;       /* 0: a group (dtype TFC_F32, shape ndim 0, numel 0, no data) */
    tfc_dtype dtype;      /* datasets: TFC_F32, TFC_F64, TFC_F16, TFC_BF16, TFC_I8, TFC_U8,
                             TFC_I16, TFC_U16, TFC_I32, TFC_U32, TFC_I64, TFC_U64 */
    tfc_shape shape;      /* datasets: ndim 0 = scalar (one element) */
    int64_t numel;
    size_t nbytes;        /* numel * tfc_dtype_size(dtype) */
    const void *data;     /* nbytes little-endian bytes inside the file buffer (or zeros for
                             an unwritten dataset); NULL when nbytes is 0; NOT necessarily
                             aligned to the element size: copy with memcpy */
    int n_attrs;
    const tfc_h5_attr *attrs; /* in the order the object header lists them */
} tfc_h5_object;

/* Parses and checks a whole HDF5 file already in memory. `buf` is referenced, not copied:
 * it must stay valid and unchanged until tfc_h5_close. `name` stands for the file in
 * errors. Returns NULL on error: TFC_ERR_USAGE when no HDF5 signature is found ("not an
 * HDF5 file"), TFC_ERR_FORMAT when a structure is damaged, unsupported or over a bound
 * (err->file is `name`, err->msg names the object path and the rule, e.g.
 * "'layers/dense/vars/0': layout: chunked storage is not supported"), TFC_ERR_NOMEM. */
tfc_h5_file *tfc_h5_parse(const void *buf, size_t len, const char *name, tfc_error *err);

/* Reads the file at `path` into memory, then tfc_h5_parse. Open or read failures give
 * TFC_ERR_USAGE (missing path, a directory) or TFC_ERR_IO, naming the path. */
tfc_h5_file *tfc_h5_open(const char *path, tfc_error *err);

/* Frees the file, its descriptions and (for tfc_h5_open) its bytes. NULL is fine. */
void tfc_h5_close(tfc_h5_file *f);

/* Number of objects, the root group included (so at least 1). */
int tfc_h5_count(const tfc_h5_file *f);

/* The i-th object (0 <= i < count): 0 is the root, then depth-first, a group before its
 * members, the members of a group in bytewise (strcmp) order of their names. */
const tfc_h5_object *tfc_h5_object_at(const tfc_h5_file *f, int i);

/* The object at `path` (as tfc_h5_object.path spells it: "" is the root), or NULL when
 * absent (O(log n)). */
const tfc_h5_object *tfc_h5_find(const tfc_h5_file *f, const char *path);

/* The first attribute of `o` called `name`, or NULL. */
const tfc_h5_attr *tfc_h5_attr_find(const tfc_h5_object *o, const char *name);

#endif
