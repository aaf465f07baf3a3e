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
 * largest batch) takes a temporary buffer instead of overrunning. So does a call whose
 * primitive carries the layer's epilogue as post-ops (where oneDNN's are exact: AVX-512):
 * conv_workspace sizes the bare primitive, and the post-ops' scratchpad can be larger
 * (fashion_cnn_bn's second convolution at batch 3: 7,143,936 bytes against 7,108,608). On
 * a frozen backend that buffer is kept (spare), so that an inference call allocates, and
 * maps, nothing after its first.
 *
 * oneDNN's OpenMP build runs on the same libgomp pool as OpenBLAS and tfc's loops, with as
 * many threads as the calling thread's omp_get_max_threads(): set to the backend's count
 * around each build and call. A training batch is not handed to oneDNN whole: its chunks
 * (about four per thread) are claimed by the threads as they finish, each run by a
 * primitive built for one thread, so that a thread descheduled by another process on a
 * busy machine delays one chunk and not the whole op (oneDNN splits work statically). Small
 * batches go whole to one call on all threads. With a fixed thread count the results
 * repeat bit for bit: the split depends on the batch and thread count only, the filter
 * gradient's per-chunk parts are summed in chunk order (test cpu_ops.conv_threads_repeat).
 * 3x3 convolutions at stride 1 with 32 or more channels (multiples of 16) run on chunks as
 * Winograd's F(4x4, 3x3) where the machine has oneDNN's kernel for it (AVX-512): about half
 * the multiplications, through copies of the activations in the blocked layout it takes
 * (wino_fits says where it paid, conv_execute does the copies); its results differ from
 * the direct kernels' by rounding (~1e-6 of the output's scale).
 *
 * TFC_CPU_CONV=im2col in the environment, read when a backend is created, turns oneDNN off;
 * TFC_CPU_CONV=direct keeps oneDNN without Winograd. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "cpu/cpu_internal.h"

#ifdef TFC_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>

#define CACHE_SLOTS 96
#define FORWARD_CHUNK 32
/* output tiles per chunk from which the inference Winograd kernel beat the direct one
 * (fashion_resnet's 7x7x128 layers at chunks of 4 images: 16 tiles; docs/cpu.md) */
#define WINO_INFER_TILES 16
#define KEPT 8
#define PLAN_SLOTS 64

typedef struct prim {
    int used, ok;
    int single; /* built for one thread, to run on a chunk of the batch */
    int bias, bn, sum, relu; /* forward: bias, normalisation, residual, ReLU in the epilogue */
    int infer;               /* forward for inference passes (Winograd's: oneDNN's inference one) */
    tfc_cpu_conv_op op;
    tfc_conv_desc d;
    dnnl_primitive_t conv, reorder;                /* reorder NULL: hwio is the layout */
    dnnl_memory_t in, wts, wts_prim, out, scratch, b; /* handles set per call */
    /* Winograd: the convolution's input and output (y, dy or dx) in the blocked layout it
     * takes, at the front of the call's buffer; reordered from and to tfc's NHWC */
    int wino;
    int out_16c; /* its output is nChw16c: a pooling can read it there (tfc_cpu_pool_forward_16c) */
    dnnl_primitive_t re_in, re_out;
    dnnl_memory_t in_b, out_b;
    size_t in_b_bytes, out_b_bytes;
    dnnl_memory_t scale, shift;                       /* bn's a and b (post-ops 0, 1) */
    size_t scratch_bytes, out_bytes;               /* out_bytes: accumulate buffer */
    size_t wts_prim_bytes;                         /* the primitive's weight layout, if not hwio */
    /* frozen backend: the weights of the layers of this shape, reordered once each */
    struct {
        const float *src;
        dnnl_memory_t mem;
    } kept[KEPT];
    int next_kept; /* round-robin victim */
} prim;

typedef struct plan {
    tfc_conv_desc d; /* n = 0: every batch of this shape */
    size_t bytes;    /* the largest workspace handed out for it */
} plan;

struct tfc_cpu_dnnl {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_stream_t *streams; /* one per thread of a chunked call */
    int nstreams;
    pthread_mutex_t lock;
    prim cache[CACHE_SLOTS];
    int next; /* round-robin victim */
    plan plans[PLAN_SLOTS];
    int nplans;
    float *aff; /* a normalisation's a and b for the call in progress */
    int naff;
    void *spare; /* a frozen backend's workspace for calls its plans fall short of */
    size_t nspare;
    int wino; /* Winograd where it fits (TFC_CPU_CONV=direct: never) */
    /* oneDNN's post-ops give the separate ops' values to the bit (bias, normalisation, sum,
     * ReLU): on machines with AVX-512. Its AVX2 kernels round them otherwise (measured on an
     * AVX2-only EPYC: the bias joins the accumulation; up to 1e5 values of a 32x32x48 batch
     * differ in the last bit), so there every epilogue runs after a bare convolution. */
    int exact_post_ops;
    /* [kept_lo, kept_hi): the bytes of every weight a primitive keeps a reorder of (grown,
     * never shrunk): a write outside it (an input, an activation) has nothing to look up */
    const char *kept_lo, *kept_hi;
};

