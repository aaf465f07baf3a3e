/* What the CPU's recurrent layers share around their kernels (cpu_lstm.c, cpu_gru.c): the
 * split of a batch into blocks of sequences, their packed kernels kept on a frozen backend,
 * the input of a layer that goes backwards or drops inputs out (one Philox mask per
 * sequence, as Keras's RNN `dropout`), and Bidirectional's merge of its two directions.
 * Loops are over sequences, each written by one thread: the same bits at any thread count. */
#include <stdlib.h>

#include "core/rng.h"
#include "cpu/cpu_internal.h"

float *tfc_cpu_kept(tfc_backend *be, const float *const src[2], const size_t bytes[2], int tag,
                    size_t floats, int *fresh)
{
    tfc_cpu_backend *cb = (tfc_cpu_backend *)be;
    *fresh = 1;
    if (!be->frozen) { /* training may change weights in place: no pack stays ready */
        for (int i = 0; i < TFC_CPU_KEPT; i++) cb->kept[i].valid = 0;
        return NULL;
    }
    for (int i = 0; i < TFC_CPU_KEPT; i++) {
        tfc_cpu_kept_pack *k = &cb->kept[i];
        if (k->packed && k->src[0] == src[0] && k->src[1] == src[1] &&
            k->bytes[0] == bytes[0] && k->bytes[1] == bytes[1] && k->tag == tag &&
            k->floats == floats) {
            *fresh = !k->valid;
            k->valid = 1;
            return k->packed;
        }
    }
    /* the empty slot (its weights freed) that holds enough with the least to spare, so that
     * a small pack does not take the room a larger one will want again (a predictor rebinds
     * for a larger batch: every pack of the old weights is freed and made again, a Dense
     * layer's and a convolution's in turn), else the next in turn */
    tfc_cpu_kept_pack *k = NULL;
    for (int i = 0; i < TFC_CPU_KEPT; i++)
        if (cb->kept[i].packed && !cb->kept[i].src[0] && !cb->kept[i].src[1] &&
            cb->kept[i].cap >= floats && (!k || cb->kept[i].cap < k->cap))
            k = &cb->kept[i];
    if (!k) {
        k = &cb->kept[cb->next_kept];
        cb->next_kept = (cb->next_kept + 1) % TFC_CPU_KEPT;
    }
    if (k->cap < floats) {
        void *p = NULL;
        free(k->packed);
        *k = (tfc_cpu_kept_pack){0};
        if (posix_memalign(&p, 64, floats * sizeof(float))) return NULL;
        k->packed = p;
        k->cap = floats;
    }
    k->src[0] = src[0], k->src[1] = src[1];
    k->bytes[0] = bytes[0], k->bytes[1] = bytes[1];
    k->tag = tag;
    k->floats = floats;
    k->valid = 1; /* the caller packs it now */
    return k->packed;
}

void tfc_cpu_kept_written(tfc_backend *be, const void *p, size_t bytes)
{
    tfc_cpu_backend *cb = (tfc_cpu_backend *)be;
    const char *a = p;
    for (int i = 0; i < TFC_CPU_KEPT; i++)
        for (int s = 0; s < 2; s++) {
            const char *w = (const char *)cb->kept[i].src[s];
            if (w && a < w + cb->kept[i].bytes[s] && w < a + bytes) cb->kept[i].valid = 0;
        }
}

void tfc_cpu_kept_freed(tfc_backend *be, const void *p, size_t bytes)
{
    tfc_cpu_backend *cb = (tfc_cpu_backend *)be;
    const char *a = p;
    for (int i = 0; i < TFC_CPU_KEPT; i++) {
        tfc_cpu_kept_pack *k = &cb->kept[i];
        int inside = 0;
        for (int s = 0; s < 2; s++) {
            const char *w = (const char *)k->src[s];
            inside |= w && a <= w && w < a + bytes;
        }
        if (inside) k->src[0] = k->src[1] = NULL, k->valid = 0;
    }
}

