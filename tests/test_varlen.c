/* Variable-length batches (input.shape [null, ...] with input.max_length): a model run on
 * batches padded to lengths 5, 9 and 17 gives each example the outputs it gets alone at its
 * own length (Embedding mask_zero -> GRU or LSTM (on its ids path) -> Dense, ->
 * Bidirectional LSTM -> GlobalAveragePooling1D, -> SimpleRNN -> Bidirectional SimpleRNN, and
 * causal Conv1Ds over their valid steps),
 * and a training step at a short length the gradients it gets padded to 17; training on
 * bucketed batches of mixed lengths resumes exactly; a model whose parameters follow the
 * length (a Flatten after a Conv1D) is refused naming the layer, a batch longer than
 * max_length names its length, and a fixed-length model still refuses another length; the C
 * API and tfc-predict run at a length; a solver takes max_length from its pipelines. Also
 * Concatenate along the steps joining its inputs' masks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/onnx.h"
#include "cpu/cpu.h"
#include "graph/model.h"
#include "graph/model_internal.h"
#include "gradcheck.h"
#include "seqref.h"
#include "data/data.h"
#include "solver/solver.h"
#include "tfc.h"
#include "testutil.h"

static const char *const gru_model =
    "input: {shape: [null], dtype: int32, max_length: 17}\n"
    "layers:\n"
    "  - Embedding: {input_dim: 12, output_dim: 4, mask_zero: true}\n"
    "  - GRU: {units: 6}\n"
    "  - Dense: {units: 3, activation: softmax}\n";

/* On the CPU this LSTM reads the Embedding's ids and table (12 rows, at most half the 68
 * tokens of a batch at max_length), bound at 17 and kept at every length. */
static const char *const lstm_model =
    "input: {shape: [null], dtype: int32, max_length: 17}\n"
    "layers:\n"
    "  - Embedding: {input_dim: 12, output_dim: 4, mask_zero: true}\n"
    "  - LSTM: {units: 6}\n"
    "  - Dense: {units: 3, activation: softmax}\n";

static const char *const bidir_model =
    "input: {shape: [null], dtype: int32, max_length: 17}\n"
    "layers:\n"
    "  - Embedding: {input_dim: 12, output_dim: 4, mask_zero: true}\n"
    "  - Bidirectional: {layer: {LSTM: {units: 5, return_sequences: true}}}\n"
    "  - GlobalAveragePooling1D: {}\n"
    "  - Dense: {units: 3}\n";

static const char *const simple_rnn_model =
    "input: {shape: [null], dtype: int32, max_length: 17}\n"
    "layers:\n"
    "  - Embedding: {input_dim: 12, output_dim: 4, mask_zero: true}\n"
    "  - SimpleRNN: {units: 5, return_sequences: true, activation: relu}\n"
    "  - Bidirectional: {layer: {SimpleRNN: {units: 4}}}\n"
    "  - Dense: {units: 3, activation: softmax}\n";

static const char *const conv_model =
    "input: {shape: [null, 3], max_length: 17}\n"
    "layers:\n"
    "  - Conv1D: {filters: 5, kernel_size: 3, padding: causal, dilation_rate: 2, "
    "activation: relu}\n"
    "  - Conv1D: {filters: 4, kernel_size: 2, padding: causal}\n"
    "  - Dense: {units: 3}\n"
    "loss: mse\n";

/* TimeDistributed at each length: around a Dense under the mask, around a BatchNormalization
 * (whose per-step batch statistics take buffers that grow with the length, none fixed) */
static const char *const td_model =
    "input: {shape: [null], dtype: int32, max_length: 17}\n"
    "layers:\n"
    "  - Embedding: {input_dim: 12, output_dim: 4, mask_zero: true}\n"
    "  - TimeDistributed: {layer: {Dense: {units: 5, activation: tanh}}}\n"
    "  - LSTM: {units: 6}\n"
    "  - Dense: {units: 3, activation: softmax}\n";

static const char *const td_bn_model =
    "input: {shape: [null, 3], max_length: 17}\n"
    "layers:\n"
    "  - TimeDistributed: {layer: {BatchNormalization: {}}}\n"
    "  - TimeDistributed: {layer: {Dense: {units: 4}}}\n"
    "  - Conv1D: {filters: 4, kernel_size: 2, padding: causal}\n"
    "  - Dense: {units: 3}\n"
    "loss: mse\n";

