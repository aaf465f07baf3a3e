/* --set KEY=VALUE: a dotted path of mapping keys and list indices into the configuration,
 * and a value parsed as YAML. The value's nodes keep their own document ("--set KEY=VALUE"
 * as the file name), so when the validator later rejects it, the error names the --set and
 * points into the value, exactly as an error in a file points at its line. */
#include <stdlib.h>
#include <string.h>

#include "solver/internal.h"

#define MAX_SEGMENTS 32

/* Splits "a.b[3].c" or "a.b.3.c" into segments, copied NUL-terminated into `out` (room for
 * strlen(key) + MAX_SEGMENTS bytes). Returns the count, or -1 for a malformed path. */
static int split_path(const char *key, char *out, char **seg)
{
    int n = 0;
    char *o = out;
    for (const char *p = key; *p;) {
        if (n == MAX_SEGMENTS) return -1;
        seg[n++] = o;
        if (*p == '[') {
            for (p++; *p && *p != ']';) *o++ = *p++;
            if (*p++ != ']') return -1;
        } else {
            while (*p && *p != '.' && *p != '[') *o++ = *p++;
        }
        *o++ = 0;
        if (*p == '.') {
            if (!*++p) return -1; /* a trailing dot */
        } else if (*p && *p != '[') {
            return -1; /* text after "]", as in "a[3]b" */
        }
    }
    for (int i = 0; i < n; i++)
        if (!*seg[i]) return -1;
    return n;
}

static int parse_index(const char *s, long *out)
{
    char *end;
    if (*s < '0' || *s > '9') return 0;
    long v = strtol(s, &end, 10);
    if (*end || v < 0 || v > 1 << 30) return 0;
    *out = v;
    return 1;
}

static void append_path(char *path, size_t size, const char *seg)
{
    size_t n = strlen(path);
    snprintf(path + n, size - n, "%s%s", n ? "." : "", seg);
}

tfc_status tfc_override_apply(tfc_doc *doc, tfc_node *root, const char *set, tfc_doc **keep,
                              tfc_error *err)
{
    *keep = NULL;
    char label[600];
    snprintf(label, sizeof label, "--set %s", set);
    const char *eq = strchr(set, '=');
    if (!eq || eq == set)
        return tfc_error_at(err, TFC_ERR_CONFIG, label, 0, 0, NULL, NULL,
                            "expected KEY=VALUE, e.g. --set optimizer.learning_rate=0.01");
    size_t klen = (size_t)(eq - set);
    char *key = malloc(2 * klen + MAX_SEGMENTS + 2);
    if (!key) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    memcpy(key, set, klen);
    key[klen] = 0;
    char *seg[MAX_SEGMENTS];
    int nseg = split_path(key, key + klen + 1, seg);
    if (nseg <= 0) {
        free(key);
        return tfc_error_at(err, TFC_ERR_CONFIG, label, 0, 0, NULL, NULL,
                            "'%.*s' is not a key path (keys and list indices separated by dots, "
                            "e.g. model.layers.6.Dropout.rate)",
                            (int)klen, set);
    }
    /* An empty value means null: the key's default. */
    const char *value = *(eq + 1) ? eq + 1 : "~";
    tfc_doc *vdoc = tfc_doc_load_string(value, strlen(value), label, err);
    if (!vdoc) {
        free(key);
        return TFC_ERR_CONFIG;
    }
    *keep = vdoc;
    tfc_node *vroot = tfc_doc_root(vdoc);

    char path[512] = "";
    tfc_node *node = root;
    int item = 0; /* node is a list item (a `- Type: {...}` entry when it has one key) */
    tfc_status s = TFC_OK;
    for (int i = 0; i < nseg && !s; i++) {
        int last = i == nseg - 1;
        const char *where = *path ? path : "the configuration";
        if (node->kind == TFC_NODE_SCALAR) {
            char found[64];
            tfc_node_describe(node, found, sizeof found);
            s = tfc_error_at(err, TFC_ERR_CONFIG, label, 0, 0, NULL, path,
                             "is a scalar (%s); it has no key '%s'", found, seg[i]);
            break;
        }
        if (node->kind == TFC_NODE_SEQ) {
            long idx;
            if (!parse_index(seg[i], &idx)) {
                s = tfc_error_at(err, TFC_ERR_CONFIG, label, 0, 0, NULL, path,
                                 "is a list of %d items; expected an index 0 to %d, found '%s'",
                                 node->n, node->n - 1, seg[i]);
                break;
            }
            if (idx > node->n || (idx == node->n && !last)) {
                s = tfc_error_at(err, TFC_ERR_CONFIG, label, 0, 0, NULL, path,
                                 "has %d items (indices 0 to %d); index %ld is out of range",
                                 node->n, node->n - 1, idx);
                break;
            }
            append_path(path, sizeof path, seg[i]);
            tfc_node *copy = last ? tfc_node_copy(doc, vroot) : NULL;
            if (last && !copy) {
                s = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory applying %s", label);
            } else if (last && idx == node->n) {
                tfc_node_seq_push(node, copy);
            } else if (last) {
                node->vals[idx] = copy;
            } else {
                node = node->vals[idx];
                item = 1;
            }
            continue;
        }
        /* A mapping. */
        tfc_node *child = tfc_node_get(node, seg[i]);
        if (!child && item && node->n == 1) {
            s = tfc_error_at(err, TFC_ERR_CONFIG, label, 0, 0, NULL, where,
                             "is a '%s' entry; it has no key '%s'", node->keys[0]->str, seg[i]);
            break;
        }
        append_path(path, sizeof path, seg[i]);
        if (last || !child) {
            /* New keys are positioned in the --set, so errors about them point there. */
            tfc_node *k = NULL;
            for (int j = 0; j < node->n; j++)
                if (!strcmp(node->keys[j]->str, seg[i])) k = node->keys[j];
            if (!k) k = tfc_node_new_scalar(doc, vroot, seg[i], 0);
            tfc_node *v = last ? tfc_node_copy(doc, vroot) : tfc_node_new_map(doc, vroot);
            if (!k || !v) {
                s = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory applying %s", label);
                break;
            }
            tfc_node_map_set(node, k, v);
            child = v;
        }
        node = child;
        item = 0;
    }
    free(key);
    return s;
}
