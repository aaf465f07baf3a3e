/* Batch feeding: the pipelines of the data splits, their element specs checked against the
 * model before any data is read (and their class labels, where the source reads them
 * cheaply), the batch sizes that bind the model and size the host staging buffers, and each
 * batch converted there into the model's layout (float32 features, or int32 token ids;
 * float32 targets, or int32 class indices) and checked: a non-finite value or a class out of
 * range names the record it came from. */
#include "solver/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- what the solver file says ------------------------------------------------------------- */

/* The vocabulary.txt of the run a weights file belongs to: beside it or up to two folders
 * above (snapshots/ sits inside the run directory). */
static int find_vocabulary(const char *weights, char *dir, size_t size)
{
    snprintf(dir, size, "%s", weights);
    for (int up = 0; up < 3; up++) {
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        else snprintf(dir, size, ".");
        char probe[4200];
        struct stat st;
        snprintf(probe, sizeof probe, "%s/vocabulary.txt", dir);
        if (stat(probe, &st) == 0) return 1;
        if (!slash) return 0;
    }
    return 0;
}

/* ---- checks against the model -------------------------------------------------------------- */

static int usable_dtype(tfc_dtype dt)
{
    return dt != TFC_F16 && dt != TFC_BF16 && (unsigned)dt < TFC_DTYPE_COUNT;
}

/* The pipeline input feeding each model input (pin[k], an index into the pipeline's
 * inputs), matched by name when the model has several: each of its inputs needs one of the
 * split's of that name, and the split has no other; a model of one input takes a split of
 * one. Errors name both sides (split/key locate them; err NULL: only the status). */
static tfc_status match_inputs(const tfc_feed *f, const tfc_pipeline *p, const tfc_node *split,
                               const char *key, int *pin, tfc_error *err)
{
    const tfc_model *m = f->model;
    const tfc_element_spec *es = tfc_pipeline_element_spec(p);
    const char *names[TFC_MAX_INPUTS] = {0};
    const int ni = tfc_model_ninputs(m), pn = tfc_pipeline_inputs(p, names);
    char have[600], want[600] = "";
    tfc_data_inputs_str(es, have, sizeof have);
    for (int k = 0, at = 0; k < ni; k++)
        at += snprintf(want + at, sizeof want - (size_t)at, "%s%s", k ? ", " : "",
                       tfc_model_input_name(m, k));
    if (ni == 1 && pn <= 1) {
        pin[0] = 0;
        return TFC_OK;
    }
    if (ni == 1 || pn <= 1) {
        if (!err) return TFC_ERR_CONFIG;
    }
    if (ni == 1)
        return tfc_node_error(err, TFC_ERR_CONFIG, split, key, "yields %d inputs (%s); this "
                              "model takes one input", pn, have);
    if (pn <= 1)
        return tfc_node_error(err, TFC_ERR_CONFIG, split, key, "yields one input (its "
                              "features); model '%s' takes %d (%s): give the source one array "
                              "per input by name, as Keras's fit({name: x, ...}): features: "
                              "{%s: FILE.npy, ...} (docs/data.md)", tfc_model_name(m), ni, want,
                              tfc_model_input_name(m, 0));
    int used[TFC_MAX_INPUTS] = {0};
    for (int k = 0; k < ni; k++) {
        pin[k] = -1;
        for (int j = 0; j < pn && pin[k] < 0; j++)
            if (!strcmp(names[j], tfc_model_input_name(m, k))) pin[k] = j;
        if (pin[k] < 0 && !err) return TFC_ERR_CONFIG;
        if (pin[k] < 0)
            return tfc_node_error(err, TFC_ERR_CONFIG, split, key, "yields the inputs %s, none "
                                  "named '%s', an input of model '%s' (%s)", have,
                                  tfc_model_input_name(m, k), tfc_model_name(m), want);
        used[pin[k]] = 1;
    }
    for (int j = 0; j < pn; j++)
        if (!used[j] && !err) return TFC_ERR_CONFIG;
        else if (!used[j])
            return tfc_node_error(err, TFC_ERR_CONFIG, split, key, "yields an input '%s' that "
                                  "model '%s' does not take (its inputs: %s)", names[j],
                                  tfc_model_name(m), want);
    return TFC_OK;
}

/* The pipeline label feeding each model output (plab), matched by name when the model has
 * several outputs: each needs one of the split's labels of its name, and the split has no
 * other (Keras's fit(x, {"main": y1, "aux": y2})); a model of one output takes a split of
 * one label. Errors name both sides (err NULL: only the status). A split without labels is
 * check_labels's to refuse. */
