/* Internals of the input pipeline shared by the files of src/data: owned elements, the byte
 * buffers of saved state, random-access sources, the stage vtable, the map ops, and the
 * definitions (name, field table, check, open or push) that registry.c lists and the
 * configuration walk of from_config.c calls. A stage is "lazy" when it can hand out element
 * ids without materialising elements (next_id) and "fetchable" when it can materialise any id
 * it handed out (fetch): parallel maps and shuffles use that to decode in parallel and to
 * save buffers as ids. */
#ifndef TFC_DATA_INTERNAL_H
#define TFC_DATA_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "core/schema.h"
#include "data/data.h"

/* ---- owned elements ---------------------------------------------------------------------- */

/* Where an element came from: the source's epoch (how many times it was restarted) and the
 * record index. Map randomness is keyed by it, so re-materialising an id gives the same
 * element. Elements made by batch have no id; they carry their rows' ids instead, for
 * messages naming a row's record. */
typedef struct elem_id {
    uint64_t epoch, index;
} elem_id;

typedef struct elem {
    tfc_element e; /* component buffers owned by the element */
    elem_id id;
    int has_id;
    elem_id *rows; /* a batch's: row i came from rows[i] (owned; NULL: not known, as when a
                      row had no id or after restoring a version 1 state) */
    int64_t nrows;
} elem;

/* tfc_element_alloc without zeroing, for ops that write every value. */
void *tfc_elem_alloc_uninit(tfc_element *e, int comp, tfc_dtype dtype, const tfc_shape *shape);
void tfc_elem_free(elem *x);              /* frees the buffers, leaves x empty */
void tfc_elem_move(elem *dst, elem *src); /* frees dst, moves src into it, empties src */
tfc_status tfc_elem_copy(elem *dst, const elem *src, tfc_error *err); /* deep copy into empty dst */
/* The element key of a map draw: f(stage key, epoch, index). */
uint64_t tfc_elem_key(uint64_t stage_key, uint64_t epoch, uint64_t index);

/* numel * dtype size of a component (0 when absent). */
size_t tfc_data_tensor_bytes(const tfc_tensor *t);
/* Bounded, overflow-checked byte count of dtype × shape; -1 on overflow or > limit. */
int64_t tfc_data_bytes_checked(tfc_dtype dt, const tfc_shape *s, int64_t limit);

/* NumPy names of the dtypes, indexed by tfc_dtype and NULL-terminated (an enum's choices). */
extern const char *const tfc_data_dtype_names[];

/* Hashes identifying a stage's kind and arguments in saved state (values are part of the
 * state format: they must not change). */
uint64_t tfc_data_hash_mix(uint64_t h, uint64_t v);
uint64_t tfc_data_hash_str(uint64_t h, const char *s); /* FNV-1a of s, mixed into h */

/* ---- saved state --------------------------------------------------------------------------- */

typedef struct wbuf {
    unsigned char *p;
    size_t len, cap;
    int oom;
} wbuf;

typedef struct rbuf {
    const unsigned char *p;
    size_t len, pos;
    int bad; /* set on any short read; readers check it once at the end */
    uint64_t version; /* the blob's format (tfc_pipeline_restore_state): 1 has no row ids */
} rbuf;

void tfc_wbuf_u64(wbuf *w, uint64_t v);
void tfc_wbuf_bytes(wbuf *w, const void *b, size_t n);
/* An element: has_id, id, then with its data the component count and per component
 * presence, dtype, shape and the raw bytes, and the ids of a batch's rows (a count, then
 * epoch and index of each; 0 when not known). */
void tfc_wbuf_elem(wbuf *w, const elem *x, int with_data);
uint64_t tfc_rbuf_u64(rbuf *r);
const void *tfc_rbuf_bytes(rbuf *r, size_t n); /* NULL (and r->bad) when fewer than n remain */
/* Reads an element written by tfc_wbuf_elem; with_data 0 reads only the id. A version 1
 * blob has no row ids: its batches come back without them; versions 1 and 2 have no
 * component count (three components: features, labels, lengths). */
tfc_status tfc_rbuf_elem(rbuf *r, elem *x, int with_data, tfc_error *err);

/* ---- sources -------------------------------------------------------------------------------- */

typedef struct source source;

typedef struct source_ops {
    const char *type;
    /* Record i into e (empty on entry). Must be reentrant: parallel maps call it from
     * several threads. Errors name the file and the record. */
    tfc_status (*get)(source *s, int64_t i, tfc_element *e, tfc_error *err);
    /* "FILE record 17" (or "FILE:LINE") for messages about record i. */
    void (*describe)(const source *s, int64_t i, char *buf, size_t size);
    /* The same for record i's label, where it lives in another file (NULL: describe). */
    void (*describe_label)(const source *s, int64_t i, char *buf, size_t size);
    /* The same for record i's component comp of an input k >= 1 or a label k >= 1, where it
     * lives in another file (NULL: describe). */
    void (*describe_comp)(const source *s, int comp, int64_t i, char *buf, size_t size);
    /* Record i's class label without reading its features (-1: it has no single integer
     * label); NULL when the source cannot tell labels apart from records cheaply. */
    int64_t (*label)(const source *s, int64_t i);
    void (*free)(source *s);
} source_ops;

