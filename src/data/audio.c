/* The audio source: WAV files (data/wav.c) found in a folder with one sub-folder per class
 * (sorted names give the class indices, as Keras's audio_dataset_from_directory; its `.wav`
 * files in byte order, any case), or listed by `files:` without labels. A record is float32
 * (steps, channels) in [-1, 1) and, from a folder, its class; files are read and decoded when
 * the record is requested, so a parallel map over this source decodes in parallel.
 * `output_sequence_length` crops or zero-pads every record to that many steps (Keras's; else
 * the file's length, for padded_batch), `channels` keeps a file's first channels or repeats
 * its last (tf.audio.decode_wav's desired_channels; 0 keeps the file's), and
 * `sampling_rate` is checked: tfc does not resample, so a file of another rate is an error
 * naming it (Keras resamples through tensorflow-io). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/fileio.h"
#include "data/internal.h"

#define AUDIO_MAX_FILE_BYTES ((size_t)256 << 20)

typedef struct audio_args {
    const char *type;
    const char *directory;
    const tfc_node *files, *exclude;
    int output_sequence_length; /* -1: none */
    int channels;
    int sampling_rate; /* 0: any */
    int num_classes;
    int on_error;
    const tfc_node *split;
    tfc_split_rule rule;     /* from split (audio_check) */
    const tfc_node *classes; /* `classes:` (from_config): with directory, the folders */
} audio_args;

typedef struct audio_item {
    char *path;
    int32_t label; /* -1: none (files:) */
} audio_item;

typedef struct audio_source {
    source base;
    audio_item *items;
    int64_t n, cap;
    int channels, sampling_rate;
    int64_t length; /* output_sequence_length, or -1 */
    size_t last_len; /* the size of a file read lately: the next read's first guess */
} audio_source;

static tfc_status audio_get(source *s, int64_t i, tfc_element *e, tfc_error *err)
{
    audio_source *au = (audio_source *)s;
    const audio_item *it = &au->items[i];
    char *buf;
    size_t len;
    size_t guess = __atomic_load_n(&au->last_len, __ATOMIC_RELAXED);
    tfc_status st = tfc_file_read_guess(it->path, AUDIO_MAX_FILE_BYTES, guess + guess / 4 + 64,
                                        &buf, &len, err);
    if (st) return st;
    __atomic_store_n(&au->last_len, len, __ATOMIC_RELAXED);
    tfc_wav_info info;
    tfc_tensor t;
    st = tfc_wav_decode(buf, len, it->path, au->channels, au->length, &info, &t, err);
    free(buf);
    if (st) return st;
    if (au->sampling_rate && info.rate != (uint32_t)au->sampling_rate) {
        free(t.data);
        return tfc_error_set(err, TFC_ERR_DATA, "%s: sampled at %u Hz, not the source's "
                             "sampling_rate %d (tfc does not resample)", it->path, info.rate,
                             au->sampling_rate);
    }
    free(e->comp[TFC_COMP_FEATURES].data);
    e->comp[TFC_COMP_FEATURES] = t;
    if (it->label < 0) return TFC_OK;
    tfc_shape ls = {0};
    int32_t *l = tfc_element_alloc(e, TFC_COMP_LABELS, TFC_I32, &ls);
    if (!l) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    *l = it->label;
    return TFC_OK;
}

static void audio_describe(const source *s, int64_t i, char *buf, size_t size)
{
    snprintf(buf, size, "%s", ((const audio_source *)s)->items[i].path);
}

static int64_t audio_label(const source *s, int64_t i)
{
    return ((const audio_source *)s)->items[i].label;
}

static void audio_free(source *s)
{
    audio_source *au = (audio_source *)s;
    for (int64_t i = 0; i < au->n; i++) free(au->items[i].path);
    free(au->items);
    free(au);
}

static const source_ops audio_ops = {
    .type = "audio",
    .get = audio_get,
    .describe = audio_describe,
    .label = audio_label,
    .free = audio_free,
};

/* Without labels (files:) */
static const source_ops audio_unlabelled_ops = {
    .type = "audio",
    .get = audio_get,
    .describe = audio_describe,
    .free = audio_free,
};

/* Appends dir/name (name alone without dir) */
static int add_item(source *s, const char *dir, const char *name, int32_t label)
{
    audio_source *au = (audio_source *)s;
    if (au->n == au->cap) {
        int64_t cap = au->cap ? au->cap * 2 : 256;
        audio_item *it = realloc(au->items, (size_t)cap * sizeof *it);
        if (!it) return -1;
        au->items = it;
        au->cap = cap;
    }
    size_t n = (dir ? strlen(dir) + 1 : 0) + strlen(name) + 1;
    char *p = malloc(n);
    if (!p) return -1;
    snprintf(p, n, "%s%s%s", dir ? dir : "", dir ? "/" : "", name);
    au->items[au->n++] = (audio_item){p, label};
    return 0;
}

static int wav_name(const char *n)
{
    const char *dot = strrchr(n, '.');
    return n[0] != '.' && dot && !strcasecmp(dot, ".wav");
}

/* ---- the source ------------------------------------------------------------------------ */

