/* TensorBoard event files without TensorFlow: TFRecord framing (length, masked CRC-32C of
 * the length, data, masked CRC-32C of the data) around hand-encoded protocol buffers
 * (tensorflow/core/util/event.proto, summary.proto, graph.proto and the hparams plugin's
 * plugin_data.proto):
 *   Event      { double wall_time = 1; int64 step = 2; string file_version = 3;
 *                bytes graph_def = 4; Summary summary = 5; SessionLog session_log = 6; }
 *   Summary    { repeated Value value = 1; }
 *   Value      { string tag = 1; float simple_value = 2; Image image = 4;
 *                HistogramProto histo = 5; TensorProto tensor = 8; SummaryMetadata metadata = 9; }
 *   Image      { int32 height = 1, width = 2, colorspace = 3; bytes encoded_image_string = 4; }
 *   SummaryMetadata { PluginData plugin_data = 1 { string plugin_name = 1; bytes content = 2; } }
 *   HistogramProto  { double min = 1, max = 2, num = 3, sum = 4, sum_squares = 5;
 *                     repeated double bucket_limit = 6, bucket = 7; }
 *   TensorProto     { DataType dtype = 1; TensorShapeProto tensor_shape = 2;
 *                     repeated bytes string_val = 8; }
 *   GraphDef   { repeated NodeDef node = 1; }
 *   NodeDef    { string name = 1, op = 2; repeated string input = 3;
 *                map<string, AttrValue> attr = 5; }
 *   AttrValue  { ListValue list = 1 { repeated TensorShapeProto shape = 7; }; int64 i = 3; }
 *   TensorShapeProto { repeated Dim dim = 2 { int64 size = 1; } }
 *   HParamsPluginData { int32 version = 1; SessionStartInfo session_start_info = 3;
 *                       SessionEndInfo session_end_info = 4; }
 *   SessionStartInfo  { map<string, google.protobuf.Value> hparams = 1; double start_time_secs = 5; }
 *   SessionEndInfo    { Status status = 1; double end_time_secs = 2; }
 *   google.protobuf.Value { double number_value = 2; string string_value = 3; bool bool_value = 4; }
 *   SessionLog { SessionStatus status = 1; }   (START = 1) */
#include "solver/internal.h"

#include "core/protobuf.h"
#include "core/tfrecord.h"

#include <errno.h>
#include <math.h>
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

/* ---- summaries beyond scalars --------------------------------------------------------------- */

/* Frames the Event `e` (freed) and appends it. */
static tfc_status write_event(tfc_events *ev, tfc_pb *e, tfc_error *err)
{
    if (e->failed) {
        tfc_pb_free(e);
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    uint8_t *rec = malloc(e->len + TFC_TFRECORD_HEADER + TFC_TFRECORD_FOOTER);
    if (!rec) {
        tfc_pb_free(e);
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    tfc_status s = write_record(ev, rec, framed(rec, e), err);
    free(rec);
    return s;
}

/* An Event at `step` holding one Summary.Value (freed). */
static tfc_status write_value(tfc_events *ev, int64_t step, tfc_pb *val, tfc_error *err)
{
    tfc_pb sum = {0}, e = {0};
    tfc_pb_message(&sum, 1, val);
    event_head(&e, wall_now(), step);
    tfc_pb_message(&e, 5, &sum);
    tfc_pb_free(val);
    tfc_pb_free(&sum);
    return write_event(ev, &e, err);
}

/* SummaryMetadata naming a plugin, with its content. */
static void plugin_metadata(tfc_pb *meta, const char *plugin, const tfc_pb *content)
{
    tfc_pb pd = {0};
    tfc_pb_string(&pd, 1, plugin);
    if (content) tfc_pb_message(&pd, 2, content);
    tfc_pb_message(meta, 1, &pd);
    tfc_pb_free(&pd);
}

tfc_status tfc_events_text(tfc_events *ev, int64_t step, const char *tag, const char *text,
                           tfc_error *err)
{
    tfc_pb val = {0}, meta = {0}, tensor = {0}, shape = {0};
    tfc_pb_string(&val, 1, tag);
    plugin_metadata(&meta, "text", NULL);
    tfc_pb_int(&tensor, 1, 7); /* DT_STRING */
    tfc_pb_message(&tensor, 2, &shape); /* a scalar: no dims */
    tfc_pb_string(&tensor, 8, text);
    tfc_pb_message(&val, 8, &tensor);
    tfc_pb_message(&val, 9, &meta);
    tfc_pb_free(&meta);
    tfc_pb_free(&tensor);
    return write_value(ev, step, &val, err);
}

tfc_status tfc_events_histogram(tfc_events *ev, int64_t step, const char *tag, const float *v,
                                int64_t n, tfc_error *err)
{
    enum { BUCKETS = 30 };
    double lo = 0, hi = 0, sum = 0, sumsq = 0, count[BUCKETS] = {0};
    int64_t finite = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = v[i];
        if (!isfinite(x)) continue;
        if (!finite++ || x < lo) lo = x;
        if (finite == 1 || x > hi) hi = x;
        sum += x;
        sumsq += x * x;
    }
    double width = (hi - lo) / BUCKETS;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(v[i])) continue;
        int b = width > 0 ? (int)((v[i] - lo) / width) : BUCKETS - 1;
        count[b < 0 ? 0 : b >= BUCKETS ? BUCKETS - 1 : b] += 1;
    }
    tfc_pb h = {0}, val = {0};
    tfc_pb_double(&h, 1, lo);
    tfc_pb_double(&h, 2, hi);
    tfc_pb_double(&h, 3, (double)finite);
    tfc_pb_double(&h, 4, sum);
    tfc_pb_double(&h, 5, sumsq);
    /* equal-width buckets over [min, max], each named by its right edge (all in the last
     * one when every value is equal) */
    for (int b = 0; b < BUCKETS; b++) tfc_pb_double(&h, 6, b == BUCKETS - 1 ? hi : lo + width * (b + 1));
    for (int b = 0; b < BUCKETS; b++) tfc_pb_double(&h, 7, count[b]);
    tfc_pb_string(&val, 1, tag);
    tfc_pb_message(&val, 5, &h);
    tfc_pb_free(&h);
    return write_value(ev, step, &val, err);
}

