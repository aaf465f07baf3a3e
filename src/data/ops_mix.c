/* The batch-mixing map ops of Keras 3's MixUp and CutMix layers, which mix both the images
 * and the labels of a batch: mix_up (features y_i = l_i x_i + (1 - l_i) x_p(i)) and cut_mix
 * (a box of x_p(i) pasted into x_i, labels weighted by the box's area). They run on batches
 * (after `batch`) with float labels (after `one_hot`). As in Keras, every sample draws its own
 * weight l_i ~ Beta(a, a) and its partner p(i) from one uniform permutation of the batch (a
 * sample may draw itself); cut_mix draws a = U(factor) + 1e-6 once per batch. The draws come
 * from the batch's Philox key (tfc_mix_draw) and are applied by tfc_mix_apply, which the tests
 * call with Keras's draws. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/rng_draw.h"
#include "data/internal.h"

/* Philox steps of the draws (one stream each). */
enum { STEP_PERM = 1, STEP_BETA, STEP_ALPHA, STEP_BOX };
/* The stream of an op's explicit `seed:`, like shuffle's (values are part of the results). */
#define MIX_SEED_STREAM 0x4D49584D4958ull

/* ---- draws ----------------------------------------------------------------------------------- */

void tfc_mix_draws_free(tfc_mix_draws *d)
{
    free(d->perm);
    free(d->lam);
    memset(d, 0, sizeof *d);
}

tfc_status tfc_mix_draw(uint64_t key, int cut, double lo, double hi, int64_t n,
                        tfc_mix_draws *d, tfc_error *err)
{
    memset(d, 0, sizeof *d);
    d->n = n;
    d->perm = malloc(sizeof *d->perm * (size_t)(n > 0 ? n : 1));
    d->lam = malloc(sizeof *d->lam * 3 * (size_t)(n > 0 ? n : 1));
    if (!d->perm || !d->lam) {
        tfc_mix_draws_free(d);
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory drawing a batch's mix");
    }
    d->ux = d->lam + n;
    d->uy = d->ux + n;
    for (int64_t i = 0; i < n; i++) d->perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) { /* Fisher-Yates: a uniform permutation */
        int64_t j = (int64_t)tfc_rng_below(key, STEP_PERM, (uint64_t)i, (uint64_t)i + 1);
        int64_t t = d->perm[i];
        d->perm[i] = d->perm[j];
        d->perm[j] = t;
    }
    double alpha = lo;
    if (cut) /* Keras: uniform in [factor) + 1e-6, one a batch */
        alpha = (float)(lo + (hi - lo) * tfc_rng_uniform(key, STEP_ALPHA, 0)) + 1e-6f;
    tfc_draw_stream s = {key, STEP_BETA, 0};
    for (int64_t i = 0; i < n; i++) d->lam[i] = (float)tfc_draw_beta(&s, alpha);
    for (int64_t i = 0; i < n && cut; i++) {
        d->ux[i] = tfc_rng_uniform(key, STEP_BOX, (uint64_t)(2 * i));
        d->uy[i] = tfc_rng_uniform(key, STEP_BOX, (uint64_t)(2 * i + 1));
    }
    return TFC_OK;
}

/* ---- applying them --------------------------------------------------------------------------- */

/* CutMix's box of sample i, in pixel coordinates as Keras computes them (float32):
 * side = sqrt(1 - l) * size, start = u (size - side), end = start + side. */
static void cut_bounds(float lam, float u, int64_t size, float *b0, float *b1)
{
    float ratio = sqrtf(1.0f - lam);
    float len = ratio * (float)size;
    *b0 = u * ((float)size - len);
    *b1 = *b0 + len;
}

/* Component c as float32 (a new buffer when it is not), or NULL when out of memory. */
static float *as_f32(const tfc_tensor *t, int64_t n, int *owned)
{
    *owned = t->dtype != TFC_F32;
    if (!*owned) return t->data;
    float *f = malloc(sizeof *f * (size_t)(n > 0 ? n : 1));
    if (f) tfc_values_convert(f, TFC_F32, t->data, t->dtype, n);
    return f;
}

