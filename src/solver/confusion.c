/* The confusion matrix of a test pass and what it gives per class: precision
 * TP / (TP + FP), recall TP / (TP + FN), F1 2PR / (P + R) (0 where a denominator is 0, as
 * scikit-learn's zero_division=0), macro averages over every class (Keras's
 * F1Score(average="macro")); for a per-pixel model (segmentation) each pixel is a row and the
 * intersection over union TP / (TP + FP + FN) joins them, with Keras's MeanIoU; printed as
 * tfc-test's tables and written to summary.json. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "solver/internal.h"

tfc_status tfc_confusion_init(tfc_confusion *cm, const tfc_model *m, const tfc_pipeline *test,
                              tfc_error *err)
{
    memset(cm, 0, sizeof *cm);
    tfc_loss_kind k = tfc_model_loss_kind(m);
    int classes = tfc_model_classes(m);
    /* one row an example, or an output of images (volumes) of classes, one row a pixel; not
     * a sequence's steps, some of which may be padding */
    if ((k != TFC_LOSS_SPARSE_CCE && k != TFC_LOSS_CCE) || classes < 2 ||
        tfc_model_noutputs(m) > 1 || /* its loss and metrics per output only, as yet */
        (tfc_model_label_rows(m) != 1 && tfc_model_output_shape(m)->ndim < 3))
        return TFC_OK;
    cm->rows = tfc_model_label_rows(m);
    cm->counts = calloc((size_t)classes * (size_t)classes, sizeof *cm->counts);
    if (!cm->counts) return tfc_error_set(err, TFC_ERR_NOMEM, "out of memory");
    cm->classes = classes;
    int n = 0;
    const char *const *names = test ? tfc_pipeline_class_names(test, &n) : NULL;
    if (names && n == classes) {
        cm->names = calloc((size_t)n, sizeof *cm->names);
        for (int i = 0; cm->names && i < n; i++) cm->names[i] = strdup(names[i]);
    }
    return TFC_OK;
}

void tfc_confusion_reset(tfc_confusion *cm)
{
    if (cm->counts) memset(cm->counts, 0, (size_t)cm->classes * (size_t)cm->classes * sizeof *cm->counts);
}

void tfc_confusion_free(tfc_confusion *cm)
{
    if (cm->names)
        for (int i = 0; i < cm->classes; i++) free(cm->names[i]);
    free(cm->names);
    free(cm->counts);
    memset(cm, 0, sizeof *cm);
}

