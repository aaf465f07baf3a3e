/* Solver files: the top-level schema, the model (a path or inline), --set overrides, and the
 * resolved configuration that config.yaml records — the solver with the model inlined and
 * named, base_dir made absolute and every override applied — with its hashes. Every error
 * of the solver, its optimizer, policy, data splits and model is reported in one run. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "solver/internal.h"

const char *const tfc_run_status_names[] = {"completed", "interrupted", "diverged", "failed",
                                            "stopped_early", "paused", NULL};

typedef struct solver_args {
    const tfc_node *model, *data, *optimizer, *lr_policy, *snapshot, *early_stopping, *ema,
        *rollback, *summary, *loss_scale;
    double weight_decay, clip_gradients;
    int iter_size, max_iter, test_interval, display, average_loss, seed;
    int deterministic, tf32, precision;
    double gpu_memory_limit;
    const char *device, *base_dir;
} solver_args;

#define ARG(member) offsetof(solver_args, member)
static const tfc_field solver_fields[] = {
    {"model", TFC_F_NODE, ARG(model), NULL, TFC_UNBOUNDED, NULL,
     "model file (relative to base_dir) or an inline model mapping"},
    {"data", TFC_F_NODE, ARG(data), NULL, TFC_UNBOUNDED, NULL, "{train: ..., test: ...}"},
    {"optimizer", TFC_F_NODE, ARG(optimizer), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "{type: sgd|adam|adamw|rmsprop|adagrad, ...}; default sgd"},
    {"lr_policy", TFC_F_NODE, ARG(lr_policy), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "{type: fixed|step|multistep|exp|inv|poly|cosine|plateau, ...}; default fixed"},
    {"early_stopping", TFC_F_NODE, ARG(early_stopping), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "{monitor, mode, patience, min_delta, baseline, start_from, restore_best} (Keras "
     "EarlyStopping, counted in test evaluations); default off"},
    {"ema", TFC_F_NODE, ARG(ema), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "{decay, warmup}: test, best and final use a moving average of the weights; default off"},
    {"rollback", TFC_F_NODE, ARG(rollback), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "{lr_factor, max_rollbacks}: a non-finite loss reloads the last snapshot with a lower "
     "rate; default off (the run stops)"},
    {"summary", TFC_F_NODE, ARG(summary), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "{histogram_interval}: what the TensorBoard event file holds beyond scalars"},
    {"weight_decay", TFC_F_FLOAT, ARG(weight_decay), "0.0", 0, 1e30, NULL,
     "L2 regularisation: weight_decay * w is added to every gradient"},
    {"clip_gradients", TFC_F_FLOAT, ARG(clip_gradients), "0.0", 0, 1e30, NULL,
     "scale gradients down when their global L2 norm exceeds this; 0 = off"},
    {"iter_size", TFC_F_INT, ARG(iter_size), "1", 1, 65536, NULL,
     "batches whose gradients are accumulated (and averaged) per update"},
    {"max_iter", TFC_F_INT, ARG(max_iter), NULL, 1, INT_MAX, NULL, "updates to run"},
    {"epochs", TFC_F_REFUSED, 0, TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "tfc counts updates, as Caffe's solvers do, not Keras's epochs: write max_iter: epochs x "
     "ceil(training records / batch_size) (6 epochs of Fashion-MNIST's 60000 images at batch "
     "128 are max_iter: 2814), and test_interval: ceil(records / batch_size) (469) to test "
     "once an epoch, as Keras's fit validates"},
    {"steps_per_epoch", TFC_F_REFUSED, 0, TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "tfc counts updates, not epochs: test_interval is the updates between two tests (Keras's "
     "steps_per_epoch with validation every epoch), max_iter the updates of the whole run"},
    /* the rest of Keras's fit arguments, each where tfc has it */
    {"batch_size", TFC_F_REFUSED, 0, TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "the batch size is a stage of each split's pipeline: - batch: {batch_size: 64} in "
     "data.train.pipeline (and data.test.pipeline), as tf.data batches (docs/data.md)"},
    {"validation_split", TFC_F_REFUSED, 0, TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "tfc tests on the split data.test: {source, pipeline}: another file, or the same source "
     "with a `split:` that holds out every N-th record where the source has one (docs/data.md)"},
    {"validation_data", TFC_F_REFUSED, 0, TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "the test split is data.test: {source, pipeline}, run every test_interval updates"},
    {"callbacks", TFC_F_REFUSED, 0, TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "Keras's callbacks are solver keys: EarlyStopping is early_stopping, ModelCheckpoint "
     "snapshot (and best.safetensors), ReduceLROnPlateau lr_policy: {type: plateau}, "
     "LearningRateScheduler lr_policy, TerminateOnNaN rollback or the default stop, "
     "BackupAndRestore snapshot with --resume; TensorBoard and CSVLogger always write "
     "(docs/solver.md)"},
    {"shuffle", TFC_F_REFUSED, 0, TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "shuffling is a stage of the pipeline: - shuffle: {buffer_size: N} in "
     "data.train.pipeline, before batch"},
    {"verbose", TFC_F_REFUSED, 0, TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "display: N prints progress every N updates (0: never); tfc-train --quiet prints none"},
    {"class_weight", TFC_F_REFUSED, 0, TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "class weights belong to the model's loss: loss: {type: ..., class_weight: [w0, w1, ...]}"},
    {"initial_epoch", TFC_F_REFUSED, 0, TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "tfc-train --resume RUN/snapshots/NAME_iter_N.state continues a run where it stopped"},
    {"test_interval", TFC_F_INT, ARG(test_interval), "0", 0, INT_MAX, NULL,
     "run the whole test pipeline every N iterations; 0 = only at the end"},
    {"display", TFC_F_INT, ARG(display), "100", 0, INT_MAX, NULL,
     "log training loss and metrics every N iterations; 0 = never"},
    {"average_loss", TFC_F_INT, ARG(average_loss), "0", 0, 1000000, NULL,
     "the displayed loss is the mean of the last N iterations' losses; 0 = display"},
    {"snapshot", TFC_F_NODE, ARG(snapshot), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "{interval, prefix, keep}"},
    {"seed", TFC_F_INT, ARG(seed), "1", 0, INT_MAX, NULL,
     "seeds weights, dropout and the data pipeline"},
    {"device", TFC_F_STRING, ARG(device), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "cpu, gpu or gpu:N; default: a GPU when one is usable, else the CPU"},
    {"deterministic", TFC_F_BOOL, ARG(deterministic), "false", 0, 1, NULL,
     "GPU: deterministic cuDNN algorithms and atomics-free reductions (bit-identical reruns)"},
    {"tf32", TFC_F_BOOL, ARG(tf32), "false", 0, 1, NULL,
     "GPU: TensorFloat-32 in GEMMs and convolutions (faster, ~1e-3 relative error)"},
    {"precision", TFC_F_ENUM, ARG(precision), "float32", TFC_UNBOUNDED, tfc_precision_names,
     "float32, bf16 or float16: the values between layers and the weights the layers read "
     "are 16-bit, the arithmetic, updates and snapshots float32 (the CPU only, for now)"},
    {"loss_scale", TFC_F_NODE, ARG(loss_scale), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "{initial_scale, dynamic_growth_steps}: float16's dynamic loss scale (Keras's "
     "LossScaleOptimizer)"},
    {"gpu_memory_limit", TFC_F_FLOAT, ARG(gpu_memory_limit), "0", 0, 1e12, NULL,
     "GPU: MiB the allocator may hold; 0 = no limit (it takes what the model needs)"},
    {"base_dir", TFC_F_STRING, ARG(base_dir), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "folder that relative paths resolve against; default: this file's folder"},
    {NULL}};

