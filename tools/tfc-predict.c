/* tfc-predict: a forward pass (inference mode) over examples from an .npy array, image files
 * or lines of text, writing the outputs as an .npy array and, for images and text, the top
 * class of each example on stdout. The examples reach the model through an in-memory input
 * pipeline and its map ops (those of a solver's test split, --map, or the default for
 * images), the code that feeds training, so prediction preprocesses as training did. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"
#include "tfc.h"

/* Images given without --solver or --map are scaled by 1/255, as the configs/ solvers do. */
#define DEFAULT_IMAGE_MAP "map: {op: scale, factor: 0.00392156862745098}"

/* The map ops of the command line in their order: --map OP and the deprecated --scale X. */
static struct {
    const char *arg[256];
    int is_scale[256];
    int n;
} maps;

static const char *add_map(void *ctx, const char *arg);
static const char *add_scale(void *ctx, const char *arg);

/* The rest of the command line, as the option table fills it. */
static const char *input_v[4096], *model_v[1], *set_v[256];
static struct {
    cli_list inputs, model, sets;
    const char *weights, *output, *text, *vocabulary, *solver, *device;
    long batch, threads, length;
} args = {.inputs = CLI_LIST_OF(input_v), .model = CLI_LIST_OF(model_v),
            .sets = CLI_LIST_OF(set_v), .length = 80};

static const cli_option options[] = {
    {"weights", 0, CLI_STRING, &args.weights, "FILE", .flags = CLI_REQUIRED,
     .help = "the trained weights (a .safetensors file)"},
    {"input", 0, CLI_VALUES, &args.inputs, "FILE",
     .help = "one .npy array of examples [N, input shape...] (or one example of\n"
             "the input shape), taken as it is; or PNG/JPEG images, decoded to\n"
             "the input's channels, all of one size; or WAV files, decoded to\n"
             "the input's channels and cropped or zero-padded to its steps.\n"
             "A model of several inputs: one .npy array each, NAME=X.npy or\n"
             "in the inputs' order"},
    {"text", 0, CLI_STRING, &args.text, "FILE",
     .help = "one example per line, tokenized with --vocabulary, padded with 0\n"
             "or truncated to the input length (a text_vectorization vocabulary\n"
             "of a vector mode: vectorized to the input's width)"},
    {"vocabulary", 0, CLI_STRING, &args.vocabulary, "VOCAB",
     .help = "the vocabulary.txt that the text model's training run wrote\n"
             "(default: the one in MODEL.yaml's folder, a run's config.yaml's);\n"
             "one the weights were not trained with is refused"},
    {"output", 0, CLI_STRING, &args.output, "Y.npy",
     .help = "write the outputs [N, output shape...] as float32 (needed with\n"
             "an .npy input). A model of several outputs: Y.NAME.npy each,\n"
             "NAME its output's layer"},
    {"solver", 0, CLI_STRING, &args.solver, "SOLVER.yaml",
     .help = "preprocess with the map ops of the solver's test split (a run's\n"
             "config.yaml works too)"},
    {"map", 0, CLI_CALL, &maps, "OP", .call = add_map,
     .help = "preprocess with this map op, YAML flow text such as\n"
             "'{op: scale, factor: 0.5}'; repeatable, applied in order"},
    {"scale", 0, CLI_CALL, &maps, "X", .call = add_scale,
     .help = "deprecated: the same as --map '{op: scale, factor: X}'"},
    {"batch", 0, CLI_INT, &args.batch, "N", .min = 1, .max = 1 << 20,
     .help = "examples per forward pass (default: the model's pass size, 256 but\n"
             "on the CPU for a memory-bound model such as a MobileNet, 8 to 128)"},
    {"length", 0, CLI_INT, &args.length, "N", .min = 1, .max = 1 << 20,
     .help = "with --text and no --output, for a model that predicts the next\n"
             "token at every step: tokens of each line's continuation (default 80)"},
    CLI_OPT_MODEL_SET(&args.sets),
    CLI_OPT_DEVICE(&args.device),
    CLI_OPT_THREADS(&args.threads),
    {NULL},
};

