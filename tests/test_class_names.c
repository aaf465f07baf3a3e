/* Class names travel with the weights (SPEC §4, docs/data.md): an images source's folder names
 * and a source's `classes:` list reach the metadata of the final, best and snapshot weights;
 * tfc-predict prints `NAME (INDEX) VALUE` with them; a strict load reads them back; wrong
 * `classes:` lists are configuration errors at their line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tfc.h"
#include "testutil.h"

static const char *meta(const char *path, const char *key, char *buf, size_t size)
{
    tfc_error e;
    tfc_error_clear(&e);
    tfc_st_file *f = tfc_st_open(path, &e);
    if (!f) return NULL;
    const char *v = tfc_st_meta(f, key);
    snprintf(buf, size, "%s", v ? v : "");
    tfc_st_close(f);
    return v ? buf : NULL;
}

static tfc_status train(const char *solver_yaml, const char *out, tfc_error *e)
{
    return tfc_test_train(solver_yaml, "cn_solver.yaml", out, e);
}

/* An npy source with `classes:`: final, best and snapshot weights carry them. */
static void test_npy_classes_recorded(void)
{
    tfc_test_write_split("cn_x.npy", "cn_y.npy", 64, 3);
    const char *solver =
        "model:\n  name: cn\n  input: {shape: [16]}\n  layers:\n    - Dense: {units: 4}\n"
        "data:\n"
        "  train:\n"
        "    source: {type: npy, features: cn_x.npy, labels: cn_y.npy,\n"
        "             classes: [north, east, \"south west\", \"T-shirt/top\"]}\n"
        "    pipeline: [{repeat: {}}, {batch: {batch_size: 16}}]\n"
        "  test:\n"
        "    source: {type: npy, features: cn_x.npy, labels: cn_y.npy}\n"
        "    pipeline: [{batch: {batch_size: 32}}]\n"
        "optimizer: {type: sgd, learning_rate: 0.1}\n"
        "max_iter: 10\ntest_interval: 5\nsnapshot: {interval: 5, keep: 1}\nseed: 1\n";
    tfc_error e;
    tfc_status st = train(solver, "cn_run", &e);
    if (st) printf("\n%s", e.text);
    CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
    const char *want = "[\"north\",\"east\",\"south west\",\"T-shirt/top\"]";
    char buf[512], path[1024];
    static const char *const files[] = {"final.safetensors", "best.safetensors",
                                        "snapshots/cn_iter_10.safetensors"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", tfc_test_path("cn_run"), files[i]);
        const char *got = meta(path, "classes", buf, sizeof buf);
        if (!got || strcmp(got, want)) printf("\n%s: classes %s\n", files[i], got ? got : "(none)");
        CU_ASSERT(got && !strcmp(got, want));
    }
    /* read back by a strict load */
    const char *model = "input: {shape: [16]}\nlayers:\n  - Dense: {units: 4}\n";
    tfc_model *m = tfc_model_from_string(model, strlen(model), "m.yaml", &e);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    tfc_backend *be = tfc_backend_open("cpu", 1, &e);
    CU_ASSERT_EQUAL(tfc_model_bind(m, be, 1, &e), TFC_OK);
    snprintf(path, sizeof path, "%s/final.safetensors", tfc_test_path("cn_run"));
    CU_ASSERT_EQUAL(tfc_model_load_weights(m, path, NULL, &e), TFC_OK);
    int n = 0;
    const char *const *names = tfc_model_class_names(m, &n);
    CU_ASSERT_EQUAL(n, 4);
    if (names) CU_ASSERT_STRING_EQUAL(names[2], "south west");
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* cn_img/{cat,dog}/{0,1,2}.png, 4x4 RGB. */
static void write_images(void)
{
    unsigned char px[4 * 4 * 3];
    tfc_error e;
    tfc_error_clear(&e);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/cn_img", tfc_test_tmpdir());
    mkdir(dir, 0777);
    for (int c = 0; c < 2; c++) {
        snprintf(dir, sizeof dir, "%s/cn_img/%s", tfc_test_tmpdir(), c ? "dog" : "cat");
        mkdir(dir, 0777);
    }
    for (int c = 0; c < 2; c++)
        for (int i = 0; i < 3; i++) {
            for (int k = 0; k < 48; k++) px[k] = (unsigned char)(c ? 200 + k % 50 : k * 3 + i);
            char name[64];
            snprintf(name, sizeof name, "cn_img/%s/%d.png", c ? "dog" : "cat", i);
            CU_ASSERT_EQUAL_FATAL(tfc_image_write_png(tfc_test_path(name), px, 4, 4, 3, 8, &e),
                                  TFC_OK);
        }
}

/* An images source names its classes after its folders; tfc-predict prints them. */
static void test_images_folders_predict(void)
{
    tfc_error e;
    write_images();
    const char *solver =
        "model:\n  input: {shape: [4, 4, 3]}\n  layers:\n    - Flatten: {}\n"
        "    - Dense: {units: 2, activation: softmax}\n"
        "data:\n"
        "  train:\n"
        "    source: {type: images, directory: cn_img}\n"
        "    pipeline: [{map: {op: scale, factor: 0.004}}, {repeat: {}}, {batch: {batch_size: 3}}]\n"
        "optimizer: {type: sgd, learning_rate: 0.1}\n"
        "max_iter: 4\nseed: 1\n";
    tfc_status st = train(solver, "cn_img_run", &e);
    if (st) printf("\n%s", e.text);
    CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
    char buf[256], path[1024];
    snprintf(path, sizeof path, "%s/final.safetensors", tfc_test_path("cn_img_run"));
    const char *got = meta(path, "classes", buf, sizeof buf);
    CU_ASSERT(got && !strcmp(got, "[\"cat\",\"dog\"]"));

    const char *bin = tfc_test_bin("tfc-predict");
    if (!bin) return;
    char tool[1100];
    snprintf(tool, sizeof tool, "%s/tfc-predict", bin);
    const char *model = tfc_test_write("cn_model.yaml",
        "input: {shape: [4, 4, 3]}\nlayers:\n  - Flatten: {}\n  - Dense: {units: 2, activation: softmax}\n",
        -1);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s --weights %s --input %s %s --map '{op: scale, factor: 0.004}' "
             ">%s 2>&1", tool, model, path, tfc_test_path("cn_img/cat/0.png"),
             tfc_test_path("cn_img/dog/0.png"), tfc_test_path("cn_out.txt"));
    CU_ASSERT_EQUAL(system(cmd), 0);
    char *out = tfc_test_read(tfc_test_path("cn_out.txt"), NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    int named = (strstr(out, "\tcat (0)\t") || strstr(out, "\tdog (1)\t")) && !strstr(out, "class ");
    if (!named) printf("\n%s", out);
    CU_ASSERT(named);
    free(out);
}

/* `classes:` that is not a list, or that names no folder (a folder source's classes pick and
 * order its folders, as Keras's class_names): errors at its line. */
static void test_bad_classes(void)
{
    const char *head = "model:\n  input: {shape: [4, 4, 3]}\n  layers:\n    - Flatten: {}\n"
                       "    - Dense: {units: 2}\n"
                       "data:\n  train:\n";
    const char *tail = "    pipeline: [{batch: {batch_size: 3}}]\nmax_iter: 1\n";
    char yaml[1024];
    tfc_error e;
    write_images();
    snprintf(yaml, sizeof yaml, "%s    source: {type: images, directory: cn_img, classes: 3}\n%s",
             head, tail);
    CU_ASSERT_EQUAL(train(yaml, "cn_bad1", &e), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.text, "cn_solver.yaml:8:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.text, "data.train.source.classes: expected a list of class names"));
    snprintf(yaml, sizeof yaml,
             "%s    source: {type: images, directory: cn_img, classes: [dog, a]}\n%s", head, tail);
    CU_ASSERT_EQUAL(train(yaml, "cn_bad2", &e), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.text, "data.train.source.classes: 'a' is no class folder of "));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.text, "(its folders: cat, dog)"));
    snprintf(yaml, sizeof yaml,
             "%s    source: {type: images, directory: cn_img, classes: [dog, dog]}\n%s", head,
             tail);
    CU_ASSERT_EQUAL(train(yaml, "cn_bad4", &e), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.text, "'dog' is named twice"));
    /* the other keys are still checked */
    snprintf(yaml, sizeof yaml,
             "%s    source: {type: images, directory: cn_img, classes: [a, b], colour: 3}\n%s",
             head, tail);
    CU_ASSERT_EQUAL(train(yaml, "cn_bad3", &e), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.text, "colour"));
}

/* The zoo's classifiers record their classes; tfc-zoo info lists them. */
static void test_zoo_info(void)
{
    const char *bin = tfc_test_bin("tfc-zoo");
    if (!bin) return;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "TFC_ZOO=model_zoo %s/tfc-zoo info fashion_mlp >%s 2>&1", bin,
             tfc_test_path("zoo_info.txt"));
    CU_ASSERT_EQUAL(system(cmd), 0);
    char *out = tfc_test_read(tfc_test_path("zoo_info.txt"), NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "classes: [\"T-shirt/top\",\"Trouser\","));
    free(out);
    char buf[512];
    CU_ASSERT_PTR_NOT_NULL(meta("model_zoo/fortunes_classify/fortunes_classify.safetensors",
                                "classes", buf, sizeof buf));
    CU_ASSERT_PTR_NULL(meta("model_zoo/fortunes_char_lstm/fortunes_char_lstm.safetensors",
                            "classes", buf, sizeof buf));
}

TFC_TEST_MAIN("class_names", {"zoo_info", test_zoo_info}, {"npy_classes_recorded", test_npy_classes_recorded},
              {"images_folders_predict", test_images_folders_predict},
              {"bad_classes", test_bad_classes})
