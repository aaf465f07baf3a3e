/* CPU convolutions through oneDNN (Debian's libdnnl), when the build has it: its JIT kernels
 * for the machine's instruction set (AVX-512, AVX2, SSE4.1, chosen at run time) run
 * forward, backward-data and backward-filter 1.3-2x faster than im2col + OpenBLAS GEMM on
 * the zoo's layers (bench_conv, docs/cpu.md). Tensors stay in tfc's layouts: activations
 * NHWC, weights Keras's [kh, kw, c, f] (oneDNN's hwio); each call reorders the weights to
 * (or the filter gradient from) the blocked layout the primitive picked, which costs
 * little beside the convolution. Primitives are built once per (op, shape) and kept in a
 * small cache on the backend; building one JIT-compiles its kernel (milliseconds).
 *
 * tfc's backward ops accumulate (dx += ..., dw += ...) where oneDNN overwrites, so their
 * result goes to the workspace and is added. oneDNN's scratchpad lives in the workspace
 * too (user mode), so conv_workspace accounts for every byte a call needs; a call on a
 * shape bigger than any the caller asked the workspace of (none here: layers plan at their
 * largest batch) takes a temporary buffer instead of overrunning.
 *
 * oneDNN's OpenMP build runs on the same libgomp pool as OpenBLAS and tfc's loops, with as
 * many threads as the calling thread's omp_get_max_threads(): set to the backend's count
 * around each build and call. With a fixed thread count its CPU results repeat bit for bit
 * (static partitioning, reductions in a fixed order; test cpu_ops.conv_threads_repeat).
 * TFC_CPU_CONV=im2col in the environment, read when a backend is created, turns it off. */
#include <pthread.h>
#include <stdlib.h>

#include "cpu/cpu_internal.h"

#ifdef TFC_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>

#define CACHE_SLOTS 96
#define PLAN_SLOTS 64

typedef struct prim {
    int used, ok;
    tfc_cpu_conv_op op;
    tfc_conv_desc d;
    dnnl_primitive_t conv, reorder;                /* reorder NULL: hwio is the layout */
    dnnl_memory_t in, wts, wts_prim, out, scratch; /* handles set per call */
    size_t scratch_bytes, out_bytes;               /* out_bytes: accumulate buffer */
} prim;

typedef struct plan {
    tfc_conv_desc d; /* n = 0: every batch of this shape */
    size_t bytes;    /* the largest workspace handed out for it */
} plan;

struct tfc_cpu_dnnl {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    pthread_mutex_t lock;
    prim cache[CACHE_SLOTS];
    int next; /* round-robin victim */
    plan plans[PLAN_SLOTS];
    int nplans;
};