static int same_desc(const tfc_conv_desc *a, const tfc_conv_desc *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

static size_t align64(size_t bytes)
{
    return (bytes + 63) & ~(size_t)63;
}

static void prim_release(prim *p)
{
    if (p->conv) dnnl_primitive_destroy(p->conv);
    if (p->reorder) dnnl_primitive_destroy(p->reorder);
    if (p->re_in) dnnl_primitive_destroy(p->re_in);
    if (p->re_out) dnnl_primitive_destroy(p->re_out);
    if (p->wts_prim && p->wts_prim != p->wts) dnnl_memory_destroy(p->wts_prim);
    for (int i = 0; i < KEPT; i++)
        if (p->kept[i].mem) dnnl_memory_destroy(p->kept[i].mem);
    dnnl_memory_t mems[] = {p->in,    p->wts,   p->out,  p->scratch, p->b,
                            p->scale, p->shift, p->in_b, p->out_b};
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

/* A memory object like `like` (same descriptor) on the caller's buffer: the chunked calls'
 * threads each need their own, a handle being part of the object. */
static dnnl_memory_t mem_at(tfc_cpu_dnnl *s, const_dnnl_memory_t like, const void *data)
{
    const dnnl_memory_desc_t *md;
    dnnl_memory_t m = NULL;
    TFC_ASSERT(dnnl_memory_get_memory_desc(like, &md) == dnnl_success);
    TFC_ASSERT(dnnl_memory_create(&m, md, s->engine, (void *)data) == dnnl_success);
    return m;
}

/* Whether d's convolutions run as Winograd's F(4x4, 3x3) (oneDNN's jit_wino_4x3, on
 * AVX-512): a 3x3 kernel at stride and dilation 1 with at least 32 channels in and out,
 * multiples of 16 (on 16 channels it was slower than the direct kernel, docs/cpu.md). Its
 * kernel adds a bias and applies ReLU but takes no per-channel product, and its output
 * goes through a reorder: a normalisation or a residual come after it, from tfc's own ops
 * (epilogue()). */
static int wino_fits(const tfc_cpu_dnnl *s, tfc_cpu_conv_op op, const tfc_conv_desc *d,
                     int infer)
{
    /* Its training kernels transform the weights (or the filter gradient) in every call
     * (chunk), a cost that the output's 4x4 tiles repay from about 128 of them on, the
     * filter gradient's from about 512 (bench_conv --against direct, docs/cpu.md); the
     * inference forward takes them transformed and pays from WINO_INFER_TILES */
    const int64_t tiles = (int64_t)d->n * ((d->oh + 3) / 4) * ((d->ow + 3) / 4);
    return s->wino && d->kh == 3 && d->kw == 3 && d->sh == 1 && d->sw == 1 && d->dh == 1 &&
           d->dw == 1 && d->c >= 32 && d->f >= 32 && d->c % 16 == 0 && d->f % 16 == 0 &&
           tiles >= (op == TFC_CPU_CONV_FILTER ? 512 : infer ? WINO_INFER_TILES : 128);
}

static int reorder_make(tfc_cpu_dnnl *s, dnnl_primitive_t *r, const dnnl_memory_desc_t *from,
                        const dnnl_memory_desc_t *to)
{
    dnnl_primitive_desc_t rpd = NULL;
    int ok = !dnnl_reorder_primitive_desc_create(&rpd, from, s->engine, to, s->engine, NULL) &&
             !dnnl_primitive_create(r, rpd);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    return ok;
}

static void prim_build_as(tfc_cpu_dnnl *s, prim *p, tfc_cpu_conv_op op,
                          const tfc_conv_desc *d, int bias, int bn, int sum, int relu,
                          int infer, int wino);

/* Builds the primitive for op on d into p (p->ok = 0 where oneDNN cannot): Winograd where it
 * fits, the machine has the kernel and the primitive runs on one thread, else the direct
 * convolution. One thread: a chunk's primitive, or any on a one-thread backend. A team's
 * call (a batch smaller than two images per thread) stays direct, so that the workspace a
 * batch needs never exceeds what a bigger one does (conv_workspace's promise). */
static void prim_build(tfc_cpu_dnnl *s, prim *p, tfc_cpu_conv_op op, const tfc_conv_desc *d,
                       int bias, int bn, int sum, int relu, int infer, int one)
{
    if (one && wino_fits(s, op, d, infer) && !bn && !sum) {
        prim_build_as(s, p, op, d, bias, bn, sum, relu, infer, 1);
        if (p->ok) return;
    }
    prim_build_as(s, p, op, d, bias, bn, sum, relu, infer, 0);
}

/* The forward primitive descriptor is the hint the backward ones need. A Winograd forward
 * for inference passes (infer) is oneDNN's inference one, whose kernel takes the weights
 * transformed once, by their reorder (kept on a frozen backend), where the training one
 * transforms them in every call: faster at inference, but other bits, and slower in
 * training, where the weights change every step (docs/cpu.md, "Winograd"). */
static void prim_build_as(tfc_cpu_dnnl *s, prim *p, tfc_cpu_conv_op op,
                          const tfc_conv_desc *d, int bias, int bn, int sum, int relu, int infer,
                          int wino)
{
    memset(p, 0, sizeof *p);
    p->used = 1;
    p->op = op;
    p->d = *d;
    p->bias = bias;
    p->bn = bn;
    p->sum = sum;
    p->relu = relu;
    p->infer = infer;
    /* A 1x1 kernel with a stride: oneDNN 2.6 copies the strided pixels into a scratchpad
     * buffer sized for c channels but stores whole vectors into it, overrunning it where c
     * is not a multiple of the vector (c = 3: a filter gradient wrong in every call on
     * chunks here, and a race between the threads' buffers in one call). im2col's GEMM
     * takes these (a shortcut's projection, cheap beside the 3x3 convolutions), unless c is
     * a multiple of 16, a whole number of vectors on every machine: there oneDNN's strided
     * kernel runs, with the epilogue in it, and im2col's GEMM (dnnl_sgemm, which allocates
     * its packing buffers in each call: a system call where malloc maps or trims them) is
     * not needed at inference (fashion_resnet's shortcuts, 32 and 64 channels). */
    if (tfc_cpu_dnnl_refuses(d)) return;
    dnnl_memory_desc_t md_x, md_w, md_wany, md_y, md_b, md_c, md_xany, md_yany;
    dnnl_dims_t xd = {d->n, d->c, d->h, d->w}, wd = {d->f, d->c, d->kh, d->kw},
                yd = {d->n, d->f, d->oh, d->ow}, bd = {d->f}, cd1 = {1, d->f, 1, 1};
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
        dnnl_memory_desc_init_by_tag(&md_y, 4, yd, dnnl_f32, dnnl_nhwc) ||
        dnnl_memory_desc_init_by_tag(&md_b, 1, bd, dnnl_f32, dnnl_a) ||
        dnnl_memory_desc_init_by_tag(&md_c, 4, cd1, dnnl_f32, dnnl_nchw) ||
        dnnl_memory_desc_init_by_tag(&md_xany, 4, xd, dnnl_f32, dnnl_format_tag_any) ||
        dnnl_memory_desc_init_by_tag(&md_yany, 4, yd, dnnl_f32, dnnl_format_tag_any))
        return;
    /* Winograd's kernel takes blocked activations only (any: its choice) */
    const dnnl_memory_desc_t *cx = wino ? &md_xany : &md_x, *cy = wino ? &md_yany : &md_y;
    const dnnl_alg_kind_t alg = wino ? dnnl_convolution_winograd : dnnl_convolution_direct;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t fpd = NULL, pd = NULL, rpd = NULL;
    dnnl_convolution_desc_t fwd, cd;
    if (dnnl_primitive_attr_create(&attr) ||
        dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user))
        goto done;
    /* the normalisation as two per-channel binary post-ops (y * a, then + b), the residual
     * as a sum (+ what dst holds), ReLU as an eltwise one: v > 0 ? v : v * 0 (a NaN sum stays
     * NaN) */
    if ((bn || sum || relu) && dnnl_post_ops_create(&po)) goto done;
    if (bn && (dnnl_post_ops_append_binary(po, dnnl_binary_mul, &md_c) ||
               dnnl_post_ops_append_binary(po, dnnl_binary_add, &md_c)))
        goto done;
    if (sum && dnnl_post_ops_append_sum(po, 1.0f)) goto done;
    if (relu && dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f)) goto done;
    if (po && dnnl_primitive_attr_set_post_ops(attr, po)) goto done;
    const dnnl_prop_kind_t prop = op == TFC_CPU_CONV_FORWARD && wino && infer
                                      ? dnnl_forward_inference
                                      : dnnl_forward_training;
    if (dnnl_dilated_convolution_forward_desc_init(&fwd, prop, alg, cx,
                                                   &md_wany, bias ? &md_b : NULL, cy, strides,
                                                   dil, pl, pad_r) ||
        dnnl_primitive_desc_create(&fpd, &fwd, attr, s->engine, NULL))
        goto done;
    dnnl_query_t wq = dnnl_query_weights_md;
    const dnnl_memory_desc_t *in_md = &md_x, *out_md = &md_y;
    if (op == TFC_CPU_CONV_FORWARD) {
        pd = fpd;
        fpd = NULL;
    } else if (op == TFC_CPU_CONV_DATA) {
        if (dnnl_dilated_convolution_backward_data_desc_init(&cd, alg, cx, &md_wany, cy,
                                                             strides, dil, pl, pad_r) ||
            dnnl_primitive_desc_create(&pd, &cd, attr, s->engine, fpd))
            goto done;
        in_md = &md_y;
        out_md = &md_x;
    } else {
        if (dnnl_dilated_convolution_backward_weights_desc_init(&cd, alg, cx, &md_wany, NULL,
                                                                cy, strides, dil, pl, pad_r) ||
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
    p->b = bias ? handle_mem(s, &md_b) : NULL;
    p->scale = bn ? handle_mem(s, &md_c) : NULL;
    p->shift = bn ? handle_mem(s, &md_c) : NULL;
    if (!p->in || !p->wts || !p->out || (p->scratch_bytes && !p->scratch) || (bias && !p->b) ||
        (bn && (!p->scale || !p->shift)))
        goto done;
    p->wts_prim = p->wts;
    if (!dnnl_memory_desc_equal(pw, &md_w)) {
        /* the primitive's weights live with it: a copy in its layout, made per call (on a
         * frozen backend kept, per layer, until their source is written: weights_in) */
        p->wts_prim_bytes = dnnl_memory_desc_get_size(pw);
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
    if (wino) {
        /* the convolution's input and output in its layouts: x or dy in (for the filter
         * gradient both, x then dy), y or dx out */
        const dnnl_memory_desc_t *bx = dnnl_primitive_desc_query_md(
            pd, op == TFC_CPU_CONV_DATA ? dnnl_query_diff_src_md : dnnl_query_src_md, 0);
        const dnnl_memory_desc_t *by = dnnl_primitive_desc_query_md(
            pd, op == TFC_CPU_CONV_FORWARD ? dnnl_query_dst_md : dnnl_query_diff_dst_md, 0);
        if (!bx || !by) goto done;
        const dnnl_memory_desc_t *bin = op == TFC_CPU_CONV_DATA ? by : bx;
        const dnnl_memory_desc_t *bout = op == TFC_CPU_CONV_DATA ? bx : by;
        p->in_b = handle_mem(s, bin);
        p->out_b = handle_mem(s, bout);
        p->in_b_bytes = dnnl_memory_desc_get_size(bin);
        p->out_b_bytes = dnnl_memory_desc_get_size(bout);
        if (!p->in_b || !p->out_b || !reorder_make(s, &p->re_in, in_md, bin)) goto done;
        if (op == TFC_CPU_CONV_FILTER ? !reorder_make(s, &p->re_out, &md_y, bout)
                                      : !reorder_make(s, &p->re_out, bout, out_md))
            goto done;
        p->wino = 1;
        dnnl_memory_desc_t md_16c;
        p->out_16c = op == TFC_CPU_CONV_FORWARD && d->f % 16 == 0 &&
                     !dnnl_memory_desc_init_by_tag(&md_16c, 4, yd, dnnl_f32, dnnl_nChw16c) &&
                     dnnl_memory_desc_equal(&md_16c, bout);
    }
    p->ok = 1;
done:
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (fpd) dnnl_primitive_desc_destroy(fpd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    if (po) dnnl_post_ops_destroy(po);
    if (!p->ok) {
        prim_release(p);
        p->used = 1; /* remembered as unsupported */
        p->op = op;
        p->d = *d;
        p->bias = bias;
        p->bn = bn;
        p->sum = sum;
        p->relu = relu;
        p->infer = infer;
    }
}

/* a primitive's epilogue: bias, normalisation, residual sum, ReLU; and a forward for
 * inference passes (prim.infer) */
enum { EPI_BIAS = 1, EPI_BN = 2, EPI_RELU = 4, EPI_SUM = 8, EPI_INFER = 16 };

/* lookup's `single` for a one-thread primitive that is never Winograd */
#define SINGLE_DIRECT 2

static int prim_is(const prim *p, tfc_cpu_conv_op op, const tfc_conv_desc *d, int single,
                   int epi)
{
    return p->used && p->op == op && p->single == single &&
           p->bias == !!(epi & EPI_BIAS) && p->bn == !!(epi & EPI_BN) &&
           p->sum == !!(epi & EPI_SUM) && p->relu == !!(epi & EPI_RELU) &&
           p->infer == !!(epi & EPI_INFER) && same_desc(&p->d, d);
}

/* The cached primitive for (op, d), built on first use: for the backend's thread count, or
 * (single) for one thread, which a primitive's kernels fix when it is built; single = 2
 * builds it direct, as the team's is (SINGLE_DIRECT). The caller holds the lock and has set
 * the OpenMP thread count to the backend's. */
static prim *lookup(tfc_backend *be, tfc_cpu_dnnl *s, tfc_cpu_conv_op op,
                    const tfc_conv_desc *d, int single, int epi)
{
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (prim_is(&s->cache[i], op, d, single, epi)) return &s->cache[i];
    prim *p = &s->cache[s->next];
    s->next = (s->next + 1) % CACHE_SLOTS;
    prim_release(p);
    if (single && be->threads != 1) omp_set_num_threads(1);
    prim_build(s, p, op, d, !!(epi & EPI_BIAS), !!(epi & EPI_BN), !!(epi & EPI_SUM),
               !!(epi & EPI_RELU), !!(epi & EPI_INFER), single == 1 || be->threads == 1);
    if (single && be->threads != 1) omp_set_num_threads(be->threads);
    p->single = single;
    return p;
}

/* How a call splits the batch. With several threads and at least two images per thread,
 * into about four chunks per thread that the threads claim as they finish, each running a
 * one-thread primitive: a thread that another process keeps off its core then holds up
 * only the chunk it is on, where oneDNN's own static split makes every thread wait for it
 * (docs/cpu.md, "A busy machine"). The split depends on the batch and the thread count
 * only, so which thread runs a chunk never changes a bit of the result. Otherwise (one
 * thread, small batches such as inference on one image) one call on all threads. */
typedef struct call {
    int k, nb, tail; /* k chunks of nb images, the last of tail; k = 0: one team call */
    prim *p[2];      /* the primitives for nb and for tail (the same when tail == nb) */
    prim *one;       /* k = 0 on a frozen backend's threads: the one-thread primitive too */
    size_t acc;      /* accumulate buffer: the gradient (data), k partial ones (filter) */
    size_t stride;   /* per thread: scratchpad, the filter gradient in oneDNN's layout,
                        Winograd's blocked input and output */
    size_t blk;      /* where in a thread's slice (chunks) or the workspace (team) the last
                        begin */
    size_t bytes;    /* workspace in all */
} call;

static size_t blocked_bytes(const prim *p)
{
    return p->wino ? align64(p->in_b_bytes) + align64(p->out_b_bytes) : 0;
}

/* The images in each chunk of a call on n (n itself: one call on all threads). */
static int chunk_images(const tfc_backend *be, tfc_cpu_conv_op op, int n)
{
    const int t = be->threads;
    if (t == 1 || n < 2 * t) return n;
    int k = 4 * t < n ? 4 * t : n, nb = (n + k - 1) / k;
    /* a forward pass on a big batch (inference) in chunks of at most FORWARD_CHUNK images:
     * Winograd's blocked copies of them stay small, and the images are independent */
    return op == TFC_CPU_CONV_FORWARD && nb > FORWARD_CHUNK ? FORWARD_CHUNK : nb;
}

/* Whether a forward call on d takes Winograd's kernel: on one thread, or in chunks of
 * images each on one thread (a few images on a team take the direct kernel). */
static int forward_wino(const tfc_backend *be, const tfc_cpu_dnnl *s, const tfc_conv_desc *d,
                        int infer)
{
    tfc_conv_desc chunk = *d;
    chunk.n = chunk_images(be, TFC_CPU_CONV_FORWARD, d->n);
    return (chunk.n < d->n || be->threads == 1) &&
           wino_fits(s, TFC_CPU_CONV_FORWARD, &chunk, infer);
}

int tfc_cpu_dnnl_winograd_infers(const tfc_backend *be, const tfc_conv_desc *d)
{
    const tfc_cpu_dnnl *s = be->impl;
    return s && d->n > 0 && forward_wino(be, s, d, 1);
}

static int prepare(tfc_backend *be, tfc_cpu_dnnl *s, tfc_cpu_conv_op op,
                   const tfc_conv_desc *d, int epi, call *c)
{
    memset(c, 0, sizeof *c);
    const int t = be->threads;
    if (chunk_images(be, op, d->n) < d->n) {
        c->nb = chunk_images(be, op, d->n);
        c->k = (d->n + c->nb - 1) / c->nb;
        c->tail = d->n - (c->k - 1) * c->nb;
    }
    if (!c->k) {
        /* inside the caller's own OpenMP region oneDNN runs on the calling thread alone,
         * which a primitive built for a team would not expect */
        const int inside = omp_in_parallel();
        c->p[0] = c->p[1] = lookup(be, s, op, d, inside, epi);
        /* an inference pass on several threads keeps a one-thread primitive beside the
         * team's, built and sized with it, for when the team shrinks (lone_call) */
        if (!inside && be->frozen && t > 1 && op == TFC_CPU_CONV_FORWARD) {
            c->one = lookup(be, s, op, d, SINGLE_DIRECT, epi);
            if (!prim_is(c->p[0], op, d, 0, epi)) /* evicted by it */
                c->p[0] = c->p[1] = lookup(be, s, op, d, 0, epi);
            if (!c->one->ok) c->one = NULL;
        }
        for (int j = 0; j < 1 + !!c->one; j++) {
            const prim *p = j ? c->one : c->p[0];
            size_t blk = align64(p->out_bytes) + align64(p->scratch_bytes);
            if (blk > c->blk) c->blk = blk;
        }
        c->bytes = c->blk + blocked_bytes(c->p[0]); /* the one-thread primitive's: none */
        return c->p[0]->ok;
    }
    tfc_conv_desc dn = *d, dt = *d;
    dn.n = c->nb;
    dt.n = c->tail;
    c->p[0] = lookup(be, s, op, &dn, 1, epi);
    c->p[1] = c->tail == c->nb ? c->p[0] : lookup(be, s, op, &dt, 1, epi);
    if (!prim_is(c->p[0], op, &dn, 1, epi)) c->p[0] = lookup(be, s, op, &dn, 1, epi); /* evicted */
    if (!c->p[0]->ok || !c->p[1]->ok) return 0;
    size_t scratch = 0, part = 0, blk = 0;
    for (int j = 0; j < 2; j++) {
        if (c->p[j]->scratch_bytes > scratch) scratch = c->p[j]->scratch_bytes;
        if (c->p[j]->wts_prim_bytes > part) part = c->p[j]->wts_prim_bytes;
        if (blocked_bytes(c->p[j]) > blk) blk = blocked_bytes(c->p[j]);
    }
    const size_t nw = (size_t)d->kh * d->kw * d->c * d->f * sizeof(float);
    if (op == TFC_CPU_CONV_DATA) c->acc = align64((size_t)d->n * d->h * d->w * d->c * sizeof(float));
    if (op == TFC_CPU_CONV_FILTER) c->acc = (size_t)c->k * align64(nw);
    c->blk = align64(scratch) + (op == TFC_CPU_CONV_FILTER ? align64(part) : 0);
    c->stride = c->blk + blk;
    c->bytes = c->acc + (size_t)t * c->stride;
    return 1;
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

/* Whether this machine has oneDNN's Winograd kernel (AVX-512): a descriptor is enough to
 * tell, nothing is compiled. */
static int wino_available(tfc_cpu_dnnl *s)
{
    dnnl_memory_desc_t x, w, y;
    dnnl_dims_t xd = {1, 32, 8, 8}, wd = {32, 32, 3, 3}, one = {1, 1}, zero = {0, 0};
    dnnl_convolution_desc_t cd;
    dnnl_primitive_desc_t pd = NULL;
    int ok = !dnnl_memory_desc_init_by_tag(&x, 4, xd, dnnl_f32, dnnl_format_tag_any) &&
             !dnnl_memory_desc_init_by_tag(&w, 4, wd, dnnl_f32, dnnl_format_tag_any) &&
             !dnnl_memory_desc_init_by_tag(&y, 4, xd, dnnl_f32, dnnl_format_tag_any) &&
             !dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_training,
                                                         dnnl_convolution_winograd, &x, &w,
                                                         NULL, &y, one, zero, one, one) &&
             !dnnl_primitive_desc_create(&pd, &cd, NULL, s->engine, NULL);
    if (pd) dnnl_primitive_desc_destroy(pd);
    return ok;
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
    s->wino = !(e && strcmp(e, "direct") == 0) && wino_available(s);
    __builtin_cpu_init();
    s->exact_post_ops = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    pthread_mutex_init(&s->lock, NULL);
    return s;
}

void tfc_cpu_dnnl_free(tfc_cpu_dnnl *s)
{
    if (!s) return;
    for (int i = 0; i < CACHE_SLOTS; i++) prim_release(&s->cache[i]);
    for (int i = 0; i < s->nstreams; i++) dnnl_stream_destroy(s->streams[i]);
    free(s->streams);
    free(s->aff);
    free(s->spare);
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
    /* a frozen backend (bound for inference) runs inference passes only; a forward is
     * either kind */
    for (int k = be->frozen ? 1 : 0; k < (be->frozen ? 2 : 4) && ok; k++) {
        call c;
        ok = prepare(be, s, (tfc_cpu_conv_op)(k < 2 ? 0 : k - 1), d, k == 1 ? EPI_INFER : 0, &c);
        if (c.bytes > need) need = c.bytes;
    }
    if (ok) {
        plan *pl = find_plan(s, d);
        if (pl && need > pl->bytes) pl->bytes = need;
        *bytes = need;
    }
    leave(be, s, saved);
    return ok;
}

/* The normalisation's per-channel a and b as the binary post-ops' second inputs. */
static int epilogue_args(const prim *p, dnnl_exec_arg_t *a)
{
    if (!p->scale) return 0;
    a[0] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, p->scale};
    a[1] = (dnnl_exec_arg_t){DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1, p->shift};
    return 2;
}

/* A forward epilogue that tfc's ops apply after the convolution (Winograd's): the
 * separate layers' kernels in their order, so the values are theirs to the bit. */
typedef struct after {
    const float *bias;
    const tfc_bn_params *bn;
    const float *residual;
    tfc_act act; /* linear, ReLU or relu6 */
    const float *a, *b; /* bn's per-channel map, as bn_forward_infer computes it */
} after;

/* The epilogue on `rows` output pixels of f channels from `row` on: one chunk's, inside the
 * chunks' parallel loop (it then runs on the calling thread), or the whole batch's; one pass
 * over y, each step rounded as its separate op (at batch 1 on AVX2, where every epilogue
 * comes here, the passes were one per op and layer). */
static void epilogue(tfc_backend *be, const after *e, int64_t row, int64_t rows, int f, float *y)
{
    tfc_cpu_epilogue(be, rows, f, e->bias, e->bn ? e->a : NULL, e->b,
                     e->residual ? e->residual + row * f : NULL, e->act, y + row * f);
}

/* Runs p's convolution on stream st with arguments a, among them m_in and m_out, tfc's
 * NHWC input and output (for the filter gradient x and dy). A Winograd primitive takes
 * them through blocked copies at buf: the input reordered in (both, for the filter
 * gradient), the output reordered out, unless the caller takes it blocked (keep) and it is
 * nChw16c: then it is returned, and m_out is left unwritten. */
static const float *conv_execute(tfc_cpu_dnnl *s, const prim *p, dnnl_stream_t st,
                                 dnnl_exec_arg_t *a, int na, dnnl_memory_t m_in,
                                 dnnl_memory_t m_out, char *buf, int keep)
{
    if (!p->wino) {
        TFC_ASSERT(dnnl_primitive_execute(p->conv, st, na, a) == dnnl_success);
        return NULL;
    }
    const int blocked = keep && p->out_16c;
    dnnl_memory_t b_in = mem_at(s, p->in_b, buf);
    dnnl_memory_t b_out = mem_at(s, p->out_b, buf + align64(p->in_b_bytes));
    dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, m_in}, {DNNL_ARG_TO, b_in}};
    TFC_ASSERT(dnnl_primitive_execute(p->re_in, st, 2, r) == dnnl_success);
    if (p->op == TFC_CPU_CONV_FILTER) {
        r[0].memory = m_out;
        r[1].memory = b_out;
        TFC_ASSERT(dnnl_primitive_execute(p->re_out, st, 2, r) == dnnl_success);
    }
    for (int i = 0; i < na; i++)
        if (a[i].memory == m_in)
            a[i].memory = b_in;
        else if (a[i].memory == m_out)
            a[i].memory = b_out;
    TFC_ASSERT(dnnl_primitive_execute(p->conv, st, na, a) == dnnl_success);
    if (p->op != TFC_CPU_CONV_FILTER && !blocked) {
        r[0].memory = b_out;
        r[1].memory = m_out;
        TFC_ASSERT(dnnl_primitive_execute(p->re_out, st, 2, r) == dnnl_success);
    }
    TFC_ASSERT(dnnl_stream_wait(st) == dnnl_success);
    dnnl_memory_destroy(b_in);
    dnnl_memory_destroy(b_out);
    return blocked ? (const float *)(buf + align64(p->in_b_bytes)) : NULL;
}

