/* CPU 2-D convolution: through oneDNN where the build has it (cpu_dnnl.c; each entry point
 * below tries it first), else, and for shapes oneDNN declines, by im2col + GEMM.
 * With K = kh*kw*c, each output pixel's receptive
 * field is one row of `col` [pixels, K] in the kernel's own (ki, kj, ci) order, so
 *   forward  y[pixels, f]   = col · W[K, f]
 *   filter   dW[K, f]      += colᵀ · dy
 *   data     dcol[pixels, K] = dy · Wᵀ, scattered back (col2im) into dx
 * With at least as many images as threads, each thread takes whole chunks of images with
 * its own slice of col, sized to stay in its core's cache, and runs single-threaded GEMMs
 * (OpenBLAS does inside a parallel region). Threads claim chunks dynamically, so one that
 * another process descheduled takes fewer (on a busy machine a static split waits for the
 * slowest thread); filter gradients go to partials per fixed run of chunks ("slot"), each
 * summed in chunk order and added in slot order, so the result does not depend on which
 * thread ran what. With fewer images, one shared chunk feeds multithreaded GEMMs. A 1x1,
 * stride-1, unpadded convolution is a plain GEMM on x and needs no col; a short K (a first
 * layer's few channels) uses small register-blocked loops instead of OpenBLAS. */
#include <limits.h>
#include <omp.h>
#include <stdlib.h>

#include "cpu/cpu_internal.h"

/* col bytes per thread in per-thread mode: with the packed kernel it fits a 1 MB L2. */
#define LOCAL_COL_BYTES ((size_t)512 << 10)
/* Upper bound on the shared col chunk: large GEMMs, still resident in the last level. */
#define SHARED_COL_BYTES ((size_t)8 << 20)

static int is_pointwise(const tfc_conv_desc *d)
{
    return d->kh == 1 && d->kw == 1 && d->sh == 1 && d->sw == 1 && d->pad_top == 0 &&
           d->pad_left == 0 && d->oh == d->h && d->ow == d->w;
}

static int64_t col_width(const tfc_conv_desc *d)
{
    return (int64_t)d->kh * d->kw * d->c;
}

/* Filter-gradient slots per thread: enough runs of chunks to even out a slow thread. */
#define SLOTS_PER_THREAD 4

/* How an op walks the batch: `local` (per-thread chunks) or shared; `nb` images per chunk;
 * `col_floats` of workspace per thread for its col; in local mode then `slots` dW partials
 * of `part_floats` each. */
typedef struct conv_plan {
    int local, threads, nb, chunks, slots;
    int64_t col_floats, part_floats;
} conv_plan;

static conv_plan make_plan(const tfc_backend *be, const tfc_conv_desc *d)
{
    conv_plan p;
    const int64_t pixels = (int64_t)d->oh * d->ow;
    const size_t per_image = (size_t)(pixels * col_width(d)) * sizeof(float);
    p.local = d->n >= be->threads && per_image <= SHARED_COL_BYTES / 2;
    p.threads = p.local ? be->threads : 1;
    int64_t nb = per_image ? (int64_t)((p.local ? LOCAL_COL_BYTES : SHARED_COL_BYTES) / per_image)
                           : d->n;
    if (p.local && nb > d->n / p.threads) nb = d->n / p.threads; /* every thread gets work */
    if (nb > d->n) nb = d->n;
    if (pixels > 0 && nb > INT_MAX / pixels) nb = INT_MAX / pixels; /* GEMM rows fit an int */
    p.nb = nb < 1 ? 1 : (int)nb;
    /* 16-float multiples keep every slice 64-byte aligned */
    p.col_floats = ((int64_t)p.nb * pixels * col_width(d) + 15) & ~(int64_t)15;
    p.chunks = (d->n + p.nb - 1) / p.nb;
    p.slots = p.threads * SLOTS_PER_THREAD < p.chunks ? p.threads * SLOTS_PER_THREAD : p.chunks;
    p.part_floats = p.local ? (col_width(d) * d->f + 15) & ~(int64_t)15 : 0;
    return p;
}

static size_t im2col_workspace(const tfc_backend *be, const tfc_conv_desc *d)
{
    if (is_pointwise(d) || d->n <= 0) return 0;
    conv_plan p = make_plan(be, d);
    return ((size_t)p.threads * (size_t)p.col_floats + (size_t)p.slots * (size_t)p.part_floats) *
           sizeof(float);
}

