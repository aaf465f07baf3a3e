/* The solver's parts: every optimizer and learning-rate policy against steps computed by
 * hand (and a registry walk that fails when one lacks a case), solver-file and --set
 * validation with the errors they print, the snapshot state file (round trip, checksum,
 * refusals), snapshot names, rotation and discovery, log.csv, and TensorBoard event files
 * decoded by an independent reader here (and by TensorBoard's EventAccumulator when python3
 * has it; otherwise tfc_test_skip). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data/data.h"
#include "device/device.h"
#include "cpu/cpu.h"
#include "graph/model.h"
#include "core/safetensors.h"
#include "solver/internal.h"
#include "solver/optimizer.h"
#include "solver/solver.h"
#include "util/testutil.h"

#define CLOSE(a, b, tol) CU_ASSERT(fabs((double)(a) - (double)(b)) <= (tol) * (1 + fabs((double)(b))))

/* ---- optimizers --------------------------------------------------------------------------- */

static int tested_optimizer[TFC_OPTIMIZER_COUNT];

/* Runs `steps` updates of an optimizer on a 3-element arena whose loss is sum(w^2)/2, so
 * the gradient is w itself; returns the final weights in w. */
static void run_optimizer(const tfc_optimizer_config *cfg, float *w, int steps, double lr,
                          double grad_scale, double l2)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    tfc_optimizer o;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_optimizer_init(&o, cfg, be, 3, &err), TFC_OK);
    float g[3];
    for (int t = 0; t < steps; t++) {
        memcpy(g, w, sizeof g);
        tfc_optimizer_step(&o, t, lr, grad_scale, l2, w, g);
    }
    tfc_optimizer_release(&o);
    tfc_backend_free(be);
    tested_optimizer[cfg->type] = 1;
}

static tfc_optimizer_config config_of(const char *yaml)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_doc *d = tfc_doc_load_string(yaml, strlen(yaml), "opt.yaml", &err);
    tfc_optimizer_config c;
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(tfc_optimizer_config_read(tfc_doc_root(d), "optimizer", &c, &err), TFC_OK);
    if (err.count) printf("\n%s", err.text);
    tfc_doc_free(d);
    return c;
}

static void test_sgd(void)
{
    /* Plain: w = 1 - 0.1 * 1 = 0.9, then 0.9 - 0.09 = 0.81. */
    tfc_optimizer_config c = config_of("{type: sgd, learning_rate: 0.1}");
    CLOSE(c.learning_rate, 0.1, 0);
    float w[3] = {1, -2, 0};
    run_optimizer(&c, w, 2, 0.1, 1, 0);
    CLOSE(w[0], 0.81, 1e-6);
    CLOSE(w[1], -1.62, 1e-6);
    /* Momentum 0.9: v = -0.1, w = 0.9; v = 0.9 (-0.1) - 0.1 (0.9) = -0.18, w = 0.72. */
    c = config_of("{type: sgd, momentum: 0.9}");
    CLOSE(c.learning_rate, 0.01, 0); /* Keras's default */
    w[0] = 1;
    run_optimizer(&c, w, 2, 0.1, 1, 0);
    CLOSE(w[0], 0.72, 1e-6);
    /* Nesterov: w = 1 + 0.9 (-0.1) - 0.1 = 0.81; v = -0.09 - 0.081 = -0.171,
     * w = 0.81 + 0.9 (-0.171) - 0.081 = 0.5751. */
    c = config_of("{type: sgd, momentum: 0.9, nesterov: true}");
    w[0] = 1;
    run_optimizer(&c, w, 2, 0.1, 1, 0);
    CLOSE(w[0], 0.5751, 1e-6);
    /* grad_scale and L2: g = 0.5 * 1 + 0.2 * 1 = 0.7; w = 1 - 0.1 * 0.7 = 0.93. */
    c = config_of("sgd");
    w[0] = 1;
    run_optimizer(&c, w, 1, 0.1, 0.5, 0.2);
    CLOSE(w[0], 0.93, 1e-6);
}

/* Keras's Adam in double, for comparison over several steps. */
static double adam_ref(double w, int steps, double lr, double b1, double b2, double eps,
                       double wd, int ams)
{
    double m = 0, v = 0, vh = 0;
    for (int t = 1; t <= steps; t++) {
        double g = w;
        w -= w * wd * lr;
        double alpha = lr * sqrt(1 - pow(b2, t)) / (1 - pow(b1, t));
        m += (g - m) * (1 - b1);
        v += (g * g - v) * (1 - b2);
        vh = vh > v ? vh : v;
        w -= m * alpha / (sqrt(ams ? vh : v) + eps);
    }
    return w;
}

static void test_adam(void)
{
    /* The first step moves by lr (m / sqrt(v) = 1 after bias correction):
     * 1 - 0.1 * 0.1 / (sqrt(0.001) + 1e-7) * sqrt(0.001) / 0.1 = 0.9000003. */
    tfc_optimizer_config c = config_of("{type: adam}");
    CLOSE(c.learning_rate, 0.001, 0);
    CLOSE(c.beta_1, 0.9, 0);
    CLOSE(c.beta_2, 0.999, 0);
    CLOSE(c.epsilon, 1e-7, 0);
    float w[3] = {1, 2, -3};
    run_optimizer(&c, w, 1, 0.1, 1, 0);
    CLOSE(w[0], 0.9000003, 1e-6);
    w[0] = 1;
    w[1] = 2;
    run_optimizer(&c, w, 5, 0.1, 1, 0);
    CLOSE(w[0], adam_ref(1, 5, 0.1, 0.9, 0.999, 1e-7, 0, 0), 1e-5);
    CLOSE(w[1], adam_ref(2, 5, 0.1, 0.9, 0.999, 1e-7, 0, 0), 1e-5);
    c = config_of("{type: adam, amsgrad: true, beta_1: 0.5, beta_2: 0.9}");
    w[0] = 1;
    run_optimizer(&c, w, 6, 0.05, 1, 0);
    CLOSE(w[0], adam_ref(1, 6, 0.05, 0.5, 0.9, 1e-7, 0, 1), 1e-5);
}

static void test_adamw(void)
{
    /* Decoupled decay first: 1 - 1 * 0.004 * 0.1 = 0.9996, then the Adam step of the
     * gradient at the old weight: 0.9996 - 0.0999997 = 0.8996003. */
    tfc_optimizer_config c = config_of("{type: adamw}");
    CLOSE(c.weight_decay, 0.004, 0);
    float w[3] = {1, 0, 0};
    run_optimizer(&c, w, 1, 0.1, 1, 0);
    CLOSE(w[0], 0.8996003, 1e-6);
    c = config_of("{type: adamw, weight_decay: 0.1}");
    w[0] = 1;
    run_optimizer(&c, w, 4, 0.1, 1, 0);
    CLOSE(w[0], adam_ref(1, 4, 0.1, 0.9, 0.999, 1e-7, 0.1, 0), 1e-5);
}

static void test_rmsprop(void)
{
    /* Keras's docstring example: lr 0.1, w = 10, loss w^2/2: one step gives 9.683772. */
    tfc_optimizer_config c = config_of("{type: rmsprop}");
    CLOSE(c.rho, 0.9, 0);
    float w[3] = {10, 0, 0};
    run_optimizer(&c, w, 1, 0.1, 1, 0);
    CLOSE(w[0], 9.683772, 1e-6);
    /* Momentum and centered, two steps by hand (rho 0.9, momentum 0.5, lr 0.1, w = 1):
     * v = 0.1, a = 0.1, den = 0.1 - 0.01 = 0.09, inc = 0.1 / 0.3 = 0.333333, mo = inc,
     * w = 0.666667; g = 0.666667: v = 0.09 + 0.0444444 = 0.134444,
     * a = 0.09 + 0.0666667 = 0.156667, den = 0.134444 - 0.0245444 = 0.1099,
     * inc = 0.0666667 / 0.331512 = 0.201100, mo = 0.166667 + 0.201100 = 0.367767,
     * w = 0.666667 - 0.367767 = 0.298900. */
    c = config_of("{type: rmsprop, momentum: 0.5, centered: true, epsilon: 0}");
    w[0] = 1;
    run_optimizer(&c, w, 2, 0.1, 1, 0);
    CLOSE(w[0], 0.298900, 1e-4);
}

static void test_adagrad(void)
{
    /* acc = 0.1 + 1 = 1.1; w = 1 - 0.1 / sqrt(1.1 + 1e-7) = 0.9046537. */
    tfc_optimizer_config c = config_of("{type: adagrad}");
    CLOSE(c.initial_accumulator_value, 0.1, 0);
    float w[3] = {1, 0, 0};
    run_optimizer(&c, w, 1, 0.1, 1, 0);
    CLOSE(w[0], 0.9046537, 1e-6);
    /* Second step: g = 0.9046537, acc = 1.1 + 0.8183983 = 1.9183983,
     * w = 0.9046537 - 0.1 * 0.9046537 / 1.3850626 = 0.8393393. */
    w[0] = 1;
    run_optimizer(&c, w, 2, 0.1, 1, 0);
    CLOSE(w[0], 0.8393393, 1e-6);
}

/* Keras 3.15's own optimizers (tests/ref/keras_optimizers.py): per case, a vector of
 * weights takes T updates from the fixture's gradients, and after each the weights must
 * be Keras's, and after the last each slot Keras's slot variable of that name (Nadam's
 * scalar u_product: the cache tfc recomputes from the step). The gradients hold zeros and
 * span 1e-4 to 10. Tolerance: a few float32 roundings of an update (Keras and tfc round
 * 1 - beta and pow differently). Every type must have a case here. */
