/* Private to the CPU backend: the ops each src/cpu/ file contributes to the table in
 * cpu_backend.c, the size below which a loop stays on one thread, and vectorisable
 * float math (exp, sigmoid, tanh) for the loops that `#pragma omp simd` turns into SIMD
 * code; libm's expf/tanhf are scalar calls and would dominate LSTM and softmax time. */
#ifndef TFC_CPU_CPU_INTERNAL_H
#define TFC_CPU_CPU_INTERNAL_H

#include <math.h>
#include <stdint.h>
#include <omp.h>
#include <string.h>

#include "core/backend.h"
#include "cpu/cpu.h"
#include "core/vector.h"

/* Functions with hot SIMD loops (exp, sigmoid, Philox): an AVX2 clone (core/vector.h). */
#define TFC_CPU_VECTOR TFC_VECTOR

/* `omp simd` asks for vectors where they pay; clang warns when it cannot oblige (a loop
 * with a libm call), which is expected here and not worth a warning in every build. */
#ifdef __clang__
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

/* Convolutions through oneDNN where the build has it (cpu_dnnl.c); the state lives in the
 * backend's impl, NULL when oneDNN is absent or TFC_CPU_CONV=im2col. The three ops take
 * (in, w, out) as: forward (x, w, y); data (dy, w, dx, accumulated); filter (x, dy, dw,
 * accumulated, or with TFC_CPU_CONV_ASSIGN in `flags` overwritten); forward adds `bias`,
 * applies `bn`, adds `residual` (NULL: none of these) and applies ReLU (TFC_CPU_CONV_RELU)
 * in the kernel's epilogue, or relu6 (TFC_CPU_CONV_RELU6, in tfc's epilogue after the
 * kernel, which then applies every step: oneDNN's post-ops are left out), then with `pool` (NULL: none) writes pool_forward's result of
 * that to `pooled` instead, `out` being scratch. Both calls return
 * 0 where oneDNN does not take the shape (or its post-ops), and the caller falls back to
 * fewer post-ops or to im2col + GEMM. */
typedef enum tfc_cpu_conv_op {
    TFC_CPU_CONV_FORWARD,
    TFC_CPU_CONV_DATA,
    TFC_CPU_CONV_FILTER
} tfc_cpu_conv_op;
typedef struct tfc_cpu_dnnl tfc_cpu_dnnl;
/* Shapes oneDNN is never given (cpu_dnnl.c says why): a 1x1 kernel with a stride, unless
 * its channels are a multiple of 16. */
static inline int tfc_cpu_dnnl_refuses(const tfc_conv_desc *d)
{
    return d->kh == 1 && d->kw == 1 && (d->sh > 1 || d->sw > 1) && d->c % 16 != 0;
}
tfc_cpu_dnnl *tfc_cpu_dnnl_create(void);
void tfc_cpu_dnnl_free(tfc_cpu_dnnl *s);
int tfc_cpu_dnnl_conv_workspace(tfc_backend *be, const tfc_conv_desc *d, size_t *bytes);
/* Whether op on d runs as Winograd's convolution (cpu_dnnl.c; for the tests). */
int tfc_cpu_dnnl_winograd(tfc_backend *be, tfc_cpu_conv_op op, const tfc_conv_desc *d);
/* Whether an inference pass's forward convolution on d runs as oneDNN's Winograd on be (its
 * instruction set, shape and split of the batch; cpu_winograd.c takes the others). */
int tfc_cpu_dnnl_winograd_infers(const tfc_backend *be, const tfc_conv_desc *d);
/* On a frozen backend (core/backend.h), upload, copy and zero report what they wrote. */
void tfc_cpu_dnnl_written(tfc_backend *be, const void *p, size_t bytes);
enum { TFC_CPU_CONV_RELU = 1, TFC_CPU_CONV_ASSIGN = 2, TFC_CPU_CONV_RELU6 = 4 };
int tfc_cpu_dnnl_conv(tfc_backend *be, tfc_cpu_conv_op op, const tfc_conv_desc *d,
                      const float *in, const float *w, const float *bias,
                      const tfc_bn_params *bn, const float *residual, int flags, float *out,
                      const tfc_pool_desc *pool, float *pooled, void *ws);
