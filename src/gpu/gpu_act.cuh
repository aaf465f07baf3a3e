/* The activations' values and derivatives on the device, Keras's definitions as cpu_act.c's:
 * the elementwise ops' (gpu_elementwise.cu) and the stepped recurrent cells'
 * (gpu_rnn_dropout.cu). CUDA's expf/tanhf/erfcf are within 2 ulp. */
#ifndef TFC_GPU_ACT_CUH
#define TFC_GPU_ACT_CUH

#include <math.h>

#include "core/backend.h"

#define SELU_ALPHA 1.6732632423543772848170429916717f
#define SELU_SCALE 1.0507009873554804934193349852946f
#define LEAKY_SLOPE 0.2f
#define INV_SQRT_2PI 0.3989422804014327f
#define SQRT1_2 0.70710678118654752440f

static __device__ __forceinline__ float sigmoidf(float v)
{
    return 1.0f / (1.0f + expf(-v));
}

/* Keras's definitions (see cpu_act.c); CUDA's expf/tanhf/erfcf are within 2 ulp. */
static __device__ __forceinline__ float act_value(int act, float v)
{
    switch (act) {
    case TFC_ACT_RELU: return v < 0.0f ? 0.0f : v;
    case TFC_ACT_SIGMOID: return sigmoidf(v);
    case TFC_ACT_TANH: return tanhf(v);
    case TFC_ACT_ELU: return v > 0.0f ? v : expm1f(v);
    case TFC_ACT_SELU: return SELU_SCALE * (v > 0.0f ? v : SELU_ALPHA * expm1f(v));
    /* gelu(x) = x/2 erfc(-x/sqrt 2): erfc keeps the left tail */
    case TFC_ACT_GELU: return 0.5f * v * erfcf(-v * SQRT1_2);
    case TFC_ACT_LEAKY_RELU: return v < 0.0f ? LEAKY_SLOPE * v : v;
    /* softplus = max(x, 0) + log1p(e^-|x|), never overflows */
    case TFC_ACT_SOFTPLUS: return (v > 0.0f ? v : 0.0f) + log1pf(expf(-fabsf(v)));
    case TFC_ACT_SOFTSIGN: return v / (1.0f + fabsf(v));
    case TFC_ACT_SWISH: return v * sigmoidf(v);
    case TFC_ACT_HARD_SIGMOID: {
        float t = v + 3.0f;
        return (t < 0.0f ? 0.0f : t > 6.0f ? 6.0f : t) / 6.0f;
    }
    case TFC_ACT_EXPONENTIAL: return expf(v);
    case TFC_ACT_RELU6: return v < 0.0f ? 0.0f : v > 6.0f ? 6.0f : v;
    /* x relu6(x + 3) / 6 */
    case TFC_ACT_HARD_SILU: {
        float t = v + 3.0f;
        return v * (t < 0.0f ? 0.0f : t > 6.0f ? 6.0f : t) / 6.0f;
    }
    /* x tanh(softplus(x)) */
    case TFC_ACT_MISH: return v * tanhf((v > 0.0f ? v : 0.0f) + log1pf(expf(-fabsf(v))));
    default: return v; /* linear */
    }
}

/* act'(x), from x (v) or y (out) as cpu_act.c does. */
static __device__ __forceinline__ float act_deriv(int act, float v, float out)
{
    switch (act) {
    case TFC_ACT_RELU: return v > 0.0f ? 1.0f : 0.0f;
    case TFC_ACT_SIGMOID: return out * (1.0f - out);
    case TFC_ACT_TANH: return 1.0f - out * out;
    case TFC_ACT_ELU: return v > 0.0f ? 1.0f : out + 1.0f;
    case TFC_ACT_SELU: return v > 0.0f ? SELU_SCALE : out + SELU_SCALE * SELU_ALPHA;
    case TFC_ACT_GELU: return 0.5f * erfcf(-v * SQRT1_2) + v * INV_SQRT_2PI * expf(-0.5f * v * v);
    case TFC_ACT_LEAKY_RELU: return v > 0.0f ? 1.0f : LEAKY_SLOPE;
    case TFC_ACT_SOFTPLUS: return sigmoidf(v);
    case TFC_ACT_SOFTSIGN: return 1.0f / ((1.0f + fabsf(v)) * (1.0f + fabsf(v)));
    case TFC_ACT_SWISH: {
        float s = sigmoidf(v);
        return s + v * s * (1.0f - s);
    }
    case TFC_ACT_HARD_SIGMOID: return v > -3.0f && v < 3.0f ? 1.0f / 6.0f : 0.0f;
    case TFC_ACT_EXPONENTIAL: return out;
    case TFC_ACT_RELU6: return v > 0.0f && v < 6.0f ? 1.0f : 0.0f;
    case TFC_ACT_HARD_SILU: return v <= -3.0f ? 0.0f : v >= 3.0f ? 1.0f : (2.0f * v + 3.0f) / 6.0f;
    /* t + x sigmoid(x) (1 - t^2), t = tanh(softplus(x)) */
    case TFC_ACT_MISH: {
        float t = tanhf((v > 0.0f ? v : 0.0f) + log1pf(expf(-fabsf(v))));
        return t + v * sigmoidf(v) * (1.0f - t * t);
    }
    default: return 1.0f; /* linear */
    }
}

#endif
