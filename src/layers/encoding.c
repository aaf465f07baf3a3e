/* Keras's numeric preprocessing layers, which map values to indices and encode them; no
 * weights, no gradient to their input (their backward adds nothing: an index is not a
 * differentiable function of the value). All run on the backend's encode_forward
 * (tfc_encode_desc), on the CPU only for now (cpu_first).
 *
 * CategoryEncoding (keras.layers.CategoryEncoding): integer values to one_hot, multi_hot or
 *   count vectors of num_tokens. Keras's shapes: one_hot appends the num_tokens axis (in place
 *   of a last axis of 1); multi_hot and count join an example's values, whose input must be
 *   (values,) (Keras's "maximum supported output rank is 2").
 * Discretization (keras.layers.Discretization): the bin of each value among bin_boundaries
 *   (a value equal to a boundary goes to the bin above it, as Keras's), as an index (int) or
 *   encoded over the len(bin_boundaries) + 1 bins as CategoryEncoding does.
 * IntegerLookup (keras.layers.IntegerLookup) with a given vocabulary: the out-of-vocabulary
 *   indices first (num_oov_indices of them; a value not in the vocabulary gets
 *   floormod(value, num_oov_indices)), then the vocabulary's in order; invert maps indices
 *   back to values (out of range: oov_token).
 * Hashing (keras.layers.Hashing): each value's bin among num_bins by a hash of its decimal
 *   digits, as Keras's (TensorFlow's to_hash_bucket_fast, FarmHash's Fingerprint64; with a
 *   salt to_hash_bucket_strong, SipHash-2-4), bin 0 kept for mask_value when one is given.
 *
 * Output mode int gives int32 indices (tfc_layer.out_dtype), which an Embedding, a
 * CategoryEncoding or an IntegerLookup may read; other layers take the encoded modes.
 * Values: an int32 model input is checked when staged (tfc_model_stage_input) against
 * CategoryEncoding's num_tokens: a value outside [0, num_tokens) is an error naming it
 * (Keras's TensorFlow backend raises; on JAX the value would be dropped). The int32 indices
 * of another layer are checked once, at build, against their limit. Float values (the output
 * of a float layer) are truncated toward zero as Keras casts them, and one outside
 * [0, num_tokens) marks nothing, as Keras's JAX backend does. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"

#define MAX_TABLE (1 << 20)   /* boundaries or vocabulary entries */
#define MAX_EXACT 16777216.0  /* floats hold integers exactly up to 2^24 */

static const char *const ce_mode_names[] = {"one_hot", "multi_hot", "count", NULL};
static const char *const mode_names[] = {"int", "one_hot", "multi_hot", "count", "tf_idf", NULL};
static const char *const vocab_dtype_names[] = {"int64", "int32", NULL};

#define SPARSE_FIELD                                                                          \
    TFC_FIXED_FIELD("sparse", "false", "tfc has no sparse tensors: the output is dense")

typedef struct enc_state {
    tfc_encode_desc d;  /* rows set per batch */
    int64_t per;        /* input values per example */
    float *table;       /* host copy of the constant table (NULL: none) */
    int64_t ntable;
} enc_state;

static void enc_free_state(tfc_layer *l)
{
    enc_state *s = l->state;
    if (!s) return;
    free(s->table);
    free(s);
    l->state = NULL;
}

static enc_state *enc_new_state(tfc_layer *l, tfc_error *err)
{
    enc_free_state(l);
    enc_state *s = calloc(1, sizeof *s);
    if (!s) tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    l->state = s;
    return s;
}

/* The output shape and the desc's width for mode over depth indices (Keras's
 * encode_categorical_inputs); a build error for multi_hot or count of more than one axis. */
