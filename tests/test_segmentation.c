/* Semantic segmentation: cross-entropy per pixel on an output (H, W, classes), labels one
 * class id per pixel ((H, W) or (H, W, 1)) or one-hot (H, W, classes), as Keras 3 computes
 * them (tests/ref/keras_segmentation.py: a small U-Net, BatchNormalization with labels
 * (H, W, 1), logits with one-hot labels): the loss and accuracy of a batch and the weights
 * after SGD steps against Keras's own, the gradients against central differences, labels
 * of the wrong size refused with the size the output needs, masks moved with their images
 * by random_flip, random_crop and resize (segmentation_masks), tfc-test's IoU against Keras's
 * MeanIoU, and a model that learns to segment shapes through the solver. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/data.h"
#include "cpu/cpu.h"
#include "graph/model.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "kerassteps.h"
#include "solver/solver.h"
#include "testutil.h"

static const char *const cases[] = {"unet", "channel", "logits"};

static tfc_st_file *open_case(const char *name, char *abs_path, size_t size)
{
    char path[256], cwd[900];
    snprintf(path, sizeof path, "tests/ref/segmentation/%s.safetensors", name);
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
    snprintf(abs_path, size, "%s/%s", cwd, path);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open(path, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    return f;
}

/* Keras's model.evaluate of the batch before training: the loss and the accuracy, each the
 * mean over every pixel of the batch. */
static void test_keras_evaluate(void)
{
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char abs_path[1200];
        tfc_st_file *f = open_case(cases[c], abs_path, sizeof abs_path);
        const char *yaml = tfc_st_meta(f, "yaml");
        tfc_error err;
        tfc_error_clear(&err);
        tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), "seg.yaml", &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        const tfc_st_tensor *x = tfc_st_find(f, "x"), *lab = tfc_st_find(f, "labels");
        const int n = (int)x->shape.dim[0];
        tfc_backend *be = tfc_cpu_backend_create(2);
        CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, n, &err), TFC_OK);
        CU_ASSERT_EQUAL_FATAL(tfc_model_load_weights(m, abs_path, NULL, &err), TFC_OK);
        CU_ASSERT_EQUAL(tfc_model_label_rows(m), x->shape.dim[1] * x->shape.dim[2]);
        CU_ASSERT_EQUAL_FATAL(tfc_model_forward(m, x->data, n, 0, 1, 0, &err), TFC_OK);
        tfc_batch_result r;
        CU_ASSERT_EQUAL_FATAL(tfc_model_loss(m, lab->data, 0, &r, &err), TFC_OK);
        float *loss = tfc_test_tensor(f, "loss", NULL), *acc = tfc_test_tensor(f, "accuracy", NULL);
        printf("\n  %s: loss %.7f (Keras %.7f), accuracy %.6f (Keras %.6f) over %lld pixels",
               cases[c], r.loss, loss[0], r.metric[0], acc[0], (long long)r.count);
        CU_ASSERT(fabs(r.loss - loss[0]) <= 2e-6 * fabs(loss[0]));
        CU_ASSERT(fabs(r.metric[0] - acc[0]) <= 1e-6);
        CU_ASSERT_EQUAL(r.count, (int64_t)n * x->shape.dim[1] * x->shape.dim[2]);
        free(loss), free(acc);
        tfc_model_free(m);
        tfc_backend_free(be);
        tfc_st_close(f);
    }
}

/* tfc-test's confusion over pixels: its mean IoU against Keras's MeanIoU of the batch, and
 * a table with IoU and pixel counts. */
