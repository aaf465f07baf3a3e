/* What MultiHeadAttention and GroupQueryAttention share (layers/layer.h): the checks of
 * flash_attention and of one mask over query and keys, the backend's attention desc, and the
 * projections out = x W + b with their gradients. */
#include "layers/layer.h"

#include <math.h>
#include <stdio.h>

#include "core/rng.h"

/* value's and key's inputs: value defaults to query, key to value */
static int value_input(const tfc_layer *l) { return l->ninputs > 1 ? 1 : 0; }
static int key_input(const tfc_layer *l) { return l->ninputs > 2 ? 2 : value_input(l); }

tfc_status tfc_attention_heads_check(tfc_layer *l, const tfc_node *flash_attention,
                                     double dropout, tfc_error *err)
{
    if (flash_attention) { /* null is absent (the schema's default) */
        char path[112];
        int on;
        snprintf(path, sizeof path, "layers[%d].%s.flash_attention", l->index, l->ops->type);
        if (tfc_node_bool(flash_attention, path, &on, err)) return TFC_ERR_CONFIG;
        if (on && dropout > 0)
            return tfc_layer_error(err, l, "flash_attention: true does not take dropout > 0 "
                                           "(as Keras)");
    }
    /* Keras: the output keeps the query's mask; the value's and key's mask the keys */
    l->mask_out = (l->mask_inputs & 1u) != 0;
    const int vi = value_input(l), ki = key_input(l);
    const int64_t tq = l->in_shape[0].dim[0], tk = l->in_shape[vi].dim[0];
    if ((l->mask_inputs & 1u) && (l->mask_inputs & (1u << vi | 1u << ki)) && tq != tk)
        return tfc_layer_error(err, l, "query (%lld steps) and value (%lld steps) carry the one "
                                       "sequence mask but differ in length",
                               (long long)tq, (long long)tk);
    return TFC_OK;
}

tfc_attn_desc tfc_attention_desc(const tfc_layer *l, const tfc_exec *ex, int heads, int dk,
                                 int dv, int causal, int window, double dropout, int seed)
{
    const int vi = value_input(l), ki = key_input(l);
    tfc_attn_desc d = {.n = ex->batch, .heads = heads, .tq = (int)l->in_shape[0].dim[0],
                       .tk = (int)l->in_shape[vi].dim[0], .dk = dk, .dv = dv,
                       .causal = causal, .window = window, .uniform = dropout == 0,
                       .scale = (float)(1.0 / sqrt((double)dk))};
    d.qmask = (l->mask_inputs & 1u) ? l->mask : NULL;
    d.kmask = (l->mask_inputs & (1u << vi | 1u << ki)) ? l->mask : NULL;
    if (ex->training && dropout > 0) {
        d.rate = (float)dropout;
        d.key = seed ? tfc_rng_key(l->rng_key, (uint64_t)seed) : l->rng_key;
        d.step = ex->step;
    }
    return d;
}

void tfc_proj(tfc_exec *ex, int64_t rows, int in, const void *x,
                           const tfc_param *w, const tfc_param *b, int width, float *out)
{
    ex->be->ops->gemm_weights(ex->be, 0, 0, (int)rows, width, in, 1.f, x, in, w->data, width,
                              0.f, out, width);
    if (b) ex->be->ops->bias_add(ex->be, rows, width, b->data, out);
}

void tfc_proj_backward(tfc_exec *ex, int64_t rows, int in, const void *x,
                                    tfc_param *w, tfc_param *b, int width, const float *dout,
                                    float *dx)
{
    const tfc_backend_ops *op = ex->be->ops;
    op->gemm(ex->be, 1, 0, in, width, (int)rows, 1.f, x, in, dout, width, 1.f, w->grad, width);
    if (b) op->bias_grad(ex->be, rows, width, dout, b->grad);
    if (dx)
        op->gemm(ex->be, 0, 1, (int)rows, in, width, 1.f, dout, width, w->data, width, 1.f, dx,
                 in);
}