static void test_keras_optimizers(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open("tests/ref/optimizers/optimizers.safetensors", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    const int T = atoi(tfc_st_meta(f, "T")), N = atoi(tfc_st_meta(f, "N"));
    const char *json = tfc_st_meta(f, "cases");
    CU_ASSERT_FATAL(T > 0 && N > 0 && N <= 64 && json);
    tfc_doc *doc = tfc_doc_load_string(json, strlen(json), "cases", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    const tfc_node *cases = tfc_doc_root(doc);
    float w0[64], *g = malloc(sizeof(float) * (size_t)(T * N)),
                  *want = malloc(sizeof(float) * (size_t)(T * N));
    tfc_st_tensor_to_f32(tfc_st_find(f, "w0"), w0);
    tfc_st_tensor_to_f32(tfc_st_find(f, "g"), g);
    int covered[TFC_OPTIMIZER_COUNT] = {0}, slots_checked = 0;
    tfc_backend *be = tfc_cpu_backend_create(1);
    for (int c = 0; c < cases->n; c++) {
        const char *name = tfc_node_get(cases->vals[c], "name")->str;
        const char *yaml = tfc_node_get(cases->vals[c], "yaml")->str;
        char key[160];
        snprintf(key, sizeof key, "%s/w", name);
        tfc_st_tensor_to_f32(tfc_st_find(f, key), want);
        tfc_optimizer_config cfg = config_of(yaml);
        tfc_optimizer o;
        CU_ASSERT_EQUAL_FATAL(tfc_optimizer_init(&o, &cfg, be, N, &err), TFC_OK);
        covered[cfg.type] = 1;
        float w[64];
        memcpy(w, w0, sizeof(float) * (size_t)N);
        double worst = 0;
        for (int t = 0; t < T; t++) {
            tfc_optimizer_step(&o, t, cfg.learning_rate, 1, 0, w, g + t * N);
            for (int i = 0; i < N; i++) {
                double e = fabs(w[i] - want[t * N + i]) / (1e-3 + fabs(want[t * N + i]));
                worst = e > worst ? e : worst;
            }
        }
        if (worst > 1e-5) printf("\n%s (%s): weights off by %.3g\n", name, yaml, worst);
        CU_ASSERT(worst <= 1e-5);
        /* keras.optimizers.serialize's form of the same optimizer: the same updates */
        tfc_optimizer_config sc = config_of(tfc_node_get(cases->vals[c], "serialized")->str);
        tfc_optimizer so;
        CU_ASSERT_EQUAL(sc.type, cfg.type);
        CU_ASSERT_EQUAL_FATAL(tfc_optimizer_init(&so, &sc, be, N, &err), TFC_OK);
        float ws[64];
        memcpy(ws, w0, sizeof(float) * (size_t)N);
        for (int t = 0; t < T; t++)
            tfc_optimizer_step(&so, t, sc.learning_rate, 1, 0, ws, g + t * N);
        const int same = memcmp(w, ws, sizeof(float) * (size_t)N) == 0;
        if (!same) printf("\n%s: serialized form differs\n", name);
        CU_ASSERT(same);
        tfc_optimizer_release(&so);
        for (int k = 0; k < 3; k++) {
            if (!o.slot_name[k]) continue;
            snprintf(key, sizeof key, "%s/slot:%s", name, o.slot_name[k]);
            const tfc_st_tensor *st = tfc_st_find(f, key);
            CU_ASSERT_PTR_NOT_NULL(st);
            if (!st) continue;
            float ref[64];
            tfc_st_tensor_to_f32(st, ref);
            double bad = 0;
            for (int i = 0; i < N; i++)
                bad = fmax(bad, fabs(o.slot[k][i] - ref[i]) / (1e-3 + fabs(ref[i])));
            if (bad > 2e-5) printf("\n%s: slot %s off by %.3g\n", name, o.slot_name[k], bad);
            CU_ASSERT(bad <= 2e-5);
            slots_checked++;
        }
        snprintf(key, sizeof key, "%s/slot:u_product", name);
        const tfc_st_tensor *up = tfc_st_find(f, key);
        CU_ASSERT((up != NULL) == (cfg.type == TFC_OPTIMIZER_NADAM));
        if (up) {
            float ref;
            tfc_st_tensor_to_f32(up, &ref);
            CU_ASSERT(o.u_iter == T && fabsf(o.u_product - ref) <= 1e-6f * fabsf(ref));
        }
        tfc_optimizer_release(&o);
    }
    for (int t = 0; t < TFC_OPTIMIZER_COUNT; t++) {
        if (!covered[t]) printf("\noptimizer %s has no Keras case\n", tfc_optimizer_names[t]);
        CU_ASSERT(covered[t]);
        tested_optimizer[t] |= covered[t];
    }
    CU_ASSERT(slots_checked >= 30);
    tfc_backend_free(be);
    free(g);
    free(want);
    tfc_doc_free(doc);
    tfc_st_close(f);
}

/* The per-variable rules (lamb, adafactor, muon) against Keras over six variables of ranks 1
 * to 3 at once (tests/ref/optimizers/optimizer_vars.safetensors): the table of variables
 * folds each Keras shape over its last two axes and marks the rank-2 ones, as
 * tfc_model_optim_vars does, and names them by Keras path (muon's exclusions); after each
 * update the weights, and after the last every slot in tfc's layout, must be Keras's. Then
 * the same updates over a large arena on 1 and 2 threads must agree bit for bit. */
static void test_keras_optimizer_vars(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open("tests/ref/optimizers/optimizer_vars.safetensors", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    const int T = atoi(tfc_st_meta(f, "T")), N = atoi(tfc_st_meta(f, "N"));
    const char *json = tfc_st_meta(f, "cases"), *shapes_json = tfc_st_meta(f, "shapes");
    const char *paths_json = tfc_st_meta(f, "paths");
    CU_ASSERT_FATAL(T > 0 && N > 0 && N <= 128 && json && shapes_json && paths_json);
    tfc_doc *doc = tfc_doc_load_string(json, strlen(json), "cases", &err);
    tfc_doc *sdoc = tfc_doc_load_string(shapes_json, strlen(shapes_json), "shapes", &err);
    tfc_doc *pdoc = tfc_doc_load_string(paths_json, strlen(paths_json), "paths", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sdoc);
    CU_ASSERT_PTR_NOT_NULL_FATAL(pdoc);
    const tfc_node *cases = tfc_doc_root(doc), *shapes = tfc_doc_root(sdoc);
    tfc_optim_var vars[16];
    const char *paths[16];
    int nvars = shapes->n, folded = 0;
    CU_ASSERT_FATAL(nvars <= 16 && tfc_doc_root(pdoc)->n == nvars);
    for (int k = 0; k < nvars; k++) paths[k] = tfc_doc_root(pdoc)->vals[k]->str;
    int64_t off = 0;
    for (int k = 0; k < nvars; k++) {
        const tfc_node *sh = shapes->vals[k];
        int64_t numel = 1, dims[8];
        for (int a = 0; a < sh->n; a++) numel *= dims[a] = atoll(sh->vals[a]->str);
        int fold = sh->n >= 2;
        vars[k] = (tfc_optim_var){off, numel, fold ? dims[sh->n - 2] : 0,
                                  fold ? dims[sh->n - 1] : 0, sh->n == 2};
        folded += fold;
        off += numel;
    }
    CU_ASSERT_FATAL(off == N && folded >= 3);
    float w0[128], w[128], ref[128];
    float *g = malloc(sizeof(float) * (size_t)(T * N));
    float *want = malloc(sizeof(float) * (size_t)(T * N));
    tfc_st_tensor_to_f32(tfc_st_find(f, "w0"), w0);
    tfc_st_tensor_to_f32(tfc_st_find(f, "g"), g);
    tfc_backend *be = tfc_cpu_backend_create(1);
    int covered[TFC_OPTIMIZER_COUNT] = {0};
    for (int c = 0; c < cases->n; c++) {
        const char *name = tfc_node_get(cases->vals[c], "name")->str;
        const char *yaml = tfc_node_get(cases->vals[c], "yaml")->str;
        char key[160];
        snprintf(key, sizeof key, "%s/w", name);
        tfc_st_tensor_to_f32(tfc_st_find(f, key), want);
        tfc_optimizer_config cfg = config_of(yaml);
        tfc_optimizer o;
        CU_ASSERT_EQUAL_FATAL(tfc_optimizer_init(&o, &cfg, be, N, &err), TFC_OK);
        CU_ASSERT_EQUAL_FATAL(tfc_optimizer_set_vars(&o, vars, nvars, paths, &err), TFC_OK);
        covered[cfg.type] = 1;
        memcpy(w, w0, sizeof(float) * (size_t)N);
        double worst = 0;
        for (int t = 0; t < T; t++) {
            tfc_optimizer_step(&o, t, cfg.learning_rate, 1, 0, w, g + t * N);
            for (int i = 0; i < N; i++)
                worst = fmax(worst, fabs(w[i] - want[t * N + i]) / (1e-3 + fabs(want[t * N + i])));
        }
        if (worst > 1e-5) printf("\n%s (%s): weights off by %.3g\n", name, yaml, worst);
        CU_ASSERT(worst <= 1e-5);
        for (int k = 0; k < 3; k++) {
            if (!o.slot_name[k]) continue;
            snprintf(key, sizeof key, "%s/slot:%s", name, o.slot_name[k]);
            const tfc_st_tensor *st = tfc_st_find(f, key);
            CU_ASSERT_PTR_NOT_NULL(st);
            if (!st) continue;
            tfc_st_tensor_to_f32(st, ref);
            double bad = 0;
            for (int i = 0; i < N; i++)
                bad = fmax(bad, fabs(o.slot[k][i] - ref[i]) / (1e-3 + fabs(ref[i])));
            if (bad > 2e-5) printf("\n%s: slot %s off by %.3g\n", name, o.slot_name[k], bad);
            CU_ASSERT(bad <= 2e-5);
        }
        tfc_optimizer_release(&o);
    }
    CU_ASSERT(covered[TFC_OPTIMIZER_LAMB] && covered[TFC_OPTIMIZER_ADAFACTOR] &&
              covered[TFC_OPTIMIZER_MUON]);
    /* A table that does not tile the arena is refused */
    tfc_optimizer_config cfg = config_of("{type: lamb}");
    tfc_optimizer o;
    CU_ASSERT_EQUAL_FATAL(tfc_optimizer_init(&o, &cfg, be, N, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_optimizer_set_vars(&o, vars + 1, nvars - 1, NULL, &err), TFC_ERR_USAGE);
    tfc_optimizer_release(&o);
    tfc_backend_free(be);

    /* Adafactor where Keras's v underflows: a row and a column without gradient leave v 0
     * at their crossing, and Keras's 0 / sqrt(0) makes the whole variable NaN; tfc's u is 0
     * there, the weight stays, and the rest moves */
    {
        tfc_backend *b1 = tfc_cpu_backend_create(1);
        cfg = config_of("{type: adafactor, learning_rate: 0.01}");
        tfc_optim_var one = {0, 12, 4, 3, 1};
        float kw[12], kg[12];
        for (int i = 0; i < 12; i++) kw[i] = 0.1f, kg[i] = i < 3 || i % 3 == 0 ? 0 : 0.5f + i;
        CU_ASSERT_EQUAL_FATAL(tfc_optimizer_init(&o, &cfg, b1, 12, &err), TFC_OK);
        CU_ASSERT_EQUAL_FATAL(tfc_optimizer_set_vars(&o, &one, 1, NULL, &err), TFC_OK);
        tfc_optimizer_step(&o, 0, cfg.learning_rate, 1, 0, kw, kg);
        int finite = 1;
        for (int i = 0; i < 12; i++) finite &= isfinite(kw[i]);
        CU_ASSERT(finite && kw[0] == 0.1f && kw[4] < 0.1f);
        tfc_optimizer_release(&o);
        tfc_backend_free(b1);
    }

    /* Threads: two variables of 300 x 257 and 70001 floats, three updates. Muon's
     * Newton-Schulz products are library GEMMs, cut into 4 blocks on both thread counts
     * (tfc_cpu_gemm_blocks_force): cut by the threads, their bits change with the count on
     * AVX2 (oneDNN's kernels there) */
    const int64_t big = 300 * 257 + 70001;
    tfc_optim_var bv[2] = {{0, 300 * 257, 300, 257, 1}, {300 * 257, 70001, 0, 0, 0}};
    float *bw[2], *bg = malloc(sizeof(float) * (size_t)big);
    for (int64_t i = 0; i < big; i++) bg[i] = (float)sin((double)i * 0.37) * (1 + i % 7);
    static const char *const kinds[] = {"{type: lamb, weight_decay: 0.01}",
                                        "{type: adafactor, learning_rate: 0.01}",
                                        "{type: muon, learning_rate: 0.01}"};
    for (int k = 0; k < 3; k++) {
        cfg = config_of(kinds[k]);
        tfc_cpu_gemm_blocks_force(k == 2 ? 4 : 0);
        for (int th = 0; th < 2; th++) {
            tfc_backend *b = tfc_cpu_backend_create(th + 1);
            bw[th] = malloc(sizeof(float) * (size_t)big);
            for (int64_t i = 0; i < big; i++) bw[th][i] = (float)cos((double)i * 0.11);
            CU_ASSERT_EQUAL_FATAL(tfc_optimizer_init(&o, &cfg, b, big, &err), TFC_OK);
            CU_ASSERT_EQUAL_FATAL(tfc_optimizer_set_vars(&o, bv, 2, NULL, &err), TFC_OK);
            for (int t = 0; t < 3; t++)
                tfc_optimizer_step(&o, t, cfg.learning_rate, 1, 0, bw[th], bg);
            tfc_optimizer_release(&o);
            tfc_backend_free(b);
        }
        tfc_cpu_gemm_blocks_force(0);
        CU_ASSERT(memcmp(bw[0], bw[1], sizeof(float) * (size_t)big) == 0);
        CU_ASSERT(bw[0][5] != (float)cos(5 * 0.11)); /* the weights moved */
        int finite = 1;
        for (int64_t i = 0; i < big; i++) finite &= isfinite(bw[0][i]);
        CU_ASSERT(finite);
        free(bw[0]);
        free(bw[1]);
    }
    free(bg);
    free(g);
    free(want);
    tfc_doc_free(pdoc);
    tfc_doc_free(sdoc);
    tfc_doc_free(doc);
    tfc_st_close(f);
}

static void test_optimizer_registry(void)
{
    /* Every registered optimizer has a case above. Run alone, this test runs those cases
     * itself, so the answer does not depend on the order of the suite. */
    static void (*const cases[])(void) = {test_sgd,     test_adam,    test_adamw,
                                          test_rmsprop, test_adagrad, test_keras_optimizers};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) cases[i]();
    for (int t = 0; t < TFC_OPTIMIZER_COUNT; t++) {
        CU_ASSERT_PTR_NOT_NULL(tfc_optimizer_fields((tfc_optimizer_type)t));
        if (!tested_optimizer[t]) printf("\noptimizer %s has no test\n", tfc_optimizer_names[t]);
        CU_ASSERT(tested_optimizer[t]);
    }
    CU_ASSERT_PTR_NULL(tfc_optimizer_names[TFC_OPTIMIZER_COUNT]);
}

static void expect_config_error(const char *yaml, int policy, const char *needle)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_doc *d = tfc_doc_load_string(yaml, strlen(yaml), "x.yaml", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    tfc_optimizer_config oc;
    tfc_lr_policy lp;
    tfc_status s = policy ? tfc_lr_policy_read(tfc_doc_root(d), "lr_policy", &lp, &err)
                          : tfc_optimizer_config_read(tfc_doc_root(d), "optimizer", &oc, &err);
    CU_ASSERT_EQUAL(s, TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, needle));
    if (!strstr(err.text, needle)) printf("\nwanted \"%s\" in:\n%s", needle, err.text);
    tfc_doc_free(d);
}

static void test_optimizer_errors(void)
{
    tfc_optimizer_config k = config_of("RMSprop");
    CU_ASSERT_EQUAL(k.type, TFC_OPTIMIZER_RMSPROP);
    k = config_of("{type: ScheduleFreeAdamW, learning_rate: 0.5}");
    CU_ASSERT(k.type == TFC_OPTIMIZER_SCHEDULE_FREE_ADAMW && k.learning_rate == 0.5);
    k = config_of("{class_name: SGD, config: {name: SGD, learning_rate: 0.5, momentum: 0.9}}");
    CU_ASSERT(k.type == TFC_OPTIMIZER_SGD && k.learning_rate == 0.5 && k.momentum == 0.9);
    expect_config_error("{type: adamm}", 0,
                        "x.yaml:1:8: error: optimizer.type: unknown value \"adamm\"; did you "
                        "mean \"adam\"?");
    expect_config_error("{type: adam, momentum: 0.9}", 0,
                        "optimizer.momentum: unknown key 'momentum' (known keys: type, "
                        "learning_rate, beta_1, beta_2, epsilon, amsgrad, weight_decay, name, "
                        "clipvalue)");
    /* Keras's class names, in any case, and its serialized form's keys */
    expect_config_error("{type: Adamm}", 0, "optimizer.type: unknown value \"Adamm\"");
    expect_config_error("{class_name: Adam, config: {learning_rate: 0.1}, extra: 1}", 0,
                        "unknown key 'extra' in a serialized optimizer");
    expect_config_error("{class_name: Adam, config: {momentum: 0.9}}", 0,
                        "optimizer.momentum: unknown key 'momentum'");
    /* Keras's own refusals: Lion's beta_1 of 0, FTRL's positive learning_rate_power */
    expect_config_error("{type: lion,\n beta_1: 0}", 0,
                        "x.yaml:2:10: error: optimizer.beta_1: lion's beta_1 must be in (0, 1]");
    expect_config_error("{type: ftrl, learning_rate_power: 0.5}", 0,
                        "optimizer.learning_rate_power: expected a number in [-1e+30, 0]");
    expect_config_error("{type: ftrl, l1_regularization_strength: -1}", 0,
                        "optimizer.l1_regularization_strength: expected a number in [0,");
    expect_config_error("{type: schedule_free_adamw}", 0,
                        "optimizer.type: unknown value \"schedule_free_adamw\"");
    /* muon's list of patterns and its rms_rate */
    expect_config_error("{type: muon, exclude_layers: [\"(out\"]}", 0,
                        "x.yaml:1:31: error: optimizer.exclude_layers: expected a regular "
                        "expression");
    expect_config_error("{type: muon, exclude_layers: out}", 0,
                        "optimizer.exclude_layers: expected a list of at most 16");
    expect_config_error("{type: muon, rms_rate: -1}", 0,
                        "optimizer.rms_rate: expected a number in [0, 1e+30] or null");
    /* The CPU-first types on a GPU backend (a CPU one marked as a device here): refused,
     * naming the type; the others not. */
    tfc_backend *be = tfc_cpu_backend_create(1);
    const int device = be->device;
    be->device = 0;
    tfc_optimizer o;
    for (int t = 0; t < TFC_OPTIMIZER_COUNT; t++) {
        tfc_error err;
        tfc_error_clear(&err);
        tfc_optimizer_config c = {.type = t, .learning_rate = 0.01};
        tfc_status st = tfc_optimizer_init(&o, &c, be, 4, &err);
        CU_ASSERT_EQUAL(st, tfc_optimizer_cpu_first((tfc_optimizer_type)t) ? TFC_ERR_CONFIG
                                                                             : TFC_OK);
        if (st) {
            char want[96];
            snprintf(want, sizeof want, "optimizer %s has %s on", tfc_optimizer_names[t],
                     t >= TFC_OPTIMIZER_LAMB ? "no kernel" : "not run under make test-gpu");
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, want));
        } else {
            tfc_optimizer_release(&o);
        }
    }
    CU_ASSERT(tfc_optimizer_cpu_first(TFC_OPTIMIZER_LION) &&
              !tfc_optimizer_cpu_first(TFC_OPTIMIZER_ADAM));
    be->device = device;
    tfc_backend_free(be);
    expect_config_error("{type: sgd, learning_rat: 0.1}", 0,
                        "optimizer.learning_rat: unknown key 'learning_rat'; did you mean "
                        "'learning_rate'?");
    expect_config_error("{type: sgd, momentum: 1.5}", 0,
                        "optimizer.momentum: expected a number in [0, 1], found \"1.5\"");
    expect_config_error("[adam]", 0, "found a sequence");
}

