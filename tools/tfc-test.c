/* tfc-test: evaluates a weights file on a solver's test pipeline and prints the loss and
 * the model's metrics (SPEC §3). Exit 0 on success, 1 on runtime failures, 2 on bad usage or
 * configuration. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "tfc.h"

/* The command line, as the option table fills it. */
static const char *set_v[256], *solver_v[1];
static struct {
    cli_list sets, solver;
    const char *weights, *device;
    long threads;
    int json;
} args = {.sets = CLI_LIST_OF(set_v), .solver = CLI_LIST_OF(solver_v)};

static const cli_option options[] = {
    {"weights", 0, CLI_STRING, &args.weights, "FILE", .flags = CLI_REQUIRED,
     .help = "the weights to evaluate (a .safetensors file)"},
    CLI_OPT_SOLVER_SET(&args.sets),
    {"json", 0, CLI_FLAG, &args.json, NULL,
     .help = "print the result as one JSON object (with per_class and confusion)"},
    CLI_OPT_SOLVER_DEVICE(&args.device),
    CLI_OPT_THREADS(&args.threads),
    {NULL},
};

static const cli_tool tool = {
    .name = "tfc-test",
    .operands = "SOLVER.yaml",
    .about = "Runs the solver's whole test pipeline (data.test) through the model with the given\n"
             "weights and prints the loss and metrics, and for a classifier the precision, recall\n"
             "and F1 of each class (and their macro averages) and the confusion matrix, with the\n"
             "test source's class names when it has them. A run's config.yaml works as SOLVER.yaml.",
    .options = options,
    .exit_status = "0 success, 1 runtime failure (data, device), 2 bad usage or configuration",
    .operand_list = &args.solver,
};

int main(int argc, char **argv)
{
    int rc = cli_parse(&tool, argc, argv);
    if (rc >= 0) return rc;
    tfc_solver_options opt = {0};
    opt.sets = args.sets.v;
    opt.nsets = args.sets.n;
    opt.device = args.device;
    opt.threads = (int)args.threads;
    tfc_error err;
    tfc_error_clear(&err);
    tfc_eval e;
    tfc_confusion cm = {0};
    tfc_solver *s = tfc_solver_load(args.solver.v[0], &opt, &err);
    tfc_status st = s ? tfc_solver_evaluate_classes(s, args.weights, &e, &cm, &err) : err.code;
    char skipped[600] = "";
    if (!st) tfc_format_skipped("data.test", e.skipped, e.skipped_names, skipped, sizeof skipped);
    if (skipped[0]) fprintf(stderr, "%s\n", skipped);
    if (st) {
        fputs(err.text, stderr);
    } else if (args.json) {
        char *text = tfc_solver_eval_json(s, &e, &cm);
        if (text) printf("%s\n", text);
        free(text);
    } else {
        char line[512];
        tfc_solver_format_eval(s, &e, line, sizeof line);
        printf("test: %s  (%lld examples)\n", line, (long long)e.examples);
        tfc_confusion_print(&cm, stdout);
    }
    tfc_confusion_free(&cm);
    tfc_solver_free(s);
    return tfc_exit_code(st);
}
