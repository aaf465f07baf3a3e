/* tfc-data SOLVER.yaml [--split train|test] [--take N] [--output PREFIX [--format F]]
 * [--profile] [--set KEY=VALUE]...: runs only the input pipeline of a solver file (read as
 * tfc-train reads it: base_dir, --set overrides, every key checked), prints each
 * component's dtype and shape (tf.data's element_spec) and the elements per second, can
 * write the first N elements as .npy files or as a TFRecord file of tf.train.Example records
 * (a converter from any source), and with --profile prints what each stage cost. A thin main
 * over src/data; exit 0 on success, 1 on unreadable data, 2 on bad usage or configuration. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tfc.h"

/* The command line, as the option table fills it. */
static const char *set_v[256], *solver_v[1];
static struct {
    cli_list sets, solver;
    const char *split, *output, *format;
    long take;
    int profile;
} args = {.sets = CLI_LIST_OF(set_v), .solver = CLI_LIST_OF(solver_v), .split = "train",
          .take = 100, .format = "npy"};

static const cli_option options[] = {
    {"split", 0, CLI_STRING, &args.split, "train|test",
     .help = "the split to run (default: train)"},
    {"take", 0, CLI_INT, &args.take, "N", .min = 1, .max = LONG_MAX,
     .help = "read N elements (default 100; fewer if the data ends)"},
    {"output", 0, CLI_STRING, &args.output, "PREFIX",
     .help = "write them as PREFIX.features.npy and PREFIX.labels.npy\n"
             "(and PREFIX.lengths.npy after padded_batch): batches are\n"
             "concatenated along axis 0, single elements stacked; elements\n"
             "of several inputs or labels: PREFIX.NAME.npy per input and\n"
             "label (an input and a label of one name are refused), and\n"
             "the source that reads them back is printed"},
    {"format", 0, CLI_STRING, &args.format, "npy|tfrecord|tfrecord-gzip",
     .help = "with --output: tfrecord writes PREFIX.tfrecord (.tfrecord.gz:\n"
             "gzip), one tf.train.Example per example with the keys\n"
             "features and labels (after padded_batch, each sequence\n"
             "cut to its length), and prints the source that reads it;\n"
             "not for elements of several inputs or labels"},
    {"profile", 0, CLI_FLAG, &args.profile, NULL,
     .help = "time every call of every stage and print per stage: elements,\n"
             "elements/s, busy time (its own work), threads, share of the\n"
             "pipeline's work, the time its consumer waited in it; then the\n"
             "slowest stage and what to try"},
    CLI_OPT_SOLVER_SET(&args.sets),
    {NULL},
};

static const cli_tool tool = {
    .name = "tfc-data",
    .operands = "SOLVER.yaml",
    .about = "Runs the input pipeline of SOLVER.yaml (data.train or data.test) alone: prints the\n"
             "dtype and shape of each component (-1: unknown, e.g. the batch dimension) and the\n"
             "elements (batches, if the pipeline batches) per second.",
    .options = options,
    .exit_status = "0 success, 1 unreadable data, 2 bad usage or configuration",
    .operand_list = &args.solver,
};