typedef struct data_args {
    const tfc_node *train, *test;
} data_args;

static const tfc_field data_fields[] = {
    {"train", TFC_F_NODE, offsetof(data_args, train), NULL, TFC_UNBOUNDED, NULL,
     "{source: {...}, pipeline: [...]}"},
    {"test", TFC_F_NODE, offsetof(data_args, test), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "{source: {...}, pipeline: [...]}; evaluated every test_interval"},
    {NULL}};

typedef struct snapshot_args {
    int interval, keep;
    const char *prefix;
} snapshot_args;

static const tfc_field snapshot_fields[] = {
    {"interval", TFC_F_INT, offsetof(snapshot_args, interval), "0", 0, INT_MAX, NULL,
     "write a snapshot every N iterations; 0 = only at the end and on SIGINT/SIGTERM"},
    {"prefix", TFC_F_STRING, offsetof(snapshot_args, prefix), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "path prefix relative to the run directory; default snapshots/<model name>"},
    {"keep", TFC_F_INT, offsetof(snapshot_args, keep), "3", 0, 1000000, NULL,
     "newest complete snapshots kept; 0 = all"},
    {NULL}};

typedef struct summary_args {
    int histogram_interval;
} summary_args;

typedef struct loss_scale_args {
    double initial_scale;
    int growth_steps;
} loss_scale_args;

