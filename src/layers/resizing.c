/* The image resizing and cropping layers (keras.layers.Resizing, CenterCrop, RandomCrop),
 * each one crop_resize op (tfc_crop_resize_desc): a view of the image, a window of it or the
 * image inside a border of fill_value, resized to (height, width) as Keras 3's
 * ops.image.resize with the JAX backend (jax.image.resize, half-pixel centres):
 *   y[oy, ox] = sum_ij wy_i(oy) wx_j(ox) view[i, j]
 *   backward: dx += the transpose of that linear map (no gradient to cells cropped away)
 *   Resizing:   the whole image, or with crop_to_aspect_ratio the largest centred window of
 *               the target's aspect ratio, or with pad_to_aspect_ratio the image centred in
 *               a border of fill_value of that ratio (Keras's arithmetic: resize in
 *               keras/src/backend/jax/image.py)
 *   CenterCrop: the centred (height, width) window; an image smaller than that on either
 *               side is resized as Resizing with crop_to_aspect_ratio (smart_resize)
 *   RandomCrop: in training one window per batch at a random place (Keras crops every image
 *               of a batch alike), drawn from the layer's stream at the step; an image not
 *               larger on both sides is cut at the aspect-ratio window's corner and resized,
 *               as Keras; at inference Resizing with crop_to_aspect_ratio, as Keras documents
 * Gradients accumulate into dx. */
#include "layers/layer.h"
#include "core/rng.h"

typedef struct crop_resize_args {
    int height, width, interpolation, crop_to_aspect_ratio, pad_to_aspect_ratio, antialias;
    int seed, data_format;
    double fill_value;
    /* set by build: the view (tfc_crop_resize_desc's vh, vw, top, left) at inference and
     * for RandomCrop's training on an image not larger than the crop on both sides, and
     * whether RandomCrop draws its window in training */
    int vh, vw, top, left;
    int train_vh, train_vw, train_top, train_left, train_random;
    int random_crop;
} crop_resize_args;

/* Keras's names (RESIZE_INTERPOLATIONS); tfc has the first two */
static const char *const interpolation_names[] = {"bilinear", "nearest", "lanczos3",
                                                  "lanczos5", "bicubic", NULL};

#define SIZE_FIELDS                                                                             \
    {"height", TFC_F_INT, offsetof(crop_resize_args, height), NULL, 1, 1 << 16, NULL,           \
     "rows of the output"},                                                                     \
    {"width", TFC_F_INT, offsetof(crop_resize_args, width), NULL, 1, 1 << 16, NULL,             \
     "columns of the output"}

static const tfc_field resizing_fields[] = {
    SIZE_FIELDS,
    {"interpolation", TFC_F_ENUM, offsetof(crop_resize_args, interpolation), "bilinear",
     TFC_UNBOUNDED, interpolation_names, "bilinear or nearest"},
    {"crop_to_aspect_ratio", TFC_F_BOOL, offsetof(crop_resize_args, crop_to_aspect_ratio),
     "false", TFC_UNBOUNDED, NULL, "resize the largest centred window of the output's ratio"},
    {"pad_to_aspect_ratio", TFC_F_BOOL, offsetof(crop_resize_args, pad_to_aspect_ratio),
     "false", TFC_UNBOUNDED, NULL, "resize the image centred in a border of the output's ratio"},
    TFC_FIXED_FIELD("fill_mode", "constant", "Keras's resize pads with fill_value only"),
    {"fill_value", TFC_F_FLOAT, offsetof(crop_resize_args, fill_value), "0.0", TFC_UNBOUNDED,
     NULL, "the border's value with pad_to_aspect_ratio"},
    {"antialias", TFC_F_BOOL, offsetof(crop_resize_args, antialias), "false", TFC_UNBOUNDED,
     NULL, "low-pass filter when shrinking (tfc: only where nothing shrinks)"},
    TFC_DATA_FORMAT_FIELD(crop_resize_args, data_format),
    {NULL}};

static const tfc_field center_crop_fields[] = {
    SIZE_FIELDS, TFC_DATA_FORMAT_FIELD(crop_resize_args, data_format), {NULL}};

