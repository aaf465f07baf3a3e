/* `rollback: {lr_factor, max_rollbacks}`: what a run does on a non-finite loss or gradient
 * instead of stopping — it reloads its newest snapshot (weights, optimizer, pipeline
 * position, counters), multiplies the learning rate by lr_factor (kept in later snapshots)
 * and goes on, at most max_rollbacks times; then it stops as diverged. The loop's side is
 * train.c's roll_back. */
#include <string.h>

#include "solver/monitor.h"

typedef struct rollback_args {
    double lr_factor;
    int max_rollbacks;
} rollback_args;

const tfc_field tfc_rollback_fields[] = {
    {"lr_factor", TFC_F_FLOAT, offsetof(rollback_args, lr_factor), "0.5", 1e-300, 1, NULL,
     "the learning rate is multiplied by it at each rollback"},
    {"max_rollbacks", TFC_F_INT, offsetof(rollback_args, max_rollbacks), "3", 1, 1000000, NULL,
     "rollbacks in the whole run; the next divergence stops it"},
    {NULL}};

tfc_status tfc_rollback_config_read(const tfc_node *node, tfc_rollback_config *out,
                                    tfc_error *err)
{
    memset(out, 0, sizeof *out);
    if (!node || tfc_node_is_null(node)) return TFC_OK;
    if (node->kind != TFC_NODE_MAP)
        return tfc_node_error(err, TFC_ERR_CONFIG, node, "rollback",
                              "expected a mapping such as {lr_factor: 0.5, max_rollbacks: 3}");
    rollback_args a;
    if (tfc_schema_apply(tfc_rollback_fields, node, "rollback", &a, err)) return TFC_ERR_CONFIG;
    out->enabled = 1;
    out->lr_factor = a.lr_factor;
    out->max_rollbacks = a.max_rollbacks;
    return TFC_OK;
}
