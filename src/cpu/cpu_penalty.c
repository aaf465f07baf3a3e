/* CPU kernel of Keras's weight regularizers (core/init.h): the penalty l1 sum |w| + l2 sum w^2
 * into the loss and its gradient l1 sign(w) + 2 l2 w into the weight's. The sum is taken in
 * double over 16 fixed shares of the weights added in order, so it depends on n alone, not on
 * the threads: a resumed run repeats the original's bits. */
#include "cpu/cpu_internal.h"

enum { SHARES = 16 };

void tfc_cpu_penalty(tfc_backend *be, int64_t n, float l1, float l2, const float *w,
                     float *loss, float *grad)
{
    const int nt = tfc_cpu_threads(be, n);
    if (loss) {
        double part[SHARES];
        TFC_CPU_FOR(SHARES, nt < SHARES ? nt : SHARES, for (int s = 0; s < SHARES; s++) {
            double a = 0.0, q = 0.0;
            for (int64_t i = n * s / SHARES; i < n * (s + 1) / SHARES; i++) {
                a += fabs((double)w[i]);
                q += (double)w[i] * w[i];
            }
            part[s] = (double)l1 * a + (double)l2 * q;
        });
        double sum = 0.0;
        for (int s = 0; s < SHARES; s++) sum += part[s];
        *loss += (float)sum;
    }
    if (grad) {
        const float two_l2 = 2.0f * l2;
        TFC_CPU_FOR(n, nt, for (int64_t i = 0; i < n; i++) {
            const float v = w[i];
            const float sign = v > 0.0f ? 1.0f : v < 0.0f ? -1.0f : 0.0f;
            grad[i] += l1 * sign + two_l2 * v;
        });
    }
}
