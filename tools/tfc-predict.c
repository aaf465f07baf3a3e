/* tfc-predict: a forward pass (inference mode) over examples from an .npy array, image
 * files or lines of text, writing the outputs as an .npy array and, for images and text,
 * the top class of each example on stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "core/fileio.h"
#include "graph/model.h"
#include "data/data.h"

static const char *usage =
    "usage: tfc-predict MODEL.yaml --weights FILE --input X.npy --output Y.npy\n"
    "       tfc-predict MODEL.yaml --weights FILE --input a.png b.jpg ... [--output Y.npy]\n"
    "       tfc-predict MODEL.yaml --weights FILE --text LINES.txt --vocabulary VOCAB\n"
    "options:\n"
    "  --input X.npy       examples [N, input shape...] (or one example of the input shape);\n"
    "                      converted to the model's input dtype (float32, or int32 token ids)\n"
    "  --input FILES...    PNG/JPEG images of the input's (height, width, channels), scaled\n"
    "                      by --scale (default 1/255, as the training configs do)\n"
    "  --text FILE         one example per line, tokenized with --vocabulary (the vocab.txt\n"
    "                      a text run writes), padded with 0 or truncated to the input length\n"
    "  --output Y.npy      the outputs [N, output shape...] as float32\n"
    "  --batch N           examples per forward pass (default 256)\n"
    "  --device D          cpu, gpu or gpu:N (default: a GPU when usable)\n"
    "  --threads N         CPU threads (default: all cores)\n";

typedef struct opts {
    const char *model, *weights, *output, *text, *vocab, *device;
    const char *inputs[4096];
    int ninputs, batch, threads;
    double scale;
} opts;

static int fail(tfc_error *err)
{
    fputs(err->text, stderr);
    return tfc_exit_code(err->code);
}

/* Examples from an .npy array, converted to the model's input dtype. */
static tfc_status load_npy(const char *path, const tfc_shape *in, tfc_dtype want, void **x,
                           int64_t *n, tfc_error *err)
{
    tfc_tensor t;
    tfc_status s = tfc_npy_read(path, &t, err);
    if (s) return s;
    int64_t per = tfc_shape_numel(in), total = tfc_shape_numel(&t.shape);
    int lead = t.shape.ndim - in->ndim;
    int ok = (lead == 0 || lead == 1);
    for (int i = 0; ok && i < in->ndim; i++) ok = t.shape.dim[lead + i] == in->dim[i];
    if (!ok) {
        char a[96], b[96];
        free(t.data);
        return tfc_error_set(err, TFC_ERR_DATA, "%s: array of shape %s does not hold examples of "
                             "the model's input shape %s", path, tfc_shape_str(&t.shape, a, sizeof a),
                             tfc_shape_str(in, b, sizeof b));
    }
    *n = per ? total / per : 0;
    float *f = malloc((size_t)(total ? total : 1) * 4);
    if (!f) {
        free(t.data);
        return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    }
    for (int64_t i = 0; i < total; i++) {
        double v;
        switch (t.dtype) {
        case TFC_F32: v = ((float *)t.data)[i]; break;
        case TFC_F64: v = ((double *)t.data)[i]; break;
        case TFC_I8: v = ((int8_t *)t.data)[i]; break;
        case TFC_U8: v = ((uint8_t *)t.data)[i]; break;
        case TFC_I16: v = ((int16_t *)t.data)[i]; break;
        case TFC_U16: v = ((uint16_t *)t.data)[i]; break;
        case TFC_I32: v = ((int32_t *)t.data)[i]; break;
        case TFC_U32: v = ((uint32_t *)t.data)[i]; break;
        case TFC_I64: v = (double)((int64_t *)t.data)[i]; break;
        case TFC_U64: v = (double)((uint64_t *)t.data)[i]; break;
        case TFC_BOOL: v = ((uint8_t *)t.data)[i] != 0; break;
        default:
            free(t.data);
            free(f);
            return tfc_error_set(err, TFC_ERR_DATA, "%s: dtype %s is not supported", path,
                                 tfc_data_dtype_name(t.dtype));
        }
        if (want == TFC_I32) ((int32_t *)f)[i] = (int32_t)v;
        else f[i] = (float)v;
    }
    free(t.data);
    *x = f;
    return TFC_OK;
}

