/* The training loop, as Caffe's Solver::Step: per iteration, iter_size batches are run
 * forward and backward with their gradients accumulated, the average is clipped to a
 * global norm and handed with the iteration's learning rate to the optimizer; then display
 * (the loss smoothed over average_loss iterations), test (with early stopping and the
 * plateau policy stepped after it, on the ema weights when on), snapshot, signal and tfc-ctl
 * checks. A non-finite loss or gradient stops the run naming the iteration and the first
 * layer whose output went non-finite, or with `rollback:` reloads the newest snapshot;
 * with precision float16 a non-finite gradient of a finite loss only skips the update and
 * halves the loss scale (loss_scale_step). All randomness is keyed by (seed, step), and the
 * state file holds the rest, so a resumed run on the CPU repeats the uninterrupted one bit
 * for bit.
 * Data-parallel (docs/distributed.md): each of N ranks runs its rows of every batch, the
 * gradients and losses are summed over the ranks before the average, and only rank 0 writes. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/timing.h"
#include "device/device.h"
#include "solver/internal.h"

/* One training run: its parts (each with its own state) and the loop's counters. */
typedef struct run {
    tfc_solver *s;
    tfc_backend *be;
    tfc_optimizer opt;
    tfc_feed feed;                   /* the splits' batches; binds the model */
    tfc_progress prog;               /* console, clock, smoothed loss */
    tfc_rundir dir;                  /* the run directory and its logs */
    tfc_snapshot_set snaps;          /* this run's snapshots, for rotation */
    tfc_train_result *res;           /* the caller's; holds the best test result so far */
    int64_t iter;                    /* completed iterations */
    double lr;                       /* the learning rate shown and logged: the latest step's */
    int64_t last_test, last_snap;    /* iterations of the last test and snapshot; -1: none */
    int64_t state_last_test;         /* resumed: the state's last finished test (resume_test) */
    tfc_callbacks cb;                /* early stopping and the plateau policy */
    tfc_confusion cm;                /* the last test's confusion matrix */
    tfc_ema ema;                     /* the weight average (ema:) */
    tfc_control ctl;                 /* RUN_DIR/control, tfc-ctl's FIFO (rank 0) */
    int ctl_stop;                    /* tfc-ctl asked to stop */
    char *ctl_sets;                  /* tfc-ctl sets applied, "KEY=VALUE\n" each, for snapshots */
    const char *resume_changes;      /* while resuming: tfc_resume_diff's text (or NULL) */
    int forced;                      /* --force: a refused resume becomes a new run */
    tfc_comm *comm;                  /* the ranks of a data-parallel run (self: one) */
    tfc_grad_comm grad_comm;         /* how the gradients are summed over the ranks */
    int stopped;                     /* a stop request ended the loop (on every rank) */
    int images_written;              /* the first batch went to the event file */
    tfc_step_state *step_state;      /* device: the step's decisions (the device path, see
                                        train_step); NULL: the host path */
    int staged;                      /* the staged step (staged_step; cuda_graphs) */
    int64_t staged_steps;            /* staged steps this process ran, replays included */
    void *graph;                     /* the step captured (TFC_BACKEND_GRAPH_OPS), or NULL */
    int64_t graph_iter;              /* the iteration it was captured at */
    int graph_batch;                 /* its batch size */
    int64_t graph_rows;              /* the rows its loss averages over (tfc_model_loss_rows) */
    const void *graph_key[6];        /* the buffers it was captured on (graph_key) */
    int graphs_off;                  /* a capture failed: every later step is launched */
    int graphs_asked;                /* cuda_graphs 1 (not AUTO): notes where it is used */
    double loss_scale;               /* float16's dynamic loss scale (loss_scale_step); 1 */
    int64_t scale_good;              /* finite updates since it last changed */
    int64_t scale_overflows;         /* updates skipped for non-finite gradients */
    double step_loss_scale;          /* S of the last step: its gradients carry it */
} run;

static int writer(const run *r) { return r->comm->rank == 0; }

/* The metric that ranks tests: the model's first one other than the loss (higher is
 * better, but for the errors mae and mse); -1: the loss (lower is better). */
static int ranking_metric(const tfc_model *m)
{
    for (int i = 0; i < tfc_model_nmetrics(m); i++)
        if (tfc_model_metric(m, i)->kind != TFC_METRIC_LOSS) return i;
    return -1;
}

const char *tfc_ranking_metric_name(const tfc_model *m)
{
    int i = ranking_metric(m);
    return i >= 0 ? tfc_model_metric(m, i)->name : "loss";
}

/* ---- snapshots -------------------------------------------------------------------------------- */

static tfc_snapshot_id snapshot_id(const run *r)
{
    tfc_snapshot_id id = {tfc_model_name(r->s->model), tfc_optimizer_names[r->s->cfg.optimizer.type],
                          r->s->config_hash, r->s->model_hash, r->comm->size, r->s->root};
    return id;
}

/* Writes the snapshot of the current iteration, then rotates: the oldest beyond `keep` go
 * only now that their successor is durable. */
static tfc_status snapshot(run *r, tfc_error *err)
{
    const tfc_solver_config *c = &r->s->cfg;
    /* A train split dealt among the ranks leaves each pipeline at its own position: every
     * rank's goes to rank 0, into the state. Otherwise every rank is at rank 0's state. */
    int dealt = tfc_pipeline_shard_count(r->feed.train) > 1;
    void **rank_pipeline = NULL;
    size_t *rank_pipeline_len = NULL;
    if (dealt) {
        void *mine = NULL;
        size_t len = 0;
        if (writer(r)) {
            rank_pipeline = calloc((size_t)r->comm->size, sizeof *rank_pipeline);
            rank_pipeline_len = calloc((size_t)r->comm->size, sizeof *rank_pipeline_len);
        }
        tfc_status s = tfc_pipeline_save_state(r->feed.train, &mine, &len, err);
        /* every rank joins the gather, even one that failed to save (with nothing) */
        tfc_status g = r->comm->ops->gather(r->comm, mine ? mine : "", s ? 0 : len,
                                            rank_pipeline, rank_pipeline_len, err);
        free(mine);
        if (!s) s = g;
        if (!s && writer(r) && (!rank_pipeline || !rank_pipeline_len))
            s = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        if (s || !writer(r)) {
            for (int k = 0; rank_pipeline && k < r->comm->size; k++) free(rank_pipeline[k]);
            free(rank_pipeline);
            free(rank_pipeline_len);
            if (!s) r->last_snap = r->iter;
            return s;
        }
    } else if (!writer(r)) { /* every rank is at the same state: rank 0 writes it */
        r->last_snap = r->iter;
        return TFC_OK;
    }
    char weights[4700], state[4700];
    tfc_snapshot_path(r->dir.path, c->snapshot_prefix, r->iter, TFC_SNAPSHOT_WEIGHTS, weights,
                      sizeof weights);
    tfc_snapshot_path(r->dir.path, c->snapshot_prefix, r->iter, TFC_SNAPSHOT_STATE, state,
                      sizeof state);
    tfc_snapshot_extra x = {0};
    x.iteration = r->iter;
    x.have_best = r->res->have_best;
    x.best_value = r->res->best_value;
    x.best_iteration = r->res->best_iteration;
    tfc_progress_save(&r->prog, &x);
    tfc_callbacks_save(&r->cb, x.callbacks);
    x.last_test = r->last_test;
    if (c->precision == TFC_PRECISION_FLOAT16) {
        x.have_loss_scale = 1;
        x.loss_scale[0] = r->loss_scale;
        x.loss_scale[1] = (double)r->scale_good;
        x.loss_scale[2] = (double)r->scale_overflows;
    }
    x.have_train = r->res->have_train;
    x.train[0] = r->res->train.loss;
    memcpy(x.train + 1, r->res->train.metric, sizeof r->res->train.metric);
    tfc_error *inner = malloc(sizeof *inner);
    if (!inner) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    if (r->ema.started) {
        x.ema_n = r->ema.n;
        x.ema = malloc((size_t)x.ema_n * sizeof(float));
        if (!x.ema) {
            free(inner);
            return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        }
        r->be->ops->download(r->be, x.ema, r->ema.avg, (size_t)x.ema_n * sizeof(float));
    }
    tfc_error_clear(inner);
    x.control = r->ctl_sets;
    tfc_status s = TFC_OK;
    if (dealt) { /* rank 0's own is the plain "pipeline/train" */
        x.pipeline = rank_pipeline[0];
        x.pipeline_len = rank_pipeline_len[0];
        rank_pipeline[0] = NULL;
        x.rank_pipeline = rank_pipeline;
        x.rank_pipeline_len = rank_pipeline_len;
        x.nrank_pipelines = r->comm->size;
    } else {
        s = tfc_pipeline_save_state(r->feed.train, &x.pipeline, &x.pipeline_len, inner);
    }
    if (!s) {
        tfc_snapshot_id id = snapshot_id(r);
        s = tfc_snapshot_write(r->s->model, &r->opt, &id, &x, weights, state, inner);
    }
    for (int k = 0; rank_pipeline && k < r->comm->size; k++) free(rank_pipeline[k]);
    free(rank_pipeline);
    free(rank_pipeline_len);
    free(x.pipeline);
    free(x.ema);
    if (s) {
        tfc_error_set(err, s, "writing the snapshot of iteration %lld: %s%s%s", (long long)r->iter,
                      inner->file, inner->file[0] ? ": " : "", inner->msg);
        if (r->res->last_snapshot[0])
            tfc_error_hint(err, "the previous snapshot %s is intact", r->res->last_snapshot);
        free(inner);
        return s;
    }
    free(inner);
    snprintf(r->res->last_snapshot, sizeof r->res->last_snapshot, "%s", state);
    r->last_snap = r->iter;
    tfc_progress_say(&r->prog, "snapshot %s\n", state);
    tfc_snapshot_set_rotate(&r->snaps, r->iter, c->snapshot_keep);
    return TFC_OK;
}

