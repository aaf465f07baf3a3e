/* Input-pipeline benchmark (make bench-data): writes 10,000 JPEG and 10,000 PNG files of
 * 64x64 RGB made from Fashion-MNIST into a temporary folder, then measures for each format
 *   bare    single-thread libjpeg-turbo / libpng decode from memory (the limit), reading
 *           each file then decoding it, and two from-memory decoders side by side on two
 *           threads (how far the machine itself scales from one thread to two),
 *   T=1,2   the pipeline images -> decode_image -> random_crop (pad 4) -> random_flip ->
 *           normalize, with num_parallel_calls 1 and 2 (files read by the pipeline),
 * interleaved in ROUNDS rounds (BENCH_DATA_ROUNDS, default 7): every round measures all of
 * them once, one after the other in an order that rotates from round to round, so a
 * disturbance of the shared machine hits a round, not one column. It prints the median
 * rates and the medians of the per-round ratios the issue targets (T=1 / bare >= 0.9,
 * T=2 / T=1 >= 1.8), single-thread CPU time per image, and the IDX Fashion-MNIST training
 * pipeline (scale, shuffle 60000, repeat, batch 128, prefetch 2) in batches per second, with
 * the always-on profiler against the same pipeline with it off (interleaved rounds: the rate
 * ratio and the CPU time ratio).
 * With --cnn-ms MS (a CNN training step's time from bench_train) it also prints how many
 * times faster than the CNN the IDX input is. */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jpeglib.h>
#include <png.h>

#include "tfc.h"

#define SIDE 64

/* Images per format: 10,000 (BENCH_DATA_N overrides, for quick experiments). */
static int N_IMAGES = 10000;
#define FMNIST "/usr/share/datasets/fashion-mnist/"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* CPU seconds of the process: on a machine shared with other work, single-thread CPU time
 * per image compares costs even when wall-clock rates are disturbed. */
static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}


static void die(const tfc_error *err)
{
    fputs(err->text, stderr);
    exit(1);
}

/* 28x28 grey to 64x64 RGB: bilinear upscaling, each channel tinted differently so the
 * images have colour for the codecs to work on. */
static void make_rgb(const uint8_t *g, uint8_t *out)
{
    for (int y = 0; y < SIDE; y++) {
        double fy = (y + 0.5) * 28.0 / SIDE - 0.5;
        if (fy < 0) fy = 0;
        int y0 = (int)fy, y1 = y0 + 1 < 28 ? y0 + 1 : 27;
        double wy = fy - y0;
        for (int x = 0; x < SIDE; x++) {
            double fx = (x + 0.5) * 28.0 / SIDE - 0.5;
            if (fx < 0) fx = 0;
            int x0 = (int)fx, x1 = x0 + 1 < 28 ? x0 + 1 : 27;
            double wx = fx - x0;
            double v = (g[y0 * 28 + x0] * (1 - wx) + g[y0 * 28 + x1] * wx) * (1 - wy) +
                       (g[y1 * 28 + x0] * (1 - wx) + g[y1 * 28 + x1] * wx) * wy;
            uint8_t *p = out + (y * SIDE + x) * 3;
            p[0] = (uint8_t)v;
            p[1] = (uint8_t)(v * (0.5 + 0.5 * x / SIDE));
            p[2] = (uint8_t)(255 - v * 0.8);
        }
    }
}

/* ---- bare decoders: the libraries' plain APIs, output buffer reused ---------------------- */

typedef struct jerr {
    struct jpeg_error_mgr mgr;
    jmp_buf jb;
} jerr;

static void jexit(j_common_ptr c)
{
    longjmp(((jerr *)c->err)->jb, 1);
}

static int bare_jpeg(struct jpeg_decompress_struct *d, const uint8_t *buf, size_t len,
                     uint8_t *out)
{
    jerr *e = (jerr *)d->err;
    if (setjmp(e->jb)) return -1;
    jpeg_mem_src(d, buf, (unsigned long)len);
    jpeg_read_header(d, TRUE);
    d->out_color_space = JCS_RGB;
    jpeg_start_decompress(d);
    JSAMPROW rows[SIDE]; /* as the pipeline: every row's pointer set once, all asked for */
    if (d->output_height > SIDE || d->output_width > SIDE) return -1;
    for (JDIMENSION k = 0; k < d->output_height && k < SIDE; k++)
        rows[k] = out + (size_t)k * d->output_width * 3;
    while (d->output_scanline < d->output_height)
        if (jpeg_read_scanlines(d, rows + d->output_scanline,
                                d->output_height - d->output_scanline) == 0)
            return -1;
    jpeg_finish_decompress(d);
    return 0;
}

