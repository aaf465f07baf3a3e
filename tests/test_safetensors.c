/* Safetensors reader/writer, atomic file writes and tensor helpers: round trips, a
 * byte-exact file, every format rule's rejection message, writes under a file-size limit,
 * and (when python3 has the safetensors package, or the tool is built) interoperability
 * with the reference implementation and tfc-inspect. Unavailable parts call tfc_test_skip. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "core/fileio.h"
#include "core/safetensors.h"
#include "core/tensor.h"
#include "util/testutil.h"

/* ---- helpers ------------------------------------------------------------------------------ */

/* A file image: 8-byte little-endian length of `json`, `json`, then `data_len` bytes. */
static unsigned char *make_file(const char *json, size_t data_len, size_t *len)
{
    size_t hl = strlen(json);
    unsigned char *b = calloc(1, 8 + hl + data_len + 1);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((unsigned long long)hl >> (8 * i));
    memcpy(b + 8, json, hl);
    *len = 8 + hl + data_len;
    return b;
}

/* The code a rejection has: a file that is no safetensors at all (a header length past the
 * limit, a header not starting with '{') is of the wrong kind, TFC_ERR_USAGE (exit 2); any
 * other fault is a damaged or malformed file, TFC_ERR_FORMAT. */
static tfc_status code_for(const char *needle)
{
    return strstr(needle, "byte limit") || strstr(needle, "not a JSON object") ||
                   strstr(needle, "does not start with '{'")
               ? TFC_ERR_USAGE
               : TFC_ERR_FORMAT;
}

/* Parses `json` + data_len zero bytes and expects a format error containing `needle`. */
static void expect_reject_json(const char *json, size_t data_len, const char *needle)
{
    size_t len;
    unsigned char *b = make_file(json, data_len, &len);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_parse(b, len, "model.safetensors", &err);
    CU_ASSERT_PTR_NULL(f);
    CU_ASSERT_EQUAL(err.code, code_for(needle));
    CU_ASSERT_STRING_EQUAL(err.file, "model.safetensors");
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, needle));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "model.safetensors: error: "));
    if (!strstr(err.msg, needle)) printf("\n  expected '%s' in: %s\n", needle, err.msg);
    tfc_st_close(f);
    free(b);
}

static void expect_reject_bytes(const void *b, size_t len, const char *needle)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_parse(b, len, "model.safetensors", &err);
    CU_ASSERT_PTR_NULL(f);
    CU_ASSERT_EQUAL(err.code, code_for(needle));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, needle));
    if (!strstr(err.msg, needle)) printf("\n  expected '%s' in: %s\n", needle, err.msg);
    tfc_st_close(f);
}

static tfc_st_file *expect_accept_json(const char *json, size_t data_len, unsigned char **keep)
{
    size_t len;
    unsigned char *b = make_file(json, data_len, &len);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_parse(b, len, "ok.safetensors", &err);
    CU_ASSERT_PTR_NOT_NULL(f);
    if (!f) printf("\n  unexpected error: %s", err.text);
    *keep = b;
    return f;
}

/* Files in the scratch directory whose name contains ".tmp-" (left-over temporaries). */
static int count_temp_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, ".tmp-")) n++;
    closedir(d);
    return n;
}

static tfc_shape shape_of(int ndim, const int64_t *dims)
{
    return tfc_shape_make(ndim, dims);
}

/* ---- tensor.h helpers --------------------------------------------------------------------- */

static void test_dtype_names(void)
{
    static const char *const expected[] = {"F32", "F64", "F16", "BF16", "I8", "U8", "I16",
                                           "U16", "I32", "U32", "I64", "U64", "BOOL"};
    for (int i = 0; i < TFC_DTYPE_COUNT; i++) {
        CU_ASSERT_STRING_EQUAL(tfc_dtype_name((tfc_dtype)i), expected[i]);
        CU_ASSERT_EQUAL(tfc_dtype_from_name(expected[i]), i);
    }
    CU_ASSERT_EQUAL(tfc_dtype_from_name("f32"), -1);
    CU_ASSERT_EQUAL(tfc_dtype_from_name("F8_E4M3"), -1);
    CU_ASSERT_EQUAL(tfc_dtype_from_name(""), -1);
    CU_ASSERT_EQUAL(tfc_dtype_from_name(NULL), -1);

    char buf[64];
    tfc_shape s = shape_of(3, (int64_t[]){28, 28, 1});
    CU_ASSERT_STRING_EQUAL(tfc_shape_str(&s, buf, sizeof buf), "(28, 28, 1)");
    s = shape_of(1, (int64_t[]){5});
    CU_ASSERT_STRING_EQUAL(tfc_shape_str(&s, buf, sizeof buf), "(5,)");
    s = shape_of(0, NULL);
    CU_ASSERT_STRING_EQUAL(tfc_shape_str(&s, buf, sizeof buf), "()");
    s = shape_of(3, (int64_t[]){123456, 123456, 123456});
    tfc_shape_str(&s, buf, 8); /* cut short, still terminated */
    CU_ASSERT_STRING_EQUAL(buf, "(123456");
}

/* ---- round trips -------------------------------------------------------------------------- */

