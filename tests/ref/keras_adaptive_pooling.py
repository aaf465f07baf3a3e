#!/usr/bin/env python3
# Writes the Keras parity fixtures of AdaptiveAveragePooling1D/2D/3D and
# AdaptiveMaxPooling1D/2D/3D (tests/test_adaptive_pooling.c) into tests/ref/adaptive_pooling/,
# in keras_group_norm.py's format (write_cases): one safetensors file per case holding its
# tfc YAML (metadata "yaml"), the input x, Keras 3's output y, MSE targets t, the loss's
# gradients with respect to x ("dx") and each weight ("grad:<path>"), and every weight under
# its Keras 3 variable path. The cases pool axes whose sizes are and are not multiples of the
# output's (overlapping bins), outputs larger than the input (repeated cells), integer and
# list output_size; the cases without weights (ties*, adaptive2d_even) draw inputs from
# {0, 0.5, 1}, so that many cells of a bin share its max and the input's gradient shows which
# one JAX's gradient picks. Not run by
# `make test` (Keras is not a CI dependency). To regenerate (Keras 3.15.1 + JAX, CPU):
#   KERAS_BACKEND=jax /tmp/kvenv/bin/python tests/ref/keras_adaptive_pooling.py
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from keras_group_norm import write_cases  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "adaptive_pooling")
L = keras.layers
BATCH = 2


def yaml_value(v):
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(yaml_value(x) for x in v) + "]"
    return str(v)


def branches(shape, pre, pools):
    """The input (through the layer `pre`, (type, args) or None) into each of the poolings
    `pools` ((type, args) with a name), each flattened, then concatenated; and its tfc YAML."""
    x = keras.Input(shape)
    h = x
    yaml = "input: {shape: %s}\nlayers:\n" % yaml_value(list(shape))
    src = "input"
    if pre:
        h = getattr(L, pre[0])(**pre[1])(h)
        yaml += "  - %s: {%s}\n" % (pre[0], ", ".join("%s: %s" % (k, yaml_value(v))
                                                      for k, v in pre[1].items()))
        src = pre[1]["name"]
    flats = []
    for t, a in pools:
        p = getattr(L, t)(**a)(h)
        flats.append(L.Flatten(name="f_" + a["name"])(p))
        yaml += "  - %s: {%s, inputs: %s}\n" % (t, ", ".join("%s: %s" % (k, yaml_value(v))
                                                             for k, v in a.items()), src)
        yaml += "  - Flatten: {name: f_%s}\n" % a["name"]
    y = L.Concatenate(name="cat")(flats) if len(flats) > 1 else flats[0]
    if len(flats) > 1:
        yaml += "  - Concatenate: {name: cat, inputs: [%s]}\n" % ", ".join(
            "f_" + a["name"] for _, a in pools)
    return keras.Model(x, y), yaml, None


def adaptive1d():
    """Steps 7 to 3 (bins of 3 overlapping), to 10 (cells repeated), to [4] (a list), after a
    Conv1D."""
    return branches((7, 3), ("Conv1D", dict(name="c", filters=4, kernel_size=1)), [
        ("AdaptiveAveragePooling1D", dict(name="a3", output_size=3)),
        ("AdaptiveMaxPooling1D", dict(name="m10", output_size=10)),
        ("AdaptiveMaxPooling1D", dict(name="m4", output_size=[4])),
        ("AdaptiveAveragePooling1D", dict(name="a10", output_size=10,
                                          data_format="channels_last"))])


def adaptive2d():
    """7x5 images to 4x4 (both axes overlapping), [3, 2], [9, 2] and [2, 7] (more rows or
    columns than the input's), after a Conv2D."""
    return branches((7, 5, 3), ("Conv2D", dict(name="c", filters=3, kernel_size=1)), [
        ("AdaptiveMaxPooling2D", dict(name="m4", output_size=4)),
        ("AdaptiveAveragePooling2D", dict(name="a32", output_size=[3, 2])),
        ("AdaptiveMaxPooling2D", dict(name="m92", output_size=[9, 2])),
        ("AdaptiveAveragePooling2D", dict(name="a27", output_size=[2, 7]))])


def adaptive2d_even():
    """6x4 images to [3, 2] and 2: every bin the same size (ONNX's MaxPool, AveragePool)."""
    return branches((6, 4, 2), None, [
        ("AdaptiveAveragePooling2D", dict(name="a", output_size=[3, 2])),
        ("AdaptiveMaxPooling2D", dict(name="m", output_size=2))])


def adaptive3d():
    """5x4x6 volumes to [2, 3, 4], 3 and [7, 2, 4], after a Conv3D."""
    return branches((5, 4, 6, 2), ("Conv3D", dict(name="c", filters=2, kernel_size=1)), [
        ("AdaptiveAveragePooling3D", dict(name="a", output_size=[2, 3, 4])),
        ("AdaptiveMaxPooling3D", dict(name="m3", output_size=3)),
        ("AdaptiveMaxPooling3D", dict(name="m7", output_size=[7, 2, 4])),
        ("AdaptiveAveragePooling3D", dict(name="a1", output_size=1))])


def ties1d():
    return branches((8, 2), None, [
        ("AdaptiveMaxPooling1D", dict(name="m", output_size=3)),
        ("AdaptiveMaxPooling1D", dict(name="m11", output_size=11))])


def ties2d():
    return branches((5, 4, 2), None, [
        ("AdaptiveMaxPooling2D", dict(name="m", output_size=[3, 2])),
        ("AdaptiveMaxPooling2D", dict(name="m1", output_size=1))])


def ties3d():
    return branches((3, 4, 5, 2), None, [
        ("AdaptiveMaxPooling3D", dict(name="m", output_size=[2, 2, 3])),
        ("AdaptiveMaxPooling3D", dict(name="m1", output_size=1))])


CASES = {"adaptive1d": adaptive1d, "adaptive2d": adaptive2d,
         "adaptive2d_even": adaptive2d_even, "adaptive3d": adaptive3d,
         "ties1d": ties1d, "ties2d": ties2d, "ties3d": ties3d}


def draw(rng, model, arg):
    """Weights uniform in [-0.5, 0.5]; a uniform input batch in [-1, 1], or (a case without
    weights) one of {0, 0.5, 1}."""
    for v in model.weights:
        v.assign(rng.uniform(-0.5, 0.5, v.shape).astype("float32"))
    shape = (BATCH,) + tuple(model.input_shape[1:])
    if not model.weights:
        return (rng.integers(0, 3, shape) / 2).astype("float32")
    return rng.uniform(-1, 1, shape).astype("float32")


if __name__ == "__main__":
    write_cases(CASES, OUT, 47, draw)