/* ---- learning-rate policies ---------------------------------------------------------------- */

static int tested_policy[TFC_LR_COUNT];

static double lr_of(const char *yaml, int64_t iter)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_doc *d = tfc_doc_load_string(yaml, strlen(yaml), "lr.yaml", &err);
    tfc_lr_policy p;
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL_FATAL(tfc_lr_policy_read(tfc_doc_root(d), "lr_policy", &p, &err), TFC_OK);
    tfc_doc_free(d);
    tested_policy[p.type] = 1;
    return tfc_lr_at(&p, 0.1, iter, 100);
}

/* Keras 3.15's own schedules (tests/ref/keras_schedules.py): each policy under Keras's
 * name gives the rate Keras's schedule of initial_learning_rate 0.1 gives, at every step
 * from 0 to S - 1, to 2e-6 relative to the rate + 1e-3 (Keras computes in float32: its cos
 * near pi loses digits). */
static void keras_schedules(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_st_file *f = tfc_st_open("tests/ref/optimizers/schedules.safetensors", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    const int S = atoi(tfc_st_meta(f, "S"));
    const char *json = tfc_st_meta(f, "cases");
    CU_ASSERT_FATAL(S > 100 && S <= 1000 && json);
    tfc_doc *doc = tfc_doc_load_string(json, strlen(json), "cases", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
    const tfc_node *cases = tfc_doc_root(doc);
    float *want = malloc(sizeof(float) * (size_t)S);
    for (int c = 0; c < cases->n; c++) {
        const char *name = tfc_node_get(cases->vals[c], "name")->str;
        const char *yaml = tfc_node_get(cases->vals[c], "yaml")->str;
        tfc_st_tensor_to_f32(tfc_st_find(f, name), want);
        double worst = 0;
        for (int t = 0; t < S; t++)
            worst = fmax(worst, fabs(lr_of(yaml, t) - want[t]) / (fabs(want[t]) + 1e-3));
        if (worst > 2e-6) printf("\n%s (%s): off by %.3g\n", name, yaml, worst);
        CU_ASSERT(worst <= 2e-6);
    }
    CU_ASSERT(cases->n >= 15);
    free(want);
    tfc_doc_free(doc);
    tfc_st_close(f);
}

static void test_lr_policies(void)
{
    keras_schedules();
    CLOSE(lr_of("fixed", 0), 0.1, 1e-12);
    CLOSE(lr_of("{type: fixed}", 99), 0.1, 1e-12);
    /* step: 0.1 * 0.5 ^ floor(iter / 10) */
    const char *step = "{type: step, step_size: 10, gamma: 0.5}";
    CLOSE(lr_of(step, 0), 0.1, 1e-12);
    CLOSE(lr_of(step, 9), 0.1, 1e-12);
    CLOSE(lr_of(step, 10), 0.05, 1e-12);
    CLOSE(lr_of(step, 25), 0.025, 1e-12);
    CLOSE(lr_of("{type: step, step_size: 10}", 10), 0.01, 1e-12); /* gamma 0.1 */
    /* multistep: gamma to the number of steps reached */
    const char *ms = "{type: multistep, steps: [5, 8], gamma: 0.1}";
    CLOSE(lr_of(ms, 4), 0.1, 1e-12);
    CLOSE(lr_of(ms, 5), 0.01, 1e-12);
    CLOSE(lr_of(ms, 7), 0.01, 1e-12);
    CLOSE(lr_of(ms, 8), 0.001, 1e-12);
    /* exp: 0.1 * 0.9^2 = 0.081 */
    CLOSE(lr_of("{type: exp, gamma: 0.9}", 2), 0.081, 1e-12);
    /* inv: 0.1 * (1 + 0.1 * 30)^-0.5 = 0.05 */
    CLOSE(lr_of("{type: inv, gamma: 0.1, power: 0.5}", 30), 0.05, 1e-12);
    /* poly: 0.1 * (1 - 50/100)^2 = 0.025; the solver's max_iter (100) by default */
    CLOSE(lr_of("{type: poly, power: 2}", 50), 0.025, 1e-12);
    CLOSE(lr_of("{type: poly, power: 2}", 100), 0.0, 1e-12);
    CLOSE(lr_of("{type: poly, power: 1, max_iter: 200}", 50), 0.075, 1e-12);
    /* cosine: 0.1 * (0.9 * 0.5 (1 + cos(pi/2)) + 0.1) = 0.055; then 0.01 and constant */
    const char *cos = "{type: cosine, decay_steps: 100, alpha: 0.1}";
    CLOSE(lr_of(cos, 0), 0.1, 1e-12);
    CLOSE(lr_of(cos, 50), 0.055, 1e-12);
    CLOSE(lr_of(cos, 100), 0.01, 1e-12);
    CLOSE(lr_of(cos, 150), 0.01, 1e-12);
    CLOSE(lr_of("cosine", 50), 0.05, 1e-12);
    /* Warm-up: times min(1, (iter + 1) / 4) */
    const char *wu = "{type: fixed, warmup_iters: 4}";
    CLOSE(lr_of(wu, 0), 0.025, 1e-12);
    CLOSE(lr_of(wu, 1), 0.05, 1e-12);
    CLOSE(lr_of(wu, 3), 0.1, 1e-12);
    CLOSE(lr_of(wu, 10), 0.1, 1e-12);
    CLOSE(lr_of("{type: step, step_size: 2, gamma: 0.5, warmup_iters: 4}", 2), 0.0375, 1e-12);
    /* plateau: the rate passed in (its state's, test_callbacks), with warm-up */
    CLOSE(lr_of("{type: plateau, warmup_iters: 4}", 1), 0.05, 1e-12);
    CLOSE(lr_of("plateau", 50), 0.1, 1e-12);
    for (int t = 0; t < TFC_LR_COUNT; t++) {
        CU_ASSERT_PTR_NOT_NULL(tfc_lr_policy_fields((tfc_lr_type)t));
        if (!tested_policy[t]) printf("\nlr policy %s has no test\n", tfc_lr_policy_names[t]);
        CU_ASSERT(tested_policy[t]);
    }
}

static void test_lr_errors(void)
{
    expect_config_error("{type: step}", 1, "lr_policy.step_size: missing required key 'step_size'");
    expect_config_error("{type: fixed, gamma: 0.1}", 1,
                        "lr_policy.gamma: unknown key 'gamma' (known keys: type, warmup_iters)");
    expect_config_error("{type: multistep, steps: [10, 5]}", 1,
                        "x.yaml:1:31: error: lr_policy.steps: steps must increase: 5 follows 10");
    expect_config_error("{type: cosin}", 1, "did you mean \"cosine\"?");
    /* Python's spelling of a schedule: how YAML writes it */
    expect_config_error("CosineDecay(0.001, 1000)", 1,
                        "x.yaml:1:1: error: lr_policy: \"CosineDecay(0.001, 1000)\" is a Python "
                        "call: write {type: CosineDecay, ...}, the arguments by name");
    expect_config_error("keras.optimizers.schedules.ExponentialDecay", 1,
                        "is Python: write ExponentialDecay");
    expect_config_error("Adam(learning_rate=0.001)", 0,
                        "optimizer: \"Adam(learning_rate=0.001)\" is a Python call: write adam, "
                        "and the arguments by name in a mapping where this key takes one, "
                        "{type: adam, ...}");
    expect_config_error("keras.optimizers.RMSprop()", 0, "is Python; write rmsprop (tfc's name, "
                        "without the call)");
    expect_config_error("{type: piecewise_constant_decay, boundaries: [10, 20], values: [1, 2]}",
                        1, "lr_policy.values: expected 3 values, one more than the 2 "
                           "boundaries; found 2");
    expect_config_error("{type: PiecewiseConstantDecay, boundaries: [10, 10], values: [1, 2, 3]}",
                        1, "lr_policy.boundaries: boundaries must increase: 10 follows 10");
    expect_config_error("{type: ExponentialDecay, initial_learning_rate: 0.1, decay_steps: 5, "
                        "decay_rate: 0.5}", 1, "optimizer's learning_rate");
    expect_config_error("{type: exponential_decay, decay_steps: 0, decay_rate: 0.5}", 1,
                        "lr_policy.decay_steps: expected an integer in [1,");
    expect_config_error("{type: CosineDecay, warmup_steps: 10}", 1,
                        "lr_policy.warmup_steps: warmup_steps climbs to warmup_target, which "
                        "is not given");
    expect_config_error("{type: CosineDecay, warmup_target: fast}", 1,
                        "lr_policy.warmup_target");
    expect_config_error("{type: step, step_siz: 3}", 1, "did you mean 'step_size'?");
}

/* ---- solver files and --set ------------------------------------------------------------------- */

static const char *solver_yaml =
    "model:\n"
    "  input: {shape: [4]}\n"
    "  layers:\n"
    "    - Dense: {units: 6, activation: relu}\n"
    "    - Dropout: {rate: 0.5}\n"
    "    - Dense: {units: 3}\n"
    "  metrics: [accuracy]\n"
    "data:\n"
    "  train:\n"
    "    source: {type: npy, features: x.npy, labels: y.npy}\n"
    "    pipeline:\n"
    "      - shuffle: {buffer_size: 10}\n"
    "      - repeat: {}\n"
    "      - batch: {batch_size: 8}\n"
    "optimizer: {type: adam, learning_rate: 0.001}\n"
    "max_iter: 10\n";

static tfc_solver *load_with(const char *yaml, const char **sets, int nsets, tfc_error *err)
{
    tfc_solver_options o = {0};
    o.sets = sets;
    o.nsets = nsets;
    tfc_error_clear(err);
    return tfc_solver_from_string(yaml, tfc_test_path("solver.yaml"), &o, err);
}

/* The scalar text at a dotted path of the resolved configuration (no indices). */
static const char *resolved_at(const tfc_solver *s, const char *const *path, int n)
{
    const tfc_node *node = tfc_solver_resolved(s);
    for (int i = 0; i < n && node; i++) {
        char *end;
        long idx = strtol(path[i], &end, 10);
        if (!*end && node->kind == TFC_NODE_SEQ) node = idx < node->n ? node->vals[idx] : NULL;
        else node = tfc_node_get(node, path[i]);
    }
    return node && node->kind == TFC_NODE_SCALAR ? node->str : NULL;
}

/* A Keras schedule as the optimizer's learning_rate, in tfc's layer-like form and in Keras's
 * serialized one: the solver's policy and base rate; and what is refused, where. */
static void test_schedule_as_learning_rate(void)
{
    tfc_error err;
    const char *layer_form[] = {"optimizer={type: sgd, learning_rate: {ExponentialDecay: "
                                "{initial_learning_rate: 0.2, decay_steps: 30, "
                                "decay_rate: 0.5}}}"};
    tfc_solver *s = load_with(solver_yaml, layer_form, 1, &err);
    if (!s) printf("\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    const tfc_solver_config *c = tfc_solver_get_config(s);
    CU_ASSERT_EQUAL(c->lr_policy.type, TFC_LR_EXPONENTIAL_DECAY);
    CLOSE(c->optimizer.learning_rate, 0.2, 1e-15);
    CLOSE(tfc_lr_at(&c->lr_policy, c->optimizer.learning_rate, 45, 100), 0.2 * pow(0.5, 1.5),
          1e-12);
    tfc_solver_free(s);
    const char *serialized[] = {
        "optimizer={type: adam, learning_rate: {module: keras.optimizers.schedules, "
        "class_name: PiecewiseConstantDecay, config: {boundaries: [10], values: [0.01, 0.001], "
        "name: PiecewiseConstantDecay}, registered_name: null}}"};
    s = load_with(solver_yaml, serialized, 1, &err);
    if (!s) printf("\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    c = tfc_solver_get_config(s);
    CU_ASSERT_EQUAL(c->lr_policy.type, TFC_LR_PIECEWISE_CONSTANT_DECAY);
    CLOSE(tfc_lr_at(&c->lr_policy, c->optimizer.learning_rate, 11, 100), 0.001, 1e-12);
    CLOSE(c->optimizer.learning_rate, 0.01, 1e-15);
    tfc_solver_free(s);
    static const struct {
        const char *set[2], *want;
    } bad[] = {
        {{"optimizer={type: sgd, learning_rate: {CosineDecay: {initial_learning_rate: 0.1, "
          "decay_steps: 50}}}", "lr_policy={type: step, step_size: 5}"},
         "lr_policy: optimizer.learning_rate is a schedule already"},
        {{"optimizer={type: sgd, learning_rate: {ExponentialDecay: {decay_steps: 5, "
          "decay_rate: 0.5}}}", NULL},
         "optimizer.learning_rate.initial_learning_rate: missing required key"},
        {{"optimizer={type: sgd, learning_rate: {step: {step_size: 5}}}", NULL},
         "'step' is not one of Keras's schedules"},
        {{"optimizer={type: sgd, learning_rate: {ExponentialDecay: {initial_learning_rate: 0.1, "
          "decay_steps: 5, decay_rat: 0.5}}}", NULL},
         "optimizer.learning_rate.decay_rat: unknown key 'decay_rat'; did you mean"},
        {{"optimizer={type: sgd, learning_rate: {class_name: ExponentialDecay, config: {}, "
          "modul: x}}", NULL},
         "unknown key 'modul' in a serialized schedule"},
        {{"optimizer={type: sgd, learning_rate: [0.1]}", NULL},
         "optimizer.learning_rate: expected a number or a Keras schedule"},
        {{"optimizer={type: sgd, learning_rate: -1}", NULL},
         "optimizer.learning_rate: expected a number in [0, 1e+30]"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        const char *set[2] = {bad[k].set[0], bad[k].set[1]};
        s = load_with(solver_yaml, set, set[1] ? 2 : 1, &err);
        CU_ASSERT_PTR_NULL(s);
        if (s) tfc_solver_free(s);
        if (!strstr(err.text, bad[k].want)) printf("\nwanted \"%s\" in:\n%s", bad[k].want,
                                                   err.text);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, bad[k].want));
    }
}

static void test_solver_defaults(void)
{
    tfc_error err;
    tfc_solver *s = load_with(solver_yaml, NULL, 0, &err);
    if (!s) printf("\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    const tfc_solver_config *c = tfc_solver_get_config(s);
    CU_ASSERT_EQUAL(c->max_iter, 10);
    CU_ASSERT_EQUAL(c->iter_size, 1);
    CU_ASSERT_EQUAL(c->display, 100);
    CU_ASSERT_EQUAL(c->seed, 1);
    CU_ASSERT_EQUAL(c->snapshot_keep, 3);
    CU_ASSERT_STRING_EQUAL(c->snapshot_prefix, "snapshots/solver");
    CU_ASSERT_EQUAL(c->optimizer.type, TFC_OPTIMIZER_ADAM);
    CU_ASSERT_EQUAL(c->lr_policy.type, TFC_LR_FIXED);
    CU_ASSERT_PTR_NULL(c->test);
    CU_ASSERT_EQUAL(c->deterministic, 0);
    CU_ASSERT_EQUAL(c->tf32, 0);
    CU_ASSERT_EQUAL(c->gpu_memory_limit, 0.0);
    CU_ASSERT_STRING_EQUAL(tfc_model_name(tfc_solver_model(s)), "solver");
    /* The resolved configuration names the model and the absolute base folder. */
    CU_ASSERT_STRING_EQUAL(resolved_at(s, (const char *[]){"model", "name"}, 2), "solver");
    CU_ASSERT_STRING_EQUAL(resolved_at(s, (const char *[]){"base_dir"}, 1), c->base_dir);
    CU_ASSERT_EQUAL(c->base_dir[0], '/');
    uint64_t h = tfc_solver_config_hash(s), mh = tfc_solver_model_hash(s);
    tfc_solver_free(s);
    /* Hashes: stable for the same text, different when a key changes. */
    s = load_with(solver_yaml, NULL, 0, &err);
    CU_ASSERT_EQUAL(tfc_solver_config_hash(s), h);
    tfc_solver_free(s);
    const char *set[] = {"max_iter=11"};
    s = load_with(solver_yaml, set, 1, &err);
    CU_ASSERT_NOT_EQUAL(tfc_solver_config_hash(s), h);
    CU_ASSERT_EQUAL(tfc_solver_model_hash(s), mh);
    tfc_solver_free(s);
    /* the GPU options (applied by tfc_backend_configure; no-ops on the CPU) */
    const char *gset[] = {"deterministic=true", "tf32=true", "gpu_memory_limit=512"};
    s = load_with(solver_yaml, gset, 3, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    c = tfc_solver_get_config(s);
    CU_ASSERT_EQUAL(c->deterministic, 1);
    CU_ASSERT_EQUAL(c->tf32, 1);
    CU_ASSERT_EQUAL(c->gpu_memory_limit, 512.0);
    tfc_solver_free(s);
    const char *bset[] = {"gpu_memory_limit=-1", "deterministic=sometimes"};
    s = load_with(solver_yaml, bset, 2, &err);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_EQUAL(err.code, TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "gpu_memory_limit: expected a number in"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "deterministic: expected"));
    if (!s && !strstr(err.text, "gpu_memory_limit: expected a number in")) printf("\n%s", err.text);
    tfc_solver_free(s);
    const char *mset[] = {"model.layers.1.Dropout.rate=0.25"};
    s = load_with(solver_yaml, mset, 1, &err);
    CU_ASSERT_NOT_EQUAL(tfc_solver_model_hash(s), mh);
    tfc_solver_free(s);
}

static void test_set_overrides(void)
{
    const char *sets[] = {
        "optimizer.learning_rate=0.05",
        "model.layers.1.Dropout.rate=0.3",
        "model.layers[0].Dense.units=8",
        "data.train.pipeline.2.batch.batch_size=64",
        "lr_policy={type: cosine, decay_steps: 100}",
        "snapshot.keep=7",
        "model.metrics.1=loss",
        "weight_decay=5e-4",
        "model.input.shape.0=5",
    };
    tfc_error err;
    tfc_solver *s = load_with(solver_yaml, sets, 9, &err);
    if (!s) printf("\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    const tfc_solver_config *c = tfc_solver_get_config(s);
    CLOSE(c->optimizer.learning_rate, 0.05, 0);
    CU_ASSERT_EQUAL(c->lr_policy.type, TFC_LR_COSINE);
    CU_ASSERT_EQUAL(c->lr_policy.max_iter, 100);
    CU_ASSERT_EQUAL(c->snapshot_keep, 7);
    CLOSE(c->weight_decay, 5e-4, 0);
    CU_ASSERT_STRING_EQUAL(resolved_at(s, (const char *[]){"model", "layers", "1", "Dropout", "rate"}, 5),
                           "0.3");
    CU_ASSERT_STRING_EQUAL(
        resolved_at(s, (const char *[]){"data", "train", "pipeline", "2", "batch", "batch_size"}, 6),
        "64");
    tfc_model *m = tfc_solver_model(s);
    CU_ASSERT_EQUAL(tfc_model_layer(m, 0)->out_shape.dim[0], 8);
    CU_ASSERT_EQUAL(tfc_model_input_shape(m)->dim[0], 5);
    CU_ASSERT_EQUAL(tfc_model_nmetrics(m), 2);
    tfc_solver_free(s);
}

static void expect_set_error(const char *set, const char *needle)
{
    tfc_error err;
    tfc_solver *s = load_with(solver_yaml, &set, 1, &err);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_EQUAL(err.code, TFC_ERR_CONFIG);
    CU_ASSERT_EQUAL(tfc_exit_code(err.code), 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, needle));
    if (!strstr(err.text, needle)) printf("\nwanted \"%s\" in:\n%s", needle, err.text);
    tfc_solver_free(s);
}

static void test_set_errors(void)
{
    expect_set_error("model.layers.9.Dense.units=3",
                     "--set model.layers.9.Dense.units=3: error: model.layers: has 3 items "
                     "(indices 0 to 2); index 9 is out of range");
    expect_set_error("model.layers.1.Dense.units=3",
                     "--set model.layers.1.Dense.units=3: error: model.layers.1: is a 'Dropout' "
                     "entry; it has no key 'Dense'");
    expect_set_error("model.layers.x.Dense.units=3", "model.layers: is a list of 3 items; expected "
                                                     "an index 0 to 2, found 'x'");
    expect_set_error("max_iter.x=3", "--set max_iter.x=3: error: max_iter: is a scalar (\"10\"); "
                                     "it has no key 'x'");
    expect_set_error("optimizer.learning_rate=fast",
                     "--set optimizer.learning_rate=fast:1:1: error: optimizer.learning_rate: "
                     "expected a finite number, found \"fast\"");
    expect_set_error("optimizer.learing_rate=0.1",
                     "--set optimizer.learing_rate=0.1:1:1: error: optimizer.learing_rate: unknown "
                     "key 'learing_rate'; did you mean 'learning_rate'?");
    expect_set_error("optimzer.type=sgd", "unknown key 'optimzer'; did you mean 'optimizer'?");
    expect_set_error("model.layers.0.Dense.units=many",
                     "--set model.layers.0.Dense.units=many:1:1: error: layers[0].Dense.units");
    expect_set_error("max_iter=-4", "--set max_iter=-4:1:1: error: max_iter: expected an integer");
    expect_set_error("noequals", "--set noequals: error: expected KEY=VALUE");
    expect_set_error("a..b=1", "is not a key path");
    expect_set_error("max_iter=[1, 2", "--set max_iter=[1, 2:");
}

static void test_solver_file_errors(void)
{
    const char *bad =
        "model:\n"
        "  input: {shape: [4]}\n"
        "  layers:\n"
        "    - Dense: {units: 3}\n"
        "data: {train: {source: {type: npy, features: x.npy}}}\n"
        "optimiser: {type: adam}\n"
        "max_iter: 0\n"
        "device: tpu\n"
        "lr_policy: {type: step}\n"
        "epochs: 6\n";
    tfc_error err;
    tfc_solver *s = load_with(bad, NULL, 0, &err);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_EQUAL(err.code, TFC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "solver.yaml:6:1: error: optimiser: unknown key "
                                            "'optimiser'; did you mean 'optimizer'?"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "solver.yaml:7:11: error: max_iter: expected an "
                                            "integer in [1, 2147483647], found \"0\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "solver.yaml:8:9: error: device: expected cpu, gpu "
                                            "or gpu:N, found \"tpu\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "lr_policy.step_size: missing required key"));
    /* Keras's epochs: what to write instead, and not as an unknown key too */
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "solver.yaml:10:9: error: epochs: tfc counts "
                                            "updates, as Caffe's solvers do, not Keras's epochs: "
                                            "write max_iter: epochs x ceil("));
    CU_ASSERT_PTR_NULL(strstr(err.text, "unknown key 'epochs'"));
    CU_ASSERT(err.count >= 5); /* every error of the file in one run */
    if (err.count < 5) printf("\n%s", err.text);
    tfc_solver_free(s);
    /* Keras's other fit arguments, and Keras 2's lr: each says where tfc has it */
    static const char *const fit[][2] = {
        {"batch_size: 64", "batch_size: the batch size is a stage of each split's pipeline: "
                           "- batch: {batch_size: 64}"},
        {"validation_split: 0.1", "validation_split: tfc tests on the split data.test"},
        {"validation_data: x", "validation_data: the test split is data.test"},
        {"callbacks: [EarlyStopping]", "callbacks: Keras's callbacks are solver keys: "
                                       "EarlyStopping is early_stopping"},
        {"shuffle: true", "shuffle: shuffling is a stage of the pipeline"},
        {"verbose: 2", "verbose: display: N prints progress every N updates"},
        {"class_weight: {0: 2}", "class_weight: class weights belong to the model's loss"},
        {"initial_epoch: 3", "initial_epoch: tfc-train --resume"},
        {"optimizer: {type: adam, lr: 0.1}", "optimizer.lr: Keras 2's name: write learning_rate"},
        {"optimizer: {type: sgd, decay: 0.001}",
         "optimizer.decay: Keras 2's lr / (1 + decay * iterations), which Keras 3 ignores with a "
         "warning: write the solver's lr_policy: {type: inv, gamma: <decay>, power: 1}"},
    };
    for (size_t i = 0; i < sizeof fit / sizeof *fit; i++) {
        char text[512];
        snprintf(text, sizeof text, "model:\n  input: {shape: [4]}\n  layers:\n"
                 "    - Dense: {units: 3}\ndata: {train: {source: {type: npy, features: x.npy}}}"
                 "\nmax_iter: 1\n%s\n", fit[i][0]);
        s = load_with(text, NULL, 0, &err);
        const int ok = !s && strstr(err.text, "solver.yaml:7:") && strstr(err.text, fit[i][1]) &&
                       !strstr(err.text, "unknown key");
        if (!ok) printf("\nexpected '%s' in:\n%s", fit[i][1], err.text);
        CU_ASSERT(ok);
        tfc_solver_free(s);
    }
    /* A model file that does not exist. */
    s = load_with("model: nothere.yaml\ndata: {train: {}}\nmax_iter: 1\n", NULL, 0, &err);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "solver.yaml:1:8: error: model: cannot read the "
                                            "model file "));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "/nothere.yaml: No such file or directory"));
    tfc_solver_free(s);
}