void tfc_cpu_kept_free(tfc_backend *be)
{
    tfc_cpu_backend *cb = (tfc_cpu_backend *)be;
    for (int i = 0; i < TFC_CPU_KEPT; i++) free(cb->kept[i].packed);
}

tfc_rnn_split tfc_cpu_rnn_split(const tfc_backend *be, int n, int64_t macs)
{
    int nt = macs >= TFC_RNN_PAR_MIN_MACS ? be->threads : 1;
    if (nt > n / TFC_RNN_ROWS_PER_THREAD) nt = n / TFC_RNN_ROWS_PER_THREAD;
    if (nt < 1) nt = 1;
    int nb = n / TFC_RNN_BLOCK_ROWS;
    if (nb < nt) nb = nt;
    tfc_rnn_split s = {nt, nb, (n + nb - 1) / nb};
    return s;
}

void tfc_cpu_rnn_output(int n, int t, int u, int return_sequences, const float *hseq, float *y)
{
    if (return_sequences) {
        if (y != hseq) memcpy(y, hseq, (size_t)n * t * u * sizeof(float));
        return;
    }
    for (int i = 0; i < n; i++)
        memcpy(y + (int64_t)i * u, hseq + ((int64_t)i * t + t - 1) * u, (size_t)u * sizeof(float));
}

TFC_VECTOR
void tfc_cpu_rnn_add_dy(int n, int t, int u, int return_sequences, int i, int s,
                        const float *dy, float *dh)
{
    const float *dyi = NULL;
    if (return_sequences) dyi = dy + ((int64_t)i * t + s) * u;
    else if (s == t - 1) dyi = dy + (int64_t)i * u;
    if (!dyi) return;
#pragma omp simd
    for (int j = 0; j < u; j++) dh[j] += dyi[j];
}

void tfc_cpu_block_sums(int nb, int cols, int stride, const double *partial, float *dbias)
{
    for (int c = 0; c < cols; c++) {
        double sum = 0.0;
        for (int b = 0; b < nb; b++) sum += partial[(int64_t)b * stride + c];
        dbias[c] += (float)sum;
    }
}

/* Columns of keep drawn at a time (a stack buffer) */
#define KEEP_COLS 256

/* keep[c] for columns c0..c0+k-1 of sequence i: (u >= rate) / (1 - rate), or 1 at rate 0 */
static void draw_keep(int f, int i, int c0, int k, float rate, uint64_t key, uint64_t step,
                      float *keep)
{
    const float scale = 1.0f / (1.0f - rate);
    for (int c = 0; c < k; c++)
        keep[c] = rate <= 0.0f ? 1.0f
                               : tfc_rng_uniform(key, step, (uint64_t)i * f + c0 + c) >= rate
                                     ? scale
                                     : 0.0f;
}

/* out[i, s', :] (= or +=) in[i, s, :] keep[i, :] when forth is 0, out[i, s, :] = in[i, s', :]
 * keep[i, :] when it is 1, s' = reverse ? t - 1 - s : s */
static void reorder(const tfc_backend *be, int n, int t, int f, int reverse, float rate,
                    uint64_t key, uint64_t step, const float *in, float *out, int forth)
{
    const int nt = tfc_cpu_threads(be, (int64_t)n * t * f);
    TFC_CPU_FOR(n, nt, for (int i = 0; i < n; i++) {
        float keep[KEEP_COLS];
        for (int c0 = 0; c0 < f; c0 += KEEP_COLS) {
            const int k = f - c0 < KEEP_COLS ? f - c0 : KEEP_COLS;
            draw_keep(f, i, c0, k, rate, key, step, keep);
            for (int s = 0; s < t; s++) {
                const int64_t a = ((int64_t)i * t + s) * f + c0;
                const int64_t b = ((int64_t)i * t + (reverse ? t - 1 - s : s)) * f + c0;
                if (forth) {
                    for (int c = 0; c < k; c++) out[a + c] = in[b + c] * keep[c];
                } else {
                    for (int c = 0; c < k; c++) out[b + c] += in[a + c] * keep[c];
                }
            }
        }
    });
}

