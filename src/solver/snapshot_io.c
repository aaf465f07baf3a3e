/* A snapshot's two files: a weights file and a state file, both safetensors written
 * atomically, weights first, so a complete state always names a complete weights file. The
 * state carries the optimizer slots per parameter, the solver's counters and the pipeline
 * position, and in its metadata the identity checks of a resume and a CRC-32C checksum
 * (safetensors has none) over every tensor and every other metadata entry. */
#include "solver/internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/safetensors.h"

#ifndef TFC_VERSION
#define TFC_VERSION "dev"
#endif

#define MAX_META 24

tfc_status tfc_file_crc32c(const char *path, uint32_t *crc, tfc_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return tfc_error_set(err, tfc_open_status(errno), "cannot open %s: %s", path,
                             strerror(errno));
    unsigned char buf[1 << 16];
    uint32_t c = 0;
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) c = tfc_crc32c(c, buf, n);
    int bad = ferror(f);
    fclose(f);
    if (bad) return tfc_error_set(err, TFC_ERR_IO, "cannot read %s", path);
    *crc = c;
    return TFC_OK;
}

/* ---- the checksum ---------------------------------------------------------------------------- */

typedef struct meta_kv {
    const char *key, *value;
} meta_kv;

static int by_key(const void *a, const void *b)
{
    return strcmp(((const meta_kv *)a)->key, ((const meta_kv *)b)->key);
}

/* CRC-32C over each tensor (name, NUL, dims as 8-byte little-endian, data) in data order,
 * then every metadata entry but "checksum" sorted by key (key, NUL, value, NUL). */
static uint32_t tensor_crc(uint32_t c, const char *name, const tfc_shape *shape, const void *data,
                           size_t nbytes)
{
    c = tfc_crc32c(c, name, strlen(name) + 1);
    for (int d = 0; d < shape->ndim; d++) {
        uint8_t le[8];
        for (int b = 0; b < 8; b++) le[b] = (uint8_t)((uint64_t)shape->dim[d] >> (8 * b));
        c = tfc_crc32c(c, le, 8);
    }
    return tfc_crc32c(c, data, nbytes);
}

static uint32_t meta_crc(uint32_t c, meta_kv *kv, int n)
{
    qsort(kv, (size_t)n, sizeof *kv, by_key);
    for (int i = 0; i < n; i++) {
        if (!strcmp(kv[i].key, "checksum")) continue;
        c = tfc_crc32c(c, kv[i].key, strlen(kv[i].key) + 1);
        c = tfc_crc32c(c, kv[i].value, strlen(kv[i].value) + 1);
    }
    return c;
}

