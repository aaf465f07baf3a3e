/* tfc-summary: Keras's model.summary() with what training will cost, on paper: per layer the
 * output shape, parameters, forward and backward FLOPs and the bytes kept for backward; then
 * the memory of training at a batch on a device, planned as tfc_model_bind lays it out,
 * without reading data or allocating the model's memory; --max-batch searches the largest
 * batch that fits a memory size. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tfc.h"

static const char *path_v[1], *set_v[256];
static struct {
    cli_list path, sets;
    const char *device, *memory;
    long batch, threads;
    int json, max_batch;
} args = {.path = CLI_LIST_OF(path_v), .sets = CLI_LIST_OF(set_v)};

static const cli_option options[] = {
    {"batch", 0, CLI_INT, &args.batch, "N", .min = 1, .max = 1 << 24,
     .help = "the batch memory is planned for (default: the solver's batch_size;\n"
             "1 for a model file)"},
    {"max-batch", 0, CLI_FLAG, &args.max_batch, NULL,
     .help = "also find the largest batch whose training memory fits --memory"},
    {"memory", 0, CLI_STRING, &args.memory, "BYTES",
     .help = "the memory --max-batch fits into: bytes, or with K, M, G (powers of 1024)"},
    {"json", 0, CLI_FLAG, &args.json, NULL, .help = "print one JSON object instead of the table"},
    {"set", 0, CLI_LIST, &args.sets, "KEY=VALUE",
     .help = "override a key by its dotted path (VALUE is YAML), as tfc-train --set"},
    CLI_OPT_SOLVER_DEVICE(&args.device),
    CLI_OPT_THREADS(&args.threads),
    {NULL},
};

static const cli_tool tool = {
    .name = "tfc-summary",
    .operands = CLI_MODEL_OPERAND,
    .notes = CLI_MODEL_NOTE "\n\n"
             "FLOPs are per example: two per multiply-add of the matrix products (Dense,\n"
             "Conv2D, Conv1D, LSTM), one per output element elsewhere (an estimate). Memory is\n"
             "the device's: parameters, gradients, optimizer slots, EMA copies and the\n"
             "activation arena as tfc_model_bind lays it out (outputs and pre-activations,\n"
             "saved buffers, workspace, activation gradients sharing memory across backward);\n"
             "host staging is one batch of inputs and labels. Not counted: the pipeline's\n"
             "shuffle, prefetch and cache buffers, and the device libraries' own handles.",
    .about = "Prints a model's layers (output shape, parameters, FLOPs, bytes kept for backward)\n"
             "and the memory training it takes at a batch size on a device, planned without\n"
             "reading data or allocating the model.",
    .options = options,
    .exit_status = "0 success, 1 runtime failure (device), 2 bad usage or configuration",
    .operand_list = &args.path,
};

/* "123", "64K", "1.5G", "8GiB" -> bytes (powers of 1024); 0 when malformed. */
static double parse_bytes(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    double mult = 1;
    switch (*end) {
    case 'K': case 'k': mult = 1024.0, end++; break;
    case 'M': case 'm': mult = 1024.0 * 1024, end++; break;
    case 'G': case 'g': mult = 1024.0 * 1024 * 1024, end++; break;
    case 'T': case 't': mult = 1024.0 * 1024 * 1024 * 1024, end++; break;
    }
    if (mult > 1 && *end == 'i') end++; /* 8GiB */
    if (*end == 'B') end++;
    return end == s || *end || !(v > 0) || !isfinite(v) ? 0 : v * mult;
}

/* Sizes as Keras's summary prints them: KB, MB, GB of 1024. */
static const char *human(double bytes, char *buf, size_t n)
{
    const char *unit[] = {"B", "KB", "MB", "GB", "TB"};
    int u = 0;
    while (bytes >= 1024 && u < 4) bytes /= 1024, u++;
    snprintf(buf, n, u ? "%.2f %s" : "%.0f %s", bytes, unit[u]);
    return buf;
}

