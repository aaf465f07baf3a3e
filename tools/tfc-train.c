/* tfc-train: trains the model of a solver file (SPEC §3), writing the run directory of
 * SPEC §4. SIGINT and SIGTERM ask the loop to write a snapshot and stop; the exit status
 * is then 130 or 143. Exit 0 when the run completes, 1 on runtime failures (data, device,
 * a non-finite loss), 2 on bad usage or configuration. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "solver/solver.h"

static const char *usage =
    "usage: tfc-train SOLVER.yaml [--set KEY=VALUE]... [--resume STATE] [--weights FILE]\n"
    "                 [--device cpu|gpu|gpu:N] [--threads N] [--out DIR] [--quiet]\n"
    "Trains the solver's model and writes config.yaml, log.csv, a TensorBoard event file,\n"
    "snapshots, final.safetensors, best.safetensors and summary.json into the run directory\n"
    "(--out, default runs/<model>-<timestamp>).\n"
    "  --set KEY=VALUE   override any solver or model key by its dotted path, e.g.\n"
    "                    optimizer.learning_rate=0.01, model.layers.6.Dropout.rate=0.3,\n"
    "                    data.train.pipeline.3.batch.batch_size=64 (VALUE is YAML)\n"
    "  --resume STATE    continue exactly from a snapshot's .state file\n"
    "  --weights FILE    initialise layers by name from a weights file (fine-tuning)\n"
    "  --device D        cpu, gpu or gpu:N (default: the solver's device:, else a GPU when\n"
    "                    one is usable, else the CPU)\n"
    "  --threads N       CPU threads (default: all cores)\n"
    "  --quiet           no progress output\n"
    "  --keys            list every solver key, optimizer and lr_policy with defaults\n"
    "Exit status: 0 done, 1 runtime failure or divergence, 2 bad usage or configuration,\n"
    "130/143 stopped by SIGINT/SIGTERM after writing a snapshot.\n";

/* --keys: the solver's field tables, as the validator reads them. */
static void print_keys(void)
{
    static const char *const titles[] = {"solver file", "data", "snapshot"};
    for (int t = 0; tfc_solver_fields(t); t++) {
        printf("%s:\n", titles[t]);
        tfc_schema_print_help(stdout, tfc_solver_fields(t), "  ");
    }
    for (int t = 0; t < TFC_OPTIMIZER_COUNT; t++) {
        printf("optimizer: {type: %s}\n", tfc_optimizer_names[t]);
        tfc_schema_print_help(stdout, tfc_optimizer_fields((tfc_optimizer_type)t) + 1, "  ");
    }
    for (int t = 0; t < TFC_LR_COUNT; t++) {
        printf("lr_policy: {type: %s}\n", tfc_lr_policy_names[t]);
        tfc_schema_print_help(stdout, tfc_lr_policy_fields((tfc_lr_type)t) + 1, "  ");
    }
}

/* The signal that asked to stop; the loop polls it between iterations. */
static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
}

static int parse_threads(const char *s, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 1 || v > 4096) return 0;
    *out = (int)v;
    return 1;
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    const char *sets[256];
    tfc_solver_options opt = {0};
    opt.live = -1;
    opt.console = stdout;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_arg = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(a, "--version")) {
            printf("tfc-train (tfc) %s\n", TFC_VERSION);
            return 0;
        } else if (!strcmp(a, "--keys")) {
            print_keys();
            return 0;
        } else if (!strcmp(a, "--set") && has_arg && opt.nsets < 256) {
            sets[opt.nsets++] = argv[++i];
        } else if (!strncmp(a, "--set=", 6) && opt.nsets < 256) {
            sets[opt.nsets++] = a + 6;
        } else if (!strcmp(a, "--resume") && has_arg) {
            opt.resume = argv[++i];
        } else if (!strcmp(a, "--weights") && has_arg) {
            opt.weights = argv[++i];
        } else if (!strcmp(a, "--device") && has_arg) {
            opt.device = argv[++i];
        } else if (!strcmp(a, "--out") && has_arg) {
            opt.out_dir = argv[++i];
        } else if (!strcmp(a, "--threads") && has_arg && parse_threads(argv[i + 1], &opt.threads)) {
            i++;
        } else if (!strcmp(a, "--quiet")) {
            opt.console = NULL;
        } else if (a[0] == '-' || path) {
            fprintf(stderr, "tfc-train: bad argument '%s'\n%s", a, usage);
            return 2;
        } else {
            path = a;
        }
    }
    if (!path) {
        fputs(usage, stderr);
        return 2;
    }
    if (opt.resume && opt.weights) {
        fputs("tfc-train: --resume and --weights exclude each other (a state file carries its "
              "weights)\n",
              stderr);
        return 2;
    }
    opt.sets = sets;
    opt.stop = &stop_signal;
    tfc_error err;
    tfc_error_clear(&err);
    tfc_solver *s = tfc_solver_load(path, &opt, &err);
    if (!s) {
        fputs(err.text, stderr);
        return tfc_exit_code(err.code);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    tfc_train_result *res = calloc(1, sizeof *res);
    tfc_status st = res ? tfc_solver_train(s, res, &err) : TFC_ERR_NOMEM;
    int code = tfc_exit_code(st);
    if (st) {
        fputs(err.count ? err.text : "tfc-train: out of memory\n", stderr);
        if (res && res->last_snapshot[0])
            fprintf(stderr, "the last good snapshot is %s\n", res->last_snapshot);
    } else if (res->status == TFC_RUN_INTERRUPTED) {
        fprintf(stderr, "tfc-train: stopped by signal %d at iteration %lld; resume with\n"
                        "  tfc-train %s --resume %s\n",
                (int)stop_signal, (long long)res->iterations, path, res->last_snapshot);
        code = 128 + (int)stop_signal;
    } else {
        char line[512];
        printf("done: %lld iterations in %.1f s (%.1f it/s)", (long long)res->iterations,
               res->wall_seconds, res->iterations_per_second);
        if (res->have_test) {
            tfc_solver_format_eval(s, &res->test, line, sizeof line);
            printf("; test %s", line);
        }
        printf("\nrun directory: %s\n", res->run_dir);
    }
    free(res);
    tfc_solver_free(s);
    return code;
}
