/* Private to src/solver (and its tests): the solver object; the writers of the run
 * directory — TensorBoard event files, log.csv, summary.json — and the snapshot pair
 * (weights + state) with its checks and rotation; and the parts of a run, each with its
 * own state: batch feeding, evaluation, progress on the console, the run directory. */
#ifndef TFC_SOLVER_INTERNAL_H
#define TFC_SOLVER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "core/checksum.h"
#include "data/data.h"
#include "solver/solver.h"

#define TFC_MAX_SETS 256
#define TFC_STATE_FORMAT "tfc-state"
#define TFC_STATE_VERSION "1"
#define TFC_CALLBACK_STATE 15   /* doubles of early stopping, plateau, rollback and tfc-ctl state */

struct tfc_solver {
    tfc_solver_options opt;
    tfc_doc *solver_doc;        /* the solver file */
    tfc_doc *model_doc;         /* the model file, when `model:` names one */
    tfc_doc *doc;               /* the resolved configuration (owns root) */
    tfc_doc *set_docs[TFC_MAX_SETS]; /* one per --set: the parsed values */
    int nset_docs;
    tfc_node *root;
    tfc_solver_config cfg;
    tfc_model *model;
    char path[4096];            /* the solver file as given */
    char base_dir[4096];        /* absolute */
    char prefix[512];           /* snapshot prefix (the default filled in) */
    uint64_t config_hash, model_hash;
};

/* ---- TensorBoard event files (events.c) -------------------------------------------------- */

typedef struct tfc_events tfc_events;

/* Creates DIR/events.out.tfevents.<seconds>.<host>.<pid> and writes the file_version event
 * ("brain.Event:2"). With resume_step >= 0 a SessionLog START at that step follows, so
 * TensorBoard drops the older files' events after it. */
tfc_events *tfc_events_open(const char *dir, int64_t resume_step, tfc_error *err);
/* Appends one Event {wall_time, step, summary {value {tag, simple_value}}} and flushes. */
tfc_status tfc_events_scalar(tfc_events *ev, int64_t step, const char *tag, double value,
                             tfc_error *err);
/* The text plugin: `text` (markdown) as a string tensor under `tag`. */
tfc_status tfc_events_text(tfc_events *ev, int64_t step, const char *tag, const char *text,
                           tfc_error *err);
/* A histogram (HistogramProto: min, max, count, sum, sum of squares, 30 equal-width buckets)
 * of the finite values of v. */
tfc_status tfc_events_histogram(tfc_events *ev, int64_t step, const char *tag, const float *v,
                                int64_t n, tfc_error *err);
/* An image (its PNG bytes) under `tag`, for the Images tab. */
tfc_status tfc_events_image(tfc_events *ev, int64_t step, const char *tag, const void *png,
                            size_t len, int height, int width, int channels, tfc_error *err);
/* The model as a GraphDef (node per layer named after it, op its type, inputs its producers,
 * "_output_shapes" with the batch dimension -1, "parameters"), for the Graphs tab. */
tfc_status tfc_events_graph(tfc_events *ev, tfc_model *m, tfc_error *err);
/* The hparams plugin's session start (hparams: keys[i] = values[i], numbers and bools
 * typed as such) and end (status: 1 success, 2 failure, 3 running — api.proto's Status). */
tfc_status tfc_events_hparams_start(tfc_events *ev, const char *const *keys,
                                    const char *const *values, int n, tfc_error *err);
tfc_status tfc_events_hparams_end(tfc_events *ev, int status, tfc_error *err);
const char *tfc_events_path(const tfc_events *ev);
void tfc_events_close(tfc_events *ev);

/* The record bytes of one scalar Event (framing included) into buf (at least 64 + tag
 * length bytes); returns the length. Tests decode it independently. */
size_t tfc_events_encode_scalar(uint8_t *buf, double wall_time, int64_t step, const char *tag,
                                float value);

