/* TensorBoard event files without TensorFlow: TFRecord framing (length, masked CRC-32C of
 * the length, data, masked CRC-32C of the data) around hand-encoded protocol buffers
 * (tensorflow/core/util/event.proto and summary.proto):
 *   Event      { double wall_time = 1; int64 step = 2; string file_version = 3;
 *                Summary summary = 5; SessionLog session_log = 6; }
 *   Summary    { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
 *   SessionLog { SessionStatus status = 1; }   (START = 1) */
#include "solver/internal.h"

#include "core/protobuf.h"
#include "core/tfrecord.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

/* ---- the record ------------------------------------------------------------------------- */

/* TFRecord framing of `len` bytes of data already at rec + 12. Returns the record length. */
static size_t frame(uint8_t *rec, size_t len)
{
    tfc_tfrecord_header(rec, len);
    tfc_tfrecord_footer(rec + TFC_TFRECORD_HEADER + len, rec + TFC_TFRECORD_HEADER, len);
    return len + TFC_TFRECORD_HEADER + TFC_TFRECORD_FOOTER;
}

/* An Event's wall_time and step. */
static void event_head(tfc_pb *ev, double wall_time, int64_t step)
{
    tfc_pb_double(ev, 1, wall_time);
    tfc_pb_int(ev, 2, step);
}

/* The Event `ev` framed into rec (room for its length + 16 bytes), and freed; returns the
 * record length. */
static size_t framed(uint8_t *rec, tfc_pb *ev)
{
    TFC_ASSERT(!ev->failed);
    memcpy(rec + 12, ev->data, ev->len);
    size_t n = frame(rec, ev->len);
    tfc_pb_free(ev);
    return n;
}

size_t tfc_events_encode_scalar(uint8_t *buf, double wall_time, int64_t step, const char *tag,
                                float value)
{
    size_t tlen = strlen(tag);
    if (tlen > 255) tlen = 255;
    tfc_pb val = {0}, sum = {0}, ev = {0};
    tfc_pb_bytes(&val, 1, tag, tlen);
    tfc_pb_float(&val, 2, value);
    tfc_pb_message(&sum, 1, &val);
    event_head(&ev, wall_time, step);
    tfc_pb_message(&ev, 5, &sum);
    tfc_pb_free(&val);
    tfc_pb_free(&sum);
    /* at most 9 + 11 + 3 + (3 + 3 + 255 + 5) bytes: within the caller's 64 + tag length */
    return framed(buf, &ev);
}

/* ---- the writer ---------------------------------------------------------------------------- */

struct tfc_events {
    FILE *f;
    char path[4200];
};

static double wall_now(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + 1e-6 * (double)tv.tv_usec;
}

static tfc_status write_record(tfc_events *ev, const uint8_t *rec, size_t n, tfc_error *err)
{
    if (fwrite(rec, 1, n, ev->f) != n || fflush(ev->f) != 0)
        return tfc_error_set(err, TFC_ERR_IO, "cannot write %s: %s", ev->path, strerror(errno));
    return TFC_OK;
}

tfc_events *tfc_events_open(const char *dir, int64_t resume_step, tfc_error *err)
{
    tfc_events *ev = calloc(1, sizeof *ev);
    if (!ev) {
        tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        return NULL;
    }
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "localhost");
    double now = wall_now();
    snprintf(ev->path, sizeof ev->path, "%s/events.out.tfevents.%010lld.%s.%ld", dir,
             (long long)now, host, (long)getpid());
    ev->f = fopen(ev->path, "wb");
    if (!ev->f) {
        tfc_error_set(err, TFC_ERR_IO, "cannot create %s: %s", ev->path, strerror(errno));
        free(ev);
        return NULL;
    }
    uint8_t rec[128];
    tfc_pb head = {0};
    event_head(&head, now, 0);
    tfc_pb_string(&head, 3, "brain.Event:2");
    tfc_status s = write_record(ev, rec, framed(rec, &head), err);
    if (!s && resume_step >= 0) {
        uint8_t log[2] = {0x08, 0x01}; /* SessionLog { status: START } */
        event_head(&head, now, resume_step);
        tfc_pb_bytes(&head, 6, log, 2);
        s = write_record(ev, rec, framed(rec, &head), err);
    }
    if (s) {
        tfc_events_close(ev);
        return NULL;
    }
    return ev;
}

tfc_status tfc_events_scalar(tfc_events *ev, int64_t step, const char *tag, double value,
                             tfc_error *err)
{
    uint8_t rec[400];
    size_t n = tfc_events_encode_scalar(rec, wall_now(), step, tag, (float)value);
    return write_record(ev, rec, n, err);
}

const char *tfc_events_path(const tfc_events *ev) { return ev->path; }

void tfc_events_close(tfc_events *ev)
{
    if (!ev) return;
    if (ev->f) fclose(ev->f);
    free(ev);
}