static const tfc_field audio_fields[] = {
    SOURCE_TYPE_FIELD(audio_args),
    {"directory", TFC_F_STRING, offsetof(audio_args, directory), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "a folder with one sub-folder of .wav files per class (sorted names)"},
    {"files", TFC_F_NODE, offsetof(audio_args, files), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "instead: a .wav file or a list of them (glob patterns), without labels"},
    {"exclude", TFC_F_NODE, offsetof(audio_args, exclude), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "with files: base-name patterns to leave out"},
    {"output_sequence_length", TFC_F_INT, offsetof(audio_args, output_sequence_length), "-1", -1,
     1 << 30, NULL, "crop or zero-pad every record to this many steps (-1: the file's)"},
    {"channels", TFC_F_INT, offsetof(audio_args, channels), "0", 0, 256, NULL,
     "0 keeps the file's; else its first channels, or its last repeated"},
    {"sampling_rate", TFC_F_INT, offsetof(audio_args, sampling_rate), "0", 0, 1 << 30, NULL,
     "> 0: every file must be sampled at this rate, in Hz (tfc does not resample)"},
    SOURCE_NUM_CLASSES_FIELD(audio_args),
    SOURCE_ON_ERROR_FIELD(audio_args),
    {"split", TFC_F_NODE, offsetof(audio_args, split), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "{every: N, part: train|test, offset: K}: file r is test when r % N == K"},
    {NULL},
};

static tfc_status audio_check(void *args, const tfc_node *at, const char *key, tfc_error *err)
{
    audio_args *a = args;
    if (tfc_data_split_read(a->split, key, &a->rule, err)) return TFC_ERR_CONFIG;
    const int files = a->files && !tfc_node_is_null(a->files);
    if (!a->directory == !files)
        return tfc_node_error(err, TFC_ERR_CONFIG, at, key, "give exactly one of `directory` "
                              "(class folders) and `files`");
    if (a->output_sequence_length == 0)
        return tfc_node_error(err, TFC_ERR_CONFIG, at, key, "output_sequence_length: at least "
                              "1 step (or -1, the default: each file's own length)");
    if (a->exclude && !files)
        return tfc_node_error(err, TFC_ERR_CONFIG, at, key, "exclude: needs `files`");
    if (!files) return TFC_OK;
    char k[352];
    snprintf(k, sizeof k, "%s.files", key);
    return tfc_data_check_files(a->files, k, err);
}

static tfc_status audio_open(const void *args, const tfc_data_options *opt, const char *key,
                             source **out, tfc_error *err)
{
    const audio_args *a = args;
    *out = NULL;
    audio_source *au = calloc(1, sizeof *au);
    if (!au) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    const int files = a->files && !tfc_node_is_null(a->files);
    au->base.ops = files ? &audio_unlabelled_ops : &audio_ops;
    au->base.get_may_fail = 1;
    au->base.skip_errors = a->on_error == ON_ERROR_SKIP;
    au->channels = a->channels;
    au->sampling_rate = a->sampling_rate;
    au->length = a->output_sequence_length;
    tfc_status st = TFC_OK;
    if (files) {
        tfc_path_list pl = {0};
        char fkey[352];
        snprintf(fkey, sizeof fkey, "%s.files", key);
        st = tfc_data_expand_files(a->files, a->exclude, opt, fkey, &pl, err);
        for (int i = 0; i < pl.n && !st; i++)
            if (add_item(&au->base, NULL, pl.v[i], -1))
                st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        tfc_path_list_free(&pl);
    } else {
        const char *dir = a->directory;
        char *owned = NULL;
        st = tfc_data_resolve(opt, &dir, &owned, err);
        const int classes = opt && opt->num_classes > 0 ? opt->num_classes : a->num_classes;
        if (!st)
            st = tfc_data_class_folders(&au->base, dir, wav_name, ".wav", classes, a->classes,
                                        key, add_item, err);
        free(owned);
    }
    int64_t kept = 0; /* split: the files of this part, in order */
    for (int64_t i = 0; !st && i < au->n; i++) {
        if (tfc_data_split_keeps(&a->rule, i)) au->items[kept++] = au->items[i];
        else free(au->items[i].path);
    }
    if (!st) au->n = kept;
    if (!st && kept == 0)
        st = tfc_error_set(err, TFC_ERR_DATA, "%s: the split leaves no files",
                           files ? "files" : a->directory);
    if (!st && files && a->classes) /* names only, as for any source */
        st = tfc_source_rename_classes(&au->base, a->classes, key, err);
    if (st) {
        tfc_source_free(&au->base);
        return st;
    }
    source *s = &au->base;
    s->count = au->n;
    s->spec.comp[TFC_COMP_FEATURES] = (tfc_component_spec){
        1, TFC_F32, {.ndim = 2, .dim = {au->length, a->channels ? a->channels : -1}}};
    if (!files) s->spec.comp[TFC_COMP_LABELS] = (tfc_component_spec){1, TFC_I32, {.ndim = 0}};
    *out = s;
    return TFC_OK;
}

const source_def tfc_source_audio = {
    .name = "audio",
    .help = "WAV files (PCM or float), in class folders as Keras's "
            "audio_dataset_from_directory reads them",
    .fields = audio_fields,
    .args_size = sizeof(audio_args),
    .check = audio_check,
    .open = audio_open,
    .classes_offset = offsetof(audio_args, classes),
};
