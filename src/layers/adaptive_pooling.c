/* AdaptiveMaxPooling1D/2D/3D and AdaptiveAveragePooling1D/2D/3D (keras.layers): pooling to a
 * fixed output_size whatever the input's size, over (steps, channels), (height, width,
 * channels) or (depth, height, width, channels). Along each axis of L cells pooled to n,
 * output cell o covers the bin [floor(o L / n), ceil((o + 1) L / n)) (PyTorch's rule, which
 * Keras 3's gather of two poolings reproduces; core/adaptive_pool.h): bins overlap where L
 * is no multiple of n, and cells repeat where n > L.
 *   max:     y = max over the bin; dx[argmax] += dy, the argmax on ties the cell of the
 *            lowest w, then h, then d (JAX's gradient of Keras's axis-by-axis max)
 *   average: y = mean over the bin; dx[cell] += dy / count
 * All six run on the backend's adaptive_pool ops, the 1-D and 2-D ones as volumes with
 * leading axes of 1. */
#include <stdint.h>

#include "layers/layer.h"

/* output_size: an integer or a list of one (1-D), three (3-D), as Keras takes it; the 2-D
 * layers' an integer or a pair (output_pair) */
typedef struct adaptive_args {
    tfc_int_list output_size;
    int output_pair[2];
    int data_format;
} adaptive_args;

static const tfc_field adaptive_fields[] = {
    {"output_size", TFC_F_INT_LIST, offsetof(adaptive_args, output_size), NULL, 1, 65536, NULL,
     "the output's size along each pooled axis"},
    TFC_DATA_FORMAT_FIELD(adaptive_args, data_format),
    {NULL}};

static const tfc_field adaptive2d_fields[] = {
    {"output_size", TFC_F_INT_PAIR, offsetof(adaptive_args, output_pair), NULL, 1, 65536, NULL,
     "the output's height and width"},
    TFC_DATA_FORMAT_FIELD(adaptive_args, data_format),
    {NULL}};

extern const tfc_layer_ops tfc_adaptive_max_pooling1d_ops, tfc_adaptive_max_pooling2d_ops,
    tfc_adaptive_max_pooling3d_ops, tfc_adaptive_average_pooling2d_ops,
    tfc_adaptive_average_pooling3d_ops;

static int is_max(const tfc_layer *l)
{
    return l->ops == &tfc_adaptive_max_pooling1d_ops || l->ops == &tfc_adaptive_max_pooling2d_ops ||
           l->ops == &tfc_adaptive_max_pooling3d_ops;
}

/* The pooled axes: 1, 2 or 3. */
static int rank_of(const tfc_layer *l)
{
    if (l->ops == &tfc_adaptive_max_pooling3d_ops || l->ops == &tfc_adaptive_average_pooling3d_ops)
        return 3;
    if (l->ops == &tfc_adaptive_max_pooling2d_ops || l->ops == &tfc_adaptive_average_pooling2d_ops)
        return 2;
    return 1;
}

/* The pooling of n examples as a volume: the input's and output's pooled axes last, the
 * leading ones 1. Its shapes are checked by build first. */
static tfc_adaptive_pool_desc adaptive_desc(const tfc_layer *l, int n)
{
    const int k = rank_of(l);
    tfc_adaptive_pool_desc d = {.n = n, .c = (int)l->in_shape[0].dim[k], .is_max = is_max(l),
                                .in = {1, 1, 1}, .out = {1, 1, 1}};
    for (int a = 0; a < k; a++) {
        d.in[3 - k + a] = (int)l->in_shape[0].dim[a];
        d.out[3 - k + a] = (int)l->out_shape.dim[a];
    }
    return d;
}

static tfc_status adaptive_build(tfc_layer *l, tfc_error *err)
{
    static const char *const wants[] = {NULL, "(steps, channels)", "(height, width, channels)",
                                        "(depth, height, width, channels)"};
    const adaptive_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    const int k = rank_of(l);
    char buf[96];
    int size[3];
    if (k == 2) {
        size[0] = a->output_pair[0], size[1] = a->output_pair[1];
    } else if (a->output_size.n != 1 && a->output_size.n != k) {
        return tfc_layer_error(err, l, "output_size: expected an integer or a list of %d, found "
                               "%d values", k, a->output_size.n);
    } else {
        for (int ax = 0; ax < k; ax++) size[ax] = a->output_size.v[a->output_size.n == 1 ? 0 : ax];
    }
    if (in->ndim != k + 1)
        return tfc_layer_error(err, l, "needs an input of shape %s, got %s", wants[k],
                               tfc_shape_str(in, buf, sizeof buf));
    int64_t dims[4], vin = in->dim[k], vout = in->dim[k];
    for (int ax = 0; ax < k; ax++) {
        dims[ax] = size[ax];
        vin *= in->dim[ax], vout *= size[ax];
    }
    dims[k] = in->dim[k];
    if (vin > INT32_MAX || vout > INT32_MAX)
        return tfc_layer_error(err, l, "input %s or its output is too large (more than 2^31 "
                               "values an example)", tfc_shape_str(in, buf, sizeof buf));
    l->out_shape = tfc_shape_make(k + 1, dims);
    /* Max pooling keeps the winners' indices (int32, stored in the float slot). */
    l->saved_floats = is_max(l) ? vout : 0;
    return TFC_OK;
}

static const char *const *adaptive_needs(const tfc_layer *l)
{
    (void)l;
    static const char *const needs[] = {"adaptive_pool_forward", "adaptive_pool_backward", NULL};
    return needs;
}

static void adaptive_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    tfc_adaptive_pool_desc d = adaptive_desc(l, ex->batch);
    /* the winners are kept for backward only */
    ex->be->ops->adaptive_pool_forward(ex->be, &d, x[0], y,
                                       d.is_max && ex->training ? (int32_t *)l->saved : NULL);
}

static void adaptive_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                              const float *dy, float *const *dx)
{
    (void)x, (void)y;
    tfc_adaptive_pool_desc d = adaptive_desc(l, ex->batch);
    if (dx[0])
        ex->be->ops->adaptive_pool_backward(ex->be, &d, dy,
                                            d.is_max ? (const int32_t *)l->saved : NULL, dx[0],
                                            ex->fresh & 1);
}

#define ADAPTIVE_OPS(name, type_name, fields)                                                 \
    const tfc_layer_ops name = {                                                             \
        .type = type_name, .schema = fields, .args_size = sizeof(adaptive_args),             \
        .min_inputs = 1, .max_inputs = 1, .needs = adaptive_needs,                           \
        .build = adaptive_build, .forward = adaptive_forward, .backward = adaptive_backward, \
        .assigns_grads = 1,                                                                  \
    }

ADAPTIVE_OPS(tfc_adaptive_average_pooling1d_ops, "AdaptiveAveragePooling1D", adaptive_fields);
ADAPTIVE_OPS(tfc_adaptive_average_pooling2d_ops, "AdaptiveAveragePooling2D", adaptive2d_fields);
ADAPTIVE_OPS(tfc_adaptive_average_pooling3d_ops, "AdaptiveAveragePooling3D", adaptive_fields);
ADAPTIVE_OPS(tfc_adaptive_max_pooling1d_ops, "AdaptiveMaxPooling1D", adaptive_fields);
ADAPTIVE_OPS(tfc_adaptive_max_pooling2d_ops, "AdaptiveMaxPooling2D", adaptive2d_fields);
ADAPTIVE_OPS(tfc_adaptive_max_pooling3d_ops, "AdaptiveMaxPooling3D", adaptive_fields);