static void test_keras_mean_iou(void)
{
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char abs_path[1200], xn[64], yn[64], solver[2048], cmd[2600];
        tfc_st_file *f = open_case(cases[c], abs_path, sizeof abs_path);
        snprintf(xn, sizeof xn, "segi_%s_x.npy", cases[c]);
        snprintf(yn, sizeof yn, "segi_%s_y.npy", cases[c]);
        tfc_ks_write_npy(tfc_st_find(f, "x"), xn);
        tfc_ks_write_npy(tfc_st_find(f, "labels"), yn);
        const char *yaml = tfc_st_meta(f, "yaml");
        int o = snprintf(solver, sizeof solver, "model:\n");
        for (const char *p = yaml; *p;) { /* the model, indented under model: */
            const char *nl = strchr(p, '\n');
            int len = nl ? (int)(nl - p) : (int)strlen(p);
            o += snprintf(solver + o, sizeof solver - (size_t)o, "  %.*s\n", len, p);
            p += len + (nl ? 1 : 0);
        }
        snprintf(solver + o, sizeof solver - (size_t)o,
                 "data:\n  train:\n    source: {type: npy, features: %s, labels: %s}\n"
                 "    pipeline: [{batch: {batch_size: 4}}]\n"
                 "  test:\n    source: {type: npy, features: %s, labels: %s}\n"
                 "    pipeline: [{batch: {batch_size: 4}}]\n"
                 "optimizer: {type: sgd, learning_rate: 0.1}\nmax_iter: 1\n", xn, yn, xn, yn);
        tfc_test_write("segi.yaml", solver, -1);
        snprintf(cmd, sizeof cmd, "cd %s && %s/tfc-test segi.yaml --weights %s --json",
                 tfc_test_tmpdir(), tfc_test_bin("tfc-test"), abs_path);
        char *out = NULL;
        CU_ASSERT_EQUAL_FATAL(tfc_test_sh(cmd, &out), 0);
        const char *at = strstr(out, "\"mean_iou\": ");
        CU_ASSERT_PTR_NOT_NULL_FATAL(at);
        float *want = tfc_test_tensor(f, "mean_iou", NULL);
        const double got = atof(at + 12);
        printf("\n  %s: mean IoU %.7f (Keras %.7f)", cases[c], got, want[0]);
        CU_ASSERT(fabs(got - want[0]) <= 1e-6);
        CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"iou\": "));
        free(want), free(out);
        snprintf(cmd, sizeof cmd, "cd %s && %s/tfc-test segi.yaml --weights %s",
                 tfc_test_tmpdir(), tfc_test_bin("tfc-test"), abs_path);
        tfc_test_sh_expect(0, cmd, "f1      iou    pixels", "macro");
        tfc_st_close(f);
    }
}

/* Keras's MeanIoU averages over the classes that occur as truth or as prediction: one that
 * does neither is left out of the mean; IoU is TP / (TP + FP + FN). */