/* ---- the step ------------------------------------------------------------------------------- */

static tfc_status diverged(run *r, double loss, tfc_error *err)
{
    int li = tfc_model_first_nonfinite(r->s->model);
    if (li >= 0) {
        tfc_layer *l = tfc_model_layer(r->s->model, li);
        tfc_error_set(err, TFC_ERR_NUMERIC,
                      "iteration %lld: the loss is %g; the first layer whose output is not "
                      "finite is '%s' (layers[%d], %s)",
                      (long long)r->iter + 1, loss, l->name, li, l->ops->type);
    } else {
        tfc_error_set(err, TFC_ERR_NUMERIC,
                      "iteration %lld: the loss is %g, while every layer's output is finite "
                      "(the loss itself overflowed)",
                      (long long)r->iter + 1, loss);
    }
    tfc_error_hint(err, "lower optimizer.learning_rate, or set clip_gradients");
    return TFC_ERR_NUMERIC;
}

/* The first trainable parameter whose gradient is not finite, for the message. */
static tfc_status bad_gradient(run *r, tfc_error *err)
{
    tfc_model *m = r->s->model;
    for (int i = 0; i < tfc_model_nlayers(m); i++) {
        tfc_layer *l = tfc_model_layer(m, i);
        for (int p = 0; p < l->nparams; p++)
            if (l->params[p].trainable && !l->params[p].shared &&
                r->be->ops->count_nonfinite(r->be, l->params[p].numel, l->params[p].grad)) {
                tfc_error_set(err, TFC_ERR_NUMERIC,
                              "iteration %lld: the gradient of %s/%s is not finite (the loss "
                              "was finite)",
                              (long long)r->iter + 1, l->name, l->params[p].name);
                tfc_error_hint(err, "lower optimizer.learning_rate, or set clip_gradients");
                return TFC_ERR_NUMERIC;
            }
    }
    return tfc_error_set(err, TFC_ERR_NUMERIC, "iteration %lld: the gradient norm is not finite",
                         (long long)r->iter + 1);
}

/* The last launched micro-batch's loss and metrics, read back: a non-finite loss stops the
 * step, else it joins the step's sum *loss and the display's metrics. */
static tfc_status take_loss(run *r, double *loss, tfc_error *err)
{
    tfc_batch_result br;
    tfc_model_loss_result(r->s->model, &br);
    if (!isfinite(br.loss)) return diverged(r, br.loss, err);
    *loss += br.loss;
    tfc_progress_batch(&r->prog, &br);
    return TFC_OK;
}

/* The next training batch into r->feed (n examples), its wait counted as input-bound time;
 * the run's first one also goes to the event file. */
static tfc_status take_batch(run *r, int *n, tfc_error *err)
{
    tfc_model *m = r->s->model;
    double t0 = tfc_now();
    tfc_status s = tfc_feed_train_batch(&r->feed, n, err);
    double waited = tfc_now() - t0; /* the step waiting for its data */
    r->prog.input_wait += waited;
    r->prog.input_wait_run += waited;
    if (!s && !r->images_written && tfc_model_input_dtype(m) == TFC_F32) {
        /* the first batch this run trains on, for TensorBoard's Images tab */
        r->images_written = 1;
        s = tfc_rundir_images(&r->dir, r->iter, r->feed.x, *n, tfc_model_input_shape(m), err);
    }
    return s;
}

/* iter_size batches forward and backward, their gradients accumulated; the sum of their
 * losses in *loss, each read back (take_loss) before its backward, except the last one's on
 * the device path, which train_step reads after the update. */
static tfc_status accumulate(run *r, double *loss, tfc_error *err)
{
    const tfc_solver_config *c = &r->s->cfg;
    tfc_model *m = r->s->model;
    *loss = 0;
    for (int k = 0; k < c->iter_size; k++) {
        int n;
        /* Rank r's micro-batch is micro-batch (iter * iter_size + k) * ranks + r of the
         * single-process run with iter_size * ranks: the same dropout stream. */
        uint64_t step = ((uint64_t)r->iter * (uint64_t)c->iter_size + (uint64_t)k) *
                            (uint64_t)r->comm->size +
                        (uint64_t)r->comm->rank;
        tfc_status s = take_batch(r, &n, err);
        const void *xs[TFC_MODEL_MAX_INPUTS];
        tfc_feed_inputs(&r->feed, 0, xs);
        if (!s) s = tfc_model_forward_inputs(m, xs, n, 1, (uint64_t)c->seed, step, err);
        const void *ys[TFC_MODEL_MAX_OUTPUTS];
        tfc_feed_targets(&r->feed, 0, ys);
        if (!s) s = tfc_model_loss_launch_targets(m, ys, 1, err);
        if (!s && !(r->step_state && k == c->iter_size - 1)) s = take_loss(r, loss, err);
        if (s) return s;
        tfc_model_backward(m);
    }
    return TFC_OK;
}

/* Sums the ranks' accumulated gradients and mean losses (in rank order with
 * `deterministic: true`, so N ranks repeat themselves and equal one process with iter_size
 * N bit for bit); a GPU's gradients go through host memory or NCCL (grad_comm.c). */
static tfc_status reduce_gradients(run *r, double *loss, tfc_error *err)
{
    tfc_model *m = r->s->model;
    int64_t n = tfc_model_trainable_count(m);
    int ordered = r->s->cfg.deterministic;
    tfc_status s = tfc_grad_comm_sum(&r->grad_comm, tfc_model_grads(m), n, err);
    double sum = *loss * r->s->cfg.iter_size; /* back to this rank's sum of micro-losses */
    if (!s) s = r->comm->ops->allreduce(r->comm, &sum, 1, 1, ordered, err);
    *loss = sum / ((double)r->s->cfg.iter_size * r->comm->size);
    return s;
}

/* Rank 0's parameters on every rank (after initialising, --weights or --resume). */
static tfc_status share_weights(run *r, tfc_error *err)
{
    tfc_model *m = r->s->model;
    size_t bytes = (size_t)tfc_model_param_count(m) * sizeof(float);
    float *host = malloc(bytes ? bytes : 1);
    if (!host) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory sharing the weights");
    r->be->ops->download(r->be, host, tfc_model_params(m), bytes);
    tfc_status s = tfc_backend_status(r->be, err);
    if (!s) s = r->comm->ops->broadcast(r->comm, host, bytes, err);
    if (!s) r->be->ops->upload(r->be, tfc_model_params(m), host, bytes);
    free(host);
    return s;
}

/* ---- the staged step and CUDA graphs --------------------------------------------------------- */

/* The buffers a captured step reads and writes that the run could move (a rebinding, new
 * slots): a graph is replayed only while they are where it was captured. */
static void graph_key(const run *r, const void *key[6])
{
    tfc_model *m = r->s->model;
    key[0] = tfc_model_params(m), key[1] = tfc_model_grads(m), key[2] = r->step_state;
    for (int k = 0; k < 3; k++) key[3 + k] = r->opt.slot[k];
}

