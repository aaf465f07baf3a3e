/* Per-class precision, recall and F1 from a confusion matrix, against values worked out by
 * hand (and scikit-learn's precision_recall_fscore_support with zero_division=0 on the same
 * labels): argmax predictions from sparse and one-hot labels, a class never predicted, the
 * macro row, and the printed table with and without class names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "solver/internal.h"
#include "util/testutil.h"

/* 3 classes. truth 0 0 0 1 1 2 2 2; predicted 0 0 1 1 0 1 1 0: class 2 is never predicted.
 * class 0: TP 2, predicted 4, actual 3: P 1/2, R 2/3, F1 2(1/3)/(7/6) = 4/7
 * class 1: TP 1, predicted 4, actual 2: P 1/4, R 1/2, F1 2(1/8)/(3/4) = 1/3
 * class 2: TP 0, predicted 0, actual 3: P 0 (zero_division), R 0, F1 0
 * macro: P (1/2 + 1/4 + 0) / 3 = 1/4, R (2/3 + 1/2) / 3 = 7/18, F1 (4/7 + 1/3) / 3 = 19/63 */
static const int32_t truth[8] = {0, 0, 0, 1, 1, 2, 2, 2};
static const int pred[8] = {0, 0, 1, 1, 0, 1, 1, 0};

static void fill(tfc_confusion *cm, int onehot)
{
    memset(cm, 0, sizeof *cm);
    cm->classes = 3;
    cm->counts = calloc(9, sizeof *cm->counts);
    float out[8 * 3], lab[8 * 3];
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 3; c++) {
            /* ties go to the first index, as numpy's argmax: class pred[r] and a later one
             * share the maximum when pred[r] < 2 */
            out[r * 3 + c] = c == pred[r] ? 0.6f : c == 2 && pred[r] < 2 ? 0.6f : 0.2f;
            lab[r * 3 + c] = c == truth[r] ? 1.0f : 0.0f;
        }
    if (onehot) tfc_confusion_add(cm, out, lab, 0, 8);
    else tfc_confusion_add(cm, out, truth, 1, 8);
}

static void test_stats(void)
{
    for (int onehot = 0; onehot < 2; onehot++) {
        tfc_confusion cm;
        fill(&cm, onehot);
        const int64_t want[9] = {2, 1, 0, 1, 1, 0, 1, 2, 0};
        CU_ASSERT(memcmp(cm.counts, want, sizeof want) == 0);
        tfc_class_stats k;
        tfc_confusion_class(&cm, 0, &k);
        CU_ASSERT_DOUBLE_EQUAL(k.precision, 0.5, 1e-12);
        CU_ASSERT_DOUBLE_EQUAL(k.recall, 2.0 / 3, 1e-12);
        CU_ASSERT_DOUBLE_EQUAL(k.f1, 4.0 / 7, 1e-12);
        CU_ASSERT_EQUAL(k.support, 3);
        tfc_confusion_class(&cm, 1, &k);
        CU_ASSERT_DOUBLE_EQUAL(k.precision, 0.25, 1e-12);
        CU_ASSERT_DOUBLE_EQUAL(k.recall, 0.5, 1e-12);
        CU_ASSERT_DOUBLE_EQUAL(k.f1, 1.0 / 3, 1e-12);
        tfc_confusion_class(&cm, 2, &k);
        CU_ASSERT(k.precision == 0 && k.recall == 0 && k.f1 == 0 && k.support == 3);
        tfc_confusion_macro(&cm, &k);
        CU_ASSERT_DOUBLE_EQUAL(k.precision, 0.25, 1e-12);
        CU_ASSERT_DOUBLE_EQUAL(k.recall, 7.0 / 18, 1e-12);
        CU_ASSERT_DOUBLE_EQUAL(k.f1, 19.0 / 63, 1e-12);
        CU_ASSERT_EQUAL(k.support, 8);
        tfc_confusion_free(&cm);
    }
}

static void test_print(void)
{
    tfc_confusion cm;
    fill(&cm, 0);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    tfc_confusion_print(&cm, f);
    fclose(f);
    CU_ASSERT(strstr(text, "class  precision  recall      f1  support\n"
                           "0         0.5000  0.6667  0.5714        3\n"
                           "1         0.2500  0.5000  0.3333        2\n"
                           "2         0.0000  0.0000  0.0000        3\n"
                           "macro     0.2500  0.3889  0.3016        8\n"
                           "confusion (rows: true class, columns: predicted)\n"
                           "            0       1       2\n"
                           "0           2       1       0\n") != NULL);
    if (!strstr(text, "macro     0.2500")) printf("\n%s", text);
    free(text);
    cm.names = calloc(3, sizeof *cm.names);
    cm.names[0] = strdup("sandal");
    cm.names[1] = strdup("shirt");
    cm.names[2] = strdup("bag");
    f = open_memstream(&text, &len);
    tfc_confusion_print(&cm, f);
    fclose(f);
    CU_ASSERT(strstr(text, "class   precision") && strstr(text, "\nsandal     0.5000") &&
              strstr(text, "\nbag        0.0000") && strstr(text, "  sandal   shirt     bag\n"));
    if (!strstr(text, "\nsandal     0.5000")) printf("\n%s", text);
    free(text);
    tfc_confusion_free(&cm);
}

TFC_TEST_MAIN("confusion", {"stats", test_stats}, {"print", test_print})