static void test_mean_iou_classes(void)
{
    int64_t counts[9] = {6, 2, 0, /* truth 0: 6 right, 2 taken for 1 */
                         1, 3, 0, /* truth 1 */
                         0, 0, 0}; /* class 2: never true, never predicted */
    tfc_confusion cm = {.classes = 3, .rows = 4, .counts = counts};
    tfc_class_stats k0, k1, k2, mac;
    tfc_confusion_class(&cm, 0, &k0);
    tfc_confusion_class(&cm, 1, &k1);
    tfc_confusion_class(&cm, 2, &k2);
    tfc_confusion_macro(&cm, &mac);
    CU_ASSERT_DOUBLE_EQUAL(k0.iou, 6.0 / 9.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(k1.iou, 3.0 / 6.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(k2.iou, 0.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(mac.iou, (6.0 / 9.0 + 0.5) / 2, 1e-12);
    counts[8] = 1; /* now class 2 occurs (predicted right once): it counts */
    tfc_confusion_macro(&cm, &mac);
    CU_ASSERT_DOUBLE_EQUAL(mac.iou, (6.0 / 9.0 + 0.5 + 1.0) / 3, 1e-12);
}

/* Keras 3's weights after train_on_batch's SGD steps on the batch, against tfc's solver from
 * the same weights, on 1 and 2 threads and on the host path. */
static void test_keras_steps(void)
{
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char abs_path[1200], xn[64], yn[64], run[64];
        tfc_st_file *f = open_case(cases[c], abs_path, sizeof abs_path);
        snprintf(xn, sizeof xn, "seg_%s_x.npy", cases[c]);
        snprintf(yn, sizeof yn, "seg_%s_y.npy", cases[c]);
        tfc_ks_write_npy(tfc_st_find(f, "x"), xn);
        tfc_ks_write_npy(tfc_st_find(f, "labels"), yn);
        const char *solver = tfc_ks_solver(f, xn, yn, NULL);
        for (int v = 1; v <= 3; v++) {
            const int threads = v > 1 ? 2 : 1;
            tfc_error err;
            snprintf(run, sizeof run, "seg_%s_%d", cases[c], v);
            CU_ASSERT_EQUAL_FATAL(tfc_ks_train("seg.yaml", solver, abs_path, run, threads, NULL,
                                               0, v == 3, &err),
                                  TFC_OK);
            int compared;
            double worst = tfc_ks_worst(f, run, &compared);
            printf("\n  %s, %d thread%s%s: %d weights, max difference vs Keras %.3g", cases[c],
                   threads, threads > 1 ? "s" : "", v == 3 ? ", host step" : "", compared,
                   worst);
            CU_ASSERT(compared >= 4);
            CU_ASSERT(worst <= 2e-5);
        }
        tfc_st_close(f);
    }
}

/* The gradients of per-pixel losses (sparse, sparse with class weights and label smoothing,
 * categorical from logits) against central differences. */
static void test_gradients(void)
{
    static const char *const losses[] = {
        "loss: sparse_categorical_crossentropy\n",
        "loss: {type: sparse_categorical_crossentropy, class_weight: [1, 3, 0.5], "
        "label_smoothing: 0.1}\n",
        "loss: {type: categorical_crossentropy, from_logits: true}\n"};
    for (int k = 0; k < 3; k++) {
        char yaml[1024];
        snprintf(yaml, sizeof yaml,
                 "input: {shape: [4, 5, 2]}\nlayers:\n"
                 "  - Conv2D: {filters: 3, kernel_size: 3, padding: same, activation: tanh}\n"
                 "  - Conv2D: {filters: 3, kernel_size: 1%s}\n%s",
                 k < 2 ? ", activation: softmax" : "", losses[k]);
        tfc_model *m = tfc_test_model(yaml);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        float x[3 * 40], onehot[3 * 20 * 3] = {0};
        int32_t ids[3 * 20];
        tfc_test_fill(x, 3 * 40, -1, 1, 9);
        for (int i = 0; i < 3 * 20; i++) ids[i] = (i * 7 + i / 5) % 3, onehot[i * 3 + ids[i]] = 1;
        gradcheck_result r = tfc_gradcheck(m, 3, x, k < 2 ? (void *)ids : (void *)onehot, 64, 3);
        printf("\n  %s  max error %.3g at %s (%d checked)", k == 0 ? "sparse" : k == 1 ?
               "weighted" : "logits", r.max_err, r.worst, r.checked);
        CU_ASSERT(r.max_err < TFC_GRADCHECK_BOUND);
        CU_ASSERT(r.checked > 40);
        tfc_model_free(m);
    }
}

/* Labels of the wrong size for the output: the error gives both sizes; one class id per
 * example beside an image output says that the loss is per pixel. */
static void test_label_errors(void)
{
    const int64_t shapes[2][4] = {{8, 4, 4}, {8}};
    for (int k = 0; k < 2; k++) {
        int32_t ids[8 * 16] = {0};
        float x[8 * 16] = {0};
        tfc_tensor tx = {TFC_F32, {.ndim = 4, .dim = {8, 4, 4, 1}}, x, -1};
        tfc_tensor ty = {TFC_I32, {.ndim = k ? 1 : 3}, ids, -1};
        memcpy(ty.shape.dim, shapes[k], sizeof shapes[k]);
        tfc_error err;
        tfc_error_clear(&err);
        CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("seg_bad_x.npy"), &tx, &err), TFC_OK);
        CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("seg_bad_y.npy"), &ty, &err), TFC_OK);
        const char *solver =
            "model:\n  input: {shape: [4, 4, 1]}\n  layers:\n"
            "    - Conv2D: {filters: 3, kernel_size: 1, activation: softmax}\n"
            "data:\n  train:\n    source: {type: npy, features: seg_bad_x.npy, labels: "
            "seg_bad_y.npy}\n    pipeline: [{repeat: {}}, {batch: {batch_size: 4}}]\n"
            "optimizer: {type: sgd, learning_rate: 0.1}\nmax_iter: 1\n";
        tfc_test_write("seg_bad.yaml", solver, -1);
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "cd %s && %s/tfc-train seg_bad.yaml --out seg_bad_run",
                 tfc_test_tmpdir(), tfc_test_bin("tfc-train"));
        if (k == 0) /* (4, 4) per example: right */
            tfc_test_sh_expect(0, cmd, "done:", NULL);
        else
            tfc_test_sh_expect(2, cmd, "(1 values per example), but the model's output and "
                               "loss sparse_categorical_crossentropy need 16 per example",
                               "one class id per pixel");
    }
}