static const cli_tool tool = {
    .name = "tfc-predict",
    .operands = CLI_MODEL_OPERAND,
    .forms = "MODEL.yaml --weights FILE --input X.npy --output Y.npy [options]\n"
             "MODEL.yaml --weights FILE --input a.png b.jpg ... [--output Y.npy] [options]\n"
             "MODEL.yaml --weights FILE --text LINES.txt [--vocabulary VOCAB] [options]",
    .about = "Runs the model (inference mode) on examples and writes its outputs; for images and\n"
             "text, when the model's output is a vector of classes, it also prints each example's\n"
             "top class and its output value: `NAME (INDEX) VALUE` with the class names the\n"
             "weights file records (the training data's), else `class INDEX VALUE`.",
    .options = options,
    .notes = CLI_MODEL_NOTE "\n\n"
             "Preprocessing: the examples pass through map ops before the model, as in training.\n"
             "--solver takes the `map` stages of the solver's data.test.pipeline, in order, and\n"
             "applies them to each example; the stages that are not per-example maps (shuffle,\n"
             "batch, padded_batch, repeat, filter, take, skip, cache, prefetch) and the maps of\n"
             "labels (component: labels) are skipped. --map gives the ops instead. With neither,\n"
             "images are scaled by 1/255 (map: {op: scale, factor: 0.00392156862745098}, as the\n"
             "configs/ solvers train them; a note on stderr says so), and .npy values and token\n"
             "ids go to the model as they are. The values are then converted to the model's\n"
             "input dtype (float32, or int32 token ids).\n\n"
             "Continuations: with --text and no --output, a model whose output has a vector of\n"
             "token scores per input step (a language model such as fortunes_char_lstm) prints\n"
             "each line's continuation: the last input-length tokens of the line go in, the\n"
             "highest-scoring token (not <pad> or <unk>) at the line's last step is appended,\n"
             "and so on for --length tokens or up to a newline (greedy decoding).",
    .exit_status = "0 success, 1 runtime failure (unreadable or misshapen input, device),\n"
                   "2 bad usage or configuration",
    .operand_list = &args.model,
};

static const char *push_map(const char *arg, int is_scale)
{
    if (maps.n == (int)(sizeof maps.arg / sizeof *maps.arg)) return "too many map ops";
    maps.arg[maps.n] = arg;
    maps.is_scale[maps.n++] = is_scale;
    return NULL;
}

static const char *add_map(void *ctx, const char *arg)
{
    return push_map(arg, 0);
}

static const char *add_scale(void *ctx, const char *arg)
{
    char *end;
    double v = strtod(arg, &end);
    if (!*arg || *end || !isfinite(v)) return "expected a number";
    return push_map(arg, 1);
}

/* The examples, stacked along a new axis 0, as they enter the pipeline. */
typedef struct examples {
    tfc_tensor x;
    char what[4400]; /* names them in errors: "x.npy: array of shape (4, 36)" */
    int mapped;      /* map ops were applied */
} examples;

/* An .npy array: examples along axis 0, or one example of the model's input shape (of its
 * rank, for a model of variable length). */
static tfc_status load_npy(const char *path, const tfc_model *model, examples *ex,
                           tfc_error *err)
{
    const tfc_shape *in = tfc_model_input_shape(model);
    tfc_status s = tfc_npy_read(path, &ex->x, err);
    if (s) return s;
    tfc_shape *sh = &ex->x.shape;
    char buf[96];
    snprintf(ex->what, sizeof ex->what, "%s: array of shape %s", path,
             tfc_shape_str(sh, buf, sizeof buf));
    /* with a null time axis (input.max_length) an array of the input's rank is one example */
    int one = tfc_model_max_length(model) ? sh->ndim == in->ndim : tfc_shape_equal(sh, in);
    if (!one) return TFC_OK;
    if (sh->ndim == TFC_MAX_DIMS)
        return tfc_error_set(err, TFC_ERR_DATA, "%s: too many dimensions", ex->what);
    for (int d = sh->ndim; d > 0; d--) sh->dim[d] = sh->dim[d - 1];
    sh->dim[0] = 1;
    sh->ndim++;
    return TFC_OK;
}

/* Image files, decoded to the model's channel count and stacked: one size for all. */
static tfc_status load_images(const tfc_shape *in, examples *ex, tfc_error *err)
{
    if (in->ndim != 3)
        return tfc_error_set(err, TFC_ERR_USAGE, "image inputs need a model input of shape "
                             "(height, width, channels)");
    int64_t per = 0;
    tfc_shape first = {0};
    for (int i = 0; i < args.inputs.n; i++) {
        const char *path = args.inputs.v[i];
        char *buf;
        size_t len;
        tfc_tensor img;
        tfc_status s = tfc_file_read_all(path, 1u << 30, &buf, &len, err);
        if (s) return s;
        s = tfc_image_decode(buf, len, path, (int)in->dim[2], NULL, &img, err);
        free(buf);
        if (s) return s;
        if (i == 0) {
            char sh[96];
            snprintf(ex->what, sizeof ex->what, "%s: image of shape %s", path,
                     tfc_shape_str(&img.shape, sh, sizeof sh));
            first = img.shape;
            per = tfc_shape_numel(&first);
            tfc_shape all = {4, {args.inputs.n, first.dim[0], first.dim[1], first.dim[2]}};
            ex->x = (tfc_tensor){TFC_U8, all, malloc((size_t)(per * args.inputs.n)), -1};
            if (!ex->x.data) {
                free(img.data);
                return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
            }
        } else if (!tfc_shape_equal(&img.shape, &first)) {
            tfc_error_set(err, TFC_ERR_DATA, "%s: image is %lldx%lld, %s is %lldx%lld (the images "
                          "of one run must have one size)", path, (long long)img.shape.dim[1],
                          (long long)img.shape.dim[0], args.inputs.v[0], (long long)first.dim[1],
                          (long long)first.dim[0]);
            free(img.data);
            return TFC_ERR_DATA;
        }
        memcpy((uint8_t *)ex->x.data + i * per, img.data, (size_t)per);
        free(img.data);
    }
    return TFC_OK;
}