/* Weights of up to this many bytes are reordered on the calling thread alone (below). */
#define SERIAL_REORDER_BYTES (1 << 20)

/* Runs p's weights reorder from `from` to `to` and waits. Outside an OpenMP region oneDNN
 * would split it over every thread: for a few KB of weights that is a barrier per call
 * (ResNet-20's 16x16x3x3 into ABcd16a16b, oneDNN 2.6's jit:blk: ~8 ms a call with two
 * threads where the second shares its core with another process, 1 us on one thread,
 * docs/cpu.md); small weights go on the calling thread. */
static void reorder_weights(const prim *p, dnnl_stream_t st, dnnl_memory_t from,
                            dnnl_memory_t to, size_t bytes)
{
    dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    const int serial = bytes <= SERIAL_REORDER_BYTES && !omp_in_parallel(),
              threads = omp_get_max_threads();
    if (serial) omp_set_num_threads(1);
    TFC_ASSERT(dnnl_primitive_execute(p->reorder, st, 2, ra) == dnnl_success);
    TFC_ASSERT(dnnl_stream_wait(st) == dnnl_success);
    if (serial) omp_set_num_threads(threads);
}

/* The weights w in p's layout: w itself where that is hwio, else reordered into p's copy
 * (every call), or on a frozen backend into one kept for w, reordered again only after a
 * write overlaps w (tfc_cpu_dnnl_written). Layers of one shape share a primitive, each
 * with weights of its own (up to KEPT of them; more take turns). */
