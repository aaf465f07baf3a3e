/* The pipeline stages against tf.data's documented semantics, on in-memory data built with
 * the C API: shuffle's buffer algorithm and seeding, repeat/batch ordering, drop_remainder,
 * padded_batch, take/skip, cache, filter, and that prefetch and parallel map change nothing
 * but speed. Elements are int32 scalars holding their index unless a test maps them. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "data/data.h"
#include "testutil.h"

/* A pipeline over features 0..n-1 (int32 scalars) and labels 100+i. */
static tfc_pipeline *range_pipeline(int n, uint64_t seed)
{
    int32_t *f = malloc((size_t)(n ? n : 1) * 4), *l = malloc((size_t)(n ? n : 1) * 4);
    for (int i = 0; i < n; i++) {
        f[i] = i;
        l[i] = 100 + i;
    }
    tfc_tensor tf = {TFC_I32, {.ndim = 1, .dim = {n}}, f, -1};
    tfc_tensor tl = {TFC_I32, {.ndim = 1, .dim = {n}}, l, -1};
    tfc_data_options opt = {.seed = seed};
    tfc_error err;
    tfc_error_clear(&err);
    tfc_pipeline *p = tfc_pipeline_from_tensors(&tf, &tl, &opt, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    free(f);
    free(l);
    return p;
}

/* Reads up to max elements; each element's first feature value goes to out. Returns the
 * count; batches contribute all their values. */
static int drain(tfc_pipeline *p, int32_t *out, int max, int *sizes, int *nbatches)
{
    int n = 0, nb = 0;
    tfc_error err;
    tfc_error_clear(&err);
    for (;;) {
        tfc_batch b;
        tfc_status st = tfc_pipeline_next(p, &b, &err);
        CU_ASSERT_EQUAL_FATAL(st, TFC_OK);
        if (b.end) break;
        int64_t k = tfc_shape_numel(&b.features.shape);
        CU_ASSERT_EQUAL(b.features.dtype, TFC_I32);
        if (sizes) sizes[nb] = (int)(b.features.shape.ndim ? b.features.shape.dim[0] : 1);
        nb++;
        for (int64_t i = 0; i < k && n < max; i++) out[n++] = ((int32_t *)b.features.data)[i];
        if (n >= max) break;
    }
    if (nbatches) *nbatches = nb;
    return n;
}

static int is_permutation(const int32_t *v, int n)
{
    char *seen = calloc((size_t)n, 1);
    int ok = 1;
    for (int i = 0; i < n; i++) {
        if (v[i] < 0 || v[i] >= n || seen[v[i]]) ok = 0;
        else seen[v[i]] = 1;
    }
    free(seen);
    return ok;
}

static void test_identity_without_stages(void)
{
    tfc_pipeline *p = range_pipeline(50, 1);
    int32_t v[64];
    CU_ASSERT_EQUAL(drain(p, v, 64, NULL, NULL), 50);
    for (int i = 0; i < 50; i++) CU_ASSERT_EQUAL(v[i], i);
    const tfc_element_spec *s = tfc_pipeline_element_spec(p);
    CU_ASSERT_EQUAL(s->comp[TFC_COMP_FEATURES].shape.ndim, 0);
    CU_ASSERT(s->comp[TFC_COMP_LABELS].present);
    CU_ASSERT(!s->comp[TFC_COMP_LENGTHS].present);
    tfc_pipeline_free(p);
}

static void test_shuffle_buffer_one_is_identity(void)
{
    tfc_error err;
    tfc_pipeline *p = range_pipeline(40, 7);
    CU_ASSERT_EQUAL(tfc_pipeline_shuffle(p, 1, -1, 1, &err), TFC_OK);
    int32_t v[40];
    CU_ASSERT_EQUAL(drain(p, v, 40, NULL, NULL), 40);
    for (int i = 0; i < 40; i++) CU_ASSERT_EQUAL(v[i], i);
    tfc_pipeline_free(p);
}

static void test_shuffle_epochs_are_permutations(void)
{
    enum { N = 64, E = 4 };
    tfc_error err;
    tfc_pipeline *p = range_pipeline(N, 3);
    CU_ASSERT_EQUAL(tfc_pipeline_shuffle(p, N, -1, 1, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_repeat(p, E, &err), TFC_OK);
    int32_t v[N * E];
    CU_ASSERT_EQUAL(drain(p, v, N * E, NULL, NULL), N * E);
    for (int e = 0; e < E; e++) CU_ASSERT(is_permutation(v + e * N, N));
    /* New epoch, new order; and not the identity. */
    CU_ASSERT(memcmp(v, v + N, sizeof(int32_t) * N) != 0);
    CU_ASSERT(memcmp(v + N, v + 2 * N, sizeof(int32_t) * N) != 0);
    int ident = 1;
    for (int i = 0; i < N; i++) ident &= v[i] == i;
    CU_ASSERT(!ident);
    tfc_pipeline_free(p);
}

static void test_shuffle_draws_from_first_i_plus_buffer(void)
{
    enum { N = 200 };
    for (int b = 1; b <= 16; b *= 2) {
        for (uint64_t seed = 0; seed < 5; seed++) {
            tfc_error err;
            tfc_pipeline *p = range_pipeline(N, seed);
            CU_ASSERT_EQUAL(tfc_pipeline_shuffle(p, b, -1, 1, &err), TFC_OK);
            int32_t v[N];
            CU_ASSERT_EQUAL(drain(p, v, N, NULL, NULL), N);
            CU_ASSERT(is_permutation(v, N));
            for (int i = 0; i < N; i++) CU_ASSERT(v[i] < i + b);
            tfc_pipeline_free(p);
        }
    }
}

static void shuffled(uint64_t global_seed, int64_t seed, int reshuffle, int epochs, int32_t *v)
{
    tfc_error err;
    tfc_pipeline *p = range_pipeline(30, global_seed);
    CU_ASSERT_EQUAL(tfc_pipeline_shuffle(p, 10, seed, reshuffle, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_repeat(p, epochs, &err), TFC_OK);
    CU_ASSERT_EQUAL(drain(p, v, 30 * epochs, NULL, NULL), 30 * epochs);
    tfc_pipeline_free(p);
}

static void test_shuffle_seeds(void)
{
    int32_t a[60], b[60], c[60], d[60];
    shuffled(5, -1, 1, 2, a);
    shuffled(5, -1, 1, 2, b);
    CU_ASSERT(memcmp(a, b, sizeof a) == 0);           /* same seed, same order */
    shuffled(6, -1, 1, 2, c);
    CU_ASSERT(memcmp(a, c, sizeof a) != 0);           /* new global seed, new order */
    shuffled(5, 42, 1, 2, c);
    shuffled(6, 42, 1, 2, d);
    CU_ASSERT(memcmp(c, d, sizeof c) == 0);           /* an op seed wins over the global */
    shuffled(5, -1, 0, 2, d);
    CU_ASSERT(memcmp(d, d + 30, 30 * sizeof *d) == 0); /* reshuffle off: same every epoch */
    CU_ASSERT(memcmp(a, a + 30, 30 * sizeof *a) != 0);
}

static void test_repeat_batch_order(void)
{
    tfc_error err;
    int sizes[16], nb;
    int32_t v[64];
    /* repeat then batch: batches cross the epoch boundary. */
    tfc_pipeline *p = range_pipeline(10, 1);
    CU_ASSERT_EQUAL(tfc_pipeline_repeat(p, 2, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_batch(p, 4, 0, &err), TFC_OK);
    CU_ASSERT_EQUAL(drain(p, v, 64, sizes, &nb), 20);
    CU_ASSERT_EQUAL(nb, 5);
    for (int i = 0; i < 5; i++) CU_ASSERT_EQUAL(sizes[i], 4);
    CU_ASSERT_EQUAL(v[8], 8);
    CU_ASSERT_EQUAL(v[10], 0);
    CU_ASSERT_EQUAL(v[11], 1);
    tfc_pipeline_free(p);
    /* batch then repeat: each epoch ends with its own short batch. */
    p = range_pipeline(10, 1);
    CU_ASSERT_EQUAL(tfc_pipeline_batch(p, 4, 0, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_repeat(p, 2, &err), TFC_OK);
    CU_ASSERT_EQUAL(drain(p, v, 64, sizes, &nb), 20);
    CU_ASSERT_EQUAL(nb, 6);
    int want[6] = {4, 4, 2, 4, 4, 2};
    for (int i = 0; i < 6; i++) CU_ASSERT_EQUAL(sizes[i], want[i]);
    tfc_pipeline_free(p);
}

static void test_batch_drop_remainder_and_spec(void)
{
    tfc_error err;
    int sizes[8], nb;
    int32_t v[16];
    tfc_pipeline *p = range_pipeline(10, 1);
    CU_ASSERT_EQUAL(tfc_pipeline_batch(p, 4, 1, &err), TFC_OK);
    const tfc_element_spec *s = tfc_pipeline_element_spec(p);
    CU_ASSERT(s->batched);
    CU_ASSERT_EQUAL(s->comp[TFC_COMP_FEATURES].shape.ndim, 1);
    CU_ASSERT_EQUAL(s->comp[TFC_COMP_FEATURES].shape.dim[0], 4);
    CU_ASSERT_EQUAL(drain(p, v, 16, sizes, &nb), 8);
    CU_ASSERT_EQUAL(nb, 2);
    tfc_pipeline_free(p);
    p = range_pipeline(10, 1);
    CU_ASSERT_EQUAL(tfc_pipeline_batch(p, 4, 0, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_element_spec(p)->comp[TFC_COMP_FEATURES].shape.dim[0], -1);
    CU_ASSERT_EQUAL(tfc_pipeline_element_spec(p)->comp[TFC_COMP_LABELS].shape.dim[0], -1);
    tfc_pipeline_free(p);
    p = range_pipeline(10, 1);
    CU_ASSERT_EQUAL(tfc_pipeline_batch(p, 0, 0, &err), TFC_ERR_CONFIG);
    tfc_pipeline_free(p);
}

/* features := (index % 5) + 1 values, all index + 1 (a variable-length sequence). */
static tfc_status make_sequence(tfc_element *e, const tfc_map_ctx *ctx, void *user,
                                tfc_error *err)
{
    int32_t i = *(int32_t *)e->comp[TFC_COMP_FEATURES].data;
    tfc_shape s = {.ndim = 1, .dim = {i % 5 + 1}};
    int32_t *d = tfc_element_alloc(e, TFC_COMP_FEATURES, TFC_I32, &s);
    if (!d) return TFC_ERR_NOMEM;
    for (int k = 0; k <= i % 5; k++) d[k] = i + 1;
    return TFC_OK;
}

static void test_padded_batch(void)
{
    tfc_error err;
    tfc_element_spec spec = {0};
    spec.comp[0] = (tfc_component_spec){1, TFC_I32, {.ndim = 1, .dim = {-1}}};
    spec.comp[1] = (tfc_component_spec){1, TFC_I32, {.ndim = 0}};
    tfc_pipeline *p = range_pipeline(7, 1);
    CU_ASSERT_EQUAL(tfc_pipeline_map(p, make_sequence, NULL, &spec, 1, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_padded_batch(p, 3, NULL, -1, 0, &err), TFC_OK);
    const tfc_element_spec *s = tfc_pipeline_element_spec(p);
    CU_ASSERT(s->comp[TFC_COMP_LENGTHS].present);
    CU_ASSERT_EQUAL(s->comp[TFC_COMP_FEATURES].shape.ndim, 2);
    CU_ASSERT_EQUAL(s->comp[TFC_COMP_FEATURES].shape.dim[1], -1);
    tfc_batch b;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    /* Elements 0, 1, 2 have lengths 1, 2, 3: padded to 3 with -1. */
    CU_ASSERT_EQUAL(b.features.shape.dim[0], 3);
    CU_ASSERT_EQUAL(b.features.shape.dim[1], 3);
    int32_t want[9] = {1, -1, -1, 2, 2, -1, 3, 3, 3};
    CU_ASSERT(memcmp(b.features.data, want, sizeof want) == 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b.lengths.data);
    CU_ASSERT_EQUAL(b.lengths.dtype, TFC_I32);
    int32_t wl[3] = {1, 2, 3};
    CU_ASSERT(memcmp(b.lengths.data, wl, sizeof wl) == 0);
    CU_ASSERT_EQUAL(((int32_t *)b.labels.data)[2], 102);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(b.features.shape.dim[1], 5); /* lengths 4, 5, 1 */
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(b.features.shape.dim[0], 1); /* the remainder */
    CU_ASSERT_EQUAL(b.features.shape.dim[1], 2);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT(b.end);
    tfc_pipeline_free(p);
    /* Fixed padded_shapes, and an element longer than them is an error. */
    p = range_pipeline(7, 1);
    CU_ASSERT_EQUAL(tfc_pipeline_map(p, make_sequence, NULL, &spec, 1, &err), TFC_OK);
    tfc_shape ps = {.ndim = 1, .dim = {4}};
    CU_ASSERT_EQUAL(tfc_pipeline_padded_batch(p, 2, &ps, 0, 0, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_element_spec(p)->comp[0].shape.dim[1], 4);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT_EQUAL(b.features.shape.dim[1], 4);
    CU_ASSERT_EQUAL(((int32_t *)b.features.data)[4 + 1], 2);
    CU_ASSERT_EQUAL(((int32_t *)b.features.data)[4 + 2], 0);
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_pipeline_next(p, &b, &err), TFC_ERR_DATA); /* element 4 has 5 */
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "padded_shapes"));
    tfc_pipeline_free(p);
    /* Plain batch of variable shapes is an error that hints at padded_batch. */
    p = range_pipeline(7, 1);
    CU_ASSERT_EQUAL(tfc_pipeline_map(p, make_sequence, NULL, &spec, 1, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_batch(p, 2, 0, &err), TFC_OK);
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL(tfc_pipeline_next(p, &b, &err), TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "padded_batch"));
    tfc_pipeline_free(p);
}

static void test_take_skip(void)
{
    tfc_error err;
    int32_t v[16];
    tfc_pipeline *p = range_pipeline(10, 1);
    CU_ASSERT_EQUAL(tfc_pipeline_take(p, 3, &err), TFC_OK);
    CU_ASSERT_EQUAL(drain(p, v, 16, NULL, NULL), 3);
    CU_ASSERT_EQUAL(v[2], 2);
    tfc_pipeline_free(p);
    p = range_pipeline(10, 1);
    CU_ASSERT_EQUAL(tfc_pipeline_skip(p, 7, &err), TFC_OK);
    CU_ASSERT_EQUAL(drain(p, v, 16, NULL, NULL), 3);
    CU_ASSERT_EQUAL(v[0], 7);
    tfc_pipeline_free(p);
    p = range_pipeline(10, 1);
    CU_ASSERT_EQUAL(tfc_pipeline_skip(p, 2, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_take(p, 3, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_repeat(p, 2, &err), TFC_OK);
    CU_ASSERT_EQUAL(drain(p, v, 16, NULL, NULL), 6);
    int32_t want[6] = {2, 3, 4, 2, 3, 4};
    CU_ASSERT(memcmp(v, want, sizeof want) == 0);
    tfc_pipeline_free(p);
    p = range_pipeline(10, 1);
    CU_ASSERT_EQUAL(tfc_pipeline_skip(p, 20, &err), TFC_OK);
    CU_ASSERT_EQUAL(drain(p, v, 16, NULL, NULL), 0);
    tfc_pipeline_free(p);
    p = range_pipeline(10, 1);
    CU_ASSERT_EQUAL(tfc_pipeline_take(p, -1, &err), TFC_OK);
    CU_ASSERT_EQUAL(drain(p, v, 16, NULL, NULL), 10);
    tfc_pipeline_free(p);
}

static tfc_status identity_count(tfc_element *e, const tfc_map_ctx *ctx, void *user,
                                 tfc_error *err)
{
    (void)e, (void)ctx, (void)err;
    atomic_fetch_add((atomic_int *)user, 1);
    return TFC_OK;
}

static tfc_status count_calls(tfc_element *e, const tfc_map_ctx *ctx, void *user, tfc_error *err)
{
    atomic_fetch_add((atomic_int *)user, 1);
    /* A random value per element: frozen by a cache, fresh each epoch without one. */
    *(int32_t *)e->comp[TFC_COMP_FEATURES].data += 1000 * (int32_t)(tfc_rng_uniform(ctx->key, 0, 0) * 1000);
    return TFC_OK;
}

static void test_cache(void)
{
    tfc_error err;
    atomic_int calls = 0;
    int32_t v[60], w[60];
    tfc_pipeline *p = range_pipeline(20, 1);
    CU_ASSERT_EQUAL(tfc_pipeline_map(p, count_calls, &calls, NULL, 1, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_cache(p, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_repeat(p, 3, &err), TFC_OK);
    CU_ASSERT_EQUAL(drain(p, v, 60, NULL, NULL), 60);
    CU_ASSERT_EQUAL(atomic_load(&calls), 20); /* upstream ran once */
    CU_ASSERT(memcmp(v, v + 20, 20 * sizeof *v) == 0);
    CU_ASSERT(memcmp(v, v + 40, 20 * sizeof *v) == 0);
    tfc_pipeline_free(p);
    /* Without the cache the random map gives new values each epoch. */
    atomic_store(&calls, 0);
    p = range_pipeline(20, 1);
    CU_ASSERT_EQUAL(tfc_pipeline_map(p, count_calls, &calls, NULL, 1, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_repeat(p, 3, &err), TFC_OK);
    CU_ASSERT_EQUAL(drain(p, w, 60, NULL, NULL), 60);
    CU_ASSERT_EQUAL(atomic_load(&calls), 60);
    CU_ASSERT(memcmp(w, w + 20, 20 * sizeof *w) != 0);
    CU_ASSERT(memcmp(v, w, 20 * sizeof *v) == 0); /* epoch 0 agrees */
    tfc_pipeline_free(p);
}

static int keep_even(const tfc_element *e, void *user)
{
    return *(int32_t *)e->comp[TFC_COMP_FEATURES].data % 2 == 0;
}

static void test_filter_and_empty_repeat(void)
{
    tfc_error err;
    int32_t v[32];
    tfc_pipeline *p = range_pipeline(10, 1);
    CU_ASSERT_EQUAL(tfc_pipeline_filter(p, keep_even, NULL, &err), TFC_OK);
    CU_ASSERT_EQUAL(drain(p, v, 32, NULL, NULL), 5);
    CU_ASSERT_EQUAL(v[4], 8);
    tfc_pipeline_free(p);
    /* repeat forever over nothing terminates instead of spinning. */
    p = range_pipeline(10, 1);
    CU_ASSERT_EQUAL(tfc_pipeline_take(p, 0, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_repeat(p, -1, &err), TFC_OK);
    CU_ASSERT_EQUAL(drain(p, v, 32, NULL, NULL), 0);
    tfc_pipeline_free(p);
}

/* A random map: the same for any thread count, prefetching or not. */
static tfc_status jitter(tfc_element *e, const tfc_map_ctx *ctx, void *user, tfc_error *err)
{
    int32_t *x = e->comp[TFC_COMP_FEATURES].data;
    *x = *x * 1000 + (int32_t)(tfc_rng_uniform(ctx->key, 0, 0) * 1000);
    return TFC_OK;
}

static int run_variant(int npc, int prefetch, int32_t *v, int n)
{
    tfc_error err;
    tfc_pipeline *p = range_pipeline(100, 9);
    CU_ASSERT_EQUAL(tfc_pipeline_shuffle(p, 30, -1, 1, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_map(p, jitter, NULL, NULL, npc, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_repeat(p, 3, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_batch(p, 7, 0, &err), TFC_OK);
    if (prefetch) CU_ASSERT_EQUAL(tfc_pipeline_prefetch(p, prefetch, &err), TFC_OK);
    int got = drain(p, v, n, NULL, NULL);
    tfc_pipeline_free(p);
    return got;
}

static void test_prefetch_and_parallel_map_change_nothing(void)
{
    static int32_t a[300], b[300], c[300], d[300];
    CU_ASSERT_EQUAL(run_variant(1, 0, a, 300), 300);
    CU_ASSERT_EQUAL(run_variant(4, 0, b, 300), 300);
    CU_ASSERT_EQUAL(run_variant(1, 3, c, 300), 300);
    CU_ASSERT_EQUAL(run_variant(3, 2, d, 300), 300);
    CU_ASSERT(memcmp(a, b, sizeof a) == 0);
    CU_ASSERT(memcmp(a, c, sizeof a) == 0);
    CU_ASSERT(memcmp(a, d, sizeof a) == 0);
}

/* Randomness follows the element, not its position: a random map before or after a
 * shuffle (at the same stage index) gives each element the same draw. */
static void test_randomness_keyed_by_element(void)
{
    enum { N = 50 };
    int32_t a[N], b[N], ra[N], rb[N];
    tfc_error err;
    for (int k = 0; k < 2; k++) {
        tfc_pipeline *p = range_pipeline(N, 4);
        if (k == 0) {
            CU_ASSERT_EQUAL(tfc_pipeline_take(p, -1, &err), TFC_OK);
            CU_ASSERT_EQUAL(tfc_pipeline_map(p, jitter, NULL, NULL, 1, &err), TFC_OK);
            CU_ASSERT_EQUAL(tfc_pipeline_shuffle(p, 20, -1, 1, &err), TFC_OK);
        } else {
            CU_ASSERT_EQUAL(tfc_pipeline_shuffle(p, 7, 99, 1, &err), TFC_OK);
            CU_ASSERT_EQUAL(tfc_pipeline_map(p, jitter, NULL, NULL, 3, &err), TFC_OK);
            CU_ASSERT_EQUAL(tfc_pipeline_take(p, -1, &err), TFC_OK);
        }
        CU_ASSERT_EQUAL(drain(p, k ? b : a, N, NULL, NULL), N);
        tfc_pipeline_free(p);
    }
    for (int i = 0; i < N; i++) {
        ra[a[i] / 1000] = a[i] % 1000;
        rb[b[i] / 1000] = b[i] % 1000;
    }
    CU_ASSERT(memcmp(a, b, sizeof a) != 0); /* different orders... */
    CU_ASSERT(memcmp(ra, rb, sizeof ra) == 0); /* ...same draw per element */
    int distinct = 0;
    for (int i = 1; i < N; i++) distinct += ra[i] != ra[0];
    CU_ASSERT(distinct > N / 2);
}

static tfc_status fail_at_five(tfc_element *e, const tfc_map_ctx *ctx, void *user,
                               tfc_error *err)
{
    if (*(int32_t *)e->comp[TFC_COMP_FEATURES].data == 5)
        return tfc_error_set(err, TFC_ERR_DATA, "bad element");
    return TFC_OK;
}

static void test_map_error_in_order(void)
{
    for (int npc = 1; npc <= 4; npc += 3) {
        for (int pf = 0; pf <= 1; pf++) {
            tfc_error err;
            tfc_error_clear(&err);
            tfc_pipeline *p = range_pipeline(20, 1);
            CU_ASSERT_EQUAL(tfc_pipeline_map(p, fail_at_five, NULL, NULL, npc, &err), TFC_OK);
            if (pf) CU_ASSERT_EQUAL(tfc_pipeline_prefetch(p, 4, &err), TFC_OK);
            tfc_batch b;
            for (int i = 0; i < 5; i++) {
                CU_ASSERT_EQUAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
                CU_ASSERT_EQUAL(*(int32_t *)b.features.data, i);
            }
            CU_ASSERT_EQUAL(tfc_pipeline_next(p, &b, &err), TFC_ERR_DATA);
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "bad element"));
            CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "record 5"));
            /* After a reset the pipeline reads from the start again. */
            tfc_pipeline_reset(p);
            CU_ASSERT_EQUAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
            CU_ASSERT_EQUAL(*(int32_t *)b.features.data, 0);
            tfc_pipeline_free(p);
        }
    }
}

static int keep_all(const tfc_element *e, void *user)
{
    return 1;
}

static tfc_status identity(tfc_element *e, const tfc_map_ctx *ctx, void *user, tfc_error *err)
{
    return TFC_OK;
}

/* A failure while a parallel map pulls its block from an eager stage still surfaces after
 * the elements before it. */
static void test_parallel_map_pull_error_in_order(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_pipeline *p = range_pipeline(20, 1);
    CU_ASSERT_EQUAL(tfc_pipeline_map(p, fail_at_five, NULL, NULL, 1, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_filter(p, keep_all, NULL, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_map(p, identity, NULL, NULL, 4, &err), TFC_OK);
    tfc_batch b;
    for (int i = 0; i < 5; i++) {
        CU_ASSERT_EQUAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        CU_ASSERT_EQUAL(*(int32_t *)b.features.data, i);
    }
    CU_ASSERT_EQUAL(tfc_pipeline_next(p, &b, &err), TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "bad element"));
    tfc_pipeline_free(p);
}

/* tf.data's shard: Dataset.range(10).shard(3, 1) is 1, 4, 7; after repeat(2) the position
 * runs on across passes (range(5).repeat(2).shard(2, 0) is 0, 2, 4, 1, 3); the shards of a
 * shuffled pass are disjoint and together the whole pass; placed before a map, the map runs
 * only for the kept elements (the others are skipped as ids). */
static void test_shard(void)
{
    tfc_error err;
    tfc_error_clear(&err);
    int32_t v[32];
    tfc_pipeline *p = range_pipeline(10, 1);
    CU_ASSERT_EQUAL(tfc_pipeline_shard(p, 3, 1, &err), TFC_OK);
    CU_ASSERT_EQUAL(drain(p, v, 32, NULL, NULL), 3);
    CU_ASSERT(v[0] == 1 && v[1] == 4 && v[2] == 7);
    tfc_pipeline_free(p);
    p = range_pipeline(5, 1);
    CU_ASSERT_EQUAL(tfc_pipeline_repeat(p, 2, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_shard(p, 2, 0, &err), TFC_OK);
    CU_ASSERT_EQUAL(drain(p, v, 32, NULL, NULL), 5);
    int32_t want[5] = {0, 2, 4, 1, 3};
    CU_ASSERT(memcmp(v, want, sizeof want) == 0);
    tfc_pipeline_free(p);
    /* three shards of one shuffled pass of 30 */
    int32_t whole[30], parts[30];
    p = range_pipeline(30, 4);
    CU_ASSERT_EQUAL(tfc_pipeline_shuffle(p, 10, -1, 1, &err), TFC_OK);
    CU_ASSERT_EQUAL(drain(p, whole, 30, NULL, NULL), 30);
    tfc_pipeline_free(p);
    for (int k = 0; k < 3; k++) {
        atomic_int calls = 0;
        p = range_pipeline(30, 4);
        CU_ASSERT_EQUAL(tfc_pipeline_shuffle(p, 10, -1, 1, &err), TFC_OK);
        CU_ASSERT_EQUAL(tfc_pipeline_shard(p, 3, k, &err), TFC_OK);
        CU_ASSERT_EQUAL(tfc_pipeline_map(p, identity_count, &calls, NULL, 1, &err), TFC_OK);
        CU_ASSERT_EQUAL(drain(p, v, 32, NULL, NULL), 10);
        CU_ASSERT_EQUAL(atomic_load(&calls), 10);
        for (int i = 0; i < 10; i++) {
            CU_ASSERT_EQUAL(v[i], whole[3 * i + k]);
            parts[3 * i + k] = v[i];
        }
        tfc_pipeline_free(p);
    }
    CU_ASSERT(is_permutation(parts, 30));
    /* an index outside [0, num_shards) */
    p = range_pipeline(4, 1);
    CU_ASSERT_EQUAL(tfc_pipeline_shard(p, 2, 2, &err), TFC_ERR_CONFIG);
    tfc_pipeline_free(p);
}

static void test_reset(void)
{
    tfc_error err;
    int32_t a[30], b[30];
    tfc_pipeline *p = range_pipeline(30, 2);
    CU_ASSERT_EQUAL(tfc_pipeline_shuffle(p, 30, -1, 1, &err), TFC_OK);
    CU_ASSERT_EQUAL(drain(p, a, 30, NULL, NULL), 30);
    tfc_pipeline_reset(p);
    CU_ASSERT_EQUAL(drain(p, b, 30, NULL, NULL), 30);
    CU_ASSERT(is_permutation(b, 30));
    CU_ASSERT(memcmp(a, b, sizeof a) != 0);
    tfc_pipeline_free(p);
    p = range_pipeline(30, 2);
    CU_ASSERT_EQUAL(tfc_pipeline_batch(p, 8, 0, &err), TFC_OK);
    CU_ASSERT_EQUAL(tfc_pipeline_prefetch(p, 2, &err), TFC_OK);
    CU_ASSERT_EQUAL(drain(p, a, 10, NULL, NULL), 10);
    tfc_pipeline_reset(p);
    CU_ASSERT_EQUAL(drain(p, b, 30, NULL, NULL), 30);
    for (int i = 0; i < 30; i++) CU_ASSERT_EQUAL(b[i], i);
    tfc_pipeline_free(p);
}

TFC_TEST_MAIN("data_stages",
              {"identity_without_stages", test_identity_without_stages},
              {"shuffle_buffer_one_is_identity", test_shuffle_buffer_one_is_identity},
              {"shuffle_epochs_are_permutations", test_shuffle_epochs_are_permutations},
              {"shuffle_draws_from_first_i_plus_buffer", test_shuffle_draws_from_first_i_plus_buffer},
              {"shuffle_seeds", test_shuffle_seeds},
              {"repeat_batch_order", test_repeat_batch_order},
              {"batch_drop_remainder_and_spec", test_batch_drop_remainder_and_spec},
              {"padded_batch", test_padded_batch},
              {"take_skip", test_take_skip},
              {"shard", test_shard},
              {"cache", test_cache},
              {"filter_and_empty_repeat", test_filter_and_empty_repeat},
              {"prefetch_and_parallel_map_change_nothing", test_prefetch_and_parallel_map_change_nothing},
              {"randomness_keyed_by_element", test_randomness_keyed_by_element},
              {"map_error_in_order", test_map_error_in_order},
              {"parallel_map_pull_error_in_order", test_parallel_map_pull_error_in_order},
              {"reset", test_reset})
