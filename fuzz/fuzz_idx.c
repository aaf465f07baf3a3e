/* libFuzzer target for the IDX reader: parses the input as an IDX file (gzip-compressed when
 * it starts with the gzip magic), then touches every value of what it accepted and checks
 * the size matches the shape. */
#include <stdint.h>
#include <stdlib.h>

#include "data/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_tensor t;
    if (tfc_idx_parse(data, size, "fuzz.idx", &t, &err) == TFC_OK) {
        int64_t n = tfc_shape_numel(&t.shape);
        TFC_ASSERT(n >= 0);
        size_t bytes = (size_t)n * tfc_dtype_size(t.dtype);
        volatile unsigned sum = 0;
        for (size_t i = 0; i < bytes; i++) sum += ((const unsigned char *)t.data)[i];
        free(t.data);
    } else {
        TFC_ASSERT(err.code != TFC_OK && err.msg[0]);
    }
    return 0;
}