#ifdef TFC_X86_SIMD
#include <immintrin.h>

/* A convolution's epilogue on eight channels from k in a register (cpu_winograd.c,
 * cpu_conv_c1.c), each step rounded as its op: bias_add, bn_forward_infer's map (a, b),
 * axpy of 1 (res), act_forward's ReLU or relu6 (NaN and -0 stay); NULL: the step left out. */
static inline __attribute__((always_inline, target("avx2,fma"))) __m256
tfc_cpu_finish8(__m256 v, int k, const float *bias, const float *a, const float *b,
                const float *res, tfc_act act)
{
    if (bias) v = _mm256_add_ps(v, _mm256_loadu_ps(bias + k));
    if (a) v = _mm256_add_ps(_mm256_mul_ps(v, _mm256_loadu_ps(a + k)), _mm256_loadu_ps(b + k));
    if (res) v = _mm256_add_ps(v, _mm256_loadu_ps(res + k));
    if (act != TFC_ACT_LINEAR) {
        v = _mm256_andnot_ps(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ), v);
        if (act == TFC_ACT_RELU6) {
            const __m256 six = _mm256_set1_ps(6.0f);
            v = _mm256_blendv_ps(v, six, _mm256_cmp_ps(v, six, _CMP_GT_OQ));
        }
    }
    return v;
}
#endif

/* A convolution of one input channel for inference passes on AVX2 + FMA (cpu_conv_c1.c):
 * y = act(bn(conv(x, w) + bias) + residual), act linear, ReLU or relu6, and returns 1; or
 * with pool (a max pooling whose windows tile y: kh = sh, kw = sw, no padding) writes
 * pool_forward's result of that to pooled instead, y unwritten, and returns 2; or returns 0
 * computing nothing (not an inference pass, twice the threads in images or more without
 * such a pooling, another shape or activation, more than 256 filters or not a multiple of
 * 8). */
int tfc_cpu_conv_c1_forward(tfc_backend *be, const tfc_conv_desc *d, const float *x,
                            const float *w, const float *bias, const tfc_bn_params *bn,
                            const float *residual, tfc_act act, float *y,
                            const tfc_pool_desc *pool, float *pooled);
/* A pointwise convolution (1x1 kernel, stride 1, no padding) for inference passes on AVX2 +
 * FMA (cpu_conv_1x1.c): y = act(bn(conv(x, w) + bias) + residual), act linear, ReLU or
 * relu6, and returns 1, or returns 0 computing nothing (not an inference pass, another shape
 * or activation, filters not a multiple of 8 or more than 512, more than 1024 channels).
 * tfc_cpu_conv_1x1_isa (for the tests): 1 the AVX2 tiles, 2 the AVX-512 ones (0 where this
 * CPU lacks it), -1 the best; the bits are the same. */
int tfc_cpu_conv_1x1_forward(tfc_backend *be, const tfc_conv_desc *d, const float *x,
                             const float *w, const float *bias, const tfc_bn_params *bn,
                             const float *residual, tfc_act act, float *y);
int tfc_cpu_conv_1x1_isa(int isa);
/* Winograd's F(4x4, 3x3) or F(2x2, 3x3) forward for inference passes on AVX2 + FMA (without
 * AVX-512, or where oneDNN would not run its own Winograd; cpu_winograd.c). tfc_cpu_winograd_forward overwrites y with act(bn(conv(x, w) + bias) +
 * residual), act linear, ReLU or relu6, and returns 1, or returns 0 computing nothing: not an
 * inference pass, a shape or activation it does not take, no workspace. ws: at least
 * tfc_cpu_winograd_workspace(d) bytes, which any batch size of d's shape fits. */
int tfc_cpu_winograd_fits(const tfc_backend *be, const tfc_conv_desc *d);
size_t tfc_cpu_winograd_workspace(const tfc_backend *be, const tfc_conv_desc *d);
int tfc_cpu_winograd_forward(tfc_backend *be, const tfc_conv_desc *d, const float *x,
                             const float *w, const float *bias, const tfc_bn_params *bn,
                             const float *residual, tfc_act act, float *y, void *ws);
