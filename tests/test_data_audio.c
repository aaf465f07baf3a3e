/* The audio source (src/data/audio.c) and its WAV decoder (src/data/wav.c): Keras 3's
 * audio_dataset_from_directory on tests/ref/audio_source (class folders of 16-bit files,
 * mono and stereo, chunks before the data, an upper-case .WAV; each file at its length and
 * cropped or padded to output_sequence_length) bit for bit; every sample format the decoder
 * reads (8-bit unsigned, 24 and 32-bit PCM, 32 and 64-bit floats, WAVE_FORMAT_EXTENSIBLE,
 * an odd chunk's pad byte) against the values written; decode_wav's channel rule; files:
 * without labels through padded_batch; the sampling_rate check; bad files named, or skipped
 * and counted; configuration errors; tfc-predict on WAV files as on their samples; tfc-train
 * learning tones from class folders, at a fixed length and a variable one. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/data.h"
#include "gradcheck.h"
#include "tfc.h"
#include "testutil.h"

static tfc_doc *doc; /* the last open_yaml's document (its pipeline may point into it) */

static void free_doc(void)
{
    tfc_doc_free(doc);
    doc = NULL;
}

/* The split `yaml` ({source: ..., pipeline: [...]}) as data.train, its paths under base */
static tfc_pipeline *open_yaml(const char *yaml, const char *base, tfc_error *err)
{
    static int registered;
    if (!registered++) atexit(free_doc);
    free_doc();
    tfc_data_options o = {.key = "data.train", .base_dir = base, .seed = 3};
    tfc_error_clear(err);
    doc = tfc_doc_load_string(yaml, strlen(yaml), "s.yaml", err);
    return doc ? tfc_pipeline_from_config(tfc_doc_root(doc), &o, err) : NULL;
}

/* A WAV file: format tag, channels, rate, bits, the interleaved sample bytes; `extra` (may be
 * NULL) an odd-sized chunk before the data; `extensible` writes WAVE_FORMAT_EXTENSIBLE with
 * `format` as its sub-format. Returns the bytes (malloc'd) and their count. */
static unsigned char *wav_bytes(int format, int ch, int rate, int bits, const void *samples,
                                size_t nbytes, int extensible, int extra, size_t *len)
{
    const size_t fmt_len = extensible ? 40 : 16, extra_len = extra ? 3 + 1 : 0;
    *len = 12 + 8 + fmt_len + (extra ? 8 + extra_len : 0) + 8 + nbytes;
    unsigned char *b = calloc(1, *len), *p = b;
#define PUT32(v) (p[0] = (unsigned char)(v), p[1] = (unsigned char)((v) >> 8),                  \
                  p[2] = (unsigned char)((v) >> 16), p[3] = (unsigned char)((v) >> 24), p += 4)
#define PUT16(v) (p[0] = (unsigned char)(v), p[1] = (unsigned char)((v) >> 8), p += 2)
    memcpy(p, "RIFF", 4), p += 4;
    PUT32((uint32_t)(*len - 8));
    memcpy(p, "WAVEfmt ", 8), p += 8;
    PUT32((uint32_t)fmt_len);
    PUT16(extensible ? 0xFFFE : format);
    PUT16(ch);
    PUT32((uint32_t)rate);
    PUT32((uint32_t)(rate * ch * bits / 8));
    PUT16(ch * bits / 8);
    PUT16(bits);
    if (extensible) {
        PUT16(22);
        PUT16(bits);
        PUT32(0);
        PUT16(format); /* the sub-format GUID's first two bytes, then the rest of it */
        memcpy(p, "\x00\x00\x00\x00\x10\x00\x80\x00\x00\xAA\x00\x38\x9B\x71", 14), p += 14;
    }
    if (extra) {
        memcpy(p, "note", 4), p += 4;
        PUT32(3);
        memcpy(p, "abc", 3), p += 4; /* and RIFF's pad byte */
    }
    memcpy(p, "data", 4), p += 4;
    PUT32((uint32_t)nbytes);
    memcpy(p, samples, nbytes);
#undef PUT32
#undef PUT16
    return b;
}

static int decode(const unsigned char *b, size_t len, int ch, int64_t frames, tfc_tensor *t,
                  tfc_error *err)
{
    tfc_error_clear(err);
    return tfc_wav_decode(b, len, "x.wav", ch, frames, NULL, t, err);
}

