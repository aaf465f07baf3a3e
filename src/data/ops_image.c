/* Image map ops on (H, W, C) elements, channels last: decode_png / decode_jpeg /
 * decode_image (bytes to U8 pixels), random_flip, random_crop (with zero padding first, as
 * for CIFAR-style augmentation) and resize (bilinear with half-pixel centres like
 * tf.image.resize, or nearest). Random choices come from the element's key. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/vector.h"
#include "data/internal.h"

static tfc_status need_image(const op_build *b, const tfc_element_spec *in)
{
    const tfc_component_spec *c = &in->comp[TFC_COMP_FEATURES];
    if (!c->present) return tfc_op_error(b, "the elements have no features");
    if (c->shape.ndim >= 0 && c->shape.ndim != 3) {
        char sh[160];
        return tfc_op_error(b, "needs images of shape (height, width, channels), found %s%s",
                            tfc_data_spec_str(c, sh, sizeof sh),
                            c->dtype == TFC_U8 && c->shape.ndim == 1
                                ? "; hint: these look like encoded bytes: decode them first"
                                : "");
    }
    return TFC_OK;
}

static tfc_status check_rank3(const tfc_tensor *t, const char *op, tfc_error *err)
{
    if (t->shape.ndim == 3) return TFC_OK;
    char sh[160];
    return tfc_error_set(err, TFC_ERR_DATA, "%s: needs an image (H, W, C), found shape %s", op,
                         tfc_shape_str(&t->shape, sh, sizeof sh));
}

/* ---- segmentation masks ---------------------------------------------------------------------
 * random_flip, random_crop and resize take `segmentation_masks: true` (Keras 3's
 * augmentation layers given {"images", "segmentation_masks"}): the labels, one class per
 * pixel (H, W) or (H, W, k) of the image's H × W, get the image's flip or crop, and a resize
 * by nearest neighbour. Without it, integer labels that may be of the image's H × W (sizes
 * unknown before the data count as equal) are refused: the op would move the pixels away
 * from their labels. */

#define MASKS_FIELD(type)                                                                      \
    {"segmentation_masks", TFC_F_BOOL, offsetof(type, masks), "false", TFC_UNBOUNDED, NULL,   \
     "also move the labels, a class per pixel (H, W) or (H, W, k), with the image"}

/* Whether label spec l may have the height and width of feature spec f: (H, W) or (H, W, k)
 * beside (H, W, C), each size the same where both are known */
static int same_plane(const tfc_component_spec *f, const tfc_component_spec *l)
{
    if (f->shape.ndim != 3 || (l->shape.ndim != 2 && l->shape.ndim != 3)) return 0;
    for (int k = 0; k < 2; k++)
        if (f->shape.dim[k] >= 0 && l->shape.dim[k] >= 0 && f->shape.dim[k] != l->shape.dim[k])
            return 0;
    return 1;
}

static tfc_status check_masks(const op_build *b, const tfc_element_spec *in, int masks)
{
    const tfc_component_spec *f = &in->comp[TFC_COMP_FEATURES], *l = &in->comp[TFC_COMP_LABELS];
    char sh[160];
    if (!masks) {
        if (l->present && tfc_dtype_is_int(l->dtype) && same_plane(f, l))
            return tfc_op_error(b, "the labels %s look like segmentation masks (a class per "
                                "pixel of the images): this op would move the pixels away from "
                                "their labels; add segmentation_masks: true to move both",
                                tfc_data_spec_str(l, sh, sizeof sh));
        return TFC_OK;
    }
    if (!l->present) return tfc_op_error(b, "segmentation_masks: the elements have no labels");
    if (in->nlabels > 1) {
        char labels[600];
        return tfc_op_error(b, "segmentation_masks: the elements have %d labels (%s); it moves "
                            "the masks of one", in->nlabels,
                            tfc_data_labels_str(in, labels, sizeof labels));
    }
    if (l->shape.ndim >= 0 && l->shape.ndim != 2 && l->shape.ndim != 3)
        return tfc_op_error(b, "segmentation_masks: needs labels of shape (height, width) or "
                            "(height, width, k), found %s", tfc_data_spec_str(l, sh, sizeof sh));
    if (f->shape.ndim == 3 && l->shape.ndim >= 2 && !same_plane(f, l))
        return tfc_op_error(b, "segmentation_masks: the labels %s are not of the images' "
                            "height and width (%lld x %lld)",
                            tfc_data_spec_str(l, sh, sizeof sh), (long long)f->shape.dim[0],
                            (long long)f->shape.dim[1]);
    return TFC_OK;
}

