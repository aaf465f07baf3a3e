/* The solver: a solver file (SPEC §2) with its model, overrides applied and every key
 * checked, then trained on a backend while it writes the run directory of SPEC §4
 * (config.yaml, log.csv, a TensorBoard event file, snapshots, final/best weights and
 * summary.json), or evaluated on its test split (tfc-test).
 *
 *   tfc_solver_load (parse, --set, validate; writes nothing)
 *   → tfc_solver_train (run directory, backend, pipelines, the loop)  or  tfc_solver_evaluate
 *
 * The library prints only to the `console` stream the caller passes. */
#ifndef TFC_SOLVER_SOLVER_H
#define TFC_SOLVER_SOLVER_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "core/config.h"
#include "core/safetensors.h"
#include "data/data.h"
#include "graph/model.h"
#include "solver/optimizer.h"

typedef struct tfc_solver tfc_solver;

/* tfc_solver_options.cuda_graphs: wherever they apply, without a note where they do not. */
#define TFC_CUDA_GRAPHS_AUTO (-1)

/* What the command line adds to a solver file. Strings are referenced, not copied: they
 * must outlive the solver. */
typedef struct tfc_solver_options {
    const char *const *sets;      /* "KEY=VALUE" overrides (--set), applied in order */
    int nsets;
    const char *device;           /* --device; NULL: the file's `device:`, else automatic */
    int threads;                  /* CPU threads; <= 0: all cores */
    const char *out_dir;          /* --out; NULL: the resumed run's folder or
                                     runs/<model name>-<YYYYmmdd-HHMMSS> */
    const char *resume;           /* --resume STATE, or NULL */
    int force;                    /* --force: a resume whose configuration changes what the
                                     state does not fit starts a new run from its weights */
    int overwrite;                /* --overwrite: clear an earlier run's files in out_dir */
    const char *weights;          /* --weights FILE: initialise layers by name, or NULL */
    FILE *console;                /* progress, reports and notes; NULL: silent */
    int live;                     /* -1: a live progress line when console is a terminal;
                                     0: plain lines only; 1: always live */
    volatile sig_atomic_t *stop;  /* when it becomes nonzero the loop snapshots and stops */
    volatile sig_atomic_t *snapshot_now; /* nonzero: the loop writes a snapshot after the
                                            current iteration, clears it and goes on */
    volatile sig_atomic_t *evaluate_now; /* nonzero: the same with a test pass (logged) */
    int64_t stop_at;              /* --stop-at: > 0 pauses the run after that iteration (below
                                     max_iter) with a test pass and a snapshot, status paused;
                                     the schedule, callbacks and logs stay those of the whole
                                     run, so a resume goes on as if it had never paused */
    int host_step;                /* 1: the training step's host path even on a backend with
                                     the device-side step ops (docs/solver.md); the two give
                                     the same bits (tests compare them) */
    int cuda_graphs;              /* the staged step, replayed from a CUDA graph where the
                                     backend captures (docs/solver.md); the same bits.
                                     0: off; 1: on, with a note where it cannot be;
                                     TFC_CUDA_GRAPHS_AUTO: on where the backend captures and
                                     the run allows it, silently off elsewhere (tfc-train's
                                     default) */
    int data_only;                /* 1: only the data is wanted (tfc-data): the keys that only
                                     training needs (model, max_iter, data) may be absent;
                                     every key there is resolved and checked as for training,
                                     the model too when there is one */
} tfc_solver_options;

/* The checked solver keys (docs/solver.md lists them with their defaults). */
typedef struct tfc_solver_config {
    tfc_optimizer_config optimizer;
    tfc_lr_policy lr_policy;
    tfc_early_stopping early_stopping; /* .enabled 0: off */
    tfc_ema_config ema;           /* .enabled 0: off */
    tfc_rollback_config rollback; /* .enabled 0: a divergence stops the run */
    double weight_decay;          /* L2, added to the gradient: g += weight_decay * w */
    double clip_gradients;        /* global-norm clipping threshold; 0 = off */
    int iter_size;                /* batches accumulated per update */
    int max_iter;
    int test_interval;            /* 0: test only at the end */
    int display;                  /* 0: no periodic display */
    int average_loss;             /* smoothing window of the displayed loss; 0: display */
    int histogram_interval;       /* summary.histogram_interval: 0 none */
    int seed;
    int snapshot_interval;        /* 0: snapshots only on a signal and at the end */
    int snapshot_keep;            /* newest complete snapshots kept; 0: all */
    const char *snapshot_prefix;  /* relative to the run directory */
    const char *device;           /* NULL: automatic */
    int deterministic, tf32;      /* GPU options (core/device.h) */
    tfc_precision precision;      /* of the model's passes (tfc_model_set_precision) */
    double loss_scale_initial;    /* float16: the dynamic loss scale's start (else 1) */
    int loss_scale_growth;        /* float16: finite updates after which it doubles */
    const tfc_node *precision_node; /* the key, for errors (NULL: the default) */
    double gpu_memory_limit;      /* MiB; 0 = none */
    const char *base_dir;         /* absolute: relative data paths resolve against it */
    const tfc_node *train, *test; /* data.train, data.test (NULL when absent), both planned */
    tfc_data_plan train_plan;     /* tfc_pipeline_plan's answers for data.train */
    tfc_data_plan test_plan;      /* the same for data.test (zeroed without it) */
    const tfc_node *model;        /* the resolved model mapping */
} tfc_solver_config;

