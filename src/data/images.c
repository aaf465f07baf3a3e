/* The images source: PNG and JPEG files listed in a file of `path label` lines (paths
 * relative to the list) or found in a folder with one sub-folder per class (sorted names
 * give the class indices, like Keras's image_dataset_from_directory); or, with `masks`, a
 * folder of images whose labels are segmentation masks, one PNG per image of the same name
 * in the masks folder (a class per pixel, as the Oxford-IIIT Pets' trimaps). Files are
 * read, and decoded unless `decode: false`, when a record is requested, so a parallel map
 * over this source reads and decodes in parallel. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fileio.h"
#include "data/internal.h"

#define IMAGE_MAX_FILE_BYTES ((size_t)256 << 20)
#define LIST_MAX_BYTES ((size_t)1 << 30)

typedef struct images_args {
    const char *type;
    const char *list, *directory;
    int channels;
    int decode;
    int max_side;
    double max_pixels;
    int num_classes;
    int on_error;
    const char *masks;
    int mask_offset;
    const tfc_node *split;
    tfc_split_rule rule; /* from split (images_check) */
    const tfc_node *classes; /* `classes:` (from_config): with directory, the folders */
    const char *key;         /* the source's key path (images_open) */
} images_args;

typedef struct image_item {
    char *path;
    int32_t label;
    char *mask; /* the mask's path (masks), else NULL */
} image_item;

typedef struct images_source {
    source base;
    image_item *items;
    int64_t n, cap;
    int decode, channels;
    tfc_image_limits lim;
    tfc_image_pool *pool;
    size_t last_len; /* the size of a file read lately: the next read's first guess */
    int mask_offset, num_classes;
} images_source;

/* Item i's mask as its labels: int32 (H, W), each pixel's value plus the offset, in
 * [0, num_classes) when that is given; the image's height and width when it is decoded. */
