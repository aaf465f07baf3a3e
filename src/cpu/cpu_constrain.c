/* CPU kernel of Keras's weight constraints (tfc_constraint_desc, core/backend.h): each norm is
 * summed in double over the reduced axis in its order, by one thread, so the result depends on
 * the shape alone, not on the threads. The factor and the product are float32, in Keras's
 * order (keras/src/constraints/constraints.py). */
#include "cpu/cpu_internal.h"

enum { BLOCK = 64 }; /* inner columns one task sums at once */

/* The factor that multiplies a weight whose norm is `norm` (UNIT_NORM divides instead). */
static float factor(const tfc_constraint_desc *d, float norm)
{
    const float eps = 1e-7f;
    float lo = d->kind == TFC_CONSTRAINT_MIN_MAX_NORM ? d->min_value : 0.0f;
    float clipped = norm < lo ? lo : norm > d->max_value ? d->max_value : norm;
    float desired = d->kind == TFC_CONSTRAINT_MIN_MAX_NORM
                        ? d->rate * clipped + (1.0f - d->rate) * norm
                        : clipped;
    return desired / (eps + norm);
}

void tfc_cpu_constrain(tfc_backend *be, const tfc_constraint_desc *d, float *w)
{
    const int64_t n = d->outer * d->red * d->inner;
    if (n == 0 || d->kind == TFC_CONSTRAINT_NONE) return;
    const int nt = tfc_cpu_threads(be, n);
    if (d->kind == TFC_CONSTRAINT_NON_NEG) {
        TFC_CPU_FOR(n, nt, for (int64_t i = 0; i < n; i++) {
            if (w[i] < 0.0f) w[i] = 0.0f; /* NaN stays, as max(w, 0) */
        });
        return;
    }
    const int64_t blocks = (d->inner + BLOCK - 1) / BLOCK, tasks = d->outer * blocks;
    TFC_CPU_FOR(tasks, nt < tasks ? nt : (int)tasks, for (int64_t t = 0; t < tasks; t++) {
        const int64_t o = t / blocks, c0 = t % blocks * BLOCK;
        const int64_t c1 = c0 + BLOCK < d->inner ? c0 + BLOCK : d->inner;
        float *base = w + o * d->red * d->inner;
        double sum[BLOCK] = {0};
        for (int64_t r = 0; r < d->red; r++)
            for (int64_t c = c0; c < c1; c++) {
                const double v = base[r * d->inner + c];
                sum[c - c0] += v * v;
            }
        for (int64_t c = c0; c < c1; c++) {
            const float norm = (float)sqrt(sum[c - c0]);
            if (d->kind == TFC_CONSTRAINT_UNIT_NORM) {
                const float den = 1e-7f + norm;
                for (int64_t r = 0; r < d->red; r++) base[r * d->inner + c] /= den;
            } else {
                const float f = factor(d, norm);
                for (int64_t r = 0; r < d->red; r++) base[r * d->inner + c] *= f;
            }
        }
    });
}
