/* libFuzzer target for the zip reader: parses the input as a whole archive, looks every
 * entry up by name, and reads each one with a 1 MB limit; what is read must have the size
 * the reader reports and a NUL after it. Failures must carry one of the reader's codes and a
 * message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/zip.h"

#define MAX_ENTRY ((size_t)1 << 20)

static void expect_reader_error(const tfc_error *err, int read)
{
    /* damaged (FORMAT), out of memory (NOMEM), no zip archive at all (USAGE, parse only),
     * larger than the limit (DATA, read only) */
    TFC_ASSERT(err->code == TFC_ERR_FORMAT || err->code == TFC_ERR_NOMEM ||
               (read ? err->code == TFC_ERR_DATA : err->code == TFC_ERR_USAGE));
    TFC_ASSERT(err->msg[0] != 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_zip *z = tfc_zip_parse(data, size, "fuzz.zip", &err);
    if (!z) {
        expect_reader_error(&err, 0);
        return 0;
    }
    for (int i = 0; i < tfc_zip_count(z); i++) {
        const char *name = tfc_zip_name_at(z, i);
        TFC_ASSERT(name != NULL);
        TFC_ASSERT(tfc_zip_find(z, name) == i); /* names are unique */
        void *buf;
        size_t len;
        tfc_error_clear(&err);
        if (tfc_zip_read(z, i, MAX_ENTRY, &buf, &len, &err) != TFC_OK) {
            expect_reader_error(&err, 1);
            TFC_ASSERT(buf == NULL && len == 0);
            continue;
        }
        TFC_ASSERT(len <= MAX_ENTRY && ((const char *)buf)[len] == 0);
        /* touch every byte so the sanitizers see a short buffer */
        unsigned sum = 0;
        for (size_t k = 0; k < len; k++) sum += ((const unsigned char *)buf)[k];
        (void)sum;
        free(buf);
    }
    int k = tfc_zip_find(z, "\x01 no such entry");
    TFC_ASSERT(k == -1 || strcmp(tfc_zip_name_at(z, k), "\x01 no such entry") == 0);
    tfc_zip_close(z);
    return 0;
}
