/* TimeDistributed: Keras 3 parity from the fixtures tests/ref/keras_time_distributed.py wrote
 * (tests/ref/time_distributed/: inference outputs, the input's and weights' gradients of an MSE
 * loss in training mode, BatchNormalization's moving statistics after a training forward, and
 * the weights under Keras's paths both ways), the refusals of what it cannot wrap, and of the
 * GPU for a CPU-first inner layer. Run from the repository's root. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "graph/model.h"
#include "layers/layer.h"
#include "gradcheck.h"
#include "testutil.h"

static float *tensor(const tfc_st_file *f, const char *name, int64_t *n)
{
    const tfc_st_tensor *t = tfc_st_find(f, name);
    if (!t) return NULL;
    float *v = malloc((size_t)t->numel * 4);
    tfc_st_tensor_to_f32(t, v);
    if (n) *n = t->numel;
    return v;
}

/* max |a - b| / max |b| over n values, and the largest |a - b| into *abs_out */
static double rel_diff(const float *a, const float *b, int64_t n, double *abs_out)
{
    double d = 0, m = 0;
    for (int64_t i = 0; i < n; i++) d = fmax(d, fabs(a[i] - b[i])), m = fmax(m, fabs(b[i]));
    if (abs_out) *abs_out = fmax(*abs_out, d);
    return d / (m > 0 ? m : 1);
}

/* One fixture: binds its YAML, loads its weights by name (every parameter must be there),
 * checks that the weights tfc then writes are the fixture's under the same names (what a Keras
 * model loads by name), compares the inference output (the same bits from the inference
 * layout) and, where the fixture has them, the gradients of the MSE
 * loss after a training forward. Returns the worst relative difference. */
