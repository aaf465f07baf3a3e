#!/usr/bin/env python3
"""tfc-import on the models keras.io's examples write, as their users write them.

Each case builds, in Python, a small version of a keras.io example's model (the example's own
code, its sizes shrunk; random weights, no training), compiles it as the example does, saves
it as a `.keras` archive and runs the user's path on it:

  bin/tfc-import CASE.keras --out DIR
  bin/tfc-predict DIR/model.yaml --weights DIR/weights.safetensors --input x.npy --output y.npy

then compares tfc's outputs with Keras's `model.predict(x)` (max |tfc - Keras| over max
|Keras| <= 1e-5). One line per case: `ok` with the difference, or the first failing tool's
error. Where the import stops at the model file with tfc's `max_length` error (an example's
variable-length `keras.Input(shape=(None,))`), the script does what the error tells the
user: adds `max_length` to the model file and imports the weights into it with `--model`.

Not run by `make test` (Keras is not a CI dependency); nothing is written into the tree.
  KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_import_examples.py [CASE...]
"""
import os
import re
import subprocess
import sys
import tempfile

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras
import numpy as np

L = keras.layers
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "bin")
N = 4  # examples per case


def normal(rng, *shape):
    return rng.normal(size=shape).astype(np.float32)


def ids(rng, vocab, *shape):
    return rng.integers(1, vocab, size=shape).astype(np.int32)


# ---- the cases: each returns (model, x, compile kwargs) ------------------------------------

def mnist_convnet(rng):
    """keras.io/examples/vision/mnist_convnet (28x28 shrunk to 12x12)."""
    model = keras.Sequential([
        keras.Input(shape=(12, 12, 1)),
        L.Conv2D(8, kernel_size=(3, 3), activation="relu"),
        L.MaxPooling2D(pool_size=(2, 2)),
        L.Conv2D(16, kernel_size=(3, 3), activation="relu"),
        L.MaxPooling2D(pool_size=(2, 2)),
        L.Flatten(),
        L.Dropout(0.5),
        L.Dense(10, activation="softmax"),
    ])
    return model, normal(rng, N, 12, 12, 1), dict(
        loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])


def image_classification(rng):
    """keras.io/examples/vision/image_classification_from_scratch: the augmentation as a
    Sequential inside the model, Rescaling, the Xception-like residual blocks."""
    data_augmentation = keras.Sequential([L.RandomFlip("horizontal"), L.RandomRotation(0.1)])
    inputs = keras.Input(shape=(16, 16, 3))
    x = data_augmentation(inputs)
    x = L.Rescaling(1.0 / 255)(x)
    x = L.Conv2D(8, 3, strides=2, padding="same")(x)
    x = L.BatchNormalization()(x)
    x = L.Activation("relu")(x)
    previous_block_activation = x
    for size in [8, 16]:
        x = L.Activation("relu")(x)
        x = L.SeparableConv2D(size, 3, padding="same")(x)
        x = L.BatchNormalization()(x)
        x = L.Activation("relu")(x)
        x = L.SeparableConv2D(size, 3, padding="same")(x)
        x = L.BatchNormalization()(x)
        x = L.MaxPooling2D(3, strides=2, padding="same")(x)
        residual = L.Conv2D(size, 1, strides=2, padding="same")(previous_block_activation)
        x = L.add([x, residual])
        previous_block_activation = x
    x = L.SeparableConv2D(32, 3, padding="same")(x)
    x = L.BatchNormalization()(x)
    x = L.Activation("relu")(x)
    x = L.GlobalAveragePooling2D()(x)
    x = L.Dropout(0.25)(x)
    outputs = L.Dense(1, activation=None)(x)
    x_in = rng.uniform(0, 255, size=(N, 16, 16, 3)).astype(np.float32)
    return keras.Model(inputs, outputs), x_in, dict(
        optimizer=keras.optimizers.Adam(3e-4),
        loss=keras.losses.BinaryCrossentropy(from_logits=True),
        metrics=[keras.metrics.BinaryAccuracy(name="acc")])


def transformer_text(rng):
    """keras.io/examples/nlp/text_classification_with_transformer, its TransformerBlock
    written with functional layers (the token and position embeddings as two Embeddings
    added: the positions an int input of their own is not one input, so the position
    embedding is a layer over the token ids' positions: PositionEmbedding is KerasHub's)."""
    maxlen, vocab, embed_dim, num_heads, ff_dim = 10, 50, 8, 2, 16
    inputs = keras.Input(shape=(maxlen,))
    x = L.Embedding(input_dim=vocab, output_dim=embed_dim)(inputs)
    attn = L.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)(x, x)
    attn = L.Dropout(0.1)(attn)
    out1 = L.LayerNormalization(epsilon=1e-6)(L.add([x, attn]))
    ffn = keras.Sequential([L.Dense(ff_dim, activation="relu"), L.Dense(embed_dim)])
    f = ffn(out1)
    f = L.Dropout(0.1)(f)
    x = L.LayerNormalization(epsilon=1e-6)(L.add([out1, f]))
    x = L.GlobalAveragePooling1D()(x)
    x = L.Dropout(0.1)(x)
    x = L.Dense(20, activation="relu")(x)
    x = L.Dropout(0.1)(x)
    outputs = L.Dense(2, activation="softmax")(x)
    return keras.Model(inputs=inputs, outputs=outputs), ids(rng, vocab, N, maxlen).astype(
        np.float32), dict(optimizer="adam", loss="sparse_categorical_crossentropy",
                          metrics=["accuracy"])