struct source {
    const source_ops *ops;
    const char *kind;       /* the configured type when ops serve several (a static string:
                               "idx" for the array source); NULL: ops->type */
    int64_t count;          /* records per epoch */
    tfc_element_spec spec;  /* spec of one record */
    int get_may_fail;       /* get can fail on bad data (decoding at read time) */
    int skip_errors;        /* on_error: skip */
    int64_t skipped;        /* records dropped while opening (on_error: skip) */
    char skip_names[400];   /* where the first TFC_SKIP_NAMES skipped records were, ", "-joined */
    int nskip_names;
    char **class_names;     /* owned, or NULL */
    int nclasses;
};

void tfc_source_free(source *s);
/* How many skipped records (on_error: skip) messages name. */
#define TFC_SKIP_NAMES 3
/* Notes where a skipped record was ("FILE record 17", "FILE:LINE"), when it is one of the
 * first TFC_SKIP_NAMES; counting it is the caller's. */
void tfc_source_name_skip(source *s, const char *where);
/* `classes:` (a list of names, checked) as new names of the classes the source has (its
 * labels unchanged), keeping their count, else an error at the list (key: the source's). */
tfc_status tfc_source_rename_classes(source *src, const tfc_node *classes, const char *key,
                                     tfc_error *err);
/* Sets class names from an array of strings (copied). */
tfc_status tfc_source_set_classes(source *s, const char *const *names, int n, tfc_error *err);
/* Checks integer labels against [0, num_classes) (num_classes > 0); 0 with *bad_value set
 * when one is outside. */
int tfc_data_labels_in_range(const tfc_tensor *labels, int num_classes, int64_t *bad_value);

/* Joins base_dir and a relative path into a malloc'd string (absolute paths unchanged). */
char *tfc_data_path_join(const char *base_dir, const char *path);
/* A source's file: replaces *path (unless NULL) by its resolution against opt->base_dir
 * (opt may be NULL), a malloc'd string also stored in *owned for the caller to free. */
tfc_status tfc_data_resolve(const tfc_data_options *opt, const char **path, char **owned,
                            tfc_error *err);

/* `files:` of the text and tfrecord sources: a path or a list of paths, where glob patterns
 * expand to their matches (sorted) and `exclude` (NULL, a pattern or a list of them) leaves
 * out the base names it matches. check: the node's shape, at config time; expand: the
 * paths resolved against opt->base_dir (a pattern matching nothing is an error at its item). */
typedef struct tfc_path_list {
    char **v;
    int n, cap;
} tfc_path_list;
tfc_status tfc_data_check_files(const tfc_node *files, const char *key, tfc_error *err);
tfc_status tfc_data_expand_files(const tfc_node *files, const tfc_node *exclude,
                                 const tfc_data_options *opt, const char *key,
                                 tfc_path_list *out, tfc_error *err);
void tfc_path_list_free(tfc_path_list *l);
/* The entries of folder `dir` in byte order, hidden ones left out: its sub-folders
 * (keep_file NULL), else its regular files whose names keep_file accepts. NULL on error (err
 * set); free with tfc_data_free_names. */
char **tfc_data_list_dir(const char *dir, int (*keep_file)(const char *name), int *n,
                         tfc_error *err);
void tfc_data_free_names(char **v, int n);
/* The files keep_file accepts in folder `dir` and in the folders under it (hidden ones and
 * symbolic links to folders left out), as Keras's *_dataset_from_directory walks a class
 * folder: folder by folder in the byte order of their paths, in byte order within one;
 * their paths (dir/...) appended to out. */
tfc_status tfc_data_walk_files(const char *dir, int (*keep_file)(const char *name),
                               tfc_path_list *out, tfc_error *err);
/* A folder of class folders, as Keras's *_dataset_from_directory reads one: its sub-folders
 * in byte order are the classes (their names the source's class names; more than
 * num_classes, when > 0, is an error), and the files that keep_file accepts in each one and
 * in the folders under it (tfc_data_walk_files) go to add(s, NULL, the file's path, class
 * index) (nonzero: out of memory). No
 * sub-folder, or no file (`kind` names the files wanted: ".wav"), is an error naming the
 * folder. */
tfc_status tfc_data_class_folders(source *s, const char *directory,
                                  int (*keep_file)(const char *name), const char *kind,
                                  int num_classes, const tfc_node *classes, const char *key,
                                  int (*add)(source *s, const char *dir, const char *name,
                                             int32_t label),
                                  tfc_error *err);
/* The class folders of `directory`: its sub-folders in byte order (hidden ones left out), or,
 * with `classes:` (not NULL), those it names in its order, as Keras's class_names picks and
 * orders them (a subset; a name that is no sub-folder is an error at the list, key the
 * source's). NULL on error; free with tfc_data_free_names. */
char **tfc_data_class_dirs(const char *directory, const tfc_node *classes, const char *key,
                           int *n, tfc_error *err);