/* A pipeline over n images (h, w, 2) whose channel 0 is each pixel's id (1 + y w + x, the
 * example's offset 100 i added) and labels the same ids, (h, w) or (h, w, 1), of `dtype`,
 * then the op `stage`. */
static tfc_pipeline *ids_pipeline(int n, int h, int w, int channel_axis, tfc_dtype dtype,
                                  const char *stage, tfc_error *err)
{
    float *f = calloc((size_t)n * h * w * 2, sizeof *f);
    int32_t *l = calloc((size_t)n * h * w, sizeof *l);
    uint8_t *l8 = calloc((size_t)n * h * w, 1);
    for (int i = 0; i < n * h * w; i++) {
        const int id = 1 + i % (h * w) + 100 * (i / (h * w)) % 200;
        f[2 * i] = (float)id, f[2 * i + 1] = 0.5f;
        l[i] = id, l8[i] = (uint8_t)id;
    }
    tfc_tensor tf = {TFC_F32, {.ndim = 4, .dim = {n, h, w, 2}}, f, -1};
    tfc_tensor tl = {dtype, {.ndim = channel_axis ? 4 : 3, .dim = {n, h, w, 1}},
                     dtype == TFC_U8 ? (void *)l8 : (void *)l, -1};
    tfc_data_options opt = {.seed = 7};
    tfc_pipeline *p = tfc_pipeline_from_tensors(&tf, &tl, &opt, err);
    free(f), free(l), free(l8);
    if (p && tfc_pipeline_add_yaml(p, stage, err)) {
        tfc_pipeline_free(p);
        return NULL;
    }
    return p;
}

/* random_flip, random_crop (with padding: class 0 there, as the image's zeros) and resize
 * with segmentation_masks: every pixel's label is still the id its image carries there,
 * over many draws; labels (H, W) int32, (H, W, 1) and uint8 alike; the labels' spec is the
 * output's. */
