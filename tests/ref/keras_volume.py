#!/usr/bin/env python3
# Writes the Keras parity fixtures of ZeroPadding3D, Cropping3D and UpSampling3D
# (tests/test_volume.c) into tests/ref/volume/, in keras_norm.py's format: one safetensors
# file per case holding its tfc YAML (metadata "yaml"), the input x (volumes: depth, height,
# width, channels), Keras 3's inference output y, MSE targets t, the gradients of the MSE
# loss with respect to x ("dx") and each weight ("grad:<path>"), and every weight under its
# Keras 3 variable path. Not run by `make test` (Keras is not a CI dependency). To
# regenerate (Keras 3.15.1 + JAX, CPU):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_volume.py
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras

from keras_group_norm import write_cases
from keras_merge import weights_and_input

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "volume")
L = keras.layers


def pad_crop():
    """Padding first (the input's gradient), each form of the amounts (pairs, an int among
    pairs, an int, three ints, the defaults) around a Dense over the channels."""
    x = keras.Input((3, 4, 3, 2))
    h = L.ZeroPadding3D(((1, 2), (0, 1), 2), name="p0")(x)
    h = L.Dense(3, activation="tanh", name="d")(h)
    h = L.Cropping3D(((2, 1), (1, 0), (0, 2)), name="c0")(h)
    h = L.ZeroPadding3D(1, name="p1")(h)
    h = L.Cropping3D((1, 2, 0), name="c1")(h)
    h = L.ZeroPadding3D(name="p2")(h)
    h = L.Cropping3D(name="c2")(h)
    h = L.Flatten(name="f")(h)
    y = L.Dense(3, name="out")(h)
    yaml = ("input: {shape: [3, 4, 3, 2]}\nlayers:\n"
            "  - ZeroPadding3D: {name: p0, padding: [[1, 2], [0, 1], 2]}\n"
            "  - Dense: {name: d, units: 3, activation: tanh}\n"
            "  - Cropping3D: {name: c0, cropping: [[2, 1], [1, 0], [0, 2]]}\n"
            "  - ZeroPadding3D: {name: p1, padding: 1}\n"
            "  - Cropping3D: {name: c1, cropping: [1, 2, 0]}\n"
            "  - ZeroPadding3D: {name: p2}\n"
            "  - Cropping3D: {name: c2}\n"
            "  - Flatten: {name: f}\n"
            "  - Dense: {name: out, units: 3}\n")
    return keras.Model(x, y), yaml, 0.0


def upsampling():
    """UpSampling3D first at its default (2, 2, 2), then (1, 2, 3) and (3, 1, 1) (only the
    depth) around a Dense."""
    x = keras.Input((2, 3, 2, 2))
    h = L.UpSampling3D(name="u0")(x)
    h = L.Dense(2, activation="tanh", name="d")(h)
    h = L.UpSampling3D((1, 2, 3), name="u1")(h)
    h = L.Cropping3D(((0, 0), (2, 3), (4, 5)), name="c")(h)
    h = L.UpSampling3D((3, 1, 1), name="u2")(h)
    h = L.Flatten(name="f")(h)
    y = L.Dense(3, name="out")(h)
    yaml = ("input: {shape: [2, 3, 2, 2]}\nlayers:\n"
            "  - UpSampling3D: {name: u0}\n"
            "  - Dense: {name: d, units: 2, activation: tanh}\n"
            "  - UpSampling3D: {name: u1, size: [1, 2, 3]}\n"
            "  - Cropping3D: {name: c, cropping: [[0, 0], [2, 3], [4, 5]]}\n"
            "  - UpSampling3D: {name: u2, size: [3, 1, 1]}\n"
            "  - Flatten: {name: f}\n"
            "  - Dense: {name: out, units: 3}\n")
    return keras.Model(x, y), yaml, 0.0


CASES = {"pad_crop": pad_crop, "upsampling": upsampling}

if __name__ == "__main__":
    write_cases(CASES, OUT, 45, weights_and_input)