/* The labels' spec after an op that makes images h × w (h or w -1: unknown) */
static void masks_resized(tfc_element_spec *out, int64_t h, int64_t w)
{
    tfc_shape *s = &out->comp[TFC_COMP_LABELS].shape;
    if (s->ndim >= 2) s->dim[0] = h, s->dim[1] = w;
}

/* Element e's labels as a mask of its image (H, W): *k gets the values per pixel. */
static tfc_status mask_of(const tfc_element *e, const char *op, int64_t H, int64_t W, int64_t *k,
                          tfc_error *err)
{
    const tfc_tensor *m = &e->comp[TFC_COMP_LABELS];
    char sh[160];
    if (!m->data || (m->shape.ndim != 2 && m->shape.ndim != 3) || m->shape.dim[0] != H ||
        m->shape.dim[1] != W)
        return tfc_error_set(err, TFC_ERR_DATA, "%s: segmentation_masks: labels of shape %s do "
                             "not fit an image of %lld x %lld", op,
                             tfc_shape_str(&m->shape, sh, sizeof sh), (long long)H, (long long)W);
    *k = m->shape.ndim == 3 ? m->shape.dim[2] : 1;
    return TFC_OK;
}

/* ---- decode ------------------------------------------------------------------------------- */

/* Which formats a decode op takes. */
enum { DECODE_ANY = 0, DECODE_PNG, DECODE_JPEG };

typedef struct decode_args {
    map_common common;
    int channels;
    int max_side;
    double max_pixels;
    int kind; /* DECODE_* (set by init from the op) */
    tfc_image_pool *pool; /* made by init, freed by fini */
} decode_args;

static const tfc_field decode_fields[] = {
    MAP_COMMON_FIELDS(decode_args),
    {"channels", TFC_F_INT, offsetof(decode_args, channels), "0", 0, 4, NULL,
     "0 keeps the stored channels; 1 grey, 3 RGB, 4 RGBA convert"},
    {"max_side", TFC_F_INT, offsetof(decode_args, max_side), "16384", 1, 1 << 30, NULL,
     "largest width or height accepted"},
    {"max_pixels", TFC_F_FLOAT, offsetof(decode_args, max_pixels), "268435456", 1, 1e18, NULL,
     "largest width x height accepted"},
    {NULL},
};

static tfc_status decode_init_kind(void *args, const op_build *b, const tfc_element_spec *in,
                                   tfc_element_spec *out, int kind)
{
    decode_args *a = args;
    a->kind = kind;
    const tfc_component_spec *c = &in->comp[TFC_COMP_FEATURES];
    if (!c->present) return tfc_op_error(b, "the elements have no features");
    if (c->dtype != TFC_U8 || (c->shape.ndim >= 0 && c->shape.ndim != 1)) {
        char sh[160];
        return tfc_op_error(b, "needs encoded bytes (uint8 of rank 1), found %s%s",
                            tfc_data_spec_str(c, sh, sizeof sh),
                            c->shape.ndim == 3 ? "; hint: the images are decoded already "
                                                 "(images source with decode: true)" : "");
    }
    int64_t ch = a->channels ? a->channels : -1;
    tfc_component_spec pixels = {1, TFC_U8, {.ndim = 3, .dim = {-1, -1, ch}}};
    out->comp[TFC_COMP_FEATURES] = pixels;
    if (!a->pool && !(a->pool = tfc_image_pool_new())) return tfc_op_error(b, "out of memory");
    return TFC_OK;
}

