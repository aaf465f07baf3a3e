/* The memory a training run holds, from the model's plan and the solver's options: what
 * tfc-summary predicts and tfc-train states before its first step. */
#include "solver/internal.h"

#include <string.h>

int tfc_solver_rank_batch(const tfc_solver *s, int ranks)
{
    int64_t b = s->cfg.train_plan.batch_size;
    if (ranks < 1) ranks = 1;
    return b > 0 && b % ranks == 0 && b / ranks <= INT32_MAX ? (int)(b / ranks) : 0;
}

void tfc_solver_memory(const tfc_solver *s, const tfc_memory_plan *model,
                       tfc_training_memory *out)
{
    const tfc_model *m = s->model;
    memset(out, 0, sizeof *out);
    out->model = *model;
    out->optimizer_slots = tfc_optimizer_slot_count(&s->cfg.optimizer);
    out->optimizer = (size_t)out->optimizer_slots * (size_t)tfc_model_trainable_count(m) * 4;
    out->ema = s->cfg.ema.enabled ? 2 * (size_t)tfc_model_param_count(m) * 4 : 0;
    out->device = model->params + model->grads + model->arena + out->optimizer + out->ema;
    /* the feed stages the larger of the two splits' batches (feed.c) */
    int64_t b = s->cfg.train_plan.batch_size, t = s->cfg.test_plan.batch_size;
    if (t > b) b = t;
    int64_t label = tfc_model_label_rows(m) *
                    (tfc_model_loss_kind(m) == TFC_LOSS_SPARSE_CCE ? 1 : tfc_model_classes(m));
    out->host_staging = (size_t)b * (size_t)(tfc_shape_numel(tfc_model_input_shape(m)) + label) * 4;
}