/* Token ids of example i of a batch of 4 at length t: len(i) = t - 3 i (at least 1) real
 * tokens, then padding. */
static int ex_len(int i, int t) { return t - 3 * i > 1 ? t - 3 * i : 1; }
static int32_t token(int i, int s) { return 1 + (i * 5 + s * 7) % 11; }

/* Each batch of lengths 5, 9, 17 against each of its examples alone: `per_step` outputs
 * ([t, C]) are compared over the example's own steps, others whole. */
static void same_as_alone(const char *yaml, int ints, int features, int per_step)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *m = tfc_test_bound_model(yaml, be, 4);
    static const int lengths[] = {5, 9, 17};
    double worst = 0;
    for (int k = 0; k < 3; k++) {
        const int t = lengths[k], f = features;
        float *xf = calloc((size_t)4 * t * f, 4);
        int32_t *xi = calloc((size_t)4 * t * f, 4);
        for (int i = 0; i < 4; i++)
            for (int s = 0; s < ex_len(i, t); s++)
                for (int c = 0; c < f; c++) {
                    xi[(i * t + s) * f + c] = token(i, s);
                    xf[(i * t + s) * f + c] = (float)sin(0.7 * token(i, s) + c);
                }
        float *batch = tfc_test_run_at(m, t, ints ? (void *)xi : (void *)xf, 4);
        CU_ASSERT_EQUAL(tfc_model_input_shape(m)->dim[0], t);
        const int64_t out_b = tfc_shape_numel(tfc_model_output_shape(m));
        for (int i = 0; i < 4; i++) {
            const int len = ex_len(i, t);
            const void *xs = ints ? (void *)(xi + i * t * f) : (void *)(xf + i * t * f);
            float *alone = tfc_test_run_at(m, len, xs, 1);
            const int64_t out_a = tfc_shape_numel(tfc_model_output_shape(m));
            CU_ASSERT_EQUAL(out_a, per_step ? out_b / t * len : out_b);
            for (int64_t j = 0; j < out_a; j++) {
                double d = fabs(alone[j] - batch[i * out_b + j]) / (1 + fabs(alone[j]));
                if (d > worst) worst = d;
            }
            free(alone);
        }
        free(batch), free(xf), free(xi);
    }
    CU_ASSERT(worst <= 1e-5);
    if (worst > 1e-5) printf("\nworst relative difference %g\n", worst);
    tfc_model_free(m);
    tfc_backend_free(be);
}

static void test_gru_lengths(void) { same_as_alone(gru_model, 1, 1, 0); }
static void test_lstm_lengths(void)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *m = tfc_test_bound_model(lstm_model, be, 4);
    CU_ASSERT_EQUAL(tfc_model_layer(m, 1)->ids_vocab, 12); /* the ids path, as said above */
    tfc_model_free(m);
    tfc_backend_free(be);
    same_as_alone(lstm_model, 1, 1, 0);
}
static void test_bidirectional_lstm_lengths(void) { same_as_alone(bidir_model, 1, 1, 0); }
static void test_conv1d_lengths(void) { same_as_alone(conv_model, 0, 3, 1); }
static void test_simple_rnn_lengths(void) { same_as_alone(simple_rnn_model, 1, 1, 0); }

/* The parameters' gradients of one training step on ids [4, t] (labels 0, 1, 2, 0) at
 * length t, downloaded into g. */
static void grads_at(tfc_model *m, int t, const int32_t *ids, float *g)
{
    static const int32_t labels[4] = {0, 1, 2, 0};
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(tfc_model_set_length(m, t, &err) == TFC_OK);
    tfc_model_zero_grad(m);
    TFC_ASSERT(tfc_model_forward(m, ids, 4, 1, 1, 0, &err) == TFC_OK);
    tfc_batch_result r;
    TFC_ASSERT(tfc_model_loss(m, labels, 1, &r, &err) == TFC_OK);
    tfc_model_backward(m);
    float *dev = tfc_model_grads(m);
    m->be->ops->download(m->be, g, dev, (size_t)tfc_model_trainable_count(m) * 4);
}

