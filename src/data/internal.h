/* Internals of the input pipeline shared by the files of src/data: owned elements, the
 * stage vtable, random-access sources, the map-op registry and the byte buffers of state.
 * A stage is "lazy" when it can hand out element ids without materialising elements
 * (next_id) and "fetchable" when it can materialise any id it handed out (fetch): parallel
 * maps and shuffles use that to decode in parallel and to save buffers as ids. */
#ifndef TFC_DATA_INTERNAL_H
#define TFC_DATA_INTERNAL_H

#include <stdint.h>
#include <stdio.h>

#include "core/schema.h"
#include "data/data.h"

/* ---- owned elements ---------------------------------------------------------------------- */

/* Where an element came from: the source's epoch (how many times it was restarted) and the
 * record index. Map randomness is keyed by it, so re-materialising an id gives the same
 * element. Elements made by batch have no id. */
typedef struct elem_id {
    uint64_t epoch, index;
} elem_id;

typedef struct elem {
    tfc_element e; /* component buffers owned by the element */
    elem_id id;
    int has_id;
} elem;

/* tfc_element_alloc without zeroing, for ops that write every value. */
void *elem_alloc_uninit(tfc_element *e, int comp, tfc_dtype dtype, const tfc_shape *shape);
void elem_free(elem *x);                     /* frees the buffers, leaves x empty */
void elem_move(elem *dst, elem *src);        /* frees dst, moves src into it, empties src */
tfc_status elem_copy(elem *dst, const elem *src, tfc_error *err); /* deep copy into empty dst */
size_t comp_bytes(const tfc_tensor *t);      /* numel * dtype size (0 when absent) */

/* Bounded, overflow-checked byte count of dtype × shape; -1 on overflow or > limit. */
int64_t tensor_bytes_checked(tfc_dtype dt, const tfc_shape *s, int64_t limit);

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
} rbuf;

void wb_u64(wbuf *w, uint64_t v);
void wb_bytes(wbuf *w, const void *b, size_t n);
/* An element: has_id, id, then per component presence, dtype, shape and the raw bytes. */
void wb_elem(wbuf *w, const elem *x, int with_data);
uint64_t rb_u64(rbuf *r);
const void *rb_bytes(rbuf *r, size_t n); /* NULL (and r->bad) when fewer than n remain */
/* Reads an element written by wb_elem; with_data 0 reads only the id. */
tfc_status rb_elem(rbuf *r, elem *x, int with_data, tfc_error *err);

/* ---- sources -------------------------------------------------------------------------------- */

typedef struct source source;

typedef struct source_ops {
    const char *type;
    /* Record i into e (empty on entry). Must be reentrant: parallel maps call it from
     * several threads. Errors name the file and the record. */
    tfc_status (*get)(source *s, int64_t i, tfc_element *e, tfc_error *err);
    /* "FILE record 17" (or "FILE:LINE") for messages about record i. */
    void (*describe)(const source *s, int64_t i, char *buf, size_t size);
    void (*free)(source *s);
} source_ops;

struct source {
    const source_ops *ops;
    int64_t count;          /* records per epoch */
    tfc_element_spec spec;  /* spec of one record */
    int get_may_fail;       /* get can fail on bad data (decoding at read time) */
    int skip_errors;        /* on_error: skip */
    int64_t skipped;        /* records dropped while opening (on_error: skip) */
    char **class_names;     /* owned, or NULL */
    int nclasses;
};

void source_free(source *s);
/* Sets class names from an array of strings (copied). */
tfc_status source_set_classes(source *s, const char *const *names, int n, tfc_error *err);

/* Source constructors (files already resolved to paths). */
typedef struct idx_args {
    const char *type;
    const char *images, *labels;
    int num_classes;
    int on_error;
} idx_args;
typedef struct npy_args {
    const char *type;
    const char *features, *labels;
    int num_classes;
    int on_error;
} npy_args;
typedef struct csv_args {
    const char *type;
    const char *file;
    int header;
    const char *delimiter;
    const tfc_node *label_column;    /* name or index; NULL: none */
    const tfc_node *feature_columns; /* list of names or indices; NULL: all but the label */
    int label_dtype;                 /* 0 int32, 1 float32 */
    int num_classes;
    int on_error;
    const char *key;                 /* key path of column errors (not a field) */
} csv_args;
typedef struct images_args {
    const char *type;
    const char *list, *directory;
    int channels;
    int decode;
    int max_side;
    double max_pixels;
    int num_classes;
    int on_error;
} images_args;
typedef struct text_args {
    const char *type;
    const tfc_node *files;
    const tfc_node *exclude;
    int format; /* 0 lines, 1 fortune */
    int label;  /* 0 none, 1 file */
    const tfc_node *split;
    int split_every, split_offset, split_part; /* filled from `split` */
    int max_record_bytes;
    int skip_empty;
    /* tokenization done right after the source (sugar for map: {op: tokenize}) */
    int tokenizer; /* 0 none, 1 char, 2 word */
    const char *vocabulary;
    int max_tokens, min_count, lowercase;
    int on_error;
    /* resolved file list (paths owned by the caller) */
    const char *const *paths;
    int npaths;
} text_args;