/* Keras's own output on the fixture folder, element by element */
static void test_keras_parity(void)
{
    static const char *const yaml[2] = {
        "source: {type: audio, directory: tests/ref/audio_source/wavs}\n",
        "source: {type: audio, directory: tests/ref/audio_source/wavs, "
        "output_sequence_length: 50}\n"};
    static const char *const prefix[2] = {"full", "len50"};
    tfc_tensor labels;
    tfc_error err;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_npy_read("tests/ref/audio_source/labels.npy", &labels, &err),
                          TFC_OK);
    for (int v = 0; v < 2; v++) {
        tfc_pipeline *p = open_yaml(yaml[v], ".", &err);
        if (!p) printf("\n%s", err.text);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        int nc;
        const char *const *names = tfc_pipeline_class_names(p, &nc);
        CU_ASSERT(nc == 3 && !strcmp(names[0], "bird") && !strcmp(names[2], "dog"));
        int k = 0;
        for (;; k++) {
            tfc_batch b;
            CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
            if (b.end) break;
            char path[128];
            snprintf(path, sizeof path, "tests/ref/audio_source/%s_%d.npy", prefix[v], k);
            tfc_tensor want;
            CU_ASSERT_EQUAL_FATAL(tfc_npy_read(path, &want, &err), TFC_OK);
            int same = b.features.dtype == TFC_F32 && tfc_shape_equal(&b.features.shape,
                                                                       &want.shape) &&
                       !memcmp(b.features.data, want.data,
                               (size_t)tfc_shape_numel(&want.shape) * 4);
            if (!same) printf("\n%s differs", path);
            CU_ASSERT(same);
            CU_ASSERT_EQUAL(*(const int32_t *)b.labels.data, ((const int32_t *)labels.data)[k]);
            free(want.data);
        }
        CU_ASSERT_EQUAL(k, 8); /* b.WAV in, notes.txt out; dog/a, dog/a-b, dog/a/c in order */
        tfc_pipeline_free(p);
    }
    free(labels.data);
    /* classes: picks and orders the folders, as Keras's class_names ([dog, bird]: dog's 4
     * files as class 0, then bird's 2) */
    tfc_pipeline *p = open_yaml("source: {type: audio, directory: tests/ref/audio_source/wavs, "
                                "classes: [dog, bird]}\n", ".", &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_EQUAL(tfc_pipeline_source_size(p), 6);
    tfc_batch b;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT(*(const int32_t *)b.labels.data == 0 && b.features.shape.dim[0] == 45);
    tfc_pipeline_free(p);
}

