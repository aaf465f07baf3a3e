/* What the augmentation layers share (layers/augment.c and the layers built like them):
 * Keras's check of a factor argument, the image check, and a layer's random stream. */
#ifndef TFC_LAYERS_AUGMENT_H
#define TFC_LAYERS_AUGMENT_H

#include "layers/layer.h"

/* The bounds a factor's numbers must keep: [bound_lo, bound_hi] ((bound_lo, ... with strict);
 * base_rule: BaseImagePreprocessingLayer._set_factor's looser check of a pair. */
typedef struct tfc_factor_rule {
    double bound_lo, bound_hi;
    int strict, base_rule;
} tfc_factor_rule;

/* The range [*lo, *hi] a factor argument `arg` gives: a number f [max(-|f|, bound_lo), |f|],
 * a pair its two values sorted; an error naming arg otherwise. */
tfc_status tfc_augment_factor_range(const tfc_layer *l, const char *arg,
                                    const tfc_float_list *f, tfc_factor_rule r, float *lo,
                                    float *hi, tfc_error *err);

/* The input must be an image (rows, cols, channels); the output has its shape. */
tfc_status tfc_augment_same_shape(tfc_layer *l, tfc_error *err);

/* The layer's stream: its seed, when set (non-zero), mixed into the run's. */
uint64_t tfc_augment_key(const tfc_layer *l, int seed);

/* RandAugment's operation (0 to 10, Keras's order) at pick s of step `step`, from the stream
 * its forward at that step uses (layers/rand_augment.c); l a built RandAugment that has run
 * a forward (which sets its stream). */
int tfc_rand_augment_pick(const tfc_layer *l, uint64_t step, int s);

#endif
