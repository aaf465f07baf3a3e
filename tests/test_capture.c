/* A training step's device work, as a CUDA graph would capture it (issue 41, docs/gpu.md):
 * once the batch and its labels are staged (tfc_model_stage_input, tfc_model_stage_labels),
 * the forward pass, the loss, the backward pass and the device path's update
 * (grad_sumsq, step_scale, optimizer_update_at) must queue work only: no upload, download,
 * allocation, free, synchronisation or host read of a result (sumsq, count_nonfinite) among
 * them. A capture cannot hold any of those; on a GPU they would fail it or bake one step's
 * host data into every replay. Checked on the CPU backend through a copy of its op table
 * that counts those calls, for every bench model and every zoo model, after one step that
 * lets any lazily made state (workspaces, caches) appear; the bench models also in bf16 and
 * in float16, whose loss scale the loss's gradient reads from the step state
 * (loss_scale_at). Also: the staged halves give the bits the whole calls give
 * (tfc_model_forward, tfc_model_loss_launch). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "graph/model.h"
#include "util/testutil.h"

static const tfc_backend_ops *base; /* the CPU's own table */
static int counting;
static int calls;                   /* counted calls while counting */
static char first[64];              /* the first one's name */

static void note(const char *op)
{
    if (!counting) return;
    if (!calls++) snprintf(first, sizeof first, "%s", op);
}

static void *c_alloc(tfc_backend *be, size_t bytes)
{
    note("alloc");
    return base->alloc(be, bytes);
}

static void c_free(tfc_backend *be, void *p)
{
    note("free");
    base->free(be, p);
}

static void c_upload(tfc_backend *be, void *dst, const void *src, size_t bytes)
{
    note("upload");
    base->upload(be, dst, src, bytes);
}

static void c_download(tfc_backend *be, void *dst, const void *src, size_t bytes)
{
    note("download");
    base->download(be, dst, src, bytes);
}

static void c_sync(tfc_backend *be)
{
    note("sync");
    base->sync(be);
}

static double c_sumsq(tfc_backend *be, int64_t n, const float *x)
{
    note("sumsq");
    return base->sumsq(be, n, x);
}

static int64_t c_count_nonfinite(tfc_backend *be, int64_t n, const float *x)
{
    note("count_nonfinite");
    return base->count_nonfinite(be, n, x);
}

static tfc_status c_status(tfc_backend *be, tfc_error *err)
{
    note("status");
    return base->status(be, err);
}

/* The CPU backend with the counting table in place of its own. */
static tfc_backend *counting_backend(tfc_backend_ops *table)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    if (!be) return NULL;
    base = be->ops;
    *table = *base;
    table->alloc = c_alloc;
    table->free = c_free;
    table->upload = c_upload;
    table->download = c_download;
    table->sync = c_sync;
    table->sumsq = c_sumsq;
    table->count_nonfinite = c_count_nonfinite;
    table->status = c_status;
    be->ops = table;
    return be;
}

/* A batch any model takes: token ids 1 (inside every vocabulary, and not mask_zero's
 * padding), images in [-1, 1), labels 0 (class 0, or float zeros). */
typedef struct batch {
    void *x, *labels;
} batch;

static int make_batch(const tfc_model *m, int n, batch *b)
{
    int64_t per = tfc_shape_numel(tfc_model_input_shape(m));
    int64_t rows = (int64_t)n * tfc_model_label_rows(m);
    int64_t lab = rows * (tfc_model_loss_kind(m) == TFC_LOSS_SPARSE_CCE ? 1 : tfc_model_classes(m));
    b->x = malloc((size_t)(n * per) * 4);
    b->labels = calloc((size_t)lab, 4);
    if (!b->x || !b->labels) return -1;
    for (int64_t i = 0; i < n * per; i++) {
        if (tfc_model_input_dtype(m) == TFC_I32)
            ((int32_t *)b->x)[i] = 1;
        else
            ((float *)b->x)[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    }
    return 0;
}

/* One step, staged then queued; with `count`, the queued half is counted. */
static int step(tfc_model *m, tfc_backend *be, const batch *b, int n, uint64_t k,
                tfc_step_state *st, float *slot, int count, tfc_error *err)
{
    if (tfc_model_stage_input(m, b->x, n, 1, 7, k, err)) return -1;
    if (tfc_model_stage_labels(m, b->labels, err)) return -1;
    counting = count;
    tfc_model_forward_launch(m);
    tfc_model_loss_compute(m, 1);
    tfc_model_zero_grad(m);
    tfc_model_backward(m);
    int64_t nt = tfc_model_trainable_count(m);
    float *grads = tfc_model_grads(m);
    be->ops->grad_sumsq(be, nt, grads, st);
    be->ops->step_scale(be, tfc_model_loss_scalar(m), 1.0, 1.0, st);
    const tfc_optim_desc d = {.type = TFC_OPTIMIZER_SGD, .lr = 0.01f, .momentum = 0.9f};
    be->ops->optimizer_update_at(be, &d, st, nt, tfc_model_params(m), grads, slot, NULL, NULL);
    counting = 0;
    return 0;
}

/* The model at `path` in precision p, bound at batch n: one step, then a counted one. */
static int check_model(const char *path, int n, tfc_precision p)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_backend_ops table;
    tfc_backend *be = counting_backend(&table);
    tfc_model *m = tfc_model_load(path, &err);
    int bad = 0;
    batch b = {NULL, NULL};
    if (m) tfc_model_set_precision(m, p);
    if (!be || !m || tfc_model_bind(m, be, n, &err) || tfc_model_init_weights(m, 3, &err) ||
        make_batch(m, n, &b)) {
        printf("\n  %s: %s", path, err.text);
        bad = 1;
    }
    tfc_step_state *st = bad ? NULL : be->ops->alloc(be, sizeof *st);
    if (st) {
        const tfc_step_state init = {.loss_scale = 1024.0f};
        be->ops->upload(be, st, &init, sizeof init);
        if (p == TFC_PRECISION_FLOAT16) tfc_model_set_loss_scale_at(m, st);
    }
    float *slot = bad ? NULL : be->ops->alloc(be, (size_t)tfc_model_trainable_count(m) * 4 + 4);
    if (slot) be->ops->zero(be, slot, (size_t)tfc_model_trainable_count(m) * 4);
    if (!bad && (step(m, be, &b, n, 0, st, slot, 0, &err) ||
                 step(m, be, &b, n, 1, st, slot, 1, &err))) {
        printf("\n  %s: %s", path, err.text);
        bad = 1;
    }
    if (!bad && calls) {
        printf("\n  %s (%s): %d host transfer(s) or allocation(s) in the queued step, the "
               "first '%s'", path, tfc_precision_names[p], calls, first);
        bad = 1;
    }
    calls = 0;
    if (st) be->ops->free(be, st);
    if (slot) be->ops->free(be, slot);
    free(b.x), free(b.labels);
    tfc_model_free(m);
    tfc_backend_free(be);
    return bad;
}