/* Every sample format against the values written */
static void test_formats(void)
{
    tfc_error err;
    tfc_tensor t;
    size_t len;
    const uint8_t u8[3] = {0, 128, 255};
    unsigned char *b = wav_bytes(1, 1, 8000, 8, u8, 3, 0, 0, &len);
    CU_ASSERT_EQUAL_FATAL(decode(b, len, 0, -1, &t, &err), TFC_OK);
    const float *f = t.data;
    CU_ASSERT(t.shape.ndim == 2 && t.shape.dim[0] == 3 && t.shape.dim[1] == 1);
    CU_ASSERT(f[0] == -1.0f && f[1] == 0.0f && f[2] == 127.0f / 128.0f);
    free(t.data), free(b);
    /* 24-bit: 0x7FFFFF, -0x800000, 1 */
    const unsigned char s24[9] = {0xFF, 0xFF, 0x7F, 0x00, 0x00, 0x80, 0x01, 0x00, 0x00};
    b = wav_bytes(1, 1, 8000, 24, s24, 9, 0, 0, &len);
    CU_ASSERT_EQUAL_FATAL(decode(b, len, 0, -1, &t, &err), TFC_OK);
    f = t.data;
    CU_ASSERT(f[0] == (float)(8388607.0 / 8388608.0) && f[1] == -1.0f &&
              f[2] == 1.0f / 8388608.0f);
    free(t.data), free(b);
    const int32_t s32[2] = {INT32_MIN, 1 << 30};
    b = wav_bytes(1, 1, 8000, 32, s32, 8, 0, 0, &len);
    CU_ASSERT_EQUAL_FATAL(decode(b, len, 0, -1, &t, &err), TFC_OK);
    f = t.data;
    CU_ASSERT(f[0] == -1.0f && f[1] == 0.5f);
    free(t.data), free(b);
    const float f32[4] = {0.25f, -2.5f, 1e-3f, 0.0f};
    b = wav_bytes(3, 2, 8000, 32, f32, 16, 0, 0, &len);
    CU_ASSERT_EQUAL_FATAL(decode(b, len, 0, -1, &t, &err), TFC_OK);
    CU_ASSERT(t.shape.dim[0] == 2 && t.shape.dim[1] == 2 && !memcmp(t.data, f32, 16));
    free(t.data), free(b);
    const double f64[2] = {0.125, -0.75};
    b = wav_bytes(3, 1, 8000, 64, f64, 16, 0, 0, &len);
    CU_ASSERT_EQUAL_FATAL(decode(b, len, 0, -1, &t, &err), TFC_OK);
    f = t.data;
    CU_ASSERT(f[0] == 0.125f && f[1] == -0.75f);
    free(t.data), free(b);
    /* WAVE_FORMAT_EXTENSIBLE of 16-bit PCM, after an odd chunk and its pad byte */
    const int16_t s16[4] = {16384, -16384, 1, -1};
    b = wav_bytes(1, 2, 16000, 16, s16, 8, 1, 1, &len);
    tfc_wav_info info;
    tfc_error_clear(&err);
    CU_ASSERT_EQUAL_FATAL(tfc_wav_decode(b, len, "x.wav", 0, -1, &info, &t, &err), TFC_OK);
    f = t.data;
    CU_ASSERT(info.rate == 16000 && info.channels == 2 && info.frames == 2);
    CU_ASSERT(f[0] == 0.5f && f[1] == -0.5f && f[2] == 1.0f / 32768 && f[3] == -1.0f / 32768);
    free(t.data);
    /* decode_wav's desired_channels and desired_samples: the first channel; the last
     * repeated; cropped; zero-padded */
    CU_ASSERT_EQUAL_FATAL(decode(b, len, 1, -1, &t, &err), TFC_OK);
    f = t.data;
    CU_ASSERT(t.shape.dim[1] == 1 && f[0] == 0.5f && f[1] == 1.0f / 32768);
    free(t.data);
    CU_ASSERT_EQUAL_FATAL(decode(b, len, 3, 1, &t, &err), TFC_OK);
    f = t.data;
    CU_ASSERT(t.shape.dim[0] == 1 && t.shape.dim[1] == 3 && f[0] == 0.5f && f[1] == -0.5f &&
              f[2] == -0.5f);
    free(t.data);
    CU_ASSERT_EQUAL_FATAL(decode(b, len, 0, 4, &t, &err), TFC_OK);
    f = t.data;
    CU_ASSERT(t.shape.dim[0] == 4 && f[3] == -1.0f / 32768 && f[4] == 0 && f[7] == 0);
    free(t.data), free(b);
}

/* Bad files: each an error naming the file and what is wrong */
static void test_bad_files(void)
{
    static const struct {
        int format, ch, bits, extensible;
        size_t cut; /* bytes cut off the end */
        const char *want;
    } cases[] = {
        {6, 1, 8, 0, 0, "x.wav: audio format 6 is not supported (PCM, 1, and IEEE float, 3"},
        {1, 1, 12, 0, 0, "x.wav: 12-bit PCM samples are not supported (8, 16, 24 or 32)"},
        {3, 1, 16, 0, 0, "x.wav: 16-bit float samples are not supported (32 or 64)"},
        {1, 0, 16, 0, 0, "x.wav: 0 channels (1 to 256 are read)"},
        {1, 1, 16, 0, 2, "x.wav: its data chunk says 8 bytes, but 6 follow it (a truncated "
                         "file)"},
        {7, 1, 16, 1, 0, "x.wav: audio format 7 is not supported"},
    };
    const unsigned char zeros[8] = {0};
    tfc_error err;
    tfc_tensor t;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t len;
        unsigned char *b = wav_bytes(cases[i].format, cases[i].ch, 8000, cases[i].bits, zeros,
                                     8, cases[i].extensible, 0, &len);
        CU_ASSERT_EQUAL(decode(b, len - cases[i].cut, 0, -1, &t, &err), TFC_ERR_DATA);
        if (!strstr(err.msg, cases[i].want)) printf("\ncase %zu: %s", i, err.msg);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, cases[i].want));
        free(b);
    }
    CU_ASSERT_EQUAL(decode((const unsigned char *)"RIFF\0\0\0\0WAVX", 12, 0, -1, &t, &err),
                    TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "x.wav: not a WAV file (no RIFF WAVE header)"));
    CU_ASSERT_EQUAL(decode((const unsigned char *)"RIFF\4\0\0\0WAVEdata\0\0\0\0", 20, 0, -1, &t,
                           &err), TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "x.wav: no format chunk (`fmt `) before its data"));
    size_t len;
    unsigned char *b = wav_bytes(1, 2, 8000, 16, zeros, 6, 0, 0, &len); /* 1.5 frames */
    CU_ASSERT_EQUAL(decode(b, len, 0, -1, &t, &err), TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "x.wav: a data chunk of 6 bytes is not whole frames "
                                           "of 4"));
    free(b);
}

