/* Tensors are views: a dtype, a shape and a pointer into memory that an arena owns.
 * Shapes are row-major (C order), channels last, batch first where there is a batch. */
#ifndef TFC_CORE_TENSOR_H
#define TFC_CORE_TENSOR_H

#include <stddef.h>
#include <stdint.h>

typedef enum tfc_dtype {
    TFC_F32 = 0,
    TFC_F64,
    TFC_F16,
    TFC_BF16,
    TFC_I8,
    TFC_U8,
    TFC_I16,
    TFC_U16,
    TFC_I32,
    TFC_U32,
    TFC_I64,
    TFC_U64,
    TFC_BOOL,
    TFC_DTYPE_COUNT
} tfc_dtype;

#define TFC_MAX_DIMS 8

typedef struct tfc_shape {
    int ndim;
    int64_t dim[TFC_MAX_DIMS];
} tfc_shape;

typedef struct tfc_tensor {
    tfc_dtype dtype;
    tfc_shape shape;
    void *data;
    int device; /* -1: host; >= 0: that GPU */
} tfc_tensor;

/* Bytes per element of `dt`. */
static inline size_t tfc_dtype_size(tfc_dtype dt)
{
    static const unsigned char sizes[TFC_DTYPE_COUNT] = {4, 8, 2, 2, 1, 1, 2, 2, 4, 4, 8, 8, 1};
    return (unsigned)dt < TFC_DTYPE_COUNT ? sizes[dt] : 0;
}

/* Element count, or -1 when it overflows int64. */
static inline int64_t tfc_shape_numel(const tfc_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) {
        if (s->dim[i] < 0) return -1;
        if (s->dim[i] != 0 && n > INT64_MAX / s->dim[i]) return -1;
        n *= s->dim[i];
    }
    return n;
}

static inline tfc_shape tfc_shape_make(int ndim, const int64_t *dims)
{
    tfc_shape s = {0};
    s.ndim = ndim;
    for (int i = 0; i < ndim && i < TFC_MAX_DIMS; i++) s.dim[i] = dims[i];
    return s;
}

static inline int tfc_shape_equal(const tfc_shape *a, const tfc_shape *b)
{
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->dim[i] != b->dim[i]) return 0;
    return 1;
}

/* Safetensors/NumPy dtype names ("F32", "I64", ...). */
const char *tfc_dtype_name(tfc_dtype dt);
/* Parses a safetensors dtype name; returns -1 when unknown. */
int tfc_dtype_from_name(const char *name);

/* Formats a shape as "(28, 28, 1)" into buf; returns buf. */
char *tfc_shape_str(const tfc_shape *s, char *buf, size_t size);

/* ---- element values: the one home of dtype conversion ---- */

/* Integer dtypes (bool included). */
int tfc_dtype_is_int(tfc_dtype dt);

/* IEEE half and bfloat16 from and to float, by bit layout; rounding to nearest even. */
float tfc_half_to_float(uint16_t h);
uint16_t tfc_float_to_half(float f);
float tfc_bf16_to_float(uint16_t b);
uint16_t tfc_float_to_bf16(float f);

/* Element i of `data` (aligned for dt) as a double, and the reverse. Setting converts float
 * to integer with C semantics but saturating (NaN -> 0), bool -> 0/1. */
double tfc_value_get(const void *data, tfc_dtype dt, int64_t i);
void tfc_value_set(void *data, tfc_dtype dt, int64_t i, double v);

/* Converts n values between dtypes (tfc_value_set's rules; 64-bit integers keep every bit). */
void tfc_values_convert(void *dst, tfc_dtype dt, const void *src, tfc_dtype st, int64_t n);

#endif