/* Training at a length shorter than max_length: a batch run at its own length 5 or 9 gets
 * the gradients it gets padded to 17 (masked steps add nothing), so backward at a short
 * length reads the buffers laid out for it. */
static void same_grads(const char *yaml)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *m = tfc_test_bound_model(yaml, be, 4);
    const int64_t n = tfc_model_trainable_count(m);
    float *g = malloc((size_t)n * 4), *padded = malloc((size_t)n * 4);
    double worst = 0;
    for (int t = 5; t <= 9; t += 4) {
        int32_t ids[4 * 17] = {0}, wide[4 * 17] = {0};
        for (int i = 0; i < 4; i++)
            for (int s = 0; s < ex_len(i, t); s++)
                ids[i * t + s] = wide[i * 17 + s] = token(i, s);
        grads_at(m, t, ids, g);
        grads_at(m, 17, wide, padded);
        for (int64_t k = 0; k < n; k++) {
            double d = fabs(g[k] - padded[k]) / (1e-3 + fabs(padded[k]));
            if (d > worst) worst = d;
        }
    }
    CU_ASSERT(worst <= 1e-4);
    if (worst > 1e-4) printf("\nworst relative difference %g\n", worst);
    free(g), free(padded);
    tfc_model_free(m);
    tfc_backend_free(be);
}

static void test_gru_grads(void) { same_grads(gru_model); }
static void test_lstm_grads(void) { same_grads(lstm_model); }
static void test_bidirectional_lstm_grads(void) { same_grads(bidir_model); }
static void test_simple_rnn_grads(void) { same_grads(simple_rnn_model); }
static void test_time_distributed(void)
{
    same_as_alone(td_model, 1, 1, 0);
    same_grads(td_model);
    same_as_alone(td_bn_model, 0, 3, 1);
}

/* Memory is planned at max_length: binding sizes the activations for 17 steps, and running
 * at 5 leaves the plan as it is. */
static void test_plan_at_max_length(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_test_model(gru_model);
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_memory_plan at_max, fixed;
    CU_ASSERT_EQUAL(tfc_model_max_length(m), 17);
    CU_ASSERT_EQUAL(tfc_model_set_length(m, 5, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_model_plan_memory(m, be, 8, &at_max, &err), TFC_OK);
    tfc_model *f = tfc_test_model("input: {shape: [17], dtype: int32}\n"
                                  "layers:\n"
                                  "  - Embedding: {input_dim: 12, output_dim: 4, mask_zero: true}\n"
                                  "  - GRU: {units: 6}\n"
                                  "  - Dense: {units: 3, activation: softmax}\n");
    CU_ASSERT_EQUAL(tfc_model_plan_memory(f, be, 8, &fixed, &err), TFC_OK);
    CU_ASSERT_EQUAL(at_max.arena, fixed.arena);
    CU_ASSERT_EQUAL(tfc_model_max_length(f), 0);
    tfc_model_free(m);
    tfc_model_free(f);
    tfc_backend_free(be);
}

/* Loads `yaml` expecting a configuration error whose text holds each of `want`. */
static void refused(const char *yaml, const char *const *want)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_from_string(yaml, strlen(yaml), "varlen.yaml", &err);
    CU_ASSERT_PTR_NULL(m);
    CU_ASSERT_EQUAL(err.code, TFC_ERR_CONFIG);
    for (; *want; want++) {
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, *want));
        if (!strstr(err.text, *want)) printf("\nmissing '%s' in:\n%s", *want, err.text);
    }
    tfc_model_free(m);
}

static void test_flatten_refused(void)
{
    refused("input: {shape: [null, 3], max_length: 10}\n"
            "layers:\n"
            "  - Conv1D: {filters: 4, kernel_size: 3}\n"
            "  - Flatten: {}\n"
            "  - Dense: {units: 2, activation: softmax}\n",
            (const char *const[]){"varlen.yaml:5:", "layers[2].Dense", "'dense'", "kernel",
                                  "(32, 2) at max_length 10", "(28, 2) at length 9", "(32,)",
                                  NULL});
}