/* Whether path names a WAV file (.wav, any case) */
static int wav_path(const char *path)
{
    const char *dot = strrchr(path, '.');
    return dot && !strcasecmp(dot, ".wav");
}

/* WAV files as the audio source reads them (docs/data.md), decoded to the model input's
 * channels and stacked: cropped or zero-padded to its steps, or, for a model of variable
 * length, zero-padded to the longest file (as padded_batch pads a batch; at most
 * input.max_length steps). */
static tfc_status load_audio(const tfc_model *model, examples *ex, tfc_error *err)
{
    const tfc_shape *in = tfc_model_input_shape(model);
    const int64_t max_len = tfc_model_max_length(model);
    if (in->ndim != 2 || tfc_model_input_dtype(model) != TFC_F32)
        return tfc_error_set(err, TFC_ERR_USAGE, "WAV inputs need a float model input of shape "
                             "(steps, channels)");
    tfc_tensor *w = calloc((size_t)args.inputs.n, sizeof *w);
    if (!w) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    tfc_status s = TFC_OK;
    int64_t steps = max_len ? 0 : in->dim[0];
    for (int i = 0; i < args.inputs.n && !s; i++) {
        const char *path = args.inputs.v[i];
        char *buf;
        size_t len;
        s = tfc_file_read_all(path, 1u << 30, &buf, &len, err);
        if (s) break;
        s = tfc_wav_decode(buf, len, path, (int)in->dim[1], max_len ? -1 : in->dim[0], NULL,
                           &w[i], err);
        free(buf);
        if (!s && max_len && w[i].shape.dim[0] > max_len)
            s = tfc_error_set(err, TFC_ERR_DATA, "%s: %lld steps, more than the model's "
                              "input.max_length %lld", path, (long long)w[i].shape.dim[0],
                              (long long)max_len);
        if (!s && w[i].shape.dim[0] > steps) steps = w[i].shape.dim[0];
    }
    const int64_t c = in->dim[1], per = steps * c;
    if (!s && steps == 0)
        s = tfc_error_set(err, TFC_ERR_DATA, "%s%s: no samples (a model of variable length runs "
                          "at least one step)", args.inputs.v[0],
                          args.inputs.n > 1 ? " and the other files" : "");
    if (!s) {
        ex->x = (tfc_tensor){TFC_F32, {3, {args.inputs.n, steps, c}},
                             calloc((size_t)(per * args.inputs.n + 1), 4), -1};
        if (!ex->x.data) s = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        snprintf(ex->what, sizeof ex->what, "%s: audio of %lld steps", args.inputs.v[0],
                 (long long)(w[0].shape.dim[0]));
    }
    for (int i = 0; i < args.inputs.n; i++) {
        if (!s) memcpy((float *)ex->x.data + i * per, w[i].data,
                       (size_t)tfc_shape_numel(&w[i].shape) * 4);
        free(w[i].data);
    }
    free(w);
    return s;
}

/* Lines of text as int32 token ids, padded with 0 or truncated to the input length; with a
 * text_vectorization vocabulary of a vector mode, as its float32 vectors of the input's
 * width (multi_hot, count, tf_idf, one_hot). */
static tfc_status load_text(const tfc_shape *in, const tfc_vocab *v, examples *ex,
                            tfc_error *err)
{
    const tfc_text_spec *ts = tfc_vocab_text_spec(v);
    int vectors = ts && ts->output_mode != TFC_TEXT_INT;
    if (in->ndim != 1)
        return tfc_error_set(err, TFC_ERR_USAGE, "--text needs a model input of shape (%s)",
                             vectors ? "vocabulary size" : "steps");
    if (vectors && in->dim[0] < tfc_vocab_size(v))
        return tfc_error_set(err, TFC_ERR_USAGE, "--text: the model input has %lld values but "
                             "the vocabulary %lld ids", (long long)in->dim[0],
                             (long long)tfc_vocab_size(v));
    char *buf;
    size_t len;
    tfc_status s = tfc_file_read_all(args.text, 1u << 30, &buf, &len, err);
    if (s) return s;
    int64_t lines = 0, steps = in->dim[0];
    for (size_t i = 0; i < len; i++) lines += buf[i] == '\n' || (i + 1 == len);
    char *x = calloc((size_t)((lines ? lines : 1) * steps), 4);
    int64_t row = 0;
    for (char *p = buf; x && p < buf + len && row < lines; row++) {
        char *end = memchr(p, '\n', (size_t)(buf + len - p));
        size_t l = end ? (size_t)(end - p) : (size_t)(buf + len - p);
        if (tfc_vocab_vectorize(v, p, l, x + row * steps * 4, steps) == -1) {
            free(x);
            x = NULL;
        }
        p += l + 1;
    }
    free(buf);
    if (!x) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    ex->x = (tfc_tensor){vectors ? TFC_F32 : TFC_I32, {2, {row, steps}}, x, -1};
    char sh[96];
    snprintf(ex->what, sizeof ex->what, "%s: lines %s shape %s", args.text,
             vectors ? "vectorized to" : "tokenized to",
             tfc_shape_str(&(tfc_shape){1, {steps}}, sh, sizeof sh));
    return TFC_OK;
}