class TransformerBlock(L.Layer):
    """The example's own subclassed block (a custom layer: tfc-import refuses it)."""

    def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1, **kwargs):
        super().__init__(**kwargs)
        self.att = L.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
        self.ffn = keras.Sequential([L.Dense(ff_dim, activation="relu"), L.Dense(embed_dim)])
        self.layernorm1 = L.LayerNormalization(epsilon=1e-6)
        self.layernorm2 = L.LayerNormalization(epsilon=1e-6)
        self.dropout1 = L.Dropout(rate)
        self.dropout2 = L.Dropout(rate)

    def call(self, inputs):
        attn_output = self.att(inputs, inputs)
        attn_output = self.dropout1(attn_output)
        out1 = self.layernorm1(inputs + attn_output)
        ffn_output = self.ffn(out1)
        ffn_output = self.dropout2(ffn_output)
        return self.layernorm2(out1 + ffn_output)


def transformer_text_subclassed(rng):
    """The same example with its TransformerBlock class, as the example writes it."""
    inputs = keras.Input(shape=(10,))
    x = L.Embedding(50, 8)(inputs)
    x = TransformerBlock(8, 2, 16)(x)
    x = L.GlobalAveragePooling1D()(x)
    outputs = L.Dense(2, activation="softmax")(x)
    return keras.Model(inputs=inputs, outputs=outputs), ids(rng, 50, N, 10).astype(
        np.float32), dict(optimizer="adam", loss="sparse_categorical_crossentropy")


def imdb_bidirectional_lstm(rng):
    """keras.io/examples/nlp/bidirectional_lstm_imdb: a variable-length int input."""
    max_features = 60
    inputs = keras.Input(shape=(None,), dtype="int32")
    x = L.Embedding(max_features, 8)(inputs)
    x = L.Bidirectional(L.LSTM(6, return_sequences=True))(x)
    x = L.Bidirectional(L.LSTM(6))(x)
    outputs = L.Dense(1, activation="sigmoid")(x)
    return keras.Model(inputs, outputs), ids(rng, max_features, N, 12), dict(
        optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])


def imdb_lstm_recurrent_dropout(rng):
    """keras-team/keras examples/imdb_lstm.py (Keras 2's): LSTM(dropout, recurrent_dropout),
    and a GRU and a SimpleRNN with recurrent dropout after it."""
    model = keras.Sequential([
        keras.Input(shape=(12,), dtype="int32"),
        L.Embedding(60, 8),
        L.LSTM(6, dropout=0.2, recurrent_dropout=0.2, return_sequences=True),
        L.GRU(5, recurrent_dropout=0.3, return_sequences=True),
        L.SimpleRNN(4, dropout=0.1, recurrent_dropout=0.25),
        L.Dense(1, activation="sigmoid"),
    ])
    return model, ids(rng, 60, N, 12), dict(optimizer="adam", loss="binary_crossentropy",
                                            metrics=["accuracy"])


def imdb_masked(rng):
    """The same with mask_zero=True and right-padded reviews, the length fixed."""
    max_features = 60
    inputs = keras.Input(shape=(12,), dtype="int32")
    x = L.Embedding(max_features, 8, mask_zero=True)(inputs)
    x = L.Bidirectional(L.LSTM(6, return_sequences=True))(x)
    x = L.Bidirectional(L.LSTM(6))(x)
    outputs = L.Dense(1, activation="sigmoid")(x)
    x_in = ids(rng, max_features, N, 12)
    for i, n in enumerate((12, 9, 4, 7)):
        x_in[i, n:] = 0
    return keras.Model(inputs, outputs), x_in, dict(
        optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])


def text_conv1d(rng):
    """keras.io/examples/nlp/text_classification_from_scratch: int64 ids of any length."""
    max_features, embedding_dim = 60, 8
    inputs = keras.Input(shape=(None,), dtype="int64")
    x = L.Embedding(max_features, embedding_dim)(inputs)
    x = L.Dropout(0.5)(x)
    x = L.Conv1D(16, 7, padding="valid", activation="relu", strides=3)(x)
    x = L.Conv1D(16, 7, padding="valid", activation="relu", strides=3)(x)
    x = L.GlobalMaxPooling1D()(x)
    x = L.Dense(16, activation="relu")(x)
    x = L.Dropout(0.5)(x)
    predictions = L.Dense(1, activation="sigmoid", name="predictions")(x)
    return keras.Model(inputs, predictions), ids(rng, max_features, N, 40), dict(
        loss="binary_crossentropy", optimizer="adam", metrics=["accuracy"])


def char_lstm(rng):
    """keras.io/examples/generative/lstm_character_level_text_generation."""
    maxlen, chars = 8, 12
    model = keras.Sequential([
        keras.Input(shape=(maxlen, chars)),
        L.LSTM(16),
        L.Dense(chars, activation="softmax"),
    ])
    x = np.eye(chars, dtype=np.float32)[rng.integers(0, chars, size=(N, maxlen))]
    return model, x, dict(loss="categorical_crossentropy",
                          optimizer=keras.optimizers.RMSprop(learning_rate=0.01))


