/* CPU kernels of the noise layers (core/backend.h, tfc_noise_desc): y = m x + b with m and b
 * of each draw from tfc_noise_affine, which the GPU's kernels share. A block of up to
 * NOISE_BLOCK draws of one group is computed once and applied to every row that shares it;
 * each element is independent, so the results never depend on the thread count. */
#include "cpu/cpu_internal.h"

#define NOISE_BLOCK 64

/* y = m x + b (forward), or dx (+)= m dy (backward: mode 1 adds, 2 assigns) */
static void noise(tfc_backend *be, const tfc_noise_desc *d, const float *in, float *out,
                  int mode)
{
    const tfc_noise_desc k = *d;
    const int64_t per = (k.cols + NOISE_BLOCK - 1) / NOISE_BLOCK, blocks = k.groups * per;
    int nt = tfc_cpu_threads(be, k.groups * k.rows * k.cols * 4);
    TFC_CPU_FOR(blocks, nt, for (int64_t bl = 0; bl < blocks; bl++) {
        const int64_t g = bl / per, c0 = bl % per * NOISE_BLOCK;
        const int w = (int)(k.cols - c0 < NOISE_BLOCK ? k.cols - c0 : NOISE_BLOCK);
        float m[NOISE_BLOCK], b[NOISE_BLOCK];
        for (int c = 0; c < w; c++)
            m[c] = tfc_noise_affine(&k, (uint64_t)(g * k.cols + c0 + c), &b[c]);
        for (int64_t r = 0; r < k.rows; r++) {
            const int64_t o = (g * k.rows + r) * k.cols + c0;
            const float *src = in + o;
            float *dst = out + o;
            if (mode == 0) {
                _Pragma("omp simd")
                for (int c = 0; c < w; c++) dst[c] = m[c] * src[c] + b[c];
            } else if (mode == 1) {
                _Pragma("omp simd")
                for (int c = 0; c < w; c++) dst[c] += m[c] * src[c];
            } else {
                _Pragma("omp simd")
                for (int c = 0; c < w; c++) dst[c] = m[c] * src[c];
            }
        }
    });
}

void tfc_cpu_noise_forward(tfc_backend *be, const tfc_noise_desc *d, const float *x, float *y)
{
    noise(be, d, x, y, 0);
}

void tfc_cpu_noise_backward(tfc_backend *be, const tfc_noise_desc *d, const float *dy,
                            float *dx, int assign)
{
    noise(be, d, dy, dx, assign ? 2 : 1);
}