static void drop_graph(run *r)
{
    if (r->graph) r->be->ops->graph_free(r->be, r->graph);
    r->graph = NULL;
}

/* The step's device work once its batch is staged and its rates and loss scale written to
 * the step state: what a CUDA graph captures. */
static void queue_step(run *r, double scale, double lr)
{
    const tfc_solver_config *c = &r->s->cfg;
    tfc_model *m = r->s->model;
    tfc_backend *be = r->be;
    tfc_model_zero_grad(m);
    tfc_model_forward_launch(m);
    tfc_model_loss_compute(m, 1);
    tfc_model_backward(m);
    float *grads = tfc_model_grads(m);
    be->ops->grad_sumsq(be, tfc_model_trainable_count(m), grads, r->step_state);
    be->ops->step_scale(be, tfc_model_loss_scalar(m), scale, c->clip_gradients, r->step_state);
    tfc_optimizer_step_at(&r->opt, r->iter, lr, r->step_state, c->weight_decay,
                          tfc_model_params(m), grads, 1);
}

/* The staged step (tfc_solver_options.cuda_graphs, docs/solver.md): the device path of a
 * single-process run with iter_size 1 on fixed-length batches, in two halves. First the
 * host's part: the batch and its labels are checked and uploaded (tfc_model_stage_input,
 * _stage_labels) and the update's rates and float16's loss scale written to the step state
 * (tfc_optimizer_rates; the loss's gradient and step_scale read S there).
 * Then the device work (queue_step), queued at once: replayed from a CUDA graph where the
 * backend has TFC_BACKEND_GRAPH_OPS, captured at the first full batch after one launched
 * staged step (which makes the workspaces, scratch and algorithm choices a capture needs),
 * else launched. A replay draws dropout at its own step (the step offset) and reads the
 * rates and S written for it; a partial batch or one whose loss counts other rows (masked steps:
 * the loss's scale is a by-value argument) is launched, and buffers that moved (graph_key)
 * are captured anew. A failed capture says so and launches from then on. The same bits as the
 * unstaged device path: the same ops with the same operands in the same order
 * (test_staged_step, tests/test_train.c; train_graphs in make test-gpu). */
_Static_assert(offsetof(tfc_step_state, coef) == offsetof(tfc_step_state, lr) + 4 * sizeof(float),
               "staged_step writes the rates, loss scale and coef in one upload");

static tfc_status staged_step(run *r, double lr, double scale, float loss_scale,
                              tfc_error *err)
{
    const tfc_solver_config *c = &r->s->cfg;
    tfc_model *m = r->s->model;
    tfc_backend *be = r->be;
    int n;
    tfc_status s = take_batch(r, &n, err);
    const uint64_t step = (uint64_t)r->iter; /* iter_size 1, one rank: accumulate's */
    const void *xs[TFC_MODEL_MAX_INPUTS];
    tfc_feed_inputs(&r->feed, 0, xs);
    if (!s) s = tfc_model_stage_inputs(m, xs, n, 1, (uint64_t)c->seed, step, err);
    const void *ys[TFC_MODEL_MAX_OUTPUTS];
    tfc_feed_targets(&r->feed, 0, ys);
    if (!s) s = tfc_model_stage_targets(m, ys, err);
    if (s) return s;
    /* lr, alpha, decay, loss_scale, coef: adjacent in tfc_step_state */
    float rates[4 + TFC_OPTIM_COEFS];
    tfc_optimizer_rates(&r->opt, r->iter, lr, rates, rates + 4);
    rates[3] = loss_scale;
    be->ops->upload(be, &r->step_state->lr, rates, sizeof rates);
    const void *key[6];
    graph_key(r, key);
    if (r->graph && memcmp(key, r->graph_key, sizeof key) != 0) drop_graph(r);
    const int full = n == r->feed.bind_batch;
    const int64_t rows = tfc_model_loss_rows(m);
    if (r->graph && n == r->graph_batch && rows == r->graph_rows) {
        be->ops->graph_launch(be, r->graph, step - (uint64_t)r->graph_iter);
    } else if (full && !r->graph && !r->graphs_off && r->staged_steps > 0 &&
               be->ops->capture_begin) {
        tfc_error why;
        tfc_error_clear(&why);
        void *graph = NULL;
        if (!be->ops->capture_begin(be, &why)) {
            queue_step(r, scale, lr);
            graph = be->ops->capture_end(be, &why);
        }
        if (graph) {
            r->graph = graph;
            r->graph_iter = r->iter;
            r->graph_batch = n;
            r->graph_rows = rows;
            memcpy(r->graph_key, key, sizeof key);
            be->ops->graph_launch(be, graph, 0);
            if (r->graphs_asked)
                tfc_progress_say(&r->prog, "note: cuda_graphs: the step was captured at "
                                 "iteration %lld; steps of %d examples replay it\n",
                                 (long long)r->iter, n);
        } else { /* nothing the capture held has run */
            r->graphs_off = 1;
            tfc_progress_say(&r->prog, "note: cuda_graphs: the step could not be captured (%s); "
                             "every step is launched instead\n", why.msg);
            queue_step(r, scale, lr);
        }
    } else {
        queue_step(r, scale, lr);
    }
    r->staged_steps++;
    return TFC_OK;
}

/* float16's dynamic loss scale after an update (Keras 3's LossScaleOptimizer): a finite one
 * counts, and the scale doubles after loss_scale_growth of them in a row; an overflow (the
 * gradients not finite, the loss finite) skipped the update, halves it and restarts the
 * count. Powers of two, so scaling and unscaling are exact. */
static void loss_scale_step(run *r, int overflow)
{
    if (r->s->cfg.precision != TFC_PRECISION_FLOAT16) return;
    if (overflow) {
        r->loss_scale /= 2;
        r->scale_good = 0;
        r->scale_overflows++;
    } else if (++r->scale_good >= r->s->cfg.loss_scale_growth) {
        r->loss_scale *= 2;
        r->scale_good = 0;
    }
    r->res->loss_scale = r->loss_scale;
    r->res->loss_scale_overflows = r->scale_overflows;
}

/* One iteration, on one of two paths, chosen once (start: use_device_step):
 *
 * The host path (a backend without TFC_BACKEND_STEP_OPS; a data-parallel run, whose losses
 * and gradients are summed through the host anyway; tfc_solver_options.host_step): each
 * micro-batch's loss is read back before its backward, and the gradient's sum of squares
 * before the update, whose grad_scale (the average, clipped: tfc_step_grad_scale) the host
 * computes. On a GPU each read waits for the device in the middle of the step.
 *
 * The device path: the sum of squares, the clipping factor and a "skip this update" flag
 * are computed on the device into r->step_state, which the optimizer reads there; the
 * host reads the last micro-batch's loss and metrics and that state once, after the
 * update is queued: one wait per step (with iter_size 1), at its end.
 *
 * Why a divergence ends the same way on both (test_device_step, tests/test_train.c; on a
 * GPU train_device_step*, tests/gpu/test_gpu_ops.c):
 *   - the decisions are the same bits: grad_sumsq stores what sumsq returns, step_scale
 *     uses tfc_step_grad_scale as the host path does, and optimizer_update_at is
 *     optimizer_update with that grad_scale;
 *   - a non-finite loss or sum of squares sets skip, and the update then writes nothing:
 *     weights and slots stay as the host path, which never queues the update, leaves them;
 *   - the host reads the flag at the end of the same step, before the EMA update, the
 *     iteration count, the display, test, snapshot and the next step's forward, and stops
 *     (or rolls back) at the same iteration with the same message: the diverging forward's
 *     activations, which name the layer, are intact (backward and the update do not write
 *     them), and so are the gradients that bad_gradient names (the update only reads
 *     them). Only the last micro-batch's backward runs on a non-finite loss where the host
 *     path stopped before it; it writes gradients alone, which nothing reads before the
 *     next step's zero_grad. An earlier micro-batch's loss is read before the next forward,
 *     which would overwrite those activations and move BatchNormalization's statistics.
 * Reading the flag one step late, after step k + 1 is queued, would not be the same:
 * step k + 1's forward would already have replaced step k's activations, moved the moving
 * statistics (weights, in snapshots) and taken a batch from the pipeline. */