static tfc_status enc_shape(tfc_layer *l, tfc_encode_mode mode, int depth, tfc_error *err)
{
    enc_state *s = l->state;
    const tfc_shape *in = &l->in_shape[0];
    char buf[96];
    if (in->ndim < 1 || in->ndim >= TFC_MAX_DIMS - 1)
        return tfc_layer_error(err, l, "needs an input of 1 to %d axes, got %s",
                               TFC_MAX_DIMS - 2, tfc_shape_str(in, buf, sizeof buf));
    s->per = tfc_shape_numel(in);
    s->d.ints = l->in_dtype[0] == TFC_I32;
    s->d.mode = mode;
    s->d.depth = depth;
    s->d.width = (int)s->per;
    l->out_shape = *in;
    if (mode == TFC_ENCODE_ONE_HOT) {
        if (in->dim[in->ndim - 1] == 1) l->out_shape.ndim--;
        l->out_shape.dim[l->out_shape.ndim++] = depth;
    } else if (mode != TFC_ENCODE_INT) {
        if (in->ndim != 1)
            return tfc_layer_error(err, l, "output_mode %s joins an example's values: its "
                                   "input must be (values,), got %s (Keras: maximum supported "
                                   "output rank is 2)", mode == TFC_ENCODE_COUNT ? "count"
                                   : "multi_hot", tfc_shape_str(in, buf, sizeof buf));
        l->out_shape.ndim = 1;
        l->out_shape.dim[0] = depth;
    } else {
        s->d.out_ints = 1;
        l->out_dtype = TFC_I32;
        l->out_id_limit = depth;
    }
    return TFC_OK;
}

/* The constant table (boundaries, or keys then indices) as a parameter filled from s->table. */
static void enc_add_table(tfc_layer *l, int64_t n)
{
    if (n < 1) return;
    tfc_layer_add_param(l, "table", 1, &n, 0, tfc_init_make(TFC_INIT_ZEROS))->constant = 1;
}

static void enc_fill_param(const tfc_layer *l, int p, float *host)
{
    const enc_state *s = l->state;
    if (p == 0 && s->table) memcpy(host, s->table, (size_t)s->ntable * sizeof *host);
}

static void enc_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    enc_state *s = l->state;
    tfc_encode_desc d = s->d;
    d.rows = ex->batch;
    ex->be->ops->encode_forward(ex->be, &d, x[0], l->nparams ? l->params[0].data : NULL, NULL,
                                y);
}

/* No gradient flows to the values (int32 inputs have none; for float ones it is zero). */
static void enc_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                         const float *dy, float *const *dx)
{
    (void)l, (void)ex, (void)x, (void)y, (void)dy, (void)dx;
}

static const char *const *enc_needs(const tfc_layer *l)
{
    (void)l;
    static const char *const needs[] = {"encode_forward", NULL};
    return needs;
}

/* A list argument of numbers into a malloc'd array (*n values); each an integer within
 * +-2^24 when ints. */
static tfc_status read_numbers(const tfc_layer *l, const char *arg, const tfc_node *v, int ints,
                               double **out, int *n, tfc_error *err)
{
    char path[128];
    snprintf(path, sizeof path, "layers[%d].%s.%s", l->index, l->ops->type, arg);
    *out = NULL;
    *n = 0;
    if (v->kind != TFC_NODE_SEQ || v->n < 1 || v->n > MAX_TABLE)
        return tfc_node_error(err, TFC_ERR_CONFIG, v, path, "a list of 1 to %d numbers",
                              MAX_TABLE);
    *out = malloc((size_t)v->n * sizeof **out);
    if (!*out) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    for (int i = 0; i < v->n; i++) {
        double x;
        if (tfc_node_double(v->vals[i], path, &x, err)) return TFC_ERR_CONFIG;
        if (ints && (x != floor(x) || fabs(x) > MAX_EXACT))
            return tfc_node_error(err, TFC_ERR_CONFIG, v->vals[i], path,
                                  "an integer within +-2^24 (tfc compares in float32)");
        (*out)[i] = x;
    }
    *n = v->n;
    return TFC_OK;
}

/* ---- CategoryEncoding -------------------------------------------------------------------- */

typedef struct ce_args {
    const tfc_node *num_tokens;
    int output_mode;
} ce_args;

