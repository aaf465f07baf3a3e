/* What a pass through a layer costs in floating-point operations, for tfc-summary's table:
 * the matrix products counted exactly (two per multiply-add), everything else one per
 * output element. */
#include "graph/model_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const tfc_param *find_param(const tfc_layer *l, const char *name)
{
    for (int p = 0; p < l->nparams; p++)
        if (!strcmp(l->params[p].name, name)) return &l->params[p];
    return NULL;
}

/* The kernel beside recurrent kernel r: `kernel` for `recurrent_kernel`, and for a
 * Bidirectional's `forward_lstm/recurrent_kernel`, `forward_lstm/kernel` */
static const tfc_param *kernel_of(const tfc_layer *l, const tfc_param *r)
{
    char name[sizeof r->name];
    size_t prefix = strlen(r->name) - strlen("recurrent_kernel");
    snprintf(name, sizeof name, "%.*skernel", (int)prefix, r->name);
    return find_param(l, name);
}

static int is_recurrent(const tfc_param *p)
{
    size_t n = strlen(p->name), s = strlen("recurrent_kernel");
    return n >= s && !strcmp(p->name + n - s, "recurrent_kernel") &&
           (n == s || p->name[n - s - 1] == '/');
}

/* runs: the step's backward plan (tfc_model_backward_plan) */
static void layer_flops(const tfc_model *m, int i, const int *runs, int64_t *forward,
                        int64_t *backward)
{
    const tfc_layer *l = &m->layers[i];
    /* a SpectralNormalization's: its inner layer's (the power iteration, a few passes over
     * the kernel a step, not counted) */
    if (!strcmp(l->ops->type, "SpectralNormalization")) l = tfc_spectral_normalization_inner(l);
    int64_t out = tfc_layer_out_numel(l);
    /* no input gradient to compute: the model input, or a layer whose backward is skipped */
    int reads_input = 0;
    for (int j = 0; j < l->ninputs; j++) reads_input |= l->inputs[j] < 0 || !runs[l->inputs[j]];
    const tfc_param *k = find_param(l, "kernel");
    for (int p = 0; p < l->nparams && !k; p++) { /* a TimeDistributed's inner/kernel */
        const char *slash = strrchr(l->params[p].name, '/');
        if (slash && !strcmp(slash, "/kernel") && !strcmp(l->ops->type, "TimeDistributed"))
            k = &l->params[p];
    }
    const tfc_param *wq = find_param(l, "query/kernel");
    *forward = *backward = 0;
    if (wq) { /* MultiHeadAttention: the four projections, then per head and (query, key)
               * pair a score and a weighted value (a causal mask skips about half of them:
               * not counted); backward recomputes the scores and dout . v twice (for dk and
               * dv, then for dq) besides dq, dk and dv themselves */
        int64_t tq = l->in_shape[0].dim[0], tk = l->in_shape[l->ninputs > 1].dim[0];
        int64_t heads = wq->shape.dim[1], kd = wq->shape.dim[2];
        const tfc_param *wv = find_param(l, "value/kernel");
        int64_t vd = wv->shape.dim[2];
        int64_t proj = tq * wq->numel + tk * find_param(l, "key/kernel")->numel + tk * wv->numel +
                       tq * find_param(l, "attention_output/kernel")->numel;
        *forward = 2 * proj + 2 * heads * tq * tk * (kd + vd);
        *backward = 4 * proj + 2 * heads * tq * tk * (4 * kd + 3 * vd);
        return;
    }
    int recurrent = 0;
    for (int p = 0; p < l->nparams; p++) {
        const tfc_param *r = &l->params[p], *kr = is_recurrent(r) ? kernel_of(l, r) : NULL;
        if (!kr) continue;
        /* LSTM, GRU (each direction of a Bidirectional): per step x·W and h·U (all gates),
         * then the gate arithmetic */
        int64_t T = l->in_shape[0].ndim > 1 ? l->in_shape[0].dim[0] : 1;
        int64_t gates = T * r->shape.dim[1];
        *forward += 2 * T * (kr->numel + r->numel) + gates;
        /* dW, dU and dh through U at every step; dx through W unless x is the model input */
        *backward += 2 * T * (kr->numel + 2 * r->numel) + (reads_input ? 0 : 2 * T * kr->numel) +
                     gates;
        recurrent = 1;
    }
    if (recurrent) return;
    const tfc_param *dk = find_param(l, "depthwise_kernel");
    if (dk) { /* SeparableConv2D: both kernels once per output pixel; backward their
               * gradients, dz through the pointwise kernel, dx through the depthwise one */
        int64_t pixels = out / l->out_shape.dim[l->out_shape.ndim - 1];
        int64_t dw = dk->numel * pixels, pw = find_param(l, "pointwise_kernel")->numel * pixels;
        *forward = 2 * (dw + pw);
        *backward = 2 * (dw + pw) + 2 * pw + (reads_input ? 0 : 2 * dw);
        return;
    }
    if (k) {
        /* Dense (per position of a sequence), Conv2D (per output pixel): the kernel once per
         * output row of `units`; DepthwiseConv2D [kh, kw, c, m] (DepthwiseConv1D [k, c, m]):
         * kh kw per output value; Conv2DTranspose, Conv1DTranspose, Conv3DTranspose: the kernel
         * once per input pixel (voxel) */
        const tfc_shape *in = &l->in_shape[0];
        int64_t units = k->shape.dim[k->shape.ndim - 1];
        if (!strncmp(l->ops->type, "DepthwiseConv", 13)) units *= k->shape.dim[k->shape.ndim - 2];
        int64_t macs = k->numel * (units ? out / units : 0);
        if (strstr(l->ops->type, "Transpose"))
            macs = k->numel * (tfc_shape_numel(in) / in->dim[in->ndim - 1]);
        if (!strcmp(l->ops->type, "EinsumDense")) /* each output value sums over the kernel's
                                                    * contracted axes, whose product its
                                                    * initializer holds as fan_in */
            macs = out * (int64_t)k->init.fan_in;
        *forward = 2 * macs;
        *backward = 2 * macs + (reads_input ? 0 : 2 * macs);
    } else {
        *forward = out;
        *backward = out;
    }
}