static tfc_status train_step(run *r, tfc_error *err)
{
    const tfc_solver_config *c = &r->s->cfg;
    tfc_model *m = r->s->model;
    double loss = 0;
    int64_t ntrain = tfc_model_trainable_count(m);
    /* the average over micro-batches and ranks, and float16's loss scale S undone (a power
     * of two: exactly); clipping sees the unscaled norm. The device path reads S from the
     * step state (step_scale divides by it, the loss's gradient is multiplied by it there:
     * start sets the model to read it), so a replayed step takes each step's; the host path
     * passes it by value. */
    const float S = (float)r->loss_scale;
    const double scale = 1.0 / ((double)c->iter_size * r->comm->size);
    r->step_loss_scale = S;
    const int float16 = c->precision == TFC_PRECISION_FLOAT16;
    if (!r->step_state) tfc_model_set_loss_scale(m, S);
    else if (float16 && !r->staged) r->be->ops->upload(r->be, &r->step_state->loss_scale, &S, 4);
    int overflow = 0;
    double lr = tfc_lr_at(&c->lr_policy, tfc_callbacks_base_lr(&r->cb, c), r->iter, c->max_iter);
    tfc_status s;
    if (r->staged) {
        s = staged_step(r, lr, scale, S, err);
    } else {
        tfc_model_zero_grad(m);
        s = accumulate(r, &loss, err);
    }
    if (s) return s;
    if (r->step_state) { /* the device path */
        tfc_backend *be = r->be;
        if (!r->staged) {
            float *grads = tfc_model_grads(m);
            be->ops->grad_sumsq(be, ntrain, grads, r->step_state);
            be->ops->step_scale(be, tfc_model_loss_scalar(m), scale, c->clip_gradients,
                                r->step_state);
            tfc_optimizer_step_at(&r->opt, r->iter, lr, r->step_state, c->weight_decay,
                                  tfc_model_params(m), grads, 0);
        }
        tfc_step_state st;
        s = take_loss(r, &loss, err);
        be->ops->download(be, &st, r->step_state, sizeof st);
        if (!s && st.skip) { /* the loss is finite: the gradients are not */
            if (float16) overflow = 1;
            else s = bad_gradient(r, err);
        }
        if (s) return s;
        loss /= c->iter_size;
    } else { /* the host path */
        loss /= c->iter_size;
        if (r->comm->size > 1 || r->grad_comm.nccl) s = reduce_gradients(r, &loss, err);
        if (s) return s;
        float *grads = tfc_model_grads(m);
        double sumsq = r->be->ops->sumsq(r->be, ntrain, grads);
        if (!isfinite(sumsq) && !float16) return bad_gradient(r, err);
        overflow = !isfinite(sumsq);
        float grad_scale = tfc_step_grad_scale(sumsq, scale / (double)S, c->clip_gradients);
        if (!overflow)
            tfc_optimizer_step(&r->opt, r->iter, lr, grad_scale, c->weight_decay,
                               tfc_model_params(m), grads);
    }
    r->lr = lr;
    loss_scale_step(r, overflow);
    if (!overflow) tfc_ema_update(&r->ema, tfc_model_params(m), r->iter); /* weights as they were */
    /* Keras's weight constraints after the update (and after the average, which Keras's
     * use_ema takes inside the update, before BaseOptimizer.apply projects), on every path
     * (the staged step's too, launched after its graph); an update skipped for non-finite
     * gradients changed nothing and they project nothing then; once per update, whatever
     * iter_size */
    if (!overflow) tfc_model_constrain(m);
    /* a failed asynchronous GPU op (launch, cuBLAS, cuDNN) is reported at this step */
    s = tfc_backend_status(r->be, err);
    if (s) return s;
    tfc_progress_iteration(&r->prog, loss);
    r->iter++;
    return TFC_OK;
}

/* ---- display, testing and the best weights ---------------------------------------------------- */

/* The train metrics since the last display summed over the ranks (rows and row-weighted
 * sums; the loss was reduced at each step), so rank 0 shows the whole batch's. */
static tfc_status reduce_train_metrics(run *r, tfc_error *err)
{
    if (r->comm->size == 1) return TFC_OK;
    tfc_status s = r->comm->ops->allreduce(r->comm, &r->prog.disp[1],
                                           1 + tfc_model_nmetrics(r->s->model), 1, 1, err);
    if (!s && r->prog.ncounts)
        s = r->comm->ops->allreduce(r->comm, r->prog.counts, r->prog.ncounts, 1, 1, err);
    return s;
}

static tfc_status display(run *r, tfc_error *err)
{
    tfc_status s = reduce_train_metrics(r, err);
    if (s) return s;
    tfc_progress_display(&r->prog, r->iter, r->lr, &r->res->train);
    r->res->have_train = 1;
    s = tfc_rundir_log(&r->dir, "train", r->iter, &r->res->train, r->lr,
                       tfc_progress_elapsed(&r->prog), err);
    /* float16: its loss scale in TensorBoard beside the rate (as PyTorch users log their
     * GradScaler's) */
    if (!s && r->dir.made && r->s->cfg.precision == TFC_PRECISION_FLOAT16)
        s = tfc_events_scalar(r->dir.ev, r->iter, "loss_scale", r->loss_scale, err);
    return s;
}

/* Records a test result; a better one than the best so far writes best.safetensors. */
static tfc_status record_test(run *r, const tfc_eval *e, tfc_error *err)
{
    int rank = ranking_metric(r->s->model);
    double value = rank >= 0 ? e->metric[rank] : e->loss;
    tfc_train_result *res = r->res;
    r->last_test = r->iter;
    res->have_test = 1;
    res->test = *e;
    const int lower =
        rank < 0 || tfc_metric_lower_is_better(tfc_model_metric(r->s->model, rank));
    int better = !res->have_best || (lower ? value < res->best_value : value > res->best_value);
    if (!better || !isfinite(value)) return TFC_OK;
    res->have_best = 1;
    res->best_value = value;
    res->best_iteration = r->iter;
    if (!writer(r)) return TFC_OK;
    char best[4200];
    snprintf(best, sizeof best, "%s/best.safetensors", r->dir.path);
    return tfc_model_save_weights(r->s->model, best, err);
}

static tfc_status test_weights(run *r, int *stopped, tfc_error *err)
{
    double t0 = tfc_now();
    tfc_eval e;
    tfc_status s = tfc_evaluate(&r->feed, r->s, &e, &r->cm, stopped, err);
    if (!s) s = tfc_backend_status(r->be, err);
    tfc_progress_exclude(&r->prog, tfc_now() - t0); /* testing is not training speed */
    if (s || *stopped) return s;
    s = record_test(r, &e, err);
    if (s) return s;
    char line[512];
    tfc_solver_format_eval(r->s, &e, line, sizeof line);
    tfc_progress_say(&r->prog, "test %lld: %s  (best %s %.4f at %lld)\n", (long long)r->iter, line,
                     tfc_ranking_metric_name(r->s->model), r->res->best_value,
                     (long long)r->res->best_iteration);
    s = tfc_rundir_log(&r->dir, "test", r->iter, &e, r->lr, tfc_progress_elapsed(&r->prog), err);
    if (!s)
        s = tfc_callbacks_test(&r->cb, r->s, writer(r) ? r->dir.path : NULL, &e,
                               r->res->have_train ? &r->res->train : NULL, r->iter, r->res,
                               &r->prog, err);
    return s;
}

/* A test pass, its records and callbacks, on the weight average when `ema:` is on. */
static tfc_status run_test(run *r, int *stopped, tfc_error *err)
{
    tfc_ema_swap_in(&r->ema, tfc_model_params(r->s->model));
    tfc_status st = test_weights(r, stopped, err);
    tfc_ema_swap_out(&r->ema, tfc_model_params(r->s->model));
    return st;
}

/* ---- starting: fresh, from --weights, or resumed ------------------------------------------------ */

/* Appends a tfc-ctl set to the run's record (what snapshots keep). */
static void record_set(run *r, const char *assignment)
{
    size_t have = r->ctl_sets ? strlen(r->ctl_sets) : 0, add = strlen(assignment);
    char *grown = realloc(r->ctl_sets, have + add + 2);
    if (!grown) return; /* the set applies; a resume would not replay it */
    memcpy(grown + have, assignment, add);
    memcpy(grown + have + add, "\n", 2);
    r->ctl_sets = grown;
}

/* The tfc-ctl sets a state recorded, applied again — except a key the resume itself
 * changes (`changes`: tfc_resume_diff's lines), which the resumed configuration decides. */
