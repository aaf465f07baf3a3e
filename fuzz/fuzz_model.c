/* libFuzzer target: arbitrary bytes as a model file. The loader must return a model or an
 * error, never crash, hang or allocate without bound (YAML depth, aliases, shapes). */
#include <stddef.h>
#include <stdint.h>

#include "graph/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_from_string((const char *)data, size, "fuzz.yaml", &err);
    if (m) {
        /* Touch what the tools read of a model. */
        (void)tfc_model_param_count(m);
        (void)tfc_model_label_rows(m);
        tfc_model_free(m);
    }
    return 0;
}
