/* GEMM through cuBLAS. cuBLAS is column-major: a row-major [r, c] matrix with leading
 * dimension ld is the column-major [c, r] matrix with the same ld, its transpose, so the
 * row-major C = op(A) op(B) is computed as the column-major Cᵀ = op(B)ᵀ op(A)ᵀ: swap the
 * operands and the dimensions m and n, keep the transpose flags. TF32 follows the handle's
 * math mode (tfc_gpu_set_tf32). */
#include "gpu/gpu_internal.cuh"

/* C[m, n] (leading dimension ldc) = beta C, with beta 0 writing exact zeros (as BLAS). */
static __global__ void scale2d_kernel(int m, int n, float beta, float *c, int ldc)
{
    const int64_t total = (int64_t)m * n;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        float *p = c + (i / n) * ldc + i % n;
        *p = beta == 0.0f ? 0.0f : beta * *p;
    }
}

void tfc_gpu_gemm(tfc_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
                  const float *a, int lda, const float *b, int ldb, float beta, float *c,
                  int ldc)
{
    gpu_ctx *g = gpu_of(be);
    if (m <= 0 || n <= 0) return;
    if (k <= 0) { /* an empty product: C = beta C */
        scale2d_kernel<<<gpu_blocks(g, (int64_t)m * n), GPU_THREADS, 0, g->stream>>>(m, n, beta,
                                                                                    c, ldc);
        TFC_LAUNCH_CHECK(g, scale2d_kernel);
        return;
    }
    TFC_CUBLAS_TRY(g, cublasSgemm(g->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, a,
                                  lda, &beta, c, ldc));
}