static dnnl_memory_t weights_in(tfc_backend *be, tfc_cpu_dnnl *s, prim *p, const float *w)
{
    dnnl_memory_set_data_handle(p->wts, (void *)w);
    if (!p->reorder) return p->wts;
    dnnl_memory_t to = p->wts_prim;
    if (be->frozen) {
        for (int i = 0; i < KEPT; i++)
            if (p->kept[i].src == w) return p->kept[i].mem;
        int i = p->next_kept;
        p->next_kept = (i + 1) % KEPT;
        p->kept[i].src = NULL;
        const dnnl_memory_desc_t *md;
        TFC_ASSERT(dnnl_memory_get_memory_desc(p->wts_prim, &md) == dnnl_success);
        if (p->kept[i].mem || !dnnl_memory_create(&p->kept[i].mem, md, s->engine,
                                                  DNNL_MEMORY_ALLOCATE)) {
            p->kept[i].src = w;
            to = p->kept[i].mem;
            const char *lo = (const char *)w;
            const char *hi = lo + (size_t)p->d.kh * p->d.kw * p->d.c * p->d.f * sizeof(float);
            if (!s->kept_lo || lo < s->kept_lo) s->kept_lo = lo;
            if (hi > s->kept_hi) s->kept_hi = hi;
        } else {
            p->kept[i].mem = NULL; /* out of memory: reordered per call */
        }
    }
    reorder_weights(p, s->stream, p->wts, to, p->wts_prim_bytes);
    return to;
}

