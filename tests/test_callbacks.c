/* Early stopping and the plateau policy against Keras 3.15.1's own decision rules: the
 * tables below were produced by running keras/src/callbacks/early_stopping.py and
 * reduce_lr_on_plateau.py (unmodified, with ops.less/greater as numpy's and a float32
 * learning rate as Keras's variable) on the same scripted metric streams — the stop
 * evaluation, the best evaluation and the rate after each evaluation. Plus PyTorch's
 * relative threshold by hand, the monitor's resolution and the configuration errors. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cpu/cpu.h"
#include "solver/internal.h"
#include "solver/monitor.h"
#include "util/testutil.h"

typedef struct stream {
    const char *name;
    int n;
    double v[12];
} stream;

static const stream streams[] = {
    {"falling", 10, {1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1}},
    {"rising", 10, {0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4}},
    {"flat", 10, {0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5}},
    {"noisy", 12, {0.9, 0.7, 0.75, 0.72, 0.69, 0.71, 0.70, 0.695, 0.68, 0.70, 0.71, 0.72}},
    {"slow", 10, {1.0, 0.99995, 0.9999, 0.99985, 0.9998, 0.5, 0.49995, 0.4999, 0.49985, 0.4998}},
};

static const stream *find_stream(const char *name)
{
    for (size_t i = 0; i < sizeof streams / sizeof streams[0]; i++)
        if (!strcmp(streams[i].name, name)) return &streams[i];
    CU_FAIL_FATAL("unknown stream");
    return NULL;
}

/* A model with an accuracy metric, for resolving monitors as the solver does. */
static tfc_model *tiny_model(void)
{
    static const char *yaml = "input: {shape: [4]}\n"
                              "layers:\n"
                              "  - Dense: {units: 3}\n"
                              "metrics: [accuracy]\n";
    tfc_error err;
    tfc_error_clear(&err);
    tfc_doc *d = tfc_doc_load_string(yaml, strlen(yaml), "m.yaml", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    tfc_model *m = tfc_model_from_node(tfc_doc_root(d), "m", &err);
    tfc_doc_free(d);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    return m;
}

static void resolve(tfc_monitor *mon, tfc_model *m, int accuracy, int mode)
{
    tfc_error err;
    tfc_error_clear(&err);
    mon->name = accuracy ? "test/accuracy" : "test/loss";
    mon->mode = mode;
    CU_ASSERT_EQUAL_FATAL(tfc_monitor_resolve(mon, m, NULL, "monitor", &err), TFC_OK);
}

/* ---- EarlyStopping ------------------------------------------------------------------------- */

typedef struct es_case {
    int accuracy, mode, patience;
    double min_delta;
    int has_baseline;
    double baseline;
    int start_from;
    const char *stream;
    int stop_eval, best_eval; /* Keras: stopped_epoch (-1: ran to the end), best_epoch */
} es_case;

/* python3 gen.py: EarlyStopping(monitor=val_loss|val_accuracy, mode, patience, min_delta,
 * baseline, start_from_epoch), on_epoch_end(e, {monitor: v}) until model.stop_training. */
static const es_case es_cases[] = {
    {0, TFC_MODE_AUTO, 2, 0, 0, 0, 0, "falling", -1, 9},
    {0, TFC_MODE_AUTO, 2, 0, 0, 0, 0, "rising", 2, 0},
    {0, TFC_MODE_AUTO, 0, 0, 0, 0, 0, "rising", 1, 0},
    {0, TFC_MODE_AUTO, 3, 0, 0, 0, 0, "flat", 3, 0},
    {0, TFC_MODE_MIN, 2, 0, 0, 0, 0, "noisy", 3, 1},
    {0, TFC_MODE_MIN, 3, 0, 0, 0, 0, "noisy", 7, 4},
    {0, TFC_MODE_MIN, 2, 0.02, 0, 0, 0, "noisy", 3, 1},
    {0, TFC_MODE_MAX, 2, 0, 0, 0, 0, "falling", 2, 0},
    {1, TFC_MODE_AUTO, 2, 0, 0, 0, 0, "falling", 2, 0},
    {1, TFC_MODE_AUTO, 2, 0, 0, 0, 0, "rising", -1, 9},
    {0, TFC_MODE_AUTO, 3, 0, 1, 0.65, 0, "noisy", 2, 1},
    {0, TFC_MODE_AUTO, 3, 0, 1, 0.85, 0, "noisy", 7, 4},
    {0, TFC_MODE_AUTO, 2, 0, 0, 0, 4, "rising", 6, 4},
    {0, TFC_MODE_AUTO, 1, 0.0001, 0, 0, 0, "slow", 1, 0},
    {0, TFC_MODE_AUTO, 1, -0.01, 0, 0, 0, "noisy", 2, 1},
};

static void test_early_stopping_keras(void)
{
    tfc_model *m = tiny_model();
    for (size_t k = 0; k < sizeof es_cases / sizeof es_cases[0]; k++) {
        const es_case *t = &es_cases[k];
        tfc_early_stopping c = {0};
        c.enabled = 1;
        resolve(&c.monitor, m, t->accuracy, t->mode);
        c.patience = t->patience;
        c.min_delta = fabs(t->min_delta);
        c.have_baseline = t->has_baseline;
        c.baseline = t->baseline;
        c.start_from = t->start_from;
        tfc_early_stopping_state st = {0};
        const stream *s = find_stream(t->stream);
        int stop = -1;
        for (int e = 0; e < s->n && stop < 0; e++)
            if (tfc_early_stopping_step(&c, &st, s->v[e], 100 * (e + 1)) & TFC_ES_STOP) stop = e;
        CU_ASSERT_EQUAL(stop, t->stop_eval);
        CU_ASSERT_EQUAL(st.best_eval, t->best_eval);
        CU_ASSERT_EQUAL(st.best_iteration, 100 * (t->best_eval + 1));
        if (stop >= 0) CU_ASSERT_EQUAL(st.stopped_iteration, 100 * (stop + 1));
        if (stop != t->stop_eval || st.best_eval != t->best_eval)
            printf("\ncase %zu (%s): stop %d best %lld, Keras: stop %d best %d\n", k, t->stream,
                   stop, (long long)st.best_eval, t->stop_eval, t->best_eval);
    }
    tfc_model_free(m);
}

/* ---- ReduceLROnPlateau --------------------------------------------------------------------- */

typedef struct plateau_case {
    int accuracy, mode;
    double factor;
    int patience;
    double min_delta;
    int cooldown;
    double min_lr;
    const char *stream;
    double lr[12]; /* Keras's rate after each evaluation, from 0.1 */
} plateau_case;

/* python3 gen.py: ReduceLROnPlateau(monitor, mode, factor, patience, min_delta, cooldown,
 * min_lr) on an optimizer at 0.1; the printed rates are Keras's float32 values. */
static const plateau_case plateau_cases[] = {
    {0, TFC_MODE_AUTO, 0.5, 2, 0.0001, 0, 0, "falling", {0.100000001, 0.100000001, 0.100000001, 0.100000001, 0.100000001, 0.100000001, 0.100000001, 0.100000001, 0.100000001, 0.100000001}},
    {0, TFC_MODE_AUTO, 0.5, 2, 0.0001, 0, 0, "rising", {0.100000001, 0.100000001, 0.0500000007, 0.0500000007, 0.0250000004, 0.0250000004, 0.0125000002, 0.0125000002, 0.00625000009, 0.00625000009}},
    {0, TFC_MODE_AUTO, 0.5, 1, 0.0001, 0, 0, "flat", {0.100000001, 0.0500000007, 0.0250000004, 0.0125000002, 0.00625000009, 0.00312500005, 0.00156250002, 0.000781250012, 0.000390625006, 0.000195312503}},
    {0, TFC_MODE_AUTO, 0.5, 1, 0.0001, 2, 0, "flat", {0.100000001, 0.0500000007, 0.0500000007, 0.0250000004, 0.0250000004, 0.0125000002, 0.0125000002, 0.00625000009, 0.00625000009, 0.00312500005}},
    {0, TFC_MODE_MIN, 0.1, 2, 0.0001, 1, 0, "noisy", {0.100000001, 0.100000001, 0.100000001, 0.00999999978, 0.00999999978, 0.00999999978, 0.000999999931, 0.000999999931, 0.000999999931, 0.000999999931, 9.99999902e-05, 9.99999902e-05}},
    {0, TFC_MODE_AUTO, 0.5, 1, 0.0001, 0, 0.03, "rising", {0.100000001, 0.0500000007, 0.0299999993, 0.0299999993, 0.0299999993, 0.0299999993, 0.0299999993, 0.0299999993, 0.0299999993, 0.0299999993}},
    {0, TFC_MODE_AUTO, 0.5, 1, 0.0001, 0, 0, "slow", {0.100000001, 0.0500000007, 0.0250000004, 0.0250000004, 0.0125000002, 0.0125000002, 0.00625000009, 0.00312500005, 0.00312500005, 0.00156250002}},
    {0, TFC_MODE_AUTO, 0.5, 1, 0, 0, 0, "slow", {0.100000001, 0.100000001, 0.100000001, 0.100000001, 0.100000001, 0.100000001, 0.100000001, 0.100000001, 0.100000001, 0.100000001}},
    {0, TFC_MODE_MAX, 0.5, 2, 0.0001, 0, 0, "falling", {0.100000001, 0.100000001, 0.0500000007, 0.0500000007, 0.0250000004, 0.0250000004, 0.0125000002, 0.0125000002, 0.00625000009, 0.00625000009}},
    {1, TFC_MODE_AUTO, 0.5, 2, 0.0001, 0, 0, "falling", {0.100000001, 0.100000001, 0.0500000007, 0.0500000007, 0.0250000004, 0.0250000004, 0.0125000002, 0.0125000002, 0.00625000009, 0.00625000009}},
    {0, TFC_MODE_AUTO, 0.2, 3, 0.02, 1, 0, "noisy", {0.100000001, 0.100000001, 0.100000001, 0.100000001, 0.0199999996, 0.0199999996, 0.0199999996, 0.00399999972, 0.00399999972, 0.00399999972, 0.000799999922, 0.000799999922}},
};

static void test_plateau_keras(void)
{
    tfc_model *m = tiny_model();
    for (size_t k = 0; k < sizeof plateau_cases / sizeof plateau_cases[0]; k++) {
        const plateau_case *t = &plateau_cases[k];
        tfc_plateau p = {0};
        resolve(&p.monitor, m, t->accuracy, t->mode);
        p.factor = t->factor;
        p.patience = t->patience;
        p.min_delta = t->min_delta;
        p.cooldown = t->cooldown;
        p.min_lr = t->min_lr;
        p.threshold_mode = TFC_THRESHOLD_ABS;
        tfc_plateau_state st = {.lr = 0.1};
        const stream *s = find_stream(t->stream);
        for (int e = 0; e < s->n; e++) {
            tfc_plateau_step(&p, &st, s->v[e]);
            /* Keras holds the rate in float32; ours is a double: 1e-6 relative. */
            CU_ASSERT(fabs(st.lr - t->lr[e]) <= 1e-6 * t->lr[e]);
            if (fabs(st.lr - t->lr[e]) > 1e-6 * t->lr[e])
                printf("\ncase %zu (%s) evaluation %d: lr %.9g, Keras %.9g\n", k, t->stream, e,
                       st.lr, t->lr[e]);
        }
    }
    tfc_model_free(m);
}

/* PyTorch's rel threshold (best * (1 - d) for min) against Keras's abs (best - d), by hand:
 * stream 10, 9.5, 9.2, 8.0 with d = 0.1, patience 1, factor 0.5. rel needs 9.0 to improve
 * on 10: evaluations 1 and 2 reduce (0.05, 0.025); 8.0 improves. abs: every value improves. */
static void test_plateau_threshold_mode(void)
{
    tfc_model *m = tiny_model();
    const double v[4] = {10, 9.5, 9.2, 8.0};
    const double rel[4] = {0.1, 0.05, 0.025, 0.025}, abs_[4] = {0.1, 0.1, 0.1, 0.1};
    for (int mode = 0; mode < 2; mode++) {
        tfc_plateau p = {0};
        resolve(&p.monitor, m, 0, TFC_MODE_MIN);
        p.factor = 0.5;
        p.patience = 1;
        p.min_delta = 0.1;
        p.threshold_mode = mode ? TFC_THRESHOLD_ABS : TFC_THRESHOLD_REL;
        tfc_plateau_state st = {.lr = 0.1};
        for (int e = 0; e < 4; e++) {
            tfc_plateau_step(&p, &st, v[e]);
            CU_ASSERT_DOUBLE_EQUAL(st.lr, mode ? abs_[e] : rel[e], 1e-15);
        }
    }
    tfc_model_free(m);
}

/* At the floor the rate stays and no reduction is reported: Keras reduces only while its
 * float32 rate exceeds float32(min_lr). From 5.4e-5 with factor 0.3 and min_lr 2e-5 (a
 * float32 value below the double 2e-5): one reduction to the floor, then none — the
 * double rate compared with float32(min_lr) was "reduced" to itself at each patience. */
static void test_plateau_floor(void)
{
    tfc_model *m = tiny_model();
    tfc_plateau p = {0};
    resolve(&p.monitor, m, 0, TFC_MODE_MIN);
    p.factor = 0.3;
    p.patience = 1;
    p.min_lr = 2e-5;
    p.threshold_mode = TFC_THRESHOLD_ABS;
    tfc_plateau_state st = {.lr = 5.4e-5};
    CU_ASSERT_EQUAL(tfc_plateau_step(&p, &st, 1.0), 0); /* the first value is the best */
    CU_ASSERT_EQUAL(tfc_plateau_step(&p, &st, 1.0), 1);
    CU_ASSERT_DOUBLE_EQUAL(st.lr, 2e-5, 1e-20);
    for (int e = 0; e < 4; e++) CU_ASSERT_EQUAL(tfc_plateau_step(&p, &st, 1.0), 0);
    CU_ASSERT_DOUBLE_EQUAL(st.lr, 2e-5, 1e-20);
    tfc_model_free(m);
}

/* auto: min for the loss, max for accuracy; explicit modes win; train/ is recognised, and
 * Keras's val_loss and loss. */
static void test_monitor_resolve(void)
{
    tfc_model *m = tiny_model();
    tfc_error err;
    tfc_error_clear(&err);
    tfc_monitor mon = {"train/accuracy", TFC_MODE_AUTO, 0, 0, 0};
    CU_ASSERT_EQUAL(tfc_monitor_resolve(&mon, m, NULL, "x", &err), TFC_OK);
    CU_ASSERT(mon.train && mon.higher && mon.metric == 0);
    mon = (tfc_monitor){"test/loss", TFC_MODE_AUTO, 0, 0, 0};
    CU_ASSERT_EQUAL(tfc_monitor_resolve(&mon, m, NULL, "x", &err), TFC_OK);
    CU_ASSERT(!mon.train && !mon.higher && mon.metric == -1);
    mon = (tfc_monitor){"test/loss", TFC_MODE_MAX, 0, 0, 0};
    CU_ASSERT_EQUAL(tfc_monitor_resolve(&mon, m, NULL, "x", &err), TFC_OK);
    CU_ASSERT(mon.higher);
    mon = (tfc_monitor){"test/accuracy", TFC_MODE_MIN, 0, 0, 0};
    CU_ASSERT_EQUAL(tfc_monitor_resolve(&mon, m, NULL, "x", &err), TFC_OK);
    CU_ASSERT(!mon.higher);
    /* Keras's log names: val_M is test/M, M train/M */
    static const struct { const char *name; int train, metric; } keras[] = {
        {"val_loss", 0, -1}, {"loss", 1, -1}, {"val_accuracy", 0, 0}, {"accuracy", 1, 0}};
    for (int i = 0; i < 4; i++) {
        mon = (tfc_monitor){keras[i].name, TFC_MODE_AUTO, 0, 0, 0};
        CU_ASSERT_EQUAL(tfc_monitor_resolve(&mon, m, NULL, "x", &err), TFC_OK);
        CU_ASSERT(mon.train == keras[i].train && mon.metric == keras[i].metric);
        CU_ASSERT_EQUAL(mon.higher, keras[i].metric == 0);
    }
    const char *bad[] = {"val_acc", "test/acc", "tests/loss", "train/", "val_", "lose"};
    for (int i = 0; i < 6; i++) {
        mon = (tfc_monitor){bad[i], TFC_MODE_AUTO, 0, 0, 0};
        tfc_error_clear(&err);
        CU_ASSERT_EQUAL(tfc_monitor_resolve(&mon, m, NULL, "x", &err), TFC_ERR_CONFIG);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "expected one of test/loss, train/loss, "
                                               "test/accuracy, train/accuracy"));
    }
    tfc_model_free(m);
}

