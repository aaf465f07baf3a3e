/* STFTSpectrogram and MelSpectrogram on the GPU (tfc_stft_desc in core/backend.h, the
 * per-value math in core/stft.h, shared with cpu_stft.c): plain kernels, a thread per value,
 * each sum in cpu_stft.c's order. MEL's batch maximum and the sums of its floor's gradient
 * run in one block (a fixed tree, so the same bits each run). Not in the GPU's op table yet
 * (TFC_BACKEND_LAYER_OPS): tfc_gpu_test_enable_layer_ops puts them in for make test-gpu's
 * stft case; until that has passed on a GPU, a model with either layer is refused at bind
 * on the GPU. */
#include "core/stft.h"
#include "gpu/gpu_internal.cuh"

enum { RED_THREADS = 1024 };

/* re and im, a thread per (row, bin) */
static __global__ void stft_bins_kernel(tfc_stft_desc d, const float *x, const float *wr,
                                        const float *wi, float *re, float *im)
{
    const int64_t total = (int64_t)d.n * d.c * d.frames * d.bins;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = k / d.bins;
        const int f = (int)(k % d.bins);
        const int64_t n = r / ((int64_t)d.c * d.frames);
        const int c = (int)(r / d.frames % d.c), t = (int)(r % d.frames);
        if (wr) re[k] = tfc_stft_bin(&d, x, wr, n, c, t, f);
        if (wi) im[k] = tfc_stft_bin(&d, x, wi, n, c, t, f);
    }
}

/* y, a thread per (row, output value): the STFT modes' k, MEL's band */
static __global__ void stft_out_kernel(tfc_stft_desc d, const float *mel, const float *re,
                                       const float *im, float *y)
{
    const int per = d.mode == TFC_STFT_MEL ? d.mels : d.mode == TFC_STFT_STFT ? 2 * d.bins
                                                                               : d.bins;
    const int64_t total = (int64_t)d.n * d.c * d.frames * per;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = k / per;
        const int j = (int)(k % per);
        const int64_t n = r / ((int64_t)d.c * d.frames);
        const int c = (int)(r / d.frames % d.c), t = (int)(r % d.frames);
        const float *rr = re ? re + r * d.bins : NULL, *ri = im ? im + r * d.bins : NULL;
        float *yr = y + n * d.sn + c * d.sc + t * d.st;
        if (d.mode == TFC_STFT_MEL) {
            const float p = tfc_mel_power(&d, rr, ri, mel, j);
            yr[j * d.sf] = d.db ? tfc_mel_db(&d, p) : p;
        } else {
            yr[j * d.sf] = tfc_stft_value(&d, rr, ri, j);
        }
    }
}

/* The largest of y's total values, in a fixed tree over RED_THREADS threads of one block */
static __device__ float block_max(const float *y, int64_t total, float *sh)
{
    float m = -INFINITY;
    for (int64_t k = threadIdx.x; k < total; k += blockDim.x) m = fmaxf(m, y[k]);
    sh[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + s]);
        __syncthreads();
    }
    m = sh[0];
    __syncthreads();
    return m;
}

/* MEL with db: y raised to the batch's maximum minus top_db (one block) */
static __global__ void mel_floor_kernel(tfc_stft_desc d, float *y)
{
    __shared__ float sh[RED_THREADS];
    const int64_t total = (int64_t)d.n * d.mels * d.frames;
    const float floor_db = block_max(y, total, sh) - d.top_db;
    for (int64_t k = threadIdx.x; k < total; k += blockDim.x) y[k] = fmaxf(y[k], floor_db);
}

size_t tfc_gpu_stft_workspace(tfc_backend *be, const tfc_stft_desc *d)
{
    (void)be;
    int64_t floats = 2 * (int64_t)d->n * d->c * d->frames * d->bins;
    if (d->mode == TFC_STFT_MEL) floats += (int64_t)d->n * d->frames * d->mels + 4;
    return (size_t)floats * sizeof(float);
}

