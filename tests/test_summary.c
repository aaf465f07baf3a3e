/* tfc-summary's figures (issue 16 part 1): the memory planned on paper equals what binding
 * then allocates, for every zoo model on the CPU (the backend's alloc counted); the FLOPs of
 * Dense, Conv2D and LSTM worked by hand; the tool's JSON adding up, its --max-batch the
 * boundary of the plan, and tfc-train's memory line the tool's figure. */
#include <glob.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cpu/cpu.h"
#include "graph/model.h"
#include "solver/solver.h"
#include "gradcheck.h"
#include "testutil.h"

/* ---- the backend's allocations, counted ---------------------------------------------------- */

static tfc_backend_ops counting_ops;
static const tfc_backend_ops *real_ops;
static size_t allocs[16];
static int nallocs;

static void *counting_alloc(tfc_backend *be, size_t bytes)
{
    if (nallocs < 16) allocs[nallocs] = bytes;
    nallocs++;
    return real_ops->alloc(be, bytes);
}

static void count_allocs(tfc_backend *be)
{
    real_ops = be->ops;
    counting_ops = *be->ops;
    counting_ops.alloc = counting_alloc;
    be->ops = &counting_ops;
    nallocs = 0;
}

static void test_plan_equals_binding(void)
{
    glob_t g;
    CU_ASSERT_FATAL(glob("model_zoo/*/model.yaml", 0, NULL, &g) == 0);
    CU_ASSERT(g.gl_pathc >= 6);
    tfc_backend *be = tfc_cpu_backend_create(1);
    int batches[] = {1, 7, 64};
    for (size_t f = 0; f < g.gl_pathc; f++)
        for (int k = 0; k < 3; k++) {
            tfc_error err;
            tfc_error_clear(&err);
            tfc_model *m = tfc_model_load_config(g.gl_pathv[f], NULL, 0, &err);
            CU_ASSERT_FATAL(m != NULL);
            tfc_memory_plan p;
            be->ops = real_ops ? real_ops : be->ops;
            count_allocs(be);
            CU_ASSERT_FATAL(tfc_model_plan_memory(m, be, batches[k], &p, &err) == TFC_OK);
            CU_ASSERT_EQUAL(nallocs, 0); /* on paper */
            CU_ASSERT_PTR_NULL(tfc_model_memory(m));
            CU_ASSERT_EQUAL(p.arena, p.io + p.outputs + p.saved + p.workspace + p.activation_grads);
            CU_ASSERT_EQUAL(p.params, (size_t)tfc_model_param_count(m) * 4);
            CU_ASSERT_FATAL(tfc_model_bind(m, be, batches[k], &err) == TFC_OK);
            /* bind allocates the parameters, their gradients, then the arena */
            CU_ASSERT_EQUAL(nallocs, 3);
            CU_ASSERT_EQUAL(allocs[0], p.params);
            CU_ASSERT_EQUAL(allocs[1], p.grads ? p.grads : 256);
            CU_ASSERT_EQUAL(allocs[2], p.arena);
            if (nallocs != 3 || allocs[2] != p.arena)
                fprintf(stderr, "%s batch %d: planned %zu, bound %zu\n", g.gl_pathv[f],
                        batches[k], p.arena, allocs[2]);
            const tfc_memory_plan *b = tfc_model_memory(m);
            CU_ASSERT(b && !memcmp(b, &p, sizeof p));
            /* planning a bound model is refused, unbinding frees it */
            tfc_memory_plan q;
            CU_ASSERT_EQUAL(tfc_model_plan_memory(m, be, 2, &q, &err), TFC_ERR_USAGE);
            tfc_model_free(m);
        }
    be->ops = real_ops;
    tfc_backend_free(be);
    globfree(&g);
}

static void flops_of(const char *yaml, int layer, int64_t fw, int64_t bw)
{
    tfc_model *m = tfc_test_model(yaml);
    CU_ASSERT_FATAL(m != NULL);
    int64_t f = -1, b = -1;
    tfc_model_layer_flops(m, layer, &f, &b);
    CU_ASSERT_EQUAL(f, fw);
    CU_ASSERT_EQUAL(b, bw);
    if (f != fw || b != bw)
        fprintf(stderr, "layer %d: %lld/%lld, expected %lld/%lld\n", layer, (long long)f,
                (long long)b, (long long)fw, (long long)bw);
    tfc_model_free(m);
}

