/* The images source and the image map ops on PNG and JPEG fixtures written here with
 * libpng and libjpeg: 8- and 16-bit, grey, grey+alpha, palette, RGB, RGBA; folders of
 * classes and list files; channel conversion; corrupt and oversized files reported with the
 * file name (or skipped and counted); decode in a parallel map equal to decode in the source;
 * random_flip, random_crop and resize. */
#include <png.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/data.h"
#include "testutil.h"

enum { W = 8, H = 6 };

static uint8_t px(int y, int x, int c)
{
    return (uint8_t)(y * 20 + x * 6 + c * 40);
}

static void rgb_image(uint8_t *out, int ch)
{
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < ch; c++) out[(y * W + x) * ch + c] = px(y, x, c);
}

static tfc_data_options opts(void)
{
    tfc_data_options o = {.key = "data.train", .base_dir = tfc_test_tmpdir(), .seed = 3};
    return o;
}

static tfc_pipeline *open_yaml(const char *yaml, tfc_error *err)
{
    tfc_data_options o = opts();
    tfc_error_clear(err);
    return tfc_pipeline_from_yaml(yaml, &o, err);
}

static void write_palette_png(const char *path)
{
    FILE *f = fopen(path, "wb");
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    png_init_io(png, f);
    png_set_IHDR(png, info, W, H, 8, PNG_COLOR_TYPE_PALETTE, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_color pal[2] = {{10, 20, 30}, {200, 100, 50}};
    png_set_PLTE(png, info, pal, 2);
    png_write_info(png, info);
    uint8_t row[W];
    for (int y = 0; y < H; y++) {
        for (int x = 0; x < W; x++) row[x] = (uint8_t)((x + y) & 1);
        png_write_row(png, row);
    }
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    fclose(f);
}

static void write_fixtures(void)
{
    static int done;
    if (done) return;
    done = 1;
    tfc_error err;
    tfc_error_clear(&err);
    uint8_t rgb[W * H * 4];
    uint16_t rgb16[W * H * 3];
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/classes", tfc_test_tmpdir());
    mkdir(dir, 0777);
    strcat(dir, "/cat");
    mkdir(dir, 0777);
    snprintf(dir, sizeof dir, "%s/classes/dog", tfc_test_tmpdir());
    mkdir(dir, 0777);
    rgb_image(rgb, 3);
    CU_ASSERT_EQUAL(tfc_image_write_png(tfc_test_path("rgb.png"), rgb, W, H, 3, 8, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_image_write_png(tfc_test_path("classes/cat/a.png"), rgb, W, H, 3, 8, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_image_write_jpeg(tfc_test_path("rgb.jpg"), rgb, W, H, 3, 95, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_image_write_jpeg(tfc_test_path("classes/dog/b.JPG"), rgb, W, H, 3, 95, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_image_write_png(tfc_test_path("classes/dog/c.png"), rgb, W, H, 3, 8, &err), TFC_OK);
    tfc_test_write("classes/dog/notes.txt", "not an image\n", -1);
    rgb_image(rgb, 1);
    CU_ASSERT_EQUAL(tfc_image_write_png(tfc_test_path("grey.png"), rgb, W, H, 1, 8, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_image_write_jpeg(tfc_test_path("grey.jpg"), rgb, W, H, 1, 95, &err), TFC_OK);
    rgb_image(rgb, 2);
    CU_ASSERT_EQUAL(tfc_image_write_png(tfc_test_path("ga.png"), rgb, W, H, 2, 8, &err), TFC_OK);
    rgb_image(rgb, 4);
    CU_ASSERT_EQUAL(tfc_image_write_png(tfc_test_path("rgba.png"), rgb, W, H, 4, 8, &err), TFC_OK);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < 3; c++) rgb16[(y * W + x) * 3 + c] = (uint16_t)(px(y, x, c) * 257);
    CU_ASSERT_EQUAL(tfc_image_write_png(tfc_test_path("rgb16.png"), rgb16, W, H, 3, 16, &err), TFC_OK);
    write_palette_png(tfc_test_path("pal.png"));
    /* Corrupt copies: a truncated PNG and JPEG, a PNG with a broken CRC. */
    size_t len;
    char *png = tfc_test_read(tfc_test_path("rgb.png"), &len);
    tfc_test_write("trunc.png", png, (long)len / 2);
    png[40] ^= 0x55;
    tfc_test_write("crc.png", png, (long)len);
    free(png);
    char *jpg = tfc_test_read(tfc_test_path("rgb.jpg"), &len);
    tfc_test_write("trunc.jpg", jpg, (long)len / 2);
    free(jpg);
    tfc_test_write("list.txt", "# path label\nrgb.png 0\ngrey.png 1\n\nrgb.jpg   2\n", -1);
    tfc_test_write("badlist.txt", "rgb.png 0\ntrunc.png 1\ngrey.png 1\n", -1);
    tfc_test_write("badjpg.txt", "rgb.jpg 0\ntrunc.jpg 1\nrgb.jpg 0\n", -1);
}

static tfc_status decode_file(const char *name, int channels, tfc_tensor *t, tfc_error *err)
{
    size_t len;
    char *buf = tfc_test_read(tfc_test_path(name), &len);
    tfc_image_limits lim = {0, 0};
    tfc_error_clear(err);
    tfc_status st = tfc_image_decode(buf, len, name, channels, &lim, t, err);
    free(buf);
    return st;
}

static void test_png_variants(void)
{
    write_fixtures();
    tfc_tensor t;
    tfc_error err;
    const char *names[] = {"rgb.png", "rgba.png", "rgb16.png", "grey.png", "ga.png"};
    const int stored[] = {3, 4, 3, 1, 2};
    for (int k = 0; k < 5; k++) {
        CU_ASSERT_EQUAL_FATAL(decode_file(names[k], 0, &t, &err), TFC_OK);
        CU_ASSERT_EQUAL(t.dtype, TFC_U8);
        CU_ASSERT_EQUAL(t.shape.dim[0], H);
        CU_ASSERT_EQUAL(t.shape.dim[1], W);
        CU_ASSERT_EQUAL(t.shape.dim[2], stored[k]);
        uint8_t *d = t.data;
        int ok = 1;
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                for (int c = 0; c < stored[k]; c++) ok &= d[(y * W + x) * stored[k] + c] == px(y, x, c);
        CU_ASSERT(ok);
        free(t.data);
    }
    /* Conversions: RGB to grey by luma, grey to RGB by replication. */
    CU_ASSERT_EQUAL_FATAL(decode_file("rgb.png", 1, &t, &err), TFC_OK);
    CU_ASSERT_EQUAL(t.shape.dim[2], 1);
    uint8_t r = px(2, 3, 0), g = px(2, 3, 1), b = px(2, 3, 2);
    CU_ASSERT_EQUAL(((uint8_t *)t.data)[2 * W + 3], (299 * r + 587 * g + 114 * b + 500) / 1000);
    free(t.data);
    CU_ASSERT_EQUAL_FATAL(decode_file("grey.png", 3, &t, &err), TFC_OK);
    CU_ASSERT_EQUAL(((uint8_t *)t.data)[(2 * W + 3) * 3 + 2], px(2, 3, 0));
    free(t.data);
    CU_ASSERT_EQUAL_FATAL(decode_file("pal.png", 3, &t, &err), TFC_OK);
    CU_ASSERT_EQUAL(((uint8_t *)t.data)[0], 10);
    CU_ASSERT_EQUAL(((uint8_t *)t.data)[3], 200);
    free(t.data);
    CU_ASSERT_EQUAL_FATAL(decode_file("rgba.png", 3, &t, &err), TFC_OK);
    CU_ASSERT_EQUAL(t.shape.dim[2], 3);
    CU_ASSERT_EQUAL(((uint8_t *)t.data)[5], px(0, 1, 2));
    free(t.data);
}

static void test_jpeg(void)
{
    write_fixtures();
    tfc_tensor t;
    tfc_error err;
    CU_ASSERT_EQUAL_FATAL(decode_file("rgb.jpg", 0, &t, &err), TFC_OK);
    CU_ASSERT_EQUAL(t.shape.dim[2], 3);
    double diff = 0;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < 3; c++)
                diff += abs(((uint8_t *)t.data)[(y * W + x) * 3 + c] - px(y, x, c));
    CU_ASSERT(diff / (W * H * 3) < 8); /* lossy, but close */
    free(t.data);
    CU_ASSERT_EQUAL_FATAL(decode_file("grey.jpg", 0, &t, &err), TFC_OK);
    CU_ASSERT_EQUAL(t.shape.dim[2], 1);
    free(t.data);
    CU_ASSERT_EQUAL_FATAL(decode_file("grey.jpg", 3, &t, &err), TFC_OK);
    CU_ASSERT_EQUAL(t.shape.dim[2], 3);
    free(t.data);
    /* A tall image (600 rows: the decoder sets row pointers 256 at a time): every row lands
     * where it belongs. Rows are flat, in a smooth vertical ramp that JPEG keeps closely. */
    enum { TW = 9, TH = 600 };
    static uint8_t tall[TH * TW * 3];
    for (int y = 0; y < TH; y++)
        for (int i = 0; i < TW * 3; i++) tall[y * TW * 3 + i] = (uint8_t)(20 + y / 3);
    CU_ASSERT_EQUAL_FATAL(tfc_image_write_jpeg(tfc_test_path("tall.jpg"), tall, TW, TH, 3, 100,
                                               &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(decode_file("tall.jpg", 3, &t, &err), TFC_OK);
    CU_ASSERT_EQUAL(t.shape.dim[0], TH);
    int off = 0;
    for (int y = 0; y < TH; y++) {
        double mean = 0;
        for (int i = 0; i < TW * 3; i++) mean += ((uint8_t *)t.data)[y * TW * 3 + i];
        off += fabs(mean / (TW * 3) - (20 + y / 3)) > 2;
    }
    CU_ASSERT_EQUAL(off, 0);
    free(t.data);
}

static void test_corrupt_and_limits(void)
{
    write_fixtures();
    tfc_tensor t;
    tfc_error err;
    const char *bad[] = {"trunc.png", "crc.png", "trunc.jpg", "list.txt"};
    for (int k = 0; k < 4; k++) {
        CU_ASSERT_EQUAL(decode_file(bad[k], 0, &t, &err), TFC_ERR_DATA);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, bad[k]));
    }
    size_t len;
    char *buf = tfc_test_read(tfc_test_path("rgb.png"), &len);
    tfc_image_limits lim = {5, 0};
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_image_decode(buf, len, "big.png", 0, &lim, &t, &err), TFC_ERR_DATA);
    lim = (tfc_image_limits){0, 40};
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_image_decode(buf, len, "big.png", 0, &lim, &t, &err), TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "exceeds the limits"));
    free(buf);
    buf = tfc_test_read(tfc_test_path("rgb.jpg"), &len);
    lim = (tfc_image_limits){0, 40};
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_image_decode(buf, len, "big.jpg", 0, &lim, &t, &err), TFC_ERR_DATA);
    free(buf);
}

