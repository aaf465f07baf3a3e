/* The CPU backend: host memory (64-byte aligned, so every row start a layer carves at a
 * multiple of 16 floats suits AVX-512 loads), GEMM through OpenBLAS's cblas_sgemm, and the
 * op table that gathers the other src/cpu/ files. OpenBLAS is its OpenMP build, so our
 * loops and its GEMMs share one thread pool, sized once at creation. */
#include <cblas.h>
#include <malloc.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpu/cpu_internal.h"

#ifdef TFC_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

static void cpu_destroy(tfc_backend *be)
{
    tfc_cpu_dnnl_free(be->impl);
    tfc_cpu_kept_free(be);
    free(((tfc_cpu_backend *)be)->scratch);
    free(be); /* the tfc_cpu_backend it starts */
}

/* Nothing to set: the CPU computes in float32 (there is no TF32 to allow), its sums add in
 * an order fixed by the thread count (cpu_internal.h), so runs repeat already, and it
 * allocates from the process heap without a cache for a limit to cap. */
static void cpu_configure(tfc_backend *be, const tfc_device_options *o)
{
}

/* Every op runs synchronously and reports nothing later: no error is ever pending. */
static tfc_status cpu_status(tfc_backend *be, tfc_error *err)
{
    return TFC_OK;
}

/* Buffers of at least HUGE_BYTES are 2 MiB aligned and asked for transparent huge pages
 * (Linux's madvise mode, the common default): the LSTM's and the convolutions' workspaces
 * and activations are walked with strides of pages, one TLB entry per 2 MiB instead of per
 * 4 KiB. */
#define HUGE_BYTES ((size_t)4 << 20)
#define HUGE_ALIGN ((size_t)2 << 20)

/* 64-byte aligned; 0 bytes still returns a unique pointer that free accepts. */
static void *cpu_alloc(tfc_backend *be, size_t bytes)
{
    void *p = NULL;
    if (bytes > SIZE_MAX - HUGE_ALIGN) return NULL;
    size_t rounded = bytes ? (bytes + 63) & ~(size_t)63 : 64;
#ifdef MADV_HUGEPAGE
    if (rounded >= HUGE_BYTES) {
        rounded = (rounded + HUGE_ALIGN - 1) & ~(HUGE_ALIGN - 1);
        if (posix_memalign(&p, HUGE_ALIGN, rounded) != 0) return NULL;
        (void)madvise(p, rounded, MADV_HUGEPAGE); /* a hint: without it, 4 KiB pages */
        return p;
    }
#endif
    return posix_memalign(&p, 64, rounded) == 0 ? p : NULL;
}

static void cpu_free(tfc_backend *be, void *p)
{
    /* packs kept for weights in p: their slots are free for the next weights (a predictor's
     * copy rebound for a bigger batch has its weights in a new arena) */
    if (p) tfc_cpu_kept_freed(be, p, malloc_usable_size(p));
    free(p);
}

/* Copies and fills of large buffers (an Add's first input, a Flatten, a gradient block)
 * run on every thread, each on its own 64-byte-aligned slice: one thread's memcpy leaves
 * the others spinning at the next parallel region. Overlapping ranges take memmove. */
#define PAR_BYTES (256 * 1024)

static int byte_threads(const tfc_backend *be, size_t bytes)
{
    return bytes >= PAR_BYTES ? tfc_cpu_threads(be, (int64_t)(bytes / 4)) : 1;
}

static void cpu_copy(tfc_backend *be, void *dst, const void *src, size_t bytes)
{
    if (!bytes || dst == src) return;
    if (be->frozen) tfc_cpu_dnnl_written(be, dst, bytes);
    tfc_cpu_kept_written(be, dst, bytes);
    char *d = dst;
    const char *s = src;
    int nt = d < s + bytes && s < d + bytes ? 1 : byte_threads(be, bytes);
    if (nt == 1) {
        memmove(dst, src, bytes);
        return;
    }
#pragma omp parallel num_threads(tfc_cpu_team(nt))
    {
        size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
        size_t lo = t ? (bytes * t / T) & ~(size_t)63 : 0;
        size_t hi = t + 1 < T ? (bytes * (t + 1) / T) & ~(size_t)63 : bytes;
        if (hi > lo) memcpy(d + lo, s + lo, hi - lo);
    }
}