static const tfc_field ce_fields[] = {
    {"num_tokens", TFC_F_NODE, offsetof(ce_args, num_tokens), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "the number of tokens: inputs lie in [0, num_tokens) (required)"},
    {"output_mode", TFC_F_ENUM, offsetof(ce_args, output_mode), "multi_hot", TFC_UNBOUNDED,
     ce_mode_names, "one_hot, multi_hot or count"},
    SPARSE_FIELD,
    {NULL}};

static tfc_status ce_build(tfc_layer *l, tfc_error *err)
{
    const ce_args *a = l->args;
    if (!a->num_tokens || tfc_node_is_null(a->num_tokens))
        return tfc_layer_error(err, l, "num_tokens must be set to use this layer (Keras's "
                               "message; for values not known beforehand use IntegerLookup)");
    char path[128];
    snprintf(path, sizeof path, "layers[%d].%s.num_tokens", l->index, l->ops->type);
    long long t;
    if (tfc_node_int(a->num_tokens, path, 1, 1 << 24, &t, err)) return TFC_ERR_CONFIG;
    enc_state *s = enc_new_state(l, err);
    if (!s) return TFC_ERR_NOMEM;
    s->d.map = TFC_ENCODE_INDEX;
    if (enc_shape(l, (tfc_encode_mode)(a->output_mode + 1), (int)t, err)) return TFC_ERR_CONFIG;
    l->id_limit = t; /* an int32 model input: checked when staged */
    return TFC_OK;
}

const tfc_layer_ops tfc_category_encoding_ops = {
    .type = "CategoryEncoding", .schema = ce_fields, .args_size = sizeof(ce_args),
    .min_inputs = 1, .max_inputs = 1, .cpu_first = 1, .reads_ints = 1, .needs = enc_needs,
    .build = ce_build, .forward = enc_forward, .backward = enc_backward,
    .free_state = enc_free_state,
};

/* ---- Discretization ---------------------------------------------------------------------- */

typedef struct disc_args {
    const tfc_node *bin_boundaries, *num_bins;
    double epsilon;
    int output_mode;
} disc_args;

static const tfc_field disc_fields[] = {
    {"bin_boundaries", TFC_F_NODE, offsetof(disc_args, bin_boundaries), TFC_NO_DEFAULT,
     TFC_UNBOUNDED, NULL, "ascending boundaries: bins (-inf, b0), [b0, b1), ..., [bn, inf)"},
    {"num_bins", TFC_F_NODE, offsetof(disc_args, num_bins), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "bins learnt by Keras's adapt(), which tfc does not run: give bin_boundaries"},
    {"epsilon", TFC_F_FLOAT, offsetof(disc_args, epsilon), "0.01", TFC_UNBOUNDED, NULL,
     "adapt()'s quantile error (unused: no adapt)"},
    {"output_mode", TFC_F_ENUM, offsetof(disc_args, output_mode), "int", TFC_UNBOUNDED,
     mode_names, "int, one_hot, multi_hot or count"},
    SPARSE_FIELD,
    TFC_FIXED_FIELD("dtype", TFC_NO_DEFAULT, "int outputs are int32, the others float32"),
    {NULL}};

static tfc_status disc_build(tfc_layer *l, tfc_error *err)
{
    const disc_args *a = l->args;
    const int given = a->bin_boundaries && !tfc_node_is_null(a->bin_boundaries);
    if (a->num_bins && !tfc_node_is_null(a->num_bins))
        return tfc_layer_error(err, l, given ? "give bin_boundaries or num_bins, not both "
                               "(Keras refuses both too)" : "num_bins: tfc does not adapt "
                               "Discretization to data (Keras's adapt); give bin_boundaries");
    if (!given)
        return tfc_layer_error(err, l, "bin_boundaries are required (tfc does not adapt "
                               "Discretization to data, which Keras's num_bins needs)");
    if (a->output_mode == TFC_ENCODE_COUNT + 1)
        return tfc_layer_error(err, l, "output_mode tf_idf is not a Discretization mode");
    enc_state *s = enc_new_state(l, err);
    if (!s) return TFC_ERR_NOMEM;
    double *b;
    int n;
    if (read_numbers(l, "bin_boundaries", a->bin_boundaries, 0, &b, &n, err)) {
        free(b);
        return err->code ? err->code : TFC_ERR_CONFIG;
    }
    s->table = malloc((size_t)n * sizeof *s->table);
    if (!s->table) {
        free(b);
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++) s->table[i] = (float)b[i];
    free(b);
    for (int i = 1; i < n; i++)
        if (!(s->table[i - 1] <= s->table[i]))
            return tfc_layer_error(err, l, "bin_boundaries must be sorted ascending (entry %d, "
                                   "%g, follows %g)", i, s->table[i], s->table[i - 1]);
    s->ntable = n;
    s->d.map = TFC_ENCODE_BUCKET;
    s->d.n = n;
    if (enc_shape(l, (tfc_encode_mode)a->output_mode, n + 1, err)) return TFC_ERR_CONFIG;
    enc_add_table(l, n);
    return TFC_OK;
}

