/* The control FIFO of a running trainer, RUN_DIR/control: tfc-ctl writes one command per
 * line (snapshot, evaluate, stop, set KEY=VALUE); the loop polls it without blocking after
 * each iteration. The FIFO exists only while the trainer runs. */
#include <errno.h>
#include <fcntl.h>
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