static void cpu_zero(tfc_backend *be, void *p, size_t bytes)
{
    if (!bytes) return;
    if (be->frozen) tfc_cpu_dnnl_written(be, p, bytes);
    tfc_cpu_kept_written(be, p, bytes);
    int nt = byte_threads(be, bytes);
    if (nt == 1) {
        memset(p, 0, bytes);
        return;
    }
    char *d = p;
#pragma omp parallel num_threads(tfc_cpu_team(nt))
    {
        size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
        size_t lo = t ? (bytes * t / T) & ~(size_t)63 : 0;
        size_t hi = t + 1 < T ? (bytes * (t + 1) / T) & ~(size_t)63 : bytes;
        if (hi > lo) memset(d + lo, 0, hi - lo);
    }
}

static void cpu_sync(tfc_backend *be)
{
}

/* Blocks a GEMM is split into: OpenBLAS's own threads split the work evenly and wait for
 * each other (spinning) while sharing packed panels, so one thread that another process
 * descheduled stalls them all. Blocks that threads claim as they finish keep a busy
 * machine's slow thread from holding up the rest. Each block is a single-threaded GEMM that
 * packs all of the operand it shares with the others, so C is split along its longer side
 * (rows of op(A) when m >= n, else columns of op(B)), which duplicates the smaller operand.
 * Two blocks per thread: four packed the shared operand twice as often (mnist_mlp's steps,
 * 4 against 2 alternating in one process: 3-4% slower quiet, level beside a one-core busy
 * loop, where one block per thread took twice as long). Blocks are GEMM_BLOCK_MIN rows or
 * columns at least; below GEMM_PAR_MIN multiply-adds, or with too little for two blocks per
 * thread, OpenBLAS decides alone. */
#define GEMM_BLOCK_MIN 32
#define GEMM_PAR_MIN ((int64_t)1 << 21)

static _Atomic int gemm_blocks_forced; /* tfc_cpu_gemm_blocks_force; 0: by the threads */

void tfc_cpu_gemm_blocks_force(int blocks)
{
    gemm_blocks_forced = blocks > 0 ? blocks : 0;
}

static int gemm_blocks(const tfc_backend *be, int m, int n, int k)
{
    const int forced = gemm_blocks_forced, want = forced ? forced : 2 * be->threads;
    if ((!forced && be->threads <= 1) || (int64_t)m * n * k < GEMM_PAR_MIN ||
        omp_get_level() > 0)
        return 1;
    int blocks = want, side = m >= n ? m : n;
    if (blocks > side / GEMM_BLOCK_MIN) blocks = side / GEMM_BLOCK_MIN;
    return blocks >= want ? blocks : 1;
}

/* One row of C (m == 1 and A not transposed: a Dense layer, or an attention projection, on
 * one row) as a GEMV: it reads B once, where OpenBLAS's GEMM first packs all of B into panels (at
 * batch 1 the packing took 40% of fashion_mlp's time, perf). The columns of C are split into
 * blocks, one per backend thread, from GEMV_PAR_MIN multiply-adds (a megabyte of B: tens of
 * microseconds on one core, against the few that waking the team costs), and below that, or
 * inside a region, run on the calling thread; each block is a single-threaded OpenBLAS GEMV,
 * so the results depend on the backend's thread count only. */
#define GEMV_PAR_MIN ((int64_t)1 << 18)
#define GEMV_BLOCK_MIN 16

