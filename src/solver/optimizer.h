/* Optimizers and learning-rate policies: the `optimizer:` and `lr_policy:` mappings of a
 * solver file (SPEC §2), each type with its own field table (Keras's names and defaults for
 * optimizers, Caffe's formulas for the policies), and the step that updates the flat
 * arena of trainable parameters through the backend's fused optimizer_update op. */
#ifndef TFC_SOLVER_OPTIMIZER_H
#define TFC_SOLVER_OPTIMIZER_H

#include <stdint.h>

#include "core/backend.h"
#include "core/schema.h"
#include "solver/monitor.h"

/* ---- optimizers ------------------------------------------------------------------------- */

/* tfc_optimizer_type (TFC_OPTIMIZER_SGD, ...) is in core/backend.h: one enum names both the
 * configured type and the backend's update rule. */
extern const char *const tfc_optimizer_names[TFC_OPTIMIZER_COUNT + 1]; /* NULL-terminated */

/* The most patterns muon's exclude_layers holds */
#define TFC_OPTIM_EXCLUDES 16

/* Every hyperparameter any type takes; a type's table fills only its own. */
typedef struct tfc_optimizer_config {
    int type;                          /* tfc_optimizer_type */
    const tfc_node *type_node;         /* the table's `type` (read before the table) */
    const char *name;                  /* Keras's `name`, or NULL */
    double learning_rate;
    double momentum;                   /* sgd, rmsprop */
    int nesterov;                      /* sgd */
    double beta_1, beta_2, epsilon;    /* adam, adamw, nadam, adamax, lion (no epsilon);
                                        * epsilon also rmsprop, adagrad, adadelta */
    int amsgrad;                       /* adam, adamw */
    double weight_decay;               /* any type: Keras 3's decoupled decay (0: none) */
    double clipvalue;                  /* any type: Keras's clipvalue (0: none) */
    double rho;                        /* rmsprop, adadelta */
    int centered;                      /* rmsprop */
    double initial_accumulator_value;  /* adagrad, ftrl */
    double lr_power, l1, l2, l2_shrinkage, ftrl_beta; /* ftrl: learning_rate_power, ... */
    double beta_2_decay, epsilon_2, clip_threshold;   /* adafactor (epsilon: epsilon_1) */
    int relative_step;                                /* adafactor: no effect (Keras 3's) */
    int warmup_steps;                                 /* schedulefreeadamw */
    /* muon (beta_1, beta_2: adam_beta_1, _2; momentum, nesterov, weight_decay its own) */
    double adam_weight_decay, muon_a, muon_b, muon_c, adam_lr_ratio, rms_rate;
    int ns_steps, exclude_embeddings;
    const tfc_node *rms_rate_node, *exclude_node;      /* the table's; read after it */
    int nexclude;                                      /* exclude_layers: regular expressions */
    char exclude[TFC_OPTIM_EXCLUDES][96];
    /* learning_rate as written: a number, or a Keras schedule (a mapping) that the solver
     * reads as its lr_policy (tfc_lr_schedule_read), learning_rate then its initial rate */
    const tfc_node *lr_node;
    const tfc_node *lr_schedule; /* the mapping, or NULL */
} tfc_optimizer_config;

/* The field table of one optimizer type (its `type` key included), for help and docs. */
const tfc_field *tfc_optimizer_fields(tfc_optimizer_type type);

/* Reads an `optimizer:` value: a mapping with `type` (default sgd) and that type's keys, a
 * bare type name (`optimizer: adam`), or Keras's serialized optimizer ({class_name: Adam,
 * config: {...}}, with module and registered_name); a name is tfc's or Keras's class name,
 * in any case. Errors name `path` and point at the YAML. */
tfc_status tfc_optimizer_config_read(const tfc_node *node, const char *path,
                                     tfc_optimizer_config *out, tfc_error *err);

