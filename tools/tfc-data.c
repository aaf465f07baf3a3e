/* tfc-data SOLVER.yaml [--split train|test] [--take N] [--output PREFIX]: runs only the input
 * pipeline of a solver file, prints each component's dtype and shape (tf.data's element_spec)
 * and the elements per second, and can write the first N elements as .npy files. A thin main
 * over src/data; exit 0 on success, 1 on unreadable data, 2 on bad usage or configuration. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "core/error.h"
#include "core/schema.h"
#include "data/data.h"

#ifndef TFC_VERSION
#define TFC_VERSION "unknown"
#endif

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tfc-data SOLVER.yaml [--split train|test] [--take N] [--output PREFIX]\n"
            "\n"
            "Runs the input pipeline of SOLVER.yaml (data.train or data.test) alone: prints the\n"
            "dtype and shape of each component (-1: unknown, e.g. the batch dimension) and the\n"
            "elements (batches, if the pipeline batches) per second.\n"
            "\n"
            "options:\n"
            "  --split S       train (default) or test\n"
            "  --take N        read N elements (default 100; fewer if the data ends)\n"
            "  --output PREFIX write them as PREFIX.features.npy and PREFIX.labels.npy\n"
            "                  (and PREFIX.lengths.npy after padded_batch): batches are\n"
            "                  concatenated along axis 0, single elements stacked\n"
            "  --help          show this help and exit\n"
            "  --version       print the tfc version and exit\n"
            "\n"
            "exit status: 0 success, 1 unreadable data, 2 bad usage or configuration\n");
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fail(const tfc_error *err)
{
    fflush(stdout);
    fputs(err->text[0] ? err->text : "error: unknown failure\n", stderr);
    return tfc_exit_code(err->code ? err->code : TFC_ERR_INTERNAL);
}

/* True when the node tree mentions a tokenizer (the test split then needs the train split's
 * vocabulary). */
static int uses_tokenizer(const tfc_node *n)
{
    if (!n) return 0;
    if (n->kind == TFC_NODE_SCALAR) return !strcmp(n->str, "tokenize");
    for (int i = 0; i < n->n; i++) {
        if (n->kind == TFC_NODE_MAP && !strcmp(n->keys[i]->str, "tokenizer") &&
            strcmp(n->vals[i]->str ? n->vals[i]->str : "", "none"))
            return 1;
        if (uses_tokenizer(n->vals[i])) return 1;
    }
    return 0;
}

/* Elements gathered for --output, one growing buffer per component. */
typedef struct gather {
    char *data;
    size_t len, cap;
    tfc_dtype dtype;
    tfc_shape shape; /* of the result: dim[0] grows */
    int used;
} gather;

static tfc_status gather_add(gather *g, const tfc_tensor *t, int batched, const char *name,
                             tfc_error *err)
{
    if (!t->data) return TFC_OK;
    tfc_shape s = t->shape;
    if (!batched) { /* stack: a new axis 0 */
        if (s.ndim >= TFC_MAX_DIMS)
            return tfc_error_set(err, TFC_ERR_DATA, "%s: rank too large to stack", name);
        for (int d = s.ndim; d > 0; d--) s.dim[d] = s.dim[d - 1];
        s.dim[0] = 1;
        s.ndim++;
    }
    if (!g->used) {
        g->dtype = t->dtype;
        g->shape = s;
        g->shape.dim[0] = 0;
        g->used = 1;
    }
    int same = g->dtype == t->dtype && g->shape.ndim == s.ndim;
    for (int d = 1; same && d < s.ndim; d++) same = g->shape.dim[d] == s.dim[d];
    if (!same) {
        char a[128], b[128];
        return tfc_error_set(err, TFC_ERR_DATA, "--output: %s of shape %s cannot be concatenated "
                             "with earlier ones of shape %s (pad to a fixed shape first)", name,
                             tfc_shape_str(&s, a, sizeof a), tfc_shape_str(&g->shape, b, sizeof b));
    }
    size_t n = (size_t)tfc_shape_numel(&t->shape) * tfc_dtype_size(t->dtype);
    if (g->len + n > g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 1 << 16;
        while (cap < g->len + n) cap *= 2;
        char *d = realloc(g->data, cap);
        if (!d) return tfc_error_set(err, TFC_ERR_NOMEM, "--output: out of memory");
        g->data = d;
        g->cap = cap;
    }
    memcpy(g->data + g->len, t->data, n);
    g->len += n;
    g->shape.dim[0] += s.dim[0];
    return TFC_OK;
}

static tfc_status gather_write(gather *g, const char *prefix, const char *what, tfc_error *err)
{
    if (!g->used) return TFC_OK;
    char path[4096];
    snprintf(path, sizeof path, "%s.%s.npy", prefix, what);
    tfc_tensor t = {g->dtype, g->shape, g->data ? g->data : "", -1};
    tfc_status st = tfc_npy_write(path, &t, err);
    if (!st) printf("wrote %s: %s %s\n", path, tfc_data_dtype_name(g->dtype),
                    tfc_shape_str(&g->shape, (char[128]){0}, 128));
    return st;
}