static const char *flops(double f, char *buf, size_t n)
{
    const char *unit[] = {"", "K", "M", "G", "T", "P"};
    int u = 0;
    while (f >= 1000 && u < 5) f /= 1000, u++;
    snprintf(buf, n, u ? "%.2f %s" : "%.0f%s", f, unit[u]);
    return buf;
}

static void shape_text(const tfc_shape *s, char *buf, size_t n)
{
    int used = snprintf(buf, n, "(None");
    for (int d = 0; d < s->ndim && used < (int)n; d++)
        used += snprintf(buf + used, n - (size_t)used, ", %lld", (long long)s->dim[d]);
    if (used < (int)n) snprintf(buf + used, n - (size_t)used, ")");
}

/* Bytes of layer l kept from forward to backward at batch B: its output, pre-activation and
 * saved buffer (as bound, before alignment). */
static int64_t kept_bytes(const tfc_layer *l, int64_t B)
{
    int64_t out = tfc_layer_out_numel(l) * (l->act != TFC_ACT_LINEAR ? 2 : 1);
    return (B * (out + l->saved_floats) + l->fixed_floats) * 4;
}

typedef struct plan {
    tfc_training_memory mem; /* solver: everything; model file: model only */
    size_t device;
} plan;

static tfc_status plan_at(tfc_model *m, tfc_solver *s, tfc_backend *be, int batch, plan *out,
                          tfc_error *err)
{
    tfc_memory_plan mp;
    tfc_status st = tfc_model_plan_memory(m, be, batch, &mp, err);
    if (st) return st;
    memset(out, 0, sizeof *out);
    if (s) tfc_solver_memory(s, &mp, &out->mem);
    else out->mem.model = mp, out->mem.device = mp.params + mp.grads + mp.arena;
    out->device = out->mem.device;
    return TFC_OK;
}

/* The largest batch whose device memory fits `limit` (0: not even 1). */
static int max_batch(tfc_model *m, tfc_solver *s, tfc_backend *be, double limit, tfc_error *err)
{
    plan p;
    int lo = 0, hi = 1;
    while (hi <= (1 << 24)) {
        if (plan_at(m, s, be, hi, &p, err)) return -1;
        if ((double)p.device > limit) break;
        lo = hi;
        hi *= 2;
    }
    if (hi > (1 << 24)) return lo;
    while (hi - lo > 1) { /* lo fits, hi does not */
        int mid = lo + (hi - lo) / 2;
        if (plan_at(m, s, be, mid, &p, err)) return -1;
        if ((double)p.device <= limit) lo = mid;
        else hi = mid;
    }
    return lo;
}

