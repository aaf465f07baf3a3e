/* STFTSpectrogram (keras.layers.STFTSpectrogram) and MelSpectrogram
 * (keras.layers.MelSpectrogram): spectrograms of raw signals, the front end of audio models.
 *   STFTSpectrogram: each channel's frames against fixed DFT kernels, as Keras's convolution
 *     with its real_kernel and imag_kernel [frame_length, 1, bins] (bins fft_length / 2 + 1):
 *       re[t, f] = sum_u s[t step + u] real_kernel[u, 0, f],  im likewise,
 *       real_kernel[u, 0, f] = cos(-2 pi u f / N) w[u] / scale,  imag_kernel with sin,
 *     N = 2 (bins - 1), w the window (scipy's hann or hamming, symmetric unless periodic),
 *     scale sqrt(sum w^2) (density) or sum |w| (spectrum); then the mode: log, magnitude,
 *     psd, real, imag, angle or stft. The kernels are weights, trainable as Keras's are
 *     (trainable: false freezes them), filled from the arguments at initialisation.
 *   MelSpectrogram: Keras's ops.stft with center=True (the signal mirrored fft_length / 2
 *     samples each side, scipy's periodic window of sequence_length centred in fft_length),
 *     |X|^mag_exp, times linear_to_mel_weight_matrix (HTK's mel scale), in decibels with
 *     power_to_db (the floor at the batch's maximum minus top_db, as Keras's max over the
 *     whole tensor). No weights: its kernels and mel matrix are constants.
 * Both run the stft ops (TFC_BACKEND_LAYER_OPS), gradients flowing to the input. */
#include <math.h>
#include <string.h>

#include "layers/layer.h"

enum { WIN_NONE, WIN_HANN, WIN_HAMMING };
enum { SCALE_NONE, SCALE_DENSITY, SCALE_SPECTRUM };

static const char *const mode_names[] = {"log", "magnitude", "psd", "real", "imag", "angle",
                                         "stft", NULL};
static const char *const stft_padding_names[] = {"valid", "same", NULL};
/* tfc_data_format_names' values, in a list of its own: model.c refuses channels_first for
 * the layers that take that list, and this layer takes both, as Keras's */
static const char *const stft_data_formats[] = {"channels_last", "channels_first", NULL};
enum { CHANNELS_FIRST = 1 };

typedef struct stft_args {
    int mode, frame_length, frame_step, fft_length, periodic, padding, expand_dims;
    int data_format;
    const tfc_node *window, *scaling;
    /* set by build */
    int win, scale, step, fft, real_p, imag_p; /* real_p, imag_p: param index or -1 */
} stft_args;

static const tfc_field stft_fields[] = {
    {"mode", TFC_F_ENUM, offsetof(stft_args, mode), "log", TFC_UNBOUNDED, mode_names,
     "log, magnitude, psd, real, imag, angle or stft"},
    {"frame_length", TFC_F_INT, offsetof(stft_args, frame_length), "256", 1, 1 << 16, NULL,
     "samples per frame"},
    {"frame_step", TFC_F_INT, offsetof(stft_args, frame_step), TFC_NO_DEFAULT, 1, 1 << 16,
     NULL, "hop between frames; null: frame_length / 2"},
    {"fft_length", TFC_F_INT, offsetof(stft_args, fft_length), TFC_NO_DEFAULT, 2, 1 << 16,
     NULL, "FFT size (>= frame_length); null: the next power of two"},
    {"window", TFC_F_NODE, offsetof(stft_args, window), "hann", TFC_UNBOUNDED, NULL,
     "hann (default), hamming or null"},
    {"periodic", TFC_F_BOOL, offsetof(stft_args, periodic), "false", TFC_UNBOUNDED, NULL,
     "periodic window (scipy's fftbins)"},
    {"scaling", TFC_F_NODE, offsetof(stft_args, scaling), "density", TFC_UNBOUNDED, NULL,
     "density (default), spectrum or null"},
    {"padding", TFC_F_ENUM, offsetof(stft_args, padding), "valid", TFC_UNBOUNDED,
     stft_padding_names, "valid or same"},
    {"expand_dims", TFC_F_BOOL, offsetof(stft_args, expand_dims), "false", TFC_UNBOUNDED, NULL,
     "a 2-D spectrogram per channel"},
    {"data_format", TFC_F_ENUM, offsetof(stft_args, data_format), "channels_last",
     TFC_UNBOUNDED, stft_data_formats, "channels_last or channels_first"},
    {NULL}};

