/* CPU activations, forward and backward, with Keras's definitions (keras.activations).
 * Hot ones (relu, sigmoid, tanh, softmax, swish, exponential) use the branch-free math of
 * cpu_internal.h so the loops vectorise, and gelu a branch-free normal distribution
 * function (below) that keeps its left tail; the rarer ones call libm for its
 * precision (expm1f near 0, log1pf for softplus and mish). */
#include "cpu/cpu_internal.h"

#define SELU_ALPHA 1.6732632423543772848170429916717f
#define SELU_SCALE 1.0507009873554804934193349852946f
#define LEAKY_SLOPE 0.2f
#define INV_SQRT_2PI 0.39894228040143267794

/* The helpers below are inlined into every loop that calls them, the plain loop of
 * TFC_CPU_FOR_SIMD too: GCC left the normal CDF a scalar call there (in the large function
 * whose one-thread path holds every activation's loop), and a loop with a call does not
 * vectorise. */
#define ACT_INLINE static inline __attribute__((always_inline))

/* Phi(x) = erfc(-x / sqrt 2) / 2, the normal distribution function, in float with a
 * relative error under 5e-7 (8 ulp) over the whole range, so x Phi(x) keeps its relative
 * accuracy in gelu's left tail, where 1 + erf would cancel (Keras's and PyTorch's float
 * erf forms lose every digit there), and the density phi(x) = e^(-z^2) / sqrt(2 pi) into
 * *pdf from the same exp: for z = |x| / sqrt 2 and t = 1 / (1 + z/2),
 *   erfc(z) = t Q(t) e^(-z^2)
 * (the form of Numerical Recipes' erfcc, with Q fitted directly: degree 10 in u = t - 1/2,
 * centred so its terms cancel less in float; a relative least-squares fit, Lawson-iterated
 * towards minimax, of erfc(z) e^(z^2) / t over z in [0, 9.5], within 8.2e-9 relative, and
 * about 1.5e-7 evaluated in float), and erfc(-z) = 2 - erfc(z). The exponent z^2 = x^2 / 2
 * must be carried exactly (its rounding error times z^2 would reach 1e-5 at x = -12, the
 * tail erfcf lost): x is split into its top 12 bits xh and the rest xl, so x^2 / 2 =
 * xh^2 / 2 (exact) + xh xl + xl^2 / 2 (tiny, passed to the exp as a correction of its
 * reduced argument). Estrin's scheme keeps the dependency chains
 * short. In double, as before, it took twice as long per element (3.6 against 1.85 ns,
 * forward, one thread, AVX2, /tmp micro-benchmark of both loops, 2026-11-29). */
ACT_INLINE float normal_cdf_pdf(float x, float *pdf)
{
    static const float c[11] = {0.51079135f,  0.68716069f,  0.55894365f,  0.14576819f,
                                -0.17205094f, -0.10364058f, 0.09809425f,  0.0534779f,
                                -0.07650095f, -0.01257756f, 0.03707387f};
    const float ax = fabsf(x);
    const float axc = tfc_cpu_select(ax > 16.0f, 16.0f, ax); /* e^-128 underflows anyway */
    uint32_t xb;
    memcpy(&xb, &axc, 4);
    xb &= 0xFFFFF000u;
    float xh;
    memcpy(&xh, &xb, 4);
    const float xl = axc - xh;
    /* e^(-z^2); z^2 = 103 underflows to the smallest subnormals, the clamp below it */
    const float ah = 0.5f * xh * xh, al = xh * xl + 0.5f * xl * xl;
    const float g = tfc_cpu_expf_lo(-tfc_cpu_select(ah > 103.0f, 103.0f, ah), al);
    const float t = 1.0f / (1.0f + 0.5f * (ax * 0.70710678118654752440f));
    const float u = t - 0.5f, u2 = u * u, u4 = u2 * u2, u8 = u4 * u4;
    const float q = ((c[0] + c[1] * u) + (c[2] + c[3] * u) * u2) +
                    ((c[4] + c[5] * u) + (c[6] + c[7] * u) * u2) * u4 +
                    ((c[8] + c[9] * u) + c[10] * u2) * u8;
    const float e = 0.5f * t * q * g; /* erfc(z) / 2 = Phi(-|x|) */
    *pdf = (float)INV_SQRT_2PI * g;
    return tfc_cpu_select(x < 0.0f, e, 1.0f - e);
}