static const tfc_field loss_scale_fields[] = {
    {"initial_scale", TFC_F_FLOAT, offsetof(loss_scale_args, initial_scale), "32768", 1, 1e30,
     NULL, "the scale of the first step, a power of two"},
    {"dynamic_growth_steps", TFC_F_INT, offsetof(loss_scale_args, growth_steps), "2000", 1,
     INT_MAX, NULL, "updates with finite gradients after which the scale doubles"},
    {NULL}};

static const tfc_field summary_fields[] = {
    {"histogram_interval", TFC_F_INT, offsetof(summary_args, histogram_interval), "0", 0,
     INT_MAX, NULL, "histograms of every weight and gradient every N iterations; 0 = none"},
    {NULL}};

/* The field tables of a solver file (0: top level, 1: data, 2: snapshot, 3: early_stopping,
 * 4: ema, 5: rollback, 6: summary, 7: loss_scale), for help and docs. */
const tfc_field *tfc_solver_fields(int which)
{
    static const tfc_field *const tables[] = {solver_fields, data_fields, snapshot_fields,
                                              tfc_early_stopping_fields, tfc_ema_fields,
                                              tfc_rollback_fields, summary_fields,
                                              loss_scale_fields};
    return which >= 0 && which < 8 ? tables[which] : NULL;
}

/* A callback's monitor is read at test evaluations: it needs them, and train/ values need
 * displays. */
static tfc_status check_monitor(const tfc_solver_config *c, const tfc_monitor *m,
                                const tfc_node *node, const char *path, tfc_error *err)
{
    if (!c->test || c->test_interval <= 0)
        return tfc_node_error(err, TFC_ERR_CONFIG, node, path,
                              "%s is stepped at each test evaluation: it needs data.test and "
                              "test_interval > 0",
                              path);
    if (m->train && c->display <= 0)
        return tfc_node_error(err, TFC_ERR_CONFIG, node, path,
                              "monitor %s is the latest display's value: it needs display > 0",
                              m->name);
    return TFC_OK;
}

/* early_stopping and the plateau policy: their monitors resolved against the model. */
static tfc_status read_callbacks(tfc_solver_config *c, const tfc_model *model,
                                 const tfc_node *es, const tfc_node *policy, tfc_error *err)
{
    tfc_status st = TFC_OK;
    if (tfc_early_stopping_read(es, "early_stopping", model, &c->early_stopping, err))
        st = TFC_ERR_CONFIG;
    else if (c->early_stopping.enabled &&
             check_monitor(c, &c->early_stopping.monitor, es, "early_stopping", err))
        st = TFC_ERR_CONFIG;
    if (c->lr_policy.type == TFC_LR_PLATEAU) {
        const tfc_node *mon = policy && policy->kind == TFC_NODE_MAP
                                  ? tfc_node_get(policy, "monitor") : NULL;
        if (tfc_monitor_resolve(&c->lr_policy.plateau.monitor, model,
                                mon ? mon : policy, "lr_policy.monitor", err) ||
            check_monitor(c, &c->lr_policy.plateau.monitor, policy, "lr_policy", err))
            st = TFC_ERR_CONFIG;
    }
    return st;
}

/* ---- hashing the resolved configuration ----------------------------------------------------- */

static uint64_t node_hash(const tfc_node *n)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return 0;
    tfc_node_emit(f, n);
    fclose(f);
    uint64_t h = tfc_fnv1a(TFC_FNV_INIT, text, len);
    free(text);
    return h;
}