tfc_status tfc_events_image(tfc_events *ev, int64_t step, const char *tag, const void *png,
                            size_t len, int height, int width, int channels, tfc_error *err)
{
    tfc_pb img = {0}, val = {0};
    tfc_pb_int(&img, 1, height);
    tfc_pb_int(&img, 2, width);
    tfc_pb_int(&img, 3, channels); /* 1 grey, 2 grey + alpha, 3 RGB, 4 RGBA */
    tfc_pb_bytes(&img, 4, png, len);
    tfc_pb_string(&val, 1, tag);
    tfc_pb_message(&val, 4, &img);
    tfc_pb_free(&img);
    return write_value(ev, step, &val, err);
}

/* TensorShapeProto of a per-example shape with the batch dimension first (-1). */
static void shape_proto(tfc_pb *out, const tfc_shape *s)
{
    tfc_pb dim = {0};
    tfc_pb_int(&dim, 1, -1);
    tfc_pb_message(out, 2, &dim);
    for (int d = 0; d < s->ndim; d++) {
        tfc_pb_free(&dim);
        tfc_pb_int(&dim, 1, s->dim[d]);
        tfc_pb_message(out, 2, &dim);
    }
    tfc_pb_free(&dim);
}

/* A NodeDef entry of attr: key → AttrValue (its encoding in `value`). */
static void node_attr(tfc_pb *node, const char *key, const tfc_pb *value)
{
    tfc_pb entry = {0};
    tfc_pb_string(&entry, 1, key);
    tfc_pb_message(&entry, 2, value);
    tfc_pb_message(node, 5, &entry);
    tfc_pb_free(&entry);
}

/* A node: name, op, inputs, its output shape as "_output_shapes" (what TensorBoard labels
 * edges with) and, when it has any, its parameter count. */
static void graph_node(tfc_pb *graph, const char *name, const char *op, const char *const *inputs,
                       int ninputs, const tfc_shape *out, int64_t params)
{
    tfc_pb node = {0}, shape = {0}, list = {0}, attr = {0};
    tfc_pb_string(&node, 1, name);
    tfc_pb_string(&node, 2, op);
    for (int i = 0; i < ninputs; i++) tfc_pb_string(&node, 3, inputs[i]);
    shape_proto(&shape, out);
    tfc_pb_message(&list, 7, &shape);
    tfc_pb_message(&attr, 1, &list);
    node_attr(&node, "_output_shapes", &attr);
    if (params > 0) {
        tfc_pb_free(&attr);
        tfc_pb_int(&attr, 3, params);
        node_attr(&node, "parameters", &attr);
    }
    tfc_pb_message(graph, 1, &node);
    tfc_pb_free(&node);
    tfc_pb_free(&shape);
    tfc_pb_free(&list);
    tfc_pb_free(&attr);
}