/* ---- snapshots -------------------------------------------------------------------------------- */

static const char *tiny_model =
    "name: tiny\ninput: {shape: [3]}\nlayers:\n  - Dense: {units: 4, activation: tanh}\n"
    "  - BatchNormalization: {}\n  - Dense: {units: 2}\n";

typedef struct snap_fixture {
    tfc_backend *be;
    tfc_model *m;
    tfc_optimizer o;
} snap_fixture;

static void fixture_open(snap_fixture *f, const char *model_yaml, const char *opt_yaml,
                         uint64_t seed)
{
    tfc_error err;
    tfc_error_clear(&err);
    f->be = tfc_cpu_backend_create(1);
    f->m = tfc_model_from_string(model_yaml, strlen(model_yaml), "tiny.yaml", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f->m);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(f->m, f->be, 4, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_model_init_weights(f->m, seed, &err), TFC_OK);
    tfc_optimizer_config c = config_of(opt_yaml);
    CU_ASSERT_EQUAL_FATAL(tfc_optimizer_init(&f->o, &c, f->be, tfc_model_trainable_count(f->m),
                                             &err), TFC_OK);
    /* Non-trivial slots: a few steps with made-up gradients. */
    float *g = tfc_model_grads(f->m);
    for (int64_t i = 0; i < tfc_model_trainable_count(f->m); i++) g[i] = 0.01f * (float)(i % 7) - 0.02f;
    for (int t = 0; t < 3; t++)
        tfc_optimizer_step(&f->o, t, 0.01, 1, 0, tfc_model_params(f->m), g);
}