/* Columns [j0, j1) of gemv_row's product, one single-threaded OpenBLAS GEMV. */
static void gemv_block(int trans_b, int j0, int j1, int k, float alpha, const float *a,
                       const float *b, int ldb, float beta, float *c)
{
    if (trans_b) /* B [n, k]: c[j] = alpha b[j,:] . a + beta c[j] */
        cblas_sgemv(CblasRowMajor, CblasNoTrans, j1 - j0, k, alpha, b + (int64_t)j0 * ldb, ldb,
                    a, 1, beta, c + j0, 1);
    else /* B [k, n]: c = alpha a B + beta c */
        cblas_sgemv(CblasRowMajor, CblasTrans, k, j1 - j0, alpha, b + j0, ldb, a, 1, beta,
                    c + j0, 1);
}

static void gemv_row(tfc_backend *be, int trans_b, int n, int k, float alpha, const float *a,
                     const float *b, int ldb, float beta, float *c)
{
    const int forced = gemm_blocks_forced, want = forced ? forced : be->threads;
    int blocks = (int64_t)n * k >= GEMV_PAR_MIN && omp_get_level() == 0 ? want : 1;
    if (blocks > n / GEMV_BLOCK_MIN) blocks = n / GEMV_BLOCK_MIN;
    if (blocks < 1) blocks = 1;
    if (be->threads == 1 || omp_get_level() > 0) { /* no region: OpenBLAS runs on one thread */
        for (int q = 0; q < blocks; q++) /* (more than one only as tfc_cpu_gemm_blocks_force) */
            gemv_block(trans_b, (int)((int64_t)n * q / blocks),
                       (int)((int64_t)n * (q + 1) / blocks), k, alpha, a, b, ldb, beta, c);
        return;
    }
    /* Several backend threads: the blocks in a region, even a one-thread one (blocks 1). Out
     * of a region OpenBLAS would see omp_set_num_threads(1)'s count change on every call and
     * reset its own: fashion_mlp's batch-1 call at 2 threads took 0.070-0.078 ms that way
     * against 0.048-0.054 in the region (bench_infer, best of 3, quiet VM, 2026-11-28). */
    const int saved = omp_get_max_threads();
    if (saved != 1) omp_set_num_threads(1);
#pragma omp parallel for num_threads(tfc_cpu_team(blocks)) if (blocks > 1) schedule(static, 1)
    for (int q = 0; q < blocks; q++)
        gemv_block(trans_b, (int)((int64_t)n * q / blocks), (int)((int64_t)n * (q + 1) / blocks),
                   k, alpha, a, b, ldb, beta, c);
    if (saved != 1) omp_set_num_threads(saved);
}

/* One GEMM on the calling thread's terms (one thread inside a region or under
 * omp_set_num_threads(1); the backend's threads otherwise): oneDNN's dnnl_sgemm where it was
 * measured faster, else OpenBLAS's. oneDNN's JIT kernels beat OpenBLAS 0.3.21's Zen kernels
 * by 1.1-1.7x with op(A) = A and a short k (a Dense layer's forward and input gradient over
 * batch x time rows: fortunes_gpt's 4096 x 128 x 128 and x 512 shapes, the LSTM's 32-row
 * steps) but lose by 0.85-0.93x on a long k (784, 576) and on most of the weight gradients
 * (Aᵀ B over k = 4096 rows), which stay with OpenBLAS (docs/cpu.md, GEMM). Its sums over k
 * run in an order fixed by the shape, so results repeat for a given thread count, as
 * OpenBLAS's do. TFC_CPU_GEMM=openblas in the environment turns it off. */
static void sgemm1(const tfc_backend *be, int trans_a, int trans_b, int m, int n, int k,
                   float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                   float *c, int ldc)
{
#ifdef TFC_HAVE_DNNL
    if (((const tfc_cpu_backend *)be)->dnnl_gemm && !trans_a && (trans_b || k <= 512) &&
        m >= 16 &&
        dnnl_sgemm('N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) ==
            dnnl_success)
        return;
#else
    (void)be;
#endif
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c,
                ldc);
}

/* C[m,n] = alpha op(A) op(B) + beta C. OpenBLAS rejects k == 0 (and lda < 1) through
 * xerbla, which prints; an empty product is just C = beta C. */