static int same_desc(const tfc_conv_desc *a, const tfc_conv_desc *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

static void prim_release(prim *p)
{
    if (p->conv) dnnl_primitive_destroy(p->conv);
    if (p->reorder) dnnl_primitive_destroy(p->reorder);
    if (p->wts_prim && p->wts_prim != p->wts) dnnl_memory_destroy(p->wts_prim);
    dnnl_memory_t mems[] = {p->in, p->wts, p->out, p->scratch};
    for (size_t i = 0; i < sizeof mems / sizeof *mems; i++)
        if (mems[i]) dnnl_memory_destroy(mems[i]);
    memset(p, 0, sizeof *p);
}

static dnnl_memory_t handle_mem(tfc_cpu_dnnl *s, const dnnl_memory_desc_t *md)
{
    dnnl_memory_t m = NULL;
    if (dnnl_memory_create(&m, md, s->engine, DNNL_MEMORY_NONE) != dnnl_success) return NULL;
    return m;
}

/* Builds the primitive for op on d into p (p->ok = 0 where oneDNN cannot). The forward
 * primitive descriptor is the hint the backward ones need. */
static void prim_build(tfc_cpu_dnnl *s, prim *p, tfc_cpu_conv_op op, const tfc_conv_desc *d)
{
    memset(p, 0, sizeof *p);
    p->used = 1;
    p->op = op;
    p->d = *d;
    dnnl_memory_desc_t md_x, md_w, md_wany, md_y;
    dnnl_dims_t xd = {d->n, d->c, d->h, d->w}, wd = {d->f, d->c, d->kh, d->kw},
                yd = {d->n, d->f, d->oh, d->ow};
    dnnl_dims_t strides = {d->sh, d->sw}, dil = {d->dh - 1, d->dw - 1};
    dnnl_dims_t pl = {d->pad_top, d->pad_left};
    /* the padding after the image that the output size implies (0 where the last rows are
     * simply not reached, as in VALID with a stride) */
    int64_t pb = (int64_t)(d->oh - 1) * d->sh + (int64_t)(d->kh - 1) * d->dh + 1 - d->h - d->pad_top;
    int64_t pr = (int64_t)(d->ow - 1) * d->sw + (int64_t)(d->kw - 1) * d->dw + 1 - d->w - d->pad_left;
    dnnl_dims_t pad_r = {pb > 0 ? pb : 0, pr > 0 ? pr : 0};
    if (dnnl_memory_desc_init_by_tag(&md_x, 4, xd, dnnl_f32, dnnl_nhwc) ||
        dnnl_memory_desc_init_by_tag(&md_w, 4, wd, dnnl_f32, dnnl_hwio) ||
        dnnl_memory_desc_init_by_tag(&md_wany, 4, wd, dnnl_f32, dnnl_format_tag_any) ||
        dnnl_memory_desc_init_by_tag(&md_y, 4, yd, dnnl_f32, dnnl_nhwc))
        return;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t fpd = NULL, pd = NULL, rpd = NULL;
    dnnl_convolution_desc_t fwd, cd;
    if (dnnl_primitive_attr_create(&attr) ||
        dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) ||
        dnnl_dilated_convolution_forward_desc_init(&fwd, dnnl_forward_training,
                                                   dnnl_convolution_direct, &md_x, &md_wany,
                                                   NULL, &md_y, strides, dil, pl, pad_r) ||
        dnnl_primitive_desc_create(&fpd, &fwd, attr, s->engine, NULL))
        goto done;
    dnnl_query_t wq = dnnl_query_weights_md;
    const dnnl_memory_desc_t *in_md = &md_x, *out_md = &md_y;
    if (op == TFC_CPU_CONV_FORWARD) {
        pd = fpd;
        fpd = NULL;
    } else if (op == TFC_CPU_CONV_DATA) {
        if (dnnl_dilated_convolution_backward_data_desc_init(&cd, dnnl_convolution_direct,
                                                             &md_x, &md_wany, &md_y, strides,
                                                             dil, pl, pad_r) ||
            dnnl_primitive_desc_create(&pd, &cd, attr, s->engine, fpd))
            goto done;
        in_md = &md_y;
        out_md = &md_x;
    } else {
        if (dnnl_dilated_convolution_backward_weights_desc_init(
                &cd, dnnl_convolution_direct, &md_x, &md_wany, NULL, &md_y, strides, dil, pl,
                pad_r) ||
            dnnl_primitive_desc_create(&pd, &cd, attr, s->engine, fpd))
            goto done;
        wq = dnnl_query_diff_weights_md;
    }
    const dnnl_memory_desc_t *pw = dnnl_primitive_desc_query_md(pd, wq, 0);
    const dnnl_memory_desc_t *sm = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    p->scratch_bytes = sm ? dnnl_memory_desc_get_size(sm) : 0;
    if (!pw || dnnl_primitive_create(&p->conv, pd)) goto done;
    p->in = handle_mem(s, in_md);
    p->wts = handle_mem(s, &md_w);
    if (op == TFC_CPU_CONV_FILTER) { /* `in` is x, `out` is dy (an input too) */
        p->out = handle_mem(s, &md_y);
        p->out_bytes = dnnl_memory_desc_get_size(&md_w);
    } else {
        p->out = handle_mem(s, out_md);
        p->out_bytes = op == TFC_CPU_CONV_DATA ? dnnl_memory_desc_get_size(out_md) : 0;
    }
    p->scratch = p->scratch_bytes ? handle_mem(s, sm) : NULL;
    if (!p->in || !p->wts || !p->out || (p->scratch_bytes && !p->scratch)) goto done;
    p->wts_prim = p->wts;
    if (!dnnl_memory_desc_equal(pw, &md_w)) {
        /* the primitive's weights live with it: a copy in its layout, made per call */
        if (dnnl_memory_create(&p->wts_prim, pw, s->engine, DNNL_MEMORY_ALLOCATE)) {
            p->wts_prim = NULL;
            goto done;
        }
        dnnl_status_t st = op == TFC_CPU_CONV_FILTER
                               ? dnnl_reorder_primitive_desc_create(&rpd, pw, s->engine, &md_w,
                                                                    s->engine, NULL)
                               : dnnl_reorder_primitive_desc_create(&rpd, &md_w, s->engine, pw,
                                                                    s->engine, NULL);
        if (st || dnnl_primitive_create(&p->reorder, rpd)) goto done;
    }
    p->ok = 1;
done:
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (fpd) dnnl_primitive_desc_destroy(fpd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (!p->ok) {
        prim_release(p);
        p->used = 1; /* remembered as unsupported */
        p->op = op;
        p->d = *d;
    }
}

/* The cached primitive for (op, d), built on first use; caller holds the lock and has set
 * the OpenMP thread count. */
static prim *lookup(tfc_cpu_dnnl *s, tfc_cpu_conv_op op, const tfc_conv_desc *d)
{
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (s->cache[i].used && s->cache[i].op == op && same_desc(&s->cache[i].d, d))
            return &s->cache[i];
    prim *p = &s->cache[s->next];
    s->next = (s->next + 1) % CACHE_SLOTS;
    prim_release(p);
    prim_build(s, p, op, d);
    return p;
}

/* Bytes of workspace p needs: the accumulate buffer, then the scratchpad, 64-aligned. */
static size_t prim_bytes(const prim *p)
{
    return ((p->out_bytes + 63) & ~(size_t)63) + p->scratch_bytes;
}

static plan *find_plan(tfc_cpu_dnnl *s, const tfc_conv_desc *d)
{
    tfc_conv_desc key = *d;
    key.n = 0;
    for (int i = 0; i < s->nplans; i++)
        if (same_desc(&s->plans[i].d, &key)) return &s->plans[i];
    if (s->nplans == PLAN_SLOTS) return NULL;
    plan *p = &s->plans[s->nplans++];
    p->d = key;
    p->bytes = 0;
    return p;
}

tfc_cpu_dnnl *tfc_cpu_dnnl_create(void)
{
    const char *e = getenv("TFC_CPU_CONV");
    if (e && strcmp(e, "im2col") == 0) return NULL;
    tfc_cpu_dnnl *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    if (dnnl_engine_create(&s->engine, dnnl_cpu, 0) ||
        dnnl_stream_create(&s->stream, s->engine, dnnl_stream_default_flags)) {
        if (s->engine) dnnl_engine_destroy(s->engine);
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->lock, NULL);
    return s;
}

void tfc_cpu_dnnl_free(tfc_cpu_dnnl *s)
{
    if (!s) return;
    for (int i = 0; i < CACHE_SLOTS; i++) prim_release(&s->cache[i]);
    dnnl_stream_destroy(s->stream);
    dnnl_engine_destroy(s->engine);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* oneDNN sizes its teams by the calling thread's OpenMP setting. */
static int enter(tfc_backend *be, tfc_cpu_dnnl *s)
{
    pthread_mutex_lock(&s->lock);
    int saved = omp_get_max_threads();
    if (saved != be->threads) omp_set_num_threads(be->threads);
    return saved;
}

static void leave(tfc_backend *be, tfc_cpu_dnnl *s, int saved)
{
    if (saved != be->threads) omp_set_num_threads(saved);
    pthread_mutex_unlock(&s->lock);
}

int tfc_cpu_dnnl_conv_workspace(tfc_backend *be, const tfc_conv_desc *d, size_t *bytes)
{
    tfc_cpu_dnnl *s = be->impl;
    if (!s || d->n <= 0) return 0;
    int saved = enter(be, s), ok = 1;
    size_t need = 0;
    for (int op = 0; op < 3 && ok; op++) {
        prim *p = lookup(s, (tfc_cpu_conv_op)op, d);
        ok = p->ok;
        if (prim_bytes(p) > need) need = prim_bytes(p);
    }
    if (ok) {
        plan *pl = find_plan(s, d);
        if (pl && need > pl->bytes) pl->bytes = need;
        *bytes = need;
    }
    leave(be, s, saved);
    return ok;
}

int tfc_cpu_dnnl_conv(tfc_backend *be, tfc_cpu_conv_op op, const tfc_conv_desc *d,
                      const float *in, const float *w, float *out, void *ws)
{
    tfc_cpu_dnnl *s = be->impl;
    if (!s || d->n <= 0) return 0;
    int saved = enter(be, s);
    prim *p = lookup(s, op, d);
    if (!p->ok) {
        leave(be, s, saved);
        return 0;
    }
    /* the workspace the caller was told of for this shape, or a temporary one */
    const plan *pl = find_plan(s, d);
    void *tmp = NULL;
    if (!ws || !pl || pl->bytes < prim_bytes(p)) {
        TFC_ASSERT(posix_memalign(&tmp, 64, prim_bytes(p) + 64) == 0);
        ws = tmp;
    }
    char *base = ws;
    float *acc = p->out_bytes ? (float *)base : NULL;
    void *scratch = base + ((p->out_bytes + 63) & ~(size_t)63);
    float *wts = op == TFC_CPU_CONV_FILTER ? acc : (float *)w;
    float *dst = op == TFC_CPU_CONV_DATA ? acc : out;
    dnnl_memory_set_data_handle(p->in, (void *)in);
    dnnl_memory_set_data_handle(p->wts, wts);
    dnnl_memory_set_data_handle(p->out, op == TFC_CPU_CONV_FILTER ? (void *)w : dst);
    if (p->scratch) dnnl_memory_set_data_handle(p->scratch, scratch);
    if (p->reorder && op != TFC_CPU_CONV_FILTER) {
        dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, p->wts}, {DNNL_ARG_TO, p->wts_prim}};
        TFC_ASSERT(dnnl_primitive_execute(p->reorder, s->stream, 2, ra) == dnnl_success);
    }
    dnnl_exec_arg_t a[4];
    int na = 0;
    switch (op) {
    case TFC_CPU_CONV_FORWARD:
        a[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, p->in};
        a[na++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, p->wts_prim};
        a[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, p->out};
        break;
    case TFC_CPU_CONV_DATA:
        a[na++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, p->in};
        a[na++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, p->wts_prim};
        a[na++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_SRC, p->out};
        break;
    case TFC_CPU_CONV_FILTER:
        a[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, p->in};
        a[na++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, p->out};
        a[na++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_WEIGHTS, p->wts_prim};
        break;
    }
    if (p->scratch) a[na++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, p->scratch};
    TFC_ASSERT(dnnl_primitive_execute(p->conv, s->stream, na, a) == dnnl_success);
    if (p->reorder && op == TFC_CPU_CONV_FILTER) {
        dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, p->wts_prim}, {DNNL_ARG_TO, p->wts}};
        TFC_ASSERT(dnnl_primitive_execute(p->reorder, s->stream, 2, ra) == dnnl_success);
    }
    TFC_ASSERT(dnnl_stream_wait(s->stream) == dnnl_success);
    leave(be, s, saved);
    /* the accumulation oneDNN does not do */
    if (op != TFC_CPU_CONV_FORWARD) tfc_cpu_axpy(be, (int64_t)(p->out_bytes / 4), 1.0f, acc, out);
    free(tmp);
    return 1;
}

#else /* no oneDNN in this build: every convolution takes im2col + GEMM */

tfc_cpu_dnnl *tfc_cpu_dnnl_create(void)
{
    return NULL;
}

void tfc_cpu_dnnl_free(tfc_cpu_dnnl *s)
{
}

int tfc_cpu_dnnl_conv_workspace(tfc_backend *be, const tfc_conv_desc *d, size_t *bytes)
{
    return 0;
}

int tfc_cpu_dnnl_conv(tfc_backend *be, tfc_cpu_conv_op op, const tfc_conv_desc *d,
                      const float *in, const float *w, float *out, void *ws)
{
    return 0;
}

#endif
