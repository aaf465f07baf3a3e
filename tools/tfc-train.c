/* tfc-train: trains the model of a solver file (SPEC §3), writing the run directory of
 * SPEC §4. SIGINT and SIGTERM ask the loop to write a snapshot and stop; the exit status
 * is then 130 or 143. SIGUSR1 asks for a snapshot now, SIGUSR2 for a test pass now. Exit 0 when the run completes, 1 on runtime failures (data, device,
 * a non-finite loss), 2 on bad usage or configuration. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tfc.h"

/* The command line, as the option table fills it. */
static const char *set_v[256], *solver_v[1];
static struct {
    cli_list sets, solver;
    const char *resume, *weights, *device, *out;
    long threads;
    int quiet, keys, force;
} args = {.sets = CLI_LIST_OF(set_v), .solver = CLI_LIST_OF(solver_v)};

static const cli_option options[] = {
    {"set", 0, CLI_LIST, &args.sets, "KEY=VALUE",
     .help = "override any solver or model key by its dotted path, e.g.\n"
             "optimizer.learning_rate=0.01, model.layers.6.Dropout.rate=0.3,\n"
             "data.train.pipeline.3.batch.batch_size=64 (VALUE is YAML)"},
    {"resume", 0, CLI_STRING, &args.resume, "STATE",
     .help = "continue exactly from a snapshot's .state file"},
    {"force", 0, CLI_FLAG, &args.force, NULL,
     .help = "with --resume: when the configuration changes what the state does not fit\n"
             "(model, data, optimizer), start a new run from the snapshot's weights"},
    {"weights", 0, CLI_STRING, &args.weights, "FILE",
     .help = "initialise layers by name from a weights file (fine-tuning)"},
    CLI_OPT_SOLVER_DEVICE(&args.device),
    CLI_OPT_THREADS(&args.threads),
    {"out", 0, CLI_STRING, &args.out, "DIR",
     .help = "the run directory (default: runs/<model>-<timestamp>)"},
    {"quiet", 0, CLI_FLAG, &args.quiet, NULL, .help = "no progress output"},
    {"keys", 0, CLI_FLAG, &args.keys, NULL, .flags = CLI_STANDALONE,
     .help = "list every solver key, optimizer and lr_policy with defaults"},
    {NULL},
};

static const cli_tool tool = {
    .name = "tfc-train",
    .operands = "SOLVER.yaml",
    .about = "Trains the solver's model and writes config.yaml, log.csv, a TensorBoard event\n"
             "file, snapshots, final.safetensors, best.safetensors and summary.json into the\n"
             "run directory. While it runs, SIGUSR1 writes a snapshot and SIGUSR2 runs and logs\n"
             "the test split, after the current iteration; training goes on. tfc-ctl RUN_DIR\n"
             "sends the same and more through RUN_DIR/control.",
    .options = options,
    .exit_status = "0 done, 1 runtime failure or divergence, 2 bad usage or configuration,\n"
                   "130/143 stopped by SIGINT/SIGTERM after writing a snapshot",
    .operand_list = &args.solver,
};

/* --keys: the solver's field tables, as the validator reads them. */
static void print_keys(void)
{
    static const char *const titles[] = {"solver file", "data", "snapshot", "early_stopping",
                                         "ema",         "rollback"};
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
static volatile sig_atomic_t snapshot_request, evaluate_request;

/* SIGUSR1: a snapshot now; SIGUSR2: a test pass now; training goes on. */
static void on_request(int sig)
{
    if (sig == SIGUSR1) snapshot_request = 1;
    else evaluate_request = 1;
}

static void on_signal(int sig)
{
    stop_signal = sig;
}

int main(int argc, char **argv)
{
    int rc = cli_parse(&tool, argc, argv);
    if (rc >= 0) return rc;
    if (args.keys) {
        print_keys();
        return 0;
    }
    if (args.resume && args.weights)
        return cli_error(&tool, "--resume and --weights exclude each other (a state file "
                                "carries its weights)");
    const char *path = args.solver.v[0];
    tfc_solver_options opt = {0};
    opt.sets = args.sets.v;
    opt.nsets = args.sets.n;
    opt.resume = args.resume;
    opt.force = args.force;
    opt.weights = args.weights;
    opt.device = args.device;
    opt.threads = (int)args.threads;
    opt.out_dir = args.out;
    opt.console = args.quiet ? NULL : stdout;
    opt.live = -1;
    opt.stop = &stop_signal;
    opt.snapshot_now = &snapshot_request;
    opt.evaluate_now = &evaluate_request;
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
    sa.sa_handler = on_request;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);

    tfc_train_result *res = calloc(1, sizeof *res);
    tfc_status st = res ? tfc_solver_train(s, res, &err) : TFC_ERR_NOMEM;
    int code = tfc_exit_code(st);
    if (st) {
        fputs(err.count ? err.text : "tfc-train: out of memory\n", stderr);
        if (res && res->last_snapshot[0])
            fprintf(stderr, "the last good snapshot is %s\n", res->last_snapshot);
    } else if (res->status == TFC_RUN_INTERRUPTED && !stop_signal) {
        fprintf(stderr, "tfc-train: stopped by tfc-ctl at iteration %lld; resume with\n"
                        "  tfc-train %s --resume %s\n",
                (long long)res->iterations, path, res->last_snapshot);
    } else if (res->status == TFC_RUN_INTERRUPTED) {
        fprintf(stderr, "tfc-train: stopped by signal %d at iteration %lld; resume with\n"
                        "  tfc-train %s --resume %s\n",
                (int)stop_signal, (long long)res->iterations, path, res->last_snapshot);
        code = 128 + (int)stop_signal;
    } else {
        char line[512];
        if (res->status == TFC_RUN_STOPPED_EARLY)
            printf("stopped early at iteration %lld: %s\n", (long long)res->stopped_iteration,
                   res->stop_reason);
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