void tfc_cpu_gemm(tfc_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
                  const float *a, int lda, const float *b, int ldb, float beta, float *c,
                  int ldc)
{
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        for (int i = 0; i < m; i++) {
            float *row = c + (int64_t)i * ldc;
            for (int j = 0; j < n; j++) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
        }
        return;
    }
    if (m == 1 && !trans_a) {
        gemv_row(be, trans_b, n, k, alpha, a, b, ldb, beta, c);
        return;
    }
    const int blocks = gemm_blocks(be, m, n, k), by_rows = m >= n;
    const int team = blocks > 1 ? tfc_cpu_team(be->threads) : 1;
    /* OpenBLAS runs on the calling thread alone for a GEMM under GEMM_PAR_MIN, inside a
     * region (an im2col chunk), and for blocks on a team of one (cpu_team.c): it takes a
     * team of its own where omp_in_parallel() is false, and a region of one thread is not
     * "in parallel". Its results differ in the last bits with its thread count, so what
     * runs on one thread must always: a small GEMM on the backend's threads would wake a
     * worker that the machine has no core for (and gains little on a quiet one). */
    const int lone = (blocks > 1 && team == 1) || (int64_t)m * n * k < GEMM_PAR_MIN ||
                     (omp_get_level() > 0 && !omp_in_parallel());
    const int saved = lone ? omp_get_max_threads() : 1;
    if (saved != 1) omp_set_num_threads(1);
    if (blocks <= 1) {
        sgemm1(be, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        if (saved != 1) omp_set_num_threads(saved);
        return;
    }
    /* Block q: rows (or columns) [side q / blocks, side (q + 1) / blocks) of C, a
     * single-threaded OpenBLAS call (it runs so inside a parallel region). */
#pragma omp parallel for num_threads(team) if (team > 1) schedule(dynamic, 1)
    for (int q = 0; q < blocks; q++) {
        const int side = by_rows ? m : n;
        const int s0 = (int)((int64_t)side * q / blocks);
        const int s1 = (int)((int64_t)side * (q + 1) / blocks);
        if (by_rows)
            sgemm1(be, trans_a, trans_b, s1 - s0, n, k, alpha,
                   trans_a ? a + s0 : a + (int64_t)s0 * lda, lda, b, ldb, beta,
                   c + (int64_t)s0 * ldc, ldc);
        else
            sgemm1(be, trans_a, trans_b, m, s1 - s0, k, alpha, a, lda,
                   trans_b ? b + (int64_t)s0 * ldb : b + s0, ldb, beta, c + s0, ldc);
    }
    if (saved != 1) omp_set_num_threads(saved);
}

/* gemm_weights in an inference pass, C = A B on AVX2 + FMA: B packed into panels of 16
 * columns (cpu_panel.c) and the panel kernel, every element summed over k in order from zero,
 * so the bits do not depend on the split, the thread count or the rows (an example's output
 * is the same alone and in a batch). One row (batch 1) takes the kernel's four-chain row
 * walk: a GEMV bound by reading B, faster than OpenBLAS's sgemv on the packed panels (3136 x
 * 256 from L3, one thread: 65 -> 42 us; 784 x 512: 23 -> 18). Frozen, the backend keeps the panels
 * (tfc_cpu_kept) and a call does no packing; else they are packed into the backend's scratch
 * on each call (an evaluation during training: the same values). oneDNN's sgemm and
 * OpenBLAS pack B on every call: 1.6 MB for fashion_mlp's first layer, which OpenBLAS runs
 * (k = 784 > 512, sgemm1) at 79 GFLOP/s on the Zen 4 where this kernel runs at 115 (one
 * thread, 32 x 784 x 512, B in cache). The threads take shares of the rows where there are
 * many, else of the columns (panel_share). */
#define KEPT_DENSE (-1000)