static void test_roundtrip(void)
{
    float f32[6] = {1.5f, -2.0f, 0.25f, 3e-8f, -0.0f, 1e30f};
    double f64[2] = {3.141592653589793, -1e-300};
    uint16_t f16 = 0x3e00;                   /* 1.5 */
    uint16_t bf16[2] = {0x3fc0, 0xc000};     /* 1.5, -2 */
    int64_t i64[3] = {-1, INT64_MAX, 42};
    uint8_t u8[5] = {0, 1, 2, 254, 255};
    uint8_t flags[2] = {1, 0};
    int32_t scalar = -7;
    int8_t i8[3] = {-128, 0, 127};

    tfc_st_writer *w = tfc_st_writer_create();
    tfc_error err;
    tfc_error_clear(&err);
    tfc_shape s;
    s = shape_of(2, (int64_t[]){2, 3});
    CU_ASSERT_EQUAL(tfc_st_writer_add(w, "dense/kernel", TFC_F32, &s, f32, &err), TFC_OK);
    s = shape_of(1, (int64_t[]){2});
    CU_ASSERT_EQUAL(tfc_st_writer_add(w, "f64", TFC_F64, &s, f64, &err), TFC_OK);
    s = shape_of(0, NULL);
    CU_ASSERT_EQUAL(tfc_st_writer_add(w, "half_scalar", TFC_F16, &s, &f16, &err), TFC_OK);
    s = shape_of(2, (int64_t[]){0, 4});
    CU_ASSERT_EQUAL(tfc_st_writer_add(w, "empty", TFC_F32, &s, NULL, &err), TFC_OK);
    s = shape_of(1, (int64_t[]){2});
    CU_ASSERT_EQUAL(tfc_st_writer_add(w, "bf16", TFC_BF16, &s, bf16, &err), TFC_OK);
    s = shape_of(1, (int64_t[]){3});
    CU_ASSERT_EQUAL(tfc_st_writer_add(w, "i64", TFC_I64, &s, i64, &err), TFC_OK);
    s = shape_of(1, (int64_t[]){5});
    CU_ASSERT_EQUAL(tfc_st_writer_add(w, "u8", TFC_U8, &s, u8, &err), TFC_OK);
    s = shape_of(1, (int64_t[]){2});
    CU_ASSERT_EQUAL(tfc_st_writer_add(w, "flags", TFC_BOOL, &s, flags, &err), TFC_OK);
    s = shape_of(0, NULL);
    CU_ASSERT_EQUAL(tfc_st_writer_add(w, "step", TFC_I32, &s, &scalar, &err), TFC_OK);
    s = shape_of(1, (int64_t[]){3});
    CU_ASSERT_EQUAL(tfc_st_writer_add(w, "i8", TFC_I8, &s, i8, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_st_writer_set_meta(w, "name", "first", &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_st_writer_set_meta(w, "tfc_version", "0.1.0", &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_st_writer_set_meta(w, "name", "fashion_cnn", &err), TFC_OK);

    const char *path = tfc_test_path("rt.safetensors");
    CU_ASSERT_EQUAL(tfc_st_writer_save(w, path, &err), TFC_OK);
    void *mem;
    size_t memlen;
    CU_ASSERT_EQUAL(tfc_st_writer_to_buffer(w, &mem, &memlen, &err), TFC_OK);
    tfc_st_writer_free(w);

    size_t flen;
    char *file = tfc_test_read(path, &flen);
    CU_ASSERT_EQUAL(flen, memlen);
    CU_ASSERT(file && memcmp(file, mem, memlen) == 0);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | (unsigned char)file[i];
    CU_ASSERT_EQUAL(hl % 8, 0);
    free(file);
    free(mem);

    tfc_st_file *f = tfc_st_open(path, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(tfc_st_count(f), 10);
    static const char *const order[] = {"dense/kernel", "f64", "half_scalar", "empty", "bf16",
                                        "i64", "u8", "flags", "step", "i8"};
    for (int i = 0; i < 10; i++) CU_ASSERT_STRING_EQUAL(tfc_st_tensor_at(f, i)->name, order[i]);
    CU_ASSERT_PTR_NULL(tfc_st_tensor_at(f, 10));
    CU_ASSERT_EQUAL(tfc_st_data_size(f), 24 + 16 + 2 + 0 + 4 + 24 + 5 + 2 + 4 + 3);

    const tfc_st_tensor *t = tfc_st_find(f, "dense/kernel");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(t->dtype, TFC_F32);
    CU_ASSERT_EQUAL(t->shape.ndim, 2);
    CU_ASSERT_EQUAL(t->shape.dim[0], 2);
    CU_ASSERT_EQUAL(t->shape.dim[1], 3);
    CU_ASSERT_EQUAL(t->numel, 6);
    CU_ASSERT_EQUAL(t->nbytes, 24);
    CU_ASSERT_EQUAL(t->offset, 0);
    CU_ASSERT(memcmp(t->data, f32, sizeof f32) == 0);

    t = tfc_st_find(f, "f64");
    CU_ASSERT(t && t->offset == 24 && memcmp(t->data, f64, sizeof f64) == 0);
    t = tfc_st_find(f, "half_scalar");
    CU_ASSERT(t && t->shape.ndim == 0 && t->numel == 1 && t->nbytes == 2);
    float v[8];
    tfc_st_tensor_to_f32(t, v);
    CU_ASSERT_DOUBLE_EQUAL(v[0], 1.5, 0);
    t = tfc_st_find(f, "empty");
    CU_ASSERT(t && t->numel == 0 && t->nbytes == 0 && t->shape.ndim == 2 && t->shape.dim[0] == 0);
    t = tfc_st_find(f, "bf16");
    tfc_st_tensor_to_f32(t, v);
    CU_ASSERT(v[0] == 1.5f && v[1] == -2.0f);
    t = tfc_st_find(f, "i64");
    CU_ASSERT(t && memcmp(t->data, i64, sizeof i64) == 0);
    t = tfc_st_find(f, "u8");
    tfc_st_tensor_to_f32(t, v);
    CU_ASSERT(v[3] == 254.0f && v[4] == 255.0f);
    t = tfc_st_find(f, "flags");
    CU_ASSERT(t && t->dtype == TFC_BOOL && memcmp(t->data, flags, 2) == 0);
    t = tfc_st_find(f, "step");
    tfc_st_tensor_to_f32(t, v);
    CU_ASSERT(t && t->dtype == TFC_I32 && v[0] == -7.0f);
    t = tfc_st_find(f, "i8");
    tfc_st_tensor_to_f32(t, v);
    CU_ASSERT(v[0] == -128.0f && v[2] == 127.0f);
    CU_ASSERT_PTR_NULL(tfc_st_find(f, "dense"));
    CU_ASSERT_PTR_NULL(tfc_st_find(f, "zzz"));

    CU_ASSERT_EQUAL(tfc_st_meta_count(f), 2);
    CU_ASSERT_STRING_EQUAL(tfc_st_meta(f, "name"), "fashion_cnn");
    CU_ASSERT_STRING_EQUAL(tfc_st_meta(f, "tfc_version"), "0.1.0");
    CU_ASSERT_PTR_NULL(tfc_st_meta(f, "missing"));
    const char *k, *val;
    tfc_st_meta_at(f, 0, &k, &val);
    CU_ASSERT_STRING_EQUAL(k, "name");
    tfc_st_meta_at(f, 1, &k, &val);
    CU_ASSERT_STRING_EQUAL(val, "0.1.0");
    tfc_st_close(f);
}

/* One F32 tensor and one metadata entry, compared byte for byte with the layout worked out
 * by hand: the 79-byte header is padded with one space to 80 (0x50). */
static void test_byte_exact(void)
{
    static const unsigned char expected[] =
        "\x50\0\0\0\0\0\0\0"
        "{\"__metadata__\":{\"k\":\"v\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
        "\"data_offsets\":[0,8]}} "
        "\x00\x00\x80\x3f\x00\x00\x00\x40";
    float a[2] = {1.0f, 2.0f};
    tfc_st_writer *w = tfc_st_writer_create();
    tfc_shape s = shape_of(1, (int64_t[]){2});
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_st_writer_add(w, "a", TFC_F32, &s, a, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_st_writer_set_meta(w, "k", "v", &err), TFC_OK);
    const char *path = tfc_test_path("exact.safetensors");
    CU_ASSERT_EQUAL(tfc_st_writer_save(w, path, &err), TFC_OK);
    tfc_st_writer_free(w);
    size_t len;
    char *got = tfc_test_read(path, &len);
    CU_ASSERT_EQUAL(len, sizeof expected - 1);
    CU_ASSERT_EQUAL(len, 96);
    CU_ASSERT(got && len == sizeof expected - 1 && memcmp(got, expected, len) == 0);
    free(got);

    /* No metadata: no __metadata__ key at all, and an empty file is just "{}" padded. */
    w = tfc_st_writer_create();
    void *mem;
    CU_ASSERT_EQUAL(tfc_st_writer_to_buffer(w, &mem, &len, &err), TFC_OK);
    CU_ASSERT_EQUAL(len, 16);
    CU_ASSERT(memcmp(mem, "\x08\0\0\0\0\0\0\0{}      ", 16) == 0);
    free(mem);
    tfc_st_writer_free(w);
}

static void test_writer_errors(void)
{
    float x[4] = {0};
    tfc_st_writer *w = tfc_st_writer_create();
    tfc_error err;
    tfc_shape s = shape_of(1, (int64_t[]){4});
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_st_writer_add(w, "x", TFC_F32, &s, x, &err), TFC_OK);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_st_writer_add(w, "x", TFC_F32, &s, x, &err), TFC_ERR_INTERNAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "'x' added twice"));
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_st_writer_add(w, "", TFC_F32, &s, x, &err), TFC_ERR_INTERNAL);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_st_writer_add(w, "__metadata__", TFC_F32, &s, x, &err), TFC_ERR_INTERNAL);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_st_writer_add(w, "bad\xff", TFC_F32, &s, x, &err), TFC_ERR_INTERNAL);
    tfc_shape neg = shape_of(2, (int64_t[]){2, -1});
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_st_writer_add(w, "neg", TFC_F32, &neg, x, &err), TFC_ERR_INTERNAL);
    tfc_shape huge = shape_of(2, (int64_t[]){INT64_MAX / 2, 3});
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_st_writer_add(w, "huge", TFC_F32, &huge, x, &err), TFC_ERR_INTERNAL);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_st_writer_add(w, "nodata", TFC_F32, &s, NULL, &err), TFC_ERR_INTERNAL);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_st_writer_set_meta(w, "k", "\xc3", &err), TFC_ERR_INTERNAL);

    /* The failed adds changed nothing: the file holds x alone. */
    void *mem;
    size_t len;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_st_writer_to_buffer(w, &mem, &len, &err), TFC_OK);
    tfc_st_file *f = tfc_st_parse(mem, len, "mem", &err);
    CU_ASSERT(f && tfc_st_count(f) == 1 && tfc_st_meta_count(f) == 0);
    tfc_st_close(f);
    free(mem);

    /* A save into a missing directory fails with the path and the reason. */
    tfc_error_clear(&err);
    const char *bad = tfc_test_path("no/such/dir/w.safetensors");
    CU_ASSERT_EQUAL(tfc_st_writer_save(w, bad, &err), TFC_ERR_IO);
    CU_ASSERT_STRING_EQUAL(err.file, bad);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "No such file or directory"));
    tfc_st_writer_free(w);
}

