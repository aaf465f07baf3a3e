/* TensorBoard event files without TensorFlow: TFRecord framing (length, masked CRC-32C of
 * the length, data, masked CRC-32C of the data) around hand-encoded protocol buffers
 * (tensorflow/core/util/event.proto and summary.proto):
 *   Event      { double wall_time = 1; int64 step = 2; string file_version = 3;
 *                Summary summary = 5; SessionLog session_log = 6; }
 *   Summary    { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
 *   SessionLog { SessionStatus status = 1; }   (START = 1) */
#include "solver/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

/* ---- protobuf encoding ------------------------------------------------------------------ */

static size_t put_varint(uint8_t *b, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        b[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (uint8_t)v;
    return n;
}

static size_t put_le(uint8_t *b, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) b[i] = (uint8_t)(v >> (8 * i));
    return (size_t)bytes;
}

static size_t put_double(uint8_t *b, double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return put_le(b, u, 8);
}

/* Wire types: 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32. */
static size_t put_key(uint8_t *b, int field, int wire)
{
    return put_varint(b, (uint64_t)(field << 3 | wire));
}

static size_t put_bytes(uint8_t *b, int field, const void *data, size_t len)
{
    size_t n = put_key(b, field, 2);
    n += put_varint(b + n, len);
    memcpy(b + n, data, len);
    return n + len;
}

/* Event header: wall_time and step. */
static size_t put_event_head(uint8_t *b, double wall_time, int64_t step)
{
    size_t n = put_key(b, 1, 1);
    n += put_double(b + n, wall_time);
    n += put_key(b + n, 2, 0);
    n += put_varint(b + n, (uint64_t)step);
    return n;
}

/* TFRecord framing of `len` bytes of data already at rec + 12. Returns the record length. */
static size_t frame(uint8_t *rec, size_t len)
{
    uint8_t lenb[8];
    put_le(lenb, len, 8);
    memcpy(rec, lenb, 8);
    put_le(rec + 8, tfc_crc32c_mask(tfc_crc32c(0, lenb, 8)), 4);
    put_le(rec + 12 + len, tfc_crc32c_mask(tfc_crc32c(0, rec + 12, len)), 4);
    return len + 16;
}

size_t tfc_events_encode_scalar(uint8_t *buf, double wall_time, int64_t step, const char *tag,
                                float value)
{
    size_t tlen = strlen(tag);
    uint8_t val[32 + 256], sum[40 + 256];
    if (tlen > 255) tlen = 255;
    size_t nv = put_bytes(val, 1, tag, tlen);
    uint32_t bits;
    memcpy(&bits, &value, 4);
    nv += put_key(val + nv, 2, 5);
    nv += put_le(val + nv, bits, 4);
    size_t ns = put_bytes(sum, 1, val, nv);
    uint8_t *d = buf + 12;
    size_t n = put_event_head(d, wall_time, step);
    n += put_bytes(d + n, 5, sum, ns);
    return frame(buf, n);
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
    size_t n = put_event_head(rec + 12, now, 0);
    n += put_bytes(rec + 12 + n, 3, "brain.Event:2", 13);
    tfc_status s = write_record(ev, rec, frame(rec, n), err);
    if (!s && resume_step >= 0) {
        uint8_t log[4] = {0x08, 0x01}; /* SessionLog { status: START } */
        n = put_event_head(rec + 12, now, resume_step);
        n += put_bytes(rec + 12 + n, 6, log, 2);
        s = write_record(ev, rec, frame(rec, n), err);
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