/* Appends the `map` stages of the solver's data.test.pipeline in order, except the maps of
 * labels (the examples have none). The split is planned first, so a mistake in it is reported
 * at its line in the solver file. */
static tfc_status add_solver_maps(tfc_pipeline *p, const char *path, examples *ex,
                                  tfc_error *err)
{
    tfc_doc *doc = tfc_doc_load_file(path, err);
    if (!doc) return err->code;
    const tfc_node *root = tfc_doc_root(doc), *data = tfc_node_get(root, "data");
    const tfc_node *test = tfc_node_get(data, "test");
    tfc_data_options opt = {.key = "data.test"};
    tfc_data_plan plan;
    tfc_status st;
    if (!test || tfc_node_is_null(test))
        st = tfc_node_error(err, TFC_ERR_CONFIG, data ? data : root, data ? "data" : "",
                            "--solver: the file has no data.test to take the map ops from");
    else
        st = tfc_pipeline_plan(test, &opt, &plan, err);
    const tfc_node *stages = st ? NULL : tfc_node_get(test, "pipeline");
    for (int i = 0; stages && !st && i < stages->n; i++) {
        const tfc_node *map = tfc_node_get(stages->vals[i], "map");
        const tfc_node *comp = tfc_node_get(map, "component");
        if (!map || (comp && comp->kind == TFC_NODE_SCALAR && !strcmp(comp->str, "labels")))
            continue;
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f) {
            st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
            break;
        }
        tfc_node_emit(f, stages->vals[i]);
        fclose(f);
        st = tfc_pipeline_add_yaml(p, text, err);
        if (st)
            tfc_error_hint(err, "the map op of %s:%d:%d (--solver)", path, stages->vals[i]->line,
                           stages->vals[i]->col);
        free(text);
        ex->mapped = 1;
    }
    tfc_doc_free(doc);
    return st;
}

/* The examples' pipeline: their map ops, then batches of `batch`. */
static tfc_pipeline *make_pipeline(examples *ex, int batch, int images, tfc_error *err)
{
    tfc_data_options opt = {.key = "examples"};
    tfc_pipeline *p = tfc_pipeline_from_tensors(&ex->x, NULL, &opt, err);
    if (!p) return NULL;
    tfc_status st = args.solver ? add_solver_maps(p, args.solver, ex, err) : TFC_OK;
    for (int i = 0; !st && i < maps.n; i++) {
        char stage[4200];
        const char *a = maps.arg[i];
        if (maps.is_scale[i]) snprintf(stage, sizeof stage, "map: {op: scale, factor: %.17g}",
                                       strtod(a, NULL));
        else snprintf(stage, sizeof stage, a[strspn(a, " ")] == '{' ? "map: %s" : "map: {%s}", a);
        st = tfc_pipeline_add_yaml(p, stage, err);
        ex->mapped = 1;
    }
    if (!st && images && !args.solver && !maps.n) {
        fprintf(stderr, "tfc-predict: note: the images are scaled by 1/255 (%s), the default; "
                        "--solver SOLVER.yaml preprocesses them as the model's training did\n",
                DEFAULT_IMAGE_MAP);
        st = tfc_pipeline_add_yaml(p, DEFAULT_IMAGE_MAP, err);
        ex->mapped = 1;
    }
    if (!st) st = tfc_pipeline_batch(p, batch, 0, err);
    if (st) {
        tfc_pipeline_free(p);
        return NULL;
    }
    return p;
}

/* Runs every batch through the model, converted to its input dtype; y gets the outputs. */
static tfc_status run(tfc_model *m, tfc_pipeline *p, int batch, const examples *ex, float *y,
                      tfc_error *err)
{
    const tfc_shape *in = tfc_model_input_shape(m);
    tfc_dtype dt = tfc_model_input_dtype(m);
    int64_t per_in = tfc_shape_numel(in), per_out = tfc_shape_numel(tfc_model_output_shape(m));
    void *x = malloc((size_t)(batch * per_in) * tfc_dtype_size(dt) + 1);
    if (!x) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    tfc_status st = TFC_OK;
    for (int64_t done = 0; !st;) {
        tfc_batch b;
        st = tfc_pipeline_next(p, &b, err);
        if (st || b.end) break;
        tfc_shape one = b.features.shape;
        one.ndim--;
        memmove(one.dim, one.dim + 1, sizeof one.dim[0] * (size_t)one.ndim);
        if (tfc_model_max_length(m) && one.ndim == in->ndim) { /* any length up to the max */
            st = tfc_model_set_length(m, one.dim[0], err);
            if (st) {
                tfc_error_prefix(err, "%s: ", ex->what);
                break;
            }
            per_in = tfc_shape_numel(in);
            per_out = tfc_shape_numel(tfc_model_output_shape(m));
        }
        if (!tfc_shape_equal(&one, in)) {
            char a[96], c[96];
            st = tfc_error_set(err, TFC_ERR_DATA, "%s does not hold examples of the model's "
                               "input shape %s%s%s%s", ex->what, tfc_shape_str(in, a, sizeof a),
                               ex->mapped ? " (after the map ops an example has shape " : "",
                               ex->mapped ? tfc_shape_str(&one, c, sizeof c) : "",
                               ex->mapped ? ")" : "");
            break;
        }
        int cnt = (int)b.features.shape.dim[0];
        tfc_values_convert(x, dt, b.features.data, b.features.dtype, cnt * per_in);
        st = tfc_model_forward(m, x, cnt, 0, 0, 0, err);
        if (!st) tfc_model_get_output(m, y + done * per_out);
        done += cnt;
    }
    free(x);
    return st;
}