/* ---- loading -------------------------------------------------------------------------------- */

static int valid_device(const char *d)
{
    if (!strcmp(d, "cpu") || !strcmp(d, "gpu")) return 1;
    if (strncmp(d, "gpu:", 4) != 0 || !d[4]) return 0;
    for (const char *p = d + 4; *p; p++)
        if (*p < '0' || *p > '9' || p - d > 8) return 0;
    return 1;
}

/* `rel` resolved against the folder `dir` (absolute paths unchanged). */
static void join_path(char *out, size_t size, const char *dir, const char *rel)
{
    if (rel[0] == '/' || !dir[0]) snprintf(out, size, "%s", rel);
    else snprintf(out, size, "%s/%s", dir, rel);
}

/* Replaces a `model: path` with the model file's mapping (loaded into s->model_doc). */
static tfc_status inline_model(tfc_solver *s, tfc_error *err)
{
    for (int i = 0; i < s->root->n; i++) {
        if (strcmp(s->root->keys[i]->str, "model") != 0) continue;
        tfc_node *v = s->root->vals[i];
        if (v->kind != TFC_NODE_SCALAR || tfc_node_is_null(v)) return TFC_OK;
        char path[8300];
        join_path(path, sizeof path, s->base_dir, v->str);
        if (access(path, R_OK) != 0)
            return tfc_node_error(err, TFC_ERR_CONFIG, v, "model",
                                  "cannot read the model file %s: %s", path, strerror(errno));
        tfc_doc *md = tfc_doc_load_file(path, err);
        if (!md) return TFC_ERR_CONFIG;
        tfc_doc_free(s->model_doc);
        s->model_doc = md;
        tfc_node *copy = tfc_node_copy(s->doc, tfc_doc_root(md));
        if (!copy) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        /* The model's default name is its file's stem. */
        if (copy->kind == TFC_NODE_MAP && !tfc_node_get(copy, "name")) {
            char stem[256];
            const char *b = strrchr(v->str, '/');
            snprintf(stem, sizeof stem, "%s", b ? b + 1 : v->str);
            char *dot = strrchr(stem, '.');
            if (dot && dot != stem) *dot = 0;
            tfc_node *k = tfc_node_new_scalar(s->doc, copy, "name", 0);
            tfc_node *nm = tfc_node_new_scalar(s->doc, copy, stem, 1);
            if (!k || !nm) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
            /* name first, as people write it */
            tfc_node_map_set(copy, k, nm);
            for (int j = copy->n - 1; j > 0; j--) {
                tfc_node *tk = copy->keys[j], *tv = copy->vals[j];
                copy->keys[j] = copy->keys[j - 1];
                copy->vals[j] = copy->vals[j - 1];
                copy->keys[j - 1] = tk;
                copy->vals[j - 1] = tv;
            }
        }
        s->root->vals[i] = copy;
        return TFC_OK;
    }
    return TFC_OK;
}

/* A model file's root (layers:, no model:) where a solver is expected: one error at its first
 * line saying so; TFC_OK for anything else. */
static tfc_status check_root(const tfc_node *root, tfc_error *err)
{
    if (!tfc_node_get(root, "layers") || tfc_node_get(root, "model")) return TFC_OK;
    return tfc_node_error(err, TFC_ERR_CONFIG, root, NULL,
                          "this is a model file (it has layers: and no model:), and a solver "
                          "is expected here: a file with model: (this file's name), data:, "
                          "optimizer: and max_iter:, as configs/fashion_mlp.yaml");
}

static tfc_status set_scalar(tfc_solver *s, tfc_node *map, const char *key, const char *value,
                             tfc_error *err)
{
    tfc_node *k = tfc_node_new_scalar(s->doc, map, key, 0);
    tfc_node *v = tfc_node_new_scalar(s->doc, map, value, 1);
    if (!k || !v) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    tfc_node_map_set(map, k, v);
    return TFC_OK;
}