/* Rows [r0, r1) and columns [j0, j1) (j0 a multiple of 16) of g's product, in chunks of rows
 * whose part of A (at most 128 KB) stays in L2 while the kernel walks the columns' panels:
 * walking each panel pair down all of A's rows read A once per 32 columns (fortunes_gpt's
 * projections at batch 32: 4096 rows, 2 to 8 MB). */
static void panel_part(const tfc_panel_gemm *g, int r0, int r1, int j0, int j1)
{
    const int k = g->a1.k, chunk = k >= 4096 ? 8 : (32768 / k + 7) / 8 * 8;
    for (int r = r0; r < r1; r += chunk) {
        tfc_panel_gemm s = *g;
        s.m = r1 - r < chunk ? r1 - r : chunk;
        s.a1.a = g->a1.a + (int64_t)r * g->a1.lda;
        s.n = j1 - j0;
        s.packed = g->packed + (size_t)j0 * g->ldp;
        s.c = g->c + (int64_t)r * g->ldc + j0;
        tfc_cpu_panel_gemm(&s);
    }
}

/* Share t of nt: a run of rows (in multiples of 8) where there are many, else of the columns
 * (in multiples of 32, each thread then reading its part of B alone). */
static void panel_share(const tfc_panel_gemm *g, int t, int nt)
{
    if (g->m >= 64 * nt) {
        const int blocks = (g->m + 7) / 8, b0 = blocks * t / nt, b1 = blocks * (t + 1) / nt;
        const int r1 = b1 * 8 < g->m ? b1 * 8 : g->m;
        if (b0 * 8 < r1) panel_part(g, b0 * 8, r1, 0, g->n);
        return;
    }
    const int w = g->m == 1 ? 64 : 32; /* one row: the kernel's groups of 4 panels */
    const int units = (g->n + w - 1) / w, u0 = units * t / nt, u1 = units * (t + 1) / nt;
    const int j0 = u0 * w, j1 = u1 * w < g->n ? u1 * w : g->n;
    if (j0 < j1) panel_part(g, 0, g->m, j0, j1);
}

