/* The input pipeline: tf.data in C. A pipeline is a source (idx, npy, csv, images, text,
 * tfrecord, audio or in-memory tensors) followed by stages run in the order written (map,
 * filter, shuffle, repeat, batch, padded_batch, cache, take, skip, prefetch). It is planned
 * (checked without reading data) and built from the `data.train` / `data.test` mapping of a
 * solver file, or built in code; it yields elements whose components are features, labels
 * and (after padded_batch) lengths, the features being one input or several named ones (a
 * model of several inputs) and the labels one array or several named ones (a model of
 * several outputs), and can save and restore its exact position. All randomness is a
 * function of (seed, epoch, element index). */
#ifndef TFC_DATA_DATA_H
#define TFC_DATA_DATA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/config.h"
#include "core/error.h"
#include "core/tensor.h"

typedef struct tfc_pipeline tfc_pipeline;
typedef struct tfc_vocab tfc_vocab;

/* ---- elements ---------------------------------------------------------------------------- */

/* Component slots of an element. Features are always present; labels when the source has
 * them (or a map op made them); lengths only after padded_batch. An element may carry up to
 * TFC_MAX_INPUTS named inputs, one per input of a model of several inputs (Keras's
 * fit({"title": x1, "body": x2}, y)): input 0 is the features component, input k >= 1 the
 * component TFC_COMP_INPUT1 + k - 1 (tfc_input_comp). Likewise up to TFC_MAX_LABELS named
 * labels, one per output of a model of several outputs (Keras's fit(x, {"main": y1, "aux":
 * y2})): label 0 is the labels component, label k >= 1 the component TFC_COMP_LABEL1 + k - 1
 * (tfc_label_comp). The slots of the inputs' come first, so that saved states of elements
 * without further labels keep their layout. */
#define TFC_MAX_INPUTS 8
#define TFC_MAX_LABELS 8
enum { TFC_COMP_FEATURES = 0, TFC_COMP_LABELS = 1, TFC_COMP_LENGTHS = 2, TFC_COMP_INPUT1 = 3,
       TFC_COMP_LABEL1 = TFC_COMP_INPUT1 + TFC_MAX_INPUTS - 1,
       TFC_COMP_COUNT = TFC_COMP_LABEL1 + TFC_MAX_LABELS - 1 };

/* One element as the pipeline hands it out and as map callbacks see it. `data == NULL`
 * means the component is absent. Tensors are host tensors (device -1). */
typedef struct tfc_element {
    tfc_tensor comp[TFC_COMP_COUNT];
} tfc_element;

/* The element spec (tf.data's element_spec): per component whether it is present, its dtype
 * and its shape. A dimension of -1 is unknown (the batch dimension without drop_remainder,
 * ragged sequence lengths); ndim -1 means the rank is unknown. */
typedef struct tfc_component_spec {
    int present;
    tfc_dtype dtype;
    tfc_shape shape;
} tfc_component_spec;

typedef struct tfc_element_spec {
    tfc_component_spec comp[TFC_COMP_COUNT];
    int batched; /* 1 after batch/padded_batch: axis 0 is the batch axis */
    int ninputs; /* the inputs the elements carry (1 for a source of plain features) */
    /* their names, input k in input_names[k] (Keras input names; "" for a single unnamed
     * input) */
    char input_names[TFC_MAX_INPUTS][64];
    int nlabels; /* the labels the elements carry (0: none; 1 for a source of plain labels) */
    /* their names, label k in label_names[k] (Keras output names; "" for a single unnamed
     * label) */
    char label_names[TFC_MAX_LABELS][64];
} tfc_element_spec;

/* The component of input k in [0, TFC_MAX_INPUTS): TFC_COMP_FEATURES for input 0, else
 * TFC_COMP_INPUT1 + k - 1; -1 out of range. */
int tfc_input_comp(int k);
/* The component of label k in [0, TFC_MAX_LABELS): TFC_COMP_LABELS for label 0, else
 * TFC_COMP_LABEL1 + k - 1; -1 out of range. */
int tfc_label_comp(int k);

/* What tfc_pipeline_next hands out. The tensors are views owned by the pipeline, valid until
 * the next call to tfc_pipeline_next, _reset, _restore_state or _free. */
