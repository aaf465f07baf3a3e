/* Shared helpers of the variable-length sequence tests; see seqref.h. */
#include "seqref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "gradcheck.h"
#include "testutil.h"

tfc_model *tfc_test_bound_model(const char *yaml, tfc_backend *be, int batch)
{
    tfc_model *m = tfc_test_model(yaml);
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(m && tfc_model_bind(m, be, batch, &err) == TFC_OK);
    TFC_ASSERT(tfc_model_init_weights(m, 7, &err) == TFC_OK);
    return m;
}

float *tfc_test_run_at(tfc_model *m, int64_t t, const void *x, int n)
{
    tfc_error err;
    tfc_error_clear(&err);
    TFC_ASSERT(!t || tfc_model_set_length(m, t, &err) == TFC_OK);
    TFC_ASSERT(tfc_model_forward(m, x, n, 0, 1, 0, &err) == TFC_OK);
    float *y = malloc((size_t)n * (size_t)tfc_shape_numel(tfc_model_output_shape(m)) * 4 + 4);
    tfc_model_get_output(m, y);
    return y;
}

void tfc_test_keras_lengths(const char *dir, const char *const *cases, tfc_backend *be,
                            double *worst_abs, double *worst_rel)
{
    for (int c = 0; cases[c]; c++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s.safetensors", dir, cases[c]);
        tfc_error err;
        tfc_error_clear(&err);
        tfc_st_file *f = tfc_st_open(path, &err);
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        tfc_model *m = tfc_test_bound_model(tfc_st_meta(f, "yaml"), be, 4);
        if (tfc_model_trainable_count(m)) {
            tfc_weights_report rep = {0};
            CU_ASSERT_EQUAL(tfc_model_load_weights(m, path, &rep, &err), TFC_OK);
            CU_ASSERT(rep.missing == 0 && rep.mismatched == 0 && rep.unused == 6);
            free(rep.text);
        }
        for (int l = 0; l < 3; l++) {
            const int t = (int[]){5, 9, 17}[l];
            char xn[8], yn[8];
            snprintf(xn, sizeof xn, "x%d", t);
            snprintf(yn, sizeof yn, "y%d", t);
            const tfc_st_tensor *x = tfc_st_find(f, xn), *y = tfc_st_find(f, yn);
            TFC_ASSERT(x && y && x->shape.dim[1] == t);
            void *xs = malloc(x->nbytes);
            memcpy(xs, x->data, x->nbytes);
            float *got = tfc_test_run_at(m, t, xs, 4), *want = malloc((size_t)y->numel * 4);
            tfc_st_tensor_to_f32(y, want);
            CU_ASSERT_EQUAL(y->numel, 4 * tfc_shape_numel(tfc_model_output_shape(m)));
            for (int64_t k = 0; k < y->numel; k++) {
                double d = fabs((double)got[k] - want[k]);
                *worst_abs = fmax(*worst_abs, d);
                *worst_rel = fmax(*worst_rel, d / fmax(fabs(want[k]), 1e-2));
            }
            free(xs), free(got), free(want);
        }
        tfc_model_free(m);
        tfc_st_close(f);
    }
}