static tfc_solver *load(tfc_solver *s, tfc_doc *sdoc, const char *path, tfc_error *err)
{
    s->solver_doc = sdoc;
    snprintf(s->path, sizeof s->path, "%s", path);
    tfc_node *sroot = tfc_doc_root(sdoc);
    if (!sroot || sroot->kind != TFC_NODE_MAP) {
        char found[64];
        tfc_node_describe(sroot, found, sizeof found);
        tfc_node_error(err, TFC_ERR_CONFIG, sroot, NULL,
                       "a solver file is a mapping with model, data, optimizer, max_iter, ...; "
                       "found %s",
                       found);
        return NULL;
    }
    if (check_root(sroot, err)) return NULL;
    s->doc = tfc_doc_load_string("{}", 2, "<resolved>", err);
    if (!s->doc) return NULL;
    s->root = tfc_node_copy(s->doc, sroot);
    if (!s->root) {
        tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        return NULL;
    }
    /* The base folder: the solver file's, unless base_dir says otherwise. */
    char dir[4096] = ".";
    const char *slash = strrchr(path, '/');
    if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (slash == path) snprintf(dir, sizeof dir, "/");
    char abs[PATH_MAX];
    snprintf(s->base_dir, sizeof s->base_dir, "%s", realpath(dir, abs) ? abs : dir);

    /* Overrides outside the model first (they may set base_dir or name another model
     * file), then the model inlined, then the overrides inside it. */
    tfc_status status = TFC_OK;
    for (int pass = 0; pass < 2 && !status; pass++) {
        if (pass == 1) {
            /* base_dir, possibly relative to the solver's folder, made absolute. */
            const tfc_node *bd = tfc_node_get(s->root, "base_dir");
            if (bd && bd->kind == TFC_NODE_SCALAR && !tfc_node_is_null(bd)) {
                char joined[8300];
                join_path(joined, sizeof joined, s->base_dir, bd->str);
                snprintf(s->base_dir, sizeof s->base_dir, "%s",
                         realpath(joined, abs) ? abs : joined);
            }
            if (inline_model(s, err)) return NULL;
        }
        for (int i = 0; i < s->opt.nsets; i++) {
            const char *set = s->opt.sets[i];
            int in_model = !strncmp(set, "model.", 6) || !strncmp(set, "model[", 6);
            if (in_model != pass) continue;
            if (s->nset_docs == TFC_MAX_SETS) {
                status = tfc_error_set(err, TFC_ERR_USAGE, "at most %d --set options",
                                       TFC_MAX_SETS);
                break;
            }
            tfc_doc *keep = NULL;
            if (tfc_override_apply(s->doc, s->root, set, &keep, err)) status = TFC_ERR_CONFIG;
            if (keep) s->set_docs[s->nset_docs++] = keep;
        }
    }
    if (status) return NULL;

    /* Validation: every table, every error; for the data alone, nothing required. */
    tfc_field fields[sizeof solver_fields / sizeof *solver_fields];
    memcpy(fields, solver_fields, sizeof fields);
    for (tfc_field *f = fields; s->opt.data_only && f->name; f++)
        if (!f->def) f->def = TFC_NO_DEFAULT;
    solver_args a;
    tfc_solver_config *c = &s->cfg;
    memset(c, 0, sizeof *c);
    if (tfc_schema_apply(fields, s->root, "", &a, err)) status = TFC_ERR_CONFIG;
    c->weight_decay = a.weight_decay;
    c->clip_gradients = a.clip_gradients;
    c->iter_size = a.iter_size;
    c->max_iter = a.max_iter;
    c->test_interval = a.test_interval;
    c->display = a.display;
    c->average_loss = a.average_loss;
    c->seed = a.seed;
    c->device = a.device;
    c->deterministic = a.deterministic;
    c->tf32 = a.tf32;
    c->precision = (tfc_precision)a.precision;
    c->precision_node = tfc_node_get(s->root, "precision");
    c->gpu_memory_limit = a.gpu_memory_limit;
    c->base_dir = s->base_dir;
    if (a.device && !valid_device(a.device))
        status = tfc_node_error(err, TFC_ERR_CONFIG, tfc_node_get(s->root, "device"), "device",
                                "expected cpu, gpu or gpu:N, found \"%s\"", a.device);
    if (tfc_optimizer_config_read(a.optimizer, "optimizer", &c->optimizer, err))
        status = TFC_ERR_CONFIG;
    if (tfc_lr_policy_read(a.lr_policy, "lr_policy", &c->lr_policy, err)) status = TFC_ERR_CONFIG;
    /* a Keras schedule as the optimizer's learning_rate is the policy (and the base rate) */
    if (c->optimizer.lr_schedule && a.lr_policy && !tfc_node_is_null(a.lr_policy))
        status = tfc_node_error(err, TFC_ERR_CONFIG, a.lr_policy, "lr_policy",
                                "optimizer.learning_rate is a schedule already: give the "
                                "schedule there or an lr_policy here, not both");
    else if (c->optimizer.lr_schedule &&
             tfc_lr_schedule_read(c->optimizer.lr_schedule, "optimizer.learning_rate",
                                  &c->lr_policy, &c->optimizer.learning_rate, err))
        status = TFC_ERR_CONFIG;
    if (tfc_ema_config_read(a.ema, &c->ema, err)) status = TFC_ERR_CONFIG;
    if (tfc_rollback_config_read(a.rollback, &c->rollback, err)) status = TFC_ERR_CONFIG;
    summary_args su;
    if (tfc_schema_apply(summary_fields, a.summary, "summary", &su, err)) status = TFC_ERR_CONFIG;
    c->histogram_interval = su.histogram_interval;
    loss_scale_args ls;
    if (tfc_schema_apply(loss_scale_fields, a.loss_scale, "loss_scale", &ls, err))
        status = TFC_ERR_CONFIG;
    c->loss_scale_initial = c->precision == TFC_PRECISION_FLOAT16 ? ls.initial_scale : 1.0;
    c->loss_scale_growth = ls.growth_steps;
    int e2;
    if (a.loss_scale && c->precision != TFC_PRECISION_FLOAT16)
        status = tfc_node_error(err, TFC_ERR_CONFIG, a.loss_scale, "loss_scale",
                                "applies to precision: float16 (this solver's is %s)",
                                tfc_precision_names[c->precision]);
    else if (a.loss_scale && frexp(ls.initial_scale, &e2) != 0.5)
        status = tfc_node_error(err, TFC_ERR_CONFIG, tfc_node_get(a.loss_scale, "initial_scale"),
                                "loss_scale.initial_scale",
                                "expected a power of two (halving and doubling it stays exact), "
                                "found %g", ls.initial_scale);
    snapshot_args sn;
    if (tfc_schema_apply(snapshot_fields, a.snapshot, "snapshot", &sn, err)) status = TFC_ERR_CONFIG;
    c->snapshot_interval = sn.interval;
    c->snapshot_keep = sn.keep;
    c->snapshot_prefix = sn.prefix;
    data_args d = {0};
    if (a.data && tfc_schema_apply(data_fields, a.data, "data", &d, err)) status = TFC_ERR_CONFIG;
    c->train = d.train;
    c->test = d.test && !tfc_node_is_null(d.test) ? d.test : NULL;
    /* (tfc-ctl set refuses the same: a test every N iterations needs a split to test on) */
    if (c->test_interval > 0 && !c->test && a.data)
        status = tfc_node_error(err, TFC_ERR_CONFIG, tfc_node_get(s->root, "test_interval"),
                                "test_interval", "%d needs data.test, which this "
                                "solver has not: add the split, or test_interval: 0",
                                c->test_interval);
    /* Both splits checked completely, still without reading any data. */
    tfc_data_options train_key = {.key = "data.train"}, test_key = {.key = "data.test"};
    if (c->train && tfc_pipeline_plan(c->train, &train_key, &c->train_plan, err))
        status = TFC_ERR_CONFIG;
    if (c->test && tfc_pipeline_plan(c->test, &test_key, &c->test_plan, err))
        status = TFC_ERR_CONFIG;
    if (a.model && a.model->kind != TFC_NODE_MAP) {
        char found[64];
        tfc_node_describe(a.model, found, sizeof found);
        status = tfc_node_error(err, TFC_ERR_CONFIG, a.model, "model",
                                "expected a model file name or a model mapping, found %s", found);
    } else if (a.model) {
        c->model = a.model;
        char stem[256];
        const char *b = strrchr(path, '/');
        snprintf(stem, sizeof stem, "%s", b ? b + 1 : path);
        char *dot = strrchr(stem, '.');
        if (dot && dot != stem) *dot = 0;
        if (tfc_solver_default_max_length(s->doc, (tfc_node *)a.model, c->train, c->test, err))
            return NULL;
        s->model = tfc_model_from_node(a.model, stem, err);
        if (!s->model || tfc_model_check_loss(s->model, err)) status = TFC_ERR_CONFIG;
        else if (!status && read_callbacks(c, s->model, a.early_stopping, a.lr_policy, err))
            status = TFC_ERR_CONFIG;
    }
    if (status) return NULL;
    if (!s->model) return s; /* the data alone (data_only): no run to name or hash */
    tfc_model_set_precision(s->model, c->precision);

    /* The resolved configuration names the model and its base folder explicitly, so
     * config.yaml runs the same from anywhere. */
    tfc_node *model = (tfc_node *)c->model;
    if (!tfc_node_get(model, "name") &&
        set_scalar(s, model, "name", tfc_model_name(s->model), err))
        return NULL;
    if (set_scalar(s, s->root, "base_dir", s->base_dir, err)) return NULL;
    if (c->snapshot_prefix) snprintf(s->prefix, sizeof s->prefix, "%s", c->snapshot_prefix);
    else snprintf(s->prefix, sizeof s->prefix, "snapshots/%s", tfc_model_name(s->model));
    c->snapshot_prefix = s->prefix;
    if (s->prefix[0] == '/' || strstr(s->prefix, "..")) {
        tfc_node_error(err, TFC_ERR_CONFIG, tfc_node_get(a.snapshot, "prefix"), "snapshot.prefix",
                       "expected a path relative to the run directory without '..', found \"%s\"",
                       s->prefix);
        return NULL;
    }
    s->config_hash = node_hash(s->root);
    s->model_hash = node_hash(c->model);
    return s;
}