/* ---- rejection ---------------------------------------------------------------------------- */

#define T(name, dtype, shape, b, e) \
    "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

static void test_reject_prefix(void)
{
    expect_reject_bytes("\x10\0\0\0\0", 5, "the file is 5 bytes, too short for the 8-byte header");
    expect_reject_bytes("", 0, "the file is 0 bytes");
    /* Header length 100 but only 10 bytes follow. */
    unsigned char b[18] = {100, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    expect_reject_bytes(b, sizeof b, "the header length 100 is more than the 10 bytes that follow");
    /* 200,000,000 = 0x0BEBC200: refused before anything is allocated for it. */
    unsigned char big[16] = {0x00, 0xc2, 0xeb, 0x0b, 0, 0, 0, 0, '{', '}'};
    expect_reject_bytes(big, sizeof big, "the header length 200000000 is more than the 100000000-byte limit");
    unsigned char huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    expect_reject_bytes(huge, sizeof huge, "more than the 100000000-byte limit");
}

static void test_reject_json(void)
{
    expect_reject_json("{not json}", 0, "the header is not valid JSON (near byte 12): string or '}' expected near 'not'");
    expect_reject_json("{\"a\":1", 0, "not valid JSON");
    expect_reject_json("[1,2]", 0, "the header is not a JSON object");
    expect_reject_json("  {}", 0, "does not start with '{'");
    expect_reject_json("", 0, "the header is not a JSON object");
    expect_reject_json("{}xyz", 0, "not valid JSON");
    expect_reject_json("{\"a\":\"\xff\"}", 0, "not valid JSON"); /* not UTF-8 */
    expect_reject_json("{\"a\\u0000b\":{}}", 0, "not valid JSON"); /* NUL in a name */
    expect_reject_json("{" T("a", "F32", "[99999999999999999999]", 0, 4) "}", 4, "not valid JSON");
    expect_reject_json("{" T("a", "F32", "[1]", 0, 4) "," T("a", "F32", "[1]", 4, 8) "}", 8,
                       "the header repeats a name");
    expect_reject_json("{\"__metadata__\":{},\"__metadata__\":{}}", 0, "repeats a name");
}

static void test_reject_entries(void)
{
    expect_reject_json("{" T("w", "F31", "[1]", 0, 4) "}", 4,
                       "tensor 'w': unknown or unsupported dtype 'F31' (known: F32, F64");
    expect_reject_json("{" T("w", "F8_E4M3", "[1]", 0, 1) "}", 1, "unsupported dtype 'F8_E4M3'");
    expect_reject_json("{\"w\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                       "tensor 'w': dtype must be a string, found an integer");
    expect_reject_json("{" T("w", "F32", "[2,-1]", 0, 4) "}", 4,
                       "tensor 'w': shape[1] is -1, expected a non-negative integer");
    expect_reject_json("{" T("w", "F32", "[2.0]", 0, 8) "}", 8,
                       "tensor 'w': shape[0] is a real number, expected a non-negative integer");
    expect_reject_json("{" T("w", "F32", "[\"2\"]", 0, 8) "}", 8, "shape[0] is a string");
    expect_reject_json("{" T("w", "F32", "7", 0, 28) "}", 28,
                       "tensor 'w': shape must be an array of non-negative integers, found an integer");
    expect_reject_json("{" T("w", "U8", "[1,1,1,1,1,1,1,1,1]", 0, 1) "}", 1,
                       "tensor 'w': shape has 9 dimensions, tfc supports at most 8");
    expect_reject_json("{\"w\":[1,2]}", 0,
                       "tensor 'w': expected an object with dtype, shape and data_offsets, found an array");
    expect_reject_json("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "tensor 'w': missing 'data_offsets'");
    expect_reject_json("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'w': missing 'dtype'");
    expect_reject_json("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4,
                       "tensor 'w': unexpected key 'x'");
    expect_reject_json("{" T("", "F32", "[1]", 0, 4) "}", 4, "a tensor has an empty name");
    expect_reject_json("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4,
                       "tensor 'w': data_offsets must be [begin, end], two non-negative integers");
    expect_reject_json("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8,
                       "data_offsets must be [begin, end]");
    expect_reject_json("{" T("w", "F32", "[1]", -4, 0) "}", 4, "data_offsets must be [begin, end]");
    expect_reject_json("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.0]}}", 4,
                       "data_offsets must be [begin, end]");
    expect_reject_json("{" T("w", "F32", "[0]", 4, 0) "}", 4,
                       "tensor 'w': data_offsets [4, 0] end before they begin");
    /* Control characters in names are shown as '?', long names are cut. */
    expect_reject_json("{" T("a\\nb", "F31", "[1]", 0, 4) "}", 4, "tensor 'a?b': unknown");
    expect_reject_json("{" T("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                             "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                             "F31", "[1]", 0, 4) "}", 4, "xxx...': unknown");
}

static void test_reject_sizes(void)
{
    /* The message of the brief, word for word, with the file name in the full text. */
    size_t len;
    unsigned char *b = make_file("{" T("dense/kernel", "F32", "[5,6]", 0, 100) "}", 100, &len);
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_PTR_NULL(tfc_st_parse(b, len, "model.safetensors", &err));
    CU_ASSERT_STRING_EQUAL(err.msg, "tensor 'dense/kernel': data_offsets [0, 100] hold 100 bytes "
                                    "but F32 [5, 6] needs 120");
    CU_ASSERT_STRING_EQUAL(err.text, "model.safetensors: error: tensor 'dense/kernel': "
                                     "data_offsets [0, 100] hold 100 bytes but F32 [5, 6] needs 120\n");
    free(b);
    expect_reject_json("{" T("s", "F64", "[]", 0, 4) "}", 4, "hold 4 bytes but F64 [] needs 8");

    /* Out of bounds: past the data section. */
    expect_reject_json("{" T("w", "F32", "[4]", 0, 16) "}", 8,
                       "tensor 'w': data_offsets [0, 16] lie outside the 8-byte data section");
    expect_reject_json("{" T("w", "F32", "[1]", 9223372036854775803, 9223372036854775807) "}", 4,
                       "lie outside the 4-byte data section");
    /* Overflowing products: numel, then numel * dtype size. */
    expect_reject_json("{" T("w", "F32", "[4294967296,4294967296]", 0, 4) "}", 4,
                       "tensor 'w': F32 [4294967296, 4294967296] is too large: its size overflows 64 bits");
    expect_reject_json("{" T("w", "F64", "[1152921504606846976,2]", 0, 8) "}", 8,
                       "F64 [1152921504606846976, 2] is too large");
    expect_reject_json("{" T("w", "F32", "[2305843009213693952]", 0, 8) "}", 8,
                       "F32 [2305843009213693952] is too large"); /* 2^63 bytes > INT64_MAX */
    expect_reject_json("{" T("w", "U8", "[3037000500,3037000500,0]", 0, 0) "}", 0,
                       "is too large"); /* overflow before the zero is reached still counts */
}

static void test_reject_layout(void)
{
    expect_reject_json("{" T("a", "F32", "[2]", 0, 8) "," T("b", "F32", "[2]", 4, 12) "}", 12,
                       "tensors 'a' [0, 8] and 'b' [4, 12] overlap");
    expect_reject_json("{" T("b", "F32", "[2]", 0, 8) "," T("a", "F32", "[2]", 0, 8) "}", 8,
                       "tensors 'b' [0, 8] and 'a' [0, 8] overlap");
    /* An empty tensor inside another one's bytes overlaps too. */
    expect_reject_json("{" T("a", "F32", "[2]", 0, 8) "," T("e", "F32", "[0]", 4, 4) "}", 8,
                       "tensors 'a' [0, 8] and 'e' [4, 4] overlap");
    expect_reject_json("{" T("a", "F32", "[1]", 0, 4) "," T("b", "F32", "[1]", 8, 12) "}", 12,
                       "bytes [4, 8) of the data section belong to no tensor (a hole before tensor 'b')");
    expect_reject_json("{" T("a", "F32", "[1]", 4, 8) "}", 8,
                       "bytes [0, 4) of the data section belong to no tensor");
    expect_reject_json("{" T("a", "F32", "[1]", 0, 4) "}", 8,
                       "4 trailing bytes after the last tensor 'a': the tensors cover 4 of the 8 bytes");
    expect_reject_json("{}", 3, "3 trailing bytes after a header that lists no tensor");
    expect_reject_json("{\"__metadata__\":{\"k\":1}}", 0,
                       "__metadata__ 'k': value must be a string, found an integer");
    expect_reject_json("{\"__metadata__\":{\"k\":\"v\",\"l\":{}}}", 0, "__metadata__ 'l': value must be a string, found an object");
    expect_reject_json("{\"__metadata__\":[\"k\"]}", 0,
                       "__metadata__ must be an object of string values, found an array");
}

static void test_accept_edge_cases(void)
{
    unsigned char *b;
    /* No tensors, no data; metadata null (as the reference implementation allows). */
    tfc_st_file *f = expect_accept_json("{}", 0, &b);
    CU_ASSERT(f && tfc_st_count(f) == 0 && tfc_st_data_size(f) == 0);
    tfc_st_close(f);
    free(b);
    f = expect_accept_json("{\"__metadata__\":null}", 0, &b);
    CU_ASSERT(f && tfc_st_meta_count(f) == 0);
    tfc_st_close(f);
    free(b);
    /* Empty tensors share offsets with their neighbours; header order is kept while the
     * layout is checked in offset order; trailing spaces pad the header. */
    f = expect_accept_json("{" T("z", "F32", "[2]", 4, 12) "," T("e1", "U8", "[0]", 0, 0) ","
                           T("y", "I32", "[1]", 0, 4) "," T("e2", "F64", "[3,0]", 12, 12) "}   ",
                           12, &b);
    CU_ASSERT_FATAL(f != NULL);
    CU_ASSERT_EQUAL(tfc_st_count(f), 4);
    CU_ASSERT_STRING_EQUAL(tfc_st_tensor_at(f, 0)->name, "z");
    CU_ASSERT_STRING_EQUAL(tfc_st_tensor_at(f, 3)->name, "e2");
    CU_ASSERT(tfc_st_find(f, "z") && tfc_st_find(f, "z")->data == b + 8 + (b[0] | b[1] << 8) + 4);
    CU_ASSERT(tfc_st_find(f, "e1") && tfc_st_find(f, "e2") && tfc_st_find(f, "y"));
    tfc_st_close(f);
    free(b);
}

static void test_open_errors(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    const char *missing = tfc_test_path("missing.safetensors");
    CU_ASSERT_PTR_NULL(tfc_st_open(missing, &err));
    CU_ASSERT_EQUAL(err.code, TFC_ERR_USAGE); /* missing or a folder: the user's mistake */
    CU_ASSERT_STRING_EQUAL(err.file, missing);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "No such file or directory"));

    tfc_error_clear(&err);
    CU_ASSERT_PTR_NULL(tfc_st_open(tfc_test_tmpdir(), &err));
    CU_ASSERT_EQUAL(err.code, TFC_ERR_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "Is a directory"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "hint: give a .safetensors file, such as a run's "
                                            "final.safetensors"));

    /* A file whose data was cut short: the header is checked against the real size. */
    size_t len;
    unsigned char *b = make_file("{" T("a", "F32", "[4]", 0, 16) "}", 16, &len);
    const char *path = tfc_test_write("cut.safetensors", b, (long)len - 3);
    tfc_error_clear(&err);
    CU_ASSERT_PTR_NULL(tfc_st_open(path, &err));
    CU_ASSERT_EQUAL(err.code, TFC_ERR_FORMAT);
    CU_ASSERT_STRING_EQUAL(err.file, path);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "tensor 'a': data_offsets [0, 16] lie outside the 13-byte"));
    path = tfc_test_write("ok.safetensors", b, (long)len);
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open(path, &err);
    CU_ASSERT(f && tfc_st_count(f) == 1);
    tfc_st_close(f);
    path = tfc_test_write("short.safetensors", "abc", 3);
    tfc_error_clear(&err);
    CU_ASSERT_PTR_NULL(tfc_st_open(path, &err));
    CU_ASSERT(err.code == TFC_ERR_FORMAT && strstr(err.msg, "the file is 3 bytes"));
    free(b);
}

