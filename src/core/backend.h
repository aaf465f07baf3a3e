/* The backend: one table of primitive operations that layers, losses and the solver
 * express their math through. The CPU fills it with OpenBLAS and OpenMP loops (src/cpu/),
 * the GPU with cuBLAS, cuDNN and kernels of its own (src/gpu/). Layers never touch tensor
 * memory except through these ops, so the same layer code runs on either.
 *
 * Conventions, for every op:
 *   - float32, row-major, contiguous; images NHWC; sequences (N, T, features).
 *   - pointers are device pointers of this backend (host memory for the CPU).
 *   - outputs named y/out are overwritten; gradients named d* ACCUMULATE (+=) into their
 *     buffers, which the graph zeroes once per step. An op that overwrites a d* says so.
 *   - ops are asynchronous on the backend's stream; results that return to the host
 *     (sumsq, count_nonfinite, download) synchronise.
 * A NULL slot means "not supported by this backend": tfc_backend_check() rejects such a
 * backend at start-up, never a silent fallback, except for the optional lists
 * (TFC_BACKEND_LAYER_OPS, TFC_BACKEND_STEP_OPS), whose callers say what they do without. */
#ifndef TFC_CORE_BACKEND_H
#define TFC_CORE_BACKEND_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/rng.h"

typedef struct tfc_backend tfc_backend;

/* Activations with Keras names (keras.activations). */
typedef enum tfc_act {
    TFC_ACT_LINEAR = 0,
    TFC_ACT_RELU,
    TFC_ACT_SIGMOID,
    TFC_ACT_TANH,
    TFC_ACT_SOFTMAX,      /* over the last axis, `cols` wide */
    TFC_ACT_ELU,          /* alpha 1 */
    TFC_ACT_SELU,
    TFC_ACT_GELU,         /* exact (erf) form, Keras's default approximate=False */
    TFC_ACT_LEAKY_RELU,   /* negative_slope 0.2, as keras.activations.leaky_relu */
    TFC_ACT_SOFTPLUS,
    TFC_ACT_SOFTSIGN,
    TFC_ACT_SWISH,        /* x * sigmoid(x), also called silu */
    TFC_ACT_HARD_SIGMOID, /* relu6(x + 3) / 6, as Keras 3 */
    TFC_ACT_EXPONENTIAL,
    TFC_ACT_RELU6,        /* min(max(x, 0), 6) */
    TFC_ACT_HARD_SILU,    /* x relu6(x + 3) / 6 (Keras's hard_silu, hard_swish elsewhere) */
    TFC_ACT_MISH,         /* x tanh(softplus(x)) */
    TFC_ACT_COUNT
} tfc_act;

extern const char *const tfc_act_names[TFC_ACT_COUNT + 1]; /* NULL-terminated */

/* Keras's activation layers whose arguments no tfc_act has (ReLU with max_value,
 * negative_slope or threshold; LeakyReLU and ELU with another slope or alpha), computed as
 * keras.activations computes them:
 *   relu: pos = x > threshold ? x : 0 (threshold 0: max(x, 0)), clipped to max_value;
 *         y = pos - negative_slope * max(threshold - x, 0); with threshold 0 and no
 *         max_value, y = x >= 0 ? x : negative_slope x (leaky_relu)
 *   elu:  y = x > 0 ? x : alpha expm1(x) */
typedef struct tfc_pact_desc {
    int elu;              /* 0: relu, 1: elu */
    float slope;          /* relu's negative_slope, or elu's alpha */
    float max_value;      /* relu: INFINITY for none */
    float threshold;      /* relu: >= 0 */
} tfc_pact_desc;

/* f(v) of d, in float as Keras's ops round it; on the host and the device (TFC_HD), so both
 * backends' pact ops share it. */
TFC_HD float tfc_pact(const tfc_pact_desc *d, float v)
{
    if (d->elu) return v > 0.0f ? v : d->slope * expm1f(v);
    if (d->slope != 0.0f && d->threshold == 0.0f && isinf(d->max_value))
        return v >= 0.0f ? v : d->slope * v; /* leaky_relu */
    float pos = d->threshold != 0.0f ? (v > d->threshold ? v : 0.0f) : (v > 0.0f ? v : 0.0f);
    if (pos > d->max_value) pos = d->max_value;
    if (d->slope == 0.0f) return pos;
    float neg = d->threshold - v;
    return pos - d->slope * (neg > 0.0f ? neg : 0.0f);
}

/* f'(v): what Keras's gradient of the same formula gives away from its kinks */
TFC_HD float tfc_pact_grad(const tfc_pact_desc *d, float v)
{
    if (d->elu) return v > 0.0f ? 1.0f : d->slope * expf(v);
    if (d->slope != 0.0f && d->threshold == 0.0f && isinf(d->max_value))
        return v >= 0.0f ? 1.0f : d->slope;
    if (v > d->threshold) return v < d->max_value ? 1.0f : 0.0f;
    return d->slope;
}

/* The noise layers' draws (Dropout with a noise_shape, SpatialDropout1D/2D/3D, AlphaDropout,
 * GaussianNoise, GaussianDropout): x, y [groups, rows, cols], where element (g, r, c) takes
 * draw g cols + c, the same for every row (the noise shape [groups, 1, cols]; rows 1: one
 * draw per element). A draw is Philox's at (key, counter = (index, step)): the uniform u of
 * tfc_rng_uniform, as dropout_forward draws it (so DROPOUT with rows 1 equals it), or the
 * normal z of tfc_rng_normal. Each kind is an affine map y = m x + b of the draw: */
typedef enum tfc_noise_kind {
    TFC_NOISE_DROPOUT,  /* m = u >= rate ? 1 / (1 - rate) : 0, b = 0 */
    TFC_NOISE_ALPHA,    /* AlphaDropout: kept (u >= rate): m = a, b = shift; else m = 0,
                         * b = dropped (a alpha' + shift, SELU's alpha' = -alpha scale) */
    TFC_NOISE_GAUSSIAN, /* GaussianNoise: m = 1, b = stddev z */
    TFC_NOISE_GAUSSIAN_MUL /* GaussianDropout: m = 1 + stddev z, b = 0 */
} tfc_noise_kind;

typedef struct tfc_noise_desc {
    tfc_noise_kind kind;
    int64_t groups, rows, cols;
    float rate;             /* DROPOUT, ALPHA: the fraction dropped, in [0, 1) */
    float stddev;           /* GAUSSIAN, GAUSSIAN_MUL */
    float a, shift, dropped; /* ALPHA */
    uint64_t key, step;
} tfc_noise_desc;

/* Keras's weight constraints (keras.constraints; core/init.h parses them), the projection
 * applied to a weight after each optimizer update. The weight, in Keras's layout, is viewed as
 * [outer, red, inner]: a norm is taken over the red axis for each (outer, inner), so the axes
 * Keras's `axis` names are a leading run of the shape (outer 1) or a trailing one (inner 1).
 * With norms = sqrt(sum w^2 over red), eps = 1e-7 (keras.config.epsilon()):
 *   MAX_NORM      w * (clip(norms, 0, max_value) / (eps + norms))
 *   NON_NEG       max(w, 0)
 *   UNIT_NORM     w / (eps + norms)
 *   MIN_MAX_NORM  w * ((rate clip(norms, min_value, max_value) + (1 - rate) norms) /
 *                      (eps + norms)) */
typedef enum tfc_constraint_kind {
    TFC_CONSTRAINT_NONE = 0,
    TFC_CONSTRAINT_MAX_NORM,
    TFC_CONSTRAINT_NON_NEG,
    TFC_CONSTRAINT_UNIT_NORM,
    TFC_CONSTRAINT_MIN_MAX_NORM
} tfc_constraint_kind;

typedef struct tfc_constraint_desc {
    tfc_constraint_kind kind;
    int64_t outer, red, inner;
    float min_value, max_value, rate;
} tfc_constraint_desc;

/* m and b of draw j (the index g cols + c), on the host and the device (TFC_HD). */
TFC_HD float tfc_noise_affine(const tfc_noise_desc *d, uint64_t j, float *b)
{
    if (d->kind == TFC_NOISE_DROPOUT || d->kind == TFC_NOISE_ALPHA) {
        int keep = tfc_rng_uniform(d->key, d->step, j) >= d->rate;
        if (d->kind == TFC_NOISE_ALPHA) {
            *b = keep ? d->shift : d->dropped;
            return keep ? d->a : 0.0f;
        }
        *b = 0.0f;
        return keep ? 1.0f / (1.0f - d->rate) : 0.0f;
    }
    float z = (float)tfc_rng_normal(d->key, d->step, j);
    if (d->kind == TFC_NOISE_GAUSSIAN) {
        *b = d->stddev * z;
        return 1.0f;
    }
    *b = 0.0f;
    return 1.0f + d->stddev * z;
}

/* 2-D convolution (cross-correlation, as TensorFlow), NHWC input, kernel in Keras layout
 * [kh, kw, c, f], output [n, oh, ow, f]. Padding is explicit: pad_top/pad_left rows and
 * columns of zeros before the image; the rest (possibly one more, TensorFlow's asymmetric
 * SAME) after it, implied by oh/ow. */
typedef struct tfc_conv_desc {
    int n, h, w, c;    /* input */
    int kh, kw, f;     /* kernel and filters */
    int sh, sw;        /* strides */
    int dh, dw;        /* dilation */
    int pad_top, pad_left;
    int oh, ow;        /* output */
} tfc_conv_desc;

/* BatchNormalization's inference transform of the channels (the last axis), as a
 * convolution's epilogue takes it: y = x a + b with a = gamma / sqrt(var + eps) and
 * b = beta - mean a, each computed in double and rounded to float (bn_forward_infer's). */
typedef struct tfc_bn_params {
    const float *gamma, *beta, *mean, *var;
    float eps;
} tfc_bn_params;

/* Max or average 2-D pooling, NHWC. Padded positions are ignored: they never win a max and
 * are not counted in an average (TensorFlow's SAME semantics). */
typedef struct tfc_pool_desc {
    int n, h, w, c;
    int kh, kw, sh, sw;
    int pad_top, pad_left;
    int oh, ow;
    int is_max;
} tfc_pool_desc;

/* Upsampling of NHWC images by integer factors sh, sw (UpSampling2D). */
typedef struct tfc_resize_desc {
    int n, h, w, c;
    int sh, sw;
    int bilinear; /* 0: nearest */
} tfc_resize_desc;

/* Resampling of NHWC images x [n, h, w, c] to y [n, oh, ow, c] through a view of vh x vw
 * cells (Resizing, CenterCrop, RandomCrop): input row r, column q is the view's row r + top,
 * column q + left (top, left <= 0: the view is a window of the input, a crop; > 0: the input
 * inside a border of fill_value, a pad). The view is resized to (oh, ow) as jax.image.resize
 * does without antialiasing (core/crop_resize.h): an axis of equal sizes is copied; nearest
 * reads cell floor((o + 1/2) m / n) of m view cells for output o of n; bilinear interpolates
 * at s = (o + 1/2) m / n - 1/2 between cells floor(s) and floor(s) + 1 whose weights
 * 1 - |s - i| are renormalised over the cells inside the view. With random (RandomCrop in
 * training) top and left are drawn once per batch from (key, step) instead:
 * top = -floor(u0 (h - vh + 1)), left = -floor(u1 (w - vw + 1)), the view a window. */
typedef struct tfc_crop_resize_desc {
    int n, h, w, c;
    int oh, ow;
    int vh, vw;
    int top, left;
    int nearest; /* 0: bilinear */
    float fill_value;
    int random;
    uint64_t key, step;
} tfc_crop_resize_desc;

/* LSTM over a whole sequence, Keras's formulation with gates in the order i, f, c, o:
 *   z_t = x_t K + h_{t-1} R + b          (K [in, 4u], R [u, 4u], b [4u])
 *   i = sigmoid(z_i), f = sigmoid(z_f), g = tanh(z_c), o = sigmoid(z_o)
 *   c_t = f * c_{t-1} + i * g,   h_t = o * tanh(c_t),   h_0 = c_0 = 0
 * With a mask [n, t] (1 = real step, 0 = padding), a masked step keeps the previous h and c
 * and outputs the previous h (Keras's RNN with a mask). */
typedef struct tfc_lstm_desc {
    int n, t, in, units;
    int return_sequences; /* y is [n, t, u] when set, else [n, u] (the last h) */
    /* vocab > 0 (where the backend's lstm_ids says so): an Embedding's input taken in the
     * LSTM: x is the table [vocab, in], and sequence i's input at step s is its row
     * ids[i t + s] (the ids range-checked); dx is the table's gradient [vocab, in]
     * (accumulates). */
    int vocab;
    const int32_t *ids;
} tfc_lstm_desc;

/* Normalisation of `rows` rows of `cols` floats each, every row on its own (the normalised
 * axes of LayerNormalization and RMSNormalization, flattened):
 *   mu = mean(x) where center_stats, else 0;   invstd = 1 / sqrt(mean((x - mu)^2) + eps)
 *   u = (x - mean(x)) invstd where center, else x invstd
 * LayerNormalization centres both (u = (x - mean) / sqrt(var + eps)); RMSNormalization neither
 * (u = x / sqrt(mean(x^2) + eps)); LayerNormalization's deprecated rms_scaling only its
 * statistics (u = x / sqrt(var + eps)). center needs center_stats. */
typedef struct tfc_layernorm_desc {
    int64_t rows;
    int cols;
    int center_stats, center;
    float eps;
} tfc_layernorm_desc;

/* Group normalisation (GroupNormalization) of n examples whose channel axis of groups * cg
 * channels has `outer` positions before it and `inner` after it: x, y [n, outer, groups, cg,
 * inner] (channels last: inner 1). Each example's group g is normalised over its
 * m = outer cg inner values:
 *   mu = mean(x), invstd = 1 / sqrt(mean((x - mu)^2) + eps),   u = (x - mu) invstd
 * and gamma, beta have one value per channel (groups * cg). */
typedef struct tfc_groupnorm_desc {
    int64_t n, outer, inner;
    int groups, cg;
    float eps;
} tfc_groupnorm_desc;

/* A permutation of each example's axes (Permute): n examples x [n, dim[0], ..., dim[ndim-1]]
 * to y [n, dim[perm[0]], ..., dim[perm[ndim-1]]], output axis i being input axis perm[i]
 * (0-based, the batch axis kept first). The inverse permutation of y's shape undoes it.
 * TFC_PERMUTE_AXES is TFC_MAX_DIMS (core/tensor.h, which C++ cannot include; permute.c
 * asserts it). */
#define TFC_PERMUTE_AXES 8
typedef struct tfc_permute_desc {
    int64_t n;
    int ndim;
    int64_t dim[TFC_PERMUTE_AXES];
    int perm[TFC_PERMUTE_AXES];
} tfc_permute_desc;

