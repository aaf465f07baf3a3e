/* The registries of the input pipeline: every source type, stage and map op in one explicit
 * array each (no self-registration, which vanishes under static linking). A new one is its
 * definition beside its implementation plus one line here; names, lookups, help and the
 * registry test all follow from these arrays. */
#include <string.h>

#include "data/internal.h"

extern const source_def tfc_source_idx, tfc_source_npy, tfc_source_csv, tfc_source_images,
    tfc_source_text, tfc_source_tfrecord, tfc_source_audio;
extern const stage_def tfc_stage_filter, tfc_stage_shuffle, tfc_stage_repeat, tfc_stage_batch,
    tfc_stage_padded_batch, tfc_stage_cache, tfc_stage_take, tfc_stage_skip, tfc_stage_prefetch,
    tfc_stage_shard, tfc_stage_bucket_by_sequence_length;
extern const op_def tfc_op_scale, tfc_op_normalize, tfc_op_cast, tfc_op_reshape,
    tfc_op_one_hot, tfc_op_pad, tfc_op_truncate, tfc_op_window, tfc_op_tokenize,
    tfc_op_random_flip, tfc_op_random_crop, tfc_op_resize, tfc_op_decode_png,
    tfc_op_decode_jpeg, tfc_op_decode_image, tfc_op_autoencode, tfc_op_mix_up,
    tfc_op_cut_mix, tfc_op_text_vectorization;

static const source_def *const sources[] = {
    &tfc_source_idx, &tfc_source_npy, &tfc_source_csv, &tfc_source_images, &tfc_source_text,
    &tfc_source_tfrecord, &tfc_source_audio, NULL,
};

static const stage_def *const stages[] = {
    &tfc_stage_map,    &tfc_stage_filter,       &tfc_stage_shuffle, &tfc_stage_repeat,
    &tfc_stage_batch,  &tfc_stage_padded_batch, &tfc_stage_cache,   &tfc_stage_take,
    &tfc_stage_skip,   &tfc_stage_prefetch,     &tfc_stage_shard,
    &tfc_stage_bucket_by_sequence_length, NULL,
};

static const op_def *const ops[] = {
    &tfc_op_scale,       &tfc_op_normalize,   &tfc_op_cast,        &tfc_op_reshape,
    &tfc_op_one_hot,     &tfc_op_pad,         &tfc_op_truncate,    &tfc_op_window,
    &tfc_op_tokenize,    &tfc_op_random_flip, &tfc_op_random_crop, &tfc_op_resize,
    &tfc_op_decode_png,  &tfc_op_decode_jpeg, &tfc_op_decode_image, &tfc_op_autoencode,
    &tfc_op_mix_up,      &tfc_op_cut_mix,     &tfc_op_text_vectorization, NULL,
};

/* Each definition starts with its name: the name lists are views of the arrays. */
#define NAMES_OF(table)                                                                       \
    do {                                                                                      \
        static const char *names[sizeof table / sizeof *table];                               \
        if (!names[0])                                                                        \
            for (int i = 0; table[i]; i++) names[i] = table[i]->name;                         \
        return names;                                                                         \
    } while (0)

const char *const *tfc_data_source_names(void)
{
    NAMES_OF(sources);
}

const char *const *tfc_data_stage_names(void)
{
    NAMES_OF(stages);
}

const char *const *tfc_data_op_names(void)
{
    NAMES_OF(ops);
}

#define FIND_IN(table, name)                                                                  \
    do {                                                                                      \
        for (int i = 0; table[i]; i++)                                                        \
            if (!strcmp(table[i]->name, name)) return table[i];                               \
        return NULL;                                                                          \
    } while (0)

const source_def *tfc_data_source_find(const char *name)
{
    FIND_IN(sources, name);
}

const stage_def *tfc_data_stage_find(const char *name)
{
    FIND_IN(stages, name);
}

const op_def *tfc_data_op_find(const char *name)
{
    FIND_IN(ops, name);
}

int tfc_data_print_help(FILE *f, const char *kind, const char *name)
{
    const source_def *src = !strcmp(kind, "source") ? tfc_data_source_find(name) : NULL;
    const stage_def *stg = !strcmp(kind, "stage") ? tfc_data_stage_find(name) : NULL;
    const op_def *op = !strcmp(kind, "op") ? tfc_data_op_find(name) : NULL;
    if (src) fprintf(f, "source %s: %s\n", name, src->help);
    else if (stg) fprintf(f, "stage %s: %s\n", name, stg->help);
    else if (op) fprintf(f, "map op %s: %s\n", name, op->help);
    else return 0;
    tfc_schema_print_help(f, src ? src->fields : stg ? stg->fields : op->fields, "  ");
    return 1;
}
