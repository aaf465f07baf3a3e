/* The tools' command-line parser (cli.h): one walk over argv driven by the tool's option
 * table, the usage-error lines, and the --help text generated from the same table. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tfc.h"

#ifndef TFC_VERSION
#define TFC_VERSION "unknown"
#endif

#define MAX_OPTIONS 64 /* rows of one table */
#define WIDTH 92       /* generated synopsis lines wrap before this column */
#define LABEL_MAX 20   /* a longer "--name METAVAR" puts its help on the next line */

/* Built into every tool, listed after the table's options. */
static const cli_option builtins[] = {
    {"help", 'h', CLI_FLAG, NULL, NULL, .help = "show this help and exit"},
    {"version", 0, CLI_FLAG, NULL, NULL, .help = "print the version and exit"},
};
enum { BUILTIN_HELP, BUILTIN_VERSION, NBUILTINS };

int cli_error(const cli_tool *tool, const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "%s: ", tool->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\ntry '%s --help'\n", tool->name);
    return 2;
}

static int count_options(const cli_tool *tool)
{
    int n = 0;
    while (tool->options[n].name) n++;
    TFC_ASSERT(n <= MAX_OPTIONS);
    return n;
}

/* The row an argument starting with '-' names: "-X" (an alias), "--name" or "--name=VALUE"
 * (*inline_arg then points at VALUE). NULL after printing why when there is none. */
static const cli_option *lookup(const cli_tool *tool, const char *arg, const char **inline_arg)
{
    int n = count_options(tool);
    *inline_arg = NULL;
    if (arg[1] != '-') {
        for (int i = 0; arg[2] == 0 && i < n + NBUILTINS; i++) {
            const cli_option *o = i < n ? &tool->options[i] : &builtins[i - n];
            if (o->alias && o->alias == arg[1]) return o;
        }
        cli_error(tool, "unknown option '%s'", arg);
        return NULL;
    }
    const char *name = arg + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    if (eq) *inline_arg = eq + 1;
    const char *names[MAX_OPTIONS + NBUILTINS + 1];
    for (int i = 0; i < n + NBUILTINS; i++) {
        const cli_option *o = i < n ? &tool->options[i] : &builtins[i - n];
        if (strlen(o->name) == len && !strncmp(o->name, name, len)) return o;
        names[i] = o->name;
    }
    names[n + NBUILTINS] = NULL;
    char word[128];
    snprintf(word, sizeof word, "%.*s", (int)len, name);
    const char *near = tfc_did_you_mean(word, names);
    if (near) cli_error(tool, "unknown option '--%s'; did you mean '--%s'?", word, near);
    else cli_error(tool, "unknown option '--%s'", word);
    return NULL;
}

static int push(const cli_tool *tool, const cli_option *o, const char *arg)
{
    cli_list *l = o->dest;
    if (l->n == l->cap) return cli_error(tool, "--%s given more than %d times", o->name, l->cap);
    l->v[l->n++] = arg;
    return 0;
}

/* Stores the argument of an option that takes one; returns 2 after printing an error. */
static int take(const cli_tool *tool, const cli_option *o, const char *arg)
{
    switch (o->kind) {
    case CLI_STRING:
        *(const char **)o->dest = arg;
        return 0;
    case CLI_INT: {
        char *end;
        errno = 0;
        long v = strtol(arg, &end, 10);
        if (!*arg || *end || errno || v < o->min || v > o->max) {
            if (o->max == LONG_MAX)
                return cli_error(tool, "--%s: expected an integer >= %ld, found '%s'", o->name,
                                 o->min, arg);
            return cli_error(tool, "--%s: expected an integer from %ld to %ld, found '%s'",
                             o->name, o->min, o->max, arg);
        }
        *(long *)o->dest = v;
        return 0;
    }
    case CLI_CALL: {
        const char *why = o->call(o->dest, arg);
        return why ? cli_error(tool, "--%s '%s': %s", o->name, arg, why) : 0;
    }
    default:
        return push(tool, o, arg);
    }
}

static int add_operand(const cli_tool *tool, const char *arg)
{
    cli_list *l = tool->operand_list;
    if (l->n == l->cap) return cli_error(tool, "unexpected argument '%s'", arg);
    l->v[l->n++] = arg;
    return 0;
}