/* L2 normalisation (UnitNormalization) of x, y [outer, red, inner] over the red axis, for
 * each (outer, inner) on its own (the batch folded into outer), as Keras 3's
 * ops.normalize(order=2, epsilon=1e-12):  y = x min(rsqrt(sum x^2), 1 / eps). */
typedef struct tfc_l2norm_desc {
    int64_t outer, red, inner;
    float inv_max; /* 1 / eps: 1e12 */
} tfc_l2norm_desc;

/* Scaled dot-product attention of MultiHeadAttention over n examples and `heads` heads, in
 * the projections' own layout (Keras's [B, T, N, H], no transposes):
 *   q [n, tq, heads, dk], k [n, tk, heads, dk], v [n, tk, heads, dv], o [n, tq, heads, dv].
 * For example b, head h, query row i, over the keys j it may see:
 *   s_ij = scale q_i . k_j,   p_ij = exp(s_ij - lse_i),   lse_i = log sum_j exp(s_ij)
 *   o_i = sum_j p_ij z_ij v_j
 * Key j is seen by row i when kmask[b, j] != 0 (kmask NULL: every key) and qmask[b, i] != 0
 * (qmask NULL: every row) and, with causal, j <= i (Keras's causal mask, aligned at the
 * first rows and keys also when tq != tk) and, with window > 0, |i - j| < window (Keras's
 * sliding_window, a symmetric band). A row that sees no key gets, as Keras 3 gives
 * it, with uniform the mean of every v_j (Keras's fused attention path, dropout 0: equal
 * large negative logits; lse_i = -inf marks it), else o_i = 0 (its Softmax layer's path,
 * dropout > 0; lse_i = +inf).
 * Dropout (rate > 0): z_ij = keep / (1 - rate), keep = (u >= rate), u = tfc_rng_uniform(key,
 * step, row tk4 + j) with row = (b heads + h) tq + i and tk4 = tk rounded up to a multiple
 * of 4 (core/rng.h); backward regenerates it. rate 0: z = 1. */
typedef struct tfc_attn_desc {
    int n, heads, tq, tk, dk, dv;
    int causal, uniform, window;
    float scale;             /* Keras: 1 / sqrt(key_dim) */
    const float *qmask;      /* [n, tq] or NULL */
    const float *kmask;      /* [n, tk] or NULL */
    float rate;
    uint64_t key, step;
} tfc_attn_desc;

/* Keras's Attention (Luong) and AdditiveAttention (Bahdanau) of n examples: q [n, tq, dim],
 * k [n, tv, dim], v [n, tv, dv], o [n, tq, dv]. For example b, query row i, key j:
 *   dot:      s_ij = c q_i . k_j                       (c = scale[0], or 1 when scale NULL)
 *   concat:   s_ij = w sum_d tanh(c (q_id + k_jd))      (w = cw[0])
 *   additive: s_ij = sum_d c_d tanh(q_id + k_jd)        (c_d = scale[d], or 1 when NULL)
 * Key j is masked for row i when kmask[b, j] == 0 (kmask NULL: none) or, with causal, j > i;
 * a masked score becomes s_ij - 1e9 (Keras's bias, in float). Then p_i = softmax(s_i),
 * o_i = sum_j p_ij z_ij v_j, and o_i = 0 where qmask[b, i] == 0 (qmask NULL: none).
 * Dropout (rate > 0): z_ij = keep / (1 - rate), keep = (u >= rate), u = tfc_rng_uniform(key,
 * step, (b tq + i) tv + j); rate 0: z = 1. */
enum { TFC_SCORE_DOT, TFC_SCORE_CONCAT, TFC_SCORE_ADDITIVE };
typedef struct tfc_score_attn_desc {
    int n, tq, tv, dim, dv;
    int mode, causal;
    const float *qmask;      /* [n, tq] or NULL */
    const float *kmask;      /* [n, tv] or NULL */
    float rate;
    uint64_t key, step;
} tfc_score_attn_desc;

/* The element-wise maximum or minimum of k inputs (Maximum, Minimum), each [rows, cols], the
 * way Keras folds them: y = op(op(x_0, x_1), x_2) ... (NaN propagates). Under a sequence
 * mask (mask [rows], 1 a real step, 0 padding; NULL: none) `masked` has bit i set for each
 * input carrying it, and a padded row follows Keras's Merge: an input carrying the mask
 * leaves the running result as it is, one without replaces it while every input before it
 * carried the mask, and otherwise enters the fold. */
typedef struct tfc_extremum_desc {
    int64_t rows;
    int cols;
    int k;          /* inputs, 2 .. 8 */
    int minimum;    /* 1: the minimum */
    unsigned masked;
} tfc_extremum_desc;

/* A 3-D convolution (Conv3D) of n NDHWC volumes x [n, in[0], in[1], in[2], c] with the
 * kernel w [k[0], k[1], k[2], c / groups, f] (Keras's layout) into y [n, out[0], out[1],
 * out[2], f]; axes in the order depth, height, width. Per axis stride s, dilation dil and
 * pad[] zero planes before the volume (those after are implied by out: TensorFlow's padding).
 * groups > 1: filter j reads the c / groups channels of group j / (f / groups). */
typedef struct tfc_conv3d_desc {
    int n, c, f, groups;
    int in[3], k[3], s[3], dil[3], pad[3], out[3];
} tfc_conv3d_desc;

/* Max or average 3-D pooling (MaxPooling3D, AveragePooling3D) of NDHWC volumes x [n, in[0],
 * in[1], in[2], c] into y [n, out[0], out[1], out[2], c]: windows k[] at strides s[], pad[]
 * planes before the volume (TensorFlow's padding). Padded positions never win a max and are
 * not counted in an average, as tfc_pool_desc. */
typedef struct tfc_pool3d_desc {
    int n, c, is_max;
    int in[3], k[3], s[3], pad[3], out[3];
} tfc_pool3d_desc;

/* Adaptive max or average pooling (AdaptiveMaxPooling1D/2D/3D, AdaptiveAveragePooling1D/2D/
 * 3D) of NDHWC volumes x [n, in[0], in[1], in[2], c] into y [n, out[0], out[1], out[2], c]
 * (the 1-D and 2-D layers with leading axes of 1): along each axis output cell o pools the
 * input cells [floor(o in / out), ceil((o + 1) in / out)) (core/adaptive_pool.h), bins of
 * ceil(in / out) or one more cells that overlap where in is no multiple of out, and repeat
 * cells where out > in. */
typedef struct tfc_adaptive_pool_desc {
    int n, c, is_max;
    int in[3], out[3];
} tfc_adaptive_pool_desc;

/* Element e of the fold at a row (padded: a padding step under the mask), on the host and
 * the device (TFC_HD); w (k floats, NULL: not wanted) receives each input's weight in it. */
TFC_HD float tfc_extremum_at(const tfc_extremum_desc *d, const float *const *x, int padded,
                             int64_t e, float *w)
{
    float y = x[0][e];
    int all_masked = d->masked & 1u; /* every input so far carries the mask */
    if (w) w[0] = 1.f;
    for (int i = 1; i < d->k; i++) {
        const float v = x[i][e];
        float keep = 1.f, wi = 0.f; /* the factor on the weights so far, input i's */
        if (padded && (d->masked >> i & 1u)) {
            /* masked here: the result stays */
        } else if (padded && all_masked) {
            keep = 0.f, wi = 1.f, y = v; /* replaces the result held so far */
        } else if (d->minimum ? v < y : v > y) {
            keep = 0.f, wi = 1.f, y = v;
        } else if (v == y) {
            keep = 0.5f, wi = 0.5f;
        } else if (v != v) {
            keep = 0.f, wi = 1.f, y = v; /* NaN propagates */
        }
        if (!(padded && (d->masked >> i & 1u))) all_masked = 0;
        if (w) {
            for (int j = 0; j < i; j++) w[j] *= keep;
            w[i] = wi;
        }
    }
    return y;
}

/* The pieces of it on the host and the device (TFC_HD): z_ij of row r = b tq + i, key j */
TFC_HD float tfc_score_attn_keep(const tfc_score_attn_desc *d, int64_t r, int j)
{
    if (d->rate <= 0) return 1.0f;
    const float u = tfc_rng_uniform(d->key, d->step, (uint64_t)(r * d->tv + j));
    return u >= d->rate ? 1.0f / (1.0f - d->rate) : 0.0f;
}

/* Whether key j is masked for row i of example b; whether row r = b tq + i is real */
TFC_HD int tfc_score_attn_masked(const tfc_score_attn_desc *d, int b, int i, int j)
{
    return (d->kmask && d->kmask[(int64_t)b * d->tv + j] == 0.0f) || (d->causal && j > i);
}

TFC_HD int tfc_score_attn_real(const tfc_score_attn_desc *d, int64_t r)
{
    return !d->qmask || d->qmask[r] != 0.0f;
}

/* s_ij of query row qi and key row kj, before the mask */
TFC_HD float tfc_score_attn_score(const tfc_score_attn_desc *d, const float *qi,
                                  const float *kj, const float *scale, const float *cw)
{
    float s = 0;
    if (d->mode == TFC_SCORE_DOT) {
        for (int c = 0; c < d->dim; c++) s += qi[c] * kj[c];
        return scale ? s * scale[0] : s;
    }
    if (d->mode == TFC_SCORE_CONCAT) {
        const float c0 = scale ? scale[0] : 1.0f;
        for (int c = 0; c < d->dim; c++) s += tanhf(c0 * (qi[c] + kj[c]));
        return cw[0] * s;
    }
    for (int c = 0; c < d->dim; c++) s += (scale ? scale[c] : 1.0f) * tanhf(qi[c] + kj[c]);
    return s;
}

/* dx += g ds_ij/dq_i, where `other` is kj (dot's dq_i; dk_j alike with qi as other: the
 * tanh forms are symmetric in q and k) */
TFC_HD void tfc_score_attn_grad(const tfc_score_attn_desc *d, float g, const float *qi,
                                const float *kj, const float *scale, const float *cw,
                                const float *other, float *dx)
{
    if (d->mode == TFC_SCORE_DOT) {
        const float f = scale ? g * scale[0] : g;
        for (int c = 0; c < d->dim; c++) dx[c] += f * other[c];
    } else if (d->mode == TFC_SCORE_CONCAT) {
        const float c0 = scale ? scale[0] : 1.0f, f = g * cw[0] * c0;
        for (int c = 0; c < d->dim; c++) {
            const float t = tanhf(c0 * (qi[c] + kj[c]));
            dx[c] += f * (1 - t * t);
        }
    } else {
        for (int c = 0; c < d->dim; c++) {
            const float t = tanhf(qi[c] + kj[c]);
            dx[c] += g * (scale ? scale[c] : 1.0f) * (1 - t * t);
        }
    }
}

/* The weights' gradients, summed over every (b, i, j) in double: returns the sum for
 * component c of the scale (additive: scale[c]; the others: c 0, the one scale) and, for
 * concat, adds the concat weight's into *cw_sum. ds [n, tq, tv] is the scores' gradient. */
TFC_HD double tfc_score_attn_weight_sum(const tfc_score_attn_desc *d, int c, const float *q,
                                        const float *k, const float *scale, const float *cw,
                                        const float *ds, double *cw_sum)
{
    const int tq = d->tq, tv = d->tv, dim = d->dim;
    double sc = 0;
    for (int64_t r = 0; r < (int64_t)d->n * tq; r++) {
        const float *qi = q + r * dim, *kb = k + r / tq * tv * dim;
        for (int j = 0; j < tv; j++) {
            const float g = ds[r * tv + j], *kj = kb + (int64_t)j * dim;
            if (d->mode == TFC_SCORE_ADDITIVE) {
                sc += (double)g * tanhf(qi[c] + kj[c]);
            } else if (d->mode == TFC_SCORE_DOT) {
                float raw = 0;
                for (int e = 0; e < dim; e++) raw += qi[e] * kj[e];
                sc += (double)g * raw;
            } else {
                const float c0 = scale ? scale[0] : 1.0f;
                double sum_t = 0, dc = 0;
                for (int e = 0; e < dim; e++) {
                    const float t = tanhf(c0 * (qi[e] + kj[e]));
                    sum_t += t;
                    dc += (double)(1 - t * t) * (qi[e] + kj[e]);
                }
                *cw_sum += g * sum_t;
                sc += g * cw[0] * dc;
            }
        }
    }
    return sc;
}

/* GRU over a whole sequence, Keras's formulation with gates in the order z, r, h:
 *   z = sigmoid(x_t K_z + h_{t-1} R_z + b_z),  r = sigmoid(x_t K_r + h_{t-1} R_r + b_r)
 *   reset_after:  hh = tanh(x_t K_h + b_h + r * (h_{t-1} R_h + b'_h))
 *   reset_before: hh = tanh(x_t K_h + b_h + (r * h_{t-1}) R_h)
 *   h_t = z * h_{t-1} + (1 - z) * hh,   h_0 = 0
 * K [in, 3u], R [u, 3u]; the bias is [2, 3u] with reset_after (row 0 added to x_t K, row 1
 * (the b' above) to h_{t-1} R), [3u] without. A mask as the LSTM's. */
typedef struct tfc_gru_desc {
    int n, t, in, units;
    int return_sequences; /* y is [n, t, u] when set, else [n, u] (the last h) */
    int reset_after;
} tfc_gru_desc;

/* SimpleRNN over a whole sequence, Keras's SimpleRNNCell:
 *   a_t = x_t K + h_{t-1} R + b,   h_t = act(a_t),   h_0 = 0
 * K [in, u], R [u, u], b [u] or NULL; act any tfc_act (softmax over the u units). A mask as
 * the LSTM's: a masked step keeps, and outputs, the previous h. */
typedef struct tfc_simple_rnn_desc {
    int n, t, in, units;
    int return_sequences; /* y is [n, t, u] when set, else [n, u] (the last h) */
    tfc_act act;
} tfc_simple_rnn_desc;

/* The recurrence of an LSTM, GRU or SimpleRNN stepped cell by cell: in a training pass with
 * Keras 3's recurrent_dropout (its cells' implementation 1), and in every pass of an LSTM or
 * GRU whose activations are not tanh and sigmoid (tfc_rnn_dropout_any_acts; rates 0 outside
 * such a training pass). Keep masks drawn once per sequence, the
 * same at every step, multiply the previous state where it meets each gate's recurrent
 * kernel and, for the LSTM's and GRU's gates, the input where it meets each gate's kernel:
 *   LSTM (gates i, f, c, o), GRU (z, r, h): gate g's sum is
 *       (x_t ⊙ dk_g) K_g + b_g + (h_{t-1} ⊙ rk_g) R_g
 *     with one input mask dk_g [in] and one recurrent mask rk_g [u] per gate and sequence;
 *     the GRU as gru_forward's (bias [2, 3u] with reset_after: r ((h ⊙ rk_h) R_h + b'_h);
 *     without: (r ⊙ h ⊙ rk_h) R_h), h_t = z h_{t-1} + (1 - z) hh with h_{t-1} unmasked;
 *   SimpleRNN: a_t = x_t K + b + (h_{t-1} ⊙ rk) R, h_t = act(a_t): one recurrent mask, its
 *     input dropout the one rnn_input gives it (x prepared; `rate` 0).
 * keep = (v >= rate) / (1 - rate) with v = uniform(key', step, (i G + g) f + c) (core/rng.h),
 * key' = tfc_rng_key(key, 1) for the input masks and tfc_rng_key(key, 2) for the recurrent
 * ones; a rate of 0 keeps everything. A masked step (mask [n, t]) keeps the state, as the
 * other recurrences. */
