/* Sequential draws from one Philox stream (key, step) on the host: uniforms in (0, 1),
 * normals, and Gamma and Beta draws, for the batch-level draws of MixUp and CutMix
 * (data/ops_mix.c) and AugMix's chain weights (layers/aug_mix.c). Header-only. */
#ifndef TFC_CORE_RNG_DRAW_H
#define TFC_CORE_RNG_DRAW_H

#include <math.h>
#include <stdint.h>

#include "core/rng.h"

/* The stream: draw n is the n-th Philox block of (key, step). */
typedef struct tfc_draw_stream {
    uint64_t key, step, n;
} tfc_draw_stream;

/* A double in (0, 1), 53 bits. */
static inline double tfc_draw_uniform(tfc_draw_stream *s)
{
    tfc_u32x4 r = tfc_philox(s->key, s->n++, s->step);
    uint64_t x = ((uint64_t)r.v[0] << 21) | (r.v[1] >> 11);
    return ((double)x + 0.5) * (1.0 / 9007199254740992.0);
}

/* A standard normal (Box-Muller on two uniforms). */
static inline double tfc_draw_normal(tfc_draw_stream *s)
{
    double u1 = tfc_draw_uniform(s), u2 = tfc_draw_uniform(s);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* log of a Gamma(a, 1) draw, a > 0 (Marsaglia and Tsang; a < 1 by G(a) = G(a + 1) U^(1/a)),
 * in logs so that a tiny a (CutMix's 1e-6) does not underflow to 0. */
static inline double tfc_draw_log_gamma(tfc_draw_stream *s, double a)
{
    double boost = 0.0;
    if (a < 1.0) {
        boost = log(tfc_draw_uniform(s)) / a;
        a += 1.0;
    }
    const double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = tfc_draw_normal(s), v = 1.0 + c * x;
        if (v <= 0.0) continue;
        v = v * v * v;
        double u = tfc_draw_uniform(s);
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v)) return log(d * v) + boost;
    }
}

/* A Beta(a, a) draw: X / (X + Y) for X, Y ~ Gamma(a), from their logs. */
static inline double tfc_draw_beta(tfc_draw_stream *s, double a)
{
    double lx = tfc_draw_log_gamma(s, a), ly = tfc_draw_log_gamma(s, a);
    return 1.0 / (1.0 + exp(ly - lx));
}

#endif