def timeseries_conv1d(rng):
    """keras.io/examples/timeseries/timeseries_classification_from_scratch."""
    input_layer = keras.Input((20, 1))
    conv1 = L.Conv1D(filters=8, kernel_size=3, padding="same")(input_layer)
    conv1 = L.BatchNormalization()(conv1)
    conv1 = L.ReLU()(conv1)
    conv2 = L.Conv1D(filters=8, kernel_size=3, padding="same")(conv1)
    conv2 = L.BatchNormalization()(conv2)
    conv2 = L.ReLU()(conv2)
    conv3 = L.Conv1D(filters=8, kernel_size=3, padding="same")(conv2)
    conv3 = L.BatchNormalization()(conv3)
    conv3 = L.ReLU()(conv3)
    gap = L.GlobalAveragePooling1D()(conv3)
    output_layer = L.Dense(2, activation="softmax")(gap)
    return keras.Model(inputs=input_layer, outputs=output_layer), normal(rng, N, 20, 1), dict(
        optimizer="adam", loss="sparse_categorical_crossentropy",
        metrics=["sparse_categorical_accuracy"])


def weather_lstm(rng):
    """keras.io/examples/timeseries/timeseries_weather_forecasting."""
    inputs = keras.layers.Input(shape=(12, 7))
    lstm_out = keras.layers.LSTM(8)(inputs)
    outputs = keras.layers.Dense(1)(lstm_out)
    model = keras.Model(inputs=inputs, outputs=outputs)
    return model, normal(rng, N, 12, 7), dict(
        optimizer=keras.optimizers.Adam(learning_rate=0.001), loss="mse")


def denoising_autoencoder(rng):
    """keras.io/examples/vision/autoencoder."""
    input = L.Input(shape=(12, 12, 1))
    x = L.Conv2D(8, (3, 3), activation="relu", padding="same")(input)
    x = L.MaxPooling2D((2, 2), padding="same")(x)
    x = L.Conv2D(8, (3, 3), activation="relu", padding="same")(x)
    x = L.MaxPooling2D((2, 2), padding="same")(x)
    x = L.Conv2DTranspose(8, (3, 3), strides=2, activation="relu", padding="same")(x)
    x = L.Conv2DTranspose(8, (3, 3), strides=2, activation="relu", padding="same")(x)
    x = L.Conv2D(1, (3, 3), activation="sigmoid", padding="same")(x)
    autoencoder = keras.Model(input, x)
    return autoencoder, rng.uniform(size=(N, 12, 12, 1)).astype(np.float32), dict(
        optimizer="adam", loss="binary_crossentropy")


def _encoder(inputs, head_size, num_heads, ff_dim, dropout=0, plus=True):
    x = L.MultiHeadAttention(key_dim=head_size, num_heads=num_heads, dropout=dropout)(
        inputs, inputs)
    x = L.Dropout(dropout)(x)
    x = L.LayerNormalization(epsilon=1e-6)(x)
    res = x + inputs if plus else L.add([x, inputs])
    x = L.Conv1D(filters=ff_dim, kernel_size=1, activation="relu")(res)
    x = L.Dropout(dropout)(x)
    x = L.Conv1D(filters=inputs.shape[-1], kernel_size=1)(x)
    x = L.LayerNormalization(epsilon=1e-6)(x)
    return x + res if plus else L.add([x, res])


def _ts_transformer(rng, plus):
    inputs = keras.Input(shape=(10, 3))
    x = inputs
    for _ in range(2):
        x = _encoder(x, 4, 2, 4, 0.25, plus)
    x = L.GlobalAveragePooling1D(data_format="channels_last")(x)
    for dim in [8]:
        x = L.Dense(dim, activation="relu")(x)
        x = L.Dropout(0.4)(x)
    outputs = L.Dense(2, activation="softmax")(x)
    return keras.Model(inputs, outputs), normal(rng, N, 10, 3), dict(
        loss="sparse_categorical_crossentropy",
        optimizer=keras.optimizers.Adam(learning_rate=1e-4),
        metrics=["sparse_categorical_accuracy"])


def timeseries_transformer(rng):
    """keras.io/examples/timeseries/timeseries_classification_transformer, verbatim: its
    residuals are `x + inputs` (keras.ops.add in the graph)."""
    return _ts_transformer(rng, True)


def timeseries_transformer_add(rng):
    """The same with its residuals as layers.add."""
    return _ts_transformer(rng, False)


def keras2_sequential(rng):
    """A Keras 2 tutorial's Sequential: input_shape= on the first layer, no keras.Input."""
    model = keras.Sequential([
        L.Dense(16, activation="relu", input_shape=(20,)),
        L.Dropout(0.5),
        L.Dense(16, activation="relu"),
        L.Dropout(0.5),
        L.Dense(10, activation="softmax"),
    ])
    return model, normal(rng, N, 20), dict(
        loss="categorical_crossentropy",
        optimizer=keras.optimizers.SGD(learning_rate=0.01, momentum=0.9, nesterov=True),
        metrics=["accuracy"])


def sequential_built_by_call(rng):
    """A Sequential without any input shape, built by calling it on a batch."""
    model = keras.Sequential()
    model.add(L.Dense(16, activation="relu"))
    model.add(L.Dense(3))
    x = normal(rng, N, 6)
    model(x)
    return model, x, dict(optimizer="adam", loss="mse")


