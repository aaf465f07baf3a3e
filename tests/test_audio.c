/* STFTSpectrogram and MelSpectrogram (src/layers/spectrogram.c, the stft ops in
 * cpu/cpu_stft.c): Keras 3 parity of outputs, the input's and the kernels' gradients
 * (tests/ref/keras_audio.py), the kernels tfc fills at initialisation against Keras's, the
 * argument errors, the GPU's refusal without the ops and the ONNX export (both layers written). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/onnx.h"
#include "core/safetensors.h"
#include "cpu/cpu.h"
#include "graph/model.h"
#include "gradcheck.h"
#include "kerasref.h"
#include "layers/layer.h"
#include "testutil.h"

static const char *const cases[] = {"stft_log",  "stft_magnitude", "stft_psd",  "stft_real",
                                    "stft_imag", "stft_stft",      "stft_angle", "mel_db",
                                    "mel_power", "mel_floor",      NULL};

/* Keras 3 parity: every mode and layout of STFTSpectrogram (log with a Conv1D head,
 * magnitude with same padding, a periodic hamming window and spectrum scaling, psd with an odd
 * fft_length and expand_dims, real and stft channels first, imag without a window, angle),
 * MelSpectrogram in decibels, as powers with a shorter hamming window, and with the top_db
 * floor active (its gradient going to the batch's maximum) before a Dense. */
static void test_keras_parity(void)
{
    static const tfc_keras_parity p = {.dir = "audio", .tol = 2e-4, .grad_floor = 1e-3};
    tfc_test_keras_cases(&p, cases);
}

/* The kernels tfc fills from the arguments (no weights file) are Keras's initializers.STFT. */
static void test_kernels_as_keras(void)
{
    static const char *const stft[] = {"stft_log",  "stft_magnitude", "stft_psd", "stft_real",
                                       "stft_imag", "stft_stft",      "stft_angle", NULL};
    tfc_backend *be = tfc_cpu_backend_create(1);
    for (int i = 0; stft[i]; i++) {
        tfc_st_file *f = tfc_test_fixture("audio", stft[i]);
        tfc_model *m = tfc_test_model(tfc_st_meta(f, "yaml"));
        tfc_error err;
        tfc_error_clear(&err);
        TFC_ASSERT(m && tfc_model_bind(m, be, 3, &err) == TFC_OK);
        TFC_ASSERT(tfc_model_init_weights(m, 7, &err) == TFC_OK);
        const char *path = tfc_test_path("audio_init.safetensors");
        TFC_ASSERT(tfc_model_save_weights(m, path, &err) == TFC_OK);
        tfc_st_file *g = tfc_st_open(path, &err);
        TFC_ASSERT(g != NULL);
        int kernels = 0;
        for (int k = 0; k < tfc_st_count(f); k++) {
            const char *name = tfc_st_tensor_at(f, k)->name;
            if (strncmp(name, "s/", 2)) continue;
            int64_t n = 0, n2 = 0;
            float *want = tfc_test_tensor(f, name, &n), *got = tfc_test_tensor(g, name, &n2);
            CU_ASSERT_EQUAL(n, n2);
            double worst = 0;
            for (int64_t j = 0; j < n && j < n2; j++)
                worst = fmax(worst, fabs((double)want[j] - got[j]));
            if (worst > 2e-6) fprintf(stderr, "\n%s %s: %g\n", stft[i], name, worst);
            CU_ASSERT(worst <= 2e-6);
            kernels++;
            free(want), free(got);
        }
        CU_ASSERT(kernels >= 1);
        tfc_st_close(g);
        tfc_st_close(f);
        tfc_model_free(m);
    }
    tfc_backend_free(be);
}

static void expect_error(const char *input, const char *layer, const char *what)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml, "input: {shape: %s}\nlayers:\n  - %s\n", input, layer);
    tfc_error err = tfc_test_model_error(yaml);
    if (!strstr(err.text, what)) fprintf(stderr, "\n%s: %s\n", layer, err.text);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.text, what));
}

