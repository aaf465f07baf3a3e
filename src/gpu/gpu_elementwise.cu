/* Element-wise ops on the GPU: axpy, scale, bias add and gradient, strided copies, the
 * activations (softmax one warp per row), inverted dropout on Philox (core/rng.h, the very
 * function the CPU uses, so masks match bit for bit), and the deterministic reductions:
 * fixed-size grids whose partial sums are added in a fixed order, in double. Built with
 * --fmad=false, so a * b + c rounds twice as on the CPU. */
#include <math.h>

#include "gpu/gpu_act.cuh"
#include "gpu/gpu_internal.cuh"

/* Grid-stride loop over [0, n). */
#define GRID_LOOP(i, n)                                                              \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);        \
         i += (int64_t)gridDim.x * blockDim.x)

/* ---- reductions ------------------------------------------------------------------------ */

int tfc_gpu_reduce_blocks(int64_t n)
{
    int64_t b = (n + GPU_THREADS * 8 - 1) / (GPU_THREADS * 8);
    return b < 1 ? 1 : b > 1024 ? 1024 : (int)b;
}

/* Sum over a block of GPU_THREADS threads: warps first, then the first warp over the warp
 * sums; the result is valid in thread 0. */
static __device__ double block_sum(double v)
{
    __shared__ double sh[GPU_THREADS / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < GPU_THREADS / 32 ? sh[lane] : 0.0;
        v = warp_sum(v);
    }
    return v;
}

