/* Winograd's convolutions F(4x4, 3x3) and F(2x2, 3x3) for inference passes on CPUs with AVX2
 * and FMA (issue 44): without AVX-512 always, with it where oneDNN would not run its own
 * Winograd (a few images on a team; best()). oneDNN's Winograd kernel exists for AVX-512 only,
 * and its direct AVX2 kernel already runs near the machine's peak, so on AVX2 the only way to
 * a faster 3x3 convolution is fewer multiplications (Lavin and Gray, "Fast Algorithms for
 * Convolutional Neural Networks", 2015): F(m x m, 3x3) computes each m x m block of outputs
 * (a tile) from an (m + 2) x (m + 2) block of inputs with (m + 2)^2 products per input and
 * output channel pair where the direct sum takes 9 m^2: 16 against 36 for m = 2, 36 against
 * 144 for m = 4. F(2x2, 3x3)'s transforms take only 0, ±1 and ±1/2 and round about as the
 * direct sum does; F(4x4, 3x3)'s reach 5 and 8 and round more (errors against double 4-6x the
 * direct kernel's, about 1e-5 of the outputs' scale; test_cpu_ops conv_winograd_f2). An
 * image takes F(4x4, 3x3) where it has at least MIN_TILES4 of its tiles and they need at most
 * 3/4 of F(2x2, 3x3)'s products (a 7x7 image has 4 tiles of 4x4, each streaming all 36
 * planes of the kernel: F(2x2, 3x3) there).
 *
 * Three steps per block of tiles, each on one thread, with no barrier between blocks:
 *   V[a][t][c] = (Bᵀ d B)[a]   the tile's input patch d of channel c (zeros outside the
 *                               image), a = (m + 2) i + j one of its positions;
 *   M[a][t][f] = Σ_c V[a][t][c] U[a][c][f]   one GEMM per position, U = G g Gᵀ the 3x3 kernel
 *                               g of each (c, f) transformed (in double, once per call, or
 *                               once per layer on a frozen backend, kept like the recurrent
 *                               layers' panels);
 *   y = Aᵀ M A                  the tile's outputs, with the epilogue (bias, normalisation,
 *                               residual, ReLU or relu6) applied in registers, each step
 *                               rounded as its separate op rounds it.
 * Blocks hold up to BLOCK_FLOATS floats of V and M (in L2); where the tiles are too few to
 * give each thread a block of at least MIN_ROWS (batch 1 at 7x7), the filters are split
 * into groups too, each group's block transforming its tiles' inputs again (cheap beside the
 * GEMMs). Every output's sums run in one order fixed by the image's shape: the same bits on
 * any thread count and in any batch.
 *
 * Taken for inference passes only (be->inference_pass: prediction, evaluation, a frozen
 * model's every pass), so that an inference pass gives the same values whether the model is
 * bound for training or for inference (SPEC: docs/SPEC.md), on 3x3 kernels at stride and
 * dilation 1 with channel counts that are multiples of 8, at least 16. TFC_CPU_CONV=direct
 * or im2col in the environment turns it off, as it turns oneDNN's Winograd off. */
#include <stdlib.h>

#include "cpu/cpu_internal.h"

/* floats of V and M per block: 256 KB, half an AVX2 EPYC's L2 */
#define BLOCK_FLOATS 65536
/* the GEMM tile's rows: 6 tiles x 16 filters, 12 accumulators */
#define MR 6
/* rows per block below which the filters are split into groups across the threads */
#define MIN_ROWS 12
/* kept weights' tag, less the tile size (cpu_rnn.c's packs use sizes, never negative) */
#define KEPT_TAG (-1)
/* an image's F(4x4, 3x3) tiles below which it takes F(2x2, 3x3) */
#define MIN_TILES4 12

typedef struct wplan {
    int m, A;           /* outputs per tile side (2 or 4), positions per tile ((m + 2)^2) */
    int th, tw;         /* tiles per image, down and across */
    int64_t tiles;      /* in the batch */
    int rows;           /* tiles per block */
    int groups, fw;     /* filter groups, and the filters in each (a multiple of 16 or all) */
    int64_t blocks;     /* per group */
} wplan;

/* Tiles per block at most for A positions: V and M of a block within BLOCK_FLOATS, at least
 * MR. */
