/* The zip reader on the fixtures of tests/ref/zip/ (written by its make.py with Python's
 * zipfile): stored, deflated, zip64 (local extra only, and full: central extras and end
 * records), comments, empty entries and archives; every damaged variant's error code and
 * message; the size limit; archives built here for what the fixtures do not cover (data
 * descriptors, hostile end records); and Keras's own .keras files from tests/ref/import/. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/error.h"
#include "core/zip.h"
#include "util/testutil.h"

#define DIR "tests/ref/zip/"
#define CONFIG "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"fixture\"}}"

/* lines.txt of make.py: "tfc zip fixture line I\n" for I in 0..199. */
static char *lines_txt(size_t *len)
{
    char *s = malloc(8192);
    size_t n = 0;
    for (int i = 0; i < 200; i++) n += (size_t)sprintf(s + n, "tfc zip fixture line %d\n", i);
    *len = n;
    return s;
}

static tfc_zip *open_ok(const char *file)
{
    char path[256];
    snprintf(path, sizeof path, DIR "%s", file);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_zip *z = tfc_zip_open(path, &err);
    if (!z) printf("\n  %s: %s\n", path, err.msg);
    CU_ASSERT_PTR_NOT_NULL(z);
    return z;
}

/* Reads `entry` of z and compares it with want (wlen bytes). */
static void expect_entry(const tfc_zip *z, const char *entry, const void *want, size_t wlen)
{
    int i = tfc_zip_find(z, entry);
    CU_ASSERT(i >= 0);
    if (i < 0) return;
    CU_ASSERT_STRING_EQUAL(tfc_zip_name_at(z, i), entry);
    void *data = NULL;
    size_t len = 99;
    tfc_error err;
    tfc_error_clear(&err);
    tfc_status st = tfc_zip_read(z, i, 1 << 20, &data, &len, &err);
    if (st) printf("\n  %s: %s\n", entry, err.msg);
    CU_ASSERT_EQUAL(st, TFC_OK);
    CU_ASSERT_EQUAL(len, wlen);
    CU_ASSERT(data && len == wlen && memcmp(data, want, wlen) == 0);
    CU_ASSERT(data && ((char *)data)[len] == 0);
    free(data);
}

static void expect_names(const tfc_zip *z, const char *const *names, int n)
{
    CU_ASSERT_EQUAL(tfc_zip_count(z), n);
    for (int i = 0; i < n && i < tfc_zip_count(z); i++) {
        CU_ASSERT_STRING_EQUAL(tfc_zip_name_at(z, i), names[i]);
        CU_ASSERT_EQUAL(tfc_zip_find(z, names[i]), i);
    }
}

static void test_stored(void)
{
    tfc_zip *z = open_ok("stored.zip");
    if (!z) return;
    static const char *const names[] = {"config.json", "empty.bin", "dir/"};
    expect_names(z, names, 3);
    expect_entry(z, "config.json", CONFIG, strlen(CONFIG));
    expect_entry(z, "empty.bin", "", 0);
    expect_entry(z, "dir/", "", 0);
    CU_ASSERT_EQUAL(tfc_zip_find(z, "config"), -1);
    CU_ASSERT_EQUAL(tfc_zip_find(z, "config.json/"), -1);
    CU_ASSERT_EQUAL(tfc_zip_find(z, ""), -1);
    tfc_zip_close(z);
}

static void test_deflated(void)
{
    size_t n;
    char *lines = lines_txt(&n);
    static const char *const names[] = {"lines.txt", "config.json", "empty.bin"};
    static const char *const files[] = {"deflated.zip", "zip64.zip", "zip64_local.zip"};
    for (int f = 0; f < 3; f++) {
        tfc_zip *z = open_ok(files[f]);
        if (!z) continue;
        if (f == 0) expect_names(z, names, 3);
        if (f == 1) expect_names(z, names, 2);
        if (f == 2) expect_names(z, names, 1);
        expect_entry(z, "lines.txt", lines, n);
        if (f < 2) expect_entry(z, "config.json", CONFIG, strlen(CONFIG));
        if (f == 0) expect_entry(z, "empty.bin", "", 0);
        tfc_zip_close(z);
    }
    free(lines);
}