static double parity_case(const char *dir, const char *name, double *worst_abs)
{
    char path[256];
    snprintf(path, sizeof path, "tests/ref/%s/%s.safetensors", dir, name);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open(path, &err);
    TFC_ASSERT(f != NULL);
    const char *yaml = tfc_st_meta(f, "yaml");
    tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), name, &err);
    TFC_ASSERT(m != NULL);
    const tfc_st_tensor *xt = tfc_st_find(f, "x");
    const int batch = (int)xt->shape.dim[0];
    int32_t *ids = NULL; /* token inputs */
    if (xt->dtype == TFC_I32) {
        ids = malloc(xt->nbytes);
        memcpy(ids, xt->data, xt->nbytes);
    }
    tfc_backend *be = tfc_cpu_backend_create(2);
    TFC_ASSERT(tfc_model_bind(m, be, batch, &err) == TFC_OK);
    tfc_model_want_input_grad(m, 1);
    tfc_weights_report rep = {0};
    TFC_ASSERT(tfc_model_load_weights(m, path, &rep, &err) == TFC_OK);
    CU_ASSERT(rep.missing == 0 && rep.mismatched == 0 && rep.matched > 0);
    free(rep.text);
    rep.text = NULL;
    int64_t n = 0, nt = 0;
    float *x = ids ? NULL : tensor(f, "x", NULL), *y = tensor(f, "y", &n);
    float *t = tensor(f, "t", &nt);
    const void *in = ids ? (const void *)ids : x;
    float *out = malloc((size_t)n * 4);
    TFC_ASSERT(tfc_model_forward(m, in, batch, 0, 1, 0, &err) == TFC_OK);
    tfc_model_get_output(m, out);
    double worst = rel_diff(out, y, n, worst_abs);
    { /* the reverse: the weights tfc writes are the fixture's, name for name (Keras's paths) */
        const char *saved = tfc_test_path("saved.safetensors");
        TFC_ASSERT(tfc_model_save_weights(m, saved, &err) == TFC_OK);
        tfc_st_file *sf = tfc_st_open(saved, &err);
        TFC_ASSERT(sf != NULL);
        CU_ASSERT(tfc_st_count(sf) == rep.matched);
        for (int i = 0; i < tfc_st_count(sf); i++) {
            const tfc_st_tensor *a = tfc_st_tensor_at(sf, i), *b = tfc_st_find(f, a->name);
            CU_ASSERT(b && b->nbytes == a->nbytes && !memcmp(a->data, b->data, a->nbytes));
        }
        tfc_st_close(sf);
    }
    { /* the same from the inference layout (tfc-predict's) */
        tfc_model *mi = tfc_model_from_string(yaml, strlen(yaml), name, &err);
        tfc_backend *bi = tfc_cpu_backend_create(2);
        TFC_ASSERT(mi && tfc_model_bind_inference(mi, bi, batch, &err) == TFC_OK);
        TFC_ASSERT(tfc_model_load_weights(mi, path, &rep, &err) == TFC_OK);
        free(rep.text);
        TFC_ASSERT(tfc_model_forward(mi, in, batch, 0, 1, 0, &err) == TFC_OK);
        float *o2 = malloc((size_t)n * 4);
        tfc_model_get_output(mi, o2);
        CU_ASSERT(!memcmp(o2, out, (size_t)n * 4));
        free(o2);
        tfc_model_free(mi);
        tfc_backend_free(bi);
    }
    float *dx = tensor(f, "dx", &n);
    int grads = 0; /* the fixture has gradients (cases without Dropout) */
    for (int i = 0; i < tfc_st_count(f); i++)
        grads |= !strncmp(tfc_st_tensor_at(f, i)->name, "grad:", 5);
    if (grads) {
        tfc_batch_result res;
        TFC_ASSERT(tfc_model_forward(m, in, batch, 1, 1, 0, &err) == TFC_OK);
        tfc_model_zero_grad(m);
        TFC_ASSERT(tfc_model_loss(m, t, 1, &res, &err) == TFC_OK);
        tfc_model_backward(m);
        if (dx) {
            float *got = malloc((size_t)n * 4);
            be->ops->download(be, got, tfc_model_input_grad(m), (size_t)n * 4);
            worst = fmax(worst, rel_diff(got, dx, n, worst_abs));
            free(got);
        }
        for (int i = 0; i < tfc_model_nlayers(m); i++) {
            tfc_layer *l = tfc_model_layer(m, i);
            for (int p = 0; p < l->nparams; p++) {
                if (!l->params[p].trainable) continue; /* moved: below */
                char gname[128];
                snprintf(gname, sizeof gname, "grad:%s/%s", l->name, l->params[p].name);
                float *want = tensor(f, gname, NULL), *g = malloc((size_t)l->params[p].numel * 4);
                CU_ASSERT_PTR_NOT_NULL(want);
                if (want) {
                    tfc_model_grad_download(m, &l->params[p], g);
                    worst = fmax(worst, rel_diff(g, want, l->params[p].numel, worst_abs));
                }
                free(want), free(g);
            }
        }
        free(dx);
        /* the non-trainable weights after that training forward (BatchNormalization's moving
         * statistics, moved once per step as Keras's step-by-step calls move them) */
        for (int i = 0; i < tfc_model_nlayers(m); i++) {
            tfc_layer *l = tfc_model_layer(m, i);
            for (int p = 0; p < l->nparams; p++) {
                if (l->params[p].trainable || l->params[p].constant) continue;
                char mname[128];
                snprintf(mname, sizeof mname, "moved:%s/%s", l->name, l->params[p].name);
                float *want = tensor(f, mname, NULL), *g = malloc((size_t)l->params[p].numel * 4);
                CU_ASSERT_PTR_NOT_NULL(want);
                if (want) {
                    tfc_model_param_download(m, &l->params[p], g);
                    worst = fmax(worst, rel_diff(g, want, l->params[p].numel, worst_abs));
                }
                free(want), free(g);
            }
        }
    }
    free(x), free(ids), free(y), free(t), free(out);
    tfc_model_free(m);
    tfc_backend_free(be);
    tfc_st_close(f);
    return worst;
}

static void test_keras_parity(void)
{
    static const char *const names[] = {"video", "masked", "batchnorm", "sequence"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        double abs_diff = 0, rel = parity_case("time_distributed", names[i], &abs_diff);
        if (rel > 1e-5 || getenv("TFC_VERBOSE"))
            fprintf(stderr, "\n%s: max abs %.3g, max rel (to the largest value) %.3g\n",
                    names[i], abs_diff, rel);
        CU_ASSERT(rel <= 1e-5);
    }
}

static tfc_error build_error(const char *yaml)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), "t.yaml", &err);
    CU_ASSERT_PTR_NULL(m);
    tfc_model_free(m);
    return err;
}

