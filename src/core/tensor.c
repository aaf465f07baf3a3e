/* Tensor helpers that are not inline in tensor.h: dtype names (the safetensors spelling,
 * in the order of enum tfc_dtype), shape formatting for messages, and the one place that
 * reads, writes and converts element values of any dtype (half and bfloat16 included). */
#include "core/tensor.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const dtype_names[TFC_DTYPE_COUNT] = {
    "F32", "F64", "F16", "BF16", "I8", "U8", "I16", "U16", "I32", "U32", "I64", "U64", "BOOL",
};

/* The names table must follow the enum: adding a dtype without a name breaks the build. */
_Static_assert(sizeof dtype_names / sizeof *dtype_names == TFC_DTYPE_COUNT,
               "dtype_names must list every tfc_dtype");

const char *tfc_dtype_name(tfc_dtype dt)
{
    return (unsigned)dt < TFC_DTYPE_COUNT ? dtype_names[dt] : "?";
}

int tfc_dtype_from_name(const char *name)
{
    if (!name) return -1;
    for (int i = 0; i < TFC_DTYPE_COUNT; i++)
        if (strcmp(name, dtype_names[i]) == 0) return i;
    return -1;
}

/* Python's tuple spelling: "()" for a scalar, "(5,)" for one dimension, "(28, 28, 1)".
 * Output that does not fit is cut short but always NUL-terminated. */
char *tfc_shape_str(const tfc_shape *s, char *buf, size_t size)
{
    if (!buf || size == 0) return buf;
    size_t used = 0;
    buf[0] = 0;
#define PUT(...)                                                                   \
    do {                                                                           \
        if (used < size) {                                                         \
            int n_ = snprintf(buf + used, size - used, __VA_ARGS__);               \
            used = n_ < 0 ? size : used + (size_t)n_;                              \
        }                                                                          \
    } while (0)
    PUT("(");
    int ndim = s->ndim < 0 ? 0 : s->ndim > TFC_MAX_DIMS ? TFC_MAX_DIMS : s->ndim;
    for (int i = 0; i < ndim; i++) PUT("%s%lld", i ? ", " : "", (long long)s->dim[i]);
    PUT(ndim == 1 ? ",)" : ")");
#undef PUT
    return buf;
}

/* ---- element values ---------------------------------------------------------------------- */

int tfc_dtype_is_int(tfc_dtype dt)
{
    return dt >= TFC_I8 && dt <= TFC_BOOL;
}

/* IEEE half and bfloat16 from and to float, by bit layout; rounding to nearest even. */
float tfc_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    float f;
    if (exp == 0) f = ldexpf((float)man, -24);
    else if (exp == 31) f = man ? NAN : INFINITY;
    else f = ldexpf((float)(man | 0x400), (int)exp - 25);
    return sign ? -f : f;
}

uint16_t tfc_float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    float a = fabsf(f);
    if (isnan(f)) return sign | 0x7e00;
    if (a >= 65520.0f) return sign | 0x7c00;
    if (a < 6.103515625e-05f) /* subnormal: units of 2^-24 */
        return sign | (uint16_t)lrintf(a * 16777216.0f);
    int e;
    float m = frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    uint32_t man = (uint32_t)lrintf(m * 2048.0f); /* 11 bits with the implicit one */
    if (man == 2048) {
        man = 1024;
        e++;
    }
    return sign | (uint16_t)((uint32_t)(e + 14) << 10) | (uint16_t)(man & 0x3ff);
}

float tfc_bf16_to_float(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

uint16_t tfc_float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if (isnan(f)) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

double tfc_value_get(const void *data, tfc_dtype dt, int64_t i)
{
    switch (dt) {
    case TFC_F32: return ((const float *)data)[i];
    case TFC_F64: return ((const double *)data)[i];
    case TFC_F16: return tfc_half_to_float(((const uint16_t *)data)[i]);
    case TFC_BF16: return tfc_bf16_to_float(((const uint16_t *)data)[i]);
    case TFC_I8: return ((const int8_t *)data)[i];
    case TFC_U8: return ((const uint8_t *)data)[i];
    case TFC_I16: return ((const int16_t *)data)[i];
    case TFC_U16: return ((const uint16_t *)data)[i];
    case TFC_I32: return ((const int32_t *)data)[i];
    case TFC_U32: return ((const uint32_t *)data)[i];
    case TFC_I64: return (double)((const int64_t *)data)[i];
    case TFC_U64: return (double)((const uint64_t *)data)[i];
    case TFC_BOOL: return ((const uint8_t *)data)[i] != 0;
    default: return 0;
    }
}

/* Float to integer saturates (NaN → 0) so hostile data cannot trigger undefined casts. */
static double clampd(double v, double lo, double hi)
{
    if (isnan(v)) return 0;
    return v < lo ? lo : v > hi ? hi : v;
}

void tfc_value_set(void *data, tfc_dtype dt, int64_t i, double v)
{
    switch (dt) {
    case TFC_F32: ((float *)data)[i] = (float)v; break;
    case TFC_F64: ((double *)data)[i] = v; break;
    case TFC_F16: ((uint16_t *)data)[i] = tfc_float_to_half((float)v); break;
    case TFC_BF16: ((uint16_t *)data)[i] = tfc_float_to_bf16((float)v); break;
    case TFC_I8: ((int8_t *)data)[i] = (int8_t)clampd(v, -128, 127); break;
    case TFC_U8: ((uint8_t *)data)[i] = (uint8_t)clampd(v, 0, 255); break;
    case TFC_I16: ((int16_t *)data)[i] = (int16_t)clampd(v, -32768, 32767); break;
    case TFC_U16: ((uint16_t *)data)[i] = (uint16_t)clampd(v, 0, 65535); break;
    case TFC_I32: ((int32_t *)data)[i] = (int32_t)clampd(v, -2147483648.0, 2147483647.0); break;
    case TFC_U32: ((uint32_t *)data)[i] = (uint32_t)clampd(v, 0, 4294967295.0); break;
    case TFC_I64:
        ((int64_t *)data)[i] = (int64_t)clampd(v, -9223372036854775808.0, 9223372036854774784.0);
        break;
    case TFC_U64: ((uint64_t *)data)[i] = (uint64_t)clampd(v, 0, 18446744073709549568.0); break;
    case TFC_BOOL: ((uint8_t *)data)[i] = v != 0; break;
    default: break;
    }
}

void tfc_values_convert(void *dst, tfc_dtype dt, const void *src, tfc_dtype st, int64_t n)
{
    if (dt == st) {
        memcpy(dst, src, (size_t)n * tfc_dtype_size(dt));
        return;
    }
    /* The common fast paths: bytes and int32 to float32. */
    if (dt == TFC_F32 && st == TFC_U8) {
        const uint8_t *s = src;
        float *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = s[i];
        return;
    }
    if (dt == TFC_F32 && st == TFC_I32) {
        const int32_t *s = src;
        float *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = (float)s[i];
        return;
    }
    /* 64-bit integers between themselves keep every bit. */
    if ((dt == TFC_I64 || dt == TFC_U64) && (st == TFC_I64 || st == TFC_U64)) {
        memcpy(dst, src, (size_t)n * 8);
        return;
    }
    if (dt == TFC_I64 && tfc_dtype_is_int(st) && st != TFC_U64) {
        for (int64_t i = 0; i < n; i++) ((int64_t *)dst)[i] = (int64_t)tfc_value_get(src, st, i);
        return;
    }
    for (int64_t i = 0; i < n; i++) tfc_value_set(dst, dt, i, tfc_value_get(src, st, i));
}