static void test_input_rules(void)
{
    refused("input: {shape: [null], dtype: int32}\n"
            "layers: [{Embedding: {input_dim: 5, output_dim: 2}}, {GRU: {units: 2}}]\n",
            (const char *const[]){"varlen.yaml:1:", "input.max_length", NULL});
    refused("input: {shape: [4], dtype: int32, max_length: 4}\n"
            "layers: [{Embedding: {input_dim: 5, output_dim: 2}}, {GRU: {units: 2}}]\n",
            (const char *const[]){"input.max_length", "null first axis", NULL});
    refused("input: {shape: [4, ~], max_length: 4}\n"
            "layers: [{GRU: {units: 2}}]\n",
            (const char *const[]){"input.shape", "only the first (time) axis", NULL});
}

static void test_length_errors(void)
{
    tfc_error err;
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *m = tfc_test_bound_model(gru_model, be, 2);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_set_length(m, 18, &err), TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "length 18"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "takes 1 to 17 steps (input.max_length)"));
    CU_ASSERT_EQUAL(tfc_model_input_shape(m)->dim[0], 17); /* unchanged */
    tfc_model_free(m);
    /* a fixed-length model takes its own length only */
    m = tfc_test_bound_model("input: {shape: [6], dtype: int32}\n"
                    "layers: [{Embedding: {input_dim: 5, output_dim: 2}}, {GRU: {units: 2}}]\n",
                    be, 2);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_set_length(m, 6, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_model_set_length(m, 5, &err), TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "length 5"));
    tfc_model_free(m);
    /* a length a layer cannot take is that layer's error, and the model stays usable */
    m = tfc_test_bound_model("input: {shape: [null, 2], max_length: 8}\n"
                    "layers: [{Conv1D: {filters: 2, kernel_size: 4}}, "
                    "{GlobalMaxPooling1D: {}}, {Dense: {units: 2}}]\n",
                    be, 2);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_set_length(m, 3, &err), TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "Conv1D"));
    CU_ASSERT_EQUAL(tfc_model_input_shape(m)->dim[0], 8);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_set_length(m, 4, &err), TFC_OK);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* ---- training on bucketed batches ------------------------------------------------------ */

/* Two text files of lines of 1 to 16 words, the label the file. */
static void write_texts(void)
{
    static const char *const words[] = {"alpha", "beta", "gamma", "delta", "eps", "zeta",
                                        "eta", "theta", "iota", "kappa", "lambda", "mu"};
    for (int f = 0; f < 2; f++) {
        char text[8192];
        int k = 0;
        for (int line = 0; line < 40; line++) {
            int n = 1 + (line * 7 + f * 3) % 16;
            for (int w = 0; w < n; w++)
                k += snprintf(text + k, sizeof text - (size_t)k, "%s%s", w ? " " : "",
                              words[(line * 5 + w * (f + 2)) % 12]);
            text[k++] = '\n';
        }
        text[k] = 0;
        tfc_test_write(f ? "b.txt" : "a.txt", text, k);
    }
}

static const char *train_solver(const char *state, int max_iter)
{
    static char solver[4096];
    tfc_test_write("varlen_model.yaml",
                   "name: varlen\n"
                   "input: {shape: [null], dtype: int32, max_length: 17}\n"
                   "layers:\n"
                   "  - Embedding: {input_dim: 20, output_dim: 4, mask_zero: true}\n"
                   "  - Bidirectional: {layer: {GRU: {units: 4, return_sequences: true}}}\n"
                   "  - GlobalMaxPooling1D: {}\n"
                   "  - Dense: {units: 2, activation: softmax}\n",
                   -1);
    snprintf(solver, sizeof solver,
             "model: varlen_model.yaml\n"
             "data:\n"
             "  train:\n"
             "    source: {type: text, files: [%s, %s], label: file, tokenizer: word,\n"
             "             max_tokens: 20}\n"
             "    pipeline:\n"
             "      - shuffle: {buffer_size: 100}\n"
             "      - repeat: {}\n"
             "      - bucket_by_sequence_length: {boundaries: [5, 9], batch_sizes: [4, 4, 4]}\n"
             "optimizer: {type: adam, learning_rate: 0.01}\n"
             "max_iter: %d\n"
             "snapshot: {interval: 10, keep: 0}\n"
             "display: 0\n"
             "seed: 3\n",
             tfc_test_path("a.txt"), tfc_test_path("b.txt"), max_iter);
    (void)state;
    return solver;
}

