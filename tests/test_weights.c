/* Weights files: save/load round trips with Keras names and layouts, strict loads that
 * name what is missing or misshapen, by-name loads with a report (fine-tuning), and the
 * tools that read models and weights (tfc-predict with its preprocessing, tfc-inspect,
 * tfc-draw, tfc-time) and the command line every tool shares. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu/cpu.h"
#include "graph/model.h"
#include "core/safetensors.h"
#include "data/data.h"
#include "gradcheck.h"
#include "testutil.h"

static const char *CNN =
    "name: small_cnn\ninput: {shape: [6, 6, 1]}\nlayers:\n"
    "  - Conv2D: {filters: 3, kernel_size: 3, activation: relu}\n"
    "  - BatchNormalization: {}\n  - Flatten: {}\n"
    "  - Dense: {name: head, units: 4, activation: softmax}\n";

static tfc_model *bound_model(const char *yaml, tfc_backend *be, uint64_t seed)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_test_model(yaml);
    TFC_ASSERT(m && tfc_model_bind(m, be, 4, &err) == TFC_OK);
    TFC_ASSERT(tfc_model_init_weights(m, seed, &err) == TFC_OK);
    return m;
}

static void test_round_trip(void)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *a = bound_model(CNN, be, 1), *b = bound_model(CNN, be, 2);
    tfc_error err;
    tfc_error_clear(&err);
    const char *path = tfc_test_path("w.safetensors");
    CU_ASSERT_EQUAL_FATAL(tfc_model_save_weights(a, path, &err), TFC_OK);
    /* Names and Keras layouts, as SPEC §5 pins them. */
    tfc_st_file *f = tfc_st_open(path, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    const tfc_st_tensor *k = tfc_st_find(f, "conv2d/kernel");
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    CU_ASSERT(k->shape.ndim == 4 && k->shape.dim[0] == 3 && k->shape.dim[2] == 1 && k->shape.dim[3] == 3);
    CU_ASSERT_PTR_NOT_NULL(tfc_st_find(f, "head/kernel"));
    CU_ASSERT_EQUAL(tfc_st_find(f, "head/kernel")->shape.dim[0], 48);
    CU_ASSERT_PTR_NOT_NULL(tfc_st_find(f, "batch_normalization/moving_variance"));
    CU_ASSERT_STRING_EQUAL(tfc_st_meta(f, "model"), "small_cnn");
    CU_ASSERT_EQUAL(tfc_st_count(f), 8);
    tfc_st_close(f);
    /* Strict load: b becomes a, output for output. */
    CU_ASSERT_EQUAL_FATAL(tfc_model_load_weights(b, path, NULL, &err), TFC_OK);
    float x[4 * 36], ya[16], yb[16];
    tfc_test_fill(x, 4 * 36, 0, 1, 2);
    tfc_model_forward(a, x, 4, 0, 0, 0, &err);
    tfc_model_get_output(a, ya);
    tfc_model_forward(b, x, 4, 0, 0, 0, &err);
    tfc_model_get_output(b, yb);
    CU_ASSERT(memcmp(ya, yb, sizeof ya) == 0);
    tfc_model_free(a);
    tfc_model_free(b);
    tfc_backend_free(be);
}