/* partials[block] = sum of F(i) over the block's grid-stride share of [0, n). */
template <typename F>
static __global__ void sum_kernel(int64_t n, F f, double *partials)
{
    double acc = 0.0;
    GRID_LOOP(i, n) acc += f(i);
    acc = block_sum(acc);
    if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

/* out[0] = sum of partials[0..nb), one warp, fixed order. */
static __global__ void finish_kernel(const double *partials, int nb, double *out)
{
    double acc = 0.0;
    for (int i = threadIdx.x; i < nb; i += 32) acc += partials[i];
    acc = warp_sum(acc);
    if (threadIdx.x == 0) out[0] = acc;
}

template <typename F>
static int reduce(gpu_ctx *g, int64_t n, F f, double *partials, double *out)
{
    const int nb = tfc_gpu_reduce_blocks(n);
    sum_kernel<<<nb, GPU_THREADS, 0, g->stream>>>(n, f, partials);
    TFC_LAUNCH_CHECK(g, sum_kernel, 1);
    finish_kernel<<<1, 32, 0, g->stream>>>(partials, nb, out);
    TFC_LAUNCH_CHECK(g, finish_kernel, 1);
    return 0;
}

struct read_f64 {
    const double *p;
    __device__ double operator()(int64_t i) const { return p[i]; }
};

int tfc_gpu_sum_f64(gpu_ctx *g, const double *in, int64_t n, double *partials, double *out)
{
    return reduce(g, n, read_f64{in}, partials, out);
}

struct square_f32 {
    const float *p;
    __device__ double operator()(int64_t i) const { return (double)p[i] * p[i]; }
};

/* NaN and +-Inf are exactly the floats whose exponent bits are all ones. */
struct nonfinite_f32 {
    const float *p;
    __device__ double operator()(int64_t i) const
    {
        return (__float_as_uint(p[i]) & 0x7f800000u) == 0x7f800000u ? 1.0 : 0.0;
    }
};

/* Runs a reduction and brings its double back to the host; NaN when a call failed. */
template <typename F>
static double reduce_to_host(gpu_ctx *g, int64_t n, F f)
{
    if (n <= 0) return 0.0;
    GPU_CAPTURE_REFUSE(g, "a reduction read back to the host (sumsq, count_nonfinite)", NAN);
    const int nb = tfc_gpu_reduce_blocks(n);
    double *buf = (double *)tfc_gpu_scratch(g, (size_t)(nb + 1) * sizeof(double));
    if (!buf || reduce(g, n, f, buf + 1, buf)) return NAN;
    double *host = (double *)g->host_result;
    TFC_CUDA_TRY(g, cudaMemcpyAsync(host, buf, sizeof(double), cudaMemcpyDeviceToHost, g->stream),
                 NAN);
    TFC_CUDA_TRY(g, cudaStreamSynchronize(g->stream), NAN);
    return *host;
}

double tfc_gpu_sumsq(tfc_backend *be, int64_t n, const float *x)
{
    return reduce_to_host(gpu_of(be), n, square_f32{x});
}

/* tfc_gpu_sumsq's reduction (the same grid, the same bits) with its double left in device
 * memory: the trainer's grad_sumsq (gpu_optim.cu). */
int tfc_gpu_sumsq_to(gpu_ctx *g, int64_t n, const float *x, double *out)
{
    if (n <= 0) {
        TFC_CUDA_TRY(g, cudaMemsetAsync(out, 0, sizeof(double), g->stream), 1);
        return 0;
    }
    double *partials = (double *)tfc_gpu_scratch(g, (size_t)tfc_gpu_reduce_blocks(n) *
                                                        sizeof(double));
    return partials ? reduce(g, n, square_f32{x}, partials, out) : 1;
}

/* A weight regularizer's penalty term of element i: l1 |w| + l2 w^2 in double */
struct penalty_f32 {
    const float *p;
    double l1, l2;
    __device__ double operator()(int64_t i) const
    {
        const double v = p[i];
        return l1 * fabs(v) + l2 * v * v;
    }
};

static __global__ void penalty_add_kernel(const double *sum, float *loss)
{
    *loss += (float)*sum;
}

static __global__ void penalty_grad_kernel(int64_t n, float l1, float two_l2, const float *w,
                                           float *grad)
{
    GRID_LOOP(i, n)
    {
        const float v = w[i];
        const float sign = v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : 0.0f;
        grad[i] += l1 * sign + two_l2 * v;
    }
}

/* The penalty summed by the deterministic reduction (a grid fixed by n, partials added in
 * order, in double), added to the loss on the device: no host round trip, so it runs in the
 * staged step and CUDA graphs; the gradient element-wise, the CPU's formula and bits
 * (--fmad=false). Not in the table yet (TFC_BACKEND_LAYER_OPS): tfc_gpu_test_enable_layer_ops
 * puts it in for make test-gpu. */
void tfc_gpu_penalty(tfc_backend *be, int64_t n, float l1, float l2, const float *w,
                     float *loss, float *grad)
{
    gpu_ctx *g = gpu_of(be);
    if (n <= 0) return;
    if (loss) {
        const int nb = tfc_gpu_reduce_blocks(n);
        double *buf = (double *)tfc_gpu_scratch(g, (size_t)(nb + 1) * sizeof(double));
        if (!buf || reduce(g, n, penalty_f32{w, (double)l1, (double)l2}, buf + 1, buf)) return;
        penalty_add_kernel<<<1, 1, 0, g->stream>>>(buf, loss);
        TFC_LAUNCH_CHECK(g, penalty_add_kernel);
    }
    if (grad) {
        penalty_grad_kernel<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>(n, l1, 2.0f * l2, w,
                                                                             grad);
        TFC_LAUNCH_CHECK(g, penalty_grad_kernel);
    }
}

/* A weight constraint (tfc_constraint_desc): one thread per norm, summed in double over the
 * reduced axis in order, then the CPU's float32 factor (cpu_constrain.c) */
static __global__ void constrain_kernel(tfc_constraint_desc d, float *w)
{
    GRID_LOOP(t, d.outer * d.inner)
    {
        const int64_t o = t / d.inner, c = t % d.inner;
        float *base = w + o * d.red * d.inner + c;
        if (d.kind == TFC_CONSTRAINT_NON_NEG) {
            for (int64_t r = 0; r < d.red; r++)
                if (base[r * d.inner] < 0.0f) base[r * d.inner] = 0.0f;
            continue;
        }
        double sum = 0.0;
        for (int64_t r = 0; r < d.red; r++) {
            const double v = base[r * d.inner];
            sum += v * v;
        }
        const float norm = (float)sqrt(sum), eps = 1e-7f;
        if (d.kind == TFC_CONSTRAINT_UNIT_NORM) {
            const float den = eps + norm;
            for (int64_t r = 0; r < d.red; r++) base[r * d.inner] /= den;
            continue;
        }
        const int mm = d.kind == TFC_CONSTRAINT_MIN_MAX_NORM;
        const float lo = mm ? d.min_value : 0.0f;
        const float clipped = norm < lo ? lo : norm > d.max_value ? d.max_value : norm;
        const float desired = mm ? d.rate * clipped + (1.0f - d.rate) * norm : clipped;
        const float f = desired / (eps + norm);
        for (int64_t r = 0; r < d.red; r++) base[r * d.inner] *= f;
    }
}

/* Not in the table yet (TFC_BACKEND_LAYER_OPS): tfc_gpu_test_enable_layer_ops puts it in for
 * make test-gpu. */
void tfc_gpu_constrain(tfc_backend *be, const tfc_constraint_desc *d, float *w)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t groups = d->outer * d->inner;
    if (groups <= 0 || d->red <= 0 || d->kind == TFC_CONSTRAINT_NONE) return;
    constrain_kernel<<<gpu_blocks(g, groups), GPU_THREADS, 0, g->stream>>>(*d, w);
    TFC_LAUNCH_CHECK(g, constrain_kernel);
}

