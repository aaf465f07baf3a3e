/* HashedCrossing (keras.layers.HashedCrossing): crosses two or more integer features by a
 * hash, each example's k values (one per input, listed in `inputs:`) into one of num_bins
 * bins, exactly as Keras's (which runs TensorFlow's tf.sparse.cross_hashed): the int64 values
 * folded in order into the default hash key 0xDECAFCAFFE by FingerprintCat64, the unsigned
 * result modulo num_bins (core/encode.h, tfc_encode_cross; an integer feature is its own
 * hash there, FarmHash's Fingerprint64 being for strings, which tfc has not).
 *
 * Inputs: int32 (the int32 model input, or the int32 indices of an IntegerLookup, a Hashing,
 * a Discretization, ...), each of one value per example, shape (1,) (Keras: `(batch_size,)`
 * or `(batch_size, 1)`), all the same shape. Output mode int gives int32 bin ids of the
 * input's shape (Keras's int64; below 2^24 here), one_hot float32 (num_bins,). No weights; no
 * gradient flows to the inputs (they are integers). On the backend's hash_cross_forward, on
 * the CPU only for now (cpu_first). */
#include <stdint.h>
#include <stdlib.h>

#include "core/encode.h"
#include "layers/layer.h"

static const char *const hc_mode_names[] = {"int", "one_hot", NULL};

typedef struct hc_args {
    int num_bins, output_mode;
} hc_args;

static const tfc_field hc_fields[] = {
    {"num_bins", TFC_F_INT, offsetof(hc_args, num_bins), NULL, 1, 1 << 24, NULL,
     "the number of hash bins"},
    {"output_mode", TFC_F_ENUM, offsetof(hc_args, output_mode), "int", TFC_UNBOUNDED,
     hc_mode_names, "int (int32 bin ids) or one_hot (float32)"},
    TFC_FIXED_FIELD("sparse", "false", "tfc has no sparse tensors: the output is dense"),
    TFC_FIXED_FIELD("dtype", TFC_NO_DEFAULT, "int outputs are int32, one_hot float32"),
    {NULL}};

typedef struct hc_state {
    tfc_encode_desc d; /* rows set per batch */
} hc_state;

static void hc_free_state(tfc_layer *l)
{
    free(l->state);
    l->state = NULL;
}

static tfc_status hc_build(tfc_layer *l, tfc_error *err)
{
    const hc_args *a = l->args;
    char b1[96], b2[96];
    const tfc_shape *in = &l->in_shape[0];
    if (tfc_shape_numel(in) != 1 || in->ndim > 1)
        return tfc_layer_error(err, l, "all inputs should have shape (batch_size,) or "
                               "(batch_size, 1) (Keras's): one value per example, got %s",
                               tfc_shape_str(in, b1, sizeof b1));
    for (int i = 0; i < l->ninputs; i++) {
        if (!tfc_shape_equal(&l->in_shape[i], in))
            return tfc_layer_error(err, l, "all inputs should have equal shape (Keras's): "
                                   "input 0 is %s, input %d is %s", tfc_shape_str(in, b1,
                                   sizeof b1), i, tfc_shape_str(&l->in_shape[i], b2, sizeof b2));
        if (l->in_dtype[i] != TFC_I32)
            return tfc_layer_error(err, l, "all inputs should have an integer dtype (Keras's): "
                                   "input %d is float32; give int32 (the model input's "
                                   "dtype: int32, or a layer's output_mode int)", i);
    }
    hc_free_state(l);
    hc_state *s = calloc(1, sizeof *s);
    if (!s) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    l->state = s;
    s->d.width = 1;
    s->d.ints = 1;
    s->d.n = s->d.depth = a->num_bins;
    s->d.mode = a->output_mode ? TFC_ENCODE_ONE_HOT : TFC_ENCODE_INT;
    if (s->d.mode == TFC_ENCODE_INT) {
        s->d.out_ints = 1;
        l->out_shape = *in;
        l->out_dtype = TFC_I32;
        l->out_id_limit = a->num_bins;
    } else { /* Keras: the one-hot axis in place of a last axis of 1 */
        l->out_shape.ndim = 1;
        l->out_shape.dim[0] = a->num_bins;
    }
    return TFC_OK;
}

static void hc_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const hc_state *s = l->state;
    tfc_encode_desc d = s->d;
    d.rows = ex->batch;
    ex->be->ops->hash_cross_forward(ex->be, &d, l->ninputs, (const int32_t *const *)x, y);
}

/* No gradient flows to the int32 inputs. */
static void hc_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                        const float *dy, float *const *dx)
{
    (void)l, (void)ex, (void)x, (void)y, (void)dy, (void)dx;
}

static const char *const *hc_needs(const tfc_layer *l)
{
    (void)l;
    static const char *const needs[] = {"hash_cross_forward", NULL};
    return needs;
}

const tfc_layer_ops tfc_hashed_crossing_ops = {
    .type = "HashedCrossing", .schema = hc_fields, .args_size = sizeof(hc_args),
    .min_inputs = 2, .max_inputs = TFC_ENCODE_MAX_CROSS, .cpu_first = 1, .reads_ints = 1,
    .needs = hc_needs, .build = hc_build, .forward = hc_forward, .backward = hc_backward,
    .free_state = hc_free_state,
};
