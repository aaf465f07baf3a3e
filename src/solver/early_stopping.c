/* `early_stopping:` — Keras's EarlyStopping, counted in test evaluations instead of
 * epochs: its keys and defaults (monitor test/loss = val_loss, patience 0, min_delta 0,
 * baseline none, start_from 0 = start_from_epoch, restore_best false =
 * restore_best_weights), and on_epoch_end's decision rule, step for step. */
#include "solver/monitor.h"

#include <stddef.h>
#include <string.h>

typedef struct es_args {
    const char *monitor;
    int mode, patience, start_from, restore_best;
    double min_delta;
    const tfc_node *baseline;
} es_args;

#define ARG(member) offsetof(es_args, member)
const tfc_field tfc_early_stopping_fields[] = {
    {"monitor", TFC_F_STRING, ARG(monitor), "test/loss", TFC_UNBOUNDED, NULL,
     "the watched value: test/METRIC or train/METRIC (train: the latest display's)"},
    {"mode", TFC_F_ENUM, ARG(mode), "auto", TFC_UNBOUNDED, tfc_monitor_mode_names,
     "min, max, or auto: min for a loss, max for accuracies"},
    {"patience", TFC_F_INT, ARG(patience), "0", 0, 2147483647, NULL,
     "test evaluations without improvement before the run stops"},
    {"min_delta", TFC_F_FLOAT, ARG(min_delta), "0.0", -1e30, 1e30, NULL,
     "an improvement must beat the best by more than |min_delta|"},
    {"baseline", TFC_F_NODE, ARG(baseline), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "a value to beat: patience restarts only on improvements that also beat it; ~ = none"},
    {"start_from", TFC_F_INT, ARG(start_from), "0", 0, 2147483647, NULL,
     "test evaluations ignored at the start (Keras start_from_epoch)"},
    {"restore_best", TFC_F_BOOL, ARG(restore_best), "false", 0, 1, NULL,
     "final.safetensors holds the weights of the best evaluation"},
    {NULL}};

tfc_status tfc_early_stopping_read(const tfc_node *node, const char *path,
                                   const tfc_model *model, tfc_early_stopping *out,
                                   tfc_error *err)
{
    memset(out, 0, sizeof *out);
    if (!node || tfc_node_is_null(node)) return TFC_OK;
    if (node->kind != TFC_NODE_MAP)
        return tfc_node_error(err, TFC_ERR_CONFIG, node, path,
                              "expected a mapping such as {monitor: test/accuracy, patience: 5}");
    es_args a;
    if (tfc_schema_apply(tfc_early_stopping_fields, node, path, &a, err)) return TFC_ERR_CONFIG;
    out->enabled = 1;
    out->monitor.name = a.monitor;
    out->monitor.mode = a.mode;
    out->min_delta = a.min_delta < 0 ? -a.min_delta : a.min_delta;
    out->patience = a.patience;
    out->start_from = a.start_from;
    out->restore_best = a.restore_best;
    char sub[320];
    if (a.baseline && !tfc_node_is_null(a.baseline)) {
        snprintf(sub, sizeof sub, "%s.baseline", path);
        if (tfc_node_double(a.baseline, sub, &out->baseline, err)) return TFC_ERR_CONFIG;
        out->have_baseline = 1;
    }
    snprintf(sub, sizeof sub, "%s.monitor", path);
    const tfc_node *mnode = tfc_node_get(node, "monitor");
    return tfc_monitor_resolve(&out->monitor, model, mnode ? mnode : node, sub, err);
}

/* Keras's _is_improvement: monitor_op(value - min_delta, reference), min_delta negated for
 * a falling metric. A missing reference (have == 0) is always beaten. */
static int improves(const tfc_early_stopping *c, double value, int have, double reference)
{
    if (!have) return 1;
    return c->monitor.higher ? value - c->min_delta > reference
                             : value + c->min_delta < reference;
}

int tfc_early_stopping_step(const tfc_early_stopping *c, tfc_early_stopping_state *st,
                            double value, int64_t iter)
{
    int64_t epoch = st->evals++;
    if (epoch < c->start_from) return 0;
    st->wait++;
    if (improves(c, value, st->have_best, st->best)) {
        st->have_best = 1;
        st->best = value;
        st->best_eval = epoch;
        st->best_iteration = iter;
        /* Keras: wait restarts only when the value beats both the best and the baseline. */
        if (!c->have_baseline || improves(c, value, 1, c->baseline)) st->wait = 0;
        return TFC_ES_IMPROVED;
    }
    if (st->wait >= c->patience && epoch > 0) {
        st->stopped_iteration = iter;
        return TFC_ES_STOP;
    }
    return 0;
}