/* An optimizer bound to a backend: the state vectors ("slots") of n trainable floats. */
typedef struct tfc_optimizer {
    tfc_optimizer_config cfg;
    tfc_backend *be;
    int64_t n;
    int nslots;
    float *slot[3];             /* device memory; NULL when the type does not use it */
    const char *slot_name[3];   /* Keras's variable names: momentum, velocity, ... */
    /* nadam: Keras's u_product (the momentum schedule's running product, a float32 product
     * as Keras keeps it) after update u_iter, a function of the step alone: recomputed
     * from 1 when a step is not the next one (a resumed run), so snapshots need not hold it */
    float u_product;
    int64_t u_iter;
    /* the variables of the arena (tfc_optimizer_set_vars), for lamb's and adafactor's
     * per-variable rules; NULL: the arena is one vector */
    tfc_optim_var *vars;
    int nvars;
} tfc_optimizer;

/* How many state vectors of n floats the configuration allocates (0 to 3). */
int tfc_optimizer_slot_count(const tfc_optimizer_config *cfg);

/* Allocates and initialises the slots (zeros; adagrad's and ftrl's accumulator starts at
 * initial_accumulator_value). TFC_ERR_NOMEM names the size. A type that has not run under
 * make test-gpu yet (tfc_optimizer_cpu_first) on a GPU backend is TFC_ERR_CONFIG naming it. */
tfc_status tfc_optimizer_init(tfc_optimizer *o, const tfc_optimizer_config *cfg, tfc_backend *be,
                              int64_t n, tfc_error *err);
void tfc_optimizer_release(tfc_optimizer *o);

/* Tells the optimizer how its n floats split into variables (one per trainable weight, in
 * arena order, with Keras's shape folded as tfc_optim_var says, matrix set for a weight of
 * rank 2), which lamb's, adafactor's and muon's rules work over; until then the arena is
 * one vector of rank 1. paths (may be NULL): each variable's Keras path, `layer/weight`,
 * which muon matches against exclude_layers and, with exclude_embeddings, "embedding" (as
 * Keras's _should_use_adamw): a match clears matrix. The table is copied. TFC_ERR_USAGE
 * when the variables do not tile [0, n) in order. */
tfc_status tfc_optimizer_set_vars(tfc_optimizer *o, const tfc_optim_var *vars, int nvars,
                                  const char *const *paths, tfc_error *err);

/* Applies one update, the `iter`-th (0-based: Adam's bias correction uses t = iter + 1), with
 * learning rate `lr`. The applied gradient is grad_scale * grads + l2 * params (grads
 * itself is not modified). */
void tfc_optimizer_step(tfc_optimizer *o, int64_t iter, double lr, double grad_scale, double l2,
                        float *params, const float *grads);

/* The same update with grad_scale and the skip flag read on the device from st (the
 * backend's optimizer_update_at, TFC_BACKEND_STEP_OPS): no update at all while st->skip.
 * With rates_at_state the rates too (st->lr, alpha, decay, which the caller wrote there
 * from tfc_optimizer_rates; iter and lr then serve nothing but the unread desc): what a
 * step replayed from a CUDA graph needs (solver/train.c). */
void tfc_optimizer_step_at(tfc_optimizer *o, int64_t iter, double lr, const tfc_step_state *st,
                           double l2, float *params, const float *grads, int rates_at_state);

/* The `iter`-th update's rates as tfc_optimizer_step passes them: learning rate, Adam's
 * bias-corrected step size (alpha) and the decoupled decay, the same floats; then coef, the
 * type's per-step constants (tfc_optim_desc.coef). tfc_step_state holds them in that order,
 * with its loss_scale between the two. */
void tfc_optimizer_rates(tfc_optimizer *o, int64_t iter, double lr, float rates[3],
                         float coef[TFC_OPTIM_COEFS]);

/* 1 where the type's kernels have not yet run on a GPU under make test-gpu (nadam, adamax,
 * lion, adadelta, ftrl) or the GPU has none (lamb, adafactor): tfc_optimizer_init refuses
 * them on a GPU backend. */
int tfc_optimizer_cpu_first(tfc_optimizer_type type);

/* ---- learning-rate policies ---------------------------------------------------------------- */