static void test_masks_move(void)
{
    static const struct {
        const char *stage;
        int h, w; /* the output's */
    } ops[] = {
        {"map: {op: random_flip, mode: horizontal_and_vertical, segmentation_masks: true}", 5, 6},
        {"map: {op: random_crop, size: [4, 3], padding: 2, segmentation_masks: true}", 4, 3},
        {"map: {op: resize, size: [8, 4], method: nearest, segmentation_masks: true}", 8, 4},
    };
    for (size_t o = 0; o < sizeof ops / sizeof *ops; o++)
        for (int form = 0; form < 3; form++) {
            tfc_error err;
            tfc_error_clear(&err);
            tfc_pipeline *p = ids_pipeline(16, 5, 6, form == 1, form == 2 ? TFC_U8 : TFC_I32,
                                           ops[o].stage, &err);
            if (!p) printf("\n%s", err.text);
            CU_ASSERT_PTR_NOT_NULL_FATAL(p);
            const tfc_component_spec *ls = &tfc_pipeline_element_spec(p)->comp[TFC_COMP_LABELS];
            CU_ASSERT(ls->shape.dim[0] == ops[o].h && ls->shape.dim[1] == ops[o].w);
            int moved = 0, wrong = 0;
            for (int e = 0; e < 16; e++) {
                tfc_batch b;
                CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
                CU_ASSERT_EQUAL_FATAL(b.labels.shape.dim[0], ops[o].h);
                CU_ASSERT_EQUAL_FATAL(b.labels.shape.dim[1], ops[o].w);
                CU_ASSERT_EQUAL(b.labels.shape.ndim, form == 1 ? 3 : 2);
                CU_ASSERT_EQUAL(b.labels.dtype, form == 2 ? TFC_U8 : TFC_I32);
                const float *f = b.features.data;
                for (int i = 0; i < ops[o].h * ops[o].w; i++) {
                    const int lab = form == 2 ? ((const uint8_t *)b.labels.data)[i]
                                              : ((const int32_t *)b.labels.data)[i];
                    wrong += lab != (int)f[2 * i];
                    moved += lab != 1 + i + 100 * e % 200;
                }
            }
            CU_ASSERT_EQUAL(wrong, 0);
            CU_ASSERT(moved > 0);
            tfc_pipeline_free(p);
        }
}

/* Integer labels of the images' height and width under a spatial op without
 * segmentation_masks are refused (they would no longer match their pixels); with it, labels
 * that are no masks are refused; float labels (an autoencoder's target) pass unmoved. */
static void test_masks_errors(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_PTR_NULL(ids_pipeline(2, 5, 6, 0, TFC_I32, "map: {op: random_flip}", &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "look like segmentation masks"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "add segmentation_masks: true"));
    tfc_error_clear(&err);
    CU_ASSERT_PTR_NULL(ids_pipeline(2, 5, 6, 1, TFC_U8, "map: {op: random_crop, size: 4}", &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "look like segmentation masks"));
    tfc_error_clear(&err);
    CU_ASSERT_PTR_NULL(ids_pipeline(2, 5, 6, 0, TFC_I32, "map: {op: resize, size: 4}", &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "look like segmentation masks"));

    float f[2 * 30 * 2] = {0};
    int32_t l[2 * 4] = {0};
    tfc_tensor tf = {TFC_F32, {.ndim = 4, .dim = {2, 5, 6, 2}}, f, -1};
    tfc_tensor tl = {TFC_I32, {.ndim = 3, .dim = {2, 4, 1}}, l, -1};
    tfc_data_options opt = {.seed = 7};
    tfc_error_clear(&err);
    tfc_pipeline *p = tfc_pipeline_from_tensors(&tf, &tl, &opt, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_NOT_EQUAL(tfc_pipeline_add_yaml(p, "map: {op: random_flip, segmentation_masks: "
                                                 "true}", &err), TFC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "are not of the images' height and width (5 x 6)"));
    tfc_pipeline_free(p);
    tl.shape = (tfc_shape){.ndim = 1, .dim = {2}};
    tfc_error_clear(&err);
    p = tfc_pipeline_from_tensors(&tf, &tl, &opt, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_NOT_EQUAL(tfc_pipeline_add_yaml(p, "map: {op: resize, size: 3, segmentation_masks: "
                                                 "true}", &err), TFC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "needs labels of shape (height, width)"));
    tfc_pipeline_free(p);
    tfc_error_clear(&err);
    p = tfc_pipeline_from_tensors(&tf, NULL, &opt, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, "map: {op: autoencode}", &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, "map: {op: random_flip}", &err), TFC_OK);
    tfc_pipeline_free(p);
}