/* One call on the whole batch, on the backend's threads; a data gradient into the
 * workspace, to be added to out, or with assign into out itself. */
static void run_team(tfc_backend *be, tfc_cpu_dnnl *s, tfc_cpu_conv_op op, prim *p,
                     const float *in, const float *w, const float *bias, float *out,
                     int assign, char *ws, size_t blk)
{
    float *acc = p->out_bytes ? (float *)ws : NULL;
    void *scratch = ws + align64(p->out_bytes);
    float *wts = op == TFC_CPU_CONV_FILTER ? acc : (float *)w;
    float *dst = op == TFC_CPU_CONV_DATA && !assign ? acc : out;
    dnnl_memory_set_data_handle(p->in, (void *)in);
    dnnl_memory_set_data_handle(p->wts, wts);
    dnnl_memory_set_data_handle(p->out, op == TFC_CPU_CONV_FILTER ? (void *)w : dst);
    if (p->scratch) dnnl_memory_set_data_handle(p->scratch, scratch);
    dnnl_memory_t m_w = op == TFC_CPU_CONV_FILTER ? p->wts_prim : weights_in(be, s, p, w);
    dnnl_exec_arg_t a[7];
    int na = 0;
    switch (op) {
    case TFC_CPU_CONV_FORWARD:
        a[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, p->in};
        a[na++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, m_w};
        a[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, p->out};
        if (p->b) {
            dnnl_memory_set_data_handle(p->b, (void *)bias);
            a[na++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, p->b};
        }
        na += epilogue_args(p, a + na);
        break;
    case TFC_CPU_CONV_DATA:
        a[na++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, p->in};
        a[na++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, m_w};
        a[na++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_SRC, p->out};
        break;
    case TFC_CPU_CONV_FILTER:
        a[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, p->in};
        a[na++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, p->out};
        a[na++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_WEIGHTS, p->wts_prim};
        break;
    }
    if (p->scratch) a[na++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, p->scratch};
    conv_execute(s, p, s->stream, a, na, p->in, p->out, ws + blk, 0);
    TFC_ASSERT(dnnl_stream_wait(s->stream) == dnnl_success);
    if (p->reorder && op == TFC_CPU_CONV_FILTER)
        reorder_weights(p, s->stream, p->wts_prim, p->wts, p->wts_prim_bytes);
}