static tfc_status mask_labels(images_source *im, const image_item *it, tfc_element *e,
                              tfc_error *err)
{
    char *buf;
    size_t len;
    tfc_status st = tfc_file_read_guess(it->mask, IMAGE_MAX_FILE_BYTES, 4096, &buf, &len, err);
    if (st) return st;
    tfc_tensor m;
    st = tfc_image_decode_with(im->pool, buf, len, it->mask, 1, &im->lim, &m, err);
    free(buf);
    if (st) return st;
    const tfc_tensor *f = &e->comp[TFC_COMP_FEATURES];
    const int64_t h = m.shape.dim[0], w = m.shape.dim[1];
    if (im->decode && (f->shape.dim[0] != h || f->shape.dim[1] != w)) {
        free(m.data);
        return tfc_error_set(err, TFC_ERR_DATA, "%s: a mask of %lld x %lld for an image of "
                             "%lld x %lld (%s)", it->mask, (long long)h, (long long)w,
                             (long long)f->shape.dim[0], (long long)f->shape.dim[1], it->path);
    }
    tfc_shape ls = {.ndim = 2, .dim = {h, w}};
    int32_t *l = tfc_element_alloc(e, TFC_COMP_LABELS, TFC_I32, &ls);
    if (!l) {
        free(m.data);
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    const uint8_t *px = m.data;
    for (int64_t k = 0; k < h * w; k++) {
        const int32_t v = (int32_t)px[k] + im->mask_offset;
        if (v < 0 || (im->num_classes > 0 && v >= im->num_classes)) {
            const int value = px[k];
            free(m.data);
            return tfc_error_set(err, TFC_ERR_DATA, "%s: pixel (%lld, %lld) is class %d "
                                 "(value %d%+d), outside [0, %d)", it->mask,
                                 (long long)(k / w), (long long)(k % w), v, value,
                                 im->mask_offset, im->num_classes > 0 ? im->num_classes : 256);
        }
        l[k] = v;
    }
    free(m.data);
    return TFC_OK;
}

static tfc_status images_get(source *s, int64_t i, tfc_element *e, tfc_error *err)
{
    images_source *im = (images_source *)s;
    const image_item *it = &im->items[i];
    char *buf;
    size_t len;
    /* Image files of one data set tend to be of similar sizes: a buffer a quarter larger
     * than the last one read usually holds the next at once (workers race on the guess,
     * harmlessly). */
    size_t guess = __atomic_load_n(&im->last_len, __ATOMIC_RELAXED);
    tfc_status st = tfc_file_read_guess(it->path, IMAGE_MAX_FILE_BYTES, guess + guess / 4 + 64,
                                        &buf, &len, err);
    if (st) return st;
    __atomic_store_n(&im->last_len, len, __ATOMIC_RELAXED);
    if (im->decode) {
        tfc_tensor t;
        st = tfc_image_decode_with(im->pool, buf, len, it->path, im->channels, &im->lim, &t, err);
        free(buf);
        if (st) return st;
        e->comp[TFC_COMP_FEATURES] = t;
    } else { /* the bytes as read become the element's (malloc'd, freed with it) */
        tfc_tensor *t = &e->comp[TFC_COMP_FEATURES];
        free(t->data);
        *t = (tfc_tensor){TFC_U8, {.ndim = 1, .dim = {(int64_t)len}}, buf, -1};
    }
    if (it->mask) return mask_labels(im, it, e, err);
    tfc_shape ls = {0};
    int32_t *l = tfc_element_alloc(e, TFC_COMP_LABELS, TFC_I32, &ls);
    if (!l) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    *l = it->label;
    return TFC_OK;
}

static void images_describe(const source *s, int64_t i, char *buf, size_t size)
{
    snprintf(buf, size, "%s", ((const images_source *)s)->items[i].path);
}

static int64_t images_label(const source *s, int64_t i)
{
    return ((const images_source *)s)->items[i].label;
}

static void images_free(source *s)
{
    images_source *im = (images_source *)s;
    for (int64_t i = 0; i < im->n; i++) free(im->items[i].path), free(im->items[i].mask);
    free(im->items);
    tfc_image_pool_free(im->pool);
    free(im);
}

static const source_ops images_ops = {
    .type = "images",
    .get = images_get,
    .describe = images_describe,
    .label = images_label,
    .free = images_free,
};

/* With masks: no single label per record to count or check */
static const source_ops images_masks_ops = {
    .type = "images",
    .get = images_get,
    .describe = images_describe,
    .free = images_free,
};

static int add_item(images_source *im, const char *dir, const char *name, size_t nlen,
                    int32_t label)
{
    if (im->n == im->cap) {
        int64_t cap = im->cap ? im->cap * 2 : 256;
        image_item *it = realloc(im->items, (size_t)cap * sizeof *it);
        if (!it) return -1;
        im->items = it;
        im->cap = cap;
    }
    size_t dl = dir && name[0] != '/' ? strlen(dir) : 0;
    char *p = malloc(dl + 1 + nlen + 1);
    if (!p) return -1;
    if (dl) {
        memcpy(p, dir, dl);
        p[dl] = '/';
        memcpy(p + dl + 1, name, nlen);
        p[dl + 1 + nlen] = 0;
    } else {
        memcpy(p, name, nlen);
        p[nlen] = 0;
    }
    im->items[im->n++] = (image_item){p, label, NULL};
    return 0;
}

static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 1;
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, slash ? path : ".", n);
    d[n] = 0;
    return d;
}