/* Chooses it for the whole process: 1 on where the CPU has AVX2 and FMA, 0 off, -1 the
 * default (on where the CPU has AVX2 and FMA but not AVX-512, whose oneDNN has Winograd of
 * its own). Returns 0, changing nothing, where the CPU lacks the instructions (the tests). */
int tfc_cpu_winograd_isa(int isa);

/* pool_forward's result without argmax (one thread) from x in oneDNN's nChw16c layout:
 * per image d->c / 16 blocks of [h][w][16 channels] (c a multiple of 16); y NHWC. */
void tfc_cpu_pool_forward_16c(const tfc_pool_desc *d, const float *x, float *y);
/* A Winograd chunk's epilogue (one thread) from its blocked output x (n images, px pixels,
 * f channels, a multiple of 16) into NHWC y: act(((x + bias) a + b) + residual), a and b
 * the normalisation's per-channel map, act TFC_ACT_LINEAR, TFC_ACT_RELU or TFC_ACT_RELU6
 * (cpu_elem.c). */
void tfc_cpu_epilogue_16c(int64_t n, int64_t px, int f, const float *x, const float *bias,
                          const float *a, const float *b, const float *residual, tfc_act act,
                          float *y);
/* The same on NHWC y in place: `rows` pixels of f channels (residual of y's shape), on the
 * backend's threads outside a region, in one pass (cpu_elem.c). */
void tfc_cpu_epilogue(tfc_backend *be, int64_t rows, int f, const float *bias, const float *a,
                      const float *b, const float *residual, tfc_act act, float *y);

/* act_forward's y = act(x) (rows of cols) on the calling thread, never in a region: for a
 * loop already running on the backend's threads (cpu_act.c). */
void tfc_cpu_act_forward_serial(tfc_act act, int64_t n, int cols, const float *x, float *y);

/* Elements of work below which an OpenMP team costs more than it saves. */
#define TFC_CPU_PAR_MIN 32768

/* Threads for a loop over `work` elements: 1 when it is too small to pay off. */
static inline int tfc_cpu_threads(const tfc_backend *be, int64_t work)
{
    return work > TFC_CPU_PAR_MIN && be->threads > 1 ? be->threads : 1;
}

/* Threads to run a region split into nt shares now (cpu_team.c): nt on a quiet machine,
 * fewer while the process's threads wait for a CPU. A region's split, and so its results,
 * stays the one nt gives: a loop's static schedule takes chunks of tfc_cpu_share(n, nt)
 * iterations, a region of shares walks them with TFC_CPU_SHARES. */
int tfc_cpu_team(int nt);
/* Counts a call that ran on its thread alone for tfc_cpu_team_lone_calls. */
void tfc_cpu_team_note_lone(void);
/* For the tests: the decision tfc_cpu_team makes at `now` (ns) when the process's threads
 * have waited `wait` ns in all and `regions` regions have started; returns the threads cut.
 * now < 0 starts from a quiet machine again (and then regions run on every thread). */
int tfc_cpu_team_feed(long long now, long long wait, long long regions);

/* Iterations in each of nt fixed chunks of a loop of n (the static schedule's chunk). */
static inline int64_t tfc_cpu_share(int64_t n, int nt)
{
    return n > nt && nt > 1 ? (n + nt - 1) / nt : n > 1 ? n : 1;
}

/* The clauses of a static loop of n iterations split into nt shares (a macro, so that it
 * can stand in a pragma). */
#define TFC_CPU_STATIC(n, nt) num_threads(tfc_cpu_team(nt)) schedule(static, tfc_cpu_share(n, nt))

/* The for statement `...` over n iterations in nt static shares (TFC_CPU_STATIC's split) on
 * a team of tfc_cpu_team(nt) threads, or on the calling thread without entering OpenMP when
 * that team is one thread: libgomp ends even a one-thread region at a barrier whose release
 * is a futex system call (fashion_mobilenet's batch-1 forward ran 53 such regions,
 * docs/cpu.md). Each iteration computes what it computes in the team, so the results are the
 * same. The statement is a macro argument so that it compiles in both places;
 * TFC_CPU_FOR_SIMD adds `simd` to both. */