/* Output k's n examples y into --output: Y.npy for a model of one output, Y.NAME.npy for
 * each of several (Y: --output less a trailing .npy). */
static tfc_status write_output_at(const tfc_model *m, int k, const float *y, int64_t n,
                                  tfc_error *err)
{
    tfc_tensor t = {.dtype = TFC_F32, .data = (void *)y};
    const tfc_shape *os = tfc_model_output_shape_at(m, k);
    t.shape.ndim = os->ndim + 1;
    t.shape.dim[0] = n;
    for (int i = 0; i < os->ndim; i++) t.shape.dim[i + 1] = os->dim[i];
    if (tfc_model_noutputs(m) == 1) return tfc_npy_write(args.output, &t, err);
    char path[4400];
    size_t len = strlen(args.output);
    if (len >= 4 && !strcmp(args.output + len - 4, ".npy")) len -= 4;
    snprintf(path, sizeof path, "%.*s.%s.npy", (int)len, args.output,
             tfc_model_output_name(m, k));
    return tfc_npy_write(path, &t, err);
}

static tfc_status write_output(const tfc_model *m, const float *y, int64_t n, tfc_error *err)
{
    return write_output_at(m, 0, y, n, err);
}

/* Whether the model's last layer ends in a softmax or sigmoid: its outputs read as
 * probabilities. */
static int outputs_probabilities(tfc_model *m)
{
    const tfc_layer *last = tfc_model_layer(m, tfc_model_nlayers(m) - 1);
    return last->act == TFC_ACT_SOFTMAX || last->act == TFC_ACT_SIGMOID;
}

/* The top class of each image or line and its probability: `name (index) p` when the weights
 * file names the classes, else `class index p`. A model without a final softmax (or sigmoid)
 * outputs logits: the probability printed is their softmax, and a note says so. */
static void print_classes(tfc_model *m, const float *y, int64_t n, int64_t classes)
{
    int nnames, logits = !outputs_probabilities(m);
    const char *const *names = tfc_model_class_names(m, &nnames);
    if (logits)
        fprintf(stderr, "tfc-predict: note: the model's last layer has no softmax; the values "
                        "printed are the softmax of its outputs (logits)%s\n",
                args.output ? ", --output has the logits" : "");
    for (int64_t i = 0; i < n; i++) {
        const float *row = y + i * classes;
        int64_t best = 0;
        for (int64_t k = 1; k < classes; k++)
            if (row[k] > row[best]) best = k;
        double p = row[best];
        if (logits) {
            double sum = 0;
            for (int64_t k = 0; k < classes; k++) sum += exp((double)row[k] - row[best]);
            p = 1 / sum;
        }
        if (args.text) printf("line %lld", (long long)i + 1);
        else printf("%s", args.inputs.v[i]);
        if (names && best < nnames)
            printf("\t%s (%lld)\t%.4f\n", names[best], (long long)best, p);
        else
            printf("\tclass %lld\t%.4f\n", (long long)best, p);
    }
}

/* Whether the output is a vector of token scores per input step: a language model, whose
 * --text lines are continued rather than classified. */
static int predicts_next_tokens(tfc_model *m)
{
    const tfc_shape *in = tfc_model_input_shape(m), *out = tfc_model_output_shape(m);
    return args.text && !args.output && tfc_model_input_dtype(m) == TFC_I32 && in->ndim == 1 &&
           out->ndim == 2 && out->dim[0] == in->dim[0];
}

/* One line continued (greedy decoding, SPEC §3 tfc-predict): `window` holds the line's last
 * tokens (len of them, 0-padded); y is scratch for one output. Prints the new tokens. */