/* The array source behind tensors, idx and npy: takes ownership of the tensors' data
 * (features (N, ...), labels (N, ...) or data NULL). `record_shape` (ndim >= 0) reshapes
 * each features row (idx adds the channel axis). Labels outside [0, num_classes) are an
 * error naming the file and record, or dropped and counted with on_error skip. */
tfc_status tfc_source_array(source **out, const char *type, tfc_tensor *features,
                            tfc_tensor *labels, const tfc_shape *record_shape,
                            const char *fname, const char *lname, int num_classes, int on_error,
                            tfc_error *err);

/* Makes the array source `s` (tfc_source_array's) one of n named inputs (Keras input
 * names, checked by tfc_data_check_inputs): its features are input 0, names[0]; more[k - 1]
 * (N, ...) is input k, read from files[k - 1], for k in [1, n). Takes the tensors' data
 * (freed with the source, also on error). Rows unlike the features' are TFC_ERR_DATA
 * naming both files. */
tfc_status tfc_source_array_inputs(source *s, int n, const char *const *names, tfc_tensor *more,
                                   const char *const *files, tfc_error *err);
/* Checks `map`, the mapping {name: value} of a source's several inputs at key path `key`:
 * Keras input names (a letter or _, then letters, digits and _; at most 63 bytes), none of
 * features, labels and lengths (the components' own names), 1 to TFC_MAX_INPUTS of them
 * (the YAML loader refuses a key written twice). Errors at the offending key
 * (TFC_ERR_CONFIG); every one of them is reported. */
tfc_status tfc_data_check_inputs(const tfc_node *map, const char *key, tfc_error *err);
/* Makes the array source `s` one of n named labels (Keras output names, checked by
 * tfc_data_check_labels): the labels given to tfc_source_array are label 0, names[0] (the
 * only one num_classes and on_error check); more[k - 1] (N, ...) is label k, read from
 * files[k - 1], for k in [1, n), each of its own dtype and record shape. Takes the tensors'
 * data as tfc_source_array_inputs does; rows unlike the features' are TFC_ERR_DATA naming
 * both files. */
tfc_status tfc_source_array_labels(source *s, int n, const char *const *names, tfc_tensor *more,
                                   const char *const *files, tfc_error *err);
/* tfc_data_check_inputs for `map`, the mapping {name: value} of a source's several labels:
 * Keras output names, 1 to TFC_MAX_LABELS of them, none the name of an input of `inputs`
 * (the source's mapping of several inputs; NULL or not a mapping: none), since Keras's
 * inputs and outputs are layers, whose names are unique in a model (and `component:` and
 * tfc-data's files name either by its name alone). */
tfc_status tfc_data_check_labels(const tfc_node *map, const tfc_node *inputs, const char *key,
                                 tfc_error *err);
/* The label k of component comp (0 for TFC_COMP_LABELS), -1 when comp is no label's. */
int tfc_data_label_of(int comp);

/* `timeseries:` of the csv and npy sources (timeseries.c): the table's rows are not the
 * records; windows of sequence_length rows, sampling_rate apart, are, one starting every
 * sequence_stride rows from start_index, wholly before end_index (0: the table's end), as
 * Keras's timeseries_dataset_from_array makes them. A window starting at row r has the labels
 * row r + target_offset as its target (Keras's targets=labels[target_offset:]). */
typedef struct ts_args {
    int sequence_length; /* 0: the source is not windowed */
    int sequence_stride, sampling_rate, start_index, end_index, target_offset;
    const tfc_node *at;  /* the mapping (errors found once the table is read point into it;
                            may be NULL) */
} ts_args;
/* Reads the `timeseries:` mapping n (NULL or null: not windowed) into *ts; key is the
 * source's key path. Reports what the mapping alone shows (unknown and refused keys,
 * end_index <= start_index). */
tfc_status tfc_timeseries_check(const tfc_node *n, const char *key, ts_args *ts, tfc_error *err);
/* The windowed source over a table (N, ...) and optional labels (M, ...), taking the tensors'
 * data; errors that depend on the table's length (a window longer than the rows, indices
 * past the end) are configuration errors at the mapping's keys (key: the source's key path).
 * Integer labels outside [0, num_classes) (num_classes > 0) are an error naming the file and
 * record. */
tfc_status tfc_source_timeseries(source **out, const char *type, tfc_tensor *table,
                                 tfc_tensor *labels, const ts_args *ts, const char *fname,
                                 const char *lname, int num_classes, const char *key,
                                 tfc_error *err);

/* The arguments of the sources reading a features file and an optional labels file into
 * the array source (idx calls its features `images`). */