def compiled_objects(rng):
    """Loss and metrics as objects (keras.io's beginner guides)."""
    model = keras.Sequential([keras.Input((8,)), L.Dense(16, activation="relu"), L.Dense(5)])
    return model, normal(rng, N, 8), dict(
        optimizer=keras.optimizers.RMSprop(),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy()])


def compiled_topk(rng):
    model = keras.Sequential([keras.Input((8,)), L.Dense(16, activation="relu"),
                              L.Dense(5, activation="softmax")])
    return model, normal(rng, N, 8), dict(
        optimizer="adam", loss=keras.losses.CategoricalCrossentropy(label_smoothing=0.1),
        metrics=[keras.metrics.CategoricalAccuracy(name="acc"),
                 keras.metrics.TopKCategoricalAccuracy(k=3)])


def compiled_regression(rng):
    model = keras.Sequential([keras.Input((8,)), L.Dense(16, activation="relu"), L.Dense(1)])
    return model, normal(rng, N, 8), dict(
        optimizer="adam", loss=keras.losses.MeanSquaredError(),
        metrics=[keras.metrics.MeanAbsoluteError(), keras.metrics.RootMeanSquaredError()])


def imbalanced(rng):
    """keras.io/examples/structured_data/imbalanced_classification: its metrics."""
    model = keras.Sequential([
        keras.Input(shape=(10,)),
        L.Dense(16, activation="relu"),
        L.Dense(16, activation="relu"),
        L.Dropout(0.3),
        L.Dense(1, activation="sigmoid"),
    ])
    metrics = [keras.metrics.FalseNegatives(name="fn"), keras.metrics.FalsePositives(name="fp"),
               keras.metrics.TrueNegatives(name="tn"), keras.metrics.TruePositives(name="tp"),
               keras.metrics.Precision(name="precision"), keras.metrics.Recall(name="recall")]
    return model, normal(rng, N, 10), dict(
        optimizer=keras.optimizers.Adam(1e-2), loss="binary_crossentropy", metrics=metrics)


def regularized(rng):
    """kernel_regularizer=keras.regularizers.l2(1e-4) (keras.io's regularizer guides)."""
    model = keras.Sequential([
        keras.Input((12, 12, 1)),
        L.Conv2D(8, 3, activation="relu", kernel_regularizer=keras.regularizers.l2(1e-4)),
        L.Flatten(),
        L.Dense(16, activation="relu", kernel_regularizer=keras.regularizers.l2(1e-4),
                bias_regularizer=keras.regularizers.L1(1e-5)),
        L.Dense(4, kernel_regularizer=keras.regularizers.L1L2(l1=1e-5, l2=1e-4)),
    ])
    return model, normal(rng, N, 12, 12, 1), dict(
        optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"])


def dcgan_discriminator(rng):
    """keras.io/examples/generative/dcgan_overriding_train_step: LeakyReLU(negative_slope)."""
    discriminator = keras.Sequential([
        keras.Input(shape=(16, 16, 3)),
        L.Conv2D(8, kernel_size=4, strides=2, padding="same"),
        L.LeakyReLU(negative_slope=0.2),
        L.Conv2D(16, kernel_size=4, strides=2, padding="same"),
        L.LeakyReLU(negative_slope=0.2),
        L.Flatten(),
        L.Dropout(0.2),
        L.Dense(1, activation="sigmoid"),
    ], name="discriminator")
    return discriminator, normal(rng, N, 16, 16, 3), dict(
        optimizer="adam", loss="binary_crossentropy")


def dcgan_generator(rng):
    """The same example's generator: Dense, Reshape, Conv2DTranspose, LeakyReLU."""
    latent_dim = 8
    generator = keras.Sequential([
        keras.Input(shape=(latent_dim,)),
        L.Dense(4 * 4 * 8),
        L.Reshape((4, 4, 8)),
        L.Conv2DTranspose(8, kernel_size=4, strides=2, padding="same"),
        L.LeakyReLU(negative_slope=0.2),
        L.Conv2DTranspose(8, kernel_size=4, strides=2, padding="same"),
        L.LeakyReLU(negative_slope=0.2),
        L.Conv2D(3, kernel_size=5, padding="same", activation="sigmoid"),
    ], name="generator")
    return generator, normal(rng, N, latent_dim), dict(optimizer="adam", loss="mse")


def activations(rng):
    """The advanced activation layers at their defaults and as examples set them."""
    model = keras.Sequential([
        keras.Input((8,)),
        L.Dense(16),
        L.LeakyReLU(),
        L.Dense(16),
        L.PReLU(),
        L.Dense(16),
        L.ELU(),
        L.Dense(16),
        L.ELU(alpha=0.5),
        L.Dense(16),
        L.LeakyReLU(0.1),
        L.Dense(16),
        L.ReLU(max_value=6.0),
        L.Dense(3),
    ])
    return model, normal(rng, N, 8), dict(optimizer="adam", loss="mse")


def mixed_precision(rng, policy="mixed_float16"):
    """keras.io/guides/mixed_precision: a mixed_float16 policy, the softmax in float32
    (compared with the same weights in float32, as tfc computes them)."""
    keras.mixed_precision.set_global_policy(policy)
    try:
        inputs = keras.Input(shape=(8,), name="digits")
        x = L.Dense(16, activation="relu", name="dense_1")(inputs)
        x = L.Dense(16, activation="relu", name="dense_2")(x)
        x = L.Dense(4, name="dense_logits")(x)
        outputs = L.Activation("softmax", dtype="float32", name="predictions")(x)
        model = keras.Model(inputs=inputs, outputs=outputs)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    return model, normal(rng, N, 8), dict(
        loss="sparse_categorical_crossentropy", optimizer=keras.optimizers.RMSprop(),
        metrics=["accuracy"])


def next_frame(rng):
    """keras.io/examples/vision/conv_lstm: ConvLSTM2D with activation="relu"."""
    inp = L.Input(shape=(None, 8, 8, 1))
    x = L.ConvLSTM2D(filters=4, kernel_size=(5, 5), padding="same", return_sequences=True,
                     activation="relu")(inp)
    x = L.BatchNormalization()(x)
    x = L.ConvLSTM2D(filters=4, kernel_size=(1, 1), padding="same", return_sequences=True,
                     activation="relu")(x)
    x = L.Conv3D(filters=1, kernel_size=(3, 3, 3), activation="sigmoid", padding="same")(x)
    return keras.Model(inp, x), rng.uniform(size=(N, 3, 8, 8, 1)).astype(np.float32), dict(
        loss=keras.losses.binary_crossentropy, optimizer=keras.optimizers.Adam())


def video_time_distributed(rng):
    """A CNN per frame under TimeDistributed, then a GRU (video classification)."""
    model = keras.Sequential([
        keras.Input((4, 8, 8, 3)),
        L.TimeDistributed(L.Conv2D(4, 3, activation="relu")),
        L.TimeDistributed(L.GlobalAveragePooling2D()),
        L.GRU(6),
        L.Dense(3, activation="softmax"),
    ])
    return model, normal(rng, N, 4, 8, 8, 3), dict(optimizer="adam",
                                                   loss="sparse_categorical_crossentropy")


def structured_normalization(rng):
    """keras.io's structured-data guides: an adapted Normalization in front of an MLP."""
    norm = L.Normalization(axis=-1)
    norm.adapt(rng.normal(3.0, 2.0, size=(64, 5)).astype(np.float32))
    inputs = keras.Input(shape=(5,))
    x = norm(inputs)
    x = L.Dense(8, activation="relu")(x)
    x = L.Dropout(0.5)(x)
    outputs = L.Dense(1, activation="sigmoid")(x)
    return keras.Model(inputs, outputs), rng.normal(3.0, 2.0, size=(N, 5)).astype(
        np.float32), dict(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])


