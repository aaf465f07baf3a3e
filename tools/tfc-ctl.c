/* tfc-ctl: steers a running tfc-train through its run directory's control FIFO: a snapshot
 * or a test pass now, a stop (snapshot, then exit), or a new learning rate, max_iter,
 * interval or clipping threshold. One-way: the
 * trainer prints what it did. Exit 0 when the command was delivered, 1 when no trainer
 * listens in RUN_DIR, 2 on bad usage (a RUN_DIR that does not exist; a key `set` does not
 * take is caught here). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "tfc.h"

static const char *operand_v[3];
static struct {
    cli_list operands;
} args = {.operands = CLI_LIST_OF(operand_v)};

static const cli_option options[] = {{NULL}};

static const cli_tool tool = {
    .name = "tfc-ctl",
    .operands = "RUN_DIR COMMAND",
    .forms = "RUN_DIR snapshot|evaluate|stop\nRUN_DIR set KEY=VALUE",
    .about = "Sends a command to the tfc-train running in RUN_DIR (through RUN_DIR/control), acted\n"
             "on after its current iteration: snapshot (write one now), evaluate (run and log\n"
             "the test split now), stop (snapshot, then exit 0), set KEY=VALUE for\n"
             "optimizer.learning_rate (the base rate from then on), max_iter, display,\n"
             "test_interval, snapshot.interval or clip_gradients (recorded in later snapshots\n"
             "and replayed by --resume). The trainer prints what it did.",
    .options = options,
    .exit_status = "0 delivered, 1 no trainer is running in RUN_DIR, 2 bad usage (no such\n"
                   "RUN_DIR; a key set does not take, with a did-you-mean)",
    .operand_list = &args.operands,
};

int main(int argc, char **argv)
{
    int rc = cli_parse(&tool, argc, argv);
    if (rc >= 0) return rc;
    if (args.operands.n < 2) return cli_error(&tool, "missing COMMAND");
    const char *dir = args.operands.v[0], *cmd = args.operands.v[1];
    int is_set = !strcmp(cmd, "set");
    if (!is_set && strcmp(cmd, "snapshot") && strcmp(cmd, "evaluate") && strcmp(cmd, "stop"))
        return cli_error(&tool, "unknown command '%s' (snapshot, evaluate, stop, set)", cmd);
    if (is_set != (args.operands.n == 3))
        return cli_error(&tool, is_set ? "set needs KEY=VALUE" : "%s takes no argument", cmd);
    if (is_set && !strchr(args.operands.v[2], '='))
        return cli_error(&tool, "set needs KEY=VALUE, found '%s'", args.operands.v[2]);
    if (is_set) {
        const char *kv = args.operands.v[2];
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)(strchr(kv, '=') - kv), kv);
        const char *const *keys = tfc_control_keys();
        int known = 0;
        for (int i = 0; keys[i]; i++) known |= !strcmp(keys[i], key);
        if (!known) {
            char all[256];
            const char *near = tfc_did_you_mean(key, keys);
            tfc_join_names(all, sizeof all, keys);
            return cli_error(&tool, "set: unknown key '%s'%s%s%s (a running trainer takes %s)",
                             key, near ? "; did you mean '" : "", near ? near : "",
                             near ? "'?" : "", all);
        }
    }
    char path[4200], line[600];
    snprintf(path, sizeof path, "%s/control", dir);
    int n = snprintf(line, sizeof line, "%s%s%s\n", cmd, is_set ? " " : "",
                     is_set ? args.operands.v[2] : "");
    if (n <= 0 || (size_t)n >= sizeof line) return cli_error(&tool, "the command is too long");
    int fd = open(path, O_WRONLY | O_NONBLOCK);
    struct stat st;
    if (fd < 0 && stat(dir, &st) != 0) /* a run directory that is not there: SPEC §3 */
        return cli_error(&tool, "%s: %s", dir, strerror(errno));
    if (fd < 0) {
        fprintf(stderr, "tfc-ctl: no trainer is running in %s (%s: %s)\n", dir, path,
                errno == ENXIO ? "nobody reads it" : strerror(errno));
        return 1;
    }
    /* One write of at most PIPE_BUF bytes is atomic: the line arrives whole. */
    ssize_t w = write(fd, line, (size_t)n);
    close(fd);
    if (w != n) {
        fprintf(stderr, "tfc-ctl: writing to %s: %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}