typedef struct file_pair_args {
    const char *type;
    const char *features, *labels;
    int num_classes;
    int on_error;
    const tfc_node *timeseries; /* npy: windows of the features' rows (NULL: records) */
    ts_args ts;                 /* read from it by the check */
    const char *key;            /* the source's key path (set by open) */
    /* npy: `features:` as written, a file or {input name: file}; its check fills features
     * (input 0's file) and, for a mapping, the inputs' names and files (ninputs 0: one
     * unnamed input) */
    const tfc_node *features_node;
    int ninputs;
    const char *input_names[TFC_MAX_INPUTS], *input_files[TFC_MAX_INPUTS];
    /* npy: `labels:` likewise, a file or {label name: file}: labels (label 0's file), and for
     * a mapping the labels' names and files (nlabels 0: none or one unnamed label) */
    const tfc_node *labels_node;
    int nlabels;
    const char *label_names[TFC_MAX_LABELS], *label_files[TFC_MAX_LABELS];
} file_pair_args;
typedef tfc_status (*file_pair_load)(source **out, const file_pair_args *a, tfc_error *err);
/* The open of those sources: resolves both files, applies opt->num_classes, calls load. */
tfc_status tfc_source_open_pair(const file_pair_args *a, const tfc_data_options *opt,
                                file_pair_load load, source **out, tfc_error *err);

/* Fields of every source (type, on_error) and of those with integer labels (num_classes).
 * `on_error:` takes ON_ERROR_*, whose names tfc_data_on_error_names lists. */
enum { ON_ERROR_FAIL = 0, ON_ERROR_SKIP, ON_ERROR_COUNT };
extern const char *const tfc_data_on_error_names[];

#define SOURCE_TYPE_FIELD(T)                                                                  \
    {"type", TFC_F_STRING, offsetof(T, type), NULL, TFC_UNBOUNDED, NULL, "the source type"}
#define SOURCE_ON_ERROR_FIELD(T)                                                              \
    {"on_error", TFC_F_ENUM, offsetof(T, on_error), "fail", TFC_UNBOUNDED,                    \
     tfc_data_on_error_names, "fail: bad records are errors; skip: they are counted and left out"}
#define SOURCE_NUM_CLASSES_FIELD(T)                                                           \
    {"num_classes", TFC_F_INT, offsetof(T, num_classes), "0", 0, 1 << 30, NULL,               \
     "> 0: integer labels must lie in [0, num_classes)"}

/* The arguments of the CSV and text sources, which the fuzzers build directly. */
enum { CSV_LABEL_INT32 = 0, CSV_LABEL_FLOAT32, CSV_LABEL_STRING, CSV_LABEL_COUNT };
typedef struct csv_args {
    const char *type;
    const char *file;
    int header;
    const char *delimiter;
    const tfc_node *label_column;    /* name or index; NULL: none */
    const tfc_node *feature_columns; /* list of names or indices; NULL: all but the label */
    const tfc_node *text_column;     /* name or index: features are its text; NULL: numbers */
    const tfc_node *string_lookup;   /* {column: [vocabulary]}: those feature columns one-hot */
    int label_dtype;                 /* CSV_LABEL_* */
    const tfc_node *classes;         /* the source's `classes:` (not a field): string labels'
                                        order; NULL: their sorted distinct values */
    int num_classes;
    int on_error;
    const char *key;                 /* key path of column errors (not a field) */
    const tfc_node *timeseries;      /* windows of the rows (NULL: one record a row) */
    ts_args ts;                      /* read from it by the check */
} csv_args;

enum { TEXT_FORMAT_LINES = 0, TEXT_FORMAT_FORTUNE, TEXT_FORMAT_FILE, TEXT_FORMAT_COUNT };
enum { TEXT_LABEL_NONE = 0, TEXT_LABEL_FILE, TEXT_LABEL_FOLDER, TEXT_LABEL_COUNT };
enum { TEXT_TOKENIZER_NONE = 0, TEXT_TOKENIZER_CHAR, TEXT_TOKENIZER_WORD, TEXT_TOKENIZER_COUNT };
enum { SPLIT_PART_TRAIN = 0, SPLIT_PART_TEST, SPLIT_PART_COUNT };
/* `split: {every: N, part: train|test, offset: K}` of the text, images and audio sources:
 * record r (of the source's whole ordered list) is in the test part when r % N == K. every
 * 0: no split (every record kept). */
typedef struct tfc_split_rule {
    int every, part, offset;
} tfc_split_rule;
/* Reads `split` (NULL or null: no split) at key path KEY.split; errors are configuration
 * errors there. */
tfc_status tfc_data_split_read(const tfc_node *split, const char *key, tfc_split_rule *out,
                               tfc_error *err);
/* Whether the rule keeps record r */
int tfc_data_split_keeps(const tfc_split_rule *rule, int64_t r);
/* `lowercase:` of the text source and the tokenize op. */
enum { LOWERCASE_AUTO = 0, LOWERCASE_TRUE, LOWERCASE_FALSE, LOWERCASE_COUNT };
typedef struct text_args {
    const char *type;
    const tfc_node *files;
    const char *directory; /* one sub-folder of .txt files per class, instead of files */
    const tfc_node *exclude;
    int format; /* TEXT_FORMAT_* */
    int label;  /* TEXT_LABEL_* */
    const tfc_node *split;
    int split_every, split_offset, split_part; /* filled from `split` (SPLIT_PART_*) */
    const tfc_node *classes; /* `classes:` (from_config): with directory, the folders */
    int max_record_bytes;
    int skip_empty;
    /* tokenization done right after the source (a tokenize map op it implies) */
    int tokenizer; /* TEXT_TOKENIZER_* */
    const char *vocabulary;
    int max_tokens, min_count, lowercase;
    int on_error;
} text_args;