/* ---- log.csv and summary.json (runlog.c) ------------------------------------------------- */

typedef struct tfc_csv_log tfc_csv_log;

/* Opens DIR/log.csv with the header iter,phase,loss,<metrics>,lr,seconds. With keep_upto
 * >= 0 an existing log is kept up to (and including) that iteration and appended to;
 * rows after it and lines that are not whole rows (torn, or holding a NUL byte) are
 * dropped. */
tfc_csv_log *tfc_csv_open(const char *path, const char *const *metric_names, int nmetrics,
                          int64_t keep_upto, tfc_error *err);
/* The iteration of the last test row tfc_csv_open kept; -1: none. */
int64_t tfc_csv_last_test(const tfc_csv_log *log);
/* How many rows of the log at `path` are after iteration `iter` (0 when it is absent). */
int64_t tfc_csv_rows_after(const char *path, int64_t iter);
/* The `iterations` of the summary.json at `path`; -1 when it is absent or has none. */
int64_t tfc_summary_iterations(const char *path);
tfc_status tfc_csv_row(tfc_csv_log *log, int64_t iter, const char *phase, double loss,
                       const double *metrics, double lr, double seconds, tfc_error *err);
void tfc_csv_close(tfc_csv_log *log);

/* loss and the named metrics (a "loss" metric is not repeated) as a JSON object (json_t *). */
void *tfc_eval_json(const tfc_eval *e, const char *const *names, int n);
/* Writes summary.json (SPEC §4) atomically. `metric` names the best metric; `error`, when
 * not NULL, is recorded as "error". */
tfc_status tfc_summary_write(const char *path, const tfc_train_result *res,
                             const char *const *metric_names, int nmetrics,
                             const char *best_metric, const char *error, tfc_error *err);

/* ---- snapshots: the files (snapshot_io.c), the rotation (snapshot.c) ------------------------ */

/* Everything besides weights and optimizer slots that a resumed run needs. */
typedef struct tfc_snapshot_extra {
    int64_t iteration;          /* completed iterations */
    double elapsed;             /* wall seconds of the run so far */
    int have_best;
    double best_value;
    int64_t best_iteration;
    int window;                 /* loss smoothing window and its ring */
    double *losses;             /* [window] */
    int64_t losses_seen;
    double display[2 + TFC_MAX_METRICS]; /* since the last display: loss sum, rows, metric sums */
    void *pipeline;             /* the train pipeline's saved position (rank 0's / this rank's) */
    size_t pipeline_len;
    /* A data-parallel run whose train split is dealt among the ranks (each pipeline at its
     * own position): write: ranks 1.. of them in rank_pipeline[1..nrank_pipelines-1] as
     * "pipeline/train/rank<r>"; read: `rank` picks this rank's, "pipeline/train" for 0 or
     * when the state has no position of its own for it. */
    void **rank_pipeline;
    size_t *rank_pipeline_len;
    int nrank_pipelines;
    int rank;
    char *control;              /* tfc-ctl sets applied so far, "KEY=VALUE\n" each (write:
                                   borrowed, NULL = none; read: malloc'd or NULL) */
    int have_callbacks;         /* read: the state holds solver/callbacks (older ones do not) */
    float *ema;                 /* [ema_n] host: the weight average (write: NULL = none; read:
                                   malloc'd when the state has one, free it; the caller sets
                                   ema_n to the parameter count first) */
    int64_t ema_n;
    double callbacks[TFC_CALLBACK_STATE]; /* early stopping and plateau (callbacks.c) */
    int64_t last_test;          /* the iteration of the last finished test pass (-1: none; read:
                                   `iteration` when the state does not say, as older ones) */
    int have_loss_scale;        /* float16's dynamic loss scale: the scale, the finite updates
                                   since it last changed, the overflows skipped so far (write:
                                   0 = none; read: whether the state holds them) */
    double loss_scale[3];
    int have_train;             /* the latest display's train result: loss, then metrics */
    double train[1 + TFC_MAX_METRICS];
    double *counts;             /* the display's counted-metric counts, [ncounts] (write and
                                   read: the caller's; read: zeros where the state has none
                                   of that length, as a state written before they were) */
    int64_t ncounts;
} tfc_snapshot_extra;