#define TFC_CPU_FOR(n, nt, ...) TFC_CPU_FOR_(n, nt, , omp parallel for, __VA_ARGS__)
#define TFC_CPU_FOR_SIMD(n, nt, ...) \
    TFC_CPU_FOR_(n, nt, TFC_CPU_PRAGMA(omp simd), omp parallel for simd, __VA_ARGS__)
#define TFC_CPU_PRAGMA(x) _Pragma(#x)
#define TFC_CPU_FOR_(n, nt, serial, team, ...)                                                 \
    do {                                                                                       \
        const int64_t tfc_n_ = (n);                                                            \
        const int tfc_nt_ = (nt), tfc_team_ = tfc_nt_ > 1 ? tfc_cpu_team(tfc_nt_) : 1;         \
        if (tfc_team_ == 1) {                                                                  \
            serial __VA_ARGS__                                                                 \
        } else {                                                                               \
            TFC_CPU_PRAGMA(team num_threads(tfc_team_)                                         \
                           schedule(static, tfc_cpu_share(tfc_n_, tfc_nt_))) __VA_ARGS__       \
        }                                                                                      \
    } while (0)

/* The body after it runs once for each share t of nt, on whichever thread of the region's
 * team takes it: thread i of a team of T runs shares i, i + T, ... */
#define TFC_CPU_SHARES(t, nt) \
    for (int t = omp_get_thread_num(); t < (nt); t += omp_get_num_threads())

/* Deterministic parallel sums. An OpenMP `reduction` adds the threads' partial sums in
 * the order the threads finish, so with three or more threads a floating-point sum could
 * differ in its last bits from one run to the next, and a resumed run would not repeat the
 * original. Instead thread t of a team of T sums rows [n t / T, n (t + 1) / T) into its own
 * slot, and the slots are added in thread order afterwards: the result depends on the
 * thread count only. Teams for these sums have at most TFC_REDUCE_THREADS threads (the
 * slots live on the caller's stack). */
#define TFC_REDUCE_THREADS 16

static inline int tfc_cpu_reduce_threads(const tfc_backend *be, int64_t work)
{
    int nt = tfc_cpu_threads(be, work);
    return nt > TFC_REDUCE_THREADS ? TFC_REDUCE_THREADS : nt;
}

/* cond ? a : b as a bit blend. A plain float select followed by arithmetic is split by
 * GCC's partial-redundancy elimination into branches that trapping-math rules keep it
 * from merging again, and a loop with branches does not vectorise. */
static inline float tfc_cpu_select(int cond, float a, float b)
{
    uint32_t ua, ub, m = 0u - (uint32_t)(cond != 0);
    memcpy(&ua, &a, 4);
    memcpy(&ub, &b, 4);
    uint32_t r = (ua & m) | (ub & ~m);
    float f;
    memcpy(&f, &r, 4);
    return f;
}

/* exp(x - lo) for x in [-104, 88.8] and lo small (a correction below x's last bit, or 0):
 * 2^n exp(r), n = round(x / ln 2), r = x - n ln 2 - lo (Cody-Waite, two constants), exp(r)
 * by Cephes' degree-6 polynomial: within 2 ulp of expf. Branch-free so loops vectorise.
 * 2^n is applied in two halves so that n in [-150, 128] never leaves the exponent range.
 * n is read from the bits of the rounded value (no float-to-int conversion), so a NaN
 * propagates instead of being undefined behaviour. */
static inline float tfc_cpu_expf_lo(float xc, float lo)
{
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float t = xc * 1.44269504088896341f + magic;
    float fn = t - magic;
    uint32_t tb, mb;
    memcpy(&tb, &t, 4);
    memcpy(&mb, &magic, 4);
    int32_t n = (int32_t)(tb - mb);
    float r = xc - fn * 0.693359375f;
    r = r - fn * -2.12194440e-4f - lo;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t n1 = n / 2, n2 = n - n1;
    uint32_t b1 = (uint32_t)(n1 + 127) << 23, b2 = (uint32_t)(n2 + 127) << 23;
    float s1, s2;
    memcpy(&s1, &b1, 4);
    memcpy(&s2, &b2, 4);
    return p * s1 * s2;
}

