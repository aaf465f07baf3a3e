/* PNG and JPEG decoding from memory, and the small encoders tests and benchmarks use.
 * libpng and libjpeg report fatal errors by longjmp; both are caught here and returned as
 * TFC_ERR_DATA naming the file. Dimensions are checked against the limits (SPEC §5a) before
 * the pixel buffer is allocated, libjpeg warnings about corrupt data count as errors, and a
 * progressive JPEG may have at most MAX_SCANS scans (each costs a pass over the image). */
#include <pthread.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <png.h>

#include "data/internal.h"

#define MAX_SCANS 256

static tfc_status check_limits(const char *name, int64_t w, int64_t h,
                               const tfc_image_limits *lim, tfc_error *err)
{
    int64_t side = lim && lim->max_side > 0 ? lim->max_side : TFC_IMAGE_MAX_SIDE;
    int64_t pix = lim && lim->max_pixels > 0 ? lim->max_pixels : TFC_IMAGE_MAX_PIXELS;
    if (w < 1 || h < 1)
        return tfc_error_set(err, TFC_ERR_DATA, "%s: image has no pixels (%lld x %lld)", name,
                             (long long)w, (long long)h);
    if (w > side || h > side || w * h > pix)
        return tfc_error_set(err, TFC_ERR_DATA, "%s: image of %lld x %lld pixels exceeds the "
                             "limits (%lld per side, %lld pixels)", name, (long long)w,
                             (long long)h, (long long)side, (long long)pix);
    return TFC_OK;
}

/* Converts interleaved 8-bit pixels from sc to dc channels (grey from RGB by ITU-R 601
 * luma; alpha dropped or set opaque). */
static void convert_channels(uint8_t *dst, int dc, const uint8_t *src, int sc, int64_t n)
{
    for (int64_t i = 0; i < n; i++, src += sc, dst += dc) {
        uint8_t r, g, b, a;
        if (sc <= 2) {
            r = g = b = src[0];
            a = sc == 2 ? src[1] : 255;
        } else {
            r = src[0];
            g = src[1];
            b = src[2];
            a = sc == 4 ? src[3] : 255;
        }
        if (dc == 1) {
            dst[0] = sc <= 2 ? r : (uint8_t)((299 * r + 587 * g + 114 * b + 500) / 1000);
        } else if (dc == 2) {
            dst[0] = sc <= 2 ? r : (uint8_t)((299 * r + 587 * g + 114 * b + 500) / 1000);
            dst[1] = a;
        } else {
            dst[0] = r;
            dst[1] = g;
            dst[2] = b;
            if (dc == 4) dst[3] = a;
        }
    }
}

/* Wraps decoded pixels (w x h x sc) into t, converting to `channels` (0: keep). */
static tfc_status finish(uint8_t *pix, int64_t w, int64_t h, int sc, int channels,
                         const char *name, tfc_tensor *t, tfc_error *err)
{
    int dc = channels ? channels : sc;
    if (dc != sc) {
        uint8_t *out = malloc((size_t)(w * h * dc));
        if (!out) {
            free(pix);
            return tfc_error_set(err, TFC_ERR_NOMEM, "%s: out of memory", name);
        }
        convert_channels(out, dc, pix, sc, w * h);
        free(pix);
        pix = out;
    }
    t->dtype = TFC_U8;
    t->shape = (tfc_shape){.ndim = 3, .dim = {h, w, dc}};
    t->data = pix;
    t->device = -1;
    return TFC_OK;
}

/* ---- PNG ---------------------------------------------------------------------------------- */

typedef struct png_ctx {
    const uint8_t *buf;
    size_t len, pos;
    char msg[256];
} png_ctx;