static tfc_status decode_any_init(void *args, const op_build *b, const tfc_element_spec *in,
                                  tfc_element_spec *out, tfc_error *err)
{
    return decode_init_kind(args, b, in, out, DECODE_ANY);
}

static tfc_status decode_png_init(void *args, const op_build *b, const tfc_element_spec *in,
                                  tfc_element_spec *out, tfc_error *err)
{
    return decode_init_kind(args, b, in, out, DECODE_PNG);
}

static tfc_status decode_jpeg_init(void *args, const op_build *b, const tfc_element_spec *in,
                                   tfc_element_spec *out, tfc_error *err)
{
    return decode_init_kind(args, b, in, out, DECODE_JPEG);
}

static tfc_status decode_apply(const void *args, tfc_element *e, const tfc_map_ctx *ctx,
                               tfc_error *err)
{
    const decode_args *a = args;
    tfc_tensor *t = &e->comp[TFC_COMP_FEATURES];
    size_t len = tfc_data_tensor_bytes(t);
    static const char *const names[] = {
        [DECODE_ANY] = "decode_image", [DECODE_PNG] = "decode_png", [DECODE_JPEG] = "decode_jpeg"};
    if (t->dtype != TFC_U8 || t->shape.ndim != 1)
        return tfc_error_set(err, TFC_ERR_DATA, "%s: needs encoded bytes", names[a->kind]);
    if (a->kind == DECODE_PNG && !tfc_image_is_png(t->data, len))
        return tfc_error_set(err, TFC_ERR_DATA, "decode_png: not a PNG image");
    if (a->kind == DECODE_JPEG && !tfc_image_is_jpeg(t->data, len))
        return tfc_error_set(err, TFC_ERR_DATA, "decode_jpeg: not a JPEG image");
    tfc_image_limits lim = {a->max_side, (int64_t)a->max_pixels};
    tfc_tensor img;
    tfc_status st = tfc_image_decode_with(a->pool, t->data, len, names[a->kind], a->channels,
                                          &lim, &img, err);
    if (st) return st;
    free(t->data);
    *t = img;
    return TFC_OK;
}

static void decode_fini(void *args)
{
    tfc_image_pool_free(((decode_args *)args)->pool);
}

const op_def tfc_op_decode_image = {
    .name = "decode_image",
    .fields = decode_fields,
    .args_size = sizeof(decode_args),
    .help = "PNG or JPEG bytes to uint8 (H, W, C) pixels",
    .init = decode_any_init,
    .apply = decode_apply,
    .fini = decode_fini,
};
const op_def tfc_op_decode_png = {
    .name = "decode_png",
    .fields = decode_fields,
    .args_size = sizeof(decode_args),
    .help = "PNG bytes (8/16-bit, grey/RGB/RGBA/palette) to uint8 pixels",
    .init = decode_png_init,
    .apply = decode_apply,
    .fini = decode_fini,
};
const op_def tfc_op_decode_jpeg = {
    .name = "decode_jpeg",
    .fields = decode_fields,
    .args_size = sizeof(decode_args),
    .help = "JPEG bytes to uint8 pixels",
    .init = decode_jpeg_init,
    .apply = decode_apply,
    .fini = decode_fini,
};

/* ---- random_flip ---------------------------------------------------------------------------- */

enum { FLIP_HORIZONTAL = 0, FLIP_VERTICAL, FLIP_BOTH, FLIP_COUNT };

typedef struct flip_args {
    map_common common;
    int mode; /* FLIP_* */
    double probability;
    int masks;
} flip_args;