static void replay_sets(run *r, const char *sets, const char *changes)
{
    free(r->ctl_sets);
    r->ctl_sets = NULL;
    for (const char *line = sets; line && *line;) {
        size_t n = strcspn(line, "\n");
        char one[256], key[256], why[256];
        snprintf(one, sizeof one, "%.*s", (int)n, line);
        line += n + (line[n] == '\n');
        snprintf(key, sizeof key, "  %.*s:", (int)strcspn(one, "="), one);
        if (changes && strstr(changes, key)) {
            tfc_progress_say(&r->prog, "tfc-ctl set %s of the resumed run not replayed: the "
                                       "configuration changes that key\n", one);
            continue;
        }
        if (strncmp(one, "optimizer.learning_rate=", 24) && /* in the callbacks' state */
            !tfc_control_apply(&r->s->cfg, one, why, sizeof why))
            continue;
        record_set(r, one);
        tfc_progress_say(&r->prog, "tfc-ctl set %s replayed from the snapshot\n", one);
    }
}

/* Everything of a state file into the run: weights, optimizer, pipeline position,
 * progress, callbacks, the weight average, the iteration and the best result. */
static tfc_status load_state(run *r, const char *state, int *differs, tfc_error *err)
{
    tfc_snapshot_extra x = {0};
    x.window = r->prog.window;
    x.ema_n = tfc_model_param_count(r->s->model);
    x.rank = r->comm->rank;
    x.counts = r->prog.counts; /* read straight into the display's */
    x.ncounts = r->prog.ncounts;
    tfc_snapshot_id id = snapshot_id(r);
    tfc_status st = tfc_snapshot_read(r->s->model, &r->opt, &id, state, &x, differs, err);
    if (!st) st = tfc_pipeline_restore_state(r->feed.train, x.pipeline, x.pipeline_len, err);
    if (!st) tfc_progress_restore(&r->prog, &x);
    if (!st && x.have_callbacks) tfc_callbacks_load(&r->cb, x.callbacks);
    if (!st && x.ema && r->ema.avg) {
        r->be->ops->upload(r->be, r->ema.avg, x.ema, (size_t)x.ema_n * sizeof(float));
        r->ema.started = 1;
    }
    if (!st && x.control) replay_sets(r, x.control, r->resume_changes);
    free(x.control);
    free(x.ema);
    free(x.pipeline);
    free(x.losses);
    if (st) return st;
    r->iter = x.iteration;
    r->state_last_test = x.last_test;
    if (x.have_loss_scale && r->s->cfg.precision == TFC_PRECISION_FLOAT16) {
        r->loss_scale = x.loss_scale[0];
        r->scale_good = (int64_t)x.loss_scale[1];
        r->scale_overflows = (int64_t)x.loss_scale[2];
        r->res->loss_scale = r->loss_scale;
        r->res->loss_scale_overflows = r->scale_overflows;
    }
    r->res->have_train = x.have_train;
    if (x.have_train) {
        r->res->train.loss = x.train[0];
        memcpy(r->res->train.metric, x.train + 1, sizeof r->res->train.metric);
    }
    r->res->have_best = x.have_best;
    r->res->best_value = x.best_value;
    r->res->best_iteration = x.best_iteration;
    return TFC_OK;
}

static tfc_status resume(run *r, tfc_error *err)
{
    const char *state = r->s->opt.resume;
    int differs = 0, nrefused = 0;
    char *changes = NULL, owner[256];
    tfc_status st = tfc_resume_diff(r->s, state, &changes, &nrefused, owner, sizeof owner, err);
    if (st) {
        tfc_error_prefix(err, "cannot resume: ");
        return st;
    }
    if (owner[0]) { /* the first thing to say: the model's changes are all of the rest */
        tfc_error_set(err, TFC_ERR_USAGE,
                      "cannot resume: this snapshot belongs to model '%s' (%s), not to this "
                      "configuration's model '%s'",
                      owner, state, tfc_model_name(r->s->model));
        tfc_error_hint(err, "resume it with its own run's config.yaml, or start a new run from "
                            "its weights with --force (or --weights)");
        if (r->s->opt.force) r->forced = 1;
        free(changes);
        return TFC_ERR_USAGE;
    }
    if (nrefused) {
        tfc_error_set(err, TFC_ERR_USAGE,
                      "cannot resume: %d change(s) to the configuration do not fit the "
                      "snapshot's state (the snapshot's configuration -> now):\n%s",
                      nrefused, changes);
        tfc_error_hint(err, "resume with the run's configuration, or start a new run from the "
                            "snapshot's weights with --force (or --weights)");
        if (r->s->opt.force) {
            tfc_progress_say(&r->prog, "--force: %d change(s) do not fit the snapshot's state:\n%s",
                             nrefused, changes);
            r->forced = 1;
        }
        free(changes);
        return TFC_ERR_USAGE;
    }
    r->resume_changes = changes;
    st = load_state(r, state, &differs, err);
    r->resume_changes = NULL;
    if (st) tfc_error_prefix(err, "cannot resume: ");
    else if (r->iter > r->s->cfg.max_iter)
        st = tfc_error_set(err, TFC_ERR_USAGE, "%s is at iteration %lld, beyond max_iter %d",
                           state, (long long)r->iter, r->s->cfg.max_iter);
    if (st) {
        free(changes);
        return st;
    }
    snprintf(r->res->last_snapshot, sizeof r->res->last_snapshot, "%s", state);
    r->last_snap = r->iter;
    r->res->rollbacks = (int)r->cb.rollbacks;
    tfc_progress_say(&r->prog, "resuming from %s at iteration %lld\n", state, (long long)r->iter);
    if (differs) {
        tfc_progress_say(&r->prog,
                         "note: the configuration differs from the snapshot's%s\n%scontinuing "
                         "(the run repeats an uninterrupted one exactly only with the same "
                         "configuration)\n",
                         changes ? " (the snapshot's configuration -> now):" : ";",
                         changes ? changes : "");
    }
    free(changes);
    return TFC_OK;
}

/* --force after a refused resume: a new run (in --out, else a new folder: the resumed run's
 * stays as it is) from the snapshot's weights, loaded by name; iteration 0, fresh optimizer. */
static tfc_status load_initial_weights(run *r, const char *path, tfc_error *err);
static tfc_status weights_only_start(run *r, tfc_error *err)
{
    const char *state = r->s->opt.resume;
    char weights[4200];
    size_t n = strlen(state);
    if (n < 6 || strcmp(state + n - 6, ".state"))
        return tfc_error_set(err, TFC_ERR_USAGE, "--force: %s is not named NAME.state", state);
    snprintf(weights, sizeof weights, "%.*s.safetensors", (int)(n - 6), state);
    tfc_error_clear(err);
    if (!r->s->opt.out_dir) {
        tfc_solver fresh = *r->s; /* the folder a run without --resume would take */
        fresh.opt.resume = NULL;
        tfc_rundir_choose(&r->dir, &fresh);
        r->dir.s = r->s;
    }
    tfc_progress_say(&r->prog, "--force: not resuming; a new run in %s from the weights of %s\n",
                     r->dir.path, weights);
    return load_initial_weights(r, weights, err);
}

/* --weights: initialises layers by name and reports what matched. */
static tfc_status load_initial_weights(run *r, const char *path, tfc_error *err)
{
    tfc_weights_report rep;
    tfc_status st = tfc_model_load_weights(r->s->model, path, &rep, err);
    if (st) return st;
    tfc_progress_say(&r->prog, "weights from %s: %d matched, %d new, %d skipped for shape, %d "
                               "unused\n%s",
                     path, rep.matched, rep.missing, rep.mismatched, rep.unused,
                     rep.text ? rep.text : "");
    free(rep.text);
    return TFC_OK;
}

/* train_step's device path: where the backend has the step ops, in a single-process run,
 * unless the caller asks for the host path. */
static int use_device_step(const run *r)
{
    const tfc_backend_ops *ops = r->be->ops;
    return !r->s->opt.host_step && r->comm->size == 1 && !r->grad_comm.nccl &&
           ops->grad_sumsq && ops->step_scale && ops->optimizer_update_at;
}

/* Hands the optimizer the model's trainable weights as its variables, with their paths
 * (lamb's, adafactor's and muon's per-variable rules read them) */
static tfc_status set_optimizer_vars(tfc_optimizer *o, const tfc_model *m, tfc_error *err)
{
    int n = tfc_model_optim_vars(m, NULL, NULL);
    tfc_optim_var *vars = malloc((size_t)(n > 0 ? n : 1) * sizeof *vars);
    char(*paths)[TFC_OPTIM_PATH] = malloc((size_t)(n > 0 ? n : 1) * sizeof *paths);
    const char **names = malloc((size_t)(n > 0 ? n : 1) * sizeof *names);
    tfc_status st = TFC_OK;
    if (!vars || !paths || !names) {
        st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    } else {
        tfc_model_optim_vars(m, vars, paths);
        for (int k = 0; k < n; k++) names[k] = paths[k];
        st = tfc_optimizer_set_vars(o, vars, n, names, err);
    }
    free(vars);
    free(paths);
    free(names);
    return st;
}