static void png_err(png_structp png, png_const_charp msg)
{
    png_ctx *c = png_get_error_ptr(png);
    snprintf(c->msg, sizeof c->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_warn(png_structp png, png_const_charp msg)
{
}

static void png_read_mem(png_structp png, png_bytep out, png_size_t n)
{
    png_ctx *c = png_get_io_ptr(png);
    if (n > c->len - c->pos) png_error(png, "unexpected end of data (truncated file)");
    memcpy(out, c->buf + c->pos, n);
    c->pos += n;
}

static tfc_status decode_png(const void *buf, size_t len, const char *name, int channels,
                             const tfc_image_limits *lim, tfc_tensor *t, tfc_error *err)
{
    png_ctx c = {.buf = buf, .len = len};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &c, png_err, png_warn);
    if (!png) return tfc_error_set(err, TFC_ERR_NOMEM, "%s: cannot start libpng", name);
    png_infop info = png_create_info_struct(png);
    uint8_t *volatile pix = NULL;
    png_bytep *volatile rows = NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return tfc_error_set(err, TFC_ERR_NOMEM, "%s: cannot start libpng", name);
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        free(pix);
        free(rows);
        return tfc_error_set(err, TFC_ERR_DATA, "%s: corrupt PNG: %s", name, c.msg);
    }
    int64_t side = lim && lim->max_side > 0 ? lim->max_side : TFC_IMAGE_MAX_SIDE;
    png_set_user_limits(png, (png_uint_32)(side > 0x7fffffff ? 0x7fffffff : side),
                        (png_uint_32)(side > 0x7fffffff ? 0x7fffffff : side));
    png_set_chunk_malloc_max(png, 8u << 20);
    png_set_read_fn(png, &c, png_read_mem);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    tfc_status st = check_limits(name, w, h, lim, err);
    if (st) {
        png_destroy_read_struct(&png, &info, NULL);
        return st;
    }
    int color = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
    /* Everything becomes 8-bit grey, grey+alpha, RGB or RGBA. */
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
    if (depth == 16) png_set_scale_16(png); /* rounds, unlike strip_16 */
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    int sc = png_get_channels(png, info);
    size_t rowbytes = png_get_rowbytes(png, info);
    if (sc < 1 || sc > 4 || rowbytes != (size_t)w * (size_t)sc) png_error(png, "unexpected layout");
    pix = malloc((size_t)h * rowbytes);
    rows = malloc((size_t)h * sizeof *rows);
    if (!pix || !rows) png_error(png, "out of memory");
    for (png_uint_32 y = 0; y < h; y++) rows[y] = pix + (size_t)y * rowbytes;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
    return finish(pix, w, h, sc, channels, name, t, err);
}

/* ---- JPEG --------------------------------------------------------------------------------- */

typedef struct jpeg_ctx {
    struct jpeg_error_mgr mgr;
    struct jpeg_progress_mgr progress;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
} jpeg_ctx;

static void jpeg_exit(j_common_ptr cinfo)
{
    jpeg_ctx *c = (jpeg_ctx *)cinfo->err;
    cinfo->err->format_message(cinfo, c->msg);
    longjmp(c->jb, 1);
}

/* Warnings (level -1) are about corrupt data: treat them as errors. */
static void jpeg_emit(j_common_ptr cinfo, int level)
{
    if (level < 0) jpeg_exit(cinfo);
}

static void jpeg_progress(j_common_ptr cinfo)
{
    j_decompress_ptr d = (j_decompress_ptr)cinfo;
    if (cinfo->is_decompressor && d->input_scan_number > MAX_SCANS) {
        jpeg_ctx *c = (jpeg_ctx *)cinfo->err;
        snprintf(c->msg, sizeof c->msg, "more than %d progressive scans", MAX_SCANS);
        longjmp(c->jb, 1);
    }
}

/* A libjpeg decompressor with its error and progress handlers; reused through a pool. */
typedef struct jpeg_state {
    struct jpeg_decompress_struct d;
    jpeg_ctx c;
    struct jpeg_state *next;
} jpeg_state;

struct tfc_image_pool {
    pthread_mutex_t mu;
    jpeg_state *free;
};

tfc_image_pool *tfc_image_pool_new(void)
{
    tfc_image_pool *p = calloc(1, sizeof *p);
    if (p) pthread_mutex_init(&p->mu, NULL);
    return p;
}

static void jpeg_state_free(jpeg_state *s)
{
    jpeg_destroy_decompress(&s->d);
    free(s);
}

void tfc_image_pool_free(tfc_image_pool *pool)
{
    if (!pool) return;
    while (pool->free) {
        jpeg_state *s = pool->free;
        pool->free = s->next;
        jpeg_state_free(s);
    }
    pthread_mutex_destroy(&pool->mu);
    free(pool);
}