/* A team call of c: on the backend's threads, or on the calling thread alone where the
 * process's regions run on one now (cpu_team.c: a busy machine) and c has a one-thread
 * primitive (an inference pass): oneDNN's team would wait at its barrier for a thread that
 * another process keeps off its core. Both primitives are direct, whose forward kernels
 * split the output, not the sums, among threads: the same bits (test_predictor's
 * lone_conv_bits). Both keep the weights in their layout, so a change of team allocates
 * nothing. */
static void lone_call(tfc_backend *be, tfc_cpu_dnnl *s, tfc_cpu_conv_op op, const call *c,
                      const float *in, const float *w, const float *bias, float *out,
                      int assign, char *ws)
{
    const int lone = c->one && tfc_cpu_team(be->threads) == 1;
    if (c->one) weights_in(be, s, lone ? c->p[0] : c->one, w); /* the other's, kept warm */
    if (lone) {
        tfc_cpu_team_note_lone();
        omp_set_num_threads(1);
    }
    run_team(be, s, op, lone ? c->one : c->p[0], in, w, bias, out, assign, ws, c->blk);
    if (lone) omp_set_num_threads(be->threads);
}

/* The chunks of c, claimed by the backend's threads one at a time; each runs its
 * one-thread primitive (oneDNN runs a kernel on the calling thread alone inside an OpenMP
 * region) on its own stream, memory objects and scratchpad, then the epilogue e and the
 * pooling (NULL: none) on its output while that is in cache: straight from Winograd's
 * blocked output where it is nChw16c (the epilogue writing NHWC as it goes, or else the
 * pooling), from NHWC otherwise. Data gradients go into the accumulate buffer, or with
 * assign into out. Filter gradients go one per chunk into the accumulate buffer, in hwio,
 * and are summed after in chunk order. */