tfc_status tfc_mix_apply(tfc_element *e, const tfc_mix_draws *d, int cut, tfc_error *err)
{
    const char *op = cut ? "cut_mix" : "mix_up";
    tfc_tensor *ft = &e->comp[TFC_COMP_FEATURES], *lt = &e->comp[TFC_COMP_LABELS];
    const int64_t n = d->n;
    if (ft->shape.ndim < 1 || ft->shape.dim[0] != n || !lt->data || lt->shape.ndim < 1 ||
        lt->shape.dim[0] != n)
        return tfc_error_set(err, TFC_ERR_DATA, "%s: needs a batch of features and labels of "
                             "%lld rows", op, (long long)n);
    if (cut && ft->shape.ndim != 4)
        return tfc_error_set(err, TFC_ERR_DATA, "cut_mix: needs images (batch, height, width, "
                             "channels), found rank %d", ft->shape.ndim);
    if (tfc_dtype_is_int(lt->dtype) || lt->dtype == TFC_BOOL)
        return tfc_error_set(err, TFC_ERR_DATA, "%s: needs float labels, found %s", op,
                             tfc_data_dtype_name(lt->dtype));
    const int64_t fn = tfc_shape_numel(&ft->shape), ln = tfc_shape_numel(&lt->shape);
    const int64_t fper = n ? fn / n : 0, lper = n ? ln / n : 0;
    int fown, lown;
    tfc_tensor fold = *ft, lold = *lt;
    float *x = as_f32(&fold, fn, &fown), *l = as_f32(&lold, ln, &lown);
    ft->data = NULL;
    lt->data = NULL;
    float *y = x && l ? tfc_elem_alloc_uninit(e, TFC_COMP_FEATURES, TFC_F32, &fold.shape) : NULL;
    float *z = y ? tfc_elem_alloc_uninit(e, TFC_COMP_LABELS, TFC_F32, &lold.shape) : NULL;
    if (!z) {
        if (fown) free(x);
        if (lown) free(l);
        free(fold.data);
        free(lold.data);
        return tfc_error_set(err, TFC_ERR_NOMEM, "%s: out of memory", op);
    }
    const int64_t H = cut ? fold.shape.dim[1] : 0, W = cut ? fold.shape.dim[2] : 0;
    const int64_t C = cut ? fold.shape.dim[3] : 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t p = d->perm[i];
        const float *xi = x + i * fper, *xp = x + p * fper;
        float *yi = y + i * fper;
        float w = d->lam[i];
        if (!cut) {
            for (int64_t k = 0; k < fper; k++) yi[k] = w * xi[k] + (1.0f - w) * xp[k];
        } else {
            float x0, x1, y0, y1;
            cut_bounds(d->lam[i], d->ux[i], W, &x0, &x1);
            cut_bounds(d->lam[i], d->uy[i], H, &y0, &y1);
            memcpy(yi, xi, sizeof *yi * (size_t)fper);
            /* Keras's mask, pixel (r, c) with y0 <= r < y1 and x0 <= c < x1, as index ranges:
             * for an integer k and a bound b >= 0, k >= b and k < b are k >= ceil(b) and
             * k < ceil(b) exactly */
            int64_t c0 = (int64_t)ceilf(x0), c1 = (int64_t)ceilf(x1);
            int64_t r0 = (int64_t)ceilf(y0), r1 = (int64_t)ceilf(y1);
            c1 = c1 < W ? c1 : W;
            r1 = r1 < H ? r1 : H;
            for (int64_t r = r0; r < r1 && c0 < c1; r++)
                memcpy(yi + (r * W + c0) * C, xp + (r * W + c0) * C,
                       sizeof *yi * (size_t)((c1 - c0) * C));
            /* Keras weighs the labels by the box's own area (not the pixels it covers) */
            float area = (x1 - x0) * (y1 - y0);
            w = 1.0f - area / (float)(W * H);
        }
        const float *li = l + i * lper, *lp = l + p * lper;
        float *zi = z + i * lper;
        for (int64_t k = 0; k < lper; k++) zi[k] = w * li[k] + (1.0f - w) * lp[k];
    }
    if (fown) free(x);
    if (lown) free(l);
    free(fold.data);
    free(lold.data);
    return TFC_OK;
}

/* ---- the ops --------------------------------------------------------------------------------- */

typedef struct mix_args {
    map_common common;
    double alpha;          /* mix_up */
    tfc_float_list factor; /* cut_mix: [upper] or [lower, upper] */
    int seed;
    int cut;               /* set by init */
} mix_args;

#define SEED_FIELD                                                                            \
    {"seed", TFC_F_INT, offsetof(mix_args, seed), "-1", -1, 2147483647, NULL,                 \
     "-1: drawn from the solver's seed; else a fixed seed (Keras's seed=)"}

static const tfc_field mix_up_fields[] = {
    MAP_COMMON_FIELDS(mix_args),
    {"alpha", TFC_F_FLOAT, offsetof(mix_args, alpha), "0.2", 0, 1e6, NULL,
     "> 0: each sample's weight is drawn from Beta(alpha, alpha)"},
    SEED_FIELD,
    {NULL},
};

static const tfc_field cut_mix_fields[] = {
    MAP_COMMON_FIELDS(mix_args),
    {"factor", TFC_F_FLOAT_LIST, offsetof(mix_args, factor), "1.0", 0, 1, NULL,
     "f or [lower, upper] in [0, 1]: each batch draws alpha in [0, f] (or [lower, upper]), "
     "each sample a weight from Beta(alpha, alpha)"},
    SEED_FIELD,
    {NULL},
};

