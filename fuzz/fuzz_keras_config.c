/* libFuzzer target for tfc-import's first half: arbitrary bytes as a Keras model's JSON
 * configuration. The conversion must return a model file or an error naming the input,
 * never crash or hang; a model file it returns must parse again as YAML, and tfc's model
 * builder must then give a model or an error (tfc-import's next step). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "api/keras_config.h"
#include "core/config.h"
#include "graph/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_doc *in = tfc_doc_load_string((const char *)data, size, "fuzz.json", &err);
    if (!in) return 0;
    tfc_import_report rep = {0};
    char *yaml = NULL;
    size_t len = 0;
    tfc_error_clear(&err);
    tfc_status s = tfc_keras_convert(tfc_doc_root(in), "fuzz.json", &rep, &yaml, &len, &err);
    if (s) {
        TFC_ASSERT(err.msg[0] != 0);
    } else {
        tfc_error_clear(&err);
        tfc_doc *again = tfc_doc_load_string(yaml, len, "model.yaml", &err);
        TFC_ASSERT(again != NULL); /* what the importer writes is YAML */
        tfc_doc_free(again);
        tfc_model *m = tfc_model_from_string(yaml, len, "model.yaml", &err);
        if (m) (void)tfc_model_param_count(m);
        tfc_model_free(m);
    }
    free(yaml);
    tfc_doc_free(in);
    return 0;
}
