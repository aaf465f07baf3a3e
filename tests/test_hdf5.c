/* HDF5 reader (src/core/hdf5.c): every fixture of tests/ref/hdf5/ (made by h5py and Keras,
 * tests/ref/hdf5_fixtures.py) read object by object and compared with what h5py read in
 * it (expected.json: order, paths, dtypes, shapes, bytes, attribute strings), the refused
 * and damaged fixtures' exact errors, and every truncation and many byte corruptions of a
 * Keras weights file, which must fail cleanly (a format error with a message) or parse. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/hdf5.h"
#include "core/tensor.h"
#include "util/testutil.h"

#define DIR "tests/ref/hdf5/"

static json_t *expected(void)
{
    json_error_t je;
    json_t *root = json_load_file(DIR "expected.json", 0, &je);
    if (!root) printf("\n%s: %s\n", DIR "expected.json", je.text);
    TFC_ASSERT(root != NULL);
    return root;
}

static int hex_equal(const void *data, size_t n, const char *hex)
{
    if (strlen(hex) != 2 * n) return 0;
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1 || v != p[i]) return 0;
    }
    return 1;
}

/* The attributes of `o` against {name: [strings] or null}. */
static void check_attrs(const char *file, const tfc_h5_object *o, json_t *attrs)
{
    CU_ASSERT_EQUAL(o->n_attrs, (int)json_object_size(attrs));
    const char *key;
    json_t *want;
    json_object_foreach(attrs, key, want) {
        const tfc_h5_attr *a = tfc_h5_attr_find(o, key);
        CU_ASSERT_PTR_NOT_NULL(a);
        if (!a) {
            printf("\n  %s: '%s' has no attribute '%s'\n", file, o->path, key);
            continue;
        }
        int n = json_is_array(want) ? (int)json_array_size(want) : 0;
        CU_ASSERT_EQUAL(a->n_strings, n);
        if (a->n_strings != n) {
            printf("\n  %s: '%s' @%s: %d strings, want %d\n", file, o->path, key,
                   a->n_strings, n);
            continue;
        }
        for (int i = 0; i < n; i++) {
            const char *w = json_string_value(json_array_get(want, (size_t)i));
            CU_ASSERT_STRING_EQUAL(a->strings[i], w);
        }
    }
}

static void check_object(const char *file, const tfc_h5_file *f, int i, json_t *want)
{
    const tfc_h5_object *o = tfc_h5_object_at(f, i);
    const char *path = json_string_value(json_object_get(want, "path"));
    CU_ASSERT_STRING_EQUAL(o->path, path);
    if (strcmp(o->path, path) != 0) printf("\n  %s: object %d is '%s', want '%s'\n", file, i,
                                           o->path, path);
    CU_ASSERT_PTR_EQUAL(tfc_h5_find(f, path), o);
    json_t *dtype = json_object_get(want, "dtype");
    CU_ASSERT_EQUAL(o->is_dataset, dtype != NULL);
    check_attrs(file, o, json_object_get(want, "attrs"));
    if (!dtype || !o->is_dataset) return;
    CU_ASSERT_STRING_EQUAL(tfc_dtype_name(o->dtype), json_string_value(dtype));
    json_t *shape = json_object_get(want, "shape");
    CU_ASSERT_EQUAL(o->shape.ndim, (int)json_array_size(shape));
    int64_t numel = 1;
    for (int d = 0; d < o->shape.ndim; d++) {
        CU_ASSERT_EQUAL(o->shape.dim[d], json_integer_value(json_array_get(shape, (size_t)d)));
        numel *= o->shape.dim[d];
    }
    CU_ASSERT_EQUAL(o->numel, numel);
    CU_ASSERT_EQUAL(o->nbytes, (size_t)numel * tfc_dtype_size(o->dtype));
    CU_ASSERT_EQUAL(o->data == NULL, o->nbytes == 0);
    int same = hex_equal(o->data, o->nbytes, json_string_value(json_object_get(want, "hex")));
    CU_ASSERT(same);
    if (!same) printf("\n  %s: the bytes of '%s' differ from h5py's\n", file, o->path);
}

static void check_file(const char *name, json_t *want)
{
    char path[256];
    snprintf(path, sizeof path, DIR "%s", name);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_h5_file *f = tfc_h5_open(path, &err);
    json_t *objects = json_object_get(want, "objects");
    if (!objects) {
        const char *code = json_string_value(json_object_get(want, "error"));
        const char *needle = json_string_value(json_object_get(want, "needle"));
        CU_ASSERT_PTR_NULL(f);
        CU_ASSERT_EQUAL(err.code, strcmp(code, "USAGE") == 0 ? TFC_ERR_USAGE : TFC_ERR_FORMAT);
        CU_ASSERT_STRING_EQUAL(err.file, path);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, needle));
        if (!strstr(err.msg, needle)) printf("\n  %s: want '%s' in: %s\n", name, needle, err.text);
        tfc_h5_close(f);
        return;
    }
    CU_ASSERT_PTR_NOT_NULL(f);
    if (!f) {
        printf("\n  %s", err.text);
        return;
    }
    CU_ASSERT_EQUAL(tfc_h5_count(f), (int)json_array_size(objects));
    for (int i = 0; i < tfc_h5_count(f) && i < (int)json_array_size(objects); i++)
        check_object(name, f, i, json_array_get(objects, (size_t)i));
    CU_ASSERT_PTR_NULL(tfc_h5_find(f, "no/such/object"));
    CU_ASSERT_PTR_NULL(tfc_h5_attr_find(tfc_h5_object_at(f, 0), "no such attribute"));
    tfc_h5_close(f);
}