static void fixture_close(snap_fixture *f)
{
    tfc_optimizer_release(&f->o);
    tfc_model_free(f->m);
    tfc_backend_free(f->be);
}

static tfc_snapshot_extra extra_of(double *losses, void *pipe)
{
    tfc_snapshot_extra x = {0};
    x.iteration = 30;
    x.elapsed = 12.5;
    x.have_best = 1;
    x.best_value = 0.75;
    x.best_iteration = 20;
    x.window = 4;
    x.losses = losses;
    x.losses_seen = 6;
    x.display[0] = 2;
    x.pipeline = pipe;
    x.pipeline_len = 5;
    return x;
}

static void test_snapshot_roundtrip(void)
{
    snap_fixture a, b;
    fixture_open(&a, tiny_model, "{type: adam}", 1);
    fixture_open(&b, tiny_model, "{type: adam}", 2);
    double losses[4] = {1, 2, 3, 4};
    char pipe[5] = "abcde";
    tfc_snapshot_extra x = extra_of(losses, pipe);
    tfc_snapshot_id id = {"tiny", "adam", 0x1234, 0x5678, 1, NULL};
    tfc_error err;
    tfc_error_clear(&err);
    const char *w = tfc_test_path("snap_iter_30.safetensors"), *st = tfc_test_path("snap_iter_30.state");
    CU_ASSERT_EQUAL_FATAL(tfc_snapshot_write(a.m, &a.o, &id, &x, w, st, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_snapshot_verify(st, &err), TFC_OK);
    tfc_snapshot_extra y = {0};
    y.window = 3; /* a smaller window keeps the newest losses: 6, 5 -> ring of 3 */
    int differs = -1;
    CU_ASSERT_EQUAL_FATAL(tfc_snapshot_read(b.m, &b.o, &id, st, &y, &differs, &err), TFC_OK);
    CU_ASSERT_EQUAL(differs, 0);
    CU_ASSERT_EQUAL(y.iteration, 30);
    CLOSE(y.elapsed, 12.5, 0);
    CU_ASSERT(y.have_best && y.best_value == 0.75 && y.best_iteration == 20);
    CU_ASSERT_EQUAL(y.losses_seen, 6);
    /* losses 4 and 5 (0-based) sat at ring positions 0 and 1 of the old ring (values 1, 2);
     * loss 3 at position 3 (value 4). In a ring of 3: loss j at j % 3. */
    CU_ASSERT(y.losses[3 % 3] == 4 && y.losses[4 % 3] == 1 && y.losses[5 % 3] == 2);
    CU_ASSERT_EQUAL(y.pipeline_len, 5);
    CU_ASSERT(memcmp(y.pipeline, "abcde", 5) == 0);
    CU_ASSERT(y.display[0] == 2);
    /* Weights (BatchNormalization's moving statistics included) and slots are identical. */
    int64_t np = tfc_model_param_count(a.m);
    CU_ASSERT(memcmp(tfc_model_params(a.m), tfc_model_params(b.m), (size_t)np * 4) == 0);
    int64_t nt = tfc_model_trainable_count(a.m);
    CU_ASSERT_EQUAL(a.o.nslots, 2);
    for (int k = 0; k < 2; k++) CU_ASSERT(memcmp(a.o.slot[k], b.o.slot[k], (size_t)nt * 4) == 0);
    free(y.losses);
    free(y.pipeline);
    /* Slots are stored per parameter by Keras's slot names. */
    tfc_st_file *f = tfc_st_open(st, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_PTR_NOT_NULL(tfc_st_find(f, "momentum/dense/kernel"));
    CU_ASSERT_PTR_NOT_NULL(tfc_st_find(f, "velocity/dense_1/bias"));
    CU_ASSERT_PTR_NULL(tfc_st_find(f, "momentum/batch_normalization/moving_mean"));
    CU_ASSERT_STRING_EQUAL(tfc_st_meta(f, "optimizer"), "adam");
    CU_ASSERT_STRING_EQUAL(tfc_st_meta(f, "iteration"), "30");
    tfc_st_close(f);
    /* A different configuration hash resumes, flagged. */
    tfc_snapshot_id id2 = id;
    id2.config_hash = 99;
    y = (tfc_snapshot_extra){.window = 4};
    CU_ASSERT_EQUAL(tfc_snapshot_read(b.m, &b.o, &id2, st, &y, &differs, &err), TFC_OK);
    CU_ASSERT_EQUAL(differs, 1);
    free(y.losses);
    free(y.pipeline);
    fixture_close(&a);
    fixture_close(&b);
}

static void expect_refusal(tfc_model *m, tfc_optimizer *o, const tfc_snapshot_id *id,
                           const char *state, tfc_status code, const char *needle)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_snapshot_extra y = {.window = 4};
    int differs;
    CU_ASSERT_EQUAL(tfc_snapshot_read(m, o, id, state, &y, &differs, &err), code);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, needle));
    if (!strstr(err.text, needle)) printf("\nwanted \"%s\" in:\n%s", needle, err.text);
    free(y.losses);
    free(y.pipeline);
}