static void expect_error(const char *input, const char *layers, const char *what)
{
    char yaml[768];
    snprintf(yaml, sizeof yaml, "input: %s\nlayers:\n%s", input, layers);
    tfc_error err = build_error(yaml);
    if (!strstr(err.msg, what)) fprintf(stderr, "\n%s: %s\n", layers, err.msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, what));
}

static void test_errors(void)
{
    const char *seq = "{shape: [5, 4]}";
    expect_error(seq, "  - TimeDistributed: {layer: {LSTM: {units: 3}}}\n",
                 "LSTM cannot be wrapped");
    expect_error(seq,
                 "  - TimeDistributed: {layer: {Bidirectional: {layer: {LSTM: {units: 3}}}}}\n",
                 "Bidirectional cannot be wrapped");
    expect_error(seq, "  - TimeDistributed: {layer: {MultiHeadAttention: {num_heads: 1, "
                      "key_dim: 2}}}\n", "MultiHeadAttention cannot be wrapped");
    expect_error(seq, "  - TimeDistributed: {layer: {Add: {}}}\n", "Add cannot be wrapped");
    expect_error(seq, "  - TimeDistributed: {layer: {Densee: {units: 3}}}\n",
                 "Densee cannot be wrapped");
    expect_error(seq, "  - TimeDistributed: {}\n", "layer");
    expect_error(seq, "  - TimeDistributed: {layer: {Dense: {units: 3}, Flatten: {}}}\n",
                 "expected one layer");
    expect_error("{shape: [5]}", "  - TimeDistributed: {layer: {Dense: {units: 3}}}\n",
                 "at least one axis after the steps");
    expect_error(seq, "  - TimeDistributed: {layer: {Dense: {units: 0}}}\n", "expected an integer");
    expect_error(seq, "  - TimeDistributed: {layer: {Dense: {units: 3, bogus: 1}}}\n",
                 "bogus");
    expect_error(seq, "  - TimeDistributed: {layer: {Dense: {units: 3, activity_regularizer: "
                      "l2}}}\n", "activity_regularizer inside TimeDistributed");
    expect_error(seq, "  - TimeDistributed: {layer: {Dense: {units: 3, name: "
                      "a_very_long_inner_layer_name_over_forty_characters}}}\n", "longer than");
    expect_error("{shape: [5, 4], dtype: int32}",
                 "  - TimeDistributed: {layer: {Embedding: {input_dim: 9, output_dim: 2, "
                 "mask_zero: true}}}\n", "making a mask");
    const char *ids = "{shape: [5], dtype: int32}";
    const char *emb = "  - Embedding: {input_dim: 9, output_dim: 4, mask_zero: true}\n";
    const char *bad[] = {"BatchNormalization: {}", "Softmax: {}"};
    for (int i = 0; i < 2; i++) {
        char layers[256];
        snprintf(layers, sizeof layers, "%s  - TimeDistributed: {layer: {%s}}\n", emb, bad[i]);
        expect_error(ids, layers, "under a mask is not supported");
    }
}

/* Weights are named <layer>/<inner>/<weight>, the inner layer Keras's snake case of its type
 * unless named; the output keeps the input's mask; an inner embedding reads token ids. */