static int cap_rows(const tfc_conv_desc *d, int A)
{
    const int cap = BLOCK_FLOATS / (A * (d->c + d->f)) / MR * MR;
    return cap < MR ? MR : cap;
}

/* The tile: F(4x4, 3x3) where an image has at least MIN_TILES4 of its tiles and they take at
 * most 3/4 of F(2x2, 3x3)'s GEMM work (36 positions a tile against 16, counting the partial
 * tiles' waste); else F(2x2, 3x3). By the image's shape alone, so that an image's result does
 * not depend on its batch. */
static int tile_size(const tfc_conv_desc *d)
{
    const int64_t t4 = (int64_t)((d->oh + 3) / 4) * ((d->ow + 3) / 4);
    const int64_t t2 = (int64_t)((d->oh + 1) / 2) * ((d->ow + 1) / 2);
    return t4 >= MIN_TILES4 && 36 * t4 * 4 <= 16 * t2 * 3 ? 4 : 2;
}

/* The blocks and filter groups of d on nt threads: blocks of equal size, as many as a
 * multiple of the threads where there are more than the threads. */
static wplan make_plan(const tfc_conv_desc *d, int nt)
{
    const int m = tile_size(d);
    wplan p = {.m = m, .A = (m + 2) * (m + 2), .th = (d->oh + m - 1) / m, .tw = (d->ow + m - 1) / m,
               .groups = 1};
    p.tiles = (int64_t)d->n * p.th * p.tw;
    if (nt > 1 && p.tiles < (int64_t)nt * MIN_ROWS) { /* too few tiles: split the filters */
        p.groups = nt < d->f / 16 ? nt : d->f / 16;
        if (p.groups < 1) p.groups = 1;
    }
    p.fw = p.groups == 1 ? d->f : (d->f / p.groups + 15) / 16 * 16; /* whole panels */
    p.groups = (d->f + p.fw - 1) / p.fw;
    const int64_t want = (nt + p.groups - 1) / p.groups; /* blocks per group for every thread */
    const int cap = cap_rows(d, p.A);
    int64_t nblk = (p.tiles + cap - 1) / cap;
    if (nblk < want)
        nblk = want < p.tiles ? want : p.tiles;
    else if (want > 1)
        nblk = (nblk + want - 1) / want * want;
    p.rows = (int)((p.tiles + nblk - 1) / nblk);
    p.blocks = (p.tiles + p.rows - 1) / p.rows;
    return p;
}

/* Floats of one thread's buffer: V and M of a block (A positions). */
static size_t thread_floats(const tfc_conv_desc *d, int A)
{
    const int cap = cap_rows(d, A);
    return tfc_cpu_padded((int64_t)A * cap * d->c) + tfc_cpu_padded((int64_t)A * cap * d->f);
}

static int chosen = -1; /* tfc_cpu_winograd_isa's choice; -1: the best */

/* Where the CPU has AVX2 and FMA, unless it has AVX-512 and oneDNN runs d as Winograd's
 * convolution itself (on one thread, or a batch in chunks of images): a few images on a team
 * would take oneDNN's direct kernel, which this one beat on an AVX-512 Zen 4 (batch 1, two
 * threads: fashion_cnn 0.144 -> 0.093 ms, fashion_resnet 0.746 -> 0.60; docs/cpu.md), and
 * so every call of a team's backend has the same kernel whether the team or its lone thread
 * runs it (tfc_cpu_team_cap). */
static int best(const tfc_backend *be, const tfc_conv_desc *d)
{
#ifdef TFC_X86_SIMD
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           (!__builtin_cpu_supports("avx512f") || !tfc_cpu_dnnl_winograd_infers(be, d));
#else
    return 0;
#endif
}

