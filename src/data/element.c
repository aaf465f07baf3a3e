/* Elements and their specs: owned component buffers, dtype names, overflow-checked sizes,
 * the hashes and keys stages derive from their arguments, and the little-endian byte buffers
 * that pipeline state is saved in (every read bounded by what is left, so a corrupt blob is
 * an error, never a crash). */
#include <stdlib.h>
#include <string.h>

#include "core/checksum.h"
#include "core/rng.h"
#include "data/internal.h"

const char *tfc_data_component_name(int comp)
{
    static const char *const names[TFC_COMP_COUNT] = {
        "features", "labels", "lengths", "input1", "input2", "input3", "input4", "input5",
        "input6", "input7", "label1", "label2", "label3", "label4", "label5", "label6",
        "label7"};
    _Static_assert(TFC_COMP_COUNT == 17, "one name per component");
    return comp >= 0 && comp < TFC_COMP_COUNT ? names[comp] : "?";
}

int tfc_input_comp(int k)
{
    return k == 0 ? TFC_COMP_FEATURES : k > 0 && k < TFC_MAX_INPUTS ? TFC_COMP_INPUT1 + k - 1 : -1;
}

int tfc_label_comp(int k)
{
    return k == 0 ? TFC_COMP_LABELS : k > 0 && k < TFC_MAX_LABELS ? TFC_COMP_LABEL1 + k - 1 : -1;
}

int tfc_data_label_of(int comp)
{
    if (comp == TFC_COMP_LABELS) return 0;
    return comp >= TFC_COMP_LABEL1 && comp < TFC_COMP_LABEL1 + TFC_MAX_LABELS - 1
               ? comp - TFC_COMP_LABEL1 + 1 : -1;
}

const char *tfc_data_spec_component_name(const tfc_element_spec *spec, int comp)
{
    for (int k = 0; spec && k < spec->ninputs && k < TFC_MAX_INPUTS; k++)
        if (tfc_input_comp(k) == comp && spec->input_names[k][0]) return spec->input_names[k];
    int k = tfc_data_label_of(comp);
    if (spec && k >= 0 && k < spec->nlabels && spec->label_names[k][0])
        return spec->label_names[k];
    return tfc_data_component_name(comp);
}

const char *const tfc_data_dtype_names[] = {
    [TFC_F32] = "float32", [TFC_F64] = "float64", [TFC_F16] = "float16", [TFC_BF16] = "bfloat16",
    [TFC_I8] = "int8",     [TFC_U8] = "uint8",    [TFC_I16] = "int16",   [TFC_U16] = "uint16",
    [TFC_I32] = "int32",   [TFC_U32] = "uint32",  [TFC_I64] = "int64",   [TFC_U64] = "uint64",
    [TFC_BOOL] = "bool",   [TFC_DTYPE_COUNT] = NULL,
};

const char *tfc_data_dtype_name(tfc_dtype dt)
{
    return (unsigned)dt < TFC_DTYPE_COUNT ? tfc_data_dtype_names[dt] : "?";
}

char *tfc_data_inputs_str(const tfc_element_spec *spec, char *buf, size_t size)
{
    int n = spec->ninputs < 1 ? 1 : spec->ninputs, k = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && i < TFC_MAX_INPUTS && (size_t)k < size; i++)
        k += snprintf(buf + k, size - (size_t)k, "%s%s", i ? ", " : "",
                      tfc_data_spec_component_name(spec, tfc_input_comp(i)));
    return buf;
}

char *tfc_data_labels_str(const tfc_element_spec *spec, char *buf, size_t size)
{
    int k = 0;
    buf[0] = '\0';
    for (int i = 0; i < spec->nlabels && i < TFC_MAX_LABELS && (size_t)k < size; i++)
        k += snprintf(buf + k, size - (size_t)k, "%s%s", i ? ", " : "",
                      tfc_data_spec_component_name(spec, tfc_label_comp(i)));
    return buf;
}

char *tfc_data_spec_str(const tfc_component_spec *c, char *buf, size_t size)
{
    if (!c->present) {
        snprintf(buf, size, "(none)");
        return buf;
    }
    char shape[160];
    if (c->shape.ndim < 0) snprintf(shape, sizeof shape, "(unknown rank)");
    else tfc_shape_str(&c->shape, shape, sizeof shape);
    snprintf(buf, size, "%s %s", tfc_data_dtype_name(c->dtype), shape);
    return buf;
}

