/* tfc-train: trains the model of a solver file (SPEC §3), writing the run directory of
 * SPEC §4. SIGINT, SIGTERM and SIGHUP (a closed terminal) ask the loop to write a snapshot
 * and stop; the exit status is then 130, 143 or 129. SIGPIPE is ignored: a closed stdout
 * ends the printing, not the run. SIGUSR1 asks for a snapshot now, SIGUSR2 for a test pass
 * now. Exit 0 when the run completes, 1 on runtime failures (data, device, a non-finite
 * loss), 2 on bad usage or configuration. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "tfc.h"

/* The command line, as the option table fills it. */
static const char *set_v[256], *solver_v[1];
static struct {
    cli_list sets, solver;
    const char *resume, *weights, *device, *out;
    long threads, nprocs, stop_at;
    int quiet, keys, force, overwrite, cuda_graphs, no_cuda_graphs;
} args = {.sets = CLI_LIST_OF(set_v), .solver = CLI_LIST_OF(solver_v)};

static const cli_option options[] = {
    CLI_OPT_SOLVER_SET(&args.sets),
    {"resume", 0, CLI_STRING, &args.resume, "STATE",
     .help = "continue exactly from a snapshot's .state file"},
    {"stop-at", 0, CLI_INT, &args.stop_at, "ITER", .min = 1, .max = 2147483647,
     .help = "pause after iteration ITER (below max_iter, not before a resumed\n"
             "snapshot's): a test pass, a snapshot, status paused, exit 0; --resume\n"
             "continues as if it had never paused"},
    {"force", 0, CLI_FLAG, &args.force, NULL,
     .help = "with --resume: when the configuration changes what the state does not fit\n"
             "(model, data, optimizer), start a new run from the snapshot's weights"},
    {"weights", 0, CLI_STRING, &args.weights, "FILE",
     .help = "initialise layers by name from a weights file (fine-tuning)"},
    CLI_OPT_SOLVER_DEVICE(&args.device),
    CLI_OPT_THREADS(&args.threads),
    {"out", 0, CLI_STRING, &args.out, "DIR",
     .help = "the run directory (default: runs/<model>-<timestamp>)"},
    {"overwrite", 0, CLI_FLAG, &args.overwrite, NULL,
     .help = "--out holds an earlier run: clear its files first (without this\n"
             "such a folder is refused, unless --resume points into it and that\n"
             "run has not finished: then --overwrite lets the resume replace its\n"
             "results); a run still training there is never cleared (DIR/.lock)"},
    {"quiet", 0, CLI_FLAG, &args.quiet, NULL, .help = "no progress output"},
    {"cuda-graphs", 0, CLI_FLAG, &args.cuda_graphs, NULL,
     .help = "GPU: replay the training step from a CUDA graph, the same bits\n"
             "(the default wherever it applies; this flag also says where it\n"
             "does not and when the step is captured; docs/solver.md)"},
    {"no-cuda-graphs", 0, CLI_FLAG, &args.no_cuda_graphs, NULL,
     .help = "GPU: launch every step's kernels, no CUDA graph"},
    {"nprocs", 0, CLI_INT, &args.nprocs, "N", .min = 1, .max = 65536,
     .help = "train data-parallel on N processes of this machine: runs\n"
             "mpirun -np N tfc-train ... for you (docs/distributed.md)"},
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
                   "129/130/143 stopped by SIGHUP/SIGINT/SIGTERM after writing a snapshot;\n"
                   "a closed stdout (tfc-train ... | head) only ends the printing",
    .operand_list = &args.solver,
};