static void test_strict_and_by_name(void)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *a = bound_model(CNN, be, 1);
    tfc_error err;
    tfc_error_clear(&err);
    const char *path = tfc_test_path("w2.safetensors");
    CU_ASSERT_EQUAL_FATAL(tfc_model_save_weights(a, path, &err), TFC_OK);
    /* A model with a new head of another size and an extra layer. */
    const char *other = "input: {shape: [6, 6, 1]}\nlayers:\n"
                        "  - Conv2D: {filters: 3, kernel_size: 3, activation: relu}\n"
                        "  - BatchNormalization: {}\n  - Flatten: {}\n"
                        "  - Dense: {name: extra, units: 5}\n"
                        "  - Dense: {name: head, units: 7, activation: softmax}\n";
    tfc_model *b = bound_model(other, be, 3);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_load_weights(b, path, NULL, &err), TFC_ERR_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "no tensor 'extra/kernel' (48, 5) for layer 'extra'"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "hint: the file holds the weights of model "
                                            "'small_cnn' (its metadata), this is model 'test'"));
    /* the same model with another head: its configuration changed, not the model */
    tfc_model *c = bound_model("name: small_cnn\ninput: {shape: [6, 6, 1]}\nlayers:\n"
                               "  - Conv2D: {filters: 3, kernel_size: 3, activation: relu}\n"
                               "  - BatchNormalization: {}\n  - Flatten: {}\n"
                               "  - Dense: {name: head, units: 7}\n", be, 4);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_load_weights(c, path, NULL, &err), TFC_ERR_USAGE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "tensor 'head/kernel' has shape (48, 4), the model "
                                           "needs (48, 7)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "hint: the model's configuration is not the one "
                                            "that wrote the file"));
    tfc_model_free(c);
    tfc_weights_report rep;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_model_load_weights(b, path, &rep, &err), TFC_OK);
    CU_ASSERT_EQUAL(rep.matched, 6);    /* conv2d kernel+bias, 4 batch norm */
    CU_ASSERT_EQUAL(rep.missing, 2);    /* extra/kernel, extra/bias */
    CU_ASSERT_EQUAL(rep.mismatched, 2); /* head/kernel (48, 4) vs (5, 7), head/bias (4) vs (7) */
    CU_ASSERT_EQUAL(rep.unused, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(rep.text, "skipped  head/kernel: file (48, 4), model (5, 7)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(rep.text, "matched  conv2d/kernel (3, 3, 1, 3)"));
    free(rep.text);
    /* A file that is not safetensors: the wrong kind of file, a usage error (exit 2). */
    const char *junk = tfc_test_write("junk.safetensors", "not a weights file at all", -1);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_model_load_weights(a, junk, NULL, &err), TFC_ERR_USAGE);
    tfc_model_free(a);
    tfc_model_free(b);
    tfc_backend_free(be);
}

static int run(const char *cmd, char *out, size_t size)
{
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, size - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The tools' folder ($TFC_BIN, default bin), or NULL after marking the running test skipped
 * (tfc_test_skip): the tools are built when make test runs it. */
static const char *tool_bin(void)
{
    const char *bin = getenv("TFC_BIN");
    char path[1024], why[1100];
    snprintf(path, sizeof path, "%s/tfc-predict", bin ? bin : "bin");
    if (access(path, X_OK) != 0) {
        snprintf(why, sizeof why, "no %s; run through make test", path);
        tfc_test_skip(why);
        return NULL;
    }
    return bin ? bin : "bin";
}

/* The CNN as cnn.yaml and weights of seed 1 as cnn.safetensors in the scratch folder (their
 * paths into model and w); returns the bound model the weights come from. */
static tfc_model *cnn_files(tfc_backend *be, char model[1024], char w[1024])
{
    tfc_error err;
    tfc_error_clear(&err);
    snprintf(model, 1024, "%s", tfc_test_write("cnn.yaml", CNN, -1));
    snprintf(w, 1024, "%s", tfc_test_path("cnn.safetensors"));
    tfc_model *a = bound_model(CNN, be, 1);
    CU_ASSERT_EQUAL(tfc_model_save_weights(a, w, &err), TFC_OK);
    return a;
}

/* Runs a command line and checks its exit status and that its output says `says`. */
static void expect(const char *cmd, int status, const char *says)
{
    char out[16384];
    int rc = run(cmd, out, sizeof out);
    CU_ASSERT_EQUAL(rc, status);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, says));
    if (rc != status || !strstr(out, says))
        printf("\n%s\nexit %d, said:\n%s\n", cmd, rc, out);
}