/* Takes ownership of sdoc; frees everything on error. */
static tfc_solver *finish(tfc_solver *s, tfc_doc *sdoc, const char *path, tfc_error *err)
{
    if (!sdoc || !load(s, sdoc, path, err)) {
        tfc_error_sort(err); /* the solver's and the model's errors, each file top to bottom */
        if (!s->solver_doc) tfc_doc_free(sdoc);
        tfc_solver_free(s);
        return NULL;
    }
    return s;
}

static tfc_solver *solver_new(const tfc_solver_options *opt)
{
    tfc_solver *s = calloc(1, sizeof *s);
    if (s && opt) s->opt = *opt;
    if (s && !opt) s->opt.live = -1;
    return s;
}

tfc_solver *tfc_solver_load(const char *path, const tfc_solver_options *opt, tfc_error *err)
{
    tfc_solver *s = solver_new(opt);
    if (!s) {
        tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return finish(s, tfc_doc_load_file(path, err), path, err);
}

tfc_solver *tfc_solver_from_string(const char *yaml, const char *name,
                                   const tfc_solver_options *opt, tfc_error *err)
{
    tfc_solver *s = solver_new(opt);
    if (!s) {
        tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return finish(s, tfc_doc_load_string(yaml, strlen(yaml), name, err), name, err);
}

void tfc_solver_free(tfc_solver *s)
{
    if (!s) return;
    tfc_model_free(s->model);
    tfc_doc_free(s->doc);
    for (int i = 0; i < s->nset_docs; i++) tfc_doc_free(s->set_docs[i]);
    tfc_doc_free(s->model_doc);
    tfc_doc_free(s->solver_doc);
    free(s);
}

const tfc_solver_config *tfc_solver_get_config(const tfc_solver *s) { return &s->cfg; }
const tfc_node *tfc_solver_resolved(const tfc_solver *s) { return s->root; }
tfc_model *tfc_solver_model(tfc_solver *s) { return s->model; }
uint64_t tfc_solver_config_hash(const tfc_solver *s) { return s->config_hash; }
uint64_t tfc_solver_model_hash(const tfc_solver *s) { return s->model_hash; }