static void test_argument_errors(void)
{
    expect_error("[64, 1]", "STFTSpectrogram: {mode: power}", "mode");
    expect_error("[64, 1]", "STFTSpectrogram: {frame_length: 16, frame_step: 17}",
                 "frame_step must be a positive integer not greater than frame_length");
    expect_error("[64, 1]", "STFTSpectrogram: {frame_length: 16, frame_step: 0}",
                 "frame_step");
    expect_error("[64, 1]", "STFTSpectrogram: {frame_length: 16, fft_length: 8}",
                 "fft_length (8) must not be less than frame_length (16)");
    expect_error("[64, 1]", "STFTSpectrogram: {frame_length: 16, window: blackman}",
                 "STFTSpectrogram.window");
    expect_error("[64, 1]", "STFTSpectrogram: {frame_length: 16, window: [1, 2]}",
                 "a custom window array is not supported");
    expect_error("[64, 1]", "STFTSpectrogram: {frame_length: 16, scaling: energy}",
                 "STFTSpectrogram.scaling");
    expect_error("[64, 1]", "STFTSpectrogram: {frame_length: 16, padding: causal}", "padding");
    expect_error("[64]", "STFTSpectrogram: {frame_length: 16}", "(time, channels)");
    expect_error("[8, 1]", "STFTSpectrogram: {frame_length: 16}", "shorter than frame_length");
    expect_error("[64, 1]", "STFTSpectrogram: {frame_length: 16, data_format: nchw}",
                 "data_format");
    expect_error("[4000]", "MelSpectrogram: {fft_length: 64, sequence_length: 65}",
                 "fft_length (64) must be greater than or equal to sequence_length (65)");
    expect_error("[4000]", "MelSpectrogram: {window: kaiser}", "MelSpectrogram.window");
    expect_error("[4000, 1]", "MelSpectrogram: {}", "(samples,)");
    /* the audio source's mono records: the hint says how to squeeze them */
    expect_error("[4000, 1]", "MelSpectrogram: {}", "hint: a mono recording's (4000, 1): put "
                 "- Reshape: [4000] before this layer");
    expect_error("[1000]", "MelSpectrogram: {}", "reflection padding");
    expect_error("[4000]", "MelSpectrogram: {num_mel_bins: 0}", "num_mel_bins");
    /* the error points at the argument's position */
    tfc_error err = tfc_test_model_error("input: {shape: [64, 1]}\nlayers:\n"
                                         "  - STFTSpectrogram: {frame_length: 16,\n"
                                         "      window: kaiser}\n");
    CU_ASSERT_EQUAL(err.line, 4);
    CU_ASSERT_EQUAL(err.col, 15);
    CU_ASSERT_STRING_EQUAL(err.key, "layers[0].STFTSpectrogram.window");
    if (err.line != 4 || err.col != 15) fprintf(stderr, "\n%s\n", err.text);
}

/* Shapes and weights as Keras's docstring examples give them (at a smaller scale): valid
 * and same padding, expand_dims; MelSpectrogram's (batch, mels, frames). Keras's weights
 * are real_kernel and imag_kernel; MelSpectrogram has none. */
