/* The run's side of early stopping and the plateau policy: at each test evaluation the
 * monitored value is picked from the test result (or the latest display's train result),
 * both state machines are stepped (early_stopping.c, plateau.c), the best weights are kept
 * for restore_best in RUN_DIR/early_stopping.safetensors, and the state goes into snapshots
 * as TFC_CALLBACK_STATE doubles. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "solver/internal.h"

void tfc_callbacks_init(tfc_callbacks *cb, const tfc_solver_config *c)
{
    memset(cb, 0, sizeof *cb);
    cb->plateau.lr = c->optimizer.learning_rate;
    cb->lr_scale = 1.0;
}

double tfc_callbacks_base_lr(const tfc_callbacks *cb, const tfc_solver_config *c)
{
    double base = cb->lr_set > 0 ? cb->lr_set : c->optimizer.learning_rate;
    return cb->lr_scale * (c->lr_policy.type == TFC_LR_PLATEAU ? cb->plateau.lr : base);
}

/* The monitored value; 0 when there is none yet (a train value before the first display). */
static int monitored(const tfc_monitor *m, const tfc_eval *test, const tfc_eval *train,
                     double *value)
{
    const tfc_eval *e = m->train ? train : test;
    if (!e) return 0;
    *value = m->metric >= 0 ? e->metric[m->metric] : e->loss;
    return 1;
}

static void best_path(const char *run_dir, char *buf, size_t size)
{
    snprintf(buf, size, "%s/early_stopping.safetensors", run_dir);
}

static tfc_status step_early_stopping(tfc_callbacks *cb, tfc_solver *s, const char *run_dir,
                                      double value, int have, int64_t iter,
                                      tfc_train_result *res, tfc_progress *prog, tfc_error *err)
{
    const tfc_early_stopping *c = &s->cfg.early_stopping;
    if (!have) {
        /* Keras: no value, no decision; the epoch still counts. */
        cb->es.evals++;
        return TFC_OK;
    }
    int r = tfc_early_stopping_step(c, &cb->es, value, iter);
    if ((r & TFC_ES_IMPROVED) && c->restore_best && run_dir) {
        char path[4200];
        best_path(run_dir, path, sizeof path);
        return tfc_model_save_weights(s->model, path, err);
    }
    if (r & TFC_ES_STOP) {
        cb->stop = 1;
        res->stopped_iteration = iter;
        snprintf(res->stop_reason, sizeof res->stop_reason,
                 "%s did not improve by more than %g for %lld test evaluations (patience %d); "
                 "best %.6g at iteration %lld",
                 c->monitor.name, c->min_delta, (long long)cb->es.wait, c->patience,
                 cb->es.best, (long long)cb->es.best_iteration);
        tfc_progress_say(prog, "early stopping at iteration %lld: %s\n", (long long)iter,
                         res->stop_reason);
    }
    return TFC_OK;
}

tfc_status tfc_callbacks_test(tfc_callbacks *cb, tfc_solver *s, const char *run_dir,
                              const tfc_eval *test, const tfc_eval *train, int64_t iter,
                              tfc_train_result *res, tfc_progress *prog, tfc_error *err)
{
    const tfc_solver_config *c = &s->cfg;
    double value = 0;
    if (c->lr_policy.type == TFC_LR_PLATEAU &&
        monitored(&c->lr_policy.plateau.monitor, test, train, &value)) {
        double old = cb->plateau.lr;
        if (tfc_plateau_step(&c->lr_policy.plateau, &cb->plateau, value))
            tfc_progress_say(prog, "plateau: %s did not improve for %d test evaluations; "
                                   "learning rate %g -> %g\n",
                             c->lr_policy.plateau.monitor.name, c->lr_policy.plateau.patience,
                             old, cb->plateau.lr);
    }
    if (!c->early_stopping.enabled) return TFC_OK;
    int have = monitored(&c->early_stopping.monitor, test, train, &value);
    return step_early_stopping(cb, s, run_dir, value, have, iter, res, prog, err);
}

tfc_status tfc_callbacks_restore_best(const tfc_callbacks *cb, tfc_solver *s,
                                      const char *run_dir, tfc_progress *prog, tfc_error *err)
{
    const tfc_early_stopping *c = &s->cfg.early_stopping;
    if (!c->enabled || !c->restore_best || !cb->es.have_best) return TFC_OK;
    char path[4200];
    best_path(run_dir, path, sizeof path);
    if (access(path, R_OK) != 0)
        return tfc_error_set(err, TFC_ERR_IO,
                             "early_stopping.restore_best: %s is missing (a run resumed into "
                             "another folder keeps it in the first one)",
                             path);
    tfc_status st = tfc_model_load_weights(s->model, path, NULL, err);
    if (!st)
        tfc_progress_say(prog, "restoring the weights of the best evaluation: %s %.6g at "
                               "iteration %lld\n",
                         c->monitor.name, cb->es.best, (long long)cb->es.best_iteration);
    return st;
}

void tfc_callbacks_save(const tfc_callbacks *cb, double *out)
{
    const tfc_early_stopping_state *e = &cb->es;
    const tfc_plateau_state *p = &cb->plateau;
    double v[TFC_CALLBACK_STATE] = {
        (double)e->evals, (double)e->wait, e->have_best, e->best, (double)e->best_eval,
        (double)e->best_iteration, (double)e->stopped_iteration,
        p->lr, (double)p->wait, (double)p->cooldown_counter, p->have_best, p->best,
        cb->lr_scale, (double)cb->rollbacks, cb->lr_set};
    memcpy(out, v, sizeof v);
}

void tfc_callbacks_load(tfc_callbacks *cb, const double *in)
{
    tfc_early_stopping_state *e = &cb->es;
    tfc_plateau_state *p = &cb->plateau;
    e->evals = (int64_t)in[0];
    e->wait = (int64_t)in[1];
    e->have_best = in[2] != 0;
    e->best = in[3];
    e->best_eval = (int64_t)in[4];
    e->best_iteration = (int64_t)in[5];
    e->stopped_iteration = (int64_t)in[6];
    p->lr = in[7];
    p->wait = (int64_t)in[8];
    p->cooldown_counter = (int64_t)in[9];
    p->have_best = in[10] != 0;
    p->best = in[11];
    cb->lr_scale = in[12];
    cb->rollbacks = (int64_t)in[13];
    cb->lr_set = in[14];
}