typedef enum { TFC_RNN_CELL_LSTM = 0, TFC_RNN_CELL_GRU, TFC_RNN_CELL_SIMPLE } tfc_rnn_cell;

typedef struct tfc_rnn_dropout_desc {
    tfc_rnn_cell cell;
    int n, t, in, units;
    int return_sequences; /* y is [n, t, u] when set, else [n, u] (the last h) */
    int reset_after;      /* GRU */
    tfc_act act;           /* SimpleRNN's; the LSTM's and GRU's `activation` (tanh) */
    tfc_act recurrent_act; /* the LSTM's and GRU's gates' (sigmoid) */
    float rate;            /* the input masks' (LSTM, GRU) */
    float recurrent_rate; /* the recurrent masks' */
    uint64_t key, step;
} tfc_rnn_dropout_desc;

/* Whether d is an LSTM's or GRU's with activations other than Keras's defaults (tanh and
 * sigmoid): its state then keeps the gates' pre-activations too (rnn_dropout_forward). */
static inline int tfc_rnn_dropout_any_acts(const tfc_rnn_dropout_desc *d)
{
    return d->cell != TFC_RNN_CELL_SIMPLE &&
           (d->act != TFC_ACT_TANH || d->recurrent_act != TFC_ACT_SIGMOID);
}

/* Random augmentation of NHWC images, one random transform per image, active in training
 * (the augmentation layers). Image i's draws are u_k = tfc_rng_uniform(key, step, 4 i + k)
 * (core/rng.h, k < 4), so its transform is a function of (key, step, i) alone: the same on
 * every backend, with any thread count, and again on resume. Draw k in a range [lo, hi] is
 * lo + u_k (hi - lo). core/augment.h computes each image's transform from these descs. */
typedef enum tfc_warp_kind {
    TFC_WARP_FLIP = 0,  /* u0 <= 1/2: flip the axes flip_rows, flip_cols (RandomFlip) */
    TFC_WARP_TRANSLATE, /* shift by draw 0 times h rows, draw 1 times w columns */
    TFC_WARP_ROTATE,    /* turn by draw 0 degrees about the image's centre */
    TFC_WARP_ZOOM,      /* scale the rows read by draw 0, the columns by draw 1 (or 0) */
    TFC_WARP_SHEAR,     /* shear about the origin: columns by draw 1, rows by draw 2, both
                         * negated when u0 > 1/2 */
    TFC_WARP_PERSPECTIVE /* a projective map, when its threshold is under its probability
                          * (lo[0], hi[0]): the corners moved by factors drawn in lo[1], hi[1]
                          * (core/augment.h, draws of their own: tfc_perspective_draw) */
} tfc_warp_kind;

/* Where a warp reads outside the image (Keras's fill_mode, jax.scipy.ndimage's modes):
 * reflect (d c b a | a b c d | d c b a), wrap (a b c d | a b c d), constant (k k | a b c d |
 * k k, k = fill_value), nearest (a a | a b c d | d d), mirror (c b | a b c d | c b). */
typedef enum tfc_fill_mode {
    TFC_FILL_REFLECT = 0,
    TFC_FILL_WRAP,
    TFC_FILL_CONSTANT,
    TFC_FILL_NEAREST,
    TFC_FILL_MIRROR /* (c b | a b c d | c b): RandomElasticTransform's only */
} tfc_fill_mode;

/* A geometric augmentation: output pixel (oy, ox) of image i reads the input at
 *   sx = (a0 ox + a1 oy + a2) / q,   sy = (b0 ox + b1 oy + b2) / q,   q = c0 ox + c1 oy + 1
 * with image i's matrix (tfc_warp_matrix; c0 = c1 = 0, q = 1, but for PERSPECTIVE), nearest
 * (rounded half away from zero) or bilinear, the four neighbours of a bilinear read each
 * placed by `fill` (in constant mode a neighbour outside the image reads fill_value): Keras's
 * affine_transform (perspective_transform) on JAX. */
typedef struct tfc_warp_desc {
    int n, h, w, c;
    tfc_warp_kind kind;
    float lo[2], hi[2];  /* ranges: [0] rows (the angle, in degrees, for ROTATE), [1] columns */
    int same_zoom;       /* ZOOM: the columns' factor is the rows' (width_factor None) */
    int flip_rows, flip_cols; /* FLIP: the axes flipped together when u0 <= 1/2 */
    tfc_fill_mode fill;
    int bilinear;        /* 0: nearest */
    float fill_value;
    uint64_t key, step;
} tfc_warp_desc;

/* RandomContrast: image i's factor f = lo + u0 (hi - lo); each channel ch of it becomes
 *   y = clip((x - m) f + m, vlo, vhi),   m = the mean of channel ch over the image's hw pixels
 * RandomBrightness (the same desc): image i's delta b = (lo + u0 (hi - lo)) (vhi - vlo), and
 *   y = clip(x + b, vlo, vhi) */
typedef struct tfc_contrast_desc {
    int n, hw, c;
    float lo, hi;   /* the factor's range */
    float vlo, vhi; /* value_range */
    uint64_t key, step;
} tfc_contrast_desc;

/* The colour augmentations (layers/augment_color.c), per pixel of c channels; image i's draws
 * as above, in the ranges lo[k], hi[k] (core/color.h):
 *   GRAYSCALE (RandomGrayscale)  u0 < hi[0]: each channel becomes the pixel's luma
 *             0.2989 r + 0.5870 g + 0.1140 b (c == 3; c == 1 is kept)
 *   INVERT    (RandomInvert)     u1 < draw 0: y = vhi - x (vhi: value_range[1] as given)
 *   SOLARIZE  (Solarization)     z = clip(x in [0, 255] + draw 0, 0, 255),
 *                                y = z < draw 1 ? z : 255 - z, back in [vlo, vhi]
 *   POSTERIZE (RandomPosterization) z = x in [0, 255] saturated to a byte, its low 8 - b bits
 *                                cleared (b = lo[0] when hi[0] == lo[0], else an integer drawn
 *                                in [lo[0], hi[0])), back in [vlo, vhi]
 *   DEGENERATE (RandomColorDegeneration) y = clip(x + f (luma - x), vlo, vhi), f = draw 0
 *   SATURATE  (RandomSaturation) the pixel in HSV (Keras's rgb_to_hsv, c == 3), its
 *             saturation times u / (1 - u + 1e-7), u = draw 0, clipped to [vlo, vhi]
 *   HUE       (RandomHue)        x from [vlo, vhi] (as given) to [0, 1], in HSV its hue plus
 *                                +-draw 1 / 2 (minus when u0 > 1/2), wrapped into [0, 1],
 *                                back to RGB clipped to [0, 1], then to [vlo, vhi] */
typedef enum tfc_color_kind {
    TFC_COLOR_GRAYSCALE = 0,
    TFC_COLOR_INVERT,
    TFC_COLOR_SOLARIZE,
    TFC_COLOR_POSTERIZE,
    TFC_COLOR_DEGENERATE,
    TFC_COLOR_SATURATE,
    TFC_COLOR_HUE
} tfc_color_kind;

typedef struct tfc_color_desc {
    int n, hw, c;
    tfc_color_kind kind;
    float lo[2], hi[2]; /* the ranges drawn from */
    float vlo, vhi;     /* value_range */
    uint64_t key, step;
} tfc_color_desc;
/* RandomErasing in training (core/augment_region.h): image i, when its draw u5 < p (p drawn
 * in [plo, phi]), has the rectangle x0 <= ox < x1, y0 <= oy < y1 replaced by the fill;
 * the rectangle's sides are sqrt(a) w and sqrt(b) h (a, b drawn in [slo, shi]), its corner
 * placed uniformly within the image. The fill: clip(z vhi, vlo, vhi) per value (z a
 * standard normal; noise) or clip(fill[ch], vlo, vhi). */
typedef struct tfc_erase_desc {
    int n, h, w, c;
    float plo, phi;  /* factor: the erase probability's range */
    float slo, shi;  /* scale: each side's squared fraction */
    int noise;       /* 1: a normal draw per value; 0: fill[ch % 3] */
    float fill[3];
    float vlo, vhi;  /* value_range, as Keras clips the fill to it (not sorted) */
    uint64_t key, step;
} tfc_erase_desc;

/* RandomGaussianBlur in training (core/augment_region.h): image i, when its draw u1 < p (p
 * drawn in [plo, phi]), is blurred by a kw x kh Gaussian (sigmas drawn once per batch in
 * [slo, shi], Keras's), zero-padded to its size; then every image is clipped:
 *   y = clip(blurred ? k * x : x, vlo, vhi) */
enum { TFC_BLUR_MAX_KERNEL = 63 };
typedef struct tfc_blur_desc {
    int n, h, w, c;
    int kh, kw;     /* odd, at most TFC_BLUR_MAX_KERNEL */
    float plo, phi; /* factor: the blur probability's range */
    float slo, shi; /* sigma's range */
    float vlo, vhi; /* value_range (not sorted) */
    uint64_t key, step;
} tfc_blur_desc;

/* AutoContrast and Equalization (layers/augment_tone.c, core/tone.h), NHWC, per channel:
 *   AUTOCONTRAST each image's channel, in [0, 255] from [vlo, vhi], stretched so that its
 *                minimum becomes 0 and its maximum 255, back in [vlo, vhi] (a constant
 *                channel kept as it is)
 *   EQUALIZE     each channel over the whole batch (Keras's histogram of images[..., ch]),
 *                in [0, 255] from [vlo, vhi], mapped through its bins-bin histogram's
 *                equalizing lookup table (a channel of at most one non-zero bin kept),
 *                back in [vlo, vhi] */
enum { TFC_TONE_MAX_BINS = 4096 };
typedef enum tfc_tone_kind {
    TFC_TONE_AUTOCONTRAST = 0,
    TFC_TONE_EQUALIZE,
    TFC_TONE_CLAHE /* ContrastLimitedAdaptiveHistogramEqualization (core/tone.h): each image's
                    * channel in [0, 255] cut into grid_h x grid_w tiles (the image padded
                    * symmetrically to whole tiles), each tile's 256-bin histogram clipped at
                    * clip_limit (its excess spread evenly) and turned into a table; each
                    * value the bilinear blend of the four nearest tiles' tables, back in
                    * [vlo, vhi] (training and inference) */
} tfc_tone_kind;
typedef struct tfc_tone_desc {
    int n, hw, c;
    tfc_tone_kind kind;
    int bins;       /* EQUALIZE: in [1, TFC_TONE_MAX_BINS] */
    float vlo, vhi; /* value_range, sorted (CLAHE: as given) */
    int h, w, grid_h, grid_w; /* CLAHE only: hw = h w */
    float clip_limit;         /* CLAHE only: <= 0 no clipping */
} tfc_tone_desc;
/* RandomElasticTransform in training (core/elastic.h): one displacement field per image, used
 * for both axes (Keras's JAX elastic_transform draws dx and dy from one key): f = the SAME,
 * zero-padded k x k Gaussian blur (sigma) of sigma z, z standard normals (the n h w of
 * noise when set, else drawn from (key, step)). Image i, when its draw u1 < p (p = plo + u0
 * (phi - plo)), reads output pixel (oy, ox) at (ox + alpha f, oy + alpha f), nearest or
 * bilinear, cells outside placed by fill as tfc_warp_desc's; then every image is clipped:
 *   y = clip(moved ? warp(x) : x, vlo, vhi) */
typedef struct tfc_elastic_desc {
    int n, h, w, c;
    int k;              /* the blur's odd size, int(6 sigma) | 1 */
    float alpha, sigma; /* sigma <= 0: no displacement */
    float plo, phi;     /* factor: the probability's range */
    tfc_fill_mode fill;
    int bilinear;       /* 0: nearest */
    float fill_value;
    float vlo, vhi;     /* value_range (not sorted, as Keras clips) */
    uint64_t key, step;
    const float *noise; /* n h w normals in place of the draws (tests); NULL: drawn */
} tfc_elastic_desc;
/* RandomSharpness in training (core/augment_sharp.h): image i's factor f = lo + u0 (hi - lo)
 * (u0 its draw, as tfc_augment_draw's) blends it with its smoothing s (Keras's 3 x 3 kernel,
 * 1/13 around 5/13, zero-padded), then every image is clipped:
 *   y = clip(x + (1 - 2 f) (s - x), vlo, vhi) */
typedef struct tfc_sharpen_desc {
    int n, h, w, c;
    float lo, hi;   /* factor's range */
    float vlo, vhi; /* value_range (sorted) */
    uint64_t key, step;
} tfc_sharpen_desc;
/* STFTSpectrogram and MelSpectrogram (core/stft.h): each frame t of a channel's signal,
 * samples t step .. t step + frame - 1 of the signal padded with pad_left zeros before it
 * (Keras's `same` padding; after it as many as the frames read) or, with reflect, pad_left
 * mirrored samples each side (MelSpectrogram's center=True), against the DFT kernels:
 *   re[n, c, t, f] = sum_u s[t step + u] wr[u, f],  im likewise with wi  (f < bins)
 * then the output by mode: STFT's log, magnitude, psd, real, imag, angle or stft (re then
 * im on the frequency axis), written at y[n sn + c sc + t st + k sf]; or MEL: the power
 * spectrum |X|^mag_exp times mel [bins, mels], in decibels when db (10 log10 of it clamped
 * at min_power, minus ref_db, then raised to at least the batch's maximum minus top_db). */
typedef enum tfc_stft_mode {
    TFC_STFT_LOG = 0, TFC_STFT_MAGNITUDE, TFC_STFT_PSD, TFC_STFT_REAL, TFC_STFT_IMAG,
    TFC_STFT_ANGLE, TFC_STFT_STFT, TFC_STFT_MEL
} tfc_stft_mode;
typedef struct tfc_stft_desc {
    int n, c, t;            /* examples, channels, samples per channel */
    int channels_first;     /* x [n, c, t]; else [n, t, c] */
    int frame, step, bins;  /* frame_length, frame_step, fft_length / 2 + 1 */
    int frames, pad_left;
    int reflect;            /* mirror pad_left samples each side (needs pad_left < t) */
    tfc_stft_mode mode;
    int64_t sn, sc, st, sf; /* the output's strides (MEL: c 1, y [n, mels, frames]) */
    int mels, db;           /* MEL only */
    float mag_exp, min_power, ref_db, top_db;
} tfc_stft_desc;