static const char *const flip_modes[] = {[FLIP_HORIZONTAL] = "horizontal",
                                         [FLIP_VERTICAL] = "vertical",
                                         [FLIP_BOTH] = "horizontal_and_vertical",
                                         [FLIP_COUNT] = NULL};

static const tfc_field flip_fields[] = {
    MAP_COMMON_FIELDS(flip_args),
    {"mode", TFC_F_ENUM, offsetof(flip_args, mode), "horizontal", TFC_UNBOUNDED, flip_modes,
     "which flips (each made independently)"},
    {"probability", TFC_F_FLOAT, offsetof(flip_args, probability), "0.5", 0, 1, NULL,
     "chance of each flip"},
    MASKS_FIELD(flip_args),
    {NULL},
};

static tfc_status flip_init(void *args, const op_build *b, const tfc_element_spec *in,
                            tfc_element_spec *out, tfc_error *err)
{
    const flip_args *a = args;
    tfc_status st = need_image(b, in);
    return st ? st : check_masks(b, in, a->masks);
}

/* Swaps n bytes between a and b (n small: a pixel or a row). */
static void swap_blocks(char *a, char *b, size_t n)
{
    char tmp[256];
    while (n) {
        size_t k = n < sizeof tmp ? n : sizeof tmp;
        memcpy(tmp, a, k);
        memcpy(a, b, k);
        memcpy(b, tmp, k);
        a += k;
        b += k;
        n -= k;
    }
}

#ifdef TFC_X86_SIMD
#include <immintrin.h>

/* Output pixels 1 .. k-1 of a reversed RGB row of w pixels into buf (which has 16 bytes of
 * room past the row), five at a time: 16 bytes loaded ending at the input's matching pixel,
 * reordered with one byte shuffle, stored (the 16th byte is overwritten by the next five).
 * Returns k, the first pixel left to the caller. About 8x faster than the word loop. */
__attribute__((target("ssse3"))) static int64_t reverse_rgb_ssse3(unsigned char *buf,
                                                                   const unsigned char *src,
                                                                   int64_t w)
{
    /* byte 3q + c of the output is byte 1 + 3 (4 - q) + c of the load, which starts one
     * byte before the five input pixels (so it never reads past the row's end) */
    const __m128i order = _mm_setr_epi8(13, 14, 15, 10, 11, 12, 7, 8, 9, 4, 5, 6, 1, 2, 3, -1);
    int64_t i = 1;
    /* input pixels w-5-i .. w-1-i, loaded from byte 3 (w-5-i) - 1 >= 0 */
    for (; i + 6 <= w; i += 5) {
        __m128i v = _mm_loadu_si128((const __m128i *)(src + (size_t)(w - 5 - i) * 3 - 1));
        _mm_storeu_si128((__m128i *)(buf + (size_t)i * 3), _mm_shuffle_epi8(v, order));
    }
    return i;
}
#endif