/* The arguments of the tfrecord source (feat, lab and has_labels derived by its check from
 * the `features` and `labels` mappings), which the fuzzer fills directly. */
enum { TFR_COMPRESSION_NONE = 0, TFR_COMPRESSION_GZIP, TFR_COMPRESSION_COUNT };
enum { TFR_ENCODED_NONE = 0, TFR_ENCODED_PNG, TFR_ENCODED_JPEG, TFR_ENCODED_COUNT };
typedef struct tfr_feature {
    const char *key;
    int dtype; /* tfc_dtype */
    tfc_int_list shape;
    int encoded; /* TFR_ENCODED_* (features only) */
} tfr_feature;
typedef struct tfrecord_args {
    const char *type;
    const tfc_node *files;
    int compression; /* TFR_COMPRESSION_* */
    const tfc_node *features, *labels;
    int num_classes, on_error;
    tfr_feature feat, lab;
    int has_labels;
} tfrecord_args;
/* Records of one uncompressed TFRecord buffer (copied); `name` stands for the file. */
tfc_status tfc_source_tfrecord_mem(source **out, const tfrecord_args *a, const void *data,
                                   size_t len, const char *name, tfc_error *err);

/* CSV from memory (the source reads its file into memory and calls this); `name` stands
 * for the file. */
tfc_status tfc_source_csv_mem(source **out, const csv_args *a, const char *text, size_t len,
                              const char *name, tfc_error *err);
/* Text records from memory (fuzzing): splits `text` as file 0 would be split. */
tfc_status tfc_source_text_mem(source **out, const text_args *a, const char *text, size_t len,
                               const char *name, tfc_error *err);

/* ---- stages ------------------------------------------------------------------------------- */

typedef struct stage stage;

/* ---- the profiler (profile.c) ------------------------------------------------------------
 * Every call a stage makes into the stage below it goes through tfc_up_next, tfc_up_next_id
 * or tfc_up_fetch, which count the call on the callee and, for sampled calls, time it. A
 * thread's outermost call (the consumer's pull, a prefetch thread's pull, a parallel-map
 * worker's element) decides whether everything under it on that thread is timed: one in
 * 2^k (tfc_data_options.profile). A timed call's time, less the time of the timed calls it
 * makes and of its waits for its own threads (tfc_prof_block_*), is the callee's own work;
 * totals are estimated as the timed sums scaled by calls / timed calls. Counters are
 * relaxed atomics: next and next_id calls into a stage are serial (one consumer, or under
 * the parallel map's lock), and so are fetches but on a parallel map's workers, so they
 * count with a plain load and store; the workers' counts can race and add atomically (an
 * atomic add on every fetch cost 2% of the IDX pipeline of make bench-data). */
enum { PROF_NEXT = 0, PROF_FETCH, PROF_WORK, PROF_NACCT };

typedef struct prof_acct {
    _Atomic uint64_t calls, misses;   /* misses: calls that handed out nothing (end, error) */
    _Atomic uint64_t timed;           /* calls timed */
    _Atomic uint64_t self_ns, incl_ns; /* over the timed calls */
} prof_acct;

typedef struct prof_thread {
    int depth;         /* profiled calls open on this thread */
    int sampling;      /* the outermost one is timed */
    int worker;        /* inside a parallel map worker's element: fetches below can race */
    uint32_t tick;     /* outermost calls on this thread */
    uint64_t child_ns; /* time of the timed calls and waits under the open one */
} prof_thread;
extern _Thread_local prof_thread tfc_prof_tl;

typedef struct prof_frame {
    uint64_t t0, saved_child;
    int timed;
} prof_frame;

uint64_t tfc_prof_ns(void); /* CLOCK_MONOTONIC in ns */

typedef struct stage_ops {
    const char *name;
    /* The next element (*end = 1 and out empty at the end). */
    tfc_status (*next)(stage *s, elem *out, int *end, tfc_error *err);
    /* Lazy variant: the next element's id without materialising it (NULL: unsupported). */
    tfc_status (*next_id)(stage *s, elem_id *id, int *end, tfc_error *err);
    /* Materialises an id this stage handed out; reentrant (NULL: unsupported). */
    tfc_status (*fetch)(stage *s, elem_id id, elem *out, tfc_error *err);
    /* Starts again: a new epoch for the source under it. */
    void (*reset)(stage *s);
    /* Stops background work (prefetch threads) so the stages below are stable; work
     * restarts by itself on the next call (NULL: nothing to stop). */
    void (*quiesce)(stage *s);
    /* Called on a quiesced stage before a state save: reads on, in the caller's thread, until
     * its buffer is full, its input ends or an element fails, so the saved state depends on
     * the position alone and not on how far the background work had got (NULL: no buffer). */
    void (*fill)(stage *s);
    tfc_status (*save)(stage *s, wbuf *w, tfc_error *err);
    tfc_status (*restore)(stage *s, rbuf *r, tfc_error *err);
    void (*free)(stage *s);
} stage_ops;

