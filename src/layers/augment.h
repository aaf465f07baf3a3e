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

/* The eleven operations of Keras's RandAugment and AugMix policies, numbered in RandAugment's
 * order: RandomShear, RandomTranslation, RandomRotation, RandomBrightness,
 * RandomColorDegeneration, RandomContrast, RandomSharpness, RandomPosterization,
 * Solarization, AutoContrast, Equalization (layers/rand_augment.c). */
#define TFC_POLICY_NOPS 11

/* The checks the policies share, as Keras's sub-layers make them: factor in [0, 1] (a number
 * f: [0, f]) gives [*lo, *hi]; value_range (none: [0, 255], set) a pair of distinct numbers;
 * an image, of 3 channels or 1 when `luma` (RandomColorDegeneration among the operations).
 * Errors name l. */
tfc_status tfc_augment_policy_check(tfc_layer *l, const tfc_float_list *factor,
                                    tfc_float_list *value_range, int luma, double *lo,
                                    double *hi, tfc_error *err);

/* Builds into d (overwritten; d->args allocated, the caller frees them) the tfc layer of
 * operation j as Keras's policies build it from the range [lo, hi], value_range and
 * interpolation (0 nearest, 1 bilinear), at l's place; its errors name l. */
tfc_status tfc_augment_policy_op(tfc_layer *l, int j, double lo, double hi,
                                 const tfc_float_list *value_range, int interpolation,
                                 tfc_layer *d, tfc_error *err);

/* The backend ops the eleven operations need (a layer's `needs`). */
const char *const *tfc_augment_policy_needs(const tfc_layer *l);

/* AugMix's draws at a step (layers/aug_mix.c): per chain c and slot s the operation, an
 * index into Keras's list (its order: RandomShear, RandomTranslation, RandomRotation,
 * RandomPosterization, Solarization, AutoContrast, Equalization, RandomBrightness,
 * RandomColorDegeneration, RandomContrast, RandomSharpness) or -1 (the slot skipped); the
 * chains' Dirichlet weights and the Beta weight of the input. */
#define TFC_AUG_MIX_MAX 32
typedef struct tfc_aug_mix_draws {
    int pick[TFC_AUG_MIX_MAX][TFC_AUG_MIX_MAX];
    float chain_weight[TFC_AUG_MIX_MAX];
    float weight;
} tfc_aug_mix_draws;

/* The draws of step `step` from the stream its forward uses; l a built AugMix that has run
 * a forward (which sets its stream). */
void tfc_aug_mix_draw(const tfc_layer *l, uint64_t step, tfc_aug_mix_draws *d);

/* For tests: every later step of l (built) uses d (copied) in place of its draws, as Keras's
 * transform_images takes a transformation; NULL: its own again. The operations still draw
 * their own magnitudes. */
void tfc_aug_mix_fix_draws(const tfc_layer *l, const tfc_aug_mix_draws *d);

#endif