int main(int argc, char **argv)
{
    int rc = cli_parse(&tool, argc, argv);
    if (rc >= 0) return rc;
    double limit = 0;
    if (args.memory && !(limit = parse_bytes(args.memory)))
        return cli_error(&tool, "--memory %s: expected a positive size such as 8G or 512M",
                         args.memory);
    if (args.max_batch && !args.memory)
        return cli_error(&tool, "--max-batch needs --memory BYTES (the memory to fit)");
    if (args.memory && !args.max_batch)
        return cli_error(&tool, "--memory goes with --max-batch (the memory the batch is fitted "
                                "into)");
    const char *path = args.path.v[0];
    tfc_error err;
    tfc_error_clear(&err);

    /* A solver (a mapping with model:) brings its batch, optimizer and EMA. */
    tfc_doc *doc = tfc_doc_load_file(path, &err);
    tfc_node *root = doc ? tfc_doc_root(doc) : NULL;
    int is_solver = root && tfc_node_get(root, "model") && !tfc_node_get(root, "layers");
    tfc_doc_free(doc);
    if (!root) {
        fputs(err.text, stderr);
        return tfc_exit_code(err.code);
    }
    tfc_solver *s = NULL;
    tfc_model *m = NULL;
    const char *device = args.device;
    if (is_solver) {
        tfc_solver_options o = {.sets = args.sets.v, .nsets = args.sets.n, .device = args.device,
                                .threads = (int)args.threads, .live = 0};
        s = tfc_solver_load(path, &o, &err);
        m = s ? tfc_solver_model(s) : NULL;
        if (s && !device) device = tfc_solver_get_config(s)->device;
    } else {
        m = tfc_model_load_config(path, args.sets.v, args.sets.n, &err);
    }
    int batch = (int)args.batch;
    if (m && !batch) batch = s ? tfc_solver_rank_batch(s, 1) : 1;
    if (m && !batch) batch = 1;
    tfc_backend *be = m ? tfc_backend_open(device, (int)args.threads, &err) : NULL;
    plan p;
    int fit = 0;
    if (be && !plan_at(m, s, be, batch, &p, &err) && args.max_batch)
        fit = max_batch(m, s, be, limit, &err);
    if (err.count) {
        fputs(err.text, stderr);
        if (be) tfc_backend_free(be);
        if (s) tfc_solver_free(s);
        else tfc_model_free(m);
        return tfc_exit_code(err.code);
    }

    int nl = tfc_model_nlayers(m);
    int64_t fw_total = 0, bw_total = 0;
    const tfc_memory_plan *mp = &p.mem.model;
    json_t *j = args.json ? json_object() : NULL, *jl = args.json ? json_array() : NULL;
    char a[64], b[64], c[64], sh[96];
    if (!j) {
        printf("Model: \"%s\" (batch %d on %s)\n", tfc_model_name(m), batch, be->ops->name);
        if (tfc_model_max_length(m))
            printf("Sequences of any length up to input.max_length %lld: shapes, FLOPs and "
                   "memory at %lld\n",
                   (long long)tfc_model_max_length(m), (long long)tfc_model_max_length(m));
        printf("%-34s %-20s %11s %12s %12s %12s\n", "Layer (type)", "Output Shape", "Param #",
               "Fwd FLOPs", "Bwd FLOPs", "Kept (batch)");
    }
    for (int i = 0; i < nl; i++) {
        tfc_layer *l = tfc_model_layer(m, i);
        int64_t np = tfc_layer_weight_count(l), fw, bw;
        tfc_model_layer_flops(m, i, &fw, &bw);
        fw_total += fw, bw_total += bw;
        shape_text(&l->out_shape, sh, sizeof sh);
        int64_t kept = kept_bytes(l, batch);
        if (j) {
            json_array_append_new(
                jl, json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "name", l->name, "type",
                              l->ops->type, "output_shape", sh, "params", (json_int_t)np,
                              "forward_flops", (json_int_t)fw, "backward_flops", (json_int_t)bw,
                              "kept_bytes", (json_int_t)kept, "workspace_bytes",
                              (json_int_t)l->workspace));
        } else {
            char name[160];
            snprintf(name, sizeof name, "%s (%s)", l->name, l->ops->type);
            printf("%-34s %-20s %11lld %12s %12s %12s\n", name, sh, (long long)np,
                   flops((double)fw, a, sizeof a), flops((double)bw, b, sizeof b),
                   human((double)kept, c, sizeof c));
        }
    }
    int64_t all = tfc_model_weight_count(m), tr = tfc_model_trainable_count(m);
    const char *dev = be->ops->name;
    if (j) {
        json_t *mem = json_pack(
            "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "parameters",
            (json_int_t)mp->params, "gradients", (json_int_t)mp->grads, "optimizer",
            (json_int_t)p.mem.optimizer, "optimizer_slots", (json_int_t)p.mem.optimizer_slots,
            "ema", (json_int_t)p.mem.ema, "arena", (json_int_t)mp->arena, "arena_io",
            (json_int_t)mp->io, "arena_outputs", (json_int_t)mp->outputs, "arena_saved",
            (json_int_t)mp->saved, "arena_workspace", (json_int_t)mp->workspace,
            "arena_activation_gradients", (json_int_t)mp->activation_grads, "device",
            (json_int_t)p.device);
        json_object_set_new(mem, "host_staging", json_integer((json_int_t)p.mem.host_staging));
        json_object_set_new(j, "model", json_string(tfc_model_name(m)));
        json_object_set_new(j, "device", json_string(dev));
        json_object_set_new(j, "batch", json_integer(batch));
        json_object_set_new(j, "solver", json_boolean(s != NULL));
        json_object_set_new(j, "layers", jl);
        json_object_set_new(j, "params", json_integer((json_int_t)all));
        json_object_set_new(j, "trainable_params", json_integer((json_int_t)tr));
        json_object_set_new(j, "forward_flops", json_integer((json_int_t)(fw_total * batch)));
        json_object_set_new(j, "backward_flops", json_integer((json_int_t)(bw_total * batch)));
        json_object_set_new(j, "memory", mem);
        if (args.max_batch) {
            json_object_set_new(j, "memory_limit", json_real(limit));
            json_object_set_new(j, "max_batch", json_integer(fit));
        }
        char *text = json_dumps(j, JSON_INDENT(2));
        puts(text);
        free(text);
        json_decref(j);
    } else {
        printf("Total params: %lld (%s)\n", (long long)all, human((double)all * 4, a, sizeof a));
        printf("Trainable params: %lld (%s)\n", (long long)tr, human((double)tr * 4, a, sizeof a));
        printf("Non-trainable params: %lld (%s)\n", (long long)(all - tr),
               human((double)(all - tr) * 4, a, sizeof a));
        printf("FLOPs of a training step at batch %d: forward %s, backward %s\n", batch,
               flops((double)fw_total * batch, a, sizeof a),
               flops((double)bw_total * batch, b, sizeof b));
        printf("Memory of training at batch %d on %s (planned; nothing allocated):\n", batch, dev);
        printf("  %-22s %12s\n", "parameters", human((double)mp->params, a, sizeof a));
        if (tfc_model_precision(m)) { /* the plan counts the 16-bit copies with them */
            char what[64];
            snprintf(what, sizeof what, "of which %s copies",
                     tfc_precision_names[tfc_model_precision(m)]);
            printf("    %-20s %12s\n", what, human((double)tr * 4, a, sizeof a));
        }
        printf("  %-22s %12s\n", "gradients", human((double)mp->grads, a, sizeof a));
        if (s) {
            char what[64];
            snprintf(what, sizeof what, "optimizer (%d slot%s)", p.mem.optimizer_slots,
                     p.mem.optimizer_slots == 1 ? "" : "s");
            printf("  %-22s %12s\n", what, human((double)p.mem.optimizer, a, sizeof a));
            if (p.mem.ema) printf("  %-22s %12s\n", "ema (2 copies)", human((double)p.mem.ema, a, sizeof a));
        }
        printf("  %-22s %12s\n", "activation arena", human((double)mp->arena, a, sizeof a));
        printf("    %-20s %12s\n", "outputs", human((double)mp->outputs, a, sizeof a));
        printf("    %-20s %12s\n", "saved for backward", human((double)mp->saved, a, sizeof a));
        printf("    %-20s %12s\n", "gradients (shared)", human((double)mp->activation_grads, a, sizeof a));
        printf("    %-20s %12s\n", "workspace", human((double)mp->workspace, a, sizeof a));
        printf("    %-20s %12s\n", "inputs and labels", human((double)mp->io, a, sizeof a));
        printf("  %-22s %12s\n", "total on the device", human((double)p.device, a, sizeof a));
        if (s) printf("  %-22s %12s\n", "host staging", human((double)p.mem.host_staging, a, sizeof a));
        else printf("(a model file: give its solver for the optimizer's and EMA's share)\n");
        if (args.max_batch) {
            if (fit) printf("Largest batch that fits %s: %d\n", human(limit, a, sizeof a), fit);
            else printf("Not even batch 1 fits %s\n", human(limit, a, sizeof a));
        }
    }
    tfc_backend_free(be);
    if (s) tfc_solver_free(s);
    else tfc_model_free(m);
    return 0;
}