/* Images with a bright rectangle (class 1) and a brighter disc (class 2) on a dark
 * background, noisy, and the class of each pixel. */
static void shapes(int n, int h, int w, uint64_t seed, float *x, int32_t *y)
{
    uint64_t s = seed;
    for (int i = 0; i < n; i++) {
        int v[5];
        for (int k = 0; k < 5; k++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            v[k] = (int)(s >> 33);
        }
        const int r0 = v[0] % (h - 5), c0 = v[1] % (w - 5), cy = 3 + v[2] % (h - 6),
                  cx = 3 + v[3] % (w - 6), rr = 2 + v[4] % 2;
        for (int r = 0; r < h; r++)
            for (int c = 0; c < w; c++) {
                int k = (r >= r0 && r < r0 + 4 && c >= c0 && c < c0 + 5) ? 1 : 0;
                if ((r - cy) * (r - cy) + (c - cx) * (c - cx) <= rr * rr) k = 2;
                s = s * 6364136223846793005ULL + 1442695040888963407ULL;
                const float noise = ((float)(s >> 40) / (float)(1 << 24) - 0.5f) * 0.2f;
                y[(i * h + r) * w + c] = k;
                x[(i * h + r) * w + c] = 0.5f * (float)k + noise;
            }
    }
}

/* Images i0 .. i(n-1) of shapes() as PNG files in tmp/<dir>/images (grey; the pixel
 * 255 * clamp(x)) and their masks, class + 1, in tmp/<dir>/masks as PNG files of the same
 * name; the first one's image a JPEG (any image with a PNG mask). */
static void write_pngs(const char *dir, int n, int h, int w, const float *x, const int32_t *y)
{
    char path[1200];
    snprintf(path, sizeof path, "mkdir -p %s/%s/images %s/%s/masks", tfc_test_tmpdir(), dir,
             tfc_test_tmpdir(), dir);
    CU_ASSERT_EQUAL_FATAL(system(path), 0);
    uint8_t *px = malloc((size_t)h * w), *mk = malloc((size_t)h * w);
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < h * w; k++) {
            const float v = x[(int64_t)i * h * w + k];
            px[k] = (uint8_t)(v < 0 ? 0 : v > 1 ? 255 : v * 255.0f + 0.5f);
            mk[k] = (uint8_t)(y[(int64_t)i * h * w + k] + 1);
        }
        tfc_error err;
        tfc_error_clear(&err);
        snprintf(path, sizeof path, "%s/%s/images/i%03d.%s", tfc_test_tmpdir(), dir, i,
                 i ? "png" : "jpg");
        const tfc_status st = i ? tfc_image_write_png(path, px, w, h, 1, 8, &err)
                                : tfc_image_write_jpeg(path, px, w, h, 1, 95, &err);
        CU_ASSERT_EQUAL(st, TFC_OK);
        snprintf(path, sizeof path, "%s/%s/masks/i%03d.png", tfc_test_tmpdir(), dir, i);
        CU_ASSERT_EQUAL(tfc_image_write_png(path, mk, w, h, 1, 8, &err), TFC_OK);
    }
    free(px), free(mk);
}

/* The images source with masks: each image's labels are its mask's classes (value + offset),
 * int32 (H, W), in the images' sorted order; a missing mask, one of another size and a class
 * outside num_classes are errors naming the file; masks need a directory, mask_offset masks. */
static void shapes(int n, int h, int w, uint64_t seed, float *x, int32_t *y);