/* --keys: the solver's field tables, as the validator reads them. */
static void print_keys(void)
{
    static const char *const titles[] = {"solver file", "data",    "snapshot",
                                         "early_stopping", "ema",  "rollback",
                                         "summary",     "loss_scale"};
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

static void catch_stop_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* Whether the progress line is redrawn in place (tfc_solver_options.live): TFC_LIVE=0|1 when
 * set, else on a terminal only (-1). A rank started by mpirun writes into mpirun's
 * pseudo-terminal even when mpirun's own output is a file or a pipe, so it cannot tell: it
 * prints plain lines unless --nprocs, which can, said TFC_LIVE=1. */
static int console_live(const tfc_comm *comm)
{
    const char *env = getenv("TFC_LIVE");
    if (env && (!strcmp(env, "0") || !strcmp(env, "1"))) return env[0] == '1';
    return comm->size > 1 ? 0 : -1;
}

/* --nprocs N: runs `mpirun -np N` with the same command line without --nprocs and waits for
 * it (TFC_LIVE set for the ranks from this stdout). SIGINT/SIGTERM reach the ranks through
 * mpirun (which ends them with SIGTERM: each writes the snapshot of one common iteration); the
 * exit status is then 128 + the signal, else mpirun's. */
static int launch(int argc, char **argv)
{
    char np[24];
    snprintf(np, sizeof np, "%ld", args.nprocs);
    char **v = calloc((size_t)argc + 4, sizeof *v);
    if (!v) return 1;
    int n = 0;
    v[n++] = "mpirun";
    v[n++] = "-np";
    v[n++] = np;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--nprocs")) {
            i++;
            continue;
        }
        if (!strncmp(argv[i], "--nprocs=", 9)) continue;
        v[n++] = argv[i];
    }
    fflush(stdout);
    fflush(stderr);
    catch_stop_signals();
    /* the ranks write into mpirun's pseudo-terminal whatever this stdout is: tell them */
    if (!getenv("TFC_LIVE")) setenv("TFC_LIVE", isatty(STDOUT_FILENO) ? "1" : "0", 1);
    pid_t pid = fork();
    if (pid == 0) {
        execvp("mpirun", v);
        fprintf(stderr, "tfc-train: --nprocs needs mpirun, which cannot be run here (install "
                        "openmpi-bin, or launch with your cluster's launcher)\n");
        _exit(1);
    }
    free(v);
    if (pid < 0) {
        perror("tfc-train: fork");
        return 1;
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return 1;
        if (stop_signal) kill(pid, (int)stop_signal); /* not from a terminal: pass it on */
    }
    if (stop_signal) return 128 + (int)stop_signal;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(int argc, char **argv)
{
    int rc = cli_parse(&tool, argc, argv);
    if (rc >= 0) return rc;
    if (args.keys) {
        print_keys();
        return 0;
    }
    if (args.force && !args.resume)
        return cli_error(&tool, "--force goes with --resume (it turns a resume the state does "
                                "not fit into a new run from its weights)");
    if (args.cuda_graphs && args.no_cuda_graphs)
        return cli_error(&tool, "--cuda-graphs and --no-cuda-graphs exclude each other");
    if (args.resume && args.weights)
        return cli_error(&tool, "--resume and --weights exclude each other (a state file "
                                "carries its weights)");
    signal(SIGPIPE, SIG_IGN); /* a closed stdout ends the printing (EPIPE), not the run */
    if (args.nprocs > 1 && tfc_comm_launched_size() == 1) return launch(argc, argv);
    const char *path = args.solver.v[0];
    tfc_error err;
    tfc_error_clear(&err);
    /* One of several ranks: rank 0 reports what every rank would (configuration errors,
     * progress); a failure on one rank ends them all. */
    tfc_comm *comm = tfc_comm_world(&err);
    if (!comm) {
        fputs(err.text, stderr);
        return tfc_exit_code(err.code);
    }
    tfc_solver_options opt = {0};
    opt.sets = args.sets.v;
    opt.nsets = args.sets.n;
    opt.resume = args.resume;
    opt.force = args.force;
    opt.stop_at = args.stop_at;
    opt.cuda_graphs = args.cuda_graphs      ? 1
                      : args.no_cuda_graphs ? 0
                                            : TFC_CUDA_GRAPHS_AUTO;
    opt.weights = args.weights;
    opt.device = args.device;
    opt.threads = (int)args.threads;
    opt.out_dir = args.out;
    opt.overwrite = args.overwrite;
    opt.console = args.quiet ? NULL : stdout;
    opt.live = console_live(comm);
    opt.stop = &stop_signal;
    opt.snapshot_now = &snapshot_request;
    opt.evaluate_now = &evaluate_request;
    tfc_solver *s = tfc_solver_load(path, &opt, &err);
    if (!s) {
        if (comm->rank == 0) fputs(err.text, stderr);
        return tfc_exit_code(err.code);
    }
    catch_stop_signals();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_request;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);

    tfc_train_result *res = calloc(1, sizeof *res);
    tfc_status st = res ? tfc_solver_train(s, res, &err) : TFC_ERR_NOMEM;
    int code = tfc_exit_code(st);
    if (st) {
        if (comm->size > 1) fprintf(stderr, "tfc-train: rank %d of %d:\n", comm->rank, comm->size);
        fputs(err.count ? err.text : "tfc-train: out of memory\n", stderr);
        if (res && res->last_snapshot[0])
            fprintf(stderr, "the last good snapshot is %s\n", res->last_snapshot);
        if (comm->size > 1) tfc_comm_abort(comm, code); /* the other ranks may be waiting */
    } else if (comm->rank != 0) {
        if (res->status == TFC_RUN_INTERRUPTED) code = 128 + (stop_signal ? (int)stop_signal : SIGTERM);
    } else if (res->status == TFC_RUN_INTERRUPTED && !stop_signal && comm->size == 1) {
        fprintf(stderr, "tfc-train: stopped by tfc-ctl at iteration %lld; resume with\n"
                        "  tfc-train %s/config.yaml --resume %s\n",
                (long long)res->iterations, res->run_dir, res->last_snapshot);
    } else if (res->status == TFC_RUN_INTERRUPTED) {
        char np[32] = "";
        if (comm->size > 1) snprintf(np, sizeof np, " --nprocs %d", comm->size);
        /* The run's own config.yaml carries its --set overrides: resuming with it is exact. */
        fprintf(stderr, "tfc-train: stopped by signal %d at iteration %lld; resume with\n"
                        "  tfc-train %s/config.yaml%s --resume %s\n",
                (int)(stop_signal ? stop_signal : SIGTERM), (long long)res->iterations,
                res->run_dir, np, res->last_snapshot);
        code = 128 + (stop_signal ? (int)stop_signal : SIGTERM);
    } else if (res->status == TFC_RUN_PAUSED) {
        char line[512] = "";
        if (res->have_test) tfc_solver_format_eval(s, &res->test, line, sizeof line);
        char np[32] = "";
        if (comm->size > 1) snprintf(np, sizeof np, " --nprocs %d", comm->size);
        printf("paused at iteration %lld (--stop-at)%s%s; continue with\n"
               "  tfc-train %s/config.yaml%s --resume %s\n",
               (long long)res->iterations, line[0] ? "; test " : "", line, res->run_dir, np,
               res->last_snapshot);
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