/* The type of a layer whose training forward chooses its ops on the host each step
 * (tfc_layer_ops.host_choices), which a replayed CUDA graph would freeze; NULL: none. */
static const char *host_choice_layer(tfc_model *m)
{
    for (int i = 0; i < tfc_model_nlayers(m); i++)
        if (tfc_model_layer(m, i)->ops->host_choices) return tfc_model_layer(m, i)->ops->type;
    return NULL;
}

static tfc_status start(run *r, tfc_error *err)
{
    tfc_solver *s = r->s;
    const tfc_solver_config *c = &s->cfg;
    r->be = tfc_solver_backend_open(s, err);
    if (!r->be) return err->code;
    r->feed.rank = r->comm->rank;
    r->feed.nranks = r->comm->size;
    tfc_status st = tfc_solver_check_memory(s, r->be, r->comm->size, err);
    if (!st) st = tfc_feed_for_training(&r->feed, s, r->be, err);
    if (!st && c->precision && r->be->device < 0) /* a user may expect speed from it */
        tfc_progress_say(&r->prog, "note: precision %s on the CPU computes its 16-bit numbers in "
                         "float32 buffers (the reference of docs/solver.md, Precision): slower "
                         "than float32, not faster\n", tfc_precision_names[c->precision]);
    if (!st) st = tfc_grad_comm_open(&r->grad_comm, r->comm, r->be, c->deterministic, err);
    if (!st && use_device_step(r) &&
        !(r->step_state = r->be->ops->alloc(r->be, sizeof *r->step_state)))
        st = tfc_error_set(err, TFC_ERR_NOMEM, "cannot allocate the step's state on %s",
                           r->be->ops->name);
    if (!st && r->step_state) { /* S 1 unless float16, whose steps write theirs */
        const tfc_step_state init = {.loss_scale = 1.0f};
        r->be->ops->upload(r->be, r->step_state, &init, sizeof init);
        if (c->precision == TFC_PRECISION_FLOAT16)
            tfc_model_set_loss_scale_at(s->model, r->step_state);
    }
    if (!st && s->opt.cuda_graphs) {
        const char *why = !r->step_state ? "the step's host path (data-parallel, or host_step)"
                          : c->iter_size != 1 ? "iter_size above 1"
                          : tfc_model_max_length(s->model) ? "batches of varying length"
                          : host_choice_layer(s->model) ? host_choice_layer(s->model)
                                                           : NULL;
        r->graphs_asked = s->opt.cuda_graphs > 0;
        if (r->graphs_asked) { /* asked for: says where it cannot be */
            r->staged = !why;
            if (why) tfc_progress_say(&r->prog, "note: cuda_graphs: not used with %s\n", why);
            else if (!r->be->ops->capture_begin)
                tfc_progress_say(&r->prog, "note: cuda_graphs: %s has no CUDA graphs; the "
                                 "staged step is launched\n", r->be->ops->name);
        } else { /* TFC_CUDA_GRAPHS_AUTO: only where a graph replays the step */
            r->staged = !why && r->be->ops->capture_begin;
        }
    }
    int nw = 0;
    const double *w = st ? NULL : tfc_model_class_weight(s->model, &nw);
    if (w && tfc_model_class_weight_balanced(s->model)) { /* say what `balanced` became */
        char line[1024];
        int used = snprintf(line, sizeof line, "loss.class_weight balanced:");
        for (int k = 0; k < nw && used < (int)sizeof line - 32; k++)
            used += snprintf(line + used, sizeof line - (size_t)used, " %.4g", w[k]);
        tfc_progress_say(&r->prog, "%s\n", line);
    }
    if (!st) st = tfc_confusion_init(&r->cm, s->model, r->feed.test, err);
    if (!st) st = tfc_ema_init(&r->ema, &c->ema, r->be, tfc_model_param_count(s->model), err);
    if (!st)
        st = tfc_optimizer_init(&r->opt, &c->optimizer, r->be, tfc_model_trainable_count(s->model),
                                err);
    if (!st) st = set_optimizer_vars(&r->opt, s->model, err);
    if (!st) st = tfc_model_init_weights(s->model, (uint64_t)c->seed, err);
    if (st) return st;
    tfc_rundir_choose(&r->dir, s);
    tfc_callbacks_init(&r->cb, c);
    if (s->opt.resume) st = resume(r, err);
    else if (s->opt.weights) st = load_initial_weights(r, s->opt.weights, err);
    if (st == TFC_ERR_USAGE && r->forced) st = weights_only_start(r, err);
    /* a fresh run's adapting layers take their statistics (a resumed one has them) */
    if (!st && !s->opt.resume) st = tfc_adapt_run(&r->feed, s, s->opt.weights, &r->prog, err);
    int64_t resumed_at = s->opt.resume && !r->forced ? r->iter : -1;
    if (!st && s->opt.stop_at > 0 && s->opt.stop_at >= c->max_iter)
        st = tfc_error_set(err, TFC_ERR_USAGE, "--stop-at %lld is not below max_iter %d: the run "
                           "would complete there, not pause", (long long)s->opt.stop_at,
                           c->max_iter);
    else if (!st && s->opt.stop_at > 0 && s->opt.stop_at < r->iter)
        st = tfc_error_set(err, TFC_ERR_USAGE, "--stop-at %lld is before iteration %lld, where "
                           "the resumed snapshot is", (long long)s->opt.stop_at,
                           (long long)r->iter);
    if (!st && r->comm->size > 1) st = share_weights(r, err);
    if (st || !writer(r)) return st;
    st = tfc_rundir_open(&r->dir, tfc_pipeline_vocab(r->feed.train), resumed_at, err);
    /* the resumed iteration's test is in the log already: the run does not repeat it */
    if (!st && resumed_at >= 0 && tfc_csv_last_test(r->dir.csv) == r->iter)
        r->last_test = r->iter;
    if (!st) st = tfc_snapshot_set_open(&r->snaps, r->dir.path, c->snapshot_prefix, resumed_at, err);
    if (!st) {
        tfc_error quiet;
        tfc_error_clear(&quiet);
        if (tfc_control_open(&r->ctl, r->dir.path, &quiet))
            tfc_progress_say(&r->prog, "note: no tfc-ctl for this run (%s)\n", quiet.msg);
    }
    return st;
}

/* ---- the loop and the end ---------------------------------------------------------------------- */

/* rollback: a divergence reloads the newest snapshot while rollbacks are left. */
static int can_roll_back(const run *r)
{
    const tfc_rollback_config *c = &r->s->cfg.rollback;
    /* (single-process runs: the ranks of a data-parallel one hold no snapshot names) */
    return c->enabled && r->comm->size == 1 && r->cb.rollbacks < c->max_rollbacks &&
           r->res->last_snapshot[0];
}

static tfc_status roll_back(run *r, tfc_error *err)
{
    const tfc_rollback_config *c = &r->s->cfg.rollback;
    char state[4096];
    snprintf(state, sizeof state, "%s", r->res->last_snapshot);
    double scale = r->cb.lr_scale * c->lr_factor;
    int64_t n = r->cb.rollbacks + 1;
    tfc_progress_say(&r->prog, "rollback %lld/%d: %s; reloading %s, learning rate x %g\n",
                     (long long)n, c->max_rollbacks, err->msg, state, scale);
    tfc_error_clear(err);
    int differs = 0;
    tfc_status st = load_state(r, state, &differs, err);
    if (st) {
        tfc_error_prefix(err, "rollback: cannot reload %s: ", state);
        return st;
    }
    r->cb.lr_scale = scale;
    r->cb.rollbacks = n;
    r->res->rollbacks = (int)n;
    r->last_snap = r->iter;
    r->lr = tfc_lr_at(&r->s->cfg.lr_policy, tfc_callbacks_base_lr(&r->cb, &r->s->cfg), r->iter,
                      r->s->cfg.max_iter);
    return TFC_OK;
}

/* tfc-ctl's `set KEY=VALUE`: optimizer.learning_rate, the base rate from now on (the
 * plateau's current rate under that policy); kept in snapshots. */
