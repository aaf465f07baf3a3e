/* The inference API (include/tfc.h, SPEC §5c): tfc_predictor's outputs equal tfc-predict's bit
 * for bit on the CPU for every zoo model; concurrent runs on one predictor equal the
 * single-threaded results; bad paths, a weights file of another model, n = 0 and NULL
 * arguments give error text, not a crash; a model without `loss:` ending in a Conv2D loads;
 * after warm-up calls, calls allocate nothing and, on one thread, make no system call. */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
/* The system-call check: Linux on x86-64, and not under AddressSanitizer, whose allocator
 * maps memory for the small allocations oneDNN's calls make (glibc's reuses its own). */
#if defined(__linux__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#define SYSCALL_FILTER 1
#endif

#include "cpu/cpu.h"
#include "device/device.h"
#include "graph/model.h"
#include "tfc.h"
#include "testutil.h"

static const char *const zoo[] = {"fashion_mlp",        "fashion_cnn",       "fashion_cnn_bn",
                                  "fashion_resnet",     "fashion_mobilenet", "fortunes_classify",
                                  "fortunes_char_lstm", "fortunes_char_gru", "fortunes_gpt",
                                  "fortunes_bigru",     "fortunes_encoder",  "fortunes_conv_bigru",
                                  "fortunes_bag_of_bigrams"};
#define NZOO (int)(sizeof zoo / sizeof *zoo)

static const char *bin; /* the tools' folder (tfc_test_bin) */

static void paths(const char *name, char *model, char *weights, size_t size)
{
    snprintf(model, size, "model_zoo/%s/model.yaml", name);
    snprintf(weights, size, "model_zoo/%s/%s.safetensors", name, name);
}

/* The predictor's input (0) or output (1) shape, a variable-length axis (-1) at the model's
 * input.max_length, the length tfc_predictor_run takes; the rank. */
static int shape_at_max(const tfc_predictor *p, int which, int64_t *dims, const char **dtype)
{
    int rank = tfc_predictor_shape(p, which, dims, dtype);
    for (int i = 0; i < rank; i++)
        if (dims[i] < 0) dims[i] = tfc_predictor_max_length(p);
    return rank;
}

/* n examples for p: uniform floats in [0, 1), or token ids in [1, 20) with a right-padded
 * tail of zeros of a varying length (masked steps). Deterministic in seed. */
