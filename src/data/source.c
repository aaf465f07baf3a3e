/* What every source shares: freeing (with its class names), class names, the label range
 * check, the `on_error` choices, and resolving a source's files against the solver's
 * folder. */
#include <stdlib.h>
#include <string.h>

#include "data/internal.h"

const char *const tfc_data_on_error_names[] = {
    [ON_ERROR_FAIL] = "fail", [ON_ERROR_SKIP] = "skip", [ON_ERROR_COUNT] = NULL};

void tfc_source_free(source *s)
{
    if (!s) return;
    for (int i = 0; i < s->nclasses; i++) free(s->class_names[i]);
    free(s->class_names);
    s->ops->free(s);
}

tfc_status tfc_source_set_classes(source *s, const char *const *names, int n, tfc_error *err)
{
    s->class_names = calloc((size_t)n + 1, sizeof *s->class_names);
    if (!s->class_names) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        s->class_names[i] = strdup(names[i]);
        if (!s->class_names[i]) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
        s->nclasses = i + 1;
    }
    return TFC_OK;
}

int tfc_data_labels_in_range(const tfc_tensor *labels, int num_classes, int64_t *bad_value)
{
    if (num_classes <= 0 || !labels->data || !tfc_dtype_is_int(labels->dtype)) return 1;
    int64_t n = tfc_shape_numel(&labels->shape);
    for (int64_t i = 0; i < n; i++) {
        double v = tfc_value_get(labels->data, labels->dtype, i);
        if (v < 0 || v >= num_classes) {
            *bad_value = (int64_t)v;
            return 0;
        }
    }
    return 1;
}

char *tfc_data_path_join(const char *base_dir, const char *path)
{
    size_t lp = strlen(path);
    if (path[0] == '/' || !base_dir || !*base_dir) {
        char *r = malloc(lp + 1);
        if (r) memcpy(r, path, lp + 1);
        return r;
    }
    size_t lb = strlen(base_dir);
    char *r = malloc(lb + lp + 2);
    if (!r) return NULL;
    memcpy(r, base_dir, lb);
    r[lb] = '/';
    memcpy(r + lb + 1, path, lp + 1);
    return r;
}

tfc_status tfc_data_resolve(const tfc_data_options *opt, const char **path, char **owned,
                            tfc_error *err)
{
    *owned = NULL;
    if (!*path) return TFC_OK;
    *owned = tfc_data_path_join(opt ? opt->base_dir : NULL, *path);
    if (!*owned) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    *path = *owned;
    return TFC_OK;
}