void tfc_gpu_stft_forward(tfc_backend *be, const tfc_stft_desc *d, const float *x,
                          const float *wr, const float *wi, const float *mel, float *re,
                          float *im, float *y)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t rows = (int64_t)d->n * d->c * d->frames;
    if (rows <= 0) return;
    stft_bins_kernel<<<gpu_blocks(g, rows * d->bins), GPU_THREADS, 0, g->stream>>>(
        *d, x, wr, wi, wr ? re : NULL, wi ? im : NULL);
    TFC_LAUNCH_CHECK(g, stft_bins_kernel);
    const int per = d->mode == TFC_STFT_MEL ? d->mels : d->mode == TFC_STFT_STFT ? 2 * d->bins
                                                                                 : d->bins;
    stft_out_kernel<<<gpu_blocks(g, rows * per), GPU_THREADS, 0, g->stream>>>(
        *d, mel, wr ? re : NULL, wi ? im : NULL, y);
    TFC_LAUNCH_CHECK(g, stft_out_kernel);
    if (d->mode == TFC_STFT_MEL && d->db) {
        mel_floor_kernel<<<1, RED_THREADS, 0, g->stream>>>(*d, y);
        TFC_LAUNCH_CHECK(g, mel_floor_kernel);
    }
}

/* STFT modes: the gradients of re and im, a thread per (row, bin) */
static __global__ void stft_value_grad_kernel(tfc_stft_desc d, const float *re, const float *im,
                                              const float *dy, float *gre, float *gim)
{
    const int64_t total = (int64_t)d.n * d.c * d.frames * d.bins;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = k / d.bins;
        const int f = (int)(k % d.bins);
        const int64_t n = r / ((int64_t)d.c * d.frames);
        const int c = (int)(r / d.frames % d.c), t = (int)(r % d.frames);
        const float *rr = re ? re + r * d.bins : NULL, *ri = im ? im + r * d.bins : NULL;
        tfc_stft_value_grad(&d, rr, ri, dy + n * d.sn + c * d.sc + t * d.st, f, gre + k,
                            gim + k);
    }
}

/* MEL with db, one block: sc[0] the maximum, sc[1] the gradient the floor sends to it,
 * sc[2] how many values tie at it; summed in a fixed tree */
static __global__ void mel_sums_kernel(tfc_stft_desc d, const float *mel, const float *re,
                                       const float *im, const float *y, const float *dy,
                                       float *sc)
{
    __shared__ float sh[RED_THREADS], sh2[RED_THREADS];
    const int64_t total = (int64_t)d.n * d.mels * d.frames;
    const float top = block_max(y, total, sh), floor_db = top - d.top_db;
    float to_max = 0, ties = 0;
    for (int64_t k = threadIdx.x; k < total; k += blockDim.x) {
        const int64_t r = k / d.mels;
        const int m = (int)(k % d.mels);
        const int64_t n = r / d.frames;
        const int t = (int)(r % d.frames);
        const float v = tfc_mel_db(&d, tfc_mel_power(&d, re + r * d.bins, im + r * d.bins,
                                                     mel, m));
        const float keep = v > floor_db ? 1.0f : v == floor_db ? 0.5f : 0.0f;
        to_max += (1.0f - keep) * dy[n * d.sn + t * d.st + m * d.sf];
        ties += v == top;
    }
    sh[threadIdx.x] = to_max;
    sh2[threadIdx.x] = ties;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            sh[threadIdx.x] += sh[threadIdx.x + s];
            sh2[threadIdx.x] += sh2[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        sc[0] = top;
        sc[1] = sh[0];
        sc[2] = sh2[0];
    }
}

/* MEL: the gradient of each mel power, a thread per (row, band) (cpu_stft.c's mel_grad) */
static __global__ void mel_dmel_kernel(tfc_stft_desc d, const float *mel, const float *re,
                                       const float *im, const float *dy, const float *sc,
                                       float *dmel)
{
    const int64_t total = (int64_t)d.n * d.mels * d.frames;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = k / d.mels;
        const int m = (int)(k % d.mels);
        const int64_t n = r / d.frames;
        const int t = (int)(r % d.frames);
        const float p = tfc_mel_power(&d, re + r * d.bins, im + r * d.bins, mel, m);
        float g = dy[n * d.sn + t * d.st + m * d.sf];
        if (d.db) {
            const float v = tfc_mel_db(&d, p), floor_db = sc[0] - d.top_db;
            const float keep = v > floor_db ? 1.0f : v == floor_db ? 0.5f : 0.0f;
            const float through = p > d.min_power ? 1.0f : p == d.min_power ? 0.5f : 0.0f;
            g = g * keep * through * 10.0f / ((float)M_LN10 * p);
            if (sc[1] != 0.0f && v == sc[0] && p > d.min_power)
                g += sc[1] / sc[2] * 10.0f / ((float)M_LN10 * p);
        }
        dmel[k] = g;
    }
}