/* Reverses the order of the w pixels (px bytes each) of one row. */
static void reverse_row(char *r, int64_t w, size_t px)
{
    char *lo = r, *hi = r + (size_t)(w - 1) * px;
    if (px == 1) {
        for (; lo < hi; lo++, hi--) {
            char c = *lo;
            *lo = *hi;
            *hi = c;
        }
    } else if (px == 3 && w <= 4096) {
        /* RGB bytes: the reversed row is built in a buffer (whole pixels read and written
         * as unaligned 4-byte words, the spare byte overwritten by the next pixel), then
         * copied back: about 3x faster than swapping byte by byte */
        unsigned char buf[4096 * 3 + 16];
        const unsigned char *src = (const unsigned char *)r;
        memcpy(buf, src + (size_t)(w - 1) * 3, 3); /* the last pixel: no byte past the row */
        int64_t i = 1;
#ifdef TFC_X86_SIMD
        if (__builtin_cpu_supports("ssse3")) i = reverse_rgb_ssse3(buf, src, w);
#endif
        for (; i < w; i++) {
            uint32_t v;
            memcpy(&v, src + (size_t)(w - 1 - i) * 3, 4);
            memcpy(buf + (size_t)i * 3, &v, 4);
        }
        memcpy(r, buf, (size_t)w * 3);
    } else if (px == 3) {
        for (; lo < hi; lo += 3, hi -= 3) {
            char c0 = lo[0], c1 = lo[1], c2 = lo[2];
            lo[0] = hi[0];
            lo[1] = hi[1];
            lo[2] = hi[2];
            hi[0] = c0;
            hi[1] = c1;
            hi[2] = c2;
        }
    } else if (px == 4) {
        for (; lo < hi; lo += 4, hi -= 4) {
            uint32_t a, b;
            memcpy(&a, lo, 4);
            memcpy(&b, hi, 4);
            memcpy(lo, &b, 4);
            memcpy(hi, &a, 4);
        }
    } else {
        for (; lo < hi; lo += px, hi -= px) swap_blocks(lo, hi, px);
    }
}

/* Flips an h × w plane of pixels of px bytes left-right and/or up-down. */
static void flip_plane(char *d, int64_t h, int64_t w, size_t px, int hflip, int vflip)
{
    const size_t row = (size_t)w * px;
    if (hflip && w > 1)
        for (int64_t y = 0; y < h; y++) reverse_row(d + (size_t)y * row, w, px);
    if (vflip)
        for (int64_t y = 0; y < h / 2; y++)
            swap_blocks(d + (size_t)y * row, d + (size_t)(h - 1 - y) * row, row);
}

static tfc_status flip_apply(const void *args, tfc_element *e, const tfc_map_ctx *ctx,
                             tfc_error *err)
{
    const flip_args *a = args;
    tfc_tensor *t = &e->comp[TFC_COMP_FEATURES];
    tfc_status st = check_rank3(t, "random_flip", err);
    if (st) return st;
    int64_t h = t->shape.dim[0], w = t->shape.dim[1], k = 0;
    if (a->masks && (st = mask_of(e, "random_flip", h, w, &k, err))) return st;
    int hflip = a->mode != FLIP_VERTICAL && tfc_rng_uniform(ctx->key, 1, 0) < a->probability;
    int vflip = a->mode != FLIP_HORIZONTAL && tfc_rng_uniform(ctx->key, 1, 1) < a->probability;
    flip_plane(t->data, h, w, (size_t)t->shape.dim[2] * tfc_dtype_size(t->dtype), hflip, vflip);
    if (a->masks) {
        const tfc_tensor *m = &e->comp[TFC_COMP_LABELS];
        flip_plane(m->data, h, w, (size_t)k * tfc_dtype_size(m->dtype), hflip, vflip);
    }
    return TFC_OK;
}

const op_def tfc_op_random_flip = {
    .name = "random_flip",
    .fields = flip_fields,
    .args_size = sizeof(flip_args),
    .help = "flips images left-right and/or up-down at random",
    .init = flip_init,
    .apply = flip_apply,
};

/* ---- random_crop ---------------------------------------------------------------------------- */

typedef struct crop_args {
    map_common common;
    int size[2];
    int padding;
    int masks;
} crop_args;

static const tfc_field crop_fields[] = {
    MAP_COMMON_FIELDS(crop_args),
    {"size", TFC_F_INT_PAIR, offsetof(crop_args, size), NULL, 1, 1 << 20, NULL,
     "[height, width] of the crop (or one number for a square)"},
    {"padding", TFC_F_INT, offsetof(crop_args, padding), "0", 0, 1 << 16, NULL,
     "zero pixels added on every side before cropping"},
    MASKS_FIELD(crop_args),
    {NULL},
};

