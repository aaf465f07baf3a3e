/* libFuzzer target for the CSV source: the first input byte picks the options (header,
 * delimiter, label column, skipping bad rows, label dtype), the input's length string labels,
 * a text column, a string_lookup column, feature columns as two named inputs or label columns
 * as two named labels, the rest is the file. Every record of an accepted file is read back
 * (string labels inside the class names). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static tfc_doc *doc;
    tfc_error err;
    tfc_error_clear(&err);
    static const char opt_yaml[] =
        "[-1, 0, label, [0, 1], {0: [a, \"1\", \"\"]}, {wide: [0], deep: [1]}, "
        "{main: 0, aux: -1}]";
    if (!doc) doc = tfc_doc_load_string(opt_yaml, sizeof opt_yaml - 1, "fuzz", &err);
    if (!doc || size < 1) return 0;
    const tfc_node *opts = tfc_doc_root(doc);
    unsigned o = data[0];
    csv_args a = {.type = "csv", .header = o & 1, .delimiter = (o & 2) ? ";" : ",",
                  .label_dtype = (o >> 2) & 1, .on_error = (o >> 3) & 1,
                  .num_classes = (o & 16) ? 5 : 0};
    /* Lengths divisible by 11 read windows of the rows (`timeseries:`, each read back of the
     * sequence length), the settings from the last byte; a text column or skipped rows are
     * then refused. */
    if (size % 11 == 0) {
        unsigned t = data[size - 1];
        a.ts = (ts_args){.sequence_length = 1 + (t & 7), .sequence_stride = 1 + ((t >> 3) & 3),
                         .sampling_rate = 1 + ((t >> 5) & 1), .start_index = (t >> 6) & 1,
                         .end_index = t >> 7 ? 5 : 0, .target_offset = (t >> 2) & 3};
    }
    if (o & 32) a.label_column = opts->vals[(o >> 6) % 3];
    if ((o & 32) && size % 17 == 0) a.label_column = opts->vals[6]; /* two named labels */
    if ((o & 0xc0) == 0xc0) a.feature_columns = opts->vals[size % 2 ? 3 : 5];
    /* The input's length picks string labels (class names) and a text column. */
    if (size % 3 == 0 && a.label_dtype) a.label_dtype = CSV_LABEL_STRING;
    if (size % 5 == 0) a.feature_columns = NULL, a.text_column = opts->vals[(o >> 4) % 3];
    else if (size % 7 == 0) a.string_lookup = opts->vals[4]; /* column 0 one-hot */
    source *s;
    if (tfc_source_csv_mem(&s, &a, (const char *)data + 1, size - 1, "fuzz.csv", &err) == TFC_OK) {
        for (int64_t i = 0; i < s->count; i++) {
            tfc_element e = {0};
            TFC_ASSERT(s->ops->get(s, i, &e, &err) == TFC_OK);
            if (a.ts.sequence_length)
                TFC_ASSERT(e.comp[TFC_COMP_FEATURES].shape.dim[0] == a.ts.sequence_length);
            /* named inputs: both present, one float each (or column 0's one-hot) */
            TFC_ASSERT(!!e.comp[TFC_COMP_INPUT1].data == (s->spec.ninputs == 2));
            /* named labels: both present */
            TFC_ASSERT(!!e.comp[TFC_COMP_LABEL1].data == (s->spec.nlabels == 2));
            if (a.label_dtype == CSV_LABEL_STRING && e.comp[TFC_COMP_LABELS].data) {
                int32_t l = *(int32_t *)e.comp[TFC_COMP_LABELS].data;
                TFC_ASSERT(l >= 0 && l < s->nclasses);
            }
            for (int c = 0; c < TFC_COMP_COUNT; c++) free(e.comp[c].data);
        }
        tfc_source_free(s);
    } else {
        TFC_ASSERT(err.code != TFC_OK);
    }
    return 0;
}
