"""Keras 3 references for RandAugment (tests/test_rand_augment.c, parity_keras).

Run: KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_rand_augment.py
Each case is keras.layers.RandAugment with its operations' picks given (Keras's own
transform_images with layer_idxes set) and a factor [f, f] that fixes every draw of the
operations picked: the translation, rotation, brightness, colour degeneration and sharpness
([f, f]), the posterization (f = 0.2: max(1, int(1.6)) = 1 bit), the solarization (f = 0: an
addition and a threshold 0, so 255 - x) and the tone layers (no draw). RandomShear's sign is
drawn per image: its case has both outputs, y_<case>_pos and y_<case>_neg. RandomContrast's
factor is drawn in [1 - f, 1 + f], never fixed unless trivially (test_rand_augment checks it
against tfc's RandomContrast instead). Metadata: yaml_<case> (the tfc layer), picks_<case>.
The inputs' seed is one where no Equalization lookup table meets an exact tie: Keras on
JAX's CPU rounds a table value (k * 255) / den of exactly .5 (seed 7: 41 * 255 / 82 = 127.5)
as if the division were inexact, where tfc's float32 division is exact and rounds half to
even (its Equalization's, not RandAugment's). Writes
tests/ref/rand_augment/rand_augment.safetensors.
"""
import os

import numpy as np
import keras
from keras import layers as L
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rand_augment")

# name, factor, picks, interpolation, value_range
CASES = [
    ("translation", 0.3, [1], "bilinear", (0, 255)),
    ("rotation", 0.3, [2], "bilinear", (0, 255)),
    ("rotation_nearest", 0.3, [2], "nearest", (0, 255)),
    ("brightness", 0.3, [3], "bilinear", (0, 255)),
    ("degeneration", 0.3, [4], "bilinear", (0, 255)),
    ("sharpness", 0.3, [6], "bilinear", (0, 255)),
    ("posterization", 0.2, [7], "bilinear", (0, 255)),
    ("solarization", 0.0, [8], "bilinear", (0, 255)),
    ("auto_contrast", 0.3, [9], "bilinear", (0, 255)),
    ("equalization", 0.3, [10], "bilinear", (0, 255)),
    ("rotation_equalization", 0.3, [2, 10], "bilinear", (0, 255)),
    ("brightness_twice", 0.3, [3, 3], "bilinear", (0, 255)),
    ("auto_contrast_translation", 0.3, [9, 1], "nearest", (0, 255)),
    ("unit_degeneration_sharpness", 0.25, [4, 6, 9], "bilinear", (-1, 1)),
]


def transformation(layer, x, picks, shear_sign=0):
    transforms = {}
    for name in layer._AUGMENT_LAYERS:
        t = getattr(layer, name).get_random_transformation(x, training=True)
        if name == "random_shear" and shear_sign:
            t = dict(t, shear_factor=shear_sign * np.abs(np.asarray(t["shear_factor"])))
        transforms[name] = t
    return {"transforms": transforms, "layer_idxes": np.asarray(picks, dtype=np.int32)}


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(8)
    x255 = rng.uniform(0, 255, (2, 6, 7, 3)).astype(np.float32)
    x1 = rng.uniform(-1, 1, (2, 6, 7, 3)).astype(np.float32)
    tensors, meta = {"x255": x255, "x1": x1}, {}
    for name, f, picks, interp, vr in CASES:
        x = x1 if vr == (-1, 1) else x255
        layer = L.RandAugment(value_range=vr, num_ops=len(picks), factor=(f, f),
                              interpolation=interp)
        y = layer.transform_images(x, transformation(layer, x, picks), training=True)
        tensors["y_" + name] = np.asarray(y, dtype=np.float32)
        meta["yaml_" + name] = (f"RandAugment: {{value_range: [{vr[0]}, {vr[1]}], "
                                f"num_ops: {len(picks)}, factor: [{f}, {f}], "
                                f"interpolation: {interp}}}")
        meta["picks_" + name] = " ".join(str(p) for p in picks)
        meta["x_" + name] = "x1" if x is x1 else "x255"
    layer = L.RandAugment(num_ops=1, factor=(0.2, 0.2))
    for sign, tag in ((1, "pos"), (-1, "neg")):
        y = layer.transform_images(x255, transformation(layer, x255, [0], sign), training=True)
        tensors["y_shear_" + tag] = np.asarray(y, dtype=np.float32)
    meta["yaml_shear"] = "RandAugment: {num_ops: 1, factor: [0.2, 0.2]}"
    meta["picks_shear"] = "0"
    meta["x_shear"] = "x255"
    # inference: the identity (the default layer, called with training=False)
    tensors["y_inference"] = np.asarray(L.RandAugment()(x255, training=False),
                                        dtype=np.float32)
    save_file(tensors, os.path.join(OUT, "rand_augment.safetensors"), metadata=meta)
    print(f"{len(CASES) + 1} cases, keras {keras.__version__}")


if __name__ == "__main__":
    main()