struct stage {
    const stage_ops *ops;
    stage *up;
    tfc_pipeline *p;
    int lazy, fetchable;   /* next_id / fetch usable (depends on the stages below) */
    tfc_element_spec spec; /* output spec */
    uint64_t key;          /* this stage's random key: f(seed, stream, index) */
    uint64_t config_hash;  /* identifies the stage's kind and arguments in saved state */
    char label[96];        /* its name in profiles: "pipeline[2].map decode_image" */
    int threads;           /* threads its own work runs on (a parallel map's workers) */
    prof_acct prof[PROF_NACCT];
};

struct tfc_pipeline {
    tfc_data_options opt;
    char *key, *base_dir, *run_dir; /* owned copies of the option strings */
    source *src;
    stage **stages;
    int n, cap;
    elem cur;              /* the element last handed out */
    int failed;
    tfc_vocab *vocab;      /* owned vocabulary of the tokenizer, if any */
    int64_t skipped_run;   /* records skipped while iterating (on_error: skip), each once */
    uint64_t count_epoch;  /* the source epoch whose skips count (the first pass); UINT64_MAX:
                              not known yet; UINT64_MAX - 1: none (restored past it) */
    int shard_count;       /* dealt among data-parallel ranks (1: not) */
    int hidden;            /* stages placed by tfc itself: they take no stage key index */
    uint32_t prof_mask;    /* an outermost call is timed when tick & mask == 0 */
    int prof_on;
};

/* Opens a profiled call into s (the accounts of s). */
static inline void tfc_prof_enter(const stage *s, prof_frame *f)
{
    prof_thread *t = &tfc_prof_tl;
    if (t->depth++ == 0) t->sampling = s->p->prof_on && (++t->tick & s->p->prof_mask) == 0;
    f->timed = t->sampling;
    if (f->timed) {
        f->saved_child = t->child_ns;
        t->child_ns = 0;
        f->t0 = tfc_prof_ns();
    }
}

/* Closes it: counts the call in s->prof[acct] (shared: several threads may count at once),
 * with `miss` when it handed out nothing. */
void tfc_prof_leave_slow(stage *s, int acct, prof_frame *f, int shared, int miss);
static inline void tfc_prof_leave(stage *s, int acct, prof_frame *f, int shared, int miss)
{
    if (f->timed || miss || shared || !s->p->prof_on) {
        tfc_prof_leave_slow(s, acct, f, shared, miss);
        return;
    }
    _Atomic uint64_t *c = &s->prof[acct].calls;
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    if (--tfc_prof_tl.depth == 0) tfc_prof_tl.sampling = 0;
}

/* The calls a stage makes into the stage below it (or any stage into another). */
static inline tfc_status tfc_up_next(stage *up, elem *out, int *end, tfc_error *err)
{
    prof_frame f;
    tfc_prof_enter(up, &f);
    tfc_status st = up->ops->next(up, out, end, err);
    tfc_prof_leave(up, PROF_NEXT, &f, 0, st || *end);
    return st;
}

static inline tfc_status tfc_up_next_id(stage *up, elem_id *id, int *end, tfc_error *err)
{
    prof_frame f;
    tfc_prof_enter(up, &f);
    tfc_status st = up->ops->next_id(up, id, end, err);
    tfc_prof_leave(up, PROF_NEXT, &f, 0, st || *end);
    return st;
}

static inline tfc_status tfc_up_fetch(stage *up, elem_id id, elem *out, tfc_error *err)
{
    prof_frame f;
    tfc_prof_enter(up, &f);
    tfc_status st = up->ops->fetch(up, id, out, err);
    tfc_prof_leave(up, PROF_FETCH, &f, tfc_prof_tl.worker, st != TFC_OK);
    return st;
}

/* A parallel map worker's element: its own work goes to the stage's PROF_WORK account. */
static inline void tfc_prof_work_begin(const stage *s, prof_frame *f)
{
    tfc_prof_enter(s, f);
    tfc_prof_tl.worker++;
}
static inline void tfc_prof_work_end(stage *s, prof_frame *f, int miss)
{
    tfc_prof_tl.worker--;
    tfc_prof_leave(s, PROF_WORK, f, 1, miss);
}

/* A wait for the stage's own threads (a prefetch or parallel map consumer blocked on its
 * buffer): not its own work. */
static inline uint64_t tfc_prof_block_begin(void)
{
    return tfc_prof_tl.sampling ? tfc_prof_ns() : 0;
}
static inline void tfc_prof_block_end(uint64_t t0)
{
    if (t0) tfc_prof_tl.child_ns += tfc_prof_ns() - t0;
}

/* The shard stage keeping blocks of `block` elements: positions i with
 * (i / block) % num_shards == index (tfc_pipeline_shard: block 1). */
tfc_status tfc_pipeline_shard_blocks(tfc_pipeline *p, int64_t num_shards, int64_t index,
                                     int64_t block, tfc_error *err);