size_t tfc_cpu_conv_workspace(tfc_backend *be, const tfc_conv_desc *d)
{
    size_t bytes, wino = tfc_cpu_winograd_workspace(be, d);
    if (!tfc_cpu_dnnl_conv_workspace(be, d, &bytes)) bytes = im2col_workspace(be, d);
    return bytes > wino ? bytes : wino;
}

/* dst[0..n) = src[0..n): short runs (a first layer's few channels) inline, long ones by
 * memcpy, whose call costs more than copying a dozen floats. */
static inline void copy_floats(float *dst, const float *src, int n)
{
    if (n > 32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
        return;
    }
#pragma omp simd
    for (int j = 0; j < n; j++) dst[j] = src[j];
}

/* Output row oy of one image into col: ow rows of K floats; padding reads as zero. */
static void im2col_row(const tfc_conv_desc *d, const float *img, int oy, float *col)
{
    const int c = d->c, kw = d->kw;
    const size_t seg = (size_t)c * sizeof(float);
    const int64_t K = col_width(d);
    for (int ox = 0; ox < d->ow; ox++) {
        float *dst = col + ox * K;
        int ix0 = ox * d->sw - d->pad_left;
        for (int ki = 0; ki < d->kh; ki++, dst += (int64_t)kw * c) {
            int iy = oy * d->sh - d->pad_top + ki * d->dh;
            if (iy < 0 || iy >= d->h) {
                memset(dst, 0, kw * seg);
                continue;
            }
            const float *src = img + (int64_t)iy * d->w * c;
            if (d->dw == 1 && ix0 >= 0 && ix0 + kw <= d->w) {
                copy_floats(dst, src + (int64_t)ix0 * c, kw * c);
                continue;
            }
            for (int kj = 0; kj < kw; kj++) {
                int ix = ix0 + kj * d->dw;
                if (ix < 0 || ix >= d->w)
                    memset(dst + (int64_t)kj * c, 0, seg);
                else
                    copy_floats(dst + (int64_t)kj * c, src + (int64_t)ix * c, c);
            }
        }
    }
}

/* col [count images x oh*ow, K] from `count` images of x, on nt threads. */
static void im2col(const tfc_conv_desc *d, const float *x, int count, float *col, int nt)
{
    const int64_t img_in = (int64_t)d->h * d->w * d->c;
    const int64_t row_out = (int64_t)d->ow * col_width(d);
    const int64_t rows = (int64_t)count * d->oh;
    TFC_CPU_FOR(rows, nt, for (int64_t r = 0; r < rows; r++) {
        int64_t i = r / d->oh;
        int oy = (int)(r % d->oh);
        im2col_row(d, x + i * img_in, oy, col + r * row_out);
    });
}

/* Input row iy of one image += every col entry that im2col read from it. Working per input
 * row makes rows independent, so they run in parallel without write conflicts. Each entry
 * read is reset to 0, so the next chunk's GEMM can accumulate (beta 1) into col instead of
 * paying OpenBLAS a separate pass to clear it; entries no input cell maps to (padding)
 * are never read, so what piles up there is harmless. */
static void col2im_row(const tfc_conv_desc *d, float *col, int iy, float *dst)
{
    const int c = d->c, kw = d->kw;
    const int64_t K = col_width(d);
    for (int ki = 0; ki < d->kh; ki++) {
        int t = iy + d->pad_top - ki * d->dh;
        if (t < 0 || t % d->sh) continue;
        int oy = t / d->sh;
        if (oy >= d->oh) continue;
        for (int ox = 0; ox < d->ow; ox++) {
            float *src = col + ((int64_t)oy * d->ow + ox) * K + (int64_t)ki * kw * c;
            int ix0 = ox * d->sw - d->pad_left;
            if (d->dw == 1 && ix0 >= 0 && ix0 + kw <= d->w) {
                float *o = dst + (int64_t)ix0 * c;
#pragma omp simd
                for (int j = 0; j < kw * c; j++) {
                    o[j] += src[j];
                    src[j] = 0.0f;
                }
                continue;
            }
            for (int kj = 0; kj < kw; kj++) {
                int ix = ix0 + kj * d->dw;
                if (ix < 0 || ix >= d->w) continue;
                float *o = dst + (int64_t)ix * c;
                float *s = src + (int64_t)kj * c;
#pragma omp simd
                for (int ch = 0; ch < c; ch++) {
                    o[ch] += s[ch];
                    s[ch] = 0.0f;
                }
            }
        }
    }
}

