"""Keras 3 references for ZeroPadding1D, Cropping1D, UpSampling1D, RepeatVector and Identity
(tests/test_vision.c, parity_keras_sequence1d).

Run: KERAS_BACKEND=jax /work/venv-keras/bin/python tests/ref/keras_sequence1d.py
Writes tests/ref/sequence1d/<case>.safetensors through keras_vision.py's write_cases: the
weights under tfc's names, the input `x` [2, ...], Keras's inference output `y`, and the tfc
model YAML in the metadata (`yaml`).
"""
import os

import keras
from keras import layers as L

from keras_vision import write_cases

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sequence1d")


def unet1d():
    """A 1-D U-Net step: pad, convolve, pool, upsample, crop, join."""
    x = keras.Input((10, 3))
    h = L.ZeroPadding1D(2, name="p1")(x)
    h = L.Conv1D(4, 3, activation="relu", name="c1")(h)
    d = L.MaxPooling1D(2, name="pool")(h)
    u = L.UpSampling1D(2, name="up")(d)
    u = L.Cropping1D((1, 2), name="crop")(u)
    u = L.ZeroPadding1D((0, 1), name="p2")(u)
    h = L.Cropping1D(1, name="crop2")(h)
    y = L.Concatenate(name="cat")([h, u])
    y = L.Conv1D(2, 1, name="c2")(y)
    return x, y, """input: {shape: [10, 3]}
layers:
  - ZeroPadding1D: {name: p1, padding: 2}
  - Conv1D: {name: c1, filters: 4, kernel_size: 3, activation: relu}
  - MaxPooling1D: {name: pool, pool_size: 2}
  - UpSampling1D: {name: up, size: 2}
  - Cropping1D: {name: crop, cropping: [1, 2]}
  - ZeroPadding1D: {name: p2, padding: [0, 1]}
  - Cropping1D: {name: crop2, cropping: 1, inputs: c1}
  - Concatenate: {name: cat, inputs: [crop2, p2]}
  - Conv1D: {name: c2, filters: 2, kernel_size: 1}
"""


def repeat():
    """An LSTM autoencoder: the encoder's last state repeated for the decoder (RepeatVector),
    through an Identity."""
    x = keras.Input((5, 3))
    h = L.LSTM(4, name="enc")(x)
    h = L.RepeatVector(5, name="rep")(h)
    h = L.Identity(name="id")(h)
    h = L.LSTM(4, return_sequences=True, name="dec")(h)
    y = L.Dense(3, name="out")(h)
    return x, y, """input: {shape: [5, 3]}
layers:
  - LSTM: {name: enc, units: 4}
  - RepeatVector: {name: rep, n: 5}
  - Identity: {name: id}
  - LSTM: {name: dec, units: 4, return_sequences: true}
  - Dense: {name: out, units: 3}
"""


CASES = [unet1d, repeat]


def main():
    write_cases(CASES, OUT)


if __name__ == "__main__":
    main()