typedef struct tfc_batch {
    tfc_tensor features;
    tfc_tensor labels;  /* data NULL when the pipeline has no labels */
    tfc_tensor lengths; /* I32 (B,): unpadded lengths, after padded_batch (input 0's); else
                           data NULL */
    int end;            /* 1: the data set is exhausted, the tensors are empty */
    tfc_tensor inputs[TFC_MAX_INPUTS]; /* input k (inputs[0] the same view as features) */
    int ninputs;                       /* the element spec's ninputs (0 at the end) */
    tfc_tensor label_at[TFC_MAX_LABELS]; /* label k (label_at[0] the same view as labels) */
    int nlabels;                         /* the element spec's nlabels (0 at the end) */
} tfc_batch;

/* "features", "labels", "lengths", "input1".."input7", "label1".."label7" (a component's
 * name where the pipeline does not tell its inputs' and labels' names). */
const char *tfc_data_component_name(int comp);
/* The name of component comp in elements of `spec`: an input's or a label's own name when
 * it has one (input 0 and label 0 included), else tfc_data_component_name's. */
const char *tfc_data_spec_component_name(const tfc_element_spec *spec, int comp);

/* ---- building from a solver file ------------------------------------------------------- */

typedef struct tfc_data_options {
    const char *key;        /* key path prefix of errors, e.g. "data.train"; NULL: "data" */
    const char *base_dir;   /* relative paths resolve against it (the solver's folder); NULL: cwd */
    uint64_t seed;          /* the solver's global seed */
    uint64_t stream;        /* separates the random streams of pipelines sharing a seed */
    const char *run_dir;    /* the run's folder: the text vocabulary is written or read there */
    int load_vocabulary;    /* 1: a tokenizer loads run_dir/vocabulary.txt (test split);
                               0: it builds the vocabulary from this pipeline's source and
                               writes it to run_dir when run_dir is set (train split) */
    const tfc_vocab *vocab; /* when set, tokenizers use it (not owned); `vocabulary:` wins */
    int num_classes;        /* > 0: integer labels must lie in [0, num_classes) */
    /* Data-parallel ranks (tfc_pipeline_from_config): with shard_count > 1, a split whose
     * stream repeats forever before its first batch stage is dealt among the ranks — a shard
     * stage right after the last stage before that batch other than maps and prefetch keeps
     * blocks of batch / shard_count elements, block k going to rank k % shard_count (this
     * one: shard_index), and the batch stage batches that many. Rank r's batches are then
     * the rows [r B/N, (r+1) B/N) of the unsharded pipeline's, its maps run on its elements
     * only, and map randomness is unchanged. Other splits are left whole, unless
     * shard_finite: then a split read once (a test split) is dealt too, each rank reading its
     * blocks of the pass (ranks may end with different counts). */
    int shard_count, shard_index, shard_finite;
    /* The profiler (tfc_pipeline_profile): 0 times one outermost pull in 16 on each thread
     * (the default, always on), N > 0 one in N (rounded up to a power of two; 1: every
     * call), -1 switches it off. */
    int profile_every;
} tfc_data_options;

/* What the solver needs to know of a split before any data is read. */
typedef struct tfc_data_plan {
    int64_t batch_size; /* batch_size of the last batch/padded_batch stage; 0: no batching */
    int tokenizes;      /* the source (`tokenizer: char|word`) or a map op tokenizes text: the
                           train split builds a vocabulary, the test split needs one (unless
                           the tokenizer names its own `vocabulary:` file) */
    int batched;        /* the elements are batches (a batch or padded_batch stage) */
} tfc_data_plan;

/* Checks the configuration of `split`, the mapping {source: {...}, pipeline: [...]} under
 * data.train or data.test, completely and without opening any file: every key of the source,
 * the stages and the map ops (unknown keys, types, ranges, enum values, unknown source/stage/
 * op names with a did-you-mean, combinations of keys). Every error is reported at
 * FILE:LINE:COL with its key path (prefixed by opt->key, default "data"), appended to `err`
 * after the reports already there (TFC_ERR_CONFIG). Only opt->key is read (opt may be NULL).
 * On success fills *out (zeroed on error). Checks that need the data (a column name of a CSV
 * header, an op against the element shapes, files that a glob matches) wait for
 * tfc_pipeline_from_config. */
tfc_status tfc_pipeline_plan(const tfc_node *split, const tfc_data_options *opt,
                             tfc_data_plan *out, tfc_error *err);