/* dx of `count` images += col2im(col), on nt threads; leaves what it read at 0. With assign
 * dx =: each row is zeroed just before its sums, while in cache (a zeroing pass over all of
 * dx first wrote it to memory: 8 MiB at each of resnet20's stride-2 shortcuts). */
static void col2im(const tfc_conv_desc *d, float *col, int count, float *dx, int nt,
                   int assign)
{
    const int64_t img_in = (int64_t)d->h * d->w * d->c;
    const int64_t img_col = (int64_t)d->oh * d->ow * col_width(d);
    const int64_t rows = (int64_t)count * d->h;
#pragma omp parallel for num_threads(tfc_cpu_team(nt)) if (nt > 1) \
    schedule(static, tfc_cpu_share(rows, nt))
    for (int64_t r = 0; r < rows; r++) {
        int64_t i = r / d->h;
        int iy = (int)(r % d->h);
        float *dst = dx + i * img_in + (int64_t)iy * d->w * d->c;
        if (assign) memset(dst, 0, (size_t)d->w * d->c * sizeof(float));
        col2im_row(d, col + i * img_col, iy, dst);
    }
}

/* GEMMs with a short inner dimension (the first layer: K = kh*kw*c of 9 or 27) are memory
 * bound and OpenBLAS's packing dominates them; these plain loops are faster there. */
#define SMALL_K 32
#define SMALL_N_BLOCK 32

/* Eight floats as one GNU C vector: four of them hold 32 accumulators in registers (AVX
 * registers in the avx2 clone, pairs of SSE registers otherwise). */
typedef float v8f __attribute__((vector_size(32)));

/* c[m, n] = a[m, k] · b[k, n] for small k: each row of c in blocks of 32 accumulators. */
TFC_CPU_VECTOR
static void small_k_forward(int m, int n, int k, const float *a, const float *b, float *c)
{
    for (int i = 0; i < m; i++) {
        const float *ai = a + (int64_t)i * k;
        float *ci = c + (int64_t)i * n;
        int j0 = 0;
        for (; j0 + SMALL_N_BLOCK <= n; j0 += SMALL_N_BLOCK) {
            v8f s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
            for (int l = 0; l < k; l++) {
                const float v = ai[l], *bl = b + (int64_t)l * n + j0;
                v8f b0, b1, b2, b3;
                memcpy(&b0, bl, sizeof b0);
                memcpy(&b1, bl + 8, sizeof b1);
                memcpy(&b2, bl + 16, sizeof b2);
                memcpy(&b3, bl + 24, sizeof b3);
                s0 += v * b0;
                s1 += v * b1;
                s2 += v * b2;
                s3 += v * b3;
            }
            memcpy(ci + j0, &s0, sizeof s0);
            memcpy(ci + j0 + 8, &s1, sizeof s1);
            memcpy(ci + j0 + 16, &s2, sizeof s2);
            memcpy(ci + j0 + 24, &s3, sizeof s3);
        }
        for (int j = j0; j < n; j++) {
            float acc = 0.0f;
            for (int l = 0; l < k; l++) acc += ai[l] * b[(int64_t)l * n + j];
            ci[j] = acc;
        }
    }
}

/* dw[k, n] += a[m, k]ᵀ · g[m, n] for small k. */
TFC_CPU_VECTOR
static void small_k_filter(int m, int n, int k, const float *a, const float *g, float *dw)
{
    for (int i = 0; i < m; i++) {
        const float *ai = a + (int64_t)i * k, *gi = g + (int64_t)i * n;
        for (int l = 0; l < k; l++) {
            const float v = ai[l];
            float *dl = dw + (int64_t)l * n;
#pragma omp simd
            for (int j = 0; j < n; j++) dl[j] += v * gi[j];
        }
    }
}

/* The three ops share one walk over chunks of images. For chunk [i0, i0 + cnt) with col
 * slice `col` and (local mode) dW partial `part`, `step` does the chunk's work; `nt` is
 * the thread count it may use for its own loops (1 inside a per-thread chunk). */
typedef enum conv_op { CONV_FORWARD, CONV_DATA, CONV_FILTER } conv_op;

typedef struct conv_args {
    const tfc_conv_desc *d;
    const float *x, *w, *dy;
    float *y, *dx, *dw;
    int assign; /* CONV_DATA: dx = (its old contents never read) instead of += */
} conv_args;