static void test_images_masks(void)
{
    enum { N = 4, H = 9, W = 11 };
    float x[N * H * W];
    int32_t y[N * H * W];
    shapes(N, H, W, 3, x, y);
    write_pngs("segm", N, H, W, x, y);
    char src[2048];
    snprintf(src, sizeof src, "{type: images, directory: %s/segm/images, masks: %s/segm/masks, "
             "mask_offset: -1, channels: 1, num_classes: 3}", tfc_test_tmpdir(),
             tfc_test_tmpdir());
    tfc_data_options opt = {.seed = 1};
    tfc_error err;
    tfc_error_clear(&err);
    tfc_pipeline *p = tfc_pipeline_from_yaml(src, &opt, &err);
    if (!p) printf("\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const tfc_component_spec *ls = &tfc_pipeline_element_spec(p)->comp[TFC_COMP_LABELS];
    CU_ASSERT(ls->dtype == TFC_I32 && ls->shape.ndim == 2);
    for (int i = 0; i < N; i++) {
        tfc_batch b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        CU_ASSERT(b.labels.shape.ndim == 2 && b.labels.shape.dim[0] == H &&
                  b.labels.shape.dim[1] == W);
        CU_ASSERT(b.features.shape.ndim == 3 && b.features.shape.dim[2] == 1);
        CU_ASSERT_EQUAL(memcmp(b.labels.data, y + i * H * W, sizeof(int32_t) * H * W), 0);
    }
    tfc_pipeline_free(p);
    /* sizes unknown before the data: a spatial op without segmentation_masks still refused */
    p = tfc_pipeline_from_yaml(src, &opt, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_NOT_EQUAL(tfc_pipeline_add_yaml(p, "map: {op: resize, size: 4}", &err), TFC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "look like segmentation masks"));
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, "map: {op: resize, size: 4, segmentation_masks: "
                                             "true}", &err), TFC_OK);
    tfc_pipeline_free(p);
    /* a class outside num_classes: the file and the pixel */
    snprintf(src, sizeof src, "{type: images, directory: %s/segm/images, masks: %s/segm/masks, "
             "num_classes: 3}", tfc_test_tmpdir(), tfc_test_tmpdir());
    p = tfc_pipeline_from_yaml(src, &opt, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    tfc_batch b;
    tfc_status st = TFC_OK;
    for (int i = 0; i < N && !st; i++) st = tfc_pipeline_next(p, &b, &err);
    CU_ASSERT_EQUAL(st, TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "masks/i00"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "outside [0, 3)"));
    tfc_pipeline_free(p);
    /* a mask of another size */
    char path[1200];
    uint8_t small[4] = {1, 1, 1, 1};
    snprintf(path, sizeof path, "%s/segm/masks/i002.png", tfc_test_tmpdir());
    CU_ASSERT_EQUAL(tfc_image_write_png(path, small, 2, 2, 1, 8, &err), TFC_OK);
    snprintf(src, sizeof src, "{type: images, directory: %s/segm/images, masks: %s/segm/masks}",
             tfc_test_tmpdir(), tfc_test_tmpdir());
    p = tfc_pipeline_from_yaml(src, &opt, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    st = TFC_OK;
    for (int i = 0; i < N && !st; i++) st = tfc_pipeline_next(p, &b, &err);
    CU_ASSERT_EQUAL(st, TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "i002.png: a mask of 2 x 2 for an image of 9 x 11"));
    tfc_pipeline_free(p);
    /* a missing mask, at opening */
    CU_ASSERT_EQUAL(remove(path), 0);
    tfc_error_clear(&err);
    CU_ASSERT_PTR_NULL(tfc_pipeline_from_yaml(src, &opt, &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "i002.png: no mask"));
    snprintf(src, sizeof src, "{type: images, list: l.txt, masks: m}");
    tfc_error_clear(&err);
    CU_ASSERT_PTR_NULL(tfc_pipeline_from_yaml(src, &opt, &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "masks: takes a `directory`"));
    snprintf(src, sizeof src, "{type: images, directory: d, mask_offset: -1}");
    tfc_error_clear(&err);
    CU_ASSERT_PTR_NULL(tfc_pipeline_from_yaml(src, &opt, &err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "mask_offset: needs `masks`"));
}