enum { ON_ERROR_FAIL = 0, ON_ERROR_SKIP = 1 };

tfc_status source_tensors(source **out, const tfc_tensor *f, const tfc_tensor *l,
                          tfc_error *err);
/* The array source behind tensors, idx and npy: takes ownership of the tensors' data
 * (features (N, ...), labels (N, ...) or data NULL). `record_shape` (ndim >= 0) reshapes
 * each features row (idx adds the channel axis). Labels outside [0, num_classes) are an
 * error naming the file and record, or dropped and counted with on_error skip. */
tfc_status source_array(source **out, const char *type, tfc_tensor *features,
                        tfc_tensor *labels, const tfc_shape *record_shape, const char *fname,
                        const char *lname, int num_classes, int on_error, tfc_error *err);
tfc_status source_idx(source **out, const idx_args *a, tfc_error *err);
tfc_status source_npy(source **out, const npy_args *a, tfc_error *err);
tfc_status source_csv(source **out, const csv_args *a, const tfc_node *at, const char *key,
                      tfc_error *err);
tfc_status source_images(source **out, const images_args *a, tfc_error *err);
tfc_status source_text(source **out, const text_args *a, tfc_error *err);
/* CSV from memory (fuzzing): same arguments, `name` stands for the file. */
tfc_status source_csv_mem(source **out, const csv_args *a, const char *text, size_t len,
                          const char *name, tfc_error *err);
/* Text records from memory (fuzzing): splits `text` as file 0 would be split. */
tfc_status source_text_mem(source **out, const text_args *a, const char *text, size_t len,
                           const char *name, tfc_error *err);

/* Checks integer labels against [0, num_classes) (num_classes > 0). */
int label_in_range(const tfc_tensor *labels, int num_classes, int64_t *bad_value);

/* ---- stages ------------------------------------------------------------------------------- */

typedef struct stage stage;

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
    tfc_status (*save)(stage *s, wbuf *w, tfc_error *err);
    tfc_status (*restore)(stage *s, rbuf *r, tfc_error *err);
    void (*free)(stage *s);
} stage_ops;

struct stage {
    const stage_ops *ops;
    stage *up;
    tfc_pipeline *p;
    int index;             /* 0: the source stage */
    int lazy, fetchable;   /* next_id / fetch usable (depends on the stages below) */
    tfc_element_spec spec; /* output spec */
    uint64_t key;          /* this stage's random key: f(seed, stream, index) */
    uint64_t config_hash;  /* identifies the stage's kind and arguments in saved state */
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
    int64_t skipped_run;   /* records skipped while iterating (on_error: skip) */
};

/* Appends a stage (its ops, up, spec, key and hash filled by the caller except up/index/p,
 * which this sets). Takes ownership. */
void pipeline_push(tfc_pipeline *p, stage *s);
stage *pipeline_top(const tfc_pipeline *p);
tfc_pipeline *pipeline_new(source *src, const tfc_data_options *opt, tfc_error *err);
/* Describes where an id came from ("FILE record N"). */
void pipeline_describe(const tfc_pipeline *p, const elem *x, char *buf, size_t size);
/* Generic next for lazy stages: next_id then fetch. */
tfc_status stage_next_lazy(stage *s, elem *out, int *end, tfc_error *err);
uint64_t hash_mix(uint64_t h, uint64_t v);
/* A buffered element in saved state: by id when `from` (the stage whose output it is) can
 * re-make it, else by value. Restoring by id fetches it from `from` again. */
void save_elem_ref(wbuf *w, const elem *x, const stage *from);
tfc_status restore_elem_ref(rbuf *r, stage *from, elem *x, tfc_error *err);
uint64_t hash_str(uint64_t h, const char *s);

/* Stage constructors: each validates its arguments against the spec of `p`'s top stage and
 * appends itself. `at`/`key` position config errors (at may be NULL for the C API). */