/* A failed reduction counts everything as non-finite, so training stops rather than
 * continuing on garbage; tfc_gpu_status then names the failing call. */
int64_t tfc_gpu_count_nonfinite(tfc_backend *be, int64_t n, const float *x)
{
    double c = reduce_to_host(gpu_of(be), n, nonfinite_f32{x});
    return c == c ? (int64_t)c : n;
}

/* ---- bfloat16 rounding (precision: bf16) ---------------------------------------------------- */

/* core/half.h's tfc_bf16_round bit for bit, its NaN rule included, so a value the GPU rounds
 * is the CPU's */
static __global__ void round_bf16_kernel(int64_t n, const float *x, float *y)
{
    GRID_LOOP(i, n) {
        unsigned u = __float_as_uint(x[i]);
        u = (u & 0x7fffffffu) > 0x7f800000u ? u | 0x00400000u : u + 0x7fffu + ((u >> 16) & 1u);
        y[i] = __uint_as_float(u & 0xffff0000u);
    }
}

void tfc_gpu_round_bf16(tfc_backend *be, int64_t n, const float *x, float *y)
{
    gpu_ctx *g = gpu_of(be);
    if (n <= 0) return;
    round_bf16_kernel<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>(n, x, y);
    TFC_LAUNCH_CHECK(g, round_bf16_kernel);
}

/* core/half.h's tfc_f16_round bit for bit (built with --fmad=false: the subnormals' sum and
 * difference round as on the CPU) */
static __global__ void round_f16_kernel(int64_t n, const float *x, float *y)
{
    GRID_LOOP(i, n) {
        const unsigned u = __float_as_uint(x[i]), sign = u & 0x80000000u, a = u ^ sign;
        const float f = __uint_as_float(a);
        const unsigned s = __float_as_uint(__fsub_rn(__fadd_rn(f, 0.5f), 0.5f));
        unsigned r = a > 0x7f800000u    ? (a | 0x00400000u) & ~0x1fffu
                     : a >= 0x477ff000u ? 0x7f800000u
                     : a >= 0x38800000u ? (a + 0xfffu + ((a >> 13) & 1u)) & ~0x1fffu
                                        : s;
        y[i] = __uint_as_float(r | sign);
    }
}

void tfc_gpu_round_f16(tfc_backend *be, int64_t n, const float *x, float *y)
{
    gpu_ctx *g = gpu_of(be);
    if (n <= 0) return;
    round_f16_kernel<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>(n, x, y);
    TFC_LAUNCH_CHECK(g, round_f16_kernel);
}

/* ---- axpy, scale, bias, copies ------------------------------------------------------------ */

static __global__ void axpy_kernel(int64_t n, float alpha, const float *x, float *y)
{
    GRID_LOOP(i, n) y[i] += alpha * x[i];
}

static __global__ void scale_kernel(int64_t n, float alpha, float *x)
{
    GRID_LOOP(i, n) x[i] *= alpha;
}