static tfc_status match_labels(const tfc_feed *f, const tfc_pipeline *p, const tfc_node *split,
                               const char *key, int *plab, tfc_error *err)
{
    const tfc_model *m = f->model;
    const char *names[TFC_MAX_LABELS] = {0};
    const int no = tfc_model_noutputs(m), pn = tfc_pipeline_labels(p, names);
    char have[600] = "", want[600] = "";
    for (int j = 0, at = 0; j < pn; j++)
        at += snprintf(have + at, sizeof have - (size_t)at, "%s%s", j ? ", " : "", names[j]);
    for (int k = 0, at = 0; k < no; k++)
        at += snprintf(want + at, sizeof want - (size_t)at, "%s%s", k ? ", " : "",
                       tfc_model_output_name(m, k));
    for (int k = 0; k < no; k++) plab[k] = 0;
    if (no == 1 && pn <= 1) return TFC_OK;
    if ((no == 1 || pn <= 1) && !err) return TFC_ERR_CONFIG;
    if (no == 1)
        return tfc_node_error(err, TFC_ERR_CONFIG, split, key, "yields %d labels (%s); this "
                              "model gives one output", pn, have);
    if (pn <= 1)
        return tfc_node_error(err, TFC_ERR_CONFIG, split, key, "yields %s; model '%s' gives "
                              "%d outputs (%s): give the source one label array per output by "
                              "name, as Keras's fit(x, {name: y, ...}): labels: {%s: FILE.npy, "
                              "...} (docs/data.md)", pn ? "one label array" : "no labels",
                              tfc_model_name(m), no, want, tfc_model_output_name(m, 0));
    int used[TFC_MAX_LABELS] = {0};
    for (int k = 0; k < no; k++) {
        plab[k] = -1;
        for (int j = 0; j < pn && plab[k] < 0; j++)
            if (!strcmp(names[j], tfc_model_output_name(m, k))) plab[k] = j;
        if (plab[k] < 0 && !err) return TFC_ERR_CONFIG;
        if (plab[k] < 0)
            return tfc_node_error(err, TFC_ERR_CONFIG, split, key, "yields the labels %s, none "
                                  "named '%s', an output of model '%s' (%s)", have,
                                  tfc_model_output_name(m, k), tfc_model_name(m), want);
        used[plab[k]] = 1;
    }
    for (int j = 0; j < pn; j++)
        if (!used[j] && !err) return TFC_ERR_CONFIG;
        else if (!used[j])
            return tfc_node_error(err, TFC_ERR_CONFIG, split, key, "yields a label '%s' that "
                                  "no output of model '%s' has (its outputs: %s)", names[j],
                                  tfc_model_name(m), want);
    return TFC_OK;
}

/* Model input k against the pipeline's component `comp` (its input feeding it). */
static tfc_status check_features(const tfc_feed *f, const tfc_pipeline *p,
                                 const tfc_node *split, const char *key, int k, int comp,
                                 tfc_error *err)
{
    const tfc_element_spec *es = tfc_pipeline_element_spec(p);
    const tfc_component_spec *c = &es->comp[comp];
    const tfc_shape *in = tfc_model_input_shape_at(f->model, k);
    char want[96], got[160], what[160] = "features";
    if (tfc_model_ninputs(f->model) > 1)
        snprintf(what, sizeof what, "input '%s'", tfc_model_input_name(f->model, k));
    tfc_shape_str(in, want, sizeof want);
    const int64_t max_length = k ? 0 : tfc_model_max_length(f->model);
    if (max_length) { /* (null, F) with max_length */
        int q = snprintf(want, sizeof want, "(null");
        for (int i = 1; i < in->ndim; i++)
            q += snprintf(want + q, sizeof want - (size_t)q, ", %lld", (long long)in->dim[i]);
        snprintf(want + q, sizeof want - (size_t)q, ") with input.max_length %lld",
                 (long long)max_length);
    }
    tfc_data_spec_str(c, got, sizeof got);
    int skip = es->batched ? 1 : 0;
    if (!usable_dtype(c->dtype))
        return tfc_node_error(err, TFC_ERR_CONFIG, split, key,
                              "yields %s of dtype %s, which the model cannot take", what, got);
    if (tfc_model_input_dtype_at(f->model, k) == TFC_I32 &&
        (c->dtype == TFC_F32 || c->dtype == TFC_F64))
        return tfc_node_error(err, TFC_ERR_CONFIG, split, key, "yields %s %s, but the model "
                              "takes int32 token ids there", what, got);
    if (c->shape.ndim < 0) return TFC_OK;
    int bad = c->shape.ndim - skip != in->ndim;
    /* a model with a null time axis takes any length up to input.max_length */
    for (int i = 0; !bad && i < in->ndim; i++)
        bad = c->shape.dim[i + skip] >= 0 &&
              (i == 0 && max_length ? c->shape.dim[skip] > max_length
                                    : c->shape.dim[i + skip] != in->dim[i]);
    if (!bad) return TFC_OK;
    if (tfc_model_ninputs(f->model) > 1)
        tfc_node_error(err, TFC_ERR_CONFIG, split, key, "yields %s %s%s, but the model's %s is "
                       "%s per example", what, got, es->batched ? " (batch first)" : "", what,
                       want);
    else
        tfc_node_error(err, TFC_ERR_CONFIG, split, key,
                       "yields features %s%s, but the model's input is %s per example", got,
                       es->batched ? " (batch first)" : "", want);
    const tfc_vocab *v = tfc_pipeline_vocab(p);
    const tfc_text_spec *ts = v ? tfc_vocab_text_spec(v) : NULL;
    if (ts && ts->output_mode != TFC_TEXT_INT)
        tfc_error_hint(err, "text_vectorization's vectors are as wide as the vocabulary it "
                       "adapted (%lld here) unless pad_to_max_tokens: true makes them "
                       "max_tokens wide: set that, or input.shape to the width",
                       (long long)tfc_vocab_size(v));
    else
        tfc_error_hint(err, "match input.shape in the model, or add a reshape map "
                            "(- map: {op: reshape, shape: [...]})");
    return TFC_ERR_CONFIG;
}