/* A pipeline holding only `src` (taken; freed on error). */
tfc_pipeline *tfc_pipeline_new(source *src, const tfc_data_options *opt, tfc_error *err);
/* Appends a stage (its ops, lazy, fetchable, spec and config hash filled by the caller;
 * this sets up, p and key). Takes ownership. */
void tfc_pipeline_push(tfc_pipeline *p, stage *s);
stage *tfc_pipeline_top(const tfc_pipeline *p);
/* Describes where an element came from ("FILE record N"). */
void tfc_pipeline_describe_elem(const tfc_pipeline *p, const elem *x, char *buf, size_t size);
/* Generic next for lazy stages: next_id then fetch. */
tfc_status tfc_stage_next_lazy(stage *s, elem *out, int *end, tfc_error *err);
/* fetch of stages that pass elements through unchanged: the stage below fetches. */
tfc_status tfc_stage_pass_fetch(stage *s, elem_id id, elem *out, tfc_error *err);
/* A buffered element in saved state: by id when `from` (the stage whose output it is) can
 * re-make it, else by value. Restoring by id fetches it from `from` again. */
void tfc_stage_save_elem(wbuf *w, const elem *x, const stage *from);
tfc_status tfc_stage_restore_elem(rbuf *r, stage *from, elem *x, tfc_error *err);

/* ---- map ops ---------------------------------------------------------------------------- */

/* Fields every map op's table starts with. */
typedef struct map_common {
    const char *op;
    int num_parallel_calls;
} map_common;

/* What an op's check and init see: where its config is and, for init, the pipeline being
 * built (opt, src and vocab are NULL during check). */
typedef struct op_build {
    const tfc_node *at; /* the op's mapping */
    const char *key;    /* its key path */
    tfc_error *err;
    const tfc_data_options *opt; /* the pipeline's options */
    source *src;                 /* the pipeline's source */
    tfc_vocab **vocab;           /* the pipeline's own vocabulary (NULL until one is made) */
} op_build;

typedef struct op_def {
    const char *name;
    const tfc_field *fields; /* starts with MAP_COMMON_FIELDS */
    size_t args_size;        /* the struct the fields fill, which may hold derived state */
    const char *help;
    /* Checks what the field table alone cannot (combinations of arguments), before any data
     * is read (NULL: nothing more). */
    tfc_status (*check)(void *args, const op_build *b);
    /* Checks the arguments against the input spec and computes the output spec. */
    tfc_status (*init)(void *args, const op_build *b, const tfc_element_spec *in,
                       tfc_element_spec *out, tfc_error *err);
    /* Transforms e in place (replacing components with tfc_element_alloc). Reentrant. */
    tfc_status (*apply)(const void *args, tfc_element *e, const tfc_map_ctx *ctx,
                        tfc_error *err);
    void (*fini)(void *args); /* may be NULL */
    /* What the op tells the solver's plan (tokenize: a vocabulary); NULL: nothing. */
    void (*plan)(const void *args, tfc_data_plan *out);
    /* 1: the op works on batches (mix_up, cut_mix): planning refuses it before any batching
     * stage, and its init before a batched spec. */
    int needs_batch;
    /* 1: the op reads or writes the labels as one (mix_up and cut_mix mix them, window and
     * autoencode make them): the map stage refuses it on elements of several labels. */
    int one_label;
} op_def;

#define MAP_COMMON_FIELDS(T)                                                                  \
    {"op", TFC_F_STRING, offsetof(T, common.op), NULL, TFC_UNBOUNDED, NULL,                   \
     "the map op's name"},                                                                    \
    {"num_parallel_calls", TFC_F_INT, offsetof(T, common.num_parallel_calls), "1", 1, 256,   \
     NULL, "elements mapped in parallel (OpenMP threads); output order is kept"}

