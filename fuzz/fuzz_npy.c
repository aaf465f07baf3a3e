/* libFuzzer target for the .npy reader: parses the input as a whole file and touches every
 * byte of an accepted array, whose size must match dtype × shape. Inputs of a length divisible
 * by 3 also read the array as a time series (`timeseries:`, settings from the last byte; the
 * array itself as the labels when its bit is set): every window (the first 4096) has the
 * sequence length and the row shape. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/internal.h"

static void windows(const tfc_tensor *t, unsigned b)
{
    tfc_error err;
    tfc_error_clear(&err);
    size_t bytes = (size_t)tfc_shape_numel(&t->shape) * tfc_dtype_size(t->dtype);
    tfc_tensor f = *t, l = *t;
    f.data = malloc(bytes + 1);
    l.data = malloc(bytes + 1);
    if (!f.data || !l.data) {
        free(f.data);
        free(l.data);
        return;
    }
    memcpy(f.data, t->data, bytes);
    memcpy(l.data, t->data, bytes);
    int labels = b & 1;
    if (!labels) free(l.data);
    ts_args ts = {.sequence_length = 1 + ((b >> 1) & 7), .sequence_stride = 1 + ((b >> 4) & 1),
                  .sampling_rate = 1 + ((b >> 5) & 1), .start_index = (b >> 6) & 1,
                  .end_index = b >> 7 ? 6 : 0, .target_offset = labels ? (b >> 3) & 1 : 0};
    source *s;
    if (tfc_source_timeseries(&s, "npy", &f, labels ? &l : NULL, &ts, "fuzz.npy", "fuzz.npy",
                              (b & 8) ? 3 : 0, "fuzz", &err)) {
        TFC_ASSERT(err.code != TFC_OK && err.msg[0]);
        return;
    }
    for (int64_t i = 0; i < s->count && i < 4096; i++) {
        tfc_element e = {0};
        TFC_ASSERT(s->ops->get(s, i, &e, &err) == TFC_OK);
        const tfc_tensor *w = &e.comp[TFC_COMP_FEATURES];
        TFC_ASSERT(w->shape.ndim == t->shape.ndim && w->shape.dim[0] == ts.sequence_length);
        char where[256];
        s->ops->describe(s, i, where, sizeof where);
        if (labels) s->ops->describe_label(s, i, where, sizeof where);
        if (s->ops->label) (void)s->ops->label(s, i);
        for (int c = 0; c < TFC_COMP_COUNT; c++) free(e.comp[c].data);
    }
    tfc_source_free(s);
}

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
        if (size % 3 == 0) windows(&t, data[size - 1]);
        free(t.data);
    } else {
        TFC_ASSERT(err.code != TFC_OK && err.msg[0]);
    }
    return 0;
}