static void arg_path(const tfc_layer *l, const char *arg, char *path, size_t size)
{
    snprintf(path, size, "layers[%d].%s.%s", l->index, l->ops->type, arg);
}

/* A string argument among `names` (index from `first`) or null (0); absent: def. */
static tfc_status read_choice(const tfc_layer *l, const tfc_node *n, const char *arg,
                              const char *const *names, int def, const char *what, int *out,
                              tfc_error *err)
{
    char path[128];
    arg_path(l, arg, path, sizeof path);
    *out = def;
    /* the schema reads an explicit null as absent: the argument's own node tells them apart */
    (void)n;
    n = l->args_node ? tfc_node_get(l->args_node, arg) : NULL;
    if (!n) return TFC_OK;
    if (tfc_node_is_null(n)) {
        *out = 0;
        return TFC_OK;
    }
    if (n->kind == TFC_NODE_SCALAR)
        for (int i = 0; names[i]; i++)
            if (!strcmp(n->str, names[i])) {
                *out = i + 1;
                return TFC_OK;
            }
    return tfc_node_error(err, TFC_ERR_CONFIG, n, path, "must be %s", what);
}

/* scipy.signal.get_window(kind, m, fftbins=periodic), in double */
static double window_at(int kind, int m, int periodic, int u)
{
    if (kind == WIN_NONE) return 1.0;
    if (m == 1) return 1.0;
    const double alpha = kind == WIN_HANN ? 0.5 : 0.54, len = periodic ? m + 1 : m;
    return alpha - (1.0 - alpha) * cos(2.0 * M_PI * u / (len - 1));
}

static int stft_out_freq(const stft_args *a, int bins)
{
    return a->mode == TFC_STFT_STFT ? 2 * bins : bins;
}

static tfc_status stft_build(tfc_layer *l, tfc_error *err)
{
    stft_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    char buf[96];
    static const char *const wins[] = {"hann", "hamming", NULL};
    static const char *const scalings[] = {"density", "spectrum", NULL};
    if (read_choice(l, a->window, "window", wins, WIN_HANN, "hann, hamming or null (tfc "
                    "computes these two of scipy's windows; a custom window array is not "
                    "supported)", &a->win, err) ||
        read_choice(l, a->scaling, "scaling", scalings, SCALE_DENSITY,
                    "density, spectrum or null", &a->scale, err))
        return TFC_ERR_CONFIG;
    if (in->ndim != 2)
        return tfc_layer_error(err, l, "needs an input of shape (time, channels) (Keras's "
                               "(batch, time, channels)), got %s",
                               tfc_shape_str(in, buf, sizeof buf));
    a->step = a->frame_step ? a->frame_step : a->frame_length / 2;
    if (a->step < 1 || a->step > a->frame_length)
        return tfc_layer_error(err, l, "frame_step must be a positive integer not greater than "
                               "frame_length (frame_step %d, frame_length %d)", a->step,
                               a->frame_length);
    a->fft = a->fft_length;
    if (!a->fft)
        for (a->fft = 1; a->fft < a->frame_length; a->fft *= 2) {}
    if (a->fft < 2)
        return tfc_layer_error(err, l, "fft_length must be at least 2 (Keras's kernels divide "
                               "by fft_length / 2)");
    if (a->fft < a->frame_length)
        return tfc_layer_error(err, l, "fft_length (%d) must not be less than frame_length "
                               "(%d)", a->fft, a->frame_length);
    const int cf = a->data_format == CHANNELS_FIRST;
    const int t = (int)in->dim[cf ? 1 : 0], c = (int)in->dim[cf ? 0 : 1];
    int frames, pad;
    tfc_conv_axis(t, a->frame_length, a->step, 1, a->padding == 1, &frames, &pad);
    if (frames < 1)
        return tfc_layer_error(err, l, "input %s is shorter than frame_length (%d) with valid "
                               "padding", tfc_shape_str(in, buf, sizeof buf), a->frame_length);
    const int bins = a->fft / 2 + 1, fo = stft_out_freq(a, bins);
    if (a->expand_dims)
        l->out_shape = cf ? tfc_shape_make(3, (int64_t[]){c, frames, fo})
                          : tfc_shape_make(3, (int64_t[]){frames, fo, c});
    else
        l->out_shape = cf ? tfc_shape_make(2, (int64_t[]){(int64_t)c * fo, frames})
                          : tfc_shape_make(2, (int64_t[]){frames, (int64_t)c * fo});
    const int64_t kshape[3] = {a->frame_length, 1, bins};
    a->real_p = a->imag_p = -1;
    if (a->mode != TFC_STFT_IMAG) {
        a->real_p = l->nparams;
        tfc_layer_add_param(l, "real_kernel", 3, kshape, 1, tfc_init_make(TFC_INIT_ZEROS));
    }
    if (a->mode != TFC_STFT_REAL) {
        a->imag_p = l->nparams;
        tfc_layer_add_param(l, "imag_kernel", 3, kshape, 1, tfc_init_make(TFC_INIT_ZEROS));
    }
    l->saved_floats = 2 * (int64_t)c * frames * bins; /* re and im */
    return TFC_OK;
}