static void test_flops(void)
{
    /* Dense 4 -> 3 reads the input: x·W (12 multiply-adds) and dW, no dx; the second Dense
     * 3 -> 2 also passes its gradient back; ReLU counts nothing more */
    const char *mlp = "input: {shape: [4]}\nlayers:\n  - Dense: {units: 3, activation: relu}\n"
                      "  - Dense: {units: 2}\n";
    flops_of(mlp, 0, 24, 24);
    flops_of(mlp, 1, 12, 24);
    /* Dense on a sequence [5, 4]: 5 positions */
    flops_of("input: {shape: [5, 4]}\nlayers:\n  - Dense: {units: 3}\n  - Dense: {units: 2}\n",
             1, 2 * 5 * 6, 4 * 5 * 6);
    /* Conv2D 3x3, 2 -> 3 channels, valid on 5x5: 3x3 outputs of 54 multiply-adds each */
    flops_of("input: {shape: [5, 5, 2]}\nlayers:\n  - Conv2D: {filters: 3, kernel_size: 3}\n"
             "  - Flatten: {}\n",
             0, 2 * 9 * 54, 2 * 9 * 54);
    flops_of("input: {shape: [5, 5, 2]}\nlayers:\n  - Conv2D: {filters: 3, kernel_size: 3}\n"
             "  - Flatten: {}\n",
             1, 27, 27);
    /* Conv1D k 3, 4 -> 6 channels in 2 groups, causal on 7 steps: 7 outputs of 6 filters,
     * each 3 taps of 2 channels (36 multiply-adds per step); dx too behind a layer with
     * weights, none behind a weightless one at the front (its backward is skipped) */
    flops_of("input: {shape: [7, 4]}\nlayers:\n  - Dense: {units: 4}\n"
             "  - Conv1D: {filters: 6, kernel_size: 3, groups: 2, padding: causal}\n",
             1, 2 * 7 * 36, 4 * 7 * 36);
    flops_of("input: {shape: [7, 4]}\nlayers:\n  - Dropout: {rate: 0.1}\n"
             "  - Conv1D: {filters: 6, kernel_size: 3, groups: 2, padding: causal}\n",
             1, 2 * 7 * 36, 2 * 7 * 36);
    /* LSTM of 2 units over 4 steps of 3 features: x·W (3x8) and h·U (2x8) each step, 8 gate
     * elements per step; backward dW, dU and dh·Uᵀ per step, no dx from the model input */
    flops_of("input: {shape: [4, 3]}\nlayers:\n  - LSTM: {units: 2}\n", 0, 2 * 4 * (24 + 16) + 32,
             2 * 4 * (24 + 32) + 32);
    /* behind a layer with weights it also computes dx; behind a frozen one not */
    flops_of("input: {shape: [4, 3]}\nlayers:\n  - Dense: {units: 3}\n  - LSTM: {units: 2}\n",
             1, 2 * 4 * (24 + 16) + 32, 2 * 4 * (24 + 32) + 2 * 4 * 24 + 32);
    flops_of("input: {shape: [4, 3]}\nlayers:\n  - Dense: {units: 3, trainable: false}\n"
             "  - LSTM: {units: 2}\n",
             1, 2 * 4 * (24 + 16) + 32, 2 * 4 * (24 + 32) + 32);
}

/* ---- the tool ------------------------------------------------------------------------------ */

/* The path of a built tool (NULL, the test skipped, when there is none). */
static const char *tool(const char *name)
{
    static char path[2][1300];
    static int k;
    const char *bin = tfc_test_bin(name);
    if (!bin) return NULL;
    k ^= 1;
    snprintf(path[k], sizeof path[k], "%s/%s", bin, name);
    return path[k];
}