/* A small U-Net learns to segment the shapes, trained from PNG images and masks flipped
 * together: pixel accuracy on held-out images (.npy) well above the background's share. */
static void test_trains(void)
{
    enum { N = 384, T = 128, H = 12, W = 12 };
    float *x = malloc(sizeof(float) * (N + T) * H * W);
    int32_t *y = malloc(sizeof(int32_t) * (N + T) * H * W);
    shapes(N + T, H, W, 5, x, y);
    int64_t background = 0;
    for (int i = N * H * W; i < (N + T) * H * W; i++) background += y[i] == 0;
    tfc_error err;
    tfc_error_clear(&err);
    /* the test split as arrays, the training split as image files */
    tfc_tensor tx = {TFC_F32, {.ndim = 4, .dim = {T, H, W, 1}}, x + (int64_t)N * H * W, -1};
    tfc_tensor ty = {TFC_I32, {.ndim = 3, .dim = {T, H, W}}, y + (int64_t)N * H * W, -1};
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("seg_vx.npy"), &tx, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_npy_write(tfc_test_path("seg_vy.npy"), &ty, &err), TFC_OK);
    write_pngs("segt", N, H, W, x, y);
    static const char solver[] =
        "model:\n  input: {shape: [12, 12, 1]}\n  layers:\n"
        "    - Conv2D: {name: c1, filters: 8, kernel_size: 3, padding: same, activation: relu}\n"
        "    - MaxPooling2D: {pool_size: 2}\n"
        "    - Conv2D: {filters: 16, kernel_size: 3, padding: same, activation: relu}\n"
        "    - Conv2DTranspose: {name: up, filters: 8, kernel_size: 3, strides: 2, "
        "padding: same, activation: relu}\n"
        "    - Concatenate: {inputs: [up, c1]}\n"
        "    - Conv2D: {filters: 3, kernel_size: 1, activation: softmax}\n"
        "  loss: sparse_categorical_crossentropy\n  metrics: [accuracy]\n"
        "data:\n  train:\n    source: {type: images, directory: segt/images, masks: segt/masks,"
        " mask_offset: -1, channels: 1, num_classes: 3}\n"
        "    pipeline: [{map: {op: scale, factor: 0.00392156862745098}},"
        " {map: {op: random_flip, mode: horizontal_and_vertical, segmentation_masks: true}},"
        " {shuffle: {buffer_size: 384}}, {repeat: {}}, {batch: {batch_size: 32}}]\n"
        "  test:\n    source: {type: npy, features: seg_vx.npy, labels: seg_vy.npy}\n"
        "    pipeline: [{batch: {batch_size: 64}}]\n"
        "optimizer: {type: adam, learning_rate: 0.01}\nmax_iter: 240\ntest_interval: 240\n"
        "display: 0\nseed: 4\n";
    tfc_train_result res;
    CU_ASSERT_EQUAL_FATAL(tfc_test_train_result(solver, "seg_train.yaml", "seg_train", &res,
                                                &err),
                          TFC_OK);
    const double share = (double)background / ((double)T * H * W);
    printf("\n  held-out pixel accuracy %.4f (background %.4f), loss %.4f", res.test.metric[0],
           share, res.test.loss);
    CU_ASSERT(res.test.metric[0] > 0.95 && res.test.metric[0] > share + 0.1);
    free(x), free(y);
}

TFC_TEST_MAIN("segmentation", {"keras_evaluate", test_keras_evaluate},
              {"keras_mean_iou", test_keras_mean_iou}, {"mean_iou_classes", test_mean_iou_classes},
              {"keras_steps", test_keras_steps}, {"gradients", test_gradients},
              {"label_errors", test_label_errors}, {"masks_move", test_masks_move},
              {"masks_errors", test_masks_errors}, {"images_masks", test_images_masks},
              {"trains", test_trains})
