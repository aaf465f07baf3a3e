/* libFuzzer target for EinsumDense's equation parser and planner (src/layers/einsum_spec.c,
 * the one object of libtfc it links). The input: a byte for the input's rank (mod 9), one
 * per size (1 + byte mod 7), a byte for output_shape's length (mod 9), one per item (0:
 * null, else byte mod 7), then the equation and, after a newline, bias_axes (no newline:
 * none). A parse or plan either fails with a message or gives a plan whose sizes and
 * permutations agree. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layers/einsum_spec.h"

/* abort, not TFC_ASSERT: the target links einsum_spec.o and nothing else of libtfc */
#define CHECK(e) ((e) ? (void)0 : abort())

static int is_perm(const int *p, int n)
{
    int seen[TFC_EINSUM_AXES] = {0};
    for (int i = 0; i < n; i++) {
        if (p[i] < 0 || p[i] >= n || seen[p[i]]) return 0;
        seen[p[i]] = 1;
    }
    return 1;
}

static int64_t prod(const int64_t *d, int n)
{
    int64_t v = 1;
    for (int i = 0; i < n; i++) v *= d[i];
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t at = 0;
    int64_t dims[TFC_EINSUM_AXES], partial[TFC_EINSUM_AXES];
    if (size < 2) return 0;
    const int rank = data[at++] % 9;
    for (int i = 0; i < rank; i++) dims[i] = at < size ? 1 + data[at++] % 7 : 1;
    const int np = at < size ? data[at++] % 9 : 0;
    for (int i = 0; i < np; i++) {
        const int v = at < size ? data[at++] % 7 : 0;
        partial[i] = v ? v : -1;
    }
    char *text = malloc(size - at + 1);
    CHECK(text);
    memcpy(text, data + at, size - at);
    text[size - at] = 0;
    char *nl = strchr(text, '\n');
    const char *bias = NULL;
    if (nl) *nl = 0, bias = nl + 1;
    tfc_einsum_spec s;
    tfc_einsum_error e;
    tfc_einsum_plan p;
    if (tfc_einsum_parse(text, &s, &e)) {
        CHECK(e.msg[0] && e.at >= 0 && e.at <= (int)strlen(text));
    } else if (tfc_einsum_plan_make(&s, rank, dims, partial, np, bias, &p, &e)) {
        CHECK(e.msg[0] && e.arg <= TFC_EINSUM_INPUT);
        if (e.arg == TFC_EINSUM_OUTPUT_SHAPE) CHECK(e.at < np);
        if (e.arg == TFC_EINSUM_BIAS_AXES) CHECK(bias && e.at <= (int)strlen(bias));
    } else {
        const int64_t in = prod(p.in_dim, p.rank_in), out = prod(p.out_dim, p.rank_out);
        const int64_t ker = prod(p.ker_dim, p.rank_ker);
        CHECK(p.rank_in == rank && p.rank_out <= TFC_EINSUM_AXES);
        CHECK(p.rows_per * p.shared * p.k * p.reduce == in);
        CHECK(p.rows_per * p.shared * p.n == out);
        CHECK(p.shared * p.k * p.n == ker && p.fan_in * p.fan_out == ker);
        CHECK(is_perm(p.x_perm, p.rank_in) && is_perm(p.y_perm, p.rank_out));
        CHECK(prod(p.y_canon_dim, p.rank_out) == out);
        if (p.k_permuted) CHECK(is_perm(p.k_perm, p.rank_ker));
        if (p.rank_bias) {
            CHECK(prod(p.bias_dim, p.rank_bias) == p.bias_p);
            CHECK(p.bias_p * p.bias_q == p.bias_block && out % p.bias_block == 0);
            CHECK(is_perm(p.bias_perm, p.bias_ndim));
            CHECK(prod(p.bias_src_dim, p.bias_ndim) == p.bias_block);
        }
    }
    free(text);
    return 0;
}