/* The numeric preprocessing layers (CategoryEncoding, Discretization, IntegerLookup): each of
 * the rows x width input values v (int32 when ints, else float) maps to an index k:
 *   INDEX:  k = v (a float truncated toward zero, as Keras casts it);
 *   BUCKET: k = how many of the n ascending boundaries table[0, n) are <= v (a value equal to
 *           a boundary goes to the bin above it, as Keras's Discretization);
 *   LOOKUP: k = table[n + i] where table[i] == v, the n keys table[0, n) ascending; a value
 *           not there: oov + floormod(v, noov) (IntegerLookup's out-of-vocabulary indices);
 *   INVERT: k = table[v] for v in [0, n), else oov (IntegerLookup's invert: index to value);
 *   HASH:   k = the 64-bit hash of v's decimal digits (a float truncated first) modulo n:
 *           FarmHash's Fingerprint64 or, salted, SipHash-2-4 keyed by key (TensorFlow's
 *           to_hash_bucket_fast and _strong); masked: v == mask_value gives 0, the others
 *           1 + the hash modulo n - 1 (Keras's Hashing); no table;
 * then by mode: INT y[r, j] = k (int32 bits with out_ints, else a float); ONE_HOT
 * y[r, j, 0 .. depth) the one-hot of k; MULTI_HOT y[r, 0 .. depth) 1 where some k of row r
 * falls; COUNT how many do; an index outside [0, depth) marks nothing. With scale (a
 * [depth] table; NULL: none), the MULTI_HOT and COUNT values are multiplied by it. */
typedef enum tfc_encode_map {
    TFC_ENCODE_INDEX = 0, TFC_ENCODE_BUCKET, TFC_ENCODE_LOOKUP, TFC_ENCODE_INVERT,
    TFC_ENCODE_HASH
} tfc_encode_map;
typedef enum tfc_encode_mode {
    TFC_ENCODE_INT = 0, TFC_ENCODE_ONE_HOT, TFC_ENCODE_MULTI_HOT, TFC_ENCODE_COUNT
} tfc_encode_mode;
typedef struct tfc_encode_desc {
    int64_t rows;
    int width, ints, out_ints;
    tfc_encode_map map;
    int n, oov, noov;
    tfc_encode_mode mode;
    int depth;
    int salted, masked;  /* HASH */
    uint64_t key[2];
    double mask_value;
} tfc_encode_desc;

/* How Bidirectional joins its two directions' outputs (Keras's merge_mode). */
typedef enum tfc_merge_mode {
    TFC_MERGE_CONCAT = 0,
    TFC_MERGE_SUM,
    TFC_MERGE_MUL,
    TFC_MERGE_AVE
} tfc_merge_mode;

typedef enum tfc_loss_kind {
    TFC_LOSS_SPARSE_CCE = 0, /* labels int32 [rows]: class index */
    TFC_LOSS_CCE,            /* labels float [rows, classes]: a distribution */
    TFC_LOSS_BCE,            /* labels float [rows, classes]: 0/1 targets per output */
    TFC_LOSS_MSE,            /* labels float [rows, classes] */
    TFC_LOSS_MAE,            /* labels float [rows, classes] */
    TFC_LOSS_HUBER,          /* labels float [rows, classes]; the op's delta */
    TFC_LOSS_LOG_COSH,       /* labels float [rows, classes] */
    TFC_LOSS_MSLE,           /* labels float [rows, classes] */
    TFC_LOSS_MAPE,           /* labels float [rows, classes] */
    TFC_LOSS_POISSON,        /* labels float [rows, classes]: counts */
    TFC_LOSS_KLD,            /* labels float [rows, classes]: a distribution */
    TFC_LOSS_HINGE,          /* labels float [rows, classes]: -1/1 (0 read as -1) */
    TFC_LOSS_SQUARED_HINGE,  /* labels float [rows, classes]: -1/1 (0 read as -1) */
    TFC_LOSS_CATEGORICAL_HINGE, /* labels float [rows, classes]: one-hot (or -1/1) */
    TFC_LOSS_COSINE_SIMILARITY, /* labels float [rows, classes] */
    TFC_LOSS_COUNT
} tfc_loss_kind;

/* One output's term of an element-wise loss other than MSE (Keras 3's formulas) at the
 * prediction x and target t, and its derivative with respect to x in *dx. With e = x - t
 * and Keras's epsilon 1e-7:
 *   mae            |e|                                  (sign e; 0 at 0, TensorFlow's sign)
 *   huber          e^2 / 2 where |e| <= delta, else delta |e| - delta^2 / 2
 *   log_cosh       e + softplus(-2e) - log 2            (tanh e)
 *   msle           (log(max(x, eps) + 1) - log(max(t, eps) + 1))^2
 *   mape           100 |e| / max(|t|, eps)
 *   poisson        x - t log(x + eps)
 *   kl_divergence  tc log(tc / xc), tc and xc clipped to [eps, 1]  (summed, not averaged)
 *   hinge          max(1 - t x, 0),   t = -1 where the target is 0 (Keras's binary labels)
 *   squared_hinge  max(1 - t x, 0)^2, t as hinge's
 * A clipped or max'ed operand at its bound passes no gradient. The row's loss is the mean
 * of its terms (tfc_loss_row_divisor). In double, on the host and the device (TFC_HD), so
 * both backends' loss ops share it. delta is Huber's (the loss op's argument). */
TFC_HD double tfc_elementwise_term(tfc_loss_kind kind, double x, double t, double delta,
                                   double *dx)
{
    const double eps = 1e-7, e = x - t, a = fabs(e), sign = e > 0 ? 1.0 : e < 0 ? -1.0 : 0.0;
    switch (kind) {
    case TFC_LOSS_MAE: *dx = sign; return a;
    case TFC_LOSS_HUBER:
        *dx = a <= delta ? e : delta * sign;
        return a <= delta ? 0.5 * e * e : delta * a - 0.5 * delta * delta;
    case TFC_LOSS_MSLE: {
        const double d = log1p(x > eps ? x : eps) - log1p(t > eps ? t : eps);
        *dx = x > eps ? 2.0 * d / (1.0 + x) : 0.0;
        return d * d;
    }
    case TFC_LOSS_MAPE: {
        const double m = fabs(t) > eps ? fabs(t) : eps;
        *dx = 100.0 * sign / m;
        return 100.0 * a / m;
    }
    case TFC_LOSS_POISSON: *dx = 1.0 - t / (x + eps); return x - t * log(x + eps);
    case TFC_LOSS_KLD: {
        const double tc = t < eps ? eps : t > 1.0 ? 1.0 : t, xc = x < eps ? eps : x > 1.0 ? 1.0 : x;
        *dx = x > eps && x < 1.0 ? -tc / xc : 0.0;
        return tc * log(tc / xc);
    }
    case TFC_LOSS_HINGE:
    case TFC_LOSS_SQUARED_HINGE: {
        const double s = t == 0.0 ? -1.0 : t, h = 1.0 - s * x;
        if (h <= 0.0) {
            *dx = 0.0;
            return 0.0;
        }
        *dx = kind == TFC_LOSS_HINGE ? -s : -2.0 * h * s;
        return kind == TFC_LOSS_HINGE ? h : h * h;
    }
    default: /* log_cosh; softplus(-2e) = max(-2e, 0) + log1p(exp(-2|e|)) */
        *dx = tanh(e);
        return e + (e < 0 ? -2.0 * e : 0.0) + log1p(exp(-2.0 * a)) - 0.69314718055994530942;
    }
}

/* What an element-wise loss divides the sum of a row's terms by: Keras's mean over the last
 * axis, but kl_divergence's sum. */
TFC_HD int tfc_loss_row_divisor(tfc_loss_kind kind, int classes)
{
    return kind == TFC_LOSS_KLD ? 1 : classes;
}

/* The optimizer, one enum for both floors: the solver's `optimizer.type` (whose names,
 * tfc_optimizer_names, and field tables live in solver/optimizer.c) and the update rule of
 * the backend's optimizer_update. ADAMW is Adam's rule, its decoupled decay carried by
 * tfc_optim_desc.decay, which every rule applies (Keras 3's weight_decay of any optimizer). */
typedef enum tfc_optimizer_type {
    TFC_OPTIMIZER_SGD = 0,
    TFC_OPTIMIZER_ADAM,
    TFC_OPTIMIZER_ADAMW,
    TFC_OPTIMIZER_RMSPROP,
    TFC_OPTIMIZER_ADAGRAD,
    TFC_OPTIMIZER_NADAM,
    TFC_OPTIMIZER_ADAMAX,
    TFC_OPTIMIZER_LION,
    TFC_OPTIMIZER_ADADELTA,
    TFC_OPTIMIZER_FTRL,
    TFC_OPTIMIZER_SCHEDULE_FREE_ADAMW,
    TFC_OPTIMIZER_LAMB,
    TFC_OPTIMIZER_ADAFACTOR,
    TFC_OPTIMIZER_MUON,
    TFC_OPTIMIZER_COUNT
} tfc_optimizer_type;

/* The per-step constants of tfc_optim_desc.coef (TFC_OPTIM_COEFS of them) */
#define TFC_OPTIM_COEFS 5

/* One variable (one trainable weight) of the arena, for the rules that reduce over each
 * variable (lamb's norms, adafactor's RMS and factored moments, muon's orthogonalised
 * matrices): its floats are [offset, offset + numel), and Keras's shape folded over its
 * last two axes to (numel / (rows cols), rows, cols), or rows = cols = 0 for a variable of
 * rank < 2. matrix: muon's Newton-Schulz rule applies (a rank-2 weight that is not excluded;
 * the others take its AdamW rule). */
typedef struct tfc_optim_var {
    int64_t offset, numel;
    int64_t rows, cols;
    int matrix;
} tfc_optim_var;

/* One optimizer step over the flat arenas of trainable parameters (tfc_model_params /
 * tfc_model_grads), fused so that a device reads and writes each float once. Every type
 * first forms the gradient it applies from the accumulated one, and decays the weight:
 *   g = grad_scale * grad + l2 * w      (1/iter_size and global-norm clipping; L2 decay)
 *   g = min(max(g, -clipvalue), clipvalue)   (Keras's clipvalue, where it is not 0)
 *   w = w - decay * w                   (decoupled decay, AdamW: lr * weight_decay)
 * then, with slots as named (Keras's formulas and variable names):
 *   sgd      momentum == 0: w -= lr g
 *            else v = momentum v - lr g;  w += v,  or with nesterov w += momentum v - lr g
 *            slot0 v (momentum)
 *   adam,    m += (g - m)(1 - beta_1);  v += (g^2 - v)(1 - beta_2)
 *   adamw    amsgrad: vh = max(vh, v), v := vh
 *            w -= alpha m / (sqrt(v) + epsilon),  alpha = lr sqrt(1 - beta_2^t) / (1 - beta_1^t)
 *            (t = 1, 2, ...; the caller computes alpha)
 *            slot0 m (momentum), slot1 v (velocity), slot2 vh (velocity_hat)
 *   rmsprop  v = rho v + (1 - rho) g^2
 *            centered: a = rho a + (1 - rho) g, den = v - a^2 + epsilon; else den = v + epsilon
 *            inc = lr g / sqrt(den);  momentum > 0: mo = momentum mo + inc, w -= mo; else w -= inc
 *            slot0 v (velocity), slot1 mo (momentum), slot2 a (average_gradient)
 *   adagrad  acc += g^2;  w -= lr g / sqrt(acc + epsilon)       slot0 acc (accumulator)
 *   nadam    m += (g - m)(1 - beta_1);  v += (g^2 - v)(1 - beta_2)
 *            mh = coef0 m / coef1 + coef2 g / coef3;  w -= mh lr / (sqrt(v / coef4) + epsilon)
 *            (coef: u_{t+1}, 1 - U_t u_{t+1}, 1 - u_t, 1 - U_t, 1 - beta_2^t with Keras's
 *            momentum schedule u_t = beta_1 (1 - 0.5 0.96^t) and U_t = u_1 ... u_t)
 *            slot0 m (momentum), slot1 v (velocity)
 *   adamax   m += (g - m)(1 - beta_1);  u = max(beta_2 u, |g|)
 *            w -= lr m / (coef0 (u + epsilon)),  coef0 = 1 - beta_1^t
 *            slot0 m (momentum), slot1 u (norm)
 *   lion     w -= lr sign(beta_1 m + (1 - beta_1) g);  m = beta_2 m + (1 - beta_2) g
 *            slot0 m (momentum)
 *   adadelta a = rho a + (1 - rho) g^2;  d = -sqrt(b + epsilon) g / sqrt(a + epsilon)
 *            b = rho b + (1 - rho) d^2;  w += lr d
 *            slot0 a (accumulated_grad), slot1 b (accumulated_delta_var)
 *   ftrl     p = -lr_power;  n' = n + g^2  (g, not the shrunk gradient)
 *            z += g + l2_shrinkage w - (n'^p - n^p) / lr w;  n = n'
 *            w = (clip(z, -l1, l1) - z) / (n'^p / lr + coef0),  coef0 = 2 (l2 + beta / (2 lr))
 *            slot0 n (accumulator, starting at initial_accumulator_value), slot1 z (linear)
 *   schedulefreeadamw  v += (g^2 - v)(1 - beta_2);  z' = z - coef0 g / (sqrt(v / coef1) + eps)
 *            x = (w - (1 - beta_1) z) / beta_1;  x' = (1 - coef2) x + coef2 z'
 *            w = (1 - beta_1) z' + beta_1 x'
 *            (coef0 = lr min(t / warmup_steps, 1), coef1 = 1 - beta_2^t, coef2 = 1 / t;
 *            z starts as w: with coef3 = 1 (the first update) z is read as w before decay)
 *            slot0 z (momentum), slot1 v (velocity)
 * and per variable x (tfc_optim_var; vars NULL: the whole arena is one vector), with
 * ||.|| its 2-norm and rms(.) = ||.|| / sqrt(numel):
 *   lamb     m += (g - m)(1 - beta_1);  v += (g^2 - v)(1 - beta_2)
 *            u = (m / coef0) / (sqrt(v / coef1) + epsilon),  coef0, coef1 = 1 - beta_{1,2}^t
 *            r = ||w|| / ||u|| (1 where either is 0);  w -= r lr u   (||w|| after the decay)
 *            slot0 m (momentum), slot1 v (velocity)
 *   adafactor  G = g^2 + epsilon (Keras's epsilon_1);  b = coef1 = 1 - t^beta_2_decay
 *            rank >= 2, per (row, column) matrix of the fold: R = b R + (1 - b) mean_cols(G),
 *            C = b C + (1 - b) mean_rows(G),  v = R_i C_j / mean(R)
 *            rank < 2: v = b v + (1 - b) G
 *            u = g / sqrt(v) (folded: / (sqrt(R_i / mean(R)) sqrt(C_j)), which does not
 *            underflow where Keras's root of the product does);
 *            w -= max(epsilon_2, rms(w)) coef0 u / max(1, rms(u) / clip)
 *            coef0 = min(lr, 1 / sqrt(t));  slot0 R (at the variable's offset, one per row),
 *            slot1 C (one per column), slot2 v
 *   muon     a variable with `matrix` (rank 2, rows x cols):  m += g + (momentum - 1) m
 *            o = g + momentum m (nesterov) or m;  X = o / (||o||_F + 1e-7), transposed when
 *            rows > cols; ns_steps times  A = X X^T,  X = a X + (b A + c A A) X  (muon_a, _b,
 *            _c);  w -= lr X sqrt(max(rows, cols)) rms_rate  (back in the variable's shape)
 *            the others: Adam's rule, alpha from coef0 = lr' sqrt(1 - beta_2^t) / (1 -
 *            beta_1^t) with lr' = lr adam_lr_ratio
 *            slot0 m (momentum), slot1 v (velocity: the AdamW variables' only)
 * Arithmetic is float32 (the per-variable sums in double, in blocks fixed by the size), so
 * the result does not depend on threads. */
