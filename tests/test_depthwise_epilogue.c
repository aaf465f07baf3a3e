/* DepthwiseConv2D in the inference chains (issues 42, 44): the CPU's depthwise_forward with
 * its epilogue (normalisation, residual, activation, each row finished while in cache) gives
 * the bits of the unfused ops in sequence, under every instruction set, on 1, 2 and 3
 * threads; a small model's depthwise chains (a residual, a pooling) give the bits of its
 * layers one by one; fashion_mobilenet's five depthwise layers each start a chain
 * (depthwise -> BN -> relu6), and its output equals the one with TFC_FUSE=0. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/cpu_internal.h"
#include "gradcheck.h"
#include "graph/model.h"
#include "graph/model_internal.h"
#include "testutil.h"

static float *falloc(int64_t n)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    return p;
}

/* A depthwise desc of n images h x h x c, a k x k kernel, multiplier m, stride s, SAME
 * padding (TensorFlow's: the extra row and column after). */
static tfc_conv_desc desc(int n, int h, int c, int k, int m, int s)
{
    tfc_conv_desc d = {.n = n, .h = h, .w = h, .c = c, .kh = k, .kw = k, .f = c * m, .sh = s,
                       .sw = s, .dh = 1, .dw = 1};
    d.oh = d.ow = (h + s - 1) / s;
    int total = (d.oh - 1) * s + k - h;
    d.pad_top = d.pad_left = total > 0 ? total / 2 : 0;
    return d;
}

/* One epilogue of the op: with bias, bn, residual (each 0 or 1) and act. */
typedef struct epilogue {
    int bias, bn, residual;
    tfc_act act;
} epilogue;

/* The inputs of a case: x, w, bias, residual, and gamma, beta, mean, var in one block. */
typedef struct inputs {
    float *x, *w, *b, *r, *bnp;
    tfc_bn_params bn;
} inputs;

static inputs make_inputs(const tfc_conv_desc *d, unsigned seed)
{
    const int64_t nx = (int64_t)d->n * d->h * d->w * d->c;
    const int64_t ny = (int64_t)d->n * d->oh * d->ow * d->f;
    inputs in = {.x = falloc(nx), .w = falloc((int64_t)d->kh * d->kw * d->f),
                 .b = falloc(d->f), .r = falloc(ny), .bnp = falloc(4 * (int64_t)d->f)};
    tfc_test_fill(in.x, nx, -1, 1, seed);
    tfc_test_fill(in.w, (int64_t)d->kh * d->kw * d->f, -1, 1, seed + 1);
    tfc_test_fill(in.b, d->f, -1, 1, seed + 2);
    tfc_test_fill(in.r, ny, -3, 3, seed + 3);
    tfc_test_fill(in.bnp, 3 * (int64_t)d->f, -2, 2, seed + 4); /* gamma, beta, mean */
    tfc_test_fill(in.bnp + 3 * d->f, d->f, 0.1f, 2, seed + 5);  /* var */
    in.bn = (tfc_bn_params){in.bnp, in.bnp + d->f, in.bnp + 2 * d->f, in.bnp + 3 * d->f, 1e-3f};
    return in;
}

static void free_inputs(inputs *in)
{
    free(in->x), free(in->w), free(in->b), free(in->r), free(in->bnp);
}

/* depthwise_forward with epilogue e on a CPU backend of `threads` into y: fused (one op) or
 * not (depthwise_forward alone, then bn_forward_infer, axpy of the residual, act_forward). */
static void run(const tfc_conv_desc *d, const inputs *in, epilogue e, int threads, int fused,
                float *y)
{
    tfc_backend *be = tfc_cpu_backend_create(threads);
    const int64_t rows = (int64_t)d->n * d->oh * d->ow;
    float *ws = falloc((int64_t)be->ops->depthwise_workspace(be, d) / 4 + 1);
    const float *bias = e.bias ? in->b : NULL, *res = e.residual ? in->r : NULL;
    const tfc_bn_params *bn = e.bn ? &in->bn : NULL;
    if (fused) {
        be->ops->depthwise_forward(be, d, in->x, in->w, bias, bn, res, e.act, y, ws);
    } else {
        be->ops->depthwise_forward(be, d, in->x, in->w, bias, NULL, NULL, TFC_ACT_LINEAR, y,
                                   NULL);
        if (bn)
            be->ops->bn_forward_infer(be, rows, d->f, y, bn->gamma, bn->beta, bn->mean, bn->var,
                                      bn->eps, y);
        if (res) be->ops->axpy(be, rows * d->f, 1.0f, res, y);
        if (e.act != TFC_ACT_LINEAR) be->ops->act_forward(be, e.act, rows * d->f, d->f, y, y);
    }
    free(ws);
    tfc_backend_free(be);
}