static void test_tools(void)
{
    const char *bin = tool_bin();
    char cmd[2048], out[16384], model[1024], w[1024];
    if (!bin) return;
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *a = cnn_files(be, model, w);
    tfc_error err;
    tfc_error_clear(&err);
    /* tfc-predict on an .npy of 4 examples matches the library's forward pass. */
    float x[4 * 36], y[16];
    tfc_test_fill(x, 4 * 36, 0, 1, 5);
    tfc_tensor t = {.dtype = TFC_F32, .shape = {4, {4, 6, 6, 1}}, .data = x};
    const char *xin = tfc_test_path("x.npy"), *yout = tfc_test_path("y.npy");
    CU_ASSERT_EQUAL_FATAL(tfc_npy_write(xin, &t, &err), TFC_OK);
    snprintf(cmd, sizeof cmd, "%s/tfc-predict %s --weights %s --input %s --output %s --device cpu --threads 1 2>&1",
             bin, model, w, xin, yout);
    CU_ASSERT_EQUAL(run(cmd, out, sizeof out), 0);
    tfc_tensor yt;
    CU_ASSERT_EQUAL_FATAL(tfc_npy_read(yout, &yt, &err), TFC_OK);
    tfc_model_forward(a, x, 4, 0, 0, 0, &err);
    tfc_model_get_output(a, y);
    CU_ASSERT(yt.shape.ndim == 2 && yt.shape.dim[0] == 4 && yt.shape.dim[1] == 4);
    CU_ASSERT(memcmp(yt.data, y, sizeof y) == 0);
    free(yt.data);
    /* Image files: decoded, scaled by 1/255 (the default, said on stderr), the top class
     * printed per file. */
    uint8_t px[2][36];
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 36; k++) px[i][k] = (uint8_t)((k * 37 + i * 101) % 256);
    const char *png = tfc_test_path("a.png"), *png2 = tfc_test_path("b.png");
    CU_ASSERT_EQUAL_FATAL(tfc_image_write_png(png, px[0], 6, 6, 1, 8, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_image_write_png(png2, px[1], 6, 6, 1, 8, &err), TFC_OK);
    /* one thread, as the backend above: the same sums in the same order, so the same bits */
    snprintf(cmd, sizeof cmd, "%s/tfc-predict %s --weights %s --input %s %s --output %s --device cpu "
             "--threads 1 2>&1", bin, model, w, png, png2, yout);
    CU_ASSERT_EQUAL(run(cmd, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "a.png\tclass "));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "note: the images are scaled by 1/255"));
    /* as the pipeline's scale op computes in training: a float32 product */
    float xi[2 * 36], yi[8];
    for (int k = 0; k < 72; k++) xi[k] = (float)px[k / 36][k % 36] * (float)(1.0 / 255.0);
    tfc_model_forward(a, xi, 2, 0, 0, 0, &err);
    tfc_model_get_output(a, yi);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_read(yout, &yt, &err), TFC_OK);
    CU_ASSERT(yt.shape.dim[0] == 2 && memcmp(yt.data, yi, sizeof yi) == 0);
    free(yt.data);
    /* Wrong input shape: exit 1 with the reason. */
    tfc_tensor bad = {.dtype = TFC_F32, .shape = {2, {4, 36}}, .data = x};
    tfc_npy_write(xin, &bad, &err);
    snprintf(cmd, sizeof cmd, "%s/tfc-predict %s --weights %s --input %s --output %s 2>&1", bin,
             model, w, xin, yout);
    CU_ASSERT_EQUAL(run(cmd, out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "does not hold examples of the model's input shape (6, 6, 1)"));
    /* A config error exits 2 with FILE:LINE:COL. */
    const char *badm = tfc_test_write("bad.yaml", "input: {shape: [6]}\nlayers:\n  - Dense: {unit: 3}\n", -1);
    snprintf(cmd, sizeof cmd, "%s/tfc-predict %s --weights %s --input %s --output %s 2>&1", bin,
             badm, w, xin, yout);
    CU_ASSERT_EQUAL(run(cmd, out, sizeof out), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "bad.yaml:3:13: error: layers[0].Dense.unit: unknown key"));
    /* tfc-inspect lists the tensors. */
    snprintf(cmd, sizeof cmd, "%s/tfc-inspect %s 2>&1", bin, w);
    CU_ASSERT_EQUAL(run(cmd, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "head/kernel"));
    /* tfc-draw: one edge per input. */
    snprintf(cmd, sizeof cmd, "%s/tfc-draw %s 2>&1", bin, model);
    CU_ASSERT_EQUAL(run(cmd, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"flatten\" -> \"head\";"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"input\" -> \"conv2d\";"));
    /* tfc-time prints every layer. */
    snprintf(cmd, sizeof cmd, "%s/tfc-time %s --batch 8 --iterations 3 --device cpu 2>&1", bin, model);
    CU_ASSERT_EQUAL(run(cmd, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "batch_normalization"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "whole step"));
    /* A GPU that this build or machine lacks is a device error (exit 1), not a crash. */
    snprintf(cmd, sizeof cmd, "CUDA_VISIBLE_DEVICES= %s/tfc-time %s --device gpu:0 2>&1", bin, model);
    CU_ASSERT_EQUAL(run(cmd, out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "error: device gpu:0 requested"));
    snprintf(cmd, sizeof cmd, "%s/tfc-time %s --device tpu 2>&1", bin, model);
    CU_ASSERT_EQUAL(run(cmd, out, sizeof out), 2);
    tfc_model_free(a);
    tfc_backend_free(be);
}

