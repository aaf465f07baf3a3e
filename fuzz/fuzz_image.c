/* libFuzzer target for PNG and JPEG decoding: the input is an image file; the channel count
 * requested cycles with the input's length. Decoders come from one pool kept across inputs
 * (so a decoder reused after a failure is exercised) or, for every other length, are made
 * afresh. Limits are lowered to 4096 per side and 2^22 pixels so each run stays fast;
 * accepted pixels are touched and their count checked. */
#include <stdint.h>
#include <stdlib.h>

#include "data/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int channels[5] = {0, 1, 3, 4, 2};
    static tfc_image_pool *pool;
    if (!pool) pool = tfc_image_pool_new();
    tfc_error err;
    tfc_error_clear(&err);
    tfc_image_limits lim = {4096, 1 << 22};
    tfc_tensor t;
    int ch = channels[size % 5];
    if (tfc_image_decode_with(size & 2 ? pool : NULL, data, size, "fuzz.img", ch, &lim, &t,
                              &err) == TFC_OK) {
        TFC_ASSERT(t.dtype == TFC_U8 && t.shape.ndim == 3);
        TFC_ASSERT(t.shape.dim[0] * t.shape.dim[1] <= (1 << 22));
        TFC_ASSERT(ch == 0 || t.shape.dim[2] == ch);
        int64_t n = tfc_shape_numel(&t.shape);
        volatile unsigned sum = 0;
        for (int64_t i = 0; i < n; i++) sum += ((const unsigned char *)t.data)[i];
        free(t.data);
    } else {
        TFC_ASSERT(err.code != TFC_OK && err.msg[0]);
    }
    return 0;
}