def unet_segmentation(rng):
    """keras.io/examples/vision/oxford_pets_image_segmentation: a per-pixel softmax."""
    inputs = keras.Input(shape=(16, 16, 3))
    x = L.Conv2D(8, 3, strides=2, padding="same")(inputs)
    x = L.BatchNormalization()(x)
    x = L.Activation("relu")(x)
    previous_block_activation = x
    for filters in [8, 16]:
        x = L.Activation("relu")(x)
        x = L.SeparableConv2D(filters, 3, padding="same")(x)
        x = L.BatchNormalization()(x)
        x = L.Activation("relu")(x)
        x = L.SeparableConv2D(filters, 3, padding="same")(x)
        x = L.BatchNormalization()(x)
        x = L.MaxPooling2D(3, strides=2, padding="same")(x)
        residual = L.Conv2D(filters, 1, strides=2, padding="same")(previous_block_activation)
        x = L.add([x, residual])
        previous_block_activation = x
    for filters in [16, 8, 8]:
        x = L.Activation("relu")(x)
        x = L.Conv2DTranspose(filters, 3, padding="same")(x)
        x = L.BatchNormalization()(x)
        x = L.Activation("relu")(x)
        x = L.Conv2DTranspose(filters, 3, padding="same")(x)
        x = L.BatchNormalization()(x)
        x = L.UpSampling2D(2)(x)
        residual = L.UpSampling2D(2)(previous_block_activation)
        residual = L.Conv2D(filters, 1, padding="same")(residual)
        x = L.add([x, residual])
        previous_block_activation = x
    outputs = L.Conv2D(3, 3, activation="softmax", padding="same")(x)
    return keras.Model(inputs, outputs), normal(rng, N, 16, 16, 3), dict(
        optimizer=keras.optimizers.Adam(1e-4), loss="sparse_categorical_crossentropy")


def anomaly_autoencoder(rng):
    """keras.io/examples/timeseries/timeseries_anomaly_detection: Conv1DTranspose."""
    model = keras.Sequential([
        L.Input(shape=(16, 1)),
        L.Conv1D(filters=8, kernel_size=7, padding="same", strides=2, activation="relu"),
        L.Dropout(rate=0.2),
        L.Conv1D(filters=4, kernel_size=7, padding="same", strides=2, activation="relu"),
        L.Conv1DTranspose(filters=4, kernel_size=7, padding="same", strides=2,
                          activation="relu"),
        L.Dropout(rate=0.2),
        L.Conv1DTranspose(filters=8, kernel_size=7, padding="same", strides=2,
                          activation="relu"),
        L.Conv1DTranspose(filters=1, kernel_size=7, padding="same"),
    ])
    return model, normal(rng, N, 16, 1), dict(
        optimizer=keras.optimizers.Adam(learning_rate=0.001), loss="mse")


