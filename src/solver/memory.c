/* The memory a training run holds, from the model's plan and the solver's options: what
 * tfc-summary predicts and tfc-train states before its first step. */
#include "solver/internal.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "device/device.h"

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
    int64_t label = 0, in = 0;
    for (int k = 0; k < tfc_model_noutputs(m); k++)
        label += tfc_model_label_rows_at(m, k) *
                 (tfc_model_loss_kind_at(m, k) == TFC_LOSS_SPARSE_CCE ? 1
                                                                      : tfc_model_classes_at(m, k));
    for (int k = 0; k < tfc_model_ninputs(m); k++)
        in += tfc_shape_numel(tfc_model_input_shape_at(m, k));
    out->host_staging = (size_t)b * (size_t)(in + label) * 4;
}

tfc_status tfc_solver_check_memory(tfc_solver *s, tfc_backend *be, int ranks, tfc_error *err)
{
    int batch = tfc_solver_rank_batch(s, ranks);
    if (batch < 1) return TFC_OK;
    const char *source;
    size_t avail = tfc_device_memory_available(be, &source);
    if (avail == SIZE_MAX) return TFC_OK;
    tfc_memory_plan p;
    tfc_status st = tfc_model_plan_memory(s->model, be, batch, &p, err);
    if (st) return st;
    tfc_training_memory m;
    tfc_solver_memory(s, &p, &m);
    /* on the CPU the device is the host: the feed's staging shares it */
    size_t need = m.device + (be->device < 0 ? m.host_staging : 0);
    size_t fixed = p.params + p.grads + m.optimizer + m.ema; /* the batch does not change it */
    if (need <= avail) return TFC_OK;
    const double MiB = 1024.0 * 1024.0;
    char staging[64] = "";
    if (be->device < 0)
        snprintf(staging, sizeof staging, ", batch staging %.1f MiB",
                 (double)m.host_staging / MiB);
    tfc_error_set(err, TFC_ERR_NOMEM,
                  "training at batch %d per rank needs %.1f MiB on %s (tfc-summary's plan: "
                  "parameters, gradients and optimizer state %.1f MiB, activations %.1f MiB%s), "
                  "%.1f MiB are available (%s)",
                  batch, (double)need / MiB, be->ops->name, (double)fixed / MiB,
                  (double)p.arena / MiB, staging, (double)avail / MiB, source);
    if (fixed >= avail)
        tfc_error_hint(err, "the parameters alone do not fit, whatever the batch: a smaller model "
                            "(fewer units, filters or layers) does");
    else
        tfc_error_hint(err, "lower batch_size: the activations grow with it (tfc-summary SOLVER "
                            "--max-batch --memory BYTES finds the largest that fits)");
    return TFC_ERR_NOMEM;
}