void tfc_gpu_axpy(tfc_backend *be, int64_t n, float alpha, const float *x, float *y)
{
    gpu_ctx *g = gpu_of(be);
    if (n <= 0) return;
    axpy_kernel<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>(n, alpha, x, y);
    TFC_LAUNCH_CHECK(g, axpy_kernel);
}

/* y = a + b, or its ReLU (as act_forward's) */
static __global__ void add_kernel(int64_t n, const float *a, const float *b, int relu, float *y)
{
    GRID_LOOP(i, n)
    {
        float v = a[i] + b[i];
        y[i] = relu && v < 0.0f ? 0.0f : v;
    }
}

void tfc_gpu_add(tfc_backend *be, int64_t n, const float *a, const float *b, tfc_act act,
                 float *y)
{
    gpu_ctx *g = gpu_of(be);
    if (n <= 0) return;
    add_kernel<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>(n, a, b, act == TFC_ACT_RELU, y);
    TFC_LAUNCH_CHECK(g, add_kernel);
}

void tfc_gpu_scale(tfc_backend *be, int64_t n, float alpha, float *x)
{
    gpu_ctx *g = gpu_of(be);
    if (n <= 0) return;
    scale_kernel<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>(n, alpha, x);
    TFC_LAUNCH_CHECK(g, scale_kernel);
}

/* x *= S (float16's loss scale on the loss's gradient), S read from the step state; a
 * float product, as the `scale` kernel's with S by value */
static __global__ void loss_scale_at_kernel(int64_t n, const tfc_step_state *st, float *x)
{
    const float s = st->loss_scale;
    GRID_LOOP(i, n) x[i] *= s;
}

void tfc_gpu_loss_scale_at(tfc_backend *be, int64_t n, const tfc_step_state *st, float *x)
{
    gpu_ctx *g = gpu_of(be);
    if (n <= 0) return;
    loss_scale_at_kernel<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>(n, st, x);
    TFC_LAUNCH_CHECK(g, loss_scale_at_kernel);
}

/* y[r, c] += b[c] */
static __global__ void bias_add_kernel(int64_t total, int cols, const float *b, float *y)
{
    GRID_LOOP(i, total) y[i] += b[i % cols];
}

void tfc_gpu_bias_add(tfc_backend *be, int64_t rows, int cols, const float *b, float *y)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t total = rows * cols;
    if (total <= 0) return;
    bias_add_kernel<<<gpu_blocks(g, total), GPU_THREADS, 0, g->stream>>>(total, cols, b, y);
    TFC_LAUNCH_CHECK(g, bias_add_kernel);
}

struct column_value {
    const float *p;
    int cols;
    __device__ void operator()(int64_t r, int c, double *v) const { v[0] = p[r * cols + c]; }
};

/* db[c] += sum over splits (in order) of the column sums */
static __global__ void bias_grad_finish(int cols, int splits, const double *partial, float *db)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < cols) db[c] += (float)colsum_total(partial, 0, splits, cols, c);
}

/* db[c] += sum_r dy[r, c], summed in double in a fixed order (deterministic). */
void tfc_gpu_bias_grad(tfc_backend *be, int64_t rows, int cols, const float *dy, float *db)
{
    gpu_ctx *g = gpu_of(be);
    if (rows <= 0 || cols <= 0) return;
    const int wide = g->fast_norm; /* tfc_gpu_set_fast_norm */
    const int splits = wide ? colsum_splits_fast(rows) : colsum_splits(rows);
    double *partial = (double *)tfc_gpu_scratch(g, (size_t)splits * cols * sizeof(double));
    if (!partial) return;
    if (wide ? gpu_colsum_fast<1>(g, rows, cols, column_value{dy, cols}, partial)
             : gpu_colsum<1>(g, rows, cols, column_value{dy, cols}, partial))
        return;
    bias_grad_finish<<<(cols + 255) / 256, 256, 0, g->stream>>>(cols, splits, partial, db);
    TFC_LAUNCH_CHECK(g, bias_grad_finish);
}