/* tfc-predict's preprocessing: the map ops of a solver's test split (--solver), an explicit
 * list (--map) or the deprecated --scale give exactly the default's 1/255 for images; --map
 * applies to an .npy too; the stages that are not maps and the maps of labels are skipped. */
static void test_predict_maps(void)
{
    const char *bin = tool_bin();
    char cmd[4096], out[16384], pre[2048], model[1024], w[1024];
    if (!bin) return;
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_model *a = cnn_files(be, model, w);
    tfc_error err;
    tfc_error_clear(&err);
    snprintf(pre, sizeof pre, "%s/tfc-predict %s --weights %s --device cpu --threads 1", bin,
             model, w);
    uint8_t px[2][36];
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 36; k++) px[i][k] = (uint8_t)((k * 53 + i * 7) % 256);
    char png[1024], png2[1024], solver[1024], xin[1024], yout[1024];
    snprintf(png, sizeof png, "%s", tfc_test_path("p.png"));
    snprintf(png2, sizeof png2, "%s", tfc_test_path("q.png"));
    snprintf(solver, sizeof solver, "%s", tfc_test_path("solver.yaml"));
    snprintf(xin, sizeof xin, "%s", tfc_test_path("xm.npy"));
    snprintf(yout, sizeof yout, "%s", tfc_test_path("ym.npy"));
    CU_ASSERT_EQUAL_FATAL(tfc_image_write_png(png, px[0], 6, 6, 1, 8, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_image_write_png(png2, px[1], 6, 6, 1, 8, &err), TFC_OK);
    float xi[72], yi[8];
    for (int k = 0; k < 72; k++) xi[k] = (float)px[k / 36][k % 36] * (float)(1.0 / 255.0);
    tfc_model_forward(a, xi, 2, 0, 0, 0, &err);
    tfc_model_get_output(a, yi);
    tfc_test_write("solver.yaml",
                   "model: cnn.yaml\n"
                   "data:\n"
                   "  train:\n"
                   "    source: {type: npy, features: x.npy}\n"
                   "  test:\n"
                   "    source: {type: npy, features: x.npy, labels: y.npy}\n"
                   "    pipeline:\n"
                   "      - shuffle: {buffer_size: 10}\n"
                   "      - map: {op: scale, factor: 0.00392156862745098}\n"
                   "      - map: {op: scale, factor: 3, component: labels}\n"
                   "      - batch: {batch_size: 5}\n", -1);
    const char *ways[] = {"--solver %s", "--map '{op: scale, factor: 0.00392156862745098}'",
                          "--map 'op: scale, factor: 0.00392156862745098'",
                          "--scale 0.00392156862745098"};
    for (int i = 0; i < 4; i++) {
        char opt[1024];
        snprintf(opt, sizeof opt, ways[i], solver);
        snprintf(cmd, sizeof cmd, "%s %s --input %s %s --output %s 2>&1", pre, opt, png, png2,
                 yout);
        CU_ASSERT_EQUAL(run(cmd, out, sizeof out), 0);
        CU_ASSERT_PTR_NULL(strstr(out, "note:")); /* the default is not taken */
        tfc_tensor yt;
        CU_ASSERT_EQUAL_FATAL(tfc_npy_read(yout, &yt, &err), TFC_OK);
        CU_ASSERT(yt.shape.dim[0] == 2 && memcmp(yt.data, yi, sizeof yi) == 0);
        if (memcmp(yt.data, yi, sizeof yi)) printf("\n%s\n%s\n", cmd, out);
        free(yt.data);
        remove(yout);
    }
    /* --map on an .npy: each example is scaled before the model */
    float x[2 * 36], x2[2 * 36], y[8];
    tfc_test_fill(x, 72, 0, 1, 9);
    for (int k = 0; k < 72; k++) x2[k] = x[k] * 0.5f;
    tfc_tensor t = {.dtype = TFC_F32, .shape = {4, {2, 6, 6, 1}}, .data = x};
    CU_ASSERT_EQUAL_FATAL(tfc_npy_write(xin, &t, &err), TFC_OK);
    snprintf(cmd, sizeof cmd, "%s --input %s --output %s --map '{op: scale, factor: 0.5}' 2>&1",
             pre, xin, yout);
    CU_ASSERT_EQUAL(run(cmd, out, sizeof out), 0);
    tfc_model_forward(a, x2, 2, 0, 0, 0, &err);
    tfc_model_get_output(a, y);
    tfc_tensor yt;
    CU_ASSERT_EQUAL_FATAL(tfc_npy_read(yout, &yt, &err), TFC_OK);
    CU_ASSERT(memcmp(yt.data, y, sizeof y) == 0);
    free(yt.data);
    /* a map that changes the shape is checked against the model's input */
    snprintf(cmd, sizeof cmd, "%s --input %s --output %s --map '{op: reshape, shape: [36]}' 2>&1",
             pre, xin, yout);
    CU_ASSERT_EQUAL(run(cmd, out, sizeof out), 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "after the map ops an example has shape (36,)"));
    /* usage errors: one line naming the option, then the --help hint; exit 2 */
    snprintf(cmd, sizeof cmd, "%s --input %s --solver %s --map '{op: scale, factor: 2}' 2>&1",
             pre, png, solver);
    expect(cmd, 2, "tfc-predict: --solver and --map");
    snprintf(cmd, sizeof cmd, "%s --input %s --scale x 2>&1", pre, png);
    expect(cmd, 2, "tfc-predict: --scale 'x': expected a number\ntry 'tfc-predict --help'");
    snprintf(cmd, sizeof cmd, "%s --input %s --map '{op: scal}' 2>&1", pre, png);
    expect(cmd, 2, "did you mean 'scale'");
    snprintf(cmd, sizeof cmd, "%s/tfc-predict %s --input %s 2>&1", bin, model, png);
    expect(cmd, 2, "tfc-predict: missing --weights FILE");
    snprintf(cmd, sizeof cmd, "%s --input %s 2>&1", pre, xin);
    expect(cmd, 2, "tfc-predict: an .npy input needs --output Y.npy");
    snprintf(cmd, sizeof cmd, "%s/tfc-predict --help", bin);
    expect(cmd, 0, "--solver SOLVER.yaml");
    expect(cmd, 0, "  --version ");
    expect(cmd, 0, "\nexit status: 0 ");
    tfc_model_free(a);
    tfc_backend_free(be);
}