int64_t tfc_data_bytes_checked(tfc_dtype dt, const tfc_shape *s, int64_t limit)
{
    if (s->ndim < 0 || s->ndim > TFC_MAX_DIMS || (unsigned)dt >= TFC_DTYPE_COUNT) return -1;
    int64_t n = tfc_shape_numel(s);
    int64_t es = (int64_t)tfc_dtype_size(dt);
    if (n < 0 || n > INT64_MAX / es) return -1;
    n *= es;
    return n > limit ? -1 : n;
}

size_t tfc_data_tensor_bytes(const tfc_tensor *t)
{
    if (!t->data) return 0;
    int64_t n = tfc_shape_numel(&t->shape);
    return n < 0 ? 0 : (size_t)n * tfc_dtype_size(t->dtype);
}

static void *element_alloc(tfc_element *e, int comp, tfc_dtype dtype, const tfc_shape *shape,
                           int zero)
{
    if (comp < 0 || comp >= TFC_COMP_COUNT) return NULL;
    int64_t bytes = tfc_data_bytes_checked(dtype, shape, INT64_MAX / 2);
    if (bytes < 0) return NULL;
    /* One spare byte so empty tensors still get a non-NULL buffer ("present"). */
    void *d = zero ? calloc(1, (size_t)bytes + 1) : malloc((size_t)bytes + 1);
    if (!d) return NULL;
    tfc_tensor *t = &e->comp[comp];
    free(t->data);
    t->dtype = dtype;
    t->shape = *shape;
    t->data = d;
    t->device = -1;
    return d;
}

void *tfc_element_alloc(tfc_element *e, int comp, tfc_dtype dtype, const tfc_shape *shape)
{
    return element_alloc(e, comp, dtype, shape, 1);
}

void *tfc_elem_alloc_uninit(tfc_element *e, int comp, tfc_dtype dtype, const tfc_shape *shape)
{
    return element_alloc(e, comp, dtype, shape, 0);
}

void tfc_elem_free(elem *x)
{
    for (int c = 0; c < TFC_COMP_COUNT; c++) free(x->e.comp[c].data);
    free(x->rows);
    memset(x, 0, sizeof *x);
}

void tfc_elem_move(elem *dst, elem *src)
{
    if (dst == src) return;
    tfc_elem_free(dst);
    *dst = *src;
    memset(src, 0, sizeof *src);
}

tfc_status tfc_elem_copy(elem *dst, const elem *src, tfc_error *err)
{
    memset(dst, 0, sizeof *dst);
    dst->id = src->id;
    dst->has_id = src->has_id;
    if (src->rows && (dst->rows = malloc((size_t)src->nrows * sizeof *src->rows))) {
        memcpy(dst->rows, src->rows, (size_t)src->nrows * sizeof *src->rows);
        dst->nrows = src->nrows;
    }
    for (int c = 0; c < TFC_COMP_COUNT; c++) {
        const tfc_tensor *t = &src->e.comp[c];
        if (!t->data) continue;
        void *d = tfc_element_alloc(&dst->e, c, t->dtype, &t->shape);
        if (!d) {
            tfc_elem_free(dst);
            return tfc_error_set(err, TFC_ERR_NOMEM, "cannot allocate a copy of an element");
        }
        memcpy(d, t->data, tfc_data_tensor_bytes(t));
    }
    return TFC_OK;
}

uint64_t tfc_data_hash_mix(uint64_t h, uint64_t v)
{
    return tfc_rng_key(h ^ v, 0x243F6A8885A308D3ull);
}

uint64_t tfc_data_hash_str(uint64_t h, const char *s)
{
    return tfc_data_hash_mix(h, tfc_fnv1a(TFC_FNV_INIT, s, s ? strlen(s) : 0));
}

uint64_t tfc_elem_key(uint64_t stage_key, uint64_t epoch, uint64_t index)
{
    return tfc_rng_key(tfc_rng_key(stage_key, epoch), index);
}

/* ---- state buffers ------------------------------------------------------------------------ */

void tfc_wbuf_bytes(wbuf *w, const void *b, size_t n)
{
    if (w->oom || n == 0) return;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->len + n) cap *= 2;
        unsigned char *p = realloc(w->p, cap);
        if (!p) {
            w->oom = 1;
            return;
        }
        w->p = p;
        w->cap = cap;
    }
    memcpy(w->p + w->len, b, n);
    w->len += n;
}

void tfc_wbuf_u64(wbuf *w, uint64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
    tfc_wbuf_bytes(w, b, 8);
}

const void *tfc_rbuf_bytes(rbuf *r, size_t n)
{
    if (r->bad || n > r->len - r->pos) {
        r->bad = 1;
        return NULL;
    }
    const void *p = r->p + r->pos;
    r->pos += n;
    return p;
}