static void test_snapshot_refusals(void)
{
    snap_fixture a, sgd, other;
    fixture_open(&a, tiny_model, "{type: adam}", 1);
    fixture_open(&sgd, tiny_model, "{type: sgd, momentum: 0.9}", 1);
    fixture_open(&other, "name: tiny\ninput: {shape: [3]}\nlayers:\n  - Dense: {units: 5}\n",
                 "{type: adam}", 1);
    double losses[4] = {0};
    char pipe[5] = "abcde";
    tfc_snapshot_extra x = extra_of(losses, pipe);
    tfc_snapshot_id id = {"tiny", "adam", 1, 2, 1, NULL};
    tfc_error err;
    tfc_error_clear(&err);
    const char *w = tfc_test_path("ref_iter_30.safetensors"), *st = tfc_test_path("ref_iter_30.state");
    CU_ASSERT_EQUAL_FATAL(tfc_snapshot_write(a.m, &a.o, &id, &x, w, st, &err), TFC_OK);

    tfc_snapshot_id sid = {"tiny", "sgd", 1, 2, 1, NULL};
    expect_refusal(sgd.m, &sgd.o, &sid, st, TFC_ERR_USAGE,
                   "was saved by optimizer 'adam', this run uses 'sgd'");
    tfc_snapshot_id oid = {"tiny", "adam", 1, 3, 1, NULL};
    expect_refusal(other.m, &other.o, &oid, st, TFC_ERR_USAGE, "was saved from a different model");
    tfc_snapshot_id rid = {"tiny", "adam", 1, 2, 2, NULL}; /* the same run on 2 ranks */
    expect_refusal(a.m, &a.o, &rid, st, TFC_ERR_USAGE, "was written by a run of 1 rank, this run has 2");
    /* A weights file exchanged for another one: the state's CRC of it no longer matches. */
    CU_ASSERT_EQUAL(tfc_model_save_weights(other.m, w, &err), TFC_OK);
    expect_refusal(a.m, &a.o, &id, st, TFC_ERR_FORMAT, "does not match its state file");
    /* One flipped byte anywhere in the state: the checksum fails. */
    CU_ASSERT_EQUAL_FATAL(tfc_snapshot_write(a.m, &a.o, &id, &x, w, st, &err), TFC_OK);
    size_t len;
    char *bytes = tfc_test_read(st, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bytes);
    bytes[len - 3] ^= 0x10; /* inside the pipeline blob, the last tensor */
    const char *bad = tfc_test_write("bad_iter_30.state", bytes, (long)len);
    expect_refusal(a.m, &a.o, &id, bad, TFC_ERR_FORMAT, "checksum mismatch");
    CU_ASSERT_EQUAL(tfc_snapshot_verify(bad, &err), TFC_ERR_FORMAT);
    free(bytes);
    /* A weights file is not a state file. */
    expect_refusal(a.m, &a.o, &id, w, TFC_ERR_USAGE, "is not a tfc state file");
    fixture_close(&a);
    fixture_close(&sgd);
    fixture_close(&other);
}

/* ---- snapshot names, rotation and discovery -------------------------------------------------- */

static void test_snapshot_names(void)
{
    char buf[256];
    const char *end = "unset";
    tfc_snapshot_path("run", "snapshots/tiny", 40, TFC_SNAPSHOT_WEIGHTS, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "run/snapshots/tiny_iter_40.safetensors");
    tfc_snapshot_path("run", "snapshots/tiny", 40, TFC_SNAPSHOT_STATE, buf, sizeof buf);
    CU_ASSERT_STRING_EQUAL(buf, "run/snapshots/tiny_iter_40.state");
    CU_ASSERT_EQUAL(tfc_snapshot_parse(buf, "snapshots/tiny", &end), 40);
    CU_ASSERT(end == buf + 3);
    CU_ASSERT_EQUAL(tfc_snapshot_parse("a/b/snapshots/tiny_iter_7.state", "tiny", &end), 7);
    CU_ASSERT(end && !strcmp(end, "/tiny_iter_7.state"));
    CU_ASSERT_EQUAL(tfc_snapshot_parse("snapshots/tiny_iter_0.state", "snapshots/tiny", &end), 0);
    CU_ASSERT_PTR_NULL(end);
    /* Not this prefix's state files. */
    const char *other[] = {"run/old-snapshots/tiny_iter_7.state", "run/snapshots/tiny_iter_7.safetensors",
                           "run/snapshots/tiny_iter_.state",      "run/snapshots/tiny_iter_x7.state",
                           "run/snapshots/tiny_iter_-7.state",    "run/snapshots/tiny_iter_7.state.tmp-a1",
                           "run/snapshots/tinier_iter_7.state",   "_iter_7.state"};
    for (size_t i = 0; i < sizeof other / sizeof *other; i++) {
        CU_ASSERT_EQUAL(tfc_snapshot_parse(other[i], "snapshots/tiny", NULL), -1);
        if (tfc_snapshot_parse(other[i], "snapshots/tiny", NULL) != -1) printf("\n%s\n", other[i]);
    }
}

