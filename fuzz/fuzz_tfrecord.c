/* libFuzzer target for the tfrecord source: the first input byte picks how the records are
 * read (features as raw uint8 bytes, a float32 list, an int32 sequence, or a PNG/JPEG image;
 * labels or none; num_classes; skipping bad records), the rest is the file. Opening walks
 * its framing; every record of an accepted file is then read, which parses its
 * tf.train.Example, and must succeed or fail with an error. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    unsigned o = data[0];
    static const tfr_feature feats[4] = {
        {.key = "image", .dtype = TFC_U8, .shape = {1, {-1}}},
        {.key = "pixels", .dtype = TFC_F32, .shape = {2, {4, -1}}},
        {.key = "tokens", .dtype = TFC_I32, .shape = {1, {-1}}},
        {.key = "image", .dtype = TFC_U8, .shape = {3, {-1, -1, 1}}, .encoded = TFR_ENCODED_PNG},
    };
    tfrecord_args a = {.type = "tfrecord", .feat = feats[o & 3],
                       .lab = {.key = "label", .dtype = (o & 16) ? TFC_F32 : TFC_I32},
                       .has_labels = (o >> 2) & 1, .on_error = (o >> 3) & 1,
                       .num_classes = (o & 32) ? 5 : 0};
    if ((o & 0xc0) == 0xc0) a.feat.encoded = TFR_ENCODED_JPEG, a.feat.shape.v[2] = 3;
    tfc_error err;
    tfc_error_clear(&err);
    source *s;
    if (tfc_source_tfrecord_mem(&s, &a, data + 1, size - 1, "fuzz.tfrecord", &err) == TFC_OK) {
        for (int64_t i = 0; i < s->count; i++) {
            tfc_element e = {0};
            tfc_error_clear(&err);
            if (s->ops->get(s, i, &e, &err) != TFC_OK) TFC_ASSERT(err.code != TFC_OK);
            if (s->ops->label) (void)s->ops->label(s, i);
            for (int c = 0; c < TFC_COMP_COUNT; c++) free(e.comp[c].data);
        }
        tfc_source_free(s);
    } else {
        TFC_ASSERT(err.code != TFC_OK);
    }
    return 0;
}