static void *make_inputs(const tfc_predictor *p, int64_t n, unsigned seed, int64_t *per)
{
    int64_t dims[8];
    const char *dtype;
    int rank = shape_at_max(p, 0, dims, &dtype);
    CU_ASSERT_FATAL(rank >= 1);
    *per = 1;
    for (int i = 0; i < rank; i++) *per *= dims[i];
    int ids = !strcmp(dtype, "int32");
    void *x = malloc((size_t)(n * *per) * 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    srand(seed);
    for (int64_t e = 0; e < n; e++)
        for (int64_t k = 0; k < *per; k++) {
            if (ids) ((int32_t *)x)[e * *per + k] = k < *per - 3 * e ? 1 + rand() % 19 : 0;
            else ((float *)x)[e * *per + k] = (float)rand() / ((float)RAND_MAX + 1.0f);
        }
    return x;
}

static int64_t out_numel(const tfc_predictor *p)
{
    int64_t dims[8], n = 1;
    int rank = shape_at_max(p, 1, dims, NULL);
    for (int i = 0; i < rank; i++) n *= dims[i];
    return n;
}

/* Every zoo model: 5 examples through tfc-predict (an .npy in, an .npy out) and through the
 * predictor, in one batch of 5 and in batches of 1; the float32 outputs are identical. */
static void test_zoo_parity(void)
{
    if (!(bin = tfc_test_bin("tfc-predict"))) return;
    for (int z = 0; z < NZOO; z++) {
        char model[256], weights[256], err[512] = "";
        paths(zoo[z], model, weights, sizeof model);
        tfc_predictor *p = tfc_predictor_open(model, weights, "cpu", err, sizeof err);
        if (!p) fprintf(stderr, "%s: %s\n", zoo[z], err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        int64_t n = 5, per, nout = out_numel(p);
        void *x = make_inputs(p, n, 7 + (unsigned)z, &per);
        int64_t dims[8];
        const char *dtype;
        int rank = shape_at_max(p, 0, dims, &dtype);
        tfc_tensor t = {!strcmp(dtype, "int32") ? TFC_I32 : TFC_F32, {rank + 1, {n}}, x, -1};
        for (int i = 0; i < rank; i++) t.shape.dim[i + 1] = dims[i];
        tfc_error e;
        tfc_error_clear(&e);
        CU_ASSERT_EQUAL_FATAL(tfc_npy_write(tfc_test_path("x.npy"), &t, &e), TFC_OK);
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "%s/tfc-predict %s --weights %s --input %s --output %s "
                 "--device cpu", bin, model, weights, tfc_test_path("x.npy"), tfc_test_path("y.npy"));
        CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
        tfc_tensor y;
        CU_ASSERT_EQUAL_FATAL(tfc_npy_read(tfc_test_path("y.npy"), &y, &e), TFC_OK);
        CU_ASSERT_EQUAL_FATAL(tfc_shape_numel(&y.shape), n * nout);
        float *out = malloc((size_t)(n * nout) * 4);
        CU_ASSERT_EQUAL(tfc_predictor_run(p, x, n, out, err, sizeof err), 0);
        int same = memcmp(out, y.data, (size_t)(n * nout) * 4) == 0;
        if (!same) fprintf(stderr, "%s: predictor and tfc-predict differ\n", zoo[z]);
        CU_ASSERT(same);
        free(y.data);
        /* one example per call: the bits of tfc-predict --batch 1 (a GEMM of one row may take
         * another OpenBLAS kernel than one of five, so batch sizes are compared alike) */
        snprintf(cmd, sizeof cmd, "%s/tfc-predict %s --weights %s --input %s --output %s "
                 "--device cpu --batch 1", bin, model, weights, tfc_test_path("x.npy"),
                 tfc_test_path("y.npy"));
        CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
        CU_ASSERT_EQUAL_FATAL(tfc_npy_read(tfc_test_path("y.npy"), &y, &e), TFC_OK);
        for (int64_t i = 0; i < n; i++) {
            CU_ASSERT_EQUAL(tfc_predictor_run(p, (char *)x + i * per * 4, 1, out, err,
                                              sizeof err), 0);
            CU_ASSERT(memcmp(out, (float *)y.data + i * nout, (size_t)nout * 4) == 0);
        }
        free(y.data);
        free(out);
        free(x);
        tfc_predictor_close(p);
    }
}

/* The pass size (tfc_model_inference_pass): 16 for fashion_mobilenet on the CPU (memory-
 * bound: 4.1 FLOPs per byte of output; its widest layer, 401 KB an example, 16 times in 8
 * MiB), 256 on a GPU and for every other zoo model (fashion_cnn_bn, the next lowest at 18,
 * among them). The predictor's 40 examples run in passes of 16, as tfc-predict's default
 * batch does: the same bits; one pass of 40 (tfc-predict --batch 40) gives the same values
 * within float tolerance (the same bits too where every layer sums in an order the batch
 * does not change: tfc's own convolution kernels and gemm_weights' panels on AVX2 + FMA;
 * oneDNN's and OpenBLAS's GEMMs block by the batch). */
static void test_pass_size(void)
{
    for (int z = 0; z < NZOO; z++) {
        char model[256], weights[256];
        paths(zoo[z], model, weights, sizeof model);
        tfc_error e;
        tfc_error_clear(&e);
        tfc_model *m = tfc_model_load(model, &e);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        const int want = strcmp(zoo[z], "fashion_mobilenet") ? 256 : 16;
        CU_ASSERT_EQUAL(tfc_model_inference_pass(m, 1), want);
        CU_ASSERT_EQUAL(tfc_model_inference_pass(m, 0), 256);
        tfc_model_free(m);
    }
    if (!(bin = tfc_test_bin("tfc-predict"))) return;
    char model[256], weights[256], err[512] = "";
    paths("fashion_mobilenet", model, weights, sizeof model);
    tfc_predictor *p = tfc_predictor_open(model, weights, "cpu", err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    const int64_t n = 40, nout = out_numel(p);
    int64_t per;
    void *x = make_inputs(p, n, 17, &per);
    tfc_tensor t = {TFC_F32, {4, {n, 28, 28, 1}}, x, -1};
    tfc_error e;
    tfc_error_clear(&e);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_write(tfc_test_path("x40.npy"), &t, &e), TFC_OK);
    float *out = malloc((size_t)(n * nout) * 4);
    CU_ASSERT_EQUAL(tfc_predictor_run(p, x, n, out, err, sizeof err), 0);
    for (int one = 0; one < 2; one++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "%s/tfc-predict %s --weights %s --input %s --output %s "
                 "--device cpu%s", bin, model, weights, tfc_test_path("x40.npy"),
                 tfc_test_path("y40.npy"), one ? " --batch 40" : "");
        CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
        tfc_tensor y;
        CU_ASSERT_EQUAL_FATAL(tfc_npy_read(tfc_test_path("y40.npy"), &y, &e), TFC_OK);
        CU_ASSERT_EQUAL_FATAL(tfc_shape_numel(&y.shape), n * nout);
        const float *got = y.data;
        int close = 1;
        for (int64_t i = 0; i < n * nout; i++)
            close &= fabsf(got[i] - out[i]) <= 1e-5f + 1e-5f * fabsf(out[i]);
        CU_ASSERT(one ? close : !memcmp(out, y.data, (size_t)(n * nout) * 4));
        free(y.data);
    }
    free(out);
    free(x);
    tfc_predictor_close(p);
}

/* ---- concurrency ------------------------------------------------------------------------ */

#define THREADS 8
#define CALLS 200
#define DISTINCT 6 /* inputs: call c of any thread runs input c % DISTINCT (n = c % DISTINCT + 1) */

typedef struct shared {
    tfc_predictor *p;
    void *x;             /* DISTINCT * DISTINCT examples; input c starts at example c * DISTINCT */
    float *want;         /* single-threaded outputs, one block per input */
    int64_t per, nout;
    int mismatches, failures;
    pthread_mutex_t lock;
} shared;