static int by_offset(const void *a, const void *b)
{
    const tfc_st_tensor *x = *(const tfc_st_tensor *const *)a, *y = *(const tfc_st_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static tfc_status file_checksum(const tfc_st_file *f, uint32_t *out, tfc_error *err)
{
    int n = tfc_st_count(f), nm = tfc_st_meta_count(f);
    const tfc_st_tensor **order = malloc(sizeof *order * (size_t)(n + 1));
    meta_kv *kv = malloc(sizeof *kv * (size_t)(nm + 1));
    if (!order || !kv) {
        free(order);
        free(kv);
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++) order[i] = tfc_st_tensor_at(f, i);
    qsort(order, (size_t)n, sizeof *order, by_offset);
    uint32_t c = 0;
    for (int i = 0; i < n; i++)
        c = tensor_crc(c, order[i]->name, &order[i]->shape, order[i]->data, order[i]->nbytes);
    for (int i = 0; i < nm; i++) tfc_st_meta_at(f, i, &kv[i].key, &kv[i].value);
    *out = meta_crc(c, kv, nm);
    free(order);
    free(kv);
    return TFC_OK;
}

/* ---- writing ---------------------------------------------------------------------------------- */

typedef struct state_writer {
    tfc_st_writer *w;
    uint32_t crc;
    meta_kv meta[MAX_META];
    char values[MAX_META][256];
    int nmeta;
    tfc_status s;
    tfc_error *err;
} state_writer;

static void add(state_writer *sw, const char *name, tfc_dtype dt, int ndim, const int64_t *dims,
                const void *data)
{
    if (sw->s) return;
    tfc_shape shape = tfc_shape_make(ndim, dims);
    sw->s = tfc_st_writer_add(sw->w, name, dt, &shape, data, sw->err);
    if (!sw->s)
        sw->crc = tensor_crc(sw->crc, name, &shape, data,
                             (size_t)tfc_shape_numel(&shape) * tfc_dtype_size(dt));
}

static void add_shape(state_writer *sw, const char *name, const tfc_shape *shape, const float *data)
{
    add(sw, name, TFC_F32, shape->ndim, shape->dim, data);
}

static void meta(state_writer *sw, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void meta(state_writer *sw, const char *key, const char *fmt, ...)
{
    if (sw->s || sw->nmeta == MAX_META) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sw->values[sw->nmeta], sizeof sw->values[0], fmt, ap);
    va_end(ap);
    sw->meta[sw->nmeta].key = key;
    sw->meta[sw->nmeta].value = sw->values[sw->nmeta];
    sw->s = tfc_st_writer_set_meta(sw->w, key, sw->values[sw->nmeta], sw->err);
    sw->nmeta++;
}

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* The slot names of `o` that hold state, comma-separated, as the metadata records them. */
static void slot_list(const tfc_optimizer *o, char *buf, size_t size)
{
    buf[0] = 0;
    for (int k = 0; k < o->nslots; k++)
        if (o->slot[k])
            snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", buf[0] ? "," : "",
                     o->slot_name[k]);
}

tfc_status tfc_snapshot_write(tfc_model *m, const tfc_optimizer *o, const tfc_snapshot_id *id,
                              const tfc_snapshot_extra *x, const char *weights_path,
                              const char *state_path, tfc_error *err)
{
    tfc_status s = tfc_model_save_weights(m, weights_path, err);
    if (s) return s;
    uint32_t wcrc = 0;
    s = tfc_file_crc32c(weights_path, &wcrc, err);
    if (s) return s;

    state_writer sw = {.w = tfc_st_writer_create(), .err = err};
    int64_t n = o->n;
    float *host = malloc((size_t)(n > 0 ? n : 1) * sizeof(float) * (size_t)(o->nslots ? o->nslots : 1));
    if (!sw.w || !host) {
        sw.s = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory writing %s", state_path);
    } else {
        for (int k = 0; k < o->nslots; k++)
            if (o->slot[k])
                o->be->ops->download(o->be, host + (size_t)k * (size_t)n, o->slot[k],
                                     (size_t)n * sizeof(float));
    }
    /* Optimizer slots per trainable parameter: the grads arena order (layer order). */
    char name[256];
    for (int k = 0; k < o->nslots && !sw.s; k++) {
        if (!o->slot[k]) continue;
        int64_t off = 0;
        for (int i = 0; i < tfc_model_nlayers(m); i++) {
            tfc_layer *l = tfc_model_layer(m, i);
            for (int p = 0; p < l->nparams; p++) {
                if (!l->params[p].trainable || l->params[p].shared) continue;
                snprintf(name, sizeof name, "%s/%s/%s", o->slot_name[k], l->name,
                         l->params[p].name);
                add_shape(&sw, name, &l->params[p].shape, host + (size_t)k * (size_t)n + off);
                off += l->params[p].numel;
            }
        }
    }
    int64_t one = 1, w = x->window, nd = 2 + TFC_MAX_METRICS, three = 3, two = 2;
    double best[3] = {x->have_best, x->best_value, (double)x->best_iteration};
    int64_t counters[2] = {x->iteration, x->losses_seen};
    add(&sw, "solver/counters", TFC_I64, 1, &two, counters);
    add(&sw, "solver/elapsed_seconds", TFC_F64, 1, &one, &x->elapsed);
    add(&sw, "solver/best", TFC_F64, 1, &three, best);
    add(&sw, "solver/losses", TFC_F64, 1, &w, x->losses);
    add(&sw, "solver/display", TFC_F64, 1, &nd, x->display);
    int64_t ncb = TFC_CALLBACK_STATE;
    add(&sw, "solver/callbacks", TFC_F64, 1, &ncb, x->callbacks);
    add(&sw, "solver/last_test", TFC_I64, 1, &one, &x->last_test);
    int64_t ntrain = 1 + TFC_MAX_METRICS;
    if (x->have_train) add(&sw, "solver/train_result", TFC_F64, 1, &ntrain, x->train);
    int64_t ncounts = x->ncounts;
    if (ncounts) add(&sw, "solver/display_counts", TFC_F64, 1, &ncounts, x->counts);
    if (x->ema) add(&sw, "ema/params", TFC_F32, 1, &x->ema_n, x->ema);
    if (x->have_loss_scale) add(&sw, "solver/loss_scale", TFC_F64, 1, &three, x->loss_scale);
    int64_t plen = (int64_t)x->pipeline_len;
    add(&sw, "pipeline/train", TFC_U8, 1, &plen, x->pipeline ? x->pipeline : "");
    int64_t clen = x->control ? (int64_t)strlen(x->control) : 0;
    if (clen) add(&sw, "solver/control", TFC_U8, 1, &clen, x->control);
    char *config = NULL;
    size_t config_len = 0;
    FILE *cf = id->config ? open_memstream(&config, &config_len) : NULL;
    if (cf) {
        tfc_node_emit(cf, id->config);
        fclose(cf);
        int64_t clen_config = (int64_t)config_len;
        add(&sw, "solver/config", TFC_U8, 1, &clen_config, config);
    }
    int nr = x->nrank_pipelines > 1 ? x->nrank_pipelines : 1;
    char(*rank_names)[40] = malloc((size_t)nr * sizeof *rank_names);
    int64_t *rank_lens = malloc((size_t)nr * sizeof *rank_lens);
    if ((!rank_names || !rank_lens) && !sw.s) sw.s = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    for (int r = 1; !sw.s && r < nr; r++) {
        snprintf(rank_names[r], sizeof rank_names[r], "pipeline/train/rank%d", r);
        rank_lens[r] = (int64_t)x->rank_pipeline_len[r];
        add(&sw, rank_names[r], TFC_U8, 1, &rank_lens[r], x->rank_pipeline[r]);
    }

    char slots[128];
    slot_list(o, slots, sizeof slots);
    meta(&sw, "format", TFC_STATE_FORMAT);
    meta(&sw, "format_version", TFC_STATE_VERSION);
    meta(&sw, "tfc_version", TFC_VERSION);
    meta(&sw, "model", "%s", id->model_name);
    meta(&sw, "optimizer", "%s", id->optimizer);
    meta(&sw, "slots", "%s", slots);
    meta(&sw, "config_hash", "%016llx", (unsigned long long)id->config_hash);
    meta(&sw, "model_hash", "%016llx", (unsigned long long)id->model_hash);
    meta(&sw, "weights", "%s", base_name(weights_path));
    meta(&sw, "weights_crc32c", "%08x", wcrc);
    meta(&sw, "iteration", "%lld", (long long)x->iteration);
    meta(&sw, "ranks", "%d", id->ranks);
    if (!sw.s) {
        uint32_t crc = meta_crc(sw.crc, sw.meta, sw.nmeta);
        meta(&sw, "checksum", "%08x", crc);
    }
    if (!sw.s) sw.s = tfc_st_writer_save(sw.w, state_path, err);
    tfc_st_writer_free(sw.w);
    free(config);
    free(host);
    free(rank_names);
    free(rank_lens);
    /* A weights file whose state could not be written is not a snapshot. */
    if (sw.s) unlink(weights_path);
    return sw.s;
}

/* ---- reading ----------------------------------------------------------------------------------- */

static tfc_st_file *open_verified(const char *path, tfc_error *err)
{
    tfc_st_file *f = tfc_st_open(path, err);
    if (!f) return NULL;
    const char *fmt = tfc_st_meta(f, "format"), *ver = tfc_st_meta(f, "format_version");
    const char *sum = tfc_st_meta(f, "checksum");
    tfc_status s = TFC_OK;
    char want[9];
    if (!fmt || strcmp(fmt, TFC_STATE_FORMAT) != 0)
        s = tfc_error_set(err, TFC_ERR_USAGE,
                          "%s is not a tfc state file (its __metadata__ has no format \"%s\"); "
                          "--resume takes the .state file of a snapshot",
                          path, TFC_STATE_FORMAT);
    else if (!ver || strcmp(ver, TFC_STATE_VERSION) != 0)
        s = tfc_error_set(err, TFC_ERR_FORMAT,
                          "%s: state format version %s, this tfc reads version %s", path,
                          ver ? ver : "(none)", TFC_STATE_VERSION);
    else if (!sum)
        s = tfc_error_set(err, TFC_ERR_FORMAT, "%s: the state file has no checksum", path);
    else if (!(s = tfc_snapshot_checksum(f, want, err))) {
        if (strcmp(want, sum) != 0)
            s = tfc_error_set(err, TFC_ERR_FORMAT,
                              "%s: checksum mismatch (stored %s, computed %s): the file is "
                              "corrupt or was modified",
                              path, sum, want);
    }
    if (s) {
        tfc_st_close(f);
        return NULL;
    }
    return f;
}

tfc_status tfc_snapshot_checksum(const tfc_st_file *f, char out[9], tfc_error *err)
{
    uint32_t crc = 0;
    tfc_status s = file_checksum(f, &crc, err);
    if (!s) snprintf(out, 9, "%08x", crc);
    return s;
}

tfc_status tfc_snapshot_origin(const char *state_path, char *model, size_t size, char **config,
                               tfc_error *err)
{
    *config = NULL;
    tfc_st_file *f = open_verified(state_path, err);
    if (!f) return err ? err->code : TFC_ERR_FORMAT;
    const char *name = tfc_st_meta(f, "model");
    snprintf(model, size, "%s", name ? name : "");
    const tfc_st_tensor *t = tfc_st_find(f, "solver/config");
    tfc_status s = TFC_OK;
    if (t && (t->dtype != TFC_U8 || !(*config = malloc(t->nbytes + 1))))
        s = tfc_error_set(err, t->dtype != TFC_U8 ? TFC_ERR_FORMAT : TFC_ERR_NOMEM,
                          "%s: tensor 'solver/config' cannot be read", state_path);
    else if (t) {
        memcpy(*config, t->data, t->nbytes);
        (*config)[t->nbytes] = 0;
    }
    tfc_st_close(f);
    return s;
}

tfc_status tfc_snapshot_verify(const char *state_path, tfc_error *err)
{
    tfc_st_file *f = open_verified(state_path, err);
    if (!f) return err ? err->code : TFC_ERR_FORMAT;
    tfc_st_close(f);
    return TFC_OK;
}

/* A tensor of the state with the expected dtype and element count, or an error. */
static const tfc_st_tensor *need(const tfc_st_file *f, const char *path, const char *name,
                                 tfc_dtype dt, int64_t numel, tfc_status *s, tfc_error *err)
{
    if (*s) return NULL;
    const tfc_st_tensor *t = tfc_st_find(f, name);
    if (!t || t->dtype != dt || (numel >= 0 && t->numel != numel)) {
        *s = tfc_error_set(err, TFC_ERR_FORMAT, "%s: tensor '%s' is %s", path, name,
                           t ? "of the wrong type or size" : "missing");
        return NULL;
    }
    return t;
}

/* Copies the saved ring (W' entries, `seen` losses recorded) into a ring of x->window. */
static void restore_losses(tfc_snapshot_extra *x, const double *saved, int64_t wsaved, int64_t seen)
{
    int64_t have = seen < wsaved ? seen : wsaved;
    if (have > x->window) have = x->window;
    for (int64_t j = seen - have; j < seen; j++)
        x->losses[j % x->window] = saved[j % wsaved];
}

/* Another model (said first), another rank count, optimizer or slots is refused; a
 * different configuration only sets *config_differs. */
static tfc_status check_identity(const tfc_st_file *f, const tfc_optimizer *o,
                                 const tfc_snapshot_id *id, const char *state_path,
                                 int *config_differs, tfc_error *err)
{
    const char *opt = tfc_st_meta(f, "optimizer"), *mh = tfc_st_meta(f, "model_hash");
    const char *ch = tfc_st_meta(f, "config_hash"), *mname = tfc_st_meta(f, "model");
    const char *slots = tfc_st_meta(f, "slots");
    char want_slots[128], hash[32];
    slot_list(o, want_slots, sizeof want_slots);
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)id->config_hash);
    *config_differs = !ch || strcmp(ch, hash) != 0;
    if (!mname || strcmp(mname, id->model_name) != 0)
        return tfc_error_set(err, TFC_ERR_USAGE,
                             "%s belongs to model '%s', not to this run's model '%s'",
                             state_path, mname ? mname : "?", id->model_name);
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)id->model_hash);
    if (!mh || strcmp(mh, hash) != 0)
        return tfc_error_set(err, TFC_ERR_USAGE,
                             "%s was saved from a different model ('%s'); this run's model '%s' "
                             "differs in its layers or their arguments, so it cannot resume",
                             state_path, mname ? mname : "?", id->model_name);
    const char *ranks = tfc_st_meta(f, "ranks"); /* absent before data-parallel runs: one */
    int saved_ranks = ranks ? atoi(ranks) : 1;
    if (saved_ranks != id->ranks)
        return tfc_error_set(err, TFC_ERR_USAGE,
                             "%s was written by a run of %d rank%s, this run has %d; a resumed "
                             "run needs the same number of ranks (which rows each rank takes, "
                             "its dropout streams and the order of the gradient sum depend on "
                             "it)",
                             state_path, saved_ranks, saved_ranks == 1 ? "" : "s", id->ranks);
    if (!opt || strcmp(opt, id->optimizer) != 0)
        return tfc_error_set(err, TFC_ERR_USAGE,
                             "%s was saved by optimizer '%s', this run uses '%s'; a resumed run "
                             "needs the same optimizer",
                             state_path, opt ? opt : "(none)", id->optimizer);
    if (!slots || strcmp(slots, want_slots) != 0)
        return tfc_error_set(err, TFC_ERR_USAGE,
                             "%s holds the optimizer slots [%s], this run's %s needs [%s] (a "
                             "hyperparameter such as momentum, amsgrad or centered changed)",
                             state_path, slots ? slots : "", id->optimizer, want_slots);
    return TFC_OK;
}

