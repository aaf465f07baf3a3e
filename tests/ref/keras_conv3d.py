#!/usr/bin/env python3
# Writes the Keras parity fixtures of Conv3D and the 3-D poolings (tests/test_conv3d.c) into
# tests/ref/conv3d/, in keras_group_norm.py's format (write_cases): one safetensors file per
# case holding its tfc YAML (metadata "yaml"), the input x, Keras 3's output y, MSE targets t,
# the loss's gradients with respect to x ("dx") and each weight ("grad:<path>"), and every
# weight under its Keras 3 variable path. Not run by `make test` (Keras is not a CI
# dependency). To regenerate (Keras 3.15.1 + JAX, CPU):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_conv3d.py
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from keras_group_norm import write_cases  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conv3d")
L = keras.layers
BATCH = 2


def yaml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(yaml_value(x) for x in v) + "]"
    return str(v)


def sequential(shape, layers):
    """A model of (type, args) layers on inputs of `shape`, and its tfc YAML."""
    x = keras.Input(shape)
    h = x
    for t, a in layers:
        h = getattr(L, t)(**a)(h)
    yaml = "input: {shape: %s}\nlayers:\n" % yaml_value(list(shape))
    for t, a in layers:
        yaml += "  - %s: {%s}\n" % (t, ", ".join("%s: %s" % (k, yaml_value(v))
                                               for k, v in a.items()))
    return keras.Model(x, h), yaml, None


def conv3d_valid():
    """Valid padding, a kernel of three sizes, a stride along the height, tanh."""
    return sequential((5, 6, 5, 3), [
        ("Conv3D", dict(name="c", filters=4, kernel_size=[2, 3, 2], strides=[1, 2, 1],
                        activation="tanh"))])


def conv3d_same():
    """Same padding at stride 2 (the extra plane after), then dilation 2 without a bias."""
    return sequential((5, 6, 5, 3), [
        ("Conv3D", dict(name="c", filters=4, kernel_size=3, strides=2, padding="same")),
        ("Conv3D", dict(name="c2", filters=3, kernel_size=2, dilation_rate=2, padding="same",
                        use_bias=False))])


def conv3d_groups():
    """Two groups, a stride of three sizes, same padding, then a valid 1x1x1 in 3 groups."""
    return sequential((5, 6, 5, 4), [
        ("Conv3D", dict(name="c", filters=6, kernel_size=[1, 2, 3], strides=[2, 1, 3],
                        groups=2, padding="same", activation="sigmoid")),
        ("Conv3D", dict(name="c2", filters=3, kernel_size=1, groups=3))])


def pooling3d():
    """Max pooling with same padding at strides of two sizes (windows overlapping, clipped at
    both ends: a padded plane before the volume too), then average pooling likewise (the
    padding left out of the count)."""
    return sequential((5, 6, 5, 3), [
        ("Conv3D", dict(name="c", filters=4, kernel_size=1)),
        ("MaxPooling3D", dict(name="mp", pool_size=[2, 3, 3], strides=[1, 1, 2],
                              padding="same")),
        ("AveragePooling3D", dict(name="ap", pool_size=[3, 2, 3], strides=[2, 2, 1],
                                  padding="same"))])


def pooling3d_valid():
    """The default pool_size (2) of MaxPooling3D, average pooling with strides below the
    window, valid padding."""
    return sequential((5, 6, 5, 3), [
        ("AveragePooling3D", dict(name="ap", pool_size=[3, 2, 2], strides=1)),
        ("MaxPooling3D", dict(name="mp"))])


def pooling3d_global():
    """The global poolings, with and without keepdims, after a convolution."""
    x = keras.Input((4, 5, 3, 3))
    h = L.Conv3D(4, 2, padding="same", name="c")(x)
    g1 = L.GlobalMaxPooling3D(name="gm", keepdims=True)(h)
    g2 = L.GlobalAveragePooling3D(name="ga")(h)
    y = L.Concatenate(name="cat")([L.Flatten(name="f")(g1), g2])
    yaml = ("input: {shape: [4, 5, 3, 3]}\nlayers:\n"
            "  - Conv3D: {name: c, filters: 4, kernel_size: 2, padding: same}\n"
            "  - GlobalMaxPooling3D: {name: gm, keepdims: true}\n"
            "  - GlobalAveragePooling3D: {name: ga, inputs: c}\n"
            "  - Flatten: {name: f, inputs: gm}\n"
            "  - Concatenate: {name: cat, inputs: [f, ga]}\n")
    return keras.Model(x, y), yaml, None


CASES = {"conv3d_valid": conv3d_valid, "conv3d_same": conv3d_same,
         "conv3d_groups": conv3d_groups, "pooling3d": pooling3d,
         "pooling3d_valid": pooling3d_valid, "pooling3d_global": pooling3d_global}


def draw(rng, model, arg):
    """Weights uniform in [-0.5, 0.5]; a uniform input batch in [-1, 1]."""
    for v in model.weights:
        v.assign(rng.uniform(-0.5, 0.5, v.shape).astype("float32"))
    shape = (BATCH,) + tuple(model.input_shape[1:])
    return rng.uniform(-1, 1, shape).astype("float32")


if __name__ == "__main__":
    write_cases(CASES, OUT, 43, draw)