static void control_set(run *r, const char *assignment)
{
    const char *key = "optimizer.learning_rate=";
    char *end = NULL;
    double v = strncmp(assignment, key, strlen(key)) ? 0 : strtod(assignment + strlen(key), &end);
    if (r->comm->size > 1) {
        tfc_progress_say(&r->prog, "tfc-ctl: set refused: a data-parallel run takes no new "
                                   "learning rate while it runs\n");
        return;
    }
    if (strncmp(assignment, key, strlen(key))) {
        char why[256];
        long long n = 0;
        if (sscanf(assignment, "max_iter=%lld", &n) == 1 && n < r->iter) {
            tfc_progress_say(&r->prog, "tfc-ctl: set %s refused: the run is at iteration %lld "
                             "already\n", assignment, (long long)r->iter);
            return;
        }
        if (!tfc_control_apply(&r->s->cfg, assignment, why, sizeof why)) {
            tfc_progress_say(&r->prog, "tfc-ctl: set %s refused: %s\n", assignment, why);
            return;
        }
        record_set(r, assignment);
        tfc_progress_say(&r->prog, "tfc-ctl: %s from iteration %lld\n", assignment,
                         (long long)r->iter + 1);
        return;
    }
    if (!end || *end || !(v > 0) || !isfinite(v)) {
        tfc_progress_say(&r->prog, "tfc-ctl: set %s refused: expected optimizer.learning_rate=V "
                                   "with V > 0\n",
                         assignment);
        return;
    }
    r->cb.lr_set = v;
    record_set(r, assignment);
    if (r->s->cfg.lr_policy.type == TFC_LR_PLATEAU) r->cb.plateau.lr = v;
    tfc_progress_say(&r->prog, "tfc-ctl: optimizer.learning_rate = %g from iteration %lld\n", v,
                     (long long)r->iter + 1);
}

/* Commands from RUN_DIR/control into the request flags. */
static void read_control(run *r, int *evaluate, int *snap)
{
    char line[512];
    while (tfc_control_poll(&r->ctl, line, sizeof line)) {
        if (!strcmp(line, "snapshot")) *snap = 1;
        else if (!strcmp(line, "evaluate")) *evaluate = 1;
        else if (!strcmp(line, "stop")) r->ctl_stop = 1;
        else if (!strncmp(line, "set ", 4)) control_set(r, line + 4);
        else tfc_progress_say(&r->prog, "tfc-ctl: unknown command '%s' ignored\n", line);
    }
}

/* The caller's requests (tfc-train: SIGUSR1, SIGUSR2) and tfc-ctl's: a snapshot or a test
 * pass now, unless this iteration already made one. */
static tfc_status on_request(run *r, tfc_error *err)
{
    const tfc_solver_options *o = &r->s->opt;
    tfc_status st = TFC_OK;
    int evaluate = 0, snap = 0;
    read_control(r, &evaluate, &snap);
    if (o->evaluate_now && *o->evaluate_now) evaluate = 1;
    if (o->snapshot_now && *o->snapshot_now) snap = 1;
    /* the ranks of a data-parallel run test and snapshot together */
    evaluate = tfc_comm_any(r->comm, evaluate);
    snap = tfc_comm_any(r->comm, snap);
    if (evaluate) {
        if (o->evaluate_now) *o->evaluate_now = 0;
        int stopped = 0;
        if (r->feed.test && r->last_test != r->iter) st = run_test(r, &stopped, err);
        else if (!r->feed.test) tfc_progress_say(&r->prog, "evaluate: the solver has no data.test\n");
    }
    if (!st && snap) {
        if (o->snapshot_now) *o->snapshot_now = 0;
        if (r->last_snap != r->iter) st = snapshot(r, err);
    }
    return st;
}

/* A resumed state whose scheduled test did not finish (a stop during that pass, which then
 * snapshots the iteration): the test first, as the uninterrupted run had it — its row, its
 * TensorBoard point, the callbacks stepped (a plateau may lower the rate, early stopping may
 * end the run) — logged with the latest step's rate. */
static tfc_status resume_test(run *r, tfc_error *err)
{
    const tfc_solver_config *c = &r->s->cfg;
    if (!r->s->opt.resume || r->forced || !r->feed.test || c->test_interval <= 0 ||
        r->iter == 0 || r->iter % c->test_interval || r->iter >= c->max_iter ||
        r->state_last_test == r->iter)
        return TFC_OK;
    int stopped = 0;
    r->lr = tfc_lr_at(&c->lr_policy, tfc_callbacks_base_lr(&r->cb, c), r->iter - 1, c->max_iter);
    tfc_progress_say(&r->prog, "the test of iteration %lld did not finish before the snapshot: "
                     "testing now\n", (long long)r->iter);
    return run_test(r, &stopped, err);
}

static tfc_status loop(run *r, tfc_error *err)
{
    const tfc_solver_config *c = &r->s->cfg;
    tfc_progress_loop_start(&r->prog, r->iter);
    tfc_status rt = resume_test(r, err);
    if (rt || r->cb.stop) return rt;
    r->lr = tfc_lr_at(&c->lr_policy, tfc_callbacks_base_lr(&r->cb, c), r->iter, c->max_iter);
    /* rollback needs a snapshot to return to, from the start */
    if (c->rollback.enabled && !r->res->last_snapshot[0] && r->iter < c->max_iter) {
        tfc_status st = snapshot(r, err);
        if (st) return st;
    }
    /* max_iter is read at every iteration: tfc-ctl may set it while the loop runs */
    while (r->iter < (r->s->opt.stop_at > 0 && r->s->opt.stop_at < c->max_iter
                          ? r->s->opt.stop_at : c->max_iter)) {
        /* a stop on any rank (a signal, tfc-ctl on rank 0) stops every rank here */
        if ((r->stopped = tfc_comm_any(r->comm, tfc_solver_stop_requested(r->s) || r->ctl_stop)))
            break;
        tfc_status st = train_step(r, err);
        if (st == TFC_ERR_NUMERIC && can_roll_back(r)) {
            st = roll_back(r, err);
            if (!st) continue;
        }
        if (st) return st;
        /* weights after the update, the gradients it used (kept until the next step) */
        if (c->histogram_interval > 0 && r->iter % c->histogram_interval == 0)
            st = tfc_rundir_histograms(&r->dir, r->iter,
                                       1.0 / ((double)c->iter_size * r->comm->size) /
                                           r->step_loss_scale, err);
        if (st) return st;
        if (c->display > 0 && r->iter % c->display == 0) st = display(r, err);
        else tfc_progress_live(&r->prog, r->iter, r->lr);
        int stopped = 0;
        if (!st && r->feed.test && c->test_interval > 0 && r->iter % c->test_interval == 0 &&
            r->iter < c->max_iter)
            st = run_test(r, &stopped, err);
        if (!st && r->cb.stop) break;
        if (!st && c->snapshot_interval > 0 && r->iter % c->snapshot_interval == 0 &&
            r->iter < c->max_iter)
            st = snapshot(r, err);
        if (!st) st = on_request(r, err);
        if (st) return st;
    }
    return TFC_OK;
}

/* A test pass for the result alone: it steps no callback and writes no log row or best
 * weights. */
static tfc_status quiet_test(run *r, tfc_error *err)
{
    tfc_eval e;
    int stopped = 0;
    tfc_ema_swap_in(&r->ema, tfc_model_params(r->s->model));
    tfc_status st = tfc_evaluate(&r->feed, r->s, &e, &r->cm, &stopped, err);
    tfc_ema_swap_out(&r->ema, tfc_model_params(r->s->model));
    if (!st && !stopped) {
        r->res->have_test = 1;
        r->res->test = e;
    }
    return st;
}

/* --stop-at reached: a quiet test pass (a run that never paused has no row or best weights
 * there), then the snapshot; status paused. */
static tfc_status pause_run(run *r, tfc_error *err)
{
    tfc_status st = TFC_OK;
    if (r->feed.test && r->last_test != r->iter) st = quiet_test(r, err);
    if (!st && r->last_snap != r->iter) st = snapshot(r, err);
    if (!st) r->res->status = TFC_RUN_PAUSED; /* the caller says so (tfc-train: with the resume) */
    return st;
}

/* When the steps waited for their data 5% of the run or more: the input pipeline's slowest
 * stage and what to try, from its profile (docs/data.md). */
