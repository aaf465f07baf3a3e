/* WAV (RIFF WAVE) decoding for the audio source: the `fmt ` and `data` chunks of a RIFF file,
 * other chunks (LIST, fact, cue, ...) skipped; PCM of 8 (unsigned), 16, 24 and 32 bits, IEEE
 * floats of 32 and 64 bits, and WAVE_FORMAT_EXTENSIBLE holding either. Samples become floats
 * as tf.audio.decode_wav makes them of 16-bit files, v / 2^(bits - 1) (8-bit: (v - 128) / 128),
 * interleaved frames into a (frames, channels) tensor. */
#include <stdlib.h>
#include <string.h>

#include "data/data.h"

#define WAV_MAX_CHANNELS 256

enum { FORMAT_PCM = 1, FORMAT_FLOAT = 3, FORMAT_EXTENSIBLE = 0xFFFE };

static uint32_t u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static unsigned u16(const unsigned char *p) { return (unsigned)p[0] | (unsigned)p[1] << 8; }

/* Sample k of the data, bits wide, as a float */
static float sample(const unsigned char *p, int bits, int is_float)
{
    if (is_float) {
        if (bits == 32) {
            uint32_t v = u32(p);
            float f;
            memcpy(&f, &v, 4);
            return f;
        }
        uint64_t v = (uint64_t)u32(p) | (uint64_t)u32(p + 4) << 32;
        double d;
        memcpy(&d, &v, 8);
        return (float)d;
    }
    switch (bits) {
    case 8: return ((float)p[0] - 128.0f) / 128.0f;
    case 16: return (float)(int16_t)u16(p) / 32768.0f;
    case 24: {
        int32_t v = (int32_t)((uint32_t)p[0] << 8 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 24);
        return (float)(v >> 8) / 8388608.0f;
    }
    default: return (float)((double)(int32_t)u32(p) / 2147483648.0);
    }
}

tfc_status tfc_wav_decode(const void *buf, size_t len, const char *name, int channels,
                          int64_t frames, tfc_wav_info *info, tfc_tensor *out, tfc_error *err)
{
    const unsigned char *b = buf;
    memset(out, 0, sizeof *out);
    if (len < 12 || memcmp(b, "RIFF", 4) || memcmp(b + 8, "WAVE", 4))
        return tfc_error_set(err, TFC_ERR_DATA, "%s: not a WAV file (no RIFF WAVE header)%s",
                             name, len >= 4 && !memcmp(b, "RF64", 4)
                                       ? "; RF64 (WAV over 4 GiB) is not supported" : "");
    const unsigned char *fmt = NULL, *data = NULL;
    size_t fmt_len = 0, data_len = 0;
    for (size_t at = 12; at + 8 <= len && !data;) {
        const size_t size = u32(b + at + 4), body = at + 8;
        if (size > len - body) {
            if (!memcmp(b + at, "data", 4))
                return tfc_error_set(err, TFC_ERR_DATA, "%s: its data chunk says %zu bytes, "
                                     "but %zu follow it (a truncated file)", name, size,
                                     len - body);
            break;
        }
        if (!memcmp(b + at, "fmt ", 4)) fmt = b + body, fmt_len = size;
        else if (!memcmp(b + at, "data", 4)) data = b + body, data_len = size;
        at = body + size + (size & 1); /* chunks are padded to even sizes */
    }
    if (!fmt || fmt_len < 16)
        return tfc_error_set(err, TFC_ERR_DATA, "%s: no format chunk (`fmt `) before its data",
                             name);
    if (!data) return tfc_error_set(err, TFC_ERR_DATA, "%s: no data chunk", name);
    unsigned format = u16(fmt);
    const unsigned nch = u16(fmt + 2), align = u16(fmt + 12), bits = u16(fmt + 14);
    const uint32_t rate = u32(fmt + 4);
    if (format == FORMAT_EXTENSIBLE) {
        if (fmt_len < 40)
            return tfc_error_set(err, TFC_ERR_DATA, "%s: an extensible format chunk of %zu "
                                 "bytes (40 expected)", name, fmt_len);
        format = u16(fmt + 24); /* the sub-format GUID's first two bytes */
    }
    const int is_float = format == FORMAT_FLOAT;
    if (format != FORMAT_PCM && !is_float)
        return tfc_error_set(err, TFC_ERR_DATA, "%s: audio format %u is not supported (PCM, 1, "
                             "and IEEE float, 3, are)", name, format);
    if (is_float ? bits != 32 && bits != 64 : bits != 8 && bits != 16 && bits != 24 && bits != 32)
        return tfc_error_set(err, TFC_ERR_DATA, "%s: %u-bit %s samples are not supported (%s)",
                             name, bits, is_float ? "float" : "PCM",
                             is_float ? "32 or 64" : "8, 16, 24 or 32");
    if (nch < 1 || nch > WAV_MAX_CHANNELS)
        return tfc_error_set(err, TFC_ERR_DATA, "%s: %u channels (1 to %d are read)", name, nch,
                             WAV_MAX_CHANNELS);
    if (align != nch * (bits / 8))
        return tfc_error_set(err, TFC_ERR_DATA, "%s: block align %u is not %u channels of %u "
                             "bytes", name, align, nch, bits / 8);
    if (data_len % align)
        return tfc_error_set(err, TFC_ERR_DATA, "%s: a data chunk of %zu bytes is not whole "
                             "frames of %u", name, data_len, align);
    const int64_t have = (int64_t)(data_len / align), t = frames >= 0 ? frames : have;
    const int c = channels > 0 ? channels : (int)nch;
    if (info) *info = (tfc_wav_info){.rate = rate, .channels = (int)nch, .frames = have};
    float *v = malloc((size_t)(t ? t : 1) * (size_t)c * sizeof *v);
    if (!v) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    const int width = (int)bits / 8;
    for (int64_t f = 0; f < t; f++)
        for (int k = 0; k < c; k++) /* desired_channels: the first, or the last repeated */
            v[f * c + k] = f < have ? sample(data + (size_t)f * align +
                                             (size_t)(k < (int)nch ? k : (int)nch - 1) * width,
                                             (int)bits, is_float)
                                    : 0.0f;
    *out = (tfc_tensor){TFC_F32, {.ndim = 2, .dim = {t, c}}, v, -1};
    return TFC_OK;
}