void tfc_cpu_rnn_input_forward(tfc_backend *be, int n, int t, int f, int reverse, float rate,
                               uint64_t key, uint64_t step, const float *x, float *y)
{
    reorder(be, n, t, f, reverse, rate, key, step, x, y, 1);
}

void tfc_cpu_rnn_input_backward(tfc_backend *be, int n, int t, int f, int reverse, float rate,
                                uint64_t key, uint64_t step, const float *dy, float *dx)
{
    reorder(be, n, t, f, reverse, rate, key, step, dy, dx, 0);
}

/* Row s of sequence i: the forward output's row, the backward output's (its step order
 * reversed) and the mask's factor. */
static float rows_of(int t, int u, const float *mask, int i, int s, int64_t *ra, int64_t *rb)
{
    *ra = ((int64_t)i * t + s) * u;
    *rb = ((int64_t)i * t + (t - 1 - s)) * u;
    return mask ? mask[(int64_t)i * t + s] : 1.0f;
}

/* y[i, s] = merge(m a[i, s], m b[i, t - 1 - s]), as backend.h */
void tfc_cpu_bidir_forward(tfc_backend *be, int n, int t, int u, tfc_merge_mode mode,
                           const float *mask, const float *a, const float *b, float *y)
{
    const int nt = tfc_cpu_threads(be, (int64_t)n * t * u);
    const int w = mode == TFC_MERGE_CONCAT ? 2 * u : u;
    TFC_CPU_FOR(n, nt, for (int i = 0; i < n; i++)
        for (int s = 0; s < t; s++) {
            int64_t ra, rb;
            const float m = rows_of(t, u, mask, i, s, &ra, &rb);
            float *yr = y + ((int64_t)i * t + s) * w;
            for (int j = 0; j < u; j++) {
                const float p = m * a[ra + j], q = m * b[rb + j];
                switch (mode) {
                case TFC_MERGE_CONCAT: yr[j] = p, yr[u + j] = q; break;
                case TFC_MERGE_SUM: yr[j] = p + q; break;
                case TFC_MERGE_MUL: yr[j] = p * q; break;
                case TFC_MERGE_AVE: yr[j] = (p + q) * 0.5f; break;
                }
            }
        });
}

/* da[i, s] = m dmerge/dp, db[i, t - 1 - s] = m dmerge/dq (p = m a, q = m b) */
void tfc_cpu_bidir_backward(tfc_backend *be, int n, int t, int u, tfc_merge_mode mode,
                            const float *mask, const float *a, const float *b, const float *dy,
                            float *da, float *db)
{
    const int nt = tfc_cpu_threads(be, (int64_t)n * t * u);
    const int w = mode == TFC_MERGE_CONCAT ? 2 * u : u;
#pragma omp parallel for TFC_CPU_STATIC(n, nt)
    for (int i = 0; i < n; i++)
        for (int s = 0; s < t; s++) {
            int64_t ra, rb;
            const float m = rows_of(t, u, mask, i, s, &ra, &rb);
            const float *g = dy + ((int64_t)i * t + s) * w;
            for (int j = 0; j < u; j++) {
                float gp = g[j], gq = g[j];
                if (mode == TFC_MERGE_CONCAT) gq = g[u + j];
                else if (mode == TFC_MERGE_MUL)
                    gp = g[j] * m * b[rb + j], gq = g[j] * m * a[ra + j];
                else if (mode == TFC_MERGE_AVE) gp = gq = 0.5f * g[j];
                da[ra + j] = m * gp;
                db[rb + j] = m * gq;
            }
        }
}
