/* Callbacks that watch a logged metric at each test evaluation, as Keras's do at each
 * epoch end: EarlyStopping (early_stopping.c) and ReduceLROnPlateau (plateau.c, the
 * `plateau` lr_policy). Each is a small config read from the solver file and a state of
 * plain numbers (saved in snapshots) stepped by a pure function, so tests replay Keras's
 * decision rules on scripted metric streams. */
#ifndef TFC_SOLVER_MONITOR_H
#define TFC_SOLVER_MONITOR_H

#include <stdint.h>

#include "core/schema.h"
#include "graph/model.h"

typedef enum tfc_monitor_mode { TFC_MODE_AUTO = 0, TFC_MODE_MIN, TFC_MODE_MAX } tfc_monitor_mode;
extern const char *const tfc_monitor_mode_names[]; /* auto, min, max; NULL-terminated */

/* A watched metric: `name` is PHASE/METRIC, PHASE test or train, METRIC loss or one of the
 * model's metrics. tfc_monitor_resolve fills the rest. */
typedef struct tfc_monitor {
    const char *name;
    int mode;           /* tfc_monitor_mode */
    int train;          /* 1: train/..., 0: test/... */
    int metric;         /* the model's metric index; -1: the loss */
    int higher;         /* 1: larger is better (max, or auto on an accuracy; auto is min on the
                         * loss and the errors mae and mse) */
} tfc_monitor;

/* Resolves m->name against the model's metrics and the mode: auto is min for the loss and
 * the errors (mae, mse), max for the accuracies (Keras's rule: the metric's direction). An
 * unknown name is a TFC_ERR_CONFIG at `node` naming `path` and listing the valid names. */
tfc_status tfc_monitor_resolve(tfc_monitor *m, const tfc_model *model, const tfc_node *node,
                               const char *path, tfc_error *err);

/* ---- early stopping (Keras EarlyStopping) ------------------------------------------------ */

typedef struct tfc_early_stopping {
    int enabled;        /* the solver file has `early_stopping:` */
    tfc_monitor monitor;
    double min_delta;   /* |min_delta|, as Keras */
    int patience;
    int have_baseline;
    double baseline;
    int start_from;     /* evaluations ignored at the start (Keras start_from_epoch) */
    int restore_best;   /* final.safetensors holds the best weights */
} tfc_early_stopping;

/* What a run carries between evaluations (and in its snapshots). */
typedef struct tfc_early_stopping_state {
    int64_t evals;          /* evaluations seen: Keras's epoch index of the next one */
    int64_t wait;
    int have_best;
    double best;
    int64_t best_eval;      /* evaluation index of the best */
    int64_t best_iteration; /* and its iteration */
    int64_t stopped_iteration; /* 0: not stopped */
} tfc_early_stopping_state;

/* The field table of `early_stopping:` (monitor, mode, patience, ...). */
extern const tfc_field tfc_early_stopping_fields[];

/* Reads `early_stopping:` (NULL or null: disabled) into `out`; the monitor is resolved
 * against the model's metrics. Errors name `path`. */
tfc_status tfc_early_stopping_read(const tfc_node *node, const char *path,
                                   const tfc_model *model, tfc_early_stopping *out,
                                   tfc_error *err);

enum { TFC_ES_IMPROVED = 1, TFC_ES_STOP = 2 };

/* One evaluation of the monitored value at iteration `iter`, by Keras's
 * EarlyStopping.on_epoch_end: returns TFC_ES_IMPROVED when `value` is the new best (the
 * caller keeps the weights), TFC_ES_STOP when patience ran out, 0 otherwise. */
int tfc_early_stopping_step(const tfc_early_stopping *c, tfc_early_stopping_state *st,
                            double value, int64_t iter);

/* ---- ReduceLROnPlateau ------------------------------------------------------------------- */

enum { TFC_THRESHOLD_REL = 0, TFC_THRESHOLD_ABS };
extern const char *const tfc_threshold_mode_names[]; /* rel, abs; NULL-terminated */

typedef struct tfc_plateau_state {
    double lr;              /* the current rate, before warm-up; starts at the base rate */
    int64_t wait;
    int64_t cooldown_counter;
    int have_best;
    double best;
} tfc_plateau_state;

/* The plateau policy's knobs (they live in tfc_lr_policy, optimizer.h). */
typedef struct tfc_plateau {
    tfc_monitor monitor;
    double factor, min_delta, min_lr;
    int patience, cooldown;
    int threshold_mode;     /* TFC_THRESHOLD_REL or _ABS (Keras: abs) */
} tfc_plateau;

/* One evaluation by Keras's ReduceLROnPlateau.on_epoch_end (PyTorch's rel threshold when
 * threshold_mode is rel): returns 1 when st->lr was reduced. */
int tfc_plateau_step(const tfc_plateau *p, tfc_plateau_state *st, double value);

/* ---- divergence rollback (rollback.c) -------------------------------------------------------- */

typedef struct tfc_rollback_config {
    int enabled;
    double lr_factor;
    int max_rollbacks;
} tfc_rollback_config;

extern const tfc_field tfc_rollback_fields[];
/* Reads `rollback:` (NULL or null: off, a divergence stops the run). */
tfc_status tfc_rollback_config_read(const tfc_node *node, tfc_rollback_config *out,
                                    tfc_error *err);

/* ---- weight averaging (ema.c) ------------------------------------------------------------ */

typedef struct tfc_ema_config {
    int enabled;
    double decay;
    int warmup;
} tfc_ema_config;

extern const tfc_field tfc_ema_fields[];
/* Reads `ema:` (NULL or null: off). */
tfc_status tfc_ema_config_read(const tfc_node *node, tfc_ema_config *out, tfc_error *err);
/* The decay of update k (0-based): 0 at k = 0 (a copy), then decay, or with warmup
 * min(decay, (1 + k) / (10 + k)). */
double tfc_ema_rate(const tfc_ema_config *c, int64_t k);

#endif