/* The tools' common command line: --version's form, an option's range named in its error. */
static void test_tool_usage(void)
{
    const char *bin = tool_bin();
    char cmd[2048], out[4096];
    if (!bin) return;
    const char *tools[] = {"train", "test", "predict", "data", "time", "inspect", "draw", "grid",
                           "zoo"};
    for (int i = 0; i < 9; i++) {
        snprintf(cmd, sizeof cmd, "%s/tfc-%s --version", bin, tools[i]);
        CU_ASSERT_EQUAL(run(cmd, out, sizeof out), 0);
        char want[64];
        snprintf(want, sizeof want, "tfc-%s (tfc) %s\nOpenBLAS: ", tools[i], TFC_VERSION);
        CU_ASSERT_NSTRING_EQUAL(out, want, strlen(want));
    }
    const char *model = tfc_test_write("cnn.yaml", CNN, -1);
    snprintf(cmd, sizeof cmd, "%s/tfc-time %s --batch 0 2>&1", bin, model);
    CU_ASSERT_EQUAL(run(cmd, out, sizeof out), 2);
    CU_ASSERT_STRING_EQUAL(out, "tfc-time: --batch: expected an integer from 1 to 1048576, "
                                "found '0'\ntry 'tfc-time --help'\n");
    snprintf(cmd, sizeof cmd, "%s/tfc-time %s --iteration 3 2>&1", bin, model);
    expect(cmd, 2, "unknown option '--iteration'; did you mean '--iterations'?");
    snprintf(cmd, sizeof cmd, "%s/tfc-draw %s --output a.dot --output b.dot 2>&1", bin, model);
    expect(cmd, 2, "tfc-draw: --output given twice");
    snprintf(cmd, sizeof cmd, "%s/tfc-draw %s --output 2>&1", bin, model);
    expect(cmd, 2, "tfc-draw: --output needs an argument (FILE.dot)");
    snprintf(cmd, sizeof cmd, "%s/tfc-draw --help", bin);
    expect(cmd, 0, "  --version ");
    expect(cmd, 0, "\nexit status: 0 ");
}