int tfc_cpu_winograd_isa(int isa)
{
#ifdef TFC_X86_SIMD
    if (isa == 1 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")))
        return 0;
#else
    if (isa > 0) return 0;
#endif
    chosen = isa < 0 ? -1 : isa;
    return 1;
}

/* Whether d's shape and be take this kernel, whichever tfc_cpu_winograd_isa chose (the
 * workspace: a test may choose between planning and calling). */
static int shape_fits(const tfc_backend *be, const tfc_conv_desc *d)
{
#ifdef TFC_X86_SIMD
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           ((const tfc_cpu_backend *)be)->winograd && d->kh == 3 && d->kw == 3 && d->sh == 1 &&
           d->sw == 1 && d->dh == 1 && d->dw == 1 && d->c % 8 == 0 && d->f % 8 == 0 &&
           d->c >= 16 && d->f >= 16 && d->oh > 0 && d->ow > 0;
#else
    return 0;
#endif
}

/* Whether d's forward convolutions on be run here when they are inference passes. */
int tfc_cpu_winograd_fits(const tfc_backend *be, const tfc_conv_desc *d)
{
    return (chosen >= 0 ? chosen : best(be, d)) && shape_fits(be, d);
}

/* Filters rounded up to whole panels of 16. */
static int f16(const tfc_conv_desc *d)
{
    return (d->f + 15) / 16 * 16;
}

/* Floats of the transformed weights U for A positions: for each position a, panels of 16
 * filters, each c rows of 16 (zeros past f), so that the GEMMs read each panel front to back. */
static size_t u_floats(const tfc_conv_desc *d, int A)
{
    return (size_t)A * (size_t)d->c * (size_t)f16(d);
}

/* Each thread's block buffers, the transformed weights where not kept, the normalisation's
 * a and b: the same for every batch size (what the largest batch was planned with serves). */
size_t tfc_cpu_winograd_workspace(const tfc_backend *be, const tfc_conv_desc *d)
{
    if (!shape_fits(be, d)) return 0;
    const int A = tile_size(d) == 4 ? 36 : 16;
    return ((size_t)be->threads * thread_floats(d, A) + tfc_cpu_padded((int64_t)u_floats(d, A)) +
            tfc_cpu_padded(2 * (int64_t)d->f)) *
           sizeof(float);
}

/* U[a][f / 16][c][f % 16] = (G g Gᵀ)[a] for the kernel g of (c, f), in double, rounded
 * once; G of F(m x m, 3x3) (Lavin and Gray's), n = m + 2 its rows. */
static void transform_weights(const tfc_conv_desc *d, int m, const float *w, float *u)
{
    static const double G2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
    static const double G4[6][3] = {{1.0 / 4, 0, 0},
                                    {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                    {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                    {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                    {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                    {0, 0, 1}};
    const double(*G)[3] = m == 4 ? G4 : G2;
    const int n = m + 2, C = d->c, F = d->f, F16 = f16(d);
    memset(u, 0, u_floats(d, n * n) * sizeof(float));
    for (int c = 0; c < C; c++)
        for (int f = 0; f < F; f++) {
            double g[3][3], t[6][3];
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++) g[i][j] = w[((size_t)(i * 3 + j) * C + c) * F + f];
            for (int i = 0; i < n; i++)
                for (int j = 0; j < 3; j++)
                    t[i][j] = G[i][0] * g[0][j] + G[i][1] * g[1][j] + G[i][2] * g[2][j];
            for (int i = 0; i < n; i++)
                for (int j = 0; j < n; j++)
                    u[(((size_t)(i * n + j) * F16 + f / 16 * 16) * C + (size_t)c * 16) + f % 16] =
                        (float)(t[i][0] * G[j][0] + t[i][1] * G[j][1] + t[i][2] * G[j][2]);
        }
}

typedef struct wcall {
    const tfc_conv_desc *d;
    const wplan *p;
    const float *x, *u, *bias, *a, *b, *residual;
    tfc_act act;
    float *y;
} wcall;

#ifdef TFC_X86_SIMD
#include <immintrin.h>

#define FMA_TARGET __attribute__((target("avx2,fma")))
#define INLINE static inline __attribute__((always_inline))

/* src[n i + j]: where pixel (i, j) of tile g's n x n input patch starts (its channels), NULL
 * outside the image. */
static void patch(const wcall *k, int64_t g, int n, const float **src)
{
    const tfc_conv_desc *d = k->d;
    const int64_t per = (int64_t)k->p->th * k->p->tw, img = g / per;
    const int y0 = k->p->m * (int)(g % per / k->p->tw) - d->pad_top;
    const int x0 = k->p->m * (int)(g % per % k->p->tw) - d->pad_left;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            const int iy = y0 + i, ix = x0 + j;
            src[n * i + j] = iy >= 0 && iy < d->h && ix >= 0 && ix < d->w
                                 ? k->x + (((size_t)img * d->h + iy) * d->w + ix) * d->c
                                 : NULL;
        }
}

/* F(2x2, 3x3)'s V[a][r][c..c+8) for the block's tiles r (rows of c floats, 16 planes of
 * `rows` rows). */
FMA_TARGET static void input_transform2(const wcall *k, int64_t t0, int rows, float *V)
{
    const tfc_conv_desc *d = k->d;
    const int C = d->c;
    const size_t plane = (size_t)rows * C;
    const __m256 zero = _mm256_setzero_ps();
    for (int r = 0; r < rows; r++) {
        const float *src[4][4];
        patch(k, t0 + r, 4, &src[0][0]);
        float *out = V + (size_t)r * C;
        for (int c = 0; c < C; c += 8) {
            __m256 v[4][4], t[4][4];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) v[i][j] = src[i][j] ? _mm256_loadu_ps(src[i][j] + c) : zero;
            for (int j = 0; j < 4; j++) { /* Bᵀ d */
                t[0][j] = _mm256_sub_ps(v[0][j], v[2][j]);
                t[1][j] = _mm256_add_ps(v[1][j], v[2][j]);
                t[2][j] = _mm256_sub_ps(v[2][j], v[1][j]);
                t[3][j] = _mm256_sub_ps(v[1][j], v[3][j]);
            }
            for (int i = 0; i < 4; i++) { /* (Bᵀ d) B */
                float *o = out + (size_t)(4 * i) * plane + c;
                _mm256_storeu_ps(o, _mm256_sub_ps(t[i][0], t[i][2]));
                _mm256_storeu_ps(o + plane, _mm256_add_ps(t[i][1], t[i][2]));
                _mm256_storeu_ps(o + 2 * plane, _mm256_sub_ps(t[i][2], t[i][1]));
                _mm256_storeu_ps(o + 3 * plane, _mm256_sub_ps(t[i][1], t[i][3]));
            }
        }
    }
}

/* M[r][0..W) = Σ_c V[r][c] U[c][0..W) for R <= MR rows of V (stride C), W 16 or 8 columns
 * of a panel of U (rows of 16) and of M (stride ldm); R and W constants once inlined. */
INLINE FMA_TARGET void gemm_tile(const float *V, int C, const float *U, float *M, int ldm,
                                 const int R, const int W)
{
    __m256 s[MR][2];
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) s[r][0] = s[r][1] = _mm256_setzero_ps();
    for (int c = 0; c < C; c++) {
        const __m256 b0 = _mm256_loadu_ps(U + (size_t)c * 16);
        const __m256 b1 = W == 16 ? _mm256_loadu_ps(U + (size_t)c * 16 + 8) : b0;
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            const __m256 a = _mm256_broadcast_ss(V + (size_t)r * C + c);
            s[r][0] = _mm256_fmadd_ps(a, b0, s[r][0]);
            if (W == 16) s[r][1] = _mm256_fmadd_ps(a, b1, s[r][1]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
        _mm256_storeu_ps(M + (size_t)r * ldm, s[r][0]);
        if (W == 16) _mm256_storeu_ps(M + (size_t)r * ldm + 8, s[r][1]);
    }
}

#define GEMM_ROWS(W)                                                                     \
    switch (R) {                                                                         \
    case 6: gemm_tile(v, C, u, m, fw, 6, W); break;                                   \
    case 5: gemm_tile(v, C, u, m, fw, 5, W); break;                                   \
    case 4: gemm_tile(v, C, u, m, fw, 4, W); break;                                   \
    case 3: gemm_tile(v, C, u, m, fw, 3, W); break;                                   \
    case 2: gemm_tile(v, C, u, m, fw, 2, W); break;                                   \
    default: gemm_tile(v, C, u, m, fw, 1, W); break;                                  \
    }

/* M[a][r][0..fw) = V[a][r][:] U[a][:][f0..f0+fw) for the block's rows. */
FMA_TARGET static void gemms(const wcall *k, int rows, int f0, int fw, const float *V, float *M)
{
    const int C = k->d->c, F16 = f16(k->d);
    for (int a = 0; a < k->p->A; a++)
        for (int f = 0; f < fw; f += 16) {
            const float *u = k->u + ((size_t)a * F16 + f0 + f) * C;
            for (int r0 = 0; r0 < rows; r0 += MR) {
                const int R = rows - r0 < MR ? rows - r0 : MR;
                const float *v = V + ((size_t)a * rows + r0) * C;
                float *m = M + ((size_t)a * rows + r0) * fw + f;
                if (fw - f >= 16) {
                    GEMM_ROWS(16)
                } else {
                    GEMM_ROWS(8)
                }
            }
        }
}

/* The epilogue on eight channels from f (res: the residual's row, or NULL). */
INLINE FMA_TARGET __m256 finish(const wcall *k, __m256 v, int f, const float *res)
{
    return tfc_cpu_finish8(v, f, k->bias, k->a, k->b, res, k->act);
}

/* Tile g's first output (*oy, *ox) within its image, and where it starts in y. */
static size_t tile_out(const wcall *k, int64_t g, int *oy, int *ox)
{
    const tfc_conv_desc *d = k->d;
    const int64_t per = (int64_t)k->p->th * k->p->tw, img = g / per;
    *oy = k->p->m * (int)(g % per / k->p->tw);
    *ox = k->p->m * (int)(g % per % k->p->tw);
    return (((size_t)img * d->oh + *oy) * d->ow + *ox) * (size_t)d->f;
}

/* F(2x2, 3x3)'s outputs of the block, y = Aᵀ M A, through the epilogue, for filters
 * f0..f0+fw. */
FMA_TARGET static void output_transform2(const wcall *k, int64_t t0, int rows, int f0, int fw,
                                        const float *M)
{
    const tfc_conv_desc *d = k->d;
    const int F = d->f;
    const size_t plane = (size_t)rows * fw;
    for (int r = 0; r < rows; r++) {
        int oy, ox;
        const size_t o = tile_out(k, t0 + r, &oy, &ox);
        const int down = oy + 1 < d->oh, across = ox + 1 < d->ow;
        const size_t below = (size_t)d->ow * F;
        const float *m = M + (size_t)r * fw;
        for (int f = 0; f < fw; f += 8) {
            __m256 s[2][4];
            for (int j = 0; j < 4; j++) { /* Aᵀ M */
                const __m256 m0 = _mm256_loadu_ps(m + (size_t)j * plane + f);
                const __m256 m1 = _mm256_loadu_ps(m + (size_t)(4 + j) * plane + f);
                const __m256 m2 = _mm256_loadu_ps(m + (size_t)(8 + j) * plane + f);
                const __m256 m3 = _mm256_loadu_ps(m + (size_t)(12 + j) * plane + f);
                s[0][j] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2);
                s[1][j] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
            }
            const int fo = f0 + f;
            for (int i = 0; i < 2; i++) { /* (Aᵀ M) A */
                if (i && !down) break;
                const size_t at = o + i * below;
                const float *res = k->residual ? k->residual + at : NULL;
                __m256 y0 = _mm256_add_ps(_mm256_add_ps(s[i][0], s[i][1]), s[i][2]);
                _mm256_storeu_ps(k->y + at + fo, finish(k, y0, fo, res));
                if (across) {
                    __m256 y1 = _mm256_sub_ps(_mm256_sub_ps(s[i][1], s[i][2]), s[i][3]);
                    _mm256_storeu_ps(k->y + at + F + fo, finish(k, y1, fo, res ? res + F : NULL));
                }
            }
        }
    }
}

/* F(4x4, 3x3)'s V[a][r][c..c+8): Bᵀ d B of the tile's 6x6 input patch d, 36 planes. */
FMA_TARGET static void input_transform4(const wcall *k, int64_t t0, int rows, float *V)
{
    const tfc_conv_desc *d = k->d;
    const int C = d->c;
    const size_t plane = (size_t)rows * C;
    const __m256 zero = _mm256_setzero_ps(), two = _mm256_set1_ps(2.0f);
    const __m256 four = _mm256_set1_ps(4.0f), five = _mm256_set1_ps(5.0f);
    for (int r = 0; r < rows; r++) {
        const float *src[6][6];
        patch(k, t0 + r, 6, &src[0][0]);
        float *out = V + (size_t)r * C;
        for (int c = 0; c < C; c += 8) {
            __m256 t[6][6];
            for (int j = 0; j < 6; j++) { /* Bᵀ d, column j */
                __m256 v[6];
                for (int i = 0; i < 6; i++) v[i] = src[i][j] ? _mm256_loadu_ps(src[i][j] + c) : zero;
                const __m256 p12 = _mm256_add_ps(v[1], v[2]), m12 = _mm256_sub_ps(v[1], v[2]);
                const __m256 p34 = _mm256_add_ps(v[3], v[4]), m43 = _mm256_sub_ps(v[4], v[3]);
                const __m256 m42 = _mm256_sub_ps(v[4], v[2]), m31 = _mm256_sub_ps(v[3], v[1]);
                t[0][j] = _mm256_fmadd_ps(four, v[0], _mm256_fnmadd_ps(five, v[2], v[4]));
                t[1][j] = _mm256_fnmadd_ps(four, p12, p34);
                t[2][j] = _mm256_fmadd_ps(four, m12, m43);
                t[3][j] = _mm256_fmadd_ps(two, m31, m42);
                t[4][j] = _mm256_fnmadd_ps(two, m31, m42);
                t[5][j] = _mm256_fmadd_ps(four, v[1], _mm256_fnmadd_ps(five, v[3], v[5]));
            }
            for (int i = 0; i < 6; i++) { /* (Bᵀ d) B, row i */
                const __m256 *v = t[i];
                const __m256 p12 = _mm256_add_ps(v[1], v[2]), m12 = _mm256_sub_ps(v[1], v[2]);
                const __m256 p34 = _mm256_add_ps(v[3], v[4]), m43 = _mm256_sub_ps(v[4], v[3]);
                const __m256 m42 = _mm256_sub_ps(v[4], v[2]), m31 = _mm256_sub_ps(v[3], v[1]);
                float *o = out + (size_t)(6 * i) * plane + c;
                _mm256_storeu_ps(o, _mm256_fmadd_ps(four, v[0], _mm256_fnmadd_ps(five, v[2], v[4])));
                _mm256_storeu_ps(o + plane, _mm256_fnmadd_ps(four, p12, p34));
                _mm256_storeu_ps(o + 2 * plane, _mm256_fmadd_ps(four, m12, m43));
                _mm256_storeu_ps(o + 3 * plane, _mm256_fmadd_ps(two, m31, m42));
                _mm256_storeu_ps(o + 4 * plane, _mm256_fnmadd_ps(two, m31, m42));
                _mm256_storeu_ps(o + 5 * plane,
                                 _mm256_fmadd_ps(four, v[1], _mm256_fnmadd_ps(five, v[3], v[5])));
            }
        }
    }
}

/* Aᵀ m for six values of a column (or row) of M: four outputs. */
static inline __attribute__((always_inline)) FMA_TARGET void a4(const __m256 *m, __m256 *o)
{
    const __m256 p12 = _mm256_add_ps(m[1], m[2]), m12 = _mm256_sub_ps(m[1], m[2]);
    const __m256 p34 = _mm256_add_ps(m[3], m[4]), m34 = _mm256_sub_ps(m[3], m[4]);
    o[0] = _mm256_add_ps(_mm256_add_ps(m[0], p12), p34);
    o[1] = _mm256_fmadd_ps(_mm256_set1_ps(2.0f), m34, m12);
    o[2] = _mm256_fmadd_ps(_mm256_set1_ps(4.0f), p34, p12);
    o[3] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.0f), m34, m12), m[5]);
}