void tfc_cpu_gemm_weights(tfc_backend *be, int trans_a, int trans_b, int m, int n, int k,
                          float alpha, const float *a, int lda, const float *b, int ldb,
                          float beta, float *c, int ldc)
{
#ifdef TFC_X86_SIMD
    if (be->inference_pass && !trans_a && !trans_b && alpha == 1.0f && beta == 0.0f && m >= 1 &&
        k > 0 && n > 0 && ldb == n && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma")) {
        tfc_cpu_backend *cb = (tfc_cpu_backend *)be;
        const size_t floats = tfc_cpu_panels_floats(k, n);
        const float *const src[2] = {b, NULL};
        const size_t bytes[2] = {(size_t)k * n * sizeof(float), 0};
        int fresh;
        float *packed = tfc_cpu_kept(be, src, bytes, KEPT_DENSE, floats, &fresh);
        if (!packed) { /* not frozen: the scratch, packed now */
            if (cb->scratch_cap < floats) {
                void *p = NULL;
                free(cb->scratch);
                cb->scratch = NULL, cb->scratch_cap = 0;
                if (posix_memalign(&p, 64, floats * sizeof(float))) goto plain;
                cb->scratch = p, cb->scratch_cap = floats;
            }
            packed = cb->scratch;
            fresh = 1;
        }
        if (fresh) tfc_cpu_pack_panels(k, n, b, ldb, 0, packed);
        const tfc_panel_gemm g = {.m = m, .n = n, .a1 = {a, lda, k, TFC_PANEL_ROWS},
                                  .packed = packed, .ldp = k, .set = 1, .c = c, .ldc = ldc};
        const int64_t least = m == 1 ? GEMV_PAR_MIN : GEMM_PAR_MIN;
        const int nt = omp_get_level() > 0 || (int64_t)m * n * k < least || n < 64
                           ? 1
                           : be->threads;
        const int team = nt > 1 ? tfc_cpu_team(nt) : 1;
        if (team == 1) /* (no OpenMP region: see TFC_CPU_FOR) */
            for (int t = 0; t < nt; t++) panel_share(&g, t, nt);
        else {
#pragma omp parallel num_threads(team)
            TFC_CPU_SHARES(t, nt) panel_share(&g, t, nt);
        }
        return;
    }
plain:
#endif
    tfc_cpu_gemm(be, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static const tfc_backend_ops cpu_ops = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .configure = cpu_configure,
    .status = cpu_status,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .sync = cpu_sync,
    .gemm = tfc_cpu_gemm,
    .gemm_weights = tfc_cpu_gemm_weights,
    .axpy = tfc_cpu_axpy,
    .add = tfc_cpu_add,
    .scale = tfc_cpu_scale,
    .bias_add = tfc_cpu_bias_add,
    .bias_grad = tfc_cpu_bias_grad,
    .copy2d = tfc_cpu_copy2d,
    .act_forward = tfc_cpu_act_forward,
    .act_backward = tfc_cpu_act_backward,
    .dropout_forward = tfc_cpu_dropout_forward,
    .dropout_backward = tfc_cpu_dropout_backward,
    .conv_workspace = tfc_cpu_conv_workspace,
    .conv_forward = tfc_cpu_conv_forward,
    .conv_backward_data = tfc_cpu_conv_backward_data,
    .conv_backward_filter = tfc_cpu_conv_backward_filter,
    .pool_forward = tfc_cpu_pool_forward,
    .pool_backward = tfc_cpu_pool_backward,
    .bn_forward_train = tfc_cpu_bn_forward_train,
    .bn_forward_infer = tfc_cpu_bn_forward_infer,
    .bn_backward = tfc_cpu_bn_backward,
    .gather = tfc_cpu_gather,
    .scatter_add = tfc_cpu_scatter_add,
    .lstm_workspace = tfc_cpu_lstm_workspace,
    .lstm_forward = tfc_cpu_lstm_forward,
    .lstm_backward = tfc_cpu_lstm_backward,
    .gru_workspace = tfc_cpu_gru_workspace,
    .gru_forward = tfc_cpu_gru_forward,
    .gru_backward = tfc_cpu_gru_backward,
    .rnn_input_forward = tfc_cpu_rnn_input_forward,
    .rnn_input_backward = tfc_cpu_rnn_input_backward,
    .bidir_forward = tfc_cpu_bidir_forward,
    .bidir_backward = tfc_cpu_bidir_backward,
    .warp_forward = tfc_cpu_warp_forward,
    .warp_backward = tfc_cpu_warp_backward,
    .contrast_forward = tfc_cpu_contrast_forward,
    .contrast_backward = tfc_cpu_contrast_backward,
    .masking_forward = tfc_cpu_masking_forward,
    .masking_backward = tfc_cpu_masking_backward,
    .pact_forward = tfc_cpu_pact_forward,
    .pact_backward = tfc_cpu_pact_backward,
    .prelu_forward = tfc_cpu_prelu_forward,
    .prelu_backward = tfc_cpu_prelu_backward,
    .penalty = tfc_cpu_penalty,
    .constrain = tfc_cpu_constrain,
    .noise_forward = tfc_cpu_noise_forward,
    .noise_backward = tfc_cpu_noise_backward,
    .groupnorm_forward = tfc_cpu_groupnorm_forward,
    .groupnorm_workspace = tfc_cpu_groupnorm_workspace,
    .groupnorm_backward = tfc_cpu_groupnorm_backward,
    .simple_rnn_workspace = tfc_cpu_simple_rnn_workspace,
    .simple_rnn_forward = tfc_cpu_simple_rnn_forward,
    .simple_rnn_backward = tfc_cpu_simple_rnn_backward,
    .rnn_dropout_workspace = tfc_cpu_rnn_dropout_workspace,
    .rnn_dropout_forward = tfc_cpu_rnn_dropout_forward,
    .rnn_dropout_backward = tfc_cpu_rnn_dropout_backward,
    .score_attention_forward = tfc_cpu_score_attention_forward,
    .score_attention_backward = tfc_cpu_score_attention_backward,
    .permute = tfc_cpu_permute,
    .l2norm_forward = tfc_cpu_l2norm_forward,
    .l2norm_backward = tfc_cpu_l2norm_backward,
    .extremum_forward = tfc_cpu_extremum_forward,
    .extremum_backward = tfc_cpu_extremum_backward,
    .conv3d_workspace = tfc_cpu_conv3d_workspace,
    .conv3d_forward = tfc_cpu_conv3d_forward,
    .conv3d_backward = tfc_cpu_conv3d_backward,
    .pool3d_forward = tfc_cpu_pool3d_forward,
    .pool3d_backward = tfc_cpu_pool3d_backward,
    .crop_resize_forward = tfc_cpu_crop_resize_forward,
    .crop_resize_backward = tfc_cpu_crop_resize_backward,
    .brightness_forward = tfc_cpu_brightness_forward,
    .brightness_backward = tfc_cpu_brightness_backward,
    .color_forward = tfc_cpu_color_forward,
    .color_backward = tfc_cpu_color_backward,
    .erasing_forward = tfc_cpu_erasing_forward,
    .erasing_backward = tfc_cpu_erasing_backward,
    .blur_forward = tfc_cpu_blur_forward,
    .blur_backward = tfc_cpu_blur_backward,
    .tone_forward = tfc_cpu_tone_forward,
    .tone_backward = tfc_cpu_tone_backward,
    .sharpen_forward = tfc_cpu_sharpen_forward,
    .sharpen_backward = tfc_cpu_sharpen_backward,
    .adaptive_pool_forward = tfc_cpu_adaptive_pool_forward,
    .adaptive_pool_backward = tfc_cpu_adaptive_pool_backward,
    .stft_workspace = tfc_cpu_stft_workspace,
    .stft_forward = tfc_cpu_stft_forward,
    .stft_backward = tfc_cpu_stft_backward,
    .elastic_forward = tfc_cpu_elastic_forward,
    .elastic_backward = tfc_cpu_elastic_backward,
    .encode_forward = tfc_cpu_encode_forward,
    .hash_cross_forward = tfc_cpu_hash_cross_forward,
    .loss = tfc_cpu_loss,
    .accuracy = tfc_cpu_accuracy,
    .sumsq = tfc_cpu_sumsq,
    .count_nonfinite = tfc_cpu_count_nonfinite,
    .optimizer_update = tfc_cpu_optimizer_update,
    .grad_sumsq = tfc_cpu_grad_sumsq,
    .step_scale = tfc_cpu_step_scale,
    .optimizer_update_at = tfc_cpu_optimizer_update_at,
    .round_bf16 = tfc_cpu_round_bf16,
    .round_f16 = tfc_cpu_round_f16,
    .loss_scale_at = tfc_cpu_loss_scale_at,
    .grouped_conv_forward = tfc_cpu_grouped_conv_forward,
    .grouped_conv_backward_data = tfc_cpu_grouped_conv_backward_data,
    .grouped_conv_backward_filter = tfc_cpu_grouped_conv_backward_filter,
    .conv1d_workspace = tfc_cpu_conv1d_workspace,
    .conv1d_forward = tfc_cpu_conv1d_forward,
    .conv1d_backward_data = tfc_cpu_conv1d_backward_data,
    .conv1d_backward_filter = tfc_cpu_conv1d_backward_filter,
    .masked_mean_forward = tfc_cpu_masked_mean_forward,
    .masked_mean_backward = tfc_cpu_masked_mean_backward,
    .depthwise_workspace = tfc_cpu_depthwise_workspace,
    .depthwise_forward = tfc_cpu_depthwise_forward,
    .depthwise_backward_data = tfc_cpu_depthwise_backward_data,
    .depthwise_backward_filter = tfc_cpu_depthwise_backward_filter,
    .upsample_forward = tfc_cpu_upsample_forward,
    .upsample_backward = tfc_cpu_upsample_backward,
    .mul = tfc_cpu_mul,
    .mul_reduce = tfc_cpu_mul_reduce,
    .layernorm_forward = tfc_cpu_layernorm_forward,
    .layernorm_workspace = tfc_cpu_layernorm_workspace,
    .layernorm_backward = tfc_cpu_layernorm_backward,
    .attention_forward = tfc_cpu_attention_forward,
    .attention_backward = tfc_cpu_attention_backward,
};

const char *tfc_cpu_blas_core(void)
{
    const char *c = openblas_get_corename();
    return c ? c : "unknown";
}

const char *tfc_cpu_blas_pick(const char *core, int avx2_fma, int avx512)
{
    /* OpenBLAS's x86 sets from Haswell up (its DYNAMIC_ARCH list); anything else on a CPU
     * with AVX2 is its fallback for a model it does not know */
    static const char *const modern[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake",
                                         "SapphireRapids", NULL};
    for (int i = 0; modern[i]; i++)
        if (!strcasecmp(core, modern[i])) return NULL;
    if (avx512) return "SkylakeX";
    if (avx2_fma) return "Haswell";
    return NULL;
}

/* tfc_cpu_blas_pick for this CPU's instruction set */
static const char *pick_here(const char *core)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init(); /* libgcc's checks include the OS's XSAVE state (XCR0) */
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    return tfc_cpu_blas_pick(core, avx2, avx512);
#else
    (void)core;
    return NULL;
#endif
}