/* Reports a config error at the op's mapping (b->at, b->key). */
tfc_status tfc_op_error(const op_build *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define TFC_VOCAB_MAX_TOKENS (1 << 24)

/* The draws of mix_up and cut_mix for a batch of n (ops_mix.c): sample i is mixed with row
 * perm[i] with weight lam[i] (Beta(a, a)); cut_mix's box starts at ux[i], uy[i] (uniform in
 * [0, 1)) of the room left beside it. Keras's MixUp and CutMix draw the same quantities. */
typedef struct tfc_mix_draws {
    int64_t n;
    int64_t *perm;
    float *lam, *ux, *uy; /* one allocation: lam's */
} tfc_mix_draws;
/* Draws from `key`: mix_up a = lo (= hi); cut_mix a = U[lo, hi) + 1e-6 once. */
tfc_status tfc_mix_draw(uint64_t key, int cut, double lo, double hi, int64_t n,
                        tfc_mix_draws *d, tfc_error *err);
void tfc_mix_draws_free(tfc_mix_draws *d);
/* Mixes the batch e (features (n, ...), cut_mix (n, H, W, C); float labels (n, ...)) with
 * the draws d, as Keras's transform_images and transform_labels do, in float32: both
 * components become float32. */
tfc_status tfc_mix_apply(tfc_element *e, const tfc_mix_draws *d, int cut, tfc_error *err);

/* Builds a vocabulary from every record of `src` (text bytes): tokens by falling count,
 * at most max_tokens (0: no cap) of those seen min_count times. */
tfc_vocab *tfc_vocab_build(tfc_tokenizer tok, int lowercase, int max_tokens, int min_count,
                           source *src, tfc_error *err);
/* Names of the text_vectorization settings, NULL-terminated, in enum order ("null" for
 * Keras's None). */
extern const char *const tfc_standardize_names[], *const tfc_text_split_names[],
    *const tfc_text_output_names[];
/* Keras's TextVectorization.adapt over every record of `src`: tokens by falling count, ties
 * in falling byte order, at most max_tokens ids in all (0: no cap); tf_idf: each token's
 * idf log(1 + documents / (1 + its documents)), the mean of those for [UNK]. */
tfc_vocab *tfc_vocab_keras_build(const tfc_text_spec *ts, int max_tokens, source *src,
                                 tfc_error *err);

/* gzip (gunzip.c). tfc_gunzip inflates a whole gzip file image (one or more members) into a
 * malloc'd *out, checking each member's CRC-32 and length; a truncated stream, trailing bytes
 * that are not another member, a bad check or more than max_out (> 0) bytes is TFC_ERR_DATA
 * naming `name`. */
int tfc_is_gzip(const void *buf, size_t len);
tfc_status tfc_gunzip(const void *in, size_t inlen, const char *name, size_t max_out,
                      unsigned char **out, size_t *outlen, tfc_error *err);

/* Image signatures. */
int tfc_image_is_png(const void *buf, size_t len);
int tfc_image_is_jpeg(const void *buf, size_t len);

/* ---- definitions: what a solver file names ------------------------------------------------- */

typedef struct stage_def stage_def;

/* One stage as planned from the configuration: checked, not yet appended. */
typedef struct stage_plan {
    const stage_def *def;
    const op_def *op;     /* map: its op */
    const tfc_node *node; /* the stage's argument mapping as written (may be NULL or null) */
    const tfc_node *at;   /* where its errors point: node, or the item when node is null */
    char key[320];        /* key path of its errors, e.g. data.train.pipeline[2].batch */
    void *args;           /* malloc'd struct of the stage's (map: the op's) arguments */
} stage_plan;

/* A source type: `open` reads the data; everything before it touches no file. */
typedef struct source_def {
    const char *name;
    const char *help;
    const tfc_field *fields; /* starts with SOURCE_TYPE_FIELD */
    size_t args_size;        /* the struct the fields fill */
    /* Checks what the field table alone cannot (combinations of fields), reporting at
     * (at, key); may fill derived arguments. NULL: nothing more. */
    tfc_status (*check)(void *args, const tfc_node *at, const char *key, tfc_error *err);
    /* The stage the source's own fields stand for, run right after it (text: `tokenizer:`
     * is a tokenize map): fills *pl, or leaves pl->def NULL when there is none. NULL: never. */
    tfc_status (*implies)(const void *args, const tfc_node *at, const char *key, stage_plan *pl,
                          tfc_error *err);
    /* Opens the source: resolves its files against opt->base_dir (opt may be NULL) and
     * reads them; opt->num_classes, when set, replaces the source's `num_classes`. */
    tfc_status (*open)(const void *args, const tfc_data_options *opt, const char *key,
                       source **out, tfc_error *err);
    /* > 0: the source takes `classes:` itself (a const tfc_node * at this offset of its
     * arguments, set before open) rather than having its class names replaced after. */
    size_t classes_offset;
} source_def;

/* A stage name of `pipeline:`. */
struct stage_def {
    const char *name;
    const char *help;
    const tfc_field *fields; /* its arguments (map: the fields common to every op) */
    size_t args_size;        /* the struct the fields fill */
    /* 1: the mapping holds a map op's arguments (`op:` names it; the op's own table and
     * check read them) rather than the stage's fields (map). */
    int runs_op;
    /* Checks what the field table alone cannot, at (pl->at, pl->key). NULL: nothing more. */
    tfc_status (*check)(const stage_plan *pl, tfc_error *err);
    /* What the stage tells the solver's plan (batch: the batch size). NULL: nothing. */
    void (*plan)(const stage_plan *pl, tfc_data_plan *out);
    /* Appends the stage to p, checking it against the element spec. May take pl->args
     * (setting it NULL); frees nothing else. */
    tfc_status (*push)(tfc_pipeline *p, stage_plan *pl, tfc_error *err);
};

/* What the data-parallel placement needs of a planned stage: 1 for a repeat without end;
 * the batch_size of a batch or padded_batch (NULL for other stages), to divide. */
int tfc_stage_plan_repeats_forever(const stage_plan *pl);
int *tfc_stage_plan_batch_size(stage_plan *pl);

/* The registries (registry.c): lookups by name, NULL when unknown. */
const source_def *tfc_data_source_find(const char *name);
const stage_def *tfc_data_stage_find(const char *name);
const op_def *tfc_data_op_find(const char *name);

/* The map stage, which a source's implied op (text: tokenize) runs in. */
extern const stage_def tfc_stage_map;

#endif