/* MEL: the gradients of re and im from dmel, a thread per (row, bin) */
static __global__ void mel_grad_kernel(tfc_stft_desc d, const float *mel, const float *re,
                                       const float *im, const float *dmel, float *gre,
                                       float *gim)
{
    const int64_t total = (int64_t)d.n * d.frames * d.bins;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = k / d.bins;
        const int f = (int)(k % d.bins);
        double gs = 0;
        for (int m = 0; m < d.mels; m++)
            gs += (double)dmel[r * d.mels + m] * mel[(int64_t)f * d.mels + m];
        const float a = re[k], b = im[k];
        const float mag = sqrtf(tfc_stft_power(a, b));
        const float gm = (float)gs * d.mag_exp * powf(mag, d.mag_exp - 1.0f) / mag;
        gre[k] = a * gm;
        gim[k] = b * gm;
    }
}

/* dx, a thread per input sample */
static __global__ void stft_dx_kernel(tfc_stft_desc d, const float *gre, const float *gim,
                                      const float *wr, const float *wi, float *dx)
{
    const int64_t total = (int64_t)d.n * d.c * d.t;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x) {
        const int64_t s = k / d.t;
        const int i = (int)(k % d.t);
        const int64_t n = s / d.c;
        const int c = (int)(s % d.c);
        dx[tfc_stft_x_at(&d, n, c, i)] += tfc_stft_dx(&d, gre, gim, wr, wi, n, c, i);
    }
}

/* a kernel's gradient, a thread per (u, f) */
static __global__ void stft_dw_kernel(tfc_stft_desc d, const float *x, const float *g,
                                      float *dw)
{
    const int64_t total = (int64_t)d.frame * d.bins;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < total;
         k += (int64_t)gridDim.x * blockDim.x)
        dw[k] += tfc_stft_dw(&d, x, g, (int)(k / d.bins), (int)(k % d.bins));
}

void tfc_gpu_stft_backward(tfc_backend *be, const tfc_stft_desc *d, const float *x,
                           const float *wr, const float *wi, const float *mel, const float *re,
                           const float *im, const float *y, const float *dy, float *dx,
                           float *dwr, float *dwi, void *ws)
{
    gpu_ctx *g = gpu_of(be);
    const int64_t rows = (int64_t)d->n * d->c * d->frames;
    if (rows <= 0) return;
    float *gre = (float *)ws, *gim = gre + rows * d->bins;
    if (d->mode == TFC_STFT_MEL) {
        float *dmel = gim + rows * d->bins, *sc = dmel + rows * d->mels;
        if (d->db) {
            mel_sums_kernel<<<1, RED_THREADS, 0, g->stream>>>(*d, mel, re, im, y, dy, sc);
            TFC_LAUNCH_CHECK(g, mel_sums_kernel);
        }
        mel_dmel_kernel<<<gpu_blocks(g, rows * d->mels), GPU_THREADS, 0, g->stream>>>(
            *d, mel, re, im, dy, sc, dmel);
        TFC_LAUNCH_CHECK(g, mel_dmel_kernel);
        mel_grad_kernel<<<gpu_blocks(g, rows * d->bins), GPU_THREADS, 0, g->stream>>>(
            *d, mel, re, im, dmel, gre, gim);
        TFC_LAUNCH_CHECK(g, mel_grad_kernel);
    } else {
        stft_value_grad_kernel<<<gpu_blocks(g, rows * d->bins), GPU_THREADS, 0, g->stream>>>(
            *d, wr ? re : NULL, wi ? im : NULL, dy, gre, gim);
        TFC_LAUNCH_CHECK(g, stft_value_grad_kernel);
    }
    const float *gr = wr ? gre : NULL, *gi = wi ? gim : NULL;
    if (dx) {
        stft_dx_kernel<<<gpu_blocks(g, (int64_t)d->n * d->c * d->t), GPU_THREADS, 0,
                         g->stream>>>(*d, gr, gi, wr, wi, dx);
        TFC_LAUNCH_CHECK(g, stft_dx_kernel);
    }
    const int64_t kernel = (int64_t)d->frame * d->bins;
    if (dwr && gr) {
        stft_dw_kernel<<<gpu_blocks(g, kernel), GPU_THREADS, 0, g->stream>>>(*d, x, gr, dwr);
        TFC_LAUNCH_CHECK(g, stft_dw_kernel);
    }
    if (dwi && gi) {
        stft_dw_kernel<<<gpu_blocks(g, kernel), GPU_THREADS, 0, g->stream>>>(*d, x, gi, dwi);
        TFC_LAUNCH_CHECK(g, stft_dw_kernel);
    }
}