static void step(tfc_backend *be, conv_op op, const conv_args *a, int i0, int cnt, float *col,
                 float *part, int nt)
{
    const tfc_conv_desc *d = a->d;
    const int64_t img_in = (int64_t)d->h * d->w * d->c, pixels = (int64_t)d->oh * d->ow;
    const int K = (int)col_width(d), rows = (int)(cnt * pixels);
    switch (op) {
    case CONV_FORWARD: /* y = col · W */
        im2col(d, a->x + i0 * img_in, cnt, col, nt);
        if (K <= SMALL_K && nt == 1)
            small_k_forward(rows, d->f, K, col, a->w, a->y + i0 * pixels * d->f);
        else
            tfc_cpu_gemm(be, 0, 0, rows, d->f, K, 1.0f, col, K, a->w, d->f, 0.0f,
                         a->y + i0 * pixels * d->f, d->f);
        break;
    case CONV_DATA: /* dcol = dy · Wᵀ (col is 0 where col2im reads), dx += col2im(dcol) */
        tfc_cpu_gemm(be, 0, 1, rows, K, d->f, 1.0f, a->dy + i0 * pixels * d->f, d->f, a->w,
                     d->f, 1.0f, col, K);
        col2im(d, col, cnt, a->dx + i0 * img_in, nt, a->assign);
        break;
    case CONV_FILTER: /* dW += colᵀ · dy (into the thread's partial in local mode) */
        im2col(d, a->x + i0 * img_in, cnt, col, nt);
        if (K <= SMALL_K && part)
            small_k_filter(rows, d->f, K, col, a->dy + i0 * pixels * d->f, part);
        else
            tfc_cpu_gemm(be, 1, 0, K, d->f, rows, 1.0f, col, K, a->dy + i0 * pixels * d->f,
                         d->f, 1.0f, part ? part : a->dw, d->f);
        break;
    }
}

/* Images per GEMM for the pointwise case, so that rows (images * h * w) fit an int. */
static int pointwise_chunk(const tfc_conv_desc *d)
{
    int64_t pixels = (int64_t)d->h * d->w;
    int64_t nb = pixels > 0 ? INT_MAX / pixels : d->n;
    if (nb > d->n) nb = d->n;
    return nb < 1 ? 1 : (int)nb;
}

/* 1x1 stride 1: x [n*h*w, c] is col itself. Threaded GEMMs over all pixels. */
static void pointwise(tfc_backend *be, conv_op op, const conv_args *a)
{
    const tfc_conv_desc *d = a->d;
    const int64_t pixels = (int64_t)d->h * d->w;
    const int nb = pointwise_chunk(d), c = d->c, f = d->f;
    for (int i0 = 0; i0 < d->n; i0 += nb) {
        int rows = (int)((d->n - i0 < nb ? d->n - i0 : nb) * pixels);
        const int64_t o = i0 * pixels;
        if (op == CONV_FORWARD)
            tfc_cpu_gemm(be, 0, 0, rows, f, c, 1.0f, a->x + o * c, c, a->w, f, 0.0f,
                         a->y + o * f, f);
        else if (op == CONV_DATA)
            tfc_cpu_gemm(be, 0, 1, rows, c, f, 1.0f, a->dy + o * f, f, a->w, f,
                         a->assign ? 0.0f : 1.0f, a->dx + o * c, c);
        else
            tfc_cpu_gemm(be, 1, 0, c, f, rows, 1.0f, a->x + o * c, c, a->dy + o * f, f, 1.0f,
                         a->dw, f);
    }
}

/* Item i of a call's work on the calling thread: chunk i of images (an im2col into col and a
 * single-threaded GEMM), or for the filter gradient slot i (its run of chunks summed into
 * partial i). */
static void run_item(tfc_backend *be, conv_op op, const conv_args *a, const conv_plan *p,
                     float *col, float *parts, int i)
{
    const tfc_conv_desc *d = a->d;
    if (op != CONV_FILTER) {
        const int i0 = i * p->nb;
        step(be, op, a, i0, d->n - i0 < p->nb ? d->n - i0 : p->nb, col, NULL, 1);
        return;
    }
    /* slot i: chunks [chunks i / slots, chunks (i + 1) / slots) into partial i */
    float *part = parts + (int64_t)i * p->part_floats;
    memset(part, 0, (size_t)col_width(d) * d->f * sizeof(float));
    for (int ch = (int)((int64_t)p->chunks * i / p->slots);
         ch < (int)((int64_t)p->chunks * (i + 1) / p->slots); ch++) {
        const int i0 = ch * p->nb;
        step(be, op, a, i0, d->n - i0 < p->nb ? d->n - i0 : p->nb, col, part, 1);
    }
}