static tfc_status load_images(const opts *o, const tfc_shape *in, void **x, int64_t *n,
                              tfc_error *err)
{
    if (in->ndim != 3)
        return tfc_error_set(err, TFC_ERR_USAGE, "image inputs need a model input of shape "
                             "(height, width, channels)");
    int64_t per = tfc_shape_numel(in);
    float *f = malloc((size_t)(per * o->ninputs) * 4);
    if (!f) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    for (int i = 0; i < o->ninputs; i++) {
        char *buf;
        size_t len;
        tfc_tensor img;
        tfc_status s = tfc_file_read_all(o->inputs[i], 1u << 30, &buf, &len, err);
        if (!s) s = tfc_image_decode(buf, len, o->inputs[i], (int)in->dim[2], NULL, &img, err);
        if (!s) free(buf);
        if (s) {
            free(f);
            return s;
        }
        if (img.shape.dim[0] != in->dim[0] || img.shape.dim[1] != in->dim[1]) {
            tfc_error_set(err, TFC_ERR_DATA, "%s: image is %lldx%lld, the model takes %lldx%lld",
                          o->inputs[i], (long long)img.shape.dim[1], (long long)img.shape.dim[0],
                          (long long)in->dim[1], (long long)in->dim[0]);
            free(img.data);
            free(f);
            return TFC_ERR_DATA;
        }
        for (int64_t k = 0; k < per; k++)
            f[i * per + k] = (float)(((uint8_t *)img.data)[k] * o->scale);
        free(img.data);
    }
    *x = f;
    *n = o->ninputs;
    return TFC_OK;
}

static tfc_status load_text(const opts *o, const tfc_shape *in, void **x, int64_t *n,
                            tfc_error *err)
{
    if (!o->vocab) return tfc_error_set(err, TFC_ERR_USAGE, "--text needs --vocabulary");
    if (in->ndim != 1)
        return tfc_error_set(err, TFC_ERR_USAGE, "--text needs a model input of shape (steps)");
    tfc_vocab *v = tfc_vocab_load(o->vocab, err);
    char *buf;
    size_t len;
    if (!v) return err->code;
    tfc_status s = tfc_file_read_all(o->text, 1u << 30, &buf, &len, err);
    if (s) {
        tfc_vocab_free(v);
        return s;
    }
    int64_t lines = 0, steps = in->dim[0];
    for (size_t i = 0; i < len; i++) lines += buf[i] == '\n' || (i + 1 == len);
    int32_t *ids = calloc((size_t)((lines ? lines : 1) * steps), 4);
    int64_t row = 0;
    for (char *p = buf; ids && p < buf + len && row < lines; row++) {
        char *end = memchr(p, '\n', (size_t)(buf + len - p));
        size_t l = end ? (size_t)(end - p) : (size_t)(buf + len - p);
        tfc_vocab_encode(v, p, l, ids + row * steps, steps);
        p += l + 1;
    }
    free(buf);
    tfc_vocab_free(v);
    if (!ids) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    *x = ids;
    *n = row;
    return TFC_OK;
}