/* files: without labels, at their lengths, through padded_batch; the sampling_rate check
 * names the file; a bad file skipped and counted; configuration errors */
static void test_source(void)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/au", tfc_test_tmpdir());
    mkdir(dir, 0777);
    const int16_t s16[6] = {100, 200, 300, 400, 500, 600};
    for (int k = 0; k < 3; k++) {
        size_t len;
        unsigned char *b = wav_bytes(1, 1, k == 2 ? 16000 : 8000, 16, s16, (size_t)(2 + 2 * k) * 2,
                                     0, 0, &len);
        char name[64];
        snprintf(name, sizeof name, "au/%c.wav", 'a' + k);
        tfc_test_write(name, b, (long)len);
        free(b);
    }
    tfc_test_write("au/bad.wav", "RIFF", 4);
    tfc_error err;
    tfc_pipeline *p = open_yaml("source: {type: audio, files: \"au/[ab].wav\"}\n"
                                "pipeline: [{padded_batch: {batch_size: 2}}]\n",
                                tfc_test_tmpdir(), &err);
    if (!p) printf("\n%s", err.text);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    tfc_batch b;
    CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
    CU_ASSERT(b.features.shape.ndim == 3 && b.features.shape.dim[0] == 2 &&
              b.features.shape.dim[1] == 4 && b.features.shape.dim[2] == 1);
    CU_ASSERT(b.labels.data == NULL && b.lengths.data != NULL);
    const float *f = b.features.data;
    CU_ASSERT(f[0] == 100.0f / 32768 && f[2] == 0.0f && f[7] == 400.0f / 32768);
    const int32_t *lengths = b.lengths.data;
    CU_ASSERT(lengths[0] == 2 && lengths[1] == 4);
    tfc_pipeline_free(p);
    /* c.wav at 16000 Hz against sampling_rate: 8000 */
    p = open_yaml("source: {type: audio, files: \"au/[abc].wav\", sampling_rate: 8000}\n",
                  tfc_test_tmpdir(), &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    tfc_status st = TFC_OK;
    for (int k = 0; k < 4 && !st; k++) st = tfc_pipeline_next(p, &b, &err);
    CU_ASSERT_EQUAL(st, TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "au/c.wav: sampled at 16000 Hz, not the source's "
                                            "sampling_rate 8000 (tfc does not resample)"));
    tfc_pipeline_free(p);
    /* the truncated file: an error naming it, or skipped with on_error: skip */
    p = open_yaml("source: {type: audio, files: \"au/*.wav\"}\n", tfc_test_tmpdir(), &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    for (st = TFC_OK; !st;) {
        st = tfc_pipeline_next(p, &b, &err);
        if (!st && b.end) break;
    }
    CU_ASSERT_EQUAL(st, TFC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, "au/bad.wav: not a WAV file"));
    tfc_pipeline_free(p);
    p = open_yaml("source: {type: audio, files: \"au/*.wav\", on_error: skip}\n",
                  tfc_test_tmpdir(), &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    int n = 0;
    for (;; n++) {
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        if (b.end) break;
    }
    CU_ASSERT_EQUAL(n, 3);
    tfc_pipeline_free(p);
    /* split: the train and test parts partition the files, in order */
    int sizes[2];
    for (int k = 0; k < 2; k++) {
        p = open_yaml(k ? "source: {type: audio, files: \"au/[abc].wav\", split: {every: 3, "
                          "part: test}}\n"
                        : "source: {type: audio, files: \"au/[abc].wav\", split: {every: 3, "
                          "part: train}}\n",
                      tfc_test_tmpdir(), &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        sizes[k] = (int)tfc_pipeline_source_size(p);
        CU_ASSERT_EQUAL_FATAL(tfc_pipeline_next(p, &b, &err), TFC_OK);
        CU_ASSERT_EQUAL(b.features.shape.dim[0], k ? 2 : 4); /* a.wav test; b.wav train */
        tfc_pipeline_free(p);
    }
    CU_ASSERT(sizes[0] == 2 && sizes[1] == 1);
    static const struct {
        const char *yaml, *want;
    } bad[] = {
        {"source: {type: audio, directory: au, files: a.wav}\n",
         "data.train.source: give exactly one of `directory` (class folders) and `files`"},
        {"source: {type: audio, files: a.wav, output_sequence_length: 0}\n",
         "output_sequence_length: at least 1 step"},
        {"source: {type: audio, directory: au, exclude: a.wav}\n", "exclude: needs `files`"},
        {"source: {type: audio, directory: au}\n", "au: no class sub-folders"},
        {"source: {type: audio, files: au/none*.wav}\n", "data.train.source.files"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        p = open_yaml(bad[i].yaml, tfc_test_tmpdir(), &err);
        CU_ASSERT_PTR_NULL(p);
        if (!strstr(err.text, bad[i].want)) printf("\ncase %zu: %s", i, err.text);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.text, bad[i].want));
        tfc_pipeline_free(p);
    }
}