static tfc_status crop_init(void *args, const op_build *b, const tfc_element_spec *in,
                            tfc_element_spec *out, tfc_error *err)
{
    crop_args *a = args;
    tfc_status st = need_image(b, in);
    if (!st) st = check_masks(b, in, a->masks);
    if (st) return st;
    if (a->masks) masks_resized(out, a->size[0], a->size[1]);
    tfc_shape *s = &out->comp[TFC_COMP_FEATURES].shape;
    if (s->ndim == 3) {
        for (int k = 0; k < 2; k++)
            if (s->dim[k] >= 0 && s->dim[k] + 2 * a->padding < a->size[k])
                return tfc_op_error(b, "a crop of %d x %d does not fit in images of %lld x %lld "
                                    "with padding %d", a->size[0], a->size[1], (long long)s->dim[0],
                                    (long long)s->dim[1], a->padding);
        s->dim[0] = a->size[0];
        s->dim[1] = a->size[1];
    } else {
        *s = (tfc_shape){.ndim = 3, .dim = {a->size[0], a->size[1], -1}};
    }
    return TFC_OK;
}

/* Replaces component comp of e (H, W its first axes) by an uninitialised h × w plane of the
 * same dtype and other axes, returned; *old gets the component as it was (its data the
 * caller's to free). NULL, the old data freed, when out of memory. */
static char *new_plane(tfc_element *e, int comp, int64_t h, int64_t w, tfc_tensor *old)
{
    *old = e->comp[comp];
    tfc_shape s = old->shape;
    s.dim[0] = h, s.dim[1] = w;
    e->comp[comp].data = NULL;
    char *d = tfc_elem_alloc_uninit(e, comp, old->dtype, &s);
    if (!d) free(old->data);
    return d;
}

/* Component comp of e, an H × W plane of pixels of px bytes (H, W the first axes of its
 * shape), cropped: out(y, x) = in(y + oy - p, x + ox - p), zero outside, h × w. */
static tfc_status crop_plane(tfc_element *e, int comp, int64_t H, int64_t W, size_t px,
                             int64_t h, int64_t w, int64_t oy, int64_t ox, int64_t p,
                             tfc_error *err)
{
    tfc_tensor old;
    char *d = new_plane(e, comp, h, w, &old);
    if (!d) return tfc_error_set(err, TFC_ERR_NOMEM, "random_crop: out of memory");
    const size_t row = (size_t)w * px;
    int64_t x0 = p - ox > 0 ? p - ox : 0;          /* first output column inside the image */
    int64_t x1 = W + p - ox < w ? W + p - ox : w;  /* one past the last */
    if (x1 < x0) x1 = x0;
    /* each output row once: the image's part copied, the padding around it zeroed */
    for (int64_t y = 0; y < h; y++) {
        char *out = d + (size_t)y * row;
        int64_t sy = y + oy - p;
        if (sy < 0 || sy >= H || x1 == x0) {
            memset(out, 0, row);
            continue;
        }
        memset(out, 0, (size_t)x0 * px);
        memcpy(out + (size_t)x0 * px, (char *)old.data + (size_t)(sy * W + x0 + ox - p) * px,
               (size_t)(x1 - x0) * px);
        memset(out + (size_t)x1 * px, 0, (size_t)(w - x1) * px);
    }
    free(old.data);
    return TFC_OK;
}

/* The window at oy uniform in [0, H + 2p - h] and ox in [0, W + 2p - w] of the padded
 * image; with masks, of the labels too (padded with class 0). */
