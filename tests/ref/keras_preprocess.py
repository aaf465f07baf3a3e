#!/usr/bin/env python3
# Writes the Keras parity fixtures of Resizing, CenterCrop, RandomCrop and RandomBrightness (tests/
# test_preprocess.c) into tests/ref/preprocess/, in keras_group_norm.py's format: one
# safetensors file per case holding its tfc YAML (metadata "yaml"), the input x, Keras 3's
# inference output y, MSE targets t, the gradients of Keras's MSE loss (training mode) with
# respect to x ("dx") and each weight ("grad:<path>"), and every weight under its Keras 3
# variable path. RandomCrop: Keras 3.15's layer returns its input uncropped at inference
# (transform_images crops only in training, against its own output shape and docstring), so
# y is what its docstring says and tfc does, keras.ops.image.resize with
# crop_to_aspect_ratio; its training gradient only where the training crop is not random (an
# image not larger than the crop on both sides). Not run by `make test` (Keras is not a CI
# dependency). To regenerate (Keras 3.15.1 + JAX, CPU):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_preprocess.py
import json
import os

os.environ.setdefault("KERAS_BACKEND", "jax")
import jax
import jax.numpy as jnp
import keras
import numpy as np
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "preprocess")
L = keras.layers
BATCH = 2


def one(shape, layer, yaml_layer):
    """A model of one layer on an image of `shape`."""
    x = keras.Input(shape)
    yaml = "input: {shape: [%s]}\nlayers:\n  - %s\n" % (", ".join(map(str, shape)), yaml_layer)
    return keras.Model(x, layer(x)), yaml


CASES = {
    "rs_up": lambda: one((5, 7, 3), L.Resizing(8, 11, name="r"),
                         "Resizing: {name: r, height: 8, width: 11}"),
    "rs_down": lambda: one((9, 12, 2), L.Resizing(4, 5, name="r"),
                           "Resizing: {name: r, height: 4, width: 5}"),
    "rs_odd": lambda: one((7, 3, 2), L.Resizing(3, 7, name="r"),
                          "Resizing: {name: r, height: 3, width: 7}"),
    "rs_axis": lambda: one((6, 5, 2), L.Resizing(6, 8, name="r"),
                           "Resizing: {name: r, height: 6, width: 8}"),
    "rs_nearest": lambda: one((6, 9, 2), L.Resizing(10, 4, interpolation="nearest", name="r"),
                              "Resizing: {name: r, height: 10, width: 4, "
                              "interpolation: nearest}"),
    "rs_nearest_down": lambda: one((13, 7, 1),
                                   L.Resizing(5, 3, interpolation="nearest", name="r"),
                                   "Resizing: {name: r, height: 5, width: 3, "
                                   "interpolation: nearest}"),
    "rs_crop": lambda: one((6, 10, 2), L.Resizing(5, 4, crop_to_aspect_ratio=True, name="r"),
                           "Resizing: {name: r, height: 5, width: 4, "
                           "crop_to_aspect_ratio: true}"),
    "rs_crop_rows": lambda: one((11, 4, 2),
                                L.Resizing(3, 5, crop_to_aspect_ratio=True, name="r"),
                                "Resizing: {name: r, height: 3, width: 5, "
                                "crop_to_aspect_ratio: true}"),
    "rs_pad_cols": lambda: one((8, 5, 2),
                               L.Resizing(6, 6, pad_to_aspect_ratio=True, fill_value=0.5,
                                          name="r"),
                               "Resizing: {name: r, height: 6, width: 6, "
                               "pad_to_aspect_ratio: true, fill_value: 0.5}"),
    "rs_pad_rows": lambda: one((4, 9, 2),
                               L.Resizing(7, 6, pad_to_aspect_ratio=True, fill_value=-2.0,
                                          name="r"),
                               "Resizing: {name: r, height: 7, width: 6, "
                               "pad_to_aspect_ratio: true, fill_value: -2.0}"),
    "rs_pad_nearest": lambda: one((5, 8, 1),
                                  L.Resizing(9, 9, pad_to_aspect_ratio=True,
                                             interpolation="nearest", name="r"),
                                  "Resizing: {name: r, height: 9, width: 9, "
                                  "pad_to_aspect_ratio: true, interpolation: nearest}"),
    "rs_antialias_up": lambda: one((5, 4, 2), L.Resizing(7, 9, antialias=True, name="r"),
                                   "Resizing: {name: r, height: 7, width: 9, "
                                   "antialias: true}"),
    "cc_crop": lambda: one((7, 9, 2), L.CenterCrop(4, 5, name="c"),
                           "CenterCrop: {name: c, height: 4, width: 5}"),
    "cc_small": lambda: one((5, 6, 2), L.CenterCrop(8, 4, name="c"),
                            "CenterCrop: {name: c, height: 8, width: 4}"),
    "cc_same": lambda: one((4, 6, 1), L.CenterCrop(4, 6, name="c"),
                           "CenterCrop: {name: c, height: 4, width: 6}"),
    "rc_infer": lambda: one((8, 10, 2), L.RandomCrop(4, 6, seed=3, name="c"),
                            "RandomCrop: {name: c, height: 4, width: 6, seed: 3}"),
    "rc_small": lambda: one((5, 7, 2), L.RandomCrop(6, 4, name="c"),
                            "RandomCrop: {name: c, height: 6, width: 4}"),
    "rc_equal_rows": lambda: one((6, 9, 1), L.RandomCrop(6, 4, name="c"),
                                 "RandomCrop: {name: c, height: 6, width: 4}"),
}