/* Random weights for `model` (a file in the scratch folder) into `weights` */
static void random_weights(const char *model, const char *weights)
{
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_load(model, &err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    tfc_backend *be = tfc_backend_open("cpu", 1, &err);
    CU_ASSERT_EQUAL_FATAL(tfc_model_bind(m, be, 1, &err), TFC_OK);
    for (int i = 0; i < tfc_model_nlayers(m); i++) {
        tfc_layer *l = tfc_model_layer(m, i);
        for (int p = 0; p < l->nparams; p++) {
            float *v = malloc((size_t)l->params[p].numel * 4);
            tfc_test_fill(v, l->params[p].numel, -1, 1, (unsigned)(i * 8 + p + 1));
            tfc_model_param_upload(m, &l->params[p], v);
            free(v);
        }
    }
    CU_ASSERT_EQUAL(tfc_model_save_weights(m, weights, &err), TFC_OK);
    tfc_model_free(m);
    tfc_backend_free(be);
}

/* tfc-predict on WAV files equals tfc-predict on their samples as an .npy array: cropped or
 * zero-padded to the input's steps, each file's first channel (a mono model, stereo files);
 * for a model of variable length, padded to the longest file; a file past max_length and a
 * model input of another shape are errors naming them. */
static void test_predict(void)
{
    const char *bin = tfc_test_bin("tfc-predict");
    if (!bin) return;
    const int16_t s16[12] = {3000, -3000, 1200, 800, -32768, 32767, 5, 6, 7, 8, 9, 10};
    for (int k = 0; k < 2; k++) { /* 6 and 3 stereo frames */
        size_t len;
        unsigned char *b = wav_bytes(1, 2, 8000, 16, s16, k ? 12 : 24, 0, 0, &len);
        tfc_test_write(k ? "p1.wav" : "p0.wav", b, (long)len);
        free(b);
    }
    static const char *const models[2] = {
        "input: {shape: [4, 1]}\nlayers:\n  - Flatten\n  - Dense: {units: 3, activation: "
        "softmax}\n",
        "input: {shape: [null, 1], max_length: 8}\nlayers:\n  - GRU: 3\n  - Dense: {units: 3, "
        "activation: softmax}\n"};
    /* the samples each model sees: file 0's first channel cropped to 4 or whole, file 1's
     * padded with zeros to 4, or to file 0's 6 */
    static const float want[2][2][6] = {
        {{3000, 1200, -32768, 5}, {3000, 1200, -32768, 0}},
        {{3000, 1200, -32768, 5, 7, 9}, {3000, 1200, -32768, 0, 0, 0}}};
    for (int v = 0; v < 2; v++) {
        char model[1024], weights[1024], cmd[8192];
        snprintf(model, sizeof model, "%s", tfc_test_write("pm.yaml", models[v], -1));
        snprintf(weights, sizeof weights, "%s", tfc_test_path("pm.safetensors"));
        random_weights(model, weights);
        const int steps = v ? 6 : 4;
        float x[12];
        for (int e = 0; e < 2; e++)
            for (int t = 0; t < steps; t++) x[e * steps + t] = want[v][e][t] / 32768.0f;
        tfc_tensor xt = {TFC_F32, {3, {2, steps, 1}}, x, -1};
        tfc_error err;
        tfc_error_clear(&err);
        CU_ASSERT_EQUAL_FATAL(tfc_npy_write(tfc_test_path("px.npy"), &xt, &err), TFC_OK);
        const char *d = tfc_test_tmpdir();
        snprintf(cmd, sizeof cmd, "%s/tfc-predict %s --weights %s --input %s/p0.wav %s/p1.wav "
                 "--output %s/y_wav.npy --device cpu >/dev/null && %s/tfc-predict %s --weights %s "
                 "--input %s/px.npy --output %s/y_npy.npy --device cpu >/dev/null", bin, model,
                 weights, d, d, d, bin, model, weights, d, d);
        CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
        tfc_tensor a, b;
        CU_ASSERT_EQUAL_FATAL(tfc_npy_read(tfc_test_path("y_wav.npy"), &a, &err), TFC_OK);
        CU_ASSERT_EQUAL_FATAL(tfc_npy_read(tfc_test_path("y_npy.npy"), &b, &err), TFC_OK);
        CU_ASSERT(tfc_shape_equal(&a.shape, &b.shape) && a.shape.dim[0] == 2 &&
                  !memcmp(a.data, b.data, (size_t)tfc_shape_numel(&a.shape) * 4));
        free(a.data), free(b.data);
    }
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s/tfc-predict %s/pm.yaml --weights %s/pm.safetensors "
             "--input %s/p0.wav --set input.max_length=5 --device cpu", bin,
             tfc_test_tmpdir(), tfc_test_tmpdir(), tfc_test_tmpdir());
    tfc_test_sh_expect(1, cmd, "p0.wav: 6 steps, more than the model's input.max_length 5",
                       NULL);
    size_t len;
    unsigned char *b = wav_bytes(1, 1, 8000, 16, s16, 0, 0, 0, &len); /* no frames */
    tfc_test_write("p_empty.wav", b, (long)len);
    free(b);
    snprintf(cmd, sizeof cmd, "%s/tfc-predict %s/pm.yaml --weights %s/pm.safetensors "
             "--input %s/p_empty.wav --device cpu", bin, tfc_test_tmpdir(), tfc_test_tmpdir(),
             tfc_test_tmpdir());
    tfc_test_sh_expect(1, cmd, "p_empty.wav: no samples (a model of variable length runs at "
                       "least one step)", NULL);
    tfc_test_write("pimg.yaml", "input: {shape: [4, 4, 1]}\nlayers: [Flatten, Dense: 2]\n", -1);
    snprintf(cmd, sizeof cmd, "%s/tfc-predict %s/pimg.yaml --weights %s/pm.safetensors "
             "--input %s/p0.wav --device cpu", bin, tfc_test_tmpdir(), tfc_test_tmpdir(),
             tfc_test_tmpdir());
    tfc_test_sh_expect(2, cmd, "WAV inputs need a float model input of shape (steps, "
                       "channels)", NULL);
}

