/* Private to src/solver (and its tests): the solver object, and the writers of the run
 * directory — TensorBoard event files, log.csv, summary.json — and the snapshot pair
 * (weights + state) with its checks. */
#ifndef TFC_SOLVER_INTERNAL_H
#define TFC_SOLVER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/checksum.h"
#include "solver/solver.h"

#define TFC_MAX_SETS 256
#define TFC_STATE_FORMAT "tfc-state"
#define TFC_STATE_VERSION "1"

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
 * rows after it and a torn last line are dropped. */
tfc_csv_log *tfc_csv_open(const char *path, const char *const *metric_names, int nmetrics,
                          int64_t keep_upto, tfc_error *err);
tfc_status tfc_csv_row(tfc_csv_log *log, int64_t iter, const char *phase, double loss,
                       const double *metrics, double lr, double seconds, tfc_error *err);
void tfc_csv_close(tfc_csv_log *log);

/* Writes summary.json (SPEC §4) atomically. `metric` names the best metric; `error`, when
 * not NULL, is recorded as "error". */
tfc_status tfc_summary_write(const char *path, const tfc_train_result *res,
                             const char *const *metric_names, int nmetrics,
                             const char *best_metric, const char *error, tfc_error *err);

/* ---- snapshots (snapshot.c) ---------------------------------------------------------------- */

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
    void *pipeline;             /* the train pipeline's saved position */
    size_t pipeline_len;
} tfc_snapshot_extra;

/* The identity a state file must match to be resumed. */
typedef struct tfc_snapshot_id {
    const char *model_name;
    const char *optimizer;      /* its type name */
    uint64_t config_hash, model_hash;
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

/* Checks a state file's format, version and checksum only (kill tests, tools). */
tfc_status tfc_snapshot_verify(const char *state_path, tfc_error *err);

/* CRC-32C of a whole file. */
tfc_status tfc_file_crc32c(const char *path, uint32_t *crc, tfc_error *err);

#endif