static void test_directory_and_list_sources(void)
{
    write_fixtures();
    tfc_error err;
    tfc_pipeline *p = open_yaml("{type: images, directory: classes}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), 3);
    int n;
    const char *const *names = tfc_pipeline_class_names(p, &n);
    CU_ASSERT_EQUAL_FATAL(n, 2);
    CU_ASSERT_STRING_EQUAL(names[0], "cat");
    CU_ASSERT_STRING_EQUAL(names[1], "dog");
    const tfc_element_spec *s = tfc_pipeline_element_spec(p);
    CU_ASSERT_EQUAL(s->comp[0].shape.dim[2], 3);
    CU_ASSERT_EQUAL(s->comp[0].shape.dim[0], -1);
    int labels[3];
    for (int i = 0; i < 3; i++) {
        tfc_batch b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        CU_ASSERT_EQUAL(b.features.shape.dim[0], H);
        labels[i] = *(int32_t *)b.labels.data;
    }
    CU_ASSERT_EQUAL(labels[0], 0);
    CU_ASSERT_EQUAL(labels[1], 1);
    CU_ASSERT_EQUAL(labels[2], 1);
    tfc_pipeline_free(p);
    /* split: image 1 of every 2 is test (the dog's first), the others train; both keep the
     * class names */
    static const char *const parts[2] = {"train", "test"};
    for (int k = 0; k < 2; k++) {
        char yaml[128];
        snprintf(yaml, sizeof yaml, "{type: images, directory: classes, split: {every: 2, part: "
                 "%s, offset: 1}}", parts[k]);
        p = open_yaml(yaml, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), k ? 1 : 2);
        CU_ASSERT_PTR_NOT_NULL(tfc_pipeline_class_names(p, &n));
        CU_ASSERT_EQUAL(n, 2);
        tfc_batch b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        CU_ASSERT_EQUAL(*(int32_t *)b.labels.data, k); /* cat first in train, a dog in test */
        tfc_pipeline_free(p);
    }
    /* classes: picks and orders the folders, as Keras's class_names: dog is class 0 */
    p = open_yaml("{type: images, directory: classes, classes: [dog, cat]}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    names = tfc_pipeline_class_names(p, &n);
    CU_ASSERT(n == 2 && !strcmp(names[0], "dog") && !strcmp(names[1], "cat"));
    for (int i = 0; i < 3; i++) {
        tfc_batch b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        CU_ASSERT_EQUAL(*(int32_t *)b.labels.data, i < 2 ? 0 : 1); /* dog's two, then cat's */
    }
    tfc_pipeline_free(p);
    p = open_yaml("{type: images, directory: classes, classes: [dog]}", &err); /* a subset */
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), 2);
    tfc_pipeline_free(p);
    p = open_yaml("{type: images, directory: classes, split: {every: 2, part: test, "
                  "offset: 2}}", &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "split: offset 2 must be below every (2)"));
    p = open_yaml("{type: images, list: list.txt, channels: 1}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), 3);
    tfc_batch b;
    for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(*(int32_t *)b.labels.data, 2);
    CU_ASSERT_EQUAL(b.features.shape.dim[2], 1);
    tfc_pipeline_free(p);
    p = open_yaml("{type: images, list: list.txt, num_classes: 2}", &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_EQUAL(err.line, 5);
    p = open_yaml("{type: images, list: list.txt, directory: classes}", &err);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_EQUAL(err.code, TFC_ERR_CONFIG);
}

static void test_bad_file_in_pipeline(void)
{
    write_fixtures();
    tfc_error err;
    tfc_pipeline *p = open_yaml("{type: images, list: badlist.txt}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    tfc_batch b;
    CU_ASSERT_EQUAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_next(p, &b, &err), TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "trunc.png"));
    tfc_pipeline_free(p);
    p = open_yaml("{type: images, list: badlist.txt, on_error: skip}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_shuffle(p, 3, -1, 1, &err), TFC_OK);
    int n = 0;
    for (;;) {
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        if (b.end) break;
        n++;
    }
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT_EQUAL(tfc_pipeline_skipped(p), 1);
    tfc_pipeline_free(p);
    /* A JPEG decoder reused after a corrupt file decodes the next one as before. */
    p = open_yaml("{type: images, list: badjpg.txt, on_error: skip}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    uint8_t first[H * W * 3];
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    memcpy(first, b.features.data, sizeof first);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT(!b.end && memcmp(first, b.features.data, sizeof first) == 0);
    CU_ASSERT_EQUAL(tfc_pipeline_skipped(p), 1);
    tfc_pipeline_free(p);
    /* With decode: false the decode op reports the file too. */
    p = open_yaml("{type: images, list: badlist.txt, decode: false}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, "map: {op: decode_png, num_parallel_calls: 2}", &err),
                    TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_pipeline_next(p, &b, &err), TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "trunc.png"));
    tfc_pipeline_free(p);
}

/* Reads every element's features into one buffer; returns bytes. */
static size_t collect(tfc_pipeline *p, uint8_t *out, size_t cap)
{
    size_t n = 0;
    tfc_error err;
    tfc_error_clear(&err);
    for (;;) {
        tfc_batch b;
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        if (b.end) break;
        size_t k = (size_t)tfc_shape_numel(&b.features.shape) * tfc_dtype_size(b.features.dtype);
        if (n + k <= cap) memcpy(out + n, b.features.data, k);
        n += k;
    }
    return n;
}

static void test_parallel_decode_and_augment(void)
{
    write_fixtures();
    static uint8_t a[1 << 16], b[1 << 16];
    tfc_error err;
    const char *aug[] = {"map: {op: random_crop, size: [4, 6], padding: 2}",
                         "map: {op: random_flip, mode: horizontal_and_vertical}",
                         "map: {op: normalize, mean: [127, 127, 127], std: 64}"};
    /* Decoding in the source equals decoding in a map. */
    tfc_pipeline *p = open_yaml("{type: images, directory: classes}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    size_t na = collect(p, a, sizeof a);
    tfc_pipeline_free(p);
    p = open_yaml("{type: images, directory: classes, decode: false}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, "map: {op: decode_image, channels: 3}", &err), TFC_OK);
    size_t nb = collect(p, b, sizeof b);
    tfc_pipeline_free(p);
    CU_ASSERT_EQUAL(na, (size_t)3 * H * W * 3);
    CU_ASSERT(na == nb && memcmp(a, b, na) == 0);
    /* Augmenting serially equals augmenting in a parallel map. */
    p = open_yaml("{type: images, directory: classes, decode: false}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, "map: {op: decode_image, channels: 3}", &err), TFC_OK);
    for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, aug[i], &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_repeat(p, 4, &err), TFC_OK);
    const tfc_element_spec *s = tfc_pipeline_element_spec(p);
    CU_ASSERT_EQUAL(s->comp[0].dtype, TFC_F32);
    CU_ASSERT_EQUAL(s->comp[0].shape.dim[0], 4);
    CU_ASSERT_EQUAL(s->comp[0].shape.dim[1], 6);
    na = collect(p, a, sizeof a);
    tfc_pipeline_free(p);
    p = open_yaml("{type: images, directory: classes, decode: false}", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, "map: {op: decode_image, channels: 3}", &err), TFC_OK);
    for (int i = 0; i < 2; i++) CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, aug[i], &err), TFC_OK);
    char last[128];
    snprintf(last, sizeof last, "%s", aug[2]);
    memcpy(strstr(last, "}"), ", num_parallel_calls: 3}", 25);
    CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, last, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_repeat(p, 4, &err), TFC_OK);
    nb = collect(p, b, sizeof b);
    tfc_pipeline_free(p);
    CU_ASSERT_EQUAL(na, (size_t)4 * 3 * 4 * 6 * 3 * 4);
    CU_ASSERT_EQUAL(na, nb);
    CU_ASSERT(memcmp(a, b, na) == 0);
    /* The crops and flips vary between epochs. */
    size_t epoch = na / 4;
    CU_ASSERT(memcmp(a, a + epoch, epoch) != 0);
}