static void *hammer(void *arg)
{
    shared *s = arg;
    float *out = malloc((size_t)(DISTINCT * s->nout) * 4);
    char err[256];
    int bad = 0, failed = 0;
    for (int c = 0; c < CALLS; c++) {
        int k = c % DISTINCT, n = k + 1;
        if (tfc_predictor_run(s->p, (char *)s->x + (int64_t)k * DISTINCT * s->per * 4, n, out,
                              err, sizeof err))
            failed++;
        else if (memcmp(out, s->want + (int64_t)k * DISTINCT * s->nout, (size_t)(n * s->nout) * 4))
            bad++;
    }
    free(out);
    pthread_mutex_lock(&s->lock);
    s->mismatches += bad;
    s->failures += failed;
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static void concurrent(const char *name)
{
    char model[256], weights[256], err[512] = "";
    paths(name, model, weights, sizeof model);
    shared s = {0};
    pthread_mutex_init(&s.lock, NULL);
    s.p = tfc_predictor_open(model, weights, "cpu", err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s.p);
    s.x = make_inputs(s.p, DISTINCT * DISTINCT, 99, &s.per);
    s.nout = out_numel(s.p);
    s.want = malloc((size_t)(DISTINCT * DISTINCT * s.nout) * 4);
    for (int k = 0; k < DISTINCT; k++)
        CU_ASSERT_EQUAL(tfc_predictor_run(s.p, (char *)s.x + (int64_t)k * DISTINCT * s.per * 4,
                                          k + 1, s.want + (int64_t)k * DISTINCT * s.nout, err,
                                          sizeof err), 0);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) CU_ASSERT_EQUAL(pthread_create(&th[t], NULL, hammer, &s), 0);
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    if (s.mismatches || s.failures)
        fprintf(stderr, "%s: %d of %d concurrent calls differ, %d failed\n", name, s.mismatches,
                THREADS * CALLS, s.failures);
    CU_ASSERT_EQUAL(s.mismatches, 0);
    CU_ASSERT_EQUAL(s.failures, 0);
    free(s.x);
    free(s.want);
    tfc_predictor_close(s.p);
    pthread_mutex_destroy(&s.lock);
}

/* 8 threads x 200 calls at batch sizes 1..6 on one predictor: every output equals the
 * single-threaded one. An MLP (fast), and the LSTM classifier (masked, int32 inputs). */
static void test_threads_mlp(void) { concurrent("fashion_mlp"); }
static void test_threads_lstm(void) { concurrent("fortunes_classify"); }

/* ---- allocations ------------------------------------------------------------------------- */

/* Every malloc, calloc, realloc and posix_memalign of the process passes through these (the
 * executable's definitions interpose glibc's); while `armed`, the calling thread records each
 * one's caller. Not under AddressSanitizer, which owns the allocator. */
#if !defined(__SANITIZE_ADDRESS__)
#define COUNT_ALLOCATIONS 1
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
static _Thread_local int armed, ncallers;
static _Thread_local void *callers[1024];

static void record(void *caller)
{
    if (armed && ncallers < 1024) callers[ncallers++] = caller;
}

void *malloc(size_t n)
{
    record(__builtin_return_address(0));
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
    record(__builtin_return_address(0));
    return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
    record(__builtin_return_address(0));
    return __libc_realloc(p, n);
}

int posix_memalign(void **p, size_t align, size_t n)
{
    record(__builtin_return_address(0));
    *p = __libc_memalign(align, n);
    return *p ? 0 : 12; /* ENOMEM */
}

/* The recorded allocations made by code outside OpenBLAS (whose threaded GEMM of the OpenMP
 * build, 0.3.21, allocates on its own in each call it splits among threads). */
static int own_allocations(const char *what)
{
    int n = 0;
    for (int i = 0; i < ncallers; i++) {
        Dl_info di;
        const char *lib = dladdr(callers[i], &di) && di.dli_fname ? di.dli_fname : "?";
        /* OpenBLAS's threaded GEMM; oneDNN's primitive calls (C++: their bookkeeping goes
         * through libstdc++'s operator new) */
        if (strstr(lib, "libopenblas") || strstr(lib, "libdnnl") || strstr(lib, "libstdc++"))
            continue;
        if (n++ < 5) fprintf(stderr, "%s: an allocation from %s\n", what, lib);
    }
    return n;
}
#endif

/* After one call at each batch size, calls at any size up to the largest allocate nothing in
 * the calling thread outside OpenBLAS and oneDNN (SPEC §5c); on every core, and on one
 * (tfc_predictor_options), where batch 1 runs Dense as a GEMV. */