/* Builds the pipeline described by `split`: first tfc_pipeline_plan's checks (all of the
 * split's config errors are reported before any data is read), then the source is opened and
 * the stages appended in order, each checked against the element spec of the stage before
 * it (TFC_ERR_CONFIG at the stage's mapping). Unreadable or invalid data is TFC_ERR_DATA /
 * TFC_ERR_IO naming the file and record. Returns NULL on error. Free with tfc_pipeline_free. */
tfc_pipeline *tfc_pipeline_from_config(const tfc_node *split, const tfc_data_options *opt,
                                       tfc_error *err);

/* The names each registry knows (NULL-terminated), for help and docs. */
const char *const *tfc_data_source_names(void);
const char *const *tfc_data_stage_names(void);
const char *const *tfc_data_op_names(void);

/* Prints the fields, defaults and help of the source, stage or map op `name` (`kind` is
 * "source", "stage" or "op"); returns 0 when the name is unknown. */
int tfc_data_print_help(FILE *f, const char *kind, const char *name);

/* ---- building in code --------------------------------------------------------------------- */

/* Sources. Each returns a pipeline holding only the source, or NULL with `err` filled.
 * `opt` may be NULL (defaults: seed 0, paths relative to the current directory). */

/* In-memory tensors sliced along axis 0 (tf.data's from_tensor_slices). The data is copied.
 * `labels` may be NULL; otherwise its dim[0] must equal features' dim[0]. */
tfc_pipeline *tfc_pipeline_from_tensors(const tfc_tensor *features, const tfc_tensor *labels,
                                        const tfc_data_options *opt, tfc_error *err);

/* MNIST IDX files, gzip or plain. `labels` may be NULL. (N, rows, cols) images yield
 * (rows, cols, 1) features; labels yield I32 scalars. */
tfc_pipeline *tfc_pipeline_from_idx(const char *images, const char *labels,
                                    const tfc_data_options *opt, tfc_error *err);

/* NumPy .npy arrays sliced along axis 0. `labels` may be NULL. */
tfc_pipeline *tfc_pipeline_from_npy(const char *features, const char *labels,
                                    const tfc_data_options *opt, tfc_error *err);

/* Appends a stage described in YAML flow text, exactly as written in a solver's pipeline
 * list, e.g. "map: {op: scale, factor: 0.5}" or "shuffle: {buffer_size: 100}". Any source
 * can likewise be opened from text with tfc_pipeline_from_yaml("{type: csv, file: a.csv}"). */
tfc_status tfc_pipeline_add_yaml(tfc_pipeline *p, const char *stage_yaml, tfc_error *err);
tfc_pipeline *tfc_pipeline_from_yaml(const char *source_yaml, const tfc_data_options *opt,
                                     tfc_error *err);

/* Stage appenders with tf.data's meanings. Each validates its arguments and the element
 * spec (e.g. batch needs fixed shapes only at run time) and returns TFC_ERR_CONFIG when they
 * are wrong. After an error the pipeline is unchanged. */
/* seed < 0: derived from the options' seed. */
tfc_status tfc_pipeline_shuffle(tfc_pipeline *p, int64_t buffer_size, int64_t seed,
                                int reshuffle_each_iteration, tfc_error *err);
tfc_status tfc_pipeline_repeat(tfc_pipeline *p, int64_t count, tfc_error *err); /* -1: forever */
tfc_status tfc_pipeline_batch(tfc_pipeline *p, int64_t batch_size, int drop_remainder,
                              tfc_error *err);
/* Pads every dimension of features (and of labels, when they are sequences) to the
 * longest in the batch, or to `padded_shape` (features only; -1 entries: longest) when
 * given; adds the lengths component (features' unpadded dim 0). */
tfc_status tfc_pipeline_padded_batch(tfc_pipeline *p, int64_t batch_size,
                                     const tfc_shape *padded_shape, double padding_value,
                                     int drop_remainder, tfc_error *err);
tfc_status tfc_pipeline_cache(tfc_pipeline *p, tfc_error *err);
tfc_status tfc_pipeline_take(tfc_pipeline *p, int64_t count, tfc_error *err);
tfc_status tfc_pipeline_skip(tfc_pipeline *p, int64_t count, tfc_error *err);
/* The shard_count a pipeline was dealt among (tfc_data_options), 1 when it was not. */
int tfc_pipeline_shard_count(const tfc_pipeline *p);