/* gelu(x) = x Phi(x) */
ACT_INLINE float gelu(float v)
{
    float pdf;
    return v * normal_cdf_pdf(v, &pdf);
}

/* gelu'(x) = Phi(x) + x phi(x) */
ACT_INLINE float gelu_grad(float v)
{
    float pdf;
    const float cdf = normal_cdf_pdf(v, &pdf);
    return cdf + v * pdf;
}

/* y[i] = EXPR(v) with v = x[i], over all n elements (TFC_CPU_FOR_SIMD: no OpenMP region
 * on one thread). */
#define MAP_FORWARD(EXPR)                                                                  \
    TFC_CPU_FOR_SIMD(n, nt, for (int64_t i = 0; i < n; i++) {                              \
        float v = x[i];                                                                    \
        y[i] = (EXPR);                                                                     \
    })

/* dx[i] = (assign ? 0 : dx[i]) + DERIV * dy[i] with v = x[i], out = y[i]. */
#define MAP_BACKWARD(DERIV)                                                                \
    do {                                                                                   \
        if (assign) {                                                                      \
            TFC_CPU_FOR_SIMD(n, nt, for (int64_t i = 0; i < n; i++) {                      \
                float v = x[i], out = y[i];                                                \
                (void)v;                                                                   \
                (void)out;                                                                 \
                dx[i] = (DERIV) * dy[i];                                                   \
            });                                                                            \
        } else {                                                                           \
            TFC_CPU_FOR_SIMD(n, nt, for (int64_t i = 0; i < n; i++) {                      \
                float v = x[i], out = y[i];                                                \
                (void)v;                                                                   \
                (void)out;                                                                 \
                dx[i] += (DERIV) * dy[i];                                                  \
            });                                                                            \
        }                                                                                  \
    } while (0)

/* Row-wise softmax: y = exp(x - max) / sum exp(x - max). Subtracting the row maximum keeps
 * exp from overflowing and changes nothing mathematically. */
TFC_CPU_VECTOR
static void softmax_forward(int nt, int64_t rows, int cols, const float *x, float *y)
{
    TFC_CPU_FOR(rows, nt, for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        float m = xr[0];
        for (int j = 1; j < cols; j++) m = xr[j] > m ? xr[j] : m;
        double sum = 0.0;
        _Pragma("omp simd reduction(+ : sum)")
        for (int j = 0; j < cols; j++) {
            float e = tfc_cpu_expf(xr[j] - m);
            yr[j] = e;
            sum += e;
        }
        float inv = (float)(1.0 / sum);
        _Pragma("omp simd")
        for (int j = 0; j < cols; j++) yr[j] *= inv;
    });
}

/* dx_j += y_j (dy_j - sum_k dy_k y_k): the softmax Jacobian J = diag(y) - y y^T times dy. */
TFC_CPU_VECTOR
static void softmax_backward(const tfc_backend *be, int64_t rows, int cols, const float *y,
                             const float *dy, float *dx, int assign)
{
    int nt = tfc_cpu_threads(be, rows * cols);
    TFC_CPU_FOR(rows, nt, for (int64_t r = 0; r < rows; r++) {
        const float *yr = y + r * cols, *dyr = dy + r * cols;
        float *dxr = dx + r * cols;
        double dot = 0.0;
        _Pragma("omp simd reduction(+ : dot)")
        for (int j = 0; j < cols; j++) dot += (double)dyr[j] * yr[j];
        float d = (float)dot;
        _Pragma("omp simd")
        for (int j = 0; j < cols; j++) dxr[j] = (assign ? 0.0f : dxr[j]) + yr[j] * (dyr[j] - d);
    });
}