static int exists_in(const char *dir, const char *name)
{
    char path[1024];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0;
}

/* Empty files RUN/PREFIX_iter_N.safetensors and .state for each N of iters[0..n). */
static void touch_snapshots(const char *run, const char *prefix, const int64_t *iters, int n)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 2; k++) {
            char path[1024];
            tfc_snapshot_path(run, prefix, iters[i], k ? TFC_SNAPSHOT_STATE : TFC_SNAPSHOT_WEIGHTS,
                              path, sizeof path);
            FILE *f = fopen(path, "w");
            CU_ASSERT_PTR_NOT_NULL_FATAL(f);
            fclose(f);
        }
}

static void test_snapshot_rotation(void)
{
    char run[1024], ck[1100];
    snprintf(run, sizeof run, "%s", tfc_test_path("rotation"));
    snprintf(ck, sizeof ck, "%s/ck", run);
    tfc_error err;
    tfc_error_clear(&err);
    tfc_snapshot_set set = {0};
    /* A fresh run makes the snapshot folder. */
    CU_ASSERT_EQUAL_FATAL(tfc_snapshot_set_open(&set, run, "ck/m", -1, &err), TFC_OK);
    CU_ASSERT_EQUAL(set.n, 0);
    tfc_snapshot_set_free(&set);
    /* Resumed at 15: the snapshots up to 15 join the rotation, stale temporaries go. */
    int64_t before[] = {10, 5, 15, 20};
    touch_snapshots(run, "ck/m", before, 4);
    fclose(fopen(tfc_test_path("rotation/ck/.m_iter_25.state.tmp-Ab12Cd"), "w"));
    fclose(fopen(tfc_test_path("rotation/ck/.other.tmp-Ab12Cd"), "w"));
    CU_ASSERT_EQUAL_FATAL(tfc_snapshot_set_open(&set, run, "ck/m", 15, &err), TFC_OK);
    CU_ASSERT_FATAL(set.n == 3);
    CU_ASSERT(set.iters[0] == 5 && set.iters[1] == 10 && set.iters[2] == 15);
    CU_ASSERT(!exists_in(ck, ".m_iter_25.state.tmp-Ab12Cd"));
    CU_ASSERT(exists_in(ck, ".other.tmp-Ab12Cd"));
    /* keep 2: after 25 is durable, 5 and 10 go (both files); 20 is not this run's. */
    int64_t next[] = {25};
    touch_snapshots(run, "ck/m", next, 1);
    tfc_snapshot_set_rotate(&set, 25, 2);
    CU_ASSERT(!exists_in(ck, "m_iter_5.state") && !exists_in(ck, "m_iter_5.safetensors"));
    CU_ASSERT(!exists_in(ck, "m_iter_10.state") && !exists_in(ck, "m_iter_10.safetensors"));
    CU_ASSERT(exists_in(ck, "m_iter_15.state") && exists_in(ck, "m_iter_25.safetensors"));
    CU_ASSERT(exists_in(ck, "m_iter_20.state"));
    /* keep 0: all stay. */
    tfc_snapshot_set_rotate(&set, 30, 0);
    CU_ASSERT(set.n == 3 && exists_in(ck, "m_iter_15.state"));
    tfc_snapshot_set_free(&set);
}

/* A run's config.yaml as tfc-train writes it: the model named. */
static const char *run_config =
    "model:\n"
    "  name: tiny\n"
    "  input: {shape: [4]}\n"
    "  layers:\n"
    "    - Dense: {units: 3}\n"
    "data:\n"
    "  train:\n"
    "    source: {type: npy, features: x.npy, labels: y.npy}\n"
    "    pipeline:\n"
    "      - batch: {batch_size: 8}\n"
    "optimizer: {type: sgd}\n"
    "max_iter: 10\n";

static void test_snapshot_find_newest(void)
{
    char run[1024], state[1200], want[1200], yaml[1024];
    snprintf(run, sizeof run, "%s", tfc_test_path("found"));
    tfc_error err;
    tfc_error_clear(&err);
    /* No config.yaml: the run never started. */
    CU_ASSERT_EQUAL(tfc_snapshot_find_newest(run, state, sizeof state, &err), TFC_OK);
    CU_ASSERT_STRING_EQUAL(state, "");
    CU_ASSERT_EQUAL_FATAL(mkdir(run, 0755), 0);
    CU_ASSERT_EQUAL_FATAL(mkdir(tfc_test_path("found/ck"), 0755), 0);
    CU_ASSERT_EQUAL_FATAL(mkdir(tfc_test_path("found/snapshots"), 0755), 0);
    int64_t iters[] = {3, 12, 7}, elsewhere[] = {99};
    touch_snapshots(run, "ck/m", iters, 3);
    touch_snapshots(run, "snapshots/tiny", elsewhere, 1);
    fclose(fopen(tfc_test_path("found/ck/m_iter_30.safetensors"), "w")); /* no state: incomplete */
    /* The prefix config.yaml records, not snapshots/: the highest N with a state file. */
    snprintf(yaml, sizeof yaml, "%ssnapshot: {prefix: ck/m}\n", run_config);
    tfc_test_write("found/config.yaml", yaml, -1);
    CU_ASSERT_EQUAL(tfc_snapshot_find_newest(run, state, sizeof state, &err), TFC_OK);
    snprintf(want, sizeof want, "%s/ck/m_iter_12.state", run);
    CU_ASSERT_STRING_EQUAL(state, want);
    if (err.count) printf("\n%s", err.text);
    /* Without snapshot.prefix: the default snapshots/<model name>. */
    tfc_test_write("found/config.yaml", run_config, -1);
    CU_ASSERT_EQUAL(tfc_snapshot_find_newest(run, state, sizeof state, &err), TFC_OK);
    snprintf(want, sizeof want, "%s/snapshots/tiny_iter_99.state", run);
    CU_ASSERT_STRING_EQUAL(state, want);
    /* A config.yaml that does not load is its error. */
    tfc_test_write("found/config.yaml", "max_iter: [\n", -1);
    CU_ASSERT_NOT_EQUAL(tfc_snapshot_find_newest(run, state, sizeof state, &err), TFC_OK);
    CU_ASSERT_STRING_EQUAL(state, "");
    CU_ASSERT(err.count > 0);
}

/* ---- log.csv ---------------------------------------------------------------------------------- */

static void test_csv_log(void)
{
    const char *names[] = {"accuracy"};
    const char *path = tfc_test_path("log.csv");
    tfc_error err;
    tfc_error_clear(&err);
    tfc_csv_log *log = tfc_csv_open(path, names, 1, -1, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(log);
    double m = 0.5;
    for (int it = 10; it <= 40; it += 10)
        CU_ASSERT_EQUAL(tfc_csv_row(log, it, it == 20 ? "test" : "train", 1.0 / it, &m, 0.01,
                                    it / 10.0, &err), TFC_OK);
    tfc_csv_close(log);
    char *text = tfc_test_read(path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "iter,phase,loss,accuracy,lr,seconds\n10,train,0.1,0.5,0.01,1.000\n"
                                        "20,test,0.05,0.5,0.01,2.000\n"));
    free(text);
    /* A torn last line (a kill mid-write) is dropped; resuming at 20 drops 30 and 40. */
    FILE *f = fopen(path, "a");
    fputs("50,tra", f);
    fclose(f);
    log = tfc_csv_open(path, names, 1, 20, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(log);
    CU_ASSERT_EQUAL(tfc_csv_row(log, 30, "train", 0.25, &m, 0.01, 3, &err), TFC_OK);
    tfc_csv_close(log);
    text = tfc_test_read(path, NULL);
    CU_ASSERT_STRING_EQUAL(text, "iter,phase,loss,accuracy,lr,seconds\n10,train,0.1,0.5,0.01,1.000\n"
                                 "20,test,0.05,0.5,0.01,2.000\n30,train,0.25,0.5,0.01,3.000\n");
    free(text);
}

/* ---- event files: an independent reader ---------------------------------------------------------- */

/* CRC-32C bit by bit (no table), so the check does not share code with the writer. */
static uint32_t crc32c_bitwise(const unsigned char *p, size_t n)
{
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static uint32_t masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

static uint64_t le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static int varint(const unsigned char **p, const unsigned char *end, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        unsigned char b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 1;
        }
    }
    return 0;
}

typedef struct decoded {
    int n;
    int64_t step[64];
    char tag[64][64];
    float value[64];
    double wall[64];
    char version[64];
    int session_start;
    int64_t start_step;
} decoded;

/* Walks one protobuf message: calls back with (field, wire, pointer, length or value). */
static int decode_message(const unsigned char *p, const unsigned char *end, decoded *d, int level,
                          int64_t step, double wall)
{
    char tag[64] = "";
    float value = NAN;
    int have_value = 0;
    while (p < end) {
        uint64_t key, v = 0;
        if (!varint(&p, end, &key)) return 0;
        int field = (int)(key >> 3), wire = (int)(key & 7);
        const unsigned char *sub = NULL;
        if (wire == 0) {
            if (!varint(&p, end, &v)) return 0;
        } else if (wire == 1) {
            if (end - p < 8) return 0;
            v = le(p, 8);
            p += 8;
        } else if (wire == 5) {
            if (end - p < 4) return 0;
            v = le(p, 4);
            p += 4;
        } else if (wire == 2) {
            if (!varint(&p, end, &v) || (uint64_t)(end - p) < v) return 0;
            sub = p;
            p += v;
        } else {
            return 0;
        }
        if (level == 0) { /* Event */
            if (field == 1 && wire == 1) memcpy(&wall, &v, 8);
            else if (field == 2 && wire == 0) step = (int64_t)v;
            else if (field == 3 && wire == 2) snprintf(d->version, sizeof d->version, "%.*s", (int)v, sub);
            else if (field == 5 && wire == 2) {
                if (!decode_message(sub, sub + v, d, 1, step, wall)) return 0;
            } else if (field == 6 && wire == 2) {
                uint64_t st;
                const unsigned char *q = sub + 1;
                if (v >= 2 && *sub == 0x08 && varint(&q, sub + v, &st) && st == 1) {
                    d->session_start = 1;
                    d->start_step = step;
                }
            }
        } else if (level == 1) { /* Summary: repeated Value */
            if (field == 1 && wire == 2 && !decode_message(sub, sub + v, d, 2, step, wall)) return 0;
        } else { /* Value */
            if (field == 1 && wire == 2) snprintf(tag, sizeof tag, "%.*s", (int)v, sub);
            if (field == 2 && wire == 5) {
                uint32_t bits = (uint32_t)v;
                memcpy(&value, &bits, 4);
                have_value = 1;
            }
        }
    }
    if (level == 2 && have_value && d->n < 64) {
        d->step[d->n] = step;
        d->wall[d->n] = wall;
        snprintf(d->tag[d->n], sizeof d->tag[0], "%s", tag);
        d->value[d->n++] = value;
    }
    return 1;
}