static const char *const bench_models[] = {"mnist_mlp", "mnist_cnn", "char_lstm", "resnet20",
                                            "mobilenet", "bigru", "conv1d", "gpt_t128"};

static void check_bench_models(tfc_precision p)
{
    for (size_t i = 0; i < sizeof bench_models / sizeof *bench_models; i++) {
        char path[256];
        snprintf(path, sizeof path, "bench/models/%s.yaml", bench_models[i]);
        CU_ASSERT_EQUAL(check_model(path, 2, p), 0);
    }
}

static void test_bench_models(void) { check_bench_models(TFC_PRECISION_FLOAT32); }

static void test_precision_models(void)
{
    check_bench_models(TFC_PRECISION_BF16);
    check_bench_models(TFC_PRECISION_FLOAT16);
}

static void test_zoo_models(void)
{
    static const char *models[] = {"fashion_mlp", "fashion_cnn", "fashion_cnn_bn",
                                   "fashion_resnet", "fashion_mobilenet", "fortunes_bigru",
                                   "fortunes_char_gru", "fortunes_char_lstm",
                                   "fortunes_classify", "fortunes_conv_bigru",
                                   "fortunes_encoder", "fortunes_gpt", "fortunes_bag_of_bigrams"};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        char path[256];
        snprintf(path, sizeof path, "model_zoo/%s/model.yaml", models[i]);
        CU_ASSERT_EQUAL(check_model(path, 2, TFC_PRECISION_FLOAT32), 0);
    }
}

/* The staged halves against the whole calls: the same loss, metrics and gradients. */
static void test_halves_match(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *a = tfc_model_load("bench/models/mnist_cnn.yaml", &err);
    tfc_model *c = tfc_model_load("bench/models/mnist_cnn.yaml", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(a, be, 3, &err) || tfc_model_bind(c, be, 3, &err) ||
                              tfc_model_init_weights(a, 5, &err) ||
                              tfc_model_init_weights(c, 5, &err),
                          0);
    batch b;
    CU_ASSERT_EQUAL_FATAL(make_batch(a, 3, &b), 0);
    tfc_batch_result ra, rc;
    CU_ASSERT_EQUAL(tfc_model_forward(a, b.x, 3, 1, 9, 4, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_model_loss(a, b.labels, 1, &ra, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_model_stage_input(c, b.x, 3, 1, 9, 4, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_model_stage_labels(c, b.labels, &err), TFC_OK);
    tfc_model_forward_launch(c);
    tfc_model_loss_compute(c, 1);
    tfc_model_loss_result(c, &rc);
    CU_ASSERT(isfinite(ra.loss) && ra.loss > 0);
    CU_ASSERT_EQUAL(memcmp(&ra.loss, &rc.loss, sizeof ra.loss), 0);
    CU_ASSERT_EQUAL(memcmp(ra.metric, rc.metric, sizeof ra.metric), 0);
    tfc_model_zero_grad(a), tfc_model_zero_grad(c);
    tfc_model_backward(a), tfc_model_backward(c);
    int64_t nt = tfc_model_trainable_count(a);
    CU_ASSERT_EQUAL(memcmp(tfc_model_grads(a), tfc_model_grads(c), (size_t)nt * 4), 0);
    free(b.x), free(b.labels);
    tfc_model_free(a), tfc_model_free(c);
    tfc_backend_free(be);
}

TFC_TEST_MAIN("capture", {"bench_models", test_bench_models},
              {"precision_models", test_precision_models}, {"zoo_models", test_zoo_models},
              {"halves_match", test_halves_match})