/* tf.data's shard: the elements at positions i % num_shards == index of each pass (the
 * others are skipped as ids where the stages below allow, unread). index in
 * [0, num_shards), else TFC_ERR_CONFIG. */
tfc_status tfc_pipeline_shard(tfc_pipeline *p, int64_t num_shards, int64_t index,
                              tfc_error *err);
tfc_status tfc_pipeline_prefetch(tfc_pipeline *p, int buffer_size, tfc_error *err);

/* What a map callback gets besides the element: where the element came from and a random
 * key for it. Draw with tfc_rng_uniform(ctx->key, 0, i) for i = 0, 1, ...: the key is a
 * function of (seed, stage, epoch, element index), so a callback that draws only from it is
 * deterministic under parallel calls, prefetching and resumption. */
typedef struct tfc_map_ctx {
    uint64_t key;   /* random key of this element in this stage */
    uint64_t epoch; /* the source's epoch the element comes from */
    uint64_t index; /* its index in the source (or its position in the stage's input) */
} tfc_map_ctx;

/* A user map: transforms `e` in place. To replace a component, call tfc_element_alloc (the
 * old buffer is freed). Must be reentrant when num_parallel_calls > 1. Returns TFC_OK or an
 * error status with `err` filled (TFC_ERR_DATA for bad data). */
typedef tfc_status (*tfc_map_fn)(tfc_element *e, const tfc_map_ctx *ctx, void *user,
                                 tfc_error *err);

/* A user predicate: nonzero keeps the element. Must be reentrant. */
typedef int (*tfc_filter_fn)(const tfc_element *e, void *user);

/* Appends a map with a user callback. `out_spec` is the element spec after the map (NULL:
 * unchanged). num_parallel_calls > 1 runs the callback on that many OpenMP threads of a
 * background team; the output order is always the input order. (Side effect: a parallel map
 * raises glibc's M_TRIM_THRESHOLD to 64 MiB, see src/data/map.c.) */
tfc_status tfc_pipeline_map(tfc_pipeline *p, tfc_map_fn fn, void *user,
                            const tfc_element_spec *out_spec, int num_parallel_calls,
                            tfc_error *err);
tfc_status tfc_pipeline_filter(tfc_pipeline *p, tfc_filter_fn fn, void *user, tfc_error *err);

/* (Re)allocates component `comp` of `e` as a zeroed tensor of `dtype` and `shape` owned by
 * the element; returns its data or NULL when out of memory / the size overflows. */
void *tfc_element_alloc(tfc_element *e, int comp, tfc_dtype dtype, const tfc_shape *shape);

/* ---- running ------------------------------------------------------------------------------ */

/* The next element into `out` (views owned by the pipeline), or out->end = 1 at the end.
 * Bad data is TFC_ERR_DATA naming the file and the record; after an error the pipeline may
 * only be reset, restored or freed. */
tfc_status tfc_pipeline_next(tfc_pipeline *p, tfc_batch *out, tfc_error *err);

/* Names the record that row `row` of the element tfc_pipeline_next last handed out came
 * from ("FILE record 17", "FILE:12"; for comp TFC_COMP_LABELS the file its label is in, for
 * input k's component tfc_input_comp(k) the file of input k, for label k's tfc_label_comp(k)
 * that of label k): 1, or 0 with buf "" when that is not known (a row without a record, a
 * batch restored from a version 1 state). Row 0 of an unbatched element is the element. */
int tfc_pipeline_describe_row(const tfc_pipeline *p, int comp, int64_t row, char *buf,
                              size_t size);

/* The spec of the elements tfc_pipeline_next yields. */
const tfc_element_spec *tfc_pipeline_element_spec(const tfc_pipeline *p);

/* The inputs the pipeline's elements carry: returns their count (>= 1) and, when names is
 * not NULL, points names[k] (room for TFC_MAX_INPUTS) at input k's name ("" for a single
 * unnamed input), strings owned by the pipeline. */
int tfc_pipeline_inputs(const tfc_pipeline *p, const char **names);

/* The labels the pipeline's elements carry: returns their count (0 without labels) and,
 * when names is not NULL, points names[k] (room for TFC_MAX_LABELS) at label k's name (""
 * for a single unnamed label), strings owned by the pipeline. */