int main(int argc, char **argv)
{
    opts o = {.batch = 256, .scale = 1.0 / 255.0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(a, "--version")) {
            printf("tfc-predict (tfc) %s\n", TFC_VERSION);
            return 0;
        } else if (!strcmp(a, "--input")) {
            while (i + 1 < argc && argv[i + 1][0] != '-' && o.ninputs < 4096) o.inputs[o.ninputs++] = argv[++i];
        } else if (i + 1 < argc && !strcmp(a, "--weights")) {
            o.weights = argv[++i];
        } else if (i + 1 < argc && !strcmp(a, "--output")) {
            o.output = argv[++i];
        } else if (i + 1 < argc && !strcmp(a, "--text")) {
            o.text = argv[++i];
        } else if (i + 1 < argc && !strcmp(a, "--vocabulary")) {
            o.vocab = argv[++i];
        } else if (i + 1 < argc && !strcmp(a, "--device")) {
            o.device = argv[++i];
        } else if (i + 1 < argc && !strcmp(a, "--scale")) {
            o.scale = atof(argv[++i]);
        } else if (i + 1 < argc && !strcmp(a, "--batch")) {
            o.batch = atoi(argv[++i]);
        } else if (i + 1 < argc && !strcmp(a, "--threads")) {
            o.threads = atoi(argv[++i]);
            if (o.threads < 1) {
                fprintf(stderr, "tfc-predict: --threads wants a positive number\n%s", usage);
                return 2;
            }
        } else if (a[0] != '-' && !o.model) {
            o.model = a;
        } else {
            fprintf(stderr, "tfc-predict: bad argument '%s'\n%s", a, usage);
            return 2;
        }
    }
    int npy = o.ninputs == 1 && strstr(o.inputs[0], ".npy");
    if (!o.model || !o.weights || (!o.ninputs && !o.text) || (o.ninputs && o.text) ||
        o.batch < 1 || (npy && !o.output)) {
        fputs(usage, stderr);
        return 2;
    }
    tfc_error err;
    tfc_error_clear(&err);
    tfc_model *m = tfc_model_load(o.model, &err);
    if (!m) return fail(&err);
    const tfc_shape *in = tfc_model_input_shape(m);
    void *x = NULL;
    int64_t n = 0;
    tfc_status s = npy ? load_npy(o.inputs[0], in, tfc_model_input_dtype(m), &x, &n, &err)
                 : o.text ? load_text(&o, in, &x, &n, &err)
                          : load_images(&o, in, &x, &n, &err);
    tfc_backend *be = s ? NULL : tfc_backend_open(o.device, o.threads, &err);
    int batch = n < o.batch ? (int)(n ? n : 1) : o.batch;
    if (!s && !be) s = err.code;
    if (!s) s = tfc_model_bind(m, be, batch, &err);
    if (!s) s = tfc_model_load_weights(m, o.weights, NULL, &err);
    int64_t per_in = tfc_shape_numel(in), per_out = tfc_shape_numel(tfc_model_output_shape(m));
    float *y = s ? NULL : malloc((size_t)((n ? n : 1) * per_out) * 4);
    for (int64_t b = 0; !s && b < n; b += batch) {
        int cnt = (int)(n - b < batch ? n - b : batch);
        s = tfc_model_forward(m, (char *)x + b * per_in * 4, cnt, 0, 0, 0, &err);
        if (!s) tfc_model_get_output(m, y + b * per_out);
    }
    if (!s && o.output) {
        tfc_tensor t = {.dtype = TFC_F32, .data = y};
        const tfc_shape *os = tfc_model_output_shape(m);
        t.shape.ndim = os->ndim + 1;
        t.shape.dim[0] = n;
        for (int i = 0; i < os->ndim; i++) t.shape.dim[i + 1] = os->dim[i];
        s = tfc_npy_write(o.output, &t, &err);
    }
    if (!s && !npy && tfc_model_output_shape(m)->ndim == 1) {
        int64_t c = per_out;
        for (int64_t i = 0; i < n; i++) {
            int64_t best = 0;
            for (int64_t k = 1; k < c; k++)
                if (y[i * c + k] > y[i * c + best]) best = k;
            if (o.text) printf("line %lld", (long long)i + 1);
            else printf("%s", o.inputs[i]);
            printf("\tclass %lld\t%.4f\n", (long long)best, y[i * c + best]);
        }
    }
    free(x);
    free(y);
    tfc_model_free(m);
    if (be) tfc_backend_free(be);
    return s ? fail(&err) : 0;
}
