/* Config documents: YAML parsed with libyaml into a tree of nodes that remember their
 * file, line and column, so every later error can point at the text. Aliases are expanded
 * by copying under a node budget (no alias bombs), depth is bounded, and the whole text is
 * kept for caret lines. One module serves model files, solver files and overrides. */
#ifndef TFC_CORE_CONFIG_H
#define TFC_CORE_CONFIG_H

#include <stddef.h>

#include "core/error.h"

#define TFC_CONFIG_MAX_DEPTH 64
#define TFC_CONFIG_MAX_NODES 200000
#define TFC_CONFIG_MAX_BYTES (16u << 20)

typedef enum tfc_node_kind { TFC_NODE_SCALAR, TFC_NODE_MAP, TFC_NODE_SEQ } tfc_node_kind;

typedef struct tfc_doc tfc_doc;
typedef struct tfc_node tfc_node;

struct tfc_node {
    tfc_node_kind kind;
    int line, col;      /* 1-based */
    tfc_doc *doc;       /* the document that owns this node's memory */
    const tfc_doc *src; /* the document (file name, text) its position refers to */
    char *str;          /* SCALAR: its text (never NULL) */
    int quoted;         /* SCALAR: written in quotes, so a string even if it looks numeric */
    int n;              /* MAP: pairs; SEQ: items */
    int cap;
    tfc_node **keys;    /* MAP: key scalars (n) */
    tfc_node **vals;    /* MAP: values; SEQ: items (n) */
};

/* Parses a YAML file. Errors (unreadable file, syntax, empty document, binary input, alias
 * expansion over budget, depth) are reported at FILE:LINE:COL. Returns NULL on error. */
tfc_doc *tfc_doc_load_file(const char *path, tfc_error *err);

/* Same, from a string; `name` stands for the file name in errors. */
tfc_doc *tfc_doc_load_string(const char *text, size_t len, const char *name, tfc_error *err);

void tfc_doc_free(tfc_doc *doc);

tfc_node *tfc_doc_root(const tfc_doc *doc);

/* Reports an error positioned at `node` (its document's file, line, column and caret),
 * with key path `key`. Returns `code`. */
tfc_status tfc_node_error(tfc_error *err, tfc_status code, const tfc_node *node, const char *key,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* The file name of the document `node`'s position refers to ("" when none). */
const char *tfc_node_file(const tfc_node *node);

/* MAP lookup by key; NULL when absent or when `map` is not a mapping. */
tfc_node *tfc_node_get(const tfc_node *map, const char *key);

const char *tfc_node_kind_name(tfc_node_kind kind);

/* New nodes owned by `doc` (freed with it), positioned like `at` (may be NULL). Used to
 * build resolved configs and apply overrides. */
tfc_node *tfc_node_new_scalar(tfc_doc *doc, const tfc_node *at, const char *text, int quoted);
tfc_node *tfc_node_new_map(tfc_doc *doc, const tfc_node *at);
/* Sets `key` in a MAP: replaces an existing key's value, else appends the pair. */
void tfc_node_map_set(tfc_node *map, tfc_node *key, tfc_node *val);
/* Appends `val` to a SEQ. */
void tfc_node_seq_push(tfc_node *seq, tfc_node *val);
/* Deep copy of `src` (possibly from another document) into `doc`. */
tfc_node *tfc_node_copy(tfc_doc *doc, const tfc_node *src);

/* Writes `node` as block-style YAML (strings quoted where needed) to `f`. */
void tfc_node_emit(FILE *f, const tfc_node *node);

#endif