int tfc_pipeline_labels(const tfc_pipeline *p, const char **names);

/* Starts the data set again (a new epoch for the sources: reshuffling shuffles draw a new
 * order), as re-iterating a tf.data dataset does. Used for each pass over the test split. */
void tfc_pipeline_reset(tfc_pipeline *p);

/* Saves the pipeline's exact position (a versioned byte blob: epochs, offsets, shuffle
 * buffers by element index, random counters; buffered batches of prefetch by value, with the
 * record each row came from) into a malloc'd buffer the caller frees. A fresh pipeline built
 * from the same configuration and restored from it yields exactly the elements the saved one
 * would have, and tfc_pipeline_describe_row names their rows' records alike. Blobs of the
 * earlier formats still restore: version 1 (before the rows' records were saved; its
 * buffered batches' rows are then described as unknown) and version 2 (before elements of
 * several inputs, whose components version 3 counts; a version 3 blob of 10 components,
 * written before elements of several labels, restores as well). Before saving, the buffers of
 * prefetch and parallel maps are filled (read on in the caller's thread up to their size,
 * the input's end or a failing element), so the blob depends on the position alone: two
 * pipelines at the same element save the same bytes however far their threads had read. */
tfc_status tfc_pipeline_save_state(tfc_pipeline *p, void **bytes, size_t *len, tfc_error *err);

/* Restores a position saved by tfc_pipeline_save_state. The blob is untrusted: a blob from
 * another pipeline configuration, truncated or corrupt, is TFC_ERR_FORMAT and leaves the
 * pipeline reset to its start. */
tfc_status tfc_pipeline_restore_state(tfc_pipeline *p, const void *bytes, size_t len,
                                      tfc_error *err);

/* A split whose source has records but whose stages leave none, found before any work:
 * where a stage may leave out every element (filter, take, skip, shard, a batch dropping
 * its remainder), draws the first element and puts the pipeline back exactly where it was
 * (its saved state, and the first pass's count of skipped records); none is TFC_ERR_DATA
 * "KEY yields no elements: pipeline[N].STAGE leaves none of the source's M records". Bad
 * data met on the way is its error, as tfc_pipeline_next's. */
tfc_status tfc_pipeline_check_yields(tfc_pipeline *p, tfc_error *err);

/* Records a source skipped because of bad data with `on_error: skip` (0 otherwise). */
int64_t tfc_pipeline_skipped(const tfc_pipeline *p);
/* Where the first few of them were ("FILE record 17, FILE:3, ..."; "" when none). */
const char *tfc_pipeline_skipped_names(const tfc_pipeline *p);

/* The number of records the source yields in one epoch (before any stage). */
int64_t tfc_pipeline_source_size(const tfc_pipeline *p);

/* Class names when the source knows them (images folders, text `label: file`), else NULL;
 * *n gets their count. */
const char *const *tfc_pipeline_class_names(const tfc_pipeline *p, int *n);

/* How many of the source's records (one epoch, before any stage: filters and maps are not
 * applied) carry each class label in [0, classes), into counts[classes]; labels outside
 * are not counted. TFC_ERR_CONFIG when the source has no integer label per record. Reads
 * no features (idx, npy, csv, tensors, images, audio, text with `label: file`). */
tfc_status tfc_pipeline_label_counts(const tfc_pipeline *p, int classes, int64_t *counts,
                                     tfc_error *err);

/* The first record whose class label lies outside [0, classes), read as
 * tfc_pipeline_label_counts reads them (no features), when every record's label reaches the
 * end of the pipeline unchanged (stages shuffle, repeat, batch, padded_batch,
 * bucket_by_sequence_length, cache, prefetch, and maps that leave the labels' dtype; no
 * filter, take, skip or shard, which may leave a record out): its label into *value (-1
 * also for a tfrecord label that is missing), "FILE record N" into buf, 1. 0 when every
 * label is in range or the source or stages do not allow the check. */
int tfc_pipeline_find_label_outside(const tfc_pipeline *p, int classes, int64_t *value,
                                    char *buf, size_t size);

/* The vocabulary of the pipeline's tokenizer, or NULL when it has none. */
const tfc_vocab *tfc_pipeline_vocab(const tfc_pipeline *p);

/* ---- profile ------------------------------------------------------------------------------ */

