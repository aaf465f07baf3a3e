/* Snapshot names and which snapshots exist: RUN_DIR/PREFIX_iter_N.{safetensors,state} built
 * and parsed in one place, a run's rotation (the newest `keep` stay; one goes only after its
 * successor is durable), and the discovery of a run directory's newest complete snapshot
 * under the prefix its config.yaml records. The files' contents: snapshot_io.c. */
#include "solver/internal.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"

/* ---- names ------------------------------------------------------------------------------------ */

static const char *const file_ext[] = {".safetensors", ".state"};

void tfc_snapshot_path(const char *run_dir, const char *prefix, int64_t iter,
                       tfc_snapshot_file which, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s_iter_%lld%s", run_dir, prefix, (long long)iter, file_ext[which]);
}

int64_t tfc_snapshot_parse(const char *path, const char *prefix, const char **dir_end)
{
    static const char mark[] = "_iter_";
    const char *ext = file_ext[TFC_SNAPSHOT_STATE];
    size_t len = strlen(path), el = strlen(ext), pl = strlen(prefix), ml = sizeof mark - 1;
    if (len < el || strcmp(path + len - el, ext)) return -1;
    size_t end = len - el, at = end; /* the digits of N are path[at, end) */
    while (at > 0 && path[at - 1] >= '0' && path[at - 1] <= '9') at--;
    if (at == end || end - at > 18 || at < ml + pl) return -1; /* 18 digits fit int64 */
    size_t name = at - ml - pl; /* where PREFIX begins */
    if (strncmp(path + at - ml, mark, ml) || strncmp(path + name, prefix, pl) ||
        (name > 0 && path[name - 1] != '/'))
        return -1;
    if (dir_end) *dir_end = name > 0 ? path + name - 1 : NULL;
    return strtoll(path + at, NULL, 10);
}

/* The folder that holds a run's snapshots (RUN_DIR/PREFIX without its last part) into
 * `folder`; returns that last part, the base of the files' names. */
static const char *snapshot_folder(const char *run_dir, const char *prefix, char *folder,
                                   size_t size)
{
    const char *slash = strrchr(prefix, '/');
    if (slash) snprintf(folder, size, "%s/%.*s", run_dir, (int)(slash - prefix), prefix);
    else snprintf(folder, size, "%s", run_dir);
    return slash ? slash + 1 : prefix;
}

static int ascending(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The iterations N <= upto of the state files RUN_DIR/PREFIX_iter_N.state, ascending, in
 * *out (malloc'd; free it); returns how many. An unreadable folder holds none; when memory
 * runs out the list ends early. */
static int list_states(const char *run_dir, const char *prefix, int64_t upto, int64_t **out)
{
    char folder[4700];
    const char *base = snapshot_folder(run_dir, prefix, folder, sizeof folder);
    int n = 0, cap = 0;
    *out = NULL;
    DIR *d = opendir(folder);
    for (struct dirent *e; d && (e = readdir(d));) {
        int64_t it = tfc_snapshot_parse(e->d_name, base, NULL);
        if (it < 0 || it > upto) continue;
        if (n == cap) {
            int64_t *p = realloc(*out, sizeof *p * (size_t)(cap ? 2 * cap : 16));
            if (!p) break;
            *out = p;
            cap = cap ? 2 * cap : 16;
        }
        (*out)[n++] = it;
    }
    if (d) closedir(d);
    if (n > 1) qsort(*out, (size_t)n, sizeof **out, ascending);
    return n;
}

/* ---- rotation --------------------------------------------------------------------------------- */

/* Temporary files of snapshot writes that a kill interrupted (".<base>_iter_N.*.tmp-XXXXXX",
 * tfc_file_write_atomic's names). */
static void remove_stale_temps(const char *folder, const char *base)
{
    size_t bl = strlen(base);
    DIR *d = opendir(folder);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        const char *nm = e->d_name;
        if (nm[0] != '.' || strncmp(nm + 1, base, bl) || strncmp(nm + 1 + bl, "_iter_", 6) ||
            !strstr(nm, ".tmp-"))
            continue;
        char path[5000];
        snprintf(path, sizeof path, "%s/%s", folder, nm);
        unlink(path);
    }
    closedir(d);
}

/* Appends `iter` unless the set holds it; 0 when memory runs out. */
static int remember(tfc_snapshot_set *set, int64_t iter)
{
    for (int i = 0; i < set->n; i++)
        if (set->iters[i] == iter) return 1;
    if (set->n == set->cap) {
        int cap = set->cap ? 2 * set->cap : 16;
        int64_t *p = realloc(set->iters, sizeof *p * (size_t)cap);
        if (!p) return 0;
        set->iters = p;
        set->cap = cap;
    }
    set->iters[set->n++] = iter;
    return 1;
}

tfc_status tfc_snapshot_set_open(tfc_snapshot_set *set, const char *run_dir, const char *prefix,
                                 int64_t resumed_at, tfc_error *err)
{
    char folder[4700];
    const char *base = snapshot_folder(run_dir, prefix, folder, sizeof folder);
    *set = (tfc_snapshot_set){.run_dir = run_dir, .prefix = prefix};
    tfc_status s = tfc_mkdir_p(folder, err);
    if (s) return s;
    remove_stale_temps(folder, base);
    if (resumed_at < 0) return TFC_OK;
    int64_t *found;
    int n = list_states(run_dir, prefix, resumed_at, &found);
    for (int i = 0; i < n; i++) remember(set, found[i]);
    free(found);
    return TFC_OK;
}

void tfc_snapshot_set_rotate(tfc_snapshot_set *set, int64_t iter, int keep)
{
    if (!remember(set, iter)) return;
    while (keep > 0 && set->n > keep) {
        char weights[4700], state[4700];
        tfc_snapshot_path(set->run_dir, set->prefix, set->iters[0], TFC_SNAPSHOT_STATE, state,
                          sizeof state);
        tfc_snapshot_path(set->run_dir, set->prefix, set->iters[0], TFC_SNAPSHOT_WEIGHTS,
                          weights, sizeof weights);
        unlink(state);
        unlink(weights);
        memmove(set->iters, set->iters + 1, sizeof *set->iters * (size_t)(set->n - 1));
        set->n--;
    }
}

void tfc_snapshot_set_free(tfc_snapshot_set *set) { free(set->iters); }

/* ---- discovery -------------------------------------------------------------------------------- */

tfc_status tfc_snapshot_find_newest(const char *run_dir, char *state, size_t size,
                                    tfc_error *err)
{
    char config[4200];
    state[0] = 0;
    snprintf(config, sizeof config, "%s/config.yaml", run_dir);
    if (access(config, F_OK) != 0) return TFC_OK;
    tfc_solver *s = tfc_solver_load(config, NULL, err);
    if (!s) return err->code;
    int64_t *found;
    int n = list_states(run_dir, s->prefix, INT64_MAX, &found);
    if (n > 0)
        tfc_snapshot_path(run_dir, s->prefix, found[n - 1], TFC_SNAPSHOT_STATE, state, size);
    free(found);
    tfc_solver_free(s);
    return TFC_OK;
}
