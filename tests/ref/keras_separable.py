"""Keras 3 references for SeparableConv2D (tests/test_vision.c, parity_keras_separable).

Run: KERAS_BACKEND=jax /work/venv-keras/bin/python tests/ref/keras_separable.py
Writes tests/ref/separable/<case>.safetensors for each case below through keras_vision.py:
the weights under tfc's names (`<layer>/<variable>`), the input `x` [2, ...], Keras's
inference output `y`, and the tfc model YAML in the metadata (`yaml`). Weights are uniform
in [-0.5, 0.5) from a fixed seed, inputs uniform in [-1, 1).
"""
import os

import keras
from keras import layers as L

from keras_vision import write_cases

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "separable")


def same_stride2_multiplier2():
    x = keras.Input((7, 8, 3))
    y = L.SeparableConv2D(4, 3, strides=2, padding="same", depth_multiplier=2,
                          activation="relu6", name="sep")(x)
    return x, y, """input: {shape: [7, 8, 3]}
layers:
  - SeparableConv2D: {name: sep, filters: 4, kernel_size: 3, strides: 2, padding: same, depth_multiplier: 2, activation: relu6}
"""


def valid_dilated_nobias():
    x = keras.Input((9, 7, 4))
    y = L.SeparableConv2D(3, (2, 3), dilation_rate=(2, 1), depth_multiplier=2,
                          use_bias=False, name="sep")(x)
    return x, y, """input: {shape: [9, 7, 4]}
layers:
  - SeparableConv2D: {name: sep, filters: 3, kernel_size: [2, 3], dilation_rate: [2, 1], depth_multiplier: 2, use_bias: false}
"""


def stacked_strided_dilated():
    x = keras.Input((10, 9, 2))
    h = L.SeparableConv2D(5, 3, strides=(1, 2), dilation_rate=(2, 1), padding="same",
                          activation="tanh", name="s1")(x)
    y = L.SeparableConv2D(2, 2, strides=2, depth_multiplier=3, name="s2")(h)
    return x, y, """input: {shape: [10, 9, 2]}
layers:
  - SeparableConv2D: {name: s1, filters: 5, kernel_size: 3, strides: [1, 2], dilation_rate: [2, 1], padding: same, activation: tanh}
  - SeparableConv2D: {name: s2, filters: 2, kernel_size: 2, strides: 2, depth_multiplier: 3}
"""


CASES = [same_stride2_multiplier2, valid_dilated_nobias, stacked_strided_dilated]


if __name__ == "__main__":
    write_cases(CASES, OUT)