/* The weights file beside the state, checked against the CRC the state recorded, into the
 * model. */
static tfc_status load_weights(tfc_model *m, const tfc_st_file *f, const char *state_path,
                               tfc_error *err)
{
    const char *wname = tfc_st_meta(f, "weights"), *wcrc = tfc_st_meta(f, "weights_crc32c");
    const char *slash = strrchr(state_path, '/');
    char wpath[4200], got[16];
    if (!wname || !*wname || strchr(wname, '/') || !wcrc)
        return tfc_error_set(err, TFC_ERR_FORMAT, "%s names no weights file", state_path);
    if (slash) snprintf(wpath, sizeof wpath, "%.*s/%s", (int)(slash - state_path), state_path, wname);
    else snprintf(wpath, sizeof wpath, "%s", wname);
    uint32_t crc = 0;
    tfc_status s = tfc_file_crc32c(wpath, &crc, err);
    if (s) return s;
    snprintf(got, sizeof got, "%08x", crc);
    if (strcmp(got, wcrc) != 0)
        return tfc_error_set(err, TFC_ERR_FORMAT,
                             "%s does not match its state file %s (CRC-32C %s, the state "
                             "expects %s): it was replaced or damaged",
                             wpath, state_path, got, wcrc);
    return tfc_model_load_weights(m, wpath, NULL, err);
}