/* What one stage did since the pipeline was made (or tfc_pipeline_profile_clear), as the
 * always-on profiler estimates it from its timed calls (tfc_data_options.profile_every). */
typedef struct tfc_stage_profile {
    char name[96];    /* "source (idx)", "pipeline[2].map decode_image", "prefetch" */
    int64_t elements; /* elements it made (fetched by id, when ids pass through it) */
    double busy_s;    /* its own work, summed over the threads doing it */
    double path_s;    /* busy_s as it lengthens the pipeline: work spread over N threads
                         counts 1/N (a parallel map's workers, the reads they make) */
    double waited_s;  /* the time its consumer spent in its calls (own work, the work of
                         the stages below on that thread, waits for its threads) */
    int threads;      /* threads its work is spread over */
} tfc_stage_profile;

/* The profile of every stage, source first, into out[0..cap); returns the stage count.
 * Safe while the pipeline's threads run (the counts are then a moment's snapshot). */
int tfc_pipeline_profile(const tfc_pipeline *p, tfc_stage_profile *out, int cap);
/* The slowest stage (largest path_s; -1 when nothing was timed) and what to try, as one
 * sentence into buf: "pipeline[1].map decode_image does 81% of the pipeline's work: try
 * num_parallel_calls: 2 on it ...". */
int tfc_pipeline_profile_advice(const tfc_pipeline *p, char *buf, size_t size);
/* Prints the per-stage table and the advice; `wall_s` (> 0) is the time the elements took,
 * for elements/s. */
void tfc_pipeline_profile_print(const tfc_pipeline *p, double wall_s, FILE *f);
/* Starts the counts again (e.g. after a warm-up). */
void tfc_pipeline_profile_clear(tfc_pipeline *p);

void tfc_pipeline_free(tfc_pipeline *p);

/* ---- helpers other modules use -------------------------------------------------------------- */

/* The NumPy name of a dtype ("float32", "int64", ...; "?" when out of range). */
const char *tfc_data_dtype_name(tfc_dtype dt);

/* The names of the inputs of `spec`, ", "-joined ("title, body"; "features" for a single
 * unnamed input), into buf. */
char *tfc_data_inputs_str(const tfc_element_spec *spec, char *buf, size_t size);
/* The names of the labels of `spec`, ", "-joined ("main, aux"; "labels" for a single
 * unnamed label, "" for none), into buf. */
char *tfc_data_labels_str(const tfc_element_spec *spec, char *buf, size_t size);

/* Formats a component spec as "float32 (-1, 28, 28, 1)". */
char *tfc_data_spec_str(const tfc_component_spec *c, char *buf, size_t size);

/* Writes a tensor as a NumPy .npy file (version 1.0, little-endian, C order). */
tfc_status tfc_npy_write(const char *path, const tfc_tensor *t, tfc_error *err);

/* TFRecord files of tf.train.Example records, as TensorFlow's TFRecordWriter writes them
 * (gzip: its compression_type "GZIP"), read back by the tfrecord source. Each record holds
 * `n` features, keys[i] → values[i]: uint8 and int8 tensors as one bytes_list value of
 * their raw bytes (tf.io.decode_raw), floating-point ones as a float_list (float32), other
 * integers and bool as an int64_list; a tensor's shape is not stored (the reader declares
 * it). Close reports a failing write or flush and frees the writer either way. */
typedef struct tfc_tfrecord_writer tfc_tfrecord_writer;
tfc_tfrecord_writer *tfc_tfrecord_writer_open(const char *path, int gzip, tfc_error *err);
tfc_status tfc_tfrecord_write(tfc_tfrecord_writer *w, int n, const char *const *keys,
                              const tfc_tensor *values, tfc_error *err);
tfc_status tfc_tfrecord_writer_close(tfc_tfrecord_writer *w, tfc_error *err);

/* Reads a .npy file into a malloc'd tensor (t->data to be freed by the caller). */
tfc_status tfc_npy_read(const char *path, tfc_tensor *t, tfc_error *err);

/* Parses .npy bytes; `name` stands for the file in errors. Same ownership as tfc_npy_read. */
tfc_status tfc_npy_parse(const void *buf, size_t len, const char *name, tfc_tensor *t,
                         tfc_error *err);