/* End to end: tfc-train learns low from high tones (300 and 1200 Hz, random amplitude,
 * phase and detuning, a little noise) read from class folders of WAV files, through
 * STFTSpectrogram, to a test accuracy of at least 0.9; a model of variable length does the
 * same on files of 400 to 800 samples through padded_batch. */
static void test_train(void)
{
    const char *bin = tfc_test_bin("tfc-train");
    if (!bin) return;
    static const char *const splits[2] = {"train", "test"}, *const names[2] = {"low", "high"};
    unsigned seed = 5;
    for (int sp = 0; sp < 2; sp++)
        for (int c = 0; c < 2; c++) {
            char dir[256];
            snprintf(dir, sizeof dir, "%s/tones_%s", tfc_test_tmpdir(), splits[sp]);
            mkdir(dir, 0777);
            snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/%s", names[c]);
            mkdir(dir, 0777);
            for (int i = 0; i < (sp ? 10 : 24); i++) {
                int16_t x[800];
                const int n = 400 + (int)(rand_r(&seed) % 401);
                const double f0 = (c ? 1200.0 : 300.0) * (0.9 + 0.2 * rand_r(&seed) / RAND_MAX),
                             amp = 0.2 + 0.6 * rand_r(&seed) / RAND_MAX,
                             phase = 6.28 * rand_r(&seed) / RAND_MAX;
                for (int t = 0; t < n; t++)
                    x[t] = (int16_t)(32767 * (amp * sin(2 * M_PI * f0 * t / 8000 + phase) +
                                              0.05 * (2.0 * rand_r(&seed) / RAND_MAX - 1)));
                size_t len;
                unsigned char *b = wav_bytes(1, 1, 8000, 16, x, (size_t)n * 2, 0, 0, &len);
                char name[128];
                snprintf(name, sizeof name, "tones_%s/%s/%d.wav", splits[sp], names[c], i);
                tfc_test_write(name, b, (long)len);
                free(b);
            }
        }
    static const char *const models[2] = {
        "input: {shape: [800, 1]}\nlayers:\n"
        "  - STFTSpectrogram: {mode: log, frame_length: 64, frame_step: 32}\n"
        "  - GlobalAveragePooling1D\n  - Dense: {units: 2, activation: softmax}\n"
        "loss: sparse_categorical_crossentropy\nmetrics: [accuracy]\n",
        "input: {shape: [null, 1], max_length: 800}\nlayers:\n"
        "  - Conv1D: {filters: 8, kernel_size: 9, activation: relu}\n"
        "  - GlobalMaxPooling1D\n  - Dense: {units: 2, activation: softmax}\n"
        "loss: sparse_categorical_crossentropy\nmetrics: [accuracy]\n"};
    static const char *const pipes[2][2] = {
        {"{type: audio, directory: tones_train, output_sequence_length: 800, "
         "sampling_rate: 8000}\n    pipeline: [shuffle: 48, repeat, batch: 8]",
         "{type: audio, directory: tones_test, output_sequence_length: 800}\n"
         "    pipeline: [batch: 10]"},
        {"{type: audio, directory: tones_train}\n    pipeline: [shuffle: 48, repeat, "
         "padded_batch: 8]",
         "{type: audio, directory: tones_test}\n    pipeline: [padded_batch: 10]"}};
    for (int v = 0; v < 2; v++) {
        char solver[2048], cmd[4096];
        tfc_test_write("tones.yaml", models[v], -1);
        snprintf(solver, sizeof solver, "model: tones.yaml\noptimizer: {type: adam, "
                 "learning_rate: 0.01}\nmax_iter: 100\ndisplay: 50\ntest_interval: 100\n"
                 "seed: 1\ndata:\n  train:\n    source: %s\n  test:\n    source: %s\n",
                 pipes[v][0], pipes[v][1]);
        tfc_test_write("tones_solver.yaml", solver, -1);
        snprintf(cmd, sizeof cmd, "cd %s && %s/tfc-train tones_solver.yaml --overwrite 2>&1",
                 tfc_test_tmpdir(), bin);
        char *out = NULL;
        CU_ASSERT_EQUAL(tfc_test_sh(cmd, &out), 0);
        const char *at = out ? strstr(out, "done: ") : NULL;
        at = at ? strstr(at, "accuracy ") : NULL;
        const double acc = at ? atof(at + 9) : 0;
        if (acc < 0.9) printf("\nvariant %d:\n%s", v, out ? out : "");
        CU_ASSERT(acc >= 0.9);
        free(out);
    }
}

TFC_TEST_MAIN("data_audio", {"keras_parity", test_keras_parity}, {"formats", test_formats},
              {"bad_files", test_bad_files}, {"source", test_source},
              {"predict", test_predict}, {"train", test_train})
