/* libFuzzer target for the text source and tokenizers: the first byte picks the record
 * format, the split and the tokenizer; the rest is split into records, a vocabulary is built
 * from them and every record is encoded (each id must be inside the vocabulary); a Keras
 * TextVectorization vocabulary (settings from the same byte) is adapted on them too and
 * every record vectorized. With the top bit set the input is instead read back as a
 * vocabulary file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "data/internal.h"

static void vocab_file(const uint8_t *data, size_t size)
{
    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/fuzz-vocab-%d.txt", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, size, f);
    fclose(f);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_vocab *v = tfc_vocab_load(path, &err);
    if (v) {
        int keras = tfc_vocab_text_spec(v) != NULL;
        TFC_ASSERT(tfc_vocab_size(v) >= (keras ? 1 : 2));
        int32_t ids[64];
        int64_t n = tfc_vocab_encode(v, (const char *)data, size < 64 ? size : 64, ids, 64);
        for (int64_t i = 0; i < n && i < 64; i++)
            TFC_ASSERT(ids[i] >= (keras ? 0 : 1) && ids[i] < tfc_vocab_size(v));
        tfc_vocab_free(v);
    }
}

/* The Keras vocabulary of settings `o` adapted on s, and every record vectorized. */
static void keras_vocab(unsigned o, source *s)
{
    tfc_text_spec ts = {.standardize = (int)(o & 3), .split = (int)((o >> 2) % 3),
                        .output_mode = (int)((o >> 4) % TFC_TEXT_OUTPUT_COUNT),
                        .nngrams = (o & 8) ? 2 : 0, .ngrams = {1, 3}};
    tfc_error err;
    tfc_error_clear(&err);
    tfc_vocab *v = tfc_vocab_keras_build(&ts, (o & 64) ? 12 : 0, s, &err);
    TFC_ASSERT(v != NULL);
    int64_t nv = tfc_vocab_size(v);
    TFC_ASSERT(nv >= 1 && (!(o & 64) || nv <= 12));
    for (int64_t i = 0; i < s->count; i++) {
        tfc_element e = {0};
        TFC_ASSERT(s->ops->get(s, i, &e, &err) == TFC_OK);
        const tfc_tensor *t = &e.comp[TFC_COMP_FEATURES];
        size_t len = (size_t)t->shape.dim[0];
        float *y = malloc((size_t)nv * 4 + 4);
        int64_t n = tfc_vocab_vectorize(v, t->data, len, y, ts.output_mode ? nv : 1);
        TFC_ASSERT(n >= 0);
        for (int64_t k = 0; ts.output_mode && k < nv; k++) TFC_ASSERT(y[k] >= 0 && y[k] <= n * 100.0f);
        int32_t *ids = malloc((size_t)(n + 1) * 4);
        TFC_ASSERT(tfc_vocab_encode(v, t->data, len, ids, n) == n);
        for (int64_t k = 0; k < n; k++) TFC_ASSERT(ids[k] >= 0 && ids[k] < nv);
        free(ids);
        free(y);
        for (int c = 0; c < TFC_COMP_COUNT; c++) free(e.comp[c].data);
    }
    tfc_vocab_free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    unsigned o = data[0];
    if (o & 0x80) {
        vocab_file(data + 1, size - 1);
        return 0;
    }
    text_args a = {.type = "text", .format = o & 1, .label = (o >> 1) & 1,
                   .split_every = (o & 4) ? 3 : 0, .split_part = (o >> 3) & 1,
                   .max_record_bytes = (o & 16) ? 64 : 1 << 20, .skip_empty = (o >> 5) & 1,
                   .on_error = (o & 16) ? ON_ERROR_SKIP : ON_ERROR_FAIL};
    tfc_error err;
    tfc_error_clear(&err);
    source *s;
    if (tfc_source_text_mem(&s, &a, (const char *)data + 1, size - 1, "fuzz.txt", &err)) return 0;
    tfc_vocab *v = tfc_vocab_build((o & 64) ? TFC_TOKENIZER_WORD : TFC_TOKENIZER_CHAR, (o >> 2) & 1,
                                   (o & 8) ? 10 : 0, 1, s, &err);
    TFC_ASSERT(v != NULL);
    for (int64_t i = 0; i < s->count; i++) {
        tfc_element e = {0};
        TFC_ASSERT(s->ops->get(s, i, &e, &err) == TFC_OK);
        const tfc_tensor *t = &e.comp[TFC_COMP_FEATURES];
        int64_t len = t->shape.dim[0];
        int32_t *ids = malloc((size_t)len * 4 + 4);
        int64_t n = tfc_vocab_encode(v, t->data, (size_t)len, ids, len);
        TFC_ASSERT(n >= 0 && n <= len);
        for (int64_t k = 0; k < n; k++) TFC_ASSERT(ids[k] >= 1 && ids[k] < tfc_vocab_size(v));
        free(ids);
        for (int c = 0; c < TFC_COMP_COUNT; c++) free(e.comp[c].data);
    }
    tfc_vocab_free(v);
    keras_vocab(o, s);
    tfc_source_free(s);
    return 0;
}