static __global__ void copy2d_add_kernel(int64_t rows, int cols, const float *src, int src_ld,
                                  float *dst, int dst_ld)
{
    GRID_LOOP(i, rows * cols)
    {
        int64_t r = i / cols;
        int c = (int)(i % cols);
        dst[r * dst_ld + c] += src[r * src_ld + c];
    }
}

/* dst[r*dst_ld + c] (= or +=) src[r*src_ld + c] */
void tfc_gpu_copy2d(tfc_backend *be, int64_t rows, int cols, const float *src, int src_ld,
                    float *dst, int dst_ld, int accumulate)
{
    gpu_ctx *g = gpu_of(be);
    if (rows <= 0 || cols <= 0) return;
    if (!accumulate) {
        TFC_CUDA_TRY(g, cudaMemcpy2DAsync(dst, (size_t)dst_ld * sizeof(float), src,
                                          (size_t)src_ld * sizeof(float),
                                          (size_t)cols * sizeof(float), (size_t)rows,
                                          cudaMemcpyDeviceToDevice, g->stream));
        return;
    }
    copy2d_add_kernel<<<gpu_blocks(g, rows * cols), GPU_THREADS, 0, g->stream>>>(
        rows, cols, src, src_ld, dst, dst_ld);
    TFC_LAUNCH_CHECK(g, copy2d_add_kernel);
}

/* ---- activations ------------------------------------------------------------------------ */

static __global__ void act_forward_kernel(int act, int64_t n, const float *x, float *y)
{
    GRID_LOOP(i, n) y[i] = act_value(act, x[i]);
}

static __global__ void act_backward_kernel(int act, int64_t n, const float *x, const float *y,
                                    const float *dy, float *dx, int assign)
{
    GRID_LOOP(i, n) {
        const float g = act_deriv(act, x[i], y ? y[i] : 0.0f) * dy[i];
        dx[i] = assign ? g : dx[i] + g;
    }
}

/* One warp per row: y = exp(x - max) / sum exp(x - max); the maximum keeps exp finite. The
 * sum is in double, as on the CPU. x and y may alias (each lane rewrites what it read). */
static __global__ void softmax_forward_kernel(int64_t rows, int cols, const float *x, float *y)
{
    const int lane = threadIdx.x & 31;
    const int64_t nw = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5; r < rows; r += nw) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float m = -INFINITY;
        for (int j = lane; j < cols; j += 32) m = fmaxf(m, xr[j]);
        m = warp_max(m);
        double s = 0.0;
        for (int j = lane; j < cols; j += 32) {
            float e = expf(xr[j] - m);
            yr[j] = e;
            s += e;
        }
        s = warp_sum(s);
        const float inv = (float)(1.0 / s);
        for (int j = lane; j < cols; j += 32) yr[j] *= inv;
    }
}

/* dx_j += y_j (dy_j - sum_k dy_k y_k), one warp per row. */
static __global__ void softmax_backward_kernel(int64_t rows, int cols, const float *y, const float *dy,
                                        float *dx, int assign)
{
    const int lane = threadIdx.x & 31;
    const int64_t nw = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5; r < rows; r += nw) {
        const float *yr = y + r * cols, *gr = dy + r * cols;
        float *dr = dx + r * cols;
        double dot = 0.0;
        for (int j = lane; j < cols; j += 32) dot += (double)gr[j] * yr[j];
        const float d = (float)warp_sum(dot);
        for (int j = lane; j < cols; j += 32) dr[j] = (assign ? 0.0f : dr[j]) + yr[j] * (gr[j] - d);
    }
}

/* Blocks for one warp per row. */
static int warp_blocks(const gpu_ctx *g, int64_t rows)
{
    return gpu_blocks(g, rows * 32);
}