int cli_parse(const cli_tool *tool, int argc, char **argv)
{
    tfc_device_start(argv);
    int n = count_options(tool);
    unsigned char seen[MAX_OPTIONS] = {0};
    int standalone = 0, options_done = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *arg;
        if (options_done || a[0] != '-' || a[1] == 0) { /* "-" alone is an operand */
            if (add_operand(tool, a)) return 2;
            continue;
        }
        if (!strcmp(a, "--")) {
            options_done = 1;
            continue;
        }
        const cli_option *o = lookup(tool, a, &arg);
        if (!o) return 2;
        if (o == &builtins[BUILTIN_HELP]) {
            cli_help(tool, stdout);
            return 0;
        }
        if (o == &builtins[BUILTIN_VERSION]) {
            char blas[256];
            tfc_device_blas_line(blas, sizeof blas);
            printf("%s (tfc) %s\n%s\n", tool->name, TFC_VERSION, blas);
            return 0;
        }
        int k = (int)(o - tool->options);
        int single = o->kind == CLI_FLAG || o->kind == CLI_STRING || o->kind == CLI_INT;
        if (single && seen[k]) return cli_error(tool, "--%s given twice", o->name);
        seen[k] = 1;
        standalone |= (o->flags & CLI_STANDALONE) != 0;
        if (o->kind == CLI_FLAG) {
            if (arg) return cli_error(tool, "--%s takes no argument", o->name);
            *(int *)o->dest = 1;
        } else if (o->kind == CLI_VALUES) {
            if (arg && push(tool, o, arg)) return 2;
            int got = arg != NULL;
            for (; i + 1 < argc && argv[i + 1][0] != '-'; got++)
                if (push(tool, o, argv[++i])) return 2;
            if (!got) return cli_error(tool, "--%s needs an argument (%s)", o->name, o->metavar);
        } else {
            if (!arg && i + 1 == argc)
                return cli_error(tool, "--%s needs an argument (%s)", o->name, o->metavar);
            if (take(tool, o, arg ? arg : argv[++i])) return 2;
        }
    }
    if (standalone) return -1;
    for (int k = 0; k < n; k++)
        if ((tool->options[k].flags & CLI_REQUIRED) && !seen[k])
            return cli_error(tool, "missing --%s %s", tool->options[k].name,
                             tool->options[k].metavar);
    if (tool->operand_list->n == 0) return cli_error(tool, "missing %s", tool->operands);
    return -1;
}

/* ---- --help ------------------------------------------------------------------------------- */

/* "--name METAVAR" as the option list shows it ("-h, --help" with an alias). */
static void label(const cli_option *o, char *buf, size_t size)
{
    size_t n = 0;
    if (o->alias) n = (size_t)snprintf(buf, size, "-%c, ", o->alias);
    n += (size_t)snprintf(buf + n, size - n, "--%s", o->name);
    if (o->metavar && n < size)
        snprintf(buf + n, size - n, " %s%s", o->metavar, o->kind == CLI_VALUES ? "..." : "");
}

/* The option as the generated synopsis shows it: "[--out DIR]", "[--set KEY=VALUE]...",
 * "--weights FILE" when required. */
static void item(const cli_option *o, char *buf, size_t size)
{
    int req = (o->flags & CLI_REQUIRED) != 0;
    int repeat = o->kind == CLI_LIST || o->kind == CLI_CALL;
    snprintf(buf, size, "%s--%s%s%s%s%s%s", req ? "" : "[", o->name, o->metavar ? " " : "",
             o->metavar ? o->metavar : "", o->kind == CLI_VALUES ? "..." : "", req ? "" : "]",
             repeat ? "..." : "");
}

static void synopsis(const cli_tool *tool, FILE *f)
{
    if (tool->forms) {
        const char *s = tool->forms;
        for (int first = 1; *s; first = 0) {
            size_t len = strcspn(s, "\n");
            fprintf(f, "%s%s %.*s\n", first ? "usage: " : "       ", tool->name, (int)len, s);
            s += len + (s[len] == '\n');
        }
        return;
    }
    int indent = (int)strlen("usage: ") + (int)strlen(tool->name) + 1;
    int col = fprintf(f, "usage: %s %s", tool->name, tool->operands);
    for (const cli_option *o = tool->options; o->name; o++) {
        char buf[160];
        item(o, buf, sizeof buf);
        if (col + 1 + (int)strlen(buf) > WIDTH) col = fprintf(f, "\n%*s", indent - 1, "") - 1;
        col += fprintf(f, " %s", buf);
    }
    fputc('\n', f);
}

static void option_help(const cli_option *o, int column, FILE *f)
{
    char buf[160];
    label(o, buf, sizeof buf);
    int used = fprintf(f, "  %s", buf);
    const char *h = o->help;
    if (used + 2 > column) {
        fputc('\n', f);
        used = 0;
    }
    for (int first = 1; *h || first; first = 0) {
        size_t len = strcspn(h, "\n");
        fprintf(f, "%*s%.*s\n", first ? column - used : column, "", (int)len, h);
        h += len + (h[len] == '\n');
    }
}

void cli_help(const cli_tool *tool, FILE *f)
{
    int n = count_options(tool), widest = 0;
    for (int i = 0; i < n + NBUILTINS; i++) {
        char buf[160];
        label(i < n ? &tool->options[i] : &builtins[i - n], buf, sizeof buf);
        int w = (int)strlen(buf);
        if (w <= LABEL_MAX && w > widest) widest = w;
    }
    synopsis(tool, f);
    fprintf(f, "\n%s\n\noptions:\n", tool->about);
    for (int i = 0; i < n + NBUILTINS; i++)
        option_help(i < n ? &tool->options[i] : &builtins[i - n], 2 + widest + 2, f);
    if (tool->notes) fprintf(f, "\n%s\n", tool->notes);
    fprintf(f, "\nexit status: %s\n", tool->exit_status);
}
