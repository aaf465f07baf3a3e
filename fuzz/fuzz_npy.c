/* libFuzzer target for the .npy reader: parses the input as a whole file and touches every
 * byte of an accepted array, whose size must match dtype × shape. */
#include <stdint.h>
#include <stdlib.h>

#include "data/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_tensor t;
    if (tfc_npy_parse(data, size, "fuzz.npy", &t, &err) == TFC_OK) {
        int64_t n = tfc_shape_numel(&t.shape);
        TFC_ASSERT(n >= 0 && (size_t)n * tfc_dtype_size(t.dtype) <= size);
        volatile unsigned sum = 0;
        for (int64_t i = 0; i < n * (int64_t)tfc_dtype_size(t.dtype); i++)
            sum += ((const unsigned char *)t.data)[i];
        free(t.data);
    } else {
        TFC_ASSERT(err.code != TFC_OK && err.msg[0]);
    }
    return 0;
}