/* Sets up a new decompressor; -1 when libjpeg runs out of memory. */
__attribute__((noinline)) static int jpeg_state_init(jpeg_state *s)
{
    s->d.err = jpeg_std_error(&s->c.mgr);
    s->c.mgr.error_exit = jpeg_exit;
    s->c.mgr.emit_message = jpeg_emit;
    s->c.progress.progress_monitor = jpeg_progress;
    if (setjmp(s->c.jb)) return -1;
    jpeg_create_decompress(&s->d);
    s->d.progress = &s->c.progress;
    return 0;
}

/* A ready decompressor: from the pool, or new (NULL when out of memory). */
__attribute__((noinline)) static jpeg_state *jpeg_acquire(tfc_image_pool *pool)
{
    jpeg_state *s = NULL;
    if (pool) {
        pthread_mutex_lock(&pool->mu);
        s = pool->free;
        if (s) pool->free = s->next;
        pthread_mutex_unlock(&pool->mu);
        if (s) return s;
    }
    s = calloc(1, sizeof *s);
    if (s && jpeg_state_init(s)) {
        free(s);
        s = NULL;
    }
    return s;
}

/* Returns a decompressor after use (reset first), or frees it when there is no pool. */
static void jpeg_release(tfc_image_pool *pool, jpeg_state *s)
{
    if (!pool) {
        jpeg_state_free(s);
        return;
    }
    jpeg_abort_decompress(&s->d);
    pthread_mutex_lock(&pool->mu);
    s->next = pool->free;
    pool->free = s;
    pthread_mutex_unlock(&pool->mu);
}

static tfc_status decode_jpeg(tfc_image_pool *pool, const void *buf, size_t len,
                              const char *name, int channels, const tfc_image_limits *lim,
                              tfc_tensor *t, tfc_error *err)
{
    jpeg_state *s = jpeg_acquire(pool);
    if (!s) return tfc_error_set(err, TFC_ERR_NOMEM, "%s: cannot start libjpeg", name);
    struct jpeg_decompress_struct *d = &s->d;
    jpeg_ctx *c = &s->c;
    uint8_t *volatile pix = NULL;
    uint8_t *volatile cmyk = NULL;
    c->msg[0] = 0;
    if (setjmp(c->jb)) {
        tfc_error_set(err, TFC_ERR_DATA, "%s: corrupt JPEG: %s", name, c->msg);
        jpeg_release(pool, s);
        free(pix);
        free(cmyk);
        return TFC_ERR_DATA;
    }
    jpeg_mem_src(d, (const unsigned char *)buf,
                 (unsigned long)(len > 0xffffffffu ? 0xffffffffu : len));
    jpeg_read_header(d, TRUE);
    tfc_status st = check_limits(name, d->image_width, d->image_height, lim, err);
    if (st) {
        jpeg_release(pool, s);
        return st;
    }
    int is_cmyk = d->jpeg_color_space == JCS_CMYK || d->jpeg_color_space == JCS_YCCK;
    if (is_cmyk) d->out_color_space = JCS_CMYK;
    else if (d->num_components == 1 || channels == 1) d->out_color_space = JCS_GRAYSCALE;
    else d->out_color_space = JCS_RGB;
    d->dct_method = JDCT_ISLOW;
    jpeg_start_decompress(d);
    int64_t w = d->output_width, h = d->output_height;
    int oc = d->output_components;
    if (oc != 1 && oc != 3 && oc != 4) {
        snprintf(c->msg, sizeof c->msg, "unsupported %d components", oc);
        longjmp(c->jb, 1);
    }
    uint8_t *dst = malloc((size_t)(w * h * oc));
    if (!dst) {
        snprintf(c->msg, sizeof c->msg, "out of memory");
        longjmp(c->jb, 1);
    }
    if (is_cmyk) cmyk = dst;
    else pix = dst;
    /* Row pointers are set once for up to 256 rows, then as many rows as are left of them
     * are asked for at each call: libjpeg-turbo upsamples 2:1 subsampled chroma straight
     * into our rows instead of through its spare row (about 10% faster for small images),
     * and returns only a row group (2 rows) per call, so pointers rebuilt for every call
     * cost 7,000 instructions a 64x64 image (callgrind). */
    while (d->output_scanline < d->output_height) {
        JSAMPROW rows[256];
        JDIMENSION base = d->output_scanline, left = d->output_height - base;
        JDIMENSION k = left < 256 ? left : 256;
        for (JDIMENSION j = 0; j < k; j++) rows[j] = dst + (size_t)(base + j) * (size_t)(w * oc);
        while (d->output_scanline < base + k) {
            JDIMENSION at = d->output_scanline - base;
            if (jpeg_read_scanlines(d, rows + at, k - at) == 0) {
                snprintf(c->msg, sizeof c->msg, "no progress at row %u", d->output_scanline);
                longjmp(c->jb, 1);
            }
        }
    }
    jpeg_finish_decompress(d);
    jpeg_release(pool, s);
    int sc = oc;
    if (is_cmyk) {
        /* Adobe writes inverted CMYK: R = C * K / 255 on the stored values. */
        uint8_t *rgb = malloc((size_t)(w * h * 3));
        if (!rgb) {
            free(cmyk);
            return tfc_error_set(err, TFC_ERR_NOMEM, "%s: out of memory", name);
        }
        for (int64_t i = 0; i < w * h; i++)
            for (int k = 0; k < 3; k++)
                rgb[i * 3 + k] = (uint8_t)((cmyk[i * 4 + k] * cmyk[i * 4 + 3] + 127) / 255);
        free(cmyk);
        pix = rgb;
        sc = 3;
    }
    return finish(pix, w, h, sc, channels, name, t, err);
}