static tfc_status crop_apply(const void *args, tfc_element *e, const tfc_map_ctx *ctx,
                             tfc_error *err)
{
    const crop_args *a = args;
    const tfc_tensor *t = &e->comp[TFC_COMP_FEATURES];
    tfc_status st = check_rank3(t, "random_crop", err);
    if (st) return st;
    int64_t H = t->shape.dim[0], W = t->shape.dim[1], C = t->shape.dim[2], k = 0;
    int64_t h = a->size[0], w = a->size[1], p = a->padding;
    if (H + 2 * p < h || W + 2 * p < w)
        return tfc_error_set(err, TFC_ERR_DATA, "random_crop: a crop of %lld x %lld does not "
                             "fit in an image of %lld x %lld with padding %lld", (long long)h,
                             (long long)w, (long long)H, (long long)W, (long long)p);
    if (a->masks && (st = mask_of(e, "random_crop", H, W, &k, err))) return st;
    int64_t oy = (int64_t)tfc_rng_below(ctx->key, 2, 0, (uint64_t)(H + 2 * p - h + 1));
    int64_t ox = (int64_t)tfc_rng_below(ctx->key, 2, 1, (uint64_t)(W + 2 * p - w + 1));
    st = crop_plane(e, TFC_COMP_FEATURES, H, W, (size_t)C * tfc_dtype_size(t->dtype), h, w, oy,
                    ox, p, err);
    if (!st && a->masks)
        st = crop_plane(e, TFC_COMP_LABELS, H, W,
                        (size_t)k * tfc_dtype_size(e->comp[TFC_COMP_LABELS].dtype), h, w, oy, ox,
                        p, err);
    return st;
}

const op_def tfc_op_random_crop = {
    .name = "random_crop",
    .fields = crop_fields,
    .args_size = sizeof(crop_args),
    .help = "a random [height, width] window, after zero padding",
    .init = crop_init,
    .apply = crop_apply,
};

/* ---- resize -------------------------------------------------------------------------------- */

enum { RESIZE_BILINEAR = 0, RESIZE_NEAREST, RESIZE_COUNT };

typedef struct resize_args {
    map_common common;
    int size[2];
    int method; /* RESIZE_* */
    int masks;
} resize_args;

static const char *const resize_methods[] = {
    [RESIZE_BILINEAR] = "bilinear", [RESIZE_NEAREST] = "nearest", [RESIZE_COUNT] = NULL};

static const tfc_field resize_fields[] = {
    MAP_COMMON_FIELDS(resize_args),
    {"size", TFC_F_INT_PAIR, offsetof(resize_args, size), NULL, 1, 1 << 16, NULL,
     "[height, width] after resizing"},
    {"method", TFC_F_ENUM, offsetof(resize_args, method), "bilinear", TFC_UNBOUNDED,
     resize_methods, "bilinear gives float32; nearest keeps the dtype"},
    MASKS_FIELD(resize_args),
    {NULL},
};

static tfc_status resize_init(void *args, const op_build *b, const tfc_element_spec *in,
                              tfc_element_spec *out, tfc_error *err)
{
    resize_args *a = args;
    tfc_status st = need_image(b, in);
    if (!st) st = check_masks(b, in, a->masks);
    if (st) return st;
    if (a->masks) masks_resized(out, a->size[0], a->size[1]);
    tfc_component_spec *c = &out->comp[TFC_COMP_FEATURES];
    int64_t ch = c->shape.ndim == 3 ? c->shape.dim[2] : -1;
    c->shape = (tfc_shape){.ndim = 3, .dim = {a->size[0], a->size[1], ch}};
    if (a->method == RESIZE_BILINEAR) c->dtype = TFC_F32;
    return TFC_OK;
}

/* Component comp of e, an H × W plane of pixels of px bytes (H, W the first axes of its
 * shape), resized to h × w by the nearest pixel: output pixel i takes input pixel
 * floor((i + 0.5) * in / out). */