static void input_report(run *r)
{
    double wall = tfc_now() - r->prog.t_loop - r->prog.excluded;
    if (!r->feed.train || wall <= 0) return;
    double bound = r->prog.input_wait_run / wall;
    r->res->input_bound = bound > 1 ? 1 : bound;
    char *advice = r->res->input_slowest;
    if (tfc_pipeline_profile_advice(r->feed.train, advice, sizeof r->res->input_slowest) < 0)
        advice[0] = 0;
    else if (bound >= 0.05)
        tfc_progress_say(&r->prog, "input-bound %.0f%% over the run: %s (tfc-data --profile "
                         "shows every stage)\n", 100 * bound, advice);
}

static tfc_status finish_run(run *r, tfc_error *err)
{
    const tfc_solver_config *c = &r->s->cfg;
    tfc_status st = TFC_OK;
    input_report(r);
    int stopped = r->stopped ||
                  (r->comm->size == 1 && (tfc_solver_stop_requested(r->s) || r->ctl_stop));
    if (!stopped && !r->cb.stop && r->s->opt.stop_at > 0 && r->iter == r->s->opt.stop_at &&
        r->iter < c->max_iter)
        return pause_run(r, err);
    if (!stopped && r->feed.test && r->last_test != r->iter) st = run_test(r, &stopped, err);
    /* resumed where the log has the test already: its result again, for summary.json */
    else if (!stopped && r->feed.test && !r->res->have_test) st = quiet_test(r, err);
    if (st) return st;
    if (tfc_progress_pending(&r->prog) > 0 && (c->display == 0 || r->iter % c->display != 0)) {
        /* The train result of the last stretch, as a display would show it. */
        if (c->display == 0) {
            st = reduce_train_metrics(r, err);
            r->res->have_train = 1;
            tfc_progress_train_result(&r->prog, &r->res->train);
        } else if (!stopped) {
            st = display(r, err);
        }
    }
    if (!st && r->last_snap != r->iter) st = snapshot(r, err);
    if (!st && !stopped) tfc_ema_swap_in(&r->ema, tfc_model_params(r->s->model));
    if (!st && !stopped && writer(r))
        st = tfc_callbacks_restore_best(&r->cb, r->s, r->dir.path, &r->prog, err);
    /* final.safetensors then holds the best evaluation's weights: the final test result is
     * theirs, not the last iteration's (the same decision on every rank: the callbacks'
     * state is) */
    const tfc_early_stopping *es = &c->early_stopping;
    if (!st && !stopped && es->enabled && es->restore_best && r->cb.es.have_best &&
        r->cb.es.best_iteration != r->last_test && r->feed.test) {
        if (r->comm->size > 1) st = share_weights(r, err);
        tfc_eval e;
        int again = 0;
        if (!st) st = tfc_evaluate(&r->feed, r->s, &e, &r->cm, &again, err);
        if (!st && !again) {
            r->res->test = e;
            char line[512];
            tfc_solver_format_eval(r->s, &e, line, sizeof line);
            tfc_progress_say(&r->prog, "test of the restored weights (iteration %lld): %s\n",
                             (long long)r->cb.es.best_iteration, line);
        }
    }
    if (!st && !stopped && writer(r)) {
        char final[4200];
        snprintf(final, sizeof final, "%s/final.safetensors", r->dir.path);
        st = tfc_model_save_weights(r->s->model, final, err);
    }
    if (stopped) r->res->status = TFC_RUN_INTERRUPTED;
    else if (r->cb.stop && r->iter < c->max_iter) r->res->status = TFC_RUN_STOPPED_EARLY;
    else r->res->status = TFC_RUN_COMPLETED;
    return st;
}

static void free_run(run *r)
{
    tfc_control_close(&r->ctl);
    free(r->ctl_sets);
    tfc_ema_release(&r->ema); /* before its backend */
    tfc_rundir_close(&r->dir);
    if (r->opt.be) tfc_optimizer_release(&r->opt);
    tfc_feed_free(&r->feed);
    tfc_grad_comm_close(&r->grad_comm); /* before its backend */
    drop_graph(r); /* before its backend */
    if (r->step_state) {
        tfc_model_set_loss_scale_at(r->s->model, NULL);
        r->be->ops->free(r->be, r->step_state);
    }
    if (r->be) tfc_backend_free(r->be);
    tfc_progress_free(&r->prog);
    tfc_snapshot_set_free(&r->snaps);
    tfc_confusion_free(&r->cm);
}

tfc_status tfc_solver_train(tfc_solver *s, tfc_train_result *res, tfc_error *err)
{
    tfc_train_result unread; /* res NULL: the caller wants the status alone */
    if (!res) res = &unread;
    run r = {.s = s, .res = res, .last_test = -1, .last_snap = -1, .ctl = {.fd = -1},
             .loss_scale = s->cfg.loss_scale_initial > 0 ? s->cfg.loss_scale_initial : 1.0};
    memset(res, 0, sizeof *res);
    r.comm = tfc_comm_world(err);
    if (!r.comm) return err->code;
    if (!writer(&r)) s->opt.console = NULL; /* rank 0 speaks for the run */
    res->ranks = r.comm->size;
    res->config_hash = s->config_hash;
    if (s->cfg.precision == TFC_PRECISION_FLOAT16) res->loss_scale = r.loss_scale;
    tfc_status st = tfc_progress_init(&r.prog, s, err);
    if (!st) st = start(&r, err);
    if (!st) {
        tfc_model *m = s->model;
        res->rank_batch = r.feed.bind_batch;
        char ranks[96] = "";
        if (r.comm->size > 1)
            snprintf(ranks, sizeof ranks, " (%d ranks x %d, %s%s)", r.comm->size,
                     r.feed.bind_batch, tfc_grad_comm_name(&r.grad_comm),
                     tfc_pipeline_shard_count(r.feed.train) > 1 ? ", input dealt" : "");
        tfc_progress_say(&r.prog, "%s: %lld parameters (%lld trainable) on %s, batch %d%s; run "
                                  "directory %s\n",
                         tfc_model_name(m), (long long)tfc_model_weight_count(m),
                         (long long)tfc_model_trainable_count(m), r.be->ops->name,
                         r.feed.bind_batch * r.comm->size, ranks, r.dir.path);
        tfc_training_memory mem;
        tfc_solver_memory(s, tfc_model_memory(m), &mem);
        const double MiB = 1024.0 * 1024.0;
        char ema[48] = "";
        if (mem.ema) snprintf(ema, sizeof ema, ", ema %.1f", (double)mem.ema / MiB);
        tfc_progress_say(&r.prog, "memory: %.1f MiB on %s%s (parameters %.1f, gradients %.1f, "
                                  "optimizer %.1f, activations %.1f%s), %.1f MiB of host "
                                  "staging (tfc-summary tells more)\n",
                         (double)mem.device / MiB, r.be->ops->name,
                         r.comm->size > 1 ? " per rank" : "", (double)mem.model.params / MiB,
                         (double)mem.model.grads / MiB, (double)mem.optimizer / MiB,
                         (double)mem.model.arena / MiB, ema,
                         (double)mem.host_staging / MiB);
        st = loop(&r, err);
        if (!st) st = finish_run(&r, err);
    }
    if (r.feed.train) {
        char line[600];
        res->skipped_train = tfc_pipeline_skipped(r.feed.train);
        tfc_format_skipped("data.train", res->skipped_train,
                           tfc_pipeline_skipped_names(r.feed.train), line, sizeof line);
        if (line[0]) tfc_progress_say(&r.prog, "%s\n", line);
        if (res->have_test)
            tfc_format_skipped("data.test", res->test.skipped, res->test.skipped_names, line,
                               sizeof line);
        if (res->have_test && line[0]) tfc_progress_say(&r.prog, "%s\n", line);
    }
    tfc_progress_end(&r.prog);
    res->iterations = r.iter;
    res->wall_seconds = tfc_progress_elapsed(&r.prog);
    res->iterations_per_second = tfc_progress_speed(&r.prog, r.iter);
    snprintf(res->run_dir, sizeof res->run_dir, "%s", r.dir.path);
    if (st) res->status = st == TFC_ERR_NUMERIC ? TFC_RUN_DIVERGED : TFC_RUN_FAILED;
    /* The run's own error goes into summary.json; a failure to write it is the error only
     * of a run that had none. */
    tfc_error quiet;
    tfc_error_clear(&quiet);
    res->confusion = res->have_test ? &r.cm : NULL;
    tfc_status ws = tfc_rundir_summary(&r.dir, res, tfc_ranking_metric_name(s->model),
                                       st ? err->msg : NULL, st ? &quiet : err);
    if (!st) st = ws;
    res->confusion = NULL;
    free_run(&r);
    return st;
}