/* exp(x), x clamped to [-104, 88.8] (exp underflows to 0 below, overflows to inf above). */
static inline float tfc_cpu_expf(float x)
{
    float xc = tfc_cpu_select(x < -104.0f, -104.0f, x);
    xc = tfc_cpu_select(x > 88.8f, 88.8f, xc);
    return tfc_cpu_expf_lo(xc, 0.0f);
}

/* sigmoid(x) = 1 / (1 + exp(-x)); exp(-x) = inf gives exactly 0. */
static inline float tfc_cpu_sigmoidf(float x)
{
    return 1.0f / (1.0f + tfc_cpu_expf(-x));
}

/* tanh as Cephes' tanhf: an odd polynomial for |x| < 0.625 (no cancellation near 0),
 * else 1 - 2 / (exp(2|x|) + 1) with the sign of x. */
static inline float tfc_cpu_tanhf(float x)
{
    float a = fabsf(x);
    float s = x * x;
    float p = -5.70498872745e-3f;
    p = p * s + 2.06390887954e-2f;
    p = p * s - 5.37397155531e-2f;
    p = p * s + 1.33314422036e-1f;
    p = p * s - 3.33332819422e-1f;
    float small = p * s * x + x;
    float big = 1.0f - 2.0f / (tfc_cpu_expf(a + a) + 1.0f);
    big = copysignf(big, x);
    return tfc_cpu_select(a < 0.625f, small, big);
}

/* ---- packed small GEMMs (cpu_panel.c) ------------------------------------------------------
 * For a B [k, n] multiplied many times by A's of a few rows (the LSTM's per-step GEMMs): pack
 * once, then multiply single-threaded, inside the caller's parallel region. */

/* Floats that tfc_cpu_pack_panels writes for B [k, n] (n rounded up to 16 columns). */
size_t tfc_cpu_panels_floats(int k, int n);

/* Packs B [k, n] (row l at b + l ldb), or with trans Sᵀ for S [n, k] at b with row stride
 * ldb, into tfc_cpu_panels_floats(k, n) floats at packed: panel p (columns 16p..16p+15, zeros
 * past n) is [k, 16] contiguous at packed + 16 p k. */
void tfc_cpu_pack_panels(int k, int n, const float *b, int ldb, int trans, float *packed);

/* The same with panels ldp >= k rows apart (panel p at packed + 16 p ldp), so that matrices
 * packed at packed + 16 r stack: B's rows r.. of one tall packed matrix (tfc_cpu_panels_floats
 * (ldp, n) floats in all). */
void tfc_cpu_pack_panels_ld(int k, int n, const float *b, int ldb, int trans, float *packed,
                            int ldp);

/* Both pack functions share the panels among the threads of a parallel region they are called
 * in by every thread (an orphaned `omp for`, with its barrier at the end); outside one, the
 * caller packs them all. */

/* How an A operand [m, k] lies in memory, element (r, l) at:
 *   TFC_PANEL_ROWS    a[r lda + l], row-major;
 *   TFC_PANEL_ROWS8   a[(r / 8) lda + 8 l + r % 8], panels of 8 rows (lda >= 8 k): the
 *                     transpose of a [k, m] matrix whose rows tfc_cpu_pack_rows8_col wrote;
 *   TFC_PANEL_COLS16  a[(l / 16) lda + 16 r + l % 16], panels of 16 columns (lda >= 16 m):
 *                     what tfc_cpu_pack_panels writes, read as A. */
enum { TFC_PANEL_ROWS, TFC_PANEL_ROWS8, TFC_PANEL_COLS16 };

/* An A operand read in place. k 0: none. */
typedef struct tfc_panel_a {
    const float *a;
    int lda, k, layout;
} tfc_panel_a;