/* Strides 1 and 2, multipliers 1, 2 and 3, a 5x5 kernel, images large enough to split among
 * threads; each epilogue's fused result on 1, 2 and 3 threads (their teams forced, however
 * busy the machine) equals the unfused sequence's on one thread, bit for bit (the contract:
 * each step rounds as its own op). */
static void epilogue_cases(void)
{
    const tfc_conv_desc ds[] = {desc(4, 14, 16, 3, 1, 1), desc(4, 14, 16, 3, 1, 2),
                                desc(3, 13, 8, 3, 2, 1),  desc(3, 13, 8, 3, 2, 2),
                                desc(2, 9, 5, 5, 3, 2),   desc(1, 7, 40, 3, 1, 1)};
    const epilogue es[] = {{0, 1, 1, TFC_ACT_RELU6},  {1, 1, 1, TFC_ACT_RELU6},
                           {0, 1, 0, TFC_ACT_RELU6},  {1, 0, 1, TFC_ACT_LINEAR},
                           {0, 1, 1, TFC_ACT_LINEAR}, {1, 1, 0, TFC_ACT_HARD_SILU},
                           {0, 1, 1, TFC_ACT_SOFTMAX}};
    tfc_cpu_team_force(3);
    for (size_t t = 0; t < sizeof ds / sizeof *ds; t++) {
        const tfc_conv_desc *d = &ds[t];
        const int64_t ny = (int64_t)d->n * d->oh * d->ow * d->f;
        inputs in = make_inputs(d, 7 + 10 * (unsigned)t);
        float *want = falloc(ny), *got = falloc(ny);
        for (size_t k = 0; k < sizeof es / sizeof *es; k++) {
            run(d, &in, es[k], 1, 0, want);
            for (int threads = 1; threads <= 3; threads++) {
                run(d, &in, es[k], threads, 1, got);
                double worst = 0;
                for (int64_t i = 0; i < ny; i++)
                    worst = fmax(worst, fabs(got[i] - want[i]));
                int same = !memcmp(got, want, (size_t)ny * sizeof(float));
                if (!same)
                    fprintf(stderr, "\ncase %zu epilogue %zu on %d threads: off by %.3g\n", t,
                            k, threads, worst);
                CU_ASSERT(same);
            }
        }
        free(want), free(got);
        free_inputs(&in);
    }
    tfc_cpu_team_force(0);
}

/* The cases under each instruction set this CPU runs (cpu_depthwise.c's loops). */
static void test_epilogue_values(void)
{
    for (int isa = 2; isa >= 0; isa--)
        if (tfc_cpu_depthwise_isa(isa)) epilogue_cases();
    tfc_cpu_depthwise_isa(-1);
}

/* A model of depthwise chains bound for inference for n examples on 2 threads, with chains
 * or with TFC_FUSE=0, random normalisation statistics; its output for fixed inputs into out.
 * The chains: d1 -> b1 -> a1 (+ c0) -> relu6, d2 with its own relu -> max pooling, d3 ->
 * b3 -> tanh. */
