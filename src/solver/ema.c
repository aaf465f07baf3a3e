/* `ema: {decay, warmup}`: an exponential moving average of the parameter arena (trainable
 * weights and BatchNormalization's moving statistics), as Keras's optimizer use_ema: after
 * each update avg = d avg + (1 - d) w, the first update copying w; warmup uses TF's
 * ExponentialMovingAverage(num_updates) rate d = min(decay, (1 + k) / (10 + k)). Test
 * passes, best.safetensors and final.safetensors see the average (swapped in and out);
 * snapshots keep it as the tensor "ema/params". */
#include <stdlib.h>
#include <string.h>

#include "solver/internal.h"

typedef struct ema_args {
    double decay;
    int warmup;
} ema_args;

const tfc_field tfc_ema_fields[] = {
    {"decay", TFC_F_FLOAT, offsetof(ema_args, decay), "0.999", 0, 1, NULL,
     "avg = decay * avg + (1 - decay) * w after each update (Keras ema_momentum)"},
    {"warmup", TFC_F_BOOL, offsetof(ema_args, warmup), "true", 0, 1, NULL,
     "decay_k = min(decay, (1 + k) / (10 + k)) at update k (TF's num_updates)"},
    {NULL}};

tfc_status tfc_ema_config_read(const tfc_node *node, tfc_ema_config *out, tfc_error *err)
{
    memset(out, 0, sizeof *out);
    if (!node || tfc_node_is_null(node)) return TFC_OK;
    if (node->kind != TFC_NODE_MAP)
        return tfc_node_error(err, TFC_ERR_CONFIG, node, "ema",
                              "expected a mapping such as {decay: 0.999}");
    ema_args a;
    if (tfc_schema_apply(tfc_ema_fields, node, "ema", &a, err)) return TFC_ERR_CONFIG;
    out->enabled = 1;
    out->decay = a.decay;
    out->warmup = a.warmup;
    return TFC_OK;
}

double tfc_ema_rate(const tfc_ema_config *c, int64_t k)
{
    if (k == 0) return 0.0; /* Keras: the first update copies the weights */
    double warm = (1.0 + (double)k) / (10.0 + (double)k);
    return c->warmup && warm < c->decay ? warm : c->decay;
}

tfc_status tfc_ema_init(tfc_ema *e, const tfc_ema_config *c, tfc_backend *be, int64_t n,
                        tfc_error *err)
{
    memset(e, 0, sizeof *e);
    e->cfg = *c;
    if (!c->enabled) return TFC_OK;
    e->be = be;
    e->n = n;
    e->avg = be->ops->alloc(be, (size_t)n * sizeof(float));
    e->backup = be->ops->alloc(be, (size_t)n * sizeof(float));
    if (!e->avg || !e->backup)
        return tfc_error_set(err, TFC_ERR_NOMEM, "cannot allocate 2 x %lld floats for ema",
                             (long long)n);
    return TFC_OK;
}

void tfc_ema_update(tfc_ema *e, const float *params, int64_t k)
{
    if (!e->avg) return;
    double d = e->started ? tfc_ema_rate(&e->cfg, k) : 0.0;
    if (d == 0.0) {
        e->be->ops->copy(e->be, e->avg, params, (size_t)e->n * sizeof(float));
    } else {
        e->be->ops->scale(e->be, e->n, (float)d, e->avg);
        e->be->ops->axpy(e->be, e->n, (float)(1.0 - d), params, e->avg);
    }
    e->started = 1;
}

void tfc_ema_swap_in(tfc_ema *e, float *params)
{
    if (!e->avg || !e->started || e->swapped) return;
    e->be->ops->copy(e->be, e->backup, params, (size_t)e->n * sizeof(float));
    e->be->ops->copy(e->be, params, e->avg, (size_t)e->n * sizeof(float));
    e->swapped = 1;
}

void tfc_ema_swap_out(tfc_ema *e, float *params)
{
    if (!e->swapped) return;
    e->be->ops->copy(e->be, params, e->backup, (size_t)e->n * sizeof(float));
    e->swapped = 0;
}

void tfc_ema_release(tfc_ema *e)
{
    if (e->avg) e->be->ops->free(e->be, e->avg);
    if (e->backup) e->be->ops->free(e->be, e->backup);
    memset(e, 0, sizeof *e);
}
