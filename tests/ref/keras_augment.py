"""Keras 3 references for the augmentation layers (tests/test_augment.c, parity_keras).

Run: KERAS_BACKEND=jax /work/venv-keras/bin/python tests/ref/keras_augment.py
Each case is one Keras layer whose random range is a single point (a factor [p, p]), so its
transform is fixed; called with training=True on the input `x` [2, 4, 5, 2] (uniform in
[0, 1)), its output is `y_<case>`, and the tfc layer's YAML is the metadata `yaml_<case>`.
Every fill_mode and interpolation of RandomTranslation, RandomRotation and RandomZoom, and
RandomContrast with clipping. Writes tests/ref/augment/augment.safetensors.
"""
import os

import numpy as np
import keras
from keras import layers as L
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "augment")
FILLS = ["reflect", "wrap", "constant", "nearest"]
INTERPOLATIONS = ["nearest", "bilinear"]


def cases():
    for fill in FILLS:
        for interp in INTERPOLATIONS:
            common = dict(fill_mode=fill, interpolation=interp, fill_value=0.25)
            args = f"fill_mode: {fill}, interpolation: {interp}, fill_value: 0.25"
            yield (f"translation_{fill}_{interp}",
                   L.RandomTranslation((0.23, 0.23), (-0.31, -0.31), **common),
                   f"RandomTranslation: {{height_factor: [0.23, 0.23], "
                   f"width_factor: [-0.31, -0.31], {args}}}")
            yield (f"rotation_{fill}_{interp}", L.RandomRotation((0.07, 0.07), **common),
                   f"RandomRotation: {{factor: [0.07, 0.07], {args}}}")
            yield (f"zoom_{fill}_{interp}", L.RandomZoom((0.9, 0.9), (-0.3, -0.3), **common),
                   f"RandomZoom: {{height_factor: [0.9, 0.9], width_factor: [-0.3, -0.3], "
                   f"{args}}}")
    yield ("rotation_negative", L.RandomRotation((-0.3, -0.3)),
           "RandomRotation: {factor: [-0.3, -0.3]}")
    yield ("zoom_same", L.RandomZoom((-0.4, -0.4)), "RandomZoom: {height_factor: [-0.4, -0.4]}")
    yield ("contrast_clip", L.RandomContrast((-0.6, 0.6), value_range=(0.2, 0.8)),
           "RandomContrast: {factor: [-0.6, 0.6], value_range: [0.2, 0.8]}")
    yield ("contrast_default", L.RandomContrast((-0.3, 0.3)),
           "RandomContrast: {factor: [-0.3, 0.3]}")


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(42)
    x = rng.uniform(0, 1, (2, 4, 5, 2)).astype(np.float32)
    tensors, meta = {"x": x}, {}
    for name, layer, yaml in cases():
        tensors["y_" + name] = np.asarray(layer(x, training=True), dtype=np.float32)
        meta["yaml_" + name] = f"input: {{shape: [4, 5, 2]}}\nlayers:\n  - {yaml}\n"
    save_file(tensors, os.path.join(OUT, "augment.safetensors"), metadata=meta)
    print(f"{len(meta)} cases")


if __name__ == "__main__":
    main()