static int bare_png(const uint8_t *buf, size_t len, uint8_t *out)
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&img, buf, len)) return -1;
    img.format = PNG_FORMAT_RGB;
    int ok = png_image_finish_read(&img, NULL, out, 0, NULL);
    png_image_free(&img);
    return ok ? 0 : -1;
}

typedef struct files {
    uint8_t **buf;
    size_t *len;
} files;

/* Where image i of a format lives: DIR/jpg.classes/<i % 10>/<i>.jpg. */
static void image_path(char *path, size_t size, const char *dir, const char *ext, int i)
{
    snprintf(path, size, "%s/%s.classes/%d/%05d.%s", dir, ext, i % 10, i, ext);
}

/* Reads a whole file into buf (cap bytes); returns its length. Plain open/read/close into
 * a reused buffer: stdio's fopen/fread costs a FILE allocation and an fstat more, which
 * made this bare loop slower than the pipeline's own reads. */
static size_t read_file(const char *path, uint8_t *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        perror(path);
        exit(1);
    }
    size_t n = 0;
    for (;;) {
        ssize_t k = read(fd, buf + n, cap - n);
        if (k < 0) {
            perror(path);
            exit(1);
        }
        if (k == 0 || (n += (size_t)k) == cap) break;
    }
    close(fd);
    return n;
}

/* One format's files in memory, and a decompressor for the bare loops. */
typedef struct corpus {
    const char *dir, *ext;
    int is_jpeg;
    uint8_t **buf;
    size_t *len;
    uint8_t *tmp, *out;
    struct jpeg_decompress_struct d;
    jerr e;
} corpus;

enum { FILE_CAP = 1 << 20 };

static void corpus_load(corpus *c, const char *dir, const char *ext)
{
    char path[4096];
    c->dir = dir;
    c->ext = ext;
    c->is_jpeg = !strcmp(ext, "jpg");
    c->buf = calloc((size_t)N_IMAGES, sizeof *c->buf);
    c->len = calloc((size_t)N_IMAGES, sizeof *c->len);
    c->tmp = malloc(FILE_CAP);
    c->out = malloc(SIDE * SIDE * 3);
    for (int i = 0; i < N_IMAGES; i++) {
        image_path(path, sizeof path, dir, ext, i);
        c->len[i] = read_file(path, c->tmp, FILE_CAP);
        c->buf[i] = malloc(c->len[i]);
        memcpy(c->buf[i], c->tmp, c->len[i]);
    }
    c->d.err = jpeg_std_error(&c->e.mgr);
    c->e.mgr.error_exit = jexit;
    jpeg_create_decompress(&c->d);
}

static void corpus_free(corpus *c)
{
    jpeg_destroy_decompress(&c->d);
    for (int i = 0; i < N_IMAGES; i++) free(c->buf[i]);
    free(c->buf);
    free(c->len);
    free(c->tmp);
    free(c->out);
}

/* One bare single-thread pass: decoding from memory, or reading each file then decoding it.
 * Returns images per second; *cpu_us gets the CPU microseconds per image. */
static double bare_once(corpus *c, int from_file, double *cpu_us)
{
    char path[4096];
    double t = now(), cpu = cpu_now();
    for (int i = 0; i < N_IMAGES; i++) {
        const uint8_t *b = c->buf[i];
        size_t n = c->len[i];
        if (from_file) {
            image_path(path, sizeof path, c->dir, c->ext, i);
            n = read_file(path, c->tmp, FILE_CAP);
            b = c->tmp;
        }
        if (c->is_jpeg ? bare_jpeg(&c->d, b, n, c->out) : bare_png(b, n, c->out)) {
            fprintf(stderr, "bare decode failed on image %d\n", i);
            exit(1);
        }
    }
    *cpu_us = (cpu_now() - cpu) * 1e6 / N_IMAGES;
    return N_IMAGES / (now() - t);
}

/* The bare from-memory loop on `threads` threads at once, each with its own decompressor,
 * taking every threads-th image: how well the machine itself runs two decoders side by side
 * (shared caches, a virtual machine's cores), the limit for the pipeline's T=2 / T=1. */
typedef struct bare_job {
    corpus *c;
    int first, step;
} bare_job;