typedef struct tfc_optim_desc {
    tfc_optimizer_type type;
    float lr;          /* this step's learning rate */
    float grad_scale;  /* multiplies the accumulated gradient */
    float l2;          /* weight_decay: adds l2 * w to the gradient */
    float decay;       /* decoupled decay factor (AdamW: lr * weight_decay), 0 for none */
    float momentum;    /* sgd, rmsprop */
    int nesterov;      /* sgd */
    float beta_1, beta_2, epsilon; /* adam; epsilon also rmsprop, adagrad */
    float alpha;       /* adam: bias-corrected step size for this t */
    int amsgrad;       /* adam */
    float rho;         /* rmsprop, adadelta */
    int centered;      /* rmsprop */
    float lr_power, l1, l2_shrinkage; /* ftrl: learning_rate_power, l1 and 2 x l2 shrinkage */
    float coef[TFC_OPTIM_COEFS];      /* nadam, adamax, ftrl, schedulefreeadamw, lamb,
                                       * adafactor, muon: the step's constants (above) */
    float clipvalue;                  /* Keras's clipvalue: g clipped to [-it, it]; 0: none */
    float epsilon_2, clip_threshold;  /* adafactor (epsilon_1 is epsilon) */
    float ns_a, ns_b, ns_c, rms_rate; /* muon: muon_a, _b, _c and rms_rate (0: none) */
    int ns_steps;                     /* muon */
    const tfc_optim_var *vars;        /* lamb, adafactor: the variables, host memory */
    int nvars;
    /* optimizer_update_at only: lr, alpha, decay and coef are read from the step state
     * (its lr, alpha, decay, coef) instead of from here, so a step replayed from a CUDA
     * graph, whose by-value arguments are the captured step's, takes each step's rates */
    int rates_at_state;
} tfc_optim_desc;

/* The decisions of one update as data on the device, for the trainer's device path
 * (solver/train.c): grad_sumsq writes sumsq, step_scale grad_scale and skip from it and the
 * loss, optimizer_update_at reads them, and the host downloads the struct once the step's
 * work is queued. */
typedef struct tfc_step_state {
    double sumsq;      /* the accumulated gradient's sum of squares, as sumsq returns it */
    float grad_scale;  /* the update's grad_scale: tfc_step_grad_scale(sumsq, ...) */
    int32_t skip;      /* 1: the loss or sumsq is not finite; optimizer_update_at does nothing */
    /* The update's rates as the host writes them before the step, for a desc with
     * rates_at_state (tfc_optim_desc); no op writes them. */
    float lr, alpha, decay;
    /* float16's loss scale S (a power of two; 1 in other precisions), as the host writes it
     * before the step (right after decay, so one upload writes the rates and S): step_scale
     * divides the update's scale by it and loss_scale_at multiplies the loss's gradient by
     * it, so a step replayed from a CUDA graph takes each step's S. No op writes it. */
    float loss_scale;
    /* The update's per-step constants (tfc_optim_desc.coef), as the host writes them with
     * the rates (right after loss_scale: the same upload); no op writes them. */
    float coef[TFC_OPTIM_COEFS];
} tfc_step_state;

/* The grad_scale of an update: `scale` (1 / (iter_size ranks), the average) times the
 * global-norm clipping factor clip / max(norm, clip), norm = sqrt(sumsq) scale (clip 0:
 * off; Keras's global_clipnorm), in double, rounded once to float. The trainer's host path
 * and every backend's step_scale compute it with this (TFC_HD, core/rng.h: the GPU's kernel
 * too; double sqrt and division are IEEE-rounded there), so both paths give the same bits. */
TFC_HD float tfc_step_grad_scale(double sumsq, double scale, double clip)
{
    double norm = sqrt(sumsq) * scale;
    if (clip > 0 && norm > clip) scale *= clip / norm;
    return (float)scale;
}

/* The solver's device options (deterministic, tf32, gpu_memory_limit), handed to the
 * backend's configure op. */
typedef struct tfc_device_options {
    int deterministic;          /* deterministic cuDNN algorithms, no atomics in reductions */
    int tf32;                   /* TensorFloat-32 in GEMMs and convolutions */
    size_t memory_limit;        /* bytes the allocator may hold; 0 = no limit */
} tfc_device_options;

/* ---- the op table ------------------------------------------------------------------------
 * Each op is written once, here, as X(return type, name, (parameters)) with its contract
 * above it. From these lists come the table's struct (tfc_backend_ops, below), its start-up
 * check (tfc_backend_check in backend.c) and each backend's declarations of its math ops
 * (tfc_cpu_<op> in cpu/cpu_internal.h, tfc_gpu_<op> in gpu/gpu.h). A backend fills its
 * table by hand (cpu_backend.c, gpu_backend.cu), so the slot each function fills is in
 * plain sight. */

/* Life cycle, options and memory: each backend defines these in its own backend file. */
#define TFC_BACKEND_DEVICE_OPS(X)                                                                  \
    /* Frees impl and the backend itself. */                                                       \
    X(void, destroy, (tfc_backend *be))                                                            \
    /* Applies the solver's options; an option the backend has no use for is ignored. */           \
    X(void, configure, (tfc_backend *be, const tfc_device_options *o))                             \
    /* The first error an asynchronous op met since the last call (TFC_ERR_DEVICE with the         \
     * failing call and the library's message), copied into err, then cleared; TFC_OK when         \
     * there was none. */                                                                          \
    X(tfc_status, status, (tfc_backend *be, tfc_error *err))                                       \
    /* alloc returns NULL on failure (the caller reports sizes). zero sets bytes. */               \
    X(void *, alloc, (tfc_backend *be, size_t bytes))                                              \
    X(void, free, (tfc_backend *be, void *p))                                                      \
    X(void, upload, (tfc_backend *be, void *dst, const void *host_src, size_t bytes))              \
    X(void, download, (tfc_backend *be, void *host_dst, const void *src, size_t bytes))            \
    X(void, copy, (tfc_backend *be, void *dst, const void *src, size_t bytes))                     \
    X(void, zero, (tfc_backend *be, void *p, size_t bytes))                                        \
    X(void, sync, (tfc_backend *be))