/* ---- fileio ------------------------------------------------------------------------------- */

static void test_atomic_write(void)
{
    const char *path = tfc_test_path("atomic.bin");
    const void *chunks[3] = {"hello ", NULL, "world"};
    size_t sizes[3] = {6, 0, 5};
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_file_write_atomic(path, chunks, sizes, 3, &err), TFC_OK);
    size_t len;
    char *got = tfc_test_read(path, &len);
    CU_ASSERT(got && len == 11 && strcmp(got, "hello world") == 0);
    free(got);
    /* Replacing keeps the permission bits of the old file. */
    chmod(path, 0640);
    const void *c2[1] = {"again"};
    size_t s2[1] = {5};
    CU_ASSERT_EQUAL(tfc_file_write_atomic(path, c2, s2, 1, &err), TFC_OK);
    struct stat st;
    CU_ASSERT(stat(path, &st) == 0 && (st.st_mode & 0777) == 0640);
    got = tfc_test_read(path, &len);
    CU_ASSERT(got && len == 5 && memcmp(got, "again", 5) == 0);
    free(got);
    CU_ASSERT_EQUAL(count_temp_files(tfc_test_tmpdir()), 0);
}

/* Overwriting a file under RLIMIT_FSIZE (in a child, with SIGXFSZ at its default action, so
 * the library's own handling is what keeps the child alive) fails with EFBIG named in the
 * error, and leaves the original intact and no temporary file. */