#ifdef COUNT_ALLOCATIONS
static void test_no_allocation_per_call(void)
{
    static const char *const models[] = {"fashion_cnn_bn", "fortunes_classify", "fashion_mlp"};
    for (int z = 0; z < 6; z++) {
        char model[256], weights[256], err[512];
        paths(models[z % 3], model, weights, sizeof model);
        tfc_predictor_options o = {.threads = z / 3};
        tfc_predictor *p = tfc_predictor_open_options(model, weights, "cpu", &o, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        int64_t per;
        void *x = make_inputs(p, 8, 3, &per);
        float *y = malloc((size_t)(8 * out_numel(p)) * 4);
        for (int n = 1; n <= 8; n++) CU_ASSERT_EQUAL(tfc_predictor_run(p, x, n, y, err, sizeof err), 0);
        ncallers = 0;
        armed = 1;
        for (int c = 0; c < 40; c++) {
            tfc_cpu_team_look_soon(); /* the CPU backend's look at the load, too (cpu_team.c) */
            tfc_cpu_team_force(c % 3 == 1); /* and a team cut to one: a lone call's own path */
            tfc_predictor_run(p, x, 1 + c % 8, y, err, sizeof err);
        }
        armed = 0;
        tfc_cpu_team_force(0);
        CU_ASSERT_EQUAL(own_allocations(models[z % 3]), 0);
        free(x);
        free(y);
        tfc_predictor_close(p);
    }
}
#endif

/* ---- errors ------------------------------------------------------------------------------ */

/* The class names the weights record, through the stable API (examples/classify.c prints
 * them, as tfc-predict does). */
static void test_class_names(void)
{
    char err[512];
    tfc_predictor *p = tfc_predictor_open("model_zoo/fashion_mlp/model.yaml",
                                          "model_zoo/fashion_mlp/fashion_mlp.safetensors",
                                          "cpu", err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_STRING_EQUAL(tfc_predictor_class_name(p, 0), "T-shirt/top");
    CU_ASSERT_STRING_EQUAL(tfc_predictor_class_name(p, 9), "Ankle boot");
    CU_ASSERT_PTR_NULL(tfc_predictor_class_name(p, 10));
    CU_ASSERT_PTR_NULL(tfc_predictor_class_name(p, -1));
    CU_ASSERT_PTR_NULL(tfc_predictor_class_name(NULL, 0));
    tfc_predictor_close(p);
}

static void test_errors(void)
{
    char err[512];
    const char *mlp = "model_zoo/fashion_mlp/model.yaml";
    const char *mlp_w = "model_zoo/fashion_mlp/fashion_mlp.safetensors";
    err[0] = 0;
    CU_ASSERT_PTR_NULL(tfc_predictor_open("no/such/model.yaml", mlp_w, "cpu", err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "no/such/model.yaml"));
    err[0] = 0;
    CU_ASSERT_PTR_NULL(tfc_predictor_open(mlp, "no/such/w.safetensors", "cpu", err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "no/such/w.safetensors"));
    /* a weights file of another model: the first missing variable is named */
    err[0] = 0;
    CU_ASSERT_PTR_NULL(tfc_predictor_open("model_zoo/fashion_cnn/model.yaml", mlp_w, "cpu", err,
                                          sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "fashion_mlp.safetensors"));
    CU_ASSERT_PTR_NULL(strchr(err, '\n'));
    err[0] = 0;
    CU_ASSERT_PTR_NULL(tfc_predictor_open(mlp, mlp_w, "tpu", err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "tpu"));
    CU_ASSERT_PTR_NULL(tfc_predictor_open(NULL, mlp_w, "cpu", err, sizeof err));
    CU_ASSERT_PTR_NULL(tfc_predictor_open(mlp, NULL, NULL, NULL, 0)); /* no err buffer */
    /* a tiny buffer: truncated, terminated */
    char tiny[8] = "xxxxxxx";
    CU_ASSERT_PTR_NULL(tfc_predictor_open("nope.yaml", mlp_w, "cpu", tiny, sizeof tiny));
    CU_ASSERT_EQUAL(strlen(tiny), 7);

    tfc_predictor *p = tfc_predictor_open(mlp, mlp_w, "cpu", err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    float x[784] = {0}, y[10];
    err[0] = 0;
    CU_ASSERT_EQUAL(tfc_predictor_run(p, x, 0, y, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "n is 0"));
    CU_ASSERT_EQUAL(tfc_predictor_run(p, x, -3, y, NULL, 0), -1);
    err[0] = 0;
    CU_ASSERT_EQUAL(tfc_predictor_run(p, NULL, 1, y, err, sizeof err), -1);
    CU_ASSERT(err[0] != 0);
    CU_ASSERT_EQUAL(tfc_predictor_run(p, x, 1, NULL, err, sizeof err), -1);
    CU_ASSERT_EQUAL(tfc_predictor_run(NULL, x, 1, y, err, sizeof err), -1);
    int64_t dims[8];
    const char *dtype = NULL;
    CU_ASSERT_EQUAL(tfc_predictor_shape(NULL, 0, dims, &dtype), -1);
    CU_ASSERT_EQUAL(tfc_predictor_shape(p, 2, dims, &dtype), -1);
    CU_ASSERT_EQUAL(tfc_predictor_shape(p, 0, NULL, &dtype), -1);
    CU_ASSERT_EQUAL(tfc_predictor_shape(p, 0, dims, &dtype), 3);
    CU_ASSERT_EQUAL(dims[0], 28);
    CU_ASSERT_EQUAL(dims[2], 1);
    CU_ASSERT_STRING_EQUAL(dtype, "float32");
    CU_ASSERT_EQUAL(tfc_predictor_shape(p, 1, dims, &dtype), 1);
    CU_ASSERT_EQUAL(dims[0], 10);
    CU_ASSERT_EQUAL(tfc_predictor_run(p, x, 1, y, err, sizeof err), 0);
    tfc_predictor_close(p);
    tfc_predictor_close(NULL);

    /* a token id past the Embedding's input_dim: the message names it */
    p = tfc_predictor_open("model_zoo/fortunes_classify/model.yaml",
                           "model_zoo/fortunes_classify/fortunes_classify.safetensors", "cpu", err,
                           sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    int32_t ids[80] = {5, 9000};
    float out[8];
    err[0] = 0;
    CU_ASSERT_EQUAL(tfc_predictor_run(p, ids, 1, out, err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "token id 9000"));
    tfc_predictor_close(p);
    CU_ASSERT_STRING_EQUAL(tfc_version(), TFC_VERSION);
}

/* The model `yaml`, written to NAME.yaml (returned) and bound on one thread for 2 examples,
 * its weights drawn (seed 3) and saved to NAME.safetensors: in *m and *be. */
static const char *small_model(const char *name, const char *yaml, tfc_model **m,
                               tfc_backend **be)
{
    char file[64];
    snprintf(file, sizeof file, "%s.yaml", name);
    const char *path = tfc_test_write(file, yaml, -1);
    tfc_error e;
    tfc_error_clear(&e);
    *m = tfc_model_load(path, &e);
    if (!*m) fputs(e.text, stderr);
    CU_ASSERT_PTR_NOT_NULL_FATAL(*m);
    *be = tfc_backend_open("cpu", 1, &e);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(*m, *be, 2, &e), TFC_OK);
    CU_ASSERT_EQUAL(tfc_model_init_weights(*m, 3, &e), TFC_OK);
    snprintf(file, sizeof file, "%s.safetensors", name);
    CU_ASSERT_EQUAL(tfc_model_save_weights(*m, tfc_test_path(file), &e), TFC_OK);
    return path;
}

/* A model file without `loss:` whose output (H, W, 1) cannot take the default loss (sparse
 * cross-entropy per pixel needs 2 classes or more) loads for inference; its loss is refused
 * only where it is used (a solver, tfc_model_loss). */
static void test_conv_output_without_loss(void)
{
    tfc_model *m;
    tfc_backend *be;
    const char *path = small_model("seg",
                                   "input: {shape: [6, 6, 2]}\nlayers:\n"
                                   "  - Conv2D: {filters: 1, kernel_size: 3, padding: same}\n"
                                   "  - MaxPooling2D: {pool_size: 2}\n",
                                   &m, &be);
    tfc_error e;
    tfc_error_clear(&e);
    CU_ASSERT_EQUAL(tfc_model_check_loss(m, &e), TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.text, "seg.yaml:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.text, "needs at least 2 output classes"));
    float x[72] = {0};
    int32_t labels[8] = {0};
    tfc_batch_result r;
    tfc_error_clear(&e);
    CU_ASSERT_EQUAL(tfc_model_forward(m, x, 1, 0, 0, 0, &e), TFC_OK);
    CU_ASSERT_EQUAL(tfc_model_loss(m, labels, 0, &r, &e), TFC_ERR_CONFIG);
    tfc_model_free(m);
    tfc_backend_free(be);

    char err[512] = "";
    tfc_predictor *p = tfc_predictor_open(path, tfc_test_path("seg.safetensors"), "cpu", err,
                                          sizeof err);
    if (!p) fprintf(stderr, "%s\n", err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    int64_t dims[8];
    CU_ASSERT_EQUAL(tfc_predictor_shape(p, 1, dims, NULL), 3);
    CU_ASSERT_EQUAL(dims[0], 3);
    CU_ASSERT_EQUAL(dims[1], 3);
    CU_ASSERT_EQUAL(dims[2], 1);
    float y[9];
    CU_ASSERT_EQUAL(tfc_predictor_run(p, x, 1, y, err, sizeof err), 0);
    tfc_predictor_close(p);

    /* with `loss:` given, the mismatch is still an error at load */
    tfc_test_write("seg_loss.yaml", "input: {shape: [6, 6, 2]}\nlayers:\n"
                   "  - Conv2D: {filters: 1, kernel_size: 3}\nloss: sparse_categorical_crossentropy\n",
                   -1);
    tfc_error_clear(&e);
    CU_ASSERT_PTR_NULL(tfc_model_load(tfc_test_path("seg_loss.yaml"), &e));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.text, "seg_loss.yaml:4:7: error: loss:"));
}

/* Allocations are not counted under AddressSanitizer, which owns the allocator: the case is
 * absent from a sanitizer build, not skipped (no optional peer is missing). */
/* The inference layout (tfc_model_bind_inference, which the predictor and tfc-predict use):
 * for every zoo model the output equals, bit for bit, that of the same model bound with the
 * training layout, on 37 examples in passes of 16; the arena is smaller, and fashion_resnet's
 * buffers at least 4x (the arena less the workspace, scratch that both layouts size alike:
 * oneDNN's Winograd kernels want ~8 MB of it per thread); a training pass on it is a usage
 * error. */
static void test_inference_layout(void)
{
    for (int z = 0; z < NZOO; z++) {
        char model[256], weights[256], err[512] = "";
        paths(zoo[z], model, weights, sizeof model);
        tfc_predictor *p = tfc_predictor_open(model, weights, "cpu", err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        const int64_t n = 37, pass = 16, nout = out_numel(p);
        int64_t per;
        void *x = make_inputs(p, n, 3 + (unsigned)z, &per);
        tfc_predictor_close(p);
        float *out[2];
        size_t arena[2], buffers[2];
        for (int inference = 0; inference < 2; inference++) {
            tfc_error e;
            tfc_error_clear(&e);
            tfc_model *m = tfc_model_load(model, &e);
            tfc_backend *be = tfc_backend_open("cpu", 2, &e);
            CU_ASSERT_PTR_NOT_NULL_FATAL(m);
            CU_ASSERT_PTR_NOT_NULL_FATAL(be);
            tfc_status s = inference ? tfc_model_bind_inference(m, be, (int)pass, &e)
                                     : tfc_model_bind(m, be, (int)pass, &e);
            CU_ASSERT_EQUAL_FATAL(s, TFC_OK);
            CU_ASSERT_EQUAL_FATAL(tfc_model_load_weights(m, weights, NULL, &e), TFC_OK);
            arena[inference] = tfc_model_memory(m)->arena;
            buffers[inference] = arena[inference] - tfc_model_memory(m)->workspace;
            out[inference] = malloc(sizeof(float) * (size_t)(n * nout));
            for (int64_t at = 0; at < n; at += pass) {
                int k = (int)(n - at < pass ? n - at : pass);
                CU_ASSERT_EQUAL(tfc_model_forward(m, (char *)x + at * per * 4, k, 0, 0, 0, &e),
                                TFC_OK);
                tfc_model_get_output(m, out[inference] + at * nout);
            }
            if (inference) {
                tfc_error_clear(&e);
                CU_ASSERT_EQUAL(tfc_model_forward(m, x, 1, 1, 0, 0, &e), TFC_ERR_USAGE);
            }
            tfc_model_free(m);
            tfc_backend_free(be);
        }
        int same = memcmp(out[0], out[1], sizeof(float) * (size_t)(n * nout)) == 0;
        if (!same) fprintf(stderr, "\n%s: the inference layout's output differs\n", zoo[z]);
        CU_ASSERT(same);
        CU_ASSERT(arena[1] < arena[0]);
        if (!strcmp(zoo[z], "fashion_resnet")) CU_ASSERT(4 * buffers[1] < buffers[0]);
        free(out[0]), free(out[1]), free(x);
    }
}

/* ---- system calls ------------------------------------------------------------------------ */

#ifdef SYSCALL_FILTER
/* A system call under the filter below: its number on stderr (write is let through), and the
 * process ends with status 3. */
static void on_sigsys(int sig, siginfo_t *si, void *ctx)
{
    (void)sig, (void)ctx;
    char text[80];
    int n = snprintf(text, sizeof text, "a system call during tfc_predictor_run: number %d\n",
                     si->si_syscall);
    if (write(2, text, (size_t)n) < 0) syscall(SYS_exit, 4);
    syscall(SYS_exit, 3);
}

/* From here on every system call of this thread but write, exit and rt_sigreturn raises
 * SIGSYS (seccomp; inherited by no one: the child that calls it exits with SYS_exit). */
static int forbid_syscalls(void)
{
    struct sigaction sa = {.sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO};
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_write, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_rt_sigreturn, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = (unsigned short)(sizeof f / sizeof *f), .filter = f};
    return sigaction(SIGSYS, &sa, NULL) == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
           prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

/* On one thread (tfc_predictor_options), after a call at each batch size (the largest first,
 * so that the worker is bound for it), calls up to the largest make no system call at all on
 * any zoo model (issue 44): each model in a child
 * process whose calls run under a seccomp filter that turns any system call into a failure
 * naming its number (a one-thread OpenMP region, for one, ends at a barrier that wakes its
 * waiters with futex). The filter takes the child's only thread; status 0 is a clean pass. */
static void test_no_syscall_per_call(void)
{
    for (int z = 0; z < NZOO; z++) {
        fflush(NULL);
        pid_t pid = fork();
        CU_ASSERT_FATAL(pid >= 0);
        if (pid == 0) {
            alarm(120); /* a hang is a failure too */
            char model[256], weights[256], err[512];
            paths(zoo[z], model, weights, sizeof model);
            tfc_predictor_options o = {.threads = 1};
            tfc_predictor *p = tfc_predictor_open_options(model, weights, "cpu", &o, err, sizeof err);
            if (!p) {
                fprintf(stderr, "%s: %s\n", zoo[z], err);
                _exit(2);
            }
            int64_t per;
            void *x = make_inputs(p, 4, 5, &per);
            float *y = malloc((size_t)(4 * out_numel(p)) * 4);
            for (int n = 4; n >= 1; n--) /* bound for the largest first */
                if (tfc_predictor_run(p, x, n, y, err, sizeof err)) _exit(2);
            if (!forbid_syscalls()) _exit(5);
            for (int c = 0; c < 12; c++) tfc_predictor_run(p, x, 1 + c % 4, y, err, sizeof err);
            syscall(SYS_exit, 0); /* exit_group (what _exit calls) is not let through */
        }
        int status = 0;
        CU_ASSERT_EQUAL_FATAL(waitpid(pid, &status, 0), pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fprintf(stderr, "\n  %s: the child ended with status %d, signal %d\n", zoo[z],
                    WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                    WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
}
#define SYSCALL_CASE {"no_syscall_per_call", test_no_syscall_per_call},
#else
#define SYSCALL_CASE
#endif

#ifdef COUNT_ALLOCATIONS
#define ALLOCATION_CASE {"no_allocation_per_call", test_no_allocation_per_call},
#else
#define ALLOCATION_CASE
#endif

/* On two threads, a convolution whose team the load cut to one runs on the calling thread
 * alone (cpu_dnnl.c lone_call): the image models' outputs at batch 1 to 3 are the full
 * team's, bit for bit, and those calls did run alone where oneDNN is built in
 * (fashion_resnet: the other models' convolutions take tfc's own kernels where the CPU has
 * AVX2, the one-channel one, Winograd's, the depthwise and the pointwise ones). */
static void test_lone_conv_bits(void)
{
    static const char *const models[] = {"fashion_cnn", "fashion_cnn_bn", "fashion_resnet",
                                         "fashion_mobilenet"};
    for (size_t z = 0; z < sizeof models / sizeof *models; z++) {
        char model[256], weights[256], err[512];
        paths(models[z], model, weights, sizeof model);
        tfc_predictor_options o = {.threads = 2};
        tfc_predictor *p = tfc_predictor_open_options(model, weights, "cpu", &o, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        int64_t per, nout = out_numel(p);
        void *x = make_inputs(p, 3, 5 + (unsigned)z, &per);
        float *y[2] = {malloc((size_t)(3 * nout) * 4), malloc((size_t)(3 * nout) * 4)};
        for (int n = 1; n <= 3; n++) {
            long long before = tfc_cpu_team_lone_calls();
            for (int team = 2; team >= 1; team--) {
                tfc_cpu_team_force(team);
                CU_ASSERT_EQUAL(tfc_predictor_run(p, x, n, y[team - 1], err, sizeof err), 0);
            }
            tfc_cpu_team_force(0);
            int same = !memcmp(y[0], y[1], (size_t)(n * nout) * 4);
            if (!same) printf("\n%s, batch %d: the lone calls' output differs\n", models[z], n);
            CU_ASSERT(same);
#ifdef TFC_HAVE_DNNL
            if (z == 2) CU_ASSERT(tfc_cpu_team_lone_calls() > before);
#endif
            (void)before;
        }
        free(y[0]);
        free(y[1]);
        free(x);
        tfc_predictor_close(p);
    }
}

/* A one-pass call on two threads is raced between the team and the calling thread alone
 * (predictor.c, race): calls 3 to 18 at a batch alternate the two. Every zoo model, batches
 * 1 and 3: 20 calls give the same bits. */
static void test_raced_bits(void)
{
    for (int z = 0; z < NZOO; z++) {
        char model[256], weights[256], err[512] = "";
        paths(zoo[z], model, weights, sizeof model);
        tfc_predictor_options o = {.threads = 2};
        tfc_predictor *p = tfc_predictor_open_options(model, weights, "cpu", &o, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        const int64_t nout = out_numel(p);
        int64_t per;
        void *x = make_inputs(p, 3, 23 + (unsigned)z, &per);
        float *first = malloc((size_t)(3 * nout) * 4), *y = malloc((size_t)(3 * nout) * 4);
        for (int n = 1; n <= 3; n += 2) {
            int same = 1;
            for (int c = 0; c < 20; c++) {
                CU_ASSERT_EQUAL(tfc_predictor_run(p, x, n, c ? y : first, err, sizeof err), 0);
                if (c) same &= !memcmp(first, y, (size_t)(n * nout) * 4);
            }
            if (!same) printf("\n%s, batch %d: a raced call differs\n", zoo[z], n);
            CU_ASSERT(same);
        }
        free(first), free(y), free(x);
        tfc_predictor_close(p);
    }
}

/* A call of many passes on two or three threads runs them side by side, each on one thread
 * (fashion_mlp, fashion_mobilenet: small workers): every pass's bits are those of the same
 * examples run alone (one pass, raced between the team and the calling thread), whichever
 * thread ran it. */
static void test_side_by_side_bits(void)
{
    static const char *const models[] = {"fashion_mlp", "fashion_mobilenet"};
    for (int z = 0; z < 4; z++) {
        char model[256], weights[256], err[512] = "";
        paths(models[z % 2], model, weights, sizeof model);
        tfc_predictor_options o = {.threads = 2 + z / 2};
        tfc_predictor *p = tfc_predictor_open_options(model, weights, "cpu", &o, err, sizeof err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        tfc_error e;
        tfc_error_clear(&e);
        tfc_model *m = tfc_model_load(model, &e);
        CU_ASSERT_PTR_NOT_NULL_FATAL(m);
        const int64_t pass = tfc_model_inference_pass(m, 1), n = 5 * pass + 3,
                      nout = out_numel(p);
        tfc_model_free(m);
        int64_t per;
        void *x = make_inputs(p, n, 11 + (unsigned)z, &per);
        float *all = malloc((size_t)(n * nout) * 4), *alone = malloc((size_t)(n * nout) * 4);
        const long long before = tfc_predictor_side_passes();
        for (int again = 0; again < 3; again++) { /* the crew's threads start at the first */
            CU_ASSERT_EQUAL(tfc_predictor_run(p, x, n, all, err, sizeof err), 0);
            for (int64_t at = 0; at < n; at += pass)
                CU_ASSERT_EQUAL(tfc_predictor_run(p, (float *)x + at * per,
                                                  n - at < pass ? n - at : pass,
                                                  alone + at * nout, err, sizeof err), 0);
            const int same = !memcmp(all, alone, (size_t)(n * nout) * 4);
            if (!same) printf("\n%s, %d threads: a pass side by side differs\n", models[z % 2],
                              o.threads);
            CU_ASSERT(same);
        }
        CU_ASSERT_EQUAL(tfc_predictor_side_passes() - before, 3 * 6);
        free(all), free(alone), free(x);
        tfc_predictor_close(p);
    }
}

/* A failure in passes side by side is the first failing pass's, whichever thread met it
 * first: token ids out of range in examples 600 (9000) and 800 (7777), passes 2 and 3 of
 * 256 (a small Embedding model: side by side), run at once by the two threads, every time. */
static void test_side_by_side_error(void)
{
    tfc_model *m;
    tfc_backend *be;
    const char *path = small_model("ids",
                                   "input: {shape: [8], dtype: int32}\nlayers:\n"
                                   "  - Embedding: {input_dim: 50, output_dim: 64}\n"
                                   "  - Flatten: {}\n  - Dense: {units: 4}\n",
                                   &m, &be);
    tfc_model_free(m);
    tfc_backend_free(be);
    char err[512] = "";
    tfc_predictor_options o = {.threads = 2};
    tfc_predictor *p = tfc_predictor_open_options(path, tfc_test_path("ids.safetensors"), "cpu",
                                                  &o, err, sizeof err);
    if (!p) puts(err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    enum { N = 2000 };
    static int32_t ids[N * 8];
    static float out[N * 4];
    for (int i = 0; i < N * 8; i++) ids[i] = 1 + i % 40;
    const long long before = tfc_predictor_side_passes();
    CU_ASSERT_EQUAL(tfc_predictor_run(p, ids, N, out, err, sizeof err), 0);
    CU_ASSERT(tfc_predictor_side_passes() > before);
    ids[800 * 8 + 3] = 7777;
    ids[600 * 8 + 5] = 9000;
    for (int again = 0; again < 8; again++) {
        err[0] = 0;
        CU_ASSERT_EQUAL(tfc_predictor_run(p, ids, N, out, err, sizeof err), -1);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "token id 9000"));
    }
    tfc_predictor_close(p);
}

/* max_length: a variable-length model's input.max_length (its -1 axes at their largest, the
 * length run_length takes at most), 0 for a fixed shape, -1 for NULL. */
static void test_max_length(void)
{
    char err[512];
    tfc_predictor *p = tfc_predictor_open("model_zoo/fortunes_bigru/model.yaml",
                                          "model_zoo/fortunes_bigru/fortunes_bigru.safetensors",
                                          "cpu", err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_predictor_max_length(p), 80);
    static int32_t ids[81];
    float out[8];
    CU_ASSERT_EQUAL(tfc_predictor_run_length(p, ids, 1, 80, out, err, sizeof err), 0);
    CU_ASSERT_EQUAL(tfc_predictor_run_length(p, ids, 1, 81, out, err, sizeof err), -1);
    tfc_predictor_close(p);
    p = tfc_predictor_open("model_zoo/fortunes_classify/model.yaml",
                           "model_zoo/fortunes_classify/fortunes_classify.safetensors", "cpu",
                           err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_predictor_max_length(p), 0); /* input shape [80]: fixed */
    tfc_predictor_close(p);
    CU_ASSERT_EQUAL(tfc_predictor_max_length(NULL), -1);
}

TFC_TEST_MAIN("predictor", {"zoo_parity", test_zoo_parity}, {"class_names", test_class_names},
              {"max_length", test_max_length},
              {"threads_mlp", test_threads_mlp}, {"threads_lstm", test_threads_lstm},
              ALLOCATION_CASE SYSCALL_CASE {"errors", test_errors},
              {"conv_output_without_loss", test_conv_output_without_loss},
              {"inference_layout", test_inference_layout}, {"lone_conv_bits", test_lone_conv_bits},
              {"pass_size", test_pass_size}, {"raced_bits", test_raced_bits},
              {"side_by_side_bits", test_side_by_side_bits},
              {"side_by_side_error", test_side_by_side_error})