/* OpenBLAS's kernels: the pick from a core name and the CPU's features, as a table; a tool
 * started without OPENBLAS_CORETYPE runs on kernels its CPU supports (on a CPU OpenBLAS does
 * not know, after restarting itself with the variable set) and one started with it keeps it. */
static void test_blas_core(void)
{
    CU_ASSERT_STRING_EQUAL(tfc_cpu_blas_pick("Prescott", 1, 1), "SkylakeX");
    CU_ASSERT_STRING_EQUAL(tfc_cpu_blas_pick("Prescott", 1, 0), "Haswell");
    CU_ASSERT_STRING_EQUAL(tfc_cpu_blas_pick("Sandybridge", 1, 0), "Haswell");
    CU_ASSERT_PTR_NULL(tfc_cpu_blas_pick("Prescott", 0, 0));
    CU_ASSERT_PTR_NULL(tfc_cpu_blas_pick("Haswell", 1, 1)); /* a user's or OpenBLAS's AVX2 */
    CU_ASSERT_PTR_NULL(tfc_cpu_blas_pick("Zen", 1, 1));
    CU_ASSERT_PTR_NULL(tfc_cpu_blas_pick("SkylakeX", 1, 1));
    CU_ASSERT_PTR_NULL(tfc_cpu_blas_pick("COOPERLAKE", 1, 1));
    const char *bin = tool_bin();
    char cmd[2048], out[4096];
    if (!bin) return;
    snprintf(cmd, sizeof cmd, "env -u OPENBLAS_CORETYPE -u TFC_BLAS_FALLBACK %s/tfc-time --version", bin);
    CU_ASSERT_EQUAL(run(cmd, out, sizeof out), 0);
    const char *line = strstr(out, "\nOpenBLAS: ");
    CU_ASSERT_PTR_NOT_NULL(line);
    if (!line) return;
    char core[64] = "";
    CU_ASSERT_EQUAL(sscanf(line, "\nOpenBLAS: %63s kernels", core), 1);
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    CU_ASSERT_PTR_NULL(tfc_cpu_blas_pick(core, avx2, avx512));
    /* what OpenBLAS chose for this process by itself (before tfc_test_main restarted it, or
     * now): a fallback the tool must have named */
    const char *fallback = tfc_cpu_blas_fallback(), *set = getenv("OPENBLAS_CORETYPE");
    if (fallback || !set || !*set) {
        const char *mine = fallback ? fallback : tfc_cpu_blas_core();
        char said[128];
        snprintf(said, sizeof said, "set by tfc: OpenBLAS chose %s for this CPU", mine);
        CU_ASSERT_EQUAL(strstr(out, said) != NULL, tfc_cpu_blas_pick(mine, avx2, avx512) != NULL);
    }
    snprintf(cmd, sizeof cmd, "OPENBLAS_CORETYPE=Prescott %s/tfc-time --version", bin);
    CU_ASSERT_EQUAL(run(cmd, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\nOpenBLAS: Prescott kernels\n"));
}

TFC_TEST_MAIN("weights", {"round_trip", test_round_trip},
              {"strict_and_by_name", test_strict_and_by_name}, {"tools", test_tools},
              {"predict_maps", test_predict_maps}, {"tool_usage", test_tool_usage},
              {"blas_core", test_blas_core})