static void *bare_thread(void *arg)
{
    bare_job *j = arg;
    corpus *c = j->c;
    struct jpeg_decompress_struct d;
    jerr e;
    d.err = jpeg_std_error(&e.mgr);
    e.mgr.error_exit = jexit;
    jpeg_create_decompress(&d);
    uint8_t *out = malloc(SIDE * SIDE * 3);
    for (int i = j->first; i < N_IMAGES; i += j->step)
        if (c->is_jpeg ? bare_jpeg(&d, c->buf[i], c->len[i], out)
                       : bare_png(c->buf[i], c->len[i], out)) {
            fprintf(stderr, "bare decode failed on image %d\n", i);
            exit(1);
        }
    jpeg_destroy_decompress(&d);
    free(out);
    return NULL;
}

static double bare_parallel(corpus *c, int threads)
{
    pthread_t th[8];
    bare_job jobs[8];
    double t = now();
    for (int k = 0; k < threads; k++) {
        jobs[k] = (bare_job){c, k, threads};
        if (pthread_create(&th[k], NULL, bare_thread, &jobs[k])) {
            perror("pthread_create");
            exit(1);
        }
    }
    for (int k = 0; k < threads; k++) pthread_join(th[k], NULL);
    return N_IMAGES / (now() - t);
}

/* One pass of the augmentation pipeline with `threads` parallel calls: images per second;
 * *cpu_us gets the process's CPU microseconds per image. `round` seeds the pipeline. */