/* Loads SOLVER.yaml and its model (a path relative to the solver's folder, or inline),
 * applies opt->sets, and checks every key of the solver, the model and both data splits
 * (tfc_pipeline_plan: no data file is opened). All configuration errors are reported
 * together (TFC_ERR_CONFIG, exit 2); nothing is written. `opt` is copied (its strings are
 * referenced). NULL on error. */
tfc_solver *tfc_solver_load(const char *path, const tfc_solver_options *opt, tfc_error *err);

/* Same, from YAML text; `name` stands for the file (its folder is the base folder). */
tfc_solver *tfc_solver_from_string(const char *yaml, const char *name,
                                   const tfc_solver_options *opt, tfc_error *err);

void tfc_solver_free(tfc_solver *s);

/* The field tables of a solver file, for help and docs: 0 the top level, 1 `data`,
 * 2 `snapshot`, 3 `early_stopping`, 4 `ema`, 5 `rollback`, 6 `summary`; NULL past the last. (Optimizers and policies: optimizer.h.) */
const tfc_field *tfc_solver_fields(int which);

const tfc_solver_config *tfc_solver_get_config(const tfc_solver *s);
/* The resolved configuration: the solver with the model inlined and overrides applied. */
const tfc_node *tfc_solver_resolved(const tfc_solver *s);
/* The model (not bound until training or evaluation binds it). */
tfc_model *tfc_solver_model(tfc_solver *s);

/* The metric that ranks a run's tests (summary.json's best.metric, tfc-grid's results): the
 * model's first metric other than the loss (higher is better), else "loss" (lower). */
const char *tfc_ranking_metric_name(const tfc_model *m);


/* The model a model tool works on (model_source.c): `path` is a model file, or a solver or run
 * config.yaml (a mapping with model: and no layers:), whose resolved model is taken (model:
 * FILE inlined, base_dir, the solver's --sets). The `sets` ("KEY=VALUE", as tfc_solver_options)
 * apply to the solver, or to the model file, where `model.KEY` and `KEY` name the same key, so
 * one --set works with either file. Every error of the file is reported; NULL on error. */
tfc_model *tfc_model_load_config(const char *path, const char *const *sets, int nsets,
                                 tfc_error *err);
/* What training with this solver holds in memory (memory.c; SPEC §6 tfc-summary): the
 * model's binding at the per-rank batch (`model`, from tfc_model_plan_memory on paper or
 * tfc_model_memory once bound), the optimizer's slots, the EMA's two copies, and on the
 * host the feed's staging of one batch. The pipelines' own buffers (shuffle, prefetch,
 * cache) and the libraries' handles are not counted. */
typedef struct tfc_training_memory {
    tfc_memory_plan model;
    int optimizer_slots;   /* state vectors of the trainable parameters' size */
    size_t optimizer;      /* their bytes */
    size_t ema;            /* ema: average and backup of every parameter; 0 when off */
    size_t device;         /* params + grads + arena + optimizer + ema: the device's share */
    size_t host_staging;   /* one batch of inputs and labels (float32), on the host */
} tfc_training_memory;
void tfc_solver_memory(const tfc_solver *s, const tfc_memory_plan *model,
                       tfc_training_memory *out);
/* Refuses (TFC_ERR_NOMEM, naming the plan's parts, the available bytes and which knob
 * helps: a smaller model when the parameters alone do not fit, else a smaller batch) a
 * training whose planned memory at the rank batch exceeds what the device has left
 * (tfc_device_memory_available: on a GPU its free memory or what gpu_memory_limit leaves; on
 * the CPU MemAvailable or the cgroup v2 limit, the batch staging counted too). The trainer
 * calls it before it builds the pipelines, so no data is read for a batch that cannot fit. */
tfc_status tfc_solver_check_memory(tfc_solver *s, tfc_backend *be, int ranks, tfc_error *err);
/* The batch each rank binds the model for when training (the global batch / ranks), or 0
 * when the solver has no training split or its batch is not planned. */