/* Keras's initializers.STFT, in float32 as it computes them */
static void stft_fill_param(const tfc_layer *l, int p, float *host)
{
    const stft_args *a = l->args;
    const int fl = a->frame_length, bins = a->fft / 2 + 1;
    const float n_fft = (float)((bins - 1) * 2), pi = (float)M_PI;
    double scale = 1.0;
    if (a->win != WIN_NONE && a->scale != SCALE_NONE) {
        double s = 0;
        for (int u = 0; u < fl; u++) {
            const float w = (float)window_at(a->win, fl, a->periodic, u);
            s += a->scale == SCALE_DENSITY ? (double)w * w : fabs(w);
        }
        scale = a->scale == SCALE_DENSITY ? sqrt(s) : s;
    }
    for (int u = 0; u < fl; u++) {
        const float w = (float)window_at(a->win, fl, a->periodic, u);
        for (int f = 0; f < bins; f++) {
            const float arg = (-2.0f * (float)u) * ((float)f / n_fft) * pi;
            float k = p == a->real_p ? cosf(arg) : sinf(arg);
            if (a->win != WIN_NONE) k = k * w / (float)scale;
            host[(int64_t)u * bins + f] = k;
        }
    }
}

static tfc_stft_desc stft_desc(const tfc_layer *l, int n)
{
    const stft_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    const int cf = a->data_format == CHANNELS_FIRST;
    tfc_stft_desc d = {.n = n, .c = (int)in->dim[cf ? 0 : 1], .t = (int)in->dim[cf ? 1 : 0],
                       .channels_first = cf, .frame = a->frame_length, .step = a->step,
                       .bins = a->fft / 2 + 1, .mode = (tfc_stft_mode)a->mode};
    tfc_conv_axis(d.t, d.frame, d.step, 1, a->padding == 1, &d.frames, &d.pad_left);
    const int64_t fo = stft_out_freq(a, d.bins), c = d.c, frames = d.frames;
    d.sn = frames * c * fo;
    if (!cf && !a->expand_dims) { d.st = c * fo; d.sc = fo; d.sf = 1; }
    else if (!cf)               { d.st = fo * c; d.sf = c; d.sc = 1; }
    else if (!a->expand_dims)   { d.sc = fo * frames; d.sf = frames; d.st = 1; }
    else                        { d.sc = frames * fo; d.st = fo; d.sf = 1; }
    return d;
}

static const char *const *stft_needs(const tfc_layer *l)
{
    (void)l;
    static const char *const needs[] = {"stft_workspace", "stft_forward", "stft_backward",
                                        NULL};
    return needs;
}

/* The op's workspace, then room for re and im at inference (no saved buffer then). */
static void spectrogram_plan(tfc_layer *l, tfc_backend *be, const tfc_stft_desc *d)
{
    const size_t ws = be->ops->stft_workspace ? be->ops->stft_workspace(be, d) : 0;
    const size_t reim = (size_t)l->max_batch * l->saved_floats * sizeof(float);
    l->workspace = ws > reim ? ws : reim;
}