static const tfc_field random_crop_fields[] = {
    SIZE_FIELDS,
    {"seed", TFC_F_INT, offsetof(crop_resize_args, seed), TFC_NO_DEFAULT, 0, 2147483647, NULL,
     "mixed into the run's seed for this layer's windows (none or 0: the run's alone)"},
    TFC_DATA_FORMAT_FIELD(crop_resize_args, data_format),
    {NULL}};

/* Keras's crop_to_aspect_ratio window of an h x w image for a th x tw output (in double, as
 * its Python floats): the rows int(w th / tw) clamped to [1, h], the columns likewise,
 * centred (start int((h - rows) / 2)). */
static void aspect_window(int h, int w, int th, int tw, int *rows, int *cols, int *r0, int *c0)
{
    *rows = (int)((double)w * th / tw), *cols = (int)((double)h * tw / th);
    *rows = *rows < h ? (*rows > 1 ? *rows : 1) : h;
    *cols = *cols < w ? (*cols > 1 ? *cols : 1) : w;
    *r0 = (int)((double)(h - *rows) / 2), *c0 = (int)((double)(w - *cols) / 2);
}

/* The common checks and the output shape (height, width, channels). */
static tfc_status crop_resize_shape(tfc_layer *l, tfc_error *err)
{
    const crop_resize_args *a = l->args;
    if (l->in_dtype[0] != TFC_F32)
        return tfc_layer_error(err, l, "takes float32 input, not token ids");
    if (tfc_layer_need_image(l, err)) return TFC_ERR_CONFIG;
    l->out_shape = tfc_shape_make(3, (int64_t[]){a->height, a->width, l->in_shape[0].dim[2]});
    return TFC_OK;
}

/* The centred aspect-ratio window as the view. */
static void set_aspect_view(crop_resize_args *a, int h, int w)
{
    int r0, c0;
    aspect_window(h, w, a->height, a->width, &a->vh, &a->vw, &r0, &c0);
    a->top = -r0, a->left = -c0;
}

static tfc_status resizing_build(tfc_layer *l, tfc_error *err)
{
    crop_resize_args *a = l->args;
    if (a->interpolation > 1)
        return tfc_layer_error(err, l, "interpolation: %s is not supported (bilinear or "
                               "nearest)", interpolation_names[a->interpolation]);
    if (a->crop_to_aspect_ratio && a->pad_to_aspect_ratio)
        return tfc_layer_error(err, l, "only one of pad_to_aspect_ratio and "
                               "crop_to_aspect_ratio can be true");
    if (crop_resize_shape(l, err)) return TFC_ERR_CONFIG;
    const int h = (int)l->in_shape[0].dim[0], w = (int)l->in_shape[0].dim[1];
    a->vh = h, a->vw = w, a->top = a->left = 0;
    if (a->crop_to_aspect_ratio) {
        set_aspect_view(a, h, w);
    } else if (a->pad_to_aspect_ratio) {
        /* Keras pads int((padded - h) / 2) on both sides of the one axis that needs it */
        const int ph = (int)((double)w * a->height / a->width),
                  pw = (int)((double)h * a->width / a->height);
        const int r0 = ph > h ? (int)((double)(ph - h) / 2) : 0,
                  c0 = pw > w ? (int)((double)(pw - w) / 2) : 0;
        if (r0 > 0) a->vh = h + 2 * r0, a->top = r0;
        else if (c0 > 0) a->vw = w + 2 * c0, a->left = c0;
    }
    /* jax.image.resize ignores antialias for nearest, and a low-pass filter of scale 1 (no
     * axis shrinks) is the plain one */
    if (a->antialias && a->interpolation == 0 && (a->height < a->vh || a->width < a->vw))
        return tfc_layer_error(err, l, "antialias: true is not supported where the image "
                               "shrinks (%dx%d to %dx%d): antialias: false", a->vh, a->vw,
                               a->height, a->width);
    return TFC_OK;
}