/* The math: each backend's files contribute these as tfc_<backend>_<op>. */
#define TFC_BACKEND_MATH_OPS(X)                                                                    \
    /* C[m,n] = alpha * op(A) op(B) + beta * C, row-major; op(A) is [m,k], op(B) [k,n]. */         \
    X(void, gemm, (tfc_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,    \
                   const float *a, int lda, const float *b, int ldb, float beta, float *c,         \
                   int ldc))                                                                       \
    /* gemm where B is a layer's weights (a Dense kernel, an attention projection), which only     \
     * upload, copy and zero write: in an inference pass a backend may run it through a kernel     \
     * of its own (the same values whether the backend is frozen or not) and, frozen, keep B in    \
     * that kernel's layout until a write over it. */                                              \
    X(void, gemm_weights, (tfc_backend *be, int trans_a, int trans_b, int m, int n, int k,         \
                           float alpha, const float *a, int lda, const float *b, int ldb,          \
                           float beta, float *c, int ldc))                                         \
                                                                                                   \
    /* y += alpha * x */                                                                           \
    X(void, axpy, (tfc_backend *be, int64_t n, float alpha, const float *x, float *y))             \
    /* y = act(a + b), act TFC_ACT_LINEAR or TFC_ACT_RELU (an Add, and the ReLU that alone         \
     * reads it in training: graph.c); y may alias a or b. */                                      \
    X(void, add, (tfc_backend *be, int64_t n, const float *a, const float *b, tfc_act act,         \
                  float *y))                                                                       \
    /* x *= alpha */                                                                               \
    X(void, scale, (tfc_backend *be, int64_t n, float alpha, float *x))                            \
    /* y[r, c] += b[c] */                                                                          \
    X(void, bias_add, (tfc_backend *be, int64_t rows, int cols, const float *b, float *y))         \
    /* db[c] += sum_r dy[r, c] */                                                                  \
    X(void, bias_grad, (tfc_backend *be, int64_t rows, int cols, const float *dy, float *db))      \
    /* dst[r*dst_ld + c] (=, or += when accumulate) src[r*src_ld + c], c < cols:                   \
     * the strided copy behind Concatenate and its gradient. */                                    \
    X(void, copy2d, (tfc_backend *be, int64_t rows, int cols, const float *src, int src_ld,        \
                     float *dst, int dst_ld, int accumulate))                                      \
                                                                                                   \
    /* y = act(x); softmax normalises each row of `cols`. x and y may alias. */                    \
    X(void, act_forward, (tfc_backend *be, tfc_act act, int64_t n, int cols, const float *x,       \
                          float *y))                                                               \
    /* dx += act'(x) * dy (softmax: the Jacobian-vector product from y), or dx = with assign       \
     * (dx's old contents never read). Every activation reads x and y as it needs; neither         \
     * may alias dx. */                                                                            \
    X(void, act_backward, (tfc_backend *be, tfc_act act, int64_t n, int cols, const float *x,      \
                           const float *y, const float *dy, float *dx, int assign))                \
                                                                                                   \
    /* Inverted dropout: y = x * keep / (1 - rate), keep = (uniform >= rate), the uniform of       \
     * element i drawn from Philox at (key, counter = (i, step)), so the mask needs no             \
     * storage and is identical on every backend. Backward regenerates it: dx += ... dy.           \
     * rate <= 0 copies; rate >= 1 gives zeros. */                                                 \
    X(void, dropout_forward, (tfc_backend *be, int64_t n, float rate, uint64_t key,                \
                              uint64_t step, const float *x, float *y))                            \
    X(void, dropout_backward, (tfc_backend *be, int64_t n, float rate, uint64_t key,               \
                               uint64_t step, const float *dy, float *dx))                         \
                                                                                                   \
    /* Convolution. ws: at least conv_workspace(desc) bytes of scratch (NULL when that is          \
     * 0), which also serve a call on fewer images than desc's. conv_forward overwrites y with     \
     * act(bn(conv(x, w) + bias) + residual) (bias, bn, residual NULL: none; bn as                 \
     * bn_forward_infer; residual a tensor of y's shape, not y; act over the f channels, as        \
     * act_forward's), fused where the backend can. With pool (NULL: none; its input is y's        \
     * shape) it writes pool_forward's result of that, without argmax, to pooled instead, and      \
     * y is scratch of the convolution's output size that the backend may leave unwritten.         \
     * The backward ops accumulate into dx and dw; conv_backward_data with assign overwrites       \
     * dx instead (its old contents are never read). */                                            \
    X(size_t, conv_workspace, (tfc_backend *be, const tfc_conv_desc *d))                           \
    X(void, conv_forward, (tfc_backend *be, const tfc_conv_desc *d, const float *x,                \
                           const float *w, const float *bias, const tfc_bn_params *bn,             \
                           const float *residual, tfc_act act, float *y,                           \
                           const tfc_pool_desc *pool, float *pooled, void *ws))                    \
    X(void, conv_backward_data, (tfc_backend *be, const tfc_conv_desc *d, const float *dy,         \
                                 const float *w, float *dx, int assign, void *ws))                 \
    X(void, conv_backward_filter, (tfc_backend *be, const tfc_conv_desc *d, const float *x,        \
                                   const float *dy, float *dw, void *ws))                          \
                                                                                                   \
    /* Pooling. argmax [n, oh, ow, c] int32 holds, for max pooling, the flat input index           \
     * (within the image, h*w*c) of each winner (the first maximum on ties); it is NULL            \
     * for average pooling, and may be NULL for max pooling when no backward follows.              \
     * Backward: dx += what the windows send back, or dx = with assign (dx's old contents never    \
     * read); with relu_x (NULL: none), the pooling's input as a ReLU wrote it, the ReLU's         \
     * derivative too: dx = [relu_x > 0] * (that sum), as act_backward computes it. */             \
    X(void, pool_forward, (tfc_backend *be, const tfc_pool_desc *d, const float *x, float *y,      \
                           int32_t *argmax))                                                       \
    X(void, pool_backward, (tfc_backend *be, const tfc_pool_desc *d, const float *dy,              \
                            const int32_t *argmax, float *dx, int assign,                          \
                            const float *relu_x))                                                  \
                                                                                                   \
    /* Batch normalisation over rows (n*h*w) per channel (cols).                                   \
     * Training: mean, var = batch statistics (biased var); y = gamma (x - mean) invstd + beta     \
     * with invstd = 1/sqrt(var + eps); moving = momentum * moving + (1 - momentum) * batch;       \
     * save_mean/save_invstd [cols] are kept for backward. act (TFC_ACT_LINEAR or                  \
     * TFC_ACT_RELU: the ReLU that alone reads y, in training, graph.c) applies to y. */           \
    X(void, bn_forward_train, (tfc_backend *be, int64_t rows, int cols, const float *x,            \
                               const float *gamma, const float *beta, float eps,                   \
                               float momentum, float *moving_mean, float *moving_var,              \
                               float *y, float *save_mean, float *save_invstd, tfc_act act))       \
    /* Inference: y = gamma (x - moving_mean) / sqrt(moving_var + eps) + beta. */                  \
    X(void, bn_forward_infer, (tfc_backend *be, int64_t rows, int cols, const float *x,            \
                               const float *gamma, const float *beta,                              \
                               const float *moving_mean, const float *moving_var, float eps,       \
                               float *y))                                                          \
    /* Training-mode backward: dx, dgamma, dbeta += ...; with assign dx = ... (its old contents    \
     * never read). */                                                                             \
    X(void, bn_backward, (tfc_backend *be, int64_t rows, int cols, const float *x,                 \
                          const float *dy, const float *gamma, const float *save_mean,             \
                          const float *save_invstd, float *dx, float *dgamma, float *dbeta,        \
                          int assign))                                                             \
                                                                                                   \
    /* Embedding: y[i, :] = table[ids[i], :] for i < n (ids already range-checked);                \
     * backward dtable[ids[i], :] += dy[i, :]. */                                                  \
    X(void, gather, (tfc_backend *be, int64_t n, int dim, const int32_t *ids,                      \
                     const float *table, float *y))                                                \
    X(void, scatter_add, (tfc_backend *be, int64_t n, int dim, const int32_t *ids,                 \
                          const float *dy, float *dtable))                                         \
                                                                                                   \
    /* LSTM sequence. Saved for backward: hseq, cseq [n, t, u] and gates [n, t, 4u] (post-         \
     * activation i, f, g, o). mask [n, t] float or NULL. ws: lstm_workspace bytes. */             \
    X(size_t, lstm_workspace, (tfc_backend *be, const tfc_lstm_desc *d))                           \
    X(void, lstm_forward, (tfc_backend *be, const tfc_lstm_desc *d, const float *x,                \
                           const float *kernel, const float *rkernel, const float *bias,           \
                           const float *mask, float *y, float *hseq, float *cseq,                  \
                           float *gates, void *ws))                                                \
    /* dx, dkernel, drkernel, dbias += ... (bias and dbias are NULL when the layer has no          \
     * bias; dx may be NULL when the input needs no gradient). y may be hseq itself when           \
     * return_sequences is set. The gates of masked steps are unspecified. */                      \
    X(void, lstm_backward, (tfc_backend *be, const tfc_lstm_desc *d, const float *x,               \
                            const float *kernel, const float *rkernel, const float *mask,          \
                            const float *hseq, const float *cseq, const float *gates,              \
                            const float *dy, float *dx, float *dkernel, float *drkernel,           \
                            float *dbias, void *ws))                                               \
                                                                                                   \
    /* Loss over `rows` rows of `classes` outputs. x: logits when from_logits, else                \
     * probabilities (softmax/sigmoid outputs, clipped to [1e-7, 1 - 1e-7] as Keras does).         \
     * row_weight [rows] or NULL (all 1): a row's weight multiplies its loss and gradient          \
     * (0 for masked steps). scale: usually 1 / (number of counted rows).                          \
     * *loss_out (device scalar) = scale * sum_r weight_r * loss_r;                                \
     * dx = scale * weight_r * dloss_r/dx  (OVERWRITES dx; dx may be NULL at inference).           \
     * labels: int32 [rows] for sparse CCE, float [rows, classes] otherwise.                       \
     * loss_r as Keras 3: CCE sums -t log q over the row (q from probabilities is first            \
     * normalised to sum 1, then clipped; sparse CCE clips, then normalises); BCE and the          \
     * element-wise losses average over the row's `classes` outputs: MSE (x - t)^2, the others    \
     * tfc_elementwise_term (Huber's threshold is delta, which the other kinds ignore); the         \
     * categorical hinge is max(max_j (1 - t_j) x_j - t.x + 1, 0) and the cosine similarity        \
     * -sum_j tn_j xn_j (tn, xn: the rows scaled by min(1 / |row|, 1e7)), one term a row. The      \
     * losses past BCE ignore from_logits. A sparse label                                          \
     * outside [0, classes) makes its row count as weight 0 (the input pipeline reports            \
     * such labels with their record). */                                                          \
    X(void, loss, (tfc_backend *be, tfc_loss_kind kind, int from_logits, float delta,              \
                   int64_t rows, int classes, const float *x, const void *labels,                  \
                   const float *row_weight, float scale, float *loss_out, float *dx))              \
    /* *count_out (device scalar) += number of weighted rows whose label is among the top k        \
     * outputs (ties count against), times the row's weight (0/1). Sparse labels are int32;        \
     * dense labels (CCE/BCE) use their argmax; with classes == 1 (binary), a row is right         \
     * when (x >= threshold) == (label >= 0.5), threshold 0.5 for probabilities, 0 for             \
     * logits. */                                                                                  \
    X(void, accuracy, (tfc_backend *be, tfc_loss_kind kind, int from_logits, int64_t rows,         \
                       int classes, int k, const float *x, const void *labels,                     \
                       const float *row_weight, float *count_out))                                 \
                                                                                                   \
    /* Host results: sum of squares (double accumulation) and count of NaN/Inf. */                 \
    X(double, sumsq, (tfc_backend *be, int64_t n, const float *x))                                 \
    X(int64_t, count_nonfinite, (tfc_backend *be, int64_t n, const float *x))                      \
                                                                                                   \
    /* The optimizer step described above (tfc_optim_desc): params, grads and the slots            \
     * have n floats; slots the type does not use may be NULL. grads is only read. */              \
    X(void, optimizer_update, (tfc_backend *be, const tfc_optim_desc *d, int64_t n,                \
                               float *params, const float *grads, float *slot0,                    \
                               float *slot1, float *slot2))                                        \
                                                                                                   \
    /* The recurrent layers: GRU, Bidirectional, LSTM's go_backwards and dropout. */              \
    /* GRU sequence (tfc_gru_desc). Saved for backward: hseq [n, t, u] and gates [n, t, 4u]:       \
     * z, r, hh after their activations, then h_{t-1} R_h + b'_h (reset_after) or r * h_{t-1}      \
     * (reset_before). mask [n, t] float or NULL; bias NULL without one. ws: gru_workspace         \
     * bytes. y may be hseq itself when return_sequences is set. */                                \
    X(size_t, gru_workspace, (tfc_backend *be, const tfc_gru_desc *d))                             \
    X(void, gru_forward, (tfc_backend *be, const tfc_gru_desc *d, const float *x,                  \
                          const float *kernel, const float *rkernel, const float *bias,            \
                          const float *mask, float *y, float *hseq, float *gates, void *ws))       \
    /* dx, dkernel, drkernel, dbias += ... (dbias NULL without bias; dx may be NULL). The gates    \
     * of masked steps are unspecified. */                                                         \
    X(void, gru_backward, (tfc_backend *be, const tfc_gru_desc *d, const float *x,                 \
                           const float *kernel, const float *rkernel, const float *mask,           \
                           const float *hseq, const float *gates, const float *dy, float *dx,      \
                           float *dkernel, float *drkernel, float *dbias, void *ws))               \
    /* A recurrent layer's input, reordered and dropped out (go_backwards, dropout):               \
     *   y[i, s, :] = x[i, s', :] * keep[i, :],  s' = reverse ? t - 1 - s : s,                     \
     *   keep[i, c] = (u >= rate) / (1 - rate),  u = uniform(key, step, i f + c) (core/rng.h),     \
     * one mask per sequence, the same at every step (Keras's RNN `dropout`); rate 0 keeps all.    \
     * x, y [n, t, f], y overwritten (not in place).                                               \
     * Backward: dx[i, s', :] += dy[i, s, :] keep. */                                              \
    X(void, rnn_input_forward, (tfc_backend *be, int n, int t, int f, int reverse, float rate,     \
                                uint64_t key, uint64_t step, const float *x, float *y))            \
    X(void, rnn_input_backward, (tfc_backend *be, int n, int t, int f, int reverse, float rate,    \
                                 uint64_t key, uint64_t step, const float *dy, float *dx))         \
    /* Bidirectional's merge of a forward output a and a backward one b, [n, t, u] each (t 1:      \
     * the last outputs): with t > 1 b is in its own (reversed) step order, and both are zero at   \
     * masked steps (mask [n, t] or NULL):                                                         \
     *   y[i, s] = merge(m a[i, s], m b[i, t - 1 - s]),  m = mask[i, s]                            \
     * concat [a | b] (2u wide), sum a + b, mul a b, ave (a + b) / 2; y overwritten. Backward      \
     * writes (overwrites) da and db (in b's order) from dy. */                                    \
    X(void, bidir_forward, (tfc_backend *be, int n, int t, int u, tfc_merge_mode mode,             \
                            const float *mask, const float *a, const float *b, float *y))          \
    X(void, bidir_backward, (tfc_backend *be, int n, int t, int u, tfc_merge_mode mode,            \
                             const float *mask, const float *a, const float *b, const float *dy,   \
                             float *da, float *db))                                                \
                                                                                                   \
    /* ---- the convolution family: Conv1D, the 1-D poolings, DepthwiseConv2D, UpSampling2D */     \
    /* Grouped convolution (Conv1D's groups): the convolution of conv_forward (same desc,          \
     * layouts and padding) with the d->c channels and d->f filters split into `groups` equal      \
     * runs, filter j reading only the channels of run j / (d->f / groups); w is                   \
     * [kh, kw, c / groups, f]. Forward overwrites y (no bias, no activation); the backward        \
     * ops accumulate into dx and dw, grouped_conv_backward_data with assign overwrites dx         \
     * (its old contents never read). */                                                           \
    X(void, grouped_conv_forward, (tfc_backend *be, const tfc_conv_desc *d, int groups,            \
                                   const float *x, const float *w, float *y))                      \
    X(void, grouped_conv_backward_data, (tfc_backend *be, const tfc_conv_desc *d, int groups,      \
                                         const float *dy, const float *w, float *dx,               \
                                         int assign))                                              \
    X(void, grouped_conv_backward_filter, (tfc_backend *be, const tfc_conv_desc *d, int groups,    \
                                           const float *x, const float *dy, float *dw))            \
                                                                                                   \
    /* Conv1D's ungrouped convolution at stride and dilation 1: conv_forward's desc with           \
     * h = kh = 1, sw = dw = 1 and pad_left <= kw - 1, w [kw, c, f]. conv1d_forward overwrites     \
     * y with conv + bias (bias NULL: none), then with relu max(y, 0) (NaN stays NaN, as           \
     * act_forward); the backward ops follow conv_backward_data's (assign) and                     \
     * conv_backward_filter's contracts. Each output element's sum has one order, whatever the     \
     * thread count. ws: at least conv1d_workspace(d) bytes, also for fewer sequences. */          \
    X(size_t, conv1d_workspace, (tfc_backend *be, const tfc_conv_desc *d))                         \
    X(void, conv1d_forward, (tfc_backend *be, const tfc_conv_desc *d, const float *x,              \
                             const float *w, const float *bias, int relu, float *y, void *ws))     \
    X(void, conv1d_backward_data, (tfc_backend *be, const tfc_conv_desc *d, const float *dy,       \
                                   const float *w, float *dx, int assign, void *ws))               \
    X(void, conv1d_backward_filter, (tfc_backend *be, const tfc_conv_desc *d, const float *x,      \
                                     const float *dy, float *dw, void *ws))                        \
                                                                                                   \
    /* The mean over the unmasked steps (GlobalAveragePooling1D under a mask): x [n, t, c],        \
     * mask [n, t] (0 or 1), y [n, c] overwritten:                                                 \
     *   y[i, ch] = sum_s mask[i, s] x[i, s, ch] / sum_s mask[i, s]                                \
     * (a sequence without an unmasked step gives 0/0 = NaN, as Keras). Backward:                  \
     *   dx[i, s, ch] += mask[i, s] dy[i, ch] / sum_s mask[i, s]                                   \
     * (0 where the mask is 0), or = with assign (dx's old contents never read). */                \
    X(void, masked_mean_forward, (tfc_backend *be, int n, int t, int c, const float *x,            \
                                  const float *mask, float *y))                                    \
    X(void, masked_mean_backward, (tfc_backend *be, int n, int t, int c, const float *dy,          \
                                   const float *mask, float *dx, int assign))                      \
                                                                                                   \
    /* Depthwise convolution (DepthwiseConv2D): a tfc_conv_desc whose f = c m output channels      \
     * (m the depth multiplier); output channel k reads input channel k / m alone, through         \
     * column k of w [kh, kw, c, m] = [kh, kw, f] (Keras's layout):                                \
     *   y[n, i, j, k] = sum_{u, v} x[n, i sh + u dh - pt, j sw + v dw - pl, k / m] w[u, v, k]     \
     * depthwise_forward overwrites y with act(bn(that + bias) + residual), conv_forward's        \
     * epilogue without the pooling (bias, bn, residual NULL: none; bn as bn_forward_infer;        \
     * residual a tensor of y's shape, not y; act over the f channels, as act_forward's), each     \
     * step rounded as its own op rounds it, fused where the backend can. The backward ops add     \
     * to dx and dw; the filter gradient's sums follow the shapes alone, never the thread count.   \
     * ws: at least depthwise_workspace(d) bytes (NULL when 0), also for fewer images; forward     \
     * reads it only with bn (NULL otherwise). */                                                  \
    X(size_t, depthwise_workspace, (tfc_backend *be, const tfc_conv_desc *d))                      \
    X(void, depthwise_forward, (tfc_backend *be, const tfc_conv_desc *d, const float *x,           \
                                const float *w, const float *bias, const tfc_bn_params *bn,        \
                                const float *residual, tfc_act act, float *y, void *ws))           \
    X(void, depthwise_backward_data, (tfc_backend *be, const tfc_conv_desc *d, const float *dy,    \
                                      const float *w, float *dx))                                  \
    X(void, depthwise_backward_filter, (tfc_backend *be, const tfc_conv_desc *d, const float *x,   \
                                        const float *dy, float *dw, void *ws))                     \
                                                                                                   \
    /* Upsampling by integer factors (UpSampling2D), x [n, h, w, c] to y [n, h sh, w sw, c]:       \
     * nearest: y[i, j] = x[i / sh, j / sw]; bilinear: half-pixel centres, the source row of       \
     * output row i at s = (i + 1/2) / sh - 1/2 clamped to [0, h - 1], y interpolating rows        \
     * floor(s) and floor(s) + 1 (columns likewise), as tf.image.resize and jax.image.resize.      \
     * upsample_forward overwrites y; upsample_backward adds to dx what each x cell sent. */       \
    X(void, upsample_forward, (tfc_backend *be, const tfc_resize_desc *d, const float *x,          \
                               float *y))                                                          \
    X(void, upsample_backward, (tfc_backend *be, const tfc_resize_desc *d, const float *dy,        \
                                float *dx))                                                        \
                                                                                                   \
    /* The augmentation layers' transforms (tfc_warp_desc, tfc_contrast_desc). The forward ops     \
     * overwrite y (not in place); the backward ops add to dx the transpose of the forward's       \
     * linear map in x (contrast: zero where the clip holds; x is the forward's input), the        \
     * same draws regenerated from (key, step). */                                                 \
    X(void, warp_forward, (tfc_backend *be, const tfc_warp_desc *d, const float *x, float *y))     \
    X(void, warp_backward, (tfc_backend *be, const tfc_warp_desc *d, const float *dy, float *dx))  \
    X(void, contrast_forward, (tfc_backend *be, const tfc_contrast_desc *d, const float *x,        \
                               float *y))                                                          \
    X(void, contrast_backward, (tfc_backend *be, const tfc_contrast_desc *d, const float *x,       \
                                const float *dy, float *dx))                                       \
                                                                                                   \
    /* The transformer family: Multiply, LayerNormalization, attention, Masking. */                \
    /* Element-wise products (Multiply) over `groups` blocks of [rows, cols]: a and y are          \
     * [groups, rows, cols]; b is the same, or with b_bcast [groups, 1, cols], broadcast over      \
     * the rows. mul: y = a * b, or y += a * b with accumulate (y may alias a without it).         \
     * mul_reduce: db[g, c] += sum_r a[g, r, c] b[g, r, c] (a and b full), the gradient of a       \
     * broadcast factor, summed in row order. */                                                   \
    X(void, mul, (tfc_backend *be, int64_t groups, int64_t rows, int cols, const float *a,         \
                  const float *b, int b_bcast, float *y, int accumulate))                          \
    X(void, mul_reduce, (tfc_backend *be, int64_t groups, int64_t rows, int cols, const float *a,  \
                         const float *b, float *db))                                               \
                                                                                                   \
    /* Normalisation of each row (LayerNormalization, RMSNormalization; tfc_layernorm_desc):      \
     * y = u gamma + beta. stats [rows, 2] (NULL: not kept) receives each row's mu and invstd     \
     * for backward. gamma, beta [cols] may be NULL (1 and 0). */                                 \
    X(void, layernorm_forward, (tfc_backend *be, const tfc_layernorm_desc *d, const float *x,      \
                                const float *gamma, const float *beta, float *y, float *stats))    \
    /* Its gradient from the stats forward kept, with g = dy gamma and v = (x - mu) invstd:        \
     *   dx += invstd (g - mean(g) [center] - v mean(g u))    (= with assign: dx's old contents    \
     *                                                         never read)                         \
     *   dgamma += sum over rows of dy u,  dbeta += sum over rows of dy                           \
     * dx, dgamma, dbeta may each be NULL (not needed). The sums over rows depend on the         \
     * backend's thread count at most, never on the team that runs them. ws:                      \
     * layernorm_workspace(d) bytes of scratch (NULL when 0). */                                  \
    X(size_t, layernorm_workspace, (tfc_backend *be, const tfc_layernorm_desc *d))                 \
    X(void, layernorm_backward, (tfc_backend *be, const tfc_layernorm_desc *d, const float *x,     \
                                 const float *dy, const float *gamma, const float *stats,          \
                                 float *dx, float *dgamma, float *dbeta, int assign, void *ws))    \
                                                                                                   \
    /* Attention (tfc_attn_desc): o and lse [n, heads, tq] (the log-sum-exp of each row,         \
     * saved for backward; +-inf for a row that sees no key) are overwritten. The scores are      \
     * never held whole: one block of keys at a time per row, with an online softmax.             \
     * Backward recomputes them from lse: dq, dk, dv (q's, k's and v's shapes) are                \
     * OVERWRITTEN with the gradients of sum(o * dout); the results do not depend on the           \
     * thread count. */                                                                           \
    X(void, attention_forward, (tfc_backend *be, const tfc_attn_desc *d, const float *q,          \
                                const float *k, const float *v, float *o, float *lse))            \
    X(void, attention_backward, (tfc_backend *be, const tfc_attn_desc *d, const float *q,         \
                                 const float *k, const float *v, const float *o,                  \
                                 const float *lse, const float *dout, float *dq, float *dk,       \
                                 float *dv))                                                       \
                                                                                                   \
    /* Masking: x, y [rows, cols], row r a real step when some x[r, c] != value (compared in       \
     * float; NaN differs from every value), else padding:                                         \
     *   y[r, :] = real ? x[r, :] : 0              (y overwritten, not in place)                   \
     *   backward: dx[r, :] += real ? dy[r, :] : 0  (x is the forward's input) */                  \
    X(void, masking_forward, (tfc_backend *be, int64_t rows, int cols, float value,                \
                              const float *x, float *y))                                           \
    X(void, masking_backward, (tfc_backend *be, int64_t rows, int cols, float value,               \
                               const float *x, const float *dy, float *dx))