/* The optimizer slots, per trainable parameter in the grads arena's order, onto the device. */
static tfc_status load_slots(tfc_model *m, tfc_optimizer *o, const tfc_st_file *f,
                             const char *state_path, tfc_error *err)
{
    int64_t n = o->n;
    float *host = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!host) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    tfc_status s = TFC_OK;
    for (int k = 0; k < o->nslots && !s; k++) {
        if (!o->slot[k]) continue;
        int64_t off = 0;
        for (int i = 0; i < tfc_model_nlayers(m) && !s; i++) {
            tfc_layer *l = tfc_model_layer(m, i);
            for (int p = 0; p < l->nparams && !s; p++) {
                if (!l->params[p].trainable || l->params[p].shared) continue;
                char name[256];
                snprintf(name, sizeof name, "%s/%s/%s", o->slot_name[k], l->name, l->params[p].name);
                const tfc_st_tensor *t = tfc_st_find(f, name);
                if (!t || t->dtype != TFC_F32 || !tfc_shape_equal(&t->shape, &l->params[p].shape)) {
                    s = tfc_error_set(err, TFC_ERR_USAGE,
                                      "%s: optimizer slot '%s' is %s; the state does not belong "
                                      "to this model",
                                      state_path, name, t ? "of another shape" : "missing");
                    break;
                }
                memcpy(host + off, t->data, t->nbytes);
                off += l->params[p].numel;
            }
        }
        if (!s) o->be->ops->upload(o->be, o->slot[k], host, (size_t)n * sizeof(float));
    }
    free(host);
    return s;
}

