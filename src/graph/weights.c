/* Model weights as safetensors: `<layer>/<variable>` names in Keras layouts, so files move
 * to and from Keras and PyTorch with at most a transpose. Strict loads for inference,
 * by-name loads with a report for fine-tuning. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/model_internal.h"
#include "core/safetensors.h"

#ifndef TFC_VERSION
#define TFC_VERSION "dev"
#endif

static void param_name(const tfc_layer *l, const tfc_param *p, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s", l->name, p->name);
}

tfc_status tfc_model_set_class_names(tfc_model *m, const char *const *names, int n,
                                     tfc_error *err)
{
    for (int i = 0; i < m->nclass_names; i++) free(m->class_names[i]);
    free(m->class_names);
    m->class_names = NULL;
    m->nclass_names = 0;
    if (n <= 0 || !names || n != tfc_model_classes(m)) return TFC_OK;
    m->class_names = calloc((size_t)n, sizeof *m->class_names);
    for (int i = 0; m->class_names && i < n; i++) {
        m->class_names[i] = strdup(names[i] ? names[i] : "");
        if (!m->class_names[i]) break;
        m->nclass_names = i + 1;
    }
    if (m->nclass_names == n) return TFC_OK;
    tfc_model_set_class_names(m, NULL, 0, NULL);
    return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
}

const char *const *tfc_model_class_names(const tfc_model *m, int *n)
{
    *n = m->nclass_names;
    return m->nclass_names ? (const char *const *)m->class_names : NULL;
}

void tfc_model_set_vocabulary_hash(tfc_model *m, const char *hash)
{
    snprintf(m->vocabulary, sizeof m->vocabulary, "%s", hash ? hash : "");
}

const char *tfc_model_vocabulary_hash(const tfc_model *m)
{
    return m->vocabulary[0] ? m->vocabulary : NULL;
}

tfc_status tfc_model_check_vocabulary(const tfc_model *m, const char *hash,
                                      const char *vocabulary, const char *weights,
                                      tfc_error *err)
{
    if (!m->vocabulary[0] || !hash || !hash[0] || !strcmp(m->vocabulary, hash)) return TFC_OK;
    tfc_error_set(err, TFC_ERR_USAGE, "%s is not the vocabulary %s was trained with (its hash "
                  "%s, the weights record %s)", vocabulary, weights, hash, m->vocabulary);
    tfc_error_hint(err, "use the vocabulary.txt of the run that wrote %s", weights);
    return TFC_ERR_USAGE;
}

/* The class names as a JSON array (malloc'd), or NULL when the model has none. */
static char *class_names_json(const tfc_model *m)
{
    if (!m->nclass_names) return NULL;
    json_t *a = json_array();
    for (int i = 0; a && i < m->nclass_names; i++)
        json_array_append_new(a, json_string(m->class_names[i]));
    char *text = a ? json_dumps(a, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(a);
    return text;
}

/* The file's "classes" metadata into the model, when it is a JSON array of as many strings
 * as the output has classes; anything else is ignored (an older file, another head). */
static void read_class_names(tfc_model *m, const tfc_st_file *f)
{
    const char *text = tfc_st_meta(f, "classes");
    json_t *a = text ? json_loads(text, 0, NULL) : NULL;
    int n = json_is_array(a) ? (int)json_array_size(a) : 0;
    const char **names = n > 0 ? calloc((size_t)n, sizeof *names) : NULL;
    for (int i = 0; names && i < n; i++) {
        names[i] = json_string_value(json_array_get(a, (size_t)i));
        if (!names[i]) n = 0;
    }
    if (names) tfc_model_set_class_names(m, names, n, NULL);
    free(names);
    json_decref(a);
}

tfc_status tfc_model_save_weights(tfc_model *m, const char *path, tfc_error *err)
{
    TFC_ASSERT(m->be);
    int64_t total = tfc_model_param_count(m);
    float *host = malloc((size_t)(total ? total : 1) * 4);
    tfc_st_writer *w = tfc_st_writer_create();
    tfc_status s = host && w ? TFC_OK : tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    int64_t off = 0;
    for (int i = 0; i < m->nlayers && !s; i++) {
        tfc_layer *l = &m->layers[i];
        for (int p = 0; p < l->nparams && !s; p++) {
            /* no variable of Keras's; a call's weights are its layer's, saved once */
            if (l->params[p].constant || l->params[p].shared) continue;
            char name[192];
            param_name(l, &l->params[p], name, sizeof name);
            tfc_model_param_download(m, &l->params[p], host + off);
            s = tfc_st_writer_add(w, name, TFC_F32, &l->params[p].shape, host + off, err);
            off += l->params[p].numel;
        }
    }
    if (!s) s = tfc_st_writer_set_meta(w, "model", m->name, err);
    if (!s) s = tfc_st_writer_set_meta(w, "tfc_version", TFC_VERSION, err);
    if (!s) s = tfc_st_writer_set_meta(w, "format", "tfc-weights", err);
    char *classes = s ? NULL : class_names_json(m);
    if (classes) s = tfc_st_writer_set_meta(w, "classes", classes, err);
    free(classes);
    if (!s && m->vocabulary[0]) s = tfc_st_writer_set_meta(w, "vocabulary", m->vocabulary, err);
    if (!s) s = tfc_st_writer_save(w, path, err);
    tfc_st_writer_free(w);
    free(host);
    return s;
}

static void report_line(tfc_weights_report *rep, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void report_line(tfc_weights_report *rep, size_t *len, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (n >= (int)sizeof line) n = (int)sizeof line - 1;
    char *t = realloc(rep->text, *len + (size_t)n + 2);
    if (!t) return;
    rep->text = t;
    memcpy(t + *len, line, (size_t)n);
    t[*len + (size_t)n] = '\n';
    *len += (size_t)n + 1;
    t[*len] = 0;
}

/* A weights file that lacks a variable the model needs (misfit: has it in another shape):
 * whose weights the file holds, as its metadata records it; or, this model's in another
 * configuration, the way to start from them; or else the first of its tensors' names. */
static void other_model_hint(const tfc_model *m, tfc_st_file *f, const char *path, int misfit,
                             tfc_error *err)
{
    const char *model = tfc_st_meta(f, "model");
    if (model && strcmp(model, tfc_model_name(m))) {
        tfc_error_hint(err, "the file holds the weights of model '%s' (its metadata), this is "
                            "model '%s': give that model's file, or train this one", model,
                       tfc_model_name(m));
        return;
    }
    if (misfit) {
        tfc_error_hint(err, "the model's configuration is not the one that wrote the file (a "
                            "layer's units or filters, or the input's shape?): tfc-train "
                            "--weights %s starts from what fits and initialises the rest", path);
        return;
    }
    char names[256] = "";
    size_t len = 0;
    const int n = tfc_st_count(f);
    for (int i = 0; i < n && i < 4 && len < sizeof names; i++)
        len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "",
                                tfc_st_tensor_at(f, i)->name);
    tfc_error_hint(err, "the file's %d tensors (%s%s) are named <layer name>/<variable>: "
                        "tfc-inspect %s lists them", n, names, n > 4 ? ", ..." : "", path);
}

tfc_status tfc_model_load_weights(tfc_model *m, const char *path, tfc_weights_report *rep,
                                  tfc_error *err)
{
    TFC_ASSERT(m->be);
    tfc_st_file *f = tfc_st_open(path, err);
    if (!f) return err ? err->code : TFC_ERR_IO;
    const char *format = tfc_st_meta(f, "format");
    if (format && !strcmp(format, "tfc-state")) {
        tfc_st_close(f);
        tfc_error_set(err, TFC_ERR_USAGE,
                      "%s is a snapshot state (optimizer slots and counters), not a weights file",
                      path);
        tfc_error_hint(err, "to continue that run use --resume %s; for its weights use the "
                            ".safetensors file beside it", path);
        return TFC_ERR_USAGE;
    }
    int n = tfc_st_count(f);
    char *used = calloc((size_t)n + 1, 1);
    float *host = NULL;
    size_t host_cap = 0, len = 0;
    tfc_status s = used ? TFC_OK : tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    if (rep) memset(rep, 0, sizeof *rep);
    for (int i = 0; i < m->nlayers && !s; i++) {
        tfc_layer *l = &m->layers[i];
        for (int p = 0; p < l->nparams && !s; p++) {
            tfc_param *pr = &l->params[p];
            if (pr->constant || pr->shared) continue; /* the layer's, or its first call's */
            char name[192], want[96], got[96];
            param_name(l, pr, name, sizeof name);
            tfc_shape_str(&pr->shape, want, sizeof want);
            const tfc_st_tensor *t = tfc_st_find(f, name);
            if (!t) {
                if (!rep) {
                    s = tfc_error_set(err, TFC_ERR_USAGE, "%s: no tensor '%s' %s for layer '%s'",
                                      path, name, want, l->name);
                    other_model_hint(m, f, path, 0, err);
                    break;
                }
                rep->missing++;
                report_line(rep, &len, "new      %s %s (not in the file: initialised)", name, want);
                continue;
            }
            used[t - tfc_st_tensor_at(f, 0)] = 1;
            if (!tfc_shape_equal(&t->shape, &pr->shape)) {
                tfc_shape_str(&t->shape, got, sizeof got);
                if (!rep) {
                    s = tfc_error_set(err, TFC_ERR_USAGE,
                                      "%s: tensor '%s' has shape %s, the model needs %s", path,
                                      name, got, want);
                    other_model_hint(m, f, path, 1, err);
                    break;
                }
                rep->mismatched++;
                report_line(rep, &len, "skipped  %s: file %s, model %s (initialised)", name, got,
                            want);
                continue;
            }
            if ((size_t)pr->numel > host_cap) {
                float *h = realloc(host, (size_t)pr->numel * 4);
                if (!h) {
                    s = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
                    break;
                }
                host = h;
                host_cap = (size_t)pr->numel;
            }
            tfc_st_tensor_to_f32(t, host);
            tfc_model_param_upload(m, pr, host);
            if (rep) {
                rep->matched++;
                report_line(rep, &len, "matched  %s %s", name, want);
            }
        }
    }
    if (rep && !s)
        for (int i = 0; i < n; i++)
            if (!used[i]) {
                rep->unused++;
                report_line(rep, &len, "unused   %s (no such layer variable in the model)",
                            tfc_st_tensor_at(f, i)->name);
            }
    if (rep && !s && rep->matched == 0) {
        /* Nothing to initialise from: a wrong file, not a fine-tuning start. */
        s = tfc_error_set(err, TFC_ERR_USAGE,
                          "%s: none of its %d tensors matches a variable of this model (%d new, "
                          "%d skipped for shape)",
                          path, n, rep->missing, rep->mismatched);
        tfc_error_hint(err, "tensor names are <layer name>/<variable> (tfc-inspect %s lists "
                            "them); name the layers as the model that wrote the file did",
                       path);
        free(rep->text);
        rep->text = NULL;
    }
    if (!rep && !s) {
        read_class_names(m, f);
        tfc_model_set_vocabulary_hash(m, tfc_st_meta(f, "vocabulary"));
    }
    free(used);
    free(host);
    tfc_st_close(f);
    return s;
}