const tfc_layer_ops tfc_discretization_ops = {
    .type = "Discretization", .schema = disc_fields, .args_size = sizeof(disc_args),
    .min_inputs = 1, .max_inputs = 1, .cpu_first = 1, .reads_ints = 1, .needs = enc_needs,
    .build = disc_build, .forward = enc_forward, .backward = enc_backward,
    .free_state = enc_free_state, .fill_param = enc_fill_param,
};

/* ---- IntegerLookup ----------------------------------------------------------------------- */

typedef struct il_args {
    const tfc_node *max_tokens, *mask_token, *vocabulary;
    int num_oov_indices, oov_token, vocabulary_dtype, invert, output_mode, pad_to_max_tokens;
} il_args;

static const tfc_field il_fields[] = {
    {"max_tokens", TFC_F_NODE, offsetof(il_args, max_tokens), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "the largest vocabulary size, OOV indices included (null: no limit)"},
    {"num_oov_indices", TFC_F_INT, offsetof(il_args, num_oov_indices), "1", 0, 1 << 20, NULL,
     "indices for values not in the vocabulary (floormod of the value)"},
    {"mask_token", TFC_F_NODE, offsetof(il_args, mask_token), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "null only: tfc has no mask token"},
    {"oov_token", TFC_F_INT, offsetof(il_args, oov_token), "-1", TFC_UNBOUNDED, NULL,
     "invert's value for an index outside the vocabulary"},
    {"vocabulary", TFC_F_NODE, offsetof(il_args, vocabulary), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "a list of distinct integers (required: tfc does not adapt IntegerLookup)"},
    {"vocabulary_dtype", TFC_F_ENUM, offsetof(il_args, vocabulary_dtype), "int64",
     TFC_UNBOUNDED, vocab_dtype_names, "int64 or int32 (values within +-2^24)"},
    TFC_FIXED_FIELD("idf_weights", TFC_NO_DEFAULT, "tfc has no tf_idf output"),
    {"invert", TFC_F_BOOL, offsetof(il_args, invert), "false", TFC_UNBOUNDED, NULL,
     "map indices back to vocabulary values (output_mode int)"},
    {"output_mode", TFC_F_ENUM, offsetof(il_args, output_mode), "int", TFC_UNBOUNDED,
     mode_names, "int, one_hot, multi_hot or count"},
    SPARSE_FIELD,
    {"pad_to_max_tokens", TFC_F_BOOL, offsetof(il_args, pad_to_max_tokens), "false",
     TFC_UNBOUNDED, NULL, "multi_hot and count: max_tokens wide"},
    TFC_FIXED_FIELD("oov_method", "floormod", "floormod only"),
    TFC_FIXED_FIELD("salt", TFC_NO_DEFAULT, "floormod takes no salt"),
    {NULL}};

