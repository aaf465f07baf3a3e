/* tfc-time: per-layer forward and backward times of a model on random data, like
 * `caffe time`: warm-up iterations, then the median over --iterations of each layer's
 * forward and backward, and of the whole step. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "tfc.h"

/* The command line, as the option table fills it. */
static const char *model_v[1], *set_v[256];
static struct {
    cli_list model, sets;
    const char *device;
    long batch, iterations, threads;
} args = {.model = CLI_LIST_OF(model_v), .sets = CLI_LIST_OF(set_v), .batch = 64, .iterations = 50};

static const cli_option options[] = {
    {"batch", 0, CLI_INT, &args.batch, "N", .min = 1, .max = 1 << 20,
     .help = "examples per step (default 64)"},
    {"iterations", 0, CLI_INT, &args.iterations, "N", .min = 1, .max = 1 << 20,
     .help = "timed iterations, after 5 warm-up ones (default 50)"},
    CLI_OPT_MODEL_SET(&args.sets),
    CLI_OPT_DEVICE(&args.device),
    CLI_OPT_THREADS(&args.threads),
    {NULL},
};

static const cli_tool tool = {
    .name = "tfc-time",
    .operands = CLI_MODEL_OPERAND,
    .notes = CLI_MODEL_NOTE,
    .about = "Times each layer's forward and backward pass (training mode) on random inputs and\n"
             "prints medians over the iterations, like `caffe time`.",
    .options = options,
    .exit_status = "0 success, 1 runtime failure (device), 2 bad usage or configuration",
    .operand_list = &args.model,
};

int main(int argc, char **argv)
{
    int rc = cli_parse(&tool, argc, argv);
    if (rc >= 0) return rc;
    const char *path = args.model.v[0];
    int batch = (int)args.batch, iters = (int)args.iterations;
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_load_config(path, args.sets.v, args.sets.n, &err);
    if (m && tfc_model_check_loss(m, &err)) { /* a training step needs the loss */
        tfc_model_free(m);
        m = NULL;
    }
    tfc_backend *be = m ? tfc_backend_open(args.device, (int)args.threads, &err) : NULL;
    if (!m || !be || tfc_model_bind(m, be, batch, &err) || tfc_model_init_weights(m, 1, &err)) {
        fputs(err.text, stderr);
        tfc_model_free(m);
        if (be) tfc_backend_free(be);
        return tfc_exit_code(err.code);
    }
    const int ni = tfc_model_ninputs(m), no = tfc_model_noutputs(m); /* a functional model's */
    void *xs[TFC_MODEL_MAX_INPUTS] = {0}, *labels[TFC_MODEL_MAX_OUTPUTS] = {0};
    int nl = tfc_model_nlayers(m);
    double *fw = malloc(sizeof(double) * (size_t)(nl * iters)),
           *bw = malloc(sizeof(double) * (size_t)(nl * iters)),
           *step = malloc(sizeof(double) * (size_t)iters);
    uint64_t s = 88172645463325252ull;
    for (int k = 0; k < ni; k++) {
        int64_t vocab = 0; /* the smallest id limit of the layers reading input k */
        for (int i = 0; i < nl; i++) {
            const tfc_layer *l = tfc_model_layer(m, i);
            if (l->id_limit && l->inputs[0] == -1 - k && (!vocab || l->id_limit < vocab))
                vocab = l->id_limit;
        }
        const int64_t nin = (int64_t)batch * tfc_shape_numel(tfc_model_input_shape_at(m, k));
        void *x = xs[k] = malloc((size_t)nin * 4);
        for (int64_t i = 0; i < nin; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            if (tfc_model_input_dtype_at(m, k) == TFC_I32)
                ((int32_t *)x)[i] = vocab ? (int32_t)(s % (uint64_t)vocab) : 0;
            else
                ((float *)x)[i] = (float)((double)(s >> 11) / 9007199254740992.0);
        }
    }
    for (int k = 0; k < no; k++) { /* each output's: class ids, or 0/1 targets */
        const int sparse = tfc_model_loss_kind_at(m, k) == TFC_LOSS_SPARSE_CCE;
        const int64_t nlab = (int64_t)batch * tfc_model_label_rows_at(m, k) *
                             (sparse ? 1 : tfc_model_classes_at(m, k));
        labels[k] = malloc((size_t)nlab * 4);
        for (int64_t i = 0; labels[k] && i < nlab; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            if (sparse)
                ((int32_t *)labels[k])[i] = (int32_t)(s % (uint64_t)tfc_model_classes_at(m, k));
            else
                ((float *)labels[k])[i] = (float)(s % 2);
        }
    }
    tfc_batch_result r;
    for (int it = -5; it < iters; it++) {
        double t0 = tfc_now();
        if (tfc_model_forward_inputs(m, (const void *const *)xs, batch, 1, 1, (uint64_t)(it + 5),
                                     &err))
            break;
        be->ops->sync(be);
        double t1 = tfc_now();
        /* Per-layer: run each layer again alone, timed (the forward above set up inputs). */
        for (int i = 0; i < nl && it >= 0; i++) {
            double a = tfc_now();
            tfc_model_layer_forward(m, i);
            be->ops->sync(be);
            fw[i * iters + it] = tfc_now() - a;
        }
        double tb = tfc_now();
        tfc_model_loss_targets(m, (const void *const *)labels, 1, &r, &err);
        tfc_model_zero_grad(m);
        for (int i = nl - 1; i >= 0; i--) {
            double a = tfc_now();
            tfc_model_layer_backward(m, i);
            be->ops->sync(be);
            if (it >= 0) bw[i * iters + it] = tfc_now() - a;
        }
        if (it >= 0) step[it] = (t1 - t0) + (tfc_now() - tb);
    }
    if (err.count) {
        fputs(err.text, stderr);
        return tfc_exit_code(err.code);
    }
    printf("%s on %s, batch %d, %d iterations (median ms)\n", tfc_model_name(m), be->ops->name,
           batch, iters);
    printf("%-4s %-24s %-22s %10s %10s\n", "#", "layer", "type", "forward", "backward");
    double tf = 0, tbk = 0;
    for (int i = 0; i < nl; i++) {
        tfc_layer *l = tfc_model_layer(m, i);
        double f = tfc_median(fw + i * iters, iters) * 1e3, b = tfc_median(bw + i * iters, iters) * 1e3;
        tf += f;
        tbk += b;
        printf("%-4d %-24s %-22s %10.3f %10.3f\n", i, l->name, l->ops->type, f, b);
    }
    printf("%-51s %10.3f %10.3f\n", "sum of layers", tf, tbk);
    printf("whole step (forward + loss + backward, one pass): %.3f ms\n", tfc_median(step, iters) * 1e3);
    for (int k = 0; k < ni; k++) free(xs[k]);
    for (int k = 0; k < no; k++) free(labels[k]);
    free(fw);
    free(bw);
    free(step);
    tfc_model_free(m);
    tfc_backend_free(be);
    return 0;
}
