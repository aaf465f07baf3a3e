/* CPU element-wise ops: axpy, add, scale, bias add and gradient, strided 2-D copies, inverted
 * dropout on Philox, and the host reductions (sum of squares, non-finite count). Loops go
 * parallel only above TFC_CPU_PAR_MIN elements; reductions accumulate in double. */
#include "core/rng.h"
#include "cpu/cpu_internal.h"

/* Column blocks of a reduction over rows: each thread keeps one block of partial sums. */
#define COL_BLOCK 256

void tfc_cpu_axpy(tfc_backend *be, int64_t n, float alpha, const float *x, float *y)
{
    int nt = tfc_cpu_threads(be, n);
#pragma omp parallel for simd num_threads(nt) schedule(static)
    for (int64_t i = 0; i < n; i++) y[i] += alpha * x[i];
}

/* y = a + b, or its ReLU (as act_forward's: v < 0 ? 0 : v), in one pass */
void tfc_cpu_add(tfc_backend *be, int64_t n, const float *a, const float *b, tfc_act act,
                 float *y)
{
    TFC_ASSERT(act == TFC_ACT_LINEAR || act == TFC_ACT_RELU);
    int nt = tfc_cpu_threads(be, n);
    if (act == TFC_ACT_RELU) {
#pragma omp parallel for simd num_threads(nt) schedule(static)
        for (int64_t i = 0; i < n; i++) {
            float v = a[i] + b[i];
            y[i] = v < 0.0f ? 0.0f : v;
        }
    } else {
#pragma omp parallel for simd num_threads(nt) schedule(static)
        for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
    }
}

void tfc_cpu_scale(tfc_backend *be, int64_t n, float alpha, float *x)
{
    int nt = tfc_cpu_threads(be, n);
#pragma omp parallel for simd num_threads(nt) schedule(static)
    for (int64_t i = 0; i < n; i++) x[i] *= alpha;
}

/* y[r, c] += b[c] */
void tfc_cpu_bias_add(tfc_backend *be, int64_t rows, int cols, const float *b, float *y)
{
    int nt = tfc_cpu_threads(be, rows * cols);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        float *row = y + r * cols;
#pragma omp simd
        for (int c = 0; c < cols; c++) row[c] += b[c];
    }
}

/* One channel block of oneDNN's nChw16c layout: 16 lanes in registers, their masks, and 16
 * floats in memory at any alignment. */
typedef float vf __attribute__((vector_size(64)));
typedef int32_t vi __attribute__((vector_size(64)));
typedef float vmem __attribute__((vector_size(64), aligned(4), may_alias));

/* y[i, p, :] (NHWC) = relu(((x + bias) a + b) + residual) from x in nChw16c (n images of
 * f / 16 planes of px pixels x 16 channels), each step rounded as bias_add,
 * bn_forward_infer's affine map, axpy with alpha 1 and act_forward's ReLU round it (bias,
 * a with b, residual NULL and relu 0: that step left out), on the calling thread. */
TFC_VECTOR512
void tfc_cpu_epilogue_16c(int64_t n, int64_t px, int f, const float *x, const float *bias,
                          const float *a, const float *b, const float *residual, int relu,
                          float *y)
{
    const int blocks = f / 16;
    for (int64_t i = 0; i < n; i++)
        for (int64_t p = 0; p < px; p++) {
            const int64_t o = (i * px + p) * f;
            for (int k = 0; k < blocks; k++) {
                vf v = *(const vmem *)(x + ((i * blocks + k) * px + p) * 16);
                if (bias) v += *(const vmem *)(bias + 16 * k);
                if (a) {
                    v *= *(const vmem *)(a + 16 * k);
                    v += *(const vmem *)(b + 16 * k);
                }
                if (residual) v += *(const vmem *)(residual + o + 16 * k);
                if (relu) v = (vf)((vi)v & ~(vi)(v < 0.0f)); /* NaN and -0 stay */
                *(vmem *)(y + o + 16 * k) = v;
            }
        }
}

/* db[c] += sum_r dy[r, c], in double: a float running sum over 10^5 rows loses digits. */
void tfc_cpu_bias_grad(tfc_backend *be, int64_t rows, int cols, const float *dy, float *db)
{
    for (int c0 = 0; c0 < cols; c0 += COL_BLOCK) {
        int cb = cols - c0 < COL_BLOCK ? cols - c0 : COL_BLOCK;
        double part[TFC_REDUCE_THREADS][COL_BLOCK];
        int nt = tfc_cpu_reduce_threads(be, rows * cb), team = 1;
#pragma omp parallel num_threads(nt)
        {
            int t = omp_get_thread_num(), T = omp_get_num_threads();
            if (t == 0) team = T;
            double *sums = part[t];
            for (int c = 0; c < cb; c++) sums[c] = 0.0;
            for (int64_t r = rows * t / T; r < rows * (t + 1) / T; r++) {
                const float *row = dy + r * cols + c0;
#pragma omp simd
                for (int c = 0; c < cb; c++) sums[c] += row[c];
            }
        }
        for (int t = 1; t < team; t++)
            for (int c = 0; c < cb; c++) part[0][c] += part[t][c];
        for (int c = 0; c < cb; c++) db[c0 + c] += (float)part[0][c];
    }
}

/* dst[r*dst_ld + c] (= or +=) src[r*src_ld + c] */
void tfc_cpu_copy2d(tfc_backend *be, int64_t rows, int cols, const float *src, int src_ld,
                    float *dst, int dst_ld, int accumulate)
{
    int nt = tfc_cpu_threads(be, rows * cols);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *s = src + r * src_ld;
        float *d = dst + r * dst_ld;
        if (accumulate) {
#pragma omp simd
            for (int c = 0; c < cols; c++) d[c] += s[c];
        } else {
            memcpy(d, s, (size_t)cols * sizeof(float));
        }
    }
}