int tfc_image_is_png(const void *buf, size_t len)
{
    return len >= 8 && !memcmp(buf, "\x89PNG\r\n\x1a\n", 8);
}

int tfc_image_is_jpeg(const void *buf, size_t len)
{
    const uint8_t *b = buf;
    return len >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff;
}

tfc_status tfc_image_decode(const void *buf, size_t len, const char *name, int channels,
                            const tfc_image_limits *lim, tfc_tensor *t, tfc_error *err)
{
    return tfc_image_decode_with(NULL, buf, len, name, channels, lim, t, err);
}

tfc_status tfc_image_decode_with(tfc_image_pool *pool, const void *buf, size_t len,
                                 const char *name, int channels, const tfc_image_limits *lim,
                                 tfc_tensor *t, tfc_error *err)
{
    memset(t, 0, sizeof *t);
    if (channels < 0 || channels > 4)
        return tfc_error_set(err, TFC_ERR_CONFIG, "%s: channels must be 0, 1, 2, 3 or 4", name);
    if (tfc_image_is_png(buf, len)) return decode_png(buf, len, name, channels, lim, t, err);
    if (tfc_image_is_jpeg(buf, len))
        return decode_jpeg(pool, buf, len, name, channels, lim, t, err);
    return tfc_error_set(err, TFC_ERR_DATA, "%s: not a PNG or JPEG image (unknown signature)",
                         name);
}

/* ---- encoders ------------------------------------------------------------------------------ */

/* PNG output into a growing buffer (the in-memory encoder's sink). */
typedef struct png_mem {
    uint8_t *data;
    size_t len, cap;
    int failed;
} png_mem;

static void png_mem_write(png_structp png, png_bytep bytes, png_size_t n)
{
    png_mem *m = png_get_io_ptr(png);
    if (m->failed) return;
    if (m->len + n > m->cap) {
        size_t cap = m->cap ? m->cap : 4096;
        while (cap < m->len + n) cap *= 2;
        uint8_t *d = realloc(m->data, cap);
        if (!d) {
            m->failed = 1;
            return;
        }
        m->data = d;
        m->cap = cap;
    }
    memcpy(m->data + m->len, bytes, n);
    m->len += n;
}

static void png_mem_flush(png_structp png) { (void)png; }