static void test_shapes(void)
{
    static const struct {
        const char *input, *layer;
        int ndim;
        int64_t dim[3];
        int64_t weights;
    } c[] = {
        {"[1600, 1]", "STFTSpectrogram: {frame_length: 256, frame_step: 128, fft_length: 512}",
         2, {11, 257}, 2 * 256 * 257},
        {"[1600, 2]", "STFTSpectrogram: {frame_length: 256, frame_step: 128, fft_length: 512, "
                      "window: hamming, padding: same}", 2, {13, 514}, 2 * 256 * 257},
        {"[1600, 3]", "STFTSpectrogram: {frame_length: 256, frame_step: 128, fft_length: 512, "
                      "padding: same, expand_dims: true}", 3, {13, 257, 3}, 2 * 256 * 257},
        {"[100, 1]", "STFTSpectrogram: {frame_length: 20}", 2, {9, 17}, 2 * 20 * 17},
        {"[100, 1]", "STFTSpectrogram: {frame_length: 20, mode: real}", 2, {9, 17}, 20 * 17},
        {"[16000]", "MelSpectrogram: {num_mel_bins: 80, sampling_rate: 8000, "
                    "sequence_stride: 128, fft_length: 2048}", 2, {80, 126}, 0},
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml, "input: {shape: %s}\nlayers:\n  - %s\n", c[i].input,
                 c[i].layer);
        tfc_model *m = tfc_test_model(yaml);
        TFC_ASSERT(m != NULL);
        const tfc_layer *l = tfc_model_layer(m, tfc_model_nlayers(m) - 1);
        CU_ASSERT_EQUAL(l->out_shape.ndim, c[i].ndim);
        for (int k = 0; k < c[i].ndim; k++) CU_ASSERT_EQUAL(l->out_shape.dim[k], c[i].dim[k]);
        CU_ASSERT_EQUAL(tfc_layer_weight_count(l), c[i].weights);
        tfc_model_free(m);
    }
}

/* A backend without the stft ops (the GPU's table until make test-gpu has run them) refuses
 * either layer at bind, naming it and the op. */
static void test_missing_kernel_refused(void)
{
    tfc_backend *be = tfc_cpu_backend_create(1);
    const tfc_backend_ops *cpu_ops = be->ops;
    tfc_backend_ops lacking = *be->ops;
    lacking.stft_forward = NULL, lacking.stft_backward = NULL, lacking.stft_workspace = NULL;
    static const char *const yamls[] = {
        "input: {shape: [64, 1]}\nlayers:\n  - STFTSpectrogram: {name: s, frame_length: 16}\n",
        "input: {shape: [400]}\nlayers:\n  - MelSpectrogram: {name: s, fft_length: 64}\n"};
    for (int i = 0; i < 2; i++) {
        tfc_model *m = tfc_test_model(yamls[i]);
        TFC_ASSERT(m != NULL);
        tfc_error err;
        tfc_error_clear(&err);
        be->ops = &lacking;
        CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_ERR_CONFIG);
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "layer 's'"));
        CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "stft_workspace"));
        be->ops = cpu_ops;
        tfc_error_clear(&err);
        CU_ASSERT_EQUAL(tfc_model_bind(m, be, 2, &err), TFC_OK);
        tfc_model_free(m);
    }
    tfc_backend_free(be);
}

/* The export writes both layers (test_onnx spectrograms checks the values against
 * onnxruntime). */
static void test_onnx_export(void)
{
    static const char *const yamls[] = {
        "input: {shape: [64, 1]}\nlayers:\n  - STFTSpectrogram: {name: s, frame_length: 16}\n",
        "input: {shape: [400]}\nlayers:\n  - MelSpectrogram: {name: s, fft_length: 64}\n"};
    tfc_backend *be = tfc_cpu_backend_create(1);
    for (int i = 0; i < 2; i++) {
        tfc_model *m = tfc_test_model(yamls[i]);
        tfc_error err;
        tfc_error_clear(&err);
        TFC_ASSERT(m && tfc_model_bind_inference(m, be, 2, &err) == TFC_OK);
        const char *path = tfc_test_path("audio.onnx");
        remove(path);
        tfc_onnx_options o = {.opset = 17};
        const tfc_status st = tfc_onnx_export(m, &o, path, &err);
        if (st) fprintf(stderr, "\n%s\n", err.msg);
        CU_ASSERT_EQUAL(st, TFC_OK);
        FILE *f = fopen(path, "rb");
        CU_ASSERT_PTR_NOT_NULL(f);
        if (f) fclose(f);
        tfc_model_free(m);
    }
    tfc_backend_free(be);
}

TFC_TEST_MAIN("audio", {"keras_parity", test_keras_parity},
              {"kernels_as_keras", test_kernels_as_keras},
              {"argument_errors", test_argument_errors}, {"shapes", test_shapes},
              {"missing_kernel_refused", test_missing_kernel_refused},
              {"onnx_export", test_onnx_export})
