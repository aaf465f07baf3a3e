/* tfc-test: evaluates a weights file on a solver's test pipeline and prints the loss and
 * the model's metrics (SPEC §3). Exit 0 on success, 1 on runtime failures, 2 on bad usage or
 * configuration. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "solver/solver.h"

static const char *usage =
    "usage: tfc-test SOLVER.yaml --weights FILE [--set KEY=VALUE]... [--device cpu|gpu|gpu:N]\n"
    "                [--threads N]\n"
    "Runs the solver's whole test pipeline (data.test) through the model with the given\n"
    "weights and prints the loss and metrics. A run's config.yaml works as SOLVER.yaml.\n";

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
    const char *path = NULL, *weights = NULL;
    const char *sets[256];
    tfc_solver_options opt = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_arg = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(a, "--version")) {
            printf("tfc-test (tfc) %s\n", TFC_VERSION);
            return 0;
        } else if (!strcmp(a, "--weights") && has_arg) {
            weights = argv[++i];
        } else if (!strcmp(a, "--set") && has_arg && opt.nsets < 256) {
            sets[opt.nsets++] = argv[++i];
        } else if (!strncmp(a, "--set=", 6) && opt.nsets < 256) {
            sets[opt.nsets++] = a + 6;
        } else if (!strcmp(a, "--device") && has_arg) {
            opt.device = argv[++i];
        } else if (!strcmp(a, "--threads") && has_arg && parse_threads(argv[i + 1], &opt.threads)) {
            i++;
        } else if (a[0] == '-' || path) {
            fprintf(stderr, "tfc-test: bad argument '%s'\n%s", a, usage);
            return 2;
        } else {
            path = a;
        }
    }
    if (!path || !weights) {
        fputs(usage, stderr);
        return 2;
    }
    opt.sets = sets;
    tfc_error err;
    tfc_error_clear(&err);
    tfc_eval e;
    tfc_solver *s = tfc_solver_load(path, &opt, &err);
    tfc_status st = s ? tfc_solver_evaluate(s, weights, &e, &err) : err.code;
    if (st) {
        fputs(err.text, stderr);
    } else {
        char line[512];
        tfc_solver_format_eval(s, &e, line, sizeof line);
        printf("test: %s  (%lld examples)\n", line, (long long)e.examples);
    }
    tfc_solver_free(s);
    return tfc_exit_code(st);
}