static int fail(const tfc_error *err)
{
    fflush(stdout);
    fputs(err->text[0] ? err->text : "error: unknown failure\n", stderr);
    return tfc_exit_code(err->code ? err->code : TFC_ERR_INTERNAL);
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

/* `key: {name: PREFIX.name.npy, ...}` of the n components comp(0..n) for the source below,
 * or `key: PREFIX.key.npy` for one unnamed. */
static void npy_print_files(const tfc_element_spec *spec, const char *key, int (*comp)(int),
                            int n, const char *prefix)
{
    const char *one = tfc_data_spec_component_name(spec, comp(0));
    if (n == 1 && !strcmp(one, key)) {
        printf("%s: %s.%s.npy", key, prefix, key);
        return;
    }
    printf("%s: {", key);
    for (int k = 0; k < n; k++) {
        const char *name = tfc_data_spec_component_name(spec, comp(k));
        printf("%s%s: %s.%s.npy", k ? ", " : "", name, prefix, name);
    }
    printf("}");
}

/* The source that reads the .npy files of elements of named inputs or labels back. */
static void npy_print(const tfc_element_spec *spec, int ninputs, int nlabels,
                      const char *prefix)
{
    printf("read them with:\n  source: {type: npy, ");
    npy_print_files(spec, "features", tfc_input_comp, ninputs, prefix);
    if (nlabels) {
        printf(", ");
        npy_print_files(spec, "labels", tfc_label_comp, nlabels, prefix);
    }
    printf("}\n");
}

/* --format tfrecord: one Example per example, rows of a batch apart. `row` tracks the shape
 * of the rows written (-1 where they differ) for the source printed at the end. */
typedef struct tfr_out {
    tfc_tfrecord_writer *w;
    char path[4096];
    long records;
    tfc_component_spec row[2]; /* features, labels */
} tfr_out;

static void row_seen(tfc_component_spec *r, const tfc_tensor *t)
{
    if (!r->present) {
        *r = (tfc_component_spec){1, t->dtype, t->shape};
        return;
    }
    if (r->shape.ndim != t->shape.ndim) return; /* the reader's check reports it */
    for (int d = 0; d < t->shape.ndim; d++)
        if (r->shape.dim[d] != t->shape.dim[d]) r->shape.dim[d] = -1;
}

/* Row r of a batched tensor (a view), cut to `len` along its first axis when len >= 0. */
static tfc_tensor row_of(const tfc_tensor *t, int64_t r, int64_t len)
{
    tfc_tensor v = {t->dtype, {.ndim = t->shape.ndim - 1}, NULL, -1};
    for (int d = 1; d < t->shape.ndim; d++) v.shape.dim[d - 1] = t->shape.dim[d];
    size_t bytes = (size_t)tfc_shape_numel(&v.shape) * tfc_dtype_size(t->dtype);
    v.data = (char *)t->data + (size_t)r * bytes;
    if (len >= 0 && v.shape.ndim > 0 && len < v.shape.dim[0]) v.shape.dim[0] = len;
    return v;
}

static tfc_status tfr_add(tfr_out *o, const tfc_batch *b, int batched, tfc_error *err)
{
    static const char *const keys[2] = {"features", "labels"};
    int64_t rows = batched ? b->features.shape.dim[0] : 1;
    for (int64_t r = 0; r < rows; r++) {
        tfc_tensor v[2];
        int n = 0;
        const tfc_tensor *t[2] = {&b->features, &b->labels};
        for (int c = 0; c < 2 && t[c]->data; c++, n++) {
            int64_t len = c == 0 && b->lengths.data
                              ? (int64_t)tfc_value_get(b->lengths.data, b->lengths.dtype, r) : -1;
            v[c] = batched ? row_of(t[c], r, len) : *t[c];
            row_seen(&o->row[c], &v[c]);
        }
        tfc_status st = tfc_tfrecord_write(o->w, n, keys, v, err);
        if (st) return st;
        o->records++;
    }
    return TFC_OK;
}

/* The dtype a feature is read back as: what the writer stored it as, or the original. */
static const char *readback_dtype(tfc_dtype dt)
{
    return dt == TFC_F16 || dt == TFC_BF16 || dt == TFC_F64 || dt == TFC_BOOL
               ? "float32" : tfc_data_dtype_name(dt);
}

static void tfr_print(const tfr_out *o)
{
    printf("wrote %s: %ld records\nread it with:\n  source: {type: tfrecord, files: %s%s",
           o->path, o->records, o->path,
           strstr(o->path, ".gz") ? ", compression: gzip" : "");
    static const char *const keys[2] = {"features", "labels"};
    for (int c = 0; c < 2; c++) {
        const tfc_component_spec *r = &o->row[c];
        if (!r->present) continue;
        printf(",\n           %s: {key: %s, dtype: %s, shape: [", keys[c], keys[c],
               readback_dtype(r->dtype));
        for (int d = 0; d < r->shape.ndim; d++)
            printf("%s%lld", d ? ", " : "", (long long)r->shape.dim[d]);
        printf("]}");
    }
    printf("}\n");
}

int main(int argc, char **argv)
{
    int rc = cli_parse(&tool, argc, argv);
    if (rc >= 0) return rc;
    const char *solver = args.solver.v[0], *split = args.split, *prefix = args.output;
    long take = args.take;
    if (strcmp(split, "train") && strcmp(split, "test"))
        return cli_error(&tool, "--split: expected train or test, found '%s'", split);
    int npy = !strcmp(args.format, "npy"), gz = !strcmp(args.format, "tfrecord-gzip");
    if (!npy && !gz && strcmp(args.format, "tfrecord"))
        return cli_error(&tool, "--format: expected npy, tfrecord or tfrecord-gzip, found '%s'",
                         args.format);
    if (!npy && !prefix) return cli_error(&tool, "--format needs --output");
    tfc_error err;
    tfc_error_clear(&err);
    /* The solver as tfc-train reads it (base_dir, model: FILE, --set, every key checked);
     * a data block alone is a solver here. */
    tfc_solver_options sopt = {.sets = args.sets.v, .nsets = args.sets.n, .data_only = 1};
    tfc_solver *s = tfc_solver_load(solver, &sopt, &err);
    if (!s) return fail(&err);
    const tfc_solver_config *cfg = tfc_solver_get_config(s);
    int test = !strcmp(split, "test");
    const tfc_node *node = test ? cfg->test : cfg->train;
    char key[32];
    snprintf(key, sizeof key, "data.%s", split);
    if (!node) {
        const tfc_node *root = tfc_solver_resolved(s), *data = tfc_node_get(root, "data");
        tfc_node_error(&err, TFC_ERR_CONFIG, data ? data : root, data ? "data" : "",
                       "the solver has no %s", key);
        tfc_solver_free(s);
        return fail(&err);
    }
    tfc_data_options opt = {.key = key, .base_dir = cfg->base_dir, .seed = (uint64_t)cfg->seed,
                            .profile_every = args.profile ? 1 : 0};
    int code = 0;
    double t0 = tfc_now();
    /* The test split tokenizes with the train split's vocabulary. */
    tfc_pipeline *train = NULL;
    if (test && cfg->test_plan.tokenizes) {
        tfc_data_options topt = opt;
        topt.key = "data.train";
        train = tfc_pipeline_from_config(cfg->train, &topt, &err);
        if (!train) {
            code = fail(&err);
            goto out;
        }
        opt.vocab = tfc_pipeline_vocab(train);
    }
    opt.stream = (uint64_t)test;
    tfc_pipeline *p = tfc_pipeline_from_config(node, &opt, &err);
    if (!p) {
        code = fail(&err);
        goto out;
    }
    double t1 = tfc_now();
    const tfc_element_spec *spec = tfc_pipeline_element_spec(p);
    printf("%s: %lld source records (opened in %.2f s)\n", key,
           (long long)tfc_pipeline_source_size(p), t1 - t0);
    const tfc_vocab *v = tfc_pipeline_vocab(p);
    if (v) printf("  vocabulary: %lld tokens\n", (long long)tfc_vocab_size(v));
    int nclasses = 0;
    const char *const *classes = tfc_pipeline_class_names(p, &nclasses);
    if (classes) { /* the size a classifier's last layer needs, with the names, 8 at most */
        printf("  classes: %d (", nclasses);
        for (int c = 0; c < nclasses && c < 8; c++) printf("%s%s", c ? ", " : "", classes[c]);
        printf("%s)\n", nclasses > 8 ? ", ..." : "");
    }
    /* the inputs (input 0 is the features), then the labels (label 0 is labels), lengths */
    int order[TFC_COMP_COUNT], ninputs = tfc_pipeline_inputs(p, NULL), ncomp = 0;
    int nlabels = tfc_pipeline_labels(p, NULL);
    for (int k = 0; k < ninputs; k++) order[ncomp++] = tfc_input_comp(k);
    order[ncomp++] = TFC_COMP_LABELS;
    for (int k = 1; k < nlabels; k++) order[ncomp++] = tfc_label_comp(k);
    order[ncomp++] = TFC_COMP_LENGTHS;
    for (int i = 0; i < ncomp; i++) {
        char buf[256];
        int c = order[i];
        if (spec->comp[c].present)
            printf("  %-9s %s\n", tfc_data_spec_component_name(spec, c),
                   tfc_data_spec_str(&spec->comp[c], buf, sizeof buf));
    }
    gather g[TFC_COMP_COUNT] = {{0}};
    long n = 0;
    int64_t examples = 0;
    tfc_status st = TFC_OK;
    tfr_out tfr = {0};
    char names[600];
    if (prefix && !npy && ninputs > 1)
        st = tfc_error_set(&err, TFC_ERR_CONFIG, "--format %s: the elements have %d inputs (%s), "
                           "and the tfrecord source reads one features key; write them with "
                           "--format npy (a file per input)", args.format, ninputs,
                           tfc_data_inputs_str(spec, names, sizeof names));
    else if (prefix && !npy && nlabels > 1)
        st = tfc_error_set(&err, TFC_ERR_CONFIG, "--format %s: the elements have %d labels (%s), "
                           "and the tfrecord source reads one labels key; write them with "
                           "--format npy (a file per label)", args.format, nlabels,
                           tfc_data_labels_str(spec, names, sizeof names));
    if (st) {
        code = fail(&err);
        tfc_pipeline_free(p);
        goto out;
    }
    if (prefix && !npy) {
        snprintf(tfr.path, sizeof tfr.path, "%s.tfrecord%s", prefix, gz ? ".gz" : "");
        if (!(tfr.w = tfc_tfrecord_writer_open(tfr.path, gz, &err))) {
            code = fail(&err);
            tfc_pipeline_free(p);
            goto out;
        }
    }
    t1 = tfc_now();
    while (n < take) {
        tfc_batch b;
        st = tfc_pipeline_next(p, &b, &err);
        if (st || b.end) break;
        n++;
        examples += spec->batched && b.features.shape.ndim ? b.features.shape.dim[0] : 1;
        if (!prefix) continue;
        if (tfr.w) {
            if ((st = tfr_add(&tfr, &b, spec->batched, &err))) break;
            continue;
        }
        const tfc_tensor *t[TFC_COMP_COUNT] = {&b.features, &b.labels, &b.lengths};
        for (int k = 1; k < b.ninputs; k++) t[tfc_input_comp(k)] = &b.inputs[k];
        for (int k = 1; k < b.nlabels; k++) t[tfc_label_comp(k)] = &b.label_at[k];
        for (int c = 0; c < TFC_COMP_COUNT && !st; c++)
            if (t[c])
                st = gather_add(&g[c], t[c], spec->batched,
                                tfc_data_spec_component_name(spec, c), &err);
        if (st) break;
    }
    double t2 = tfc_now(), secs = t2 - t1 > 1e-9 ? t2 - t1 : 1e-9;
    if (st) {
        code = fail(&err);
    } else {
        printf("%ld elements (%lld examples) in %.3f s: %.1f elements/s, %.1f examples/s\n", n,
               (long long)examples, secs, (double)n / secs, (double)examples / secs);
        char skipped[600];
        tfc_format_skipped(key, tfc_pipeline_skipped(p), tfc_pipeline_skipped_names(p),
                           skipped, sizeof skipped);
        if (skipped[0]) printf("%s\n", skipped);
        if (args.profile) {
            printf("\nprofile (every call timed; busy: the stage's own work over all its "
                   "threads; share: of the pipeline's work, work on N threads counting 1/N; "
                   "waited: its consumer's time in its calls):\n");
            tfc_pipeline_profile_print(p, secs, stdout);
        }
        for (int i = 0; i < ncomp && prefix && npy && !st; i++)
            st = gather_write(&g[order[i]], prefix, tfc_data_spec_component_name(spec, order[i]),
                              &err);
        if (st) code = fail(&err);
        else if (prefix && npy && n > 0 && (ninputs > 1 || nlabels > 1 || spec->input_names[0][0] ||
                                             (nlabels && spec->label_names[0][0])))
            npy_print(spec, ninputs, nlabels, prefix);
    }
    if (tfr.w) {
        tfc_status cst = tfc_tfrecord_writer_close(tfr.w, st ? NULL : &err);
        if (!st && cst) code = fail(&err);
        else if (!st) tfr_print(&tfr);
    }
    for (int c = 0; c < TFC_COMP_COUNT; c++) free(g[c].data);
    tfc_pipeline_free(p);
out:
    tfc_pipeline_free(train);
    tfc_solver_free(s);
    return code;
}