static void test_atomic_write_fsize_limit(void)
{
    const char *path = tfc_test_write("limited.safetensors", "original contents", -1);
    const char *report = tfc_test_path("limited.report");
    fflush(NULL);
    pid_t pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_DFL);
        struct rlimit rl = {4096, 4096};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(3);
        static char big[65536];
        memset(big, 'x', sizeof big);
        const void *chunks[1] = {big};
        size_t sizes[1] = {sizeof big};
        tfc_error err;
        tfc_error_clear(&err);
        tfc_status st = tfc_file_write_atomic(path, chunks, sizes, 1, &err);
        FILE *r = fopen(report, "w");
        if (r) {
            fputs(err.text, r);
            fclose(r);
        }
        _exit(st == TFC_ERR_IO ? 0 : 4);
    }
    int status = 0;
    CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
    CU_ASSERT(WIFEXITED(status));
    CU_ASSERT_EQUAL(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0);
    char *text = tfc_test_read(report, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, path));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "cannot write the temporary file: File too large"));
    free(text);
    size_t len;
    char *got = tfc_test_read(path, &len);
    CU_ASSERT(got && strcmp(got, "original contents") == 0);
    free(got);
    CU_ASSERT_EQUAL(count_temp_files(tfc_test_tmpdir()), 0);
}