/* Parses IDX bytes (plain or gzip-compressed) into a malloc'd tensor in host byte order. */
tfc_status tfc_idx_parse(const void *buf, size_t len, const char *name, tfc_tensor *t,
                         tfc_error *err);

/* Image limits (SPEC §5a) and decoding of PNG (8/16-bit, grey, grey+alpha, palette, RGB,
 * RGBA) and JPEG (grey, RGB, CMYK) bytes. channels 0 keeps the stored channel count (1, 2,
 * 3 or 4); 1, 3 or 4 converts. The result is U8 (H, W, C) in a malloc'd t->data. libpng and
 * libjpeg errors are caught and returned as TFC_ERR_DATA naming `name`; never fatal. */
typedef struct tfc_image_limits {
    int64_t max_side;   /* default 16384 */
    int64_t max_pixels; /* default 2^28 */
} tfc_image_limits;
#define TFC_IMAGE_MAX_SIDE 16384
#define TFC_IMAGE_MAX_PIXELS (1ll << 28)

tfc_status tfc_image_decode(const void *buf, size_t len, const char *name, int channels,
                            const tfc_image_limits *lim, tfc_tensor *t, tfc_error *err);

/* A pool of reusable decoder states, so decoding many images does not set a decoder up for
 * each (about a tenth of a small JPEG's decode time). Thread-safe: decoders are taken and
 * returned under a lock. tfc_image_decode is tfc_image_decode_with(NULL, ...). */
typedef struct tfc_image_pool tfc_image_pool;
tfc_image_pool *tfc_image_pool_new(void);
void tfc_image_pool_free(tfc_image_pool *pool);
tfc_status tfc_image_decode_with(tfc_image_pool *pool, const void *buf, size_t len,
                                 const char *name, int channels, const tfc_image_limits *lim,
                                 tfc_tensor *t, tfc_error *err);

/* A WAV file's own description: its sampling rate, channels and frames. */
typedef struct tfc_wav_info {
    uint32_t rate;
    int channels;
    int64_t frames;
} tfc_wav_info;

/* Decodes the RIFF WAVE file buf[0, len) (data/wav.c: PCM of 8, 16, 24 or 32 bits, IEEE float
 * of 32 or 64, WAVE_FORMAT_EXTENSIBLE of those) into *out, F32 (frames, channels), samples
 * v / 2^(bits - 1) as tf.audio.decode_wav scales 16-bit ones (8-bit unsigned: (v - 128) /
 * 128). channels > 0 keeps the file's first channels or repeats its last (decode_wav's
 * desired_channels; 0: the file's); frames >= 0 crops or pads with zeros to that many
 * (desired_samples; -1: the file's). *info (may be NULL) gets the file's own description.
 * Errors name `name` (TFC_ERR_DATA). */
tfc_status tfc_wav_decode(const void *buf, size_t len, const char *name, int channels,
                          int64_t frames, tfc_wav_info *info, tfc_tensor *out, tfc_error *err);

/* Encoders used by tests, benchmarks and tools: U8 (H, W, C) pixels, C in 1..4 (PNG; with
 * bit_depth 16 the samples are u16) or C 1 or 3 (JPEG, quality 1..100). */
tfc_status tfc_image_write_png(const char *path, const void *pixels, int width, int height,
                               int channels, int bit_depth, tfc_error *err);
tfc_status tfc_image_write_jpeg(const char *path, const uint8_t *pixels, int width, int height,
                                int channels, int quality, tfc_error *err);
/* The PNG of U8 (H, W, C) pixels (8 bits, C in 1..4) in memory: *out malloc'd, *len bytes. */
tfc_status tfc_image_encode_png(const void *pixels, int width, int height, int channels,
                                void **out, size_t *len, tfc_error *err);

/* ---- text vocabularies --------------------------------------------------------------------- */

typedef enum tfc_tokenizer {
    TFC_TOKENIZER_CHAR = 0,
    TFC_TOKENIZER_WORD,
    TFC_TOKENIZER_KERAS /* Keras's TextVectorization (the text_vectorization op) */
} tfc_tokenizer;

/* The settings of Keras's TextVectorization that decide a vocabulary's ids (docs/data.md,
 * "text_vectorization"). */
