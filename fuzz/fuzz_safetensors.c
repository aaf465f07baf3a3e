/* libFuzzer target for the safetensors reader: parses the input as a whole file, walks every
 * tensor (find by name, convert to float, touch every byte), reads the metadata, and writes
 * what it accepted back out, which must parse again to the same tensors. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/safetensors.h"

static void check_same(const tfc_st_file *a, const tfc_st_file *b)
{
    TFC_ASSERT(tfc_st_count(a) == tfc_st_count(b));
    TFC_ASSERT(tfc_st_meta_count(a) == tfc_st_meta_count(b));
    for (int i = 0; i < tfc_st_count(a); i++) {
        const tfc_st_tensor *x = tfc_st_tensor_at(a, i), *y = tfc_st_tensor_at(b, i);
        TFC_ASSERT(strcmp(x->name, y->name) == 0);
        TFC_ASSERT(x->dtype == y->dtype && tfc_shape_equal(&x->shape, &y->shape));
        TFC_ASSERT(x->nbytes == y->nbytes && memcmp(x->data, y->data, x->nbytes) == 0);
    }
    for (int i = 0; i < tfc_st_meta_count(a); i++) {
        const char *k, *v;
        tfc_st_meta_at(a, i, &k, &v);
        const char *w = tfc_st_meta(b, k);
        TFC_ASSERT(w && strcmp(v, w) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_parse(data, size, "fuzz.safetensors", &err);
    if (!f) {
        /* damaged (FORMAT), too large (NOMEM), or no safetensors file at all (USAGE: the
         * user named a file of the wrong kind, SPEC §3's exit 2) */
        TFC_ASSERT(err.code == TFC_ERR_FORMAT || err.code == TFC_ERR_NOMEM ||
                   err.code == TFC_ERR_USAGE);
        TFC_ASSERT(err.msg[0] != 0);
        return 0;
    }
    size_t total = 0;
    tfc_st_writer *w = tfc_st_writer_create();
    for (int i = 0; i < tfc_st_count(f); i++) {
        const tfc_st_tensor *t = tfc_st_tensor_at(f, i);
        TFC_ASSERT(tfc_st_find(f, t->name) == t);
        TFC_ASSERT(t->nbytes == (size_t)t->numel * tfc_dtype_size(t->dtype));
        TFC_ASSERT((const uint8_t *)t->data >= data &&
                   (const uint8_t *)t->data + t->nbytes <= data + size);
        total += t->nbytes;
        /* nbytes <= size, so this allocation is bounded by 4x the input. */
        float *v = malloc((size_t)t->numel * sizeof(float) + 1);
        if (v) {
            tfc_st_tensor_to_f32(t, v);
            free(v);
        }
        if (w && tfc_st_writer_add(w, t->name, t->dtype, &t->shape, t->data, &err) != TFC_OK)
            TFC_ASSERT(!"a parsed tensor must be writable");
    }
    TFC_ASSERT(total == tfc_st_data_size(f));
    for (int i = 0; i < tfc_st_meta_count(f); i++) {
        const char *k, *v;
        tfc_st_meta_at(f, i, &k, &v);
        TFC_ASSERT(tfc_st_meta(f, k) != NULL);
        if (w) TFC_ASSERT(tfc_st_writer_set_meta(w, k, v, &err) == TFC_OK);
    }
    void *out;
    size_t len;
    if (w && tfc_st_writer_to_buffer(w, &out, &len, &err) == TFC_OK) {
        tfc_st_file *g = tfc_st_parse(out, len, "roundtrip", &err);
        TFC_ASSERT(g != NULL);
        check_same(f, g);
        tfc_st_close(g);
        free(out);
    }
    tfc_st_writer_free(w);
    tfc_st_close(f);
    return 0;
}