static void run_chunks(tfc_backend *be, tfc_cpu_dnnl *s, tfc_cpu_conv_op op, const call *c,
                       const tfc_conv_desc *d, const float *in, const float *w,
                       const float *bias, float *out, int assign, char *ws, const after *e,
                       const tfc_pool_desc *pool, float *pooled)
{
    const int64_t po = pool ? (int64_t)pool->oh * pool->ow * pool->c : 0;
    const int64_t xi = (int64_t)d->h * d->w * d->c, yi = (int64_t)d->oh * d->ow * d->f;
    const int64_t in_img = op == TFC_CPU_CONV_DATA ? yi : xi;
    const size_t slot = align64((size_t)d->kh * d->kw * d->c * d->f * sizeof(float));
    dnnl_memory_t m_ws[2] = {NULL, NULL}; /* the weights in each primitive's layout, once */
    if (op != TFC_CPU_CONV_FILTER) {
        m_ws[0] = weights_in(be, s, c->p[0], w);
        m_ws[1] = c->p[1] == c->p[0] ? m_ws[0] : weights_in(be, s, c->p[1], w);
    }
    for (int j = 0; j < 2; j++) /* the bias, read by every chunk */
        if (c->p[j]->b) dnnl_memory_set_data_handle(c->p[j]->b, (void *)bias);
    char *acc = ws, *thr = ws + c->acc;
    /* on a team of one (cpu_team.c) the region is not "in parallel": oneDNN's reorders in
     * it would take a team of their own unless told one thread */
    const int team = tfc_cpu_team(be->threads), saved = omp_get_max_threads();
    if (team == 1 && saved != 1) omp_set_num_threads(1);
#pragma omp parallel for num_threads(team) schedule(dynamic, 1)
    for (int i = 0; i < c->k; i++) {
        const int t = omp_get_thread_num();
        const prim *p = c->p[i == c->k - 1];
        const int64_t i0 = (int64_t)i * c->nb;
        char *mine = thr + (size_t)t * c->stride;
        dnnl_stream_t st = s->streams[t];
        dnnl_memory_t m_in = mem_at(s, p->in, in + i0 * in_img), m_out, m_w = NULL, m_hwio = NULL;
        dnnl_memory_t m_scr = p->scratch ? mem_at(s, p->scratch, mine) : NULL;
        dnnl_exec_arg_t a[7];
        int na = 0;
        switch (op) {
        case TFC_CPU_CONV_FORWARD:
            m_out = mem_at(s, p->out, out + i0 * yi);
            a[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, m_in};
            a[na++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, m_ws[i == c->k - 1]};
            a[na++] = (dnnl_exec_arg_t){DNNL_ARG_DST, m_out};
            if (p->b) a[na++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, p->b};
            na += epilogue_args(p, a + na);
            break;
        case TFC_CPU_CONV_DATA:
            m_out = mem_at(s, p->out, (assign ? out : (float *)acc) + i0 * xi);
            a[na++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, m_in};
            a[na++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, m_ws[i == c->k - 1]};
            a[na++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_SRC, m_out};
            break;
        default: /* filter: `w` is dy */
            m_out = mem_at(s, p->out, w + i0 * yi);
            m_hwio = mem_at(s, p->wts, acc + (size_t)i * slot);
            m_w = p->reorder ? mem_at(s, p->wts_prim, mine + align64(p->scratch_bytes)) : m_hwio;
            a[na++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, m_in};
            a[na++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_DST, m_out};
            a[na++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_WEIGHTS, m_w};
            break;
        }
        if (m_scr) a[na++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, m_scr};
        const int images = i == c->k - 1 ? c->tail : c->nb;
        const int64_t px = (int64_t)d->oh * d->ow;
        tfc_pool_desc pc = pool ? *pool : (tfc_pool_desc){0};
        pc.n = images;
        const float *blk = conv_execute(s, p, st, a, na, m_in, m_out, mine + c->blk, e || pool);
        int pooled_done = 0;
        if (blk && e) {
            tfc_cpu_epilogue_16c(images, px, d->f, blk, e->bias, e->a, e->b,
                                 e->residual ? e->residual + i0 * yi : NULL, e->act,
                                 out + i0 * yi);
        } else if (blk) {
            tfc_cpu_pool_forward_16c(&pc, blk, pooled + i0 * po);
            pooled_done = 1;
        } else if (e) {
            epilogue(be, e, i0 * px, images * px, d->f, out);
        }
        if (pool && !pooled_done)
            tfc_cpu_pool_forward(be, &pc, out + i0 * yi, pooled + i0 * po, NULL);
        if (p->reorder && op == TFC_CPU_CONV_FILTER) {
            dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, m_w}, {DNNL_ARG_TO, m_hwio}};
            TFC_ASSERT(dnnl_primitive_execute(p->reorder, st, 2, ra) == dnnl_success);
        }
        TFC_ASSERT(dnnl_stream_wait(st) == dnnl_success);
        dnnl_memory_t mems[] = {m_in, m_out, m_scr, m_hwio, m_w != m_hwio ? m_w : NULL};
        for (size_t j = 0; j < sizeof mems / sizeof *mems; j++)
            if (mems[j]) dnnl_memory_destroy(mems[j]);
    }
    if (team == 1 && saved != 1) omp_set_num_threads(saved);
    if (op == TFC_CPU_CONV_FILTER) { /* dw += chunk 0 + chunk 1 + ..., in that order */
        const int64_t nw = (int64_t)d->kh * d->kw * d->c * d->f;
        for (int i = 0; i < c->k; i++) {
            const float *part = (const float *)(acc + (size_t)i * slot);
#pragma omp simd
            for (int64_t j = 0; j < nw; j++) out[j] += part[j];
        }
    }
}