/* The kernels of layers that land on one backend (the CPU) before the other: a backend may
 * leave these slots NULL. tfc_backend_check passes them; a layer that needs one lists it in
 * tfc_layer_ops.needs, and binding a model with that layer on a backend without it fails
 * naming the layer (graph.c), so `--device gpu` refuses such a model at start-up instead
 * of crashing in it. An op moves to TFC_BACKEND_MATH_OPS once every backend has it (and
 * `make test-gpu` has passed on a real GPU): Keras's parametrised activation layers, weight
 * regularizers and constraints, noise layers, GroupNormalization, SimpleRNN, Permute and
 * UnitNormalization, on the CPU since 2026-11-30, and recurrent dropout since 2026-12-02
 * (docs/gpu.md). */
#define TFC_BACKEND_LAYER_OPS(X)                                                                   \
    /* The parametrised activations (tfc_pact_desc) of n floats: pact_forward overwrites y (y     \
     * may alias x); pact_backward: dx += f'(x) dy, where f' is 1 or 0 above the threshold        \
     * (0 at max_value and beyond), negative_slope below it (leaky_relu: at x >= 0, 1), and      \
     * elu's alpha exp(x) at x <= 0. */                                                           \
    X(void, pact_forward, (tfc_backend *be, const tfc_pact_desc *d, int64_t n, const float *x,     \
                           float *y))                                                              \
    X(void, pact_backward, (tfc_backend *be, const tfc_pact_desc *d, int64_t n, const float *x,    \
                            const float *dy, float *dx))                                           \
    /* PReLU over x, y [rows, cols] with alpha [cols] broadcast over the rows: y = x > 0 ? x :     \
     * alpha x (y may alias x). Backward: dx += (x > 0 ? 1 : alpha) dy (dx NULL: not needed)      \
     * and dalpha[c] += sum_r min(x, 0) dy, summed in double in an order fixed by the shape. */   \
    X(void, prelu_forward, (tfc_backend *be, int64_t rows, int cols, const float *x,               \
                            const float *alpha, float *y))                                         \
    X(void, prelu_backward, (tfc_backend *be, int64_t rows, int cols, const float *x,              \
                             const float *alpha, const float *dy, float *dx, float *dalpha))       \
    /* A weight regularizer (core/init.h) on n weights w: *loss (a device scalar; NULL: not        \
     * wanted) += l1 sum |w| + l2 sum w^2, summed in double in an order fixed by n and rounded     \
     * once; grad (NULL: not wanted) += l1 sign(w) + 2 l2 w (sign(0) = 0). */                     \
    X(void, penalty, (tfc_backend *be, int64_t n, float l1, float l2, const float *w,              \
                      float *loss, float *grad))                                                   \
    /* A weight constraint (tfc_constraint_desc) on w [outer, red, inner], in place: each norm     \
     * summed in double over red in order (fixed by the shape, not the threads). */               \
    X(void, constrain, (tfc_backend *be, const tfc_constraint_desc *d, float *w))                  \
    /* The noise layers (tfc_noise_desc): noise_forward y = m x + b (y may alias x);               \
     * noise_backward dx += m dy, or dx = m dy with assign. */                                     \
    X(void, noise_forward, (tfc_backend *be, const tfc_noise_desc *d, const float *x, float *y))   \
    X(void, noise_backward, (tfc_backend *be, const tfc_noise_desc *d, const float *dy,            \
                             float *dx, int assign))                                               \
    /* Group normalisation (GroupNormalization; tfc_groupnorm_desc): y = u gamma + beta, y         \
     * overwritten. stats [n, groups, 2] (NULL: not kept) receives each group's mu and invstd      \
     * for backward. gamma, beta [groups cg] may be NULL (1 and 0). Backward, from those stats,    \
     * with g = dy gamma and the means over the group's m values:                                  \
     *   dx += invstd (g - mean(g) - u mean(g u))   (= with assign: dx's old contents not read)    \
     *   dgamma[c] += sum of dy u over channel c's values, dbeta[c] += sum of dy                   \
     * dx, dgamma, dbeta may each be NULL. The sums over examples depend on the backend's          \
     * thread count at most. ws: groupnorm_workspace(d) bytes of scratch (NULL when 0). */         \
    X(void, groupnorm_forward, (tfc_backend *be, const tfc_groupnorm_desc *d, const float *x,      \
                                const float *gamma, const float *beta, float *y, float *stats))    \
    X(size_t, groupnorm_workspace, (tfc_backend *be, const tfc_groupnorm_desc *d))                 \
    X(void, groupnorm_backward, (tfc_backend *be, const tfc_groupnorm_desc *d, const float *x,     \
                                 const float *dy, const float *gamma, const float *stats,          \
                                 float *dx, float *dgamma, float *dbeta, int assign, void *ws))    \
    /* SimpleRNN sequence (tfc_simple_rnn_desc). Saved for backward: hseq [n, t, u] and the        \
     * pre-activations a [n, t, u] (those of masked steps unspecified). mask [n, t] float or       \
     * NULL; bias NULL without one. ws: simple_rnn_workspace bytes. y may be hseq itself when      \
     * return_sequences is set. Backward: dx, dkernel, drkernel, dbias += ... (dbias NULL          \
     * without bias; dx may be NULL). */                                                           \
    X(size_t, simple_rnn_workspace, (tfc_backend *be, const tfc_simple_rnn_desc *d))               \
    X(void, simple_rnn_forward, (tfc_backend *be, const tfc_simple_rnn_desc *d, const float *x,    \
                                 const float *kernel, const float *rkernel, const float *bias,     \
                                 const float *mask, float *y, float *hseq, float *pre, void *ws))  \
    X(void, simple_rnn_backward, (tfc_backend *be, const tfc_simple_rnn_desc *d, const float *x,   \
                                  const float *kernel, const float *rkernel, const float *mask,    \
                                  const float *hseq, const float *pre, const float *dy, float *dx, \
                                  float *dkernel, float *drkernel, float *dbias, void *ws))        \
    /* Recurrent dropout (tfc_rnn_dropout_desc): the cell's recurrence stepped, in a               \
     * training pass with recurrent_dropout (or any pass under tfc_rnn_dropout_any_acts).          \
     * Saved for backward: hseq [n, t, u] and state [n, t, S]: the LSTM's c then its gates         \
     * i, f, g, o after their activations (S 5u), the GRU's z, r, hh and (reset_after) its         \
     * (h ⊙ rk_h) R_h + b'_h (S 4u), the SimpleRNN's pre-activation a (S u); under                 \
     * tfc_rnn_dropout_any_acts the gates' sums before their activations follow (the LSTM's        \
     * four, S 9u; the GRU's z, r and hh, S 7u). Those of masked steps unspecified. bias as        \
     * the cell's own op; ws: rnn_dropout_workspace bytes. y may be hseq itself when               \
     * return_sequences is set. Backward draws the same masks: dx, dkernel, drkernel, dbias        \
     * += ... (dbias NULL without bias; dx may be NULL). */                                        \
    X(size_t, rnn_dropout_workspace, (tfc_backend *be, const tfc_rnn_dropout_desc *d))          \
    X(void, rnn_dropout_forward, (tfc_backend *be, const tfc_rnn_dropout_desc *d,               \
                                  const float *x, const float *kernel, const float *rkernel,    \
                                  const float *bias, const float *mask, float *y, float *hseq,  \
                                  float *state, void *ws))                                      \
    X(void, rnn_dropout_backward, (tfc_backend *be, const tfc_rnn_dropout_desc *d,              \
                                   const float *x, const float *kernel, const float *rkernel,   \
                                   const float *mask, const float *hseq, const float *state,    \
                                   const float *dy, float *dx, float *dkernel, float *drkernel, \
                                   float *dbias, void *ws))                                     \
    /* Attention and AdditiveAttention (tfc_score_attn_desc): score_attention_forward          \
     * overwrites o and p [n, tq, tv] (the softmax, before dropout, kept for backward). scale    \
     * (dot, concat: [1]; additive: [dim]) and cw ([1], concat only) may be NULL (none).         \
     * Backward from p: dq, dk, dv, dscale, dcw += the gradients of sum(o * dout) (each may be   \
     * NULL: not needed; dk may alias dv); ds [n, tq, tv] is scratch. */                         \
    X(void, score_attention_forward, (tfc_backend *be, const tfc_score_attn_desc *d,              \
                                      const float *q, const float *k, const float *v,             \
                                      const float *scale, const float *cw, float *o, float *p))   \
    X(void, score_attention_backward, (tfc_backend *be, const tfc_score_attn_desc *d,             \
                                       const float *q, const float *k, const float *v,            \
                                       const float *scale, const float *cw, const float *p,       \
                                       const float *dout, float *ds, float *dq, float *dk,        \
                                       float *dv, float *dscale, float *dcw))                      \
    /* Permute (tfc_permute_desc): y = x with each example's axes permuted, y overwritten, or      \
     * with add y += that (the backward: dx += dy permuted back, through the inverse desc). */     \
    X(void, permute, (tfc_backend *be, const tfc_permute_desc *d, const float *x, float *y,        \
                      int add))                                                                    \
    /* UnitNormalization (tfc_l2norm_desc): y = x r with r = min(rsqrt(s), inv_max) and            \
     * s = sum x^2 over red, summed in double in an order fixed by the shape, r rounded to         \
     * float; y overwritten.                                                                       \
     * Backward from x (r recomputed, the same bits): where rsqrt(s) < inv_max,                    \
     *   dx += r (dy - x r^2 sum(dy x)),  else (the clamp holds: s tiny or 0) dx += inv_max dy     \
     * (= with assign: dx's old contents never read). */                                           \
    X(void, l2norm_forward, (tfc_backend *be, const tfc_l2norm_desc *d, const float *x,            \
                             float *y))                                                            \
    X(void, l2norm_backward, (tfc_backend *be, const tfc_l2norm_desc *d, const float *x,           \
                              const float *dy, float *dx, int assign))                             \
    /* Maximum and Minimum (tfc_extremum_desc): x is a host array of k device pointers.            \
     * extremum_forward overwrites y. extremum_backward: dx[i] += w_i dy (dx[i] NULL: not          \
     * needed), w_i the weight input i has in y: each step of the fold gives its result's          \
     * weight to the input that is strictly beyond the other, and half to each at a tie            \
     * (JAX's rule for jnp.maximum, the backend Keras's fixtures come from). */                    \
    X(void, extremum_forward, (tfc_backend *be, const tfc_extremum_desc *d,                        \
                               const float *const *x, const float *mask, float *y))                \
    X(void, extremum_backward, (tfc_backend *be, const tfc_extremum_desc *d,                       \
                                const float *const *x, const float *mask, const float *dy,         \
                                float *const *dx))                                                 \
    /* Conv3D (tfc_conv3d_desc): conv3d_forward overwrites y with                                  \
     *   y[b, o, j] = sum_{u, i in group(j)} x[b, o s + u dil - pad, i] w[u, i - i0(j), j]         \
     *                + bias[j]                                                                    \
     * (bias NULL: none; positions outside the volume read 0). conv3d_backward: dw += x (*) dy     \
     * and dx += dy (*)^T w (= with assign: dx's old contents never read); dx, dw may each be      \
     * NULL (not needed). ws: conv3d_workspace(d) bytes, also for fewer examples (NULL when 0). */ \
    X(size_t, conv3d_workspace, (tfc_backend *be, const tfc_conv3d_desc *d))                       \
    X(void, conv3d_forward, (tfc_backend *be, const tfc_conv3d_desc *d, const float *x,            \
                             const float *w, const float *bias, float *y, void *ws))               \
    X(void, conv3d_backward, (tfc_backend *be, const tfc_conv3d_desc *d, const float *x,           \
                              const float *w, const float *dy, float *dx, float *dw, int assign,   \
                              void *ws))                                                           \
    /* 3-D pooling (tfc_pool3d_desc): pool3d_forward overwrites y; for max pooling argmax          \
     * [n, out, c] (NULL: no backward follows) receives each winner's flat index within its        \
     * example's volume (in[0] in[1] in[2] c; the first maximum on ties). pool3d_backward: dx +=   \
     * what the windows send back (= with assign), each input value's sum in a fixed order. */     \
    X(void, pool3d_forward, (tfc_backend *be, const tfc_pool3d_desc *d, const float *x, float *y,  \
                             int32_t *argmax))                                                     \
    X(void, pool3d_backward, (tfc_backend *be, const tfc_pool3d_desc *d, const float *dy,          \
                              const int32_t *argmax, float *dx, int assign))                       \
    /* Resizing, CenterCrop and RandomCrop (tfc_crop_resize_desc): crop_resize_forward             \
     * overwrites y; crop_resize_backward adds to dx the transpose of that linear map (no          \
     * gradient to the cells cropped away; fill_value is a constant). */                           \
    X(void, crop_resize_forward, (tfc_backend *be, const tfc_crop_resize_desc *d,                  \
                                  const float *x, float *y))                                       \
    X(void, crop_resize_backward, (tfc_backend *be, const tfc_crop_resize_desc *d,                 \
                                   const float *dy, float *dx))                                    \
    /* RandomBrightness in training (tfc_contrast_desc): brightness_forward overwrites y;         \
     * brightness_backward adds dy to dx where vlo <= x + b <= vhi (x the forward's input). */     \
    X(void, brightness_forward, (tfc_backend *be, const tfc_contrast_desc *d, const float *x,      \
                                 float *y))                                                        \
    X(void, brightness_backward, (tfc_backend *be, const tfc_contrast_desc *d, const float *x,     \
                                  const float *dy, float *dx))                                     \
    /* The colour augmentations in training (tfc_color_desc): color_forward overwrites y;          \
     * color_backward adds to dx the gradient of the forward at x (its input) times dy             \
     * (POSTERIZE: nothing, the byte cast has none).                                               \
     */                                                                                            \
    X(void, color_forward, (tfc_backend *be, const tfc_color_desc *d, const float *x, float *y))   \
    X(void, color_backward, (tfc_backend *be, const tfc_color_desc *d, const float *x,             \
                             const float *dy, float *dx))                                          \
    /* RandomErasing in training (tfc_erase_desc): erasing_forward overwrites y; erasing_backward  \
     * adds dy to dx outside the erased rectangles (the fill does not depend on x). */             \
    X(void, erasing_forward, (tfc_backend *be, const tfc_erase_desc *d, const float *x, float *y)) \
    X(void, erasing_backward, (tfc_backend *be, const tfc_erase_desc *d, const float *dy,          \
                               float *dx))                                                         \
    /* RandomGaussianBlur in training (tfc_blur_desc): blur_forward overwrites y;                  \
     * blur_backward adds to dx the transpose of the blur where the clip passes (x the            \
     * forward's input). */                                                                        \
    X(void, blur_forward, (tfc_backend *be, const tfc_blur_desc *d, const float *x, float *y))     \
    X(void, blur_backward, (tfc_backend *be, const tfc_blur_desc *d, const float *x,               \
                            const float *dy, float *dx))                                           \
    /* AutoContrast, Equalization (tfc_tone_desc): tone_forward overwrites y; tone_backward        \
     * adds to dx the gradient at x (the forward's input) times dy: AUTOCONTRAST's through the     \
     * channel's minimum and maximum (ties share them, as JAX's), EQUALIZE's none but where the    \
     * channel is kept (the lookup's integer indices carry none). */                               \
    X(void, tone_forward, (tfc_backend *be, const tfc_tone_desc *d, const float *x, float *y))     \
    X(void, tone_backward, (tfc_backend *be, const tfc_tone_desc *d, const float *x,               \
                            const float *dy, float *dx))                                           \
    /* RandomSharpness in training (tfc_sharpen_desc): sharpen_forward overwrites y;               \
     * sharpen_backward adds to dx the blend's transpose where the clip passes (x the forward's    \
     * input). */                                                                                  \
    X(void, sharpen_forward, (tfc_backend *be, const tfc_sharpen_desc *d, const float *x,          \
                              float *y))                                                           \
    X(void, sharpen_backward, (tfc_backend *be, const tfc_sharpen_desc *d, const float *x,         \
                               const float *dy, float *dx))                                        \
    /* Adaptive pooling (tfc_adaptive_pool_desc): adaptive_pool_forward overwrites y; for max      \
     * pooling argmax [n, out, c] (NULL: no backward follows) receives each winner's flat index    \
     * within its example's volume (in[0] in[1] in[2] c), on ties the cell of the lowest w,        \
     * then h, then d (JAX's gradient of Keras's axis-by-axis max: d, then h, then w, the          \
     * first maximum of each). adaptive_pool_backward: dx += what the bins send back (= with       \
     * assign), each input value's sum in output order. */                                         \
    X(void, adaptive_pool_forward, (tfc_backend *be, const tfc_adaptive_pool_desc *d,              \
                                    const float *x, float *y, int32_t *argmax))                    \
    X(void, adaptive_pool_backward, (tfc_backend *be, const tfc_adaptive_pool_desc *d,             \
                                     const float *dy, const int32_t *argmax, float *dx,            \
                                     int assign))                                                  \
    /* STFTSpectrogram and MelSpectrogram (tfc_stft_desc): stft_forward overwrites re and im      \
     * [n, c, frames, bins] (kept for backward; re NULL with wr NULL, im with wi: the mode        \
     * IMAG has no real kernel, REAL no imaginary one) and y; mel [bins, mels] (MEL only).        \
     * stft_backward from them and y: dx += the gradient of sum(y dy) (NULL: not needed),         \
     * dwr, dwi += theirs (NULL: not needed); ws: stft_workspace(d) bytes. */                     \
    X(size_t, stft_workspace, (tfc_backend *be, const tfc_stft_desc *d))                           \
    X(void, stft_forward, (tfc_backend *be, const tfc_stft_desc *d, const float *x,                \
                           const float *wr, const float *wi, const float *mel, float *re,          \
                           float *im, float *y))                                                   \
    X(void, stft_backward, (tfc_backend *be, const tfc_stft_desc *d, const float *x,               \
                            const float *wr, const float *wi, const float *mel, const float *re,   \
                            const float *im, const float *y, const float *dy, float *dx,           \
                            float *dwr, float *dwi, void *ws))                                     \
    /* RandomElasticTransform in training (tfc_elastic_desc): elastic_forward overwrites y;        \
     * elastic_backward adds to dx the warp's transpose where the clip passes (x the forward's     \
     * input). */                                                                                  \
    X(void, elastic_forward, (tfc_backend *be, const tfc_elastic_desc *d, const float *x,          \
                              float *y))                                                           \
    X(void, elastic_backward, (tfc_backend *be, const tfc_elastic_desc *d, const float *x,         \
                               const float *dy, float *dx))                                        \
    /* The preprocessing layers' encoding (tfc_encode_desc): overwrites y. No backward: the      \
     * layers pass no gradient to their input. */                                                  \
    X(void, encode_forward, (tfc_backend *be, const tfc_encode_desc *d, const void *x,             \
                             const float *table, const float *scale, float *y))                    \
    /* HashedCrossing: the k int32 inputs x[0 .. k), each d->rows x d->width values, crossed       \
     * value by value into d->n bins (core/encode.h, tfc_encode_cross), then d->mode INT or        \
     * ONE_HOT as encode_forward's; overwrites y. */                                               \
    X(void, hash_cross_forward, (tfc_backend *be, const tfc_encode_desc *d, int k,                 \
                                 const int32_t *const *x, float *y))

