/* libFuzzer target for the HDF5 reader: parses the input as a whole file, walks every
 * object (find by path, touch every byte of its data) and every attribute's strings. A
 * rejection must be a format error (damaged), NOMEM, or USAGE (no signature), with a
 * message. */
#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "core/hdf5.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_h5_file *f = tfc_h5_parse(data, size, "fuzz.h5", &err);
    if (!f) {
        TFC_ASSERT(err.code == TFC_ERR_FORMAT || err.code == TFC_ERR_NOMEM ||
                   err.code == TFC_ERR_USAGE);
        TFC_ASSERT(err.msg[0] != 0);
        return 0;
    }
    TFC_ASSERT(tfc_h5_count(f) >= 1 && tfc_h5_object_at(f, 0)->path[0] == 0);
    unsigned sum = 0;
    for (int i = 0; i < tfc_h5_count(f); i++) {
        const tfc_h5_object *o = tfc_h5_object_at(f, i);
        TFC_ASSERT(tfc_h5_find(f, o->path) == o);
        if (o->is_dataset) {
            int64_t n = 1;
            for (int d = 0; d < o->shape.ndim; d++) n *= o->shape.dim[d];
            TFC_ASSERT(o->numel == n && o->nbytes == (size_t)n * tfc_dtype_size(o->dtype));
            TFC_ASSERT((o->data == NULL) == (o->nbytes == 0));
            for (size_t b = 0; b < o->nbytes; b++) sum += ((const uint8_t *)o->data)[b];
        }
        for (int a = 0; a < o->n_attrs; a++) {
            const tfc_h5_attr *at = &o->attrs[a];
            TFC_ASSERT(tfc_h5_attr_find(o, at->name) != NULL);
            TFC_ASSERT(at->n_strings >= 0 && (at->n_strings == 0 || at->strings != NULL));
            for (int s = 0; s < at->n_strings; s++) sum += (unsigned)strlen(at->strings[s]);
        }
    }
    (void)sum;
    tfc_h5_close(f);
    return 0;
}