static void stft_plan(tfc_layer *l, tfc_backend *be)
{
    const tfc_stft_desc d = stft_desc(l, l->max_batch);
    spectrogram_plan(l, be, &d);
}

/* Where re and im go: the saved buffer in training, the workspace otherwise. */
static float *reim_of(const tfc_layer *l, const tfc_exec *ex)
{
    return ex->training ? l->saved : ex->ws;
}

static void stft_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const stft_args *a = l->args;
    const tfc_stft_desc d = stft_desc(l, ex->batch);
    float *re = reim_of(l, ex), *im = re + (int64_t)ex->batch * l->saved_floats / 2;
    ex->be->ops->stft_forward(ex->be, &d, x[0], a->real_p >= 0 ? l->params[a->real_p].data
                                                               : NULL,
                              a->imag_p >= 0 ? l->params[a->imag_p].data : NULL, NULL, re, im,
                              y);
}

static void stft_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                          const float *dy, float *const *dx)
{
    const stft_args *a = l->args;
    const tfc_stft_desc d = stft_desc(l, ex->batch);
    const float *re = l->saved, *im = re + (int64_t)ex->batch * l->saved_floats / 2;
    const tfc_param *pr = a->real_p >= 0 ? &l->params[a->real_p] : NULL;
    const tfc_param *pi = a->imag_p >= 0 ? &l->params[a->imag_p] : NULL;
    ex->be->ops->stft_backward(ex->be, &d, x[0], pr ? pr->data : NULL, pi ? pi->data : NULL,
                               NULL, re, im, y, dy, dx[0], pr ? pr->grad : NULL,
                               pi ? pi->grad : NULL, ex->ws);
}

const tfc_layer_ops tfc_stft_spectrogram_ops = {
    .type = "STFTSpectrogram", .schema = stft_fields, .args_size = sizeof(stft_args),
    .min_inputs = 1, .max_inputs = 1, .needs = stft_needs, .build = stft_build,
    .plan = stft_plan, .forward = stft_forward, .backward = stft_backward,
    .fill_param = stft_fill_param,
};

/* ---- MelSpectrogram ----------------------------------------------------------------- */

typedef struct mel_args {
    int fft_length, sequence_stride, sequence_length, sampling_rate, num_mel_bins;
    int power_to_db;
    double min_freq, max_freq, top_db, mag_exp, min_power, ref_power;
    const tfc_node *window;
    int win; /* set by build */
} mel_args;

static const tfc_field mel_fields[] = {
    {"fft_length", TFC_F_INT, offsetof(mel_args, fft_length), "2048", 2, 1 << 16, NULL,
     "FFT size"},
    {"sequence_stride", TFC_F_INT, offsetof(mel_args, sequence_stride), "512", 1, 1 << 16,
     NULL, "samples between frames"},
    {"sequence_length", TFC_F_INT, offsetof(mel_args, sequence_length), TFC_NO_DEFAULT, 1,
     1 << 16, NULL, "window length (<= fft_length); null: fft_length"},
    {"window", TFC_F_NODE, offsetof(mel_args, window), "hann", TFC_UNBOUNDED, NULL,
     "hann (default), hamming or null"},
    {"sampling_rate", TFC_F_INT, offsetof(mel_args, sampling_rate), "16000", 1, 1 << 30, NULL,
     "samples per second"},
    {"num_mel_bins", TFC_F_INT, offsetof(mel_args, num_mel_bins), "128", 1, 1 << 16, NULL,
     "mel bands"},
    {"min_freq", TFC_F_FLOAT, offsetof(mel_args, min_freq), "20.0", TFC_UNBOUNDED, NULL,
     "lowest band edge (Hz)"},
    {"max_freq", TFC_F_FLOAT, offsetof(mel_args, max_freq), TFC_NO_DEFAULT, TFC_UNBOUNDED,
     NULL, "highest band edge (Hz); null: sampling_rate / 2"},
    {"power_to_db", TFC_F_BOOL, offsetof(mel_args, power_to_db), "true", TFC_UNBOUNDED, NULL,
     "decibels"},
    {"top_db", TFC_F_FLOAT, offsetof(mel_args, top_db), "80.0", TFC_UNBOUNDED, NULL,
     "floor below the batch's maximum (dB)"},
    {"mag_exp", TFC_F_FLOAT, offsetof(mel_args, mag_exp), "2.0", TFC_UNBOUNDED, NULL,
     "exponent of the magnitude"},
    {"min_power", TFC_F_FLOAT, offsetof(mel_args, min_power), "1e-10", TFC_UNBOUNDED, NULL,
     "floor of the power and ref_power"},
    {"ref_power", TFC_F_FLOAT, offsetof(mel_args, ref_power), "1.0", TFC_UNBOUNDED, NULL,
     "0 dB power"},
    {NULL}};

