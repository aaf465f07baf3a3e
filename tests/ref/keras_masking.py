#!/usr/bin/env python3
# Writes the Keras parity fixtures of tests/test_masking.c into tests/ref/masking/: one
# safetensors file per case holding the inputs "x<T>" (float32 [4, T, 3] feature sequences,
# right-padded to T with the mask value, one step inside the first sequence set to it too) and
# Keras's outputs "y<T>" at each length T, every weight under tfc's name and the model's tfc
# YAML in the metadata ("yaml"). The Keras models take (None, 3): any length. Not run by
# `make test` (Keras is not a CI dependency):
#   KERAS_BACKEND=jax /work/venv-keras/bin/python tests/ref/keras_masking.py
# Keras 3.15.1 with JAX on the CPU; weights and inputs are seeded, so the files repeat.
import os
import zlib
import numpy as np
import keras
from keras import layers
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "masking")
F = 3


def features(t, value):
    """four sequences of t steps: t, t - 3, t - 6 and 1 real steps (at least 1), the rest
    `value`; step 2 of the first is `value` too (a masked step between real ones)"""
    x = np.full((4, t, F), value, np.float32)
    for i, n in enumerate((t, max(t - 3, 1), max(t - 6, 1), 1)):
        s = np.arange(n)[:, None] * 0.7 + i * 1.3 + np.arange(F)[None, :]
        x[i, :n] = np.sin(s)
    x[0, 2] = value
    return x


def tfc_name(path):
    """bidirectional/forward_gru/gru_cell/kernel -> bidirectional/forward_gru/kernel"""
    return "/".join(p for p in path.split("/") if not p.endswith("_cell"))


def case(name, yaml, model, value=0.0, lengths=(5, 9, 17)):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    tensors = {}
    for v in model.weights:
        w = (0.5 * rng.standard_normal(v.shape)).astype(np.float32)
        v.assign(w)
        tensors[tfc_name(v.path)] = w
    for t in lengths:
        x = features(t, value)
        tensors["x%d" % t] = x
        tensors["y%d" % t] = np.asarray(model(x, training=False)).astype(np.float32)
    save_file(tensors, os.path.join(OUT, name + ".safetensors"), metadata={"yaml": yaml})
    print(name, sorted(k for k in tensors if k[0] not in "xy"))


os.makedirs(OUT, exist_ok=True)
keras.utils.set_random_seed(1)

# Masking -> LSTM (last output) -> Dense
i = keras.Input((None, F))
h = layers.Masking(name="masking")(i)
h = layers.LSTM(4, name="lstm")(h)
h = layers.Dense(3, name="dense")(h)
case("lstm_last",
     "input: {shape: [null, 3], max_length: 17}\n"
     "layers:\n"
     "  - Masking: {}\n"
     "  - LSTM: {units: 4}\n"
     "  - Dense: {units: 3}\n",
     keras.Model(i, h))

# Masking(0.5) -> Bidirectional GRU over every step -> masked mean -> Dense
i = keras.Input((None, F))
h = layers.Masking(mask_value=0.5, name="masking")(i)
h = layers.Bidirectional(layers.GRU(4, return_sequences=True, name="gru"),
                         name="bidirectional")(h)
h = layers.GlobalAveragePooling1D(name="pool")(h)
h = layers.Dense(3, name="dense")(h)
case("bidir_gru_mean",
     "input: {shape: [null, 3], max_length: 17}\n"
     "layers:\n"
     "  - Masking: {mask_value: 0.5}\n"
     "  - Bidirectional: {layer: {GRU: {units: 4, return_sequences: true}}}\n"
     "  - GlobalAveragePooling1D: {name: pool}\n"
     "  - Dense: {units: 3}\n",
     keras.Model(i, h), value=0.5)

# Masking -> GRU's sequence (a masked step repeats the last real output)
i = keras.Input((None, F))
h = layers.Masking(name="masking")(i)
h = layers.GRU(2, return_sequences=True, name="gru")(h)
case("gru_sequence",
     "input: {shape: [null, 3], max_length: 17}\n"
     "layers:\n"
     "  - Masking: {}\n"
     "  - GRU: {units: 2, return_sequences: true}\n",
     keras.Model(i, h))

# Masking -> self-attention (the mask on the queries and the keys) -> masked mean -> Dense
i = keras.Input((None, F))
m = layers.Masking(name="masking")(i)
h = layers.MultiHeadAttention(2, 2, name="mha")(m, m)
h = layers.GlobalAveragePooling1D(name="pool")(h)
h = layers.Dense(3, name="dense")(h)
case("attention_mean",
     "input: {shape: [null, 3], max_length: 17}\n"
     "layers:\n"
     "  - Masking: {name: masking}\n"
     "  - MultiHeadAttention: {name: mha, num_heads: 2, key_dim: 2, inputs: [masking, masking]}\n"
     "  - GlobalAveragePooling1D: {name: pool}\n"
     "  - Dense: {units: 3}\n",
     keras.Model(i, h))

# Masking(0.5) alone: real steps unchanged, masked ones zero
i = keras.Input((None, F))
h = layers.Masking(mask_value=0.5, name="masking")(i)
case("alone",
     "input: {shape: [null, 3], max_length: 17}\n"
     "layers:\n"
     "  - Masking: {mask_value: 0.5}\n",
     keras.Model(i, h), value=0.5)