/* The identity a state file must match to be resumed. */
typedef struct tfc_snapshot_id {
    const char *model_name;
    const char *optimizer;      /* its type name */
    uint64_t config_hash, model_hash;
    int ranks;                  /* processes of a data-parallel run (1: one) */
    const tfc_node *config;     /* the resolved configuration, recorded as YAML (or NULL) */
} tfc_snapshot_id;

/* Writes WEIGHTS (tfc_model_save_weights) and then STATE, both atomically: a safetensors
 * file with one tensor per optimizer slot and trainable parameter ("<slot>/<layer>/<var>"),
 * the solver counters ("solver/..."), the pipeline position ("pipeline/train", U8), and in
 * __metadata__ the format and its version, the optimizer type, the hashes, the weights file
 * name and its CRC-32C, and a checksum (CRC-32C over every tensor and the other metadata).
 * On failure the previous snapshot is untouched and a new weights file without its state is
 * removed. */
tfc_status tfc_snapshot_write(tfc_model *m, const tfc_optimizer *o, const tfc_snapshot_id *id,
                              const tfc_snapshot_extra *x, const char *weights_path,
                              const char *state_path, tfc_error *err);

/* Opens STATE and checks format, version and checksum (TFC_ERR_FORMAT, naming the problem),
 * then the identity: a different model or optimizer is refused (TFC_ERR_USAGE, saying
 * which); a different configuration hash only sets *config_differs. Then loads the weights
 * file it names (CRC-checked, strict), the optimizer slots, and fills `x` (its losses and
 * pipeline buffers are malloc'd: free them). `x->window` must be set by the caller to the
 * current smoothing window; a saved ring of another size is resized. */
tfc_status tfc_snapshot_read(tfc_model *m, tfc_optimizer *o, const tfc_snapshot_id *id,
                             const char *state_path, tfc_snapshot_extra *x, int *config_differs,
                             tfc_error *err);

/* What a state file (format, version and checksum checked) says of its run: the name of
 * its model in `model` and the resolved configuration it recorded in *config (malloc'd
 * YAML; NULL from a state written before tfc recorded it). */
tfc_status tfc_snapshot_origin(const char *state_path, char *model, size_t size, char **config,
                               tfc_error *err);

/* Checks a state file's format, version and checksum only (kill tests, tools). */
tfc_status tfc_snapshot_verify(const char *state_path, tfc_error *err);

/* CRC-32C of a whole file. */
tfc_status tfc_file_crc32c(const char *path, uint32_t *crc, tfc_error *err);

/* This run's complete snapshots, for rotation. */
typedef struct tfc_snapshot_set {
    const char *run_dir, *prefix; /* borrowed */
    int64_t *iters;               /* oldest first */
    int n, cap;
} tfc_snapshot_set;

/* Creates the folder of the snapshots (RUN_DIR/PREFIX less its last part), removes the
 * temporary files of snapshot writes a kill interrupted there, and with resumed_at >= 0
 * adopts the run's complete snapshots up to that iteration into the rotation. The strings
 * are borrowed: they must outlive the set. */
tfc_status tfc_snapshot_set_open(tfc_snapshot_set *set, const char *run_dir, const char *prefix,
                                 int64_t resumed_at, tfc_error *err);
/* Records the durable snapshot of `iter`, then deletes the oldest beyond the newest `keep`
 * (0: all stay), each state file before its weights, so a state never names missing
 * weights. */
void tfc_snapshot_set_rotate(tfc_snapshot_set *set, int64_t iter, int keep);
void tfc_snapshot_set_free(tfc_snapshot_set *set);

/* ---- batches (feed.c) ---------------------------------------------------------------------- */

