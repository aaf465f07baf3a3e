#!/usr/bin/env python3
# Writes the Keras parity fixtures of tests/test_conv1d.c into tests/ref/conv1d/. Not run by
# `make test` (Keras is not a CI dependency); the fixtures are committed. To regenerate:
#   KERAS_BACKEND=jax /work/venv-keras/bin/python tests/ref/keras_conv1d.py
# (Keras 3.15.1 with JAX on the CPU). Each case is a sequential model given as (type, args)
# pairs: the script writes its tfc YAML (<case>.yaml), builds the same model in Keras, gives
# every variable deterministic values, and writes them under tfc's names (<layer>/<variable>,
# <case>.safetensors) with an input batch and Keras's output (<case>.io.safetensors: x, y).
import os
import numpy as np
import keras
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conv1d")

# (case, input shape, input dtype, layers); every layer named, so Keras's names are tfc's
CASES = [
    ("conv1d_valid_stride", [11, 3], "float32", [
        ("Conv1D", dict(name="c", filters=4, kernel_size=3, strides=2, activation="tanh"))]),
    ("conv1d_same", [10, 3], "float32", [
        ("Conv1D", dict(name="c", filters=5, kernel_size=4, strides=3, padding="same")),
        ("Conv1D", dict(name="c2", filters=2, kernel_size=2, dilation_rate=2, padding="same"))]),
    ("conv1d_causal_dilated", [12, 3], "float32", [
        ("Conv1D", dict(name="c", filters=4, kernel_size=3, dilation_rate=2, padding="causal",
                        activation="relu")),
        ("Conv1D", dict(name="c2", filters=3, kernel_size=2, strides=2, padding="causal"))]),
    ("conv1d_groups", [10, 6], "float32", [
        ("Conv1D", dict(name="c", filters=6, kernel_size=3, groups=3, dilation_rate=2,
                        padding="causal")),
        ("Conv1D", dict(name="c2", filters=4, kernel_size=2, groups=2, padding="same",
                        use_bias=False))]),
    ("pooling1d", [11, 3], "float32", [
        ("Conv1D", dict(name="c", filters=4, kernel_size=1)),
        ("MaxPooling1D", dict(name="mp", pool_size=3, strides=2, padding="same")),
        ("AveragePooling1D", dict(name="ap", pool_size=2, padding="same"))]),
    ("pooling1d_global", [11, 3], "float32", [
        ("AveragePooling1D", dict(name="ap", pool_size=3, strides=2, padding="same")),
        ("MaxPooling1D", dict(name="mp", pool_size=2)),
        ("GlobalMaxPooling1D", dict(name="g", keepdims=True))]),
    ("embedding_conv1d", [9], "int32", [
        ("Embedding", dict(name="e", input_dim=20, output_dim=6)),
        ("Conv1D", dict(name="c", filters=8, kernel_size=3, dilation_rate=2, padding="causal",
                        activation="relu")),
        ("GlobalMaxPooling1D", dict(name="g")),
        ("Dense", dict(name="d", units=3))]),
    ("embedding_masked_average", [9], "int32", [
        ("Embedding", dict(name="e", input_dim=20, output_dim=5, mask_zero=True)),
        ("Dense", dict(name="d", units=4, activation="tanh")),
        ("GlobalAveragePooling1D", dict(name="g")),
        ("Dense", dict(name="d2", units=3))]),
    # Conv1D drops the mask (Keras warns): the average then covers every step
    ("embedding_mask_conv_average", [9], "int32", [
        ("Embedding", dict(name="e", input_dim=20, output_dim=5, mask_zero=True)),
        ("Conv1D", dict(name="c", filters=4, kernel_size=3, padding="same")),
        ("GlobalAveragePooling1D", dict(name="g", keepdims=True))]),
    # GlobalMaxPooling1D ignores the mask (Keras 3): padding steps count
    ("embedding_mask_max", [9], "int32", [
        ("Embedding", dict(name="e", input_dim=20, output_dim=5, mask_zero=True)),
        ("GlobalMaxPooling1D", dict(name="g"))]),
]


def yaml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(yaml_value(x) for x in v) + "]"
    return str(v)


def to_yaml(shape, dtype, layers):
    lines = ["input: {shape: %s%s}" % (yaml_value(shape),
                                         ", dtype: int32" if dtype == "int32" else ""),
             "layers:"]
    for t, args in layers:
        lines.append("  - %s: {%s}" % (t, ", ".join("%s: %s" % (k, yaml_value(v))
                                                     for k, v in args.items())))
    return "\n".join(lines) + "\n"


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(39)
    for case, shape, dtype, layers in CASES:
        model = keras.Sequential([keras.Input(shape=shape, dtype=dtype)] +
                                 [getattr(keras.layers, t)(**a) for t, a in layers])
        weights = {}
        for layer in model.layers:
            for k, var in enumerate(layer.weights):
                n = int(np.prod(var.shape))
                v = (np.sin(np.arange(n) * 0.37 + 1.3 * k + len(layer.name)) * 0.6)
                v = v.reshape(var.shape).astype(np.float32)
                var.assign(v)
                weights["%s/%s" % (layer.name, var.name)] = v
        batch = 4
        if dtype == "int32":
            x = rng.integers(1, 20, size=[batch] + shape).astype(np.int32)
            for i in range(batch):  # trailing padding of 0, 2, 4, 6 steps
                x[i, shape[0] - 2 * i:] = 0
        else:
            x = rng.uniform(-1, 1, size=[batch] + shape).astype(np.float32)
        y = np.asarray(model(x)).astype(np.float32)
        with open(os.path.join(OUT, case + ".yaml"), "w") as f:
            f.write(to_yaml(shape, dtype, layers))
        save_file(weights, os.path.join(OUT, case + ".safetensors"))
        save_file({"x": x, "y": y}, os.path.join(OUT, case + ".io.safetensors"))
        print(case, "output", y.shape)


if __name__ == "__main__":
    main()