int tfc_solver_rank_batch(const tfc_solver *s, int ranks);

/* FNV-1a 64 of the resolved configuration's YAML, and of the model's alone. */
uint64_t tfc_solver_config_hash(const tfc_solver *s);
uint64_t tfc_solver_model_hash(const tfc_solver *s);

/* Applies one "KEY=VALUE" override to the document rooted at `root` (owned by `doc`): KEY is
 * a dotted path of mapping keys and list indices (`layers.6.Dropout.rate`, also
 * `layers[6]`); VALUE is parsed as YAML. Missing mapping keys are created (the validator
 * then rejects unknown ones, pointing at the --set); an index may equal a list's length to
 * append. Path errors name the --set and the path (TFC_ERR_CONFIG). `keep` receives the
 * document that owns the value (positions in errors refer to it); free it after `doc`'s
 * last use. */
tfc_status tfc_override_apply(tfc_doc *doc, tfc_node *root, const char *set, tfc_doc **keep,
                              tfc_error *err);

/* ---- running ------------------------------------------------------------------------- */

typedef enum tfc_run_status {
    TFC_RUN_COMPLETED = 0,
    TFC_RUN_INTERRUPTED,  /* stopped by opt->stop after writing a snapshot */
    TFC_RUN_DIVERGED,     /* non-finite loss or gradient */
    TFC_RUN_FAILED,       /* any other error */
    TFC_RUN_STOPPED_EARLY, /* early_stopping's patience ran out */
    TFC_RUN_PAUSED        /* reached opt->stop_at: snapshot written, resumable */
} tfc_run_status;

/* completed, interrupted, diverged, failed, stopped_early, paused */
extern const char *const tfc_run_status_names[];

/* Loss and metrics over one pass of a split, weighted by the rows each batch counted. */
typedef struct tfc_eval {
    double loss;
    double metric[TFC_MAX_METRICS];
    int64_t rows;      /* rows averaged (examples, or unmasked steps) */
    int64_t examples;
    int64_t skipped;   /* the split's bad records left out (on_error: skip), each once */
    char skipped_names[400]; /* where the first few were ("FILE record 17, ..."), or "" */
} tfc_eval;

/* The confusion matrix of a test pass, for single-label classifiers (sparse or one-hot
 * categorical cross-entropy, one row per example) and per-pixel ones (an output of images or
 * volumes of classes: one row per pixel, `rows` of them an example); classes 0 otherwise. */
typedef struct tfc_confusion {
    int classes;
    int64_t rows;      /* rows an example: 1, or its pixels */
    int64_t *counts;   /* [classes * classes]: row the true class, column the predicted */
    char **names;      /* the test source's class names, or NULL (indices are shown) */
} tfc_confusion;

/* Per class (or macro-averaged over all classes): precision, recall, F1 (0 where undefined,
 * scikit-learn's zero_division=0), support (true rows; macro: all rows) and the intersection
 * over union TP / (TP + FP + FN) (0 where undefined; macro: Keras's MeanIoU, the mean over
 * the classes that occur as truth or prediction). */
typedef struct tfc_class_stats {
    double precision, recall, f1, iou;
    int64_t support;
} tfc_class_stats;

void tfc_confusion_class(const tfc_confusion *cm, int c, tfc_class_stats *out);
void tfc_confusion_macro(const tfc_confusion *cm, tfc_class_stats *out);
/* The per-class table (with a macro row) and the matrix, class names when known. */
void tfc_confusion_print(const tfc_confusion *cm, FILE *f);
void tfc_confusion_free(tfc_confusion *cm);

typedef struct tfc_train_result {
    tfc_run_status status;
    int64_t iterations;         /* completed iterations (including resumed ones) */
    double wall_seconds;        /* including the time of resumed runs */
    double iterations_per_second; /* of this process */
    int ranks;                  /* processes of a data-parallel run (1: one) */
    uint64_t config_hash;       /* tfc_solver_config_hash of the run's resolved configuration */
    int rank_batch;             /* examples per batch of each rank: the batch / ranks */
    char run_dir[4096];
    int have_train, have_test;  /* final train (smoothed) and test results */
    tfc_eval train, test;
    int have_best;
    double best_value;
    int64_t best_iteration;
    char last_snapshot[4096];   /* state file of the newest snapshot, "" when none */
    int64_t stopped_iteration;  /* stopped_early: the iteration, and why */
    char stop_reason[512];
    int rollbacks;              /* divergences rolled back (rollback:) */
    double loss_scale;          /* precision float16: the dynamic loss scale now (else 0) */
    int64_t loss_scale_overflows; /* float16: updates skipped for non-finite gradients */
    const tfc_confusion *confusion; /* the last test's, while summary.json is written; NULL
                                       when tfc_solver_train returns */
    double input_bound;         /* share of this process's training time (tests excluded)
                                   its steps waited for their batches */
    int64_t skipped_train;      /* data.train's bad records left out (on_error: skip) */
    char input_slowest[800];    /* the train pipeline's slowest stage and what to try
                                   (tfc_pipeline_profile_advice), "" when nothing was timed */
} tfc_train_result;