tfc_status tfc_events_graph(tfc_events *ev, tfc_model *m, tfc_error *err)
{
    tfc_pb graph = {0}, e = {0};
    for (int k = 0; k < tfc_model_ninputs(m); k++)
        graph_node(&graph, k ? tfc_model_input_name(m, k) : "input", "Input", NULL, 0,
                   tfc_model_input_shape_at(m, k), 0);
    for (int i = 0; i < tfc_model_nlayers(m); i++) {
        const tfc_layer *l = tfc_model_layer(m, i);
        const char *in[TFC_LAYER_MAX_INPUTS];
        for (int k = 0; k < l->ninputs; k++)
            in[k] = l->inputs[k] == -1 ? "input"
                    : l->inputs[k] < 0 ? tfc_model_input_name(m, -1 - l->inputs[k])
                                       : tfc_model_layer(m, l->inputs[k])->name;
        int64_t params = tfc_layer_weight_count(l);
        graph_node(&graph, l->name, l->ops->type, in, l->ninputs, &l->out_shape, params);
    }
    event_head(&e, wall_now(), 0);
    tfc_pb_message(&e, 4, &graph); /* graph_def: the serialized GraphDef */
    tfc_pb_free(&graph);
    return write_event(ev, &e, err);
}

/* google.protobuf.Value of a --set value: a number, a bool, or the text. */
static void hparam_value(tfc_pb *out, const char *text)
{
    char *end;
    double d = strtod(text, &end);
    if (*text && !*end && isfinite(d)) tfc_pb_double(out, 2, d);
    else if (!strcmp(text, "true") || !strcmp(text, "false")) tfc_pb_int(out, 4, !strcmp(text, "true"));
    else tfc_pb_string(out, 3, text);
}

/* The hparams plugin's summary `tag` holding HParamsPluginData field `which` (the message
 * in `info`), with the plugin's null tensor (float32 of shape [0]). */
static tfc_status write_hparams(tfc_events *ev, const char *tag, int which, const tfc_pb *info,
                                tfc_error *err)
{
    tfc_pb data = {0}, meta = {0}, tensor = {0}, shape = {0}, dim = {0}, val = {0};
    tfc_pb_int(&data, 1, 0); /* PLUGIN_DATA_VERSION */
    tfc_pb_message(&data, which, info);
    plugin_metadata(&meta, "hparams", &data);
    tfc_pb_message(&shape, 2, &dim); /* one dimension of size 0 */
    tfc_pb_int(&tensor, 1, 1);       /* DT_FLOAT */
    tfc_pb_message(&tensor, 2, &shape);
    tfc_pb_string(&val, 1, tag);
    tfc_pb_message(&val, 8, &tensor);
    tfc_pb_message(&val, 9, &meta);
    tfc_pb_free(&data);
    tfc_pb_free(&meta);
    tfc_pb_free(&tensor);
    tfc_pb_free(&shape);
    return write_value(ev, 0, &val, err);
}

tfc_status tfc_events_hparams_start(tfc_events *ev, const char *const *keys,
                                    const char *const *values, int n, tfc_error *err)
{
    tfc_pb info = {0};
    for (int i = 0; i < n; i++) {
        tfc_pb entry = {0}, v = {0};
        tfc_pb_string(&entry, 1, keys[i]);
        hparam_value(&v, values[i]);
        tfc_pb_message(&entry, 2, &v);
        tfc_pb_message(&info, 1, &entry);
        tfc_pb_free(&entry);
        tfc_pb_free(&v);
    }
    tfc_pb_double(&info, 5, wall_now());
    tfc_status s = write_hparams(ev, "_hparams_/session_start_info", 3, &info, err);
    tfc_pb_free(&info);
    return s;
}

tfc_status tfc_events_hparams_end(tfc_events *ev, int status, tfc_error *err)
{
    tfc_pb info = {0};
    tfc_pb_int(&info, 1, status);
    tfc_pb_double(&info, 2, wall_now());
    tfc_status s = write_hparams(ev, "_hparams_/session_end_info", 4, &info, err);
    tfc_pb_free(&info);
    return s;
}

const char *tfc_events_path(const tfc_events *ev) { return ev->path; }

void tfc_events_close(tfc_events *ev)
{
    if (!ev) return;
    if (ev->f) fclose(ev->f);
    free(ev);
}