static tfc_status read_list(images_source *im, const images_args *a, tfc_error *err)
{
    char *text;
    size_t len;
    tfc_status st = tfc_file_read_all(a->list, LIST_MAX_BYTES, &text, &len, err);
    if (st) return st;
    char *dir = dir_of(a->list);
    if (!dir) {
        free(text);
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    char *p = text, *end = text + len;
    for (int line = 1; p < end && !st; line++) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *le = nl ? nl : end;
        while (le > p && isspace((unsigned char)le[-1])) le--;
        char *s = p;
        while (s < le && isspace((unsigned char)*s)) s++;
        p = nl ? nl + 1 : end;
        if (s == le || *s == '#') continue;
        /* The label is the last field, so paths may hold spaces. */
        char *sp = le;
        while (sp > s && !isspace((unsigned char)sp[-1])) sp--;
        char *pe = sp;
        while (pe > s && isspace((unsigned char)pe[-1])) pe--;
        char lab[24];
        size_t ll = (size_t)(le - sp);
        char *lend = NULL;
        long v = 0;
        if (pe > s && ll > 0 && ll < sizeof lab) {
            memcpy(lab, sp, ll);
            lab[ll] = 0;
            v = strtol(lab, &lend, 10);
        }
        if (!lend || *lend || v < 0 || v > 0x7fffffff) {
            st = tfc_error_at(err, TFC_ERR_DATA, a->list, line, 1, NULL, NULL,
                              "expected `path label` with a class index >= 0");
            break;
        }
        if (a->num_classes > 0 && v >= a->num_classes) {
            if (a->on_error == ON_ERROR_SKIP) {
                char where[300];
                snprintf(where, sizeof where, "%s:%d", a->list, line);
                tfc_source_name_skip(&im->base, where);
                im->base.skipped++;
                continue;
            }
            st = tfc_error_at(err, TFC_ERR_DATA, a->list, line, (int)(sp - s) + 1, NULL, NULL,
                              "label %ld is out of range [0, %d)", v, a->num_classes);
            break;
        }
        if (add_item(im, dir, s, (size_t)(pe - s), (int32_t)v))
            st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    free(dir);
    free(text);
    if (!st && im->n == 0) st = tfc_error_set(err, TFC_ERR_DATA, "%s: lists no images", a->list);
    return st;
}

static int image_name(const char *n)
{
    const char *dot = strrchr(n, '.');
    return n[0] != '.' && dot && (!strcasecmp(dot, ".png") || !strcasecmp(dot, ".jpg") ||
                                  !strcasecmp(dot, ".jpeg"));
}

static int add_class_item(source *s, const char *dir, const char *name, int32_t label)
{
    return add_item((images_source *)s, dir, name, strlen(name), label);
}

static tfc_status read_dir(images_source *im, const images_args *a, tfc_error *err)
{
    return tfc_data_class_folders(&im->base, a->directory, image_name, ".png/.jpg/.jpeg",
                                  a->num_classes, a->classes, a->key, add_class_item, err);
}

/* masks: every image of the flat folder `directory` (sorted names) with the mask of its
 * name in `masks`: STEM.png (the image's own extension also taken, and .PNG) */
static tfc_status read_masks(images_source *im, const images_args *a, tfc_error *err)
{
    int nf;
    char **files = tfc_data_list_dir(a->directory, image_name, &nf, err);
    if (!files) return err && err->code ? err->code : TFC_ERR_IO;
    tfc_status st = TFC_OK;
    for (int i = 0; i < nf && !st; i++) {
        const char *dot = strrchr(files[i], '.');
        const int stem = (int)(dot - files[i]);
        const char *const exts[] = {".png", ".PNG", dot};
        char path[4096] = "";
        struct stat sb;
        int found = 0;
        for (int k = 0; k < 3 && !found; k++) {
            snprintf(path, sizeof path, "%s/%.*s%s", a->masks, stem, files[i], exts[k]);
            found = stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
        }
        if (!found) {
            snprintf(path, sizeof path, "%s/%.*s.png", a->masks, stem, files[i]);
            if (a->on_error == ON_ERROR_SKIP) {
                tfc_source_name_skip(&im->base, files[i]);
                im->base.skipped++;
                continue;
            }
            st = tfc_error_set(err, TFC_ERR_DATA, "%s/%s: no mask %s", a->directory, files[i],
                               path);
            break;
        }
        if (add_item(im, a->directory, files[i], strlen(files[i]), -1) ||
            !(im->items[im->n - 1].mask = strdup(path)))
            st = tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    tfc_data_free_names(files, nf);
    if (!st && im->n == 0)
        st = tfc_error_set(err, TFC_ERR_DATA, "%s: no .png/.jpg/.jpeg files", a->directory);
    return st;
}

static tfc_status load_images(source **out, const images_args *a, tfc_error *err)
{
    *out = NULL;
    images_source *im = calloc(1, sizeof *im);
    if (!im) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    im->base.ops = a->masks ? &images_masks_ops : &images_ops;
    im->mask_offset = a->mask_offset;
    im->num_classes = a->num_classes;
    im->base.get_may_fail = 1;
    im->base.skip_errors = a->on_error == ON_ERROR_SKIP;
    im->decode = a->decode;
    im->channels = a->channels;
    im->lim.max_side = a->max_side;
    im->lim.max_pixels = (int64_t)a->max_pixels;
    if ((a->decode || a->masks) && !(im->pool = tfc_image_pool_new())) {
        tfc_source_free(&im->base);
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    tfc_status st = a->list    ? read_list(im, a, err)
                    : a->masks ? read_masks(im, a, err)
                               : read_dir(im, a, err);
    int64_t kept = 0; /* split: the records of this part, in order */
    for (int64_t i = 0; !st && i < im->n; i++) {
        if (tfc_data_split_keeps(&a->rule, i)) im->items[kept++] = im->items[i];
        else free(im->items[i].path), free(im->items[i].mask);
    }
    if (!st) im->n = kept;
    if (!st && kept == 0)
        st = tfc_error_set(err, TFC_ERR_DATA, "%s: the split leaves no images",
                           a->list ? a->list : a->directory);
    /* a list's or masks' classes: new names for its labels, as for any source */
    if (!st && a->classes && (a->list || a->masks))
        st = tfc_source_rename_classes(&im->base, a->classes, a->key, err);
    if (st) {
        tfc_source_free(&im->base);
        return st;
    }
    source *s = &im->base;
    s->count = im->n;
    if (im->decode)
        s->spec.comp[TFC_COMP_FEATURES] = (tfc_component_spec){
            1, TFC_U8, {.ndim = 3, .dim = {-1, -1, a->channels ? a->channels : -1}}};
    else
        s->spec.comp[TFC_COMP_FEATURES] = (tfc_component_spec){1, TFC_U8, {.ndim = 1, .dim = {-1}}};
    s->spec.comp[TFC_COMP_LABELS] =
        (tfc_component_spec){1, TFC_I32, {.ndim = a->masks ? 2 : 0, .dim = {-1, -1}}};
    *out = s;
    return TFC_OK;
}

/* ---- the source ------------------------------------------------------------------------ */

static const tfc_field images_fields[] = {
    SOURCE_TYPE_FIELD(images_args),
    {"list", TFC_F_STRING, offsetof(images_args, list), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "a file of lines `path label` (paths relative to it)"},
    {"directory", TFC_F_STRING, offsetof(images_args, directory), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "a folder with one sub-folder of images per class (sorted names)"},
    {"channels", TFC_F_INT, offsetof(images_args, channels), "3", 0, 4, NULL,
     "1 grey, 3 RGB, 4 RGBA; 0 keeps what the file holds"},
    {"decode", TFC_F_BOOL, offsetof(images_args, decode), "true", TFC_UNBOUNDED, NULL,
     "false yields the file bytes for a parallel decode_image map"},
    {"max_side", TFC_F_INT, offsetof(images_args, max_side), "16384", 1, 1 << 30, NULL,
     "largest width or height accepted"},
    {"max_pixels", TFC_F_FLOAT, offsetof(images_args, max_pixels), "268435456", 1, 1e18, NULL,
     "largest width x height accepted"},
    SOURCE_NUM_CLASSES_FIELD(images_args),
    SOURCE_ON_ERROR_FIELD(images_args),
    {"masks", TFC_F_STRING, offsetof(images_args, masks), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "a folder of segmentation masks, one PNG per image of `directory` (then a flat folder) "
     "under its name: the labels, a class per pixel"},
    {"mask_offset", TFC_F_INT, offsetof(images_args, mask_offset), "0", -255, 255, NULL,
     "added to every mask value (-1 for masks whose classes start at 1)"},
    {"split", TFC_F_NODE, offsetof(images_args, split), TFC_NO_DEFAULT, TFC_UNBOUNDED, NULL,
     "{every: N, part: train|test, offset: K}: image r is test when r % N == K"},
    {NULL},
};

static tfc_status images_check(void *args, const tfc_node *at, const char *key, tfc_error *err)
{
    images_args *a = args;
    if (tfc_data_split_read(a->split, key, &a->rule, err)) return TFC_ERR_CONFIG;
    if (!a->list == !a->directory)
        return tfc_node_error(err, TFC_ERR_CONFIG, at, key, "give exactly one of `list` and "
                              "`directory`");
    if (a->masks && a->list)
        return tfc_node_error(err, TFC_ERR_CONFIG, at, key, "masks: takes a `directory` of "
                              "images (a flat folder), not a `list`");
    if (a->mask_offset && !a->masks)
        return tfc_node_error(err, TFC_ERR_CONFIG, at, key, "mask_offset: needs `masks`");
    return TFC_OK;
}

static tfc_status images_open(const void *args, const tfc_data_options *opt, const char *key,
                              source **out, tfc_error *err)
{
    images_args a = *(const images_args *)args;
    char *list, *directory = NULL, *masks = NULL;
    tfc_status st = tfc_data_resolve(opt, &a.list, &list, err);
    if (!st) st = tfc_data_resolve(opt, &a.directory, &directory, err);
    if (!st) st = tfc_data_resolve(opt, &a.masks, &masks, err);
    if (opt && opt->num_classes) a.num_classes = opt->num_classes;
    a.key = key;
    if (!st) st = load_images(out, &a, err);
    free(list);
    free(directory);
    free(masks);
    return st;
}

const source_def tfc_source_images = {
    .name = "images",
    .help = "PNG and JPEG files",
    .fields = images_fields,
    .args_size = sizeof(images_args),
    .check = images_check,
    .open = images_open,
    .classes_offset = offsetof(images_args, classes),
};
