/* The control FIFO of a running trainer, RUN_DIR/control: tfc-ctl writes one command per
 * line (snapshot, evaluate, stop, set KEY=VALUE); the loop polls it without blocking after
 * each iteration. The FIFO exists only while the trainer runs. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "solver/internal.h"

tfc_status tfc_control_open(tfc_control *c, const char *run_dir, tfc_error *err)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    snprintf(c->path, sizeof c->path, "%s/control", run_dir);
    unlink(c->path); /* a previous run's, left by a kill -9 */
    if (mkfifo(c->path, 0600) != 0)
        return tfc_error_set(err, TFC_ERR_IO, "cannot create the control FIFO %s: %s", c->path,
                             strerror(errno));
    c->fd = open(c->path, O_RDONLY | O_NONBLOCK);
    if (c->fd < 0) {
        tfc_status st = tfc_error_set(err, TFC_ERR_IO, "cannot open %s: %s", c->path,
                                      strerror(errno));
        unlink(c->path);
        return st;
    }
    return TFC_OK;
}

int tfc_control_poll(tfc_control *c, char *line, size_t size)
{
    if (c->fd < 0) return 0;
    for (;;) {
        char *nl = memchr(c->buf, '\n', c->len);
        if (nl) {
            size_t n = (size_t)(nl - c->buf);
            snprintf(line, size, "%.*s", (int)n, c->buf);
            memmove(c->buf, nl + 1, c->len - n - 1);
            c->len -= n + 1;
            return 1;
        }
        if (c->len == sizeof c->buf) c->len = 0; /* a line too long for any command */
        ssize_t got = read(c->fd, c->buf + c->len, sizeof c->buf - c->len);
        if (got <= 0) return 0; /* no writer (0) or nothing written yet (EAGAIN) */
        c->len += (size_t)got;
    }
}

void tfc_control_close(tfc_control *c)
{
    if (c->fd >= 0) {
        close(c->fd);
        unlink(c->path);
    }
    c->fd = -1;
}

/* ---- tfc-ctl set: the keys a running solver takes ------------------------------------------- */

typedef struct settable {
    const char *name;
    int is_int;
    size_t offset;   /* in tfc_solver_config */
    double min;
} settable;

static const settable settables[] = {
    {"max_iter", 1, offsetof(tfc_solver_config, max_iter), 1},
    {"display", 1, offsetof(tfc_solver_config, display), 0},
    {"test_interval", 1, offsetof(tfc_solver_config, test_interval), 0},
    {"snapshot.interval", 1, offsetof(tfc_solver_config, snapshot_interval), 0},
    {"clip_gradients", 0, offsetof(tfc_solver_config, clip_gradients), 0},
};

const char *const *tfc_control_keys(void)
{
    static const char *const keys[] = {"optimizer.learning_rate", "max_iter", "display",
                                       "test_interval", "snapshot.interval", "clip_gradients",
                                       NULL};
    return keys;
}

const char *tfc_control_settable_keys(void)
{
    static char joined[256];
    if (!joined[0]) tfc_join_names(joined, sizeof joined, tfc_control_keys());
    return joined;
}

int tfc_control_apply(tfc_solver_config *c, const char *assignment, char *why, size_t size)
{
    const char *eq = strchr(assignment, '=');
    size_t klen = eq ? (size_t)(eq - assignment) : strlen(assignment);
    const settable *k = NULL;
    for (size_t i = 0; i < sizeof settables / sizeof *settables; i++)
        if (strlen(settables[i].name) == klen && !strncmp(settables[i].name, assignment, klen))
            k = &settables[i];
    if (!eq || !k) {
        snprintf(why, size, "a running trainer takes only %s", tfc_control_settable_keys());
        return 0;
    }
    char *end = NULL;
    double v = strtod(eq + 1, &end);
    if (end == eq + 1 || *end || !(v >= k->min) || v > 2147483647.0 ||
        (k->is_int && v != (double)(int)v)) {
        snprintf(why, size, "expected %s >= %g, found '%s'", k->is_int ? "an integer" : "a number",
                 k->min, eq + 1);
        return 0;
    }
    int evaluations = c->early_stopping.enabled || c->lr_policy.type == TFC_LR_PLATEAU;
    if (!strcmp(k->name, "test_interval") && v > 0 && !c->test) {
        snprintf(why, size, "this run has no data.test to test on");
        return 0;
    }
    if (!strcmp(k->name, "test_interval") && v == 0 && evaluations) {
        snprintf(why, size, "early_stopping and the plateau policy step at test evaluations");
        return 0;
    }
    char *field = (char *)c + k->offset;
    if (k->is_int) *(int *)field = (int)v;
    else *(double *)field = v;
    return 1;
}