static tfc_status nearest_plane(tfc_element *e, int comp, int64_t H, int64_t W, size_t px,
                                int64_t h, int64_t w, tfc_error *err)
{
    tfc_tensor old;
    char *d = new_plane(e, comp, h, w, &old);
    if (!d) return tfc_error_set(err, TFC_ERR_NOMEM, "resize: out of memory");
    for (int64_t y = 0; y < h; y++) {
        int64_t sy = (int64_t)floor(((double)y + 0.5) * (double)H / (double)h);
        if (sy >= H) sy = H - 1;
        for (int64_t x = 0; x < w; x++) {
            int64_t sx = (int64_t)floor(((double)x + 0.5) * (double)W / (double)w);
            if (sx >= W) sx = W - 1;
            memcpy(d + (size_t)(y * w + x) * px, (char *)old.data + (size_t)(sy * W + sx) * px,
                   px);
        }
    }
    free(old.data);
    return TFC_OK;
}

/* Half-pixel centres: output pixel i samples input coordinate (i + 0.5) * in / out - 0.5;
 * nearest takes the pixel around that coordinate, and so do the masks. */
static tfc_status resize_apply(const void *args, tfc_element *e, const tfc_map_ctx *ctx,
                               tfc_error *err)
{
    const resize_args *a = args;
    tfc_tensor old = e->comp[TFC_COMP_FEATURES];
    tfc_status st = check_rank3(&old, "resize", err);
    if (st) return st;
    int64_t H = old.shape.dim[0], W = old.shape.dim[1], C = old.shape.dim[2];
    int64_t h = a->size[0], w = a->size[1];
    if (H < 1 || W < 1) return tfc_error_set(err, TFC_ERR_DATA, "resize: empty image");
    int64_t k = 0;
    if (a->masks && (st = mask_of(e, "resize", H, W, &k, err))) return st;
    if (a->masks && (st = nearest_plane(e, TFC_COMP_LABELS, H, W,
                                        (size_t)k * tfc_dtype_size(e->comp[TFC_COMP_LABELS].dtype),
                                        h, w, err)))
        return st;
    if (a->method == RESIZE_NEAREST)
        return nearest_plane(e, TFC_COMP_FEATURES, H, W, (size_t)C * tfc_dtype_size(old.dtype), h,
                             w, err);
    tfc_shape s = {.ndim = 3, .dim = {h, w, C}};
    e->comp[TFC_COMP_FEATURES].data = NULL;
    float *d = tfc_element_alloc(e, TFC_COMP_FEATURES, TFC_F32, &s);
    if (!d) goto nomem;
    for (int64_t y = 0; y < h; y++) {
        double fy = ((double)y + 0.5) * (double)H / (double)h - 0.5;
        if (fy < 0) fy = 0;
        int64_t y0 = (int64_t)fy, y1 = y0 + 1 < H ? y0 + 1 : H - 1;
        double wy = fy - (double)y0;
        for (int64_t x = 0; x < w; x++) {
            double fx = ((double)x + 0.5) * (double)W / (double)w - 0.5;
            if (fx < 0) fx = 0;
            int64_t x0 = (int64_t)fx, x1 = x0 + 1 < W ? x0 + 1 : W - 1;
            double wx = fx - (double)x0;
            for (int64_t c = 0; c < C; c++) {
                double v00 = tfc_value_get(old.data, old.dtype, (y0 * W + x0) * C + c);
                double v01 = tfc_value_get(old.data, old.dtype, (y0 * W + x1) * C + c);
                double v10 = tfc_value_get(old.data, old.dtype, (y1 * W + x0) * C + c);
                double v11 = tfc_value_get(old.data, old.dtype, (y1 * W + x1) * C + c);
                double top = v00 + (v01 - v00) * wx, bot = v10 + (v11 - v10) * wx;
                d[(y * w + x) * C + c] = (float)(top + (bot - top) * wy);
            }
        }
    }
    free(old.data);
    return TFC_OK;
nomem:
    free(old.data);
    return tfc_error_set(err, TFC_ERR_NOMEM, "resize: out of memory");
}

const op_def tfc_op_resize = {
    .name = "resize",
    .fields = resize_fields,
    .args_size = sizeof(resize_args),
    .help = "resizes images to [height, width]",
    .init = resize_init,
    .apply = resize_apply,
};