static void test_names_and_masks(void)
{
    const char *yaml = "input: {shape: [4, 3], dtype: int32}\n"
                       "layers:\n"
                       "  - TimeDistributed: {layer: {Embedding: {input_dim: 7, output_dim: 2}}}\n"
                       "  - TimeDistributed: {layer: {Conv1D: {filters: 2, kernel_size: 2}}}\n"
                       "  - TimeDistributed: {layer: {Flatten: {}}}\n"
                       "  - TimeDistributed: {layer: {PReLU: {}}}\n"
                       "  - TimeDistributed: {layer: {Dense: {units: 2, name: head, "
                       "kernel_regularizer: {type: l2, l2: 0.01}, "
                       "bias_constraint: non_neg}}}\n";
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), "t.yaml", &err);
    if (!m) fprintf(stderr, "\n%s\n", err.msg);
    TFC_ASSERT(m != NULL);
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 0)->params[0].name, "embedding/embeddings");
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 1)->params[0].name, "conv1d/kernel");
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 1)->name, "time_distributed_1");
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 0)->name, "time_distributed");
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 3)->params[0].name, "p_re_lu/alpha");
    CU_ASSERT_STRING_EQUAL(tfc_model_layer(m, 4)->params[1].name, "head/bias");
    /* the inner layer's regularizer, on its weight (Keras regularizes the wrapped layer's) */
    CU_ASSERT_EQUAL(tfc_model_layer(m, 4)->params[0].l2, 0.01f);
    CU_ASSERT_EQUAL(tfc_model_layer(m, 4)->params[1].l2, 0.0f);
    /* and its constraint (Keras's optimizer applies the wrapped layer's variables' own) */
    CU_ASSERT_EQUAL(tfc_model_layer(m, 4)->params[1].constraint.kind, TFC_CONSTRAINT_NON_NEG);
    CU_ASSERT_EQUAL(tfc_model_layer(m, 4)->params[0].constraint.kind, TFC_CONSTRAINT_NONE);
    CU_ASSERT_EQUAL(tfc_model_layer(m, 0)->id_limit, 7);
    CU_ASSERT_EQUAL(tfc_model_layer(m, 4)->out_shape.ndim, 2);
    CU_ASSERT_EQUAL(tfc_model_layer(m, 4)->out_shape.dim[0], 4);
    tfc_model_free(m);
    /* under a mask (Embedding's mask_zero) the output keeps it */
    yaml = "input: {shape: [5], dtype: int32}\nlayers:\n"
           "  - Embedding: {input_dim: 9, output_dim: 4, mask_zero: true}\n"
           "  - TimeDistributed: {layer: {Dense: {units: 3}}}\n"
           "  - TimeDistributed: {layer: {Dropout: {rate: 0.5}}}\n";
    m = tfc_model_from_string(yaml, strlen(yaml), "t.yaml", &err);
    TFC_ASSERT(m != NULL);
    CU_ASSERT(tfc_model_layer(m, 1)->mask_out && tfc_model_layer(m, 2)->mask_out);
    tfc_model_free(m);
}

/* A backend without the inner layer's ops refuses the model naming the TimeDistributed layer
 * and the op; a GPU refuses one around a CPU-first layer (Rescaling, until the layer-op
 * flip) or while the wrapper itself is CPU-first, and otherwise takes it (Dense). */
static void test_device_refusals(void)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    const tfc_backend_ops *cpu_ops = be->ops;
    tfc_backend_ops lacking = *be->ops;
    lacking.groupnorm_forward = NULL;
    tfc_model *m = tfc_test_model("input: {shape: [3, 4]}\nlayers:\n"
                                  "  - TimeDistributed: {name: td, layer: {LayerNormalization: "
                                  "{}}}\n  - TimeDistributed: {name: tg, layer: "
                                  "{GroupNormalization: {groups: 2}}}\n");
    TFC_ASSERT(m != NULL);
    tfc_error err;
    tfc_error_clear(&err);
    be->ops = &lacking;
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'tg'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "groupnorm_forward"));
    be->ops = cpu_ops;
    tfc_model_free(m);
    /* refused where the inner layer is CPU-first (Rescaling, ZeroPadding1D until make
     * test-gpu has run them) or the wrapper itself is; the flags say which */
    static const struct {
        const char *inner, *type;
    } cases[] = {{"Rescaling: {scale: 2.0}", "Rescaling"}, {"Dense: {units: 2}", "Dense"},
                 {"ZeroPadding1D: {}", "ZeroPadding1D"},
                 {"BatchNormalization: {}", "BatchNormalization"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "input: {shape: [3, 4, 2]}\nlayers:\n"
                 "  - TimeDistributed: {name: td, layer: {%s}}\n", cases[i].inner);
        m = tfc_test_model(yaml);
        TFC_ASSERT(m != NULL);
        tfc_error_clear(&err);
        be->device = 0; /* as a GPU backend */
        tfc_status s = tfc_model_bind(m, be, 2, &err);
        be->device = -1;
        const int refused = tfc_layer_lookup(cases[i].type)->cpu_first ||
                            tfc_layer_lookup("TimeDistributed")->cpu_first;
        CU_ASSERT_EQUAL(s, refused ? TFC_ERR_CONFIG : TFC_OK);
        if (refused) {
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 'td'"));
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "--device cpu"));
        }
        tfc_model_free(m);
    }
    tfc_backend_free(be);
}

TFC_TEST_MAIN("time_distributed", {"keras_parity", test_keras_parity}, {"errors", test_errors},
              {"names_and_masks", test_names_and_masks},
              {"device_refusals", test_device_refusals})