static double pipeline_once(const char *dir, const char *ext, int threads, int round,
                            double *cpu_us)
{
    char yaml[4200], norm[160];
    snprintf(yaml, sizeof yaml, "{type: images, directory: %s/%s.classes, decode: false}", dir, ext);
    snprintf(norm, sizeof norm, "map: {op: normalize, mean: [127.5, 127.5, 127.5], std: 64, "
             "num_parallel_calls: %d}", threads);
    const char *stages[] = {"map: {op: decode_image, channels: 3}",
                            "map: {op: random_crop, size: 64, padding: 4}",
                            "map: {op: random_flip}", norm};
    tfc_error err;
    tfc_error_clear(&err);
    tfc_data_options o = {.seed = (uint64_t)round};
    tfc_pipeline *p = tfc_pipeline_from_yaml(yaml, &o, &err);
    if (!p) die(&err);
    for (int s = 0; s < 4; s++)
        if (tfc_pipeline_add_yaml(p, stages[s], &err)) die(&err);
    double t = now(), cpu = cpu_now();
    long n = 0;
    for (;;) {
        tfc_batch b;
        if (tfc_pipeline_next(p, &b, &err)) die(&err);
        if (b.end) break;
        n++;
    }
    double r = (double)n / (now() - t);
    *cpu_us = (cpu_now() - cpu) * 1e6 / (double)n;
    if (n != N_IMAGES) {
        fprintf(stderr, "pipeline read %ld images, expected %d\n", n, N_IMAGES);
        exit(1);
    }
    tfc_pipeline_free(p);
    return r;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double s[64];
    memcpy(s, v, sizeof *v * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

/* Batches per second of the IDX training pipeline and its CPU us per batch (all threads),
 * with the profiler at its default sampling (profile_every 0) or off (-1). */
static double idx_batches_per_second(int profile_every, double *cpu_us)
{
    const char *yaml = "{type: idx, images: " FMNIST "train-images-idx3-ubyte.gz, labels: " FMNIST
                       "train-labels-idx1-ubyte.gz}";
    const char *stages[] = {"map: {op: scale, factor: 0.00392156862745098}",
                            "shuffle: {buffer_size: 60000}", "repeat: {}",
                            "batch: {batch_size: 128}", "prefetch: {buffer_size: 2}"};
    tfc_error err;
    tfc_error_clear(&err);
    tfc_data_options o = {.seed = 1, .profile_every = profile_every};
    tfc_pipeline *p = tfc_pipeline_from_yaml(yaml, &o, &err);
    if (!p) die(&err);
    for (int s = 0; s < 5; s++)
        if (tfc_pipeline_add_yaml(p, stages[s], &err)) die(&err);
    tfc_batch b;
    for (int i = 0; i < 50; i++)
        if (tfc_pipeline_next(p, &b, &err)) die(&err);
    double t = now(), cpu = cpu_now();
    int n = 2000;
    for (int i = 0; i < n; i++)
        if (tfc_pipeline_next(p, &b, &err)) die(&err);
    double r = n / (now() - t);
    *cpu_us = (cpu_now() - cpu) * 1e6 / n;
    tfc_pipeline_free(p);
    return r;
}

static void write_images(const char *dir)
{
    tfc_error err;
    tfc_error_clear(&err);
    char path[4096];
    tfc_tensor imgs;
    char *gz = NULL;
    FILE *f = fopen(FMNIST "train-images-idx3-ubyte.gz", "rb");
    if (!f) {
        fprintf(stderr, "bench-data needs Fashion-MNIST: apt-get install dataset-fashion-mnist\n");
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    gz = malloc((size_t)len);
    if (fread(gz, 1, (size_t)len, f) != (size_t)len) exit(1);
    fclose(f);
    if (tfc_idx_parse(gz, (size_t)len, "train-images", &imgs, &err)) die(&err);
    free(gz);
    const char *fmts[2] = {"jpg", "png"};
    uint8_t rgb[SIDE * SIDE * 3];
    for (int k = 0; k < 2; k++) {
        /* One sub-folder per class (i % 10), as the images source reads them. */
        for (int c = 0; c < 10; c++) {
            snprintf(path, sizeof path, "%s/%s.classes", dir, fmts[k]);
            mkdir(path, 0777);
            snprintf(path, sizeof path, "%s/%s.classes/%d", dir, fmts[k], c);
            mkdir(path, 0777);
        }
        for (int i = 0; i < N_IMAGES; i++) {
            make_rgb((const uint8_t *)imgs.data + (size_t)i * 784, rgb);
            image_path(path, sizeof path, dir, fmts[k], i);
            tfc_status st = k ? tfc_image_write_png(path, rgb, SIDE, SIDE, 3, 8, &err)
                              : tfc_image_write_jpeg(path, rgb, SIDE, SIDE, 3, 90, &err);
            if (st) die(&err);
        }
    }
    free(imgs.data);
}

int main(int argc, char **argv)
{
    double cnn_ms = 0;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--cnn-ms")) cnn_ms = atof(argv[++i]);
    if (getenv("BENCH_DATA_N")) N_IMAGES = atoi(getenv("BENCH_DATA_N"));
    if (N_IMAGES < 10 || N_IMAGES > 60000) N_IMAGES = 10000;
    const char *base = getenv("TMPDIR");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tfc-bench-data-XXXXXX", base && *base ? base : "/tmp");
    double t = now();
    if (getenv("BENCH_DATA_DIR")) { /* reuse a folder a kept run wrote */
        snprintf(dir, sizeof dir, "%s", getenv("BENCH_DATA_DIR"));
    } else {
        if (!mkdtemp(dir)) {
            perror("mkdtemp");
            return 1;
        }
        write_images(dir);
        printf("wrote %d JPEG + %d PNG files (%dx%d RGB) in %.1f s to %s\n", N_IMAGES, N_IMAGES,
               SIDE, SIDE, now() - t, dir);
    }
    const char *fmts[2] = {"jpg", "png"};
    const char *names[2] = {"JPEG", "PNG"};
    int rounds = getenv("BENCH_DATA_ROUNDS") ? atoi(getenv("BENCH_DATA_ROUNDS")) : 7;
    if (rounds < 1 || rounds > 64) rounds = 7;
    /* [format][round]: rates (img/s) and CPU us/img of bare memory, bare file, bare memory
     * on 2 threads, T=1, T=2 */
    enum { MEM, FILE_, MEM2, T1, T2, NKIND };
    static double rate[2][NKIND][64], cpu[2][NKIND][64];
    corpus c[2];
    for (int k = 0; k < 2; k++) corpus_load(&c[k], dir, fmts[k]);
    for (int r = -1; r < rounds; r++) { /* round -1 warms caches and allocators up */
        int at = r < 0 ? 0 : r;
        for (int k = 0; k < 2; k++) {
            /* the order rotates from round to round, so no kind always runs first or last */
            for (int j = 0; j < NKIND; j++) {
                int kind = (j + at) % NKIND;
                double *rt = &rate[k][kind][at], *cu = &cpu[k][kind][at];
                if (kind == MEM || kind == FILE_) *rt = bare_once(&c[k], kind == FILE_, cu);
                else if (kind == MEM2) *rt = bare_parallel(&c[k], 2);
                else *rt = pipeline_once(dir, fmts[k], kind == T1 ? 1 : 2, at, cu);
            }
            if (getenv("BENCH_DATA_VERBOSE"))
                printf("round %d %s: bare %.0f, read+bare %.0f, bare x2 %.0f, T=1 %.0f, T=2 %.0f "
                       "img/s\n", r, names[k], rate[k][MEM][at], rate[k][FILE_][at],
                       rate[k][MEM2][at], rate[k][T1][at], rate[k][T2][at]);
        }
    }
    for (int k = 0; k < 2; k++) corpus_free(&c[k]);
    /* The IDX pipeline with the profiler on (default sampling) and off, interleaved: its
     * elements are the cheapest (a scale of 784 floats), so the profiler's cost shows most. */
    double idx_on[64], idx_off[64], cpu_on[64], cpu_off[64], q_rate[64], q_cpu[64];
    for (int r = -1; r < rounds; r++) {
        int at = r < 0 ? 0 : r;
        for (int j = 0; j < 2; j++) {
            if ((j + at) % 2) idx_off[at] = idx_batches_per_second(-1, &cpu_off[at]);
            else idx_on[at] = idx_batches_per_second(0, &cpu_on[at]);
        }
        q_rate[at] = idx_on[at] / idx_off[at];
        q_cpu[at] = cpu_on[at] / cpu_off[at];
    }
    double idx = median(idx_on, rounds);
    printf("\nmedians of %d interleaved rounds (ratios: the median of the per-round ratios)\n",
           rounds);
    printf("\none thread\n\n| format | bare decode, memory (img/s) | bare read + decode "
           "(img/s) | pipeline T=1 (img/s) | T=1 / decode | T=1 / read+decode |\n"
           "|---|---|---|---|---|---|\n");
    for (int k = 0; k < 2; k++) {
        double q1[64], q2[64];
        for (int r = 0; r < rounds; r++) {
            q1[r] = rate[k][T1][r] / rate[k][MEM][r];
            q2[r] = rate[k][T1][r] / rate[k][FILE_][r];
        }
        printf("| %s | %.0f | %.0f | %.0f | %.2f | %.2f |\n", names[k],
               median(rate[k][MEM], rounds), median(rate[k][FILE_], rounds),
               median(rate[k][T1], rounds), median(q1, rounds), median(q2, rounds));
    }
    printf("\ntwo threads (bare: two decoders side by side, from memory)\n\n| format | bare "
           "decode x2 (img/s) | bare x2 / x1 | pipeline T=2 (img/s) | T=2 / T=1 |\n"
           "|---|---|---|---|---|\n");
    for (int k = 0; k < 2; k++) {
        double q1[64], q2[64];
        for (int r = 0; r < rounds; r++) {
            q1[r] = rate[k][MEM2][r] / rate[k][MEM][r];
            q2[r] = rate[k][T2][r] / rate[k][T1][r];
        }
        printf("| %s | %.0f | %.2f | %.0f | %.2f |\n", names[k], median(rate[k][MEM2], rounds),
               median(q1, rounds), median(rate[k][T2], rounds), median(q2, rounds));
    }
    printf("\n| format | CPU us/img: decode | read + decode | pipeline T=1 | decode / T=1 | "
           "read+decode / T=1 |\n|---|---|---|---|---|---|\n");
    for (int k = 0; k < 2; k++) {
        double q1[64], q2[64];
        for (int r = 0; r < rounds; r++) {
            q1[r] = cpu[k][MEM][r] / cpu[k][T1][r];
            q2[r] = cpu[k][FILE_][r] / cpu[k][T1][r];
        }
        printf("| %s | %.1f | %.1f | %.1f | %.2f | %.2f |\n", names[k], median(cpu[k][MEM], rounds),
               median(cpu[k][FILE_], rounds), median(cpu[k][T1], rounds), median(q1, rounds),
               median(q2, rounds));
    }
    printf("\nIDX Fashion-MNIST train pipeline (scale, shuffle 60000, repeat, batch 128, "
           "prefetch 2): %.0f batches/s\n", idx);
    printf("profiler (always on) against off, same pipeline: %.0f against %.0f batches/s, "
           "rate ratio %.3f; CPU %.1f against %.1f us/batch, ratio %.3f (medians of %d "
           "interleaved rounds)\n", idx, median(idx_off, rounds), median(q_rate, rounds),
           median(cpu_on, rounds), median(cpu_off, rounds), median(q_cpu, rounds), rounds);
    if (cnn_ms > 0)
        printf("CNN step %.2f ms = %.1f batches/s: input is %.0fx faster\n", cnn_ms, 1e3 / cnn_ms,
               idx * cnn_ms / 1e3);
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (!getenv("BENCH_DATA_KEEP") && !getenv("BENCH_DATA_DIR") && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return 0;
}