/* Row l of S [k, m], the m floats at row, into a TFC_PANEL_ROWS8 A = Sᵀ with panels lda
 * apart, at column l (a + 8 l); zeros past row m. */
void tfc_cpu_pack_rows8_col(int m, const float *row, float *a, int lda);

/* tfc_backend.lstm_ids (cpu_lstm.c) */
int tfc_cpu_lstm_ids(const tfc_backend *be, const tfc_lstm_desc *d);

/* ---- the recurrent layers' split of a batch (cpu_rnn.c) -------------------------------------
 * The sequences of a batch never meet in a recurrence, so cpu_lstm.c and cpu_gru.c take them
 * through all steps in blocks of a few rows inside one parallel region, each block claimed by
 * whichever thread is free (docs/cpu.md). threads: the team, at least TFC_RNN_ROWS_PER_THREAD
 * sequences each, and 1 below TFC_RNN_PAR_MIN_MACS multiply-adds of recurrent GEMMs in all
 * (waking a team costs more); blocks: TFC_RNN_BLOCK_ROWS rows each (the AVX-512 panel
 * kernel's tile), never fewer than threads; most: the rows of the largest block. The split
 * depends on n, macs and the thread count only, so a run repeats bit for bit. */
#define TFC_RNN_ROWS_PER_THREAD 4
#define TFC_RNN_PAR_MIN_MACS ((int64_t)1 << 20)
#define TFC_RNN_BLOCK_ROWS 8

typedef struct tfc_rnn_split {
    int threads, blocks, most;
} tfc_rnn_split;

tfc_rnn_split tfc_cpu_rnn_split(const tfc_backend *be, int n, int64_t macs);

/* Rows [r0, r1) of n in block b of nb. */
static inline void tfc_cpu_block_rows(int n, int b, int nb, int *r0, int *r1)
{
    *r0 = (int)((int64_t)n * b / nb);
    *r1 = (int)((int64_t)n * (b + 1) / nb);
}

/* Whether mask [n, t] masks step s of every sequence in rows [r0, r1). */
static inline int tfc_cpu_rnn_block_masked(const float *mask, int t, int r0, int r1, int s)
{
    for (int i = r0; i < r1; i++)
        if (mask[(int64_t)i * t + s] != 0.0f) return 0;
    return 1;
}

/* y from a forward pass's hseq [n, t, u]: all of it with return_sequences (y may be hseq),
 * else each sequence's last row, y [n, u]. */
void tfc_cpu_rnn_output(int n, int t, int u, int return_sequences, const float *hseq, float *y);

/* dh [u] += sequence i's dy at step s, if it has one there: dy [n, t, u] with
 * return_sequences, else [n, u] at the last step. */
void tfc_cpu_rnn_add_dy(int n, int t, int u, int return_sequences, int i, int s,
                        const float *dy, float *dh);

/* sum[j] += row[j], j < k (inline: the cells' loops call it per 16 units) */
static inline void tfc_cpu_sum_row(int k, const float *row, double *sum)
{
#pragma omp simd
    for (int j = 0; j < k; j++) sum[j] += row[j];
}

/* dbias[c] += the blocks' partial sums of column c, partial [nb][stride], in block order */
void tfc_cpu_block_sums(int nb, int cols, int stride, const double *partial, float *dbias);

/* ---- weights packed once on a frozen backend (cpu_rnn.c) ------------------------------------
 * A recurrent layer's forward pass packs its kernels into panels (cpu_panel.c) on every call.
 * On a frozen backend (core/backend.h: bound for inference, so its parameters change only
 * through upload, copy and zero) the CPU backend keeps those panels instead, one pack per
 * layer (TFC_CPU_KEPT at most; more take turns), by the addresses and sizes of the weights
 * they came from, and packs them again only after one of those writes overlapped the weights
 * (tfc_cpu_kept_written). The backend runs one call at a time (a predictor's worker). */
#define TFC_CPU_KEPT 64

typedef struct tfc_cpu_kept_pack {
    const float *src[2]; /* the weights packed (NULL: none) */
    size_t bytes[2];
    int tag;             /* the op's layout (what it packed, how) */
    int valid;           /* 0: pack again before use */
    size_t floats, cap;  /* the pack's size; packed's capacity */
    float *packed;
} tfc_cpu_kept_pack;