/* Model output k's labels against the pipeline's component `comp` (its label feeding it). */
static tfc_status check_labels(const tfc_feed *f, const tfc_element_spec *es,
                               const tfc_node *split, const char *key, int k, int comp,
                               tfc_error *err)
{
    const tfc_component_spec *c = &es->comp[comp];
    const char *loss = tfc_loss_names[tfc_model_loss_kind_at(f->model, k)];
    char got[160], what[160] = "labels";
    if (tfc_model_noutputs(f->model) > 1)
        snprintf(what, sizeof what, "labels '%s'", tfc_model_output_name(f->model, k));
    if (!c->present)
        return tfc_node_error(err, TFC_ERR_CONFIG, split, key,
                              "yields no labels, but the loss %s needs them", loss);
    tfc_data_spec_str(c, got, sizeof got);
    if (!usable_dtype(c->dtype))
        return tfc_node_error(err, TFC_ERR_CONFIG, split, key, "yields %s %s", what, got);
    int64_t per = 1;
    int known = c->shape.ndim >= 0;
    for (int i = es->batched ? 1 : 0; known && i < c->shape.ndim; i++) {
        if (c->shape.dim[i] < 0) known = 0;
        else per *= c->shape.dim[i];
    }
    const int64_t numel = f->label_numels[k];
    if (!known || per == numel) return TFC_OK;
    tfc_node_error(err, TFC_ERR_CONFIG, split, key,
                   "yields %s %s (%lld values per example), but the model's output and loss "
                   "%s need %lld per example",
                   what, got, (long long)per, loss, (long long)numel);
    /* the two cross-entropies' labels swapped: one-hot or mixed (mix_up, cut_mix) rows for
     * the sparse loss, class indices for the categorical one */
    const int classes = tfc_model_classes_at(f->model, k);
    const tfc_loss_kind kind = tfc_model_loss_kind_at(f->model, k);
    const int ndim = tfc_model_output_shape_at(f->model, k)->ndim;
    if (kind == TFC_LOSS_SPARSE_CCE && classes > 1 && per == (int64_t)classes)
        tfc_error_hint(err, "these look like one-hot (or mixed) rows: train with loss: "
                            "categorical_crossentropy, and give every split such labels "
                            "(- map: {op: one_hot, depth: %d})", classes);
    else if (kind == TFC_LOSS_SPARSE_CCE && per == 1 && ndim >= 3)
        tfc_error_hint(err, "the loss is per pixel here (the output is an image of classes): "
                            "give one class id per pixel, labels of the features' height and "
                            "width; or, for one class per image, end the model in "
                            "GlobalAveragePooling2D or Flatten and Dense");
    else if (kind == TFC_LOSS_SPARSE_CCE && per == 1 && ndim == 2)
        tfc_error_hint(err, "the loss is per step here (the output is a sequence of classes): "
                            "give one class id per step; or, for one class per sequence, end "
                            "the last recurrent layer without return_sequences, or pool the "
                            "steps (GlobalAveragePooling1D) before the last Dense");
    else if (kind == TFC_LOSS_CCE && per == 1 && numel == classes)
        tfc_error_hint(err, "these look like class indices: add - map: {op: one_hot, depth: %d} "
                            "to this split's pipeline, or train "
                            "with loss: sparse_categorical_crossentropy", classes);
    return TFC_ERR_CONFIG;
}

/* Two class-name lists that must agree, since a label means the class of its place: a test
 * split whose folders, files or label names are not the train split's (one may have more
 * classes after the other's last). */
static tfc_status same_classes(const char *a, const char *const *x, int nx, const char *b,
                               const char *const *y, int ny, tfc_error *err)
{
    int k = 0;
    while (k < nx && k < ny && !strcmp(x[k], y[k])) k++;
    if (k == nx || k == ny) return TFC_OK; /* one has more classes at the end: the labels agree */
    char one[1024] = "", two[1024] = "";
    for (int i = 0; i < nx; i++)
        snprintf(one + strlen(one), sizeof one - strlen(one), "%s%s", i ? ", " : "", x[i]);
    for (int i = 0; i < ny; i++)
        snprintf(two + strlen(two), sizeof two - strlen(two), "%s%s", i ? ", " : "", y[i]);
    tfc_error_set(err, TFC_ERR_CONFIG, "%s has %d classes (%s) and %s %d (%s): class %d is "
                  "'%s' in one and '%s' in the other, so the labels would mean other classes",
                  a, nx, one, b, ny, two, k, x[k], y[k]);
    tfc_error_hint(err, "give both sources the same `classes:` list (docs/data.md, Sources)");
    return TFC_ERR_CONFIG;
}

/* A class label outside the model's classes, at `at` ("FILE record N"). */
static tfc_status label_range_error(const char *key, const char *at, int64_t label, int classes,
                                    tfc_error *err)
{
    tfc_error_set(err, TFC_ERR_DATA, "%s: %s: label %lld is out of range [0, %d) (the model's "
                  "output has %d classes)", key, at, (long long)label, classes, classes);
    tfc_error_hint(err, "fix the record, or give the model more classes (its last layer's "
                        "units); `num_classes: %d` on %s.source checks every label when the "
                        "file is opened (with `on_error: skip` such records are left out)",
                   classes, key);
    return TFC_ERR_DATA;
}

/* A binary_crossentropy target outside [0, 1] (Keras's: "either 0 or 1"; a probability between
 * is a soft target): its loss would be unbounded below, its metrics meaningless. */
static tfc_status bce_label_error(int64_t numel, const char *key, const char *at, float v,
                                  tfc_error *err)
{
    tfc_error_set(err, TFC_ERR_DATA, "%s: %s: label %g is outside [0, 1], binary_crossentropy's "
                  "targets (0 or 1, or a probability between)", key, at, (double)v);
    if (numel == 1 && v >= 2 && v == floorf(v))
        tfc_error_hint(err, "these look like class ids: for one class of N, end the model in "
                            "Dense(N) with softmax and train with loss: "
                            "sparse_categorical_crossentropy");
    else
        tfc_error_hint(err, "scale the labels into [0, 1] (`autoencode` copies the features "
                            "as they are where it stands: put it after the scale map)");
    return TFC_ERR_DATA;
}

