/* The schedulers of tfc-grid as pure bookkeeping. Asynchronous successive halving (ASHA, Li
 * et al. 2020, "A System for Massively Parallel Hyperparameter Tuning", Algorithm 2) and
 * median pruning (Optuna's MedianPruner): tfc-grid asks one for the next job
 * and reports the metric each trial reached at a rung; no clock, no processes, so a table
 * test drives it with scripted curves. Rungs are at max_iter · eta^-k iterations down to
 * min_iter, the top being max_iter itself, so each promotion multiplies the iterations by
 * eta. */
#ifndef TFC_SOLVER_ASHA_H
#define TFC_SOLVER_ASHA_H

#include <stdint.h>

#include "core/error.h"

#define TFC_ASHA_MAX_RUNGS 32

typedef struct tfc_asha {
    int ntrials;
    int nrungs;                 /* rungs below the top; rung nrungs is max_iter */
    int64_t rung_iter[TFC_ASHA_MAX_RUNGS + 1];
    double eta;
    int higher_is_better;
    int *reached;               /* [ntrials]: the highest rung with a reported value, -1: none */
    double *value;              /* [ntrials][nrungs + 1]: the metric at each rung reached */
    unsigned char *promoted;    /* [ntrials][nrungs]: promoted out of rung k */
    unsigned char *busy;        /* [ntrials]: a job is running (or owed: see tfc_asha_next) */
    int next_new;               /* the next trial never started (trials start in order) */
} tfc_asha;

/* Rungs max_iter · eta^(k - s), k = 0..s, s = floor(log_eta(max_iter / min_iter)) (rounded,
 * duplicates dropped), the last max_iter; min_iter >= 1, eta > 1, at most TFC_ASHA_MAX_RUNGS
 * below the top. TFC_ERR_USAGE naming the bad value, or TFC_ERR_NOMEM. */
tfc_status tfc_asha_init(tfc_asha *a, int ntrials, int64_t min_iter, int64_t max_iter, double eta,
                         int higher_is_better, tfc_error *err);

/* The next job, ASHA's get_job: from the highest rung down, the best trial of rung k's top
 * floor(n_k / eta) (n_k: trials with a value at rung k; ties to the lower index) that was not
 * promoted yet and is not running is promoted to rung k + 1; else the next new trial starts
 * toward rung 0; else, when no trial runs and none reached the top (a grid of fewer than
 * eta^nrungs trials can end so), the best trial with a finite value at the highest rung
 * reached goes on, so a finite grid ends with one trial at max_iter. Returns 1 with *trial and
 * *rung (the rung the job trains to; nrungs = the end) and marks the trial busy, or 0 when no
 * job can start now. */
int tfc_asha_next(tfc_asha *a, int *trial, int *rung);

/* The trial's job ended at `rung` with `value` (the metric of its test there): it is no
 * longer busy. A value that is not finite ranks last. */
void tfc_asha_report(tfc_asha *a, int trial, int rung, double value);

/* The trial's job ended without reaching its rung (interrupted, failed): it is no longer
 * busy, and its promotion (or start) stands, so the caller restarts that job itself. */
void tfc_asha_release(tfc_asha *a, int trial);

/* Replaying a saved decision: the trial was given a job toward `rung` (a start for rung 0, a
 * promotion out of rung - 1 otherwise), as tfc_asha_next would have. */
void tfc_asha_replay_job(tfc_asha *a, int trial, int rung);

void tfc_asha_free(tfc_asha *a);

/* ---- Hyperband (Li et al. 2018, "Hyperband: A Novel Bandit-Based Approach to Hyperparameter
 * Optimization", Algorithm 1) ----------------------------------------------------------------
 * R = max_iter / min_iter, s_max = floor(log_eta R); stage j trains to max_iter · eta^(j-s_max)
 * iterations (j = 0..s_max, the last max_iter). Bracket s = s_max..0 takes the next
 * n = ceil((s_max + 1) / (s + 1) · eta^s) trials (fewer when they run out) from stage s_max - s;
 * it is successive halving: when every trial of its current stage reported, the best
 * floor(n_i / eta) of the n_i there go on to the next stage (at least one with a finite
 * value: a bracket the trials ran out for still ends at max_iter). Brackets run in order; with
 * several jobs a later bracket's jobs fill slots an earlier one cannot use. */