/* Trains: creates the run directory, binds the model on the device, builds the pipelines,
 * initialises (or resumes), runs max_iter iterations and writes every file of SPEC §4.
 * Returns TFC_OK when the run completed or was interrupted by opt->stop (res->status tells);
 * on a non-finite loss TFC_ERR_NUMERIC (status diverged); other errors as they come
 * (status failed). summary.json is written in every case once the run directory exists.
 * res may be NULL (the status alone). */
tfc_status tfc_solver_train(tfc_solver *s, tfc_train_result *res, tfc_error *err);

/* Evaluates weights (strict load: every parameter must be in the file with its shape) on
 * the whole test split, on the solver's device. A solver without data.test is a
 * TFC_ERR_CONFIG. */
tfc_status tfc_solver_evaluate(tfc_solver *s, const char *weights, tfc_eval *out,
                               tfc_error *err);

/* tfc_solver_evaluate, also filling *cm (free it with tfc_confusion_free; classes 0 when
 * the model is no single-label classifier). */
tfc_status tfc_solver_evaluate_classes(tfc_solver *s, const char *weights, tfc_eval *out,
                                       tfc_confusion *cm, tfc_error *err);

/* The evaluation as one JSON object: loss, the model's metrics, examples, and with a
 * confusion matrix its macro precision/recall/f1, per_class and confusion. malloc'd text. */
char *tfc_solver_eval_json(tfc_solver *s, const tfc_eval *e, const tfc_confusion *cm);

/* "KEY: N bad records left out (on_error: skip), first: NAMES" ("" when n is 0). */
void tfc_format_skipped(const char *key, int64_t n, const char *names, char *buf, size_t size);
/* Formats "loss 0.2500  accuracy 0.9120" for the model's metrics. */
void tfc_solver_format_eval(tfc_solver *s, const tfc_eval *e, char *buf, size_t size);

/* The keys `tfc-ctl RUN_DIR set KEY=VALUE` may set while a run trains (NULL-terminated;
 * control.c). */
const char *const *tfc_control_keys(void);

/* ---- snapshot files (snapshot.c) ----------------------------------------------------- */

/* The two files of a snapshot: weights (SPEC §5) and the state a resume needs. */
typedef enum tfc_snapshot_file { TFC_SNAPSHOT_WEIGHTS, TFC_SNAPSHOT_STATE } tfc_snapshot_file;

/* The name of a snapshot file of iteration `iter`: RUN_DIR/PREFIX_iter_ITER.safetensors
 * (weights) or RUN_DIR/PREFIX_iter_ITER.state, into buf (truncated to `size` bytes).
 * PREFIX is the solver's snapshot.prefix (tfc_solver_get_config(s)->snapshot_prefix). */
void tfc_snapshot_path(const char *run_dir, const char *prefix, int64_t iter,
                       tfc_snapshot_file which, char *buf, size_t size);

/* The iteration N of a state file named [DIR/]PREFIX_iter_N.state, or -1 when `path` is
 * not named so. When dir_end is not NULL, *dir_end points at the '/' that ends DIR in
 * `path`, or is NULL when the name has no DIR. */
int64_t tfc_snapshot_parse(const char *path, const char *prefix, const char **dir_end);

/* The state file of the newest complete snapshot of run directory RUN_DIR (the highest N
 * of RUN_DIR/PREFIX_iter_N.state; a state file is written after its weights, so one that
 * exists is complete), where PREFIX is the snapshot.prefix of the resolved configuration
 * RUN_DIR/config.yaml that tfc-train wrote. "" when the folder holds none or has no
 * config.yaml (the run never started). An unreadable or invalid config.yaml is reported as
 * loading it reports (TFC_ERR_IO, TFC_ERR_CONFIG, ...). */
tfc_status tfc_snapshot_find_newest(const char *run_dir, char *state, size_t size,
                                    tfc_error *err);

/* The checksum a state file's "checksum" metadata holds when intact (8 lowercase hex digits
 * into out[9]): CRC-32 over its tensors and its other metadata (snapshot_io.c). */
tfc_status tfc_snapshot_checksum(const tfc_st_file *f, char out[9], tfc_error *err);

#endif
