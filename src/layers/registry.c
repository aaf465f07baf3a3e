/* The layer registry: every layer type in one explicit array (no self-registration, which
 * vanishes under static linking). Add a layer here and in its own file. */
#include <string.h>

#include "layers/layer.h"

extern const tfc_layer_ops tfc_dense_ops, tfc_conv2d_ops, tfc_lstm_ops, tfc_dropout_ops,
    tfc_embedding_ops, tfc_flatten_ops, tfc_reshape_ops, tfc_activation_ops,
    tfc_max_pooling2d_ops, tfc_average_pooling2d_ops, tfc_global_average_pooling2d_ops,
    tfc_batch_normalization_ops, tfc_add_ops, tfc_concatenate_ops, tfc_conv1d_ops,
    tfc_max_pooling1d_ops, tfc_average_pooling1d_ops, tfc_global_max_pooling1d_ops,
    tfc_global_average_pooling1d_ops, tfc_depthwise_conv2d_ops, tfc_zero_padding2d_ops,
    tfc_cropping2d_ops, tfc_up_sampling2d_ops, tfc_global_max_pooling2d_ops, tfc_multiply_ops,
    tfc_conv2d_transpose_ops, tfc_layer_normalization_ops, tfc_rms_normalization_ops,
    tfc_position_embedding_ops, tfc_token_and_position_embedding_ops, tfc_multi_head_attention_ops,
    tfc_gru_ops, tfc_bidirectional_ops, tfc_separable_conv2d_ops, tfc_random_flip_ops,
    tfc_random_translation_ops, tfc_random_rotation_ops, tfc_random_zoom_ops,
    tfc_random_contrast_ops, tfc_masking_ops, tfc_relu_ops, tfc_leaky_relu_ops, tfc_elu_ops,
    tfc_softmax_ops, tfc_prelu_ops, tfc_rescaling_ops, tfc_subtract_ops, tfc_average_ops,
    tfc_zero_padding1d_ops, tfc_cropping1d_ops, tfc_up_sampling1d_ops,
    tfc_spatial_dropout1d_ops, tfc_spatial_dropout2d_ops, tfc_spatial_dropout3d_ops,
    tfc_alpha_dropout_ops, tfc_gaussian_noise_ops, tfc_gaussian_dropout_ops,
    tfc_activity_regularization_ops;
extern const tfc_layer_ops tfc_group_normalization_ops;
extern const tfc_layer_ops tfc_identity_ops, tfc_repeat_vector_ops;
extern const tfc_layer_ops tfc_normalization_ops;
extern const tfc_layer_ops tfc_simple_rnn_ops, tfc_conv_lstm2d_ops, tfc_conv_lstm1d_ops,
    tfc_conv_lstm3d_ops;
extern const tfc_layer_ops tfc_rnn_layer_ops;
extern const tfc_layer_ops tfc_time_distributed_ops;
extern const tfc_layer_ops tfc_attention_ops, tfc_additive_attention_ops;
extern const tfc_layer_ops tfc_conv1d_transpose_ops, tfc_separable_conv1d_ops,
    tfc_depthwise_conv1d_ops;
extern const tfc_layer_ops tfc_permute_ops, tfc_unit_normalization_ops, tfc_layer_scale_ops,
    tfc_custom_scale_ops;
extern const tfc_layer_ops tfc_maximum_ops, tfc_minimum_ops;
extern const tfc_layer_ops tfc_dot_ops;
extern const tfc_layer_ops tfc_zero_padding3d_ops, tfc_cropping3d_ops, tfc_up_sampling3d_ops;
extern const tfc_layer_ops tfc_conv3d_ops, tfc_max_pooling3d_ops, tfc_average_pooling3d_ops,
    tfc_global_max_pooling3d_ops, tfc_global_average_pooling3d_ops;
extern const tfc_layer_ops tfc_resizing_ops, tfc_center_crop_ops, tfc_random_crop_ops;
extern const tfc_layer_ops tfc_random_brightness_ops;
extern const tfc_layer_ops tfc_random_grayscale_ops, tfc_random_invert_ops, tfc_solarization_ops,
    tfc_random_posterization_ops, tfc_random_color_degeneration_ops, tfc_random_saturation_ops,
    tfc_random_hue_ops, tfc_random_color_jitter_ops;