static tfc_status train_run(const char *out, const char *resume, tfc_error *err)
{
    tfc_solver_options o = {0};
    o.out_dir = tfc_test_path(out);
    o.resume = resume;
    o.threads = 1;
    o.console = fopen("/dev/null", "w");
    tfc_error_clear(err);
    tfc_solver *s = tfc_solver_load(tfc_test_write("varlen_solver.yaml", train_solver(NULL, 30),
                                                   -1),
                                    &o, err);
    tfc_train_result res;
    tfc_status st = s ? tfc_solver_train(s, &res, err) : err->code;
    tfc_solver_free(s);
    if (o.console) fclose(o.console);
    if (st) printf("\n%s", err->text);
    return st;
}

static int same_file(const char *a, const char *b)
{
    size_t na, nb;
    char *x = tfc_test_read(a, &na), *y = tfc_test_read(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x), free(y);
    return same;
}

static void test_train_resume_exact(void)
{
    write_texts();
    tfc_error err;
    CU_ASSERT_EQUAL_FATAL(train_run("full", NULL, &err), TFC_OK);
    char state[2048], a[2048], b[2048];
    snprintf(state, sizeof state, "%s/snapshots/varlen_iter_10.state", tfc_test_path("full"));
    struct stat st;
    CU_ASSERT_FATAL(stat(state, &st) == 0);
    CU_ASSERT_EQUAL_FATAL(train_run("resumed", state, &err), TFC_OK);
    snprintf(a, sizeof a, "%s/final.safetensors", tfc_test_path("full"));
    snprintf(b, sizeof b, "%s/final.safetensors", tfc_test_path("resumed"));
    CU_ASSERT(same_file(a, b));
}

/* Token ids [4, t] of the examples above (padded), their model outputs [4, 3] at t. */
static void gru_batch(tfc_model *m, int t, int32_t *ids, float *y)
{
    memset(ids, 0, (size_t)4 * t * 4);
    for (int i = 0; i < 4; i++)
        for (int s = 0; s < ex_len(i, t); s++) ids[i * t + s] = token(i, s);
    float *out = tfc_test_run_at(m, t, ids, 4);
    memcpy(y, out, 4 * 3 * 4);
    free(out);
}

/* The C API: the null axis reads -1, tfc_predictor_run_length runs at a length (as the
 * model does), tfc_predictor_run at max_length, and a longer length is refused naming it. */