static int argmax(const float *v, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

void tfc_confusion_add(tfc_confusion *cm, const float *outputs, const void *labels, int sparse,
                       int64_t rows)
{
    int C = cm->classes;
    for (int64_t r = 0; r < rows; r++) {
        int truth = sparse ? ((const int32_t *)labels)[r]
                           : argmax((const float *)labels + (size_t)r * (size_t)C, C);
        if (truth < 0 || truth >= C) continue;
        cm->counts[(size_t)truth * (size_t)C + (size_t)argmax(outputs + (size_t)r * (size_t)C, C)]++;
    }
}

static double ratio(int64_t a, int64_t b) { return b > 0 ? (double)a / (double)b : 0.0; }

void tfc_confusion_class(const tfc_confusion *cm, int c, tfc_class_stats *out)
{
    int C = cm->classes;
    int64_t tp = cm->counts[(size_t)c * (size_t)C + (size_t)c], predicted = 0, actual = 0;
    for (int i = 0; i < C; i++) {
        predicted += cm->counts[(size_t)i * (size_t)C + (size_t)c];
        actual += cm->counts[(size_t)c * (size_t)C + (size_t)i];
    }
    out->precision = ratio(tp, predicted);
    out->recall = ratio(tp, actual);
    double s = out->precision + out->recall;
    out->f1 = s > 0 ? 2 * out->precision * out->recall / s : 0.0;
    out->support = actual;
    out->iou = ratio(tp, predicted + actual - tp);
}

/* The rows predicted as class c */
static int64_t column_sum(const tfc_confusion *cm, int c)
{
    int64_t n = 0;
    for (int i = 0; i < cm->classes; i++)
        n += cm->counts[(size_t)i * (size_t)cm->classes + (size_t)c];
    return n;
}

void tfc_confusion_macro(const tfc_confusion *cm, tfc_class_stats *out)
{
    memset(out, 0, sizeof *out);
    int valid = 0;
    for (int c = 0; c < cm->classes; c++) {
        tfc_class_stats k;
        tfc_confusion_class(cm, c, &k);
        out->precision += k.precision / cm->classes;
        out->recall += k.recall / cm->classes;
        out->f1 += k.f1 / cm->classes;
        out->support += k.support;
        /* MeanIoU: over the classes with a union (Keras's num_valid_entries) */
        if (k.support > 0 || column_sum(cm, c) > 0) out->iou += k.iou, valid++;
    }
    out->iou = valid ? out->iou / valid : 0.0;
}

static void class_label(const tfc_confusion *cm, int c, char *buf, size_t size)
{
    if (cm->names && cm->names[c]) snprintf(buf, size, "%s", cm->names[c]);
    else snprintf(buf, size, "%d", c);
}

void tfc_confusion_print(const tfc_confusion *cm, FILE *f)
{
    if (!cm->classes) return;
    int w = 5;
    char name[64];
    for (int c = 0; c < cm->classes; c++) {
        class_label(cm, c, name, sizeof name);
        if ((int)strlen(name) > w) w = (int)strlen(name) > 20 ? 20 : (int)strlen(name);
    }
    const int pixels = cm->rows > 1; /* support counts pixels, and IoU joins the table */
    fprintf(f, "%-*s  precision  recall      f1  %s%s\n", w, "class", pixels ? "    iou  " : "",
            pixels ? "  pixels" : "support");
    for (int c = 0; c < cm->classes; c++) {
        tfc_class_stats k;
        tfc_confusion_class(cm, c, &k);
        class_label(cm, c, name, sizeof name);
        fprintf(f, "%-*.*s  %9.4f  %6.4f  %6.4f  ", w, w, name, k.precision, k.recall, k.f1);
        if (pixels) fprintf(f, "%6.4f  ", k.iou);
        fprintf(f, "%7lld\n", (long long)k.support);
    }
    tfc_class_stats mac;
    tfc_confusion_macro(cm, &mac);
    fprintf(f, "%-*s  %9.4f  %6.4f  %6.4f  ", w, "macro", mac.precision, mac.recall, mac.f1);
    if (pixels) fprintf(f, "%6.4f  ", mac.iou);
    fprintf(f, "%7lld\n", (long long)mac.support);
    fprintf(f, "confusion (rows: true class, columns: predicted)\n%-*s", w, "");
    for (int c = 0; c < cm->classes; c++) {
        class_label(cm, c, name, sizeof name);
        fprintf(f, " %7.7s", name);
    }
    fputc('\n', f);
    for (int r = 0; r < cm->classes; r++) {
        class_label(cm, r, name, sizeof name);
        fprintf(f, "%-*.*s", w, w, name);
        for (int c = 0; c < cm->classes; c++)
            fprintf(f, " %7lld", (long long)cm->counts[(size_t)r * (size_t)cm->classes + (size_t)c]);
        fputc('\n', f);
    }
}

void *tfc_confusion_json(const tfc_confusion *cm)
{
    json_t *o = json_object();
    tfc_class_stats mac;
    tfc_confusion_macro(cm, &mac);
    json_object_set_new(o, "precision", json_real(mac.precision));
    json_object_set_new(o, "recall", json_real(mac.recall));
    json_object_set_new(o, "f1", json_real(mac.f1));
    if (cm->rows > 1) json_object_set_new(o, "mean_iou", json_real(mac.iou));
    json_t *per = json_array(), *rows = json_array();
    char name[64];
    for (int c = 0; c < cm->classes; c++) {
        tfc_class_stats k;
        tfc_confusion_class(cm, c, &k);
        class_label(cm, c, name, sizeof name);
        json_t *e = json_object();
        json_object_set_new(e, "class", json_string(name));
        json_object_set_new(e, "precision", json_real(k.precision));
        json_object_set_new(e, "recall", json_real(k.recall));
        json_object_set_new(e, "f1", json_real(k.f1));
        json_object_set_new(e, "support", json_integer(k.support));
        if (cm->rows > 1) json_object_set_new(e, "iou", json_real(k.iou));
        json_array_append_new(per, e);
        json_t *row = json_array();
        for (int p = 0; p < cm->classes; p++)
            json_array_append_new(row, json_integer(cm->counts[(size_t)c * (size_t)cm->classes + (size_t)p]));
        json_array_append_new(rows, row);
    }
    json_object_set_new(o, "per_class", per);
    json_object_set_new(o, "confusion", rows);
    return o;
}
