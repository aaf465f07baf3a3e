#!/usr/bin/env python3
# Writes the Keras parity fixtures of tests/test_varlen.c into tests/ref/varlen/: one
# safetensors file per case holding the inputs "x<T>" (int32 ids, right-padded to T) and
# Keras's outputs "y<T>" at each length T, every weight under tfc's name and the model's tfc
# YAML in the metadata ("yaml"). The Keras models take (None,) ids: any length. Not run by
# `make test` (Keras is not a CI dependency):
#   KERAS_BACKEND=jax /work/venv-keras/bin/python tests/ref/keras_varlen.py
# Keras 3.15.1 with JAX on the CPU; weights are seeded normals, so the files repeat.
import os
import zlib
import numpy as np
import keras
from keras import layers
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "varlen")


def ids(t):
    """four right-padded sequences of t steps: t, t - 3, t - 6 and 1 real tokens (at least 1)"""
    x = np.zeros((4, t), np.int32)
    for i, n in enumerate((t, max(t - 3, 1), max(t - 6, 1), 1)):
        x[i, :n] = 1 + (np.arange(n) * 7 + i * 5) % 8
    return x


def tfc_name(path):
    """bidirectional/forward_gru/gru_cell/kernel -> bidirectional/forward_gru/kernel"""
    return "/".join(p for p in path.split("/") if not p.endswith("_cell"))


def case(name, yaml, model, lengths=(5, 9, 17)):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    tensors = {}
    for v in model.weights:
        w = (0.5 * rng.standard_normal(v.shape)).astype(np.float32)
        v.assign(w)
        tensors[tfc_name(v.path)] = w
    for t in lengths:
        x = ids(t)
        tensors["x%d" % t] = x
        tensors["y%d" % t] = np.asarray(model(x, training=False)).astype(np.float32)
    save_file(tensors, os.path.join(OUT, name + ".safetensors"), metadata={"yaml": yaml})
    print(name, sorted(k for k in tensors if k[0] not in "xy"))


os.makedirs(OUT, exist_ok=True)
keras.utils.set_random_seed(1)

# Embedding(mask_zero) -> Bidirectional GRU over every step -> masked mean -> Dense
i = keras.Input((None,), dtype="int32")
h = layers.Embedding(9, 4, mask_zero=True, name="embedding")(i)
h = layers.Bidirectional(layers.GRU(5, return_sequences=True, name="gru"),
                         name="bidirectional")(h)
h = layers.GlobalAveragePooling1D(name="pool")(h)
h = layers.Dense(3, name="dense")(h)
case("bidir_gru_mean",
     "input: {shape: [null], dtype: int32, max_length: 17}\n"
     "layers:\n"
     "  - Embedding: {input_dim: 9, output_dim: 4, mask_zero: true}\n"
     "  - Bidirectional: {layer: {GRU: {units: 5, return_sequences: true}}}\n"
     "  - GlobalAveragePooling1D: {name: pool}\n"
     "  - Dense: {units: 3}\n",
     keras.Model(i, h))

# Concatenate along the steps of a masked and an unmasked sequence (Conv1D drops the mask):
# the joined mask [mask | ones] reaches the masked mean and the LSTM after it
i = keras.Input((None,), dtype="int32")
e = layers.Embedding(9, 3, mask_zero=True, name="e")(i)
c = layers.Conv1D(3, 2, padding="causal", name="c")(e)
j = layers.Concatenate(axis=1, name="join")([e, c])
a = layers.GlobalAveragePooling1D(name="mean")(j)
r = layers.LSTM(4, name="lstm")(j)
o = layers.Concatenate(name="out")([a, r])
case("concat_joins_masks",
     "input: {shape: [null], dtype: int32, max_length: 17}\n"
     "layers:\n"
     "  - Embedding: {name: e, input_dim: 9, output_dim: 3, mask_zero: true}\n"
     "  - Conv1D: {name: c, filters: 3, kernel_size: 2, padding: causal, inputs: e}\n"
     "  - Concatenate: {name: join, axis: 1, inputs: [e, c]}\n"
     "  - GlobalAveragePooling1D: {name: mean, inputs: join}\n"
     "  - LSTM: {name: lstm, units: 4, inputs: join}\n"
     "  - Concatenate: {name: out, inputs: [mean, lstm]}\n",
     keras.Model(i, o))

# Concatenate along the features: masked only if every input is (Keras's any over the
# concatenated [mask | ones] of each step). [e | c] (Conv1D unmasked) has no mask, so its mean
# takes every step; [e | g] (GRU keeps the mask) keeps it, so its mean is masked
i = keras.Input((None,), dtype="int32")
e = layers.Embedding(9, 3, mask_zero=True, name="e")(i)
c = layers.Conv1D(3, 2, padding="causal", name="c")(e)
g = layers.GRU(2, return_sequences=True, name="g")(e)
a = layers.GlobalAveragePooling1D(name="all")(layers.Concatenate(name="ec")([e, c]))
m = layers.GlobalAveragePooling1D(name="masked")(layers.Concatenate(name="eg")([e, g]))
o = layers.Concatenate(name="out")([a, m])
case("concat_features_mask",
     "input: {shape: [null], dtype: int32, max_length: 17}\n"
     "layers:\n"
     "  - Embedding: {name: e, input_dim: 9, output_dim: 3, mask_zero: true}\n"
     "  - Conv1D: {name: c, filters: 3, kernel_size: 2, padding: causal, inputs: e}\n"
     "  - GRU: {name: g, units: 2, return_sequences: true, inputs: e}\n"
     "  - Concatenate: {name: ec, inputs: [e, c]}\n"
     "  - GlobalAveragePooling1D: {name: all, inputs: ec}\n"
     "  - Concatenate: {name: eg, inputs: [e, g]}\n"
     "  - GlobalAveragePooling1D: {name: masked, inputs: eg}\n"
     "  - Concatenate: {name: out, inputs: [all, masked]}\n",
     keras.Model(i, o))