static void test_image_ops_exact(void)
{
    /* One 2x3 single-channel image through the ops, checked by hand. */
    uint8_t img[6] = {1, 2, 3, 4, 5, 6};
    tfc_tensor t = {TFC_U8, {.ndim = 4, .dim = {1, 2, 3, 1}}, img, -1};
    tfc_error err;
    tfc_error_clear(&err);
    tfc_data_options o = {.seed = 1};
    tfc_pipeline *p = tfc_pipeline_from_tensors(&t, NULL, &o, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, "map: {op: random_flip, probability: 1}", &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, "map: {op: resize, size: [4, 6], method: nearest}", &err),
                    TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, "map: {op: random_crop, size: [4, 6]}", &err), TFC_OK);
    tfc_batch b;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    uint8_t want[24] = {3, 3, 2, 2, 1, 1, 3, 3, 2, 2, 1, 1, 6, 6, 5, 5, 4, 4, 6, 6, 5, 5, 4, 4};
    CU_ASSERT_EQUAL(b.features.dtype, TFC_U8);
    CU_ASSERT(memcmp(b.features.data, want, sizeof want) == 0);
    tfc_pipeline_free(p);
    p = tfc_pipeline_from_tensors(&t, NULL, &o, &err);
    CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, "map: {op: resize, size: [2, 6]}", &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(b.features.dtype, TFC_F32);
    /* Half-pixel centres: x = 1 samples 0.25 → 1.25; x = 5 clamps to 3. */
    CU_ASSERT_DOUBLE_EQUAL(((float *)b.features.data)[1], 1.25, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(((float *)b.features.data)[5], 3.0, 1e-6);
    tfc_pipeline_free(p);
    /* RGB (3-byte pixels, the flip's fast path) flipped, then zero-padded by a crop that
     * covers the whole padded image (so its offset is 0): checked against loops here. */
    uint8_t rgb[2 * 3 * 3];
    for (int i = 0; i < 18; i++) rgb[i] = (uint8_t)(1 + i);
    tfc_tensor trgb = {TFC_U8, {.ndim = 4, .dim = {1, 2, 3, 3}}, rgb, -1};
    p = tfc_pipeline_from_tensors(&trgb, NULL, &o, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, "map: {op: random_flip, probability: 1}", &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, "map: {op: random_crop, size: [4, 5], padding: 1}", &err),
                    TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    uint8_t want_rgb[4 * 5 * 3] = {0};
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 3; x++)
            for (int c = 0; c < 3; c++)
                want_rgb[((y + 1) * 5 + (x + 1)) * 3 + c] = rgb[(y * 3 + (2 - x)) * 3 + c];
    CU_ASSERT_EQUAL(tfc_shape_numel(&b.features.shape), 60);
    CU_ASSERT(memcmp(b.features.data, want_rgb, sizeof want_rgb) == 0);
    tfc_pipeline_free(p);
    /* normalize on bytes: 5x7 RGB (105 values: whole 24-value blocks and a tail) with
     * per-channel and single constants, against the formula */
    uint8_t px3[5 * 7 * 3];
    for (int i = 0; i < 105; i++) px3[i] = (uint8_t)(i * 37 % 251);
    tfc_tensor t3 = {TFC_U8, {.ndim = 4, .dim = {1, 5, 7, 3}}, px3, -1};
    const char *norms[2] = {"map: {op: normalize, mean: [10, 20, 30], std: [2, 4, 8]}",
                            "map: {op: normalize, mean: 100, std: 50}"};
    for (int v = 0; v < 2; v++) {
        p = tfc_pipeline_from_tensors(&t3, NULL, &o, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, norms[v], &err), TFC_OK);
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        CU_ASSERT_EQUAL(b.features.dtype, TFC_F32);
        int bad = 0;
        for (int i = 0; i < 105; i++) {
            double mean = v ? 100 : 10 * (1 + i % 3), sd = v ? 50 : 2 << (i % 3);
            bad += fabs(((float *)b.features.data)[i] - (px3[i] - mean) / sd) > 1e-6;
        }
        CU_ASSERT_EQUAL(bad, 0);
        tfc_pipeline_free(p);
    }
    /* A crop that cannot fit is a config error before any data is read. */
    p = tfc_pipeline_from_tensors(&t, NULL, &o, &err);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, "map: {op: random_crop, size: 5}", &err),
                    TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "does not fit"));
    tfc_pipeline_free(p);
}