/* A class label of a sparse classifier's split outside its classes, found before any work
 * where the source reads its labels cheaply and every record's label reaches the model
 * (tfc_pipeline_find_label_outside); check_values finds the others as their batch comes. */
static tfc_status check_label_set(const tfc_feed *f, const tfc_pipeline *p, const char *key,
                                  tfc_error *err)
{
    if (!p || tfc_model_loss_kind(f->model) != TFC_LOSS_SPARSE_CCE ||
        tfc_model_noutputs(f->model) > 1) /* the source's labels are one output's */
        return TFC_OK;
    int classes = tfc_model_classes(f->model);
    int64_t v;
    char at[600];
    if (!tfc_pipeline_find_label_outside(p, classes, &v, at, sizeof at)) return TFC_OK;
    return label_range_error(key, at, v, classes, err);
}

/* The examples per batch of a split: the batch dimension of its element spec, else the
 * batch_size its plan found; 1 for an unbatched split. */
static tfc_status batch_size(const tfc_pipeline *p, const tfc_data_plan *plan,
                             const tfc_node *split, const char *key, int *size, tfc_error *err)
{
    const tfc_element_spec *es = tfc_pipeline_element_spec(p);
    const tfc_shape *shape = &es->comp[TFC_COMP_FEATURES].shape;
    *size = 1;
    if (!es->batched) return TFC_OK;
    *size = shape->ndim > 0 && shape->dim[0] > 0 ? (int)shape->dim[0] : (int)plan->batch_size;
    if (*size < 1)
        return tfc_node_error(err, TFC_ERR_CONFIG, split, key,
                              "cannot tell the batch size of this pipeline");
    return TFC_OK;
}

/* The floats (or ids) of one example's features and labels at the model's current length */
static void example_sizes(tfc_feed *f)
{
    tfc_model *m = f->model;
    f->in_numel = tfc_shape_numel(tfc_model_input_shape(m));
    for (int k = 0; k < tfc_model_ninputs(m); k++)
        f->in_numels[k] = tfc_shape_numel(tfc_model_input_shape_at(m, k));
    for (int k = 0; k < tfc_model_noutputs(m); k++)
        f->label_numels[k] = tfc_model_label_rows_at(m, k) *
                             (tfc_model_loss_kind_at(m, k) == TFC_LOSS_SPARSE_CCE
                                  ? 1 : tfc_model_classes_at(m, k));
    f->label_numel = f->label_numels[0];
}

/* Checks the splits' specs, sizes the batches, binds the model and allocates the staging
 * buffers. The model is bound for the train batch (test batches run in slices of it), or
 * when evaluating for the test batch up to 256 examples, so memory and start-up do not grow
 * with a large test batch. */