/* The data splits as batches in the model's input and label layout. */
typedef struct tfc_feed {
    tfc_model *model;
    tfc_pipeline *train;         /* NULL when evaluating */
    tfc_pipeline *test;          /* NULL without data.test */
    tfc_pipeline *vocab_source;  /* evaluating without a run folder: the train split, built
                                    only for the vocabulary the test split tokenizes with */
    int bind_batch;              /* examples the model is bound for */
    int stage_batch;             /* the largest batch of the splits: the staging size */
    int64_t in_numel, label_numel; /* per example */
    void *x, *y;                 /* host staging of one batch: features, labels */
    int rank, nranks;            /* of a data-parallel run: each takes its rows of a batch */
    /* a model of several inputs (SPEC §1): input k's staging and size per example (xs[0] is
     * x, in_numels[0] in_numel), fed from the pipeline's input of the same name */
    void *xs[TFC_MODEL_MAX_INPUTS];
    int64_t in_numels[TFC_MODEL_MAX_INPUTS];
    /* a model of several outputs (SPEC §1): output k's labels' staging and size per example
     * (ys[0] is y, label_numels[0] label_numel), fed from the pipeline's label of its name */
    void *ys[TFC_MODEL_MAX_OUTPUTS];
    int64_t label_numels[TFC_MODEL_MAX_OUTPUTS];
} tfc_feed;

/* The staged inputs from example `at` on, one pointer per model input, for
 * tfc_model_forward_inputs and its kin. */
void tfc_feed_inputs(const tfc_feed *f, int64_t at, const void **xs);
/* The staged labels from example `at` on, one pointer per model output, for
 * tfc_model_loss_targets and its kin. */
void tfc_feed_targets(const tfc_feed *f, int64_t at, const void **ys);

/* Builds the pipelines of both splits (the test split tokenizes with the train split's
 * vocabulary), checks their element specs against the model before any data is read,
 * binds the model on `be` for the train batch and allocates the staging buffers. On error
 * `f` holds what was made: free it. */
tfc_status tfc_feed_for_training(tfc_feed *f, const tfc_solver *s, tfc_backend *be,
                                 tfc_error *err);
/* The same for evaluating `weights`: the test split alone, its vocabulary read from the
 * run folder of the weights or, without one, rebuilt from the train split; a test split
 * whose stages leave nothing is refused (tfc_pipeline_check_yields); the model is bound for
 * the test batch up to 256 examples. */
tfc_status tfc_feed_for_evaluation(tfc_feed *f, const tfc_solver *s, tfc_backend *be,
                                   const char *weights, tfc_error *err);
/* The next training batch into f->x / f->y, *n examples (of a data-parallel run: this
 * rank's rows of it); the train split is read again from its start when it ends, as
 * `repeat` would (an empty split is TFC_ERR_DATA). */
/* The adapt pass's reading of the train split (adapt.c): a pipeline of its own, built as the
 * training one (the same seed: the same order) but without its repeat stages, so that it
 * yields each example once; whole on every rank; tokenizing with the training pipeline's
 * vocabulary. *doc holds its configuration: free it after the pipeline (also on error,
 * where NULL is returned). _pass_batch: its next batch into f->x, all its rows; *n 0 at its
 * end. */
tfc_pipeline *tfc_feed_train_pass(const tfc_feed *f, const tfc_solver *s, tfc_doc **doc,
                                  tfc_error *err);
tfc_status tfc_feed_pass_batch(tfc_feed *f, tfc_pipeline *p, int *n, tfc_error *err);

/* A model mapping whose input.shape has a null time axis and no max_length gets
 * input.max_length (a node made in `doc`) from the train and test splits' stages where they
 * bound the features' length (max_length.c); otherwise it is left as it is. */
tfc_status tfc_solver_default_max_length(tfc_doc *doc, tfc_node *model, const tfc_node *train,
                                         const tfc_node *test, tfc_error *err);