extern const tfc_layer_ops tfc_random_shear_ops, tfc_random_erasing_ops;
extern const tfc_layer_ops tfc_random_gaussian_blur_ops;
extern const tfc_layer_ops tfc_auto_contrast_ops, tfc_equalization_ops, tfc_clahe_ops;
extern const tfc_layer_ops tfc_random_elastic_transform_ops;
extern const tfc_layer_ops tfc_random_perspective_ops, tfc_random_sharpness_ops;
extern const tfc_layer_ops tfc_rand_augment_ops;
extern const tfc_layer_ops tfc_aug_mix_ops;
extern const tfc_layer_ops tfc_group_query_attention_ops;
extern const tfc_layer_ops tfc_einsum_dense_ops;
extern const tfc_layer_ops tfc_adaptive_average_pooling1d_ops,
    tfc_adaptive_average_pooling2d_ops, tfc_adaptive_average_pooling3d_ops,
    tfc_adaptive_max_pooling1d_ops, tfc_adaptive_max_pooling2d_ops, tfc_adaptive_max_pooling3d_ops;
extern const tfc_layer_ops tfc_conv3d_transpose_ops;
extern const tfc_layer_ops tfc_spectral_normalization_ops;
extern const tfc_layer_ops tfc_stft_spectrogram_ops, tfc_mel_spectrogram_ops;
extern const tfc_layer_ops tfc_category_encoding_ops, tfc_discretization_ops,
    tfc_integer_lookup_ops, tfc_hashing_ops;
extern const tfc_layer_ops tfc_hashed_crossing_ops;

const tfc_layer_ops *const tfc_layer_registry[] = {
    &tfc_dense_ops,          &tfc_conv2d_ops,           &tfc_lstm_ops,
    &tfc_dropout_ops,        &tfc_embedding_ops,        &tfc_flatten_ops,
    &tfc_reshape_ops,        &tfc_activation_ops,       &tfc_max_pooling2d_ops,
    &tfc_average_pooling2d_ops, &tfc_global_average_pooling2d_ops,
    &tfc_batch_normalization_ops, &tfc_add_ops,         &tfc_concatenate_ops,
    &tfc_conv1d_ops,         &tfc_max_pooling1d_ops,    &tfc_average_pooling1d_ops,
    &tfc_global_max_pooling1d_ops, &tfc_global_average_pooling1d_ops,
    &tfc_depthwise_conv2d_ops, &tfc_zero_padding2d_ops,    &tfc_cropping2d_ops,
    &tfc_up_sampling2d_ops,  &tfc_global_max_pooling2d_ops, &tfc_multiply_ops,
    &tfc_conv2d_transpose_ops,
    &tfc_layer_normalization_ops, &tfc_rms_normalization_ops, &tfc_position_embedding_ops,
    &tfc_group_normalization_ops,
    &tfc_token_and_position_embedding_ops,
    &tfc_multi_head_attention_ops,
    &tfc_attention_ops,      &tfc_additive_attention_ops,
    &tfc_gru_ops,            &tfc_bidirectional_ops,
    &tfc_simple_rnn_ops,     &tfc_conv_lstm2d_ops,     &tfc_conv_lstm1d_ops,
    &tfc_conv_lstm3d_ops,
    &tfc_rnn_layer_ops,
    &tfc_separable_conv2d_ops,
    &tfc_random_flip_ops,    &tfc_random_translation_ops, &tfc_random_rotation_ops,
    &tfc_random_zoom_ops,    &tfc_random_contrast_ops,  &tfc_masking_ops,
    &tfc_relu_ops,           &tfc_leaky_relu_ops,       &tfc_elu_ops,
    &tfc_softmax_ops,        &tfc_prelu_ops,            &tfc_rescaling_ops,
    &tfc_subtract_ops,       &tfc_average_ops,          &tfc_zero_padding1d_ops,
    &tfc_cropping1d_ops,     &tfc_up_sampling1d_ops,
    &tfc_spatial_dropout1d_ops, &tfc_spatial_dropout2d_ops, &tfc_spatial_dropout3d_ops,
    &tfc_alpha_dropout_ops,  &tfc_gaussian_noise_ops,   &tfc_gaussian_dropout_ops,
    &tfc_activity_regularization_ops,
    &tfc_identity_ops,       &tfc_repeat_vector_ops,    &tfc_normalization_ops,
    &tfc_time_distributed_ops,
    &tfc_conv1d_transpose_ops, &tfc_separable_conv1d_ops, &tfc_depthwise_conv1d_ops,
    &tfc_permute_ops,        &tfc_unit_normalization_ops, &tfc_layer_scale_ops,
    &tfc_custom_scale_ops,
    &tfc_maximum_ops,        &tfc_minimum_ops,
    &tfc_dot_ops,
    &tfc_zero_padding3d_ops, &tfc_cropping3d_ops,     &tfc_up_sampling3d_ops,
    &tfc_conv3d_ops,         &tfc_max_pooling3d_ops,    &tfc_average_pooling3d_ops,
    &tfc_global_max_pooling3d_ops, &tfc_global_average_pooling3d_ops,
    &tfc_resizing_ops,       &tfc_center_crop_ops,      &tfc_random_crop_ops,
    &tfc_random_brightness_ops,
    &tfc_random_grayscale_ops, &tfc_random_invert_ops, &tfc_solarization_ops,
    &tfc_random_posterization_ops, &tfc_random_color_degeneration_ops,
    &tfc_random_saturation_ops, &tfc_random_hue_ops, &tfc_random_color_jitter_ops,
    &tfc_random_shear_ops,   &tfc_random_erasing_ops,   &tfc_random_gaussian_blur_ops,
    &tfc_auto_contrast_ops,  &tfc_equalization_ops, &tfc_clahe_ops,
    &tfc_random_elastic_transform_ops,
    &tfc_random_perspective_ops, &tfc_random_sharpness_ops, &tfc_rand_augment_ops,
    &tfc_aug_mix_ops,
    &tfc_group_query_attention_ops,
    &tfc_einsum_dense_ops,
    &tfc_adaptive_average_pooling1d_ops, &tfc_adaptive_average_pooling2d_ops,
    &tfc_adaptive_average_pooling3d_ops, &tfc_adaptive_max_pooling1d_ops,
    &tfc_adaptive_max_pooling2d_ops, &tfc_adaptive_max_pooling3d_ops,
    &tfc_conv3d_transpose_ops,
    &tfc_spectral_normalization_ops,
    &tfc_stft_spectrogram_ops, &tfc_mel_spectrogram_ops,
    &tfc_category_encoding_ops, &tfc_discretization_ops, &tfc_integer_lookup_ops,
    &tfc_hashing_ops,
    &tfc_hashed_crossing_ops,
    NULL};