int main(int argc, char **argv)
{
    const char *solver = NULL, *split = "train", *prefix = NULL;
    long take = 100;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--version")) {
            printf("tfc-data %s\n", TFC_VERSION);
            return 0;
        }
        if ((!strcmp(a, "--split") || !strcmp(a, "--take") || !strcmp(a, "--output")) &&
            i + 1 >= argc) {
            fprintf(stderr, "error: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--split")) {
            split = argv[++i];
            if (strcmp(split, "train") && strcmp(split, "test")) {
                fprintf(stderr, "error: --split must be train or test, found '%s'\n", split);
                return 2;
            }
        } else if (!strcmp(a, "--take")) {
            char *end;
            take = strtol(argv[++i], &end, 10);
            if (*end || take < 1) {
                fprintf(stderr, "error: --take needs a positive integer, found '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--output")) {
            prefix = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "error: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (!solver) {
            solver = a;
        } else {
            fprintf(stderr, "error: more than one solver file ('%s', '%s')\n", solver, a);
            return 2;
        }
    }
    if (!solver) {
        usage(stderr);
        return 2;
    }
    tfc_error err;
    tfc_error_clear(&err);
    tfc_doc *doc = tfc_doc_load_file(solver, &err);
    if (!doc) return fail(&err);
    const tfc_node *root = tfc_doc_root(doc);
    const tfc_node *data = tfc_node_get(root, "data");
    const tfc_node *node = tfc_node_get(data, split);
    char key[32];
    snprintf(key, sizeof key, "data.%s", split);
    if (!node || tfc_node_is_null(node)) {
        tfc_node_error(&err, TFC_ERR_CONFIG, data ? data : root, data ? "data" : "",
                       "the solver has no %s", key);
        tfc_doc_free(doc);
        return fail(&err);
    }
    long long seed = 1;
    const tfc_node *sn = tfc_node_get(root, "seed");
    if (sn && tfc_node_int(sn, "seed", 0, 2147483647, &seed, &err)) {
        tfc_doc_free(doc);
        return fail(&err);
    }
    char *dir = strdup(solver), *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else strcpy(dir, ".");
    tfc_data_options opt = {.key = key, .base_dir = dir, .seed = (uint64_t)seed};
    int code = 0;
    double t0 = now();
    /* The test split tokenizes with the train split's vocabulary. */
    tfc_pipeline *train = NULL;
    if (!strcmp(split, "test") && uses_tokenizer(node)) {
        tfc_data_options topt = opt;
        topt.key = "data.train";
        train = tfc_pipeline_from_config(tfc_node_get(data, "train"), &topt, &err);
        if (!train) {
            code = fail(&err);
            goto out;
        }
        opt.vocab = tfc_pipeline_vocab(train);
    }
    opt.stream = !strcmp(split, "test");
    tfc_pipeline *p = tfc_pipeline_from_config(node, &opt, &err);
    if (!p) {
        code = fail(&err);
        goto out;
    }
    double t1 = now();
    const tfc_element_spec *spec = tfc_pipeline_element_spec(p);
    printf("%s: %lld source records (opened in %.2f s)\n", key,
           (long long)tfc_pipeline_source_size(p), t1 - t0);
    const tfc_vocab *v = tfc_pipeline_vocab(p);
    if (v) printf("  vocabulary: %lld tokens\n", (long long)tfc_vocab_size(v));
    for (int c = 0; c < TFC_COMP_COUNT; c++) {
        char buf[256];
        if (spec->comp[c].present)
            printf("  %-9s %s\n", tfc_data_component_name(c),
                   tfc_data_spec_str(&spec->comp[c], buf, sizeof buf));
    }
    gather g[TFC_COMP_COUNT] = {{0}};
    long n = 0;
    int64_t examples = 0;
    tfc_status st = TFC_OK;
    t1 = now();
    while (n < take) {
        tfc_batch b;
        st = tfc_pipeline_next(p, &b, &err);
        if (st || b.end) break;
        n++;
        examples += spec->batched && b.features.shape.ndim ? b.features.shape.dim[0] : 1;
        if (!prefix) continue;
        const tfc_tensor *t[TFC_COMP_COUNT] = {&b.features, &b.labels, &b.lengths};
        for (int c = 0; c < TFC_COMP_COUNT && !st; c++)
            st = gather_add(&g[c], t[c], spec->batched, tfc_data_component_name(c), &err);
        if (st) break;
    }
    double t2 = now(), secs = t2 - t1 > 1e-9 ? t2 - t1 : 1e-9;
    if (st) {
        code = fail(&err);
    } else {
        printf("%ld elements (%lld examples) in %.3f s: %.1f elements/s, %.1f examples/s\n", n,
               (long long)examples, secs, (double)n / secs, (double)examples / secs);
        if (tfc_pipeline_skipped(p))
            printf("skipped %lld bad records (on_error: skip)\n",
                   (long long)tfc_pipeline_skipped(p));
        static const char *const what[TFC_COMP_COUNT] = {"features", "labels", "lengths"};
        for (int c = 0; c < TFC_COMP_COUNT && prefix && !st; c++)
            st = gather_write(&g[c], prefix, what[c], &err);
        if (st) code = fail(&err);
    }
    for (int c = 0; c < TFC_COMP_COUNT; c++) free(g[c].data);
    tfc_pipeline_free(p);
out:
    tfc_pipeline_free(train);
    free(dir);
    tfc_doc_free(doc);
    return code;
}