typedef struct shuffle_args {
    int64_t buffer_size;
    int64_t seed; /* < 0: the pipeline's seed */
    int reshuffle_each_iteration;
} shuffle_args;
typedef struct batch_args {
    int64_t batch_size;
    int drop_remainder;
    int padded;
    tfc_shape padded_shape; /* ndim 0: pad to the longest */
    double padding_value;
    double label_padding_value;
} batch_args;

tfc_status stage_source_push(tfc_pipeline *p);
tfc_status stage_shuffle_push(tfc_pipeline *p, const shuffle_args *a, tfc_error *err);
tfc_status stage_repeat_push(tfc_pipeline *p, int64_t count, tfc_error *err);
tfc_status stage_batch_push(tfc_pipeline *p, const batch_args *a, const tfc_node *at,
                            const char *key, tfc_error *err);
tfc_status stage_cache_push(tfc_pipeline *p, tfc_error *err);
tfc_status stage_take_push(tfc_pipeline *p, int64_t count, int skip, tfc_error *err);
tfc_status stage_prefetch_push(tfc_pipeline *p, int buffer_size, tfc_error *err);
tfc_status stage_filter_push(tfc_pipeline *p, tfc_filter_fn fn, void *user,
                             const void *args, size_t args_size, uint64_t hash,
                             tfc_error *err);

/* ---- map ops ---------------------------------------------------------------------------- */

/* Fields every map op's table starts with. */
typedef struct map_common {
    const char *op;
    int num_parallel_calls;
} map_common;

/* What an op's init sees: the pipeline being built and where its config is. */
typedef struct op_build {
    tfc_pipeline *p;
    const tfc_node *at; /* the op's mapping (NULL from the C API) */
    const char *key;    /* its key path */
    tfc_error *err;
} op_build;

typedef struct op_def {
    const char *name;
    const tfc_field *fields; /* starts with MAP_COMMON_FIELDS */
    size_t args_size;        /* the struct the fields fill, which may hold derived state */
    const char *help;
    /* Checks the arguments against the input spec and computes the output spec. */
    tfc_status (*init)(void *args, const op_build *b, const tfc_element_spec *in,
                       tfc_element_spec *out, tfc_error *err);
    /* Transforms e in place (replacing components with tfc_element_alloc). Reentrant. */
    tfc_status (*apply)(const void *args, tfc_element *e, const tfc_map_ctx *ctx,
                        tfc_error *err);
    void (*fini)(void *args); /* may be NULL */
} op_def;

#define MAP_COMMON_FIELDS(T)                                                                  \
    {"op", TFC_F_STRING, offsetof(T, common.op), NULL, TFC_UNBOUNDED, NULL,                   \
     "the map op's name"},                                                                    \
    {"num_parallel_calls", TFC_F_INT, offsetof(T, common.num_parallel_calls), "1", 1, 256,   \
     NULL, "elements mapped in parallel (OpenMP threads); output order is kept"}

const op_def *const *op_registry(void); /* NULL-terminated */
const op_def *op_find(const char *name);
extern const op_def op_scale, op_normalize, op_cast, op_reshape, op_one_hot, op_pad,
    op_truncate, op_window, op_tokenize, op_random_flip, op_random_crop, op_resize,
    op_decode_png, op_decode_jpeg, op_decode_image;

/* Appends a map stage running `def` with `args` (a malloc'd struct of def->args_size the
 * stage takes ownership of, already init'ed) or a user callback. */
tfc_status stage_map_push(tfc_pipeline *p, const op_def *def, void *args, tfc_map_fn fn,
                          void *user, const tfc_element_spec *out_spec, int npc,
                          uint64_t hash, tfc_error *err);

/* Reports a config error at `b->at` (or without position for the C API). */
tfc_status op_error(const op_build *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

typedef struct tokenize_args {
    map_common common;
    int tokenizer;          /* 0 char, 1 word */
    const char *vocabulary; /* a file to load (relative to base_dir) */
    int max_tokens, min_count;
    int lowercase;          /* 0 auto, 1 true, 2 false */
    const tfc_vocab *vocab; /* resolved by init; owned by the pipeline or the options */
} tokenize_args;

/* Tokenizer internals shared by the tokenize op and the text source. */
tfc_vocab *vocab_build(tfc_tokenizer tok, int lowercase, int max_tokens, int min_count,
                       source *src, tfc_error *err);

/* Image signatures. */
int image_is_png(const void *buf, size_t len);
int image_is_jpeg(const void *buf, size_t len);

/* The element key of a map draw: f(stage key, epoch, index). */
uint64_t elem_key(uint64_t stage_key, uint64_t epoch, uint64_t index);

/* Joins base_dir and a relative path into a malloc'd string (absolute paths unchanged). */
char *path_resolve(const char *base_dir, const char *path);

#endif