typedef enum tfc_lr_type {
    TFC_LR_FIXED = 0,
    TFC_LR_STEP,
    TFC_LR_MULTISTEP,
    TFC_LR_EXP,
    TFC_LR_INV,
    TFC_LR_POLY,
    TFC_LR_COSINE,
    TFC_LR_PLATEAU,
    /* Keras 3's keras.optimizers.schedules, the base rate as initial_learning_rate */
    TFC_LR_EXPONENTIAL_DECAY,
    TFC_LR_INVERSE_TIME_DECAY,
    TFC_LR_POLYNOMIAL_DECAY,
    TFC_LR_PIECEWISE_CONSTANT_DECAY,
    TFC_LR_COSINE_DECAY_RESTARTS,
    TFC_LR_COUNT
} tfc_lr_type;

extern const char *const tfc_lr_policy_names[TFC_LR_COUNT + 1]; /* NULL-terminated */

typedef struct tfc_lr_policy {
    int type;            /* tfc_lr_type */
    double gamma;        /* step, multistep, exp, inv */
    double power;        /* inv, poly */
    int step_size;       /* step */
    tfc_int_list steps;  /* multistep: increasing iterations */
    int max_iter;        /* poly, cosine: the horizon; 0 = the solver's max_iter */
    double alpha;        /* cosine: the final rate as a fraction of the base rate */
    int warmup_iters;    /* linear warm-up over the first warmup_iters iterations */
    tfc_plateau plateau; /* plateau: stepped at test evaluations (monitor.h) */
    /* Keras's schedules: decay_steps (cosine_decay_restarts' first_decay_steps), decay_rate,
     * staircase (exponential, inverse time), end_learning_rate and cycle (polynomial),
     * boundaries and values (piecewise constant: absolute rates), t_mul, m_mul and alpha
     * (restarts); name, Keras's, accepted and unused */
    int decay_steps, staircase, cycle;
    double decay_rate, end_lr, t_mul, m_mul;
    /* cosine: Keras's CosineDecay warm-up, a linear climb from the base rate to
     * warmup_target over warmup_steps, the decay then from warmup_target (NULL: none) */
    const tfc_node *warmup_target_node;
    double warmup_target;
    int warmup_steps;
    tfc_int_list boundaries;
    tfc_float_list values;
    const char *name;
    const tfc_node *type_node; /* the table's `type` (tfc_lr_policy_read reads it) */
} tfc_lr_policy;

const tfc_field *tfc_lr_policy_fields(tfc_lr_type type);

/* Reads an `lr_policy:` value: a mapping with `type` (default fixed) and that policy's keys,
 * or a bare name (`lr_policy: cosine`); Keras's class names (ExponentialDecay, CosineDecay,
 * ...) name the policies they are. multistep's steps and piecewise_constant_decay's
 * boundaries must increase, its values be one more than its boundaries. */
tfc_status tfc_lr_policy_read(const tfc_node *node, const char *path, tfc_lr_policy *out,
                              tfc_error *err);

/* A Keras schedule given as the optimizer's learning_rate (`node`, a mapping, at `path`):
 * `{ExponentialDecay: {initial_learning_rate: 0.1, decay_steps: 1000, decay_rate: 0.96}}`
 * or Keras's serialized `{class_name: ExponentialDecay, config: {...}}` (module and
 * registered_name accepted). One of Keras's six schedules (by class name or tfc's policy
 * name); its arguments but initial_learning_rate are the policy's keys (*out, as
 * tfc_lr_policy_read reads them), and initial_learning_rate (PiecewiseConstantDecay: its
 * first value) goes into *base_lr. */
tfc_status tfc_lr_schedule_read(const tfc_node *node, const char *path, tfc_lr_policy *out,
                                double *base_lr, tfc_error *err);

/* The learning rate of iteration `iter` (0-based, the update about to be made), as Caffe's
 * SGDSolver::GetLearningRate computes it from base_lr, times the warm-up factor
 * min(1, (iter + 1) / warmup_iters). `max_iter` is the solver's. plateau returns base_lr
 * (times warm-up): the caller passes the rate its tfc_plateau_state holds. */
double tfc_lr_at(const tfc_lr_policy *p, double base_lr, int64_t iter, int64_t max_iter);

#endif