/* Every fixture against h5py's reading of it (or its expected error). */
static void test_fixtures(void)
{
    json_t *root = expected();
    const char *name;
    json_t *want;
    int files = 0;
    json_object_foreach(root, name, want) {
        check_file(name, want);
        files++;
    }
    CU_ASSERT(files >= 21);
    json_decref(root);
}

/* The Keras files as the importer will look at them. */
static void test_keras_files(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_h5_file *f = tfc_h5_open(DIR "keras3.weights.h5", &err);
    TFC_ASSERT(f != NULL);
    const tfc_h5_object *g = tfc_h5_find(f, "layers/dense/vars");
    CU_ASSERT_PTR_NOT_NULL(g);
    const tfc_h5_attr *a = g ? tfc_h5_attr_find(g, "name") : NULL;
    CU_ASSERT(a && a->n_strings == 1 && strcmp(a->strings[0], "dense") == 0);
    const tfc_h5_object *k = tfc_h5_find(f, "layers/dense/vars/0");
    CU_ASSERT(k && k->is_dataset && k->dtype == TFC_F32 && k->shape.ndim == 2 &&
              k->shape.dim[0] == 4 && k->shape.dim[1] == 3);
    tfc_h5_close(f);

    f = tfc_h5_open(DIR "keras_legacy.h5", &err);
    TFC_ASSERT(f != NULL);
    a = tfc_h5_attr_find(tfc_h5_object_at(f, 0), "model_config");
    CU_ASSERT(a && a->n_strings == 1 && strncmp(a->strings[0], "{\"class_name\": ", 15) == 0);
    a = tfc_h5_attr_find(tfc_h5_find(f, "model_weights"), "layer_names");
    CU_ASSERT(a && a->n_strings == 3 && strcmp(a->strings[2], "out") == 0);
    tfc_h5_close(f);

    f = tfc_h5_open(DIR "types.h5", &err);
    TFC_ASSERT(f != NULL);
    k = tfc_h5_find(f, "model_weights/dense/dense/kernel:0");
    CU_ASSERT(k && k->is_dataset && k->dtype == TFC_F32);
    tfc_h5_close(f);
}

/* tfc_h5_parse reads in place: the data points into the caller's buffer. */
static void test_parse_in_place(void)
{
    size_t len;
    char *buf = tfc_test_read(DIR "types.h5", &len);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_h5_file *f = tfc_h5_parse(buf, len, "types.h5", &err);
    TFC_ASSERT(f != NULL);
    const tfc_h5_object *o = tfc_h5_find(f, "scalar");
    CU_ASSERT(o && (const char *)o->data > buf && (const char *)o->data + 4 <= buf + len);
    float v = 0;
    if (o) memcpy(&v, o->data, 4);
    CU_ASSERT_EQUAL(v, 2.5f);
    o = tfc_h5_find(f, "unwritten"); /* zeros, not in the file */
    CU_ASSERT(o && o->nbytes == 16 && o->data != NULL);
    CU_ASSERT(o && ((const char *)o->data < buf || (const char *)o->data >= buf + len));
    o = tfc_h5_find(f, "empty");
    CU_ASSERT(o && o->numel == 0 && o->data == NULL && o->shape.dim[0] == 0);
    tfc_h5_close(f);
    free(buf);

    f = tfc_h5_open("no/such/file.h5", &err);
    CU_ASSERT_PTR_NULL(f);
    CU_ASSERT_EQUAL(err.code, TFC_ERR_USAGE);
}

/* A parse of damaged bytes: NULL with a format error (or no signature: usage) and a
 * message, or a file whose objects all stay inside the rules. */
static int parse_damaged(const char *buf, size_t len)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_h5_file *f = tfc_h5_parse(buf, len, "damaged.h5", &err);
    if (!f) {
        int ok = (err.code == TFC_ERR_FORMAT || err.code == TFC_ERR_USAGE) && err.msg[0];
        if (!ok) printf("\n  code %d: %s\n", err.code, err.text);
        return ok ? 0 : 1;
    }
    int bad = 0;
    for (int i = 0; i < tfc_h5_count(f); i++) {
        const tfc_h5_object *o = tfc_h5_object_at(f, i);
        bad += tfc_h5_find(f, o->path) != o;
        bad += o->is_dataset && o->nbytes != (size_t)o->numel * tfc_dtype_size(o->dtype);
    }
    tfc_h5_close(f);
    return bad;
}

static void test_damaged(void)
{
    size_t len;
    char *buf = tfc_test_read(DIR "keras3.weights.h5", &len);
    char *copy = malloc(len);
    int bad = 0, parsed = 0;
    for (size_t n = 0; n < len; n += 7) {
        memcpy(copy, buf, n);
        bad += parse_damaged(copy, n);
    }
    /* Every byte set to 0xff, and to its value + 1. */
    for (size_t i = 0; i < len; i++) {
        for (int k = 0; k < 2; k++) {
            memcpy(copy, buf, len);
            copy[i] = k ? (char)(copy[i] + 1) : (char)0xff;
            int b = parse_damaged(copy, len);
            bad += b;
            tfc_error err;
            tfc_h5_file *f = tfc_h5_parse(copy, len, "x", &err);
            parsed += f != NULL;
            tfc_h5_close(f);
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(parsed > 0); /* some bytes (padding, checksums, data) do not matter */
    free(copy);
    free(buf);
}

TFC_TEST_MAIN("hdf5", {"fixtures", test_fixtures}, {"keras_files", test_keras_files},
              {"parse_in_place", test_parse_in_place}, {"damaged", test_damaged})