tfc_status tfc_feed_train_batch(tfc_feed *f, int *n, tfc_error *err);
/* The next test batch into f->x / f->y, *n examples (this rank's rows); *more = 0 at the end
 * of the split (a rank may get *n = 0 rows of a small last batch with *more = 1). */
tfc_status tfc_feed_test_batch(tfc_feed *f, int *n, int *more, tfc_error *err);
/* Frees the pipelines and buffers and unbinds the model. */
void tfc_feed_free(tfc_feed *f);

/* ---- evaluation (evaluate.c) --------------------------------------------------------------- */

/* Opens the solver's device (opt->device, else the file's), applies its GPU options and
 * checks the op table. NULL on error. */
tfc_backend *tfc_solver_backend_open(const tfc_solver *s, tfc_error *err);
/* Whether the caller's stop flag (opt->stop) is raised. */
int tfc_solver_stop_requested(const tfc_solver *s);
/* One pass over the test split of `f` in inference mode: loss and metrics averaged over
 * the rows each batch counted; `cm` (NULL: none; its classes 0: skipped) gets the pass's
 * confusion matrix. A stop request cuts it short: *stopped = 1, `out` partial. */
tfc_status tfc_evaluate(tfc_feed *f, const tfc_solver *s, tfc_eval *out, tfc_confusion *cm,
                        int *stopped, tfc_error *err);

/* ---- confusion matrices (confusion.c) ------------------------------------------------------ */

/* Sized for `m` when it is a single-label classifier (else classes 0), with the class
 * names of `test` (may be NULL) when it has one per class. */
tfc_status tfc_confusion_init(tfc_confusion *cm, const tfc_model *m, const tfc_pipeline *test,
                              tfc_error *err);
void tfc_confusion_reset(tfc_confusion *cm);
/* Adds `rows` rows: the argmax of each output row against its label (int32 when sparse,
 * else the argmax of a one-hot row). */
void tfc_confusion_add(tfc_confusion *cm, const float *outputs, const void *labels, int sparse,
                       int64_t rows);
/* The JSON object of summary.json's final.test additions (a json_t *, new reference). */
void *tfc_confusion_json(const tfc_confusion *cm);

/* ---- progress (progress.c) ----------------------------------------------------------------- */

/* The console and the clock of a run, and the loss and metric sums it displays. */
typedef struct tfc_progress {
    const tfc_solver *s;         /* its max_iter and the model's metrics */
    FILE *con;                   /* the console; NULL once a write to it failed (EPIPE) */
    int live;                    /* a live line is redrawn between the plain ones */
    double t_start, elapsed0;    /* this process's start; wall seconds of resumed runs */
    double t_loop, excluded;     /* the loop's start; seconds of tests since */
    int64_t iter0;               /* the iteration the loop started at */
    double rate_t, live_t;       /* speed measured since; the last live line */
    int64_t rate_i;              /* the iteration at rate_t */
    int window;                  /* iterations the displayed loss is smoothed over */
    double *losses;              /* their ring */
    int64_t losses_seen;
    double disp[2 + TFC_MAX_METRICS]; /* since the last display: iterations, rows, metric sums */
    double *counts;              /* ... and the counted metrics' counts (tfc_model_ncounts) */
    int64_t ncounts;
    double input_wait;           /* seconds the steps waited for training batches since rate_t */
    double input_wait_run;       /* ... since the loop's start */
} tfc_progress;

/* Starts the clock; the smoothing window is average_loss, else display, else 1. */
tfc_status tfc_progress_init(tfc_progress *p, const tfc_solver *s, tfc_error *err);
/* Prints to the console (nothing without one), clearing the live line first. A failed write
 * (a closed pipe: `tfc-train ... | head`) stops the printing, never the run. */