/* The counters, the loss ring and the pipeline position into `x`. */
static tfc_status read_counters(const tfc_st_file *f, const char *state_path,
                                tfc_snapshot_extra *x, tfc_error *err)
{
    tfc_status s = TFC_OK;
    const tfc_st_tensor *tc = need(f, state_path, "solver/counters", TFC_I64, 2, &s, err);
    const tfc_st_tensor *te = need(f, state_path, "solver/elapsed_seconds", TFC_F64, 1, &s, err);
    const tfc_st_tensor *tb = need(f, state_path, "solver/best", TFC_F64, 3, &s, err);
    const tfc_st_tensor *tl = need(f, state_path, "solver/losses", TFC_F64, -1, &s, err);
    const tfc_st_tensor *td = need(f, state_path, "solver/display", TFC_F64, 2 + TFC_MAX_METRICS,
                                   &s, err);
    const tfc_st_tensor *tp = need(f, state_path, "pipeline/train", TFC_U8, -1, &s, err);
    if (s) return s;
    if (x->rank > 0) { /* a rank's own position in a dealt split */
        char name[40];
        snprintf(name, sizeof name, "pipeline/train/rank%d", x->rank);
        const tfc_st_tensor *own = tfc_st_find(f, name);
        if (own && own->dtype != TFC_U8)
            return tfc_error_set(err, TFC_ERR_FORMAT, "%s: tensor '%s' is not U8", state_path,
                                 name);
        if (own) tp = own;
    }
    int64_t counters[2];
    double best[3];
    memcpy(counters, tc->data, sizeof counters);
    memcpy(&x->elapsed, te->data, sizeof x->elapsed);
    memcpy(best, tb->data, sizeof best);
    memcpy(x->display, td->data, sizeof x->display);
    x->iteration = counters[0];
    x->losses_seen = counters[1];
    x->have_best = best[0] != 0;
    x->best_value = best[1];
    x->best_iteration = (int64_t)best[2];
    /* Optional: state files written before early stopping and plateau lack it. */
    const tfc_st_tensor *tcb = tfc_st_find(f, "solver/callbacks");
    if (tcb && tcb->dtype == TFC_F64 && tcb->numel == TFC_CALLBACK_STATE) {
        memcpy(x->callbacks, tcb->data, sizeof x->callbacks);
        x->have_callbacks = 1;
    } else if (tcb) {
        return tfc_error_set(err, TFC_ERR_FORMAT, "%s: tensor 'solver/callbacks' is of the "
                             "wrong type or size", state_path);
    }
    /* Optional: the last finished test pass (a stop during the one at `iteration` leaves it
     * to the resumed run) and the latest display's train result. */
    const tfc_st_tensor *tlt = tfc_st_find(f, "solver/last_test");
    const tfc_st_tensor *ttr = tfc_st_find(f, "solver/train_result");
    if ((tlt && (tlt->dtype != TFC_I64 || tlt->numel != 1)) ||
        (ttr && (ttr->dtype != TFC_F64 || ttr->numel != 1 + TFC_MAX_METRICS)))
        return tfc_error_set(err, TFC_ERR_FORMAT, "%s: tensor '%s' is of the wrong type or size",
                             state_path, tlt && tlt->dtype == TFC_I64 && tlt->numel == 1
                                             ? "solver/train_result" : "solver/last_test");
    x->last_test = x->iteration;
    if (tlt) memcpy(&x->last_test, tlt->data, sizeof x->last_test);
    x->have_train = ttr != NULL;
    if (ttr) memcpy(x->train, ttr->data, sizeof x->train);
    /* Optional: the display's counted-metric counts (a model with other metrics has other
     * counts: the display then starts from none). */
    const tfc_st_tensor *tdc = tfc_st_find(f, "solver/display_counts");
    if (x->ncounts) {
        const int fits = tdc && tdc->dtype == TFC_F64 && tdc->numel == x->ncounts;
        if (fits) memcpy(x->counts, tdc->data, (size_t)x->ncounts * sizeof *x->counts);
        else memset(x->counts, 0, (size_t)x->ncounts * sizeof *x->counts);
    }
    /* Optional: the tfc-ctl sets of the run so far. */
    const tfc_st_tensor *tctl = tfc_st_find(f, "solver/control");
    if (tctl) {
        if (tctl->dtype != TFC_U8)
            return tfc_error_set(err, TFC_ERR_FORMAT, "%s: tensor 'solver/control' is not U8",
                                 state_path);
        x->control = malloc(tctl->nbytes + 1);
        if (!x->control) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        memcpy(x->control, tctl->data, tctl->nbytes);
        x->control[tctl->nbytes] = 0;
    }
    /* Optional: float16's loss scale (a state of another precision resumes from the
     * configured start). */
    const tfc_st_tensor *tls = tfc_st_find(f, "solver/loss_scale");
    x->have_loss_scale = tls != NULL;
    if (tls) {
        if (tls->dtype != TFC_F64 || tls->numel != 3)
            return tfc_error_set(err, TFC_ERR_FORMAT, "%s: tensor 'solver/loss_scale' is of the "
                                 "wrong type or size", state_path);
        memcpy(x->loss_scale, tls->data, sizeof x->loss_scale);
    }
    /* Optional: the weight average of a run with `ema:`. */
    const tfc_st_tensor *tema = tfc_st_find(f, "ema/params");
    if (tema) {
        if (tema->dtype != TFC_F32 || tema->numel != x->ema_n)
            return tfc_error_set(err, TFC_ERR_FORMAT, "%s: tensor 'ema/params' has %lld values "
                                 "for %lld parameters", state_path, (long long)tema->numel,
                                 (long long)x->ema_n);
        x->ema = malloc(tema->nbytes ? tema->nbytes : 1);
        if (!x->ema) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        memcpy(x->ema, tema->data, tema->nbytes);
    }
    double *saved = malloc((size_t)(tl->numel > 0 ? tl->numel : 1) * sizeof(double));
    x->losses = calloc((size_t)x->window, sizeof(double));
    x->pipeline = malloc(tp->nbytes ? tp->nbytes : 1);
    if (!saved || !x->losses || !x->pipeline || x->iteration < 0 || x->losses_seen < 0) {
        s = saved && x->losses && x->pipeline
                ? tfc_error_set(err, TFC_ERR_FORMAT, "%s: negative counters", state_path)
                : tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    } else {
        memcpy(saved, tl->data, tl->nbytes);
        if (tl->numel > 0) restore_losses(x, saved, tl->numel, x->losses_seen);
        memcpy(x->pipeline, tp->data, tp->nbytes);
        x->pipeline_len = tp->nbytes;
    }
    free(saved);
    return s;
}

tfc_status tfc_snapshot_read(tfc_model *m, tfc_optimizer *o, const tfc_snapshot_id *id,
                             const char *state_path, tfc_snapshot_extra *x, int *config_differs,
                             tfc_error *err)
{
    tfc_st_file *f = open_verified(state_path, err);
    if (!f) return err ? err->code : TFC_ERR_FORMAT;
    tfc_status s = check_identity(f, o, id, state_path, config_differs, err);
    if (!s) s = load_weights(m, f, state_path, err);
    if (!s) s = load_slots(m, o, f, state_path, err);
    if (!s) s = read_counters(f, state_path, x, err);
    tfc_st_close(f);
    return s;
}