void tfc_gpu_act_forward(tfc_backend *be, tfc_act act, int64_t n, int cols, const float *x,
                         float *y)
{
    gpu_ctx *g = gpu_of(be);
    if (n <= 0) return;
    if (act == TFC_ACT_LINEAR) {
        if (x != y)
            TFC_CUDA_TRY(g, cudaMemcpyAsync(y, x, (size_t)n * sizeof(float),
                                            cudaMemcpyDeviceToDevice, g->stream));
        return;
    }
    if (act == TFC_ACT_SOFTMAX) {
        if (cols <= 0) cols = (int)n;
        softmax_forward_kernel<<<warp_blocks(g, n / cols), GPU_THREADS, 0, g->stream>>>(
            n / cols, cols, x, y);
        TFC_LAUNCH_CHECK(g, softmax_forward_kernel);
        return;
    }
    act_forward_kernel<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>((int)act, n, x, y);
    TFC_LAUNCH_CHECK(g, act_forward_kernel);
}

void tfc_gpu_act_backward(tfc_backend *be, tfc_act act, int64_t n, int cols, const float *x,
                          const float *y, const float *dy, float *dx, int assign)
{
    gpu_ctx *g = gpu_of(be);
    if (n <= 0) return;
    if (act == TFC_ACT_SOFTMAX) {
        if (cols <= 0) cols = (int)n;
        softmax_backward_kernel<<<warp_blocks(g, n / cols), GPU_THREADS, 0, g->stream>>>(
            n / cols, cols, y, dy, dx, assign);
        TFC_LAUNCH_CHECK(g, softmax_backward_kernel);
        return;
    }
    act_backward_kernel<<<gpu_blocks(g, n), GPU_THREADS, 0, g->stream>>>((int)act, n, x, y, dy,
                                                                         dx, assign);
    TFC_LAUNCH_CHECK(g, act_backward_kernel);
}

/* ---- dropout ------------------------------------------------------------------------------- */

/* One thread per Philox block j: elements 4j .. 4j+3 use its four lanes, exactly
 * tfc_rng_uniform(key, step, i). out[i] (= or +=) in[i] * keep_i * scale. step_off:
 * gpu_step_offset. */
static __global__ void dropout_kernel(int64_t n, float rate, float scale, uint64_t key, uint64_t step,
                               const uint64_t *step_off, const float *in, float *out,
                               int accumulate)
{
    if (step_off) step += *step_off;
    GRID_LOOP(j, (n + 3) / 4)
    {
        tfc_u32x4 r = tfc_philox(key, (uint64_t)j, step);
#pragma unroll
        for (int lane = 0; lane < 4; lane++) {
            int64_t i = 4 * j + lane;
            if (i >= n) break;
            float v = tfc_u32_to_unit(r.v[lane]) >= rate ? in[i] * scale : 0.0f;
            out[i] = accumulate ? out[i] + v : v;
        }
    }
}

static void dropout(tfc_backend *be, int64_t n, float rate, uint64_t key, uint64_t step,
                    const float *in, float *out, int accumulate)
{
    gpu_ctx *g = gpu_of(be);
    if (n <= 0) return;
    if (rate <= 0.0f) {
        if (accumulate)
            tfc_gpu_axpy(be, n, 1.0f, in, out);
        else if (in != out)
            TFC_CUDA_TRY(g, cudaMemcpyAsync(out, in, (size_t)n * sizeof(float),
                                            cudaMemcpyDeviceToDevice, g->stream));
        return;
    }
    /* rate >= 1 drops everything; 1 / (1 - rate) would be inf and 0 * inf NaN. */
    const float scale = rate >= 1.0f ? 0.0f : 1.0f / (1.0f - rate);
    dropout_kernel<<<gpu_blocks(g, (n + 3) / 4), GPU_THREADS, 0, g->stream>>>(
        n, rate, scale, key, step, gpu_step_offset(g), in, out, accumulate);
    TFC_LAUNCH_CHECK(g, dropout_kernel);
}

void tfc_gpu_dropout_forward(tfc_backend *be, int64_t n, float rate, uint64_t key,
                             uint64_t step, const float *x, float *y)
{
    dropout(be, n, rate, key, step, x, y, 0);
}

/* dx += dy * keep / (1 - rate), the mask regenerated from (key, step). */
void tfc_gpu_dropout_backward(tfc_backend *be, int64_t n, float rate, uint64_t key,
                              uint64_t step, const float *dy, float *dx)
{
    dropout(be, n, rate, key, step, dy, dx, 1);
}