/* y = act(x) in nt shares (1: on the calling thread, no region); x and y may alias. */
TFC_VECTOR512
static void act_forward(int nt, tfc_act act, int64_t n, int cols, const float *x, float *y)
{
    switch (act) {
    case TFC_ACT_LINEAR:
        if (x != y) memmove(y, x, (size_t)n * sizeof(float));
        break;
    case TFC_ACT_RELU: MAP_FORWARD(v < 0.0f ? 0.0f : v); break;
    case TFC_ACT_SIGMOID: MAP_FORWARD(tfc_cpu_sigmoidf(v)); break;
    case TFC_ACT_TANH: MAP_FORWARD(tfc_cpu_tanhf(v)); break;
    case TFC_ACT_SOFTMAX:
        if (cols <= 0) cols = (int)n;
        softmax_forward(nt, n / cols, cols, x, y);
        break;
    case TFC_ACT_ELU: MAP_FORWARD(v > 0.0f ? v : expm1f(v)); break;
    case TFC_ACT_SELU:
        MAP_FORWARD(SELU_SCALE * (v > 0.0f ? v : SELU_ALPHA * expm1f(v)));
        break;
    /* gelu(x) = x Phi(x) = x/2 erfc(-x/sqrt 2) (normal_cdf_pdf keeps the left tail) */
    case TFC_ACT_GELU: MAP_FORWARD(gelu(v)); break;
    case TFC_ACT_LEAKY_RELU: MAP_FORWARD(v < 0.0f ? LEAKY_SLOPE * v : v); break;
    /* softplus(x) = log(1 + e^x) = max(x, 0) + log1p(e^-|x|), which never overflows. */
    case TFC_ACT_SOFTPLUS: MAP_FORWARD((v > 0.0f ? v : 0.0f) + log1pf(expf(-fabsf(v)))); break;
    case TFC_ACT_SOFTSIGN: MAP_FORWARD(v / (1.0f + fabsf(v))); break;
    case TFC_ACT_SWISH: MAP_FORWARD(v * tfc_cpu_sigmoidf(v)); break;
    /* relu6(x + 3) / 6 */
    case TFC_ACT_HARD_SIGMOID: {
        MAP_FORWARD((v + 3.0f < 0.0f ? 0.0f : v + 3.0f > 6.0f ? 6.0f : v + 3.0f) / 6.0f);
        break;
    }
    case TFC_ACT_EXPONENTIAL: MAP_FORWARD(tfc_cpu_expf(v)); break;
    case TFC_ACT_RELU6: MAP_FORWARD(v < 0.0f ? 0.0f : v > 6.0f ? 6.0f : v); break;
    /* x relu6(x + 3) / 6 */
    case TFC_ACT_HARD_SILU:
        MAP_FORWARD(v * (v + 3.0f < 0.0f ? 0.0f : v + 3.0f > 6.0f ? 6.0f : v + 3.0f) / 6.0f);
        break;
    /* x tanh(softplus(x)), softplus as above (log1pf keeps its precision near 0) */
    case TFC_ACT_MISH:
        MAP_FORWARD(v * tanhf((v > 0.0f ? v : 0.0f) + log1pf(expf(-fabsf(v)))));
        break;
    default: TFC_ASSERT(!"unknown activation");
    }
}

void tfc_cpu_act_forward(tfc_backend *be, tfc_act act, int64_t n, int cols, const float *x,
                         float *y)
{
    if (n > 0) act_forward(tfc_cpu_threads(be, n), act, n, cols, x, y);
}

void tfc_cpu_act_forward_serial(tfc_act act, int64_t n, int cols, const float *x, float *y)
{
    if (n > 0) act_forward(1, act, n, cols, x, y);
}

/* dx += act'(x) dy, or = with assign. Derivatives use y where it is exact and cheaper
 * (sigmoid, tanh, elu, selu, exponential, softmax), x elsewhere; at a kink the right-hand
 * side is 0 (relu at 0 passes nothing, as TensorFlow). */