static void test_read_all(void)
{
    tfc_error err;
    char *buf;
    size_t len;
    const char *path = tfc_test_write("hundred.txt", "0123456789012345678901234567890123456789"
                                                     "0123456789012345678901234567890123456789"
                                                     "01234567890123456789", 100);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_file_read_all(path, 100, &buf, &len, &err), TFC_OK);
    CU_ASSERT(buf && len == 100 && buf[100] == 0 && buf[99] == '9');
    free(buf);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_file_read_all(path, 99, &buf, &len, &err), TFC_ERR_DATA);
    CU_ASSERT(buf == NULL && len == 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "file is 100 bytes, more than the limit of 99 bytes"));
    CU_ASSERT_STRING_EQUAL(err.file, path);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_file_read_all(tfc_test_path("nope"), 10, &buf, &len, &err),
                    TFC_ERR_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "No such file or directory"));
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_file_read_all(tfc_test_tmpdir(), 10, &buf, &len, &err), TFC_ERR_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "Is a directory"));
    /* /proc files report size 0: the buffer grows as they are read, and the limit holds. */
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_file_read_all("/proc/self/status", 1 << 20, &buf, &len, &err), TFC_OK);
    CU_ASSERT(buf && len > 100 && strstr(buf, "Umask:") != NULL && strlen(buf) == len);
    free(buf);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_file_read_all("/proc/self/status", 10, &buf, &len, &err), TFC_ERR_DATA);
    /* Empty file. */
    path = tfc_test_write("empty.txt", "", 0);
    CU_ASSERT_EQUAL(tfc_file_read_all(path, 10, &buf, &len, &err), TFC_OK);
    CU_ASSERT(buf && len == 0 && buf[0] == 0);
    free(buf);
}