static tfc_status bind(tfc_feed *f, const tfc_solver *s, tfc_backend *be, tfc_error *err)
{
    tfc_model *m = f->model;
    const tfc_pipeline *split[2] = {f->train, f->test};
    const tfc_node *node[2] = {s->cfg.train, s->cfg.test};
    const tfc_data_plan *plan[2] = {&s->cfg.train_plan, &s->cfg.test_plan};
    const char *key[2] = {"data.train", "data.test"};
    /* staging for the longest sequences a model with a null time axis takes */
    if (tfc_model_max_length(m) && tfc_model_set_length(m, tfc_model_max_length(m), err))
        return err->code;
    example_sizes(f);
    tfc_status st = TFC_OK;
    for (int k = 0; k < 2 && !st; k++) {
        if (!split[k]) continue;
        const tfc_element_spec *es = tfc_pipeline_element_spec(split[k]);
        int pin[TFC_MODEL_MAX_INPUTS], plab[TFC_MODEL_MAX_OUTPUTS];
        st = match_inputs(f, split[k], node[k], key[k], pin, err);
        for (int i = 0; i < tfc_model_ninputs(m) && !st; i++)
            st = check_features(f, split[k], node[k], key[k], i, tfc_input_comp(pin[i]), err);
        if (!st) st = match_labels(f, split[k], node[k], key[k], plab, err);
        for (int i = 0; i < tfc_model_noutputs(m) && !st; i++)
            st = check_labels(f, es, node[k], key[k], i, tfc_label_comp(plab[i]), err);
    }
    int sizes[2] = {1, 1};
    for (int k = 0; k < 2 && !st; k++)
        if (split[k]) st = batch_size(split[k], plan[k], node[k], key[k], &sizes[k], err);
    if (st) return st;
    /* a split dealt among the ranks batches its share: the global batch is the planned one */
    if (f->train && tfc_pipeline_shard_count(f->train) > 1) sizes[0] = (int)plan[0]->batch_size;
    if (f->nranks < 1) f->nranks = 1;
    if (f->train && sizes[0] % f->nranks)
        return tfc_node_error(err, TFC_ERR_CONFIG, node[0], key[0],
                              "the batch of %d examples cannot be split evenly among %d ranks "
                              "(the batch is the global one: each rank takes batch / ranks)",
                              sizes[0], f->nranks);
    f->stage_batch = sizes[0] > sizes[1] ? sizes[0] : sizes[1];
    f->bind_batch = f->train ? sizes[0] / f->nranks : sizes[1] < 256 ? sizes[1] : 256;
    if (!tfc_precision_available(be, s->cfg.precision))
        return tfc_node_error(err, TFC_ERR_CONFIG, s->cfg.precision_node, "precision",
                              "%s is not available on %s yet: its kernels there have not run "
                              "(docs/gpu.md, Status); train there in float32, or in %s with "
                              "device: cpu",
                              tfc_precision_names[s->cfg.precision], be->ops->name,
                              tfc_precision_names[s->cfg.precision]);
    st = tfc_model_bind(m, be, f->bind_batch, err);
    if (st) return st;
    for (int k = 0; k < tfc_model_ninputs(m); k++) {
        f->xs[k] = malloc((size_t)f->stage_batch * (size_t)f->in_numels[k] * 4);
        if (!f->xs[k]) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    f->x = f->xs[0];
    for (int k = 0; k < tfc_model_noutputs(m); k++) {
        f->ys[k] = malloc((size_t)f->stage_batch * (size_t)f->label_numels[k] * 4);
        if (!f->ys[k]) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    f->y = f->ys[0];
    return TFC_OK;
}

/* ---- building the pipelines ---------------------------------------------------------------- */

static tfc_data_options split_options(const tfc_solver *s, int test)
{
    tfc_data_options o = {0};
    o.key = test ? "data.test" : "data.train";
    o.base_dir = s->cfg.base_dir;
    o.seed = (uint64_t)s->cfg.seed;
    o.stream = test ? 1 : 0;
    return o;
}

tfc_status tfc_feed_for_training(tfc_feed *f, const tfc_solver *s, tfc_backend *be,
                                 tfc_error *err)
{
    f->model = s->model;
    tfc_data_options o = split_options(s, 0);
    o.shard_count = f->nranks; /* data-parallel: deal the split where it can be dealt */
    o.shard_index = f->rank;
    f->train = tfc_pipeline_from_config(s->cfg.train, &o, err);
    if (!f->train) return err->code ? err->code : TFC_ERR_DATA;
    if (s->cfg.test) {
        o = split_options(s, 1);
        o.vocab = tfc_pipeline_vocab(f->train);
        o.shard_count = f->nranks; /* each rank evaluates its share of the pass */
        o.shard_index = f->rank;
        o.shard_finite = 1;
        f->test = tfc_pipeline_from_config(s->cfg.test, &o, err);
        if (!f->test) return err->code ? err->code : TFC_ERR_DATA;
    }
    tfc_status st = check_label_set(f, f->train, "data.train", err);
    if (!st) st = check_label_set(f, f->test, "data.test", err);
    /* a split whose stages leave nothing fails before the run directory exists (one rank's
     * share of a dealt test split may be empty: that one, single-process runs only) */
    if (!st) st = tfc_pipeline_check_yields(f->train, err);
    if (!st && f->test && f->nranks == 1) st = tfc_pipeline_check_yields(f->test, err);
    if (st) return st;
    /* The weights the run writes carry the class names of the training source (else the
     * test source's), SPEC §4. */
    int n = 0, nt = 0;
    const char *const *names = tfc_pipeline_class_names(f->train, &n);
    const char *const *tnames = f->test ? tfc_pipeline_class_names(f->test, &nt) : NULL;
    if (names && tnames && (st = same_classes("data.train", names, n, "data.test", tnames, nt,
                                              err)))
        return st;
    if (!names) names = tnames, n = nt;
    if (tfc_model_set_class_names(s->model, names, n, err)) return err->code;
    /* ... and the hash of the vocabulary that tokenized it, which prediction checks */
    const tfc_vocab *vocab = tfc_pipeline_vocab(f->train);
    char hash[17] = "";
    if (vocab) tfc_vocab_hash(vocab, hash);
    tfc_model_set_vocabulary_hash(s->model, hash);
    if (tfc_model_class_weight_balanced(s->model)) {
        int classes = tfc_model_classes(s->model);
        int64_t *counts = malloc((size_t)classes * sizeof *counts);
        if (!counts) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        st = tfc_pipeline_label_counts(f->train, classes, counts, err);
        if (st) tfc_error_prefix(err, "data.train: loss.class_weight: balanced: ");
        if (!st) st = tfc_model_balance_classes(s->model, counts, err);
        free(counts);
        if (st) return st;
    }
    return bind(f, s, be, err);
}

tfc_status tfc_feed_for_evaluation(tfc_feed *f, const tfc_solver *s, tfc_backend *be,
                                   const char *weights, tfc_error *err)
{
    f->model = s->model;
    tfc_data_options o = split_options(s, 1);
    char vdir[4200];
    if (s->cfg.test_plan.tokenizes) {
        if (find_vocabulary(weights, vdir, sizeof vdir)) {
            o.run_dir = vdir;
            o.load_vocabulary = 1;
        } else {
            /* No run folder: rebuild the vocabulary from the training split. */
            tfc_data_options t = split_options(s, 0);
            f->vocab_source = tfc_pipeline_from_config(s->cfg.train, &t, err);
            if (!f->vocab_source) return err->code;
            o.vocab = tfc_pipeline_vocab(f->vocab_source);
        }
    }
    f->test = tfc_pipeline_from_config(s->cfg.test, &o, err);
    if (!f->test) return err->code;
    tfc_status st = check_label_set(f, f->test, "data.test", err);
    int n = 0, nt = 0;
    const char *const *names = tfc_model_class_names(s->model, &n);
    const char *const *tnames = tfc_pipeline_class_names(f->test, &nt);
    if (!st && names && tnames)
        st = same_classes("the weights", names, n, "data.test", tnames, nt, err);
    /* a split whose stages leave nothing is said as tfc-train says it, not tested as empty */
    if (!st) st = tfc_pipeline_check_yields(f->test, err);
    return st ? st : bind(f, s, be, err);
}

/* ---- batches ------------------------------------------------------------------------------- */

/* Converts n elements of src from element `from` on to float32 or int32 (`ints`). Integers
 * must be integral and within int32; returns the first bad index (counted from `from`) or
 * -1. */
static int64_t convert(void *dst, int ints, const tfc_tensor *src, int64_t from, int64_t n)
{
    if (src->dtype == (ints ? TFC_I32 : TFC_F32)) {
        memcpy(dst, (const char *)src->data + (size_t)from * 4, (size_t)n * 4);
        return -1;
    }
    for (int64_t i = 0; i < n; i++) {
        double v = tfc_value_get(src->data, src->dtype, from + i);
        if (ints) {
            if (!(v == floor(v)) || v < -2147483648.0 || v > 2147483647.0) return i;
            ((int32_t *)dst)[i] = (int32_t)v;
        } else {
            ((float *)dst)[i] = (float)v;
        }
    }
    return -1;
}

/* A model with a null time axis (tfc_model_max_length) set to the length of this batch of
 * features (their axis after the batch's): the sizes of an example's features and labels
 * follow it. */
static tfc_status follow_length(tfc_feed *f, const tfc_tensor *features, int batched,
                                const char *key, tfc_error *err)
{
    tfc_model *m = f->model;
    if (!tfc_model_max_length(m) || features->shape.ndim < 1 + batched) return TFC_OK;
    tfc_status s = tfc_model_set_length(m, features->shape.dim[batched], err);
    if (s) {
        tfc_error_prefix(err, "%s: ", key);
        return s;
    }
    example_sizes(f);
    return TFC_OK;
}

/* Checks a batch of n examples against the staging size and the model's layout (pin: the
 * pipeline input feeding each model input). */
static tfc_status check_batch(const tfc_feed *f, const tfc_batch *b, const int *pin,
                              const int *plab, int64_t n, const char *key, tfc_error *err)
{
    char fs[96], want[96];
    if (n < 1 || n > f->stage_batch)
        return tfc_error_set(err, TFC_ERR_DATA,
                             "%s: a batch of %lld examples, larger than the %d its configuration "
                             "announced",
                             key, (long long)n, f->stage_batch);
    for (int k = 0; k < tfc_model_ninputs(f->model); k++) {
        const tfc_tensor *x = &b->inputs[pin[k]];
        if (tfc_shape_numel(&x->shape) == n * f->in_numels[k]) continue;
        tfc_shape_str(&x->shape, fs, sizeof fs);
        tfc_shape_str(tfc_model_input_shape_at(f->model, k), want, sizeof want);
        return tfc_error_set(err, TFC_ERR_DATA,
                             "%s: a batch of features %s does not fit the model's input%s%s%s "
                             "%s per example",
                             key, fs, k || tfc_model_ninputs(f->model) > 1 ? " '" : "",
                             k || tfc_model_ninputs(f->model) > 1
                                 ? tfc_model_input_name(f->model, k) : "",
                             k || tfc_model_ninputs(f->model) > 1 ? "'" : "", want);
    }
    for (int k = 0; k < tfc_model_noutputs(f->model); k++) {
        const tfc_tensor *y = &b->label_at[plab[k]];
        if (y->data && tfc_shape_numel(&y->shape) == n * f->label_numels[k]) continue;
        tfc_shape_str(&y->shape, fs, sizeof fs);
        return tfc_error_set(err, TFC_ERR_DATA,
                             "%s: a batch of labels%s%s%s %s, but the model needs %lld values "
                             "per example",
                             key, tfc_model_noutputs(f->model) > 1 ? " '" : "",
                             tfc_model_noutputs(f->model) > 1 ? tfc_model_output_name(f->model, k)
                                                              : "",
                             tfc_model_noutputs(f->model) > 1 ? "'" : "",
                             y->data ? fs : "(none)", (long long)f->label_numels[k]);
    }
    return TFC_OK;
}

/* The first value of x[0..n) that is not finite (all exponent bits set: inf or NaN), or -1:
 * an OR over the bits in blocks, which the compiler vectorises, then a scan of the block
 * that has one. */
static int64_t first_nonfinite(const float *x, int64_t n)
{
    enum { BLOCK = 4096 };
    for (int64_t at = 0; at < n; at += BLOCK) {
        int64_t end = n - at < BLOCK ? n : at + BLOCK;
        uint32_t any = 0;
        for (int64_t i = at; i < end; i++) {
            uint32_t u;
            memcpy(&u, x + i, sizeof u);
            any |= (u & 0x7f800000u) == 0x7f800000u;
        }
        for (int64_t i = at; any && i < end; i++)
            if (!isfinite(x[i])) return i;
    }
    return -1;
}

/* Where component `comp` of row `row` of the pipeline's batch (example `example` of this
 * rank's rows) came from: "FILE record N" (the file of that input, or of the labels), else
 * "example K of a batch". */
static const char *row_origin(const tfc_pipeline *p, int comp, int64_t row, int64_t example,
                              char *buf, size_t size)
{
    if (!tfc_pipeline_describe_row(p, comp, row, buf, size))
        snprintf(buf, size, "example %lld of a batch", (long long)example);
    return buf;
}

/* Bad values of output o's staged labels (rows [lo, lo + count) of the pipeline's batch,
 * from its component comp): a target that is not finite, a class index outside the output's
 * classes, a binary_crossentropy target outside [0, 1]. */
static tfc_status check_targets(const tfc_feed *f, const tfc_pipeline *p, int o, int comp,
                                const char *key, int64_t lo, int64_t count, tfc_error *err)
{
    char at[600], k_key[400];
    const int64_t per = f->label_numels[o], lnum = count * per;
    const tfc_loss_kind kind = tfc_model_loss_kind_at(f->model, o);
    const int sparse = kind == TFC_LOSS_SPARSE_CCE;
    if (tfc_model_noutputs(f->model) > 1) /* the split, then the output whose labels these are */
        snprintf(k_key, sizeof k_key, "%s: labels '%s'", key, tfc_model_output_name(f->model, o));
    else
        snprintf(k_key, sizeof k_key, "%s", key);
    int64_t bad = sparse ? -1 : first_nonfinite(f->ys[o], lnum);
    if (bad >= 0) {
        int64_t k = bad / per;
        return tfc_error_set(err, TFC_ERR_DATA, "%s: %s: label value %g is not finite", k_key,
                             row_origin(p, comp, lo + k, k, at, sizeof at),
                             (double)((const float *)f->ys[o])[bad]);
    }
    if (kind == TFC_LOSS_BCE) {
        const float *t = f->ys[o];
        for (int64_t i = 0; i < lnum; i++)
            if (t[i] < -1e-5f || t[i] > 1 + 1e-5f) /* a scale map's 255 / 255 may round up */
                return bce_label_error(per, k_key, row_origin(p, comp, lo + i / per, i / per, at,
                                                              sizeof at), t[i], err);
    }
    /* Class indices are checked here, where they reach the loss, not at the source: a
     * `filter` between the two may drop the classes this model does not have. */
    const int32_t *y = f->ys[o];
    int classes = tfc_model_classes_at(f->model, o);
    for (int64_t i = 0; sparse && i < lnum; i++)
        if (y[i] < 0 || y[i] >= classes) {
            int64_t k = i / per;
            return label_range_error(k_key, row_origin(p, comp, lo + k, k, at, sizeof at), y[i],
                                     classes, err);
        }
    return TFC_OK;
}

/* Bad values of a staged batch (rows [lo, lo + count) of the pipeline's batch; pin: the
 * pipeline input feeding each model input, plab the label feeding each output): a feature or
 * a target that is not finite, a
 * class index outside the model's classes. Each names the record it came from, in the file
 * that holds the value: the data is wrong, not the learning rate. */
static tfc_status check_values(const tfc_feed *f, const tfc_pipeline *p, const int *pin,
                               const int *plab, const char *key, int64_t lo, int64_t count,
                               tfc_error *err)
{
    char at[600];
    int64_t bad = -1;
    for (int in = 0; in < tfc_model_ninputs(f->model); in++) {
        int64_t fnum = count * f->in_numels[in];
        if (tfc_model_input_dtype_at(f->model, in) != TFC_F32 ||
            (bad = first_nonfinite(f->xs[in], fnum)) < 0)
            continue;
        int64_t k = bad / f->in_numels[in];
        tfc_error_set(err, TFC_ERR_DATA, "%s: %s: %s value %g is not finite", key,
                      row_origin(p, tfc_input_comp(pin[in]), lo + k, k, at, sizeof at),
                      tfc_model_ninputs(f->model) > 1 ? tfc_model_input_name(f->model, in)
                                                      : "feature",
                      (double)((const float *)f->xs[in])[bad]);
        tfc_error_hint(err, "fix the record (or the map stage that made the value): the model "
                            "would compute a non-finite loss from it whatever the learning rate");
        return TFC_ERR_DATA;
    }
    for (int o = 0; o < tfc_model_noutputs(f->model); o++) {
        tfc_status s = check_targets(f, p, o, tfc_label_comp(plab[o]), key, lo, count, err);
        if (s) return s;
    }
    return TFC_OK;
}

/* The next batch of `p` into f->x / f->y — of a data-parallel run, this rank's rows
 * [count * rank / nranks, count * (rank + 1) / nranks) of it, so rank r of N takes the r-th
 * of N equal micro-batches; *n = 0 at the end of the data. A test batch too small to give
 * every rank a row leaves some ranks *n = 0 with *more = 1 (evaluation goes on). */
static tfc_status next_batch(tfc_feed *f, tfc_pipeline *p, const char *key, int *n, int *more,
                             tfc_error *err)
{
    tfc_batch b;
    *n = 0;
    *more = 0;
    tfc_status s = tfc_pipeline_next(p, &b, err);
    if (s || b.end) return s;
    *more = 1;
    int batched = tfc_pipeline_element_spec(p)->batched;
    int pin[TFC_MODEL_MAX_INPUTS], plab[TFC_MODEL_MAX_OUTPUTS];
    if (match_inputs(f, p, NULL, key, pin, NULL) || /* matched at bind: the spec is the same */
        match_labels(f, p, NULL, key, plab, NULL))
        return tfc_error_set(err, TFC_ERR_DATA, "%s: the inputs changed", key);
    const tfc_tensor *x0 = &b.inputs[pin[0]];
    int64_t count = batched && x0->shape.ndim > 0 ? x0->shape.dim[0] : 1;
    s = follow_length(f, x0, batched, key, err);
    if (!s) s = check_batch(f, &b, pin, plab, count, key, err);
    if (s) return s;
    /* a dealt split's batches are this rank's already */
    int nr = f->nranks > 1 && tfc_pipeline_shard_count(p) == 1 ? f->nranks : 1;
    int64_t lo = nr > 1 ? count * f->rank / nr : 0, hi = nr > 1 ? count * (f->rank + 1) / nr : count;
    count = hi - lo;
    if (count == 0) return TFC_OK;
    int64_t bad = -1;
    char at[600];
    for (int k = 0; k < tfc_model_ninputs(f->model); k++) {
        const tfc_tensor *x = &b.inputs[pin[k]];
        const int64_t per = f->in_numels[k];
        bad = convert(f->xs[k], tfc_model_input_dtype_at(f->model, k) == TFC_I32, x, lo * per,
                      count * per);
        if (bad >= 0)
            return tfc_error_set(err, TFC_ERR_DATA, "%s: %s: %s value %g is not an int32 token "
                                 "id", key, row_origin(p, tfc_input_comp(pin[k]), lo + bad / per,
                                                       bad / per, at, sizeof at),
                                 tfc_model_ninputs(f->model) > 1
                                     ? tfc_model_input_name(f->model, k) : "feature",
                                 tfc_value_get(x->data, x->dtype, lo * per + bad));
    }
    for (int k = 0; k < tfc_model_noutputs(f->model); k++) {
        const tfc_tensor *y = &b.label_at[plab[k]];
        const int64_t per = f->label_numels[k];
        bad = convert(f->ys[k], tfc_model_loss_kind_at(f->model, k) == TFC_LOSS_SPARSE_CCE, y,
                      lo * per, count * per);
        if (bad >= 0)
            return tfc_error_set(err, TFC_ERR_DATA, "%s: %s: label %g is not a class index", key,
                                 row_origin(p, tfc_label_comp(plab[k]), lo + bad / per,
                                            bad / per, at, sizeof at),
                                 tfc_value_get(y->data, y->dtype, lo * per + bad));
    }
    s = check_values(f, p, pin, plab, key, lo, count, err);
    if (!s) *n = (int)count;
    return s;
}

tfc_status tfc_feed_train_batch(tfc_feed *f, int *n, tfc_error *err)
{
    int more;
    tfc_status s = next_batch(f, f->train, "data.train", n, &more, err);
    if (s || *n) return s;
    if (more)
        return tfc_error_set(err, TFC_ERR_DATA,
                             "data.train: a batch too small to give each of %d ranks an example "
                             "(repeat before batch, or drop_remainder: true)",
                             f->nranks);
    tfc_pipeline_reset(f->train);
    s = next_batch(f, f->train, "data.train", n, &more, err);
    if (!s && *n == 0) return tfc_error_set(err, TFC_ERR_DATA, "data.train yields no elements");
    return s;
}

tfc_pipeline *tfc_feed_train_pass(const tfc_feed *f, const tfc_solver *s, tfc_doc **doc,
                                  tfc_error *err)
{
    *doc = tfc_doc_load_string("{}", 2, "<adapt>", err);
    tfc_node *split = *doc ? tfc_node_copy(*doc, s->cfg.train) : NULL;
    if (!split) return NULL;
    tfc_node *stages = tfc_node_get(split, "pipeline");
    if (stages && stages->kind == TFC_NODE_SEQ) { /* one pass: no repeat stage */
        int kept = 0;
        for (int i = 0; i < stages->n; i++) {
            const tfc_node *st = stages->vals[i];
            if (!(st->kind == TFC_NODE_MAP && st->n == 1 && !strcmp(st->keys[0]->str, "repeat")))
                stages->vals[kept++] = stages->vals[i];
        }
        stages->n = kept;
    }
    tfc_data_options o = split_options(s, 0);
    o.vocab = tfc_pipeline_vocab(f->train);
    tfc_pipeline *p = tfc_pipeline_from_config(split, &o, err);
    if (!p && !err->code) tfc_error_set(err, TFC_ERR_DATA, "data.train: no pipeline");
    return p;
}

tfc_status tfc_feed_pass_batch(tfc_feed *f, tfc_pipeline *p, int *n, tfc_error *err)
{
    const int rank = f->rank, nranks = f->nranks;
    int more;
    f->rank = 0, f->nranks = 1; /* every row of the batch */
    tfc_status s = next_batch(f, p, "data.train", n, &more, err);
    f->rank = rank, f->nranks = nranks;
    return s;
}

tfc_status tfc_feed_test_batch(tfc_feed *f, int *n, int *more, tfc_error *err)
{
    return next_batch(f, f->test, "data.test", n, more, err);
}

void tfc_feed_free(tfc_feed *f)
{
    tfc_pipeline_free(f->train);
    tfc_pipeline_free(f->test);
    tfc_pipeline_free(f->vocab_source);
    if (f->model) tfc_model_unbind(f->model);
    for (int k = 0; k < TFC_MODEL_MAX_INPUTS; k++) free(f->xs[k]);
    for (int k = 0; k < TFC_MODEL_MAX_OUTPUTS; k++) free(f->ys[k]);
}

void tfc_feed_inputs(const tfc_feed *f, int64_t at, const void **xs)
{
    for (int k = 0; k < tfc_model_ninputs(f->model); k++)
        xs[k] = (const char *)f->xs[k] + (size_t)at * (size_t)f->in_numels[k] * 4;
}

void tfc_feed_targets(const tfc_feed *f, int64_t at, const void **ys)
{
    for (int k = 0; k < tfc_model_noutputs(f->model); k++)
        ys[k] = (const char *)f->ys[k] + (size_t)at * (size_t)f->label_numels[k] * 4;
}