int tfc_cpu_dnnl_conv(tfc_backend *be, tfc_cpu_conv_op op, const tfc_conv_desc *d,
                      const float *in, const float *w, const float *bias,
                      const tfc_bn_params *bn, const float *residual, int flags, float *out,
                      const tfc_pool_desc *pool, float *pooled, void *ws)
{
    tfc_cpu_dnnl *s = be->impl;
    if (!s || d->n <= 0) return 0;
    /* Winograd's forward convolution runs bare, its epilogue after it */
    const int wino = op == TFC_CPU_CONV_FORWARD && forward_wino(be, s, d, be->inference_pass);
    /* its kernel adds a bias and applies ReLU; a normalisation or a residual come after
     * (every epilogue, where oneDNN's post-ops are not exact here, and with relu6, which
     * tfc's epilogue applies as act_forward does; and with a normalisation on a few images,
     * where oneDNN's two binary post-ops per channel took longer than tfc's pass after the
     * bare kernel: fashion_mobilenet batch 1, one thread, 0.147 against 0.141 ms on this
     * stop's Zen 4, docs/cpu.md) */
    const int relu6 = op == TFC_CPU_CONV_FORWARD && (flags & TFC_CPU_CONV_RELU6);
    const int later = (wino && (bn || residual)) || relu6 ||
                      (op == TFC_CPU_CONV_FORWARD && bn && d->n < 2 * be->threads) ||
                      (op == TFC_CPU_CONV_FORWARD && !s->exact_post_ops &&
                       (bias || bn || residual || (flags & TFC_CPU_CONV_RELU)));
    const int relu = !!(flags & TFC_CPU_CONV_RELU);
    /* a data gradient written into out itself, not added to it from the workspace */
    const int assign = op == TFC_CPU_CONV_DATA && (flags & TFC_CPU_CONV_ASSIGN);
    after e = {bias, bn, residual,
               relu6  ? TFC_ACT_RELU6
               : relu ? TFC_ACT_RELU
                      : TFC_ACT_LINEAR,
               NULL, NULL};
    /* the sum post-op adds what y holds (before the lock: a copy on a frozen backend takes
     * it; a call that then falls back overwrites y) */
    if (residual && !later)
        be->ops->copy(be, out, residual,
                      (size_t)d->n * (size_t)d->oh * (size_t)d->ow * (size_t)d->f * sizeof(float));
    int saved = enter(be, s);
    call c;
    int epi = (bias ? EPI_BIAS : 0) | (bn ? EPI_BN : 0) | (residual ? EPI_SUM : 0) |
              (relu ? EPI_RELU : 0);
    if (later) epi = 0;
    if (op == TFC_CPU_CONV_FORWARD && be->inference_pass) epi |= EPI_INFER;
    if (!prepare(be, s, op, d, epi, &c)) {
        leave(be, s, saved);
        return 0;
    }
    if (bn) { /* a and b as bn_forward_infer computes them */
        if (s->naff < d->f) {
            s->aff = realloc(s->aff, sizeof(float) * 2 * (size_t)d->f);
            TFC_ASSERT(s->aff);
            s->naff = d->f;
        }
        for (int k = 0; k < d->f; k++) {
            double a = bn->gamma[k] / sqrt((double)bn->var[k] + (double)bn->eps);
            s->aff[k] = (float)a;
            s->aff[d->f + k] = (float)(bn->beta[k] - bn->mean[k] * a);
        }
        /* every primitive the call may run: the chunks', or the team's and its one-thread
         * one (lone_call) */
        prim *const run[] = {c.p[0], c.p[1], c.one};
        for (int j = 0; j < 3 && !later; j++)
            if (run[j]) {
                dnnl_memory_set_data_handle(run[j]->scale, s->aff);
                dnnl_memory_set_data_handle(run[j]->shift, s->aff + d->f);
            }
        e.a = s->aff, e.b = s->aff + d->f;
    }
    /* the workspace the caller was told of for this shape, or a temporary one */
    const plan *pl = find_plan(s, d);
    void *tmp = NULL;
    if ((!ws || !pl || pl->bytes < c.bytes) && be->frozen) {
        if (s->nspare < c.bytes) {
            free(s->spare);
            TFC_ASSERT(posix_memalign(&s->spare, 64, c.bytes + 64) == 0);
            s->nspare = c.bytes;
        }
        ws = s->spare;
    } else if (!ws || !pl || pl->bytes < c.bytes) {
        TFC_ASSERT(posix_memalign(&tmp, 64, c.bytes + 64) == 0);
        ws = tmp;
    }
    if (c.k && s->nstreams < be->threads) {
        s->streams = realloc(s->streams, sizeof *s->streams * (size_t)be->threads);
        TFC_ASSERT(s->streams);
        for (; s->nstreams < be->threads; s->nstreams++)
            TFC_ASSERT(dnnl_stream_create(&s->streams[s->nstreams], s->engine,
                                          dnnl_stream_default_flags) == dnnl_success);
    }
    if (c.k)
        run_chunks(be, s, op, &c, d, in, w, bias, out, assign, ws, later ? &e : NULL, pool,
                   pooled);
    else
        lone_call(be, s, op, &c, in, w, bias, out, assign, ws);
    /* the spare is the backend's: kept under the lock while it is read */
    const int spare = ws == s->spare;
    if (!spare) leave(be, s, saved);
    if (later && !c.k) epilogue(be, &e, 0, (int64_t)d->n * d->oh * d->ow, d->f, out);
    if (pool && !c.k) tfc_cpu_pool_forward(be, pool, out, pooled, NULL);
    /* the accumulation oneDNN does not do (the chunked filter gradient is summed already) */
    if (op == TFC_CPU_CONV_DATA && !assign)
        tfc_cpu_axpy(be, (int64_t)d->n * d->h * d->w * d->c, 1.0f, ws, out);
    else if (op == TFC_CPU_CONV_FILTER && !c.k)
        tfc_cpu_axpy(be, (int64_t)d->kh * d->kw * d->c * d->f, 1.0f, ws, out);
    if (spare) leave(be, s, saved);
    free(tmp);
    return 1;
}

int tfc_cpu_dnnl_winograd(tfc_backend *be, tfc_cpu_conv_op op, const tfc_conv_desc *d)
{
    tfc_cpu_dnnl *s = be->impl;
    if (!s) return 0;
    int saved = enter(be, s), wino = 0;
    call c;
    if (prepare(be, s, op, d, 0, &c)) wino = c.p[0]->wino && c.p[1]->wino;
    leave(be, s, saved);
    return wino;
}

/* A write of [p, p + bytes) on a frozen backend: the primitives whose kept weights it
 * overlaps reorder them again on their next call. */
void tfc_cpu_dnnl_written(tfc_backend *be, const void *p, size_t bytes)
{
    tfc_cpu_dnnl *s = be->impl;
    if (!s || !bytes) return;
    const char *a = p;
    pthread_mutex_lock(&s->lock);
    /* (fashion_mobilenet's batch-1 call spent 1.8% in the walk below, its writes all
     * activations) */
    for (int i = 0; i < CACHE_SLOTS && a < s->kept_hi && s->kept_lo < a + bytes; i++) {
        prim *q = &s->cache[i];
        size_t nw = (size_t)q->d.kh * q->d.kw * q->d.c * q->d.f * sizeof(float);
        for (int k = 0; k < KEPT; k++) {
            const char *w = (const char *)q->kept[k].src;
            if (w && a < w + nw && w < a + bytes) q->kept[k].src = NULL;
        }
    }
    pthread_mutex_unlock(&s->lock);
}

#else /* no oneDNN in this build: every convolution takes im2col + GEMM */

int tfc_cpu_dnnl_winograd(tfc_backend *be, tfc_cpu_conv_op op, const tfc_conv_desc *d)
{
    return 0;
}

int tfc_cpu_dnnl_winograd_infers(const tfc_backend *be, const tfc_conv_desc *d)
{
    return 0;
}

void tfc_cpu_dnnl_written(tfc_backend *be, const void *p, size_t bytes)
{
}

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
                      const float *in, const float *w, const float *bias,
                      const tfc_bn_params *bn, const float *residual, int flags, float *out,
                      const tfc_pool_desc *pool, float *pooled, void *ws)
{
    return 0;
}

#endif