static void small_output(int fuse, int n, float *out)
{
    static const char yaml[] =
        "name: dwchains\n"
        "input: {shape: [10, 10, 6]}\n"
        "layers:\n"
        "  - Conv2D: {name: c0, filters: 12, kernel_size: 1}\n"
        "  - DepthwiseConv2D: {name: d1, kernel_size: 3, padding: same}\n"
        "  - BatchNormalization: {name: b1}\n"
        "  - Add: {name: a1, inputs: [b1, c0]}\n"
        "  - Activation: {name: r1, activation: relu6}\n"
        "  - DepthwiseConv2D: {name: d2, kernel_size: 3, strides: 2, padding: same,\n"
        "                      depth_multiplier: 2, activation: relu}\n"
        "  - MaxPooling2D: {name: p2, pool_size: 2}\n"
        "  - DepthwiseConv2D: {name: d3, kernel_size: 3, padding: same, use_bias: false}\n"
        "  - BatchNormalization: {name: b3}\n"
        "  - Activation: {name: r3, activation: tanh}\n"
        "  - Flatten: {}\n"
        "  - Dense: {units: 5, activation: softmax}\n"
        "loss: sparse_categorical_crossentropy\n";
    if (!fuse) setenv("TFC_FUSE", "0", 1);
    tfc_error e;
    tfc_error_clear(&e);
    tfc_model *m = tfc_test_model(yaml);
    tfc_backend *be = tfc_cpu_backend_create(2);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind_inference(m, be, n, &e), TFC_OK);
    if (!fuse) unsetenv("TFC_FUSE");
    CU_ASSERT_EQUAL_FATAL(tfc_model_init_weights(m, 3, &e), TFC_OK);
    const tfc_bound *b = m->bound;
    if (fuse) {
        CU_ASSERT(b[1].chain_bn == 2 && b[1].chain_res == 0 && b[1].chain_end == 4 &&
                  b[1].chain_act == TFC_ACT_RELU6);
        CU_ASSERT(b[5].chain_pool == 6 && b[5].chain_end == 6 && b[5].chain_act == TFC_ACT_RELU);
        CU_ASSERT(b[7].chain_bn == 8 && b[7].chain_end == 9 && b[7].chain_act == TFC_ACT_TANH);
    }
    for (int i = 0; i < tfc_model_nlayers(m); i++) {
        tfc_layer *l = tfc_model_layer(m, i);
        if (strcmp(l->ops->type, "BatchNormalization")) continue;
        for (int p = 0; p < l->nparams; p++) {
            tfc_param *pr = &l->params[p];
            float *h = falloc(pr->numel);
            int var = !strcmp(pr->name, "moving_variance");
            tfc_test_fill(h, pr->numel, var ? 0.1f : -1.0f, var ? 2.0f : 1.0f, 30 + 4 * i + p);
            tfc_model_param_upload(m, pr, h);
            free(h);
        }
    }
    float *x = falloc(n * 10 * 10 * 6);
    tfc_test_fill(x, n * 10 * 10 * 6, -1, 1, 19);
    CU_ASSERT_EQUAL(tfc_model_forward(m, x, n, 0, 0, 0, &e), TFC_OK);
    tfc_model_get_output(m, out);
    free(x);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* The chains above (a residual, a pooling, the layer's own activation) give the bits of the
 * layers one by one. */
static void test_small_chains(void)
{
    float fused[4 * 5], plain[4 * 5];
    small_output(1, 4, fused);
    small_output(0, 4, plain);
    CU_ASSERT(!memcmp(fused, plain, sizeof fused));
}

/* fashion_mobilenet bound for inference on 2 threads for 6 examples, with chains or with
 * TFC_FUSE=0; its output for fixed inputs into out. With chains: each of its five
 * DepthwiseConv2D layers starts one through its BatchNormalization to the relu6 Activation
 * after it (whose output the next layer reads, or b4's and b5's squeeze-and-excitation's
 * pooling and Multiply both). */
static void mobilenet_output(int fuse, float *out)
{
    const int n = 6;
    if (!fuse) setenv("TFC_FUSE", "0", 1);
    tfc_error e;
    tfc_error_clear(&e);
    tfc_model *m = tfc_model_load("model_zoo/fashion_mobilenet/model.yaml", &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    tfc_backend *be = tfc_cpu_backend_create(2);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind_inference(m, be, n, &e), TFC_OK);
    if (!fuse) unsetenv("TFC_FUSE");
    CU_ASSERT_EQUAL_FATAL(tfc_model_load_weights(
                              m, "model_zoo/fashion_mobilenet/fashion_mobilenet.safetensors",
                              NULL, &e), TFC_OK);
    int dw = 0, chained = 0;
    for (int i = 0; i < tfc_model_nlayers(m); i++) {
        const tfc_layer *l = tfc_model_layer(m, i);
        const tfc_bound *b = &m->bound[i];
        if (strcmp(l->ops->type, "DepthwiseConv2D")) continue;
        dw++;
        chained += b->chain_bn == i + 1 && b->chain_end == i + 2 &&
                   b->chain_act == TFC_ACT_RELU6 && b->chain_res < 0 && b->chain_pool < 0;
    }
    CU_ASSERT_EQUAL(dw, 5);
    CU_ASSERT_EQUAL(chained, fuse ? 5 : 0);
    float *x = falloc(n * 28 * 28);
    tfc_test_fill(x, n * 28 * 28, 0, 1, 17);
    CU_ASSERT_EQUAL(tfc_model_forward(m, x, n, 0, 0, 0, &e), TFC_OK);
    tfc_model_get_output(m, out);
    free(x);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* The chains' output against TFC_FUSE=0's: the depthwise chains round as the unfused ops;
 * the 1x1 convolutions' chains run oneDNN with post-ops, whose sums may round otherwise:
 * within 1e-6 of the largest probability. */
static void test_mobilenet_chains(void)
{
    float fused[6 * 10], plain[6 * 10];
    mobilenet_output(1, fused);
    mobilenet_output(0, plain);
    double worst = 0;
    for (int i = 0; i < 6 * 10; i++) worst = fmax(worst, fabs(fused[i] - plain[i]));
    if (worst > 1e-6) fprintf(stderr, "\nfashion_mobilenet: chains off by %.3g\n", worst);
    CU_ASSERT(worst <= 1e-6);
}

TFC_TEST_MAIN("depthwise_epilogue", {"epilogue_values", test_epilogue_values},
              {"small_chains", test_small_chains}, {"mobilenet_chains", test_mobilenet_chains})