static void test_mkdir_p(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    const char *deep = tfc_test_path("a/b//c/d/");
    CU_ASSERT_EQUAL(tfc_mkdir_p(deep, &err), TFC_OK);
    struct stat st;
    CU_ASSERT(stat(tfc_test_path("a/b/c/d"), &st) == 0 && S_ISDIR(st.st_mode));
    CU_ASSERT_EQUAL(tfc_mkdir_p(deep, &err), TFC_OK); /* existing is fine */
    tfc_test_write("a/file", "x", 1);
    const char *through = tfc_test_path("a/file/sub");
    CU_ASSERT_EQUAL(tfc_mkdir_p(through, &err), TFC_ERR_IO);
    CU_ASSERT_STRING_EQUAL(err.file, through);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "Not a directory"));
}

/* ---- interoperability (optional) ---------------------------------------------------------- */

static const char py_script[] =
    "import sys, numpy as np\n"
    "from safetensors import safe_open\n"
    "from safetensors.numpy import save_file, load_file\n"
    "d = sys.argv[1]\n"
    "save_file({'dense/kernel': np.arange(6, dtype=np.float32).reshape(2, 3) / 4,\n"
    "           'ids': np.array([-5, 7], dtype=np.int64),\n"
    "           'h': np.array(1.5, dtype=np.float16),\n"
    "           'none': np.zeros((0, 2), dtype=np.float64)},\n"
    "          d + '/py.safetensors', metadata={'who': 'python'})\n"
    "t = load_file(d + '/c.safetensors')\n"
    "assert sorted(t) == ['b', 'k', 'mask', 'scalar'], sorted(t)\n"
    "assert t['k'].dtype == np.float32 and t['k'].shape == (2, 2), t['k']\n"
    "assert (t['k'] == np.array([[1, -2], [0.5, 8]], dtype=np.float32)).all()\n"
    "assert t['b'].dtype == np.uint8 and list(t['b']) == [3, 1, 4]\n"
    "assert t['scalar'].shape == () and t['scalar'].dtype == np.float64 and t['scalar'] == 0.1\n"
    "assert t['mask'].dtype == np.bool_ and list(t['mask']) == [True, False, True]\n"
    "with safe_open(d + '/c.safetensors', framework='np') as f:\n"
    "    assert f.metadata() == {'name': 'c', 'tfc_version': '0'}, f.metadata()\n"
    "save_file({'a': np.array([1, 2], dtype=np.float32), 'b': np.array([3], dtype=np.float32)},\n"
    "          d + '/py_same.safetensors', metadata={'k': 'v'})\n";