static void test_comment_and_empty(void)
{
    tfc_zip *z = open_ok("comment.zip");
    if (z) {
        CU_ASSERT_EQUAL(tfc_zip_count(z), 1);
        expect_entry(z, "config.json", CONFIG, strlen(CONFIG));
        tfc_zip_close(z);
    }
    z = open_ok("empty.zip");
    if (z) {
        CU_ASSERT_EQUAL(tfc_zip_count(z), 0);
        CU_ASSERT_EQUAL(tfc_zip_find(z, "config.json"), -1);
        tfc_zip_close(z);
    }
}

/* Opening `file` fails with `code` and a message holding `needle`. */
static void expect_open_error(const char *file, tfc_status code, const char *needle)
{
    char path[256];
    snprintf(path, sizeof path, DIR "%s", file);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_zip *z = tfc_zip_open(path, &err);
    CU_ASSERT_PTR_NULL(z);
    CU_ASSERT_EQUAL(err.code, code);
    CU_ASSERT_STRING_EQUAL(err.file, path);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, needle));
    if (!strstr(err.msg, needle) || err.code != code)
        printf("\n  %s: expected '%s' (code %d) in: %s (code %d)\n", file, needle, code,
               err.msg, err.code);
    tfc_zip_close(z);
}

/* `file` opens, but reading `entry` fails with `code` and a message holding `needle`. */
static void expect_read_error(const char *file, const char *entry, size_t max,
                              tfc_status code, const char *needle)
{
    tfc_zip *z = open_ok(file);
    if (!z) return;
    int i = tfc_zip_find(z, entry);
    CU_ASSERT(i >= 0);
    void *data = (void *)1;
    size_t len = 1;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_zip_read(z, i, max, &data, &len, &err), code);
    CU_ASSERT(data == NULL && len == 0);
    CU_ASSERT_EQUAL(err.code, code);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, needle));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, DIR));
    if (!strstr(err.msg, needle) || err.code != code)
        printf("\n  %s: expected '%s' (code %d) in: %s (code %d)\n", file, needle, code,
               err.msg, err.code);
    tfc_zip_close(z);
}

static void test_damaged(void)
{
    expect_open_error("not_zip.txt", TFC_ERR_USAGE, "not a zip archive");
    expect_open_error("truncated.zip", TFC_ERR_FORMAT, "cut short or damaged");
    expect_open_error("bad_local_name.zip", TFC_ERR_FORMAT,
                      "entry 'config.json': its local header names it 'conf1g.json'");
    expect_open_error("bad_local_method.zip", TFC_ERR_FORMAT,
                      "entry 'lines.txt': its local header says compression method 0, the "
                      "central directory 8");
    expect_open_error("multidisk.zip", TFC_ERR_FORMAT, "spans several disks");
    expect_open_error("bad_cd_offset.zip", TFC_ERR_FORMAT, "is not inside the archive");
    expect_open_error("duplicate.zip", TFC_ERR_FORMAT, "entry 'config.json' appears twice");
    expect_open_error("no_such.zip", TFC_ERR_USAGE, "cannot open");

    expect_read_error("bad_crc.zip", "config.json", 1 << 20, TFC_ERR_FORMAT,
                      "entry 'config.json': its data's CRC-32 is ");
    expect_read_error("bomb.zip", "lines.txt", 1 << 20, TFC_ERR_FORMAT,
                      "entry 'lines.txt': inflates past its declared size of 1000 bytes");
    expect_read_error("huge.zip", "lines.txt", SIZE_MAX, TFC_ERR_FORMAT,
                      "entry 'lines.txt' declares 4294967280 bytes uncompressed, more than "
                      "its 470 bytes of deflate data can hold");
    expect_read_error("short.zip", "lines.txt", 1 << 20, TFC_ERR_FORMAT,
                      "entry 'lines.txt': inflates to 4890 bytes, its declared size is 4990");
    expect_read_error("bad_deflate.zip", "lines.txt", 1 << 20, TFC_ERR_FORMAT,
                      "entry 'lines.txt': damaged deflate data");
    expect_read_error("encrypted.zip", "config.json", 1 << 20, TFC_ERR_FORMAT,
                      "entry 'config.json' is encrypted");
    expect_read_error("bzip2.zip", "config.json", 1 << 20, TFC_ERR_FORMAT,
                      "entry 'config.json' uses compression method 12 (bzip2); tfc reads "
                      "stored (0) and deflated (8) entries only");
    /* the limit: checked on the declared size, before any inflation */
    expect_read_error("deflated.zip", "lines.txt", 4889, TFC_ERR_DATA,
                      "entry 'lines.txt' is 4890 bytes uncompressed, more than the limit of "
                      "4889 bytes");
    expect_read_error("zip64.zip", "config.json", 0, TFC_ERR_DATA, "the limit of 0 bytes");
    /* ... and the other entries of a damaged archive still read */
    tfc_zip *z = open_ok("bad_crc.zip");
    if (z) expect_entry(z, "empty.bin", "", 0);
    tfc_zip_close(z);
}