/* For qsort of (key, index) pairs by key. */
static int cmp_pair(const void *a, const void *b)
{
    const double *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

static tfc_status il_build(tfc_layer *l, tfc_error *err)
{
    const il_args *a = l->args;
    char path[128];
    if (a->mask_token && !tfc_node_is_null(a->mask_token))
        return tfc_layer_error(err, l, "mask_token: tfc has no mask token (null only)");
    if (!a->vocabulary || tfc_node_is_null(a->vocabulary))
        return tfc_layer_error(err, l, "vocabulary is required (tfc does not adapt "
                               "IntegerLookup to data, Keras's adapt)");
    if (a->output_mode == TFC_ENCODE_COUNT + 1)
        return tfc_layer_error(err, l, "output_mode tf_idf is not supported (idf_weights)");
    if (a->invert && a->output_mode != 0)
        return tfc_layer_error(err, l, "invert needs output_mode int (as Keras)");
    long long max_tokens = 0;
    snprintf(path, sizeof path, "layers[%d].%s.max_tokens", l->index, l->ops->type);
    if (a->max_tokens && !tfc_node_is_null(a->max_tokens) &&
        tfc_node_int(a->max_tokens, path, 2, 1 << 24, &max_tokens, err))
        return TFC_ERR_CONFIG;
    if (a->pad_to_max_tokens && !max_tokens && a->output_mode != 0)
        return tfc_layer_error(err, l, "pad_to_max_tokens needs max_tokens");
    enc_state *s = enc_new_state(l, err);
    if (!s) return TFC_ERR_NOMEM;
    double *v;
    int n;
    if (read_numbers(l, "vocabulary", a->vocabulary, 1, &v, &n, err)) {
        free(v);
        return err->code ? err->code : TFC_ERR_CONFIG;
    }
    const int64_t size = (int64_t)a->num_oov_indices + n;
    if (max_tokens && size > max_tokens) {
        free(v);
        return tfc_layer_error(err, l, "the vocabulary (%d values and %d OOV indices) is "
                               "larger than max_tokens (%lld)", n, a->num_oov_indices,
                               max_tokens);
    }
    double *pairs = malloc((size_t)n * 2 * sizeof *pairs);
    s->ntable = a->invert ? n : 2 * (int64_t)n;
    s->table = malloc((size_t)s->ntable * sizeof *s->table);
    if (!pairs || !s->table) {
        free(v), free(pairs);
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++) pairs[2 * i] = v[i], pairs[2 * i + 1] = a->num_oov_indices + i;
    qsort(pairs, (size_t)n, 2 * sizeof *pairs, cmp_pair);
    for (int i = 1; i < n; i++)
        if (pairs[2 * i] == pairs[2 * i - 2]) {
            double dup = pairs[2 * i];
            free(v), free(pairs);
            return tfc_layer_error(err, l, "vocabulary: %.0f is listed twice", dup);
        }
    if (a->invert) { /* index k holds the value: OOV indices give oov_token */
        s->d.map = TFC_ENCODE_INVERT;
        s->d.n = (int)size;
        s->d.oov = a->oov_token;
        free(s->table);
        s->ntable = size;
        s->table = malloc((size_t)size * sizeof *s->table);
        if (!s->table) {
            free(v), free(pairs);
            return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        }
        for (int k = 0; k < a->num_oov_indices; k++) s->table[k] = (float)a->oov_token;
        for (int i = 0; i < n; i++) s->table[a->num_oov_indices + i] = (float)v[i];
    } else {
        s->d.map = TFC_ENCODE_LOOKUP;
        s->d.n = n;
        s->d.oov = 0;
        s->d.noov = a->num_oov_indices;
        for (int i = 0; i < n; i++) {
            s->table[i] = (float)pairs[2 * i];
            s->table[n + i] = (float)pairs[2 * i + 1];
        }
    }
    free(v), free(pairs);
    if (!a->invert && a->num_oov_indices == 0)
        return tfc_layer_error(err, l, "num_oov_indices 0: tfc has no index for a value not "
                               "in the vocabulary (Keras's -1); give 1 or more");
    int depth = (int)(a->pad_to_max_tokens && max_tokens ? max_tokens : size);
    if (enc_shape(l, (tfc_encode_mode)a->output_mode, depth, err)) return TFC_ERR_CONFIG;
    if (a->invert) { /* values, not indices: float32 */
        s->d.out_ints = 0;
        l->out_dtype = TFC_F32;
        l->out_id_limit = 0;
    }
    enc_add_table(l, s->ntable);
    return TFC_OK;
}

const tfc_layer_ops tfc_integer_lookup_ops = {
    .type = "IntegerLookup", .schema = il_fields, .args_size = sizeof(il_args),
    .min_inputs = 1, .max_inputs = 1, .cpu_first = 1, .reads_ints = 1, .needs = enc_needs,
    .build = il_build, .forward = enc_forward, .backward = enc_backward,
    .free_state = enc_free_state, .fill_param = enc_fill_param,
};

/* ---- Hashing ----------------------------------------------------------------------------- */

typedef struct hash_args {
    int num_bins;
    const tfc_node *mask_value, *salt;
    int output_mode;
} hash_args;

static const tfc_field hash_fields[] = {
    {"num_bins", TFC_F_INT, offsetof(hash_args, num_bins), NULL, 1, 1 << 24, NULL,
     "the number of bins (bin 0 the mask's when mask_value is given)"},
    {"mask_value", TFC_F_NODE, offsetof(hash_args, mask_value), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "an integer that goes to bin 0 (null: none)"},
    {"salt", TFC_F_NODE, offsetof(hash_args, salt), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "an integer or a list of two: SipHash's key (null: FarmHash, unkeyed)"},
    {"output_mode", TFC_F_ENUM, offsetof(hash_args, output_mode), "int", TFC_UNBOUNDED,
     mode_names, "int, one_hot, multi_hot or count"},
    SPARSE_FIELD,
    {NULL}};

static tfc_status hash_build(tfc_layer *l, tfc_error *err)
{
    const hash_args *a = l->args;
    char path[128];
    if (a->output_mode == TFC_ENCODE_COUNT + 1)
        return tfc_layer_error(err, l, "output_mode tf_idf is not a Hashing mode");
    enc_state *s = enc_new_state(l, err);
    if (!s) return TFC_ERR_NOMEM;
    s->d.map = TFC_ENCODE_HASH;
    s->d.n = a->num_bins;
    if (a->mask_value && !tfc_node_is_null(a->mask_value)) {
        long long v;
        snprintf(path, sizeof path, "layers[%d].%s.mask_value", l->index, l->ops->type);
        if (tfc_node_int(a->mask_value, path, INT32_MIN, INT32_MAX, &v, err))
            return TFC_ERR_CONFIG;
        s->d.masked = 1;
        s->d.mask_value = (double)v;
    }
    if (a->salt && !tfc_node_is_null(a->salt)) {
        const tfc_node *n = a->salt;
        const tfc_node *k[2] = {n, n}; /* Keras: an integer salt is [salt, salt] */
        snprintf(path, sizeof path, "layers[%d].%s.salt", l->index, l->ops->type);
        if (n->kind == TFC_NODE_SEQ && n->n == 2) k[0] = n->vals[0], k[1] = n->vals[1];
        else if (n->kind != TFC_NODE_SCALAR)
            return tfc_node_error(err, TFC_ERR_CONFIG, n, path,
                                  "an integer or a list of two integers");
        for (int i = 0; i < 2; i++) {
            long long v;
            if (tfc_node_int(k[i], path, 0, INT64_MAX, &v, err)) return TFC_ERR_CONFIG;
            s->d.key[i] = (uint64_t)v;
        }
        s->d.salted = 1;
    }
    return enc_shape(l, (tfc_encode_mode)a->output_mode, a->num_bins, err);
}

const tfc_layer_ops tfc_hashing_ops = {
    .type = "Hashing", .schema = hash_fields, .args_size = sizeof(hash_args),
    .min_inputs = 1, .max_inputs = 1, .cpu_first = 1, .reads_ints = 1, .needs = enc_needs,
    .build = hash_build, .forward = enc_forward, .backward = enc_backward,
    .free_state = enc_free_state,
};

const tfc_encode_desc *tfc_layer_encode_desc(const tfc_layer *l)
{
    const tfc_layer_ops *o = l->ops;
    if (o != &tfc_category_encoding_ops && o != &tfc_discretization_ops &&
        o != &tfc_integer_lookup_ops && o != &tfc_hashing_ops)
        return NULL;
    return l->state ? &((const enc_state *)l->state)->d : NULL;
}