uint64_t tfc_rbuf_u64(rbuf *r)
{
    const unsigned char *b = tfc_rbuf_bytes(r, 8);
    if (!b) return 0;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)b[i] << (8 * i);
    return v;
}

void tfc_wbuf_elem(wbuf *w, const elem *x, int with_data)
{
    tfc_wbuf_u64(w, (uint64_t)x->has_id);
    tfc_wbuf_u64(w, x->id.epoch);
    tfc_wbuf_u64(w, x->id.index);
    if (!with_data) return;
    tfc_wbuf_u64(w, TFC_COMP_COUNT);
    for (int c = 0; c < TFC_COMP_COUNT; c++) {
        const tfc_tensor *t = &x->e.comp[c];
        tfc_wbuf_u64(w, t->data != NULL);
        if (!t->data) continue;
        tfc_wbuf_u64(w, (uint64_t)t->dtype);
        tfc_wbuf_u64(w, (uint64_t)t->shape.ndim);
        for (int i = 0; i < t->shape.ndim; i++) tfc_wbuf_u64(w, (uint64_t)t->shape.dim[i]);
        tfc_wbuf_bytes(w, t->data, tfc_data_tensor_bytes(t));
    }
    tfc_wbuf_u64(w, x->rows ? (uint64_t)x->nrows : 0);
    for (int64_t i = 0; x->rows && i < x->nrows; i++) {
        tfc_wbuf_u64(w, x->rows[i].epoch);
        tfc_wbuf_u64(w, x->rows[i].index);
    }
}

tfc_status tfc_rbuf_elem(rbuf *r, elem *x, int with_data, tfc_error *err)
{
    memset(x, 0, sizeof *x);
    x->has_id = tfc_rbuf_u64(r) != 0;
    x->id.epoch = tfc_rbuf_u64(r);
    x->id.index = tfc_rbuf_u64(r);
    /* version 3 counts the components (the inputs came after them: 10 before the further
     * labels, which come last; such blobs read as they are); 1 and 2 held three */
    uint64_t ncomp = !with_data ? 0 : r->version >= 3 ? tfc_rbuf_u64(r) : 3;
    if (ncomp > TFC_COMP_COUNT) goto bad;
    for (int c = 0; c < (int)ncomp && !r->bad; c++) {
        if (!tfc_rbuf_u64(r)) continue;
        uint64_t dt = tfc_rbuf_u64(r), nd = tfc_rbuf_u64(r);
        if (r->bad || dt >= TFC_DTYPE_COUNT || nd > TFC_MAX_DIMS) goto bad;
        tfc_shape s = {.ndim = (int)nd};
        for (int i = 0; i < s.ndim; i++) {
            uint64_t d = tfc_rbuf_u64(r);
            if (d > (uint64_t)INT64_MAX) goto bad;
            s.dim[i] = (int64_t)d;
        }
        /* The bytes must be in the blob: the size is bounded by what is left of it. */
        int64_t bytes = tfc_data_bytes_checked((tfc_dtype)dt, &s, (int64_t)(r->len - r->pos));
        if (r->bad || bytes < 0) goto bad;
        void *d = tfc_element_alloc(&x->e, c, (tfc_dtype)dt, &s);
        if (!d) {
            tfc_elem_free(x);
            return tfc_error_set(err, TFC_ERR_NOMEM, "cannot allocate a saved element");
        }
        memcpy(d, tfc_rbuf_bytes(r, (size_t)bytes), (size_t)bytes);
    }
    uint64_t nrows = with_data && r->version >= 2 ? tfc_rbuf_u64(r) : 0;
    /* each row's id is 16 bytes of the blob: the count is bounded by what is left of it */
    if (nrows > (r->len - r->pos) / 16) goto bad;
    if (nrows && !r->bad) {
        x->rows = malloc((size_t)nrows * sizeof *x->rows);
        if (!x->rows) {
            tfc_elem_free(x);
            return tfc_error_set(err, TFC_ERR_NOMEM, "cannot allocate a saved element");
        }
        x->nrows = (int64_t)nrows;
        for (uint64_t i = 0; i < nrows; i++) {
            x->rows[i].epoch = tfc_rbuf_u64(r);
            x->rows[i].index = tfc_rbuf_u64(r);
        }
    }
    if (!r->bad) return TFC_OK;
bad:
    tfc_elem_free(x);
    r->bad = 1;
    return tfc_error_set(err, TFC_ERR_FORMAT, "pipeline state: a saved element is corrupt");
}