/* ---- archives built here ---------------------------------------------------------------- */

static void put16(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v)
{
    put16(p, v & 0xffff);
    put16(p + 2, v >> 16);
}

/* One stored entry `name` holding `data`, written with a data descriptor (flag bit 3: zeros
 * in the local header, the CRC and sizes after the data), as streaming writers do. Returns
 * the archive's size; `comment` ends it. */
static size_t one_entry(unsigned char *b, const char *name, const char *data, int descriptor,
                        const char *comment)
{
    size_t nlen = strlen(name), dlen = strlen(data), clen = strlen(comment), k = 0;
    uint32_t crc = (uint32_t)crc32(0, (const unsigned char *)data, (uInt)dlen);
    unsigned char *h = b;
    memset(h, 0, 30);
    put32(h, 0x04034b50);
    put16(h + 4, 20);
    put16(h + 6, descriptor ? 8 : 0);
    if (!descriptor) {
        put32(h + 14, crc);
        put32(h + 18, (uint32_t)dlen);
        put32(h + 22, (uint32_t)dlen);
    }
    put16(h + 26, (unsigned)nlen);
    memcpy(h + 30, name, nlen);
    memcpy(h + 30 + nlen, data, dlen);
    k = 30 + nlen + dlen;
    if (descriptor) {
        put32(b + k, 0x08074b50);
        put32(b + k + 4, crc);
        put32(b + k + 8, (uint32_t)dlen);
        put32(b + k + 12, (uint32_t)dlen);
        k += 16;
    }
    size_t cd = k;
    h = b + k;
    memset(h, 0, 46);
    put32(h, 0x02014b50);
    put16(h + 4, 20);
    put16(h + 6, 20);
    put16(h + 8, descriptor ? 8 : 0);
    put32(h + 16, crc);
    put32(h + 20, (uint32_t)dlen);
    put32(h + 24, (uint32_t)dlen);
    put16(h + 28, (unsigned)nlen);
    memcpy(h + 46, name, nlen);
    k += 46 + nlen;
    h = b + k;
    memset(h, 0, 22);
    put32(h, 0x06054b50);
    put16(h + 8, 1);
    put16(h + 10, 1);
    put32(h + 12, (uint32_t)(k - cd));
    put32(h + 16, (uint32_t)cd);
    put16(h + 20, (unsigned)clen);
    memcpy(h + 22, comment, clen);
    return k + 22 + clen;
}

static tfc_zip *parse(const unsigned char *b, size_t len, tfc_error *err)
{
    tfc_error_clear(err);
    return tfc_zip_parse(b, len, "built.zip", err);
}

