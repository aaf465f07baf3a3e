/* tfc-inspect FILE: lists the tensors of a safetensors weights or state file (name, dtype,
 * shape; min/max/mean/std of the values) and its metadata, and verifies a state file's
 * checksum. A thin main over core/safetensors; exit 0 on success, 1 when the file is
 * unreadable, malformed or fails its checksum, 2 on bad usage (SPEC §3). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tfc.h"

#define META_SHOWN 160 /* metadata values longer than this are cut unless --full */
#define STR_(x) #x
#define STR(x) STR_(x)

/* The command line, as the option table fills it. */
static const char *file_v[1];
static struct {
    cli_list file;
    int full;
} args = {.file = CLI_LIST_OF(file_v)};

static const cli_option options[] = {
    {"full", 0, CLI_FLAG, &args.full, NULL,
     .help = "print metadata values in full (default: cut after " STR(META_SHOWN) " characters)"},
    {NULL},
};

static const cli_tool tool = {
    .name = "tfc-inspect",
    .operands = "FILE",
    .about = "Lists the tensors of a safetensors file (weights or a state file): name, dtype,\n"
             "shape and, for numeric tensors, min, max, mean and standard deviation (over the\n"
             "finite values; non-finite ones are counted). Prints the file's metadata first.\n"
             "A state file's checksum is verified: \"checksum ok\" or \"checksum mismatch\"\n"
             "(then exit 1); a weights file has none.",
    .options = options,
    .exit_status = "0 success, 1 unreadable or malformed file or a checksum mismatch, 2 bad usage",
    .operand_list = &args.file,
};

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

enum { CHUNK = 8192 }; /* elements read at a time, so a large tensor costs no second copy */

/* Elements [at, at + n) of the tensor as `dt` into `out` (n <= CHUNK). The bytes are copied
 * out first: safetensors data need not be aligned to the element size. */
static void read_values(const tfc_st_tensor *t, size_t at, size_t n, tfc_dtype dt, void *out)
{
    uint64_t raw[CHUNK];
    size_t es = tfc_dtype_size(t->dtype);
    memcpy(raw, (const char *)t->data + at * es, n * es);
    tfc_values_convert(out, dt, raw, t->dtype, (int64_t)n);
}

/* Float tensors, every value read as a double. */
static void float_stats(const tfc_st_tensor *t, stats *s, double *mean, double *sd)
{
    double buf[CHUNK];
    size_t n = (size_t)t->numel;
    for (size_t at = 0; at < n; at += CHUNK) {
        size_t m = n - at < CHUNK ? n - at : CHUNK;
        read_values(t, at, m, TFC_F64, buf);
        for (size_t i = 0; i < m; i++) add_value(s, buf[i]);
    }
    *mean = s->finite ? s->sum / (double)s->finite : 0;
    /* Population standard deviation: sqrt(E[v^2] - E[v]^2), clamped at 0 for rounding. */
    double var = s->finite ? s->sumsq / (double)s->finite - *mean * *mean : 0;
    *sd = var > 0 ? sqrt(var) : 0;
}

/* Integer and bool tensors: min and max exact (every value read as an int64, or a uint64
 * for U64), mean and std in double. */
static void int_stats(const tfc_st_tensor *t, char *min_s, char *max_s, double *mean,
                      double *sd)
{
    int is_unsigned = t->dtype == TFC_U64;
    int64_t smin = INT64_MAX, smax = INT64_MIN;
    uint64_t umin = UINT64_MAX, umax = 0;
    double sum = 0, sumsq = 0;
    size_t n = (size_t)t->numel;
    union {
        int64_t s[CHUNK];
        uint64_t u[CHUNK];
    } buf;
    for (size_t at = 0; at < n; at += CHUNK) {
        size_t m = n - at < CHUNK ? n - at : CHUNK;
        read_values(t, at, m, is_unsigned ? TFC_U64 : TFC_I64, &buf);
        for (size_t i = 0; i < m; i++) {
            double d = is_unsigned ? (double)buf.u[i] : (double)buf.s[i];
            sum += d;
            sumsq += d * d;
            if (is_unsigned) {
                if (buf.u[i] < umin) umin = buf.u[i];
                if (buf.u[i] > umax) umax = buf.u[i];
            } else {
                if (buf.s[i] < smin) smin = buf.s[i];
                if (buf.s[i] > smax) smax = buf.s[i];
            }
        }
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

/* The state file's checksum against its contents, said on stdout (a mismatch on stderr too);
 * the exit status: 0 ok or none, 1 mismatch or a failure to compute it. */
static int verify_checksum(const char *path, const tfc_st_file *f)
{
    const char *stored = tfc_st_meta(f, "checksum");
    if (!stored) {
        printf("checksum: none (only tfc state files carry one)\n");
        return 0;
    }
    char computed[9];
    tfc_error err;
    tfc_error_clear(&err);
    if (tfc_snapshot_checksum(f, computed, &err)) {
        fprintf(stderr, "%s", err.text);
        return tfc_exit_code(err.code);
    }
    if (!strcmp(stored, computed)) {
        printf("checksum ok (%s)\n", computed);
        return 0;
    }
    printf("checksum mismatch (stored %s, computed %s)\n", stored, computed);
    fprintf(stderr, "tfc-inspect: %s: checksum mismatch (stored %s, computed %s): the file is "
                    "corrupt or was modified\n", path, stored, computed);
    return 1;
}

int main(int argc, char **argv)
{
    int rc = cli_parse(&tool, argc, argv);
    if (rc >= 0) return rc;
    const char *path = args.file.v[0];
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open(path, &err);
    if (!f) {
        fprintf(stderr, "%s", err.text);
        return tfc_exit_code(err.code);
    }
    print_file(path, f, args.full);
    rc = verify_checksum(path, f);
    tfc_st_close(f);
    return rc;
}