static tfc_status mel_build(tfc_layer *l, tfc_error *err)
{
    mel_args *a = l->args;
    const tfc_shape *in = &l->in_shape[0];
    char buf[96];
    static const char *const wins[] = {"hann", "hamming", NULL};
    if (read_choice(l, a->window, "window", wins, WIN_HANN, "hann, hamming or null (a "
                    "window array is not supported by tfc)", &a->win, err))
        return TFC_ERR_CONFIG;
    if (!a->sequence_length) a->sequence_length = a->fft_length;
    if (a->sequence_length > a->fft_length)
        return tfc_layer_error(err, l, "fft_length (%d) must be greater than or equal to "
                               "sequence_length (%d)", a->fft_length, a->sequence_length);
    if (!a->max_freq) a->max_freq = (int)(a->sampling_rate / 2.0); /* Keras's `or` */
    if (in->ndim != 1) {
        tfc_layer_error(err, l, "needs an input of shape (samples,) (Keras's (batch, samples)), "
                        "got %s", tfc_shape_str(in, buf, sizeof buf));
        if (in->ndim == 2 && in->dim[1] == 1 && in->dim[0] > 0) /* the audio source's mono */
            tfc_error_hint(err, "a mono recording's (%lld, 1): put - Reshape: [%lld] before "
                           "this layer (Keras's tutorials squeeze the channel axis)",
                           (long long)in->dim[0], (long long)in->dim[0]);
        return TFC_ERR_CONFIG;
    }
    const int t = (int)in->dim[0], pad = a->fft_length / 2;
    if (pad >= t)
        return tfc_layer_error(err, l, "input %s is too short: its reflection padding of "
                               "fft_length / 2 = %d samples needs more samples",
                               tfc_shape_str(in, buf, sizeof buf), pad);
    const int frames = (t + 2 * pad - a->fft_length) / a->sequence_stride + 1, bins =
        a->fft_length / 2 + 1;
    l->out_shape = tfc_shape_make(2, (int64_t[]){a->num_mel_bins, frames});
    const int64_t kshape[2] = {a->fft_length, bins}, mshape[2] = {bins, a->num_mel_bins};
    tfc_layer_add_param(l, "stft_real", 2, kshape, 0, tfc_init_make(TFC_INIT_ZEROS))
        ->constant = 1;
    tfc_layer_add_param(l, "stft_imag", 2, kshape, 0, tfc_init_make(TFC_INIT_ZEROS))
        ->constant = 1;
    tfc_layer_add_param(l, "mel_matrix", 2, mshape, 0, tfc_init_make(TFC_INIT_ZEROS))
        ->constant = 1;
    l->saved_floats = 2 * (int64_t)frames * bins;
    return TFC_OK;
}

static double hertz_to_mel(double hz)
{
    return 1127.0 * log(1.0 + hz / 700.0);
}

/* the DFT kernels of the periodic window centred in fft_length (Keras's jax stft), and
 * linear_to_mel_weight_matrix */
