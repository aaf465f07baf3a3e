/* The metric a callback watches (early_stopping, the plateau policy): its name checked
 * against the model's metrics and its direction, auto resolved as Keras's
 * MonitorCallback._set_monitor_op does (the loss falls; accuracies rise). */
#include "solver/monitor.h"

#include <stdio.h>
#include <string.h>

const char *const tfc_monitor_mode_names[] = {"auto", "min", "max", NULL};

tfc_status tfc_monitor_resolve(tfc_monitor *m, const tfc_model *model, const tfc_node *node,
                               const char *path, tfc_error *err)
{
    const char *name = m->name, *slash = strchr(name, '/');
    int phase_ok = slash && ((slash - name == 4 && !strncmp(name, "test", 4)) ||
                             (slash - name == 5 && !strncmp(name, "train", 5)));
    /* the metric's name: after test/ or train/, or Keras's log names, val_M for test/M and
     * M for train/M */
    const char *base = phase_ok ? slash + 1 : slash ? NULL
                       : !strncmp(name, "val_", 4) ? name + 4 : name;
    int found = 0, loss = 1;
    if (base) {
        m->train = phase_ok ? name[1] == 'r' : base == name;
        m->metric = -1;
        if (!strcmp(base, "loss")) found = 1;
        for (int i = 0; !found && i < tfc_model_nmetrics(model); i++)
            if (!strcmp(base, tfc_model_metric(model, i)->name)) {
                found = 1;
                m->metric = i;
                loss = tfc_metric_lower_is_better(tfc_model_metric(model, i));
            }
    }
    if (!found) {
        char known[512] = "test/loss, train/loss";
        size_t len = strlen(known);
        for (int i = 0; i < tfc_model_nmetrics(model) && len < sizeof known; i++) {
            const char *mn = tfc_model_metric(model, i)->name;
            len += (size_t)snprintf(known + len, sizeof known - len, ", test/%s, train/%s", mn, mn);
        }
        return tfc_node_error(err, TFC_ERR_CONFIG, node, path,
                              "unknown metric \"%s\"; expected one of %s (or Keras's names: "
                              "val_loss for test/loss, loss for train/loss)", name, known);
    }
    m->higher = m->mode == TFC_MODE_MAX || (m->mode == TFC_MODE_AUTO && !loss);
    return TFC_OK;
}