static tfc_status center_crop_build(tfc_layer *l, tfc_error *err)
{
    crop_resize_args *a = l->args;
    if (crop_resize_shape(l, err)) return TFC_ERR_CONFIG;
    const int h = (int)l->in_shape[0].dim[0], w = (int)l->in_shape[0].dim[1];
    if (h >= a->height && w >= a->width) {
        a->vh = a->height, a->vw = a->width;
        a->top = -((h - a->height) / 2), a->left = -((w - a->width) / 2);
    } else {
        set_aspect_view(a, h, w);
    }
    return TFC_OK;
}

static tfc_status random_crop_build(tfc_layer *l, tfc_error *err)
{
    crop_resize_args *a = l->args;
    if (crop_resize_shape(l, err)) return TFC_ERR_CONFIG;
    const int h = (int)l->in_shape[0].dim[0], w = (int)l->in_shape[0].dim[1];
    a->random_crop = 1;
    set_aspect_view(a, h, w);
    a->train_vh = a->height, a->train_vw = a->width;
    a->train_random = h > a->height && w > a->width;
    if (!a->train_random) {
        /* Keras's slice [r0, r0 + height) x [c0, c0 + width) of the aspect window's corner,
         * cut short by the image's edge, then resized */
        a->train_top = a->top, a->train_left = a->left;
        if (a->train_vh > h + a->top) a->train_vh = h + a->top;
        if (a->train_vw > w + a->left) a->train_vw = w + a->left;
    }
    return TFC_OK;
}

static tfc_crop_resize_desc crop_resize_desc(const tfc_layer *l, const tfc_exec *ex)
{
    const crop_resize_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    tfc_crop_resize_desc d = {.n = ex->batch, .h = (int)in->dim[0], .w = (int)in->dim[1],
                              .c = (int)in->dim[2], .oh = a->height, .ow = a->width,
                              .vh = a->vh, .vw = a->vw, .top = a->top, .left = a->left,
                              .nearest = a->interpolation == 1,
                              .fill_value = (float)a->fill_value};
    if (a->random_crop && ex->training) {
        d.vh = a->train_vh, d.vw = a->train_vw, d.top = a->train_top, d.left = a->train_left;
        d.random = a->train_random;
        d.key = a->seed ? tfc_rng_key(l->rng_key, (uint64_t)a->seed) : l->rng_key;
        d.step = ex->step;
    }
    return d;
}

static void crop_resize_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    tfc_crop_resize_desc d = crop_resize_desc(l, ex);
    ex->be->ops->crop_resize_forward(ex->be, &d, x[0], y);
}

static void crop_resize_backward(tfc_layer *l, tfc_exec *ex, const void *const *x,
                                 const float *y, const float *dy, float *const *dx)
{
    tfc_crop_resize_desc d = crop_resize_desc(l, ex);
    if (dx[0]) ex->be->ops->crop_resize_backward(ex->be, &d, dy, dx[0]);
}

static const char *const *crop_resize_needs(const tfc_layer *l)
{
    static const char *const ops[] = {"crop_resize_forward", "crop_resize_backward", NULL};
    return ops;
}

tfc_crop_resize_desc tfc_layer_crop_resize(const tfc_layer *l)
{
    const tfc_exec ex = {.batch = 1};
    return crop_resize_desc(l, &ex);
}

#define CROP_RESIZE_OPS(var, name, fields, build_fn)                                           \
    const tfc_layer_ops var = {                                                                 \
        .type = name, .schema = fields, .args_size = sizeof(crop_resize_args),                  \
        .min_inputs = 1, .max_inputs = 1, .build = build_fn,                                    \
        .forward = crop_resize_forward, .backward = crop_resize_backward,                       \
        .needs = crop_resize_needs,                                                             \
    }

CROP_RESIZE_OPS(tfc_resizing_ops, "Resizing", resizing_fields, resizing_build);
CROP_RESIZE_OPS(tfc_center_crop_ops, "CenterCrop", center_crop_fields, center_crop_build);
CROP_RESIZE_OPS(tfc_random_crop_ops, "RandomCrop", random_crop_fields, random_crop_build);