/* Philox4x32-10 blocks per batch of the dropout loop. */
#define PHILOX_BATCH 64

/* One round of tfc_philox (core/rng.h), spelled out so that ten of them unroll inside a
 * SIMD loop over counters; the dropout test checks the mask against tfc_rng_uniform. */
#define PHILOX_ROUND()                                                                     \
    do {                                                                                   \
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;         \
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1; \
        c1 = (uint32_t)p1;                                                                 \
        c3 = (uint32_t)p0;                                                                 \
        c0 = n0;                                                                           \
        c2 = n2;                                                                           \
        k0 += 0x9E3779B9u;                                                                 \
        k1 += 0xBB67AE85u;                                                                 \
    } while (0)

/* r[4 j + lane] = lane of tfc_philox(key, first + j, step), j < PHILOX_BATCH. */
static inline __attribute__((always_inline)) void philox_batch(uint64_t key, uint64_t first, uint64_t step, uint32_t *r)
{
#pragma omp simd
    for (int j = 0; j < PHILOX_BATCH; j++) {
        uint64_t ctr = first + (uint64_t)j;
        uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32);
        uint32_t c2 = (uint32_t)step, c3 = (uint32_t)(step >> 32);
        uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
        PHILOX_ROUND();
        PHILOX_ROUND();
        PHILOX_ROUND();
        PHILOX_ROUND();
        PHILOX_ROUND();
        PHILOX_ROUND();
        PHILOX_ROUND();
        PHILOX_ROUND();
        PHILOX_ROUND();
        PHILOX_ROUND();
        r[4 * j] = c0;
        r[4 * j + 1] = c1;
        r[4 * j + 2] = c2;
        r[4 * j + 3] = c3;
    }
}

/* Inverted dropout over n elements: out[i] (= or +=) in[i] * keep_i / (1 - rate), keep_i =
 * (u_i >= rate), u_i = tfc_rng_uniform(key, step, i): lane i % 4 of Philox block i / 4,
 * generated PHILOX_BATCH blocks (4 * PHILOX_BATCH elements) at a time. */
TFC_VECTOR512
static void dropout(const tfc_backend *be, int64_t n, float rate, uint64_t key, uint64_t step,
                    const float *in, float *out, int accumulate)
{
    if (rate <= 0.0f) {
        if (accumulate)
            tfc_cpu_axpy((tfc_backend *)be, n, 1.0f, in, out);
        else if (in != out)
            memmove(out, in, (size_t)n * sizeof(float));
        return;
    }
    /* rate >= 1 drops everything; 1 / (1 - rate) would be inf and 0 * inf NaN. */
    const float scale = rate >= 1.0f ? 0.0f : 1.0f / (1.0f - rate);
    const int64_t per = 4 * PHILOX_BATCH, batches = (n + per - 1) / per;
    int nt = tfc_cpu_threads(be, n / 4);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t bt = 0; bt < batches; bt++) {
        uint32_t r[4 * PHILOX_BATCH];
        philox_batch(key, (uint64_t)bt * PHILOX_BATCH, step, r);
        const int64_t i0 = bt * per;
        const int m = n - i0 < per ? (int)(n - i0) : (int)per;
        const float *src = in + i0;
        float *dst = out + i0;
        if (accumulate) {
#pragma omp simd
            for (int i = 0; i < m; i++)
                dst[i] += tfc_cpu_select(tfc_u32_to_unit(r[i]) >= rate, src[i] * scale, 0.0f);
        } else {
#pragma omp simd
            for (int i = 0; i < m; i++)
                dst[i] = tfc_cpu_select(tfc_u32_to_unit(r[i]) >= rate, src[i] * scale, 0.0f);
        }
    }
}

void tfc_cpu_dropout_forward(tfc_backend *be, int64_t n, float rate, uint64_t key,
                             uint64_t step, const float *x, float *y)
{
    dropout(be, n, rate, key, step, x, y, 0);
}

/* dx += dy * keep / (1 - rate), the same mask regenerated from (key, step). */
void tfc_cpu_dropout_backward(tfc_backend *be, int64_t n, float rate, uint64_t key,
                              uint64_t step, const float *dy, float *dx)
{
    dropout(be, n, rate, key, step, dy, dx, 1);
}

double tfc_cpu_sumsq(tfc_backend *be, int64_t n, const float *x)
{
    double part[TFC_REDUCE_THREADS];
    int nt = tfc_cpu_reduce_threads(be, n), team = 1;
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        if (t == 0) team = T;
        double s = 0.0;
#pragma omp simd reduction(+ : s)
        for (int64_t i = n * t / T; i < n * (t + 1) / T; i++) s += (double)x[i] * x[i];
        part[t] = s;
    }
    double s = 0.0;
    for (int t = 0; t < team; t++) s += part[t];
    return s;
}

/* NaN and +-Inf are exactly the floats whose exponent bits are all ones. */
int64_t tfc_cpu_count_nonfinite(tfc_backend *be, int64_t n, const float *x)
{
    int64_t count = 0;
    int nt = tfc_cpu_threads(be, n);
#pragma omp parallel for simd num_threads(nt) schedule(static) reduction(+ : count)
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i], 4);
        count += (bits & 0x7f800000u) == 0x7f800000u;
    }
    return count;
}