static void mel_fill_param(const tfc_layer *l, int p, float *host)
{
    const mel_args *a = l->args;
    const int nfft = a->fft_length, bins = nfft / 2 + 1, sl = a->sequence_length;
    const int lpad = (nfft - sl) / 2, mels = a->num_mel_bins;
    if (p < 2) {
        for (int u = 0; u < nfft; u++) {
            const int v = u - lpad;
            const double w = v < 0 || v >= sl ? 0.0 : (double)(float)window_at(a->win, sl, 1, v);
            for (int f = 0; f < bins; f++) {
                const double arg = 2.0 * M_PI * (double)((int64_t)u * f % nfft) / nfft;
                host[(int64_t)u * bins + f] = (float)(p == 0 ? w * cos(arg) : -w * sin(arg));
            }
        }
        return;
    }
    const double nyq = a->sampling_rate / 2.0, lo = hertz_to_mel(a->min_freq);
    const double hi = hertz_to_mel(a->max_freq);
    memset(host, 0, sizeof(float) * (size_t)bins * mels);
    for (int f = 1; f < bins; f++) {
        const double sm = hertz_to_mel(nyq * f / (bins - 1));
        for (int m = 0; m < mels; m++) {
            const double e0 = lo + (hi - lo) * m / (mels + 1);
            const double e1 = lo + (hi - lo) * (m + 1) / (mels + 1);
            const double e2 = lo + (hi - lo) * (m + 2) / (mels + 1);
            const double lower = (sm - e0) / (e1 - e0), upper = (e2 - sm) / (e2 - e1);
            const double v = fmin(lower, upper);
            host[(int64_t)f * mels + m] = (float)(v > 0 ? v : 0);
        }
    }
}

static tfc_stft_desc mel_desc(const tfc_layer *l, int n)
{
    const mel_args *a = l->args;
    const int t = (int)l->in_shape[0].dim[0], pad = a->fft_length / 2;
    tfc_stft_desc d = {.n = n, .c = 1, .t = t, .channels_first = 1, .frame = a->fft_length,
                       .step = a->sequence_stride, .bins = a->fft_length / 2 + 1,
                       .pad_left = pad, .reflect = 1, .mode = TFC_STFT_MEL,
                       .mels = a->num_mel_bins, .db = a->power_to_db,
                       .mag_exp = (float)a->mag_exp, .min_power = (float)a->min_power,
                       .top_db = (float)a->top_db};
    d.frames = (t + 2 * pad - a->fft_length) / a->sequence_stride + 1;
    d.ref_db = 10.0f * log10f(fmaxf(fabsf((float)a->ref_power), d.min_power));
    d.sn = (int64_t)d.mels * d.frames;
    d.sf = d.frames;
    d.st = 1;
    return d;
}

static void mel_plan(tfc_layer *l, tfc_backend *be)
{
    const tfc_stft_desc d = mel_desc(l, l->max_batch);
    spectrogram_plan(l, be, &d);
}

static void mel_forward(tfc_layer *l, tfc_exec *ex, const void *const *x, float *y)
{
    const tfc_stft_desc d = mel_desc(l, ex->batch);
    float *re = reim_of(l, ex), *im = re + (int64_t)ex->batch * l->saved_floats / 2;
    ex->be->ops->stft_forward(ex->be, &d, x[0], l->params[0].data, l->params[1].data,
                              l->params[2].data, re, im, y);
}

static void mel_backward(tfc_layer *l, tfc_exec *ex, const void *const *x, const float *y,
                         const float *dy, float *const *dx)
{
    const tfc_stft_desc d = mel_desc(l, ex->batch);
    const float *re = l->saved, *im = re + (int64_t)ex->batch * l->saved_floats / 2;
    if (!dx[0]) return;
    ex->be->ops->stft_backward(ex->be, &d, x[0], l->params[0].data, l->params[1].data,
                               l->params[2].data, re, im, y, dy, dx[0], NULL, NULL, ex->ws);
}

const tfc_layer_ops tfc_mel_spectrogram_ops = {
    .type = "MelSpectrogram", .schema = mel_fields, .args_size = sizeof(mel_args),
    .min_inputs = 1, .max_inputs = 1, .needs = stft_needs, .build = mel_build,
    .plan = mel_plan, .forward = mel_forward, .backward = mel_backward,
    .fill_param = mel_fill_param,
};

int tfc_layer_stft_desc(const tfc_layer *l, int n, tfc_stft_desc *d)
{
    if (l->ops == &tfc_stft_spectrogram_ops) *d = stft_desc(l, n);
    else if (l->ops == &tfc_mel_spectrogram_ops) *d = mel_desc(l, n);
    else return 0;
    return 1;
}