def speaker_residual(rng):
    """keras.io/examples/audio/speaker_recognition_using_cnn: its residual_block."""
    def residual_block(x, filters, conv_num=3, activation="relu"):
        s = keras.layers.Conv1D(filters, 1, padding="same")(x)
        for i in range(conv_num - 1):
            x = keras.layers.Conv1D(filters, 3, padding="same")(x)
            x = keras.layers.Activation(activation)(x)
        x = keras.layers.Conv1D(filters, 3, padding="same")(x)
        x = keras.layers.Add()([x, s])
        x = keras.layers.Activation(activation)(x)
        return keras.layers.MaxPool1D(pool_size=2, strides=2)(x)
    inputs = keras.layers.Input(shape=(32, 1), name="input")
    x = residual_block(inputs, 4, 2)
    x = residual_block(x, 8, 3)
    x = keras.layers.AveragePooling1D(pool_size=3, strides=3)(x)
    x = keras.layers.Flatten()(x)
    x = keras.layers.Dense(16, activation="relu")(x)
    outputs = keras.layers.Dense(3, activation="softmax", name="output")(x)
    return keras.models.Model(inputs=inputs, outputs=outputs), normal(rng, N, 32, 1), dict(
        optimizer="Adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])


def transfer_learning(rng):
    """keras.io/guides/transfer_learning: a frozen application inside a functional model."""
    base_model = keras.applications.MobileNetV2(weights=None, input_shape=(32, 32, 3),
                                                include_top=False, alpha=0.35)
    base_model.trainable = False
    inputs = keras.Input(shape=(32, 32, 3))
    x = L.RandomFlip("horizontal")(inputs)
    x = L.Rescaling(scale=1 / 127.5, offset=-1)(x)
    x = base_model(x, training=False)
    x = L.GlobalAveragePooling2D()(x)
    x = L.Dropout(0.2)(x)
    outputs = L.Dense(1)(x)
    return keras.Model(inputs, outputs), rng.uniform(0, 255, size=(2, 32, 32, 3)).astype(
        np.float32), dict(optimizer=keras.optimizers.Adam(),
                          loss=keras.losses.BinaryCrossentropy(from_logits=True),
                          metrics=[keras.metrics.BinaryAccuracy()])


# One layer as examples write it, between a Dense-free input and a Flatten + Dense head:
# (case name, input shape, the layers).
FORMS = [
    ("bn_axis3", (6, 6, 2), lambda: [L.BatchNormalization(axis=3)]),
    ("bn_momentum", (6, 6, 2), lambda: [L.BatchNormalization(momentum=0.9, epsilon=1e-5)]),
    ("bn_center_false", (6, 6, 2), lambda: [L.BatchNormalization(center=False, scale=False)]),
    ("concat_axis3", (6, 6, 2), None),
    ("dropout_seed", (8,), lambda: [L.Dropout(0.3, seed=42)]),
    ("flip_seed", (6, 6, 2), lambda: [L.RandomFlip("horizontal_and_vertical", seed=1)]),
    ("he_normal", (6, 6, 2), lambda: [L.Conv2D(4, 3, kernel_initializer="he_normal",
                                               use_bias=False)]),
    ("init_object", (8,), lambda: [L.Dense(4, kernel_initializer=keras.initializers.RandomNormal(
        mean=0.0, stddev=0.02))]),
    ("init_seed", (8,), lambda: [L.Dense(4, kernel_initializer=keras.initializers.GlorotUniform(
        seed=42))]),
    ("lstm_recurrent_dropout", (5, 3), lambda: [L.LSTM(4, dropout=0.2, recurrent_dropout=0.2)]),
    ("lstm_unroll", (5, 3), lambda: [L.LSTM(4, unroll=True)]),
    ("gru_reset_before", (5, 3), lambda: [L.GRU(4, reset_after=False)]),
    ("conv1d_causal", (8, 3), lambda: [L.Conv1D(4, 2, padding="causal", dilation_rate=2)]),
    ("maxpool_strides", (8, 8, 2), lambda: [L.MaxPooling2D(pool_size=(3, 3), strides=(2, 2))]),
    ("zeropad_tuple", (6, 6, 2), lambda: [L.ZeroPadding2D(padding=((1, 2), (0, 1)))]),
    ("upsampling_bilinear", (4, 4, 2), lambda: [L.UpSampling2D(size=(2, 2),
                                                               interpolation="bilinear")]),
    ("activation_fn", (8,), lambda: [L.Dense(4, activation=keras.activations.gelu),
                                     L.Activation(keras.activations.swish)]),
    ("relu6_layer", (8,), lambda: [L.Dense(4), L.ReLU(6.0)]),
    ("softmax_layer", (8,), lambda: [L.Dense(4), L.Softmax(axis=-1)]),
    ("gelu_approx", (8,), lambda: [L.Dense(4, activation="gelu")]),
    ("layernorm_axes", (4, 5), lambda: [L.LayerNormalization(axis=[1, 2])]),
    ("layernorm_noscale", (4, 5), lambda: [L.LayerNormalization(center=False, scale=False,
                                                                rms_scaling=False)]),
    ("mha_attention_axes", (4, 5), None),
    ("reshape_minus1", (4, 6), lambda: [L.Reshape((-1, 3))]),
    ("permute", (4, 6), lambda: [L.Permute((2, 1))]),
    ("gap_keepdims", (6, 6, 2), lambda: [L.GlobalAveragePooling2D(keepdims=True)]),
    ("dense_3d", (4, 6), lambda: [L.Dense(3)]),
    ("embedding_init", None, None),
    ("gaussian_noise", (8,), lambda: [L.GaussianNoise(0.1), L.Dense(4)]),
    ("separable_dm", (6, 6, 2), lambda: [L.SeparableConv2D(4, 3, depth_multiplier=2,
                                                           use_bias=False)]),
    ("depthwise_relu6", (6, 6, 2), lambda: [L.DepthwiseConv2D(3, padding="same",
                                                              use_bias=False),
                                            L.BatchNormalization(), L.ReLU(6.0)]),
    ("conv_groups", (6, 6, 4), lambda: [L.Conv2D(4, 3, groups=2)]),
    ("spatial_dropout", (6, 6, 2), lambda: [L.SpatialDropout2D(0.2)]),
    ("resizing", (6, 6, 2), lambda: [L.Resizing(4, 4)]),
    ("augment", (8, 8, 3), lambda: [L.RandomFlip("horizontal"), L.RandomRotation(0.1),
                                    L.RandomZoom(0.1), L.RandomTranslation(0.1, 0.1),
                                    L.RandomContrast(0.2)]),
    ("bn_axis1_dense", (8,), lambda: [L.Dense(6), L.BatchNormalization(axis=1)]),
    ("layernorm_axis2", (4, 5), lambda: [L.LayerNormalization(axis=2)]),
    ("cropping_tuple", (8, 8, 2), lambda: [L.Cropping2D(cropping=((2, 1), (1, 2)))]),
    ("gmp_keepdims", (6, 6, 2), lambda: [L.GlobalMaxPooling2D(keepdims=True)]),
    ("bidir_sum", (5, 3), lambda: [L.Bidirectional(L.GRU(4, return_sequences=True),
                                                         merge_mode="sum")]),
    ("simple_rnn_relu", (5, 3), lambda: [L.SimpleRNN(4, activation="relu")]),
    ("mha_cross_output_shape", (4, 5), None),
    ("normalization_given", (5,), lambda: [L.Normalization(mean=[1.0, 2, 3, 4, 5],
                                                           variance=[1.0, 4, 9, 16, 25])]),
    ("dilated_conv", (8, 8, 2), lambda: [L.Conv2D(3, 3, dilation_rate=2, padding="same")]),
    ("avgpool_same", (7, 7, 2), lambda: [L.AveragePooling2D(3, strides=2, padding="same")]),
    ("conv1d_channels_dense", (6, 4), lambda: [L.Conv1D(4, 3, activation="gelu"),
                                               L.MaxPooling1D(2, padding="same")]),
    ("upsampling1d", (4, 3), lambda: [L.UpSampling1D(2)]),
    ("repeat_vector", (3,), lambda: [L.RepeatVector(4), L.LSTM(2, return_sequences=True),
                                     L.TimeDistributed(L.Dense(2))]),
    ("activity_reg", (8,), lambda: [L.Dense(4, activity_regularizer=keras.regularizers.l1(1e-5))]),
    ("constraint", (8,), lambda: [L.Dense(4, kernel_constraint=keras.constraints.MaxNorm(3))]),
]


def form_case(name, shape, make):
    def case(rng):
        if name == "concat_axis3":
            inp = keras.Input(shape)
            a = L.Conv2D(2, 1)(inp)
            h = L.Concatenate(axis=3)([a, inp])
        elif name == "mha_attention_axes":
            inp = keras.Input(shape)
            h = L.MultiHeadAttention(2, 3, attention_axes=(1,))(inp, inp)
        elif name == "mha_cross_output_shape":
            inp = keras.Input(shape)
            q = L.Dense(6)(inp)
            h = L.MultiHeadAttention(2, 3, output_shape=(7,))(q, inp, key=inp)
        elif name == "embedding_init":
            inp = keras.Input((6,), dtype="int32")
            h = L.Embedding(20, 4, embeddings_initializer="uniform")(inp)
        else:
            inp = keras.Input(shape)
            h = inp
            for layer in make():
                h = layer(h)
        if len(h.shape) > 2:
            h = L.Flatten()(h)
        out = L.Dense(3)(h)
        x = (ids(rng, 20, N, 6) if name == "embedding_init" else normal(rng, N, *shape))
        return keras.Model(inp, out), x, dict(optimizer="adam", loss="mse")
    case.__name__ = "form_" + name
    return case


def application(make, size=32, **kw):
    def case(rng):
        model = make(weights=None, input_shape=(size, size, 3), classes=4, **kw)
        return model, rng.uniform(0, 255, size=(2, size, size, 3)).astype(np.float32), dict(
            optimizer="adam", loss="sparse_categorical_crossentropy")
    case.__name__ = "app_" + make.__name__.lower()
    return case


APPS = [application(keras.applications.MobileNetV2, alpha=0.35),
        application(keras.applications.MobileNetV3Small, alpha=0.75),
        application(keras.applications.EfficientNetB0),
        application(keras.applications.DenseNet121),
        application(keras.applications.ResNet50),
        application(keras.applications.VGG16),
        application(keras.applications.NASNetMobile),
        application(keras.applications.EfficientNetV2B0),
        application(keras.applications.ConvNeXtTiny),
        application(keras.applications.MobileNet, alpha=0.25),
        application(keras.applications.ResNet50V2),
        application(keras.applications.InceptionV3, size=75),
        application(keras.applications.Xception, size=71),
        application(keras.applications.InceptionResNetV2, size=75)]


CASES = [mnist_convnet, image_classification, transformer_text, transformer_text_subclassed,
         imdb_bidirectional_lstm, imdb_lstm_recurrent_dropout, imdb_masked, text_conv1d, char_lstm, timeseries_conv1d,
         weather_lstm, denoising_autoencoder, timeseries_transformer, timeseries_transformer_add,
         keras2_sequential, sequential_built_by_call, compiled_objects, compiled_topk,
         compiled_regression, imbalanced, regularized, dcgan_discriminator, dcgan_generator,
         activations, mixed_precision, next_frame, video_time_distributed,
         structured_normalization, unet_segmentation, anomaly_autoencoder, speaker_residual,
         transfer_learning] + [form_case(*f) for f in FORMS] + APPS


# ---- running tfc ---------------------------------------------------------------------------

def perturb(model, rng):
    """Biases, gammas and betas off their constants; moving statistics off 0 and 1; a
    Normalization's statistics as they are (Keras computes with the ones adapt set)."""
    fixed = {id(v) for layer in model._flatten_layers(include_self=False, recursive=True)
             if isinstance(layer, L.Normalization) for v in layer.weights}
    for v in model.weights:
        if id(v) in fixed:
            continue
        a = np.asarray(v.numpy()).astype(np.float32)
        leaf = v.path.split("/")[-1]
        if leaf == "moving_variance":
            a = rng.uniform(0.5, 2.0, size=a.shape)
        elif leaf == "moving_mean":
            a = rng.normal(0.0, 0.5, size=a.shape)
        elif a.ndim <= 1 or np.all(a == a.flat[0]):
            a = a + rng.normal(0.0, 0.2, size=a.shape)
        else:
            continue
        v.assign(a.astype(v.dtype))


def tool(*args):
    p = subprocess.run([os.path.join(BIN, args[0]), *args[1:]], capture_output=True, text=True)
    return p.returncode, (p.stderr.strip() or p.stdout.strip())


def first_error(text):
    lines = [ln for ln in text.splitlines() if "error" in ln] or text.splitlines() or [""]
    return lines[0]


def run_case(case, tmp, verbose):
    name = case.__name__
    keras.utils.clear_session()
    keras.utils.set_random_seed(7)
    rng = np.random.default_rng(7)
    model, x, compile_args = case(rng)
    perturb(model, rng)
    model.compile(**compile_args)
    y = np.asarray(model.predict(x, verbose=0), dtype=np.float32)
    if name == "mixed_precision":  # tfc computes in float32: the same weights in float32
        keras.utils.clear_session()
        twin, _, _ = case(np.random.default_rng(7), policy="float32")
        twin.set_weights(model.get_weights())
        y16, y = y, np.asarray(twin.predict(x, verbose=0), dtype=np.float32)
        print("  mixed_float16 against float32 in Keras: %.2g" % (
            np.max(np.abs(y16 - y)) / np.max(np.abs(y))))
    src = os.path.join(tmp, name + ".keras")
    model.save(src)
    out = os.path.join(tmp, name)
    xp, yp = os.path.join(tmp, name + ".x.npy"), os.path.join(tmp, name + ".y.npy")
    np.save(xp, x)
    rc, text = tool("tfc-import", src, "--out", out, "--overwrite")
    if verbose:
        print(text)
    note = ""
    if rc and "max_length" in text and os.path.exists(os.path.join(out, "model.yaml")):
        # what the error tells the user to do: the longest sequence into the model file
        path = os.path.join(out, "model.yaml")
        with open(path) as f:
            yaml = f.read()
        yaml = re.sub(r"( *)(batch_shape: \[null, null[^\]]*\])",
                      r"\1\2\n\1max_length: %d" % x.shape[1], yaml, count=1)
        with open(path, "w") as f:
            f.write(yaml)
        rc, text = tool("tfc-import", src, "--model", path, "--out", out, "--overwrite")
        note = " (max_length added to model.yaml, --model)"
    if rc:
        return "tfc-import: " + first_error(text)
    rc, text = tool("tfc-predict", os.path.join(out, "model.yaml"), "--weights",
                    os.path.join(out, "weights.safetensors"), "--input", xp, "--output", yp)
    if rc:
        return "tfc-predict: " + first_error(text)
    got = np.load(yp).astype(np.float32).reshape(y.shape)
    rel = float(np.max(np.abs(got - y)) / max(np.max(np.abs(y)), 1e-30))
    return ("ok" if rel <= 1e-5 else "DIFFERS") + " %.2g%s" % (rel, note)


def main():
    names = sys.argv[1:]
    verbose = bool(names)
    cases = [c for c in CASES if not names or c.__name__ in names]
    keep = os.environ.get("KEEP")  # a folder to keep the files in
    with tempfile.TemporaryDirectory() as scratch:
        tmp = keep or scratch
        for case in cases:
            try:
                result = run_case(case, tmp, verbose)
            except Exception as e:  # noqa: BLE001 -- a case Keras itself refuses
                result = "keras: %s: %s" % (type(e).__name__, str(e).splitlines()[0][:150])
            print("%-28s %s" % (case.__name__, result), flush=True)


if __name__ == "__main__":
    main()