TFC_CPU_VECTOR
void tfc_cpu_act_backward(tfc_backend *be, tfc_act act, int64_t n, int cols, const float *x,
                          const float *y, const float *dy, float *dx, int assign)
{
    if (n <= 0) return;
    int nt = tfc_cpu_threads(be, n);
    switch (act) {
    case TFC_ACT_LINEAR: MAP_BACKWARD(1.0f); break;
    case TFC_ACT_RELU: MAP_BACKWARD(v > 0.0f ? 1.0f : 0.0f); break;
    case TFC_ACT_SIGMOID: MAP_BACKWARD(out * (1.0f - out)); break;
    case TFC_ACT_TANH: MAP_BACKWARD(1.0f - out * out); break;
    case TFC_ACT_SOFTMAX:
        if (cols <= 0) cols = (int)n;
        softmax_backward(be, n / cols, cols, y, dy, dx, assign);
        break;
    /* elu'(x) = e^x = y + 1 for x <= 0 */
    case TFC_ACT_ELU: MAP_BACKWARD(v > 0.0f ? 1.0f : out + 1.0f); break;
    /* selu'(x) = scale alpha e^x = y + scale alpha for x <= 0 */
    case TFC_ACT_SELU: MAP_BACKWARD(v > 0.0f ? SELU_SCALE : out + SELU_SCALE * SELU_ALPHA); break;
    case TFC_ACT_GELU: MAP_BACKWARD(gelu_grad(v)); break;
    case TFC_ACT_LEAKY_RELU: MAP_BACKWARD(v > 0.0f ? 1.0f : LEAKY_SLOPE); break;
    case TFC_ACT_SOFTPLUS: MAP_BACKWARD(tfc_cpu_sigmoidf(v)); break;
    /* softsign'(x) = 1 / (1 + |x|)^2 */
    case TFC_ACT_SOFTSIGN:
        MAP_BACKWARD(1.0f / ((1.0f + fabsf(v)) * (1.0f + fabsf(v))));
        break;
    /* swish'(x) = s + x s (1 - s), s = sigmoid(x) */
    case TFC_ACT_SWISH: {
        TFC_CPU_FOR_SIMD(n, nt, for (int64_t i = 0; i < n; i++) {
            float s = tfc_cpu_sigmoidf(x[i]);
            dx[i] = (assign ? 0.0f : dx[i]) + (s + x[i] * s * (1.0f - s)) * dy[i];
        });
        break;
    }
    case TFC_ACT_HARD_SIGMOID:
        MAP_BACKWARD(v > -3.0f && v < 3.0f ? 1.0f / 6.0f : 0.0f);
        break;
    case TFC_ACT_EXPONENTIAL: MAP_BACKWARD(out); break;
    /* relu6' = 1 inside (0, 6), 0 at and beyond the kinks (as TensorFlow) */
    case TFC_ACT_RELU6: MAP_BACKWARD(v > 0.0f && v < 6.0f ? 1.0f : 0.0f); break;
    /* hard_silu'(x) = (2x + 3) / 6 inside (-3, 3), 0 below, 1 above */
    case TFC_ACT_HARD_SILU:
        MAP_BACKWARD(v <= -3.0f ? 0.0f : v >= 3.0f ? 1.0f : (2.0f * v + 3.0f) / 6.0f);
        break;
    /* mish'(x) = t + x sigmoid(x) (1 - t^2), t = tanh(softplus(x)) */
    case TFC_ACT_MISH: {
        TFC_CPU_FOR_SIMD(n, nt, for (int64_t i = 0; i < n; i++) {
            float v = x[i];
            float t = tanhf((v > 0.0f ? v : 0.0f) + log1pf(expf(-fabsf(v))));
            float d = t + v * tfc_cpu_sigmoidf(v) * (1.0f - t * t);
            dx[i] = (assign ? 0.0f : dx[i]) + d * dy[i];
        });
        break;
    }
    default: TFC_ASSERT(!"unknown activation");
    }
}