static tfc_status mix_up_check(void *args, const op_build *b)
{
    const mix_args *a = args;
    if (!(a->alpha > 0))
        return tfc_op_error(b, "alpha must be > 0 (Beta(alpha, alpha)), found %g", a->alpha);
    return TFC_OK;
}

static tfc_status cut_mix_check(void *args, const op_build *b)
{
    mix_args *a = args;
    if (a->factor.n < 1 || a->factor.n > 2)
        return tfc_op_error(b, "factor is one number or a pair [lower, upper], found %d values",
                            a->factor.n);
    if (a->factor.n == 1) { /* Keras: f means [0, f] */
        a->factor.v[1] = a->factor.v[0];
        a->factor.v[0] = 0;
    } else if (a->factor.v[0] > a->factor.v[1]) { /* Keras sorts the pair */
        double t = a->factor.v[0];
        a->factor.v[0] = a->factor.v[1];
        a->factor.v[1] = t;
    }
    a->factor.n = 2;
    return TFC_OK;
}

static tfc_status mix_init(void *args, const op_build *b, const tfc_element_spec *in,
                           tfc_element_spec *out, int cut)
{
    mix_args *a = args;
    a->cut = cut;
    const char *name = cut ? "cut_mix" : "mix_up";
    const tfc_component_spec *f = &in->comp[TFC_COMP_FEATURES], *l = &in->comp[TFC_COMP_LABELS];
    char sh[160];
    if (!in->batched)
        return tfc_op_error(b, "%s mixes the examples of a batch: place it after `batch` "
                            "(e.g. `- batch: {batch_size: 128}` then `- map: {op: %s}`)", name,
                            name);
    if (!l->present)
        return tfc_op_error(b, "%s mixes the labels too, but the elements have none", name);
    if (tfc_dtype_is_int(l->dtype) || l->dtype == TFC_BOOL)
        return tfc_op_error(b, "%s needs float labels such as one-hot vectors, found %s: add "
                            "`- map: {op: one_hot, depth: NUM_CLASSES}` before it (and train "
                            "with loss: categorical_crossentropy)", name,
                            tfc_data_spec_str(l, sh, sizeof sh));
    if (cut && f->shape.ndim >= 0 && f->shape.ndim != 4)
        return tfc_op_error(b, "cut_mix needs batches of images (batch, height, width, "
                            "channels), found %s", tfc_data_spec_str(f, sh, sizeof sh));
    out->comp[TFC_COMP_FEATURES].dtype = TFC_F32;
    out->comp[TFC_COMP_LABELS].dtype = TFC_F32;
    return TFC_OK;
}

static tfc_status mix_up_init(void *args, const op_build *b, const tfc_element_spec *in,
                              tfc_element_spec *out, tfc_error *err)
{
    return mix_init(args, b, in, out, 0);
}

static tfc_status cut_mix_init(void *args, const op_build *b, const tfc_element_spec *in,
                               tfc_element_spec *out, tfc_error *err)
{
    return mix_init(args, b, in, out, 1);
}

static tfc_status mix_apply(const void *args, tfc_element *e, const tfc_map_ctx *ctx,
                            tfc_error *err)
{
    const mix_args *a = args;
    const tfc_tensor *ft = &e->comp[TFC_COMP_FEATURES];
    int64_t n = ft->shape.ndim >= 1 ? ft->shape.dim[0] : 0;
    uint64_t key = a->seed >= 0
                       ? tfc_elem_key(tfc_rng_key((uint64_t)a->seed, MIX_SEED_STREAM),
                                      ctx->epoch, ctx->index)
                       : ctx->key;
    tfc_mix_draws d;
    double lo = a->cut ? a->factor.v[0] : a->alpha, hi = a->cut ? a->factor.v[1] : a->alpha;
    tfc_status st = tfc_mix_draw(key, a->cut, lo, hi, n, &d, err);
    if (!st) st = tfc_mix_apply(e, &d, a->cut, err);
    tfc_mix_draws_free(&d);
    return st;
}

const op_def tfc_op_mix_up = {
    .name = "mix_up",
    .fields = mix_up_fields,
    .args_size = sizeof(mix_args),
    .help = "Keras's MixUp on a batch: blends each example and its label with a partner's",
    .needs_batch = 1,
    .one_label = 1,
    .check = mix_up_check,
    .init = mix_up_init,
    .apply = mix_apply,
};

const op_def tfc_op_cut_mix = {
    .name = "cut_mix",
    .fields = cut_mix_fields,
    .args_size = sizeof(mix_args),
    .help = "Keras's CutMix on a batch of images: pastes a box of a partner's image, "
            "labels weighted by its area",
    .needs_batch = 1,
    .one_label = 1,
    .check = cut_mix_check,
    .init = cut_mix_init,
    .apply = mix_apply,
};
