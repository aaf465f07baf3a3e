/* input.max_length from the pipelines: a model whose input.shape has a null time axis and no
 * max_length takes the longest length its data splits can deliver, where their stages bound
 * it (SPEC §1): the last of a `truncate` or truncating `pad` map of the features, a `filter`
 * with max_length, a `padded_batch` with padded_shapes, or a `bucket_by_sequence_length` that
 * pads to its boundaries. Read from the configuration alone, before any data. */
#include "solver/internal.h"

#include <stdlib.h>
#include <string.h>

/* An integer argument of a stage's mapping, or `def` when absent or not an integer. */
static long long int_arg(const tfc_node *args, const char *key, long long def)
{
    const tfc_node *v = tfc_node_get(args, key);
    char *end;
    if (!v || v->kind != TFC_NODE_SCALAR) return def;
    long long n = strtoll(v->str, &end, 10);
    return *end || end == v->str ? def : n;
}

/* Whether a map op keeps the features' axis 0 as it is. */
static int keeps_length(const tfc_node *map)
{
    static const char *const same[] = {"cast", "scale", "normalize", "one_hot", "mix_up",
                                       "cut_mix", NULL};
    const tfc_node *comp = tfc_node_get(map, "component"), *op = tfc_node_get(map, "op");
    if (comp && comp->kind == TFC_NODE_SCALAR && !strcmp(comp->str, "labels")) return 1;
    for (int i = 0; op && op->kind == TFC_NODE_SCALAR && same[i]; i++)
        if (!strcmp(op->str, same[i])) return 1;
    return 0;
}

/* The longest features' axis 0 that `split` yields, as its stages bound it; 0: unbounded. */
static long long split_bound(const tfc_node *split)
{
    const tfc_node *stages = tfc_node_get(split, "pipeline");
    long long bound = 0;
    for (int i = 0; stages && stages->kind == TFC_NODE_SEQ && i < stages->n; i++) {
        const tfc_node *st = stages->vals[i];
        if (!st || st->kind != TFC_NODE_MAP || st->n != 1) return 0;
        const char *kind = st->keys[0]->str;
        const tfc_node *a = st->vals[0];
        const tfc_node *op = tfc_node_get(a, "op");
        const char *name = op && op->kind == TFC_NODE_SCALAR ? op->str : "";
        if (!strcmp(kind, "map") && keeps_length(a)) continue;
        if (!strcmp(kind, "map") && !strcmp(name, "truncate"))
            bound = bound && bound < int_arg(a, "length", 0) ? bound : int_arg(a, "length", 0);
        else if (!strcmp(kind, "map") && !strcmp(name, "pad"))
            bound = int_arg(a, "truncate", 1) ? int_arg(a, "length", 0) : 0;
        else if (!strcmp(kind, "map"))
            bound = 0; /* another op may change the length */
        else if (!strcmp(kind, "filter") && int_arg(a, "max_length", 0) > 0)
            bound = bound && bound < int_arg(a, "max_length", 0) ? bound
                                                                 : int_arg(a, "max_length", 0);
        else if (!strcmp(kind, "padded_batch")) {
            const tfc_node *ps = tfc_node_get(a, "padded_shapes");
            if (ps && ps->kind == TFC_NODE_SEQ && ps->n && ps->vals[0]->kind == TFC_NODE_SCALAR &&
                strtoll(ps->vals[0]->str, NULL, 10) > 0) /* -1: the longest, unbounded */
                bound = strtoll(ps->vals[0]->str, NULL, 10);
        } else if (!strcmp(kind, "bucket_by_sequence_length")) {
            const tfc_node *b = tfc_node_get(a, "boundaries");
            const tfc_node *pad = tfc_node_get(a, "pad_to_bucket_boundary");
            if (pad && pad->kind == TFC_NODE_SCALAR && !strcmp(pad->str, "true") && b &&
                b->kind == TFC_NODE_SEQ && b->n && b->vals[b->n - 1]->kind == TFC_NODE_SCALAR)
                bound = strtoll(b->vals[b->n - 1]->str, NULL, 10) - 1;
        }
    }
    return bound > 0 ? bound : 0;
}

tfc_status tfc_solver_default_max_length(tfc_doc *doc, tfc_node *model, const tfc_node *train,
                                         const tfc_node *test, tfc_error *err)
{
    tfc_node *input = tfc_node_get(model, "input");
    const tfc_node *layers = tfc_node_get(model, "layers");
    int time_axis = 0; /* in shape; batch_shape's is 1 */
    if (!input && layers && layers->kind == TFC_NODE_SEQ && layers->n &&
        tfc_model_is_input_layer(layers->vals[0])) { /* Keras's Sequential form */
        input = layers->vals[0]->vals[0];
        time_axis = !tfc_node_get(input, "shape");
    }
    const tfc_node *shape = tfc_node_get(input, time_axis ? "batch_shape" : "shape");
    if (!input || input->kind != TFC_NODE_MAP || tfc_node_get(input, "max_length") || !shape ||
        shape->kind != TFC_NODE_SEQ || shape->n <= time_axis ||
        !tfc_node_is_null(shape->vals[time_axis]))
        return TFC_OK;
    long long a = train ? split_bound(train) : 0, b = test ? split_bound(test) : a;
    if (!a || !b) return TFC_OK; /* the model's own error asks for max_length */
    char text[32];
    snprintf(text, sizeof text, "%lld", a > b ? a : b);
    tfc_node *k = tfc_node_new_scalar(doc, input, "max_length", 0);
    tfc_node *v = tfc_node_new_scalar(doc, shape, text, 0);
    if (!k || !v) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    tfc_node_map_set(input, k, v);
    return TFC_OK;
}