/* ---- the solver file ------------------------------------------------------------------------ */

static const char *solver_yaml =
    "model:\n"
    "  input: {shape: [4]}\n"
    "  layers:\n"
    "    - Dense: {units: 3}\n"
    "  metrics: [accuracy]\n"
    "data:\n"
    "  train:\n"
    "    source: {type: npy, features: x.npy, labels: y.npy}\n"
    "    pipeline: [{repeat: {}}, {batch: {batch_size: 8}}]\n"
    "  test:\n"
    "    source: {type: npy, features: x.npy, labels: y.npy}\n"
    "    pipeline: [{batch: {batch_size: 8}}]\n"
    "max_iter: 10\n"
    "test_interval: 5\n";

static tfc_solver *load(const char **sets, int n, tfc_error *err)
{
    tfc_solver_options o = {0};
    o.sets = sets;
    o.nsets = n;
    tfc_error_clear(err);
    return tfc_solver_from_string(solver_yaml, tfc_test_path("cb.yaml"), &o, err);
}

static void expect_error(const char *set, const char *want)
{
    tfc_error err;
    const char *sets[] = {set};
    tfc_solver *s = load(sets, 1, &err);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, want));
    if (!strstr(err.text, want)) printf("\nwant: %s\ngot:  %s\n", want, err.text);
    tfc_solver_free(s);
}