/* The trainer's step without a host round trip (solver/train.c, docs/solver.md): the
 * gradient norm, the clipping factor and the "skip this update" flag kept on the device
 * (tfc_step_state) and read by the optimizer there. Like TFC_BACKEND_LAYER_OPS these are
 * ops a backend may lack (tfc_backend_check passes them); the trainer then takes its host
 * path, which reads the norm back before the update. Both paths give the same bits. */
#define TFC_BACKEND_STEP_OPS(X)                                                                    \
    /* st->sumsq (device) = the value sumsq(n, x) returns, the same bits. */                       \
    X(void, grad_sumsq, (tfc_backend *be, int64_t n, const float *x, tfc_step_state *st))          \
    /* From st->sumsq and *loss (a device scalar, the loss op's loss_out): st->skip = 1 when       \
     * either is not finite, else 0; st->grad_scale = tfc_step_grad_scale(st->sumsq,               \
     * scale / st->loss_scale, clip), the division in double. */                                   \
    X(void, step_scale, (tfc_backend *be, const float *loss, double scale, double clip,            \
                         tfc_step_state *st))                                                      \
    /* optimizer_update(d with grad_scale = st->grad_scale, ...) (d->grad_scale is not read),      \
     * or nothing at all while st->skip is set: every operand is left as it was. */                \
    X(void, optimizer_update_at, (tfc_backend *be, const tfc_optim_desc *d,                        \
                                  const tfc_step_state *st, int64_t n, float *params,              \
                                  const float *grads, float *slot0, float *slot1, float *slot2))

/* Reduced precision (the trainer's `precision` key, docs/solver.md). Optional like the lists
 * above: a backend without one trains in float32 only, and a model asking for that format
 * is refused when it binds there (bf16 needs round_bf16, float16 round_f16 and
 * loss_scale_at: tfc_precision_available). round_bf16: y = tfc_bf16_round(x), round_f16:
 * y = tfc_f16_round(x) (core/half.h), for n floats, y == x allowed. loss_scale_at: x *=
 * st->loss_scale for n floats, float16's loss scale on the loss's gradient read on the
 * device (the trainer's device path; its host path passes S to `scale` by value). */
#define TFC_BACKEND_PRECISION_OPS(X)                                                               \
    X(void, round_bf16, (tfc_backend *be, int64_t n, const float *x, float *y))                    \
    X(void, round_f16, (tfc_backend *be, int64_t n, const float *x, float *y))                     \
    X(void, loss_scale_at, (tfc_backend *be, int64_t n, const tfc_step_state *st, float *x))

/* CUDA graphs for the trainer's step (solver/train.c with tfc_solver_options.cuda_graphs;
 * gpu.h says what a caller keeps fixed between a capture and its replays). Optional like
 * the lists above: a backend without them (the CPU) launches every step. capture_begin and
 * capture_end record the work queued between them instead of running it (capture_end:
 * NULL with err when the capture failed, the work then not done); graph_launch replays a
 * graph, its random draws at their captured step numbers plus step_offset; graph_free
 * releases one. */
#define TFC_BACKEND_GRAPH_OPS(X)                                                                   \
    X(tfc_status, capture_begin, (tfc_backend *be, tfc_error *err))                                \
    X(void *, capture_end, (tfc_backend *be, tfc_error *err))                                      \
    X(void, graph_launch, (tfc_backend *be, const void *graph, uint64_t step_offset))              \
    X(void, graph_free, (tfc_backend *be, void *graph))

#define TFC_BACKEND_OPS(X)                                                                         \
    TFC_BACKEND_DEVICE_OPS(X) TFC_BACKEND_MATH_OPS(X) TFC_BACKEND_LAYER_OPS(X)                     \
    TFC_BACKEND_STEP_OPS(X) TFC_BACKEND_PRECISION_OPS(X) TFC_BACKEND_GRAPH_OPS(X)

/* The table: the backend's name, then one function pointer per op. */
#define TFC_BACKEND_SLOT(ret, op, params) ret (*op) params;
typedef struct tfc_backend_ops {
    const char *name;
    TFC_BACKEND_OPS(TFC_BACKEND_SLOT)
} tfc_backend_ops;
#undef TFC_BACKEND_SLOT

struct tfc_backend {
    const tfc_backend_ops *ops;
    int device;      /* -1 CPU, >= 0 GPU index */
    int threads;     /* CPU: worker threads (OpenMP and OpenBLAS share one pool) */
    void *impl;      /* backend-private state (handles, streams, caches) */
    /* 1 while the model bound on it is inference-only (tfc_model_bind_inference): its
     * parameters then change only through upload, copy and zero, so a backend may keep
     * what it derives from them (the CPU: weights in oneDNN's layout) until one of those
     * writes over them. */
    int frozen;
    /* 1 while a forward pass for inference runs (tfc_model_forward with training == 0, on a
     * frozen backend or not): a backend may then take kernels that serve no backward pass,
     * provided an inference pass gives the same values frozen or not (the CPU: oneDNN's
     * inference Winograd kernel). A training pass may differ from it in the last bits. */
    int inference_pass;
    /* Whether lstm_forward/backward take token ids (tfc_lstm_desc.vocab) for a shape, d->n
     * the largest batch, on this backend (frozen or not: asked at binding, after `frozen`
     * is set); NULL: never. Where they do, the graph hands an LSTM the ids and table of the
     * Embedding that alone feeds it (graph.c), and the forward pass must give the bits it
     * gives on the Embedding's output. */
    int (*lstm_ids)(const tfc_backend *be, const tfc_lstm_desc *d);
    /* The activations act_forward, act_backward and the fused epilogues (conv_forward,
     * bn_forward_train, add) implement: bit a set for tfc_act a. Binding a model with a layer
     * whose activation is missing fails naming both (graph.c), as for a missing layer op. */
    uint32_t acts;
    /* The losses the loss op implements: bit k set for tfc_loss_kind k. Binding a model for
     * training with a loss outside them fails naming it (graph.c). */
    uint32_t losses;
};

/* Frees a backend (NULL: nothing). */
void tfc_backend_free(tfc_backend *be);

/* Fails naming the first NULL op of `ops` outside TFC_BACKEND_LAYER_OPS,
 * TFC_BACKEND_STEP_OPS and TFC_BACKEND_GRAPH_OPS, the ops a backend may lack (a backend
 * missing any other is unusable). */
tfc_status tfc_backend_check(const tfc_backend_ops *ops, tfc_error *err);

/* Whether `ops` fills the slot named `op` (an op of TFC_BACKEND_OPS by its name, e.g.
 * "gemm"); 0 for a name that is no op. */
int tfc_backend_has(const tfc_backend_ops *ops, const char *op);

/* be->ops->configure(be, o); nothing for a NULL backend. The solver applies its device
 * options once, after opening the backend. */
void tfc_backend_configure(tfc_backend *be, const tfc_device_options *o);

/* be->ops->status(be, err); TFC_OK for a NULL backend. The trainer asks after each step's
 * download and each test pass. */
tfc_status tfc_backend_status(tfc_backend *be, tfc_error *err);

#endif
