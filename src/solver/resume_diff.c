/* What a resume changes: the configuration the state recorded (or, from an older state, its
 * run's config.yaml) against the one being resumed with, as dotted paths
 * `key.sub[2]: old -> new`. Changes the saved state still
 * fits (rates and schedules, intervals, max_iter, callbacks, clipping, devices) are applied;
 * those it does not — the model, the data splits (sources, pipelines, batch sizes),
 * iter_size, optimizer keys other than learning_rate — are marked refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "solver/internal.h"

/* A node as one line of text (block YAML collapsed), at most size - 1 bytes. */
static void value_text(const tfc_node *n, char *buf, size_t size)
{
    if (!n) {
        snprintf(buf, size, "(absent)");
        return;
    }
    if (n->kind == TFC_NODE_SCALAR) {
        snprintf(buf, size, "%s", n->str);
        return;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        snprintf(buf, size, "...");
        return;
    }
    tfc_node_emit(f, n);
    fclose(f);
    size_t o = 0;
    for (size_t i = 0; i < len && o + 1 < size; i++) {
        char c = text[i] == '\n' ? ' ' : text[i];
        if (c == ' ' && (o == 0 || buf[o - 1] == ' ')) continue;
        buf[o++] = c;
    }
    while (o > 0 && buf[o - 1] == ' ') o--;
    buf[o] = 0;
    free(text);
}

static int same(const tfc_node *a, const tfc_node *b)
{
    if (!a || !b || a->kind != b->kind) return a == b;
    if (a->kind == TFC_NODE_SCALAR) return !strcmp(a->str, b->str);
    if (a->n != b->n) return 0;
    for (int i = 0; i < a->n; i++) {
        if (a->kind == TFC_NODE_MAP && strcmp(a->keys[i]->str, b->keys[i]->str)) return 0;
        if (!same(a->vals[i], b->vals[i])) return 0;
    }
    return 1;
}

/* Whether a change at dotted `path` leaves the state meaningful. */
static int refused(const char *path)
{
    static const char *const kept[] = {"model", "data", "iter_size", NULL};
    for (int i = 0; kept[i]; i++) {
        size_t n = strlen(kept[i]);
        if (!strncmp(path, kept[i], n) && (path[n] == 0 || path[n] == '.' || path[n] == '['))
            return 1;
    }
    return !strncmp(path, "optimizer", 9) && strcmp(path, "optimizer.learning_rate") != 0;
}

/* Appends the differences under `path` to f; returns their count; *nrefused counts the
 * refused ones. */
static int diff(FILE *f, const char *path, const tfc_node *a, const tfc_node *b, int *nrefused)
{
    if (same(a, b)) return 0;
    char sub[512];
    int count = 0;
    if (a && b && a->kind == b->kind && a->kind == TFC_NODE_MAP) {
        for (int i = 0; i < a->n; i++) {
            snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", a->keys[i]->str);
            count += diff(f, sub, a->vals[i], tfc_node_get(b, a->keys[i]->str), nrefused);
        }
        for (int i = 0; i < b->n; i++)
            if (!tfc_node_get(a, b->keys[i]->str)) {
                snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", b->keys[i]->str);
                count += diff(f, sub, NULL, b->vals[i], nrefused);
            }
        return count;
    }
    if (a && b && a->kind == b->kind && a->kind == TFC_NODE_SEQ && a->n == b->n) {
        for (int i = 0; i < a->n; i++) {
            snprintf(sub, sizeof sub, "%s[%d]", path, i);
            count += diff(f, sub, a->vals[i], b->vals[i], nrefused);
        }
        return count;
    }
    char old[160], now[160];
    value_text(a, old, sizeof old);
    value_text(b, now, sizeof now);
    int no = refused(path);
    *nrefused += no;
    fprintf(f, "  %s: %s -> %s%s\n", path, old, now, no ? "  (refused)" : "");
    return 1;
}

/* The configuration STATE's run had: the one the state recorded, else (a state written
 * before tfc recorded it) its run directory's config.yaml; NULL when neither is readable. */
static tfc_doc *recorded_config(const tfc_solver *s, const char *state, const char *config)
{
    tfc_error quiet;
    tfc_error_clear(&quiet);
    if (config) return tfc_doc_load_string(config, strlen(config), state, &quiet);
    const char *dir_end = NULL;
    char path[4200];
    if (tfc_snapshot_parse(state, s->cfg.snapshot_prefix, &dir_end) < 0) return NULL;
    if (dir_end) snprintf(path, sizeof path, "%.*s/config.yaml", (int)(dir_end - state), state);
    else snprintf(path, sizeof path, "config.yaml");
    return tfc_doc_load_file(path, &quiet);
}

tfc_status tfc_resume_diff(const tfc_solver *s, const char *state, char **changes,
                           int *nrefused, char *owner, size_t owner_size, tfc_error *err)
{
    *changes = NULL;
    *nrefused = 0;
    owner[0] = 0;
    char model[256], *config = NULL;
    tfc_status st = tfc_snapshot_origin(state, model, sizeof model, &config, err);
    if (st) return st;
    if (strcmp(model, tfc_model_name(s->model)) != 0) snprintf(owner, owner_size, "%s", model);
    tfc_doc *d = recorded_config(s, state, config);
    free(config);
    if (!d) return TFC_OK;
    size_t len = 0;
    FILE *f = open_memstream(changes, &len);
    int n = f ? diff(f, "", tfc_doc_root(d), s->root, nrefused) : 0;
    if (f) fclose(f);
    tfc_doc_free(d);
    if (n == 0) {
        free(*changes);
        *changes = NULL;
    }
    return TFC_OK;
}