static void test_solver_keys(void)
{
    tfc_error err;
    const char *sets[] = {"early_stopping={monitor: test/accuracy, patience: 3, min_delta: "
                          "-0.01, baseline: 0.5, start_from: 2, restore_best: true}",
                          "lr_policy={type: plateau, factor: 0.5, cooldown: 1, threshold_mode: "
                          "rel, warmup_iters: 4}"};
    tfc_solver *s = load(sets, 2, &err);
    if (!s) printf("\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    const tfc_solver_config *c = tfc_solver_get_config(s);
    const tfc_early_stopping *es = &c->early_stopping;
    CU_ASSERT(es->enabled && es->monitor.higher && es->monitor.metric == 0);
    CU_ASSERT(es->patience == 3 && es->min_delta == 0.01 && es->have_baseline &&
              es->baseline == 0.5 && es->start_from == 2 && es->restore_best);
    const tfc_plateau *p = &c->lr_policy.plateau;
    CU_ASSERT_EQUAL(c->lr_policy.type, TFC_LR_PLATEAU);
    /* Keras's defaults where the file says nothing: val_loss, patience 10, 1e-4, min_lr 0 */
    CU_ASSERT(!p->monitor.higher && p->monitor.metric == -1 && !p->monitor.train);
    CU_ASSERT(p->factor == 0.5 && p->patience == 10 && p->min_delta == 1e-4 &&
              p->cooldown == 1 && p->min_lr == 0 && p->threshold_mode == TFC_THRESHOLD_REL);
    /* Combined with warm-up: the plateau's rate times min(1, (iter + 1) / 4). */
    tfc_callbacks cb;
    tfc_callbacks_init(&cb, c);
    CU_ASSERT_DOUBLE_EQUAL(cb.plateau.lr, 0.01, 0); /* sgd's default learning_rate */
    cb.plateau.lr = 0.004;
    CU_ASSERT_DOUBLE_EQUAL(tfc_lr_at(&c->lr_policy, tfc_callbacks_base_lr(&cb, c), 1, 10),
                           0.002, 1e-15);
    tfc_solver_free(s);
    /* Off by default; Keras's EarlyStopping defaults when it is on. */
    const char *on[] = {"early_stopping={}"};
    s = load(on, 1, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    es = &tfc_solver_get_config(s)->early_stopping;
    CU_ASSERT(es->enabled && !es->monitor.higher && es->monitor.metric == -1 &&
              es->patience == 0 && es->min_delta == 0 && !es->have_baseline &&
              es->start_from == 0 && !es->restore_best);
    tfc_solver_free(s);
    s = load(NULL, 0, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT(!tfc_solver_get_config(s)->early_stopping.enabled);
    tfc_solver_free(s);
}

static void test_solver_key_errors(void)
{
    expect_error("early_stopping={monitor: val_los}",
                 "--set early_stopping={monitor: val_los}:1:11: error: early_stopping.monitor: "
                 "unknown metric \"val_los\"; expected one of test/loss, train/loss, "
                 "test/accuracy, train/accuracy (or Keras's names: val_loss for test/loss, "
                 "loss for train/loss)");
    expect_error("early_stopping={patience: 2, paitence: 3}", "did you mean 'patience'?");
    expect_error("early_stopping={mode: maximum}", "early_stopping.mode");
    expect_error("early_stopping={baseline: high}", "early_stopping.baseline");
    expect_error("lr_policy={type: plateau, factor: 1}",
                 "lr_policy.factor: expected a factor below 1 (the rate must fall), found 1");
    expect_error("lr_policy={type: plateau, monitor: test/top5}", "lr_policy.monitor: unknown "
                                                                  "metric \"test/top5\"");
    expect_error("lr_policy={type: plateau, threshold_mode: relative}", "lr_policy.threshold_mode: unknown value \"relative\"; did you mean \"rel\"? (one of: rel, abs)");
}

static void test_test_interval_needed(void)
{
    const char *sets[] = {"early_stopping={monitor: train/loss}", "display=0"};
    tfc_error err;
    tfc_solver *s = load(sets, 2, &err);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "monitor train/loss is the latest display's value: "
                                            "it needs display > 0"));
    tfc_solver_free(s);
    const char *sets2[] = {"early_stopping={}", "test_interval=0"};
    s = load(sets2, 2, &err);
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "early_stopping is stepped at each test evaluation"));
    tfc_solver_free(s);
}