static tfc_status continue_line(tfc_model *m, const tfc_vocab *v, int32_t *window, int64_t len,
                                float *y, tfc_error *err)
{
    int64_t steps = tfc_model_input_shape(m)->dim[0];
    int64_t scores = tfc_model_output_shape(m)->dim[1], nv = tfc_vocab_size(v);
    int words = tfc_vocab_tokenizer(v) == TFC_TOKENIZER_WORD;
    for (long g = 0; len > 0 && g < args.length; g++) {
        tfc_status st = tfc_model_forward(m, window, 1, 0, 0, 0, err);
        if (st) return st;
        tfc_model_get_output(m, y);
        const float *row = y + (len - 1) * scores;
        int64_t best = -1;
        for (int64_t k = 2; k < scores && k < nv; k++)
            if (best < 0 || row[k] > row[best]) best = k;
        const char *tok = best < 0 ? NULL : tfc_vocab_token(v, best);
        if (!tok || !strcmp(tok, "\n")) break;
        printf("%s%s", words && g ? " " : "", tok);
        if (len == steps) memmove(window, window + 1, sizeof *window * (size_t)(steps - 1));
        else len++;
        window[len - 1] = (int32_t)best;
    }
    return TFC_OK;
}

/* Every line of --text continued: `line N<TAB>continuation`. */
static tfc_status continue_lines(tfc_model *m, const tfc_vocab *v, tfc_error *err)
{
    int64_t steps = tfc_model_input_shape(m)->dim[0];
    char *buf = NULL;
    size_t len = 0;
    tfc_status st = tfc_file_read_all(args.text, 1u << 30, &buf, &len, err);
    float *y = malloc((size_t)tfc_shape_numel(tfc_model_output_shape(m)) * 4);
    int32_t *window = calloc((size_t)steps, 4), *ids = NULL;
    if (!st && (!y || !window)) st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    long line = 0;
    for (char *p = buf; !st && p < buf + len; line++) {
        char *end = memchr(p, '\n', (size_t)(buf + len - p));
        size_t l = end ? (size_t)(end - p) : (size_t)(buf + len - p);
        int64_t n = tfc_vocab_encode(v, p, l, NULL, 0);
        int32_t *grown = n < 0 ? NULL : realloc(ids, (size_t)(n + 1) * 4);
        if (!grown) {
            st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
            break;
        }
        ids = grown;
        tfc_vocab_encode(v, p, l, ids, n);
        int64_t keep = n < steps ? n : steps; /* the line's last tokens */
        memset(window, 0, (size_t)steps * 4);
        memcpy(window, ids + (n - keep), (size_t)keep * 4);
        printf("line %ld\t", line + 1);
        st = continue_line(m, v, window, keep, y, err);
        printf("\n");
        p += l + 1;
    }
    free(ids);
    free(window);
    free(y);
    free(buf);
    return st;
}

/* The vocabulary --text tokenizes with: --vocabulary, else the vocabulary.txt in MODEL.yaml's
 * folder (a run's config.yaml has its run's beside it), SPEC §3; NULL when neither. */
static const char *vocabulary_path(char *buf, size_t size)
{
    if (args.vocabulary) return args.vocabulary;
    const char *model = args.model.v[0], *slash = strrchr(model, '/');
    snprintf(buf, size, "%.*svocabulary.txt", slash ? (int)(slash + 1 - model) : 0, model);
    return access(buf, F_OK) == 0 ? buf : NULL;
}

/* Refuses (a usage error) a vocabulary other than the one the weights were trained with,
 * naming both files; weights without a recorded vocabulary (older files) pass. */
static tfc_status check_vocabulary(const tfc_model *m, const tfc_vocab *v, const char *path,
                                   tfc_error *err)
{
    char got[17];
    tfc_vocab_hash(v, got);
    return tfc_model_check_vocabulary(m, got, path, args.weights, err);
}

/* A model of several inputs or outputs (a functional model's InputLayers, `outputs:`):
 * --input gives one .npy array per input, `NAME=FILE.npy` or in the inputs' order, each of N
 * examples of its input's shape (or one example); they go to the model as they are,
 * converted to each input's dtype. Each output goes to its own file (write_output_at). */
