/* The memory a training run holds, from the model's plan and the solver's options: what
 * tfc-summary predicts and tfc-train states before its first step. */
#include "solver/internal.h"

#include <string.h>

#ifdef TFC_HAVE_CUDA
#include "gpu/gpu.h"
#endif

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

tfc_status tfc_solver_check_memory(tfc_solver *s, tfc_backend *be, int ranks, tfc_error *err)
{
#ifdef TFC_HAVE_CUDA
    int batch = tfc_solver_rank_batch(s, ranks);
    if (be->device < 0 || batch < 1) return TFC_OK;
    tfc_gpu_memory g;
    tfc_gpu_memory_stats(be, &g);
    size_t avail = g.device_free + (g.reserved - g.in_use); /* cached blocks are reusable */
    if (g.limit && g.limit - (g.limit < g.in_use ? g.limit : g.in_use) < avail)
        avail = g.limit - (g.limit < g.in_use ? g.limit : g.in_use);
    tfc_memory_plan p;
    tfc_status st = tfc_model_plan_memory(s->model, be, batch, &p, err);
    if (st) return st;
    tfc_training_memory m;
    tfc_solver_memory(s, &p, &m);
    if (m.device <= avail) return TFC_OK;
    const double MiB = 1024.0 * 1024.0;
    tfc_error_set(err, TFC_ERR_NOMEM,
                  "training at batch %d per rank needs %.1f MiB on %s (tfc-summary's plan), "
                  "%.1f MiB are available%s",
                  batch, (double)m.device / MiB, be->ops->name, (double)avail / MiB,
                  g.limit ? " under gpu_memory_limit" : "");
    tfc_error_hint(err, "lower batch_size (tfc-summary SOLVER --max-batch --memory BYTES finds "
                        "the largest that fits)");
    return TFC_ERR_NOMEM;
#else
    (void)s, (void)be, (void)ranks, (void)err;
    return TFC_OK;
#endif
}