static int run(const char *cmd, char **text)
{
    char full[8192];
    snprintf(full, sizeof full, "(%s) >'%s' 2>&1", cmd, tfc_test_path("out.txt"));
    int st = system(full);
    *text = tfc_test_read(tfc_test_path("out.txt"), NULL);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static json_t *summary_json(const char *args)
{
    char cmd[2048], *out;
    snprintf(cmd, sizeof cmd, "%s %s --json", tool("tfc-summary"), args);
    int rc = run(cmd, &out);
    CU_ASSERT_EQUAL(rc, 0);
    json_t *j = out ? json_loads(out, 0, NULL) : NULL;
    if (!j) fprintf(stderr, "%s\n", out ? out : "(no output)");
    free(out);
    return j;
}

static json_int_t mem_of(json_t *j, const char *key)
{
    return json_integer_value(json_object_get(json_object_get(j, "memory"), key));
}

static void test_tool(void)
{
    if (!tool("tfc-summary")) return;
    json_t *j = summary_json("configs/fashion_mlp.yaml --device cpu");
    CU_ASSERT_FATAL(j != NULL);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "batch")), 128); /* the solver's */
    CU_ASSERT_EQUAL(json_array_size(json_object_get(j, "layers")), 6);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "params")), 669706); /* as Keras */
    CU_ASSERT_EQUAL(mem_of(j, "device"), mem_of(j, "parameters") + mem_of(j, "gradients") +
                                             mem_of(j, "optimizer") + mem_of(j, "ema") +
                                             mem_of(j, "arena"));
    /* sgd with momentum: one slot of every trainable float */
    CU_ASSERT_EQUAL(mem_of(j, "optimizer"), mem_of(j, "gradients"));
    json_int_t at128 = mem_of(j, "device");
    json_decref(j);

    /* --max-batch: the largest batch whose plan fits, and the next one does not */
    j = summary_json("configs/fashion_mlp.yaml --device cpu --max-batch --memory 64M");
    CU_ASSERT_FATAL(j != NULL);
    json_int_t fit = json_integer_value(json_object_get(j, "max_batch"));
    json_decref(j);
    CU_ASSERT(fit > 128);
    char a[256];
    snprintf(a, sizeof a, "configs/fashion_mlp.yaml --device cpu --batch %lld", (long long)fit);
    j = summary_json(a);
    CU_ASSERT(j && mem_of(j, "device") <= 64ll << 20 && mem_of(j, "device") > at128);
    json_decref(j);
    snprintf(a, sizeof a, "configs/fashion_mlp.yaml --device cpu --batch %lld", (long long)fit + 1);
    j = summary_json(a);
    CU_ASSERT(j && mem_of(j, "device") > 64ll << 20);
    json_decref(j);

    /* bad usage names the option */
    char cmd[1024], *out;
    snprintf(cmd, sizeof cmd, "%s configs/fashion_mlp.yaml --max-batch",
             tool("tfc-summary"));
    CU_ASSERT_EQUAL(run(cmd, &out), 2);
    CU_ASSERT(out && strstr(out, "--memory"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s configs/fashion_mlp.yaml --memory 12Q",
             tool("tfc-summary"));
    CU_ASSERT_EQUAL(run(cmd, &out), 2);
    CU_ASSERT(out && strstr(out, "12Q"));
    free(out);
}

/* tfc-train's memory line before the first step is the tool's total for that solver */
static void test_train_line(void)
{
    if (!tool("tfc-summary")) return;
    tfc_test_write_split("sx.npy", "sy.npy", 64, 3);
    tfc_test_write("s_solver.yaml",
                   "model:\n  input: {shape: [16]}\n  layers:\n"
                   "    - Dense: {units: 16384, activation: relu}\n    - Dense: {units: 4}\n"
                   "  loss: sparse_categorical_crossentropy\n"
                   "optimizer: {type: adam, learning_rate: 0.01}\nema: {decay: 0.9}\n"
                   "max_iter: 2\ndisplay: 0\n"
                   "data:\n  train:\n    source: {type: npy, features: sx.npy, labels: sy.npy}\n"
                   "    pipeline: [{repeat: {}}, {batch: {batch_size: 16}}]\n",
                   -1);
    char cmd[2048], *out;
    snprintf(cmd, sizeof cmd, "cd '%s' && %s s_solver.yaml --device cpu --out s_run --overwrite",
             tfc_test_tmpdir(), tool("tfc-train"));
    CU_ASSERT_EQUAL_FATAL(run(cmd, &out), 0);
    const char *line = out ? strstr(out, "memory: ") : NULL;
    CU_ASSERT_FATAL(line != NULL);
    double mib = atof(line + 8);
    free(out);
    json_t *j = summary_json(tfc_test_path("s_solver.yaml"));
    CU_ASSERT_FATAL(j != NULL);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(j, "batch")), 16);
    /* adam: two slots; ema: two copies of every parameter */
    CU_ASSERT_EQUAL(mem_of(j, "optimizer"), 2 * mem_of(j, "gradients"));
    CU_ASSERT_EQUAL(mem_of(j, "ema"), 2 * mem_of(j, "parameters"));
    char want[32], got[32];
    snprintf(want, sizeof want, "%.1f", (double)mem_of(j, "device") / (1 << 20));
    snprintf(got, sizeof got, "%.1f", mib);
    CU_ASSERT_STRING_EQUAL(got, want);
    json_decref(j);
}

TFC_TEST_MAIN("summary", {"plan_equals_binding", test_plan_equals_binding}, {"flops", test_flops},
              {"tool", test_tool}, {"train_line", test_train_line})