/* Encodes to `f`, or to `mem` when f is NULL; `name` stands for the output in errors. */
static tfc_status encode_png(FILE *f, png_mem *mem, const char *name, const void *pixels,
                             int width, int height, int channels, int bit_depth, tfc_error *err)
{
    static const int types[5] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA,
                                 PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA};
    png_ctx c = {0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &c, png_err, png_warn);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info || setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        return tfc_error_set(err, TFC_ERR_IO, "cannot write %s: %s", name, c.msg);
    }
    if (f) png_init_io(png, f);
    else png_set_write_fn(png, mem, png_mem_write, png_mem_flush);
    png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, bit_depth, types[channels],
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    if (bit_depth == 16) png_set_swap(png); /* our samples are little-endian u16 */
    size_t stride = (size_t)width * (size_t)channels * (size_t)(bit_depth / 8);
    for (int y = 0; y < height; y++)
        png_write_row(png, (png_const_bytep)pixels + (size_t)y * stride);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    if (mem && mem->failed) return tfc_error_set(err, TFC_ERR_NOMEM, "%s: out of memory", name);
    return TFC_OK;
}

static int png_params_ok(int width, int height, int channels, int bit_depth)
{
    return channels >= 1 && channels <= 4 && (bit_depth == 8 || bit_depth == 16) && width >= 1 &&
           height >= 1;
}

tfc_status tfc_image_write_png(const char *path, const void *pixels, int width, int height,
                               int channels, int bit_depth, tfc_error *err)
{
    if (!png_params_ok(width, height, channels, bit_depth))
        return tfc_error_set(err, TFC_ERR_CONFIG, "%s: bad PNG parameters", path);
    FILE *f = fopen(path, "wb");
    if (!f) return tfc_error_set(err, TFC_ERR_IO, "cannot write %s: %m", path);
    tfc_status st = encode_png(f, NULL, path, pixels, width, height, channels, bit_depth, err);
    if (fclose(f) != 0 && !st) return tfc_error_set(err, TFC_ERR_IO, "cannot write %s: %m", path);
    return st;
}

tfc_status tfc_image_encode_png(const void *pixels, int width, int height, int channels,
                                void **out, size_t *len, tfc_error *err)
{
    *out = NULL;
    *len = 0;
    if (!png_params_ok(width, height, channels, 8))
        return tfc_error_set(err, TFC_ERR_CONFIG, "PNG encoder: bad parameters");
    png_mem mem = {0};
    tfc_status st = encode_png(NULL, &mem, "a PNG in memory", pixels, width, height, channels, 8,
                               err);
    if (st) {
        free(mem.data);
        return st;
    }
    *out = mem.data;
    *len = mem.len;
    return TFC_OK;
}

tfc_status tfc_image_write_jpeg(const char *path, const uint8_t *pixels, int width, int height,
                                int channels, int quality, tfc_error *err)
{
    if ((channels != 1 && channels != 3) || width < 1 || height < 1 || quality < 1 ||
        quality > 100)
        return tfc_error_set(err, TFC_ERR_CONFIG, "%s: bad JPEG parameters", path);
    FILE *f = fopen(path, "wb");
    if (!f) return tfc_error_set(err, TFC_ERR_IO, "cannot write %s: %m", path);
    struct jpeg_compress_struct cj;
    jpeg_ctx c;
    memset(&cj, 0, sizeof cj);
    cj.err = jpeg_std_error(&c.mgr);
    c.mgr.error_exit = jpeg_exit;
    if (setjmp(c.jb)) {
        jpeg_destroy_compress(&cj);
        fclose(f);
        return tfc_error_set(err, TFC_ERR_IO, "cannot write %s: %s", path, c.msg);
    }
    jpeg_create_compress(&cj);
    jpeg_stdio_dest(&cj, f);
    cj.image_width = (JDIMENSION)width;
    cj.image_height = (JDIMENSION)height;
    cj.input_components = channels;
    cj.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&cj);
    jpeg_set_quality(&cj, quality, TRUE);
    jpeg_start_compress(&cj, TRUE);
    while (cj.next_scanline < cj.image_height) {
        JSAMPROW row = (JSAMPROW)pixels + (size_t)cj.next_scanline * (size_t)(width * channels);
        jpeg_write_scanlines(&cj, &row, 1);
    }
    jpeg_finish_compress(&cj);
    jpeg_destroy_compress(&cj);
    if (fclose(f) != 0) return tfc_error_set(err, TFC_ERR_IO, "cannot write %s: %m", path);
    return TFC_OK;
}