static void test_built(void)
{
    static unsigned char b[4096];
    tfc_error err;
    /* a data descriptor: the local header's zeros are not compared */
    size_t len = one_entry(b, "metadata.json", "{\"keras_version\": \"3.15.1\"}", 1, "");
    tfc_zip *z = parse(b, len, &err);
    CU_ASSERT_PTR_NOT_NULL(z);
    if (z) expect_entry(z, "metadata.json", "{\"keras_version\": \"3.15.1\"}", 27);
    tfc_zip_close(z);
    /* without one, they are */
    len = one_entry(b, "metadata.json", "{}", 0, "");
    b[18] ^= 1;
    z = parse(b, len, &err);
    CU_ASSERT_PTR_NULL(z);
    CU_ASSERT_EQUAL(err.code, TFC_ERR_FORMAT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "entry 'metadata.json': its local header says "
                                           "CRC-32"));
    tfc_zip_close(z);
    /* a comment holding an end record's signature: the record that ends the file wins */
    char comment[301];
    memset(comment, 'c', 300);
    comment[300] = 0;
    memcpy(comment, "PK\x05\x06", 4);
    memcpy(comment + 20, "\x01\x01", 2); /* its comment (257 bytes) fits in the file too */
    len = one_entry(b, "a", "x", 0, comment);
    z = parse(b, len, &err);
    CU_ASSERT_PTR_NOT_NULL(z);
    if (z) expect_entry(z, "a", "x", 1);
    tfc_zip_close(z);
    /* bytes after the comment (some writers pad): the record still found */
    len = one_entry(b, "a", "x", 0, "c");
    memcpy(b + len, "\0\0\0", 3);
    z = parse(b, len + 3, &err);
    CU_ASSERT_PTR_NOT_NULL(z);
    tfc_zip_close(z);
    /* a control byte in a name is shown as '?' in messages */
    len = one_entry(b, "a\nb", "x", 0, "");
    b[30 + 1] = 'X';
    z = parse(b, len, &err);
    CU_ASSERT_PTR_NULL(z);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "entry 'a?b': its local header names it 'aXb'"));
    /* an entry count the directory cannot hold: refused before allocating */
    len = one_entry(b, "a", "x", 0, "");
    put16(b + len - 22 + 8, 0xffff);
    put16(b + len - 22 + 10, 0xffff);
    z = parse(b, len, &err);
    CU_ASSERT_PTR_NULL(z);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "65535 entries cannot fit in a central directory"));
    /* a NUL in a name */
    len = one_entry(b, "ab", "x", 0, "");
    b[30 + 1] = 0;
    b[len - 22 - 1] = 0;
    z = parse(b, len, &err);
    CU_ASSERT_PTR_NULL(z);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "holds a NUL byte"));
    /* nothing, and less than an end record */
    z = parse(b, 0, &err);
    CU_ASSERT_PTR_NULL(z);
    CU_ASSERT_EQUAL(err.code, TFC_ERR_USAGE);
    z = parse((const unsigned char *)"PK\x05\x06", 4, &err);
    CU_ASSERT_PTR_NULL(z);
    CU_ASSERT_EQUAL(err.code, TFC_ERR_USAGE);
}

/* Keras's own archives (tests/ref/import/, keras_import.py), when there: each holds
 * metadata.json, config.json and model.weights.h5 (an HDF5 file: its signature at offset 0),
 * stored, and every entry reads. */
static void test_keras(void)
{
    static const char *const cases[] = {"mlp", "cnn", "resnet", "text", "transformer",
                                        "recurrent", "misc", "volume", "attention"};
    static const char *const names[] = {"metadata.json", "config.json", "model.weights.h5"};
    int found = 0;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char path[256];
        snprintf(path, sizeof path, "tests/ref/import/%s.keras", cases[c]);
        tfc_error err;
        tfc_error_clear(&err);
        tfc_zip *z = tfc_zip_open(path, &err);
        if (!z) {
            CU_ASSERT_EQUAL(err.code, TFC_ERR_USAGE); /* only missing */
            continue;
        }
        found++;
        CU_ASSERT_EQUAL(tfc_zip_count(z), 3);
        for (int k = 0; k < 3; k++) CU_ASSERT(tfc_zip_find(z, names[k]) >= 0);
        for (int i = 0; i < tfc_zip_count(z); i++) {
            void *data = NULL;
            size_t len = 0;
            CU_ASSERT_EQUAL(tfc_zip_read(z, i, 1 << 24, &data, &len, &err), TFC_OK);
            const char *name = tfc_zip_name_at(z, i);
            if (!data) continue;
            if (strcmp(name, "metadata.json") == 0)
                CU_ASSERT_PTR_NOT_NULL(strstr(data, "\"keras_version\": \"3.15.1\""));
            if (strcmp(name, "config.json") == 0)
                CU_ASSERT_PTR_NOT_NULL(strstr(data, "\"class_name\": "));
            if (strcmp(name, "model.weights.h5") == 0)
                CU_ASSERT(len > 8 && memcmp(data, "\x89HDF\r\n\x1a\n", 8) == 0);
            free(data);
        }
        tfc_zip_close(z);
    }
    if (!found) tfc_test_skip("tests/ref/import/ holds no .keras archive");
}

TFC_TEST_MAIN("zip", {"stored", test_stored}, {"deflated", test_deflated},
              {"comment_and_empty", test_comment_and_empty}, {"damaged", test_damaged},
              {"built", test_built}, {"keras", test_keras})