/* The items a thread of a team of `team` claims as it finishes one, with its own col; on
 * one thread all of them, in order, outside OpenMP (where an orphaned dynamic loop would
 * allocate its bookkeeping). */
static void run_items(tfc_backend *be, conv_op op, const conv_args *a, const conv_plan *p,
                      float *col, float *parts, int team)
{
    const int items = op == CONV_FILTER ? p->slots : p->chunks;
    if (op == CONV_DATA) memset(col, 0, (size_t)p->col_floats * sizeof(float));
    if (team > 1) {
#pragma omp for schedule(dynamic, 1)
        for (int i = 0; i < items; i++) run_item(be, op, a, p, col, parts, i);
    } else {
        for (int i = 0; i < items; i++) run_item(be, op, a, p, col, parts, i);
    }
}

static void run(tfc_backend *be, conv_op op, const conv_args *a, void *ws)
{
    const tfc_conv_desc *d = a->d;
    if (d->n <= 0 || d->oh <= 0 || d->ow <= 0) return;
    if (is_pointwise(d)) {
        pointwise(be, op, a);
        return;
    }
    const conv_plan p = make_plan(be, d);
    float *base = ws;
    if (op == CONV_DATA && !p.local) memset(base, 0, (size_t)p.col_floats * sizeof(float));
    if (!p.local) {
        for (int i0 = 0; i0 < d->n; i0 += p.nb)
            step(be, op, a, i0, d->n - i0 < p.nb ? d->n - i0 : p.nb, base, NULL, be->threads);
        return;
    }
    const int64_t kf = col_width(d) * d->f;
    float *parts = base + (int64_t)p.threads * p.col_floats;
    const int team = tfc_cpu_team(p.threads);
    if (team == 1) { /* no OpenMP region: a one-thread one ends in a futex call */
        run_items(be, op, a, &p, base, parts, 1);
    } else {
#pragma omp parallel num_threads(team)
        run_items(be, op, a, &p, base + (int64_t)omp_get_thread_num() * p.col_floats, parts,
                  team);
    }
    if (op == CONV_FILTER)
        for (int q = 0; q < p.slots; q++) {
            const float *part = parts + (int64_t)q * p.part_floats;
            for (int64_t i = 0; i < kf; i++) a->dw[i] += part[i];
        }
}

/* im2col for a call oneDNN declined. A shape oneDNN refuses outright was planned for
 * im2col; for one it took when the workspace was planned, that workspace is oneDNN's. */
static void run_im2col(tfc_backend *be, conv_op op, const conv_args *a, void *ws)
{
    void *own = NULL;
    if (be->impl && !tfc_cpu_dnnl_refuses(a->d)) {
        size_t need = im2col_workspace(be, a->d);
        if (need) {
            own = malloc(need);
            TFC_ASSERT(own != NULL);
        }
        ws = own;
    }
    run(be, op, a, ws);
    free(own);
}

/* y[n, oh, ow, f] = act(bn(conv(x, w) + bias) + residual) (overwrites y). oneDNN adds the
 * bias, applies the normalisation (a multiply, then an add: bn_forward_infer's two
 * roundings), adds the residual (its sum post-op, on y filled with the residual first) and
 * applies ReLU in its kernel's epilogue, on each output block while it is in registers,
 * where separate passes would stream y through memory once each; relu6 comes in tfc's own
 * epilogue right after the kernel, with every other step (MobileNet's 1x1 convolutions), and
 * other activations take act_forward after. Each step rounds as its separate pass does, so
 * the value is the one the separate passes give, but for NaN: oneDNN's ReLU post-op in its
 * AVX-512 kernels makes it 0, where act_forward keeps it (docs/cpu.md, "The last gaps at
 * batch 1"). Inference passes on AVX2 + FMA take tfc's own kernels first where they apply:
 * one input channel (cpu_conv_c1.c), pointwise (cpu_conv_1x1.c), Winograd (cpu_winograd.c);
 * each applies the whole epilogue in registers. */