/* F(4x4, 3x3)'s outputs of the block, y = Aᵀ M A, through the epilogue, for filters
 * f0..f0+fw; a partial tile writes the outputs inside the image. */
FMA_TARGET static void output_transform4(const wcall *k, int64_t t0, int rows, int f0, int fw,
                                         const float *M)
{
    const tfc_conv_desc *d = k->d;
    const int F = d->f;
    const size_t plane = (size_t)rows * fw;
    for (int r = 0; r < rows; r++) {
        int oy, ox;
        const size_t o = tile_out(k, t0 + r, &oy, &ox);
        const int down = d->oh - oy < 4 ? d->oh - oy : 4, across = d->ow - ox < 4 ? d->ow - ox : 4;
        const float *m = M + (size_t)r * fw;
        for (int f = 0; f < fw; f += 8) {
            __m256 s[4][6];
            for (int j = 0; j < 6; j++) { /* Aᵀ M, column j */
                __m256 col[6], out[4];
                for (int i = 0; i < 6; i++) col[i] = _mm256_loadu_ps(m + (size_t)(6 * i + j) * plane + f);
                a4(col, out);
                for (int i = 0; i < 4; i++) s[i][j] = out[i];
            }
            const int fo = f0 + f;
            for (int i = 0; i < down; i++) { /* (Aᵀ M) A, row i */
                __m256 y[4];
                a4(s[i], y);
                const size_t at = o + (size_t)i * d->ow * F;
                for (int j = 0; j < across; j++) {
                    const float *res = k->residual ? k->residual + at + (size_t)j * F : NULL;
                    _mm256_storeu_ps(k->y + at + (size_t)j * F + fo, finish(k, y[j], fo, res));
                }
            }
        }
    }
}

