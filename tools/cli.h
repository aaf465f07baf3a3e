/* The command line of every tfc-* program: a tool describes its options in one table (name,
 * short alias, argument kind, destination, metavar, help) and that table drives parsing,
 * validation, the error lines, --help and --version alike. Compiled into each tool by the
 * Makefile's tool rule; not part of libtfc. */
#ifndef TFC_TOOLS_CLI_H
#define TFC_TOOLS_CLI_H

#include <stdio.h>

/* What an option takes and where it goes (`dest` of cli_option). */
typedef enum cli_kind {
    CLI_FLAG,   /* no argument: the int at dest becomes 1 */
    CLI_STRING, /* one argument: the const char * at dest points to it */
    CLI_INT,    /* one integer argument in [min, max]: the long at dest */
    CLI_LIST,   /* one argument, repeatable: appended to the cli_list at dest */
    CLI_VALUES, /* one or more arguments, up to the next one starting with '-'; repeatable:
                   appended to the cli_list at dest */
    CLI_CALL,   /* one argument, repeatable: passed to call(dest, arg) in command-line order */
} cli_kind;

/* cli_option.flags */
enum {
    CLI_REQUIRED = 1,   /* the command line must give the option */
    CLI_STANDALONE = 2, /* a command of its own (tfc-train --keys): when it is given, the
                           operands and the required options are not checked */
};

/* Arguments gathered into a caller's array of `cap` pointers (into argv). */
typedef struct cli_list {
    const char **v;
    int n, cap;
} cli_list;

/* A cli_list over an array: `const char *sets[256]; cli_list l = CLI_LIST_OF(sets);` */
#define CLI_LIST_OF(array) {(array), 0, (int)(sizeof(array) / sizeof *(array))}

/* A CLI_CALL option's handler: takes the argument; returns NULL, or why the argument is wrong
 * (a string that outlives the call). */
typedef const char *(*cli_call_fn)(void *ctx, const char *arg);

/* A table row reads {name, alias, kind, dest, metavar, .help = ...} with .min/.max, .call
 * and .flags where they apply; a row of NULL name ends the table. */
typedef struct cli_option {
    const char *name;    /* the long name without "--"; NULL ends the table */
    char alias;          /* one-letter short form ('h' for -h), 0: none */
    cli_kind kind;
    void *dest;          /* see cli_kind; CLI_CALL: the handler's ctx */
    const char *metavar; /* the argument's name in help and errors ("FILE"); NULL for flags */
    const char *help;    /* one line per '\n' */
    long min, max;       /* CLI_INT: the accepted range */
    cli_call_fn call;    /* CLI_CALL: the handler */
    int flags;           /* CLI_REQUIRED, CLI_STANDALONE */
} cli_option;

/* The entries most tools share, so they read the same everywhere. */
#define CLI_OPT_THREADS(dest)                                       \
    {"threads", 0, CLI_INT, (dest), "N", .min = 1, .max = 4096, \
     .help = "CPU threads (default: all cores)"}
#define CLI_OPT_DEVICE(dest)               \
    {"device", 0, CLI_STRING, (dest), "D", \
     .help = "cpu, gpu or gpu:N (default: a GPU when one is usable, else the CPU)"}
#define CLI_OPT_SOLVER_DEVICE(dest)                                               \
    {"device", 0, CLI_STRING, (dest), "D",                                        \
     .help = "cpu, gpu or gpu:N (default: the solver's device:, else a GPU when\n" \
             "one is usable, else the CPU)"}

/* --set for the tools that take a SOLVER.yaml (tfc-train, tfc-test, tfc-data): dest is a
 * cli_list of overrides applied as tfc_override_apply applies them. */
#define CLI_OPT_SOLVER_SET(dest)                                                        \
    {"set", 0, CLI_LIST, (dest), "KEY=VALUE",                                           \
     .help = "override any solver or model key by its dotted path, e.g.\n"              \
             "optimizer.learning_rate=0.01, model.layers.6.Dropout.rate=0.3,\n"          \
             "data.train.pipeline.3.batch.batch_size=64 (VALUE is YAML)"}
/* --set for the tools that take a MODEL.yaml (tfc_model_load_config): dest is a cli_list. */
#define CLI_OPT_MODEL_SET(dest)                                                      \
    {"set", 0, CLI_LIST, (dest), "KEY=VALUE",                                        \
     .help = "override a model key by its dotted path (VALUE is YAML), e.g.\n"        \
             "model.layers.1.Dense.units=64 (the model. prefix is optional for a\n"   \
             "model file)"}
#define CLI_MODEL_OPERAND "MODEL.yaml|SOLVER.yaml"
#define CLI_MODEL_NOTE                                                                \
    "MODEL.yaml may also be a solver file or a trained run's config.yaml: its model is\n" \
    "used, with the solver's model: file, base_dir and the --set overrides resolved as\n" \
    "tfc-train resolves them, so a run's config.yaml fits its final.safetensors."

/* A tool: its name, operands, option table and the texts of its --help. --help (-h) and
 * --version are built in and need no entry. */
typedef struct cli_tool {
    const char *name;         /* "tfc-train" */
    const char *operands;     /* as the synopsis shows them, e.g. "SOLVER.yaml"; also what a
                                 "missing ..." error names */
    const char *forms;        /* NULL: the synopsis is NAME OPERANDS [OPTIONS], generated from
                                 the table; else complete synopsis lines ('\n' between them),
                                 each printed after NAME, for tools with several forms */
    const char *about;        /* what the tool does (pre-wrapped lines) */
    const cli_option *options;
    const char *notes;        /* printed after the option list; NULL: none */
    const char *exit_status;  /* "0 success, 1 ..., 2 ..." (pre-wrapped lines) */
    cli_list *operand_list;   /* receives the operands: one at least, its cap at most */
} cli_tool;

/* Parses argv[1..argc) against the tool's table: options (--name VALUE, --name=VALUE, the
 * short alias, "--" ending the options) in any order among the operands. Checks every
 * argument: unknown options (with a did-you-mean), missing arguments, integers and their
 * range, a non-repeatable option given twice, missing required options and the operand
 * count. Returns -1 when the tool should go on; otherwise the exit status to return: 0 after
 * printing --help or --version on stdout, 2 after printing a usage error on stderr (one line
 * "NAME: what is wrong", then "try 'NAME --help'"). */
int cli_parse(const cli_tool *tool, int argc, char **argv);

/* A usage error that the tool finds after cli_parse (options that exclude each other, a bad
 * value): prints "NAME: MESSAGE" and the --help hint on stderr, returns 2. */
int cli_error(const cli_tool *tool, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes the --help text: the synopsis, `about`, the options with their help, `notes` and the
 * exit statuses. */
void cli_help(const cli_tool *tool, FILE *f);

#endif