void tfc_progress_say(tfc_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Keras's adapt before a fresh run trains (adapt.c): every layer of the model that adapts
 * (tfc_model_layer_adapts), in order, takes one pass of the train split (each example once:
 * its repeat stages left out; its other stages as they are) through the layers
 * before it in inference mode, and sets its weights from it; a layer whose weights the
 * --weights file `weights` (NULL: none) holds, every one of them, keeps them. Says what it
 * did on `prog`. */
tfc_status tfc_adapt_run(tfc_feed *f, const tfc_solver *s, const char *weights,
                         tfc_progress *prog, tfc_error *err);

/* Adds one batch's rows and metrics, then one iteration's loss. */
void tfc_progress_batch(tfc_progress *p, const tfc_batch_result *br);
void tfc_progress_iteration(tfc_progress *p, double loss);
/* Iterations since the last display. */
int64_t tfc_progress_pending(const tfc_progress *p);
/* The train result since the last display: the smoothed loss and the metrics' averages. */
void tfc_progress_train_result(const tfc_progress *p, tfc_eval *e);
/* Fills `e` as tfc_progress_train_result, prints the progress line of `iter` and starts a
 * new stretch of sums and speed. */
void tfc_progress_display(tfc_progress *p, int64_t iter, double lr, tfc_eval *e);
/* Redraws the live line (at most every 0.1 s, and at max_iter). */
void tfc_progress_live(tfc_progress *p, int64_t iter, double lr);
/* Clears the live line. */
void tfc_progress_end(tfc_progress *p);
/* Wall seconds of the run, resumed runs included. */
double tfc_progress_elapsed(const tfc_progress *p);
/* The loop starts at `iter`; `seconds` of testing count against neither speed. */
void tfc_progress_loop_start(tfc_progress *p, int64_t iter);
void tfc_progress_exclude(tfc_progress *p, double seconds);
/* Iterations per second of this process's loop, tests excluded; 0 before it started. */
double tfc_progress_speed(const tfc_progress *p, int64_t iter);
/* Into a snapshot's extra (the ring is borrowed), and back from one read with
 * x->window = p->window. */
void tfc_progress_save(const tfc_progress *p, tfc_snapshot_extra *x);
void tfc_progress_restore(tfc_progress *p, const tfc_snapshot_extra *x);
void tfc_progress_free(tfc_progress *p);

/* ---- the run directory (rundir.c) ---------------------------------------------------------- */

typedef struct tfc_rundir {
    const tfc_solver *s;
    char path[4096];
    int made;                    /* it exists: summary.json is written at the end */
    int locked, lock_fd;         /* its lock (tfc_dir_lock), held from open to close */
    tfc_csv_log *csv;
    tfc_events *ev;
} tfc_rundir;

/* Chooses the folder: opt->out_dir, else the run directory of a resumed state named as
 * this solver's snapshots are, else runs/<model name>-<YYYYmmdd-HHMMSS> (-2, -3, ... when
 * taken). */
void tfc_rundir_choose(tfc_rundir *d, const tfc_solver *s);
/* Creates the folder and takes its lock (a folder another process holds is refused naming
 * its pid, before anything in it changes: --overwrite, log.csv, temporaries, the control
 * FIFO), writes config.yaml and (with a vocabulary) vocabulary.txt, opens
 * log.csv and a new event file (with the config as text, the graph and the hparams
 * session's start); resumed_at >= 0 continues a run at that iteration (the log
 * keeps its rows up to it). */
tfc_status tfc_rundir_open(tfc_rundir *d, const tfc_vocab *vocab, int64_t resumed_at,
                           tfc_error *err);
/* A log.csv row and the TensorBoard scalars PHASE/loss and PHASE/<metric>; a "train" row
 * also the learning rate. */
tfc_status tfc_rundir_log(tfc_rundir *d, const char *phase, int64_t iter, const tfc_eval *e,
                          double lr, double seconds, tfc_error *err);
/* Histograms weights/<layer>/<param> and gradients/<layer>/<param> (the gradients times
 * grad_scale: the average over the accumulated batches and the ranks) at iteration iter. */
tfc_status tfc_rundir_histograms(tfc_rundir *d, int64_t iter, double grad_scale,
                                 tfc_error *err);
/* Images inputs/0, inputs/1, inputs/2 of the first examples of a batch `x` (n examples of
 * float32 (H, W, C), C 1, 3 or 4), each scaled from its own min..max to 0..255; nothing for
 * other inputs. */
tfc_status tfc_rundir_images(tfc_rundir *d, int64_t iter, const float *x, int n,
                             const tfc_shape *shape, tfc_error *err);
/* summary.json, once the folder exists (else nothing), and the hparams session's end in
 * the event file; `error` as tfc_summary_write. */
tfc_status tfc_rundir_summary(const tfc_rundir *d, const tfc_train_result *res,
                              const char *best_metric, const char *error, tfc_error *err);
void tfc_rundir_close(tfc_rundir *d); /* and releases the lock */

/* ---- callbacks at test evaluations (callbacks.c) ------------------------------------------- */

/* The run's early stopping and plateau state. */
typedef struct tfc_callbacks {
    tfc_early_stopping_state es;
    tfc_plateau_state plateau;
    double lr_scale;             /* the product of the rollbacks' lr_factor (1: none) */
    double lr_set;               /* tfc-ctl set optimizer.learning_rate (0: none) */
    int64_t rollbacks;
    int stop;                    /* early stopping ended the run */
} tfc_callbacks;

/* A fresh state: the plateau rate is the optimizer's learning_rate. */
void tfc_callbacks_init(tfc_callbacks *cb, const tfc_solver_config *c);
/* The base rate the lr policy starts from: the plateau's current rate, else lr_set or
 * learning_rate; times lr_scale. */
double tfc_callbacks_base_lr(const tfc_callbacks *cb, const tfc_solver_config *c);
/* Steps early stopping and the plateau with the test result `test` of iteration `iter`
 * (`train`: the latest display's, NULL before the first). With restore_best an
 * improvement writes RUN_DIR/early_stopping.safetensors (run_dir NULL: a rank that does
 * not write); patience running out sets
 * cb->stop and res's stop fields. Reductions and the stop are said on `prog`. */
tfc_status tfc_callbacks_test(tfc_callbacks *cb, tfc_solver *s, const char *run_dir,
                              const tfc_eval *test, const tfc_eval *train, int64_t iter,
                              tfc_train_result *res, tfc_progress *prog, tfc_error *err);
/* restore_best: loads RUN_DIR/early_stopping.safetensors into the model (the weights
 * final.safetensors then holds) and says so on `prog`; nothing without a best. */
tfc_status tfc_callbacks_restore_best(const tfc_callbacks *cb, tfc_solver *s,
                                      const char *run_dir, tfc_progress *prog, tfc_error *err);
/* Into and out of a snapshot's extra. */
void tfc_callbacks_save(const tfc_callbacks *cb, double *out);
void tfc_callbacks_load(tfc_callbacks *cb, const double *in);

/* ---- the moving average of the weights (ema.c) -------------------------------------------- */

/* The average of the parameter arena (n floats: trainable, then the others) on a device. */
typedef struct tfc_ema {
    tfc_ema_config cfg;
    tfc_backend *be;
    int64_t n;
    float *avg, *backup;   /* device; NULL when off */
    int started;           /* avg holds an average (0: the next update copies) */
    int swapped;           /* the parameters hold avg; backup the live weights */
} tfc_ema;

/* Allocates the average and its swap buffer when c->enabled (TFC_ERR_NOMEM names them). */
tfc_status tfc_ema_init(tfc_ema *e, const tfc_ema_config *c, tfc_backend *be, int64_t n,
                        tfc_error *err);
/* After update k: avg = d avg + (1 - d) params (d = tfc_ema_rate; a copy when not started). */
void tfc_ema_update(tfc_ema *e, const float *params, int64_t k);
/* Puts the average into `params` (keeping the live weights), and back. No-ops when off,
 * not started, or already so. */
void tfc_ema_swap_in(tfc_ema *e, float *params);
void tfc_ema_swap_out(tfc_ema *e, float *params);
void tfc_ema_release(tfc_ema *e);

/* ---- the control FIFO (control.c) ------------------------------------------------------- */

typedef struct tfc_control {
    int fd;                 /* -1: closed */
    char path[4200];
    char buf[512];          /* bytes read, not yet a whole line */
    size_t len;
} tfc_control;

/* Creates RUN_DIR/control (a FIFO; a stale one is replaced) and opens it without blocking. */
tfc_status tfc_control_open(tfc_control *c, const char *run_dir, tfc_error *err);
/* The next whole command line into `line` (without its newline): 1, or 0 when none waits. */
int tfc_control_poll(tfc_control *c, char *line, size_t size);
/* Closes and removes the FIFO. */
void tfc_control_close(tfc_control *c);
/* tfc-ctl `set KEY=VALUE` of a solver key a running trainer takes (those a resume may change
 * too: max_iter >= 1, display, test_interval, snapshot.interval >= 0, clip_gradients >= 0;
 * optimizer.learning_rate is the trainer's own): applied to `c`, 1; refused, 0 with the
 * reason in `why`. */
int tfc_control_apply(tfc_solver_config *c, const char *assignment, char *why, size_t size);
/* The keys tfc-ctl set takes, for messages and help. */
const char *tfc_control_settable_keys(void);

/* ---- what a resume changes (resume_diff.c) --------------------------------------------- */

/* What resuming STATE with the solver's resolved configuration changes: the differences
 * from the configuration the state recorded (from a state that recorded none, its run
 * directory's config.yaml, found from the state's name) as "  path: old -> new" lines in
 * *changes (malloc'd, NULL when none or nothing to compare), "  (refused)" after those the
 * state does not fit (the model, data, iter_size, optimizer keys but learning_rate),
 * counted in *nrefused. A state of another model sets `owner` to that model's name (else
 * ""). An unreadable or corrupt state is an error. */
tfc_status tfc_resume_diff(const tfc_solver *s, const char *state, char **changes,
                           int *nrefused, char *owner, size_t owner_size, tfc_error *err);

/* ---- summing gradients over the ranks (grad_comm.c) ------------------------------------- */

typedef struct tfc_gpu_nccl tfc_gpu_nccl;

/* The engine a run's gradient sums take: the world's (`self`, `mpi`; a GPU's arena staged
 * through `staged` host memory) or `nccl` on the device. */
typedef struct tfc_grad_comm {
    tfc_comm *world;
    tfc_backend *be;
    int host;            /* the arena is host memory (CPU backend) */
    int ordered;         /* deterministic: rank-order sums */
    float *staged;       /* a GPU arena's host copy (mpi), malloc'd on first use */
    tfc_gpu_nccl *nccl;  /* the nccl engine, or NULL */
} tfc_grad_comm;

/* Picks the engine for `be`'s gradients (TFC_COMM=auto|mpi|nccl; nccl by default for GPU
 * ranks of a build with NCCL unless `deterministic`), opening NCCL's communicator (every rank
 * calls this). TFC_ERR_USAGE for a TFC_COMM this run cannot have, naming why. */
tfc_status tfc_grad_comm_open(tfc_grad_comm *g, tfc_comm *world, tfc_backend *be,
                              int deterministic, tfc_error *err);
/* "self", "mpi" or "nccl". */
const char *tfc_grad_comm_name(const tfc_grad_comm *g);
/* Sums the n floats of the backend buffer `grads` over the ranks, in place. */
tfc_status tfc_grad_comm_sum(tfc_grad_comm *g, float *grads, int64_t n, tfc_error *err);
void tfc_grad_comm_close(tfc_grad_comm *g);

#endif