/* Work item `item`: a block of tiles and a group of filters, in the thread's buffer. */
static void run_block(const wcall *k, int64_t item, float *buf)
{
    const wplan *p = k->p;
    const int grp = (int)(item % p->groups);
    const int64_t t0 = item / p->groups * p->rows;
    const int rows = k->p->tiles - t0 < p->rows ? (int)(k->p->tiles - t0) : p->rows;
    const int f0 = grp * p->fw, fw = k->d->f - f0 < p->fw ? k->d->f - f0 : p->fw;
    float *V = buf, *M = buf + tfc_cpu_padded((int64_t)p->A * cap_rows(k->d, p->A) * k->d->c);
    if (p->m == 4) {
        input_transform4(k, t0, rows, V);
        gemms(k, rows, f0, fw, V, M);
        output_transform4(k, t0, rows, f0, fw, M);
    } else {
        input_transform2(k, t0, rows, V);
        gemms(k, rows, f0, fw, V, M);
        output_transform2(k, t0, rows, f0, fw, M);
    }
}
#endif

int tfc_cpu_winograd_forward(tfc_backend *be, const tfc_conv_desc *d, const float *x,
                             const float *w, const float *bias, const tfc_bn_params *bn,
                             const float *residual, tfc_act act, float *y, void *ws)
{
#ifdef TFC_X86_SIMD
    if (!be->inference_pass || !ws || d->n <= 0 || !tfc_cpu_winograd_fits(be, d) ||
        !(act == TFC_ACT_LINEAR || act == TFC_ACT_RELU || act == TFC_ACT_RELU6))
        return 0;
    const int nt = be->threads;
    const wplan p = make_plan(d, nt);
    const size_t per_thread = thread_floats(d, p.A);
    float *bufs = ws, *u_ws = bufs + (size_t)nt * per_thread;
    float *aff = u_ws + tfc_cpu_padded((int64_t)u_floats(d, p.A));
    const float *src[2] = {w, NULL};
    const size_t bytes[2] = {(size_t)9 * d->c * d->f * sizeof(float), 0};
    int fresh = 1;
    float *u = tfc_cpu_kept(be, src, bytes, KEPT_TAG - p.m, u_floats(d, p.A), &fresh);
    if (!u) u = u_ws;
    if (fresh) transform_weights(d, p.m, w, u);
    if (bn) /* a and b as bn_forward_infer computes them */
        for (int c = 0; c < d->f; c++) {
            double a = bn->gamma[c] / sqrt((double)bn->var[c] + (double)bn->eps);
            aff[c] = (float)a;
            aff[d->f + c] = (float)(bn->beta[c] - bn->mean[c] * a);
        }
    const wcall k = {d, &p, x, u, bias, bn ? aff : NULL, bn ? aff + d->f : NULL, residual, act, y};
    const int64_t items = p.blocks * p.groups;
    const int team = items > 1 && nt > 1 ? tfc_cpu_team(nt < items ? nt : (int)items) : 1;
    if (team == 1) {
        for (int64_t i = 0; i < items; i++) run_block(&k, i, bufs);
    } else {
#pragma omp parallel num_threads(team)
        {
            float *buf = bufs + (size_t)omp_get_thread_num() * per_thread;
#pragma omp for schedule(dynamic, 1)
            for (int64_t i = 0; i < items; i++) run_block(&k, i, buf);
        }
    }
    return 1;
#else
    return 0;
#endif
}