/* Reads a whole event file; returns the number of records, or -1 on a framing error. */
static int decode_file(const char *path, decoded *d)
{
    size_t len;
    unsigned char *b = (unsigned char *)tfc_test_read(path, &len);
    memset(d, 0, sizeof *d);
    if (!b) return -1;
    int records = 0;
    size_t at = 0;
    while (at < len) {
        if (len - at < 16) goto bad;
        uint64_t n = le(b + at, 8);
        if (le(b + at + 8, 4) != masked(crc32c_bitwise(b + at, 8))) goto bad;
        if (len - at - 12 < n + 4) goto bad;
        const unsigned char *data = b + at + 12;
        if (le(data + n, 4) != masked(crc32c_bitwise(data, (size_t)n))) goto bad;
        if (!decode_message(data, data + n, d, 0, 0, 0)) goto bad;
        records++;
        at += 16 + (size_t)n;
    }
    free(b);
    return records;
bad:
    free(b);
    return -1;
}

static void test_crc32c(void)
{
    /* The standard check value of CRC-32C. */
    CU_ASSERT_EQUAL(tfc_crc32c(0, "123456789", 9), 0xE3069283u);
    CU_ASSERT_EQUAL(crc32c_bitwise((const unsigned char *)"123456789", 9), 0xE3069283u);
    /* Incremental use gives the same result. */
    CU_ASSERT_EQUAL(tfc_crc32c(tfc_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
}

static void test_event_file(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    char dir[1100];
    snprintf(dir, sizeof dir, "%s", tfc_test_path("events"));
    mkdir(dir, 0777);
    tfc_events *ev = tfc_events_open(dir, 7, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfc_events_path(ev), "/events.out.tfevents."));
    CU_ASSERT_EQUAL(tfc_events_scalar(ev, 10, "train/loss", 0.5, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_events_scalar(ev, 10, "train/accuracy", 0.875, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_events_scalar(ev, 300000000000ll, "lr", 1e-3, &err), TFC_OK);
    char path[1200];
    snprintf(path, sizeof path, "%s", tfc_events_path(ev));
    tfc_events_close(ev);
    decoded d;
    CU_ASSERT_EQUAL(decode_file(path, &d), 5);
    CU_ASSERT_STRING_EQUAL(d.version, "brain.Event:2");
    CU_ASSERT(d.session_start && d.start_step == 7);
    CU_ASSERT_EQUAL_FATAL(d.n, 3);
    CU_ASSERT_STRING_EQUAL(d.tag[0], "train/loss");
    CU_ASSERT(d.step[0] == 10 && d.value[0] == 0.5f);
    CU_ASSERT_STRING_EQUAL(d.tag[1], "train/accuracy");
    CU_ASSERT(d.value[1] == 0.875f);
    CU_ASSERT(d.step[2] == 300000000000ll && d.value[2] == 1e-3f);
    CU_ASSERT(d.wall[0] > 1.5e9); /* seconds since the epoch */
    /* A damaged byte breaks the framing check. */
    size_t len;
    unsigned char *b = (unsigned char *)tfc_test_read(path, &len);
    b[len - 6] ^= 1;
    const char *broken = tfc_test_write("broken.tfevents", b, (long)len);
    CU_ASSERT_EQUAL(decode_file(broken, &d), -1);
    free(b);
    /* The encoder alone: one record. */
    uint8_t rec[128];
    size_t n = tfc_events_encode_scalar(rec, 1.0, 3, "x", 2.0f);
    const char *one = tfc_test_write("one.tfevents", rec, (long)n);
    CU_ASSERT_EQUAL(decode_file(one, &d), 1);
    CU_ASSERT(d.n == 1 && d.step[0] == 3 && d.value[0] == 2.0f && d.wall[0] == 1.0);
}

static void test_tensorboard_reads_events(void)
{
    if (!tfc_test_python_has("tensorboard")) return;
    tfc_error err;
    tfc_error_clear(&err);
    char dir[1100], cmd[4000];
    snprintf(dir, sizeof dir, "%s", tfc_test_path("tb"));
    mkdir(dir, 0777);
    tfc_events *ev = tfc_events_open(dir, -1, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
    for (int i = 1; i <= 3; i++) tfc_events_scalar(ev, 100 * i, "train/loss", 1.0 / i, &err);
    tfc_events_scalar(ev, 300, "test/accuracy", 0.9, &err);
    tfc_events_close(ev);
    const char *py = tfc_test_write(
        "tb.py",
        "import sys\n"
        "from tensorboard.backend.event_processing.event_accumulator import EventAccumulator\n"
        "ea = EventAccumulator(sys.argv[1]); ea.Reload()\n"
        "for tag in sorted(ea.Tags()['scalars']):\n"
        "    print(tag, ' '.join('%d:%.4f' % (e.step, e.value) for e in ea.Scalars(tag)))\n",
        -1);
    const char *out = tfc_test_path("tb.out");
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s' >'%s' 2>&1", py, dir, out);
    fflush(NULL);
    int rc = system(cmd);
    CU_ASSERT(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
    char *text = tfc_test_read(out, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "test/accuracy 300:0.9000\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "train/loss 100:1.0000 200:0.5000 300:0.3333\n"));
    if (!strstr(text, "train/loss 100:1.0000")) printf("\n%s\n", text);
    free(text);
}

/* A run of tfc-train with summary.histogram_interval and two --set keys, read by
 * TensorBoard's own EventAccumulator and the hparams plugin's protobufs
 * (tests/tensorboard_check.py): the graph (a node per layer with its type, inputs, output
 * shape and parameter count), histograms of every weight and gradient at the interval with
 * their counts equal to the parameter sizes, the first batch's first three inputs as PNG
 * images, the resolved config as text, the hparams with numbers typed as numbers, the
 * session's end as a success. */
static void test_tensorboard_run(void)
{
    const char *bin = tfc_test_bin("tfc-train");
    if (!bin || !tfc_test_python_has("tensorboard")) return;
    float x[16 * 8];
    int32_t y[16];
    for (int i = 0; i < 16 * 8; i++) x[i] = (float)((i * 37) % 11) / 11.0f;
    for (int i = 0; i < 16; i++) y[i] = i % 3;
    tfc_tensor tx = {TFC_F32, {.ndim = 4, .dim = {16, 4, 2, 1}}, x, -1};
    tfc_tensor ty = {TFC_I32, {.ndim = 1, .dim = {16}}, y, -1};
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_write(tfc_test_path("tbx.npy"), &tx, &err), TFC_OK);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_write(tfc_test_path("tby.npy"), &ty, &err), TFC_OK);
    tfc_test_write("tb.yaml",
                   "model:\n"
                   "  name: tb\n"
                   "  input: {shape: [4, 2, 1]}\n"
                   "  layers:\n"
                   "    - Flatten: {name: flat}\n"
                   "    - Dense: {name: hidden, units: 5, activation: relu}\n"
                   "    - Dense: {name: out, units: 3, activation: softmax}\n"
                   "  loss: sparse_categorical_crossentropy\n"
                   "  metrics: [accuracy]\n"
                   "data:\n"
                   "  train:\n"
                   "    source: {type: npy, features: tbx.npy, labels: tby.npy}\n"
                   "    pipeline: [{repeat: {}}, {batch: {batch_size: 4}}]\n"
                   "optimizer: {type: sgd, learning_rate: 0.1}\n"
                   "max_iter: 6\n"
                   "display: 3\n"
                   "summary: {histogram_interval: 3}\n", -1);
    char cmd[4000];
    const char *out = tfc_test_path("tbrun.out");
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s/tfc-train' tb.yaml --out tbrun --set "
             "optimizer.learning_rate=0.05 --set optimizer.type=adam >'%s' 2>&1 && "
             "python3 '%s/tests/tensorboard_check.py' tbrun >'%s' 2>&1",
             tfc_test_tmpdir(), bin, out, getcwd((char[2048]){0}, 2048), out);
    fflush(NULL);
    int rc = system(cmd);
    char *text = tfc_test_read(out, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
    static const char *const want[] = {
        "scalars lr train/accuracy train/loss\n",
        "histograms gradients/hidden/bias gradients/hidden/kernel gradients/out/bias "
        "gradients/out/kernel weights/hidden/bias weights/hidden/kernel weights/out/bias "
        "weights/out/kernel\n",
        "histo weights/hidden/kernel 3 num=40 ", "histo weights/hidden/kernel 6 num=40 ",
        "histo gradients/out/kernel 6 num=15 ", "histo weights/out/bias 3 num=3 ",
        "buckets=40\n", "buckets=15\n",
        "text # resolved by tfc-train from tb.yaml ... ```\n",
        "node input Input [] [-1, 4, 2, 1] params=0\n",
        "node flat Flatten [input] [-1, 8] params=0\n",
        "node hidden Dense [flat] [-1, 5] params=45\n",
        "image inputs/0 0 4x2 png=True\n", "image inputs/2 0 4x2 png=True\n",
        "node out Dense [hidden] [-1, 3] params=18\n",
        "hparam optimizer.learning_rate number_value 0.05\n",
        "hparam optimizer.type string_value 'adam'\n",
        "end STATUS_SUCCESS\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        if (!strstr(text, want[i])) printf("\nmissing: %s", want[i]);
        CU_ASSERT_PTR_NOT_NULL(strstr(text, want[i]));
    }
    if (!WIFEXITED(rc) || WEXITSTATUS(rc)) printf("\n%s\n", text);
    free(text);
}

int main(int argc, char **argv)
{
    tfc_test_case cases[32] = {
        {"sgd", test_sgd},
        {"adam", test_adam},
        {"adamw", test_adamw},
        {"rmsprop", test_rmsprop},
        {"adagrad", test_adagrad},
        {"keras_optimizers", test_keras_optimizers},
        {"keras_optimizer_vars", test_keras_optimizer_vars},
        {"optimizer_registry", test_optimizer_registry},
        {"optimizer_errors", test_optimizer_errors},
        {"lr_policies", test_lr_policies},
        {"lr_errors", test_lr_errors},
        {"solver_defaults", test_solver_defaults},
        {"schedule_as_learning_rate", test_schedule_as_learning_rate},
        {"set_overrides", test_set_overrides},
        {"set_errors", test_set_errors},
        {"solver_file_errors", test_solver_file_errors},
        {"snapshot_roundtrip", test_snapshot_roundtrip},
        {"snapshot_refusals", test_snapshot_refusals},
        {"snapshot_names", test_snapshot_names},
        {"snapshot_rotation", test_snapshot_rotation},
        {"snapshot_find_newest", test_snapshot_find_newest},
        {"csv_log", test_csv_log},
        {"crc32c", test_crc32c},
        {"event_file", test_event_file},
        {"tensorboard_run", test_tensorboard_run},
    };
    int n = 0;
    while (cases[n].name) n++;
    cases[n++] = (tfc_test_case){"tensorboard", test_tensorboard_reads_events};
    cases[n] = (tfc_test_case){NULL, NULL};
    return tfc_test_main("solver", cases, argc, argv);
}