void tfc_cpu_conv_forward(tfc_backend *be, const tfc_conv_desc *d, const float *x,
                          const float *w, const float *bias, const tfc_bn_params *bn,
                          const float *residual, tfc_act act, float *y,
                          const tfc_pool_desc *pool, float *pooled, void *ws)
{
    const int64_t rows = (int64_t)d->n * d->oh * d->ow;
    const int relu = act == TFC_ACT_RELU || act == TFC_ACT_RELU6;
    /* what the convolution's call did not apply (the pooling: after the activation) */
    const tfc_bn_params *bn_left = NULL;
    const float *res_left = NULL;
    int act_left = act != TFC_ACT_LINEAR && !relu;
    const tfc_pool_desc *pool_left = pool;
    const int flags = act == TFC_ACT_RELU ? TFC_CPU_CONV_RELU
                      : act == TFC_ACT_RELU6 ? TFC_CPU_CONV_RELU6
                                             : 0;
    const int c1 = tfc_cpu_conv_c1_forward(be, d, x, w, bias, bn, residual,
                                           act_left ? TFC_ACT_LINEAR : act, y,
                                           act_left ? NULL : pool, pooled);
    if (c1 == 2) {
        pool_left = NULL; /* pooled too */
    } else if (c1 ||
        tfc_cpu_conv_1x1_forward(be, d, x, w, bias, bn, residual, act_left ? TFC_ACT_LINEAR : act,
                                 y) ||
        tfc_cpu_winograd_forward(be, d, x, w, bias, bn, residual, act_left ? TFC_ACT_LINEAR : act,
                                 y, ws)) {
        /* the activation's pass (if not ReLU or relu6) and the pooling follow */
    } else if (tfc_cpu_dnnl_conv(be, TFC_CPU_CONV_FORWARD, d, x, w, bias, bn, residual, flags, y,
                                 act_left ? NULL : pool, pooled, ws)) {
        if (!act_left) pool_left = NULL;
    } else if ((bn || residual || relu) &&
               tfc_cpu_dnnl_conv(be, TFC_CPU_CONV_FORWARD, d, x, w, bias, NULL, NULL, 0, y,
                                 NULL, NULL, ws)) {
        bn_left = bn, res_left = residual; /* oneDNN without the post-ops */
        act_left = act != TFC_ACT_LINEAR;
    } else {
        conv_args a = {.d = d, .x = x, .w = w, .y = y};
        run_im2col(be, CONV_FORWARD, &a, ws);
        if (bias) tfc_cpu_bias_add(be, rows, d->f, bias, y);
        bn_left = bn, res_left = residual;
        act_left = act != TFC_ACT_LINEAR;
    }
    if (bn_left)
        tfc_cpu_bn_forward_infer(be, rows, d->f, y, bn_left->gamma, bn_left->beta, bn_left->mean,
                                 bn_left->var, bn_left->eps, y);
    if (res_left) tfc_cpu_axpy(be, rows * d->f, 1.0f, res_left, y);
    if (act_left) tfc_cpu_act_forward(be, act, rows * d->f, d->f, y, y);
    if (pool_left) tfc_cpu_pool_forward(be, pool_left, y, pooled, NULL);
}

/* dx += conv_transpose(dy, w), or dx = with assign (oneDNN then writes dx itself, instead
 * of a buffer added to it) */
void tfc_cpu_conv_backward_data(tfc_backend *be, const tfc_conv_desc *d, const float *dy,
                                const float *w, float *dx, int assign, void *ws)
{
    if (tfc_cpu_dnnl_conv(be, TFC_CPU_CONV_DATA, d, dy, w, NULL, NULL, NULL,
                          assign ? TFC_CPU_CONV_ASSIGN : 0, dx, NULL, NULL, ws))
        return;
    conv_args a = {.d = d, .dy = dy, .w = w, .dx = dx, .assign = assign};
    run_im2col(be, CONV_DATA, &a, ws);
}

/* dw[kh, kw, c, f] += colᵀ · dy */
void tfc_cpu_conv_backward_filter(tfc_backend *be, const tfc_conv_desc *d, const float *x,
                                  const float *dy, float *dw, void *ws)
{
    if (tfc_cpu_dnnl_conv(be, TFC_CPU_CONV_FILTER, d, x, dy, NULL, NULL, NULL, 0, dw, NULL,
                          NULL, ws))
        return;
    conv_args a = {.d = d, .x = x, .dy = dy, .dw = dw};
    run_im2col(be, CONV_FILTER, &a, ws);
}
