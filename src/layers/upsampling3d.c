/* UpSampling3D (keras.layers.UpSampling3D(size=(2, 2, 2))): each volume (depth, height,
 * width, channels) enlarged by integer factors, every cell repeated (Keras's ops.repeat
 * along the three axes):
 *   y[d, i, j] = x[d / sd, i / sh, j / sw]
 * Two nearest-neighbour passes of the backend's upsample op: the depth first, each example an
 * image of D rows of one (H W C)-float pixel, into the workspace; then each of the D sd depth
 * slices an (H, W, C) image enlarged by (sh, sw) into y. Backward: the two passes' gradients
 * in reverse order through the zeroed workspace (one pass where sd is 1). No weights; Keras's
 * layer does not support masking: the mask stops here. CPU-first (cpu_first) until make
 * test-gpu has run it. */
#include "layers/layer.h"

typedef struct upsampling3d_args {
    tfc_int_list size;
    int data_format;
} upsampling3d_args;

static const tfc_field upsampling3d_fields[] = {
    {"size", TFC_F_INT_LIST, offsetof(upsampling3d_args, size), "2", 1, 4096, NULL,
     "factors for depth, height and width: an int (all three) or three ints"},
    TFC_DATA_FORMAT_FIELD(upsampling3d_args, data_format),
    {NULL}};

/* size as three factors (an int: the same for all three, as Keras's standardize_tuple) */
static void factors(const tfc_layer *l, int f[3])
{
    const upsampling3d_args *a = l->args;
    for (int k = 0; k < 3; k++) f[k] = a->size.v[a->size.n == 1 ? 0 : k];
}

static tfc_status upsampling3d_build(tfc_layer *l, tfc_error *err)
{
    const upsampling3d_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    char buf[96];
    if (l->in_dtype[0] != TFC_F32 || in->ndim != 4)
        return tfc_layer_error(err, l, "needs a float volume of shape (depth, height, width, "
                               "channels), got %s%s", tfc_shape_str(in, buf, sizeof buf),
                               l->in_dtype[0] != TFC_F32 ? " of token ids" : "");
    if (a->size.n != 1 && a->size.n != 3)
        return tfc_layer_error(err, l, "size: expected an int or three ints [depth, height, "
                               "width], found %d", a->size.n);
    int f[3];
    factors(l, f);
    l->out_shape = tfc_shape_make(4, (int64_t[]){in->dim[0] * f[0], in->dim[1] * f[1],
                                                 in->dim[2] * f[2], in->dim[3]});
    return TFC_OK;
}

static void upsampling3d_plan(tfc_layer *l, tfc_backend *be)
{
    (void)be;
    int f[3];
    factors(l, f);
    /* the depth pass's output, when there is one */
    l->workspace = f[0] > 1 ? (size_t)l->max_batch * (size_t)tfc_shape_numel(&l->in_shape[0]) *
                                  (size_t)f[0] * 4
                            : 0;
}

/* The depth pass (x as n images of D x 1 pixels of H W C floats) and the plane pass (the
 * D sd slices of n examples as (H, W, C) images). */
static void passes(const tfc_layer *l, int n, tfc_resize_desc *depth, tfc_resize_desc *plane)
{
    const tfc_shape *in = &l->in_shape[0];
    int f[3];
    factors(l, f);
    const int64_t hwc = in->dim[1] * in->dim[2] * in->dim[3];
    *depth = (tfc_resize_desc){.n = n, .h = (int)in->dim[0], .w = 1, .c = (int)hwc,
                               .sh = f[0], .sw = 1};
    *plane = (tfc_resize_desc){.n = n * (int)in->dim[0] * f[0], .h = (int)in->dim[1],
                               .w = (int)in->dim[2], .c = (int)in->dim[3], .sh = f[1],
                               .sw = f[2]};
}

static void upsampling3d_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    tfc_resize_desc depth, plane;
    passes(l, ex->batch, &depth, &plane);
    const float *mid = x[0];
    if (depth.sh > 1) {
        ex->be->ops->upsample_forward(ex->be, &depth, x[0], ex->ws);
        mid = ex->ws;
    }
    ex->be->ops->upsample_forward(ex->be, &plane, mid, y);
}

static void upsampling3d_backward(tfc_layer *l, tfc_exec *ex, const void *const *x,
                                  const float *y, const float *dy, float *const *dx)
{
    if (!dx[0]) return;
    tfc_resize_desc depth, plane;
    passes(l, ex->batch, &depth, &plane);
    if (depth.sh == 1) {
        ex->be->ops->upsample_backward(ex->be, &plane, dy, dx[0]);
        return;
    }
    const size_t mid = (size_t)plane.n * (size_t)plane.h * (size_t)plane.w * (size_t)plane.c;
    ex->be->ops->zero(ex->be, ex->ws, mid * 4);
    ex->be->ops->upsample_backward(ex->be, &plane, dy, ex->ws);
    ex->be->ops->upsample_backward(ex->be, &depth, ex->ws, dx[0]);
}

const tfc_layer_ops tfc_up_sampling3d_ops = {
    .type = "UpSampling3D", .schema = upsampling3d_fields,
    .args_size = sizeof(upsampling3d_args), .min_inputs = 1, .max_inputs = 1, .cpu_first = 1,
    .build = upsampling3d_build, .plan = upsampling3d_plan, .forward = upsampling3d_forward,
    .backward = upsampling3d_backward,
};