static void test_predictor(void)
{
    tfc_error e;
    tfc_error_clear(&e);
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *m = tfc_test_bound_model(gru_model, be, 4);
    const char *model = tfc_test_write("gru.yaml", gru_model, -1);
    const char *weights = tfc_test_path("gru.safetensors");
    CU_ASSERT_EQUAL_FATAL(tfc_model_save_weights(m, weights, &e), TFC_OK);
    char err[512] = "";
    tfc_predictor *p = tfc_predictor_open(model, weights, "cpu", err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    int64_t dims[8];
    CU_ASSERT_EQUAL(tfc_predictor_shape(p, 0, dims, NULL), 1);
    CU_ASSERT_EQUAL(dims[0], -1);
    CU_ASSERT_EQUAL(tfc_predictor_shape(p, 1, dims, NULL), 1);
    CU_ASSERT_EQUAL(dims[0], 3);
    int32_t ids[4 * 17];
    float want[12], got[12];
    static const int lengths[] = {5, 9, 17};
    for (int k = 0; k < 3; k++) {
        gru_batch(m, lengths[k], ids, want);
        CU_ASSERT_EQUAL(tfc_predictor_run_length(p, ids, 4, lengths[k], got, err, sizeof err), 0);
        for (int j = 0; j < 12; j++) CU_ASSERT_DOUBLE_EQUAL(got[j], want[j], 1e-6);
    }
    CU_ASSERT_EQUAL(tfc_predictor_run(p, ids, 4, got, err, sizeof err), 0); /* at 17 */
    for (int j = 0; j < 12; j++) CU_ASSERT_DOUBLE_EQUAL(got[j], want[j], 1e-6);
    CU_ASSERT_EQUAL(tfc_predictor_run_length(p, ids, 1, 18, got, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "length 18"));
    tfc_predictor_close(p);
    /* a sequence output's time axis follows the length: -1 too */
    const char *seq = "input: {shape: [null, 3], max_length: 17}\n"
                      "layers: [{Conv1D: {filters: 2, kernel_size: 3, padding: causal}}]\n";
    tfc_model *c = tfc_test_bound_model(seq, be, 1);
    CU_ASSERT_EQUAL_FATAL(tfc_model_save_weights(c, weights, &e), TFC_OK);
    p = tfc_predictor_open(tfc_test_write("seq.yaml", seq, -1), weights, "cpu", err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_predictor_shape(p, 1, dims, NULL), 2);
    CU_ASSERT(dims[0] == -1 && dims[1] == 2);
    tfc_predictor_close(p);
    tfc_model_free(c);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* tfc-predict on an .npy array of sequences of length 9 (of a model with max_length 17):
 * the model's outputs at 9. */
static void test_predict_tool(void)
{
    const char *bin = tfc_test_bin("tfc-predict");
    if (!bin) return;
    tfc_error e;
    tfc_error_clear(&e);
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *m = tfc_test_bound_model(gru_model, be, 4);
    tfc_test_write("gru.yaml", gru_model, -1);
    CU_ASSERT_EQUAL_FATAL(tfc_model_save_weights(m, tfc_test_path("gru.safetensors"), &e), TFC_OK);
    int32_t ids[4 * 9];
    float want[12];
    gru_batch(m, 9, ids, want);
    tfc_tensor x = {.dtype = TFC_I32, .shape = {2, {4, 9}}, .data = ids};
    CU_ASSERT_EQUAL_FATAL(tfc_npy_write(tfc_test_path("x.npy"), &x, &e), TFC_OK);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s/tfc-predict' gru.yaml --weights gru.safetensors "
             "--input x.npy --output y.npy --device cpu > /dev/null",
             tfc_test_tmpdir(), bin);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    tfc_tensor y;
    CU_ASSERT_EQUAL_FATAL(tfc_npy_read(tfc_test_path("y.npy"), &y, &e), TFC_OK);
    CU_ASSERT(y.shape.ndim == 2 && y.shape.dim[0] == 4 && y.shape.dim[1] == 3);
    for (int j = 0; j < 12; j++) CU_ASSERT_DOUBLE_EQUAL(((float *)y.data)[j], want[j], 1e-6);
    free(y.data);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* The trainer: a batch longer than max_length is a data error naming its length. */
static void test_train_too_long(void)
{
    write_texts();
    tfc_test_write("long.txt", "a b c d e f g h i j k l m n o p q r s t\n", -1);
    char solver[2048];
    snprintf(solver, sizeof solver,
             "model: varlen_model.yaml\n"
             "data:\n"
             "  train:\n"
             "    source: {type: text, files: [%s, %s], label: file, tokenizer: word}\n"
             "    pipeline: [{repeat: {}}, {padded_batch: {batch_size: 2}}]\n"
             "max_iter: 3\n",
             tfc_test_path("long.txt"), tfc_test_path("a.txt"));
    train_solver(NULL, 1); /* writes the model file */
    tfc_error err;
    CU_ASSERT_EQUAL(tfc_test_train(solver, "long_solver.yaml", "long", &err), TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "data.train"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "length 20"));
    if (!strstr(err.text, "length 20")) printf("\n%s", err.text);
}

/* Concatenate along the steps joins the masks (Keras): [e | c] with e masked (mask_zero) and
 * c not (a Conv1D drops the mask) carries [mask | ones], which the masked mean after it
 * reads: (sum of e over the real steps + sum of c over all) / (real steps + t). */
static void test_concatenate_joins_masks(void)
{
    static const char *const yaml =
        "input: {shape: [null], dtype: int32, max_length: 8}\n"
        "layers:\n"
        "  - Embedding: {name: e, input_dim: 9, output_dim: 3, mask_zero: true}\n"
        "  - Conv1D: {name: c, filters: 3, kernel_size: 1, inputs: e}\n"
        "  - Concatenate: {axis: 1, inputs: [e, c]}\n"
        "  - GlobalAveragePooling1D: {}\n";
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *m = tfc_test_bound_model(yaml, be, 2);
    double worst = 0;
    for (int t = 6; t <= 8; t += 2) {
        int32_t ids[16] = {0};
        for (int i = 0; i < 2; i++)
            for (int s = 0; s < t - 2 - 3 * i; s++) ids[i * t + s] = token(i, s) % 8 + 1;
        float *y = tfc_test_run_at(m, t, ids, 2);
        CU_ASSERT_EQUAL(tfc_model_layer(m, 2)->out_shape.dim[0], 2 * t);
        float e[48], c[48];
        m->be->ops->download(m->be, e, m->bound[0].y, (size_t)2 * t * 3 * 4);
        m->be->ops->download(m->be, c, m->bound[1].y, (size_t)2 * t * 3 * 4);
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 3; k++) {
                double sum = 0, n = t;
                for (int s = 0; s < t; s++) {
                    sum += c[(i * t + s) * 3 + k];
                    if (ids[i * t + s]) sum += e[(i * t + s) * 3 + k], n++;
                }
                double d = fabs(y[i * 3 + k] - sum / n);
                if (d > worst) worst = d;
            }
        free(y);
    }
    CU_ASSERT(worst < 1e-6);
    if (worst >= 1e-6) printf("\nworst difference %g\n", worst);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* The max_length a solver gives a model without one, from its splits' stages: `pipeline`
 * for the train split, `test` for the test split (NULL: none); 0 when it loads without.
 * `head` opens the model file up to its first layer: its input, and `layers: [`. */
static int64_t derived_as(const char *head, const char *pipeline, const char *test,
                          tfc_error *err)
{
    char model[1024];
    snprintf(model, sizeof model,
             "%s{Embedding: {input_dim: 20, output_dim: 2, mask_zero: true}},\n"
             "         {GRU: {units: 2}}, {Dense: {units: 2, activation: softmax}}]\n",
             head);
    tfc_test_write("open_model.yaml", model, -1);
    char solver[2048];
    snprintf(solver, sizeof solver,
             "model: open_model.yaml\n"
             "data:\n"
             "  train:\n"
             "    source: {type: text, files: [a.txt], label: file, tokenizer: word}\n"
             "    pipeline: %s\n"
             "%s%s%s"
             "max_iter: 1\n",
             pipeline, test ? "  test:\n    source: {type: text, files: [a.txt], label: file, "
                              "tokenizer: word}\n    pipeline: " : "",
             test ? test : "", test ? "\n" : "");
    tfc_solver_options o = {0};
    tfc_error_clear(err);
    tfc_solver *s = tfc_solver_load(tfc_test_write("open_solver.yaml", solver, -1), &o, err);
    int64_t n = s ? tfc_model_max_length(tfc_solver_model(s)) : 0;
    tfc_solver_free(s);
    return n;
}

static int64_t derived(const char *pipeline, const char *test, tfc_error *err)
{
    return derived_as("input: {shape: [null], dtype: int32}\nlayers: [", pipeline, test, err);
}

static void test_max_length_from_pipeline(void)
{
    tfc_error err;
    CU_ASSERT_EQUAL(derived("[{map: {op: truncate, length: 30}}, {padded_batch: {batch_size: 4}}]",
                            NULL, &err), 30);
    CU_ASSERT_EQUAL(derived("[{map: {op: pad, length: 12}}, {batch: {batch_size: 4}}]", NULL, &err),
                    12);
    CU_ASSERT_EQUAL(derived("[{padded_batch: {batch_size: 4, padded_shapes: [25]}}]", NULL, &err),
                    25);
    CU_ASSERT_EQUAL(derived("[{bucket_by_sequence_length: {boundaries: [5, 9], "
                            "batch_sizes: [2, 2, 2], pad_to_bucket_boundary: true}}]",
                            NULL, &err), 8);
    /* the longer of the two splits */
    CU_ASSERT_EQUAL(derived("[{map: {op: truncate, length: 30}}, {padded_batch: {batch_size: 4}}]",
                            "[{map: {op: truncate, length: 40}}, {padded_batch: {batch_size: 4}}]",
                            &err), 40);
    /* an op after the truncation may change the length: unbounded, so asked for */
    CU_ASSERT_EQUAL(derived("[{map: {op: truncate, length: 30}}, "
                            "{map: {op: reshape, shape: [-1]}}, {padded_batch: {batch_size: 4}}]",
                            NULL, &err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "needs input.max_length"));
    /* a test split without a bound: asked for */
    CU_ASSERT_EQUAL(derived("[{map: {op: truncate, length: 30}}, {padded_batch: {batch_size: 4}}]",
                            "[{padded_batch: {batch_size: 4}}]", &err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "needs input.max_length"));
    /* the input as Keras's Sequential form gives it: shape's first axis, batch_shape's second */
    static const char *const heads[] = {
        "layers: [{Input: {shape: [null], dtype: int32}},\n",
        "layers: [{InputLayer: {batch_shape: [null, null], dtype: int32, name: ids}},\n"};
    for (int h = 0; h < 2; h++)
        CU_ASSERT_EQUAL(derived_as(heads[h], "[{map: {op: truncate, length: 30}}, "
                                   "{padded_batch: {batch_size: 4}}]", NULL, &err), 30);
}

/* tfc-export writes a model of variable length at max_length, and refuses a Concatenate that
 * joins masks, naming it. */
static void test_onnx_export(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *m = tfc_test_bound_model(gru_model, be, 1);
    CU_ASSERT_EQUAL(tfc_onnx_export(m, NULL, tfc_test_path("gru.onnx"), &err), TFC_OK);
    tfc_model_free(m);
    m = tfc_test_bound_model("input: {shape: [null], dtype: int32, max_length: 8}\n"
                    "layers:\n"
                    "  - Embedding: {name: e, input_dim: 9, output_dim: 3, mask_zero: true}\n"
                    "  - Concatenate: {name: join, axis: 1, inputs: [e, e]}\n"
                    "  - GlobalAveragePooling1D: {}\n",
                    be, 1);
    CU_ASSERT_NOT_EQUAL(tfc_onnx_export(m, NULL, tfc_test_path("join.onnx"), &err), TFC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "join"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "masks joined"));
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* Keras parity (tests/ref/keras_varlen.py): each fixture's model, its weights loaded by name,
 * run at lengths 5, 9 and 17 on the fixture's x<T>, gives Keras's y<T> (a Keras model of
 * input (None,) called at each length). */
static void test_keras_parity(void)
{
    static const char *const cases[] = {"bidir_gru_mean", "concat_joins_masks",
                                         "concat_features_mask", NULL};
    tfc_backend *be = tfc_cpu_backend_create(1);
    double worst_abs = 0, worst_rel = 0;
    tfc_test_keras_lengths("tests/ref/varlen", cases, be, &worst_abs, &worst_rel);
    CU_ASSERT(worst_rel <= 1e-5);
    printf("\n  keras parity: max abs %.3g, max rel %.3g ", worst_abs, worst_rel);
    tfc_backend_free(be);
}

TFC_TEST_MAIN("varlen", {"gru_lengths", test_gru_lengths}, {"lstm_lengths", test_lstm_lengths},
              {"time_distributed", test_time_distributed},
              {"lstm_grads", test_lstm_grads},
              {"bidirectional_lstm_lengths", test_bidirectional_lstm_lengths},
              {"conv1d_lengths", test_conv1d_lengths}, {"gru_grads", test_gru_grads},
              {"bidirectional_lstm_grads", test_bidirectional_lstm_grads},
              {"simple_rnn_lengths", test_simple_rnn_lengths},
              {"simple_rnn_grads", test_simple_rnn_grads},
              {"plan_at_max_length", test_plan_at_max_length},
              {"flatten_refused", test_flatten_refused}, {"input_rules", test_input_rules},
              {"length_errors", test_length_errors},
              {"train_resume_exact", test_train_resume_exact},
              {"train_too_long", test_train_too_long}, {"predictor", test_predictor},
              {"predict_tool", test_predict_tool},
              {"concatenate_joins_masks", test_concatenate_joins_masks},
              {"max_length_from_pipeline", test_max_length_from_pipeline},
              {"keras_parity", test_keras_parity}, {"onnx_export", test_onnx_export})