/* The SIMD paths (RGB row reversal five pixels at a time, byte normalisation 8 * channels
 * values at a time) at widths around their block sizes, against plain loops. */
static void test_flip_normalize_widths(void)
{
    const int widths[] = {1, 2, 5, 6, 7, 10, 11, 12, 16, 17, 64, 67};
    tfc_error err;
    tfc_error_clear(&err);
    tfc_data_options o = {.seed = 3};
    uint8_t img[2 * 67 * 4];
    for (int i = 0; i < (int)sizeof img; i++) img[i] = (uint8_t)(i * 97 % 253 + 1);
    for (size_t k = 0; k < sizeof widths / sizeof *widths; k++) {
        int w = widths[k];
        for (int ch = 1; ch <= 4; ch++) {
            tfc_tensor t = {TFC_U8, {.ndim = 4, .dim = {1, 2, w, ch}}, img, -1};
            /* flip */
            tfc_pipeline *p = tfc_pipeline_from_tensors(&t, NULL, &o, &err);
            CU_ASSERT_PTR_NOT_NULL_FATAL(p);
            CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, "map: {op: random_flip, probability: 1}",
                                                  &err), TFC_OK);
            tfc_batch b;
            CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
            const uint8_t *got = b.features.data;
            int bad = 0;
            for (int y = 0; y < 2; y++)
                for (int x = 0; x < w; x++)
                    for (int c = 0; c < ch; c++)
                        bad += got[(y * w + x) * ch + c] != img[(y * w + (w - 1 - x)) * ch + c];
            if (bad) printf("\n  flip: width %d, %d channels: %d bytes wrong\n", w, ch, bad);
            CU_ASSERT_EQUAL(bad, 0);
            tfc_pipeline_free(p);
            /* normalize with one constant per channel */
            p = tfc_pipeline_from_tensors(&t, NULL, &o, &err);
            CU_ASSERT_PTR_NOT_NULL_FATAL(p);
            char yaml[200];
            const char *means[4] = {"3", "7", "[3, 50, 9]", "[3, 50, 9, 200]"};
            const char *stds[4] = {"2", "3", "[2, 4, 0.5]", "[2, 4, 0.5, 8]"};
            /* two channels: one constant for both */
            snprintf(yaml, sizeof yaml, "map: {op: normalize, mean: %s, std: %s}", means[ch - 1],
                     stds[ch - 1]);
            const double mv[4][4] = {{3}, {7, 7}, {3, 50, 9}, {3, 50, 9, 200}};
            const double sv[4][4] = {{2}, {3, 3}, {2, 4, 0.5}, {2, 4, 0.5, 8}};
            CU_ASSERT_EQUAL(tfc_pipeline_add_yaml(p, yaml, &err), TFC_OK);
            CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
            const float *f = b.features.data;
            bad = 0;
            for (int i = 0; i < 2 * w * ch; i++) {
                double want = (img[i] - mv[ch - 1][i % ch]) / sv[ch - 1][i % ch];
                bad += fabs(f[i] - want) > 1e-5 * (1 + fabs(want));
            }
            if (bad) printf("\n  normalize: width %d, %d channels: %d wrong\n", w, ch, bad);
            CU_ASSERT_EQUAL(bad, 0);
            tfc_pipeline_free(p);
        }
    }
}

TFC_TEST_MAIN("data_images",
              {"flip_normalize_widths", test_flip_normalize_widths},
              {"png_variants", test_png_variants},
              {"jpeg", test_jpeg},
              {"corrupt_and_limits", test_corrupt_and_limits},
              {"directory_and_list_sources", test_directory_and_list_sources},
              {"bad_file_in_pipeline", test_bad_file_in_pipeline},
              {"parallel_decode_and_augment", test_parallel_decode_and_augment},
              {"image_ops_exact", test_image_ops_exact})
