/* tfc-inspect FILE: lists the tensors of a safetensors weights or state file (name, dtype,
 * shape; min/max/mean/std of the values) and its metadata. A thin main over
 * core/safetensors; exit 0 on success, 1 when the file is unreadable or malformed, 2 on
 * bad usage (SPEC §3). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/safetensors.h"
#include "core/tensor.h"

#ifndef TFC_VERSION
#define TFC_VERSION "unknown"
#endif

#define META_SHOWN 160 /* metadata values longer than this are cut unless --full */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tfc-inspect [--full] FILE\n"
            "\n"
            "Lists the tensors of a safetensors file (weights or a state file): name, dtype,\n"
            "shape and, for numeric tensors, min, max, mean and standard deviation (over the\n"
            "finite values; non-finite ones are counted). Prints the file's metadata first.\n"
            "\n"
            "options:\n"
            "  --full      print metadata values in full (default: cut after %d characters)\n"
            "  --help      show this help and exit\n"
            "  --version   print the tfc version and exit\n"
            "\n"
            "exit status: 0 success, 1 unreadable or malformed file, 2 bad usage\n",
            META_SHOWN);
}

/* Prints a string from the file with control characters escaped, at most `max` bytes. */
static void print_escaped(const char *s, size_t max)
{
    size_t len = strlen(s), n = 0;
    for (; s[n] && n < max; n++) {
        unsigned char c = (unsigned char)s[n];
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
    if (n < len) printf("... (%zu bytes)", len);
}

typedef struct stats {
    double min, max, sum, sumsq; /* over finite values */
    size_t finite, nonfinite;
} stats;

static void add_value(stats *s, double v)
{
    if (!isfinite(v)) {
        s->nonfinite++;
        return;
    }
    if (s->finite == 0 || v < s->min) s->min = v;
    if (s->finite == 0 || v > s->max) s->max = v;
    s->sum += v;
    s->sumsq += v * v;
    s->finite++;
}

/* F64 is read as is; the narrower float types are converted a chunk at a time (a view
 * of the tensor shortened to the chunk), so a large tensor costs no second copy. */
static void float_stats(const tfc_st_tensor *t, stats *s, double *mean, double *sd)
{
    enum { CHUNK = 8192 };
    float buf[CHUNK];
    size_t es = tfc_dtype_size(t->dtype), n = (size_t)t->numel;
    if (t->dtype == TFC_F64) {
        for (size_t i = 0; i < n; i++) {
            double v;
            memcpy(&v, (const char *)t->data + 8 * i, 8);
            add_value(s, v);
        }
    } else {
        for (size_t at = 0; at < n; at += CHUNK) {
            tfc_st_tensor part = *t;
            part.numel = (int64_t)(n - at < CHUNK ? n - at : CHUNK);
            part.data = (const char *)t->data + at * es;
            tfc_st_tensor_to_f32(&part, buf);
            for (int64_t i = 0; i < part.numel; i++) add_value(s, buf[i]);
        }
    }
    *mean = s->finite ? s->sum / (double)s->finite : 0;
    /* Population standard deviation: sqrt(E[v^2] - E[v]^2), clamped at 0 for rounding. */
    double var = s->finite ? s->sumsq / (double)s->finite - *mean * *mean : 0;
    *sd = var > 0 ? sqrt(var) : 0;
}

/* Integer and bool tensors: min and max exact (64-bit), mean and std in double. */
static void int_stats(const tfc_st_tensor *t, char *min_s, char *max_s, double *mean,
                      double *sd)
{
    int64_t smin = INT64_MAX, smax = INT64_MIN;
    uint64_t umin = UINT64_MAX, umax = 0;
    int is_unsigned = t->dtype == TFC_U64;
    double sum = 0, sumsq = 0;
    size_t n = (size_t)t->numel, es = tfc_dtype_size(t->dtype);
    const unsigned char *p = t->data;
    for (size_t i = 0; i < n; i++) {
        int64_t v = 0;
        uint64_t u = 0;
        switch (t->dtype) {
        case TFC_I8: { int8_t x; memcpy(&x, p + i * es, 1); v = x; break; }
        case TFC_U8:
        case TFC_BOOL: { uint8_t x; memcpy(&x, p + i * es, 1); v = x; break; }
        case TFC_I16: { int16_t x; memcpy(&x, p + i * es, 2); v = x; break; }
        case TFC_U16: { uint16_t x; memcpy(&x, p + i * es, 2); v = x; break; }
        case TFC_I32: { int32_t x; memcpy(&x, p + i * es, 4); v = x; break; }
        case TFC_U32: { uint32_t x; memcpy(&x, p + i * es, 4); v = x; break; }
        case TFC_I64: memcpy(&v, p + i * es, 8); break;
        default: memcpy(&u, p + i * es, 8); break; /* U64 */
        }
        double d = is_unsigned ? (double)u : (double)v;
        sum += d;
        sumsq += d * d;
        if (v < smin) smin = v;
        if (v > smax) smax = v;
        if (u < umin) umin = u;
        if (u > umax) umax = u;
    }
    if (is_unsigned) {
        sprintf(min_s, "%llu", (unsigned long long)umin);
        sprintf(max_s, "%llu", (unsigned long long)umax);
    } else {
        sprintf(min_s, "%lld", (long long)smin);
        sprintf(max_s, "%lld", (long long)smax);
    }
    *mean = sum / (double)n;
    double var = sumsq / (double)n - *mean * *mean;
    *sd = var > 0 ? sqrt(var) : 0;
}

static int is_float(tfc_dtype dt)
{
    return dt == TFC_F32 || dt == TFC_F64 || dt == TFC_F16 || dt == TFC_BF16;
}

static void print_file(const char *path, const tfc_st_file *f, int full)
{
    int n = tfc_st_count(f);
    printf("%s: %d tensor%s, %zu bytes of data\n", path, n, n == 1 ? "" : "s",
           tfc_st_data_size(f));
    if (tfc_st_meta_count(f) > 0) {
        printf("metadata:\n");
        for (int i = 0; i < tfc_st_meta_count(f); i++) {
            const char *k, *v;
            tfc_st_meta_at(f, i, &k, &v);
            printf("  ");
            print_escaped(k, 200);
            printf(": ");
            print_escaped(v, full ? (size_t)-1 : META_SHOWN);
            printf("\n");
        }
    }
    if (n == 0) return;

    int wname = 6, wshape = 5;
    char shape[160];
    for (int i = 0; i < n; i++) {
        const tfc_st_tensor *t = tfc_st_tensor_at(f, i);
        int l = (int)strlen(t->name);
        if (l > wname) wname = l > 60 ? 60 : l;
        l = (int)strlen(tfc_shape_str(&t->shape, shape, sizeof shape));
        if (l > wshape) wshape = l;
    }
    printf("%-*s  %-5s  %-*s  %12s  %12s  %12s  %12s\n", wname, "tensor", "dtype", wshape, "shape",
           "min", "max", "mean", "std");
    for (int i = 0; i < n; i++) {
        const tfc_st_tensor *t = tfc_st_tensor_at(f, i);
        printf("%-*s  %-5s  %-*s", wname, t->name, tfc_dtype_name(t->dtype), wshape,
               tfc_shape_str(&t->shape, shape, sizeof shape));
        char min_s[32], max_s[32];
        double mean, sd;
        if (t->numel == 0) {
            printf("  %12s  %12s  %12s  %12s\n", "-", "-", "-", "-");
            continue;
        }
        if (is_float(t->dtype)) {
            stats s = {0};
            float_stats(t, &s, &mean, &sd);
            if (s.finite == 0) {
                printf("  %12s  %12s  %12s  %12s", "-", "-", "-", "-");
            } else {
                printf("  %12.6g  %12.6g  %12.6g  %12.6g", s.min, s.max, mean, sd);
            }
            if (s.nonfinite) printf("  (%zu non-finite)", s.nonfinite);
            printf("\n");
        } else {
            int_stats(t, min_s, max_s, &mean, &sd);
            printf("  %12s  %12s  %12.6g  %12.6g\n", min_s, max_s, mean, sd);
        }
    }
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    int full = 0, options_done = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!options_done && strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (!options_done && strcmp(a, "--version") == 0) {
            printf("tfc-inspect %s\n", TFC_VERSION);
            return 0;
        } else if (!options_done && strcmp(a, "--full") == 0) {
            full = 1;
        } else if (!options_done && strcmp(a, "--") == 0) {
            options_done = 1;
        } else if (!options_done && a[0] == '-' && a[1]) {
            fprintf(stderr, "tfc-inspect: error: unknown option '%s' (see --help)\n", a);
            return 2;
        } else if (path) {
            fprintf(stderr, "tfc-inspect: error: one FILE only, got '%s' and '%s' (see --help)\n",
                    path, a);
            return 2;
        } else {
            path = a;
        }
    }
    if (!path) {
        fprintf(stderr, "tfc-inspect: error: missing FILE (see --help)\n");
        return 2;
    }
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open(path, &err);
    if (!f) {
        fprintf(stderr, "%s", err.text);
        return tfc_exit_code(err.code);
    }
    print_file(path, f, full);
    tfc_st_close(f);
    return 0;
}