def mid():
    """Resizing between two convolutions: its gradient inside a graph."""
    x = keras.Input((6, 7, 2))
    h = L.Conv2D(3, 3, padding="same", name="conv0")(x)
    h = L.Resizing(9, 5, name="r")(h)
    y = L.Conv2D(2, 3, name="conv1")(h)
    yaml = ("input: {shape: [6, 7, 2]}\nlayers:\n"
            "  - Conv2D: {name: conv0, filters: 3, kernel_size: 3, padding: same}\n"
            "  - Resizing: {name: r, height: 9, width: 5}\n"
            "  - Conv2D: {name: conv1, filters: 2, kernel_size: 3}\n")
    return keras.Model(x, y), yaml


CASES["rs_mid"] = mid
# RandomBrightness with a factor range of one value: its delta is fixed, so Keras's training
# gradient (dy where the clip passes) is deterministic; its inference output is x
CASES["rb_fixed"] = lambda: one((4, 5, 3), L.RandomBrightness((0.25, 0.25), value_range=(-1, 1),
                                                              name="b"),
                                "RandomBrightness: {name: b, factor: [0.25, 0.25], "
                                "value_range: [-1, 1]}")
CASES["rb_neg"] = lambda: one((3, 4, 2), L.RandomBrightness((-0.1, -0.1), value_range=(2, -2),
                                                            name="b"),
                              "RandomBrightness: {name: b, factor: [-0.1, -0.1], "
                              "value_range: [2, -2]}")
# RandomCrop's training crop is random (no gradient to compare) unless the image is not
# larger than the crop on both sides
UNTRAINED = {"rc_infer"}


def inference(name, model, x):
    """Keras's inference output; RandomCrop's as its docstring says (see the header)."""
    layer = model.layers[-1]
    if isinstance(layer, L.RandomCrop):
        return np.asarray(keras.ops.image.resize(x, (layer.height, layer.width),
                                                 crop_to_aspect_ratio=True))
    return np.asarray(model(x, training=False))


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(29)
    for name, make in CASES.items():
        model, yaml = make()
        for v in model.weights:
            v.assign(rng.uniform(-0.5, 0.5, v.shape).astype("float32"))
        x = rng.normal(size=(BATCH,) + tuple(model.input_shape[1:])).astype("float32")
        y = inference(name, model, x)
        t = rng.uniform(-1, 1, y.shape).astype("float32")
        tensors = {"x": x, "y": y, "t": t}
        for v in model.weights:
            tensors[v.path] = np.asarray(v.value)
        if name not in UNTRAINED:
            tv = [v.value for v in model.trainable_variables]
            ntv = [v.value for v in model.non_trainable_variables]

            def loss(tv, xin):
                pred, _ = model.stateless_call(tv, ntv, xin, training=True)
                return jnp.mean(jnp.mean(jnp.square(pred - t), axis=-1))

            gw, gx = jax.grad(loss, argnums=(0, 1))(tv, jnp.asarray(x))
            tensors["dx"] = np.asarray(gx)
            for v, g in zip(model.trainable_variables, gw):
                tensors["grad:" + v.path] = np.asarray(g)
        meta = {"yaml": yaml + "loss: mse\n", "keras": keras.__version__,
                "backend": keras.backend.backend()}
        save_file(tensors, os.path.join(OUT, name + ".safetensors"), metadata=meta)
        print(name, json.dumps({k: list(v.shape) for k, v in tensors.items()}))


if __name__ == "__main__":
    main()