/* The snapshot's doubles round-trip every field. */
static void test_state_roundtrip(void)
{
    tfc_callbacks a = {0}, b = {0};
    a.es = (tfc_early_stopping_state){7, 3, 1, 0.25, 4, 500, 0};
    a.plateau = (tfc_plateau_state){0.0125, 2, 1, 1, 0.75};
    double v[TFC_CALLBACK_STATE];
    tfc_callbacks_save(&a, v);
    tfc_callbacks_load(&b, v);
    CU_ASSERT(memcmp(&a.es, &b.es, sizeof a.es) == 0);
    CU_ASSERT(memcmp(&a.plateau, &b.plateau, sizeof a.plateau) == 0);
}

/* ---- ema ------------------------------------------------------------------------------------ */

/* Weights 1, 2, 4 after updates 0, 1, 2 (two parameters, the second 10x).
 * decay 0.5, no warm-up: 1 (the copy), 0.5 + 1 = 1.5, 0.75 + 2 = 2.75.
 * decay 0.999 with warm-up: d1 = min(0.999, 2/11), d2 = 3/12:
 * 1, 2/11 + 2 * 9/11 = 20/11, 0.25 * 20/11 + 0.75 * 4 = 5/11 + 3 = 38/11. */
static void test_ema_sequence(void)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    const double want[2][3] = {{1, 1.5, 2.75}, {1, 20.0 / 11, 38.0 / 11}};
    const tfc_ema_config cfgs[2] = {{1, 0.5, 0}, {1, 0.999, 1}};
    CU_ASSERT_DOUBLE_EQUAL(tfc_ema_rate(&cfgs[1], 1), 2.0 / 11, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(tfc_ema_rate(&cfgs[1], 20000), 0.999, 1e-15); /* (1 + k) / (10 + k) passes 0.999 at k = 8991 */
    CU_ASSERT_DOUBLE_EQUAL(tfc_ema_rate(&cfgs[0], 0), 0.0, 0);
    for (int k = 0; k < 2; k++) {
        tfc_ema e;
        tfc_error err;
        tfc_error_clear(&err);
        CU_ASSERT_EQUAL_FATAL(tfc_ema_init(&e, &cfgs[k], be, 2, &err), TFC_OK);
        float w[2];
        const float seq[3] = {1, 2, 4};
        for (int i = 0; i < 3; i++) {
            w[0] = seq[i];
            w[1] = 10 * seq[i];
            tfc_ema_update(&e, w, i);
            CU_ASSERT_DOUBLE_EQUAL(e.avg[0], want[k][i], 1e-6);
            CU_ASSERT_DOUBLE_EQUAL(e.avg[1], 10 * want[k][i], 1e-5);
        }
        /* swapping puts the average in and the live weights back */
        tfc_ema_swap_in(&e, w);
        CU_ASSERT_DOUBLE_EQUAL(w[0], want[k][2], 1e-6);
        tfc_ema_swap_out(&e, w);
        CU_ASSERT(w[0] == 4.0f && w[1] == 40.0f);
        tfc_ema_release(&e);
    }
    tfc_backend_free(be);
}

TFC_TEST_MAIN("callbacks", {"ema_sequence", test_ema_sequence}, {"early_stopping_keras", test_early_stopping_keras},
              {"plateau_keras", test_plateau_keras},
              {"plateau_threshold_mode", test_plateau_threshold_mode},
              {"plateau_floor", test_plateau_floor},
              {"monitor_resolve", test_monitor_resolve}, {"solver_keys", test_solver_keys},
              {"solver_key_errors", test_solver_key_errors},
              {"test_interval_needed", test_test_interval_needed},
              {"state_roundtrip", test_state_roundtrip})