const char *tfc_cpu_blas_better(void)
{
    const char *set = getenv("OPENBLAS_CORETYPE");
    if (set && *set) return NULL;
    return pick_here(tfc_cpu_blas_core());
}

const char *tfc_cpu_blas_fallback(void)
{
    const char *was = getenv("TFC_BLAS_FALLBACK"), *set = getenv("OPENBLAS_CORETYPE");
    if (!was || !set) return NULL;
    const char *better = pick_here(was);
    return better && !strcmp(better, set) ? was : NULL;
}

void tfc_cpu_blas_restart(char **argv)
{
    const char *better = tfc_cpu_blas_better();
    if (!better) return;
    if (setenv("TFC_BLAS_FALLBACK", tfc_cpu_blas_core(), 1) ||
        setenv("OPENBLAS_CORETYPE", better, 1))
        return;
    fflush(NULL);
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("TFC_BLAS_FALLBACK");
}

tfc_backend *tfc_cpu_backend_create(int threads)
{
    tfc_cpu_backend *cb = calloc(1, sizeof *cb);
    TFC_ASSERT(cb != NULL);
    tfc_backend *be = &cb->be;
    if (threads <= 0) threads = omp_get_num_procs();
    if (threads < 1) threads = 1;
    /* One pool: OpenBLAS's OpenMP build follows omp_set_num_threads for the calling
     * thread; openblas_set_num_threads also caps its own count. Our loops pass the
     * number explicitly (num_threads) so they do not depend on the caller's thread. */
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    /* OpenBLAS's threaded GEMM waits for every thread it asked for; a team shrunk by
     * OMP_DYNAMIC=true would leave it spinning forever. */
    omp_set_dynamic(0);
    be->ops = &cpu_ops;
    be->device = -1;
    be->threads = threads;
    be->lstm_ids = tfc_cpu_lstm_ids;
    be->acts = (1u << TFC_ACT_COUNT) - 1; /* every one */
    be->losses = (1u << TFC_LOSS_COUNT) - 1;
    be->impl = tfc_cpu_dnnl_create(); /* NULL: convolutions by im2col + GEMM */
    const char *gemm = getenv("TFC_CPU_GEMM");
    cb->dnnl_gemm = !(gemm && !strcmp(gemm, "openblas"));
    const char *conv = getenv("TFC_CPU_CONV"); /* direct or im2col: no Winograd of ours */
    cb->winograd = !(conv && (!strcmp(conv, "direct") || !strcmp(conv, "im2col")));
    return be;
}
