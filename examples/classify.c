/* classify: the top class of each PNG/JPEG image under a trained image model, through the
 * inference API (SPEC §5c). Build: cc classify.c $(pkg-config --cflags --libs tfc)
 * Run:   ./classify model_zoo/fashion_cnn/model.yaml model_zoo/fashion_cnn/fashion_cnn.safetensors a.png ...
 * Pixels are scaled by 1/255, as the zoo's image models were trained. Prints `PATH<TAB>NAME
 * (INDEX)<TAB>P` with the class names the weights record, else `PATH<TAB>class INDEX<TAB>P`. */
#include <stdio.h>
#include <stdlib.h>
#include <tfc.h>

int main(int argc, char **argv)
{
    tfc_cpu_blas_restart(argv); /* OpenBLAS's fast kernels on a CPU it does not know */
    char err[512];
    int64_t in[8], out[8];
    if (argc < 4) return fprintf(stderr, "usage: %s MODEL.yaml WEIGHTS IMAGE...\n", argv[0]), 2;
    tfc_predictor *p = tfc_predictor_open(argv[1], argv[2], "cpu", err, sizeof err);
    if (!p) return fprintf(stderr, "%s\n", err), 1;
    if (tfc_predictor_shape(p, 0, in, NULL) != 3 || tfc_predictor_shape(p, 1, out, NULL) != 1)
        return fprintf(stderr, "not an image classifier\n"), 1;
    float *x = malloc(sizeof(float) * in[0] * in[1] * in[2]), *y = malloc(sizeof(float) * out[0]);
    for (int i = 3; i < argc; i++) {
        char *bytes;
        size_t len;
        tfc_tensor img;
        tfc_error e = {0};
        if (tfc_file_read_all(argv[i], 1 << 26, &bytes, &len, &e) ||
            tfc_image_decode(bytes, len, argv[i], (int)in[2], NULL, &img, &e))
            return fprintf(stderr, "%s", e.text), 1;
        free(bytes);
        if (tfc_shape_numel(&img.shape) != in[0] * in[1] * in[2])
            return fprintf(stderr, "%s: not %lldx%lld\n", argv[i], (long long)in[1], (long long)in[0]), 1;
        for (int64_t k = 0; k < in[0] * in[1] * in[2]; k++) x[k] = ((unsigned char *)img.data)[k] * (1.0f / 255);
        free(img.data);
        if (tfc_predictor_run(p, x, 1, y, err, sizeof err)) return fprintf(stderr, "%s\n", err), 1;
        int best = 0;
        for (int k = 1; k < out[0]; k++) best = y[k] > y[best] ? k : best;
        const char *name = tfc_predictor_class_name(p, best); /* the weights' class names */
        if (name) printf("%s\t%s (%d)\t%.4f\n", argv[i], name, best, y[best]);
        else printf("%s\tclass %d\t%.4f\n", argv[i], best, y[best]);
    }
    free(x), free(y);
    tfc_predictor_close(p);
    return 0;
}
