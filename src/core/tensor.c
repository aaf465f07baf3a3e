/* Tensor helpers that are not inline in tensor.h: dtype names (the safetensors spelling,
 * in the order of enum tfc_dtype) and shape formatting for messages. */
#include "core/tensor.h"

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