/* The CPU backend: the common part first (tfc_cpu_backend_create allocates this). */
typedef struct tfc_cpu_backend {
    tfc_backend be;
    tfc_cpu_kept_pack kept[TFC_CPU_KEPT];
    int next_kept;
    int dnnl_gemm; /* GEMMs through oneDNN where it is faster (cpu_backend.c, sgemm1) */
    int winograd;  /* inference passes' 3x3 convolutions by cpu_winograd.c where it fits */
    float *scratch; /* gemm_weights' panels on a backend that is not frozen */
    size_t scratch_cap;
} tfc_cpu_backend;

/* The pack of `floats` floats kept for weights src[0..1] (bytes each) in layout `tag`, or
 * NULL (the caller packs into its workspace, as in training): where the backend is not
 * frozen, or out of memory. *fresh is then 1 where the caller must pack it now (the first
 * call, or the weights were written since), else 0 (the panels are ready). */
float *tfc_cpu_kept(tfc_backend *be, const float *const src[2], const size_t bytes[2], int tag,
                    size_t floats, int *fresh);
/* A write of [p, p + bytes) (upload, copy, zero): the packs of weights it overlaps are
 * packed again on their next use. */
void tfc_cpu_kept_written(tfc_backend *be, const void *p, size_t bytes);
/* [p, p + bytes) freed: the slots of packs kept for weights in it are empty (their buffers
 * kept for the next weights that need no more). */
void tfc_cpu_kept_freed(tfc_backend *be, const void *p, size_t bytes);
/* Frees the kept packs (the backend's destruction). */
void tfc_cpu_kept_free(tfc_backend *be);

/* Floats rounded up to a 64-byte multiple, so that workspace pieces stay aligned. */
static inline size_t tfc_cpu_padded(int64_t floats)
{
    return (size_t)((floats + 15) & ~(int64_t)15);
}

/* c[m, n] += [A1 A2] · B, or with set c = init + [A1 A2] · B (init: a row of n floats added
 * to every row; NULL: zeros), or with set and from_c c = init + (c + [A1 A2] · B): the
 * products summed onto c's own values, in the order they would continue a sum that c
 * holds the first part of. A1 [m, a1.k] and A2 [m, a2.k] side by side multiply B's rows
 * 0..a1.k-1 and a1.k..a1.k+a2.k-1; A2 is row-major (its layout is ignored). B is packed
 * with panels ldp rows apart (>= a1.k + a2.k), starting at `packed` (which may point at a
 * row inside a taller packed matrix). reverse: read the panels from the last (where a kernel
 * walks them in an order; the results are the same): a recurrence alternates it step by step,
 * so that the panels one step read last, still in L1, are the first the next step reads. */
typedef struct tfc_panel_gemm {
    int m, n;
    tfc_panel_a a1, a2;
    const float *packed;
    int ldp;
    int set, from_c, reverse;
    const float *init;
    float *c;
    int ldc;
} tfc_panel_gemm;

/* Each element's products are summed in l order from zero (A1's, then A2's; fused
 * multiply-adds where the CPU has AVX2 and FMA or AVX-512, picked at run time; both give the
 * same bits), then added to c or init: the same inputs give the same bits on the same
 * machine. */
void tfc_cpu_panel_gemm(const tfc_panel_gemm *g);

/* The same through one kernel: isa 2 AVX-512, 1 AVX2 + FMA, 0 plain loops, -1 the best this
 * CPU runs (what tfc_cpu_panel_gemm uses). Returns 0, computing nothing, where the CPU lacks
 * the kernel's instructions (for the tests that compare the kernels). */
int tfc_cpu_panel_gemm_isa(int isa, const tfc_panel_gemm *g);

/* Inverted dropout (dropout_forward's and, accumulate 1, dropout_backward's contract) through
 * one kernel: isa 2 AVX-512 intrinsics, 0 the plain loops, -1 the best this CPU runs. Both give
 * the same bits. Returns 0, computing nothing, where the CPU lacks the kernel's instructions
 * (for the tests that compare them). */