typedef struct tfc_hyperband {
    int ntrials, smax, nbrackets;
    int64_t stage_iter[TFC_ASHA_MAX_RUNGS + 1];
    double eta;
    int higher_is_better;
    int first[TFC_ASHA_MAX_RUNGS + 1], count[TFC_ASHA_MAX_RUNGS + 1]; /* a bracket's trials */
    int level[TFC_ASHA_MAX_RUNGS + 1];  /* the stage a bracket trains now */
    int *bracket;               /* [ntrials]: its bracket, -1: none (more trials than brackets take) */
    int *want, *have;           /* [ntrials]: the stage it is to train to / reported */
    double *value;              /* [ntrials][s_max + 1] */
    unsigned char *busy;        /* [ntrials] */
} tfc_hyperband;

tfc_status tfc_hyperband_init(tfc_hyperband *h, int ntrials, int64_t min_iter, int64_t max_iter,
                              double eta, int higher_is_better, tfc_error *err);
/* The next job: the first trial (bracket order) owed a stage, promoting a bracket whose stage
 * has every value in. 1 with *trial and *stage (busy), or 0 when none can start now. */
int tfc_hyperband_next(tfc_hyperband *h, int *trial, int *stage);
void tfc_hyperband_report(tfc_hyperband *h, int trial, int stage, double value);
/* Replaying a saved decision: the trial was given a job toward `stage`. */
void tfc_hyperband_replay_job(tfc_hyperband *h, int trial, int stage);
void tfc_hyperband_free(tfc_hyperband *h);

/* ---- median pruning (Optuna's MedianPruner) ---------------------------------------------------
 * Each trial trains from evaluation to evaluation (steps at step_iter[0..nsteps-1], the last
 * max_iter). After a trial reports step s, it is pruned when s >= warmup, at least `startup`
 * trials have completed, and its best value over its steps so far is worse than the median
 * (interpolated, as numpy.nanpercentile(.., 50)) of the completed trials' values at step s —
 * Optuna's PercentilePruner(50) with n_startup_trials = startup, n_warmup_steps = warmup (in
 * evaluations), interval_steps 1, n_min_trials 1. A non-finite value prunes. */
typedef struct tfc_pruner {
    int ntrials, nsteps;
    int64_t *step_iter;         /* [nsteps] */
    int warmup, startup, higher_is_better;
    double *value;              /* [ntrials][nsteps], NAN where not reported */
    int *next_step;             /* [ntrials]: the step its next job trains to */
    unsigned char *done;        /* [ntrials]: 1 completed, 2 pruned */
    unsigned char *busy;        /* [ntrials] */
    int ncompleted, next_new;
} tfc_pruner;

/* Steps every `interval` iterations below max_iter, then max_iter. */
tfc_status tfc_pruner_init(tfc_pruner *m, int ntrials, int64_t interval, int64_t max_iter,
                           int warmup, int startup, int higher_is_better, tfc_error *err);
/* The next job: a started, unfinished, idle trial's next step (lowest index first), else the
 * next new trial's first step. 1 with *trial and *step (marked busy), or 0. */
int tfc_pruner_next(tfc_pruner *m, int *trial, int *step);
/* The trial reached `step` with `value`; decides completed / pruned / goes on. */
void tfc_pruner_report(tfc_pruner *m, int trial, int step, double value);
void tfc_pruner_release(tfc_pruner *m, int trial);
/* Replaying a saved decision: the trial was given a job toward `step`. */
void tfc_pruner_replay_job(tfc_pruner *m, int trial, int step);
void tfc_pruner_free(tfc_pruner *m);

#endif