typedef enum tfc_standardize {
    TFC_STANDARDIZE_NONE = 0,
    TFC_STANDARDIZE_LOWER_AND_STRIP_PUNCTUATION,
    TFC_STANDARDIZE_LOWER,
    TFC_STANDARDIZE_STRIP_PUNCTUATION,
    TFC_STANDARDIZE_COUNT
} tfc_standardize;
typedef enum tfc_text_split {
    TFC_TEXT_SPLIT_NONE = 0,
    TFC_TEXT_SPLIT_WHITESPACE,
    TFC_TEXT_SPLIT_CHARACTER,
    TFC_TEXT_SPLIT_COUNT
} tfc_text_split;
typedef enum tfc_text_output {
    TFC_TEXT_INT = 0,
    TFC_TEXT_ONE_HOT,
    TFC_TEXT_MULTI_HOT,
    TFC_TEXT_COUNT,
    TFC_TEXT_TF_IDF,
    TFC_TEXT_OUTPUT_COUNT
} tfc_text_output;
#define TFC_TEXT_MAX_NGRAMS 8
typedef struct tfc_text_spec {
    int standardize; /* tfc_standardize */
    int split;       /* tfc_text_split */
    int output_mode; /* tfc_text_output */
    int nngrams;     /* 0: the tokens as split; else n-grams of each width in order */
    int ngrams[TFC_TEXT_MAX_NGRAMS];
} tfc_text_spec;

/* char and word: id 0 is padding ("<pad>"), id 1 unknown ("<unk>"); tokens follow by
 * falling count, ties in byte order. Keras (TextVectorization): output_mode int starts with
 * "" (padding, the mask) and "[UNK]", the other modes with "[UNK]" alone; tokens follow by
 * falling count, ties in falling byte order (Keras's adapt). A vocabulary file holds a
 * header line (tokenizer and its settings) and one escaped token per line (tf_idf: a tab
 * and its idf weight after it); line i + 2 is id i. */
tfc_vocab *tfc_vocab_load(const char *path, tfc_error *err);
tfc_status tfc_vocab_save(const tfc_vocab *v, const char *path, tfc_error *err);
/* The vocabulary's fingerprint: 16 hex digits of the 64-bit FNV-1a hash of the file
 * tfc_vocab_save writes (tokenizer, lowercase and every token in id order), so a saved and
 * reloaded vocabulary hash alike ("" when memory ran out: nothing is recorded or checked).
 * Weights record it (metadata "vocabulary") and prediction refuses a vocabulary whose hash
 * differs. */
void tfc_vocab_hash(const tfc_vocab *v, char out[17]);
int64_t tfc_vocab_size(const tfc_vocab *v);
tfc_tokenizer tfc_vocab_tokenizer(const tfc_vocab *v);
/* The token of id, NUL-terminated (unescaped), or NULL when out of range. */
const char *tfc_vocab_token(const tfc_vocab *v, int64_t id);
/* Tokenizes `text` into ids (unknown tokens → 1). Returns the number of tokens, writing at
 * most `cap` of them into `ids` (ids may be NULL to count). */
int64_t tfc_vocab_encode(const tfc_vocab *v, const char *text, size_t len, int32_t *ids,
                         int64_t cap);
/* A Keras vocabulary's settings, or NULL for char and word. */
const tfc_text_spec *tfc_vocab_text_spec(const tfc_vocab *v);
/* tf_idf: the idf weight of each id (tfc_vocab_size of them), else NULL. */
const float *tfc_vocab_idf(const tfc_vocab *v);
/* TextVectorization's output for one text into `out`, `width` values: output_mode int gives
 * int32 ids, zero-padded or cut to width (output_sequence_length); the other modes float32
 * (one_hot, multi_hot, count, tf_idf) over width >= tfc_vocab_size ids (pad_to_max_tokens:
 * width max_tokens). Returns the number of tokens the text has, -1 out of memory, -2 width
 * below the vocabulary's size. */
int64_t tfc_vocab_vectorize(const tfc_vocab *v, const char *text, size_t len, void *out,
                            int64_t width);
/* A Keras vocabulary of n tokens in id order (with its special tokens), lens[i] bytes each;
 * idf: n weights (tf_idf), else NULL. *dup is the index of a repeated token (or -1). */
tfc_vocab *tfc_vocab_keras(const tfc_text_spec *ts, const char *const *tokens,
                           const size_t *lens, int64_t n, const float *idf, int64_t *dup,
                           tfc_error *err);
void tfc_vocab_free(tfc_vocab *v);

#endif