/* Keras's other names for the same classes (keras.layers.MaxPool2D is MaxPooling2D): a layer
 * written either way is the same layer, named, saved and exported under its class's name, as
 * Keras does (a MaxPool2D's default name is max_pooling2d). */
static const struct {
    const char *alias, *type;
} aliases[] = {
    {"AvgPool1D", "AveragePooling1D"},
    {"AvgPool2D", "AveragePooling2D"},
    {"AvgPool3D", "AveragePooling3D"},
    {"MaxPool1D", "MaxPooling1D"},
    {"MaxPool2D", "MaxPooling2D"},
    {"MaxPool3D", "MaxPooling3D"},
    {"GlobalAvgPool1D", "GlobalAveragePooling1D"},
    {"GlobalAvgPool2D", "GlobalAveragePooling2D"},
    {"GlobalAvgPool3D", "GlobalAveragePooling3D"},
    {"GlobalMaxPool1D", "GlobalMaxPooling1D"},
    {"GlobalMaxPool2D", "GlobalMaxPooling2D"},
    {"GlobalMaxPool3D", "GlobalMaxPooling3D"},
    {"Convolution1D", "Conv1D"},
    {"Convolution2D", "Conv2D"},
    {"Convolution3D", "Conv3D"},
    {"Convolution1DTranspose", "Conv1DTranspose"},
    {"Convolution2DTranspose", "Conv2DTranspose"},
    {"Convolution3DTranspose", "Conv3DTranspose"},
    {"SeparableConvolution1D", "SeparableConv1D"},
    {"SeparableConvolution2D", "SeparableConv2D"},
    {NULL, NULL}};

const tfc_layer_ops *tfc_layer_lookup(const char *type)
{
    for (int i = 0; aliases[i].alias; i++)
        if (strcmp(aliases[i].alias, type) == 0) type = aliases[i].type;
    for (int i = 0; tfc_layer_registry[i]; i++)
        if (strcmp(tfc_layer_registry[i]->type, type) == 0) return tfc_layer_registry[i];
    return NULL;
}

const char *const *tfc_layer_type_names(void)
{
    static const char *names[sizeof tfc_layer_registry / sizeof *tfc_layer_registry];
    if (!names[0])
        for (int i = 0; tfc_layer_registry[i]; i++) names[i] = tfc_layer_registry[i]->type;
    return names;
}