static void test_python_interop(void)
{
    if (!tfc_test_python_has("safetensors, numpy")) return;
    /* Ours for Python: several dtypes, a scalar, metadata. */
    float k[4] = {1, -2, 0.5f, 8};
    uint8_t b[3] = {3, 1, 4}, mask[3] = {1, 0, 1};
    double scalar = 0.1;
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_writer *w = tfc_st_writer_create();
    tfc_shape s2 = shape_of(2, (int64_t[]){2, 2}), s3 = shape_of(1, (int64_t[]){3}),
              s0 = shape_of(0, NULL);
    tfc_st_writer_add(w, "k", TFC_F32, &s2, k, &err);
    tfc_st_writer_add(w, "b", TFC_U8, &s3, b, &err);
    tfc_st_writer_add(w, "scalar", TFC_F64, &s0, &scalar, &err);
    tfc_st_writer_add(w, "mask", TFC_BOOL, &s3, mask, &err);
    tfc_st_writer_set_meta(w, "name", "c", &err);
    tfc_st_writer_set_meta(w, "tfc_version", "0", &err);
    CU_ASSERT_EQUAL(tfc_st_writer_save(w, tfc_test_path("c.safetensors"), &err), TFC_OK);
    tfc_st_writer_free(w);

    tfc_test_write("interop.py", py_script, -1);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s'", tfc_test_path("interop.py"), tfc_test_tmpdir());
    fflush(NULL);
    CU_ASSERT_EQUAL(system(cmd), 0);

    /* Python's for us. */
    tfc_st_file *f = tfc_st_open(tfc_test_path("py.safetensors"), &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(tfc_st_count(f), 4);
    CU_ASSERT_STRING_EQUAL(tfc_st_meta(f, "who"), "python");
    const tfc_st_tensor *t = tfc_st_find(f, "dense/kernel");
    float v[6];
    CU_ASSERT_FATAL(t && t->dtype == TFC_F32 && t->shape.ndim == 2 && t->shape.dim[1] == 3);
    tfc_st_tensor_to_f32(t, v);
    for (int i = 0; i < 6; i++) CU_ASSERT_DOUBLE_EQUAL(v[i], i / 4.0, 0);
    t = tfc_st_find(f, "ids");
    int64_t ids[2];
    CU_ASSERT_FATAL(t && t->dtype == TFC_I64 && t->nbytes == 16);
    memcpy(ids, t->data, 16);
    CU_ASSERT(ids[0] == -5 && ids[1] == 7);
    t = tfc_st_find(f, "h");
    CU_ASSERT_FATAL(t && t->dtype == TFC_F16 && t->shape.ndim == 0);
    tfc_st_tensor_to_f32(t, v);
    CU_ASSERT_EQUAL(v[0], 1.5f);
    t = tfc_st_find(f, "none");
    CU_ASSERT(t && t->dtype == TFC_F64 && t->numel == 0);
    tfc_st_close(f);

    /* Same tensors in the reference's order (by name within a dtype): identical bytes. */
    float a[2] = {1, 2}, bb[1] = {3};
    w = tfc_st_writer_create();
    tfc_shape sa = shape_of(1, (int64_t[]){2}), sb = shape_of(1, (int64_t[]){1});
    tfc_st_writer_add(w, "a", TFC_F32, &sa, a, &err);
    tfc_st_writer_add(w, "b", TFC_F32, &sb, bb, &err);
    tfc_st_writer_set_meta(w, "k", "v", &err);
    void *mem;
    size_t len, plen;
    CU_ASSERT_EQUAL(tfc_st_writer_to_buffer(w, &mem, &len, &err), TFC_OK);
    tfc_st_writer_free(w);
    char *py = tfc_test_read(tfc_test_path("py_same.safetensors"), &plen);
    CU_ASSERT(py && plen == len && memcmp(py, mem, len) == 0);
    free(py);
    free(mem);
}

static void test_inspect_tool(void)
{
    const char *bin = getenv("TFC_BIN");
    char tool[1024], cmd[4096];
    snprintf(tool, sizeof tool, "%s/tfc-inspect", bin ? bin : "bin");
    if (access(tool, X_OK) != 0) {
        snprintf(cmd, sizeof cmd, "%s not built; run through make test", tool);
        tfc_test_skip(cmd);
        return;
    }

    float k[4] = {1, 2, 3, 6};
    int64_t step = 1234567890123;
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_writer *w = tfc_st_writer_create();
    tfc_shape s = shape_of(2, (int64_t[]){2, 2}), s0 = shape_of(0, NULL);
    tfc_st_writer_add(w, "dense/kernel", TFC_F32, &s, k, &err);
    tfc_st_writer_add(w, "iteration", TFC_I64, &s0, &step, &err);
    tfc_st_writer_set_meta(w, "name", "line1\nline2", &err);
    const char *path = tfc_test_path("inspect.safetensors");
    CU_ASSERT_EQUAL(tfc_st_writer_save(w, path, &err), TFC_OK);
    tfc_st_writer_free(w);

    const char *out = tfc_test_path("inspect.out");
    snprintf(cmd, sizeof cmd, "'%s' '%s' >'%s' 2>&1", tool, path, out);
    fflush(NULL);
    int rc = system(cmd);
    CU_ASSERT(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
    char *text = tfc_test_read(out, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "2 tensors, 24 bytes of data"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "name: line1\\nline2"));
    /* min 1, max 6, mean 3, population std sqrt(3.5) = 1.87083 */
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "dense/kernel  F32    (2, 2)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "1             6             3       1.87083"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "1234567890123")); /* exact, not via float */
    if (!strstr(text, "1.87083")) printf("\n%s\n", text);
    free(text);

    const char *bad = tfc_test_write("bad.safetensors", "\x04\0\0\0\0\0\0\0[1] ", 12);
    snprintf(cmd, sizeof cmd, "'%s' '%s' >'%s' 2>&1", tool, bad, out);
    rc = system(cmd);
    CU_ASSERT(WIFEXITED(rc) && WEXITSTATUS(rc) == 2); /* no safetensors file: the wrong kind */
    text = tfc_test_read(out, NULL);
    CU_ASSERT(text && strstr(text, "bad.safetensors: error: the header is not a JSON object"));
    free(text);
    snprintf(cmd, sizeof cmd, "'%s' >/dev/null 2>&1", tool);
    rc = system(cmd);
    CU_ASSERT(WIFEXITED(rc) && WEXITSTATUS(rc) == 2);
    snprintf(cmd, sizeof cmd, "'%s' --bogus x >/dev/null 2>&1", tool);
    rc = system(cmd);
    CU_ASSERT(WIFEXITED(rc) && WEXITSTATUS(rc) == 2);
    snprintf(cmd, sizeof cmd, "'%s' --version >'%s' 2>&1", tool, out);
    rc = system(cmd);
    CU_ASSERT(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
    text = tfc_test_read(out, NULL);
    CU_ASSERT(text && strncmp(text, "tfc-inspect ", 12) == 0);
    free(text);
}

/* ---- main: optional cases skip (tfc_test_skip) where their tools are missing ------------- */

int main(int argc, char **argv)
{
    tfc_test_case cases[32] = {
        {"dtype_names", test_dtype_names},
        {"roundtrip", test_roundtrip},
        {"byte_exact", test_byte_exact},
        {"writer_errors", test_writer_errors},
        {"reject_prefix", test_reject_prefix},
        {"reject_json", test_reject_json},
        {"reject_entries", test_reject_entries},
        {"reject_sizes", test_reject_sizes},
        {"reject_layout", test_reject_layout},
        {"accept_edge_cases", test_accept_edge_cases},
        {"open_errors", test_open_errors},
        {"atomic_write", test_atomic_write},
        {"atomic_write_fsize_limit", test_atomic_write_fsize_limit},
        {"read_all", test_read_all},
        {"mkdir_p", test_mkdir_p},
    };
    int n = 15;
    cases[n++] = (tfc_test_case){"python_interop", test_python_interop};
    cases[n++] = (tfc_test_case){"inspect_tool", test_inspect_tool};
    cases[n] = (tfc_test_case){NULL, NULL};
    return tfc_test_main("safetensors", cases, argc, argv);
}