void tfc_model_layer_flops(const tfc_model *m, int i, int64_t *forward, int64_t *backward)
{
    int *runs = malloc((size_t)m->nlayers * sizeof *runs);
    if (!runs) {
        *forward = *backward = 0;
        return;
    }
    tfc_model_backward_plan(m, 0, runs);
    layer_flops(m, i, runs, forward, backward);
    if (!runs[i]) *backward = 0; /* the step skips it */
    free(runs);
}

#define PASS_MAX 256
#define PASS_MIN 8
#define PASS_CACHE_BYTES ((double)(8 << 20))
/* FLOPs per byte of layer output under which a model counts as memory-bound: fashion_
 * mobilenet has 4.1, the other zoo models 18 (fashion_cnn_bn, whose BatchNormalization and
 * ReLU outputs count though they are folded at inference) to 171 */
#define MEMORY_BOUND_FLOPS_PER_BYTE 8.0

/* The bytes of one example's tensor of shape s (float32 or int32), or -1 for a variable axis. */
static double example_bytes(const tfc_shape *s)
{
    for (int d = 0; d < s->ndim; d++)
        if (s->dim[d] < 0) return -1;
    return 4.0 * (double)tfc_shape_numel(s);
}

int tfc_model_inference_pass(const tfc_model *m, int cpu)
{
    if (!cpu) return PASS_MAX;
    double flops = 0, bytes = 0, widest = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const tfc_layer *l = &m->layers[i];
        int64_t f, b;
        double out = example_bytes(&l->out_shape), io = out;
        if (out < 0) return PASS_MAX;
        for (int j = 0; j < l->ninputs; j++) {
            double in = example_bytes(&l->in_shape[j]);
            if (in < 0) return PASS_MAX;
            io += in;
        }
        tfc_model_layer_flops(m, i, &f, &b);
        flops += (double)f;
        bytes += out;
        if (io > widest) widest = io;
    }
    if (bytes <= 0 || flops >= MEMORY_BOUND_FLOPS_PER_BYTE * bytes) return PASS_MAX;
    int pass = PASS_MAX;
    while (pass > PASS_MIN && pass * widest > PASS_CACHE_BYTES) pass /= 2;
    return pass;
}