static tfc_status predict_inputs(tfc_model *m, tfc_error *err)
{
    const int ni = tfc_model_ninputs(m), no = tfc_model_noutputs(m);
    if (args.inputs.n != ni && ni > 1)
        return tfc_error_set(err, TFC_ERR_USAGE, "the model takes %d inputs (%s, %s%s): give "
                             "--input one .npy array each, NAME=FILE.npy or in that order "
                             "(%d given)", ni, tfc_model_input_name(m, 0),
                             tfc_model_input_name(m, 1), ni > 2 ? ", ..." : "", args.inputs.n);
    const int npy = args.inputs.n == 1 && strstr(args.inputs.v[0], ".npy");
    if (ni == 1 && !npy)
        return tfc_error_set(err, TFC_ERR_USAGE, "a model of several outputs takes one .npy "
                             "array of examples (--input X.npy): images, text and audio do not "
                             "apply to it yet");
    if (args.text || args.solver || maps.n)
        return tfc_error_set(err, TFC_ERR_USAGE, "a model of several %s takes .npy arrays "
                             "as they are: --text, --solver and --map do not apply to it yet",
                             ni > 1 ? "inputs" : "outputs");
    if (!args.output)
        return tfc_error_set(err, TFC_ERR_USAGE, "an .npy input needs --output Y.npy");
    tfc_tensor x[TFC_MODEL_MAX_INPUTS] = {0};
    void *conv[TFC_MODEL_MAX_INPUTS] = {0};
    const char *path[TFC_MODEL_MAX_INPUTS] = {0};
    tfc_status st = TFC_OK;
    for (int i = 0; i < ni && !st; i++) { /* NAME=FILE, or the i-th input */
        const char *a = args.inputs.v[i], *eq = strchr(a, '=');
        int k = i;
        if (eq) {
            for (k = 0; k < ni; k++)
                if (strlen(tfc_model_input_name(m, k)) == (size_t)(eq - a) &&
                    !strncmp(a, tfc_model_input_name(m, k), (size_t)(eq - a)))
                    break;
            if (k == ni)
                st = tfc_error_set(err, TFC_ERR_USAGE, "--input %s: the model has no input "
                                   "'%.*s' (its inputs: %s, %s%s)", a, (int)(eq - a), a,
                                   tfc_model_input_name(m, 0), tfc_model_input_name(m, 1),
                                   ni > 2 ? ", ..." : "");
        }
        if (!st && path[k])
            st = tfc_error_set(err, TFC_ERR_USAGE, "--input %s: input '%s' is given twice", a,
                               tfc_model_input_name(m, k));
        if (!st) path[k] = eq ? eq + 1 : a;
    }
    for (int k = 0; k < ni && !st; k++) {
        st = tfc_npy_read(path[k], &x[k], err);
        if (st) break;
        const tfc_shape *in = tfc_model_input_shape_at(m, k);
        tfc_shape *sh = &x[k].shape;
        if (tfc_shape_equal(sh, in) && sh->ndim < TFC_MAX_DIMS) { /* one example */
            for (int d = sh->ndim; d > 0; d--) sh->dim[d] = sh->dim[d - 1];
            sh->dim[0] = 1;
            sh->ndim++;
        }
        tfc_shape one = *sh;
        one.ndim = sh->ndim ? sh->ndim - 1 : 0;
        memmove(one.dim, sh->dim + 1, sizeof one.dim[0] * (size_t)one.ndim);
        char a[96], b[96];
        if (!sh->ndim || !tfc_shape_equal(&one, in))
            st = tfc_error_set(err, TFC_ERR_DATA, "%s: array of shape %s does not hold examples "
                               "of input '%s''s shape %s", path[k], tfc_shape_str(sh, a, sizeof a),
                               tfc_model_input_name(m, k), tfc_shape_str(in, b, sizeof b));
        else if (k && sh->dim[0] != x[0].shape.dim[0])
            st = tfc_error_set(err, TFC_ERR_DATA, "%s: %lld examples, %s %lld: every input needs "
                               "as many", path[k], (long long)sh->dim[0], path[0],
                               (long long)x[0].shape.dim[0]);
        conv[k] = st ? NULL : malloc((size_t)tfc_shape_numel(sh) * 4 + 1);
        if (!st && !conv[k]) st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        if (!st)
            tfc_values_convert(conv[k], tfc_model_input_dtype_at(m, k), x[k].data, x[k].dtype,
                               tfc_shape_numel(sh));
    }
    const int64_t n = st ? 0 : x[0].shape.dim[0];
    tfc_backend *be = st ? NULL : tfc_backend_open(args.device, (int)args.threads, err);
    if (!st && !be) st = err->code;
    const long pass = args.batch ? args.batch
                      : be       ? tfc_model_inference_pass(m, be->device < 0)
                                 : 1;
    const int batch = n < pass ? (int)(n ? n : 1) : (int)pass;
    if (!st) st = tfc_model_bind_inference(m, be, batch, err);
    if (!st) st = tfc_model_load_weights(m, args.weights, NULL, err);
    float *y[TFC_MODEL_MAX_OUTPUTS] = {0};
    for (int k = 0; k < no && !st; k++) {
        const int64_t per_out = tfc_shape_numel(tfc_model_output_shape_at(m, k));
        if (!(y[k] = malloc((size_t)((n ? n : 1) * per_out) * 4)))
            st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    for (int64_t done = 0; !st && done < n; done += batch) {
        const int cnt = n - done < batch ? (int)(n - done) : batch;
        const void *xs[TFC_MODEL_MAX_INPUTS];
        for (int k = 0; k < ni; k++)
            xs[k] = (char *)conv[k] + done * tfc_shape_numel(tfc_model_input_shape_at(m, k)) * 4;
        st = tfc_model_forward_inputs(m, xs, cnt, 0, 0, 0, err);
        for (int k = 0; k < no && !st; k++)
            tfc_model_get_output_at(m, k, y[k] + done * tfc_shape_numel(
                                                           tfc_model_output_shape_at(m, k)));
    }
    for (int k = 0; k < no && !st; k++) st = write_output_at(m, k, y[k], n, err);
    for (int k = 0; k < no; k++) free(y[k]);
    for (int k = 0; k < ni; k++) free(x[k].data), free(conv[k]);
    if (be) {
        tfc_model_unbind(m);
        tfc_backend_free(be);
    }
    return st;
}

int main(int argc, char **argv)
{
    int rc = cli_parse(&tool, argc, argv);
    if (rc >= 0) return rc;
    int npy = args.inputs.n == 1 && strstr(args.inputs.v[0], ".npy");
    if (args.inputs.n && args.text)
        return cli_error(&tool, "--input and --text exclude each other");
    if (!args.inputs.n && !args.text)
        return cli_error(&tool, "missing --input FILE... or --text FILE");
    char vocab_buf[4200];
    const char *vocab_path = args.text ? vocabulary_path(vocab_buf, sizeof vocab_buf) : NULL;
    if (args.text && !vocab_path)
        return cli_error(&tool, "--text needs --vocabulary VOCAB (MODEL.yaml's folder has no "
                                "vocabulary.txt)");
    if (npy && !args.output) return cli_error(&tool, "an .npy input needs --output Y.npy");
    if (args.solver && maps.n)
        return cli_error(&tool, "--solver and --map (or --scale) exclude each other: the map ops "
                                "come from one place");
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_load_config(args.model.v[0], args.sets.v, args.sets.n, &err);
    tfc_vocab *vocab = m && vocab_path ? tfc_vocab_load(vocab_path, &err) : NULL;
    if (!m || (vocab_path && !vocab)) {
        fputs(err.text, stderr);
        tfc_model_free(m);
        return tfc_exit_code(err.code);
    }
    if (tfc_model_ninputs(m) > 1 || tfc_model_noutputs(m) > 1) {
        tfc_status s = predict_inputs(m, &err);
        if (s) fputs(err.text, stderr);
        tfc_model_free(m);
        tfc_vocab_free(vocab);
        return tfc_exit_code(s);
    }
    if (predicts_next_tokens(m)) {
        if (args.solver || maps.n) {
            tfc_model_free(m);
            tfc_vocab_free(vocab);
            return cli_error(&tool, "a continuation (--text without --output) feeds token ids "
                                    "as they are: --solver and --map do not apply");
        }
        tfc_backend *be = tfc_backend_open(args.device, (int)args.threads, &err);
        tfc_status s = be ? tfc_model_bind_inference(m, be, 1, &err) : err.code;
        if (!s) s = tfc_model_load_weights(m, args.weights, NULL, &err);
        if (!s) s = check_vocabulary(m, vocab, vocab_path, &err);
        if (!s) s = continue_lines(m, vocab, &err);
        if (s) fputs(err.text, stderr);
        tfc_model_free(m);
        tfc_vocab_free(vocab);
        if (be) tfc_backend_free(be);
        return tfc_exit_code(s);
    }
    const tfc_shape *in = tfc_model_input_shape(m);
    examples ex = {0};
    const int audio = args.inputs.n && wav_path(args.inputs.v[0]);
    tfc_status s = npy         ? load_npy(args.inputs.v[0], m, &ex, &err)
                   : args.text ? load_text(in, vocab, &ex, &err)
                   : audio     ? load_audio(m, &ex, &err)
                               : load_images(in, &ex, &err);
    int64_t n = s ? 0 : ex.x.shape.dim[0];
    tfc_backend *be = s ? NULL : tfc_backend_open(args.device, (int)args.threads, &err);
    if (!s && !be) s = err.code;
    /* the predictor's passes (tfc_predictor_run), unless --batch says otherwise */
    const long pass = args.batch ? args.batch : be ? tfc_model_inference_pass(m, be->device < 0) : 1;
    int batch = n < pass ? (int)(n ? n : 1) : (int)pass;
    tfc_pipeline *p = s ? NULL : make_pipeline(&ex, batch, !npy && !args.text && !audio, &err);
    if (!s && !p) s = err.code;
    free(ex.x.data); /* the pipeline holds a copy */
    if (!s) s = tfc_model_bind_inference(m, be, batch, &err);
    if (!s) s = tfc_model_load_weights(m, args.weights, NULL, &err);
    if (!s && vocab) s = check_vocabulary(m, vocab, vocab_path, &err);
    int64_t per_out = tfc_shape_numel(tfc_model_output_shape(m));
    float *y = s ? NULL : malloc((size_t)((n ? n : 1) * per_out) * 4);
    if (!s && !y) s = tfc_error_set(&err, TFC_ERR_NOMEM, "out of memory");
    if (!s) s = run(m, p, batch, &ex, y, &err);
    if (!s && args.output) s = write_output(m, y, n, &err);
    if (!s && !npy && tfc_model_output_shape(m)->ndim == 1) print_classes(m, y, n, per_out);
    if (s) fputs(err.text, stderr);
    free(y);
    tfc_pipeline_free(p);
    tfc_model_free(m);
    tfc_vocab_free(vocab);
    if (be) tfc_backend_free(be);
    return tfc_exit_code(s);
}