int tfc_cpu_dropout_isa(tfc_backend *be, int isa, int64_t n, float rate, uint64_t key,
                        uint64_t step, const float *in, float *out, int accumulate);

/* Chooses the LSTM cells' kernel for the whole process: isa 2 AVX-512 intrinsics, 0 the plain
 * loops, -1 the best this CPU runs (the default). Returns 0, changing nothing, where the CPU
 * lacks the kernel's instructions (for the tests that check both). */
int tfc_cpu_lstm_cells_isa(int isa);

/* Chooses the depthwise loops' instruction set for the whole process (cpu_depthwise.c): 2
 * AVX-512, 1 AVX2, 0 the baseline, -1 the best this CPU runs (the default). All give the same
 * bits. Returns 0, changing nothing, where the CPU lacks the instructions (for the tests
 * that check each). */
int tfc_cpu_depthwise_isa(int isa);

/* Chooses the attention kernels' instruction set for the whole process (cpu_attention.c: the
 * block products, the transposes and the exps): 1 AVX2 with fused multiply-adds, 0 the
 * baseline, -1 the best this CPU runs (the default). Returns 0, changing nothing, where the
 * CPU lacks the instructions (for the tests). */
int tfc_cpu_attention_isa(int isa);

/* Philox blocks first .. first + 15 of (key, step) through the AVX-512 kernel, in element
 * order (r[4 j + w] = word w of tfc_philox(key, first + j, step)); 0 without AVX-512. */
int tfc_cpu_philox16(uint64_t key, uint64_t first, uint64_t step, uint32_t r[64]);

/* ---- the math ops ----------------------------------------------------------------------
 * tfc_cpu_<op> for every op of TFC_BACKEND_MATH_OPS, TFC_BACKEND_LAYER_OPS,
 * TFC_BACKEND_STEP_OPS and TFC_BACKEND_PRECISION_OPS (contracts in core/backend.h), each
 * defined in the file of its family: gemm in cpu_backend.c; axpy, scale, bias_add,
 * bias_grad, copy2d, dropout_*, sumsq, count_nonfinite and round_* in cpu_elem.c; act_*
 * in cpu_act.c; conv_* in cpu_conv.c; pool_* in cpu_pool.c; bn_* in cpu_norm.c; gather and
 * scatter_add in cpu_embed.c; lstm_* in cpu_lstm.c; loss and accuracy in cpu_loss.c;
 * optimizer_update in cpu_optim.c; the step ops (grad_sumsq, step_scale,
 * optimizer_update_at) and loss_scale_at in cpu_step.c; grouped_conv_*, conv1d_* and
 * masked_mean_* in cpu_conv1d.c; depthwise_* in cpu_depthwise.c; upsample_* in cpu_resize.c; mul and
 * mul_reduce in cpu_mul.c; layernorm_* in cpu_layernorm.c; attention_* in
 * cpu_attention.c; gru_* in cpu_gru.c; rnn_input_* and bidir_* in cpu_rnn.c; rnn_dropout_*
 * in cpu_rnn_dropout.c; groupnorm_* in
 * cpu_groupnorm.c; permute in cpu_permute.c; l2norm_* in cpu_l2norm.c; extremum_* in
 * cpu_extremum.c; conv3d_* in cpu_conv3d.c; pool3d_* in cpu_pool3d.c; adaptive_pool_* in
 * cpu_adaptive_pool.c; stft_* in cpu_stft.c; encode_forward and hash_cross_forward in
 * cpu_encode.c. */
#define TFC_CPU_DECLARE(ret, op, params) ret tfc_cpu_##op params;
TFC_BACKEND_MATH_OPS(TFC_CPU_DECLARE)
TFC_BACKEND_LAYER_OPS(TFC_CPU_DECLARE)
TFC_BACKEND_STEP_OPS(TFC_CPU_DECLARE)
TFC_BACKEND_PRECISION_OPS(TFC_CPU_DECLARE)
#undef TFC_CPU_DECLARE

#endif
